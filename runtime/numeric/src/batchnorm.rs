//! Fused batch normalisation in NHWC — `FusedBatchNorm{,V2,V3}` and
//! `FusedBatchNormGrad{,V2,V3}` — shared by compiled clusters (a kernel step) and the
//! interpreter's kernels (`runtime/src/kernels/batchnorm.rs`), so both modes compute the
//! same bits.
//!
//! Training: per channel, over the `N·H·W` rows, the batch mean and the biased variance
//! normalise `x`: `y = (x − mean) · (rsqrt(var + ε) · scale) + offset`, in the element
//! type. The statistics take one pass over `x`: per channel the sums of `x − s` and
//! `(x − s)²` in f64, shifted by the channel's first value `s` (no cancellation for data
//! far from 0); the mean is rounded to the element type as TensorFlow keeps it and the
//! variance is taken about that rounded mean (`Σ(x − m)² = S₂ − 2dS₁ + nd²`, `d = m − s`).
//! Output 1 is the mean and output 2 the unbiased variance (Bessel's correction), each
//! blended into the running input as `(1 − f) · old + f · batch` when
//! `exponential_avg_factor` `f` is not 1 (with `f = 1` the running inputs may be empty).
//! The reserve spaces carry the batch mean and the biased variance to the gradient.
//! Inference uses the given mean and variance and passes them through.
//!
//! The gradient takes one pass for its two per-channel sums (`Σdy`, `Σdy·x̂`, f64) and
//! one for `dx`.

/// An element type batch normalisation runs on.
pub trait BnElem: Copy + Send + Sync + 'static {
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
    /// `(x − mean) · factor + offset`, in the element type.
    fn normalise(self, mean: Self, factor: Self, offset: Self) -> Self;
    /// `1 / sqrt(var + eps) · scale`, in the element type.
    fn factor(var: Self, eps: Self, scale: Self) -> Self;
}

macro_rules! bn_elem {
    ($($t:ty),*) => {$(
        impl BnElem for $t {
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> $t {
                v as $t
            }
            fn normalise(self, mean: $t, factor: $t, offset: $t) -> $t {
                (self - mean) * factor + offset
            }
            fn factor(var: $t, eps: $t, scale: $t) -> $t {
                1.0 / (var + eps).sqrt() * scale
            }
        }
    )*};
}
bn_elem!(f32, f64);

/// The attributes of a batch-norm op.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BnAttrs {
    pub epsilon: f64,
    pub exponential_avg_factor: f64,
    pub is_training: bool,
}

impl BnAttrs {
    /// `epsilon` (default 1e-4), `exponential_avg_factor` (1) and `is_training` (true);
    /// `None` for an attribute of the wrong type.
    pub fn parse(node: &autoclust_graph::Node) -> Option<BnAttrs> {
        let float = |name: &str, default: f32| match node.attr(name) {
            None => Some(default as f64),
            Some(a) => a.as_float().map(f64::from),
        };
        Some(BnAttrs {
            epsilon: float("epsilon", 1e-4)?,
            exponential_avg_factor: float("exponential_avg_factor", 1.0)?,
            is_training: match node.attr("is_training") {
                None => true,
                Some(a) => a.as_bool()?,
            },
        })
    }

    /// Whether, in training with a factor of 1, the running mean and variance inputs
    /// are unused (TensorFlow lets them be empty then).
    pub fn running_unused(&self) -> bool {
        self.is_training && self.exponential_avg_factor == 1.0
    }
}

impl Eq for BnAttrs {}

impl std::hash::Hash for BnAttrs {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.epsilon.to_bits().hash(h);
        self.exponential_avg_factor.to_bits().hash(h);
        self.is_training.hash(h);
    }
}

/// The forward op's five data outputs (V3's sixth, an empty reserve space, is the
/// caller's).
pub struct BnOutputs<T> {
    pub y: Vec<T>,
    pub batch_mean: Vec<T>,
    pub batch_variance: Vec<T>,
    pub reserve_mean: Vec<T>,
    pub reserve_variance: Vec<T>,
}

/// Rows per part of the parallel passes: a constant, so the partial sums (added in part
/// order) and hence the results never depend on the thread count.
const ROWS_PER_PART: usize = 2048;

/// Per part of [`ROWS_PER_PART`] rows of `x` (`c` channels each), `part(first row, rows)`
/// in parallel; the results in part order.
fn per_part<T: Sync, R: Send>(x: &[T], c: usize, part: impl Fn(usize, &[T]) -> R + Sync + Send) -> Vec<R> {
    use rayon::prelude::*;
    if x.len() <= c * ROWS_PER_PART {
        return vec![part(0, x)];
    }
    x.par_chunks(c * ROWS_PER_PART).enumerate().map(|(p, chunk)| part(p * ROWS_PER_PART, chunk)).collect()
}

