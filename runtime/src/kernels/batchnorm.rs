//! Fused batch normalisation in NHWC: `FusedBatchNorm{,V2,V3}` and
//! `FusedBatchNormGrad{,V2,V3}`, following TensorFlow's CPU kernels. The arithmetic is the
//! compiler's (`autoclust_numeric::batchnorm`, also what compiled clusters call), so both
//! modes compute the same bits; this module checks the operands and wraps the tensors.

use autoclust_graph::{Node, Tensor};
use autoclust_numeric::batchnorm::{self as shared, BnAttrs, BnElem};

use super::conv::require_nhwc;
use super::elementwise::Float;
use super::{attr_bool_or, dispatch_float, tensor_of, Elem, Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

#[derive(Clone, Copy, Debug)]
struct BnOp {
    attrs: BnAttrs,
    /// V3 has one more reserve space (an input of the gradient, an output of the forward op).
    v3: bool,
}

/// The channel count `C` of `x`.
fn channels(x: &Tensor) -> KResult<usize> {
    if x.rank() != 4 {
        return Err(KernelError::invalid(format!("x must be 4-dimensional, got shape {:?}", x.shape)));
    }
    Ok(x.shape[3])
}

fn per_channel<'a, T: Elem>(t: &'a Tensor, c: usize, what: &str) -> KResult<&'a [T]> {
    if t.dtype != T::DTYPE {
        return Err(KernelError::invalid(format!("{what} must have dtype {}, got {}", T::DTYPE, t.dtype)));
    }
    if t.shape[..] != [c] {
        return Err(KernelError::invalid(format!("{what} must be a vector of {c} channels, got {:?}", t.shape)));
    }
    Ok(T::slice(t))
}

fn batch_norm<T: Float + BnElem>(b: BnOp, inp: &Inputs) -> KResult<Outputs> {
    let x = &inp[0];
    let c = channels(x)?;
    let scale = per_channel::<T>(&inp[1], c, "scale")?;
    let offset = per_channel::<T>(&inp[2], c, "offset")?;
    let running = |i: usize, what: &str| -> KResult<Option<&[T]>> {
        if b.attrs.running_unused() && inp[i].num_elements() == 0 {
            return Ok(None);
        }
        per_channel::<T>(&inp[i], c, what).map(Some)
    };
    let (mean, var) = (running(3, "mean")?, running(4, "variance")?);
    let r = shared::batch_norm(&b.attrs, T::slice(x), c, scale, offset, mean, var);
    let mut o = Outputs::new();
    o.push(tensor_of(x.shape.clone(), r.y));
    for v in [r.batch_mean, r.batch_variance, r.reserve_mean, r.reserve_variance] {
        o.push(tensor_of(vec![c], v));
    }
    if b.v3 {
        o.push(tensor_of::<T>(vec![0], Vec::new()));
    }
    Ok(o)
}

fn batch_norm_grad<T: Float + BnElem>(b: BnOp, inp: &Inputs) -> KResult<Outputs> {
    let (dy, x) = (&inp[0], &inp[1]);
    let c = channels(x)?;
    if dy.shape != x.shape || dy.dtype != x.dtype {
        return Err(KernelError::invalid(format!(
            "y_backprop {} {:?} must match x {} {:?}",
            dy.dtype, dy.shape, x.dtype, x.shape
        )));
    }
    let scale = per_channel::<T>(&inp[2], c, "scale")?;
    let mean = per_channel::<T>(&inp[3], c, "reserve_space_1")?;
    let var = per_channel::<T>(&inp[4], c, "reserve_space_2")?;
    let (dx, dscale, doffset) = shared::batch_norm_grad(&b.attrs, T::slice(dy), T::slice(x), c, scale, mean, var);
    let mut o = Outputs::new();
    o.push(tensor_of(x.shape.clone(), dx));
    o.push(tensor_of(vec![c], dscale));
    o.push(tensor_of(vec![c], doffset));
    o.push(tensor_of::<T>(vec![0], Vec::new()));
    o.push(tensor_of::<T>(vec![0], Vec::new()));
    Ok(o)
}

