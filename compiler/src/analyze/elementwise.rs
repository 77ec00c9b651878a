//! Elementwise ops of a cluster body: the [`EwOp`]s the fused-loop code generator knows
//! (arithmetic, comparisons, logic, activations and their gradients, casts, `Select`,
//! `AddN`, `BiasAdd` as an `Add` over the channel axis), the division-like ops that run as
//! a kernel step with TensorFlow's element arithmetic on run-time values, and the integer
//! bitwise ops. An elementwise node's shape (the broadcast of its operands') is the
//! registry's ([`Outputs`]).

use super::*;

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
    /// To nearest, ties to even (`Round`, `Rint`).
    Round,
    Sign,
    /// `x / (1 + |x|)` (float32).
    Softsign,
    /// `(dy, x)`: `dy / ((1 + |x|)·(1 + |x|))` (float32).
    SoftsignGrad,
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
    /// `x − x` is ordered (0, not NaN): neither infinite nor NaN; bool.
    IsFinite,
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
    /// `FakeQuantWithMinMaxArgs`: the float32 bits of the nudged range and scales
    /// (`autoclust_graph::fake_quant`), from the node's attributes.
    FakeQuant {
        min: u32,
        max: u32,
        scale: u32,
        inv_scale: u32,
    },
    /// `FakeQuantWithMinMaxArgsGradient(dy, x)`: `min ≤ x ≤ max ? dy : 0` (nudged range bits).
    FakeQuantGrad {
        min: u32,
        max: u32,
    },
    /// `FakeQuantWithMinMaxVars(x, min, max)` (scalar range) and
    /// `FakeQuantWithMinMaxVarsPerChannel` (a range per last-axis channel, broadcast): the
    /// range nudged in the loop from its run-time values, for the integer range `[qmin, qmax]`.
    FakeQuantVars {
        qmin: i32,
        qmax: i32,
    },
    /// A float32 value rounded to the nearest float16 (`bf16: false`) or bfloat16 value,
    /// ties to even: the half-precision rewrite's rounding node ([`crate::half`]).
    RoundHalf {
        bf16: bool,
    },
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
            "Round" | "Rint" => EwOp::Round,
            "Softsign" => EwOp::Softsign,
            "SoftsignGrad" => EwOp::SoftsignGrad,
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
            "IsFinite" => EwOp::IsFinite,
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
    /// depends on an attribute (`LeakyRelu`'s `alpha`, TensorFlow's default 0.2; the fake
    /// quantisation range of `FakeQuantWithMinMaxArgs` and its gradient).
    pub fn from_node(node: &Node) -> Option<EwOp> {
        let alpha = || node.attr("alpha").and_then(AttrValue::as_float).unwrap_or(0.2);
        // An invalid range is not lowered: the interpreter's kernel reports TensorFlow's error.
        let range = || autoclust_graph::fake_quant::attr_range(node).ok();
        match node.op.as_str() {
            "FakeQuantWithMinMaxArgs" => range().map(|r| EwOp::FakeQuant {
                min: r.min.to_bits(),
                max: r.max.to_bits(),
                scale: r.scale.to_bits(),
                inv_scale: r.inv_scale.to_bits(),
            }),
            "FakeQuantWithMinMaxArgsGradient" => {
                range().map(|r| EwOp::FakeQuantGrad { min: r.min.to_bits(), max: r.max.to_bits() })
            }
            "FakeQuantWithMinMaxVars" | "FakeQuantWithMinMaxVarsPerChannel" => {
                let (qmin, qmax) = autoclust_graph::fake_quant::quant_range(node).ok()?;
                Some(EwOp::FakeQuantVars { qmin, qmax })
            }
            "LeakyRelu" => Some(EwOp::LeakyRelu(alpha().to_bits())),
            crate::half::ROUND_OP => {
                let t = node.attr("T").and_then(AttrValue::as_type)?;
                t.is_half().then_some(EwOp::RoundHalf { bf16: t == DType::BFloat16 })
            }
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
                | EwOp::IsFinite
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

/// The output of a binary kernel step whose two operands (checked to be there) have one
/// dtype, of `allowed`; its shape (their broadcast) is the registry's.
fn binary_output(
    node: &Node,
    ins: &[ValueInfo],
    out: &Outputs<'_>,
    allowed: &[DType],
) -> Result<ValueInfo, CompileError> {
    check_arity(node, ins, 2)?;
    let (a, b) = (&ins[0], &ins[1]);
    if a.dtype != b.dtype || !allowed.contains(&a.dtype) {
        return Err(CompileError::unsupported(node, format!("{} of {} and {}", node.op, a.dtype, b.dtype)));
    }
    out.one(a.dtype)
}

/// An elementwise, division-like or bitwise node; any other op is "no lowering" (the next
/// family is tried).
pub(super) fn analyze(node: &Node, ins: &[ValueInfo], out: &Outputs<'_>) -> Result<NodeInfo, CompileError> {
    let op = node.op.as_str();
    let need = |n: usize| check_arity(node, ins, n);
    // FloorDiv/FloorMod on constants stay elementwise folds (shape arithmetic); on run-time
    // values they, Mod, TruncateDiv and TruncateMod are a kernel step with TensorFlow's
    // element arithmetic.
    if let Some(kind) = crate::kernels::ModularKind::from_tf(op) {
        need(2)?;
        let folds = EwOp::from_tf(op).is_some() && ins.iter().all(|v| v.konst.is_some());
        if !folds {
            let allowed = [DType::Float32, DType::Float64, DType::Int32, DType::Int64];
            let value = binary_output(node, ins, out, &allowed)?;
            return Ok(kernel(KernelOp::Modular { kind }, vec![0, 1], vec![value]));
        }
    }
    if let Some(ew) = EwOp::from_node(node) {
        let arity = match ew {
            EwOp::Select | EwOp::FakeQuantVars { .. } => 3,
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
            | EwOp::Round
            | EwOp::Softsign
            | EwOp::Sign
            | EwOp::Erf
            | EwOp::Erfc
            | EwOp::Log1p
            | EwOp::Softplus
            | EwOp::IsNan
            | EwOp::IsFinite
            | EwOp::Expm1
            | EwOp::Elu
            | EwOp::Selu
            | EwOp::Relu6
            | EwOp::Sin
            | EwOp::Cos
            | EwOp::LeakyRelu(_)
            | EwOp::RoundHalf { .. }
            | EwOp::FakeQuant { .. } => 1,
            _ => 2,
        };
        need(arity)?;
        // `AddN` never broadcasts (TensorFlow's kernel requires one shape); a mismatch is
        // declined so the interpreter's kernel reports it, as the plain run does.
        if matches!(ew, EwOp::AddN) && ins.iter().any(|v| v.shape != ins[0].shape || v.dtype != ins[0].dtype) {
            return Err(CompileError::Invalid(format!(
                "node '{}' (AddN): inputs have shapes {:?}",
                node.name,
                ins.iter().map(|v| &v.shape).collect::<Vec<_>>()
            )));
        }
        // The range's shape is TensorFlow's check (the interpreter's kernel reports a misfit):
        // scalars, or vectors of the input's last dimension per channel.
        if matches!(ew, EwOp::FakeQuantVars { .. }) {
            let fits = |v: &ValueInfo| match op {
                "FakeQuantWithMinMaxVars" => v.shape.is_empty(),
                _ => v.shape.len() == 1 && ins[0].shape.last() == Some(&v.shape[0]),
            };
            if !fits(&ins[1]) || !fits(&ins[2]) {
                return Err(CompileError::Invalid(format!(
                    "node '{}' ({op}): min {:?} and max {:?} do not fit inputs {:?}",
                    node.name, ins[1].shape, ins[2].shape, ins[0].shape
                )));
            }
        }
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
        return Ok(NodeInfo { kind: NodeKind::Elementwise(ew), outputs: vec![out.one(dtype)?] });
    }
    match op {
        "BitwiseAnd" | "BitwiseOr" | "BitwiseXor" | "LeftShift" | "RightShift" => {
            need(2)?;
            let value = binary_output(node, ins, out, &[DType::Int32, DType::Int64])?;
            let kind = crate::reshuffle::BitwiseKind::from_tf(op).expect("a bitwise op");
            Ok(kernel(KernelOp::Bitwise { kind }, vec![0, 1], vec![value]))
        }
        _ => Err(no_lowering(node)),
    }
}
