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
//! TensorFlow's writer computes it. Every checksum is verified on reading.
//!
//! A partitioned (sliced) tensor, as `tf.train.Checkpoint` writes a variable
//! split across shards (`MaxShardSizePolicy`) or a partitioned variable, has
//! an entry without bytes listing its slices (`TensorSliceProto`s), and
//! each slice is a tensor of its own under the slice key
//! ([`crate::ordered_code`]); reading puts the tensor back together.
//!
//! [`table`]: crate::table

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use autoclust_graph::{DType, Tensor, TensorData};
use protobuf::{EnumOrUnknown, Message};

use crate::proto::graph_def::{TensorShapeProto, VersionDef};
use crate::proto::saved_model::{BundleEntryProto, BundleHeaderProto};
use crate::table::{get_varint, put_varint, read_table, write_table, TableError};
use crate::{crc32c, ordered_code, proto};

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

/// A tensor from the little-endian bytes of its elements, its size checked against the
/// limits first.
pub fn tensor_from_le(dtype: DType, shape: Vec<usize>, b: &[u8]) -> Result<Tensor, String> {
    let width = dtype.size_of().ok_or_else(|| format!("unsupported dtype {}", dtype.name()))?;
    let n = autoclust_graph::limits::tensor_elements(dtype, &shape).map_err(|e| e.to_string())?;
    if n.checked_mul(width) != Some(b.len()) {
        return Err(format!("{} bytes for {} elements of {}", b.len(), n, dtype.name()));
    }
    Tensor::from_le_bytes(dtype, shape, b).map_err(|e| e.to_string())
}

/// The data shards of a checkpoint, each read when an entry first needs it.
struct Shards<'a> {
    prefix: &'a Path,
    count: u32,
    data: Vec<Option<Vec<u8>>>,
}

impl Shards<'_> {
    /// The tensor of one entry holding bytes (not a sliced one), its checksum verified;
    /// errors name the tensor as `key`.
    fn tensor(&mut self, ipath: &str, key: &str, entry: &BundleEntryProto) -> Result<Tensor, CheckpointError> {
        let entry_err =
            |message: String| CheckpointError::Entry { path: ipath.to_string(), key: key.to_string(), message };
        let dtype = DType::from_tf(entry.dtype.value()).ok_or_else(|| entry_err("unknown dtype".into()))?;
        let shape = entry.shape.as_ref().and_then(shape_dims).ok_or_else(|| entry_err("bad shape".into()))?;
        let shards = self.count;
        let shard = u32::try_from(entry.shard_id)
            .ok()
            .filter(|&s| s < shards)
            .ok_or_else(|| entry_err(format!("shard {} of {shards}", entry.shard_id)))?;
        let dpath = data_path(self.prefix, shard, shards);
        let shown = dpath.display().to_string();
        if self.data[shard as usize].is_none() {
            let d = std::fs::read(&dpath)
                .map_err(|e| CheckpointError::Io { path: shown.clone(), message: e.to_string() })?;
            self.data[shard as usize] = Some(d);
        }
        let d = self.data[shard as usize].as_deref().expect("just read");
        let data_err = |message: String| CheckpointError::Entry { path: shown.clone(), key: key.to_string(), message };
        let range = usize::try_from(entry.offset)
            .ok()
            .zip(usize::try_from(entry.size).ok())
            .and_then(|(o, s)| Some(o..o.checked_add(s)?))
            .filter(|r| r.end <= d.len())
            .ok_or_else(|| {
                data_err(format!("bytes {}+{} lie outside the shard ({} bytes)", entry.offset, entry.size, d.len()))
            })?;
        let bytes = &d[range];
        let (tensor, computed) = if dtype == DType::String {
            decode_strings(shape, bytes).map_err(data_err)?
        } else {
            (tensor_from_le(dtype, shape, bytes).map_err(data_err)?, crc32c::value(bytes))
        };
        let stored = crc32c::unmask(entry.crc32c);
        if computed != stored {
            return Err(CheckpointError::Checksum { path: shown, key: key.to_string(), stored, computed });
        }
        Ok(tensor)
    }
}

