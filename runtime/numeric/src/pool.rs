//! 2-D pooling in NHWC — `MaxPool`, `MaxPoolGrad`, `AvgPool`, `AvgPoolGrad` — shared by
//! compiled clusters (the compiler's `KernelOp::Pool`) and the interpreter's kernels
//! (`runtime/src/kernels/pool.rs`), so both compute the same numbers.
//!
//! Windows and padding are [`crate::conv::Window`]'s (`ksize` and `strides` are
//! `[1, h, w, 1]`). Padding never takes part: a max is over the window's real elements, an
//! average divides by how many real elements the window holds (TensorFlow's CPU kernels do
//! the same). `MaxPoolGrad` sends each output's gradient to the first maximum of its window
//! in row-major scan order, as TensorFlow's CPU kernel does when it recomputes the argmax
//! (strictly greater replaces), so ties resolve alike.

use autoclust_graph::Node;

use crate::conv::{hw_attr, padding_attr, require_nhwc, ConvElem, ConvError, Padding, Window};

/// An element type pooling runs on.
pub trait PoolElem: ConvElem + PartialOrd + std::ops::Div<Output = Self> {
    /// The most negative finite value (a window with no real element).
    fn lowest() -> Self;
    fn from_count(n: usize) -> Self;
}
impl PoolElem for f32 {
    fn lowest() -> f32 {
        f32::MIN
    }
    fn from_count(n: usize) -> f32 {
        n as f32
    }
}
impl PoolElem for f64 {
    fn lowest() -> f64 {
        f64::MIN
    }
    fn from_count(n: usize) -> f64 {
        n as f64
    }
}

/// The attributes of a pooling op.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PoolAttrs {
    pub ksize: (usize, usize),
    pub strides: (usize, usize),
    pub padding: Padding,
}

impl PoolAttrs {
    pub fn parse(node: &Node) -> Result<PoolAttrs, ConvError> {
        require_nhwc(node)?;
        Ok(PoolAttrs {
            ksize: hw_attr(node, "ksize", true)?,
            strides: hw_attr(node, "strides", true)?,
            padding: padding_attr(node)?,
        })
    }

    /// The window over an `[N, H, W, C]` input.
    pub fn window(&self, d: [usize; 4]) -> Result<Window, ConvError> {
        Window::new((d[1], d[2]), self.ksize, self.strides, (1, 1), &self.padding)
    }
}

/// The input `[N, H, W, C]` of a pooling op and its window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PoolShape {
    pub input: [usize; 4],
    pub win: Window,
}

impl PoolShape {
    pub fn output(&self) -> [usize; 4] {
        [self.input[0], self.win.h.output, self.win.w.output, self.input[3]]
    }
    fn out_pixels(&self) -> usize {
        self.win.h.output * self.win.w.output
    }
}

/// Calls `f(output pixel, [input pixels of its window])` for each output pixel of one
/// image; pixel = `y * width + x`.
/// Only the taps inside the input are visited ([`crate::conv::Axis::inside`]), so a window
/// far larger than the image costs what the image holds.
fn windows(win: &Window, mut f: impl FnMut(usize, &[usize])) {
    let mut taps = Vec::with_capacity(win.h.kernel.min(win.h.input) * win.w.kernel.min(win.w.input));
    for oy in 0..win.h.output {
        for ox in 0..win.w.output {
            taps_of(win, oy, ox, &mut taps);
            f(oy * win.w.output + ox, &taps);
        }
    }
}

/// The input pixels (`y * width + x`) of output pixel `(oy, ox)`'s window, in row-major scan
/// order, padding left out.
fn taps_of(win: &Window, oy: usize, ox: usize, taps: &mut Vec<usize>) {
    taps.clear();
    for ky in win.h.inside(oy) {
        let Some(iy) = win.h.source(oy, ky) else { continue };
        for kx in win.w.inside(ox) {
            if let Some(ix) = win.w.source(ox, kx) {
                taps.push(iy * win.w.input + ix);
            }
        }
    }
}

/// Below this many element visits (output elements × window taps) a pooling op runs on its
/// caller alone: a parallel section costs a few microseconds.
const PARALLEL_POOL_WORK: usize = 1 << 17;

