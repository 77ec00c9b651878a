//! `ScaleAndTranslate` and its gradient: image resampling by a scaled and translated sampling
//! kernel, what `tf.image.resize(..., antialias=True)` and its `lanczos3`, `lanczos5`,
//! `gaussian` and `mitchellcubic` methods emit (and `jax.image.resize` through jax2tf).
//!
//! Separable, as TensorFlow's kernel: per axis, output pixel `x` samples the input at
//! `s = (x + ½)/scale − translation/scale`; the input pixels whose centres lie within the
//! kernel's radius (scaled by `1/scale` when antialiasing a downsample) get weight
//! `k(|i + ½ − s| · min(scale, 1))`, normalised to sum 1 (an output sampling outside the input
//! gets none, so it is 0). Rows are resampled first, then columns, in float32 — the order and
//! precision of TensorFlow's CPU kernel. The gradient applies the transposed weights.

use autoclust_graph::{DType, Node, Tensor};

use super::{arity, Inputs, PureFn};
use crate::error::{KResult, KernelError};

/// The sampling kernels (TensorFlow's `SamplingKernelType`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kernel {
    Lanczos(f32),
    Gaussian,
    Box,
    Triangle,
    KeysCubic,
    MitchellCubic,
}

impl Kernel {
    fn parse(name: &str) -> KResult<Kernel> {
        Ok(match name {
            "lanczos1" => Kernel::Lanczos(1.0),
            "lanczos3" => Kernel::Lanczos(3.0),
            "lanczos5" => Kernel::Lanczos(5.0),
            "gaussian" => Kernel::Gaussian,
            "box" => Kernel::Box,
            "triangle" => Kernel::Triangle,
            "keyscubic" => Kernel::KeysCubic,
            "mitchellcubic" => Kernel::MitchellCubic,
            _ => return Err(KernelError::invalid(format!("Unrecognized kernel type: {name}"))),
        })
    }

    fn radius(self) -> f32 {
        match self {
            Kernel::Lanczos(r) => r,
            Kernel::Gaussian => 1.5,
            Kernel::Box | Kernel::Triangle => 1.0,
            Kernel::KeysCubic | Kernel::MitchellCubic => 2.0,
        }
    }

    /// The kernel's value at `x` (in float32, as TensorFlow evaluates it).
    fn at(self, x: f32) -> f32 {
        let x = x.abs();
        match self {
            Kernel::Lanczos(r) => {
                const PI: f32 = std::f32::consts::PI;
                if x > r {
                    0.0
                } else if x <= 1e-3 {
                    1.0
                } else {
                    r * (PI * x).sin() * (PI * x / r).sin() / (PI * PI * x * x)
                }
            }
            Kernel::Gaussian => {
                let (radius, sigma) = (1.5f32, 1.5f32 / 3.0);
                if x >= radius {
                    0.0
                } else {
                    (f64::from(-x * x) / (2.0 * f64::from(sigma) * f64::from(sigma))).exp() as f32
                }
            }
            Kernel::Box => {
                if x < 0.5 {
                    1.0
                } else if x == 0.5 {
                    0.5
                } else {
                    0.0
                }
            }
            Kernel::Triangle => {
                if x < 1.0 {
                    1.0 - x
                } else {
                    0.0
                }
            }
            Kernel::KeysCubic => {
                if x >= 2.0 {
                    0.0
                } else if x >= 1.0 {
                    ((-0.5 * x + 2.5) * x - 4.0) * x + 2.0
                } else {
                    ((1.5 * x - 2.5) * x) * x + 1.0
                }
            }
            Kernel::MitchellCubic => {
                if x >= 2.0 {
                    0.0
                } else if x >= 1.0 {
                    (((-7.0 / 18.0) * x + 2.0) * x - 10.0 / 3.0) * x + 16.0 / 9.0
                } else {
                    (((7.0 / 6.0) * x - 2.0) * x) * x + 8.0 / 9.0
                }
            }
        }
    }
}

/// One axis's sampling: per output pixel, the first input pixel and the weights from there.
struct Spans {
    spans: Vec<(usize, Vec<f32>)>,
}

impl Spans {
    fn new(kernel: Kernel, output: usize, input: usize, scale: f32, translate: f32, antialias: bool) -> Spans {
        let inv_scale = 1.0 / scale;
        let inv_translate = -inv_scale * translate;
        let kernel_scale = if antialias { inv_scale.max(1.0) } else { 1.0 };
        let reach = kernel.radius() * kernel_scale;
        let one_over = 1.0 / kernel_scale;
        let spans = (0..output)
            .map(|x| {
                let sample = (x as f32 + 0.5) * inv_scale + inv_translate;
                if sample < 0.0 || sample > input as f32 {
                    return (0, Vec::new());
                }
                let last = input as i64 - 1;
                let start = ((sample - reach - 0.5).ceil() as i64).clamp(0, last);
                let end = ((sample + reach - 0.5).floor() as i64).clamp(0, last) + 1;
                let weights: Vec<f32> =
                    (start..end).map(|i| kernel.at(((i as f32) + 0.5 - sample) * one_over)).collect();
                let total: f32 = weights.iter().sum();
                if total.abs() >= 1000.0 * f32::MIN_POSITIVE {
                    let inv = 1.0 / total;
                    (start as usize, weights.into_iter().map(|w| w * inv).collect())
                } else {
                    (start as usize, Vec::new())
                }
            })
            .collect();
        Spans { spans }
    }
}

/// The operands every form checks: a 4-D image and two float pairs.
fn pair(t: &Tensor, what: &str) -> KResult<(f32, f32)> {
    match t.as_f32() {
        Some(&[a, b]) if t.shape.len() == 1 => Ok((a, b)),
        _ => Err(KernelError::invalid(format!("{what} must be a float32 vector of two elements, got {:?}", t.shape))),
    }
}

