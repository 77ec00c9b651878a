//! Complex numbers and Fourier transforms: `FFT`/`IFFT`, `RFFT`/`IRFFT` over the innermost
//! one, two or three dimensions (`spectral_ops.cc`), `Complex`, `Real`, `Imag`,
//! `ComplexAbs`, `Angle`, `Conj`, the arithmetic ops (`AddV2`, `Sub`, `Mul`, `RealDiv`, `Neg`,
//! `Square`…, and the gradients' `DivNoNan`, `AddN`, `ZerosLike`) and `Cast` on complex tensors — what `tf.signal.stft`, Keras'
//! `STFTSpectrogram`/`MelSpectrogram` layers and `tf.abs` of a spectrum emit.
//!
//! A complex tensor (`complex64`, `complex128`) is a raw buffer of interleaved little-endian
//! (real, imaginary) pairs, as TensorFlow lays it out; element-moving kernels move it like
//! any raw dtype. Every transform computes in float64 and rounds once to the output type, so
//! a `complex64` result is within an ulp or two of the exact transform (TensorFlow's float
//! transform is within a few ulps of it too). Lengths whose prime factors are 2, 3, 5 and 7
//! (powers of two, audio frames) use a self-sorting (Stockham) mixed-radix transform with
//! radix-4/2/3/5 butterflies (radix 7 by its definition), and every other length Bluestein's chirp-z identity over a
//! power-of-two convolution. Plans (twiddle tables) are kept for the lengths used last. The inverse transforms are normalised by the transformed
//! element count, as TensorFlow's are.
//!
//! `RFFT*` crops or zero-pads each transformed dimension of its real input to `fft_length`
//! and keeps the `fft_length[-1] / 2 + 1` non-negative frequencies of the innermost one;
//! `IRFFT*` crops or zero-pads its input to `fft_length` (the innermost to
//! `fft_length[-1] / 2 + 1`), inverts the outer dimensions as complex transforms and the
//! innermost as a Hermitian one (the imaginary parts of its zero and Nyquist frequencies
//! are ignored, as TensorFlow's are).

use std::f64::consts::PI;
use std::sync::Arc;

use autoclust_graph::{AttrValue, DType, Node, Tensor, TensorData};

use super::elementwise::{bcast_strides, broadcast_shape, for_each_bcast2};
use super::{arity, budget, int_values, one, Inputs, PureFn};
use crate::error::{KResult, KernelError};

/// A complex number in float64 (`repr(C)`: a slice of them is the interleaved real and
/// imaginary parts the GEMMs of [`complex_matmul`] read with stride 2).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
struct C {
    re: f64,
    im: f64,
}

impl C {
    const ZERO: C = C { re: 0.0, im: 0.0 };

    fn new(re: f64, im: f64) -> C {
        C { re, im }
    }
    fn add(self, o: C) -> C {
        C::new(self.re + o.re, self.im + o.im)
    }
    fn sub(self, o: C) -> C {
        C::new(self.re - o.re, self.im - o.im)
    }
    fn mul(self, o: C) -> C {
        C::new(self.re * o.re - self.im * o.im, self.re * o.im + self.im * o.re)
    }
    /// `self / o` (Smith's algorithm: no overflow for large `o`).
    fn div(self, o: C) -> C {
        if o.re.abs() >= o.im.abs() {
            let r = o.im / o.re;
            let d = o.re + o.im * r;
            C::new((self.re + self.im * r) / d, (self.im - self.re * r) / d)
        } else {
            let r = o.re / o.im;
            let d = o.re * r + o.im;
            C::new((self.re * r + self.im) / d, (self.im * r - self.re) / d)
        }
    }
    fn conj(self) -> C {
        C::new(self.re, -self.im)
    }
    fn scale(self, s: f64) -> C {
        C::new(self.re * s, self.im * s)
    }
    /// `e^{iθ}`.
    fn cis(theta: f64) -> C {
        C::new(theta.cos(), theta.sin())
    }
}

fn is_complex(d: DType) -> bool {
    matches!(d, DType::Complex64 | DType::Complex128)
}

/// The elements of a complex tensor.
fn complex_values(t: &Tensor) -> KResult<Vec<C>> {
    let TensorData::Raw(bytes) = &t.data else { return Err(KernelError::DType(t.dtype)) };
    let bad = || KernelError::invalid(format!("a {} tensor of shape {:?} has {} bytes", t.dtype, t.shape, bytes.len()));
    let n = t.num_elements();
    match t.dtype {
        DType::Complex64 if bytes.len() == n * 8 => Ok(bytes
            .chunks_exact(8)
            .map(|b| {
                let re = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                let im = f32::from_le_bytes([b[4], b[5], b[6], b[7]]);
                C::new(re as f64, im as f64)
            })
            .collect()),
        DType::Complex128 if bytes.len() == n * 16 => Ok(bytes
            .chunks_exact(16)
            .map(|b| {
                let re = f64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
                let im = f64::from_le_bytes(b[8..].try_into().expect("8 bytes"));
                C::new(re, im)
            })
            .collect()),
        DType::Complex64 | DType::Complex128 => Err(bad()),
        d => Err(KernelError::DType(d)),
    }
}

/// A complex tensor of `dtype` holding `v` (rounded once to `complex64`'s floats).
fn complex_tensor(dtype: DType, shape: Vec<usize>, v: &[C]) -> KResult<Tensor> {
    let mut bytes = Vec::with_capacity(v.len() * dtype.size_of().unwrap_or(0));
    match dtype {
        DType::Complex64 => v.iter().for_each(|c| {
            bytes.extend_from_slice(&(c.re as f32).to_le_bytes());
            bytes.extend_from_slice(&(c.im as f32).to_le_bytes());
        }),
        DType::Complex128 => v.iter().for_each(|c| {
            bytes.extend_from_slice(&c.re.to_le_bytes());
            bytes.extend_from_slice(&c.im.to_le_bytes());
        }),
        d => return Err(KernelError::DType(d)),
    }
    Ok(Tensor { dtype, shape, data: TensorData::Raw(Arc::new(bytes)) })
}

/// The (batched) product of two complex tensors, each operand transposed when its flag is
/// set — and conjugated too when `adjoint` (`BatchMatMul`'s `adj_x`/`adj_y`; `MatMul`'s
/// `transpose_a`/`transpose_b` only transpose). Batch dimensions broadcast. Four real float64
/// GEMMs per matrix read the operands' real and imaginary parts in place (stride 2 over the
/// interleaved values; a transpose is a swap of strides): `re = ArBr ∓ AiBi`,
/// `im = ±ArBi ± AiBr`, the signs from the conjugations. The sums are float64, rounded once
/// (TensorFlow sums in the operands' precision: the results agree to its rounding). The
/// gradients of `tf.signal.rfft2d` and of the DCT's complex path are such products.
fn complex_matmul(a: &Tensor, b: &Tensor, (tx, ty): (bool, bool), adjoint: bool) -> KResult<Tensor> {
    if a.dtype != b.dtype {
        return Err(KernelError::invalid(format!("operands have dtypes {} and {}", a.dtype, b.dtype)));
    }
    if a.rank() < 2 || b.rank() < 2 {
        return Err(KernelError::invalid("BatchMatMul operands must have rank >= 2"));
    }
    let (ra, rb) = (a.rank(), b.rank());
    let (ar, ac) = (a.shape[ra - 2], a.shape[ra - 1]);
    let (br, bc) = (b.shape[rb - 2], b.shape[rb - 1]);
    let (m, k) = if tx { (ac, ar) } else { (ar, ac) };
    let (k2, n) = if ty { (bc, br) } else { (br, bc) };
    if k != k2 {
        return Err(KernelError::invalid(format!(
            "Matrix size-incompatible: In[0]: {:?}, In[1]: {:?}",
            a.shape, b.shape
        )));
    }
    let batch = super::elementwise::broadcast_shape(&a.shape[..ra - 2], &b.shape[..rb - 2])?;
    let mut shape = batch.clone();
    shape.extend([m, n]);
    super::budget(a.dtype, &shape)?;
    let (x, y) = (complex_values(a)?, complex_values(b)?);
    let sa = super::elementwise::bcast_strides(&a.shape[..ra - 2], &batch);
    let sb = super::elementwise::bcast_strides(&b.shape[..rb - 2], &batch);
    let mut pairs = Vec::new();
    super::elementwise::for_each_bcast2(&batch, &sa, &sb, |i, j| pairs.push((i, j)));
    // Element (i, p) of op(A) and (p, j) of op(B), in f64 units of the interleaved values.
    let (rsa, csa) = if tx { (2, 2 * ac as isize) } else { (2 * ac as isize, 2) };
    let (rsb, csb) = if ty { (2, 2 * bc as isize) } else { (2 * bc as isize, 2) };
    // The signs of the imaginary parts the conjugations flip.
    let (sx, sy) = (if adjoint && tx { -1.0 } else { 1.0 }, if adjoint && ty { -1.0 } else { 1.0 });
    let mut out = vec![C::ZERO; pairs.len() * m * n];
    if k > 0 && m > 0 && n > 0 {
        let mut parts = vec![0.0f64; 4 * m * n];
        let (xp, yp) = (x.as_ptr() as *const f64, y.as_ptr() as *const f64);
        for (o, &(i, j)) in out.chunks_exact_mut(m * n).zip(&pairs) {
            let (xa, yb) = (i * ar * ac * 2, j * br * bc * 2);
            let (rr, rest) = parts.split_at_mut(m * n);
            let (ii, rest) = rest.split_at_mut(m * n);
            let (ri, ir) = rest.split_at_mut(m * n);
            for (xo, yo, c) in [(0, 0, &mut *rr), (1, 1, &mut *ii), (0, 1, &mut *ri), (1, 0, &mut *ir)] {
                // SAFETY: `x` holds every matrix of `a` (ar·ac values, 2 f64 each) and `y` of
                // `b`; the offsets and strides address one matrix's real (0) or imaginary (1)
                // parts; `c` holds m·n f64.
                unsafe {
                    autoclust_numeric::gemm::gemm(
                        m,
                        k,
                        n,
                        xp.add(xa + xo),
                        rsa,
                        csa,
                        yp.add(yb + yo),
                        rsb,
                        csb,
                        c.as_mut_ptr(),
                        rayon::current_num_threads(),
                    )
                }
            }
            for (t, o) in o.iter_mut().enumerate() {
                *o = C::new(rr[t] - sx * sy * ii[t], sy * ri[t] + sx * ir[t]);
            }
        }
    }
    complex_tensor(a.dtype, shape, &out)
}

