//! Neural-network kernels: `Softmax`, `LogSoftmax` (last axis, max-shifted),
//! `SoftmaxCrossEntropyWithLogits` and its sparse form (loss and backprop),
//! `BiasAdd`/`BiasAddGrad` (NHWC and NCHW), the activation gradients
//! (`ReluGrad`, `Relu6Grad`, `TanhGrad`, `SigmoidGrad`, `SqrtGrad`,
//! `RsqrtGrad`, `ReciprocalGrad`), `L2Loss`, and `BroadcastGradientArgs`; [`prepare`] also
//! dispatches to the convolution ([`super::conv`]), pooling
//! ([`super::pool`]), batch-norm ([`super::batchnorm`]) and local-response-normalisation
//! ([`super::lrn`]) kernels.

use autoclust_graph::{DType, Node, Tensor};

use super::elementwise::{zip_map, zip_same, Float, Num};
use super::{
    arity, dispatch_float, dispatch_num, int_tensor, int_values, one, tensor_of, Elem, Inputs, Outputs, PureFn,
};
use crate::error::{KResult, KernelError};

fn rows<T: Elem>(t: &Tensor) -> KResult<(usize, usize)> {
    if t.rank() == 0 {
        return Err(KernelError::invalid("logits must have rank >= 1"));
    }
    let c = *t.shape.last().expect("rank >= 1");
    Ok((t.num_elements().checked_div(c).unwrap_or(0), c))
}

fn softmax<T: Float>(t: &Tensor, log: bool) -> KResult<Tensor> {
    let (n, c) = rows::<T>(t)?;
    if t.dtype == DType::Float32 {
        // Float32 rows in float32, as TensorFlow's kernel: the compiled clusters' kernel,
        // so both modes give the same bits.
        let x = f32::slice(t);
        let mut out = vec![0f32; x.len()];
        autoclust_compiler::softmax_rows(x, c, &mut out, log);
        return Ok(tensor_of(t.shape.clone(), out));
    }
    let x = T::slice(t);
    let mut v = Vec::with_capacity(x.len());
    for r in 0..n {
        let row = &x[r * c..(r + 1) * c];
        let m = row.iter().fold(T::lowest(), |a, &b| a.maximum(b));
        let sum: f64 = row.iter().map(|&y| y.sub(m).exp().to_f64()).sum();
        if log {
            let ls = T::from_f64(sum.ln());
            v.extend(row.iter().map(|&y| y.sub(m).sub(ls)));
        } else {
            let s = T::from_f64(sum);
            v.extend(row.iter().map(|&y| y.sub(m).exp().div(s)));
        }
    }
    Ok(tensor_of(t.shape.clone(), v))
}

/// Loss `[batch]` and backprop `[batch, classes]` given per-row probabilities targets.
fn xent<T: Float>(logits: &Tensor, labels: &Tensor) -> KResult<Outputs> {
    if logits.rank() != 2 {
        return Err(KernelError::invalid(format!("logits must be 2-dimensional, got shape {:?}", logits.shape)));
    }
    let labels = super::elementwise::broadcast_to::<T>(labels, &logits.shape).map_err(|_| {
        KernelError::invalid(format!(
            "logits and labels must be broadcastable: {:?} vs {:?}",
            logits.shape, labels.shape
        ))
    })?;
    let (n, c) = (logits.shape[0], logits.shape[1]);
    if let (Some(x), Some(y)) = (logits.as_f32(), labels.as_f32()) {
        // float32: the compiled kernel's code (vectorised, split across the cores), so both
        // modes give the same bits.
        let (loss, back) = autoclust_compiler::softmax_xent(x, c, y);
        return Ok([tensor_of(vec![n], loss), tensor_of(vec![n, c], back)].into_iter().collect());
    }
    let (x, y) = (T::slice(logits), T::slice(&labels));
    let mut loss = Vec::with_capacity(n);
    let mut back = Vec::with_capacity(n * c);
    for r in 0..n {
        let row = &x[r * c..(r + 1) * c];
        let lab = &y[r * c..(r + 1) * c];
        let m = row.iter().fold(T::lowest(), |a, &b| a.maximum(b));
        let sum: f64 = row.iter().map(|&z| z.sub(m).exp().to_f64()).sum();
        let lse = sum.ln();
        let mut l = 0.0f64;
        for (&z, &p) in row.iter().zip(lab) {
            let logp = z.sub(m).to_f64() - lse;
            l -= p.to_f64() * logp;
            back.push(T::from_f64(logp.exp() - p.to_f64()));
        }
        loss.push(T::from_f64(l));
    }
    let mut o = Outputs::new();
    o.push(tensor_of(vec![n], loss));
    o.push(tensor_of(vec![n, c], back));
    Ok(o)
}

