//! Shape propagation and compile-time evaluation of a cluster body.
//!
//! Walks the body in topological order for concrete input dtypes and shapes, giving
//! every value a dtype and a fully known shape, classifying every node for the planner
//! ([`NodeKind`]), and folding values that are known at compile time (`Const`, `Shape`,
//! `Size`, `Rank`, `BroadcastGradientArgs`, `ZerosLike`/`OnesLike`/`Fill`, and any small
//! computation whose inputs are all constants). Folding uses the same kernels the
//! compiled code calls ([`crate::kernels`]) and an exact scalar evaluator for elementwise
//! ops, so it cannot disagree with run time.

use std::sync::Arc;

use autoclust_graph::arith::TfArith;
use autoclust_graph::{AttrValue, DType, Graph, Node, NodeId, Output, Tensor, TensorData};

use crate::kernels::{strides_of, KernelOp, ReduceKind, ScatterKind};
use crate::CompileError;

/// An elementwise op the fused-loop code generator knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EwOp {
    Add,
    Sub,
    Mul,
    Div,
    /// `y == 0 ? 0 : x / y` (float only).
    DivNoNan,
    /// `y == 0 ? 0 : x · y` (float only; a NaN or infinite x times a zero y gives 0).
    MulNoNan,
    Neg,
    Abs,
    Exp,
    Log,
    Sqrt,
    Rsqrt,
    Square,
    Tanh,
    Sigmoid,
    Relu,
    Maximum,
    Minimum,
    Pow,
    Cast,
    Select,
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
    Equal,
    NotEqual,
    LogicalAnd,
    LogicalOr,
    LogicalNot,
    Reciprocal,
    SquaredDifference,
    ReluGrad,
    TanhGrad,
    SigmoidGrad,
    /// `RsqrtGrad(y, dy)`: -(y·y·y·dy·0.5), in the interpreter's order.
    RsqrtGrad,
    /// `SqrtGrad(y, dy)`: dy·0.5 / y.
    SqrtGrad,
    /// `ReciprocalGrad(y, dy)` (`InvGrad`): -(dy·y·y).
    ReciprocalGrad,
    Floor,
    Ceil,
    Sign,
    /// Integer `FloorDiv`/`FloorMod`: folded when constant (shape arithmetic), never generated.
    FloorDiv,
    FloorMod,
    /// Identity, StopGradient, Snapshot inside a group: no code.
    Copy,
    /// AddN: n-ary sum.
    AddN,
    /// The error function and its complement (float32; see `math.rs`).
    Erf,
    Erfc,
    /// `log(1 + x)`, accurate near 0.
    Log1p,
    /// `log(1 + e^x)` with TensorFlow's thresholds.
    Softplus,
    /// `x != x`: bool.
    IsNan,
    /// `e^x − 1`, accurate near 0 (float32).
    Expm1,
    /// `x < 0 ? e^x − 1 : x`.
    Elu,
    /// `x < 0 ? scale·alpha·(e^x − 1) : scale·x` with TensorFlow's constants.
    Selu,
    /// `min(max(x, 0), 6)`.
    Relu6,
    /// `(dy, y)`: `y < 0 ? dy·(y + 1) : dy`.
    EluGrad,
    /// `(dy, y)`: `y < 0 ? dy·(y + scale·alpha) : dy·scale`.
    SeluGrad,
    /// `(dy, x)`: `0 < x < 6 ? dy : 0`.
    Relu6Grad,
    /// `x < 0 ? alpha·x : x`, alpha's float32 bits from the node's attribute.
    LeakyRelu(u32),
    /// `(dy, x)`: `x > 0 ? dy : dy·alpha`.
    LeakyReluGrad(u32),
    /// Sine and cosine (float32; range reduction and polynomials in `math.rs`).
    Sin,
    Cos,
}

impl EwOp {
    /// The elementwise op for a TensorFlow op name.
    pub fn from_tf(op: &str) -> Option<EwOp> {
        Some(match op {
            "Add" | "AddV2" | "BiasAdd" | "BiasAddV1" => EwOp::Add,
            "Sub" => EwOp::Sub,
            "Mul" => EwOp::Mul,
            "RealDiv" | "Div" => EwOp::Div,
            "DivNoNan" => EwOp::DivNoNan,
            "MulNoNan" => EwOp::MulNoNan,
            "Neg" => EwOp::Neg,
            "Abs" => EwOp::Abs,
            "Exp" => EwOp::Exp,
            "Log" => EwOp::Log,
            "Sqrt" => EwOp::Sqrt,
            "Rsqrt" => EwOp::Rsqrt,
            "Square" => EwOp::Square,
            "Tanh" => EwOp::Tanh,
            "Sigmoid" => EwOp::Sigmoid,
            "Relu" => EwOp::Relu,
            "Maximum" => EwOp::Maximum,
            "Minimum" => EwOp::Minimum,
            "Pow" => EwOp::Pow,
            "Cast" => EwOp::Cast,
            "Select" | "SelectV2" => EwOp::Select,
            "Less" => EwOp::Less,
            "LessEqual" => EwOp::LessEqual,
            "Greater" => EwOp::Greater,
            "GreaterEqual" => EwOp::GreaterEqual,
            "Equal" => EwOp::Equal,
            "NotEqual" => EwOp::NotEqual,
            "LogicalAnd" => EwOp::LogicalAnd,
            "LogicalOr" => EwOp::LogicalOr,
            "LogicalNot" => EwOp::LogicalNot,
            "Reciprocal" | "Inv" => EwOp::Reciprocal,
            "SquaredDifference" => EwOp::SquaredDifference,
            "ReluGrad" => EwOp::ReluGrad,
            "TanhGrad" => EwOp::TanhGrad,
            "SigmoidGrad" => EwOp::SigmoidGrad,
            "RsqrtGrad" => EwOp::RsqrtGrad,
            "SqrtGrad" => EwOp::SqrtGrad,
            "ReciprocalGrad" | "InvGrad" => EwOp::ReciprocalGrad,
            "Floor" => EwOp::Floor,
            "Ceil" => EwOp::Ceil,
            "Sign" => EwOp::Sign,
            "FloorDiv" => EwOp::FloorDiv,
            "FloorMod" => EwOp::FloorMod,
            "Identity" | "StopGradient" | "Snapshot" | "PreventGradient" => EwOp::Copy,
            "AddN" => EwOp::AddN,
            "Erf" => EwOp::Erf,
            "Erfc" => EwOp::Erfc,
            "Log1p" => EwOp::Log1p,
            "Softplus" => EwOp::Softplus,
            "IsNan" => EwOp::IsNan,
            "Expm1" => EwOp::Expm1,
            "Elu" => EwOp::Elu,
            "Selu" => EwOp::Selu,
            "Relu6" => EwOp::Relu6,
            "EluGrad" => EwOp::EluGrad,
            "SeluGrad" => EwOp::SeluGrad,
            "Relu6Grad" => EwOp::Relu6Grad,
            "Sin" => EwOp::Sin,
            "Cos" => EwOp::Cos,
            _ => return None,
        })
    }

    /// The elementwise op a node computes: [`EwOp::from_tf`], plus the ops whose function
    /// depends on an attribute (`LeakyRelu`'s `alpha`, TensorFlow's default 0.2).
    pub fn from_node(node: &Node) -> Option<EwOp> {
        let alpha = || node.attr("alpha").and_then(AttrValue::as_float).unwrap_or(0.2);
        match node.op.as_str() {
            "LeakyRelu" => Some(EwOp::LeakyRelu(alpha().to_bits())),
            "LeakyReluGrad" => Some(EwOp::LeakyReluGrad(alpha().to_bits())),
            op => EwOp::from_tf(op),
        }
    }

    /// Whether the op's result is bool regardless of its operands.
    pub fn is_predicate(self) -> bool {
        matches!(
            self,
            EwOp::Less
                | EwOp::LessEqual
                | EwOp::Greater
                | EwOp::GreaterEqual
                | EwOp::Equal
                | EwOp::NotEqual
                | EwOp::LogicalAnd
                | EwOp::LogicalOr
                | EwOp::LogicalNot
                | EwOp::IsNan
        )
    }

    /// Ops computed with polynomial approximations (float only).
    pub fn is_transcendental(self) -> bool {
        matches!(
            self,
            EwOp::Exp
                | EwOp::Log
                | EwOp::Tanh
                | EwOp::Sigmoid
                | EwOp::Pow
                | EwOp::Erf
                | EwOp::Erfc
                | EwOp::Log1p
                | EwOp::Softplus
                | EwOp::Expm1
                | EwOp::Elu
                | EwOp::Selu
                | EwOp::Sin
                | EwOp::Cos
        )
    }
}

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
    let order = live_order(body)?;
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
            "StridedSlice" if ins.len() == 4 && (ins[1].konst.is_none() || ins[2].konst.is_none()) => {
                crate::host::analyze_dynamic_slice(node, &ins, compiler)?
            }
            "Identity" | "Snapshot" | "StopGradient" | "AddN"
                if ins.first().is_some_and(|v| v.dtype == DType::Variant) =>
            {
                crate::lists::analyze_list_op(node, &ins, compiler)?
            }
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
    Ok(Analysis { order, nodes, retvals })
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
fn live_order(body: &Graph) -> Result<Vec<NodeId>, CompileError> {
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
    Ok(order.into_iter().filter(|&id| live[id.index()] || body.node(id).op == "_Arg").collect())
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
    let need = |n: usize| -> Result<(), CompileError> {
        if ins.len() < n {
            Err(CompileError::Invalid(format!(
                "node '{}' ({}) needs {n} inputs, has {}",
                node.name,
                node.op,
                ins.len()
            )))
        } else {
            Ok(())
        }
    };
    let constant =
        |outs: Vec<Tensor>| NodeInfo { kind: NodeKind::Constant, outputs: outs.into_iter().map(konst).collect() };
    // A malformed attribute (a mask that is a float, say) is refused as the verifier and
    // the interpreter's kernels refuse it, not read as its default.
    autoclust_graph::infer::check_set_attrs(node).map_err(|e| CompileError::Invalid(e.to_string()))?;
    let op = node.op.as_str();
    match op {
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
                return Ok(NodeInfo { kind: NodeKind::Constant, outputs: vec![konst(t.clone())] });
            }
            return Ok(NodeInfo { kind: NodeKind::Arg(i), outputs: vec![vi(*d, s.clone())] });
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
            return Ok(NodeInfo { kind: NodeKind::Retval(i), outputs: vec![] });
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
        "NoOp" => return Ok(NodeInfo { kind: NodeKind::Constant, outputs: vec![] }),
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
            return Ok(NodeInfo {
                kind: NodeKind::Kernel {
                    op: KernelOp::Strided { dims: shape.clone(), strides: vec![0; n], offset: 0 },
                    data_inputs: vec![1],
                },
                outputs: vec![vi(ins[1].dtype, shape)],
            });
        }
        _ => {}
    }

    let info = analyze_compute(node, ins)?;
    for o in &info.outputs {
        within_budget(node, o.dtype, &o.shape)?;
    }
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

