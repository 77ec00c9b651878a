//! The model: a graph turned into the atomic *steps* of seeds 000 and 002.
//!
//! Seed 000 (the resource-variable concurrency RFC) says a graph behaves as
//! if its operation instances ran in some total order consistent with its
//! data and control edges, each variable read and write atomic, and each
//! read-modify-write op split into a read, a pure compute and a write. Seed
//! 002 (Abadi, Isard, Murray) gives the same operational semantics with an
//! atomic `Assign-f`. Only accesses to variables can observe the order, so a
//! [`Program`] keeps just those as steps:
//!
//! - a read (`ReadVariableOp`, `VarIsInitializedOp`, `VariableShape`) or a
//!   write (`AssignVariableOp`) is one step;
//! - a read-modify-write (`AssignAdd/SubVariableOp`,
//!   `ResourceApplyGradientDescent`) is two steps, read then write
//!   ([`Rmw::Split`], seed 000), or one ([`Rmw::Atomic`], seed 002's `Assign-f`,
//!   what the plain executor does);
//! - the indexed ops (`ResourceGather`/`ResourceGatherNd` reads, `ResourceScatter*` and
//!   `ResourceScatterNd*` read-modify-writes of one variable) and the optimizers' fused
//!   ops (`ResourceApply*`, `ResourceSparseApply*`: a read-modify-write of the parameter
//!   and every slot at once) likewise, their values computed by the interpreter's own
//!   kernels ([`crate::eval::resource_kernel`]); see [`AccessOp::Apply`] for why a
//!   multi-variable op reads all its variables in one step;
//! - a cluster of the auto-clustered program (seed 001) is a snapshot step
//!   that reads every variable its members read, then a write-back step that
//!   writes the final SSA value of every variable its members write; its
//!   members' values are computed, in SSA form, between the two.
//!
//! Pure ops are not steps: their values are functions of the values the
//! steps read, computed when needed ([`crate::explore`]). A step's ordering
//! dependencies are the steps reachable backwards over data and control
//! edges through pure nodes — exactly the constraints a total order of all
//! nodes imposes on the accesses.

use std::collections::{HashMap, HashSet};

use autoclust_graph::{effects, DType, Graph, NodeId, Output, RawNode};

use crate::SemanticsError;

/// Index of a variable in [`Program::vars`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VarId(pub u32);

/// Index of a step in [`Program::steps`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StepId(pub u32);

/// A resource variable: one `(container, shared_name)` pair, however many
/// `VarHandleOp` nodes name it.
#[derive(Clone, Debug, PartialEq)]
pub struct Variable {
    /// docs/contract.md §3: the `shared_name`, or the handle's node name when
    /// empty; prefixed `container/` outside the default container.
    pub name: String,
    pub container: String,
    pub dtype: Option<DType>,
    /// The first handle node naming it (for error messages).
    pub handle: NodeId,
    /// A resource variable, or a container the run creates (not part of the outcome).
    pub kind: VarKind,
}

/// What a [`Variable`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarKind {
    /// A resource variable (`VarHandleOp`): given by the inputs, part of the outcome.
    Resource,
    /// A TensorFlow 1 stack (`StackV2`, while-loop gradients): created empty by the run,
    /// pushed and popped atomically.
    Stack,
    /// A TensorFlow 1 tensor array (`TensorArrayV3`: `dynamic_rnn`, `map_fn`), created by
    /// its `TensorArrayV3` step; `dynamic`: writes past its end grow it.
    TensorArray { dynamic: bool },
    /// The gradient array of a tensor array for one `source` (`TensorArrayGradV3`): created
    /// by the first such op to run, with its forward array's size; writes to one index add.
    GradientArray,
}

impl VarKind {
    /// Whether the variable is a container the run creates (not part of the outcome).
    pub fn is_container(self) -> bool {
        self != VarKind::Resource
    }
}

/// How read-modify-write ops are modelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Rmw {
    /// Read, compute, write as separate steps (seed 000).
    #[default]
    Split,
    /// One atomic step (seed 002's `Assign-f`; the plain executor).
    Atomic,
}

