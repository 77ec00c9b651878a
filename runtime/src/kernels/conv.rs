//! 2-D convolutions in NHWC: `Conv2D`, `Conv2DBackpropInput`,
//! `Conv2DBackpropFilter`, and the depthwise `DepthwiseConv2dNative` with its
//! two gradients; plus the window geometry ([`Window`]) the pooling kernels
//! share.
//!
//! `Conv2D` lowers each image to a column matrix (im2col: one row per output
//! pixel, one column per filter tap and input channel) and multiplies it by
//! the HWIO filter, which is already the `[KH·KW·C, O]` matrix, with the
//! same GEMM `MatMul` uses. The input gradient is the transposed product
//! scattered back (col2im); the filter gradient is `colᵀ · dy` summed over
//! the batch. Depthwise convolutions are direct loops (each channel meets
//! only its own filter slice, so a GEMM buys nothing at these sizes).
//!
//! Output sizes and padding follow TensorFlow's `GetWindowedOutputSize`:
//! `VALID` has no padding and `⌈(in − k_eff + 1) / stride⌉` outputs, `SAME`
//! has `⌈in / stride⌉` outputs with the padding split evenly (the extra
//! element after), and `EXPLICIT` takes the `explicit_paddings` attribute.
//! `k_eff = (k − 1)·dilation + 1`. Only NHWC is supported; NCHW is refused
//! with an error (TensorFlow's CPU kernels refuse most of it too).

use autoclust_graph::{AttrValue, Node, Tensor};

use super::elementwise::Float;
use super::matmul::Gemm;
use super::{arity, dispatch_float, one, shape_values, tensor_of, Inputs, PureFn};
use crate::error::{KResult, KernelError};

/// How a window op pads its input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Padding {
    Valid,
    Same,
    /// `(before, after)` for H and W, from `explicit_paddings` (NHWC order).
    Explicit([(usize, usize); 2]),
}

/// One spatial axis of a windowed op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Axis {
    pub input: usize,
    pub kernel: usize,
    pub stride: usize,
    pub dilation: usize,
    pub pad_before: usize,
    pub output: usize,
}

impl Axis {
    fn new(input: usize, kernel: usize, stride: usize, dilation: usize, pad: Padding1) -> KResult<Axis> {
        if stride == 0 || dilation == 0 {
            return Err(KernelError::invalid("strides and dilations must be positive"));
        }
        let eff = (kernel.max(1) - 1) * dilation + 1;
        let (output, pad_before) = match pad {
            Padding1::Valid => {
                if input < eff {
                    (0, 0)
                } else {
                    ((input - eff) / stride + 1, 0)
                }
            }
            Padding1::Same => {
                let out = input.div_ceil(stride);
                let needed = ((out.max(1) - 1) * stride + eff).saturating_sub(input);
                (out, needed / 2)
            }
            Padding1::Explicit(before, after) => {
                let padded = input + before + after;
                if padded < eff {
                    (0, before)
                } else {
                    ((padded - eff) / stride + 1, before)
                }
            }
        };
        if kernel == 0 {
            return Err(KernelError::invalid("window size must be positive"));
        }
        Ok(Axis { input, kernel, stride, dilation, pad_before, output })
    }

    /// The input index tap `k` of output `o` reads, if it is not padding.
    #[inline]
    pub fn source(&self, o: usize, k: usize) -> Option<usize> {
        let i = (o * self.stride + k * self.dilation).checked_sub(self.pad_before)?;
        (i < self.input).then_some(i)
    }
}

#[derive(Clone, Copy)]
enum Padding1 {
    Valid,
    Same,
    Explicit(usize, usize),
}

/// The geometry of a 2-D window op over NHWC data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    pub h: Axis,
    pub w: Axis,
}

