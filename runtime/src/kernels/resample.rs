//! Image resampling beyond bilinear and nearest: `ResizeBicubic` (`tf.image.resize(method=
//! "bicubic")`, Keras `Resizing(interpolation="bicubic")`), `ResizeArea`, `CropAndResize`
//! (`tf.image.crop_and_resize`, region-of-interest pooling in detection models) and
//! `ExtractImagePatches` (`tf.image.extract_patches`, patch embeddings), on NHWC images of any
//! real dtype, float32 out (the patches keep the input's dtype).
//!
//! Each follows TensorFlow's CPU kernel step by step in float32, so the results agree with
//! TensorFlow's to the bit or an ulp: bicubic weights from TensorFlow's 1024-entry table of the
//! cubic convolution kernel (a = −0.75; with half-pixel centers Keys' a = −0.5 with weights
//! outside the image dropped and the rest renormalised), interpolated along x for four rows
//! then along y; area sums with TensorFlow's per-cell scales; crop-and-resize sampling points
//! `y1·(H−1) + i·(y2−y1)·(H−1)/(h−1)` with the extrapolation value outside the image.

use autoclust_graph::{DType, Node, Tensor};

use super::{arity, attr_bool_or, attr_float_or, attr_ints_or, budget, int_values, one, tensor_of, Inputs, PureFn};
use crate::error::{KResult, KernelError};

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let f: PureFn = match node.op.as_str() {
        "ResizeBicubic" | "ResizeArea" => {
            let bicubic = node.op == "ResizeBicubic";
            let align = attr_bool_or(node, "align_corners", false)?;
            let half = attr_bool_or(node, "half_pixel_centers", false)?;
            if align && half {
                return Err(KernelError::invalid("If half_pixel_centers is True, align_corners must be False."));
            }
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                let (img, dims) = images(&inp[0])?;
                let size = int_values(&inp[1], "size")?;
                let [h, w] = size[..] else {
                    return Err(KernelError::invalid(format!("shape_t must be 1-D with 2 elements, got {size:?}")));
                };
                if h <= 0 || w <= 0 {
                    return Err(KernelError::invalid(format!("output dimensions must be positive, got [{h}, {w}]")));
                }
                let out = (h as usize, w as usize);
                budget(DType::Float32, &[dims.0, out.0, out.1, dims.3])?;
                let v = if bicubic {
                    // Its buffer of every input row interpolated at the output columns.
                    budget(DType::Float32, &[dims.1, out.1, dims.3])?;
                    resize_bicubic(&img, dims, out, align, half)
                } else {
                    resize_area(&img, dims, out, align)
                };
                one(tensor_of(vec![dims.0, out.0, out.1, dims.3], v))
            })
        }
        "ResizeBicubicGrad" => {
            let align = attr_bool_or(node, "align_corners", false)?;
            let half = attr_bool_or(node, "half_pixel_centers", false)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                let (g, orig) = (&inp[0], &inp[1]);
                let dy = g.as_f32().filter(|_| g.dtype == DType::Float32).ok_or(KernelError::DType(g.dtype))?;
                let (&[n, oh, ow, c], &[n2, h, w, c2]) = (&g.shape[..], &orig.shape[..]) else {
                    return Err(KernelError::invalid("grads and original_image must be 4-dimensional"));
                };
                if n != n2 || c != c2 || h == 0 || w == 0 {
                    return Err(KernelError::invalid(format!(
                        "grads {:?} and original_image {:?} do not match",
                        g.shape, orig.shape
                    )));
                }
                let v = resize_bicubic_grad(dy, (n, h, w, c), (oh, ow), align, half);
                let out = tensor_of(orig.shape.clone(), v);
                one(super::elementwise::cast(&out, orig.dtype)?)
            })
        }
        "CropAndResizeGradImage" => {
            let nearest = crop_method(node)?;
            let out = super::attr_type_or(node, "T", DType::Float32)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 4)?;
                let size = int_values(&inp[3], "image_size")?;
                let [n, h, w, d] = size[..] else {
                    return Err(KernelError::invalid(format!("image_size must be a 4-element vector, got {size:?}")));
                };
                if [n, h, w, d].iter().any(|&x| x <= 0) {
                    return Err(KernelError::invalid("image dimensions must be positive"));
                }
                let dims = (n as usize, h as usize, w as usize, d as usize);
                let t = crop_and_resize_grad_image(&inp[0], &inp[1], &inp[2], dims, nearest)?;
                one(super::elementwise::cast(&t, out)?)
            })
        }
        "CropAndResizeGradBoxes" => Box::new(|inp: Inputs| {
            arity(&inp, 4)?;
            crop_and_resize_grad_boxes(&inp[0], &inp[1], &inp[2], &inp[3])
        }),
        "CropAndResize" => {
            let nearest = crop_method(node)?;
            let extrapolation = attr_float_or(node, "extrapolation_value", 0.0)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 4)?;
                crop_and_resize(&inp[0], &inp[1], &inp[2], &inp[3], nearest, extrapolation)
            })
        }
        "ExtractImagePatches" => {
            let get = |name: &str| -> KResult<(usize, usize)> {
                match attr_ints_or(node, name)?[..] {
                    [1, r, c, 1] if r > 0 && c > 0 => Ok((r as usize, c as usize)),
                    ref v => Err(KernelError::invalid(format!(
                        "{name} must be [1, rows, cols, 1] with positive rows and cols, got {v:?}"
                    ))),
                }
            };
            let (k, s, r) = (get("ksizes")?, get("strides")?, get("rates")?);
            let same = match node.attr("padding").and_then(|a| a.as_str()) {
                Some("SAME") => true,
                Some("VALID") => false,
                p => return Err(KernelError::invalid(format!("padding must be SAME or VALID, got {p:?}"))),
            };
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                one(extract_patches(&inp[0], k, s, r, same)?)
            })
        }
        _ => return Ok(None),
    };
    Ok(Some(f))
}

