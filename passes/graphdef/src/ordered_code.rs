//! The keys under which a checkpoint stores the slices of a partitioned
//! tensor (`EncodeTensorNameSlice` of TensorFlow's
//! `core/util/saved_tensor_slice_util.cc`): TensorFlow's order-preserving
//! "ordered code" (`core/lib/strings/ordered_code.cc`) of the number 0, the
//! tensor's name, its rank, and the start and length of each dimension
//! (length −1 for a whole dimension). The leading 0 makes every slice key
//! start with a zero byte, so slice keys sort before every tensor name.
//!
//! Only the three ordered-code items these keys use are here:
//! - an unsigned number: one byte holding the count of the bytes that follow,
//!   then the number big-endian without leading zero bytes (0 is the single byte 0);
//! - a string: its bytes with `00` written `00 FF` and `FF` written `FF 00`,
//!   then the separator `00 01`;
//! - a signed number: one to ten bytes whose leading bits are the sign (1 for
//!   ≥ 0) and as many copies of it as bytes follow, then a differing bit,
//!   then the two's-complement value big-endian (so [−64, 64) takes one byte,
//!   and n bytes hold [−2^(7n−1), 2^(7n−1))).

/// One dimension of a slice: its start and length, `None` for the whole dimension.
pub type Extent = (i64, Option<i64>);

/// Appends the ordered code of an unsigned number.
pub fn write_num_increasing(out: &mut Vec<u8>, v: u64) {
    let bytes = v.to_be_bytes();
    let skip = (v.leading_zeros() / 8) as usize;
    out.push((8 - skip) as u8);
    out.extend_from_slice(&bytes[skip..]);
}

/// Reads an unsigned number, advancing `src`.
pub fn read_num_increasing(src: &mut &[u8]) -> Option<u64> {
    let (&n, rest) = src.split_first()?;
    let n = usize::from(n);
    if n > 8 || rest.len() < n {
        return None;
    }
    let v = rest[..n].iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
    *src = &rest[n..];
    Some(v)
}

