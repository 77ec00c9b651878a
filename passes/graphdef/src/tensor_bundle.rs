//! TensorFlow checkpoints (the "tensor bundle" of
//! `tensorflow/core/util/tensor_bundle`): `PREFIX.index`, a [`table`] whose
//! empty key holds a `BundleHeaderProto` and whose other keys are tensor
//! names with a `BundleEntryProto` each (dtype, shape, shard, offset, size,
//! masked CRC-32C of the bytes), and `PREFIX.data-SSSSS-of-NNNNN`, the shards the
//! tensor bytes live in, little-endian and back to back.
//!
//! A string tensor is stored as the varint64 length of each element, a
//! masked CRC-32C of those lengths (each taken as a little-endian u32, or
//! u64 past 4 GiB),
//! then the bytes of the elements; its entry's checksum covers the lengths
//! (taken so), the stored length checksum and the element bytes, as
//! TensorFlow's writer computes it. Every checksum is verified on reading;
//! sliced (partitioned) entries are refused.
//!
//! [`table`]: crate::table

use std::path::{Path, PathBuf};

use autoclust_graph::{DType, Tensor, TensorData};
use protobuf::{EnumOrUnknown, Message};

use crate::proto::graph_def::{TensorShapeProto, VersionDef};
use crate::proto::saved_model::{BundleEntryProto, BundleHeaderProto};
use crate::table::{get_varint, put_varint, read_table, write_table, TableError};
use crate::{crc32c, proto};

/// Why a checkpoint could not be read or written; every variant names the file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CheckpointError {
    #[error("{path}: cannot read: {message}")]
    Io { path: String, message: String },
    #[error("{path}: {source}")]
    Table { path: String, source: TableError },
    #[error("{path}: {message}")]
    Bundle { path: String, message: String },
    #[error("{path}: tensor '{key}': {message}")]
    Entry { path: String, key: String, message: String },
    #[error("{path}: tensor '{key}': checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    Checksum { path: String, key: String, stored: u32, computed: u32 },
    #[error("tensor '{key}': cannot be written to a checkpoint: {message}")]
    Unwritable { key: String, message: String },
}

/// `PREFIX.index`.
pub fn index_path(prefix: &Path) -> PathBuf {
    let mut s = prefix.as_os_str().to_os_string();
    s.push(".index");
    PathBuf::from(s)
}

/// `PREFIX.data-SSSSS-of-NNNNN`.
pub fn data_path(prefix: &Path, shard: u32, shards: u32) -> PathBuf {
    let mut s = prefix.as_os_str().to_os_string();
    s.push(format!(".data-{shard:05}-of-{shards:05}"));
    PathBuf::from(s)
}

/// The key under which TensorFlow 2 stores the serialized object graph.
pub const OBJECT_GRAPH_KEY: &str = "_CHECKPOINTABLE_OBJECT_GRAPH";

fn shape_dims(s: &TensorShapeProto) -> Option<Vec<usize>> {
    if s.unknown_rank {
        return None;
    }
    s.dim.iter().map(|d| usize::try_from(d.size).ok()).collect()
}

/// A tensor from the little-endian bytes of its elements.
pub fn tensor_from_le(dtype: DType, shape: Vec<usize>, b: &[u8]) -> Result<Tensor, String> {
    fn arr<const N: usize>(c: &[u8]) -> [u8; N] {
        c.try_into().expect("chunk width")
    }
    let width = dtype.size_of().ok_or_else(|| format!("unsupported dtype {}", dtype.name()))?;
    let n = autoclust_graph::limits::tensor_elements(dtype, &shape).map_err(|e| e.to_string())?;
    if n.checked_mul(width) != Some(b.len()) {
        return Err(format!("{} bytes for {} elements of {}", b.len(), n, dtype.name()));
    }
    let t = match dtype {
        DType::Float32 => Tensor::from_f32(shape, b.chunks_exact(4).map(|c| f32::from_le_bytes(arr(c))).collect()),
        DType::Float64 => Tensor::from_f64(shape, b.chunks_exact(8).map(|c| f64::from_le_bytes(arr(c))).collect()),
        DType::Int32 => Tensor::from_i32(shape, b.chunks_exact(4).map(|c| i32::from_le_bytes(arr(c))).collect()),
        DType::Int64 => Tensor::from_i64(shape, b.chunks_exact(8).map(|c| i64::from_le_bytes(arr(c))).collect()),
        DType::Bool => Tensor::from_bool(shape, b.iter().map(|&x| x != 0).collect()),
        d => Tensor::from_raw(d, shape, b.to_vec()),
    };
    t.map_err(|e| e.to_string())
}