/// Fills `out` (`[N, OH, OW, C]`) one output row at a time: `row(b, oy, dst)` writes the
/// `OW · C` values of row `oy` of image `b`. Rows are split between the team's threads when
/// the op is large; each row is computed whole by one thread in the same order, so the
/// split never changes a bit.
fn by_output_rows<T: Copy + Send + Sync>(s: &PoolShape, out: &mut [T], row: &(dyn Fn(usize, usize, &mut [T]) + Sync)) {
    let [n, _, _, c] = s.input;
    let (oh, ow) = (s.win.h.output, s.win.w.output);
    let row_len = ow * c;
    let rows = n * oh;
    if row_len == 0 || rows == 0 {
        return;
    }
    let taps = s.win.h.kernel.min(s.win.h.input) * s.win.w.kernel.min(s.win.w.input);
    let parts = crate::team::cores().min(rows);
    if parts < 2 || out.len().saturating_mul(taps) < PARALLEL_POOL_WORK {
        for (r, dst) in out.chunks_mut(row_len).enumerate() {
            row(r / oh, r % oh, dst);
        }
        return;
    }
    struct Out<T>(*mut T);
    // SAFETY: each part writes only its own rows of `out`.
    unsafe impl<T> Send for Out<T> {}
    unsafe impl<T> Sync for Out<T> {}
    let base = Out(out.as_mut_ptr());
    crate::team::run(parts, &|p| {
        let base = &base;
        let (r0, r1) = (p * rows / parts, (p + 1) * rows / parts);
        // SAFETY: rows r0..r1 of `out`, disjoint from every other part's.
        let mine = unsafe { std::slice::from_raw_parts_mut(base.0.add(r0 * row_len), (r1 - r0) * row_len) };
        for (i, dst) in mine.chunks_mut(row_len).enumerate() {
            let r = r0 + i;
            row(r / oh, r % oh, dst);
        }
    });
}

/// For every image, output pixel and channel, the input pixel its max came from
/// (`usize::MAX` for none): the first maximum in row-major scan order, an element taken
/// only when strictly greater than the maximum so far, which starts at the type's lowest
/// finite value — TensorFlow's CPU kernels (`SpatialMaxPoolWithArgMaxHelper`, Eigen's
/// `MaxReducer`). So a NaN is never the maximum (TensorFlow 2.21: a window `[NaN, 5, 4, -1]`
/// pools to 5), and a window of NaNs, of −∞ or of padding only has none (it pools to the
/// lowest finite value and passes no gradient).
pub fn argmax<T: PoolElem>(s: &PoolShape, x: &[T]) -> Vec<usize> {
    let [n, h, w, c] = s.input;
    let out_pixels = s.out_pixels();
    let mut arg = vec![usize::MAX; n * out_pixels * c];
    let mut best = vec![T::lowest(); c];
    for b in 0..n {
        let img = &x[b * h * w * c..][..h * w * c];
        windows(&s.win, |o, taps| {
            // Channels innermost: each tap reads one contiguous pixel.
            best.fill(T::lowest());
            let at = &mut arg[(b * out_pixels + o) * c..][..c];
            for &p in taps {
                for ((bv, ba), &v) in best.iter_mut().zip(at.iter_mut()).zip(&img[p * c..][..c]) {
                    if v > *bv {
                        *bv = v;
                        *ba = p;
                    }
                }
            }
        });
    }
    arg
}

/// `MaxPool`: `[N, OH, OW, C]`, each element the maximum [`argmax`] picks (the lowest
/// finite value where it picks none): per output pixel, the window's pixels in row-major
/// scan order, a value taken only when strictly greater — the same comparisons in the same
/// order per channel, vectorised over the channels.
pub fn max_pool<T: PoolElem + Send + Sync>(s: &PoolShape, x: &[T]) -> Vec<T> {
    let [n, h, w, c] = s.input;
    let mut out = vec![T::lowest(); n * s.out_pixels() * c];
    by_output_rows(s, &mut out, &|b, oy, dst| {
        let img = &x[b * h * w * c..][..h * w * c];
        let mut taps = Vec::with_capacity(s.win.h.kernel.min(h) * s.win.w.kernel.min(w));
        for (ox, d) in dst.chunks_mut(c).enumerate() {
            taps_of(&s.win, oy, ox, &mut taps);
            for &p in &taps {
                for (d, &v) in d.iter_mut().zip(&img[p * c..][..c]) {
                    // A select, not a conditional store, so the loop vectorises (`maxps`
                    // computes exactly this: the first operand when greater, else the second).
                    let cur = *d;
                    *d = if v > cur { v } else { cur };
                }
            }
        }
    });
    out
}

/// `MaxPoolGrad` from the original input `x` and the output gradient `dy`: `[N, H, W, C]`.
pub fn max_pool_grad<T: PoolElem>(s: &PoolShape, x: &[T], dy: &[T]) -> Vec<T> {
    let [n, h, w, c] = s.input;
    let arg = argmax(s, x);
    let out_pixels = s.out_pixels();
    let mut dx = vec![T::default(); n * h * w * c];
    for (i, &p) in arg.iter().enumerate() {
        if p != usize::MAX {
            let (b, ch) = (i / (out_pixels * c), i % c);
            dx[(b * h * w + p) * c + ch] += dy[i];
        }
    }
    dx
}