/// What a modelled resource op does to its variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessOp {
    /// `ReadVariableOp`: output 0 is the value.
    Read,
    /// `VarIsInitializedOp`: output 0 is whether the variable holds a value.
    IsInitialized,
    /// `VariableShape`: output 0 is the value's shape (`out_type`, default int32).
    Shape,
    /// `AssignVariableOp(var, value)`.
    Assign,
    /// `AssignAddVariableOp(var, delta)`.
    AssignAdd,
    /// `AssignSubVariableOp(var, delta)`.
    AssignSub,
    /// `ResourceApplyGradientDescent(var, alpha, delta)`: `var -= alpha * delta`.
    ApplyGradientDescent,
    /// `StackPushV2(stack, elem)`: pushes `elem`, outputs it.
    StackPush,
    /// `StackPopV2(stack)`: pops the top element, outputs it.
    StackPop,
    /// `StackCloseV2(stack)`: nothing to model (the stack dies with the run).
    StackClose,
    /// `TensorArrayV3(size)`: creates the array (outputs a handle and a flow).
    TaCreate,
    /// `TensorArrayGradV3(array, flow)`: creates the gradient array (the access's variable)
    /// from its forward array ([`Access::source`]) unless it exists.
    TaGrad,
    /// `TensorArrayWriteV3(array, index, value, flow)`.
    TaWrite,
    /// `TensorArrayScatterV3(array, indices, value, flow)`.
    TaScatter,
    /// `TensorArrayReadV3(array, index, flow)`.
    TaRead,
    /// `TensorArrayGatherV3(array, indices, flow)`.
    TaGather,
    /// `TensorArraySizeV3(array, flow)`.
    TaSize,
    /// `TensorArrayConcatV3(array, flow)`: every element concatenated on axis 0, and their
    /// lengths.
    TaConcat,
    /// `TensorArraySplitV3(array, value, lengths, flow)`: `value` cut on axis 0 into the
    /// elements `0..`.
    TaSplit,
    /// `TensorArrayCloseV3(array)`: nothing to model.
    TaClose,
    /// `ResourceGather(var, indices)`, `ResourceGatherNd(var, indices)`: an indexed read,
    /// computed by the interpreter's kernel.
    Gather,
    /// `ResourceScatter{Add,Sub,Mul,Div,Min,Max,Update}(var, indices, updates)` and
    /// `ResourceScatterNd{Add,Sub,Update,Max,Min}` and `ResourceStridedSliceAssign`
    /// (`v[...].assign`): an indexed read-modify-write of one variable, computed by the
    /// interpreter's kernel.
    /// TensorFlow's kernels of these hold only a shared lock for numeric dtypes, so two of
    /// them may also tear each other row by row, which the model does not produce (the
    /// runtime locks them exclusively; docs/semantics.md, "Not modelled").
    Scatter,
    /// An optimizer's fused update, `ResourceApply*` / `ResourceSparseApply*` (all but
    /// `ResourceApplyGradientDescent`): a read-modify-write of the parameter and of every
    /// slot variable its handles name ([`Access::vars`]), computed by the interpreter's
    /// kernel.
    ///
    /// Under [`Rmw::Split`] it is **one** read step reading every variable, the update, and
    /// **one** write step writing them all — not a read step per variable. TensorFlow's
    /// kernels (`training_ops.cc`) start with `MaybeLockVariableInputMutexesInOrder`,
    /// which for resource variables takes every variable's mutex, in address order, before
    /// reading any of them, whatever `use_locking` says (exclusively for dense ops and for
    /// sparse ops with `use_locking`; shared for sparse ops without it), and holds them
    /// until every write is done. So the values an op reads are always one consistent
    /// snapshot of its variables; separate reads would add torn snapshots (a new `m`
    /// with an old `v`) no TensorFlow run produces. Splitting the read from the write is
    /// seed 000's model, as for `AssignAdd`; [`Rmw::Atomic`] (one step) is the plain
    /// executor, which holds all the locks across the whole op. Not modelled: two sparse
    /// updates without `use_locking` that share a variable (TensorFlow's shared locks, the
    /// "Hogwild" mode) may interleave element by element; the split model gives them the
    /// lost updates of whole reads and writes, not element-level tearing.
    Apply,
    /// `RngReadAndSkip(generator_state, alg, delta)`: outputs the state and advances its
    /// counter (a read-modify-write of the int64 state variable, computed by the
    /// interpreter's kernel; split like `AssignAdd` under [`Rmw::Split`]); `RngSkip` and the
    /// stateful generators (`StatefulUniform`, `StatefulRandomBinomial`, …: a draw from the
    /// state, then the advance)
    /// alike.
    RngSkip,
}

