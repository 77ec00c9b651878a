//! Concurrent regions: runs of small, independent-enough plan steps that the team's
//! threads execute together, each step when its producers are done (a dataflow schedule
//! inside the region), instead of one after another on the caller.
//!
//! A large cluster — a whole training step of a convolutional network — becomes thousands
//! of steps of a few microseconds each: convolutions of a 2×2 feature map, fused loops over
//! a few hundred elements, a parallel branch's pooling. None is large enough to split
//! itself across the cores, so in step order they ran on one core while TensorFlow's (and
//! the plain executor's) inter-op scheduler ran independent branches on both.
//!
//! What a region is: a maximal run of consecutive steps in plan order each of which
//! [`may_share_core`] (no host step but those that only compute — the TensorList ops take
//! their operands to update them in place —
//! and nothing that would split itself: that keeps its team to itself and runs alone),
//! kept only when its estimated work off the critical path is worth a parallel section
//! ([`REGION_MIN_GAIN_NS`]). Steps outside regions run as before. A compiled `While` shares
//! a core whatever its operands' size and counts as long work ([`LOOP_NS`]), and the plan
//! orders loops after every other ready step, so independent loops (a bidirectional RNN's
//! two directions) end up adjacent in one region and run side by side, as the plain
//! executor runs them (a BiLSTM tagger's step 37 → 130 steps/s on two cores).
//!
//! Why running a region's steps in any dependency order is sound:
//! - Every step reads only values whose producers have finished: a step becomes ready when
//!   its in-region producers are done, and producers before the region finished before it
//!   began. Values are written once (SSA), and inputs are immutable tensors.
//! - A value whose last reader is in the region is dropped when its last reader *takes*
//!   it (a per-value count of readers still to start, under the region's lock), not at a
//!   fixed step: every reader has then got its own reference.
//! - A donated argument's buffer (see [`super::InPlace`]) is written only when (under the
//!   lock) no step that may fail is left in the region, every reader of the argument and
//!   its views has started, no other reference than the donating step's own exists, and
//!   the argument's table entries are dropped; otherwise the step computes into a buffer
//!   of its own. The argument's entries are never dropped early, so a failed call still
//!   gives the caller the unwritten argument back.
//! - Nested parallel sections (a kernel's own split) go to the region's crew (`team::Crew`):
//!   the step's thread runs their parts, joined by a member with nothing else ready; no
//!   step waits for a busy team.
//! - The first error in step order among the steps that ran is returned; no step starts
//!   after an error is seen.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Mutex;

use autoclust_graph::{DType, Tensor};

use super::{small_cost, Donated, Program, Step, StepKind, ValueId, PARALLEL_WORK};
use crate::kernels::KernelOp;
use crate::CompileError;

/// Estimated nanoseconds of a region's work that must lie off its critical path before
/// the region is worth a parallel section (a section's round trip costs a microsecond or
/// two), besides [`REGION_STEP_NS`] per step.
const REGION_MIN_GAIN_NS: usize = 6_000;

/// What running a step in a region adds to it: two lock acquisitions (contended when the
/// steps are short), and its operands read from the other core's cache half the time. A
/// region of steps of a few hundred nanoseconds each (a small model's whole training
/// step) never pays for itself: with 150 here, Keras' small MLP step ran 3× slower.
const REGION_STEP_NS: usize = 400;

/// The estimated nanoseconds of a compiled `While` (its trip count is unknown; a recurrent
/// layer's loop runs tens of iterations of a cell's GEMMs).
const LOOP_NS: usize = 100_000;

/// Elements (inputs and outputs) below which a library kernel never splits itself.
const SMALL_KERNEL_ELEMS: usize = 1 << 16;

/// No reader count: the value outlives the region (read after it, or returned).
const NO_SLOT: u32 = u32::MAX;

/// One concurrent region of a program's steps, `start..end` in plan order.
#[derive(Clone, Debug)]
pub(crate) struct Region {
    pub start: usize,
    pub end: usize,
    /// Per step of the region: how many of its producers lie in the region.
    pending: Vec<u32>,
    /// Per step: the region's steps that read its outputs (each once).
    users: Vec<Vec<u32>>,
    /// Per step: its distinct inputs and the reader-count slot of each ([`NO_SLOT`]).
    inputs: Vec<Vec<(ValueId, u32)>>,
    /// Per slot: the region's readers of its value.
    readers: Vec<u32>,
    /// Per slot: whether its value stays in the table when its last reader starts (a
    /// donatable argument and its views, which a failed call hands back).
    keep: Vec<bool>,
    /// The slots of those kept values.
    kept: std::collections::HashMap<ValueId, u32>,
    /// The region's steps that may fail (library kernels that are not `infallible`).
    fallible: u32,
}

