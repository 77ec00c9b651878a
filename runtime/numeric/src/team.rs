//! A fork-join team for splitting one compiled step (a large fused loop, a GEMM) across
//! the cores, with helper threads that spin between steps instead of sleeping.
//!
//! A clustered training step is a handful of parallel sections a few tens of
//! microseconds apart (forward GEMM, backward GEMM, weight update), repeated every few
//! hundred microseconds. Handing each section to rayon's pool put its workers to sleep
//! in between, and on a 2-vCPU VM the futex wake-ups cost more than the second core
//! gained: the MLP step ran faster pinned to one core. The helpers here spin (with
//! `spin_loop` hints and periodic yields) for [`SPIN`] after their last part before they
//! park — OpenMP runtimes' "blocktime", which Intel's sets to 200 ms — so the sections of
//! one step, and the steps of a training loop, find them awake.
//!
//! The team serves one parallel section at a time. A caller that finds it busy (another
//! thread's section, or a section nested in a part) runs all its parts itself. A caller
//! on a rayon worker thread (the interpreter's parallel executor) splits its parts over
//! that pool instead, as before, so the two never compete for the same section.
//!
//! On a machine busier than its cores a helper may not get a core when a section starts,
//! or lose it in the middle of a part: the caller then yields while it waits, and after
//! several sections in a row that no helper took a part of, runs the next ones alone
//! before trying the helpers again (`Shares`) — so a loaded machine runs a clustered step
//! as fast as one core would, not slower (sweep 17: a convolution step at 230 steps/s
//! against 4,100 pinned to one core, before).
//!
//! A [`Crew`] is the threads running one concurrent region of a plan (`plan::region`),
//! which hold the team between them: a section nested in one member's step is posted to
//! the crew, and a member with no step of its own to run joins it, so a convolution that
//! splits over its images still uses both cores when the region has nothing else ready.
//!
//! Invariant: [`run`] returns only after every part ran exactly once and no helper can
//! touch the section's closure any more (helpers join a section under the team's lock
//! while it is published and leave it by decrementing its reference count; the caller
//! unpublishes it under the same lock and then waits for the count to reach zero).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long an idle helper spins before it parks.
const SPIN: Duration = Duration::from_millis(2);

/// One parallel section, on its caller's stack.
struct Section<'f> {
    f: &'f (dyn Fn(usize) + Sync),
    parts: usize,
    next: AtomicUsize,
    done: AtomicUsize,
    /// Helpers currently inside the section.
    refs: AtomicUsize,
    /// A part panicked on a helper (the caller re-raises it).
    panicked: AtomicBool,
    /// The caller's floating-point modes, which helpers run its parts with (subnormals
    /// flushed in a session's step, `crate::denormals`), so no result depends on the thread.
    modes: Option<u64>,
}

impl<'f> Section<'f> {
    fn new(f: &'f (dyn Fn(usize) + Sync), parts: usize) -> Section<'f> {
        Section {
            f,
            parts,
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            refs: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            modes: crate::denormals::current(),
        }
    }

    /// After the section was withdrawn: waits until every part is done and no helper is
    /// inside it any more.
    ///
    /// Spins briefly, then yields between checks: on a machine busier than its cores, the
    /// helper still running a part may be waiting for this very core.
    fn wait(&self) {
        let mut spins = 0u32;
        while self.done.load(Ordering::Acquire) < self.parts || self.refs.load(Ordering::Acquire) > 0 {
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins >= 1024 && spins.is_multiple_of(16) {
                std::thread::yield_now();
            }
        }
    }

    /// Re-raises a part's panic on the caller.
    fn reraise(&self) {
        if self.panicked.load(Ordering::Relaxed) {
            panic!("a part of a parallel section panicked");
        }
    }

    /// [`Section::work`] on a thread other than the caller's, with the caller's modes.
    fn help(&self) -> usize {
        crate::denormals::with_modes(self.modes, || self.work())
    }

    /// Claims and runs parts until none are left; how many it ran.
    fn work(&self) -> usize {
        let mut ran = 0;
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.parts {
                return ran;
            }
            ran += 1;
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.f)(i))).is_err() {
                self.panicked.store(true, Ordering::Relaxed);
            }
            self.done.fetch_add(1, Ordering::Release);
        }
    }
}

