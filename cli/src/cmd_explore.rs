//! `autoclust explore` (docs/contract.md §4): every outcome a graph may produce
//! under the seeds' semantics (autoclust-semantics, docs/semantics.md), and
//! the options it shares with `autoclust verify`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use autoclust_graph::{Graph, Tensor};
use autoclust_passes::cluster::{ClusterConfig, DEFAULT_MIN_CLUSTER_SIZE};
use autoclust_runtime::tensor_io;
use autoclust_semantics::{
    autoclusterer, explore_graph, ClusterFn, ClusterSpec, Exploration, Inputs, Limits, Outcome, Query, Rmw,
};

use crate::io::{load_graph, Format};
use crate::model::{
    is_saved_model, load_model, no_signature_without_model, only_input, read_feed_file, read_vars, ModelContext,
};
use crate::CliError;

/// Inputs, fetches and model options shared by `explore` and `verify`.
#[derive(clap::Args)]
pub struct Common {
    /// Placeholder values: safetensors or .npz (tensors named after the placeholders, or the
    /// signature's inputs), or .npy (the one input).
    #[arg(long, value_name = "F")]
    pub feeds: Option<PathBuf>,
    /// Initial variable values: safetensors (tensors named after the variables) or a
    /// TensorFlow checkpoint prefix.
    #[arg(long, value_name = "F")]
    pub vars: Option<PathBuf>,
    /// The SavedModel signature to explore (default serving_default): feeds keyed by its input
    /// names, fetches by its output keys (all of them by default), variables from the model's
    /// checkpoint.
    #[arg(long, value_name = "NAME")]
    pub signature: Option<String>,
    /// A small placeholder value: NAME=JSON (a number or nested lists).
    #[arg(long = "feed", value_name = "NAME=JSON")]
    pub feed: Vec<String>,
    /// A small initial variable value: NAME=JSON (typed by its VarHandleOp).
    #[arg(long = "var", value_name = "NAME=JSON")]
    pub var: Vec<String>,
    /// Outputs to fetch, `node` or `node:port`.
    #[arg(long, value_delimiter = ',', value_name = "T,..")]
    pub fetch: Vec<String>,
    /// Nodes to run without fetching.
    #[arg(long, value_delimiter = ',', value_name = "N,..")]
    pub target: Vec<String>,
    /// Nodes to run once, in order, before the explored step (a TensorFlow 1 program's
    /// variable and table initialisers: `init`, `init_all_tables`), comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "N,..")]
    pub init: Vec<String>,
    /// Each read-modify-write op is one atomic step (as the plain executor runs it).
    #[arg(long)]
    pub atomic_rmw: bool,
    /// Give up (with an error) after this many states.
    #[arg(long, default_value_t = 1_000_000, value_name = "N")]
    pub max_states: usize,
    /// Unroll each TensorFlow 1 loop to this many iterations (its operation instances); a
    /// loop that would run longer is an error naming its frame.
    #[arg(long, default_value_t = autoclust_semantics::DEFAULT_MAX_ITERATIONS as u32, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_iterations: u32,
    /// Minimum cluster size for the clustered program.
    #[arg(long, default_value_t = DEFAULT_MIN_CLUSTER_SIZE, value_name = "N")]
    pub min_cluster_size: usize,
    /// Check this clustering instead of autoclust's own (`verify`, `explore --clustered`): a file
    /// in `cluster --json`'s form, `{"clusters": [{"name": .., "nodes": [NAME, ..]}, ..]}` — a
    /// hand-made clustering, another tool's, TensorFlow's XLA clusters. Nodes the fetches and
    /// targets do not need are dropped from it.
    #[arg(long, value_name = "FILE")]
    pub clusters: Option<PathBuf>,
    /// Input format (default: from the extension).
    #[arg(long, value_enum)]
    pub format: Option<Format>,
}

/// A graph as `explore`/`verify` see it, with the SavedModel it came from.
pub struct Loaded {
    pub graph: Graph,
    pub model: Option<ModelContext>,
}

