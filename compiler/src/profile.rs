//! Where a compiled step's time goes: per compiled function and per step of its plan
//! (each fused loop, GEMM, library kernel), for `autoclust bench --profile`.
//!
//! Off by default, and then free but for one relaxed atomic load per function call.
//! When on, every step of every compiled call is timed with a monotonic clock and its
//! time added to a per-(program, step) row under one lock (uncontended on the small
//! thread counts this runs with; profiling is a diagnostic mode, not a timed one). The
//! rows outlive the programs, so a report taken after a run covers every call made
//! while profiling was on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Rows keyed by (program identity, step index).
static ROWS: Mutex<Option<HashMap<(usize, usize), Row>>> = Mutex::new(None);

/// Time spent in one step of one compiled function.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The compiled function (`cluster_N_fn`, or a loop body's cluster function).
    pub function: String,
    /// The step's index in the function's plan.
    pub step: usize,
    /// What the step is, as `--dump-clif` writes it (`fused 3 ops over [32, 256] … at x`).
    pub what: String,
    /// How many times it ran.
    pub calls: u64,
    /// Its total time.
    pub time: Duration,
}

/// Turns profiling on or off (for the whole process).
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

pub(crate) fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Adds one run of step `step` of the program identified by `program` (its address; a
/// program lives as long as the compile cache holds it).
pub(crate) fn record(program: usize, step: usize, time: Duration, describe: impl FnOnce() -> (String, String)) {
    let mut rows = ROWS.lock().unwrap_or_else(|e| e.into_inner());
    let row = rows.get_or_insert_with(HashMap::new).entry((program, step)).or_insert_with(|| {
        let (function, what) = describe();
        Row { function, step, what, calls: 0, time: Duration::ZERO }
    });
    row.calls += 1;
    row.time += time;
}

/// The rows recorded so far, the rows of one (function, step, description) merged (a
/// function compiled for two signatures, or twice by two caches), slowest first;
/// recording starts afresh.
pub fn take() -> Vec<Row> {
    let rows = ROWS.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_default();
    let mut merged: HashMap<(String, usize, String), Row> = HashMap::new();
    for r in rows.into_values() {
        let e = merged.entry((r.function.clone(), r.step, r.what.clone())).or_insert_with(|| Row {
            calls: 0,
            time: Duration::ZERO,
            ..r.clone()
        });
        e.calls += r.calls;
        e.time += r.time;
    }
    let mut out: Vec<Row> = merged.into_values().collect();
    out.sort_by(|a, b| b.time.cmp(&a.time).then_with(|| (&a.function, a.step).cmp(&(&b.function, b.step))));
    out
}
