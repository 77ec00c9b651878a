//! 3-D window ops in NDHWC (Keras `Conv3D`, `MaxPooling3D`, `AveragePooling3D`):
//! `Conv3D` (grouped when the filter's in-depth divides the input depth, as TensorFlow's
//! shape function allows), `Conv3DBackpropInputV2`, `Conv3DBackpropFilterV2`, `MaxPool3D`,
//! `MaxPool3DGrad`, `AvgPool3D` and `AvgPool3DGrad`, float32 and float64.
//!
//! The convolutions are `autoclust_numeric::conv::conv3d` and its gradients (vol2col and the
//! shared GEMM, as the 2-D ones: a direct loop over the taps in float64 ran 6–8× slower than
//! TensorFlow); float32 computes in float32, as TensorFlow's kernels do. The pooling ops are
//! direct loops over the window taps. The compiler does not lower these ops (they are host
//! compute steps of a cluster's plan). Geometry follows
//! TensorFlow's `GetWindowedOutputSize`: `VALID` has no padding and
//! `⌈(in − k_eff + 1) / stride⌉` outputs, `SAME` has `⌈in / stride⌉` outputs with the padding
//! split evenly (the extra element after). Pooling never reads padding: a max is over the
//! window's taps inside the input, an average divides by their count. `MaxPool3DGrad` is
//! TensorFlow's CPU kernel: each output's gradient goes to every tap of its window whose
//! input equals the output (all of them on a tie).

use autoclust_graph::{AttrValue, DType, Node, Tensor};

use super::elementwise::Float;
use super::{arity, dispatch_float, one, shape_values, tensor_of, Inputs, PureFn};
use crate::error::{KResult, KernelError};
use autoclust_numeric::conv::{self as shared, ConvElem, VolumeShape};

/// One spatial axis of a 3-D window op: the 2-D ops' axis ([`Axis::windowed`]).
use autoclust_numeric::conv::Axis;

/// The attributes of a 3-D window op.
#[derive(Clone, Debug)]
struct Attrs {
    strides: [usize; 3],
    dilations: [usize; 3],
    /// `ksize` of a pooling op.
    ksize: [usize; 3],
    same: bool,
}

/// The spatial entries of a 5-element NDHWC attribute list (batch and depth entries 1).
fn spatial(node: &Node, name: &str, required: bool) -> KResult<[usize; 3]> {
    let v = match node.attr(name).map(AttrValue::as_int_list) {
        None if !required => return Ok([1, 1, 1]),
        None | Some(None) => return Err(KernelError::Attr(name.into())),
        Some(Some(v)) => v,
    };
    let pos = |x: i64| usize::try_from(x).ok().filter(|&x| x > 0);
    match v[..] {
        [1, a, b, c, 1] => match (pos(a), pos(b), pos(c)) {
            (Some(a), Some(b), Some(c)) => Ok([a, b, c]),
            _ => Err(KernelError::invalid(format!("{name} must be positive, got {v:?}"))),
        },
        _ => Err(KernelError::invalid(format!(
            "{} over the batch or depth dimension is not supported ({name} = {v:?}, 5 values wanted)",
            node.op
        ))),
    }
}

impl Attrs {
    fn parse(node: &Node, pool: bool) -> KResult<Attrs> {
        match node.attr("data_format").map(AttrValue::as_str) {
            None | Some(Some("NDHWC")) => {}
            Some(f) => {
                return Err(KernelError::invalid(format!(
                    "{} with data_format {} is not supported (only NDHWC)",
                    node.op,
                    f.unwrap_or("?")
                )))
            }
        }
        let same = match node.attr("padding").and_then(AttrValue::as_str) {
            Some("SAME") => true,
            Some("VALID") => false,
            Some(p) => return Err(KernelError::invalid(format!("unsupported padding {p}"))),
            None => return Err(KernelError::Attr("padding".into())),
        };
        Ok(Attrs {
            strides: spatial(node, "strides", true)?,
            dilations: if pool { [1, 1, 1] } else { spatial(node, "dilations", false)? },
            ksize: if pool { spatial(node, "ksize", true)? } else { [1, 1, 1] },
            same,
        })
    }

