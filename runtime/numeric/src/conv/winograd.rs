//! Winograd's minimal filtering F(2×2, 3×3) for the 3×3 convolutions with unit strides and
//! dilations that dominate CNN training steps (ResNet's, VGG's, the Keras residual blocks):
//! forward passes, and through [`ConvShape::transposed`] their input gradients.
//!
//! Each 2×2 block of outputs ("tile") reads a 4×4 patch `d` of the (padded) input. With
//! `V = Bᵀ d B` per input channel and `U = G g Gᵀ` per (input, output) channel pair of the
//! filter `g`, the tile's outputs are `Aᵀ (Σ_c U ⊙ V) A`: 16 element positions ξ, each a
//! sum over input channels — 16 GEMMs `M_ξ [tiles, O] = V_ξ [tiles, C] · U_ξ [C, O]` per
//! image instead of one `[OH·OW, 9·C] · [9·C, O]` product. That is 16·C·O multiply-adds
//! per four outputs instead of 36·C·O (2.25× fewer); the transforms are additions over
//! the channels, linear in the data.
//!
//! ```text
//! Bᵀ = | 1  0 -1  0 |   G = | 1    0    0   |   Aᵀ = | 1  1  1  0 |
//!      | 0  1  1  0 |       | 1/2  1/2  1/2 |        | 0  1 -1 -1 |
//!      | 0 -1  1  0 |       | 1/2 -1/2  1/2 |
//!      | 0  1  0 -1 |       | 0    0    1   |
//! ```
//!
//! Rounding differs from the direct product's (the transforms add and halve before the
//! sums), within a few units in the last place of the outputs' scale for these small
//! transforms (the unit test bounds it against float64 sums); F(4×4, 3×3), 4× fewer
//! multiplies, would round visibly worse and is not used.
//!
//! Invariant: as the module's other paths, deterministic and independent of the thread
//! count (images are split over threads whole; each image's GEMMs keep the GEMM's own
//! invariant), and the compiled clusters and the interpreter call this same code.

use super::{over_images, Axis, ConvElem, ConvShape, Shared};
use crate::gemm::gemm_strided;

/// The fewest input and output channels taken here: the 16 products are `C` deep and `O`
/// wide, too thin below this to beat the direct product's single deep one (a 3-channel
/// image layer keeps im2col).
const MIN_DEPTH: usize = 16;

