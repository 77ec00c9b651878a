//! Unicode code points of strings (`tf.strings.unicode_decode`, `unicode_split`,
//! `unicode_encode`, `unicode_transcode`): `UnicodeDecode`, `UnicodeDecodeWithOffsets`,
//! `UnicodeEncode` and `UnicodeTranscode` (a decode then an encode of each string), in UTF-8,
//! UTF-16 and UTF-32 (big- or little-endian).
//!
//! Decoding flattens the input: row `i` of the result (between `row_splits[i]` and
//! `row_splits[i + 1]`) holds the code points of string `i`, and `char_to_byte_starts` the
//! byte where each begins. A malformed sequence is handled as TensorFlow's ICU converter does:
//! each maximal ill-formed subpart (the Unicode "substitution of maximal subparts", which
//! UTF-8 decoding in Rust's standard library follows too) is one `replacement_char`
//! (`errors = "replace"`), nothing (`"ignore"`) or an error (`"strict"`). With
//! `replace_control_characters`, a C0 control character (below U+0020) counts as malformed.
//! Encoding writes each row's code points as one string; a negative one, a surrogate or one
//! past U+10FFFF is malformed.

use autoclust_graph::{DType, Node, Tensor};

use super::ragged_ops::splits_tensor;
use super::string::{attr_bytes_or, strings};
use super::{arity, Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

/// What a malformed sequence becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Errors {
    Replace(u32),
    Ignore,
    Strict,
}

/// A supported encoding: UTF-8, or UTF-16/32 of either byte order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Encoding {
    Utf8,
    Utf16 { big: bool },
    Utf32 { big: bool },
}

impl Encoding {
    fn parse(name: &[u8]) -> KResult<Encoding> {
        let name = String::from_utf8_lossy(name).to_ascii_uppercase().replace('_', "-");
        Ok(match name.as_str() {
            "UTF-8" | "UTF8" => Encoding::Utf8,
            "UTF-16-BE" | "UTF-16BE" | "UTF-16" => Encoding::Utf16 { big: true },
            "UTF-16-LE" | "UTF-16LE" => Encoding::Utf16 { big: false },
            "UTF-32-BE" | "UTF-32BE" | "UTF-32" => Encoding::Utf32 { big: true },
            "UTF-32-LE" | "UTF-32LE" => Encoding::Utf32 { big: false },
            _ => return Err(KernelError::invalid(format!("Could not create converter for input encoding: {name}"))),
        })
    }
}

/// The kernels of this module, `None` for any other op.
pub(super) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let f: PureFn = match node.op.as_str() {
        "UnicodeDecode" | "UnicodeDecodeWithOffsets" => {
            let offsets = node.op == "UnicodeDecodeWithOffsets";
            let encoding = Encoding::parse(&attr_bytes_or(node, "input_encoding", b"")?)?;
            let errors = errors(node)?;
            let control = bool_attr(node, "replace_control_characters")?;
            let splits = splits_type(node)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let strings = strings(&inp[0], "input")?;
                let (mut row_splits, mut chars, mut starts) = (vec![0i64], Vec::new(), Vec::new());
                for s in strings {
                    decode(s, encoding, errors, control, &mut chars, &mut starts)?;
                    row_splits.push(chars.len() as i64);
                }
                let mut out = Outputs::new();
                out.push(splits_tensor(splits, row_splits)?);
                let n = chars.len();
                out.push(Tensor::from_i32(vec![n], chars).expect("n"));
                if offsets {
                    out.push(Tensor::from_i64(vec![n], starts).expect("n"));
                }
                Ok(out)
            })
        }
        "UnicodeEncode" => {
            let encoding = Encoding::parse(&attr_bytes_or(node, "output_encoding", b"")?)?;
            let errors = errors(node)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                let values = inp[0]
                    .as_i32()
                    .ok_or_else(|| KernelError::invalid(format!("input_values must be int32, got {}", inp[0].dtype)))?;
                let splits: Vec<i64> = match (inp[1].as_i64(), inp[1].as_i32()) {
                    (Some(v), _) => v.to_vec(),
                    (_, Some(v)) => v.iter().map(|&x| i64::from(x)).collect(),
                    _ => return Err(KernelError::invalid("input_splits must be int32 or int64")),
                };
                let valid = splits.first() == Some(&0)
                    && splits.windows(2).all(|w| w[0] <= w[1])
                    && splits.last().is_some_and(|&l| l as usize == values.len());
                if !valid {
                    return Err(KernelError::invalid(
                        "input_splits must start at 0, not decrease, and end at the number of values",
                    ));
                }
                let rows = splits
                    .windows(2)
                    .map(|w| encode(&values[w[0] as usize..w[1] as usize], encoding, errors))
                    .collect::<KResult<Vec<Vec<u8>>>>()?;
                let n = rows.len();
                super::one(Tensor::from_strings(vec![n], rows).expect("n"))
            })
        }
        "UnicodeTranscode" => {
            let from = Encoding::parse(&attr_bytes_or(node, "input_encoding", b"")?)?;
            let to = Encoding::parse(&attr_bytes_or(node, "output_encoding", b"")?)?;
            let errors = errors(node)?;
            let control = bool_attr(node, "replace_control_characters")?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let (mut chars, mut starts) = (Vec::new(), Vec::new());
                let out = strings(&inp[0], "input")?
                    .iter()
                    .map(|s| {
                        chars.clear();
                        decode(s, from, errors, control, &mut chars, &mut starts)?;
                        encode(&chars, to, errors)
                    })
                    .collect::<KResult<Vec<Vec<u8>>>>()?;
                super::one(Tensor::from_strings(inp[0].shape.clone(), out).expect("one string per input"))
            })
        }
        _ => return Ok(None),
    };
    Ok(Some(f))
}

