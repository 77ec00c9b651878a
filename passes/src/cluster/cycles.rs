//! Incremental cycle detection on a DAG whose nodes get contracted: a dynamic
//! topological order after Pearce & Kelly, "A dynamic topological sort
//! algorithm for directed acyclic graphs" (JEA 11, 2006), as TensorFlow's
//! `GraphCycles` uses it.
//!
//! Invariant: `rank` is a permutation of `0..n` over all node ids (merged-away
//! ids keep theirs, unused), and every edge `x → y` has `rank[x] < rank[y]`.
//! So `rank[x] >= rank[y]` proves `y` does not reach `x` in O(1), and a
//! reachability search from `x` to `y` only visits ranks in
//! `(rank[x], rank[y])`. Inserting an edge that breaks the order re-ranks
//! just the nodes in that window (the two bounded searches of PK) reusing
//! their own rank slots. Adjacency sets are insertion-ordered ([`AdjSet`],
//! `swap_remove`), so every result is deterministic.

use super::adjacency::AdjSet;

#[cfg(test)]
thread_local! {
    /// Work done on this thread (nodes visited by searches, nodes listed by orders):
    /// what the near-linearity test counts.
    static WORK: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Adds `k` units to this thread's work count (tests only; nothing otherwise).
#[inline]
pub(crate) fn count(k: usize) {
    #[cfg(test)]
    WORK.with(|w| w.set(w.get() + k as u64));
    #[cfg(not(test))]
    let _ = k;
}

#[cfg(test)]
pub(crate) fn reset_work() {
    WORK.with(|w| w.set(0));
}

#[cfg(test)]
pub(crate) fn work() -> u64 {
    WORK.with(|w| w.get())
}

/// The outcome of a bounded reachability search.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Not reachable.
    No,
    /// Reachable along this path (both ends included).
    Path(Vec<u32>),
    /// The search budget ran out before an answer.
    Unknown,
}

/// What [`GraphCycles::insert_edge_within`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Insertion {
    Added,
    /// The edge was there already.
    Present,
    /// It would have closed a cycle: nothing changed.
    Cycle,
    /// Re-ranking would have cost more than allowed: nothing changed.
    TooCostly,
}

/// One node's rank and the visit mark searches leave on it: `mark == stamp` means visited
/// in the current search. [`GraphCycles::find_path`] gives its two directions two stamps;
/// one field holds either, as no node is reached by both (the second to reach it ends the
/// search). Eight bytes, so that the slots of 10⁵ nodes stay in a core's cache.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    rank: u32,
    mark: u32,
}

/// A DAG with a maintained topological order and edge contraction.
#[derive(Clone, Debug)]
pub struct GraphCycles {
    /// Each node's rank and visit mark, side by side: a search step reads both for the node
    /// it reaches (separate arrays were a cache miss each per edge scanned).
    slot: Vec<Slot>,
    /// The node [`GraphCycles::find_path`] reached each node from: the previous node on the
    /// path for the forward search, the next one for the backward search. Written on a
    /// visit, read only along a path found (apart from `slot`, which every step reads).
    link: Vec<u32>,
    out: Vec<AdjSet>,
    inn: Vec<AdjSet>,
    live: Vec<bool>,
    /// Edges scanned by [`GraphCycles::find_path`] so far (lets callers cap a pass's work).
    scanned: u64,
    /// Calls of [`GraphCycles::find_path`] that had to look at edges (the ranks did not
    /// answer) so far.
    searches: u64,
    /// Nodes the Pearce–Kelly windows of [`GraphCycles::insert_edge`] have re-ranked so far.
    reranked: u64,
    stamp: u32,
    stack: Vec<u32>,
    /// The two frontiers of [`GraphCycles::find_path`] and the edges a merge moves, kept
    /// between calls (a contraction was a handful of allocations otherwise).
    fwd: Vec<(u32, u32)>,
    bwd: Vec<(u32, u32)>,
    moved: Vec<u32>,
    /// The two Pearce–Kelly windows of [`GraphCycles::insert_edge`] and their rank slots,
    /// kept between calls.
    window_f: Vec<(u32, u32)>,
    window_b: Vec<(u32, u32)>,
    window_slots: Vec<u32>,
    /// The radix sort's second buffer for the windows ([`sort_by_rank`]).
    window_scratch: Vec<(u32, u32)>,
}

