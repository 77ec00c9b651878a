//! Schemas of the complex-number and Fourier-transform ops (`math_ops.cc`, `spectral_ops.cc`):
//! `Complex`, `Real`, `Imag`, `ComplexAbs`, `Angle`, `Conj`, and `FFT`/`IFFT`, `RFFT`/`IRFFT`
//! over the innermost one, two or three dimensions — what `tf.signal.stft`, Keras'
//! `STFTSpectrogram`/`MelSpectrogram` layers and `tf.abs` of a complex tensor emit.
//!
//! Shape functions follow TensorFlow's: the complex transforms keep their input's shape;
//! `RFFT*` replaces the transformed dimensions by `fft_length` with the innermost halved
//! plus one (`fft_length[-1] / 2 + 1`), `IRFFT*` by `fft_length` itself, both unknown when
//! `fft_length` is not a known value. The input must have at least as many dimensions as
//! the transform has. Complex tensors are never compiled (the JIT has no complex type).

use super::build::{arg, pure_op, type_attr_or};
use super::shapes::broadcast_01;
use super::{ArgSpec, AttrSpec, InferCtx, OpFamily, OpSchema, ShapeFn, TypeRule};
use crate::DType::{Complex128, Complex64, Float32, Float64, Int32};
use crate::{Dim, Shape};

type Shapes = Result<Vec<Shape>, String>;

const REAL: &[crate::DType] = &[Float32, Float64];
const COMPLEX: &[crate::DType] = &[Complex64, Complex128];

/// The input's dimensions, checked to be at least `k`; `None` for an unknown rank.
fn dims_at_least(c: &InferCtx<'_>, k: usize) -> Result<Option<Vec<Dim>>, String> {
    match c.shape(0).dims.clone() {
        Some(d) if d.len() < k => Err(format!("input must have rank at least {k}, but has shape {}", c.shape(0))),
        d => Ok(d),
    }
}

/// `FFT*`/`IFFT*`: the input's shape (of rank at least `k`).
fn complex_transform<const K: usize>(c: &InferCtx<'_>) -> Shapes {
    dims_at_least(c, K)?;
    Ok(vec![c.shape(0).clone()])
}

/// The `fft_length` operand's `k` lengths, when known; checked non-negative.
fn fft_lengths(c: &InferCtx<'_>, k: usize) -> Result<Option<Vec<i64>>, String> {
    if c.shape(1).rank().is_some_and(|r| r != 1) {
        return Err(format!("fft_length must be a vector, but has shape {}", c.shape(1)));
    }
    match c.known_value(1) {
        Some(v) if v.len() != k => Err(format!("fft_length must have {k} elements, but has {}", v.len())),
        Some(v) if v.iter().any(|&x| x < 0) => Err(format!("fft_length must not be negative, but is {v:?}")),
        v => Ok(v),
    }
}

/// `RFFT*` (`inverse`: `IRFFT*`) over the innermost `k` dimensions.
fn real_transform(c: &InferCtx<'_>, k: usize, inverse: bool) -> Shapes {
    let Some(mut dims) = dims_at_least(c, k)? else { return Ok(vec![Shape::unknown()]) };
    let lengths = fft_lengths(c, k)?;
    let r = dims.len();
    for i in 0..k {
        dims[r - k + i] = lengths.as_ref().map(|l| if i + 1 == k && !inverse { l[i] / 2 + 1 } else { l[i] });
    }
    Ok(vec![Shape::with_dims(dims)])
}

fn rfft<const K: usize>(c: &InferCtx<'_>) -> Shapes {
    real_transform(c, K, false)
}

fn irfft<const K: usize>(c: &InferCtx<'_>) -> Shapes {
    real_transform(c, K, true)
}

fn same(c: &InferCtx<'_>) -> Shapes {
    Ok(vec![c.shape(0).clone()])
}

const TREAL: TypeRule = TypeRule::Attr("Treal");
const TCOMPLEX: TypeRule = TypeRule::Attr("Tcomplex");
const T: TypeRule = TypeRule::Attr("T");
const TOUT: TypeRule = TypeRule::Attr("Tout");
const REAL_ATTRS: &[AttrSpec] = &[type_attr_or("Treal", Float32, REAL), type_attr_or("Tcomplex", Complex64, COMPLEX)];
const COMPLEX_ATTRS: &[AttrSpec] = &[type_attr_or("Tcomplex", Complex64, COMPLEX)];
/// `Real`, `Imag`, `ComplexAbs`, `Angle`: complex `T` in, real `Tout` out.
const PART_ATTRS: &[AttrSpec] = &[type_attr_or("T", Complex64, COMPLEX), type_attr_or("Tout", Float32, REAL)];

const COMPLEX_IN: &[ArgSpec] = &[arg("input", TCOMPLEX)];
const COMPLEX_OUT: &[ArgSpec] = &[arg("output", TCOMPLEX)];
const REAL_IN: &[ArgSpec] = &[arg("input", TREAL), arg("fft_length", TypeRule::Fixed(Int32))];
const REAL_OUT: &[ArgSpec] = &[arg("output", TREAL)];
const COMPLEX_LEN_IN: &[ArgSpec] = &[arg("input", TCOMPLEX), arg("fft_length", TypeRule::Fixed(Int32))];
const T_IN: &[ArgSpec] = &[arg("input", T)];
const T_OUT: &[ArgSpec] = &[arg("output", T)];
const TOUT_OUT: &[ArgSpec] = &[arg("output", TOUT)];

