//! Which nodes the clusterer may put in a cluster, and why the others may not.
//!
//! A node is a *candidate* iff the JIT can compile it as part of a pure
//! function: its op is in [`is_jit_op`]'s set (elementwise math, matmul, einsum,
//! reductions, shape ops, softmax/loss and their gradients, identities,
//! constants, and the variable ops the bridge can snapshot and write back),
//! it calls no function, every output and every data input has a known
//! numeric dtype (float32, float64, int32, int64, bool), and — for resource ops — every resource-handle input is traceable
//! (directly or through `Identity`) to a `VarHandleOp`, so the bridge knows
//! which variable it snapshots. Never feeds (`Placeholder*`), variable
//! handles, unknown ops, strings, calls, or other side effects.
//!
//! Shapes need not be static (a batch dimension of `?` is the rule in real
//! graphs): as in XLA, a cluster is compiled for the shapes it is called with,
//! and the compile cache recompiles for new ones; what the compiler cannot
//! handle at those shapes (a `Reshape` whose target is not a constant, say)
//! runs the cluster in the interpreter instead.
//!
//! Soundness: leaving a node out of every cluster is always sound (it runs
//! in the plain executor); this module only has to avoid admitting a node
//! the compiler or the bridge cannot run faithfully. Nodes downstream of v1
//! control flow (`Switch`, `Enter`) are refused too, conservatively: they may
//! be dead or run once per iteration, which a cluster cannot express.

use std::fmt;

use autoclust_graph::infer::TypeInfo;
use autoclust_graph::{AttrValue, DType, Graph, NodeId};

/// Whether the JIT compiles `op` (given supported dtypes and static shapes).
pub fn is_jit_op(op: &str) -> bool {
    matches!(
        op,
        // Elementwise arithmetic and math.
        "Add" | "AddV2" | "AddN" | "Sub" | "Mul" | "MulNoNan" | "RealDiv" | "Div" | "DivNoNan" | "Neg" | "Abs" | "Exp" | "Log"
            | "Sqrt" | "Rsqrt" | "Square" | "Tanh" | "Sigmoid" | "Relu" | "Maximum" | "Minimum" | "Pow" | "Cast"
            | "Select" | "SelectV2" | "Reciprocal" | "Inv" | "SquaredDifference" | "Floor" | "Ceil" | "Sign"
            | "Erf" | "Erfc" | "Log1p" | "Softplus" | "IsNan" | "Expm1" | "Elu" | "Selu" | "Relu6" | "EluGrad"
            | "SeluGrad" | "Relu6Grad" | "LeakyRelu" | "LeakyReluGrad"
            // Comparisons and logic.
            | "Equal" | "NotEqual" | "Less" | "LessEqual" | "Greater" | "GreaterEqual" | "LogicalAnd"
            | "LogicalOr" | "LogicalNot"
            // Linear algebra.
            | "MatMul" | "BatchMatMul" | "BatchMatMulV2" | "BiasAdd" | "BiasAddV1" | "BiasAddGrad" | "Einsum"
            | "Conv2D" | "Conv2DBackpropInput" | "Conv2DBackpropFilter" | "MaxPool" | "MaxPoolGrad" | "AvgPool"
            | "AvgPoolGrad"
            // Reductions.
            | "Sum" | "Mean" | "Max" | "Min" | "Prod" | "ArgMax" | "ArgMin" | "Any" | "All"
            // Shapes and data movement.
            | "Split" | "SplitV" | "ReverseV2" | "StridedSliceGrad" | "Reshape" | "Shape" | "ShapeN" | "Size" | "Rank" | "ExpandDims" | "Squeeze" | "Transpose" | "ConcatV2" | "Pack"
            | "Slice" | "StridedSlice" | "Fill" | "ZerosLike" | "OnesLike" | "Tile" | "BroadcastTo" | "GatherV2" | "Gather"
            | "UnsortedSegmentSum"
            // Losses, activations and their gradients.
            | "Softmax" | "LogSoftmax" | "SoftmaxCrossEntropyWithLogits" | "SparseSoftmaxCrossEntropyWithLogits"
            | "ReluGrad" | "TanhGrad" | "SigmoidGrad" | "RsqrtGrad" | "SqrtGrad" | "ReciprocalGrad" | "InvGrad"
            | "BroadcastGradientArgs"
            // Shape arithmetic, compiled only when its value is known at compile time (see
            // [`compile_time_known`]): TF2 gradients compute reduction indices with these.
            | "FloorDiv" | "FloorMod" | "Range" | "InvertPermutation" | "DynamicStitch" | "ParallelDynamicStitch"
            | "ConcatOffset"
            // Plumbing.
            | "Identity" | "IdentityN" | "StopGradient" | "Snapshot" | "PreventGradient" | "Const" | "NoOp"
            // Variable ops the bridge snapshots and writes back.
            | "ReadVariableOp" | "AssignVariableOp" | "AssignAddVariableOp" | "AssignSubVariableOp"
            | "ResourceGather" | "ResourceScatterAdd" | "ResourceScatterSub" | "ResourceScatterMax"
            | "ResourceScatterMin" | "ResourceScatterUpdate" | "ResourceApplyGradientDescent"
            | "ResourceApplyMomentum" | "ResourceApplyAdam" | "ResourceApplyKerasMomentum" | "ResourceApplyAdagrad"
            | "ResourceApplyAdagradV2" | "ResourceApplyRMSProp" | "VariableShape"
            // Pure scatters (what encapsulation lowers the resource scatters to).
            | "TensorScatterAdd" | "TensorScatterSub" | "TensorScatterMax" | "TensorScatterMin" | "TensorScatterUpdate"
    )
}