/// Sorts a Pearce–Kelly window of (rank, node) pairs by rank, every rank at least `lower`.
/// Ranks are distinct, so the order is the one `sort_unstable` gives; a large window (a
/// contraction across thousands of ranks re-ranks thousands of nodes) is sorted by an LSD
/// radix sort on `rank − lower`, a byte per pass, through `scratch` — a comparison sort of
/// such windows was two fifths of the re-ranking's instructions at 10⁵ nodes.
fn sort_by_rank(v: &mut Vec<(u32, u32)>, lower: u32, scratch: &mut Vec<(u32, u32)>) {
    const SMALL: usize = 64;
    if v.len() < SMALL {
        v.sort_unstable();
        return;
    }
    let span = v.iter().map(|&(r, _)| r - lower).max().unwrap_or(0);
    let passes = (u32::BITS - span.leading_zeros()).div_ceil(8);
    scratch.clear();
    scratch.resize(v.len(), (0, 0));
    for pass in 0..passes {
        let shift = pass * 8;
        let digit = |r: u32| ((r - lower) >> shift) as usize & 0xff;
        let mut start = [0u32; 256];
        for &(r, _) in v.iter() {
            start[digit(r)] += 1;
        }
        let mut sum = 0;
        for c in start.iter_mut() {
            (*c, sum) = (sum, sum + *c);
        }
        for &e in v.iter() {
            let d = digit(e.0);
            scratch[start[d] as usize] = e;
            start[d] += 1;
        }
        std::mem::swap(v, scratch);
    }
}

impl GraphCycles {
    /// `n` nodes without edges; `order` (a permutation of `0..n`) gives the
    /// initial ranks, so inserting edges that follow it costs no reordering.
    pub fn new(n: usize, order: &[u32]) -> GraphCycles {
        let mut slot = vec![Slot::default(); n];
        for (r, &v) in order.iter().enumerate() {
            slot[v as usize].rank = r as u32;
        }
        GraphCycles {
            slot,
            link: vec![0; n],
            out: vec![AdjSet::default(); n],
            inn: vec![AdjSet::default(); n],
            live: vec![true; n],
            scanned: 0,
            searches: 0,
            reranked: 0,
            stamp: 0,
            stack: Vec::new(),
            fwd: Vec::new(),
            bwd: Vec::new(),
            moved: Vec::new(),
            window_f: Vec::new(),
            window_b: Vec::new(),
            window_slots: Vec::new(),
            window_scratch: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.slot.len()
    }
    pub fn is_empty(&self) -> bool {
        self.slot.is_empty()
    }
    pub fn is_live(&self, x: u32) -> bool {
        self.live[x as usize]
    }
    pub fn rank(&self, x: u32) -> u32 {
        self.slot[x as usize].rank
    }
    pub fn successors(&self, x: u32) -> &AdjSet {
        &self.out[x as usize]
    }
    pub fn predecessors(&self, x: u32) -> &AdjSet {
        &self.inn[x as usize]
    }
    /// Edges the reachability searches have scanned so far.
    pub fn scanned(&self) -> u64 {
        self.scanned
    }
    /// Reachability checks the ranks alone did not answer so far.
    pub fn searches(&self) -> u64 {
        self.searches
    }
    /// Nodes re-ranked by edge insertions so far.
    pub fn reranked(&self) -> u64 {
        self.reranked
    }
    pub fn has_edge(&self, x: u32, y: u32) -> bool {
        self.out[x as usize].contains(&y)
    }

    /// Live nodes, consumers first (rank descending).
    pub fn post_order(&self) -> Vec<u32> {
        let mut v = self.topo_order();
        v.reverse();
        v
    }

    /// Live nodes, producers first (rank ascending).
    pub fn topo_order(&self) -> Vec<u32> {
        count(self.len());
        // Ranks are a permutation of the ids: place each node at its rank, then drop the
        // dead (linear, where sorting by rank was a tenth of an edge pass at 10⁵ nodes).
        let mut by_rank = vec![u32::MAX; self.len()];
        for (x, s) in self.slot.iter().enumerate() {
            by_rank[s.rank as usize] = x as u32;
        }
        by_rank.retain(|&x| self.live[x as usize]);
        by_rank
    }

    fn next_stamp(&mut self) -> u32 {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.slot.iter_mut().for_each(|s| s.mark = 0);
            self.stamp = 1;
        }
        self.stamp
    }

    /// Adds `x → y` while the graph is built: an edge not yet present, following the
    /// initial order (debug builds check both), so neither the membership test nor the
    /// reordering of [`GraphCycles::insert_edge`] is needed.
    pub fn add_ordered_edge(&mut self, x: u32, y: u32) {
        debug_assert!(self.slot[x as usize].rank < self.slot[y as usize].rank, "{x} → {y} goes against the order");
        self.out[x as usize].push_absent(y);
        self.inn[y as usize].push_absent(x);
    }

    /// Inserts `x → y`. Returns false (and changes nothing) if it would close a cycle.
    pub fn insert_edge(&mut self, x: u32, y: u32) -> bool {
        let mut unlimited = usize::MAX;
        self.insert_edge_within(x, y, &mut unlimited) != Insertion::Cycle
    }