/// Whether `step` may run on one core beside other steps: small enough that it would not
/// split itself, and not a host step.
pub(super) fn may_share_core(step: &Step, types: &[(DType, Vec<usize>)]) -> bool {
    let elems = |v: ValueId| types[v].1.iter().product::<usize>();
    match &step.kind {
        StepKind::View => true,
        StepKind::Gemm { .. } => small_cost(step, types).is_some(),
        StepKind::Fused { dims, ops, .. } => {
            small_cost(step, types).is_some() && dims.iter().product::<usize>() * ops.max(&1) < PARALLEL_WORK
        }
        // A compute kernel (a 3-D convolution, `LRN`, …) beside independent ones, as the
        // plain executor runs them; list ops take their operands and stay in order.
        StepKind::Kernel { op: KernelOp::Host(h) } => h.computes_only(),
        // A loop's own parallel sections (its body's GEMMs) go to the region's crew.
        StepKind::Kernel { op: KernelOp::While(_) } => true,
        StepKind::Kernel { op: KernelOp::Conv { shape, .. } } => shape.macs() < crate::gemm::SPLIT_MACS_AWAKE,
        StepKind::Kernel { .. } => {
            step.inputs.iter().chain(&step.outputs).map(|&v| elems(v)).sum::<usize>() < SMALL_KERNEL_ELEMS
        }
    }
}

/// A rough estimate of a step's nanoseconds on one core (for the region's gain only),
/// calibrated on `bench --profile` of Keras and keras.applications steps on AVX-512: a
/// fused loop ~0.08 ns per element and op (vectorised), a GEMM ~100 multiply-adds per
/// nanosecond, a small convolution (im2col, depthwise) ~8, a library kernel ~4 elements.
fn cost_ns(step: &Step, types: &[(DType, Vec<usize>)]) -> usize {
    let elems = |v: ValueId| types[v].1.iter().product::<usize>();
    let macs = |a, b, c| super::gemm_macs(types, a, b, c);
    match &step.kind {
        StepKind::View => 50,
        StepKind::Kernel { op: KernelOp::Conv { shape, .. } } => 500 + shape.macs() / 8,
        // A loop runs its body many times: worth a core of its own beside an independent
        // one (a bidirectional RNN's two directions), which the plain executor gives them.
        StepKind::Kernel { op: KernelOp::While(_) } => LOOP_NS,
        // The interpreter's kernels: generic loops, about a nanosecond per element.
        StepKind::Kernel { op: KernelOp::Host(_) } => {
            1_000 + step.inputs.iter().chain(&step.outputs).map(|&v| elems(v)).sum::<usize>()
        }
        StepKind::Kernel { .. } => 300 + step.inputs.iter().chain(&step.outputs).map(|&v| elems(v)).sum::<usize>() / 4,
        StepKind::Gemm { .. } => 300 + macs(step.inputs[0], step.inputs[1], step.outputs[0]) / 100,
        StepKind::Fused { dims, ops, gemm, .. } => {
            let pro = gemm.as_ref().map_or(0, |gp| macs(gp.a, gp.b, gp.out));
            200 + dims.iter().product::<usize>() * ops.max(&1) / 12 + pro / 100
        }
    }
}