type Dims = (usize, usize, usize, usize);

/// Whether a crop op samples `nearest` (else `bilinear`).
fn crop_method(node: &Node) -> KResult<bool> {
    match node.attr("method").and_then(|a| a.as_str()).unwrap_or("bilinear") {
        "bilinear" => Ok(false),
        "nearest" => Ok(true),
        m => Err(KernelError::invalid(format!("method must be 'bilinear' or 'nearest', got {m}"))),
    }
}

/// `ResizeBicubicGrad`: each output gradient spread over its 4×4 taps with the forward
/// weights, in TensorFlow's order (`grad · wy · wx` accumulated row by row).
fn resize_bicubic_grad(dy: &[f32], (n, h, w, c): Dims, (oh, ow): (usize, usize), align: bool, half: bool) -> Vec<f32> {
    let table = coefficients(if half { -0.5 } else { -0.75 });
    let (sy, sx) = (resize_scale(h, oh, align), resize_scale(w, ow, align));
    let xs: Vec<_> = (0..ow).map(|x| cubic_taps(&table, sx, x, w, half)).collect();
    let mut out = vec![0f32; n * h * w * c];
    for b in 0..n {
        for y in 0..oh {
            let (yi, yw) = cubic_taps(&table, sy, y, h, half);
            for (x, (xi, xw)) in xs.iter().enumerate() {
                for ch in 0..c {
                    let g = dy[((b * oh + y) * ow + x) * c + ch];
                    for i in 0..4 {
                        for j in 0..4 {
                            out[((b * h + yi[i]) * w + xi[j]) * c + ch] += g * yw[i] * xw[j];
                        }
                    }
                }
            }
        }
    }
    out
}

/// `CropAndResizeGradBoxes`: each box's coordinate gradients from the image's bilinear
/// slopes at its samples (TensorFlow's kernel; nearest sampling uses the same form).
fn crop_and_resize_grad_boxes(
    grads: &Tensor,
    image: &Tensor,
    boxes: &Tensor,
    box_ind: &Tensor,
) -> KResult<super::Outputs> {
    let (img, (n, h, w, c)) = images(image)?;
    let g = grads.as_f32().filter(|_| grads.dtype == DType::Float32).ok_or(KernelError::DType(grads.dtype))?;
    let bx = boxes.as_f32().filter(|_| boxes.dtype == DType::Float32).ok_or(KernelError::DType(boxes.dtype))?;
    let ind = int_values(box_ind, "box_ind")?;
    let [nb, ch, cw, gd] = grads.shape[..] else {
        return Err(KernelError::invalid(format!("grads must be 4-D, got shape {:?}", grads.shape)));
    };
    if boxes.shape != [nb, 4] || ind.len() != nb || gd != c || h == 0 || w == 0 {
        return Err(KernelError::invalid(format!(
            "grads {:?}, image {:?}, boxes {:?} and box_ind {:?} do not agree",
            grads.shape, image.shape, boxes.shape, box_ind.shape
        )));
    }
    if ind.iter().any(|&b| b < 0 || b as usize >= n) {
        return Err(KernelError::invalid(format!("box_index has values outside [0, {n})")));
    }
    let (hm1, wm1) = ((h - 1) as f32, (w - 1) as f32);
    let hr = if ch > 1 { hm1 / (ch - 1) as f32 } else { 0.0 };
    let wr = if cw > 1 { wm1 / (cw - 1) as f32 } else { 0.0 };
    let mut out = vec![0f32; nb * 4];
    for (k, &b) in ind.iter().enumerate() {
        let bk = [bx[k * 4], bx[k * 4 + 1], bx[k * 4 + 2], bx[k * 4 + 3]];
        let at = |r: usize, col: usize, d: usize| img[((b as usize * h + r) * w + col) * c + d];
        for p in CropGrid::new(bk, (ch, cw), (h, w), true).samples() {
            let (y, x) = (p.y as f32, p.x as f32);
            for d in 0..c {
                let (tl, tr, bl, br) =
                    (at(p.top, p.left, d), at(p.top, p.right, d), at(p.bottom, p.left, d), at(p.bottom, p.right, d));
                let top_grad = g[((k * ch + p.y) * cw + p.x) * c + d];
                let ygrad = ((1.0 - p.xl) * (bl - tl) + p.xl * (br - tr)) * top_grad;
                let xgrad = ((1.0 - p.yl) * (tr - tl) + p.yl * (br - bl)) * top_grad;
                if ch > 1 {
                    out[k * 4] += ygrad * (hm1 - y * hr);
                    out[k * 4 + 2] += ygrad * (y * hr);
                } else {
                    out[k * 4] += ygrad * 0.5 * hm1;
                    out[k * 4 + 2] += ygrad * 0.5 * hm1;
                }
                if cw > 1 {
                    out[k * 4 + 1] += xgrad * (wm1 - x * wr);
                    out[k * 4 + 3] += xgrad * (x * wr);
                } else {
                    out[k * 4 + 1] += xgrad * 0.5 * wm1;
                    out[k * 4 + 3] += xgrad * 0.5 * wm1;
                }
            }
        }
    }
    one(tensor_of(vec![nb, 4], out))
}

