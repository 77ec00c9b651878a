//! The executor: a compact plan per (feeds, fetches, targets), run by
//! pending-input counts.
//!
//! [`Plan::build_limited`] prunes the graph to what the fetches and targets need
//! (every node when there are neither; a fed node needs none of its inputs),
//! prepares every kernel once (so an op without a kernel is an error before
//! anything runs, and only if it must run), and lays the values out in a flat
//! slot array: each node output a consumer or fetch uses gets a slot and a use
//! count, so the last consumer takes the tensor (and may reuse its buffer) and
//! nothing is looked up by name while running.
//!
//! Three schedules:
//! - deterministic (one thread): the topological order that always picks the
//!   lowest-numbered ready node, computed once per plan;
//! - seeded random (one thread): uniformly among the ready nodes, from a
//!   seeded RNG, to explore interleavings;
//! - parallel: a rayon pool; a worker that finishes a node runs cheap ready
//!   successors and one expensive one inline and spawns the rest.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use autoclust_graph::{DType, Graph, NodeId, Output, Shape, Tensor};
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use smallvec::SmallVec;

use crate::bridge;
use crate::cluster_call::{self, Jit};
use crate::error::{KernelError, RunError};
use crate::frames::{self, FramePlan};
use crate::function_call::{self, Instantiations};
use crate::kernels::resource::{self, StatefulFn};
use crate::kernels::{self, Inputs, PureFn};
use crate::variables::VariableStore;

/// The most outputs a node of an op that does not declare its output count may have
/// (a bound on hostile ports; TensorFlow's ops and functions declare theirs).
const MAX_OPAQUE_OUTPUTS: usize = 1 << 16;

/// How a planned node produces its outputs.
pub(crate) enum NodeKernel {
    Pure(PureFn),
    Stateful(StatefulFn),
    /// Outputs come from the run's feeds (`feed_index[port]`, `u32::MAX` if unfed).
    Fed(Vec<u32>),
}

pub(crate) struct PlanNode {
    pub id: NodeId,
    pub kernel: NodeKernel,
    /// Slot of each data input.
    pub inputs: SmallVec<[u32; 4]>,
    /// First slot of this node's outputs; `out_count` slots follow.
    pub out_start: u32,
    pub out_count: u32,
    /// Plan indices of successors over data and control edges (with repeats).
    pub succ: SmallVec<[u32; 4]>,
    /// Data plus control inputs inside the plan.
    pub pending: u32,
    /// Run inline by the parallel scheduler.
    pub cheap: bool,
}

/// A placeholder's declared type, for checking feeds.
#[derive(Clone, Debug)]
pub(crate) struct FeedSpec {
    pub output: Output,
    pub dtype: Option<DType>,
    pub shape: Shape,
}

/// The compiled form of one (feeds, fetches, targets) request.
pub(crate) struct Plan {
    pub nodes: Vec<PlanNode>,
    /// Uses of each slot (consumers plus fetches).
    pub slot_uses: Vec<u32>,
    pub fetch_slots: Vec<u32>,
    /// The feeds in request-key order.
    pub feeds: Vec<FeedSpec>,
    pub initial_ready: Vec<u32>,
    /// The deterministic order (lowest `NodeId` first among ready nodes).
    pub order: Vec<u32>,
    /// The expensive (not [`PlanNode::cheap`]) nodes lie on one dependency chain, so no two
    /// of them could ever run at once: a parallel schedule would only add thread hand-offs
    /// (on a clustered training step — snapshot, cluster call, write-back — those cost
    /// two thirds of the step), and the session runs such a plan on the calling thread.
    pub sequential: bool,
    /// Set when the planned nodes hold TensorFlow 1 control flow (`Switch`, `Merge`,
    /// `Enter`, ...): the run goes to the frame-aware executor ([`crate::frames`]) and
    /// the fields above (but `feeds`) are empty.
    pub frames: Option<Box<FramePlan>>,
}