fn sparse_xent<T: Float>(logits: &Tensor, labels: &Tensor) -> KResult<Outputs> {
    if logits.rank() != 2 || labels.rank() != 1 || labels.shape[0] != logits.shape[0] {
        return Err(KernelError::invalid(format!(
            "logits must be [batch, classes] and labels [batch]: {:?} vs {:?}",
            logits.shape, labels.shape
        )));
    }
    let (n, c) = (logits.shape[0], logits.shape[1]);
    let idx = int_values(labels, "labels")?;
    if let Some(&k) = idx.iter().find(|&&k| k < 0 || k as usize >= c) {
        // TensorFlow lists every label after the bad one's range.
        let all: Vec<String> = idx.iter().map(i64::to_string).collect();
        return Err(KernelError::invalid(format!(
            "Received a label value of {k} which is outside the valid range of [0, {c}).  Label values: {}",
            all.join(" ")
        )));
    }
    if let Some(x) = logits.as_f32() {
        // float32: the compiled kernel's code, so both modes give the same bits.
        let (loss, back) = autoclust_compiler::sparse_softmax_xent(x, c, &idx);
        return Ok([tensor_of(vec![n], loss), tensor_of(vec![n, c], back)].into_iter().collect());
    }
    let mut dense = vec![T::zero(); n * c];
    for (r, &k) in idx.iter().enumerate() {
        dense[r * c + k as usize] = T::one();
    }
    xent::<T>(logits, &tensor_of(vec![n, c], dense))
}

fn bias_add<T: Num>(value: Tensor, bias: &Tensor, nchw: bool) -> KResult<Tensor> {
    if bias.rank() != 1 || value.rank() < 2 {
        return Err(KernelError::invalid(format!(
            "BiasAdd: value {:?} must have rank >= 2 and bias {:?} rank 1",
            value.shape, bias.shape
        )));
    }
    let axis = if nchw { 1 } else { value.rank() - 1 };
    if value.shape[axis] != bias.shape[0] {
        return Err(KernelError::invalid(format!(
            "Must provide as many biases as the channel dimension of the input tensor: {:?} vs. {:?}",
            bias.shape, value.shape
        )));
    }
    let mut b = bias.clone();
    b.shape = vec![1; value.rank() - axis];
    b.shape[0] = bias.shape[0];
    zip_same::<T>(value, b, T::add)
}

fn bias_add_grad<T: Num>(grad: &Tensor, nchw: bool) -> KResult<Tensor> {
    if grad.rank() < 2 {
        return Err(KernelError::invalid("BiasAddGrad: input must have rank >= 2"));
    }
    let axis = if nchw { 1 } else { grad.rank() - 1 };
    let axes: Vec<i64> = (0..grad.rank() as i64).filter(|&a| a != axis as i64).collect();
    super::reduce::reduce(super::reduce::Reduce::Sum, grad, &axes, false)
}

#[derive(Clone, Copy, PartialEq)]
enum Grad {
    Relu,
    Relu6,
    /// (gradients, features): `features > 0 ? dy : dy·alpha`.
    LeakyRelu(f32),
    /// (gradients, outputs): `y < 0 ? dy·(y + 1) : dy`.
    Elu,
    /// (gradients, outputs): `y < 0 ? dy·(y + scale·alpha) : dy·scale`.
    Selu,
    /// (gradients, features): `dy / (1 + e^−x)`.
    Softplus,
    /// (gradients, features): `dy / (1 + |x|)²`.
    Softsign,
    Tanh,
    Sigmoid,
    Sqrt,
    Rsqrt,
    Reciprocal,
}

