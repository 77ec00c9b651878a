//! 2-D pooling in NHWC: `MaxPool`, `MaxPoolGrad`, `MaxPoolGradGrad`, `AvgPool`, `AvgPoolGrad`,
//! `MaxPoolV2`/`MaxPoolGradV2` (window and strides as operands), and
//! `MaxPoolWithArgmax` with its gradient `MaxPoolGradWithArgmax` (the argmax a flat NHWC
//! index, `(y·W + x)·C + c`, plus the image's offset with `include_batch_in_index`).
//!
//! Windows and padding are [`super::conv::Window`]'s (`ksize` and `strides`
//! are `[1, h, w, 1]`). Padding never takes part: a max is over the window's
//! real elements, an average divides by how many real elements the window
//! holds (TensorFlow's CPU kernels do the same). `MaxPoolGrad` sends each
//! output's gradient to the first maximum of its window in row-major scan
//! order, as TensorFlow's CPU kernel does when it recomputes the argmax
//! (strictly greater replaces), so ties resolve alike.

use autoclust_graph::{AttrValue, ListValue, Node, Tensor};
use autoclust_numeric::pool::{self as shared, PoolAttrs, PoolElem, PoolShape};

use super::conv::nhwc;
use super::elementwise::Float;
use super::{arity, dispatch_float, one, shape_values, tensor_of, Inputs, PureFn};
use crate::error::{KResult, KernelError};

/// `MaxPoolV2` and `MaxPoolGradV2`: `MaxPool` and `MaxPoolGrad` whose `ksize` and `strides`
/// are the last two operands (int32 vectors of four), checked as the attributes are.
fn max_pool_v2(node: &Node) -> PureFn {
    let base = node.clone();
    let grad = node.op == "MaxPoolGradV2";
    Box::new(move |inp: Inputs| {
        arity(&inp, if grad { 5 } else { 3 })?;
        let mut n = base.clone();
        let k = inp.len() - 2;
        for (name, t) in [("ksize", &inp[k]), ("strides", &inp[k + 1])] {
            let v = t.to_i64_vec().filter(|_| t.rank() == 1 && t.dtype.is_integer());
            let v =
                v.ok_or_else(|| KernelError::invalid(format!("{name} must be an integer vector, got {:?}", t.shape)))?;
            n.attrs.insert(name.to_string(), AttrValue::List(ListValue::I(v)));
        }
        let a = PoolAttrs::parse(&n)?;
        if grad {
            if inp[1].dtype != inp[0].dtype || inp[2].dtype != inp[0].dtype {
                return Err(KernelError::invalid("MaxPoolGradV2: inputs must share one dtype"));
            }
            one(dispatch_float!(inp[0].dtype, max_pool_grad(&a, &inp[0], &inp[1], &inp[2]))?)
        } else {
            one(dispatch_float!(inp[0].dtype, max_pool(&a, &inp[0]))?)
        }
    })
}

fn pooled(a: &PoolAttrs, input: [usize; 4]) -> KResult<PoolShape> {
    Ok(PoolShape { input, win: a.window(input)? })
}

fn max_pool<T: Float + PoolElem>(a: &PoolAttrs, x: &Tensor) -> KResult<Tensor> {
    let s = pooled(a, nhwc(x, "input")?)?;
    Ok(tensor_of(s.output().to_vec(), shared::max_pool(&s, T::slice(x))))
}

fn max_pool_grad<T: Float + PoolElem>(a: &PoolAttrs, x: &Tensor, y: &Tensor, dy: &Tensor) -> KResult<Tensor> {
    let s = pooled(a, nhwc(x, "orig_input")?)?;
    let want = s.output();
    if y.shape[..] != want || dy.shape[..] != want {
        return Err(KernelError::invalid(format!(
            "orig_output {:?} and grad {:?} must have the pooled shape {want:?}",
            y.shape, dy.shape
        )));
    }
    Ok(tensor_of(s.input.to_vec(), shared::max_pool_grad(&s, T::slice(x), T::slice(dy))))
}

/// `MaxPoolGradGrad`: the input-shaped gradient `g` picked at each window's maximum.
fn max_pool_grad_grad<T: Float + PoolElem>(a: &PoolAttrs, x: &Tensor, y: &Tensor, g: &Tensor) -> KResult<Tensor> {
    let s = pooled(a, nhwc(x, "orig_input")?)?;
    let want = s.output();
    if y.shape[..] != want {
        return Err(KernelError::invalid(format!("orig_output {:?} must have the pooled shape {want:?}", y.shape)));
    }
    if g.shape != x.shape {
        return Err(KernelError::invalid(format!(
            "grad {:?} must have the shape of orig_input {:?}",
            g.shape, x.shape
        )));
    }
    Ok(tensor_of(want.to_vec(), shared::max_pool_grad_grad(&s, T::slice(x), T::slice(y), T::slice(g))))
}