const fn complex_op(name: &'static str, shape_fn: ShapeFn) -> OpSchema {
    pure_op(name, OpFamily::NeuralNet, COMPLEX_IN, COMPLEX_OUT, COMPLEX_ATTRS, shape_fn)
}

const fn part(name: &'static str) -> OpSchema {
    pure_op(name, OpFamily::Unary, T_IN, TOUT_OUT, PART_ATTRS, same)
}

pub(super) static OPS: &[OpSchema] = &[
    complex_op("FFT", complex_transform::<1>),
    complex_op("IFFT", complex_transform::<1>),
    complex_op("FFT2D", complex_transform::<2>),
    complex_op("IFFT2D", complex_transform::<2>),
    complex_op("FFT3D", complex_transform::<3>),
    complex_op("IFFT3D", complex_transform::<3>),
    pure_op("RFFT", OpFamily::NeuralNet, REAL_IN, COMPLEX_OUT, REAL_ATTRS, rfft::<1>),
    pure_op("RFFT2D", OpFamily::NeuralNet, REAL_IN, COMPLEX_OUT, REAL_ATTRS, rfft::<2>),
    pure_op("RFFT3D", OpFamily::NeuralNet, REAL_IN, COMPLEX_OUT, REAL_ATTRS, rfft::<3>),
    pure_op("IRFFT", OpFamily::NeuralNet, COMPLEX_LEN_IN, REAL_OUT, REAL_ATTRS, irfft::<1>),
    pure_op("IRFFT2D", OpFamily::NeuralNet, COMPLEX_LEN_IN, REAL_OUT, REAL_ATTRS, irfft::<2>),
    pure_op("IRFFT3D", OpFamily::NeuralNet, COMPLEX_LEN_IN, REAL_OUT, REAL_ATTRS, irfft::<3>),
    pure_op(
        "Complex",
        OpFamily::Binary,
        &[arg("real", T), arg("imag", T)],
        &[arg("out", TOUT)],
        &[type_attr_or("T", Float32, REAL), type_attr_or("Tout", Complex64, COMPLEX)],
        broadcast_01,
    ),
    part("Real"),
    part("Imag"),
    part("ComplexAbs"),
    part("Angle"),
    pure_op("Conj", OpFamily::Unary, T_IN, T_OUT, &[type_attr_or("T", Complex64, COMPLEX)], same),
];

#[cfg(test)]
mod tests {
    use crate::infer::testing::{shape_of, ty, Builder};
    use crate::DType::{Complex64, Float32};

    fn rfft(b: &mut Builder, name: &str, op: &str, x: &str, len: &str) {
        b.node(name, op, &[x, len], &[("Treal", ty(Float32)), ("Tcomplex", ty(Complex64))]);
    }

    #[test]
    fn real_transforms_replace_the_transformed_lengths() {
        let mut b = Builder::new();
        b.input("x", Float32, Some(&[2, 5, 400])).input("c", Complex64, Some(&[3, 8, 5]));
        b.const_i32("l512", &[1], &[512]).const_i32("l88", &[2], &[8, 8]).const_i32("l447", &[3], &[4, 4, 7]);
        b.input("dyn", crate::DType::Int32, Some(&[1]));
        rfft(&mut b, "r", "RFFT", "x", "l512");
        rfft(&mut b, "i2", "IRFFT2D", "c", "l88");
        rfft(&mut b, "r3", "RFFT3D", "x", "l447");
        rfft(&mut b, "rd", "RFFT", "x", "dyn");
        b.node("f", "FFT2D", &["c"], &[("Tcomplex", ty(Complex64))]);
        b.node("abs", "ComplexAbs", &["f"], &[("T", ty(Complex64)), ("Tout", ty(Float32))]);
        assert_eq!(shape_of(&b, "r"), "[2,5,257]");
        assert_eq!(shape_of(&b, "i2"), "[3,8,8]");
        assert_eq!(shape_of(&b, "r3"), "[4,4,4]");
        assert_eq!(shape_of(&b, "rd"), "[2,5,?]");
        assert_eq!(shape_of(&b, "abs"), "[3,8,5]");
        let mut bad = Builder { raw: b.raw.clone(), ..Builder::default() };
        rfft(&mut bad, "oops", "RFFT", "x", "l88");
        let e = shape_of(&bad, "oops");
        assert!(e.contains("fft_length must have 1 elements"), "{e}");
        let mut bad = Builder { raw: b.raw.clone(), ..Builder::default() };
        bad.input("v", Float32, Some(&[5]));
        rfft(&mut bad, "low", "RFFT2D", "v", "l88");
        let e = shape_of(&bad, "low");
        assert!(e.contains("rank at least 2"), "{e}");
    }
}
