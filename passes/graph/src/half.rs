//! The half-precision float formats, `float16` (IEEE binary16) and `bfloat16` (the top half
//! of a float32): conversions to and from float32 as TensorFlow's `Eigen::half` and
//! `Eigen::bfloat16` make them (widening exact; narrowing to nearest, ties to even, NaN kept
//! a quiet NaN, overflow to infinity). Tensors of these types keep their little-endian bits
//! ([`crate::TensorData::Raw`], two bytes per element).

/// IEEE binary16 bits to float32 (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0f32 } else { 1.0 };
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    match exp {
        // Zero and subnormals: man * 2^-24.
        0 => sign * (man as f32) * (1.0 / 16_777_216.0),
        0x1f => f32::from_bits((u32::from(h & 0x8000) << 16) | 0x7f80_0000 | (man << 13)),
        _ => f32::from_bits((u32::from(h & 0x8000) << 16) | ((exp + 112) << 23) | (man << 13)),
    }
}

/// float32 to IEEE binary16 bits, rounding to nearest, ties to even; overflow gives
/// infinity, NaN stays a (quiet) NaN.
pub fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 | (man >> 13) as u16 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        // A binary16 subnormal (or zero): the 24-bit significand shifted right by 14 - e.
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let (q, rem, halfway) = (m >> shift, m & ((1 << shift) - 1), 1u32 << (shift - 1));
        let q = if rem > halfway || (rem == halfway && q & 1 == 1) { q + 1 } else { q };
        return sign | q as u16;
    }
    let h = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    // A carry out of the significand moves into the exponent, up to infinity: still right.
    let h = if rem > 0x1000 || (rem == 0x1000 && h & 1 == 1) { h + 1 } else { h };
    sign | h as u16
}

/// bfloat16 bits to float32 (exact).
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// float32 to bfloat16 bits, rounding to nearest, ties to even; NaN stays a quiet NaN.
pub fn f32_to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) | 0x40) as u16;
    }
    let rounded = b.wrapping_add(0x7fff + ((b >> 16) & 1));
    (rounded >> 16) as u16
}

/// A `float16`/`bfloat16` tensor widened to float32 (exact); `None` for a tensor of any
/// other type or whose bytes do not match its shape.
pub fn widen(t: &crate::Tensor) -> Option<crate::Tensor> {
    let crate::TensorData::Raw(bytes) = &t.data else { return None };
    if !t.dtype.is_half() || bytes.len() != t.num_elements() * 2 {
        return None;
    }
    let to_f32 = if t.dtype == crate::DType::BFloat16 { bf16_to_f32 } else { f16_to_f32 };
    let v: Vec<f32> = bytes.chunks_exact(2).map(|c| to_f32(u16::from_le_bytes([c[0], c[1]]))).collect();
    Some(crate::Tensor {
        dtype: crate::DType::Float32,
        shape: t.shape.clone(),
        data: crate::TensorData::F32(std::sync::Arc::new(v)),
    })
}

/// A float32 tensor rounded to the half type `dtype` (nearest, ties to even); `None` for a
/// tensor that is not float32 or a `dtype` that is not a half type.
pub fn narrow(t: &crate::Tensor, dtype: crate::DType) -> Option<crate::Tensor> {
    let v = t.as_f32().filter(|_| dtype.is_half())?;
    let to_bits = if dtype == crate::DType::BFloat16 { f32_to_bf16 } else { f32_to_f16 };
    let bytes: Vec<u8> = v.iter().flat_map(|&x| to_bits(x).to_le_bytes()).collect();
    Some(crate::Tensor { dtype, shape: t.shape.clone(), data: crate::TensorData::Raw(std::sync::Arc::new(bytes)) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary16_round_trips_every_finite_value() {
        for h in 0..=u16::MAX {
            let x = f16_to_f32(h);
            if x.is_nan() {
                assert!(f16_to_f32(f32_to_f16(x)).is_nan());
            } else {
                assert_eq!(f32_to_f16(x), h, "{h:#06x} = {x}");
            }
        }
    }

    #[test]
    fn binary16_rounds_to_nearest_even() {
        // Known values: 1, the largest finite, the smallest subnormal, overflow.
        assert_eq!(f32_to_f16(1.0), 0x3c00);
        assert_eq!(f32_to_f16(65504.0), 0x7bff);
        assert_eq!(f32_to_f16(65520.0), 0x7c00); // halfway to 2^16 rounds to even: infinity
        assert_eq!(f32_to_f16(65519.0), 0x7bff);
        assert_eq!(f32_to_f16(5.960_464_5e-8), 0x0001);
        assert_eq!(f32_to_f16(2.980_232_2e-8), 0x0000); // half the smallest subnormal: ties to even (0)
        assert_eq!(f32_to_f16(2.980_233e-8), 0x0001);
        assert_eq!(f32_to_f16(-0.0), 0x8000);
        // Between two neighbours: 1 + 2^-11 is exactly halfway between 1 and 1 + 2^-10.
        assert_eq!(f32_to_f16(1.0 + 1.0 / 2048.0), 0x3c00);
        assert_eq!(f32_to_f16(1.0 + 3.0 / 2048.0), 0x3c02);
        // Every float32 rounds to one of its two binary16 neighbours, the nearer one.
        let mut x = 1.0e-9f32;
        while x < 7.0e4 {
            for v in [x, -x] {
                let h = f32_to_f16(v);
                let got = f16_to_f32(h);
                if got.is_infinite() {
                    // IEEE overflow: from 65520 (halfway past the largest finite, 65504) on.
                    assert!(v.abs() >= 65520.0, "{v} overflowed");
                    continue;
                }
                let err = (got - v).abs();
                for n in [h.wrapping_sub(1), h.wrapping_add(1)] {
                    let other = f16_to_f32(n);
                    if other.is_finite() && (other.is_sign_negative() == v.is_sign_negative()) {
                        assert!(err <= (other - v).abs(), "{v}: {got} but {other} is nearer");
                    }
                }
            }
            x *= 1.000_7;
        }
    }

    #[test]
    fn bfloat16_rounds_to_nearest_even() {
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        assert_eq!(bf16_to_f32(0x3f80), 1.0);
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even.
        assert_eq!(f32_to_bf16(1.0 + 1.0 / 256.0), 0x3f80);
        assert_eq!(f32_to_bf16(1.0 + 3.0 / 256.0), 0x3f82);
        assert!(bf16_to_f32(f32_to_bf16(f32::NAN)).is_nan());
        assert_eq!(f32_to_bf16(f32::INFINITY), 0x7f80);
        for h in 0..=u16::MAX {
            let x = bf16_to_f32(h);
            if !x.is_nan() {
                assert_eq!(f32_to_bf16(x), h);
            }
        }
    }
}