/// The elements of a float32 or float64 tensor, widened.
fn real_values(t: &Tensor) -> KResult<Vec<f64>> {
    match &t.data {
        TensorData::F32(v) => Ok(v.iter().map(|&x| x as f64).collect()),
        TensorData::F64(v) => Ok(v.to_vec()),
        _ => Err(KernelError::DType(t.dtype)),
    }
}

/// A float32 or float64 tensor holding `v` (rounded once for float32).
fn real_tensor(dtype: DType, shape: Vec<usize>, v: Vec<f64>) -> KResult<Tensor> {
    let data = match dtype {
        DType::Float32 => TensorData::F32(Arc::new(v.into_iter().map(|x| x as f32).collect())),
        DType::Float64 => TensorData::F64(Arc::new(v)),
        d => return Err(KernelError::DType(d)),
    };
    Ok(Tensor { dtype, shape, data })
}

/// The complex type of the same precision as the real type `d`, and back.
fn complex_of(d: DType) -> DType {
    if d == DType::Float64 {
        DType::Complex128
    } else {
        DType::Complex64
    }
}

fn real_of(d: DType) -> DType {
    if d == DType::Complex128 {
        DType::Float64
    } else {
        DType::Float32
    }
}

// ------------------------------------------------------------------ the transform

/// A one-dimensional discrete Fourier transform of length `n`, planned once:
/// `X[k] = Σ_j x[j]·e^{-2πijk/n}` (forward), or with `e^{+…}` (inverse, unnormalised).
struct Fft {
    n: usize,
    kind: Kind,
}

enum Kind {
    /// n ≤ 1: the identity.
    Trivial,
    /// A product of the primes 2, 3, 5 and 7 (powers of two; audio frames: 400, 480,
    /// 16000 = 2⁷·5³): the radices, outermost first, and the twiddles `e^{-2πik/n}`, `k < n`
    /// ([`stockham`]).
    Smooth { radices: Vec<usize>, tw: Vec<C> },
    /// Any other length: Bluestein's chirp `e^{-πik²/n}` and the transform of its
    /// conjugate, wrapped into a power-of-two length `m ≥ 2n − 1`.
    Bluestein { chirp: Vec<C>, kernel: Vec<C>, inner: Box<Fft> },
}

/// The plans made most recently, newest last: a graph transforms the same lengths on every
/// step (an STFT's frames), and a plan's twiddle table costs `n` sines and cosines.
static PLANS: std::sync::Mutex<Vec<std::sync::Arc<Fft>>> = std::sync::Mutex::new(Vec::new());

/// How many plans [`PLANS`] keeps.
const KEPT_PLANS: usize = 8;

/// The longest transform whose plan is kept (its tables ~100 bytes per point: a few MB; a
/// longer one's plan lives for its call only).
const KEPT_PLAN_MAX_LEN: usize = 1 << 16;

/// The plan for length `n`, from [`PLANS`] or made (and kept).
fn plan(n: usize) -> std::sync::Arc<Fft> {
    let mut kept = PLANS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(i) = kept.iter().position(|p| p.n == n) {
        let p = kept.remove(i);
        kept.push(p.clone());
        return p;
    }
    drop(kept);
    let p = std::sync::Arc::new(Fft::new(n));
    if n > KEPT_PLAN_MAX_LEN {
        return p;
    }
    let mut kept = PLANS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if kept.len() >= KEPT_PLANS {
        kept.remove(0);
    }
    kept.push(p.clone());
    p
}

impl Fft {
    fn new(n: usize) -> Fft {
        let kind = if n <= 1 {
            Kind::Trivial
        } else if let Some(radices) = radices(n) {
            Kind::Smooth { radices, tw: (0..n).map(|k| C::cis(-2.0 * PI * k as f64 / n as f64)).collect() }
        } else {
            let m = (2 * n - 1).next_power_of_two();
            // k² mod 2n keeps the angle's argument small (and exact) for large k.
            let chirp: Vec<C> =
                (0..n).map(|k| C::cis(-PI * ((k as u128 * k as u128) % (2 * n as u128)) as f64 / n as f64)).collect();
            let inner = Box::new(Fft::new(m));
            let mut kernel = vec![C::ZERO; m];
            kernel[0] = chirp[0].conj();
            for k in 1..n {
                kernel[k] = chirp[k].conj();
                kernel[m - k] = chirp[k].conj();
            }
            inner.run(&mut kernel, false);
            Kind::Bluestein { chirp, kernel, inner }
        };
        Fft { n, kind }
    }

    /// Transforms `buf` (length `n`) in place.
    fn run(&self, buf: &mut [C], inverse: bool) {
        debug_assert_eq!(buf.len(), self.n);
        if inverse {
            // The inverse transform is the forward one of the conjugate, conjugated.
            buf.iter_mut().for_each(|c| *c = c.conj());
            self.run(buf, false);
            buf.iter_mut().for_each(|c| *c = c.conj());
            return;
        }
        match &self.kind {
            Kind::Trivial => {}
            Kind::Smooth { radices, tw } => stockham(buf, radices, tw),
            Kind::Bluestein { chirp, kernel, inner } => {
                let m = kernel.len();
                let mut a = vec![C::ZERO; m];
                for k in 0..self.n {
                    a[k] = buf[k].mul(chirp[k]);
                }
                inner.run(&mut a, false);
                for (x, k) in a.iter_mut().zip(kernel) {
                    *x = x.mul(*k);
                }
                inner.run(&mut a, true);
                let s = 1.0 / m as f64;
                for k in 0..self.n {
                    buf[k] = a[k].scale(s).mul(chirp[k]);
                }
            }
        }
    }
}

/// The radices of a transform of length `n` when its prime factors are all 2, 3, 5 or 7:
/// fours while they divide, then a two, threes, fives and sevens; `None` otherwise.
fn radices(mut n: usize) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for p in [4, 2, 3, 5, 7] {
        while n.is_multiple_of(p) {
            out.push(p);
            n /= p;
        }
    }
    (n == 1).then_some(out)
}