fn activation_grad<T: Float>(g: Grad, a: &Tensor, b: &Tensor) -> KResult<Tensor> {
    if a.shape != b.shape {
        return Err(KernelError::invalid(format!("gradient and input shapes differ: {:?} vs {:?}", a.shape, b.shape)));
    }
    let one = T::one();
    let half = T::from_f64(0.5);
    match g {
        // (gradients, features)
        // TensorFlow multiplies by the mask (`dy · (x > 0)`): a NaN or infinite gradient
        // where the mask is 0 gives NaN, as TensorFlow's does (a select would hide it).
        Grad::Relu => zip_map::<T, T, T>(a, b, move |dy, x| dy.mul(if x > T::zero() { one } else { T::zero() })),
        Grad::Relu6 => {
            let six = T::from_f64(6.0);
            zip_map::<T, T, T>(a, b, move |dy, x| dy.mul(if x > T::zero() && x < six { one } else { T::zero() }))
        }
        Grad::LeakyRelu(alpha) => {
            let alpha = T::from_f32(alpha);
            zip_map::<T, T, T>(a, b, move |dy, x| if x > T::zero() { dy } else { dy.mul(alpha) })
        }
        Grad::Elu => zip_map::<T, T, T>(a, b, move |dy, y| if y < T::zero() { dy.mul(y.add(one)) } else { dy }),
        Grad::Selu => {
            // TensorFlow's constants (relu_op_functor.h), as float32 for float32.
            let scale = T::from_f64(autoclust_graph::arith::SELU_SCALE);
            let scale_alpha = T::from_f64(autoclust_graph::arith::SELU_SCALE_ALPHA);
            zip_map::<T, T, T>(
                a,
                b,
                move |dy, y| if y < T::zero() { dy.mul(y.add(scale_alpha)) } else { dy.mul(scale) },
            )
        }
        Grad::Softplus => zip_map::<T, T, T>(a, b, move |dy, x| dy.div(x.neg().exp().add(one))),
        Grad::Softsign => zip_map::<T, T, T>(a, b, move |dy, x| {
            let d = one.add(x.abs());
            dy.div(d.mul(d))
        }),
        // (y, dy)
        Grad::Tanh => zip_map::<T, T, T>(a, b, move |y, dy| dy.mul(one.sub(y.mul(y)))),
        Grad::Sigmoid => zip_map::<T, T, T>(a, b, move |y, dy| dy.mul(y.mul(one.sub(y)))),
        Grad::Sqrt => zip_map::<T, T, T>(a, b, move |y, dy| dy.mul(half).div(y)),
        Grad::Rsqrt => zip_map::<T, T, T>(a, b, move |y, dy| y.mul(y).mul(y).mul(dy).mul(half).neg()),
        // TensorFlow: -dy * y * y.
        Grad::Reciprocal => zip_map::<T, T, T>(a, b, move |y, dy| dy.mul(y).mul(y).neg()),
    }
}

fn relu_grad_int<T: Num>(a: &Tensor, b: &Tensor) -> KResult<Tensor> {
    if a.shape != b.shape {
        return Err(KernelError::invalid("gradient and input shapes differ"));
    }
    zip_map::<T, T, T>(a, b, |dy, x| if x > T::zero() { dy } else { T::zero() })
}

/// TensorFlow's `BroadcastGradientArgs` ([`autoclust_graph::broadcast_gradient_args`]),
/// with its error.
pub fn broadcast_gradient_args(s0: &[i64], s1: &[i64]) -> KResult<(Vec<i64>, Vec<i64>)> {
    autoclust_graph::broadcast_gradient_args(s0, s1)
        .ok_or_else(|| KernelError::invalid(format!("Incompatible shapes: {s0:?} vs. {s1:?}")))
}

fn l2_loss<T: Float>(t: &Tensor) -> KResult<Tensor> {
    let s = autoclust_numeric::reduce::l2_sum(T::slice(t).iter().map(|&x| x.to_f64()));
    Ok(tensor_of(vec![], vec![T::from_f64(s / 2.0)]))
}

