//! The pass manager: one [`Pass`] trait, a registry of named passes, and a
//! driver ([`Pipeline`]) that verifies the input, runs each pass in a
//! `tracing` span, re-verifies the graph after it, and hands the result to
//! an optional hook (the CLI's `--dump-after PASS`).
//!
//! Registered passes (`autoclust opt --list-passes`):
//! - `verify` — nothing but the driver's verification;
//! - `safety-annotate` — the safety analysis written onto the resource ops
//!   ([`KIND_ATTR`], [`UNSAFE_TO_ATTR`]), so FileCheck cases can test it;
//! - `inline` — function calls replaced by their bodies ([`crate::inline`]);
//! - `lower-control-flow` — functional `If`/`Case`/`While` lowered to
//!   TensorFlow 1 control flow ([`crate::lower_control_flow`]; not in `default`:
//!   `explore`/`verify` use it);
//! - `constant-fold`, `arithmetic-simplify`, `cse`, `dependency-optimize` —
//!   Grappler's graph optimizations ([`crate::constant_fold`],
//!   [`crate::arithmetic_simplify`], [`crate::cse`],
//!   [`crate::dependency_optimize`]); they keep the nodes of
//!   [`PassContext::preserve`] and [`PassContext::fed`] and never touch a stateful op;
//!   each also rewrites the bodies of the library functions the graph calls
//!   (`function_bodies.rs`);
//! - `cluster` — auto-clustering; every member of an emitted cluster gets
//!   [`CLUSTER_ATTR`] = its cluster's name (earlier annotations are dropped);
//! - `encapsulate` — each annotated cluster becomes snapshot, call and
//!   write-back ([`crate::encapsulate`]); with no annotation it runs the
//!   clusterer first. Clusters left alone because one variable is reached
//!   through two handles get [`DECLUSTERED_ATTR`] on their members;
//! - `cluster-bodies` — the bodies of the functions the graph's nodes call
//!   (`While`/`If`/`Case` bodies, calls left in place) clustered and
//!   encapsulated under their own names ([`crate::body_clusters`]).
//!
//! - `ref-variables` — TF1 reference variables (`VariableV2`) turned into
//!   resource variables ([`crate::ref_variables`]);
//! - `captured-tables` — lookup tables a TF2 function graph captures but fills
//!   itself created by the graph ([`crate::captured_tables`]);
//! - `captured-writers` — summary writers a TF2 function graph captures made writers whose
//!   events are dropped ([`crate::captured_writers`]);
//! - `prune` — only what [`PassContext::request`] needs, every variable kept
//!   ([`crate::prune`]);
//! - `anchor` — an `Identity` per fetch and a `NoOp` per target outside every
//!   cluster ([`crate::anchor`]).
//!
//! Pipelines are data. `default` names the graph-optimization passes that
//! `run`, `bench` and `compile` apply before clustering ([`DEFAULT_PIPELINE`]);
//! `clustered` the passes that then cluster for a request
//! ([`CLUSTERED_PIPELINE`]); `run` the whole of what `run` does
//! ([`run_pipeline_names`]), which is also what `compile` runs
//! ([`Pipeline::compile`]). `encapsulate` must follow `cluster` when both are
//! given, since it consumes the annotations; `anchor` goes between them.

use std::fmt;

use autoclust_graph::infer::TypeInfo;
use autoclust_graph::verify::{verify, VerifyError};
use autoclust_graph::{AttrValue, CycleError, Graph, ListValue};

use crate::cluster::{ClusterConfig, ClusterError, Clusterer};
use crate::encapsulate::{clusters_from_attrs, encapsulate, Bridge, ClusterSpec, Declustered, EncapsulateError};
use crate::safety::SafetyAnalysis;

pub use crate::encapsulate::CLUSTER_ATTR;
/// The resource kind (`read`, `write`, `modify`) `safety-annotate` writes.
pub const KIND_ATTR: &str = "_autoclust_resource_kind";
/// The sorted `to` nodes of the incompatible pairs whose `from` is this node.
pub const UNSAFE_TO_ATTR: &str = "_autoclust_unsafe_to";
/// Why `encapsulate` left a cluster's members as they were.
pub const DECLUSTERED_ATTR: &str = "_autoclust_declustered";

/// A hook called after each pass with the pass name and its result.
pub type AfterPassHook = Box<dyn Fn(&str, &Graph)>;

