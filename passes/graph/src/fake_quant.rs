//! Fake quantisation's arithmetic (`fake_quant_ops_functor.h`), shared by the interpreter's
//! kernels and the JIT's lowering of `FakeQuantWithMinMaxArgs` so that both compute the same
//! float32 values.
//!
//! The range `[min, max]` is first *nudged* so that 0.0 is exactly representable: the scale
//! is `(max − min) / (qmax − qmin)` (`qmin` is 1 with `narrow_range`, else 0; `qmax` is
//! `2^num_bits − 1`), the zero point `qmin − min / scale` clamped to `[qmin, qmax]` and
//! rounded half away from zero, and the nudged range `(q − zero point) · scale` for
//! `q = qmin, qmax`. A value is clamped to the nudged range, shifted by its minimum, and
//! becomes `floor(shifted · inv_scale + 0.5) · scale + nudged_min`, where `inv_scale` is
//! recomputed as `(qmax − qmin) / (max − min)` rather than `1 / scale`, all in float32 in
//! TensorFlow's order.

use crate::{AttrValue, Node};

/// A nudged quantisation range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Nudged {
    pub min: f32,
    pub max: f32,
    pub scale: f32,
    pub inv_scale: f32,
}

/// The range `[min, max]` nudged for the integer range `[qmin, qmax]`.
pub fn nudge(min: f32, max: f32, qmin: i32, qmax: i32) -> Nudged {
    let (qminf, qmaxf) = (qmin as f32, qmax as f32);
    let scale = (max - min) / (qmaxf - qminf);
    let inv_scale = (qmaxf - qminf) / (max - min);
    let zero_from_min = qminf - min / scale;
    let zero = if zero_from_min < qminf {
        qmin as u16
    } else if zero_from_min > qmaxf {
        qmax as u16
    } else {
        zero_from_min.round() as u16
    };
    Nudged { min: (qminf - zero as f32) * scale, max: (qmaxf - zero as f32) * scale, scale, inv_scale }
}

impl Nudged {
    /// The fake-quantised value of `x`, clamped to the range first; a NaN stays NaN, as in
    /// TensorFlow (whose clamp is Eigen's `cwiseMin`/`cwiseMax`), and as the JIT's
    /// compare-and-select lowering gives.
    pub fn quantize(&self, x: f32) -> f32 {
        let clamped = if x > self.max {
            self.max
        } else if x < self.min {
            self.min
        } else {
            x
        };
        ((clamped - self.min) * self.inv_scale + 0.5).floor() * self.scale + self.min
    }

    /// Whether the gradient passes at `x`.
    pub fn inside(&self, x: f32) -> bool {
        x >= self.min && x <= self.max
    }
}

/// The integer range `[qmin, qmax]` of a node's `num_bits` (default 8) and `narrow_range`.
pub fn quant_range(node: &Node) -> Result<(i32, i32), String> {
    let num_bits = node.attr("num_bits").and_then(AttrValue::as_int).unwrap_or(8);
    if !(2..=16).contains(&num_bits) {
        return Err(format!("num_bits is out of range, expected between 2 and 16, was: {num_bits}"));
    }
    let narrow = node.attr("narrow_range").and_then(AttrValue::as_bool).unwrap_or(false);
    Ok((narrow as i32, (1i32 << num_bits) - 1))
}

/// The nudged range of a `FakeQuantWithMinMaxArgs` (or its gradient) node's attributes
/// (`min` −6 and `max` 6 by default), checked as TensorFlow checks them.
pub fn attr_range(node: &Node) -> Result<Nudged, String> {
    let (qmin, qmax) = quant_range(node)?;
    let min = node.attr("min").and_then(AttrValue::as_float).unwrap_or(-6.0);
    let max = node.attr("max").and_then(AttrValue::as_float).unwrap_or(6.0);
    if min >= max {
        return Err(format!("min has to be smaller than max, was: {min} >= {max}"));
    }
    // A range that leaves out zero is accepted (TensorFlow 2.21 does): nudging moves it to
    // one that starts or ends at zero, `[0.2, 0.9]` to `[0, 0.7]`.
    Ok(nudge(min, max, qmin, qmax))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TensorFlow 2.21: `fake_quant_with_min_max_args([-0.5, 0.1, 0.45, 1.2], 0.2, 0.9)` is
    /// `[0, 0.09882353, 0.45019603, 0.7]` (sweep 70): the range nudged to `[0, 0.7]`.
    #[test]
    fn ranges_without_zero_are_nudged_to_zero() {
        let n = Node::unconnected(
            "fq",
            "FakeQuantWithMinMaxArgs",
            &[("min", AttrValue::F(0.2)), ("max", AttrValue::F(0.9))],
        );
        let r = attr_range(&n).unwrap();
        assert_eq!(r.min, 0.0);
        let got: Vec<f32> = [-0.5f32, 0.1, 0.45, 1.2].iter().map(|&x| r.quantize(x)).collect();
        for (g, w) in got.iter().zip([0.0f32, 0.098_823_53, 0.450_196_03, 0.7]) {
            assert!((g - w).abs() <= 1e-6, "{got:?}");
        }
        // TensorFlow 2.21 keeps a NaN (sweep 70); infinities clamp.
        assert!(r.quantize(f32::NAN).is_nan());
        assert_eq!((r.quantize(f32::INFINITY), r.quantize(f32::NEG_INFINITY)), (r.max, r.min));
    }
}
