//! The sorted string table TensorFlow's checkpoint index is stored in
//! (LevelDB's table format, as `tensorflow/core/lib/io/table*` writes it):
//! data blocks of prefix-compressed key/value entries with restart points,
//! an index block mapping a separator key to each data block's handle, an
//! empty metaindex block, and a 48-byte footer ending in a magic number.
//! Every block is followed by a compression byte and a masked CRC-32C of
//! block and byte, which [`read_table`] verifies.
//!
//! The writer puts a restart point at every entry (no prefix sharing), a
//! legal choice any reader handles, and cuts data blocks near 4 KiB.

use crate::crc32c;

/// `tensorflow::table::kTableMagicNumber`.
const MAGIC: u64 = 0xdb47_7524_8b80_fb57;
const FOOTER_LEN: usize = 48;
/// Compression byte + masked checksum after each block.
const TRAILER_LEN: usize = 5;
const BLOCK_TARGET: usize = 4096;

/// Why a table could not be read (the caller names the file).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TableError {
    #[error("not a table: {0}")]
    Format(String),
    #[error("checksum mismatch in the block at offset {offset} (stored {stored:#010x}, computed {computed:#010x})")]
    Checksum { offset: u64, stored: u32, computed: u32 },
    #[error("block at offset {offset} is compressed (type {kind}); only uncompressed tables are supported")]
    Compressed { offset: u64, kind: u8 },
}

/// One key/value pair of a table.
pub type Entry = (Vec<u8>, Vec<u8>);

fn bad(m: impl Into<String>) -> TableError {
    TableError::Format(m.into())
}

/// Reads a base-128 varint at `*pos`.
pub(crate) fn get_varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Handle {
    offset: u64,
    size: u64,
}

fn get_handle(b: &[u8], pos: &mut usize) -> Option<Handle> {
    Some(Handle { offset: get_varint(b, pos)?, size: get_varint(b, pos)? })
}

/// The contents of the block at `h`, its trailer checked.
fn block(file: &[u8], h: Handle) -> Result<&[u8], TableError> {
    let start = usize::try_from(h.offset).map_err(|_| bad("block offset out of range"))?;
    let len = usize::try_from(h.size).map_err(|_| bad("block size out of range"))?;
    // Checked all the way: a handle near 2^64 (found by fuzzing) must not wrap past the test.
    let end = start
        .checked_add(len)
        .filter(|e| e.checked_add(TRAILER_LEN).is_some_and(|t| t <= file.len()))
        .ok_or_else(|| {
            bad(format!("block at offset {start} of {len} bytes runs past the end of the file ({} bytes)", file.len()))
        })?;
    let kind = file[end];
    let stored = u32::from_le_bytes(file[end + 1..end + 5].try_into().expect("4 bytes"));
    let computed = crc32c::extend(crc32c::value(&file[start..end]), &[kind]);
    if crc32c::unmask(stored) != computed {
        return Err(TableError::Checksum { offset: h.offset, stored: crc32c::unmask(stored), computed });
    }
    if kind != 0 {
        return Err(TableError::Compressed { offset: h.offset, kind });
    }
    Ok(&file[start..end])
}

/// The key/value entries of one block, in order.
fn entries(block: &[u8]) -> Result<Vec<Entry>, TableError> {
    if block.len() < 4 {
        return Err(bad("block shorter than its restart count"));
    }
    let n_restarts = u32::from_le_bytes(block[block.len() - 4..].try_into().expect("4 bytes")) as usize;
    let data_end = n_restarts
        .checked_mul(4)
        .and_then(|r| block.len().checked_sub(4 + r))
        .ok_or_else(|| bad("restart array larger than its block"))?;
    let mut out: Vec<Entry> = Vec::new();
    let mut key: Vec<u8> = Vec::new();
    let mut pos = 0;
    while pos < data_end {
        let trunc = || bad("truncated block entry");
        let shared = get_varint(block, &mut pos).ok_or_else(trunc)? as usize;
        let unshared = get_varint(block, &mut pos).ok_or_else(trunc)? as usize;
        let vlen = get_varint(block, &mut pos).ok_or_else(trunc)? as usize;
        if shared > key.len() {
            return Err(bad("entry shares more of the key than the previous key has"));
        }
        let kend = pos.checked_add(unshared).filter(|&e| e <= data_end).ok_or_else(trunc)?;
        let vend = kend.checked_add(vlen).filter(|&e| e <= data_end).ok_or_else(trunc)?;
        key.truncate(shared);
        key.extend_from_slice(&block[pos..kend]);
        out.push((key.clone(), block[kend..vend].to_vec()));
        pos = vend;
    }
    Ok(out)
}

/// Every key/value pair of a table, in key order.
pub fn read_table(file: &[u8]) -> Result<Vec<Entry>, TableError> {
    if file.len() < FOOTER_LEN {
        return Err(bad(format!("{} bytes is shorter than a table footer", file.len())));
    }
    let footer = &file[file.len() - FOOTER_LEN..];
    let magic = u64::from_le_bytes(footer[40..].try_into().expect("8 bytes"));
    if magic != MAGIC {
        return Err(bad(format!("bad magic number {magic:#018x}")));
    }
    let mut pos = 0;
    let _metaindex = get_handle(footer, &mut pos).ok_or_else(|| bad("bad footer"))?;
    let index = get_handle(footer, &mut pos).ok_or_else(|| bad("bad footer"))?;
    let mut out = Vec::new();
    for (_, handle) in entries(block(file, index)?)? {
        let mut p = 0;
        let h = get_handle(&handle, &mut p).ok_or_else(|| bad("bad block handle in the index"))?;
        out.extend(entries(block(file, h)?)?);
    }
    if out.windows(2).any(|w| w[0].0 >= w[1].0) {
        return Err(bad("keys out of order"));
    }
    Ok(out)
}

