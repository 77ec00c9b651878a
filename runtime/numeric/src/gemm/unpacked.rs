//! Single-precision GEMM without packing A, for every float32 product whose C has
//! contiguous columns and whose B has contiguous columns or rows: the small and thin products
//! of real training steps (an LSTM cell's `[32, 64]·[64, 256]`, attention heads, a batch-32
//! MLP) and the large ones (a 1024-wide dense layer, a convolution's im2col product).
//!
//! `matrixmultiply` copies ("packs") A and B into panels before every product. When the
//! product is small that copy costs as much as the arithmetic: in a Keras LSTM step the
//! packing took 17% of the time and the multiply-adds 21%. Here A is read where it lies —
//! a register tile of `MR` rows × two vectors of C accumulates `A[i, p]·B[p, j..]` over `p`,
//! with A's element broadcast from memory — and B one column panel (32 columns, AVX2: 16)
//! at a time: read in place when its columns are contiguous and few rows read it, else
//! copied into a per-thread scratch buffer (a transposed B — a product with a transposed
//! weight, `dz·Wᵀ`, as every backward pass through a dense layer takes — transposed by 8×8
//! register blocks on the way), which every row tile then reads as contiguous rows from
//! L1/L2. The copy is `k·n` elements against `m·k·n` multiply-adds.
//!
//! A deep product ([`chunked`]) goes through its panels [`KC`] rows at a time, so the
//! panel's copy stays in L1 (deep products read in place streamed one row per page: the
//! 1024-wide MLP's `[128, 1024]·[1024, 1024]` ran 10–15% slower here unchunked than packed,
//! and 1.2× faster than packed chunked, BENCHMARKS.md). Not packing A also lets a large
//! product be cut into more blocks than threads at no cost (`gemm::fine_blocks`).
//!
//! Invariant: every element of C is `fma(A[i,k-1], B[k-1,j], … fma(A[i,0], B[0,j], 0))`,
//! accumulated in `p` order with one rounding per step — for a chunked product, within each
//! `KC`-deep chunk, the chunks' sums then added in order — whatever the tile, whether B was
//! copied, the block the caller cut, the vector width (AVX-512 or AVX2) or the thread
//! count. So the AVX-512 and AVX2 paths agree bit for bit, and a product split across
//! threads equals the unsplit one.

/// The deepest product (`k`) summed in one chain per element; deeper products are
/// [`chunked`].
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

/// Whether a product with these strides runs here: C's columns contiguous, and B's columns
/// contiguous (read in place) or its rows (a transposed B, packed panel by panel). Depends
/// only on the strides — never on a block's size — so every block of a split product takes
/// the same path.
pub(crate) fn applies(rsb: isize, csb: isize, csc: isize) -> bool {
    tier().is_some() && (csb == 1 || rsb == 1) && csc == 1
}

/// Whether a product of depth `k` (the whole product having `rows` rows) is summed in
/// [`KC`]-deep chunks: deeper than [`MAX_K`], unless short (see [`SHORT_ROWS`]). Depends
/// only on `k` and `rows`, so every block of a split product sums alike.
pub(crate) fn chunked(rows: usize, k: usize) -> bool {
    k > MAX_K && !(rows <= SHORT_ROWS && k <= SHORT_MAX_K)
}

/// The depth of one chunk of a [`chunked`] product: its `KC × 32` panel of B (32 KiB) is
/// copied into scratch and stays in L1 while every row tile of A reads it. Each chunk's
/// products are summed from zero and the chunk's sum then added to C — blocked summation,
/// as packed GEMMs do (`matrixmultiply` sums 256-deep blocks too), whose rounding error
/// grows with the number of chunks rather than with `k`.
pub(crate) const KC: usize = 256;

/// From this many rows (of the block being computed) a row-major B's panels are copied into
/// scratch too: every row tile streams the panel, which read in place has one row per
/// page when B is wide (`k` TLB entries per panel), contiguous in scratch. The copy changes
/// no arithmetic, so the choice may depend on the block.
const COPY_ROWS: usize = 128;

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
    rows: usize,
) {
    debug_assert!(csb == 1 || rsb == 1, "applies() checked B's columns or rows are contiguous");
    let Some(t) = tier() else { unreachable!("applies() checked the tier") };
    // SAFETY: forwarded from the caller.
    unsafe { sgemm_tier(t, m, k, n, a, rsa, csa, b, rsb, csb, c, rsc, chunked(rows, k)) }
}