    /// [`GraphCycles::insert_edge`] spending at most `allowance` units of work on the
    /// Pearce–Kelly windows (each node visited costs four units plus one per edge it has
    /// in the search's direction; what is spent is taken off `allowance`). Past the
    /// allowance nothing changes and [`Insertion::TooCostly`] is returned.
    fn insert_edge_within(&mut self, x: u32, y: u32, allowance: &mut usize) -> Insertion {
        if x == y {
            return Insertion::Cycle;
        }
        if self.out[x as usize].contains(&y) {
            return Insertion::Present;
        }
        let (rx, ry) = (self.slot[x as usize].rank, self.slot[y as usize].rank);
        if rx > ry {
            // PK: nodes reachable from y with rank < rx, and nodes reaching x with rank > ry,
            // each as (rank, node) so that sorting by rank reads no other memory.
            let mut deltaf = std::mem::take(&mut self.window_f);
            deltaf.clear();
            let forward = self.forward_window(y, rx, x, &mut deltaf, allowance);
            if forward != Insertion::Added {
                self.window_f = deltaf;
                return forward;
            }
            let mut deltab = std::mem::take(&mut self.window_b);
            deltab.clear();
            if !self.backward_window(x, ry, &mut deltab, allowance) {
                (self.window_f, self.window_b) = (deltaf, deltab);
                return Insertion::TooCostly;
            }
            self.apply_window(&mut deltab, &mut deltaf, ry);
            (self.window_f, self.window_b) = (deltaf, deltab);
        }
        self.out[x as usize].push_absent(y);
        self.inn[y as usize].push_absent(x);
        Insertion::Added
    }

    /// Appends to `found` the nodes reachable from `start` with rank below `upper`, as
    /// (rank, node), paying for each out of `allowance` (as [`GraphCycles::insert_edge_within`]
    /// counts): [`Insertion::Cycle`] if `target` is reached, [`Insertion::TooCostly`] past
    /// the allowance, else [`Insertion::Added`].
    fn forward_window(
        &mut self,
        start: u32,
        upper: u32,
        target: u32,
        found: &mut Vec<(u32, u32)>,
        allowance: &mut usize,
    ) -> Insertion {
        let stamp = self.next_stamp();
        let mut stack = std::mem::take(&mut self.stack);
        stack.clear();
        stack.push(start);
        self.slot[start as usize].mark = stamp;
        while let Some(v) = stack.pop() {
            count(1);
            let cost = 4 + self.out[v as usize].len();
            if *allowance < cost {
                self.stack = stack;
                return Insertion::TooCostly;
            }
            *allowance -= cost;
            found.push((self.slot[v as usize].rank, v));
            for &w in &self.out[v as usize] {
                if w == target {
                    self.stack = stack;
                    return Insertion::Cycle;
                }
                if self.slot[w as usize].mark != stamp && self.slot[w as usize].rank < upper {
                    self.slot[w as usize].mark = stamp;
                    stack.push(w);
                }
            }
        }
        self.stack = stack;
        Insertion::Added
    }

    /// Appends to `found` the nodes reaching `start` with rank above `lower`, as (rank,
    /// node), paying for each out of `allowance`; false past it.
    fn backward_window(&mut self, start: u32, lower: u32, found: &mut Vec<(u32, u32)>, allowance: &mut usize) -> bool {
        let stamp = self.next_stamp();
        let mut stack = std::mem::take(&mut self.stack);
        stack.clear();
        stack.push(start);
        self.slot[start as usize].mark = stamp;
        while let Some(v) = stack.pop() {
            count(1);
            let cost = 4 + self.inn[v as usize].len();
            if *allowance < cost {
                self.stack = stack;
                return false;
            }
            *allowance -= cost;
            found.push((self.slot[v as usize].rank, v));
            for &w in &self.inn[v as usize] {
                if self.slot[w as usize].mark != stamp && self.slot[w as usize].rank > lower {
                    self.slot[w as usize].mark = stamp;
                    stack.push(w);
                }
            }
        }
        self.stack = stack;
        true
    }

    /// Removes `x → y` if present; returns whether it was.
    pub fn remove_edge(&mut self, x: u32, y: u32) -> bool {
        let had = self.out[x as usize].swap_remove(&y);
        if had {
            self.inn[y as usize].swap_remove(&x);
        }
        had
    }

    /// Searches a path `x ⇝ y` (length ≥ 1), visiting at most `budget` nodes.
    ///
    /// Bidirectional, one edge at a time: a forward search from `x` over ranks
    /// below `rank[y]` and a backward search from `y` over ranks above
    /// `rank[x]` take turns scanning one edge each, and the answer is No as
    /// soon as either runs out of nodes. So a check costs about twice the
    /// cheaper of the two searches: merging a hub (a constant feeding
    /// thousands of nodes) with one of its consumers scans the consumer's few
    /// predecessors, not the hub's thousands of successors.
    pub fn find_path(&mut self, x: u32, y: u32, budget: usize) -> Reach {
        if x == y || self.slot[x as usize].rank >= self.slot[y as usize].rank {
            return Reach::No;
        }
        self.searches += 1;
        // Nothing leaves `x` or nothing enters `y`: the search below would end at its
        // second step, having visited at most four nodes (most checks of a chain's edges).
        if budget >= 4 && (self.out[x as usize].is_empty() || self.inn[y as usize].is_empty()) {
            return Reach::No;
        }
        let fstamp = self.next_stamp();
        let bstamp = self.next_stamp();
        let (mut fwd, mut bwd) = (std::mem::take(&mut self.fwd), std::mem::take(&mut self.bwd));
        fwd.clear();
        bwd.clear();
        let reach = self.search(x, y, fstamp, bstamp, budget, &mut fwd, &mut bwd);
        (self.fwd, self.bwd) = (fwd, bwd);
        reach
    }