/// Settings shared by every pass of a run.
#[derive(Default)]
pub struct PassContext {
    /// The clusterer's configuration (`--min-cluster-size`).
    pub cluster_config: ClusterConfig,
    /// Called after each pass (and its verification) with the pass name and
    /// the graph; the CLI uses it for `--dump-after`.
    pub after_pass: Option<AfterPassHook>,
    /// Shortfalls passes found (docs/contract.md, "Never silent"), one line per
    /// cause naming the node, for the driver to print as `note:` lines: nodes
    /// the clusterer declined for want of types, clusters not encapsulated.
    pub notes: std::sync::Mutex<Vec<String>>,
    /// The nodes the request fetches or targets, by name: the optimization
    /// passes keep them under their names with the same values. `None` (no
    /// request known, as in `opt` without `--fetch`/`--target`): every node
    /// nothing consumes is kept.
    pub preserve: Option<std::collections::HashSet<String>>,
    /// The nodes the request feeds: their values are not the graph's, so no
    /// pass folds, merges or removes them.
    pub fed: std::collections::HashSet<String>,
    /// Runs one pure node on constant inputs, for `constant-fold` (the CLI
    /// fills it with the runtime's kernels; without it nothing but shapes is folded).
    pub evaluator: Option<Evaluator>,
    /// Keep every result bit for bit, signed zeros included: `arithmetic-simplify`
    /// then leaves a float `x + (+0.0)` alone (`-0.0 + 0.0` is `+0.0`). Off by
    /// default, as TensorFlow's Grappler rewrites it to `x`.
    pub exact_signed_zeros: bool,
    /// The types the driver's last verification found, and the graph they are of
    /// (the driver fills it: leave it default).
    pub verified: VerifiedTypes,
    /// What the request fetches and targets, for `prune` and `anchor` (`None`:
    /// no request; both passes then leave the graph as it is).
    pub request: Option<Request>,
    /// `anchor` marks the request's nodes to keep their names ([`KEEP_NAME_ATTR`]) instead of
    /// adding anchors: what `compile --fetch/--target` writes, a program run by those names.
    ///
    /// [`KEEP_NAME_ATTR`]: autoclust_graph::protocol::KEEP_NAME_ATTR
    pub keep_request_names: bool,
    /// What the clustering passes did, for the caller (`prune`, `cluster`,
    /// `anchor`, `encapsulate` and `cluster-bodies` fill it).
    pub record: std::sync::Mutex<RunRecord>,
    /// Function bodies a pass left as they were, by pass name: the same pass on the same body
    /// leaves it again, so Grappler's second round over the bodies skips those no pass of
    /// the first round changed (`function_bodies`; leave it default).
    pub settled_bodies: std::sync::Mutex<Vec<(&'static str, autoclust_graph::FunctionDef)>>,
}

/// A run's request by name: the outputs it fetches and the nodes it targets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Request {
    /// `(node, port)` of each fetch.
    pub fetches: Vec<(String, u32)>,
    pub targets: Vec<String>,
}

/// What the passes of a clustered run did ([`PassContext::record`]).
#[derive(Clone, Debug, Default)]
pub struct RunRecord {
    /// Whether `cluster` ran: `encapsulate` then takes its annotations, even none,
    /// rather than clustering again (after `anchor`, which would cluster the anchors).
    pub cluster_ran: bool,
    /// Nodes of the graph `cluster` saw (the pruned graph, before anchors).
    pub total_nodes: usize,
    /// The `Identity` standing for each fetch, in request order (`anchor`).
    pub fetch_anchors: Vec<String>,
    /// The `NoOp` standing for each target, in request order (`anchor`).
    pub target_anchors: Vec<String>,
    /// Every bridge built: the graph's clusters (`encapsulate`), then the
    /// clusters in function bodies (`cluster-bodies`).
    pub bridges: Vec<Bridge>,
    /// Clusters `encapsulate` left alone.
    pub declustered: Vec<Declustered>,
    /// Nodes in the encapsulated clusters, bodies' included.
    pub clustered_nodes: usize,
    /// Nodes of the function bodies `cluster-bodies` examined.
    pub body_nodes: usize,
}

/// The types of the graph the pass driver verified last: a pass over that graph,
/// unchanged, takes them instead of typing it again ([`PassContext::types`]).
#[derive(Default)]
pub struct VerifiedTypes(std::sync::Mutex<Option<(autoclust_graph::Revision, std::sync::Arc<TypeInfo>)>>);

