//! Encapsulation: the TF/XLA bridge written into the graph.
//!
//! Each cluster becomes three nodes and one library function:
//! - `C_snapshot = _AutoclustSnapshot(h1, h2, …) {cluster, dtypes}` takes the
//!   handle of every variable the cluster reads (before writing it) and
//!   outputs their current values, all in one atomic step;
//! - `C = C_fn(snapshot:0, …, x, y, …)` calls the cluster's pure function
//!   with the snapshot values and every data input from outside the cluster,
//!   and returns every value used outside the cluster, then the final SSA
//!   value of each variable the cluster writes;
//! - `C_write_back = _AutoclustWriteBack(h1, …, C:k, …) {cluster, dtypes}`
//!   takes the handles of the written variables and their final values and
//!   stores them all in one atomic step.
//!
//! The function body (`C_fn` in `graph.library`, inputs spelled `arg` or
//! `node:port`) is the cluster in pure SSA form, in the cluster's
//! topological order. Variables are identified by their `VarHandleOp`
//! (`container`, `shared_name` or the node name): the value of variable `v`
//! (named after its handle node) starts as the argument `v_ssa_0` and each
//! write creates `v_ssa_k`. Seed 001's example comes out as its table:
//!
//! | original | body |
//! |---|---|
//! | `r0 = ReadVariableOp(v0)` | `r0 = Identity(v0_ssa_0)` |
//! | `AssignVariableOp(v0, c42)` | `v0_ssa_1 = Identity(c42)` |
//! | `r1 = ReadVariableOp(v0)` | `r1 = Identity(v0_ssa_1)` |
//! | `r2 = AddV2(r1, one)` | `r2 = AddV2(r1, one)` |
//! | `AssignVariableOp(v0, r2)` | `v0_ssa_2 = Identity(r2)` |
//! | `AssignVariableOp(v1, r0)` | `v1_ssa_0 = Identity(r0)` |
//!
//! with write-back `v0 := v0_ssa_2, v1 := v1_ssa_0` (a variable that is only
//! written is not snapshotted; its first value is `v_ssa_0`).
//!
//! Read-modify-write ops become read, pure compute, write:
//! `AssignAddVariableOp`/`AssignSubVariableOp` → `AddV2`/`Sub`;
//! `ResourceApplyGradientDescent` → `var - alpha * delta`;
//! `ResourceApplyMomentum` and `ResourceApplyAdam` → TensorFlow's update
//! formulas written with `Mul`, `AddV2`, `Sub`, `RealDiv`, `Sqrt`, `Square`
//! and a scalar `Const` 1 (both accumulators and the variable are updated);
//! `ResourceScatterAdd`/`Sub`/`Update`/`Max`/`Min` → TensorFlow's pure
//! `TensorScatterAdd`/`Sub`/`Update`/`Max`/`Min` on the SSA value with the
//! indices given a trailing axis by `ExpandDims(indices, -1)` (the same
//! element mapping), `ResourceScatterNd*` to the same ops with their indices as given;
//! `ResourceGather` → `GatherV2(value, indices, batch_dims)`;
//! `VariableShape` → `Shape`. Other resource ops (calls, stateful random
//! ops, `VarIsInitializedOp`) cannot be expressed and are a typed error.
//! Control edges between members are dropped: the body is pure.
//!
//! # Re-attached edges
//! - Every outside node a member depends on (data or control; a variable's
//!   handle only through the snapshot/write-back inputs) becomes a control
//!   input of the snapshot (of the call when nothing is read), so the reads
//!   wait for everything the cluster waited for.
//! - Data inputs from outside go to the call; the call takes the snapshot's
//!   outputs, and the write-back the call's outputs.
//! - Every outside consumer of a member (data or control) reads data from
//!   the call, and waits for the cluster's exit — the write-back (or the
//!   `NoOp` after the guards) — when a write or a guard of the cluster
//!   reaches that member (it is one, or follows one inside the cluster). A
//!   consumer of a value computed after a write thus sees the write, as
//!   under TensorFlow's `_XlaRun`, which writes the variables before it
//!   produces its outputs; a consumer of a value no write precedes waits
//!   for the call only, so a run of the program to a request that needs no
//!   write of the cluster does not perform them (a program `compile` wrote,
//!   unpruned, is run to any request: a TF1 initializer sharing a cluster
//!   with a loop's first value was re-run by every training step).
//! - A producer in another cluster stands for that cluster's exit node, or
//!   its call by the same rule.
//!
//! # Why it is sound
//! The rewritten graph orders at least what the original ordered: an edge
//! into the cluster now precedes the snapshot (hence every member), an edge
//! out of a member now follows the call, and the write-back when a write or a
//! guard precedes the member. A consumer of a member no write precedes may
//! run between the call and the write-back: the original order in which it
//! runs after the cluster's reads and values and before its writes, which
//! nothing orders before it (no member follows it: that would be a cycle).
//! Within the
//! cluster, the bridge runs all reads atomically before the body and all
//! writes atomically after it. That reorders only pairs the safety analysis
//! accepts: a read before a write keeps its order, reads among themselves and
//! writes among themselves are unobservable inside their atomic step, and a
//! write followed (on some path) by a read — the one order the bridge cannot
//! keep — never shares a cluster (`crate::safety`). The body follows one
//! topological order of the cluster, so each read sees exactly the writes
//! that order puts before it: a serialisation the original graph allows.
//!
//! That order is not just any topological order ([`ssa_order`]): every pure
//! read (`ReadVariableOp`, `ResourceGather`, …) and everything it depends on
//! comes before every write. A read ordered after an *unordered* write of the
//! same variable would see the in-cluster write — it would effectively happen
//! at the write-back, after the snapshot reads of other members that may
//! depend on its value, an order the original graph forbids (found by the
//! `verify` property test: `r = Read(v0)` unordered with `Assign(v0)`, and
//! `AssignAdd(v1, r)` in the same cluster). Reads first is always possible:
//! no write reaches a read inside a cluster. Read-modify-write ops may still
//! see an earlier in-cluster write; their read value feeds only their own
//! write, so both happen at the write-back, in this order.
//!
//! # Sinks
//! A member nothing consumes — a graph's output, in a program compiled with
//! no request (`autoclust compile`), where no anchor stands for it — and a
//! member marked `KEEP_NAME_ATTR` (what `compile --fetch/--target` asks for)
//! keeps its name outside the cluster: an `Identity` of its value exported from
//! the call (`IdentityN` for several outputs, a `NoOp` for none), waiting
//! for the cluster's exit, so the written program can be fetched and
//! targeted by the names of the graph it came from.
//!
//! # Guards
//! An `Assert` member (a *guard*: its only effect is to fail the step) is
//! not lowered into the body: it runs as itself right after the call, on the
//! call's outputs (its condition and the data it prints, exported like any
//! value used outside), and the cluster's exit — the write-back, or a `NoOp`
//! `C_exit` when the cluster writes nothing — waits for it, so everything
//! that waited for the cluster (or for the `Assert`) still waits for the
//! check. Its control edges into members are dropped with the others. Why it
//! is sound: the members the `Assert` ordered are pure values or reads until
//! the exit, and no value leaves the cluster before the check passes; a
//! write the `Assert` ordered still follows it (the write-back waits). The
//! one order it could lose — a write *before* the check, which would then be
//! published after a failing check no more — never shares a cluster: the
//! clusterer counts a guard as a reader (`SafetyAnalysis::for_clustering`),
//! so a write reaching an `Assert` is a write→read pair. TensorFlow's XLA
//! compiles `Assert` to nothing; here the check still runs.
//!
//! # Function bodies
//! Inside a function body (`crate::body_clusters`) a resource op's handle is
//! a resource argument (`_Arg`), not a variable node: the bridge takes the
//! argument's handle, whichever variable the caller passes, and the cluster
//! keys its SSA values by the argument. Two arguments may name one variable
//! at run time. Nothing here relies on them differing: the safety rule holds
//! whatever the variables (a write never reaches a read in a cluster), so an
//! aliased read sees the snapshot — an order the graph allows, since nothing
//! orders it after the write —, the snapshot reads a repeated variable once,
//! and the write-back publishes in the order of each argument's last write
//! in the body, so where the graph orders two writes of the aliased variable
//! the later one wins (where it does not, either may). Multi-variable updates
//! through arguments are never assumed to touch distinct variables
//! (`crate::compilable::handle_variables`).
//!
//! The same variable reached through two different `VarHandleOp` nodes in
//! one cluster would be snapshotted and written back twice (TensorFlow fails
//! at run time with "Duplicate variable passed to XLA cluster"). Such a
//! cluster is *declustered*: its nodes stay as they were, which is always
//! sound, and [`Encapsulated::declustered`] reports why.

/// Maps keyed by node outputs and names, on foldhash: the pass hashes a few keys per
/// member node, 10⁵ of them in a large graph (std's SipHash was a tenth of its time).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

use autoclust_graph::effects::{resource_kind, ResourceKind};
use autoclust_graph::function::fresh_name;
use autoclust_graph::infer::TypeInfo;
use autoclust_graph::{
    ArgDef, AttrValue, Attrs, CycleError, DType, FunctionDef, Graph, GraphError, ListValue, NodeId, Output, RawNode,
    Shape, Signature, Tensor,
};

use crate::compilable::{handle_slots, handle_variables, is_handle_source, updates_conflict};

pub use autoclust_graph::protocol::{CLUSTER_ATTR, SNAPSHOT_OP, WRITE_BACK_OP};
use autoclust_graph::protocol::{KEEP_NAME_ATTR, REF_OUTPUT_ATTR};

/// A cluster to encapsulate: its name and members.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterSpec {
    pub name: String,
    pub nodes: Vec<NodeId>,
}

/// Why a graph could not be encapsulated. Every variant names the node at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EncapsulateError {
    #[error(transparent)]
    Cycle(#[from] CycleError),
    #[error("node '{node}' is in two clusters ({first} and {second})")]
    NodeInTwoClusters { node: String, first: String, second: String },
    #[error("node '{node}': resource input {input} does not come from a VarHandleOp outside the cluster ({reason})")]
    UnresolvedHandle { node: String, input: usize, reason: String },
    #[error("node '{node}': {op} cannot be encapsulated (no pure equivalent)")]
    UnsupportedResourceOp { node: String, op: String },
    #[error("node '{node}': a variable handle ('{handle}') is used as data inside the cluster")]
    HandleEscapes { node: String, handle: String },
    #[error("node '{node}': {op} requires attribute '{attr}'")]
    MissingAttr { node: String, op: String, attr: String },
    #[error("node '{node}': cannot tell the dtype of its input '{input}'")]
    UnknownDType { node: String, input: String },
    #[error("node '{node}': {op} on {dtype} is not supported by encapsulation")]
    UnsupportedDType { node: String, op: String, dtype: DType },
    #[error("encapsulating cluster '{cluster}' would create a cycle: {source}")]
    CycleAfterRewrite { cluster: String, source: CycleError },
    #[error("rebuilding the graph failed: {0}")]
    Rebuild(#[from] GraphError),
}

/// A cluster left as it was because one variable is reached through two handles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Declustered {
    pub cluster: String,
    /// `container/shared_name` of the variable.
    pub variable: String,
    /// The two `VarHandleOp` nodes naming it.
    pub handles: (String, String),
}

/// The bridge nodes that replaced one cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bridge {
    pub cluster: String,
    pub function: String,
    pub snapshot: Option<String>,
    pub call: String,
    pub write_back: Option<String>,
}

/// The result of [`encapsulate`].
#[derive(Clone, Debug)]
pub struct Encapsulated {
    pub graph: Graph,
    pub bridges: Vec<Bridge>,
    pub declustered: Vec<Declustered>,
}

/// The clusters recorded by the `cluster` pass in [`CLUSTER_ATTR`], ordered
/// by their first member.
pub fn clusters_from_attrs(graph: &Graph) -> Vec<ClusterSpec> {
    let mut specs: Vec<ClusterSpec> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::default();
    for id in graph.node_ids() {
        if let Some(name) = graph.node(id).attr(CLUSTER_ATTR).and_then(AttrValue::as_str) {
            let i = *index.entry(name).or_insert_with(|| {
                specs.push(ClusterSpec { name: name.to_string(), nodes: Vec::new() });
                specs.len() - 1
            });
            specs[i].nodes.push(id);
        }
    }
    specs
}

/// A variable as the bridge sees it.
#[derive(Clone, Debug)]
struct Variable {
    /// The `VarHandleOp` node.
    handle_node: NodeId,
    /// The handle value the first member used (an input of snapshot/write-back).
    handle: Output,
    dtype: DType,
    /// Base of the SSA names: the handle node's name.
    base: String,
    /// Number of SSA values created so far (the snapshot counts as value 0).
    next_ssa: usize,
    /// Current SSA value as a body reference (`arg` or `node:port`).
    current: Option<String>,
    /// Snapshot argument index, if the variable is read before it is written.
    snapshot_arg: Option<usize>,
    written: bool,
    /// The static shape of the variable's current value: its handle's declared shape,
    /// then that of each value an `AssignVariableOp` gives it (every other update keeps
    /// the shape).
    shape: Shape,
}

