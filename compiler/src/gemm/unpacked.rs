//! Single-precision GEMM without packing, for the small and thin products of real
//! training steps (an LSTM cell's `[32, 64]·[64, 256]`, attention heads, a batch-32 MLP).
//!
//! `matrixmultiply` copies ("packs") A and B into panels before every product. When the
//! product is small that copy costs as much as the arithmetic: in a Keras LSTM step the
//! packing took 17% of the time and the multiply-adds 21%. Here B's rows are read where
//! they lie — a register tile of `MR` rows × two vectors of C accumulates
//! `A[i, p]·B[p, j..]` over `p`, with A's element broadcast from memory — so nothing is
//! copied when B's columns are contiguous. A transposed B (its *rows* strided, each column
//! contiguous: a product with a transposed weight, `dz·Wᵀ`, as every backward pass through
//! a dense layer or an LSTM cell takes) is handled one column panel at a time: the panel's
//! `k × 32` (AVX2: `k × 16`) elements are transposed by 8×8 register blocks into a per-thread
//! scratch buffer, which the same register tile then reads as rows. The copy is `k·n`
//! elements against `m·k·n` multiply-adds, and only one panel (≤ 128 KiB) is live at a time,
//! so it stays in L1/L2 for every row tile that reads it.
//!
//! Invariant: every element of C is `fma(A[i,k-1], B[k-1,j], … fma(A[i,0], B[0,j], 0))`,
//! accumulated in `p` order with one rounding per step — whatever the tile, the block the
//! caller cut, the vector width (AVX-512 or AVX2) or the thread count. So the AVX-512 and
//! AVX2 paths agree bit for bit, and a product split across threads equals the unsplit
//! one.

/// The deepest product (`k`) taken here: a tile streams `k` rows of a 32-column panel of B,
/// which stays in L1/L2 only while `k` is moderate; deeper products are better packed.
/// Measured (BENCHMARKS.md, "GEMM depth"): on an Intel Xeon with AVX-512 the 1024-wide
/// inference MLP (`[128, 1024]·[1024, 1024]`) ran 1.9× faster packed than here at
/// `k = 1024`, while the Keras training steps, whose products are at most 784 deep, were
/// within noise with this bound at 128, 256, 512 or 1024.
pub(crate) const MAX_K: usize = 512;

/// Products of at most this many rows (one AVX-512 row tile) are taken here up to
/// [`SHORT_MAX_K`] deep: their tile streams B once, while packing would read B, write the
/// packed copy and read it again for a handful of rows — the late stages of a CNN at batch 2
/// (EfficientNetB0's `[8, 1152]·[1152, 192]`: that model 4–6% faster), a classifier head on a
/// small batch.
pub(crate) const SHORT_ROWS: usize = 8;

/// The depth bound of the short products: a tile sums its `k` products in one running sum
/// per element, whose rounding grows with `k`; packed products sum in blocks. ResNet50's output
/// (batch 2, 64²) against TensorFlow's, as a fraction of its scale: 3.1e-6 all packed, 3.2e-6
/// with this bound, 1.9e-5 at 2048 and 2.4e-5 unbounded (its 4608-deep products, memory-bound
/// either way); TensorFlow's own oneDNN-on and -off runs differ by 7.2e-6.
pub(crate) const SHORT_MAX_K: usize = 1152;

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

/// Whether a product with these strides and depth runs here: at most [`MAX_K`] deep, or at
/// most [`SHORT_ROWS`] rows and [`SHORT_MAX_K`] deep, C's columns contiguous, and B's columns contiguous (read in
/// place) or its rows (a transposed B, packed panel by panel). Depends only on `k`, the
/// whole product's `rows` and the strides — never on a block's size — so every block of a
/// split product takes the same path.
pub(crate) fn applies(rows: usize, k: usize, rsb: isize, csb: isize, csc: isize) -> bool {
    tier().is_some() && (k <= MAX_K || rows <= SHORT_ROWS && k <= SHORT_MAX_K) && (csb == 1 || rsb == 1) && csc == 1
}

/// Widest column panel of any tier (the AVX-512 tile's two vectors).
const PANEL: usize = 32;

/// One cache line of scratch.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([f32; 16]);

