//! Reductions: `Sum`, `Mean`, `Prod`, `Max`, `Min`, `All`, `Any` over an axis
//! list (negative axes allowed, `keep_dims`), and `ArgMax`/`ArgMin` with
//! TensorFlow's `output_type` (default int64) and first-index tie-break.
//!
//! Float sums accumulate in f64 and round once: at least as accurate as
//! TensorFlow's tree reduction. Integer sums wrap. `Max` of an empty set is
//! the lowest value (−inf for floats), as in TensorFlow; `Mean` of an empty
//! set is NaN for floats.

use autoclust_graph::{DType, Node, Tensor};
use autoclust_numeric::reduce::ReduceKind;

use super::elementwise::Num;
use super::{
    arity, attr_bool_or, attr_type_or, dispatch_all, dispatch_num, int_values, norm_axis, one, tensor_of, Elem, Inputs,
    PureFn,
};
use crate::error::{KResult, KernelError};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reduce {
    Sum,
    Mean,
    Prod,
    Max,
    Min,
    All,
    Any,
}

impl Reduce {
    /// The compiled kernels' name for a float reduction.
    fn kind(self) -> Option<ReduceKind> {
        Some(match self {
            Reduce::Sum => ReduceKind::Sum,
            Reduce::Mean => ReduceKind::Mean,
            Reduce::Prod => ReduceKind::Prod,
            Reduce::Max => ReduceKind::Max,
            Reduce::Min => ReduceKind::Min,
            Reduce::All | Reduce::Any => return None,
        })
    }
}

/// Which dimensions an axis operand reduces.
pub(crate) fn axis_mask(rank: usize, axes: &[i64]) -> KResult<Vec<bool>> {
    let mut mask = vec![false; rank];
    for &a in axes {
        let i = norm_axis(a, rank, "reduction axis")?;
        if mask[i] {
            return Err(KernelError::invalid(format!("duplicate reduction axis {a}")));
        }
        mask[i] = true;
    }
    Ok(mask)
}

/// The layout after moving reduced axes together: `(input, outer, r, inner)`.
fn layout<T: Elem>(t: &Tensor, mask: &[bool]) -> KResult<(Tensor, usize, usize, usize)> {
    let first = mask.iter().position(|&m| m);
    let last = mask.iter().rposition(|&m| m);
    let (Some(i0), Some(i1)) = (first, last) else {
        return Ok((t.clone(), t.num_elements(), 1, 1));
    };
    // Dimensions of size 1 may be reordered freely; only real gaps force a transpose.
    let contiguous = (i0..=i1).all(|i| mask[i] || t.shape[i] == 1);
    if contiguous {
        let outer = t.shape[..i0].iter().product();
        let r = t.shape[i0..=i1].iter().zip(&mask[i0..=i1]).filter(|(_, &m)| m).map(|(d, _)| d).product();
        let inner = t.shape[i1 + 1..].iter().product();
        return Ok((t.clone(), outer, r, inner));
    }
    let mut perm: Vec<usize> = (0..mask.len()).filter(|&i| !mask[i]).collect();
    perm.extend((0..mask.len()).filter(|&i| mask[i]));
    let tt = super::array::transpose_typed::<T>(t, &perm);
    let outer = perm.iter().filter(|&&i| !mask[i]).map(|&i| t.shape[i]).product();
    let r = perm.iter().filter(|&&i| mask[i]).map(|&i| t.shape[i]).product();
    Ok((tt, outer, r, 1))
}

fn fold<T: Elem, A: Copy>(
    x: &[T],
    outer: usize,
    r: usize,
    inner: usize,
    init: A,
    f: impl Fn(A, T) -> A,
    fin: impl Fn(A) -> T,
) -> Vec<T> {
    if inner == 1 {
        // One contiguous row per output element.
        if r == 0 {
            return vec![fin(init); outer];
        }
        return x.chunks_exact(r).map(|row| fin(row.iter().fold(init, |a, &v| f(a, v)))).collect();
    }
    let mut out = Vec::with_capacity(outer * inner);
    let mut acc = vec![init; inner];
    for o in 0..outer {
        acc.iter_mut().for_each(|a| *a = init);
        let base = o * r * inner;
        for j in 0..r {
            let row = &x[base + j * inner..base + (j + 1) * inner];
            for (a, &v) in acc.iter_mut().zip(row) {
                *a = f(*a, v);
            }
        }
        out.extend(acc.iter().map(|&a| fin(a)));
    }
    out
}

fn out_shape(shape: &[usize], mask: &[bool], keep_dims: bool) -> Vec<usize> {
    shape.iter().zip(mask).filter_map(|(&d, &m)| if m { keep_dims.then_some(1) } else { Some(d) }).collect()
}