/// `MaxPoolGradGrad`: `[N, OH, OW, C]`, each output element the gradient `g` (input-shaped)
/// at the first element of its window, in row-major scan order, equal to the pooled value
/// `y`; zero where none is (a window with no maximum, pooled to the lowest value). TensorFlow's CPU kernel compares with the
/// forward output the same way instead of recomputing the argmax.
pub fn max_pool_grad_grad<T: PoolElem>(s: &PoolShape, x: &[T], y: &[T], g: &[T]) -> Vec<T> {
    let [n, h, w, c] = s.input;
    let out_pixels = s.out_pixels();
    let mut out = vec![T::default(); n * out_pixels * c];
    for b in 0..n {
        let img = &x[b * h * w * c..][..h * w * c];
        let grad = &g[b * h * w * c..][..h * w * c];
        windows(&s.win, |o, taps| {
            for ch in 0..c {
                let at = (b * out_pixels + o) * c + ch;
                if let Some(&p) = taps.iter().find(|&&p| img[p * c + ch] == y[at]) {
                    out[at] = grad[p * c + ch];
                }
            }
        });
    }
    out
}

/// `AvgPool`: `[N, OH, OW, C]`: the window's real elements summed in row-major scan order,
/// then divided by their count.
pub fn avg_pool<T: PoolElem + Send + Sync>(s: &PoolShape, x: &[T]) -> Vec<T> {
    let [n, h, w, c] = s.input;
    let mut out = vec![T::default(); n * s.out_pixels() * c];
    by_output_rows(s, &mut out, &|b, oy, dst| {
        let img = &x[b * h * w * c..][..h * w * c];
        let mut taps = Vec::with_capacity(s.win.h.kernel.min(h) * s.win.w.kernel.min(w));
        for (ox, d) in dst.chunks_mut(c).enumerate() {
            taps_of(&s.win, oy, ox, &mut taps);
            for &p in &taps {
                for (d, &v) in d.iter_mut().zip(&img[p * c..][..c]) {
                    *d += v;
                }
            }
            let count = T::from_count(taps.len());
            for d in d.iter_mut() {
                *d = *d / count;
            }
        }
    });
    out
}

