//! `autoclust run` (docs/contract.md §4): runs a graph K times in one session and
//! writes the last step's fetches (`--out`, `--json`) and every variable
//! (`--save-vars`, `--json`). Inputs: `--feeds F.safetensors`, `--vars
//! F.safetensors`, `--feed NAME=JSON` (typed by the placeholder's dtype).
//!
//! Both modes first run the graph-optimization pipeline ([`optimized`],
//! `opt --passes default`) unless `--no-optimize` is given.
//!
//! `--no-cluster` runs the plain executor, the reference. The default mode
//! auto-clusters and JIT-compiles ([`clustered_session`]): the graph goes
//! through [`autoclust_passes::pipeline::clustered_program`] (prune →
//! cluster → anchor fetches and targets → encapsulate), and the session
//! runs the encapsulated graph, fetching and targeting the anchors (each
//! call JIT-compiles its body, or interprets it when the compiler declines).
//!
//! Whenever that path cannot apply — a feed of a non-`Placeholder` output,
//! a clustering or encapsulation error, a name that does not survive the
//! rewrite — the run uses the plain executor instead, so clustering never
//! fails a run the reference can do; it says so in a `note:` line on stderr
//! ([`crate::notes`]), as it does for every node declined for want of types
//! and, after the first step, every cluster the interpreter ran.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use autoclust_graph::{Graph, NodeId, Output, Tensor};
use autoclust_passes::cluster::ClusterConfig;
use autoclust_passes::pass::{Evaluator, PassContext, Pipeline};
use autoclust_passes::pipeline::{clustered_program, ClusteredProgram, PipelineError};
use autoclust_runtime::cluster_call::CompilerOptions;
use autoclust_runtime::tensor_io::{tensor_from_json, write_safetensors, write_tensor_json, write_tensors_json_object};
use autoclust_runtime::{Jit, RunRequest, Session, SessionOptions, VariableStore};

use crate::io::{write_all_atomic, Format};
use crate::model::{
    checkpoint_files, is_checkpoint_prefix, load_to_run, only_input, read_feed_file, read_vars, ModelContext,
};
use crate::notes::{print_notes, ClusterReport};
use crate::CliError;

/// The inputs shared by `run`, `explore`, `verify` and `bench`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct InputArgs {
    /// Placeholder values: safetensors or .npz (tensors named after the Placeholder nodes, or
    /// the signature's inputs), or .npy (the one input).
    #[arg(long, value_name = "F")]
    pub feeds: Option<PathBuf>,
    /// Initial variable values: a safetensors file (tensors named after the variables) or a
    /// TensorFlow checkpoint prefix.
    #[arg(long, value_name = "F")]
    pub vars: Option<PathBuf>,
    /// The SavedModel signature to run (default serving_default): feeds keyed by its input
    /// names, fetches by its output keys (all of them by default).
    #[arg(long, value_name = "NAME")]
    pub signature: Option<String>,
    /// The SavedModel the graph came from (set by the command, not a flag).
    #[arg(skip)]
    pub model: Option<Arc<ModelContext>>,
    /// A small placeholder value: NAME=JSON (a number or nested lists).
    #[arg(long = "feed", value_name = "NAME=JSON")]
    pub feed: Vec<String>,
    /// Outputs to fetch: node:port (or node, port 0), comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "T,..")]
    pub fetch: Vec<String>,
    /// Nodes to run for their effects, comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "N,..")]
    pub target: Vec<String>,
    /// Nodes to run once, in order, before the first step (a TensorFlow 1 program's
    /// variable and table initialisers: `init`, `init_all_tables`), comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "N,..")]
    pub init: Vec<String>,
}

