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
//! only its own filter slice, so a GEMM buys nothing at these sizes). All of them are the
//! compiler's code (`autoclust_numeric::conv`), which compiled clusters call too.
//!
//! Output sizes and padding follow TensorFlow's `GetWindowedOutputSize`:
//! `VALID` has no padding and `⌈(in − k_eff + 1) / stride⌉` outputs, `SAME`
//! has `⌈in / stride⌉` outputs with the padding split evenly (the extra
//! element after), and `EXPLICIT` takes the `explicit_paddings` attribute.
//! `k_eff = (k − 1)·dilation + 1`. Only NHWC is supported; NCHW is refused
//! with an error (TensorFlow's CPU kernels refuse most of it too).

use autoclust_graph::{Node, Tensor};

use super::elementwise::Float;
use super::{arity, dispatch_float, one, shape_values, tensor_of, Inputs, PureFn};
use crate::error::{KResult, KernelError};

#[cfg(test)]
use autoclust_numeric::conv::Padding;
use autoclust_numeric::conv::{self as shared, ConvElem, ConvError, ConvShape};
pub(crate) use autoclust_numeric::conv::{Window, WindowAttrs};

impl From<ConvError> for KernelError {
    fn from(e: ConvError) -> KernelError {
        match e {
            ConvError::Attr(a) => KernelError::Attr(a),
            ConvError::Invalid(m) => KernelError::invalid(m),
        }
    }
}

/// Refuses any data format but NHWC.
pub(crate) fn require_nhwc(node: &Node) -> KResult<()> {
    Ok(shared::require_nhwc(node)?)
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
    Ok(a.conv_window(input, filter)?)
}

/// The geometry of a depthwise convolution (the filter's in-depth is the input's).
fn depthwise_window(a: &WindowAttrs, input: [usize; 4], filter: [usize; 4]) -> KResult<Window> {
    Ok(a.depthwise_window(input, filter)?)
}

fn conv2d<T: Float + ConvElem>(a: &WindowAttrs, x: &Tensor, f: &Tensor) -> KResult<Tensor> {
    let (input, filter) = (nhwc(x, "input")?, filter_dims(f)?);
    let s = ConvShape { input, filter, win: conv_window(a, input, filter)? };
    // Padding and dilation can make the output and the im2col buffer far larger than the
    // operands: both checked before anything is allocated.
    super::budget(T::DTYPE, &s.output())?;
    super::budget(T::DTYPE, &s.im2col_shape())?;
    let out = shared::conv2d(&s, T::slice(x), T::slice(f), rayon::current_num_threads());
    Ok(tensor_of(s.output().to_vec(), out))
}