/// Whether the expensive nodes of `nodes` (given in topological `order`) form one chain:
/// each one depends, transitively, on every expensive node before it in `order`. By
/// transitivity it is enough that each depends on the one just before it, which holds
/// exactly when the latest (in `order`) expensive ancestor it inherits is that one; one
/// pass over the edges, for plans of any length.
fn expensive_nodes_form_a_chain(nodes: &[PlanNode], order: &[u32]) -> bool {
    // The sequence number of the latest expensive ancestor (or self), -1 for none.
    let mut latest = vec![-1i64; nodes.len()];
    let mut seen: i64 = 0;
    for &i in order {
        let i = i as usize;
        let mut mine = latest[i];
        if !nodes[i].cheap {
            if mine != seen - 1 {
                return false;
            }
            mine = seen;
            seen += 1;
        }
        for &s in &nodes[i].succ {
            let l = &mut latest[s as usize];
            *l = (*l).max(mine);
        }
    }
    true
}

fn is_cheap(op: &str) -> bool {
    matches!(
        op,
        "Const"
            | "Identity"
            | "IdentityN"
            | "StopGradient"
            | "Snapshot"
            | "NoOp"
            | "VarHandleOp"
            | "Placeholder"
            | "PlaceholderWithDefault"
            | "Shape"
            | "ShapeN"
            | "Size"
            | "Rank"
            | "Reshape"
            | "ExpandDims"
            | "Squeeze"
            | "ReadVariableOp"
            | "VarIsInitializedOp"
            | "VariableShape"
            | "BroadcastGradientArgs"
    )
}

impl Plan {
    /// Builds the plan, with a bound on every `While`'s iterations. `feeds` must be sorted
    /// and deduplicated.
    pub fn build_limited(
        graph: &Graph,
        store: &VariableStore,
        jit: Option<&Arc<Jit>>,
        (feeds, fetches, targets): (&[Output], &[Output], &[NodeId]),
        max_loop_iterations: u64,
    ) -> Result<Plan, RunError> {
        let mut inst = Instantiations::default();
        inst.max_loop_iterations = max_loop_iterations;
        Plan::build_with(graph, store, jit, feeds, fetches, targets, &mut inst)
    }