/// `CropAndResizeGradImage`: the crops' gradients sent back to the pixels each sample read
/// (bilinear: split over the four corners by the same weights; nearest: to the one pixel).
fn crop_and_resize_grad_image(
    grads: &Tensor,
    boxes: &Tensor,
    box_ind: &Tensor,
    (n, h, w, c): Dims,
    nearest: bool,
) -> KResult<Tensor> {
    let g = grads.as_f32().filter(|_| grads.dtype == DType::Float32).ok_or(KernelError::DType(grads.dtype))?;
    let bx = boxes.as_f32().filter(|_| boxes.dtype == DType::Float32).ok_or(KernelError::DType(boxes.dtype))?;
    let ind = int_values(box_ind, "box_ind")?;
    let [nb, ch, cw, gd] = grads.shape[..] else {
        return Err(KernelError::invalid(format!("grads must be 4-D, got shape {:?}", grads.shape)));
    };
    if boxes.shape != [nb, 4] || ind.len() != nb || gd != c {
        return Err(KernelError::invalid(format!(
            "grads {:?}, boxes {:?}, box_ind {:?} and depth {c} do not agree",
            grads.shape, boxes.shape, box_ind.shape
        )));
    }
    if ind.iter().any(|&b| b < 0 || b as usize >= n) {
        return Err(KernelError::invalid(format!("box_index has values outside [0, {n})")));
    }
    let mut out = vec![0f32; budget(DType::Float32, &[n, h, w, c])?];
    for (k, &b) in ind.iter().enumerate() {
        let bk = [bx[k * 4], bx[k * 4 + 1], bx[k * 4 + 2], bx[k * 4 + 3]];
        let at = |r: usize, col: usize, d: usize| ((b as usize * h + r) * w + col) * c + d;
        for p in CropGrid::new(bk, (ch, cw), (h, w), false).samples() {
            for d in 0..c {
                let gv = g[((k * ch + p.y) * cw + p.x) * c + d];
                if nearest {
                    out[at(p.in_y.round() as usize, p.in_x.round() as usize, d)] += gv;
                    continue;
                }
                let dtop = (1.0 - p.yl) * gv;
                out[at(p.top, p.left, d)] += (1.0 - p.xl) * dtop;
                out[at(p.top, p.right, d)] += p.xl * dtop;
                let dbottom = p.yl * gv;
                out[at(p.bottom, p.left, d)] += (1.0 - p.xl) * dbottom;
                out[at(p.bottom, p.right, d)] += p.xl * dbottom;
            }
        }
    }
    Ok(tensor_of(vec![n, h, w, c], out))
}

/// Where a crop's cells sample the image (TensorFlow's CropAndResize geometry): cell
/// `(y, x)` of a `ch × cw` crop of box `[y1, x1, y2, x2]` reads the image at `(in_y, in_x)`,
/// or nothing when that falls outside it. The forward kernel and both gradients walk the same
/// points; only the step's rounding differs (`ratio`: TensorFlow's box gradient multiplies by
/// `(h − 1)/(ch − 1)` computed first, the other two divide last).
struct CropGrid {
    origin: (f32, f32),
    step: (f32, f32),
    centre: (f32, f32),
    crop: (usize, usize),
    last: (f32, f32),
}

/// A sampling point inside the image: its position, the pixels around it and the weights.
struct CropSample {
    y: usize,
    x: usize,
    in_y: f32,
    in_x: f32,
    top: usize,
    bottom: usize,
    left: usize,
    right: usize,
    yl: f32,
    xl: f32,
}

impl CropGrid {
    fn new(b: [f32; 4], (ch, cw): (usize, usize), (h, w): (usize, usize), ratio: bool) -> CropGrid {
        let [y1, x1, y2, x2] = b;
        let (hm1, wm1) = ((h - 1) as f32, (w - 1) as f32);
        let step = |lo: f32, hi: f32, m1: f32, n: usize| match (n > 1, ratio) {
            (false, _) => 0.0,
            (true, true) => (hi - lo) * (m1 / (n - 1) as f32),
            (true, false) => (hi - lo) * m1 / (n - 1) as f32,
        };
        CropGrid {
            origin: (y1 * hm1, x1 * wm1),
            step: (step(y1, y2, hm1, ch), step(x1, x2, wm1, cw)),
            centre: (0.5 * (y1 + y2) * hm1, 0.5 * (x1 + x2) * wm1),
            crop: (ch, cw),
            last: (hm1, wm1),
        }
    }

    fn row(&self, y: usize) -> f32 {
        if self.crop.0 > 1 {
            self.origin.0 + y as f32 * self.step.0
        } else {
            self.centre.0
        }
    }

    fn col(&self, x: usize) -> f32 {
        if self.crop.1 > 1 {
            self.origin.1 + x as f32 * self.step.1
        } else {
            self.centre.1
        }
    }

    /// Every cell in row-major order, with its sample (`None` outside the image).
    fn cells(&self) -> impl Iterator<Item = (usize, usize, Option<CropSample>)> + '_ {
        let (ch, cw) = self.crop;
        (0..ch).flat_map(move |y| {
            let in_y = self.row(y);
            // Cells inside the image have 0 ≤ coordinate ≤ last (or NaN) for `floor_ceil`.
            (0..cw).map(move |x| {
                let in_x = self.col(x);
                // Written as TensorFlow tests it: a NaN coordinate is not "outside".
                let outside = in_y < 0.0 || in_y > self.last.0 || in_x < 0.0 || in_x > self.last.1;
                let inside = !outside;
                let sample = inside.then(|| {
                    let ((top, bottom), (left, right)) = (floor_ceil(in_y), floor_ceil(in_x));
                    CropSample {
                        y,
                        x,
                        in_y,
                        in_x,
                        top,
                        bottom,
                        left,
                        right,
                        yl: in_y - top as f32,
                        xl: in_x - left as f32,
                    }
                });
                (y, x, sample)
            })
        })
    }

    /// The cells inside the image.
    fn samples(&self) -> impl Iterator<Item = CropSample> + '_ {
        self.cells().filter_map(|(_, _, s)| s)
    }
}