fn reduce_num<T: Num>(op: Reduce, t: &Tensor, mask: &[bool], keep_dims: bool) -> KResult<Tensor> {
    if let (DType::Float32, Some(kind)) = (T::DTYPE, op.kind()) {
        // The compiled clusters' kernel: no transpose, row folds, split across cores.
        let axes: Vec<usize> = (0..mask.len()).filter(|&i| mask[i]).collect();
        let v = autoclust_numeric::reduce::reduce(
            t.as_f32().ok_or(KernelError::DType(DType::Float32))?,
            &t.shape,
            &axes,
            kind,
        );
        return Ok(tensor_of(out_shape(&t.shape, mask, keep_dims), v));
    }
    let (src, outer, r, inner) = layout::<T>(t, mask)?;
    let x = T::slice(&src);
    let is_float = !T::IS_INT;
    let v = match op {
        Reduce::Sum if is_float => fold(x, outer, r, inner, 0.0f64, |a, v| a + v.to_f64(), T::from_f64),
        Reduce::Sum => fold(x, outer, r, inner, T::zero(), T::add, |a| a),
        Reduce::Mean if is_float => {
            let n = r as f64;
            fold(x, outer, r, inner, 0.0f64, |a, v| a + v.to_f64(), |a| T::from_f64(a / n))
        }
        Reduce::Mean => {
            // TensorFlow sums an integer mean in 64 bits (`MeanReducer`'s casting
            // specialisation: int32 → int64), so an int32 sum that overflows still gives the
            // exact mean, truncated.
            let n = r as i64;
            fold(
                x,
                outer,
                r,
                inner,
                0i64,
                |a, v| a.wrapping_add(v.to_i64()),
                |a| if r == 0 { T::zero() } else { T::from_i64(a.wrapping_div(n)) },
            )
        }
        Reduce::Prod if is_float => fold(x, outer, r, inner, 1.0f64, |a, v| a * v.to_f64(), T::from_f64),
        Reduce::Prod => fold(x, outer, r, inner, T::one(), T::mul, |a| a),
        Reduce::Max => fold(x, outer, r, inner, T::lowest(), T::maximum, |a| a),
        Reduce::Min => fold(x, outer, r, inner, T::highest(), T::minimum, |a| a),
        Reduce::All | Reduce::Any => return Err(KernelError::DType(T::DTYPE)),
    };
    Ok(tensor_of(out_shape(&t.shape, mask, keep_dims), v))
}

fn reduce_bool(op: Reduce, t: &Tensor, mask: &[bool], keep_dims: bool) -> KResult<Tensor> {
    let (src, outer, r, inner) = layout::<bool>(t, mask)?;
    let x = bool::slice(&src);
    let v = match op {
        Reduce::All => fold(x, outer, r, inner, true, |a, v| a && v, |a| a),
        Reduce::Any => fold(x, outer, r, inner, false, |a, v| a || v, |a| a),
        _ => return Err(KernelError::DType(DType::Bool)),
    };
    Ok(tensor_of(out_shape(&t.shape, mask, keep_dims), v))
}

/// Reduces `t` over `axes`.
pub fn reduce(op: Reduce, t: &Tensor, axes: &[i64], keep_dims: bool) -> KResult<Tensor> {
    if matches!(t.dtype, DType::Complex64 | DType::Complex128) {
        let mask = axis_mask(t.rank(), axes)?;
        let out = out_shape(&t.shape, &mask, keep_dims);
        return super::spectral::reduce_complex(op, t, &mask, out);
    }
    super::check_native(t)?;
    let mask = axis_mask(t.rank(), axes)?;
    if t.dtype == DType::Bool {
        reduce_bool(op, t, &mask, keep_dims)
    } else {
        dispatch_num!(t.dtype, reduce_num(op, t, &mask, keep_dims))
    }
}

/// `NumTraits<T>::lowest()` (ArgMax) or `highest()` (ArgMin) of `dtype`, as f64.
fn arg_bound(dtype: DType, max: bool) -> f64 {
    let (lo, hi) = match dtype {
        DType::Float32 => (f64::from(f32::MIN), f64::from(f32::MAX)),
        DType::Float64 => (f64::MIN, f64::MAX),
        DType::Float16 => (-65504.0, 65504.0),
        DType::BFloat16 => (-3.3895313892515355e38, 3.3895313892515355e38),
        DType::Int8 => (f64::from(i8::MIN), f64::from(i8::MAX)),
        DType::Int16 => (f64::from(i16::MIN), f64::from(i16::MAX)),
        DType::Int32 => (f64::from(i32::MIN), f64::from(i32::MAX)),
        DType::UInt8 => (0.0, f64::from(u8::MAX)),
        DType::UInt16 => (0.0, f64::from(u16::MAX)),
        DType::UInt32 => (0.0, f64::from(u32::MAX)),
        DType::UInt64 => (0.0, u64::MAX as f64),
        _ => (i64::MIN as f64, i64::MAX as f64),
    };
    if max {
        lo
    } else {
        hi
    }
}

