//! Special functions of one real variable that neither `std` nor `libm` provides, for the
//! elementwise kernels `Digamma`, `Ndtri` and `Erfinv` (`tf.math.digamma`, `tf.math.ndtri`,
//! `tf.math.erfinv`: probability-distribution log-likelihoods, Gamma and Poisson losses,
//! quantile transforms). Each is computed in float64 to near full precision and the
//! float32 kernels round once, so they are never less accurate than TensorFlow's (whose
//! float32 `Digamma` is off by a few ulps near its root). Edge cases are TensorFlow's:
//! `digamma` is NaN at the poles 0, −1, −2, … and at −∞; `ndtri` is ∓∞ at 0 and 1 and NaN
//! outside [0, 1]; `erfinv` is ±∞ at ±1 and NaN outside [−1, 1].

use std::f64::consts::{FRAC_2_SQRT_PI, PI, SQRT_2};

/// ψ(x) = Γ′(x)/Γ(x), by the reflection formula below 0, the recurrence ψ(x) = ψ(x+1) − 1/x
/// up to 10 and the asymptotic series beyond (Cephes' `psi`).
pub(crate) fn digamma(x: f64) -> f64 {
    if x.is_nan() || x == f64::NEG_INFINITY {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return x;
    }
    let mut x = x;
    let mut reflection = None;
    if x <= 0.0 {
        let floor = x.floor();
        if x == floor {
            return f64::NAN;
        }
        // ψ(x) = ψ(1 − x) − π·cot(πx), with πx reduced to (−π/2, π/2] by cot's period.
        let mut frac = x - floor;
        if frac > 0.5 {
            frac = x - (floor + 1.0);
        }
        reflection = Some(if frac == 0.5 { 0.0 } else { PI / (PI * frac).tan() });
        x = 1.0 - x;
    }
    let mut w = 0.0;
    while x < 10.0 {
        w += 1.0 / x;
        x += 1.0;
    }
    // ln x − 1/(2x) − Σ B₂ₖ/(2k·x²ᵏ).
    const A: [f64; 7] = [
        8.333_333_333_333_333e-2,
        -2.109_279_609_279_609e-2,
        7.575_757_575_757_576e-3,
        -4.166_666_666_666_667e-3,
        3.968_253_968_253_968e-3,
        -8.333_333_333_333_333e-3,
        8.333_333_333_333_333e-2,
    ];
    let series = if x < 1e17 {
        let z = 1.0 / (x * x);
        z * A.iter().fold(0.0, |acc, &a| acc * z + a)
    } else {
        0.0
    };
    let y = x.ln() - 0.5 / x - series - w;
    y - reflection.unwrap_or(0.0)
}

/// The standard normal quantile Φ⁻¹(p): Acklam's rational approximation (relative error
/// below 1.2·10⁻⁹), refined by two Halley steps on Φ(x) − p computed through `erfc`, on
/// the lower half (the upper half by symmetry).
pub(crate) fn ndtri(p: f64) -> f64 {
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    if p > 0.5 {
        // Φ(x) − p cancels near 1; 1 − p is exact here (Sterbenz), and Φ⁻¹ is odd about ½.
        return -ndtri(1.0 - p);
    }
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] =
        [7.784_695_709_041_462e-3, 3.224_671_290_700_398e-1, 2.445_134_137_142_996, 3.754_408_661_907_416];
    let poly = |c: &[f64], x: f64| c.iter().fold(0.0, |acc, &k| acc * x + k);
    let tail = |q: f64| {
        let r = (-2.0 * q.ln()).sqrt();
        poly(&C, r) / (poly(&D, r) * r + 1.0)
    };
    const LOW: f64 = 0.024_25;
    let mut x = if p < LOW {
        tail(p)
    } else {
        let q = p - 0.5;
        let r = q * q;
        q * poly(&A, r) / (poly(&B, r) * r + 1.0)
    };
    for _ in 0..2 {
        // Φ(x) − p, with Φ(x) = erfc(−x/√2)/2 accurate in both tails.
        let e = 0.5 * libm::erfc(-x / SQRT_2) - p;
        let u = e * (2.0 * PI).sqrt() * (x * x / 2.0).exp();
        let step = u / (1.0 + x * u / 2.0);
        if !step.is_finite() {
            break;
        }
        x -= step;
    }
    x
}

