//! String kernels: what `tf.print` and `tf.strings` put in ordinary graphs.
//!
//! `AsString` (C's printf rules, as TensorFlow builds a `%<fill><width>.<precision>{d,f,e,g}`
//! format from its attributes), `StringToNumber`, `StringFormat` with TensorFlow's tensor
//! summary (`Tensor::SummarizeValue(summarize, print_v2 = true)`: nested brackets, `...` past
//! `summarize` elements at each end of each dimension, floats in the shortest of `%.6g`/`%.9g`
//! (doubles `%.15g`/`%.17g`) that reads back exactly, strings quoted and C-escaped), `PrintV2`
//! (stateful: it writes when it runs, so the order of prints is the order the graph's edges
//! impose), `StringJoin`, `Substr`, `StringLength`, `StringSplitV2`, `StaticRegexReplace` (the
//! `regex` crate standing in for RE2; `\0`..`\9` in the rewrite name groups as in RE2) and
//! `Add` on strings (concatenation, broadcasting), and `ReduceJoin` (`tf.strings.reduce_join`). Every rule and error message was checked
//! against TensorFlow 2.21 (testdata/tf/make_fixtures_strings.py).

use std::io::Write as _;
use std::sync::Arc;

use autoclust_graph::{AttrValue, DType, Node, Tensor, TensorData};

use super::c_number::{parse_f32, parse_f64, parse_i32, parse_i64};
use super::elementwise::{bcast_strides, broadcast_shape, for_each_bcast2};
use super::{arity, attr_bool_or, attr_int_or, attr_type_or, budget, one, Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

/// The string ops' kernels, or `None` if `node.op` is not one.
pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let f: PureFn = match node.op.as_str() {
        "AsString" => {
            let spec = AsStringSpec::from_node(node)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                one(spec.apply(&inp[0])?)
            })
        }
        "StringToNumber" => {
            let out = attr_type_or(node, "out_type", DType::Float32)?;
            if !matches!(out, DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64) {
                return Err(KernelError::DType(out));
            }
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                one(string_to_number(&inp[0], out)?)
            })
        }
        "StringFormat" => {
            let template = attr_bytes_or(node, "template", b"%s")?;
            let placeholder = attr_bytes_or(node, "placeholder", b"%s")?;
            let summarize = attr_int_or(node, "summarize", 3)?;
            if placeholder.is_empty() {
                return Err(KernelError::invalid("placeholder must not be empty"));
            }
            let parts = split_bytes(&template, &placeholder);
            Box::new(move |inp: Inputs| {
                if inp.len() + 1 != parts.len() {
                    return Err(KernelError::invalid(format!(
                        "num placeholders in template and num inputs must match: {} vs. {}",
                        parts.len() - 1,
                        inp.len()
                    )));
                }
                let mut msg = parts[0].clone();
                for (t, part) in inp.iter().zip(&parts[1..]) {
                    msg.extend_from_slice(&summarize_value(t, summarize));
                    msg.extend_from_slice(part);
                }
                one(Tensor::from_strings(Vec::new(), vec![msg]).expect("scalar"))
            })
        }
        "PrintV2" => {
            let stream = attr_bytes_or(node, "output_stream", b"stderr")?;
            let stream = String::from_utf8_lossy(&stream).into_owned();
            let end = attr_bytes_or(node, "end", b"\n")?;
            let target = PrintTarget::parse(&stream)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let t = &inp[0];
                let (TensorData::Str(v), true) = (&t.data, t.shape.is_empty()) else {
                    return Err(KernelError::invalid(format!(
                        "Input is expected to be scalar, but got {} of shape {}",
                        t.dtype,
                        super::shape_ops::debug_shape(&t.shape)
                    )));
                };
                let mut msg = v[0].clone();
                msg.extend_from_slice(&end);
                target.write(&msg)?;
                Ok(Outputs::new())
            })
        }
        "StringJoin" => {
            let sep = attr_bytes_or(node, "separator", b"")?;
            Box::new(move |inp: Inputs| one(string_join(&inp, &sep)?))
        }
        "ReduceJoin" => {
            let keep_dims = attr_bool_or(node, "keep_dims", false)?;
            let sep = attr_bytes_or(node, "separator", b"")?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                one(reduce_join(&inp[0], &super::int_values(&inp[1], "reduction_indices")?, keep_dims, &sep)?)
            })
        }
        "UnsortedSegmentJoin" => {
            let sep = attr_bytes_or(node, "separator", b"")?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 3)?;
                one(unsorted_segment_join(&inp[0], &inp[1], &inp[2], &sep)?)
            })
        }
        "Substr" => {
            let utf8 = unit_is_utf8(node)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 3)?;
                one(substr(&inp[0], &inp[1], &inp[2], utf8)?)
            })
        }
        "StringLower" | "StringUpper" => {
            // TensorFlow: ASCII case mapping by default; with `encoding = "utf-8"`, Unicode's.
            let upper = node.op == "StringUpper";
            let utf8 = match attr_bytes_or(node, "encoding", b"")?.as_slice() {
                b"" => false,
                b"utf-8" | b"UTF-8" | b"utf8" => true,
                other => {
                    return Err(KernelError::invalid(format!(
                        "encoding must be \"\" or \"utf-8\", got \"{}\"",
                        String::from_utf8_lossy(other)
                    )))
                }
            };
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let v = strings(&inp[0], "input")?;
                let out: Vec<Vec<u8>> = v
                    .iter()
                    .map(|s| match (utf8, upper) {
                        (false, false) => s.to_ascii_lowercase(),
                        (false, true) => s.to_ascii_uppercase(),
                        (true, false) => String::from_utf8_lossy(s).to_lowercase().into_bytes(),
                        (true, true) => String::from_utf8_lossy(s).to_uppercase().into_bytes(),
                    })
                    .collect();
                one(Tensor::from_strings(inp[0].shape.clone(), out).expect("same element count"))
            })
        }
        "StaticRegexFullMatch" => {
            let pattern = attr_bytes_or(node, "pattern", b"")?;
            let pattern = String::from_utf8(pattern).map_err(|_| KernelError::invalid("pattern is not UTF-8"))?;
            // RE2's FullMatch: the whole string, not a substring.
            let re = regex::bytes::Regex::new(&format!("\\A(?:{})\\z", re2_classes(&pattern)))
                .map_err(|e| KernelError::invalid(format!("Invalid pattern: {pattern}, error: {e}")))?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let v = strings(&inp[0], "input")?;
                let out: Vec<bool> = v.iter().map(|s| re.is_match(s)).collect();
                one(Tensor::from_bool(inp[0].shape.clone(), out).expect("same element count"))
            })
        }
        // The three hash buckets: FarmHash's Fingerprint64 (`Fast`), SipHash-2-4 under the
        // node's 128-bit key (`Strong`, Keras' `Hashing` with a salt), and TensorFlow's
        // `Hash64` (the deprecated V1).
        "StringToHashBucketFast" | "StringToHashBucketStrong" | "StringToHashBucket" => {
            let buckets = attr_int_or(node, "num_buckets", 0)?;
            if buckets <= 0 {
                return Err(KernelError::invalid(format!("num_buckets must be positive, got {buckets}")));
            }
            let hash = match node.op.as_str() {
                "StringToHashBucketFast" => BucketHash::Fingerprint,
                "StringToHashBucket" => BucketHash::V1,
                _ => {
                    let key = super::attr_ints_or(node, "key")?;
                    let [k0, k1] = key[..] else { return Err(KernelError::invalid("Key must have 2 elements")) };
                    BucketHash::Keyed(k0 as u64, k1 as u64)
                }
            };
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let v = strings(&inp[0], "input")?;
                let h: Vec<i64> = v.iter().map(|s| (hash.of(s) % buckets as u64) as i64).collect();
                one(Tensor::from_i64(inp[0].shape.clone(), h).expect("same element count"))
            })
        }
        "EncodeBase64" => {
            let pad = attr_bool_or(node, "pad", false)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let out: Vec<Vec<u8>> = strings(&inp[0], "input")?.iter().map(|s| base64_encode(s, pad)).collect();
                one(Tensor::from_strings(inp[0].shape.clone(), out).expect("same element count"))
            })
        }
        "DecodeBase64" => Box::new(|inp: Inputs| {
            arity(&inp, 1)?;
            let out = strings(&inp[0], "input")?.iter().map(|s| base64_decode(s)).collect::<KResult<Vec<_>>>()?;
            one(Tensor::from_strings(inp[0].shape.clone(), out).expect("same element count"))
        }),
        "StringLength" => {
            let utf8 = unit_is_utf8(node)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let v = strings(&inp[0], "input")?;
                let n: Vec<i32> = v.iter().map(|s| if utf8 { utf8_len(s) } else { s.len() } as i32).collect();
                one(Tensor::from_i32(inp[0].shape.clone(), n).expect("same element count"))
            })
        }
        "StringSplitV2" => {
            let maxsplit = attr_int_or(node, "maxsplit", -1)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                string_split(&inp[0], &inp[1], maxsplit)
            })
        }
        "StringNGrams" => {
            let spec = NGrams {
                separator: attr_bytes_or(node, "separator", b" ")?,
                widths: super::attr_ints_or(node, "ngram_widths")?,
                left_pad: attr_bytes_or(node, "left_pad", b"")?,
                right_pad: attr_bytes_or(node, "right_pad", b"")?,
                pad_width: attr_int_or(node, "pad_width", 0)?,
                preserve_short: attr_bool_or(node, "preserve_short_sequences", false)?,
            };
            if let Some(w) = spec.widths.iter().find(|&&w| w < 1) {
                return Err(KernelError::invalid(format!("ngram_widths must contain positive values, got {w}")));
            }
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                spec.run(&inp[0], &inp[1])
            })
        }
        "StaticRegexReplace" => {
            let pattern = attr_bytes_or(node, "pattern", b"")?;
            let pattern = String::from_utf8(pattern).map_err(|_| KernelError::invalid("pattern is not UTF-8"))?;
            let re = regex::bytes::Regex::new(&re2_classes(&pattern))
                .map_err(|e| KernelError::invalid(format!("Invalid pattern: {pattern}, error: {e}")))?;
            let rewrite = rewrite_from_re2(&attr_bytes_or(node, "rewrite", b"")?, re.captures_len())?;
            let global = attr_bool_or(node, "replace_global", true)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let v = strings(&inp[0], "input")?;
                let out: Vec<Vec<u8>> = v
                    .iter()
                    .map(|s| {
                        if global {
                            global_replace(&re, s, &rewrite)
                        } else {
                            re.replacen(s, 1, rewrite.as_slice()).into_owned()
                        }
                    })
                    .collect();
                one(Tensor::from_strings(inp[0].shape.clone(), out).expect("same element count"))
            })
        }
        "RegexReplace" => {
            let global = attr_bool_or(node, "replace_global", true)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 3)?;
                let re = regex_operand(&inp[1], false)?;
                let rewrite = rewrite_from_re2(&scalar_bytes(&inp[2], "rewrite")?, re.captures_len())?;
                let v = strings(&inp[0], "input")?;
                let out: Vec<Vec<u8>> = v
                    .iter()
                    .map(|s| {
                        if global {
                            global_replace(&re, s, &rewrite)
                        } else {
                            re.replacen(s, 1, rewrite.as_slice()).into_owned()
                        }
                    })
                    .collect();
                one(Tensor::from_strings(inp[0].shape.clone(), out).expect("same element count"))
            })
        }
        "RegexFullMatch" => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            let re = regex_operand(&inp[1], true)?;
            let out: Vec<bool> = strings(&inp[0], "input")?.iter().map(|s| re.is_match(s)).collect();
            one(Tensor::from_bool(inp[0].shape.clone(), out).expect("same element count"))
        }),
        "StringStrip" => Box::new(|inp: Inputs| {
            arity(&inp, 1)?;
            // C's isspace: space, \t, \n, \v, \f, \r.
            let space = |c: &u8| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
            let out: Vec<Vec<u8>> = strings(&inp[0], "input")?
                .iter()
                .map(|s| {
                    let start = s.iter().position(|c| !space(c)).unwrap_or(s.len());
                    let end = s.iter().rposition(|c| !space(c)).map_or(start, |e| e + 1);
                    s[start..end].to_vec()
                })
                .collect();
            one(Tensor::from_strings(inp[0].shape.clone(), out).expect("same element count"))
        }),
        "StringSplit" => {
            let skip_empty = attr_bool_or(node, "skip_empty", true)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                string_split_v1(&inp[0], &inp[1], skip_empty)
            })
        }
        "Print" => {
            let message = attr_bytes_or(node, "message", b"")?;
            let summarize = attr_int_or(node, "summarize", 3)?;
            let first_n = attr_int_or(node, "first_n", -1)?;
            let calls = std::sync::atomic::AtomicI64::new(0);
            Box::new(move |mut inp: Inputs| {
                if inp.is_empty() {
                    return Err(KernelError::Arity { expected: 1, got: 0 });
                }
                let printed = calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if first_n < 0 || printed < first_n {
                    let mut msg = message.clone();
                    for t in &inp[1..] {
                        msg.push(b'[');
                        msg.extend_from_slice(&summarize_value_v1(t, summarize));
                        msg.push(b']');
                    }
                    msg.push(b'\n');
                    PrintTarget::Stderr.write(&msg)?;
                }
                inp.truncate(1);
                Ok(inp.into_iter().collect())
            })
        }
        "Add" if node.attr("T").and_then(AttrValue::as_type) == Some(DType::String) => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            one(string_add(&inp[0], &inp[1])?)
        }),
        _ => return Ok(None),
    };
    Ok(Some(f))
}

// ---------------------------------------------------------------- helpers

/// A string attribute's bytes, `default` when the node does not set it.
pub(super) fn attr_bytes_or(node: &Node, name: &str, default: &[u8]) -> KResult<Vec<u8>> {
    match node.attr(name) {
        None => Ok(default.to_vec()),
        Some(AttrValue::S(s)) => Ok(s.clone()),
        Some(_) => Err(KernelError::Attr(name.into())),
    }
}