#[derive(clap::Args)]
pub struct Args {
    /// The graph file (.pbtxt, .pb, .graph, a SavedModel directory, or - for standard input).
    pub graph: PathBuf,
    #[command(flatten)]
    pub inputs: InputArgs,
    /// Number of steps (variables persist between steps).
    #[arg(long, default_value_t = 1)]
    pub steps: u64,
    /// Write the last step's fetches here (safetensors, named node:port).
    #[arg(long, value_name = "F")]
    pub out: Option<PathBuf>,
    /// Write every variable after the last step here (safetensors).
    #[arg(long, value_name = "F")]
    pub save_vars: Option<PathBuf>,
    /// Write every variable after the last step as a TensorFlow checkpoint
    /// (PREFIX.index, PREFIX.data-00000-of-00001).
    #[arg(long, value_name = "PREFIX")]
    pub save_checkpoint: Option<PathBuf>,
    /// Run the plain executor (the reference), without clustering.
    #[arg(long)]
    pub no_cluster: bool,
    /// Skip the graph-optimization pipeline (constant folding, arithmetic
    /// simplification, CSE, dependency optimization); function calls are
    /// still inlined before clustering.
    #[arg(long)]
    pub no_optimize: bool,
    /// Print {"fetches": {..}, "variables": {..}}.
    #[arg(long)]
    pub json: bool,
    /// Inter-op threads (default: the machine's cores; 1 = deterministic order).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Seeded-random schedule among ready nodes (single-threaded).
    #[arg(long, value_name = "N")]
    pub schedule_seed: Option<u64>,
    /// Iterations after which a While loop fails the step (default 10000000).
    #[arg(long, value_name = "N")]
    pub max_loop_iterations: Option<u64>,
    /// Override the format implied by the extension.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Write the Cranelift IR of each compiled cluster into this directory.
    #[arg(long, value_name = "DIR")]
    pub dump_clif: Option<PathBuf>,
    /// Where the summary writers the graph captured from outside (a TF2 function's
    /// `tf.summary.create_file_writer` run eagerly) write their event files; without it their
    /// summaries are dropped, with a note.
    #[arg(long, value_name = "DIR")]
    pub summary_dir: Option<PathBuf>,
}

/// A session with its inputs applied, and the request to run each step.
pub struct Prepared {
    pub session: Session,
    pub request: RunRequest,
    /// The user's name (`node:port`) of each fetch, in request order.
    pub fetch_names: Vec<String>,
    /// What the clustered path did (`None` for the plain executor).
    pub report: Option<ClusterReport>,
    /// Why the graph-optimization pipeline was not applied, if it failed
    /// (printed as `note:` lines after the first step).
    pub notes: Vec<String>,
}

fn show(p: &std::path::Path) -> String {
    p.display().to_string()
}

fn model_dir(model: Option<&ModelContext>) -> String {
    model.map(|m| m.dir.clone()).unwrap_or_default()
}