/// Evaluates one pure node on its constant inputs (see [`PassContext::evaluator`]).
pub type Evaluator = std::sync::Arc<
    dyn Fn(&autoclust_graph::Node, &[autoclust_graph::Tensor]) -> Result<Vec<autoclust_graph::Tensor>, String>
        + Send
        + Sync,
>;

impl PassContext {
    /// A context for a request: `fetches` and `targets` kept under their names
    /// ([`PassContext::preserve`]) and anchored, `fed` never folded.
    pub fn for_request(request: Request, fed: std::collections::HashSet<String>) -> PassContext {
        PassContext {
            preserve: Some(
                request.fetches.iter().map(|(n, _)| n.clone()).chain(request.targets.iter().cloned()).collect(),
            ),
            fed,
            request: Some(request),
            ..PassContext::default()
        }
    }

    /// Edits the run record ([`PassContext::record`]).
    pub(crate) fn record(&self, edit: impl FnOnce(&mut RunRecord)) {
        edit(&mut self.record.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// The run record so far, emptying it.
    pub fn take_record(&self) -> RunRecord {
        std::mem::take(&mut *self.record.lock().unwrap_or_else(|e| e.into_inner()))
    }

    pub(crate) fn note(&self, lines: impl IntoIterator<Item = String>) {
        self.notes.lock().unwrap_or_else(|e| e.into_inner()).extend(lines);
    }

    /// The dtypes and static shapes of `graph`'s outputs, as
    /// [`autoclust_graph::infer::infer_partial`] gives them: the driver's, when it
    /// verified this graph as it is (a verified graph types without a failure, so
    /// `infer_partial` would find the same), else computed now.
    pub fn types(&self, graph: &Graph) -> Result<std::sync::Arc<TypeInfo>, PassError> {
        if let Some((revision, types)) = &*self.verified.0.lock().unwrap_or_else(|e| e.into_inner()) {
            if graph.unchanged_since(revision) {
                return Ok(types.clone());
            }
        }
        let (types, _) =
            autoclust_graph::infer::infer_partial(graph).map_err(|e| PassError::InvalidInput(Box::new(e)))?;
        Ok(std::sync::Arc::new(types))
    }

    /// Keeps the types of a graph just verified (for [`PassContext::types`]).
    fn remember(&self, graph: &Graph, types: TypeInfo) {
        *self.verified.0.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((graph.revision(), std::sync::Arc::new(types)));
    }

    /// The notes recorded so far, emptying the list.
    pub fn take_notes(&self) -> Vec<String> {
        std::mem::take(&mut *self.notes.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl fmt::Debug for PassContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PassContext").field("cluster_config", &self.cluster_config).finish_non_exhaustive()
    }
}

/// Why a pipeline failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PassError {
    #[error("unknown pass '{name}' (known: {known})")]
    UnknownPass { name: String, known: String },
    #[error("empty pass pipeline")]
    EmptyPipeline,
    #[error("{0}")]
    InvalidInput(Box<VerifyError>),
    #[error("pass '{pass}' produced an invalid graph: {source}")]
    Invalid { pass: String, source: Box<VerifyError> },
    #[error(transparent)]
    Cycle(#[from] CycleError),
    #[error(transparent)]
    Graph(#[from] autoclust_graph::GraphError),
    #[error(transparent)]
    Cluster(Box<ClusterError>),
    #[error(transparent)]
    Encapsulate(Box<EncapsulateError>),
    #[error(transparent)]
    RefVariables(Box<crate::ref_variables::RefVariablesError>),
    #[error(transparent)]
    Collectives(Box<crate::collectives::CollectiveError>),
    /// A fetch or target of [`PassContext::request`] names no node of the graph.
    #[error("{kind} '{name}' does not survive pruning")]
    Pruned { kind: &'static str, name: String },
}

impl From<ClusterError> for PassError {
    fn from(e: ClusterError) -> PassError {
        PassError::Cluster(Box::new(e))
    }
}

impl From<EncapsulateError> for PassError {
    fn from(e: EncapsulateError) -> PassError {
        PassError::Encapsulate(Box::new(e))
    }
}

impl From<crate::ref_variables::RefVariablesError> for PassError {
    fn from(e: crate::ref_variables::RefVariablesError) -> PassError {
        PassError::RefVariables(Box::new(e))
    }
}

impl From<crate::collectives::CollectiveError> for PassError {
    fn from(e: crate::collectives::CollectiveError) -> PassError {
        PassError::Collectives(Box::new(e))
    }
}

impl PassError {
    /// Whether the error is the user's pipeline (a usage error) rather than the graph.
    pub fn is_usage(&self) -> bool {
        matches!(self, PassError::UnknownPass { .. } | PassError::EmptyPipeline)
    }
}

/// A graph-to-graph transformation or annotation.
pub trait Pass {
    /// The name used in `--passes`.
    fn name(&self) -> &'static str;
    /// One line for `--list-passes`.
    fn description(&self) -> &'static str;
    fn run(&self, graph: Graph, ctx: &PassContext) -> Result<Graph, PassError>;
}

/// Every registered pass, in `--list-passes` order.
pub fn registry() -> Vec<Box<dyn Pass>> {
    vec![
        Box::new(VerifyPass),
        Box::new(SafetyAnnotatePass),
        Box::new(crate::ref_variables::RefVariablesPass),
        Box::new(crate::captured_tables::CapturedTablesPass),
        Box::new(crate::captured_writers::CapturedWritersPass),
        Box::new(crate::collectives::CollectivesPass),
        Box::new(InlinePass),
        Box::new(crate::hoist_loop_reads::HoistLoopReadsPass),
        Box::new(crate::lower_control_flow::LowerControlFlowPass),
        Box::new(crate::constant_fold::ConstantFoldPass),
        Box::new(crate::arithmetic_simplify::ArithmeticSimplifyPass),
        Box::new(crate::cse::CsePass),
        Box::new(crate::dependency_optimize::DependencyOptimizePass),
        Box::new(crate::deadness::DeadnessAnnotatePass),
        Box::new(crate::prune::PrunePass),
        Box::new(ClusterPass),
        Box::new(crate::anchor::AnchorPass),
        Box::new(EncapsulatePass),
        Box::new(ClusterBodiesPass),
    ]
}

/// The graph-optimization passes `run`, `bench` and `compile` apply before
/// clustering, in order; `--passes default` names them.
/// After inlining, the four optimizers run twice, as Grappler's
/// meta-optimizer runs its optimizers for two iterations: a rewrite of the
/// second round often needs one of the first (a relay left with one input
/// once redundant edges are dropped, a `Const` a fold of the first round made
/// identical to another).
pub const DEFAULT_PIPELINE: &[&str] = &[
    "inline",
    "hoist-loop-reads",
    "constant-fold",
    "arithmetic-simplify",
    "cse",
    "dependency-optimize",
    "constant-fold",
    "arithmetic-simplify",
    "cse",
    "dependency-optimize",
];

/// The passes that cluster a graph for a request, after optimization, in
/// order: what [`crate::pipeline::clustered_program`] runs; `--passes clustered`
/// names them. Inline first (clusters then span calls), prune to the request,
/// cluster, anchor the request outside every cluster, encapsulate (origins
/// included), then cluster the function bodies.
pub const CLUSTERED_PIPELINE: &[&str] = &["inline", "prune", "cluster", "anchor", "encapsulate", "cluster-bodies"];

/// The rewrites that make a graph as written runnable (reference variables, captured
/// tables and writers, collectives of one process); `run` and `bench` apply them while
/// loading, in both modes.
pub const LOADING_PASSES: &[&str] = &["ref-variables", "captured-tables", "captured-writers", "collectives"];

/// What `autoclust run` and `bench` do to a graph before running it clustered, in
/// order: [`LOADING_PASSES`] (done while loading),
/// [`DEFAULT_PIPELINE`], then [`CLUSTERED_PIPELINE`]; `--passes run` names it,
/// so `opt --passes run --fetch F` prints the program `run --fetch F` executes.
pub fn run_pipeline_names() -> Vec<&'static str> {
    let mut names = LOADING_PASSES.to_vec();
    names.extend_from_slice(DEFAULT_PIPELINE);
    names.extend_from_slice(CLUSTERED_PIPELINE);
    names
}

/// The registered pass called `name`.
pub fn lookup(name: &str) -> Option<Box<dyn Pass>> {
    registry().into_iter().find(|p| p.name() == name)
}

/// One pass of a [`Pipeline::run_timed`]: its name, the graph's node count
/// after it, and the time it took.
pub type PassStat = (&'static str, usize, std::time::Duration);

/// A list of passes run in order by one driver.
pub struct Pipeline {
    passes: Vec<Box<dyn Pass>>,
}

impl fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.passes.iter().map(|p| p.name())).finish()
    }
}

impl Pipeline {
    /// Parses `p1,p2,…` (names of registered passes; spaces ignored).
    pub fn parse(spec: &str) -> Result<Pipeline, PassError> {
        let mut passes = Vec::new();
        let names = spec.split(',').map(str::trim).filter(|s| !s.is_empty()).flat_map(|name| match name {
            "default" => DEFAULT_PIPELINE.to_vec(),
            "clustered" => CLUSTERED_PIPELINE.to_vec(),
            "run" => run_pipeline_names(),
            _ => vec![name],
        });
        for name in names {
            let pass = lookup(name).ok_or_else(|| PassError::UnknownPass {
                name: name.to_string(),
                known: registry().iter().map(|p| p.name()).collect::<Vec<_>>().join(", "),
            })?;
            passes.push(pass);
        }
        if passes.is_empty() {
            return Err(PassError::EmptyPipeline);
        }
        Ok(Pipeline { passes })
    }

    /// The pipeline `autoclust compile` runs: `run`'s ([`run_pipeline_names`]),
    /// without the optimization passes when `optimize` is false.
    pub fn compile(optimize: bool) -> Pipeline {
        let names = if optimize {
            run_pipeline_names()
        } else {
            LOADING_PASSES.iter().chain(CLUSTERED_PIPELINE).copied().collect()
        };
        Pipeline::of(&names)
    }

    /// What `run` does to a graph before clustering it (`cluster --optimize`): the loading
    /// rewrites, [`DEFAULT_PIPELINE`], and the inlining the clustered pipeline starts with.
    pub fn before_clustering() -> Pipeline {
        let mut names = LOADING_PASSES.to_vec();
        names.extend_from_slice(DEFAULT_PIPELINE);
        names.push("inline");
        Pipeline::of(&names)
    }

    /// The registered passes `names`, in order (each must be registered).
    fn of(names: &[&str]) -> Pipeline {
        Pipeline { passes: names.iter().map(|n| lookup(n).expect("a registered pass")).collect() }
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.passes.iter().map(|p| p.name()).collect()
    }

    /// Verifies `graph`, then runs every pass, re-verifying after each one
    /// that changed the graph ([`Graph::unchanged_since`]: a graph no pass
    /// edited is the graph verified before).
    pub fn run(&self, graph: Graph, ctx: &PassContext) -> Result<Graph, PassError> {
        self.run_timed(graph, ctx).map(|(g, _)| g)
    }

    /// Runs every pass without verifying the graph before or after: for a
    /// caller that runs graphs the verifier would refuse (an op the registry
    /// does not know, which runs all the same) and checks what it needs itself,
    /// as `run`'s clustered path does. The passes are [`Pipeline::run`]'s, so
    /// on a graph that verifies the two give the same graph.
    pub fn run_unverified(&self, graph: Graph, ctx: &PassContext) -> Result<Graph, PassError> {
        let mut graph = graph;
        for pass in &self.passes {
            let _span = tracing::info_span!("pass", name = pass.name(), nodes = graph.len()).entered();
            graph = pass.run(graph, ctx)?;
            if let Some(hook) = &ctx.after_pass {
                hook(pass.name(), &graph);
            }
        }
        Ok(graph)
    }

    /// As [`Pipeline::run`], also returning each pass's name, the graph's
    /// node count after it, and the time it took (verification excluded).
    /// The types each verification finds are kept in `ctx` for the passes
    /// that follow while the graph stays as it is ([`PassContext::types`]).
    pub fn run_timed(&self, graph: Graph, ctx: &PassContext) -> Result<(Graph, Vec<PassStat>), PassError> {
        let types = verify(&graph).map_err(|e| PassError::InvalidInput(Box::new(e)))?;
        ctx.remember(&graph, types);
        let mut graph = graph;
        let mut stats = Vec::new();
        for pass in &self.passes {
            let _span = tracing::info_span!("pass", name = pass.name(), nodes = graph.len()).entered();
            let start = std::time::Instant::now();
            let before = graph.revision();
            graph = pass.run(graph, ctx)?;
            stats.push((pass.name(), graph.len(), start.elapsed()));
            let changed = !graph.unchanged_since(&before);
            if changed {
                #[cfg(test)]
                tests::VERIFICATIONS.with(|v| v.set(v.get() + 1));
                let types = verify(&graph)
                    .map_err(|source| PassError::Invalid { pass: pass.name().to_string(), source: Box::new(source) })?;
                ctx.remember(&graph, types);
            }
            tracing::debug!(
                nodes = graph.len(),
                functions = graph.library.functions.len(),
                reverified = changed,
                "pass done"
            );
            if let Some(hook) = &ctx.after_pass {
                hook(pass.name(), &graph);
            }
        }
        Ok((graph, stats))
    }
}

fn strings(v: Vec<String>) -> AttrValue {
    if v.is_empty() {
        AttrValue::List(ListValue::Empty)
    } else {
        AttrValue::List(ListValue::S(v.into_iter().map(String::into_bytes).collect()))
    }
}

/// `verify`: the driver's verification only.
struct VerifyPass;

impl Pass for VerifyPass {
    fn name(&self) -> &'static str {
        "verify"
    }
    fn description(&self) -> &'static str {
        "check the graph (acyclic, ports, arity, dtypes, shapes); changes nothing"
    }
    fn run(&self, graph: Graph, _ctx: &PassContext) -> Result<Graph, PassError> {
        Ok(graph)
    }
}

