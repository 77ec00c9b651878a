//! Auto-clustering: partition the compilable nodes into clusters that the
//! bridge can run as one snapshot-read, one pure function, one write-back.
//!
//! # Algorithm
//! TensorFlow's `mark_for_compilation_pass` (reference §2), plus sibling
//! merges:
//! 1. Candidates are the nodes [`Compilability`] admits; each starts as a
//!    singleton cluster. Every other node stays a single opaque node.
//! 2. A cycle graph over (clusters + other nodes), the graph's data and
//!    control edges minus loop back edges, kept in a dynamic topological
//!    order ([`cycles::GraphCycles`], Pearce–Kelly).
//! 3. Edge contraction, consumers first (descending rank): TF's phase 0
//!    (pull `Shape`/`Size`/`Rank` into their producer), phase 1 (defer
//!    sink-like `NoOp`s and scalar integer `iteration += 1` updates; an edge
//!    between clusters far apart in the order waits until every local one is
//!    tried, so that its check and re-ranking cross a contracted graph), then
//!    every edge, repeated to a fixpoint.
//! 4. Sibling merges (TensorFlow has none): clusters that consume a common
//!    producer, or feed a common consumer, are merged when legal — fusion
//!    of work on the same data and one launch instead of several. Users of
//!    one variable handle do not count as siblings: they share no tensor;
//!    nor do the nodes a lone node only orders (it has no outputs) or the
//!    nodes a lone node only waits for (it has no data inputs, e.g. a
//!    step's final `NoOp`). Siblings are tried in rank order against the
//!    latest `MAX_SIBLING_GROUPS` groups at that node, so each cycle check
//!    stays between nearby ranks.
//! 5. Steps 3–4 repeat until a whole round changes nothing. Clusters with
//!    fewer than `min_cluster_size` nodes are dissolved; if a dissolved
//!    cluster had more than one node, clustering reruns with its nodes
//!    excluded (dissolving it may unblock paths), until every cluster is
//!    large enough.
//!
//! A merge of clusters A and B is *legal* iff
//! * no path of length ≥ 2 joins A and B in the cycle graph, in either
//!   direction ([`cycles::GraphCycles::merge`]): otherwise contracting them
//!   puts the path's middle on a cycle (`WouldCreateCycle { via }`);
//! * A ∪ B holds no incompatible pair of the [`SafetyAnalysis`]. Both
//!   directions are checked with bitsets (writers of A against the writers
//!   reaching B's readers, and vice versa) — cheap, and it keeps the check
//!   valid for sibling merges where no edge orients the pair
//!   (`WriteBeforeRead { from, to }`);
//! * no two multi-variable updates of A ∪ B (each reads all its variables
//!   at one instant) share some but not all variables
//!   (`PartlySharedVariables`, [`crate::compilable::updates_conflict`]):
//!   with no path between them, the second in the cluster's order would
//!   read the shared ones from the first and the rest from the snapshot;
//! * A and B are placed on one device, or one of them on none (`Devices { from, to }`,
//!   TensorFlow's `AreDevicesCompatible`: a compiled function runs on one device, and the
//!   replicas of a multi-device step stay apart);
//! * with v1 control flow, A and B lie in one frame under one deadness
//!   predicate ([`crate::deadness::DeadnessAnalysis`], `Deadness { from, to,
//!   why }`), so the cluster's call is live exactly when its members would
//!   be. The cycle graph then also has an edge from each `Enter` of a loop
//!   frame to each of its `Exit`s: a frame runs as one unit, which the
//!   forward edges (loop back edges dropped) do not all say.
//!
//! # Guarantees (checked by `tests/property.rs` on thousands of random graphs)
//! * No cluster holds an incompatible pair: every merge checks it.
//! * Contracting every cluster leaves the graph acyclic: the cycle graph is
//!   always exactly that contraction and `GraphCycles` never accepts a cycle.
//! * Deterministic: every iteration order is by node id or by rank, and
//!   ranks depend only on the sequence of operations.
//! * Maximal: no two resulting clusters joined by an edge can be merged
//!   legally, except where the cycle check was capped for cost (below). The
//!   last round of step 5 tried every edge between two clusters in the final
//!   state (the cycle graph's edges are exactly those between the final
//!   clusters and the other nodes) and merged none; legality depends only on
//!   that state. A pair refused earlier is not checked again while its refusal
//!   provably holds (`contract::Stands`): a conflict of writers and readers,
//!   of partly shared variables or of deadness for good, since clusters only
//!   grow; a cycle while one inner node of the path found lies outside both
//!   clusters (the path's image through any contractions is then still a
//!   path of length ≥ 2); a refusal for cost while neither cluster has
//!   absorbed another. So the refusal still holds in the final state. A
//!   contraction whose merged node can take one of the two ranks (no
//!   predecessor of the later one ranks after the earlier one, or no successor
//!   of the earlier one before the later one) re-ranks nothing and is not
//!   counted against the budget. Every cycle check — of an edge contraction
//!   (`edge_search_budget`) or of a sibling merge (`sibling_search_budget`) —
//!   visits at most its budget of nodes (and four times as many edges), and a
//!   contraction of two clusters more than the budget apart in the order may
//!   spend at most four times the budget re-ranking (the window of the one
//!   Pearce–Kelly step that re-ranks for the contraction, four units a node
//!   plus one an edge scanned, counted before any rank moves); past either bound the
//!   merge is refused as too costly, and `--explain` says so. Only large graphs
//!   reach the edge budget (on the 10⁵-node graph of `benches/scale/gen_graph.py`
//!   a few dozen contractions of the first pass, none of the final round):
//!   there a check across the graph would search and re-rank a large part of
//!   it, and clustering 10⁶ nodes was quadratic (34 s; 16 s with the cap). The
//!   rerun rule keeps this true after small clusters are dissolved (a
//!   dissolved singleton is the same node in the cycle graph either way).
//!   The same round also tried siblings (shared producer or consumer) in
//!   the final state, except where the search was capped for cost (a
//!   group older than the latest `MAX_SIBLING_GROUPS` at one node, or a
//!   cycle check over `sibling_search_budget` nodes). Two clusters with nothing in common
//!   may still be mergeable: merging them would gain nothing but fewer
//!   launches, and lose parallelism.
//!
//! # Default minimum size: 2
//! A cluster costs a bridge (snapshot, call, write-back) in exchange for
//! fusing its nodes: a single node gains nothing and pays the bridge, while
//! two nodes already keep one intermediate tensor out of memory and replace
//! two executor dispatches by one call. TensorFlow's own tests use 2 (its
//! production default of 4 counts only non-`Const`/`Identity` nodes and is
//! tuned for GPU launch costs we do not have). `--min-cluster-size 1`
//! allows singletons.
//!
//! # Clusters that do no work
//! Like TensorFlow's `effective_cluster_size` (which counts `Const` and
//! `Identity` as zero), a cluster made only of nodes that compute nothing —
//! constants, identities, `NoOp`s — is dissolved whatever its node count
//! (unless `--min-cluster-size 1` asks for every candidate): its bridge would
//! cost a call per step and fuse nothing. It is dissolved like an undersized
//! cluster, so the guarantees above are unaffected.

