//! The contraction engine behind [`super::Clusterer`]: union of clusters in
//! the cycle graph, merge legality (cycles and incompatible pairs), the edge
//! and sibling passes, and dissolving clusters below the minimum size.
//! The reasoning (soundness, maximality, determinism) is in the parent
//! module's doc.

use rustc_hash::{FxHashMap, FxHashSet};

use autoclust_graph::{AttrValue, Graph, NodeId};

use super::cycles::{GraphCycles, Reach};
use super::{Cluster, ClusterConfig, ClusterId, Clustering, Refusal};
use crate::compilable::{Compilability, NotCompilable};
use crate::safety::{forward_edges, SafetyAnalysis};

/// A refusal as the rounds record it. A write-before-read pair's reader is looked up only
/// for the refusals of the last round: that round merges nothing, so every cluster is then
/// as it was when the refusal was made and the lookup gives what it would have given at
/// once — and the earlier rounds' refusals, discarded, never pay for it (the lookup probes
/// one reached set per resource op of a cluster of thousands).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Pending {
    Ready(Refusal),
    Reader { from: NodeId, cluster: u32 },
}

/// A refusal recorded in [`Engine::refusals`] (its index): what the passes collect, so a
/// refused merge copies nothing — at 10⁵ nodes the rounds refuse ~130k merges each, and
/// only the last round's refusals are ever looked at, and only when asked
/// ([`ClusterConfig::explain_refusals`]). A pair keeps its index for good; its entry is
/// replaced only when a lapsed refusal is checked again, which the last round (it merges
/// nothing) never does after recording one, so the entries the last round names are the
/// refusals it made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RefusalId(u32);

impl From<Refusal> for Pending {
    fn from(r: Refusal) -> Pending {
        Pending::Ready(r)
    }
}

