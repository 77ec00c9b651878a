//! TensorFlow's Philox4x32-10 generator and its distributions, bit for bit as TensorFlow's
//! CPU kernels draw them — shared by the interpreter's random kernels
//! (`runtime/src/kernels/random.rs`, which keeps the per-session state of the stateful
//! ops) and compiled clusters (the stateless samplers are a kernel step,
//! the compiler's `KernelOp::StatelessRandom`), so both modes draw the same numbers.
//!
//! - uniform float32: 23 random mantissa bits under exponent 127 give a float in [1, 2);
//!   subtract 1. Float64: 52 bits from two words, the same way. Four (two) outputs per call.
//! - normal: Box–Muller on two uniforms (`u1` clamped to 1e-7, angle `2π·u2`), sine first.
//! - truncated normal: Box–Muller pairs, keeping values with |x| < 2, one word at a time;
//!   each group of four (float64: two) outputs starts at its own reserved counter block
//!   (256 words per output), so rejection never shifts other groups.
//! - uniform int: `lo + bits % (hi − lo)`, 32 bits (int32) or 64 bits (int64) per output.

const PHILOX_W32_A: u32 = 0x9E37_79B9;
const PHILOX_W32_B: u32 = 0xBB67_AE85;
const PHILOX_M4X32_A: u32 = 0xD251_1F53;
const PHILOX_M4X32_B: u32 = 0xCD9E_8D57;

/// Counter steps each output reserves (TensorFlow's `kReservedSamplesPerOutput`).
pub const RESERVED_PER_OUTPUT: u64 = 256;

/// The Philox4x32-10 generator: a 128-bit counter under a 64-bit key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Philox {
    pub counter: [u32; 4],
    pub key: [u32; 2],
}

impl Philox {
    /// TensorFlow's `PhiloxRandom(seed_lo, seed_hi)`: the key from `seed`, the upper half
    /// of the counter from `seed2`.
    pub fn new(seed: u64, seed2: u64) -> Philox {
        Philox { counter: [0, 0, seed2 as u32, (seed2 >> 32) as u32], key: [seed as u32, (seed >> 32) as u32] }
    }

    /// Advances the counter by `n` (128-bit add of a 64-bit count).
    pub fn skip(&mut self, n: u64) {
        let (lo, mut hi) = (n as u32, (n >> 32) as u32);
        self.counter[0] = self.counter[0].wrapping_add(lo);
        if self.counter[0] < lo {
            hi = hi.wrapping_add(1);
        }
        self.counter[1] = self.counter[1].wrapping_add(hi);
        if self.counter[1] < hi {
            self.counter[2] = self.counter[2].wrapping_add(1);
            if self.counter[2] == 0 {
                self.counter[3] = self.counter[3].wrapping_add(1);
            }
        }
    }

    /// Four random words; the counter moves on by one.
    pub fn next_block(&mut self) -> [u32; 4] {
        let mut c = self.counter;
        let mut k = self.key;
        for round in 0..10 {
            if round > 0 {
                k[0] = k[0].wrapping_add(PHILOX_W32_A);
                k[1] = k[1].wrapping_add(PHILOX_W32_B);
            }
            let p0 = u64::from(PHILOX_M4X32_A) * u64::from(c[0]);
            let p1 = u64::from(PHILOX_M4X32_B) * u64::from(c[2]);
            c = [(p1 >> 32) as u32 ^ c[1] ^ k[0], p1 as u32, (p0 >> 32) as u32 ^ c[3] ^ k[1], p0 as u32];
        }
        self.skip(1);
        c
    }
}

/// One word at a time from a [`Philox`] (TensorFlow's `SingleSampleAdapter`).
struct SingleWords {
    gen: Philox,
    block: [u32; 4],
    used: usize,
}

impl SingleWords {
    fn new(gen: Philox) -> SingleWords {
        SingleWords { gen, block: [0; 4], used: 4 }
    }
    fn next_word(&mut self) -> u32 {
        if self.used == 4 {
            self.block = self.gen.next_block();
            self.used = 0;
        }
        self.used += 1;
        self.block[self.used - 1]
    }
}

/// A uniform float32 in [0, 1) from 23 random bits.
pub fn word_to_f32(x: u32) -> f32 {
    f32::from_bits((127 << 23) | (x & 0x7f_ffff)) - 1.0
}

/// A uniform float16 in [0, 1) from 10 random bits — TensorFlow's `Uint16ToHalf` (the low
/// 16 bits of the word; the 10-bit mantissa of a half in [1, 2), minus 1) — as a float32
/// (exactly the half value).
pub fn word_to_f16_value(x: u32) -> f32 {
    (x & 0x3ff) as f32 / 1024.0
}

/// A uniform bfloat16 in [0, 1) from 7 random bits — TensorFlow's `Uint16ToGfloat16` — as a
/// float32 (exactly the bfloat16 value).
pub fn word_to_bf16_value(x: u32) -> f32 {
    (x & 0x7f) as f32 / 128.0
}

/// The uniform samples TensorFlow's `UniformDistribution` gives a float16 (`bf16: false`) or
/// bfloat16 output — one per word, four per Philox block, from fewer random bits than a
/// float32 sample, so not a float32 sample rounded — as float32 values.
pub fn uniform_half_values(gen: Philox, n: usize, bf16: bool) -> Vec<f32> {
    let mut gen = gen;
    let f = if bf16 { word_to_bf16_value } else { word_to_f16_value };
    fill_groups(&mut gen, n, |b| b.map(f), 4)
}

/// A uniform float64 in [0, 1) from 52 random bits (`hi`'s low 20, then `lo`).
pub fn words_to_f64(hi: u32, lo: u32) -> f64 {
    let mantissa = (u64::from(hi & 0xf_ffff) << 32) | u64::from(lo);
    f64::from_bits((1023 << 52) | mantissa) - 1.0
}

