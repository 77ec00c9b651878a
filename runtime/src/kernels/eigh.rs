//! `SelfAdjointEigV2` (`tf.linalg.eigh`, `tf.linalg.eigvalsh`): eigenvalues (ascending) and
//! eigenvectors of symmetric matrices, as TensorFlow's CPU kernel gets them from Eigen's
//! `SelfAdjointEigenSolver`, in the input's precision and by the same steps so that the
//! eigenvectors' signs — which any algorithm may choose — are TensorFlow's.
//!
//! The steps (Eigen's): only the lower triangle is read; it is scaled by its largest
//! magnitude; Householder tridiagonalisation (`β = −sign(x₀)‖x‖`, none when nothing is below
//! `x₀`) gives the diagonal, the subdiagonal and `Q`; implicit symmetric QR steps with a
//! Wilkinson shift and Eigen's Givens rotations (`makeGivens`) deflate the tridiagonal from
//! its end, a subdiagonal entry counting as zero once its square, scaled by `1/ε²`, is below
//! the sum of its two diagonal neighbours' magnitudes (at most 30·n steps, else TensorFlow's
//! error); the eigenvalues are then ordered by selection (each minimum swapped forward, its
//! eigenvector column with it) and scaled back.

use autoclust_graph::{AttrValue, DType, Node, Tensor};

