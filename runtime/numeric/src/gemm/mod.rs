//! GEMM for compiled clusters and the interpreter: `matrixmultiply`'s single-threaded
//! kernels (a plain wrapping loop for int32/int64), split across the calling rayon pool.
//!
//! `matrixmultiply` can thread itself (its `threading` feature), but with a pool of its own:
//! on a 2-core machine that pool and rayon's (the executor's and the JIT's loop splitting)
//! then fight for the cores — profiles of the MLP step showed a quarter of the time in
//! scheduler wake-ups and `sched_yield` between them. Here a large product is instead cut
//! into one block of rows (or of columns, whichever side is longer) per thread and the
//! blocks run on [`crate::team`] (rayon's pool on a rayon worker), so one pool serves
//! everything. Only large products are cut: from [`SPLIT_MACS_AWAKE`] multiply-adds when
//! the team's helpers are spinning, from [`SPLIT_MACS_PARKED`] otherwise (the small
//! products of a training step ran slower split than on one thread).
//!
//! Invariant: the blocks partition C — each element of C is written by exactly one
//! single-threaded kernel call, with the same k-order of accumulation as an unsplit call,
//! so the result does not depend on the thread count.
//!
//! Float32 products whose C and B have a contiguous dimension (all but strided views) take
//! [`unpacked`]'s kernels instead (no copies of A; B copied a panel at a time; the choice
//! and the summation order depend only on the depth, the whole product's row count and the
//! strides, so every block of a split product computes alike). As they do not pack A, a
//! large product is cut into [`FINE_BLOCKS`] blocks per thread, taken by whichever thread
//! is free.

mod unpacked;

/// The deepest float32 product taken without packing on this host's vector units
/// (deeper ones are packed): callers that can cut their reduction choose this depth.
pub(crate) const UNPACKED_MAX_K: usize = unpacked::MAX_K;

/// Whether a float32 product of depth `k` sums each element the same way whatever its row
/// count: true unless a short product (at most `unpacked::SHORT_ROWS` rows) would be summed in
/// one chain where a taller one is chunked (`unpacked::chunked`). Callers that choose how many
/// rows to multiply at once (a convolution stacking images) keep results independent of that
/// choice by stacking only at such depths.
pub(crate) fn sums_alike_for_any_rows(k: usize) -> bool {
    k <= unpacked::MAX_K || k > unpacked::SHORT_MAX_K
}

/// An element type `matrixmultiply` multiplies.
pub trait GemmElem: Copy + Send + Sync + 'static {
    /// `C = A·B` (alpha 1, beta 0) on the calling thread; C's element `(i, j)` is at
    /// `c + i·rsc + j·csc`. `rows` is the whole product's row count when this is one block
    /// of a split product (every block sees the same, so all take the same path).
    ///
    /// # Safety
    /// The pointers and strides must describe valid `m×k`, `k×n` and `m×n` matrices; C must
    /// be writable and not alias A or B.
    #[allow(clippy::too_many_arguments)]
    unsafe fn kernel(
        m: usize,
        k: usize,
        n: usize,
        a: *const Self,
        rsa: isize,
        csa: isize,
        b: *const Self,
        rsb: isize,
        csb: isize,
        c: *mut Self,
        rsc: isize,
        csc: isize,
        rows: usize,
    );

    /// Whether a product with these strides may be cut into more blocks than threads
    /// (the blocks then balance between the threads: a part is taken by whichever thread is
    /// free, so a core the machine lends elsewhere for a while does not hold the product
    /// up). True where a block costs nothing beyond its share of the product: kernels
    /// that do not copy A per call. `matrixmultiply` packs A in every call.
    fn fine_blocks(_rsb: isize, _csb: isize, _csc: isize) -> bool {
        false
    }
}

impl GemmElem for f32 {
    unsafe fn kernel(
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
        csc: isize,
        rows: usize,
    ) {
        if unpacked::applies(rsb, csb, csc) {
            // SAFETY: forwarded from the caller; C's columns are contiguous, B's columns or rows.
            unsafe { unpacked::sgemm(m, k, n, a, rsa, csa, b, rsb, csb, c, rsc, rows) }
        } else {
            // SAFETY: forwarded from the caller.
            unsafe { matrixmultiply::sgemm(m, k, n, 1.0, a, rsa, csa, b, rsb, csb, 0.0, c, rsc, csc) }
        }
    }

