//! Numbers in text as TensorFlow's `strings::safe_strtof`/`safe_strtod` and
//! `safe_strto32`/`safe_strto64` read them — what `StringToNumber` (`tf.strings.to_number`)
//! and `DecodeCSV` (`tf.io.decode_csv`) accept. Surrounding ASCII whitespace is allowed and
//! the whole rest must be the number.
//!
//! Reals follow C's `strtof`/`strtod`, correctly rounded straight to the target type (a
//! float32 is not a float64 rounded again): decimal `[+-]digits[.digits][e[+-]digits]`
//! (`1.`, `.5` included), hexadecimal `[+-]0x hexdigits[.hexdigits][p[+-]digits]`,
//! `inf`/`infinity` and `nan`/`nan(chars)` in any case — `-nan` keeps its sign bit —;
//! overflow gives ±inf and underflow 0 or a subnormal. Integers are an optional sign and
//! decimal digits in range (no hex, no exponent).
//!
//! Checked against TensorFlow 2.21 (the unit tests carry its bits).

/// The text between surrounding ASCII whitespace (space, `\t`, `\n`, `\v`, `\f`, `\r`).
fn trimmed(s: &[u8]) -> &[u8] {
    let ws = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let start = s.iter().position(|b| !ws(b)).unwrap_or(s.len());
    let end = s.iter().rposition(|b| !ws(b)).map_or(start, |i| i + 1);
    &s[start..end]
}

/// A float32 as `safe_strtof` reads `s`.
pub(crate) fn parse_f32(s: &[u8]) -> Option<f32> {
    // Rounded once to float32's 24 bits; the float64 holding it is exact.
    parse_real(s, 24, -126, 127, |t| t.parse::<f32>().ok().map(f64::from)).map(|x| x as f32)
}

/// A float64 as `safe_strtod` reads `s`.
pub(crate) fn parse_f64(s: &[u8]) -> Option<f64> {
    parse_real(s, 53, -1022, 1023, |t| t.parse::<f64>().ok())
}

/// An int32 as `safe_strto32` reads `s`.
pub(crate) fn parse_i32(s: &[u8]) -> Option<i32> {
    std::str::from_utf8(trimmed(s)).ok().filter(|t| plain_integer(t)).and_then(|t| t.parse().ok())
}

/// An int64 as `safe_strto64` reads `s`.
pub(crate) fn parse_i64(s: &[u8]) -> Option<i64> {
    std::str::from_utf8(trimmed(s)).ok().filter(|t| plain_integer(t)).and_then(|t| t.parse().ok())
}