impl AccessOp {
    fn of(op: &str) -> Option<AccessOp> {
        Some(match op {
            "ReadVariableOp" => AccessOp::Read,
            "VarIsInitializedOp" => AccessOp::IsInitialized,
            "VariableShape" => AccessOp::Shape,
            "AssignVariableOp" => AccessOp::Assign,
            "AssignAddVariableOp" => AccessOp::AssignAdd,
            "AssignSubVariableOp" => AccessOp::AssignSub,
            "ResourceApplyGradientDescent" => AccessOp::ApplyGradientDescent,
            "StackPushV2" => AccessOp::StackPush,
            "StackPopV2" => AccessOp::StackPop,
            "StackCloseV2" => AccessOp::StackClose,
            "TensorArrayV3" => AccessOp::TaCreate,
            "TensorArrayGradV3" => AccessOp::TaGrad,
            "TensorArrayWriteV3" => AccessOp::TaWrite,
            "TensorArrayScatterV3" => AccessOp::TaScatter,
            "TensorArrayReadV3" => AccessOp::TaRead,
            "TensorArrayGatherV3" => AccessOp::TaGather,
            "TensorArraySizeV3" => AccessOp::TaSize,
            "TensorArrayConcatV3" => AccessOp::TaConcat,
            "TensorArraySplitV3" => AccessOp::TaSplit,
            "TensorArrayCloseV3" => AccessOp::TaClose,
            "ResourceGather" | "ResourceGatherNd" => AccessOp::Gather,
            "RngReadAndSkip"
            | "RngSkip"
            | "StatefulUniform"
            | "StatefulStandardNormalV2"
            | "StatefulTruncatedNormal"
            | "StatefulUniformInt"
            | "StatefulUniformFullInt"
            | "StatefulRandomBinomial" => AccessOp::RngSkip,
            // Only what the interpreter has a kernel for: the model runs that kernel.
            _ if !autoclust_runtime::kernels::resource::is_resource_op(op) => return None,
            _ if op.starts_with("ResourceScatter") || op == "ResourceStridedSliceAssign" => AccessOp::Scatter,
            _ if op.starts_with("ResourceApply") || op.starts_with("ResourceSparseApply") => AccessOp::Apply,
            _ => return None,
        })
    }
    /// Whether the op reads the variable's value.
    pub fn reads(self) -> bool {
        !matches!(self, AccessOp::Assign | AccessOp::StackClose | AccessOp::TaCreate | AccessOp::TaClose)
    }
    /// Whether the op writes the variable.
    pub fn writes(self) -> bool {
        matches!(
            self,
            AccessOp::Assign
                | AccessOp::AssignAdd
                | AccessOp::AssignSub
                | AccessOp::ApplyGradientDescent
                | AccessOp::StackPush
                | AccessOp::StackPop
                | AccessOp::TaCreate
                | AccessOp::TaGrad
                | AccessOp::TaWrite
                | AccessOp::TaScatter
                | AccessOp::TaSplit
                | AccessOp::Scatter
                | AccessOp::Apply
                | AccessOp::RngSkip
        )
    }
    /// Whether the op both reads and writes (a read-modify-write).
    pub fn is_rmw(self) -> bool {
        self.reads() && self.writes()
    }
    /// Whether the op is one atomic step even under [`Rmw::Split`]: a stack op holds its
    /// stack's lock (TensorFlow's `StackOp`), and seed 000's split is about variables.
    pub fn always_atomic(self) -> bool {
        !matches!(
            self,
            AccessOp::Read
                | AccessOp::IsInitialized
                | AccessOp::Shape
                | AccessOp::Assign
                | AccessOp::AssignAdd
                | AccessOp::AssignSub
                | AccessOp::ApplyGradientDescent
                | AccessOp::Gather
                | AccessOp::Scatter
                | AccessOp::Apply
                | AccessOp::RngSkip
        )
    }
    /// Whether the op's outputs and new values come from the interpreter's kernel of the
    /// node itself ([`crate::eval::resource_kernel`]), given its variables' values.
    pub fn runs_kernel(self) -> bool {
        matches!(self, AccessOp::Gather | AccessOp::Scatter | AccessOp::Apply | AccessOp::RngSkip)
    }
    /// Whether reading an uninitialised variable is fine (it observes that).
    pub fn tolerates_uninitialised(self) -> bool {
        matches!(self, AccessOp::IsInitialized)
    }
}

/// A resource op of the graph with its variable resolved.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Access {
    pub op: AccessOp,
    /// The variable of its first handle input.
    pub var: VarId,
    /// A second variable the op reads: a `TensorArrayGradV3`'s forward array.
    pub source: Option<VarId>,
    /// The variables of its further handle inputs, in input order: an optimizer's slots
    /// ([`AccessOp::Apply`]; at most three, `ResourceApplyCenteredRMSProp`'s).
    pub slots: [Option<VarId>; 3],
}

impl Access {
    /// Every variable the op reads or writes through its handles, in input order (`var`
    /// first). A variable passed twice appears twice.
    pub fn vars(&self) -> impl Iterator<Item = VarId> + '_ {
        std::iter::once(self.var).chain(self.slots.iter().flatten().copied())
    }
}

/// The inputs of resource op `op` that are variable handles (the registry's `resource`
/// arguments), in order; `[0]` for an op the registry does not know.
pub(crate) fn handle_slots(op: &str) -> Vec<usize> {
    match autoclust_graph::registry::lookup(op) {
        Some(schema) => schema.resource_inputs().collect(),
        None => vec![0],
    }
}

/// What a step does when it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// The whole resource op at once (reads, writes, and atomic RMWs).
    Whole { node: NodeId },
    /// The read half of a split read-modify-write.
    RmwRead { node: NodeId },
    /// The compute-and-write half of a split read-modify-write.
    RmwWrite { node: NodeId },
    /// A cluster's snapshot of the variables it reads, and its pure compute.
    Snapshot { cluster: usize },
    /// A cluster's write-back of the variables it writes.
    WriteBack { cluster: usize },
}