fn analyze_compute(node: &Node, ins: &[ValueInfo]) -> Result<NodeInfo, CompileError> {
    let op = node.op.as_str();
    let need = |n: usize| -> Result<(), CompileError> {
        if ins.len() < n {
            Err(CompileError::Invalid(format!("node '{}' ({}) needs {n} inputs, has {}", node.name, op, ins.len())))
        } else {
            Ok(())
        }
    };
    // The stateless random ops pass uint64 keys and counters from kernel to kernel (no
    // loop ever computes on them).
    let uint64_ok = autoclust_graph::jit_ops::UINT64_KEY_OPS.contains(&op);
    for v in ins {
        if !(is_compiled_dtype(v.dtype) || uint64_ok && v.dtype == DType::UInt64) {
            return Err(CompileError::unsupported(node, format!("dtype {}", v.dtype)));
        }
    }
    // FloorDiv/FloorMod on constants stay elementwise folds (shape arithmetic); on run-time
    // values they, Mod, TruncateDiv and TruncateMod are a kernel step with TensorFlow's
    // element arithmetic.
    if let Some(kind) = crate::kernels::ModularKind::from_tf(op) {
        need(2)?;
        let folds = EwOp::from_tf(op).is_some() && ins.iter().all(|v| v.konst.is_some());
        if !folds {
            let (a, b) = (&ins[0], &ins[1]);
            if a.dtype != b.dtype || !matches!(a.dtype, DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64) {
                return Err(CompileError::unsupported(node, format!("{op} of {} and {}", a.dtype, b.dtype)));
            }
            let shape = broadcast_shapes(&a.shape, &b.shape).ok_or_else(|| {
                CompileError::Invalid(format!(
                    "node '{}': shapes {:?} and {:?} do not broadcast",
                    node.name, a.shape, b.shape
                ))
            })?;
            return Ok(kernel(KernelOp::Modular { kind }, vec![0, 1], vec![vi(a.dtype, shape)]));
        }
    }
    if let Some(ew) = EwOp::from_node(node) {
        let arity = match ew {
            EwOp::Select => 3,
            // Variadic, but never empty (TensorFlow's `N >= 1`; an input-less copy has no value).
            EwOp::AddN | EwOp::Copy => ins.len().max(1),
            EwOp::Neg
            | EwOp::Abs
            | EwOp::Exp
            | EwOp::Log
            | EwOp::Sqrt
            | EwOp::Rsqrt
            | EwOp::Square
            | EwOp::Tanh
            | EwOp::Sigmoid
            | EwOp::Relu
            | EwOp::Cast
            | EwOp::LogicalNot
            | EwOp::Reciprocal
            | EwOp::Floor
            | EwOp::Ceil
            | EwOp::Sign
            | EwOp::Erf
            | EwOp::Erfc
            | EwOp::Log1p
            | EwOp::Softplus
            | EwOp::IsNan
            | EwOp::Expm1
            | EwOp::Elu
            | EwOp::Selu
            | EwOp::Relu6
            | EwOp::Sin
            | EwOp::Cos
            | EwOp::LeakyRelu(_) => 1,
            _ => 2,
        };
        need(arity)?;
        if matches!(ew, EwOp::Copy) && ins.len() != 1 {
            return Err(CompileError::Invalid(format!("node '{}' ({op}) needs 1 input", node.name)));
        }
        if (op == "BiasAdd" || op == "BiasAddV1")
            && node.attr("data_format").and_then(AttrValue::as_str).is_some_and(|f| f != "NHWC")
        {
            return Err(CompileError::unsupported(node, "BiasAdd with data_format other than NHWC"));
        }
        // BiasAdd is an Add only for a rank-1 bias over the value's last (channel) axis;
        // anything else is TensorFlow's error, which the interpreter's kernel reports.
        if (op == "BiasAdd" || op == "BiasAddV1")
            && (ins[1].shape.len() != 1 || ins[0].shape.len() < 2 || ins[0].shape.last() != ins[1].shape.first())
        {
            return Err(CompileError::Invalid(format!(
                "node '{}' ({op}): value {:?} must have rank >= 2 and bias {:?} rank 1 of its last dimension",
                node.name, ins[0].shape, ins[1].shape
            )));
        }
        // TensorFlow's `Select` (v1): a rank-1 condition of a higher-rank `x` picks whole rows
        // (the fused loop reads it as `[n, 1, …]`); `x` and `y` have one shape.
        let row_select = op == "Select" && ins[0].shape.len() == 1 && ins[1].shape.len() > 1;
        if op == "Select"
            && !ins[0].shape.is_empty()
            && (ins[1].shape != ins[2].shape
                || ins[0].shape != ins[1].shape && !(row_select && ins[0].shape[0] == ins[1].shape[0]))
        {
            return Err(CompileError::Invalid(format!(
                "node '{}' (Select): condition {:?} does not fit x {:?} and y {:?}",
                node.name, ins[0].shape, ins[1].shape, ins[2].shape
            )));
        }
        let first = if row_select { 1 } else { 0 };
        let mut shape = ins[first].shape.clone();
        for v in &ins[first + 1..arity] {
            shape = broadcast_shapes(&shape, &v.shape).ok_or_else(|| {
                CompileError::Invalid(format!(
                    "node '{}': shapes {:?} do not broadcast",
                    node.name,
                    ins.iter().map(|v| &v.shape).collect::<Vec<_>>()
                ))
            })?;
        }
        let data_dtype = if matches!(ew, EwOp::Select) { ins[1].dtype } else { ins[0].dtype };
        let dtype = match ew {
            _ if ew.is_predicate() => DType::Bool,
            EwOp::Cast => attr_type(node, "DstT")
                .ok_or_else(|| CompileError::Invalid(format!("Cast '{}' has no DstT", node.name)))?,
            _ => data_dtype,
        };
        if !is_compiled_dtype(dtype) {
            return Err(CompileError::unsupported(node, format!("dtype {dtype}")));
        }
        return Ok(NodeInfo { kind: NodeKind::Elementwise(ew), outputs: vec![vi(dtype, shape)] });
    }
    match op {
        // Encapsulation's check of a variable write (value, current): decided here, at the
        // shapes being compiled for; a mismatch leaves the call to the interpreter, whose
        // kernel reports it as the plain executor does.
        autoclust_graph::protocol::SAME_SHAPE_OP => {
            need(2)?;
            if ins[0].shape != ins[1].shape {
                return Err(CompileError::unsupported(
                    node,
                    format!("a variable write of shape {:?} to a variable of shape {:?}", ins[0].shape, ins[1].shape),
                ));
            }
            Ok(NodeInfo { kind: NodeKind::View, outputs: vec![vi(ins[0].dtype, ins[0].shape.clone())] })
        }
        "Reshape" => {
            need(2)?;
            let want = int_const(node, &ins[1], "shape")?;
            let n = ins[0].elements();
            let known = want.iter().filter(|&&d| d >= 0).try_fold(1usize, |a, &d| a.checked_mul(d as usize));
            let shape: Vec<usize> = want
                .iter()
                .map(|&d| if d < 0 { known.and_then(|k| n.checked_div(k)).unwrap_or(0) } else { d as usize })
                .collect();
            if shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) != Some(n) {
                return Err(CompileError::Invalid(format!(
                    "node '{}': cannot reshape {:?} to {want:?}",
                    node.name, ins[0].shape
                )));
            }
            Ok(same_values(&ins[0], shape))
        }
        "ExpandDims" => {
            need(2)?;
            let a = int_const(node, &ins[1], "axis")?;
            let r = ins[0].shape.len() as i64 + 1;
            let a = a.first().copied().unwrap_or(0);
            let a = if a < 0 { a + r } else { a };
            if !(0..r).contains(&a) {
                return Err(CompileError::Invalid(format!("node '{}': bad axis", node.name)));
            }
            let mut shape = ins[0].shape.clone();
            shape.insert(a as usize, 1);
            Ok(NodeInfo { kind: NodeKind::View, outputs: vec![vi(ins[0].dtype, shape)] })
        }
        "Squeeze" => {
            need(1)?;
            let dims = node.attr("squeeze_dims").or(node.attr("axis")).and_then(AttrValue::as_int_list).unwrap_or(&[]);
            let r = ins[0].shape.len();
            let axes: Vec<usize> = dims.iter().map(|&a| norm_axis(node, a, r)).collect::<Result<_, _>>()?;
            let shape: Vec<usize> = ins[0]
                .shape
                .iter()
                .enumerate()
                .filter(|(i, &d)| !(d == 1 && (axes.is_empty() || axes.contains(i))))
                .map(|(_, &d)| d)
                .collect();
            Ok(same_values(&ins[0], shape))
        }
        "MatMul" => {
            need(2)?;
            let (ta, tb) = (attr_bool(node, "transpose_a"), attr_bool(node, "transpose_b"));
            let (a, b) = (&ins[0].shape, &ins[1].shape);
            if a.len() != 2 || b.len() != 2 {
                return Err(CompileError::Invalid(format!("node '{}': MatMul needs matrices", node.name)));
            }
            if ins[0].dtype != DType::Float32 || ins[1].dtype != DType::Float32 {
                return Err(CompileError::unsupported(node, format!("MatMul on {}", ins[0].dtype)));
            }
            let (m, k1) = if ta { (a[1], a[0]) } else { (a[0], a[1]) };
            let (k2, n) = if tb { (b[1], b[0]) } else { (b[0], b[1]) };
            if k1 != k2 {
                return Err(CompileError::Invalid(format!(
                    "node '{}': MatMul inner dimensions {k1} and {k2}",
                    node.name
                )));
            }
            Ok(NodeInfo {
                kind: NodeKind::MatMul { transpose_a: ta, transpose_b: tb },
                outputs: vec![vi(DType::Float32, vec![m, n])],
            })
        }
        "Sum" | "Mean" | "Max" | "Min" | "Prod" => {
            need(2)?;
            let x = &ins[0];
            let int = matches!(x.dtype, DType::Int32 | DType::Int64);
            let int_constant = int && x.konst.is_some();
            // Run-time integer values (Keras' bincount takes the `Max` of its int32 input) are
            // reduced exactly by `kernels::reduce_int`.
            if !matches!(x.dtype, DType::Float32 | DType::Float64) && !int {
                return Err(CompileError::unsupported(node, format!("{op} on {}", x.dtype)));
            }
            let r = x.shape.len();
            let mut axes: Vec<usize> =
                int_const(node, &ins[1], "axes")?.iter().map(|&a| norm_axis(node, a, r)).collect::<Result<_, _>>()?;
            distinct_axes(node, &mut axes)?;
            let keep = attr_bool(node, "keep_dims");
            let shape = reduced_shape(&x.shape, &axes, keep);
            let kind = match op {
                "Sum" => ReduceKind::Sum,
                "Mean" => ReduceKind::Mean,
                "Max" => ReduceKind::Max,
                "Min" => ReduceKind::Min,
                _ => ReduceKind::Prod,
            };
            if let (true, Some(t)) = (int_constant, &x.konst) {
                // Shape arithmetic (`Prod(Shape(x))` and friends, everywhere in TF2 gradients):
                // the shapes are known at compile time, so fold it.
                let folded = fold_int_reduce(t, &axes, kind, shape)
                    .ok_or_else(|| CompileError::unsupported(node, format!("{op} on {}", x.dtype)))?;
                return Ok(NodeInfo { kind: NodeKind::Constant, outputs: vec![konst(folded)] });
            }
            if axes.iter().all(|&a| x.shape[a] == 1) {
                // Reducing nothing (no axes, or only extent-1 axes — a gradient's `Sum` over
                // the axes `BroadcastGradientArgs` found for operands of one shape): every
                // output element is its one input element, in the same order.
                return Ok(same_values(x, shape));
            }
            Ok(kernel(KernelOp::Reduce { kind, axes }, vec![0], vec![vi(x.dtype, shape)]))
        }
        // Split(axis, value) into `num_split` equal pieces; SplitV(value, size_splits, axis)
        // with at most one size of -1 (the rest).
        "Split" | "SplitV" => {
            let (value, axis) = if op == "Split" {
                need(2)?;
                (&ins[1], int_const(node, &ins[0], "the axis")?)
            } else {
                need(3)?;
                (&ins[0], int_const(node, &ins[2], "the axis")?)
            };
            let a = norm_axis(node, axis.first().copied().unwrap_or(0), value.shape.len())?;
            let dim = value.shape[a];
            let sizes: Vec<usize> = if op == "Split" {
                let n = attr_int(node, "num_split").filter(|&n| n > 0).ok_or_else(|| {
                    CompileError::Invalid(format!("node '{}' (Split) needs a positive num_split", node.name))
                })? as usize;
                if dim % n != 0 {
                    return Err(CompileError::unsupported(
                        node,
                        format!("{dim} does not split {n} ways (the kernel reports it)"),
                    ));
                }
                vec![dim / n; n]
            } else {
                let want = int_const(node, &ins[1], "size_splits")?;
                let known: i64 = want.iter().filter(|&&x| x >= 0).sum();
                let free = want.iter().filter(|&&x| x == -1).count();
                if want.iter().any(|&x| x < -1) || free > 1 || known > dim as i64 || (free == 0 && known != dim as i64)
                {
                    return Err(CompileError::unsupported(
                        node,
                        format!("size_splits {want:?} of {dim} (the kernel reports it)"),
                    ));
                }
                want.iter().map(|&x| if x < 0 { dim - known as usize } else { x as usize }).collect()
            };
            let outputs = sizes
                .iter()
                .map(|&k| {
                    let mut s = value.shape.clone();
                    s[a] = k;
                    vi(value.dtype, s)
                })
                .collect();
            Ok(kernel(KernelOp::Split { axis: a, sizes }, vec![if op == "Split" { 1 } else { 0 }], outputs))
        }
        // Any/All of bools: a max/min reduction of 0/1 (empty reductions give false/true).
        "Any" | "All" => {
            need(2)?;
            let x = &ins[0];
            if x.dtype != DType::Bool {
                return Err(CompileError::Invalid(format!("node '{}' ({op}) needs a bool input", node.name)));
            }
            let r = x.shape.len();
            let mut axes: Vec<usize> =
                int_const(node, &ins[1], "axes")?.iter().map(|&a| norm_axis(node, a, r)).collect::<Result<_, _>>()?;
            distinct_axes(node, &mut axes)?;
            let shape = reduced_shape(&x.shape, &axes, attr_bool(node, "keep_dims"));
            Ok(kernel(KernelOp::BoolReduce { all: op == "All", axes }, vec![0], vec![vi(DType::Bool, shape)]))
        }
        "ArgMax" | "ArgMin" => {
            need(2)?;
            let x = &ins[0];
            let out = attr_type(node, "output_type").unwrap_or(DType::Int64);
            if x.dtype != DType::Float32 || x.shape.is_empty() || !matches!(out, DType::Int32 | DType::Int64) {
                return Err(CompileError::unsupported(node, format!("{op} of {} to {out}", x.dtype)));
            }
            let a = int_const(node, &ins[1], "dimension")?;
            let axis = norm_axis(node, a.first().copied().unwrap_or(0), x.shape.len())?;
            if x.shape[axis] == 0 {
                return Err(CompileError::unsupported(node, "an empty dimension (the interpreter reports it)"));
            }
            let mut shape = x.shape.clone();
            shape.remove(axis);
            Ok(kernel(KernelOp::ArgExtreme { axis, min: op == "ArgMin", out }, vec![0], vec![vi(out, shape)]))
        }
        "BiasAddGrad" => {
            need(1)?;
            let x = &ins[0];
            if x.dtype != DType::Float32 || x.shape.is_empty() {
                return Err(CompileError::unsupported(node, "BiasAddGrad needs float32 of rank >= 1"));
            }
            if node.attr("data_format").and_then(AttrValue::as_str).is_some_and(|f| f != "NHWC") {
                return Err(CompileError::unsupported(node, "BiasAddGrad with data_format other than NHWC"));
            }
            let r = x.shape.len();
            let axes: Vec<usize> = (0..r - 1).collect();
            Ok(kernel(
                KernelOp::Reduce { kind: ReduceKind::Sum, axes },
                vec![0],
                vec![vi(x.dtype, vec![x.shape[r - 1]])],
            ))
        }
        "Softmax" | "LogSoftmax" => {
            need(1)?;
            let x = &ins[0];
            if x.dtype != DType::Float32 || x.shape.is_empty() {
                return Err(CompileError::unsupported(node, "softmax needs float32 of rank >= 1"));
            }
            Ok(kernel(KernelOp::Softmax { log: op == "LogSoftmax" }, vec![0], vec![vi(x.dtype, x.shape.clone())]))
        }
        "SoftmaxCrossEntropyWithLogits" => {
            need(2)?;
            let (f, l) = (&ins[0], &ins[1]);
            if f.dtype != DType::Float32 || f.shape.len() != 2 || l.shape != f.shape {
                return Err(CompileError::unsupported(
                    node,
                    "needs float32 [batch, classes] logits and labels of the same shape",
                ));
            }
            let b = f.shape[0];
            Ok(kernel(KernelOp::SoftmaxXent, vec![0, 1], vec![vi(f.dtype, vec![b]), vi(f.dtype, f.shape.clone())]))
        }
        "SparseSoftmaxCrossEntropyWithLogits" => {
            need(2)?;
            let (f, l) = (&ins[0], &ins[1]);
            if f.dtype != DType::Float32 || f.shape.len() != 2 || l.shape != [f.shape[0]] {
                return Err(CompileError::unsupported(
                    node,
                    "needs float32 [batch, classes] logits and [batch] labels",
                ));
            }
            let b = f.shape[0];
            Ok(kernel(
                KernelOp::SparseSoftmaxXent,
                vec![0, 1],
                vec![vi(f.dtype, vec![b]), vi(f.dtype, f.shape.clone())],
            ))
        }
        // StridedSliceGrad(shape, begin, end, strides, dy): zeros of `shape` with `dy` written
        // into the elements the forward StridedSlice read (the same view, scattered).
        "StridedSliceGrad" => {
            need(5)?;
            let shape = int_const(node, &ins[0], "shape")?;
            let shape: Vec<usize> = shape.iter().map(|&d| usize::try_from(d).unwrap_or(usize::MAX)).collect();
            let dy = &ins[4];
            within_budget(node, dy.dtype, &shape)?;
            let x = vi(dy.dtype, shape.clone());
            let fwd = strided_slice(node, &[x, ins[1].clone(), ins[2].clone(), ins[3].clone()])?;
            let (NodeKind::Kernel { op: KernelOp::Strided { dims, strides, offset }, .. }, Some(out)) =
                (fwd.kind, fwd.outputs.first())
            else {
                return Err(CompileError::Invalid(format!("node '{}': no strided view", node.name)));
            };
            if out.shape != dy.shape {
                return Err(CompileError::unsupported(
                    node,
                    "dy does not have the slice's shape (the kernel reports it)",
                ));
            }
            let op = KernelOp::StridedScatter { dims, strides, offset };
            Ok(kernel(op, vec![4], vec![vi(dy.dtype, shape)]))
        }
        // ReverseV2: a strided view walking the reversed axes backwards.
        // Stateless random samplers (TensorFlow's Philox, `crate::random`): the shape operand
        // is a compile-time value, the seed (V1) or key, counter and algorithm (V2) are data.
        "StatelessRandomUniform"
        | "StatelessRandomNormal"
        | "StatelessTruncatedNormal"
        | "StatelessRandomUniformInt"
        | "StatelessRandomUniformV2"
        | "StatelessRandomNormalV2"
        | "StatelessTruncatedNormalV2"
        | "StatelessRandomUniformIntV2" => {
            use crate::random::Dist;
            let v2 = op.ends_with("V2");
            let dist = if op.contains("Truncated") {
                Some(Dist::Truncated)
            } else if op.contains("Normal") {
                Some(Dist::Normal)
            } else if op.contains("Int") {
                None
            } else {
                Some(Dist::Uniform)
            };
            let data: Vec<usize> = match (v2, dist.is_some()) {
                (false, true) => vec![1],
                (false, false) => vec![1, 2, 3],
                (true, true) => vec![1, 2, 3],
                (true, false) => vec![1, 2, 3, 4, 5],
            };
            need(data.len() + 1)?;
            let dtype = match (attr_type(node, "dtype"), dist) {
                (Some(d), _) => d,
                (None, Some(_)) => DType::Float32,
                (None, None) => return Err(CompileError::unsupported(node, "no dtype attribute")),
            };
            let dtype_ok = match dist {
                Some(_) => matches!(dtype, DType::Float32 | DType::Float64),
                None => matches!(dtype, DType::Int32 | DType::Int64),
            };
            let vector = |v: &ValueInfo, len: usize| v.shape[..] == [len];
            let operands_ok = if v2 {
                ins[1].dtype == DType::UInt64
                    && vector(&ins[1], 1)
                    && ins[2].dtype == DType::UInt64
                    && vector(&ins[2], 2)
                    && ins[3].shape.is_empty()
                    && ins[3].dtype == DType::Int32
            } else {
                matches!(ins[1].dtype, DType::Int32 | DType::Int64) && vector(&ins[1], 2)
            };
            let bounds_ok = dist.is_some()
                || data[data.len() - 2..].iter().all(|&i| ins[i].shape.is_empty() && ins[i].dtype == dtype);
            if !dtype_ok || !operands_ok || !bounds_ok {
                return Err(CompileError::unsupported(node, "operands the kernel refuses (it reports them)"));
            }
            let shape = int_const(node, &ins[0], "shape")?;
            let shape = dims_of(node, &shape, "shape")?;
            Ok(kernel(KernelOp::StatelessRandom { dist, v2, dtype }, data, vec![vi(dtype, shape)]))
        }
        // Philox on CPU (what the kernels implement).
        "StatelessRandomGetAlg" => {
            Ok(NodeInfo { kind: NodeKind::Constant, outputs: vec![konst(Tensor::scalar_i32(1))] })
        }
        "StatelessRandomGetKeyCounter" => {
            need(1)?;
            if !matches!(ins[0].dtype, DType::Int32 | DType::Int64) || ins[0].shape[..] != [2] {
                return Err(CompileError::unsupported(node, "the seed is not an integer vector of 2"));
            }
            Ok(kernel(KernelOp::KeyCounter, vec![0], vec![vi(DType::UInt64, vec![1]), vi(DType::UInt64, vec![2])]))
        }
        "Cumsum" | "Cumprod" => {
            need(2)?;
            let x = &ins[0];
            if x.shape.is_empty() || !matches!(x.dtype, DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64) {
                return Err(CompileError::unsupported(node, format!("{op} of a {} scalar or non-numeric", x.dtype)));
            }
            let axis = match int_const(node, &ins[1], "axis")?[..] {
                [a] => norm_axis(node, a, x.shape.len())?,
                _ => return Err(CompileError::unsupported(node, "axis is not a scalar")),
            };
            let op = KernelOp::Cumulative {
                prod: op == "Cumprod",
                exclusive: attr_bool(node, "exclusive"),
                reverse: attr_bool(node, "reverse"),
                outer: x.shape[..axis].iter().product(),
                n: x.shape[axis],
                inner: x.shape[axis + 1..].iter().product(),
            };
            Ok(kernel(op, vec![0], vec![vi(x.dtype, x.shape.clone())]))
        }
        "ReverseV2" => {
            need(2)?;
            let x = &ins[0];
            let r = x.shape.len();
            let mut rev = vec![false; r];
            for a in int_const(node, &ins[1], "axis")? {
                let a = norm_axis(node, a, r)?;
                if std::mem::replace(&mut rev[a], true) {
                    return Err(CompileError::Invalid(format!(
                        "node '{}' (ReverseV2): axis {a} given twice",
                        node.name
                    )));
                }
            }
            let st = strides_of(&x.shape);
            let mut offset = 0isize;
            let mut strides = Vec::with_capacity(r);
            for d in 0..r {
                if rev[d] && x.shape[d] > 0 {
                    offset += (x.shape[d] - 1) as isize * st[d] as isize;
                    strides.push(-(st[d] as isize));
                } else {
                    strides.push(st[d] as isize);
                }
            }
            let dims = x.shape.clone();
            Ok(kernel(KernelOp::Strided { dims: dims.clone(), strides, offset }, vec![0], vec![vi(x.dtype, dims)]))
        }
        "ResizeBilinear" | "ResizeBilinearGrad" => {
            need(2)?;
            let grad = op == "ResizeBilinearGrad";
            let attrs = crate::resize::Resize::of(node);
            let (x, out_shape) = if grad {
                let (dy, orig) = (&ins[0], &ins[1]);
                if orig.shape.len() != 4
                    || dy.shape.len() != 4
                    || orig.shape[0] != dy.shape[0]
                    || orig.shape[3] != dy.shape[3]
                {
                    return Err(CompileError::unsupported(
                        node,
                        "ResizeBilinearGrad operands (the kernel reports them)",
                    ));
                }
                (dy, orig.shape.clone())
            } else {
                let x = &ins[0];
                let size = int_const(node, &ins[1], "size")?;
                let [h, w] = size[..] else { return Err(CompileError::unsupported(node, "size is not [2]")) };
                if h <= 0 || w <= 0 || x.shape.len() != 4 {
                    return Err(CompileError::unsupported(node, "resize operands (the kernel reports them)"));
                }
                (x, vec![x.shape[0], h as usize, w as usize, x.shape[3]])
            };
            // The forward resize reads any real image type as float32 (TensorFlow's kernel
            // casts each element) and writes float32; the gradient is float32 only.
            let out_dtype = if grad { ins[1].dtype } else { DType::Float32 };
            let readable = if grad {
                x.dtype == DType::Float32
            } else {
                matches!(x.dtype, DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64)
            };
            if !readable || out_dtype != DType::Float32 {
                return Err(CompileError::unsupported(node, format!("{op} of {}", x.dtype)));
            }
            let (image, hw) = if grad {
                (&out_shape, (out_shape[1], out_shape[2]))
            } else {
                (&x.shape, (out_shape[1], out_shape[2]))
            };
            attrs.check(image, hw).map_err(|e| CompileError::unsupported(node, e))?;
            let out_hw = (out_shape[1], out_shape[2]);
            within_budget(node, DType::Float32, &out_shape)?;
            Ok(kernel(KernelOp::ResizeBilinear { attrs, grad, out_hw }, vec![0], vec![vi(DType::Float32, out_shape)]))
        }
        "ResizeNearestNeighbor" | "ResizeNearestNeighborGrad" => {
            need(2)?;
            let grad = op == "ResizeNearestNeighborGrad";
            let attrs = crate::resize::Resize::of(node);
            let x = &ins[0];
            let size = int_const(node, &ins[1], "size")?;
            let [h, w] = size[..] else { return Err(CompileError::unsupported(node, "size is not [2]")) };
            if h <= 0 || w <= 0 || x.shape.len() != 4 || (grad && x.dtype != DType::Float32) {
                return Err(CompileError::unsupported(node, "resize operands (the kernel reports them)"));
            }
            let out_hw = (h as usize, w as usize);
            let out_shape = vec![x.shape[0], out_hw.0, out_hw.1, x.shape[3]];
            let image = if grad { &out_shape } else { &x.shape };
            let hw = if grad { (x.shape[1], x.shape[2]) } else { out_hw };
            attrs.check(image, hw).map_err(|e| CompileError::unsupported(node, e))?;
            within_budget(node, x.dtype, &out_shape)?;
            Ok(kernel(KernelOp::ResizeNearest { attrs, grad, out_hw }, vec![0], vec![vi(x.dtype, out_shape)]))
        }
        "InTopKV2" | "InTopK" => {
            need(2)?;
            let (p, t) = (&ins[0], &ins[1]);
            if p.dtype != DType::Float32 || p.shape.len() != 2 || t.shape.len() != 1 || t.shape[0] != p.shape[0] {
                return Err(CompileError::unsupported(node, "InTopK operands (the kernel reports them)"));
            }
            let k = if op == "InTopK" {
                attr_int(node, "k").ok_or_else(|| CompileError::unsupported(node, "no k"))?
            } else {
                need(3)?;
                match int_const(node, &ins[2], "k")?[..] {
                    [k] => k,
                    _ => return Err(CompileError::unsupported(node, "k is not a scalar")),
                }
            };
            Ok(kernel(KernelOp::InTopK { k }, vec![0, 1], vec![vi(DType::Bool, vec![t.shape[0]])]))
        }
        "L2Loss" => {
            need(1)?;
            let x = &ins[0];
            if !matches!(x.dtype, DType::Float32 | DType::Float64) {
                return Err(CompileError::unsupported(node, format!("L2Loss of {}", x.dtype)));
            }
            Ok(kernel(KernelOp::L2Loss, vec![0], vec![vi(x.dtype, vec![])]))
        }
        // Unpack: a Split into pieces of one along the axis, each without that axis.
        "Unpack" => {
            need(1)?;
            let x = &ins[0];
            let a = norm_axis(node, attr_int(node, "axis").unwrap_or(0), x.shape.len())?;
            let n = x.shape[a];
            if attr_int(node, "num").is_some_and(|k| k != n as i64) {
                return Err(CompileError::unsupported(
                    node,
                    format!("num does not match dimension {n} (the kernel reports it)"),
                ));
            }
            let mut piece = x.shape.clone();
            piece.remove(a);
            let outputs = (0..n).map(|_| vi(x.dtype, piece.clone())).collect();
            Ok(kernel(KernelOp::Split { axis: a, sizes: vec![1; n] }, vec![0], outputs))
        }
        // Zero padding: the input scattered into a zeroed output of the padded shape.
        "Pad" => {
            need(2)?;
            let x = &ins[0];
            let p = int_const(node, &ins[1], "paddings")?;
            let r = x.shape.len();
            if p.len() != 2 * r || p.iter().any(|&v| v < 0) {
                return Err(CompileError::unsupported(node, format!("paddings {p:?} for rank {r}")));
            }
            let out: Vec<usize> = (0..r).map(|d| x.shape[d] + p[2 * d] as usize + p[2 * d + 1] as usize).collect();
            within_budget(node, x.dtype, &out)?;
            let st = strides_of(&out);
            let offset = (0..r).map(|d| p[2 * d] as isize * st[d] as isize).sum();
            let strides = st.iter().map(|&s| s as isize).collect();
            let op = KernelOp::StridedScatter { dims: x.shape.clone(), strides, offset };
            Ok(kernel(op, vec![0], vec![vi(x.dtype, out)]))
        }
        "SpaceToBatchND" | "BatchToSpaceND" => {
            need(3)?;
            let x = &ins[0];
            let block = int_const(node, &ins[1], "block_shape")?;
            let pads = int_const(node, &ins[2], "paddings")?;
            let sb = crate::reshuffle::SpaceBatch::new(op == "SpaceToBatchND", &block, &pads)
                .map_err(|e| CompileError::unsupported(node, e))?;
            let out = sb.output_shape(&x.shape).map_err(|e| CompileError::unsupported(node, e))?;
            Ok(kernel(KernelOp::SpaceBatch(sb), vec![0], vec![vi(x.dtype, out)]))
        }
        "Bitcast" => {
            need(1)?;
            let x = &ins[0];
            let to = attr_type(node, "type").ok_or_else(|| CompileError::unsupported(node, "no output type"))?;
            let native = |d: DType| matches!(d, DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64);
            if !native(x.dtype) || !native(to) {
                return Err(CompileError::unsupported(node, format!("Bitcast of {} to {to}", x.dtype)));
            }
            let out = crate::reshuffle::bitcast_shape(&x.shape, x.dtype, to)
                .map_err(|e| CompileError::unsupported(node, e))?;
            Ok(kernel(KernelOp::Bitcast { to }, vec![0], vec![vi(to, out)]))
        }
        "BitwiseAnd" | "BitwiseOr" | "BitwiseXor" | "LeftShift" | "RightShift" => {
            need(2)?;
            let (a, b) = (&ins[0], &ins[1]);
            if a.dtype != b.dtype || !matches!(a.dtype, DType::Int32 | DType::Int64) {
                return Err(CompileError::unsupported(node, format!("{op} of {} and {}", a.dtype, b.dtype)));
            }
            let shape = broadcast_shapes(&a.shape, &b.shape).ok_or_else(|| {
                CompileError::Invalid(format!(
                    "node '{}': shapes {:?} and {:?} do not broadcast",
                    node.name, a.shape, b.shape
                ))
            })?;
            let kind = crate::reshuffle::BitwiseKind::from_tf(op).expect("a bitwise op");
            Ok(kernel(KernelOp::Bitwise { kind }, vec![0, 1], vec![vi(a.dtype, shape)]))
        }
        "Transpose" => {
            need(2)?;
            let x = &ins[0];
            let perm = int_const(node, &ins[1], "perm")?;
            let r = x.shape.len();
            let mut seen = vec![false; r];
            let mut p = Vec::with_capacity(r);
            for &a in &perm {
                let a = norm_axis(node, a, r)?;
                if seen[a] {
                    return Err(CompileError::Invalid(format!(
                        "node '{}': perm {perm:?} is not a permutation",
                        node.name
                    )));
                }
                seen[a] = true;
                p.push(a);
            }
            if p.len() != r {
                return Err(CompileError::Invalid(format!("node '{}': perm {perm:?} has the wrong length", node.name)));
            }
            let st = strides_of(&x.shape);
            let dims: Vec<usize> = p.iter().map(|&a| x.shape[a]).collect();
            let strides: Vec<isize> = p.iter().map(|&a| st[a] as isize).collect();
            Ok(kernel(KernelOp::Strided { dims: dims.clone(), strides, offset: 0 }, vec![0], vec![vi(x.dtype, dims)]))
        }
        "Slice" => {
            need(3)?;
            let x = &ins[0];
            let begin = int_const(node, &ins[1], "begin")?;
            let size = int_const(node, &ins[2], "size")?;
            let r = x.shape.len();
            if begin.len() != r || size.len() != r {
                return Err(CompileError::Invalid(format!("node '{}': begin/size rank mismatch", node.name)));
            }
            let st = strides_of(&x.shape);
            let mut dims = Vec::with_capacity(r);
            let mut offset = 0isize;
            for d in 0..r {
                let b = begin[d];
                let s = if size[d] < 0 { x.shape[d] as i64 - b } else { size[d] };
                if b < 0 || s < 0 || (b + s) as usize > x.shape[d] {
                    return Err(CompileError::Invalid(format!("node '{}': slice out of bounds", node.name)));
                }
                dims.push(s as usize);
                offset += b as isize * st[d] as isize;
            }
            let strides = st.iter().map(|&s| s as isize).collect();
            Ok(kernel(KernelOp::Strided { dims: dims.clone(), strides, offset }, vec![0], vec![vi(x.dtype, dims)]))
        }
        "StridedSlice" => {
            need(4)?;
            strided_slice(node, ins)
        }
        "Tile" => {
            // out[j] with j_d = k_d * X_d + i_d is x[i]: iterate the 2r-dim
            // space [M_0, X_0, M_1, X_1, ...] row-major with stride 0 on the
            // repeat axes; its row-major order is exactly the output's.
            need(2)?;
            let x = &ins[0];
            let m = int_const(node, &ins[1], "multiples")?;
            if m.len() != x.shape.len() || m.iter().any(|&k| k < 0) {
                return Err(CompileError::Invalid(format!("node '{}': bad Tile multiples {m:?}", node.name)));
            }
            let st = strides_of(&x.shape);
            let mut dims = Vec::with_capacity(2 * m.len());
            let mut strides = Vec::with_capacity(2 * m.len());
            let mut out = Vec::with_capacity(m.len());
            for (d, &k) in m.iter().enumerate() {
                dims.extend([k as usize, x.shape[d]]);
                strides.extend([0isize, st[d] as isize]);
                out.push((k as usize).checked_mul(x.shape[d]).ok_or_else(|| {
                    CompileError::unsupported(node, format!("Tile multiples {m:?} of {:?} overflow", x.shape))
                })?);
            }
            Ok(kernel(KernelOp::Strided { dims, strides, offset: 0 }, vec![0], vec![vi(x.dtype, out)]))
        }
        "BroadcastTo" => {
            need(2)?;
            let x = &ins[0];
            let want = dims_of(node, &int_const(node, &ins[1], "shape")?, "shape")?;
            let out = broadcast_shapes(&x.shape, &want).filter(|s| *s == want).ok_or_else(|| {
                CompileError::Invalid(format!("node '{}': cannot broadcast {:?} to {want:?}", node.name, x.shape))
            })?;
            let strides = broadcast_strides(&x.shape, &out);
            Ok(kernel(KernelOp::Strided { dims: out.clone(), strides, offset: 0 }, vec![0], vec![vi(x.dtype, out)]))
        }
        "ConcatV2" => {
            need(2)?;
            let n = ins.len() - 1;
            let first = &ins[0];
            let r = first.shape.len();
            let a = int_const(node, &ins[n], "axis")?;
            let axis = norm_axis(node, a.first().copied().unwrap_or(0), r)?;
            let mut shape = first.shape.clone();
            shape[axis] = 0;
            for v in &ins[..n] {
                if v.dtype != first.dtype
                    || v.shape.len() != r
                    || v.shape.iter().enumerate().any(|(d, &s)| d != axis && s != first.shape[d])
                {
                    return Err(CompileError::Invalid(format!("node '{}': ConcatV2 inputs do not match", node.name)));
                }
                shape[axis] += v.shape[axis];
            }
            Ok(kernel(KernelOp::Concat { axis }, (0..n).collect(), vec![vi(first.dtype, shape)]))
        }
        "Pack" => {
            need(1)?;
            let first = &ins[0];
            let r = first.shape.len() + 1;
            let a = attr_int(node, "axis").unwrap_or(0);
            let axis = norm_axis(node, a, r)?;
            if ins.iter().any(|v| v.shape != first.shape || v.dtype != first.dtype) {
                return Err(CompileError::Invalid(format!("node '{}': Pack inputs do not match", node.name)));
            }
            let mut shape = first.shape.clone();
            shape.insert(axis, ins.len());
            Ok(kernel(KernelOp::Pack { axis }, (0..ins.len()).collect(), vec![vi(first.dtype, shape)]))
        }
        "Einsum" => {
            let eq = node
                .attr("equation")
                .and_then(|a| a.as_str())
                .ok_or_else(|| CompileError::unsupported(node, "the 'equation' attribute is missing"))?;
            let ranks: Vec<usize> = ins.iter().map(|v| v.shape.len()).collect();
            let equation = autoclust_graph::einsum::Equation::parse(eq, &ranks)
                .map_err(|e| CompileError::Invalid(format!("node '{}': {e}", node.name)))?;
            let first = ins.first().ok_or_else(|| CompileError::unsupported(node, "Einsum needs an operand"))?;
            if !matches!(first.dtype, DType::Float32 | DType::Float64) || ins.iter().any(|v| v.dtype != first.dtype) {
                return Err(CompileError::unsupported(node, "Einsum is compiled for float32 and float64 operands"));
            }
            let dims: Vec<Vec<Option<i64>>> =
                ins.iter().map(|v| v.shape.iter().map(|&d| Some(d as i64)).collect()).collect();
            let refs: Vec<&[Option<i64>]> = dims.iter().map(Vec::as_slice).collect();
            let sizes =
                equation.sizes(&refs).map_err(|e| CompileError::Invalid(format!("node '{}': {e}", node.name)))?;
            let shape: Vec<usize> = equation.output_dims(&sizes).iter().map(|d| d.unwrap_or(1) as usize).collect();
            Ok(kernel(KernelOp::Einsum { equation }, (0..ins.len()).collect(), vec![vi(first.dtype, shape)]))
        }
        "BatchMatMul" | "BatchMatMulV2" => {
            // A batched matmul is the einsum `...ij,...jk->...ik` (transposed operands
            // swap their last two letters), batch dimensions broadcast.
            need(2)?;
            let (x, y) = (&ins[0], &ins[1]);
            if x.shape.len() < 2 || y.shape.len() < 2 {
                return Err(CompileError::Invalid(format!("node '{}': operands of rank < 2", node.name)));
            }
            if !matches!(x.dtype, DType::Float32 | DType::Float64) || y.dtype != x.dtype {
                return Err(CompileError::unsupported(node, "BatchMatMul is compiled for float32 and float64"));
            }
            let a = if attr_bool(node, "adj_x") { "...ji" } else { "...ij" };
            let b = if attr_bool(node, "adj_y") { "...kj" } else { "...jk" };
            let eq = format!("{a},{b}->...ik");
            let equation = autoclust_graph::einsum::Equation::parse(&eq, &[x.shape.len(), y.shape.len()])
                .map_err(|e| CompileError::Invalid(format!("node '{}': {e}", node.name)))?;
            let dims: Vec<Vec<Option<i64>>> =
                ins[..2].iter().map(|v| v.shape.iter().map(|&d| Some(d as i64)).collect()).collect();
            let refs: Vec<&[Option<i64>]> = dims.iter().map(Vec::as_slice).collect();
            let sizes = equation
                .sizes(&refs)
                .map_err(|e| CompileError::unsupported(node, format!("batch dimensions do not match: {e}")))?;
            let shape: Vec<usize> = equation.output_dims(&sizes).iter().map(|d| d.unwrap_or(1) as usize).collect();
            Ok(kernel(KernelOp::Einsum { equation }, vec![0, 1], vec![vi(x.dtype, shape)]))
        }
        // NHWC fused batch normalisation and its gradient (a kernel step, `crate::batchnorm`);
        // operand shapes are checked here, a mismatch leaves the error to the interpreter.
        "FusedBatchNorm"
        | "FusedBatchNormV2"
        | "FusedBatchNormV3"
        | "FusedBatchNormGrad"
        | "FusedBatchNormGradV2"
        | "FusedBatchNormGradV3" => {
            let grad = op.starts_with("FusedBatchNormGrad");
            let v3 = op.ends_with("V3");
            need(if grad && v3 { 6 } else { 5 })?;
            crate::conv::require_nhwc(node).map_err(|e| CompileError::unsupported(node, e.to_string()))?;
            let attrs = crate::batchnorm::BnAttrs::parse(node)
                .ok_or_else(|| CompileError::unsupported(node, "an attribute has the wrong type"))?;
            let x = &ins[if grad { 1 } else { 0 }];
            let dtype = x.dtype;
            if !matches!(dtype, DType::Float32 | DType::Float64) || ins[..5].iter().any(|v| v.dtype != dtype) {
                return Err(CompileError::unsupported(node, format!("{op} of mixed or non-float dtypes")));
            }
            if x.shape.len() != 4 {
                return Err(CompileError::unsupported(node, "x is not 4-dimensional (the kernel reports it)"));
            }
            let c = x.shape[3];
            let vector = |v: &ValueInfo| v.shape[..] == [c];
            let ok = if grad {
                ins[0].shape == x.shape && ins[2..5].iter().all(vector)
            } else {
                let running =
                    |v: &ValueInfo| vector(v) || attrs.running_unused() && v.shape.iter().product::<usize>() == 0;
                vector(&ins[1]) && vector(&ins[2]) && running(&ins[3]) && running(&ins[4])
            };
            if !ok {
                return Err(CompileError::unsupported(node, "operand shapes do not match (the kernel reports it)"));
            }
            let mut outputs = vec![vi(dtype, x.shape.clone())];
            outputs.extend((0..if grad { 2 } else { 4 }).map(|_| vi(dtype, vec![c])));
            outputs.extend((0..if grad { 2 } else { usize::from(v3) }).map(|_| vi(dtype, vec![0])));
            Ok(kernel(KernelOp::BatchNorm { attrs, grad }, (0..5).collect(), outputs))
        }
        // NHWC pooling and its gradients; AvgPoolGrad's input shape must be known.
        "MaxPool" | "AvgPool" | "MaxPoolGrad" | "AvgPoolGrad" => {
            use crate::kernels::PoolKind;
            use crate::pool::{PoolAttrs, PoolShape};
            need(match op {
                "MaxPoolGrad" => 3,
                "AvgPoolGrad" => 2,
                _ => 1,
            })?;
            let attrs = PoolAttrs::parse(node).map_err(|e| CompileError::unsupported(node, e.to_string()))?;
            let (kind, input, data) = match op {
                "AvgPoolGrad" => {
                    let d = int_const(node, &ins[0], "orig_input_shape")?;
                    let d: Vec<usize> = d.iter().map(|&x| usize::try_from(x).unwrap_or(usize::MAX)).collect();
                    let d = <[usize; 4]>::try_from(d)
                        .ok()
                        .filter(|d| d.iter().all(|&x| x < 1 << 31))
                        .ok_or_else(|| CompileError::unsupported(node, "orig_input_shape is not 4 valid sizes"))?;
                    (PoolKind::AvgGrad, d, vec![1])
                }
                _ => {
                    let d = <[usize; 4]>::try_from(ins[0].shape.clone())
                        .map_err(|_| CompileError::unsupported(node, "the input is not 4-dimensional"))?;
                    match op {
                        "MaxPool" => (PoolKind::Max, d, vec![0]),
                        "AvgPool" => (PoolKind::Avg, d, vec![0]),
                        _ => (PoolKind::MaxGrad, d, vec![0, 2]),
                    }
                }
            };
            let dtype = ins[data[0]].dtype;
            if !matches!(dtype, DType::Float32 | DType::Float64) || data.iter().any(|&i| ins[i].dtype != dtype) {
                return Err(CompileError::unsupported(node, format!("{op} of {dtype}")));
            }
            let win = attrs.window(input).map_err(|e| CompileError::unsupported(node, e.to_string()))?;
            let shape = PoolShape { input, win };
            let pooled = shape.output();
            let grad_ok = match kind {
                PoolKind::MaxGrad => ins[1].shape[..] == pooled[..] && ins[2].shape[..] == pooled[..],
                PoolKind::AvgGrad => ins[1].shape[..] == pooled[..],
                _ => true,
            };
            if !grad_ok {
                return Err(CompileError::unsupported(node, "gradient shapes do not match (the kernel reports it)"));
            }
            let out = if matches!(kind, PoolKind::Max | PoolKind::Avg) { pooled } else { input };
            Ok(kernel(KernelOp::Pool { kind, shape }, data, vec![vi(dtype, out.to_vec())]))
        }
        // NHWC convolutions: the geometry is fixed at the shapes compiled for; the gradients'
        // size operands must be compile-time values (constant arguments, `Shape`s).
        "Conv2D"
        | "Conv2DBackpropInput"
        | "Conv2DBackpropFilter"
        | "DepthwiseConv2dNative"
        | "DepthwiseConv2dNativeBackpropInput"
        | "DepthwiseConv2dNativeBackpropFilter" => {
            use crate::conv::{ConvShape, WindowAttrs};
            use crate::kernels::ConvKind;
            need(if matches!(op, "Conv2D" | "DepthwiseConv2dNative") { 2 } else { 3 })?;
            let attrs = WindowAttrs::parse(node, true).map_err(|e| CompileError::unsupported(node, e.to_string()))?;
            let four = |v: &ValueInfo, what: &str| -> Result<[usize; 4], CompileError> {
                <[usize; 4]>::try_from(v.shape.clone())
                    .map_err(|_| CompileError::unsupported(node, format!("{what} is not 4-dimensional")))
            };
            let sizes = |v: &ValueInfo, what: &str| -> Result<[usize; 4], CompileError> {
                let d = int_const(node, v, what)?;
                let d: Vec<usize> = d.iter().map(|&x| usize::try_from(x).unwrap_or(usize::MAX)).collect();
                <[usize; 4]>::try_from(d)
                    .ok()
                    .filter(|d| d.iter().all(|&x| x < 1 << 31))
                    .ok_or_else(|| CompileError::unsupported(node, format!("{what} is not 4 valid sizes")))
            };
            let depthwise = op.starts_with("Depthwise");
            let (kind, input, filter, data, dy) = match op {
                "Conv2D" | "DepthwiseConv2dNative" => (
                    if depthwise { ConvKind::Depthwise } else { ConvKind::Forward },
                    four(&ins[0], "the input")?,
                    four(&ins[1], "the filter")?,
                    [0, 1],
                    None,
                ),
                "Conv2DBackpropInput" | "DepthwiseConv2dNativeBackpropInput" => (
                    if depthwise { ConvKind::DepthwiseBackpropInput } else { ConvKind::BackpropInput },
                    sizes(&ins[0], "input_sizes")?,
                    four(&ins[1], "the filter")?,
                    [1, 2],
                    Some(&ins[2]),
                ),
                _ => (
                    if depthwise { ConvKind::DepthwiseBackpropFilter } else { ConvKind::BackpropFilter },
                    four(&ins[0], "the input")?,
                    sizes(&ins[1], "filter_sizes")?,
                    [0, 2],
                    Some(&ins[2]),
                ),
            };
            let dtype = ins[data[0]].dtype;
            if !matches!(dtype, DType::Float32 | DType::Float64) || ins[data[1]].dtype != dtype {
                return Err(CompileError::unsupported(node, format!("{op} of {dtype}")));
            }
            let win = if depthwise { attrs.depthwise_window(input, filter) } else { attrs.conv_window(input, filter) }
                .map_err(|e| CompileError::unsupported(node, e.to_string()))?;
            let shape = ConvShape { input, filter, win };
            let output = if depthwise { shape.depthwise_output() } else { shape.output() };
            if let Some(dy) = dy {
                if dy.shape[..] != output[..] {
                    return Err(CompileError::unsupported(node, "out_backprop does not match (the kernel reports it)"));
                }
            }
            let out = match kind {
                ConvKind::Forward | ConvKind::Depthwise => output,
                ConvKind::BackpropInput | ConvKind::DepthwiseBackpropInput => input,
                ConvKind::BackpropFilter | ConvKind::DepthwiseBackpropFilter => filter,
            };
            Ok(kernel(KernelOp::Conv { kind, shape }, data.to_vec(), vec![vi(dtype, out.to_vec())]))
        }
        "UnsortedSegmentSum" => {
            need(3)?;
            let (data, ids) = (&ins[0], &ins[1]);
            let num = match int_const(node, &ins[2], "num_segments")?[..] {
                [n] if n >= 0 => n as usize,
                _ => return Err(CompileError::unsupported(node, "num_segments is not a non-negative scalar")),
            };
            if !matches!(data.dtype, DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64)
                || !matches!(ids.dtype, DType::Int32 | DType::Int64)
                || data.shape.len() < ids.shape.len()
                || data.shape[..ids.shape.len()] != ids.shape[..]
            {
                return Err(CompileError::unsupported(node, "operands the kernel checks (the interpreter reports)"));
            }
            let inner: usize = data.shape[ids.shape.len()..].iter().product();
            let mut shape = vec![num];
            shape.extend_from_slice(&data.shape[ids.shape.len()..]);
            Ok(kernel(KernelOp::SegmentSum { num, inner }, vec![0, 1], vec![vi(data.dtype, shape)]))
        }
        "GatherV2" | "Gather" => {
            need(2)?;
            let (p, idx) = (&ins[0], &ins[1]);
            let axis = if op == "GatherV2" {
                need(3)?;
                let a = int_const(node, &ins[2], "axis")?;
                norm_axis(node, a.first().copied().unwrap_or(0), p.shape.len())?
            } else {
                0
            };
            if !matches!(idx.dtype, DType::Int32 | DType::Int64) || p.shape.is_empty() {
                return Err(CompileError::unsupported(node, "gather needs integer indices into a tensor of rank >= 1"));
            }
            // batch_dims b: params and indices share their first b dimensions.
            let mut b = attr_int(node, "batch_dims").unwrap_or(0);
            if b < 0 {
                b += idx.shape.len() as i64;
            }
            let b = usize::try_from(b)
                .ok()
                .filter(|&b| b <= idx.shape.len() && b <= axis && p.shape[..b] == idx.shape[..b])
                .ok_or_else(|| {
                    CompileError::Invalid(format!("node '{}': batch_dims does not fit the shapes", node.name))
                })?;
            let mut shape = p.shape[..axis].to_vec();
            shape.extend_from_slice(&idx.shape[b..]);
            shape.extend_from_slice(&p.shape[axis + 1..]);
            Ok(kernel(KernelOp::Gather { axis, batch_dims: b }, vec![0, 1], vec![vi(p.dtype, shape)]))
        }
        _ if ScatterKind::from_tf(op).is_some() => {
            need(3)?;
            let kind = ScatterKind::from_tf(op).expect("checked");
            let (x, idx, upd) = (&ins[0], &ins[1], &ins[2]);
            if !matches!(idx.dtype, DType::Int32 | DType::Int64) {
                return Err(CompileError::unsupported(node, format!("indices of dtype {}", idx.dtype)));
            }
            let numeric = matches!(x.dtype, DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64);
            if upd.dtype != x.dtype || !(numeric || kind == ScatterKind::Update && x.dtype == DType::Bool) {
                return Err(CompileError::unsupported(node, format!("{op} of {} into {}", upd.dtype, x.dtype)));
            }
            // indices [..., K] address the first K dims; updates are indices[:-1] + tensor[K:].
            let Some((&depth, batch)) = idx.shape.split_last() else {
                return Err(CompileError::unsupported(node, "scalar indices"));
            };
            let mut want = batch.to_vec();
            if depth <= x.shape.len() {
                want.extend_from_slice(&x.shape[depth..]);
            }
            if depth == 0 {
                return Err(CompileError::unsupported(node, "indices with an empty last dimension"));
            }
            if depth > x.shape.len() || upd.shape != want {
                return Err(CompileError::Invalid(format!(
                    "node '{}': {op} indices {:?} and updates {:?} do not fit tensor {:?}",
                    node.name, idx.shape, upd.shape, x.shape
                )));
            }
            Ok(kernel(KernelOp::Scatter { kind }, vec![0, 1, 2], vec![vi(x.dtype, x.shape.clone())]))
        }
        _ => Err(CompileError::unsupported(node, "op has no lowering")),
    }
}