/// One optional sign, then one or more decimal digits.
fn plain_integer(t: &str) -> bool {
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// A real of `precision` significant bits and normal exponents `min_exp..=max_exp`, as a
/// float64 holding the rounded value exactly; `decimal` parses checked decimal text.
fn parse_real(
    s: &[u8],
    precision: u32,
    min_exp: i32,
    max_exp: i32,
    decimal: impl Fn(&str) -> Option<f64>,
) -> Option<f64> {
    let t = std::str::from_utf8(trimmed(s)).ok()?;
    let (negative, body) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let signed = |x: f64| if negative { -x } else { x };
    let lower = body.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" {
        return Some(signed(f64::INFINITY));
    }
    if lower == "nan"
        || lower
            .strip_prefix("nan(")
            .and_then(|r| r.strip_suffix(')'))
            .is_some_and(|inner| inner.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
    {
        return Some(signed(f64::NAN));
    }
    if let Some(hex) = lower.strip_prefix("0x") {
        return hexadecimal(hex, precision, min_exp, max_exp).map(signed);
    }
    decimal_syntax(body).then(|| decimal(body)).flatten().map(signed)
}

/// `digits[.digits][e[+-]digits]` with at least one mantissa digit.
fn decimal_syntax(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    let mut mantissa = digits(&mut i);
    if i < b.len() && b[i] == b'.' {
        i += 1;
        mantissa += digits(&mut i);
    }
    if mantissa == 0 {
        return false;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// `hexdigits[.hexdigits][p[+-]digits]` (lower case, after `0x`), rounded to nearest-even at
/// `precision` bits, subnormals and overflow included.
fn hexadecimal(s: &str, precision: u32, min_exp: i32, max_exp: i32) -> Option<f64> {
    let (mantissa, exponent) = match s.split_once('p') {
        Some((m, e)) => {
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            // Past any real exponent: saturate (the value is then infinite or zero anyway).
            let e: i64 = e.parse::<i64>().unwrap_or(if e.starts_with('-') { -1 << 40 } else { 1 << 40 });
            (m, e.clamp(-1 << 40, 1 << 40))
        }
        None => (s, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    // The first 16 significant hex digits, exactly; any later nonzero digit is a sticky bit.
    let (mut m, mut exp, mut sticky, mut seen) = (0u64, exponent, false, 0u32);
    for (k, c) in int.bytes().chain(frac.bytes()).enumerate() {
        let d = (c as char).to_digit(16)? as u64;
        let fractional = k >= int.len();
        if seen < 16 {
            if m != 0 || d != 0 {
                seen += 1;
            }
            m = m * 16 + d;
            if fractional {
                exp -= 4;
            }
        } else {
            sticky |= d != 0;
            if !fractional {
                exp += 4;
            }
        }
    }
    if m == 0 {
        return Some(0.0);
    }
    let shift = m.leading_zeros();
    m <<= shift;
    // The value is m · 2^(exp − shift) = 1.f · 2^top with m's top bit at 63.
    let top = exp - shift as i64 + 63;
    if top > max_exp as i64 {
        return Some(f64::INFINITY);
    }
    // Bits kept: `precision`, fewer below the normal range (none below half the smallest
    // subnormal, which may still round up to it).
    let keep = if top >= min_exp as i64 { precision as i64 } else { precision as i64 - (min_exp as i64 - top) };
    if keep < 0 {
        // Below half the smallest subnormal: rounds to zero.
        return Some(0.0);
    }
    let keep = keep as u32;
    let drop = 64 - keep;
    let kept = if drop >= 64 { 0 } else { m >> drop };
    let rest = if drop >= 64 { m } else { m & ((1u64 << drop) - 1) };
    let half = 1u64 << (drop - 1);
    let up = rest > half || (rest == half && (sticky || kept & 1 == 1));
    let kept = kept + up as u64;
    // kept · 2^(top − keep + 1), exact in a float64 (scaled in steps that stay normal).
    let mut x = kept as f64;
    let mut k = top - keep as i64 + 1;
    while k > 900 {
        x *= 2f64.powi(900);
        k -= 900;
    }
    while k < -900 {
        x *= 2f64.powi(-900);
        k += 900;
    }
    x *= 2f64.powi(k as i32);
    // A carry past the largest finite value overflows.
    let largest = (2.0 - 2f64.powi(1 - precision as i32)) * 2f64.powi(max_exp);
    Some(if x > largest { f64::INFINITY } else { x })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TensorFlow 2.21's `tf.strings.to_number` (and `tf.io.decode_csv`, the same parser):
    /// the little-endian bits it returns, or `None` where it fails.
    #[test]
    fn reals_read_as_tensorflow_reads_them() {
        let cases: &[(&str, Option<u32>, Option<u64>)] = &[
            ("1.5", Some(0x3fc00000), Some(0x3ff8000000000000)),
            (" 2 ", Some(0x40000000), Some(0x4000000000000000)),
            ("0x1.8p1", Some(0x40400000), Some(0x4008000000000000)),
            ("0x10", Some(0x41800000), Some(0x4030000000000000)),
            ("inf", Some(0x7f800000), Some(0x7ff0000000000000)),
            ("-Infinity", Some(0xff800000), Some(0xfff0000000000000)),
            ("nan", Some(0x7fc00000), Some(0x7ff8000000000000)),
            ("nan(abc_1)", Some(0x7fc00000), Some(0x7ff8000000000000)),
            ("-nan", Some(0xffc00000), Some(0xfff8000000000000)),
            ("1e40", Some(0x7f800000), Some(0x483d6329f1c35ca5)),
            ("1.", Some(0x3f800000), Some(0x3ff0000000000000)),
            (".5", Some(0x3f000000), Some(0x3fe0000000000000)),
            ("+.5", Some(0x3f000000), Some(0x3fe0000000000000)),
            ("+1", Some(0x3f800000), Some(0x3ff0000000000000)),
            ("0X1P-2", Some(0x3e800000), Some(0x3fd0000000000000)),
            ("INF", Some(0x7f800000), Some(0x7ff0000000000000)),
            ("1.000000059604644775390625001", Some(0x3f800001), Some(0x3ff0000010000000)),
            ("1e-46", Some(0), Some(0x3662_44ce_242c_5561)),
            ("0x1.fffffep127", Some(0x7f7fffff), Some(0x47efffffe0000000)),
            ("0x1.ffffffp127", Some(0x7f800000), Some(0x47effffff0000000)),
            ("0x1.000001p0", Some(0x3f800000), Some(0x3ff0000010000000)),
            ("0x1.0000011p0", Some(0x3f800001), Some(0x3ff0000011000000)),
            ("e5", None, None),
            ("1e", None, None),
            ("0x", None, None),
            ("0x1p", None, None),
            ("1d", None, None),
            ("  ", None, None),
            ("1_0", None, None),
            ("infinit", None, None),
            (".", None, None),
            ("+-1", None, None),
            ("1 2", None, None),
            ("nanx", None, None),
            ("0xg", None, None),
        ];
        for &(s, f, d) in cases {
            assert_eq!(parse_f32(s.as_bytes()).map(f32::to_bits), f, "float {s:?}");
            assert_eq!(parse_f64(s.as_bytes()).map(f64::to_bits), d, "double {s:?}");
        }
        // Hexadecimal subnormals and the rounding at their bottom.
        assert_eq!(parse_f32(b"0x1p-149").map(f32::to_bits), Some(1));
        assert_eq!(parse_f32(b"0x1p-150").map(f32::to_bits), Some(0), "a tie rounds to even (0)");
        assert_eq!(parse_f32(b"0x1.0000000000000000001p-150").map(f32::to_bits), Some(1), "past the tie");
        assert_eq!(parse_f32(b"0x1.8p-150").map(f32::to_bits), Some(1));
        assert_eq!(parse_f32(b"0x1.8p-151").map(f32::to_bits), Some(0), "below half the smallest subnormal");
        assert_eq!(parse_f32(b"-0x1.fp-160").map(f32::to_bits), Some(0x8000_0000));
        assert_eq!(parse_f64(b"0x1.8p-1076").map(f64::to_bits), Some(0));
        assert_eq!(parse_f64(b"0x1p-1074").map(f64::to_bits), Some(1));
        assert_eq!(parse_f64(b"0x1p-1075").map(f64::to_bits), Some(0));
        assert_eq!(parse_f64(b"-0x0.0p0").map(f64::to_bits), Some(0x8000000000000000));
    }

    #[test]
    fn integers_read_as_tensorflow_reads_them() {
        for (s, want) in [(" 12", Some(12)), ("12 ", Some(12)), ("+12", Some(12)), ("007", Some(7)), ("\t5\t", Some(5))]
        {
            assert_eq!(parse_i32(s.as_bytes()), want, "{s:?}");
        }
        assert_eq!(parse_i32(b"-2147483648"), Some(i32::MIN));
        assert_eq!(parse_i32(b"2147483648"), None);
        assert_eq!(parse_i64(b"2147483648"), Some(2147483648));
        for s in ["1e3", "0x10", "1.0", "12a", "+", "-", "+-1", "1 2", "", " "] {
            assert_eq!(parse_i32(s.as_bytes()), None, "{s:?}");
            assert_eq!(parse_i64(s.as_bytes()), None, "{s:?}");
        }
    }
}