/// The little-endian bytes of a fixed-width tensor's elements.
pub fn tensor_to_le(t: &Tensor) -> Option<Vec<u8>> {
    Some(match &t.data {
        TensorData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::Bool(v) => v.iter().map(|&x| u8::from(x)).collect(),
        TensorData::Raw(v) => v.to_vec(),
        TensorData::Str(_) | TensorData::List(_) => return None,
    })
}

/// Reads every tensor of the checkpoint at `prefix`, sorted by key,
/// verifying the table's and every tensor's checksum.
pub fn read_checkpoint(prefix: &Path) -> Result<Vec<(String, Tensor)>, CheckpointError> {
    let _span = tracing::debug_span!("read_checkpoint", prefix = %prefix.display()).entered();
    let index = index_path(prefix);
    let ipath = index.display().to_string();
    let bytes =
        std::fs::read(&index).map_err(|e| CheckpointError::Io { path: ipath.clone(), message: e.to_string() })?;
    let entries = read_table(&bytes).map_err(|source| CheckpointError::Table { path: ipath.clone(), source })?;
    let bundle = |message: String| CheckpointError::Bundle { path: ipath.clone(), message };
    let Some((first_key, header)) = entries.first() else {
        return Err(bundle("empty index: no bundle header".into()));
    };
    if !first_key.is_empty() {
        return Err(bundle("no bundle header under the empty key".into()));
    }
    let header = BundleHeaderProto::parse_from_bytes(header).map_err(|e| bundle(format!("bad bundle header: {e}")))?;
    if header.endianness.value() != 0 {
        return Err(bundle("big-endian checkpoints are not supported".into()));
    }
    let shards = u32::try_from(header.num_shards)
        .ok()
        .filter(|&n| n >= 1)
        .ok_or_else(|| bundle(format!("bad shard count {}", header.num_shards)))?;
    let mut data: Vec<Option<Vec<u8>>> = vec![None; shards as usize];
    let mut out = Vec::with_capacity(entries.len());
    for (key, value) in &entries[1..] {
        let key = String::from_utf8_lossy(key).into_owned();
        let entry_err = |message: String| CheckpointError::Entry { path: ipath.clone(), key: key.clone(), message };
        let entry = BundleEntryProto::parse_from_bytes(value).map_err(|e| entry_err(format!("bad entry: {e}")))?;
        if !entry.slices.is_empty() {
            return Err(entry_err("partitioned (sliced) variables are not supported".into()));
        }
        let dtype = DType::from_tf(entry.dtype.value()).ok_or_else(|| entry_err("unknown dtype".into()))?;
        let shape = entry.shape.as_ref().and_then(shape_dims).ok_or_else(|| entry_err("bad shape".into()))?;
        let shard = u32::try_from(entry.shard_id)
            .ok()
            .filter(|&s| s < shards)
            .ok_or_else(|| entry_err(format!("shard {} of {shards}", entry.shard_id)))?;
        let dpath = data_path(prefix, shard, shards);
        let shown = dpath.display().to_string();
        if data[shard as usize].is_none() {
            let d = std::fs::read(&dpath)
                .map_err(|e| CheckpointError::Io { path: shown.clone(), message: e.to_string() })?;
            data[shard as usize] = Some(d);
        }
        let d = data[shard as usize].as_deref().expect("just read");
        let range = usize::try_from(entry.offset)
            .ok()
            .zip(usize::try_from(entry.size).ok())
            .and_then(|(o, s)| Some(o..o.checked_add(s)?))
            .filter(|r| r.end <= d.len())
            .ok_or_else(|| CheckpointError::Entry {
                path: shown.clone(),
                key: key.clone(),
                message: format!("bytes {}+{} lie outside the shard ({} bytes)", entry.offset, entry.size, d.len()),
            })?;
        let bytes = &d[range];
        let (tensor, computed) = if dtype == DType::String {
            decode_strings(shape, bytes).map_err(|m| CheckpointError::Entry {
                path: shown.clone(),
                key: key.clone(),
                message: m,
            })?
        } else {
            let t = tensor_from_le(dtype, shape, bytes).map_err(|m| CheckpointError::Entry {
                path: shown.clone(),
                key: key.clone(),
                message: m,
            })?;
            (t, crc32c::value(bytes))
        };
        if computed != crc32c::unmask(entry.crc32c) {
            let stored = crc32c::unmask(entry.crc32c);
            return Err(CheckpointError::Checksum { path: shown, key, stored, computed });
        }
        out.push((key, tensor));
    }
    Ok(out)
}

