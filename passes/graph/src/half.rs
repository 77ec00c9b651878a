//! The half-precision float formats, `float16` (IEEE binary16) and `bfloat16` (the top half
//! of a float32): conversions to and from float32 as TensorFlow's `Eigen::half` and
//! `Eigen::bfloat16` make them (widening exact; narrowing to nearest, ties to even, NaN kept
//! a quiet NaN, overflow to infinity). Tensors of these types keep their little-endian bits
//! ([`crate::TensorData::Raw`], two bytes per element).

/// IEEE binary16 bits to float32 (exact; a signalling NaN comes out quiet).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0f32 } else { 1.0 };
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    match exp {
        // Zero and subnormals: man * 2^-24.
        0 => sign * (man as f32) * (1.0 / 16_777_216.0),
        // Infinity, or a NaN made quiet (as the F16C instruction does: both paths of
        // [`f16_bytes_to_f32`] give the same bits).
        0x1f => f32::from_bits(
            (u32::from(h & 0x8000) << 16) | 0x7f80_0000 | (man << 13) | if man != 0 { 0x40_0000 } else { 0 },
        ),
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

/// Little-endian binary16 values widened to float32, bit for bit [`f16_to_f32`] of each:
/// eight at a time by the F16C instruction where the host has it (a mixed-precision step's
/// plain executor spent half its time converting one value at a time). A trailing odd byte is
/// ignored.
pub fn f16_bytes_to_f32(bytes: &[u8]) -> Vec<f32> {
    let n = bytes.len() / 2;
    let mut out = Vec::with_capacity(n);
    #[cfg(target_arch = "x86_64")]
    if f16c() {
        // SAFETY: the host has F16C and AVX (checked); `out` has room for `n` values, all
        // written before `set_len`.
        unsafe {
            x86::widen_f16(bytes.as_ptr(), out.as_mut_ptr(), n);
            out.set_len(n);
        }
        return out;
    }
    out.extend(bytes.chunks_exact(2).map(|c| f16_to_f32(u16::from_le_bytes([c[0], c[1]]))));
    out
}

/// float32 values rounded to little-endian binary16 bytes, bit for bit [`f32_to_f16`] of
/// each (eight at a time by F16C where the host has it).
pub fn f32_to_f16_bytes(v: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 2);
    #[cfg(target_arch = "x86_64")]
    if f16c() {
        // SAFETY: as in `f16_bytes_to_f32`; `out` has room for `2·len` bytes.
        unsafe {
            x86::narrow_f16(v.as_ptr(), out.as_mut_ptr(), v.len());
            out.set_len(v.len() * 2);
        }
        return out;
    }
    out.extend(v.iter().flat_map(|&x| f32_to_f16(x).to_le_bytes()));
    out
}

/// Little-endian bfloat16 values widened to float32 (a shift each).
pub fn bf16_bytes_to_f32(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(2).map(|c| f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16)).collect()
}

/// float32 values rounded to little-endian bfloat16 bytes, bit for bit [`f32_to_bf16`] of each.
pub fn f32_to_bf16_bytes(v: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; v.len() * 2];
    for (o, &x) in out.chunks_exact_mut(2).zip(v) {
        o.copy_from_slice(&f32_to_bf16(x).to_le_bytes());
    }
    out
}