/// The union of two increasing lists of distinct writers (each writer is in one cluster).
fn merge_sorted(a: Vec<u32>, b: Vec<u32>) -> Vec<u32> {
    if b.is_empty() {
        return a;
    }
    if a.is_empty() {
        return b;
    }
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i] < b[j] {
            out.push(a[i]);
            i += 1;
        } else {
            out.push(b[j]);
            j += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

/// The first edge pass ([`Phase::DeferIncrements`]) defers contracting an edge whose two
/// clusters lie more than this many ranks apart until it has tried every other edge. Such
/// an edge is a long control edge of a big graph (an order between far-apart steps): tried
/// in its turn, its cycle check and Pearce–Kelly window cross every node still between the
/// two — at 10⁵ nodes the long edges re-ranked ~470k nodes and scanned a million edges —,
/// while once the local contractions are done ten times fewer nodes lie between them.
const LONG_CONTRACTION: u32 = 1024;

/// At one shared producer or consumer, how many separate sibling groups are
/// kept as merge targets (bounds the pairs tried at very wide nodes).
const MAX_SIBLING_GROUPS: usize = 8;

/// Clusters `graph`; reruns with the nodes of dissolved multi-node clusters
/// excluded until every cluster reaches the minimum size.
pub(crate) fn cluster(
    graph: &Graph,
    safety: &SafetyAnalysis,
    compilability: &Compilability,
    config: &ClusterConfig,
) -> Clustering {
    let min = config.min_cluster_size.max(1);
    let mut comp = compilability.clone();
    let topo_pos = topo_positions(graph, safety);
    loop {
        let mut engine = Engine::new(graph, safety, &comp, config, &topo_pos);
        let refusals = engine.run();
        let groups = engine.groups();
        let idle = |g: &Vec<NodeId>| min > 1 && g.iter().all(|&n| does_no_work(&graph.node(n).op));
        let dissolved: Vec<&Vec<NodeId>> =
            groups.iter().filter(|g| (g.len() < min && g.len() > 1) || (g.len() >= min && idle(g))).collect();
        if !dissolved.is_empty() {
            tracing::debug!(count = dissolved.len(), "dissolving undersized or idle clusters and rerunning");
            for g in dissolved {
                let why = if g.len() < min {
                    format!("its cluster had {} nodes, fewer than the minimum {min}", g.len())
                } else {
                    "its cluster held only constants and identities: nothing to compile".to_string()
                };
                for &n in g {
                    comp.exclude(n, NotCompilable::Excluded { why: why.clone() });
                }
            }
            continue;
        }
        let mut of_node = vec![None; graph.len()];
        let mut clusters = Vec::new();
        for g in groups.into_iter().filter(|g| g.len() >= min) {
            let id = ClusterId(clusters.len() as u32);
            for &n in &g {
                of_node[n.index()] = Some(id);
            }
            clusters.push(Cluster { name: id.to_string(), nodes: g });
        }
        let mut explanations = refusals;
        explanations.extend(
            graph
                .node_ids()
                .filter_map(|n| comp.refusal(n).map(|r| Refusal::NotCompilable { node: n, reason: r.clone() })),
        );
        return Clustering { clusters, of_node, explanations };
    }
}

/// A single `AssignAdd/SubVariableOp` of an integer variable by a scalar constant
/// (`iteration += 1`); TF defers it so weight updates cluster first.
fn is_iteration_increment(graph: &Graph, id: NodeId) -> bool {
    let node = graph.node(id);
    if !matches!(node.op.as_str(), "AssignAddVariableOp" | "AssignSubVariableOp") {
        return false;
    }
    if !node.attr("dtype").and_then(AttrValue::as_type).is_some_and(|t| t.is_integer()) {
        return false;
    }
    node.inputs.iter().any(|o| {
        let p = graph.node(o.node);
        p.op == "Const" && p.attr("value").and_then(AttrValue::as_tensor).is_some_and(|t| t.rank() == 0)
    })
}

/// For each candidate writer (a write or modify of a variable), the set of the graph's final
/// nodes (nothing consumes them) that it reaches, interned, with the writer itself
/// ([`ClusterConfig::writes_apart_by_target`]); `None` for every other node, and for all
/// when the graph has more than [`super::MAX_TARGET_SETS_SINKS`] final nodes. One bitset
/// of final nodes per node, filled consumers first along the safety analysis' order.
fn writer_target_sets(graph: &Graph, safety: &SafetyAnalysis, candidate: &[bool]) -> Vec<Option<(u32, NodeId)>> {
    let n = graph.len();
    let succ = forward_edges(graph);
    let mut sink_index = vec![u32::MAX; n];
    let mut sinks = 0usize;
    for (i, s) in succ.iter().enumerate() {
        if s.is_empty() {
            sink_index[i] = sinks as u32;
            sinks += 1;
        }
    }
    if sinks > super::MAX_TARGET_SETS_SINKS || !graph.node_ids().any(|id| safety.writer_index(id).is_some()) {
        return vec![None; n];
    }
    let words = sinks.div_ceil(64).max(1);
    let mut bits = vec![0u64; n * words];
    for &id in safety.order().iter().rev() {
        let i = id.index();
        if sink_index[i] != u32::MAX {
            let k = sink_index[i] as usize;
            bits[i * words + k / 64] |= 1 << (k % 64);
        }
        for s in &succ[i] {
            let j = s.index();
            for w in 0..words {
                bits[i * words + w] |= bits[j * words + w];
            }
        }
    }
    let mut interned: FxHashMap<&[u64], u32> = FxHashMap::default();
    graph
        .node_ids()
        .map(|id| {
            let i = id.index();
            if !candidate[i] || safety.writer_index(id).is_none() {
                return None;
            }
            let next = interned.len() as u32;
            Some((*interned.entry(&bits[i * words..(i + 1) * words]).or_insert(next), id))
        })
        .collect()
}

/// Each node's position in the safety analysis' topological order.
fn topo_positions(graph: &Graph, safety: &SafetyAnalysis) -> Vec<u32> {
    let mut topo_pos = vec![0u32; graph.len()];
    for (i, id) in safety.order().iter().enumerate() {
        topo_pos[id.index()] = i as u32;
    }
    topo_pos
}

/// A device name in one spelling ([`DeviceName`](autoclust_graph::device::DeviceName)'s: the
/// local prefix and `device:` dropped, the type upper-cased — `/device:CPU:0`, `/cpu:0` and
/// `/job:localhost/replica:0/task:0/device:CPU:0` are one device); `None` for no device.
pub(crate) fn canonical_device(device: &str) -> Option<String> {
    autoclust_graph::device::DeviceName::parse(device).map(|d| d.to_string())
}

/// Ops that compute nothing a compiler could fuse: TensorFlow's zero-effective-size
/// `Const` and `Identity`, plus the other pure forwarding and ordering ops. Plain variable
/// reads and assignments count as work, as in TensorFlow (its tests cluster `{Const,
/// AssignVariableOp, ReadVariableOp}`).
fn does_no_work(op: &str) -> bool {
    matches!(op, "Const" | "Identity" | "IdentityN" | "NoOp" | "StopGradient" | "Snapshot" | "PreventGradient")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Only edges into a single `Shape`/`Size`/`Rank` node.
    ShapeConsumers,
    /// Every edge except into sink-like `NoOp`s and out of `iteration += 1`.
    DeferIncrements,
    /// Every edge.
    All,
}

struct Engine<'a> {
    graph: &'a Graph,
    safety: &'a SafetyAnalysis,
    config: &'a ClusterConfig,
    topo_pos: &'a [u32],
    cycles: GraphCycles,
    /// Union-find over cycle-graph ids: a dead id points at what absorbed it.
    parent: Vec<u32>,
    candidate: Vec<bool>,
    /// The members of each cluster as a ring: `next` leads from a member to the next one of
    /// its cluster and back, so two clusters join by swapping one link each (a list per
    /// node was 10⁵ allocations, and merges copied members).
    next: Vec<u32>,
    /// The number of members of each live cluster.
    size: Vec<u32>,
    /// The member earliest in topological order (names the cluster in refusals).
    first: Vec<NodeId>,
    /// Dense indices of the writers in the cluster, increasing: a short list (a cluster
    /// holds a few writers; a bitset over every writer of the graph made each check scan
    /// ~N/64 words).
    writers: Vec<Vec<u32>>,
    /// Dense indices of the writers reaching some reader in the cluster.
    /// `None` for no reader; shared with the safety analysis until a merge unions two sets
    /// (a copy per reader was 12 MB of fresh pages at 10⁵ nodes).
    reached: Vec<Option<std::rc::Rc<crate::safety::WriterSet>>>,
    /// The earliest topological position of a writer in the cluster (`u32::MAX`: none) and
    /// the latest of a reader (0: none). A writer reaches a reader only from an earlier
    /// position, so most conflict checks end on these two numbers without touching a
    /// bitset (the bitset probes' cache misses were the clusterer's hottest loop).
    first_writer: Vec<u32>,
    last_reader: Vec<u32>,
    resource_ops: Vec<Vec<NodeId>>,
    /// The cluster's multi-variable updates with their variables
    /// ([`crate::compilable::multi_variable_update`]); few, so merges compare them pairwise.
    updates: Vec<Vec<(NodeId, Vec<Option<String>>)>>,
    /// v1 control flow: only nodes of one frame with one deadness predicate may merge.
    deadness: Option<std::sync::Arc<crate::deadness::DeadnessAnalysis>>,
    /// The cluster's device (interned [`canonical_device`]) and the member placed there first;
    /// `None` while no member names a device. Two clusters on different devices never merge,
    /// as TensorFlow's `AreDevicesCompatible` (one compiled function runs on one device).
    device: Vec<Option<(u32, NodeId)>>,
    /// The set of final nodes the cluster's writes are needed by (interned; all of a
    /// cluster's writes share it) and one such writer; `None` while the cluster writes
    /// nothing or the rule is off ([`ClusterConfig::writes_apart_by_target`]).
    target_set: Vec<Option<(u32, NodeId)>>,
    /// Merges tried and made (reported per pass under `RUST_LOG=debug`).
    tries: u64,
    merges: u64,
    /// The merge count when each cluster last absorbed another (0: never).
    changed_at: Vec<u64>,
    /// Each refused ordered pair of clusters, with the merge count then, the refusal and
    /// how long it stands ([`Stands`]). So the rounds after the first re-try only the pairs
    /// whose refusal may have lapsed — at 10⁶ nodes they re-tried ~900k refused pairs
    /// each, for a few hundred merges.
    /// The map holds an index into `refusals` (small entries: a table of whole refusals
    /// moved ~100 bytes per entry at every rehash).
    refused: FxHashMap<(u32, u32), u32>,
    refusals: Vec<(u64, Pending, Stands)>,
    /// Whether a cluster was ever the first of a refused pair (most never are: their merges
    /// skip the lookup in `refused`).
    ever_refused: Vec<bool>,
    /// The inner nodes of the path that refused the last merge for a cycle.
    inner_path: Box<[u32]>,
    /// What the phases ask of a lone node, per node ([`Role`]), so the passes do not
    /// compare op names.
    role: Vec<u8>,
}

