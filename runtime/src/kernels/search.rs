//! Ops that search sorted or indexed data: `LowerBound` and `UpperBound`
//! (`tf.searchsorted`, row by row), `NthElement` (`tfp.stats.percentile`'s order statistic:
//! the n-th smallest, or largest with `reverse`, of each row), `ListDiff` (`tf.compat.v1.setdiff1d`, the TensorFlow 1
//! gradient of `tf.gather` with unique indices) and `UnravelIndex` (`tf.unravel_index`).
//! Comparisons are the dtype's own (`PartialOrd`; NaN sorts as TensorFlow's `std::
//! lower_bound` treats it, never below a value); errors carry TensorFlow's messages.

use autoclust_graph::{DType, Node, Tensor};

use super::{arity, attr_type_or, dispatch_all, int_tensor, int_values, Elem, Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let f: PureFn = match node.op.as_str() {
        "NthElement" => {
            let reverse = super::attr_bool_or(node, "reverse", false)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                let x = &inp[0];
                if x.rank() == 0 {
                    return Err(KernelError::invalid("Input must be at least rank 1 but is rank 0"));
                }
                let n = int_values(&inp[1], "n")?;
                let [n] = n[..] else { return Err(KernelError::invalid("N must be scalar")) };
                let last = *x.shape.last().expect("rank >= 1");
                let n = usize::try_from(n).map_err(|_| KernelError::invalid(format!("Need n >= 0, got {n}")))?;
                if n >= last {
                    return Err(KernelError::invalid(format!("Input must have last dimension > n = {n}")));
                }
                let shape = x.shape[..x.rank() - 1].to_vec();
                let rows: usize = shape.iter().product();
                let src: Vec<Option<usize>> = dispatch_all!(x.dtype, nth(x, rows, last, n, reverse))?;
                super::one(super::take_or(x, &src, None, shape)?)
            })
        }
        "LowerBound" | "UpperBound" => {
            let upper = node.op == "UpperBound";
            let out_type = attr_type_or(node, "out_type", DType::Int32)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                let (s, v) = (&inp[0], &inp[1]);
                if s.dtype != v.dtype {
                    return Err(KernelError::invalid(format!(
                        "sorted_inputs is {} but values is {}",
                        s.dtype, v.dtype
                    )));
                }
                let idx = dispatch_all!(s.dtype, bounds(s, v, upper))?;
                if out_type == DType::Int32 && idx.iter().any(|&i| i > i64::from(i32::MAX)) {
                    return Err(KernelError::invalid("trying to cast an index into int32 that is too large"));
                }
                super::one(int_tensor(out_type, v.shape.clone(), idx)?)
            })
        }
        "ListDiff" => {
            let out_idx = attr_type_or(node, "out_idx", DType::Int32)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                let (x, y) = (&inp[0], &inp[1]);
                if x.rank() != 1 || y.rank() != 1 {
                    return Err(KernelError::invalid(format!(
                        "x should be a 1D vector, and y too, got shapes {:?} and {:?}",
                        x.shape, y.shape
                    )));
                }
                if x.dtype != y.dtype {
                    return Err(KernelError::invalid(format!("x is {} but y is {}", x.dtype, y.dtype)));
                }
                let keep = dispatch_all!(x.dtype, not_in(x, y))?;
                let src: Vec<Option<usize>> = keep.iter().map(|&i| Some(i)).collect();
                let mut o = Outputs::new();
                o.push(super::take_or(x, &src, None, vec![keep.len()])?);
                o.push(int_tensor(out_idx, vec![keep.len()], keep.iter().map(|&i| i as i64).collect())?);
                Ok(o)
            })
        }
        "UnravelIndex" => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            let (idx, dims) = (&inp[0], &inp[1]);
            if idx.rank() > 1 || dims.rank() != 1 {
                return Err(KernelError::invalid(format!(
                    "The indices can only be scalar or vector, and dims a vector, got shapes {:?} and {:?}",
                    idx.shape, dims.shape
                )));
            }
            let d = int_values(dims, "dims")?;
            if d.iter().any(|&x| x <= 0) {
                return Err(KernelError::invalid("All dimensions must be positive"));
            }
            let total = d.iter().try_fold(1i64, |a, &b| a.checked_mul(b));
            let i = int_values(idx, "indices")?;
            if i.iter().any(|&x| x < 0 || total.is_some_and(|t| x >= t)) {
                return Err(KernelError::invalid("index is out of bound as with dims"));
            }
            let n = i.len();
            let mut out = vec![0i64; d.len() * n];
            for (k, &x) in i.iter().enumerate() {
                let mut rest = x;
                for j in (0..d.len()).rev() {
                    out[j * n + k] = rest % d[j];
                    rest /= d[j];
                }
            }
            let shape = if idx.rank() == 0 { vec![d.len()] } else { vec![d.len(), n] };
            super::one(int_tensor(idx.dtype, shape, out)?)
        }),
        _ => return Ok(None),
    };
    Ok(Some(f))
}

