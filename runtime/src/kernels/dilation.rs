//! Grayscale morphological dilation (`dilation_ops.cc`): `Dilation2D` and its two gradients,
//! as `tf.nn.dilation2d` (and `erosion2d`, its negation around a turned filter) emit them.
//!
//! `Dilation2D(input [N, H, W, C], filter [FH, FW, C])` is, per output pixel and channel, the
//! maximum over the window's in-bounds taps of `input + filter` — a max-pool whose window
//! adds a per-tap offset — with `strides` and `rates` (the window's dilation) `[1, h, w, 1]` and
//! the window placed as a convolution's with VALID or SAME padding. A window with no tap
//! above the type's lowest value gives that lowest value (float: −max, not −∞).
//!
//! Each gradient sends `out_backprop` to one tap per output pixel and channel: the first
//! maximum in row-major tap order (a later equal value does not replace it). When no tap
//! wins (an empty window, or NaN and −∞ values), TensorFlow's defaults apply: the input
//! gradient goes to the window's clamped top-left pixel if it lies in the image, the filter
//! gradient to tap (0, 0).

use autoclust_graph::{DType, Node, Tensor};
use autoclust_numeric::conv::{hw_attr, padding_attr, Padding, Window};

use super::conv::nhwc;
use super::elementwise::Num;
use super::{arity, dispatch_num, one, tensor_of, Inputs, PureFn};
use crate::error::{KResult, KernelError};

#[derive(Clone, Copy, Debug)]
enum Kind {
    Forward,
    Input,
    Filter,
}

#[derive(Clone, Copy, Debug)]
struct Attrs {
    strides: (usize, usize),
    rates: (usize, usize),
    same: bool,
}

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let kind = match node.op.as_str() {
        "Dilation2D" => Kind::Forward,
        "Dilation2DBackpropInput" => Kind::Input,
        "Dilation2DBackpropFilter" => Kind::Filter,
        _ => return Ok(None),
    };
    let same = match padding_attr(node)? {
        Padding::Same => true,
        Padding::Valid => false,
        Padding::Explicit(_) => return Err(KernelError::invalid(format!("{} takes VALID or SAME padding", node.op))),
    };
    let a = Attrs { strides: hw_attr(node, "strides", true)?, rates: hw_attr(node, "rates", true)?, same };
    Ok(Some(Box::new(move |inp: Inputs| {
        arity(&inp, if matches!(kind, Kind::Forward) { 2 } else { 3 })?;
        if inp.iter().any(|t| t.dtype != inp[0].dtype) {
            return Err(KernelError::invalid("input, filter and out_backprop must share one dtype"));
        }
        let dt = inp[0].dtype;
        one(match kind {
            Kind::Forward => dispatch_num!(dt, forward(&a, &inp[0], &inp[1]))?,
            _ => dispatch_num!(dt, backprop(&a, kind, &inp[0], &inp[1], &inp[2]))?,
        })
    })))
}

/// The window over `input` of the filter `[FH, FW, C]`, after TensorFlow's checks.
fn window(a: &Attrs, input: &Tensor, filter: &Tensor) -> KResult<([usize; 4], [usize; 2], Window)> {
    let d = nhwc(input, "input")?;
    let &[fh, fw, fc] = filter.shape.as_slice() else {
        return Err(KernelError::invalid(format!("filter must be 3-dimensional: {:?}", filter.shape)));
    };
    if fc != d[3] {
        return Err(KernelError::invalid(format!("input and filter must have the same depth: {} vs {fc}", d[3])));
    }
    let padding = if a.same { Padding::Same } else { Padding::Valid };
    let win = Window::new((d[1], d[2]), (fh, fw), a.strides, a.rates, &padding)?;
    Ok((d, [fh, fw], win))
}

/// The type's lowest value (Eigen's `NumTraits::lowest`).
fn lowest<T: Num>() -> T {
    match T::DTYPE {
        DType::Float32 => T::from_f64(-f64::from(f32::MAX)),
        DType::Float64 => T::from_f64(-f64::MAX),
        _ => T::from_f64(f64::NEG_INFINITY),
    }
}

/// For output pixel `(oy, ox)` of image `b`, channel `c`: the window's maximum of input +
/// filter and the first tap `(ky, kx)` reaching it, if any exceeds the lowest value.
#[allow(clippy::too_many_arguments)]
fn best<T: Num>(
    win: &Window,
    d: [usize; 4],
    k: [usize; 2],
    x: &[T],
    f: &[T],
    (b, oy, ox, c): (usize, usize, usize, usize),
) -> (T, Option<(usize, usize)>) {
    let (mut cur, mut at) = (lowest::<T>(), None);
    for ky in 0..k[0] {
        let Some(iy) = win.h.source(oy, ky) else { continue };
        for kx in 0..k[1] {
            let Some(ix) = win.w.source(ox, kx) else { continue };
            let v = x[((b * d[1] + iy) * d[2] + ix) * d[3] + c].add(f[(ky * k[1] + kx) * d[3] + c]);
            if v > cur {
                cur = v;
                at = Some((ky, kx));
            }
        }
    }
    (cur, at)
}