    fn fine_blocks(rsb: isize, csb: isize, csc: isize) -> bool {
        unpacked::applies(rsb, csb, csc)
    }
}

impl GemmElem for f64 {
    unsafe fn kernel(
        m: usize,
        k: usize,
        n: usize,
        a: *const f64,
        rsa: isize,
        csa: isize,
        b: *const f64,
        rsb: isize,
        csb: isize,
        c: *mut f64,
        rsc: isize,
        csc: isize,
        _rows: usize,
    ) {
        // SAFETY: forwarded from the caller.
        unsafe { matrixmultiply::dgemm(m, k, n, 1.0, a, rsa, csa, b, rsb, csb, 0.0, c, rsc, csc) }
    }
}

/// Integers multiply in a plain loop with wrapping arithmetic (TensorFlow's int MatMul is
/// Eigen's, which wraps in practice; integer products are small and rare).
macro_rules! int_kernel {
    ($($t:ty),*) => {$(
        impl GemmElem for $t {
            unsafe fn kernel(
                m: usize,
                k: usize,
                n: usize,
                a: *const $t,
                rsa: isize,
                csa: isize,
                b: *const $t,
                rsb: isize,
                csb: isize,
                c: *mut $t,
                rsc: isize,
                csc: isize,
                _rows: usize,
            ) {
                for i in 0..m as isize {
                    for j in 0..n as isize {
                        let mut acc: $t = 0;
                        for p in 0..k as isize {
                            // SAFETY: the indices stay inside the matrices the caller described.
                            let (x, y) = unsafe { (*a.offset(i * rsa + p * csa), *b.offset(p * rsb + j * csb)) };
                            acc = acc.wrapping_add(x.wrapping_mul(y));
                        }
                        // SAFETY: as above, for C.
                        unsafe { *c.offset(i * rsc + j * csc) = acc };
                    }
                }
            }
        }
    )*};
}
int_kernel!(i32, i64);

/// Multiply-adds worth one parallel section: a batch of smaller products (einsum) whose
/// total reaches this is spread over the team, one product per part.
pub const PARALLEL_MACS: usize = 1 << 18;

/// Multiply-adds from which one product is split across the team when its helpers are
/// awake (spinning after a recent section) ...
pub const SPLIT_MACS_AWAKE: usize = 1 << 20;
/// ... and from which it is split even when they are parked (a futex wake-up first).
///
/// Measured on the 2-core EPYC (BENCHMARKS.md, "Small GEMMs of a training step"): in the
/// Keras LSTM step the products of 2^18–2^19 multiply-adds (5–11 µs on one core) took
/// 8–33 µs split, against 6–12 µs unsplit. Unlike a batch of products, the two halves of one
/// product both read the whole of one operand, which the caller has just written, so the
/// helper starts by fetching it from the caller's cache; and a helper that took its half
/// and then lost its core (the machine is shared) holds the caller until it gets it back.
pub const SPLIT_MACS_PARKED: usize = 1 << 22;

/// How many blocks a product of `macs` multiply-adds is cut into, given the threads it may
/// use and whether the team's helpers are awake ([`crate::team::awake`]).
fn parts(macs: usize, threads: usize, awake: impl FnOnce() -> bool) -> usize {
    let split = threads > 1 && (macs >= SPLIT_MACS_PARKED || (macs >= SPLIT_MACS_AWAKE && awake()));
    if split {
        threads
    } else {
        1
    }
}

/// Blocks per thread of a product of at least [`FINE_MACS`] multiply-adds whose kernel
/// allows it ([`GemmElem::fine_blocks`]) ...
const FINE_BLOCKS: usize = 4;
/// ... (each block then still ≥ 2^20 multiply-adds on two threads, ~10 µs).
const FINE_MACS: usize = 1 << 23;

/// Rows of a block are a multiple of this (a register tile of the kernels) ...
const ROW_TILE: usize = 8;
/// ... and columns a multiple of this.
const COL_TILE: usize = 16;

/// One block of C: rows `r0..r1`, columns `c0..c1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Block {
    r0: usize,
    r1: usize,
    c0: usize,
    c1: usize,
}

