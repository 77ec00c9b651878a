//! Shape propagation and compile-time evaluation of a cluster body.
//!
//! Walks the body in topological order for concrete input dtypes and shapes, giving
//! every value a dtype and a fully known shape, classifying every node for the planner
//! ([`NodeKind`]), and folding values that are known at compile time (`Const`, `Shape`,
//! `Size`, `Rank`, `BroadcastGradientArgs`, `ZerosLike`/`OnesLike`/`Fill`, and any small
//! computation whose inputs are all constants). Folding uses the same kernels the
//! compiled code calls ([`crate::kernels`]) and an exact scalar evaluator for elementwise
//! ops, so it cannot disagree with run time (`fold.rs`).
//!
//! One file per op family, each answering for its own ops and "no lowering" for the rest:
//! `elementwise.rs` (the fused loops' [`EwOp`]s, division-like and bitwise ops),
//! `movement.rs` (shapes, views, copies, gathers and scatters), `nn.rs` (GEMM, einsum,
//! softmax and losses, convolutions, pooling, batch norm, resizes), `reduce.rs`
//! (reductions and scans) and `random.rs` (the stateless samplers). This file walks the
//! body, folds the compile-time ops (`Shape`, `Fill`, …) and dispatches the rest. Which
//! ops the families lower is the list `autoclust_graph::jit_ops` keeps for the clusterer; a
//! test below holds the two equal.
//!
//! Shapes have one account: the graph crate's registry, whose shape functions `infer` and
//! `verify` run. A family decides a node's kind, its output dtypes and its lowering's
//! parameters; its output shapes are the registry's shape function evaluated on the concrete
//! input shapes and compile-time operands ([`Outputs`]), and a value this file folds must
//! have the shape the registry gives it ([`agree_with_registry`]). So the compiler never
//! lowers a node to other shapes than the rest of the system infers for it.

use std::sync::Arc;

use autoclust_graph::arith::TfArith;
use autoclust_graph::{AttrValue, DType, Graph, Node, NodeId, Output, Tensor, TensorData};

use crate::kernels::KernelOp;
use crate::layout::strides_of;
use crate::reduce::ReduceKind;
use crate::scatter::ScatterKind;
use crate::CompileError;

mod elementwise;
mod fold;
mod movement;
mod nn;
mod random;
mod reduce;

pub use elementwise::EwOp;
use fold::*;

/// What the planner does with a node.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeKind {
    /// `_Arg` with its index.
    Arg(usize),
    /// `_Retval` with its index.
    Retval(usize),
    /// Every output is a compile-time constant (Const, Shape, folded computations).
    Constant,
    /// Output shares the input buffer with a new shape (Reshape, ExpandDims, Squeeze, …).
    View,
    /// Elementwise; output dtype in `outputs[0]`.
    Elementwise(EwOp),
    /// `MatMul` with transposes.
    MatMul { transpose_a: bool, transpose_b: bool },
    /// A library kernel; only the data inputs listed in `data_inputs` are passed.
    Kernel { op: KernelOp, data_inputs: Vec<usize> },
}

/// A value's type, shape and (when known at compile time) contents.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueInfo {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub konst: Option<Tensor>,
    /// For a TensorList (a `DT_VARIANT` scalar), what is known of it ([`crate::lists`]).
    pub list: Option<crate::lists::ListType>,
}

impl ValueInfo {
    /// A compile-time constant.
    pub fn constant(t: Tensor) -> ValueInfo {
        konst(t)
    }

    pub fn elements(&self) -> usize {
        self.shape.iter().product()
    }
}

/// The analysis of one node.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeInfo {
    pub kind: NodeKind,
    pub outputs: Vec<ValueInfo>,
}

/// The analysis of a body.
#[derive(Clone, Debug)]
pub struct Analysis {
    pub order: Vec<NodeId>,
    pub nodes: Vec<Option<NodeInfo>>,
    /// `_Retval` nodes' inputs by index.
    pub retvals: Vec<Output>,
}

impl Analysis {
    pub fn value(&self, o: Output) -> &ValueInfo {
        &self.nodes[o.node.index()].as_ref().expect("analysed").outputs[o.port as usize]
    }
}

/// Largest constant the folder materialises from a computation (elements).
const FOLD_LIMIT: usize = 1 << 16;

/// Analyses `body` for the given input signature.
/// `constants` fixes the values of some arguments (`(index, value)`): they
/// are compile-time constants like a `Const` (see [`crate::constant_args`]).
/// `While`/`If` nodes have their functions compiled by `compiler` (named after `name`; see
/// [`crate::control_flow`]).
pub fn analyze(
    body: &Graph,
    inputs: &[(DType, Vec<usize>)],
    lists: &[(usize, crate::lists::ListType)],
    constants: &[(usize, Tensor)],
    compiler: &crate::Compiler,
    name: &str,
) -> Result<Analysis, CompileError> {
    let (order, full_order) = live_order(body)?;
    let mut nodes: Vec<Option<NodeInfo>> = vec![None; body.len()];
    let mut retvals: Vec<Option<Output>> = Vec::new();
    for &id in &order {
        let node = body.node(id);
        let ins: Vec<ValueInfo> = node
            .inputs
            .iter()
            .map(|o| {
                nodes[o.node.index()]
                    .as_ref()
                    .and_then(|n| n.outputs.get(o.port as usize))
                    .cloned()
                    .ok_or_else(|| CompileError::Invalid(format!("node '{}' reads a missing output", node.name)))
            })
            .collect::<Result<_, _>>()?;
        let info = match node.op.as_str() {
            "While" | "StatelessWhile" => crate::control_flow::analyze_while(node, &ins, body, compiler, name)?,
            "If" | "StatelessIf" | "Case" | "StatelessCase" => {
                crate::control_flow::analyze_branches(node, &ins, body, compiler, name)?
            }
            op if crate::lists::is_list_op(op) => crate::lists::analyze_list_op(node, &ins, compiler)?,
            "Identity" | "Snapshot" | "StopGradient" | "AddN"
                if ins.first().is_some_and(|v| v.dtype == DType::Variant) =>
            {
                crate::lists::analyze_list_op(node, &ins, compiler)?
            }
            _ if let Some(host) = analyze_host_member(body, node, &ins, compiler) => host?,
            _ => {
                let mut info = analyze_node(node, &ins, inputs, constants)?;
                if let (NodeKind::Arg(i), Some(out)) = (&info.kind, info.outputs.first_mut()) {
                    out.list = lists.iter().find(|(k, _)| k == i).map(|(_, t)| t.clone());
                }
                info
            }
        };
        for o in &info.outputs {
            within_budget(node, o.dtype, &o.shape)?;
        }
        if let NodeKind::Retval(i) = info.kind {
            if retvals.len() <= i {
                retvals.resize(i + 1, None);
            }
            retvals[i] = Some(node.inputs[0]);
        }
        nodes[id.index()] = Some(info);
    }
    let retvals = retvals
        .into_iter()
        .enumerate()
        .map(|(i, r)| r.ok_or_else(|| CompileError::Invalid(format!("no _Retval with index {i}"))))
        .collect::<Result<_, _>>()?;
    check_dead_nodes(body, &full_order, &nodes, inputs, constants, compiler)?;
    Ok(Analysis { order, nodes, retvals })
}