    /// [`Plan::build_limited`], sharing the function bodies `inst` has instantiated
    /// (a function body's plan is built inside its caller's).
    pub(crate) fn build_with(
        graph: &Graph,
        store: &VariableStore,
        jit: Option<&Arc<Jit>>,
        feeds: &[Output],
        fetches: &[Output],
        targets: &[NodeId],
        inst: &mut Instantiations,
    ) -> Result<Plan, RunError> {
        let n = graph.len();
        let mut fed_ports: Vec<SmallVec<[(u32, u32); 1]>> = vec![SmallVec::new(); n];
        for (k, f) in feeds.iter().enumerate() {
            fed_ports[f.node.index()].push((f.port, k as u32));
        }
        // Prune: reverse reachability from fetches and targets, not through fed nodes.
        let needed = if fetches.is_empty() && targets.is_empty() {
            vec![true; n]
        } else {
            let roots = fetches.iter().map(|o| o.node).chain(targets.iter().copied());
            graph.ancestors(roots, |id| !fed_ports[id.index()].is_empty())
        };
        let ids: Vec<NodeId> = graph.node_ids().filter(|id| needed[id.index()]).collect();
        let mut plan_index = vec![u32::MAX; n];
        for (i, id) in ids.iter().enumerate() {
            plan_index[id.index()] = i as u32;
        }
        // Output slots: as many as the highest port used (by a planned consumer or a fetch).
        // Every port is checked first against what its producer's op declares (an opaque
        // op's against a generous bound), so a hostile port is an error, not a wrapped
        // slot index (another output's value) or a slot table of billions of entries.
        let port_error = |o: &Output| -> Option<String> {
            let p = graph.node(o.node);
            match graph.output_count(o.node) {
                Some(n) => (o.port as usize >= n)
                    .then(|| format!("reads output {} but '{}' ({}) has {n} output(s)", o.port, p.name, p.op)),
                None => (o.port as usize >= MAX_OPAQUE_OUTPUTS).then(|| {
                    format!(
                        "reads output {} of '{}' ({}), an op that does not declare its outputs; at most {MAX_OPAQUE_OUTPUTS} are allowed",
                        o.port, p.name, p.op
                    )
                }),
            }
        };
        let mut out_count = vec![0u32; ids.len()];
        for &id in &ids {
            if !fed_ports[id.index()].is_empty() {
                continue;
            }
            let node = graph.node(id);
            for o in &node.inputs {
                if let Some(m) = port_error(o) {
                    let error = KernelError::invalid(format!("input '{}' {m}", graph.output_name(*o)));
                    return Err(RunError::Node { node: node.name.clone(), op: node.op.clone(), error });
                }
                let p = plan_index[o.node.index()] as usize;
                out_count[p] = out_count[p].max(o.port + 1);
            }
        }
        for o in fetches.iter().chain(feeds) {
            if let Some(m) = port_error(o) {
                let name = format!("{}:{}", graph.name(o.node), o.port);
                return Err(RunError::BadRequest { name, message: m });
            }
        }
        for o in fetches {
            let p = plan_index[o.node.index()] as usize;
            out_count[p] = out_count[p].max(o.port + 1);
        }
        if ids.iter().any(|&id| {
            fed_ports[id.index()].is_empty() && autoclust_graph::effects::is_v1_control_flow(&graph.node(id).op)
        }) {
            let fed = |id: NodeId| -> Option<Vec<u32>> {
                let fed = &fed_ports[id.index()];
                (!fed.is_empty()).then(|| {
                    let len = fed.iter().map(|&(p, _)| p as usize + 1).max().unwrap_or(0);
                    let mut map = vec![u32::MAX; len];
                    for &(port, k) in fed {
                        map[port as usize] = k;
                    }
                    map
                })
            };
            let max = inst.max_loop_iterations;
            let mut kernel = |id: NodeId| {
                let node = graph.node(id);
                node_kernel(graph, store, jit, id, inst, &WriteBacks::default()).map_err(|error| RunError::Node {
                    node: node.name.clone(),
                    op: node.op.clone(),
                    error,
                })
            };
            let fp = FramePlan::build(graph, &ids, &plan_index, &fed, &mut kernel, fetches, max)?;
            return Ok(Plan {
                nodes: Vec::new(),
                slot_uses: Vec::new(),
                fetch_slots: Vec::new(),
                feeds: feed_specs(graph, feeds),
                initial_ready: Vec::new(),
                order: Vec::new(),
                sequential: true,
                frames: Some(Box::new(fp)),
            });
        }
        let write_backs = WriteBacks::find(graph, &ids, &fed_ports);
        let mut out_start = Vec::with_capacity(ids.len());
        let mut total = 0u32;
        for &c in &out_count {
            out_start.push(total);
            total = total.checked_add(c).ok_or_else(|| RunError::BadRequest {
                name: String::new(),
                message: "the plan needs more than 2^32 output slots".into(),
            })?;
        }
        let slot = |o: &Output| out_start[plan_index[o.node.index()] as usize] + o.port;
        let mut slot_uses = vec![0u32; total as usize];
        let mut nodes = Vec::with_capacity(ids.len());
        for (i, &id) in ids.iter().enumerate() {
            let node = graph.node(id);
            let node_err = |e: KernelError| RunError::Node { node: node.name.clone(), op: node.op.clone(), error: e };
            let fed = &fed_ports[id.index()];
            let (kernel, inputs, pending) = if !fed.is_empty() {
                let mut map = vec![u32::MAX; out_count[i] as usize];
                for &(port, k) in fed {
                    if (port as usize) < map.len() {
                        map[port as usize] = k;
                    }
                }
                (NodeKernel::Fed(map), SmallVec::new(), 0)
            } else {
                let kernel = node_kernel(graph, store, jit, id, inst, &write_backs).map_err(node_err)?;
                if let NodeKernel::Fed(_) = kernel {
                    // A Placeholder that must run has no feed.
                    let dtype = node.attr("dtype").and_then(|a| a.as_type()).map(|d| d.name()).unwrap_or_default();
                    return Err(RunError::MissingFeed { node: node.name.clone(), dtype });
                }
                let inputs: SmallVec<[u32; 4]> = node.inputs.iter().map(slot).collect();
                for &s in &inputs {
                    slot_uses[s as usize] += 1;
                }
                (kernel, inputs, (node.inputs.len() + node.control_inputs.len()) as u32)
            };
            nodes.push(PlanNode {
                id,
                kernel,
                inputs,
                out_start: out_start[i],
                out_count: out_count[i],
                succ: SmallVec::new(),
                pending,
                cheap: is_cheap(&node.op),
            });
        }
        for i in 0..nodes.len() {
            if matches!(nodes[i].kernel, NodeKernel::Fed(_)) {
                continue;
            }
            let id = nodes[i].id;
            for p in graph.predecessors(id) {
                let pi = plan_index[p.index()] as usize;
                nodes[pi].succ.push(i as u32);
            }
        }
        let fetch_slots: Vec<u32> = fetches.iter().map(slot).collect();
        for &s in &fetch_slots {
            slot_uses[s as usize] += 1;
        }
        // Fed outputs that something uses must be fed.
        for (i, pn) in nodes.iter().enumerate() {
            if let NodeKernel::Fed(map) = &pn.kernel {
                for (port, &k) in map.iter().enumerate() {
                    if k == u32::MAX && slot_uses[pn.out_start as usize + port] > 0 {
                        let name = graph.name(ids[i]);
                        return Err(RunError::BadFeed {
                            name: format!("{name}:{port}"),
                            message: format!("node '{name}' is fed, but its output {port} is used and not fed"),
                        });
                    }
                }
            }
        }
        let initial_ready: Vec<u32> = (0..nodes.len() as u32).filter(|&i| nodes[i as usize].pending == 0).collect();
        // Deterministic order; also detects cycles among the planned nodes.
        let mut pending: Vec<u32> = nodes.iter().map(|p| p.pending).collect();
        let mut heap: BinaryHeap<Reverse<u32>> = initial_ready.iter().map(|&i| Reverse(i)).collect();
        let mut order = Vec::with_capacity(nodes.len());
        while let Some(Reverse(i)) = heap.pop() {
            order.push(i);
            for &s in &nodes[i as usize].succ {
                pending[s as usize] -= 1;
                if pending[s as usize] == 0 {
                    heap.push(Reverse(s));
                }
            }
        }
        if order.len() != nodes.len() {
            return Err(match graph.topo_order() {
                Err(c) => RunError::Cycle(c),
                Ok(_) => RunError::BadRequest { name: String::new(), message: "the planned nodes form a cycle".into() },
            });
        }
        let feeds = feed_specs(graph, feeds);
        let sequential = expensive_nodes_form_a_chain(&nodes, &order);
        Ok(Plan { nodes, slot_uses, fetch_slots, feeds, initial_ready, order, sequential, frames: None })
    }
}

