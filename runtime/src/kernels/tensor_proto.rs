//! `SerializeTensor` and `ParseTensor` (`tf.io.serialize_tensor`, `tf.io.parse_tensor`;
//! TensorFlow's `parse_tensor_op.cc`): a tensor as the bytes of a `TensorProto` and back.
//! Pipelines store whole tensors in `tf.train.Example` features or TFRecords this way.
//!
//! Serializing writes what TensorFlow's `Tensor::AsProtoTensorContent` writes, byte for
//! byte: the dtype, the shape (present for a scalar too), every element little-endian in
//! `tensor_content` (nothing for no elements) or, for strings, in `string_val`. Parsing
//! accepts every encoding TensorFlow's `Tensor::FromProto` does — `tensor_content`, or the
//! typed `*_val` fields with their rule that a shorter list repeats its last value — through
//! the one TensorProto reader the graph loader uses (`autoclust_graphdef`). Errors are
//! TensorFlow's words.
//!
//! Also `Fingerprint` (`tf.fingerprint`), which hashes a tensor's bytes: FarmHash's
//! `Fingerprint64` of each slice along the first dimension (its elements' little-endian bytes;
//! for strings, the string itself when a slice holds one, else the slice's strings'
//! fingerprints, each 8 little-endian bytes, one after another), as 8 little-endian `uint8`s.

use autoclust_graph::{AttrValue, DType, Node, Tensor};

use super::shape_ops::debug_shape;
use super::string::{base64_encode_in, BASE64_STANDARD};
use super::{arity, one, Inputs, PureFn};
use crate::error::{KResult, KernelError};

/// The kernels, or `None` if `node` is neither op.
pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let f: PureFn = match node.op.as_str() {
        "SerializeTensor" => Box::new(|inp: Inputs| {
            arity(&inp, 1)?;
            let bytes = autoclust_graphdef::tensor_to_content_proto_bytes(&inp[0]);
            one(Tensor::from_strings(Vec::new(), vec![bytes]).expect("a scalar holds one string"))
        }),
        "ParseTensor" => {
            let out_type = node
                .attr("out_type")
                .and_then(AttrValue::as_type)
                .ok_or_else(|| KernelError::Attr("out_type".into()))?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                one(parse_tensor(&inp[0], out_type)?)
            })
        }
        "Fingerprint" => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            let method = match inp[1].as_strings() {
                Some([m]) if inp[1].shape.is_empty() => m.clone(),
                _ => {
                    return Err(KernelError::invalid(format!(
                        "`method` should be a scalar string: {}",
                        debug_shape(&inp[1].shape)
                    )))
                }
            };
            if method != b"farmhash64" {
                return Err(KernelError::invalid(format!(
                    "Unsupported fingerprint method: {}",
                    String::from_utf8_lossy(&method)
                )));
            }
            one(fingerprint(&inp[0])?)
        }),
        _ => return Ok(None),
    };
    Ok(Some(f))
}

/// `Fingerprint`'s `farmhash64`, one row of 8 bytes per slice along the first dimension.
fn fingerprint(data: &Tensor) -> KResult<Tensor> {
    use super::string::fingerprint64;
    if data.shape.is_empty() {
        return Err(KernelError::invalid(format!(
            "`data` should have at least one dimension: {}",
            debug_shape(&data.shape)
        )));
    }
    let rows = data.shape[0];
    let per_row: usize = data.shape[1..].iter().product();
    let mut out = Vec::with_capacity(rows * 8);
    if let Some(strings) = data.as_strings() {
        for row in 0..rows {
            let slice = &strings[row * per_row..(row + 1) * per_row];
            let fp = if per_row == 1 {
                fingerprint64(&slice[0])
            } else {
                let bytes: Vec<u8> = slice.iter().flat_map(|s| fingerprint64(s).to_le_bytes()).collect();
                fingerprint64(&bytes)
            };
            out.extend_from_slice(&fp.to_le_bytes());
        }
    } else {
        let bytes = data.to_le_bytes().ok_or(KernelError::DType(data.dtype))?;
        let width = bytes.len().checked_div(rows).unwrap_or(0);
        for row in 0..rows {
            out.extend_from_slice(&fingerprint64(&bytes[row * width..(row + 1) * width]).to_le_bytes());
        }
    }
    Ok(Tensor::from_le_bytes(DType::UInt8, vec![rows, 8], &out).expect("8 bytes a row"))
}