impl Window {
    pub fn new(
        input: (usize, usize),
        kernel: (usize, usize),
        strides: (usize, usize),
        dilations: (usize, usize),
        padding: &Padding,
    ) -> KResult<Window> {
        let p = |axis: usize| match padding {
            Padding::Valid => Padding1::Valid,
            Padding::Same => Padding1::Same,
            Padding::Explicit(e) => Padding1::Explicit(e[axis].0, e[axis].1),
        };
        Ok(Window {
            h: Axis::new(input.0, kernel.0, strides.0, dilations.0, p(0))?,
            w: Axis::new(input.1, kernel.1, strides.1, dilations.1, p(1))?,
        })
    }
}

/// The attributes every NHWC window op shares.
#[derive(Clone, Debug)]
pub(crate) struct WindowAttrs {
    pub strides: (usize, usize),
    pub dilations: (usize, usize),
    pub padding: Padding,
}

fn string_attr<'a>(node: &'a Node, name: &str) -> KResult<Option<&'a str>> {
    match node.attr(name) {
        None => Ok(None),
        Some(a) => a.as_str().map(Some).ok_or_else(|| KernelError::Attr(name.into())),
    }
}

/// Refuses any data format but NHWC.
pub(crate) fn require_nhwc(node: &Node) -> KResult<()> {
    match string_attr(node, "data_format")? {
        None | Some("NHWC") => Ok(()),
        Some(f) => Err(KernelError::invalid(format!("{} with data_format {f} is not supported (only NHWC)", node.op))),
    }
}

/// A 4-element NHWC attribute list (`strides`, `ksize`, `dilations`): its H and W
/// entries; the batch and channel entries must be 1.
pub(crate) fn hw_attr(node: &Node, name: &str, required: bool) -> KResult<(usize, usize)> {
    let v = match node.attr(name).map(AttrValue::as_int_list) {
        None if !required => return Ok((1, 1)),
        None => return Err(KernelError::Attr(name.into())),
        Some(None) => return Err(KernelError::Attr(name.into())),
        Some(Some(v)) => v,
    };
    if v.len() != 4 {
        return Err(KernelError::invalid(format!("{name} must have 4 elements, got {v:?}")));
    }
    if v[0] != 1 || v[3] != 1 {
        return Err(KernelError::invalid(format!(
            "{} over the batch or depth dimension is not supported ({name} = {v:?})",
            node.op
        )));
    }
    let pos = |x: i64| usize::try_from(x).ok().filter(|&x| x > 0);
    match (pos(v[1]), pos(v[2])) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(KernelError::invalid(format!("{name} must be positive, got {v:?}"))),
    }
}

/// Parses `padding` (and `explicit_paddings` when it is `EXPLICIT`).
pub(crate) fn padding_attr(node: &Node) -> KResult<Padding> {
    match string_attr(node, "padding")? {
        Some("VALID") => Ok(Padding::Valid),
        Some("SAME") => Ok(Padding::Same),
        Some("EXPLICIT") => {
            let e = node.attr("explicit_paddings").and_then(AttrValue::as_int_list).unwrap_or(&[]);
            if e.len() != 8 || e[0] != 0 || e[1] != 0 || e[6] != 0 || e[7] != 0 || e.iter().any(|&x| x < 0) {
                return Err(KernelError::invalid(format!(
                    "explicit_paddings must be 8 non-negative values with no batch or depth padding, got {e:?}"
                )));
            }
            Ok(Padding::Explicit([(e[2] as usize, e[3] as usize), (e[4] as usize, e[5] as usize)]))
        }
        Some(p) => Err(KernelError::invalid(format!("unknown padding {p}"))),
        None => Err(KernelError::Attr("padding".into())),
    }
}

impl WindowAttrs {
    pub fn parse(node: &Node, dilated: bool) -> KResult<WindowAttrs> {
        require_nhwc(node)?;
        let strides = hw_attr(node, "strides", true)?;
        let dilations = if dilated { hw_attr(node, "dilations", false)? } else { (1, 1) };
        Ok(WindowAttrs { strides, dilations, padding: padding_attr(node)? })
    }
}

/// `[N, H, W, C]` of a rank-4 tensor.
pub(crate) fn nhwc(t: &Tensor, what: &str) -> KResult<[usize; 4]> {
    match t.shape[..] {
        [n, h, w, c] => Ok([n, h, w, c]),
        _ => Err(KernelError::invalid(format!("{what} must be 4-dimensional, got shape {:?}", t.shape))),
    }
}