/// Reads every tensor of the checkpoint at `prefix`, sorted by key,
/// verifying the table's and every tensor's checksum. A partitioned tensor
/// (an entry listing `slices`) is put together from its slices, each stored
/// under its slice key ([`crate::ordered_code`]); the slices must lie inside
/// the tensor and cover it exactly once, and every slice entry must belong to
/// a tensor that lists it.
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
    let count = u32::try_from(header.num_shards)
        .ok()
        .filter(|&n| n >= 1)
        .ok_or_else(|| bundle(format!("bad shard count {}", header.num_shards)))?;
    let mut shards = Shards { prefix, count, data: vec![None; count as usize] };
    // Slice keys start with a zero byte (so they sort first); tensor names never do.
    let mut slices: HashMap<&[u8], (BundleEntryProto, bool)> = HashMap::new();
    let mut out = Vec::with_capacity(entries.len());
    for (key, value) in &entries[1..] {
        let shown = String::from_utf8_lossy(key).into_owned();
        let entry = BundleEntryProto::parse_from_bytes(value).map_err(|e| CheckpointError::Entry {
            path: ipath.clone(),
            key: shown.clone(),
            message: format!("bad entry: {e}"),
        })?;
        if key.first() == Some(&0) {
            slices.insert(key, (entry, false));
        } else if entry.slices.is_empty() {
            out.push((shown.clone(), shards.tensor(&ipath, &shown, &entry)?));
        } else {
            out.push((shown.clone(), assemble(&mut shards, &ipath, &shown, &entry, &mut slices)?));
        }
    }
    let mut unused: Vec<(&[u8], &(BundleEntryProto, bool))> =
        slices.iter().filter(|(_, (_, used))| !used).map(|(k, v)| (*k, v)).collect();
    unused.sort_by_key(|(k, _)| *k);
    if let Some((key, _)) = unused.first() {
        let shown = String::from_utf8_lossy(key).into_owned();
        let entry_err = |message: String| CheckpointError::Entry { path: ipath.clone(), key: shown.clone(), message };
        let (name, extents) =
            ordered_code::decode_slice_key(key).map_err(|e| entry_err(format!("bad slice key: {e}")))?;
        let spec = ordered_code::slice_spec(&extents);
        let message = if out.iter().any(|(k, _)| *k == name) {
            format!("slice '{spec}' is stored but not listed by the tensor's entry")
        } else {
            format!("slice '{spec}' is stored but the checkpoint has no entry for the tensor")
        };
        return Err(CheckpointError::Entry { path: ipath.clone(), key: name, message });
    }
    Ok(out)
}

