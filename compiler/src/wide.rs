//! AVX-512 tile routines for the transcendental members of fused loops.
//!
//! Cranelift's x64 backend has 128-bit vectors only, and a fused loop's time goes into
//! the exp/tanh/sigmoid polynomials (16–25 vector operations per four floats each). On a
//! host with AVX-512 the fused loop is therefore emitted in tiles of [`TILE`] elements
//! (see `codegen.rs`): Cranelift's own f32x4 loops compute the cheap members of a tile,
//! and each transcendental member is one call to a routine here that evaluates it over
//! the whole tile sixteen lanes at a time. The tile's intermediate values stay in a few
//! KiB of stack (in L1), so the extra stores and loads cost less than the 4× narrower
//! polynomial arithmetic they replace.
//!
//! **Invariant: every routine computes bit for bit what `math::FMath` emits for the
//! same op** — the same operations in the same order (the same fused multiply-adds, the
//! same constant rounding, the same min/max operand order for NaN, the same compare
//! predicates) — so a tile, the f32x4 loop that finishes the row, the scalar tail and a
//! host without AVX-512 all give identical results. `tests/wide.rs` checks this over the
//! whole float32 range including ±0, ±inf, NaN and subnormals.
//!
//! Routines have the C signature `fn(src: *const f32, dst: *mut f32, n: i64)`, `n` a
//! multiple of 16; `src` may equal `dst`. They are registered with the JIT only when the
//! host has AVX-512F (and the `AUTOCLUST_NO_AVX512` environment variable is unset, for
//! A/B measurements).

use crate::analyze::EwOp;

/// Elements per tile: 64 f32x4 vectors, 1 KiB per buffered value.
pub(crate) const TILE: usize = 256;

/// Whether the tile routines can be used on this host.
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx512f") && std::env::var_os("AUTOCLUST_NO_AVX512").is_none()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The ops with a tile routine.
pub(crate) const WIDE_OPS: [EwOp; 3] = [EwOp::Exp, EwOp::Tanh, EwOp::Sigmoid];

/// The JIT symbol name of `op`'s routine.
pub(crate) fn symbol(op: EwOp) -> &'static str {
    match op {
        EwOp::Exp => "autoclust_tile_exp_f32",
        EwOp::Tanh => "autoclust_tile_tanh_f32",
        EwOp::Sigmoid => "autoclust_tile_sigmoid_f32",
        _ => unreachable!("no tile routine for {op:?}"),
    }
}

/// The address of `op`'s routine. Only call this when [`available`] is true.
pub(crate) fn address(op: EwOp) -> *const u8 {
    #[cfg(target_arch = "x86_64")]
    {
        match op {
            EwOp::Exp => avx512::exp_tile as *const u8,
            EwOp::Tanh => avx512::tanh_tile as *const u8,
            EwOp::Sigmoid => avx512::sigmoid_tile as *const u8,
            _ => unreachable!("no tile routine for {op:?}"),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        unreachable!("tile routines exist on x86_64 only ({op:?})")
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    //! Each function mirrors the `FMath` method of the same name (see the module invariant).
    //! The polynomial coefficients are `math.rs`'s own constants.

    use std::arch::x86_64::*;

    use crate::math::{EXP_POLY, TANH_P, TANH_Q};

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
}
