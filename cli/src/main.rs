//! `autoclust`: the command line (docs/contract.md §4). The only place errors are
//! formatted: every library error becomes one `error:` line naming the file
//! and line, or the node, at fault; exit 1 for bad input or a failed check,
//! 2 for usage errors (clap's own exit code).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd_analyze;
mod cmd_bench;
mod cmd_cluster;
mod cmd_compile;
mod cmd_convert;
mod cmd_explore;
mod cmd_opt;
mod cmd_run;
mod cmd_verify;
mod error;
mod io;
mod model;
mod notes;
mod progress;

pub use error::CliError;

#[derive(Parser)]
#[command(
    name = "autoclust",
    version,
    about = "Auto-clustering compiler and runtime for TensorFlow graphs with resource variables"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Refuse, with an error naming the node, any tensor whose buffer would take more than
    /// BYTES: constants written out in full as they are read, large splat constants (kept
    /// compact, as TensorFlow writes them) when a kernel expands them, and every size
    /// computed at run time (Fill, Tile, Range, Gather, Concat, random ops, …) before it is
    /// allocated. Default 2147483648 (2 GiB).
    #[arg(long, global = true, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    max_tensor_bytes: Option<u64>,
}

#[derive(Subcommand)]
enum Command {
    /// Convert between .pbtxt, .pb and the native .graph format.
    Convert(cmd_convert::Args),
    /// Resource-operation safety analysis: resource ops and incompatible pairs.
    Analyze(cmd_analyze::Args),
    /// Auto-clustering: which nodes go into which cluster.
    Cluster(cmd_cluster::Args),
    /// Write the clustered program (bridges + cluster functions) in the native format.
    Compile(cmd_compile::Args),
    /// Run passes and print the graph in the native format.
    Opt(cmd_opt::Args),
    /// Run a graph in a session.
    Run(cmd_run::Args),
    /// Enumerate the outcomes a graph may produce under the seeds' semantics.
    Explore(cmd_explore::Args),
    /// Check that clustering adds no behaviour.
    Verify(cmd_verify::Args),
    /// Compare clustered and unclustered steps per second.
    Bench(cmd_bench::Args),
}

/// The process's allocator: mimalloc, for two measured reasons.
/// - **The passes.** Loading, optimizing and clustering a large graph make millions of small
///   allocations (node names, attribute maps, adjacency sets); with glibc's allocator,
///   `malloc`/`free` and their consolidation were ~30% of `autoclust cluster` on the
///   10⁵-node scale graph and ~20% of its clustered `run` (perf). Preloading mimalloc
///   cut the clustered run's CPU time 1.5× (BENCHMARKS.md, issue 19).
/// - **Freed tensors stay mapped.** A training step frees and reallocates megabytes of
///   activations every step; glibc's defaults unmap every buffer of 128 KiB or more when it
///   is freed (a TLB shootdown on every core and zeroed pages faulted in again: 35–45% of
///   the residual CNN bench step before `mallopt` raised the thresholds). mimalloc keeps
///   freed segments for reuse and returns them to the kernel only after a delay, as
///   TensorFlow's BFC allocator keeps its pool.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Writing to a closed pipe (`autoclust cluster G | head`) ends the process quietly, as
    // for any Unix filter, instead of panicking in `println!`.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    if let Some(bytes) = cli.max_tensor_bytes {
        autoclust_graph::limits::set_max_tensor_bytes(bytes);
    }
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.command {
        Command::Convert(a) => cmd_convert::run(a),
        Command::Analyze(a) => cmd_analyze::run(a),
        Command::Cluster(a) => cmd_cluster::run(a),
        Command::Compile(a) => cmd_compile::run(a),
        Command::Opt(a) => cmd_opt::run(a),
        Command::Run(a) => cmd_run::run(a),
        Command::Explore(a) => cmd_explore::run(a),
        Command::Verify(a) => cmd_verify::run(a),
        Command::Bench(a) => cmd_bench::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