/// `(floor(v), ceil(v))` as indices of a coordinate inside an image (`v` ≥ 0 and below
/// 2²⁴, or NaN, which gives `(0, 0)` as the float functions' casts do), without the libm
/// calls baseline x86-64 makes for `floor`/`ceil`.
fn floor_ceil(v: f32) -> (usize, usize) {
    let t = v as usize;
    (t, if (t as f32) < v { t + 1 } else { t })
}

/// A rank-4 image batch as float32 values.
fn images(t: &Tensor) -> KResult<(std::borrow::Cow<'_, [f32]>, Dims)> {
    let [n, h, w, c] = t.shape[..] else {
        return Err(KernelError::invalid(format!("input must be 4-dimensional, got shape {:?}", t.shape)));
    };
    let v = match t.as_f32() {
        Some(v) if t.dtype == DType::Float32 => v.into(),
        _ => t.to_f64_vec().ok_or(KernelError::DType(t.dtype))?.into_iter().map(|x| x as f32).collect(),
    };
    Ok((v, (n, h, w, c)))
}

/// TensorFlow's `CalculateResizeScale`.
fn resize_scale(input: usize, output: usize, align: bool) -> f32 {
    if align && output > 1 {
        (input - 1) as f32 / (output - 1) as f32
    } else {
        input as f32 / output as f32
    }
}

const TABLE: usize = 1 << 10;

/// The cubic convolution kernel sampled at `TABLE + 1` points: pairs (|x| in [0, 1], |x| + 1).
fn coefficients(a: f32) -> Vec<f32> {
    let mut t = vec![0f32; (TABLE + 1) * 2];
    for i in 0..=TABLE {
        let mut x = (i as f64 / TABLE as f64) as f32;
        t[i * 2] = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
        x += 1.0;
        t[i * 2 + 1] = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
    }
    t
}

/// The four source indices and weights of output position `out` (TensorFlow's
/// `GetWeightsAndIndices`).
fn cubic_taps(table: &[f32], scale: f32, out: usize, limit: usize, half: bool) -> ([usize; 4], [f32; 4]) {
    let loc = if half { (out as f32 + 0.5) * scale - 0.5 } else { out as f32 * scale };
    let base = loc.floor() as i64;
    let delta = loc - base as f32;
    let offset = (delta * TABLE as f32).round_ties_even() as usize;
    let bound = |i: i64| i.clamp(0, limit as i64 - 1) as usize;
    let idx = [bound(base - 1), bound(base), bound(base + 1), bound(base + 2)];
    let mut w =
        [table[offset * 2 + 1], table[offset * 2], table[(TABLE - offset) * 2], table[(TABLE - offset) * 2 + 1]];
    if half {
        for (k, wk) in w.iter_mut().enumerate() {
            if idx[k] as i64 != base - 1 + k as i64 {
                *wk = 0.0;
            }
        }
        let sum = w[0] + w[1] + w[2] + w[3];
        if sum.abs() >= 1000.0 * f32::MIN_POSITIVE {
            let inv = 1.0 / sum;
            w.iter_mut().for_each(|x| *x *= inv);
        }
    }
    (idx, w)
}

fn interpolate(w: &[f32; 4], v: [f32; 4]) -> f32 {
    v[0] * w[0] + v[1] * w[1] + v[2] * w[2] + v[3] * w[3]
}

/// `ResizeBicubic`: each output is the 4×4 taps' rows interpolated along x, then those four
/// values along y — TensorFlow's order of operations. Separably: every input row's x
/// interpolation at every output column is made once per image (each output row reuses four
/// of them: ~2.5× fewer operations than per output, in cache) and output rows are shared
/// between the cores; the values are the per-output computation's, bit for bit.
fn resize_bicubic(img: &[f32], (n, h, w, c): Dims, (oh, ow): (usize, usize), align: bool, half: bool) -> Vec<f32> {
    use rayon::prelude::*;
    let table = coefficients(if half { -0.5 } else { -0.75 });
    let (sy, sx) = (resize_scale(h, oh, align), resize_scale(w, ow, align));
    let xs: Vec<_> = (0..ow).map(|x| cubic_taps(&table, sx, x, w, half)).collect();
    let ys: Vec<_> = (0..oh).map(|y| cubic_taps(&table, sy, y, h, half)).collect();
    let mut out = vec![0f32; n * oh * ow * c];
    let row_out = ow * c;
    if row_out == 0 || h == 0 {
        return out;
    }
    let mut across = vec![0f32; h * row_out];
    for b in 0..n {
        let image = &img[b * h * w * c..][..h * w * c];
        across.par_chunks_mut(row_out).enumerate().for_each(|(r, dst)| {
            let row = &image[r * w * c..][..w * c];
            for ((xi, xw), d) in xs.iter().zip(dst.chunks_exact_mut(c)) {
                for (ch, v) in d.iter_mut().enumerate() {
                    *v = interpolate(xw, xi.map(|col| row[col * c + ch]));
                }
            }
        });
        out[b * oh * row_out..][..oh * row_out].par_chunks_mut(row_out).zip(&ys).for_each(|(dst, (yi, yw))| {
            let rows = yi.map(|r| &across[r * row_out..][..row_out]);
            for (k, v) in dst.iter_mut().enumerate() {
                *v = interpolate(yw, rows.map(|row| row[k]));
            }
        });
    }
    out
}

