//! Tile routines: wide-vector exp/tanh/sigmoid/log/log1p/erf/erfc for the transcendental
//! members of fused loops, in two tiers — AVX-512F (16 lanes) and AVX2+FMA (8 lanes).
//!
//! Cranelift's x64 backend has 128-bit vectors only, and a fused loop's time goes into
//! the exp/tanh/sigmoid polynomials (16–25 vector operations per four floats each). On a
//! host with AVX-512F or AVX2+FMA the fused loop is therefore emitted in tiles of
//! [`TILE`] elements (see `codegen.rs`): Cranelift's own f32x4 loops compute the cheap
//! members of a tile, and each transcendental member is one call to a routine here that
//! evaluates it over the whole tile sixteen (AVX-512) or eight (AVX2) lanes at a time.
//! The tile's intermediate values stay in a few KiB of stack (in L1), so the extra stores
//! and loads cost less than the narrower polynomial arithmetic they replace.
//!
//! **Invariant: every routine of every tier computes bit for bit what `math::FMath`
//! emits for the same op** — the same operations in the same order (the same fused
//! multiply-adds, the same constant rounding, the same min/max operand order for NaN,
//! the same compare predicates) — so a tile of either tier, the f32x4 loop that finishes
//! the row, the scalar tail and a host without either all give identical results.
//! `tests/tile_routines.rs` checks this for each tier the host has, over the whole
//! float32 range including ±0, ±inf, NaN and subnormals.
//!
//! Routines have the C signature `fn(src: *const f32, dst: *mut f32, n: i64)`, `n` a
//! multiple of 16; `src` may equal `dst`. They are registered with the JIT only for the
//! tier [`TileTier::select`] picks: the widest the host has, capped by
//! `CompilerOptions::max_tile_tier` and by the environment for A/B measurements
//! (`AUTOCLUST_NO_AVX512=1` caps at AVX2, `AUTOCLUST_NO_TILES=1` turns tiles off).

use crate::analyze::EwOp;

/// Elements per tile: 64 f32x4 vectors, 1 KiB per buffered value.
pub(crate) const TILE: usize = 256;

/// A width of tile routines, narrowest first (so `min` caps a tier).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TileTier {
    /// 8 lanes with AVX2 and FMA (most AMD Zen 2/3 servers, many laptops).
    Avx2,
    /// 16 lanes with AVX-512F.
    Avx512,
}

impl TileTier {
    /// Every tier, narrowest first.
    pub const ALL: [TileTier; 2] = [TileTier::Avx2, TileTier::Avx512];