/// Cuts an `m×n` product into at most `parts` blocks along its longer side, each a whole
/// number of register tiles except the last.
fn blocks(m: usize, n: usize, parts: usize) -> Vec<Block> {
    let (len, tile) = if m >= n { (m, ROW_TILE) } else { (n, COL_TILE) };
    let step = len.div_ceil(parts.max(1)).div_ceil(tile) * tile;
    (0..len)
        .step_by(step.max(1))
        .map(|s| {
            let e = (s + step).min(len);
            if m >= n {
                Block { r0: s, r1: e, c0: 0, c1: n }
            } else {
                Block { r0: 0, r1: m, c0: s, c1: e }
            }
        })
        .collect()
}

/// Pointers shared with the worker tasks (the matrices outlive the scope; blocks write
/// disjoint parts of C).
#[derive(Clone, Copy)]
struct Shared<T>(*const T, *const T, *mut T);
// SAFETY: see the type's comment.
unsafe impl<T> Send for Shared<T> {}
unsafe impl<T> Sync for Shared<T> {}

/// `C = A·B` with C row-major and dense (row stride `n`), using up to `threads` threads of
/// the current rayon pool when the product is large enough.
///
/// # Safety
/// As [`GemmElem::kernel`], with `rsc = n`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm<T: GemmElem>(
    m: usize,
    k: usize,
    n: usize,
    a: *const T,
    rsa: isize,
    csa: isize,
    b: *const T,
    rsb: isize,
    csb: isize,
    c: *mut T,
    threads: usize,
) {
    // SAFETY: forwarded from the caller, C dense row-major.
    unsafe { gemm_strided(m, k, n, a, rsa, csa, b, rsb, csb, c, n as isize, 1, threads) }
}

/// [`gemm`] with C's element `(i, j)` at `c + i·rsc + j·csc` (a transposed or interleaved
/// output written in place).
///
/// # Safety
/// As [`GemmElem::kernel`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_strided<T: GemmElem>(
    m: usize,
    k: usize,
    n: usize,
    a: *const T,
    rsa: isize,
    csa: isize,
    b: *const T,
    rsb: isize,
    csb: isize,
    c: *mut T,
    rsc: isize,
    csc: isize,
    threads: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    let macs = m.saturating_mul(k).saturating_mul(n);
    let mut parts = parts(macs, threads, crate::team::awake);
    if parts > 1 && macs >= FINE_MACS && T::fine_blocks(rsb, csb, csc) {
        parts *= FINE_BLOCKS;
    }
    // SAFETY: forwarded from the caller.
    unsafe { gemm_blocks(m, k, n, a, rsa, csa, b, rsb, csb, c, rsc, csc, parts) }
}

/// [`gemm_strided`] cut into `parts` blocks (fewer when C is small), run on the team.
///
/// # Safety
/// As [`GemmElem::kernel`].
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_blocks<T: GemmElem>(
    m: usize,
    k: usize,
    n: usize,
    a: *const T,
    rsa: isize,
    csa: isize,
    b: *const T,
    rsb: isize,
    csb: isize,
    c: *mut T,
    rsc: isize,
    csc: isize,
    parts: usize,
) {
    let blocks = blocks(m, n, parts);
    let run = |p: Shared<T>, blk: Block| {
        let (r0, c0) = (blk.r0 as isize, blk.c0 as isize);
        // SAFETY: the block lies inside the matrices the caller described; blocks are
        // disjoint in C.
        unsafe {
            T::kernel(
                blk.r1 - blk.r0,
                k,
                blk.c1 - blk.c0,
                p.0.offset(r0 * rsa),
                rsa,
                csa,
                p.1.offset(c0 * csb),
                rsb,
                csb,
                p.2.offset(r0 * rsc + c0 * csc),
                rsc,
                csc,
                m,
            )
        }
    };
    let shared = Shared(a, b, c);
    if blocks.len() == 1 {
        run(shared, blocks[0]);
        return;
    }
    crate::team::run(blocks.len(), &|i| run(shared, blocks[i]));
}