/// Builds a session for `graph`, sets `--vars`, and resolves feeds, fetches and targets.
pub fn prepare(graph: Arc<Graph>, inputs: &InputArgs, options: SessionOptions) -> Result<Prepared, CliError> {
    let model = inputs.model.as_deref();
    // A fetch of what was a TF1 reference (a `VariableV2`, an `Assign`'s output) reads the
    // variable's value, as a TensorFlow 1 session returns it.
    let user_fetches: Vec<String> = inputs.fetch.iter().filter(|s| !s.is_empty()).cloned().collect();
    let rewritten = match model {
        None => autoclust_passes::ref_variables::read_fetched_references(&graph, &user_fetches)
            .map_err(|e| CliError::input(format!("--fetch: {e}")))?,
        Some(_) => None,
    };
    let (graph, reference_reads) = match rewritten {
        Some((g, reads)) => (Arc::new(g), reads),
        None => (graph, vec![None; user_fetches.len()]),
    };
    let session = Session::new(graph.clone(), options);
    for (name, t) in model.map(|m| m.variables.as_slice()).unwrap_or_default() {
        session.set_variable(name, t.clone()).map_err(|e| CliError::input(format!("{}: {e}", model_dir(model))))?;
    }
    if let Some(m) = model {
        run_restore(&session, m)?;
    }
    if let Some(path) = &inputs.vars {
        // A checkpoint may hold more than the graph reads (a training checkpoint's optimizer
        // slots for an inference graph): as TensorFlow's Saver, only the graph's variables
        // are restored, and the rest is named in a note. A safetensors file must match.
        let lenient = is_checkpoint_prefix(path);
        let known: std::collections::BTreeSet<String> = session.variable_names().into_iter().collect();
        let mut unused = Vec::new();
        // A TF2 SavedModel's signatures read its saved variables; its graph may hold other
        // handles of the same weights (a Keras `export()` has `head/bias` beside the
        // `head/bias_1` its functions read): setting one of those changes nothing they compute.
        let saved = model.map(|m| &m.keys).filter(|k| !k.is_empty());
        let mut outside = Vec::new();
        // A Keras export saves each weight twice (`variables/N` and `_all_variables/M`): a
        // tensor equal to one that was set is that weight's alias, not an unused one.
        // (Tensors share their buffers: keeping the set ones costs no copy.)
        let mut set_values: Vec<Tensor> = Vec::new();
        for (name, t) in read_vars(path, model, &graph)? {
            if lenient && !known.contains(&name) {
                unused.push((name, t));
                continue;
            }
            if saved.is_some_and(|k| !k.contains_key(&name)) {
                outside.push(name.clone());
            }
            set_values.push(t.clone());
            session.set_variable(&name, t).map_err(|e| CliError::input(format!("{}: {e}", show(path))))?;
        }
        let unused: Vec<String> = unused
            .into_iter()
            .filter(|(_, t)| !set_values.iter().any(|v| v.dtype == t.dtype && v.shape == t.shape && v == t))
            .map(|(name, _)| name)
            .collect();
        if let (Some(keys), false) = (saved, outside.is_empty()) {
            let hint = |n: &String| {
                let alike: Vec<&str> = keys
                    .keys()
                    .filter(|k| k.starts_with(n.as_str()) && k.len() > n.len())
                    .map(String::as_str)
                    .collect();
                if alike.is_empty() {
                    n.clone()
                } else {
                    format!("{n} (the saved variable is {})", alike.join(" or "))
                }
            };
            crate::notes::print_notes(&[format!(
                "--vars {}: {} not among the SavedModel's saved variables, which its signatures read: {}; the value is set but \
                 the signature may not read it",
                show(path),
                if outside.len() == 1 { "this variable is" } else { "these variables are" },
                outside.iter().map(hint).collect::<Vec<_>>().join(", ")
            )]);
        }
        if !unused.is_empty() {
            let shown: Vec<&str> = unused.iter().take(8).map(String::as_str).collect();
            let more = if unused.len() > 8 { format!(" and {} more", unused.len() - 8) } else { String::new() };
            crate::notes::print_notes(&[format!(
                "--vars {}: {} of the graph and {} not used: {}{more}",
                show(path),
                match unused.len() {
                    1 => "1 checkpoint tensor names no variable".to_string(),
                    n => format!("{n} checkpoint tensors name no variable"),
                },
                if unused.len() == 1 { "is" } else { "are" },
                shown.join(", ")
            )]);
        }
    }
    if let Some(m) = model {
        run_init_op(&session, m)?;
    }
    run_init_targets(&session, &inputs.init)?;
    // With a signature, feeds and fetches are named by its keys; `graph_name` finds the tensor.
    let feed_tensor = |name: &str, what: &str| -> Result<String, CliError> {
        match model {
            Some(m) => m.feed_tensor(name, what),
            None => Ok(name.to_string()),
        }
    };
    let mut fed_keys: Vec<String> = Vec::new();
    let mut feeds: Vec<(Output, Tensor)> = Vec::new();
    if let Some(path) = &inputs.feeds {
        for (name, t) in read_feed_file(path)? {
            let name = match name {
                Some(n) => n,
                None => {
                    let request: Vec<String> = inputs.fetch.iter().chain(&inputs.target).cloned().collect();
                    only_input(&graph, model, path, &request)?
                }
            };
            let tensor = feed_tensor(&name, &show(path))?;
            let o = session.output(&tensor).map_err(|e| CliError::input(format!("{}: feed {e}", show(path))))?;
            feeds.retain(|(x, _)| *x != o);
            feeds.push((o, t));
            fed_keys.push(name);
        }
    }
    // A `--feed` replaces the same tensor's value from `--feeds`; two `--feed`s for one tensor are a mistake.
    let mut feed_specs: Vec<Output> = Vec::new();
    for spec in &inputs.feed {
        let (name, json) =
            spec.split_once('=').ok_or_else(|| CliError::usage(format!("--feed '{spec}': expected NAME=JSON")))?;
        let tensor = feed_tensor(name, "--feed")?;
        let o = session.output(&tensor).map_err(|e| CliError::input(format!("--feed {e}")))?;
        if feed_specs.contains(&o) {
            return Err(CliError::usage(format!("--feed '{name}' is given twice")));
        }
        feed_specs.push(o);
        let node = graph.node(o.node);
        let dtype = node.attr("dtype").and_then(|a| a.as_type()).ok_or_else(|| {
            CliError::input(format!(
                "--feed '{name}': node '{}' ({}) has no dtype to type the value",
                node.name, node.op
            ))
        })?;
        let t = tensor_from_json(json, dtype).map_err(|e| CliError::input(format!("--feed '{name}': {e}")))?;
        feeds.retain(|(x, _)| *x != o);
        feeds.push((o, t));
        fed_keys.push(name.to_string());
    }
    let mut fetch_names: Vec<String> = user_fetches;
    let fetch_tensors: Vec<String> = match model {
        Some(m) => {
            m.check_all_fed(&fed_keys)?;
            if fetch_names.is_empty() && inputs.target.iter().all(|t| t.is_empty()) {
                fetch_names = m.signature.outputs.iter().map(|o| o.key.clone()).collect();
            }
            fetch_names.iter().map(|k| m.fetch_tensor(k)).collect::<Result<_, _>>()?
        }
        None => fetch_names.iter().zip(&reference_reads).map(|(f, r)| r.clone().unwrap_or_else(|| f.clone())).collect(),
    };
    let fetches = fetch_tensors
        .iter()
        .map(|s| session.output(s).map_err(|e| CliError::input(format!("--fetch {e}"))))
        .collect::<Result<Vec<Output>, _>>()?;
    if let Some(m) = model.filter(|m| m.by_node_name) {
        // A compiled signature's program fetched by a tensor's name, not a key: `node:port`.
        for (name, o) in fetch_names.iter_mut().zip(&fetches) {
            if !m.is_output_key(name) {
                *name = format!("{}:{}", graph.name(o.node), o.port);
            }
        }
    }
    if model.is_none() {
        // `node:port` as the user named it, also where a read stands for a reference's value.
        fetch_names = fetches
            .iter()
            .zip(&fetch_names)
            .zip(&reference_reads)
            .map(|((o, user), read)| match read {
                Some(_) if user.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u32>().is_ok()) => user.clone(),
                Some(_) => format!("{user}:0"),
                None => format!("{}:{}", graph.name(o.node), o.port),
            })
            .collect();
    }
    let targets = inputs
        .target
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| session.node(s).map_err(|e| CliError::input(format!("--target {e}"))))
        .collect::<Result<Vec<NodeId>, _>>()?;
    Ok(Prepared {
        session,
        request: RunRequest { feeds, fetches, targets },
        fetch_names,
        report: None,
        notes: Vec::new(),
    })
}

