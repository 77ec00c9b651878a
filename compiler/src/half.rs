//! Half precision in compiled bodies: `float16` and `bfloat16` computed in float32 with one
//! rounding per op, the way the interpreter (`runtime/src/kernels/half.rs`) and TensorFlow's
//! CPU kernels compute them.
//!
//! TensorFlow's `Eigen::half`/`Eigen::bfloat16` arithmetic widens both operands to float32,
//! computes, and rounds the result back (nearest, ties to even). So a body in half precision
//! is the same body in float32 with a rounding after every op that makes a half value:
//! [`widen`] rewrites the body that way before analysis, and the compiled function widens
//! its half arguments on entry and narrows its half results on exit ([`Boundary`]). A
//! rounded value is exactly a half value kept in a float32 lane, so the narrowing at the
//! end is exact and the results are the interpreter's bits — TensorFlow's for the
//! elementwise ops; reductions, softmax and bfloat16 GEMMs accumulate in
//! float32 here where TensorFlow's Eigen kernels accumulate in the half type (an ulp or so
//! per op, in an order that depends on TensorFlow's packet width and threads). Where the
//! order is TensorFlow's plain loop, its bits are reproduced: a bfloat16 `BiasAddGrad` sums
//! rows in order, rounding each partial sum (`ROUNDED_ROWS_ATTR`), and half `Cumsum`/
//! `Cumprod` (a half running value) stay out of clusters for the interpreter's scan. The rounding is an elementwise
//! op (`ROUND_OP`, [`crate::analyze::EwOp::RoundHalf`]) that fuses into the loops around it:
//! a Keras `mixed_float16` step compiles into the same fused loops and GEMMs as in float32.
//!
//! The rewrite, per node of the body:
//! - `_Arg`/`_Retval` of a half type become float32 (the boundary converts).
//! - A half `Const` becomes its float32 value (exact).
//! - An op whose attributes name a half type gets float32 in their place, and each output
//!   whose declared type is half gets a rounding node its consumers read instead — except
//!   for ops that only move, pick or compare values (`Reshape`, `Maximum`, `Relu`, …), whose
//!   results are half values already. Outputs of other types (`ArgMax`'s index,
//!   `FusedBatchNormV3`'s float32 statistics) are not rounded.
//! - A stateless uniform sampler draws TensorFlow's half samples (from 10 or 7 random bits
//!   each, not float32 samples rounded), marked for the sampler by `HALF_UNIFORM_ATTR`.
//! - Ops TensorFlow computes as several half operations (`AddN` left to right, `Sigmoid`,
//!   `Elu`, `Selu`, `LeakyRelu`, `Softplus`, their gradients, `SquaredDifference`, `Mean`) become
//!   their programs (`autoclust_graph::half::half_program`, which the interpreter runs too),
//!   each step rounded; one rounding of the float32 result would differ.
//!
//! Declined (the cluster runs in the interpreter, with its note): half values passed to
//! functional control flow or calls (their functions are typed by their signatures),
//! TensorLists of half elements, `Bitcast` (a reinterpretation of the half bytes) and
//! `Cross` (its rounding is per product). The clusterer refuses the same nodes
//! (`passes/src/compilable.rs`).

use std::collections::HashMap;

use autoclust_graph::half::HalfStep;
use autoclust_graph::{AttrValue, DType, Graph, ListValue, Node, NodeId, Output, Tensor};

use crate::CompileError;

/// The op of the rounding node ([`crate::analyze::EwOp::RoundHalf`]); its `T` attribute
/// names the half type. Only this pass makes it.
pub const ROUND_OP: &str = "_AutoclustRoundToHalf";

/// On a stateless uniform sampler of a half type rewritten to float32: the half type, whose
/// samples TensorFlow draws from their own few bits (`Dist::UniformHalf`), not as float32
/// samples rounded.
pub const HALF_UNIFORM_ATTR: &str = "_autoclust_half_uniform";

/// On a bfloat16 `BiasAddGrad` rewritten to float32: sum its rows in order, rounding each
/// partial sum to bfloat16 (`KernelOp::BiasGradRounded`), as TensorFlow's kernel does
/// (`autoclust_graph::half::bias_grad_rounds_rows`).
pub const ROUNDED_ROWS_ATTR: &str = "_autoclust_rounded_rows";