/// Whether `op` is one of the variable ops in [`is_jit_op`]'s set.
pub fn is_variable_op(op: &str) -> bool {
    matches!(
        op,
        "ReadVariableOp"
            | "AssignVariableOp"
            | "AssignAddVariableOp"
            | "AssignSubVariableOp"
            | "ResourceGather"
            | "ResourceScatterAdd"
            | "ResourceScatterSub"
            | "ResourceScatterMax"
            | "ResourceScatterMin"
            | "ResourceScatterUpdate"
            | "ResourceApplyGradientDescent"
            | "ResourceApplyMomentum"
            | "ResourceApplyAdam"
            | "ResourceApplyKerasMomentum"
            | "ResourceApplyAdagrad"
            | "ResourceApplyAdagradV2"
            | "ResourceApplyRMSProp"
            | "VariableShape"
    )
}

fn is_supported_dtype(t: DType) -> bool {
    matches!(t, DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64 | DType::Bool)
}

/// Why a node may not be clustered.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NotCompilable {
    /// A feed (`Placeholder`, `PlaceholderWithDefault`): its value comes from outside.
    Feed,
    /// `VarHandleOp` and friends: they name a variable, the bridge passes handles.
    VariableHandle,
    /// The op calls a function (library op or `func` attribute).
    FunctionCall,
    /// The JIT has no lowering for this op.
    UnsupportedOp { op: String },
    /// `_XlaCompile = false` on the node.
    DisabledByAttribute,
    /// An output's dtype is unknown (ops the registry does not know, or inference failed).
    UnknownOutput { port: u32 },
    /// An output has a dtype the JIT does not handle.
    UnsupportedOutputDType { port: u32, dtype: DType },
    /// A data input's dtype or shape is unknown.
    UnknownInput { slot: u32 },
    /// A data input has a dtype the JIT does not handle.
    UnsupportedInputDType { slot: u32, dtype: DType },
    /// A resource input that does not come (through `Identity`) from a `VarHandleOp`.
    UntracedHandle { slot: u32 },
    /// Downstream of a v1 `Switch` or `Enter`: may be dead or run per iteration.
    InsideV1ControlFlow { via: String },
    /// Excluded by the caller (e.g. left in a cluster below the minimum size).
    Excluded { why: String },
    /// Type and shape inference failed on this node (see [`crate::cluster::Clusterer::run_partial`]).
    Untyped { message: String },
}

impl NotCompilable {
    /// Whether this refusal is a shortfall of the analysis rather than a
    /// decision by design: the node might have been clustered had its types
    /// been worked out. `run`, `bench` and `compile` report these as `note:`
    /// lines (CONTRACT.md, "Never silent").
    pub fn is_shortfall(&self) -> bool {
        matches!(
            self,
            NotCompilable::Untyped { .. } | NotCompilable::UnknownOutput { .. } | NotCompilable::UnknownInput { .. }
        )
    }
}