/// Whether the host converts binary16 in hardware (F16C, with the AVX registers it uses).
#[cfg(target_arch = "x86_64")]
fn f16c() -> bool {
    std::is_x86_feature_detected!("f16c") && std::is_x86_feature_detected!("avx")
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// `n` binary16 values at `src` (little-endian, unaligned) widened to `dst`.
    ///
    /// # Safety
    /// The host has F16C and AVX; `src` holds `2n` readable bytes and `dst` room for `n` floats.
    #[target_feature(enable = "avx,f16c")]
    pub(super) unsafe fn widen_f16(src: *const u8, dst: *mut f32, n: usize) {
        // SAFETY: the caller upholds the function's contract.
        unsafe {
            let mut i = 0;
            while i + 8 <= n {
                let h = _mm_loadu_si128(src.add(2 * i) as *const __m128i);
                _mm256_storeu_ps(dst.add(i), _mm256_cvtph_ps(h));
                i += 8;
            }
            while i < n {
                let h = u16::from_le_bytes([*src.add(2 * i), *src.add(2 * i + 1)]);
                let x = _mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(h)));
                *dst.add(i) = _mm_cvtss_f32(x);
                i += 1;
            }
        }
    }

    /// `n` floats at `src` rounded to binary16 (to nearest, ties to even — the instruction's
    /// rounding operand, not the MXCSR's mode) at `dst`, little-endian.
    ///
    /// # Safety
    /// The host has F16C and AVX; `src` holds `n` floats and `dst` room for `2n` bytes.
    #[target_feature(enable = "avx,f16c")]
    pub(super) unsafe fn narrow_f16(src: *const f32, dst: *mut u8, n: usize) {
        // SAFETY: the caller upholds the function's contract.
        unsafe {
            let mut i = 0;
            while i + 8 <= n {
                let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(src.add(i)));
                _mm_storeu_si128(dst.add(2 * i) as *mut __m128i, h);
                i += 8;
            }
            while i < n {
                let h = _mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set_ss(*src.add(i)));
                let b = (_mm_cvtsi128_si32(h) as u16).to_le_bytes();
                *dst.add(2 * i) = b[0];
                *dst.add(2 * i + 1) = b[1];
                i += 1;
            }
        }
    }
}

/// A `float16`/`bfloat16` tensor widened to float32 (exact); `None` for a tensor of any
/// other type or whose bytes do not match its shape.
pub fn widen(t: &crate::Tensor) -> Option<crate::Tensor> {
    let crate::TensorData::Raw(bytes) = &t.data else { return None };
    if !t.dtype.is_half() || bytes.len() != t.num_elements() * 2 {
        return None;
    }
    let v = if t.dtype == crate::DType::BFloat16 { bf16_bytes_to_f32(bytes) } else { f16_bytes_to_f32(bytes) };
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
    let bytes = if dtype == crate::DType::BFloat16 { f32_to_bf16_bytes(v) } else { f32_to_f16_bytes(v) };
    Some(crate::Tensor { dtype, shape: t.shape.clone(), data: crate::TensorData::Raw(std::sync::Arc::new(bytes)) })
}

/// One step of a [`HalfProgram`]; each step's value is named by its index.
#[derive(Clone, Debug, PartialEq)]
pub enum HalfStep {
    /// The op's data input `k`, widened to float32.
    Input(usize),
    /// The op's input `k` as it is: an integer operand (a reduction's axes), not a half value.
    Operand(usize),
    /// A float32 scalar (already a value of the half type where TensorFlow rounds it).
    Const(f32),
    /// A float32 TensorFlow op (`T = float32`) on earlier steps, with extra attributes.
    Op { op: &'static str, args: Vec<usize>, attrs: Vec<(&'static str, crate::AttrValue)> },
    /// An earlier step rounded to the half type.
    Round(usize),
}

/// A half-precision op as TensorFlow's Eigen expression computes it: a straight-line
/// program of float32 ops with a rounding after each half operation, its result the last
/// step. The interpreter (`runtime/src/kernels/half.rs`) runs it with its float32 kernels
/// and the compiler (`compiler/src/half.rs`) builds it into the cluster body, so both give
/// TensorFlow's bits where one rounding of the float32 result would not.
#[derive(Clone, Debug, PartialEq)]
pub struct HalfProgram {
    pub steps: Vec<HalfStep>,
}

impl HalfProgram {
    fn push(&mut self, s: HalfStep) -> usize {
        self.steps.push(s);
        self.steps.len() - 1
    }
    fn input(&mut self, k: usize) -> usize {
        self.push(HalfStep::Input(k))
    }
    fn operand(&mut self, k: usize) -> usize {
        self.push(HalfStep::Operand(k))
    }
    fn konst(&mut self, x: f32) -> usize {
        self.push(HalfStep::Const(x))
    }
    fn op(&mut self, op: &'static str, args: &[usize]) -> usize {
        self.op_with(op, args, Vec::new())
    }
    /// A half operation: the float32 op, rounded.
    fn rop(&mut self, op: &'static str, args: &[usize]) -> usize {
        let v = self.op(op, args);
        self.push(HalfStep::Round(v))
    }
    fn select(&mut self, cond: usize, a: usize, b: usize) -> usize {
        self.op("SelectV2", &[cond, a, b])
    }
    fn op_with(&mut self, op: &'static str, args: &[usize], attrs: Vec<(&'static str, crate::AttrValue)>) -> usize {
        self.push(HalfStep::Op { op, args: args.to_vec(), attrs })
    }
}

