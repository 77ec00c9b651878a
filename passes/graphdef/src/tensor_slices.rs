//! V1 checkpoints: the files TensorFlow's `Save` op writes and its `Restore` op reads
//! (`tensor_slice_writer.cc`, `tensor_slice_reader.cc`, `saved_tensor_slice.proto`) — the
//! format before tensor bundles, still what `tf.raw_ops.Save`/`Restore` use (TensorFlow's
//! on-device training tutorial saves and restores a model's weights so).
//!
//! One table file: the empty key holds `SavedTensorSlices { meta }` — every tensor's name,
//! shape, dtype and slices, and `versions { producer: 1 }` — and each slice's key,
//! `EncodeTensorNameSlice(name, slice)` ([`crate::ordered_code`]), holds `SavedTensorSlices
//! { data: SavedSlice { name, slice, data } }` whose `TensorProto` carries the values in its
//! typed field (`float_val`, `int64_val`, `half_val`, `string_val`, …), without dtype or
//! shape. Whole tensors are one slice with an empty extent per dimension. Entries are what
//! TensorFlow writes, byte for byte (the table's block layout may differ; both read alike).

use protobuf::{Message, MessageField};

use autoclust_graph::{DType, Tensor};

use crate::ordered_code::encode_slice_key;
use crate::proto::graph_def as pb;
use crate::proto::saved_model as sm;
use crate::table::{read_table, write_table, Entry};

/// The file bytes of a V1 checkpoint holding `tensors` whole (names must be distinct).
pub fn write_v1(tensors: &[(String, Tensor)]) -> Result<Vec<u8>, String> {
    let mut meta = sm::SavedTensorSliceMeta::new();
    let mut entries: Vec<Entry> = Vec::with_capacity(tensors.len() + 1);
    for (name, t) in tensors {
        let full = vec![(0, None); t.shape.len()];
        let mut m = sm::SavedSliceMeta::new();
        m.name = name.clone();
        m.shape = MessageField::some(shape_proto(&t.shape));
        m.type_ = protobuf::EnumOrUnknown::from_i32(t.dtype.to_tf());
        m.slice.push(whole_slice(t.shape.len()));
        meta.tensor.push(m);
        let mut slice = sm::SavedSlice::new();
        slice.name = name.clone();
        slice.slice = MessageField::some(whole_slice(t.shape.len()));
        slice.data = MessageField::some(typed_values(t).map_err(|e| format!("tensor '{name}': {e}"))?);
        let mut value = sm::SavedTensorSlices::new();
        value.data = MessageField::some(slice);
        entries.push((encode_slice_key(name, &full), value.write_to_bytes().map_err(|e| e.to_string())?));
    }
    let mut versions = pb::VersionDef::new();
    versions.producer = 1;
    meta.versions = MessageField::some(versions);
    let mut head = sm::SavedTensorSlices::new();
    head.meta = MessageField::some(meta);
    entries.push((Vec::new(), head.write_to_bytes().map_err(|e| e.to_string())?));
    entries.sort();
    if let Some(w) = entries.windows(2).find(|w| w[0].0 == w[1].0) {
        let name = crate::ordered_code::decode_slice_key(&w[0].0).map(|(n, _)| n).unwrap_or_default();
        return Err(format!("tensor '{name}' is given twice"));
    }
    Ok(write_table(&entries))
}

/// The tensors of a V1 checkpoint file, in its meta's order. Only tensors saved whole are
/// read; a partitioned one (several slices) is an error naming it.
pub fn read_v1(file: &[u8]) -> Result<Vec<(String, Tensor)>, String> {
    let entries = read_table(file).map_err(|e| e.to_string())?;
    let head = entries.iter().find(|(k, _)| k.is_empty()).ok_or("not a V1 checkpoint (no meta entry)")?;
    let head = sm::SavedTensorSlices::parse_from_bytes(&head.1).map_err(|e| format!("bad meta entry: {e}"))?;
    let meta = head.meta.into_option().ok_or("not a V1 checkpoint (no meta)")?;
    let mut out = Vec::with_capacity(meta.tensor.len());
    for m in meta.tensor {
        let name = m.name.clone();
        let err = |e: String| format!("tensor '{name}': {e}");
        let rank = m.shape.dim.len();
        let whole = m.slice.len() == 1 && m.slice[0].extent.iter().all(|e| e.start == 0 && e.has_length.is_none());
        if !whole {
            return Err(err(format!("saved in {} slices; only whole tensors are read", m.slice.len())));
        }
        let key = encode_slice_key(&name, &vec![(0, None); rank]);
        let bytes =
            entries.iter().find(|(k, _)| *k == key).map(|(_, v)| v).ok_or_else(|| err("no data entry".into()))?;
        let value = sm::SavedTensorSlices::parse_from_bytes(bytes).map_err(|e| err(e.to_string()))?;
        let mut data = value
            .data
            .into_option()
            .and_then(|d| d.data.into_option())
            .ok_or_else(|| err("empty data entry".into()))?;
        // The values carry neither dtype nor shape: they are the meta's.
        data.dtype = m.type_;
        data.tensor_shape = m.shape.clone();
        let bytes = data.write_to_bytes().map_err(|e| err(e.to_string()))?;
        let t = crate::tensor_from_proto_bytes(&bytes).map_err(|e| err(e.unwrap_or_else(|| "bad values".into())))?;
        out.push((name, t));
    }
    Ok(out)
}

