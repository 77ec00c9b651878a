//! Integer arithmetic, comparisons and reductions on `int8`, `int16`, `uint8`, `uint16` and
//! `uint32` (an image's pixels, quantised values): the op's `int64` kernel on the
//! sign- or zero-extended values, its `T`-typed results truncated back to the narrow type.
//!
//! Exact: sums, differences, products, negation and the bitwise ops are ring operations, and
//! truncating their `int64` result modulo 2^w gives what TensorFlow's wrapping w-bit
//! arithmetic gives; comparisons, maxima, minima, `Abs`, `Sign` and the divisions (no
//! narrow quotient overflows except `MIN / -1`, which wraps the same way) see every narrow
//! value exactly in `int64`.

use std::sync::Arc;

use autoclust_graph::{AttrValue, DType, Node, Tensor, TensorData};

use super::{Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

/// The ops, and which outputs have the element type (`&[]`: none, e.g. a comparison).
fn t_outputs(op: &str) -> Option<&'static [usize]> {
    Some(match op {
        "Add" | "AddV2" | "Sub" | "Mul" | "Neg" | "Square" | "AddN" | "Sum" | "Prod" | "Cumsum" | "Cumprod"
        | "BitwiseAnd" | "BitwiseOr" | "BitwiseXor" | "Invert" | "Abs" | "Sign" | "Maximum" | "Minimum" | "Max"
        | "Min" | "ClipByValue" | "Relu" | "FloorDiv" | "FloorMod" | "TruncateDiv" | "TruncateMod" | "Div"
        | "SquaredDifference" | "TopKV2" | "Mean" | "Cross" => &[0],
        "Less" | "LessEqual" | "Greater" | "GreaterEqual" | "ArgMax" | "ArgMin" => &[],
        _ => return None,
    })
}

fn narrow(d: DType) -> bool {
    matches!(d, DType::Int8 | DType::Int16 | DType::UInt8 | DType::UInt16 | DType::UInt32)
}

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

/// `t`'s values truncated to `dtype`'s width (two's complement wrap).
pub(crate) fn from_i64(t: Tensor, dtype: DType) -> KResult<Tensor> {
    let v = t.as_i64().ok_or(KernelError::DType(t.dtype))?;
    let w = dtype.size_of().ok_or(KernelError::DType(dtype))?;
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()[..w].to_vec()).collect();
    Ok(Tensor { dtype, shape: t.shape, data: TensorData::Raw(Arc::new(bytes)) })
}

/// Prepares `node` this way when it is one of these ops on a narrow integer type.
pub(crate) fn prepare(node: &Node, prepare_typed: fn(&Node) -> KResult<PureFn>) -> Option<KResult<PureFn>> {
    let outs = t_outputs(&node.op)?;
    let dtype = node.attr("T").and_then(AttrValue::as_type).filter(|&d| narrow(d))?;
    let mut twin = node.clone();
    if let Some(v) = twin.attrs.get_mut("T") {
        *v = AttrValue::Type(DType::Int64);
    }
    let int = match prepare_typed(&twin) {
        Ok(f) => f,
        Err(e) => return Some(Err(e)),
    };
    Some(Ok(Box::new(move |inp: Inputs| {
        let wide: Inputs =
            inp.iter().map(|t| if t.dtype == dtype { to_i64(t) } else { Ok(t.clone()) }).collect::<KResult<_>>()?;
        let mut result = Outputs::new();
        for (k, o) in int(wide)?.into_iter().enumerate() {
            result.push(if outs.contains(&k) && o.dtype == DType::Int64 { from_i64(o, dtype)? } else { o });
        }
        Ok(result)
    })))
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
}