/// Box–Muller in float32, as TensorFlow computes it (the angle in double, then rounded).
fn box_muller_f32(x0: u32, x1: u32) -> (f32, f32) {
    let u1 = word_to_f32(x0).max(1.0e-7);
    let v1 = (2.0 * std::f64::consts::PI * f64::from(word_to_f32(x1))) as f32;
    let u2 = (-2.0f32 * u1.ln()).sqrt();
    let (s, c) = v1.sin_cos();
    (s * u2, c * u2)
}

/// Box–Muller in float64.
fn box_muller_f64(x: [u32; 4]) -> (f64, f64) {
    let u1 = words_to_f64(x[0], x[1]).max(1.0e-7);
    let v1 = 2.0 * std::f64::consts::PI * words_to_f64(x[2], x[3]);
    let u2 = (-2.0 * u1.ln()).sqrt();
    let (s, c) = v1.sin_cos();
    (s * u2, c * u2)
}

/// Which distribution a kernel draws from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dist {
    Uniform,
    /// The uniform of a float16 (`bf16: false`) or bfloat16 output, drawn from its own few
    /// bits ([`uniform_half_values`]), as float32 values.
    UniformHalf {
        bf16: bool,
    },
    Normal,
    Truncated,
}

/// Fills `n` outputs from fixed-size groups: each group is one [`Philox::next_block`].
fn fill_groups<T: Copy + Default>(
    gen: &mut Philox,
    n: usize,
    group: impl Fn([u32; 4]) -> [T; 4],
    per: usize,
) -> Vec<T> {
    let mut v = Vec::with_capacity(n);
    while v.len() < n {
        let g = group(gen.next_block());
        let take = per.min(n - v.len());
        v.extend_from_slice(&g[..take]);
    }
    v
}

/// Fills `n` outputs in groups of `per`, each group from its own reserved counter block.
fn fill_truncated<T: Copy>(
    base: Philox,
    n: usize,
    per: usize,
    group: impl Fn(&mut SingleWords, &mut Vec<T>),
) -> Vec<T> {
    let mut v = Vec::with_capacity(n + per);
    let skip_per_group = per as u64 * RESERVED_PER_OUTPUT / 4;
    let mut g = 0u64;
    while v.len() < n {
        let mut gen = base;
        gen.skip(g * skip_per_group);
        let mut words = SingleWords::new(gen);
        let start = v.len();
        group(&mut words, &mut v);
        debug_assert_eq!(v.len() - start, per);
        g += 1;
    }
    v.truncate(n);
    v
}

pub fn sample_f32(dist: Dist, gen: Philox, n: usize) -> Vec<f32> {
    let mut gen = gen;
    match dist {
        Dist::Uniform => fill_groups(&mut gen, n, |b| b.map(word_to_f32), 4),
        Dist::UniformHalf { bf16 } => uniform_half_values(gen, n, bf16),
        Dist::Normal => fill_groups(
            &mut gen,
            n,
            |b| {
                let (a0, a1) = box_muller_f32(b[0], b[1]);
                let (a2, a3) = box_muller_f32(b[2], b[3]);
                [a0, a1, a2, a3]
            },
            4,
        ),
        Dist::Truncated => fill_truncated(gen, n, 4, |w, v| {
            let start = v.len();
            loop {
                let (x0, x1) = (w.next_word(), w.next_word());
                let (f0, f1) = box_muller_f32(x0, x1);
                for f in [f0, f1] {
                    if f.abs() < 2.0 {
                        v.push(f);
                        if v.len() - start == 4 {
                            return;
                        }
                    }
                }
            }
        }),
    }
}

pub fn sample_f64(dist: Dist, gen: Philox, n: usize) -> Vec<f64> {
    let mut gen = gen;
    match dist {
        Dist::Uniform => {
            fill_groups(&mut gen, n, |b| [words_to_f64(b[0], b[1]), words_to_f64(b[2], b[3]), 0.0, 0.0], 2)
        }
        Dist::UniformHalf { bf16 } => uniform_half_values(gen, n, bf16).into_iter().map(f64::from).collect(),
        Dist::Normal => fill_groups(
            &mut gen,
            n,
            |b| {
                let (d0, d1) = box_muller_f64(b);
                [d0, d1, 0.0, 0.0]
            },
            2,
        ),
        Dist::Truncated => fill_truncated(gen, n, 2, |w, v| {
            let start = v.len();
            loop {
                let x = [w.next_word(), w.next_word(), w.next_word(), w.next_word()];
                let (d0, d1) = box_muller_f64(x);
                for d in [d0, d1] {
                    if d.abs() < 2.0 {
                        v.push(d);
                        if v.len() - start == 2 {
                            return;
                        }
                    }
                }
            }
        }),
    }
}

/// `lo + x`, where `x < 2^32` fits the result (TensorFlow's `SignedAdd`).
pub fn uniform_int32(gen: Philox, n: usize, lo: i32, hi: i32) -> Vec<i32> {
    let range = (hi as u32).wrapping_sub(lo as u32);
    let mut gen = gen;
    fill_groups(&mut gen, n, |b| b.map(|x| lo.wrapping_add((x % range) as i32)), 4)
}

/// `UniformFullIntDistribution32`: each 32-bit word is one output (as its bits).
pub fn full_int32(gen: Philox, n: usize) -> Vec<u32> {
    let mut gen = gen;
    fill_groups(&mut gen, n, |b| b, 4)
}

/// `UniformFullIntDistribution64`: each pair of words `(lo, hi)` is one output, `lo | hi << 32`.
pub fn full_int64(gen: Philox, n: usize) -> Vec<u64> {
    let mut gen = gen;
    let pair = |l: u32, h: u32| u64::from(l) | (u64::from(h) << 32);
    fill_groups(&mut gen, n, |b: [u32; 4]| [pair(b[0], b[1]), pair(b[2], b[3]), 0, 0], 2)
}