fn shape_proto(shape: &[usize]) -> pb::TensorShapeProto {
    let mut s = pb::TensorShapeProto::new();
    for &d in shape {
        let mut dim = pb::tensor_shape_proto::Dim::new();
        dim.size = d as i64;
        s.dim.push(dim);
    }
    s
}

fn whole_slice(rank: usize) -> sm::TensorSliceProto {
    let mut s = sm::TensorSliceProto::new();
    s.extent = (0..rank).map(|_| sm::tensor_slice_proto::Extent::new()).collect();
    s
}

/// `t`'s values in the `TensorProto` field TensorFlow's slice writer fills for its dtype.
fn typed_values(t: &Tensor) -> Result<pb::TensorProto, String> {
    let mut p = pb::TensorProto::new();
    if t.dtype == DType::String {
        p.string_val = t.as_strings().ok_or("no string values")?.to_vec();
        return Ok(p);
    }
    let bytes = t.to_le_bytes().ok_or_else(|| format!("cannot save a {} tensor", t.dtype))?;
    fn words<const N: usize>(b: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
        b.chunks_exact(N).map(|c| c.try_into().expect("chunks of N bytes"))
    }
    match t.dtype {
        DType::Float32 => p.float_val = words(&bytes).map(f32::from_le_bytes).collect(),
        DType::Float64 => p.double_val = words(&bytes).map(f64::from_le_bytes).collect(),
        DType::Int32 => p.int_val = words(&bytes).map(i32::from_le_bytes).collect(),
        DType::Int16 => p.int_val = words(&bytes).map(|w| i16::from_le_bytes(w).into()).collect(),
        DType::Int8 => p.int_val = bytes.iter().map(|&b| (b as i8).into()).collect(),
        DType::UInt8 => p.int_val = bytes.iter().map(|&b| b.into()).collect(),
        DType::UInt16 => p.int_val = words(&bytes).map(|w| u16::from_le_bytes(w).into()).collect(),
        DType::Int64 => p.int64_val = words(&bytes).map(i64::from_le_bytes).collect(),
        DType::UInt32 => p.uint32_val = words(&bytes).map(u32::from_le_bytes).collect(),
        DType::UInt64 => p.uint64_val = words(&bytes).map(u64::from_le_bytes).collect(),
        DType::Bool => p.bool_val = bytes.iter().map(|&b| b != 0).collect(),
        DType::Float16 | DType::BFloat16 => p.half_val = words(&bytes).map(|w| u16::from_le_bytes(w).into()).collect(),
        DType::Complex64 => p.scomplex_val = words(&bytes).map(f32::from_le_bytes).collect(),
        DType::Complex128 => p.dcomplex_val = words(&bytes).map(f64::from_le_bytes).collect(),
        d => return Err(format!("cannot save a {d} tensor in a V1 checkpoint")),
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `tf.raw_ops.Save(filename, ['a', 'b/c', 'h', 's'], [[[1.5, 2], [3, 4]] float32,
    /// [7, 8, 9] int64, [1, -2] float16, ['x', 'yz']])` writes (TensorFlow 2.21).
    const TF_FILE: &[u8] = include_bytes!("../../../testdata/checkpoint/v1_save.ckpt");

    fn sample() -> Vec<(String, Tensor)> {
        vec![
            ("a".into(), Tensor::from_f32(vec![2, 2], vec![1.5, 2.0, 3.0, 4.0]).unwrap()),
            ("b/c".into(), Tensor::from_i64(vec![3], vec![7, 8, 9]).unwrap()),
            (
                "h".into(),
                crate::tensor_bundle::tensor_from_le(DType::Float16, vec![2], &[0x00, 0x3c, 0x00, 0xc0]).unwrap(),
            ),
            ("s".into(), Tensor::from_strings(vec![2], vec![b"x".to_vec(), b"yz".to_vec()]).unwrap()),
        ]
    }

    #[test]
    fn reads_what_tensorflow_writes() {
        let got = read_v1(TF_FILE).unwrap();
        assert_eq!(got, sample());
    }

    /// Every entry (key and value bytes) is the one TensorFlow writes for the same tensors;
    /// only the table's block layout differs, which every table reader reads alike.
    #[test]
    fn writes_tensorflows_entries() {
        let ours = read_table(&write_v1(&sample()).unwrap()).unwrap();
        let tf = read_table(TF_FILE).unwrap();
        assert_eq!(ours, tf);
        assert_eq!(read_v1(&write_v1(&sample()).unwrap()).unwrap(), sample());
    }

    #[test]
    fn refuses_what_it_cannot_hold() {
        let twice = vec![sample()[0].clone(), sample()[0].clone()];
        assert!(write_v1(&twice).unwrap_err().contains("given twice"));
        assert!(read_v1(b"not a table").is_err());
    }
}