/// One output cell's source cells along an axis and their overlaps (TensorFlow's area
/// scales: the first and last cells partial, the middle ones whole).
fn area_cells(out: usize, scale: f32, limit: usize) -> Vec<(usize, f32)> {
    let (lo, hi) = (out as f32 * scale, (out + 1) as f32 * scale);
    let (start, end) = (lo.floor() as i64, hi.ceil() as i64);
    (start..end)
        .map(|i| {
            let f = i as f32;
            let s = if f < lo {
                if f + 1.0 > hi {
                    scale
                } else {
                    f + 1.0 - lo
                }
            } else if f + 1.0 > hi {
                hi - f
            } else {
                1.0
            };
            ((i.max(0) as usize).min(limit - 1), s)
        })
        .collect()
}

fn resize_area(img: &[f32], (n, h, w, c): Dims, (oh, ow): (usize, usize), align: bool) -> Vec<f32> {
    let (sy, sx) = (resize_scale(h, oh, align), resize_scale(w, ow, align));
    let scale = (1.0 / (f64::from(sy) * f64::from(sx))) as f32;
    let xs: Vec<Vec<(usize, f32)>> = (0..ow).map(|x| area_cells(x, sx, w)).collect();
    let mut out = Vec::with_capacity(n * oh * ow * c);
    for b in 0..n {
        for y in 0..oh {
            let ys = area_cells(y, sy, h);
            for xcells in &xs {
                for ch in 0..c {
                    let mut sum = 0f32;
                    for &(r, ys) in &ys {
                        let at = |col: usize| img[((b * h + r) * w + col) * c + ch];
                        let last = xcells.len() - 1;
                        let mut row = at(xcells[0].0) * xcells[0].1;
                        for (k, &(col, s)) in xcells.iter().enumerate().skip(1) {
                            row += if k == last { at(col) * s } else { at(col) };
                        }
                        sum += row * ys;
                    }
                    out.push(sum * scale);
                }
            }
        }
    }
    out
}

fn crop_and_resize(
    image: &Tensor,
    boxes: &Tensor,
    box_ind: &Tensor,
    crop: &Tensor,
    nearest: bool,
    extrapolation: f32,
) -> KResult<super::Outputs> {
    let (img, (n, h, w, c)) = images(image)?;
    if h == 0 || w == 0 {
        return Err(KernelError::invalid("image dimensions must be positive"));
    }
    let bx = boxes.as_f32().filter(|_| boxes.dtype == DType::Float32).ok_or(KernelError::DType(boxes.dtype))?;
    let nb = match boxes.shape[..] {
        [nb, 4] => nb,
        _ => return Err(KernelError::invalid(format!("boxes must be 2-D [num_boxes, 4], got {:?}", boxes.shape))),
    };
    let ind = int_values(box_ind, "box_ind")?;
    if box_ind.rank() != 1 || ind.len() != nb {
        return Err(KernelError::invalid(format!("box_index has incompatible shape {:?}", box_ind.shape)));
    }
    let size = int_values(crop, "crop_size")?;
    let [ch, cw] = size[..] else {
        return Err(KernelError::invalid(format!("crop_size must be a length-2 vector, got {size:?}")));
    };
    if ch <= 0 || cw <= 0 {
        return Err(KernelError::invalid("crop dimensions must be positive"));
    }
    if ind.iter().any(|&b| b < 0 || b as usize >= n) {
        return Err(KernelError::invalid(format!("box_index has values outside [0, {n})")));
    }
    let (ch, cw) = (ch as usize, cw as usize);
    let shape = vec![nb, ch, cw, c];
    let per_box = ch * cw * c;
    let mut out = vec![0f32; budget(DType::Float32, &shape)?];
    // One box's crop: boxes are independent, so large batches of them run in parallel.
    let crop_box = |(k, o): (usize, &mut [f32])| {
        let b = ind[k] as usize;
        let bk = [bx[k * 4], bx[k * 4 + 1], bx[k * 4 + 2], bx[k * 4 + 3]];
        let image = &img[b * h * w * c..][..h * w * c];
        let px = |r: usize, col: usize| &image[(r * w + col) * c..][..c];
        for ((_, _, cell), o) in CropGrid::new(bk, (ch, cw), (h, w), false).cells().zip(o.chunks_exact_mut(c)) {
            match cell {
                None => o.fill(extrapolation),
                Some(p) if nearest => o.copy_from_slice(px(p.in_y.round() as usize, p.in_x.round() as usize)),
                Some(p) => {
                    let (tl, tr) = (px(p.top, p.left), px(p.top, p.right));
                    let (bl, br) = (px(p.bottom, p.left), px(p.bottom, p.right));
                    for d in 0..c {
                        let t = tl[d] + (tr[d] - tl[d]) * p.xl;
                        let bo = bl[d] + (br[d] - bl[d]) * p.xl;
                        o[d] = t + (bo - t) * p.yl;
                    }
                }
            }
        }
    };
    if per_box > 0 && nb > 1 && out.len() >= 1 << 15 {
        use rayon::prelude::*;
        out.par_chunks_exact_mut(per_box).enumerate().for_each(crop_box);
    } else if per_box > 0 {
        out.chunks_exact_mut(per_box).enumerate().for_each(crop_box);
    }
    one(tensor_of(shape, out))
}

