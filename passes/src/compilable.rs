//! Which nodes the clusterer may put in a cluster, and why the others may not.
//!
//! A node is a *candidate* iff the JIT can compile it as part of a pure
//! function: its op is in [`is_jit_op`]'s set (elementwise math, matmul, einsum,
//! reductions, shape ops, softmax/loss and their gradients, identities,
//! constants, and the variable ops the bridge can snapshot and write back),
//! it calls no function, every output and every data input has a known
//! numeric dtype (float32, float64, int32, int64, bool; float16 and bfloat16 outside
//! functions and TensorLists, computed in float32 and rounded per op), and — for resource ops — every resource-handle input is traceable
//! (directly or through `Identity`) to a `VarHandleOp`, or inside a function body to
//! a resource argument, so the bridge knows which handle it snapshots. Never feeds (`Placeholder*`), variable
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
//! the compiler or the bridge cannot run faithfully. The v1 control-flow ops
//! themselves (`Switch`, `Merge`, `Enter`, `Exit`, `NextIteration`, `LoopCond`)
//! are never compiled; the nodes between them are, and
//! [`crate::deadness::DeadnessAnalysis`] (kept here for the clusterer) says
//! which of them may share a cluster: same frame, same deadness predicate.

use std::fmt;

use autoclust_graph::infer::TypeInfo;
use autoclust_graph::jit_ops::dynamic_slice;
use autoclust_graph::{AttrValue, DType, Graph, Node, NodeId};

use crate::deadness::DeadnessAnalysis;

mod branch_shapes;

/// Whether the JIT compiles `op` (given supported dtypes and static shapes): the one list
/// in [`autoclust_graph::jit_ops`], which a compiler test holds to its lowering table.
pub use autoclust_graph::jit_ops::{is_jit_op, is_variable_op};

fn is_supported_dtype(t: DType) -> bool {
    matches!(t, DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64 | DType::Bool)
}

/// Whether the JIT computes `op` in half precision (`float16`, `bfloat16`): in float32 with
/// a rounding after each op (the compiler's `half.rs`), except where the half values cross
/// into functions (functional control flow), live in TensorLists, are reinterpreted
/// (`Bitcast`) or rounded per product (`Cross`), or meet a host-step op (whose interpreter
/// kernel widens half operands its own way).
fn half_ok(op: &str) -> bool {
    !(COMPILED_CONTROL_FLOW.contains(&op)
        || autoclust_graph::jit_ops::is_tensor_list_op(op)
        || autoclust_graph::jit_ops::is_host_op(op)
        || matches!(op, "Bitcast" | "Cross"))
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
    /// Two resource inputs of one op name the same variable (an optimizer's `var` and
    /// `accum`, say): TensorFlow runs such an op on one aliased buffer, in its kernel's
    /// order; a bridge's snapshot and write-back cannot, so the interpreter's kernel
    /// decides (it refuses, naming the op).
    SharedHandle { first: u32, second: u32 },
    /// Excluded by the caller (e.g. left in a cluster below the minimum size).
    Excluded { why: String },
    /// Type and shape inference failed on this node (see [`crate::cluster::Clusterer::run_partial`]).
    Untyped { message: String },
}

impl NotCompilable {
    /// Whether this refusal is a shortfall of the analysis rather than a
    /// decision by design: the node might have been clustered had its types
    /// been worked out. `run`, `bench` and `compile` report these as `note:`
    /// lines (docs/contract.md, "Never silent").
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
                write!(f, "resource input {slot} is not traceable to a VarHandleOp or a function argument")
            }
            NotCompilable::SharedHandle { first, second } => {
                write!(f, "resource inputs {first} and {second} name the same variable")
            }
            NotCompilable::Excluded { why } => f.write_str(why),
            NotCompilable::Untyped { message } => write!(f, "its types could not be inferred: {message}"),
        }
    }
}

/// The compilability of every node, and (for graphs with v1 control flow) the deadness
/// analysis that says which compilable nodes may share a cluster.
#[derive(Clone, Debug, Default)]
pub struct Compilability {
    refusals: Vec<Option<NotCompilable>>,
    deadness: Option<std::sync::Arc<DeadnessAnalysis>>,
}