/// Defines `$name`, which runs `$body` compiled for AVX-512 or AVX2+FMA when the host has
/// them (the crate is compiled for baseline x86-64, whose 4-wide loops left these
/// transforms a fifth of a CNN step) and as compiled otherwise. Every copy performs the
/// same operations, so the results are the same bits.
macro_rules! multiversioned {
    ($(#[$doc:meta])* fn $name:ident = $body:ident($($arg:ident: $ty:ty),*)) => {
        $(#[$doc])*
        fn $name<T: ConvElem>($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx2,fma")]
                unsafe fn wide<T: ConvElem>($($arg: $ty),*) {
                    $body($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn narrow<T: ConvElem>($($arg: $ty),*) {
                    $body($($arg),*)
                }
                if std::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the host has the features the copy is compiled for.
                    return unsafe { wide($($arg),*) };
                }
                if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                    // SAFETY: as above.
                    return unsafe { narrow($($arg),*) };
                }
            }
            $body($($arg),*)
        }
    };
}

/// Whether `s` is an ungrouped 3×3 convolution with unit strides and dilations over at
/// least [`MIN_DEPTH`] input and output channels (Winograd computes it; whether it should is
/// [`pays`]).
pub(super) fn applies(s: &ConvShape) -> bool {
    let unit = |a: &Axis| a.kernel == 3 && a.stride == 1 && a.dilation == 1 && a.output > 0;
    s.groups() == 1 && unit(&s.win.h) && unit(&s.win.w) && s.input[3] >= MIN_DEPTH && s.filter[3] >= MIN_DEPTH
}

/// Whether Winograd pays for `s` (which it [`applies`] to): the filter transform costs a
/// pass over `16·C·O` values whatever the batch, and the 16 products save `20·C·O`
/// multiply-adds per 2×2 output tile, so it takes enough tiles — `N·⌈OH/2⌉·⌈OW/2⌉` — to
/// win. Measured (`benches/conv.rs`, one thread and two, AVX-512): at 32 tiles the direct
/// product is 1.3–1.8× faster, at 128 Winograd's forward 1.2–1.3×; at 2 tiles — ResNet50V2's
/// last stage on a 32×32 input, 3×3 over 512 channels — Winograd was 1.6× slower.
///
/// Filter gradients never take Winograd: a tap that only ever meets zeros (padding, a dead
/// channel's rows) has an exactly zero gradient in TensorFlow's direct sum, which adaptive
/// optimizers (Adam, Adafactor) keep as "no update"; Winograd's transforms add and halve
/// before the sums, leave ~1e-7 of the gradient's scale there, and those optimizers turned
/// it into updates the size of the learning rate (sweep 71).
pub(super) fn pays(s: &ConvShape) -> bool {
    s.input[0] * s.win.h.output.div_ceil(2) * s.win.w.output.div_ceil(2) >= MIN_TILES
}

/// The fewest output tiles for which the forward pass (and the input gradient, a forward
/// convolution of `dy`) takes Winograd ([`pays`]).
const MIN_TILES: usize = 96;

/// `U[ξ][c][o] = (G g Gᵀ)[ξ]` for the HWIO filter `f` `[3, 3, C, O]`.
fn filter_transform<T: ConvElem>(f: &[T], c: usize, o: usize) -> Vec<T> {
    let half = T::half();
    let mut u = vec![T::default(); 16 * c * o];
    for ci in 0..c {
        for oi in 0..o {
            let g = |ky: usize, kx: usize| f[((ky * 3 + kx) * c + ci) * o + oi];
            // G g: 4 rows of 3.
            let mut t = [[T::default(); 3]; 4];
            for (kx, col) in (0..3).map(|kx| (kx, [g(0, kx), g(1, kx), g(2, kx)])) {
                let [a, b, e] = col;
                t[0][kx] = a;
                t[1][kx] = (a + b + e) * half;
                t[2][kx] = (a - b + e) * half;
                t[3][kx] = e;
            }
            // (G g) Gᵀ: 4 × 4.
            for (r, &[a, b, e]) in t.iter().enumerate() {
                let row = [a, (a + b + e) * half, (a - b + e) * half, e];
                for (q, &v) in row.iter().enumerate() {
                    u[((r * 4 + q) * c + ci) * o + oi] = v;
                }
            }
        }
    }
    u
}

#[derive(Clone, Copy)]
enum Sign {
    Plus,
    Minus,
}

/// `out = a ± b` over a row of channels.
#[inline(always)]
fn lin<T: ConvElem>(out: &mut [T], a: &[T], b: &[T], sign: Sign) {
    let (a, b) = (&a[..out.len()], &b[..out.len()]);
    match sign {
        Sign::Plus => out.iter_mut().zip(a.iter().zip(b)).for_each(|(o, (&x, &y))| *o = x + y),
        Sign::Minus => out.iter_mut().zip(a.iter().zip(b)).for_each(|(o, (&x, &y))| *o = x - y),
    }
}

/// `out = a + b + c` (`Plus`) or `a − b − c` (`Minus`) over a row of channels.
#[inline(always)]
fn sum3<T: ConvElem>(out: &mut [T], a: &[T], b: &[T], c: &[T], sign: Sign) {
    let n = out.len();
    let (a, b, c) = (&a[..n], &b[..n], &c[..n]);
    let abc = a.iter().zip(b).zip(c);
    match sign {
        Sign::Plus => out.iter_mut().zip(abc).for_each(|(o, ((&x, &y), &z))| *o = x + y + z),
        Sign::Minus => out.iter_mut().zip(abc).for_each(|(o, ((&x, &y), &z))| *o = x - y - z),
    }
}

/// `Conv2D` of `x` `[N, H, W, C]` by `f` `[3, 3, C, O]` ([`applies`]) → `[N, OH, OW, O]`.
pub(super) fn conv2d<T: ConvElem>(s: &ConvShape, x: &[T], f: &[T], threads: usize) -> Vec<T> {
    let tl = Tiling::new(s);
    let (n, [h, w, c], [oh, ow, o]) = (s.input[0], [tl.h, tl.w, tl.c], [tl.oh, tl.ow, tl.o]);
    let mut out = vec![T::default(); n * oh * ow * o];
    if out.is_empty() {
        return out;
    }
    let u = filter_transform(f, c, o);
    let zeros = vec![T::default(); c];
    let dst = Shared(out.as_mut_ptr());
    // Per image, a block of tile rows at a time: V `[16][tiles][C]`, M `[16][tiles][O]` (one
    // dense GEMM operand per ξ) and one tile's intermediate rows.
    let block = tl.block;
    over_images::<T>(n, 16 * (plane(block, c) + plane(block, o)) + 16 * c.max(o), threads, &|b, buf, t| {
        let (v, rest) = buf.split_at_mut(16 * plane(block, c));
        let (m, stage) = rest.split_at_mut(16 * plane(block, o));
        let xb = &x[b * h * w * c..][..h * w * c];
        // SAFETY: image b's output rows are its own.
        let y = unsafe { dst.slice(b * oh * ow * o, oh * ow * o) };
        for geo in tl.blocks() {
            let tiles = geo.rows.len() * geo.tiles_w;
            input_transform(&geo, xb, &zeros, v, stage);
            // M_ξ = V_ξ · U_ξ, each a dense `[tiles, C]` (`[tiles, O]`) plane of V (M).
            for xi in 0..16 {
                // SAFETY: A is `tiles × c` dense from `xi·plane(tiles, c)` in `v`, B `U_ξ`
                // `c × o` dense in `u`, C `tiles × o` dense from `xi·plane(tiles, o)` in `m`
                // — all within their buffers (`tiles` ≤ `block`), C distinct from both.
                unsafe {
                    gemm_strided(
                        tiles,
                        c,
                        o,
                        v.as_ptr().add(xi * plane(tiles, c)),
                        c as isize,
                        1,
                        u.as_ptr().add(xi * c * o),
                        o as isize,
                        1,
                        m.as_mut_ptr().add(xi * plane(tiles, o)),
                        o as isize,
                        1,
                        t,
                    )
                };
            }
            output_transform(&geo, m, y, stage);
        }
    });
    out
}

/// Four rows of `len` elements, `stride` apart from `first` (four ξ rows of one tile).
#[inline(always)]
fn rows4<T>(v: &mut [T], first: usize, stride: usize, len: usize) -> [&mut [T]; 4] {
    let (_, rest) = v.split_at_mut(first);
    let (a, rest) = rest.split_at_mut(stride);
    let (b, rest) = rest.split_at_mut(stride);
    let (c, d) = rest.split_at_mut(stride);
    [&mut a[..len], &mut b[..len], &mut c[..len], &mut d[..len]]
}

/// The most elements of V and M one block of tile rows takes (1 MiB of float32).
const BLOCK: usize = 1 << 18;

/// Elements between one ξ plane of V, M or E (`tiles` rows of `width` channels) and the
/// next: the plane plus one cache line. A tile's transform writes (or reads) one row in
/// each of the 16 planes; with a 32×32 image of 32 channels a plane is 32 KiB, and 16
/// rows a power of two apart share one L1 set (12 ways): the input transform stalled on
/// them. One line more puts the 16 rows in 16 sets.
fn plane(tiles: usize, width: usize) -> usize {
    tiles * width + 16
}

/// An image's 2×2 output tiles cut into blocks of whole tile rows whose V and M stay within
/// [`BLOCK`] elements (L2-sized), however large the image.
struct Tiling {
    h: usize,
    w: usize,
    c: usize,
    o: usize,
    oh: usize,
    ow: usize,
    ph: usize,
    pw: usize,
    tiles_h: usize,
    tiles_w: usize,
    block_rows: usize,
    /// The most tiles of one block.
    block: usize,
}

impl Tiling {
    fn new(s: &ConvShape) -> Tiling {
        let [_, h, w, c] = s.input;
        let o = s.filter[3];
        let (oh, ow) = (s.win.h.output, s.win.w.output);
        let (tiles_h, tiles_w) = (oh.div_ceil(2), ow.div_ceil(2));
        let block_rows = (BLOCK / (tiles_w * 16 * (c + o)).max(1)).clamp(1, tiles_h.max(1));
        let (ph, pw) = (s.win.h.pad_before, s.win.w.pad_before);
        Tiling { h, w, c, o, oh, ow, ph, pw, tiles_h, tiles_w, block_rows, block: block_rows * tiles_w }
    }

    /// Each block's geometry, in tile-row order.
    fn blocks(&self) -> impl Iterator<Item = Geo> + '_ {
        let &Tiling { h, w, c, o, oh, ow, ph, pw, tiles_h, tiles_w, block_rows, .. } = self;
        (0..tiles_h).step_by(block_rows).map(move |ty0| Geo {
            h,
            w,
            c,
            o,
            oh,
            ow,
            ph,
            pw,
            rows: ty0..(ty0 + block_rows).min(tiles_h),
            tiles_w,
        })
    }
}