/// One empty two-part section on the team, for the benchmark of its round trip.
#[doc(hidden)]
pub fn team_round_trip() {
    crate::team::run(2, &|_| {});
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_partition_the_longer_side_in_whole_tiles() {
        let b = blocks(784, 256, 2);
        assert_eq!(b, vec![Block { r0: 0, r1: 392, c0: 0, c1: 256 }, Block { r0: 392, r1: 784, c0: 0, c1: 256 }]);
        let b = blocks(64, 250, 2);
        assert_eq!(b, vec![Block { r0: 0, r1: 64, c0: 0, c1: 128 }, Block { r0: 0, r1: 64, c0: 128, c1: 250 }]);
        // Fewer blocks than asked when the side is short.
        assert_eq!(blocks(5, 3, 4).len(), 1);
        assert_eq!(blocks(1, 1, 1), vec![Block { r0: 0, r1: 1, c0: 0, c1: 1 }]);
    }

    #[test]
    fn only_large_products_split_and_moderate_ones_only_onto_awake_helpers() {
        let lstm = 32 * 256 * 64;
        assert_eq!(parts(lstm, 2, || true), 1, "an LSTM step's product stays on one thread");
        assert_eq!(parts(SPLIT_MACS_AWAKE, 2, || true), 2);
        assert_eq!(parts(SPLIT_MACS_AWAKE, 2, || false), 1, "not worth waking a parked helper");
        assert_eq!(parts(SPLIT_MACS_PARKED, 2, || false), 2);
        assert_eq!(parts(SPLIT_MACS_PARKED, 1, || true), 1, "one thread allowed");
    }

    /// Split and unsplit products agree bit for bit, for both layouts of A and B, split by
    /// rows (tall C) and by columns (wide C), through the team and through `gemm` itself.
    #[test]
    fn split_products_equal_the_single_threaded_product() {
        for (m, k, n) in
            [(130, 70, 90), (40, 70, 300), (32, 256, 32), (64, 129, 128), (8, 700, 300), (12, 600, 5), (200, 600, 70)]
        {
            let a: Vec<f32> = (0..m * k).map(|i| ((i * 7919) % 97) as f32 / 13.0 - 3.0).collect();
            let b: Vec<f32> = (0..k * n).map(|i| ((i * 104_729) % 89) as f32 / 11.0 - 4.0).collect();
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                let (rsa, csa) = if ta { (1, m as isize) } else { (k as isize, 1) };
                let (rsb, csb) = if tb { (1, k as isize) } else { (n as isize, 1) };
                let mut one = vec![0f32; m * n];
                // SAFETY: the vectors hold the described matrices.
                unsafe {
                    f32::kernel(m, k, n, a.as_ptr(), rsa, csa, b.as_ptr(), rsb, csb, one.as_mut_ptr(), n as isize, 1, m)
                };
                // 8: finer than the threads, as large products of the unpacked kernels cut; the
                // 200-row product's blocks then fall under COPY_ROWS while the whole is above.
                for parts in [2, 3, 8] {
                    let mut split = vec![f32::NAN; m * n];
                    let c = split.as_mut_ptr();
                    // SAFETY: as above.
                    unsafe {
                        gemm_blocks(m, k, n, a.as_ptr(), rsa, csa, b.as_ptr(), rsb, csb, c, n as isize, 1, parts)
                    };
                    assert_eq!(one, split, "{m}x{k}x{n} ta={ta} tb={tb} parts={parts}");
                    let mut via_gemm = vec![f32::NAN; m * n];
                    // SAFETY: as above.
                    unsafe { gemm(m, k, n, a.as_ptr(), rsa, csa, b.as_ptr(), rsb, csb, via_gemm.as_mut_ptr(), parts) };
                    assert_eq!(one, via_gemm, "{m}x{k}x{n} ta={ta} tb={tb} threads={parts}");
                }
                // One element against the definition.
                let (i, j) = (m - 1, n - 1);
                let want: f64 = (0..k)
                    .map(|p| {
                        let ai = if ta { p * m + i } else { i * k + p };
                        let bi = if tb { j * k + p } else { p * n + j };
                        f64::from(a[ai]) * f64::from(b[bi])
                    })
                    .sum();
                let got = f64::from(one[i * n + j]);
                assert!((got - want).abs() <= 1e-4 * want.abs().max(1.0) + 2e-6 * k as f64, "{got} vs {want}");
            }
        }
    }
}