fn forward<T: Num>(a: &Attrs, input: &Tensor, filter: &Tensor) -> KResult<Tensor> {
    let (d, k, win) = window(a, input, filter)?;
    let (oh, ow) = (win.h.output, win.w.output);
    let (x, f) = (T::slice(input), T::slice(filter));
    let mut out = Vec::with_capacity(d[0] * oh * ow * d[3]);
    for b in 0..d[0] {
        for oy in 0..oh {
            for ox in 0..ow {
                for c in 0..d[3] {
                    out.push(best(&win, d, k, x, f, (b, oy, ox, c)).0);
                }
            }
        }
    }
    Ok(tensor_of(vec![d[0], oh, ow, d[3]], out))
}

fn backprop<T: Num>(a: &Attrs, kind: Kind, input: &Tensor, filter: &Tensor, dy: &Tensor) -> KResult<Tensor> {
    let (d, k, win) = window(a, input, filter)?;
    let (oh, ow) = (win.h.output, win.w.output);
    if dy.shape != [d[0], oh, ow, d[3]] {
        return Err(KernelError::invalid(format!(
            "out_backprop has incompatible size: {:?}, want {:?}",
            dy.shape,
            [d[0], oh, ow, d[3]]
        )));
    }
    let (x, f, g) = (T::slice(input), T::slice(filter), T::slice(dy));
    let zero = T::from_f64(0.0);
    let mut out = vec![zero; if matches!(kind, Kind::Filter) { filter.num_elements() } else { x.len() }];
    for b in 0..d[0] {
        for oy in 0..oh {
            for ox in 0..ow {
                for c in 0..d[3] {
                    let (_, at) = best(&win, d, k, x, f, (b, oy, ox, c));
                    let grad = g[((b * oh + oy) * ow + ox) * d[3] + c];
                    let slot = match kind {
                        Kind::Filter => {
                            let (ky, kx) = at.unwrap_or((0, 0));
                            Some((ky * k[1] + kx) * d[3] + c)
                        }
                        _ => {
                            let (iy, ix) = match at {
                                Some((ky, kx)) => (win.h.source(oy, ky), win.w.source(ox, kx)),
                                // The window's first row and column, clamped to the image.
                                None => {
                                    let start = |o: usize, stride: usize, pad: usize| (o * stride).saturating_sub(pad);
                                    let y = start(oy, win.h.stride, win.h.pad_before);
                                    let x = start(ox, win.w.stride, win.w.pad_before);
                                    ((y < d[1]).then_some(y), (x < d[2]).then_some(x))
                                }
                            };
                            iy.zip(ix).map(|(iy, ix)| ((b * d[1] + iy) * d[2] + ix) * d[3] + c)
                        }
                    };
                    if let Some(s) = slot {
                        out[s] = out[s].add(grad);
                    }
                }
            }
        }
    }
    Ok(tensor_of(if matches!(kind, Kind::Filter) { filter.shape.clone() } else { input.shape.clone() }, out))
}

#[cfg(test)]
mod tests {
    use crate::kernels::tests_support::{node, run1};
    use autoclust_graph::{AttrValue, ListValue, Tensor};

    /// `Dilation2D` and both gradients against TensorFlow 2.21 (`tf.raw_ops`, eager), SAME with
    /// a row stride and a column rate, VALID with a column stride and a row rate; ties and the
    /// first maximum included (the values repeat), bit for bit. Then TensorFlow's checks.
    /// Padding, strides, rates, output shape, output, input gradient, filter gradient.
    type Case = (&'static str, [i64; 2], [i64; 2], Vec<usize>, &'static [f64], &'static [f64], &'static [f64]);