/// `safety-annotate`: resource kinds and incompatible pairs as attributes.
struct SafetyAnnotatePass;

impl Pass for SafetyAnnotatePass {
    fn name(&self) -> &'static str {
        "safety-annotate"
    }
    fn description(&self) -> &'static str {
        "write each resource op's kind (_autoclust_resource_kind) and the ops it must not share a cluster with \
         (_autoclust_unsafe_to)"
    }
    fn run(&self, mut graph: Graph, _ctx: &PassContext) -> Result<Graph, PassError> {
        let safety = SafetyAnalysis::compute(&graph)?;
        let mut unsafe_to: Vec<Vec<String>> = vec![Vec::new(); graph.len()];
        for (from, to) in safety.pairs() {
            unsafe_to[from.index()].push(graph.name(to).to_string());
        }
        let ids: Vec<_> = graph.node_ids().collect();
        for id in ids {
            let kind = safety.kind(id);
            let mut to = std::mem::take(&mut unsafe_to[id.index()]);
            to.sort();
            let attrs = graph.attrs_mut(id);
            attrs.remove(KIND_ATTR);
            attrs.remove(UNSAFE_TO_ATTR);
            if let Some(kind) = kind {
                attrs.insert(KIND_ATTR.into(), AttrValue::S(kind.as_str().as_bytes().to_vec()));
            }
            if !to.is_empty() {
                attrs.insert(UNSAFE_TO_ATTR.into(), strings(to));
            }
        }
        Ok(graph)
    }
}

