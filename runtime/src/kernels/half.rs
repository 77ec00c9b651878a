//! Half-precision ops: `float16` and `bfloat16`, as TensorFlow's CPU kernels compute them.
//!
//! TensorFlow's CPU kernels on `Eigen::half` and `Eigen::bfloat16` compute every arithmetic
//! operation in float32 and round the result to the half type (Eigen's operators convert
//! both operands to `float`, compute, and convert back with round-to-nearest-even). So a
//! half-precision op here is the float32 kernel of the same op (its half type attributes
//! rewritten to `float32`), with its half inputs widened exactly and its half outputs rounded
//! to nearest-even: one rounding per op, as in TensorFlow. Keras' `mixed_float16` and
//! `mixed_bfloat16` policies put such ops in every training step (the forward and backward
//! pass in half precision, the variables and the optimizer in float32).
//!
//! `Cast` to or from a half type is handled directly (a float32 step in between, as
//! `static_cast` through Eigen's half types does). Half tensors are stored as their
//! little-endian bit patterns ([`TensorData::Raw`], two bytes per element), the form
//! constants, feeds and safetensors files give them.
//!
//! Outputs whose signature type is not a half attribute (FusedBatchNormV3's float32
//! statistics under `U = float`, an `ArgMax`'s index) are passed through unchanged.

use autoclust_graph::half::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16, half_program, HalfStep};
use autoclust_graph::{AttrValue, DType, ListValue, Node, Tensor, TensorData};

use super::{Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

/// A half tensor widened to float32 (exact).
pub fn widen(t: &Tensor) -> KResult<Tensor> {
    autoclust_graph::half::widen(t).ok_or_else(|| match &t.data {
        TensorData::Raw(bytes) if t.dtype.is_half() => KernelError::invalid(format!(
            "a {} tensor of {} elements has {} bytes",
            t.dtype,
            t.num_elements(),
            bytes.len()
        )),
        _ => KernelError::DType(t.dtype),
    })
}

/// A float32 tensor rounded to the half type `dtype`.
pub fn narrow(t: &Tensor, dtype: DType) -> KResult<Tensor> {
    autoclust_graph::half::narrow(t, dtype).ok_or(KernelError::DType(t.dtype))
}

/// The node's type attributes (single or list) that name a half type.
fn half_attrs(node: &Node) -> bool {
    node.attrs.values().any(|v| match v {
        AttrValue::Type(d) => d.is_half(),
        AttrValue::List(ListValue::Type(l)) => l.iter().any(|d| d.is_half()),
        _ => false,
    })
}

/// The kernel of a node with a half type attribute, or `None` for any other node.
pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    // A constant's value is already in its type: nothing to compute. A bitcast reinterprets
    // the half bytes, and a sampler draws half values from its own bits: their own kernels.
    if !half_attrs(node)
        || matches!(node.op.as_str(), "Const" | "Bitcast")
        || super::random::FLOAT_SAMPLERS.contains(&node.op.as_str())
    {
        return Ok(None);
    }
    if node.op == "Cast" {
        let dst = super::attr_type(node, "DstT")?;
        return Ok(Some(Box::new(move |inp: Inputs| {
            super::arity(&inp, 1)?;
            let x = &inp[0];
            let wide = if x.dtype.is_half() { widen(x)? } else { x.clone() };
            let out = if dst.is_half() {
                narrow(&super::elementwise::cast(&wide, DType::Float32)?, dst)?
            } else {
                super::elementwise::cast(&wide, dst)?
            };
            super::one(out)
        })));
    }
    if let Some(f) = rounded_per_step(node)? {
        return Ok(Some(f));
    }
    let out_types = autoclust_graph::infer::attr_output_dtypes(node).ok_or_else(|| {
        KernelError::invalid(format!("cannot tell the output types of {} in half precision", node.op))
    })?;
    let mut wide = node.clone();
    for v in wide.attrs.values_mut() {
        match v {
            AttrValue::Type(d) if d.is_half() => *d = DType::Float32,
            AttrValue::List(ListValue::Type(list)) => {
                for d in list.iter_mut().filter(|d| d.is_half()) {
                    *d = DType::Float32;
                }
            }
            _ => {}
        }
    }
    let kernel = super::prepare(&wide)?;
    Ok(Some(Box::new(move |inp: Inputs| {
        let inp: Inputs =
            inp.into_iter().map(|t| if t.dtype.is_half() { widen(&t) } else { Ok(t) }).collect::<KResult<_>>()?;
        let outs = kernel(inp)?;
        outs.into_iter()
            .enumerate()
            .map(|(i, t)| match out_types.get(i) {
                Some(&d) if d.is_half() && t.dtype == DType::Float32 => narrow(&t, d),
                _ => Ok(t),
            })
            .collect::<KResult<Outputs>>()
    })))
}