/// Ops whose half results are half values of their inputs (moved, picked, compared or
/// clamped to a half value): no rounding after them.
const KEEPS_HALF_VALUES: &[&str] = &[
    "Identity",
    "StopGradient",
    "Snapshot",
    "PreventGradient",
    "Reshape",
    "ExpandDims",
    "Squeeze",
    "Transpose",
    "Slice",
    "StridedSlice",
    "ConcatV2",
    "Pack",
    "Unpack",
    "GatherV2",
    "GatherNd",
    "BroadcastTo",
    "Tile",
    "Relu",
    "Relu6",
    "ReluGrad",
    "Neg",
    "Abs",
    "Sign",
    "Floor",
    "Ceil",
    "Maximum",
    "Minimum",
    "Select",
    "SelectV2",
    "Pad",
    "PadV2",
    "MirrorPad",
    "Fill",
    "ZerosLike",
    "OnesLike",
    "Split",
    "SplitV",
    "ReverseV2",
    // Not `MaxPool`: a window with no maximum (NaNs, −∞) pools to float32's lowest value,
    // which the rounding after it makes −∞, as the interpreter's narrowing does.
    "Max",
    "Min",
    "OneHot",
    "TensorScatterUpdate",
];

/// Ops never rewritten to float32 (see the module documentation).
fn declined(node: &Node) -> Option<&'static str> {
    let op = node.op.as_str();
    if node.attrs.values().any(AttrValue::is_func) || autoclust_graph::effects::RUNS_NAMED_FUNCTIONS.contains(&op) {
        return Some("half-precision values passed to a function");
    }
    if crate::lists::is_list_op(op) {
        return Some("a TensorList of half-precision elements");
    }
    match op {
        "Bitcast" => Some("a bitcast of half-precision bytes"),
        "Cross" => Some("a half-precision cross product"),
        _ => None,
    }
}

/// The half type a type attribute names, if any.
fn half_attr(v: &AttrValue) -> Option<DType> {
    match v {
        AttrValue::Type(d) if d.is_half() => Some(*d),
        AttrValue::List(ListValue::Type(l)) => l.iter().copied().find(|d| d.is_half()),
        _ => None,
    }
}

/// What the compiled function converts at its boundary: for each argument and each result
/// (by index), the half type it has outside (`None`: passed as it is).
#[derive(Clone, Debug, PartialEq)]
pub struct Boundary {
    pub args: Vec<Option<DType>>,
    pub rets: Vec<Option<DType>>,
}

