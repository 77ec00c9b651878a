//! 2-D pooling in NHWC: `MaxPool`, `MaxPoolGrad`, `AvgPool`, `AvgPoolGrad`.
//!
//! Windows and padding are [`super::conv::Window`]'s (`ksize` and `strides`
//! are `[1, h, w, 1]`). Padding never takes part: a max is over the window's
//! real elements, an average divides by how many real elements the window
//! holds (TensorFlow's CPU kernels do the same). `MaxPoolGrad` sends each
//! output's gradient to the first maximum of its window in row-major scan
//! order, as TensorFlow's CPU kernel does when it recomputes the argmax
//! (strictly greater replaces), so ties resolve alike.

use autoclust_compiler::pool::{self as shared, PoolAttrs, PoolElem, PoolShape};
use autoclust_graph::{Node, Tensor};

use super::conv::nhwc;
use super::elementwise::Float;
use super::{arity, dispatch_float, one, shape_values, tensor_of, Inputs, PureFn};
use crate::error::{KResult, KernelError};

fn pooled(a: &PoolAttrs, input: [usize; 4]) -> KResult<PoolShape> {
    Ok(PoolShape { input, win: a.window(input)? })
}

fn max_pool<T: Float + PoolElem>(a: &PoolAttrs, x: &Tensor) -> KResult<Tensor> {
    let s = pooled(a, nhwc(x, "input")?)?;
    Ok(tensor_of(s.output().to_vec(), shared::max_pool(&s, T::slice(x))))
}

fn max_pool_grad<T: Float + PoolElem>(a: &PoolAttrs, x: &Tensor, y: &Tensor, dy: &Tensor) -> KResult<Tensor> {
    let s = pooled(a, nhwc(x, "orig_input")?)?;
    let want = s.output();
    if y.shape[..] != want || dy.shape[..] != want {
        return Err(KernelError::invalid(format!(
            "orig_output {:?} and grad {:?} must have the pooled shape {want:?}",
            y.shape, dy.shape
        )));
    }
    Ok(tensor_of(s.input.to_vec(), shared::max_pool_grad(&s, T::slice(x), T::slice(dy))))
}

fn avg_pool<T: Float + PoolElem>(a: &PoolAttrs, x: &Tensor) -> KResult<Tensor> {
    let s = pooled(a, nhwc(x, "value")?)?;
    Ok(tensor_of(s.output().to_vec(), shared::avg_pool(&s, T::slice(x))))
}

fn avg_pool_grad<T: Float + PoolElem>(a: &PoolAttrs, sizes: &Tensor, dy: &Tensor) -> KResult<Tensor> {
    let d = shape_values(sizes, "orig_input_shape")?;
    super::budget(T::DTYPE, &d)?;
    let d: [usize; 4] =
        d.try_into().map_err(|v| KernelError::invalid(format!("orig_input_shape must have 4 elements, got {v:?}")))?;
    let s = pooled(a, d)?;
    let want = s.output();
    if dy.shape[..] != want {
        return Err(KernelError::invalid(format!("grad {:?} must have the pooled shape {want:?}", dy.shape)));
    }
    Ok(tensor_of(d.to_vec(), shared::avg_pool_grad(&s, T::slice(dy))))
}

/// Prepares a pooling kernel, or `None` if `node.op` is not one.
pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let op = node.op.as_str();
    if !matches!(op, "MaxPool" | "MaxPoolGrad" | "AvgPool" | "AvgPoolGrad") {
        return Ok(None);
    }
    let a = PoolAttrs::parse(node)?;
    let f: PureFn = match op {
        "MaxPool" => Box::new(move |inp: Inputs| {
            arity(&inp, 1)?;
            one(dispatch_float!(inp[0].dtype, max_pool(&a, &inp[0]))?)
        }),
        "MaxPoolGrad" => Box::new(move |inp: Inputs| {
            arity(&inp, 3)?;
            if inp[1].dtype != inp[0].dtype || inp[2].dtype != inp[0].dtype {
                return Err(KernelError::invalid("MaxPoolGrad: inputs must share one dtype"));
            }
            one(dispatch_float!(inp[0].dtype, max_pool_grad(&a, &inp[0], &inp[1], &inp[2]))?)
        }),
        "AvgPool" => Box::new(move |inp: Inputs| {
            arity(&inp, 1)?;
            one(dispatch_float!(inp[0].dtype, avg_pool(&a, &inp[0]))?)
        }),
        _ => Box::new(move |inp: Inputs| {
            arity(&inp, 2)?;
            one(dispatch_float!(inp[1].dtype, avg_pool_grad(&a, &inp[0], &inp[1]))?)
        }),
    };
    Ok(Some(f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::tests_support::{node, run1};
    use autoclust_graph::{AttrValue, ListValue};

    fn attrs(k: i64, s: i64, padding: &str) -> Vec<(&'static str, AttrValue)> {
        vec![
            ("ksize", AttrValue::List(ListValue::I(vec![1, k, k, 1]))),
            ("strides", AttrValue::List(ListValue::I(vec![1, s, s, 1]))),
            ("padding", AttrValue::S(padding.as_bytes().to_vec())),
        ]
    }

    fn img(h: usize, w: usize, v: &[f32]) -> Tensor {
        Tensor::from_f32(vec![1, h, w, 1], v.to_vec()).unwrap()
    }

    #[test]
    fn max_pool_and_its_gradient_pick_the_first_maximum() {
        // 3x3 image, 2x2 windows, stride 1, VALID: ties go to the first in scan order.
        let x = img(3, 3, &[1.0, 5.0, 5.0, 2.0, 0.0, 3.0, 7.0, 7.0, 1.0]);
        let y = run1(&node("MaxPool", &attrs(2, 1, "VALID")), std::slice::from_ref(&x)).unwrap();
        assert_eq!(y.as_f32().unwrap(), &[5.0, 5.0, 7.0, 7.0]);
        let dy = img(2, 2, &[1.0, 10.0, 100.0, 1000.0]);
        let dx = run1(&node("MaxPoolGrad", &attrs(2, 1, "VALID")), &[x, y, dy]).unwrap();
        assert_eq!(dx.as_f32().unwrap(), &[0.0, 11.0, 0.0, 0.0, 0.0, 0.0, 100.0, 1000.0, 0.0]);
    }

    #[test]
    fn avg_pool_same_divides_by_real_elements() {
        // 2x2 image, 2x2 windows, stride 1, SAME: the right/bottom windows are partly padding.
        let x = img(2, 2, &[1.0, 2.0, 3.0, 4.0]);
        let y = run1(&node("AvgPool", &attrs(2, 1, "SAME")), &[x]).unwrap();
        assert_eq!(y.as_f32().unwrap(), &[2.5, 3.0, 3.5, 4.0]);
        let sizes = Tensor::from_i32(vec![4], vec![1, 2, 2, 1]).unwrap();
        let dx = run1(&node("AvgPoolGrad", &attrs(2, 1, "SAME")), &[sizes, img(2, 2, &[4.0, 2.0, 2.0, 1.0])]).unwrap();
        assert_eq!(dx.as_f32().unwrap(), &[1.0, 2.0, 2.0, 4.0]);
    }
}