/// The graph with `hoist-loop-reads` applied (unchanged when it has no such loop).
fn hoist_loop_reads(graph: Graph, path: &Path) -> Result<Graph, CliError> {
    use autoclust_passes::pass::Pass;
    if !graph.nodes().iter().any(|n| matches!(n.op.as_str(), "While" | "StatelessWhile")) {
        return Ok(graph);
    }
    autoclust_passes::hoist_loop_reads::HoistLoopReadsPass
        .run(graph, &autoclust_passes::pass::PassContext::default())
        .map_err(|e| CliError::input(format!("{}: {e}", path.display())))
}

impl Common {
    /// Reads the graph, its function calls inlined (as `run` does), so the model sees the
    /// variable accesses of the functions it calls. A SavedModel's signature is picked
    /// (`--signature`, default `serving_default`) and its variables restored.
    ///
    /// A `While` that only reads a variable has the read before the loop
    /// (`hoist-loop-reads`, as `run` does: every outcome of that graph is an outcome of
    /// the original, see the pass's soundness argument), so the model sees one read
    /// access and a pure loop it can evaluate.
    pub fn load(&self, path: &Path) -> Result<Loaded, CliError> {
        if !is_saved_model(path, self.format)? {
            no_signature_without_model(path, self.signature.as_deref())?;
            // Function calls are inlined, as `run` inlines them (and TensorFlow's runtime
            // does): a call's body ops are accesses of their own, ordered by the body's
            // edges and the call's control inputs, not one atomic step.
            let (graph, _) = autoclust_passes::inline::inline_calls_owned(load_graph(path, self.format)?)
                .map_err(|e| CliError::input(format!("{}: {e}", path.display())))?;
            return Ok(Loaded { graph: hoist_loop_reads(graph, path)?, model: None });
        }
        let (graph, model) = load_model(path, self.signature.as_deref())?;
        let (graph, _) = autoclust_passes::inline::inline_calls(&graph)
            .map_err(|e| CliError::input(format!("{}: {e}", path.display())))?;
        Ok(Loaded { graph: hoist_loop_reads(graph, path)?, model: Some(model) })
    }

    /// The query, and how to name its fetches back: graph tensor (`node:port`) → the
    /// signature's output key (empty without a SavedModel). With a signature, `--fetch`
    /// takes output keys, and neither `--fetch` nor `--target` fetches every output.
    pub fn query(&self, model: Option<&ModelContext>) -> Result<(Query, HashMap<String, String>), CliError> {
        let mut fetches: Vec<String> = self.fetch.iter().filter(|s| !s.is_empty()).cloned().collect();
        let mut names = HashMap::new();
        if let Some(m) = model {
            if fetches.is_empty() && self.target.iter().all(|t| t.is_empty()) {
                fetches = m.signature.outputs.iter().map(|o| o.key.clone()).collect();
            }
            for f in &mut fetches {
                let tensor = m.fetch_tensor(f)?;
                names.insert(tensor.clone(), std::mem::replace(f, tensor));
            }
        }
        let query = Query {
            fetches,
            targets: self.target.clone(),
            rmw: if self.atomic_rmw { Rmw::Atomic } else { Rmw::Split },
            limits: Limits {
                max_states: self.max_states,
                max_iterations: self.max_iterations as usize,
                ..Limits::default()
            },
        };
        Ok((query, names))
    }