/// `x` rounded to the half type `half` (as float32).
pub fn round_to(x: f32, half: crate::DType) -> f32 {
    if half == crate::DType::BFloat16 {
        bf16_to_f32(f32_to_bf16(x))
    } else {
        f16_to_f32(f32_to_f16(x))
    }
}

/// Whether a `BiasAddGrad` is one TensorFlow's CPU kernel sums in bfloat16 itself, row by
/// row with each partial sum rounded (its accumulator type for bfloat16 is bfloat16; for
/// float16 it is float32, one rounding at the end): `T = bfloat16` with channels last. Its
/// NCHW form reduces in another order, close to a float32 sum (left as one).
pub fn bias_grad_rounds_rows(node: &crate::Node) -> bool {
    node.op == "BiasAddGrad"
        && node.attr("T").and_then(crate::AttrValue::as_type) == Some(crate::DType::BFloat16)
        && node.attr("data_format").and_then(crate::AttrValue::as_str).is_none_or(|f| f == "NHWC")
}

/// The program of `node` (with `inputs` data inputs) in the half type `half`, for the ops
/// whose TensorFlow kernel is an expression of several half operations: `AddN` (left to
/// right), `Sigmoid` (Eigen's `e / (1 + e)`, 1 where `e` overflows), `Elu`, `Selu`,
/// `LeakyRelu`, `Softplus`, `Softsign`, `Xlogy`, `SquaredDifference` and the gradients `EluGrad`,
/// `SeluGrad`, `LeakyReluGrad`, `SoftplusGrad`, `SoftsignGrad`, `TanhGrad`, `SigmoidGrad`,
/// `SqrtGrad`, `RsqrtGrad`, `ReciprocalGrad` — each operation rounded, constants rounded to the half type first,
/// in TensorFlow's order — and a float16 `Mean` (TensorFlow's `SumReducer<half>` divided by
/// `static_cast<half>(count)`: the sum rounded to float16, infinite past its range, divided by
/// the count rounded to float16, which rounds counts past 2048 and is infinite past 65,519 —
/// a mean of 0; TensorFlow 2.21 gives `mean([1]*2048 + [0]) = 1` and `mean([4e4, 4e4]) = inf`
/// in float16. The sum is accumulated in float32 here: a partial sum that overflows before
/// later terms bring it back in range is infinite in TensorFlow only. A bfloat16 `Mean` is
/// TensorFlow's float32 mean rounded once, as any other op), and a float16 VALID `AvgPool`
/// (infinite where a window's float16 sum is), and a half `MaxPool` (never below the half
/// type's lowest finite value, TensorFlow's starting point). `None` for every other op (one rounding of the float32 op is
/// TensorFlow's result).
pub fn half_program(node: &crate::Node, inputs: usize, half: crate::DType) -> Option<HalfProgram> {
    let r = |x: f64| round_to(x as f32, half);
    let mut p = HalfProgram { steps: Vec::new() };
    // The constants of `selu`, cast to the half type as the kernel's `static_cast<T>` does.
    use crate::arith::{SELU_SCALE, SELU_SCALE_ALPHA};
    let alpha = || node.attr("alpha").and_then(crate::AttrValue::as_float).unwrap_or(0.2);
    match node.op.as_str() {
        "AddN" if inputs >= 1 => {
            let mut acc = p.input(0);
            for k in 1..inputs {
                let x = p.input(k);
                acc = p.rop("AddV2", &[acc, x]);
            }
            if inputs == 1 {
                p.op("Identity", &[acc]);
            }
        }
        "Sigmoid" => {
            let x = p.input(0);
            let e = p.rop("Exp", &[x]);
            let one = p.konst(1.0);
            let d = p.rop("AddV2", &[one, e]);
            let q = p.rop("RealDiv", &[e, d]);
            let inf = p.konst(f32::INFINITY);
            let overflow = p.op("Equal", &[e, inf]);
            p.select(overflow, one, q);
        }
        "Elu" | "Selu" => {
            let x = p.input(0);
            let e = p.rop("Exp", &[x]);
            let one = p.konst(1.0);
            let em1 = p.rop("Sub", &[e, one]);
            let zero = p.konst(0.0);
            let neg = p.op("Less", &[x, zero]);
            if node.op == "Elu" {
                p.select(neg, em1, x);
            } else {
                let sa = p.konst(r(SELU_SCALE_ALPHA));
                let below = p.rop("Mul", &[sa, em1]);
                let scale = p.konst(r(SELU_SCALE));
                let above = p.rop("Mul", &[scale, x]);
                p.select(neg, below, above);
            }
        }
        "EluGrad" | "SeluGrad" => {
            let (dy, y) = (p.input(0), p.input(1));
            let zero = p.konst(0.0);
            let neg = p.op("Less", &[y, zero]);
            if node.op == "EluGrad" {
                let one = p.konst(1.0);
                let t = p.rop("AddV2", &[y, one]);
                let below = p.rop("Mul", &[t, dy]);
                p.select(neg, below, dy);
            } else {
                let sa = p.konst(r(SELU_SCALE_ALPHA));
                let t = p.rop("AddV2", &[y, sa]);
                let below = p.rop("Mul", &[dy, t]);
                let scale = p.konst(r(SELU_SCALE));
                let above = p.rop("Mul", &[dy, scale]);
                p.select(neg, below, above);
            }
        }
        "LeakyRelu" | "LeakyReluGrad" => {
            // `(x > 0).select(v, v * alpha)` with `alpha` cast to the half type.
            let grad = node.op == "LeakyReluGrad";
            let (v, x) = if grad { (p.input(0), p.input(1)) } else { (p.input(0), p.input(0)) };
            let a = p.konst(r(f64::from(alpha())));
            let scaled = p.rop("Mul", &[v, a]);
            let zero = p.konst(0.0);
            let pos = p.op("Greater", &[x, zero]);
            p.select(pos, v, scaled);
        }
        "Softplus" => {
            // `log(epsilon) + 2` in the half type (Eigen's `NumTraits<half>::epsilon()` is
            // 2^-13, its bfloat16 one 2^-7): above −threshold x, below threshold e^x, else
            // log1p(e^x), each rounded.
            let eps: f64 = if half == crate::DType::BFloat16 { 1.0 / 128.0 } else { 1.0 / 8192.0 };
            let threshold = r(f64::from(r(eps.ln())) + 2.0);
            let x = p.input(0);
            let e = p.rop("Exp", &[x]);
            let l = p.rop("Log1p", &[e]);
            let lo = p.konst(threshold);
            let small = p.op("Less", &[x, lo]);
            let mid = p.select(small, e, l);
            let hi = p.konst(-threshold);
            let large = p.op("Greater", &[x, hi]);
            p.select(large, x, mid);
        }
        "SoftplusGrad" => {
            // `dy / (exp(-x) + 1)`.
            let (dy, x) = (p.input(0), p.input(1));
            let nx = p.op("Neg", &[x]);
            let e = p.rop("Exp", &[nx]);
            let one = p.konst(1.0);
            let d = p.rop("AddV2", &[e, one]);
            p.rop("RealDiv", &[dy, d]);
        }
        "TanhGrad" => {
            // `dy * (1 - y * y)`.
            let (y, dy) = (p.input(0), p.input(1));
            let yy = p.rop("Mul", &[y, y]);
            let one = p.konst(1.0);
            let t = p.rop("Sub", &[one, yy]);
            p.rop("Mul", &[dy, t]);
        }
        "SigmoidGrad" => {
            // `dy * (y * (1 - y))`: Eigen's packet order (its scalar tail multiplies left to
            // right, so TensorFlow's last few elements may differ by an ulp).
            let (y, dy) = (p.input(0), p.input(1));
            let one = p.konst(1.0);
            let t = p.rop("Sub", &[one, y]);
            let a = p.rop("Mul", &[y, t]);
            p.rop("Mul", &[dy, a]);
        }
        "SqrtGrad" | "RsqrtGrad" | "ReciprocalGrad" => {
            // Eigen's packet forms, `mul_no_nan` by `dy` last: `(0.5 / y) * dy`,
            // `(-0.5 * (y * y)) * (y * dy)`, `-(y * y) * dy`.
            let (y, dy) = (p.input(0), p.input(1));
            match node.op.as_str() {
                "SqrtGrad" => {
                    let half_c = p.konst(0.5);
                    let q = p.rop("RealDiv", &[half_c, y]);
                    p.rop("MulNoNan", &[q, dy]);
                }
                "RsqrtGrad" => {
                    let yy = p.rop("Mul", &[y, y]);
                    let c = p.konst(-0.5);
                    let a = p.rop("Mul", &[c, yy]);
                    let b = p.rop("MulNoNan", &[y, dy]);
                    p.rop("MulNoNan", &[a, b]);
                }
                _ => {
                    let yy = p.rop("Mul", &[y, y]);
                    let n = p.op("Neg", &[yy]);
                    p.rop("MulNoNan", &[n, dy]);
                }
            }
        }
        "Softsign" | "SoftsignGrad" => {
            // `x / (|x| + 1)`; the gradient `dy / (|x| + 1)²`.
            let grad = node.op == "SoftsignGrad";
            let x = p.input(usize::from(grad));
            let a = p.op("Abs", &[x]);
            let one = p.konst(1.0);
            let d = p.rop("AddV2", &[a, one]);
            if grad {
                let dy = p.input(0);
                let d2 = p.rop("Square", &[d]);
                p.rop("RealDiv", &[dy, d2]);
            } else {
                p.rop("RealDiv", &[x, d]);
            }
        }
        "Xlogy" => {
            // `x == 0 ? 0 : x * log(y)`.
            let (x, y) = (p.input(0), p.input(1));
            let l = p.rop("Log", &[y]);
            let m = p.rop("Mul", &[x, l]);
            let zero = p.konst(0.0);
            let is_zero = p.op("Equal", &[x, zero]);
            p.select(is_zero, zero, m);
        }
        "SquaredDifference" => {
            let (x, y) = (p.input(0), p.input(1));
            let d = p.rop("Sub", &[x, y]);
            p.rop("Mul", &[d, d]);
        }
        "Mean" if half == crate::DType::Float16 => {
            // `round(sum) / round(count)`, the count as `Size(x) / Size(sum)` in float32
            // (exact below 2^24 elements, and rounded to the half type after anyway).
            let (x, axes) = (p.input(0), p.operand(1));
            let mut sum_attrs = vec![(
                "keep_dims",
                crate::AttrValue::B(node.attr("keep_dims").and_then(crate::AttrValue::as_bool).unwrap_or(false)),
            )];
            if let Some(t) = node.attr("Tidx") {
                sum_attrs.push(("Tidx", t.clone()));
            }
            let s = p.op_with("Sum", &[x, axes], sum_attrs);
            let sum = p.push(HalfStep::Round(s));
            let size = |p: &mut HalfProgram, v: usize| {
                let n = p.op_with("Size", &[v], vec![("out_type", crate::AttrValue::Type(crate::DType::Int32))]);
                p.op_with(
                    "Cast",
                    &[n],
                    vec![
                        ("SrcT", crate::AttrValue::Type(crate::DType::Int32)),
                        ("DstT", crate::AttrValue::Type(crate::DType::Float32)),
                    ],
                )
            };
            let (all, kept) = (size(&mut p, x), size(&mut p, s));
            let n = p.op("RealDiv", &[all, kept]);
            let count = p.push(HalfStep::Round(n));
            p.rop("RealDiv", &[sum, count]);
        }
        "MaxPool" => {
            // TensorFlow's reducer starts at the half type's lowest finite value and takes a
            // strictly greater element: a window of NaNs and -inf gives that value, not -inf.
            let x = p.input(0);
            let attrs = pool_attrs(node);
            let m = p.op_with("MaxPool", &[x], attrs);
            let rounded = p.push(HalfStep::Round(m));
            let lowest = p.konst(if half == crate::DType::BFloat16 { bf16_to_f32(0xff7f) } else { -65504.0 });
            p.op("Maximum", &[rounded, lowest]);
        }
        "AvgPool" if half == crate::DType::Float16 && avg_pool_window(node).is_some() => {
            // TensorFlow sums each window in float16: a window whose sum passes the float16
            // range averages to infinity. Every VALID window has `kh·kw` elements, so its sum
            // is the float32 average times that count; rounded to float16 it is infinite
            // exactly when TensorFlow's is (all terms of one sign; see `Mean`).
            let x = p.input(0);
            let attrs = pool_attrs(node);
            let avg = p.op_with("AvgPool", &[x], attrs);
            let count = p.konst(avg_pool_window(node).unwrap_or(1) as f32);
            let sum = p.rop("Mul", &[avg, count]);
            let mean = p.push(HalfStep::Round(avg));
            let finite = p.op("IsFinite", &[sum]);
            p.select(finite, mean, sum);
        }
        _ => return None,
    }
    Some(p)
}

