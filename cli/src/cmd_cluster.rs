//! `autoclust cluster` (docs/contract.md §4): auto-clustering. `--json` prints
//! every cluster (members sorted by name) and every unclustered node, each
//! node exactly once; `--explain` lists why each refused merge was refused
//! and why each unclustered node is not compilable; `--dot FILE` writes a
//! Graphviz picture (one coloured box per cluster, unsafe pairs dashed red).
//! `--optimize` clusters the graph as `run` does before pruning it to a request: after
//! the default optimization passes, its calls inlined; it also lists the clusters `run`
//! forms inside the bodies of the functions left outside every cluster
//! (`"function_clusters": [{"function", "name", "nodes"}]`, an extension of the contract's
//! JSON).
//!
//! A call's effects: the contract counts every op that calls a function as modify
//! (TensorFlow's rule), and so does `cluster` by default; `run`, `bench` and `compile`
//! count a call's real effects — none for a `StatelessWhile`/`If`/call whose functions touch
//! no resource, so a recurrent step's pure loops share a cluster with the optimizer's
//! updates. `--interprocedural` (implied by `--optimize`) clusters that way.

use std::path::PathBuf;
use std::process::ExitCode;

use autoclust_graph::{Graph, NodeId};
use autoclust_passes::body_clusters::cluster_function_bodies;
use autoclust_passes::cluster::{dot, ClusterConfig, ClusterError, Clusterer, Clustering, Refusal};
use autoclust_passes::encapsulate::{encapsulate, ClusterSpec};
use autoclust_passes::safety::{CallEffects, SafetyAnalysis};
use serde::Serialize;

use crate::io::{write_atomic, Format};
use crate::CliError;

#[derive(clap::Args)]
pub struct Args {
    /// The graph file (.pbtxt, .pb, .graph, a SavedModel directory, or - for standard input).
    pub graph: PathBuf,
    /// Print the contract's JSON.
    #[arg(long)]
    pub json: bool,
    /// Dissolve clusters with fewer nodes (1 allows single-node clusters).
    #[arg(long, default_value_t = autoclust_passes::cluster::DEFAULT_MIN_CLUSTER_SIZE,
          value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u32).range(1..), |v| v as usize))]
    pub min_cluster_size: usize,
    /// Write a Graphviz picture of the clusters to FILE.
    #[arg(long, value_name = "FILE")]
    pub dot: Option<PathBuf>,
    /// Explain every refused merge and every uncompilable node (to stderr with --json).
    #[arg(long)]
    pub explain: bool,
    /// Cluster the graph `run` clusters (before it prunes it to the fetches): after the loading
    /// rewrites and the default optimization passes (`opt --passes default`), calls inlined;
    /// also lists the clusters `run` forms inside the loop and branch bodies left outside
    /// every cluster (`function_clusters` in the JSON).
    #[arg(long)]
    pub optimize: bool,
    /// Count a call's real effects (none when its functions touch no resource) instead of the
    /// contract's every-call-is-modify, as `run` does (implied by --optimize).
    #[arg(long)]
    pub interprocedural: bool,
    /// A SavedModel's signature: its function calls inlined, the graph pruned to its outputs.
    #[arg(long, value_name = "NAME")]
    pub signature: Option<String>,
    /// Override the format implied by the extension.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
}

#[derive(Serialize)]
struct JsonCluster<'a> {
    name: &'a str,
    nodes: Vec<&'a str>,
}

#[derive(Serialize)]
struct Report<'a> {
    clusters: Vec<JsonCluster<'a>>,
    unclustered: Vec<&'a str>,
    /// With `--optimize`: the clusters `run` forms inside the bodies of the functions the
    /// remaining nodes call (loop bodies, branches), per function.
    #[serde(skip_serializing_if = "Option::is_none")]
    function_clusters: Option<Vec<JsonFunctionCluster>>,
}