/// Appends the ordered code of a string.
pub fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    for &b in s {
        match b {
            0x00 => out.extend_from_slice(&[0x00, 0xff]),
            0xff => out.extend_from_slice(&[0xff, 0x00]),
            b => out.push(b),
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}

/// Reads a string, advancing `src`.
pub fn read_string(src: &mut &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < src.len() {
        match (src[i], src.get(i + 1)) {
            (0x00, Some(0x01)) => {
                *src = &src[i + 2..];
                return Some(out);
            }
            (0x00, Some(0xff)) => out.push(0x00),
            (0xff, Some(0x00)) => out.push(0xff),
            (0x00 | 0xff, _) => return None,
            (b, _) => {
                out.push(b);
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    None
}

/// The header bits of an `len`-byte signed number, in its first two bytes.
fn header(len: usize) -> [u8; 2] {
    match len {
        1..=8 => [(0xff00u16 >> len) as u8, 0],
        9 => [0xff, 0x80],
        _ => [0xff, 0xc0],
    }
}

/// Appends the ordered code of a signed number.
pub fn write_signed_num_increasing(out: &mut Vec<u8>, v: i64) {
    let magnitude = if v < 0 { !v } else { v } as u64;
    let bits = 64 - magnitude.leading_zeros() as usize;
    let len = bits / 7 + 1;
    let sign = if v < 0 { 0xff } else { 0x00 };
    let mut buf = [sign; 10];
    buf[2..].copy_from_slice(&v.to_be_bytes());
    let code = &mut buf[10 - len..];
    let h = header(len);
    code[0] ^= h[0];
    if len >= 2 {
        code[1] ^= h[1];
    }
    out.extend_from_slice(code);
}

/// Reads a signed number, advancing `src`. Only the shortest encoding of a
/// number is accepted (the one [`write_signed_num_increasing`] writes).
pub fn read_signed_num_increasing(src: &mut &[u8]) -> Option<i64> {
    let &first = src.first()?;
    let flip = if first & 0x80 == 0 { 0xff } else { 0x00 };
    let at = |i: usize| src.get(i).map(|b| b ^ flip);
    let len = match at(0)?.leading_ones() as usize {
        8 => match at(1)? {
            b if b < 0x80 => 8,
            b if b < 0xc0 => 9,
            0xc0 if at(2)? < 0x80 => 10,
            _ => return None,
        },
        n => n,
    };
    let code = src.get(..len)?;
    // The header bits cleared, then the value sign-extended.
    let h = header(len);
    let mut bytes = [flip; 10];
    bytes[10 - len..].copy_from_slice(code);
    bytes[10 - len] ^= h[0];
    if len >= 2 {
        bytes[11 - len] ^= h[1];
    }
    let v = i64::from_be_bytes(bytes[2..].try_into().expect("8 bytes"));
    let mut again = Vec::with_capacity(len);
    write_signed_num_increasing(&mut again, v);
    if again != code {
        return None;
    }
    *src = &src[len..];
    Some(v)
}

/// The checkpoint key of the slice `extents` of the tensor `name`.
pub fn encode_slice_key(name: &str, extents: &[Extent]) -> Vec<u8> {
    let mut out = Vec::new();
    write_num_increasing(&mut out, 0);
    write_string(&mut out, name.as_bytes());
    write_num_increasing(&mut out, extents.len() as u64);
    for &(start, length) in extents {
        write_signed_num_increasing(&mut out, start);
        write_signed_num_increasing(&mut out, length.unwrap_or(-1));
    }
    out
}

/// The tensor name and extents a slice key encodes (a negative length: the whole dimension).
pub fn decode_slice_key(key: &[u8]) -> Result<(String, Vec<Extent>), String> {
    let mut src = key;
    if read_num_increasing(&mut src) != Some(0) {
        return Err("a slice key starts with the number 0".into());
    }
    let name = read_string(&mut src).ok_or("bad tensor name")?;
    let name = String::from_utf8(name).map_err(|_| "tensor name is not UTF-8")?;
    let rank = read_num_increasing(&mut src).ok_or("bad rank")?;
    if rank == 0 || rank > 64 {
        return Err(format!("bad rank {rank}"));
    }
    let mut extents = Vec::new();
    for _ in 0..rank {
        let start = read_signed_num_increasing(&mut src).ok_or("bad start")?;
        let length = read_signed_num_increasing(&mut src).ok_or("bad length")?;
        extents.push(if length < 0 { (start, None) } else { (start, Some(length)) });
    }
    if !src.is_empty() {
        return Err(format!("{} bytes after the extents", src.len()));
    }
    Ok((name, extents))
}

/// A slice as TensorFlow writes it (`TensorSlice::DebugString`): `start,length` per
/// dimension, `-` for a whole one, joined by `:`.
pub fn slice_spec(extents: &[Extent]) -> String {
    let dims: Vec<String> = extents
        .iter()
        .map(|&(s, l)| match l {
            Some(l) => format!("{s},{l}"),
            None => "-".into(),
        })
        .collect();
    dims.join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed(v: i64) -> Vec<u8> {
        let mut out = Vec::new();
        write_signed_num_increasing(&mut out, v);
        out
    }

    #[test]
    fn signed_numbers_match_tensorflows_examples() {
        // ordered_code.cc's two worked examples, and the one-byte range's ends.
        assert_eq!(signed(0x424242), [0xf0, 0x42, 0x42, 0x42]);
        assert_eq!(signed(-0x800), [0x38, 0x00]);
        assert_eq!(signed(0), [0x80]);
        assert_eq!(signed(-1), [0x7f]);
        assert_eq!(signed(63), [0xbf]);
        assert_eq!(signed(-64), [0x40]);
        assert_eq!(signed(64), [0xc0, 0x40]);
        assert_eq!(signed(i64::MAX).len(), 10);
        assert_eq!(signed(i64::MIN).len(), 10);
    }

    #[test]
    fn signed_numbers_round_trip_and_keep_their_order() {
        let mut values = vec![0, 1, -1, 63, 64, -64, -65, 8191, 8192, -8193, i64::MAX, i64::MIN, i64::MIN + 1];
        for shift in 0..63 {
            values.extend([1i64 << shift, (1i64 << shift) - 1, -(1i64 << shift), -(1i64 << shift) - 1]);
        }
        values.sort();
        values.dedup();
        let codes: Vec<Vec<u8>> = values.iter().map(|&v| signed(v)).collect();
        for (v, code) in values.iter().zip(&codes) {
            let mut src = &code[..];
            assert_eq!(read_signed_num_increasing(&mut src), Some(*v), "{v}: {code:02x?}");
            assert!(src.is_empty());
        }
        assert!(codes.windows(2).all(|w| w[0] < w[1]), "the codes sort as the numbers");
        // Truncated, and a non-shortest encoding of 0.
        assert_eq!(read_signed_num_increasing(&mut &[0xf0, 0x42][..]), None);
        assert_eq!(read_signed_num_increasing(&mut &[0xc0, 0x00][..]), None);
        assert_eq!(read_signed_num_increasing(&mut &[][..]), None);
    }

    #[test]
    fn unsigned_numbers_and_strings() {
        let mut out = Vec::new();
        write_num_increasing(&mut out, 0);
        write_num_increasing(&mut out, 0x0102);
        write_string(&mut out, b"a\x00b\xffc");
        assert_eq!(out, [0, 2, 1, 2, b'a', 0, 0xff, b'b', 0xff, 0, b'c', 0, 1]);
        let mut src = &out[..];
        assert_eq!(read_num_increasing(&mut src), Some(0));
        assert_eq!(read_num_increasing(&mut src), Some(0x0102));
        assert_eq!(read_string(&mut src).unwrap(), b"a\x00b\xffc");
        assert!(src.is_empty());
        assert_eq!(read_string(&mut &b"abc"[..]), None, "no separator");
        assert_eq!(read_string(&mut &b"a\x00\x02"[..]), None, "bad escape");
        assert_eq!(read_num_increasing(&mut &[9u8, 0, 0, 0, 0, 0, 0, 0, 0, 0][..]), None);
    }

    #[test]
    fn slice_keys_round_trip() {
        let extents = [(20, Some(20)), (0, None), (-3, Some(1 << 40))];
        let key = encode_slice_key("b/.ATTRIBUTES/VARIABLE_VALUE", &extents);
        assert_eq!(key[0], 0, "slice keys sort before every tensor name");
        let (name, back) = decode_slice_key(&key).unwrap();
        assert_eq!(name, "b/.ATTRIBUTES/VARIABLE_VALUE");
        assert_eq!(back, extents);
        assert_eq!(slice_spec(&back), "20,20:-:-3,1099511627776");
        // The exact bytes of a rank-1 slice [20, 40) of "b".
        assert_eq!(encode_slice_key("b", &[(20, Some(20))]), [0, b'b', 0, 1, 1, 1, 0x94, 0x94]);
        assert!(decode_slice_key(b"b").is_err());
        assert!(decode_slice_key(&key[..key.len() - 1]).is_err());
        let mut extra = key.clone();
        extra.push(0x80);
        assert!(decode_slice_key(&extra).unwrap_err().contains("after the extents"));
    }
}