fn avg_pool<T: Float + PoolElem>(a: &PoolAttrs, x: &Tensor) -> KResult<Tensor> {
    let s = pooled(a, nhwc(x, "value")?)?;
    Ok(tensor_of(s.output().to_vec(), shared::avg_pool(&s, T::slice(x))))
}

fn avg_pool_grad<T: Float + PoolElem>(a: &PoolAttrs, sizes: &Tensor, dy: &Tensor) -> KResult<Tensor> {
    let d = shape_values(sizes, "orig_input_shape")?;
    super::budget(T::DTYPE, &d)?;
    let d: [usize; 4] =
        d.try_into().map_err(|v| KernelError::invalid(format!("orig_input_shape must have 4 elements, got {v:?}")))?;
    let s = pooled(a, d)?;
    let want = s.output();
    if dy.shape[..] != want {
        return Err(KernelError::invalid(format!("grad {:?} must have the pooled shape {want:?}", dy.shape)));
    }
    Ok(tensor_of(d.to_vec(), shared::avg_pool_grad(&s, T::slice(dy))))
}

/// `MaxPoolWithArgmax`: the pooled values and where each came from.
fn max_pool_with_argmax<T: Float + PoolElem>(
    a: &PoolAttrs,
    x: &Tensor,
    with_batch: bool,
    targmax: autoclust_graph::DType,
) -> KResult<super::Outputs> {
    let s = pooled(a, nhwc(x, "input")?)?;
    let [_, h, w, c] = s.input;
    let out_pixels = s.win.h.output * s.win.w.output;
    let values = T::slice(x);
    let arg = shared::argmax(&s, values);
    let (mut ys, mut idx) = (Vec::with_capacity(arg.len()), Vec::with_capacity(arg.len()));
    for (i, &p) in arg.iter().enumerate() {
        let (b, ch) = (i / (out_pixels * c), i % c);
        if p == usize::MAX {
            // A window with no maximum (padding only, NaNs or −∞): the lowest value and index
            // −1, as TensorFlow's `SpatialMaxPoolWithArgMaxHelper` leaves it.
            ys.push(<T as PoolElem>::lowest());
            idx.push(-1);
            continue;
        }
        let flat = (b * h * w + p) * c + ch;
        ys.push(values[flat]);
        idx.push(if with_batch { flat } else { p * c + ch } as i64);
    }
    let shape = s.output().to_vec();
    Ok(super::Outputs::from_vec(vec![tensor_of(shape.clone(), ys), super::int_tensor(targmax, shape, idx)?]))
}

/// `MaxPoolGradWithArgmax`: each output gradient added to the input element its argmax names.
fn max_pool_grad_with_argmax<T: Float + PoolElem>(
    a: &PoolAttrs,
    x: &Tensor,
    dy: &Tensor,
    argmax: &Tensor,
    with_batch: bool,
) -> KResult<Tensor> {
    let s = pooled(a, nhwc(x, "input")?)?;
    let want = s.output();
    if dy.shape[..] != want || argmax.shape[..] != want {
        return Err(KernelError::invalid(format!(
            "grad {:?} and argmax {:?} must have the pooled shape {want:?}",
            dy.shape, argmax.shape
        )));
    }
    let [n, h, w, c] = s.input;
    let image = h * w * c;
    let idx = super::int_values(argmax, "argmax")?;
    let g = T::slice(dy);
    let mut dx = vec![T::zero(); n * image];
    let per_image = want[1] * want[2] * c;
    for (i, (&k, &gv)) in idx.iter().zip(g).enumerate() {
        let base = if with_batch { 0 } else { (i / per_image.max(1)) * image };
        let at = usize::try_from(k).ok().map(|k| k + base).filter(|&at| at < n * image);
        let at = at.ok_or_else(|| KernelError::invalid(format!("Invalid argmax index {k} for output element {i}")))?;
        dx[at] = autoclust_graph::arith::TfArith::add(dx[at], gv);
    }
    Ok(tensor_of(s.input.to_vec(), dx))
}