/// Decodes `s`, appending its code points and their byte starts.
fn decode(
    s: &[u8],
    encoding: Encoding,
    errors: Errors,
    control: bool,
    chars: &mut Vec<i32>,
    starts: &mut Vec<i64>,
) -> KResult<()> {
    // Each decoded unit: Ok(code point) or Err(()) for a malformed subpart, with its start.
    let mut push = |unit: Result<u32, ()>, at: usize| -> KResult<()> {
        let unit = match unit {
            Ok(c) if control && c < 0x20 => Err(()),
            u => u,
        };
        match (unit, errors) {
            (Ok(c), _) => chars.push(c as i32),
            (Err(()), Errors::Replace(r)) => chars.push(r as i32),
            (Err(()), Errors::Ignore) => return Ok(()),
            (Err(()), Errors::Strict) => return Err(KernelError::invalid("Invalid formatting on input string")),
        }
        starts.push(at as i64);
        Ok(())
    };
    match encoding {
        Encoding::Utf8 => {
            let mut at = 0;
            for chunk in s.utf8_chunks() {
                for (i, c) in chunk.valid().char_indices() {
                    push(Ok(c as u32), at + i)?;
                }
                at += chunk.valid().len();
                if !chunk.invalid().is_empty() {
                    push(Err(()), at)?;
                    at += chunk.invalid().len();
                }
            }
        }
        Encoding::Utf16 { big } => {
            let unit = |i: usize| -> u16 {
                let b = [s[i], s[i + 1]];
                if big {
                    u16::from_be_bytes(b)
                } else {
                    u16::from_le_bytes(b)
                }
            };
            let mut i = 0;
            while i + 1 < s.len() {
                let u = unit(i);
                match u {
                    0xD800..=0xDBFF if i + 3 < s.len() && (0xDC00..=0xDFFF).contains(&unit(i + 2)) => {
                        let c = 0x10000 + ((u32::from(u) - 0xD800) << 10) + (u32::from(unit(i + 2)) - 0xDC00);
                        push(Ok(c), i)?;
                        i += 4;
                        continue;
                    }
                    0xD800..=0xDFFF => push(Err(()), i)?,
                    _ => push(Ok(u32::from(u)), i)?,
                }
                i += 2;
            }
            if i < s.len() {
                push(Err(()), i)?;
            }
        }
        Encoding::Utf32 { big } => {
            for (k, w) in s.chunks(4).enumerate() {
                let unit = match <[u8; 4]>::try_from(w) {
                    Ok(b) => {
                        let c = if big { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) };
                        char::from_u32(c).map(|_| c).ok_or(())
                    }
                    Err(_) => Err(()),
                };
                push(unit, 4 * k)?;
            }
        }
    }
    Ok(())
}