pub fn uniform_int64(gen: Philox, n: usize, lo: i64, hi: i64) -> Vec<i64> {
    let range = (hi as u64).wrapping_sub(lo as u64);
    let mut gen = gen;
    let f = |b: [u32; 4]| {
        let pick = |l: u32, h: u32| lo.wrapping_add(((u64::from(l) | (u64::from(h) << 32)) % range) as i64);
        [pick(b[0], b[1]), pick(b[2], b[3]), 0, 0]
    };
    fill_groups(&mut gen, n, f, 2)
}

/// `RandomShuffle`'s permutation of `0..n` (TensorFlow's `ShuffleRange`: for each position
/// but the last, a swap with a later one chosen by one 32-bit word modulo the rest's length,
/// so exactly `n − 1` words are drawn).
pub fn shuffled_indices(gen: Philox, n: usize) -> Vec<usize> {
    let mut words = SingleWords::new(gen);
    let mut perm: Vec<usize> = (0..n).collect();
    for i in 0..n.saturating_sub(1) {
        let j = i + (words.next_word() % ((n - i) as u32)) as usize;
        perm.swap(i, j);
    }
    perm
}

/// Two float64 draws at a time from their own Philox block, handed out last first (TensorFlow's
/// `UNIFORM`/normal buffers in `random_gamma_op.cc`).
struct Pairs {
    values: [f64; 2],
    left: usize,
}

impl Pairs {
    fn new() -> Pairs {
        Pairs { values: [0.0; 2], left: 0 }
    }
    fn next(&mut self, gen: &mut Philox, normal: bool) -> f64 {
        if self.left == 0 {
            let b = gen.next_block();
            self.values = if normal {
                let (x, y) = box_muller_f64(b);
                [x, y]
            } else {
                [words_to_f64(b[0], b[1]), words_to_f64(b[2], b[3])]
            };
            self.left = 2;
        }
        self.left -= 1;
        self.values[self.left]
    }
}

/// `RandomGamma`'s samples (`random_gamma_op.cc`), `samples` per alpha, laid out `[samples,
/// alphas]`, in float64 whatever the output type: output `i` (alpha-major) draws from the
/// generator moved past `256·i` blocks; α = 1 is an exponential `−log1p(−u)`, any other α
/// Marsaglia and Tsang's transformation-rejection (for α < 1 from α + 1, times `u^(1/α)`).
pub fn gamma(gen: Philox, alphas: &[f64], samples: usize) -> Vec<f64> {
    let mut out = vec![0.0; samples * alphas.len()];
    for (a, &alpha) in alphas.iter().enumerate() {
        let less = alpha < 1.0;
        let d = alpha + if less { 2.0 / 3.0 } else { -1.0 / 3.0 };
        let c = 1.0 / 3.0 / d.sqrt();
        for s in 0..samples {
            let mut g = gen;
            g.skip(RESERVED_PER_OUTPUT * (a * samples + s) as u64);
            let (mut normals, mut uniforms) = (Pairs::new(), Pairs::new());
            out[s * alphas.len() + a] = if alpha == 1.0 {
                -(-uniforms.next(&mut g, false)).ln_1p()
            } else {
                loop {
                    let x = normals.next(&mut g, true);
                    let mut v = 1.0 + c * x;
                    if v <= 0.0 {
                        continue;
                    }
                    v = v * v * v;
                    let u = uniforms.next(&mut g, false);
                    if u < 1.0 - 0.0331 * (x * x) * (x * x) || u.ln() < 0.5 * x * x + d * (1.0 - v + v.ln()) {
                        let mut res = d * v;
                        if less {
                            res *= uniforms.next(&mut g, false).powf(1.0 / alpha);
                        }
                        break res;
                    }
                }
            };
        }
    }
    out
}

/// `RandomPoissonV2`/`StatelessRandomPoisson`'s samples (`random_poisson_op.cc`), `samples` per
/// rate, laid out `[samples, rates]`, computed in float64: output `i` (rate-major) draws from
/// the generator moved past `256·i` blocks; rates below 10 by Knuth's product of uniforms,
/// larger ones by Hörmann's transformed rejection (PTRS); 0 for a rate ≤ 0 or NaN, ∞ for +∞.
pub fn poisson(gen: Philox, rates: &[f64], samples: usize) -> Vec<f64> {
    let mut out = vec![0.0; samples * rates.len()];
    for (r, &rate) in rates.iter().enumerate() {
        for s in 0..samples {
            let at = s * rates.len() + r;
            if rate.is_nan() || rate <= 0.0 {
                out[at] = 0.0;
                continue;
            }
            if rate.is_infinite() {
                out[at] = f64::INFINITY;
                continue;
            }
            let mut g = gen;
            g.skip(RESERVED_PER_OUTPUT * (r * samples + s) as u64);
            let mut uniforms = Pairs::new();
            out[at] = if rate < 10.0 {
                let limit = (-rate).exp();
                let (mut prod, mut x) = (1.0, 0.0);
                loop {
                    prod *= uniforms.next(&mut g, false);
                    if prod <= limit {
                        break x;
                    }
                    x += 1.0;
                }
            } else {
                let log_rate = rate.ln();
                let b = 0.931 + 2.53 * rate.sqrt();
                let a = -0.059 + 0.02483 * b;
                let inv_alpha = 1.1239 + 1.1328 / (b - 3.4);
                loop {
                    let u = uniforms.next(&mut g, false) - 0.5;
                    let v = uniforms.next(&mut g, false);
                    let us = 0.5 - u.abs();
                    let k = ((2.0 * a / us + b) * u + rate + 0.43).floor();
                    if k < 0.0 {
                        continue;
                    }
                    if us >= 0.07 && v <= 0.9277 - 3.6224 / (b - 2.0) {
                        break k;
                    }
                    if us < 0.013 && v > us {
                        continue;
                    }
                    let s = (v * inv_alpha / (a / (us * us) + b)).ln();
                    let t = -rate + k * log_rate - libm::lgamma(k + 1.0);
                    if s <= t {
                        break k;
                    }
                }
            };
        }
    }
    out
}

