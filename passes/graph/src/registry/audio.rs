//! Schemas of the audio ops of TensorFlow's speech-commands front end (`audio_ops.cc`):
//! `DecodeWav` (a WAV string scalar to float samples `[samples, channels]` and an int32
//! sample rate), `AudioSpectrogram` (`[samples, channels]` to `[channels, frames,
//! fft_length / 2 + 1]`) and `Mfcc` (`[channels, frames, bins]` and a sample rate to
//! `[channels, frames, dct_coefficient_count]`).
//!
//! Shape functions follow TensorFlow 2.21's: `DecodeWav`'s dimensions are the desired ones
//! (unknown for -1, an error below); `AudioSpectrogram` rejects a window below 2 or a stride
//! below 1 and knows its frame count when the sample count is known; `Mfcc` wants a rank-3
//! spectrogram and a scalar rate. None of them is compiled: the JIT has no kernels for them.

use super::build::{arg, bool_attr_or, int_attr_or, pure_op, required};
use super::{AttrDefault, AttrKind, AttrSpec, InferCtx, OpFamily, OpSchema, TypeRule};
use crate::DType::{Float32, Int32, String as Str};
use crate::Shape;

type Shapes = Result<Vec<Shape>, String>;

const F32: TypeRule = TypeRule::Fixed(Float32);
const I32: TypeRule = TypeRule::Fixed(Int32);

/// Input `i`'s dimensions, checked to be `rank` of them (unknown: `None`s).
fn with_rank(c: &InferCtx<'_>, i: usize, rank: usize) -> Result<Vec<Option<i64>>, String> {
    match &c.shape(i).dims {
        None => Ok(vec![None; rank]),
        Some(d) if d.len() == rank => Ok(d.clone()),
        Some(d) => Err(format!("Shape must be rank {rank} but is rank {}", d.len())),
    }
}

/// `[desired_samples, desired_channels]` and a scalar.
fn decode_wav(c: &InferCtx<'_>) -> Shapes {
    with_rank(c, 0, 0)?;
    let dim = |name: &str, what: &str| match c.attr_int(name, -1) {
        -1 => Ok(None),
        d if d < 0 => Err(format!("{what} must be non-negative, got {d}")),
        d => Ok(Some(d)),
    };
    let channels = dim("desired_channels", "channels")?;
    let samples = dim("desired_samples", "samples")?;
    Ok(vec![Shape::with_dims(vec![samples, channels]), Shape::scalar()])
}

/// `[channels, 1 + (samples - window) / stride (0 if negative), next_pow2(window) / 2 + 1]`.
fn spectrogram(c: &InferCtx<'_>) -> Shapes {
    let dims = with_rank(c, 0, 2)?;
    let window = c.attr_int("window_size", 0);
    if window <= 1 {
        return Err(format!("window size must be > 1, got {window}"));
    }
    let stride = c.attr_int("stride", 0);
    if stride <= 0 {
        return Err(format!("stride must be strictly positive, got {stride}"));
    }
    let frames = dims[0].map(|n| if n < window { 0 } else { 1 + (n - window) / stride });
    let bins = (window as u64).next_power_of_two() as i64 / 2 + 1;
    Ok(vec![Shape::with_dims(vec![dims[1], frames, Some(bins)])])
}

/// `[channels, frames, dct_coefficient_count]`.
fn mfcc(c: &InferCtx<'_>) -> Shapes {
    let dims = with_rank(c, 0, 3)?;
    with_rank(c, 1, 0)?;
    let coefficients = c.attr_int("dct_coefficient_count", 13);
    Ok(vec![Shape::with_dims(vec![dims[0], dims[1], Some(coefficients)])])
}

const fn float_attr(name: &'static str) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Float, default: AttrDefault::Optional, allowed: None }
}