fn filter_dims(t: &Tensor) -> KResult<[usize; 4]> {
    match t.shape[..] {
        [kh, kw, i, o] => Ok([kh, kw, i, o]),
        _ => Err(KernelError::invalid(format!("filter must be 4-dimensional, got shape {:?}", t.shape))),
    }
}

/// The geometry of a convolution of `input` `[N,H,W,C]` by a `[KH,KW,C,O]` filter
/// (`[KH,KW,C,M]` for a depthwise one).
fn conv_window(a: &WindowAttrs, input: [usize; 4], filter: [usize; 4]) -> KResult<Window> {
    if filter[2] != input[3] {
        // TensorFlow allows grouped convolutions (input depth a multiple of the
        // filter's); the CPU kernels do not, and neither does this one.
        return Err(KernelError::invalid(format!(
            "input depth must equal the filter's input depth: {} vs {}",
            input[3], filter[2]
        )));
    }
    Window::new((input[1], input[2]), (filter[0], filter[1]), a.strides, a.dilations, &a.padding)
}

/// im2col of one image `x` (`[H, W, C]`): `[OH·OW, KH·KW·C]`, zero where the tap is padding.
fn im2col<T: Float>(x: &[T], c: usize, win: &Window, col: &mut [T]) {
    let (kh, kw) = (win.h.kernel, win.w.kernel);
    let row = kh * kw * c;
    for oy in 0..win.h.output {
        for ox in 0..win.w.output {
            let dst = &mut col[(oy * win.w.output + ox) * row..][..row];
            for ky in 0..kh {
                let iy = win.h.source(oy, ky);
                for kx in 0..kw {
                    let d = &mut dst[(ky * kw + kx) * c..][..c];
                    match (iy, win.w.source(ox, kx)) {
                        (Some(iy), Some(ix)) => d.copy_from_slice(&x[(iy * win.w.input + ix) * c..][..c]),
                        _ => d.fill(T::zero()),
                    }
                }
            }
        }
    }
}

/// col2im: adds `col` (`[OH·OW, KH·KW·C]`) back into one image `dx` (`[H, W, C]`).
fn col2im<T: Float>(col: &[T], c: usize, win: &Window, dx: &mut [T]) {
    let (kh, kw) = (win.h.kernel, win.w.kernel);
    let row = kh * kw * c;
    for oy in 0..win.h.output {
        for ox in 0..win.w.output {
            let src = &col[(oy * win.w.output + ox) * row..][..row];
            for ky in 0..kh {
                let Some(iy) = win.h.source(oy, ky) else { continue };
                for kx in 0..kw {
                    let Some(ix) = win.w.source(ox, kx) else { continue };
                    let d = &mut dx[(iy * win.w.input + ix) * c..][..c];
                    for (p, &q) in d.iter_mut().zip(&src[(ky * kw + kx) * c..][..c]) {
                        *p = p.add(q);
                    }
                }
            }
        }
    }
}

fn conv2d<T: Float + Gemm>(a: &WindowAttrs, x: &Tensor, f: &Tensor) -> KResult<Tensor> {
    let (xd, fd) = (nhwc(x, "input")?, filter_dims(f)?);
    let win = conv_window(a, xd, fd)?;
    let [n, h, w, c] = xd;
    let o = fd[3];
    let (pixels, row) = (win.h.output * win.w.output, fd[0] * fd[1] * c);
    let (xs, fs) = (T::slice(x), T::slice(f));
    let mut out = vec![T::zero(); n * pixels * o];
    let mut col = vec![T::zero(); pixels * row];
    for b in 0..n {
        im2col(&xs[b * h * w * c..][..h * w * c], c, &win, &mut col);
        T::gemm(pixels, row, o, &col, row as isize, 1, fs, o as isize, 1, &mut out[b * pixels * o..][..pixels * o]);
    }
    Ok(tensor_of(vec![n, win.h.output, win.w.output, o], out))
}