/// The precision of a sampler's parameter type `T`, in which TensorFlow's kernels make
/// some of their decisions (a float16 product is rounded to float16 before it is compared).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    Half,
    Single,
    Double,
}

impl Precision {
    /// `x` rounded to the precision (`x` already one of its values' widening or a result of
    /// one operation on them).
    pub fn round(self, x: f64) -> f64 {
        match self {
            Precision::Half => f64::from(autoclust_graph::half::round_to(x as f32, autoclust_graph::DType::Float16)),
            Precision::Single => f64::from(x as f32),
            Precision::Double => x,
        }
    }
}

/// Counter blocks a binomial output reserves when it sums geometric draws (TensorFlow's
/// comment: mean and variance at most 10, so 42 draws cover ten standard deviations).
const BINOMIAL_INVERSION_RESERVED: u64 = 42;

/// `StatelessRandomBinomial`/`StatefulRandomBinomial`'s samples (`random_binomial_op.cc`),
/// `samples` per (count, prob) pair, laid out `[samples, pairs]` and computed in float64.
/// Output `s` of pair `b` draws from `gen` moved past `42·(b·samples + s)` blocks when it
/// sums geometric variables (count·p < 10: binomial inversion) and `256·(b·samples + s)` when
/// it uses Hörmann's BTRS; for p > ½ the draw is `count −` a draw with `q = 1 − p`. Count ≤ 0
/// or p ≤ 0 give 0, p ≥ 1 gives count, a NaN p gives NaN. The comparisons `count·p ≥ 10` and
/// `q = 1 − p` are made in the parameters' own precision, as TensorFlow's template does.
pub fn binomial(gen: Philox, counts: &[f64], probs: &[f64], precision: Precision, samples: usize) -> Vec<f64> {
    let pairs = counts.len();
    let mut out = vec![0.0; samples * pairs];
    for (b, (&count, &prob)) in counts.iter().zip(probs).enumerate() {
        for s in 0..samples {
            let idx = (b * samples + s) as u64;
            let draw = |p: f64| {
                let mut g = gen;
                if precision.round(count * p) >= 10.0 {
                    g.skip(RESERVED_PER_OUTPUT * idx);
                    btrs(count, p, &mut g)
                } else {
                    g.skip(BINOMIAL_INVERSION_RESERVED * idx);
                    binomial_inversion(count, p, &mut g)
                }
            };
            out[s * pairs + b] = if count <= 0.0 || prob <= 0.0 {
                0.0
            } else if prob >= 1.0 {
                count
            } else if prob <= 0.5 {
                draw(prob)
            } else if prob > 0.5 {
                count - draw(precision.round(1.0 - prob))
            } else {
                f64::NAN
            };
        }
    }
    out
}

/// The number of geometric(p) variables whose sum stays within `count`.
fn binomial_inversion(count: f64, prob: f64, gen: &mut Philox) -> f64 {
    let mut uniforms = Pairs::new();
    let (mut sum, mut n) = (0.0, 0.0);
    let log_q = (-prob).ln_1p();
    loop {
        let u: f64 = uniforms.next(gen, false);
        sum += (u.ln() / log_q).ceil();
        if sum > count {
            return n;
        }
        n += 1.0;
    }
}

/// The tail `log k! − (k + ½)·log(k + 1) + (k + 1) − ½·log 2π` of Stirling's series (exact
/// values up to 9, the series beyond).
fn stirling_tail(k: f64) -> f64 {
    const TAIL: [f64; 10] = [
        0.0810614667953272,
        0.0413406959554092,
        0.0276779256849983,
        0.02079067210376509,
        0.0166446911898211,
        0.0138761288230707,
        0.0118967099458917,
        0.0104112652619720,
        0.00925546218271273,
        0.00833056343336287,
    ];
    if k <= 9.0 {
        return TAIL[k as usize];
    }
    let kp1sq = (k + 1.0) * (k + 1.0);
    (1.0 / 12.0 - (1.0 / 360.0 - 1.0 / 1260.0 / kp1sq) / kp1sq) / (k + 1.0)
}

/// Hörmann's transformed rejection with squeeze (BTRS, "The generation of binomial random
/// variates", 1993) from pairs of uniforms, with TensorFlow's constants and its acceptance
/// test (the log of `v` taken in place of the paper's).
fn btrs(count: f64, prob: f64, gen: &mut Philox) -> f64 {
    let stddev = (count * prob * (1.0 - prob)).sqrt();
    let b = 1.15 + 2.53 * stddev;
    let a = -0.0873 + 0.0248 * b + 0.01 * prob;
    let c = count * prob + 0.5;
    let v_r = 0.92 - 4.2 / b;
    let r = prob / (1.0 - prob);
    let alpha = (2.83 + 5.1 / b) * stddev;
    let m = ((count + 1.0) * prob).floor();
    let mut uniforms = Pairs::new();
    loop {
        let u = uniforms.next(gen, false) - 0.5;
        let v = uniforms.next(gen, false);
        let us = 0.5 - u.abs();
        let k = ((2.0 * a / us + b) * u + c).floor();
        if us >= 0.07 && v <= v_r {
            return k;
        }
        if k < 0.0 || k > count {
            continue;
        }
        let v = (v * alpha / (a / (us * us) + b)).ln();
        let bound = (m + 0.5) * ((m + 1.0) / (r * (count - m + 1.0))).ln()
            + (count + 1.0) * ((count - m + 1.0) / (count - k + 1.0)).ln()
            + (k + 0.5) * (r * (count - k + 1.0) / (k + 1.0)).ln()
            + stirling_tail(m)
            + stirling_tail(count - m)
            - stirling_tail(k)
            - stirling_tail(count - k);
        if v <= bound {
            return k;
        }
    }
}