/// The self-sorting (Stockham) mixed-radix decimation-in-frequency transform of `buf` in
/// place, through one scratch buffer. With `S` sub-transforms of length `L = n / S` done
/// so far, element `t` of sub-transform `q` at `[t·S + q]`, a radix-`p` stage (`L = p·m`)
/// splits each into `p` of length `m`: for `t < m` and `k < p`,
/// `y[(t·p + k)·S + q] = W_L^{tk} · Σ_j x[(t + j·m)·S + q] · W_p^{jk}`, the new sub-transform
/// `q + S·k` — `X[p·k₁ + k] = DFT_m(y_k)[k₁]`. After the last stage (`L = 1`) element `[q]`
/// is `X[q]`: the output is in natural order with no bit reversal, and every twiddle
/// `W_L^{tk} = W_n^{t·k·S}` is one exact entry of the `n`-entry table `tw` (`t·k·S < n`).
/// The innermost loop runs over `q`, contiguous in both buffers.
fn stockham(buf: &mut [C], radices: &[usize], tw: &[C]) {
    let n = buf.len();
    let mut scratch = vec![C::ZERO; n];
    let (mut x, mut y): (&mut [C], &mut [C]) = (buf, &mut scratch);
    let mut s = 1;
    let mut in_buf = true;
    for &p in radices {
        let m = n / (s * p);
        match p {
            2 => stage(x, y, s, m, tw, |a: [C; 2]| [a[0].add(a[1]), a[0].sub(a[1])]),
            4 => stage(x, y, s, m, tw, |a: [C; 4]| {
                let (s02, d02, s13, d13) = (a[0].add(a[2]), a[0].sub(a[2]), a[1].add(a[3]), a[1].sub(a[3]));
                // −i·d13
                let r = C::new(d13.im, -d13.re);
                [s02.add(s13), d02.add(r), s02.sub(s13), d02.sub(r)]
            }),
            3 => stage(x, y, s, m, tw, dft3),
            5 => stage(x, y, s, m, tw, dft5),
            _ => {
                let w = roots::<7>();
                stage(x, y, s, m, tw, |a| dft_small(a, &w))
            }
        }
        std::mem::swap(&mut x, &mut y);
        in_buf = !in_buf;
        s *= p;
    }
    if !in_buf {
        // The last stage wrote the scratch buffer (now `x`); `y` is `buf`.
        y.copy_from_slice(x);
    }
}

/// One radix-`P` stage of [`stockham`]: `S = s` sub-transforms, each split into `P` of
/// length `m`, `butterfly` the `P`-point DFT.
#[inline(always)]
fn stage<const P: usize>(x: &[C], y: &mut [C], s: usize, m: usize, tw: &[C], butterfly: impl Fn([C; P]) -> [C; P]) {
    let n = m * P * s;
    assert!(x.len() == n && y.len() == n && tw.len() == n, "a Stockham stage's buffers have the transform's length");
    for t in 0..m {
        // W_L^{tk} = W_n^{t·k·s}: t·k·s ≤ (m − 1)(P − 1)s < n.
        let w: [C; P] = std::array::from_fn(|k| tw[t * k * s]);
        for q in 0..s {
            // SAFETY: (t + j·m)·s + q < (m + (P − 1)·m)·s = n and (t·P + k)·s + q < n for
            // t < m, j, k < P, q < s; both buffers hold n elements (asserted above).
            unsafe {
                let a: [C; P] = std::array::from_fn(|j| *x.get_unchecked((t + j * m) * s + q));
                let z = butterfly(a);
                for (k, zk) in z.into_iter().enumerate() {
                    *y.get_unchecked_mut((t * P + k) * s + q) = if t == 0 || k == 0 { zk } else { zk.mul(w[k]) };
                }
            }
        }
    }
}

/// The 3-point DFT: `z₀ = a₀ + (a₁ + a₂)`, `z₁,₂ = a₀ − (a₁ + a₂)/2 ∓ i·(√3/2)(a₁ − a₂)`.
#[inline(always)]
fn dft3(a: [C; 3]) -> [C; 3] {
    const S: f64 = 0.866_025_403_784_438_6; // sin(2π/3)
    let (t1, t3) = (a[1].add(a[2]), a[1].sub(a[2]).scale(S));
    let t2 = a[0].sub(t1.scale(0.5));
    // ∓i·t3
    let r = C::new(t3.im, -t3.re);
    [a[0].add(t1), t2.add(r), t2.sub(r)]
}

/// The 5-point DFT by its symmetric sums: with `t₁ = a₁ + a₄`, `t₂ = a₂ + a₃`,
/// `t₃ = a₁ − a₄`, `t₄ = a₂ − a₃`, `z₁,₄ = a₀ + c₁t₁ + c₂t₂ ∓ i(s₁t₃ + s₂t₄)` and
/// `z₂,₃ = a₀ + c₂t₁ + c₁t₂ ∓ i(s₂t₃ − s₁t₄)` (`c_k = cos 2πk/5`, `s_k = sin 2πk/5`).
#[inline(always)]
fn dft5(a: [C; 5]) -> [C; 5] {
    const C1: f64 = 0.309_016_994_374_947_45; // cos(2π/5)
    const C2: f64 = -0.809_016_994_374_947_5; // cos(4π/5)
    const S1: f64 = 0.951_056_516_295_153_6; // sin(2π/5)
    const S2: f64 = 0.587_785_252_292_473_1; // sin(4π/5)
    let (t1, t2, t3, t4) = (a[1].add(a[4]), a[2].add(a[3]), a[1].sub(a[4]), a[2].sub(a[3]));
    let b1 = a[0].add(t1.scale(C1)).add(t2.scale(C2));
    let b2 = a[0].add(t1.scale(C2)).add(t2.scale(C1));
    let d1 = t3.scale(S1).add(t4.scale(S2));
    let d2 = t3.scale(S2).sub(t4.scale(S1));
    // −i·d
    let (r1, r2) = (C::new(d1.im, -d1.re), C::new(d2.im, -d2.re));
    [a[0].add(t1).add(t2), b1.add(r1), b2.add(r2), b2.sub(r2), b1.sub(r1)]
}

/// `W_P^j = e^{-2πij/P}`, `j < P`.
fn roots<const P: usize>() -> [C; P] {
    std::array::from_fn(|j| C::cis(-2.0 * PI * j as f64 / P as f64))
}

/// The `P`-point DFT by its definition (radix 7: `P²` products on `P` elements), `w` the
/// [`roots`].
#[inline(always)]
fn dft_small<const P: usize>(a: [C; P], w: &[C; P]) -> [C; P] {
    std::array::from_fn(|k| {
        let mut sum = a[0];
        for (j, &aj) in a.iter().enumerate().skip(1) {
            sum = sum.add(aj.mul(w[j * k % P]));
        }
        sum
    })
}

/// Elements from which a batch of transforms is split over the rayon pool's threads.
const PARALLEL_FROM: usize = 1 << 14;

/// Transforms every line of `data` (row-major, `shape`) along `axis` in place.
fn transform_axis(data: &mut [C], shape: &[usize], axis: usize, inverse: bool) {
    use rayon::prelude::*;
    let n = shape[axis];
    if n <= 1 || data.is_empty() {
        return;
    }
    let inner: usize = shape[axis + 1..].iter().product();
    let outer: usize = shape[..axis].iter().product();
    let plan = plan(n);
    if inner == 1 {
        // Contiguous lines, transformed where they lie (each line alone: the split does not
        // change a result).
        if data.len() >= PARALLEL_FROM {
            data.par_chunks_mut(n).for_each(|line| plan.run(line, inverse));
        } else {
            data.chunks_mut(n).for_each(|line| plan.run(line, inverse));
        }
        return;
    }
    let mut line = vec![C::ZERO; n];
    for o in 0..outer {
        for i in 0..inner {
            let base = o * n * inner + i;
            for (k, x) in line.iter_mut().enumerate() {
                *x = data[base + k * inner];
            }
            plan.run(&mut line, inverse);
            for (k, x) in line.iter().enumerate() {
                data[base + k * inner] = *x;
            }
        }
    }
}