    /// The alternating searches of [`GraphCycles::find_path`]. Each frontier is a stack of
    /// (node, next edge to scan) whose top is kept in locals with its adjacency slice (`fwd`
    /// and `bwd` hold the entries below it), so a step reads one id and one [`Slot`].
    #[allow(clippy::too_many_arguments)]
    fn search(
        &mut self,
        x: u32,
        y: u32,
        fstamp: u32,
        bstamp: u32,
        budget: usize,
        fwd: &mut Vec<(u32, u32)>,
        bwd: &mut Vec<(u32, u32)>,
    ) -> Reach {
        let (out, inn, slot) = (&self.out, &self.inn, &mut self.slot);
        let (lower, upper) = (slot[x as usize].rank, slot[y as usize].rank);
        let link = &mut self.link;
        slot[x as usize].mark = fstamp;
        slot[y as usize].mark = bstamp;
        let mut visited = 2usize;
        // Edges scanned count too (a quarter of a node each): a search through clusters of
        // thousands of edges visits few nodes at a high cost.
        let edge_budget = budget.saturating_mul(4);
        let mut edges = 0usize;
        let mut scanned = 0u64;
        count(2);
        // The tops: node, its neighbours, the next one to scan; `None` once a frontier is
        // exhausted.
        let (mut ftop, mut fadj, mut fi) = (Some(x), out[x as usize].as_slice(), 0usize);
        let (mut btop, mut badj, mut bi) = (Some(y), inn[y as usize].as_slice(), 0usize);
        // The meeting edge `v → w`: `v` reached forward, `w` backward.
        let outcome: Result<(u32, u32), Reach> = loop {
            if visited > budget || edges > edge_budget {
                break Err(Reach::Unknown);
            }
            edges += 2;
            // One forward edge.
            let Some(v) = ftop else { break Err(Reach::No) };
            match fadj.get(fi) {
                None => match fwd.pop() {
                    Some((u, i)) => (ftop, fadj, fi) = (Some(u), out[u as usize].as_slice(), i as usize),
                    None => ftop = None,
                },
                Some(&w) => {
                    fi += 1;
                    scanned += 1;
                    count(1);
                    let sw = &mut slot[w as usize];
                    if sw.mark == bstamp {
                        break Ok((v, w));
                    }
                    if sw.mark != fstamp && sw.rank < upper {
                        sw.mark = fstamp;
                        link[w as usize] = v;
                        fwd.push((v, fi as u32));
                        (ftop, fadj, fi) = (Some(w), out[w as usize].as_slice(), 0);
                        visited += 1;
                    }
                }
            }
            // One backward edge.
            let Some(w) = btop else { break Err(Reach::No) };
            match badj.get(bi) {
                None => match bwd.pop() {
                    Some((u, i)) => (btop, badj, bi) = (Some(u), inn[u as usize].as_slice(), i as usize),
                    None => btop = None,
                },
                Some(&v) => {
                    bi += 1;
                    scanned += 1;
                    count(1);
                    let sv = &mut slot[v as usize];
                    if sv.mark == fstamp {
                        break Ok((v, w));
                    }
                    if sv.mark != bstamp && sv.rank > lower {
                        sv.mark = bstamp;
                        link[v as usize] = w;
                        bwd.push((w, bi as u32));
                        (btop, badj, bi) = (Some(v), inn[v as usize].as_slice(), 0);
                        visited += 1;
                    }
                }
            }
        };
        self.scanned += scanned;
        let meet = match outcome {
            Ok(meet) => meet,
            Err(r) => return r,
        };
        // The path, allocated once: its length first, by the links.
        let along = |mut cur: u32, end: u32| {
            let mut k = 1;
            while cur != end {
                cur = self.link[cur as usize];
                k += 1;
            }
            k
        };
        let (head, tail) = (along(meet.0, x), along(meet.1, y));
        let mut path = vec![0; head + tail];
        let mut cur = meet.0;
        for p in path[..head].iter_mut().rev() {
            *p = cur;
            cur = self.link[cur as usize];
        }
        let mut cur = meet.1;
        for p in &mut path[head..] {
            *p = cur;
            cur = self.link[cur as usize];
        }
        Reach::Path(path)
    }

    /// Whether `x` reaches `y` (unbounded).
    pub fn is_reachable(&mut self, x: u32, y: u32) -> bool {
        x == y || matches!(self.find_path(x, y, usize::MAX), Reach::Path(_))
    }