/// `Conv2D` on int32 (TensorFlow's CPU kernel has it): the definition's loop, each sum in
/// wrapping 32-bit arithmetic as Eigen's int32 contraction computes it — a ring, so the order
/// of the terms does not change the result. Grouped when the filter's in-depth is a fraction
/// of the input's.
fn conv2d_int32(a: &WindowAttrs, x: &Tensor, f: &Tensor) -> KResult<Tensor> {
    let (input, filter) = (nhwc(x, "input")?, filter_dims(f)?);
    let win = conv_window(a, input, filter)?;
    let ([n, h, w, c], [kh, kw, cg, o]) = (input, filter);
    let out_shape = [n, win.h.output, win.w.output, o];
    super::budget(autoclust_graph::DType::Int32, &out_shape)?;
    let (xs, fs) = (x.as_i32().ok_or(KernelError::DType(x.dtype))?, f.as_i32().ok_or(KernelError::DType(f.dtype))?);
    let og = o / (c / cg).max(1);
    let mut out = vec![0i32; out_shape.iter().product()];
    for b in 0..n {
        for oy in 0..win.h.output {
            for ox in 0..win.w.output {
                let at = ((b * win.h.output + oy) * win.w.output + ox) * o;
                for (oc, slot) in out[at..at + o].iter_mut().enumerate() {
                    let mut s = 0i32;
                    for ky in 0..kh {
                        let iy = (oy * win.h.stride + ky * win.h.dilation) as i64 - win.h.pad_before as i64;
                        if iy < 0 || iy >= h as i64 {
                            continue;
                        }
                        for kx in 0..kw {
                            let ix = (ox * win.w.stride + kx * win.w.dilation) as i64 - win.w.pad_before as i64;
                            if ix < 0 || ix >= w as i64 {
                                continue;
                            }
                            let row = ((b * h + iy as usize) * w + ix as usize) * c + oc / og * cg;
                            for ic in 0..cg {
                                s = s.wrapping_add(xs[row + ic].wrapping_mul(fs[((ky * kw + kx) * cg + ic) * o + oc]));
                            }
                        }
                    }
                    *slot = s;
                }
            }
        }
    }
    Ok(tensor_of(out_shape.to_vec(), out))
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

fn conv2d_backprop_input<T: Float + ConvElem>(
    a: &WindowAttrs,
    sizes: &Tensor,
    f: &Tensor,
    dy: &Tensor,
) -> KResult<Tensor> {
    let (input, filter) = (sizes4::<T>(sizes, "input_sizes")?, filter_dims(f)?);
    let s = ConvShape { input, filter, win: conv_window(a, input, filter)? };
    check_out_backprop(dy, input[0], &s.win, filter[3])?;
    super::budget(T::DTYPE, &s.im2col_shape())?;
    let dx = shared::conv2d_backprop_input(&s, T::slice(f), T::slice(dy), rayon::current_num_threads());
    Ok(tensor_of(input.to_vec(), dx))
}

fn conv2d_backprop_filter<T: Float + ConvElem>(
    a: &WindowAttrs,
    x: &Tensor,
    sizes: &Tensor,
    dy: &Tensor,
) -> KResult<Tensor> {
    let (input, filter) = (nhwc(x, "input")?, sizes4::<T>(sizes, "filter_sizes")?);
    let s = ConvShape { input, filter, win: conv_window(a, input, filter)? };
    check_out_backprop(dy, input[0], &s.win, filter[3])?;
    super::budget(T::DTYPE, &s.im2col_shape())?;
    let df = shared::conv2d_backprop_filter(&s, T::slice(x), T::slice(dy), rayon::current_num_threads());
    Ok(tensor_of(filter.to_vec(), df))
}

fn depthwise<T: Float + ConvElem>(a: &WindowAttrs, x: &Tensor, f: &Tensor) -> KResult<Tensor> {
    let (input, filter) = (nhwc(x, "input")?, filter_dims(f)?);
    let s = ConvShape { input, filter, win: depthwise_window(a, input, filter)? };
    super::budget(T::DTYPE, &s.depthwise_output())?;
    let out = shared::depthwise_conv2d(&s, T::slice(x), T::slice(f), rayon::current_num_threads());
    Ok(tensor_of(s.depthwise_output().to_vec(), out))
}

fn depthwise_backprop_input<T: Float + ConvElem>(
    a: &WindowAttrs,
    sizes: &Tensor,
    f: &Tensor,
    dy: &Tensor,
) -> KResult<Tensor> {
    let (input, filter) = (sizes4::<T>(sizes, "input_sizes")?, filter_dims(f)?);
    let s = ConvShape { input, filter, win: depthwise_window(a, input, filter)? };
    check_out_backprop(dy, input[0], &s.win, input[3] * filter[3])?;
    let dx = shared::depthwise_conv2d_backprop_input(&s, T::slice(f), T::slice(dy), rayon::current_num_threads());
    Ok(tensor_of(input.to_vec(), dx))
}

fn depthwise_backprop_filter<T: Float + ConvElem>(
    a: &WindowAttrs,
    x: &Tensor,
    sizes: &Tensor,
    dy: &Tensor,
) -> KResult<Tensor> {
    let (input, filter) = (nhwc(x, "input")?, sizes4::<T>(sizes, "filter_sizes")?);
    let s = ConvShape { input, filter, win: depthwise_window(a, input, filter)? };
    check_out_backprop(dy, input[0], &s.win, input[3] * filter[3])?;
    let df = shared::depthwise_conv2d_backprop_filter(&s, T::slice(x), T::slice(dy));
    Ok(tensor_of(filter.to_vec(), df))
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
            if inp[0].dtype == autoclust_graph::DType::Int32 {
                return one(conv2d_int32(&a, &inp[0], &inp[1])?);
            }
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

    /// The definition, straight from the formula (grouped when the filter's in-depth `cg`
    /// is a fraction of the input's: output channel `oc` reads input channels of group
    /// `oc / (o / groups)`).
    fn naive(x: &Tensor, f: &Tensor, win: &Window) -> Vec<f64> {
        let [n, h, w, c] = nhwc(x, "x").unwrap();
        let [kh, kw, cg, o] = filter_dims(f).unwrap();
        let og = o / (c / cg);
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
                                for ic in 0..cg {
                                    s += xs[((b * h + iy as usize) * w + ix as usize) * c + oc / og * cg + ic]
                                        * fs[((ky * kw + kx) * cg + ic) * o + oc];
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

    /// int32 `Conv2D` is the definition in wrapping 32-bit arithmetic (TensorFlow 2.21:
    /// `tf.nn.conv2d` of `reshape(range(1, 10), [1,3,3,1])` by a 2×2 filter of ones, VALID,
    /// gives `[[12, 16], [24, 28]]`); grouped, strided, dilated and padded geometries agree
    /// with the float64 definition on small integers, and a sum past 2³¹ wraps.
    #[test]
    fn int32_conv2d_is_the_definition_in_wrapping_arithmetic() {
        use autoclust_graph::DType;
        let i32t = |shape: &[usize], v: Vec<i32>| Tensor::from_i32(shape.to_vec(), v).unwrap();
        let mut at = attrs("VALID", 1, 1);
        at[0] = ("T", AttrValue::Type(DType::Int32));
        let x = i32t(&[1, 3, 3, 1], (1..10).collect());
        let y = run1(&node("Conv2D", &at), &[x, i32t(&[2, 2, 1, 1], vec![1; 4])]).unwrap();
        assert_eq!((y.shape.clone(), y.as_i32().unwrap().to_vec()), (vec![1, 2, 2, 1], vec![12, 16, 24, 28]));
        for (pad, stride, dil, xs, fs) in [
            ("SAME", 2, 1, [2, 5, 6, 4], [3, 3, 2, 6]),
            ("VALID", 1, 2, [1, 7, 6, 3], [2, 3, 3, 2]),
            ("SAME", 1, 1, [2, 4, 4, 2], [3, 2, 2, 3]),
        ] {
            let (xf, ff) = (t(&xs, 3), t(&fs, 4));
            let ints = |t: &Tensor| t.as_f64().unwrap().iter().map(|v| (v * 20.0).round() as i32).collect::<Vec<_>>();
            let (xi, fi) = (ints(&xf), ints(&ff));
            let mut at = attrs(pad, stride, dil);
            let want = {
                let xw = Tensor::from_f64(xs.to_vec(), xi.iter().map(|&v| v as f64).collect()).unwrap();
                let fw = Tensor::from_f64(fs.to_vec(), fi.iter().map(|&v| v as f64).collect()).unwrap();
                run1(&node("Conv2D", &at), &[xw, fw]).unwrap()
            };
            at[0] = ("T", AttrValue::Type(DType::Int32));
            let got = run1(&node("Conv2D", &at), &[i32t(&xs, xi), i32t(&fs, fi)]).unwrap();
            assert_eq!(got.shape, want.shape);
            let want: Vec<i32> = want.as_f64().unwrap().iter().map(|&v| v as i32).collect();
            assert_eq!(got.as_i32().unwrap(), &want[..], "{pad} stride {stride} dilation {dil}");
        }
        let big = run1(
            &node("Conv2D", &{
                let mut a = attrs("VALID", 1, 1);
                a[0] = ("T", AttrValue::Type(DType::Int32));
                a
            }),
            &[i32t(&[1, 1, 2, 1], vec![i32::MAX, 1]), i32t(&[1, 2, 1, 1], vec![1, 1])],
        )
        .unwrap();
        assert_eq!(big.as_i32().unwrap(), &[i32::MIN]);
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

    /// A grouped convolution (Keras `Conv2D(groups=G)`: the filter's in-depth is C/G) is G
    /// independent convolutions, each group's output channels reading its input channels.
    #[test]
    fn grouped_conv2d_matches_the_definition() {
        for (groups, fshape, pad, stride, dil) in [
            (2, [3, 2, 3, 4], "SAME", 1, 1),
            (3, [2, 2, 2, 6], "VALID", 2, 1),
            (6, [3, 3, 1, 6], "SAME", 1, 2),
            (2, [1, 3, 3, 2], "SAME", 2, 1),
        ] {
            let c = fshape[2] * groups;
            let x = t(&[3, 7, 6, c], 7);
            let f = t(&fshape, 8);
            let nd = node("Conv2D", &attrs(pad, stride, dil));
            let got = run1(&nd, &[x.clone(), f.clone()]).unwrap();
            let a = WindowAttrs::parse(&nd, true).unwrap();
            let win = conv_window(&a, [3, 7, 6, c], fshape).unwrap();
            let want = naive(&x, &f, &win);
            assert_eq!(got.shape, vec![3, win.h.output, win.w.output, fshape[3]]);
            for (g, w) in got.as_f64().unwrap().iter().zip(&want) {
                assert!((g - w).abs() < 1e-12, "groups {groups} {pad} {stride} {dil}: {g} vs {w}");
            }
        }
        // An input depth the filter's does not divide, and an output depth the groups do not.
        let nd = node("Conv2D", &attrs("SAME", 1, 1));
        let e = run1(&nd, &[t(&[1, 4, 4, 5], 1), t(&[3, 3, 2, 4], 2)]).unwrap_err();
        assert!(e.to_string().contains("evenly divisible by filter depth"), "{e}");
        let e = run1(&nd, &[t(&[1, 4, 4, 6], 1), t(&[3, 3, 2, 4], 2)]).unwrap_err();
        assert!(e.to_string().contains("number of groups"), "{e}");
    }

    /// `<conv(x, f), dy>` is bilinear: its derivatives in x and f are the
    /// two backprops, checked against each other through the inner product.
    #[test]
    fn backprops_are_adjoint_to_the_forward() {
        for (op, bi, bf, (fshape, yc)) in [
            ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", ([3, 3, 2, 3], 3)),
            // Grouped: two groups of one input channel, two output channels each.
            ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", ([3, 2, 1, 4], 4)),
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
