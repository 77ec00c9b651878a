//! `autoclust verify` (docs/contract.md §4): checks that auto-clustering adds no
//! behaviour — every outcome of the clustered program is an outcome of the
//! original (docs/semantics.md). Exit 0 with a one-line summary; otherwise
//! exit 1 with an outcome only the clustered program produces and the
//! schedule producing it.

use std::path::PathBuf;
use std::process::ExitCode;

use autoclust_semantics::{verify, RuntimeCalls};

use crate::cmd_explore::{describe_outcome, rename_fetches, Common, Loaded};
use crate::CliError;

#[derive(clap::Args)]
pub struct Args {
    /// The graph file (.pbtxt, .pb, .graph, a SavedModel directory, or - for standard input).
    pub graph: PathBuf,
    #[command(flatten)]
    pub common: Common,
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let Loaded { graph, model } = args.common.load(&args.graph)?;
    let (query, names) = args.common.query(model.as_ref())?;
    let mut inputs = args.common.inputs(&graph, model.as_ref())?;
    let tables = args.common.initialise(&graph, model.as_ref(), &mut inputs)?;
    let clusterer = args.common.clusterer(&graph)?;
    let eval = RuntimeCalls::with_tables(graph.library.clone(), tables);
    let mut verdict = verify(&graph, &query, &*clusterer, &inputs, &eval)
        .map_err(|e| CliError::input(format!("{}: {e}", args.graph.display())))?;
    rename_fetches(&mut verdict.original, &names);
    rename_fetches(&mut verdict.clustered, &names);
    let states = verdict.original.states_explored + verdict.clustered.states_explored;
    match verdict.witness() {
        None => {
            println!(
                "verify: ok: all {} outcomes of the clustered program are outcomes of the original ({} outcomes, {} states explored)",
                verdict.clustered.outcomes.len(),
                verdict.original.outcomes.len(),
                states
            );
            Ok(ExitCode::SUCCESS)
        }
        Some((outcome, schedule)) => {
            println!("verify: FAILED: the clustered program can produce an outcome the original cannot");
            println!("outcome: {}", describe_outcome(outcome));
            println!("schedule:");
            for (i, step) in schedule.iter().enumerate() {
                println!("  {}. {step}", i + 1);
            }
            eprintln!("error: {}: clustering adds behaviour: {}", args.graph.display(), describe_outcome(outcome));
            Ok(ExitCode::from(1))
        }
    }
}
