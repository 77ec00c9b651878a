//! `autoclust convert GRAPH -o OUT` (docs/contract.md §4): reads a graph in any
//! format and writes it in the format OUT's extension names (`--to`
//! overrides it, e.g. for `-o -`). The output is written atomically, so a
//! failed conversion leaves no file.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::io::{graph_to_bytes, write_atomic, Format};
use crate::CliError;

#[derive(clap::Args)]
pub struct Args {
    /// The graph file (.pbtxt, .pb, .graph, a SavedModel directory, or - for standard input).
    pub graph: PathBuf,
    /// The output file; its extension picks the format (- for standard output).
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// A SavedModel's signature: its function calls inlined, the graph pruned to its outputs.
    #[arg(long, value_name = "NAME")]
    pub signature: Option<String>,
    /// The input format, overriding the extension.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// The output format, overriding OUT's extension.
    #[arg(long, value_enum)]
    pub to: Option<Format>,
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let _span = tracing::info_span!("convert").entered();
    // Decide the output format before any work, so a bad OUT is a usage error.
    let to = match (args.to, args.output.as_os_str() == "-") {
        (Some(f), _) => f,
        (None, true) => Format::Native,
        (None, false) => Format::for_path(&args.output, None)?,
    };
    let graph = crate::model::load_graph_for_signature(&args.graph, args.format, args.signature.as_deref())?;
    let bytes = graph_to_bytes(&graph, to)?;
    write_atomic(&args.output, &bytes)?;
    Ok(ExitCode::SUCCESS)
}