/// One row's code points in `encoding`.
fn encode(values: &[i32], encoding: Encoding, errors: Errors) -> KResult<Vec<u8>> {
    let mut out = Vec::new();
    for &v in values {
        let c = match u32::try_from(v).ok().and_then(char::from_u32) {
            Some(c) => c,
            None => match errors {
                Errors::Replace(r) => char::from_u32(r).unwrap_or('\u{FFFD}'),
                Errors::Ignore => continue,
                Errors::Strict => {
                    return Err(KernelError::invalid("Code point is out of range for Unicode, or is a surrogate."))
                }
            },
        };
        match encoding {
            Encoding::Utf8 => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
            Encoding::Utf16 { big } => {
                for u in c.encode_utf16(&mut [0; 2]) {
                    out.extend_from_slice(&if big { u.to_be_bytes() } else { u.to_le_bytes() });
                }
            }
            Encoding::Utf32 { big } => {
                out.extend_from_slice(&if big { (c as u32).to_be_bytes() } else { (c as u32).to_le_bytes() })
            }
        }
    }
    Ok(out)
}

fn errors(node: &Node) -> KResult<Errors> {
    let replacement = match node.attr("replacement_char") {
        None => 0xFFFD,
        Some(v) => v.as_int().ok_or_else(|| KernelError::Attr("replacement_char".into()))?,
    };
    Ok(match attr_bytes_or(node, "errors", b"replace")?.as_slice() {
        b"replace" => {
            let r = u32::try_from(replacement)
                .ok()
                .filter(|&r| char::from_u32(r).is_some())
                .ok_or_else(|| KernelError::invalid(format!("replacement_char {replacement} is not a code point")))?;
            Errors::Replace(r)
        }
        b"ignore" => Errors::Ignore,
        b"strict" => Errors::Strict,
        other => {
            return Err(KernelError::invalid(format!(
                "errors must be strict, replace or ignore, got {}",
                String::from_utf8_lossy(other)
            )))
        }
    })
}

fn splits_type(node: &Node) -> KResult<DType> {
    match node.attr("Tsplits") {
        None => Ok(DType::Int64),
        Some(v) => match v.as_type() {
            Some(t @ (DType::Int32 | DType::Int64)) => Ok(t),
            _ => Err(KernelError::Attr("Tsplits".into())),
        },
    }
}