fn unit_is_utf8(node: &Node) -> KResult<bool> {
    match attr_bytes_or(node, "unit", b"BYTE")?.as_slice() {
        b"BYTE" => Ok(false),
        b"UTF8_CHAR" => Ok(true),
        other => {
            Err(KernelError::invalid(format!("unit must be BYTE or UTF8_CHAR, got {}", String::from_utf8_lossy(other))))
        }
    }
}

/// The elements of a string tensor.
/// `UnsortedSegmentJoin` (`tf.strings.unsorted_segment_join`), as TensorFlow's kernel: the
/// strings whose leading indices map to segment `k` are appended to output `k` in
/// row-major order, the separator first only when the output is already non-empty (so an
/// empty string joined first leaves no separator behind, one joined later leaves one).
fn unsorted_segment_join(input: &Tensor, ids: &Tensor, num: &Tensor, sep: &[u8]) -> KResult<Tensor> {
    let values = strings(input, "inputs")?;
    if num.num_elements() == 0 {
        return Err(KernelError::invalid("Number of segments cannot be empty."));
    }
    let n = super::int_scalar(num, "num_segments")?;
    let ids_v = super::int_values(ids, "segment_ids")?;
    let rank = ids.rank();
    if rank == 0 {
        return Err(KernelError::invalid("Segment_id cannot have rank 0"));
    }
    if rank > input.rank() {
        return Err(KernelError::invalid(format!(
            "Invalid segment_id rank {rank} for input with {} dimension(s)",
            input.rank()
        )));
    }
    if let Some(i) = (0..rank).find(|&i| ids.shape[i] != input.shape[i]) {
        return Err(KernelError::invalid(format!(
            "Segment dimension is {} while input dimension is {} in rank {i}",
            ids.shape[i],
            input.rank()
        )));
    }
    if ids_v.iter().any(|&k| k < 0 || k >= n) || n < 0 {
        return Err(KernelError::invalid(
            "segment_ids are not allowed to exceed num_segments or to have negative values.",
        ));
    }
    let inner: usize = input.shape[rank..].iter().product();
    let mut shape = vec![n as usize];
    shape.extend_from_slice(&input.shape[rank..]);
    budget(DType::String, &shape)?;
    let mut out: Vec<Vec<u8>> = vec![Vec::new(); n as usize * inner];
    for j in 0..inner {
        for (i, &k) in ids_v.iter().enumerate() {
            let o = &mut out[k as usize * inner + j];
            if !o.is_empty() {
                o.extend_from_slice(sep);
            }
            o.extend_from_slice(&values[i * inner + j]);
        }
    }
    Tensor::from_strings(shape, out).map_err(|e| KernelError::invalid(e.to_string()))
}

pub(super) fn strings<'a>(t: &'a Tensor, what: &str) -> KResult<&'a [Vec<u8>]> {
    match &t.data {
        TensorData::Str(v) => Ok(v),
        _ => Err(KernelError::invalid(format!("{what} must be a string tensor, got {}", t.dtype))),
    }
}

fn str_tensor(shape: Vec<usize>, v: Vec<Vec<u8>>) -> Tensor {
    Tensor { dtype: DType::String, shape, data: TensorData::Str(Arc::new(v)) }
}

/// `absl::StrSplit(s, delim)` for a non-empty delimiter: every piece, empty ones included.
fn split_bytes(s: &[u8], delim: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i + delim.len() <= s.len() {
        if &s[i..i + delim.len()] == delim {
            out.push(s[start..i].to_vec());
            i += delim.len();
            start = i;
        } else {
            i += 1;
        }
    }
    out.push(s[start..].to_vec());
    out
}

fn utf8_len(s: &[u8]) -> usize {
    s.iter().filter(|&&b| (b & 0xC0) != 0x80).count()
}

/// TensorFlow's `TensorShape::DebugString`: `[2,3]`.
fn shape_string(shape: &[usize]) -> String {
    super::shape_ops::debug_shape(shape)
}

// ---------------------------------------------------------------- printf

/// The flags of a C conversion specification.
#[derive(Clone, Copy, Debug, Default)]
struct Flags {
    left: bool,
    plus: bool,
    space: bool,
    zero: bool,
    alt: bool,
}

/// A printf conversion: flags, width, precision.
#[derive(Clone, Copy, Debug, Default)]
struct Conv {
    flags: Flags,
    width: usize,
    precision: Option<usize>,
}

impl Conv {
    /// Pads `sign` + `body` to the width (zeros after the sign for a finite number with `0`).
    fn pad(&self, sign: &str, body: &str, finite: bool) -> String {
        let len = sign.len() + body.len();
        if len >= self.width {
            return format!("{sign}{body}");
        }
        let fill = self.width - len;
        if self.flags.left {
            format!("{sign}{body}{}", " ".repeat(fill))
        } else if self.flags.zero && finite {
            format!("{sign}{}{body}", "0".repeat(fill))
        } else {
            format!("{}{sign}{body}", " ".repeat(fill))
        }
    }

    fn sign(&self, negative: bool) -> &'static str {
        if negative {
            "-"
        } else if self.flags.plus {
            "+"
        } else if self.flags.space {
            " "
        } else {
            ""
        }
    }

    /// `%d` / `%lld`.
    fn int(&self, x: i64) -> String {
        self.pad(self.sign(x < 0), &x.unsigned_abs().to_string(), true)
    }

    /// `%f`, `%e` or `%g` of a double.
    fn float(&self, x: f64, conv: u8) -> String {
        let sign = self.sign(x.is_sign_negative());
        if !x.is_finite() {
            let body = if x.is_nan() { "nan" } else { "inf" };
            return self.pad(sign, body, false);
        }
        let body = c_float_body(x.abs(), conv, self.precision.unwrap_or(6), self.flags.alt);
        self.pad(sign, &body, true)
    }
}

/// The digits of a finite non-negative `x` under `%f`, `%e` or `%g` with `prec` (no sign, no
/// padding): C's rules, exactly rounded (Rust's exact formatting rounds as glibc does).
fn c_float_body(x: f64, conv: u8, prec: usize, alt: bool) -> String {
    match conv {
        b'f' => {
            let mut s = format!("{x:.prec$}");
            if alt && prec == 0 {
                s.push('.');
            }
            s
        }
        b'e' => {
            let s = format!("{x:.prec$e}");
            let (mant, exp) = s.split_once('e').expect("exponent");
            let exp: i32 = exp.parse().expect("exponent digits");
            let mut mant = mant.to_string();
            if alt && prec == 0 {
                mant.push('.');
            }
            format!("{mant}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.unsigned_abs())
        }
        _ => {
            let p = prec.max(1);
            let exp = if x == 0.0 {
                0
            } else {
                let s = format!("{x:.prec$e}", prec = p - 1);
                s.split_once('e').expect("exponent").1.parse::<i32>().expect("exponent digits")
            };
            let mut s = if exp < -4 || exp >= p as i32 {
                c_float_body(x, b'e', p - 1, alt)
            } else {
                c_float_body(x, b'f', (p as i32 - 1 - exp) as usize, alt)
            };
            if !alt {
                // Strip trailing zeros of the fraction, and a trailing point.
                let (mant, tail) = match s.find('e') {
                    Some(i) => (s[..i].to_string(), s[i..].to_string()),
                    None => (s.clone(), String::new()),
                };
                let mant = if mant.contains('.') {
                    mant.trim_end_matches('0').trim_end_matches('.').to_string()
                } else {
                    mant
                };
                s = mant + &tail;
            }
            s
        }
    }
}

/// `AsString`'s attributes, turned into one conversion.
struct AsStringSpec {
    conv: Conv,
    /// `f`, `e` or `g` for floats.
    float_conv: u8,
    dtype: Option<DType>,
    /// Whether a `width` was given (a string is then printed through `%<width>.<precision>s`).
    has_width: bool,
}

/// The largest `width` or `precision` AsString accepts.
const MAX_FORMAT_FIELD: i64 = 4096;

impl AsStringSpec {
    fn from_node(node: &Node) -> KResult<AsStringSpec> {
        let dtype = node.attr("T").and_then(AttrValue::as_type);
        let precision = attr_int_or(node, "precision", -1)?;
        let scientific = attr_bool_or(node, "scientific", false)?;
        let shortest = attr_bool_or(node, "shortest", false)?;
        let width = attr_int_or(node, "width", -1)?;
        let fill = attr_bytes_or(node, "fill", b"")?;
        // C's printf takes any int; a string per element that wide is refused here (the
        // formatter's own bound is 65535), not allowed to abort the process.
        for (name, v) in [("precision", precision), ("width", width)] {
            if v > MAX_FORMAT_FIELD {
                return Err(KernelError::invalid(format!("{name} {v} is too large (at most {MAX_FORMAT_FIELD})")));
            }
        }
        if let Some(d) = dtype {
            // Floats, complex numbers and strings take every attribute (a string's precision
            // truncates it when a width is given); the integers and bool neither a precision
            // nor a float notation.
            if !(d.is_float() || matches!(d, DType::Complex64 | DType::Complex128 | DType::String)) {
                if scientific || shortest {
                    return Err(KernelError::invalid(format!(
                        "scientific and shortest format not supported for datatype {}",
                        d.name()
                    )));
                }
                if precision > -1 {
                    return Err(KernelError::invalid(format!("precision not supported for datatype {}", d.name())));
                }
            }
        }
        if fill.len() > 1 {
            return Err(KernelError::invalid("Fill string must be one or fewer characters"));
        }
        if scientific && shortest {
            return Err(KernelError::invalid("Cannot select both scientific and shortest notation"));
        }
        let mut conv = Conv::default();
        if width > -1 {
            match fill.first() {
                None => {}
                Some(b'-') => conv.flags.left = true,
                Some(b'+') => conv.flags.plus = true,
                Some(b' ') => conv.flags.space = true,
                Some(b'0') => conv.flags.zero = true,
                Some(b'#') => conv.flags.alt = true,
                Some(&c) => {
                    return Err(KernelError::invalid(format!("Fill argument not supported: \"{}\"", c as char)))
                }
            }
            conv.width = width as usize;
        }
        if precision > -1 {
            conv.precision = Some(precision as usize);
        }
        let float_conv = if shortest {
            b'g'
        } else if scientific {
            b'e'
        } else {
            b'f'
        };
        Ok(AsStringSpec { conv, float_conv, dtype, has_width: width > -1 })
    }

    fn apply(&self, t: &Tensor) -> KResult<Tensor> {
        if let Some(d) = self.dtype {
            if d != t.dtype {
                return Err(KernelError::invalid(format!("input has dtype {}, the node's T is {}", t.dtype, d)));
            }
        }
        let c = &self.conv;
        let cannot = || KernelError::invalid(format!("Cannot encode input of type {}", t.dtype));
        // The little-endian words of a raw-byte tensor, `width` bytes each (`parts` per
        // element), as `u64` bits.
        let raw_parts = |width: usize, parts: usize| -> KResult<Vec<u64>> {
            let TensorData::Raw(b) = &t.data else { return Err(cannot()) };
            if b.len() != width * parts * t.num_elements() {
                return Err(cannot());
            }
            Ok(b.chunks_exact(width)
                .map(|e| {
                    let mut le = [0u8; 8];
                    le[..width].copy_from_slice(e);
                    u64::from_le_bytes(le)
                })
                .collect())
        };
        let raw = |width: usize| raw_parts(width, 1);
        let v: Vec<Vec<u8>> = match (&t.data, t.dtype) {
            (TensorData::F32(v), _) => v.iter().map(|&x| c.float(x as f64, self.float_conv).into_bytes()).collect(),
            (TensorData::F64(v), _) => v.iter().map(|&x| c.float(x, self.float_conv).into_bytes()).collect(),
            (TensorData::I32(v), _) => v.iter().map(|&x| c.int(x as i64).into_bytes()).collect(),
            (TensorData::I64(v), _) => v.iter().map(|&x| c.int(x).into_bytes()).collect(),
            (TensorData::Bool(v), _) => {
                v.iter().map(|&x| (if x { "true" } else { "false" }).as_bytes().to_vec()).collect()
            }
            // `%d` of the sign-extended narrow integers.
            (_, DType::Int8) => raw(1)?.into_iter().map(|x| c.int(x as u8 as i8 as i64).into_bytes()).collect(),
            (_, DType::Int16) => raw(2)?.into_iter().map(|x| c.int(x as u16 as i16 as i64).into_bytes()).collect(),
            // `%u` / `%llu`: no sign, so the `+` and space fills print nothing.
            (_, DType::UInt8 | DType::UInt16 | DType::UInt32 | DType::UInt64) => {
                let width = t.dtype.size_of().ok_or_else(cannot)?;
                raw(width)?.into_iter().map(|x| c.pad("", &x.to_string(), true).into_bytes()).collect()
            }
            // `(%f,%f)`: each part under the one conversion.
            (_, DType::Complex64 | DType::Complex128) => {
                let single = t.dtype == DType::Complex64;
                let parts = raw_parts(if single { 4 } else { 8 }, 2)?;
                let part = |x: u64| if single { f32::from_bits(x as u32) as f64 } else { f64::from_bits(x) };
                parts
                    .chunks_exact(2)
                    .map(|p| {
                        let (re, im) = (c.float(part(p[0]), self.float_conv), c.float(part(p[1]), self.float_conv));
                        format!("({re},{im})").into_bytes()
                    })
                    .collect()
            }
            // A string as it is, or `%<width>.<precision>s` when a width is given (only `-`
            // of the fills has an effect).
            (TensorData::Str(v), DType::String) => {
                if !self.has_width {
                    v.to_vec()
                } else {
                    v.iter()
                        .map(|s| {
                            let s = &s[..c.precision.map_or(s.len(), |p| p.min(s.len()))];
                            let fill = vec![b' '; c.width.saturating_sub(s.len())];
                            if c.flags.left {
                                [s, &fill].concat()
                            } else {
                                [&fill, s].concat()
                            }
                        })
                        .collect()
                }
            }
            _ => return Err(cannot()),
        };
        Ok(str_tensor(t.shape.clone(), v))
    }
}

// ---------------------------------------------------------------- StringToNumber

/// `safe_strtof`/`safe_strtod` and `safe_strto32`/`safe_strto64` ([`super::c_number`]).
fn string_to_number(t: &Tensor, out: DType) -> KResult<Tensor> {
    let v = strings(t, "string_tensor")?;
    let bad = |s: &[u8]| {
        KernelError::invalid(format!(
            "StringToNumberOp could not correctly convert string: {}",
            String::from_utf8_lossy(s)
        ))
    };
    let shape = t.shape.clone();
    Ok(match out {
        DType::Float32 => {
            let mut xs = Vec::with_capacity(v.len());
            for s in v {
                xs.push(parse_f32(s).ok_or_else(|| bad(s))?);
            }
            Tensor::from_f32(shape, xs).expect("same element count")
        }
        DType::Float64 => {
            let mut xs = Vec::with_capacity(v.len());
            for s in v {
                xs.push(parse_f64(s).ok_or_else(|| bad(s))?);
            }
            Tensor::from_f64(shape, xs).expect("same element count")
        }
        DType::Int32 => {
            let mut xs = Vec::with_capacity(v.len());
            for s in v {
                xs.push(parse_i32(s).ok_or_else(|| bad(s))?);
            }
            Tensor::from_i32(shape, xs).expect("same element count")
        }
        DType::Int64 => {
            let mut xs = Vec::with_capacity(v.len());
            for s in v {
                xs.push(parse_i64(s).ok_or_else(|| bad(s))?);
            }
            Tensor::from_i64(shape, xs).expect("same element count")
        }
        d => return Err(KernelError::DType(d)),
    })
}

// ---------------------------------------------------------------- summarize

/// `FloatToBuffer`: `%.6g`, or `%.9g` when that does not read back exactly.
fn float_text(x: f32) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    let g = |p: usize| Conv { precision: Some(p), ..Conv::default() }.float(x as f64, b'g');
    let short = g(6);
    if short.parse::<f32>().ok() == Some(x) {
        short
    } else {
        g(9)
    }
}

