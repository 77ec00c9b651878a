//! Integer arithmetic, comparisons and reductions on `int8`, `int16`, `uint8`, `uint16`,
//! `uint32` and `uint64` (an image's pixels, quantised values, hashed ids): the op's `int64`
//! kernel on the values widened to `int64`, its `T`-typed results truncated back.
//!
//! The narrow types are sign- or zero-extended. Exact: sums, differences, products, negation
//! and the bitwise ops are ring operations, and truncating their `int64` result modulo 2^w
//! gives what TensorFlow's wrapping w-bit arithmetic gives; comparisons, maxima, minima,
//! `Abs`, `Sign` and the divisions (no narrow quotient overflows except `MIN / -1`, which
//! wraps the same way) see every narrow value exactly in `int64`.
//!
//! `uint64` does not fit `int64`, so it goes several ways ([`U64Via`]): the ring operations on
//! its bits read as `int64` (the same residues modulo 2^64); the order operations (maxima,
//! comparisons, `ArgMax`, `TopKV2`) on its bits with the top bit flipped, which maps
//! `0..2^64` onto `i64::MIN..=i64::MAX` in order; divisions, `Relu6` and `Mean` by their own
//! unsigned loops.
//!
//! Only what TensorFlow 2.21's CPU kernels register: `Neg`, `Abs` and `Sign` on the unsigned
//! types, `Add` on `uint16`/`uint32`/`uint64`, `ClipByValue` on `uint32`/`uint64`,
//! `TruncateMod` and `SquaredDifference` on any of these types have no kernel there ("No
//! OpKernel was registered"), and none here: an error, not a result.

use std::sync::Arc;

use autoclust_graph::{AttrValue, DType, Node, Tensor, TensorData};

use super::{Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

/// The ops, and which outputs have the element type (`&[]`: none, e.g. a comparison).
fn t_outputs(op: &str) -> Option<&'static [usize]> {
    Some(match op {
        "Add"
        | "AddV2"
        | "Sub"
        | "Mul"
        | "Neg"
        | "Square"
        | "AddN"
        | "Sum"
        | "Prod"
        | "Cumsum"
        | "Cumprod"
        | "BitwiseAnd"
        | "BitwiseOr"
        | "BitwiseXor"
        | "Invert"
        | "Abs"
        | "Sign"
        | "Maximum"
        | "Minimum"
        | "Max"
        | "Min"
        | "ClipByValue"
        | "Relu"
        | "Relu6"
        | "FloorDiv"
        | "FloorMod"
        | "TruncateDiv"
        | "TruncateMod"
        | "Div"
        | "SquaredDifference"
        | "TopKV2"
        | "Mean"
        | "Cross"
        | "Pow"
        | "BiasAdd"
        | "ZerosLike"
        | "OnesLike"
        | "UnsortedSegmentSum"
        | "UnsortedSegmentProd"
        | "UnsortedSegmentMax"
        | "UnsortedSegmentMin" => &[0],
        "Less" | "LessEqual" | "Greater" | "GreaterEqual" | "ArgMax" | "ArgMin" => &[],
        _ => return None,
    })
}

fn narrow(d: DType) -> bool {
    matches!(d, DType::Int8 | DType::Int16 | DType::UInt8 | DType::UInt16 | DType::UInt32)
}

/// The values of a narrow integer type.
fn narrow_range(d: DType) -> (i64, i64) {
    match d {
        DType::Int8 => (i8::MIN.into(), i8::MAX.into()),
        DType::UInt8 => (0, u8::MAX.into()),
        DType::Int16 => (i16::MIN.into(), i16::MAX.into()),
        DType::UInt16 => (0, u16::MAX.into()),
        _ => (0, u32::MAX.into()),
    }
}

/// Whether TensorFlow 2.21 registers a CPU kernel for `op` (one of [`t_outputs`]'s) on the
/// narrow or `uint64` type `d` (`kernels.get_registered_kernels_for_op`).
fn registered(op: &str, d: DType) -> bool {
    use DType::{Int16, Int8, UInt16, UInt32, UInt64, UInt8};
    match op {
        "Neg" | "Abs" | "Sign" | "Pow" => matches!(d, Int8 | Int16),
        "Add" => matches!(d, Int8 | UInt8 | Int16),
        "ClipByValue" => matches!(d, Int8 | UInt8 | Int16 | UInt16),
        "TruncateMod" | "SquaredDifference" => false,
        _ => matches!(d, Int8 | UInt8 | Int16 | UInt16 | UInt32 | UInt64),
    }
}