fn kernel(op: KernelOp, data_inputs: Vec<usize>, outputs: Vec<ValueInfo>) -> NodeInfo {
    NodeInfo { kind: NodeKind::Kernel { op, data_inputs }, outputs }
}

/// An integer reduction of a constant with TensorFlow's integer semantics (wrapping
/// arithmetic; `Mean` divides truncating, and an empty mean is 0), in the input's dtype.
fn fold_int_reduce(t: &Tensor, axes: &[usize], kind: ReduceKind, out_shape: Vec<usize>) -> Option<Tensor> {
    let v = t.to_i64_vec()?;
    let shape = &t.shape;
    let out_len: usize = out_shape.iter().product();
    let mut acc: Vec<Option<i64>> = vec![None; out_len];
    let mut count = vec![0i64; out_len];
    let kept: Vec<usize> = (0..shape.len()).filter(|d| !axes.contains(d)).collect();
    for (flat, &x) in v.iter().enumerate() {
        // The output position: the kept coordinates of `flat`, row-major.
        let (mut rem, mut coords) = (flat, vec![0usize; shape.len()]);
        for d in (0..shape.len()).rev() {
            coords[d] = rem % shape[d].max(1);
            rem /= shape[d].max(1);
        }
        let o = kept.iter().fold(0usize, |o, &d| o * shape[d] + coords[d]);
        let wrap = |y: i64| if t.dtype == DType::Int32 { y as i32 as i64 } else { y };
        acc[o] = Some(match (acc[o], kind) {
            (None, _) => x,
            (Some(a), ReduceKind::Sum | ReduceKind::Mean) => wrap(a.wrapping_add(x)),
            (Some(a), ReduceKind::Prod) => wrap(a.wrapping_mul(x)),
            (Some(a), ReduceKind::Max) => a.max(x),
            (Some(a), ReduceKind::Min) => a.min(x),
        });
        count[o] += 1;
    }
    let values: Vec<i64> = acc
        .iter()
        .zip(&count)
        .map(|(a, &n)| match (a, kind) {
            (Some(a), ReduceKind::Mean) => a / n,
            (Some(a), _) => *a,
            (None, ReduceKind::Prod) => 1,
            (None, ReduceKind::Max) => {
                if t.dtype == DType::Int32 {
                    i32::MIN as i64
                } else {
                    i64::MIN
                }
            }
            (None, ReduceKind::Min) => {
                if t.dtype == DType::Int32 {
                    i32::MAX as i64
                } else {
                    i64::MAX
                }
            }
            (None, _) => 0,
        })
        .collect();
    match t.dtype {
        DType::Int32 => Tensor::from_i32(out_shape, values.into_iter().map(|x| x as i32).collect()).ok(),
        _ => Tensor::from_i64(out_shape, values).ok(),
    }
}