/// One encapsulated cluster before the graph is rebuilt.
struct Lowered {
    spec: ClusterSpec,
    function: FunctionDef,
    /// Variables read (snapshot order) and written (write-back order), as indices into `vars`.
    vars: Vec<Variable>,
    snapshot_vars: Vec<usize>,
    written_vars: Vec<usize>,
    /// Outside values passed to the call after the snapshot values.
    external_inputs: Vec<Output>,
    /// Member outputs used outside, in the call's output order.
    external_outputs: Vec<Output>,
    /// The static shape of each output of the call (external outputs, then written
    /// values), recorded on the call as `_output_shapes` so that inference types what
    /// follows it and the runtime can compile the next clusters ahead.
    output_shapes: Vec<Shape>,
    /// Outside nodes the cluster depends on (besides handles), in first-use order.
    deps: Vec<NodeId>,
    /// Members that only check (`Assert`, [`is_guard`]): not in the body, run after the call
    /// on its outputs, and waited for by the cluster's exit.
    guards: Vec<NodeId>,
    /// Members nothing consumes (a graph's outputs, when no request anchored them), with
    /// their outputs' dtypes: each keeps its name outside (module doc, "Sinks").
    sinks: Vec<(NodeId, Vec<DType>)>,
}

/// Whether a member is a *guard*: an op whose only effect is to fail the step (`Assert`).
/// A guard is not lowered into the body; it runs right after the call, on the call's
/// outputs, and the cluster's exit — its write-back, or a `NoOp` when it writes nothing —
/// waits for it (module doc, "Guards").
pub(crate) fn is_guard(op: &str) -> bool {
    op == "Assert"
}

/// The order in which a cluster's body runs its members (its SSA order): a
/// topological order of `members` (by `position`, a topological position of
/// every node) in which every pure read and all its in-cluster ancestors come
/// before everything else, so a read never sees a write of its own cluster
/// that the graph does not order before it (module doc, "Why it is sound").
/// Shared with the semantics explorer's model of the clustered program.
pub fn ssa_order(graph: &Graph, members: &[NodeId], position: &[usize]) -> Vec<NodeId> {
    let mut order = members.to_vec();
    order.sort_by_key(|n| position[n.index()]);
    order.dedup();
    let mut member = vec![false; graph.len()];
    for &n in &order {
        member[n.index()] = true;
    }
    let mut early = vec![false; graph.len()];
    for &n in order.iter().rev() {
        let node = graph.node(n);
        if resource_kind(node, &graph.library) == Some(ResourceKind::Read) {
            early[n.index()] = true;
        }
        if early[n.index()] {
            for p in graph.forward_predecessors(n) {
                if member[p.index()] {
                    early[p.index()] = true;
                }
            }
        }
    }
    // Ancestor-closed prefix first, then the rest: both in topological order.
    let (mut first, rest): (Vec<NodeId>, Vec<NodeId>) = order.into_iter().partition(|n| early[n.index()]);
    first.extend(order_multi_variable_reads(graph, rest, &member, position));
    first
}

/// Orders the members after the pure reads' prefix (`rest`, topologically ordered) so that
/// an op reading several variables in one atomic step (a `ResourceApply*`: TensorFlow locks
/// all its variables before reading any) comes before every other member writing one of
/// them. It then reads all of them from the snapshot. Placed after such a write (its
/// topological position may say so when the graph does not order the two), it would read
/// that variable from the write and the others from the snapshot — a combination no
/// interleaving of the original graph produces when another cluster writes one of the
/// others meanwhile (found by `semantics/tests/resource_ops.rs`). A write the graph orders
/// before it is a write→read path, which the safety analysis keeps out of the cluster. Two
/// updates of the same variables may follow each other (the second reads them all from the
/// first, as one atomic read at the write-back). When the constraints conflict (two such
/// ops sharing some but not all variables, neither ordered before the other) the
/// topological order is kept; the clusterer keeps such pairs apart
/// ([`crate::compilable::updates_conflict`]), so a cluster it made never has one.
fn order_multi_variable_reads(graph: &Graph, rest: Vec<NodeId>, member: &[bool], position: &[usize]) -> Vec<NodeId> {
    let library = &graph.library;
    // Sorted, as [`updates_conflict`] compares them as sets.
    let vars: Vec<Vec<Option<String>>> = rest
        .iter()
        .map(|&n| {
            let mut v = handle_variables(graph, n);
            v.sort();
            v
        })
        .collect();
    let multi: Vec<bool> = rest
        .iter()
        .zip(&vars)
        .map(|(&n, v)| v.len() >= 2 && resource_kind(graph.node(n), library).is_some_and(ResourceKind::reads))
        .collect();
    if !multi.iter().any(|&m| m) {
        return rest;
    }
    let index: HashMap<NodeId, usize> = rest.iter().enumerate().map(|(i, &n)| (n, i)).collect();
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); rest.len()];
    let mut pending = vec![0usize; rest.len()];
    for (i, &n) in rest.iter().enumerate() {
        for p in graph.forward_predecessors(n) {
            if let (true, Some(&j)) = (member[p.index()], index.get(&p)) {
                succ[j].push(i);
                pending[i] += 1;
            }
        }
    }
    let writers: Vec<usize> = (0..rest.len())
        .filter(|&x| {
            !vars[x].is_empty() && resource_kind(graph.node(rest[x]), library).is_some_and(ResourceKind::writes)
        })
        .collect();
    for y in (0..rest.len()).filter(|&y| multi[y]) {
        for &x in &writers {
            // A writer of some of `y`'s variables goes after `y`, which reads them all from the
            // snapshot; two updates of the same variables may go in either order (the second
            // reads all of them from the first), the rule [`updates_conflict`] states.
            if x != y && updates_conflict(&vars[x], &vars[y]) {
                succ[y].push(x);
                pending[x] += 1;
            }
        }
    }
    let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<(usize, usize)>> = (0..rest.len())
        .filter(|&i| pending[i] == 0)
        .map(|i| std::cmp::Reverse((position[rest[i].index()], i)))
        .collect();
    let mut out = Vec::with_capacity(rest.len());
    while let Some(std::cmp::Reverse((_, i))) = ready.pop() {
        out.push(rest[i]);
        for &u in &succ[i] {
            pending[u] -= 1;
            if pending[u] == 0 {
                ready.push(std::cmp::Reverse((position[rest[u].index()], u)));
            }
        }
    }
    if out.len() == rest.len() {
        out
    } else {
        rest
    }
}

/// Rewrites each cluster into snapshot, call and write-back (module doc).
pub fn encapsulate(graph: &Graph, clusters: &[ClusterSpec]) -> Result<Encapsulated, EncapsulateError> {
    let _span = tracing::debug_span!("encapsulate", clusters = clusters.len()).entered();
    let order = graph.topo_order()?;
    let mut position = vec![0usize; graph.len()];
    for (i, id) in order.iter().enumerate() {
        position[id.index()] = i;
    }
    // Partial inference: one node it cannot type must not leave the whole graph untyped.
    let types = autoclust_graph::infer::infer_partial(graph).ok().map(|(types, _)| types);

    let mut of_node: Vec<Option<usize>> = vec![None; graph.len()];
    for (ci, c) in clusters.iter().enumerate() {
        for &n in &c.nodes {
            if let Some(prev) = of_node[n.index()] {
                if prev != ci {
                    return Err(EncapsulateError::NodeInTwoClusters {
                        node: graph.name(n).to_string(),
                        first: clusters[prev].name.clone(),
                        second: c.name.clone(),
                    });
                }
            }
            of_node[n.index()] = Some(ci);
        }
    }

    // The values other clusters need to recompute an outside shape op (see `shape_source`):
    // their clusters export them.
    let mut extra_exports: HashSet<Output> = HashSet::default();
    for (ci, c) in clusters.iter().enumerate() {
        for &n in &c.nodes {
            for &o in &graph.node(n).inputs {
                if of_node[o.node.index()] == Some(ci) {
                    continue;
                }
                if let Some(x) = shape_source(graph, types.as_ref(), o) {
                    if matches!(of_node[x.node.index()], Some(owner) if owner != ci) {
                        extra_exports.insert(x);
                    }
                }
            }
        }
    }

    // Whole-graph facts every cluster's lowering needs, computed once (encapsulation
    // stays linear in the graph, whatever the number of clusters).
    let successors = graph.successors();
    let mut ports_used = vec![0u32; graph.len()];
    for n in graph.nodes() {
        for o in &n.inputs {
            let p = &mut ports_used[o.node.index()];
            *p = (*p).max(o.port + 1);
        }
    }

    let mut function_names: HashSet<String> =
        graph.library.functions.iter().map(|f| f.signature.name.clone()).collect();
    let mut lowered: Vec<Option<Lowered>> = Vec::with_capacity(clusters.len());
    let mut declustered = Vec::new();
    for (ci, spec) in clusters.iter().enumerate() {
        if spec.nodes.is_empty() {
            lowered.push(None);
            continue;
        }
        let members = ssa_order(graph, &spec.nodes, &position);
        let spec = ClusterSpec { name: spec.name.clone(), nodes: members };
        let fname = fresh_name(&format!("{}_fn", spec.name), &mut function_names);
        let ctx = LowerCtx {
            graph,
            types: types.as_ref(),
            of_node: &of_node,
            me: ci,
            extra_exports: &extra_exports,
            successors: &successors,
            ports_used: &ports_used,
        };
        match ctx.lower(spec, fname)? {
            Ok(l) => lowered.push(Some(l)),
            Err(d) => {
                tracing::warn!(cluster = %d.cluster, variable = %d.variable, "declustered: one variable through two handles");
                declustered.push(d);
                lowered.push(None);
            }
        }
    }
    // Declustered clusters' members are plain nodes again.
    for (ci, l) in lowered.iter().enumerate() {
        if l.is_none() {
            for &n in &clusters[ci].nodes {
                of_node[n.index()] = None;
            }
        }
    }
    let mut done = rebuild(graph, &lowered, &of_node, declustered)?;
    crate::origins::record_origins(graph, clusters, &mut done.graph, &done.bridges, &position);
    Ok(done)
}

struct LowerCtx<'a> {
    graph: &'a Graph,
    types: Option<&'a TypeInfo>,
    of_node: &'a [Option<usize>],
    me: usize,
    /// Values a cluster exports only so another can recompute a shape op from them
    /// ([`shape_source`]).
    extra_exports: &'a HashSet<Output>,
    /// Every node's consumers, computed once for all clusters.
    successors: &'a autoclust_graph::Successors,
    /// Per node: one past the highest output port any node reads (0: none).
    ports_used: &'a [u32],
}

/// For an output of a `Shape`/`Size`/`Rank` node with no control inputs, of a value `x` that is
/// not a resource handle: `x`. Clusters consuming such a value from outside recompute it from
/// `x` ([`LowerCtx::rematerialize_shape`]).
fn shape_source(graph: &Graph, types: Option<&TypeInfo>, o: Output) -> Option<Output> {
    let p = graph.node(o.node);
    if !matches!(p.op.as_str(), "Shape" | "Size" | "Rank") || o.port != 0 || !p.control_inputs.is_empty() {
        return None;
    }
    let [x] = p.inputs[..] else { return None };
    let handle = autoclust_graph::effects::names_variable(graph.node(x.node))
        || matches!(types.and_then(|t| t.output(x)), Some((DType::Resource, _)));
    (!handle).then_some(x)
}

/// The largest outside `Const` copied into a cluster body rather than passed in.
pub const INLINE_CONST_ELEMENTS: usize = 1024;

/// Builds one function body.
struct Body {
    nodes: Vec<RawNode>,
    /// Names used by args and body nodes.
    taken: HashSet<String>,
    /// Member output → body reference.
    values: HashMap<Output, String>,
    /// Outside value → argument name (after the snapshot arguments).
    external_args: Vec<(Output, String, DType)>,
    external_index: HashMap<Output, usize>,
    /// Outside constants and shape ops copied into the body ([`LowerCtx::inline_constant`],
    /// [`LowerCtx::rematerialize_shape`]) → body reference.
    inlined: HashMap<Output, String>,
    /// Snapshot arguments: (variable index, name).
    snapshot_args: Vec<(usize, String)>,
}

impl Body {
    fn fresh(&mut self, base: &str) -> String {
        fresh_name(base, &mut self.taken)
    }
    fn push(&mut self, name: String, op: &str, inputs: Vec<String>, attrs: Attrs) -> String {
        self.nodes.push(RawNode {
            name: name.clone(),
            op: op.into(),
            inputs,
            attrs,
            device: String::new(),
            span: None,
        });
        format!("{name}:0")
    }
    /// A new body node named after `base`, returning its output reference.
    fn op(&mut self, base: &str, op: &str, inputs: Vec<String>, attrs: Attrs) -> String {
        let name = self.fresh(base);
        self.push(name, op, inputs, attrs)
    }
}