/// `AvgPoolGrad` from the output gradient `dy`: `[N, H, W, C]`.
pub fn avg_pool_grad<T: PoolElem>(s: &PoolShape, dy: &[T]) -> Vec<T> {
    let [n, h, w, c] = s.input;
    let out_pixels = s.out_pixels();
    let mut dx = vec![T::default(); n * h * w * c];
    for b in 0..n {
        let img = &mut dx[b * h * w * c..][..h * w * c];
        windows(&s.win, |o, taps| {
            let count = T::from_count(taps.len());
            let src = &dy[(b * out_pixels + o) * c..][..c];
            for &p in taps {
                for (d, &v) in img[p * c..][..c].iter_mut().zip(src) {
                    *d += v / count;
                }
            }
        });
    }
    dx
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(input: [usize; 4], k: usize) -> PoolShape {
        let win = Window::new((input[1], input[2]), (3, k), (2, 2), (1, 1), &Padding::Same).unwrap();
        PoolShape { input, win }
    }

    /// TensorFlow 2.21's `max_pool2d` (2×2 VALID): a NaN is never the maximum — `[NaN, 5,
    /// 4, −1]` pools to 5, and per channel `[NaN, 1, 2, 3]` over `[5, 6, 7, 8]` to
    /// `[5, 6, 7, 8]` —, a window of NaNs or of −∞ pools to the lowest finite value, and
    /// neither passes a gradient to a NaN.
    #[test]
    fn max_pool_skips_nans_as_tensorflow() {
        let win = |h: usize, w: usize, kh: usize| PoolShape {
            input: [1, h, w, 1],
            win: Window::new((h, w), (kh, 2), (1, 1), (1, 1), &Padding::Valid).unwrap(),
        };
        let nan = f32::NAN;
        assert_eq!(max_pool(&win(2, 2, 2), &[nan, 5.0, 4.0, -1.0]), [5.0]);
        // TensorFlow 2.21 also: `[5, NaN, 4, −1]` → 5.
        assert_eq!(max_pool(&win(2, 2, 2), &[5.0, nan, 4.0, -1.0]), [5.0]);
        assert_eq!(max_pool(&win(2, 2, 2), &[nan; 4]), [f32::MIN]);
        assert_eq!(max_pool(&win(2, 2, 2), &[f32::NEG_INFINITY; 4]), [f32::MIN]);
        let channels = PoolShape {
            input: [1, 2, 1, 4],
            win: Window::new((2, 1), (2, 1), (1, 1), (1, 1), &Padding::Valid).unwrap(),
        };
        assert_eq!(max_pool(&channels, &[nan, 1.0, 2.0, 3.0, 5.0, 6.0, 7.0, 8.0]), [5.0, 6.0, 7.0, 8.0]);
        assert_eq!(max_pool_grad(&win(2, 2, 2), &[nan, 5.0, 4.0, -1.0], &[1.0]), [0.0, 1.0, 0.0, 0.0]);
        assert_eq!(max_pool_grad(&win(2, 2, 2), &[nan; 4], &[1.0]), [0.0; 4]);
    }

    /// The row-parallel, channel-vectorised `MaxPool` and `AvgPool` give, bit for bit, what
    /// one scan per element in window order gives: the value [`argmax`] picks (NaNs skipped,
    /// the first of `+0`/`−0` kept) and the sum in row-major tap order over the count — on
    /// images large enough to be split between threads, with padding, odd channel counts
    /// and strides.
    #[test]
    fn split_and_vectorised_pooling_equals_one_scan_per_element() {
        for (input, k, stride, padding) in [
            ([4, 67, 67, 64], 3, 2, Padding::Valid),
            ([3, 31, 29, 19], 3, 1, Padding::Same),
            ([2, 9, 10, 5], 2, 2, Padding::Same),
            ([1, 1, 1, 1], 1, 1, Padding::Valid),
        ] {
            let win = Window::new((input[1], input[2]), (k, k), (stride, stride), (1, 1), &padding).unwrap();
            let s = PoolShape { input, win };
            let len: usize = input.iter().product();
            let x: Vec<f32> = (0..len)
                .map(|i| match (i * 7919) % 23 {
                    0 => f32::NAN,
                    1 => 0.0,
                    2 => -0.0,
                    r => (r as f32 - 11.0) * 0.37,
                })
                .collect();
            let [n, h, w, c] = input;
            let arg = argmax(&s, &x);
            let out_pixels = s.out_pixels();
            let want: Vec<u32> = arg
                .iter()
                .enumerate()
                .map(|(i, &p)| {
                    let (b, ch) = (i / (out_pixels * c), i % c);
                    if p == usize::MAX { f32::MIN } else { x[(b * h * w + p) * c + ch] }.to_bits()
                })
                .collect();
            let got: Vec<u32> = max_pool(&s, &x).iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, want, "{input:?}");
            let mut avg = vec![0f32; n * out_pixels * c];
            for b in 0..n {
                windows(&s.win, |o, taps| {
                    for ch in 0..c {
                        let mut sum = 0f32;
                        for &p in taps {
                            sum += x[(b * h * w + p) * c + ch];
                        }
                        avg[(b * out_pixels + o) * c + ch] = sum / taps.len() as f32;
                    }
                });
            }
            let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&avg_pool(&s, &x)), bits(&avg), "{input:?}");
        }
    }

    /// Issue 13 (fuzz finding native-3312399): a `ksize` of 10¹² over a 5-wide image used
    /// to reserve 24 TB for the window's taps. Only the taps inside the image are visited,
    /// so such a window is what any window covering the whole width is.
    #[test]
    fn a_window_far_wider_than_the_image_costs_the_image() {
        let input = [2, 4, 5, 3];
        let x: Vec<f32> = (0..input.iter().product::<usize>()).map(|i| ((i * 37) % 11) as f32 - 5.0).collect();
        let (huge, covering) = (shape(input, 1_000_000_000_000), shape(input, 4 * input[2] + 8));
        assert_eq!(huge.output(), covering.output());
        assert_eq!(avg_pool(&huge, &x), avg_pool(&covering, &x));
        assert_eq!(max_pool(&huge, &x), max_pool(&covering, &x));
        let dy: Vec<f32> = (0..huge.output().iter().product::<usize>()).map(|i| i as f32).collect();
        assert_eq!(avg_pool_grad(&huge, &dy), avg_pool_grad(&covering, &dy));
        assert_eq!(max_pool_grad(&huge, &x, &dy), max_pool_grad(&covering, &x, &dy));
        // Every output averages whole rows: the width is covered.
        let row_sum = |b: usize, y: usize, ch: usize| -> f32 {
            (0..input[2]).map(|xx| x[((b * input[1] + y) * input[2] + xx) * input[3] + ch]).sum::<f32>()
        };
        let out = avg_pool(&huge, &x);
        let [_, oh, ow, c] = huge.output();
        assert_eq!(ow, 3);
        // Output row 0 covers input rows 0..3 (SAME over 4 rows: one row of padding, after).
        let want = (row_sum(0, 0, 1) + row_sum(0, 1, 1) + row_sum(0, 2, 1)) / (3 * input[2]) as f32;
        assert!((out[1] - want).abs() < 1e-5, "{} vs {want}", out[1]);
        assert_eq!(oh * ow * c * 2, out.len());
    }
}
