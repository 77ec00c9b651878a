//! Single-precision GEMM without packing, for the small and thin products of real
//! training steps (an LSTM cell's `[32, 64]·[64, 256]`, attention heads, a batch-32 MLP).
//!
//! `matrixmultiply` copies ("packs") A and B into panels before every product. When the
//! product is small that copy costs as much as the arithmetic: in a Keras LSTM step the
//! packing took 17% of the time and the multiply-adds 21%. Here B's rows are read where
//! they lie — a register tile of `MR` rows × two vectors of C accumulates
//! `A[i, p]·B[p, j..]` over `p`, with A's element broadcast from memory — so nothing is
//! copied when B's columns are contiguous. A B whose *rows* are contiguous (a product with
//! a transposed weight, `dz·Wᵀ`) is transposed once into a scratch buffer first.
//!
//! Invariant: every element of C is `fma(A[i,k-1], B[k-1,j], … fma(A[i,0], B[0,j], 0))`,
//! accumulated in `p` order with one rounding per step — whatever the tile, the block the
//! caller cut, the vector width (AVX-512 or AVX2) or the thread count. So the AVX-512 and
//! AVX2 paths agree bit for bit, and a product split across threads equals the unsplit
//! one.

/// The deepest product (`k`) taken here: a tile streams `k` rows of a 32-column panel of B,
/// which stays in L1/L2 only while `k` is moderate; deeper products are better packed.
pub(crate) const MAX_K: usize = 1024;

/// Which vector unit runs the kernels, detected once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tier {
    Avx512,
    Avx2,
}

/// The tier this host supports, if any.
pub(crate) fn tier() -> Option<Tier> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::OnceLock;
        static TIER: OnceLock<Option<Tier>> = OnceLock::new();
        *TIER.get_or_init(|| {
            if std::is_x86_feature_detected!("avx512f") {
                Some(Tier::Avx512)
            } else if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                Some(Tier::Avx2)
            } else {
                None
            }
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// Whether a product with these strides and depth runs here. Depends only on `k` and the
/// strides — never on `m` or `n` — so every block of a split product takes the same path.
pub(crate) fn applies(k: usize, csb: isize, csc: isize) -> bool {
    tier().is_some() && k <= MAX_K && csb == 1 && csc == 1
}

/// `C = A·B` (C's columns contiguous); the caller checked [`applies`].
///
/// # Safety
/// The pointers and strides describe valid `m×k`, `k×n` and `m×n` matrices; C is writable
/// and does not alias A or B.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn sgemm(
    m: usize,
    k: usize,
    n: usize,
    a: *const f32,
    rsa: isize,
    csa: isize,
    b: *const f32,
    rsb: isize,
    csb: isize,
    c: *mut f32,
    rsc: isize,
) {
    debug_assert_eq!(csb, 1, "applies() checked B's columns are contiguous");
    // SAFETY: forwarded from the caller.
    unsafe { dispatch(m, k, n, a, rsa, csa, b, rsb, c, rsc) }
}

#[allow(clippy::too_many_arguments)]
unsafe fn dispatch(
    m: usize,
    k: usize,
    n: usize,
    a: *const f32,
    rsa: isize,
    csa: isize,
    b: *const f32,
    rsb: isize,
    c: *mut f32,
    rsc: isize,
) {
    #[cfg(target_arch = "x86_64")]
    match tier() {
        // SAFETY: the tier was detected on this host; the matrices are the caller's.
        Some(Tier::Avx512) => unsafe { x86::sgemm_avx512(m, k, n, a, rsa, csa, b, rsb, c, rsc) },
        // SAFETY: as above.
        Some(Tier::Avx2) => unsafe { x86::sgemm_avx2(m, k, n, a, rsa, csa, b, rsb, c, rsc) },
        None => unreachable!("applies() checked the tier"),
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (m, k, n, a, rsa, csa, b, rsb, c, rsc);
        unreachable!("applies() is false without x86-64")
    }
}