/// For each row of `values`, the first position in the same row of `sorted` whose element
/// is not below (`upper`: is above) the value.
/// Per row of `x` (`rows × last`), the position of its `n`-th smallest element (largest with
/// `reverse`); ties keep their order, and NaN sorts last as in `std::nth_element`'s `<`.
fn nth<T: Elem>(x: &Tensor, rows: usize, last: usize, n: usize, reverse: bool) -> KResult<Vec<Option<usize>>> {
    let v = T::slice(x);
    Ok((0..rows)
        .map(|r| {
            let row = &v[r * last..(r + 1) * last];
            let mut order: Vec<usize> = (0..last).collect();
            order.sort_by(|&a, &b| {
                let o = row[a].partial_cmp(&row[b]).unwrap_or(std::cmp::Ordering::Equal);
                if reverse {
                    o.reverse()
                } else {
                    o
                }
            });
            Some(r * last + order[n])
        })
        .collect())
}

fn bounds<T: Elem>(sorted: &Tensor, values: &Tensor, upper: bool) -> KResult<Vec<i64>> {
    if sorted.rank() != 2 || values.rank() != 2 || sorted.shape[0] != values.shape[0] {
        return Err(KernelError::invalid(format!(
            "sorted_inputs and values must be matrices with the same number of rows, got shapes {:?} and {:?}",
            sorted.shape, values.shape
        )));
    }
    let (n, m) = (sorted.shape[1], values.shape[1]);
    let (s, v) = (T::slice(sorted), T::slice(values));
    let mut out = Vec::with_capacity(v.len());
    for b in 0..sorted.shape[0] {
        let row = &s[b * n..(b + 1) * n];
        for &x in &v[b * m..(b + 1) * m] {
            out.push(if upper {
                row.partition_point(|e| e.partial_cmp(&x) != Some(std::cmp::Ordering::Greater))
            } else {
                row.partition_point(|e| *e < x)
            } as i64);
        }
    }
    Ok(out)
}

/// The positions of `x`'s elements that are not in `y`, in order (duplicates kept).
fn not_in<T: Elem>(x: &Tensor, y: &Tensor) -> KResult<Vec<usize>> {
    let y = T::slice(y);
    Ok(T::slice(x).iter().enumerate().filter(|(_, e)| !y.contains(e)).map(|(i, _)| i).collect())
}

#[cfg(test)]
#[allow(clippy::excessive_precision, clippy::approx_constant)] // TensorFlow's printed values
mod tests {
    use super::*;
    use crate::kernels::tests_support::{node, run1};
    use autoclust_graph::AttrValue;

