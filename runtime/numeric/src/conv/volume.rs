//! 3-D convolutions in NDHWC — `Conv3D`, `Conv3DBackpropInputV2` and
//! `Conv3DBackpropFilterV2` (Keras `Conv3D` and its gradients) — by the 2-D convolutions'
//! lowering with one more window axis: each image's output voxels become the rows of a
//! column matrix (vol2col: one column per filter tap and input channel, zero where the tap
//! is padding), multiplied by the DHWIO filter, which already is the `[KD·KH·KW·C/G, O]`
//! matrix, with the GEMM `MatMul` uses. The input gradient is the product with the filter
//! transposed scattered back (col2vol); the filter gradient is `colᵀ · dy` summed over the
//! batch in image groups fixed by the batch size ([`super::sum_image_groups`]).
//!
//! The column matrix is made a block of output voxels at a time ([`VolumeShape::block`],
//! a function of the shape alone), so a large volume never holds its whole `voxels × taps`
//! copy; grouped convolutions take one product per group.
//!
//! Invariant, as for the 2-D ones: every function here is deterministic and independent of
//! the thread count (each image's or image group's sums are fixed by the shape; the GEMM
//! sums the same way on any thread).

use std::ops::Range;

use super::{mm, over_images, sum_image_groups, Axis, ConvElem, Shared, DEPTH};

/// The shapes of one 3-D convolution: input `[N,D,H,W,C]`, filter `[KD,KH,KW,C/G,O]` and the
/// window's three spatial axes (depth, height, width).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VolumeShape {
    pub input: [usize; 5],
    pub filter: [usize; 5],
    pub ax: [Axis; 3],
}

/// The elements of one block of column rows (1 MiB of float32: in L2 beside the image).
const BLOCK_ELEMENTS: usize = 1 << 18;

impl VolumeShape {
    /// `[N, OD, OH, OW, O]`.
    pub fn output(&self) -> [usize; 5] {
        let [d, h, w] = self.ax;
        [self.input[0], d.output, h.output, w.output, self.filter[4]]
    }

    /// How many groups the convolution has: input depth / the filter's in-depth.
    pub fn groups(&self) -> usize {
        self.input[4].checked_div(self.filter[3]).unwrap_or(1).max(1)
    }

    /// Output voxels per image.
    fn voxels(&self) -> usize {
        self.ax.iter().map(|a| a.output).product()
    }

    /// Input elements per image.
    fn image(&self) -> usize {
        self.input[1..].iter().product()
    }

    /// The length of one column row: one group's taps, `KD·KH·KW·C/G`.
    fn row(&self) -> usize {
        self.filter[..4].iter().product()
    }

    /// How many column rows are made at once: about [`BLOCK_ELEMENTS`] elements, at least 8
    /// rows, at most one image's voxels.
    fn block(&self) -> usize {
        (BLOCK_ELEMENTS / self.row().max(1)).max(8).min(self.voxels().max(1))
    }

    /// The shape of one block of the column matrix the forward pass and the filter gradient
    /// make, `[rows, KD·KH·KW·C/G]` (saturating, for a size check before anything is
    /// allocated; rows as [`VolumeShape::block`] takes them).
    pub fn column_shape(&self) -> [usize; 2] {
        let row = self.filter[..4].iter().fold(1usize, |p, &d| p.saturating_mul(d));
        let voxels = self.ax.iter().fold(1usize, |p, a| p.saturating_mul(a.output));
        [(BLOCK_ELEMENTS / row.max(1)).max(8).min(voxels.max(1)), row]
    }

    /// [`VolumeShape::column_shape`] of the input gradient's computation: the transposed
    /// convolution's (rows of `KD·KH·KW·O`) when it takes that road.
    pub fn input_gradient_column_shape(&self) -> [usize; 2] {
        self.transposed().map_or_else(|| self.column_shape(), |t| t.column_shape())
    }
}