/// `inline`: every inlinable function call replaced by its body.
struct InlinePass;

impl Pass for InlinePass {
    fn name(&self) -> &'static str {
        "inline"
    }
    fn description(&self) -> &'static str {
        "replace PartitionedCall/StatefulPartitionedCall and library-function calls by their bodies, in the graph and \
         in the loop and branch bodies it calls (control inputs gate the body; the call's name stays as an IdentityN \
         after the body's effects; _noinline kept unless the call is _XlaMustCompile)"
    }
    fn run(&self, graph: Graph, ctx: &PassContext) -> Result<Graph, PassError> {
        let (mut graph, _report) = crate::inline::inline_calls_owned(graph)?;
        // And inside the bodies of the loops and branches left: a loop body that calls its
        // real body by name (`tf.nn.ctc_loss`'s scans) is compiled only without the call.
        crate::function_bodies::optimize_bodies(&mut graph, ctx, "inline", |body, _| {
            Ok(crate::inline::inline_calls(body)?.0)
        });
        Ok(graph)
    }
}

/// `cluster`: auto-clustering recorded in [`CLUSTER_ATTR`].
struct ClusterPass;

impl Pass for ClusterPass {
    fn name(&self) -> &'static str {
        "cluster"
    }
    fn description(&self) -> &'static str {
        "auto-cluster; annotate every member with _autoclust_cluster = \"cluster_N\""
    }
    fn run(&self, mut graph: Graph, ctx: &PassContext) -> Result<Graph, PassError> {
        // Partial: a node that cannot be typed is declined alone, with a note
        // (on a verified graph every node types, and this is `Clusterer::run`).
        let clustering = Clusterer::new(ctx.cluster_config.clone()).run_partial(&graph)?;
        ctx.note(crate::pipeline::shortfalls(&graph, &clustering));
        ctx.record(|r| {
            r.cluster_ran = true;
            r.total_nodes = graph.len();
        });
        let ids: Vec<_> = graph.node_ids().collect();
        for &id in &ids {
            graph.attrs_mut(id).remove(CLUSTER_ATTR);
        }
        for c in &clustering.clusters {
            for &id in &c.nodes {
                graph.attrs_mut(id).insert(CLUSTER_ATTR.into(), AttrValue::S(c.name.clone().into_bytes()));
            }
        }
        Ok(graph)
    }
}