/// `DoubleToBuffer`: `%.15g`, or `%.17g` when that does not read back exactly.
fn double_text(x: f64) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    let g = |p: usize| Conv { precision: Some(p), ..Conv::default() }.float(x, b'g');
    let short = g(15);
    if short.parse::<f64>().ok() == Some(x) {
        short
    } else {
        g(17)
    }
}

/// `absl::Utf8SafeCEscape`: C escapes, octal for other control bytes, UTF-8 bytes kept.
fn c_escape(s: &[u8], out: &mut Vec<u8>) {
    for &b in s {
        match b {
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\'' => out.extend_from_slice(b"\\'"),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x20..=0x7e | 0x80..=0xff => out.push(b),
            _ => out.extend_from_slice(format!("\\{b:03o}").as_bytes()),
        }
    }
}

/// One element as `PrintOneElement(x, print_v2 = true)` writes it.
/// `PrintOneElement`: strings C-escaped, in quotes for `print_v2` (`quoted`).
fn push_element(t: &Tensor, i: usize, out: &mut Vec<u8>, quoted: bool) {
    let text = match &t.data {
        TensorData::F32(v) => float_text(v[i]),
        TensorData::F64(v) => double_text(v[i]),
        TensorData::I32(v) => v[i].to_string(),
        TensorData::I64(v) => v[i].to_string(),
        TensorData::Bool(v) => (if v[i] { "1" } else { "0" }).to_string(),
        TensorData::Str(v) => {
            if quoted {
                out.push(b'"');
            }
            c_escape(&v[i], out);
            if quoted {
                out.push(b'"');
            }
            return;
        }
        TensorData::Raw(b) => match raw_int_text(t.dtype, b, i) {
            Some(text) => text,
            None => "?".to_string(),
        },
        _ => "?".to_string(),
    };
    out.extend_from_slice(text.as_bytes());
}

/// Whether TensorFlow prints `t` as one `?` per element: a list, or a raw type other than
/// the narrow and unsigned integers (complex).
fn irregular(t: &Tensor) -> bool {
    match &t.data {
        TensorData::List(_) => true,
        TensorData::Raw(b) => t.num_elements() > 0 && raw_int_text(t.dtype, b, 0).is_none(),
        _ => false,
    }
}

/// Element `i` of a narrow or unsigned integer tensor (stored as little-endian bytes) in
/// decimal, as TensorFlow prints them (`int8`/`uint8` as numbers, not characters); `None`
/// for any other raw type (complex: TensorFlow's `?`).
fn raw_int_text(dtype: DType, b: &[u8], i: usize) -> Option<String> {
    let w = dtype.size_of()?;
    let e = b.get(i * w..(i + 1) * w)?;
    Some(match dtype {
        DType::Int8 => (e[0] as i8).to_string(),
        DType::UInt8 => e[0].to_string(),
        DType::Int16 => i16::from_le_bytes([e[0], e[1]]).to_string(),
        DType::UInt16 => u16::from_le_bytes([e[0], e[1]]).to_string(),
        DType::UInt32 => u32::from_le_bytes(e.try_into().ok()?).to_string(),
        DType::UInt64 => u64::from_le_bytes(e.try_into().ok()?).to_string(),
        _ => return None,
    })
}

/// `Tensor::SummarizeValue(max_entries, print_v2 = true)`, as bytes (strings are printed as
/// they are, UTF-8 or not).
pub(crate) fn summarize_value(t: &Tensor, max_entries: i64) -> Vec<u8> {
    let n = t.num_elements();
    let limit = if max_entries < 0 { n } else { (max_entries as usize).min(n) };
    let mut out = Vec::new();
    if irregular(t) {
        // TensorFlow's irregular case: one `?` per element.
        if !t.shape.is_empty() {
            out.push(b'[');
        }
        out.extend_from_slice(vec!["?"; limit].join(" ").as_bytes());
        if limit < n {
            out.extend_from_slice(b"...");
        }
        if !t.shape.is_empty() {
            out.push(b']');
        }
        return out;
    }
    if t.shape.is_empty() {
        for i in 0..limit {
            if i > 0 {
                out.push(b' ');
            }
            push_element(t, i, &mut out, true);
        }
        if n > limit {
            out.extend_from_slice(b"...");
        }
        return out;
    }
    print_dim(t, 0, limit, 0, &mut out);
    out
}

fn dim_spacing(dim: usize, ndims: usize, out: &mut Vec<u8>) {
    if dim == ndims - 1 {
        out.push(b' ');
        return;
    }
    out.extend(std::iter::repeat_n(b'\n', ndims - dim - 1));
    out.extend(std::iter::repeat_n(b' ', dim + 1));
}

/// `PrintOneDimV2`: the first and last `ends` entries of each dimension, `...` between.
fn print_dim(t: &Tensor, dim: usize, ends: usize, offset: usize, out: &mut Vec<u8>) {
    let ndims = t.shape.len();
    if dim == ndims {
        push_element(t, offset, out, true);
        return;
    }
    out.push(b'[');
    let count = t.shape[dim];
    let start_of_end = ends.max(count.saturating_sub(ends));
    let per: usize = t.shape[dim + 1..].iter().product();
    for i in 0..ends.min(count) {
        if i > 0 {
            dim_spacing(dim, ndims, out);
        }
        print_dim(t, dim + 1, ends, offset + per * i, out);
    }
    if count > 2 * ends {
        dim_spacing(dim, ndims, out);
        out.extend_from_slice(b"...");
    }
    for i in start_of_end..count {
        dim_spacing(dim, ndims, out);
        print_dim(t, dim + 1, ends, offset + per * i, out);
    }
    out.push(b']');
}

// ---------------------------------------------------------------- PrintV2

/// Whether `PrintV2`s that name stdout write to stderr instead ([`print_stdout_to_stderr`]).
static STDOUT_PRINTS_TO_STDERR: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Sends the output of `PrintV2`s whose `output_stream` is stdout to stderr, for the
/// process: the CLI does this when stdout carries a JSON document (`run --json`), which
/// prints interleaved into it would make unreadable.
pub fn print_stdout_to_stderr(on: bool) {
    STDOUT_PRINTS_TO_STDERR.store(on, std::sync::atomic::Ordering::Relaxed);
}

enum PrintTarget {
    Stderr,
    Stdout,
    File(String),
}

impl PrintTarget {
    fn parse(s: &str) -> KResult<PrintTarget> {
        Ok(match s {
            "stderr" | "log(info)" | "log(warning)" | "log(error)" => PrintTarget::Stderr,
            "stdout" => PrintTarget::Stdout,
            _ => match s.strip_prefix("file://") {
                Some(path) => PrintTarget::File(path.to_string()),
                None => {
                    return Err(KernelError::invalid(format!(
                        "output_stream '{s}' is not one of stdout, stderr, log(info), log(warning), log(error) or \
                         file://PATH"
                    )))
                }
            },
        })
    }

    fn write(&self, msg: &[u8]) -> KResult<()> {
        let io = |e: std::io::Error| KernelError::invalid(format!("PrintV2 could not write: {e}"));
        match self {
            PrintTarget::Stderr => {
                let mut e = std::io::stderr().lock();
                e.write_all(msg).and_then(|_| e.flush()).map_err(io)
            }
            PrintTarget::Stdout if STDOUT_PRINTS_TO_STDERR.load(std::sync::atomic::Ordering::Relaxed) => {
                let mut e = std::io::stderr().lock();
                e.write_all(msg).and_then(|_| e.flush()).map_err(io)
            }
            PrintTarget::Stdout => {
                let mut o = std::io::stdout().lock();
                o.write_all(msg).and_then(|_| o.flush()).map_err(io)
            }
            PrintTarget::File(path) => std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut f| f.write_all(msg))
                .map_err(io),
        }
    }
}

// ---------------------------------------------------------------- StringJoin

fn string_join(inp: &Inputs, sep: &[u8]) -> KResult<Tensor> {
    let mut shape: Option<&[usize]> = None;
    let mut all: Vec<&[Vec<u8>]> = Vec::with_capacity(inp.len());
    for t in inp.iter() {
        all.push(strings(t, "inputs")?);
        if t.shape.is_empty() {
            continue;
        }
        match shape {
            None => shape = Some(&t.shape),
            Some(s) if s != t.shape.as_slice() => {
                return Err(KernelError::invalid(format!(
                    "Input shapes do not match: {} vs. {}",
                    shape_string(s),
                    shape_string(&t.shape)
                )))
            }
            Some(_) => {}
        }
    }
    let shape = shape.map(<[usize]>::to_vec).unwrap_or_default();
    let n: usize = shape.iter().product();
    let out = (0..n)
        .map(|i| {
            let mut s = Vec::new();
            for (k, (t, v)) in inp.iter().zip(&all).enumerate() {
                if k > 0 {
                    s.extend_from_slice(sep);
                }
                s.extend_from_slice(&v[if t.shape.is_empty() { 0 } else { i }]);
            }
            s
        })
        .collect();
    Ok(str_tensor(shape, out))
}

// ---------------------------------------------------------------- ReduceJoin

/// `ReduceJoin`: joins along `axes`, the first listed axis varying fastest (TensorFlow's order);
/// no axes: the input unchanged.
fn reduce_join(t: &Tensor, axes: &[i64], keep_dims: bool, sep: &[u8]) -> KResult<Tensor> {
    let v = strings(t, "inputs")?;
    let rank = t.rank();
    let mut red: Vec<usize> = Vec::with_capacity(axes.len());
    for &a in axes {
        let d = if a < 0 { a + rank as i64 } else { a };
        if d < 0 || d >= rank as i64 {
            return Err(KernelError::invalid(format!(
                "Invalid reduction dimension {a} for input with {rank} dimension(s)"
            )));
        }
        if red.contains(&(d as usize)) {
            return Err(KernelError::invalid(format!("Duplicate reduction dimension {d}")));
        }
        red.push(d as usize);
    }
    let kept: Vec<usize> = (0..rank).filter(|d| !red.contains(d)).collect();
    let st = super::strides(&t.shape);
    let out_shape: Vec<usize> = if keep_dims {
        (0..rank).map(|d| if red.contains(&d) { 1 } else { t.shape[d] }).collect()
    } else {
        kept.iter().map(|&d| t.shape[d]).collect()
    };
    let kept_shape: Vec<usize> = kept.iter().map(|&d| t.shape[d]).collect();
    let n_out: usize = kept_shape.iter().product();
    let n_red: usize = red.iter().map(|&d| t.shape[d]).product();
    let mut out = Vec::with_capacity(n_out);
    let mut kidx = vec![0usize; kept.len()];
    for _ in 0..n_out {
        let base: usize = kidx.iter().zip(&kept).map(|(&i, &d)| i * st[d]).sum();
        let mut ridx = vec![0usize; red.len()];
        let mut s = Vec::new();
        for k in 0..n_red {
            if k > 0 {
                s.extend_from_slice(sep);
            }
            let off: usize = base + ridx.iter().zip(&red).map(|(&i, &d)| i * st[d]).sum::<usize>();
            s.extend_from_slice(&v[off]);
            // The first listed axis varies fastest.
            for (j, &d) in red.iter().enumerate() {
                ridx[j] += 1;
                if ridx[j] < t.shape[d] {
                    break;
                }
                ridx[j] = 0;
            }
        }
        out.push(s);
        for j in (0..kept.len()).rev() {
            kidx[j] += 1;
            if kidx[j] < kept_shape[j] {
                break;
            }
            kidx[j] = 0;
        }
    }
    Ok(str_tensor(out_shape, out))
}

// ---------------------------------------------------------------- Fingerprint64