/// How a `uint64` op runs on `int64` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum U64Via {
    /// Ring operations: the bits as `int64`, the result's bits back.
    Bits,
    /// Order operations: the bits with the top bit flipped (order-preserving), flipped back.
    Order,
    /// `Div`, `FloorDiv`, `TruncateDiv`: the unsigned quotient.
    Quotient,
    /// `FloorMod`: the unsigned remainder.
    Remainder,
    /// `Relu` is the identity and `Relu6` is `min(x, 6)` on unsigned values.
    Relu6,
    /// `Mean`: the wrapping `Sum` divided by the count, as TensorFlow's `uint64` kernel does.
    Mean,
}

fn u64_via(op: &str) -> U64Via {
    match op {
        "Maximum" | "Minimum" | "Max" | "Min" | "Less" | "LessEqual" | "Greater" | "GreaterEqual" | "ArgMax"
        | "ArgMin" | "TopKV2" | "UnsortedSegmentMax" | "UnsortedSegmentMin" => U64Via::Order,
        "Div" | "FloorDiv" | "TruncateDiv" => U64Via::Quotient,
        "FloorMod" => U64Via::Remainder,
        "Relu" | "Relu6" => U64Via::Relu6,
        "Mean" => U64Via::Mean,
        _ => U64Via::Bits,
    }
}

const TOP: i64 = i64::MIN;

pub(crate) fn to_i64(t: &Tensor) -> KResult<Tensor> {
    let TensorData::Raw(b) = &t.data else { return Err(KernelError::DType(t.dtype)) };
    let v: Vec<i64> = match t.dtype {
        DType::Int8 => b.iter().map(|&x| x as i8 as i64).collect(),
        DType::UInt8 => b.iter().map(|&x| x as i64).collect(),
        DType::Int16 => b.chunks_exact(2).map(|c| i16::from_le_bytes([c[0], c[1]]) as i64).collect(),
        DType::UInt16 => b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]) as i64).collect(),
        DType::UInt32 => b.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64).collect(),
        d => return Err(KernelError::DType(d)),
    };
    Ok(Tensor { dtype: DType::Int64, shape: t.shape.clone(), data: TensorData::I64(Arc::new(v)) })
}

/// A `uint64` tensor's bits as `int64`, each XORed with `flip`.
fn u64_bits(t: &Tensor, flip: i64) -> KResult<Tensor> {
    match (&t.data, t.dtype) {
        (TensorData::Raw(b), DType::UInt64) if b.len() == 8 * t.num_elements() => {
            let v: Vec<i64> =
                b.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")) ^ flip).collect();
            Ok(Tensor { dtype: DType::Int64, shape: t.shape.clone(), data: TensorData::I64(Arc::new(v)) })
        }
        _ => Err(KernelError::DType(t.dtype)),
    }
}

/// An `int64` tensor's values XORed with `flip`, as `uint64` bits.
fn u64_from_bits(t: Tensor, flip: i64) -> KResult<Tensor> {
    let v = t.as_i64().ok_or(KernelError::DType(t.dtype))?;
    let bytes: Vec<u8> = v.iter().flat_map(|&x| (x ^ flip).to_le_bytes()).collect();
    Ok(Tensor { dtype: DType::UInt64, shape: t.shape, data: TensorData::Raw(Arc::new(bytes)) })
}

/// `t`'s values truncated to `dtype`'s width (two's complement wrap).
pub(crate) fn from_i64(t: Tensor, dtype: DType) -> KResult<Tensor> {
    let v = t.as_i64().ok_or(KernelError::DType(t.dtype))?;
    let w = dtype.size_of().ok_or(KernelError::DType(dtype))?;
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()[..w].to_vec()).collect();
    Ok(Tensor { dtype, shape: t.shape, data: TensorData::Raw(Arc::new(bytes)) })
}

/// The `int64` twin of `node` (its `T` rewritten), under another op name when `op` is given.
fn twin(node: &Node, op: Option<&str>) -> Node {
    let mut twin = node.clone();
    if let Some(v) = twin.attrs.get_mut("T") {
        *v = AttrValue::Type(DType::Int64);
    }
    if let Some(op) = op {
        twin.op = op.to_string();
    }
    twin
}

