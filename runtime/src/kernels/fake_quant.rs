//! Fake quantisation (`fake_quant_ops.cc`, `fake_quant_ops_functor.h`): quantisation-aware
//! training's round trip of float32 values through `num_bits`-bit integers, and its
//! straight-through gradients.
//!
//! The arithmetic is `autoclust_graph::fake_quant`'s (the JIT lowers `FakeQuantWithMinMaxArgs`
//! with the same). The range `[min, max]` is first *nudged* so that 0.0 is exactly representable: the scale
//! is `(max − min) / (qmax − qmin)` (`qmin` is 1 with `narrow_range`, else 0; `qmax` is
//! `2^num_bits − 1`), the zero point `qmin − min / scale` clamped to `[qmin, qmax]` and
//! rounded half away from zero, and the nudged range `(q − zero point) · scale` for
//! `q = qmin, qmax`. A value is clamped to the nudged range, shifted by its minimum, and
//! becomes `floor(shifted · inv_scale + 0.5) · scale + nudged_min`, where `inv_scale` is
//! recomputed as `(qmax − qmin) / (max − min)` rather than `1 / scale`, all in float32 in
//! TensorFlow's order. The gradient passes where the input lies inside the nudged range; the
//! range's gradients sum what falls below (for `min`) and above (for `max`) it, per channel
//! for the per-channel op (the last dimension).

use autoclust_graph::fake_quant::{attr_range, nudge, quant_range, Nudged};
use autoclust_graph::{Node, Tensor};

use super::{arity, Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

fn f32s<'t>(t: &'t Tensor, what: &str) -> KResult<&'t [f32]> {
    t.as_f32().ok_or_else(|| KernelError::invalid(format!("{what} must be float32, got {}", t.dtype)))
}

/// A float32 tensor shaped like `like`.
fn like(like: &Tensor, v: Vec<f32>) -> Tensor {
    Tensor::from_f32(like.shape.clone(), v).expect("element count matches the shape")
}

/// The per-channel ranges: `min` and `max` of shape `[d]`, `d` the input's last dimension.
fn channel_ranges(x: &Tensor, min: &Tensor, max: &Tensor, q: (i32, i32)) -> KResult<Vec<Nudged>> {
    let d = *x.shape.last().ok_or_else(|| KernelError::invalid("inputs must have rank at least 1"))?;
    let (lo, hi) = (f32s(min, "min")?, f32s(max, "max")?);
    if min.shape != [d] || max.shape != [d] {
        return Err(KernelError::invalid(format!(
            "min and max must be of shape [{d}], got {:?} and {:?}",
            min.shape, max.shape
        )));
    }
    Ok(lo.iter().zip(hi).map(|(&a, &b)| nudge(a, b, q.0, q.1)).collect())
}