/// One atomic step of the program.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub kind: StepKind,
    /// Steps that must run first (direct dependencies only).
    pub deps: Vec<StepId>,
    /// Variables whose value the step reads.
    pub reads: Vec<VarId>,
    /// Variables the step writes.
    pub writes: Vec<VarId>,
}

/// A cluster of the clustered program, as given to [`Program::build`].
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterSpec {
    pub name: String,
    pub nodes: Vec<NodeId>,
}

/// A cluster as the model runs it.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterModel {
    pub name: String,
    /// Members in a topological order: the SSA order of its body.
    pub members: Vec<NodeId>,
    /// Variables some member reads (snapshotted at the start).
    pub reads: Vec<VarId>,
    /// Variables some member writes (written back at the end).
    pub writes: Vec<VarId>,
}

/// A graph as steps over variables.
#[derive(Debug)]
pub struct Program<'g> {
    pub graph: &'g Graph,
    pub vars: Vec<Variable>,
    /// Per node: the access it performs, for modelled resource ops.
    pub access: Vec<Option<Access>>,
    /// Per node: the cluster it belongs to.
    pub cluster_of: Vec<Option<usize>>,
    pub clusters: Vec<ClusterModel>,
    pub steps: Vec<Step>,
    /// Per step: the steps whose values it consumes (over data edges through pure nodes).
    pub value_sources: Vec<Vec<StepId>>,
    /// The steps whose values the fetches consume.
    pub fetch_sources: Vec<StepId>,
    pub fetches: Vec<Output>,
    /// Whether values may be dead (the graph has `Switch`/`Merge`/`ControlTrigger`): a step
    /// or pure node with a dead input is then dead, and a dead step accesses nothing.
    pub control_flow: bool,
    /// Bound sentinels of unrolled loops: each must be dead when the run ends.
    pub loop_bounds: Vec<LoopBound>,
    rmw: Rmw,
}

/// A loop unrolled to a bound ([`crate::unroll`]): `node` (a `NextIteration` of the last
/// iteration) is live only if the loop would go on past `max_iterations` iterations.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopBound {
    pub node: NodeId,
    /// The loop's frame name.
    pub frame: String,
    pub max_iterations: usize,
}

/// Keeps only what the fetches and targets need (TensorFlow's pruning; seed
/// 002: "the semantics applies after the graph-pruning process"). With
/// neither, the whole graph. Every `VarHandleOp` is kept. Returns the pruned graph and the fetches as
/// outputs of it.
pub fn prune(graph: &Graph, fetches: &[String], targets: &[String]) -> Result<(Graph, Vec<Output>), SemanticsError> {
    let lookup = |name: &str| graph.find(name).ok_or_else(|| SemanticsError::UnknownNode { name: name.to_string() });
    let mut fetch_outputs = Vec::new();
    for f in fetches {
        let (node, port) = match f.rsplit_once(':') {
            Some((n, p)) if p.bytes().all(|b| b.is_ascii_digit()) && !p.is_empty() => {
                (n, p.parse::<u32>().map_err(|_| SemanticsError::UnknownNode { name: f.clone() })?)
            }
            _ => (f.as_str(), 0),
        };
        fetch_outputs.push(Output { node: lookup(node)?, port });
    }
    let mut roots: Vec<NodeId> = fetch_outputs.iter().map(|o| o.node).collect();
    for t in targets {
        roots.push(lookup(t)?);
    }
    graph.topo_order()?;
    if roots.is_empty() {
        return Ok((graph.clone(), fetch_outputs));
    }
    // Variable handles are kept too (they have no inputs and no effect), so
    // every variable of the graph appears in the outcomes, as in `run`.
    roots.extend(graph.node_ids().filter(|&n| autoclust_graph::effects::names_variable(graph.node(n))));
    let mut keep = vec![false; graph.len()];
    while let Some(n) = roots.pop() {
        if !std::mem::replace(&mut keep[n.index()], true) {
            roots.extend(graph.predecessors(n));
        }
    }
    let raw: Vec<RawNode> = graph.to_raw().into_iter().zip(&keep).filter(|(_, k)| **k).map(|(r, _)| r).collect();
    let pruned = Graph::from_raw(raw, graph.library.clone(), graph.versions.clone())
        .expect("a pruned graph keeps every input of every kept node");
    let fetch_outputs = fetch_outputs
        .into_iter()
        .map(|o| Output { node: pruned.find(graph.name(o.node)).expect("fetches are kept"), port: o.port })
        .collect();
    Ok((pruned, fetch_outputs))
}

