//! Arithmetic shared by the Cephes-style special functions ([`super::bessel`],
//! [`super::integrals`]): with [`Real`] (f32 or f64) one routine evaluates a
//! rational approximation in either type, and the polynomial and Chebyshev-series
//! evaluators. TensorFlow evaluates these approximations in the tensor's own type
//! (float32 kernels in float32 arithmetic, with the float64 coefficient literals rounded to
//! float32), and its float32 results carry that type's rounding — most visibly in the
//! oscillating functions, where the phase is rounded to float32. Evaluating in the same
//! type, with the same operation order, is what makes our float32 outputs agree with
//! TensorFlow's to an ulp or two rather than to the true value.

pub(crate) use super::real::Real;

/// c₀xⁿ + c₁xⁿ⁻¹ + … + cₙ by Horner's rule (Cephes' `polevl`); the coefficients are
/// rounded to `T` one by one.
pub(crate) fn polevl<T: Real, C: Copy + Into<f64>>(x: T, coef: &[C]) -> T {
    coef[1..].iter().fold(T::c(coef[0].into()), |acc, &k| acc * x + T::c(k.into()))
}

/// ½(b₀ − b₂) of Clenshaw's recurrence bₖ = (x·bₖ₊₁ + cₖ) − bₖ₊₂ (Eigen's order) over the coefficients from
/// the highest order down: Σ′ cₖ·Tₖ(x/2), the Chebyshev series of Cephes' `chbevl`
/// (arguments in [−2, 2]).
pub(crate) fn chebevl<T: Real, C: Copy + Into<f64>>(x: T, coef: &[C]) -> T {
    let zero = T::c(0.0);
    let (mut b0, mut b1, mut b2) = (T::c(coef[0].into()), zero, zero);
    for &k in &coef[1..] {
        b2 = b1;
        b1 = b0;
        b0 = (x * b1 + T::c(k.into())) - b2;
    }
    T::c(0.5) * (b0 - b2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polynomials_and_chebyshev_series() {
        // 2x² − 3x + 1 at 2.
        assert_eq!(polevl(2.0f64, &[2.0, -3.0, 1.0]), 3.0);
        // ½c₀ + c₁T₁(y) + c₂T₂(y) with y = x/2: coefficients listed from the highest order.
        let y = 0.3f64;
        let want = 0.5 * 1.0 + 2.0 * y + 3.0 * (2.0 * y * y - 1.0);
        assert!((chebevl(2.0 * y, &[3.0, 2.0, 1.0]) - want).abs() < 1e-15);
        assert_eq!(polevl(0.5f32, &[1.0f32, 1.0]), 1.5f32);
    }
}

/// What the special-function tests of [`super::bessel`] and [`super::integrals`] share: the
/// inputs TensorFlow's outputs were recorded at and the ulp comparison against them.
#[cfg(test)]
pub(crate) mod tf_reference {
    /// Distance in ulps (NaN matches NaN only). TensorFlow's CPU kernels run with subnormals
    /// flushed to zero, so its 0 where the value is subnormal counts as a match (the
    /// interpreter does not flush).
    fn ulps64(got: f64, want: f64) -> u64 {
        let ord =
            |v: f64| if v.to_bits() >> 63 == 1 { -((v.to_bits() & !(1 << 63)) as i128) } else { v.to_bits() as i128 };
        if (got.is_nan() && want.is_nan()) || (want == 0.0 && got.is_subnormal()) {
            0
        } else if got.is_nan() || want.is_nan() {
            u64::MAX
        } else {
            (ord(got) - ord(want)).unsigned_abs() as u64
        }
    }

    fn ulps32(got: f32, want: f32) -> u64 {
        let ord =
            |v: f32| if v.to_bits() >> 31 == 1 { -i64::from(v.to_bits() & !(1 << 31)) } else { i64::from(v.to_bits()) };
        if (got.is_nan() && want.is_nan()) || (want == 0.0 && got.is_subnormal()) {
            0
        } else if got.is_nan() || want.is_nan() {
            u64::MAX
        } else {
            (ord(got) - ord(want)).unsigned_abs()
        }
    }

    pub(crate) fn check(
        name: &str,
        f64_fn: fn(f64) -> f64,
        f32_fn: fn(f32) -> f32,
        want: (&[f64], &[f32]),
        max_ulps: (u64, u64),
    ) {
        for ((&x, &w64), &w32) in X.iter().zip(want.0).zip(want.1) {
            let got = f64_fn(x);
            assert!(ulps64(got, w64) <= max_ulps.0, "{name}({x}) = {got}, TensorFlow {w64} (float64)");
            let got = f32_fn(x as f32);
            assert!(ulps32(got, w32) <= max_ulps.1, "{name}({x}) = {got}, TensorFlow {w32} (float32)");
        }
    }

    // TensorFlow 2.21 (`tf.math.special.*`) at these inputs, float64 and float32.
    pub(crate) const X: [f64; 21] = [
        0.0,
        1e-08,
        0.5,
        0.9,
        1.5,
        2.0,
        2.5,
        3.25,
        4.0,
        5.0,
        6.5,
        12.0,
        40.0,
        100.0,
        1000.0,
        10000000000.0,
        -1.0,
        -7.5,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ];
}
