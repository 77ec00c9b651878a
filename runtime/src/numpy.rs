//! numpy's files as feeds (docs/contract.md §3): `.npy` (one array: magic,
//! version, a Python-literal header with `descr`, `fortran_order` and
//! `shape`, then the elements in C order) and `.npz` (a zip archive of
//! `NAME.npy` members, stored by `np.savez` or deflated by
//! `np.savez_compressed`; zip64 size fields are understood and each
//! member's CRC-32 is checked).
//!
//! Little-endian (and byte-sized) numeric and bool dtypes are read, and
//! numpy's fixed-width string arrays (`S<n>` bytes, `U<n>` UTF-32) as string
//! tensors; Fortran-ordered arrays (`np.save` of a transposed view) are
//! rearranged into row-major order; big-endian and object arrays are refused
//! with an error naming the member.

use autoclust_graph::{DType, Tensor};

use crate::tensor_io::TensorIoError;

fn bad(m: impl Into<String>) -> TensorIoError {
    TensorIoError::Numpy(m.into())
}

fn dtype_of(descr: &str) -> Result<DType, TensorIoError> {
    let (order, kind) = descr.split_at(1.min(descr.len()));
    if order == ">" && !kind.ends_with('1') {
        return Err(bad(format!("big-endian dtype '{descr}' is not supported")));
    }
    Ok(match kind {
        "f4" => DType::Float32,
        "f8" => DType::Float64,
        "f2" => DType::Float16,
        "i1" => DType::Int8,
        "i2" => DType::Int16,
        "i4" => DType::Int32,
        "i8" => DType::Int64,
        "u1" => DType::UInt8,
        "u2" => DType::UInt16,
        "u4" => DType::UInt32,
        "u8" => DType::UInt64,
        "b1" => DType::Bool,
        _ => return Err(bad(format!("dtype '{descr}' is not supported"))),
    })
}

/// The value of `'key':` in a numpy header dict, up to the next top-level comma.
fn header_field<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let at = header.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = header[at..].trim_start().strip_prefix(':')?.trim_start();
    let mut depth = 0;
    for (i, c) in rest.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' | '}' if depth == 0 => return Some(rest[..i].trim()),
            _ => {}
        }
    }
    None
}

/// Reads one `.npy` array.
pub fn read_npy(bytes: &[u8]) -> Result<Tensor, TensorIoError> {
    let magic = b"\x93NUMPY";
    if bytes.len() < 10 || &bytes[..6] != magic {
        return Err(bad("no .npy magic"));
    }
    let (header_len, start) = match bytes[6] {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 | 3 if bytes.len() >= 12 => (u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize, 12),
        v => return Err(bad(format!("unknown .npy version {v}"))),
    };
    let header = bytes.get(start..start + header_len).ok_or_else(|| bad("truncated header"))?;
    let header = std::str::from_utf8(header).map_err(|_| bad("header is not text"))?;
    let descr = header_field(header, "descr").ok_or_else(|| bad("header has no 'descr'"))?;
    let descr = descr.trim_matches(|c| c == '\'' || c == '"');
    let fortran = match header_field(header, "fortran_order") {
        Some("False") => false,
        Some("True") => true,
        _ => return Err(bad("header has no 'fortran_order' of True or False")),
    };
    let shape_text = header_field(header, "shape").ok_or_else(|| bad("header has no 'shape'"))?;
    let shape = shape_text
        .trim_start_matches('(')
        .trim_end_matches(')')
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_end_matches('L').parse::<usize>().map_err(|_| bad(format!("bad shape {shape_text}"))))
        .collect::<Result<Vec<usize>, _>>()?;
    let data = &bytes[start + header_len..];
    // A Fortran-ordered array (what `np.save` writes for a transposed view) in row-major order.
    let reordered;
    let data = if fortran && shape.len() > 1 {
        let width = element_width(descr)?;
        let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(|| bad("shape too large"))?;
        if n.checked_mul(width) != Some(data.len()) {
            return Err(bad(format!("{} data bytes for shape {shape:?} of {descr}", data.len())));
        }
        reordered = fortran_to_row_major(data, &shape, width);
        &reordered[..]
    } else {
        data
    };
    if let Some(t) = string_array(descr, &shape, data)? {
        return Ok(t);
    }
    let dtype = dtype_of(descr)?;
    let width = dtype.size_of().expect("numeric dtype");
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(|| bad("shape too large"))?;
    if data.len() != n * width {
        return Err(bad(format!("{} data bytes for shape {shape:?} of {descr}", data.len())));
    }
    autoclust_graph_tensor(dtype, shape, data)
}