impl Compilability {
    /// Decides every node of `graph` from its op and inferred types.
    pub fn compute(graph: &Graph, types: &TypeInfo) -> Compilability {
        let _span = tracing::debug_span!("compilability", nodes = graph.len()).entered();
        let deadness = graph
            .nodes()
            .iter()
            .any(|n| autoclust_graph::effects::is_v1_control_flow(&n.op))
            .then(|| std::sync::Arc::new(DeadnessAnalysis::compute(graph)));
        let known = compile_time_known(graph);
        // The graph's successor lists, built once if some node needs its handle's users.
        let successors = std::cell::OnceCell::new();
        let refusals = graph
            .node_ids()
            .map(|id| match () {
                _ if autoclust_graph::effects::is_v1_control_flow(&graph.node(id).op) => {
                    Some(NotCompilable::UnsupportedOp { op: graph.node(id).op.clone() })
                }
                _ if FOLD_ONLY.contains(&graph.node(id).op.as_str())
                    && !graph.node(id).inputs.iter().all(|o| known[o.node.index()]) =>
                {
                    Some(NotCompilable::Excluded {
                        why: format!("{} is compiled only on values known at compile time", graph.node(id).op),
                    })
                }
                _ if autoclust_graph::jit_ops::host_shape_operands(&graph.node(id).op).is_some_and(|ks| {
                    ks.iter().any(|&k| graph.node(id).inputs.get(k).is_some_and(|o| !known[o.node.index()]))
                }) =>
                {
                    Some(NotCompilable::Excluded {
                        why: format!(
                            "{}'s shape operands must be known at compile time (they fix its output's shape)",
                            graph.node(id).op
                        ),
                    })
                }
                _ => refusal(graph, types, id, &known, &successors),
            })
            .collect();
        let mut refusals: Vec<Option<NotCompilable>> = refusals;
        exclude_outside_pass_throughs(graph, &mut refusals);
        Compilability { refusals, deadness }
    }

    /// The deadness analysis, when the graph has v1 control flow.
    pub fn deadness(&self) -> Option<&DeadnessAnalysis> {
        self.deadness.as_deref()
    }

    pub(crate) fn deadness_arc(&self) -> Option<std::sync::Arc<DeadnessAnalysis>> {
        self.deadness.clone()
    }

    /// Uses `deadness` for a graph built by [`Compilability::from_fn`] (tests).
    pub fn with_deadness(mut self, deadness: DeadnessAnalysis) -> Compilability {
        self.deadness = Some(std::sync::Arc::new(deadness));
        self
    }