/// The lookup tables and the variables (name, value) set before a step.
pub type InitialState = (Arc<VariableStore>, Vec<(String, Tensor)>);

/// What runs before `explore`'s and `verify`'s step, as before `run`'s: a SavedModel's
/// initialisation op, then the `--init` nodes, once each, on a plain session holding the
/// model's and the given variables (`vars`). Returns the lookup tables they filled (which
/// `autoclust_semantics::RuntimeCalls` reads as fixed for the step) and every variable they
/// gave a value, for the exploration's initial state. Nothing runs when there is neither.
pub fn initial_state(
    graph: &Graph,
    model: Option<&ModelContext>,
    vars: &[(String, Tensor)],
    init: &[String],
) -> Result<InitialState, CliError> {
    let tables = Arc::new(VariableStore::new());
    let init_op = model.filter(|m| m.init_op.is_some() || m.restore.is_some());
    if init_op.is_none() && init.is_empty() {
        return Ok((tables, Vec::new()));
    }
    let session = Session::new(Arc::new(graph.clone()), SessionOptions { threads: 1, ..SessionOptions::default() });
    if let Some(m) = init_op {
        run_restore(&session, m)?;
    }
    for (name, t) in vars {
        session.set_variable(name, t.clone()).map_err(|e| CliError::input(format!("variable '{name}': {e}")))?;
    }
    if let Some(m) = init_op {
        run_init_op(&session, m)?;
    }
    run_init_targets(&session, init)?;
    tables.lookup_tables().adopt(session.variable_store().lookup_tables());
    Ok((tables, session.variables()))
}

/// Runs each `--init` node once, in order.
fn run_init_targets(session: &Session, init: &[String]) -> Result<(), CliError> {
    for name in init {
        let fail = |e: String| CliError::input(format!("--init '{name}': {e}"));
        let target = session.node(name).map_err(|e| fail(e.to_string()))?;
        session
            .run(&RunRequest { feeds: Vec::new(), fetches: Vec::new(), targets: vec![target] })
            .map_err(|e| fail(e.to_string()))?;
    }
    Ok(())
}

/// Runs a SavedModel's initialisation once, as TensorFlow's loader does before the model
/// serves: a TF1 model's Saver restore (its variables, by name, from `variables/`; `--vars`
/// then overrides them), then ([`run_init_op`]) the initialisation op, which fills the
/// model's lookup tables (from constants, or from its asset files, whose paths it is fed).
fn run_restore(session: &Session, model: &ModelContext) -> Result<(), CliError> {
    if let Some(r) = &model.restore {
        let fail = |e: String| CliError::input(format!("{}: restoring the variables ('{}'): {e}", model.dir, r.op));
        let target = session.node(&r.op).map_err(|e| fail(e.to_string()))?;
        let file = session.output(&r.filename_tensor).map_err(|e| fail(e.to_string()))?;
        let prefix =
            Tensor::from_strings(vec![], vec![r.prefix.as_bytes().to_vec()]).map_err(|e| fail(e.to_string()))?;
        let request = RunRequest { feeds: vec![(file, prefix)], fetches: Vec::new(), targets: vec![target] };
        session.run(&request).map_err(|e| fail(e.to_string()))?;
    }
    Ok(())
}