/// The bytes of one element of numpy dtype `descr` (numbers and `S<n>`/`U<n>` strings).
fn element_width(descr: &str) -> Result<usize, TensorIoError> {
    let kind = &descr[1.min(descr.len())..];
    if let Some(n) = kind.strip_prefix('S') {
        return n.parse().map_err(|_| bad(format!("dtype '{descr}' is not supported")));
    }
    if let Some(n) = kind.strip_prefix('U') {
        let n: usize = n.parse().map_err(|_| bad(format!("dtype '{descr}' is not supported")))?;
        return n.checked_mul(4).ok_or_else(|| bad("string width too large"));
    }
    Ok(dtype_of(descr)?.size_of().expect("numeric dtype"))
}

/// `data`, the elements (`width` bytes each) of an array of `shape` in column-major
/// (Fortran) order, rearranged into row-major order.
fn fortran_to_row_major(data: &[u8], shape: &[usize], width: usize) -> Vec<u8> {
    let mut strides = Vec::with_capacity(shape.len());
    let mut s = 1usize;
    for &d in shape {
        strides.push(s);
        s *= d;
    }
    let mut out = Vec::with_capacity(data.len());
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..s {
        let at: usize = idx.iter().zip(&strides).map(|(i, s)| i * s).sum();
        out.extend_from_slice(&data[at * width..(at + 1) * width]);
        autoclust_numeric::layout::next_index(&mut idx, shape);
    }
    out
}

/// A numpy string array as a string tensor (`None` for other dtypes): `S<n>` (bytes, `n` per
/// element, NUL-padded) and `U<n>` (`n` UTF-32 code points per element, little-endian),
/// trailing NULs dropped as numpy drops them. This is how a feed too large for `--feed`'s
/// JSON on the command line travels (`np.save("s.npy", np.array(["a", "bc"]))`).
fn string_array(descr: &str, shape: &[usize], data: &[u8]) -> Result<Option<Tensor>, TensorIoError> {
    let (order, kind) = descr.split_at(1.min(descr.len()));
    let (unicode, n) = match (kind.strip_prefix('S'), kind.strip_prefix('U')) {
        (Some(n), _) => (false, n),
        (_, Some(n)) => (true, n),
        _ => return Ok(None),
    };
    let n: usize = n.parse().map_err(|_| bad(format!("dtype '{descr}' is not supported")))?;
    if unicode && order == ">" {
        return Err(bad(format!("big-endian dtype '{descr}' is not supported")));
    }
    let width = if unicode { n.checked_mul(4).ok_or_else(|| bad("string width too large"))? } else { n };
    let count = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(|| bad("shape too large"))?;
    if count.checked_mul(width) != Some(data.len()) {
        return Err(bad(format!("{} data bytes for shape {shape:?} of {descr}", data.len())));
    }
    let element = |c: &[u8]| -> Result<Vec<u8>, TensorIoError> {
        if !unicode {
            let end = c.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
            return Ok(c[..end].to_vec());
        }
        let points: Vec<u32> = c.chunks_exact(4).map(|p| u32::from_le_bytes(p.try_into().expect("4 bytes"))).collect();
        let end = points.iter().rposition(|&p| p != 0).map_or(0, |i| i + 1);
        let text: String = points[..end]
            .iter()
            .map(|&p| char::from_u32(p).ok_or_else(|| bad(format!("invalid code point {p:#x} in a '{descr}' array"))))
            .collect::<Result<_, _>>()?;
        Ok(text.into_bytes())
    };
    let values = if width == 0 {
        vec![Vec::new(); count]
    } else {
        data.chunks_exact(width).map(element).collect::<Result<Vec<_>, _>>()?
    };
    Tensor::from_strings(shape.to_vec(), values).map(Some).map_err(|e| bad(e.to_string()))
}

fn autoclust_graph_tensor(dtype: DType, shape: Vec<usize>, b: &[u8]) -> Result<Tensor, TensorIoError> {
    fn arr<const N: usize>(c: &[u8]) -> [u8; N] {
        c.try_into().expect("chunk width")
    }
    let t = match dtype {
        DType::Float32 => Tensor::from_f32(shape, b.chunks_exact(4).map(|c| f32::from_le_bytes(arr(c))).collect()),
        DType::Float64 => Tensor::from_f64(shape, b.chunks_exact(8).map(|c| f64::from_le_bytes(arr(c))).collect()),
        DType::Int32 => Tensor::from_i32(shape, b.chunks_exact(4).map(|c| i32::from_le_bytes(arr(c))).collect()),
        DType::Int64 => Tensor::from_i64(shape, b.chunks_exact(8).map(|c| i64::from_le_bytes(arr(c))).collect()),
        DType::Bool => Tensor::from_bool(shape, b.iter().map(|&x| x != 0).collect()),
        d => Tensor::from_raw(d, shape, b.to_vec()),
    };
    t.map_err(|e| bad(e.to_string()))
}