/// `encapsulate`: the bridge in the graph.
struct EncapsulatePass;

impl Pass for EncapsulatePass {
    fn name(&self) -> &'static str {
        "encapsulate"
    }
    fn description(&self) -> &'static str {
        "replace each cluster by snapshot-read, call of its pure SSA function, write-back (clusters first if none \
         are annotated)"
    }
    fn run(&self, graph: Graph, ctx: &PassContext) -> Result<Graph, PassError> {
        let mut specs = clusters_from_attrs(&graph);
        if specs.is_empty() && !ctx.record.lock().unwrap_or_else(|e| e.into_inner()).cluster_ran {
            let clustering = Clusterer::new(ctx.cluster_config.clone()).run_partial(&graph)?;
            ctx.note(crate::pipeline::shortfalls(&graph, &clustering));
            ctx.record(|r| r.total_nodes = graph.len());
            specs = clustering.clusters.into_iter().map(|c| ClusterSpec { name: c.name, nodes: c.nodes }).collect();
        }
        let done = encapsulate(&graph, &specs)?;
        let mut out = done.graph;
        for d in &done.declustered {
            ctx.note([format!(
                "cluster '{}' is not encapsulated: variable '{}' is reached through two handles ('{}' and '{}')",
                d.cluster, d.variable, d.handles.0, d.handles.1
            )]);
            let why = format!(
                "{}: variable {} reached through two handles ({}, {})",
                d.cluster, d.variable, d.handles.0, d.handles.1
            );
            if let Some(spec) = specs.iter().find(|s| s.name == d.cluster) {
                for &id in &spec.nodes {
                    // Declustered members keep their names; find them in the rebuilt graph.
                    if let Some(new_id) = out.find(graph.name(id)) {
                        out.attrs_mut(new_id).insert(DECLUSTERED_ATTR.into(), AttrValue::S(why.clone().into_bytes()));
                    }
                }
            }
        }
        let clustered: usize =
            specs.iter().filter(|s| done.bridges.iter().any(|b| b.cluster == s.name)).map(|s| s.nodes.len()).sum();
        ctx.record(|r| {
            r.bridges.extend(done.bridges);
            r.declustered.extend(done.declustered);
            r.clustered_nodes += clustered;
        });
        Ok(out)
    }
}