    #[test]
    fn dilation_and_its_gradients_match_tensorflow() {
        let x =
            Tensor::from_f32(vec![2, 5, 6, 2], (0..120).map(|i| ((i * 37 % 11) as f32 - 4.0) * 0.5).collect()).unwrap();
        let f = Tensor::from_f32(vec![3, 2, 2], (0..12).map(|i| ((i * 7 % 5) as f32 - 2.0) * 0.25).collect()).unwrap();
        #[rustfmt::skip]
        let cases: [Case; 2] = [
            ("SAME", [2, 1], [1, 2], vec![2, 3, 6, 2], &[2.0, 0.5, 2.0, 3.0, 2.25, 3.0, 3.0, 2.0, 1.5, 3.25, 3.25, 1.75, 2.0, 3.0, 3.0, 3.0, 3.0, 2.75, 2.0, 3.25, 3.25, 3.0, 1.75, 1.5, 3.0, 1.5, 3.0, 2.75, 2.0, 1.25, 3.25, 3.0, 2.5, 1.5, 0.25, 1.5, 2.5, 3.5, 2.75, 2.0, 2.75, 2.5, 2.0, 1.0, 2.0, 3.0, 2.25, 0.75, 3.5, 2.0, 2.75, 2.5, 2.5, 1.75, 2.0, 3.0, 3.0, 3.0, 2.25, 2.0, 2.0, 0.5, 2.5, 1.75, 1.0, 3.0, 3.0, 2.0, 3.0, 2.75, 2.0, 0.5], &[0.0, 0.0, 6.0, 0.0, 0.0, 5.0, 0.0, 0.0, 11.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 2.0, 9.0, 0.0, 0.0, 14.0, 0.0, 8.0, 0.0, 0.0, 0.0, 0.0, 0.0, 7.0, 0.0, 0.0, 10.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 11.0, 0.0, 0.0, 19.0, 0.0, 8.0, 0.0, 0.0, 5.0, 0.0, 0.0, 0.0, 0.0, 5.0, 9.0, 0.0, 0.0, 0.0, 7.0, 1.0, 0.0, 0.0, 4.0, 0.0, 0.0, 10.0, 0.0, 7.0, 0.0, 0.0, 6.0, 0.0, 0.0, 4.0, 0.0, 0.0, 19.0, 0.0, 0.0, 0.0, 0.0, 5.0, 0.0, 6.0, 4.0, 0.0, 0.0, 3.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 11.0, 0.0, 0.0, 9.0, 0.0, 7.0, 0.0, 0.0, 6.0, 0.0, 0.0, 14.0, 0.0, 0.0, 9.0, 0.0, 0.0, 0.0, 6.0, 0.0, 0.0, 0.0, 3.0, 0.0, 2.0, 6.0, 0.0], &[20.0, 19.0, 27.0, 26.0, 37.0, 20.0, 26.0, 45.0, 11.0, 20.0, 20.0, 12.0]),
            ("VALID", [1, 2], [2, 1], vec![2, 1, 3, 2], &[2.5, 3.0, 3.0, 2.5, 2.5, 2.5, 2.0, 2.75, 2.0, 2.5, 2.5, 2.25], &[0.0, 0.0, 1.0, 0.0, 0.0, 4.0, 0.0, 0.0, 5.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 0.0, 6.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 7.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 4.0, 0.0], &[12.0, 4.0, 1.0, 6.0, 0.0, 0.0, 5.0, 8.0, 0.0, 0.0, 4.0, 3.0]),
        ];
        for (pad, s, r, shape, y, dx, df) in cases {
            let attrs = [
                ("strides", AttrValue::List(ListValue::I(vec![1, s[0], s[1], 1]))),
                ("rates", AttrValue::List(ListValue::I(vec![1, r[0], r[1], 1]))),
                ("padding", AttrValue::S(pad.as_bytes().to_vec())),
            ];
            let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<_>>();
            let got = run1(&node("Dilation2D", &attrs), &[x.clone(), f.clone()]).unwrap();
            assert_eq!((got.shape.clone(), got.as_f32().unwrap().to_vec()), (shape.clone(), f32s(y)), "{pad}");
            let n: usize = shape.iter().product();
            let dy = Tensor::from_f32(shape, (0..n).map(|i| (i % 7) as f32 + 1.0).collect()).unwrap();
            let gx = run1(&node("Dilation2DBackpropInput", &attrs), &[x.clone(), f.clone(), dy.clone()]).unwrap();
            assert_eq!(gx.as_f32().unwrap(), f32s(dx), "{pad} input gradient");
            let gf = run1(&node("Dilation2DBackpropFilter", &attrs), &[x.clone(), f.clone(), dy]).unwrap();
            assert_eq!(gf.as_f32().unwrap(), f32s(df), "{pad} filter gradient");
            assert_eq!(gf.shape, [3, 2, 2]);
        }
        let valid = [
            ("strides", AttrValue::List(ListValue::I(vec![1, 1, 1, 1]))),
            ("rates", AttrValue::List(ListValue::I(vec![1, 1, 1, 1]))),
            ("padding", AttrValue::S(b"VALID".to_vec())),
        ];
        let deep = Tensor::from_f32(vec![3, 2, 3], vec![0.0; 18]).unwrap();
        let e = run1(&node("Dilation2D", &valid), &[x.clone(), deep]).unwrap_err().to_string();
        assert!(e.contains("input and filter must have the same depth: 2 vs 3"), "{e}");
        let wrong = Tensor::from_f32(vec![2, 1, 1, 2], vec![0.0; 4]).unwrap();
        let e = run1(&node("Dilation2DBackpropInput", &valid), &[x, f, wrong]).unwrap_err().to_string();
        assert!(e.contains("out_backprop has incompatible size"), "{e}");
    }
}