/// CRC-32 (IEEE), the zip member checksum.
fn crc32(bytes: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 { (c >> 1) ^ 0xedb8_8320 } else { c >> 1 };
        }
    }
    !c
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Reads every array of an `.npz`, keyed by member name without `.npy`, sorted by name.
pub fn read_npz(bytes: &[u8]) -> Result<Vec<(String, Tensor)>, TensorIoError> {
    let trunc = || bad("truncated zip archive");
    // End of central directory: the last "PK\5\6" record.
    let eocd = (0..bytes.len().saturating_sub(21))
        .rev()
        .find(|&i| bytes[i..i + 4] == [0x50, 0x4b, 0x05, 0x06])
        .ok_or_else(|| bad("not a zip archive (no end-of-central-directory record)"))?;
    let count = usize::from(u16_at(bytes, eocd + 10).ok_or_else(trunc)?);
    let mut pos = u32_at(bytes, eocd + 16).ok_or_else(trunc)? as usize;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        if u32_at(bytes, pos) != Some(0x0201_4b50) {
            return Err(bad("bad central directory entry"));
        }
        let method = u16_at(bytes, pos + 10).ok_or_else(trunc)?;
        let crc = u32_at(bytes, pos + 16).ok_or_else(trunc)?;
        let mut csize = u64::from(u32_at(bytes, pos + 20).ok_or_else(trunc)?);
        let mut usize_ = u64::from(u32_at(bytes, pos + 24).ok_or_else(trunc)?);
        let name_len = usize::from(u16_at(bytes, pos + 28).ok_or_else(trunc)?);
        let extra_len = usize::from(u16_at(bytes, pos + 30).ok_or_else(trunc)?);
        let comment_len = usize::from(u16_at(bytes, pos + 32).ok_or_else(trunc)?);
        let mut local = u64::from(u32_at(bytes, pos + 42).ok_or_else(trunc)?);
        let name = bytes.get(pos + 46..pos + 46 + name_len).ok_or_else(trunc)?;
        let name = String::from_utf8_lossy(name).into_owned();
        // Zip64: the fields that read 0xffffffff follow in order in extra block 0x0001.
        let extra = bytes.get(pos + 46 + name_len..pos + 46 + name_len + extra_len).ok_or_else(trunc)?;
        let mut e = 0;
        while e + 4 <= extra.len() {
            let (id, len) = (u16_at(extra, e).unwrap_or(0), usize::from(u16_at(extra, e + 2).unwrap_or(0)));
            if id == 1 {
                let mut f = e + 4;
                for field in [&mut usize_, &mut csize, &mut local] {
                    if *field == 0xffff_ffff {
                        *field = u64_at(extra, f).ok_or_else(trunc)?;
                        f += 8;
                    }
                }
            }
            e += 4 + len;
        }
        pos += 46 + name_len + extra_len + comment_len;
        let local = usize::try_from(local).map_err(|_| trunc())?;
        if u32_at(bytes, local) != Some(0x0403_4b50) {
            return Err(bad(format!("member '{name}': bad local header")));
        }
        let lname = usize::from(u16_at(bytes, local + 26).ok_or_else(trunc)?);
        let lextra = usize::from(u16_at(bytes, local + 28).ok_or_else(trunc)?);
        let start = local + 30 + lname + lextra;
        let raw = usize::try_from(csize)
            .ok()
            .and_then(|c| bytes.get(start..start.checked_add(c)?))
            .ok_or_else(|| bad(format!("member '{name}': data runs past the end of the archive")))?;
        let data = match method {
            0 => raw.to_vec(),
            8 => miniz_oxide::inflate::decompress_to_vec_with_limit(raw, usize::try_from(usize_).unwrap_or(usize::MAX))
                .map_err(|e| bad(format!("member '{name}': bad deflate data: {e:?}")))?,
            m => return Err(bad(format!("member '{name}': compression method {m} is not supported"))),
        };
        if data.len() as u64 != usize_ || crc32(&data) != crc {
            return Err(bad(format!("member '{name}': CRC-32 or size mismatch")));
        }
        let t = read_npy(&data).map_err(|e| match e {
            // The member's own reason, under the archive's one prefix.
            TensorIoError::Numpy(m) => bad(format!("member '{name}': {m}")),
            e => bad(format!("member '{name}': {e}")),
        })?;
        out.push((name.strip_suffix(".npy").unwrap_or(&name).to_string(), t));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/savedmodel").join(name))
            .unwrap()
    }

    #[test]
    fn reads_npy_and_both_npz_kinds() {
        let x = read_npy(&fixture("dense2.x.npy")).unwrap();
        assert_eq!((x.dtype, x.shape.clone()), (DType::Float32, vec![5, 4]));
        let z = read_npz(&fixture("dense2.feeds.npz")).unwrap();
        assert_eq!(z.len(), 1);
        assert_eq!(z[0].0, "x");
        assert!(z[0].1.bit_eq(&x), "np.savez stores the same array");
        // np.savez_compressed deflates.
        let c = read_npz(&fixture("cnn.feeds.npz")).unwrap();
        assert_eq!(c[0].1.shape, vec![2, 8, 8, 1]);
        let t = read_npz(&fixture("train.feeds.npz")).unwrap();
        assert_eq!(t.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["x", "y"]);
    }

    #[test]
    fn hand_made_headers_and_errors() {
        let npy = |header: &str, data: &[u8]| {
            let mut b = b"\x93NUMPY\x01\x00".to_vec();
            b.extend_from_slice(&(header.len() as u16).to_le_bytes());
            b.extend_from_slice(header.as_bytes());
            b.extend_from_slice(data);
            b
        };
        let t = read_npy(&npy(
            "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }",
            &[1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0],
        ))
        .unwrap();
        assert_eq!(t.as_i64().unwrap(), &[1, 2]);
        let s = read_npy(&npy("{'descr': '|b1', 'fortran_order': False, 'shape': (), }", &[1])).unwrap();
        assert_eq!((s.as_bool().unwrap(), s.shape.len()), (&[true][..], 0));
        let e = |h: &str, d: &[u8]| read_npy(&npy(h, d)).unwrap_err().to_string();
        // np.save of np.arange(6, dtype=np.int32).reshape(2, 3).T: shape (3, 2), column-major.
        let f = read_npy(&npy(
            "{'descr': '<i4', 'fortran_order': True, 'shape': (3, 2), }",
            &[0, 1, 2, 3, 4, 5].iter().flat_map(|v: &i32| v.to_le_bytes()).collect::<Vec<u8>>(),
        ))
        .unwrap();
        assert_eq!((f.shape.clone(), f.as_i32().unwrap()), (vec![3, 2], &[0, 3, 1, 4, 2, 5][..]));
        // Column-major strings of shape (2, 2) ('|S1').
        let fs = read_npy(&npy("{'descr': '|S1', 'fortran_order': True, 'shape': (2, 2), }", b"acbd")).unwrap();
        let want = [b"a", b"b", b"c", b"d"].iter().map(|s| s.to_vec()).collect();
        assert_eq!(fs, Tensor::from_strings(vec![2, 2], want).unwrap());
        let f1 = read_npy(&npy("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", &[0; 4])).unwrap();
        assert_eq!(f1.shape, vec![1]);
        assert!(e("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", &[0; 4]).contains("4 data bytes"));
        assert!(e("{'descr': '<f4', 'fortran_order': 1, 'shape': (1,), }", &[0; 4]).contains("fortran_order"));
        assert!(e("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", &[0; 4]).contains("big-endian"));
        assert!(e("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", &[0; 8]).contains("not supported"));
        assert!(e("{'descr': '<U3', 'fortran_order': False, 'shape': (2,), }", &[0; 12]).contains("12 data bytes"));
        // np.array(["ab", "été", ""]) is '<U3'; np.array([b"x", b"yz"]) is '|S2'.
        let utf32: Vec<u8> =
            ["ab\0", "été", "\0\0\0"].iter().flat_map(|w| w.chars().flat_map(|c| (c as u32).to_le_bytes())).collect();
        let u = read_npy(&npy("{'descr': '<U3', 'fortran_order': False, 'shape': (3,), }", &utf32)).unwrap();
        assert_eq!(u, Tensor::from_strings(vec![3], vec![b"ab".to_vec(), "été".as_bytes().to_vec(), vec![]]).unwrap());
        let b = read_npy(&npy("{'descr': '|S2', 'fortran_order': False, 'shape': (2, 1), }", b"x\0yz")).unwrap();
        assert_eq!(b, Tensor::from_strings(vec![2, 1], vec![b"x".to_vec(), b"yz".to_vec()]).unwrap());
        assert!(e("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", &[0; 4]).contains("4 data bytes"));
        assert!(read_npy(b"PK\x03\x04").is_err());
        let mut z = fixture("dense2.feeds.npz");
        let n = z.len();
        assert!(read_npz(&z[..n - 30]).is_err());
        // A flipped data byte in a stored member fails its CRC-32.
        let at = z.windows(6).position(|w| w == b"\x93NUMPY").unwrap() + 140;
        z[at] ^= 1;
        assert!(read_npz(&z).unwrap_err().to_string().contains("CRC-32"));
    }
}