    /// Built from a decision per node (tests, callers with their own policy).
    pub fn from_fn(graph: &Graph, mut decide: impl FnMut(NodeId) -> Option<NotCompilable>) -> Compilability {
        Compilability { refusals: graph.node_ids().map(&mut decide).collect(), deadness: None }
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

/// Excludes each `Identity`/`Snapshot` whose data inputs and data consumers are all outside
/// clusters (refused): it could join a cluster only through control edges, computing nothing
/// there — and when its value's shape changes from step to step (a fetched
/// `SparseToDense` of a decoder's output, sweep 72) it made the whole cluster it joined
/// recompile per shape until it ran interpreted (megamorphic). Outside, it costs nothing.
fn exclude_outside_pass_throughs(graph: &Graph, refusals: &mut [Option<NotCompilable>]) {
    let candidate = |id: NodeId, refusals: &[Option<NotCompilable>]| {
        let n = graph.node(id);
        refusals[id.index()].is_none()
            && matches!(n.op.as_str(), "Identity" | "Snapshot")
            && !n.inputs.is_empty()
            && n.inputs.iter().all(|o| refusals[o.node.index()].is_some())
    };
    if !graph.node_ids().any(|id| candidate(id, refusals)) {
        return;
    }
    let succ = graph.successors();
    for id in graph.node_ids() {
        if candidate(id, refusals) && succ.data[id.index()].iter().all(|&(u, _, _)| refusals[u.index()].is_some()) {
            refusals[id.index()] = Some(NotCompilable::Excluded {
                why: "a pass-through between nodes outside clusters: nothing to compile".into(),
            });
        }
    }
}

/// Ops the compiler folds but never generates code for (integer shape arithmetic).
const FOLD_ONLY: &[&str] = &["Range", "InvertPermutation", "DynamicStitch", "ParallelDynamicStitch", "ConcatOffset"];

/// For every node: whether its outputs are known when a cluster is compiled for given input
/// shapes — constants, the shapes of anything, and integer shape arithmetic on such values.
/// TensorFlow 2 gradients compute reduction indices so (`FloorMod(Add(rank, axis), rank)`).
fn compile_time_known(graph: &Graph) -> Vec<bool> {
    compile_time_known_with(graph, |_| false)
}

/// [`compile_time_known`] with the `_Arg` nodes of a function body known as `arg_known`
/// says (by the argument's index).
fn compile_time_known_with(graph: &Graph, arg_known: impl Fn(usize) -> bool) -> Vec<bool> {
    let mut known = vec![false; graph.len()];
    let Ok(order) = graph.topo_order() else { return known };
    for id in order {
        let n = graph.node(id);
        let inputs_known = n.inputs.iter().all(|o| known[o.node.index()]);
        known[id.index()] = match n.op.as_str() {
            "Const" => true,
            "_Arg" => n
                .attr("index")
                .and_then(AttrValue::as_int)
                .and_then(|i| usize::try_from(i).ok())
                .is_some_and(&arg_known),
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

/// The nodes of a function body (by name) whose values are known when the body is compiled:
/// its constants, shapes and integer shape arithmetic on them ([`compile_time_known`]), and
/// the arguments `arg_known` lists — the compiler (`autoclust_compiler::control_flow`)
/// compiles a branch with the operands of its `If`/`Case` that are compile-time values fixed,
/// and a loop's condition and body with its loop-invariant compile-time operands fixed. A
/// body that does not instantiate knows its `Const` nodes alone.
fn body_known(
    function: &autoclust_graph::FunctionDef,
    library: &autoclust_graph::Library,
    arg_known: &[bool],
) -> std::collections::HashSet<String> {
    match autoclust_graph::function::instantiate(function, library) {
        Ok(body) => {
            let known = compile_time_known_with(&body, |i| arg_known.get(i).copied().unwrap_or(false));
            let args = function.signature.inputs.iter().enumerate();
            let args = args.filter(|&(i, _)| arg_known.get(i).copied().unwrap_or(false)).map(|(_, a)| arg_key(&a.name));
            body.node_ids()
                .filter(|&id| known[id.index()] && body.node(id).op != "_Arg")
                .map(|id| body.node(id).name.clone())
                .chain(args)
                .collect()
        }
        Err(_) => function.nodes.iter().filter(|n| n.op == "Const").map(|n| n.name.clone()).collect(),
    }
}

/// How [`body_known`] names a function's argument (no node name starts with a NUL).
fn arg_key(name: &str) -> String {
    format!("\0arg/{name}")
}

/// Whether the data inputs `slots` of a function body's node (all of them for `None`) are
/// known when the body is compiled ([`body_known`]).
fn body_operands_known(
    n: &autoclust_graph::RawNode,
    known: &std::collections::HashSet<String>,
    slots: Option<&[usize]>,
) -> bool {
    let data: Vec<&String> = n.inputs.iter().filter(|i| !i.starts_with('^')).collect();
    // A node's output is `node:port_name:index`; an argument is its bare name.
    let producer_known = |input: &String| match input.split_once(':') {
        Some((producer, _)) => known.contains(producer),
        None => known.contains(&arg_key(input)),
    };
    match slots {
        None => data.iter().all(|i| producer_known(i)),
        Some(slots) => slots.iter().all(|&k| data.get(k).is_some_and(|i| producer_known(i))),
    }
}

/// Whether a host-step op in a function body (`jit_ops::HOST_COMPUTE_OPS`) has the operands
/// that fix its output's shape known when the body is compiled ([`body_known`]: a constant of
/// the body, or an operand of the loop or branch known at compile time — a loop variable is
/// not). True for other ops.
fn host_shape_operands_known(n: &autoclust_graph::RawNode, known: &std::collections::HashSet<String>) -> bool {
    let Some(operands) = autoclust_graph::jit_ops::host_shape_operands(&n.op) else { return true };
    body_operands_known(n, known, Some(operands))
}

/// Whether a `Slice`/`StridedSlice` in a function body has an output shape the compiler can
/// know ([`body_known`] operands): its bounds known, or a run-time start the compiler slices
/// at (`autoclust_compiler::host`: a `Slice` of a known size; a `StridedSlice` whose every
/// sliced dimension is shrunk to one element or taken whole, its strides a body constant).
/// `x[: i + 1]` over a loop counter is not (its length is the counter's). True for other ops.
fn slice_shape_known(
    n: &autoclust_graph::RawNode,
    known: &std::collections::HashSet<String>,
    body: &[autoclust_graph::RawNode],
) -> bool {
    match n.op.as_str() {
        "Slice" => body_operands_known(n, known, Some(&[2])),
        "StridedSlice" => {
            if body_operands_known(n, known, Some(&[1, 2, 3])) {
                return true;
            }
            let data: Vec<&String> = n.inputs.iter().filter(|i| !i.starts_with('^')).collect();
            let producer = data.get(3).map(|i| i.split_once(':').map_or(i.as_str(), |(p, _)| p));
            let strides = producer
                .and_then(|p| body.iter().find(|b| b.name == p && b.op == "Const"))
                .and_then(|c| c.attrs.get("value"))
                .and_then(AttrValue::tensor_value)
                .and_then(Result::ok)
                .and_then(|t| t.to_i64_vec());
            strides.is_some_and(|strides| dynamic_slice::strided_slice_runs(&n.attrs, &strides, &[]))
        }
        _ => true,
    }
}

/// For each argument of a loop body, whether its result of the same index returns it
/// unchanged (directly or through `Identity`): a loop-invariant value (the compiler's rule,
/// `autoclust_compiler::control_flow`). All false for a body that does not instantiate.
fn loop_invariant_args(library: &autoclust_graph::Library, body: &str, args: usize) -> Vec<bool> {
    match library.function(body).and_then(|f| autoclust_graph::function::instantiate(f, library).ok()) {
        Some(body) => autoclust_graph::function::passed_through(&body, args),
        None => vec![false; args],
    }
}

/// Which arguments of the functions a `While`/`If`/`Case` calls are known when they are
/// compiled, given which of its operands are: a branch's argument `i` is the node's operand
/// `i + 1` (after the predicate or index); a loop's is its operand `i` when the body passes
/// it through unchanged.
fn function_args_known(
    library: &autoclust_graph::Library,
    op: &str,
    attrs: &autoclust_graph::Attrs,
    operands: &[bool],
) -> Vec<bool> {
    if matches!(op, "While" | "StatelessWhile") {
        let body = attrs.get("body").and_then(AttrValue::as_func).map(|f| f.name.as_str()).unwrap_or_default();
        let through = loop_invariant_args(library, body, operands.len());
        operands.iter().zip(through).map(|(&k, t)| k && t).collect()
    } else {
        operands.iter().skip(1).copied().collect()
    }
}

/// Functional control flow the JIT compiles inside a cluster (the compiler's
/// `control_flow.rs`: each function compiled once, the loop run as calls of machine code)
/// when every function it calls is pure and compilable ([`control_flow_refusal`]).
pub const COMPILED_CONTROL_FLOW: &[&str] = &["While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase"];

/// Why a functional `While`/`If`/`Case` may not join a cluster (`None`: it may): each function it
/// names must be a plain instantiation (no call attributes, no type attributes in its
/// signature) with supported argument and result dtypes, and every node of it an op the
/// JIT compiles that touches no variable (or, recursively, such a `While`/`If`) — so the
/// node is a pure function of its operands, like any other member.
///
/// `known_operands` says which of the node's operands are known when its cluster is compiled
/// (a `Range` or a host step's shape operand in a function may depend on those alone).
pub fn control_flow_refusal(
    library: &autoclust_graph::Library,
    node: &autoclust_graph::Node,
    known_operands: &[bool],
) -> Option<NotCompilable> {
    let mut seen = std::collections::HashSet::new();
    let args = function_args_known(library, &node.op, &node.attrs, known_operands);
    control_flow_refusal_in(library, &node.attrs, &args, &mut seen, false)
}

/// What a loop refused for reading a variable adds to its reason.
const HOIST_HINT: &str = " (when the loop writes no variable, the hoist-loop-reads pass of `run`'s default \
     pipeline reads it before the loop instead: `opt --passes default` shows that graph)";

/// [`control_flow_refusal`] of the node with `attrs`; `in_body` when that node is itself in a
/// function body (the hoist-loop-reads hint is for a graph's loops: the pass does not
/// rewrite loops nested in function bodies).
fn control_flow_refusal_in(
    library: &autoclust_graph::Library,
    attrs: &autoclust_graph::Attrs,
    args_known: &[bool],
    seen: &mut std::collections::HashSet<(String, Vec<bool>)>,
    in_body: bool,
) -> Option<NotCompilable> {
    let why = |why: String| Some(NotCompilable::Excluded { why });
    let functions = attrs.values().flat_map(|a| match a {
        AttrValue::Func(f) => std::slice::from_ref(f),
        AttrValue::List(autoclust_graph::ListValue::Func(fs)) => fs.as_slice(),
        _ => &[],
    });
    for f in functions {
        if !f.attrs.is_empty() {
            return why(format!("its function '{}' is called with instantiation attributes", f.name));
        }
        let Some(function) = library.function(&f.name) else {
            return why(format!("its function '{}' is not in the library", f.name));
        };
        if !seen.insert((f.name.clone(), args_known.to_vec())) {
            continue;
        }
        if !function.signature.attrs.is_empty() {
            return why(format!("its function '{}' has type attributes", f.name));
        }
        let known = body_known(function, library, args_known);
        for n in &function.nodes {
            let inner = n.op.as_str();
            // A `Range` (or other folded shape arithmetic) on values known when the body is
            // compiled folds there; on a loop variable or a computed value it cannot.
            let fold_only = FOLD_ONLY.contains(&inner);
            if fold_only && !body_operands_known(n, &known, None) {
                return why(format!(
                    "its function '{}' runs '{}' ({inner}) on values not known when the body is \
                     compiled (a loop variable or a computed value; {inner} is compiled only on \
                     compile-time values)",
                    f.name, n.name
                ));
            }
            if !slice_shape_known(n, &known, &function.nodes) {
                return why(format!(
                    "its function '{}' runs '{}' ({inner}) whose output shape depends on bounds not \
                     known when the body is compiled (a loop variable or a computed value)",
                    f.name, n.name
                ));
            }
            // Why a nested `While`/`If`/`Case` is refused, to say so in this one's reason.
            let mut nested: Option<String> = None;
            let refused = if COMPILED_CONTROL_FLOW.contains(&inner) {
                let data: Vec<&String> = n.inputs.iter().filter(|i| !i.starts_with('^')).collect();
                let operands: Vec<bool> = (0..data.len()).map(|k| body_operands_known(n, &known, Some(&[k]))).collect();
                let args = function_args_known(library, inner, &n.attrs, &operands);
                nested = match control_flow_refusal_in(library, &n.attrs, &args, seen, true) {
                    Some(NotCompilable::Excluded { why }) => Some(why),
                    Some(other) => Some(other.to_string()),
                    None => branch_shapes::branch_shape_conflict(library, inner, &n.attrs, &[]),
                };
                nested.is_some()
            } else {
                library.function(inner).is_some()
                    || n.attrs.values().any(|a| a.is_func())
                    || !is_jit_op(inner)
                    || is_variable_op(inner)
                    || matches!(n.attrs.get("_XlaCompile"), Some(AttrValue::B(false)))
                    || !host_shape_operands_known(n, &known)
                    || autoclust_graph::jit_ops::draws_unsigned(
                        inner,
                        n.attrs.get("dtype").and_then(AttrValue::as_type),
                    )
            };
            // A body node typed by its attributes for a dtype the JIT does not compute (a
            // uint8 image moved in a `map_fn`, strings): the body would run in the interpreter.
            let unsupported = |t: &DType| {
                !(is_supported_dtype(*t)
                    || *t == DType::Variant
                    || *t == DType::UInt64 && autoclust_graph::jit_ops::UINT64_KEY_OPS.contains(&inner)
                    || autoclust_graph::jit_ops::is_host_int(*t) && autoclust_graph::jit_ops::takes_host_ints(inner))
            };
            // An op the JIT lowers, but not for this type (a float64 `MatMul` in an LSTM loop).
            if let Some(what) =
                autoclust_graph::jit_ops::float_type_refusal(inner, n.attrs.get("T").and_then(AttrValue::as_type))
                    .filter(|_| !refused)
            {
                return why(format!(
                    "its function '{}' runs '{}' ({what}), which the JIT does not compile",
                    f.name, n.name
                ));
            }
            let bad_dtype = n.attrs.values().find_map(|a| match a {
                AttrValue::Type(t) => Some(*t).filter(unsupported),
                AttrValue::List(autoclust_graph::ListValue::Type(ts)) => ts.iter().copied().find(unsupported),
                _ => None,
            });
            if let Some(t) = bad_dtype.filter(|_| !refused) {
                if t.is_half() {
                    return why(format!(
                        "its function '{}' computes in {} ('{}', {inner}): the JIT compiles half \
                         precision outside functional control flow only",
                        f.name,
                        t.name(),
                        n.name
                    ));
                }
                return why(format!(
                    "its function '{}' runs '{}' ({inner}) on {}, which the JIT does not compile",
                    f.name,
                    n.name,
                    t.name()
                ));
            }
            if refused && autoclust_graph::jit_ops::is_host_op(inner) && !host_shape_operands_known(n, &known) {
                return why(format!(
                    "its function '{}' runs '{}' ({inner}), whose shape operands are not known when \
                     the body is compiled (a constant of the function or an operand known at compile time)",
                    f.name, n.name
                ));
            }
            if refused {
                // Only a loop's reads are hoisted (a branch's read runs only when its branch is
                // taken: reading it before the `If` would read what the program may not).
                let hoistable = inner == "ReadVariableOp" && attrs.get("body").is_some() && !in_body;
                let hint = if hoistable { HOIST_HINT } else { "" };
                if let Some(nested) = nested {
                    return why(format!("its function '{}' runs '{}' ({inner}), and {nested}", f.name, n.name));
                }
                return why(format!(
                    "its function '{}' runs '{}' ({inner}), which the JIT does not compile{hint}",
                    f.name, n.name
                ));
            }
        }
        let sig = &function.signature;
        let passable = |t: DType| is_supported_dtype(t) || t == DType::Variant;
        if let Some(arg) = sig.inputs.iter().chain(&sig.outputs).find(|a| !a.dtype.is_some_and(passable)) {
            return why(format!(
                "its function '{}' passes '{}' of a dtype the JIT does not compile ({})",
                f.name,
                arg.name,
                arg.dtype.map_or_else(|| "a type attribute".to_string(), |d| d.name().to_string())
            ));
        }
    }
    None
}

fn refusal(
    graph: &Graph,
    types: &TypeInfo,
    id: NodeId,
    known: &[bool],
    successors: &std::cell::OnceCell<autoclust_graph::Successors>,
) -> Option<NotCompilable> {
    let node = graph.node(id);
    let op = node.op.as_str();
    let control_flow = COMPILED_CONTROL_FLOW.contains(&op);
    if control_flow {
        let operands: Vec<bool> = node.inputs.iter().map(|o| known[o.node.index()]).collect();
        if let Some(why) = control_flow_refusal(&graph.library, node, &operands) {
            return Some(why);
        }
        let operand_types: Vec<Option<(DType, autoclust_graph::Shape)>> =
            node.inputs.iter().map(|&o| types.output(o).cloned()).collect();
        if let Some(why) = branch_shapes::branch_shape_conflict(&graph.library, op, &node.attrs, &operand_types) {
            return Some(NotCompilable::Excluded { why });
        }
    } else if graph.library.function(op).is_some() || node.attrs.values().any(|a| a.is_func()) {
        return Some(NotCompilable::FunctionCall);
    }
    match op {
        "Placeholder" if autoclust_graph::effects::names_variable(node) => return Some(NotCompilable::VariableHandle),
        "Placeholder" | "PlaceholderWithDefault" | "PlaceholderV2" => return Some(NotCompilable::Feed),
        "VarHandleOp" | "_VarHandlesOp" | "VariableV2" | "Variable" => return Some(NotCompilable::VariableHandle),
        _ => {}
    }
    if crate::encapsulate::is_guard(op) {
        return guard_refusal(types, node);
    }
    if op == "RngReadAndSkip" {
        return Some(NotCompilable::Excluded {
            why: "RngReadAndSkip reads and advances a random generator's state variable \
                  (tf.random.Generator) in one step, which the bridge's snapshot and write-back \
                  do not run: it stays outside clusters"
                .into(),
        });
    }
    if !control_flow && !is_jit_op(op) {
        return Some(NotCompilable::UnsupportedOp { op: op.to_string() });
    }
    if matches!(node.attr("_XlaCompile"), Some(AttrValue::B(false))) {
        return Some(NotCompilable::DisabledByAttribute);
    }
    // The bridge snapshots a variable typed by its users; a `VariableShape` (no dtype
    // attribute) of a handle no other user types — a gradient loop body's argument — would
    // leave the snapshot untyped and its whole cluster unencapsulated.
    if op == "VariableShape" {
        let typed = node.inputs.first().is_some_and(|h| {
            let successors = successors.get_or_init(|| graph.successors());
            autoclust_graph::effects::variable_dtype_in(graph, successors, h.node).is_some()
        });
        if !typed {
            return Some(NotCompilable::Excluded {
                why: "no user of its variable's handle here says the variable's dtype, which the bridge's \
                      snapshot needs: it stays outside clusters"
                    .into(),
            });
        }
    }
    // The JIT's convolutions and bias adds are NHWC only (as TensorFlow's CPU kernels).
    if matches!(
        op,
        "Conv2D"
            | "Conv2DBackpropInput"
            | "Conv2DBackpropFilter"
            | "DepthwiseConv2dNative"
            | "DepthwiseConv2dNativeBackpropInput"
            | "DepthwiseConv2dNativeBackpropFilter"
            | "MaxPool"
            | "MaxPoolGrad"
            | "AvgPool"
            | "AvgPoolGrad"
            | "BiasAdd"
            | "BiasAddGrad"
            | "FusedBatchNorm"
            | "FusedBatchNormV2"
            | "FusedBatchNormV3"
            | "FusedBatchNormGrad"
            | "FusedBatchNormGradV2"
            | "FusedBatchNormGradV3"
    ) && node.attr("data_format").and_then(AttrValue::as_str).is_some_and(|f| f != "NHWC")
    {
        return Some(NotCompilable::UnsupportedOp { op: format!("{op} in a data_format other than NHWC") });
    }
    // The JIT's transcendental routines, GEMM, softmax, arg-extreme, bias-gradient and
    // resize-gradient kernels are float32 only; some elementwise ops have no float64 loop.
    if let Some(op) = autoclust_graph::jit_ops::float_type_refusal(op, node.attr("T").and_then(AttrValue::as_type)) {
        return Some(NotCompilable::UnsupportedOp { op });
    }
    let dtype_attr = node.attr("dtype").and_then(AttrValue::as_type);
    if autoclust_graph::jit_ops::draws_unsigned(op, dtype_attr) {
        let t = dtype_attr.map_or("uint64 (the default)".to_string(), |t| t.name().to_string());
        return Some(NotCompilable::UnsupportedOp { op: format!("{op} drawing {t}") });
    }
    // A negative `batch_dims` counts from the indices' rank, which the bridge's lowering to
    // `GatherV2` (its axis) does not know: the runtime's kernel gathers it.
    if op == "ResourceGather" && node.attr("batch_dims").and_then(AttrValue::as_int).is_some_and(|b| b < 0) {
        return Some(NotCompilable::UnsupportedOp { op: "ResourceGather with a negative batch_dims".into() });
    }
    // Stateless random ops pass uint64 keys and counters between their kernels.
    let uint64_ok = autoclust_graph::jit_ops::UINT64_KEY_OPS.contains(&op);
    // TensorLists (variant scalars) pass between the list ops, the loops and branches that
    // carry them, and the views and sums of lists; the compiler types them (its `lists.rs`).
    let variant_ok = control_flow
        || autoclust_graph::jit_ops::is_tensor_list_op(op)
        || matches!(op, "Identity" | "Snapshot" | "StopGradient" | "AddN");
    // The integer types the JIT's loops do not compute, for the ops it runs by the
    // interpreter's kernel on them (an image's uint8 pixels cast to float).
    let host_int_ok = autoclust_graph::jit_ops::takes_host_ints(op);
    let half_ok = half_ok(op);
    // The compiler's lists hold float32, float64 and integer elements (`lists.rs`).
    if let Some(t) = node.attr("element_dtype").and_then(AttrValue::as_type).filter(|t| t.is_half()) {
        if autoclust_graph::jit_ops::is_tensor_list_op(op) {
            return Some(NotCompilable::Excluded {
                why: format!("a TensorList of {} elements, which the JIT does not compile", t.name()),
            });
        }
    }
    let is_supported_dtype = |t: DType| {
        is_supported_dtype(t)
            || uint64_ok && t == DType::UInt64
            || variant_ok && t == DType::Variant
            || half_ok && t.is_half()
            || host_int_ok && autoclust_graph::jit_ops::is_host_int(t)
    };
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
    let mut variables: Vec<(u32, String)> = Vec::new();
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
            let Some(variable) = traced_variable(graph, input.node) else {
                return Some(NotCompilable::UntracedHandle { slot });
            };
            if let Some((first, _)) = variables.iter().find(|(_, v)| *v == variable) {
                return Some(NotCompilable::SharedHandle { first: *first, second: slot });
            }
            variables.push((slot, variable));
            continue;
        }
        if !is_supported_dtype(*dtype) {
            return Some(NotCompilable::UnsupportedInputDType { slot, dtype: *dtype });
        }
    }
    None
}

/// Why a guard (`Assert`) may not join a cluster, if it may not. The JIT never sees it:
/// encapsulation runs it right after the cluster's call, on the call's outputs
/// (`crate::encapsulate`, "Guards"), so its data inputs may have any dtype a value outside
/// a cluster has (strings included: they come from outside); its condition must be a bool.
fn guard_refusal(types: &TypeInfo, node: &Node) -> Option<NotCompilable> {
    if matches!(node.attr("_XlaCompile"), Some(AttrValue::B(false))) {
        return Some(NotCompilable::DisabledByAttribute);
    }
    let declared = autoclust_graph::infer::attr_input_dtypes(node);
    for (slot, input) in node.inputs.iter().enumerate() {
        let dtype = match types.output(*input) {
            Some((dtype, _)) => *dtype,
            None => match declared.as_ref().and_then(|d| d.get(slot)) {
                Some(d) => *d,
                None => return Some(NotCompilable::UnknownInput { slot: slot as u32 }),
            },
        };
        let fine = if slot == 0 {
            dtype == DType::Bool
        } else {
            is_supported_dtype(dtype) || dtype.is_half() || dtype == DType::String
        };
        if !fine {
            return Some(NotCompilable::UnsupportedInputDType { slot: slot as u32, dtype });
        }
    }
    None
}

/// Whether a function body's resource argument (`_Arg` with `T = resource`) is `node`: the
/// handle of whichever variable the caller passes. A bridge inside the body takes it as it
/// takes a variable node's handle; two such arguments may name one variable (the bridge
/// allows it, `runtime::bridge`), so nothing may assume they differ ([`handle_variables`]).
pub(crate) fn is_resource_argument(node: &Node) -> bool {
    node.op == "_Arg" && node.attr("T").and_then(AttrValue::as_type) == Some(DType::Resource)
}

/// Whether handles from `node` are ones a bridge can take: a variable node
/// ([`autoclust_graph::effects::names_variable`]) or a resource argument
/// ([`is_resource_argument`]).
pub(crate) fn is_handle_source(node: &Node) -> bool {
    autoclust_graph::effects::names_variable(node) || is_resource_argument(node)
}

/// What a handle names, followed through `Identity` chains: for a `VarHandleOp` (or a
/// resource `Placeholder`, TF2's captured variable) its variable — the `shared_name`, else
/// its node name (two handles of one `shared_name` are one variable), and `true`; for a
/// resource argument of a function body ([`is_resource_argument`]) the argument — a key
/// no variable has, and `false`: it may be any variable.
fn traced_source(graph: &Graph, mut id: NodeId) -> Option<(String, bool)> {
    for _ in 0..graph.len() + 1 {
        let n = graph.node(id);
        if autoclust_graph::effects::names_variable(n) {
            let shared = n.attr("shared_name").and_then(AttrValue::as_str).filter(|s| !s.is_empty());
            return Some((shared.unwrap_or(&n.name).to_string(), true));
        }
        if is_resource_argument(n) {
            return Some((format!("\0argument/{}", n.name), false));
        }
        match n.op.as_str() {
            "Identity" if n.inputs.len() == 1 => id = n.inputs[0].node,
            _ => return None,
        }
    }
    None
}

/// The variable (or function argument, [`traced_source`]) a handle names, through
/// `Identity` chains: the key the bridge groups a cluster's resource ops by.
pub(crate) fn traced_variable(graph: &Graph, id: NodeId) -> Option<String> {
    traced_source(graph, id).map(|(key, _)| key)
}

/// Which inputs of a variable op the bridge runs ([`is_variable_op`]) are variable handles:
/// its registry schema's resource inputs ([`OpSchema::resource_inputs`], the one home of
/// that fact); `None` for every other op.
///
/// [`OpSchema::resource_inputs`]: autoclust_graph::registry::OpSchema::resource_inputs
pub(crate) fn handle_slots(op: &str) -> Option<Vec<usize>> {
    is_variable_op(op).then(|| {
        autoclust_graph::registry::lookup(op).map(|schema| schema.resource_inputs().collect()).unwrap_or_default()
    })
}

/// The variables a member's handle operands name (`None` for one no `Identity` chain
/// resolves to a variable node — a function's resource argument included: it may be any
/// variable).
pub(crate) fn handle_variables(graph: &Graph, n: NodeId) -> Vec<Option<String>> {
    let node = graph.node(n);
    let Some(slots) = handle_slots(&node.op) else { return Vec::new() };
    slots
        .iter()
        .filter_map(|&slot| node.inputs.get(slot))
        .map(|o| traced_source(graph, o.node).and_then(|(key, variable)| variable.then_some(key)))
        .collect()
}

/// The variables of a *multi-variable update*: an op that reads two or more variables in
/// one atomic step and writes them (every `ResourceApply*` with slots: TensorFlow locks all
/// its variables before reading any), sorted; `None` for any other op. A `None` inside is a
/// handle no `Identity` chain resolves (it may be any variable).
pub(crate) fn multi_variable_update(graph: &Graph, n: NodeId) -> Option<Vec<Option<String>>> {
    let kind = autoclust_graph::effects::resource_kind(graph.node(n), &graph.library)?;
    if !kind.reads() || !kind.writes() {
        return None;
    }
    // Fewer than two handle operands: not one (tracing each handle to its variable's name
    // was most of the clusterer's set-up on a graph of single-variable updates).
    let node = graph.node(n);
    if handle_slots(&node.op)?.iter().filter(|&&slot| slot < node.inputs.len()).count() < 2 {
        return None;
    }
    let mut vars = handle_variables(graph, n);
    vars.sort();
    Some(vars)
}

/// Whether two multi-variable updates ([`multi_variable_update`]) may not share a cluster:
/// they share some variable (or might: an unresolved handle) but not all. A cluster reads
/// its variables in one snapshot and computes its members in one order; whichever of the
/// two comes second would read the shared variables from the first and its others from the
/// snapshot, a combination no interleaving of the graph produces once another cluster
/// writes one of those others in between (each update reads all its variables at one
/// instant). Two updates of the same variables may follow each other: the second reads
/// all of them from the first. (A path between the two is a write→read pair, which the
/// safety analysis refuses anyway.)
pub(crate) fn updates_conflict(a: &[Option<String>], b: &[Option<String>]) -> bool {
    let resolved = |v: &[Option<String>]| v.iter().all(Option::is_some);
    if a == b && resolved(a) {
        return false;
    }
    a.iter().any(|x| b.iter().any(|y| x.is_none() || y.is_none() || x == y))
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

    /// Every variable op the bridge runs names its variables by leading handle inputs the
    /// registry knows, and only variable ops have handle slots.
    #[test]
    fn every_variable_op_has_leading_handle_slots() {
        for op in autoclust_graph::jit_ops::VARIABLE_OPS {
            let slots = handle_slots(op).unwrap_or_else(|| panic!("{op}: no slots"));
            assert!(!slots.is_empty() && slots.iter().enumerate().all(|(i, &s)| i == s), "{op}: {slots:?}");
        }
        assert_eq!(handle_slots("ResourceApplyAdamWithAmsgrad").unwrap(), [0, 1, 2, 3]);
        for op in ["MatMul", "VarHandleOp", "ResourceSparseApplyAdagrad"] {
            assert!(handle_slots(op).is_none(), "{op}");
        }
    }
}
