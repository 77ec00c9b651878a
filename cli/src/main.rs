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
///
/// [`keep_freed_memory`] then turns off mimalloc's purging altogether.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (index 15 of `mi_option_t` in the mimalloc v3 that
/// libmimalloc-sys builds; a unit test checks the index by its default, 1000 ms, from
/// mimalloc's `options.c`).
const MI_OPTION_PURGE_DELAY: i32 = 15;

/// mimalloc's `mi_option_allow_thp` (index 43 of the same `mi_option_t`; the unit test
/// checks it by its default, 1, and by the next option's, `minimal_purge_size` = 0).
const MI_OPTION_ALLOW_THP: i32 = 43;

extern "C" {
    fn mi_option_set(option: i32, value: std::ffi::c_long);
    #[cfg(test)]
    fn mi_option_get(option: i32) -> std::ffi::c_long;
}

/// Memory the process frees stays committed for reuse instead of being returned to the
/// kernel a second later (mimalloc's default purge delay; `MIMALLOC_PURGE_DELAY` in the
/// environment still wins). Measured on the 10⁵-node scale graph, clustered `run`
/// (5 runs each, alternated): the passes free and reallocate ~1 GiB while the graph is
/// rewritten, and mimalloc purged 1.1 GiB that was then faulted in again as transparent
/// huge pages, each zeroed by the kernel — 20% of the samples in `clear_page_erms`, wall
/// 6.15 s → 4.48 s (median), system time 2.5 s → 1.0 s, peak RSS 0.87 → 0.95 GB. The
/// footprint is the peak the run reached, which a training loop reaches every step.
fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one mimalloc option; mimalloc reads options atomically.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    }
}

/// Fresh memory comes in 4 KiB pages, not transparent huge pages (`MIMALLOC_ALLOW_THP` in
/// the environment still wins): mimalloc asks for huge pages on its arenas, and on the
/// virtual machines measured the kernel then zeroes (and sometimes first compacts) 2 MiB
/// per fault whatever part of it the process touches. Measured on the 10⁶-node scale
/// graph, clustered `run` (alternated, BENCHMARKS.md): system time 7.2–7.5 s → 3.0 s,
/// wall 30–32 s → 27–29 s, peak RSS 2.96 → 2.94 GB. Steady-state steps were unchanged
/// within the noise (ResNet50V2 and DenseNet121 Adam steps, the Keras transformer block,
/// residual CNN, inference MLP and wide-and-deep benches, three rounds each): the buffers
/// a step reuses stay mapped (`keep_freed_memory`) either way.
fn use_small_pages() {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
        return;
    }
    // SAFETY: sets one mimalloc option (read atomically at each OS allocation).
    unsafe { mi_option_set(MI_OPTION_ALLOW_THP, 0) };
    // Memory mapped before this point (and by the C runtime) too; harmless where THP is
    // off or the call is unknown.
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_THP_DISABLE only sets a flag on this process.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

fn main() -> ExitCode {
    // Writing to a closed pipe (`autoclust cluster G | head`) ends the process quietly, as
    // for any Unix filter, instead of panicking in `println!`.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    keep_freed_memory();
    use_small_pages();
    let cli = Cli::parse();
    if let Some(bytes) = cli.max_tensor_bytes {
        autoclust_graph::limits::set_max_tensor_bytes(bytes);
    }
    // `AUTOCLUST_SPAN_TIMES=1` adds one event when each span (pass, clustering,
    // compile…) closes, with its busy and idle time and its thread: where a run's
    // time goes.
    let span_times = std::env::var_os("AUTOCLUST_SPAN_TIMES").is_some();
    let span_events = if span_times {
        tracing_subscriber::fmt::format::FmtSpan::CLOSE
    } else {
        tracing_subscriber::fmt::format::FmtSpan::NONE
    };
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_span_events(span_events)
        .with_thread_ids(span_times)
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
        Ok(code) => {
            notes::flush();
            code
        }
        Err(e) => {
            eprintln!("error: {e}");
            notes::flush();
            ExitCode::from(e.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purge_delay_is_the_option_we_set() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        // SAFETY: reads one mimalloc option.
        let before = unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(before, 1000, "index {MI_OPTION_PURGE_DELAY} is not mimalloc's purge_delay (default 1000 ms)");
        keep_freed_memory();
        // SAFETY: as above.
        assert_eq!(unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) }, -1);
    }

    #[test]
    fn allow_thp_is_the_option_we_set() {
        if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
            return;
        }
        // SAFETY: reads mimalloc options.
        let (before, next) = unsafe { (mi_option_get(MI_OPTION_ALLOW_THP), mi_option_get(MI_OPTION_ALLOW_THP + 1)) };
        assert_eq!((before, next), (1, 0), "index {MI_OPTION_ALLOW_THP} is not mimalloc's allow_thp");
        use_small_pages();
        // SAFETY: as above.
        assert_eq!(unsafe { mi_option_get(MI_OPTION_ALLOW_THP) }, 0);
        #[cfg(target_os = "linux")]
        // SAFETY: reads this process's flag.
        assert_eq!(unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) }, 1);
    }
}
