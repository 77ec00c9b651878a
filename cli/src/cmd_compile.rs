//! `autoclust compile GRAPH -o OUT [--min-cluster-size N] [--fetch T,..] [--target N,..]`
//! (docs/contract.md §4): runs `run`'s pipeline (`opt --passes run`: the reference-variable
//! rewrite, the graph-optimization passes — `--no-optimize` skips them —, then `clustered`;
//! with no request nothing is pruned and every node nothing consumes keeps its name; with
//! `--fetch`/`--target` the graph is pruned to that request, as `run` prunes it, and each
//! fetched or targeted node keeps its name) and writes
//! the clustered program in the native format, headed by a comment naming the
//! passes: each cluster replaced by its bridge (snapshot-read, call of the
//! cluster's pure function, write-back), the cluster bodies in the function
//! library. Compiled for every node (no request), the program may later be run for one
//! final node alone, so no cluster holds variable writes that different final nodes need
//! (`ClusterConfig::writes_apart_by_target`: a TF1 graph's `init` and `train`). The output is written
//! atomically: a failed command leaves no file. With `--signature NAME` the program is
//! compiled for the signature's outputs (unless `--fetch`/`--target` say otherwise) and records
//! the signature on its inputs' placeholders and its outputs' nodes, so `run`/`bench` take the
//! signature's feeds and fetches by their keys, as for the SavedModel. Shortfalls (nodes declined
//! for want of types, clusters not encapsulated) are `note:` lines on stderr.

use std::path::PathBuf;
use std::process::ExitCode;

use autoclust_passes::cluster::DEFAULT_MIN_CLUSTER_SIZE;
use autoclust_passes::pass::{PassContext, Pipeline, Request};

use crate::cmd_opt::{context, native_text, run_pipeline};
use crate::io::{write_atomic, Format};
use crate::CliError;

#[derive(clap::Args)]
pub struct Args {
    /// The graph file (.pbtxt, .pb, .graph, a SavedModel directory, or - for standard input).
    pub graph: PathBuf,
    /// Where to write the clustered program (native format).
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: PathBuf,
    /// Smallest cluster kept (1 allows single nodes).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MIN_CLUSTER_SIZE as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub min_cluster_size: u64,
    /// Print the graph on stderr after this pass (`cluster`, `encapsulate` or `all`).
    #[arg(long, value_name = "PASS")]
    pub dump_after: Vec<String>,
    /// Skip the graph-optimization passes (compile with `ref-variables,captured-tables,captured-writers,collectives,clustered` only).
    #[arg(long)]
    pub no_optimize: bool,
    /// A SavedModel's signature: its function calls inlined, the graph pruned to its outputs.
    #[arg(long, value_name = "NAME")]
    pub signature: Option<String>,
    /// Input format, overriding the file extension.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Compile for a request, as `run` would run it: pruned to what these outputs need
    /// (node:port or node, comma-separated), each keeping its name in the program.
    #[arg(long, value_delimiter = ',', value_name = "T,..")]
    pub fetch: Vec<String>,
    /// Compile for a request: pruned to what these nodes need (comma-separated), each keeping
    /// its name in the program.
    #[arg(long, value_delimiter = ',', value_name = "N,..")]
    pub target: Vec<String>,
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let _span = tracing::info_span!("compile", graph = %args.graph.display()).entered();
    let (graph, model) = crate::model::load_signature_graph(&args.graph, args.format, args.signature.as_deref())?;
    let mut ctx = context(args.min_cluster_size, args.dump_after);
    let fetch: Vec<&String> = args.fetch.iter().filter(|s| !s.is_empty()).collect();
    let target: Vec<&String> = args.target.iter().filter(|s| !s.is_empty()).collect();
    // A signature's program is compiled for the signature's outputs, which keep their names.
    let signature_outputs: Vec<String> = match (&model, fetch.is_empty() && target.is_empty()) {
        (Some(m), true) => m.signature.outputs.iter().map(|o| o.tensor.clone()).collect(),
        _ => Vec::new(),
    };
    let fetch: Vec<&String> = fetch.into_iter().chain(&signature_outputs).collect();
    // A program compiled for every node may be run for one final node alone (`train` without
    // `init`): no cluster may then hold writes another final node needs.
    ctx.cluster_config.writes_apart_by_target = fetch.is_empty() && target.is_empty();
    if !fetch.is_empty() || !target.is_empty() {
        let (fetches, targets) = crate::cmd_opt::resolve(&graph, &fetch, &target)?;
        let request = Request {
            fetches: fetches.iter().map(|o| (graph.name(o.node).to_string(), o.port)).collect(),
            targets: targets.iter().map(|&t| graph.name(t).to_string()).collect(),
        };
        ctx.preserve = PassContext::for_request(request.clone(), Default::default()).preserve;
        ctx.request = Some(request);
        ctx.keep_request_names = true;
    }
    let pipeline = Pipeline::compile(!args.no_optimize);
    let mut out = run_pipeline(&pipeline, graph, &ctx, &args.graph)?;
    if let Some(m) = &model {
        crate::model::mark_signature(&mut out, m);
    }
    crate::notes::print_notes(&ctx.take_notes());
    // The program says how it was made: `opt --passes` with this list reproduces it.
    let text = format!("# autoclust compile: --passes {}\n{}", pipeline.names().join(","), native_text(&out));
    write_atomic(&args.output, text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