fn attrs(pairs: &[(&str, AttrValue)]) -> Attrs {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

/// The scalar 1 of a float dtype (the optimizers' `1 - beta` terms), `None` for others.
fn float_one(dtype: DType) -> Option<Tensor> {
    float_scalar(dtype, 1.0)
}

/// The scalar `v` of a float dtype (half types rounded to nearest-even; `None` for other
/// dtypes).
fn float_scalar(dtype: DType, v: f64) -> Option<Tensor> {
    match dtype {
        DType::Float32 => Some(Tensor::scalar_f32(v as f32)),
        DType::Float64 => Tensor::from_f64(vec![], vec![v]).ok(),
        d if d.is_half() => autoclust_graph::half::narrow(&Tensor::scalar_f32(v as f32), d),
        _ => None,
    }
}

/// A scalar constant `name/what` of a float dtype (`None` for other dtypes).
fn scalar_const(body: &mut Body, name: &str, what: &str, dtype: DType, v: f64) -> Option<String> {
    let t = float_scalar(dtype, v)?;
    Some(body.op(
        &format!("{name}/{what}"),
        "Const",
        vec![],
        attrs(&[("dtype", AttrValue::Type(dtype)), ("value", AttrValue::Tensor(t))]),
    ))
}

fn t_attr(dtype: DType) -> Attrs {
    attrs(&[("T", AttrValue::Type(dtype))])
}

impl LowerCtx<'_> {
    /// Lowers one cluster; `Ok(Err(_))` means it must be declustered.
    fn lower(&self, spec: ClusterSpec, fname: String) -> Result<Result<Lowered, Declustered>, EncapsulateError> {
        let g = self.graph;
        let in_me = |n: NodeId| self.of_node[n.index()] == Some(self.me);
        let mut vars: Vec<Variable> = Vec::new();
        let mut var_of_key: HashMap<String, usize> = HashMap::default();
        // Resolve every handle first, so duplicates decluster before any work.
        let mut handle_var: HashMap<(NodeId, usize), usize> = HashMap::default();
        for &n in &spec.nodes {
            let node = g.node(n);
            let Some(slots) = handle_slots(&node.op) else { continue };
            for slot in slots {
                let Some(&input) = node.inputs.get(slot) else {
                    return Err(EncapsulateError::UnresolvedHandle {
                        node: node.name.clone(),
                        input: slot,
                        reason: "missing input".into(),
                    });
                };
                let handle_node = self.resolve_handle(n, slot, input)?;
                let h = g.node(handle_node);
                let container = h.attr("container").and_then(AttrValue::as_str).unwrap_or("");
                let shared = h.attr("shared_name").and_then(AttrValue::as_str).filter(|s| !s.is_empty());
                let key = format!("{container}/{}", shared.unwrap_or(&h.name));
                let vi = match var_of_key.get(&key) {
                    Some(&vi) => {
                        if vars[vi].handle_node != handle_node {
                            return Ok(Err(Declustered {
                                cluster: spec.name.clone(),
                                variable: key,
                                handles: (g.name(vars[vi].handle_node).to_string(), h.name.clone()),
                            }));
                        }
                        vi
                    }
                    None => {
                        let dtype = autoclust_graph::effects::variable_dtype_in(g, self.successors, handle_node)
                            .ok_or_else(|| EncapsulateError::MissingAttr {
                                node: h.name.clone(),
                                op: h.op.clone(),
                                attr: "dtype".into(),
                            })?;
                        vars.push(Variable {
                            handle_node,
                            handle: input,
                            dtype,
                            base: h.name.clone(),
                            next_ssa: 0,
                            current: None,
                            snapshot_arg: None,
                            written: false,
                            shape: g
                                .node(handle_node)
                                .attr("shape")
                                .and_then(AttrValue::as_shape)
                                .cloned()
                                .unwrap_or_default(),
                        });
                        var_of_key.insert(key, vars.len() - 1);
                        vars.len() - 1
                    }
                };
                // A reader or writer declaring another dtype than the variable's fails in the
                // plain executor ("wrong dtype"); the bridge would read past it, so the cluster
                // is not encapsulated and the plain kernel reports the error.
                if let Some(d) = node.attr("dtype").and_then(AttrValue::as_type).filter(|&d| d != vars[vi].dtype) {
                    return Err(EncapsulateError::UnsupportedDType {
                        node: node.name.clone(),
                        op: format!("{} of variable '{}' (a {} variable)", node.op, vars[vi].base, vars[vi].dtype),
                        dtype: d,
                    });
                }
                handle_var.insert((n, slot), vi);
            }
        }

        let mut body = Body {
            nodes: Vec::new(),
            taken: spec.nodes.iter().map(|&n| g.name(n).to_string()).collect(),
            values: HashMap::default(),
            external_args: Vec::new(),
            external_index: HashMap::default(),
            inlined: HashMap::default(),
            snapshot_args: Vec::new(),
        };
        let mut deps: Vec<NodeId> = Vec::new();
        let mut dep_seen: HashSet<NodeId> = HashSet::default();
        let mut add_dep = |p: NodeId, deps: &mut Vec<NodeId>| {
            if dep_seen.insert(p) {
                deps.push(p);
            }
        };

        let guards: Vec<NodeId> = spec.nodes.iter().copied().filter(|&n| is_guard(&g.node(n).op)).collect();
        for &n in &spec.nodes {
            let node = g.node(n);
            if is_guard(&node.op) {
                continue;
            }
            let slots: Vec<usize> = handle_slots(&node.op).unwrap_or_default();
            // Data inputs other than handles, as body references.
            let mut data: Vec<Option<String>> = Vec::with_capacity(node.inputs.len());
            for (slot, &input) in node.inputs.iter().enumerate() {
                if slots.contains(&slot) {
                    data.push(None);
                    continue;
                }
                if in_me(input.node) {
                    let r = body.values.get(&input).cloned().ok_or_else(|| self.escaped_handle(n, input))?;
                    data.push(Some(r));
                } else {
                    if self.is_handle(input) {
                        return Err(self.escaped_handle(n, input));
                    }
                    if let Some(r) = self.inline_constant(&mut body, input) {
                        data.push(Some(r));
                        continue;
                    }
                    if let Some(x) = self.rematerializable_shape(input) {
                        // `Shape(x)` computed outside: compute it here from `x`, so the
                        // compiler knows it at compile time (a BroadcastTo/Reshape target).
                        let xr = if in_me(x.node) {
                            body.values.get(&x).cloned().ok_or_else(|| self.escaped_handle(n, x))?
                        } else {
                            add_dep(x.node, &mut deps);
                            self.external_arg(&mut body, n, x)?
                        };
                        data.push(Some(self.rematerialize_shape(&mut body, input, xr)));
                        continue;
                    }
                    add_dep(input.node, &mut deps);
                    data.push(Some(self.external_arg(&mut body, n, input)?));
                }
            }
            for &c in &node.control_inputs {
                if !in_me(c) {
                    add_dep(c, &mut deps);
                }
            }
            let arg = |i: usize| data[i].clone().expect("non-handle input");
            let var = |slot: usize| handle_var[&(n, slot)];

            if slots.is_empty() {
                if resource_kind(node, &g.library).is_some() {
                    return Err(EncapsulateError::UnsupportedResourceOp {
                        node: node.name.clone(),
                        op: node.op.clone(),
                    });
                }
                if node.op == "IdentityN" {
                    // One `Identity` per output (the compiler aliases those), so consumers of
                    // output k read `name/k`.
                    let types = node.attr("T").and_then(AttrValue::as_type_list).map(<[DType]>::to_vec);
                    for (k, input) in data.into_iter().flatten().enumerate() {
                        let dtype = types.as_ref().and_then(|t| t.get(k).copied()).unwrap_or(DType::Float32);
                        let r = body.op(&format!("{}/{k}", node.name), "Identity", vec![input], t_attr(dtype));
                        body.values.insert(Output { node: n, port: k as u32 }, r);
                    }
                    continue;
                }
                let mut a = node.attrs.clone();
                a.remove(CLUSTER_ATTR);
                a.remove(KEEP_NAME_ATTR);
                body.nodes.push(RawNode {
                    name: node.name.clone(),
                    op: node.op.clone(),
                    inputs: data.into_iter().flatten().collect(),
                    attrs: a,
                    device: node.device.clone(),
                    span: None,
                });
                for port in 0..self.output_count(n) {
                    body.values.insert(Output { node: n, port }, format!("{}:{port}", node.name));
                }
                continue;
            }

            let name = node.name.as_str();
            let op = node.op.as_str();
            match op {
                "ReadVariableOp" => {
                    let v = var(0);
                    let cur = read(&mut vars, &mut body, v);
                    let r = body.push(name.into(), "Identity", vec![cur], t_attr(vars[v].dtype));
                    body.values.insert(Output { node: n, port: 0 }, r);
                }
                "AssignVariableOp" => {
                    let v = var(0);
                    let (mut value, ta) = (arg(1), t_attr(vars[v].dtype));
                    // A shape-validating write after an earlier write in this body: check
                    // the new value against that one (the bridge checks a first write
                    // against the snapshot).
                    if vars[v].written && node.attr("validate_shape").and_then(AttrValue::as_bool) == Some(true) {
                        let cur = vars[v].current.clone().expect("written");
                        value =
                            same_shape_check(&mut body, node, value, cur, vars[v].dtype, &variable_name(g, &vars[v]));
                    }
                    write(&mut vars, &mut body, v, "Identity", vec![value], ta);
                    vars[v].shape = self.static_shape(node.inputs[1]);
                }
                "AssignAddVariableOp" | "AssignSubVariableOp" => {
                    let v = var(0);
                    let cur = read(&mut vars, &mut body, v);
                    let compute = if op == "AssignAddVariableOp" { "AddV2" } else { "Sub" };
                    let ta = t_attr(vars[v].dtype);
                    // The delta must have the variable's shape (no broadcasting), as the
                    // plain kernel requires.
                    let delta = same_shape_check(
                        &mut body,
                        node,
                        arg(1),
                        cur.clone(),
                        vars[v].dtype,
                        &variable_name(g, &vars[v]),
                    );
                    write(&mut vars, &mut body, v, compute, vec![cur, delta], ta);
                }
                "VariableShape" => {
                    let v = var(0);
                    let cur = read(&mut vars, &mut body, v);
                    let mut a = t_attr(vars[v].dtype);
                    a.insert(
                        "out_type".into(),
                        node.attr("out_type").cloned().unwrap_or(AttrValue::Type(DType::Int32)),
                    );
                    let r = body.push(name.into(), "Shape", vec![cur], a);
                    body.values.insert(Output { node: n, port: 0 }, r);
                }
                "ResourceGather" => {
                    let v = var(0);
                    let cur = read(&mut vars, &mut body, v);
                    let tindices = self.attr(n, "Tindices")?;
                    // ResourceGather gathers along axis `batch_dims` (tf.gather's default axis).
                    let batch_dims = node.attr("batch_dims").cloned().unwrap_or(AttrValue::I(0));
                    let axis_value = match batch_dims {
                        AttrValue::I(b) => b as i32,
                        _ => 0,
                    };
                    let axis = body.op(
                        &format!("{name}/axis"),
                        "Const",
                        vec![],
                        attrs(&[
                            ("dtype", AttrValue::Type(DType::Int32)),
                            ("value", AttrValue::Tensor(Tensor::scalar_i32(axis_value))),
                        ]),
                    );
                    let mut a = attrs(&[
                        ("Tparams", AttrValue::Type(vars[v].dtype)),
                        ("Tindices", tindices),
                        ("Taxis", AttrValue::Type(DType::Int32)),
                    ]);
                    a.insert("batch_dims".into(), batch_dims);
                    let r = body.push(name.into(), "GatherV2", vec![cur, arg(1), axis], a);
                    body.values.insert(Output { node: n, port: 0 }, r);
                }
                "ResourceScatterAdd"
                | "ResourceScatterSub"
                | "ResourceScatterUpdate"
                | "ResourceScatterMax"
                | "ResourceScatterMin" => {
                    let v = var(0);
                    let cur = read(&mut vars, &mut body, v);
                    let tindices = self.attr(n, "Tindices")?;
                    let minus_one = body.op(
                        &format!("{name}/axis"),
                        "Const",
                        vec![],
                        attrs(&[
                            ("dtype", AttrValue::Type(DType::Int32)),
                            ("value", AttrValue::Tensor(Tensor::scalar_i32(-1))),
                        ]),
                    );
                    let indices = body.op(
                        &format!("{name}/indices"),
                        "ExpandDims",
                        vec![arg(1), minus_one],
                        attrs(&[("T", tindices.clone()), ("Tdim", AttrValue::Type(DType::Int32))]),
                    );
                    let pure = op.replace("ResourceScatter", "TensorScatter");
                    let a = scatter_attrs(node, vars[v].dtype, tindices);
                    write(&mut vars, &mut body, v, &pure, vec![cur, indices, arg(2)], a);
                }
                "ResourceScatterNdAdd"
                | "ResourceScatterNdSub"
                | "ResourceScatterNdUpdate"
                | "ResourceScatterNdMax"
                | "ResourceScatterNdMin" => {
                    // The indices already end in the index vector: the pure op takes them as they are.
                    let v = var(0);
                    let cur = read(&mut vars, &mut body, v);
                    let tindices = self.attr(n, "Tindices")?;
                    let pure = op.replace("ResourceScatterNd", "TensorScatter");
                    let a = scatter_attrs(node, vars[v].dtype, tindices);
                    write(&mut vars, &mut body, v, &pure, vec![cur, arg(1), arg(2)], a);
                }
                "ResourceApplyGradientDescent" => {
                    let v = var(0);
                    let ta = t_attr(vars[v].dtype);
                    let cur = read(&mut vars, &mut body, v);
                    let step = body.op(&format!("{name}/step"), "Mul", vec![arg(1), arg(2)], ta.clone());
                    write(&mut vars, &mut body, v, "Sub", vec![cur, step], ta);
                }
                "ResourceApplyMomentum" => {
                    // accum = accum * momentum + grad
                    // var -= lr * accum                       (use_nesterov = false)
                    // var -= grad * lr + accum * momentum * lr (use_nesterov = true)
                    let (v, acc) = (var(0), var(1));
                    let ta = t_attr(vars[v].dtype);
                    let nesterov = node.attr("use_nesterov").and_then(AttrValue::as_bool).unwrap_or(false);
                    let var_cur = read(&mut vars, &mut body, v);
                    let acc_cur = read(&mut vars, &mut body, acc);
                    let (lr, grad, momentum) = (arg(2), arg(3), arg(4));
                    let decayed =
                        body.op(&format!("{name}/decayed"), "Mul", vec![acc_cur, momentum.clone()], ta.clone());
                    let acc_new = write(&mut vars, &mut body, acc, "AddV2", vec![decayed, grad.clone()], ta.clone());
                    let step = if nesterov {
                        let g_lr = body.op(&format!("{name}/grad_lr"), "Mul", vec![grad, lr.clone()], ta.clone());
                        let a_m =
                            body.op(&format!("{name}/accum_momentum"), "Mul", vec![acc_new, momentum], ta.clone());
                        let a_m_lr = body.op(&format!("{name}/accum_momentum_lr"), "Mul", vec![a_m, lr], ta.clone());
                        body.op(&format!("{name}/step"), "AddV2", vec![g_lr, a_m_lr], ta.clone())
                    } else {
                        body.op(&format!("{name}/step"), "Mul", vec![lr, acc_new], ta.clone())
                    };
                    write(&mut vars, &mut body, v, "Sub", vec![var_cur, step], ta);
                }
                // The remaining dense optimizers, each in the interpreter's operation order
                // (runtime/src/kernels/optimizer.rs), so both modes round alike.
                "ResourceApplyKerasMomentum" => {
                    // accum = accum * momentum - grad * lr
                    // var += accum                                   (use_nesterov = false)
                    // var += accum * momentum - grad * lr             (use_nesterov = true)
                    let (v, acc) = (var(0), var(1));
                    let ta = t_attr(vars[v].dtype);
                    let nesterov = node.attr("use_nesterov").and_then(AttrValue::as_bool).unwrap_or(false);
                    let var_cur = read(&mut vars, &mut body, v);
                    let acc_cur = read(&mut vars, &mut body, acc);
                    let (lr, grad, momentum) = (arg(2), arg(3), arg(4));
                    let p = |s: &str| format!("{name}/{s}");
                    let decayed = body.op(&p("decayed"), "Mul", vec![acc_cur, momentum.clone()], ta.clone());
                    let g_lr = body.op(&p("grad_lr"), "Mul", vec![grad, lr], ta.clone());
                    let acc_new = write(&mut vars, &mut body, acc, "Sub", vec![decayed, g_lr.clone()], ta.clone());
                    let step = if nesterov {
                        let a_m = body.op(&p("accum_momentum"), "Mul", vec![acc_new, momentum], ta.clone());
                        body.op(&p("step"), "Sub", vec![a_m, g_lr], ta.clone())
                    } else {
                        acc_new
                    };
                    write(&mut vars, &mut body, v, "AddV2", vec![var_cur, step], ta);
                }
                "ResourceApplyAdagrad" | "ResourceApplyAdagradV2" => {
                    // accum += grad²                       (update_slots, the default)
                    // var -= grad * lr * rsqrt(accum)          (Adagrad)
                    // var -= grad * lr / (sqrt(accum) + epsilon) (AdagradV2)
                    let (v, acc) = (var(0), var(1));
                    let ta = t_attr(vars[v].dtype);
                    let update_slots = node.attr("update_slots").and_then(AttrValue::as_bool).unwrap_or(true);
                    let var_cur = read(&mut vars, &mut body, v);
                    let mut acc_cur = read(&mut vars, &mut body, acc);
                    let v2 = op == "ResourceApplyAdagradV2";
                    let (lr, grad) = (arg(2), arg(if v2 { 4 } else { 3 }));
                    let p = |s: &str| format!("{name}/{s}");
                    if update_slots {
                        let g2 = body.op(&p("grad_squared"), "Mul", vec![grad.clone(), grad.clone()], ta.clone());
                        acc_cur = write(&mut vars, &mut body, acc, "AddV2", vec![acc_cur, g2], ta.clone());
                    }
                    let g_lr = body.op(&p("grad_lr"), "Mul", vec![grad, lr], ta.clone());
                    let step = if v2 {
                        let root = body.op(&p("sqrt_accum"), "Sqrt", vec![acc_cur], ta.clone());
                        let denom = body.op(&p("denominator"), "AddV2", vec![root, arg(3)], ta.clone());
                        body.op(&p("step"), "RealDiv", vec![g_lr, denom], ta.clone())
                    } else {
                        let r = body.op(&p("rsqrt_accum"), "Rsqrt", vec![acc_cur], ta.clone());
                        body.op(&p("step"), "Mul", vec![g_lr, r], ta.clone())
                    };
                    write(&mut vars, &mut body, v, "Sub", vec![var_cur, step], ta);
                }
                "ResourceApplyRMSProp" => {
                    // ms += (grad² - ms) * (1 - rho)
                    // mom = mom * momentum + grad * lr / sqrt(ms + epsilon)
                    // var -= mom
                    let (v, ms, mom) = (var(0), var(1), var(2));
                    let dtype = vars[v].dtype;
                    let one_value = float_one(dtype).ok_or_else(|| EncapsulateError::UnsupportedDType {
                        node: name.into(),
                        op: op.into(),
                        dtype,
                    })?;
                    let ta = t_attr(dtype);
                    let var_cur = read(&mut vars, &mut body, v);
                    let ms_cur = read(&mut vars, &mut body, ms);
                    let mom_cur = read(&mut vars, &mut body, mom);
                    let (lr, rho, momentum, eps, grad) = (arg(3), arg(4), arg(5), arg(6), arg(7));
                    let p = |s: &str| format!("{name}/{s}");
                    let one = body.op(
                        &p("one"),
                        "Const",
                        vec![],
                        attrs(&[("dtype", AttrValue::Type(dtype)), ("value", AttrValue::Tensor(one_value))]),
                    );
                    let g2 = body.op(&p("grad_squared"), "Mul", vec![grad.clone(), grad.clone()], ta.clone());
                    let g2_ms = body.op(&p("grad_squared_minus_ms"), "Sub", vec![g2, ms_cur.clone()], ta.clone());
                    let one_rho = body.op(&p("one_minus_rho"), "Sub", vec![one, rho], ta.clone());
                    let dms = body.op(&p("ms_delta"), "Mul", vec![g2_ms, one_rho], ta.clone());
                    let ms_new = write(&mut vars, &mut body, ms, "AddV2", vec![ms_cur, dms], ta.clone());
                    let decayed = body.op(&p("mom_decayed"), "Mul", vec![mom_cur, momentum], ta.clone());
                    let g_lr = body.op(&p("grad_lr"), "Mul", vec![grad, lr], ta.clone());
                    let ms_eps = body.op(&p("ms_epsilon"), "AddV2", vec![ms_new, eps], ta.clone());
                    let root = body.op(&p("sqrt_ms_epsilon"), "Sqrt", vec![ms_eps], ta.clone());
                    let scaled = body.op(&p("scaled_grad"), "RealDiv", vec![g_lr, root], ta.clone());
                    let mom_new = write(&mut vars, &mut body, mom, "AddV2", vec![decayed, scaled], ta.clone());
                    write(&mut vars, &mut body, v, "Sub", vec![var_cur, mom_new], ta);
                }
                "ResourceApplyAdam" | "ResourceApplyAdamWithAmsgrad" => {
                    // lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
                    // m = m + (grad - m) * (1 - beta1);  v = v + (grad² - v) * (1 - beta2)
                    // var -= lr_t * m / (sqrt(v) + epsilon)
                    // (use_nesterov: m replaced by m * beta1 + (1 - beta1) * grad in the last line;
                    // AMSGrad: vhat = max(vhat, v) and sqrt(vhat) in the last line)
                    let amsgrad = op == "ResourceApplyAdamWithAmsgrad";
                    let (v, m, s) = (var(0), var(1), var(2));
                    let dtype = vars[v].dtype;
                    let one_value = float_one(dtype).ok_or_else(|| EncapsulateError::UnsupportedDType {
                        node: name.into(),
                        op: op.into(),
                        dtype,
                    })?;
                    let ta = t_attr(dtype);
                    let nesterov = node.attr("use_nesterov").and_then(AttrValue::as_bool).unwrap_or(false);
                    let var_cur = read(&mut vars, &mut body, v);
                    let m_cur = read(&mut vars, &mut body, m);
                    let v_cur = read(&mut vars, &mut body, s);
                    let k = 3 + usize::from(amsgrad);
                    let (b1p, b2p, lr, b1, b2, eps, grad) =
                        (arg(k), arg(k + 1), arg(k + 2), arg(k + 3), arg(k + 4), arg(k + 5), arg(k + 6));
                    let p = |s: &str| format!("{name}/{s}");
                    let one = body.op(
                        &p("one"),
                        "Const",
                        vec![],
                        attrs(&[("dtype", AttrValue::Type(dtype)), ("value", AttrValue::Tensor(one_value))]),
                    );
                    let one_b2p = body.op(&p("one_minus_beta2_power"), "Sub", vec![one.clone(), b2p], ta.clone());
                    let sqrt_b2p = body.op(&p("sqrt_one_minus_beta2_power"), "Sqrt", vec![one_b2p], ta.clone());
                    let one_b1p = body.op(&p("one_minus_beta1_power"), "Sub", vec![one.clone(), b1p], ta.clone());
                    let lr_scaled = body.op(&p("lr_sqrt"), "Mul", vec![lr, sqrt_b2p], ta.clone());
                    let lr_t = body.op(&p("lr_t"), "RealDiv", vec![lr_scaled, one_b1p], ta.clone());
                    let one_b1 = body.op(&p("one_minus_beta1"), "Sub", vec![one.clone(), b1.clone()], ta.clone());
                    let g_m = body.op(&p("grad_minus_m"), "Sub", vec![grad.clone(), m_cur.clone()], ta.clone());
                    let dm = body.op(&p("m_delta"), "Mul", vec![g_m, one_b1.clone()], ta.clone());
                    let m_new = write(&mut vars, &mut body, m, "AddV2", vec![m_cur, dm], ta.clone());
                    let one_b2 = body.op(&p("one_minus_beta2"), "Sub", vec![one, b2], ta.clone());
                    let g2 = body.op(&p("grad_squared"), "Square", vec![grad.clone()], ta.clone());
                    let g2_v = body.op(&p("grad_squared_minus_v"), "Sub", vec![g2, v_cur.clone()], ta.clone());
                    let dv = body.op(&p("v_delta"), "Mul", vec![g2_v, one_b2], ta.clone());
                    let v_new = write(&mut vars, &mut body, s, "AddV2", vec![v_cur, dv], ta.clone());
                    let direction = if nesterov {
                        let mb1 = body.op(&p("m_beta1"), "Mul", vec![m_new, b1], ta.clone());
                        let gb1 = body.op(&p("grad_one_minus_beta1"), "Mul", vec![grad, one_b1], ta.clone());
                        body.op(&p("nesterov_m"), "AddV2", vec![mb1, gb1], ta.clone())
                    } else {
                        m_new
                    };
                    let v_new = if amsgrad {
                        let h = var(3);
                        let vhat_cur = read(&mut vars, &mut body, h);
                        write(&mut vars, &mut body, h, "Maximum", vec![vhat_cur, v_new], ta.clone())
                    } else {
                        v_new
                    };
                    let sqrt_v = body.op(&p("sqrt_v"), "Sqrt", vec![v_new], ta.clone());
                    let denom = body.op(&p("denominator"), "AddV2", vec![sqrt_v, eps], ta.clone());
                    let num = body.op(&p("numerator"), "Mul", vec![lr_t, direction], ta.clone());
                    let step = body.op(&p("step"), "RealDiv", vec![num, denom], ta.clone());
                    write(&mut vars, &mut body, v, "Sub", vec![var_cur, step], ta);
                }
                // AdaMax, Adadelta, CenteredRMSProp, Ftrl(V2), the proximal ones, AddSign and
                // PowerSign: the interpreter's update rules (runtime/src/kernels/optimizer.rs,
                // `Rule::step`) term by term, every slot computed from the old values.
                "ResourceApplyAdaMax"
                | "ResourceApplyAdadelta"
                | "ResourceApplyCenteredRMSProp"
                | "ResourceApplyFtrl"
                | "ResourceApplyFtrlV2"
                | "ResourceApplyProximalGradientDescent"
                | "ResourceApplyProximalAdagrad"
                | "ResourceApplyAddSign"
                | "ResourceApplyPowerSign" => {
                    let dtype = vars[var(0)].dtype;
                    let unsupported = || EncapsulateError::UnsupportedDType { node: name.into(), op: op.into(), dtype };
                    let one = scalar_const(&mut body, name, "one", dtype, 1.0).ok_or_else(unsupported)?;
                    let zero = scalar_const(&mut body, name, "zero", dtype, 0.0).ok_or_else(unsupported)?;
                    let ta = t_attr(dtype);
                    macro_rules! e {
                        ($s:literal, $op:literal, $($i:expr),+) => {
                            body.op(&format!("{name}/{}", $s), $op, vec![$($i.clone()),+], ta.clone())
                        };
                    }
                    // TensorFlow's proximal step: l1 > 0 ? sgn(v)·max(|v| − shrink, 0)/scale : v/scale.
                    macro_rules! proximal {
                        ($v:expr, $l1:expr, $shrink:expr, $scale:expr) => {{
                            let pos = e!("l1_positive", "Greater", $l1, zero);
                            let sign = e!("sign", "Sign", $v);
                            let abs = e!("abs", "Abs", $v);
                            let shrunk = e!("shrunk", "Sub", abs, $shrink);
                            let clipped = e!("clipped", "Maximum", shrunk, zero);
                            let signed = e!("signed", "Mul", sign, clipped);
                            let l1_step = e!("l1_step", "RealDiv", signed, $scale);
                            let plain = e!("plain_step", "RealDiv", $v, $scale);
                            e!("proximal", "SelectV2", pos, l1_step, plain)
                        }};
                    }
                    match op {
                        "ResourceApplyAdaMax" => {
                            // m += (g − m)(1 − β₁); v = max(β₂v, |g|); var −= lr/(1 − β₁ᵗ)·(m/(v + ε))
                            let (v, m, u) = (var(0), var(1), var(2));
                            let (var_cur, m_cur, u_cur) = (
                                read(&mut vars, &mut body, v),
                                read(&mut vars, &mut body, m),
                                read(&mut vars, &mut body, u),
                            );
                            let (b1p, lr, b1, b2, eps, g) = (arg(3), arg(4), arg(5), arg(6), arg(7), arg(8));
                            let one_b1 = e!("one_minus_beta1", "Sub", one, b1);
                            let g_m = e!("grad_minus_m", "Sub", g, m_cur);
                            let dm = e!("m_delta", "Mul", g_m, one_b1);
                            let m_new = write(&mut vars, &mut body, m, "AddV2", vec![m_cur, dm], ta.clone());
                            let b2u = e!("beta2_v", "Mul", b2, u_cur);
                            let abs_g = e!("abs_grad", "Abs", g);
                            let u_new = write(&mut vars, &mut body, u, "Maximum", vec![b2u, abs_g], ta.clone());
                            let one_b1p = e!("one_minus_beta1_power", "Sub", one, b1p);
                            let lr_t = e!("lr_t", "RealDiv", lr, one_b1p);
                            let u_eps = e!("v_epsilon", "AddV2", u_new, eps);
                            let ratio = e!("ratio", "RealDiv", m_new, u_eps);
                            let step = e!("step", "Mul", lr_t, ratio);
                            write(&mut vars, &mut body, v, "Sub", vec![var_cur, step], ta);
                        }
                        "ResourceApplyAdadelta" => {
                            // accum = accum·ρ + g·g·(1 − ρ); update = sqrt(au + ε)·rsqrt(accum + ε)·g
                            // var −= update·lr; au = au·ρ + update·update·(1 − ρ)
                            let (v, acc, au) = (var(0), var(1), var(2));
                            let (var_cur, acc_cur, au_cur) = (
                                read(&mut vars, &mut body, v),
                                read(&mut vars, &mut body, acc),
                                read(&mut vars, &mut body, au),
                            );
                            let (lr, rho, eps, g) = (arg(3), arg(4), arg(5), arg(6));
                            let one_rho = e!("one_minus_rho", "Sub", one, rho);
                            let acc_rho = e!("accum_rho", "Mul", acc_cur, rho);
                            let g2 = e!("grad_squared", "Mul", g, g);
                            let g2r = e!("grad_squared_scaled", "Mul", g2, one_rho);
                            let acc_new = write(&mut vars, &mut body, acc, "AddV2", vec![acc_rho, g2r], ta.clone());
                            let au_eps = e!("update_accum_epsilon", "AddV2", au_cur, eps);
                            let num = e!("sqrt_update_accum", "Sqrt", au_eps);
                            let acc_eps = e!("accum_epsilon", "AddV2", acc_new, eps);
                            let root = e!("sqrt_accum", "Sqrt", acc_eps);
                            let inv = e!("rsqrt_accum", "Reciprocal", root);
                            let ratio = e!("ratio", "Mul", num, inv);
                            let update = e!("update", "Mul", ratio, g);
                            let step = e!("step", "Mul", update, lr);
                            write(&mut vars, &mut body, v, "Sub", vec![var_cur, step], ta.clone());
                            let au_rho = e!("update_accum_rho", "Mul", au_cur, rho);
                            let u2 = e!("update_squared", "Mul", update, update);
                            let u2r = e!("update_squared_scaled", "Mul", u2, one_rho);
                            write(&mut vars, &mut body, au, "AddV2", vec![au_rho, u2r], ta);
                        }
                        "ResourceApplyCenteredRMSProp" => {
                            // ms += (g² − ms)(1 − ρ); mg += (g − mg)(1 − ρ)
                            // mom = mom·momentum + g·lr/sqrt(ms − mg² + ε); var −= mom
                            let (v, mg, ms, mom) = (var(0), var(1), var(2), var(3));
                            let var_cur = read(&mut vars, &mut body, v);
                            let mg_cur = read(&mut vars, &mut body, mg);
                            let ms_cur = read(&mut vars, &mut body, ms);
                            let mom_cur = read(&mut vars, &mut body, mom);
                            let (lr, rho, momentum, eps, g) = (arg(4), arg(5), arg(6), arg(7), arg(8));
                            let one_rho = e!("one_minus_rho", "Sub", one, rho);
                            let g2 = e!("grad_squared", "Mul", g, g);
                            let g2_ms = e!("grad_squared_minus_ms", "Sub", g2, ms_cur);
                            let dms = e!("ms_delta", "Mul", g2_ms, one_rho);
                            let ms_new = write(&mut vars, &mut body, ms, "AddV2", vec![ms_cur, dms], ta.clone());
                            let g_mg = e!("grad_minus_mg", "Sub", g, mg_cur);
                            let dmg = e!("mg_delta", "Mul", g_mg, one_rho);
                            let mg_new = write(&mut vars, &mut body, mg, "AddV2", vec![mg_cur, dmg], ta.clone());
                            let mg2 = e!("mg_squared", "Mul", mg_new, mg_new);
                            let centred = e!("centred", "Sub", ms_new, mg2);
                            let denom = e!("denominator", "AddV2", centred, eps);
                            let root = e!("sqrt_denominator", "Sqrt", denom);
                            let decayed = e!("mom_decayed", "Mul", mom_cur, momentum);
                            let g_lr = e!("grad_lr", "Mul", g, lr);
                            let scaled = e!("scaled_grad", "RealDiv", g_lr, root);
                            let mom_new = write(&mut vars, &mut body, mom, "AddV2", vec![decayed, scaled], ta.clone());
                            write(&mut vars, &mut body, v, "Sub", vec![var_cur, mom_new], ta);
                        }
                        "ResourceApplyFtrl" | "ResourceApplyFtrlV2" => {
                            let v2 = op == "ResourceApplyFtrlV2";
                            let by_lr =
                                node.attr("multiply_linear_by_lr").and_then(AttrValue::as_bool).unwrap_or(false);
                            let (v, acc, lin) = (var(0), var(1), var(2));
                            let var_cur = read(&mut vars, &mut body, v);
                            let acc_cur = read(&mut vars, &mut body, acc);
                            let lin_cur = read(&mut vars, &mut body, lin);
                            let (g, lr, l1, l2) = (arg(3), arg(4), arg(5), arg(6));
                            let lr_power = arg(if v2 { 8 } else { 7 });
                            let two = scalar_const(&mut body, name, "two", dtype, 2.0).ok_or_else(unsupported)?;
                            let minus_half =
                                scalar_const(&mut body, name, "minus_half", dtype, -0.5).ok_or_else(unsupported)?;
                            let g_shrunk = if v2 {
                                let two_shrink = e!("two_shrinkage", "Mul", two, arg(7));
                                let pull = e!("shrinkage_pull", "Mul", two_shrink, var_cur);
                                e!("grad_shrunk", "AddV2", g, pull)
                            } else {
                                g.clone()
                            };
                            let g2 = e!("grad_squared", "Mul", g, g);
                            let acc_new = e!("new_accum", "AddV2", acc_cur, g2);
                            // accum^(−lr_power), a square root when lr_power is −½ (as TensorFlow).
                            let half = body.op(
                                &format!("{name}/lr_power_is_half"),
                                "Equal",
                                vec![lr_power.clone(), minus_half],
                                attrs(&[
                                    ("T", AttrValue::Type(dtype)),
                                    ("incompatible_shape_error", AttrValue::B(true)),
                                ]),
                            );
                            let neg_power = e!("neg_lr_power", "Neg", lr_power);
                            let new_root = e!("new_accum_sqrt", "Sqrt", acc_new);
                            let new_pow_gen = e!("new_accum_pow", "Pow", acc_new, neg_power);
                            let new_pow = e!("new_accum_power", "SelectV2", half, new_root, new_pow_gen);
                            let old_root = e!("accum_sqrt", "Sqrt", acc_cur);
                            let old_pow_gen = e!("accum_pow", "Pow", acc_cur, neg_power);
                            let old_pow = e!("accum_power", "SelectV2", half, old_root, old_pow_gen);
                            let dpow = e!("power_delta", "Sub", new_pow, old_pow);
                            let two_l2 = e!("two_l2", "Mul", two, l2);
                            let (lin_new, l1_eff, y) = if by_lr {
                                let g_lr = e!("grad_lr", "Mul", g_shrunk, lr);
                                let dv = e!("power_delta_var", "Mul", dpow, var_cur);
                                let inc = e!("linear_delta", "Sub", g_lr, dv);
                                let lin_new = write(&mut vars, &mut body, lin, "AddV2", vec![lin_cur, inc], ta.clone());
                                let l1_eff = e!("l1_lr", "Mul", l1, lr);
                                let two_l2_lr = e!("two_l2_lr", "Mul", two_l2, lr);
                                (lin_new, l1_eff, e!("quadratic", "AddV2", new_pow, two_l2_lr))
                            } else {
                                let d_lr = e!("power_delta_lr", "RealDiv", dpow, lr);
                                let dv = e!("power_delta_var", "Mul", d_lr, var_cur);
                                let inc = e!("linear_delta", "Sub", g_shrunk, dv);
                                let lin_new = write(&mut vars, &mut body, lin, "AddV2", vec![lin_cur, inc], ta.clone());
                                let p_lr = e!("new_power_lr", "RealDiv", new_pow, lr);
                                (lin_new, l1.clone(), e!("quadratic", "AddV2", p_lr, two_l2))
                            };
                            let sign = e!("linear_sign", "Sign", lin_new);
                            let l1_sign = e!("l1_sign", "Mul", l1_eff, sign);
                            let x = e!("pre_shrink", "Sub", l1_sign, lin_new);
                            let abs = e!("linear_abs", "Abs", lin_new);
                            let big = e!("above_l1", "Greater", abs, l1_eff);
                            let value = e!("value", "RealDiv", x, y);
                            write(&mut vars, &mut body, v, "SelectV2", vec![big, value, zero], ta.clone());
                            write(&mut vars, &mut body, acc, "Identity", vec![acc_new], ta);
                        }
                        "ResourceApplyProximalGradientDescent" => {
                            // prox = var − g·lr; var = proximal(prox, l1, lr·l1, 1 + l2·lr)
                            let v = var(0);
                            let var_cur = read(&mut vars, &mut body, v);
                            let (lr, l1, l2, g) = (arg(1), arg(2), arg(3), arg(4));
                            let g_lr = e!("grad_lr", "Mul", g, lr);
                            let prox = e!("prox", "Sub", var_cur, g_lr);
                            let shrink = e!("shrink", "Mul", lr, l1);
                            let l2_lr = e!("l2_lr", "Mul", l2, lr);
                            let scale = e!("scale", "AddV2", one, l2_lr);
                            let new = proximal!(prox, l1, shrink, scale);
                            write(&mut vars, &mut body, v, "Identity", vec![new], ta);
                        }
                        "ResourceApplyProximalAdagrad" => {
                            // accum += g²; rate = lr·rsqrt(accum); prox = var − g·rate
                            // var = proximal(prox, l1, rate·l1, 1 + l2·rate)
                            let (v, acc) = (var(0), var(1));
                            let var_cur = read(&mut vars, &mut body, v);
                            let acc_cur = read(&mut vars, &mut body, acc);
                            let (lr, l1, l2, g) = (arg(2), arg(3), arg(4), arg(5));
                            let g2 = e!("grad_squared", "Mul", g, g);
                            let acc_new = write(&mut vars, &mut body, acc, "AddV2", vec![acc_cur, g2], ta.clone());
                            let root = e!("sqrt_accum", "Sqrt", acc_new);
                            let inv = e!("rsqrt_accum", "Reciprocal", root);
                            let rate = e!("rate", "Mul", lr, inv);
                            let g_rate = e!("grad_rate", "Mul", g, rate);
                            let prox = e!("prox", "Sub", var_cur, g_rate);
                            let shrink = e!("shrink", "Mul", rate, l1);
                            let l2_rate = e!("l2_rate", "Mul", l2, rate);
                            let scale = e!("scale", "AddV2", one, l2_rate);
                            let new = proximal!(prox, l1, shrink, scale);
                            write(&mut vars, &mut body, v, "Identity", vec![new], ta);
                        }
                        _ => {
                            // AddSign / PowerSign: m = m·β + g(1 − β); s = sgn(g)·sgn(m)
                            // var −= lr·(α + decay·s)·g   or   lr·exp(log_base·decay·s)·g
                            let (v, m) = (var(0), var(1));
                            let var_cur = read(&mut vars, &mut body, v);
                            let m_cur = read(&mut vars, &mut body, m);
                            let (lr, a, decay, beta, g) = (arg(2), arg(3), arg(4), arg(5), arg(6));
                            let m_beta = e!("m_beta", "Mul", m_cur, beta);
                            let one_beta = e!("one_minus_beta", "Sub", one, beta);
                            let g_beta = e!("grad_one_minus_beta", "Mul", g, one_beta);
                            let m_new = write(&mut vars, &mut body, m, "AddV2", vec![m_beta, g_beta], ta.clone());
                            let sg = e!("grad_sign", "Sign", g);
                            let sm = e!("m_sign", "Sign", m_new);
                            let agree = e!("agreement", "Mul", sg, sm);
                            let scale = if op == "ResourceApplyAddSign" {
                                let d = e!("decay_agreement", "Mul", decay, agree);
                                e!("scale", "AddV2", a, d)
                            } else {
                                let ad = e!("log_base_decay", "Mul", a, decay);
                                let ex = e!("exponent", "Mul", ad, agree);
                                e!("scale", "Exp", ex)
                            };
                            let lr_scale = e!("lr_scale", "Mul", lr, scale);
                            let step = e!("step", "Mul", lr_scale, g);
                            write(&mut vars, &mut body, v, "Sub", vec![var_cur, step], ta);
                        }
                    }
                }
                _ => unreachable!("handle_slots lists only the ops above"),
            }
        }

        // Outputs: member values used outside, then the written variables' final values.
        let succ = self.successors;
        let mut external_outputs: Vec<Output> = Vec::new();
        let mut sinks: Vec<(NodeId, Vec<DType>)> = Vec::new();
        for &n in &spec.nodes {
            if is_guard(&g.node(n).op) {
                continue;
            }
            // A guard reads the call's outputs like an outside consumer.
            let mut used: Vec<u32> = succ.data[n.index()]
                .iter()
                .filter(|(consumer, _, _)| !in_me(*consumer) || guards.contains(consumer))
                .map(|&(_, port, _)| port)
                .collect();
            let keep_name = matches!(g.node(n).attr(KEEP_NAME_ATTR), Some(AttrValue::B(true)));
            if keep_name || (succ.data[n.index()].is_empty() && succ.control[n.index()].is_empty()) {
                // The node's own outputs (none for an update op), not `output_count`'s at least one.
                let ports = self.types.and_then(|t| t.num_outputs(n).or(Some(t.outputs(n).len()))).unwrap_or(0) as u32;
                let mut dtypes = Vec::with_capacity(ports as usize);
                for port in 0..ports {
                    let o = Output { node: n, port };
                    dtypes.push(self.value_dtype(o).ok_or_else(|| EncapsulateError::UnknownDType {
                        node: g.name(n).to_string(),
                        input: g.output_name(o),
                    })?);
                }
                used.extend(0..ports);
                sinks.push((n, dtypes));
            }
            used.extend(
                (0..self.output_count(n)).filter(|&port| self.extra_exports.contains(&Output { node: n, port })),
            );
            used.sort_unstable();
            used.dedup();
            external_outputs.extend(used.into_iter().map(|port| Output { node: n, port }));
        }
        let mut sig_names: HashSet<String> = HashSet::default();
        let snapshot_vars: Vec<usize> = body.snapshot_args.iter().map(|(v, _)| *v).collect();
        let mut inputs = Vec::new();
        for (v, name) in &body.snapshot_args {
            sig_names.insert(name.clone());
            inputs.push(arg_def(name, vars[*v].dtype));
        }
        for (_, name, dtype) in &body.external_args {
            sig_names.insert(name.clone());
            inputs.push(arg_def(name, *dtype));
        }
        let mut outputs = Vec::new();
        let mut ret = Vec::new();
        for &o in &external_outputs {
            let value = body.values.get(&o).cloned().ok_or_else(|| self.escaped_handle(o.node, o))?;
            let base = if o.port == 0 { g.name(o.node).to_string() } else { format!("{}_{}", g.name(o.node), o.port) };
            let name = fresh_name(&base, &mut sig_names);
            let dtype = self.value_dtype(o).ok_or_else(|| EncapsulateError::UnknownDType {
                node: g.name(o.node).to_string(),
                input: g.output_name(o),
            })?;
            outputs.push(arg_def(&name, dtype));
            ret.push((name, value));
        }
        let mut written_vars: Vec<usize> = (0..vars.len()).filter(|&v| vars[v].written).collect();
        if vars.iter().any(|v| !autoclust_graph::effects::names_variable(g.node(v.handle_node))) {
            // Two resource arguments may name one variable (module doc, "Function bodies"):
            // the write-back publishes in list order, so the variable whose last write comes
            // later in the body's order is published later, and the later write wins.
            let mut last_write = vec![0usize; vars.len()];
            for (i, &n) in spec.nodes.iter().enumerate() {
                if resource_kind(g.node(n), &g.library).is_some_and(ResourceKind::writes) {
                    for slot in handle_slots(&g.node(n).op).unwrap_or_default() {
                        if let Some(&v) = handle_var.get(&(n, slot)) {
                            last_write[v] = i;
                        }
                    }
                }
            }
            written_vars.sort_by_key(|&v| last_write[v]);
        }
        for &v in &written_vars {
            let value = vars[v].current.clone().expect("a written variable has a value");
            let base = value.rsplit_once(':').map(|(node, _)| node.to_string()).unwrap_or_else(|| value.clone());
            let name = fresh_name(&base, &mut sig_names);
            outputs.push(arg_def(&name, vars[v].dtype));
            ret.push((name, value));
        }
        let function = FunctionDef {
            signature: Signature { name: fname, inputs, outputs, ..Signature::default() },
            attrs: Attrs::new(),
            nodes: body.nodes,
            ret,
            control_ret: Vec::new(),
        };
        let external_inputs = body.external_args.iter().map(|(o, _, _)| *o).collect();
        let output_shapes = external_outputs
            .iter()
            .map(|&o| self.static_shape(o))
            .chain(written_vars.iter().map(|&v| vars[v].shape.clone()))
            .collect();
        Ok(Ok(Lowered {
            spec,
            function,
            vars,
            snapshot_vars,
            written_vars,
            external_inputs,
            external_outputs,
            output_shapes,
            deps,
            guards,
            sinks,
        }))
    }

    /// Follows `Identity` nodes outside the cluster back to a `VarHandleOp` (or, in a
    /// function body, a resource argument: [`is_handle_source`]).
    fn resolve_handle(&self, node: NodeId, slot: usize, mut input: Output) -> Result<NodeId, EncapsulateError> {
        let g = self.graph;
        let fail =
            |reason: String| EncapsulateError::UnresolvedHandle { node: g.name(node).to_string(), input: slot, reason };
        for _ in 0..g.len() + 1 {
            let p = g.node(input.node);
            if self.of_node[input.node.index()].is_some() {
                return Err(fail(format!("'{}' is itself clustered", p.name)));
            }
            if is_handle_source(p) {
                return Ok(input.node);
            }
            match p.op.as_str() {
                "Identity" if !p.inputs.is_empty() => input = p.inputs[0],
                other => return Err(fail(format!("it comes from '{}' ({other})", p.name))),
            }
        }
        Err(fail("cyclic Identity chain".into()))
    }

    /// Whether an outside value is a variable handle.
    fn is_handle(&self, mut o: Output) -> bool {
        let g = self.graph;
        for _ in 0..g.len() + 1 {
            let p = g.node(o.node);
            if is_handle_source(p) {
                return true;
            }
            match p.op.as_str() {
                "Identity" if !p.inputs.is_empty() => o = p.inputs[0],
                _ => break,
            }
        }
        matches!(self.types.and_then(|t| t.output(o)), Some((DType::Resource, _)))
    }

    fn escaped_handle(&self, node: NodeId, input: Output) -> EncapsulateError {
        EncapsulateError::HandleEscapes {
            node: self.graph.name(node).to_string(),
            handle: self.graph.output_name(input),
        }
    }

    fn attr(&self, n: NodeId, name: &str) -> Result<AttrValue, EncapsulateError> {
        let node = self.graph.node(n);
        node.attr(name).cloned().ok_or_else(|| EncapsulateError::MissingAttr {
            node: node.name.clone(),
            op: node.op.clone(),
            attr: name.into(),
        })
    }

    /// A small outside `Const` (at most [`INLINE_CONST_ELEMENTS`] elements, no control inputs)
    /// copied into the body instead of passed as an argument, as XLA's clone-constants pass
    /// does: the compiler then sees it as a compile-time constant (a reduction's axes, a
    /// reshape's shape), and the call no longer depends on another cluster that also uses it.
    /// Sound: a `Const` without control inputs has no effect and no ordering to keep.
    fn inline_constant(&self, body: &mut Body, input: Output) -> Option<String> {
        let p = self.graph.node(input.node);
        if p.op != "Const" || input.port != 0 || !p.control_inputs.is_empty() {
            return None;
        }
        if p.attr("value")?.as_tensor()?.num_elements() > INLINE_CONST_ELEMENTS {
            return None;
        }
        if let Some(r) = body.inlined.get(&input) {
            return Some(r.clone());
        }
        let name = body.fresh(&p.name);
        let mut a = p.attrs.clone();
        a.remove(CLUSTER_ATTR);
        let r = body.push(name, "Const", vec![], a);
        body.inlined.insert(input, r.clone());
        Some(r)
    }

    /// For an outside `Shape`/`Size`/`Rank` of a non-handle value `x` (no control inputs):
    /// `x`. Such an op is recomputed in the body instead of passed in (XLA would need the
    /// value as a compile-time constant); sound because it is a pure function of `x`, and the
    /// call already depended on `x`'s producer through it.
    fn rematerializable_shape(&self, input: Output) -> Option<Output> {
        shape_source(self.graph, self.types, input)
    }

    /// The body node recomputing the outside shape op `input` from `x_ref` (once per body).
    fn rematerialize_shape(&self, body: &mut Body, input: Output, x_ref: String) -> String {
        if let Some(r) = body.inlined.get(&input) {
            return r.clone();
        }
        let p = self.graph.node(input.node);
        let name = body.fresh(&p.name);
        let mut a = p.attrs.clone();
        a.remove(CLUSTER_ATTR);
        let r = body.push(name, &p.op, vec![x_ref], a);
        body.inlined.insert(input, r.clone());
        r
    }

    /// The argument carrying an outside value (created on first use).
    fn external_arg(&self, body: &mut Body, consumer: NodeId, input: Output) -> Result<String, EncapsulateError> {
        if let Some(&i) = body.external_index.get(&input) {
            return Ok(body.external_args[i].1.clone());
        }
        let g = self.graph;
        let declared = || {
            // The dtype the consumer's own signature gives this input.
            let c = g.node(consumer);
            let slot = c.inputs.iter().position(|&o| o == input)?;
            autoclust_graph::infer::attr_input_dtypes(c)?.get(slot).copied()
        };
        let dtype =
            self.value_dtype(input).or_else(declared).or_else(|| self.guessed_dtype(input)).ok_or_else(|| {
                EncapsulateError::UnknownDType { node: g.name(consumer).to_string(), input: g.output_name(input) }
            })?;
        let base = if input.port == 0 {
            g.name(input.node).to_string()
        } else {
            format!("{}_{}", g.name(input.node), input.port)
        };
        let name = body.fresh(&base);
        body.external_index.insert(input, body.external_args.len());
        body.external_args.push((input, name.clone(), dtype));
        Ok(name)
    }

    /// The static shape inference gives a value (unknown when it gives none).
    fn static_shape(&self, o: Output) -> Shape {
        self.types.and_then(|t| t.output(o)).map(|(_, s)| s.clone()).unwrap_or_default()
    }

    /// The dtype of a value: type inference, else the producer's attributes.
    fn value_dtype(&self, o: Output) -> Option<DType> {
        if let Some((t, _)) = self.types.and_then(|t| t.output(o)) {
            return Some(*t);
        }
        let g = self.graph;
        let p = g.node(o.node);
        if let Some(f) = g.library.function(&p.op) {
            return f.signature.outputs.get(o.port as usize).and_then(|a| a.dtype);
        }
        // Registry ops and calls typed by `Tout` (attr_output_dtypes covers both), then `dtypes` lists.
        if let Some(ts) = autoclust_graph::infer::attr_output_dtypes(p) {
            return ts.get(o.port as usize).copied();
        }
        match p.attr("dtypes") {
            Some(AttrValue::List(ListValue::Type(ts))) => ts.get(o.port as usize).copied(),
            _ => None,
        }
    }

    /// A guess at the dtype of an output of an op nobody knows, from its
    /// attributes (output-type attributes first: `T` is usually an *input's*
    /// type — `Where` has `T = bool` and int64 outputs). Used last, after the
    /// consumer's own signature; a wrong guess makes the compiler decline the
    /// body (the `_Arg` does not match its input), never a wrong result.
    fn guessed_dtype(&self, o: Output) -> Option<DType> {
        let p = self.graph.node(o.node);
        ["out_type", "DstT", "Tout", "dtype", "T", "Tparams"]
            .iter()
            .find_map(|a| p.attr(a).and_then(AttrValue::as_type))
    }

    /// How many outputs of a member are referenced (at least 1 for body values).
    fn output_count(&self, n: NodeId) -> u32 {
        let from_types = self.types.map(|t| t.outputs(n).len() as u32).unwrap_or(0);
        from_types.max(self.ports_used[n.index()]).max(1)
    }
}