/// The values of a parameter of shape `from` at every position of the broadcast shape `to`
/// (numpy's rule, aligned at the last dimension; `from` must broadcast to `to`).
pub fn broadcast_values(values: &[f64], from: &[usize], to: &[usize]) -> Vec<f64> {
    let n: usize = to.iter().product();
    if from == to {
        return values.to_vec();
    }
    let lead = to.len() - from.len();
    // Strides of `from` in `to`'s dimensions (0 along a broadcast dimension).
    let mut strides = vec![0usize; to.len()];
    let mut acc = 1;
    for i in (0..from.len()).rev() {
        strides[lead + i] = if from[i] == 1 { 0 } else { acc };
        acc *= from[i];
    }
    let mut out = Vec::with_capacity(n);
    let mut index = vec![0usize; to.len()];
    for _ in 0..n {
        out.push(values[index.iter().zip(&strides).map(|(i, s)| i * s).sum::<usize>()]);
        for d in (0..to.len()).rev() {
            index[d] += 1;
            if index[d] < to[d] {
                break;
            }
            index[d] = 0;
        }
    }
    out
}

/// The candidate samplers' distributions (`range_sampler.cc`) over `0..range`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Candidates {
    /// `P(k) = 1/range`: one 64-bit draw (two words) modulo `range`.
    Uniform,
    /// `P(k) = log((k+2)/(k+1)) / log(range+1)` (Zipf-like, for vocabularies sorted by
    /// frequency): `exp(u·log(range+1)) − 1` for a uniform double `u`, modulo `range`.
    LogUniform,
}

impl Candidates {
    fn sample(self, words: &mut SingleWords, range: u64) -> u64 {
        match self {
            Candidates::Uniform => {
                let (x0, x1) = (words.next_word(), words.next_word());
                (u64::from(x0) | (u64::from(x1) << 32)) % range
            }
            Candidates::LogUniform => {
                let (x0, x1) = (words.next_word(), words.next_word());
                let u = words_to_f64(x0, x1);
                ((u * (range as f64).ln_1p()).exp() as i64 - 1) as u64 % range
            }
        }
    }

    /// The probability of drawing `k`, as TensorFlow computes it (float64, then float32).
    pub fn probability(self, k: i64, range: u64) -> f32 {
        match self {
            Candidates::Uniform => (1.0 / range as f64) as f32,
            Candidates::LogUniform => (((k as f64 + 2.0) / (k as f64 + 1.0)).ln() / (range as f64).ln_1p()) as f32,
        }
    }
}

/// A candidate sampler's draw (`RangeSampler::SampleBatchGetExpectedCountAvoid`): `count` values
/// of `0..range` one after another, skipping values drawn before when `unique`; also returns
/// the number of draws made (which the expected counts use).
pub fn sample_candidates(gen: Philox, dist: Candidates, range: u64, count: usize, unique: bool) -> (Vec<i64>, u64) {
    let mut words = SingleWords::new(gen);
    let mut out = Vec::with_capacity(count);
    if !unique {
        for _ in 0..count {
            out.push(dist.sample(&mut words, range) as i64);
        }
        return (out, count as u64);
    }
    let mut used = std::collections::HashSet::with_capacity(count);
    let mut tries = 0u64;
    while out.len() < count {
        tries += 1;
        let v = dist.sample(&mut words, range);
        if used.insert(v) {
            out.push(v as i64);
        }
    }
    (out, tries)
}

/// The expected number of times a value of probability `p` appears among `tries` draws that
/// yielded `count` values: `p·count` without rejections, else `1 − (1 − p)^tries` (TensorFlow's
/// `ExpectedCountHelper`, in float32).
pub fn expected_count(p: f32, count: usize, tries: u64) -> f32 {
    if tries == count as u64 {
        return p * count as f32;
    }
    -((tries as f32) * (-p).ln_1p()).exp_m1()
}

/// The generator reservation of a `Multinomial` run (`ReserveRandomOutputs` of
/// `batch × ceil4(samples) × 2` outputs: the CPU kernel draws doubles, two words each).
pub fn categorical_outputs(batch: usize, samples: usize) -> usize {
    batch * samples.div_ceil(4) * 4 * 2
}

/// `Multinomial`'s CPU sampling, rows in order from one generator (TensorFlow's kernel when
/// its work sharder runs the batch as one shard, which it does below ~10⁴ cost units — a
/// batch of a few rows; larger batches TensorFlow splits across threads with per-shard
/// skips, so its numbers then depend on its thread count): per row, the unnormalised CDF of
/// `exp(logit − max)` over the finite logits in float64, then for each sample a uniform
/// double (two words) times the total, and the first class whose CDF exceeds it.
pub fn categorical(gen: Philox, logits: &[f64], batch: usize, classes: usize, samples: usize) -> Vec<i64> {
    let mut words = SingleWords::new(gen);
    let mut out = Vec::with_capacity(batch * samples);
    let mut cdf = vec![0.0f64; classes];
    for row in logits.chunks_exact(classes.max(1)).take(batch) {
        let max = row.iter().copied().filter(|x| x.is_finite()).fold(f64::MIN, f64::max);
        let mut total = 0.0;
        for (c, &x) in cdf.iter_mut().zip(row) {
            if x.is_finite() {
                total += (x - max).exp();
            }
            *c = total;
        }
        for _ in 0..samples {
            let hi = words.next_word();
            let lo = words.next_word();
            let target = words_to_f64(hi, lo) * total;
            out.push(cdf.partition_point(|&c| c <= target) as i64);
        }
    }
    out
}

/// TensorFlow's `GenerateKey`: a stateless op's key and counter from its 64-bit seed pair.
/// The seed is scrambled by one Philox block under a fixed key, so the user need not care
/// which half of the seed is strong: the block's first two words become the key, its last
/// two the counter's upper half.
pub fn key_counter_from_seed(s0: u64, s1: u64) -> Philox {
    let mut scramble = Philox {
        counter: [s0 as u32, (s0 >> 32) as u32, s1 as u32, (s1 >> 32) as u32],
        key: [0x3ec8_f720, 0x0246_1e29],
    };
    let mix = scramble.next_block();
    Philox { counter: [0, 0, mix[2], mix[3]], key: [mix[0], mix[1]] }
}