/// Builds a table from `entries`, which must be sorted by key with no duplicates.
pub fn write_table(entries: &[Entry]) -> Vec<u8> {
    assert!(entries.windows(2).all(|w| w[0].0 < w[1].0), "table keys must be sorted and unique");
    let mut file = Vec::new();
    // Appends a block (entries + restarts) and its trailer; returns its handle.
    fn finish(file: &mut Vec<u8>, body: &mut Vec<u8>, restarts: &mut Vec<u32>) -> Handle {
        if restarts.is_empty() {
            restarts.push(0);
        }
        for r in restarts.iter() {
            body.extend_from_slice(&r.to_le_bytes());
        }
        body.extend_from_slice(&(restarts.len() as u32).to_le_bytes());
        let h = Handle { offset: file.len() as u64, size: body.len() as u64 };
        file.extend_from_slice(body);
        let crc = crc32c::extend(crc32c::value(body), &[0]);
        file.push(0);
        file.extend_from_slice(&crc32c::mask(crc).to_le_bytes());
        body.clear();
        restarts.clear();
        h
    }
    fn add(body: &mut Vec<u8>, restarts: &mut Vec<u32>, key: &[u8], value: &[u8]) {
        restarts.push(body.len() as u32);
        put_varint(body, 0);
        put_varint(body, key.len() as u64);
        put_varint(body, value.len() as u64);
        body.extend_from_slice(key);
        body.extend_from_slice(value);
    }
    let (mut body, mut restarts) = (Vec::new(), Vec::new());
    let mut index: Vec<(Vec<u8>, Handle)> = Vec::new();
    for (i, (k, v)) in entries.iter().enumerate() {
        add(&mut body, &mut restarts, k, v);
        if body.len() >= BLOCK_TARGET || i + 1 == entries.len() {
            let h = finish(&mut file, &mut body, &mut restarts);
            index.push((k.clone(), h));
        }
    }
    let metaindex = finish(&mut file, &mut body, &mut restarts);
    for (k, h) in &index {
        let mut v = Vec::new();
        put_varint(&mut v, h.offset);
        put_varint(&mut v, h.size);
        add(&mut body, &mut restarts, k, &v);
    }
    let index_handle = finish(&mut file, &mut body, &mut restarts);
    let mut footer = Vec::new();
    for h in [metaindex, index_handle] {
        put_varint(&mut footer, h.offset);
        put_varint(&mut footer, h.size);
    }
    footer.resize(40, 0);
    footer.extend_from_slice(&MAGIC.to_le_bytes());
    file.extend_from_slice(&footer);
    file
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(n: usize) -> Vec<Entry> {
        (0..n).map(|i| (format!("key{i:05}").into_bytes(), vec![i as u8; i % 300])).collect()
    }

    #[test]
    fn round_trip_small_and_multi_block() {
        for n in [0, 1, 3, 200] {
            let entries = kv(n);
            let file = write_table(&entries);
            assert_eq!(read_table(&file).unwrap(), entries, "{n} entries");
        }
    }

    #[test]
    fn reads_prefix_compressed_blocks() {
        // A hand-made block sharing key prefixes, restart only at 0, as LevelDB writes it.
        let mut body = Vec::new();
        for (shared, rest, v) in [(0, &b"abc"[..], &b"1"[..]), (2, b"d", b"22"), (3, b"x", b"")] {
            put_varint(&mut body, shared);
            put_varint(&mut body, rest.len() as u64);
            put_varint(&mut body, v.len() as u64);
            body.extend_from_slice(rest);
            body.extend_from_slice(v);
        }
        body.extend_from_slice(&0u32.to_le_bytes());
        body.extend_from_slice(&1u32.to_le_bytes());
        let got = entries(&body).unwrap();
        let keys: Vec<&[u8]> = got.iter().map(|(k, _)| k.as_slice()).collect();
        assert_eq!(keys, [&b"abc"[..], b"abd", b"abdx"]);
        assert_eq!(got[1].1, b"22");
    }

    #[test]
    fn detects_corruption() {
        let file = write_table(&kv(3));
        let mut flipped = file.clone();
        flipped[10] ^= 1;
        assert!(matches!(read_table(&flipped), Err(TableError::Checksum { offset: 0, .. })));
        let mut magic = file.clone();
        let n = magic.len();
        magic[n - 1] ^= 1;
        assert!(read_table(&magic).unwrap_err().to_string().contains("magic"));
        assert!(read_table(&file[..20]).is_err());
        assert!(read_table(&file[..file.len() - 60]).is_err());
    }

    #[test]
    fn block_handles_near_the_top_of_the_address_range_are_refused() {
        // Found by fuzzing a checkpoint index: offset + size + trailer wrapped past 2^64.
        let file = write_table(&kv(3));
        for (offset, size) in [(1u64, u64::MAX - 2), (u64::MAX - 3, 1), (0, u64::MAX)] {
            let e = block(&file, Handle { offset, size }).unwrap_err();
            assert!(e.to_string().contains("out of range") || e.to_string().contains("runs past the end"), "{e}");
        }
    }
}