impl<'g> Program<'g> {
    /// Builds the steps of `graph` (already pruned). `clusters`, when given,
    /// are the clusters of the clustered program (seed 001's bridge).
    pub fn build(
        graph: &'g Graph,
        fetches: Vec<Output>,
        rmw: Rmw,
        clusters: Option<&[ClusterSpec]>,
    ) -> Result<Program<'g>, SemanticsError> {
        let _span = tracing::debug_span!("semantics_model", nodes = graph.len()).entered();
        // Loop frames must be unrolled into operation instances first (`crate::unroll`, which
        // `explore_graph` does): here each node fires exactly once.
        if let Some(n) = graph.nodes().iter().find(|n| crate::unroll::is_frame_op(&n.op)) {
            return Err(SemanticsError::Unsupported {
                node: n.name.clone(),
                op: n.op.clone(),
                why: "a loop frame's op: unroll the frames first (autoclust_semantics::unroll)".into(),
            });
        }
        // Dead values (`Switch`, `Merge`, seed 002) are tracked only when the graph has them.
        let control_flow = graph.nodes().iter().any(|n| effects::is_v1_control_flow(&n.op));
        let topo = graph.topo_order()?;
        let mut position = vec![0usize; graph.len()];
        for (i, n) in topo.iter().enumerate() {
            position[n.index()] = i;
        }
        let (vars, access) = resolve_accesses(graph)?;
        let mut cluster_of = vec![None; graph.len()];
        let mut cluster_models = Vec::new();
        for spec in clusters.unwrap_or(&[]) {
            let members: Vec<NodeId> = spec.nodes.iter().copied().filter(|n| n.index() < graph.len()).collect();
            if members.is_empty() {
                continue;
            }
            // The body's SSA order, exactly as the encapsulation pass builds it.
            let members = autoclust_passes::encapsulate::ssa_order(graph, &members, &position);
            let id = cluster_models.len();
            // The snapshot reads a variable only if the SSA order reads it
            // before writing it (like the bridge's `_AutoclustSnapshot`).
            let (mut reads, mut writes) = (Vec::new(), Vec::new());
            for &m in &members {
                cluster_of[m.index()] = Some(id);
                if let Some(a) = access[m.index()] {
                    for v in a.vars() {
                        if a.op.reads() && !writes.contains(&v) {
                            reads.push(v);
                        }
                    }
                    reads.extend(a.source.filter(|v| !writes.contains(v)));
                    if a.op.writes() {
                        writes.extend(a.vars());
                    }
                }
            }
            reads.sort();
            reads.dedup();
            writes.sort();
            writes.dedup();
            cluster_models.push(ClusterModel { name: spec.name.clone(), members, reads, writes });
        }

        // Steps: one or two per unclustered resource op, two per cluster.
        let mut steps: Vec<Step> = Vec::new();
        // The step after which a node counts as done, and the step producing its values.
        let mut done_step: Vec<Option<StepId>> = vec![None; graph.len()];
        let mut value_step: Vec<Option<StepId>> = vec![None; graph.len()];
        let push = |steps: &mut Vec<Step>, kind, reads: Vec<VarId>, writes: Vec<VarId>| {
            steps.push(Step { kind, deps: Vec::new(), reads, writes });
            StepId(steps.len() as u32 - 1)
        };
        let mut first_step: Vec<Option<StepId>> = vec![None; graph.len()];
        for &n in &topo {
            let Some(a) = access[n.index()] else { continue };
            if cluster_of[n.index()].is_some() {
                continue;
            }
            let mut reads: Vec<VarId> = if a.op.reads() { a.vars().collect() } else { vec![] };
            reads.extend(a.source);
            reads.sort();
            reads.dedup();
            let mut writes: Vec<VarId> = if a.op.writes() { a.vars().collect() } else { vec![] };
            writes.sort();
            writes.dedup();
            if a.op.is_rmw() && rmw == Rmw::Split && !a.op.always_atomic() {
                let r = push(&mut steps, StepKind::RmwRead { node: n }, reads, vec![]);
                let w = push(&mut steps, StepKind::RmwWrite { node: n }, vec![], writes);
                steps[w.0 as usize].deps.push(r);
                first_step[n.index()] = Some(r);
                done_step[n.index()] = Some(w);
            } else {
                let s = push(&mut steps, StepKind::Whole { node: n }, reads, writes);
                first_step[n.index()] = Some(s);
                done_step[n.index()] = Some(s);
                value_step[n.index()] = Some(s);
            }
        }
        let mut cluster_first = Vec::new();
        for (c, cm) in cluster_models.iter().enumerate() {
            let s = push(&mut steps, StepKind::Snapshot { cluster: c }, cm.reads.clone(), vec![]);
            let w = push(&mut steps, StepKind::WriteBack { cluster: c }, vec![], cm.writes.clone());
            steps[w.0 as usize].deps.push(s);
            cluster_first.push(s);
            for &m in &cm.members {
                done_step[m.index()] = Some(w);
                value_step[m.index()] = Some(s);
            }
        }