/// `cluster-bodies`: clusters inside the functions the graph calls.
struct ClusterBodiesPass;

impl Pass for ClusterBodiesPass {
    fn name(&self) -> &'static str {
        "cluster-bodies"
    }
    fn description(&self) -> &'static str {
        "cluster and encapsulate the bodies of the functions nodes call (While/If/Case bodies, calls left in \
         place), each under its own name and signature, resource ops behind bridges on the body's arguments"
    }
    fn run(&self, mut graph: Graph, ctx: &PassContext) -> Result<Graph, PassError> {
        let report = crate::body_clusters::cluster_function_bodies(&mut graph, ctx.cluster_config.clone());
        ctx.note(report.notes);
        ctx.record(|r| {
            r.bridges.extend(report.bridges);
            r.clustered_nodes += report.clustered_nodes;
            r.body_nodes += report.body_nodes;
        });
        Ok(graph)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pipelines_and_rejects_unknown_passes() {
        let p = Pipeline::parse("cluster, encapsulate").unwrap();
        assert_eq!(p.names(), ["cluster", "encapsulate"]);
        let e = Pipeline::parse("cluster,nope").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown pass 'nope' (known: verify, safety-annotate, ref-variables, captured-tables, captured-writers, collectives, inline, hoist-loop-reads, lower-control-flow, \
             constant-fold, arithmetic-simplify, cse, dependency-optimize, deadness, prune, cluster, anchor, encapsulate, \
             cluster-bodies)"
        );
        assert!(e.is_usage());
        assert_eq!(Pipeline::parse(" , ").unwrap_err(), PassError::EmptyPipeline);
        assert_eq!(
            Pipeline::compile(false).names(),
            [
                "ref-variables",
                "captured-tables",
                "captured-writers",
                "collectives",
                "inline",
                "prune",
                "cluster",
                "anchor",
                "encapsulate",
                "cluster-bodies"
            ]
        );
        assert_eq!(Pipeline::compile(true).names(), Pipeline::parse("run").unwrap().names());
        assert_eq!(Pipeline::parse("run").unwrap().names(), run_pipeline_names());
        assert_eq!(
            Pipeline::parse("default,cluster").unwrap().names(),
            [
                "inline",
                "hoist-loop-reads",
                "constant-fold",
                "arithmetic-simplify",
                "cse",
                "dependency-optimize",
                "constant-fold",
                "arithmetic-simplify",
                "cse",
                "dependency-optimize",
                "cluster"
            ]
        );
    }

    thread_local! {
        /// Verifications the driver ran after a pass, on this thread.
        pub(super) static VERIFICATIONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    fn verifications() -> usize {
        VERIFICATIONS.with(|v| v.get())
    }

    /// A pass for the driver's tests: appends `(name, op, inputs)`, a float32 op, when given.
    struct Append(Option<(&'static str, &'static str, &'static [&'static str])>);

    impl Pass for Append {
        fn name(&self) -> &'static str {
            "append"
        }
        fn description(&self) -> &'static str {
            "test"
        }
        fn run(&self, mut graph: Graph, _ctx: &PassContext) -> Result<Graph, PassError> {
            if let Some((name, op, inputs)) = self.0 {
                graph.append_raw(vec![autoclust_graph::RawNode {
                    name: name.into(),
                    op: op.into(),
                    inputs: inputs.iter().map(|s| s.to_string()).collect(),
                    attrs: [("T".to_string(), AttrValue::Type(autoclust_graph::DType::Float32))].into_iter().collect(),
                    device: String::new(),
                    span: None,
                }])?;
            }
            Ok(graph)
        }
    }

    const SMALL: &str = "x = Placeholder() {dtype = float32, shape = shape[2]}\n\
                         y = Neg(x) {T = float32}\n\
                         z = Neg(y) {T = float32}\n";

    #[test]
    fn only_passes_that_change_the_graph_are_verified_after() {
        let g = autoclust_graph::text::parse(SMALL).unwrap();
        let ctx = PassContext::default();
        let before = verifications();
        // cse and dependency-optimize find nothing to do here; `verify` changes nothing.
        let out = Pipeline::parse("verify,cse,dependency-optimize,verify").unwrap().run(g.clone(), &ctx).unwrap();
        assert_eq!(out, g);
        assert_eq!(verifications(), before);
        let changing = Pipeline {
            passes: vec![Box::new(Append(None)), Box::new(Append(Some(("w", "Neg", &["z"])))), Box::new(Append(None))],
        };
        // Only the second pass appends.
        let out = changing.run(g, &ctx).unwrap();
        assert_eq!(out.len(), 4);
        assert_eq!(verifications(), before + 1);
    }

    #[test]
    fn a_pass_that_breaks_the_graph_is_caught() {
        let g = autoclust_graph::text::parse(SMALL).unwrap();
        let broken = Pipeline { passes: vec![Box::new(Append(None)), Box::new(Append(Some(("w", "AddV2", &["z"]))))] };
        let e = broken.run(g, &PassContext::default()).unwrap_err();
        assert!(e.to_string().starts_with("pass 'append' produced an invalid graph"), "{e}");
    }

    #[test]
    fn passes_share_the_types_of_a_verified_graph_until_it_changes() {
        let mut g = autoclust_graph::text::parse(SMALL).unwrap();
        let ctx = PassContext::default();
        let types = verify(&g).unwrap();
        ctx.remember(&g, types);
        let first = ctx.types(&g).unwrap();
        assert!(std::sync::Arc::ptr_eq(&first, &ctx.types(&g.clone()).unwrap()));
        let z = g.find("z").unwrap();
        let x = g.find("x").unwrap();
        // Rewiring to the same inputs is no edit; rewiring to others is.
        g.set_inputs(z, &[autoclust_graph::Output { node: g.find("y").unwrap(), port: 0 }], &[]);
        assert!(std::sync::Arc::ptr_eq(&first, &ctx.types(&g).unwrap()));
        g.set_inputs(z, &[autoclust_graph::Output { node: x, port: 0 }], &[]);
        assert!(!std::sync::Arc::ptr_eq(&first, &ctx.types(&g).unwrap()));
    }

    #[test]
    fn every_registered_pass_is_found_by_name() {
        for p in registry() {
            assert_eq!(lookup(p.name()).map(|q| q.name()), Some(p.name()));
            assert!(!p.description().is_empty());
        }
    }
}