fn feed_specs(graph: &Graph, feeds: &[Output]) -> Vec<FeedSpec> {
    feeds
        .iter()
        .map(|&o| {
            let node = graph.node(o.node);
            let is_placeholder = node.op == "Placeholder" || node.op == "PlaceholderWithDefault";
            FeedSpec {
                output: o,
                dtype: if is_placeholder { node.attr("dtype").and_then(|a| a.as_type()) } else { None },
                shape: if is_placeholder {
                    node.attr("shape").and_then(|a| a.as_shape()).cloned().unwrap_or_default()
                } else {
                    Shape::unknown()
                },
            }
        })
        .collect()
}

/// The planned write-back nodes a cluster call may perform itself (`crate::bridge`): per
/// call node, the one planned `_AutoclustWriteBack` that takes its outputs, when every
/// value that node writes is an output of that call, it has no control inputs (so it
/// could run right after the call) and each handle it takes comes from a variable node.
#[derive(Default)]
struct WriteBacks {
    of_call: HashMap<NodeId, NodeId>,
}

impl WriteBacks {
    fn find(graph: &Graph, planned: &[NodeId], fed: &[SmallVec<[(u32, u32); 1]>]) -> WriteBacks {
        let mut of_call: HashMap<NodeId, Option<NodeId>> = HashMap::new();
        for &w in planned {
            let node = graph.node(w);
            if node.op != bridge::WRITE_BACK_OP || !fed[w.index()].is_empty() {
                continue;
            }
            // Every call feeding any planned write-back counts, so a call feeding two is excluded.
            let n = node.inputs.len() / 2;
            let values = &node.inputs[n..];
            let Some(first) = values.first() else { continue };
            let ok = node.inputs.len().is_multiple_of(2)
                && node.control_inputs.is_empty()
                && values.iter().all(|o| o.node == first.node)
                && node.inputs[..n].iter().all(|h| {
                    h.port == 0
                        && fed[h.node.index()].is_empty()
                        && autoclust_graph::effects::names_variable(graph.node(h.node))
                });
            for o in values {
                let e = of_call.entry(o.node).or_insert(Some(w));
                if !ok || *e != Some(w) {
                    *e = None;
                }
            }
        }
        WriteBacks { of_call: of_call.into_iter().filter_map(|(c, w)| w.map(|w| (c, w))).collect() }
    }