/// A string tensor in bundle layout, and the entry checksum TensorFlow computes for it.
fn decode_strings(shape: Vec<usize>, b: &[u8]) -> Result<(Tensor, u32), String> {
    let n = autoclust_graph::limits::tensor_elements(DType::String, &shape).map_err(|e| e.to_string())?;
    let mut pos = 0;
    // Each length takes at least one byte: a shape the bytes cannot hold reserves nothing.
    let mut lens = Vec::with_capacity(n.min(b.len()));
    let mut crc = 0;
    for _ in 0..n {
        let l = get_varint(b, &mut pos).ok_or("truncated string lengths")?;
        crc = extend_len(crc, l);
        lens.push(usize::try_from(l).map_err(|_| "string length out of range")?);
    }
    let stored = b.get(pos..pos + 4).ok_or("truncated string length checksum")?;
    let stored_len_crc = u32::from_le_bytes(stored.try_into().expect("4 bytes"));
    if crc32c::unmask(stored_len_crc) != crc {
        return Err("checksum mismatch in the string lengths".into());
    }
    crc = crc32c::extend(crc, stored);
    pos += 4;
    let mut items = Vec::with_capacity(lens.len());
    for l in lens {
        let s = b.get(pos..pos + l).ok_or("truncated string data")?;
        crc = crc32c::extend(crc, s);
        items.push(s.to_vec());
        pos += l;
    }
    if pos != b.len() {
        return Err(format!("{} bytes left after the strings", b.len() - pos));
    }
    Ok((Tensor::from_strings(shape, items).map_err(|e| e.to_string())?, crc))
}

/// Checksums one string length as TensorFlow does: as a little-endian u32
/// when it fits, else as a u64.
fn extend_len(crc: u32, len: u64) -> u32 {
    match u32::try_from(len) {
        Ok(l) => crc32c::extend(crc, &l.to_le_bytes()),
        Err(_) => crc32c::extend(crc, &len.to_le_bytes()),
    }
}

fn encode_strings(items: &[Vec<u8>], out: &mut Vec<u8>) -> u32 {
    let mut crc = 0;
    for s in items {
        put_varint(out, s.len() as u64);
        crc = extend_len(crc, s.len() as u64);
    }
    let len_crc = crc32c::mask(crc).to_le_bytes();
    out.extend_from_slice(&len_crc);
    crc = crc32c::extend(crc, &len_crc);
    for s in items {
        out.extend_from_slice(s);
        crc = crc32c::extend(crc, s);
    }
    crc
}