/// A published section's address (its lifetime erased; see the module invariant).
#[derive(Clone, Copy)]
struct Published(*const Section<'static>);
// SAFETY: the section is `Sync` data (atomics and a `Sync` closure) that outlives every
// helper's use of it (module invariant).
unsafe impl Send for Published {}

struct State {
    section: Option<Published>,
    /// Incremented for every published section.
    epoch: u64,
    sleepers: usize,
}

struct Team {
    state: Mutex<State>,
    wake: Condvar,
    /// `State::epoch`, readable without the lock by spinning helpers.
    epoch: AtomicU64,
    busy: AtomicBool,
    helpers: usize,
    /// Helpers parked on `wake` (`State::sleepers`, readable without the lock).
    parked: AtomicUsize,
    shares: Shares,
}

/// Whether helpers are worth waiting for: sections in a row whose caller ran every part
/// itself (no helper got there in time), and the sections still to run alone.
#[derive(Default)]
struct Shares {
    misses: AtomicUsize,
    solo: AtomicUsize,
}

impl Shares {
    /// Whether the next section runs on its caller alone (and counts it).
    fn take_solo(&self) -> bool {
        self.solo.load(Ordering::Relaxed) > 0
            && self.solo.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok()
    }

    /// Records a shared section whose caller ran `mine` of its `parts`.
    fn record(&self, mine: usize, parts: usize) {
        if mine < parts {
            self.misses.store(0, Ordering::Relaxed);
        } else if self.misses.fetch_add(1, Ordering::Relaxed) + 1 >= MISSES_BEFORE_SOLO {
            self.misses.store(0, Ordering::Relaxed);
            self.solo.store(SOLO_RUN, Ordering::Relaxed);
        }
    }
}

/// After this many sections in a row that no helper took a part of, the next [`SOLO_RUN`]
/// sections run on their caller alone: the helpers are not getting a core (the machine is
/// busier than its cores) or the parts are too small to share, and a section that waits
/// for a descheduled helper, or a helper spinning for sections it never reaches, only takes
/// CPU from the caller. Then helpers are tried again.
const MISSES_BEFORE_SOLO: usize = 4;
const SOLO_RUN: usize = 64;

/// The cores this process may use, asked once: `available_parallelism` reads the cgroup's
/// quota files on every call, which was 4% of compiling the ~800 small clusters of the
/// 10⁵-node scale graph when every compile asked.
pub fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
}

fn team() -> &'static Team {
    static TEAM: OnceLock<&'static Team> = OnceLock::new();
    TEAM.get_or_init(|| {
        let cores = cores();
        let t: &'static Team = Box::leak(Box::new(Team {
            state: Mutex::new(State { section: None, epoch: 0, sleepers: 0 }),
            wake: Condvar::new(),
            epoch: AtomicU64::new(0),
            busy: AtomicBool::new(false),
            helpers: cores.saturating_sub(1),
            parked: AtomicUsize::new(0),
            shares: Shares::default(),
        }));
        for k in 0..t.helpers {
            // A helper that cannot be spawned only means fewer hands; parts still all run.
            let _ = std::thread::Builder::new().name(format!("autoclust-team-{k}")).spawn(move || helper(t));
        }
        t
    })
}

fn helper(t: &'static Team) {
    let mut seen = 0u64;
    loop {
        // Spin until a new section is published or the spin time is up.
        let start = Instant::now();
        let mut spins = 0u32;
        while t.epoch.load(Ordering::Acquire) == seen {
            std::hint::spin_loop();
            spins += 1;
            if spins.is_multiple_of(256) {
                if start.elapsed() > SPIN {
                    break;
                }
                std::thread::yield_now();
            }
        }
        let mut st = t.state.lock().unwrap_or_else(|e| e.into_inner());
        while st.epoch == seen {
            st.sleepers += 1;
            t.parked.fetch_add(1, Ordering::Relaxed);
            st = t.wake.wait(st).unwrap_or_else(|e| e.into_inner());
            t.parked.fetch_sub(1, Ordering::Relaxed);
            st.sleepers -= 1;
        }
        seen = st.epoch;
        let Some(p) = st.section else { continue };
        // SAFETY: the section is published, so its caller is still waiting in `run`, and it
        // cannot return before `refs` drops back (module invariant).
        let section = unsafe { &*p.0 };
        section.refs.fetch_add(1, Ordering::Relaxed);
        drop(st);
        section.help();
        section.refs.fetch_sub(1, Ordering::Release);
    }
}