fn parse_tensor(serialized: &Tensor, out_type: DType) -> KResult<Tensor> {
    let bytes = match serialized.as_strings() {
        Some([b]) if serialized.shape.is_empty() => b,
        _ => {
            return Err(KernelError::invalid(format!(
                "Expected `serialized` to be a scalar, got shape: {}",
                debug_shape(&serialized.shape)
            )))
        }
    };
    let t = autoclust_graphdef::tensor_from_proto_bytes(bytes).map_err(|e| match e {
        // TensorFlow 2.21's words: the bytes in standard base64.
        None => KernelError::invalid(format!(
            "Could not parse `serialized` as TensorProto, base64: {}",
            String::from_utf8_lossy(&base64_encode_in(BASE64_STANDARD, bytes, true))
        )),
        Some(why) => KernelError::invalid(format!("Cannot parse tensor from proto: {why}")),
    })?;
    if t.dtype != out_type {
        return Err(KernelError::invalid(format!(
            "Type mismatch between parsed tensor ({}) and dtype ({})",
            t.dtype.tf_name(),
            out_type.tf_name()
        )));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{compute, tests_support::node};

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    fn serialize(t: Tensor) -> Vec<u8> {
        let out = compute(&node("SerializeTensor", &[("T", AttrValue::Type(t.dtype))]), &[t]).unwrap();
        assert!(out[0].shape.is_empty());
        out[0].as_strings().unwrap()[0].clone()
    }

    fn parse(bytes: &[u8], dtype: DType) -> KResult<Tensor> {
        let s = Tensor::from_strings(Vec::new(), vec![bytes.to_vec()]).unwrap();
        compute(&node("ParseTensor", &[("out_type", AttrValue::Type(dtype))]), &[s]).map(|mut v| v.remove(0))
    }

    fn raw(dtype: DType, shape: Vec<usize>, bytes: Vec<u8>) -> Tensor {
        Tensor::from_le_bytes(dtype, shape, &bytes).unwrap()
    }

    /// TensorFlow 2.21's `tf.io.serialize_tensor` bytes, and each parses back to the tensor.
    #[test]
    fn serialized_bytes_are_tensorflows() {
        let cases = [
            (Tensor::from_f32(vec![2], vec![1.0, 2.0]).unwrap(), "0801 1204 12020802 2208 0000803f00000040"),
            (Tensor::scalar_i32(7), "0803 1200 2204 07000000"),
            (
                Tensor::from_strings(vec![2], vec![b"ab".to_vec(), b"c".to_vec()]).unwrap(),
                "0807 1204 12020802 4202 6162 4201 63",
            ),
            (Tensor::from_bool(vec![1, 2], vec![true, false]).unwrap(), "080a 1208 12020801 12020802 2202 0100"),
            (Tensor::from_f32(vec![0], vec![]).unwrap(), "0801 1202 1200"),
            (Tensor::scalar_f32(0.0), "0801 1200 2204 00000000"),
            (Tensor::from_f32(vec![2, 0], vec![]).unwrap(), "0801 1206 12020802 1200"),
            (Tensor::from_strings(vec![], vec![Vec::new()]).unwrap(), "0807 1200 4200"),
            (raw(DType::Float16, vec![2], hex("003c0040")), "0813 1204 12020802 2204 003c0040"),
            (raw(DType::BFloat16, vec![1], hex("803f")), "080e 1204 12020801 2202 803f"),
            (raw(DType::Complex64, vec![1], hex("0000803f00000040")), "0808 1204 12020801 2208 0000803f00000040"),
            (Tensor::from_i64(vec![1], vec![-1]).unwrap(), "0809 1204 12020801 2208 ffffffffffffffff"),
            (raw(DType::UInt8, vec![3], vec![1, 2, 3]), "0804 1204 12020803 2203 010203"),
            (Tensor::scalar_bool(true), "080a 1200 2201 01"),
        ];
        for (t, want) in cases {
            let bytes = serialize(t.clone());
            assert_eq!(bytes, hex(want), "{t:?}");
            let back = parse(&bytes, t.dtype).unwrap();
            assert_eq!((back.dtype, &back.shape, back.to_le_bytes()), (t.dtype, &t.shape, t.to_le_bytes()), "{t:?}");
            if t.dtype == DType::String {
                assert_eq!(back.as_strings(), t.as_strings());
            }
        }
    }

    /// TensorFlow 2.21's `tf.fingerprint`.
    #[test]
    fn fingerprints_are_tensorflows() {
        let fp = |t: Tensor| {
            let method = Tensor::from_strings(vec![], vec![b"farmhash64".to_vec()]).unwrap();
            compute(&node("Fingerprint", &[("T", AttrValue::Type(t.dtype))]), &[t, method]).map(|mut o| o.remove(0))
        };
        let rows = |t: Tensor| t.to_le_bytes().unwrap().chunks(8).map(<[u8]>::to_vec).collect::<Vec<_>>();
        let ints = fp(Tensor::from_i32(vec![2, 2], vec![1, 2, 3, 4]).unwrap()).unwrap();
        assert_eq!(ints.shape, vec![2, 8]);
        assert_eq!(rows(ints), [vec![76, 18, 253, 133, 168, 204, 240, 10], vec![254, 162, 60, 240, 103, 244, 53, 255]]);
        let floats = fp(Tensor::from_f32(vec![2], vec![1.5, 2.5]).unwrap()).unwrap();
        assert_eq!(
            rows(floats),
            [vec![64, 181, 56, 72, 223, 224, 189, 72], vec![215, 206, 200, 229, 128, 42, 67, 207]]
        );
        let strs = |shape: Vec<usize>, v: &[&str]| {
            Tensor::from_strings(shape, v.iter().map(|s| s.as_bytes().to_vec()).collect()).unwrap()
        };
        let one = fp(strs(vec![2], &["a", "bc"])).unwrap();
        assert_eq!(rows(one), [vec![227, 117, 223, 182, 101, 66, 69, 179], vec![119, 129, 82, 223, 68, 160, 90, 83]]);
        let two = fp(strs(vec![2, 2], &["a", "bc", "", "x"])).unwrap();
        assert_eq!(rows(two), [vec![85, 27, 103, 37, 147, 177, 144, 87], vec![221, 65, 188, 47, 25, 159, 14, 122]]);
        let empty_rows = fp(Tensor::from_i32(vec![2, 0], vec![]).unwrap()).unwrap();
        assert_eq!(rows(empty_rows), vec![vec![79, 64, 144, 47, 59, 106, 225, 154]; 2]);
        assert_eq!(fp(Tensor::from_i32(vec![0, 3], vec![]).unwrap()).unwrap().shape, vec![0, 8]);
        let e = fp(Tensor::scalar_i32(3)).unwrap_err().to_string();
        assert!(e.contains("`data` should have at least one dimension: []"), "{e}");
    }

    /// `ParseTensor` reads the typed value fields too (a short list repeats its last value),
    /// and fails with TensorFlow's words.
    #[test]
    fn parses_every_encoding_and_refuses_as_tensorflow_does() {
        // dtype float, shape [4], float_val [1, 2] (packed): [1, 2, 2, 2].
        let short = hex("0801 1204 12020804 2a08 0000803f00000040");
        assert_eq!(parse(&short, DType::Float32).unwrap().as_f32().unwrap(), &[1.0, 2.0, 2.0, 2.0]);
        // No shape: a scalar.
        let scalar = hex("0801 2a04 00004040");
        let t = parse(&scalar, DType::Float32).unwrap();
        assert_eq!((t.shape.clone(), t.as_f32().unwrap()), (vec![], &[3.0f32][..]));
        let err = |b: &[u8], d: DType| parse(b, d).unwrap_err().to_string();
        assert!(err(&short, DType::Int32).contains("Type mismatch between parsed tensor (float) and dtype (int32)"));
        assert!(err(b"bogus", DType::Float32).contains("Could not parse `serialized` as TensorProto, base64: Ym9ndXM="));
        assert!(err(&hex("080112"), DType::Float32).contains("base64: CAES"));
        // An empty string is a proto with no dtype.
        assert!(err(b"", DType::Float32).contains("Cannot parse tensor from proto: "));
        // tensor_content of the wrong size.
        assert!(err(&hex("0801 1204 12020803 2208 0000000000000000"), DType::Float32)
            .contains("Cannot parse tensor from proto: "));
        let vector = Tensor::from_strings(vec![1], vec![b"x".to_vec()]).unwrap();
        let e = compute(&node("ParseTensor", &[("out_type", AttrValue::Type(DType::Float32))]), &[vector]).unwrap_err();
        assert!(e.to_string().contains("Expected `serialized` to be a scalar, got shape: [1]"), "{e}");
    }
}