/// How long a refusal of a pair of clusters stands while the two stay the roots they were.
/// Clusters only grow, so a writer of one reaching a reader of the other, two updates that
/// share some variables and two deadness predicates stay what they were: those refusals
/// stand for good. A path between the two through other clusters survives any contraction
/// that leaves one of its inner nodes in a third cluster (the path's image through the
/// contractions is a walk from one to the other through that cluster: in a DAG, a path of
/// length ≥ 2). A check that ran out of budget may pass once either cluster changes.
#[derive(Clone, Debug)]
enum Stands {
    Always,
    /// While one of these nodes lies outside both clusters.
    WhileOutside(Box<[u32]>),
    /// While neither cluster absorbs another.
    WhileUnchanged,
}

/// Bits of [`Engine::role`].
struct Role;

impl Role {
    /// `Shape`, `Size` or `Rank`.
    const SHAPE: u8 = 1;
    /// A `NoOp`.
    const NO_OP: u8 = 2;
    /// `iteration += 1` ([`Engine::is_iteration_increment`]).
    const INCREMENT: u8 = 4;
}

impl<'a> Engine<'a> {
    fn new(
        graph: &'a Graph,
        safety: &'a SafetyAnalysis,
        comp: &Compilability,
        config: &'a ClusterConfig,
        topo_pos: &'a [u32],
    ) -> Engine<'a> {
        let _span = tracing::debug_span!("cycle_graph").entered();
        let n = graph.len();
        let order: Vec<u32> = safety.order().iter().map(|id| id.0).collect();
        let mut cycles = GraphCycles::new(n, &order);
        // Each edge once (`forward_edges`' edges, straight from each node's predecessors:
        // no list of successors per node), along the safety analysis' topological order.
        // Consumers in increasing id, each one's producers too: every adjacency set is in
        // the order `forward_edges` would give.
        let mut preds = Vec::new();
        for dst in graph.node_ids() {
            preds.clear();
            preds.extend(graph.forward_predecessors(dst).map(|p| p.0));
            preds.sort_unstable();
            preds.dedup();
            for &src in &preds {
                cycles.add_ordered_edge(src, dst.0);
            }
        }
        // A loop frame runs as one unit: each of its exits waits for every one of its
        // enters, which the forward edges (loop back edges dropped) do not all say.
        // TensorFlow collapses each frame into one cycle-detection node; these edges give
        // the same answer for clusters outside the frame.
        let deadness = comp.deadness_arc();
        let mut loops_ok = true;
        for &(enter, exit) in deadness.as_ref().map_or(&[][..], |d| d.loop_edges()) {
            loops_ok &= cycles.insert_edge(enter.0, exit.0);
        }
        let mut writers = vec![Vec::new(); n];
        let mut reached = vec![None; n];
        let mut first_writer = vec![u32::MAX; n];
        let mut last_reader = vec![0u32; n];
        let mut resource_ops = vec![Vec::new(); n];
        let mut updates = vec![Vec::new(); n];
        // A graph whose loops do not close as frames should (never made by TensorFlow):
        // cluster nothing rather than trust the cycle check.
        let candidate: Vec<bool> = graph.node_ids().map(|id| loops_ok && comp.is_compilable(id)).collect();
        for id in graph.node_ids() {
            let i = id.index();
            if !candidate[i] || safety.kind(id).is_none() {
                continue;
            }
            resource_ops[i].push(id);
            if let Some(vars) = crate::compilable::multi_variable_update(graph, id) {
                updates[i].push((id, vars));
            }
            if let Some(w) = safety.writer_index(id) {
                writers[i].push(w as u32);
                first_writer[i] = topo_pos[i];
            }
            if let Some(set) = safety.reaching_writers_shared(id) {
                reached[i] = Some(set);
                last_reader[i] = topo_pos[i];
            }
        }
        let mut interned: FxHashMap<String, u32> = FxHashMap::default();
        let device = graph
            .node_ids()
            .map(|id| {
                let d = canonical_device(&graph.node(id).device)?;
                let next = interned.len() as u32;
                Some((*interned.entry(d).or_insert(next), id))
            })
            .collect();
        let target_set =
            if config.writes_apart_by_target { writer_target_sets(graph, safety, &candidate) } else { vec![None; n] };
        Engine {
            graph,
            safety,
            config,
            topo_pos,
            cycles,
            device,
            target_set,
            parent: (0..n as u32).collect(),
            candidate,
            next: (0..n as u32).collect(),
            size: vec![1; n],
            first: graph.node_ids().collect(),
            writers,
            reached,
            first_writer,
            last_reader,
            resource_ops,
            updates,
            deadness,
            tries: 0,
            merges: 0,
            changed_at: vec![0; n],
            refused: FxHashMap::default(),
            refusals: Vec::new(),
            ever_refused: vec![false; n],
            inner_path: Box::default(),
            role: graph
                .node_ids()
                .map(|id| match graph.node(id).op.as_str() {
                    "Shape" | "Size" | "Rank" => Role::SHAPE,
                    "NoOp" => Role::NO_OP,
                    _ if is_iteration_increment(graph, id) => Role::INCREMENT,
                    _ => 0,
                })
                .collect(),
        }
    }

    fn find(&mut self, mut x: u32) -> u32 {
        let mut root = x;
        while self.parent[root as usize] != root {
            root = self.parent[root as usize];
        }
        while self.parent[x as usize] != root {
            let next = self.parent[x as usize];
            self.parent[x as usize] = root;
            x = next;
        }
        root
    }

    /// Edge contraction to a fixpoint, then sibling merges, until a round
    /// changes nothing. Returns the refusals of that last round.
    fn run(&mut self) -> Vec<Refusal> {
        let mut scratch = Vec::new();
        if self.role.iter().any(|&r| r & Role::SHAPE != 0) {
            self.edge_pass(Phase::ShapeConsumers, &mut scratch);
        }
        self.edge_pass(Phase::DeferIncrements, &mut scratch);
        loop {
            let mut pending = Vec::new();
            let edges = self.edge_pass(Phase::All, &mut pending);
            let siblings = self.config.sibling_merges && self.sibling_pass(&mut pending);
            if !edges && !siblings {
                if !self.config.explain_refusals {
                    return Vec::new();
                }
                let _span = tracing::debug_span!("resolve_refusals", count = pending.len()).entered();
                // Pairs re-tried at several producers or consumers repeat their refusal:
                // look each one's reader up once.
                let mut seen = FxHashSet::default();
                let mut pending: Vec<Pending> =
                    pending.into_iter().map(|id| self.refusals[id.0 as usize].1.clone()).collect();
                pending.retain(|p| seen.insert(p.clone()));
                let mut refusals: Vec<Refusal> = pending.into_iter().map(|p| self.resolve(p)).collect();
                let mut seen = FxHashSet::default();
                refusals.retain(|r| seen.insert(r.clone()));
                return refusals;
            }
        }
    }

    /// The work counters a pass's debug event reports the growth of: merges, refusals
    /// (tries − merges), edges the cycle checks scanned, nodes re-ranked.
    fn work(&self) -> [u64; 4] {
        [self.merges, self.tries, self.cycles.scanned(), self.cycles.reranked()]
    }

    fn log_work(&self, what: &str, before: [u64; 4]) {
        let now = self.work();
        tracing::debug!(
            merges = now[0] - before[0],
            refused = (now[1] - before[1]) - (now[0] - before[0]),
            scanned = now[2] - before[2],
            reranked = now[3] - before[3],
            "{what}"
        );
    }

    /// A recorded refusal with its reader looked up ([`Pending`]).
    fn resolve(&self, p: Pending) -> Refusal {
        match p {
            Pending::Ready(r) => r,
            Pending::Reader { from, cluster } => {
                let to = self.resource_ops[cluster as usize]
                    .iter()
                    .copied()
                    .find(|&r| self.safety.is_incompatible(from, r))
                    .expect("a writer in a cluster's reached set reaches one of its readers");
                Refusal::WriteBeforeRead { from, to }
            }
        }
    }

    /// Tries to contract every cycle-graph edge between two candidate
    /// clusters, consumers first; the first pass ([`Phase::DeferIncrements`]) tries its
    /// edges between clusters more than [`LONG_CONTRACTION`] ranks apart last, shortest
    /// first. Returns whether anything merged.
    fn edge_pass(&mut self, phase: Phase, refusals: &mut Vec<RefusalId>) -> bool {
        let _span = tracing::debug_span!("edge_pass", phase = ?phase).entered();
        let work = self.work();
        let mut changed = false;
        let mut succs = Vec::new();
        let mut deferred = Vec::new();
        for x in self.cycles.post_order() {
            if !self.cycles.is_live(x) || !self.candidate[x as usize] {
                continue;
            }
            succs.clear();
            succs.extend(self.cycles.successors(x).iter());
            for &y in &succs {
                let from = self.find(x);
                let to = self.find(y);
                if from == to || !self.candidate[to as usize] || !self.phase_allows(phase, from, to) {
                    continue;
                }
                let distance = self.cycles.rank(from).abs_diff(self.cycles.rank(to));
                if phase == Phase::DeferIncrements && distance > LONG_CONTRACTION {
                    deferred.push((distance, x, y));
                    continue;
                }
                let res = self.try_merge(from, to, self.config.edge_search_budget);
                match res {
                    Ok(_) => changed = true,
                    Err(r) => refusals.push(r),
                }
            }
        }
        // The long contractions, shortest first (in the pass's order among equals), once
        // the local ones have shrunk the graph their windows and searches cross.
        if !deferred.is_empty() {
            self.log_work("local contractions done", work);
            tracing::debug!(count = deferred.len(), "contracting the deferred long edges");
        }
        deferred.sort_by_key(|&(distance, _, _)| distance);
        for (_, x, y) in deferred {
            let from = self.find(x);
            let to = self.find(y);
            if from == to || !self.candidate[to as usize] || !self.phase_allows(phase, from, to) {
                continue;
            }
            match self.try_merge(from, to, self.config.edge_search_budget) {
                Ok(_) => changed = true,
                Err(r) => refusals.push(r),
            }
        }
        self.log_work("edge pass done", work);
        changed
    }

    fn single_op(&self, x: u32) -> Option<&str> {
        (self.size[x as usize] == 1).then(|| self.graph.node(NodeId(x)).op.as_str())
    }

    /// The [`Role`] bits of a lone node's cluster (a cluster of one node is that node's id;
    /// 0 for a cluster of several).
    fn lone_role(&self, x: u32) -> u8 {
        if self.size[x as usize] == 1 {
            self.role[x as usize]
        } else {
            0
        }
    }

    fn phase_allows(&self, phase: Phase, from: u32, to: u32) -> bool {
        match phase {
            Phase::All => true,
            Phase::ShapeConsumers => self.lone_role(to) & Role::SHAPE != 0,
            Phase::DeferIncrements => {
                let sink_like = self.lone_role(to) & Role::NO_OP != 0 && self.cycles.successors(to).is_empty();
                !sink_like && self.lone_role(from) & Role::INCREMENT == 0
            }
        }
    }

    /// Merges clusters that consume a common producer, or feed a common
    /// consumer, when legal. Returns whether anything merged.
    fn sibling_pass(&mut self, refusals: &mut Vec<RefusalId>) -> bool {
        let _span = tracing::debug_span!("sibling_pass").entered();
        let work = self.work();
        let mut changed = false;
        let budget = self.config.sibling_search_budget;
        // One buffer each for every producer's group and heads (two allocations per node
        // otherwise).
        let (mut group, mut heads): (Vec<(u32, u32)>, Vec<u32>) = (Vec::new(), Vec::new());
        for p in self.cycles.topo_order() {
            for consumers in [true, false] {
                if !self.cycles.is_live(p) {
                    break;
                }
                // Two users of one variable handle share no tensor: merging
                // them gains nothing (and would glue, e.g., initializers to
                // the training step).
                if consumers && self.shares_no_data(p) {
                    continue;
                }
                // Likewise, nodes that only wait for one node (a step's final `NoOp`, whose
                // ten thousand control inputs would each try eight merges), or that one
                // node only orders (an assignment, which has no outputs), share no tensor.
                if self.passes_no_data(p, consumers) {
                    continue;
                }
                group.clear();
                let members = if consumers { self.cycles.successors(p) } else { self.cycles.predecessors(p) };
                // By rank, as (rank, member): ranks are distinct, so the order is the one a
                // sort by a rank lookup gives, without a lookup per comparison.
                group
                    .extend(members.iter().filter(|&&c| self.candidate[c as usize]).map(|&c| (self.cycles.rank(c), c)));
                if group.len() < 2 {
                    continue;
                }
                group.sort_unstable();
                heads.clear();
                for &(_, c) in &group {
                    let mut placed = false;
                    for slot in heads.iter_mut() {
                        let head = self.find(*slot);
                        let c = self.find(c);
                        if head == c {
                            placed = true;
                            break;
                        }
                        match self.try_merge(head, c, budget) {
                            Ok(s) => {
                                *slot = s;
                                changed = true;
                                placed = true;
                                break;
                            }
                            Err(r) => refusals.push(r),
                        }
                    }
                    if !placed {
                        // Keep the latest groups: a sibling far from every head in the
                        // order opens a new group, and the oldest one is no longer
                        // tried, so each check's rank window stays local.
                        if heads.len() == MAX_SIBLING_GROUPS {
                            heads.remove(0);
                        }
                        heads.push(self.find(c));
                    }
                }
            }
        }
        self.log_work("sibling pass done", work);
        changed
    }

    /// Whether `p` is a lone node whose outputs are resource handles.
    fn shares_no_data(&self, p: u32) -> bool {
        matches!(self.single_op(p), Some("VarHandleOp" | "_VarHandlesOp" | "VariableV2" | "Variable"))
            || (self.size[p as usize] == 1 && autoclust_graph::effects::names_variable(self.graph.node(NodeId(p))))
    }

    /// Whether `p` is a lone node that passes no tensor to its consumers
    /// (`consumers`: it has no outputs) or takes none from its producers (it has
    /// no data inputs): every edge through it is a control edge.
    fn passes_no_data(&self, p: u32, consumers: bool) -> bool {
        if self.size[p as usize] != 1 {
            return false;
        }
        if consumers {
            self.graph.output_count(NodeId(p)) == Some(0)
        } else {
            self.graph.node(NodeId(p)).inputs.is_empty()
        }
    }

    /// Merges two live candidate clusters if legal; returns the survivor, or the refusal
    /// recorded. A pair refused before is refused again without a check while its refusal
    /// stands (see `refused`).
    fn try_merge(&mut self, a: u32, b: u32, budget: usize) -> Result<u32, RefusalId> {
        super::cycles::count(1);
        self.tries += 1;
        // `ever_refused` first: most pairs were never refused, and the table lookup is a cache
        // miss at 10⁵ nodes.
        let known = if self.ever_refused[a as usize] { self.refused.get(&(a, b)) } else { None };
        if let Some((i, (at, _, stands))) = known.map(|&i| (i, &self.refusals[i as usize])) {
            let unchanged = self.changed_at[a as usize] <= *at && self.changed_at[b as usize] <= *at;
            let holds = unchanged
                || match stands {
                    Stands::Always => true,
                    Stands::WhileOutside(inner) => inner.iter().any(|&v| {
                        let r = self.root(v);
                        r != a && r != b
                    }),
                    Stands::WhileUnchanged => false,
                };
            if holds {
                return Err(RefusalId(i));
            }
        }
        let p = match self.check_and_merge(a, b, budget) {
            Ok(s) => return Ok(s),
            Err(p) => p,
        };
        {
            let stands = match &p {
                Pending::Reader { .. }
                | Pending::Ready(Refusal::PartlySharedVariables { .. })
                | Pending::Ready(Refusal::Deadness { .. })
                | Pending::Ready(Refusal::Devices { .. })
                | Pending::Ready(Refusal::WritesForDifferentTargets { .. }) => Stands::Always,
                Pending::Ready(Refusal::WouldCreateCycle { .. }) => {
                    Stands::WhileOutside(std::mem::take(&mut self.inner_path))
                }
                _ => Stands::WhileUnchanged,
            };
            let entry = (self.merges, p, stands);
            let id = match self.refused.entry((a, b)) {
                std::collections::hash_map::Entry::Occupied(e) => {
                    self.refusals[*e.get() as usize] = entry;
                    *e.get()
                }
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(self.refusals.len() as u32);
                    self.refusals.push(entry);
                    self.refusals.len() as u32 - 1
                }
            };
            self.ever_refused[a as usize] = true;
            Err(RefusalId(id))
        }
    }

    /// The cluster of `x` (as [`Engine::find`], without shortening the way).
    fn root(&self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            x = self.parent[x as usize];
        }
        x
    }

    fn check_and_merge(&mut self, a: u32, b: u32, budget: usize) -> Result<u32, Pending> {
        if let (Some((da, na)), Some((db, nb))) = (self.device[a as usize], self.device[b as usize]) {
            if da != db {
                return Err(Refusal::Devices { from: na, to: nb }.into());
            }
        }
        if let (Some((ta, wa)), Some((tb, wb))) = (self.target_set[a as usize], self.target_set[b as usize]) {
            if ta != tb {
                return Err(Refusal::WritesForDifferentTargets { from: wa, to: wb }.into());
            }
        }
        if let Some(r) =
            self.resource_conflict(a, b).or_else(|| self.resource_conflict(b, a)).or_else(|| self.update_conflict(a, b))
        {
            return Err(r);
        }
        let (fa, fb) = (self.first[a as usize], self.first[b as usize]);
        if let Some(why) = self.deadness.as_ref().and_then(|d| d.why_apart(self.graph, fa, fb)) {
            return Err(Refusal::Deadness { from: fa, to: fb, why }.into());
        }
        match self.cycles.merge(a, b, budget) {
            Ok(s) => {
                self.merges += 1;
                self.changed_at[s as usize] = self.merges;
                let v = if s == a { b } else { a };
                self.parent[v as usize] = s;
                let (s, v) = (s as usize, v as usize);
                self.next.swap(s, v);
                self.size[s] += self.size[v];
                let moved = std::mem::take(&mut self.resource_ops[v]);
                self.resource_ops[s].extend(moved);
                let moved = std::mem::take(&mut self.updates[v]);
                self.updates[s].extend(moved);
                let w = std::mem::take(&mut self.writers[v]);
                let mine = std::mem::take(&mut self.writers[s]);
                self.writers[s] = merge_sorted(mine, w);
                self.device[s] = self.device[s].or(self.device[v]);
                self.target_set[s] = self.target_set[s].or(self.target_set[v]);
                self.first_writer[s] = self.first_writer[s].min(self.first_writer[v]);
                self.last_reader[s] = self.last_reader[s].max(self.last_reader[v]);
                match (self.reached[s].take(), self.reached[v].take()) {
                    (Some(mut x), Some(y)) => {
                        if !std::rc::Rc::ptr_eq(&x, &y) {
                            std::rc::Rc::make_mut(&mut x).union_with(&y);
                        }
                        self.reached[s] = Some(x);
                    }
                    (x, y) => self.reached[s] = x.or(y),
                }
                if self.topo_pos[self.first[v].index()] < self.topo_pos[self.first[s].index()] {
                    self.first[s] = self.first[v];
                }
                Ok(s as u32)
            }
            Err(Reach::Path(path)) => {
                self.inner_path = path[1..path.len() - 1].into();
                Err(Refusal::WouldCreateCycle { from: fa, to: fb, via: self.first[path[1] as usize] }.into())
            }
            Err(_) => Err(Refusal::CycleCheckTooCostly { from: fa, to: fb }.into()),
        }
    }

    /// A writer of `a` reaching a reader of `b`: the incompatible pair (its reader looked
    /// up later, [`Pending`]).
    fn resource_conflict(&self, a: u32, b: u32) -> Option<Pending> {
        if self.first_writer[a as usize] >= self.last_reader[b as usize] {
            return None;
        }
        let reached = self.reached[b as usize].as_deref()?;
        if self.writers[a as usize].is_empty() {
            return None;
        }
        // The lowest such writer, as a bitset intersection would give it (explanations
        // name the same pair whatever the merge order).
        let w = reached.first_common(&self.writers[a as usize])?;
        Some(Pending::Reader { from: self.safety.writer(w as usize), cluster: b })
    }

    /// Two multi-variable updates, one in each cluster, that share only some variables
    /// ([`crate::compilable::updates_conflict`]).
    fn update_conflict(&self, a: u32, b: u32) -> Option<Pending> {
        let (ua, ub) = (&self.updates[a as usize], &self.updates[b as usize]);
        ua.iter().find_map(|(x, vx)| {
            ub.iter()
                .find(|(_, vy)| crate::compilable::updates_conflict(vx, vy))
                .map(|&(y, _)| Refusal::PartlySharedVariables { from: *x, to: y }.into())
        })
    }

    /// The final candidate clusters, members in topological order, ordered
    /// by their first member's topological position.
    fn groups(&self) -> Vec<Vec<NodeId>> {
        let mut groups: Vec<Vec<NodeId>> = (0..self.graph.len() as u32)
            .filter(|&x| self.cycles.is_live(x) && self.candidate[x as usize])
            .map(|x| {
                let mut m = Vec::with_capacity(self.size[x as usize] as usize);
                let mut at = x;
                loop {
                    m.push(NodeId(at));
                    at = self.next[at as usize];
                    if at == x {
                        break;
                    }
                }
                m.sort_unstable_by_key(|id| self.topo_pos[id.index()]);
                m
            })
            .collect();
        groups.sort_unstable_by_key(|g| self.topo_pos[g[0].index()]);
        groups
    }
}