impl fmt::Display for NotCompilable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotCompilable::Feed => f.write_str("a feed (placeholder) is never compiled"),
            NotCompilable::VariableHandle => f.write_str("variable handles stay outside clusters"),
            NotCompilable::FunctionCall => f.write_str("calls a function"),
            NotCompilable::UnsupportedOp { op } => write!(f, "op {op} is not supported by the JIT"),
            NotCompilable::DisabledByAttribute => f.write_str("_XlaCompile is false"),
            NotCompilable::UnknownOutput { port } => write!(f, "dtype of output {port} is unknown"),
            NotCompilable::UnsupportedOutputDType { port, dtype } => {
                write!(f, "output {port} has unsupported dtype {}", dtype.name())
            }
            NotCompilable::UnknownInput { slot } => write!(f, "dtype of input {slot} is unknown"),
            NotCompilable::UnsupportedInputDType { slot, dtype } => {
                write!(f, "input {slot} has unsupported dtype {}", dtype.name())
            }
            NotCompilable::UntracedHandle { slot } => {
                write!(f, "resource input {slot} is not traceable to a VarHandleOp")
            }
            NotCompilable::InsideV1ControlFlow { via } => write!(f, "inside v1 control flow (after {via})"),
            NotCompilable::Excluded { why } => f.write_str(why),
            NotCompilable::Untyped { message } => write!(f, "its types could not be inferred: {message}"),
        }
    }
}

/// The compilability of every node.
#[derive(Clone, Debug, Default)]
pub struct Compilability {
    refusals: Vec<Option<NotCompilable>>,
}

impl Compilability {
    /// Decides every node of `graph` from its op and inferred types.
    pub fn compute(graph: &Graph, types: &TypeInfo) -> Compilability {
        let _span = tracing::debug_span!("compilability", nodes = graph.len()).entered();
        let control_flow = v1_control_flow(graph);
        let known = compile_time_known(graph);
        let refusals = graph
            .node_ids()
            .map(|id| match &control_flow[id.index()] {
                Some(via) => Some(NotCompilable::InsideV1ControlFlow { via: via.clone() }),
                None if FOLD_ONLY.contains(&graph.node(id).op.as_str())
                    && !graph.node(id).inputs.iter().all(|o| known[o.node.index()]) =>
                {
                    Some(NotCompilable::Excluded {
                        why: format!("{} is compiled only on values known at compile time", graph.node(id).op),
                    })
                }
                None => refusal(graph, types, id),
            })
            .collect();
        Compilability { refusals }
    }

    /// Built from a decision per node (tests, callers with their own policy).
    pub fn from_fn(graph: &Graph, mut decide: impl FnMut(NodeId) -> Option<NotCompilable>) -> Compilability {
        Compilability { refusals: graph.node_ids().map(&mut decide).collect() }
    }

    pub fn is_compilable(&self, id: NodeId) -> bool {
        matches!(self.refusals.get(id.index()), Some(None))
    }

    /// Why a node is not compilable (`None` if it is).
    pub fn refusal(&self, id: NodeId) -> Option<&NotCompilable> {
        self.refusals.get(id.index()).and_then(Option::as_ref)
    }

    /// Marks a node as not compilable.
    pub fn exclude(&mut self, id: NodeId, reason: NotCompilable) {
        self.refusals[id.index()] = Some(reason);
    }

    pub fn len(&self) -> usize {
        self.refusals.len()
    }
    pub fn is_empty(&self) -> bool {
        self.refusals.is_empty()
    }
}

/// Ops the compiler folds but never generates code for (integer shape arithmetic).
const FOLD_ONLY: &[&str] =
    &["FloorDiv", "FloorMod", "Range", "InvertPermutation", "DynamicStitch", "ParallelDynamicStitch", "ConcatOffset"];

