//! Where a compiled step's time goes: per compiled function and per step of its plan
//! (each fused loop, GEMM, library kernel), for `autoclust bench --profile`.
//!
//! Off by default, and then free but for one relaxed atomic load per function call.
//! When on, every step of every compiled call is timed with a monotonic clock and its
//! time added to a per-(program, step) row under one lock (uncontended on the small
//! thread counts this runs with; profiling is a diagnostic mode, not a timed one). The
//! rows outlive the programs, so a report taken after a run covers every call made
//! while profiling was on.
//!
//! Each compiled call's own time is recorded too ([`Call`]). A function called from inside
//! another's step (a loop body or branch, called by its `While`/`If` kernel) is *nested*:
//! its time is already in that step's, so the share of a step spent in compiled code sums
//! the outermost calls only — never the steps' rows, which overlap when steps run
//! concurrently or one contains another.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// A row's key: (program identity, step index, nested).
type RowKey = (usize, usize, bool);

/// The rows recorded so far.
static ROWS: Mutex<Option<HashMap<RowKey, Row>>> = Mutex::new(None);

/// Calls keyed by (program identity, nested).
static CALLS: Mutex<Option<HashMap<(usize, bool), Call>>> = Mutex::new(None);

thread_local! {
    /// How many profiled steps this thread is inside (a step calling a loop body is one).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Marks the running thread as inside a profiled step while it lives: a compiled call
/// starting under it is nested.
pub(crate) struct InStep(());

impl InStep {
    pub(crate) fn enter() -> InStep {
        DEPTH.with(|d| d.set(d.get() + 1));
        InStep(())
    }
}

impl Drop for InStep {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Whether a compiled call starting now on this thread runs inside another's step.
pub(crate) fn nested() -> bool {
    DEPTH.with(|d| d.get() > 0)
}

/// Time spent in the calls of one compiled function.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    pub function: String,
    /// Called from inside another compiled function's step (a loop body, a branch).
    pub nested: bool,
    pub calls: u64,
    pub time: Duration,
}

/// What [`take`] returns: the steps' rows and the functions' calls.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// Slowest first.
    pub rows: Vec<Row>,
    /// Slowest first.
    pub calls: Vec<Call>,
}

impl Report {
    /// The time of the outermost compiled calls: the time spent in compiled code.
    pub fn outermost(&self) -> Duration {
        self.calls.iter().filter(|c| !c.nested).map(|c| c.time).sum()
    }
}

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
    /// Its function was called from inside another's step (see [`Call::nested`]).
    pub nested: bool,
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
pub(crate) fn record(
    program: usize,
    step: usize,
    nested: bool,
    time: Duration,
    describe: impl FnOnce() -> (String, String),
) {
    let mut rows = ROWS.lock().unwrap_or_else(|e| e.into_inner());
    let row = rows.get_or_insert_with(HashMap::new).entry((program, step, nested)).or_insert_with(|| {
        let (function, what) = describe();
        Row { function, step, what, calls: 0, time: Duration::ZERO, nested }
    });
    row.calls += 1;
    row.time += time;
}

/// Adds one call of the program identified by `program`, named by `function`.
pub(crate) fn record_call(program: usize, nested: bool, time: Duration, function: impl FnOnce() -> String) {
    let mut calls = CALLS.lock().unwrap_or_else(|e| e.into_inner());
    let call = calls.get_or_insert_with(HashMap::new).entry((program, nested)).or_insert_with(|| Call {
        function: function(),
        nested,
        calls: 0,
        time: Duration::ZERO,
    });
    call.calls += 1;
    call.time += time;
}

/// The rows and calls recorded so far, those of one (function, step, description, nesting)
/// merged (a function compiled for two signatures, or twice by two caches), slowest first;
/// recording starts afresh.
pub fn take() -> Report {
    let rows = ROWS.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_default();
    let calls = CALLS.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_default();
    Report { rows: merged(rows.into_values()), calls: merged(calls.into_values()) }
}

/// A record [`take`] merges across programs by what it describes.
trait Tally {
    type Key: Ord + std::hash::Hash;
    fn key(&self) -> Self::Key;
    fn totals(&mut self) -> (&mut u64, &mut Duration);
    fn time(&self) -> Duration;
}

impl Tally for Row {
    type Key = (String, usize, String, bool);
    fn key(&self) -> Self::Key {
        (self.function.clone(), self.step, self.what.clone(), self.nested)
    }
    fn totals(&mut self) -> (&mut u64, &mut Duration) {
        (&mut self.calls, &mut self.time)
    }
    fn time(&self) -> Duration {
        self.time
    }
}

impl Tally for Call {
    type Key = (String, bool);
    fn key(&self) -> Self::Key {
        (self.function.clone(), self.nested)
    }
    fn totals(&mut self) -> (&mut u64, &mut Duration) {
        (&mut self.calls, &mut self.time)
    }
    fn time(&self) -> Duration {
        self.time
    }
}

/// `items` with those of one key added together, slowest first (ties by key).
fn merged<T: Tally>(items: impl Iterator<Item = T>) -> Vec<T> {
    let mut by: HashMap<T::Key, T> = HashMap::new();
    for mut x in items {
        let key = x.key();
        match by.get_mut(&key) {
            Some(e) => {
                let ((c, t), (xc, xt)) = (e.totals(), x.totals());
                *c += *xc;
                *t += *xt;
            }
            None => {
                by.insert(key, x);
            }
        }
    }
    let mut out: Vec<(T::Key, T)> = by.into_iter().collect();
    out.sort_by(|(ka, a), (kb, b)| b.time().cmp(&a.time()).then_with(|| ka.cmp(kb)));
    out.into_iter().map(|(_, v)| v).collect()
}