/// The concurrent regions of `steps` (in plan order), whose `shares[i]` says whether step
/// `i` [`may_share_core`] (all false with one thread, so there are no regions). Values
/// listed in `keep` (donatable arguments and their views) are never dropped by a region.
pub(crate) fn regions(
    steps: &[Step],
    shares: &[bool],
    types: &[(DType, Vec<usize>)],
    last_use: &[Option<usize>],
    retvals: &[ValueId],
    keep: &[ValueId],
) -> Vec<Region> {
    if !shares.contains(&true) {
        return Vec::new();
    }
    let retvals: std::collections::HashSet<ValueId> = retvals.iter().copied().collect();
    let keep: std::collections::HashSet<ValueId> = keep.iter().copied().collect();
    let mut out = Vec::new();
    let mut si = 0;
    while si < steps.len() {
        if !shares[si] {
            si += 1;
            continue;
        }
        let start = si;
        while si < steps.len() && shares[si] {
            si += 1;
        }
        if si - start >= 2 {
            if let Some(r) = region(steps, types, last_use, &retvals, &keep, start, si) {
                out.push(r);
            }
        }
    }
    if tracing::enabled!(tracing::Level::DEBUG) {
        let cost = |r: std::ops::Range<usize>| r.map(|i| cost_ns(&steps[i], types)).sum::<usize>();
        let in_regions: usize = out.iter().map(|r| cost(r.start..r.end)).sum();
        let shared: usize = (0..steps.len()).filter(|&i| shares[i]).map(|i| cost_ns(&steps[i], types)).sum();
        tracing::debug!(
            regions = out.len(),
            steps = steps.len(),
            steps_in_regions = out.iter().map(|r| r.end - r.start).sum::<usize>(),
            est_us = cost(0..steps.len()) / 1000,
            est_us_may_share = shared / 1000,
            est_us_in_regions = in_regions / 1000,
            "concurrent regions"
        );
        for r in &out {
            tracing::trace!(start = r.start, end = r.end, "region");
        }
    }
    out
}

/// The region `start..end`, when its work off the critical path is worth the section.
fn region(
    steps: &[Step],
    types: &[(DType, Vec<usize>)],
    last_use: &[Option<usize>],
    retvals: &std::collections::HashSet<ValueId>,
    keep: &std::collections::HashSet<ValueId>,
    start: usize,
    end: usize,
) -> Option<Region> {
    let n = end - start;
    let mut producer: std::collections::HashMap<ValueId, u32> = std::collections::HashMap::new();
    for (l, s) in steps[start..end].iter().enumerate() {
        for &o in &s.outputs {
            producer.insert(o, l as u32);
        }
    }
    let mut pending = vec![0u32; n];
    let mut users: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut inputs: Vec<Vec<(ValueId, u32)>> = vec![Vec::new(); n];
    let mut slot_of: std::collections::HashMap<ValueId, u32> = std::collections::HashMap::new();
    let mut readers: Vec<u32> = Vec::new();
    let mut keep_slot: Vec<bool> = Vec::new();
    let mut finish = vec![0usize; n];
    let mut total = 0usize;
    for (l, s) in steps[start..end].iter().enumerate() {
        let mut ready_at = 0;
        let mut deps: Vec<u32> = Vec::new();
        for &v in &s.inputs {
            if inputs[l].iter().any(|&(w, _)| w == v) {
                continue;
            }
            if let Some(&p) = producer.get(&v) {
                if !deps.contains(&p) {
                    deps.push(p);
                }
            }
            let freed_here = last_use[v].is_some_and(|u| (start..end).contains(&u)) && !retvals.contains(&v);
            let slot = if freed_here {
                *slot_of.entry(v).or_insert_with(|| {
                    readers.push(0);
                    keep_slot.push(keep.contains(&v));
                    (readers.len() - 1) as u32
                })
            } else {
                NO_SLOT
            };
            if slot != NO_SLOT {
                readers[slot as usize] += 1;
            }
            inputs[l].push((v, slot));
        }
        for &p in &deps {
            users[p as usize].push(l as u32);
            ready_at = ready_at.max(finish[p as usize]);
        }
        pending[l] = deps.len() as u32;
        let c = cost_ns(s, types);
        finish[l] = ready_at + c;
        total += c;
    }
    let critical = finish.iter().copied().max().unwrap_or(0);
    if total.saturating_sub(critical) < REGION_MIN_GAIN_NS + n * REGION_STEP_NS {
        return None;
    }
    let fallible =
        steps[start..end].iter().filter(|s| matches!(&s.kind, StepKind::Kernel { op } if !op.infallible())).count()
            as u32;
    let kept = slot_of.into_iter().filter(|&(_, slot)| keep_slot[slot as usize]).collect();
    Some(Region { start, end, pending, users, inputs, readers, keep: keep_slot, kept, fallible })
}