/// Integer constants up to this many elements are given to the registry's shape functions
/// as values (the graph crate's inference tracks as many).
const REGISTRY_VALUE_LIMIT: usize = 1024;

/// The registry's shape function (the graph crate's one account of each op's shapes, which
/// `infer` and `verify` use) evaluated on the node's concrete input shapes and the values of
/// its compile-time integer inputs: every output shape it determines must be the shape the
/// analysis gives, or the node is declined (`Invalid`: the interpreter runs the body and its
/// kernel reports whatever is wrong). So the compiler never lowers a node to other shapes
/// than the rest of the system infers for it; a test over every lowering holds the two in
/// step.
fn agree_with_registry(node: &Node, ins: &[ValueInfo], info: &NodeInfo) -> Result<(), CompileError> {
    use autoclust_graph::registry::lookup;
    if matches!(info.kind, NodeKind::Arg(_) | NodeKind::Retval(_)) {
        return Ok(());
    }
    let Some(schema) = lookup(&node.op) else { return Ok(()) };
    let out_types: Vec<DType> = info.outputs.iter().map(|o| o.dtype).collect();
    let want = registry_shapes(node, schema, ins, &out_types)?;
    for (i, (got, want)) in info.outputs.iter().zip(&want).enumerate() {
        if let Some(dims) = want.to_known() {
            if dims != got.shape {
                return Err(CompileError::Invalid(format!(
                    "node '{}' ({}): output {i} analysed as {:?}, but its shape function gives {want}",
                    node.name, node.op, got.shape
                )));
            }
        }
    }
    Ok(())
}

/// The registry's shape function of `node` on the concrete shapes of `ins` and the values of
/// its small compile-time integer operands (a malformed node is `Invalid`: its kernel reports
/// it). What the compiler's own shapes are held to, and what types a host step.
pub(crate) fn registry_shapes(
    node: &Node,
    schema: &autoclust_graph::registry::OpSchema,
    ins: &[ValueInfo],
    out_types: &[DType],
) -> Result<Vec<autoclust_graph::Shape>, CompileError> {
    use autoclust_graph::registry::{InferCtx, InputFacts};
    use autoclust_graph::{Dim, Shape};
    let shapes: Vec<Shape> = ins.iter().map(|v| Shape::known(&v.shape)).collect();
    let values: Vec<Option<Vec<Dim>>> = ins
        .iter()
        .map(|v| {
            let t = v.konst.as_ref().filter(|t| t.dtype.is_integer() && t.num_elements() <= REGISTRY_VALUE_LIMIT)?;
            Some(t.to_i64_vec()?.into_iter().map(Some).collect())
        })
        .collect();
    let facts: Vec<InputFacts<'_>> = ins
        .iter()
        .zip(&shapes)
        .zip(&values)
        .map(|((v, shape), value)| InputFacts { dtype: Some(v.dtype), shape, value: value.as_deref(), handle: None })
        .collect();
    let ctx = InferCtx { node, inputs: &facts, out_types };
    schema.infer_shapes(&ctx).map_err(|e| CompileError::Invalid(format!("node '{}' ({}): {e}", node.name, node.op)))
}

/// The output values of a node an op family lowers. Their shapes are the registry's shape
/// function evaluated on the node's concrete input shapes and compile-time integer operands
/// ([`registry_shapes`]): the graph crate's one account of each op's shapes, the one `infer`
/// and `verify` use. A family decides a node's kind, its output dtypes and its lowering's
/// parameters (strides, axes, windows), never its output shapes; a node whose shape function
/// refuses the operands is declined (`Invalid`, so the interpreter's kernel reports it), one
/// whose outputs it leaves unknown even at concrete shapes is not compiled.
pub(super) struct Outputs<'a> {
    node: &'a Node,
    ins: &'a [ValueInfo],
}

impl Outputs<'_> {
    /// The node's outputs, one per dtype given, in order.
    fn typed(&self, dtypes: &[DType]) -> Result<Vec<ValueInfo>, CompileError> {
        self.refined(dtypes, &[])
    }

    /// As [`Outputs::typed`], except that an output the shape function leaves open (TensorFlow's
    /// leaves `FusedBatchNormV3`'s third reserve space unknown) takes the shape the kernel
    /// gives it, `kernel[i]`, which must fit what the shape function does say.
    fn refined(&self, dtypes: &[DType], kernel: &[Option<Vec<usize>>]) -> Result<Vec<ValueInfo>, CompileError> {
        let node = self.node;
        if node.op == crate::half::ROUND_OP {
            // The compiler's own rounding of a float32 value to half precision (`crate::half`),
            // which no graph the registry types contains: one operand, its shape.
            let x = self
                .ins
                .first()
                .ok_or_else(|| CompileError::Invalid(format!("node '{}' has no operand", node.name)))?;
            return Ok(vec![vi(dtypes.first().copied().unwrap_or(x.dtype), x.shape.clone())]);
        }
        let schema = autoclust_graph::registry::lookup(&node.op)
            .ok_or_else(|| CompileError::unsupported(node, "the registry has no shape function for it"))?;
        let shapes = registry_shapes(node, schema, self.ins, dtypes)?;
        if shapes.len() != dtypes.len() {
            return Err(CompileError::Invalid(format!(
                "node '{}' ({}): its shape function gives {} outputs, the lowering {}",
                node.name,
                node.op,
                shapes.len(),
                dtypes.len()
            )));
        }
        shapes
            .iter()
            .zip(dtypes)
            .enumerate()
            .map(|(i, (shape, &dtype))| {
                let open =
                    || CompileError::unsupported(node, format!("its shape function leaves output {i} as {shape}"));
                let dims = match (shape.to_known(), kernel.get(i).and_then(Option::as_ref)) {
                    (Some(dims), _) => dims,
                    (None, Some(k)) => {
                        autoclust_graph::registry::merge_shapes(shape, &autoclust_graph::Shape::known(k))
                            .ok()
                            .and_then(|s| s.to_known())
                            .ok_or_else(open)?
                    }
                    (None, None) => return Err(open()),
                };
                within_budget(node, dtype, &dims)?;
                Ok(vi(dtype, dims))
            })
            .collect()
    }

    /// The node's one output, of this dtype.
    fn one(&self, dtype: DType) -> Result<ValueInfo, CompileError> {
        let mut v = self.typed(&[dtype])?;
        Ok(v.pop().expect("one output"))
    }

    /// The shape of the node's one output, of this dtype.
    fn shape(&self, dtype: DType) -> Result<Vec<usize>, CompileError> {
        Ok(self.one(dtype)?.shape)
    }
}