    fn axes(&self, input: [usize; 3], kernel: [usize; 3]) -> KResult<[Axis; 3]> {
        let ax = |i: usize| Axis::windowed(input[i], kernel[i], self.strides[i], self.dilations[i], self.same);
        Ok([ax(0)?, ax(1)?, ax(2)?])
    }
}

fn dims5(shape: &[usize], what: &str) -> KResult<[usize; 5]> {
    <[usize; 5]>::try_from(shape)
        .map_err(|_| KernelError::invalid(format!("{what} must be 5-dimensional, got shape {shape:?}")))
}

/// The values of a float32/float64 operand.
fn floats(t: &Tensor) -> KResult<Vec<f64>> {
    super::check_native(t)?;
    match t.dtype {
        DType::Float32 | DType::Float64 => Ok(t.to_f64_vec().ok_or(KernelError::DType(t.dtype))?),
        d => Err(KernelError::DType(d)),
    }
}

fn float_tensor(dtype: DType, shape: Vec<usize>, v: Vec<f64>) -> KResult<Tensor> {
    let t = match dtype {
        DType::Float32 => Tensor::from_f32(shape, v.into_iter().map(|x| x as f32).collect()),
        _ => Tensor::from_f64(shape, v),
    };
    t.map_err(|e| KernelError::invalid(e.to_string()))
}

/// Calls `f(output position, input position, tap)` (spatial indices, within one image)
/// for every tap of every window that reads input, in a fixed order.
fn taps(ax: &[Axis; 3], mut f: impl FnMut(usize, usize, usize)) {
    let [d, h, w] = ax;
    for od in 0..d.output {
        for oh in 0..h.output {
            for ow in 0..w.output {
                let o = (od * h.output + oh) * w.output + ow;
                for kd in d.inside(od) {
                    let Some(id) = d.source(od, kd) else { continue };
                    for kh in h.inside(oh) {
                        let Some(ih) = h.source(oh, kh) else { continue };
                        for kw in w.inside(ow) {
                            let Some(iw) = w.source(ow, kw) else { continue };
                            // The tap index (a pooling window's may be huge, and pooling
                            // ignores it).
                            let tap =
                                kd.wrapping_mul(h.kernel).wrapping_add(kh).wrapping_mul(w.kernel).wrapping_add(kw);
                            f(o, (id * h.input + ih) * w.input + iw, tap);
                        }
                    }
                }
            }
        }
    }
}

fn spatial_count(ax: &[Axis; 3]) -> (usize, usize) {
    (ax.iter().map(|a| a.input).product(), ax.iter().map(|a| a.output).product())
}

/// A convolution's geometry, input `[N,D,H,W,C]` by filter `[KD,KH,KW,C/G,O]`, with the
/// depths TensorFlow's shape function checks: the filter's in-depth divides the input's and
/// the group count divides the output depth.
fn volume_shape(a: &Attrs, input: [usize; 5], filter: [usize; 5]) -> KResult<VolumeShape> {
    let (c, cg, o) = (input[4], filter[3], filter[4]);
    if cg == 0 || !c.is_multiple_of(cg) || c == 0 {
        return Err(KernelError::invalid(format!("input depth must be evenly divisible by filter depth: {c} vs {cg}")));
    }
    let groups = c / cg;
    if !o.is_multiple_of(groups) {
        return Err(KernelError::invalid(format!(
            "output depth must be evenly divisible by number of groups: {o} vs {groups}"
        )));
    }
    let ax = a.axes([input[1], input[2], input[3]], [filter[0], filter[1], filter[2]])?;
    Ok(VolumeShape { input, filter, ax })
}

fn check_out_backprop(dy: &Tensor, want: &[usize]) -> KResult<()> {
    if dy.shape[..] != want[..] {
        return Err(KernelError::invalid(format!(
            "out_backprop has shape {:?} but the convolution's output is {want:?}",
            dy.shape
        )));
    }
    Ok(())
}

fn same_float(a: &Tensor, b: &Tensor) -> KResult<DType> {
    if a.dtype != b.dtype {
        return Err(KernelError::invalid(format!("dtype mismatch: {} vs {}", a.dtype, b.dtype)));
    }
    Ok(a.dtype)
}