impl Boundary {
    /// The arguments as the float32 body takes them (half tensors widened; others shared).
    pub fn widen_inputs(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>, CompileError> {
        inputs
            .into_iter()
            .enumerate()
            .map(|(i, t)| match self.args.get(i).copied().flatten() {
                Some(_) => autoclust_graph::half::widen(&t).ok_or_else(|| CompileError::InputMismatch {
                    index: i,
                    expected: "half bits".into(),
                    got: t.dtype.to_string(),
                }),
                None => Ok(t),
            })
            .collect()
    }

    /// The results as the caller gets them (half results narrowed, exactly).
    pub fn narrow_outputs(&self, outputs: Vec<Tensor>) -> Result<Vec<Tensor>, CompileError> {
        outputs
            .into_iter()
            .enumerate()
            .map(|(j, t)| match self.rets.get(j).copied().flatten() {
                Some(d) => autoclust_graph::half::narrow(&t, d).ok_or_else(|| CompileError::Runtime {
                    node: format!("_Retval {j}"),
                    reason: format!("a {d} result computed as {}", t.dtype),
                }),
                None => Ok(t),
            })
            .collect()
    }

    /// Whether argument `i` or result `j` crosses the boundary converted.
    pub fn converts(&self, arg: usize, ret: usize) -> bool {
        self.args.get(arg).copied().flatten().is_some() || self.rets.get(ret).copied().flatten().is_some()
    }
}

/// A body rewritten to float32, with its float32 signature and what its boundary converts.
pub struct Widened {
    pub body: Graph,
    pub inputs: Vec<(DType, Vec<usize>)>,
    pub boundary: Boundary,
}

/// Whether `body` at this signature computes anything in half precision.
pub fn has_half(body: &Graph, inputs: &[(DType, Vec<usize>)]) -> bool {
    inputs.iter().any(|(d, _)| d.is_half())
        || body.nodes().iter().any(|n| n.attrs.values().any(|v| half_attr(v).is_some()))
}

/// The body in float32 with a rounding after every op that makes a half value (see the
/// module documentation); `None` when nothing in it is half precision.
pub fn widen(body: &Graph, inputs: &[(DType, Vec<usize>)]) -> Result<Option<Widened>, CompileError> {
    if !has_half(body, inputs) {
        return Ok(None);
    }
    let mut g = body.clone();
    let n = g.len();
    let mut redirect: HashMap<Output, Output> = HashMap::new();
    // Nodes whose inputs are final as made (a rounding reads the very output it rounds).
    let mut rounds: Vec<NodeId> = Vec::new();
    let mut args = vec![None; inputs.len()];
    let mut rets: Vec<Option<DType>> = Vec::new();
    let wide_inputs: Vec<(DType, Vec<usize>)> =
        inputs.iter().map(|(d, s)| (if d.is_half() { DType::Float32 } else { *d }, s.clone())).collect();
    let int_attr = |node: &Node, name: &str| node.attr(name).and_then(AttrValue::as_int).map(|i| i as usize);
    for id in (0..n).map(|i| NodeId(i as u32)) {
        let node = g.node(id).clone();
        match node.op.as_str() {
            "_Arg" => {
                if let Some(i) = int_attr(&node, "index").filter(|&i| i < inputs.len()) {
                    if inputs[i].0.is_half() {
                        args[i] = Some(inputs[i].0);
                        g.attrs_mut(id).insert("T".into(), AttrValue::Type(DType::Float32));
                    }
                }
                continue;
            }
            "_Retval" => {
                // The declared type, else (a body made without one) what its producer makes.
                let declared = node
                    .attr("T")
                    .and_then(AttrValue::as_type)
                    .or_else(|| node.inputs.first().and_then(|&o| produced_type(body, inputs, o)));
                if let (Some(i), Some(d)) = (int_attr(&node, "index"), declared.filter(|d| d.is_half())) {
                    if rets.len() <= i {
                        rets.resize(i + 1, None);
                    }
                    rets[i] = Some(d);
                    g.attrs_mut(id).insert("T".into(), AttrValue::Type(DType::Float32));
                }
                continue;
            }
            _ => {}
        }
        let Some(half) = node.attrs.values().find_map(half_attr) else { continue };
        if let Some(why) = declined(&node) {
            return Err(CompileError::unsupported(&node, why));
        }

        if node.op == "Const" {
            let value = node
                .attr("value")
                .and_then(AttrValue::tensor_value)
                .and_then(Result::ok)
                .and_then(|t| autoclust_graph::half::widen(&t))
                .ok_or_else(|| CompileError::Invalid(format!("Const '{}' has no {half} value", node.name)))?;
            let attrs = g.attrs_mut(id);
            attrs.insert("value".into(), AttrValue::Tensor(value));
            attrs.insert("dtype".into(), AttrValue::Type(DType::Float32));
            continue;
        }
        let out_types = autoclust_graph::infer::attr_output_dtypes(&node)
            .ok_or_else(|| CompileError::unsupported(&node, "cannot tell its output types in half precision"))?;
        for v in g.attrs_mut(id).values_mut() {
            match v {
                AttrValue::Type(d) if d.is_half() => *d = DType::Float32,
                AttrValue::List(ListValue::Type(list)) => {
                    list.iter_mut().filter(|d| d.is_half()).for_each(|d| *d = DType::Float32);
                }
                _ => {}
            }
        }
        // After the rewrite above, which would make this type float32 too.
        let op = node.op.as_str();
        if autoclust_graph::jit_ops::is_stateless_sampler(op) && op.contains("Uniform") && !op.contains("Int") {
            g.attrs_mut(id).insert(HALF_UNIFORM_ATTR.into(), AttrValue::Type(half));
        }
        if autoclust_graph::half::bias_grad_rounds_rows(&node) {
            g.attrs_mut(id).insert(ROUNDED_ROWS_ATTR.into(), AttrValue::Type(half));
        }
        let mut b = Builder { g: &mut g, base: node.name.clone(), half, made: 0 };
        let out = Output { node: id, port: 0 };
        // An op TensorFlow computes as several half operations: its program, each step rounded.
        let program = (out_types.first() == Some(&half))
            .then(|| autoclust_graph::half::half_program(&node, node.inputs.len(), half))
            .flatten();
        match node.op.as_str() {
            _ if program.is_some() => {
                let mut values: Vec<Output> = Vec::new();
                for step in program.expect("matched").steps {
                    let v = match step {
                        HalfStep::Input(k) | HalfStep::Operand(k) => *node.inputs.get(k).ok_or_else(|| {
                            CompileError::Invalid(format!("node '{}' ({}) has too few inputs", node.name, node.op))
                        })?,
                        HalfStep::Const(x) => b.scalar(x)?,
                        HalfStep::Round(v) => b.round(values[v])?,
                        HalfStep::Op { op, args, mut attrs } => {
                            attrs.push(("T", AttrValue::Type(DType::Float32)));
                            b.op(op, args.iter().map(|&a| values[a]).collect(), &attrs)?
                        }
                    };
                    values.push(v);
                }
                redirect.insert(out, *values.last().expect("a program has steps"));
            }
            op if KEEPS_HALF_VALUES.contains(&op) => {}
            _ => {
                for (port, d) in out_types.iter().enumerate() {
                    if d.is_half() {
                        let o = Output { node: id, port: port as u32 };
                        let r = b.round_to(o, *d)?;
                        rounds.push(r.node);
                        redirect.insert(o, r);
                    }
                }
            }
        }
    }
    let resolve = |mut o: Output| {
        while let Some(&r) = redirect.get(&o) {
            o = r;
        }
        o
    };
    let rounds: std::collections::HashSet<NodeId> = rounds.into_iter().collect();
    for id in g.node_ids().collect::<Vec<_>>() {
        if rounds.contains(&id) {
            continue;
        }
        let node = g.node(id);
        let ins: Vec<Output> = node.inputs.iter().map(|&o| resolve(o)).collect();
        if ins != node.inputs {
            let controls = node.control_inputs.clone();
            g.set_inputs(id, &ins, &controls);
        }
    }
    Ok(Some(Widened { body: g, inputs: wide_inputs, boundary: Boundary { args, rets } }))
}

/// The dtype output `o` of the original body has, as its producer's attributes (or, for an
/// `_Arg`, the signature) give it.
fn produced_type(body: &Graph, inputs: &[(DType, Vec<usize>)], o: Output) -> Option<DType> {
    let producer = body.node(o.node);
    if producer.op == "_Arg" {
        let i = producer.attr("index").and_then(AttrValue::as_int)?;
        return inputs.get(usize::try_from(i).ok()?).map(|(d, _)| *d);
    }
    autoclust_graph::infer::attr_output_dtypes(producer)?.get(o.port as usize).copied()
}

/// Adds the nodes of one rewritten node, named after it.
struct Builder<'a> {
    g: &'a mut Graph,
    base: String,
    half: DType,
    made: usize,
}