/// Prepares `node` this way when it is one of these ops on a narrow integer type or `uint64`.
pub(crate) fn prepare(node: &Node, prepare_typed: fn(&Node) -> KResult<PureFn>) -> Option<KResult<PureFn>> {
    let outs = t_outputs(&node.op)?;
    let dtype = node.attr("T").and_then(AttrValue::as_type).filter(|&d| narrow(d) || d == DType::UInt64)?;
    if !registered(&node.op, dtype) {
        return Some(Err(KernelError::invalid(format!(
            "No OpKernel was registered to support Op '{}' with T={dtype}: TensorFlow's CPU kernels do not cover \
             this dtype either",
            node.op
        ))));
    }
    if dtype == DType::UInt64 {
        return Some(prepare_u64(node, outs, prepare_typed));
    }
    let int = match prepare_typed(&twin(node, None)) {
        Ok(f) => f,
        Err(e) => return Some(Err(e)),
    };
    // The maximum (minimum) of no elements (an empty reduction, a segment no id names) is `int64`'s lowest (highest) value, which must
    // become the narrow type's own (TensorFlow: -128 for an empty int8 `Max`), not its low bits.
    let saturate = matches!(node.op.as_str(), "Max" | "Min" | "UnsortedSegmentMax" | "UnsortedSegmentMin");
    Some(Ok(Box::new(move |inp: Inputs| {
        let wide: Inputs =
            inp.iter().map(|t| if t.dtype == dtype { to_i64(t) } else { Ok(t.clone()) }).collect::<KResult<_>>()?;
        let mut result = Outputs::new();
        for (k, mut o) in int(wide)?.into_iter().enumerate() {
            if outs.contains(&k) && o.dtype == DType::Int64 {
                if saturate {
                    let (lo, hi) = narrow_range(dtype);
                    o.data.make_mut_i64().expect("int64").iter_mut().for_each(|x| *x = (*x).clamp(lo, hi));
                }
                o = from_i64(o, dtype)?;
            }
            result.push(o);
        }
        Ok(result)
    })))
}