impl VolumeShape {
    /// The forward convolution whose output is this one's input gradient, for an ungrouped
    /// convolution with unit strides and dilations whose padding is less than the window
    /// (`SAME` or `VALID`): input `dy` `[N, OD, OH, OW, O]`, filter `[KD, KH, KW, O, C]` (this
    /// one's taps reversed, depths swapped), padding `K − 1 − pad` before, output
    /// `[N, D, H, W, C]` — the 2-D convolutions' rule (`ConvShape::transposed`) on three axes.
    /// One product `KD·KH·KW·O` deep per block instead of an `O`-deep one whose `KD·KH·KW`
    /// sums col2vol scatters into every input voxel.
    fn transposed(&self) -> Option<VolumeShape> {
        if self.groups() != 1 {
            return None;
        }
        let [d, h, w] = &self.ax;
        let ax = [d.transposed()?, h.transposed()?, w.transposed()?];
        let [n, _, _, _, c] = self.input;
        let [kd, kh, kw, _, o] = self.filter;
        Some(VolumeShape { input: [n, ax[0].input, ax[1].input, ax[2].input, o], filter: [kd, kh, kw, o, c], ax })
    }
}

/// The output voxel `v` (row-major within one image) as its `(od, oh, ow)`.
fn voxel(ax: &[Axis; 3], v: usize) -> (usize, usize, usize) {
    let (h, w) = (ax[1].output, ax[2].output);
    (v / (h * w), v / w % h, v % w)
}

/// The column rows of output voxels `voxels` of one image `x` (`[D, H, W, C]`), channels
/// `c0..c0 + cg`, into `col` from its start.
fn vol2col<T: ConvElem>(
    x: &[T],
    (c, c0, cg): (usize, usize, usize),
    ax: &[Axis; 3],
    voxels: Range<usize>,
    col: &mut [T],
) {
    let [ad, ah, aw] = ax;
    let (kd, kh, kw) = (ad.kernel, ah.kernel, aw.kernel);
    let row = kd * kh * kw * cg;
    // All channels, adjacent taps: a window row inside the input is one run of `KW·C`
    // values in both the image and the column row.
    let whole = cg == c && aw.dilation == 1;
    let first = voxels.start;
    for v in voxels {
        let (od, oh, ow) = voxel(ax, v);
        let dst = &mut col[(v - first) * row..][..row];
        let runs = (aw.source(ow, 0), aw.source(ow, kw - 1));
        for zd in 0..kd {
            let id = ad.source(od, zd);
            for zh in 0..kh {
                let d = &mut dst[(zd * kh + zh) * kw * cg..][..kw * cg];
                let (Some(id), Some(ih)) = (id, ah.source(oh, zh)) else {
                    d.fill(T::default());
                    continue;
                };
                let line = (id * ah.input + ih) * aw.input;
                if let (true, (Some(ix0), Some(_))) = (whole, runs) {
                    d.copy_from_slice(&x[(line + ix0) * c..][..kw * c]);
                    continue;
                }
                for (zw, dc) in d.chunks_exact_mut(cg).enumerate() {
                    match aw.source(ow, zw) {
                        Some(ix) => dc.copy_from_slice(&x[(line + ix) * c + c0..][..cg]),
                        None => dc.fill(T::default()),
                    }
                }
            }
        }
    }
}

/// col2vol: adds the column rows of output voxels `voxels` (`col` from its start) back into
/// channels `c0..c0 + cg` of one image's gradient `dx` (`[D, H, W, C]`), voxel by voxel in
/// order.
fn col2vol<T: ConvElem>(
    col: &[T],
    (c, c0, cg): (usize, usize, usize),
    ax: &[Axis; 3],
    voxels: Range<usize>,
    dx: &mut [T],
) {
    let [ad, ah, aw] = ax;
    let (kd, kh, kw) = (ad.kernel, ah.kernel, aw.kernel);
    let row = kd * kh * kw * cg;
    let first = voxels.start;
    for v in voxels {
        let (od, oh, ow) = voxel(ax, v);
        let src = &col[(v - first) * row..][..row];
        for zd in 0..kd {
            let Some(id) = ad.source(od, zd) else { continue };
            for zh in 0..kh {
                let Some(ih) = ah.source(oh, zh) else { continue };
                let line = (id * ah.input + ih) * aw.input;
                for zw in 0..kw {
                    let Some(ix) = aw.source(ow, zw) else { continue };
                    let s = &src[((zd * kh + zh) * kw + zw) * cg..][..cg];
                    for (p, &q) in dx[(line + ix) * c + c0..][..cg].iter_mut().zip(s) {
                        *p += q;
                    }
                }
            }
        }
    }
}