/// erf⁻¹(y) = Φ⁻¹((y + 1)/2)/√2, refined by two Newton steps on erf(x) − y (through `erfc`
/// near ±1, so the steps keep their relative precision at both ends).
pub(crate) fn erfinv(y: f64) -> f64 {
    if y.is_nan() || !(-1.0..=1.0).contains(&y) {
        return f64::NAN;
    }
    if y.abs() == 1.0 {
        return y * f64::INFINITY;
    }
    let mut x = ndtri((y + 1.0) / 2.0) / SQRT_2;
    for _ in 0..2 {
        let e = if y.abs() <= 0.5 {
            libm::erf(x) - y
        } else if y > 0.0 {
            (1.0 - y) - libm::erfc(x)
        } else {
            libm::erfc(-x) - (1.0 + y)
        };
        let step = e / (FRAC_2_SQRT_PI * (-x * x).exp());
        if !step.is_finite() {
            break;
        }
        x -= step;
    }
    x
}

#[cfg(test)]
#[allow(clippy::excessive_precision, clippy::approx_constant)] // TensorFlow's printed values
mod tests {
    use super::*;

    fn close(got: f64, want: f64, rel: f64) {
        let ok = (got.is_nan() && want.is_nan()) || got == want || (got - want).abs() <= rel * want.abs();
        assert!(ok, "{got} vs {want}");
    }

    // Expected values: TensorFlow 2.21's float64 kernels.

    #[test]
    fn digamma_matches_tensorflow() {
        let x = [-2.5, -0.5, 0.1, 0.5, 1.0, 2.0, 7.5, 30.0, 1e-3];
        let want = [
            1.1031566406452433,
            0.03648997397857645,
            -10.423754789263683,
            -1.9635100260214227,
            -0.5772156649015323,
            0.42278433509846747,
            1.946757484246087,
            3.384438132685525,
            -1000.5755244342834,
        ];
        for (x, w) in x.iter().zip(want) {
            close(digamma(*x as f32 as f64), w, 1e-14);
        }
        for pole in [0.0, -0.0, -1.0, -2.0, f64::NEG_INFINITY, f64::NAN] {
            assert!(digamma(pole).is_nan(), "{pole}");
        }
        assert_eq!(digamma(f64::INFINITY), f64::INFINITY);
    }

    #[test]
    fn ndtri_matches_tensorflow() {
        let p = [1e-30f32, 1e-6, 0.02, 0.3, 0.5, 0.7, 0.975, 0.999999];
        let want = [
            -11.464024688169063,
            -4.7534243093331225,
            -2.053748919864621,
            -0.5244004784222137,
            0.0,
            0.5244004784222137,
            1.9599643924763872,
            4.7507577546030335,
        ];
        for (p, w) in p.iter().zip(want) {
            close(ndtri(f64::from(*p)), w, 1e-14);
        }
        assert_eq!(ndtri(0.0), f64::NEG_INFINITY);
        assert_eq!(ndtri(1.0), f64::INFINITY);
        assert!(ndtri(-0.1).is_nan() && ndtri(1.1).is_nan() && ndtri(f64::NAN).is_nan());
        // Far in the lower tail, where the refinement must not overflow.
        close(ndtri(1e-300), -37.0470962993612, 1e-12);
    }

    #[test]
    fn erfinv_matches_tensorflow_and_inverts_erf() {
        let y = [-0.999f32, -0.5, 0.0, 0.3, 0.9, 0.99999];
        let want =
            [-2.326756326796155, -0.4769362762044699, 0.0, 0.2724627261055238, 1.1630870719457722, 3.123205771165071];
        for (y, w) in y.iter().zip(want) {
            close(erfinv(f64::from(*y)), w, 1e-14);
        }
        assert_eq!(erfinv(1.0), f64::INFINITY);
        assert_eq!(erfinv(-1.0), f64::NEG_INFINITY);
        assert!(erfinv(1.5).is_nan());
        for y in [1e-12, 1e-5, 0.25, -0.75, 0.999_999_9] {
            close(libm::erf(erfinv(y)), y, 1e-14);
        }
    }
}