/// `ExtractImagePatches`: each output position holds the `kr × kc` window (taps `rate`
/// apart) flattened as `[row, col, depth]`, zeros where it leaves the (padded) image.
fn extract_patches(
    t: &Tensor,
    (kr, kc): (usize, usize),
    (sr, sc): (usize, usize),
    (rr, rc): (usize, usize),
    same: bool,
) -> KResult<Tensor> {
    let [n, h, w, d] = t.shape[..] else {
        return Err(KernelError::invalid(format!("input must be 4-dimensional, got shape {:?}", t.shape)));
    };
    let (er, ec) = ((kr - 1) * rr + 1, (kc - 1) * rc + 1);
    let axis = |size: usize, k: usize, s: usize| -> KResult<(usize, usize)> {
        if same {
            let out = size.div_ceil(s);
            let pad = ((out.max(1) - 1) * s + k).saturating_sub(size);
            Ok((out, pad / 2))
        } else if size >= k {
            Ok(((size - k) / s + 1, 0))
        } else {
            Ok((0, 0))
        }
    };
    let ((oh, pt), (ow, pl)) = (axis(h, er, sr)?, axis(w, ec, sc)?);
    let shape = vec![n, oh, ow, kr * kc * d];
    let mut src = Vec::with_capacity(budget(t.dtype, &shape)?);
    for b in 0..n {
        for y in 0..oh {
            for x in 0..ow {
                for i in 0..kr {
                    for j in 0..kc {
                        let r = (y * sr + i * rr) as i64 - pt as i64;
                        let col = (x * sc + j * rc) as i64 - pl as i64;
                        let inside = (0..h as i64).contains(&r) && (0..w as i64).contains(&col);
                        let base = ((b * h + r.max(0) as usize) * w + col.max(0) as usize) * d;
                        src.extend((0..d).map(|k| inside.then_some(base + k)));
                    }
                }
            }
        }
    }
    let zero = Tensor::zeros(t.dtype, Vec::new()).map_err(|e| KernelError::invalid(e.to_string()))?;
    super::take_or(t, &src, Some(&zero), shape)
}

#[cfg(test)]
#[allow(clippy::excessive_precision, clippy::approx_constant)] // TensorFlow's printed values
mod tests {
    use super::*;
    use crate::kernels::tests_support::{node, run1};
    use autoclust_graph::AttrValue;

