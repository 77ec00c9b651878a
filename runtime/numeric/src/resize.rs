//! `ResizeBilinear` and its gradient `ResizeBilinearGrad` on NHWC float32 images (Keras
//! `Resizing`, `UpSampling2D(interpolation="bilinear")`, `tf.image.resize`), computed as
//! TensorFlow's CPU kernels compute them (`resize_bilinear_op.cc`): the same float32 scales,
//! source coordinates, interpolation order and gradient accumulation order. Shared by the
//! compiled code and the interpreter.

/// The attributes and sizes of one resize: input `[b, ih, iw, c]`, output `[b, oh, ow, c]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resize {
    pub align_corners: bool,
    pub half_pixel_centers: bool,
}

impl Resize {
    /// The attributes of a `Resize*` node (both default to false, as in TensorFlow's OpDef).
    pub fn of(node: &autoclust_graph::Node) -> Resize {
        let flag = |name: &str| node.attr(name).and_then(autoclust_graph::AttrValue::as_bool).unwrap_or(false);
        Resize { align_corners: flag("align_corners"), half_pixel_centers: flag("half_pixel_centers") }
    }
}

/// Outputs smaller than this many elements are computed on the calling thread.
const PARALLEL_MIN: usize = 1 << 15;

/// One axis's source positions: (lower index, upper index, lerp) per output index.
fn weights(out: usize, inp: usize, r: Resize) -> Vec<(usize, usize, f32)> {
    let scale =
        if r.align_corners && out > 1 { (inp as f32 - 1.0) / (out as f32 - 1.0) } else { inp as f32 / out as f32 };
    (0..out)
        .map(|i| {
            let x = if r.half_pixel_centers { (i as f32 + 0.5) * scale - 0.5 } else { i as f32 * scale };
            let f = x.floor();
            let lo = (f as i64).max(0) as usize;
            let hi = (x.ceil() as i64).min(inp as i64 - 1).max(0) as usize;
            (lo, hi, x - f)
        })
        .collect()
}

impl Resize {
    /// TensorFlow's checks: `align_corners` and `half_pixel_centers` are exclusive, sizes positive.
    pub fn check(&self, input: &[usize], out_hw: (usize, usize)) -> Result<(), String> {
        if self.align_corners && self.half_pixel_centers {
            return Err("If half_pixel_centers is True, align_corners must be False.".into());
        }
        if input.len() != 4 {
            return Err(format!("input must be 4-dimensional, got shape {input:?}"));
        }
        if out_hw.0 == 0 || out_hw.1 == 0 || input[1] == 0 || input[2] == 0 {
            return Err(format!("output dimensions must be positive, got {out_hw:?} from {input:?}"));
        }
        Ok(())
    }

    /// The forward resize of `x` (`[b, ih, iw, c]`, as f32) to `[b, oh, ow, c]`.
    pub fn forward(&self, x: &[f32], input: &[usize], (oh, ow): (usize, usize)) -> Vec<f32> {
        use rayon::prelude::*;
        let (b, ih, iw, c) = (input[0], input[1], input[2], input[3]);
        let (ys, xs) = (weights(oh, ih, *self), weights(ow, iw, *self));
        let row = ow * c;
        let mut out = vec![0f32; b * oh * row];
        if row == 0 {
            return out;
        }
        // One output row from its two source rows, with TensorFlow's interpolation order.
        let fill = |(r, o): (usize, &mut [f32])| {
            let (n, (yl, yh, yw)) = (r / oh, ys[r % oh]);
            let img = &x[n * ih * iw * c..][..ih * iw * c];
            let (top, bottom) = (&img[yl * iw * c..][..iw * c], &img[yh * iw * c..][..iw * c]);
            for (o, &(xl, xh, xw)) in o.chunks_exact_mut(c).zip(&xs) {
                let (tl, tr) = (&top[xl * c..][..c], &top[xh * c..][..c]);
                let (bl, br) = (&bottom[xl * c..][..c], &bottom[xh * c..][..c]);
                for k in 0..c {
                    let t = tl[k] + (tr[k] - tl[k]) * xw;
                    let d = bl[k] + (br[k] - bl[k]) * xw;
                    o[k] = t + (d - t) * yw;
                }
            }
        };
        if out.len() < PARALLEL_MIN {
            out.chunks_exact_mut(row).enumerate().for_each(fill);
        } else {
            out.par_chunks_exact_mut(row).enumerate().for_each(fill);
        }
        out
    }