/// Prepares a pooling kernel, or `None` if `node.op` is not one.
pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let op = node.op.as_str();
    if matches!(op, "MaxPoolV2" | "MaxPoolGradV2") {
        return Ok(Some(max_pool_v2(node)));
    }
    if !matches!(
        op,
        "MaxPool"
            | "MaxPoolGrad"
            | "MaxPoolGradGrad"
            | "AvgPool"
            | "AvgPoolGrad"
            | "MaxPoolWithArgmax"
            | "MaxPoolGradWithArgmax"
    ) {
        return Ok(None);
    }
    let a = PoolAttrs::parse(node)?;
    let with_batch = super::attr_bool_or(node, "include_batch_in_index", false)?;
    let f: PureFn = match op {
        "MaxPoolWithArgmax" => {
            let targmax = super::attr_type_or(node, "Targmax", autoclust_graph::DType::Int64)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                dispatch_float!(inp[0].dtype, max_pool_with_argmax(&a, &inp[0], with_batch, targmax))
            })
        }
        "MaxPoolGradWithArgmax" => Box::new(move |inp: Inputs| {
            arity(&inp, 3)?;
            if inp[1].dtype != inp[0].dtype {
                return Err(KernelError::invalid("MaxPoolGradWithArgmax: input and grad must share one dtype"));
            }
            one(dispatch_float!(inp[0].dtype, max_pool_grad_with_argmax(&a, &inp[0], &inp[1], &inp[2], with_batch))?)
        }),
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
        "MaxPoolGradGrad" => Box::new(move |inp: Inputs| {
            arity(&inp, 3)?;
            if inp[1].dtype != inp[0].dtype || inp[2].dtype != inp[0].dtype {
                return Err(KernelError::invalid("MaxPoolGradGrad: inputs must share one dtype"));
            }
            one(dispatch_float!(inp[0].dtype, max_pool_grad_grad(&a, &inp[0], &inp[1], &inp[2]))?)
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

    /// `MaxPoolV2` and `MaxPoolGradV2` compute `MaxPool` and `MaxPoolGrad` with the window
    /// and strides taken from their operands (TensorFlow 2.21 gives equal results), and
    /// refuse pooling over the batch and operands that are not integer vectors.
    #[test]
    fn max_pool_v2_takes_its_window_from_operands() {
        let x = Tensor::from_f32(vec![2, 5, 6, 3], (0..180).map(|i| ((i * 37) % 11) as f32 - 4.0).collect()).unwrap();
        let same = [("padding", AttrValue::S(b"SAME".to_vec()))];
        let mut v1 = same.to_vec();
        v1.push(("ksize", AttrValue::List(ListValue::I(vec![1, 2, 3, 1]))));
        v1.push(("strides", AttrValue::List(ListValue::I(vec![1, 2, 2, 1]))));
        let ints = |v: [i32; 4]| Tensor::from_i32(vec![4], v.to_vec()).unwrap();
        let (k, st) = (ints([1, 2, 3, 1]), ints([1, 2, 2, 1]));
        let y = run1(&node("MaxPool", &v1), std::slice::from_ref(&x)).unwrap();
        let y2 = run1(&node("MaxPoolV2", &same), &[x.clone(), k.clone(), st.clone()]).unwrap();
        assert_eq!(y2.shape, [2, 3, 3, 3]);
        assert_eq!(y2, y);
        let dy = Tensor::from_f32(y.shape.clone(), (0..54).map(|i| i as f32).collect()).unwrap();
        let dx = run1(&node("MaxPoolGrad", &v1), &[x.clone(), y.clone(), dy.clone()]).unwrap();
        let dx2 = run1(&node("MaxPoolGradV2", &same), &[x.clone(), y.clone(), dy, k.clone(), st.clone()]).unwrap();
        assert_eq!(dx2, dx);
        assert_eq!(dx2.as_f32().unwrap().iter().sum::<f32>(), (0..54).sum::<i32>() as f32);
        let batch = run1(&node("MaxPoolV2", &same), &[x.clone(), ints([2, 2, 2, 1]), st.clone()]).unwrap_err();
        assert!(batch.to_string().contains("over the batch or depth dimension"), "{batch}");
        let scalar = run1(&node("MaxPoolV2", &same), &[x, Tensor::scalar_i32(2), st]).unwrap_err();
        assert!(scalar.to_string().contains("ksize must be an integer vector"), "{scalar}");
    }

    /// `MaxPoolWithArgmax` in both paddings, with and without the batch in the index, and
    /// `MaxPoolGradWithArgmax` of its argmax: TensorFlow 2.21's values.
    #[test]
    fn max_pool_with_argmax_matches_tensorflow() {
        let v: Vec<f32> = [
            3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4, 3, 3, 8, 3, 2, 7, 9, 5, 0, 2, 8, 8,
            4, 1, 9, 7, 1, 6, 9, 3, 9, 9, 3, 7, 5, 1, 0, 5, 8, 2, 0, 9, 7, 4, 9, 4,
        ]
        .map(|x: i32| x as f32)
        .into();
        let x = Tensor::from_f32(vec![2, 3, 5, 2], v).unwrap();
        let pool = |padding: &str, with_batch: bool| {
            let mut a = attrs(2, 2, padding);
            a.push(("include_batch_in_index", AttrValue::B(with_batch)));
            let out = crate::kernels::compute(&node("MaxPoolWithArgmax", &a), std::slice::from_ref(&x)).unwrap();
            (out[0].clone(), out[1].clone(), a)
        };
        let (y, arg, _) = pool("VALID", false);
        assert_eq!(y.shape, [2, 1, 2, 2]);
        assert_eq!(y.as_f32().unwrap(), [9.0, 8.0, 9.0, 9.0, 9.0, 6.0, 9.0, 9.0]);
        assert_eq!(arg.as_i64().unwrap(), [12, 11, 14, 5, 0, 11, 14, 15]);
        assert_eq!(pool("VALID", true).1.as_i64().unwrap(), [12, 11, 14, 5, 30, 41, 44, 45]);
        let (y, arg, _) = pool("SAME", false);
        assert_eq!(y.shape, [2, 2, 3, 2]);
        let want = [9., 8., 9., 9., 8., 4., 6., 4., 8., 3., 2., 7., 9., 6., 9., 9., 9., 7., 8., 5., 7., 9., 9., 4.];
        assert_eq!(y.as_f32().unwrap(), want);
        let want = [12, 11, 14, 5, 18, 19, 20, 23, 26, 25, 28, 29, 0, 11, 14, 15, 8, 9, 22, 21, 26, 25, 28, 29];
        assert_eq!(arg.as_i64().unwrap(), want);
        let g = Tensor::from_f32(vec![2, 2, 3, 2], (1..=24).map(|i| i as f32).collect()).unwrap();
        let want: [f32; 60] = [
            0., 0., 0., 0., 0., 4., 0., 0., 0., 0., 0., 2., 1., 0., 3., 0., 0., 0., 5., 6., 7., 0., 0., 8., 0., 10.,
            9., 0., 11., 12., 13., 0., 0., 0., 0., 0., 0., 0., 17., 18., 0., 14., 0., 0., 15., 16., 0., 0., 0., 0., 0.,
            20., 19., 0., 0., 22., 21., 0., 23., 24.,
        ];
        for with_batch in [false, true] {
            let (_, arg, a) = pool("SAME", with_batch);
            let dx = run1(&node("MaxPoolGradWithArgmax", &a), &[x.clone(), g.clone(), arg]).unwrap();
            assert_eq!(dx.as_f32().unwrap(), want, "include_batch_in_index {with_batch}");
        }
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

    /// `MaxPoolGradGrad` picks the gradient at each window's first maximum (ties in scan
    /// order), is zero where the window holds no element equal to the pooled value, and
    /// refuses a gradient not shaped like the input (values from TensorFlow 2.21).
    #[test]
    fn max_pool_grad_grad_picks_the_gradient_at_the_first_maximum() {
        let x = img(3, 3, &[1.0, 5.0, 5.0, 2.0, 0.0, 3.0, 7.0, 7.0, 1.0]);
        let a = attrs(2, 1, "VALID");
        let y = run1(&node("MaxPool", &a), std::slice::from_ref(&x)).unwrap();
        let g = img(3, 3, &[10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0]);
        let gg = run1(&node("MaxPoolGradGrad", &a), &[x.clone(), y.clone(), g.clone()]).unwrap();
        assert_eq!(gg.shape, [1, 2, 2, 1]);
        assert_eq!(gg.as_f32().unwrap(), &[20.0, 20.0, 70.0, 80.0]);
        // A pooled value no window element equals (as after a NaN) gives 0.
        let y_off = img(2, 2, &[5.0, 4.0, 7.0, 7.0]);
        let gg = run1(&node("MaxPoolGradGrad", &a), &[x.clone(), y_off, g]).unwrap();
        assert_eq!(gg.as_f32().unwrap(), &[20.0, 0.0, 70.0, 80.0]);
        let err = run1(&node("MaxPoolGradGrad", &a), &[x, y.clone(), y]).unwrap_err();
        assert!(err.to_string().contains("shape of orig_input"), "{err}");
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