/// `Conv3D`: `x` `[N,D,H,W,C]` by `f` `[KD,KH,KW,C/G,O]` → `[N,OD,OH,OW,O]`; with `G > 1`
/// groups, output channels `g·O/G..(g+1)·O/G` read input channels `g·C/G..(g+1)·C/G`.
pub fn conv3d<T: ConvElem>(s: &VolumeShape, x: &[T], f: &[T], threads: usize) -> Vec<T> {
    let c = s.input[4];
    let o = s.filter[4];
    let (g, cg) = (s.groups(), s.filter[3]);
    let og = o / g;
    let (voxels, image, row, block) = (s.voxels(), s.image(), s.row(), s.block());
    let mut out = vec![T::default(); s.input[0] * voxels * o];
    if out.is_empty() {
        return out;
    }
    let dst = Shared(out.as_mut_ptr());
    let tmp_len = if g > 1 { block * og } else { 0 };
    over_images::<T>(s.input[0], block * row + tmp_len, threads, &|b, buf, t| {
        let (col, tmp) = buf.split_at_mut(block * row);
        let xb = &x[b * image..][..image];
        // SAFETY: image b's output rows are its own.
        let y = unsafe { dst.slice(b * voxels * o, voxels * o) };
        for v0 in (0..voxels).step_by(block) {
            let rows = block.min(voxels - v0);
            let yb = &mut y[v0 * o..][..rows * o];
            for grp in 0..g {
                vol2col(xb, (c, grp * cg, cg), &s.ax, v0..v0 + rows, col);
                if g == 1 {
                    mm(rows, row, o, col, row as isize, 1, f, o as isize, 1, yb, t);
                    continue;
                }
                // tmp [rows, O/G] = col · the group's filter columns (row stride O).
                let tmp = &mut tmp[..rows * og];
                mm(rows, row, og, col, row as isize, 1, &f[grp * og..], o as isize, 1, tmp, t);
                for (yr, tr) in yb.chunks_mut(o).zip(tmp.chunks(og)) {
                    yr[grp * og..][..og].copy_from_slice(tr);
                }
            }
        }
    });
    out
}

/// `Conv3DBackpropInputV2`: the gradient `[N,D,H,W,C]` from `f` and `dy` `[N,OD,OH,OW,O]`.
pub fn conv3d_backprop_input<T: ConvElem>(s: &VolumeShape, f: &[T], dy: &[T], threads: usize) -> Vec<T> {
    let c = s.input[4];
    let o = s.filter[4];
    let (g, cg) = (s.groups(), s.filter[3]);
    let og = o / g;
    let (voxels, image, row, block) = (s.voxels(), s.image(), s.row(), s.block());
    if o == 0 {
        // No output channel: nothing reaches the input.
        return vec![T::default(); s.input[0] * s.image()];
    }
    if let Some(t) = s.transposed() {
        let [kd, kh, kw, _, _] = s.filter;
        let taps = kd * kh * kw;
        let mut ft = vec![T::default(); f.len()];
        for tap in 0..taps {
            let (src, dst) = (tap * c * o, (taps - 1 - tap) * o * c);
            for ci in 0..c {
                for oi in 0..o {
                    ft[dst + oi * c + ci] = f[src + ci * o + oi];
                }
            }
        }
        return conv3d(&t, dy, &ft, threads);
    }
    let mut dx = vec![T::default(); s.input[0] * image];
    if dx.is_empty() || voxels == 0 || o == 0 {
        return dx;
    }
    let dst = Shared(dx.as_mut_ptr());
    over_images::<T>(s.input[0], block * row, threads, &|b, col, t| {
        // SAFETY: image b's gradient is its own.
        let dxb = unsafe { dst.slice(b * image, image) };
        for v0 in (0..voxels).step_by(block) {
            let rows = block.min(voxels - v0);
            for grp in 0..g {
                // col = dy_b[block, group] [rows, O/G] · the group's filter columnsᵀ [O/G, row].
                let a = &dy[(b * voxels + v0) * o + grp * og..];
                mm(rows, og, row, a, o as isize, 1, &f[grp * og..], 1, o as isize, col, t);
                col2vol(col, (c, grp * cg, cg), &s.ax, v0..v0 + rows, dxb);
            }
        }
    });
    dx
}