fn check_out_backprop(dy: &Tensor, n: usize, win: &Window, depth: usize) -> KResult<()> {
    let want = [n, win.h.output, win.w.output, depth];
    if dy.shape[..] != want {
        return Err(KernelError::invalid(format!(
            "out_backprop has shape {:?} but the convolution's output is {want:?}",
            dy.shape
        )));
    }
    Ok(())
}

/// A 4-element size operand of a gradient (`input_sizes`, `filter_sizes`): the shape of a
/// `T` output, checked against the tensor budget before anything is allocated.
fn sizes4<T: super::Elem>(t: &Tensor, what: &str) -> KResult<[usize; 4]> {
    let v = shape_values(t, what)?;
    super::budget(T::DTYPE, &v)?;
    <[usize; 4]>::try_from(v).map_err(|v| KernelError::invalid(format!("{what} must have 4 elements, got {v:?}")))
}

fn conv2d_backprop_input<T: Float + Gemm>(a: &WindowAttrs, sizes: &Tensor, f: &Tensor, dy: &Tensor) -> KResult<Tensor> {
    let (xd, fd) = (sizes4::<T>(sizes, "input_sizes")?, filter_dims(f)?);
    let win = conv_window(a, xd, fd)?;
    let [n, h, w, c] = xd;
    let o = fd[3];
    check_out_backprop(dy, n, &win, o)?;
    let (pixels, row) = (win.h.output * win.w.output, fd[0] * fd[1] * c);
    let (dys, fs) = (T::slice(dy), T::slice(f));
    let mut dx = vec![T::zero(); n * h * w * c];
    let mut col = vec![T::zero(); pixels * row];
    for b in 0..n {
        // col = dy_b [pixels, O] · filterᵀ [O, row].
        T::gemm(pixels, o, row, &dys[b * pixels * o..][..pixels * o], o as isize, 1, fs, 1, o as isize, &mut col);
        col2im(&col, c, &win, &mut dx[b * h * w * c..][..h * w * c]);
    }
    Ok(tensor_of(xd.to_vec(), dx))
}

fn conv2d_backprop_filter<T: Float + Gemm>(
    a: &WindowAttrs,
    x: &Tensor,
    sizes: &Tensor,
    dy: &Tensor,
) -> KResult<Tensor> {
    let (xd, fd) = (nhwc(x, "input")?, sizes4::<T>(sizes, "filter_sizes")?);
    let win = conv_window(a, xd, fd)?;
    let [n, h, w, c] = xd;
    let o = fd[3];
    check_out_backprop(dy, n, &win, o)?;
    let (pixels, row) = (win.h.output * win.w.output, fd[0] * fd[1] * c);
    let (xs, dys) = (T::slice(x), T::slice(dy));
    let mut df = vec![T::zero(); row * o];
    let mut part = vec![T::zero(); row * o];
    let mut col = vec![T::zero(); pixels * row];
    for b in 0..n {
        im2col(&xs[b * h * w * c..][..h * w * c], c, &win, &mut col);
        // part = colᵀ [row, pixels] · dy_b [pixels, O].
        T::gemm(row, pixels, o, &col, 1, row as isize, &dys[b * pixels * o..][..pixels * o], o as isize, 1, &mut part);
        for (p, &q) in df.iter_mut().zip(&part) {
            *p = p.add(q);
        }
    }
    Ok(tensor_of(fd.to_vec(), df))
}

/// The loops shared by the depthwise convolution and its gradients: calls
/// `f(x index, filter index, output index)` for every tap that reads input.
fn depthwise_taps(xd: [usize; 4], fd: [usize; 4], win: &Window, mut f: impl FnMut(usize, usize, usize)) {
    let [n, h, w, c] = xd;
    let [kh, kw, _, m] = fd;
    let (oh, ow) = (win.h.output, win.w.output);
    for b in 0..n {
        for oy in 0..oh {
            for ox in 0..ow {
                let out_base = ((b * oh + oy) * ow + ox) * c * m;
                for ky in 0..kh {
                    let Some(iy) = win.h.source(oy, ky) else { continue };
                    for kx in 0..kw {
                        let Some(ix) = win.w.source(ox, kx) else { continue };
                        let x_base = ((b * h + iy) * w + ix) * c;
                        let f_base = (ky * kw + kx) * c * m;
                        for ch in 0..c {
                            for q in 0..m {
                                f(x_base + ch, f_base + ch * m + q, out_base + ch * m + q);
                            }
                        }
                    }
                }
            }
        }
    }
}