    /// The clustering `explore --clustered` and `verify` check: autoclust's own, or the one
    /// `--clusters` gives (its node names checked against `graph`, each node in one cluster).
    pub fn clusterer(&self, graph: &Graph) -> Result<Box<ClusterFn<'static>>, CliError> {
        let Some(path) = &self.clusters else {
            let config = ClusterConfig { min_cluster_size: self.min_cluster_size, ..ClusterConfig::default() };
            return Ok(Box::new(autoclusterer(config)));
        };
        let bad = |m: String| CliError::input(format!("{}: {m}", path.display()));
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
        let list = json
            .get("clusters")
            .and_then(serde_json::Value::as_array)
            .ok_or_else(|| bad("expected {\"clusters\": [{\"name\": .., \"nodes\": [..]}, ..]}".into()))?;
        let mut owner: HashMap<String, String> = HashMap::new();
        let mut specs: Vec<(String, Vec<String>)> = Vec::new();
        for (i, c) in list.iter().enumerate() {
            let name = c
                .get("name")
                .and_then(serde_json::Value::as_str)
                .map_or_else(|| format!("cluster_{i}"), str::to_string);
            let nodes = c
                .get("nodes")
                .and_then(serde_json::Value::as_array)
                .ok_or_else(|| bad(format!("cluster '{name}' has no \"nodes\" list")))?;
            let mut names = Vec::with_capacity(nodes.len());
            for n in nodes {
                let n = n.as_str().ok_or_else(|| bad(format!("cluster '{name}': node names must be strings")))?;
                if graph.find(n).is_none() {
                    return Err(bad(format!("cluster '{name}': no node '{n}' in the graph")));
                }
                if let Some(other) = owner.insert(n.to_string(), name.clone()) {
                    return Err(bad(format!("node '{n}' is in two clusters, '{other}' and '{name}'")));
                }
                names.push(n.to_string());
            }
            specs.push((name, names));
        }
        if let Some(cycle) = contraction_cycle(graph, &specs) {
            return Err(bad(format!(
                "the clustering cannot be built: contracting its clusters makes a cycle ({}); \
                 a cluster runs as one step, so nothing outside it may run between two of its nodes",
                cycle.join(" -> ")
            )));
        }
        Ok(Box::new(move |g: &Graph| {
            Ok(specs
                .iter()
                .map(|(name, nodes)| ClusterSpec {
                    name: name.clone(),
                    nodes: nodes.iter().filter_map(|n| g.find(n)).collect(),
                })
                .filter(|c| !c.nodes.is_empty())
                .collect())
        }))
    }

    /// Reads `--feeds`, `--vars`, `--feed` and `--var` against `graph`; a SavedModel's
    /// variables come first (`--vars`/`--var` override them), its feeds are keyed by the
    /// signature's input names, and every input must be fed.
    /// Runs the SavedModel's initialisation op and the `--init` nodes before the step
    /// ([`crate::cmd_run::initial_state`]): the variables they set join `inputs` (a value
    /// given by `--vars`/`--var` or the model is what they started from), and the lookup
    /// tables they filled are returned for the evaluator.
    pub fn initialise(
        &self,
        graph: &Graph,
        model: Option<&ModelContext>,
        inputs: &mut Inputs,
    ) -> Result<std::sync::Arc<autoclust_runtime::VariableStore>, CliError> {
        let given: Vec<(String, autoclust_graph::Tensor)> =
            inputs.vars.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let (tables, vars) = crate::cmd_run::initial_state(graph, model, &given, &self.init)?;
        inputs.vars.extend(vars);
        Ok(tables)
    }

    pub fn inputs(&self, graph: &Graph, model: Option<&ModelContext>) -> Result<Inputs, CliError> {
        let mut inputs = Inputs::default();
        // The placeholder node a feed name (a signature input key, or a node name) feeds.
        let placeholder = |name: &str, what: &str| -> Result<String, CliError> {
            match model {
                Some(m) => {
                    let t = m.feed_tensor(name, what)?;
                    Ok(t.rsplit_once(':').map_or(t.as_str(), |(n, _)| n).to_string())
                }
                None => Ok(name.to_string()),
            }
        };
        let mut fed: Vec<String> = Vec::new();
        if let Some(m) = model {
            inputs.vars.extend(m.variables.iter().cloned());
        }
        if let Some(p) = &self.feeds {
            for (name, t) in read_feed_file(p)? {
                let name = match name {
                    Some(n) => n,
                    None => {
                        let request: Vec<String> = self.fetch.iter().chain(&self.target).cloned().collect();
                        only_input(graph, model, p, &request)?
                    }
                };
                inputs.feeds.insert(placeholder(&name, &p.display().to_string())?, t);
                fed.push(name);
            }
        }
        if let Some(p) = &self.vars {
            inputs.vars.extend(read_vars(p, model, graph)?);
        }
        let mut given: Vec<String> = Vec::new();
        for spec in self.feed.iter().map(|s| ("--feed", s)).chain(self.var.iter().map(|s| ("--var", s))) {
            let (name, _) = split_spec(spec.0, spec.1)?;
            let key = format!("{} {name}", spec.0);
            if given.contains(&key) {
                return Err(CliError::usage(format!("{} '{name}' is given twice", spec.0)));
            }
            given.push(key);
        }
        for spec in &self.feed {
            let (key, json) = split_spec("--feed", spec)?;
            let name = placeholder(key, "--feed")?;
            let name = name.as_str();
            let node = graph
                .find(name)
                .filter(|&n| graph.node(n).op.starts_with("Placeholder"))
                .ok_or_else(|| CliError::input(format!("--feed {name}: no placeholder named '{name}'")))?;
            let dtype = graph
                .node(node)
                .attr("dtype")
                .and_then(|a| a.as_type())
                .ok_or_else(|| CliError::input(format!("node '{name}': placeholder has no dtype attribute")))?;
            let t =
                tensor_io::tensor_from_json(json, dtype).map_err(|e| CliError::input(format!("--feed {key}: {e}")))?;
            inputs.feeds.insert(name.to_string(), t);
            fed.push(key.to_string());
        }
        if let Some(m) = model {
            m.check_all_fed(&fed)?;
        }
        for spec in &self.var {
            let (name, json) = split_spec("--var", spec)?;
            let handle = graph
                .nodes()
                .iter()
                .filter(|n| n.op == "VarHandleOp")
                .find(|n| {
                    let (container, key) = autoclust_graph::effects::resource_key(n);
                    autoclust_graph::effects::variable_display_name(container, key) == name
                })
                .ok_or_else(|| CliError::input(format!("--var {name}: no variable named '{name}'")))?;
            let dtype = handle.attr("dtype").and_then(|a| a.as_type()).ok_or_else(|| {
                CliError::input(format!("node '{}': VarHandleOp has no dtype attribute", handle.name))
            })?;
            let t =
                tensor_io::tensor_from_json(json, dtype).map_err(|e| CliError::input(format!("--var {name}: {e}")))?;
            inputs.vars.insert(name.to_string(), t);
        }
        Ok(inputs)
    }
}