fn bool_attr(node: &Node, name: &str) -> KResult<bool> {
    match node.attr(name) {
        None => Ok(false),
        Some(v) => v.as_bool().ok_or_else(|| KernelError::Attr(name.into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(s: &[&[u8]], errors: Errors, control: bool) -> (Vec<i32>, Vec<i64>) {
        let (mut c, mut o) = (Vec::new(), Vec::new());
        for x in s {
            decode(x, Encoding::Utf8, errors, control, &mut c, &mut o).unwrap();
        }
        (c, o)
    }

    /// `tf.strings.unicode_transcode` as TensorFlow 2.21 gives it: UTF-8 with a malformed byte
    /// and a control character to UTF-16-BE (replaced), to UTF-8 ignoring both, with `?` as
    /// the replacement, UTF-16-BE back to UTF-8, and the strict error.
    #[test]
    fn transcoding_matches_tensorflow() {
        use autoclust_graph::AttrValue;
        let input: [&[u8]; 4] = [b"h\xc3\xa9llo", b"a\xffb", b"\x01z", b""];
        let t = |v: &[&[u8]]| Tensor::from_strings(vec![v.len()], v.iter().map(|x| x.to_vec()).collect()).unwrap();
        let run = |v: &[&[u8]], attrs: &[(&str, AttrValue)]| {
            let n = Node::unconnected("t", "UnicodeTranscode", attrs);
            let f = prepare(&n).unwrap().unwrap();
            f([t(v)].into_iter().collect()).map(|o| match &o[0].data {
                autoclust_graph::TensorData::Str(s) => s.to_vec(),
                _ => panic!("not strings"),
            })
        };
        let enc = |from: &str, to: &str| {
            vec![("input_encoding", AttrValue::S(from.into())), ("output_encoding", AttrValue::S(to.into()))]
        };
        let utf16: Vec<Vec<u8>> = run(&input, &enc("UTF-8", "UTF-16-BE")).unwrap();
        assert_eq!(
            utf16,
            [
                b"\x00h\x00\xe9\x00l\x00l\x00o".to_vec(),
                b"\x00a\xff\xfd\x00b".to_vec(),
                b"\x00\x01\x00z".to_vec(),
                vec![]
            ]
        );
        let mut ignore = enc("UTF-8", "UTF-8");
        ignore.push(("errors", AttrValue::S("ignore".into())));
        ignore.push(("replace_control_characters", AttrValue::B(true)));
        assert_eq!(run(&input, &ignore).unwrap(), [b"h\xc3\xa9llo".to_vec(), b"ab".to_vec(), b"z".to_vec(), vec![]]);
        let mut question = enc("UTF-8", "UTF-8");
        question.push(("replacement_char", AttrValue::I(63)));
        question.push(("replace_control_characters", AttrValue::B(true)));
        assert_eq!(
            run(&input, &question).unwrap(),
            [b"h\xc3\xa9llo".to_vec(), b"a?b".to_vec(), b"?z".to_vec(), vec![]]
        );
        assert_eq!(run(&[b"\x00a\x00\xe9"], &enc("UTF-16-BE", "UTF-8")).unwrap(), [b"a\xc3\xa9".to_vec()]);
        let mut strict = enc("UTF-8", "UTF-8");
        strict.push(("errors", AttrValue::S("strict".into())));
        assert_eq!(run(&input, &strict).unwrap_err().to_string(), "Invalid formatting on input string");
    }

    /// TensorFlow 2.21's values (`tf.raw_ops.UnicodeDecodeWithOffsets`) for malformed input:
    /// one replacement per maximal ill-formed subpart, at the subpart's first byte.
    #[test]
    fn malformed_utf8_is_replaced_as_tensorflow_replaces_it() {
        let input: &[&[u8]] =
            &[b"h\xc3\xa9llo", b"\xe2\x82\xac\xff\xfeab\xe2\x82", b"", b"\x01\x7f\xc2\x85z\xf0\x9f\x98\x80"];
        let (c, o) = decode_all(input, Errors::Replace(65533), false);
        assert_eq!(c, [104, 233, 108, 108, 111, 8364, 65533, 65533, 97, 98, 65533, 1, 127, 133, 122, 128512]);
        assert_eq!(o, [0, 1, 3, 4, 5, 0, 3, 4, 5, 6, 7, 0, 1, 2, 4, 5]);
        let (c, o) = decode_all(input, Errors::Ignore, true);
        assert_eq!(c, [104, 233, 108, 108, 111, 8364, 97, 98, 127, 133, 122, 128512]);
        assert_eq!(o, [0, 1, 3, 4, 5, 0, 5, 6, 1, 2, 4, 5]);
        let (c, _) = decode_all(&[b"\xed\xa0\x80x\xc0\xafy\xf4\x90\x80\x80"], Errors::Replace(65533), false);
        assert_eq!(c, [65533, 65533, 65533, 120, 65533, 65533, 121, 65533, 65533, 65533, 65533]);
        let (c, _) = decode_all(&[b"a\tb\nc\x00d\x1f\x20"], Errors::Replace(65533), true);
        assert_eq!(c, [97, 65533, 98, 65533, 99, 65533, 100, 65533, 32]);
        let mut sink = (Vec::new(), Vec::new());
        let e = decode(b"\xff", Encoding::Utf8, Errors::Strict, false, &mut sink.0, &mut sink.1).unwrap_err();
        assert!(e.to_string().contains("Invalid formatting on input string"), "{e}");
    }

    #[test]
    fn utf16_and_encoding_round_trip() {
        let (mut c, mut o) = (Vec::new(), Vec::new());
        let be: Vec<u8> = "éa😀".encode_utf16().flat_map(u16::to_be_bytes).collect();
        decode(&be, Encoding::Utf16 { big: true }, Errors::Replace(65533), false, &mut c, &mut o).unwrap();
        assert_eq!(c, [233, 97, 128512]);
        assert_eq!(o, [0, 2, 4]);
        // TensorFlow: [104, 233, 128512 | 0x110000, -5, 65] with replacement '?' in UTF-8.
        assert_eq!(encode(&[104, 233, 128512], Encoding::Utf8, Errors::Replace(63)).unwrap(), "hé😀".as_bytes());
        assert_eq!(encode(&[0x110000, -5, 65], Encoding::Utf8, Errors::Replace(63)).unwrap(), b"??A");
        assert_eq!(encode(&[0x110000, -5, 65], Encoding::Utf8, Errors::Ignore).unwrap(), b"A");
        assert_eq!(
            encode(&[0xD800, 65, 0x1F600], Encoding::Utf16 { big: true }, Errors::Replace(63)).unwrap(),
            b"\x00?\x00A\xd8=\xde\x00"
        );
        assert!(encode(&[0xD800], Encoding::Utf8, Errors::Strict).is_err());
    }
}