/// A checkpoint of `tensors` in one shard: the bytes of `PREFIX.index` and
/// of `PREFIX.data-00000-of-00001`. Keys must be unique.
pub fn checkpoint_bytes(tensors: &[(String, Tensor)]) -> Result<(Vec<u8>, Vec<u8>), CheckpointError> {
    let mut sorted: Vec<&(String, Tensor)> = tensors.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    if let Some(w) = sorted.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(CheckpointError::Unwritable { key: w[0].0.clone(), message: "duplicate name".into() });
    }
    let mut header = BundleHeaderProto::new();
    header.num_shards = 1;
    let mut version = VersionDef::new();
    version.producer = 1;
    header.version = Some(version).into();
    let mut entries = vec![(Vec::new(), header.write_to_bytes().expect("header serializes"))];
    let mut data = Vec::new();
    for (key, t) in sorted {
        if key.is_empty() {
            return Err(CheckpointError::Unwritable { key: key.clone(), message: "empty name".into() });
        }
        let offset = data.len();
        let crc = match &t.data {
            TensorData::Str(items) => encode_strings(items, &mut data),
            _ => {
                let b = tensor_to_le(t).ok_or_else(|| CheckpointError::Unwritable {
                    key: key.clone(),
                    message: format!("dtype {} has no checkpoint form", t.dtype.name()),
                })?;
                data.extend_from_slice(&b);
                crc32c::value(&b)
            }
        };
        let mut e = BundleEntryProto::new();
        e.dtype = EnumOrUnknown::from_i32(t.dtype.to_tf());
        let mut shape = TensorShapeProto::new();
        for &d in &t.shape {
            let mut dim = proto::graph_def::tensor_shape_proto::Dim::new();
            dim.size = d as i64;
            shape.dim.push(dim);
        }
        e.shape = Some(shape).into();
        e.offset = offset as i64;
        e.size = (data.len() - offset) as i64;
        e.crc32c = crc32c::mask(crc);
        entries.push((key.as_bytes().to_vec(), e.write_to_bytes().expect("entry serializes")));
    }
    Ok((write_table(&entries), data))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/savedmodel").join(name)
    }

    #[test]
    fn reads_a_tensorflow_checkpoint() {
        let t = read_checkpoint(&fixture("train/variables/variables")).unwrap();
        let keys: Vec<&str> = t.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, [OBJECT_GRAPH_KEY, "b/.ATTRIBUTES/VARIABLE_VALUE", "w/.ATTRIBUTES/VARIABLE_VALUE"]);
        let w = &t[2].1;
        assert_eq!((w.dtype, w.shape.clone()), (DType::Float32, vec![3, 2]));
        assert_eq!(t[1].1.as_f32().unwrap(), &[0.0, 0.0]);
        assert_eq!(t[0].1.dtype, DType::String);
    }

    #[test]
    fn round_trip_with_strings_and_every_dtype() {
        let tensors = vec![
            ("a/w".to_string(), Tensor::from_f32(vec![2, 2], vec![1.0, -2.5, 3.0, f32::INFINITY]).unwrap()),
            ("b".to_string(), Tensor::from_i64(vec![3], vec![1, -2, i64::MAX]).unwrap()),
            ("c".to_string(), Tensor::from_bool(vec![2], vec![true, false]).unwrap()),
            ("d".to_string(), Tensor::from_f64(vec![], vec![0.25]).unwrap()),
            ("e".to_string(), Tensor::from_i32(vec![0], vec![]).unwrap()),
            ("s".to_string(), Tensor::from_strings(vec![2], vec![b"xy".to_vec(), vec![0; 200]]).unwrap()),
        ];
        let dir = std::env::temp_dir().join(format!("autoclust-ckpt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let prefix = dir.join("ckpt");
        let (index, data) = checkpoint_bytes(&tensors).unwrap();
        std::fs::write(index_path(&prefix), &index).unwrap();
        std::fs::write(data_path(&prefix, 0, 1), &data).unwrap();
        let back = read_checkpoint(&prefix).unwrap();
        assert_eq!(back.len(), tensors.len());
        for ((k, t), (k2, t2)) in tensors.iter().zip(&back) {
            assert_eq!(k, k2);
            assert!(t.bit_eq(t2), "{k}");
        }
        // A flipped data byte is a checksum error naming the data file and the tensor.
        let mut bad = data.clone();
        bad[0] ^= 0x40;
        std::fs::write(data_path(&prefix, 0, 1), &bad).unwrap();
        let e = read_checkpoint(&prefix).unwrap_err();
        assert!(matches!(&e, CheckpointError::Checksum { key, .. } if key == "a/w"), "{e}");
        assert!(e.to_string().contains("ckpt.data-00000-of-00001: tensor 'a/w': checksum mismatch"), "{e}");
        // A truncated shard names its file too; a missing index names the index.
        std::fs::write(data_path(&prefix, 0, 1), &data[..data.len() - 1]).unwrap();
        assert!(read_checkpoint(&prefix).unwrap_err().to_string().contains("outside the shard"));
        std::fs::remove_file(index_path(&prefix)).unwrap();
        assert!(read_checkpoint(&prefix).unwrap_err().to_string().contains("ckpt.index: cannot read"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn string_layout_matches_tensorflow() {
        // Re-encoding TensorFlow's own object-graph entry gives its bytes and checksum.
        let prefix = fixture("train/variables/variables");
        let t = read_checkpoint(&prefix).unwrap();
        let TensorData::Str(items) = &t[0].1.data else { panic!("not strings") };
        let (index, data) = checkpoint_bytes(&t[..1]).unwrap();
        let entries = read_table(&index).unwrap();
        let e = BundleEntryProto::parse_from_bytes(&entries[1].1).unwrap();
        let mut again = Vec::new();
        let crc = encode_strings(items, &mut again);
        assert_eq!(again, data);
        assert_eq!(crc32c::unmask(e.crc32c), crc);
    }
}