/// `input` `[B, H, W, C]` (as f32) resampled by `rows` (H → OH) and `cols` (W → OW).
fn resample(x: &[f32], [b, h, w, c]: [usize; 4], rows: &Spans, cols: &Spans) -> Vec<f32> {
    let (oh, ow) = (rows.spans.len(), cols.spans.len());
    let mut inter = vec![0.0f32; b * oh * w * c];
    for n in 0..b {
        for (y, (start, weights)) in rows.spans.iter().enumerate() {
            let dst = &mut inter[(n * oh + y) * w * c..][..w * c];
            for (k, &wt) in weights.iter().enumerate() {
                let src = &x[(n * h + start + k) * w * c..][..w * c];
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d += wt * s;
                }
            }
        }
    }
    let mut out = vec![0.0f32; b * oh * ow * c];
    for row in 0..b * oh {
        for (xo, (start, weights)) in cols.spans.iter().enumerate() {
            let dst = &mut out[(row * ow + xo) * c..][..c];
            for (k, &wt) in weights.iter().enumerate() {
                let src = &inter[(row * w + start + k) * c..][..c];
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d += wt * s;
                }
            }
        }
    }
    out
}

/// The gradient of [`resample`]: `dy` `[B, OH, OW, C]` back to `[B, H, W, C]`.
fn resample_grad(dy: &[f32], [b, h, w, c]: [usize; 4], rows: &Spans, cols: &Spans) -> Vec<f32> {
    let (oh, ow) = (rows.spans.len(), cols.spans.len());
    let mut inter = vec![0.0f32; b * oh * w * c];
    for row in 0..b * oh {
        for (xo, (start, weights)) in cols.spans.iter().enumerate() {
            let src = &dy[(row * ow + xo) * c..][..c];
            for (k, &wt) in weights.iter().enumerate() {
                let dst = &mut inter[(row * w + start + k) * c..][..c];
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d += wt * s;
                }
            }
        }
    }
    let mut dx = vec![0.0f32; b * h * w * c];
    for n in 0..b {
        for (y, (start, weights)) in rows.spans.iter().enumerate() {
            let src = &inter[(n * oh + y) * w * c..][..w * c];
            for (k, &wt) in weights.iter().enumerate() {
                let dst = &mut dx[(n * h + start + k) * w * c..][..w * c];
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d += wt * s;
                }
            }
        }
    }
    dx
}

fn image_dims(t: &Tensor, what: &str) -> KResult<[usize; 4]> {
    <[usize; 4]>::try_from(t.shape.as_slice())
        .map_err(|_| KernelError::invalid(format!("{what} must be 4-dimensional, got {:?}", t.shape)))
}

/// The kernels of this module, `None` for any other op.
pub(super) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    if !matches!(node.op.as_str(), "ScaleAndTranslate" | "ScaleAndTranslateGrad") {
        return Ok(None);
    }
    let kernel = Kernel::parse(node.attr("kernel_type").and_then(|v| v.as_str()).unwrap_or("lanczos3"))?;
    let antialias = match node.attr("antialias") {
        None => true,
        Some(v) => v.as_bool().ok_or_else(|| KernelError::Attr("antialias".into()))?,
    };
    let grad = node.op == "ScaleAndTranslateGrad";
    Ok(Some(Box::new(move |inp: Inputs| {
        arity(&inp, 4)?;
        let (sy, sx) = pair(&inp[2], "scale")?;
        let (ty, tx) = pair(&inp[3], "translation")?;
        if !(sy > 0.0 && sx > 0.0) {
            return Err(KernelError::invalid("Scale must be greater than zero."));
        }
        if grad {
            let dy = &inp[0];
            let [b, oh, ow, c] = image_dims(dy, "grads")?;
            let [b0, h, w, c0] = image_dims(&inp[1], "original_image")?;
            if (b, c) != (b0, c0) || dy.dtype != DType::Float32 {
                return Err(KernelError::invalid("grads and original_image disagree in batch, channels or dtype"));
            }
            let rows = Spans::new(kernel, oh, h, sy, ty, antialias);
            let cols = Spans::new(kernel, ow, w, sx, tx, antialias);
            let dx = resample_grad(dy.as_f32().expect("float32"), [b, h, w, c], &rows, &cols);
            return super::one(Tensor::from_f32(vec![b, h, w, c], dx).expect("shape"));
        }
        let x = &inp[0];
        let [b, h, w, c] = image_dims(x, "input")?;
        let size = super::shape_values(&inp[1], "size")?;
        let [oh, ow] = size[..] else { return Err(KernelError::invalid("size must have two elements")) };
        if oh == 0 || ow == 0 {
            return Err(KernelError::invalid("output dimensions must be positive"));
        }
        if c == 0 || h == 0 || w == 0 {
            return Err(KernelError::invalid("input image must be of non-zero size and have a channel"));
        }
        autoclust_graph::limits::tensor_elements(DType::Float32, &[b, oh, ow.max(w), c])
            .map_err(|e| KernelError::invalid(e.to_string()))?;
        let xf: Vec<f32> = match x.as_f32() {
            Some(v) => v.to_vec(),
            None => x.to_f64_vec().ok_or(KernelError::DType(x.dtype))?.into_iter().map(|v| v as f32).collect(),
        };
        let rows = Spans::new(kernel, oh, h, sy, ty, antialias);
        let cols = Spans::new(kernel, ow, w, sx, tx, antialias);
        let y = resample(&xf, [b, h, w, c], &rows, &cols);
        super::one(Tensor::from_f32(vec![b, oh, ow, c], y).expect("shape"))
    })))
}