/// Runs one tier's kernel with a given tier, for the tests that compare tiers.
#[cfg(test)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn sgemm_tier(
    tier: Tier,
    m: usize,
    k: usize,
    n: usize,
    a: *const f32,
    rsa: isize,
    csa: isize,
    b: *const f32,
    rsb: isize,
    c: *mut f32,
    rsc: isize,
) {
    // SAFETY: forwarded; the test checks the host has the tier.
    unsafe {
        match tier {
            Tier::Avx512 => x86::sgemm_avx512(m, k, n, a, rsa, csa, b, rsb, c, rsc),
            Tier::Avx2 => x86::sgemm_avx2(m, k, n, a, rsa, csa, b, rsb, c, rsc),
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Rows of A per register tile (AVX-512: 8 rows × 32 columns = 16 accumulators).
    const MR512: usize = 8;
    /// Rows per tile on AVX2 (6 rows × 16 columns = 12 of the 16 ymm registers).
    const MR256: usize = 6;

    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn sgemm_avx512(
        m: usize,
        k: usize,
        n: usize,
        a: *const f32,
        rsa: isize,
        csa: isize,
        b: *const f32,
        rsb: isize,
        c: *mut f32,
        rsc: isize,
    ) {
        let mut j = 0;
        while j < n {
            let w = (n - j).min(32);
            let lo: __mmask16 = if w >= 16 { 0xffff } else { (1u16 << w) - 1 };
            let hi: __mmask16 = if w >= 32 {
                0xffff
            } else if w > 16 {
                (1u16 << (w - 16)) - 1
            } else {
                0
            };
            let (bj, cj) = (b.wrapping_add(j), c.wrapping_add(j));
            let mut i = 0;
            // SAFETY (all tiles): rows i..i+MR and columns j..j+w lie inside the matrices;
            // the masks keep loads and stores inside them.
            while i + MR512 <= m {
                unsafe {
                    tile512::<MR512>(
                        k,
                        a.wrapping_offset(i as isize * rsa),
                        rsa,
                        csa,
                        bj,
                        rsb,
                        cj.wrapping_offset(i as isize * rsc),
                        rsc,
                        lo,
                        hi,
                    )
                };
                i += MR512;
            }
            let rest = m - i;
            let (ai, ci) = (a.wrapping_offset(i as isize * rsa), cj.wrapping_offset(i as isize * rsc));
            unsafe {
                match rest {
                    0 => {}
                    1 => tile512::<1>(k, ai, rsa, csa, bj, rsb, ci, rsc, lo, hi),
                    2 => tile512::<2>(k, ai, rsa, csa, bj, rsb, ci, rsc, lo, hi),
                    3 => tile512::<3>(k, ai, rsa, csa, bj, rsb, ci, rsc, lo, hi),
                    4 => tile512::<4>(k, ai, rsa, csa, bj, rsb, ci, rsc, lo, hi),
                    5 => tile512::<5>(k, ai, rsa, csa, bj, rsb, ci, rsc, lo, hi),
                    6 => tile512::<6>(k, ai, rsa, csa, bj, rsb, ci, rsc, lo, hi),
                    _ => tile512::<7>(k, ai, rsa, csa, bj, rsb, ci, rsc, lo, hi),
                }
            }
            j += 32;
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn tile512<const MR: usize>(
        k: usize,
        a: *const f32,
        rsa: isize,
        csa: isize,
        b: *const f32,
        rsb: isize,
        c: *mut f32,
        rsc: isize,
        lo: __mmask16,
        hi: __mmask16,
    ) {
        let mut acc0 = [_mm512_setzero_ps(); MR];
        let mut acc1 = [_mm512_setzero_ps(); MR];
        for p in 0..k as isize {
            // SAFETY: row p of the panel; masked lanes are not read.
            let (b0, b1) = unsafe {
                let bp = b.offset(p * rsb);
                (_mm512_maskz_loadu_ps(lo, bp), _mm512_maskz_loadu_ps(hi, bp.wrapping_add(16)))
            };
            for r in 0..MR {
                // SAFETY: A[r, p] lies inside A.
                let x = _mm512_set1_ps(unsafe { *a.offset(r as isize * rsa + p * csa) });
                acc0[r] = _mm512_fmadd_ps(x, b0, acc0[r]);
                acc1[r] = _mm512_fmadd_ps(x, b1, acc1[r]);
            }
        }
        for r in 0..MR {
            // SAFETY: row r of the C tile; masked lanes are not written.
            unsafe {
                let cr = c.offset(r as isize * rsc);
                _mm512_mask_storeu_ps(cr, lo, acc0[r]);
                _mm512_mask_storeu_ps(cr.wrapping_add(16), hi, acc1[r]);
            }
        }
    }

    /// The lane mask of the first `w` of 8 lanes, as AVX2's masked loads take it.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn mask256(w: usize) -> __m256i {
        let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        _mm256_cmpgt_epi32(_mm256_set1_epi32(w.min(8) as i32), lanes)
    }

    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn sgemm_avx2(
        m: usize,
        k: usize,
        n: usize,
        a: *const f32,
        rsa: isize,
        csa: isize,
        b: *const f32,
        rsb: isize,
        c: *mut f32,
        rsc: isize,
    ) {
        let mut j = 0;
        while j < n {
            let w = (n - j).min(16);
            let lo = mask256(w);
            let hi = mask256(w.saturating_sub(8));
            let (bj, cj) = (b.wrapping_add(j), c.wrapping_add(j));
            let mut i = 0;
            // SAFETY (all tiles): as in the AVX-512 path.
            while i + MR256 <= m {
                unsafe {
                    tile256::<MR256>(
                        k,
                        a.wrapping_offset(i as isize * rsa),
                        rsa,
                        csa,
                        bj,
                        rsb,
                        cj.wrapping_offset(i as isize * rsc),
                        rsc,
                        lo,
                        hi,
                    )
                };
                i += MR256;
            }
            let rest = m - i;
            let (ai, ci) = (a.wrapping_offset(i as isize * rsa), cj.wrapping_offset(i as isize * rsc));
            unsafe {
                match rest {
                    0 => {}
                    1 => tile256::<1>(k, ai, rsa, csa, bj, rsb, ci, rsc, lo, hi),
                    2 => tile256::<2>(k, ai, rsa, csa, bj, rsb, ci, rsc, lo, hi),
                    3 => tile256::<3>(k, ai, rsa, csa, bj, rsb, ci, rsc, lo, hi),
                    4 => tile256::<4>(k, ai, rsa, csa, bj, rsb, ci, rsc, lo, hi),
                    _ => tile256::<5>(k, ai, rsa, csa, bj, rsb, ci, rsc, lo, hi),
                }
            }
            j += 16;
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn tile256<const MR: usize>(
        k: usize,
        a: *const f32,
        rsa: isize,
        csa: isize,
        b: *const f32,
        rsb: isize,
        c: *mut f32,
        rsc: isize,
        lo: __m256i,
        hi: __m256i,
    ) {
        let mut acc0 = [_mm256_setzero_ps(); MR];
        let mut acc1 = [_mm256_setzero_ps(); MR];
        for p in 0..k as isize {
            // SAFETY: row p of the panel; masked lanes are not read.
            let (b0, b1) = unsafe {
                let bp = b.offset(p * rsb);
                (_mm256_maskload_ps(bp, lo), _mm256_maskload_ps(bp.wrapping_add(8), hi))
            };
            for r in 0..MR {
                // SAFETY: A[r, p] lies inside A.
                let x = _mm256_set1_ps(unsafe { *a.offset(r as isize * rsa + p * csa) });
                acc0[r] = _mm256_fmadd_ps(x, b0, acc0[r]);
                acc1[r] = _mm256_fmadd_ps(x, b1, acc1[r]);
            }
        }
        for r in 0..MR {
            // SAFETY: row r of the C tile; masked lanes are not written.
            unsafe {
                let cr = c.offset(r as isize * rsc);
                _mm256_maskstore_ps(cr, lo, acc0[r]);
                _mm256_maskstore_ps(cr.wrapping_add(8), hi, acc1[r]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The invariant's definition: one fused multiply-add per step, in `p` order.
    fn reference(m: usize, k: usize, n: usize, a: &[f32], ta: bool, b: &[f32]) -> Vec<f32> {
        let mut c = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0f32;
                for p in 0..k {
                    let x = if ta { a[p * m + i] } else { a[i * k + p] };
                    let y = b[p * n + j];
                    acc = x.mul_add(y, acc);
                }
                c[i * n + j] = acc;
            }
        }
        c
    }

    fn data(len: usize, seed: usize) -> Vec<f32> {
        (0..len).map(|i| ((i * 7919 + seed * 104_729) % 997) as f32 / 97.0 - 5.0).collect()
    }

    /// Every remainder of the row and column tiles, both layouts of A, against the
    /// definition bit for bit; C's padding (a wider row stride) is left alone.
    #[test]
    fn products_equal_the_fused_definition_bit_for_bit() {
        let Some(host) = tier() else { return };
        let tiers: &[Tier] = if host == Tier::Avx512 { &[Tier::Avx512, Tier::Avx2] } else { &[Tier::Avx2] };
        for (m, k, n) in [(1, 1, 1), (3, 0, 5), (7, 5, 33), (9, 17, 15), (17, 64, 47), (13, 3, 70), (8, 33, 16)] {
            let (a, b) = (data(m * k, 1), data(k * n, 2));
            for ta in [false, true] {
                let want = reference(m, k, n, &a, ta, &b);
                let (rsa, csa) = if ta { (1, m as isize) } else { (k as isize, 1) };
                let (rsb, csb) = (n as isize, 1);
                let rsc = n + 3;
                let mut c = vec![f32::NAN; m * rsc];
                assert!(applies(k, csb, 1));
                // SAFETY: the vectors hold the described matrices.
                unsafe { sgemm(m, k, n, a.as_ptr(), rsa, csa, b.as_ptr(), rsb, csb, c.as_mut_ptr(), rsc as isize) };
                for i in 0..m {
                    assert_eq!(&c[i * rsc..i * rsc + n], &want[i * n..(i + 1) * n], "{m}x{k}x{n} ta={ta}");
                    assert!(c[i * rsc + n..(i + 1) * rsc].iter().all(|x| x.is_nan()), "padding written");
                }
                for &t in tiers {
                    let mut d = vec![f32::NAN; m * n];
                    // SAFETY: as above; the host has the tier.
                    unsafe {
                        sgemm_tier(t, m, k, n, a.as_ptr(), rsa, csa, b.as_ptr(), rsb, d.as_mut_ptr(), n as isize)
                    };
                    assert_eq!(d, want, "{t:?} {m}x{k}x{n} ta={ta}");
                }
            }
        }
    }

    #[test]
    fn only_moderate_depths_and_unit_column_strides_of_c_apply() {
        if tier().is_none() {
            assert!(!applies(8, 1, 1));
            return;
        }
        assert!(applies(MAX_K, 1, 1));
        assert!(!applies(MAX_K + 1, 1, 1));
        assert!(!applies(8, 1, 2), "a strided C goes to matrixmultiply");
        assert!(!applies(8, 5, 1), "a transposed B goes to matrixmultiply");
    }
}