    /// The in-place write-back of call `id`, when its write-back may be done by it.
    fn bridged(&self, graph: &Graph, store: &VariableStore, id: NodeId) -> Option<cluster_call::Bridged> {
        let &w = self.of_call.get(&id)?;
        let wb = graph.node(w);
        let n = wb.inputs.len() / 2;
        let var_of = |h: &Output| store.register_node(graph, h.node);
        let vars: Vec<_> = wb.inputs[..n].iter().map(var_of).collect();
        let outputs: Vec<usize> = wb.inputs[n..].iter().map(|o| o.port as usize).collect();
        let inputs: Vec<_> = graph
            .node(id)
            .inputs
            .iter()
            .map(|o| {
                let snap = graph.node(o.node);
                (snap.op == bridge::SNAPSHOT_OP)
                    .then(|| snap.inputs.get(o.port as usize))
                    .flatten()
                    .filter(|h| h.port == 0 && autoclust_graph::effects::names_variable(graph.node(h.node)))
                    .map(var_of)
            })
            .collect();
        let mut distinct = vars.clone();
        distinct.sort_unstable();
        distinct.dedup();
        // A repeated variable is the write-back's own error, which must publish nothing.
        if distinct.len() != vars.len() || !inputs.iter().flatten().any(|v| vars.contains(v)) {
            return None;
        }
        Some(cluster_call::Bridged { inputs, write_back: bridge::InPlaceWriteBack::new(store, wb, vars, outputs) })
    }
}

/// The kernel of one node (not fed). `Fed(vec![])` marks an unfed `Placeholder`.
fn node_kernel(
    graph: &Graph,
    store: &VariableStore,
    jit: Option<&Arc<Jit>>,
    id: NodeId,
    inst: &mut Instantiations,
    write_backs: &WriteBacks,
) -> Result<NodeKernel, KernelError> {
    let node = graph.node(id);
    match node.op.as_str() {
        bridge::SNAPSHOT_OP => return Ok(NodeKernel::Stateful(bridge::snapshot_for(node))),
        bridge::WRITE_BACK_OP => return Ok(NodeKernel::Stateful(bridge::write_back_for(node))),
        "Placeholder" if !autoclust_graph::effects::names_variable(node) => return Ok(NodeKernel::Fed(Vec::new())),
        // A resource placeholder stands for a captured variable (TF2 function graphs).
        "Placeholder" => {
            let var = store.register_node(graph, id);
            let h = resource::handle_tensor(var);
            return Ok(NodeKernel::Pure(Box::new(move |_inp: Inputs| kernels::one(h.clone()))));
        }
        "PlaceholderWithDefault" => {
            return Ok(NodeKernel::Pure(Box::new(|mut inp: Inputs| {
                kernels::arity(&inp, 1)?;
                kernels::one(inp.pop().expect("one input"))
            })))
        }
        "VarHandleOp" => {
            let var = store.register_handle(node);
            let h = resource::handle_tensor(var);
            return Ok(NodeKernel::Pure(Box::new(move |_inp: Inputs| kernels::one(h.clone()))));
        }
        _ => {}
    }
    // Encapsulated cluster functions go to `cluster_call` (JIT); every other call to `function_call`.
    let is_cluster_call =
        cluster_call::is_call(&node.op, &graph.library) && function_call::is_cluster_call(node, &graph.library);
    if let (Some(jit), true) = (jit, is_cluster_call) {
        let function = graph.library.function(&node.op).expect("is_call checked the library");
        if let Some(b) = write_backs.bridged(graph, store, id) {
            return Ok(NodeKernel::Stateful(cluster_call::prepare_bridged(function, &graph.library, jit.clone(), b)?));
        }
        return Ok(NodeKernel::Pure(cluster_call::prepare(function, &graph.library, jit.clone())?));
    }
    if let Some(f) = function_call::prepare(graph, store, jit, id, inst)? {
        return Ok(NodeKernel::Stateful(f));
    }
    if autoclust_graph::effects::may_call_function(node, &graph.library) {
        return Err(KernelError::NoKernel(node.op.clone()));
    }
    if let Some(f) = crate::containers::prepare(node)? {
        return Ok(NodeKernel::Stateful(f));
    }
    if let Some(f) = kernels::lookup::prepare(node)? {
        return Ok(NodeKernel::Stateful(f));
    }
    if let Some(f) = kernels::summary_writer::prepare(node)? {
        return Ok(NodeKernel::Stateful(f));
    }
    if let Some(f) = resource::prepare(node)? {
        return Ok(NodeKernel::Stateful(f));
    }
    if let Some(f) = kernels::random::prepare(node, store.random_states())? {
        return Ok(NodeKernel::Pure(f));
    }
    Ok(NodeKernel::Pure(kernels::prepare(node)?))
}