/// The hash a `StringToHashBucket*` op reduces modulo its bucket count.
#[derive(Clone, Copy)]
enum BucketHash {
    /// `Fast`: [`fingerprint64`].
    Fingerprint,
    /// `Strong`: [`siphash24`] under the node's key.
    Keyed(u64, u64),
    /// The V1 op: [`hash64`].
    V1,
}

impl BucketHash {
    fn of(self, s: &[u8]) -> u64 {
        match self {
            BucketHash::Fingerprint => fingerprint64(s),
            BucketHash::Keyed(k0, k1) => siphash24(k0, k1, s),
            BucketHash::V1 => hash64(s),
        }
    }
}

/// SipHash-2-4 of `s` under the key `(k0, k1)`: TensorFlow's `StrongKeyedHash`, the hash of
/// `StringToHashBucketStrong`.
pub(crate) fn siphash24(k0: u64, k1: u64, s: &[u8]) -> u64 {
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    let round = |v: &mut [u64; 4]| {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    };
    let compress = |m: u64, v: &mut [u64; 4]| {
        v[3] ^= m;
        round(v);
        round(v);
        v[0] ^= m;
    };
    let chunks = s.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        compress(u64::from_le_bytes(c.try_into().expect("8 bytes")), &mut v);
    }
    // The last word: the remaining bytes, little-endian, and the length's low byte on top.
    let mut last = (s.len() as u64 & 0xff) << 56;
    for (i, &b) in tail.iter().enumerate() {
        last |= u64::from(b) << (8 * i);
    }
    compress(last, &mut v);
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// TensorFlow's `Hash64` (MurmurHash64A with seed `0xDECAFCAFFE`), the hash of the V1
/// `StringToHashBucket`.
pub(crate) fn hash64(s: &[u8]) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    let mut h = 0xDE_CAFC_AFFE_u64 ^ (s.len() as u64).wrapping_mul(M);
    let chunks = s.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        let mut k = u64::from_le_bytes(c.try_into().expect("8 bytes")).wrapping_mul(M);
        k ^= k >> 47;
        h = (h ^ k.wrapping_mul(M)).wrapping_mul(M);
    }
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 47;
    h = h.wrapping_mul(M);
    h ^ (h >> 47)
}

/// TensorFlow's `Fingerprint64` (FarmHash's `farmhashna::Hash64`), which `StringToHashBucketFast`
/// reduces modulo the bucket count: Keras' `Hashing` layer, the out-of-vocabulary buckets of
/// `StringLookup`, feature columns' hash buckets. Little-endian loads, wrapping arithmetic.
pub(crate) fn fingerprint64(s: &[u8]) -> u64 {
    const K0: u64 = 0xc3a5_c85c_97cb_3127;
    const K1: u64 = 0xb492_b66f_be98_f273;
    const K2: u64 = 0x9ae1_6a3b_2f90_404f;
    let load64 = |i: usize| u64::from_le_bytes(s[i..i + 8].try_into().expect("8 bytes"));
    let load32 = |i: usize| u64::from(u32::from_le_bytes(s[i..i + 4].try_into().expect("4 bytes")));
    let shift_mix = |v: u64| v ^ (v >> 47);
    let mix16 = |u: u64, v: u64, mul: u64| {
        let a = shift_mix((u ^ v).wrapping_mul(mul));
        let b = shift_mix((v ^ a).wrapping_mul(mul));
        b.wrapping_mul(mul)
    };
    // Two 64-bit lanes from the 32 bytes at `i` and two seeds.
    let weak32 = |i: usize, a: u64, b: u64| {
        let (w, x, y, z) = (load64(i), load64(i + 8), load64(i + 16), load64(i + 24));
        let a = a.wrapping_add(w);
        let b = b.wrapping_add(a).wrapping_add(z).rotate_right(21);
        let c = a;
        let a = a.wrapping_add(x).wrapping_add(y);
        let b = b.wrapping_add(a.rotate_right(44));
        (a.wrapping_add(z), b.wrapping_add(c))
    };
    let len = s.len();
    let mul = K2.wrapping_add(2 * len as u64);
    if len <= 16 {
        if len >= 8 {
            let a = load64(0).wrapping_add(K2);
            let b = load64(len - 8);
            let c = b.rotate_right(37).wrapping_mul(mul).wrapping_add(a);
            let d = a.rotate_right(25).wrapping_add(b).wrapping_mul(mul);
            return mix16(c, d, mul);
        }
        if len >= 4 {
            return mix16((len as u64).wrapping_add(load32(0) << 3), load32(len - 4), mul);
        }
        if len > 0 {
            let y = u64::from(s[0]) + (u64::from(s[len >> 1]) << 8);
            let z = len as u64 + (u64::from(s[len - 1]) << 2);
            return shift_mix(y.wrapping_mul(K2) ^ z.wrapping_mul(K0)).wrapping_mul(K2);
        }
        return K2;
    }
    if len <= 32 {
        let a = load64(0).wrapping_mul(K1);
        let b = load64(8);
        let c = load64(len - 8).wrapping_mul(mul);
        let d = load64(len - 16).wrapping_mul(K2);
        return mix16(
            a.wrapping_add(b).rotate_right(43).wrapping_add(c.rotate_right(30)).wrapping_add(d),
            a.wrapping_add(b.wrapping_add(K2).rotate_right(18)).wrapping_add(c),
            mul,
        );
    }
    if len <= 64 {
        let a = load64(0).wrapping_mul(K2);
        let b = load64(8);
        let c = load64(len - 8).wrapping_mul(mul);
        let d = load64(len - 16).wrapping_mul(K2);
        let y = a.wrapping_add(b).rotate_right(43).wrapping_add(c.rotate_right(30)).wrapping_add(d);
        let z = mix16(y, a.wrapping_add(b.wrapping_add(K2).rotate_right(18)).wrapping_add(c), mul);
        let e = load64(16).wrapping_mul(mul);
        let f = load64(24);
        let g = y.wrapping_add(load64(len - 32)).wrapping_mul(mul);
        let h = z.wrapping_add(load64(len - 24)).wrapping_mul(mul);
        return mix16(
            e.wrapping_add(f).rotate_right(43).wrapping_add(g.rotate_right(30)).wrapping_add(h),
            e.wrapping_add(f.wrapping_add(a).rotate_right(18)).wrapping_add(g),
            mul,
        );
    }
    // Longer: 64-byte blocks through a 56-byte state, then the last 64 bytes.
    const SEED: u64 = 81;
    let mut x = SEED.wrapping_mul(K2).wrapping_add(load64(0));
    let mut y = SEED.wrapping_mul(K1).wrapping_add(113);
    let mut z = shift_mix(y.wrapping_mul(K2).wrapping_add(113)).wrapping_mul(K2);
    let (mut v, mut w) = ((0u64, 0u64), (0u64, 0u64));
    let end = ((len - 1) / 64) * 64;
    let mut i = 0;
    while i != end {
        x = x.wrapping_add(y).wrapping_add(v.0).wrapping_add(load64(i + 8)).rotate_right(37).wrapping_mul(K1);
        y = y.wrapping_add(v.1).wrapping_add(load64(i + 48)).rotate_right(42).wrapping_mul(K1);
        x ^= w.1;
        y = y.wrapping_add(v.0).wrapping_add(load64(i + 40));
        z = z.wrapping_add(w.0).rotate_right(33).wrapping_mul(K1);
        v = weak32(i, v.1.wrapping_mul(K1), x.wrapping_add(w.0));
        w = weak32(i + 32, z.wrapping_add(w.1), y.wrapping_add(load64(i + 16)));
        std::mem::swap(&mut z, &mut x);
        i += 64;
    }
    let mul = K1.wrapping_add((z & 0xff) << 1);
    let i = len - 64;
    w.0 = w.0.wrapping_add(((len - 1) & 63) as u64);
    v.0 = v.0.wrapping_add(w.0);
    w.0 = w.0.wrapping_add(v.0);
    x = x.wrapping_add(y).wrapping_add(v.0).wrapping_add(load64(i + 8)).rotate_right(37).wrapping_mul(mul);
    y = y.wrapping_add(v.1).wrapping_add(load64(i + 48)).rotate_right(42).wrapping_mul(mul);
    x ^= w.1.wrapping_mul(9);
    y = y.wrapping_add(v.0.wrapping_mul(9)).wrapping_add(load64(i + 40));
    z = z.wrapping_add(w.0).rotate_right(33).wrapping_mul(mul);
    v = weak32(i, v.1.wrapping_mul(mul), x.wrapping_add(w.0));
    w = weak32(i + 32, z.wrapping_add(w.1), y.wrapping_add(load64(i + 16)));
    std::mem::swap(&mut z, &mut x);
    mix16(
        mix16(v.0, w.0, mul).wrapping_add(shift_mix(y).wrapping_mul(K0)).wrapping_add(z),
        mix16(v.1, w.1, mul).wrapping_add(x),
        mul,
    )
}

// ---------------------------------------------------------------- Substr

/// The byte offset of the `k`-th UTF-8 character of `s` (`s.len()` past the end).
fn utf8_offset(s: &[u8], k: usize) -> usize {
    let mut seen = 0;
    for (i, &b) in s.iter().enumerate() {
        if (b & 0xC0) != 0x80 {
            if seen == k {
                return i;
            }
            seen += 1;
        }
    }
    s.len()
}

fn substr_one(s: &[u8], pos: i64, len: i64, utf8: bool, index: usize) -> KResult<Vec<u8>> {
    let size = if utf8 { utf8_len(s) } else { s.len() } as i64;
    if pos.unsigned_abs() > size as u64 {
        return Err(KernelError::invalid(if utf8 {
            format!("pos {pos} out of range for string at index {index}")
        } else {
            format!("pos {pos} out of range for string b'{}' at index {index}", String::from_utf8_lossy(s))
        }));
    }
    let start = if pos < 0 { pos + size } else { pos };
    // A negative length takes the rest (TensorFlow converts it to size_t).
    let end = if len < 0 { size } else { start.saturating_add(len).min(size) };
    let (a, b) = (start as usize, end as usize);
    Ok(if utf8 { s[utf8_offset(s, a)..utf8_offset(s, b)].to_vec() } else { s[a..b].to_vec() })
}

fn substr(input: &Tensor, pos: &Tensor, len: &Tensor, utf8: bool) -> KResult<Tensor> {
    let v = strings(input, "input")?;
    if pos.shape != len.shape {
        return Err(KernelError::invalid(format!(
            "pos and len should have the same shape, got: {} vs. {}",
            shape_string(&pos.shape),
            shape_string(&len.shape)
        )));
    }
    let p = super::int_values(pos, "pos")?;
    let l = super::int_values(len, "len")?;
    let out_shape = broadcast_shape(&input.shape, &pos.shape)?;
    budget(DType::String, &out_shape)?;
    let (sa, sb) = (bcast_strides(&input.shape, &out_shape), bcast_strides(&pos.shape, &out_shape));
    let mut out = Vec::with_capacity(out_shape.iter().product());
    let mut err = None;
    for_each_bcast2(&out_shape, &sa, &sb, |i, j| {
        if err.is_some() {
            return;
        }
        match substr_one(&v[i], p[j], l[j], utf8, out.len()) {
            Ok(s) => out.push(s),
            Err(e) => err = Some(e),
        }
    });
    if let Some(e) = err {
        return Err(e);
    }
    Ok(str_tensor(out_shape, out))
}

// ---------------------------------------------------------------- StringSplitV2

fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// One string split as `StringSplitV2` splits it.
fn split_one(s: &[u8], sep: &[u8], maxsplit: i64) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    if sep.is_empty() {
        // Runs of whitespace separate; empty pieces are dropped.
        let mut i = 0;
        loop {
            while i < s.len() && is_c_space(s[i]) {
                i += 1;
            }
            if i >= s.len() {
                break;
            }
            if maxsplit >= 0 && out.len() as i64 == maxsplit {
                out.push(s[i..].to_vec());
                break;
            }
            let start = i;
            while i < s.len() && !is_c_space(s[i]) {
                i += 1;
            }
            out.push(s[start..i].to_vec());
        }
        return out;
    }
    let mut start = 0;
    let mut i = 0;
    while i + sep.len() <= s.len() {
        if maxsplit >= 0 && out.len() as i64 == maxsplit {
            break;
        }
        if &s[i..i + sep.len()] == sep {
            out.push(s[start..i].to_vec());
            i += sep.len();
            start = i;
        } else {
            i += 1;
        }
    }
    out.push(s[start..].to_vec());
    out
}

fn string_split(input: &Tensor, sep: &Tensor, maxsplit: i64) -> KResult<Outputs> {
    if input.rank() != 1 {
        return Err(KernelError::invalid(format!("input must be a vector, got shape: {}", shape_string(&input.shape))));
    }
    if sep.rank() != 0 {
        return Err(KernelError::invalid(format!("sep must be a scalar, got shape: {}", shape_string(&sep.shape))));
    }
    let v = strings(input, "input")?;
    let sep = &strings(sep, "sep")?[0];
    let mut indices: Vec<i64> = Vec::new();
    let mut values: Vec<Vec<u8>> = Vec::new();
    let mut widest = 0usize;
    for (row, s) in v.iter().enumerate() {
        let parts = split_one(s, sep, maxsplit);
        widest = widest.max(parts.len());
        for (col, p) in parts.into_iter().enumerate() {
            indices.push(row as i64);
            indices.push(col as i64);
            values.push(p);
        }
    }
    let n = values.len();
    let mut o = Outputs::new();
    o.push(Tensor::from_i64(vec![n, 2], indices).expect("two per value"));
    o.push(str_tensor(vec![n], values));
    o.push(Tensor::from_i64(vec![2], vec![v.len() as i64, widest as i64]).expect("two"));
    Ok(o)
}

