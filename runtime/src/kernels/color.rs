//! Colour-space ops of `tf.image` on float images whose last dimension holds RGB (or HSV)
//! triples: `RGBToHSV`, `HSVToRGB`, `AdjustHue`, `AdjustSaturation` and `AdjustContrastv2`
//! (serving graphs that preprocess images, `tf.image.adjust_*`). Each follows TensorFlow's
//! CPU kernel in float32 arithmetic (`colorspace_op.h`, `adjust_hue_op.cc`,
//! `adjust_saturation_op.cc`, `adjust_contrast_op.cc`): the hue shift works in TensorFlow's
//! hue/value-range form (hue in [0, 6) by sextant), saturation is scaled and clamped to
//! [0, 1] in HSV, contrast moves each channel of each image away from its mean.

use autoclust_graph::{DType, Node, Tensor};

use super::{arity, one, tensor_of, Inputs, PureFn};
use crate::error::{KResult, KernelError};

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let f: PureFn = match node.op.as_str() {
        "RGBToHSV" | "HSVToRGB" => {
            let to_hsv = node.op == "RGBToHSV";
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let f = if to_hsv { rgb_to_hsv } else { hsv_to_rgb };
                one(per_pixel(&inp[0], f)?)
            })
        }
        "AdjustHue" => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            let delta = super::f32_scalar(&inp[1], "delta")?;
            one(per_pixel(&inp[0], |p| shift_hue(p, delta))?)
        }),
        "AdjustSaturation" => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            let scale = super::f32_scalar(&inp[1], "scale")?;
            one(per_pixel(&inp[0], |p| {
                let [h, s, v] = hsv_of(p);
                hsv_to_rgb_sextant(h, (s * scale).clamp(0.0, 1.0), v)
            })?)
        }),
        "AdjustContrastv2" => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            let factor = super::f32_scalar(&inp[1], "contrast_factor")?;
            one(adjust_contrast(&inp[0], factor)?)
        }),
        _ => return Ok(None),
    };
    Ok(Some(f))
}

fn floats(t: &Tensor) -> KResult<&[f32]> {
    t.as_f32().filter(|_| t.dtype == DType::Float32).ok_or(KernelError::DType(t.dtype))
}

/// `f` applied to every triple of the last dimension (which must be 3).
fn per_pixel(t: &Tensor, f: impl Fn([f32; 3]) -> [f32; 3]) -> KResult<Tensor> {
    if t.shape.last() != Some(&3) {
        return Err(KernelError::invalid(format!(
            "input must have 3 channels in its last dimension, got shape {:?}",
            t.shape
        )));
    }
    let v = floats(t)?;
    let mut out = Vec::with_capacity(v.len());
    for p in v.chunks_exact(3) {
        out.extend(f([p[0], p[1], p[2]]));
    }
    Ok(tensor_of(t.shape.clone(), out))
}

/// `RGBToHSV` (`colorspace_op.h`): hue in [0, 1).
fn rgb_to_hsv([r, g, b]: [f32; 3]) -> [f32; 3] {
    let v = r.max(g).max(b);
    let range = v - r.min(g).min(b);
    let s = if v > 0.0 { range / v } else { 0.0 };
    let norm = 1.0 / (6.0 * range);
    let mut h = if r == v {
        norm * (g - b)
    } else if g == v {
        norm * (b - r) + (2.0f64 / 6.0) as f32
    } else {
        norm * (r - g) + (4.0f64 / 6.0) as f32
    };
    if range <= 0.0 {
        h = 0.0;
    }
    if h < 0.0 {
        h += 1.0;
    }
    [h, s, v]
}

/// `HSVToRGB` (`colorspace_op.h`): the clamped-ramp form.
fn hsv_to_rgb([h, s, v]: [f32; 3]) -> [f32; 3] {
    let dh = h * 6.0;
    let dr = ((dh - 3.0).abs() - 1.0).clamp(0.0, 1.0);
    let dg = (2.0 - (dh - 2.0).abs()).clamp(0.0, 1.0);
    let db = (2.0 - (dh - 4.0).abs()).clamp(0.0, 1.0);
    let one_minus_s = 1.0 - s;
    [(one_minus_s + s * dr) * v, (one_minus_s + s * dg) * v, (one_minus_s + s * db) * v]
}