fn depthwise<T: Float>(a: &WindowAttrs, x: &Tensor, f: &Tensor) -> KResult<Tensor> {
    let (xd, fd) = (nhwc(x, "input")?, filter_dims(f)?);
    let win = conv_window(a, xd, fd)?;
    let (xs, fs) = (T::slice(x), T::slice(f));
    let out_c = xd[3] * fd[3];
    let mut out = vec![T::zero(); xd[0] * win.h.output * win.w.output * out_c];
    depthwise_taps(xd, fd, &win, |xi, fi, oi| out[oi] = out[oi].add(xs[xi].mul(fs[fi])));
    Ok(tensor_of(vec![xd[0], win.h.output, win.w.output, out_c], out))
}

fn depthwise_backprop_input<T: Float>(a: &WindowAttrs, sizes: &Tensor, f: &Tensor, dy: &Tensor) -> KResult<Tensor> {
    let (xd, fd) = (sizes4::<T>(sizes, "input_sizes")?, filter_dims(f)?);
    let win = conv_window(a, xd, fd)?;
    check_out_backprop(dy, xd[0], &win, xd[3] * fd[3])?;
    let (dys, fs) = (T::slice(dy), T::slice(f));
    let mut dx = vec![T::zero(); xd.iter().product()];
    depthwise_taps(xd, fd, &win, |xi, fi, oi| dx[xi] = dx[xi].add(dys[oi].mul(fs[fi])));
    Ok(tensor_of(xd.to_vec(), dx))
}

fn depthwise_backprop_filter<T: Float>(a: &WindowAttrs, x: &Tensor, sizes: &Tensor, dy: &Tensor) -> KResult<Tensor> {
    let (xd, fd) = (nhwc(x, "input")?, sizes4::<T>(sizes, "filter_sizes")?);
    let win = conv_window(a, xd, fd)?;
    check_out_backprop(dy, xd[0], &win, xd[3] * fd[3])?;
    let (xs, dys) = (T::slice(x), T::slice(dy));
    let mut df = vec![T::zero(); fd.iter().product()];
    depthwise_taps(xd, fd, &win, |xi, fi, oi| df[fi] = df[fi].add(xs[xi].mul(dys[oi])));
    Ok(tensor_of(fd.to_vec(), df))
}

fn same_dtype(a: &Tensor, b: &Tensor) -> KResult<()> {
    super::check_native(a)?;
    super::check_native(b)?;
    if a.dtype != b.dtype {
        return Err(KernelError::invalid(format!("dtype mismatch: {} vs {}", a.dtype, b.dtype)));
    }
    Ok(())
}