/// V1 `StringSplit`: each byte of `delimiter` separates tokens (an empty delimiter splits
/// into bytes); an empty input string has no tokens; with `skip_empty`, neither do the
/// empty pieces between adjacent delimiters.
fn string_split_v1(input: &Tensor, delimiter: &Tensor, skip_empty: bool) -> KResult<Outputs> {
    if input.rank() != 1 {
        return Err(KernelError::invalid(format!("input must be a vector, got shape: {}", shape_string(&input.shape))));
    }
    let delim = scalar_bytes(delimiter, "delimiter")?;
    let v = strings(input, "input")?;
    let (mut indices, mut values, mut widest) = (Vec::new(), Vec::new(), 0usize);
    for (row, s) in v.iter().enumerate() {
        let parts: Vec<&[u8]> = if s.is_empty() {
            Vec::new()
        } else if delim.is_empty() {
            s.chunks(1).collect()
        } else {
            s.split(|c| delim.contains(c)).filter(|p| !(skip_empty && p.is_empty())).collect()
        };
        widest = widest.max(parts.len());
        for (col, p) in parts.into_iter().enumerate() {
            indices.extend([row as i64, col as i64]);
            values.push(p.to_vec());
        }
    }
    let n = values.len();
    let mut o = Outputs::new();
    o.push(Tensor::from_i64(vec![n, 2], indices).expect("two per value"));
    o.push(str_tensor(vec![n], values));
    o.push(Tensor::from_i64(vec![2], vec![v.len() as i64, widest as i64]).expect("two"));
    Ok(o)
}

/// A scalar string operand's bytes.
fn scalar_bytes(t: &Tensor, what: &str) -> KResult<Vec<u8>> {
    if t.rank() != 0 {
        return Err(KernelError::invalid(format!("{what} must be scalar, but received {}", shape_string(&t.shape))));
    }
    Ok(strings(t, what)?[0].clone())
}