/// The initialisation op of [`run_restore`]'s doc, after the restore and `--vars`.
fn run_init_op(session: &Session, model: &ModelContext) -> Result<(), CliError> {
    let Some(init) = &model.init_op else { return Ok(()) };
    let fail = |e: String| CliError::input(format!("{}: initialisation op '{init}': {e}", model.dir));
    let target = session.node(init).map_err(|e| fail(e.to_string()))?;
    let mut feeds = Vec::new();
    for (tensor, path) in &model.asset_feeds {
        let o = session.output(tensor).map_err(|e| fail(format!("asset {e}")))?;
        let t = Tensor::from_strings(vec![], vec![path.as_bytes().to_vec()]).map_err(|e| fail(e.to_string()))?;
        feeds.push((o, t));
    }
    session.run(&RunRequest { feeds, fetches: Vec::new(), targets: vec![target] }).map_err(|e| fail(e.to_string()))?;
    Ok(())
}

/// The evaluator `constant-fold` uses: the runtime's stateless kernels.
pub fn kernel_evaluator() -> Evaluator {
    Arc::new(|node, inputs| autoclust_runtime::compute(node, inputs).map_err(|e| e.to_string()))
}

/// `plain` with its graph run through the graph-optimization pipeline
/// (`opt --passes default`: inline, constant-fold, arithmetic-simplify, cse,
/// dependency-optimize) for its request: fetched, targeted and fed nodes are
/// kept under their names, so the request carries over by name, and the
/// variables set so far carry over to the new session. When the pipeline
/// fails, `plain` is returned as it was with a note saying why.
pub fn optimized(plain: Prepared, options: SessionOptions) -> Result<Prepared, CliError> {
    let graph = plain.session.graph().clone();
    let request = &plain.request;
    let name = |id: NodeId| graph.name(id).to_string();
    let ctx = PassContext {
        preserve: Some(
            request.fetches.iter().map(|o| name(o.node)).chain(request.targets.iter().map(|&t| name(t))).collect(),
        ),
        fed: request.feeds.iter().map(|(o, _)| name(o.node)).collect(),
        evaluator: Some(kernel_evaluator()),
        ..PassContext::default()
    };
    let keep_plain = |mut plain: Prepared, why: String| {
        tracing::info!(reason = %why, "not optimizing");
        plain.notes.push(format!("running unoptimized: {why}"));
        Ok(plain)
    };
    let pipeline = Pipeline::parse("default").map_err(|e| CliError::input(e.to_string()))?;
    // Only what the request runs is optimized (and verified): a node no fetch or target needs
    // — another SavedModel signature's, say — can neither fail the pipeline nor cost its time.
    // Fed nodes stay, so the feeds carry over; `prune` keeps every variable.
    let requested = if request.fetches.is_empty() && request.targets.is_empty() {
        Graph::clone(&graph)
    } else {
        let keep: Vec<NodeId> =
            request.targets.iter().copied().chain(request.feeds.iter().map(|(o, _)| o.node)).collect();
        match autoclust_passes::pipeline::prune(&graph, &request.fetches, &keep) {
            Ok(g) => g,
            Err(e) => return keep_plain(plain, e.to_string()),
        }
    };
    let optimized = match pipeline.run(requested, &ctx) {
        Ok(g) => Arc::new(g),
        Err(e) => return keep_plain(plain, e.to_string()),
    };
    let session = Session::new(optimized.clone(), options);
    for (var, value) in plain.session.variables() {
        if let Err(e) = session.set_variable(&var, value) {
            return keep_plain(plain, format!("variable '{var}' does not carry over ({e})"));
        }
    }
    session.adopt_tables(&plain.session);
    let find = |id: NodeId| optimized.find(graph.name(id));
    let feeds: Option<Vec<(Output, Tensor)>> = request
        .feeds
        .iter()
        .map(|(o, t)| find(o.node).map(|node| (Output { node, port: o.port }, t.clone())))
        .collect();
    let fetches: Option<Vec<Output>> =
        request.fetches.iter().map(|o| find(o.node).map(|node| Output { node, port: o.port })).collect();
    let targets: Option<Vec<NodeId>> = request.targets.iter().map(|&t| find(t)).collect();
    let (Some(feeds), Some(fetches), Some(targets)) = (feeds, fetches, targets) else {
        return keep_plain(plain, "a feed, fetch or target did not survive optimization".into());
    };
    Ok(Prepared {
        session,
        request: RunRequest { feeds, fetches, targets },
        fetch_names: plain.fetch_names,
        report: plain.report,
        notes: plain.notes,
    })
}