/// Per channel: the batch mean rounded to `T` and the biased variance about it, in f64,
/// from one pass over the rows of `x` (`c` channels per row).
fn batch_moments<T: BnElem>(x: &[T], c: usize) -> (Vec<f64>, Vec<f64>) {
    let rows = x.len().checked_div(c).unwrap_or(0);
    if rows == 0 {
        return (vec![0.0; c], vec![0.0; c]);
    }
    let shift: Vec<f64> = x[..c].iter().map(|v| v.to_f64()).collect();
    let parts = per_part(x, c, |_, chunk| {
        let (mut s1, mut s2) = (vec![0.0f64; c], vec![0.0f64; c]);
        for row in chunk.chunks_exact(c) {
            for k in 0..c {
                let d = row[k].to_f64() - shift[k];
                s1[k] += d;
                s2[k] += d * d;
            }
        }
        (s1, s2)
    });
    let (mut s1, mut s2) = (vec![0.0f64; c], vec![0.0f64; c]);
    for (p1, p2) in parts {
        for k in 0..c {
            s1[k] += p1[k];
            s2[k] += p2[k];
        }
    }
    let n = rows as f64;
    let mean: Vec<f64> = (0..c).map(|k| T::from_f64(shift[k] + s1[k] / n).to_f64()).collect();
    let var = (0..c)
        .map(|k| {
            let d = mean[k] - shift[k];
            let ss = (s2[k] - 2.0 * d * s1[k] + n * d * d).max(0.0);
            T::from_f64(ss / n).to_f64()
        })
        .collect();
    (mean, var)
}

/// `f(row, out)` for every row of `x` and the matching `c` elements of the output, in
/// parallel parts.
fn map_rows<T: BnElem>(x: &[T], c: usize, f: impl Fn(usize, &mut [T]) + Sync + Send) -> Vec<T> {
    use rayon::prelude::*;
    let mut out = vec![T::from_f64(0.0); x.len()];
    if c == 0 {
        return out;
    }
    let part = |(p, chunk): (usize, &mut [T])| {
        for (r, o) in chunk.chunks_exact_mut(c).enumerate() {
            f(p * ROWS_PER_PART + r, o);
        }
    };
    if x.len() <= c * ROWS_PER_PART {
        part((0, &mut out));
    } else {
        out.par_chunks_mut(c * ROWS_PER_PART).enumerate().for_each(part);
    }
    out
}

/// `FusedBatchNorm*`: `x` has `c` channels per row; `scale` and `offset` have `c`
/// elements, `mean` and `variance` too (or none when [`BnAttrs::running_unused`]).
/// The caller checks the shapes.
pub fn batch_norm<T: BnElem>(
    a: &BnAttrs,
    x: &[T],
    c: usize,
    scale: &[T],
    offset: &[T],
    mean: Option<&[T]>,
    variance: Option<&[T]>,
) -> BnOutputs<T> {
    let f64s = |v: &[T]| -> Vec<f64> { v.iter().map(|x| x.to_f64()).collect() };
    let (old_mean, old_var) = (mean.map(f64s), variance.map(f64s));
    let (m, v) = if a.is_training {
        batch_moments(x, c)
    } else {
        (old_mean.clone().unwrap_or_else(|| vec![0.0; c]), old_var.clone().unwrap_or_else(|| vec![0.0; c]))
    };
    let eps = T::from_f64(a.epsilon);
    let factor: Vec<T> = (0..c).map(|k| T::factor(T::from_f64(v[k]), eps, scale[k])).collect();
    let mean_t: Vec<T> = m.iter().map(|&x| T::from_f64(x)).collect();
    let y = map_rows(x, c, |r, o| {
        let row = &x[r * c..][..c];
        for k in 0..c {
            o[k] = row[k].normalise(mean_t[k], factor[k], offset[k]);
        }
    });
    let (batch_mean, batch_var) = if a.is_training {
        let count = x.len().checked_div(c).unwrap_or(0);
        let correction = if count > 1 { count as f64 / (count - 1) as f64 } else { 1.0 };
        let unbiased: Vec<f64> = v.iter().map(|v| v * correction).collect();
        match (old_mean, old_var) {
            (Some(om), Some(ov)) if a.exponential_avg_factor != 1.0 => {
                let f = a.exponential_avg_factor;
                (
                    (0..c).map(|k| (1.0 - f) * om[k] + f * m[k]).collect(),
                    (0..c).map(|k| (1.0 - f) * ov[k] + f * unbiased[k]).collect(),
                )
            }
            _ => (m.clone(), unbiased),
        }
    } else {
        (m.clone(), v.clone())
    };
    let ts = |v: &[f64]| -> Vec<T> { v.iter().map(|&x| T::from_f64(x)).collect() };
    BnOutputs {
        y,
        batch_mean: ts(&batch_mean),
        batch_variance: ts(&batch_var),
        reserve_mean: ts(&m),
        reserve_variance: ts(&v),
    }
}

