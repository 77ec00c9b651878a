//! 2-D pooling in NHWC: `MaxPool`, `MaxPoolGrad`, `AvgPool`, `AvgPoolGrad`.
//!
//! Windows and padding are [`super::conv::Window`]'s (`ksize` and `strides`
//! are `[1, h, w, 1]`). Padding never takes part: a max is over the window's
//! real elements, an average divides by how many real elements the window
//! holds (TensorFlow's CPU kernels do the same). `MaxPoolGrad` sends each
//! output's gradient to the first maximum of its window in row-major scan
//! order, as TensorFlow's CPU kernel does when it recomputes the argmax
//! (strictly greater replaces), so ties resolve alike.

use autoclust_graph::{Node, Tensor};

use super::conv::{hw_attr, nhwc, padding_attr, require_nhwc, Padding, Window};
use super::elementwise::Float;
use super::{arity, dispatch_float, one, shape_values, tensor_of, Inputs, PureFn};
use crate::error::{KResult, KernelError};

#[derive(Clone, Debug)]
struct PoolAttrs {
    ksize: (usize, usize),
    strides: (usize, usize),
    padding: Padding,
}

impl PoolAttrs {
    fn parse(node: &Node) -> KResult<PoolAttrs> {
        require_nhwc(node)?;
        Ok(PoolAttrs {
            ksize: hw_attr(node, "ksize", true)?,
            strides: hw_attr(node, "strides", true)?,
            padding: padding_attr(node)?,
        })
    }

    fn window(&self, d: [usize; 4]) -> KResult<Window> {
        Ok(Window::new((d[1], d[2]), self.ksize, self.strides, (1, 1), &self.padding)?)
    }
}

/// Calls `f(output pixel, [input pixels of its window])` for each output
/// pixel of one image; pixel = `y * width + x`.
fn windows(win: &Window, mut f: impl FnMut(usize, &[usize])) {
    let mut taps = Vec::with_capacity(win.h.kernel * win.w.kernel);
    for oy in 0..win.h.output {
        for ox in 0..win.w.output {
            taps.clear();
            for ky in 0..win.h.kernel {
                let Some(iy) = win.h.source(oy, ky) else { continue };
                for kx in 0..win.w.kernel {
                    if let Some(ix) = win.w.source(ox, kx) {
                        taps.push(iy * win.w.input + ix);
                    }
                }
            }
            f(oy * win.w.output + ox, &taps);
        }
    }
}

/// For every image and channel, the input pixel the max of each output pixel came from.
fn argmax<T: Float>(x: &[T], d: [usize; 4], win: &Window) -> Vec<usize> {
    let [n, h, w, c] = d;
    let out_pixels = win.h.output * win.w.output;
    let mut arg = vec![usize::MAX; n * out_pixels * c];
    for b in 0..n {
        let img = &x[b * h * w * c..][..h * w * c];
        windows(win, |o, taps| {
            for ch in 0..c {
                let mut best: Option<(usize, T)> = None;
                for &p in taps {
                    let v = img[p * c + ch];
                    if best.is_none_or(|(_, m)| v > m) {
                        best = Some((p, v));
                    }
                }
                if let Some((p, _)) = best {
                    arg[(b * out_pixels + o) * c + ch] = p;
                }
            }
        });
    }
    arg
}

fn max_pool<T: Float>(a: &PoolAttrs, x: &Tensor) -> KResult<Tensor> {
    let d = nhwc(x, "input")?;
    let win = a.window(d)?;
    let [n, h, w, c] = d;
    let xs = T::slice(x);
    let arg = argmax(xs, d, &win);
    let out_pixels = win.h.output * win.w.output;
    let mut out = Vec::with_capacity(arg.len());
    for (i, &p) in arg.iter().enumerate() {
        let (b, ch) = (i / (out_pixels * c), i % c);
        out.push(if p == usize::MAX { T::lowest() } else { xs[(b * h * w + p) * c + ch] });
    }
    Ok(tensor_of(vec![n, win.h.output, win.w.output, c], out))
}

fn max_pool_grad<T: Float>(a: &PoolAttrs, x: &Tensor, y: &Tensor, dy: &Tensor) -> KResult<Tensor> {
    let d = nhwc(x, "orig_input")?;
    let win = a.window(d)?;
    let [n, h, w, c] = d;
    let want = [n, win.h.output, win.w.output, c];
    if y.shape[..] != want || dy.shape[..] != want {
        return Err(KernelError::invalid(format!(
            "orig_output {:?} and grad {:?} must have the pooled shape {want:?}",
            y.shape, dy.shape
        )));
    }
    let arg = argmax(T::slice(x), d, &win);
    let g = T::slice(dy);
    let out_pixels = win.h.output * win.w.output;
    let mut dx = vec![T::zero(); n * h * w * c];
    for (i, &p) in arg.iter().enumerate() {
        if p != usize::MAX {
            let (b, ch) = (i / (out_pixels * c), i % c);
            let at = (b * h * w + p) * c + ch;
            dx[at] = dx[at].add(g[i]);
        }
    }
    Ok(tensor_of(d.to_vec(), dx))
}

fn avg_pool<T: Float>(a: &PoolAttrs, x: &Tensor) -> KResult<Tensor> {
    let d = nhwc(x, "value")?;
    let win = a.window(d)?;
    let [n, h, w, c] = d;
    let xs = T::slice(x);
    let out_pixels = win.h.output * win.w.output;
    let mut out = vec![T::zero(); n * out_pixels * c];
    for b in 0..n {
        let img = &xs[b * h * w * c..][..h * w * c];
        windows(&win, |o, taps| {
            let dst = &mut out[(b * out_pixels + o) * c..][..c];
            for &p in taps {
                for (s, &v) in dst.iter_mut().zip(&img[p * c..][..c]) {
                    *s = s.add(v);
                }
            }
            let count = T::from_i64(taps.len() as i64);
            for s in dst.iter_mut() {
                *s = s.div(count);
            }
        });
    }
    Ok(tensor_of(vec![n, win.h.output, win.w.output, c], out))
}