/// A member the compiled code runs by the interpreter's kernel (a host step): a slice with
/// run-time bounds whose output shape is known, a cast from or to an integer type the loops
/// do not compute (uint8 pixels), a fake-quantisation gradient, a host compute op. `None`
/// for any other node. Live and dead members alike are analysed here, so a body is never
/// declined for a dead node its live twin would compile.
fn analyze_host_member(
    body: &Graph,
    node: &Node,
    ins: &[ValueInfo],
    compiler: &crate::Compiler,
) -> Option<Result<NodeInfo, CompileError>> {
    Some(match node.op.as_str() {
        "StridedSlice" if ins.len() == 4 && (ins[1].konst.is_none() || ins[2].konst.is_none()) => {
            crate::host::analyze_dynamic_slice(node, ins, &crate::host::strided_slice_bounds(body, node), compiler)
        }
        "Slice" if ins.len() == 3 && ins[1].konst.is_none() && ins[2].konst.is_some() => {
            crate::host::analyze_dynamic_begin_slice(node, ins, compiler)
        }
        "Cast"
            if ins.first().is_some_and(|v| autoclust_graph::jit_ops::is_host_int(v.dtype))
                || attr_type(node, "DstT").is_some_and(autoclust_graph::jit_ops::is_host_int) =>
        {
            crate::host::analyze_host_op(node, ins, compiler)
        }
        op if crate::host::is_fake_quant_grad(op) => crate::host::analyze_fake_quant_grad(node, ins, compiler),
        op if crate::host::is_host_op(op) => crate::host::analyze_host_op(node, ins, compiler),
        _ => return None,
    })
}

/// Checks the nodes no result needs (a gradient only a control edge waited for, whose
/// control edges encapsulation dropped): they are not computed, but the plain run would
/// run them and its kernel refuse a malformed one, so a body holding one the analysis
/// declines is declined as a whole (`Invalid`) and the interpreter, which runs every node
/// of a body, reports it — or runs it, when the compiler merely could not.
fn check_dead_nodes(
    body: &Graph,
    order: &[NodeId],
    live: &[Option<NodeInfo>],
    inputs: &[(DType, Vec<usize>)],
    constants: &[(usize, Tensor)],
    compiler: &crate::Compiler,
) -> Result<(), CompileError> {
    let mut dead: Vec<Option<NodeInfo>> = vec![None; body.len()];
    for &id in order {
        let node = body.node(id);
        if live[id.index()].is_some() || matches!(node.op.as_str(), "_Arg" | "_Retval") {
            continue;
        }
        let ins: Option<Vec<ValueInfo>> = node
            .inputs
            .iter()
            .map(|o| {
                let info = live[o.node.index()].as_ref().or(dead[o.node.index()].as_ref())?;
                info.outputs.get(o.port as usize).cloned()
            })
            .collect();
        // Past a node left unchecked (control flow, lists), nothing is known to check.
        let Some(ins) = ins else { continue };
        if ins.iter().any(|v| v.dtype == DType::Variant) || crate::lists::is_list_op(&node.op) {
            continue;
        }
        if autoclust_graph::effects::RUNS_NAMED_FUNCTIONS.contains(&node.op.as_str()) {
            continue;
        }
        let info = analyze_host_member(body, node, &ins, compiler)
            .unwrap_or_else(|| analyze_node(node, &ins, inputs, constants));
        match info {
            Ok(info) => dead[id.index()] = Some(info),
            Err(e) => {
                return Err(CompileError::Invalid(format!("node '{}', which no result needs: {e}", node.name)));
            }
        }
    }
    Ok(())
}

/// Declines (so the interpreter runs the body and its kernel reports the error, naming the
/// node) an output past the tensor budget (`autoclust_graph::limits`), before a folded
/// constant or a buffer is sized from it. Checked for every node's outputs, so the shapes
/// the rest of the analysis multiplies out never overflow.
fn within_budget(node: &Node, dtype: DType, shape: &[usize]) -> Result<(), CompileError> {
    autoclust_graph::limits::tensor_elements(dtype, shape)
        .map(drop)
        .map_err(|e| CompileError::unsupported(node, e.to_string()))
}

/// Dimensions from an operand's value (`Fill`'s dims, `BroadcastTo`'s shape); a negative one
/// declines, so the interpreter's kernel reports it.
fn dims_of(node: &Node, dims: &[i64], what: &str) -> Result<Vec<usize>, CompileError> {
    dims.iter()
        .map(|&d| {
            usize::try_from(d)
                .map_err(|_| CompileError::unsupported(node, format!("{what} has negative dimension {d}")))
        })
        .collect()
}

/// The body's topological order restricted to the nodes a `_Retval` needs (plus every
/// `_Arg`, which fixes the input arity). Anything else is dead: TensorFlow's gradient
/// graphs leave such nodes behind (e.g. the gradient with respect to a placeholder input,
/// a full GEMM in an MLP step), and the interpreter never runs them either, because its
/// plan is pruned to the fetches. Bodies are pure, so dropping them is unobservable.
/// Also returns the whole topological order (for [`check_dead_nodes`]).
fn live_order(body: &Graph) -> Result<(Vec<NodeId>, Vec<NodeId>), CompileError> {
    let order = body.topo_order().map_err(|e| CompileError::Invalid(e.to_string()))?;
    let mut live = vec![false; body.len()];
    let mut stack: Vec<NodeId> = order.iter().copied().filter(|&id| body.node(id).op == "_Retval").collect();
    while let Some(id) = stack.pop() {
        if std::mem::replace(&mut live[id.index()], true) {
            continue;
        }
        let node = body.node(id);
        stack.extend(node.inputs.iter().map(|o| o.node));
        stack.extend(node.control_inputs.iter().copied());
    }
    let live_order = order.iter().copied().filter(|&id| live[id.index()] || body.node(id).op == "_Arg").collect();
    Ok((live_order, order))
}

fn attr_type(node: &Node, name: &str) -> Option<DType> {
    node.attr(name).and_then(AttrValue::as_type)
}

fn attr_int(node: &Node, name: &str) -> Option<i64> {
    node.attr(name).and_then(AttrValue::as_int)
}

fn attr_bool(node: &Node, name: &str) -> bool {
    node.attr(name).and_then(AttrValue::as_bool).unwrap_or(false)
}

/// A float `Range`, as TensorFlow's kernel computes it in the element type:
/// `ceil(|(limit - start) / delta|)` elements, each the previous plus `delta`.
fn float_range<F>(node: &Node, start: F, limit: F, delta: F) -> Result<Vec<F>, CompileError>
where
    F: Copy + Into<f64> + std::ops::Sub<Output = F> + std::ops::Div<Output = F> + std::ops::AddAssign,
{
    let n = ((limit - start) / delta).into().abs().ceil();
    if n > FOLD_LIMIT as f64 {
        return Err(CompileError::unsupported(node, format!("Range of {n} elements is not folded")));
    }
    let mut v = Vec::with_capacity(n as usize);
    let mut x = start;
    for _ in 0..n as usize {
        v.push(x);
        x += delta;
    }
    Ok(v)
}