    /// TensorFlow 2.21's values and errors (`tf.raw_ops.NthElement`).
    #[test]
    fn nth_element_matches_tensorflow() {
        let run = |x: Tensor, n: i32, reverse: bool| {
            prepare(&node("NthElement", &[("reverse", AttrValue::B(reverse))])).unwrap().unwrap()(smallvec::smallvec![
                x,
                Tensor::scalar_i32(n)
            ])
        };
        let x = Tensor::from_f32(vec![2, 4], vec![3., 1., 2., 5., 4., 4., -1., 0.]).unwrap();
        assert_eq!(run(x.clone(), 1, false).unwrap()[0].as_f32().unwrap(), [2.0, 0.0]);
        assert_eq!(run(x.clone(), 0, true).unwrap()[0].as_f32().unwrap(), [5.0, 4.0]);
        let v = run(Tensor::from_i32(vec![3], vec![7, 2, 9]).unwrap(), 2, false).unwrap();
        assert_eq!((v[0].shape.clone(), v[0].as_i32().unwrap().to_vec()), (vec![], vec![9]));
        let e = run(x, 4, false).unwrap_err().to_string();
        assert!(e.contains("Input must have last dimension > n = 4"), "{e}");
        let e = run(Tensor::scalar_f32(3.0), 0, false).unwrap_err().to_string();
        assert!(e.contains("Input must be at least rank 1 but is rank 0"), "{e}");
    }

    // Every expected value and message below is TensorFlow 2.21's.

    #[test]
    fn bounds_match_tensorflow() {
        let s = Tensor::from_f32(vec![2, 5], vec![1., 3., 3., 5., 9., 0., 2., 4., 6., 8.]).unwrap();
        let v = Tensor::from_f32(vec![2, 3], vec![3., 0., 10., 4., 5., -1.]).unwrap();
        let r = run1(&node("LowerBound", &[]), &[s.clone(), v.clone()]).unwrap();
        assert_eq!(r.as_i32().unwrap(), &[1, 0, 5, 2, 3, 0]);
        let n = node("UpperBound", &[("out_type", AttrValue::Type(DType::Int64))]);
        let r = run1(&n, &[s, v]).unwrap();
        assert_eq!(r.as_i64().unwrap(), &[3, 0, 5, 3, 3, 0]);
    }

    #[test]
    fn list_diff_keeps_order_and_duplicates() {
        let x = Tensor::from_i32(vec![7], vec![1, 2, 3, 4, 5, 6, 2]).unwrap();
        let y = Tensor::from_i32(vec![3], vec![1, 3, 5]).unwrap();
        let out = crate::kernels::compute(&node("ListDiff", &[]), &[x, y]).unwrap();
        assert_eq!(out[0].as_i32().unwrap(), &[2, 4, 6, 2]);
        assert_eq!(out[1].as_i32().unwrap(), &[1, 3, 5, 6]);
    }

    #[test]
    fn unravel_index_matches_tensorflow() {
        let r = run1(
            &node("UnravelIndex", &[]),
            &[Tensor::from_i32(vec![3], vec![1, 5, 4]).unwrap(), Tensor::from_i32(vec![2], vec![3, 2]).unwrap()],
        )
        .unwrap();
        assert_eq!((r.shape.clone(), r.as_i32().unwrap().to_vec()), (vec![2, 3], vec![0, 2, 2, 1, 1, 0]));
        let r = run1(
            &node("UnravelIndex", &[]),
            &[Tensor::scalar_i64(7), Tensor::from_i64(vec![3], vec![2, 2, 2]).unwrap()],
        )
        .unwrap();
        assert_eq!((r.shape.clone(), r.as_i64().unwrap().to_vec()), (vec![3], vec![1, 1, 1]));
        let e = run1(
            &node("UnravelIndex", &[]),
            &[Tensor::from_i32(vec![1], vec![6]).unwrap(), Tensor::from_i32(vec![2], vec![3, 2]).unwrap()],
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "index is out of bound as with dims");
    }