fn avg_pool_grad<T: Float>(a: &PoolAttrs, sizes: &Tensor, dy: &Tensor) -> KResult<Tensor> {
    let d = shape_values(sizes, "orig_input_shape")?;
    super::budget(T::DTYPE, &d)?;
    let d: [usize; 4] =
        d.try_into().map_err(|v| KernelError::invalid(format!("orig_input_shape must have 4 elements, got {v:?}")))?;
    let win = a.window(d)?;
    let [n, h, w, c] = d;
    let want = [n, win.h.output, win.w.output, c];
    if dy.shape[..] != want {
        return Err(KernelError::invalid(format!("grad {:?} must have the pooled shape {want:?}", dy.shape)));
    }
    let g = T::slice(dy);
    let out_pixels = win.h.output * win.w.output;
    let mut dx = vec![T::zero(); n * h * w * c];
    for b in 0..n {
        let img = &mut dx[b * h * w * c..][..h * w * c];
        windows(&win, |o, taps| {
            let count = T::from_i64(taps.len() as i64);
            let src = &g[(b * out_pixels + o) * c..][..c];
            for &p in taps {
                for (s, &v) in img[p * c..][..c].iter_mut().zip(src) {
                    *s = s.add(v.div(count));
                }
            }
        });
    }
    Ok(tensor_of(d.to_vec(), dx))
}

/// Prepares a pooling kernel, or `None` if `node.op` is not one.
pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let op = node.op.as_str();
    if !matches!(op, "MaxPool" | "MaxPoolGrad" | "AvgPool" | "AvgPoolGrad") {
        return Ok(None);
    }
    let a = PoolAttrs::parse(node)?;
    let f: PureFn = match op {
        "MaxPool" => Box::new(move |inp: Inputs| {
            arity(&inp, 1)?;
            one(dispatch_float!(inp[0].dtype, max_pool(&a, &inp[0]))?)
        }),
        "MaxPoolGrad" => Box::new(move |inp: Inputs| {
            arity(&inp, 3)?;
            if inp[1].dtype != inp[0].dtype || inp[2].dtype != inp[0].dtype {
                return Err(KernelError::invalid("MaxPoolGrad: inputs must share one dtype"));
            }
            one(dispatch_float!(inp[0].dtype, max_pool_grad(&a, &inp[0], &inp[1], &inp[2]))?)
        }),
        "AvgPool" => Box::new(move |inp: Inputs| {
            arity(&inp, 1)?;
            one(dispatch_float!(inp[0].dtype, avg_pool(&a, &inp[0]))?)
        }),
        _ => Box::new(move |inp: Inputs| {
            arity(&inp, 2)?;
            one(dispatch_float!(inp[1].dtype, avg_pool_grad(&a, &inp[0], &inp[1]))?)
        }),
    };
    Ok(Some(f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::tests_support::{node, run1};
    use autoclust_graph::{AttrValue, ListValue};

    fn attrs(k: i64, s: i64, padding: &str) -> Vec<(&'static str, AttrValue)> {
        vec![
            ("ksize", AttrValue::List(ListValue::I(vec![1, k, k, 1]))),
            ("strides", AttrValue::List(ListValue::I(vec![1, s, s, 1]))),
            ("padding", AttrValue::S(padding.as_bytes().to_vec())),
        ]
    }

    fn img(h: usize, w: usize, v: &[f32]) -> Tensor {
        Tensor::from_f32(vec![1, h, w, 1], v.to_vec()).unwrap()
    }

    #[test]
    fn max_pool_and_its_gradient_pick_the_first_maximum() {
        // 3x3 image, 2x2 windows, stride 1, VALID: ties go to the first in scan order.
        let x = img(3, 3, &[1.0, 5.0, 5.0, 2.0, 0.0, 3.0, 7.0, 7.0, 1.0]);
        let y = run1(&node("MaxPool", &attrs(2, 1, "VALID")), std::slice::from_ref(&x)).unwrap();
        assert_eq!(y.as_f32().unwrap(), &[5.0, 5.0, 7.0, 7.0]);
        let dy = img(2, 2, &[1.0, 10.0, 100.0, 1000.0]);
        let dx = run1(&node("MaxPoolGrad", &attrs(2, 1, "VALID")), &[x, y, dy]).unwrap();
        assert_eq!(dx.as_f32().unwrap(), &[0.0, 11.0, 0.0, 0.0, 0.0, 0.0, 100.0, 1000.0, 0.0]);
    }

    #[test]
    fn avg_pool_same_divides_by_real_elements() {
        // 2x2 image, 2x2 windows, stride 1, SAME: the right/bottom windows are partly padding.
        let x = img(2, 2, &[1.0, 2.0, 3.0, 4.0]);
        let y = run1(&node("AvgPool", &attrs(2, 1, "SAME")), &[x]).unwrap();
        assert_eq!(y.as_f32().unwrap(), &[2.5, 3.0, 3.5, 4.0]);
        let sizes = Tensor::from_i32(vec![4], vec![1, 2, 2, 1]).unwrap();
        let dx = run1(&node("AvgPoolGrad", &attrs(2, 1, "SAME")), &[sizes, img(2, 2, &[4.0, 2.0, 2.0, 1.0])]).unwrap();
        assert_eq!(dx.as_f32().unwrap(), &[1.0, 2.0, 2.0, 4.0]);
    }
}