fn scalar_range(min: &Tensor, max: &Tensor, q: (i32, i32)) -> KResult<Nudged> {
    let (lo, hi) = (f32s(min, "min")?, f32s(max, "max")?);
    if lo.len() != 1 || hi.len() != 1 {
        return Err(KernelError::invalid(format!(
            "min and max must be scalars, got shapes {:?} and {:?}",
            min.shape, max.shape
        )));
    }
    Ok(nudge(lo[0], hi[0], q.0, q.1))
}

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let op = node.op.as_str();
    if !op.starts_with("FakeQuantWithMinMax") {
        return Ok(None);
    }
    let q = quant_range(node).map_err(KernelError::invalid)?;
    let attr_range = || attr_range(node).map_err(KernelError::invalid);
    let out1 = |t: Tensor| {
        let mut o = Outputs::new();
        o.push(t);
        o
    };
    let f: PureFn = match op {
        "FakeQuantWithMinMaxArgs" => {
            let r = attr_range()?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let v = f32s(&inp[0], "inputs")?.iter().map(|&x| r.quantize(x)).collect();
                Ok(out1(like(&inp[0], v)))
            })
        }
        "FakeQuantWithMinMaxArgsGradient" => {
            let r = attr_range()?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                let (g, x) = (f32s(&inp[0], "gradients")?, f32s(&inp[1], "inputs")?);
                if inp[0].shape != inp[1].shape {
                    return Err(KernelError::invalid("gradients and inputs must be the same size"));
                }
                let v = g.iter().zip(x).map(|(&g, &x)| if r.inside(x) { g } else { 0.0 }).collect();
                Ok(out1(like(&inp[1], v)))
            })
        }
        "FakeQuantWithMinMaxVars" => Box::new(move |inp: Inputs| {
            arity(&inp, 3)?;
            let r = scalar_range(&inp[1], &inp[2], q)?;
            let v = f32s(&inp[0], "inputs")?.iter().map(|&x| r.quantize(x)).collect();
            Ok(out1(like(&inp[0], v)))
        }),
        "FakeQuantWithMinMaxVarsPerChannel" => Box::new(move |inp: Inputs| {
            arity(&inp, 3)?;
            let rs = channel_ranges(&inp[0], &inp[1], &inp[2], q)?;
            let d = rs.len().max(1);
            let v = f32s(&inp[0], "inputs")?.iter().enumerate().map(|(i, &x)| rs[i % d].quantize(x)).collect();
            Ok(out1(like(&inp[0], v)))
        }),
        "FakeQuantWithMinMaxVarsGradient" | "FakeQuantWithMinMaxVarsPerChannelGradient" => {
            let per_channel = op.contains("PerChannel");
            Box::new(move |inp: Inputs| {
                arity(&inp, 4)?;
                if inp[0].shape != inp[1].shape {
                    return Err(KernelError::invalid("gradients and inputs must be the same size"));
                }
                let rs = if per_channel {
                    channel_ranges(&inp[1], &inp[2], &inp[3], q)?
                } else {
                    vec![scalar_range(&inp[2], &inp[3], q)?]
                };
                let (g, x) = (f32s(&inp[0], "gradients")?, f32s(&inp[1], "inputs")?);
                let d = rs.len().max(1);
                let (mut below, mut above) = (vec![0f32; d], vec![0f32; d]);
                let mut back = Vec::with_capacity(g.len());
                for (i, (&g, &x)) in g.iter().zip(x).enumerate() {
                    let r = &rs[i % d];
                    back.push(if r.inside(x) { g } else { 0.0 });
                    if x < r.min {
                        below[i % d] += g;
                    } else if x > r.max {
                        above[i % d] += g;
                    }
                }
                let mut o = Outputs::new();
                o.push(like(&inp[1], back));
                o.push(like(&inp[2], below));
                o.push(like(&inp[3], above));
                Ok(o)
            })
        }
        _ => return Err(KernelError::NoKernel(op.to_string())),
    };
    Ok(Some(f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::tests_support::{node, run1};
    use autoclust_graph::AttrValue;

    #[test]
    fn the_range_is_nudged_so_zero_is_exact() {
        // [-6, 6] in 8 bits: the zero point 127.5 rounds away from zero to 128.
        let r = nudge(-6.0, 6.0, 0, 255);
        assert_eq!(r.scale, 12.0 / 255.0);
        assert_eq!(r.min, -128.0 * r.scale);
        assert_eq!(r.max, 127.0 * r.scale);
        assert_eq!(r.quantize(0.0), 0.0);
        assert_eq!(r.quantize(100.0), r.max);
        assert_eq!(r.quantize(-100.0), r.min);
        // A range above zero is moved down to start at zero.
        let up = nudge(0.5, 2.0, 0, 255);
        assert_eq!(up.min, 0.0);
    }

    #[test]
    fn attributes_are_checked() {
        let bits = |n: i64| node("FakeQuantWithMinMaxArgs", &[("num_bits", AttrValue::I(n))]);
        assert!(prepare(&bits(1)).is_err());
        assert!(prepare(&bits(17)).is_err());
        let bad = node("FakeQuantWithMinMaxArgs", &[("min", AttrValue::F(1.0)), ("max", AttrValue::F(1.0))]);
        assert!(prepare(&bad).is_err());
        let x = Tensor::from_f32(vec![3], vec![-7.0, 0.02, 3.3]).unwrap();
        let y = run1(&node("FakeQuantWithMinMaxArgs", &[]), &[x]).unwrap();
        let r = nudge(-6.0, 6.0, 0, 255);
        // 3.3 is step 198 above the nudged minimum.
        assert_eq!(y.as_f32().unwrap(), &[r.min, 0.0, 198.0 * r.scale + r.min]);
    }
}