    /// Merges `a` and `b` into one node if no path of length ≥ 2 joins them
    /// (a direct edge between them is absorbed). On success returns the
    /// surviving id (the one with more edges; `a` on a tie); the other id is
    /// dead. On failure the ranks, edges (in their order) and live nodes are as
    /// they were, and the alternate path (or `Unknown`
    /// when the budget ran out) is returned. `budget` bounds the nodes each
    /// reachability search visits and the work of re-ranking: the contraction's
    /// one Pearce–Kelly step ([`GraphCycles::rerank_for_contraction`]) may spend at
    /// most `4 · budget` units on its windows (a node visited costs four, plus one
    /// per edge scanned), counted only when the two are more than `budget` ranks
    /// apart — the windows lie between them; past it nothing has changed.
    pub fn merge(&mut self, a: u32, b: u32, budget: usize) -> Result<u32, Reach> {
        debug_assert!(a != b && self.live[a as usize] && self.live[b as usize]);
        let ab = self.remove_edge(a, b);
        let ba = self.remove_edge(b, a);
        let blocked = match self.find_path(a, b, budget) {
            Reach::No => self.find_path(b, a, budget),
            r => r,
        };
        if blocked != Reach::No {
            self.restore_direct(a, b, ab, ba);
            return Err(blocked);
        }
        let degree = |g: &GraphCycles, v: u32| g.out[v as usize].len() + g.inn[v as usize].len();
        let (s, v) = if degree(self, b) > degree(self, a) { (b, a) } else { (a, b) };
        let distance = self.slot[a as usize].rank.abs_diff(self.slot[b as usize].rank) as usize;
        let mut allowance = if distance > budget { budget.saturating_mul(4) } else { usize::MAX };
        if !self.rerank_for_contraction(s, v, &mut allowance) {
            self.restore_direct(a, b, ab, ba);
            return Err(Reach::Unknown);
        }
        // The ranks now order every edge of `v` as an edge of `s`: move them, predecessors
        // first, each in its adjacency order.
        let mut moved = std::mem::take(&mut self.moved);
        moved.clear();
        moved.extend(self.inn[v as usize].iter());
        for &p in &moved {
            debug_assert!(self.slot[p as usize].rank < self.slot[s as usize].rank);
            self.out[p as usize].swap_remove(&v);
            if self.out[p as usize].insert(s) {
                self.inn[s as usize].push_absent(p);
            }
        }
        moved.clear();
        moved.extend(self.out[v as usize].iter());
        for &q in &moved {
            debug_assert!(self.slot[s as usize].rank < self.slot[q as usize].rank);
            self.inn[q as usize].swap_remove(&v);
            if self.inn[q as usize].insert(s) {
                self.out[s as usize].push_absent(q);
            }
        }
        self.moved = moved;
        self.inn[v as usize] = AdjSet::default();
        self.out[v as usize] = AdjSet::default();
        self.live[v as usize] = false;
        Ok(s)
    }