/// A region's state during one run, under its lock.
struct RegionRun<'v> {
    vals: &'v mut [Option<Tensor>],
    ready: BinaryHeap<Reverse<u32>>,
    pending: Vec<u32>,
    readers: Vec<u32>,
    /// Steps not finished.
    left: usize,
    /// Steps that may fail and have not finished.
    fallible_left: u32,
    error: Option<(usize, CompileError)>,
    written: bool,
    /// A step's panic, re-raised on the caller once every member has stopped (a member
    /// must not wait for a step that will never finish).
    panic: Option<Box<dyn std::any::Any + Send>>,
}

/// A step taken from the ready set, with its inputs.
struct Taken {
    local: usize,
    inputs: Vec<(ValueId, Tensor)>,
}

thread_local! {
    /// A worker's value table: only the inputs of the step it runs are set, and cleared
    /// after it (the step functions index values by id).
    static TABLE: RefCell<Vec<Option<Tensor>>> = const { RefCell::new(Vec::new()) };
}

/// The data pointer of a value's buffer, for identity comparisons.
fn buffer(t: &Tensor) -> *mut u8 {
    super::data_ptr(t)
}

impl Program {
    /// Runs the steps of region `r` on the team's threads, in dependency order.
    pub(super) fn run_region(
        &self,
        r: &Region,
        vals: &mut [Option<Tensor>],
        donations: &Donated,
        written: &mut bool,
        profiling: Option<bool>,
    ) -> Result<(), CompileError> {
        let ready = r.pending.iter().enumerate().filter(|(_, &p)| p == 0).map(|(l, _)| Reverse(l as u32)).collect();
        let state = Mutex::new(RegionRun {
            vals,
            ready,
            pending: r.pending.clone(),
            readers: r.readers.clone(),
            left: r.end - r.start,
            fallible_left: r.fallible,
            error: None,
            written: false,
            panic: None,
        });
        // SAFETY (Send): the write pointers point into buffers this call owns; a donation is
        // handed to one step only, after every other reference is gone (module doc).
        struct Shared<'a>(&'a Donated);
        unsafe impl Sync for Shared<'_> {}
        let shared = Shared(donations);
        let crew = crate::team::Crew::new();
        crate::team::run(self.threads, &|_| {
            let donations = &shared;
            crew.member(|| self.region_worker(r, &state, &crew, donations.0, profiling))
        });
        let st = state.into_inner().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = st.panic {
            std::panic::resume_unwind(p);
        }
        *written |= st.written;
        match st.error {
            Some((_, e)) => Err(e),
            None => Ok(()),
        }
    }

    /// One thread of a region: takes ready steps and runs them until none is left.
    fn region_worker(
        &self,
        r: &Region,
        state: &Mutex<RegionRun<'_>>,
        crew: &crate::team::Crew,
        donations: &Donated,
        profiling: Option<bool>,
    ) {
        let mut table = TABLE.with(|t| t.try_borrow_mut().map(|mut t| std::mem::take(&mut *t)).unwrap_or_default());
        if table.len() < self.types.len() {
            table.resize(self.types.len(), None);
        }
        let mut idle = 0u32;
        loop {
            let taken = {
                let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
                if st.error.is_some() || st.left == 0 {
                    break;
                }
                match st.ready.pop() {
                    Some(Reverse(l)) => self.take_step(r, &mut st, l as usize, donations),
                    None => None,
                }
            };
            let Some(taken) = taken else {
                // The other thread runs the steps this one waits for: help it with its
                // step's own split, if it posted one.
                if crew.help() {
                    idle = 0;
                    continue;
                }
                idle += 1;
                std::hint::spin_loop();
                if idle.is_multiple_of(64) {
                    std::thread::yield_now();
                }
                continue;
            };
            idle = 0;
            let si = r.start + taken.local;
            let step = &self.steps[si];
            let start = profiling.map(|nested| (std::time::Instant::now(), nested, crate::profile::InStep::enter()));
            let mut w = false;
            for (v, t) in taken.inputs {
                table[v] = Some(t);
            }
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match &step.kind {
                StepKind::View => super::value(&table, step.inputs[0], &step.name).map(|x| {
                    let (dtype, shape) = self.types[step.outputs[0]].clone();
                    vec![Tensor { dtype, shape, data: x.data }]
                }),
                _ => self.step_outputs(si, &table, donations, &mut w),
            }));
            for &(v, _) in &r.inputs[taken.local] {
                table[v] = None;
            }
            if let Some((start, nested, in_step)) = start {
                drop(in_step);
                self.record(si, nested, start);
            }
            let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
            st.written |= w;
            st.left -= 1;
            if matches!(&step.kind, StepKind::Kernel { op } if !op.infallible()) {
                st.fallible_left -= 1;
            }
            let result = match result {
                Ok(r) => r,
                Err(payload) => {
                    st.panic.get_or_insert(payload);
                    Err(CompileError::Runtime { node: step.name.clone(), reason: "panicked".into() })
                }
            };
            match result {
                Ok(outs) => {
                    for (&o, t) in step.outputs.iter().zip(outs) {
                        st.vals[o] = Some(t);
                    }
                    for &u in &r.users[taken.local] {
                        st.pending[u as usize] -= 1;
                        if st.pending[u as usize] == 0 {
                            st.ready.push(Reverse(u));
                        }
                    }
                }
                Err(e) => {
                    if st.error.as_ref().is_none_or(|(at, _)| si < *at) {
                        st.error = Some((si, e));
                    }
                }
            }
        }
        TABLE.with(|t| {
            if let Ok(mut t) = t.try_borrow_mut() {
                if t.len() < table.len() {
                    *t = table;
                }
            }
        });
    }

    /// Takes step `l` of region `r` out of the ready set (under the lock): its inputs (the
    /// last reader of a value takes it out of the table) and the donations it may use.
    fn take_step(&self, r: &Region, st: &mut RegionRun<'_>, l: usize, donations: &Donated) -> Option<Taken> {
        let si = r.start + l;
        let step = &self.steps[si];
        let mut inputs = Vec::with_capacity(r.inputs[l].len());
        for &(v, slot) in &r.inputs[l] {
            let last = slot != NO_SLOT && {
                st.readers[slot as usize] -= 1;
                st.readers[slot as usize] == 0 && !r.keep[slot as usize]
            };
            let t = if last { st.vals[v].take() } else { st.vals[v].clone() };
            match t {
                Some(t) => inputs.push((v, t)),
                None => {
                    let e = CompileError::Runtime { node: step.name.clone(), reason: format!("value {v} missing") };
                    st.left -= 1;
                    if st.error.as_ref().is_none_or(|(at, _)| si < *at) {
                        st.error = Some((si, e));
                    }
                    return None;
                }
            }
        }
        // A donation this step may take: the argument's entries leave the table, so the
        // step's own inputs hold the buffer's only references (`donated_out` checks that).
        // Otherwise the entries' references make `donated_out` decline.
        // Not in a region: a scatter, which may fail itself once its entries are gone, and a
        // pair whose later scatters' indices would have to be checked (the step's own table
        // here holds only its inputs).
        for &k in &self.donates[si] {
            let k = k as usize;
            if let Some(ptr) = donations.get(k).copied().flatten() {
                if st.fallible_left == 0
                    && self.in_place[k].prechecks.is_empty()
                    && self.may_donate(r, st, k, ptr, &inputs)
                {
                    for &a in &self.in_place[k].alias {
                        st.vals[a] = None;
                    }
                }
            }
        }
        Some(Taken { local: l, inputs })
    }

    /// Whether in-place pair `k`'s buffer `ptr` may be written by the step taking
    /// `inputs`: every reader of the argument and its views has started, and the buffer's
    /// only references are their table entries and those inputs.
    fn may_donate(&self, r: &Region, st: &RegionRun<'_>, k: usize, ptr: *mut u8, inputs: &[(ValueId, Tensor)]) -> bool {
        let mut holders = 0;
        let mut data = None;
        for &a in &self.in_place[k].alias {
            let Some(t) = &st.vals[a] else { continue };
            if buffer(t) != ptr {
                return false;
            }
            // Every reader of this alias in the region has started (none is left after it).
            if r.kept.get(&a).is_none_or(|&slot| st.readers[slot as usize] != 0) {
                return false;
            }
            holders += 1;
            data = Some(&t.data);
        }
        let own = inputs.iter().filter(|(_, t)| buffer(t) == ptr).count();
        data.is_some_and(|data| super::strong_count(data) == holders + own)
    }
}
