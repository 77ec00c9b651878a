//! `QuantizeAndDequantizeV2`/`V3`/`V4` and `QuantizeAndDequantizeV4Grad`
//! (`quantize_and_dequantize_op.h`): a round trip of float values through `num_bits`-bit
//! integers that keeps 0 exact, as quantisation-aware training and post-training calibration
//! graphs insert it.
//!
//! The range `[min, max]` is the input's own (`range_given` false: its minimum and maximum,
//! per slice along `axis` when `axis ≥ 0`) or the operands'. The integer range is
//! `[−2^(b−1) (+1 with narrow_range), 2^(b−1) − 1]` signed, `[0, 2^b − 1]` unsigned. The scale
//! is the largest that maps neither end outside it: `qmin / min` and `qmax / max` (each only
//! where the product is positive, else the type's maximum), the smaller taken, and the range's
//! other end moved to match (`max = qmax · min / qmin`, or `min = qmin · max / qmax`). Each
//! value is clamped to the range, multiplied by the scale, rounded (half to even, or half up:
//! `floor(x + ½)`) and multiplied by the inverse scale — all in the input's type, in
//! TensorFlow's order, so float32 results match bit for bit.
//!
//! The gradient passes `gradients` where `min ≤ input ≤ max` (per channel along `axis`) and is
//! 0 elsewhere; the range's gradients are zeros.
//!
//! TensorFlow 2.21 quirk kept: with `range_given` and `axis ≥ 0` its shape function demands
//! vector ranges and its kernel scalar ones, so that combination always fails; here it fails
//! with the kernel's message.

use autoclust_graph::{Node, Tensor};

use super::elementwise::Float;
use super::{arity, attr_bool_or, dispatch_float, one, tensor_of, Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

/// The attributes of one quantize-and-dequantize op.
#[derive(Clone, Copy, Debug)]
struct Qdq {
    signed: bool,
    range_given: bool,
    narrow: bool,
    half_up: bool,
    axis: i64,
    /// `num_bits`; `None` for `V3`, which takes it as an operand.
    bits: Option<i64>,
}

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let op = node.op.as_str();
    if op == "QuantizeAndDequantizeV4Grad" {
        let axis = super::attr_int_or(node, "axis", -1)?;
        return Ok(Some(Box::new(move |inp: Inputs| {
            arity(&inp, 4)?;
            let dt = inp[0].dtype;
            if inp[1].dtype != dt || inp[2].dtype != dt || inp[3].dtype != dt {
                return Err(KernelError::invalid("QuantizeAndDequantizeV4Grad: operands must share one dtype"));
            }
            let dx = dispatch_float!(dt, gradient(&inp[0], &inp[1], &inp[2], &inp[3], axis))?;
            let zeros =
                |t: &Tensor| Tensor::zeros(t.dtype, t.shape.clone()).map_err(|e| KernelError::invalid(e.to_string()));
            let mut out = Outputs::new();
            out.push(dx);
            out.push(zeros(&inp[2])?);
            out.push(zeros(&inp[3])?);
            Ok(out)
        })));
    }
    if !matches!(op, "QuantizeAndDequantizeV2" | "QuantizeAndDequantizeV3" | "QuantizeAndDequantizeV4") {
        return Ok(None);
    }
    let v3 = op == "QuantizeAndDequantizeV3";
    let round = match node.attr("round_mode").and_then(|a| a.as_str()) {
        None | Some("HALF_TO_EVEN") => false,
        Some("HALF_UP") => true,
        Some(m) => return Err(KernelError::invalid(format!("round_mode must be HALF_TO_EVEN or HALF_UP, got {m}"))),
    };
    let q = Qdq {
        signed: attr_bool_or(node, "signed_input", true)?,
        range_given: attr_bool_or(node, "range_given", v3)?,
        narrow: attr_bool_or(node, "narrow_range", false)?,
        half_up: round && !v3,
        axis: super::attr_int_or(node, "axis", -1)?,
        bits: if v3 { None } else { Some(super::attr_int_or(node, "num_bits", 8)?) },
    };
    Ok(Some(Box::new(move |inp: Inputs| {
        arity(&inp, if v3 { 4 } else { 3 })?;
        let bits = match q.bits {
            Some(b) => b,
            None => super::int_scalar(&inp[3], "num_bits")?,
        };
        if bits <= 0 || bits >= if q.signed { 62 } else { 63 } {
            return Err(KernelError::invalid(format!(
                "num_bits is out of range: {bits} with signed_input_ {}",
                q.signed
            )));
        }
        let dt = inp[0].dtype;
        if inp[1].dtype != dt || inp[2].dtype != dt {
            return Err(KernelError::invalid("input_min and input_max must have the input's dtype"));
        }
        one(dispatch_float!(dt, quantize(&q, bits, &inp[0], &inp[1], &inp[2]))?)
    })))
}

