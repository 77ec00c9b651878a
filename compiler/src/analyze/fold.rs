//! Compile-time evaluation of a cluster body's constant computations: an exact scalar
//! evaluator for elementwise ops working in each operand's own dtype (never widened, so
//! folding rounds and wraps exactly as the run-time kernels do, with TensorFlow's
//! arithmetic from [`TfArith`]), integer reductions, and every other kernel through the
//! same code the compiled plan calls ([`crate::kernels`]) — so folding cannot disagree with
//! run time.

use super::*;

/// An integer reduction of a constant with TensorFlow's integer semantics (wrapping
/// arithmetic; `Mean` sums in 64 bits and divides truncating, and an empty mean is 0), in the
/// input's dtype.
pub(super) fn fold_int_reduce(t: &Tensor, axes: &[usize], kind: ReduceKind, out_shape: Vec<usize>) -> Option<Tensor> {
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
            (Some(a), ReduceKind::Sum) => wrap(a.wrapping_add(x)),
            // Summed in 64 bits for int32 too, as TensorFlow's `MeanReducer`.
            (Some(a), ReduceKind::Mean) => a.wrapping_add(x),
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

/// Evaluates a node on constant inputs at compile time. `None` leaves it to run time.
pub(super) fn evaluate(node: &Node, info: &NodeInfo, inputs: &[&Tensor]) -> Option<Vec<Tensor>> {
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
            // ([`same_values`]): its other inputs (a shape, axes) are not operands. A
            // `BroadcastTo` copy has fewer input elements than outputs: it is broadcast.
            let t = inputs[0];
            let shape = &info.outputs[0].shape;
            if t.num_elements() != shape.iter().product::<usize>() {
                let op =
                    KernelOp::Strided { dims: shape.clone(), strides: broadcast_strides(&t.shape, shape), offset: 0 };
                return op.run(&[t], std::slice::from_ref(shape)).ok();
            }
            Some(vec![Tensor { dtype: t.dtype, shape: shape.clone(), data: t.data.clone() }])
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
pub(super) enum Scalar {
    F32(f32),
    F64(f64),
    I32(i32),
    I64(i64),
    Bool(bool),
}

impl Scalar {
    pub(super) fn at(t: &Tensor, i: usize) -> Option<Scalar> {
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
pub(super) trait FoldNum: TfArith {
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
pub(super) fn fold_elementwise(node: &Node, ew: EwOp, inputs: &[&Tensor], out: &ValueInfo) -> Option<Tensor> {
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

pub(super) fn scalar_dtype(s: Scalar) -> DType {
    match s {
        Scalar::F32(_) => DType::Float32,
        Scalar::F64(_) => DType::Float64,
        Scalar::I32(_) => DType::Int32,
        Scalar::I64(_) => DType::Int64,
        Scalar::Bool(_) => DType::Bool,
    }
}

pub(super) fn unwrap_f32(s: Scalar) -> Option<f32> {
    if let Scalar::F32(x) = s {
        Some(x)
    } else {
        None
    }
}

pub(super) fn unwrap_f64(s: Scalar) -> Option<f64> {
    if let Scalar::F64(x) = s {
        Some(x)
    } else {
        None
    }
}

pub(super) fn unwrap_i32(s: Scalar) -> Option<i32> {
    if let Scalar::I32(x) = s {
        Some(x)
    } else {
        None
    }
}

pub(super) fn unwrap_i64(s: Scalar) -> Option<i64> {
    if let Scalar::I64(x) = s {
        Some(x)
    } else {
        None
    }
}

pub(super) fn unwrap_bool(s: Scalar) -> Option<bool> {
    if let Scalar::Bool(x) = s {
        Some(x)
    } else {
        None
    }
}

/// Evaluates one element. `None` (unsupported op or dtype, integer division by zero,
/// integer `RealDiv`) leaves the node to run time, which reports any error itself.
pub(super) fn scalar_eval(ew: EwOp, a: &[Scalar], out: DType, real_div: bool) -> Option<Scalar> {
    match ew {
        EwOp::Copy => return Some(a[0]),
        EwOp::Cast => return a[0].cast(out),
        EwOp::Select => return Some(if a.first()?.is_nonzero() { *a.get(1)? } else { *a.get(2)? }),
        EwOp::RoundHalf { bf16 } => {
            let half = if bf16 { DType::BFloat16 } else { DType::Float16 };
            return unwrap_f32(*a.first()?).map(|x| Scalar::F32(crate::half::round_scalar(x, half)));
        }
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

pub(super) fn compare(ew: EwOp, x: Scalar, y: Scalar) -> Option<bool> {
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

pub(super) fn num_eval<T: FoldNum>(ew: EwOp, a: &[T], real_div: bool) -> Option<Scalar> {
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