/// The clustered path (module doc): auto-cluster, encapsulate, JIT.
pub fn clustered_session(
    graph: Arc<Graph>,
    inputs: &InputArgs,
    options: SessionOptions,
    compiler: CompilerOptions,
    optimize: bool,
) -> Result<Prepared, CliError> {
    // Resolve and check every input against the original graph first, so
    // errors name the user's nodes.
    let plain = prepare(graph, inputs, options.clone())?;
    let plain = if optimize { optimized(plain, options.clone())? } else { plain };
    let graph = plain.session.graph().clone();
    let request = &plain.request;
    let fed: Vec<Output> = request.feeds.iter().map(|(o, _)| *o).collect();
    let program = match clustered_program(
        &graph,
        &fed,
        &request.fetches,
        &request.targets,
        ClusterConfig { explain_refusals: false, ..ClusterConfig::default() },
    ) {
        Ok(p) => p,
        Err(PipelineError::NoClusters { notes }) => {
            tracing::info!("no clusters; running the plain executor");
            return Ok(unclustered(plain, notes));
        }
        Err(why) => {
            tracing::info!(reason = %why, "not clustering; running the plain executor");
            return Ok(unclustered(plain, vec![format!("running unclustered: {why}")]));
        }
    };
    let ClusteredProgram {
        graph: new_graph,
        fetch_anchors,
        target_anchors,
        bridges,
        clustered_nodes,
        total_nodes,
        notes,
        ..
    } = program;
    let new_graph = Arc::new(new_graph);
    // A compiled `While` keeps the session's iteration bound (`--max-loop-iterations`).
    let compiler = CompilerOptions { max_loop_iterations: options.max_loop_iterations, ..compiler };
    let threads = options.threads;
    let session = Session::with_jit(new_graph.clone(), options, Jit::new(compiler, true));
    for (name, value) in plain.session.variables() {
        if let Err(e) = session.set_variable(&name, value) {
            tracing::info!(error = %e, "not clustering: a variable does not carry over");
            let why = format!("running unclustered: variable '{name}' does not carry over ({e})");
            return Ok(unclustered(plain, vec![why]));
        }
    }
    session.adopt_tables(&plain.session);
    let mut feeds = Vec::with_capacity(request.feeds.len());
    for (o, t) in &request.feeds {
        // A placeholder missing from the rewritten graph was pruned: nothing needs its value.
        if let Some(node) = new_graph.find(graph.name(o.node)) {
            feeds.push((Output { node, port: o.port }, t.clone()));
        }
    }
    let find = |n: &String| new_graph.find(n);
    let (Some(fetches), Some(targets)) = (
        fetch_anchors.iter().map(|n| find(n).map(|node| Output { node, port: 0 })).collect::<Option<Vec<_>>>(),
        target_anchors.iter().map(find).collect::<Option<Vec<_>>>(),
    ) else {
        return Ok(unclustered(
            plain,
            vec!["running unclustered: a fetch or target did not survive the rewrite".into()],
        ));
    };
    // Every cluster whose signature is static compiles now, on all cores (issue 19), while
    // this thread builds the step's plan.
    let request = RunRequest { feeds, fetches, targets };
    // The unclustered session and its graph are no longer a fallback: free them before
    // compiling (at 10⁶ nodes, most of a GB).
    let Prepared { fetch_names, notes: plain_notes, .. } = plain;
    drop(graph);
    let seeds = session.seeds(&request.feeds);
    std::thread::scope(|scope| {
        scope.spawn(|| session.jit().precompile(&new_graph, threads, &seeds));
        // An error here is the first step's to report.
        let _ = session.prepare(&request);
    });
    let report = ClusterReport {
        clusters: bridges.into_iter().map(|b| (b.cluster, b.function)).collect(),
        clustered_nodes,
        total_nodes,
        notes,
    };
    Ok(Prepared { session, request, fetch_names, report: Some(report), notes: plain_notes })
}

/// A run error that names a fetched tensor by the name the request gave it: the clustered
/// program fetches anchors (`_autoclust_fetch_K:0`), which the user never wrote.
pub fn in_user_terms(
    e: autoclust_runtime::RunError,
    session: &Session,
    request: &RunRequest,
    fetch_names: &[String],
) -> autoclust_runtime::RunError {
    match e {
        autoclust_runtime::RunError::BadRequest { name, message } => {
            let g = session.graph();
            let user = request
                .fetches
                .iter()
                .zip(fetch_names)
                .find(|(o, _)| format!("{}:{}", g.name(o.node), o.port) == name)
                .map(|(_, u)| u.clone());
            autoclust_runtime::RunError::BadRequest { name: user.unwrap_or(name), message }
        }
        other => other,
    }
}