/// The index along `axis` (`None`: −1, the whole tensor as one channel) of each element,
/// as `(channels, inner)`: element `e` is in channel `(e / inner) % channels`.
fn channels(x: &Tensor, axis: i64) -> KResult<Option<(usize, usize)>> {
    if axis == -1 {
        return Ok(None);
    }
    let rank = x.rank() as i64;
    if axis < -1 || axis >= rank {
        return Err(KernelError::invalid(format!(
            "Axis requested is larger than input dimensions. Axis: {axis} Input Dimensions: {rank}"
        )));
    }
    let a = axis as usize;
    Ok(Some((x.shape[a], x.shape[a + 1..].iter().product())))
}

fn quantize<T: Float>(q: &Qdq, bits: i64, x: &Tensor, min: &Tensor, max: &Tensor) -> KResult<Tensor> {
    let v = T::slice(x);
    let per = channels(x, q.axis)?;
    let depth = per.map_or(1, |(d, _)| d);
    let ranges: Vec<(T, T)> = if q.range_given {
        if per.is_some() {
            return Err(KernelError::invalid("input_min must be a scalar."));
        }
        let (lo, hi) = (scalar::<T>(min, "input_min")?, scalar::<T>(max, "input_max")?);
        if lo > hi {
            return Err(KernelError::invalid(format!(
                "Invalid range: input_min {} > input_max {}",
                lo.to_f64(),
                hi.to_f64()
            )));
        }
        vec![(lo, hi)]
    } else {
        let mut r = vec![(T::from_f64(f64::INFINITY), T::from_f64(f64::NEG_INFINITY)); depth];
        for (e, &x) in v.iter().enumerate() {
            let c = per.map_or(0, |(d, inner)| (e / inner.max(1)) % d);
            let (lo, hi) = &mut r[c];
            if x < *lo {
                *lo = x;
            }
            if x > *hi {
                *hi = x;
            }
        }
        r
    };
    let qmin: i64 = if q.signed { -(1i64 << (bits - 1)) + i64::from(q.narrow) } else { 0 };
    let qmax: i64 = if q.signed { (1i64 << (bits - 1)) - 1 } else { (1i64 << bits) - 1 };
    let (qmin, qmax) = (T::from_f64(qmin as f64), T::from_f64(qmax as f64));
    let zero = T::from_f64(0.0);
    let big = T::from_f64(if std::mem::size_of::<T>() == 4 { f64::from(f32::MAX) } else { f64::MAX });
    // (min, max, scale, inverse scale) per channel.
    let params: Vec<(T, T, T, T)> = ranges
        .into_iter()
        .map(|(lo, hi)| {
            let from_min = if qmin.mul(lo) > zero { qmin.div(lo) } else { big };
            let from_max = if qmax.mul(hi) > zero { qmax.div(hi) } else { big };
            if from_min < from_max {
                let inv = lo.div(qmin);
                (lo, qmax.mul(inv), from_min, inv)
            } else {
                let inv = hi.div(qmax);
                (qmin.mul(inv), hi, from_max, inv)
            }
        })
        .collect();
    let half = T::from_f64(0.5);
    let out = v
        .iter()
        .enumerate()
        .map(|(e, &x)| {
            let c = per.map_or(0, |(d, inner)| (e / inner.max(1)) % d);
            let (lo, hi, scale, inv) = params[c];
            // Only a given range clamps (TensorFlow's `ClampScaleAndRound`, Eigen's cwiseMin
            // then cwiseMax: a NaN input stays NaN); a range taken from the input scales
            // alone (`ScaleAndRound`), so with `signed_input = false` a negative input stays
            // negative — TensorFlow 2.21: `[-1.7, 2.5]` in 8 unsigned bits gives
            // `[-1.6960785, 2.5]`.
            let clamped = if q.range_given {
                let c = if x > hi { hi } else { x };
                if c < lo {
                    lo
                } else {
                    c
                }
            } else {
                x
            };
            let s = clamped.mul(scale);
            let r = if q.half_up { s.add(half).floor() } else { s.round_even() };
            r.mul(inv)
        })
        .collect();
    Ok(tensor_of(x.shape.clone(), out))
}