fn int_const(node: &Node, v: &ValueInfo, what: &str) -> Result<Vec<i64>, CompileError> {
    v.konst
        .as_ref()
        .and_then(Tensor::to_i64_vec)
        .ok_or_else(|| CompileError::unsupported(node, format!("{what} is not a compile-time integer constant")))
}

fn norm_axis(node: &Node, a: i64, rank: usize) -> Result<usize, CompileError> {
    let r = rank as i64;
    if a < -r || a >= r {
        return Err(CompileError::Invalid(format!("node '{}': axis {a} out of range for rank {rank}", node.name)));
    }
    Ok(if a < 0 { (a + r) as usize } else { a as usize })
}

fn shape_tensor(dtype: DType, v: Vec<i64>) -> Tensor {
    let n = v.len();
    match dtype {
        DType::Int64 => Tensor::from_i64(vec![n], v).expect("length matches"),
        _ => Tensor::from_i32(vec![n], v.into_iter().map(|x| x as i32).collect()).expect("length matches"),
    }
}

/// Numpy broadcasting of two shapes (the graph crate's one definition).
pub use autoclust_graph::broadcast_dims as broadcast_shapes;

fn vi(dtype: DType, shape: Vec<usize>) -> ValueInfo {
    ValueInfo { dtype, shape, konst: None, list: None }
}

fn konst(t: Tensor) -> ValueInfo {
    ValueInfo { dtype: t.dtype, shape: t.shape.clone(), konst: Some(t), list: None }
}

fn analyze_node(
    node: &Node,
    ins: &[ValueInfo],
    sig: &[(DType, Vec<usize>)],
    constants: &[(usize, Tensor)],
) -> Result<NodeInfo, CompileError> {
    let constant =
        |outs: Vec<Tensor>| NodeInfo { kind: NodeKind::Constant, outputs: outs.into_iter().map(konst).collect() };
    // A malformed attribute (a mask that is a float, say) is refused as the verifier and
    // the interpreter's kernels refuse it, not read as its default.
    autoclust_graph::infer::check_set_attrs(node).map_err(|e| CompileError::Invalid(e.to_string()))?;
    // Likewise an operand whose dtype is not the one the node's attributes declare (an `Mul`
    // of `T = float32` given an int32): the plain run's kernel refuses it, so the compiled
    // body must not compute it in some other type.
    if let Some(want) = autoclust_graph::infer::attr_input_dtypes(node) {
        for (i, (&w, v)) in want.iter().zip(ins).enumerate() {
            if w != v.dtype && v.dtype != DType::Variant {
                return Err(CompileError::Invalid(format!(
                    "node '{}' ({}): input {i} must be {w}, got {}",
                    node.name, node.op, v.dtype
                )));
            }
        }
    }
    if let Some(info) = compile_time_node(node, ins, sig, constants)? {
        agree_with_registry(node, ins, &info)?;
        return Ok(info);
    }
    let info = analyze_compute(node, ins)?;
    // Fold when every input is a constant and the result is small.
    let all_const = ins.iter().all(|v| v.konst.is_some());
    let small = info.outputs.iter().all(|o| o.elements() <= FOLD_LIMIT);
    if all_const && small && !matches!(info.kind, NodeKind::Constant) {
        let inputs: Vec<&Tensor> = ins.iter().map(|v| v.konst.as_ref().expect("checked")).collect();
        if let Some(outs) = evaluate(node, &info, &inputs) {
            return Ok(constant(outs));
        }
    }
    Ok(info)
}