/// `Conv3DBackpropFilterV2`: the gradient `[KD,KH,KW,C/G,O]` from `x` and `dy`. The batch is
/// cut into image groups fixed by its size; each group's partial sums its images in order,
/// block by block, each block's product in chunks at most [`DEPTH`] voxels deep; the
/// partials are added in group order.
pub fn conv3d_backprop_filter<T: ConvElem>(s: &VolumeShape, x: &[T], dy: &[T], threads: usize) -> Vec<T> {
    let c = s.input[4];
    let o = s.filter[4];
    let (g, cg) = (s.groups(), s.filter[3]);
    let og = o / g;
    let (voxels, image, row, block) = (s.voxels(), s.image(), s.row(), s.block());
    let size = row * o;
    let n = s.input[0];
    if n == 0 || size == 0 || voxels == 0 {
        return vec![T::default(); size];
    }
    sum_image_groups(n, size, block * row + row * og, threads, &|images, acc, buf, t| {
        let (col, part) = buf.split_at_mut(block * row);
        for b in images {
            let xb = &x[b * image..][..image];
            for v0 in (0..voxels).step_by(block) {
                let rows = block.min(voxels - v0);
                for grp in 0..g {
                    vol2col(xb, (c, grp * cg, cg), &s.ax, v0..v0 + rows, col);
                    // part = colᵀ [row, k] · dy_b[voxels, group] [k, O/G], k at most DEPTH.
                    for p0 in (0..rows).step_by(DEPTH) {
                        let k = DEPTH.min(rows - p0);
                        let a = &dy[(b * voxels + v0 + p0) * o + grp * og..];
                        mm(row, k, og, &col[p0 * row..], 1, row as isize, a, o as isize, 1, part, t);
                        for (ar, pr) in acc.chunks_mut(o).zip(part.chunks(og)) {
                            for (p, &q) in ar[grp * og..][..og].iter_mut().zip(pr) {
                                *p += q;
                            }
                        }
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition: every product of every tap, summed in f64.
    fn direct(s: &VolumeShape, x: &[f64], f: &[f64]) -> Vec<f64> {
        let [n, _, _, _, c] = s.input;
        let [kd, kh, kw, cg, o] = s.filter;
        let og = o / s.groups();
        let [ad, ah, aw] = s.ax;
        let out_shape = s.output();
        let mut y = vec![0.0; out_shape.iter().product()];
        for b in 0..n {
            for v in 0..s.voxels() {
                let (od, oh, ow) = voxel(&s.ax, v);
                for oc in 0..o {
                    let mut acc = 0.0;
                    for zd in 0..kd {
                        for zh in 0..kh {
                            for zw in 0..kw {
                                let (Some(id), Some(ih), Some(iw)) =
                                    (ad.source(od, zd), ah.source(oh, zh), aw.source(ow, zw))
                                else {
                                    continue;
                                };
                                for ic in 0..cg {
                                    let xi =
                                        (((b * ad.input + id) * ah.input + ih) * aw.input + iw) * c + oc / og * cg + ic;
                                    let fi = (((zd * kh + zh) * kw + zw) * cg + ic) * o + oc;
                                    acc += x[xi] * f[fi];
                                }
                            }
                        }
                    }
                    y[(b * s.voxels() + v) * o + oc] = acc;
                }
            }
        }
        y
    }

    fn values(n: usize, seed: u64) -> Vec<f64> {
        (0..n as u64).map(|i| (((i * 7919 + seed * 104729) % 97) as f64 - 48.0) / 16.0).collect()
    }

    fn shape(
        input: [usize; 5],
        filter: [usize; 5],
        strides: [usize; 3],
        dilations: [usize; 3],
        same: bool,
    ) -> VolumeShape {
        let ax = |i: usize| Axis::windowed(input[i + 1], filter[i], strides[i], dilations[i], same).unwrap();
        VolumeShape { input, filter, ax: [ax(0), ax(1), ax(2)] }
    }

    fn shapes() -> Vec<VolumeShape> {
        vec![
            shape([2, 4, 5, 3, 2], [2, 3, 2, 2, 3], [1, 2, 1], [1, 1, 1], true),
            shape([2, 4, 5, 3, 4], [2, 2, 1, 2, 4], [1, 1, 2], [1, 1, 1], false),
            shape([3, 3, 4, 4, 3], [1, 1, 1, 3, 2], [2, 1, 1], [1, 1, 1], true),
            shape([1, 5, 6, 7, 3], [3, 3, 3, 3, 5], [1, 1, 1], [2, 1, 2], true),
            // Unit strides: the input gradient is the transposed convolution.
            shape([2, 4, 5, 6, 3], [2, 3, 3, 3, 4], [1, 1, 1], [1, 1, 1], false),
            // More voxels than one block's rows, and deeper than one GEMM chunk.
            shape([2, 9, 40, 40, 1], [3, 3, 3, 1, 2], [1, 1, 1], [1, 1, 1], true),
        ]
    }

    /// The forward pass is the definition (exact: integer-valued sixteenths in f64).
    #[test]
    fn conv3d_is_the_definition() {
        for s in shapes() {
            let x = values(s.input.iter().product(), 1);
            let f = values(s.filter.iter().product(), 2);
            let want = direct(&s, &x, &f);
            for threads in [1, 2] {
                assert_eq!(conv3d(&s, &x, &f, threads), want, "{s:?} threads {threads}");
            }
        }
    }

    /// `<conv(x, f), dy>` is bilinear: its derivatives in x and f are the two backprops; and
    /// neither depends on the thread count (float32, bit for bit).
    #[test]
    fn backprops_are_adjoint_and_thread_independent() {
        let dot = |a: &[f64], b: &[f64]| -> f64 { a.iter().zip(b).map(|(p, q)| p * q).sum() };
        for s in shapes() {
            let x = values(s.input.iter().product(), 3);
            let f = values(s.filter.iter().product(), 4);
            let dy = values(s.output().iter().product(), 5);
            let y = conv3d(&s, &x, &f, 1);
            let dx = conv3d_backprop_input(&s, &f, &dy, 2);
            let df = conv3d_backprop_filter(&s, &x, &dy, 2);
            let lhs = dot(&y, &dy);
            assert!((dot(&dx, &x) - lhs).abs() <= 1e-9 * lhs.abs().max(1.0), "{s:?} input");
            assert!((dot(&df, &f) - lhs).abs() <= 1e-9 * lhs.abs().max(1.0), "{s:?} filter");
            let to32 = |v: &[f64]| v.iter().map(|&q| q as f32 * 0.37).collect::<Vec<f32>>();
            let (x, f, dy) = (to32(&x), to32(&f), to32(&dy));
            let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
            assert_eq!(bits(conv3d(&s, &x, &f, 1)), bits(conv3d(&s, &x, &f, 2)), "{s:?}");
            assert_eq!(
                bits(conv3d_backprop_input(&s, &f, &dy, 1)),
                bits(conv3d_backprop_input(&s, &f, &dy, 2)),
                "{s:?}"
            );
            assert_eq!(
                bits(conv3d_backprop_filter(&s, &x, &dy, 1)),
                bits(conv3d_backprop_filter(&s, &x, &dy, 2)),
                "{s:?}"
            );
        }
    }
}