/// Ops whose TensorFlow kernel is an expression of several half-precision operations, each
/// rounded: the programs of `autoclust_graph::half::half_program` (`AddN` left to right,
/// `Sigmoid`, `Elu`, `Selu`, `LeakyRelu`, `Softplus`, gradients, float16 `Mean` — the compiler builds the
/// same programs into cluster bodies), run here with the float32 kernels; and `Cross`, which
/// rounds each product and each difference (`a₁b₂ − a₂b₁`: three roundings). Computing them
/// with the same roundings gives TensorFlow's bits; one rounding at the end would not.
fn rounded_per_step(node: &Node) -> KResult<Option<PureFn>> {
    let Some(dtype) = node.attr("T").and_then(AttrValue::as_type).filter(|d| d.is_half()) else {
        return Ok(None);
    };
    if node.op == "Cross" {
        let to_bits = if dtype == DType::BFloat16 { f32_to_bf16 } else { f32_to_f16 };
        let from_bits = if dtype == DType::BFloat16 { bf16_to_f32 } else { f16_to_f32 };
        let round = move |x: f32| from_bits(to_bits(x));
        // Each product and difference rounded (a product past the half range is infinite).
        return Ok(Some(Box::new(move |inp: Inputs| {
            super::arity(&inp, 2)?;
            if inp[1].dtype != dtype {
                return Err(KernelError::DType(inp[1].dtype));
            }
            super::one(narrow(&super::linalg::cross(&widen(&inp[0])?, &widen(&inp[1])?, round)?, dtype)?)
        })));
    }
    if matches!(node.op.as_str(), "Cumsum" | "Cumprod") {
        return Ok(Some(half_scan(node, dtype)));
    }
    if node.op == "BiasAddGrad" && autoclust_graph::half::bias_grad_rounds_rows(node) {
        // Rows added in order, each partial sum rounded to bfloat16 (TensorFlow 2.21's bits).
        return Ok(Some(Box::new(move |inp: Inputs| {
            super::arity(&inp, 1)?;
            let x = &inp[0];
            if x.dtype != dtype || x.rank() == 0 {
                return Err(KernelError::invalid(format!("BiasAddGrad needs a {dtype} tensor of rank >= 1")));
            }
            let cols = *x.shape.last().expect("rank >= 1");
            let wide = widen(x)?;
            let v = autoclust_numeric::reduce::column_sums_rounded(
                wide.as_f32().ok_or(KernelError::DType(wide.dtype))?,
                cols,
                |v| autoclust_graph::half::round_to(v, dtype),
            );
            let sums = Tensor::from_f32(vec![cols], v).map_err(|e| KernelError::invalid(e.to_string()))?;
            super::one(narrow(&sums, dtype)?)
        })));
    }
    let n = node.attr("N").and_then(AttrValue::as_int).unwrap_or(0).max(0) as usize;
    let Some(program) = half_program(node, n, dtype) else { return Ok(None) };
    enum Run {
        Input(usize),
        Operand(usize),
        Const(Tensor),
        Kernel(PureFn, Vec<usize>),
        Round(usize),
    }
    let arity = {
        // The op's inputs: those the program reads (all N of an AddN).
        let read = program.steps.iter().filter_map(|s| match s {
            HalfStep::Input(k) | HalfStep::Operand(k) => Some(k + 1),
            _ => None,
        });
        read.max().unwrap_or(0)
    };
    // The inputs that are half values (not operands such as a reduction's axes).
    let halves: Vec<usize> =
        program.steps.iter().filter_map(|s| if let HalfStep::Input(k) = s { Some(*k) } else { None }).collect();
    let mut steps = Vec::with_capacity(program.steps.len());
    for step in program.steps {
        steps.push(match step {
            HalfStep::Input(k) => Run::Input(k),
            HalfStep::Operand(k) => Run::Operand(k),
            HalfStep::Const(x) => Run::Const(Tensor::scalar_f32(x)),
            HalfStep::Round(v) => Run::Round(v),
            HalfStep::Op { op, args, attrs } => {
                let mut all = attrs;
                all.push(("T", AttrValue::Type(DType::Float32)));
                Run::Kernel(super::prepare(&Node::unconnected(&node.name, op, &all))?, args)
            }
        });
    }
    // AddN and the gradient ops take operands of one shape (TensorFlow's checks); the
    // programs' float32 steps would broadcast them.
    let same_shapes = node.op == "AddN" || node.op.ends_with("Grad");
    let op = node.op.clone();
    Ok(Some(Box::new(move |inp: Inputs| {
        super::arity(&inp, arity)?;
        if let Some(t) = halves.iter().map(|&k| &inp[k]).find(|t| t.dtype != dtype) {
            return Err(KernelError::DType(t.dtype));
        }
        if same_shapes && inp.iter().any(|t| t.shape != inp[0].shape) {
            return Err(KernelError::invalid(format!(
                "{op}: inputs must have the same shape, got {:?}",
                inp.iter().map(|t| t.shape.clone()).collect::<Vec<_>>()
            )));
        }
        let mut values: Vec<Tensor> = Vec::with_capacity(steps.len());
        for step in &steps {
            let v = match step {
                Run::Input(k) => widen(&inp[*k])?,
                Run::Operand(k) => inp[*k].clone(),
                Run::Const(t) => t.clone(),
                Run::Round(v) => widen(&narrow(&values[*v], dtype)?)?,
                Run::Kernel(kernel, args) => {
                    let outs = kernel(args.iter().map(|&a| values[a].clone()).collect())?;
                    outs.into_iter()
                        .next()
                        .ok_or_else(|| KernelError::invalid("a half-precision step gave no value"))?
                }
            };
            values.push(v);
        }
        let last = values.pop().expect("a program has steps");
        super::one(narrow(&last, dtype)?)
    })))
}

