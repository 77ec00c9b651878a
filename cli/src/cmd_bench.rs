//! `autoclust bench` (docs/contract.md §4): runs one graph unclustered (the plain
//! executor) and clustered (auto-clustered, JIT-compiled; see
//! [`crate::cmd_run`]) in one process, each in a fresh session with the same
//! initial variables and inputs, and reports steps per second of each, their
//! ratio and the one-time compile cost.
//!
//! Method: one warm-up step per mode, the clustered one first (it compiles; its compile
//! time is `compile_ms`, and the wall time from clustering the loaded graph to the end of
//! that step is `first_step_ms`), then `--steps` timed steps in rounds that
//! alternate the two modes, so drift in machine load affects both alike.
//! `--profile` then runs the clustered mode again with the compiler's step
//! profiler on ([`autoclust_runtime::cluster_call::profile`]), after the timed rounds so it
//! never slows them.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use autoclust_runtime::cluster_call::{profile, CompilerOptions};

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
    /// Print {"unclustered_steps_per_s", "clustered_steps_per_s", "speedup", "compile_ms",
    /// "first_step_ms", "clusters", "compiled_clusters", "interpreted_clusters",
    /// "uncalled_clusters", "clustered_nodes", "total_nodes"}.
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
    /// After timing, run `--steps` more clustered steps with every compiled step timed and
    /// print where their time went: per compiled function and per plan step (fused loop,
    /// GEMM, kernel), and the share spent outside compiled code. With --json, a "profile"
    /// object.
    #[arg(long)]
    pub profile: bool,
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
    p.session.run(&p.request).map_err(|e| {
        CliError::input(crate::cmd_run::in_user_terms(e, &p.session, &p.request, &p.fetch_names).to_string())
    })?;
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
    // The clustered mode's first step as a user meets it: clustering, encapsulation, every
    // compile and the step's plan, then the step — before the unclustered mode runs any
    // step, so the memory the step touches is as fresh as in a process of its own.
    let first = Instant::now();
    let clustered = clustered_session(graph, &args.inputs, options, CompilerOptions::default(), !args.no_optimize)?;
    let report = clustered.report.clone().unwrap_or_default();
    // Warm-up: plans, kernels, and the clustered mode's compiles. A failure says first why
    // either mode is not the program it is meant to be (unoptimized, unclustered).
    let warm_up = step(&clustered).map(|_| first.elapsed()).and_then(|t| step(&plain).map(|_| t));
    let first_step_ms = match warm_up {
        Ok(t) => t.as_secs_f64() * 1e3,
        Err(e) => {
            print_notes(&plain.notes);
            print_notes(report.fallback_notes());
            print_notes(&report.interpreted_notes_beside(&clustered.session.jit().function_status(), &e.to_string()));
            return Err(e);
        }
    };
    let jit = clustered.session.jit();
    print_notes(&plain.notes);
    print_notes(&report.notes);
    let interpreted_said = report.interpreted_notes(&jit.function_status());
    print_notes(&interpreted_said);
    print_notes(&crate::notes::dropped_summary_notes(clustered.session.variable_store()));
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
    // The clusters as the timed steps ran them: one the interpreter took over during the
    // rounds (a megamorphic one, compiled code failing at run time) is named now.
    let later: Vec<String> = report
        .interpreted_notes(&jit.function_status())
        .into_iter()
        .filter(|n| !interpreted_said.contains(n))
        .collect();
    print_notes(&later);
    let counts = report.counts(jit);
    let compile_ms = jit.compile_time().as_secs_f64() * 1e3;
    let cluster_fields = serde_json::json!({
        "clusters": report.clusters.len(),
        "compiled_clusters": counts.compiled,
        "interpreted_clusters": counts.interpreted,
        "uncalled_clusters": counts.uncalled,
        "clustered_nodes": report.clustered_nodes,
        "total_nodes": report.total_nodes,
    });
    let with_clusters = |mut out: serde_json::Value| {
        for (k, v) in cluster_fields.as_object().expect("an object") {
            out[k] = v.clone();
        }
        out
    };
    let profile = if args.profile { Some(profile(&clustered, args.steps)?) } else { None };
    let with_clusters = |out: serde_json::Value| {
        let mut out = with_clusters(out);
        out["first_step_ms"] = serde_json::json!(first_step_ms);
        if let Some(p) = &profile {
            out["profile"] = p.json();
        }
        out
    };
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
            println!("first step:  {first_step_ms:.2} ms (clustered: clustering, compiles, plan and the step)");
            if let Some(p) = &profile {
                print!("{p}");
            }
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
        println!("first step:  {first_step_ms:.2} ms (clustered: clustering, compiles, plan and the step)");
        println!(
            "clusters:    {} ({} compiled, {} interpreted), {} of {} nodes",
            report.clusters.len(),
            counts.compiled,
            counts.interpreted,
            report.clustered_nodes,
            report.total_nodes
        );
        if let Some(p) = &profile {
            print!("{p}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Where `steps` clustered steps spent their time.
struct Profile {
    steps: u64,
    wall: Duration,
    report: profile::Report,
}

/// Rows of the step table printed (the rest are summed per function only).
const PROFILE_ROWS: usize = 15;

fn profile(clustered: &Prepared, steps: u64) -> Result<Profile, CliError> {
    profile::take();
    profile::set_enabled(true);
    let start = Instant::now();
    let result = (0..steps).try_for_each(|_| step(clustered).map(drop));
    let wall = start.elapsed();
    profile::set_enabled(false);
    let report = profile::take();
    result?;
    Ok(Profile { steps, wall, report })
}

impl Profile {
    fn per_step(&self, t: Duration) -> f64 {
        t.as_secs_f64() * 1e3 / self.steps as f64
    }
    fn share(&self, t: Duration) -> f64 {
        100.0 * t.as_secs_f64() / self.wall.as_secs_f64().max(1e-12)
    }
    /// Time in compiled code: the outermost compiled calls (a loop body's time is inside
    /// its `While` step's, and concurrent steps overlap, so the steps' rows do not add up).
    fn compiled(&self) -> Duration {
        self.report.outermost()
    }
    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "steps": self.steps,
            "ms_per_step": self.per_step(self.wall),
            "compiled_ms_per_step": self.per_step(self.compiled()),
            "functions": self.report.calls.iter().map(|c| serde_json::json!({
                "function": c.function, "ms_per_step": self.per_step(c.time), "share": self.share(c.time),
                "calls_per_step": c.calls as f64 / self.steps as f64, "nested": c.nested,
            })).collect::<Vec<_>>(),
            "steps_table": self.report.rows.iter().map(|r| serde_json::json!({
                "function": r.function, "step": r.step, "what": r.what, "nested": r.nested,
                "calls_per_step": r.calls as f64 / self.steps as f64,
                "ms_per_step": self.per_step(r.time), "share": self.share(r.time),
            })).collect::<Vec<_>>(),
        })
    }
}