mod adjacency;
pub mod check;
pub mod contract;
pub mod cycles;
pub mod dot;
#[cfg(test)]
mod tests;

use std::fmt;

use autoclust_graph::infer::{infer, infer_partial};
use autoclust_graph::verify::VerifyError;
use autoclust_graph::{CycleError, Graph, NodeId};

use crate::compilable::{Compilability, NotCompilable};
use crate::safety::{CallEffects, SafetyAnalysis};

/// Index of a cluster in [`Clustering::clusters`]; displays as its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterId(pub u32);

impl ClusterId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cluster_{}", self.0)
    }
}

/// One cluster: its name and members in topological order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cluster {
    pub name: String,
    pub nodes: Vec<NodeId>,
}

/// Why a merge was refused, or a node never became a candidate.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// The node may not be clustered.
    NotCompilable { node: NodeId, reason: NotCompilable },
    /// Merging the clusters of `from` and `to` would create a cycle through `via`.
    WouldCreateCycle { from: NodeId, to: NodeId, via: NodeId },
    /// The cycle check for a sibling merge ran out of budget (refused to stay sound).
    CycleCheckTooCostly { from: NodeId, to: NodeId },
    /// Merging would put the incompatible pair `(from, to)` in one cluster.
    WriteBeforeRead { from: NodeId, to: NodeId },
    /// `from` and `to` update several variables each in one atomic step and share some but
    /// not all of them ([`crate::compilable::updates_conflict`]).
    PartlySharedVariables { from: NodeId, to: NodeId },
    /// v1 control flow: the clusters of `from` and `to` lie in different frames or are
    /// live under different deadness predicates ([`crate::deadness::DeadnessAnalysis`]).
    Deadness { from: NodeId, to: NodeId, why: String },
    /// `from` and `to`, members of the two clusters, are placed on different devices.
    Devices { from: NodeId, to: NodeId },
    /// `from` and `to` write variables and are needed by different sets of the graph's final
    /// nodes (a TF1 graph's `init` and `train`): in a program compiled for every node, a run
    /// of one of those nodes alone would perform both writes
    /// ([`ClusterConfig::writes_apart_by_target`]).
    WritesForDifferentTargets { from: NodeId, to: NodeId },
}