/// Prepares a batch-norm kernel, or `None` if `node.op` is not one.
pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let (grad, v3) = match node.op.as_str() {
        "FusedBatchNorm" | "FusedBatchNormV2" => (false, false),
        "FusedBatchNormV3" => (false, true),
        "FusedBatchNormGrad" | "FusedBatchNormGradV2" => (true, false),
        "FusedBatchNormGradV3" => (true, true),
        _ => return Ok(None),
    };
    require_nhwc(node)?;
    let a = BnOp {
        attrs: BnAttrs {
            epsilon: super::attr_float_or(node, "epsilon", 1e-4)? as f64,
            exponential_avg_factor: super::attr_float_or(node, "exponential_avg_factor", 1.0)? as f64,
            is_training: attr_bool_or(node, "is_training", true)?,
        },
        v3,
    };
    let inputs = if grad && v3 { 6 } else { 5 };
    Ok(Some(Box::new(move |inp: Inputs| {
        super::arity(&inp, inputs)?;
        let dt = inp[if grad { 1 } else { 0 }].dtype;
        if grad {
            dispatch_float!(dt, batch_norm_grad(a, &inp))
        } else {
            dispatch_float!(dt, batch_norm(a, &inp))
        }
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::compute;
    use crate::kernels::tests_support::node;
    use autoclust_graph::AttrValue;

    fn v(x: &[f64]) -> Tensor {
        Tensor::from_f64(vec![x.len()], x.to_vec()).unwrap()
    }

    #[test]
    fn training_normalises_and_blends_running_stats() {
        // Two channels, 4 elements each.
        let x = Tensor::from_f64(vec![1, 2, 2, 2], vec![1.0, 10.0, 2.0, 20.0, 3.0, 30.0, 4.0, 40.0]).unwrap();
        let nd = node(
            "FusedBatchNormV3",
            &[
                ("epsilon", AttrValue::F(0.0)),
                ("exponential_avg_factor", AttrValue::F(0.5)),
                ("is_training", AttrValue::B(true)),
            ],
        );
        let out = compute(&nd, &[x, v(&[1.0, 2.0]), v(&[0.0, 1.0]), v(&[0.0, 0.0]), v(&[1.0, 1.0])]).unwrap();
        assert_eq!(out.len(), 6);
        let y = out[0].as_f64().unwrap();
        // Channel 0: mean 2.5, biased var 1.25.
        let s = 1.0 / 1.25f64.sqrt();
        assert!((y[0] - (1.0 - 2.5) * s).abs() < 1e-12);
        assert!((y[1] - ((10.0 - 25.0) * 2.0 / 125.0f64.sqrt() + 1.0)).abs() < 1e-12);
        // Running mean: 0.5 * 0 + 0.5 * 2.5; variance blends the unbiased 5/3.
        assert!((out[1].as_f64().unwrap()[0] - 1.25).abs() < 1e-12);
        assert!((out[2].as_f64().unwrap()[0] - (0.5 + 0.5 * 1.25 * 4.0 / 3.0)).abs() < 1e-12);
        assert_eq!(out[4].as_f64().unwrap(), &[1.25, 125.0]);
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let xv: Vec<f64> = (0..12).map(|i| ((i * 7) % 5) as f64 * 0.3 - 0.4 + i as f64 * 0.01).collect();
        let dyv: Vec<f64> = (0..12).map(|i| ((i * 3) % 4) as f64 * 0.2 - 0.3).collect();
        let scale = v(&[1.5, -0.5, 2.0]);
        let fwd = node("FusedBatchNormV3", &[("epsilon", AttrValue::F(0.01))]);
        let loss = |xv: &[f64]| -> f64 {
            let x = Tensor::from_f64(vec![2, 2, 1, 3], xv.to_vec()).unwrap();
            let out = compute(&fwd, &[x, scale.clone(), v(&[0.1, 0.2, 0.3]), v(&[]), v(&[])]).unwrap();
            out[0].as_f64().unwrap().iter().zip(&dyv).map(|(a, b)| a * b).sum()
        };
        let x = Tensor::from_f64(vec![2, 2, 1, 3], xv.clone()).unwrap();
        let out = compute(&fwd, &[x.clone(), scale.clone(), v(&[0.1, 0.2, 0.3]), v(&[]), v(&[])]).unwrap();
        let dy = Tensor::from_f64(vec![2, 2, 1, 3], dyv.clone()).unwrap();
        let g = compute(
            &node("FusedBatchNormGradV3", &[("epsilon", AttrValue::F(0.01))]),
            &[dy, x, scale.clone(), out[3].clone(), out[4].clone(), out[5].clone()],
        )
        .unwrap();
        let dx = g[0].as_f64().unwrap();
        for i in 0..12 {
            let (mut p, mut m) = (xv.clone(), xv.clone());
            p[i] += 1e-6;
            m[i] -= 1e-6;
            let fd = (loss(&p) - loss(&m)) / 2e-6;
            assert!((fd - dx[i]).abs() < 1e-5, "x[{i}]: {fd} vs {}", dx[i]);
        }
    }
}