/// The nodes this file answers for itself: the body's arguments and results, and the ops
/// whose outputs are compile-time values it computes here (`Const`, `Shape`, `Range`,
/// `Fill`, …; a `Fill` of a run-time value is a broadcast). `None` for the ops the families
/// lower. A computed value's shape must be the registry's ([`agree_with_registry`]).
fn compile_time_node(
    node: &Node,
    ins: &[ValueInfo],
    sig: &[(DType, Vec<usize>)],
    constants: &[(usize, Tensor)],
) -> Result<Option<NodeInfo>, CompileError> {
    let need = |n: usize| check_arity(node, ins, n);
    let constant =
        |outs: Vec<Tensor>| Some(NodeInfo { kind: NodeKind::Constant, outputs: outs.into_iter().map(konst).collect() });
    let op = node.op.as_str();
    Ok(match op {
        "_Arg" => {
            let i = attr_int(node, "index")
                .ok_or_else(|| CompileError::Invalid(format!("_Arg '{}' has no index", node.name)))?
                as usize;
            let (d, s) = sig.get(i).ok_or_else(|| {
                CompileError::Invalid(format!("_Arg '{}' has index {i} but {} inputs were given", node.name, sig.len()))
            })?;
            if let Some(t) = attr_type(node, "T") {
                if t != *d {
                    return Err(CompileError::Invalid(format!("_Arg '{}' is {t} but input {i} is {d}", node.name)));
                }
            }
            if let Some((_, t)) = constants.iter().find(|(k, _)| *k == i) {
                return Ok(Some(NodeInfo { kind: NodeKind::Constant, outputs: vec![konst(t.clone())] }));
            }
            return Ok(Some(NodeInfo { kind: NodeKind::Arg(i), outputs: vec![vi(*d, s.clone())] }));
        }
        "_Retval" => {
            need(1)?;
            let i = attr_int(node, "index")
                .ok_or_else(|| CompileError::Invalid(format!("_Retval '{}' has no index", node.name)))?
                as usize;
            // The declared type is the function's contract (the interpreter checks it too).
            if let Some(t) = attr_type(node, "T").filter(|&t| t != ins[0].dtype) {
                return Err(CompileError::Invalid(format!(
                    "_Retval '{}' is {t} but the body produced {}",
                    node.name, ins[0].dtype
                )));
            }
            return Ok(Some(NodeInfo { kind: NodeKind::Retval(i), outputs: vec![] }));
        }
        "Const" => {
            let t = node
                .attr("value")
                .and_then(AttrValue::tensor_value)
                .ok_or_else(|| CompileError::Invalid(format!("Const '{}' has no value", node.name)))?
                // Past the size budget: declined, and the interpreter's kernel names the node.
                .map_err(|e| CompileError::Invalid(format!("Const '{}': {e}", node.name)))?;
            return Ok(constant(vec![t.into_owned()]));
        }
        "NoOp" => return Ok(Some(NodeInfo { kind: NodeKind::Constant, outputs: vec![] })),
        // Integer shape arithmetic, folded: the operands must be known at compile time
        // (constants, shapes, or arguments compiled as constants).
        // TensorFlow's Range, folded: start, limit and delta must be known at compile time.
        // Invalid bounds decline, so the interpreter's kernel reports TensorFlow's error.
        "Range" => {
            need(3)?;
            let d = ins[0].dtype;
            let scalar = |i: usize, what: &str| -> Result<f64, CompileError> {
                match ins[i].konst.as_ref().filter(|t| t.dtype == d).and_then(Tensor::to_f64_vec).as_deref() {
                    Some([v]) => Ok(*v),
                    _ => Err(CompileError::unsupported(node, format!("{what} is not a compile-time scalar"))),
                }
            };
            let (start, limit, delta) = (scalar(0, "start")?, scalar(1, "limit")?, scalar(2, "delta")?);
            if delta == 0.0 || (delta > 0.0 && start > limit) || (delta < 0.0 && start < limit) {
                return Err(CompileError::unsupported(node, "invalid bounds (the kernel reports them)"));
            }
            let t = match d {
                DType::Int32 | DType::Int64 => {
                    let int = |i: usize, what: &str| -> Result<i128, CompileError> {
                        Ok(i128::from(int_const(node, &ins[i], what)?.first().copied().unwrap_or(0)))
                    };
                    let (s0, l0, d0) = (int(0, "start")?, int(1, "limit")?, int(2, "delta")?);
                    let n = ((l0 - s0).abs() + d0.abs() - 1) / d0.abs();
                    if n > FOLD_LIMIT as i128 {
                        return Err(CompileError::unsupported(node, format!("Range of {n} elements is not folded")));
                    }
                    let v: Vec<i64> = (0..n).map(|i| (s0 + i * d0) as i64).collect();
                    shape_tensor(d, v)
                }
                DType::Float32 => {
                    let v = float_range(node, start as f32, limit as f32, delta as f32)?;
                    Tensor::from_f32(vec![v.len()], v).map_err(|e| CompileError::Invalid(e.to_string()))?
                }
                DType::Float64 => {
                    let v = float_range(node, start, limit, delta)?;
                    Tensor::from_f64(vec![v.len()], v).map_err(|e| CompileError::Invalid(e.to_string()))?
                }
                _ => return Err(CompileError::unsupported(node, format!("Range of {d}"))),
            };
            return Ok(constant(vec![t]));
        }
        // DynamicStitch of known integers (TF2 gradients of reductions compute the reduced
        // shape so): `out[indices[i][j]] = data[i][j]`, later pieces overwriting earlier ones.
        "DynamicStitch" | "ParallelDynamicStitch" => {
            let n = ins.len() / 2;
            if n == 0 || ins.len() != 2 * n {
                return Err(CompileError::Invalid(format!("node '{}' ({op}) needs 2·N inputs", node.name)));
            }
            let d = ins[n].dtype;
            if !matches!(d, DType::Int32 | DType::Int64) {
                return Err(CompileError::unsupported(node, format!("{op} of {d} (folded for integers only)")));
            }
            let mut pieces = Vec::with_capacity(n);
            for i in 0..n {
                let idx = int_const(node, &ins[i], "indices")?;
                let data = int_const(node, &ins[n + i], "data")?;
                let (ir, ds) = (ins[i].shape.len(), &ins[n + i].shape);
                if ds.len() < ir
                    || ds[..ir] != ins[i].shape[..]
                    || ds[ir..] != ins[n].shape[ins[0].shape.len().min(ins[n].shape.len())..]
                {
                    return Err(CompileError::Invalid(format!(
                        "node '{}' ({op}): data {ds:?} does not match indices {:?}",
                        node.name, ins[i].shape
                    )));
                }
                pieces.push((idx, data));
            }
            let inner: Vec<usize> = ins[n].shape[ins[0].shape.len().min(ins[n].shape.len())..].to_vec();
            let row: usize = inner.iter().product();
            let rows = pieces.iter().flat_map(|(idx, _)| idx.iter().copied()).max().map_or(0, |m| m + 1);
            if pieces.iter().any(|(idx, _)| idx.iter().any(|&x| x < 0)) || rows as usize * row > FOLD_LIMIT {
                return Err(CompileError::unsupported(
                    node,
                    "indices out of range or too many (the kernel reports them)",
                ));
            }
            let mut out = vec![0i64; rows as usize * row];
            let mut seen = vec![false; rows as usize];
            for (idx, data) in &pieces {
                for (j, &x) in idx.iter().enumerate() {
                    out[x as usize * row..][..row].copy_from_slice(&data[j * row..][..row]);
                    seen[x as usize] = true;
                }
            }
            if seen.contains(&false) {
                return Err(CompileError::unsupported(node, "an output row no index names (the kernel reports it)"));
            }
            let mut shape = vec![rows as usize];
            shape.extend(inner);
            let t = match d {
                DType::Int64 => Tensor::from_i64(shape, out),
                _ => Tensor::from_i32(shape, out.into_iter().map(|x| x as i32).collect()),
            }
            .map_err(|e| CompileError::Invalid(e.to_string()))?;
            return Ok(constant(vec![t]));
        }
        // ConcatOffset(axis, shapes…) of known shapes (ConcatV2's gradient): each input's
        // offset in the concatenation, zero but along `axis`.
        "ConcatOffset" => {
            need(2)?;
            let axis = int_const(node, &ins[0], "the axis")?.first().copied().unwrap_or(0);
            let shapes = ins[1..].iter().map(|v| int_const(node, v, "a shape")).collect::<Result<Vec<_>, _>>()?;
            let rank = shapes[0].len();
            let a = norm_axis(node, axis, rank)?;
            let mut at = 0i64;
            let mut outs = Vec::with_capacity(shapes.len());
            for s in &shapes {
                if s.len() != rank || s.iter().zip(&shapes[0]).enumerate().any(|(k, (x, y))| k != a && x != y) {
                    return Err(CompileError::Invalid(format!(
                        "node '{}' (ConcatOffset): shape {s:?} does not match {:?}",
                        node.name, shapes[0]
                    )));
                }
                let mut off = vec![0i64; rank];
                off[a] = at;
                at += s[a];
                outs.push(shape_tensor(ins[1].dtype, off));
            }
            return Ok(constant(outs));
        }
        "InvertPermutation" => {
            need(1)?;
            let p = int_const(node, &ins[0], "the permutation")?;
            let mut inv = vec![-1i64; p.len()];
            for (i, &x) in p.iter().enumerate() {
                match usize::try_from(x).ok().and_then(|x| inv.get_mut(x)) {
                    Some(slot) if *slot < 0 => *slot = i as i64,
                    _ => {
                        return Err(CompileError::Invalid(format!("node '{}': {p:?} is not a permutation", node.name)))
                    }
                }
            }
            return Ok(constant(vec![shape_tensor(ins[0].dtype, inv)]));
        }
        "Shape" => {
            need(1)?;
            let d = attr_type(node, "out_type").unwrap_or(DType::Int32);
            return Ok(constant(vec![shape_tensor(d, ins[0].shape.iter().map(|&x| x as i64).collect())]));
        }
        "ShapeN" => {
            let d = attr_type(node, "out_type").unwrap_or(DType::Int32);
            return Ok(constant(
                ins.iter().map(|v| shape_tensor(d, v.shape.iter().map(|&x| x as i64).collect())).collect(),
            ));
        }
        "Size" => {
            need(1)?;
            let n = ins[0].elements() as i64;
            let t = match attr_type(node, "out_type") {
                Some(DType::Int64) => Tensor::scalar_i64(n),
                _ => Tensor::scalar_i32(n as i32),
            };
            return Ok(constant(vec![t]));
        }
        "Rank" => {
            need(1)?;
            return Ok(constant(vec![Tensor::scalar_i32(ins[0].shape.len() as i32)]));
        }
        "BroadcastGradientArgs" => {
            need(2)?;
            let a = int_const(node, &ins[0], "s0")?;
            let b = int_const(node, &ins[1], "s1")?;
            let (ra, rb) = broadcast_gradient_args(&a, &b)
                .ok_or_else(|| CompileError::Invalid(format!("node '{}': shapes do not broadcast", node.name)))?;
            let d = ins[0].dtype;
            return Ok(constant(vec![shape_tensor(d, ra), shape_tensor(d, rb)]));
        }
        "ZerosLike" | "OnesLike" => {
            need(1)?;
            let v = if op == "ZerosLike" { 0.0 } else { 1.0 };
            return Ok(constant(vec![filled(node, ins[0].dtype, ins[0].shape.clone(), v)?]));
        }
        "Fill" => {
            need(2)?;
            let dims = int_const(node, &ins[0], "dims")?;
            let shape = dims_of(node, &dims, "dims")?;
            within_budget(node, ins[1].dtype, &shape)?;
            if let Some(v) = &ins[1].konst {
                // Repeat the value's own element (no f64 round trip, which would lose large int64s).
                if let Some(x) = Scalar::at(v, 0) {
                    let n: usize = shape.iter().product();
                    let t = match x {
                        Scalar::F32(x) => Tensor::from_f32(shape, vec![x; n]),
                        Scalar::F64(x) => Tensor::from_f64(shape, vec![x; n]),
                        Scalar::I32(x) => Tensor::from_i32(shape, vec![x; n]),
                        Scalar::I64(x) => Tensor::from_i64(shape, vec![x; n]),
                        Scalar::Bool(x) => Tensor::from_bool(shape, vec![x; n]),
                    };
                    return Ok(constant(vec![t.map_err(|e| CompileError::Invalid(e.to_string()))?]));
                }
                return Ok(constant(vec![filled(node, ins[1].dtype, shape, 0.0)?]));
            }
            // A runtime fill value: a broadcast of a scalar.
            let n = shape.len();
            return Ok(Some(NodeInfo {
                kind: NodeKind::Kernel {
                    op: KernelOp::Strided { dims: shape.clone(), strides: vec![0; n], offset: 0 },
                    data_inputs: vec![1],
                },
                outputs: vec![vi(ins[1].dtype, shape)],
            }));
        }
        _ => None,
    })
}