#[cfg(test)]
mod tests {
    use autoclust_graph::Library;

    use super::super::tests::node;
    use super::*;

    /// A pair refused once is not checked again while neither cluster changes: a repeated
    /// sibling round refuses the same pairs with the same refusals and searches no path.
    #[test]
    fn refused_pairs_are_not_checked_again_until_a_cluster_changes() {
        // Consumers c0..c3 of p, each feeding the next through an uncompilable node, so
        // every sibling pair would close a cycle through it.
        let mut nodes = vec![node("p", "Const", &[])];
        for i in 0..4 {
            let prev = if i == 0 { "p".to_string() } else { format!("x{}", i - 1) };
            nodes.push(node(&format!("c{i}"), "Relu", &["p", &prev]));
            nodes.push(node(&format!("x{i}"), "Uncompilable", &[&format!("c{i}")]));
        }
        nodes.push(node("y", "Relu", &["c0"]));
        let g = Graph::from_raw(nodes, Library::default(), None).unwrap();
        let safety = SafetyAnalysis::compute(&g).unwrap();
        let comp = Compilability::from_fn(&g, |id| {
            (g.node(id).op == "Uncompilable").then(|| NotCompilable::UnsupportedOp { op: "Uncompilable".into() })
        });
        let config = ClusterConfig { min_cluster_size: 1, ..Default::default() };
        let topo_pos = topo_positions(&g, &safety);
        let mut engine = Engine::new(&g, &safety, &comp, &config, &topo_pos);
        let mut first = Vec::new();
        assert!(!engine.sibling_pass(&mut first), "every sibling pair closes a cycle");
        assert_eq!(first.len(), 6, "{first:?}");
        let (searches, tries) = (engine.cycles.searches(), engine.tries);
        assert!(searches > 0 && engine.cycles.scanned() > 0);
        let mut again = Vec::new();
        assert!(!engine.sibling_pass(&mut again));
        assert_eq!(engine.cycles.searches(), searches, "a refused pair was checked again");
        assert_eq!(engine.tries, tries + 6);
        assert_eq!(first, again);
        // A cluster that grows off the paths that refused it keeps its refusals: each path
        // still leaves it through a node outside both clusters.
        let (c0, x0, y) = (g.find("c0").unwrap().0, g.find("x0").unwrap().0, g.find("y").unwrap().0);
        assert_eq!(engine.try_merge(c0, y, usize::MAX), Ok(c0));
        let searches = engine.cycles.searches();
        let mut grown = Vec::new();
        engine.sibling_pass(&mut grown);
        assert_eq!(engine.cycles.searches(), searches, "a refusal whose path still stands was checked again");
        assert_eq!(grown, first);
        // Once a cluster takes in a node of the path, the pairs it refused are checked afresh
        // (c0 with c1, whose path ran through x0; not c0 with c2, whose path also runs
        // through c1 and x1).
        engine.candidate[x0 as usize] = true;
        assert!(engine.try_merge(c0, x0, usize::MAX).is_ok());
        let searches = engine.cycles.searches();
        let mut third = Vec::new();
        engine.sibling_pass(&mut third);
        assert!(engine.cycles.searches() > searches, "a changed cluster's pairs were not checked again");
        let refusal = |id: &RefusalId| &engine.refusals[id.0 as usize].1;
        assert!(
            first.iter().all(|id| matches!(refusal(id), Pending::Ready(Refusal::WouldCreateCycle { .. }))),
            "{first:?}"
        );
    }
}