impl std::fmt::Display for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let compiled = self.compiled();
        writeln!(f, "profile:     {} clustered steps, {:.3} ms per step", self.steps, self.per_step(self.wall))?;
        writeln!(
            f,
            "  in compiled code {:.1}%, outside it {:.1}% (executor, bridge, unclustered ops, interpreted clusters)",
            self.share(compiled),
            (100.0 - self.share(compiled)).max(0.0)
        )?;
        writeln!(f, "  {:>6}  {:>9}  {:>10}  function", "share", "ms/step", "calls/step")?;
        for c in &self.report.calls {
            writeln!(
                f,
                "  {:>5.1}%  {:>9.4}  {:>10.1}  {}{}",
                self.share(c.time),
                self.per_step(c.time),
                c.calls as f64 / self.steps as f64,
                c.function,
                if c.nested { " (called inside a loop or branch step: counted in that step)" } else { "" }
            )?;
        }
        writeln!(f, "  {:>6}  {:>9}  {:>10}  step", "share", "ms/step", "calls/step")?;
        for r in self.report.rows.iter().take(PROFILE_ROWS) {
            writeln!(
                f,
                "  {:>5.1}%  {:>9.4}  {:>10.1}  {} #{}: {}",
                self.share(r.time),
                self.per_step(r.time),
                r.calls as f64 / self.steps as f64,
                r.function,
                r.step,
                r.what
            )?;
        }
        if self.report.rows.len() > PROFILE_ROWS {
            writeln!(f, "  … {} more steps", self.report.rows.len() - PROFILE_ROWS)?;
        }
        Ok(())
    }
}