/// `Cumsum`/`Cumprod` in float16/bfloat16 as TensorFlow's CPU scan computes them: the
/// running value is a half number, rounded after every step (Eigen's scan keeps its
/// accumulator in the element type), so 3,000 float16 ones sum to 2048 — where `2048 + 1`
/// rounds back to 2048 — not to 3000. The JIT does not compile these (they stay out of
/// clusters: `jit_ops::float_type_refusal`), so both modes give TensorFlow's bits.
fn half_scan(node: &Node, dtype: DType) -> PureFn {
    let prod = node.op == "Cumprod";
    let exclusive = node.attr("exclusive").and_then(AttrValue::as_bool).unwrap_or(false);
    let reverse = node.attr("reverse").and_then(AttrValue::as_bool).unwrap_or(false);
    let to_bits = if dtype == DType::BFloat16 { f32_to_bf16 } else { f32_to_f16 };
    let from_bits = if dtype == DType::BFloat16 { bf16_to_f32 } else { f16_to_f32 };
    let round = move |x: f32| from_bits(to_bits(x));
    Box::new(move |inp: Inputs| {
        super::arity(&inp, 2)?;
        if inp[0].dtype != dtype {
            return Err(KernelError::DType(inp[0].dtype));
        }
        let t = widen(&inp[0])?;
        // The axis is checked first, as the float kernel checks it (a scalar scans to itself).
        let axis = super::norm_axis(super::int_scalar(&inp[1], "axis")?, t.rank().max(1), "cumulative axis")?;
        if t.rank() == 0 {
            return super::one(inp[0].clone());
        }
        let dims = (t.shape[..axis].iter().product(), t.shape[axis], t.shape[axis + 1..].iter().product());
        let x = t.as_f32().ok_or(KernelError::DType(t.dtype))?;
        let v = if prod {
            autoclust_numeric::reduce::cumulative(x, dims, 1.0, |a, b| round(a * b), exclusive, reverse)
        } else {
            autoclust_numeric::reduce::cumulative(x, dims, 0.0, |a, b| round(a + b), exclusive, reverse)
        };
        let wide = Tensor::from_f32(t.shape.clone(), v).map_err(|e| KernelError::invalid(e.to_string()))?;
        super::one(narrow(&wide, dtype)?)
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::node;
    use super::*;

    fn f16_tensor(v: &[f32]) -> Tensor {
        let t = Tensor::from_f32(vec![v.len()], v.to_vec()).unwrap();
        narrow(&t, DType::Float16).unwrap()
    }

    /// `Cross` in float16 and bfloat16 rounds each product: `300·300 − 299·301` is `inf − inf`
    /// in float16 (NaN, TensorFlow 2.21's bits), not 1; bfloat16's products round to equal values.
    #[test]
    fn half_cross_rounds_each_product() {
        for (dtype, want) in [(DType::Float16, [24866u16, 57638, 65024]), (DType::BFloat16, [17444, 50212, 0])] {
            let bits = |v: [f32; 3]| {
                let t = Tensor::from_f32(vec![3], v.to_vec()).unwrap();
                narrow(&t, dtype).unwrap()
            };
            let cross = super::super::prepare(&node("Cross", &[("T", AttrValue::Type(dtype))])).unwrap();
            let out = cross([bits([300.0, 299.0, 1.1]), bits([301.0, 300.0, 3.3])].into_iter().collect()).unwrap();
            let got: Vec<u16> =
                out[0].to_le_bytes().unwrap().chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
            assert_eq!(got, want, "{dtype}");
        }
    }

    /// `Cumsum`/`Cumprod` in half precision accumulate in the half type, as TensorFlow
    /// 2.21's CPU scan does (`tf.cumsum(tf.ones([3000], tf.float16))[-1]` is 2048, bfloat16
    /// ones stop at 256; exclusive and reverse walk the same running value).
    #[test]
    fn half_scans_accumulate_in_the_half_type() {
        let scan = |op: &str, dtype: DType, v: &[f32], exclusive: bool, reverse: bool| {
            let t = narrow(&Tensor::from_f32(vec![v.len()], v.to_vec()).unwrap(), dtype).unwrap();
            let k = super::super::prepare(&node(
                op,
                &[
                    ("T", AttrValue::Type(dtype)),
                    ("Tidx", AttrValue::Type(DType::Int32)),
                    ("exclusive", AttrValue::B(exclusive)),
                    ("reverse", AttrValue::B(reverse)),
                ],
            ))
            .unwrap();
            let out = k([t, Tensor::scalar_i32(0)].into_iter().collect()).unwrap();
            assert_eq!(out[0].dtype, dtype);
            widen(&out[0]).unwrap().as_f32().unwrap().to_vec()
        };
        let (f16, bf16) = (DType::Float16, DType::BFloat16);
        let sums = scan("Cumsum", f16, &[1.0; 3000], false, false);
        assert_eq!((sums[2046], sums[2047], sums[2048], sums[2999]), (2047.0, 2048.0, 2048.0, 2048.0));
        assert_eq!(*scan("Cumsum", bf16, &[1.0; 600], false, false).last().unwrap(), 256.0);
        assert_eq!(scan("Cumsum", f16, &[1.0, 2.0, 4.0], true, false), [0.0, 1.0, 3.0]);
        assert_eq!(scan("Cumsum", f16, &[1.0, 2.0, 4.0], true, true), [6.0, 4.0, 0.0]);
        // 1.01 in bfloat16 is 1.0078125; each product rounds to 8 significant bits.
        let mut want = 1.0f32;
        for _ in 0..300 {
            want = autoclust_graph::half::bf16_to_f32(f32_to_bf16(want * bf16_to_f32(f32_to_bf16(1.01))));
        }
        assert_eq!(*scan("Cumprod", bf16, &[1.01; 300], false, false).last().unwrap(), want);
        assert_ne!(want, bf16_to_f32(f32_to_bf16(bf16_to_f32(f32_to_bf16(1.01)).powi(300))));
    }

    /// A float16 `Mean` is TensorFlow's half sum over the count as a half value (TensorFlow
    /// 2.21, `tf.reduce_mean` on float16 constants): a sum past 65,504 is infinite, 2049
    /// elements count as 2048, past 65,519 elements the count is infinite (a mean of 0). A
    /// bfloat16 mean is the float32 mean rounded once (300 ones and a zero: 0.99609375).
    #[test]
    fn a_float16_mean_sums_and_counts_in_float16() {
        let mean = |dtype: DType, v: &[f32], shape: Vec<usize>, axes: Vec<i32>| {
            let t = Tensor::from_f32(shape, v.to_vec()).unwrap();
            let n = axes.len();
            let m = super::super::prepare(&node(
                "Mean",
                &[
                    ("T", AttrValue::Type(dtype)),
                    ("Tidx", AttrValue::Type(DType::Int32)),
                    ("keep_dims", AttrValue::B(false)),
                ],
            ))
            .unwrap();
            let out = m([narrow(&t, dtype).unwrap(), Tensor::from_i32(vec![n], axes).unwrap()].into_iter().collect())
                .unwrap();
            assert_eq!(out[0].dtype, dtype);
            widen(&out[0]).unwrap().as_f32().unwrap().to_vec()
        };
        let f16 = DType::Float16;
        assert_eq!(mean(f16, &[40000.0, 40000.0], vec![2], vec![0]), [f32::INFINITY]);
        assert_eq!(mean(f16, &[40000.0, 40000.0, 1.0, 2.0], vec![2, 2], vec![1]), [f32::INFINITY, 1.5]);
        let mut ones = vec![1.0; 2048];
        ones.push(0.0);
        assert_eq!(mean(f16, &ones, vec![2049], vec![0]), [1.0]);
        assert_eq!(mean(f16, &vec![0.001; 70000], vec![70000], vec![0]), [0.0]);
        assert!(mean(f16, &[], vec![0, 3], vec![0]).iter().all(|x| x.is_nan()));
        let mut bf = vec![1.0; 300];
        bf.push(0.0);
        assert_eq!(mean(DType::BFloat16, &bf, vec![301], vec![0]), [0.99609375]);
    }

    #[test]
    fn an_op_rounds_once_to_its_half_type() {
        // 1 + 2^-10 is the binary16 after 1; half of it added to 1 ties to even (1), in one
        // rounding; a sum of float32 values rounded once.
        let add = super::super::prepare(&node("AddV2", &[("T", AttrValue::Type(DType::Float16))])).unwrap();
        let a = f16_tensor(&[1.0, 2048.0, 0.1]);
        let b = f16_tensor(&[1.0 / 1024.0, 1.0, 0.2]);
        let out = add([a, b].into_iter().collect()).unwrap();
        assert_eq!(out[0].dtype, DType::Float16);
        let got = widen(&out[0]).unwrap();
        let want: Vec<f32> = [
            1.0 + 1.0 / 1024.0,
            2048.0,
            f16_to_f32(f32_to_f16(f16_to_f32(f32_to_f16(0.1)) + f16_to_f32(f32_to_f16(0.2)))),
        ]
        .to_vec();
        assert_eq!(got.as_f32().unwrap(), want.as_slice());
    }

    #[test]
    fn add_n_and_sigmoid_round_as_tensorflow_does() {
        // AddN adds left to right, rounding each sum: 1 + 2^-11 ties to even (1) twice, where
        // one rounding of the whole sum would give 1 + 2^-10.
        let add_n =
            super::super::prepare(&node("AddN", &[("T", AttrValue::Type(DType::Float16)), ("N", AttrValue::I(3))]))
                .unwrap();
        let (one, tiny) = (f16_tensor(&[1.0]), f16_tensor(&[1.0 / 2048.0]));
        let out = add_n([one, tiny.clone(), tiny].into_iter().collect()).unwrap();
        assert_eq!(widen(&out[0]).unwrap().as_f32().unwrap(), &[1.0]);
        // Sigmoid: TensorFlow 2.21's float16 bits (tf.sigmoid on a float16 constant), which one
        // rounding of the exact value misses by an ulp.
        let sigmoid = super::super::prepare(&node("Sigmoid", &[("T", AttrValue::Type(DType::Float16))])).unwrap();
        let out = sigmoid([f16_tensor(&[-5.875, -5.75, -5.25, -4.875])].into_iter().collect()).unwrap();
        let TensorData::Raw(bytes) = &out[0].data else { panic!("half bits") };
        let bits: Vec<u16> = bytes.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
        assert_eq!(bits, [6589, 6784, 7513, 8129]);
    }

    /// A bitcast reinterprets the half bytes (TensorFlow 2.21: `tf.bitcast` of float16 7.0
    /// to bfloat16 is 32768); it was once run as a float32 identity, giving 7.0.
    #[test]
    fn bitcast_of_half_keeps_the_bytes() {
        let bitcast = super::super::prepare(&node(
            "Bitcast",
            &[("T", AttrValue::Type(DType::Float16)), ("type", AttrValue::Type(DType::BFloat16))],
        ))
        .unwrap();
        let out = bitcast([f16_tensor(&[7.0, -2.0])].into_iter().collect()).unwrap();
        assert_eq!(out[0].dtype, DType::BFloat16);
        assert_eq!(widen(&out[0]).unwrap().as_f32().unwrap(), &[32768.0, bf16_to_f32(0xc000)]);
    }

    /// The step programs of AddN and the gradient ops keep TensorFlow's equal-shape check
    /// (their float32 steps would broadcast a `[1]` operand).
    #[test]
    fn half_add_n_and_gradients_refuse_mismatched_shapes() {
        let add_n =
            super::super::prepare(&node("AddN", &[("T", AttrValue::Type(DType::Float16)), ("N", AttrValue::I(2))]))
                .unwrap();
        let err = add_n([f16_tensor(&[1.0, 2.0, 3.0]), f16_tensor(&[10.0])].into_iter().collect()).unwrap_err();
        assert!(err.to_string().contains("same shape"), "{err}");
        let grad = super::super::prepare(&node("TanhGrad", &[("T", AttrValue::Type(DType::Float16))])).unwrap();
        assert!(grad([f16_tensor(&[0.5, 0.25]), f16_tensor(&[1.0])].into_iter().collect()).is_err());
        let ok = grad([f16_tensor(&[0.5]), f16_tensor(&[2.0])].into_iter().collect()).unwrap();
        assert_eq!(widen(&ok[0]).unwrap().as_f32().unwrap(), &[1.5]);
    }

    #[test]
    fn cast_goes_through_float32_and_keeps_other_outputs() {
        let to_half = super::super::prepare(&node(
            "Cast",
            &[("SrcT", AttrValue::Type(DType::Int32)), ("DstT", AttrValue::Type(DType::BFloat16))],
        ))
        .unwrap();
        let out = to_half([Tensor::from_i32(vec![2], vec![3, 257]).unwrap()].into_iter().collect()).unwrap();
        assert_eq!(out[0].dtype, DType::BFloat16);
        // 257 is not a bfloat16: it rounds to 256 (ties to even).
        assert_eq!(widen(&out[0]).unwrap().as_f32().unwrap(), &[3.0, 256.0]);
        let back = super::super::prepare(&node(
            "Cast",
            &[("SrcT", AttrValue::Type(DType::BFloat16)), ("DstT", AttrValue::Type(DType::Int64))],
        ))
        .unwrap();
        let out = back(out.into_iter().collect()).unwrap();
        assert_eq!(out[0].as_i64().unwrap(), &[3, 256]);
        // ArgMax on a half input: its index output is not rounded.
        let argmax = super::super::prepare(&node(
            "ArgMax",
            &[
                ("T", AttrValue::Type(DType::Float16)),
                ("Tidx", AttrValue::Type(DType::Int32)),
                ("output_type", AttrValue::Type(DType::Int64)),
            ],
        ))
        .unwrap();
        let out = argmax([f16_tensor(&[0.5, 3.0, -1.0]), Tensor::scalar_i32(0)].into_iter().collect()).unwrap();
        assert_eq!(out[0].as_i64().unwrap(), &[1]);
    }
}