thread_local! {
    /// The panel buffer of a transposed B, one per thread (a split product packs each
    /// block's panels on the thread that runs the block).
    static SCRATCH: std::cell::RefCell<Vec<Line>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` with a scratch buffer of at least `len` floats, 64-byte aligned.
fn with_scratch<R>(len: usize, f: impl FnOnce(*mut f32) -> R) -> R {
    let lines = len.div_ceil(16).max(1);
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut v) => {
            if v.len() < lines {
                v.resize(lines, Line([0.0; 16]));
            }
            f(v.as_mut_ptr().cast())
        }
        // Never nested today; a fresh buffer keeps it correct if it ever is.
        Err(_) => f(vec![Line([0.0; 16]); lines].as_mut_ptr().cast()),
    })
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
    debug_assert!(csb == 1 || rsb == 1, "applies() checked B's columns or rows are contiguous");
    let Some(t) = tier() else { unreachable!("applies() checked the tier") };
    // SAFETY: forwarded from the caller.
    unsafe { sgemm_tier(t, m, k, n, a, rsa, csa, b, rsb, csb, c, rsc) }
}

/// Runs one tier's kernel (the tests compare tiers through it). A B with `csb == 1` is read
/// in place; otherwise `rsb == 1` and its panels are transposed into scratch.
///
/// # Safety
/// As [`sgemm`]; the host has the tier.
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
    csb: isize,
    c: *mut f32,
    rsc: isize,
) {
    #[cfg(target_arch = "x86_64")]
    {
        let run = |scratch: *mut f32| match tier {
            // SAFETY: forwarded; the caller checked the host has the tier.
            Tier::Avx512 => unsafe { x86::sgemm_avx512(m, k, n, a, rsa, csa, b, rsb, csb, c, rsc, scratch) },
            // SAFETY: as above.
            Tier::Avx2 => unsafe { x86::sgemm_avx2(m, k, n, a, rsa, csa, b, rsb, csb, c, rsc, scratch) },
        };
        if csb == 1 {
            run(std::ptr::null_mut())
        } else {
            with_scratch(k * PANEL, run)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (tier, m, k, n, a, rsa, csa, b, rsb, csb, c, rsc);
        unreachable!("applies() is false without x86-64")
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Rows of A per register tile (AVX-512: 8 rows × 32 columns = 16 accumulators).
    const MR512: usize = 8;
    /// Rows per tile on AVX2 (6 rows × 16 columns = 12 of the 16 ymm registers).
    const MR256: usize = 6;

    /// Columns `j..j+w` of B as a panel of rows: B itself when its columns are contiguous
    /// (`csb == 1`), else those columns transposed into `scratch` (row stride `ss`).
    /// Returns the panel's first element and row stride.
    ///
    /// # Safety
    /// B is a valid `k×n` matrix with `j + w ≤ n`; with `csb ≠ 1`, `rsb == 1` and `scratch`
    /// holds `k·ss` floats, `w ≤ ss`.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    #[target_feature(enable = "avx")]
    unsafe fn panel(
        k: usize,
        w: usize,
        b: *const f32,
        rsb: isize,
        csb: isize,
        j: usize,
        scratch: *mut f32,
        ss: usize,
    ) -> (*const f32, isize) {
        if csb == 1 {
            return (b.wrapping_add(j), rsb);
        }
        debug_assert!(rsb == 1 && w <= ss);
        // SAFETY: forwarded.
        unsafe { transpose_panel(k, w, b.wrapping_offset(j as isize * csb), csb, scratch, ss) };
        (scratch, ss as isize)
    }

    /// `s[p·ss + c] = B[p, c]` for `p < k`, `c < w`, where B's column `c` is the `k`
    /// contiguous floats at `b + c·csb`: 8×8 blocks transposed in registers, scalar edges.
    ///
    /// # Safety
    /// The columns are valid for `k` reads; `s` holds `k·ss` floats, `w ≤ ss`.
    #[target_feature(enable = "avx")]
    unsafe fn transpose_panel(k: usize, w: usize, b: *const f32, csb: isize, s: *mut f32, ss: usize) {
        let (k8, w8) = (k & !7, w & !7);
        let col = |c: usize| b.wrapping_offset(c as isize * csb);
        let mut c = 0;
        while c < w8 {
            let mut p = 0;
            while p < k8 {
                // SAFETY: columns c..c+8, elements p..p+8 lie inside B; rows p..p+8 of the
                // scratch, its columns c..c+8.
                unsafe {
                    let r0 = _mm256_loadu_ps(col(c).add(p));
                    let r1 = _mm256_loadu_ps(col(c + 1).add(p));
                    let r2 = _mm256_loadu_ps(col(c + 2).add(p));
                    let r3 = _mm256_loadu_ps(col(c + 3).add(p));
                    let r4 = _mm256_loadu_ps(col(c + 4).add(p));
                    let r5 = _mm256_loadu_ps(col(c + 5).add(p));
                    let r6 = _mm256_loadu_ps(col(c + 6).add(p));
                    let r7 = _mm256_loadu_ps(col(c + 7).add(p));
                    let t0 = _mm256_unpacklo_ps(r0, r1);
                    let t1 = _mm256_unpackhi_ps(r0, r1);
                    let t2 = _mm256_unpacklo_ps(r2, r3);
                    let t3 = _mm256_unpackhi_ps(r2, r3);
                    let t4 = _mm256_unpacklo_ps(r4, r5);
                    let t5 = _mm256_unpackhi_ps(r4, r5);
                    let t6 = _mm256_unpacklo_ps(r6, r7);
                    let t7 = _mm256_unpackhi_ps(r6, r7);
                    let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
                    let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
                    let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
                    let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
                    let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
                    let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
                    let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
                    let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
                    let d = s.add(p * ss + c);
                    _mm256_storeu_ps(d, _mm256_permute2f128_ps::<0x20>(u0, u4));
                    _mm256_storeu_ps(d.add(ss), _mm256_permute2f128_ps::<0x20>(u1, u5));
                    _mm256_storeu_ps(d.add(2 * ss), _mm256_permute2f128_ps::<0x20>(u2, u6));
                    _mm256_storeu_ps(d.add(3 * ss), _mm256_permute2f128_ps::<0x20>(u3, u7));
                    _mm256_storeu_ps(d.add(4 * ss), _mm256_permute2f128_ps::<0x31>(u0, u4));
                    _mm256_storeu_ps(d.add(5 * ss), _mm256_permute2f128_ps::<0x31>(u1, u5));
                    _mm256_storeu_ps(d.add(6 * ss), _mm256_permute2f128_ps::<0x31>(u2, u6));
                    _mm256_storeu_ps(d.add(7 * ss), _mm256_permute2f128_ps::<0x31>(u3, u7));
                }
                p += 8;
            }
            for p in k8..k {
                for r in 0..8 {
                    // SAFETY: as above, one element.
                    unsafe { *s.add(p * ss + c + r) = *col(c + r).add(p) };
                }
            }
            c += 8;
        }
        for c in w8..w {
            for p in 0..k {
                // SAFETY: as above, one element.
                unsafe { *s.add(p * ss + c) = *col(c).add(p) };
            }
        }
    }

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
        csb: isize,
        c: *mut f32,
        rsc: isize,
        scratch: *mut f32,
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
            let cj = c.wrapping_add(j);
            // SAFETY: columns j..j+w of B, k deep; the scratch holds k×32 floats.
            let (bj, rsb) = unsafe { panel(k, w, b, rsb, csb, j, scratch, 32) };
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
        csb: isize,
        c: *mut f32,
        rsc: isize,
        scratch: *mut f32,
    ) {
        let mut j = 0;
        while j < n {
            let w = (n - j).min(16);
            let lo = mask256(w);
            let hi = mask256(w.saturating_sub(8));
            let cj = c.wrapping_add(j);
            // SAFETY: columns j..j+w of B, k deep; the scratch holds k×16 floats.
            let (bj, rsb) = unsafe { panel(k, w, b, rsb, csb, j, scratch, 16) };
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
    fn reference(m: usize, k: usize, n: usize, a: &[f32], ta: bool, b: &[f32], tb: bool) -> Vec<f32> {
        let mut c = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0f32;
                for p in 0..k {
                    let x = if ta { a[p * m + i] } else { a[i * k + p] };
                    let y = if tb { b[j * k + p] } else { b[p * n + j] };
                    acc = x.mul_add(y, acc);
                }
                c[i * n + j] = acc;
            }
        }
        c
    }

    /// The product in float64, to check the definition itself is the product.
    fn exact(m: usize, k: usize, n: usize, a: &[f32], ta: bool, b: &[f32], tb: bool) -> Vec<f64> {
        let mut c = vec![0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k)
                    .map(|p| {
                        let x = if ta { a[p * m + i] } else { a[i * k + p] };
                        let y = if tb { b[j * k + p] } else { b[p * n + j] };
                        f64::from(x) * f64::from(y)
                    })
                    .sum();
            }
        }
        c
    }

    fn data(len: usize, seed: usize) -> Vec<f32> {
        (0..len).map(|i| ((i * 7919 + seed * 104_729) % 997) as f32 / 97.0 - 5.0).collect()
    }

    /// Every remainder of the row and column tiles and of the 8×8 transpose blocks, both
    /// layouts of A and of B, against the definition bit for bit (and the definition against
    /// the float64 product); C's padding (a wider row stride) is left alone.
    #[test]
    fn products_equal_the_fused_definition_bit_for_bit() {
        let Some(host) = tier() else { return };
        let tiers: &[Tier] = if host == Tier::Avx512 { &[Tier::Avx512, Tier::Avx2] } else { &[Tier::Avx2] };
        let shapes = [
            (1, 1, 1),
            (3, 0, 5),
            (7, 5, 33),
            (9, 17, 15),
            (17, 64, 47),
            (13, 3, 70),
            (8, 33, 16),
            (32, 256, 32),
            (16, 40, 64),
            (5, 9, 7),
            (8, 700, 40),
            (3, 1100, 33),
        ];
        for (m, k, n) in shapes {
            let (a, b) = (data(m * k, 1), data(k * n, 2));
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                let want = reference(m, k, n, &a, ta, &b, tb);
                for (w, x) in want.iter().zip(exact(m, k, n, &a, ta, &b, tb)) {
                    assert!((f64::from(*w) - x).abs() <= 1e-4 * x.abs().max(1.0), "{w} vs {x}");
                }
                let (rsa, csa) = if ta { (1, m as isize) } else { (k as isize, 1) };
                let (rsb, csb) = if tb { (1, k as isize) } else { (n as isize, 1) };
                let rsc = n + 3;
                let mut c = vec![f32::NAN; m * rsc];
                assert!(applies(m, k, rsb, csb, 1));
                // SAFETY: the vectors hold the described matrices.
                unsafe { sgemm(m, k, n, a.as_ptr(), rsa, csa, b.as_ptr(), rsb, csb, c.as_mut_ptr(), rsc as isize) };
                for i in 0..m {
                    assert_eq!(&c[i * rsc..i * rsc + n], &want[i * n..(i + 1) * n], "{m}x{k}x{n} ta={ta} tb={tb}");
                    assert!(c[i * rsc + n..(i + 1) * rsc].iter().all(|x| x.is_nan()), "padding written");
                }
                for &t in tiers {
                    let mut d = vec![f32::NAN; m * n];
                    // SAFETY: as above; the host has the tier.
                    unsafe {
                        sgemm_tier(t, m, k, n, a.as_ptr(), rsa, csa, b.as_ptr(), rsb, csb, d.as_mut_ptr(), n as isize)
                    };
                    assert_eq!(d, want, "{t:?} {m}x{k}x{n} ta={ta} tb={tb}");
                }
            }
        }
    }

    /// A transposed B that is a view into a wider matrix (its columns `k` apart in a row of
    /// `ld > k` floats: B is a slice of a larger weight) packs only its own elements.
    #[test]
    fn transposed_views_of_a_wider_matrix() {
        let Some(host) = tier() else { return };
        let (m, k, n, ld) = (11, 21, 37, 29);
        let a = data(m * k, 3);
        let big = data(n * ld, 4);
        let b: Vec<f32> = (0..n).flat_map(|j| big[j * ld..j * ld + k].to_vec()).collect();
        let want = reference(m, k, n, &a, false, &b, true);
        let tiers: &[Tier] = if host == Tier::Avx512 { &[Tier::Avx512, Tier::Avx2] } else { &[Tier::Avx2] };
        for &t in tiers {
            let mut d = vec![f32::NAN; m * n];
            // SAFETY: `big` holds n rows of ld ≥ k floats; the host has the tier.
            unsafe {
                sgemm_tier(
                    t,
                    m,
                    k,
                    n,
                    a.as_ptr(),
                    k as isize,
                    1,
                    big.as_ptr(),
                    1,
                    ld as isize,
                    d.as_mut_ptr(),
                    n as isize,
                )
            };
            assert_eq!(d, want, "{t:?}");
        }
    }

    #[test]
    fn only_moderate_depths_and_unit_column_strides_of_c_apply() {
        if tier().is_none() {
            assert!(!applies(64, 8, 16, 1, 1));
            return;
        }
        assert!(applies(64, MAX_K, 16, 1, 1));
        assert!(!applies(64, MAX_K + 1, 16, 1, 1));
        assert!(applies(SHORT_ROWS, SHORT_MAX_K, 16, 1, 1), "a short product, deeper");
        assert!(!applies(SHORT_ROWS, SHORT_MAX_K + 1, 16, 1, 1));
        assert!(!applies(SHORT_ROWS + 1, MAX_K + 1, 16, 1, 1));
        assert!(!applies(64, 8, 16, 1, 2), "a strided C goes to matrixmultiply");
        assert!(applies(64, 8, 1, 5, 1), "a transposed B is packed by panels");
        assert!(!applies(64, 8, 3, 5, 1), "a B strided both ways goes to matrixmultiply");
    }
}