/// The plain executor standing in for the clustered path, with why.
fn unclustered(mut plain: Prepared, notes: Vec<String>) -> Prepared {
    let total_nodes = plain.session.graph().len();
    plain.report = Some(ClusterReport { total_nodes, notes, ..ClusterReport::default() });
    plain
}

/// More inter-op threads than this is a usage error (thousands of idle
/// threads cost seconds of start-up and help nothing).
pub const MAX_THREADS: usize = 1024;

/// The session options of `run` and `bench`, checked: `--threads` at most
/// [`MAX_THREADS`], `--max-loop-iterations` at least 1.
pub fn session_options(
    threads: Option<usize>,
    schedule_seed: Option<u64>,
    max_loop_iterations: Option<u64>,
) -> Result<SessionOptions, CliError> {
    let threads = threads.unwrap_or(0);
    if threads > MAX_THREADS {
        return Err(CliError::usage(format!("--threads {threads}: at most {MAX_THREADS}")));
    }
    if max_loop_iterations == Some(0) {
        return Err(CliError::usage("--max-loop-iterations must be at least 1"));
    }
    Ok(SessionOptions { threads, schedule_seed, max_loop_iterations })
}

/// The output files `run` was given, checked before any step runs (usage
/// errors): no two options naming one file, every directory present except
/// the checkpoint's, which `run` creates.
fn check_run_outputs(args: &Args) -> Result<(), CliError> {
    let mut outputs: Vec<(&str, PathBuf)> = Vec::new();
    if let Some(p) = &args.out {
        outputs.push(("--out", p.clone()));
    }
    if let Some(p) = &args.save_vars {
        outputs.push(("--save-vars", p.clone()));
    }
    let mut created = Vec::new();
    if let Some(prefix) = &args.save_checkpoint {
        outputs.push(("--save-checkpoint", autoclust_graphdef::tensor_bundle::index_path(prefix)));
        outputs.push(("--save-checkpoint", autoclust_graphdef::tensor_bundle::data_path(prefix, 0, 1)));
        created.extend(prefix.parent().map(|d| d.to_path_buf()));
    }
    let named: Vec<(&str, &std::path::Path)> = outputs.iter().map(|(o, p)| (*o, p.as_path())).collect();
    let created: Vec<&std::path::Path> = created.iter().map(|p| p.as_path()).collect();
    crate::io::check_outputs(&named, &created)
}

/// Whether a `PrintV2` of the graph or of its function library writes to stdout.
fn prints_to_stdout(graph: &autoclust_graph::Graph) -> bool {
    let to_stdout = |op: &str, attrs: &autoclust_graph::Attrs| {
        op == "PrintV2" && attrs.get("output_stream").and_then(|a| a.as_str()) == Some("stdout")
    };
    graph.nodes().iter().any(|n| to_stdout(&n.op, &n.attrs))
        || graph.library.functions.iter().flat_map(|f| &f.nodes).any(|n| to_stdout(&n.op, &n.attrs))
}