fn arg_extreme<T: Elem>(t: &Tensor, axis: usize, max: bool, out_type: DType) -> KResult<Tensor> {
    let x = T::slice(t);
    let r = t.shape[axis];
    if r == 0 {
        return Err(KernelError::invalid("ArgMax/ArgMin over an empty dimension"));
    }
    let outer: usize = t.shape[..axis].iter().product();
    let inner: usize = t.shape[axis + 1..].iter().product();
    // TensorFlow's CPU kernel (Eigen's arg reducers) starts from index 0 holding the type's
    // lowest (ArgMin: highest) value and takes a later element only when strictly beyond
    // the running best: a NaN is never taken (a leading one included), ties keep the first
    // index, and a row of NaNs (or of nothing beyond the bound) gives 0.
    let bound = T::from_f64(arg_bound(T::DTYPE, max));
    let mut idx = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            let mut best = 0usize;
            let mut bv = bound;
            for j in 0..r {
                let v = x[o * r * inner + j * inner + i];
                if (max && v > bv) || (!max && v < bv) {
                    best = j;
                    bv = v;
                }
            }
            idx.push(best as i64);
        }
    }
    let mut shape = t.shape.clone();
    shape.remove(axis);
    super::int_tensor(out_type, shape, idx)
}

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let op = match node.op.as_str() {
        "Sum" => Reduce::Sum,
        "Mean" => Reduce::Mean,
        "Prod" => Reduce::Prod,
        "Max" => Reduce::Max,
        "Min" => Reduce::Min,
        "All" => Reduce::All,
        "Any" => Reduce::Any,
        "ArgMax" | "ArgMin" => {
            let max = node.op == "ArgMax";
            let out_type = attr_type_or(node, "output_type", DType::Int64)?;
            return Ok(Some(Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                let t = &inp[0];
                super::check_native(t)?;
                let axis = norm_axis(super::int_scalar(&inp[1], "axis")?, t.rank(), "axis")?;
                one(dispatch_all!(t.dtype, arg_extreme(t, axis, max, out_type))?)
            })));
        }
        "EuclideanNorm" => {
            // sqrt(Σ x²): the squares summed by `Sum`'s kernel (its order and vectorisation),
            // the root taken in the element type (truncating for integers, as TensorFlow's).
            let keep_dims = attr_bool_or(node, "keep_dims", false)?;
            return Ok(Some(Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                let axes = int_values(&inp[1], "reduction indices")?;
                let sq = super::elementwise::unary_dispatch(super::elementwise::Unary::Square, inp[0].clone())?;
                let sum = reduce(Reduce::Sum, &sq, &axes, keep_dims)?;
                if sum.dtype.is_integer() {
                    let v: Vec<i64> =
                        super::int_values(&sum, "sum")?.iter().map(|&x| (x as f64).sqrt() as i64).collect();
                    return one(super::int_tensor(sum.dtype, sum.shape.clone(), v)?);
                }
                one(super::elementwise::unary_dispatch(super::elementwise::Unary::Sqrt, sum)?)
            })));
        }
        _ => return Ok(None),
    };
    let keep_dims = attr_bool_or(node, "keep_dims", false)?;
    Ok(Some(Box::new(move |inp: Inputs| {
        arity(&inp, 2)?;
        let axes = int_values(&inp[1], "reduction indices")?;
        one(reduce(op, &inp[0], &axes, keep_dims)?)
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::tests_support::{node, run1};
    use autoclust_graph::AttrValue;

    fn m23() -> Tensor {
        Tensor::from_f32(vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap()
    }

    #[test]
    fn sum_mean_over_axes() {
        let s = run1(&node("Sum", &[]), &[m23(), Tensor::scalar_i32(0)]).unwrap();
        assert_eq!((s.shape.clone(), s.as_f32().unwrap().to_vec()), (vec![3], vec![5.0, 7.0, 9.0]));
        let s = run1(&node("Sum", &[("keep_dims", AttrValue::B(true))]), &[m23(), Tensor::scalar_i32(-1)]).unwrap();
        assert_eq!((s.shape.clone(), s.as_f32().unwrap().to_vec()), (vec![2, 1], vec![6.0, 15.0]));
        let all = Tensor::from_i32(vec![2], vec![0, 1]).unwrap();
        let m = run1(&node("Mean", &[]), &[m23(), all]).unwrap();
        assert_eq!((m.shape.clone(), m.as_f32().unwrap().to_vec()), (vec![], vec![3.5]));
        let none = Tensor::from_i32(vec![0], vec![]).unwrap();
        let same = run1(&node("Sum", &[]), &[m23(), none]).unwrap();
        assert_eq!(same, m23());
    }

    #[test]
    fn arg_extremes_skip_nans_and_keep_the_first_tie() {
        let nan = f32::NAN;
        let t = Tensor::from_f32(
            vec![4, 4],
            vec![nan, -3.0, 1.0, 0.25, nan, nan, nan, nan, 2.0, 5.0, 5.0, nan, f32::NEG_INFINITY, f32::MIN, -1.0, -1.0],
        )
        .unwrap();
        let am = |op: &str| run1(&node(op, &[]), &[t.clone(), Tensor::scalar_i32(1)]).unwrap();
        assert_eq!(am("ArgMax").as_i64().unwrap(), &[2, 0, 1, 2]);
        assert_eq!(am("ArgMin").as_i64().unwrap(), &[1, 0, 0, 0]);
        // Eigen's bound is the type's lowest finite value: -inf and lowest itself never win.
        let low = Tensor::from_f32(vec![2], vec![f32::NEG_INFINITY, f32::MIN]).unwrap();
        let a = run1(&node("ArgMax", &[]), &[low, Tensor::scalar_i32(0)]).unwrap();
        assert_eq!(a.as_i64().unwrap(), &[0]);
    }

    #[test]
    fn non_contiguous_axes() {
        let t = Tensor::from_i64(vec![2, 2, 2], (1..=8).collect()).unwrap();
        let axes = Tensor::from_i32(vec![2], vec![0, 2]).unwrap();
        let s = run1(&node("Sum", &[]), &[t.clone(), axes.clone()]).unwrap();
        // Sum over dims 0 and 2: [1+2+5+6, 3+4+7+8].
        assert_eq!(s.as_i64().unwrap(), &[14, 22]);
        let m = run1(&node("Mean", &[]), &[t, axes]).unwrap();
        assert_eq!(m.as_i64().unwrap(), &[3, 5], "integer mean truncates");
        // TensorFlow 2.21 sums an int32 mean in int64: the exact mean, truncated, where an
        // int32 sum would wrap (sweep 70).
        let big = Tensor::from_i32(vec![1, 4], vec![2147483642, 2147483642, 2147483642, -7]).unwrap();
        let m = run1(&node("Mean", &[]), &[big, Tensor::scalar_i32(1)]).unwrap();
        assert_eq!(m.to_i64_vec().unwrap(), [1610612729]);
    }

    #[test]
    fn max_min_prod_and_empty() {
        let mx = run1(&node("Max", &[]), &[m23(), Tensor::scalar_i32(1)]).unwrap();
        assert_eq!(mx.as_f32().unwrap(), &[3.0, 6.0]);
        let p = run1(&node("Prod", &[]), &[m23(), Tensor::scalar_i32(0)]).unwrap();
        assert_eq!(p.as_f32().unwrap(), &[4.0, 10.0, 18.0]);
        let e = Tensor::from_f32(vec![0, 2], vec![]).unwrap();
        let s = run1(&node("Sum", &[]), &[e.clone(), Tensor::scalar_i32(0)]).unwrap();
        assert_eq!(s.as_f32().unwrap(), &[0.0, 0.0]);
        let mx = run1(&node("Max", &[]), &[e, Tensor::scalar_i32(0)]).unwrap();
        assert_eq!(mx.as_f32().unwrap(), &[f32::NEG_INFINITY, f32::NEG_INFINITY]);
        assert!(run1(&node("Sum", &[]), &[m23(), Tensor::scalar_i32(2)]).is_err());
    }

    #[test]
    fn argmax_output_type_and_ties() {
        let t = Tensor::from_f32(vec![2, 3], vec![1.0, 3.0, 3.0, 7.0, 0.0, 7.0]).unwrap();
        let a = run1(&node("ArgMax", &[]), &[t.clone(), Tensor::scalar_i32(1)]).unwrap();
        assert_eq!(a.dtype, DType::Int64);
        assert_eq!(a.as_i64().unwrap(), &[1, 0]);
        let a = run1(&node("ArgMin", &[("output_type", AttrValue::Type(DType::Int32))]), &[t, Tensor::scalar_i32(0)])
            .unwrap();
        assert_eq!(a.as_i32().unwrap(), &[0, 1, 0]);
    }

    #[test]
    fn all_any() {
        let b = Tensor::from_bool(vec![2, 2], vec![true, false, true, true]).unwrap();
        let a = run1(&node("All", &[]), &[b.clone(), Tensor::scalar_i32(1)]).unwrap();
        assert_eq!(a.as_bool().unwrap(), &[false, true]);
        let a = run1(&node("Any", &[]), &[b, Tensor::scalar_i32(0)]).unwrap();
        assert_eq!(a.as_bool().unwrap(), &[true, true]);
    }
}