fn data_format_nchw(node: &Node) -> KResult<bool> {
    match node.attr("data_format").map(|a| a.as_str()) {
        None => Ok(false),
        Some(Some("NHWC")) => Ok(false),
        Some(Some("NCHW")) => Ok(true),
        Some(_) => Err(KernelError::Attr("data_format".into())),
    }
}

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    // Convolutions, pooling and batch normalisation live in their own files.
    for area in [super::conv::prepare, super::pool::prepare, super::batchnorm::prepare, super::lrn::prepare] {
        if let Some(f) = area(node)? {
            return Ok(Some(f));
        }
    }
    let grad = match node.op.as_str() {
        "ReluGrad" => Some(Grad::Relu),
        "Relu6Grad" => Some(Grad::Relu6),
        "LeakyReluGrad" => Some(Grad::LeakyRelu(super::attr_float_or(node, "alpha", 0.2)?)),
        "EluGrad" => Some(Grad::Elu),
        "SeluGrad" => Some(Grad::Selu),
        "SoftplusGrad" => Some(Grad::Softplus),
        "SoftsignGrad" => Some(Grad::Softsign),
        "TanhGrad" => Some(Grad::Tanh),
        "SigmoidGrad" => Some(Grad::Sigmoid),
        "SqrtGrad" => Some(Grad::Sqrt),
        "RsqrtGrad" => Some(Grad::Rsqrt),
        "ReciprocalGrad" | "InvGrad" => Some(Grad::Reciprocal),
        _ => None,
    };
    if let Some(g) = grad {
        return Ok(Some(Box::new(move |inp: Inputs| {
            arity(&inp, 2)?;
            if inp[0].dtype != inp[1].dtype {
                return Err(KernelError::invalid("operands have different dtypes"));
            }
            if g == Grad::Relu && inp[0].dtype.is_integer() {
                return one(dispatch_num!(inp[0].dtype, relu_grad_int(&inp[0], &inp[1]))?);
            }
            one(dispatch_float!(inp[0].dtype, activation_grad(g, &inp[0], &inp[1]))?)
        })));
    }
    let f: PureFn = match node.op.as_str() {
        "Softmax" | "LogSoftmax" => {
            let log = node.op == "LogSoftmax";
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                one(dispatch_float!(inp[0].dtype, softmax(&inp[0], log))?)
            })
        }
        "SoftmaxCrossEntropyWithLogits" => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            if inp[0].dtype != inp[1].dtype {
                return Err(KernelError::invalid("logits and labels have different dtypes"));
            }
            dispatch_float!(inp[0].dtype, xent(&inp[0], &inp[1]))
        }),
        "SparseSoftmaxCrossEntropyWithLogits" => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            dispatch_float!(inp[0].dtype, sparse_xent(&inp[0], &inp[1]))
        }),
        "BiasAdd" | "BiasAddV1" => {
            let nchw = data_format_nchw(node)?;
            Box::new(move |mut inp: Inputs| {
                arity(&inp, 2)?;
                let bias = inp.pop().expect("two inputs");
                let value = inp.pop().expect("two inputs");
                if value.dtype != bias.dtype {
                    return Err(KernelError::invalid("value and bias have different dtypes"));
                }
                one(dispatch_num!(value.dtype, bias_add(value, &bias, nchw))?)
            })
        }
        "BiasAddGrad" => {
            let nchw = data_format_nchw(node)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                one(dispatch_num!(inp[0].dtype, bias_add_grad(&inp[0], nchw))?)
            })
        }
        "BroadcastGradientArgs" => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            let dt = inp[0].dtype;
            if !matches!(dt, DType::Int32 | DType::Int64) {
                return Err(KernelError::DType(dt));
            }
            let (r0, r1) = broadcast_gradient_args(&int_values(&inp[0], "s0")?, &int_values(&inp[1], "s1")?)?;
            let mut o = Outputs::new();
            o.push(int_tensor(dt, vec![r0.len()], r0)?);
            o.push(int_tensor(dt, vec![r1.len()], r1)?);
            Ok(o)
        }),
        "L2Loss" => Box::new(|inp: Inputs| {
            arity(&inp, 1)?;
            one(dispatch_float!(inp[0].dtype, l2_loss(&inp[0]))?)
        }),
        _ => return Ok(None),
    };
    Ok(Some(f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::compute;
    use crate::kernels::tests_support::{node, run1};

    #[test]
    fn softmax_rows_sum_to_one_and_are_shift_invariant() {
        let t = Tensor::from_f32(vec![2, 3], vec![1.0, 2.0, 3.0, 1001.0, 1002.0, 1003.0]).unwrap();
        let s = run1(&node("Softmax", &[]), std::slice::from_ref(&t)).unwrap();
        let v = s.as_f32().unwrap();
        let e = [1f64.exp(), 2f64.exp(), 3f64.exp()];
        let z: f64 = e.iter().sum();
        for i in 0..3 {
            assert!((v[i] as f64 - e[i] / z).abs() < 1e-6);
            assert!((v[i + 3] - v[i]).abs() < 1e-6, "no overflow for large logits");
        }
        let l = run1(&node("LogSoftmax", &[]), &[t]).unwrap();
        assert!((l.as_f32().unwrap()[0] as f64 - (e[0] / z).ln()).abs() < 1e-5);
    }

    /// float32 cross-entropy (the compiled kernel's vectorised code, split across the cores
    /// for many rows) within a few ulps of a float64 reference, large logits included, and
    /// the sparse form equal to the dense one with one-hot labels, bit for bit.
    #[test]
    fn float32_xent_matches_a_float64_reference() {
        for (n, c) in [(3usize, 5usize), (4096, 32)] {
            let x: Vec<f32> = (0..n * c)
                .map(|i| ((i * 7919 % 1013) as f32 - 500.0) / 50.0 + if i % 97 == 0 { 80.0 } else { 0.0 })
                .collect();
            let k: Vec<i32> = (0..n).map(|r| ((r * 31) % c) as i32).collect();
            let mut onehot = vec![0f32; n * c];
            for (r, &kk) in k.iter().enumerate() {
                onehot[r * c + kk as usize] = 1.0;
            }
            let logits = Tensor::from_f32(vec![n, c], x.clone()).unwrap();
            let sparse = compute(
                &node("SparseSoftmaxCrossEntropyWithLogits", &[]),
                &[logits.clone(), Tensor::from_i32(vec![n], k.clone()).unwrap()],
            )
            .unwrap();
            let dense = compute(
                &node("SoftmaxCrossEntropyWithLogits", &[]),
                &[logits, Tensor::from_f32(vec![n, c], onehot.clone()).unwrap()],
            )
            .unwrap();
            assert_eq!(sparse[0].as_f32().unwrap(), dense[0].as_f32().unwrap(), "loss {n}x{c}");
            assert_eq!(sparse[1].as_f32().unwrap(), dense[1].as_f32().unwrap(), "backprop {n}x{c}");
            for r in 0..n {
                let row: Vec<f64> = x[r * c..(r + 1) * c].iter().map(|&v| f64::from(v)).collect();
                let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let lse = row.iter().map(|v| (v - m).exp()).sum::<f64>().ln() + m;
                let loss = lse - row[k[r] as usize];
                let got = f64::from(sparse[0].as_f32().unwrap()[r]);
                assert!((got - loss).abs() <= 1e-5 * loss.abs().max(1.0), "row {r}: {got} vs {loss}");
                for j in 0..c {
                    let want = (row[j] - lse).exp() - f64::from(onehot[r * c + j]);
                    let got = f64::from(sparse[1].as_f32().unwrap()[r * c + j]);
                    assert!((got - want).abs() <= 1e-6, "row {r} class {j}: {got} vs {want}");
                }
            }
        }
    }

    #[test]
    fn xent_loss_and_backprop() {
        let logits = Tensor::from_f32(vec![1, 2], vec![0.0, 0.0]).unwrap();
        let labels = Tensor::from_f32(vec![1, 2], vec![1.0, 0.0]).unwrap();
        let o = compute(&node("SoftmaxCrossEntropyWithLogits", &[]), &[logits.clone(), labels]).unwrap();
        assert!((o[0].as_f32().unwrap()[0] - std::f32::consts::LN_2).abs() < 1e-6);
        assert_eq!(o[1].as_f32().unwrap(), &[-0.5, 0.5]);
        let sl = Tensor::from_i32(vec![1], vec![1]).unwrap();
        let o = compute(&node("SparseSoftmaxCrossEntropyWithLogits", &[]), &[logits.clone(), sl]).unwrap();
        assert_eq!(o[1].as_f32().unwrap(), &[0.5, -0.5]);
        let bad = Tensor::from_i32(vec![1], vec![2]).unwrap();
        let e = compute(&node("SparseSoftmaxCrossEntropyWithLogits", &[]), &[logits, bad]).unwrap_err();
        // TensorFlow 2.21's text, every label listed.
        assert_eq!(
            e.to_string(),
            "Received a label value of 2 which is outside the valid range of [0, 2).  Label values: 2"
        );
    }

    #[test]
    fn bias_add_and_grad() {
        let v = Tensor::from_f32(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        let b = Tensor::from_f32(vec![2], vec![10.0, 20.0]).unwrap();
        let r = run1(&node("BiasAdd", &[]), &[v.clone(), b]).unwrap();
        assert_eq!(r.as_f32().unwrap(), &[11.0, 22.0, 13.0, 24.0]);
        let g = run1(&node("BiasAddGrad", &[]), std::slice::from_ref(&v)).unwrap();
        assert_eq!(g.as_f32().unwrap(), &[4.0, 6.0]);
        let bad = Tensor::from_f32(vec![3], vec![0.0; 3]).unwrap();
        assert!(run1(&node("BiasAdd", &[]), &[v, bad]).is_err());
    }

    #[test]
    fn activation_grads() {
        let dy = Tensor::from_f32(vec![3], vec![1.0, 2.0, 3.0]).unwrap();
        let x = Tensor::from_f32(vec![3], vec![-1.0, 0.0, 0.5]).unwrap();
        let r = run1(&node("ReluGrad", &[]), &[dy.clone(), x.clone()]).unwrap();
        assert_eq!(r.as_f32().unwrap(), &[0.0, 0.0, 3.0]);
        // TensorFlow 2.21: `dy · (x > 0)` (and `· (x < 6)`), so NaN and ±inf gradients at
        // masked positions are NaN, and a negative one there −0.
        let dy2 = Tensor::from_f32(vec![5], vec![f32::NAN, f32::INFINITY, -2.0, f32::INFINITY, 2.0]).unwrap();
        let x2 = Tensor::from_f32(vec![5], vec![-1.0, 0.0, -1.0, 7.0, f32::NAN]).unwrap();
        let bits = |t: &Tensor| {
            t.as_f32().unwrap().iter().map(|v| if v.is_nan() { u32::MAX } else { v.to_bits() }).collect::<Vec<_>>()
        };
        let want = |v: [f32; 5]| bits(&Tensor::from_f32(vec![5], v.to_vec()).unwrap());
        let r = run1(&node("ReluGrad", &[]), &[dy2.clone(), x2.clone()]).unwrap();
        assert_eq!(bits(&r), want([f32::NAN, f32::NAN, -0.0, f32::INFINITY, 0.0]));
        let r = run1(&node("Relu6Grad", &[]), &[dy2, x2]).unwrap();
        assert_eq!(bits(&r), want([f32::NAN, f32::NAN, -0.0, f32::NAN, 0.0]));
        // (gradients, features) and (gradients, outputs) forms of Keras's activations.
        let alpha = [("alpha", autoclust_graph::AttrValue::F(0.1))];
        let r = run1(&node("LeakyReluGrad", &alpha), &[dy.clone(), x.clone()]).unwrap();
        assert_eq!(r.as_f32().unwrap(), &[0.1, 0.2, 3.0]);
        let r = run1(&node("EluGrad", &[]), &[dy.clone(), x.clone()]).unwrap();
        assert_eq!(r.as_f32().unwrap(), &[0.0, 2.0, 3.0]);
        let r = run1(&node("SeluGrad", &[]), &[dy.clone(), x.clone()]).unwrap();
        let (scale, scale_alpha) = (1.050_700_987_355_480_5f64 as f32, 1.758_099_340_847_376_9f64 as f32);
        assert_eq!(r.as_f32().unwrap(), &[-1.0 + scale_alpha, 2.0 * scale, 3.0 * scale]);
        let r = run1(&node("SoftplusGrad", &[]), &[dy.clone(), x.clone()]).unwrap();
        let want: Vec<f32> =
            [(1.0f32, -1.0f32), (2.0, 0.0), (3.0, 0.5)].iter().map(|&(g, x)| g / ((-x).exp() + 1.0)).collect();
        assert_eq!(r.as_f32().unwrap(), &want[..]);
        let r = run1(&node("SoftsignGrad", &[]), &[dy.clone(), x.clone()]).unwrap();
        assert_eq!(r.as_f32().unwrap(), &[0.25, 2.0, 3.0 / 2.25]);
        let t = run1(&node("TanhGrad", &[]), &[x.clone(), dy.clone()]).unwrap();
        assert_eq!(t.as_f32().unwrap(), &[0.0, 2.0, 2.25]);
        let inv = run1(&node("ReciprocalGrad", &[]), &[x.clone(), dy.clone()]).unwrap();
        assert_eq!(inv.as_f32().unwrap(), &[-1.0, 0.0, -0.75]);
        let s = run1(&node("SigmoidGrad", &[]), &[x, dy]).unwrap();
        assert_eq!(s.as_f32().unwrap(), &[-2.0, 0.0, 0.75]);
    }

    #[test]
    fn broadcast_gradient_args_matches_tf() {
        assert_eq!(broadcast_gradient_args(&[2, 3], &[3]).unwrap(), (vec![], vec![0]));
        assert_eq!(broadcast_gradient_args(&[4, 1], &[1, 5]).unwrap(), (vec![1], vec![0]));
        assert_eq!(broadcast_gradient_args(&[], &[2, 2]).unwrap(), (vec![0, 1], vec![]));
        assert!(broadcast_gradient_args(&[2], &[3]).is_err());
    }
}