/// `FusedBatchNormGrad*`: (dx, scale gradient, offset gradient) from `dy` and `x` (`c`
/// channels per row) and the forward op's `scale` and reserved mean and variance.
pub fn batch_norm_grad<T: BnElem>(
    a: &BnAttrs,
    dy: &[T],
    x: &[T],
    c: usize,
    scale: &[T],
    mean: &[T],
    variance: &[T],
) -> (Vec<T>, Vec<T>, Vec<T>) {
    let inv: Vec<f64> = variance.iter().map(|v| 1.0 / (v.to_f64() + a.epsilon).sqrt()).collect();
    let mean: Vec<f64> = mean.iter().map(|m| m.to_f64()).collect();
    let scale: Vec<f64> = scale.iter().map(|s| s.to_f64()).collect();
    let (mut sum_dy, mut sum_dy_xhat) = (vec![0.0f64; c], vec![0.0f64; c]);
    if c == 0 {
        return (Vec::new(), Vec::new(), Vec::new());
    }
    // The two sums in one pass over the rows of (x, dy).
    let parts = per_part(dy, c, |first, chunk| {
        let (mut s, mut sx) = (vec![0.0f64; c], vec![0.0f64; c]);
        for (r, gr) in chunk.chunks_exact(c).enumerate() {
            let xr = &x[(first + r) * c..][..c];
            for k in 0..c {
                let g = gr[k].to_f64();
                s[k] += g;
                sx[k] += g * ((xr[k].to_f64() - mean[k]) * inv[k]);
            }
        }
        (s, sx)
    });
    for (s, sx) in parts {
        for k in 0..c {
            sum_dy[k] += s[k];
            sum_dy_xhat[k] += sx[k];
        }
    }
    let n = (x.len() / c).max(1) as f64;
    let dx = map_rows(x, c, |r, o| {
        let (xr, gr) = (&x[r * c..][..c], &dy[r * c..][..c]);
        for k in 0..c {
            let g = gr[k].to_f64();
            o[k] = T::from_f64(if a.is_training {
                let xhat = (xr[k].to_f64() - mean[k]) * inv[k];
                scale[k] * inv[k] * (g - sum_dy[k] / n - xhat * sum_dy_xhat[k] / n)
            } else {
                g * scale[k] * inv[k]
            });
        }
    });
    let ts = |v: &[f64]| -> Vec<T> { v.iter().map(|&x| T::from_f64(x)).collect() };
    (dx, ts(&sum_dy_xhat), ts(&sum_dy))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parts run in parallel but are added in order: the results are the same bits on one
    /// thread and on several.
    #[test]
    fn results_do_not_depend_on_the_thread_count() {
        let c = 3;
        let x: Vec<f32> =
            (0..c * ROWS_PER_PART * 3 + 2 * c).map(|i| ((i * 7919) % 1000) as f32 / 250.0 - 2.0).collect();
        let dy: Vec<f32> = (0..x.len()).map(|i| ((i * 31) % 17) as f32 / 8.0 - 1.0).collect();
        let a = BnAttrs { epsilon: 1e-3, exponential_avg_factor: 1.0, is_training: true };
        let run = || {
            let f = batch_norm(&a, &x, c, &[1.0, 2.0, 0.5], &[0.0, 0.1, 0.2], None, None);
            let g = batch_norm_grad(&a, &dy, &x, c, &[1.0, 2.0, 0.5], &f.reserve_mean, &f.reserve_variance);
            (f.y, f.batch_variance, g.0, g.1, g.2)
        };
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap().install(run);
        let four = rayon::ThreadPoolBuilder::new().num_threads(4).build().unwrap().install(run);
        assert!(one == four);
    }

    /// The one-pass moments equal the two-pass definition, also for data far from 0.
    #[test]
    fn one_pass_moments_match_two_passes() {
        let c = 3;
        let x: Vec<f64> = (0..60).map(|i| 1.0e6 + ((i * 37) % 11) as f64 * 0.25 + (i % c) as f64).collect();
        let (m, v) = batch_moments(&x, c);
        for k in 0..c {
            let col: Vec<f64> = x.iter().skip(k).step_by(c).copied().collect();
            let mean = col.iter().sum::<f64>() / col.len() as f64;
            let var = col.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / col.len() as f64;
            assert!((m[k] - mean).abs() < 1e-9, "{k}: {} vs {mean}", m[k]);
            assert!((v[k] - var).abs() < 1e-6 * var.max(1.0), "{k}: {} vs {var}", v[k]);
        }
    }
}