/// One value slot of a run: the tensor and how many of its uses (consumer
/// inputs plus fetches) are still to come, under one lock.
///
/// The count lives inside the lock, not beside it, because "am I the last
/// use?" and "take or clone the tensor" must be one step: with a separate
/// atomic count, two consumers of one slot (say two ops reading one feed) on
/// two threads could decrement in one order and lock in the other, so the
/// last one took the tensor before the other cloned it.
struct Slot {
    value: Option<Tensor>,
    remaining: u32,
}

/// Per-run values.
struct RunState {
    slots: Vec<Mutex<Slot>>,
}

/// What a run needs besides the plan.
pub(crate) struct RunContext<'a> {
    pub graph: &'a Graph,
    pub store: &'a VariableStore,
    pub plan: &'a Plan,
    /// Feed values in plan-feed order, each moved out by the one node port it
    /// feeds (so a value passed in by its last owner — a loop's list, a
    /// body's argument — can be updated in place by the kernel that consumes it last).
    pub feeds: Vec<Mutex<Option<Tensor>>>,
}

/// The `feeds` of a [`RunContext`].
pub(crate) fn feed_values(values: Vec<Tensor>) -> Vec<Mutex<Option<Tensor>>> {
    values.into_iter().map(|t| Mutex::new(Some(t))).collect()
}

/// The schedule of one run.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Schedule<'p> {
    Deterministic,
    Seeded(u64),
    Parallel(&'p rayon::ThreadPool),
}