    /// Re-ranks for the contraction of `s` and `v` (no edge left between them, no path
    /// joining them) in one Pearce–Kelly step, so that `s` ranks after every predecessor
    /// and before every successor of both; `v`, about to die, keeps a rank no live node
    /// has. Returns false (nothing changed) past `allowance`, spent as
    /// [`GraphCycles::insert_edge_within`] spends it.
    ///
    /// With `lo` the lower-ranked of the two and `hi` the other, the merged node can take
    /// `lo`'s rank when no predecessor of `hi` ranks after `lo`, or `hi`'s when no successor
    /// of `lo` ranks before `hi`: nothing moves. Otherwise the window is that of the edges
    /// from `hi`'s late predecessors into `lo` (when `s` is `lo`) or of the edges from `hi`
    /// into `lo`'s early successors (when `s` is `hi`): the union of the windows those
    /// edges would open one at a time, each node re-ranked once. The backward side (the
    /// nodes reaching the edges' tails, above the lowest head) takes the window's lowest
    /// rank slots, the forward side (the nodes the heads reach, below the highest tail) the
    /// rest, each in its order; nothing joins the forward side to the backward one, or a
    /// path would join `lo` to `hi`.
    fn rerank_for_contraction(&mut self, s: u32, v: u32, allowance: &mut usize) -> bool {
        let rank = |g: &GraphCycles, x: u32| g.slot[x as usize].rank;
        let (lo, hi) = if rank(self, s) < rank(self, v) { (s, v) } else { (v, s) };
        let (rlo, rhi) = (rank(self, lo), rank(self, hi));
        let late_preds = self.inn[hi as usize].iter().any(|&p| rank(self, p) > rlo);
        let early_succs = self.out[lo as usize].iter().any(|&q| rank(self, q) < rhi);
        // The node whose (new) rank the merged node takes.
        let anchor = if !late_preds {
            lo
        } else if !early_succs {
            hi
        } else {
            let (mut deltaf, mut deltab) = (std::mem::take(&mut self.window_f), std::mem::take(&mut self.window_b));
            deltaf.clear();
            deltab.clear();
            let fstamp = self.next_stamp();
            let bstamp = self.next_stamp();
            let mut stack = std::mem::take(&mut self.stack);
            stack.clear();
            let (ok, lower) = if s == lo {
                // Edges p → lo for p ∈ inn(hi) ranked after lo.
                let mut ub = 0;
                for &p in &self.inn[hi as usize] {
                    let sp = &mut self.slot[p as usize];
                    if sp.rank > rlo {
                        ub = ub.max(sp.rank);
                        sp.mark = bstamp;
                        stack.push(p);
                    }
                }
                self.stack = stack;
                let ok = self.contraction_window(false, rlo, bstamp, &mut deltab, allowance) && {
                    self.slot[lo as usize].mark = fstamp;
                    self.stack.push(lo);
                    self.contraction_window(true, ub, fstamp, &mut deltaf, allowance)
                };
                (ok, rlo)
            } else {
                // Edges hi → q for q ∈ out(lo) ranked before hi.
                let mut lb = u32::MAX;
                for &q in &self.out[lo as usize] {
                    let sq = &mut self.slot[q as usize];
                    if sq.rank < rhi {
                        lb = lb.min(sq.rank);
                        sq.mark = fstamp;
                        stack.push(q);
                    }
                }
                self.stack = stack;
                let ok = self.contraction_window(true, rhi, fstamp, &mut deltaf, allowance) && {
                    self.slot[hi as usize].mark = bstamp;
                    self.stack.push(hi);
                    self.contraction_window(false, lb, bstamp, &mut deltab, allowance)
                };
                (ok, lb)
            };
            if !ok {
                (self.window_f, self.window_b) = (deltaf, deltab);
                return false;
            }
            self.apply_window(&mut deltab, &mut deltaf, lower);
            (self.window_f, self.window_b) = (deltaf, deltab);
            s
        };
        if anchor != s {
            let (rs, rv) = (rank(self, s), rank(self, v));
            self.slot[s as usize].rank = rv;
            self.slot[v as usize].rank = rs;
        }
        true
    }

    /// One side of a contraction's window: from the nodes on `self.stack` (marked with
    /// `stamp`), every node reached along out-edges (`forward`) ranked below `bound`, or
    /// along in-edges ranked above it, appended to `found` as (rank, node) and paid for out
    /// of `allowance`; false past it.
    fn contraction_window(
        &mut self,
        forward: bool,
        bound: u32,
        stamp: u32,
        found: &mut Vec<(u32, u32)>,
        allowance: &mut usize,
    ) -> bool {
        let mut stack = std::mem::take(&mut self.stack);
        let mut ok = true;
        while let Some(x) = stack.pop() {
            count(1);
            let adj = if forward { &self.out[x as usize] } else { &self.inn[x as usize] };
            let cost = 4 + adj.len();
            if *allowance < cost {
                ok = false;
                break;
            }
            *allowance -= cost;
            found.push((self.slot[x as usize].rank, x));
            for &w in adj {
                let sw = &mut self.slot[w as usize];
                if sw.mark != stamp && if forward { sw.rank < bound } else { sw.rank > bound } {
                    sw.mark = stamp;
                    stack.push(w);
                }
            }
        }
        stack.clear();
        self.stack = stack;
        ok
    }

    /// Hands a Pearce–Kelly window's rank slots (every rank at least `lower`) out in
    /// increasing order to the backward side first, then the forward side, each sorted by
    /// rank.
    fn apply_window(&mut self, deltab: &mut Vec<(u32, u32)>, deltaf: &mut Vec<(u32, u32)>, lower: u32) {
        let mut scratch = std::mem::take(&mut self.window_scratch);
        sort_by_rank(deltaf, lower, &mut scratch);
        sort_by_rank(deltab, lower, &mut scratch);
        self.window_scratch = scratch;
        // The windows' rank slots in increasing order (a merge of the two sorted lists).
        let mut slots = std::mem::take(&mut self.window_slots);
        slots.clear();
        let (mut i, mut j) = (0, 0);
        while i < deltab.len() || j < deltaf.len() {
            if j == deltaf.len() || (i < deltab.len() && deltab[i].0 < deltaf[j].0) {
                slots.push(deltab[i].0);
                i += 1;
            } else {
                slots.push(deltaf[j].0);
                j += 1;
            }
        }
        self.reranked += slots.len() as u64;
        for (&(_, v), &r) in deltab.iter().chain(deltaf.iter()).zip(&slots) {
            self.slot[v as usize].rank = r;
        }
        self.window_slots = slots;
    }

    /// Puts back the direct edges between `a` and `b` a refused merge removed.
    fn restore_direct(&mut self, a: u32, b: u32, ab: bool, ba: bool) {
        if ab {
            self.insert_edge(a, b);
        }
        if ba {
            self.insert_edge(b, a);
        }
    }