use super::real::Real;
use super::{arity, tensor_of, Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

/// Eigen's `positive_real_hypot`.
fn hypot<T: Real>(x: T, y: T) -> T {
    let (x, y) = (x.abs(), y.abs());
    let (p, q) = if x > y { (x, y) } else { (y, x) };
    if p == T::ZERO {
        return T::ZERO;
    }
    let r = q / p;
    p * (T::ONE + r * r).sqrt()
}

/// Eigen's `JacobiRotation::makeGivens` for reals: `(c, s)`.
fn givens<T: Real>(p: T, q: T) -> (T, T) {
    if q == T::ZERO {
        (if p < T::ZERO { -T::ONE } else { T::ONE }, T::ZERO)
    } else if p == T::ZERO {
        (T::ZERO, if q < T::ZERO { T::ONE } else { -T::ONE })
    } else if p.abs() > q.abs() {
        let t = q / p;
        let mut u = (T::ONE + t * t).sqrt();
        if p < T::ZERO {
            u = -u;
        }
        let c = T::ONE / u;
        (c, -t * c)
    } else {
        let t = p / q;
        let mut u = (T::ONE + t * t).sqrt();
        if q < T::ZERO {
            u = -u;
        }
        let s = -T::ONE / u;
        (-t * s, s)
    }
}

/// One symmetric `n × n` matrix (row-major; the lower triangle read): ascending eigenvalues
/// and the eigenvectors as columns of a row-major `n × n` matrix, or `None` when the QR
/// iteration does not converge.
pub(crate) fn solve<T: Real>(a: &[T], n: usize, vectors: bool) -> Option<(Vec<T>, Vec<T>)> {
    if n == 0 {
        return Some((Vec::new(), Vec::new()));
    }
    // The lower triangle, column-major (Eigen's default storage) in `m[c * n + r]`.
    let mut m = vec![T::ZERO; n * n];
    let mut scale = T::ZERO;
    for c in 0..n {
        for r in c..n {
            let v = a[r * n + c];
            m[c * n + r] = v;
            if v.abs() > scale {
                scale = v.abs();
            }
        }
    }
    if scale == T::ZERO {
        scale = T::ONE;
    }
    for v in m.iter_mut() {
        *v = *v / scale;
    }
    if n == 1 {
        return Some((vec![m[0] * scale], vec![T::ONE]));
    }
    // Householder tridiagonalisation in place (`tridiagonalization_inplace`).
    let mut h = Vec::with_capacity(n - 1);
    let at = |m: &Vec<T>, r: usize, c: usize| if r >= c { m[c * n + r] } else { m[r * n + c] };
    for i in 0..n - 1 {
        let rem = n - i - 1;
        let col = i * n + i + 1;
        // makeHouseholderInPlace on m[col .. col + rem].
        let c0 = m[col];
        let tail_sq = (1..rem).fold(T::ZERO, |s, k| s + m[col + k] * m[col + k]);
        let (tau, beta) = if tail_sq <= T::MIN_POSITIVE {
            for k in 1..rem {
                m[col + k] = T::ZERO;
            }
            (T::ZERO, c0)
        } else {
            let mut beta = (c0 * c0 + tail_sq).sqrt();
            if c0 >= T::ZERO {
                beta = -beta;
            }
            let d = c0 - beta;
            for k in 1..rem {
                m[col + k] = m[col + k] / d;
            }
            (((beta - c0) / beta), beta)
        };
        m[col] = T::ONE;
        let v: Vec<T> = m[col..col + rem].to_vec();
        // w = tau · A₂₂ v (A₂₂ the trailing block, symmetric from its lower triangle).
        let mut w: Vec<T> = (0..rem)
            .map(|r| v.iter().enumerate().fold(T::ZERO, |s, (c, &vc)| s + at(&m, i + 1 + r, i + 1 + c) * (tau * vc)))
            .collect();
        let dot = w.iter().zip(&v).fold(T::ZERO, |s, (&x, &y)| s + x * y);
        let alpha = tau * -T::HALF * dot;
        for (wr, &vr) in w.iter_mut().zip(&v) {
            *wr = *wr + alpha * vr;
        }
        // A₂₂ −= v wᵀ + w vᵀ (lower triangle).
        for c in 0..rem {
            for r in c..rem {
                let idx = (i + 1 + c) * n + (i + 1 + r);
                m[idx] = m[idx] - (v[r] * w[c] + w[r] * v[c]);
            }
        }
        m[col] = beta;
        h.push(tau);
    }
    let mut diag: Vec<T> = (0..n).map(|i| m[i * n + i]).collect();
    let mut sub: Vec<T> = (0..n - 1).map(|i| m[i * n + i + 1]).collect();
    // Q = H₀ H₁ … H_{n−2} (vector i starts at row i + 1), column-major in `q[c * n + r]`.
    let mut q = vec![T::ZERO; n * n];
    if vectors {
        for i in 0..n {
            q[i * n + i] = T::ONE;
        }
        for k in (0..n - 1).rev() {
            let tau = h[k];
            if tau == T::ZERO {
                continue;
            }
            let start = k + 1;
            // Essential part: m[k*n + start + 1 ..], implicit 1 at row `start`.
            let ess = |r: usize| m[k * n + r];
            for c in start..n {
                let mut t = T::ZERO;
                for r in start + 1..n {
                    t = t + ess(r) * q[c * n + r];
                }
                let t = t + q[c * n + start];
                q[c * n + start] = q[c * n + start] - tau * t;
                for r in start + 1..n {
                    q[c * n + r] = q[c * n + r] - tau * ess(r) * t;
                }
            }
        }
    }
    // Implicit symmetric QR (`computeFromTridiagonal_impl`).
    let (mut end, mut start, mut iter) = (n - 1, 0usize, 0usize);
    let inv_eps = T::ONE / T::EPSILON;
    while end > 0 {
        for i in start..end {
            if sub[i].abs() < T::MIN_POSITIVE {
                sub[i] = T::ZERO;
            } else {
                let s = inv_eps * sub[i];
                if s * s <= diag[i].abs() + diag[i + 1].abs() {
                    sub[i] = T::ZERO;
                }
            }
        }
        while end > 0 && sub[end - 1] == T::ZERO {
            end -= 1;
        }
        if end == 0 {
            break;
        }
        iter += 1;
        if iter > 30 * n {
            return None;
        }
        start = end - 1;
        while start > 0 && sub[start - 1] != T::ZERO {
            start -= 1;
        }
        qr_step(&mut diag, &mut sub, start, end, vectors.then_some(&mut q), n);
    }
    for i in 0..n - 1 {
        let mut k = i;
        for j in i + 1..n {
            if diag[j] < diag[k] {
                k = j;
            }
        }
        if k > i {
            diag.swap(i, k);
            if vectors {
                for r in 0..n {
                    q.swap(i * n + r, k * n + r);
                }
            }
        }
    }
    let values = diag.into_iter().map(|d| d * scale).collect();
    // Row-major out: out[r][c] = q[c * n + r].
    let vecs = if vectors { (0..n * n).map(|i| q[(i % n) * n + i / n]).collect() } else { Vec::new() };
    Some((values, vecs))
}

/// Eigen's `tridiagonal_qr_step` with its Wilkinson shift.
fn qr_step<T: Real>(diag: &mut [T], sub: &mut [T], start: usize, end: usize, mut q: Option<&mut Vec<T>>, n: usize) {
    let td = (diag[end - 1] - diag[end]) * T::HALF;
    let e = sub[end - 1];
    let mut mu = diag[end];
    if td == T::ZERO {
        mu = mu - e.abs();
    } else if e != T::ZERO {
        let e2 = e * e;
        let h = hypot(td, e);
        let d = td + if td > T::ZERO { h } else { -h };
        mu = if e2 == T::ZERO { mu - e / (d / e) } else { mu - e2 / d };
    }
    let mut x = diag[start] - mu;
    let mut z = sub[start];
    let mut k = start;
    while k < end && z != T::ZERO {
        let (c, s) = givens(x, z);
        let sdk = s * diag[k] + c * sub[k];
        let dkp1 = s * sub[k] + c * diag[k + 1];
        diag[k] = c * (c * diag[k] - s * sub[k]) - s * (c * sub[k] - s * diag[k + 1]);
        diag[k + 1] = s * sdk + c * dkp1;
        sub[k] = c * sdk - s * dkp1;
        if k > start {
            sub[k - 1] = c * sub[k - 1] - s * z;
        }
        x = sub[k];
        if k < end - 1 {
            z = -s * sub[k + 1];
            sub[k + 1] = c * sub[k + 1];
        }
        if let Some(q) = q.as_deref_mut() {
            // Q = Q·G: columns k and k + 1.
            for r in 0..n {
                let (xi, yi) = (q[k * n + r], q[(k + 1) * n + r]);
                q[k * n + r] = c * xi - s * yi;
                q[(k + 1) * n + r] = s * xi + c * yi;
            }
        }
        k += 1;
    }
}

fn eig<T: Real>(t: &Tensor, vectors: bool) -> KResult<Outputs> {
    let r = t.rank();
    if r < 2 {
        return Err(KernelError::invalid(format!("Input tensor must have rank >= 2, got {r}")));
    }
    let n = t.shape[r - 1];
    if t.shape[r - 2] != n {
        return Err(KernelError::invalid("Input matrix must be square."));
    }
    let lead = &t.shape[..r - 2];
    let count: usize = lead.iter().product();
    let data = T::slice(t);
    let (mut values, mut vecs) = (Vec::with_capacity(count * n), Vec::new());
    for b in 0..count {
        let Some((e, v)) = solve(&data[b * n * n..(b + 1) * n * n], n, vectors) else {
            return Err(KernelError::invalid(
                "Self-adjoint eigen decomposition was not successful. The input might not be valid.",
            ));
        };
        values.extend(e);
        vecs.extend(v);
    }
    let mut o = Outputs::new();
    o.push(tensor_of([lead, &[n]].concat(), values));
    o.push(if vectors { tensor_of(t.shape.clone(), vecs) } else { tensor_of(vec![0], Vec::<T>::new()) });
    Ok(o)
}

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    if node.op != "SelfAdjointEigV2" {
        return Ok(None);
    }
    let vectors = node.attr("compute_v").and_then(AttrValue::as_bool).unwrap_or(true);
    Ok(Some(Box::new(move |inp: Inputs| {
        arity(&inp, 1)?;
        match inp[0].dtype {
            DType::Float32 => eig::<f32>(&inp[0], vectors),
            DType::Float64 => eig::<f64>(&inp[0], vectors),
            d => Err(KernelError::DType(d)),
        }
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::compute;
    use crate::kernels::tests_support::node;

    /// Random symmetric matrices: `A·v = λ·v` for every pair, eigenvalues ascending, the
    /// eigenvectors orthonormal; only the lower triangle is read.
    #[test]
    fn eigenpairs_satisfy_the_definition() {
        let n = 6;
        let mut seed = 5u64;
        let mut a = vec![0f64; n * n];
        for r in 0..n {
            for c in 0..=r {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                a[r * n + c] = (seed >> 33) as f64 / (1u64 << 31) as f64 - 0.5;
                a[c * n + r] = if c == r { a[r * n + c] } else { 1e3 }; // garbage above
            }
        }
        let out = compute(&node("SelfAdjointEigV2", &[]), &[tensor_of(vec![n, n], a.clone())]).unwrap();
        let (e, v) = (out[0].as_f64().unwrap(), out[1].as_f64().unwrap());
        let sym = |r: usize, c: usize| if r >= c { a[r * n + c] } else { a[c * n + r] };
        assert!(e.windows(2).all(|w| w[0] <= w[1]), "{e:?}");
        for k in 0..n {
            for r in 0..n {
                let av: f64 = (0..n).map(|c| sym(r, c) * v[c * n + k]).sum();
                assert!((av - e[k] * v[r * n + k]).abs() < 1e-12, "pair {k} row {r}");
            }
            for j in 0..n {
                let dot: f64 = (0..n).map(|r| v[r * n + k] * v[r * n + j]).sum();
                assert!((dot - if j == k { 1.0 } else { 0.0 }).abs() < 1e-12);
            }
        }
        let only = node("SelfAdjointEigV2", &[("compute_v", AttrValue::B(false))]);
        let out = compute(&only, &[tensor_of(vec![n, n], a)]).unwrap();
        assert_eq!(out[0].as_f64().unwrap(), e);
        assert_eq!(out[1].shape, vec![0]);
        let e = compute(&node("SelfAdjointEigV2", &[]), &[tensor_of(vec![2, 3], vec![0f32; 6])]).unwrap_err();
        assert_eq!(e.to_string(), "Input matrix must be square.");
    }
}
