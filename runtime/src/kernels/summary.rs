//! TensorFlow 1's summary kernels (`summary_op.cc`, `summary_tensor_op.cc`): `ScalarSummary`,
//! `HistogramSummary`, `TensorSummaryV2` and `MergeSummary`, which
//! `tf.compat.v1.summary.scalar`, `.histogram`, `.text`/`.tensor_summary` and `.merge_all`
//! put in nearly every TF1 training graph. Each returns a serialized `Summary` protocol
//! buffer (`summary.proto`) as a string scalar, byte for byte what TensorFlow's C++
//! serializer writes: fields in field-number order, proto3 scalars left out when their bits
//! are zero, the `simple_value` of the oneof always written, doubles packed.
//!
//! The histogram is TensorFlow's `histogram::Histogram` with its default buckets (±1e-12
//! growing by 10% to ±1e20, then ±`DBL_MAX`, and 0), runs of empty buckets collapsed into
//! their last limit as `EncodeToProto(…, preserve_zero_buckets = false)` does. Errors use
//! TensorFlow's messages.

use std::collections::HashSet;
use std::sync::OnceLock;

use autoclust_graph::{DType, Node, Tensor, TensorData};

use super::shape_ops::debug_shape;
use super::string::strings;
use super::wire::{put_bytes, put_message, put_varint, Payload, Wire};
use super::{one, Inputs, PureFn};
use crate::error::{KResult, KernelError};

/// The summary ops' kernels, or `None` if `node.op` is not one.
pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let f: PureFn = match node.op.as_str() {
        "ScalarSummary" => Box::new(|inp: Inputs| {
            super::arity(&inp, 2)?;
            one(summary_tensor(scalar_summary(&inp[0], &inp[1])?))
        }),
        "HistogramSummary" => {
            let name = node.name.clone();
            Box::new(move |inp: Inputs| {
                super::arity(&inp, 2)?;
                one(summary_tensor(histogram_summary(&inp[0], &inp[1], &name)?))
            })
        }
        "MergeSummary" => Box::new(|inp: Inputs| one(summary_tensor(merge_summary(&inp)?))),
        "TensorSummaryV2" => Box::new(|inp: Inputs| {
            super::arity(&inp, 3)?;
            one(summary_tensor(tensor_summary(&inp[0], &inp[1], &inp[2])?))
        }),
        "Timestamp" => Box::new(|inp: Inputs| {
            super::arity(&inp, 0)?;
            one(Tensor::scalar_f64(timestamp()))
        }),
        _ => return Ok(None),
    };
    Ok(Some(f))
}

/// `Timestamp` (`tf.timestamp()`, TensorFlow's `logging_ops.cc` beside the summaries): the
/// wall-clock time in seconds since the Unix epoch as a float64, microsecond resolution as
/// TensorFlow's `Env::NowMicros() / 1e6` gives it. Stateful: every run reads the clock anew.
fn timestamp() -> f64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    now.as_micros() as f64 / 1e6
}

fn summary_tensor(bytes: Vec<u8>) -> Tensor {
    Tensor::from_strings(Vec::new(), vec![bytes]).expect("a scalar holds one string")
}

/// `ScalarSummary(tags, values)`: one `Value { tag, simple_value }` per element, the value
/// converted to float32 as C++'s `float(T)` does (integers rounded once).
pub(crate) fn scalar_summary(tags: &Tensor, values: &Tensor) -> KResult<Vec<u8>> {
    let names = strings(tags, "tags")?;
    if tags.shape != values.shape {
        let single =
            if names.len() == 1 { format!(" (tag '{}')", String::from_utf8_lossy(&names[0])) } else { String::new() };
        return Err(KernelError::invalid(format!(
            "tags and values are not the same shape: {} != {}{single}",
            debug_shape(&tags.shape),
            debug_shape(&values.shape)
        )));
    }
    let floats = as_f32(values)?;
    let mut out = Vec::new();
    for (tag, &x) in names.iter().zip(&floats) {
        let mut value = Vec::with_capacity(tag.len() + 8);
        put_bytes(&mut value, 1, tag);
        value.push(0x15); // simple_value = 2, fixed32: a oneof member, written even when 0
        value.extend_from_slice(&x.to_le_bytes());
        put_message(&mut out, 1, &value);
    }
    Ok(out)
}