fn sizes5(t: &Tensor, what: &str, dtype: DType) -> KResult<[usize; 5]> {
    let v = shape_values(t, what)?;
    super::budget(dtype, &v)?;
    <[usize; 5]>::try_from(v).map_err(|v| KernelError::invalid(format!("{what} must have 5 elements, got {v:?}")))
}

fn conv3d<T: Float + ConvElem>(a: &Attrs, x: &Tensor, f: &Tensor) -> KResult<Tensor> {
    super::check_native(x)?;
    super::check_native(f)?;
    let s = volume_shape(a, dims5(&x.shape, "input")?, dims5(&f.shape, "filter")?)?;
    // Padding and dilation can make the output and the column buffer far larger than the
    // operands: both checked before anything is allocated.
    super::budget(T::DTYPE, &s.output())?;
    super::budget(T::DTYPE, &s.column_shape())?;
    let out = shared::conv3d(&s, T::slice(x), T::slice(f), rayon::current_num_threads());
    Ok(tensor_of(s.output().to_vec(), out))
}

fn conv3d_backprop_input<T: Float + ConvElem>(a: &Attrs, sizes: &Tensor, f: &Tensor, dy: &Tensor) -> KResult<Tensor> {
    super::check_native(f)?;
    super::check_native(dy)?;
    let input = sizes5(sizes, "input_sizes", T::DTYPE)?;
    let s = volume_shape(a, input, dims5(&f.shape, "filter")?)?;
    check_out_backprop(dy, &s.output())?;
    super::budget(T::DTYPE, &s.input_gradient_column_shape())?;
    let dx = shared::conv3d_backprop_input(&s, T::slice(f), T::slice(dy), rayon::current_num_threads());
    Ok(tensor_of(input.to_vec(), dx))
}

fn conv3d_backprop_filter<T: Float + ConvElem>(a: &Attrs, x: &Tensor, sizes: &Tensor, dy: &Tensor) -> KResult<Tensor> {
    super::check_native(x)?;
    super::check_native(dy)?;
    let filter = sizes5(sizes, "filter_sizes", T::DTYPE)?;
    let s = volume_shape(a, dims5(&x.shape, "input")?, filter)?;
    check_out_backprop(dy, &s.output())?;
    super::budget(T::DTYPE, &s.column_shape())?;
    let df = shared::conv3d_backprop_filter(&s, T::slice(x), T::slice(dy), rayon::current_num_threads());
    Ok(tensor_of(filter.to_vec(), df))
}

/// A pooling op's geometry over input `[N,D,H,W,C]`.
struct Pool {
    n: usize,
    c: usize,
    ax: [Axis; 3],
}

impl Pool {
    fn new(a: &Attrs, input: [usize; 5]) -> KResult<Pool> {
        Ok(Pool { n: input[0], c: input[4], ax: a.axes([input[1], input[2], input[3]], a.ksize)? })
    }
    fn output(&self) -> Vec<usize> {
        vec![self.n, self.ax[0].output, self.ax[1].output, self.ax[2].output, self.c]
    }
    /// Calls `f(input index, output index)` for every (tap, channel) of every window, window by
    /// window.
    fn each(&self, mut f: impl FnMut(usize, usize)) {
        let (ins, outs) = spatial_count(&self.ax);
        let c = self.c;
        for b in 0..self.n {
            taps(&self.ax, |op, ip, _| {
                let (xb, yb) = ((b * ins + ip) * c, (b * outs + op) * c);
                for ch in 0..c {
                    f(xb + ch, yb + ch);
                }
            });
        }
    }
    /// How many taps of each output window read input (per output position and channel).
    fn counts(&self) -> Vec<f64> {
        let mut n = vec![0.0; self.output().iter().product()];
        self.each(|_, oi| n[oi] += 1.0);
        n
    }
}