fn arg_def(name: &str, dtype: DType) -> ArgDef {
    ArgDef { name: name.into(), dtype: Some(dtype), ..ArgDef::default() }
}

/// The current SSA value of a variable; the first read before any write
/// creates the snapshot argument `v_ssa_0`.
fn read(vars: &mut [Variable], body: &mut Body, v: usize) -> String {
    if let Some(cur) = &vars[v].current {
        return cur.clone();
    }
    let name = body.fresh(&format!("{}_ssa_0", vars[v].base));
    vars[v].next_ssa = 1;
    vars[v].snapshot_arg = Some(body.snapshot_args.len());
    body.snapshot_args.push((v, name.clone()));
    vars[v].current = Some(name.clone());
    name
}

/// The variable's name as the runtime reports it: the handle's `shared_name`, else its node name.
fn variable_name(graph: &Graph, var: &Variable) -> String {
    let h = graph.node(var.handle_node);
    h.attr("shared_name").and_then(AttrValue::as_str).filter(|s| !s.is_empty()).unwrap_or(&h.name).to_string()
}

/// `_AutoclustSameShape(value, current)`, named after the user's write `node` (which has no
/// body node of its own) so a failure names it; returns the checked value's reference.
fn same_shape_check(
    body: &mut Body,
    node: &autoclust_graph::Node,
    value: String,
    current: String,
    dtype: DType,
    var: &str,
) -> String {
    // Members' names are reserved in `body.taken`, and a write has no other body node
    // under its own name.
    let name = node.name.clone();
    let a = attrs(&[
        ("T", AttrValue::Type(dtype)),
        ("variable", AttrValue::S(var.as_bytes().to_vec())),
        (autoclust_graph::ORIGIN_OP_ATTR, AttrValue::S(node.op.as_bytes().to_vec())),
    ]);
    body.push(name, autoclust_graph::protocol::SAME_SHAPE_OP, vec![value, current], a)
}