/// The uint64 words of a uint64 vector of `len` elements.
pub fn u64_words(t: &autoclust_graph::Tensor, what: &str, len: usize) -> Result<Vec<u64>, String> {
    let bytes = match (&t.data, t.dtype) {
        (autoclust_graph::TensorData::Raw(b), autoclust_graph::DType::UInt64) => b,
        _ => return Err(format!("{what} must be uint64, got {}", t.dtype)),
    };
    if t.num_elements() != len || t.rank() != 1 {
        return Err(format!("{what} must be a vector of {len} uint64, got shape {:?}", t.shape));
    }
    Ok(bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect())
}

/// The generator of a V2 stateless op from its `key`, `counter` and `alg` operands
/// (TensorFlow's `GetKeyCounterAlgFromInputs`; only Philox, algorithm 1 — what
/// `StatelessRandomGetAlg` and auto-selection give on CPU — is supported).
pub fn generator_from_key_counter(
    key: &autoclust_graph::Tensor,
    counter: &autoclust_graph::Tensor,
    alg: &autoclust_graph::Tensor,
) -> Result<Philox, String> {
    let alg = match alg.to_i64_vec().as_deref() {
        Some(&[a]) if alg.rank() == 0 => a,
        _ => return Err(format!("alg must be an integer scalar, got {} {:?}", alg.dtype, alg.shape)),
    };
    if alg != 1 && alg != 3 {
        return Err(format!(
            "unsupported random algorithm {alg} (only Philox, 1, and auto-select, 3, are implemented)"
        ));
    }
    let k = u64_words(key, "key", 1)?[0];
    let c = u64_words(counter, "counter", 2)?;
    Ok(Philox {
        counter: [c[0] as u32, (c[0] >> 32) as u32, c[1] as u32, (c[1] >> 32) as u32],
        key: [k as u32, (k >> 32) as u32],
    })
}

/// The generator of a V1 stateless op from its `seed` operand (int32 or int64, shape `[2]`).
pub fn generator_from_seed(seed: &autoclust_graph::Tensor) -> Result<Philox, String> {
    match seed.to_i64_vec().as_deref() {
        Some(&[s0, s1]) if seed.rank() == 1 => Ok(key_counter_from_seed(s0 as u64, s1 as u64)),
        _ => Err(format!("seed must be an integer vector of shape [2], not {} {:?}", seed.dtype, seed.shape)),
    }
}

/// `StatelessRandomGetKeyCounter`'s outputs from a generator: the key (uint64 `[1]`) and
/// the counter (uint64 `[2]`).
pub fn key_counter_tensors(gen: &Philox) -> (autoclust_graph::Tensor, autoclust_graph::Tensor) {
    let t = |v: &[u64]| {
        let bytes = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        autoclust_graph::Tensor::from_raw(autoclust_graph::DType::UInt64, vec![v.len()], bytes)
            .expect("length matches the shape")
    };
    (
        t(&[u64::from(gen.key[0]) | u64::from(gen.key[1]) << 32]),
        t(&[
            u64::from(gen.counter[0]) | u64::from(gen.counter[1]) << 32,
            u64::from(gen.counter[2]) | u64::from(gen.counter[3]) << 32,
        ]),
    )
}

/// Uniform integers of `dtype` (int32 or int64) in `[lo, hi)` from scalar bounds, after
/// TensorFlow's checks of them.
pub fn uniform_ints(
    gen: Philox,
    dtype: autoclust_graph::DType,
    shape: Vec<usize>,
    lo: &autoclust_graph::Tensor,
    hi: &autoclust_graph::Tensor,
) -> Result<autoclust_graph::Tensor, String> {
    use autoclust_graph::{DType, Tensor};
    let scalar = |t: &Tensor, what: &str| match t.to_i64_vec().as_deref() {
        Some(&[v]) if t.rank() == 0 => Ok(v),
        _ => Err(format!("{what} must be 0-D, got shape {:?}", t.shape)),
    };
    let (lo, hi) = (scalar(lo, "minval")?, scalar(hi, "maxval")?);
    let n: usize = shape.iter().product();
    if n > 0 && lo >= hi {
        return Err(format!("Need minval < maxval, got {lo} >= {hi}"));
    }
    let t = match dtype {
        DType::Int32 => Tensor::from_i32(shape, uniform_int32(gen, n, lo as i32, hi as i32)),
        _ => Tensor::from_i64(shape, uniform_int64(gen, n, lo, hi)),
    };
    t.map_err(|e| e.to_string())
}

/// A float type TensorFlow's parameterized truncated normal computes in (`T`: float16,
/// float32 or float64), with its operations as TensorFlow's kernel performs them — a float16
/// operation in float32, rounded to float16 — and its uniform and normal draws.
pub trait SampleReal: Copy + PartialOrd {
    /// Values per Philox block of the uniform and normal distributions.
    const PER_BLOCK: usize;
    /// `T(x)`, rounded to the type.
    fn of(x: f64) -> Self;
    fn to_f64(self) -> f64;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    fn neg(self) -> Self;
    fn sqrt(self) -> Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    /// One block's uniforms in [0, 1) (`UniformDistribution<PhiloxRandom, T>`).
    fn uniforms(block: [u32; 4]) -> [Self; 4];
    /// One block's standard normals (`NormalDistribution<PhiloxRandom, T>`).
    fn normals(block: [u32; 4]) -> [Self; 4];
}

/// The arithmetic of [`SampleReal`] for a native float type: its own operations.
macro_rules! native_real_ops {
    () => {
        fn add(self, o: Self) -> Self {
            self + o
        }
        fn sub(self, o: Self) -> Self {
            self - o
        }
        fn mul(self, o: Self) -> Self {
            self * o
        }
        fn div(self, o: Self) -> Self {
            self / o
        }
        fn neg(self) -> Self {
            -self
        }
        fn sqrt(self) -> Self {
            Self::sqrt(self)
        }
        fn exp(self) -> Self {
            Self::exp(self)
        }
        fn ln(self) -> Self {
            Self::ln(self)
        }
    };
}