impl RunContext<'_> {
    /// Runs the plan; returns the fetched values in fetch order.
    pub fn run(&self, schedule: Schedule<'_>) -> Result<Vec<Tensor>, RunError> {
        let plan = self.plan;
        if let Some(fp) = &plan.frames {
            return frames::run(self, fp, schedule);
        }
        let state = RunState {
            slots: plan.slot_uses.iter().map(|&uses| Mutex::new(Slot { value: None, remaining: uses })).collect(),
        };
        match schedule {
            Schedule::Deterministic => {
                for &i in &plan.order {
                    self.execute(&state, i)?;
                }
            }
            Schedule::Seeded(seed) => {
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
                let mut pending: Vec<u32> = plan.nodes.iter().map(|p| p.pending).collect();
                let mut ready = plan.initial_ready.clone();
                while !ready.is_empty() {
                    let k = rng.gen_range(0..ready.len());
                    let i = ready.swap_remove(k);
                    self.execute(&state, i)?;
                    for &s in &plan.nodes[i as usize].succ {
                        pending[s as usize] -= 1;
                        if pending[s as usize] == 0 {
                            ready.push(s);
                        }
                    }
                }
            }
            Schedule::Parallel(pool) => self.run_parallel(&state, pool)?,
        }
        plan.fetch_slots
            .iter()
            .enumerate()
            .map(|(k, &s)| {
                state.slots[s as usize].lock().value.clone().ok_or_else(|| RunError::BadRequest {
                    name: String::new(),
                    message: format!("internal error: fetch {k} was not produced by a finished run"),
                })
            })
            .collect()
    }

    fn run_parallel(&self, state: &RunState, pool: &rayon::ThreadPool) -> Result<(), RunError> {
        let pending: Vec<AtomicU32> = self.plan.nodes.iter().map(|p| AtomicU32::new(p.pending)).collect();
        let par = Parallel { ctx: self, state, pending, abort: AtomicBool::new(false), error: Mutex::new(None) };
        pool.scope(|s| {
            let par = &par;
            // Cheap roots (constants, handles, feeds) run on one task; each
            // expensive root gets its own.
            let (cheap, heavy): (Vec<u32>, Vec<u32>) =
                self.plan.initial_ready.iter().partition(|&&i| self.plan.nodes[i as usize].cheap);
            for i in heavy {
                s.spawn(move |s| par.process(s, SmallVec::from_elem(i, 1)));
            }
            par.process(s, cheap.into_iter().collect());
        });
        match par.error.into_inner() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Runs one planned node: gathers inputs, calls the kernel, stores outputs.
    fn execute(&self, state: &RunState, i: u32) -> Result<(), RunError> {
        let pn = &self.plan.nodes[i as usize];
        let err = |e: KernelError| {
            let node = self.graph.node(pn.id);
            RunError::Node { node: node.name.clone(), op: node.op.clone(), error: e }
        };
        let outputs = match &pn.kernel {
            NodeKernel::Fed(map) => {
                for (port, &k) in map.iter().enumerate() {
                    if k != u32::MAX {
                        let t = self.feeds[k as usize].lock().take().ok_or_else(|| {
                            err(KernelError::invalid(format!("internal error: feed {k} was taken twice")))
                        })?;
                        self.store_output(state, pn.out_start + port as u32, t);
                    }
                }
                return Ok(());
            }
            NodeKernel::Pure(f) => f(self.gather(state, pn).map_err(err)?).map_err(err)?,
            NodeKernel::Stateful(f) => f(self.store, self.gather(state, pn).map_err(err)?).map_err(err)?,
        };
        if (outputs.len() as u32) < pn.out_count {
            return Err(err(KernelError::invalid(format!(
                "output port {} is out of range: the op produced {} outputs",
                pn.out_count - 1,
                outputs.len()
            ))));
        }
        for (port, t) in outputs.into_iter().take(pn.out_count as usize).enumerate() {
            self.store_output(state, pn.out_start + port as u32, t);
        }
        Ok(())
    }

    fn store_output(&self, state: &RunState, slot: u32, t: Tensor) {
        if self.plan.slot_uses[slot as usize] > 0 {
            state.slots[slot as usize].lock().value = Some(t);
        }
    }

    /// Takes this node's inputs: the last use of a slot moves the tensor out
    /// (so a kernel may reuse its buffer), earlier uses clone it (an `Arc`
    /// bump). The scheduler runs a node only after all its producers stored
    /// their outputs; should that ever not hold, the node fails with an
    /// internal error instead of panicking.
    fn gather(&self, state: &RunState, pn: &PlanNode) -> Result<Inputs, KernelError> {
        let mut inputs = Inputs::with_capacity(pn.inputs.len());
        for (k, &s) in pn.inputs.iter().enumerate() {
            let mut slot = state.slots[s as usize].lock();
            let Some(remaining) = slot.remaining.checked_sub(1) else {
                return Err(KernelError::invalid(format!(
                    "internal error: input {k} was used more often than planned"
                )));
            };
            slot.remaining = remaining;
            let t = if remaining == 0 { slot.value.take() } else { slot.value.clone() };
            match t {
                Some(t) => inputs.push(t),
                None => {
                    return Err(KernelError::invalid(format!(
                        "internal error: input {k} was not produced before this node ran"
                    )))
                }
            }
        }
        Ok(inputs)
    }
}