impl Builder<'_> {
    fn op(&mut self, op: &str, inputs: Vec<Output>, attrs: &[(&str, AttrValue)]) -> Result<Output, CompileError> {
        self.made += 1;
        let mut node = Node::unconnected(&format!("{}/_autoclust_half_{}", self.base, self.made), op, attrs);
        node.inputs = inputs;
        let id = self.g.add_node(node).map_err(|e| CompileError::Invalid(e.to_string()))?;
        Ok(Output { node: id, port: 0 })
    }

    fn round_to(&mut self, x: Output, half: DType) -> Result<Output, CompileError> {
        self.op(ROUND_OP, vec![x], &[("T", AttrValue::Type(half))])
    }

    fn round(&mut self, x: Output) -> Result<Output, CompileError> {
        self.round_to(x, self.half)
    }

    fn scalar(&mut self, x: f32) -> Result<Output, CompileError> {
        let value = AttrValue::Tensor(Tensor::scalar_f32(x));
        self.op("Const", vec![], &[("dtype", AttrValue::Type(DType::Float32)), ("value", value)])
    }
}

/// `x` rounded to the nearest `half` value (ties to even), as float32: what the rounding
/// node computes, for constant folding.
pub fn round_scalar(x: f32, half: DType) -> f32 {
    use autoclust_graph::half::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
    if half == DType::BFloat16 {
        bf16_to_f32(f32_to_bf16(x))
    } else {
        f16_to_f32(f32_to_f16(x))
    }
}