fn filled(node: &Node, dtype: DType, shape: Vec<usize>, v: f64) -> Result<Tensor, CompileError> {
    let n: usize = shape.iter().product();
    let t = match dtype {
        DType::Float32 => Tensor::from_f32(shape, vec![v as f32; n]),
        DType::Float64 => Tensor::from_f64(shape, vec![v; n]),
        DType::Int32 => Tensor::from_i32(shape, vec![v as i32; n]),
        DType::Int64 => Tensor::from_i64(shape, vec![v as i64; n]),
        DType::Bool => Tensor::from_bool(shape, vec![v != 0.0; n]),
        d => return Err(CompileError::unsupported(node, format!("dtype {d}"))),
    };
    t.map_err(|e| CompileError::Invalid(e.to_string()))
}

use autoclust_graph::broadcast_gradient_args;

fn is_compiled_dtype(d: DType) -> bool {
    matches!(d, DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64 | DType::Bool)
}

/// The node's kind and output values at these input values: the first op family that
/// lowers the op decides (each family answers "no lowering" for ops outside it), its
/// output shapes from the registry ([`Outputs`]).
fn analyze_compute(node: &Node, ins: &[ValueInfo]) -> Result<NodeInfo, CompileError> {
    let op = node.op.as_str();
    // The stateless random ops pass uint64 keys and counters from kernel to kernel (no
    // loop ever computes on them).
    let uint64_ok = autoclust_graph::jit_ops::UINT64_KEY_OPS.contains(&op);
    for v in ins {
        if !(is_compiled_dtype(v.dtype) || uint64_ok && v.dtype == DType::UInt64) {
            return Err(CompileError::unsupported(node, format!("dtype {}", v.dtype)));
        }
    }
    type Family = fn(&Node, &[ValueInfo], &Outputs<'_>) -> Result<NodeInfo, CompileError>;
    const FAMILIES: [Family; 5] =
        [elementwise::analyze, movement::analyze, nn::analyze, reduce::analyze, random::analyze];
    let out = Outputs { node, ins };
    for family in FAMILIES {
        match family(node, ins, &out) {
            Err(e) if is_no_lowering(&e) => continue,
            result => return result,
        }
    }
    Err(no_lowering(node))
}

/// Why an op outside every family is declined.
const NO_LOWERING: &str = "op has no lowering";

fn no_lowering(node: &Node) -> CompileError {
    CompileError::unsupported(node, NO_LOWERING)
}

fn is_no_lowering(e: &CompileError) -> bool {
    matches!(e, CompileError::Unsupported { reason, .. } if reason == NO_LOWERING)
}

/// Declines a node with fewer than `n` inputs (the verifier's arity check, repeated here so
/// the analysis never indexes past a malformed body's inputs).
fn check_arity(node: &Node, ins: &[ValueInfo], n: usize) -> Result<(), CompileError> {
    if ins.len() < n {
        Err(CompileError::Invalid(format!("node '{}' ({}) needs {n} inputs, has {}", node.name, node.op, ins.len())))
    } else {
        Ok(())
    }
}

fn kernel(op: KernelOp, data_inputs: Vec<usize>, outputs: Vec<ValueInfo>) -> NodeInfo {
    NodeInfo { kind: NodeKind::Kernel { op, data_inputs }, outputs }
}

/// Element strides reading `from` (right-aligned) broadcast to `to`: 0 on broadcast dims.
pub fn broadcast_strides(from: &[usize], to: &[usize]) -> Vec<isize> {
    let st = strides_of(from);
    let off = to.len() - from.len();
    (0..to.len()).map(|d| if d < off || from[d - off] == 1 && to[d] != 1 { 0 } else { st[d - off] as isize }).collect()
}

/// StridedSlice as a strided view (TensorFlow's index arithmetic, ellipsis and new-axis
/// masks included, from the graph crate's [`autoclust_graph::registry::strided_slice`], the
/// same code the shape function runs): one loop dimension per input dimension (an indexed
/// one has size 1, a new axis none — it only reshapes the output). Also gives the slice's
/// shape (`StridedSliceGrad` checks its `dy` against it).
fn strided_slice(node: &Node, ins: &[ValueInfo]) -> Result<(KernelOp, Vec<usize>), CompileError> {
    let x = &ins[0];
    let mask = |n: &str| attr_int(node, n).unwrap_or(0);
    let spec = autoclust_graph::registry::SliceSpec {
        begin: int_const(node, &ins[1], "begin")?,
        end: int_const(node, &ins[2], "end")?,
        strides: int_const(node, &ins[3], "strides")?,
        begin_mask: mask("begin_mask"),
        end_mask: mask("end_mask"),
        ellipsis_mask: mask("ellipsis_mask"),
        new_axis_mask: mask("new_axis_mask"),
        shrink_axis_mask: mask("shrink_axis_mask"),
    };
    let input: Vec<Option<i64>> = x.shape.iter().map(|&d| Some(d as i64)).collect();
    let out = autoclust_graph::registry::strided_slice(&input, &spec)
        .map_err(|e| CompileError::Invalid(format!("node '{}': {e}", node.name)))?;
    let st = strides_of(&x.shape);
    let mut dims = Vec::with_capacity(out.dense.len());
    let mut kstrides = Vec::with_capacity(out.dense.len());
    let mut offset = 0isize;
    for (d, ds) in out.dense.iter().enumerate() {
        let (Some(b), Some(count)) = (ds.begin, ds.size) else {
            return Err(CompileError::Invalid(format!("node '{}': slice of an unknown dimension", node.name)));
        };
        offset += b.max(0) as isize * st[d] as isize;
        dims.push(count as usize);
        kstrides.push(ds.stride as isize * st[d] as isize);
    }
    if dims.contains(&0) {
        offset = 0;
    }
    let out_shape = out.shape.iter().map(|d| d.unwrap_or(1) as usize).collect();
    Ok((KernelOp::Strided { dims, strides: kstrides, offset }, out_shape))
}

/// A node whose output holds its (first) input's elements in the same order, as `shape`:
/// an elementwise copy when the shape is the input's and the fused loops compute its dtype
/// (so it joins its producer's fused loop and its consumers' instead of splitting them —
/// a lone one still becomes a view, see `plan::build`), else a view of the input's buffer.
fn same_values(x: &ValueInfo, shape: Vec<usize>) -> NodeInfo {
    let kind =
        if shape == x.shape && is_compiled_dtype(x.dtype) { NodeKind::Elementwise(EwOp::Copy) } else { NodeKind::View };
    NodeInfo { kind, outputs: vec![vi(x.dtype, shape)] }
}

/// Sorts reduction axes; a repeated axis is TensorFlow's `InvalidArgument`, so the
/// reduction is declined and the interpreter's kernel reports it (never merged silently).
fn distinct_axes(node: &Node, axes: &mut [usize]) -> Result<(), CompileError> {
    axes.sort_unstable();
    if axes.windows(2).any(|w| w[0] == w[1]) {
        return Err(CompileError::unsupported(node, "a duplicate reduction axis (the kernel reports it)"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(op: &str) -> Node {
        Node {
            name: "n".into(),
            op: op.into(),
            inputs: vec![],
            control_inputs: vec![],
            attrs: Default::default(),
            device: String::new(),
            span: None,
        }
    }

    /// The clusterer admits the ops the JIT computes in float32 only on float32 alone
    /// (`autoclust_graph::JIT_FLOAT32_ONLY_OPS`): that list is exactly the registry's ops
    /// whose elementwise lowering is transcendental.
    #[test]
    fn the_float32_only_list_is_the_transcendental_ops() {
        let mut transcendental: Vec<&str> = autoclust_graph::registry::op_names()
            .filter(|op| EwOp::from_node(&node(op)).is_some_and(EwOp::is_transcendental))
            .collect();
        let mut listed = autoclust_graph::JIT_FLOAT32_ONLY_OPS.to_vec();
        transcendental.sort_unstable();
        listed.sort_unstable();
        assert_eq!(transcendental, listed);
    }

    /// Whether the compiler's lowering table has an entry for `op`: probed with an input-less
    /// node, an op without one is refused as "op has no lowering" before any input is read
    /// (the others fail on their arity, their attributes or their missing operands).
    fn lowers(op: &str) -> bool {
        if crate::lists::is_list_op(op) || crate::host::is_fake_quant_grad(op) || crate::host::is_host_op(op) {
            return true;
        }
        let n = node(op);
        let probe = std::panic::catch_unwind(|| analyze_node(&n, &[], &[], &[]));
        let Ok(result) = probe else { panic!("{op}: the analysis panics on a node without inputs") };
        !matches!(result, Err(e) if is_no_lowering(&e))
    }

    /// The clusterer admits what `autoclust_graph::jit_ops` lists; the compiler lowers what
    /// its table handles. The two are one list: every listed compute op has a lowering, and
    /// every registry op with a lowering is listed — except the ops below, each with the
    /// reason the clusterer keeps them out although the compiler could run them.
    #[test]
    fn the_lowering_table_is_the_jit_op_list() {
        // Ops the compiler meets only in bodies the pipeline builds, never in a user's
        // graph cluster: encapsulation's argument, result and write-back shape-check nodes,
        // and functional control flow (admitted by the clusterer as control flow, not as ops).
        let not_cluster_ops: Vec<&str> = ["_Arg", "_Retval", autoclust_graph::protocol::SAME_SHAPE_OP]
            .into_iter()
            .chain(autoclust_graph::effects::RUNS_NAMED_FUNCTIONS.iter().copied())
            .collect();
        let listed: Vec<&str> = autoclust_graph::jit_ops::JIT_COMPUTE_OPS
            .iter()
            .chain(autoclust_graph::jit_ops::HOST_COMPUTE_OPS.iter().map(|(op, _)| op))
            .chain(autoclust_graph::jit_ops::STATELESS_SAMPLER_OPS)
            .chain(autoclust_graph::TENSOR_LIST_OPS)
            .copied()
            .collect();
        // Listed, but rewritten before the compiler sees a body: encapsulation splits an
        // `IdentityN` into one `Identity` per output.
        const REWRITTEN_BY_ENCAPSULATION: &[&str] = &["IdentityN"];
        let unlowered: Vec<&str> =
            listed.iter().copied().filter(|op| !lowers(op) && !REWRITTEN_BY_ENCAPSULATION.contains(op)).collect();
        assert!(unlowered.is_empty(), "listed in jit_ops but the compiler has no lowering: {unlowered:?}");
        let unlisted: Vec<&str> = autoclust_graph::registry::op_names()
            .filter(|op| lowers(op) && !listed.contains(op) && !not_cluster_ops.contains(op))
            .collect();
        assert!(unlisted.is_empty(), "lowered by the compiler but not in jit_ops: {unlisted:?}");
        for op in autoclust_graph::jit_ops::VARIABLE_OPS {
            assert!(!lowers(op), "{op} is run by the bridge; the compiler should never see it");
        }
        // A host-step op has no lowering of its own (else the lowering, not the host step,
        // should run it), and the registry knows it (its shape function types the step).
        for (op, _) in autoclust_graph::jit_ops::HOST_COMPUTE_OPS {
            let probe = analyze_node(&node(op), &[], &[], &[]);
            assert!(matches!(probe, Err(e) if is_no_lowering(&e)), "{op} is lowered; drop it from HOST_COMPUTE_OPS");
            assert!(autoclust_graph::registry::lookup(op).is_some(), "{op} is not in the registry");
        }
    }

    fn fold(op: &str, ins: &[Tensor], out: DType) -> Option<Tensor> {
        let ew = EwOp::from_tf(op).expect("elementwise op");
        let shape = ins.iter().fold(Vec::new(), |s, t| broadcast_shapes(&s, &t.shape).expect("broadcast"));
        let refs: Vec<&Tensor> = ins.iter().collect();
        fold_elementwise(&node(op), ew, &refs, &vi(out, shape))
    }

    fn i32s(v: &[i32]) -> Tensor {
        Tensor::from_i32(vec![v.len()], v.to_vec()).unwrap()
    }

    fn i64s(v: &[i64]) -> Tensor {
        Tensor::from_i64(vec![v.len()], v.to_vec()).unwrap()
    }

    fn f32s(v: &[f32]) -> Tensor {
        Tensor::from_f32(vec![v.len()], v.to_vec()).unwrap()
    }

    fn as_i32(t: &Tensor) -> Vec<i32> {
        match &t.data {
            TensorData::I32(v) => v.to_vec(),
            d => panic!("not int32: {d:?}"),
        }
    }

    fn as_i64(t: &Tensor) -> Vec<i64> {
        match &t.data {
            TensorData::I64(v) => v.to_vec(),
            d => panic!("not int64: {d:?}"),
        }
    }

    fn as_f32(t: &Tensor) -> Vec<f32> {
        match &t.data {
            TensorData::F32(v) => v.to_vec(),
            d => panic!("not float32: {d:?}"),
        }
    }

    #[test]
    fn int32_arithmetic_wraps() {
        let a = i32s(&[i32::MAX, 5, i32::MIN]);
        let t = fold("AddV2", &[a.clone(), a.clone()], DType::Int32).unwrap();
        assert_eq!(as_i32(&t), vec![-2, 10, 0]);
        let t = fold("Sub", &[i32s(&[i32::MIN]), i32s(&[1])], DType::Int32).unwrap();
        assert_eq!(as_i32(&t), vec![i32::MAX]);
        let t = fold("Mul", &[i32s(&[65536]), i32s(&[65536])], DType::Int32).unwrap();
        assert_eq!(as_i32(&t), vec![0]);
        let t = fold("Neg", &[i32s(&[i32::MIN, 3])], DType::Int32).unwrap();
        assert_eq!(as_i32(&t), vec![i32::MIN, -3]);
        let t = fold("Abs", &[i32s(&[i32::MIN, -3])], DType::Int32).unwrap();
        assert_eq!(as_i32(&t), vec![i32::MIN, 3]);
        let t = fold("Square", &[i32s(&[65536])], DType::Int32).unwrap();
        assert_eq!(as_i32(&t), vec![0]);
        let t = fold("AddN", &[i32s(&[i32::MAX]), i32s(&[1]), i32s(&[1])], DType::Int32).unwrap();
        assert_eq!(as_i32(&t), vec![i32::MIN + 1]);
    }

    #[test]
    fn int64_arithmetic_is_exact_and_wraps() {
        let big = (1i64 << 60) + 1;
        let t = fold("Add", &[i64s(&[big, i64::MAX]), i64s(&[1, 1])], DType::Int64).unwrap();
        assert_eq!(as_i64(&t), vec![big + 1, i64::MIN]);
        let t = fold("Mul", &[i64s(&[i64::MAX]), i64s(&[2])], DType::Int64).unwrap();
        assert_eq!(as_i64(&t), vec![-2]);
    }

    #[test]
    fn integer_division_truncates_wraps_and_leaves_zero_divisor_to_run_time() {
        let t = fold("Div", &[i32s(&[7, -7, i32::MIN]), i32s(&[2, 2, -1])], DType::Int32).unwrap();
        assert_eq!(as_i32(&t), vec![3, -3, i32::MIN]);
        assert!(fold("Div", &[i32s(&[7, 1]), i32s(&[0, 1])], DType::Int32).is_none());
        assert!(fold("Div", &[i64s(&[7]), i64s(&[0])], DType::Int64).is_none());
        assert!(fold("RealDiv", &[i32s(&[7]), i32s(&[2])], DType::Int32).is_none());
    }

    #[test]
    fn maximum_and_minimum_propagate_nan() {
        let q = f32s(&[f32::NAN, 1.0, -1.0]);
        let m = f32s(&[-1000.0, f32::NAN, 2.0]);
        let t = fold("Maximum", &[q.clone(), m.clone()], DType::Float32).unwrap();
        let v = as_f32(&t);
        assert!(v[0].is_nan() && v[1].is_nan());
        assert_eq!(v[2], 2.0);
        let v = as_f32(&fold("Minimum", &[q.clone(), m], DType::Float32).unwrap());
        assert!(v[0].is_nan() && v[1].is_nan());
        assert_eq!(v[2], -1.0);
        let v = as_f32(&fold("Relu", &[q], DType::Float32).unwrap());
        assert!(v[0].is_nan());
        assert_eq!(&v[1..], &[1.0, 0.0]);
    }

    #[test]
    fn nan_from_real_div_reaches_maximum() {
        let z = f32s(&[0.0]);
        let q = fold("RealDiv", &[z.clone(), z], DType::Float32).unwrap();
        let v = as_f32(&fold("Maximum", &[q, f32s(&[-1000.0])], DType::Float32).unwrap());
        assert!(v[0].is_nan());
    }

    #[test]
    fn float32_add_n_rounds_after_every_addition() {
        let t = fold("AddN", &[f32s(&[1.0e8]), f32s(&[1.0]), f32s(&[-1.0e8])], DType::Float32).unwrap();
        assert_eq!(as_f32(&t), vec![(1.0e8f32 + 1.0) - 1.0e8]);
    }

    #[test]
    fn casts_match_static_cast() {
        let t = fold("Cast", &[i64s(&[(1 << 32) + 7, -1])], DType::Int32).unwrap();
        assert_eq!(as_i32(&t), vec![7, -1]);
        let t = fold("Cast", &[f32s(&[3.9, -3.9, 1e20, f32::NAN])], DType::Int32).unwrap();
        assert_eq!(as_i32(&t), vec![3, -3, i32::MAX, 0]);
    }

    #[test]
    fn nan_comparisons() {
        let q = f32s(&[f32::NAN]);
        for (op, want) in [("Less", false), ("GreaterEqual", false), ("Equal", false), ("NotEqual", true)] {
            let t = fold(op, &[q.clone(), q.clone()], DType::Bool).unwrap();
            assert_eq!(t.data, TensorData::Bool(Arc::new(vec![want])), "{op}");
        }
    }
}
