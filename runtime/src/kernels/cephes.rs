//! Arithmetic shared by the Cephes-style special functions ([`super::bessel`],
//! [`super::integrals`]): a [`Real`] trait over f32 and f64, so one routine evaluates a
//! rational approximation in either type, and the polynomial and Chebyshev-series
//! evaluators. TensorFlow evaluates these approximations in the tensor's own type
//! (float32 kernels in float32 arithmetic, with the float64 coefficient literals rounded to
//! float32), and its float32 results carry that type's rounding — most visibly in the
//! oscillating functions, where the phase is rounded to float32. Evaluating in the same
//! type, with the same operation order, is what makes our float32 outputs agree with
//! TensorFlow's to an ulp or two rather than to the true value.

use std::ops::{Add, Div, Mul, Neg, Sub};

/// f32 or f64, with the elementary functions the approximations need (glibc's, as in
/// TensorFlow's scalar kernels).
pub(crate) trait Real:
    Copy
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    /// Whether this is float32, whose Cephes routines use shorter coefficient tables.
    const SINGLE: bool;
    /// A float64 constant rounded to this type (C++'s `Scalar(literal)`).
    fn c(v: f64) -> Self;
    fn abs(self) -> Self;
    fn sqrt(self) -> Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn ln_1p(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
}

macro_rules! real_impl {
    ($t:ty, $single:expr) => {
        impl Real for $t {
            const SINGLE: bool = $single;
            fn c(v: f64) -> Self {
                v as $t
            }
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            fn ln_1p(self) -> Self {
                <$t>::ln_1p(self)
            }
            fn sin(self) -> Self {
                <$t>::sin(self)
            }
            fn cos(self) -> Self {
                <$t>::cos(self)
            }
        }
    };
}
real_impl!(f32, true);
real_impl!(f64, false);

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