pub(super) static OPS: &[OpSchema] = &[
    pure_op(
        "DecodeWav",
        OpFamily::Shape,
        &[arg("contents", TypeRule::Fixed(Str))],
        &[arg("audio", F32), arg("sample_rate", I32)],
        &[int_attr_or("desired_channels", -1), int_attr_or("desired_samples", -1)],
        decode_wav,
    ),
    pure_op(
        "AudioSpectrogram",
        OpFamily::NeuralNet,
        &[arg("input", F32)],
        &[arg("spectrogram", F32)],
        &[
            required("window_size", AttrKind::Int),
            required("stride", AttrKind::Int),
            bool_attr_or("magnitude_squared", false),
        ],
        spectrogram,
    ),
    pure_op(
        "Mfcc",
        OpFamily::NeuralNet,
        &[arg("spectrogram", F32), arg("sample_rate", I32)],
        &[arg("output", F32)],
        &[
            float_attr("upper_frequency_limit"),
            float_attr("lower_frequency_limit"),
            int_attr_or("filterbank_channel_count", 40),
            int_attr_or("dct_coefficient_count", 13),
        ],
        mfcc,
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{lookup, InputFacts};
    use crate::AttrValue;

    fn infer(op: &str, attrs: &[(&str, AttrValue)], shapes: &[Shape]) -> Shapes {
        let node = crate::infer::testing::bare_node(op, attrs);
        let inputs: Vec<InputFacts<'_>> =
            shapes.iter().map(|s| InputFacts { dtype: None, shape: s, value: None, handle: None }).collect();
        let out_types = [Float32, Int32];
        lookup(op).unwrap().infer_shapes(&InferCtx { node: &node, inputs: &inputs, out_types: &out_types })
    }

    fn dims(d: &[Option<i64>]) -> Shape {
        Shape::with_dims(d.to_vec())
    }

    /// The static shapes TensorFlow 2.21 gives these ops in a graph.
    #[test]
    fn shapes_are_tensorflows() {
        let i = |name: &'static str, v: i64| (name, AttrValue::I(v));
        let wav = infer("DecodeWav", &[i("desired_channels", 1), i("desired_samples", 1600)], &[Shape::scalar()]);
        assert_eq!(wav.unwrap(), [Shape::known(&[1600, 1]), Shape::scalar()]);
        assert_eq!(infer("DecodeWav", &[], &[Shape::scalar()]).unwrap()[0], dims(&[None, None]));
        let e = infer("DecodeWav", &[i("desired_channels", -2)], &[Shape::scalar()]).unwrap_err();
        assert_eq!(e, "channels must be non-negative, got -2");
        assert!(infer("DecodeWav", &[], &[Shape::known(&[1])]).unwrap_err().contains("rank 0 but is rank 1"));
        let spec = |attrs: &[(&str, AttrValue)], s: Shape| infer("AudioSpectrogram", attrs, &[s]);
        let ws = |w: i64, s: i64| [i("window_size", w), i("stride", s)];
        assert_eq!(spec(&ws(64, 32), Shape::known(&[400, 2])).unwrap(), [Shape::known(&[2, 11, 33])]);
        assert_eq!(spec(&ws(100, 32), dims(&[None, Some(3)])).unwrap(), [dims(&[Some(3), None, Some(65)])]);
        assert_eq!(spec(&ws(100, 32), Shape::known(&[10, 3])).unwrap(), [Shape::known(&[3, 0, 65])]);
        assert_eq!(spec(&ws(1, 32), Shape::known(&[10, 3])).unwrap_err(), "window size must be > 1, got 1");
        assert_eq!(spec(&ws(4, 0), Shape::known(&[10, 3])).unwrap_err(), "stride must be strictly positive, got 0");
        assert!(spec(&ws(4, 2), Shape::known(&[3])).unwrap_err().contains("rank 2 but is rank 1"));
        let m = infer("Mfcc", &[], &[Shape::known(&[2, 11, 33]), Shape::scalar()]).unwrap();
        assert_eq!(m, [Shape::known(&[2, 11, 13])]);
        let m = infer("Mfcc", &[i("dct_coefficient_count", 5)], &[Shape::unknown(), Shape::unknown()]).unwrap();
        assert_eq!(m, [dims(&[None, None, Some(5)])]);
        let e = infer("Mfcc", &[], &[Shape::known(&[2, 11, 33]), Shape::known(&[1])]).unwrap_err();
        assert!(e.contains("rank 0 but is rank 1"), "{e}");
        assert!(infer("Mfcc", &[], &[Shape::known(&[3, 4]), Shape::scalar()]).unwrap_err().contains("rank 3"));
    }
}
