//! `autoclust bench` (CONTRACT.md §4): runs one graph unclustered (the plain
//! executor) and clustered (auto-clustered, JIT-compiled; see
//! [`crate::cmd_run`]) in one process, each in a fresh session with the same
//! initial variables and inputs, and reports steps per second of each, their
//! ratio and the one-time compile cost.
//!
//! Method: one warm-up step per mode (the clustered one compiles; its
//! compile time is `compile_ms`), then `--steps` timed steps in rounds that
//! alternate the two modes, so drift in machine load affects both alike.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use autoclust_runtime::call::CompilerOptions;

use crate::cmd_run::{clustered_session, optimized, prepare, InputArgs, Prepared};
use crate::io::Format;
use crate::model::load_to_run;
use crate::notes::print_notes;
use crate::CliError;

#[derive(clap::Args)]
pub struct Args {
    /// The graph file (.pbtxt, .pb, .graph, a SavedModel directory, or - for standard input).
    pub graph: PathBuf,
    #[command(flatten)]
    pub inputs: InputArgs,
    /// Timed steps per mode.
    #[arg(long, default_value_t = 100)]
    pub steps: u64,
    /// Print {"unclustered_steps_per_s", "clustered_steps_per_s", "speedup", "compile_ms", "clusters",
    /// "compiled_clusters", "interpreted_clusters", "clustered_nodes", "total_nodes"}.
    #[arg(long)]
    pub json: bool,
    /// Inter-op threads (default: the machine's cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Iterations after which a While loop fails the step (default 10000000).
    #[arg(long, value_name = "N")]
    pub max_loop_iterations: Option<u64>,
    /// Override the format implied by the extension.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Skip the graph-optimization pipeline in both modes (function calls are
    /// still inlined before clustering).
    #[arg(long)]
    pub no_optimize: bool,
    /// Time only one mode (for profiling); the other's figures are null.
    #[arg(long, value_enum)]
    pub only: Option<Mode>,
}

/// One of the two execution modes `bench` compares.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// The plain executor (`run --no-cluster`).
    Unclustered,
    /// Auto-clustered and JIT-compiled (`run`).
    Clustered,
}

fn step(p: &Prepared) -> Result<Duration, CliError> {
    let start = Instant::now();
    p.session.run(&p.request).map_err(|e| CliError::input(e.to_string()))?;
    Ok(start.elapsed())
}

pub fn run(mut args: Args) -> Result<ExitCode, CliError> {
    if args.steps == 0 {
        return Err(CliError::usage("--steps must be at least 1"));
    }
    let (graph, model) = load_to_run(&args.graph, args.format, args.inputs.signature.as_deref())?;
    let graph = Arc::new(graph);
    args.inputs.model = model.map(Arc::new);
    let options = crate::cmd_run::session_options(args.threads, None, args.max_loop_iterations)?;
    let plain = prepare(graph.clone(), &args.inputs, options.clone())?;
    let plain = if args.no_optimize { plain } else { optimized(plain, options.clone())? };
    let clustered = clustered_session(graph, &args.inputs, options, CompilerOptions::default(), !args.no_optimize)?;
    let report = clustered.report.clone().unwrap_or_default();
    // Warm-up: plans, kernels, and the clustered mode's compiles.
    step(&plain)?;
    step(&clustered)?;
    let jit = clustered.session.jit();
    print_notes(&plain.notes);
    print_notes(&report.notes);
    print_notes(&report.interpreted_notes(&jit.function_status()));
    let counts = report.counts(jit);
    let compile_ms = jit.compile_time().as_secs_f64() * 1e3;
    let cluster_fields = serde_json::json!({
        "clusters": report.clusters.len(),
        "compiled_clusters": counts.compiled,
        "interpreted_clusters": counts.interpreted,
        "clustered_nodes": report.clustered_nodes,
        "total_nodes": report.total_nodes,
    });
    let with_clusters = |mut out: serde_json::Value| {
        for (k, v) in cluster_fields.as_object().expect("an object") {
            out[k] = v.clone();
        }
        out
    };
    let rounds = args.steps.min(10);
    let (mut t_plain, mut t_clustered) = (Duration::ZERO, Duration::ZERO);
    // Steps of both modes (or the one timed), on a terminal only.
    let modes = if args.only.is_some() { 1 } else { 2 };
    let mut progress = crate::progress::Progress::new(args.steps * modes);
    let mut done = 0;
    let mut timed = |prepared: &Prepared, progress: &mut crate::progress::Progress| -> Result<Duration, CliError> {
        let t = step(prepared).inspect_err(|_| progress.finish())?;
        done += 1;
        progress.step(done);
        Ok(t)
    };
    for r in 0..rounds {
        let n = args.steps / rounds + u64::from(r < args.steps % rounds);
        if args.only != Some(Mode::Clustered) {
            for _ in 0..n {
                t_plain += timed(&plain, &mut progress)?;
            }
        }
        if args.only != Some(Mode::Unclustered) {
            for _ in 0..n {
                t_clustered += timed(&clustered, &mut progress)?;
            }
        }
    }
    progress.finish();
    let rate = |t: Duration| args.steps as f64 / t.as_secs_f64().max(1e-9);
    let (u, c) = (rate(t_plain), rate(t_clustered));
    let speedup = c / u;
    if let Some(only) = args.only {
        let (name, rate) = match only {
            Mode::Unclustered => ("unclustered_steps_per_s", u),
            Mode::Clustered => ("clustered_steps_per_s", c),
        };
        if args.json {
            let mut out = serde_json::json!({
                "unclustered_steps_per_s": null,
                "clustered_steps_per_s": null,
                "speedup": null,
                "compile_ms": compile_ms,
            });
            out[name] = serde_json::json!(rate);
            println!("{}", with_clusters(out));
        } else {
            println!("{name}: {rate:.1}");
            println!("compile:     {compile_ms:.2} ms");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.json {
        println!(
            "{}",
            with_clusters(serde_json::json!({
                "unclustered_steps_per_s": u,
                "clustered_steps_per_s": c,
                "speedup": speedup,
                "compile_ms": compile_ms,
            }))
        );
    } else {
        println!("unclustered: {u:.1} steps/s");
        println!("clustered:   {c:.1} steps/s");
        println!("speedup:     {speedup:.2}x");
        println!("compile:     {compile_ms:.2} ms");
        println!(
            "clusters:    {} ({} compiled, {} interpreted), {} of {} nodes",
            report.clusters.len(),
            counts.compiled,
            counts.interpreted,
            report.clustered_nodes,
            report.total_nodes
        );
    }
    Ok(ExitCode::SUCCESS)
}