    /// How `describe` and the docs name the tier.
    pub fn name(self) -> &'static str {
        match self {
            TileTier::Avx2 => "AVX2",
            TileTier::Avx512 => "AVX-512",
        }
    }

    /// Whether this host's CPU can run the tier's routines.
    pub fn host_has(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            match self {
                TileTier::Avx2 => std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma"),
                TileTier::Avx512 => std::is_x86_feature_detected!("avx512f"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// The tier fused loops use: the widest the host has, at most `cap` (`None`: no cap)
    /// and at most what the environment allows; `None` when no tier is left.
    pub fn select(cap: Option<TileTier>) -> Option<TileTier> {
        if std::env::var_os("AUTOCLUST_NO_TILES").is_some() {
            return None;
        }
        let env_cap = std::env::var_os("AUTOCLUST_NO_AVX512").map(|_| TileTier::Avx2);
        TileTier::ALL
            .into_iter()
            .rev()
            .find(|&t| t.host_has() && cap.is_none_or(|c| t <= c) && env_cap.is_none_or(|c| t <= c))
    }
}

/// The ops with a tile routine.
pub(crate) const WIDE_OPS: [EwOp; 7] =
    [EwOp::Exp, EwOp::Tanh, EwOp::Sigmoid, EwOp::Log, EwOp::Log1p, EwOp::Erf, EwOp::Erfc];

/// The JIT symbol name of `op`'s routine in `tier`.
pub(crate) fn symbol(tier: TileTier, op: EwOp) -> &'static str {
    match (tier, op) {
        (TileTier::Avx512, EwOp::Exp) => "autoclust_tile_exp_f32_avx512",
        (TileTier::Avx512, EwOp::Tanh) => "autoclust_tile_tanh_f32_avx512",
        (TileTier::Avx512, EwOp::Sigmoid) => "autoclust_tile_sigmoid_f32_avx512",
        (TileTier::Avx512, EwOp::Log) => "autoclust_tile_log_f32_avx512",
        (TileTier::Avx512, EwOp::Log1p) => "autoclust_tile_log1p_f32_avx512",
        (TileTier::Avx512, EwOp::Erf) => "autoclust_tile_erf_f32_avx512",
        (TileTier::Avx512, EwOp::Erfc) => "autoclust_tile_erfc_f32_avx512",
        (TileTier::Avx2, EwOp::Exp) => "autoclust_tile_exp_f32_avx2",
        (TileTier::Avx2, EwOp::Tanh) => "autoclust_tile_tanh_f32_avx2",
        (TileTier::Avx2, EwOp::Sigmoid) => "autoclust_tile_sigmoid_f32_avx2",
        (TileTier::Avx2, EwOp::Log) => "autoclust_tile_log_f32_avx2",
        (TileTier::Avx2, EwOp::Log1p) => "autoclust_tile_log1p_f32_avx2",
        (TileTier::Avx2, EwOp::Erf) => "autoclust_tile_erf_f32_avx2",
        (TileTier::Avx2, EwOp::Erfc) => "autoclust_tile_erfc_f32_avx2",
        _ => unreachable!("no tile routine for {op:?}"),
    }
}

/// The address of `op`'s routine in `tier`. Only call this when `tier.host_has()`.
pub(crate) fn address(tier: TileTier, op: EwOp) -> *const u8 {
    #[cfg(target_arch = "x86_64")]
    {
        match (tier, op) {
            (TileTier::Avx512, EwOp::Exp) => avx512::exp_tile as *const u8,
            (TileTier::Avx512, EwOp::Tanh) => avx512::tanh_tile as *const u8,
            (TileTier::Avx512, EwOp::Sigmoid) => avx512::sigmoid_tile as *const u8,
            (TileTier::Avx512, EwOp::Log) => avx512::log_tile as *const u8,
            (TileTier::Avx512, EwOp::Log1p) => avx512::log1p_tile as *const u8,
            (TileTier::Avx512, EwOp::Erf) => avx512::erf_tile as *const u8,
            (TileTier::Avx512, EwOp::Erfc) => avx512::erfc_tile as *const u8,
            (TileTier::Avx2, EwOp::Exp) => avx2::exp_tile as *const u8,
            (TileTier::Avx2, EwOp::Tanh) => avx2::tanh_tile as *const u8,
            (TileTier::Avx2, EwOp::Sigmoid) => avx2::sigmoid_tile as *const u8,
            (TileTier::Avx2, EwOp::Log) => avx2::log_tile as *const u8,
            (TileTier::Avx2, EwOp::Log1p) => avx2::log1p_tile as *const u8,
            (TileTier::Avx2, EwOp::Erf) => avx2::erf_tile as *const u8,
            (TileTier::Avx2, EwOp::Erfc) => avx2::erfc_tile as *const u8,
            _ => unreachable!("no tile routine for {op:?}"),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        unreachable!("tile routines exist on x86_64 only ({tier:?} {op:?})")
    }
}

/// A transcendental the interpreter evaluates with the tile routines ([`map_wide`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wide {
    Exp,
    Tanh,
    Sigmoid,
    Log,
    Log1p,
    Erf,
    Erfc,
}

/// Elements per parallel part of [`map_wide`].
const WIDE_PART: usize = 1 << 14;

/// `x[i] = op(x[i])` over the whole slice with the widest tile routine this host has — bit
/// for bit what compiled clusters compute (module invariant), so the interpreter and the
/// JIT agree exactly; large slices are split over the calling rayon pool. Returns false,
/// leaving `x` untouched, when no tier is available (the caller then maps a scalar
/// function).
pub fn map_wide(op: Wide, x: &mut [f32]) -> bool {
    let Some(tier) = TileTier::select(None) else {
        return false;
    };
    let ew = match op {
        Wide::Exp => EwOp::Exp,
        Wide::Tanh => EwOp::Tanh,
        Wide::Sigmoid => EwOp::Sigmoid,
        Wide::Log => EwOp::Log,
        Wide::Log1p => EwOp::Log1p,
        Wide::Erf => EwOp::Erf,
        Wide::Erfc => EwOp::Erfc,
    };
    // SAFETY: `address` gives a routine with this C signature, for a tier the host has.
    let f: unsafe extern "C" fn(*const f32, *mut f32, i64) = unsafe { std::mem::transmute(address(tier, ew)) };
    let run = |c: &mut [f32]| {
        let bulk = c.len() / 16 * 16;
        // SAFETY: `bulk` is a multiple of 16 within `c`; the routine allows src == dst.
        unsafe { f(c.as_ptr(), c.as_mut_ptr(), bulk as i64) };
        if bulk < c.len() {
            let mut tail = [0f32; 16];
            let rest = c.len() - bulk;
            tail[..rest].copy_from_slice(&c[bulk..]);
            // SAFETY: one whole tile of 16 in a local buffer.
            unsafe { f(tail.as_ptr(), tail.as_mut_ptr(), 16) };
            c[bulk..].copy_from_slice(&tail[..rest]);
        }
    };
    if x.len() >= 4 * WIDE_PART {
        use rayon::prelude::*;
        x.par_chunks_mut(WIDE_PART).for_each(run);
    } else {
        run(x);
    }
    true
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    //! The AVX-512F tier: each function mirrors the `FMath` method of the same name (see
    //! the module invariant).
    //! The polynomial coefficients are `math.rs`'s own constants.

    use std::arch::x86_64::*;

    use crate::math::{ERFC_P, ERF_TAYLOR, EXP_POLY, LOG_POLY, TANH_P, TANH_Q};

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn c(x: f32) -> __m512 {
        _mm512_set1_ps(x)
    }

    /// `p(x)` by Horner with fused multiply-adds, highest degree first (`FMath::horner`).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn horner(x: __m512, coeffs: &[f32]) -> __m512 {
        let mut p = c(coeffs[0]);
        for &k in &coeffs[1..] {
            p = _mm512_fmadd_ps(p, x, c(k));
        }
        p
    }

    /// `c < x ? c : x` (`FMath::min_const`): MINPS returns its second operand unless the
    /// first is less, so a NaN x passes.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn min_const(x: __m512, k: f32) -> __m512 {
        _mm512_min_ps(c(k), x)
    }

    /// `x < c ? c : x` (`FMath::max_const`).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn max_const(x: __m512, k: f32) -> __m512 {
        _mm512_max_ps(c(k), x)
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn exp(x: __m512) -> __m512 {
        // exp_core
        let t = _mm512_fmadd_ps(x, c(std::f32::consts::LOG2_E), c(12_582_912.0));
        let n = _mm512_sub_ps(t, c(12_582_912.0));
        let r = _mm512_fmadd_ps(n, c(-0.693_359_4), x);
        let r = _mm512_fmadd_ps(n, c(2.121_944_4e-4), r);
        let p = horner(r, &EXP_POLY);
        let scale = _mm512_slli_epi32::<23>(_mm512_castps_si512(t));
        let e = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p), scale));
        // Range and NaN selects.
        let big = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(x, c(88.722_83));
        let e = _mm512_mask_blend_ps(big, e, c(f32::INFINITY));
        let ok = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(x, c(-87.336_5));
        let e = _mm512_mask_blend_ps(ok, c(0.0), e);
        let uno = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x);
        _mm512_mask_blend_ps(uno, e, x)
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn tanh(x: __m512) -> __m512 {
        let xc = min_const(x, 9.2);
        let xc = max_const(xc, -9.2);
        let z = _mm512_mul_ps(xc, xc);
        let p = horner(z, &TANH_P);
        let q = horner(z, &TANH_Q);
        let num = _mm512_mul_ps(xc, p);
        let r = _mm512_div_ps(num, q);
        let r = min_const(r, 1.0);
        max_const(r, -1.0)
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn sigmoid(x: __m512) -> __m512 {
        let ax = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fff_ffff)));
        let nax = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(ax), _mm512_set1_epi32(i32::MIN)));
        let e = exp(nax);
        let d = _mm512_add_ps(c(1.0), e);
        let pos = _mm512_div_ps(c(1.0), d);
        let neg = _mm512_mul_ps(e, pos);
        let nonneg = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(x, c(0.0));
        _mm512_mask_blend_ps(nonneg, neg, pos)
    }

    /// `FMath::log`: the exponent split off (subnormals scaled by 2^23 first), the mantissa
    /// folded into [√½, √2), a degree-8 polynomial in `f = m − 1`, then the special values.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn log(x: __m512) -> __m512 {
        let small = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, c(f32::MIN_POSITIVE));
        let xs = _mm512_mask_blend_ps(small, x, _mm512_mul_ps(x, c(8_388_608.0)));
        let eadj = _mm512_mask_blend_ps(small, c(0.0), c(-23.0));
        let bits = _mm512_castps_si512(xs);
        let e = _mm512_and_si512(_mm512_srli_epi32::<23>(bits), _mm512_set1_epi32(0xff));
        let e = _mm512_sub_epi32(e, _mm512_set1_epi32(127));
        let mb =
            _mm512_or_si512(_mm512_and_si512(bits, _mm512_set1_epi32(0x007f_ffff)), _mm512_set1_epi32(0x3f80_0000));
        let m = _mm512_castsi512_ps(mb);
        let ef = _mm512_add_ps(_mm512_cvtepi32_ps(e), eadj);
        let big = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(m, c(std::f32::consts::SQRT_2));
        let m = _mm512_mask_blend_ps(big, m, _mm512_mul_ps(m, c(0.5)));
        let ef = _mm512_mask_blend_ps(big, ef, _mm512_add_ps(ef, c(1.0)));
        let f = _mm512_sub_ps(m, c(1.0));
        let z = _mm512_mul_ps(f, f);
        let p = horner(f, &LOG_POLY);
        let y = _mm512_mul_ps(_mm512_mul_ps(f, z), p);
        let y = _mm512_add_ps(y, _mm512_mul_ps(ef, c(-2.121_944_4e-4)));
        let y = _mm512_add_ps(y, _mm512_mul_ps(z, c(-0.5)));
        let r = _mm512_add_ps(f, y);
        let r = _mm512_add_ps(r, _mm512_mul_ps(ef, c(0.693_359_4)));
        // Special values.
        let r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_EQ_OQ>(x, c(f32::INFINITY)), r, c(f32::INFINITY));
        let r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_EQ_OQ>(x, c(0.0)), r, c(f32::NEG_INFINITY));
        let r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, c(0.0)), r, c(f32::NAN));
        _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x), r, x)
    }

    /// `FMath::log1p`: `log(u)·x/(u − 1)` with `u = 1 + x`, `x` itself where `u` is 1, `u`
    /// where it is +∞.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn log1p(x: __m512) -> __m512 {
        let u = _mm512_add_ps(c(1.0), x);
        let l = log(u);
        let q = _mm512_div_ps(x, _mm512_sub_ps(u, c(1.0)));
        // `l·q` with `l`'s NaN when both are NaN (x = −∞), as MULPS gives its first operand:
        // the compiler may swap a commutative product's operands.
        let r = _mm512_mul_ps(l, q);
        let r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_UNORD_Q>(l, l), r, l);
        let r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_EQ_OQ>(u, c(1.0)), r, x);
        _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_EQ_OQ>(u, c(f32::INFINITY)), r, u)
    }

    /// `FMath::erfc`: `t·e^{−z² + P(t)}` with `z = |x|`, `t = 1/(1 + z/2)`; `2 −` that for
    /// x < 0; NaN gives x.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn erfc(x: __m512) -> __m512 {
        let z = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fff_ffff)));
        let d = _mm512_fmadd_ps(z, c(0.5), c(1.0));
        let t = _mm512_div_ps(c(1.0), d);
        let p = horner(t, &ERFC_P);
        let nz = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(z), _mm512_set1_epi32(i32::MIN)));
        let arg = _mm512_fmadd_ps(nz, z, p);
        let e = exp(arg);
        let r = _mm512_mul_ps(t, e);
        let flipped = _mm512_sub_ps(c(2.0), r);
        let r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, c(0.0)), r, flipped);
        _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x), r, x)
    }

    /// `FMath::erf`: the Taylor series below |x| = ½, `sign(x)·(1 − erfc(|x|))` above; NaN
    /// gives x.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn erf(x: __m512) -> __m512 {
        let p = horner(_mm512_mul_ps(x, x), &ERF_TAYLOR);
        let small = _mm512_mul_ps(x, p);
        let ax = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fff_ffff)));
        let big = _mm512_sub_ps(c(1.0), erfc(ax));
        let sign = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(i32::MIN));
        let big = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(big), sign));
        let r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_LT_OQ>(ax, c(0.5)), big, small);
        _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x), r, x)
    }

    /// Applies `f` to `n` floats (a multiple of 16) from `src` into `dst`.
    ///
    /// # Safety
    /// `src` and `dst` address `n` floats each (they may be the same buffer); the host has
    /// AVX-512F.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn map(src: *const f32, dst: *mut f32, n: i64, f: impl Fn(__m512) -> __m512) {
        let mut i = 0;
        while i + 16 <= n as usize {
            // SAFETY: i + 16 <= n, within both buffers (the caller's promise).
            unsafe { _mm512_storeu_ps(dst.add(i), f(_mm512_loadu_ps(src.add(i)))) };
            i += 16;
        }
    }

    macro_rules! tile_routine {
        ($name:ident, $f:ident) => {
            /// The tile routine for the op of the same name (module docs); generated code
            /// calls it only on AVX-512F hosts.
            ///
            /// # Safety
            /// As [`map`].
            #[target_feature(enable = "avx512f")]
            pub(crate) unsafe extern "C" fn $name(src: *const f32, dst: *mut f32, n: i64) {
                // SAFETY: forwarded from the caller.
                unsafe { map(src, dst, n, |x| $f(x)) }
            }
        };
    }
    tile_routine!(exp_tile, exp);
    tile_routine!(tanh_tile, tanh);
    tile_routine!(sigmoid_tile, sigmoid);
    tile_routine!(log_tile, log);
    tile_routine!(log1p_tile, log1p);
    tile_routine!(erf_tile, erf);
    tile_routine!(erfc_tile, erfc);
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    //! The AVX2+FMA tier: each function mirrors the `FMath` method of the same name, op
    //! for op as the AVX-512 tier does (module invariant); compares give all-ones lanes
    //! and selects are `blendv`, where AVX-512 uses mask registers.

    use std::arch::x86_64::*;

    use crate::math::{ERFC_P, ERF_TAYLOR, EXP_POLY, LOG_POLY, TANH_P, TANH_Q};

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn c(x: f32) -> __m256 {
        _mm256_set1_ps(x)
    }

    /// `p(x)` by Horner with fused multiply-adds, highest degree first (`FMath::horner`).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn horner(x: __m256, coeffs: &[f32]) -> __m256 {
        let mut p = c(coeffs[0]);
        for &k in &coeffs[1..] {
            p = _mm256_fmadd_ps(p, x, c(k));
        }
        p
    }

    /// `c < x ? c : x` (`FMath::min_const`): VMINPS returns its second operand unless the
    /// first is less, so a NaN x passes.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn min_const(x: __m256, k: f32) -> __m256 {
        _mm256_min_ps(c(k), x)
    }

    /// `x < c ? c : x` (`FMath::max_const`).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn max_const(x: __m256, k: f32) -> __m256 {
        _mm256_max_ps(c(k), x)
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn exp(x: __m256) -> __m256 {
        // exp_core
        let t = _mm256_fmadd_ps(x, c(std::f32::consts::LOG2_E), c(12_582_912.0));
        let n = _mm256_sub_ps(t, c(12_582_912.0));
        let r = _mm256_fmadd_ps(n, c(-0.693_359_4), x);
        let r = _mm256_fmadd_ps(n, c(2.121_944_4e-4), r);
        let p = horner(r, &EXP_POLY);
        let scale = _mm256_slli_epi32::<23>(_mm256_castps_si256(t));
        let e = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), scale));
        // Range and NaN selects (blendv takes its second operand where the mask is set).
        let big = _mm256_cmp_ps::<_CMP_GT_OQ>(x, c(88.722_83));
        let e = _mm256_blendv_ps(e, c(f32::INFINITY), big);
        let ok = _mm256_cmp_ps::<_CMP_GE_OQ>(x, c(-87.336_5));
        let e = _mm256_blendv_ps(c(0.0), e, ok);
        let uno = _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x);
        _mm256_blendv_ps(e, x, uno)
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn tanh(x: __m256) -> __m256 {
        let xc = min_const(x, 9.2);
        let xc = max_const(xc, -9.2);
        let z = _mm256_mul_ps(xc, xc);
        let p = horner(z, &TANH_P);
        let q = horner(z, &TANH_Q);
        let num = _mm256_mul_ps(xc, p);
        let r = _mm256_div_ps(num, q);
        let r = min_const(r, 1.0);
        max_const(r, -1.0)
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn sigmoid(x: __m256) -> __m256 {
        let ax = _mm256_castsi256_ps(_mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7fff_ffff)));
        let nax = _mm256_castsi256_ps(_mm256_xor_si256(_mm256_castps_si256(ax), _mm256_set1_epi32(i32::MIN)));
        let e = exp(nax);
        let d = _mm256_add_ps(c(1.0), e);
        let pos = _mm256_div_ps(c(1.0), d);
        let neg = _mm256_mul_ps(e, pos);
        let nonneg = _mm256_cmp_ps::<_CMP_GE_OQ>(x, c(0.0));
        _mm256_blendv_ps(neg, pos, nonneg)
    }

    /// `FMath::log` (the AVX-512 tier's `log`, op for op).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn log(x: __m256) -> __m256 {
        let small = _mm256_cmp_ps::<_CMP_LT_OQ>(x, c(f32::MIN_POSITIVE));
        let xs = _mm256_blendv_ps(x, _mm256_mul_ps(x, c(8_388_608.0)), small);
        let eadj = _mm256_blendv_ps(c(0.0), c(-23.0), small);
        let bits = _mm256_castps_si256(xs);
        let e = _mm256_and_si256(_mm256_srli_epi32::<23>(bits), _mm256_set1_epi32(0xff));
        let e = _mm256_sub_epi32(e, _mm256_set1_epi32(127));
        let mb =
            _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x007f_ffff)), _mm256_set1_epi32(0x3f80_0000));
        let m = _mm256_castsi256_ps(mb);
        let ef = _mm256_add_ps(_mm256_cvtepi32_ps(e), eadj);
        let big = _mm256_cmp_ps::<_CMP_GT_OQ>(m, c(std::f32::consts::SQRT_2));
        let m = _mm256_blendv_ps(m, _mm256_mul_ps(m, c(0.5)), big);
        let ef = _mm256_blendv_ps(ef, _mm256_add_ps(ef, c(1.0)), big);
        let f = _mm256_sub_ps(m, c(1.0));
        let z = _mm256_mul_ps(f, f);
        let p = horner(f, &LOG_POLY);
        let y = _mm256_mul_ps(_mm256_mul_ps(f, z), p);
        let y = _mm256_add_ps(y, _mm256_mul_ps(ef, c(-2.121_944_4e-4)));
        let y = _mm256_add_ps(y, _mm256_mul_ps(z, c(-0.5)));
        let r = _mm256_add_ps(f, y);
        let r = _mm256_add_ps(r, _mm256_mul_ps(ef, c(0.693_359_4)));
        // Special values.
        let r = _mm256_blendv_ps(r, c(f32::INFINITY), _mm256_cmp_ps::<_CMP_EQ_OQ>(x, c(f32::INFINITY)));
        let r = _mm256_blendv_ps(r, c(f32::NEG_INFINITY), _mm256_cmp_ps::<_CMP_EQ_OQ>(x, c(0.0)));
        let r = _mm256_blendv_ps(r, c(f32::NAN), _mm256_cmp_ps::<_CMP_LT_OQ>(x, c(0.0)));
        _mm256_blendv_ps(r, x, _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x))
    }

    /// `FMath::log1p` (the AVX-512 tier's `log1p`, op for op).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn log1p(x: __m256) -> __m256 {
        let u = _mm256_add_ps(c(1.0), x);
        let l = log(u);
        let q = _mm256_div_ps(x, _mm256_sub_ps(u, c(1.0)));
        // `l·q` with `l`'s NaN when both are NaN (the AVX-512 tier's note).
        let r = _mm256_mul_ps(l, q);
        let r = _mm256_blendv_ps(r, l, _mm256_cmp_ps::<_CMP_UNORD_Q>(l, l));
        let r = _mm256_blendv_ps(r, x, _mm256_cmp_ps::<_CMP_EQ_OQ>(u, c(1.0)));
        _mm256_blendv_ps(r, u, _mm256_cmp_ps::<_CMP_EQ_OQ>(u, c(f32::INFINITY)))
    }

    /// `FMath::erfc` (the AVX-512 tier's `erfc`, op for op).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn erfc(x: __m256) -> __m256 {
        let z = _mm256_castsi256_ps(_mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7fff_ffff)));
        let d = _mm256_fmadd_ps(z, c(0.5), c(1.0));
        let t = _mm256_div_ps(c(1.0), d);
        let p = horner(t, &ERFC_P);
        let nz = _mm256_castsi256_ps(_mm256_xor_si256(_mm256_castps_si256(z), _mm256_set1_epi32(i32::MIN)));
        let arg = _mm256_fmadd_ps(nz, z, p);
        let e = exp(arg);
        let r = _mm256_mul_ps(t, e);
        let flipped = _mm256_sub_ps(c(2.0), r);
        let r = _mm256_blendv_ps(r, flipped, _mm256_cmp_ps::<_CMP_LT_OQ>(x, c(0.0)));
        _mm256_blendv_ps(r, x, _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x))
    }

    /// `FMath::erf` (the AVX-512 tier's `erf`, op for op).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn erf(x: __m256) -> __m256 {
        let p = horner(_mm256_mul_ps(x, x), &ERF_TAYLOR);
        let small = _mm256_mul_ps(x, p);
        let ax = _mm256_castsi256_ps(_mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7fff_ffff)));
        let big = _mm256_sub_ps(c(1.0), erfc(ax));
        let sign = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(i32::MIN));
        let big = _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(big), sign));
        let r = _mm256_blendv_ps(big, small, _mm256_cmp_ps::<_CMP_LT_OQ>(ax, c(0.5)));
        _mm256_blendv_ps(r, x, _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x))
    }

    /// Applies `f` to `n` floats (a multiple of 8) from `src` into `dst`.
    ///
    /// # Safety
    /// `src` and `dst` address `n` floats each (they may be the same buffer); the host has
    /// AVX2 and FMA.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn map(src: *const f32, dst: *mut f32, n: i64, f: impl Fn(__m256) -> __m256) {
        let mut i = 0;
        while i + 8 <= n as usize {
            // SAFETY: i + 8 <= n, within both buffers (the caller's promise).
            unsafe { _mm256_storeu_ps(dst.add(i), f(_mm256_loadu_ps(src.add(i)))) };
            i += 8;
        }
    }

    macro_rules! tile_routine {
        ($name:ident, $f:ident) => {
            /// The AVX2 tile routine for the op of the same name (module docs); generated
            /// code calls it only on hosts with AVX2 and FMA.
            ///
            /// # Safety
            /// As [`map`].
            #[target_feature(enable = "avx2,fma")]
            pub(crate) unsafe extern "C" fn $name(src: *const f32, dst: *mut f32, n: i64) {
                // SAFETY: forwarded from the caller.
                unsafe { map(src, dst, n, |x| $f(x)) }
            }
        };
    }
    tile_routine!(exp_tile, exp);
    tile_routine!(tanh_tile, tanh);
    tile_routine!(sigmoid_tile, sigmoid);
    tile_routine!(log_tile, log);
    tile_routine!(log1p_tile, log1p);
    tile_routine!(erf_tile, erf);
    tile_routine!(erfc_tile, erfc);
}