/// The attributes of the pure `TensorScatter*` standing for the user's scatter `node`: its
/// types, and the user's op and node ([`autoclust_graph::ORIGIN_OP_ATTR`],
/// [`autoclust_graph::protocol::ORIGIN_NODE_ATTR`]) — the write is named as the variable's
/// SSA value, and a failure must name the scatter the user wrote, and keep its contract (a
/// `ResourceScatter*` takes a scalar update, the pure op does not).
fn scatter_attrs(node: &autoclust_graph::Node, dtype: DType, tindices: AttrValue) -> Attrs {
    attrs(&[
        ("T", AttrValue::Type(dtype)),
        ("Tindices", tindices),
        (autoclust_graph::ORIGIN_OP_ATTR, AttrValue::S(node.op.as_bytes().to_vec())),
        (autoclust_graph::protocol::ORIGIN_NODE_ATTR, AttrValue::S(node.name.as_bytes().to_vec())),
    ])
}

/// A new SSA value `v_ssa_k = op(inputs)` of a variable; returns its reference.
fn write(vars: &mut [Variable], body: &mut Body, v: usize, op: &str, inputs: Vec<String>, a: Attrs) -> String {
    let k = vars[v].next_ssa;
    vars[v].next_ssa = k + 1;
    let r = body.op(&format!("{}_ssa_{k}", vars[v].base), op, inputs, a);
    vars[v].current = Some(r.clone());
    vars[v].written = true;
    r
}

