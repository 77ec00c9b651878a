//! TensorFlow's element arithmetic, one definition for every crate that evaluates it: the
//! interpreter's kernels (`autoclust-runtime`) and the compiler's constant folding
//! (`autoclust-compiler`). Two hand copies drifted before (a `Maximum` that dropped NaN, ±0 ties
//! broken differently), each found by the JIT-vs-interpreter property test; with one copy the
//! folded constants and the run-time kernels cannot disagree.
//!
//! Semantics: integers wrap (TensorFlow's kernels are C++ with two's-complement wrap in
//! practice); `div` truncates and callers rule out zero divisors; `floordiv`/`floormod` are
//! Python's; `maximum`/`minimum` propagate NaN and return the *second* operand on a tie (so
//! `max(+0, -0) = -0`), as TensorFlow's vectorised Eigen kernels do for all but a tensor's last
//! few elements.

/// TensorFlow's SELU scale (`relu_op_functor.h`), as a float64: each kernel casts it to its
/// element type, as TensorFlow's `static_cast<T>` does.
pub const SELU_SCALE: f64 = 1.050_700_987_355_480_5;
/// TensorFlow's SELU scale·alpha, as a float64 (float32's is 0x3fe10966).
pub const SELU_SCALE_ALPHA: f64 = 1.758_099_340_847_376_9;

/// Arithmetic with TensorFlow's semantics for each element type.
pub trait TfArith: Copy + PartialOrd {
    const IS_INT: bool;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    /// `/`: truncating for integers (callers rule out zero divisors).
    fn div(self, o: Self) -> Self;
    /// `TruncateDiv`: the quotient rounded toward zero, for floats too (TensorFlow's
    /// `truncate_div_real`: `7.5 / 2` is `3`).
    fn truncdiv(self, o: Self) -> Self;
    fn floordiv(self, o: Self) -> Self;
    fn floormod(self, o: Self) -> Self;
    fn truncmod(self, o: Self) -> Self;
    fn maximum(self, o: Self) -> Self;
    fn minimum(self, o: Self) -> Self;
    fn pow(self, o: Self) -> Self;
    fn neg(self) -> Self;
    fn abs(self) -> Self;
    fn sign(self) -> Self;
    fn lowest() -> Self;
    fn highest() -> Self;
    fn is_negative(self) -> bool;
}

macro_rules! int_arith {
    ($t:ty) => {
        impl TfArith for $t {
            const IS_INT: bool = true;
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn sub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn div(self, o: Self) -> Self {
                self.wrapping_div(o)
            }
            fn truncdiv(self, o: Self) -> Self {
                self.wrapping_div(o)
            }
            fn floordiv(self, o: Self) -> Self {
                let q = self.wrapping_div(o);
                if self.wrapping_rem(o) != 0 && ((self < 0) != (o < 0)) {
                    q.wrapping_sub(1)
                } else {
                    q
                }
            }
            fn floormod(self, o: Self) -> Self {
                let r = self.wrapping_rem(o);
                if r != 0 && ((r < 0) != (o < 0)) {
                    r.wrapping_add(o)
                } else {
                    r
                }
            }
            fn truncmod(self, o: Self) -> Self {
                self.wrapping_rem(o)
            }
            fn maximum(self, o: Self) -> Self {
                self.max(o)
            }
            fn minimum(self, o: Self) -> Self {
                self.min(o)
            }
            fn pow(self, o: Self) -> Self {
                // Exponentiation by squaring, wrapping; callers rule out negative exponents.
                let (mut base, mut e, mut acc) = (self, o, 1 as $t);
                while e > 0 {
                    if e & 1 == 1 {
                        acc = acc.wrapping_mul(base);
                    }
                    base = base.wrapping_mul(base);
                    e >>= 1;
                }
                acc
            }
            fn neg(self) -> Self {
                self.wrapping_neg()
            }
            fn abs(self) -> Self {
                self.wrapping_abs()
            }
            fn sign(self) -> Self {
                self.signum()
            }
            fn lowest() -> Self {
                <$t>::MIN
            }
            fn highest() -> Self {
                <$t>::MAX
            }
            fn is_negative(self) -> bool {
                self < 0
            }
        }
    };
}
int_arith!(i32);
int_arith!(i64);

macro_rules! float_arith {
    ($t:ty) => {
        impl TfArith for $t {
            const IS_INT: bool = false;
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
            fn truncdiv(self, o: Self) -> Self {
                (self / o).trunc()
            }
            fn floordiv(self, o: Self) -> Self {
                (self / o).floor()
            }
            fn floormod(self, o: Self) -> Self {
                let r = self % o;
                if r != 0.0 && ((o < 0.0) != (r < 0.0)) {
                    r + o
                } else {
                    r
                }
            }
            fn truncmod(self, o: Self) -> Self {
                self % o
            }
            fn maximum(self, o: Self) -> Self {
                // TensorFlow's vectorised kernels (Eigen's packet max): the second
                // operand on a tie, so max(+0, -0) = -0; NaN propagates.
                if self.is_nan() || o.is_nan() {
                    <$t>::NAN
                } else if self > o {
                    self
                } else {
                    o
                }
            }
            fn minimum(self, o: Self) -> Self {
                // The second operand on a tie, as `maximum`.
                if self.is_nan() || o.is_nan() {
                    <$t>::NAN
                } else if self < o {
                    self
                } else {
                    o
                }
            }
            fn pow(self, o: Self) -> Self {
                self.powf(o)
            }
            fn neg(self) -> Self {
                -self
            }
            fn abs(self) -> Self {
                self.abs()
            }
            fn sign(self) -> Self {
                if self > 0.0 {
                    1.0
                } else if self < 0.0 {
                    -1.0
                } else {
                    self
                }
            }
            fn lowest() -> Self {
                <$t>::NEG_INFINITY
            }
            fn highest() -> Self {
                <$t>::INFINITY
            }
            fn is_negative(self) -> bool {
                self < 0.0
            }
        }
    };
}
float_arith!(f32);
float_arith!(f64);