/// Names an exploration's fetches by the signature's output keys (`names`: tensor → key).
pub fn rename_fetches(e: &mut Exploration, names: &HashMap<String, String>) {
    if names.is_empty() {
        return;
    }
    for o in &mut e.outcomes {
        for (n, _) in &mut o.fetches {
            if let Some(key) = names.get(n.as_str()) {
                n.clone_from(key);
            }
        }
        o.fetches.sort_by(|a, b| a.0.cmp(&b.0));
    }
}

fn split_spec<'a>(flag: &str, spec: &'a str) -> Result<(&'a str, &'a str), CliError> {
    spec.split_once('=').ok_or_else(|| CliError::usage(format!("{flag} {spec}: expected NAME=JSON")))
}

#[derive(clap::Args)]
pub struct Args {
    /// The graph file (.pbtxt, .pb, .graph, a SavedModel directory, or - for standard input).
    pub graph: PathBuf,
    #[command(flatten)]
    pub common: Common,
    /// Explore the auto-clustered program (each cluster: one snapshot-read, one write-back).
    #[arg(long)]
    pub clustered: bool,
    /// Print `{"outcomes": [..], "states_explored": N}`.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let Loaded { graph, model } = args.common.load(&args.graph)?;
    let (query, names) = args.common.query(model.as_ref())?;
    let mut inputs = args.common.inputs(&graph, model.as_ref())?;
    let tables = args.common.initialise(&graph, model.as_ref(), &mut inputs)?;
    let clusterer = args.common.clusterer(&graph)?;
    let clusterer = args.clustered.then_some(&*clusterer);
    let mut exploration = explore_graph(
        &graph,
        &query,
        clusterer,
        &inputs,
        &autoclust_semantics::RuntimeCalls::with_tables(graph.library.clone(), tables),
    )
    .map_err(|e| CliError::input(format!("{}: {e}", args.graph.display())))?;
    rename_fetches(&mut exploration, &names);
    if args.json {
        println!("{}", exploration_json(&exploration));
    } else {
        for (i, o) in exploration.outcomes.iter().enumerate() {
            println!("outcome {}: {}", i + 1, describe_outcome(o));
        }
        println!("{} outcomes, {} states explored", exploration.outcomes.len(), exploration.states_explored);
    }
    Ok(ExitCode::SUCCESS)
}