/// The clusterer's parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    /// Clusters with fewer nodes are dissolved (1 keeps singletons).
    pub min_cluster_size: usize,
    /// Whether to merge clusters not joined by an edge (siblings).
    pub sibling_merges: bool,
    /// Most nodes one cycle check of a sibling merge may visit (and re-rank).
    pub sibling_search_budget: usize,
    /// Most nodes one cycle check of an edge contraction may visit (and re-rank): only
    /// graphs of hundreds of thousands of nodes reach it, where a check across the graph
    /// would otherwise search and re-rank a large part of it, making clustering quadratic.
    pub edge_search_budget: usize,
    /// Whether [`Clustering::explanations`] names each merge the final round refused (the
    /// pair and why, for `cluster --explain`). Looking up the reader of every
    /// write-before-read refusal is a tenth of the clusterer's time on large graphs, and
    /// `run` never shows them; uncompilable nodes are explained either way.
    pub explain_refusals: bool,
    /// How the safety analysis counts calls: `cluster` follows the contract
    /// ([`CallEffects::Conservative`]: every call is modify); `run`, `bench` and `compile`
    /// the calls' real effects (the default).
    pub call_effects: CallEffects,
    /// Keep apart variable writes that different sets of the graph's final nodes (those
    /// nothing consumes) need: set by `compile` without a request, whose program may later be
    /// run for one final node alone (a TF1 graph's `train` without its `init`). Runs prune to
    /// their request before clustering and need no such rule. Graphs with more than
    /// [`MAX_TARGET_SETS_SINKS`] final nodes are not split.
    pub writes_apart_by_target: bool,
}

/// The most final nodes [`ClusterConfig::writes_apart_by_target`] tells apart (a bitset of
/// them per node).
pub const MAX_TARGET_SETS_SINKS: usize = 4096;

/// The documented default minimum cluster size (see the module doc).
pub const DEFAULT_MIN_CLUSTER_SIZE: usize = 2;

impl Default for ClusterConfig {
    fn default() -> ClusterConfig {
        ClusterConfig {
            min_cluster_size: DEFAULT_MIN_CLUSTER_SIZE,
            sibling_merges: true,
            sibling_search_budget: 4096,
            edge_search_budget: 4096,
            explain_refusals: true,
            call_effects: CallEffects::Interprocedural,
            writes_apart_by_target: false,
        }
    }
}

/// The result: clusters named `cluster_0..` by their first node's topological position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clustering {
    pub clusters: Vec<Cluster>,
    /// The cluster of every node (`None`: unclustered).
    pub of_node: Vec<Option<ClusterId>>,
    /// Every refusal of the final round, then every non-compilable node.
    pub explanations: Vec<Refusal>,
}

impl Clustering {
    pub fn cluster_of(&self, id: NodeId) -> Option<ClusterId> {
        self.of_node.get(id.index()).copied().flatten()
    }
    pub fn cluster(&self, id: ClusterId) -> &Cluster {
        &self.clusters[id.index()]
    }
}

/// Why clustering could not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClusterError {
    #[error(transparent)]
    Cycle(#[from] CycleError),
    #[error(transparent)]
    Verify(#[from] VerifyError),
}

/// Runs auto-clustering with a configuration.
#[derive(Clone, Debug, Default)]
pub struct Clusterer {
    config: ClusterConfig,
}

impl Clusterer {
    pub fn new(config: ClusterConfig) -> Clusterer {
        Clusterer { config }
    }

    /// Clusters `graph`: infers types, decides compilability, runs the safety analysis.
    pub fn run(&self, graph: &Graph) -> Result<Clustering, ClusterError> {
        let safety = SafetyAnalysis::for_clustering(graph, self.config.call_effects)?;
        let types = infer(graph)?;
        let compilability = Compilability::compute(graph, &types);
        Ok(self.run_with(graph, &safety, &compilability))
    }

    /// Clusters `graph` without giving up on it when a node cannot be typed:
    /// each node whose inference fails is declined alone
    /// ([`NotCompilable::Untyped`], with the inference error), its outputs
    /// typed from its attributes where possible, and the rest clusters. What
    /// `run`, `bench` and `compile` use: the graph is theirs to run, and a
    /// node the registry's shape functions reject may still run. Fails only
    /// on a cycle.
    pub fn run_partial(&self, graph: &Graph) -> Result<Clustering, ClusterError> {
        let safety = SafetyAnalysis::for_clustering(graph, self.config.call_effects)?;
        let (types, errors) = infer_partial(graph)?;
        let mut compilability = Compilability::compute(graph, &types);
        for (id, e) in errors {
            // v1 control flow and its containers never cluster: by design, not a shortfall.
            let op = graph.node(id).op.as_str();
            if autoclust_graph::effects::is_v1_control_flow(op)
                || autoclust_graph::registry::lookup(op)
                    .is_some_and(|s| s.family == autoclust_graph::registry::OpFamily::Container)
            {
                tracing::debug!(node = %graph.name(id), error = %e, "inference failed on a control-flow node");
                continue;
            }
            tracing::debug!(node = %graph.name(id), error = %e, "declined: inference failed");
            compilability.exclude(id, NotCompilable::Untyped { message: e.to_string() });
        }
        Ok(self.run_with(graph, &safety, &compilability))
    }

    /// Clusters with a given analysis and compilability (tests, callers that have them).
    pub fn run_with(&self, graph: &Graph, safety: &SafetyAnalysis, compilability: &Compilability) -> Clustering {
        let _span = tracing::debug_span!("cluster", nodes = graph.len()).entered();
        contract::cluster(graph, safety, compilability, &self.config)
    }
}