/// The geometry of one image's tiles, and the block of tile rows being transformed.
struct Geo {
    h: usize,
    w: usize,
    c: usize,
    o: usize,
    oh: usize,
    ow: usize,
    ph: usize,
    pw: usize,
    rows: std::ops::Range<usize>,
    tiles_w: usize,
}

multiversioned! {
    /// `V = Bᵀ d B` for every tile of the block's rows of image `xb`, as 32 slice loops over
    /// the channels per tile, into `v` (`[16][tiles][C]`); `tr` holds one tile's intermediate
    /// rows (`16·C`).
    fn input_transform = input_transform_body(g: &Geo, xb: &[T], zeros: &[T], v: &mut [T], tr: &mut [T])
}

#[inline(always)]
fn input_transform_body<T: ConvElem>(g: &Geo, xb: &[T], zeros: &[T], v: &mut [T], tr: &mut [T]) {
    let &Geo { h, w, c, ph, pw, tiles_w, .. } = g;
    let tiles = g.rows.len() * tiles_w;
    let tr = &mut tr[..16 * c];
    for ty in g.rows.clone() {
        for tx in 0..tiles_w {
            let tile = (ty - g.rows.start) * tiles_w + tx;
            // A plain loop, not `array::from_fn`, whose closure some builds leave out of line.
            let mut d: [&[T]; 16] = [zeros; 16];
            for (k, dk) in d.iter_mut().enumerate() {
                let (iy, ix) = ((2 * ty + k / 4).checked_sub(ph), (2 * tx + k % 4).checked_sub(pw));
                if let (Some(iy), Some(ix)) = (iy, ix) {
                    if iy < h && ix < w {
                        *dk = &xb[(iy * w + ix) * c..][..c];
                    }
                }
            }
            // Whole vectors of channels in registers, the rest (C not a multiple of LANES)
            // through the intermediate rows; the same operations either way.
            let mut at = 0;
            while at + LANES <= c {
                input_tile_lanes(&d, at, v, tile * c + at, plane(tiles, c));
                at += LANES;
            }
            if at < c {
                let d = d.map(|x| &x[at..c]);
                let len = c - at;
                // Bᵀ d: rows combined, column by column.
                for q in 0..4 {
                    let (d0, d1, d2, d3) = (d[q], d[4 + q], d[8 + q], d[12 + q]);
                    lin(&mut tr[q * len..][..len], d0, d2, Sign::Minus);
                    lin(&mut tr[(4 + q) * len..][..len], d1, d2, Sign::Plus);
                    lin(&mut tr[(8 + q) * len..][..len], d2, d1, Sign::Minus);
                    lin(&mut tr[(12 + q) * len..][..len], d1, d3, Sign::Minus);
                }
                // (Bᵀ d) B: columns combined, row by row, into V's rows.
                for r in 0..4 {
                    let row = |q: usize| &tr[(r * 4 + q) * len..][..len];
                    let (a0, a1, a2, a3) = (row(0), row(1), row(2), row(3));
                    let [o0, o1, o2, o3] = rows4(v, r * 4 * plane(tiles, c) + tile * c + at, plane(tiles, c), len);
                    lin(o0, a0, a2, Sign::Minus);
                    lin(o1, a1, a2, Sign::Plus);
                    lin(o2, a2, a1, Sign::Minus);
                    lin(o3, a1, a3, Sign::Minus);
                }
            }
        }
    }
}