/// The elements of a real-number tensor as `float(T)` gives them.
fn as_f32(t: &Tensor) -> KResult<Vec<f32>> {
    Ok(match (&t.data, t.dtype) {
        (TensorData::F32(v), _) => v.to_vec(),
        (TensorData::I64(v), _) => v.iter().map(|&x| x as f32).collect(),
        (TensorData::I32(v), _) => v.iter().map(|&x| x as f32).collect(),
        (TensorData::Raw(b), DType::UInt64) => u64s(b).map(|x| x as f32).collect(),
        _ => match t.to_f64_vec() {
            // float64 rounds once; the narrower integers and halves are exact in float64.
            Some(v) if t.dtype != DType::Bool => v.into_iter().map(|x| x as f32).collect(),
            _ => return Err(KernelError::DType(t.dtype)),
        },
    })
}

/// The elements of a uint64 tensor from their little-endian bytes.
fn u64s(b: &[u8]) -> impl Iterator<Item = u64> + '_ {
    b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
}

/// `HistogramSummary(tag, values)`: one `Value { tag, histo }`.
pub(crate) fn histogram_summary(tag: &Tensor, values: &Tensor, node: &str) -> KResult<Vec<u8>> {
    if !tag.shape.is_empty() {
        return Err(KernelError::invalid("tags must be scalar"));
    }
    let tag = &strings(tag, "tag")?[0];
    let xs = match (&values.data, values.dtype) {
        (TensorData::Raw(b), DType::UInt64) => u64s(b).map(|x| x as f64).collect(),
        _ if values.dtype == DType::Bool => return Err(KernelError::DType(values.dtype)),
        _ => values.to_f64_vec().ok_or(KernelError::DType(values.dtype))?,
    };
    let mut histo = Histogram::new();
    for x in xs {
        if x.is_nan() {
            return Err(KernelError::invalid(format!("Nan in summary histogram for: {node}")));
        }
        if x.is_infinite() {
            return Err(KernelError::invalid(format!("Infinity in Histogram for: {node}")));
        }
        histo.add(x);
    }
    let mut value = Vec::new();
    put_bytes(&mut value, 1, tag);
    put_message(&mut value, 5, &histo.encode());
    let mut out = Vec::new();
    put_message(&mut out, 1, &value);
    Ok(out)
}

/// TensorFlow's default bucket limits: −DBL_MAX, −1e20⁻ … −1e-12, 0, 1e-12 … 1e20⁻, DBL_MAX
/// (each step ×1.1, computed in the same order, so the same doubles).
fn default_limits() -> &'static [f64] {
    static LIMITS: OnceLock<Vec<f64>> = OnceLock::new();
    LIMITS.get_or_init(|| {
        let mut pos = Vec::new();
        let mut v = 1.0e-12;
        while v < 1.0e20 {
            pos.push(v);
            v *= 1.1;
        }
        pos.push(f64::MAX);
        let mut all: Vec<f64> = pos.iter().rev().map(|&x| -x).collect();
        all.push(0.0);
        all.extend_from_slice(&pos);
        all
    })
}

/// `histogram::Histogram` over the default buckets.
struct Histogram {
    limits: &'static [f64],
    buckets: Vec<f64>,
    min: f64,
    max: f64,
    num: f64,
    sum: f64,
    sum_squares: f64,
}

impl Histogram {
    fn new() -> Histogram {
        let limits = default_limits();
        Histogram {
            limits,
            buckets: vec![0.0; limits.len()],
            min: limits[limits.len() - 1],
            max: -f64::MAX,
            num: 0.0,
            sum: 0.0,
            sum_squares: 0.0,
        }
    }

    fn add(&mut self, x: f64) {
        // `std::upper_bound`: the first limit greater than x. Only DBL_MAX itself lies past
        // the last limit; TensorFlow would index out of bounds there, it goes in the last bucket.
        let b = self.limits.partition_point(|&l| l <= x).min(self.buckets.len() - 1);
        self.buckets[b] += 1.0;
        if self.min > x {
            self.min = x;
        }
        if self.max < x {
            self.max = x;
        }
        self.num += 1.0;
        self.sum += x;
        self.sum_squares += x * x;
    }

