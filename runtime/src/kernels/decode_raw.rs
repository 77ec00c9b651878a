//! `DecodeRaw` and `DecodePaddedRaw` (`tf.io.decode_raw`, `parse_ops.cc`): each string's bytes
//! read as elements of `out_type`, one new innermost dimension. TFRecord pipelines store
//! images and feature vectors this way (`parse_single_example` then `decode_raw`).
//! `DecodeRaw` needs strings of one length; `DecodePaddedRaw` (`fixed_length`) cuts or
//! zero-pads each to it. `little_endian = false` reverses each element's bytes (each half of
//! a complex number separately). Errors use TensorFlow's messages.

use autoclust_graph::{AttrValue, DType, Node, Tensor, TensorData};

use super::shape_ops::debug_shape;
use super::{attr_bool_or, one, Inputs, PureFn};
use crate::error::{KResult, KernelError};

/// The decode kernels, or `None` if `node.op` is not one.
pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let padded = match node.op.as_str() {
        "DecodeRaw" => false,
        "DecodePaddedRaw" => true,
        _ => return Ok(None),
    };
    let dtype = node.attr("out_type").and_then(AttrValue::as_type).ok_or(KernelError::Attr("out_type".into()))?;
    let width = dtype.size_of().filter(|&w| w > 0).ok_or(KernelError::DType(dtype))?;
    // The half of an element whose bytes are reversed (complex numbers: each part).
    let swap = if attr_bool_or(node, "little_endian", true)? {
        None
    } else if matches!(dtype, DType::Complex64 | DType::Complex128) {
        Some(width / 2)
    } else {
        Some(width)
    };
    Ok(Some(Box::new(move |inp: Inputs| {
        super::arity(&inp, if padded { 2 } else { 1 })?;
        let TensorData::Str(strings) = &inp[0].data else {
            return Err(KernelError::invalid(format!("input must be a string tensor, got {}", inp[0].dtype)));
        };
        let len = if padded { fixed_length(&inp[1], width)? } else { common_length(strings, dtype, width)? };
        let mut bytes = Vec::with_capacity(len * strings.len());
        for s in strings.iter() {
            let take = s.len().min(len);
            bytes.extend_from_slice(&s[..take]);
            bytes.resize(bytes.len() + len - take, 0);
        }
        if let Some(w) = swap.filter(|&w| w > 1) {
            bytes.chunks_exact_mut(w).for_each(<[u8]>::reverse);
        }
        let mut shape = inp[0].shape.clone();
        shape.push(len / width);
        one(Tensor::from_le_bytes(dtype, shape, &bytes).map_err(|e| KernelError::invalid(e.to_string()))?)
    })))
}

/// `DecodeRaw`: the one length every string has (0 for no strings).
fn common_length(strings: &[Vec<u8>], dtype: DType, width: usize) -> KResult<usize> {
    let Some(first) = strings.first() else { return Ok(0) };
    if let Some(i) = strings.iter().position(|s| s.len() != first.len()) {
        return Err(KernelError::invalid(format!(
            "DecodeRaw requires input strings to all be the same size, but element {i} has size {} != {}",
            first.len(),
            strings[i].len()
        )));
    }
    if first.len() % width != 0 {
        return Err(KernelError::invalid(format!(
            "Input to DecodeRaw has length {} that is not a multiple of {width}, the size of {}",
            first.len(),
            dtype.tf_name()
        )));
    }
    Ok(first.len())
}

/// `DecodePaddedRaw`'s `fixed_length`: a positive int32 scalar, a multiple of the width.
fn fixed_length(t: &Tensor, width: usize) -> KResult<usize> {
    let n = match (t.as_i32(), t.shape.is_empty()) {
        (Some(v), true) => v[0],
        _ => return Err(KernelError::invalid(format!("k must be scalar, got shape {}", debug_shape(&t.shape)))),
    };
    if n % width as i32 != 0 {
        return Err(KernelError::invalid(format!(
            "fixed_length ({n}) must be a multiple of the size of out_type ({width})"
        )));
    }
    if n <= 0 {
        return Err(KernelError::invalid(format!("fixed_length ({n}) must be greater than zero.")));
    }
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::{node, run1};
    use super::*;

    fn strs(shape: Vec<usize>, v: &[&[u8]]) -> Tensor {
        Tensor::from_strings(shape, v.iter().map(|s| s.to_vec()).collect()).unwrap()
    }

    #[test]
    fn decodes_little_and_big_endian() {
        let raw = node("DecodeRaw", &[("out_type", AttrValue::Type(DType::Int32))]);
        let x = strs(vec![2], &[&[1, 0, 0, 0, 0, 1, 0, 0], &[255, 255, 255, 255, 2, 0, 0, 0]]);
        let out = run1(&raw, std::slice::from_ref(&x)).unwrap();
        assert_eq!(out.shape, [2, 2]);
        assert_eq!(out.as_i32().unwrap(), [1, 256, -1, 2]);
        let big =
            node("DecodeRaw", &[("out_type", AttrValue::Type(DType::Int32)), ("little_endian", AttrValue::B(false))]);
        assert_eq!(run1(&big, &[x]).unwrap().as_i32().unwrap(), [1 << 24, 1 << 16, -1, 2 << 24]);
        let f = node("DecodeRaw", &[("out_type", AttrValue::Type(DType::Float32))]);
        let out = run1(&f, &[strs(vec![], &[&1.5f32.to_le_bytes()])]).unwrap();
        assert_eq!((out.shape.clone(), out.as_f32().unwrap().to_vec()), (vec![1], vec![1.5]));
        let out = run1(&f, &[strs(vec![0], &[])]).unwrap();
        assert_eq!(out.shape, [0, 0]);
    }

    #[test]
    fn pads_cuts_and_refuses_as_tensorflow_does() {
        let p = node("DecodePaddedRaw", &[("out_type", AttrValue::Type(DType::UInt16))]);
        let out = run1(&p, &[strs(vec![2], &[&[1, 0, 2], &[3, 0, 4, 0, 5, 0, 6, 0]]), Tensor::scalar_i32(6)]).unwrap();
        assert_eq!(out.shape, [2, 3]);
        assert_eq!(out.to_f64_vec().unwrap(), [1.0, 2.0, 0.0, 3.0, 4.0, 5.0]);
        let e = run1(&p, &[strs(vec![1], &[b"ab"]), Tensor::scalar_i32(3)]).unwrap_err();
        assert_eq!(e.to_string(), "fixed_length (3) must be a multiple of the size of out_type (2)");
        let raw = node("DecodeRaw", &[("out_type", AttrValue::Type(DType::Float64))]);
        let e = run1(&raw, &[strs(vec![2], &[b"12345678", b"1234"])]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "DecodeRaw requires input strings to all be the same size, but element 1 has size 8 != 4"
        );
        let e = run1(&raw, &[strs(vec![1], &[b"1234"])]).unwrap_err();
        assert_eq!(e.to_string(), "Input to DecodeRaw has length 4 that is not a multiple of 8, the size of double");
    }
}