/// Channels per register-held step of a tile transform (one AVX-512 vector of float32).
const LANES: usize = 16;

/// [`input_transform_body`]'s two combinations for channels `at..at + LANES` of one tile,
/// its 16 input rows and 16 outputs held as fixed-size arrays (registers) instead of
/// slices: with 32 channels the slice loops spent more on bounds checks and loop control
/// than on the adds. Writes `V[ξ][tile][at..]` at `v[ξ·plane + first..]`.
#[inline(always)]
fn input_tile_lanes<T: ConvElem>(d: &[&[T]; 16], at: usize, v: &mut [T], first: usize, plane: usize) {
    // A plain loop of fixed-size copies: `array::from_fn` over `try_into`, when the
    // optimizer left its closure out of line (it does in some builds), moved every row
    // through `memmove` and made the whole transform ~40% slower.
    let mut x = [[T::default(); LANES]; 16];
    for (row, src) in x.iter_mut().zip(d) {
        row.copy_from_slice(&src[at..at + LANES]);
    }
    let mut t = [[T::default(); LANES]; 16];
    for q in 0..4 {
        for l in 0..LANES {
            let (d0, d1, d2, d3) = (x[q][l], x[4 + q][l], x[8 + q][l], x[12 + q][l]);
            t[q][l] = d0 - d2;
            t[4 + q][l] = d1 + d2;
            t[8 + q][l] = d2 - d1;
            t[12 + q][l] = d1 - d3;
        }
    }
    for r in 0..4 {
        let (a0, a1, a2, a3) = (&t[r * 4], &t[r * 4 + 1], &t[r * 4 + 2], &t[r * 4 + 3]);
        let mut o = [[T::default(); LANES]; 4];
        for l in 0..LANES {
            o[0][l] = a0[l] - a2[l];
            o[1][l] = a1[l] + a2[l];
            o[2][l] = a2[l] - a1[l];
            o[3][l] = a1[l] - a3[l];
        }
        for (j, row) in o.iter().enumerate() {
            v[(r * 4 + j) * plane + first..][..LANES].copy_from_slice(row);
        }
    }
}