/// The partitioned tensor `key` put together from the slices its `entry` lists (each
/// marked used in `slices`).
fn assemble(
    shards: &mut Shards<'_>,
    ipath: &str,
    key: &str,
    entry: &BundleEntryProto,
    slices: &mut HashMap<&[u8], (BundleEntryProto, bool)>,
) -> Result<Tensor, CheckpointError> {
    let entry_err = |message: String| CheckpointError::Entry { path: ipath.to_string(), key: key.to_string(), message };
    let dtype = DType::from_tf(entry.dtype.value()).ok_or_else(|| entry_err("unknown dtype".into()))?;
    let shape = entry.shape.as_ref().and_then(shape_dims).ok_or_else(|| entry_err("bad shape".into()))?;
    let width = match dtype.size_of() {
        Some(w) if dtype != DType::String => w,
        _ => return Err(entry_err(format!("a partitioned {} tensor is not supported", dtype.name()))),
    };
    let n = autoclust_graph::limits::tensor_elements(dtype, &shape).map_err(|e| entry_err(e.to_string()))?;
    let mut buf = vec![0u8; n * width];
    let mut covered = vec![false; n];
    let mut strides = vec![1usize; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    for proto in &entry.slices {
        let extents: Vec<ordered_code::Extent> =
            proto.extent.iter().map(|e| (e.start, e.has_length().then(|| e.length()))).collect();
        let spec = ordered_code::slice_spec(&extents);
        let slice_err = |message: String| entry_err(format!("slice '{spec}': {message}"));
        if extents.len() != shape.len() {
            return Err(slice_err(format!("{} extents for a rank-{} tensor", extents.len(), shape.len())));
        }
        // Each dimension's [start, start + length) must lie in the tensor's shape.
        let mut ranges = Vec::with_capacity(shape.len());
        for (&(start, length), &dim) in extents.iter().zip(&shape) {
            let range = match length {
                None if start == 0 => Some(0..dim),
                None => None,
                Some(l) => usize::try_from(start)
                    .ok()
                    .zip(usize::try_from(l).ok())
                    .and_then(|(s, l)| Some(s..s.checked_add(l)?))
                    .filter(|r| r.end <= dim),
            };
            ranges.push(range.ok_or_else(|| slice_err(format!("lies outside the shape {shape:?}")))?);
        }
        let skey = ordered_code::encode_slice_key(key, &extents);
        let (slice_entry, used) = slices
            .get_mut(skey.as_slice())
            .ok_or_else(|| slice_err("listed, but not stored in the checkpoint".into()))?;
        *used = true;
        let slice_entry = slice_entry.clone();
        let t = shards.tensor(ipath, &format!("{key}[{spec}]"), &slice_entry)?;
        let lengths: Vec<usize> = ranges.iter().map(|r| r.len()).collect();
        if t.dtype != dtype || t.shape != lengths {
            return Err(slice_err(format!(
                "stored as {}{:?}, expected {}{lengths:?}",
                t.dtype.name(),
                t.shape,
                dtype.name()
            )));
        }
        let bytes = &t.to_le_bytes().expect("a fixed-width tensor");
        // Copy row by row (runs along the last dimension), in the slice's row-major order.
        let row = lengths.last().copied().unwrap_or(1);
        let rows = if row == 0 { 0 } else { bytes.len() / (row * width) };
        let mut index = vec![0usize; shape.len()];
        for r in 0..rows {
            let base: usize = index.iter().zip(&ranges).zip(&strides).map(|((i, rg), st)| (rg.start + i) * st).sum();
            if covered[base..base + row].iter().any(|&c| c) {
                return Err(slice_err("overlaps another slice".into()));
            }
            covered[base..base + row].fill(true);
            buf[base * width..(base + row) * width].copy_from_slice(&bytes[r * row * width..(r + 1) * row * width]);
            // The next row: increment the index over every dimension but the last.
            for d in (0..shape.len().saturating_sub(1)).rev() {
                index[d] += 1;
                if index[d] < lengths[d] {
                    break;
                }
                index[d] = 0;
            }
        }
    }
    let missing = covered.iter().filter(|&&c| !c).count();
    if missing > 0 {
        return Err(entry_err(format!("its slices leave {missing} of {n} elements uncovered")));
    }
    tensor_from_le(dtype, shape, &buf).map_err(entry_err)
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

/// A tensor saved in slices, as TensorFlow 1's `Saver` writes a partitioned variable: one
/// entry under `key` with the whole tensor's dtype and shape listing the slices, and each
/// slice's values under its slice key ([`ordered_code::encode_slice_key`]).
#[derive(Clone, Debug)]
pub struct SlicedTensor {
    pub key: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// Each slice's extents (`(start, length)`; `None`: the whole dimension) and values.
    pub slices: Vec<(Vec<ordered_code::Extent>, Tensor)>,
}

/// A checkpoint of `tensors` in one shard: the bytes of `PREFIX.index` and
/// of `PREFIX.data-00000-of-00001`. Keys must be unique.
pub fn checkpoint_bytes(tensors: &[(String, Tensor)]) -> Result<(Vec<u8>, Vec<u8>), CheckpointError> {
    checkpoint_bytes_with_slices(tensors, &[])
}

/// [`checkpoint_bytes`] with tensors saved in slices besides the whole ones (every key,
/// whole or sliced, unique).
pub fn checkpoint_bytes_with_slices(
    tensors: &[(String, Tensor)],
    sliced: &[SlicedTensor],
) -> Result<(Vec<u8>, Vec<u8>), CheckpointError> {
    // Every stored tensor by its key bytes (slice keys start with a 0 byte and sort first),
    // and the sliced tensors' entries, which hold no bytes of their own.
    let mut stored: Vec<(Vec<u8>, &Tensor, String)> =
        tensors.iter().map(|(k, t)| (k.as_bytes().to_vec(), t, k.clone())).collect();
    let mut listing: Vec<(Vec<u8>, BundleEntryProto)> = Vec::new();
    for s in sliced {
        let mut e = BundleEntryProto::new();
        e.dtype = EnumOrUnknown::from_i32(s.dtype.to_tf());
        e.shape = Some(shape_proto(&s.shape)).into();
        for (extents, t) in &s.slices {
            let mut proto = proto::saved_model::TensorSliceProto::new();
            for &(start, length) in extents {
                let mut x = proto::saved_model::tensor_slice_proto::Extent::new();
                x.start = start;
                if let Some(l) = length {
                    x.set_length(l);
                }
                proto.extent.push(x);
            }
            e.slices.push(proto);
            let name = format!("{}[{}]", s.key, ordered_code::slice_spec(extents));
            stored.push((ordered_code::encode_slice_key(&s.key, extents), t, name));
        }
        listing.push((s.key.as_bytes().to_vec(), e));
    }
    let mut keys: Vec<(&[u8], &str)> = stored.iter().map(|(k, _, n)| (k.as_slice(), n.as_str())).collect();
    keys.extend(listing.iter().zip(sliced).map(|((k, _), s)| (k.as_slice(), s.key.as_str())));
    keys.sort();
    if let Some(w) = keys.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(CheckpointError::Unwritable { key: w[0].1.to_string(), message: "duplicate name".into() });
    }
    stored.sort_by(|a, b| a.0.cmp(&b.0));
    let mut header = BundleHeaderProto::new();
    header.num_shards = 1;
    let mut version = VersionDef::new();
    version.producer = 1;
    header.version = Some(version).into();
    let mut entries = vec![(Vec::new(), header.write_to_bytes().expect("header serializes"))];
    entries.extend(listing.iter().map(|(k, e)| (k.clone(), e.write_to_bytes().expect("entry serializes"))));
    let mut data = Vec::new();
    for (key_bytes, t, key) in &stored {
        let (t, key) = (*t, key.clone());
        if key.is_empty() {
            return Err(CheckpointError::Unwritable { key, message: "empty name".into() });
        }
        let offset = data.len();
        let crc = match &t.data {
            TensorData::Str(items) => encode_strings(items, &mut data),
            _ => {
                let b = t.to_le_bytes().ok_or_else(|| CheckpointError::Unwritable {
                    key: key.clone(),
                    message: format!("dtype {} has no checkpoint form", t.dtype.name()),
                })?;
                data.extend_from_slice(&b);
                crc32c::value(&b)
            }
        };
        let mut e = BundleEntryProto::new();
        e.dtype = EnumOrUnknown::from_i32(t.dtype.to_tf());
        e.shape = Some(shape_proto(&t.shape)).into();
        e.offset = offset as i64;
        e.size = (data.len() - offset) as i64;
        e.crc32c = crc32c::mask(crc);
        entries.push((key_bytes.clone(), e.write_to_bytes().expect("entry serializes")));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok((write_table(&entries), data))
}

fn shape_proto(dims: &[usize]) -> TensorShapeProto {
    let mut shape = TensorShapeProto::new();
    for &d in dims {
        let mut dim = proto::graph_def::tensor_shape_proto::Dim::new();
        dim.size = d as i64;
        shape.dim.push(dim);
    }
    shape
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

    #[test]
    fn tensorflows_sliced_checkpoint_reads_as_the_unsliced_one() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/checkpoint");
        let sliced = read_checkpoint(&dir.join("sliced/ck")).unwrap();
        let whole = read_checkpoint(&dir.join("sharded/ck")).unwrap();
        let keys: Vec<&str> = sliced.iter().map(|(k, _)| k.as_str()).collect();
        assert!(keys.contains(&"b/.ATTRIBUTES/VARIABLE_VALUE"), "{keys:?}");
        for (k, t) in sliced.iter().filter(|(k, _)| k != OBJECT_GRAPH_KEY) {
            let (_, w) = whole.iter().find(|(n, _)| n == k).unwrap();
            assert!(t.bit_eq(w), "{k}");
        }
    }

    /// A checkpoint whose tensor `t` (shape `shape`, int32 0, 1, 2, …) lists `listed` and
    /// stores the slices `stored`, each holding the tensor's elements it covers.
    fn sliced_checkpoint(
        dir: &Path,
        shape: &[usize],
        listed: &[Vec<ordered_code::Extent>],
        stored: &[Vec<ordered_code::Extent>],
    ) -> PathBuf {
        let dims = |shape: &[usize]| {
            let mut p = TensorShapeProto::new();
            for &d in shape {
                let mut dim = proto::graph_def::tensor_shape_proto::Dim::new();
                dim.size = d as i64;
                p.dim.push(dim);
            }
            p
        };
        let mut header = BundleHeaderProto::new();
        header.num_shards = 1;
        let mut entries = vec![(Vec::new(), header.write_to_bytes().unwrap())];
        let mut full = BundleEntryProto::new();
        full.dtype = EnumOrUnknown::from_i32(DType::Int32.to_tf());
        full.shape = Some(dims(shape)).into();
        for extents in listed {
            let mut sp = proto::saved_model::TensorSliceProto::new();
            for &(start, length) in extents {
                let mut e = proto::saved_model::tensor_slice_proto::Extent::new();
                e.start = start;
                if let Some(l) = length {
                    e.set_length(l);
                }
                sp.extent.push(e);
            }
            full.slices.push(sp);
        }
        entries.push((b"t".to_vec(), full.write_to_bytes().unwrap()));
        let mut data = Vec::new();
        let mut slice_entries = Vec::new();
        for extents in stored {
            let ranges: Vec<std::ops::Range<usize>> = extents
                .iter()
                .zip(shape)
                .map(|(&(s, l), &d)| match l {
                    Some(l) => s as usize..(s + l) as usize,
                    None => 0..d,
                })
                .collect();
            let mut values = Vec::new();
            let n: usize = shape.iter().product();
            for i in 0..n {
                let mut rest = i;
                let mut inside = true;
                for (d, r) in ranges.iter().enumerate().rev() {
                    inside &= r.contains(&(rest % shape[d]));
                    rest /= shape[d];
                }
                if inside {
                    values.push(i as i32);
                }
            }
            let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            let mut e = BundleEntryProto::new();
            e.dtype = EnumOrUnknown::from_i32(DType::Int32.to_tf());
            e.shape = Some(dims(&ranges.iter().map(|r| r.len()).collect::<Vec<_>>())).into();
            e.offset = data.len() as i64;
            e.size = bytes.len() as i64;
            e.crc32c = crc32c::mask(crc32c::value(&bytes));
            data.extend_from_slice(&bytes);
            slice_entries.push((ordered_code::encode_slice_key("t", extents), e.write_to_bytes().unwrap()));
        }
        slice_entries.sort();
        entries.splice(1..1, slice_entries);
        let prefix = dir.join("sl");
        std::fs::write(index_path(&prefix), write_table(&entries)).unwrap();
        std::fs::write(data_path(&prefix, 0, 1), &data).unwrap();
        prefix
    }

    #[test]
    fn slices_are_put_together_and_inconsistent_ones_refused() {
        let dir = std::env::temp_dir().join(format!("autoclust-slices-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let read = |shape: &[usize], listed: &[Vec<ordered_code::Extent>], stored: &[Vec<ordered_code::Extent>]| {
            read_checkpoint(&sliced_checkpoint(&dir, shape, listed, stored))
        };
        // A [3, 4] tensor cut along its columns, and one cut into four blocks.
        let cols = [vec![(0, None), (0, Some(1))], vec![(0, None), (1, Some(3))]];
        let t = read(&[3, 4], &cols, &cols).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].0, "t");
        assert_eq!(t[0].1.shape, vec![3, 4]);
        assert_eq!(t[0].1.as_i32().unwrap(), (0..12).collect::<Vec<i32>>());
        let blocks = [
            vec![(0, Some(2)), (0, Some(2))],
            vec![(0, Some(2)), (2, Some(2))],
            vec![(2, Some(1)), (0, Some(3))],
            vec![(2, Some(1)), (3, Some(1))],
        ];
        let t = read(&[3, 4], &blocks, &blocks).unwrap();
        assert_eq!(t[0].1.as_i32().unwrap(), (0..12).collect::<Vec<i32>>());

        let err = |r: Result<Vec<(String, Tensor)>, CheckpointError>| r.unwrap_err().to_string();
        let e = err(read(&[3, 4], &cols, &cols[..1]));
        assert!(e.contains("sl.index: tensor 't': slice '-:1,3': listed, but not stored in the checkpoint"), "{e}");
        let extra = [cols[0].clone(), cols[1].clone(), vec![(0, None), (0, Some(2))]];
        let e = err(read(&[3, 4], &cols, &extra));
        assert!(e.contains("tensor 't': slice '-:0,2' is stored but not listed by the tensor's entry"), "{e}");
        let e = err(read(&[3, 4], &blocks[..3], &blocks[..3]));
        assert!(e.contains("tensor 't': its slices leave 1 of 12 elements uncovered"), "{e}");
        let overlap = [vec![(0, None), (0, Some(2))], vec![(0, None), (1, Some(3))]];
        let e = err(read(&[3, 4], &overlap, &overlap));
        assert!(e.contains("tensor 't': slice '-:1,3': overlaps another slice"), "{e}");
        let outside = [vec![(0, None), (2, Some(3))]];
        let e = err(read(&[3, 4], &outside, &[]));
        assert!(e.contains("slice '-:2,3': lies outside the shape [3, 4]"), "{e}");
        let e = err(read(&[3, 4], &[vec![(0, None)]], &[]));
        assert!(e.contains("slice '-': 1 extents for a rank-2 tensor"), "{e}");
        // The slice stored under the key of [0, 1) holds a [3, 2] tensor.
        let wrong = sliced_checkpoint(&dir, &[3, 4], &cols, &[vec![(0, None), (0, Some(2))], cols[1].clone()]);
        let index = read_table(&std::fs::read(index_path(&wrong)).unwrap()).unwrap();
        let mut entries = index.clone();
        let key01 = ordered_code::encode_slice_key("t", &cols[0]);
        let key02 = ordered_code::encode_slice_key("t", &[(0, None), (0, Some(2))]);
        let pos = entries.iter().position(|(k, _)| *k == key02).unwrap();
        entries[pos].0 = key01;
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        std::fs::write(index_path(&wrong), write_table(&entries)).unwrap();
        let e = err(read_checkpoint(&wrong));
        assert!(e.contains("slice '-:0,1': stored as int32[3, 2], expected int32[3, 1]"), "{e}");
        // A flipped byte in a slice is a checksum error naming the slice.
        let prefix = sliced_checkpoint(&dir, &[3, 4], &cols, &cols);
        let mut data = std::fs::read(data_path(&prefix, 0, 1)).unwrap();
        data[0] ^= 1;
        std::fs::write(data_path(&prefix, 0, 1), &data).unwrap();
        let e = err(read_checkpoint(&prefix));
        assert!(e.contains("tensor 't[-:0,1]': checksum mismatch"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