/// Prepares a convolution kernel, or `None` if `node.op` is not one.
pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let op = node.op.as_str();
    if !matches!(
        op,
        "Conv2D"
            | "Conv2DBackpropInput"
            | "Conv2DBackpropFilter"
            | "DepthwiseConv2dNative"
            | "DepthwiseConv2dNativeBackpropInput"
            | "DepthwiseConv2dNativeBackpropFilter"
    ) {
        return Ok(None);
    }
    let a = WindowAttrs::parse(node, true)?;
    let f: PureFn = match op {
        "Conv2D" => Box::new(move |inp: Inputs| {
            arity(&inp, 2)?;
            same_dtype(&inp[0], &inp[1])?;
            one(dispatch_float!(inp[0].dtype, conv2d(&a, &inp[0], &inp[1]))?)
        }),
        "Conv2DBackpropInput" => Box::new(move |inp: Inputs| {
            arity(&inp, 3)?;
            same_dtype(&inp[1], &inp[2])?;
            one(dispatch_float!(inp[1].dtype, conv2d_backprop_input(&a, &inp[0], &inp[1], &inp[2]))?)
        }),
        "Conv2DBackpropFilter" => Box::new(move |inp: Inputs| {
            arity(&inp, 3)?;
            same_dtype(&inp[0], &inp[2])?;
            one(dispatch_float!(inp[0].dtype, conv2d_backprop_filter(&a, &inp[0], &inp[1], &inp[2]))?)
        }),
        "DepthwiseConv2dNative" => Box::new(move |inp: Inputs| {
            arity(&inp, 2)?;
            same_dtype(&inp[0], &inp[1])?;
            one(dispatch_float!(inp[0].dtype, depthwise(&a, &inp[0], &inp[1]))?)
        }),
        "DepthwiseConv2dNativeBackpropInput" => Box::new(move |inp: Inputs| {
            arity(&inp, 3)?;
            same_dtype(&inp[1], &inp[2])?;
            one(dispatch_float!(inp[1].dtype, depthwise_backprop_input(&a, &inp[0], &inp[1], &inp[2]))?)
        }),
        _ => Box::new(move |inp: Inputs| {
            arity(&inp, 3)?;
            same_dtype(&inp[0], &inp[2])?;
            one(dispatch_float!(inp[0].dtype, depthwise_backprop_filter(&a, &inp[0], &inp[1], &inp[2]))?)
        }),
    };
    Ok(Some(f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::tests_support::{node, run1};
    use autoclust_graph::AttrValue;

    fn attrs(padding: &str, strides: i64, dilation: i64) -> Vec<(&'static str, AttrValue)> {
        vec![
            ("T", AttrValue::Type(autoclust_graph::DType::Float64)),
            ("padding", AttrValue::S(padding.as_bytes().to_vec())),
            ("strides", AttrValue::List(autoclust_graph::ListValue::I(vec![1, strides, strides, 1]))),
            ("dilations", AttrValue::List(autoclust_graph::ListValue::I(vec![1, dilation, dilation, 1]))),
        ]
    }

    fn t(shape: &[usize], seed: u64) -> Tensor {
        let n: usize = shape.iter().product();
        let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let v = (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 33) as f64 / (1u64 << 31) as f64) - 0.5
            })
            .collect();
        Tensor::from_f64(shape.to_vec(), v).unwrap()
    }

    /// The definition, straight from the formula.
    fn naive(x: &Tensor, f: &Tensor, win: &Window) -> Vec<f64> {
        let [n, h, w, c] = nhwc(x, "x").unwrap();
        let [kh, kw, _, o] = filter_dims(f).unwrap();
        let (xs, fs) = (x.as_f64().unwrap(), f.as_f64().unwrap());
        let mut out = vec![0.0; n * win.h.output * win.w.output * o];
        for b in 0..n {
            for oy in 0..win.h.output {
                for ox in 0..win.w.output {
                    for oc in 0..o {
                        let mut s = 0.0;
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (oy * win.h.stride + ky * win.h.dilation) as i64 - win.h.pad_before as i64;
                                let ix = (ox * win.w.stride + kx * win.w.dilation) as i64 - win.w.pad_before as i64;
                                if iy < 0 || ix < 0 || iy >= h as i64 || ix >= w as i64 {
                                    continue;
                                }
                                for ic in 0..c {
                                    s += xs[((b * h + iy as usize) * w + ix as usize) * c + ic]
                                        * fs[((ky * kw + kx) * c + ic) * o + oc];
                                }
                            }
                        }
                        out[((b * win.h.output + oy) * win.w.output + ox) * o + oc] = s;
                    }
                }
            }
        }
        out
    }

    #[test]
    fn output_sizes_follow_tensorflow() {
        let w = Window::new((12, 12), (3, 3), (2, 2), (1, 1), &Padding::Same).unwrap();
        assert_eq!((w.h.output, w.h.pad_before), (6, 0));
        let w = Window::new((6, 6), (3, 3), (2, 2), (1, 1), &Padding::Same).unwrap();
        assert_eq!((w.h.output, w.h.pad_before), (3, 0));
        let w = Window::new((5, 5), (3, 3), (1, 1), (2, 2), &Padding::Same).unwrap();
        assert_eq!((w.h.output, w.h.pad_before), (5, 2));
        let w = Window::new((3, 3), (2, 2), (2, 2), (1, 1), &Padding::Valid).unwrap();
        assert_eq!(w.h.output, 1);
        let w = Window::new((6, 6), (2, 2), (1, 1), (1, 1), &Padding::Explicit([(1, 0), (0, 1)])).unwrap();
        assert_eq!((w.h.output, w.h.pad_before, w.w.output, w.w.pad_before), (6, 1, 6, 0));
    }

    #[test]
    fn conv2d_matches_the_definition() {
        for (pad, stride, dil) in [("SAME", 1, 1), ("VALID", 2, 1), ("SAME", 2, 1), ("SAME", 1, 2), ("VALID", 1, 2)] {
            let x = t(&[2, 7, 6, 3], 1);
            let f = t(&[3, 2, 3, 4], 2);
            let nd = node("Conv2D", &attrs(pad, stride, dil));
            let got = run1(&nd, &[x.clone(), f.clone()]).unwrap();
            let a = WindowAttrs::parse(&nd, true).unwrap();
            let win = conv_window(&a, [2, 7, 6, 3], [3, 2, 3, 4]).unwrap();
            let want = naive(&x, &f, &win);
            assert_eq!(got.shape, vec![2, win.h.output, win.w.output, 4]);
            for (g, w) in got.as_f64().unwrap().iter().zip(&want) {
                assert!((g - w).abs() < 1e-12, "{pad} {stride} {dil}");
            }
        }
    }

    /// `<conv(x, f), dy>` is bilinear: its derivatives in x and f are the
    /// two backprops, checked against each other through the inner product.
    #[test]
    fn backprops_are_adjoint_to_the_forward() {
        for (op, bi, bf, (fshape, yc)) in [
            ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", ([3, 3, 2, 3], 3)),
            (
                "DepthwiseConv2dNative",
                "DepthwiseConv2dNativeBackpropInput",
                "DepthwiseConv2dNativeBackpropFilter",
                ([3, 3, 2, 2], 4),
            ),
        ] {
            for (pad, stride) in [("SAME", 2), ("VALID", 1), ("SAME", 1)] {
                let x = t(&[2, 5, 6, 2], 3);
                let f = t(&fshape, 4);
                let at = attrs(pad, stride, 1);
                let y = run1(&node(op, &at), &[x.clone(), f.clone()]).unwrap();
                let dy = t(&y.shape, 5);
                assert_eq!(y.shape[3], yc);
                let dot = |a: &Tensor, b: &Tensor| -> f64 {
                    a.as_f64().unwrap().iter().zip(b.as_f64().unwrap()).map(|(p, q)| p * q).sum()
                };
                let sizes = |s: &[usize]| Tensor::from_i32(vec![4], s.iter().map(|&d| d as i32).collect()).unwrap();
                let dx = run1(&node(bi, &at), &[sizes(&x.shape), f.clone(), dy.clone()]).unwrap();
                let df = run1(&node(bf, &at), &[x.clone(), sizes(&f.shape), dy.clone()]).unwrap();
                let lhs = dot(&y, &dy);
                assert!((dot(&dx, &x) - lhs).abs() < 1e-10, "{op} {pad} input");
                assert!((dot(&df, &f) - lhs).abs() < 1e-10, "{op} {pad} filter");
            }
        }
    }

    #[test]
    fn nchw_is_refused() {
        let mut at = attrs("SAME", 1, 1);
        at.push(("data_format", AttrValue::S(b"NCHW".to_vec())));
        let e = prepare(&node("Conv2D", &at)).err().unwrap();
        assert!(e.to_string().contains("NCHW"), "{e}");
    }
}
