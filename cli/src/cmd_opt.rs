//! `autoclust opt GRAPH --passes P1,P2,..` (docs/contract.md §4): runs named
//! passes through the pass manager and prints the resulting graph in the
//! native format on stdout. `--list-passes` lists the registered passes;
//! `--dump-after PASS` (or `all`) prints the graph after that pass on
//! stderr, so a dump can become a test case. The FileCheck cases in
//! `testdata/` are built on this command. `--passes default` is the
//! optimization pipeline `run`/`bench`/`compile` apply before clustering;
//! `--fetch`/`--target` prune the graph first, as `run` does; `--stats`
//! prints a Grappler-style JSON summary instead of the graph.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use autoclust_graph::Graph;
use autoclust_passes::cluster::{ClusterConfig, DEFAULT_MIN_CLUSTER_SIZE};
use autoclust_passes::pass::{registry, AfterPassHook, PassContext, PassError, Pipeline, Request};

use crate::io::Format;
use crate::CliError;

#[derive(clap::Args)]
pub struct Args {
    /// The graph file (.pbtxt, .pb, .graph, a SavedModel directory, or - for standard input).
    #[arg(required_unless_present = "list_passes")]
    pub graph: Option<PathBuf>,
    /// Comma-separated passes to run in order (see --list-passes).
    #[arg(long, value_name = "P1,P2,..", required_unless_present = "list_passes")]
    pub passes: Option<String>,
    /// List the registered passes and exit.
    #[arg(long)]
    pub list_passes: bool,
    /// Smallest cluster the `cluster` and `encapsulate` passes keep (1 allows single nodes).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MIN_CLUSTER_SIZE as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub min_cluster_size: u64,
    /// Print the graph on stderr after this pass (repeatable; `all` for every pass).
    #[arg(long, value_name = "PASS")]
    pub dump_after: Vec<String>,
    /// A SavedModel's signature: its function calls inlined, the graph pruned to its outputs.
    #[arg(long, value_name = "NAME")]
    pub signature: Option<String>,
    /// Input format, overriding the file extension.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Prune to what these outputs need first (node:port or node, comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "T,..")]
    pub fetch: Vec<String>,
    /// Prune to what these nodes need first (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "N,..")]
    pub target: Vec<String>,
    /// Print {"nodes_before", "nodes_after", "function_nodes_before", "function_nodes_after",
    /// "passes": [{"pass", "nodes_after", "ms"}]} instead of the graph.
    #[arg(long)]
    pub stats: bool,
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    if args.list_passes {
        let mut out = String::new();
        for p in registry() {
            out.push_str(&format!("{:<20} {}\n", p.name(), p.description()));
        }
        print_stdout(&out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let (Some(path), Some(passes)) = (args.graph, args.passes) else {
        return Err(CliError::usage("opt needs a GRAPH and --passes (or --list-passes)"));
    };
    let pipeline = Pipeline::parse(&passes).map_err(|e| CliError::usage(e.to_string()))?;
    for d in &args.dump_after {
        if d != "all" && !pipeline.names().contains(&d.as_str()) {
            return Err(CliError::usage(format!("--dump-after {d}: '{d}' is not in the pipeline ({passes})")));
        }
    }
    let mut graph = crate::model::load_graph_for_signature(&path, args.format, args.signature.as_deref())?;
    let fetch: Vec<&String> = args.fetch.iter().filter(|s| !s.is_empty()).collect();
    let target: Vec<&String> = args.target.iter().filter(|s| !s.is_empty()).collect();
    let requested = !fetch.is_empty() || !target.is_empty();
    let mut ctx = context(args.min_cluster_size, args.dump_after);
    if requested {
        let (fetches, targets) = resolve(&graph, &fetch, &target)?;
        let request = Request {
            fetches: fetches.iter().map(|o| (graph.name(o.node).to_string(), o.port)).collect(),
            targets: targets.iter().map(|&t| graph.name(t).to_string()).collect(),
        };
        // A pipeline with a `prune` pass prunes where that pass stands, as `run` does.
        if !pipeline.names().contains(&"prune") {
            graph = autoclust_passes::prune::prune(&graph, &fetches, &targets)
                .map_err(|e| CliError::input(e.to_string()))?;
        }
        ctx = PassContext { request: Some(request.clone()), ..ctx };
        ctx.preserve = PassContext::for_request(request, Default::default()).preserve;
    }
    let function_nodes = |g: &Graph| -> usize { g.library.functions.iter().map(|f| f.nodes.len()).sum() };
    let (nodes_before, function_nodes_before) = (graph.len(), function_nodes(&graph));
    let (out, stats) = pipeline.run_timed(graph, &ctx).map_err(|e| pass_error(&e, &path))?;
    if args.stats {
        let passes: Vec<serde_json::Value> = stats
            .iter()
            .map(
                |(name, nodes, t)| serde_json::json!({"pass": name, "nodes_after": nodes, "ms": t.as_secs_f64() * 1e3}),
            )
            .collect();
        let summary = serde_json::json!({
            "nodes_before": nodes_before,
            "nodes_after": out.len(),
            "function_nodes_before": function_nodes_before,
            "function_nodes_after": function_nodes(&out),
            "passes": passes,
        });
        print_stdout(&format!("{summary}\n"))?;
    } else {
        print_stdout(&native_text(&out))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The `--fetch` outputs and `--target` nodes of `graph`; a name naming no node, or a port its
/// node does not have, is an input error.
pub(crate) fn resolve(
    graph: &Graph,
    fetch: &[&String],
    target: &[&String],
) -> Result<(Vec<autoclust_graph::Output>, Vec<autoclust_graph::NodeId>), CliError> {
    let find = |flag: &str, s: &str, name: &str| {
        graph.find(name).ok_or_else(|| CliError::input(format!("{flag} '{s}': names no node in the graph")))
    };
    let fetches = fetch
        .iter()
        .map(|s| match autoclust_graph::parse_input(s) {
            Some(autoclust_graph::InputRef::Data { node, port }) => {
                let id = find("--fetch", s, node)?;
                // A port the op does not have (where its op says how many) is the user's error.
                if let Some(n) = graph.output_count(id).filter(|&n| port as usize >= n) {
                    let op = &graph.node(id).op;
                    return Err(CliError::input(format!("--fetch '{s}': node '{node}' ({op}) has {n} output(s)")));
                }
                Ok(autoclust_graph::Output { node: id, port })
            }
            _ => Err(CliError::input(format!("--fetch '{s}': expected NODE or NODE:PORT"))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let targets = target.iter().map(|s| find("--target", s, s)).collect::<Result<Vec<_>, _>>()?;
    Ok((fetches, targets))
}

/// The pass context for a minimum cluster size and `--dump-after` list.
pub fn context(min_cluster_size: u64, dump_after: Vec<String>) -> PassContext {
    let cluster_config = ClusterConfig {
        min_cluster_size: min_cluster_size.try_into().unwrap_or(usize::MAX),
        explain_refusals: false,
        ..ClusterConfig::default()
    };
    let after_pass: Option<AfterPassHook> = if dump_after.is_empty() {
        None
    } else {
        Some(Box::new(move |name: &str, g: &Graph| {
            if dump_after.iter().any(|d| d == "all" || d == name) {
                eprint!("# after pass {name}\n{}", native_text(g));
            }
        }))
    };
    PassContext {
        cluster_config,
        after_pass,
        evaluator: Some(crate::cmd_run::kernel_evaluator()),
        ..PassContext::default()
    }
}

/// Runs a pipeline; errors name the input file (and line, when the node has one).
pub fn run_pipeline(pipeline: &Pipeline, graph: Graph, ctx: &PassContext, path: &Path) -> Result<Graph, CliError> {
    pipeline.run(graph, ctx).map_err(|e| pass_error(&e, path))
}

fn pass_error(e: &PassError, path: &Path) -> CliError {
    let msg = e.to_string();
    // Verifier messages start with `line:col: ` when the node came from a text file.
    let located = if msg.starts_with(|c: char| c.is_ascii_digit()) {
        format!("{}:{msg}", path.display())
    } else {
        format!("{}: {msg}", path.display())
    };
    if e.is_usage() {
        CliError::usage(located)
    } else {
        CliError::input(located)
    }
}

/// The graph in the native text format.
pub fn native_text(graph: &Graph) -> String {
    autoclust_graph::text::print(graph)
}

fn print_stdout(s: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    out.write_all(s.as_bytes()).and_then(|_| out.flush()).map_err(|e| CliError::input(format!("stdout: {e}")))
}