fn max_pool3d(a: &Attrs, x: &Tensor) -> KResult<Tensor> {
    let p = Pool::new(a, dims5(&x.shape, "input")?)?;
    let out_shape = p.output();
    let len = super::budget(x.dtype, &out_shape)?;
    let xv = floats(x)?;
    // TensorFlow's 3-D reducer keeps the running maximum only while it is greater than the
    // next element, from −∞: a NaN replaces it and a later number replaces a NaN (TensorFlow
    // 2.21: a window `[NaN, 5, 4, −1, …]` pools to 5, one of NaNs to NaN, one of −∞ to −∞).
    let mut out = vec![f64::NEG_INFINITY; len];
    p.each(|xi, oi| {
        if out[oi].partial_cmp(&xv[xi]) != Some(std::cmp::Ordering::Greater) {
            out[oi] = xv[xi];
        }
    });
    float_tensor(x.dtype, out_shape, out)
}

fn max_pool3d_grad(a: &Attrs, x: &Tensor, y: &Tensor, dy: &Tensor) -> KResult<Tensor> {
    let p = Pool::new(a, dims5(&x.shape, "orig_input")?)?;
    let out_shape = p.output();
    if y.shape != out_shape || dy.shape != out_shape {
        return Err(KernelError::invalid(format!(
            "orig_output {:?} and grad {:?} must have the pooled shape {out_shape:?}",
            y.shape, dy.shape
        )));
    }
    let (xv, yv, g) = (floats(x)?, floats(y)?, floats(dy)?);
    let mut dx = vec![0.0; xv.len()];
    p.each(|xi, oi| {
        if xv[xi] == yv[oi] {
            dx[xi] += g[oi];
        }
    });
    float_tensor(dy.dtype, x.shape.clone(), dx)
}

fn avg_pool3d(a: &Attrs, x: &Tensor) -> KResult<Tensor> {
    let p = Pool::new(a, dims5(&x.shape, "input")?)?;
    let out_shape = p.output();
    let len = super::budget(x.dtype, &out_shape)?;
    let xv = floats(x)?;
    let mut out = vec![0.0; len];
    p.each(|xi, oi| out[oi] += xv[xi]);
    for (o, n) in out.iter_mut().zip(p.counts()) {
        *o /= n;
    }
    float_tensor(x.dtype, out_shape, out)
}

fn avg_pool3d_grad(a: &Attrs, sizes: &Tensor, dy: &Tensor) -> KResult<Tensor> {
    let input = sizes5(sizes, "orig_input_shape", dy.dtype)?;
    let p = Pool::new(a, input)?;
    if dy.shape != p.output() {
        return Err(KernelError::invalid(format!(
            "grad has shape {:?} but the pooled shape is {:?}",
            dy.shape,
            p.output()
        )));
    }
    let g = floats(dy)?;
    let counts = p.counts();
    let mut dx = vec![0.0; input.iter().product()];
    p.each(|xi, oi| dx[xi] += g[oi] / counts[oi]);
    float_tensor(dy.dtype, input.to_vec(), dx)
}