/// `data` of `shape` with its last `lengths.len()` dimensions cropped or zero-padded to
/// `lengths`.
fn fit<T: Copy + Default>(data: &[T], shape: &[usize], lengths: &[usize]) -> (Vec<T>, Vec<usize>) {
    let r = shape.len();
    let mut out_shape = shape.to_vec();
    out_shape[r - lengths.len()..].copy_from_slice(lengths);
    if out_shape == shape {
        return (data.to_vec(), out_shape);
    }
    let total: usize = out_shape.iter().product();
    let mut out = vec![T::default(); total];
    if total == 0 || data.is_empty() {
        return (out, out_shape);
    }
    // Copy the common prefix of every innermost row.
    let (row_in, row_out) = (shape[r - 1], out_shape[r - 1]);
    let keep = row_in.min(row_out);
    let rows_out = total / row_out;
    let mut idx = vec![0usize; r - 1];
    for ro in 0..rows_out {
        if idx.iter().zip(shape).all(|(&i, &d)| i < d) {
            let mut src_row = 0usize;
            for (d, &i) in idx.iter().enumerate() {
                src_row = src_row * shape[d] + i;
            }
            out[ro * row_out..ro * row_out + keep].copy_from_slice(&data[src_row * row_in..src_row * row_in + keep]);
        }
        for d in (0..r - 1).rev() {
            idx[d] += 1;
            if idx[d] < out_shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    (out, out_shape)
}

/// The `fft_length` operand: `k` non-negative lengths.
fn fft_lengths(t: &Tensor, k: usize) -> KResult<Vec<usize>> {
    let v = int_values(t, "fft_length")?;
    if t.shape.len() != 1 || v.len() != k {
        return Err(KernelError::invalid(format!(
            "fft_length must be a vector of {k} elements, got shape {:?}",
            t.shape
        )));
    }
    v.iter()
        .map(|&l| {
            usize::try_from(l).map_err(|_| KernelError::invalid(format!("fft_length must not be negative: {v:?}")))
        })
        .collect()
}

fn check_rank(t: &Tensor, k: usize) -> KResult<()> {
    if t.shape.len() < k {
        return Err(KernelError::invalid(format!("input must have rank at least {k}, but has shape {:?}", t.shape)));
    }
    Ok(())
}

/// `FFT*` (`inverse`: `IFFT*`) over the innermost `k` dimensions.
fn complex_fft(t: &Tensor, k: usize, inverse: bool) -> KResult<Tensor> {
    check_rank(t, k)?;
    let mut v = complex_values(t)?;
    let r = t.shape.len();
    for axis in r - k..r {
        transform_axis(&mut v, &t.shape, axis, inverse);
    }
    if inverse {
        let count: usize = t.shape[r - k..].iter().product();
        let s = 1.0 / count.max(1) as f64;
        v.iter_mut().for_each(|c| *c = c.scale(s));
    }
    complex_tensor(t.dtype, t.shape.clone(), &v)
}

/// `RFFT*` over the innermost `k` dimensions, to `out` (complex64 or complex128).
pub(crate) fn real_fft(t: &Tensor, lengths: &[usize], out: DType) -> KResult<Tensor> {
    let k = lengths.len();
    check_rank(t, k)?;
    let r = t.shape.len();
    let mut full_shape = t.shape.clone();
    full_shape[r - k..].copy_from_slice(lengths);
    budget(out, &full_shape)?;
    let (x, shape) = fit(&real_values(t)?, &t.shape, lengths);
    let row = lengths[k - 1];
    let mut out_shape = shape.clone();
    out_shape[r - 1] = if row == 0 { 0 } else { row / 2 + 1 };
    if row == 0 || x.is_empty() {
        let total = out_shape.iter().product();
        return complex_tensor(out, out_shape, &vec![C::ZERO; total]);
    }
    // The innermost axis first, on the real rows (the spectrum's first half kept), then the
    // others on that half: the transform is separable, and the half is all RFFT returns.
    let mut v = real_rows_fft(&x, row);
    for axis in r - k..r - 1 {
        transform_axis(&mut v, &out_shape, axis, false);
    }
    complex_tensor(out, out_shape, &v)
}

/// The first `n/2 + 1` bins of the transform of each real row of length `n` in `x`. Two
/// rows `a`, `b` share one complex transform, of `z = a + i·b`: `Z[k] = A[k] + i·B[k]`,
/// and since `A`, `B` are spectra of real rows (`A[n−k] = conj(A[k])`),
/// `A[k] = (Z[k] + conj(Z[n−k]))/2` and `B[k] = (Z[k] − conj(Z[n−k]))/(2i)` — half the
/// transforms of a complex line per row; pairs run on the rayon pool when there are many.
fn real_rows_fft(x: &[f64], n: usize) -> Vec<C> {
    use rayon::prelude::*;
    let half = n / 2 + 1;
    let rows = x.len() / n;
    let plan = plan(n);
    let mut out = vec![C::ZERO; rows * half];
    let pair = |line: &mut Vec<C>, (o, xs): (&mut [C], &[f64])| {
        line.clear();
        if xs.len() == 2 * n {
            line.extend((0..n).map(|j| C::new(xs[j], xs[n + j])));
            plan.run(line, false);
            for k in 0..half {
                let (z, zc) = (line[k], line[(n - k) % n].conj());
                o[k] = z.add(zc).scale(0.5);
                let d = z.sub(zc);
                o[half + k] = C::new(d.im * 0.5, -d.re * 0.5);
            }
        } else {
            line.extend(xs.iter().map(|&re| C::new(re, 0.0)));
            plan.run(line, false);
            o.copy_from_slice(&line[..half]);
        }
    };
    if x.len() >= PARALLEL_FROM {
        out.par_chunks_mut(2 * half).zip(x.par_chunks(2 * n)).for_each_init(|| Vec::with_capacity(n), pair);
    } else {
        let mut line = Vec::with_capacity(n);
        out.chunks_mut(2 * half).zip(x.chunks(2 * n)).for_each(|c| pair(&mut line, c));
    }
    out
}

/// `IRFFT*` over the innermost `k` dimensions, to `out` (float32 or float64).
fn inverse_real_fft(t: &Tensor, lengths: &[usize], out: DType) -> KResult<Tensor> {
    let k = lengths.len();
    check_rank(t, k)?;
    let r = t.shape.len();
    let mut out_shape = t.shape.clone();
    out_shape[r - k..].copy_from_slice(lengths);
    budget(out, &out_shape)?;
    let row = lengths[k - 1];
    let mut fitted = lengths.to_vec();
    fitted[k - 1] = if row == 0 { 0 } else { row / 2 + 1 };
    let (mut v, shape) = fit(&complex_values(t)?, &t.shape, &fitted);
    for axis in r - k..r - 1 {
        transform_axis(&mut v, &shape, axis, true);
    }
    let count: usize = lengths.iter().product();
    let s = 1.0 / count.max(1) as f64;
    let mut result = Vec::with_capacity(out_shape.iter().product());
    if row > 0 {
        let plan = plan(row);
        let half = row / 2 + 1;
        let mut line = vec![C::ZERO; row];
        for spectrum in v.chunks(half) {
            // The Hermitian line: X[k] for k ≤ row/2, conj(X[row − k]) above.
            for (j, x) in line.iter_mut().enumerate() {
                *x = if j < half { spectrum[j] } else { spectrum[row - j].conj() };
            }
            plan.run(&mut line, true);
            result.extend(line.iter().map(|c| c.re * s));
        }
    }
    real_tensor(out, out_shape, result)
}

// ------------------------------------------------------------------ elementwise

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Binary {
    Add,
    Sub,
    Mul,
    Div,
    /// `x / y`, 0 where `y` is 0 (`tf.math.divide_no_nan`; `ComplexAbs`'s gradient).
    DivNoNan,
    /// `x · y`, 0 where `y` is 0.
    MulNoNan,
    SquaredDifference,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unary {
    Neg,
    Square,
    Reciprocal,
    Exp,
    Sqrt,
    ZerosLike,
    OnesLike,
}

fn binary(op: Binary, a: &Tensor, b: &Tensor) -> KResult<Tensor> {
    if a.dtype != b.dtype {
        return Err(KernelError::invalid(format!("operands of dtypes {} and {} differ", a.dtype, b.dtype)));
    }
    let (x, y) = (complex_values(a)?, complex_values(b)?);
    let shape = broadcast_shape(&a.shape, &b.shape)?;
    budget(a.dtype, &shape)?;
    let (sa, sb) = (bcast_strides(&a.shape, &shape), bcast_strides(&b.shape, &shape));
    let mut out = Vec::with_capacity(shape.iter().product());
    for_each_bcast2(&shape, &sa, &sb, |i, j| {
        let (p, q) = (x[i], y[j]);
        out.push(match op {
            Binary::Add => p.add(q),
            Binary::Sub => p.sub(q),
            Binary::Mul => p.mul(q),
            Binary::Div => p.div(q),
            Binary::DivNoNan if q == C::ZERO => C::ZERO,
            Binary::DivNoNan => p.div(q),
            Binary::MulNoNan if q == C::ZERO => C::ZERO,
            Binary::MulNoNan => p.mul(q),
            Binary::SquaredDifference => {
                let d = p.sub(q);
                d.mul(d.conj())
            }
        });
    });
    complex_tensor(a.dtype, shape, &out)
}

fn unary(op: Unary, t: &Tensor) -> KResult<Tensor> {
    let v: Vec<C> = complex_values(t)?
        .into_iter()
        .map(|c| match op {
            Unary::Neg => C::new(-c.re, -c.im),
            Unary::Square => c.mul(c),
            Unary::Reciprocal => C::new(1.0, 0.0).div(c),
            Unary::Exp => C::cis(c.im).scale(c.re.exp()),
            Unary::ZerosLike => C::ZERO,
            Unary::OnesLike => C::new(1.0, 0.0),
            Unary::Sqrt => {
                // The principal root: √((|c| + re)/2) + i·sign(im)·√((|c| − re)/2).
                let m = c.re.hypot(c.im);
                let re = ((m + c.re) / 2.0).sqrt();
                let im = ((m - c.re) / 2.0).sqrt();
                C::new(re, if c.im < 0.0 || (c.im == 0.0 && c.im.is_sign_negative()) { -im } else { im })
            }
        })
        .collect();
    complex_tensor(t.dtype, t.shape.clone(), &v)
}

/// `Cast` from or to a complex type: a real value gets a zero imaginary part; a complex
/// value cast to a real or integer type keeps its real part (TensorFlow's `static_cast`).
fn cast(t: &Tensor, dst: DType) -> KResult<Tensor> {
    if is_complex(t.dtype) {
        let v = complex_values(t)?;
        if is_complex(dst) {
            return complex_tensor(dst, t.shape.clone(), &v);
        }
        let re = real_tensor(DType::Float64, t.shape.clone(), v.iter().map(|c| c.re).collect())?;
        return super::elementwise::cast(&re, dst);
    }
    let wide = super::elementwise::cast(t, DType::Float64)?;
    let v: Vec<C> = real_values(&wide)?.into_iter().map(|re| C::new(re, 0.0)).collect();
    complex_tensor(dst, t.shape.clone(), &v)
}

/// `Complex(real, imag)`, broadcasting.
fn make_complex(re: &Tensor, im: &Tensor, out: DType) -> KResult<Tensor> {
    if re.dtype != im.dtype {
        return Err(KernelError::invalid(format!("real and imag have dtypes {} and {}", re.dtype, im.dtype)));
    }
    let (x, y) = (real_values(re)?, real_values(im)?);
    let shape = broadcast_shape(&re.shape, &im.shape)?;
    budget(out, &shape)?;
    let (sa, sb) = (bcast_strides(&re.shape, &shape), bcast_strides(&im.shape, &shape));
    let mut v = Vec::with_capacity(shape.iter().product());
    for_each_bcast2(&shape, &sa, &sb, |i, j| v.push(C::new(x[i], y[j])));
    complex_tensor(out, shape, &v)
}

/// `Real`, `Imag`, `ComplexAbs`, `Angle`: one real number per element.
fn part(t: &Tensor, out: DType, f: fn(C) -> f64) -> KResult<Tensor> {
    real_tensor(out, t.shape.clone(), complex_values(t)?.into_iter().map(f).collect())
}

/// `Sum`, `Mean` and `Prod` of a complex tensor over the axes `mask` marks (the gradient of
/// a broadcast complex product sums over the broadcast axes), accumulated in float64 in
/// input order and rounded once; `out_shape` is the result's shape (`keep_dims` applied).
/// Other reductions order complex numbers, which TensorFlow does not either.
pub(crate) fn reduce_complex(
    op: super::reduce::Reduce,
    t: &Tensor,
    mask: &[bool],
    out_shape: Vec<usize>,
) -> KResult<Tensor> {
    use super::reduce::Reduce;
    let v = complex_values(t)?;
    // Each input element's output position: its coordinates with the reduced axes dropped.
    let mut stride = vec![0usize; t.rank()];
    let mut n_out = 1usize;
    for d in (0..t.rank()).rev() {
        if !mask[d] {
            stride[d] = n_out;
            n_out *= t.shape[d];
        }
    }
    let count = t.shape.iter().zip(mask).filter(|&(_, &m)| m).map(|(&d, _)| d).product::<usize>();
    let init = match op {
        Reduce::Sum | Reduce::Mean => C::ZERO,
        Reduce::Prod => C::new(1.0, 0.0),
        _ => return Err(KernelError::DType(t.dtype)),
    };
    let mut acc = vec![init; n_out];
    let mut idx = vec![0usize; t.rank()];
    for x in v {
        let o: usize = idx.iter().zip(&stride).map(|(i, s)| i * s).sum();
        acc[o] = if op == Reduce::Prod { acc[o].mul(x) } else { acc[o].add(x) };
        for d in (0..t.rank()).rev() {
            idx[d] += 1;
            if idx[d] < t.shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    if op == Reduce::Mean {
        // An empty mean divides by zero, as TensorFlow's does: NaN.
        let n = count as f64;
        acc.iter_mut().for_each(|c| *c = C::new(c.re / n, c.im / n));
    }
    complex_tensor(t.dtype, out_shape, &acc)
}

fn type_attr(node: &Node, name: &str) -> Option<DType> {
    node.attr(name).and_then(AttrValue::as_type)
}

/// The kernels of this module; `None` for ops it does not handle (the arithmetic ops and
/// `Cast` only when a complex type is involved).
pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let t = type_attr(node, "T");
    let complex_t = t.is_some_and(is_complex);
    let arith = |op: Binary| -> Option<PureFn> {
        complex_t.then(|| {
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                one(binary(op, &inp[0], &inp[1])?)
            }) as PureFn
        })
    };
    let elementwise = |op: Unary| -> Option<PureFn> {
        complex_t.then(|| {
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                one(unary(op, &inp[0])?)
            }) as PureFn
        })
    };
    let treal = type_attr(node, "Treal").unwrap_or(DType::Float32);
    let tcomplex = type_attr(node, "Tcomplex").unwrap_or(DType::Complex64);
    let tout = |d: DType| type_attr(node, "Tout").unwrap_or(d);
    let transform = |k: usize, inverse: bool| -> PureFn {
        Box::new(move |inp: Inputs| {
            arity(&inp, 1)?;
            one(complex_fft(&inp[0], k, inverse)?)
        })
    };
    let real_transform = |k: usize, inverse: bool| -> PureFn {
        Box::new(move |inp: Inputs| {
            arity(&inp, 2)?;
            let lengths = fft_lengths(&inp[1], k)?;
            one(if inverse {
                inverse_real_fft(&inp[0], &lengths, treal)?
            } else {
                real_fft(&inp[0], &lengths, tcomplex)?
            })
        })
    };
    let part_of = |f: fn(C) -> f64| -> PureFn {
        let out = tout(real_of(t.unwrap_or(DType::Complex64)));
        Box::new(move |inp: Inputs| {
            arity(&inp, 1)?;
            one(part(&inp[0], out, f)?)
        })
    };
    Ok(Some(match node.op.as_str() {
        "FFT" => transform(1, false),
        "IFFT" => transform(1, true),
        "FFT2D" => transform(2, false),
        "IFFT2D" => transform(2, true),
        "FFT3D" => transform(3, false),
        "IFFT3D" => transform(3, true),
        "RFFT" => real_transform(1, false),
        "IRFFT" => real_transform(1, true),
        "RFFT2D" => real_transform(2, false),
        "IRFFT2D" => real_transform(2, true),
        "RFFT3D" => real_transform(3, false),
        "IRFFT3D" => real_transform(3, true),
        "Real" => part_of(|c| c.re),
        "Imag" => part_of(|c| c.im),
        // A complex64's parts are float32: their squares cannot overflow or underflow in
        // float64, so the plain square root of the sum is exact to one rounding (glibc's
        // `hypotf` computes finite arguments this way), at a fraction of `hypot`'s cost.
        "ComplexAbs" => {
            let out = tout(real_of(t.unwrap_or(DType::Complex64)));
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let f: fn(C) -> f64 = if inp[0].dtype == DType::Complex64 {
                    // An infinite part makes the magnitude infinite even beside a NaN, as
                    // `hypotf` says (the square root of the sum would be NaN).
                    |c| {
                        if c.re.is_infinite() || c.im.is_infinite() {
                            f64::INFINITY
                        } else {
                            (c.re * c.re + c.im * c.im).sqrt()
                        }
                    }
                } else {
                    |c| c.re.hypot(c.im)
                };
                one(part(&inp[0], out, f)?)
            })
        }
        "Angle" => part_of(|c| c.im.atan2(c.re)),
        "Conj" => Box::new(|inp: Inputs| {
            arity(&inp, 1)?;
            let v: Vec<C> = complex_values(&inp[0])?.into_iter().map(C::conj).collect();
            one(complex_tensor(inp[0].dtype, inp[0].shape.clone(), &v)?)
        }),
        "Complex" => {
            let out = tout(complex_of(t.unwrap_or(DType::Float32)));
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                one(make_complex(&inp[0], &inp[1], out)?)
            })
        }
        "Cast" => {
            let (Some(src), Some(dst)) = (type_attr(node, "SrcT"), type_attr(node, "DstT")) else { return Ok(None) };
            if !is_complex(src) && !is_complex(dst) {
                return Ok(None);
            }
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                one(cast(&inp[0], dst)?)
            })
        }
        "Add" | "AddV2" => return Ok(arith(Binary::Add)),
        "Sub" => return Ok(arith(Binary::Sub)),
        "Mul" => return Ok(arith(Binary::Mul)),
        "RealDiv" | "Div" => return Ok(arith(Binary::Div)),
        "SquaredDifference" => return Ok(arith(Binary::SquaredDifference)),
        "DivNoNan" => return Ok(arith(Binary::DivNoNan)),
        "MulNoNan" => return Ok(arith(Binary::MulNoNan)),
        "ZerosLike" => return Ok(elementwise(Unary::ZerosLike)),
        "OnesLike" => return Ok(elementwise(Unary::OnesLike)),
        "AddN" if complex_t => Box::new(|inp: Inputs| {
            let Some((first, rest)) = inp.split_first() else { return Err(KernelError::Arity { expected: 1, got: 0 }) };
            let mut sum = complex_values(first)?;
            for t in rest {
                if t.shape != first.shape {
                    return Err(KernelError::invalid(format!(
                        "AddN operands have shapes {:?} and {:?}",
                        first.shape, t.shape
                    )));
                }
                sum.iter_mut().zip(complex_values(t)?).for_each(|(a, b)| *a = a.add(b));
            }
            one(complex_tensor(first.dtype, first.shape.clone(), &sum)?)
        }),
        "MatMul" if complex_t => {
            let ta = super::attr_bool_or(node, "transpose_a", false)?;
            let tb = super::attr_bool_or(node, "transpose_b", false)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                if inp[0].rank() != 2 || inp[1].rank() != 2 {
                    return Err(KernelError::invalid("In[0] and In[1] must be matrices"));
                }
                one(complex_matmul(&inp[0], &inp[1], (ta, tb), false)?)
            })
        }
        "BatchMatMul" | "BatchMatMulV2" | "BatchMatMulV3"
            if complex_t || type_attr(node, "Ta").is_some_and(is_complex) =>
        {
            let ax = super::attr_bool_or(node, "adj_x", false)?;
            let ay = super::attr_bool_or(node, "adj_y", false)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                one(complex_matmul(&inp[0], &inp[1], (ax, ay), true)?)
            })
        }
        "Neg" => return Ok(elementwise(Unary::Neg)),
        "Square" => return Ok(elementwise(Unary::Square)),
        "Reciprocal" | "Inv" => return Ok(elementwise(Unary::Reciprocal)),
        "Exp" => return Ok(elementwise(Unary::Exp)),
        "Sqrt" => return Ok(elementwise(Unary::Sqrt)),
        _ => return Ok(None),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Complex `Sum`/`Mean`/`Prod` (sweep 70: the gradient of a broadcast complex product
    /// needs `Sum`), against values worked by hand.
    #[test]
    fn complex_reductions() {
        let x = [C::new(1.0, 2.0), C::new(3.0, -1.0), C::new(0.5, 0.0), C::new(-1.0, 4.0)];
        let t = complex_tensor(DType::Complex64, vec![2, 2], &x).unwrap();
        let red = |op: &str, axes: Vec<i32>, keep: bool| {
            let n = crate::kernels::tests_support::node(op, &[("keep_dims", AttrValue::B(keep))]);
            let axes = Tensor::from_i32(vec![axes.len()], axes).unwrap();
            let out = crate::kernels::tests_support::run1(&n, &[t.clone(), axes]).unwrap();
            (out.shape.clone(), complex_values(&out).unwrap())
        };
        assert_eq!(red("Sum", vec![0], false), (vec![2], vec![C::new(1.5, 2.0), C::new(2.0, 3.0)]));
        assert_eq!(red("Mean", vec![1], true), (vec![2, 1], vec![C::new(2.0, 0.5), C::new(-0.25, 2.0)]));
        let p = x.iter().fold(C::new(1.0, 0.0), |a, &b| a.mul(b));
        assert_eq!(red("Prod", vec![0, 1], false), (vec![], vec![p]));
        assert_eq!(red("Sum", vec![], false).1, x.to_vec());
    }

    /// The definition, summed directly in float64.
    fn dft(x: &[C], inverse: bool) -> Vec<C> {
        let n = x.len();
        let sign = if inverse { 1.0 } else { -1.0 };
        (0..n)
            .map(|k| {
                x.iter().enumerate().fold(C::ZERO, |acc, (j, &v)| {
                    acc.add(v.mul(C::cis(sign * 2.0 * PI * ((j * k) % n) as f64 / n as f64)))
                })
            })
            .collect()
    }

    fn signal(n: usize) -> Vec<C> {
        (0..n).map(|i| C::new(((i * 7 + 3) % 11) as f64 - 5.0, ((i * 5 + 1) % 13) as f64 * 0.25)).collect()
    }

    /// Complex products as TensorFlow 2.21 computes them (`tf.linalg.matmul`, `BatchMatMulV2`
    /// with `adj_x` — conjugate transpose —, `MatMul` with `transpose_b` — transpose only —), and
    /// complex `StridedSliceGrad` (element positions): what the gradients of `rfft2d` and of
    /// the DCT in `mfccs_from_log_mel_spectrograms` take (sweep 64).
    #[test]
    fn complex_products_and_slice_gradients_match_tensorflow() {
        use crate::kernels::tests_support::{node, run1};
        let ty = |op: &str, extra: &[(&str, AttrValue)]| {
            let mut attrs = vec![("T", AttrValue::Type(DType::Complex64))];
            attrs.extend(extra.iter().cloned());
            node(op, &attrs)
        };
        let m = |v: &[(f64, f64)], shape: Vec<usize>| {
            complex_tensor(DType::Complex64, shape, &v.iter().map(|&(r, i)| C::new(r, i)).collect::<Vec<_>>()).unwrap()
        };
        let a = m(&[(1., 2.), (3., -1.), (0., 0.5), (-2., 0.)], vec![2, 2]);
        let b = m(&[(2., -1.), (0., 1.), (1., 1.), (-1., 0.)], vec![2, 2]);
        let got = |t: Tensor| complex_values(&t).unwrap().iter().map(|c| (c.re, c.im)).collect::<Vec<_>>();
        let plain = run1(&ty("MatMul", &[]), &[a.clone(), b.clone()]).unwrap();
        assert_eq!(got(plain), [(8., 5.), (-5., 2.), (-1.5, -1.), (1.5, 0.)]);
        let tb = run1(&ty("MatMul", &[("transpose_b", AttrValue::B(true))]), &[a.clone(), b.clone()]).unwrap();
        assert_eq!(got(tb), [(5., 6.), (-4., 4.), (0.5, -1.), (1.5, 0.5)]);
        let a3 = m(&[(1., 2.), (3., -1.), (0., 0.5), (-2., 0.)], vec![1, 2, 2]);
        let adj = run1(&ty("BatchMatMulV2", &[("adj_x", AttrValue::B(true))]), &[a3, b]).unwrap();
        assert_eq!(adj.shape, vec![1, 2, 2]);
        assert_eq!(got(adj), [(0.5, -5.5), (2., 1.5), (5., -3.), (1., 3.)]);
        let i32s = |v: Vec<i32>| Tensor::from_i32(vec![v.len()], v).unwrap();
        let g = run1(
            &ty("StridedSliceGrad", &[("Index", AttrValue::Type(DType::Int32))]),
            &[i32s(vec![4]), i32s(vec![1]), i32s(vec![4]), i32s(vec![2]), m(&[(1., 1.), (2., -3.)], vec![2])],
        )
        .unwrap();
        assert_eq!(got(g), [(0., 0.), (1., 1.), (0., 0.), (2., -3.)]);
    }

    /// The GEMM-based product equals the definition (a triple loop over the complex values,
    /// conjugating where `adjoint` says) for every transpose/adjoint flag, non-square shapes
    /// large enough for the blocked kernels, broadcast batches and an empty inner dimension.
    #[test]
    fn complex_products_equal_the_definition() {
        let naive = |x: &[C], y: &[C], (m, k, n): (usize, usize, usize), (tx, ty): (bool, bool), adjoint: bool| {
            let (ac, bc) = (if tx { m } else { k }, if ty { k } else { n });
            let conj = |c: C, f: bool| if adjoint && f { c.conj() } else { c };
            let mut out = Vec::new();
            for r in 0..m {
                for c in 0..n {
                    let mut sum = C::ZERO;
                    for p in 0..k {
                        let u = conj(if tx { x[p * ac + r] } else { x[r * ac + p] }, tx);
                        let v = conj(if ty { y[c * bc + p] } else { y[p * bc + c] }, ty);
                        sum = sum.add(u.mul(v));
                    }
                    out.push(sum);
                }
            }
            out
        };
        let values = |n: usize, seed: usize| -> Vec<C> {
            (0..n)
                .map(|i| {
                    let h = (i * 2654435761 + seed * 40503) % 1000;
                    C::new(h as f64 / 100.0 - 5.0, ((h * 7) % 1000) as f64 / 250.0 - 2.0)
                })
                .collect()
        };
        for &(m, k, n) in &[(37, 53, 29), (1, 70, 3), (64, 1, 65), (5, 0, 4)] {
            for tx in [false, true] {
                for ty in [false, true] {
                    for adjoint in [false, true] {
                        let ashape = if tx { vec![2, 1, k, m] } else { vec![2, 1, m, k] };
                        let bshape = if ty { vec![3, n, k] } else { vec![3, k, n] };
                        let (x, y) = (values(2 * m * k, 1), values(3 * k * n, 2));
                        let a = complex_tensor(DType::Complex128, ashape, &x).unwrap();
                        let b = complex_tensor(DType::Complex128, bshape, &y).unwrap();
                        let got = complex_matmul(&a, &b, (tx, ty), adjoint).unwrap();
                        assert_eq!(got.shape, vec![2, 3, m, n]);
                        let got = complex_values(&got).unwrap();
                        for i in 0..2 {
                            for j in 0..3 {
                                let want = naive(
                                    &x[i * m * k..(i + 1) * m * k],
                                    &y[j * k * n..(j + 1) * k * n],
                                    (m, k, n),
                                    (tx, ty),
                                    adjoint,
                                );
                                let at = (i * 3 + j) * m * n;
                                for (g, w) in got[at..at + m * n].iter().zip(&want) {
                                    let tol = 1e-12 * (1.0 + w.re.abs() + w.im.abs()) * k.max(1) as f64;
                                    assert!(
                                        (g.re - w.re).abs() <= tol && (g.im - w.im).abs() <= tol,
                                        "{m}x{k}x{n} tx={tx} ty={ty} adjoint={adjoint}: {g:?} vs {w:?}"
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn every_length_matches_the_definition() {
        // Powers of two, products of 2·3·5·7 (mixed radix: 96, 100, 400, 1000, 2100) and
        // others (Bluestein: 127, 257, 11·13).
        for n in (0usize..=70).chain([96, 100, 127, 128, 143, 257, 400, 512, 1000, 2100]) {
            let expected = match n {
                0 | 1 => "trivial",
                n if radices(n).is_some() => "smooth",
                _ => "bluestein",
            };
            let kind = match Fft::new(n).kind {
                Kind::Trivial => "trivial",
                Kind::Smooth { .. } => "smooth",
                Kind::Bluestein { .. } => "bluestein",
            };
            assert_eq!(kind, expected, "n = {n}");
            let x = signal(n);
            for inverse in [false, true] {
                let mut got = x.clone();
                Fft::new(n).run(&mut got, inverse);
                let want = dft(&x, inverse);
                let scale = want.iter().map(|c| c.re.abs().max(c.im.abs())).fold(1.0, f64::max);
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g.re - w.re).abs() <= 1e-12 * scale && (g.im - w.im).abs() <= 1e-12 * scale,
                        "n = {n}, inverse = {inverse}: {g:?} vs {w:?}"
                    );
                }
            }
        }
    }

    fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
        super::super::tensor_of(shape.to_vec(), v.to_vec())
    }

    fn lengths(v: &[i32]) -> Tensor {
        super::super::tensor_of(vec![v.len()], v.to_vec())
    }

    fn node(op: &str, attrs: &[(&str, DType)]) -> Node {
        let mut n = super::super::probe(op);
        for (k, v) in attrs {
            n.attrs.insert(k.to_string(), AttrValue::Type(*v));
        }
        n
    }

    fn run(n: &Node, inputs: Vec<Tensor>) -> Tensor {
        let f = prepare(n).unwrap().unwrap();
        f(inputs.into_iter().collect()).unwrap().remove(0)
    }

    fn pairs(t: &Tensor) -> Vec<(f32, f32)> {
        complex_values(t).unwrap().iter().map(|c| (c.re as f32, c.im as f32)).collect()
    }

    /// TensorFlow 2.21: `tf.signal.rfft([[1., 2., 3., 4., 5.]], [8])` and with `[4]` (cropped).
    /// RFFT's paired real rows (and the odd row out), in one, two and three dimensions and
    /// over the parallel threshold, against a direct O(n²) DFT in float64.
    #[test]
    fn rfft_of_paired_rows_is_the_dft() {
        let dft = |x: &[f64], n: usize, k: usize| -> (f64, f64) {
            x.iter().enumerate().fold((0.0, 0.0), |(re, im), (j, &v)| {
                let a = -2.0 * PI * (j * k % n) as f64 / n as f64;
                (re + v * a.cos(), im + v * a.sin())
            })
        };
        for (rows, n) in [(1, 8), (3, 12), (4, 7), (5, 16), (2, 1), (700, 30)] {
            let data: Vec<f32> = (0..rows * n).map(|i| ((i * 7919 % 101) as f32 - 50.0) / 17.0).collect();
            let r = run(&node("RFFT", &[]), vec![f32s(&[rows, n], &data), lengths(&[n as i32])]);
            let half = n / 2 + 1;
            assert_eq!(r.shape, vec![rows, half]);
            let got = pairs(&r);
            for row in 0..rows {
                let x: Vec<f64> = data[row * n..(row + 1) * n].iter().map(|&v| f64::from(v)).collect();
                let scale = x.iter().map(|v| v.abs()).sum::<f64>().max(1.0);
                for k in 0..half {
                    let (re, im) = dft(&x, n, k);
                    let g = got[row * half + k];
                    assert!(
                        (f64::from(g.0) - re).abs() < 1e-6 * scale && (f64::from(g.1) - im).abs() < 1e-6 * scale,
                        "rows {rows}, n {n}, row {row}, bin {k}: {g:?} vs ({re}, {im})"
                    );
                }
            }
        }
        // Two and three dimensions: the inverse gives the input back.
        let data: Vec<f32> = (0..3 * 4 * 6).map(|i| ((i * 31 % 13) as f32 - 6.0) / 5.0).collect();
        let x = f32s(&[3, 4, 6], &data);
        for (fwd, inv, len) in [("RFFT2D", "IRFFT2D", vec![4, 6]), ("RFFT3D", "IRFFT3D", vec![3, 4, 6])] {
            let spec = run(&node(fwd, &[]), vec![x.clone(), lengths(&len)]);
            let back = run(&node(inv, &[]), vec![spec, lengths(&len)]);
            for (g, w) in back.as_f32().unwrap().iter().zip(&data) {
                assert!((g - w).abs() < 1e-5, "{fwd}: {g} vs {w}");
            }
        }
        // The 2-D spectrum's bin (1, 1) of a single image against the direct sum.
        let img: Vec<f64> = data[..24].iter().map(|&v| f64::from(v)).collect();
        let spec = run(&node("RFFT2D", &[]), vec![f32s(&[4, 6], &data[..24]), lengths(&[4, 6])]);
        let (mut re, mut im) = (0.0, 0.0);
        for (i, v) in img.iter().enumerate() {
            let a = -2.0 * PI * ((i / 6) as f64 / 4.0 + (i % 6) as f64 / 6.0);
            re += v * a.cos();
            im += v * a.sin();
        }
        let g = pairs(&spec)[4 + 1];
        assert!((f64::from(g.0) - re).abs() < 1e-4 && (f64::from(g.1) - im).abs() < 1e-4, "{g:?} vs ({re}, {im})");
    }

    #[test]
    fn rfft_pads_and_crops_like_tensorflow() {
        let x = f32s(&[1, 5], &[1., 2., 3., 4., 5.]);
        let r = run(&node("RFFT", &[]), vec![x.clone(), lengths(&[8])]);
        assert_eq!(r.dtype, DType::Complex64);
        assert_eq!(r.shape, vec![1, 5]);
        let want = [(15.0, 0.0), (-5.414_213, -7.242_640_7), (3.0, 2.0), (-2.585_786_4, -1.242_640_7), (3.0, 0.0)];
        for (g, w) in pairs(&r).iter().zip(want) {
            assert!((g.0 - w.0).abs() < 1e-5 && (g.1 - w.1).abs() < 1e-5, "{g:?} vs {w:?}");
        }
        let r = run(&node("RFFT", &[]), vec![x, lengths(&[4])]);
        assert_eq!(r.shape, vec![1, 3]);
        assert_eq!(pairs(&r), vec![(10.0, 0.0), (-2.0, 2.0), (-2.0, 0.0)]);
    }

    #[test]
    fn irfft_inverts_rfft_in_one_two_and_three_dimensions() {
        let data: Vec<f32> = (0..2 * 6 * 5 * 7).map(|i| ((i * 37 % 17) as f32 - 8.0) / 3.0).collect();
        let x = f32s(&[2, 6, 5, 7], &data);
        for (fwd, inv, len) in
            [("RFFT", "IRFFT", vec![7]), ("RFFT2D", "IRFFT2D", vec![5, 7]), ("RFFT3D", "IRFFT3D", vec![6, 5, 7])]
        {
            let spec = run(&node(fwd, &[]), vec![x.clone(), lengths(&len)]);
            let back = run(&node(inv, &[]), vec![spec, lengths(&len)]);
            assert_eq!(back.shape, x.shape, "{fwd}");
            for (g, w) in back.as_f32().unwrap().iter().zip(&data) {
                assert!((g - w).abs() < 1e-5, "{fwd}: {g} vs {w}");
            }
        }
    }

    /// TensorFlow 2.21: `tf.signal.irfft(tf.constant([[1+2j, 3-1j, 2+5j]], tf.complex64))`
    /// (fft_length 4: the imaginary parts of the zero and Nyquist bins are ignored) and with
    /// `fft_length = [5]`.
    #[test]
    fn irfft_ignores_the_imaginary_parts_of_dc_and_nyquist() {
        let spec =
            complex_tensor(DType::Complex64, vec![1, 3], &[C::new(1., 2.), C::new(3., -1.), C::new(2., 5.)]).unwrap();
        let r = run(&node("IRFFT", &[]), vec![spec.clone(), lengths(&[4])]);
        assert_eq!(r.as_f32().unwrap(), &[2.25, 0.25, -0.75, -0.75]);
        // An odd length keeps no Nyquist bin: every imaginary part but the DC's counts.
        let r = run(&node("IRFFT", &[]), vec![spec, lengths(&[5])]);
        for (g, w) in r.as_f32().unwrap().iter().zip([2.2, -0.871_541, 1.613_620_4, -2.660_834, 0.718_754_7]) {
            assert!((g - w).abs() < 1e-6, "{g} vs {w}");
        }
    }

    #[test]
    fn two_dimensional_complex_transforms_round_trip() {
        let v: Vec<C> = signal(3 * 4 * 6);
        let t = complex_tensor(DType::Complex128, vec![3, 4, 6], &v).unwrap();
        let f = run(&node("FFT2D", &[("Tcomplex", DType::Complex128)]), vec![t]);
        // One 2-D transform equals the definition along both axes.
        let mut want = v.clone();
        transform_axis(&mut want, &[3, 4, 6], 1, false);
        transform_axis(&mut want, &[3, 4, 6], 2, false);
        assert_eq!(complex_values(&f).unwrap(), want);
        let back = run(&node("IFFT2D", &[("Tcomplex", DType::Complex128)]), vec![f]);
        for (g, w) in complex_values(&back).unwrap().iter().zip(&v) {
            assert!((g.re - w.re).abs() < 1e-12 && (g.im - w.im).abs() < 1e-12);
        }
    }

    /// `ConjugateTranspose` (`tf.linalg.adjoint`): transposed and conjugated for complex
    /// elements, transposed only for real ones (TensorFlow 2.21's values).
    #[test]
    fn conjugate_transpose_conjugates_complex_elements_only() {
        let perm = Tensor::from_i32(vec![2], vec![1, 0]).unwrap();
        let run_ct = |dtype: DType, x: Tensor| {
            let k =
                super::super::prepare(&node("ConjugateTranspose", &[("T", dtype), ("Tperm", DType::Int32)])).unwrap();
            k([x, perm.clone()].into_iter().collect()).unwrap().remove(0)
        };
        let z: Vec<C> = [(1., 2.), (3., 4.), (5., 6.), (7., 8.)].iter().map(|&(r, i)| C::new(r, i)).collect();
        let out = run_ct(DType::Complex64, complex_tensor(DType::Complex64, vec![2, 2], &z).unwrap());
        assert_eq!((out.dtype, out.shape.clone()), (DType::Complex64, vec![2, 2]));
        assert_eq!(pairs(&out), vec![(1.0, -2.0), (5.0, -6.0), (3.0, -4.0), (7.0, -8.0)]);
        let out = run_ct(DType::Float32, f32s(&[2, 2], &[1., 2., 3., 4.]));
        assert_eq!(out.as_f32().unwrap(), &[1., 3., 2., 4.]);
    }

    #[test]
    fn parts_abs_angle_and_arithmetic() {
        let a = complex_tensor(DType::Complex64, vec![2], &[C::new(3., 4.), C::new(-1., 0.)]).unwrap();
        let parts = [("Real", vec![3.0, -1.0]), ("Imag", vec![4.0, 0.0]), ("ComplexAbs", vec![5.0, 1.0])];
        for (op, want) in parts {
            let r = run(&node(op, &[("T", DType::Complex64)]), vec![a.clone()]);
            assert_eq!(r.dtype, DType::Float32);
            assert_eq!(r.as_f32().unwrap(), &want[..], "{op}");
        }
        // An infinite part makes the magnitude infinite beside a NaN (hypotf), and float32
        // extremes neither overflow nor underflow on the way.
        let edge = [C::new(f64::INFINITY, f64::NAN), C::new(f64::NAN, f64::NEG_INFINITY), C::new(f64::NAN, 1.0)];
        let e = complex_tensor(DType::Complex64, vec![3], &edge).unwrap();
        let r = run(&node("ComplexAbs", &[("T", DType::Complex64)]), vec![e]);
        let r = r.as_f32().unwrap();
        assert!(r[0] == f32::INFINITY && r[1] == f32::INFINITY && r[2].is_nan(), "{r:?}");
        let big = complex_tensor(DType::Complex64, vec![2], &[C::new(3e38, 3e38), C::new(3e-45, 4e-45)]).unwrap();
        let r = run(&node("ComplexAbs", &[("T", DType::Complex64)]), vec![big]);
        assert_eq!(
            r.as_f32().unwrap(),
            &[(3e38f64 * 2f64.sqrt()) as f32, (3e-45f32 as f64).hypot(4e-45f32 as f64) as f32]
        );
        let angle = run(&node("Angle", &[("T", DType::Complex64)]), vec![a.clone()]);
        assert_eq!(angle.as_f32().unwrap(), &[(4f64).atan2(3.0) as f32, std::f32::consts::PI]);
        let b = complex_tensor(DType::Complex64, vec![], &[C::new(0., 1.)]).unwrap();
        let m = run(&node("Mul", &[("T", DType::Complex64)]), vec![a.clone(), b.clone()]);
        assert_eq!(pairs(&m), vec![(-4.0, 3.0), (0.0, -1.0)]);
        let d = run(&node("RealDiv", &[("T", DType::Complex64)]), vec![m, b]);
        assert_eq!(pairs(&d), vec![(3.0, 4.0), (-1.0, 0.0)]);
        let c = run(&node("Conj", &[("T", DType::Complex64)]), vec![a]);
        assert_eq!(pairs(&c), vec![(3.0, -4.0), (-1.0, 0.0)]);
        let z = run(
            &node("Complex", &[("T", DType::Float32), ("Tout", DType::Complex64)]),
            vec![f32s(&[2], &[1., 2.]), f32s(&[], &[-1.])],
        );
        assert_eq!(pairs(&z), vec![(1.0, -1.0), (2.0, -1.0)]);
        let cast = run(&node("Cast", &[("SrcT", DType::Complex64), ("DstT", DType::Float32)]), vec![z]);
        assert_eq!(cast.as_f32().unwrap(), &[1.0, 2.0]);
        // The gradient ops: `ComplexAbs`'s `DivNoNan` (0 over 0 is 0), gradient sums.
        let num = complex_tensor(DType::Complex64, vec![2], &[C::new(3., 4.), C::new(1., 1.)]).unwrap();
        let den = complex_tensor(DType::Complex64, vec![2], &[C::new(0., 1.), C::ZERO]).unwrap();
        let q = run(&node("DivNoNan", &[("T", DType::Complex64)]), vec![num.clone(), den]);
        assert_eq!(pairs(&q), vec![(4.0, -3.0), (0.0, 0.0)]);
        let s = run(&node("AddN", &[("T", DType::Complex64)]), vec![num.clone(), num.clone(), num.clone()]);
        assert_eq!(pairs(&s), vec![(9.0, 12.0), (3.0, 3.0)]);
        let z = run(&node("ZerosLike", &[("T", DType::Complex64)]), vec![num]);
        assert_eq!(pairs(&z), vec![(0.0, 0.0), (0.0, 0.0)]);
        // Real arithmetic is left to the elementwise kernels.
        assert!(prepare(&node("Mul", &[("T", DType::Float32)])).unwrap().is_none());
    }

    #[test]
    fn bad_operands_are_errors() {
        let x = f32s(&[4], &[1., 2., 3., 4.]);
        let f = prepare(&node("RFFT2D", &[])).unwrap().unwrap();
        let e = f([x.clone(), lengths(&[4, 4])].into_iter().collect()).unwrap_err();
        assert!(e.to_string().contains("rank at least 2"), "{e}");
        let f = prepare(&node("RFFT", &[])).unwrap().unwrap();
        let e = f([x.clone(), lengths(&[-4])].into_iter().collect()).unwrap_err();
        assert!(e.to_string().contains("must not be negative"), "{e}");
        let e = f([x, lengths(&[4, 4])].into_iter().collect()).unwrap_err();
        assert!(e.to_string().contains("vector of 1 elements"), "{e}");
    }
}