    fn iota(shape: &[usize]) -> Tensor {
        let n = shape.iter().product::<usize>();
        Tensor::from_f32(shape.to_vec(), (0..n).map(|i| i as f32).collect()).unwrap()
    }
    fn size(h: i32, w: i32) -> Tensor {
        Tensor::from_i32(vec![2], vec![h, w]).unwrap()
    }
    fn close(got: &Tensor, want: &[f32]) {
        let got = got.as_f32().unwrap();
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= 2e-6 * w.abs().max(1.0), "{got:?}\nvs {want:?}");
        }
    }

    // Expected values: TensorFlow 2.21's CPU kernels (rounded to 6 decimals when printed).

    #[test]
    fn bicubic_matches_tensorflow_in_every_mode() {
        let img = Tensor::from_f32(vec![1, 4, 5, 1], (0..20).map(|i| (i as f32).powf(1.5)).collect()).unwrap();
        let cases: [(bool, bool, [f32; 21]); 3] = [
            (
                false,
                false,
                [
                    0.0, 0.53575, 1.686387, 3.221372, 4.713774, 7.008894, 8.306632, 17.382462, 19.96385, 23.457953,
                    26.768976, 29.669813, 33.730736, 35.935463, 50.904343, 54.422558, 59.128567, 63.50882, 67.29618,
                    72.519714, 75.336365,
                ],
            ),
            (
                false,
                true,
                [
                    0.0, 0.482379, 1.554735, 2.828427, 4.241484, 6.340938, 8.0, 19.967968, 22.42853, 25.939976,
                    28.841764, 31.813229, 35.722095, 38.619484, 58.09475, 61.466045, 66.224007, 70.092796, 74.015526,
                    79.09349, 82.819077,
                ],
            ),
            (
                true,
                false,
                [
                    0.976805, 1.626763, 2.836354, 4.365196, 6.142345, 8.396651, 10.061228, 20.196884, 22.53994,
                    25.994357, 29.242754, 32.612247, 36.506474, 39.266567, 54.962402, 58.146351, 62.795692, 67.09243,
                    71.483482, 76.480949, 79.995949,
                ],
            ),
        ];
        for (half, align, want) in cases {
            let n = node(
                "ResizeBicubic",
                &[("half_pixel_centers", AttrValue::B(half)), ("align_corners", AttrValue::B(align))],
            );
            let r = run1(&n, &[img.clone(), size(3, 7)]).unwrap();
            assert_eq!(r.shape, vec![1, 3, 7, 1]);
            close(&r, &want);
        }
    }

    #[test]
    fn area_matches_tensorflow_down_and_up() {
        let img = Tensor::from_f32(vec![1, 4, 5, 1], (0..20).map(|i| (i as f32).powf(1.5)).collect()).unwrap();
        let r = run1(&node("ResizeArea", &[]), &[img.clone(), size(3, 3)]).unwrap();
        close(&r, &[3.446745, 6.846472, 11.471588, 23.076897, 30.094782, 37.714882, 53.734337, 63.000019, 72.723541]);
        let r = run1(&node("ResizeArea", &[]), &[img, size(5, 7)]).unwrap();
        let want = [
            0.0, 0.6, 1.365685, 2.828427, 4.722608, 6.317688, 8.000002, 8.385255, 10.117724, 11.93762, 14.5973,
            17.535145, 19.86175, 22.250002, 21.40156, 23.91457, 26.480871, 30.044745, 33.808788, 36.726498, 39.691608,
            38.240765, 41.3136, 44.429737, 48.700111, 53.136833, 56.544441, 59.992176, 58.094742, 61.637894, 65.218544,
            70.092789, 75.112587, 78.948105, 82.819077,
        ];
        close(&r, &want);
    }

    #[test]
    fn crop_and_resize_matches_tensorflow() {
        let img = iota(&[2, 4, 4, 2]);
        let boxes = Tensor::from_f32(
            vec![4, 4],
            vec![0., 0., 1., 1., 0.1, 0.2, 0.6, 0.9, -0.2, 0.5, 0.5, 1.3, 0.8, 0.8, 0.2, 0.1],
        )
        .unwrap();
        let ind = Tensor::from_i32(vec![4], vec![0, 1, 1, 0]).unwrap();
        let bil = node("CropAndResize", &[("extrapolation_value", AttrValue::F(-1.0))]);
        let r = crate::kernels::compute(&bil, &[img.clone(), boxes.clone(), ind.clone(), size(3, 2)]).unwrap();
        assert_eq!(r[0].shape, vec![4, 3, 2, 2]);
        let want = [
            0.0, 1.0, 6.0, 7.0, 12.0, 13.0, 18.0, 19.0, 24.0, 25.0, 30.0, 31.0, 35.6, 36.6, 39.8, 40.8, 41.6, 42.6,
            45.8, 46.8, 47.6, 48.6, 51.8, 52.8, -1.0, -1.0, -1.0, -1.0, 38.6, 39.6, -1.0, -1.0, 47.0, 48.0, -1.0, -1.0,
            24.0, 25.0, 19.8, 20.8, 16.8, 17.8, 12.6, 13.6, 9.6, 10.6, 5.4, 6.4,
        ];
        close(&r[0], &want);
        let near = node(
            "CropAndResize",
            &[("method", AttrValue::S(b"nearest".to_vec())), ("extrapolation_value", AttrValue::F(0.5))],
        );
        let r = crate::kernels::compute(&near, &[img.clone(), boxes.clone(), ind.clone(), size(2, 3)]).unwrap();
        let want = [
            0.0, 1.0, 4.0, 5.0, 6.0, 7.0, 24.0, 25.0, 28.0, 29.0, 30.0, 31.0, 34.0, 35.0, 36.0, 37.0, 38.0, 39.0, 50.0,
            51.0, 52.0, 53.0, 54.0, 55.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 44.0, 45.0, 46.0, 47.0, 0.5, 0.5, 20.0, 21.0,
            18.0, 19.0, 16.0, 17.0, 12.0, 13.0, 10.0, 11.0, 8.0, 9.0,
        ];
        close(&r[0], &want);
        let two = Tensor::from_f32(vec![2, 4], vec![0., 0., 1., 1., 0.1, 0.2, 0.6, 0.9]).unwrap();
        let r = crate::kernels::compute(
            &node("CropAndResize", &[]),
            &[img.clone(), two, Tensor::from_i32(vec![2], vec![0, 1]).unwrap(), size(1, 1)],
        )
        .unwrap();
        close(&r[0], &[15.0, 16.0, 43.7, 44.7]);
        let bad = Tensor::from_i32(vec![4], vec![0, 2, 1, 0]).unwrap();
        let e = crate::kernels::compute(&bil, &[img, boxes, bad, size(3, 2)]).unwrap_err();
        assert_eq!(e.to_string(), "box_index has values outside [0, 2)");
    }

    #[test]
    fn gradients_of_bicubic_and_crop_match_tensorflow() {
        let x = Tensor::from_f32(vec![1, 4, 5, 1], (0..20).map(|i| (i as f32).powf(1.5)).collect()).unwrap();
        let g = Tensor::from_f32(vec![1, 3, 7, 1], (0..21).map(|i| -1.0 + i as f32 / 10.0).collect()).unwrap();
        let cases: [(bool, bool, [f32; 20]); 3] = [
            (
                false,
                false,
                [
                    -1.1158695, -1.2191213, -1.0086105, -0.8299696, -0.726429, -0.2987715, -0.2328589, -0.0769639,
                    0.0719908, 0.26478, 0.0469144, 0.1957721, 0.3406649, 0.489358, 0.7399788, 0.3406342, 0.5397564,
                    0.6537989, 0.7804234, 1.0445222,
                ],
            ),
            (
                false,
                true,
                [
                    -1.1611475, -1.2980927, -1.0623555, -0.8548602, -0.523544, -0.2088702, -0.1451968, 0.0, 0.1451968,
                    0.2088702, -0.2088702, -0.1451968, 0.0, 0.1451968, 0.2088702, 0.523544, 0.8548602, 1.0623555,
                    1.2980927, 1.1611476,
                ],
            ),
            (
                true,
                false,
                [
                    -1.2122258, -1.008443, -0.8746719, -0.6894586, -0.5563048, -0.4052221, -0.2613822, -0.1342879,
                    0.0007042, 0.1337005, -0.1337005, -0.0007042, 0.1342879, 0.2613822, 0.4052221, 0.5563048,
                    0.6894585, 0.8746718, 1.008443, 1.2122258,
                ],
            ),
        ];
        for (half, align, want) in cases {
            let n = node(
                "ResizeBicubicGrad",
                &[("half_pixel_centers", AttrValue::B(half)), ("align_corners", AttrValue::B(align))],
            );
            let r = run1(&n, &[g.clone(), x.clone()]).unwrap();
            let got = r.as_f32().unwrap();
            for (a, b) in got.iter().zip(want) {
                assert!((a - b).abs() <= 2e-6, "{half} {align}: {got:?}");
            }
        }
        let boxes = Tensor::from_f32(
            vec![4, 4],
            vec![0., 0., 1., 1., 0.1, 0.2, 0.6, 0.9, -0.2, 0.5, 0.5, 1.3, 0.8, 0.8, 0.2, 0.1],
        )
        .unwrap();
        let ind = Tensor::from_i32(vec![4], vec![0, 1, 1, 0]).unwrap();
        let size = Tensor::from_i32(vec![4], vec![2, 4, 4, 2]).unwrap();
        let lin = |n: usize| (0..n).map(|i| -1.0 + 3.0 * i as f32 / (n - 1) as f32).collect::<Vec<f32>>();
        let gb = Tensor::from_f32(vec![4, 3, 2, 2], lin(48)).unwrap();
        let r = run1(&node("CropAndResizeGradImage", &[]), &[gb, boxes.clone(), ind.clone(), size.clone()]).unwrap();
        let want_head = [-0.4578725, -0.3761704, 0.2323406, 0.2400002, 0.4340424, 0.4493616, -0.5829786, -0.5089362];
        let got = r.as_f32().unwrap();
        assert_eq!(got.len(), 64);
        for (a, b) in got.iter().zip(want_head) {
            assert!((a - b).abs() <= 2e-6, "{got:?}");
        }
        assert!((got[45] - 0.5529788).abs() <= 2e-6 && got[56..].iter().all(|&v| v == 0.0), "{got:?}");
        let gn = Tensor::from_f32(vec![4, 2, 3, 2], lin(48)).unwrap();
        let near = node("CropAndResizeGradImage", &[("method", AttrValue::S(b"nearest".to_vec()))]);
        let r = run1(&near, &[gn, boxes, ind, size]).unwrap();
        let want_head = [-1.0, -0.9361702, 0.0, 0.0, -0.8723404, -0.8085106, -0.7446808, -0.680851, 1.9361702, 2.0];
        for (a, b) in r.as_f32().unwrap().iter().zip(want_head) {
            assert!((a - b).abs() <= 2e-6, "{:?}", r.as_f32().unwrap());
        }
    }

    #[test]
    fn crop_box_gradients_match_tensorflow() {
        let img = Tensor::from_f32(vec![2, 4, 4, 2], (0..64).map(|i| (i as f32).powf(1.3)).collect()).unwrap();
        let boxes = Tensor::from_f32(
            vec![4, 4],
            vec![0., 0., 1., 1., 0.1, 0.2, 0.6, 0.9, -0.2, 0.5, 0.5, 1.3, 0.8, 0.8, 0.2, 0.1],
        )
        .unwrap();
        let ind = Tensor::from_i32(vec![4], vec![0, 1, 1, 0]).unwrap();
        let lin = |n: usize| (0..n).map(|i| -1.0 + 3.0 * i as f32 / (n - 1) as f32).collect::<Vec<f32>>();
        let check = |g: Tensor, want: &[f32]| {
            let r = crate::kernels::compute(
                &node("CropAndResizeGradBoxes", &[]),
                &[g, img.clone(), boxes.clone(), ind.clone()],
            )
            .unwrap();
            for (a, b) in r[0].as_f32().unwrap().iter().zip(want) {
                assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0), "{:?}", r[0].as_f32().unwrap());
            }
        };
        check(
            Tensor::from_f32(vec![4, 3, 2, 2], lin(48)).unwrap(),
            &[
                -90.945557, 0.0, -90.945557, 0.0, -28.181484, 8.694832, 172.01904, 27.638435, 76.978203, 91.683167,
                290.42691, 0.0, 676.46991, 168.90503, 646.80737, 163.50024,
            ],
        );
        check(
            Tensor::from_f32(vec![4, 1, 1, 2], lin(8)).unwrap(),
            &[
                -55.471153, -13.80361, -55.471153, -13.80361, 7.1746702, 1.7500935, 7.1746702, 1.7500935, 88.884476,
                22.079518, 88.884476, 22.079518, 125.81538, 31.497532, 125.81538, 31.497532,
            ],
        );
    }

    #[test]
    fn extract_patches_matches_tensorflow_valid_and_same_with_rates() {
        let x = iota(&[1, 5, 6, 2]);
        let attrs = |k: [i64; 2], s: [i64; 2], r: [i64; 2], pad: &str| {
            let l = |v: [i64; 2]| AttrValue::List(autoclust_graph::ListValue::I(vec![1, v[0], v[1], 1]));
            node(
                "ExtractImagePatches",
                &[
                    ("ksizes", l(k)),
                    ("strides", l(s)),
                    ("rates", l(r)),
                    ("padding", AttrValue::S(pad.as_bytes().to_vec())),
                ],
            )
        };
        let r = run1(&attrs([2, 3], [2, 2], [1, 1], "VALID"), std::slice::from_ref(&x)).unwrap();
        assert_eq!(r.shape, vec![1, 2, 2, 12]);
        assert_eq!(r.as_f32().unwrap()[..12], [0., 1., 2., 3., 4., 5., 12., 13., 14., 15., 16., 17.]);
        assert_eq!(r.as_f32().unwrap()[36..], [28., 29., 30., 31., 32., 33., 40., 41., 42., 43., 44., 45.]);
        let r = run1(&attrs([2, 2], [3, 2], [2, 2], "SAME"), &[x]).unwrap();
        assert_eq!(r.shape, vec![1, 2, 3, 8]);
        let want = [
            0., 1., 4., 5., 24., 25., 28., 29., 4., 5., 8., 9., 28., 29., 32., 33., 8., 9., 0., 0., 32., 33., 0., 0.,
            36., 37., 40., 41., 0., 0., 0., 0., 40., 41., 44., 45., 0., 0., 0., 0., 44., 45., 0., 0., 0., 0., 0., 0.,
        ];
        assert_eq!(r.as_f32().unwrap(), &want);
    }
}