/// Whether a section started now would find every helper awake (spinning or working, not
/// parked) and the team free — a hint, read without the lock: a parked helper costs a
/// futex wake-up (several microseconds on a VM) before it takes its part. Always false on
/// a rayon worker (sections there go to rayon's pool, whose sleepers this does not see).
pub fn awake() -> bool {
    if rayon::current_thread_index().is_some() {
        return false;
    }
    let t = team();
    t.helpers > 0 && t.parked.load(Ordering::Relaxed) == 0 && !t.busy.load(Ordering::Relaxed)
}

/// How many threads a section may use here (the caller and the helpers).
#[cfg(test)]
fn threads() -> usize {
    team().helpers + 1
}

/// Runs `f(0), …, f(parts − 1)`, each exactly once, on the calling thread and the team's
/// helpers; returns when all are done. Parts must be independent.
pub fn run(parts: usize, f: &(dyn Fn(usize) + Sync)) {
    if parts > 1 && rayon::current_thread_index().is_some() {
        // On the interpreter's pool: split there, as its other nodes do.
        rayon::scope(|sc| {
            for i in 1..parts {
                sc.spawn(move |_| f(i));
            }
            f(0);
        });
        return;
    }
    if parts > 1 {
        let crew = CREW.with(|c| c.get());
        if !crew.is_null() {
            // SAFETY: a crew outlives its members' `Crew::member` calls, which set it.
            unsafe { &*crew }.run(parts, f);
            return;
        }
    }
    let t = team();
    let alone = parts <= 1
        || t.helpers == 0
        || t.shares.take_solo()
        || t.busy.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err();
    if alone {
        (0..parts).for_each(f);
        return;
    }
    let section = Section::new(f, parts);
    {
        let mut st = t.state.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY (lifetime erasure): unpublished below before `section` goes out of scope.
        let p: *const Section<'static> = (&section as *const Section<'_>).cast();
        st.section = Some(Published(p));
        st.epoch += 1;
        t.epoch.store(st.epoch, Ordering::Release);
        if st.sleepers > 0 {
            t.wake.notify_all();
        }
    }
    let mine = section.work();
    {
        let mut st = t.state.lock().unwrap_or_else(|e| e.into_inner());
        st.section = None;
    }
    section.wait();
    t.shares.record(mine, parts);
    t.busy.store(false, Ordering::Release);
    section.reraise();
}

thread_local! {
    /// The crew this thread is a member of (null: none).
    static CREW: std::cell::Cell<*const Crew> = const { std::cell::Cell::new(std::ptr::null()) };
}

/// The threads of one concurrent region: a section nested in a member's work is posted
/// here (one at a time; a member finding one posted runs its own parts alone), and
/// members with nothing else to do join it ([`Crew::help`]).
pub struct Crew {
    slot: Mutex<Option<Published>>,
    posted: AtomicBool,
}

impl Default for Crew {
    fn default() -> Crew {
        Crew::new()
    }
}

impl Crew {
    pub fn new() -> Crew {
        Crew { slot: Mutex::new(None), posted: AtomicBool::new(false) }
    }