fn prepare_u64(node: &Node, outs: &'static [usize], prepare_typed: fn(&Node) -> KResult<PureFn>) -> KResult<PureFn> {
    let via = u64_via(&node.op);
    let binary = |f: fn(u64, u64) -> u64| -> PureFn {
        Box::new(move |inp: Inputs| {
            super::arity(&inp, 2)?;
            let (a, b) = (u64_bits(&inp[0], 0)?, u64_bits(&inp[1], 0)?);
            if b.as_i64().expect("int64").contains(&0) {
                return Err(KernelError::invalid("Integer division by zero"));
            }
            let q = super::elementwise::zip_map::<i64, i64, i64>(&a, &b, move |x, y| f(x as u64, y as u64) as i64)?;
            super::one(u64_from_bits(q, 0)?)
        })
    };
    Ok(match via {
        U64Via::Quotient => binary(|x, y| x / y),
        U64Via::Remainder => binary(|x, y| x % y),
        U64Via::Relu6 => {
            let cap = if node.op == "Relu6" { 6 } else { u64::MAX };
            Box::new(move |inp: Inputs| {
                super::arity(&inp, 1)?;
                let x = u64_bits(&inp[0], 0)?;
                let v: Vec<i64> = x.as_i64().expect("int64").iter().map(|&x| (x as u64).min(cap) as i64).collect();
                super::one(u64_from_bits(super::tensor_of(x.shape.clone(), v), 0)?)
            })
        }
        U64Via::Mean => {
            let sum = prepare_typed(&twin(node, Some("Sum")))?;
            Box::new(move |inp: Inputs| {
                let n_in = inp.first().map_or(0, Tensor::num_elements);
                let wide: Inputs = inp
                    .iter()
                    .map(|t| if t.dtype == DType::UInt64 { u64_bits(t, 0) } else { Ok(t.clone()) })
                    .collect::<KResult<_>>()?;
                let mut out = sum(wide)?;
                let s = out.remove(0);
                let count = n_in.checked_div(s.num_elements()).unwrap_or(0) as u64;
                let v: Vec<i64> = s
                    .as_i64()
                    .ok_or(KernelError::DType(s.dtype))?
                    .iter()
                    .map(|&x| (x as u64).checked_div(count).unwrap_or(0) as i64)
                    .collect();
                out.insert(0, u64_from_bits(super::tensor_of(s.shape.clone(), v), 0)?);
                Ok(out)
            })
        }
        U64Via::Bits | U64Via::Order => {
            let flip = if via == U64Via::Order { TOP } else { 0 };
            let int = prepare_typed(&twin(node, None))?;
            Box::new(move |inp: Inputs| {
                let wide: Inputs = inp
                    .iter()
                    .map(|t| if t.dtype == DType::UInt64 { u64_bits(t, flip) } else { Ok(t.clone()) })
                    .collect::<KResult<_>>()?;
                let mut result = Outputs::new();
                for (k, o) in int(wide)?.into_iter().enumerate() {
                    result.push(if outs.contains(&k) && o.dtype == DType::Int64 { u64_from_bits(o, flip)? } else { o });
                }
                Ok(result)
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::tests_support::{node, run1};

    fn u8s(v: &[u8]) -> Tensor {
        Tensor::from_raw(DType::UInt8, vec![v.len()], v.to_vec()).unwrap()
    }
    fn i8s(v: &[i8]) -> Tensor {
        Tensor::from_raw(DType::Int8, vec![v.len()], v.iter().map(|&x| x as u8).collect()).unwrap()
    }
    fn t(d: DType) -> [(&'static str, AttrValue); 1] {
        [("T", AttrValue::Type(d))]
    }

    #[test]
    fn arithmetic_wraps_like_tensorflow() {
        let s = run1(&node("AddV2", &t(DType::UInt8)), &[u8s(&[250, 1]), u8s(&[10, 2])]).unwrap();
        assert_eq!((s.dtype, s.to_f64_vec().unwrap()), (DType::UInt8, vec![4.0, 3.0]));
        let n = run1(&node("Neg", &t(DType::Int8)), &[i8s(&[-128, 5])]).unwrap();
        assert_eq!(n.to_f64_vec().unwrap(), [-128.0, -5.0]);
        let sum = crate::kernels::compute(
            &node("Sum", &[("T", AttrValue::Type(DType::Int8)), ("Tidx", AttrValue::Type(DType::Int32))]),
            &[i8s(&[100, 100, -1]), Tensor::scalar_i32(0)],
        )
        .unwrap();
        assert_eq!(sum[0].to_f64_vec().unwrap(), [-57.0]);
    }

    #[test]
    fn order_and_indices_are_exact() {
        let less = run1(&node("Less", &t(DType::Int8)), &[i8s(&[-1, 3]), i8s(&[2, -3])]).unwrap();
        assert_eq!(less.as_bool().unwrap(), &[true, false]);
        let am = run1(
            &node("ArgMax", &[("T", AttrValue::Type(DType::UInt8)), ("output_type", AttrValue::Type(DType::Int64))]),
            &[u8s(&[3, 200, 7]), Tensor::scalar_i32(0)],
        )
        .unwrap();
        // The index output is not narrowed to uint8.
        assert_eq!((am.dtype, am.as_i64().unwrap().to_vec()), (DType::Int64, vec![1]));
    }

    fn u64s(v: &[u64]) -> Tensor {
        Tensor::from_raw(DType::UInt64, vec![v.len()], v.iter().flat_map(|x| x.to_le_bytes()).collect()).unwrap()
    }
    fn u64_values(t: &Tensor) -> Vec<u64> {
        assert_eq!(t.dtype, DType::UInt64);
        let TensorData::Raw(b) = &t.data else { panic!("raw bytes") };
        b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect()
    }

    /// `uint64` ("unsupported dtype" before, sweep 65), values past `i64::MAX` included: every
    /// expected value is TensorFlow 2.21's (tf.compat.v1 graphs on variables holding `A` and
    /// `B`, one op each).
    #[test]
    fn uint64_arithmetic_order_and_reductions_match_tensorflow() {
        const H: u64 = 1 << 63;
        const M: u64 = u64::MAX;
        let a = || u64s(&[5, M, H + 7, 10, 0, H]);
        let b = || u64s(&[3, 2, H, M - 2, 7, H - 1]);
        let bin = |op: &str| run1(&node(op, &t(DType::UInt64)), &[a(), b()]).unwrap();
        let cases: [(&str, [u64; 6]); 15] = [
            ("AddV2", [8, 1, 7, 7, 7, M]),
            ("Sub", [2, M - 2, 7, 13, M - 6, 1]),
            ("Mul", [15, M - 1, H, M - 29, 0, H]),
            ("Div", [1, H - 1, 1, 0, 0, 1]),
            ("FloorDiv", [1, H - 1, 1, 0, 0, 1]),
            ("TruncateDiv", [1, H - 1, 1, 0, 0, 1]),
            ("FloorMod", [2, 1, 7, 10, 0, 1]),
            ("Maximum", [5, M, H + 7, M - 2, 7, H]),
            ("Minimum", [3, 2, H, 10, 0, H - 1]),
            ("BitwiseAnd", [1, 2, H, 8, 0, 0]),
            ("BitwiseOr", [7, M, H + 7, M, 7, M]),
            ("BitwiseXor", [6, M - 2, 7, M - 8, 7, M]),
            ("Equal", [0; 6]),
            ("NotEqual", [0; 6]),
            ("Less", [0; 6]),
        ];
        for (op, want) in cases.into_iter().take(12) {
            assert_eq!(u64_values(&bin(op)), want, "{op}");
        }
        for (op, want) in [
            ("Less", [false, false, false, true, true, false]),
            ("LessEqual", [false, false, false, true, true, false]),
            ("Greater", [true, true, true, false, false, true]),
            ("GreaterEqual", [true, true, true, false, false, true]),
            ("Equal", [false; 6]),
            ("NotEqual", [true; 6]),
        ] {
            assert_eq!(bin(op).as_bool().unwrap(), &want, "{op}");
        }
        let un = |op: &str| u64_values(&run1(&node(op, &t(DType::UInt64)), &[a()]).unwrap());
        assert_eq!(un("Square"), [25, 1, 49, 100, 0, 0]);
        assert_eq!(un("Relu"), [5, M, H + 7, 10, 0, H]);
        assert_eq!(un("Relu6"), [5, 6, 6, 6, 0, 6]);
        assert_eq!(un("Invert"), [M - 5, 0, H - 8, M - 10, M, H - 1]);
        let addn = node("AddN", &[("T", AttrValue::Type(DType::UInt64)), ("N", AttrValue::I(3))]);
        assert_eq!(u64_values(&run1(&addn, &[a(), b(), a()]).unwrap()), [13, 0, H + 14, 17, 7, H - 1]);

        let reduce = |op: &str, x: Tensor| {
            let n = node(op, &[("T", AttrValue::Type(DType::UInt64)), ("Tidx", AttrValue::Type(DType::Int32))]);
            u64_values(&run1(&n, &[x, Tensor::scalar_i32(0)]).unwrap())
        };
        assert_eq!(reduce("Sum", a()), [21]);
        assert_eq!(reduce("Prod", b()), [0]);
        assert_eq!(reduce("Max", a()), [M]);
        assert_eq!(reduce("Min", b()), [2]);
        // The sum wraps before the division (TensorFlow has no wider type for uint64).
        assert_eq!(reduce("Mean", a()), [3]);
        assert_eq!(reduce("Mean", b()), [1]);
        assert_eq!(reduce("Max", u64s(&[])), [0]);
        assert_eq!(reduce("Min", u64s(&[])), [M]);
        let empty_rows = Tensor::from_raw(DType::UInt64, vec![2, 0], vec![]).unwrap();
        let mean = node("Mean", &[("T", AttrValue::Type(DType::UInt64)), ("Tidx", AttrValue::Type(DType::Int32))]);
        assert_eq!(u64_values(&run1(&mean, &[empty_rows, Tensor::scalar_i32(1)]).unwrap()), [0, 0]);

        let arg = |op: &str, x: Tensor| {
            let n = node(op, &[("T", AttrValue::Type(DType::UInt64)), ("output_type", AttrValue::Type(DType::Int64))]);
            run1(&n, &[x, Tensor::scalar_i32(0)]).unwrap().as_i64().unwrap().to_vec()
        };
        assert_eq!(arg("ArgMax", a()), [1]);
        assert_eq!(arg("ArgMin", b()), [1]);
        let cum = |x: Tensor, exclusive: bool, reverse: bool| {
            let n = node(
                "Cumsum",
                &[
                    ("T", AttrValue::Type(DType::UInt64)),
                    ("Tidx", AttrValue::Type(DType::Int32)),
                    ("exclusive", AttrValue::B(exclusive)),
                    ("reverse", AttrValue::B(reverse)),
                ],
            );
            u64_values(&run1(&n, &[x, Tensor::scalar_i32(0)]).unwrap())
        };
        assert_eq!(cum(a(), false, false), [5, 4, H + 11, H + 21, H + 21, 21]);
        assert_eq!(cum(a(), true, true), [16, 17, H + 10, H, H, 0]);
        let topk = crate::kernels::compute(&node("TopKV2", &t(DType::UInt64)), &[a(), Tensor::scalar_i32(3)]).unwrap();
        assert_eq!(u64_values(&topk[0]), [M, H + 7, H]);
        assert_eq!(topk[1].as_i32().unwrap(), &[1, 2, 5]);
        let cross = run1(
            &node("Cross", &t(DType::UInt64)),
            &[Tensor { shape: vec![2, 3], ..a() }, Tensor { shape: vec![2, 3], ..b() }],
        )
        .unwrap();
        assert_eq!(u64_values(&cross), [H - 14, 21, 13, H, H + 10, 70]);

        // A zero divisor is TensorFlow's error.
        for op in ["FloorDiv", "FloorMod", "Div", "TruncateDiv"] {
            let e = run1(&node(op, &t(DType::UInt64)), &[a(), u64s(&[1, 2, 0, 1, 1, 1])]).unwrap_err();
            assert!(e.to_string().contains("Integer division by zero"), "{op}: {e}");
        }
    }

    /// The ops TensorFlow 2.21 has no CPU kernel for on these types (its `Session.run` fails
    /// with "No OpKernel was registered to support Op 'ClipByValue' ... [T=DT_UINT64]") are an
    /// error here too, not a result.
    #[test]
    fn ops_without_a_tensorflow_kernel_are_errors() {
        for (op, d) in [
            ("Neg", DType::UInt8),
            ("Abs", DType::UInt16),
            ("Sign", DType::UInt64),
            ("Neg", DType::UInt64),
            ("Add", DType::UInt32),
            ("Add", DType::UInt64),
            ("ClipByValue", DType::UInt32),
            ("ClipByValue", DType::UInt64),
            ("TruncateMod", DType::Int8),
            ("SquaredDifference", DType::UInt64),
            ("Pow", DType::UInt8),
        ] {
            let e = crate::kernels::prepare(&node(op, &t(d))).err().unwrap_or_else(|| panic!("{op} on {d} prepared"));
            assert!(e.to_string().contains("No OpKernel was registered"), "{op} {d}: {e}");
        }
        // Those TensorFlow has stay: int8 `Neg`, `Pow` and `Add`, uint16 `ClipByValue`.
        for (op, d) in
            [("Neg", DType::Int8), ("Pow", DType::Int16), ("Add", DType::UInt8), ("ClipByValue", DType::UInt16)]
        {
            assert!(crate::kernels::prepare(&node(op, &t(d))).is_ok(), "{op} on {d}");
        }
    }

    /// The maximum of no int8 elements is int8's lowest value (TensorFlow 2.21: -128; 0 before,
    /// the low byte of int64's), the minimum its highest (127); uint8's are 0 and 255.
    #[test]
    fn empty_narrow_extrema_are_the_types_own_bounds() {
        let red = |op: &str, x: Tensor| {
            let d = x.dtype;
            let n = node(op, &[("T", AttrValue::Type(d)), ("Tidx", AttrValue::Type(DType::Int32))]);
            run1(&n, &[x, Tensor::scalar_i32(0)]).unwrap().to_f64_vec().unwrap()
        };
        assert_eq!(red("Max", i8s(&[])), [-128.0]);
        assert_eq!(red("Min", i8s(&[])), [127.0]);
        assert_eq!(red("Max", u8s(&[])), [0.0]);
        assert_eq!(red("Min", u8s(&[])), [255.0]);
        // Non-empty extrema are the values themselves.
        assert_eq!(red("Max", i8s(&[-128, -7])), [-7.0]);
        assert_eq!(red("Min", u8s(&[255, 250])), [250.0]);
    }
}