    #[test]
    fn lin_space_cumulative_logsumexp_and_euclidean_norm_match_tensorflow() {
        // These live in array.rs and reduce.rs beside Range, Cumsum and Sum; tested here with
        // the other ops of this wave, against TensorFlow 2.21's values.
        let ls = |a: Tensor, b: Tensor, n: i32| run1(&node("LinSpace", &[]), &[a, b, Tensor::scalar_i32(n)]);
        let r = ls(Tensor::scalar_f32(0.1), Tensor::scalar_f32(1.0), 7).unwrap();
        assert_eq!(r.as_f32().unwrap(), &[0.1, 0.25, 0.39999998, 0.55, 0.7, 0.84999996, 1.0]);
        assert_eq!(ls(Tensor::scalar_f32(2.0), Tensor::scalar_f32(5.0), 1).unwrap().as_f32().unwrap(), &[2.0]);
        let r =
            ls(Tensor::from_f64(vec![], vec![-1.0]).unwrap(), Tensor::from_f64(vec![], vec![1.0]).unwrap(), 4).unwrap();
        assert_eq!(r.as_f64().unwrap(), &[-1.0, -0.33333333333333337, 0.33333333333333326, 1.0]);
        let e = ls(Tensor::scalar_f32(2.0), Tensor::scalar_f32(5.0), 0).unwrap_err();
        assert_eq!(e.to_string(), "Requires num > 0: 0");

        let x = Tensor::from_f32(vec![1, 4], vec![0.5, -1.0, 2.0, 3.0]).unwrap();
        let want: [[f32; 4]; 4] = [
            [0.5, 0.70141327, 2.2413113, 3.3840916],
            [3.3840916, 3.3265626, 3.3132617, 3.0],
            [f32::NEG_INFINITY, 0.5, 0.70141327, 2.2413113],
            [3.3265626, 3.3132617, 3.0, f32::NEG_INFINITY],
        ];
        for (k, w) in want.iter().enumerate() {
            let (exclusive, reverse) = (k >= 2, k % 2 == 1);
            let n = node(
                "CumulativeLogsumexp",
                &[("exclusive", AttrValue::B(exclusive)), ("reverse", AttrValue::B(reverse))],
            );
            let r = run1(&n, &[x.clone(), Tensor::scalar_i32(1)]).unwrap();
            for (g, w) in r.as_f32().unwrap().iter().zip(w) {
                assert!(g == w || (g - w).abs() < 1e-6, "{k}: {g} vs {w}");
            }
        }
        let big = Tensor::from_f32(vec![3], vec![1000.0, 1000.0, f32::NEG_INFINITY]).unwrap();
        let r = run1(&node("CumulativeLogsumexp", &[]), &[big, Tensor::scalar_i32(0)]).unwrap();
        assert_eq!(r.as_f32().unwrap(), &[1000.0, 1000.6931762695312, 1000.6931762695312]);

        let m = Tensor::from_f32(vec![2, 3], vec![3., 4., 12., 1., 2., 2.]).unwrap();
        let r = run1(&node("EuclideanNorm", &[]), &[m.clone(), Tensor::from_i32(vec![1], vec![1]).unwrap()]).unwrap();
        assert_eq!(r.as_f32().unwrap(), &[13.0, 3.0]);
        let keep = node("EuclideanNorm", &[("keep_dims", AttrValue::B(true))]);
        let r = run1(&keep, &[m, Tensor::from_i32(vec![2], vec![0, 1]).unwrap()]).unwrap();
        assert_eq!((r.shape.clone(), r.as_f32().unwrap().to_vec()), (vec![1, 1], vec![13.341664]));
        let mi = Tensor::from_i32(vec![2, 3], vec![3, 4, 12, 1, 2, 2]).unwrap();
        let r = run1(&node("EuclideanNorm", &[]), &[mi, Tensor::from_i32(vec![1], vec![1]).unwrap()]).unwrap();
        assert_eq!(r.as_i32().unwrap(), &[13, 3]);
    }
}