/// Prepares a 3-D window kernel, or `None` if `node.op` is not one.
pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let op = node.op.as_str();
    let pool = match op {
        "Conv3D" | "Conv3DBackpropInputV2" | "Conv3DBackpropFilterV2" => false,
        "MaxPool3D" | "MaxPool3DGrad" | "AvgPool3D" | "AvgPool3DGrad" => true,
        _ => return Ok(None),
    };
    let a = Attrs::parse(node, pool)?;
    let f: PureFn = match op {
        "Conv3D" => Box::new(move |inp: Inputs| {
            arity(&inp, 2)?;
            same_float(&inp[0], &inp[1])?;
            one(dispatch_float!(inp[0].dtype, conv3d(&a, &inp[0], &inp[1]))?)
        }),
        "Conv3DBackpropInputV2" => Box::new(move |inp: Inputs| {
            arity(&inp, 3)?;
            same_float(&inp[1], &inp[2])?;
            one(dispatch_float!(inp[1].dtype, conv3d_backprop_input(&a, &inp[0], &inp[1], &inp[2]))?)
        }),
        "Conv3DBackpropFilterV2" => Box::new(move |inp: Inputs| {
            arity(&inp, 3)?;
            same_float(&inp[0], &inp[2])?;
            one(dispatch_float!(inp[0].dtype, conv3d_backprop_filter(&a, &inp[0], &inp[1], &inp[2]))?)
        }),
        "MaxPool3D" => Box::new(move |inp: Inputs| {
            arity(&inp, 1)?;
            one(max_pool3d(&a, &inp[0])?)
        }),
        "MaxPool3DGrad" => Box::new(move |inp: Inputs| {
            arity(&inp, 3)?;
            one(max_pool3d_grad(&a, &inp[0], &inp[1], &inp[2])?)
        }),
        "AvgPool3D" => Box::new(move |inp: Inputs| {
            arity(&inp, 1)?;
            one(avg_pool3d(&a, &inp[0])?)
        }),
        _ => Box::new(move |inp: Inputs| {
            arity(&inp, 2)?;
            one(avg_pool3d_grad(&a, &inp[0], &inp[1])?)
        }),
    };
    Ok(Some(f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::tests_support::{node, run1};
    use autoclust_graph::ListValue;

    fn attrs(padding: &str, strides: [i64; 3], ksize: Option<[i64; 3]>) -> Vec<(&'static str, AttrValue)> {
        let five = |v: [i64; 3]| AttrValue::List(ListValue::I(vec![1, v[0], v[1], v[2], 1]));
        let mut a = vec![
            ("T", AttrValue::Type(DType::Float64)),
            ("padding", AttrValue::S(padding.as_bytes().to_vec())),
            ("strides", five(strides)),
        ];
        if let Some(k) = ksize {
            a.push(("ksize", five(k)));
        }
        a
    }

    fn t(shape: &[usize], seed: u64) -> Tensor {
        let n: usize = shape.iter().product();
        let v = (0..n as u64).map(|i| (((i * 7919 + seed * 104729) % 97) as f64 - 48.0) / 16.0).collect();
        Tensor::from_f64(shape.to_vec(), v).unwrap()
    }

    /// The taps [`Axis::inside`] computes are exactly those [`Axis::source`] accepts.
    #[test]
    fn inside_taps_are_the_reading_ones() {
        for (input, kernel, stride, dilation, same) in
            [(5, 3, 1, 1, true), (7, 4, 2, 1, true), (6, 3, 1, 2, true), (4, 9, 1, 1, true), (8, 3, 3, 1, false)]
        {
            let a = Axis::windowed(input, kernel, stride, dilation, same).unwrap();
            for o in 0..a.output {
                let want: Vec<usize> = (0..kernel).filter(|&k| a.source(o, k).is_some()).collect();
                assert_eq!(a.inside(o).collect::<Vec<_>>(), want, "{input} {kernel} {stride} {dilation} {o}");
            }
        }
        // A huge window over a small input is cheap.
        let a = Axis::windowed(3, 1 << 40, 1, 1, true).unwrap();
        assert_eq!(a.inside(0).len(), 3);
    }

    /// `<conv(x, f), dy>` is bilinear: its derivatives in x and f are the two backprops
    /// (a grouped convolution too); average pooling likewise against its gradient.
    #[test]
    fn backprops_are_adjoint_to_the_forward() {
        let dot = |a: &Tensor, b: &Tensor| -> f64 {
            a.as_f64().unwrap().iter().zip(b.as_f64().unwrap()).map(|(p, q)| p * q).sum()
        };
        let sizes = |s: &[usize]| Tensor::from_i32(vec![5], s.iter().map(|&d| d as i32).collect()).unwrap();
        for (c, fshape, pad, strides) in [
            (2, [2, 3, 2, 2, 3], "SAME", [1, 2, 1]),
            (4, [2, 2, 1, 2, 4], "VALID", [1, 1, 2]),
            (3, [1, 1, 1, 3, 2], "SAME", [2, 1, 1]),
        ] {
            let x = t(&[2, 4, 5, 3, c], 1);
            let f = t(&fshape, 2);
            let at = attrs(pad, strides, None);
            let y = run1(&node("Conv3D", &at), &[x.clone(), f.clone()]).unwrap();
            let dy = t(&y.shape, 3);
            let dx = run1(&node("Conv3DBackpropInputV2", &at), &[sizes(&x.shape), f.clone(), dy.clone()]).unwrap();
            let df = run1(&node("Conv3DBackpropFilterV2", &at), &[x.clone(), sizes(&f.shape), dy.clone()]).unwrap();
            let lhs = dot(&y, &dy);
            assert!((dot(&dx, &x) - lhs).abs() < 1e-9, "{c} {pad} input");
            assert!((dot(&df, &f) - lhs).abs() < 1e-9, "{c} {pad} filter");
        }
        let x = t(&[2, 4, 5, 3, 2], 4);
        let at = attrs("SAME", [1, 2, 1], Some([2, 3, 2]));
        let y = run1(&node("AvgPool3D", &at), std::slice::from_ref(&x)).unwrap();
        let dy = t(&y.shape, 5);
        let dx = run1(&node("AvgPool3DGrad", &at), &[sizes(&x.shape), dy.clone()]).unwrap();
        assert!((dot(&dx, &x) - dot(&y, &dy)).abs() < 1e-9, "avg pool");
    }

    /// TensorFlow 2.21's values: a 2×2×2 SAME window, stride 1, over `[1,3,3,2,0,0,0,0]`
    /// (`[1,2,2,2,1]`): the max, its gradient of ones (every tap equal to its window's max
    /// gets it, ties included), and the average over the inside taps only.
    #[test]
    fn pooling_matches_tensorflow() {
        let x = Tensor::from_f64(vec![1, 2, 2, 2, 1], vec![1.0, 3.0, 3.0, 2.0, 0.0, 0.0, 0.0, 0.0]).unwrap();
        let at = attrs("SAME", [1, 1, 1], Some([2, 2, 2]));
        let y = run1(&node("MaxPool3D", &at), std::slice::from_ref(&x)).unwrap();
        assert_eq!(y.as_f64().unwrap(), [3.0, 3.0, 3.0, 2.0, 0.0, 0.0, 0.0, 0.0]);
        let ones = Tensor::from_f64(vec![1, 2, 2, 2, 1], vec![1.0; 8]).unwrap();
        let g = run1(&node("MaxPool3DGrad", &at), &[x.clone(), y, ones]).unwrap();
        assert_eq!(g.as_f64().unwrap(), [0.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0, 4.0]);
        let a = run1(&node("AvgPool3D", &at), &[x]).unwrap();
        assert_eq!(a.as_f64().unwrap(), [1.125, 1.25, 1.25, 1.0, 0.0, 0.0, 0.0, 0.0]);
    }

    /// TensorFlow 2.21's `max_pool3d` (2×2×2 VALID) with NaNs: `[NaN, 5, 4, −1, 2, 1, 0, 3]`
    /// pools to 5, a window of NaNs to NaN, one of −∞ to −∞.
    #[test]
    fn max_pool3d_nans_as_tensorflow() {
        let at = attrs("VALID", [1, 1, 1], Some([2, 2, 2]));
        let pool = |v: [f64; 8]| {
            let x = Tensor::from_f64(vec![1, 2, 2, 2, 1], v.to_vec()).unwrap();
            run1(&node("MaxPool3D", &at), &[x]).unwrap().as_f64().unwrap().to_vec()
        };
        assert_eq!(pool([f64::NAN, 5.0, 4.0, -1.0, 2.0, 1.0, 0.0, 3.0]), [5.0]);
        assert!(pool([f64::NAN; 8])[0].is_nan());
        assert_eq!(pool([f64::NEG_INFINITY; 8]), [f64::NEG_INFINITY]);
    }

    #[test]
    fn bad_depths_are_errors_not_panics() {
        let at = attrs("SAME", [1, 1, 1], None);
        let e = run1(&node("Conv3D", &at), &[t(&[1, 2, 2, 2, 0], 1), t(&[1, 1, 1, 2, 2], 2)]).unwrap_err();
        assert!(e.to_string().contains("divisible"), "{e}");
        let e = run1(&node("Conv3D", &at), &[t(&[1, 2, 2, 2, 4], 1), t(&[1, 1, 1, 2, 3], 2)]).unwrap_err();
        assert!(e.to_string().contains("number of groups"), "{e}");
    }
}
