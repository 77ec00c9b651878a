//! [`Real`]: the float types (float32, float64) of kernels written once for both in the
//! arithmetic order of the C++ they follow (Eigen's solvers, TensorFlow's CTC calculators,
//! the Cephes special functions of [`super::cephes`]):
//! std's operators, the constants and the few functions those kernels call.

use super::Elem;

pub(crate) trait Real:
    Elem
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Neg<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    const HALF: Self;
    const NEG_INF: Self;
    const EPSILON: Self;
    const MIN_POSITIVE: Self;
    fn abs(self) -> Self;
    fn sqrt(self) -> Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn from_f32(x: f32) -> Self;
    fn to_f32(self) -> f32;
    /// Whether this is float32, whose Cephes routines ([`super::cephes`]) use shorter
    /// coefficient tables.
    const SINGLE: bool;
    /// A float64 constant rounded to this type (C++'s `Scalar(literal)`).
    fn c(v: f64) -> Self;
    fn ln_1p(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
}

macro_rules! real_impl {
    ($t:ty, $single:expr) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const HALF: Self = 0.5;
            const NEG_INF: Self = <$t>::NEG_INFINITY;
            const EPSILON: Self = <$t>::EPSILON;
            const MIN_POSITIVE: Self = <$t>::MIN_POSITIVE;
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
            fn from_f32(x: f32) -> Self {
                x as $t
            }
            fn to_f32(self) -> f32 {
                self as f32
            }
            const SINGLE: bool = $single;
            fn c(v: f64) -> Self {
                v as $t
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