    /// A serialized `HistogramProto`, empty buckets collapsed as TensorFlow does.
    fn encode(&self) -> Vec<u8> {
        let (mut limits, mut counts) = (Vec::new(), Vec::new());
        let mut i = 0;
        while i < self.buckets.len() {
            let (mut end, mut count) = (self.limits[i], self.buckets[i]);
            i += 1;
            if count <= 0.0 {
                while i < self.buckets.len() && self.buckets[i] <= 0.0 {
                    end = self.limits[i];
                    count = self.buckets[i];
                    i += 1;
                }
            }
            limits.push(end);
            counts.push(count);
        }
        if limits.is_empty() {
            limits.push(f64::MAX);
            counts.push(0.0);
        }
        let mut out = Vec::new();
        for (field, x) in [(1, self.min), (2, self.max), (3, self.num), (4, self.sum), (5, self.sum_squares)] {
            if x.to_bits() != 0 {
                put_varint(&mut out, field << 3 | 1);
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
        for (field, list) in [(6, &limits), (7, &counts)] {
            let packed: Vec<u8> = list.iter().flat_map(|x| x.to_le_bytes()).collect();
            put_bytes(&mut out, field, &packed);
        }
        out
    }
}

/// `TensorSummaryV2(tag, tensor, serialized_summary_metadata)` (`tf.compat.v1.summary.text`,
/// `.tensor_summary`): one `Value { tag, tensor, metadata }`, the tensor as
/// `AsProtoTensorContent` writes it (strings as `string_val`, every other type's
/// little-endian bytes as `tensor_content`) and the metadata's bytes as given (TensorFlow
/// parses and re-serializes them; a canonical message comes back unchanged).
fn tensor_summary(tag: &Tensor, tensor: &Tensor, metadata: &Tensor) -> KResult<Vec<u8>> {
    if !metadata.shape.is_empty() {
        return Err(KernelError::invalid("tag and serialized_summary_metadata must be scalars"));
    }
    tensor_value_summary(tag, tensor, Some(&strings(metadata, "serialized_summary_metadata")?[0]))
}

/// A `Summary` of one `Value { tag, tensor, metadata }` (the metadata left out when `None`:
/// TensorFlow 2's `WriteSummary` sets it only when given).
pub(crate) fn tensor_value_summary(tag: &Tensor, tensor: &Tensor, metadata: Option<&[u8]>) -> KResult<Vec<u8>> {
    if !tag.shape.is_empty() {
        return Err(KernelError::invalid("tag and serialized_summary_metadata must be scalars"));
    }
    let tag = &strings(tag, "tag")?[0];
    let mut proto = Vec::new();
    put_varint(&mut proto, 1 << 3);
    put_varint(&mut proto, tensor.dtype.to_tf() as u64);
    let mut shape = Vec::new();
    for &d in &tensor.shape {
        let mut dim = Vec::new();
        if d > 0 {
            put_varint(&mut dim, 1 << 3);
            put_varint(&mut dim, d as u64);
        }
        put_message(&mut shape, 2, &dim);
    }
    put_message(&mut proto, 2, &shape);
    match &tensor.data {
        TensorData::Str(v) => v.iter().for_each(|s| put_message(&mut proto, 8, s)),
        _ => put_bytes(&mut proto, 4, &tensor.to_le_bytes().ok_or(KernelError::DType(tensor.dtype))?),
    }
    let mut value = Vec::new();
    put_bytes(&mut value, 1, tag);
    put_message(&mut value, 8, &proto);
    if let Some(metadata) = metadata {
        put_message(&mut value, 9, metadata);
    }
    let mut out = Vec::new();
    put_message(&mut out, 1, &value);
    Ok(out)
}

/// `MergeSummary(inputs…)`: the values of every input `Summary`, in order; a tag seen twice
/// (other than the empty tag) is an error.
fn merge_summary(inputs: &[Tensor]) -> KResult<Vec<u8>> {
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    let mut out = Vec::new();
    for t in inputs {
        for s in strings(t, "inputs")? {
            let values =
                summary_values(s).ok_or_else(|| KernelError::invalid("Could not parse one of the summary inputs"))?;
            for (value, tag) in values {
                if !tag.is_empty() && !seen.insert(tag.to_vec()) {
                    return Err(KernelError::invalid(format!(
                        "Duplicate tag {} found in summary inputs",
                        String::from_utf8_lossy(tag)
                    )));
                }
                put_message(&mut out, 1, value);
            }
        }
    }
    Ok(out)
}

/// The `value` entries of a serialized `Summary`, each with its tag, or `None` when the
/// bytes are not a well-formed message (a tag that is not UTF-8 fails proto3's parse too).
/// Other top-level fields are dropped, as copying the parsed values drops them.
fn summary_values(bytes: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    let mut values = Vec::new();
    let mut summary = Wire::new(bytes);
    while let Some((field, payload)) = summary.field().ok()? {
        let (1, Payload::Bytes(value)) = (field, payload) else { continue };
        let mut tag: &[u8] = &[];
        let mut fields = Wire::new(value);
        while let Some((f, p)) = fields.field().ok()? {
            if let (1, Payload::Bytes(t)) = (f, p) {
                std::str::from_utf8(t).ok()?;
                tag = t;
            }
        }
        values.push((value, tag));
    }
    Some(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(shape: Vec<usize>, v: &[&str]) -> Tensor {
        Tensor::from_strings(shape, v.iter().map(|s| s.as_bytes().to_vec()).collect()).unwrap()
    }

    /// `Timestamp` reads the clock at every run: a float64 scalar of seconds since the epoch
    /// (after 2020, before 2100), never decreasing from one run to the next.
    #[test]
    fn timestamp_reads_the_clock_each_run() {
        let node = crate::kernels::probe("Timestamp");
        let f = prepare(&node).unwrap().unwrap();
        let a = f(Inputs::new()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = f(Inputs::new()).unwrap();
        let (a, b) = (a[0].as_f64().unwrap()[0], b[0].as_f64().unwrap()[0]);
        assert!((1.58e9..4.1e9).contains(&a), "{a}");
        assert!(b > a && b - a < 60.0, "{a} then {b}");
        assert!(f(std::iter::once(Tensor::scalar_f32(1.0)).collect()).is_err(), "Timestamp takes no input");
    }

    #[test]
    fn scalar_summary_matches_tensorflows_bytes() {
        // tf.raw_ops.ScalarSummary(tags="loss", values=0.5).numpy()
        let b = scalar_summary(&strs(vec![], &["loss"]), &Tensor::scalar_f32(0.5)).unwrap();
        assert_eq!(b, b"\n\x0b\n\x04loss\x15\x00\x00\x00?");
        // A zero value is still written (oneof); an empty tag is not.
        let b = scalar_summary(&strs(vec![], &[""]), &Tensor::scalar_f32(0.0)).unwrap();
        assert_eq!(b, b"\n\x05\x15\x00\x00\x00\x00");
        let e = scalar_summary(&strs(vec![2], &["a", "b"]), &Tensor::scalar_f32(0.0)).unwrap_err();
        assert!(e.to_string().contains("tags and values are not the same shape: [2] != []"), "{e}");
    }

    #[test]
    fn default_buckets_are_tensorflows() {
        let l = default_limits();
        // 774 positive limits below 1e20, DBL_MAX, their negatives, and 0.
        assert_eq!(l.len(), 2 * 775 + 1);
        assert_eq!(l[775], 0.0);
        assert_eq!(l[776], 1e-12);
        assert_eq!(l[l.len() - 1], f64::MAX);
        assert_eq!(l[0], -f64::MAX);
        assert!(l.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn histogram_collapses_empty_runs_and_rejects_nan() {
        let v = Tensor::from_f32(vec![3], vec![1.0, 2.0, 0.0]).unwrap();
        let b = histogram_summary(&strs(vec![], &["h"]), &v, "n").unwrap();
        let values = summary_values(&b).unwrap();
        assert_eq!(values.len(), 1);
        assert_eq!(values[0].1, b"h");
        let mut h = Histogram::new();
        assert_eq!(h.encode().len(), 2 * 9 + 2 * 10, "max, min and one (DBL_MAX, 0) bucket");
        h.add(0.0);
        assert_eq!(h.buckets[776], 1.0, "0 goes in the bucket whose limit is 1e-12");
        let nan = Tensor::from_f32(vec![1], vec![f32::NAN]).unwrap();
        let e = histogram_summary(&strs(vec![], &["h"]), &nan, "hist").unwrap_err();
        assert!(e.to_string().contains("Nan in summary histogram for: hist"), "{e}");
        let inf = Tensor::from_f32(vec![2], vec![1.0, f32::INFINITY]).unwrap();
        let e = histogram_summary(&strs(vec![], &["h"]), &inf, "hist").unwrap_err();
        assert!(e.to_string().contains("Infinity in Histogram for: hist"), "{e}");
    }

    #[test]
    fn histograms_match_tensorflows_bytes() {
        // tf.raw_ops.HistogramSummary(tag="i", values=np.array([3, -7], np.int32)).numpy()
        let v = Tensor::from_i32(vec![2], vec![3, -7]).unwrap();
        let b = histogram_summary(&strs(vec![], &["i"]), &v, "n").unwrap();
        let tf: &[u8] = b"\n\x87\x01\n\x01i*\x81\x01\t\x00\x00\x00\x00\x00\x00\x1c\xc0\x11\x00\x00\x00\x00\x00\x00\x08@\x19\x00\x00\x00\x00\x00\x00\x00@!\x00\x00\x00\x00\x00\x00\x10\xc0)\x00\x00\x00\x00\x00\x00M@2(a/5L\xd6\xdd\x1d\xc0)\x88\xea\xd0\xc2&\x1b\xc0h\xbc\x105\x9a\x07\x07@\r\x9c\xc5\xa0)U\t@\xff\xff\xff\xff\xff\xff\xef\x7f:(\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xf0?\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xf0?\x00\x00\x00\x00\x00\x00\x00\x00";
        assert_eq!(b, tf);
        // -0.0: min and max written (their bits are not zero), the sum +0.0 left out.
        let v = Tensor::from_f32(vec![1], vec![-0.0]).unwrap();
        let b = histogram_summary(&strs(vec![], &["i"]), &v, "n").unwrap();
        let tf: &[u8] = b"\nT\n\x01i*O\t\x00\x00\x00\x00\x00\x00\x00\x80\x11\x00\x00\x00\x00\x00\x00\x00\x80\x19\x00\x00\x00\x00\x00\x00\xf0?2\x18\x00\x00\x00\x00\x00\x00\x00\x00\x11\xea-\x81\x99\x97q=\xff\xff\xff\xff\xff\xff\xef\x7f:\x18\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xf0?\x00\x00\x00\x00\x00\x00\x00\x00";
        assert_eq!(b, tf);
        // int64 values round once to float32 in a scalar summary: 2^40 + 1 -> 2^40.
        let v = Tensor::from_i64(vec![2], vec![3, (1 << 40) + 1]).unwrap();
        let b = scalar_summary(&strs(vec![2], &["a", "b"]), &v).unwrap();
        assert_eq!(b, b"\n\x08\n\x01a\x15\x00\x00@@\n\x08\n\x01b\x15\x00\x00\x80S");
    }

    #[test]
    fn tensor_summaries_match_tensorflows_bytes() {
        // tf.compat.v1.summary.text("notes", tf.constant(["hello", "wörld"]))
        let meta = Tensor::from_strings(vec![], vec![b"\n\x06\n\x04text".to_vec()]).unwrap();
        let b = tensor_summary(&strs(vec![], &["notes"]), &strs(vec![2], &["hello", "wörld"]), &meta).unwrap();
        assert_eq!(
            b,
            "\n*\n\x05notesB\x17\x08\x07\x12\x04\x12\x02\x08\x02B\x05helloB\x06wörldJ\x08\n\x06\n\x04text".as_bytes()
        );
        // tf.compat.v1.summary.tensor_summary("tens", tf.constant([[1.5, 2.0]])): empty metadata
        // is still written.
        let t = Tensor::from_f32(vec![1, 2], vec![1.5, 2.0]).unwrap();
        let b = tensor_summary(&strs(vec![], &["tens"]), &t, &strs(vec![], &[""])).unwrap();
        assert_eq!(
            b,
            b"\n \n\x04tensB\x16\x08\x01\x12\x08\x12\x02\x08\x01\x12\x02\x08\x02\"\x08\x00\x00\xc0?\x00\x00\x00@J\x00"
        );
        // A bool scalar: an empty shape message, one byte of content.
        let b = tensor_summary(&strs(vec![], &["b"]), &Tensor::from_bool(vec![], vec![true]).unwrap(), &meta).unwrap();
        assert!(b.starts_with(b"\n\x16\n\x01bB\x07\x08\n\x12\x00\"\x01\x01J\x08"), "{b:?}");
    }

    #[test]
    fn merge_keeps_values_in_order_and_refuses_duplicates() {
        let a = scalar_summary(&strs(vec![], &["a"]), &Tensor::scalar_f32(1.0)).unwrap();
        let b = scalar_summary(&strs(vec![], &["b"]), &Tensor::scalar_f32(2.0)).unwrap();
        let m = merge_summary(&[summary_tensor(a.clone()), summary_tensor(b.clone())]).unwrap();
        assert_eq!(m, [a.clone(), b].concat());
        let e = merge_summary(&[summary_tensor(a.clone()), summary_tensor(a)]).unwrap_err();
        assert!(e.to_string().contains("Duplicate tag a found in summary inputs"), "{e}");
        let e = merge_summary(&[summary_tensor(b"\x0a\x05ab".to_vec())]).unwrap_err();
        assert!(e.to_string().contains("Could not parse one of the summary inputs"), "{e}");
    }
}