/// docs/contract.md §4's JSON form of an exploration.
pub fn exploration_json(e: &Exploration) -> String {
    let outcomes: Vec<String> = e
        .outcomes
        .iter()
        .map(|o| {
            format!(
                "{{\"fetches\": {}, \"variables\": {}}}",
                tensor_io::tensors_to_json_object(&o.fetches),
                tensor_io::tensors_to_json_object(&o.variables)
            )
        })
        .collect();
    format!("{{\"outcomes\": [{}], \"states_explored\": {}}}", outcomes.join(", "), e.states_explored)
}

/// One line: `fetches r0:0 = 8; variables v0 = 6, v1 = 8`.
pub fn describe_outcome(o: &Outcome) -> String {
    let list = |xs: &[(String, Tensor)]| {
        if xs.is_empty() {
            return "(none)".to_string();
        }
        xs.iter().map(|(n, t)| format!("{n} = {}", short_tensor(t))).collect::<Vec<_>>().join(", ")
    };
    format!("fetches {}; variables {}", list(&o.fetches), list(&o.variables))
}

/// A scalar as its value, anything else as its JSON form.
fn short_tensor(t: &Tensor) -> String {
    let json = tensor_io::tensor_to_json(t);
    if t.shape.is_empty() {
        if let Some(data) = json.rsplit_once("\"data\": [").map(|(_, d)| d.trim_end_matches("]}")) {
            return format!("{data} ({})", t.dtype.name());
        }
    }
    json
}

/// A cycle of the graph with each of `clusters` contracted to one vertex (loop back edges
/// `NextIteration → Merge` dropped, as every order here drops them), as the names along it
/// (a cluster by its name), or `None` when the contraction is acyclic — the condition every
/// clustering autoclust builds keeps, which a clustering given by file must keep too.
fn contraction_cycle(graph: &Graph, clusters: &[(String, Vec<String>)]) -> Option<Vec<String>> {
    let n = graph.len();
    // Vertex of each node: its cluster (numbered after the nodes) or itself.
    let mut vertex: Vec<usize> = (0..n).collect();
    for (k, (_, nodes)) in clusters.iter().enumerate() {
        for name in nodes {
            if let Some(id) = graph.find(name) {
                vertex[id.index()] = n + k;
            }
        }
    }
    let total = n + clusters.len();
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); total];
    let mut indegree = vec![0usize; total];
    for id in graph.node_ids() {
        let node = graph.node(id);
        let sources = node.inputs.iter().map(|o| o.node).chain(node.control_inputs.iter().copied());
        for src in sources {
            let (a, b) = (vertex[src.index()], vertex[id.index()]);
            if a != b && !graph.is_back_edge(src, id) {
                succ[a].push(b);
                indegree[b] += 1;
            }
        }
    }
    let mut ready: Vec<usize> = (0..total).filter(|&v| indegree[v] == 0).collect();
    let mut left = indegree.clone();
    while let Some(v) = ready.pop() {
        for &w in &succ[v] {
            left[w] -= 1;
            if left[w] == 0 {
                ready.push(w);
            }
        }
    }
    // Every vertex still waiting has a waiting predecessor: walk back until one repeats.
    let start = (0..total).find(|&v| left[v] > 0)?;
    let mut pred: Vec<Vec<usize>> = vec![Vec::new(); total];
    for (v, ws) in succ.iter().enumerate() {
        for &w in ws {
            if left[v] > 0 && left[w] > 0 {
                pred[w].push(v);
            }
        }
    }
    let mut seen: HashMap<usize, usize> = HashMap::new();
    let mut path = vec![start];
    let mut v = start;
    loop {
        seen.insert(v, path.len() - 1);
        v = *pred[v].first()?;
        if let Some(&at) = seen.get(&v) {
            let mut cycle: Vec<usize> = path[at..].to_vec();
            cycle.reverse();
            cycle.push(cycle[0]);
            let name = |v: usize| {
                if v >= n {
                    format!("cluster '{}'", clusters[v - n].0)
                } else {
                    format!("node '{}'", graph.name(autoclust_graph::NodeId(v as u32)))
                }
            };
            return Some(cycle.into_iter().map(name).collect());
        }
        path.push(v);
    }
}