impl SampleReal for f32 {
    const PER_BLOCK: usize = 4;
    fn of(x: f64) -> f32 {
        x as f32
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    native_real_ops!();
    fn uniforms(b: [u32; 4]) -> [f32; 4] {
        b.map(word_to_f32)
    }
    fn normals(b: [u32; 4]) -> [f32; 4] {
        let (a0, a1) = box_muller_f32(b[0], b[1]);
        let (a2, a3) = box_muller_f32(b[2], b[3]);
        [a0, a1, a2, a3]
    }
}

impl SampleReal for f64 {
    const PER_BLOCK: usize = 2;
    fn of(x: f64) -> f64 {
        x
    }
    fn to_f64(self) -> f64 {
        self
    }
    native_real_ops!();
    fn uniforms(b: [u32; 4]) -> [f64; 4] {
        [words_to_f64(b[0], b[1]), words_to_f64(b[2], b[3]), 0.0, 0.0]
    }
    fn normals(b: [u32; 4]) -> [f64; 4] {
        let (d0, d1) = box_muller_f64(b);
        [d0, d1, 0.0, 0.0]
    }
}

/// A float16 value held as the float32 it widens to; every operation rounds its float32
/// result to float16, as `Eigen::half`'s operators do on a CPU without float16 arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Half(pub f32);

impl Half {
    fn round(x: f32) -> Half {
        Half(autoclust_graph::half::round_to(x, autoclust_graph::DType::Float16))
    }
}

impl SampleReal for Half {
    const PER_BLOCK: usize = 4;
    fn of(x: f64) -> Half {
        Half::round(x as f32)
    }
    fn to_f64(self) -> f64 {
        f64::from(self.0)
    }
    fn add(self, o: Half) -> Half {
        Half::round(self.0 + o.0)
    }
    fn sub(self, o: Half) -> Half {
        Half::round(self.0 - o.0)
    }
    fn mul(self, o: Half) -> Half {
        Half::round(self.0 * o.0)
    }
    fn div(self, o: Half) -> Half {
        Half::round(self.0 / o.0)
    }
    fn neg(self) -> Half {
        Half(-self.0)
    }
    fn sqrt(self) -> Half {
        Half::round(self.0.sqrt())
    }
    fn exp(self) -> Half {
        Half::round(self.0.exp())
    }
    fn ln(self) -> Half {
        Half::round(self.0.ln())
    }
    fn uniforms(b: [u32; 4]) -> [Half; 4] {
        b.map(|x| Half(word_to_f16_value(x)))
    }
    fn normals(b: [u32; 4]) -> [Half; 4] {
        f32::normals(b).map(Half::round)
    }
}

/// Proposals a truncated-normal sampler may reject in a row (TensorFlow's `kMaxIterations`).
pub const TRUNCATED_MAX_ITERATIONS: u64 = 1000;

/// `count` draws of the normal (`mean`, `stddev`) truncated to [`minval`, `maxval`] from the
/// running generator `gen` (`parameterized_truncated_normal_op.cc`, one batch of
/// `TruncatedNormalFunctor`/`V2` in one shard): after TensorFlow's flip of a bound at −∞ or
/// above the mean, by rejection of standard normals when the bounds hold at least 1.3
/// standard deviations on one side and the mean, else by a uniform proposal on a narrow
/// interval, else by Robert's exponential proposal. Each sampler draws whole Philox blocks and
/// drops what is left of the last one; `Err` holds TensorFlow's message.
pub fn truncated_normal_batch<T: SampleReal>(
    gen: &mut Philox,
    [mean, stddev, minval, maxval]: [T; 4],
    count: usize,
) -> Result<Vec<T>, String> {
    let zero = T::of(0.0);
    let finite = |x: T| x.to_f64().is_finite();
    if !(stddev > zero && minval < maxval && (finite(minval) || finite(maxval))) {
        return Err("Invalid parameters".into());
    }
    let (mut minval, mut maxval, mut stddev) = (minval, maxval, stddev);
    if (minval.to_f64().is_infinite() && minval < zero) || maxval < mean {
        std::mem::swap(&mut minval, &mut maxval);
        stddev = stddev.neg();
    }
    let norm_min = minval.sub(mean).div(stddev);
    let norm_max = maxval.sub(mean).div(stddev);
    let sqrt_factor = norm_min.mul(norm_min).add(T::of(4.0)).sqrt();
    let cutoff = T::of(2.0)
        .mul(T::of(0.5).add(norm_min.mul(norm_min.sub(sqrt_factor)).div(T::of(4.0))).exp())
        .div(norm_min.add(sqrt_factor));
    let diff = norm_max.sub(norm_min);
    let inside = T::of(1.3);
    let mut out = Vec::with_capacity(count);
    let mut rejected = 0u64;
    let per = T::PER_BLOCK;
    if (norm_min < inside.neg() && norm_max >= zero) || (norm_max > inside && norm_min <= zero) {
        while out.len() < count {
            let normals = T::normals(gen.next_block());
            for &x in &normals[..per] {
                if x >= norm_min && x <= norm_max {
                    out.push(x.mul(stddev).add(mean));
                    if out.len() >= count {
                        break;
                    }
                    rejected = 0;
                } else {
                    rejected += 1;
                    if rejected > TRUNCATED_MAX_ITERATIONS {
                        return Err("TruncatedNormal randn rejection sampler failed to accept a sample.".into());
                    }
                }
            }
        }
    } else if diff < cutoff {
        let plus = if norm_min < zero { zero } else { norm_min.mul(norm_min) };
        while out.len() < count {
            let rand = T::uniforms(gen.next_block());
            let z = rand.map(|r| r.mul(diff).add(norm_min));
            let g = z.map(|z| plus.sub(z.mul(z)).div(T::of(2.0)));
            let u = T::uniforms(gen.next_block());
            for i in 0..per {
                let accept = u[i] <= g[i].exp();
                if accept || rejected + 1 >= TRUNCATED_MAX_ITERATIONS {
                    if !accept {
                        return Err("TruncatedNormal uniform rejection sampler failed to  accept a sample.".into());
                    }
                    out.push(z[i].mul(stddev).add(mean));
                    if out.len() >= count {
                        break;
                    }
                    rejected = 0;
                } else {
                    rejected += 1;
                }
            }
        }
    } else {
        let alpha = norm_min.add(norm_min.mul(norm_min).add(T::of(4.0)).sqrt()).div(T::of(2.0));
        while out.len() < count {
            let rand = T::uniforms(gen.next_block());
            for pair in rand[..per].chunks_exact(2) {
                let z = pair[0].ln().neg().div(alpha).add(norm_min);
                let x = if norm_min < alpha { alpha.sub(z) } else { norm_min.sub(alpha) };
                let g = x.neg().mul(x).div(T::of(2.0)).exp();
                let accept = pair[1] <= g && z < norm_max;
                if accept || rejected + 1 >= TRUNCATED_MAX_ITERATIONS {
                    if !accept {
                        return Err(
                            "TruncatedNormal exponential distribution rejection sampler failed to accept a sample."
                                .into(),
                        );
                    }
                    out.push(z.mul(stddev).add(mean));
                    if out.len() >= count {
                        break;
                    }
                    rejected = 0;
                } else {
                    rejected += 1;
                }
            }
        }
    }
    Ok(out)
}

/// `index`'s position in the pseudorandom permutation of `0..=max_index` that `key` and
/// `rounds` choose (`random_index_shuffle.cc`, `tf.random.experimental.index_shuffle`): a
/// Simon-like Feistel cipher on blocks of an even number of bits, at least 16 and enough for
/// `ceil(log2(max_index))`, with TensorFlow's key schedule, applied until the value falls in
/// range (cycle walking). `rounds` must be even and at least 4.
pub fn index_shuffle(index: u64, key: [u32; 3], max_index: u64, rounds: usize) -> u64 {
    if max_index == 0 {
        return 0;
    }
    let bits = (max_index as f64).log2().ceil() as i64;
    let block = (bits + bits % 2).max(16);
    let w = if block > 62 { 32 } else { (block / 2) as u32 };
    let mask = (1u64 << w) - 1;
    let rotl = |x: u64, r: u32| ((x << r) | (x >> (w - r))) & mask;
    let rotr = |x: u64, r: u32| ((x >> r) | (x << (w - r))) & mask;
    let f = |x: u64| (rotl(x, 1) & rotl(x, 8)) ^ rotl(x, 2);
    // The key schedule: the three key words, then one word per further round.
    let c = 0xffff_fffc & mask;
    let mut z = 0x7369_f885_192c_0ef5 & mask;
    let mut keys: Vec<u64> = key.iter().map(|&k| u64::from(k) & mask).collect();
    for i in 3..rounds {
        let k = c ^ (z & 1) ^ keys[i - 3] ^ rotr(keys[i - 1], 3) ^ rotr(keys[i - 1], 4);
        keys.push(k);
        z >>= 1;
    }
    keys.truncate(rounds);
    let mut value = index;
    loop {
        let (mut left, mut right) = ((value >> w) & mask, value & mask);
        for pair in keys.chunks_exact(2) {
            left ^= f(right) ^ pair[0];
            right ^= f(left) ^ pair[1];
        }
        value = (left << w) | right;
        if value <= max_index {
            return value;
        }
    }
}

/// `GeneratePoolingSequence` (`fractional_pool_common.cc`): the cumulative boundaries
/// `[0, …, input]` of `output` fractional-pooling regions along one dimension, each `k` or
/// `k + 1` long (`k = input / output`), drawn from `gen`, which moves past what it used as
/// `GuardedPhiloxRandom::ReserveSamples32` moves it. Pseudo-random: region ends at
/// `ceil(α·(i + u))` for one uniform double `u` scaled below the bound that keeps every gap
/// in range (Graham, "Fractional max-pooling", 2014); random: the `input % output` longer
/// regions first, then shuffled as `RandomShuffle` does.
pub fn pooling_sequence(input: usize, output: usize, gen: &mut Philox, pseudo_random: bool) -> Vec<i64> {
    let (input_i, output_i) = (input as i64, output as i64);
    let k = input_i / output_i;
    let diff: Vec<i64> = if pseudo_random {
        let local = *gen;
        gen.skip(1);
        let mut words = SingleWords::new(local);
        let (x0, x1) = (words.next_word(), words.next_word());
        let alpha = input as f64 / output as f64;
        let u_max1 = (k + 2) as f64 / alpha - 1.0;
        let u_max2 = (input_i + 1 - k) as f64 / alpha - (output_i - 1) as f64;
        let u = words_to_f64(x0, x1) * u_max1.min(u_max2);
        let mut cum = vec![0i64; output + 1];
        cum[0] = 1;
        cum[output] = input_i + 1;
        for (i, c) in cum.iter_mut().enumerate().take(output).skip(1) {
            *c = (alpha * (i as f64 + u)).ceil() as i32 as i64;
        }
        cum.windows(2).map(|w| w[1] - w[0]).collect()
    } else {
        let spots = (input_i % output_i) as usize;
        let base: Vec<i64> = (0..output).map(|i| k + i64::from(i < spots)).collect();
        let local = *gen;
        gen.skip((output as u64).div_ceil(4));
        shuffled_indices(local, output).into_iter().map(|i| base[i]).collect()
    };
    let mut cum = Vec::with_capacity(output + 1);
    cum.push(0);
    for d in diff {
        cum.push(cum[cum.len() - 1] + d);
    }
    cum
}
