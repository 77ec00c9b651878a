//! Local response normalisation (`tf.nn.local_response_normalization`, AlexNet/Inception-v1
//! era CNNs): `LRN` and `LRNGrad` over the last (depth) axis of a rank-4 float32 tensor, with
//! TensorFlow's CPU kernels' formulas: `out = in · (bias + alpha · Σ in²)^-beta` over the
//! window `d - r ..= d + r` (computed as `exp(-beta · ln(·))`, or the reciprocal or reciprocal
//! square root when `beta` is 1 or 0.5), and the gradient accumulated window by window as
//! `LRNGradOp` does.

use autoclust_graph::{DType, Node, Tensor};

use super::{arity, attr_float_or, attr_int_or, one, tensor_of, Inputs, PureFn};
use crate::error::{KResult, KernelError};

/// The four attributes.
#[derive(Clone, Copy, Debug)]
struct Lrn {
    radius: usize,
    bias: f32,
    alpha: f32,
    beta: f32,
}

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    if !matches!(node.op.as_str(), "LRN" | "LRNGrad") {
        return Ok(None);
    }
    let radius = attr_int_or(node, "depth_radius", 5)?;
    let p = Lrn {
        radius: usize::try_from(radius)
            .map_err(|_| KernelError::invalid(format!("depth_radius = {radius} must be non-negative")))?,
        bias: attr_float_or(node, "bias", 1.0)?,
        alpha: attr_float_or(node, "alpha", 1.0)?,
        beta: attr_float_or(node, "beta", 0.5)?,
    };
    Ok(Some(if node.op == "LRN" {
        Box::new(move |inp: Inputs| {
            arity(&inp, 1)?;
            one(p.forward(&inp[0])?)
        })
    } else {
        Box::new(move |inp: Inputs| {
            arity(&inp, 3)?;
            one(p.backward(&inp[0], &inp[1], &inp[2])?)
        })
    }))
}

fn float4<'a>(t: &'a Tensor, what: &str) -> KResult<&'a [f32]> {
    if t.rank() != 4 {
        return Err(KernelError::invalid(format!("{what} must be 4-dimensional, got shape {:?}", t.shape)));
    }
    t.as_f32().filter(|_| t.dtype == DType::Float32).ok_or(KernelError::DType(t.dtype))
}

impl Lrn {
    /// The window of depth `d` in a depth of `depth`.
    fn window(&self, d: usize, depth: usize) -> std::ops::Range<usize> {
        d.saturating_sub(self.radius)..(d + self.radius + 1).min(depth)
    }

    /// `(bias + alpha · sum)^-beta`.
    fn scale(&self, sum: f32) -> f32 {
        let t = sum * self.alpha + self.bias;
        if self.beta == 1.0 {
            1.0 / t
        } else if self.beta == 0.5 {
            1.0 / t.sqrt()
        } else {
            (t.ln() * -self.beta).exp()
        }
    }

    fn forward(&self, x: &Tensor) -> KResult<Tensor> {
        let v = float4(x, "input")?;
        let depth = x.shape[3];
        let mut out = Vec::with_capacity(v.len());
        for row in v.chunks_exact(depth.max(1)) {
            for d in 0..depth {
                let sum: f32 = row[self.window(d, depth)].iter().map(|&a| a * a).sum();
                out.push(row[d] * self.scale(sum));
            }
        }
        Ok(tensor_of(x.shape.clone(), out))
    }

    fn backward(&self, grads: &Tensor, image: &Tensor, output: &Tensor) -> KResult<Tensor> {
        let (g, x, y) = (float4(grads, "input_grads")?, float4(image, "input_image")?, float4(output, "output_image")?);
        if grads.shape != image.shape || image.shape != output.shape {
            return Err(KernelError::invalid(format!(
                "input_grads, input_image and output_image must have the same shape, got {:?}, {:?} and {:?}",
                grads.shape, image.shape, output.shape
            )));
        }
        let depth = image.shape[3];
        let mut out = vec![0f32; x.len()];
        if depth == 0 {
            return Ok(tensor_of(image.shape.clone(), out));
        }
        for (r, dst) in out.chunks_exact_mut(depth).enumerate() {
            let at = r * depth;
            let (xi, yi, gi) = (&x[at..at + depth], &y[at..at + depth], &g[at..at + depth]);
            for j in 0..depth {
                let win = self.window(j, depth);
                let mut norm = 0f32;
                for k in win.clone() {
                    norm += xi[k] * xi[k];
                }
                norm = self.alpha * norm + self.bias;
                for k in win {
                    let mut dyi = -2.0 * self.alpha * self.beta * xi[k] * yi[j] / norm;
                    if k == j {
                        dyi += norm.powf(-self.beta);
                    }
                    dst[k] += dyi * gi[j];
                }
            }
        }
        Ok(tensor_of(image.shape.clone(), out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TensorFlow 2.21's `gen_nn_ops.lrn` and `lrn_grad` (CPU) on a 1×2×2×6 input
    /// `arange(24)/10 - 1`, depth_radius 2, bias 1, alpha 0.5, beta 0.75, gradients
    /// `linspace(-1, 1, 24)`.
    #[test]
    fn lrn_and_its_gradient_match_tensorflow() {
        let x: Vec<f32> = (0..24).map(|i| i as f32 / 10.0 - 1.0).collect();
        let g: Vec<f32> = (0..24).map(|i| -1.0 + 2.0 * i as f32 / 23.0).collect();
        let p = Lrn { radius: 2, bias: 1.0, alpha: 0.5, beta: 0.75 };
        let xt = Tensor::from_f32(vec![1, 2, 2, 6], x).unwrap();
        let y = p.forward(&xt).unwrap();
        let want_y = [
            -0.54891175,
            -0.45679334,
            -0.38517278,
            -0.37788698,
            -0.37520626,
            -0.35993266,
            -0.36137313,
            -0.2701456,
            -0.18009704,
            -0.09472045,
            0.0,
            0.09925653,
            0.18068662,
            0.25076586,
            0.302715,
            0.33959314,
            0.41592073,
            0.5039057,
            0.43912938,
            0.4124798,
            0.38665956,
            0.3835279,
            0.4525658,
            0.54720354,
        ];
        for (a, b) in y.as_f32().unwrap().iter().zip(want_y) {
            assert!((a - b).abs() <= 2e-6 * b.abs().max(1.0), "{a} vs {b}");
        }
        let gt = Tensor::from_f32(vec![1, 2, 2, 6], g).unwrap();
        let dx = p.backward(&gt, &xt, &y).unwrap();
        let want_dx = [
            -0.1471912,
            -0.018993638,
            0.07582051,
            -0.04526338,
            -0.18060535,
            -0.26255044,
            -0.3449183,
            -0.28268528,
            -0.22760841,
            -0.19432902,
            -0.12757498,
            -0.04427115,
            0.027579624,
            0.077595115,
            0.09265339,
            0.061143663,
            0.10816403,
            0.17784023,
            0.13798667,
            0.052616578,
            -0.07229859,
            -0.156255,
            -0.05477509,
            0.06703946,
        ];
        for (a, b) in dx.as_f32().unwrap().iter().zip(want_dx) {
            assert!((a - b).abs() <= 2e-6 * b.abs().max(1.0), "{a} vs {b}");
        }
    }
}