    /// Checks the rank invariant (tests).
    pub fn check_invariants(&self) -> bool {
        let mut seen = vec![false; self.len()];
        for r in self.slot.iter().map(|s| s.rank) {
            if r as usize >= self.len() || std::mem::replace(&mut seen[r as usize], true) {
                return false;
            }
        }
        (0..self.len()).all(|x| {
            self.out[x]
                .iter()
                .all(|&y| self.slot[x].rank < self.slot[y as usize].rank && self.inn[y as usize].contains(&(x as u32)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(n: usize) -> Vec<u32> {
        (0..n as u32).collect()
    }

    #[test]
    fn rejects_cycles_and_reorders() {
        let mut g = GraphCycles::new(4, &identity(4));
        assert!(g.insert_edge(3, 2));
        assert!(g.insert_edge(2, 1));
        assert!(g.insert_edge(1, 0));
        assert!(g.check_invariants());
        assert!(!g.insert_edge(0, 3));
        assert!(!g.insert_edge(0, 0));
        assert!(g.check_invariants());
        assert!(g.is_reachable(3, 0));
        assert!(!g.is_reachable(0, 3));
        assert_eq!(g.find_path(3, 0, usize::MAX), Reach::Path(vec![3, 2, 1, 0]));
    }

    #[test]
    fn merge_refuses_alternate_paths() {
        // 0 → 1 → 2, 0 → 2: merging 0 and 2 would put 1 on a cycle.
        let mut g = GraphCycles::new(3, &identity(3));
        g.insert_edge(0, 1);
        g.insert_edge(1, 2);
        g.insert_edge(0, 2);
        assert_eq!(g.merge(0, 2, usize::MAX), Err(Reach::Path(vec![0, 1, 2])));
        assert!(g.has_edge(0, 2));
        let s = g.merge(0, 1, usize::MAX).unwrap();
        assert!(g.check_invariants());
        assert!(g.has_edge(s, 2));
        assert!(!g.is_live(if s == 0 { 1 } else { 0 }));
    }

    #[test]
    fn merge_of_independent_nodes() {
        // 0 → 1, 2 → 3: merge 1 and 2 gives 0 → {1,2} → 3.
        let mut g = GraphCycles::new(4, &[3, 2, 1, 0]);
        g.insert_edge(0, 1);
        g.insert_edge(2, 3);
        let s = g.merge(1, 2, usize::MAX).unwrap();
        assert!(g.check_invariants());
        assert!(g.is_reachable(0, 3));
        assert!(g.has_edge(0, s) && g.has_edge(s, 3));
        assert!(!g.insert_edge(3, 0));
    }

    #[test]
    fn merges_whose_windows_exceed_the_budget_are_refused_unchanged() {
        // 0 → 1 → … → 9 and 10 → 11 → … → 19, ranked 0..20: contracting 0 and 19 (no path
        // between them) re-ranks 0's descendants below 19 and 19's ancestors above 0: 20 nodes.
        let n = 20;
        let mut g = GraphCycles::new(n, &identity(n));
        for i in (0..9).chain(10..19) {
            g.insert_edge(i, i + 1);
        }
        let before = g.clone();
        assert_eq!(g.merge(0, 19, 15), Err(Reach::Unknown));
        let ranks = |g: &GraphCycles| g.slot.iter().map(|s| s.rank).collect::<Vec<_>>();
        assert_eq!((ranks(&g), &g.live), (ranks(&before), &before.live));
        assert!(g.check_invariants());
        // The edges too, each adjacency set in its order (later searches visit neighbours
        // in it): the undone contraction left no trace.
        let order = |g: &GraphCycles| -> Vec<Vec<u32>> {
            (0..n).flat_map(|x| [g.out[x].iter().copied().collect(), g.inn[x].iter().copied().collect()]).collect()
        };
        assert_eq!(order(&g), order(&before));
        let s = g.merge(0, 19, 100).unwrap();
        assert!(g.check_invariants() && g.is_live(s));
        // Two adjacent ranks: nothing lies between them, so no window is counted.
        let mut g = before;
        assert!(g.merge(9, 10, 2).is_ok());
        assert!(g.check_invariants());
    }

    #[test]
    fn a_contraction_past_its_allowance_changes_nothing() {
        // 0 → … → 9 (and 0 → 2, 3, 4, so that 0 survives) and 10 → … → 59, plus 20 → 59 and
        // 30 → 59 added first: contracting 0 and 59 moves 59's three in-edges onto 0, whose
        // one window (10..58 backward, 0..9 forward: about 300 units) is past 4 · 30, so the
        // contraction is refused before any rank moves.
        let n = 60;
        let mut g = GraphCycles::new(n, &identity(n));
        g.insert_edge(20, 59);
        g.insert_edge(30, 59);
        for i in (0..9).chain(10..59) {
            g.insert_edge(i, i + 1);
        }
        for k in 2..5 {
            g.insert_edge(0, k);
        }
        let before = g.clone();
        assert_eq!(g.merge(0, 59, 30), Err(Reach::Unknown));
        assert_eq!(g.reranked(), before.reranked());
        let state = |g: &GraphCycles| -> (Vec<u32>, Vec<bool>, Vec<Vec<u32>>) {
            let ranks = g.slot.iter().map(|s| s.rank).collect();
            let order = (0..n).flat_map(|x| [g.out[x].iter().copied().collect(), g.inn[x].iter().copied().collect()]);
            (ranks, g.live.clone(), order.collect())
        };
        assert_eq!(state(&g), state(&before));
        let s = g.merge(0, 59, 1000).unwrap();
        assert!(g.check_invariants() && g.is_live(s));
        assert_eq!(g.reranked(), before.reranked() + 59, "each window node re-ranked once");
    }

    /// A contraction re-ranks nothing when the merged node can take one of the two ranks:
    /// every predecessor of the later node ranks before the earlier one, or every successor
    /// of the earlier node after the later one — whichever node survives.
    #[test]
    fn a_contraction_takes_a_rank_that_needs_no_window() {
        // 0 → 1 → 2 → 3, ranked 0..6: 5 has no predecessor, so the merged node of 0 and 5
        // takes 0's rank (5 dies, keeping its own).
        let n = 6;
        let mut g = GraphCycles::new(n, &identity(n));
        for (x, y) in [(0, 1), (1, 2), (2, 3)] {
            g.insert_edge(x, y);
        }
        let reranked = g.reranked();
        let s = g.merge(0, 5, usize::MAX).unwrap();
        assert_eq!(g.reranked(), reranked);
        assert!(g.check_invariants() && g.is_live(s));
        // 0 → 1 → 2 → 3 and 1 → 4 → 5: 4's one predecessor ranks before 2, so the merged
        // node of 2 and 4 keeps 2's rank; 1 → 4 becomes the edge 1 → 2 already there.
        let mut g = GraphCycles::new(n, &identity(n));
        for (x, y) in [(0, 1), (1, 2), (2, 3), (1, 4), (4, 5)] {
            g.insert_edge(x, y);
        }
        let reranked = g.reranked();
        let s = g.merge(2, 4, usize::MAX).unwrap();
        assert_eq!(g.reranked(), reranked);
        assert!(g.check_invariants() && g.is_live(s));
        assert!(g.has_edge(1, s) && g.has_edge(s, 3) && g.has_edge(s, 5));
    }

    #[test]
    fn contractions_that_reorder_nothing_skip_the_window_count() {
        // 0 → 1 → … → 18 and 0 → 19, ranked 0..20: 0's descendants 1..18 fill the window
        // below 19, but contracting the edge 0 → 19 re-inserts no edge (19 has no other
        // neighbour), so nothing is re-ranked and a small budget does not refuse it.
        let n = 20;
        let mut g = GraphCycles::new(n, &identity(n));
        for i in 0..18 {
            g.insert_edge(i, i + 1);
        }
        g.insert_edge(0, 19);
        let reranked = g.reranked();
        let s = g.merge(0, 19, 5).unwrap();
        assert_eq!((s, g.reranked()), (0, reranked));
        assert!(g.check_invariants() && !g.is_live(19));
        // The reordering case (a predecessor of the victim ranked after the survivor) is
        // `merges_whose_windows_exceed_the_budget_are_refused_unchanged`.
    }

    /// The radix sort of large windows orders them as a comparison sort does, over spans
    /// of one to three bytes.
    #[test]
    fn windows_sort_by_rank_as_a_comparison_sort() {
        let mut seed = 0x2545_F491u64;
        let mut scratch = Vec::new();
        for (len, span) in [(10usize, 50u32), (64, 64), (200, 1_000), (1_000, 70_000), (3_000, 5_000_000)] {
            let lower = 1_000 + len as u32;
            let mut ranks: Vec<u32> = Vec::new();
            let mut seen = std::collections::HashSet::new();
            while ranks.len() < len {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let r = lower + (seed % span as u64) as u32;
                if seen.insert(r) {
                    ranks.push(r);
                }
            }
            let mut window: Vec<(u32, u32)> = ranks.iter().map(|&r| (r, r.wrapping_mul(7))).collect();
            let mut expected = window.clone();
            expected.sort_unstable();
            sort_by_rank(&mut window, lower, &mut scratch);
            assert_eq!(window, expected, "{len} ranks over {span}");
        }
    }

    #[test]
    fn budget_gives_unknown() {
        let n = 50;
        let mut g = GraphCycles::new(n, &identity(n));
        for i in 0..n as u32 - 1 {
            g.insert_edge(i, i + 1);
        }
        assert_eq!(g.find_path(0, n as u32 - 1, 5), Reach::Unknown);
        assert!(matches!(g.find_path(0, n as u32 - 1, 100), Reach::Path(_)));
    }
}