fn gradient<T: Float>(g: &Tensor, x: &Tensor, min: &Tensor, max: &Tensor, axis: i64) -> KResult<Tensor> {
    if g.shape != x.shape {
        return Err(KernelError::invalid(format!(
            "gradients and input must have one shape, got {:?} and {:?}",
            g.shape, x.shape
        )));
    }
    let per = channels(x, axis)?;
    let depth = per.map_or(1, |(d, _)| d);
    let (lo, hi) = (T::slice(min), T::slice(max));
    let want = if per.is_some() { vec![depth] } else { vec![] };
    if min.shape != want || max.shape != want {
        return Err(KernelError::invalid(format!(
            "input_min and input_max must have shape {want:?}, got {:?} and {:?}",
            min.shape, max.shape
        )));
    }
    let zero = T::from_f64(0.0);
    let out = T::slice(g)
        .iter()
        .zip(T::slice(x))
        .enumerate()
        .map(|(e, (&g, &x))| {
            let c = per.map_or(0, |(d, inner)| (e / inner.max(1)) % d);
            if lo[c] <= x && x <= hi[c] {
                g
            } else {
                zero
            }
        })
        .collect();
    Ok(tensor_of(x.shape.clone(), out))
}

fn scalar<T: Float>(t: &Tensor, what: &str) -> KResult<T> {
    match T::slice(t) {
        [v] if t.rank() == 0 => Ok(*v),
        _ => Err(KernelError::invalid(format!("{what} must be a scalar, got shape {:?}", t.shape))),
    }
}

#[cfg(test)]
mod tests {
    use crate::kernels::tests_support::{node, run1};
    use autoclust_graph::{AttrValue, Tensor};

    fn x() -> Tensor {
        let v = [-1.3, 0.27, 2.55, -0.04, 0.5, -2.2, 0.0, 1.01, 3.3, -0.7, 0.125, -3.9];
        Tensor::from_f32(vec![3, 4], v.to_vec()).unwrap()
    }

    fn bits(v: &[f64]) -> Vec<u32> {
        v.iter().map(|&x| (x as f32).to_bits()).collect()
    }

    fn run(op: &str, attrs: &[(&str, AttrValue)], inp: &[Tensor]) -> Result<Vec<u32>, String> {
        run1(&node(op, attrs), inp)
            .map(|t| t.as_f32().unwrap().iter().map(|v| v.to_bits()).collect())
            .map_err(|e| e.to_string())
    }