/// `AdjustSaturation`'s RGB → HSV (the same formulas as [`rgb_to_hsv`]).
fn hsv_of(p: [f32; 3]) -> [f32; 3] {
    rgb_to_hsv(p)
}

/// `AdjustSaturation`'s HSV → RGB: by sextant of the hue.
fn hsv_to_rgb_sextant(h: f32, s: f32, v: f32) -> [f32; 3] {
    let c = s * v;
    let m = v - c;
    let dh = h * 6.0;
    let category = dh as i32;
    let mut fmodu = dh;
    while fmodu <= 0.0 {
        fmodu += 2.0;
    }
    while fmodu >= 2.0 {
        fmodu -= 2.0;
    }
    let x = c * (1.0 - (fmodu - 1.0).abs());
    let [r, g, b] = match category {
        0 => [c, x, 0.0],
        1 => [x, c, 0.0],
        2 => [0.0, c, x],
        3 => [0.0, x, c],
        4 => [x, 0.0, c],
        5 => [c, 0.0, x],
        _ => [0.0, 0.0, 0.0],
    };
    [r + m, g + m, b + m]
}

/// `AdjustHue`: the pixel as hue in [0, 6) with its value range, the hue moved by
/// `6·delta` (wrapped), and back.
fn shift_hue([r, g, b]: [f32; 3], delta: f32) -> [f32; 3] {
    let (v_max, v_mid, v_min, category) = if r < g {
        if b < r {
            (g, r, b, 1)
        } else if b > g {
            (b, g, r, 3)
        } else {
            (g, b, r, 2)
        }
    } else if b < g {
        (r, g, b, 0)
    } else if b > r {
        (b, r, g, 4)
    } else {
        (r, b, g, 5)
    };
    let mut h = if v_max == v_min {
        0.0
    } else {
        let ratio = (v_mid - v_min) / (v_max - v_min);
        category as f32 + if category & 1 == 0 { ratio } else { 1.0 - ratio }
    };
    h += delta * 6.0;
    while h < 0.0 {
        h += 6.0;
    }
    while h >= 6.0 {
        h -= 6.0;
    }
    let category = h as i32;
    let mut ratio = h - category as f32;
    if category & 1 != 0 {
        ratio = 1.0 - ratio;
    }
    let mid = v_min + ratio * (v_max - v_min);
    match category {
        0 => [v_max, mid, v_min],
        1 => [mid, v_max, v_min],
        2 => [v_min, v_max, mid],
        3 => [v_min, mid, v_max],
        4 => [mid, v_min, v_max],
        _ => [v_max, v_min, mid],
    }
}

/// `AdjustContrastv2`: `(x − mean)·factor + mean`, the mean per image and channel over
/// height and width (images `[..., H, W, C]`).
fn adjust_contrast(t: &Tensor, factor: f32) -> KResult<Tensor> {
    let r = t.rank();
    if r < 3 {
        return Err(KernelError::invalid(format!("input must be at least 3-D, got shape {:?}", t.shape)));
    }
    let v = floats(t)?;
    let (hw, c) = (t.shape[r - 3] * t.shape[r - 2], t.shape[r - 1]);
    let images = t.shape[..r - 3].iter().product::<usize>();
    let mut out = vec![0f32; v.len()];
    for i in 0..images {
        let img = &v[i * hw * c..(i + 1) * hw * c];
        for ch in 0..c {
            let sum: f32 = (0..hw).map(|p| img[p * c + ch]).sum();
            let mean = sum / hw as f32;
            for p in 0..hw {
                out[i * hw * c + p * c + ch] = (img[p * c + ch] - mean) * factor + mean;
            }
        }
    }
    Ok(tensor_of(t.shape.clone(), out))
}