#[derive(Serialize)]
struct JsonFunctionCluster {
    function: String,
    name: String,
    nodes: Vec<String>,
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let mut graph = crate::model::load_graph_for_signature(&args.graph, args.format, args.signature.as_deref())?;
    if args.optimize {
        let ctx = crate::cmd_opt::context(args.min_cluster_size as u64, Vec::new());
        let pipeline = autoclust_passes::pass::Pipeline::before_clustering();
        graph = crate::cmd_opt::run_pipeline(&pipeline, graph, &ctx, &args.graph)?;
    }
    let path = args.graph.display();
    let call_effects =
        if args.interprocedural || args.optimize { CallEffects::Interprocedural } else { CallEffects::Conservative };
    let config = ClusterConfig {
        min_cluster_size: args.min_cluster_size,
        explain_refusals: args.explain,
        call_effects,
        ..Default::default()
    };
    let clustering = Clusterer::new(config).run(&graph).map_err(|e| match e {
        ClusterError::Cycle(c) => CliError::input(format!("{path}: {c}")),
        ClusterError::Verify(v) => CliError::input(format!("{path}: {v}")),
    })?;
    if let Some(dot_path) = &args.dot {
        let safety =
            SafetyAnalysis::compute_with(&graph, call_effects).map_err(|e| CliError::input(format!("{path}: {e}")))?;
        write_atomic(dot_path, dot::render(&graph, &clustering, &safety).as_bytes())?;
    }
    let mut report = report(&graph, &clustering);
    if args.optimize {
        report.function_clusters =
            Some(body_clusters(&graph, &clustering, config_for_bodies(&args, call_effects), &path)?);
    }
    if args.json {
        let text = serde_json::to_string(&report).map_err(|e| CliError::input(format!("cannot print JSON: {e}")))?;
        println!("{text}");
    } else {
        for c in &report.clusters {
            println!("{} ({} nodes): {}", c.name, c.nodes.len(), c.nodes.join(" "));
        }
        println!("unclustered ({} nodes): {}", report.unclustered.len(), report.unclustered.join(" "));
        for c in report.function_clusters.iter().flatten() {
            println!("in function '{}': {} ({} nodes): {}", c.function, c.name, c.nodes.len(), c.nodes.join(" "));
        }
    }
    if args.explain {
        let lines = explain(&graph, &clustering);
        if args.json {
            for l in lines {
                eprintln!("{l}");
            }
        } else {
            println!("explanations:");
            for l in lines {
                println!("  {l}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn config_for_bodies(args: &Args, call_effects: CallEffects) -> ClusterConfig {
    ClusterConfig { min_cluster_size: args.min_cluster_size, call_effects, ..Default::default() }
}

/// The clusters `run` forms inside function bodies once the graph's own clusters are
/// encapsulated (the bodies a cluster's `While`/`If` runs compiled excepted), as
/// `encapsulate` and `cluster-bodies` form them.
fn body_clusters(
    graph: &Graph,
    clustering: &Clustering,
    config: ClusterConfig,
    path: &impl std::fmt::Display,
) -> Result<Vec<JsonFunctionCluster>, CliError> {
    let specs: Vec<ClusterSpec> =
        clustering.clusters.iter().map(|c| ClusterSpec { name: c.name.clone(), nodes: c.nodes.clone() }).collect();
    let mut encapsulated = encapsulate(graph, &specs).map_err(|e| CliError::input(format!("{path}: {e}")))?.graph;
    let bodies = cluster_function_bodies(&mut encapsulated, config);
    let mut out: Vec<JsonFunctionCluster> = bodies
        .clusters
        .into_iter()
        .map(|c| JsonFunctionCluster { function: c.function, name: c.name, nodes: c.nodes })
        .collect();
    out.sort_by(|a, b| (&a.function, &a.name).cmp(&(&b.function, &b.name)));
    Ok(out)
}

fn report<'a>(graph: &'a Graph, clustering: &'a Clustering) -> Report<'a> {
    let clusters = clustering
        .clusters
        .iter()
        .map(|c| {
            let mut nodes: Vec<&str> = c.nodes.iter().map(|&n| graph.name(n)).collect();
            nodes.sort_unstable();
            JsonCluster { name: &c.name, nodes }
        })
        .collect();
    let mut unclustered: Vec<&str> =
        graph.node_ids().filter(|&n| clustering.cluster_of(n).is_none()).map(|n| graph.name(n)).collect();
    unclustered.sort_unstable();
    Report { clusters, unclustered, function_clusters: None }
}

/// One line per refusal: refused merges first, then uncompilable nodes.
fn explain(graph: &Graph, clustering: &Clustering) -> Vec<String> {
    let named = |n: NodeId| match clustering.cluster_of(n) {
        Some(c) => format!("{} ({c})", graph.name(n)),
        None => graph.name(n).to_string(),
    };
    clustering
        .explanations
        .iter()
        .map(|r| match r {
            Refusal::NotCompilable { node, reason } => {
                format!("not compilable: {} ({}): {reason}", graph.name(*node), graph.node(*node).op)
            }
            Refusal::WouldCreateCycle { from, to, via } => format!(
                "refused merge of {} and {}: would create a cycle via {}",
                named(*from),
                named(*to),
                graph.name(*via)
            ),
            Refusal::WriteBeforeRead { from, to } | Refusal::PartlySharedVariables { from, to } => {
                let pair = match r {
                    Refusal::WriteBeforeRead { .. } => "write->read pair",
                    _ => "multi-variable updates sharing only some variables",
                };
                format!(
                    "refused merge of {} and {}: {pair} ({}, {})",
                    named(*from),
                    named(*to),
                    graph.name(*from),
                    graph.name(*to)
                )
            }
            Refusal::Deadness { from, to, why } => {
                format!("refused merge of {} and {}: {why}", named(*from), named(*to))
            }
            Refusal::Devices { from, to } => format!(
                "refused merge of {} and {}: placed on different devices ({}, {})",
                named(*from),
                named(*to),
                graph.node(*from).device,
                graph.node(*to).device
            ),
            Refusal::WritesForDifferentTargets { from, to } => format!(
                "refused merge of {} and {}: {} and {} write variables for different final nodes (a program compiled for every node may be run for one of them alone)",
                named(*from),
                named(*to),
                graph.name(*from),
                graph.name(*to)
            ),
            Refusal::CycleCheckTooCostly { from, to } => format!(
                "refused merge of {} and {}: the cycle check exceeded its search budget (a merge across a large part of the graph)",
                named(*from),
                named(*to)
            ),
        })
        .collect()
}