/// For every node: whether its outputs are known when a cluster is compiled for given input
/// shapes — constants, the shapes of anything, and integer shape arithmetic on such values.
/// TensorFlow 2 gradients compute reduction indices so (`FloorMod(Add(rank, axis), rank)`).
fn compile_time_known(graph: &Graph) -> Vec<bool> {
    let mut known = vec![false; graph.len()];
    let Ok(order) = graph.topo_order() else { return known };
    for id in order {
        let n = graph.node(id);
        let inputs_known = n.inputs.iter().all(|o| known[o.node.index()]);
        known[id.index()] = match n.op.as_str() {
            "Const" => true,
            "Shape" | "Size" | "Rank" | "ShapeN" | "BroadcastGradientArgs" => true,
            "Add"
            | "AddV2"
            | "Sub"
            | "Mul"
            | "FloorDiv"
            | "FloorMod"
            | "Maximum"
            | "Minimum"
            | "Neg"
            | "Prod"
            | "Sum"
            | "Pack"
            | "ConcatV2"
            | "Reshape"
            | "ExpandDims"
            | "Squeeze"
            | "GatherV2"
            | "StridedSlice"
            | "Slice"
            | "Cast"
            | "Identity"
            | "Range"
            | "Fill"
            | "InvertPermutation"
            | "DynamicStitch"
            | "ParallelDynamicStitch"
            | "ConcatOffset" => inputs_known,
            _ => false,
        };
    }
    known
}