    /// Runs `f` with the calling thread a member of the crew.
    pub fn member<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Restore(*const Crew);
        impl Drop for Restore {
            fn drop(&mut self) {
                CREW.with(|c| c.set(self.0));
            }
        }
        let _restore = Restore(CREW.with(|c| c.replace(self as *const Crew)));
        f()
    }

    /// Joins the posted section, if there is one; whether it did.
    pub fn help(&self) -> bool {
        if !self.posted.load(Ordering::Acquire) {
            return false;
        }
        let st = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        let Some(p) = *st else { return false };
        // SAFETY: the section is posted, so its caller is still in `Crew::run`, which
        // waits for `refs` to drop back before returning (as the team's helpers do).
        let section = unsafe { &*p.0 };
        section.refs.fetch_add(1, Ordering::Relaxed);
        drop(st);
        section.help();
        section.refs.fetch_sub(1, Ordering::Release);
        true
    }

    fn run(&self, parts: usize, f: &(dyn Fn(usize) + Sync)) {
        let section = Section::new(f, parts);
        {
            let mut st = self.slot.lock().unwrap_or_else(|e| e.into_inner());
            if st.is_some() {
                drop(st);
                (0..parts).for_each(f);
                return;
            }
            // SAFETY (lifetime erasure): unposted below before `section` goes out of scope.
            let p: *const Section<'static> = (&section as *const Section<'_>).cast();
            *st = Some(Published(p));
            self.posted.store(true, Ordering::Release);
        }
        section.work();
        {
            let mut st = self.slot.lock().unwrap_or_else(|e| e.into_inner());
            *st = None;
            self.posted.store(false, Ordering::Release);
        }
        section.wait();
        section.reraise();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn parts_run_with_the_callers_floating_point_modes() {
        use std::hint::black_box;
        for flush in [true, false] {
            let _modes = flush.then(crate::denormals::FlushDenormals::new);
            let flushed: Vec<AtomicBool> = (0..64).map(|_| AtomicBool::new(false)).collect();
            run(64, &|i| {
                let tiny = black_box(1e-20f32) * black_box(1e-20f32);
                flushed[i].store(tiny == 0.0, Ordering::Relaxed);
                std::thread::sleep(Duration::from_micros(50));
            });
            assert!(flushed.iter().all(|f| f.load(Ordering::Relaxed) == flush), "flush {flush}");
        }
    }

    #[test]
    fn every_part_runs_exactly_once() {
        for parts in [0, 1, 2, 7, 64] {
            let counts: Vec<AtomicU32> = (0..parts).map(|_| AtomicU32::new(0)).collect();
            run(parts, &|i| {
                counts[i].fetch_add(1, Ordering::Relaxed);
            });
            assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1), "{parts} parts");
        }
    }

    /// Sections from several threads at once, and sections nested in parts, all complete
    /// (a busy team makes the caller run its parts alone).
    #[test]
    fn concurrent_and_nested_sections_complete() {
        let total = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..200 {
                        run(4, &|_| {
                            run(3, &|_| {
                                total.fetch_add(1, Ordering::Relaxed);
                            })
                        });
                    }
                });
            }
        });
        assert_eq!(total.load(Ordering::Relaxed), 4 * 200 * 4 * 3);
    }

    /// A section nested in a crew member's work runs every part once, on the member and
    /// on another member that helps; a second one posted meanwhile runs alone.
    #[test]
    fn crew_members_share_nested_sections() {
        let crew = Crew::new();
        let counts: Vec<AtomicU32> = (0..64).map(|_| AtomicU32::new(0)).collect();
        let helped = AtomicBool::new(false);
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                crew.member(|| {
                    while !done.load(Ordering::Acquire) {
                        if crew.help() {
                            helped.store(true, Ordering::Relaxed);
                        }
                    }
                })
            });
            crew.member(|| {
                for _ in 0..50 {
                    run(64, &|i| {
                        counts[i].fetch_add(1, Ordering::Relaxed);
                        run(2, &|_| {});
                        std::thread::sleep(Duration::from_micros(5));
                    });
                }
            });
            done.store(true, Ordering::Release);
        });
        assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 50));
        assert!(helped.load(Ordering::Relaxed), "the idle member joined a section");
    }

    /// Sections no helper reached, several in a row, make the next ones run alone for a
    /// while; one a helper shared resets the count; helpers are tried again after the run.
    #[test]
    fn sections_run_alone_after_helpers_miss_several() {
        let s = Shares::default();
        for _ in 0..MISSES_BEFORE_SOLO - 1 {
            s.record(4, 4);
        }
        s.record(3, 4);
        assert!(!s.take_solo(), "a shared section resets the count");
        for _ in 0..MISSES_BEFORE_SOLO {
            assert!(!s.take_solo());
            s.record(4, 4);
        }
        for _ in 0..SOLO_RUN {
            assert!(s.take_solo());
        }
        assert!(!s.take_solo(), "helpers are tried again");
    }

    /// A helper that parked (no section for longer than the spin time) wakes up for the next.
    #[test]
    fn parked_helpers_wake_up() {
        run(2, &|_| {});
        std::thread::sleep(SPIN * 3);
        let seen = Mutex::new(std::collections::HashSet::new());
        // Other tests may hold the team for a while (their caller then runs alone).
        for _ in 0..400 {
            run(64, &|_| {
                seen.lock().unwrap().insert(std::thread::current().id());
                std::thread::sleep(Duration::from_micros(20));
            });
            if seen.lock().unwrap().len() == threads() {
                break;
            }
        }
        assert_eq!(seen.lock().unwrap().len(), threads(), "every thread of the team took part");
    }
}