        // Ordering dependencies: walk back over data and control edges
        // through pure, unclustered nodes to the steps that complete nodes.
        let order_sources = |starts: &mut dyn Iterator<Item = NodeId>, skip_cluster: Option<usize>| {
            let mut seen = vec![false; graph.len()];
            let mut stack: Vec<NodeId> = starts.collect();
            let mut out = Vec::new();
            while let Some(n) = stack.pop() {
                for p in graph.predecessors(n) {
                    if std::mem::replace(&mut seen[p.index()], true) {
                        continue;
                    }
                    if skip_cluster.is_some() && cluster_of[p.index()] == skip_cluster {
                        continue;
                    }
                    match done_step[p.index()] {
                        Some(s) => out.push(s),
                        None => stack.push(p),
                    }
                }
            }
            out.sort();
            out.dedup();
            out
        };
        for &n in &topo {
            if let (Some(s), None) = (first_step[n.index()], cluster_of[n.index()]) {
                let deps = order_sources(&mut std::iter::once(n), None);
                steps[s.0 as usize].deps.extend(deps);
            }
        }
        for (c, cm) in cluster_models.iter().enumerate() {
            let deps = order_sources(&mut cm.members.iter().copied(), Some(c));
            steps[cluster_first[c].0 as usize].deps.extend(deps);
        }
        for s in &mut steps {
            s.deps.sort();
            s.deps.dedup();
        }

        // Value dependencies: over data edges only, through pure unclustered nodes. With
        // control flow, over control edges too: a control edge carries deadness, and the
        // deadness of a pure node can depend on a step's value (a `Switch` on what it read).
        let value_sources_of = |starts: &mut dyn Iterator<Item = NodeId>, skip_cluster: Option<usize>| {
            let mut seen = vec![false; graph.len()];
            let mut stack: Vec<NodeId> = starts.collect();
            let mut out = Vec::new();
            while let Some(n) = stack.pop() {
                let node = graph.node(n);
                let control: &[NodeId] = if control_flow { &node.control_inputs } else { &[] };
                for p in node.inputs.iter().map(|o| o.node).chain(control.iter().copied()) {
                    if std::mem::replace(&mut seen[p.index()], true) {
                        continue;
                    }
                    if skip_cluster.is_some() && cluster_of[p.index()] == skip_cluster {
                        continue;
                    }
                    match (value_step[p.index()], done_step[p.index()]) {
                        (Some(s), _) => out.push(s),
                        (None, Some(_)) => {}
                        (None, None) => stack.push(p),
                    }
                }
            }
            out.sort();
            out.dedup();
            out
        };
        let mut value_sources = Vec::with_capacity(steps.len());
        for s in &steps {
            value_sources.push(match s.kind {
                StepKind::Whole { node } | StepKind::RmwRead { node } | StepKind::RmwWrite { node } => {
                    value_sources_of(&mut std::iter::once(node), None)
                }
                StepKind::Snapshot { cluster } => {
                    value_sources_of(&mut cluster_models[cluster].members.iter().copied(), Some(cluster))
                }
                StepKind::WriteBack { .. } => Vec::new(),
            });
        }
        let mut fetch_sources = Vec::new();
        for o in &fetches {
            match value_step[o.node.index()] {
                Some(s) => fetch_sources.push(s),
                None => fetch_sources.extend(value_sources_of(&mut std::iter::once(o.node), None)),
            }
        }
        fetch_sources.sort();
        fetch_sources.dedup();
        tracing::debug!(steps = steps.len(), vars = vars.len(), "model built");
        Ok(Program {
            graph,
            vars,
            access,
            cluster_of,
            clusters: cluster_models,
            steps,
            value_sources,
            fetch_sources,
            fetches,
            control_flow,
            loop_bounds: Vec::new(),
            rmw,
        })
    }

    /// How read-modify-writes are modelled.
    pub fn rmw(&self) -> Rmw {
        self.rmw
    }

    /// A human-readable description of a step, for schedules.
    pub fn describe(&self, s: StepId) -> String {
        let step = &self.steps[s.0 as usize];
        let var_names =
            |vs: &[VarId]| vs.iter().map(|v| self.vars[v.0 as usize].name.as_str()).collect::<Vec<_>>().join(", ");
        let node_var = |n: NodeId| match self.access[n.index()] {
            Some(a) => a.vars().map(|v| self.vars[v.0 as usize].name.as_str()).collect::<Vec<_>>().join(", "),
            None => String::new(),
        };
        match step.kind {
            StepKind::Whole { node } => {
                let n = self.graph.node(node);
                format!("{} = {}({})", n.name, n.op, node_var(node))
            }
            StepKind::RmwRead { node } => {
                let n = self.graph.node(node);
                format!("{}: read {} ({} split)", n.name, node_var(node), n.op)
            }
            StepKind::RmwWrite { node } => {
                let n = self.graph.node(node);
                format!("{}: write {} ({} split)", n.name, node_var(node), n.op)
            }
            StepKind::Snapshot { cluster } => {
                let c = &self.clusters[cluster];
                format!("{}: snapshot-read [{}] and compute", c.name, var_names(&c.reads))
            }
            StepKind::WriteBack { cluster } => {
                let c = &self.clusters[cluster];
                format!("{}: write-back [{}]", c.name, var_names(&c.writes))
            }
        }
    }
}