/// `pattern` with RE2's meaning of the Perl classes, which TensorFlow's regex ops use: `\d`,
/// `\w` and `\s` are ASCII only in RE2 (`[0-9]`, `[0-9A-Za-z_]`, `[\t\n\f\r ]`) and `\b`/`\B`
/// an ASCII word boundary, where the `regex` crate's are Unicode (`\w` matched `é` and `α`, `\d`
/// an Arabic-Indic digit). The negated classes become negated ASCII sets in Unicode mode, so
/// they still match one whole UTF-8 character as RE2's do. Escapes are rewritten outside and
/// inside character classes (a nested class there); everything else is left as written.
fn re2_classes(pattern: &str) -> String {
    const WORD: &str = "0-9A-Za-z_";
    const SPACE: &str = "\\t\\n\\x0C\\r ";
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars().peekable();
    // Depth of `[...]` classes; `fresh` right after a class opens (where `]` is a literal).
    let (mut depth, mut fresh) = (0usize, false);
    while let Some(c) = chars.next() {
        let was_fresh = std::mem::take(&mut fresh);
        match c {
            '\\' => {
                let Some(e) = chars.next() else {
                    out.push(c);
                    break;
                };
                let set = match e {
                    'd' | 'D' => Some("0-9"),
                    'w' | 'W' => Some(WORD),
                    's' | 'S' => Some(SPACE),
                    _ => None,
                };
                match (set, depth > 0) {
                    (Some(set), false) if e.is_ascii_lowercase() => out.push_str(&format!("[{set}]")),
                    (Some(set), true) if e.is_ascii_lowercase() => out.push_str(set),
                    (Some(set), _) => out.push_str(&format!("[^{set}]")),
                    (None, false) if e == 'b' || e == 'B' => out.push_str(&format!("(?-u:\\{e})")),
                    _ => {
                        out.push(c);
                        out.push(e);
                    }
                }
            }
            '[' => {
                out.push(c);
                if depth > 0 && chars.peek() == Some(&':') {
                    // A POSIX class `[:alpha:]` (ASCII in both engines): copied to its `:]`.
                    while let Some(x) = chars.next() {
                        out.push(x);
                        if x == ':' && chars.peek() == Some(&']') {
                            out.push(chars.next().expect("peeked"));
                            break;
                        }
                    }
                    continue;
                }
                depth += 1;
                if chars.peek() == Some(&'^') {
                    out.push(chars.next().expect("peeked"));
                }
                fresh = true;
            }
            ']' if depth > 0 && !was_fresh => {
                depth -= 1;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// The regex of a `pattern` operand (anchored at both ends for a full match), with
/// TensorFlow's error for one RE2 cannot parse.
fn regex_operand(t: &Tensor, full: bool) -> KResult<regex::bytes::Regex> {
    let pattern =
        String::from_utf8(scalar_bytes(t, "pattern")?).map_err(|_| KernelError::invalid("pattern is not UTF-8"))?;
    let source = if full { format!("\\A(?:{})\\z", re2_classes(&pattern)) } else { re2_classes(&pattern) };
    regex::bytes::Regex::new(&source).map_err(|e| {
        let why = e.to_string();
        let why = why.lines().last().unwrap_or("").trim().trim_start_matches("error: ");
        KernelError::invalid(format!("Invalid pattern: {pattern}, error: {why}"))
    })
}

/// `Tensor::SummarizeValue(max_entries)` with `print_v2 = false` (the V1 `Print` op): the
/// first `max_entries` elements in row-major order, nested in brackets per dimension, `...`
/// where the listing stops.
pub(crate) fn summarize_value_v1(t: &Tensor, max_entries: i64) -> Vec<u8> {
    let n = t.num_elements();
    let limit = if max_entries < 0 { n } else { (max_entries as usize).min(n) };
    if irregular(t) {
        return summarize_value(t, max_entries);
    }
    let mut out = Vec::new();
    if t.shape.is_empty() {
        if limit > 0 {
            push_element(t, 0, &mut out, false);
        }
        return out;
    }
    let mut next = 0usize;
    print_dim_v1(t, 0, limit, &mut next, &mut out);
    if n > limit {
        out.extend_from_slice(b"...");
    }
    out
}

/// TensorFlow's `PrintOneDim`.
fn print_dim_v1(t: &Tensor, dim: usize, limit: usize, next: &mut usize, out: &mut Vec<u8>) {
    if *next >= limit {
        return;
    }
    let count = t.shape[dim];
    if dim == t.shape.len() - 1 {
        for i in 0..count {
            if *next >= limit {
                if dim != 0 {
                    out.extend_from_slice(b"...");
                }
                return;
            }
            if i > 0 {
                out.push(b' ');
            }
            push_element(t, *next, out, false);
            *next += 1;
        }
        return;
    }
    for _ in 0..count {
        let opened = *next < limit;
        if opened {
            out.push(b'[');
        }
        print_dim_v1(t, dim + 1, limit, next, out);
        if *next < limit || opened {
            out.push(b']');
        }
    }
}

// ---------------------------------------------------------------- StaticRegexReplace

/// RE2's rewrite string (`\0`..`\9` name groups, `\\` is a backslash) as a `regex`
/// replacement (`${N}`, `$$`).
fn rewrite_from_re2(rewrite: &[u8], groups: usize) -> KResult<Vec<u8>> {
    let mut out = Vec::with_capacity(rewrite.len());
    let mut i = 0;
    let text = || String::from_utf8_lossy(rewrite).into_owned();
    while i < rewrite.len() {
        match rewrite[i] {
            b'\\' => match rewrite.get(i + 1) {
                Some(&d) if d.is_ascii_digit() => {
                    let g = (d - b'0') as usize;
                    if g >= groups {
                        return Err(KernelError::invalid(format!(
                            "Invalid rewrite pattern: {}: requests group {g} but the pattern has {} groups",
                            text(),
                            groups - 1
                        )));
                    }
                    out.extend_from_slice(format!("${{{g}}}").as_bytes());
                    i += 2;
                }
                Some(b'\\') => {
                    out.push(b'\\');
                    i += 2;
                }
                _ => return Err(KernelError::invalid(format!("Invalid rewrite pattern: {}", text()))),
            },
            b'$' => {
                out.extend_from_slice(b"$$");
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------- Add

/// `Add` of strings (`tf.add`, `+` on string tensors): concatenation, broadcasting.
fn string_add(a: &Tensor, b: &Tensor) -> KResult<Tensor> {
    let (x, y) = (strings(a, "x")?, strings(b, "y")?);
    let out_shape = broadcast_shape(&a.shape, &b.shape)?;
    budget(DType::String, &out_shape)?;
    let (sa, sb) = (bcast_strides(&a.shape, &out_shape), bcast_strides(&b.shape, &out_shape));
    let mut out = Vec::with_capacity(out_shape.iter().product());
    for_each_bcast2(&out_shape, &sa, &sb, |i, j| out.push([&x[i][..], &y[j][..]].concat()));
    Tensor::from_strings(out_shape, out).map_err(|e| KernelError::invalid(e.to_string()))
}

/// `StringNGrams` (`tf.strings.ngrams`, `TextVectorization(ngrams=…)`): for each row of a
/// ragged string tensor and each width `w` in turn, the row's `w`-grams with up to
/// `min(pad_width, w - 1)` pads at each end (`pad_width < 0`: `w - 1`), joined by
/// `separator`. With `preserve_short_sequences`, a non-empty row that yields no n-gram at
/// all yields one of its whole sequence.
struct NGrams {
    separator: Vec<u8>,
    widths: Vec<i64>,
    left_pad: Vec<u8>,
    right_pad: Vec<u8>,
    pad_width: i64,
    preserve_short: bool,
}

impl NGrams {
    fn pad(&self, width: i64) -> i64 {
        (if self.pad_width < 0 { width - 1 } else { self.pad_width }).min(width - 1)
    }

    fn count(&self, len: i64, width: i64) -> i64 {
        (len + 2 * self.pad(width) - width + 1).max(0)
    }

    /// The `count` n-grams of `width` over `row`, appended to `out`.
    fn grams(&self, row: &[Vec<u8>], width: i64, count: i64, out: &mut Vec<Vec<u8>>) {
        let pad = self.pad(width);
        for i in 0..count {
            let left = (pad - i).max(0);
            let right = (pad - (count - (i + 1))).max(0);
            let tokens = width - (left + right);
            let start = if left > 0 { 0 } else { i - pad };
            let mut parts: Vec<&[u8]> = Vec::with_capacity(width as usize);
            parts.extend(std::iter::repeat_n(&self.left_pad[..], left as usize));
            parts.extend(row[start as usize..(start + tokens) as usize].iter().map(Vec::as_slice));
            parts.extend(std::iter::repeat_n(&self.right_pad[..], right as usize));
            out.push(parts.join(&self.separator[..]));
        }
    }

    fn run(&self, data: &Tensor, splits: &Tensor) -> KResult<Outputs> {
        let TensorData::Str(tokens) = &data.data else { return Err(KernelError::DType(data.dtype)) };
        if data.rank() != 1 || splits.rank() != 1 {
            return Err(KernelError::invalid("data and data_splits must be vectors"));
        }
        let sp = super::int_values(splits, "data_splits")?;
        let ok = sp.is_empty()
            || (sp[0] == 0
                && sp.windows(2).all(|p| p[0] <= p[1])
                && sp.last().is_some_and(|&e| e as usize == tokens.len()));
        if !ok {
            return Err(KernelError::invalid(format!(
                "Invalid split value: splits must start at 0, not decrease and end at the data size {}, got {sp:?}",
                tokens.len()
            )));
        }
        let mut out: Vec<Vec<u8>> = Vec::new();
        let mut out_splits: Vec<i64> = vec![0];
        for r in sp.windows(2) {
            let row = &tokens[r[0] as usize..r[1] as usize];
            let len = row.len() as i64;
            let before = out.len();
            for &w in &self.widths {
                let n = self.count(len, w);
                budget(DType::String, &[out.len() + n as usize])?;
                self.grams(row, w, n, &mut out);
            }
            if self.preserve_short && out.len() == before && len > 0 && !self.widths.is_empty() {
                // One n-gram of the whole row, as wide as the row and its pads.
                let w = len + 2 * self.pad_width;
                self.grams(row, w, 1, &mut out);
            }
            out_splits.push(out.len() as i64);
        }
        if sp.is_empty() {
            out_splits.clear();
        }
        let n = out.len();
        let splits_out = super::int_tensor(splits.dtype, vec![out_splits.len()], out_splits)?;
        Ok(Outputs::from_vec(vec![str_tensor(vec![n], out), splits_out]))
    }
}

/// TensorFlow's web-safe base64 alphabet (`-` and `_` for `+` and `/`).
const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
/// The standard alphabet (RFC 4648 §4): TensorFlow Serving's `{"b64": …}` JSON values.
pub(crate) const BASE64_STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// `EncodeBase64`: web-safe base64, padded with `=` only when `pad`.
fn base64_encode(s: &[u8], pad: bool) -> Vec<u8> {
    base64_encode_in(BASE64, s, pad)
}

/// `s` in base64 over `alphabet`, padded with `=` only when `pad`.
pub(crate) fn base64_encode_in(alphabet: &[u8; 64], s: &[u8], pad: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len().div_ceil(3) * 4);
    for chunk in s.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        let digits = chunk.len() + 1;
        for k in 0..4 {
            if k < digits {
                out.push(alphabet[(n >> (18 - 6 * k) & 63) as usize]);
            } else if pad {
                out.push(b'=');
            }
        }
    }
    out
}

/// `DecodeBase64`: web-safe base64, with or without `=` padding (TensorFlow's
/// `Base64Decode`: any other character, or a length that leaves one lone digit, is an error).
fn base64_decode(s: &[u8]) -> KResult<Vec<u8>> {
    base64_decode_in(BASE64, s)
}

/// Base64 over `alphabet`, with or without `=` padding, by `DecodeBase64`'s rules.
pub(crate) fn base64_decode_in(alphabet: &[u8; 64], s: &[u8]) -> KResult<Vec<u8>> {
    let text = || String::from_utf8_lossy(s).into_owned();
    let body = s.strip_suffix(b"==").or_else(|| s.strip_suffix(b"=")).unwrap_or(s);
    if body.len() % 4 == 1 || (body.len() != s.len() && !s.len().is_multiple_of(4)) {
        return Err(KernelError::invalid(format!("Invalid base64 length {} of {:?}", s.len(), text())));
    }
    let digit = |c: u8| {
        alphabet
            .iter()
            .position(|&d| d == c)
            .map(|p| p as u32)
            .ok_or_else(|| KernelError::invalid(format!("Invalid character found in base64: {:?}", text())))
    };
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    for chunk in body.chunks(4) {
        let mut n = 0u32;
        for (k, &c) in chunk.iter().enumerate() {
            n |= digit(c)? << (18 - 6 * k);
        }
        out.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8, n as u8][..chunk.len() - 1]);
    }
    Ok(out)
}

/// RE2's `GlobalReplace`, which `RegexReplace` runs: every leftmost match from where the
/// last ended is rewritten, except an empty match right at the end of the last one, past which
/// the scan copies one whole UTF-8 character (one byte where the input is not UTF-8) — so an
/// empty-matching pattern (`x*`) never lands between the bytes of a character, as the byte
/// regex's own `replace_all`, stepping one byte, does.
fn global_replace(re: &regex::bytes::Regex, s: &[u8], rewrite: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let (mut p, mut last_end, mut count) = (0usize, None, 0usize);
    while p <= s.len() {
        let Some(caps) = re.captures_at(s, p) else { break };
        let m = caps.get(0).expect("group 0 is the match");
        out.extend_from_slice(&s[p..m.start()]);
        if m.is_empty() && last_end == Some(m.start()) {
            let width = match std::str::from_utf8(&s[m.start()..s.len().min(m.start() + 4)]) {
                Ok(t) => t.chars().next().map_or(1, char::len_utf8),
                Err(e) if e.valid_up_to() > 0 => std::str::from_utf8(&s[m.start()..m.start() + e.valid_up_to()])
                    .ok()
                    .and_then(|t| t.chars().next())
                    .map_or(1, char::len_utf8),
                Err(_) => 1,
            };
            let next = (m.start() + width).min(s.len());
            out.extend_from_slice(&s[m.start()..next]);
            p = m.start() + width;
            continue;
        }
        caps.expand(rewrite, &mut out);
        p = m.end();
        last_end = Some(p);
        count += 1;
    }
    if count == 0 {
        return s.to_vec();
    }
    if p < s.len() {
        out.extend_from_slice(&s[p..]);
    }
    out
}

#[cfg(test)]
#[cfg(test)]
#[allow(clippy::excessive_precision, clippy::approx_constant)] // TensorFlow's printed values
mod tests {
    #[test]
    fn base64_is_web_safe_and_round_trips() {
        assert_eq!(base64_encode(b"\xfb\xff\x01ab", false), b"-_8BYWI");
        assert_eq!(base64_encode(b"ab", true), b"YWI=");
        for s in [&b""[..], b"a", b"ab", b"abc", b"\x00\xff\xfe\xfd"] {
            assert_eq!(base64_decode(&base64_encode(s, false)).unwrap(), s);
            assert_eq!(base64_decode(&base64_encode(s, true)).unwrap(), s);
        }
        assert!(base64_decode(b"YW+=").is_err());
        assert!(base64_decode(b"Y").is_err());
    }

    // Expected strings and messages below are TensorFlow 2.21's.

    /// `tf.strings.regex_replace(s, "x*", "-")` (sweep 70): an empty match never splits a
    /// UTF-8 character, and none is taken right where the last match ended (RE2's rule).
    #[test]
    fn empty_matches_replace_between_characters() {
        let input = ["x  y\tz", "été", "axxb", "", "  \u{3000}wide\u{3000} "];
        let want = ["- - -y-\t-z-", "-é-t-é-", "-a-b-", "-", "- - -\u{3000}-w-i-d-e-\u{3000}- -"];
        let attrs = [("pattern", AttrValue::S(b"x*".to_vec())), ("rewrite", AttrValue::S(b"-".to_vec()))];
        let r = prepare(&node("StaticRegexReplace", &attrs)).unwrap().unwrap();
        let out = r([s(&input)].into_iter().collect()).unwrap();
        assert_eq!(out[0], s(&want));
        let dynamic = prepare(&node("RegexReplace", &[])).unwrap().unwrap();
        let scalar = |x: &str| Tensor::from_strings(vec![], vec![x.as_bytes().to_vec()]).unwrap();
        let out = dynamic([s(&input), scalar("x*"), scalar("-")].into_iter().collect());
        assert_eq!(out.unwrap()[0], s(&want));
        // Not UTF-8: one byte at a time.
        assert_eq!(global_replace(&regex::bytes::Regex::new("x*").unwrap(), b"\xffa", b"-"), b"-\xff-a-");
    }

    #[test]
    fn v1_print_summaries_and_pass_through_match_tensorflow() {
        let x = Tensor::from_f32(vec![2, 5], (0..10).map(|i| i as f32 / 4.0).collect()).unwrap();
        let y = Tensor::from_i32(vec![2, 2], vec![1, 2, 3, 4]).unwrap();
        let text = |t: &Tensor, k: i64| String::from_utf8(summarize_value_v1(t, k)).unwrap();
        // tf.compat.v1.Print(x, [x, y, 3.5, ["a", "b"]], summarize=7) logged
        // "[[0 0.25 0.5 0.75 1][1.25 1.5...]...][[1 2][3 4]][3.5][a b]"; the default 3 gave
        // "[[0 0.25 0.5...]...][[1 2][3...]...]".
        assert_eq!(text(&x, 7), "[0 0.25 0.5 0.75 1][1.25 1.5...]...");
        assert_eq!(text(&y, 7), "[1 2][3 4]");
        assert_eq!(text(&Tensor::scalar_f32(3.5), 7), "3.5");
        assert_eq!(text(&s(&["a", "b"]), 7), "a b");
        assert_eq!(text(&x, 3), "[0 0.25 0.5...]...");
        assert_eq!(text(&y, 3), "[1 2][3...]...");
        let p = prepare(&node("Print", &[("message", AttrValue::S(b"vals: ".to_vec()))])).unwrap().unwrap();
        let out = p([x.clone(), y].into_iter().collect()).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0], x);
    }

    #[test]
    fn regex_ops_with_operand_patterns_strip_and_v1_split_match_tensorflow() {
        let input = s(&["Hello  World", " a,b ,c ", "", "x"]);
        let scalar = |v: &str| Tensor::from_strings(vec![], vec![v.as_bytes().to_vec()]).unwrap();
        let k = prepare(&node("RegexReplace", &[])).unwrap().unwrap();
        let out = k([input.clone(), scalar("[aeiou]+"), scalar("<\\0>")].into_iter().collect()).unwrap();
        assert_eq!(texts(&out[0]), ["H<e>ll<o>  W<o>rld", " <a>,b ,c ", "", "x"]);
        let once = prepare(&node("RegexReplace", &[("replace_global", AttrValue::B(false))])).unwrap().unwrap();
        let out = once([input.clone(), scalar("o"), scalar("0")].into_iter().collect()).unwrap();
        assert_eq!(texts(&out[0]), ["Hell0  World", " a,b ,c ", "", "x"]);
        let e = k([input.clone(), scalar("("), scalar("x")].into_iter().collect()).unwrap_err();
        assert!(e.to_string().starts_with("Invalid pattern: (, error: "), "{e}");
        let m = prepare(&node("RegexFullMatch", &[])).unwrap().unwrap();
        let out = m([input, scalar("[A-Za-z ]+")].into_iter().collect()).unwrap();
        assert_eq!(out[0].as_bool().unwrap(), &[true, false, false, true]);

        let strip = prepare(&node("StringStrip", &[])).unwrap().unwrap();
        let out = strip([s(&["  a b \t\n", "x", " \x0b\x0cy\r "])].into_iter().collect()).unwrap();
        assert_eq!(texts(&out[0]), ["a b", "x", "y"]);

        let split = |skip: bool, v: &[&str], d: &str| {
            let k = prepare(&node("StringSplit", &[("skip_empty", AttrValue::B(skip))])).unwrap().unwrap();
            k([s(v), scalar(d)].into_iter().collect()).unwrap()
        };
        let out = split(true, &["a b  c", "", "d,e f"], " ,");
        assert_eq!(out[0].as_i64().unwrap(), &[0, 0, 0, 1, 0, 2, 2, 0, 2, 1, 2, 2]);
        assert_eq!(texts(&out[1]), ["a", "b", "c", "d", "e", "f"]);
        assert_eq!(out[2].as_i64().unwrap(), &[3, 3]);
        let out = split(false, &["a b  c", "", "d,e f"], " ,");
        assert_eq!(out[0].as_i64().unwrap(), &[0, 0, 0, 1, 0, 2, 0, 3, 2, 0, 2, 1, 2, 2]);
        assert_eq!(texts(&out[1]), ["a", "b", "", "c", "d", "e", "f"]);
        assert_eq!(out[2].as_i64().unwrap(), &[3, 4]);
        let out = split(true, &["ab", "c"], "");
        assert_eq!(out[0].as_i64().unwrap(), &[0, 0, 0, 1, 1, 0]);
        assert_eq!(out[2].as_i64().unwrap(), &[2, 2]);
    }

    #[test]
    fn fingerprint64_is_tensorflows() {
        // tf.fingerprint(strings, method="farmhash64") on TensorFlow 2.21, read little-endian:
        // every length class of the hash (0-3, 4-7, 8-16, 17-32, 33-64, the 64-byte loop).
        let want: &[(usize, u64)] = &[
            (0, 11160318154034397263),
            (1, 2306457298695425288),
            (2, 17486552014915984738),
            (3, 3523311821169223142),
            (4, 473593037329527107),
            (7, 1569742213834331321),
            (8, 13923189644216589485),
            (9, 3360238077910378414),
            (15, 6541703650042772514),
            (16, 3153366072664288190),
            (17, 1911055825576415187),
            (31, 6620607282915852483),
            (32, 4325841828167543377),
            (33, 7329471301467199501),
            (63, 15382397934360557508),
            (64, 13501884776936417979),
            (65, 94290204895048236),
            (127, 14088157295298043744),
            (128, 12103402985858112929),
            (129, 3649461333179736673),
            (200, 300769320742858783),
        ];
        for (i, &(n, fp)) in want.iter().enumerate() {
            let s: Vec<u8> = (0..n).map(|j| ((i * 7 + j * 13 + 1) % 256) as u8).collect();
            assert_eq!(fingerprint64(&s), fp, "length {n}");
        }
        // tf.strings.to_hash_bucket_fast(["hello world"], 1000) == [11].
        let k = prepare(&node("StringToHashBucketFast", &[("num_buckets", AttrValue::I(1000))])).unwrap().unwrap();
        let out =
            k([Tensor::from_strings(vec![1], vec![b"hello world".to_vec()]).unwrap()].into_iter().collect()).unwrap();
        assert_eq!(out[0].as_i64().unwrap(), &[11]);
    }

    /// `StringToHashBucketStrong` (SipHash-2-4 under two keys) and the V1 `StringToHashBucket`
    /// (TensorFlow's `Hash64`): buckets from TensorFlow 2.21, and its error for a bad key.
    #[test]
    fn strong_and_v1_hash_buckets_match_tensorflow() {
        let words: Vec<Vec<u8>> = ["", "a", "hello world", "0123456789abcdefg", "the quick brown fox jumps"]
            .map(|w| w.as_bytes().to_vec())
            .into();
        let input = Tensor::from_strings(vec![5], words).unwrap();
        let run = |op: &str, buckets: i64, key: Option<&[i64]>| {
            let mut attrs = vec![("num_buckets", AttrValue::I(buckets))];
            if let Some(k) = key {
                attrs.push(("key", AttrValue::List(autoclust_graph::ListValue::I(k.to_vec()))));
            }
            let k = prepare(&node(op, &attrs))?.unwrap();
            k([input.clone()].into_iter().collect()).map(|o| o[0].as_i64().unwrap().to_vec())
        };
        let big = (1i64 << 31) - 1;
        let strong = run("StringToHashBucketStrong", big, Some(&[1, 2])).unwrap();
        assert_eq!(strong, [1847395816, 1705284436, 1593938532, 747704946, 1181442137]);
        let strong = run("StringToHashBucketStrong", 10, Some(&[0xDEADBEEF, 42])).unwrap();
        assert_eq!(strong, [9, 9, 8, 8, 3]);
        assert_eq!(
            run("StringToHashBucket", big, None).unwrap(),
            [478987903, 2048337276, 812511647, 610008252, 1163962444]
        );
        assert_eq!(run("StringToHashBucket", 7, None).unwrap(), [3, 4, 0, 1, 4]);
        let e = run("StringToHashBucketStrong", 10, Some(&[1, 2, 3])).unwrap_err().to_string();
        assert!(e.contains("Key must have 2 elements"), "{e}");
    }

    use super::*;

    fn node(op: &str, attrs: &[(&str, AttrValue)]) -> Node {
        Node::unconnected("n", op, attrs)
    }

    fn s(v: &[&str]) -> Tensor {
        Tensor::from_strings(vec![v.len()], v.iter().map(|x| x.as_bytes().to_vec()).collect()).unwrap()
    }

    fn texts(t: &Tensor) -> Vec<String> {
        match &t.data {
            TensorData::Str(v) => v.iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect(),
            _ => panic!("not strings"),
        }
    }

    fn run(n: &Node, inp: &[Tensor]) -> KResult<Vec<Tensor>> {
        let f = prepare(n)?.expect("a string kernel");
        Ok(f(inp.iter().cloned().collect())?.into_vec())
    }

    /// TensorFlow 2.21's `tf.strings.unsorted_segment_join`: `['a','','b','c','d']` by
    /// `[0,0,0,2,2]` into 3 with "," is `['a,,b', '', 'c,d']`; `['','a','x']` all into
    /// segment 1 with "-" is `['', 'a-x']` (an empty first string leaves no separator);
    /// a `[3, 2]` input by `[1,0,1]` is `[['c','d'], ['a:e','b:f']]`.
    #[test]
    fn unsorted_segment_join_matches_tensorflow() {
        let join = |sep: &str, inp: Tensor, ids: &[i32], n: i32| {
            let nd = node("UnsortedSegmentJoin", &[("separator", AttrValue::S(sep.as_bytes().to_vec()))]);
            let ids = Tensor::from_i32(vec![ids.len()], ids.to_vec()).unwrap();
            run(&nd, &[inp, ids, Tensor::scalar_i32(n)]).map(|mut v| v.remove(0))
        };
        assert_eq!(texts(&join(",", s(&["a", "", "b", "c", "d"]), &[0, 0, 0, 2, 2], 3).unwrap()), ["a,,b", "", "c,d"]);
        assert_eq!(texts(&join("-", s(&["", "a", "x"]), &[1, 1, 1], 2).unwrap()), ["", "a-x"]);
        let m = Tensor::from_strings(
            vec![3, 2],
            ["a", "b", "c", "d", "e", "f"].iter().map(|x| x.as_bytes().to_vec()).collect(),
        )
        .unwrap();
        let out = join(":", m, &[1, 0, 1], 2).unwrap();
        assert_eq!(
            (out.shape.clone(), texts(&out)),
            (vec![2, 2], vec!["c".into(), "d".into(), "a:e".into(), "b:f".into()])
        );
        let e = join(",", s(&["a"]), &[2], 2).unwrap_err().to_string();
        assert!(e.contains("segment_ids are not allowed to exceed num_segments"), "{e}");
    }

    fn as_string(x: Tensor, attrs: &[(&str, AttrValue)]) -> Vec<String> {
        let mut a = vec![("T", AttrValue::Type(x.dtype))];
        a.extend(attrs.iter().cloned());
        texts(&run(&node("AsString", &a), &[x]).unwrap()[0])
    }

    #[test]
    fn string_lower_and_upper_are_tensorflows() {
        // tf.strings.lower/upper on TensorFlow 2.21: ASCII only by default, Unicode with utf-8.
        let x = s(&["ÄBC Def", "ÉCOLE", "mIxEd 123"]);
        let case = |op: &str, encoding: &str| {
            texts(&run(&node(op, &[("encoding", AttrValue::S(encoding.into()))]), std::slice::from_ref(&x)).unwrap()[0])
        };
        assert_eq!(case("StringLower", ""), ["Äbc def", "École", "mixed 123"]);
        assert_eq!(case("StringLower", "utf-8"), ["äbc def", "école", "mixed 123"]);
        assert_eq!(case("StringUpper", ""), ["ÄBC DEF", "ÉCOLE", "MIXED 123"]);
        assert_eq!(case("StringUpper", "utf-8"), ["ÄBC DEF", "ÉCOLE", "MIXED 123"]);
        let bad = run(&node("StringLower", &[("encoding", AttrValue::S(b"latin-1".to_vec()))]), &[x]);
        assert!(bad.unwrap_err().to_string().contains("latin-1"));
    }

    #[test]
    fn static_regex_full_match_matches_the_whole_string() {
        // tf.strings.regex_full_match on TensorFlow 2.21.
        let y = s(&["ab", "abc1", "", "xyz", "a"]);
        let full = |pattern: &str| {
            let out = run(
                &node("StaticRegexFullMatch", &[("pattern", AttrValue::S(pattern.into()))]),
                std::slice::from_ref(&y),
            );
            out.unwrap()[0].as_bool().unwrap().to_vec()
        };
        assert_eq!(full("a|ab"), [true, false, false, false, true]);
        assert_eq!(full("[a-z]+"), [true, false, false, true, true]);
        assert_eq!(full(""), [false, false, true, false, false]);
        let bad = run(&node("StaticRegexFullMatch", &[("pattern", AttrValue::S(b"(".to_vec()))]), &[y]);
        assert!(bad.is_err());
    }

    #[test]
    fn as_string_follows_printf() {
        // Expected values printed by TensorFlow 2.21.
        let x = Tensor::from_f32(vec![6], vec![1.5, -2.25, 1e10, 1.2345678e-7, f32::NAN, f32::NEG_INFINITY]).unwrap();
        assert_eq!(
            as_string(x.clone(), &[]),
            ["1.500000", "-2.250000", "10000000000.000000", "0.000000", "nan", "-inf"]
        );
        assert_eq!(
            as_string(x.clone(), &[("shortest", AttrValue::B(true))]),
            ["1.5", "-2.25", "1e+10", "1.23457e-07", "nan", "-inf"]
        );
        assert_eq!(
            as_string(x.clone(), &[("scientific", AttrValue::B(true)), ("precision", AttrValue::I(2))]),
            ["1.50e+00", "-2.25e+00", "1.00e+10", "1.23e-07", "nan", "-inf"]
        );
        assert_eq!(
            as_string(x.clone(), &[("width", AttrValue::I(12)), ("fill", AttrValue::S(b"0".to_vec()))]),
            ["00001.500000", "-0002.250000", "10000000000.000000", "00000.000000", "         nan", "        -inf"]
        );
        assert_eq!(
            as_string(x, &[("width", AttrValue::I(5)), ("fill", AttrValue::S(b"-".to_vec()))]),
            ["1.500000", "-2.250000", "10000000000.000000", "0.000000", "nan  ", "-inf "]
        );
        let i = Tensor::from_i32(vec![3], vec![0, -5, 123456]).unwrap();
        assert_eq!(
            as_string(i.clone(), &[("width", AttrValue::I(6)), ("fill", AttrValue::S(b"0".to_vec()))]),
            ["000000", "-00005", "123456"]
        );
        let e = run(&node("AsString", &[("T", AttrValue::Type(DType::Int32)), ("precision", AttrValue::I(2))]), &[i]);
        assert_eq!(e.unwrap_err().to_string(), "precision not supported for datatype int32");
        let b = Tensor::from_bool(vec![2], vec![true, false]).unwrap();
        assert_eq!(as_string(b, &[]), ["true", "false"]);
    }

    /// `AsString` on the narrow and unsigned integers, half floats, complex numbers and strings
    /// ("Cannot encode input of type int8" before, sweep 65). Expected values printed by
    /// TensorFlow 2.21 (`tf.raw_ops.AsString` in a tf.compat.v1 session).
    #[test]
    fn as_string_covers_tensorflows_types() {
        let raw = |d: DType, v: &[i128]| {
            let w = d.size_of().unwrap();
            Tensor::from_raw(d, vec![v.len()], v.iter().flat_map(|x| x.to_le_bytes()[..w].to_vec()).collect()).unwrap()
        };
        let w8 = |fill: &str| [("width", AttrValue::I(8)), ("fill", AttrValue::S(fill.as_bytes().to_vec()))];
        let i8s = raw(DType::Int8, &[5, -7, 127, -128]);
        assert_eq!(as_string(i8s.clone(), &[]), ["5", "-7", "127", "-128"]);
        assert_eq!(as_string(i8s.clone(), &w8("0")), ["00000005", "-0000007", "00000127", "-0000128"]);
        assert_eq!(as_string(i8s, &w8("+")), ["      +5", "      -7", "    +127", "    -128"]);
        let i16s = raw(DType::Int16, &[5, -7, 32767, -32768]);
        assert_eq!(as_string(i16s, &w8("-")), ["5       ", "-7      ", "32767   ", "-32768  "]);
        let u8s = raw(DType::UInt8, &[5, 250, 0, 255]);
        assert_eq!(as_string(u8s.clone(), &[]), ["5", "250", "0", "255"]);
        // `%u`: the sign fills print nothing.
        assert_eq!(as_string(u8s.clone(), &w8("+")), ["       5", "     250", "       0", "     255"]);
        assert_eq!(as_string(u8s.clone(), &w8(" ")), ["       5", "     250", "       0", "     255"]);
        assert_eq!(as_string(u8s, &w8("0")), ["00000005", "00000250", "00000000", "00000255"]);
        let u16s = raw(DType::UInt16, &[5, 65535, 0, 300]);
        assert_eq!(as_string(u16s, &w8("-")), ["5       ", "65535   ", "0       ", "300     "]);
        let u32s = raw(DType::UInt32, &[5, 4294967295, 0, 2147483648]);
        assert_eq!(as_string(u32s, &w8("0")), ["00000005", "4294967295", "00000000", "2147483648"]);
        let u64s = raw(DType::UInt64, &[5, u64::MAX as i128, 1 << 63, 0]);
        assert_eq!(as_string(u64s.clone(), &[]), ["5", "18446744073709551615", "9223372036854775808", "0"]);
        assert_eq!(as_string(u64s, &w8("")), ["       5", "18446744073709551615", "9223372036854775808", "       0"]);
        let e = run(&node("AsString", &[("T", AttrValue::Type(DType::UInt8)), ("precision", AttrValue::I(2))]), &[]);
        assert_eq!(e.err().unwrap().to_string(), "precision not supported for datatype uint8");

        // Complex numbers: `(%f,%f)`, every attribute applying to each part.
        let c64 = Tensor::from_raw(
            DType::Complex64,
            vec![2],
            [1.5f32, 2.0, -0.0, -1.0].iter().flat_map(|x| x.to_le_bytes()).collect(),
        )
        .unwrap();
        assert_eq!(as_string(c64.clone(), &[]), ["(1.500000,2.000000)", "(-0.000000,-1.000000)"]);
        assert_eq!(
            as_string(c64.clone(), &[("width", AttrValue::I(12)), ("fill", AttrValue::S(b"0".to_vec()))]),
            ["(00001.500000,00002.000000)", "(-0000.000000,-0001.000000)"]
        );
        assert_eq!(as_string(c64, &[("shortest", AttrValue::B(true))]), ["(1.5,2)", "(-0,-1)"]);
        let c128 =
            Tensor::from_raw(DType::Complex128, vec![1], [1.5f64, 2.0].iter().flat_map(|x| x.to_le_bytes()).collect())
                .unwrap();
        assert_eq!(as_string(c128, &[("precision", AttrValue::I(2))]), ["(1.50,2.00)"]);

        // Strings: unchanged without a width; `%<width>.<precision>s` with one.
        let strs = s(&["abcdef", "b"]);
        assert_eq!(as_string(strs.clone(), &[("precision", AttrValue::I(2))]), ["abcdef", "b"]);
        assert_eq!(
            as_string(strs.clone(), &[("width", AttrValue::I(4)), ("precision", AttrValue::I(2))]),
            ["  ab", "   b"]
        );
        assert_eq!(
            as_string(strs.clone(), &[("width", AttrValue::I(8)), ("fill", AttrValue::S(b"0".to_vec()))]),
            ["  abcdef", "       b"]
        );
        assert_eq!(
            as_string(strs, &[("width", AttrValue::I(8)), ("fill", AttrValue::S(b"-".to_vec()))]),
            ["abcdef  ", "b       "]
        );

        // float16 and bfloat16 print the float value (through the float32 kernel).
        for d in [DType::Float16, DType::BFloat16] {
            let h = crate::kernels::half::narrow(&Tensor::from_f32(vec![2], vec![1.5, -7.25]).unwrap(), d).unwrap();
            let n = node("AsString", &[("T", AttrValue::Type(d)), ("width", AttrValue::I(12))]);
            let out = crate::kernels::compute(&n, &[h]).unwrap();
            assert_eq!(texts(&out[0]), ["    1.500000", "   -7.250000"], "{d}");
        }
        let tenth =
            crate::kernels::half::narrow(&Tensor::from_f32(vec![1], vec![0.1]).unwrap(), DType::Float16).unwrap();
        let n = node("AsString", &[("T", AttrValue::Type(DType::Float16))]);
        assert_eq!(texts(&crate::kernels::compute(&n, &[tenth]).unwrap()[0]), ["0.099976"]);
    }

    #[test]
    fn string_to_number_parses_and_names_bad_strings() {
        let n = node("StringToNumber", &[("out_type", AttrValue::Type(DType::Float32))]);
        let out = run(&n, &[s(&["1.5", " 2", "1e3", "0x10", "3.", "+4", "inf"])]).unwrap();
        assert_eq!(out[0].as_f32().unwrap(), &[1.5, 2.0, 1000.0, 16.0, 3.0, 4.0, f32::INFINITY]);
        let e = run(&n, &[s(&["abc"])]).unwrap_err();
        assert_eq!(e.to_string(), "StringToNumberOp could not correctly convert string: abc");
        let o = run(&n, &[s(&["infinity", "0X1A", "0x1p3", "-0x1.8p-1"])]).unwrap();
        assert_eq!(o[0].as_f32().unwrap(), &[f32::INFINITY, 26.0, 8.0, -0.75]);
        assert_eq!(run(&n, &[s(&["-INF", "NaN"])]).unwrap()[0].as_f32().unwrap()[0], f32::NEG_INFINITY);
        let n = node("StringToNumber", &[("out_type", AttrValue::Type(DType::Int32))]);
        assert!(run(&n, &[s(&["1.5"])]).is_err());
        assert!(run(&n, &[s(&["99999999999"])]).is_err());
        assert_eq!(run(&n, &[s(&["-7", " 4"])]).unwrap()[0].as_i32().unwrap(), &[-7, 4]);
    }

    fn summary(t: &Tensor, n: i64) -> String {
        String::from_utf8(summarize_value(t, n)).unwrap()
    }

    #[test]
    fn summaries_match_tensorflow() {
        let f: Vec<f32> = (0..30).map(|i| i as f32 * 0.5 - 3.25).collect();
        let t = Tensor::from_f32(vec![5, 6], f).unwrap();
        assert_eq!(
            summary(&t, 2),
            "[[-3.25 -2.75 ... -1.25 -0.75]\n [-0.25 0.25 ... 1.75 2.25]\n ...\n [5.75 6.25 ... 7.75 8.25]\n [8.75 \
             9.25 ... 10.75 11.25]]"
        );
        let t = Tensor::from_i32(vec![2, 3, 4], (0..24).collect()).unwrap();
        assert_eq!(summary(&t, 1), "[[[0 ... 3]\n  ...\n  [8 ... 11]]\n\n [[12 ... 15]\n  ...\n  [20 ... 23]]]");
        let t = Tensor::from_f32(vec![3], vec![1.0 / 3.0, 0.1, 1e10]).unwrap();
        assert_eq!(summary(&t, 3), "[0.333333343 0.1 1e+10]");
        let t = Tensor::from_f64(vec![3], vec![1.0 / 3.0, 1e10, 1e-7]).unwrap();
        assert_eq!(summary(&t, 3), "[0.33333333333333331 10000000000 1e-07]");
        assert_eq!(summary(&s(&["a\"b\n\\'", "é\x01\x7f"]), 3), "[\"a\\\"b\\n\\\\\\'\" \"é\\001\\177\"]");
        assert_eq!(summary(&Tensor::zeros(DType::Float32, vec![2, 0]).unwrap(), 3), "[\n ...]");
        assert_eq!(summary(&Tensor::zeros(DType::Float32, vec![0]).unwrap(), 3), "[]");
        assert_eq!(summary(&Tensor::scalar_i32(3), 3), "3");
        // Narrow and unsigned integers print as numbers (TensorFlow 2.21's `tf.print`).
        let raw = |d: DType, v: &[i64]| {
            let w = d.size_of().unwrap();
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()[..w].to_vec()).collect();
            Tensor::from_raw(d, vec![2, 3], bytes).unwrap()
        };
        assert_eq!(summary(&raw(DType::Int8, &[1, -2, 100, -56, 3, -7]), 3), "[[1 -2 100]\n [-56 3 -7]]");
        assert_eq!(summary(&raw(DType::UInt8, &[1, 254, 100, 200, 3, 249]), 3), "[[1 254 100]\n [200 3 249]]");
        assert_eq!(summary(&raw(DType::UInt16, &[1, 65534, 100, 200, 3, 65529]), 3), "[[1 65534 100]\n [200 3 65529]]");
        assert_eq!(
            summary(&raw(DType::UInt64, &[1, -2, 100, 200, 3, -7]), 3),
            "[[1 18446744073709551614 100]\n [200 3 18446744073709551609]]"
        );
        let as_i32 = Tensor::from_i32(vec![2, 3], vec![1, -2, 100, 200, 3, -7]).unwrap();
        assert_eq!(
            summarize_value_v1(&raw(DType::Int16, &[1, -2, 100, 200, 3, -7]), 9),
            summarize_value_v1(&as_i32, 9)
        );
    }

    #[test]
    fn split_join_substr_length_regex() {
        let n = node("StringSplitV2", &[]);
        let sep = Tensor::from_strings(vec![], vec![b",".to_vec()]).unwrap();
        let o = run(&n, &[s(&["a,b,,c", "x", ""]), sep]).unwrap();
        assert_eq!(o[0].as_i64().unwrap(), &[0, 0, 0, 1, 0, 2, 0, 3, 1, 0, 2, 0]);
        assert_eq!(texts(&o[1]), ["a", "b", "", "c", "x", ""]);
        assert_eq!(o[2].as_i64().unwrap(), &[3, 4]);
        let n = node("StringSplitV2", &[("maxsplit", AttrValue::I(1))]);
        let o = run(&n, &[s(&[" a  b c "]), Tensor::from_strings(vec![], vec![Vec::new()]).unwrap()]).unwrap();
        assert_eq!(texts(&o[1]), ["a", "b c "]);

        let n = node("StringJoin", &[("separator", AttrValue::S(b"/".to_vec()))]);
        let dash = Tensor::from_strings(vec![], vec![b"-".to_vec()]).unwrap();
        assert_eq!(texts(&run(&n, &[s(&["a", "b"]), dash, s(&["c", "d"])]).unwrap()[0]), ["a/-/c", "b/-/d"]);
        let e = run(&n, &[s(&["a", "b"]), s(&["c", "d", "e"])]).unwrap_err();
        assert_eq!(e.to_string(), "Input shapes do not match: [2] vs. [3]");

        let n = node("Substr", &[]);
        let o = run(&n, &[s(&["hello", "world"]), Tensor::scalar_i32(-3), Tensor::scalar_i32(2)]).unwrap();
        assert_eq!(texts(&o[0]), ["ll", "rl"]);
        let e = run(&n, &[s(&["hello", "ab"]), Tensor::scalar_i32(3), Tensor::scalar_i32(1)]).unwrap_err();
        assert_eq!(e.to_string(), "pos 3 out of range for string b'ab' at index 1");
        let n = node("Substr", &[("unit", AttrValue::S(b"UTF8_CHAR".to_vec()))]);
        let o = run(&n, &[s(&["héllo"]), Tensor::scalar_i32(1), Tensor::scalar_i32(3)]).unwrap();
        assert_eq!(texts(&o[0]), ["éll"]);

        let n = node("StringLength", &[("unit", AttrValue::S(b"UTF8_CHAR".to_vec()))]);
        assert_eq!(run(&n, &[s(&["héllo", ""])]).unwrap()[0].as_i32().unwrap(), &[5, 0]);

        let n = node(
            "StaticRegexReplace",
            &[("pattern", AttrValue::S(b"([a-z])(b)".to_vec())), ("rewrite", AttrValue::S(b"<\\2\\1\\0$>".to_vec()))],
        );
        assert_eq!(texts(&run(&n, &[s(&["aa bb", "xyz"])]).unwrap()[0]), ["aa <bbbb$>", "xyz"]);
        let n = node(
            "StaticRegexReplace",
            &[
                ("pattern", AttrValue::S(b"[ab]".to_vec())),
                ("rewrite", AttrValue::S(b"X".to_vec())),
                ("replace_global", AttrValue::B(false)),
            ],
        );
        assert_eq!(texts(&run(&n, &[s(&["aa bb"])]).unwrap()[0]), ["Xa bb"]);
    }

    /// RE2's ASCII Perl classes (TensorFlow 2.21, `tf.strings.regex_replace` and
    /// `regex_full_match` on `["café", "αβγ", "x٣", "a b\u00a0c"]`): `\w`, `\d`, `\s`, `\b` and
    /// their negations outside and inside classes, POSIX classes beside them, and a negated class
    /// replacing one whole UTF-8 character.
    #[test]
    fn perl_classes_are_ascii_as_in_re2() {
        let input = ["café", "αβγ", "x٣", "a b\u{a0}c"];
        let replace = |pattern: &str, rewrite: &str| {
            let n = node(
                "StaticRegexReplace",
                &[
                    ("pattern", AttrValue::S(pattern.as_bytes().to_vec())),
                    ("rewrite", AttrValue::S(rewrite.as_bytes().to_vec())),
                ],
            );
            texts(&run(&n, &[s(&input)]).unwrap()[0])
        };
        assert_eq!(replace("\\w", "_"), ["___é", "αβγ", "_٣", "_ _\u{a0}_"]);
        assert_eq!(replace("\\W", "-"), ["caf-", "---", "x-", "a-b-c"]);
        assert_eq!(replace("\\s", "_"), ["café", "αβγ", "x٣", "a_b\u{a0}c"]);
        assert_eq!(replace("\\bc", "C"), ["Café", "αβγ", "x٣", "a b\u{a0}C"]);
        assert_eq!(replace("[\\w-]+", "W"), ["Wé", "αβγ", "W٣", "W W\u{a0}W"]);
        assert_eq!(replace("[^\\d]", "."), ["....", "...", "..", "....."]);
        assert_eq!(replace("\\S+", "S"), ["S", "S", "S", "S S"]);
        assert_eq!(replace("[[:alpha:]\\d]", "A"), ["AAAé", "αβγ", "A٣", "A A\u{a0}A"]);
        assert_eq!(replace("[\\W]", "!"), ["caf!", "!!!", "x!", "a!b!c"]);
        assert_eq!(replace("\\d", "#"), input);
        let full = node("StaticRegexFullMatch", &[("pattern", AttrValue::S(b"\\w+".to_vec()))]);
        let m = run(&full, &[s(&input)]).unwrap();
        assert_eq!(m[0].as_bool().unwrap(), &[false, false, false, false]);
    }

    #[test]
    fn reduce_join_orders_as_tensorflow() {
        let x =
            Tensor::from_strings(vec![2, 3], ["a", "b", "c", "d", "e", "f"].map(|c| c.as_bytes().to_vec()).to_vec())
                .unwrap();
        let rj = |axes: Vec<i32>, keep: bool| {
            let n =
                node("ReduceJoin", &[("keep_dims", AttrValue::B(keep)), ("separator", AttrValue::S(b"-".to_vec()))]);
            let k = axes.len();
            run(&n, &[x.clone(), Tensor::from_i32(vec![k], axes).unwrap()]).map(|o| (o[0].shape.clone(), texts(&o[0])))
        };
        assert_eq!(rj(vec![0], false).unwrap(), (vec![3], vec!["a-d".into(), "b-e".into(), "c-f".into()]));
        assert_eq!(rj(vec![-1], true).unwrap(), (vec![2, 1], vec!["a-b-c".into(), "d-e-f".into()]));
        assert_eq!(rj(vec![0, 1], true).unwrap(), (vec![1, 1], vec!["a-d-b-e-c-f".to_string()]));
        assert_eq!(rj(vec![1, 0], false).unwrap(), (vec![], vec!["a-b-c-d-e-f".to_string()]));
        assert_eq!(rj(vec![], false).unwrap().1.len(), 6);
        assert_eq!(rj(vec![0, 0], false).unwrap_err().to_string(), "Duplicate reduction dimension 0");
        assert_eq!(
            rj(vec![2], false).unwrap_err().to_string(),
            "Invalid reduction dimension 2 for input with 2 dimension(s)"
        );
    }

    /// `Equal`/`NotEqual` on strings run on element positions (`by_position`), through the
    /// kernel table as the executor finds them.
    #[test]
    fn equal_on_strings_broadcasts() {
        use crate::kernels::tests_support::run1;
        let n = node("Equal", &[("T", AttrValue::Type(DType::String))]);
        let a = Tensor::from_strings(vec![], vec![b"a".to_vec()]).unwrap();
        assert_eq!(run1(&n, &[s(&["a", "b"]), a]).unwrap().as_bool().unwrap(), &[true, false]);
        let n = node("NotEqual", &[]);
        assert_eq!(run1(&n, &[s(&["a", "b"]), s(&["a", "c"])]).unwrap().as_bool().unwrap(), &[false, true]);
        let x = Tensor::from_i32(vec![2], vec![1, 2]).unwrap();
        assert_eq!(run1(&n, &[x.clone(), x]).unwrap().as_bool().unwrap(), &[false, false]);
    }

    /// TensorFlow 2.21's outputs for the same calls (`gen_string_ops.string_n_grams`) on the
    /// rows ["a","b","c"], [], ["d"], ["e","f"].
    #[test]
    fn string_ngrams_match_tensorflow() {
        let data = Tensor::from_strings(
            vec![6],
            ["a", "b", "c", "d", "e", "f"].iter().map(|s| s.as_bytes().to_vec()).collect(),
        )
        .unwrap();
        let splits = Tensor::from_i64(vec![5], vec![0, 3, 3, 4, 6]).unwrap();
        let run = |widths: &[i64], left: &str, right: &str, pad: i64, preserve: bool| {
            let mut n = super::super::probe("StringNGrams");
            for (k, v) in [
                ("separator", AttrValue::S(b"_".to_vec())),
                ("ngram_widths", AttrValue::List(autoclust_graph::ListValue::I(widths.to_vec()))),
                ("left_pad", AttrValue::S(left.as_bytes().to_vec())),
                ("right_pad", AttrValue::S(right.as_bytes().to_vec())),
                ("pad_width", AttrValue::I(pad)),
                ("preserve_short_sequences", AttrValue::B(preserve)),
            ] {
                n.attrs.insert(k.into(), v);
            }
            let out = super::super::compute(&n, &[data.clone(), splits.clone()]).unwrap();
            let TensorData::Str(g) = &out[0].data else { panic!("not strings") };
            let grams: Vec<String> = g.iter().map(|b| String::from_utf8(b.clone()).unwrap()).collect();
            (grams.join(" "), out[1].as_i64().unwrap().to_vec())
        };
        assert_eq!(run(&[1, 2], " ", " ", 0, false), ("a b c a_b b_c d e f e_f".into(), vec![0, 5, 5, 6, 9]));
        assert_eq!(
            run(&[2], "<", ">", -1, false),
            ("<_a a_b b_c c_> <_> <_d d_> <_e e_f f_>".into(), vec![0, 4, 5, 7, 10])
        );
        assert_eq!(run(&[3], "<", ">", 1, false), ("<_a_b a_b_c b_c_> <_d_> <_e_f e_f_>".into(), vec![0, 3, 3, 4, 6]));
        assert_eq!(run(&[3], "", "", 0, true), ("a_b_c d e_f".into(), vec![0, 1, 1, 2, 3]));
        assert_eq!(run(&[4], "", "", 0, true), ("a_b_c d e_f".into(), vec![0, 1, 1, 2, 3]));
        assert_eq!(run(&[6], "<", ">", 1, true), ("<_a_b_c_> <_d_> <_e_f_>".into(), vec![0, 1, 1, 2, 3]));
        let (grams, sp) = run(&[2, 3], "L", "R", 2, true);
        assert_eq!(sp, vec![0, 9, 12, 17, 24]);
        assert_eq!(
            grams,
            "L_a a_b b_c c_R L_L_a L_a_b a_b_c b_c_R c_R_R L_R L_L_R L_R_R L_d d_R L_L_d L_d_R d_R_R \
             L_e e_f f_R L_L_e L_e_f e_f_R f_R_R"
        );
        let (grams, sp) = run(&[5], "<", ">", -1, true);
        assert_eq!(sp, vec![0, 7, 11, 16, 22]);
        assert!(grams.starts_with("<_<_<_<_a <_<_<_a_b <_<_a_b_c <_a_b_c_> a_b_c_>_> b_c_>_>_> c_>_>_>_> <_<_<_<_>"));
    }
}