/// `node` in the rewritten graph with `inputs`, the pipeline's own annotations dropped.
fn copied(node: &autoclust_graph::Node, inputs: Vec<String>) -> RawNode {
    let mut a = node.attrs.clone();
    a.remove(CLUSTER_ATTR);
    a.remove(KEEP_NAME_ATTR);
    RawNode {
        name: node.name.clone(),
        op: node.op.clone(),
        inputs,
        attrs: a,
        device: node.device.clone(),
        span: node.span,
    }
}

/// Builds the rewritten graph from the lowered clusters.
fn rebuild(
    graph: &Graph,
    lowered: &[Option<Lowered>],
    of_node: &[Option<usize>],
    declustered: Vec<Declustered>,
) -> Result<Encapsulated, EncapsulateError> {
    let mut taken: HashSet<String> = graph.nodes().iter().map(|n| n.name.clone()).collect();
    struct Names {
        snapshot: Option<String>,
        call: String,
        write_back: Option<String>,
        /// The `NoOp` waiting for the guards of a cluster that writes nothing.
        guarded_exit: Option<String>,
        /// Member output → call port.
        out_port: HashMap<Output, u32>,
    }
    let mut names: Vec<Option<Names>> = Vec::with_capacity(lowered.len());
    for l in lowered {
        names.push(l.as_ref().map(|l| {
            let call = fresh_name(&l.spec.name, &mut taken);
            let snapshot =
                (!l.snapshot_vars.is_empty()).then(|| fresh_name(&format!("{}_snapshot", l.spec.name), &mut taken));
            let write_back =
                (!l.written_vars.is_empty()).then(|| fresh_name(&format!("{}_write_back", l.spec.name), &mut taken));
            let guarded_exit = (write_back.is_none() && !l.guards.is_empty())
                .then(|| fresh_name(&format!("{}_exit", l.spec.name), &mut taken));
            let out_port = l.external_outputs.iter().enumerate().map(|(i, o)| (*o, i as u32)).collect();
            Names { snapshot, call, write_back, guarded_exit, out_port }
        }));
    }
    let exit = |ci: usize| -> String {
        let n = names[ci].as_ref().expect("encapsulated");
        n.write_back.clone().or_else(|| n.guarded_exit.clone()).unwrap_or_else(|| n.call.clone())
    };
    // A data value as an input string of the rewritten graph.
    let value = |o: Output| -> String {
        match of_node[o.node.index()] {
            Some(ci) => {
                let n = names[ci].as_ref().expect("encapsulated");
                let port = n.out_port[&o];
                if port == 0 {
                    n.call.clone()
                } else {
                    format!("{}:{port}", n.call)
                }
            }
            None => graph.output_name(o),
        }
    };
    // Members a write or a guard of their cluster reaches (itself included): what follows
    // them waits for the cluster's exit; what follows only other members waits for the call
    // (module doc, "Re-attached edges").
    let mut after_effect = vec![false; graph.len()];
    for l in lowered.iter().flatten() {
        for &m in &l.spec.nodes {
            let node = graph.node(m);
            let effect = is_guard(&node.op) || resource_kind(node, &graph.library).is_some_and(ResourceKind::writes);
            let reached = node
                .inputs
                .iter()
                .map(|o| o.node)
                .chain(node.control_inputs.iter().copied())
                .any(|p| of_node[p.index()] == of_node[m.index()] && after_effect[p.index()]);
            after_effect[m.index()] = effect || reached;
        }
    }
    let call_of = |ci: usize| -> String { names[ci].as_ref().expect("encapsulated").call.clone() };
    // The exit a consumer of member output `o` waits for beside the call it reads (`None`: the
    // call alone), unless `o` is of cluster `own`.
    let exit_for_data = |o: Output, own: Option<usize>| -> Option<String> {
        let ci = of_node[o.node.index()].filter(|&ci| Some(ci) != own)?;
        (after_effect[o.node.index()] && exit(ci) != call_of(ci)).then(|| exit(ci))
    };
    // The node standing for `p` in ordering constraints.
    let stand_in = |p: NodeId| -> String {
        match of_node[p.index()] {
            Some(ci) if after_effect[p.index()] => exit(ci),
            Some(ci) => call_of(ci),
            None => graph.name(p).to_string(),
        }
    };

    let mut raw: Vec<RawNode> = Vec::with_capacity(graph.len());
    let mut emitted = vec![false; lowered.len()];
    let mut library = graph.library.clone();
    let mut bridges = Vec::new();
    for id in graph.node_ids() {
        let node = graph.node(id);
        if let Some(ci) = of_node[id.index()] {
            if std::mem::replace(&mut emitted[ci], true) {
                continue;
            }
            let l = lowered[ci].as_ref().expect("encapsulated");
            let n = names[ci].as_ref().expect("encapsulated");
            let cluster_attr = ("cluster", AttrValue::S(l.spec.name.clone().into_bytes()));
            let mut controls: Vec<String> = Vec::new();
            for &d in &l.deps {
                let s = format!("^{}", stand_in(d));
                if !controls.contains(&s) {
                    controls.push(s);
                }
            }
            let mut call_inputs: Vec<String> = Vec::new();
            if let Some(snap) = &n.snapshot {
                let inputs =
                    l.snapshot_vars.iter().map(|&v| graph.output_name(l.vars[v].handle)).chain(controls.drain(..));
                let dtypes = l.snapshot_vars.iter().map(|&v| l.vars[v].dtype).collect();
                raw.push(RawNode {
                    name: snap.clone(),
                    op: SNAPSHOT_OP.into(),
                    inputs: inputs.collect(),
                    attrs: attrs(&[cluster_attr.clone(), ("dtypes", AttrValue::List(ListValue::Type(dtypes)))]),
                    device: String::new(),
                    span: None,
                });
                call_inputs.extend((0..l.snapshot_vars.len()).map(|i| {
                    if i == 0 {
                        snap.clone()
                    } else {
                        format!("{snap}:{i}")
                    }
                }));
            }
            call_inputs.extend(l.external_inputs.iter().map(|&o| value(o)));
            // Without a snapshot, the call itself waits for the dependencies.
            controls.retain(|c| !call_inputs.iter().any(|i| i.split(':').next() == Some(&c[1..])));
            call_inputs.extend(controls);
            let mut call_attrs = Attrs::new();
            if l.output_shapes.iter().any(|s| s.dims.is_some()) {
                call_attrs.insert("_output_shapes".into(), AttrValue::List(ListValue::Shape(l.output_shapes.clone())));
            }
            raw.push(RawNode {
                name: n.call.clone(),
                op: l.function.signature.name.clone(),
                inputs: call_inputs,
                attrs: call_attrs,
                device: String::new(),
                span: None,
            });
            // The guards, on the call's outputs; the exit waits for them.
            let mut guard_controls: Vec<String> = Vec::new();
            for &gid in &l.guards {
                let node = graph.node(gid);
                let mut inputs: Vec<String> = node.inputs.iter().map(|&o| value(o)).collect();
                let mut controls = vec![format!("^{}", n.call)];
                controls
                    .extend(node.inputs.iter().filter_map(|&o| exit_for_data(o, Some(ci))).map(|e| format!("^{e}")));
                for &c in &node.control_inputs {
                    if of_node[c.index()] != Some(ci) {
                        controls.push(format!("^{}", stand_in(c)));
                    }
                }
                controls.dedup();
                for c in controls {
                    if !inputs.contains(&c) {
                        inputs.push(c);
                    }
                }
                raw.push(copied(node, inputs));
                guard_controls.push(format!("^{}", node.name));
            }
            if let Some(exit) = &n.guarded_exit {
                raw.push(RawNode {
                    name: exit.clone(),
                    op: "NoOp".into(),
                    inputs: guard_controls.clone(),
                    attrs: attrs(std::slice::from_ref(&cluster_attr)),
                    device: String::new(),
                    span: None,
                });
            }
            if let Some(wb) = &n.write_back {
                let first = l.external_outputs.len();
                let inputs = l
                    .written_vars
                    .iter()
                    .map(|&v| graph.output_name(l.vars[v].handle))
                    .chain((0..l.written_vars.len()).map(|i| {
                        let port = first + i;
                        if port == 0 {
                            n.call.clone()
                        } else {
                            format!("{}:{port}", n.call)
                        }
                    }))
                    .chain(guard_controls.iter().cloned())
                    .collect();
                let dtypes = l.written_vars.iter().map(|&v| l.vars[v].dtype).collect();
                raw.push(RawNode {
                    name: wb.clone(),
                    op: WRITE_BACK_OP.into(),
                    inputs,
                    attrs: attrs(&[cluster_attr, ("dtypes", AttrValue::List(ListValue::Type(dtypes)))]),
                    device: String::new(),
                    span: None,
                });
            }
            // Sinks keep their names: an `Identity` (`IdentityN`) of the call's outputs, or a
            // `NoOp`, waiting for the exit when a write or a guard reaches them.
            for (sink, dtypes) in &l.sinks {
                let waits_for = stand_in(*sink);
                let (op, t) = match dtypes.len() {
                    0 => ("NoOp", None),
                    1 => ("Identity", Some(AttrValue::Type(dtypes[0]))),
                    _ => ("IdentityN", Some(AttrValue::List(ListValue::Type(dtypes.clone())))),
                };
                let mut inputs: Vec<String> =
                    (0..dtypes.len() as u32).map(|port| value(Output { node: *sink, port })).collect();
                if waits_for != n.call || dtypes.is_empty() {
                    inputs.push(format!("^{waits_for}"));
                }
                let member = graph.node(*sink);
                let mut a = t.map(|t| attrs(&[("T", t)])).unwrap_or_default();
                let mut op = op.to_string();
                // An update op that returned a TF1 reference (`REF_OUTPUT_ATTR`): its stand-in is
                // the variable's handle after the write-back, so a fetch still reads the variable.
                if let (Some(r), true, Some(h)) =
                    (member.attrs.get(REF_OUTPUT_ATTR), dtypes.is_empty(), member.inputs.first())
                {
                    op = "Identity".into();
                    inputs.insert(0, value(*h));
                    a = attrs(&[("T", AttrValue::Type(DType::Resource)), (REF_OUTPUT_ATTR, r.clone())]);
                }
                raw.push(RawNode {
                    name: graph.name(*sink).to_string(),
                    op,
                    inputs,
                    attrs: a,
                    device: String::new(),
                    span: member.span,
                });
            }
            library.functions_mut().push(l.function.clone());
            bridges.push(Bridge {
                cluster: l.spec.name.clone(),
                function: l.function.signature.name.clone(),
                snapshot: n.snapshot.clone(),
                call: n.call.clone(),
                write_back: n.write_back.clone(),
            });
            continue;
        }
        // A plain node: inputs from clusters come from calls, and it waits for their exits.
        let mut inputs: Vec<String> = node.inputs.iter().map(|&o| value(o)).collect();
        let mut controls: Vec<String> = Vec::new();
        let push_control = |s: String, controls: &mut Vec<String>| {
            let c = format!("^{s}");
            if !controls.contains(&c) {
                controls.push(c);
            }
        };
        for &o in &node.inputs {
            if let Some(e) = exit_for_data(o, None) {
                push_control(e, &mut controls);
            }
        }
        for &c in &node.control_inputs {
            push_control(stand_in(c), &mut controls);
        }
        inputs.extend(controls);
        raw.push(copied(node, inputs));
    }
    let out = Graph::from_raw(raw, library, graph.versions.clone())?;
    if let Err(source) = out.topo_order() {
        let cluster = bridges.first().map(|b| b.cluster.clone()).unwrap_or_default();
        return Err(EncapsulateError::CycleAfterRewrite { cluster, source });
    }
    Ok(Encapsulated { graph: out, bridges, declustered })
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoclust_graph::Library;

    fn raw(name: &str, op: &str, inputs: &[&str], a: Attrs) -> RawNode {
        RawNode {
            name: name.into(),
            op: op.into(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            attrs: a,
            device: String::new(),
            span: None,
        }
    }
    fn var(name: &str, shared: &str) -> RawNode {
        raw(
            name,
            "VarHandleOp",
            &[],
            attrs(&[
                ("dtype", AttrValue::Type(DType::Float32)),
                ("shared_name", AttrValue::S(shared.as_bytes().to_vec())),
                ("container", AttrValue::S(vec![])),
            ]),
        )
    }
    fn dt() -> Attrs {
        attrs(&[("dtype", AttrValue::Type(DType::Float32))])
    }
    fn konst(name: &str, x: f32) -> RawNode {
        raw(
            name,
            "Const",
            &[],
            attrs(&[("dtype", AttrValue::Type(DType::Float32)), ("value", AttrValue::Tensor(Tensor::scalar_f32(x)))]),
        )
    }

    /// Seed 001's worked example, everything but the handles in one cluster.
    fn seed_001() -> (Graph, Vec<ClusterSpec>) {
        let g = Graph::from_raw(
            vec![
                var("v0", "var_0"),
                var("v1", "var_1"),
                raw("r0", "ReadVariableOp", &["v0"], dt()),
                konst("c42", 42.0),
                raw("a0", "AssignVariableOp", &["v0", "c42", "^r0"], dt()),
                raw("r1", "ReadVariableOp", &["v0", "^a0"], dt()),
                konst("one", 1.0),
                raw("r2", "AddV2", &["r1", "one"], t_attr(DType::Float32)),
                raw("a1", "AssignVariableOp", &["v0", "r2"], dt()),
                raw("a2", "AssignVariableOp", &["v1", "r0", "^a1"], dt()),
            ],
            Library::default(),
            None,
        )
        .unwrap();
        let nodes = ["r0", "c42", "a0", "r1", "one", "r2", "a1", "a2"].iter().map(|n| g.find(n).unwrap()).collect();
        (g, vec![ClusterSpec { name: "cluster_0".into(), nodes }])
    }

    fn body_line(f: &FunctionDef, name: &str) -> String {
        let n = f.nodes.iter().find(|n| n.name == name).unwrap_or_else(|| panic!("no body node {name}"));
        format!("{} = {}({})", n.name, n.op, n.inputs.join(", "))
    }

    #[test]
    fn seed_001_comes_out_as_the_seed_table() {
        let (g, specs) = seed_001();
        let e = encapsulate(&g, &specs).unwrap();
        let f = e.graph.library.function("cluster_0_fn").unwrap();
        let inputs: Vec<&str> = f.signature.inputs.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(inputs, ["v0_ssa_0"]);
        assert_eq!(body_line(f, "r0"), "r0 = Identity(v0_ssa_0)");
        assert_eq!(body_line(f, "v0_ssa_1"), "v0_ssa_1 = Identity(c42:0)");
        assert_eq!(body_line(f, "r1"), "r1 = Identity(v0_ssa_1:0)");
        assert_eq!(body_line(f, "r2"), "r2 = AddV2(r1:0, one:0)");
        assert_eq!(body_line(f, "v0_ssa_2"), "v0_ssa_2 = Identity(r2:0)");
        assert_eq!(body_line(f, "v1_ssa_0"), "v1_ssa_0 = Identity(r0:0)");
        assert_eq!(f.ret, vec![("v0_ssa_2".into(), "v0_ssa_2:0".into()), ("v1_ssa_0".into(), "v1_ssa_0:0".into())]);
        let raw = e.graph.to_raw();
        let line = |name: &str| {
            let n = raw.iter().find(|n| n.name == name).unwrap();
            format!("{} = {}({})", n.name, n.op, n.inputs.join(", "))
        };
        assert_eq!(line("cluster_0_snapshot"), "cluster_0_snapshot = _AutoclustSnapshot(v0)");
        assert_eq!(line("cluster_0"), "cluster_0 = cluster_0_fn(cluster_0_snapshot)");
        assert_eq!(
            line("cluster_0_write_back"),
            "cluster_0_write_back = _AutoclustWriteBack(v0, v1, cluster_0, cluster_0:1)"
        );
        // The one member nothing consumes, the last write, keeps its name (module doc, "Sinks").
        assert_eq!(line("a2"), "a2 = NoOp(^cluster_0_write_back)");
        assert_eq!(e.graph.len(), 6);
        // The body instantiates into a runnable graph.
        let body = autoclust_graph::function::instantiate(f, &e.graph.library).unwrap();
        assert!(body.topo_order().is_ok());
    }

    #[test]
    fn the_call_records_its_output_shapes_and_the_snapshot_is_typed() {
        let shape = |d: &[i64]| AttrValue::Shape(Shape::with_dims(d.iter().map(|&x| Some(x)).collect()));
        let mut v0 = var("v0", "var_0");
        v0.attrs.insert("shape".into(), shape(&[3]));
        let five = Tensor::from_f32(vec![5], vec![1.0; 5]).unwrap();
        let g = Graph::from_raw(
            vec![
                v0,
                raw("r0", "ReadVariableOp", &["v0"], dt()),
                raw("n", "Neg", &["r0"], t_attr(DType::Float32)),
                raw(
                    "c",
                    "Const",
                    &[],
                    attrs(&[("dtype", AttrValue::Type(DType::Float32)), ("value", AttrValue::Tensor(five))]),
                ),
                raw("a", "AssignVariableOp", &["v0", "c", "^r0"], dt()),
                raw("use", "Identity", &["n"], t_attr(DType::Float32)),
            ],
            Library::default(),
            None,
        )
        .unwrap();
        let nodes = ["r0", "n", "c", "a"].iter().map(|n| g.find(n).unwrap()).collect();
        let e = encapsulate(&g, &[ClusterSpec { name: "cluster_0".into(), nodes }]).unwrap();
        let call = e.graph.node(e.graph.find("cluster_0").unwrap());
        // The external output `n` keeps the variable's shape; the written value is the new one.
        assert_eq!(
            call.attr("_output_shapes"),
            Some(&AttrValue::List(ListValue::Shape(vec![
                Shape::with_dims(vec![Some(3)]),
                Shape::with_dims(vec![Some(5)])
            ])))
        );
        let types = autoclust_graph::infer::infer(&e.graph).unwrap();
        let snapshot = e.graph.find("cluster_0_snapshot").unwrap();
        assert_eq!(types.outputs(snapshot), [(DType::Float32, Shape::with_dims(vec![Some(3)]))]);
        let use_ = e.graph.find("use").unwrap();
        assert_eq!(types.outputs(use_), [(DType::Float32, Shape::with_dims(vec![Some(3)]))]);
    }

    #[test]
    fn edges_are_reattached_to_snapshot_call_and_write_back() {
        let (mut nodes, _) = (seed_001().0.to_raw(), ());
        nodes.push(raw("x", "Placeholder", &[], dt()));
        nodes.push(raw("before", "NoOp", &[], Attrs::new()));
        nodes.push(raw("m", "Mul", &["r2", "x", "^before"], t_attr(DType::Float32)));
        nodes.push(raw("after", "ReadVariableOp", &["v0", "^a2"], dt()));
        nodes.push(raw("use", "Neg", &["m"], t_attr(DType::Float32)));
        let g = Graph::from_raw(nodes, Library::default(), None).unwrap();
        let members =
            ["r0", "c42", "a0", "r1", "one", "r2", "a1", "a2", "m"].iter().map(|n| g.find(n).unwrap()).collect();
        let e = encapsulate(&g, &[ClusterSpec { name: "cluster_0".into(), nodes: members }]).unwrap();
        let raw = e.graph.to_raw();
        let inputs = |name: &str| raw.iter().find(|n| n.name == name).unwrap().inputs.join(", ");
        assert_eq!(inputs("cluster_0_snapshot"), "v0, ^x, ^before");
        assert_eq!(inputs("cluster_0"), "cluster_0_snapshot, x");
        assert_eq!(inputs("cluster_0_write_back"), "v0, v1, cluster_0:1, cluster_0:2");
        assert_eq!(inputs("after"), "v0, ^cluster_0_write_back");
        assert_eq!(inputs("use"), "cluster_0, ^cluster_0_write_back");
    }

    #[test]
    fn read_modify_write_ops_expand_to_read_compute_write() {
        let g = Graph::from_raw(
            vec![
                var("v", "v"),
                konst("d", 2.0),
                raw("inc", "AssignAddVariableOp", &["v", "d"], dt()),
                konst("lr", 0.5),
                raw("sgd", "ResourceApplyGradientDescent", &["v", "lr", "d"], t_attr(DType::Float32)),
            ],
            Library::default(),
            None,
        )
        .unwrap();
        let nodes = ["d", "inc", "lr", "sgd"].iter().map(|n| g.find(n).unwrap()).collect();
        let e = encapsulate(&g, &[ClusterSpec { name: "c".into(), nodes }]).unwrap();
        let f = e.graph.library.function("c_fn").unwrap();
        // The delta is checked to have the variable's shape (named after the user's node).
        assert_eq!(body_line(f, "inc"), "inc = _AutoclustSameShape(d:0, v_ssa_0)");
        assert_eq!(body_line(f, "v_ssa_1"), "v_ssa_1 = AddV2(v_ssa_0, inc:0)");
        assert_eq!(body_line(f, "sgd/step"), "sgd/step = Mul(lr:0, d:0)");
        assert_eq!(body_line(f, "v_ssa_2"), "v_ssa_2 = Sub(v_ssa_1:0, sgd/step:0)");
        assert_eq!(f.ret, vec![("v_ssa_2".into(), "v_ssa_2:0".into())]);
    }

    #[test]
    fn one_variable_through_two_handles_is_declustered() {
        let g = Graph::from_raw(
            vec![
                var("h1", "shared"),
                var("h2", "shared"),
                raw("r", "ReadVariableOp", &["h1"], dt()),
                raw("w", "AssignVariableOp", &["h2", "r"], dt()),
            ],
            Library::default(),
            None,
        )
        .unwrap();
        let nodes = vec![g.find("r").unwrap(), g.find("w").unwrap()];
        let e = encapsulate(&g, &[ClusterSpec { name: "cluster_0".into(), nodes }]).unwrap();
        assert_eq!(
            e.declustered,
            vec![Declustered {
                cluster: "cluster_0".into(),
                variable: "/shared".into(),
                handles: ("h1".into(), "h2".into())
            }]
        );
        assert_eq!(e.graph.to_raw(), g.to_raw());
        assert!(e.graph.library.functions.is_empty());
    }

    #[test]
    fn calls_inside_a_cluster_are_an_error() {
        let g = Graph::from_raw(
            vec![
                konst("a", 1.0),
                raw(
                    "c",
                    "SomeFn",
                    &["a"],
                    attrs(&[(
                        "f",
                        AttrValue::Func(autoclust_graph::FuncAttr { name: "x".into(), attrs: Default::default() }),
                    )]),
                ),
            ],
            Library::default(),
            None,
        )
        .unwrap();
        let e = encapsulate(&g, &[ClusterSpec { name: "k".into(), nodes: vec![NodeId(0), NodeId(1)] }]).unwrap_err();
        assert_eq!(e.to_string(), "node 'c': SomeFn cannot be encapsulated (no pure equivalent)");
    }
}