/// Finds every variable and the access each resource op performs. A
/// resource op's variable is found statically: its input 0 traced back
/// through `Identity` to a `VarHandleOp`.
fn resolve_accesses(graph: &Graph) -> Result<(Vec<Variable>, Vec<Option<Access>>), SemanticsError> {
    let mut vars: Vec<Variable> = Vec::new();
    let mut by_key: HashMap<(String, String), VarId> = HashMap::new();
    let mut var_of_handle: Vec<Option<VarId>> = vec![None; graph.len()];
    for id in graph.node_ids() {
        let n = graph.node(id);
        // A `VarHandleOp`, or a resource `Placeholder` (a TensorFlow 2 function graph's
        // captured variable, named after its node as `run` names it).
        if !autoclust_graph::effects::names_variable(n) {
            continue;
        }
        let (container, name) = autoclust_graph::effects::resource_key(n);
        let (container, name) = (container.to_string(), name.to_string());
        let key = (container.clone(), name.clone());
        let v = *by_key.entry(key).or_insert_with(|| {
            vars.push(Variable {
                // As the session names it: `container/name` outside the default container.
                name: autoclust_graph::effects::variable_display_name(&container, &name),
                container,
                dtype: autoclust_graph::effects::variable_dtype(graph, id),
                handle: id,
                kind: VarKind::Resource,
            });
            VarId(vars.len() as u32 - 1)
        });
        var_of_handle[id.index()] = Some(v);
    }
    // Each `StackV2` and `TensorArrayV3` instance is a container of its own, named after
    // its node.
    for id in graph.node_ids() {
        let n = graph.node(id);
        let (kind, dtype) = match n.op.as_str() {
            "StackV2" => (VarKind::Stack, "elem_type"),
            "TensorArrayV3" => {
                let dynamic = n.attr("dynamic_size").and_then(|a| a.as_bool()).unwrap_or(false);
                (VarKind::TensorArray { dynamic }, "dtype")
            }
            _ => continue,
        };
        vars.push(Variable {
            name: n.name.clone(),
            container: String::new(),
            dtype: n.attr(dtype).and_then(|a| a.as_type()),
            handle: id,
            kind,
        });
        var_of_handle[id.index()] = Some(VarId(vars.len() as u32 - 1));
    }
    // The variable whose handle reaches output `start`: traced back through `Identity`,
    // `IdentityN` (port by port), the `Switch`es a cond passes a handle through, `Enter`,
    // `Exit`, `NextIteration`, and every input of a `Merge` (a lowered cond's or loop's: all
    // must name the same variable). The unrolled loops' `Enter`s, `NextIteration`s and
    // `Exit`s are `Identity`s and `Merge`s by now; the unroller's always-dead inputs name
    // nothing and are skipped. Two variables, or a source that is not a variable, is no answer.
    let handle_var_of = |start: Output, var_of_handle: &[Option<VarId>]| -> Option<VarId> {
        let mut found: Option<VarId> = None;
        let mut seen: HashSet<Output> = HashSet::new();
        let mut stack = vec![start];
        while let Some(o) = stack.pop() {
            if !seen.insert(o) {
                continue;
            }
            if let Some(v) = var_of_handle[o.node.index()] {
                if found.is_some_and(|f| f != v) {
                    return None;
                }
                found = Some(v);
                continue;
            }
            let hn = graph.node(o.node);
            match hn.op.as_str() {
                "Identity" | "RefIdentity" | "Switch" | "RefSwitch" | "Enter" | "RefEnter" | "Exit" | "RefExit"
                | "NextIteration" | "RefNextIteration" => stack.extend(hn.inputs.first().copied()),
                "IdentityN" => stack.extend(hn.inputs.get(o.port as usize).copied()),
                "Merge" | "RefMerge" if o.port == 0 => stack.extend(hn.inputs.iter().copied()),
                "Const" if crate::unroll::is_dead_sentinel(&hn.name) => {}
                _ => return None,
            }
        }
        found
    };
    let handle_var = |n: &autoclust_graph::Node, var_of_handle: &[Option<VarId>]| {
        n.inputs.first().and_then(|&o| handle_var_of(o, var_of_handle))
    };
    // A tensor array's gradient array per `source`: every `TensorArrayGradV3` of the same
    // array and source names the same one (TensorFlow looks it up by source).
    let mut grads: HashMap<(VarId, String), VarId> = HashMap::new();
    let mut grad_source: Vec<Option<VarId>> = vec![None; graph.len()];
    for id in graph.node_ids() {
        let n = graph.node(id);
        if n.op != "TensorArrayGradV3" {
            continue;
        }
        let forward =
            handle_var(n, &var_of_handle).ok_or_else(|| SemanticsError::UnknownVariable { node: n.name.clone() })?;
        let source = n.attr("source").and_then(|a| a.as_str()).unwrap_or("").to_string();
        let g = *grads.entry((forward, source.clone())).or_insert_with(|| {
            let f = &vars[forward.0 as usize];
            vars.push(Variable {
                name: format!("{}/grad:{source}", f.name),
                container: String::new(),
                dtype: f.dtype,
                handle: id,
                kind: VarKind::GradientArray,
            });
            VarId(vars.len() as u32 - 1)
        });
        var_of_handle[id.index()] = Some(g);
        grad_source[id.index()] = Some(forward);
    }
    let mut access = vec![None; graph.len()];
    for id in graph.node_ids() {
        let n = graph.node(id);
        if n.op == "StackV2" {
            continue;
        }
        if matches!(n.op.as_str(), "TensorArrayV3" | "TensorArrayGradV3") {
            let var = var_of_handle[id.index()].expect("a container of its own");
            let op = AccessOp::of(&n.op).expect("modelled");
            access[id.index()] = Some(Access { op, var, source: grad_source[id.index()], slots: [None; 3] });
            continue;
        }
        if matches!(n.op.as_str(), "VariableV2" | "Variable" | "TemporaryVariable") {
            return Err(SemanticsError::Unsupported {
                node: n.name.clone(),
                op: n.op.clone(),
                why: "a TensorFlow 1 reference variable: explore models resource variables (VarHandleOp)".into(),
            });
        }
        // A variable op outside TensorFlow's resource-op table (`ResourceCountUpTo`, TF1's
        // `count_up_to`): named here, not as its handle "used as a value" later.
        let op_name = n.op.as_str();
        if autoclust_runtime::kernels::resource::has_resource_kernel(op_name)
            && !autoclust_runtime::kernels::resource::is_resource_op(op_name)
        {
            return Err(SemanticsError::Unsupported {
                node: n.name.clone(),
                op: n.op.clone(),
                why: "a read-modify-write of a variable outside TensorFlow's resource-op table (TF1's count_up_to)"
                    .into(),
            });
        }
        let Some(kind) = effects::resource_kind(n, &graph.library) else { continue };
        let Some(op) = AccessOp::of(&n.op) else {
            let container = n.op.starts_with("Stack") || n.op.starts_with("TensorArray");
            return Err(SemanticsError::Unsupported {
                node: n.name.clone(),
                op: n.op.clone(),
                why: if container {
                    format!("a {kind} op on a TensorFlow 1 container that explore does not model")
                } else {
                    format!("a {kind} resource op outside the modelled set")
                },
            });
        };
        let var =
            handle_var(n, &var_of_handle).ok_or_else(|| SemanticsError::UnknownVariable { node: n.name.clone() })?;
        let mut slots = [None; 3];
        if op == AccessOp::Apply {
            let handles = handle_slots(&n.op);
            if handles.first() != Some(&0) || handles.len() > 1 + slots.len() {
                return Err(SemanticsError::Unsupported {
                    node: n.name.clone(),
                    op: n.op.clone(),
                    why: format!("its variable handles are inputs {handles:?}, which the model does not expect"),
                });
            }
            for (slot, &input) in slots.iter_mut().zip(&handles[1..]) {
                let v = n.inputs.get(input).and_then(|&o| handle_var_of(o, &var_of_handle));
                *slot = Some(v.ok_or_else(|| SemanticsError::UnknownVariable { node: n.name.clone() })?);
            }
        }
        access[id.index()] = Some(Access { op, var, source: None, slots });
    }
    Ok((vars, access))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every op the interpreter has a resource-variable kernel for is modelled; the model's
    /// reads and writes agree
    /// with TensorFlow's resource-operation table, which the safety analysis uses (so a
    /// cluster holding one of these ops snapshots and writes back all its variables, and
    /// no write→read path through it shares a cluster); and an optimizer's handles are its
    /// leading inputs, at most four.
    #[test]
    fn every_resource_kernel_is_modelled_and_agrees_with_the_safety_table() {
        let mut modelled = 0;
        for schema in autoclust_graph::registry::all() {
            let op = schema.name;
            if !autoclust_runtime::kernels::resource::is_resource_op(op) {
                continue;
            }
            let access = AccessOp::of(op).unwrap_or_else(|| panic!("{op} has a kernel but no model"));
            let kind = effects::table_kind(op).unwrap_or_else(|| panic!("{op} is not in the resource table"));
            assert_eq!((access.reads(), access.writes()), (kind.reads(), kind.writes()), "{op}");
            let handles = handle_slots(op);
            if access == AccessOp::Apply {
                assert!(handles.len() <= 4 && handles.iter().enumerate().all(|(i, &h)| i == h), "{op}: {handles:?}");
            } else {
                assert_eq!(handles, [0], "{op}");
            }
            modelled += 1;
        }
        // 6 reads and assigns, 2 gathers, 13 scatters (a strided-slice assign among them),
        // 30 optimizer ops, RngReadAndSkip, RngSkip and the six stateful generators.
        assert_eq!(modelled, 59);
        assert_eq!(handle_slots("ResourceApplyCenteredRMSProp"), [0, 1, 2, 3]);
        assert_eq!(handle_slots("ResourceSparseApplyAdagradDA"), [0, 1, 2]);
    }
}