/// Runs one tier's kernel (the tests compare tiers through it). B's panels are copied into
/// scratch (transposed when `rsb == 1`) — [`KC`] rows at a time when `chunked` ([`chunked`])
/// — except that a B with `csb == 1` is read in place by fewer than [`COPY_ROWS`] rows when
/// unchunked, and by a block of at most [`SHORT_ROWS`] rows chunk by chunk: a handful
/// of rows cannot amortise the copy (a `[2, 4608]·[4608, 512]` convolution product of
/// ResNet50V2's last stage ran 2–3× faster read in place).
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
    chunked: bool,
) {
    #[cfg(target_arch = "x86_64")]
    {
        let kc = if chunked { KC } else { k.max(1) };
        if n == 1 {
            // One column: eight rows at a time in the vector lanes (both tiers alike).
            // SAFETY: forwarded; every tier has AVX2 and FMA.
            unsafe { x86::gemv(m, k, a, rsa, csa, b, rsb, c, rsc, kc) };
            return;
        }
        let run = |scratch: *mut f32| match tier {
            // SAFETY: forwarded; the caller checked the host has the tier.
            Tier::Avx512 => unsafe { x86::sgemm_avx512(m, k, n, a, rsa, csa, b, rsb, csb, c, rsc, scratch, kc) },
            // SAFETY: as above.
            Tier::Avx2 => unsafe { x86::sgemm_avx2(m, k, n, a, rsa, csa, b, rsb, csb, c, rsc, scratch, kc) },
        };
        if csb == 1 && (!chunked && m < COPY_ROWS || m <= SHORT_ROWS) {
            run(std::ptr::null_mut())
        } else {
            with_scratch(kc.min(k) * PANEL, run)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (tier, m, k, n, a, rsa, csa, b, rsb, csb, c, rsc, chunked);
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

    /// Rows `p0..p0+kc` of columns `j..j+w` of B copied into `scratch` as rows of stride
    /// `ss` (a chunk of a chunked product's panel), whatever B's layout. Returns the copy.
    ///
    /// # Safety
    /// B is a valid `k×n` matrix with `p0 + kc ≤ k`, `j + w ≤ n`, its columns (`csb == 1`)
    /// or rows (`rsb == 1`) contiguous; `scratch` holds `kc·ss` floats, `w ≤ ss`.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    #[target_feature(enable = "avx")]
    unsafe fn chunk(
        kc: usize,
        w: usize,
        b: *const f32,
        rsb: isize,
        csb: isize,
        j: usize,
        p0: usize,
        scratch: *mut f32,
        ss: usize,
    ) -> (*const f32, isize) {
        let first = b.wrapping_offset(p0 as isize * rsb + j as isize * csb);
        if csb == 1 {
            for p in 0..kc {
                // SAFETY: row p0+p of B, its columns j..j+w; row p of the scratch.
                unsafe { std::ptr::copy_nonoverlapping(first.offset(p as isize * rsb), scratch.add(p * ss), w) };
            }
        } else {
            debug_assert!(rsb == 1 && w <= ss);
            // SAFETY: forwarded; each column's elements p0..p0+kc are contiguous.
            unsafe { transpose_panel(kc, w, first, csb, scratch, ss) };
        }
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
        kc: usize,
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
            let mut p0 = 0;
            loop {
                let d = (k - p0).min(kc);
                let (bj, rs) = if scratch.is_null() {
                    (b.wrapping_offset(p0 as isize * rsb).wrapping_add(j), rsb)
                } else {
                    // SAFETY: rows p0..p0+d of the panel; the scratch holds kc×32 floats.
                    unsafe { chunk(d, w, b, rsb, csb, j, p0, scratch, 32) }
                };
                // SAFETY: A's columns p0..p0+d, the panel's rows, C's columns j..j+w.
                unsafe {
                    rows512(m, d, a.wrapping_offset(p0 as isize * csa), rsa, csa, bj, rs, cj, rsc, lo, hi, p0 > 0)
                };
                p0 += kc;
                if p0 >= k {
                    break;
                }
            }
            j += 32;
        }
    }

    /// Every row tile of one panel (or chunk of a panel) `b`, `k` deep, into C's columns at
    /// `c`: set (`add` false) or added to (`add`, a later chunk).
    ///
    /// # Safety
    /// A's `m` rows hold `k` elements, the panel `k` rows of the masks' width, C `m` rows.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn rows512(
        m: usize,
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
        add: bool,
    ) {
        let mut i = 0;
        // SAFETY (all tiles): rows i..i+MR lie inside A and C; the masks keep loads and
        // stores inside the panel's columns.
        while i + MR512 <= m {
            unsafe {
                tile512::<MR512>(
                    k,
                    a.wrapping_offset(i as isize * rsa),
                    rsa,
                    csa,
                    b,
                    rsb,
                    c.wrapping_offset(i as isize * rsc),
                    rsc,
                    lo,
                    hi,
                    add,
                )
            };
            i += MR512;
        }
        let (ai, ci) = (a.wrapping_offset(i as isize * rsa), c.wrapping_offset(i as isize * rsc));
        unsafe {
            match m - i {
                0 => {}
                1 => tile512::<1>(k, ai, rsa, csa, b, rsb, ci, rsc, lo, hi, add),
                2 => tile512::<2>(k, ai, rsa, csa, b, rsb, ci, rsc, lo, hi, add),
                3 => tile512::<3>(k, ai, rsa, csa, b, rsb, ci, rsc, lo, hi, add),
                4 => tile512::<4>(k, ai, rsa, csa, b, rsb, ci, rsc, lo, hi, add),
                5 => tile512::<5>(k, ai, rsa, csa, b, rsb, ci, rsc, lo, hi, add),
                6 => tile512::<6>(k, ai, rsa, csa, b, rsb, ci, rsc, lo, hi, add),
                _ => tile512::<7>(k, ai, rsa, csa, b, rsb, ci, rsc, lo, hi, add),
            }
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
        add: bool,
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
                let (mut v0, mut v1) = (acc0[r], acc1[r]);
                if add {
                    v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(lo, cr), v0);
                    v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(hi, cr.wrapping_add(16)), v1);
                }
                _mm512_mask_storeu_ps(cr, lo, v0);
                _mm512_mask_storeu_ps(cr.wrapping_add(16), hi, v1);
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
        kc: usize,
    ) {
        let mut j = 0;
        while j < n {
            let w = (n - j).min(16);
            let lo = mask256(w);
            let hi = mask256(w.saturating_sub(8));
            let cj = c.wrapping_add(j);
            let mut p0 = 0;
            loop {
                let d = (k - p0).min(kc);
                let (bj, rs) = if scratch.is_null() {
                    (b.wrapping_offset(p0 as isize * rsb).wrapping_add(j), rsb)
                } else {
                    // SAFETY: rows p0..p0+d of the panel; the scratch holds kc×16 floats.
                    unsafe { chunk(d, w, b, rsb, csb, j, p0, scratch, 16) }
                };
                let ap = a.wrapping_offset(p0 as isize * csa);
                // SAFETY: A's columns p0..p0+d, the panel's rows, C's columns j..j+w.
                unsafe {
                    if w == 16 {
                        rows256::<true>(m, d, ap, rsa, csa, bj, rs, cj, rsc, lo, hi, p0 > 0)
                    } else {
                        rows256::<false>(m, d, ap, rsa, csa, bj, rs, cj, rsc, lo, hi, p0 > 0)
                    }
                };
                p0 += kc;
                if p0 >= k {
                    break;
                }
            }
            j += 16;
        }
    }

    /// Every row tile of one panel (or chunk of a panel) `b`, `k` deep, into C's columns at
    /// `c`: set (`add` false) or added to (`add`, a later chunk). `FULL`: the panel is 16
    /// columns wide (both masks all ones), and its rows are read by plain loads — AMD's
    /// masked loads cost more than plain ones, and a full panel reads two per step.
    ///
    /// # Safety
    /// A's `m` rows hold `k` elements, the panel `k` rows of the masks' width, C `m` rows.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn rows256<const FULL: bool>(
        m: usize,
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
        add: bool,
    ) {
        let mut i = 0;
        // SAFETY (all tiles): rows i..i+MR lie inside A and C; the masks keep loads and
        // stores inside the panel's columns.
        while i + MR256 <= m {
            unsafe {
                tile256::<MR256, FULL>(
                    k,
                    a.wrapping_offset(i as isize * rsa),
                    rsa,
                    csa,
                    b,
                    rsb,
                    c.wrapping_offset(i as isize * rsc),
                    rsc,
                    lo,
                    hi,
                    add,
                )
            };
            i += MR256;
        }
        let (ai, ci) = (a.wrapping_offset(i as isize * rsa), c.wrapping_offset(i as isize * rsc));
        unsafe {
            match m - i {
                0 => {}
                1 => tile256::<1, FULL>(k, ai, rsa, csa, b, rsb, ci, rsc, lo, hi, add),
                2 => tile256::<2, FULL>(k, ai, rsa, csa, b, rsb, ci, rsc, lo, hi, add),
                3 => tile256::<3, FULL>(k, ai, rsa, csa, b, rsb, ci, rsc, lo, hi, add),
                4 => tile256::<4, FULL>(k, ai, rsa, csa, b, rsb, ci, rsc, lo, hi, add),
                _ => tile256::<5, FULL>(k, ai, rsa, csa, b, rsb, ci, rsc, lo, hi, add),
            }
        }
    }

    /// A one-column product `C[i] = Σ_p A[i, p]·B[p]` (a convolution with one output
    /// channel, a `Dense(1)` head and its kernel's gradient), eight rows of C per vector — the
    /// panel tiles would fill one lane of sixteen. Each lane sums its row by the invariant's
    /// chain (one FMA per `p`, in order, `kc`-deep chunks added in order), so the result is
    /// the tiles' bit for bit. A with contiguous columns (`rsa == 1`, a transposed operand:
    /// the filter gradient's `colᵀ·dy`) is read eight rows per load; A with contiguous rows
    /// (`csa == 1`: the forward im2col product) by 8×8 blocks transposed in registers; rows
    /// left over (and other strides) by the scalar chain.
    ///
    /// # Safety
    /// A is a valid `m×k` matrix, B holds `k` elements at stride `rsb`, C `m` at stride `rsc`;
    /// the host has AVX2 and FMA.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn gemv(
        m: usize,
        k: usize,
        a: *const f32,
        rsa: isize,
        csa: isize,
        b: *const f32,
        rsb: isize,
        c: *mut f32,
        rsc: isize,
        kc: usize,
    ) {
        let kc = kc.max(1);
        let bp = |p: usize| unsafe { *b.offset(p as isize * rsb) };
        let mut i = 0;
        if rsa == 1 || csa == 1 {
            let mut lanes = [0f32; 8];
            while i + 8 <= m {
                let ai = a.wrapping_offset(i as isize * rsa);
                let mut sum = _mm256_setzero_ps();
                let mut p0 = 0;
                loop {
                    let d = (k - p0).min(kc);
                    let mut acc = _mm256_setzero_ps();
                    let mut p = p0;
                    if rsa == 1 {
                        while p < p0 + d {
                            // SAFETY: A[i..i+8, p], contiguous.
                            let x = unsafe { _mm256_loadu_ps(ai.offset(p as isize * csa)) };
                            acc = _mm256_fmadd_ps(x, _mm256_set1_ps(bp(p)), acc);
                            p += 1;
                        }
                    } else {
                        while p + 8 <= p0 + d {
                            // SAFETY: rows i..i+8 of A, their elements p..p+8.
                            let cols = unsafe { transposed8(ai.add(p), rsa) };
                            for (q, x) in cols.into_iter().enumerate() {
                                acc = _mm256_fmadd_ps(x, _mm256_set1_ps(bp(p + q)), acc);
                            }
                            p += 8;
                        }
                        while p < p0 + d {
                            for (r, l) in lanes.iter_mut().enumerate() {
                                // SAFETY: A[i + r, p].
                                *l = unsafe { *ai.offset(r as isize * rsa + p as isize) };
                            }
                            let x = unsafe { _mm256_loadu_ps(lanes.as_ptr()) };
                            acc = _mm256_fmadd_ps(x, _mm256_set1_ps(bp(p)), acc);
                            p += 1;
                        }
                    }
                    sum = if p0 == 0 { acc } else { _mm256_add_ps(sum, acc) };
                    p0 += kc;
                    if p0 >= k {
                        break;
                    }
                }
                // SAFETY: `lanes` holds eight floats.
                unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), sum) };
                for (r, &v) in lanes.iter().enumerate() {
                    // SAFETY: C[i + r].
                    unsafe { *c.offset((i + r) as isize * rsc) = v };
                }
                i += 8;
            }
        }
        for i in i..m {
            let ai = a.wrapping_offset(i as isize * rsa);
            let mut sum = 0f32;
            let mut p0 = 0;
            loop {
                let mut acc = 0f32;
                for p in p0..(p0 + kc).min(k) {
                    // SAFETY: A[i, p]; `mul_add` is one rounding, as the vector FMA.
                    acc = unsafe { *ai.offset(p as isize * csa) }.mul_add(bp(p), acc);
                }
                sum = if p0 == 0 { acc } else { sum + acc };
                p0 += kc;
                if p0 >= k {
                    break;
                }
            }
            // SAFETY: C[i].
            unsafe { *c.offset(i as isize * rsc) = sum };
        }
    }

    /// Eight rows of eight consecutive floats (row `r` at `a + r·rs`), transposed: vector `q`
    /// holds element `q` of each row, lane `r` row `r`'s.
    ///
    /// # Safety
    /// The 64 floats lie inside one allocation; the host has AVX2.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn transposed8(a: *const f32, rs: isize) -> [__m256; 8] {
        // SAFETY: forwarded.
        let r: [__m256; 8] = std::array::from_fn(|k| unsafe { _mm256_loadu_ps(a.offset(k as isize * rs)) });
        let t0 = _mm256_unpacklo_ps(r[0], r[1]);
        let t1 = _mm256_unpackhi_ps(r[0], r[1]);
        let t2 = _mm256_unpacklo_ps(r[2], r[3]);
        let t3 = _mm256_unpackhi_ps(r[2], r[3]);
        let t4 = _mm256_unpacklo_ps(r[4], r[5]);
        let t5 = _mm256_unpackhi_ps(r[4], r[5]);
        let t6 = _mm256_unpacklo_ps(r[6], r[7]);
        let t7 = _mm256_unpackhi_ps(r[6], r[7]);
        let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
        let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
        let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
        let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
        let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
        let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
        let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
        let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
        [
            _mm256_permute2f128_ps::<0x20>(u0, u4),
            _mm256_permute2f128_ps::<0x20>(u1, u5),
            _mm256_permute2f128_ps::<0x20>(u2, u6),
            _mm256_permute2f128_ps::<0x20>(u3, u7),
            _mm256_permute2f128_ps::<0x31>(u0, u4),
            _mm256_permute2f128_ps::<0x31>(u1, u5),
            _mm256_permute2f128_ps::<0x31>(u2, u6),
            _mm256_permute2f128_ps::<0x31>(u3, u7),
        ]
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn tile256<const MR: usize, const FULL: bool>(
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
        add: bool,
    ) {
        let mut acc0 = [_mm256_setzero_ps(); MR];
        let mut acc1 = [_mm256_setzero_ps(); MR];
        for p in 0..k as isize {
            // SAFETY: row p of the panel; masked lanes are not read.
            let (b0, b1) = unsafe {
                let bp = b.offset(p * rsb);
                if FULL {
                    (_mm256_loadu_ps(bp), _mm256_loadu_ps(bp.add(8)))
                } else {
                    (_mm256_maskload_ps(bp, lo), _mm256_maskload_ps(bp.wrapping_add(8), hi))
                }
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
                let (mut v0, mut v1) = (acc0[r], acc1[r]);
                if add {
                    v0 = _mm256_add_ps(_mm256_maskload_ps(cr, lo), v0);
                    v1 = _mm256_add_ps(_mm256_maskload_ps(cr.wrapping_add(8), hi), v1);
                }
                _mm256_maskstore_ps(cr, lo, v0);
                _mm256_maskstore_ps(cr.wrapping_add(8), hi, v1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The invariant's definition: one fused multiply-add per step, in `p` order — within
    /// each `kc`-deep chunk, the chunks' sums then added in order (`kc ≥ k`: one chain).
    #[allow(clippy::too_many_arguments)]
    fn reference(m: usize, k: usize, n: usize, a: &[f32], ta: bool, b: &[f32], tb: bool, kc: usize) -> Vec<f32> {
        let mut c = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut sum = 0f32;
                for p0 in (0..k).step_by(kc.max(1)) {
                    let mut acc = 0f32;
                    for p in p0..(p0 + kc).min(k) {
                        let x = if ta { a[p * m + i] } else { a[i * k + p] };
                        let y = if tb { b[j * k + p] } else { b[p * n + j] };
                        acc = x.mul_add(y, acc);
                    }
                    sum = if p0 == 0 { acc } else { sum + acc };
                }
                c[i * n + j] = sum;
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
            // Row-major panels copied (COPY_ROWS rows and more), one tile remainder ...
            (COPY_ROWS + 3, 40, 37),
            // Chunked: deeper than MAX_K (a partial last chunk, every column remainder) ...
            (20, 600, 47),
            (9, 2 * KC + 1, 33),
            (64, 4 * KC, 64),
            // ... and a short product deeper than SHORT_MAX_K.
            (3, 1300, 17),
            // One column (`gemv`): lane remainders, transpose-block remainders, chunks.
            (3, 0, 1),
            (7, 5, 1),
            (8, 8, 1),
            (37, 144, 1),
            (784, 27, 1),
            (19, 600, 1),
            (70, 2 * KC + 5, 1),
            (5, 1300, 1),
        ];
        for (m, k, n) in shapes {
            let (a, b) = (data(m * k, 1), data(k * n, 2));
            let kc = if chunked(m, k) { KC } else { usize::MAX };
            assert_eq!(kc == KC, k > SHORT_MAX_K || (k > MAX_K && m > SHORT_ROWS), "{m}x{k}x{n}");
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                let want = reference(m, k, n, &a, ta, &b, tb, kc);
                for (w, x) in want.iter().zip(exact(m, k, n, &a, ta, &b, tb)) {
                    // Terms up to ~28 in size: float32 sums of k of them err by ~k·28·2⁻²⁴.
                    assert!((f64::from(*w) - x).abs() <= 1e-4 * x.abs().max(1.0) + 2e-6 * k as f64, "{w} vs {x}");
                }
                let (rsa, csa) = if ta { (1, m as isize) } else { (k as isize, 1) };
                let (rsb, csb) = if tb { (1, k as isize) } else { (n as isize, 1) };
                let rsc = n + 3;
                let mut c = vec![f32::NAN; m * rsc];
                assert!(applies(rsb, csb, 1));
                // SAFETY: the vectors hold the described matrices.
                unsafe { sgemm(m, k, n, a.as_ptr(), rsa, csa, b.as_ptr(), rsb, csb, c.as_mut_ptr(), rsc as isize, m) };
                for i in 0..m {
                    assert_eq!(&c[i * rsc..i * rsc + n], &want[i * n..(i + 1) * n], "{m}x{k}x{n} ta={ta} tb={tb}");
                    assert!(c[i * rsc + n..(i + 1) * rsc].iter().all(|x| x.is_nan()), "padding written");
                }
                for &t in tiers {
                    let mut d = vec![f32::NAN; m * n];
                    // SAFETY: as above; the host has the tier.
                    unsafe {
                        sgemm_tier(
                            t,
                            m,
                            k,
                            n,
                            a.as_ptr(),
                            rsa,
                            csa,
                            b.as_ptr(),
                            rsb,
                            csb,
                            d.as_mut_ptr(),
                            n as isize,
                            kc == KC,
                        )
                    };
                    assert_eq!(d, want, "{t:?} {m}x{k}x{n} ta={ta} tb={tb}");
                }
            }
        }
    }

    /// A transposed B that is a view into a wider matrix (its columns `k` apart in a row of
    /// `ld > k` floats: B is a slice of a larger weight) packs only its own elements, whole
    /// or chunk by chunk.
    #[test]
    fn transposed_views_of_a_wider_matrix() {
        let Some(host) = tier() else { return };
        for (m, k, n, ld) in [(11, 21, 37, 29), (11, KC + MAX_K, 37, KC + MAX_K + 13)] {
            let a = data(m * k, 3);
            let big = data(n * ld, 4);
            let b: Vec<f32> = (0..n).flat_map(|j| big[j * ld..j * ld + k].to_vec()).collect();
            let chunks = chunked(m, k);
            let want = reference(m, k, n, &a, false, &b, true, if chunks { KC } else { usize::MAX });
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
                        chunks,
                    )
                };
                assert_eq!(d, want, "{t:?} k={k}");
            }
        }
    }

    #[test]
    fn unit_column_strides_of_c_apply_and_deep_products_are_chunked() {
        if tier().is_none() {
            assert!(!applies(16, 1, 1));
            return;
        }
        assert!(applies(16, 1, 1));
        assert!(!applies(16, 1, 2), "a strided C goes to matrixmultiply");
        assert!(applies(1, 5, 1), "a transposed B is packed by panels");
        assert!(!applies(3, 5, 1), "a B strided both ways goes to matrixmultiply");
        assert!(!chunked(64, MAX_K));
        assert!(chunked(64, MAX_K + 1));
        assert!(!chunked(SHORT_ROWS, SHORT_MAX_K), "a short product, deeper, in one chain");
        assert!(chunked(SHORT_ROWS, SHORT_MAX_K + 1));
        assert!(chunked(SHORT_ROWS + 1, MAX_K + 1));
    }
}