struct Parallel<'a, 'c> {
    ctx: &'a RunContext<'c>,
    state: &'a RunState,
    pending: Vec<AtomicU32>,
    abort: AtomicBool,
    error: Mutex<Option<RunError>>,
}

impl<'a> Parallel<'a, '_> {
    fn process<'s>(&'s self, s: &rayon::Scope<'s>, mut inline: SmallVec<[u32; 8]>)
    where
        'a: 's,
    {
        while let Some(i) = inline.pop() {
            if self.abort.load(Ordering::Relaxed) {
                return;
            }
            if let Err(e) = self.ctx.execute(self.state, i) {
                self.abort.store(true, Ordering::Relaxed);
                let mut slot = self.error.lock();
                // Keep the error of the lowest-numbered failing node, for stable messages.
                if slot.is_none() {
                    *slot = Some(e);
                }
                return;
            }
            let mut kept_expensive = false;
            for &succ in &self.ctx.plan.nodes[i as usize].succ {
                if self.pending[succ as usize].fetch_sub(1, Ordering::AcqRel) == 1 {
                    let cheap = self.ctx.plan.nodes[succ as usize].cheap;
                    if cheap || !kept_expensive {
                        kept_expensive |= !cheap;
                        inline.push(succ);
                    } else {
                        s.spawn(move |s| self.process(s, SmallVec::from_elem(succ, 1)));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nodes `0..n` with the given edges; `heavy` marks the expensive ones.
    fn plan_nodes(n: usize, edges: &[(u32, u32)], heavy: &[u32]) -> Vec<PlanNode> {
        (0..n as u32)
            .map(|i| PlanNode {
                id: NodeId(i),
                kernel: NodeKernel::Fed(Vec::new()),
                inputs: SmallVec::new(),
                out_start: 0,
                out_count: 0,
                succ: edges.iter().filter(|e| e.0 == i).map(|e| e.1).collect(),
                pending: edges.iter().filter(|e| e.1 == i).count() as u32,
                cheap: !heavy.contains(&i),
            })
            .collect()
    }

    #[test]
    fn a_chain_of_expensive_nodes_runs_inline_and_a_fork_does_not() {
        // snapshot(1) -> call(2) -> write-back(3), with cheap nodes 0 and 4 around them.
        let chain = plan_nodes(5, &[(0, 1), (1, 2), (2, 3), (3, 4), (0, 2)], &[1, 2, 3]);
        assert!(expensive_nodes_form_a_chain(&chain, &[0, 1, 2, 3, 4]));
        // Two expensive nodes fed by one cheap node are independent.
        let fork = plan_nodes(3, &[(0, 1), (0, 2)], &[1, 2]);
        assert!(!expensive_nodes_form_a_chain(&fork, &[0, 1, 2]));
        // Connected only through a cheap node still counts as a chain.
        let via_cheap = plan_nodes(3, &[(0, 1), (1, 2)], &[0, 2]);
        assert!(expensive_nodes_form_a_chain(&via_cheap, &[0, 1, 2]));
        // A long chain (scalar_10k after cse: 1,000 kernels in a row) is one chain ...
        let long: Vec<(u32, u32)> = (0..999).map(|i| (i, i + 1)).collect();
        let heavy: Vec<u32> = (0..1000).collect();
        let order: Vec<u32> = (0..1000).collect();
        assert!(expensive_nodes_form_a_chain(&plan_nodes(1000, &long, &heavy), &order));
        // ... but not with one more kernel hanging off its middle, nor with a diamond.
        let mut branch = long.clone();
        branch.push((500, 1000));
        let heavy_b: Vec<u32> = (0..1001).collect();
        let order_b: Vec<u32> = (0..1001).collect();
        assert!(!expensive_nodes_form_a_chain(&plan_nodes(1001, &branch, &heavy_b), &order_b));
        let diamond = plan_nodes(4, &[(0, 1), (0, 2), (1, 3), (2, 3)], &[0, 1, 2, 3]);
        assert!(!expensive_nodes_form_a_chain(&diamond, &[0, 1, 2, 3]));
    }
}