    /// TensorFlow 2.21's outputs (`tf.raw_ops`, eager), bit for bit: the range from the input
    /// (per tensor and per axis), a given range with narrow_range, unsigned with HALF_UP, V3's
    /// operand `num_bits`, −0 kept, an all-zero input; TensorFlow's errors.
    #[test]
    fn quantize_and_dequantize_matches_tensorflow() {
        let (b, i, s) = (AttrValue::B, AttrValue::I, |v: &str| AttrValue::S(v.as_bytes().to_vec()));
        let sc = Tensor::scalar_f32;
        let auto = run("QuantizeAndDequantizeV2", &[], &[x(), sc(0.0), sc(0.0)]).unwrap();
        #[rustfmt::skip]
        let want = [-1.310156226158142, 0.27421876788139343, 2.559375047683716, -0.03046875074505806, 0.48750001192092896, -2.1937501430511475, 0.0, 1.005468726158142, 3.2906250953674316, -0.7007812857627869, 0.12187500298023224, -3.9000000953674316];
        assert_eq!(auto, bits(&want));
        let given = [("num_bits", i(4)), ("range_given", b(true)), ("narrow_range", b(true))];
        let narrow = run("QuantizeAndDequantizeV2", &given, &[x(), sc(-1.0), sc(2.0)]).unwrap();
        #[rustfmt::skip]
        let want = [-1.4285714626312256, 0.2857142984867096, 2.0, -0.0, 0.5714285969734192, -2.0, 0.0, 1.1428571939468384, 2.0, -0.5714285969734192, 0.0, -2.0];
        assert_eq!(narrow, bits(&want));
        let unsigned =
            [("signed_input", b(false)), ("num_bits", i(3)), ("range_given", b(true)), ("round_mode", s("HALF_UP"))];
        let up = run("QuantizeAndDequantizeV2", &unsigned, &[x(), sc(0.0), sc(3.0)]).unwrap();
        #[rustfmt::skip]
        let want = [0.0, 0.4285714328289032, 2.5714285373687744, 0.0, 0.4285714328289032, 0.0, 0.0, 0.8571428656578064, 3.0, 0.0, 0.0, 0.0];
        assert_eq!(up, bits(&want));
        // Unsigned with the range taken from the input: scaled, never clamped, so negative
        // inputs stay negative (sweep 67; TensorFlow 2.21, per tensor and per axis HALF_UP).
        let neg = Tensor::from_f32(vec![3, 2], vec![0.3, -1.7, 0.05, 2.5, -0.33, 1.0]).unwrap();
        let unsigned_auto = [("signed_input", b(false)), ("num_bits", i(8))];
        let got = run("QuantizeAndDequantizeV2", &unsigned_auto, &[neg.clone(), sc(0.0), sc(0.0)]).unwrap();
        #[rustfmt::skip]
        let want = [0.30392158031463623, -1.6960785388946533, 0.04901960864663124, 2.5, -0.3333333432674408, 1.0];
        assert_eq!(got, bits(&want));
        let zeros2 = Tensor::from_f32(vec![2], vec![0.0; 2]).unwrap();
        let per_axis = [("signed_input", b(false)), ("num_bits", i(4)), ("axis", i(1)), ("round_mode", s("HALF_UP"))];
        let got = run("QuantizeAndDequantizeV4", &per_axis, &[neg, zeros2.clone(), zeros2]).unwrap();
        #[rustfmt::skip]
        let want = [0.30000001192092896, -1.6666667461395264, 0.04000000283122063, 2.5, -0.320000022649765, 1.0];
        assert_eq!(got, bits(&want));
        let zeros4 = Tensor::from_f32(vec![4], vec![0.0; 4]).unwrap();
        let axis =
            run("QuantizeAndDequantizeV4", &[("num_bits", i(5)), ("axis", i(1))], &[x(), zeros4.clone(), zeros4])
                .unwrap();
        #[rustfmt::skip]
        let want = [-1.3199999332427979, 0.2750000059604645, 2.549999952316284, -0.0, 0.4399999976158142, -2.200000047683716, 0.0, 0.9750000238418579, 3.299999952316284, -0.6875, 0.17000000178813934, -3.9000000953674316];
        assert_eq!(axis, bits(&want));
        let v3 = run("QuantizeAndDequantizeV3", &[], &[x(), sc(-2.0), sc(2.0), Tensor::scalar_i32(5)]).unwrap();
        #[rustfmt::skip]
        let want = [-1.3333333730697632, 0.2666666805744171, 2.0, -0.0, 0.5333333611488342, -2.133333444595337, 0.0, 1.0666667222976685, 2.0, -0.6666666865348816, 0.13333334028720856, -2.133333444595337];
        assert_eq!(v3, bits(&want));
        let z = Tensor::from_f32(vec![2, 2], vec![0.0; 4]).unwrap();
        assert_eq!(run("QuantizeAndDequantizeV2", &[], &[z, sc(0.0), sc(0.0)]).unwrap(), [0; 4]);
        let bad = run("QuantizeAndDequantizeV2", &[("range_given", b(true))], &[x(), sc(1.0), sc(-1.0)]).unwrap_err();
        assert!(bad.contains("Invalid range: input_min 1 > input_max -1"), "{bad}");
        let per_axis_given = [("range_given", b(true)), ("axis", i(1))];
        let bad = run("QuantizeAndDequantizeV4", &per_axis_given, &[x(), sc(-1.0), sc(1.0)]).unwrap_err();
        assert!(bad.contains("input_min must be a scalar"), "{bad}");
        let bad = run("QuantizeAndDequantizeV2", &[("num_bits", i(0))], &[x(), sc(0.0), sc(0.0)]).unwrap_err();
        assert!(bad.contains("num_bits is out of range: 0"), "{bad}");
    }

    /// The gradient passes where `min ≤ input ≤ max` (inclusive; per channel with `axis`),
    /// and the range's gradients are zeros of its shape (TensorFlow 2.21).
    #[test]
    fn quantize_and_dequantize_gradient_matches_tensorflow() {
        let g = Tensor::from_f32(vec![3, 4], (1..=12).map(|v| v as f32).collect()).unwrap();
        let f = crate::kernels::prepare(&node("QuantizeAndDequantizeV4Grad", &[])).unwrap();
        let out = f(smallvec::smallvec![g.clone(), x(), Tensor::scalar_f32(-1.0), Tensor::scalar_f32(2.55)]).unwrap();
        assert_eq!(out[0].as_f32().unwrap(), [0.0, 2.0, 3.0, 4.0, 5.0, 0.0, 7.0, 8.0, 0.0, 10.0, 11.0, 0.0]);
        assert_eq!((out[1].shape.len(), out[1].as_f32().unwrap()), (0, &[0.0f32][..]));
        let lo = Tensor::from_f32(vec![4], vec![-1.0, -2.2, -3.0, 0.0]).unwrap();
        let hi = Tensor::from_f32(vec![4], vec![1.0, 0.5, 4.0, 0.0]).unwrap();
        let f = crate::kernels::prepare(&node("QuantizeAndDequantizeV4Grad", &[("axis", AttrValue::I(1))])).unwrap();
        let out = f(smallvec::smallvec![g, x(), lo, hi]).unwrap();
        assert_eq!(out[0].as_f32().unwrap(), [0.0, 2.0, 3.0, 0.0, 5.0, 6.0, 7.0, 0.0, 0.0, 10.0, 11.0, 0.0]);
        assert_eq!(out[2].as_f32().unwrap(), [0.0; 4]);
    }
}
