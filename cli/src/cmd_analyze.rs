//! `autoclust analyze` (docs/contract.md §4): the resource-operation safety
//! analysis — every resource op with its kind, and every incompatible pair
//! `(from, to)`, both sorted by node name. `--json` prints the contract's
//! JSON; without it, a readable listing. As the contract says, every op that calls a
//! function is modify; `--interprocedural` counts a call's real effects instead (none when
//! its functions touch no resource), the analysis `run` clusters with.

use std::path::PathBuf;
use std::process::ExitCode;

use autoclust_passes::safety::{CallEffects, SafetyAnalysis};
use serde::Serialize;

use crate::io::Format;
use crate::CliError;

#[derive(clap::Args)]
pub struct Args {
    /// The graph file (.pbtxt, .pb, .graph, a SavedModel directory, or - for standard input).
    pub graph: PathBuf,
    /// Print the contract's JSON.
    #[arg(long)]
    pub json: bool,
    /// A SavedModel's signature: its function calls inlined, the graph pruned to its outputs.
    #[arg(long, value_name = "NAME")]
    pub signature: Option<String>,
    /// Count a call's real effects (none when its functions touch no resource) instead of the
    /// contract's every-call-is-modify: the analysis `run` clusters with.
    #[arg(long)]
    pub interprocedural: bool,
    /// Override the format implied by the extension.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
}

#[derive(Serialize)]
struct ResourceOp<'a> {
    node: &'a str,
    op: &'a str,
    kind: &'static str,
}

#[derive(Serialize)]
struct Pair<'a> {
    from: &'a str,
    to: &'a str,
}

#[derive(Serialize)]
struct Report<'a> {
    resource_ops: Vec<ResourceOp<'a>>,
    incompatible_pairs: Vec<Pair<'a>>,
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let graph = crate::model::load_graph_for_signature(&args.graph, args.format, args.signature.as_deref())?;
    let calls = if args.interprocedural { CallEffects::Interprocedural } else { CallEffects::Conservative };
    let analysis = SafetyAnalysis::compute_with(&graph, calls)
        .map_err(|e| CliError::input(format!("{}: {e}", args.graph.display())))?;
    let mut resource_ops: Vec<ResourceOp<'_>> = analysis
        .resource_ops()
        .map(|(id, kind)| ResourceOp { node: graph.name(id), op: &graph.node(id).op, kind: kind.as_str() })
        .collect();
    resource_ops.sort_by(|a, b| a.node.cmp(b.node));
    let mut incompatible_pairs: Vec<Pair<'_>> =
        analysis.pairs().into_iter().map(|(f, t)| Pair { from: graph.name(f), to: graph.name(t) }).collect();
    incompatible_pairs.sort_by(|a, b| (a.from, a.to).cmp(&(b.from, b.to)));
    let report = Report { resource_ops, incompatible_pairs };
    if args.json {
        let text = serde_json::to_string(&report).map_err(|e| CliError::input(format!("cannot print JSON: {e}")))?;
        println!("{text}");
    } else {
        // One write: stdout flushes at every line, a system call per pair at 10⁵ nodes.
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(out, "resource ops: {}", report.resource_ops.len());
        for r in &report.resource_ops {
            let _ = writeln!(out, "  {:<6} {} ({})", r.kind, r.node, r.op);
        }
        let _ = writeln!(out, "incompatible pairs: {}", report.incompatible_pairs.len());
        for p in &report.incompatible_pairs {
            let _ = writeln!(out, "  {} -> {}", p.from, p.to);
        }
        print!("{out}");
    }
    Ok(ExitCode::SUCCESS)
}