#[cfg(test)]
#[allow(clippy::excessive_precision, clippy::approx_constant)] // TensorFlow's printed values
mod tests {
    use super::*;
    use crate::kernels::tests_support::{node, run1};

    fn rgb() -> Tensor {
        let v = [0.2, 0.4, 0.6, 0.9, 0.1, 0.1, 0.5, 0.5, 0.5, 0.0, 0.0, 0.0, 1.0, 0.8, 0.0, 0.3, 0.9, 0.6];
        Tensor::from_f32(vec![1, 2, 3, 3], v.to_vec()).unwrap()
    }
    fn close(got: &Tensor, want: &[f32]) {
        let got = got.as_f32().unwrap();
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= 1e-6 * w.abs().max(1.0), "{got:?}\nvs {want:?}");
        }
    }

    // Expected values: TensorFlow 2.21's CPU kernels on these pixels.

    #[test]
    fn colour_space_round_trip_matches_tensorflow() {
        let hsv = run1(&node("RGBToHSV", &[]), &[rgb()]).unwrap();
        close(
            &hsv,
            &[
                0.58333337, 0.6666667, 0.6, 0.0, 0.8888888, 0.9, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.13333334, 1.0, 1.0,
                0.41666669, 0.6666666, 0.9,
            ],
        );
        let back = run1(&node("HSVToRGB", &[]), &[hsv]).unwrap();
        close(&back, rgb().as_f32().unwrap());
        let h =
            Tensor::from_f32(vec![4, 3], vec![0.95, 0.5, 0.8, 0.1, 1.0, 1.0, 0.5, 0.0, 0.3, 1.0, 0.5, 0.5]).unwrap();
        close(
            &run1(&node("HSVToRGB", &[]), &[h]).unwrap(),
            &[0.8, 0.4, 0.5200001, 1.0, 0.6, 0.0, 0.3, 0.3, 0.3, 0.5, 0.25, 0.25],
        );
    }

    #[test]
    fn adjustments_match_tensorflow() {
        let hue = |d: f32| run1(&node("AdjustHue", &[]), &[rgb(), Tensor::scalar_f32(d)]).unwrap();
        close(
            &hue(0.3),
            &[
                0.6, 0.2, 0.47999996, 0.25999984, 0.9, 0.1, 0.5, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 1.0, 0.60000014,
                0.4800001, 0.3, 0.9,
            ],
        );
        close(
            &hue(-0.45),
            &[
                0.6, 0.5200001, 0.2, 0.1, 0.65999985, 0.9, 0.5, 0.5, 0.5, 0.0, 0.0, 0.0, 0.10000038, 0.0, 1.0, 0.9,
                0.3, 0.4199999,
            ],
        );
        let sat = |s: f32| run1(&node("AdjustSaturation", &[]), &[rgb(), Tensor::scalar_f32(s)]).unwrap();
        close(
            &sat(1.7),
            &[0.0, 0.3, 0.6, 0.9, 0.0, 0.0, 0.5, 0.5, 0.5, 0.0, 0.0, 0.0, 1.0, 0.8000001, 0.0, 0.0, 0.9, 0.45],
        );
        close(
            &sat(0.3),
            &[0.48, 0.54, 0.6, 0.9, 0.66, 0.66, 0.5, 0.5, 0.5, 0.0, 0.0, 0.0, 1.0, 0.94, 0.7, 0.72, 0.9, 0.80999994],
        );
        let c = run1(&node("AdjustContrastv2", &[]), &[rgb(), Tensor::scalar_f32(1.7)]).unwrap();
        close(
            &c,
            &[
                0.0016666353,
                0.365,
                0.81000006,
                1.1916666,
                -0.14500001,
                -0.040000021,
                0.51166666,
                0.53499997,
                0.64,
                -0.33833337,
                -0.31500003,
                -0.21000004,
                1.3616667,
                1.0450001,
                -0.21000004,
                0.17166668,
                1.2149999,
                0.81000006,
            ],
        );
    }
}