fn reduced_shape(shape: &[usize], axes: &[usize], keep: bool) -> Vec<usize> {
    let mut out = Vec::new();
    for (d, &n) in shape.iter().enumerate() {
        if axes.contains(&d) {
            if keep {
                out.push(1);
            }
        } else {
            out.push(n);
        }
    }
    out
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
/// one has size 1, a new axis none — it only reshapes the output).
fn strided_slice(node: &Node, ins: &[ValueInfo]) -> Result<NodeInfo, CompileError> {
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
    Ok(kernel(KernelOp::Strided { dims, strides: kstrides, offset }, vec![0], vec![vi(x.dtype, out_shape)]))
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

/// Evaluates a node on constant inputs at compile time. `None` leaves it to run time.
fn evaluate(node: &Node, info: &NodeInfo, inputs: &[&Tensor]) -> Option<Vec<Tensor>> {
    match &info.kind {
        NodeKind::View => {
            let t = inputs[0];
            Some(vec![Tensor { dtype: t.dtype, shape: info.outputs[0].shape.clone(), data: t.data.clone() }])
        }
        NodeKind::Kernel { op, data_inputs } => {
            let ins: Vec<&Tensor> = data_inputs.iter().map(|&i| inputs[i]).collect();
            let shapes: Vec<Vec<usize>> = info.outputs.iter().map(|o| o.shape.clone()).collect();
            op.run(&ins, &shapes).ok()
        }
        NodeKind::Elementwise(EwOp::Copy) => {
            // Identity, or a Reshape/Squeeze/reduction that keeps shape and order
            // ([`same_values`]): its other inputs (a shape, axes) are not operands.
            let t = inputs[0];
            Some(vec![Tensor { dtype: t.dtype, shape: info.outputs[0].shape.clone(), data: t.data.clone() }])
        }
        NodeKind::Elementwise(ew) => {
            let out = &info.outputs[0];
            fold_elementwise(node, *ew, inputs, out).map(|t| vec![t])
        }
        _ => None,
    }
}

/// One element of a constant, in its own dtype (never widened, so folding rounds and wraps
/// exactly as the run-time kernels do).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Scalar {
    F32(f32),
    F64(f64),
    I32(i32),
    I64(i64),
    Bool(bool),
}

impl Scalar {
    fn at(t: &Tensor, i: usize) -> Option<Scalar> {
        Some(match &t.data {
            TensorData::F32(v) => Scalar::F32(*v.get(i)?),
            TensorData::F64(v) => Scalar::F64(*v.get(i)?),
            TensorData::I32(v) => Scalar::I32(*v.get(i)?),
            TensorData::I64(v) => Scalar::I64(*v.get(i)?),
            TensorData::Bool(v) => Scalar::Bool(*v.get(i)?),
            _ => return None,
        })
    }

    fn is_nonzero(self) -> bool {
        match self {
            Scalar::F32(x) => x != 0.0,
            Scalar::F64(x) => x != 0.0,
            Scalar::I32(x) => x != 0,
            Scalar::I64(x) => x != 0,
            Scalar::Bool(x) => x,
        }
    }

    /// TensorFlow's `Cast` as the run-time kernel does it: C++ `static_cast`, with
    /// out-of-range float→int saturating and NaN→0 (Rust `as`), integer narrowing wrapping.
    fn cast(self, to: DType) -> Option<Scalar> {
        if to == DType::Bool {
            return Some(Scalar::Bool(self.is_nonzero()));
        }
        let from_float = |x: f64| match to {
            DType::Float32 => Some(Scalar::F32(x as f32)),
            DType::Float64 => Some(Scalar::F64(x)),
            DType::Int32 => Some(Scalar::I32(x as i32)),
            DType::Int64 => Some(Scalar::I64(x as i64)),
            _ => None,
        };
        let from_int = |x: i64| match to {
            DType::Float32 => Some(Scalar::F32(x as f32)),
            DType::Float64 => Some(Scalar::F64(x as f64)),
            DType::Int32 => Some(Scalar::I32(x as i32)),
            DType::Int64 => Some(Scalar::I64(x)),
            _ => None,
        };
        match self {
            Scalar::F32(x) => from_float(x as f64),
            Scalar::F64(x) => from_float(x),
            Scalar::I32(x) => from_int(x as i64),
            Scalar::I64(x) => from_int(x),
            Scalar::Bool(x) => from_int(x as i64),
        }
    }
}

/// Arithmetic with the run-time kernels' semantics (`runtime/src/kernels/elementwise.rs`):
/// integers wrap in two's complement, float `Maximum`/`Minimum` propagate NaN.
/// What constant folding needs beyond TensorFlow's arithmetic, which it takes from
/// [`TfArith`] — the same definitions the interpreter's kernels use, so folding cannot drift
/// from them.
trait FoldNum: TfArith {
    fn zero() -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    fn is_zero(self) -> bool;
    fn wrap(self) -> Scalar;
}

macro_rules! fold_int {
    ($t:ty, $variant:ident) => {
        impl FoldNum for $t {
            fn zero() -> Self {
                0
            }
            fn floor(self) -> Self {
                self
            }
            fn ceil(self) -> Self {
                self
            }
            fn is_zero(self) -> bool {
                self == 0
            }
            fn wrap(self) -> Scalar {
                Scalar::$variant(self)
            }
        }
    };
}
fold_int!(i32, I32);
fold_int!(i64, I64);

macro_rules! fold_float {
    ($t:ty, $variant:ident) => {
        impl FoldNum for $t {
            fn zero() -> Self {
                0.0
            }
            fn floor(self) -> Self {
                <$t>::floor(self)
            }
            fn ceil(self) -> Self {
                <$t>::ceil(self)
            }
            fn is_zero(self) -> bool {
                self == 0.0
            }
            fn wrap(self) -> Scalar {
                Scalar::$variant(self)
            }
        }
    };
}
fold_float!(f32, F32);
fold_float!(f64, F64);

/// Folds an elementwise op on constants with an exact scalar evaluator working in each
/// operand's own dtype (transcendentals stay run-time so they use the compiled kernels).
fn fold_elementwise(node: &Node, ew: EwOp, inputs: &[&Tensor], out: &ValueInfo) -> Option<Tensor> {
    if ew.is_transcendental() || inputs.is_empty() {
        return None;
    }
    let n = out.elements();
    let strides: Vec<Vec<isize>> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| broadcast_strides(&crate::plan::operand_view(&node.op, i, &t.shape, &out.shape), &out.shape))
        .collect();
    let mut res = Vec::with_capacity(n);
    let mut idx = vec![0usize; out.shape.len()];
    let real_div = node.op == "RealDiv";
    for _ in 0..n {
        let args: Vec<Scalar> = inputs
            .iter()
            .zip(&strides)
            .map(|(t, s)| Scalar::at(t, idx.iter().zip(s).map(|(&i, &s)| i as isize * s).sum::<isize>() as usize))
            .collect::<Option<_>>()?;
        let r = scalar_eval(ew, &args, out.dtype, real_div)?;
        res.push(r);
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            if idx[d] < out.shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    let collect = |want: DType| res.iter().all(|r| scalar_dtype(*r) == want);
    if !collect(out.dtype) {
        return None;
    }
    let data = match out.dtype {
        DType::Float32 => TensorData::F32(Arc::new(res.iter().filter_map(|r| unwrap_f32(*r)).collect())),
        DType::Float64 => TensorData::F64(Arc::new(res.iter().filter_map(|r| unwrap_f64(*r)).collect())),
        DType::Int32 => TensorData::I32(Arc::new(res.iter().filter_map(|r| unwrap_i32(*r)).collect())),
        DType::Int64 => TensorData::I64(Arc::new(res.iter().filter_map(|r| unwrap_i64(*r)).collect())),
        DType::Bool => TensorData::Bool(Arc::new(res.iter().filter_map(|r| unwrap_bool(*r)).collect())),
        _ => return None,
    };
    Some(Tensor { dtype: out.dtype, shape: out.shape.clone(), data })
}

fn scalar_dtype(s: Scalar) -> DType {
    match s {
        Scalar::F32(_) => DType::Float32,
        Scalar::F64(_) => DType::Float64,
        Scalar::I32(_) => DType::Int32,
        Scalar::I64(_) => DType::Int64,
        Scalar::Bool(_) => DType::Bool,
    }
}

fn unwrap_f32(s: Scalar) -> Option<f32> {
    if let Scalar::F32(x) = s {
        Some(x)
    } else {
        None
    }
}

fn unwrap_f64(s: Scalar) -> Option<f64> {
    if let Scalar::F64(x) = s {
        Some(x)
    } else {
        None
    }
}

fn unwrap_i32(s: Scalar) -> Option<i32> {
    if let Scalar::I32(x) = s {
        Some(x)
    } else {
        None
    }
}

fn unwrap_i64(s: Scalar) -> Option<i64> {
    if let Scalar::I64(x) = s {
        Some(x)
    } else {
        None
    }
}

fn unwrap_bool(s: Scalar) -> Option<bool> {
    if let Scalar::Bool(x) = s {
        Some(x)
    } else {
        None
    }
}

/// Evaluates one element. `None` (unsupported op or dtype, integer division by zero,
/// integer `RealDiv`) leaves the node to run time, which reports any error itself.
fn scalar_eval(ew: EwOp, a: &[Scalar], out: DType, real_div: bool) -> Option<Scalar> {
    match ew {
        EwOp::Copy => return Some(a[0]),
        EwOp::Cast => return a[0].cast(out),
        EwOp::Select => return Some(if a.first()?.is_nonzero() { *a.get(1)? } else { *a.get(2)? }),
        EwOp::LogicalAnd | EwOp::LogicalOr | EwOp::LogicalNot => {
            let x: Vec<bool> =
                a.iter().map(|s| if let Scalar::Bool(b) = s { Some(*b) } else { None }).collect::<Option<_>>()?;
            return Some(Scalar::Bool(match ew {
                EwOp::LogicalAnd => *x.first()? && *x.get(1)?,
                EwOp::LogicalOr => *x.first()? || *x.get(1)?,
                _ => !*x.first()?,
            }));
        }
        _ => {}
    }
    if let Some(first) = a.first() {
        if a.iter().any(|s| scalar_dtype(*s) != scalar_dtype(*first)) {
            return None;
        }
    }
    if ew.is_predicate() {
        return compare(ew, *a.first()?, *a.get(1)?).map(Scalar::Bool);
    }
    if matches!(ew, EwOp::FloorDiv | EwOp::FloorMod) {
        // Python's (and TensorFlow's) floor division of integers; a zero divisor is left to
        // the run-time kernel's error.
        let floor = |x: i64, y: i64| -> Option<(i64, i64)> {
            let (q, r) = (x.checked_div(y)?, x.checked_rem(y)?);
            Some(if r != 0 && ((r < 0) != (y < 0)) { (q - 1, r + y) } else { (q, r) })
        };
        let pick = |(q, r): (i64, i64)| if ew == EwOp::FloorDiv { q } else { r };
        return match (*a.first()?, *a.get(1)?) {
            (Scalar::I32(x), Scalar::I32(y)) => {
                let v = pick(floor(x as i64, y as i64)?);
                Some(Scalar::I32(i32::try_from(v).ok()?))
            }
            (Scalar::I64(x), Scalar::I64(y)) => Some(Scalar::I64(pick(floor(x, y)?))),
            _ => None,
        };
    }
    match a {
        [Scalar::F32(_), ..] => num_eval(ew, &a.iter().filter_map(|s| unwrap_f32(*s)).collect::<Vec<_>>(), real_div),
        [Scalar::F64(_), ..] => num_eval(ew, &a.iter().filter_map(|s| unwrap_f64(*s)).collect::<Vec<_>>(), real_div),
        [Scalar::I32(_), ..] => num_eval(ew, &a.iter().filter_map(|s| unwrap_i32(*s)).collect::<Vec<_>>(), real_div),
        [Scalar::I64(_), ..] => num_eval(ew, &a.iter().filter_map(|s| unwrap_i64(*s)).collect::<Vec<_>>(), real_div),
        _ => None,
    }
}

fn compare(ew: EwOp, x: Scalar, y: Scalar) -> Option<bool> {
    let ord = match (x, y) {
        (Scalar::F32(p), Scalar::F32(q)) => p.partial_cmp(&q),
        (Scalar::F64(p), Scalar::F64(q)) => p.partial_cmp(&q),
        (Scalar::I32(p), Scalar::I32(q)) => p.partial_cmp(&q),
        (Scalar::I64(p), Scalar::I64(q)) => p.partial_cmp(&q),
        (Scalar::Bool(p), Scalar::Bool(q)) => p.partial_cmp(&q),
        _ => return None,
    };
    use std::cmp::Ordering::*;
    // `ord` is None only for a NaN operand: every comparison but `NotEqual` is false.
    Some(match ew {
        EwOp::Less => ord == Some(Less),
        EwOp::LessEqual => matches!(ord, Some(Less | Equal)),
        EwOp::Greater => ord == Some(Greater),
        EwOp::GreaterEqual => matches!(ord, Some(Greater | Equal)),
        EwOp::Equal => ord == Some(Equal),
        EwOp::NotEqual => ord != Some(Equal),
        _ => return None,
    })
}

fn num_eval<T: FoldNum>(ew: EwOp, a: &[T], real_div: bool) -> Option<Scalar> {
    let x = *a.first()?;
    let y = || a.get(1).copied();
    let r = match ew {
        EwOp::Add => x.add(y()?),
        EwOp::AddN => a[1..].iter().fold(x, |acc, &v| acc.add(v)),
        EwOp::Sub => x.sub(y()?),
        EwOp::Mul => x.mul(y()?),
        EwOp::Div => {
            let d = y()?;
            if T::IS_INT && (real_div || d.is_zero()) {
                return None;
            }
            x.div(d)
        }
        // `y == 0 ? 0 : x ∘ y`, floats only.
        EwOp::DivNoNan | EwOp::MulNoNan => {
            let d = y()?;
            if T::IS_INT {
                return None;
            }
            if d.is_zero() {
                T::zero()
            } else if ew == EwOp::DivNoNan {
                x.div(d)
            } else {
                x.mul(d)
            }
        }
        EwOp::Neg => x.neg(),
        EwOp::Abs => x.abs(),
        EwOp::Square => x.mul(x),
        EwOp::Maximum => x.maximum(y()?),
        EwOp::Minimum => x.minimum(y()?),
        EwOp::Relu => x.maximum(T::zero()),
        EwOp::Floor => x.floor(),
        EwOp::Ceil => x.ceil(),
        EwOp::Sign => x.sign(),
        _ => return None,
    };
    Some(r.wrap())
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
        if crate::lists::is_list_op(op) {
            return true;
        }
        let n = node(op);
        let probe = std::panic::catch_unwind(|| analyze_node(&n, &[], &[], &[]));
        let Ok(result) = probe else { panic!("{op}: the analysis panics on a node without inputs") };
        match result {
            Err(CompileError::Unsupported { reason, .. }) => reason != "op has no lowering",
            _ => true,
        }
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
        const NOT_CLUSTER_OPS: &[&str] = &[
            "_Arg",
            "_Retval",
            autoclust_graph::protocol::SAME_SHAPE_OP,
            "While",
            "StatelessWhile",
            "If",
            "StatelessIf",
            "Case",
            "StatelessCase",
        ];
        let listed: Vec<&str> =
            autoclust_graph::jit_ops::JIT_COMPUTE_OPS.iter().chain(autoclust_graph::TENSOR_LIST_OPS).copied().collect();
        // Listed, but rewritten before the compiler sees a body: encapsulation splits an
        // `IdentityN` into one `Identity` per output.
        const REWRITTEN_BY_ENCAPSULATION: &[&str] = &["IdentityN"];
        let unlowered: Vec<&str> =
            listed.iter().copied().filter(|op| !lowers(op) && !REWRITTEN_BY_ENCAPSULATION.contains(op)).collect();
        assert!(unlowered.is_empty(), "listed in jit_ops but the compiler has no lowering: {unlowered:?}");
        let unlisted: Vec<&str> = autoclust_graph::registry::op_names()
            .filter(|op| lowers(op) && !listed.contains(op) && !NOT_CLUSTER_OPS.contains(op))
            .collect();
        assert!(unlisted.is_empty(), "lowered by the compiler but not in jit_ops: {unlisted:?}");
        for op in autoclust_graph::jit_ops::VARIABLE_OPS {
            assert!(!lowers(op), "{op} is run by the bridge; the compiler should never see it");
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