/// For every node that may be dead or runs inside a v1 loop frame, the name of the
/// control-flow op that makes it so (`Switch` or `Enter`).
///
/// Frames are assigned statically as TensorFlow's `BuildControlFlowInfo` does (an `Enter`
/// and what follows it are in the frame `frame_name`, an `Exit`'s consumers in the frame's
/// parent). A node in a loop frame is refused (no cluster spans frames and a cluster call
/// in a frame would run once per iteration); a node of the root frame is refused when it
/// may be dead: downstream of a root-frame `Switch` (a `Merge` joining both branches is
/// still counted dead: conservative), or of an `Exit` of a loop one of whose `Enter`s takes
/// such a value, or when it feeds a loop (below). Every other node — the code after
/// top-level loops, say the loss of a `dynamic_rnn` and its optimizer updates — is always
/// live in the root frame and may cluster.
fn v1_control_flow(graph: &Graph) -> Vec<Option<String>> {
    let n = graph.len();
    let mut out: Vec<Option<String>> = vec![None; n];
    if !graph.nodes().iter().any(|n| matches!(n.op.as_str(), "Switch" | "RefSwitch" | "Enter" | "RefEnter")) {
        return out;
    }
    let Ok(order) = crate::safety::topological_order(graph) else {
        // Without an order, refuse everything downstream of nothing in particular: all of it.
        let first =
            graph.nodes().iter().find(|n| matches!(n.op.as_str(), "Switch" | "RefSwitch" | "Enter" | "RefEnter"));
        let via = first.map(|n| n.name.clone());
        return vec![via; n];
    };
    let is_enter = |id: NodeId| matches!(graph.node(id).op.as_str(), "Enter" | "RefEnter");
    let is_exit = |id: NodeId| matches!(graph.node(id).op.as_str(), "Exit" | "RefExit");
    let is_switch = |id: NodeId| matches!(graph.node(id).op.as_str(), "Switch" | "RefSwitch");
    // Frame of each node: None = root, Some(frame name).
    let mut frame: Vec<Option<String>> = vec![None; n];
    let mut parent: std::collections::HashMap<String, Option<String>> = std::collections::HashMap::new();
    // A loop frame's first Enter (for messages) and whether one of its Enters takes a maybe-dead value.
    let mut frame_enter: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    let mut frame_dead: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    let mut dead: Vec<Option<String>> = vec![None; n];
    // Taints only grow, so repeating the pass reaches the fixed point (an Exit may come
    // before some Enter of its frame in the order).
    let mut passes = 0;
    loop {
        passes += 1;
        if passes > 64 {
            // Not settled (it always does on TensorFlow's graphs): refuse everything.
            let via = frame_enter.values().next().cloned().unwrap_or_default();
            return vec![Some(via); n];
        }
        let mut changed = false;
        for &id in &order {
            let node = graph.node(id);
            let preds: Vec<NodeId> =
                graph.predecessors(id).filter(|&p| !crate::safety::is_back_edge(graph, p, id)).collect();
            let out_frame = |p: NodeId, frame: &[Option<String>]| -> Option<String> {
                if is_exit(p) {
                    frame[p.index()].as_ref().and_then(|f| parent.get(f).cloned().flatten())
                } else {
                    frame[p.index()].clone()
                }
            };
            let my_frame = if is_enter(id) {
                node.attr("frame_name").and_then(|a| a.as_str()).map(str::to_string).or(Some(node.name.clone()))
            } else {
                preds.first().and_then(|&p| out_frame(p, &frame))
            };
            // Whether a value from `p` may be dead here (root-frame reasoning).
            let mut via: Option<String> = None;
            for &p in &preds {
                let v = if is_switch(p) {
                    Some(graph.node(p).name.clone())
                } else if is_exit(p) {
                    frame[p.index()].as_ref().and_then(|f| frame_dead.get(f).cloned())
                } else {
                    dead[p.index()].clone()
                };
                if v.is_some() {
                    via = v;
                    break;
                }
            }
            if is_enter(id) {
                let f = my_frame.clone().unwrap_or_default();
                let outer = node.inputs.first().and_then(|o| out_frame(o.node, &frame));
                parent.entry(f.clone()).or_insert(outer);
                frame_enter.entry(f.clone()).or_insert_with(|| node.name.clone());
                if let Some(v) = &via {
                    if !frame_dead.contains_key(&f) {
                        frame_dead.insert(f.clone(), v.clone());
                        changed = true;
                    }
                }
            }
            if frame[id.index()] != my_frame {
                frame[id.index()] = my_frame;
                changed = true;
            }
            if dead[id.index()].is_none() && via.is_some() {
                dead[id.index()] = via;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    // A root-frame node that feeds a loop (an ancestor of an `Enter`) stays out too: the
    // cycle detection drops loop back edges, so it cannot see that a cluster holding such a
    // node and a node after the loop's `Exit` would wait for itself (the loop needs the
    // first, the second needs the loop). TensorFlow collapses each frame into one
    // cycle-detection node instead; refusing the loop's producers is the simple sound form.
    let mut feeds_loop: Vec<Option<String>> = vec![None; n];
    for &id in order.iter().rev() {
        if is_enter(id) {
            let name = graph.node(id).name.clone();
            for p in graph.predecessors(id) {
                feeds_loop[p.index()].get_or_insert_with(|| name.clone());
            }
        } else if let Some(v) = feeds_loop[id.index()].clone() {
            for p in graph.predecessors(id) {
                if !crate::safety::is_back_edge(graph, p, id) {
                    feeds_loop[p.index()].get_or_insert_with(|| v.clone());
                }
            }
        }
    }
    for &id in &order {
        out[id.index()] = match &frame[id.index()] {
            Some(f) => Some(frame_enter.get(f).cloned().unwrap_or_else(|| f.clone())),
            None => dead[id.index()].clone().or_else(|| feeds_loop[id.index()].clone()),
        };
    }
    out
}

fn refusal(graph: &Graph, types: &TypeInfo, id: NodeId) -> Option<NotCompilable> {
    let node = graph.node(id);
    let op = node.op.as_str();
    if graph.library.function(op).is_some() || node.attrs.values().any(|a| a.is_func()) {
        return Some(NotCompilable::FunctionCall);
    }
    match op {
        "Placeholder" if autoclust_graph::effects::names_variable(node) => return Some(NotCompilable::VariableHandle),
        "Placeholder" | "PlaceholderWithDefault" | "PlaceholderV2" => return Some(NotCompilable::Feed),
        "VarHandleOp" | "_VarHandlesOp" | "VariableV2" | "Variable" => return Some(NotCompilable::VariableHandle),
        _ => {}
    }
    if !is_jit_op(op) {
        return Some(NotCompilable::UnsupportedOp { op: op.to_string() });
    }
    if matches!(node.attr("_XlaCompile"), Some(AttrValue::B(false))) {
        return Some(NotCompilable::DisabledByAttribute);
    }
    // The JIT's convolutions and bias adds are NHWC only (as TensorFlow's CPU kernels).
    if matches!(
        op,
        "Conv2D"
            | "Conv2DBackpropInput"
            | "Conv2DBackpropFilter"
            | "MaxPool"
            | "MaxPoolGrad"
            | "AvgPool"
            | "AvgPoolGrad"
            | "BiasAdd"
            | "BiasAddGrad"
    ) && node.attr("data_format").and_then(AttrValue::as_str).is_some_and(|f| f != "NHWC")
    {
        return Some(NotCompilable::UnsupportedOp { op: format!("{op} in a data_format other than NHWC") });
    }
    for (port, (dtype, _)) in types.outputs(id).iter().enumerate() {
        let port = port as u32;
        if !is_supported_dtype(*dtype) {
            return Some(NotCompilable::UnsupportedOutputDType { port, dtype: *dtype });
        }
    }
    // Every output must be inferred: a consumer reading a port inference
    // does not know would otherwise slip through.
    match types.num_outputs(id) {
        Some(n) if types.outputs(id).len() >= n => {}
        _ => return Some(NotCompilable::UnknownOutput { port: types.outputs(id).len() as u32 }),
    }
    // An input whose producer inference could not type (an op the registry
    // does not know) still has the dtype this node's own signature and
    // attributes give it: TensorFlow's graphs are type-checked when built.
    let declared = autoclust_graph::infer::attr_input_dtypes(node);
    for (slot, input) in node.inputs.iter().enumerate() {
        let dtype = match types.output(*input) {
            Some((dtype, _)) => dtype,
            None => match declared.as_ref().and_then(|d| d.get(slot)) {
                Some(d) => d,
                None => return Some(NotCompilable::UnknownInput { slot: slot as u32 }),
            },
        };
        let slot = slot as u32;
        if *dtype == DType::Resource && is_variable_op(op) {
            if !traces_to_var_handle(graph, input.node) {
                return Some(NotCompilable::UntracedHandle { slot });
            }
            continue;
        }
        if !is_supported_dtype(*dtype) {
            return Some(NotCompilable::UnsupportedInputDType { slot, dtype: *dtype });
        }
    }
    None
}

/// Whether a handle comes from a `VarHandleOp` (or a resource `Placeholder`, TF2's captured
/// variable), directly or through `Identity` chains.
fn traces_to_var_handle(graph: &Graph, mut id: NodeId) -> bool {
    for _ in 0..graph.len() + 1 {
        let n = graph.node(id);
        if autoclust_graph::effects::names_variable(n) {
            return true;
        }
        match n.op.as_str() {
            "Identity" if n.inputs.len() == 1 => id = n.inputs[0].node,
            _ => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_set() {
        for op in ["AddV2", "MatMul", "ReadVariableOp", "ResourceApplyAdam", "Const", "Softmax"] {
            assert!(is_jit_op(op), "{op}");
        }
        for op in ["Placeholder", "VarHandleOp", "StringJoin", "PartitionedCall", "Print", "RandomUniform", "Switch"] {
            assert!(!is_jit_op(op), "{op}");
        }
    }

    #[test]
    fn reasons_display() {
        assert_eq!(NotCompilable::UnsupportedOp { op: "Foo".into() }.to_string(), "op Foo is not supported by the JIT");
        assert_eq!(
            NotCompilable::UntracedHandle { slot: 1 }.to_string(),
            "resource input 1 is not traceable to a VarHandleOp"
        );
    }

    #[test]
    fn v1_control_flow_refuses_frames_dead_values_and_loop_producers_only() {
        let g = autoclust_graph::text::parse(
            "x = Placeholder() {dtype = float32, shape = shape[]}
p = Placeholder() {dtype = bool, shape = shape[]}
pre = Neg(x) {T = float32}
enter = Enter(pre) {T = float32, frame_name = \"L\"}
merge = Merge(enter, next) {N = 2, T = float32}
cond = LoopCond(p)
sw = Switch(merge, cond) {T = float32}
body = Neg(sw:1) {T = float32}
next = NextIteration(body) {T = float32}
exit = Exit(sw) {T = float32}
after = Neg(exit) {T = float32}
sw2 = Switch(after, p) {T = float32}
branch = Neg(sw2:1) {T = float32}
unrelated = Neg(x) {T = float32}
",
        )
        .unwrap();
        let v = v1_control_flow(&g);
        let of = |n: &str| v[g.find(n).unwrap().index()].clone();
        assert_eq!(of("pre").as_deref(), Some("enter"), "feeds the loop");
        assert_eq!(of("body").as_deref(), Some("enter"), "inside the frame");
        assert_eq!(of("after"), None, "after a top-level loop: always live in the root frame");
        assert_eq!(of("branch").as_deref(), Some("sw2"), "maybe dead");
        assert_eq!(of("unrelated"), None);
    }
}
