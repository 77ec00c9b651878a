//! Comparisons at a type's resolution: `ApproximateEqual` (`|x − y| < tolerance` computed
//! in `T`, as TensorFlow's functor does; float32 and float64, the types its CPU kernel
//! takes) and `NextAfter`
//! (`tf.math.nextafter`: the next representable value after `x1` towards `x2`, C's
//! `nextafter`: `x2` itself when they are equal, NaN when either is).

use autoclust_graph::{AttrValue, DType, Node, Tensor};

use super::{arity, one, tensor_of, Inputs, PureFn};
use crate::error::{KResult, KernelError};

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    Ok(Some(match node.op.as_str() {
        "ApproximateEqual" => {
            let tolerance = node.attr("tolerance").and_then(AttrValue::as_float).unwrap_or(1e-5);
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                one(approximate_equal(&inp[0], &inp[1], tolerance)?)
            })
        }
        "NextAfter" => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            one(next_after(&inp[0], &inp[1])?)
        }),
        _ => return Ok(None),
    }))
}

fn approximate_equal(x: &Tensor, y: &Tensor, tolerance: f32) -> KResult<Tensor> {
    if x.shape != y.shape {
        return Err(KernelError::invalid(format!(
            "x and y must be of the same shape. x shape: {:?}. y shape: {:?}",
            x.shape, y.shape
        )));
    }
    if x.dtype != y.dtype {
        return Err(KernelError::invalid(format!("x is {} but y is {}", x.dtype, y.dtype)));
    }
    let near: Vec<bool> = match x.dtype {
        DType::Float32 => {
            let (a, b) = (x.as_f32().expect("float32"), y.as_f32().expect("float32"));
            a.iter().zip(b).map(|(p, q)| (p - q).abs() < tolerance).collect()
        }
        DType::Float64 => {
            let (a, b) = (x.as_f64().expect("float64"), y.as_f64().expect("float64"));
            a.iter().zip(b).map(|(p, q)| (p - q).abs() < f64::from(tolerance)).collect()
        }
        // The op accepts every number type, but TensorFlow's CPU kernel is float-only.
        d => {
            return Err(KernelError::invalid(format!(
                "ApproximateEqual has no {d} kernel in TensorFlow (float32 and float64 only)"
            )))
        }
    };
    Ok(tensor_of(x.shape.clone(), near))
}

fn next_after(x1: &Tensor, x2: &Tensor) -> KResult<Tensor> {
    let shape = super::elementwise::broadcast_shape(&x1.shape, &x2.shape)?;
    macro_rules! go {
        ($t:ty, $as:ident) => {{
            let a = super::elementwise::broadcast_to::<$t>(x1, &shape)?;
            let b = super::elementwise::broadcast_to::<$t>(x2, &shape)?;
            let (a, b) = (a.$as().expect("broadcast keeps the dtype"), b.$as().expect("broadcast keeps the dtype"));
            let v: Vec<$t> = a
                .iter()
                .zip(b)
                .map(|(&p, &q)| {
                    if p.is_nan() || q.is_nan() {
                        <$t>::NAN
                    } else if p == q {
                        q
                    } else if p < q {
                        p.next_up()
                    } else {
                        p.next_down()
                    }
                })
                .collect();
            tensor_of(shape.clone(), v)
        }};
    }
    if x1.dtype != x2.dtype {
        return Err(KernelError::invalid(format!("x1 is {} but x2 is {}", x1.dtype, x2.dtype)));
    }
    Ok(match x1.dtype {
        DType::Float32 => go!(f32, as_f32),
        DType::Float64 => go!(f64, as_f64),
        d => return Err(KernelError::DType(d)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::tests_support::{node, run1};

    /// TensorFlow 2.21: `tf.math.nextafter([1.0, 1.0, 0.0, -0.0, 3.0], [2.0, 0.0, -1.0, 0.0, 3.0])`
    /// (float32) is `[1.0000001, 0.99999994, -1e-45, 0.0, 3.0]`, and NaN with a NaN operand;
    /// `tf.raw_ops.ApproximateEqual(x=[1.0, 1.0, 2.0], y=[1.000001, 1.1, 2.0])` is
    /// `[True, False, True]`, with `tolerance=0.2` all true; int32 operands have no kernel.
    #[test]
    fn next_after_and_approximate_equal_match_tensorflow() {
        let f = |v: &[f32]| Tensor::from_f32(vec![v.len()], v.to_vec()).unwrap();
        let out =
            run1(&node("NextAfter", &[]), &[f(&[1.0, 1.0, 0.0, -0.0, 3.0]), f(&[2.0, 0.0, -1.0, 0.0, 3.0])]).unwrap();
        let bits: Vec<u32> = out.as_f32().unwrap().iter().map(|x| x.to_bits()).collect();
        let want: Vec<u32> =
            [1.000_000_1f32, 0.999_999_94, -1e-45, 0.0, 3.0].iter().map(|x: &f32| x.to_bits()).collect();
        assert_eq!(bits, want);
        let nan = run1(&node("NextAfter", &[]), &[f(&[f32::NAN]), f(&[1.0])]).unwrap();
        assert!(nan.as_f32().unwrap()[0].is_nan());
        let near = run1(&node("ApproximateEqual", &[]), &[f(&[1.0, 1.0, 2.0]), f(&[1.000001, 1.1, 2.0])]).unwrap();
        assert_eq!(near.as_bool().unwrap(), &[true, false, true]);
        let wide = node("ApproximateEqual", &[("tolerance", AttrValue::F(0.2))]);
        let near = run1(&wide, &[f(&[1.0, 1.0, 2.0]), f(&[1.000001, 1.1, 2.0])]).unwrap();
        assert_eq!(near.as_bool().unwrap(), &[true, true, true]);
        let i = |v: &[i32]| Tensor::from_i32(vec![v.len()], v.to_vec()).unwrap();
        assert!(run1(&node("ApproximateEqual", &[]), &[i(&[1, 2]), i(&[1, 3])]).is_err());
        assert!(run1(&node("ApproximateEqual", &[]), &[f(&[1.0]), f(&[1.0, 2.0])]).is_err());
    }
}