pub fn run(mut args: Args) -> Result<ExitCode, CliError> {
    if args.steps == 0 {
        return Err(CliError::usage("--steps must be at least 1"));
    }
    check_run_outputs(&args)?;
    let (graph, model) = load_to_run(&args.graph, args.format, args.inputs.signature.as_deref())?;
    let redirect_stdout_prints = args.json && prints_to_stdout(&graph);
    // A TF1 graph's partitioned variables, saved in slices as its Saver saves them.
    let partitions = if args.save_checkpoint.is_some() { crate::model::partitions(&graph) } else { Default::default() };
    // The loaded graph moves into the session: once optimization and clustering have
    // made the graphs that run, it is freed (at 10⁶ nodes, a copy is most of a GB).
    let graph = Arc::new(graph);
    args.inputs.model = model.map(Arc::new);
    let options = session_options(args.threads, args.schedule_seed, args.max_loop_iterations)?;
    let prepared = if args.no_cluster {
        let plain = prepare(graph, &args.inputs, options.clone())?;
        if args.no_optimize {
            plain
        } else {
            optimized(plain, options)?
        }
    } else {
        let compiler = CompilerOptions { dump_clif_dir: args.dump_clif.clone(), ..Default::default() };
        clustered_session(graph, &args.inputs, options, compiler, !args.no_optimize)?
    };
    let Prepared { session, request, fetch_names, report, mut notes } = prepared;
    if redirect_stdout_prints {
        autoclust_runtime::kernels::print_stdout_to_stderr(true);
        notes.push(
            "PrintV2 output meant for stdout goes to stderr: with --json, stdout carries the JSON document only"
                .to_string(),
        );
    }
    if let Some(dir) = &args.summary_dir {
        session.variable_store().summary_writers().set_captured_dir(dir.clone());
    }
    let mut last = Vec::new();
    let mut progress = crate::progress::Progress::new(args.steps);
    // The interpreted-cluster notes printed after the first step: a cluster the interpreter
    // takes over later (a megamorphic one, compiled code failing at run time) is named at the
    // end, once.
    let mut interpreted_said = Vec::new();
    for done in 1..=args.steps {
        let result = session.run(&request).map_err(|e| in_user_terms(e, &session, &request, &fetch_names));
        if let Err(e) = &result {
            progress.finish();
            // The error alone, but for how this is not the program `run` meant to run
            // (unoptimized, unclustered, a cluster the interpreter ran: the failing node
            // may be in it).
            if done == 1 {
                print_notes(&notes);
            }
            if let Some(r) = &report {
                if done == 1 {
                    print_notes(r.fallback_notes());
                }
                let interpreted = r.interpreted_notes_beside(&session.jit().function_status(), &e.to_string());
                print_notes(&interpreted.into_iter().filter(|n| !interpreted_said.contains(n)).collect::<Vec<_>>());
            }
        }
        last = result
            .map_err(|e| match args.steps {
                1 => CliError::input(e.to_string()),
                k => CliError::input(format!("step {done} of {k}: {e}")),
            })?
            .fetches;
        // Notes once the first step has run: a graph that cannot run at all gets
        // its error alone, and which clusters the interpreter ran is known now.
        if done == 1 {
            print_notes(&notes);
            if let Some(r) = &report {
                print_notes(&r.notes);
                interpreted_said = r.interpreted_notes(&session.jit().function_status());
                print_notes(&interpreted_said);
            }
            print_notes(&crate::notes::dropped_summary_notes(session.variable_store()));
        }
        progress.step(done);
    }
    progress.finish();
    if let Some(r) = &report {
        let later: Vec<String> = r
            .interpreted_notes(&session.jit().function_status())
            .into_iter()
            .filter(|n| !interpreted_said.contains(n))
            .collect();
        print_notes(&later);
    }
    let names = fetch_names;
    let mut fetched: Vec<(String, Tensor)> = Vec::new();
    for (n, t) in names.into_iter().zip(last) {
        if !fetched.iter().any(|(m, _)| *m == n) {
            fetched.push((n, t));
        }
    }
    let variables = session.variables();
    // Serialise everything before writing anything, so a failure leaves no file.
    let out_bytes = match &args.out {
        Some(p) => Some((p, write_safetensors(&fetched).map_err(|e| CliError::input(format!("{}: {e}", show(p))))?)),
        None => None,
    };
    let vars_bytes = match &args.save_vars {
        Some(p) => Some((p, write_safetensors(&variables).map_err(|e| CliError::input(format!("{}: {e}", show(p))))?)),
        None => None,
    };
    let checkpoint = match &args.save_checkpoint {
        Some(prefix) => checkpoint_files(prefix, &variables, args.inputs.model.as_deref(), &partitions)?,
        None => Vec::new(),
    };
    if let Some(dir) = args.save_checkpoint.as_ref().and_then(|p| p.parent()).filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| CliError::input(format!("{}: cannot create: {e}", dir.display())))?;
    }
    // All or nothing: no output file is left behind when another cannot be written.
    let files: Vec<(&std::path::Path, &[u8])> = checkpoint
        .iter()
        .map(|(p, b)| (p.as_path(), b.as_slice()))
        .chain(out_bytes.iter().map(|(p, b)| (p.as_path(), b.as_slice())))
        .chain(vars_bytes.iter().map(|(p, b)| (p.as_path(), b.as_slice())))
        .collect();
    write_all_atomic(&files)?;
    // Streamed: a large fetch's text is never held whole.
    use std::io::Write as _;
    let stdout = std::io::stdout().lock();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout);
    let printed = if args.json {
        (|| {
            out.write_all(b"{\"fetches\": ")?;
            write_tensors_json_object(&mut out, &fetched)?;
            out.write_all(b", \"variables\": ")?;
            write_tensors_json_object(&mut out, &variables)?;
            out.write_all(b"}\n")?;
            out.flush()
        })()
    } else if args.out.is_none() {
        (|| {
            for (n, t) in &fetched {
                write!(out, "{n} = ")?;
                write_tensor_json(&mut out, t)?;
                out.write_all(b"\n")?;
            }
            out.flush()
        })()
    } else {
        Ok(())
    };
    printed.map_err(|e| CliError::input(format!("stdout: {e}")))?;
    Ok(ExitCode::SUCCESS)
}