multiversioned! {
    /// `Y = Aᵀ M A` for every tile of the block's rows, written into the image's output `y`
    /// where each 2×2 block lies inside it; `r` holds one tile's intermediate rows (`8·O`).
    fn output_transform = output_transform_body(g: &Geo, m: &[T], y: &mut [T], r: &mut [T])
}

#[inline(always)]
fn output_transform_body<T: ConvElem>(g: &Geo, m: &[T], y: &mut [T], r: &mut [T]) {
    let &Geo { o, oh, ow, tiles_w, .. } = g;
    let tiles = g.rows.len() * tiles_w;
    let r = &mut r[..8 * o];
    for ty in g.rows.clone() {
        for tx in 0..tiles_w {
            let tile = (ty - g.rows.start) * tiles_w + tx;
            let row = |k: usize| &m[k * plane(tiles, o) + tile * o..][..o];
            // Aᵀ M: two rows of four.
            for q in 0..4 {
                let (m0, m1, m2, m3) = (row(q), row(4 + q), row(8 + q), row(12 + q));
                let (r0, r1) = r.split_at_mut(4 * o);
                sum3(&mut r0[q * o..][..o], m0, m1, m2, Sign::Plus);
                sum3(&mut r1[q * o..][..o], m1, m2, m3, Sign::Minus);
            }
            let (oy, ox) = (2 * ty, 2 * tx);
            for (i, yy) in [oy, oy + 1].into_iter().enumerate().filter(|&(_, yy)| yy < oh) {
                let rr = |q: usize| &r[(i * 4 + q) * o..][..o];
                for (j, xx) in [ox, ox + 1].into_iter().enumerate().filter(|&(_, xx)| xx < ow) {
                    let dst = &mut y[(yy * ow + xx) * o..][..o];
                    if j == 0 {
                        sum3(dst, rr(0), rr(1), rr(2), Sign::Plus);
                    } else {
                        sum3(dst, rr(1), rr(2), rr(3), Sign::Minus);
                    }
                }
            }
        }
    }
}