/// A pooling node's window attributes, for its float32 op in a program.
fn pool_attrs(node: &crate::Node) -> Vec<(&'static str, crate::AttrValue)> {
    ["ksize", "strides", "padding", "data_format"]
        .into_iter()
        .filter_map(|k| node.attr(k).map(|v| (k, v.clone())))
        .collect()
}

/// The element count of every window of a VALID NHWC `AvgPool` (`kh·kw`); `None` for any
/// other padding or layout (a SAME window at the border counts fewer elements).
fn avg_pool_window(node: &crate::Node) -> Option<i64> {
    let valid = node.attr("padding").and_then(crate::AttrValue::as_str) == Some("VALID");
    let nhwc = node.attr("data_format").and_then(crate::AttrValue::as_str).is_none_or(|f| f == "NHWC");
    let ksize = match node.attr("ksize") {
        Some(crate::AttrValue::List(crate::ListValue::I(k))) if k.len() == 4 && k[0] == 1 && k[3] == 1 => k,
        _ => return None,
    };
    (valid && nhwc).then(|| ksize[1] * ksize[2])
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
    fn bulk_binary16_widening_is_the_scalar_one_bit_for_bit() {
        // Every binary16 value, NaNs included, in a length that leaves a tail of three.
        let bytes: Vec<u8> = (0..=u16::MAX).chain([0x7c01, 0xfe00, 0x0001]).flat_map(|h| h.to_le_bytes()).collect();
        let bulk = f16_bytes_to_f32(&bytes);
        assert_eq!(bulk.len(), bytes.len() / 2);
        for (c, got) in bytes.chunks_exact(2).zip(&bulk) {
            let h = u16::from_le_bytes([c[0], c[1]]);
            assert_eq!(got.to_bits(), f16_to_f32(h).to_bits(), "{h:#06x}");
        }
        // A signalling NaN widens quiet, its payload kept.
        assert_eq!(f16_to_f32(0x7c01).to_bits(), 0x7fc0_2000);
    }

    #[test]
    fn bulk_binary16_narrowing_is_the_scalar_one_bit_for_bit() {
        // Float32 bit patterns on a stride through all of them, each with its neighbours (the
        // rounding boundaries sit at the low 13 bits), the halfway cases of every binary16
        // value, both infinities, NaNs and subnormals.
        let mut v: Vec<f32> = Vec::new();
        let mut b = 0u32;
        while let Some(next) = b.checked_add(40_961) {
            for d in [0u32, 1, 0xfff, 0x1000, 0x1001, 0x1fff] {
                v.push(f32::from_bits(b.wrapping_add(d)));
            }
            b = next;
        }
        for h in 0..=u16::MAX {
            let x = f16_to_f32(h);
            if x.is_finite() {
                v.push(f32::from_bits(x.to_bits() + 0x1000));
                v.push(f32::from_bits(x.to_bits().wrapping_sub(0x1000)));
            }
        }
        v.extend([f32::INFINITY, f32::NEG_INFINITY, f32::NAN, f32::from_bits(0x7f80_0001), 65520.0, 1e-45, -0.0]);
        let bulk = f32_to_f16_bytes(&v);
        assert_eq!(bulk.len(), 2 * v.len());
        for (x, c) in v.iter().zip(bulk.chunks_exact(2)) {
            assert_eq!(u16::from_le_bytes([c[0], c[1]]), f32_to_f16(*x), "{:#010x}", x.to_bits());
        }
        let bf = f32_to_bf16_bytes(&v);
        for (x, c) in v.iter().zip(bf.chunks_exact(2)) {
            assert_eq!(u16::from_le_bytes([c[0], c[1]]), f32_to_bf16(*x));
        }
        let back = bf16_bytes_to_f32(&bf);
        for (y, c) in back.iter().zip(bf.chunks_exact(2)) {
            assert_eq!(y.to_bits(), bf16_to_f32(u16::from_le_bytes([c[0], c[1]])).to_bits());
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