    /// The gradient: `dy` (`[b, oh, ow, c]`) spread back onto `[b, ih, iw, c]`.
    pub fn backward(
        &self,
        dy: &[f32],
        (b, oh, ow, c): (usize, usize, usize, usize),
        (ih, iw): (usize, usize),
    ) -> Vec<f32> {
        let (ys, xs) = (weights(oh, ih, *self), weights(ow, iw, *self));
        let mut out = vec![0f32; b * ih * iw * c];
        if ih * iw * c == 0 {
            return out;
        }
        // Each image's gradient in TensorFlow's accumulation order; images in parallel.
        let image = |(n, o): (usize, &mut [f32])| {
            let g = &dy[n * oh * ow * c..][..oh * ow * c];
            for (y, &(yl, yh, yw)) in ys.iter().enumerate() {
                let iy = 1.0 - yw;
                for (x, &(xl, xh, xw)) in xs.iter().enumerate() {
                    let ix = 1.0 - xw;
                    for ch in 0..c {
                        let d = g[(y * ow + x) * c + ch];
                        o[(yl * iw + xl) * c + ch] += d * iy * ix;
                        o[(yl * iw + xh) * c + ch] += d * iy * xw;
                        o[(yh * iw + xl) * c + ch] += d * yw * ix;
                        o[(yh * iw + xh) * c + ch] += d * yw * xw;
                    }
                }
            }
        };
        if b < 2 || out.len() < PARALLEL_MIN {
            out.chunks_exact_mut(ih * iw * c).enumerate().for_each(image);
        } else {
            use rayon::prelude::*;
            out.par_chunks_exact_mut(ih * iw * c).enumerate().for_each(image);
        }
        out
    }
}

/// `ResizeNearestNeighbor`'s source index along one axis for each of `out` positions
/// (TensorFlow's: `floor` of the scaled position, `round` with `align_corners`, the
/// half-pixel scaler without the −0.5 shift, clamped to `[0, inp − 1]`).
fn nearest(out: usize, inp: usize, r: Resize) -> Vec<usize> {
    let scale =
        if r.align_corners && out > 1 { (inp as f32 - 1.0) / (out as f32 - 1.0) } else { inp as f32 / out as f32 };
    (0..out)
        .map(|i| {
            let x = if r.half_pixel_centers { (i as f32 + 0.5) * scale } else { i as f32 * scale };
            let v = if r.align_corners { x.round() } else { x.floor() } as i64;
            v.min(inp as i64 - 1).max(0) as usize
        })
        .collect()
}

impl Resize {
    /// `ResizeNearestNeighbor` of `x` (`[b, ih, iw, c]`) to `[b, oh, ow, c]`.
    pub fn nearest_forward<T: Copy>(&self, x: &[T], input: &[usize], (oh, ow): (usize, usize)) -> Vec<T> {
        let (b, ih, iw, c) = (input[0], input[1], input[2], input[3]);
        let (ys, xs) = (nearest(oh, ih, *self), nearest(ow, iw, *self));
        let mut out = Vec::with_capacity(b * oh * ow * c);
        for n in 0..b {
            let img = &x[n * ih * iw * c..][..ih * iw * c];
            for &y in &ys {
                for &xx in &xs {
                    out.extend_from_slice(&img[(y * iw + xx) * c..][..c]);
                }
            }
        }
        out
    }

    /// `ResizeNearestNeighborGrad`: `dy` (`[b, gh, gw, c]`) summed back onto `[b, oh, ow, c]`
    /// (`out_hw` is the op's `size`, the forward input's), in TensorFlow's order.
    pub fn nearest_backward(
        &self,
        dy: &[f32],
        (b, gh, gw, c): (usize, usize, usize, usize),
        (oh, ow): (usize, usize),
    ) -> Vec<f32> {
        let (ys, xs) = (nearest(gh, oh, *self), nearest(gw, ow, *self));
        let mut out = vec![0f32; b * oh * ow * c];
        for n in 0..b {
            let o = &mut out[n * oh * ow * c..][..oh * ow * c];
            let g = &dy[n * gh * gw * c..][..gh * gw * c];
            for (y, &oy) in ys.iter().enumerate() {
                for (x, &ox) in xs.iter().enumerate() {
                    for ch in 0..c {
                        o[(oy * ow + ox) * c + ch] += g[(y * gw + x) * c + ch];
                    }
                }
            }
        }
        out
    }
}
