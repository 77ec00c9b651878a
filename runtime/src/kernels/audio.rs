//! The audio ops of TensorFlow's speech-commands front end (`audio_ops.cc`), with the
//! algorithms of TensorFlow's CPU kernels:
//! - `DecodeWav` (`decode_wav_op.cc`, `wav_io.cc`): a 16-bit PCM RIFF/WAVE file to float
//!   samples `[samples, channels]` (each `int16 / 32768`) and its sample rate. The chunks are
//!   read as TensorFlow reads them: `JUNK`, `bext`, `iXML`, `qlty`, `mext`, `levl`, `link` and
//!   `axml` chunks may come before `fmt `, whose size must be 16 or 18; after it every chunk
//!   but the single `data` one is skipped (by its stated size, unpadded). `desired_samples`
//!   crops or pads with zeros, `desired_channels` drops channels or repeats the last one.
//!   Malformed files fail with TensorFlow's messages.
//! - `AudioSpectrogram` (`spectrogram_op.cc`, `spectrogram.cc`): per channel, frames of
//!   `window_size` samples every `stride` samples (`1 + (samples - window_size) / stride`
//!   of them, none when the input is shorter than a window), each multiplied in float64 by
//!   the periodic Hann window, zero-padded to the next power of two and transformed
//!   ([`super::spectral::real_fft`], float64); the squared magnitude `re² + im²` is rounded
//!   to float32, and square-rooted in float32 unless `magnitude_squared`. TensorFlow's
//!   transform is Ooura's real FFT, whose float64 rounding differs from this one's, so a bin
//!   can differ from TensorFlow's in its last float32 bit.
//! - `Mfcc` (`mfcc_op.cc`, `mfcc.cc`, `mfcc_mel_filterbank.cc`, `mfcc_dct.cc`): per frame, in
//!   float64 as TensorFlow computes it, the square roots of the bins summed under HTK-style
//!   triangular mel filters (TensorFlow's band mapping and weights: the DC bin excluded, each
//!   bin between two centres split between their channels), each band's log (floored at
//!   1e-12), then the first `dct_coefficient_count` coefficients of TensorFlow's orthonormal
//!   DCT-II table; rounded to float32 once. When `upper_frequency_limit` lies above the
//!   spectrogram's last bin TensorFlow's filterbank declines the frame and its coefficients
//!   are all zero; so are they here.
//!
//! TensorFlow 2.21 does not check `window_size` and `stride` before building its spectrogram:
//! a window below 2 or a stride below 1 fails as "Spectrogram initialization failed …" (a
//! negative window crashes TensorFlow's process; here it fails with the same message).

use autoclust_graph::{DType, Node, Tensor, TensorData};

use super::shape_ops::debug_shape;
use super::spectral::real_fft;
use super::string::strings;
use super::{arity, attr_bool_or, attr_float_or, budget, tensor_of, Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

/// The kernel, or `None` if `node` is not one of the audio ops.
pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    match node.op.as_str() {
        "DecodeWav" => {
            let channels = int32_attr(node, "desired_channels", Some(-1))?;
            let samples = int32_attr(node, "desired_samples", Some(-1))?;
            Ok(Some(Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                decode_wav(&inp[0], channels, samples)
            })))
        }
        "AudioSpectrogram" => {
            let window = int32_attr(node, "window_size", None)?;
            let stride = int32_attr(node, "stride", None)?;
            let squared = attr_bool_or(node, "magnitude_squared", false)?;
            Ok(Some(Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                spectrogram(&inp[0], window, stride, squared)
            })))
        }
        "Mfcc" => {
            let config = MfccConfig {
                upper: attr_float_or(node, "upper_frequency_limit", 4000.0)? as f64,
                lower: attr_float_or(node, "lower_frequency_limit", 20.0)? as f64,
                filterbank_channels: int32_attr(node, "filterbank_channel_count", Some(40))?,
                dct_coefficients: int32_attr(node, "dct_coefficient_count", Some(13))?,
            };
            Ok(Some(Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                mfcc(&inp[0], &inp[1], &config)
            })))
        }
        _ => Ok(None),
    }
}

/// An `int` attribute the kernel reads as `int32`, as TensorFlow's `GetAttr` does (with its
/// error for a value out of range); `default` for an optional one.
fn int32_attr(node: &Node, name: &str, default: Option<i32>) -> KResult<i32> {
    let v = match (node.attr(name), default) {
        (None, Some(d)) => return Ok(d),
        (None, None) => return Err(KernelError::Attr(name.into())),
        (Some(a), _) => a.as_int().ok_or_else(|| KernelError::Attr(name.into()))?,
    };
    i32::try_from(v).map_err(|_| KernelError::invalid(format!("Attr {name} has value {v} out of range for an int32")))
}

fn invalid<T>(msg: String) -> KResult<T> {
    Err(KernelError::invalid(msg))
}

fn f32_values(t: &Tensor) -> KResult<&[f32]> {
    t.as_f32().ok_or(KernelError::DType(t.dtype))
}

// ------------------------------------------------------------------ DecodeWav

/// A WAV file's header fields and samples.
struct Wav {
    channels: u16,
    sample_rate: u32,
    /// Samples per channel.
    frames: u32,
    /// Interleaved, `frames * channels` of them.
    samples: Vec<f32>,
}

/// Reads a byte string front to back, as `wav_io.cc`'s `ReadValue`/`ReadString` do.
struct Reader<'a> {
    data: &'a [u8],
    offset: u64,
}

impl<'a> Reader<'a> {
    /// Moves on by `n` bytes (TensorFlow's `IncrementOffset`), returning where it was.
    fn advance(&mut self, n: u64) -> KResult<usize> {
        let len = self.data.len() as u64;
        if self.offset > len {
            return invalid(format!("Initial offset is outside data range: {}", self.offset));
        }
        if self.offset + n > len {
            return invalid("Data too short when trying to read string".into());
        }
        let at = self.offset as usize;
        self.offset += n;
        Ok(at)
    }

    fn bytes(&mut self, n: usize) -> KResult<&'a [u8]> {
        let at = self.advance(n as u64)?;
        Ok(&self.data[at..at + n])
    }

    fn u16(&mut self) -> KResult<u16> {
        let b = self.bytes(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> KResult<u32> {
        let b = self.bytes(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Four bytes that must be `want` ("Header mismatch" otherwise).
    fn expect(&mut self, want: &[u8; 4]) -> KResult<()> {
        let found = self.bytes(4)?;
        if found != want {
            return invalid(format!("Header mismatch: Expected {} but found {}", text(want), text(found)));
        }
        Ok(())
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Chunks TensorFlow skips between `WAVE` and `fmt `.
const SKIPPED_BEFORE_FORMAT: [&[u8; 4]; 8] = [b"JUNK", b"bext", b"iXML", b"qlty", b"mext", b"levl", b"link", b"axml"];

/// `DecodeLin16WaveAsFloatVector`.
fn parse_wav(data: &[u8]) -> KResult<Wav> {
    let mut r = Reader { data, offset: 0 };
    r.expect(b"RIFF")?;
    r.u32()?; // the file size, not checked
    r.expect(b"WAVE")?;
    let mut id = r.bytes(4)?;
    while id != b"fmt " {
        if !SKIPPED_BEFORE_FORMAT.iter().any(|s| s == &id) {
            return invalid(format!("Unexpected field {}", text(id)));
        }
        let size = r.u32()?;
        r.advance(size as u64)?;
        id = r.bytes(4)?;
    }
    let format_size = r.u32()?;
    if format_size != 16 && format_size != 18 {
        return invalid(format!("Bad format chunk size for WAV: Expected 16 or 18, but got{format_size}"));
    }
    let audio_format = r.u16()?;
    if audio_format != 1 {
        return invalid(format!("Bad audio format for WAV: Expected 1 (PCM), but got{audio_format}"));
    }
    let channels = r.u16()?;
    if channels < 1 {
        return invalid(format!("Bad number of channels for WAV: Expected at least 1, but got {channels}"));
    }
    let sample_rate = r.u32()?;
    let bytes_per_second = r.u32()?;
    let bytes_per_sample = r.u16()?;
    let bits_per_sample = r.u16()?;
    if bits_per_sample != 16 {
        return invalid(format!("Can only read 16-bit WAV files, but received {bits_per_sample}"));
    }
    let expected_bytes_per_sample = (bits_per_sample as u32 * channels as u32).div_ceil(8);
    if bytes_per_sample as u32 != expected_bytes_per_sample {
        return invalid(format!(
            "Bad bytes per sample in WAV header: Expected {expected_bytes_per_sample} but got {bytes_per_sample}"
        ));
    }
    let expected_bytes_per_second = bytes_per_sample as u64 * sample_rate as u64;
    if bytes_per_second as u64 != expected_bytes_per_second {
        return invalid(format!(
            "Bad bytes per second in WAV header: Expected {expected_bytes_per_second} but got {bytes_per_second} \
             (sample_rate={sample_rate}, bytes_per_sample={bytes_per_sample})"
        ));
    }
    if format_size == 18 {
        r.offset += 2; // unused
    }
    let mut wav: Option<Wav> = None;
    while r.offset < data.len() as u64 {
        let id = r.bytes(4)?;
        let size = r.u32()?;
        if size > i32::MAX as u32 {
            return invalid(format!(
                "WAV data chunk '{}' is too large: {size} bytes, but the limit is {}",
                text(id),
                i32::MAX
            ));
        }
        if id != b"data" {
            r.offset += size as u64;
            continue;
        }
        if wav.is_some() {
            return invalid("More than one data chunk found in WAV".into());
        }
        let frames = size / bytes_per_sample as u32;
        let count = frames as usize * channels as usize;
        let at = r.advance(2 * count as u64)?;
        let samples = data[at..at + 2 * count]
            .chunks_exact(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]) as f32 * (1.0 / 32768.0))
            .collect();
        wav = Some(Wav { channels, sample_rate, frames, samples });
    }
    wav.ok_or_else(|| KernelError::invalid("No data chunk found in WAV"))
}

fn decode_wav(contents: &Tensor, desired_channels: i32, desired_samples: i32) -> KResult<Outputs> {
    if contents.rank() != 0 {
        return invalid(format!("contents must be scalar, got shape {}", debug_shape(&contents.shape)));
    }
    let bytes = &strings(contents, "contents")?[0];
    if bytes.len() > i32::MAX as usize {
        return invalid(format!("WAV contents are too large for int: {}", bytes.len()));
    }
    let wav = parse_wav(bytes)?;
    if desired_channels < -1 {
        return invalid(format!("desired_channels must be >= -1, got {desired_channels}"));
    }
    if desired_samples < -1 {
        return invalid(format!("desired_samples must be >= -1, got {desired_samples}"));
    }
    // TensorFlow's counts are int32: a count read from the file wraps as it does.
    let out_samples = if desired_samples == -1 { wav.frames as i32 } else { desired_samples };
    let out_channels = if desired_channels == -1 { wav.channels as i32 } else { desired_channels };
    if out_samples < 0 {
        return invalid(format!("Output sample count must be >= 0, got {out_samples}"));
    }
    if out_channels < 0 {
        return invalid(format!("Output channel count must be >= 0, got {out_channels}"));
    }
    let shape = vec![out_samples as usize, out_channels as usize];
    budget(DType::Float32, &shape)?;
    let (have, width) = (wav.frames as usize, wav.channels as usize);
    let mut audio = Vec::with_capacity(shape[0] * shape[1]);
    for s in 0..shape[0] {
        for c in 0..shape[1] {
            audio.push(if s < have { wav.samples[s * width + c.min(width - 1)] } else { 0.0 });
        }
    }
    let mut out = Outputs::new();
    out.push(tensor_of(shape, audio));
    out.push(tensor_of(Vec::new(), vec![wav.sample_rate as i32]));
    Ok(out)
}

// ------------------------------------------------------------------ AudioSpectrogram

/// The periodic Hann window of `n` samples, as `spectrogram.cc` computes it.
fn periodic_hann(n: usize) -> Vec<f64> {
    let pi = 1f64.atan() * 4.0;
    (0..n).map(|i| 0.5 - 0.5 * ((2.0 * pi * i as f64) / n as f64).cos()).collect()
}

fn spectrogram(input: &Tensor, window: i32, stride: i32, squared: bool) -> KResult<Outputs> {
    let x = f32_values(input)?;
    if input.rank() != 2 {
        return invalid(format!("input must be 2-dimensional{}", debug_shape(&input.shape)));
    }
    if window < 2 || stride < 1 {
        return invalid(format!("Spectrogram initialization failed for window size {window} and stride {stride}"));
    }
    let (window, stride) = (window as usize, stride as usize);
    let fft_length = window.next_power_of_two();
    let width = fft_length / 2 + 1;
    let (samples, channels) = (input.shape[0], input.shape[1]);
    let frames = if samples < window { 0 } else { 1 + (samples - window) / stride };
    let shape = vec![channels, frames, width];
    budget(DType::Float32, &shape)?;
    let rows = channels * frames;
    if rows == 0 {
        return Ok(Outputs::from_iter([tensor_of(shape, Vec::<f32>::new())]));
    }
    budget(DType::Float64, &[rows, fft_length])?;
    let hann = periodic_hann(window);
    let mut windowed = vec![0f64; rows * fft_length];
    for c in 0..channels {
        for f in 0..frames {
            let row = &mut windowed[(c * frames + f) * fft_length..][..window];
            for (j, (v, w)) in row.iter_mut().zip(&hann).enumerate() {
                *v = x[(f * stride + j) * channels + c] as f64 * w;
            }
        }
    }
    let spectrum = real_fft(&tensor_of(vec![rows, fft_length], windowed), &[fft_length], DType::Complex128)?;
    let TensorData::Raw(bytes) = &spectrum.data else { return Err(KernelError::DType(spectrum.dtype)) };
    let out: Vec<f32> = bytes
        .chunks_exact(16)
        .map(|b| {
            let re = f64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
            let im = f64::from_le_bytes(b[8..].try_into().expect("8 bytes"));
            let power = (re * re + im * im) as f32;
            if squared {
                power
            } else {
                power.sqrt()
            }
        })
        .collect();
    debug_assert_eq!(out.len(), rows * width);
    Ok(Outputs::from_iter([tensor_of(shape, out)]))
}

// ------------------------------------------------------------------ Mfcc

struct MfccConfig {
    upper: f64,
    lower: f64,
    filterbank_channels: i32,
    dct_coefficients: i32,
}

/// C++'s `static_cast<int>` of a double as x86-64 computes it: truncation, and `INT_MIN` for
/// NaN or a value out of range.
fn c_int(x: f64) -> i32 {
    if x > -2147483649.0 && x < 2147483648.0 {
        x as i32
    } else {
        i32::MIN
    }
}

fn freq_to_mel(freq: f64) -> f64 {
    1127.0 * (freq / 700.0).ln_1p()
}

/// `MfccMelFilterbank`: for each bin in `start..=end`, the channel whose triangle's right
/// side it lies on (-1: left of the first centre) and its weight there.
struct MelFilterbank {
    channels: usize,
    start: i32,
    end: i32,
    band: Vec<i32>,
    weights: Vec<f64>,
}

impl MelFilterbank {
    /// `Initialize`: `None` where TensorFlow's fails.
    fn new(bins: i32, sample_rate: f64, channels: i32, lower: f64, upper: f64) -> Option<MelFilterbank> {
        if channels < 1 || sample_rate <= 0.0 || bins < 2 || lower < 0.0 || upper <= lower {
            return None;
        }
        let n = channels as usize;
        let mel_low = freq_to_mel(lower);
        let mel_spacing = (freq_to_mel(upper) - mel_low) / (n + 1) as f64;
        let centres: Vec<f64> = (0..=n).map(|i| mel_low + mel_spacing * (i + 1) as f64).collect();
        let hz_per_bin = 0.5 * sample_rate / (bins - 1) as f64;
        let start = c_int(1.5 + lower / hz_per_bin);
        let end = c_int(upper / hz_per_bin);
        let unused = |i: i32| i < start || i > end;
        let mut band = Vec::with_capacity(bins as usize);
        let mut channel = 0usize;
        for i in 0..bins {
            if unused(i) {
                band.push(-2);
                continue;
            }
            let mel = freq_to_mel(i as f64 * hz_per_bin);
            while channel < n && centres[channel] < mel {
                channel += 1;
            }
            band.push(channel as i32 - 1);
        }
        let weights = (0..bins)
            .map(|i| {
                let c = band[i as usize];
                let mel = || freq_to_mel(i as f64 * hz_per_bin);
                if unused(i) {
                    0.0
                } else if c >= 0 {
                    let c = c as usize;
                    (centres[c + 1] - mel()) / (centres[c + 1] - centres[c])
                } else {
                    (centres[0] - mel()) / (centres[0] - mel_low)
                }
            })
            .collect();
        Some(MelFilterbank { channels: n, start, end, band, weights })
    }

    /// `Compute`: the channels' sums, or `None` (TensorFlow logs an error and leaves its
    /// output empty) when the spectrum has no bin `end`.
    fn compute(&self, spectrum: &[f64]) -> Option<Vec<f64>> {
        if self.end < 0 || spectrum.len() <= self.end as usize {
            return None;
        }
        let mut out = vec![0.0; self.channels];
        // `start` is at least 1 unless the lower limit is NaN (TensorFlow then reads before
        // the spectrum); clamped here.
        let bins = spectrum.iter().zip(&self.weights).zip(&self.band);
        for ((power, weight), &channel) in bins.take(self.end as usize + 1).skip(self.start.max(0) as usize) {
            let value = power.sqrt();
            let weighted = value * weight;
            if channel >= 0 {
                out[channel as usize] += weighted;
            }
            let next = (channel + 1) as usize;
            if next < self.channels {
                out[next] += value - weighted;
            }
        }
        Some(out)
    }
}

/// `MfccDct`'s cosine table: `coefficients` rows of `inputs` entries.
fn dct_table(inputs: i32, coefficients: i32) -> Option<Vec<Vec<f64>>> {
    if coefficients < 1 || inputs < 1 || coefficients > inputs {
        return None;
    }
    let fnorm = (2.0 / inputs as f64).sqrt();
    let arg = 1f64.atan() * 4.0 / inputs as f64;
    Some(
        (0..coefficients)
            .map(|i| (0..inputs).map(|j| fnorm * (i as f64 * arg * (j as f64 + 0.5)).cos()).collect())
            .collect(),
    )
}

fn mfcc(spectrogram: &Tensor, sample_rate: &Tensor, config: &MfccConfig) -> KResult<Outputs> {
    let spec = f32_values(spectrogram)?;
    if spectrogram.rank() != 3 {
        return invalid(format!("spectrogram must be 3-dimensional{}", debug_shape(&spectrogram.shape)));
    }
    if sample_rate.rank() != 0 {
        return invalid(format!(
            "Input sample_rate should be a scalar tensor, got {} instead.",
            debug_shape(&sample_rate.shape)
        ));
    }
    let rate = sample_rate.as_i32().ok_or(KernelError::DType(sample_rate.dtype))?[0];
    let (audio_channels, frames, bins) = (spectrogram.shape[0], spectrogram.shape[1], spectrogram.shape[2]);
    let filterbank =
        MelFilterbank::new(bins as i32, rate as f64, config.filterbank_channels, config.lower, config.upper);
    let dct = dct_table(config.filterbank_channels, config.dct_coefficients);
    let (Some(filterbank), Some(dct)) = (filterbank, dct) else {
        return invalid(format!(
            "Mfcc initialization failed for channel count {bins}, sample rate {rate} and filterbank_channel_count {}",
            config.filterbank_channels
        ));
    };
    let coefficients = dct.len();
    let shape = vec![audio_channels, frames, coefficients];
    budget(DType::Float32, &shape)?;
    let mut out = Vec::with_capacity(audio_channels * frames * coefficients);
    for frame in spec.chunks_exact(bins.max(1)).take(audio_channels * frames) {
        let input: Vec<f64> = frame.iter().map(|&v| v as f64).collect();
        let logs: Vec<f64> = filterbank
            .compute(&input)
            .unwrap_or_default()
            .into_iter()
            .map(|v| if v < 1e-12 { 1e-12f64 } else { v }.ln())
            .collect();
        for row in &dct {
            out.push(row.iter().zip(&logs).fold(0.0, |sum, (c, l)| sum + c * l) as f32);
        }
    }
    Ok(Outputs::from_iter([tensor_of(shape, out)]))
}

#[cfg(test)]
mod tests {
    use autoclust_graph::AttrValue;

    use super::*;
    use crate::kernels::compute;
    use crate::kernels::tests_support::node;

    fn run(op: &str, attrs: &[(&str, AttrValue)], inputs: Vec<Tensor>) -> Result<Vec<Tensor>, String> {
        compute(&node(op, attrs), &inputs).map_err(|e| e.to_string())
    }

    /// A 16-bit PCM WAV file as `tf.audio.encode_wav` lays it out, with `pre` between `WAVE`
    /// and `fmt `, `post` after the data, and the header fields overridable.
    #[derive(Clone)]
    struct WavSpec {
        channels: u16,
        rate: u32,
        samples: Vec<i16>,
        format_size: u32,
        format: u16,
        bits: u16,
        bytes_per_sample: Option<u16>,
        bytes_per_second: Option<u32>,
        data_size: Option<u32>,
        pre: Vec<u8>,
        post: Vec<u8>,
    }

    impl WavSpec {
        fn new(channels: u16, rate: u32, samples: &[i16]) -> WavSpec {
            WavSpec {
                channels,
                rate,
                samples: samples.to_vec(),
                format_size: 16,
                format: 1,
                bits: 16,
                bytes_per_sample: None,
                bytes_per_second: None,
                data_size: None,
                pre: Vec::new(),
                post: Vec::new(),
            }
        }

        fn bytes(&self) -> Vec<u8> {
            let data: Vec<u8> = self.samples.iter().flat_map(|s| s.to_le_bytes()).collect();
            let bps = self.bytes_per_sample.unwrap_or(2 * self.channels);
            let mut body = b"WAVE".to_vec();
            body.extend_from_slice(&self.pre);
            body.extend_from_slice(b"fmt ");
            body.extend_from_slice(&self.format_size.to_le_bytes());
            body.extend_from_slice(&self.format.to_le_bytes());
            body.extend_from_slice(&self.channels.to_le_bytes());
            body.extend_from_slice(&self.rate.to_le_bytes());
            body.extend_from_slice(&self.bytes_per_second.unwrap_or(bps as u32 * self.rate).to_le_bytes());
            body.extend_from_slice(&bps.to_le_bytes());
            body.extend_from_slice(&self.bits.to_le_bytes());
            if self.format_size == 18 {
                body.extend_from_slice(&[0, 0]);
            }
            body.extend_from_slice(b"data");
            body.extend_from_slice(&self.data_size.unwrap_or(data.len() as u32).to_le_bytes());
            body.extend_from_slice(&data);
            body.extend_from_slice(&self.post);
            let mut file = b"RIFF".to_vec();
            file.extend_from_slice(&(body.len() as u32).to_le_bytes());
            file.extend_from_slice(&body);
            file
        }
    }

    fn decode(bytes: Vec<u8>, channels: i64, samples: i64) -> Result<(Vec<usize>, Vec<f32>, i32), String> {
        let attrs = [("desired_channels", AttrValue::I(channels)), ("desired_samples", AttrValue::I(samples))];
        let o = run("DecodeWav", &attrs, vec![Tensor::from_strings(vec![], vec![bytes]).unwrap()])?;
        Ok((o[0].shape.clone(), o[0].as_f32().unwrap().to_vec(), o[1].as_i32().unwrap()[0]))
    }

    const SAMPLES: [i16; 6] = [0, 1, -1, 32767, -32768, 12345];

    /// TensorFlow 2.21's `tf.audio.decode_wav` of the same bytes.
    #[test]
    fn wav_files_decode_as_tensorflow_decodes_them() {
        let stereo = WavSpec::new(2, 16000, &SAMPLES).bytes();
        // TensorFlow's values: 3.0517578125e-05, 0.999969482421875, 0.376739501953125.
        let (a, b, c) = (1.0 / 32768.0, 32767.0 / 32768.0, 12345.0 / 32768.0);
        assert_eq!(decode(stereo.clone(), -1, -1).unwrap(), (vec![3, 2], vec![0.0, a, -a, b, -1.0, c], 16000));
        assert_eq!(decode(stereo.clone(), 1, -1).unwrap(), (vec![3, 1], vec![0.0, -a, -1.0], 16000));
        // Channels past the file's repeat its last; samples past its end are zeros.
        let want = vec![0.0, a, a, -a, b, b, -1.0, c, c, 0.0, 0.0, 0.0];
        assert_eq!(decode(stereo.clone(), 3, 4).unwrap(), (vec![4, 3], want, 16000));
        assert_eq!(decode(stereo.clone(), -1, 2).unwrap(), (vec![2, 2], vec![0.0, a, -a, b], 16000));
        assert_eq!(decode(stereo, 0, -1).unwrap(), (vec![3, 0], vec![], 16000));
        // A JUNK chunk before `fmt `, an 18-byte format chunk, a chunk after the data (its
        // stated size past the end of the file) are all accepted; an empty data chunk too.
        let mut spec = WavSpec::new(1, 8000, &SAMPLES);
        spec.format_size = 18;
        spec.pre = b"JUNK\x04\0\0\0abcd".to_vec();
        spec.post = b"LIST\x10\0\0\0xy".to_vec();
        let want = vec![0.0, a, -a, b, -1.0, c];
        assert_eq!(decode(spec.bytes(), -1, -1).unwrap(), (vec![6, 1], want, 8000));
        assert_eq!(decode(WavSpec::new(1, 8000, &[]).bytes(), -1, -1).unwrap(), (vec![0, 1], vec![], 8000));
        // Every int16 maps to int16 / 32768 exactly.
        let all: Vec<i16> = (i16::MIN..=i16::MAX).step_by(7).collect();
        let (_, got, _) = decode(WavSpec::new(1, 44100, &all).bytes(), -1, -1).unwrap();
        assert!(all.iter().zip(&got).all(|(&s, &g)| g == s as f32 / 32768.0));
    }

    /// TensorFlow 2.21's errors for malformed files and bad attributes.
    #[test]
    fn malformed_wav_files_fail_with_tensorflows_messages() {
        let base = WavSpec::new(1, 8000, &SAMPLES);
        let with = |f: &dyn Fn(&mut WavSpec)| {
            let mut s = base.clone();
            f(&mut s);
            decode(s.bytes(), -1, -1).unwrap_err()
        };
        let short = "Data too short when trying to read string";
        assert_eq!(with(&|s| s.post = b"abc".to_vec()), short);
        assert_eq!(with(&|s| s.data_size = Some(100)), short);
        // An odd data size leaves a byte that is read as the start of the next chunk.
        assert_eq!(with(&|s| s.data_size = Some(11)), short);
        assert_eq!(with(&|s| s.pre = b"JUNK\xff\xff\xff\xffabcd".to_vec()), short);
        assert_eq!(with(&|s| s.pre = b"LIST\x04\0\0\0abcd".to_vec()), "Unexpected field LIST");
        assert_eq!(with(&|s| s.format_size = 20), "Bad format chunk size for WAV: Expected 16 or 18, but got20");
        assert_eq!(with(&|s| s.format = 3), "Bad audio format for WAV: Expected 1 (PCM), but got3");
        assert_eq!(with(&|s| s.bits = 8), "Can only read 16-bit WAV files, but received 8");
        let e = with(&|s| {
            s.bytes_per_sample = Some(4);
            s.bytes_per_second = Some(32000)
        });
        assert_eq!(e, "Bad bytes per sample in WAV header: Expected 2 but got 4");
        let e = with(&|s| s.bytes_per_second = Some(1));
        assert_eq!(
            e,
            "Bad bytes per second in WAV header: Expected 16000 but got 1 (sample_rate=8000, bytes_per_sample=2)"
        );
        let e = with(&|s| s.post = b"data\0\0\0\0".to_vec());
        assert_eq!(e, "More than one data chunk found in WAV");
        let e = with(&|s| s.post = b"data\0\0\0\x80".to_vec());
        assert_eq!(e, "WAV data chunk 'data' is too large: 2147483648 bytes, but the limit is 2147483647");
        let e = with(&|s| {
            s.channels = 0;
            s.bytes_per_sample = Some(0)
        });
        assert_eq!(e, "Bad number of channels for WAV: Expected at least 1, but got 0");
        let good = base.bytes();
        assert_eq!(decode(good[..40].to_vec(), -1, -1).unwrap_err(), short);
        assert_eq!(decode(good[..36].to_vec(), -1, -1).unwrap_err(), "No data chunk found in WAV");
        assert_eq!(decode(b"RIF".to_vec(), -1, -1).unwrap_err(), short);
        assert_eq!(decode(Vec::new(), -1, -1).unwrap_err(), short);
        let mut rifx = good.clone();
        rifx[3] = b'X';
        assert_eq!(decode(rifx, -1, -1).unwrap_err(), "Header mismatch: Expected RIFF but found RIFX");
        assert_eq!(decode(good.clone(), -2, -1).unwrap_err(), "desired_channels must be >= -1, got -2");
        assert_eq!(decode(good.clone(), -1, -2).unwrap_err(), "desired_samples must be >= -1, got -2");
        let e = decode(good.clone(), 1 << 31, -1).unwrap_err();
        assert_eq!(e, "Attr desired_channels has value 2147483648 out of range for an int32");
        let vector = Tensor::from_strings(vec![1], vec![good]).unwrap();
        assert_eq!(run("DecodeWav", &[], vec![vector]).unwrap_err(), "contents must be scalar, got shape [1]");
    }

    /// A 400-sample stereo signal, exact in float32: channel 0 a triangle wave of period 16
    /// (1 kHz at 16 kHz), channel 1 a quadratic-residue pattern.
    fn signal() -> Tensor {
        let v = (0..400i64)
            .flat_map(|n| {
                let tri = (((n % 16) - 8).abs() - 4) as f32 / 8.0;
                let noise = (((n * n * 7 + 3 * n) % 61) - 30) as f32 / 128.0;
                [tri, noise]
            })
            .collect();
        Tensor::from_f32(vec![400, 2], v).unwrap()
    }

    fn spectrogram_of(input: Tensor, window: i64, stride: i64, squared: bool) -> Result<Tensor, String> {
        let attrs = [
            ("window_size", AttrValue::I(window)),
            ("stride", AttrValue::I(stride)),
            ("magnitude_squared", AttrValue::B(squared)),
        ];
        Ok(run("AudioSpectrogram", &attrs, vec![input])?.remove(0))
    }

    /// `got` within 1e-5 relative of `want`, or within 1e-6 of `scale` (bins TensorFlow's
    /// transform leaves at rounding noise).
    fn assert_close(got: &[f32], want: &[f32], scale: f32, what: &str) {
        assert_eq!(got.len(), want.len(), "{what}");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let ok = (g - w).abs() <= 1e-5 * w.abs() + 1e-6 * scale || (g.is_nan() && w.is_nan());
            assert!(ok, "{what}[{i}]: {g} vs TensorFlow's {w}");
        }
    }

    fn frame_sums(t: &Tensor) -> Vec<f32> {
        let bins = t.shape[2];
        t.as_f32().unwrap().chunks(bins).map(|f| f.iter().map(|&v| v as f64).sum::<f64>() as f32).collect()
    }

    fn frame(t: &Tensor, c: usize, f: usize) -> &[f32] {
        let (frames, bins) = (t.shape[1], t.shape[2]);
        &t.as_f32().unwrap()[(c * frames + f) * bins..][..bins]
    }

    /// TensorFlow 2.21's `AudioSpectrogram` of [`signal`].
    #[test]
    fn spectrograms_match_tensorflows() {
        let mag = spectrogram_of(signal(), 64, 32, false).unwrap();
        assert_eq!(mag.shape, [2, 11, 33]);
        let sums = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
        assert_close(&frame_sums(&mag), &sums(&MAG_SUMS), 0.0, "magnitude sums");
        assert_close(frame(&mag, 0, 0), &MAG_0_0, 6.6, "magnitude 0/0");
        assert_close(frame(&mag, 1, 0), &MAG_1_0, 0.0, "magnitude 1/0");
        assert_close(frame(&mag, 1, 10), &MAG_1_10, 0.0, "magnitude 1/10");
        let sq = spectrogram_of(signal(), 64, 32, true).unwrap();
        assert_close(&frame_sums(&sq), &sums(&SQ_SUMS), 0.0, "squared sums");
        assert_close(frame(&sq, 1, 10), &SQ_1_10, 0.0, "squared 1/10");
        // The squared magnitude is rounded to float32 before its float32 square root.
        let (m, s) = (mag.as_f32().unwrap(), sq.as_f32().unwrap());
        assert!(m.iter().zip(s).all(|(m, s)| *m == s.sqrt()));
        // A window of 50 (transform length 64) every 120 samples: 3 frames.
        let odd = spectrogram_of(signal(), 50, 120, false).unwrap();
        assert_eq!(odd.shape, [2, 3, 33]);
        assert_close(&frame_sums(&odd), &sums(&ODD_SUMS), 0.0, "window 50 sums");
        assert_close(frame(&odd, 1, 2), &ODD_1_2, 0.0, "window 50 1/2");
        // Shorter than a window: no frames.
        let short = Tensor::from_f32(vec![63, 2], vec![0.5; 126]).unwrap();
        assert_eq!(spectrogram_of(short, 64, 32, false).unwrap().shape, [2, 0, 33]);
        // A window of 2 every sample.
        assert_eq!(spectrogram_of(signal(), 2, 1, false).unwrap().shape, [2, 399, 2]);
    }

    /// TensorFlow 2.21's errors.
    #[test]
    fn bad_spectrogram_operands_fail_as_in_tensorflow() {
        let flat = Tensor::from_f32(vec![400], vec![0.0; 400]).unwrap();
        assert_eq!(spectrogram_of(flat, 1, 3, false).unwrap_err(), "input must be 2-dimensional[400]");
        for (w, s) in [(1, 32), (0, 3), (4, 0), (4, -1)] {
            let e = spectrogram_of(signal(), w, s, false).unwrap_err();
            assert_eq!(e, format!("Spectrogram initialization failed for window size {w} and stride {s}"));
        }
        let e = spectrogram_of(signal(), 1 << 33, 3, false).unwrap_err();
        assert_eq!(e, "Attr window_size has value 8589934592 out of range for an int32");
        assert!(run("AudioSpectrogram", &[("stride", AttrValue::I(3))], vec![signal()]).is_err());
    }

    fn mfcc_of(spectrogram: Tensor, rate: i32, attrs: &[(&str, AttrValue)]) -> Result<Tensor, String> {
        Ok(run("Mfcc", attrs, vec![spectrogram, Tensor::scalar_i32(rate)])?.remove(0))
    }

    /// TensorFlow 2.21's `Mfcc` of the squared spectrogram of [`signal`] (window 64, stride
    /// 32: 33 bins of 250 Hz at 16 kHz), with the defaults and with other attributes.
    #[test]
    fn mfccs_match_tensorflows() {
        let sq = spectrogram_of(signal(), 64, 32, true).unwrap();
        let m = mfcc_of(sq.clone(), 16000, &[]).unwrap();
        assert_eq!(m.shape, [2, 11, 13]);
        // Channel 0 is periodic in the stride: every frame alike. Some of its 40 bands get
        // no bin at all and take the log floor.
        for f in [0, 5, 10] {
            assert_close(frame(&m, 0, f), &MFCC_0_0, 0.0, "mfcc 0");
        }
        assert_close(frame(&m, 1, 0), &MFCC_1_0, 0.0, "mfcc 1/0");
        assert_close(frame(&m, 1, 10), &MFCC_1_10, 0.0, "mfcc 1/10");
        let attrs = [
            ("upper_frequency_limit", AttrValue::F(7600.0)),
            ("lower_frequency_limit", AttrValue::F(60.0)),
            ("filterbank_channel_count", AttrValue::I(12)),
            ("dct_coefficient_count", AttrValue::I(12)),
        ];
        let m = mfcc_of(sq.clone(), 16000, &attrs).unwrap();
        assert_eq!(m.shape, [2, 11, 12]);
        assert_close(frame(&m, 1, 3), &MFCC_B_1_3, 0.0, "mfcc b 1/3");
        assert_close(frame(&m, 0, 5), &MFCC_B_0_5, 0.0, "mfcc b 0/5");
        // At 8 kHz the default upper limit is the last bin.
        assert_close(frame(&mfcc_of(sq.clone(), 8000, &[]).unwrap(), 1, 2), &MFCC_8K_1_2, 0.0, "mfcc 8k");
        // At 6 kHz it is past the last bin: TensorFlow's filterbank declines every frame.
        assert!(mfcc_of(sq, 6000, &[]).unwrap().as_f32().unwrap().iter().all(|&v| v == 0.0));
        let ones = |v: f32| Tensor::from_f32(vec![1, 1, 33], vec![v; 33]).unwrap();
        let upper = |f: f32| [("upper_frequency_limit", AttrValue::F(f))];
        assert_close(mfcc_of(ones(1.0), 16000, &upper(7999.0)).unwrap().as_f32().unwrap(), &ONES_7999, 0.0, "7999");
        assert_close(mfcc_of(ones(1.0), 16000, &upper(8000.0)).unwrap().as_f32().unwrap(), &ONES_8000, 0.0, "8000");
        assert!(mfcc_of(ones(1.0), 16000, &upper(1e30)).unwrap().as_f32().unwrap().iter().all(|&v| v == 0.0));
        // All bands at the floor: the DCT table's rounding shows in the small coefficients,
        // bit for bit TensorFlow's.
        assert_eq!(mfcc_of(ones(0.0), 16000, &[]).unwrap().as_f32().unwrap(), ZEROS);
        assert!(mfcc_of(ones(f32::INFINITY), 16000, &[]).unwrap().as_f32().unwrap().iter().all(|v| v.is_nan()));
        assert!(mfcc_of(ones(-1.0), 16000, &[]).unwrap().as_f32().unwrap().iter().all(|v| v.is_nan()));
        let none = Tensor::from_f32(vec![0, 2, 33], vec![]).unwrap();
        assert_eq!(mfcc_of(none, 16000, &[]).unwrap().shape, [0, 2, 13]);
    }

    /// TensorFlow 2.21's errors.
    #[test]
    fn bad_mfcc_operands_fail_as_in_tensorflow() {
        let spec = || Tensor::from_f32(vec![1, 2, 33], vec![1.0; 66]).unwrap();
        let failed = |bins: usize, rate: i32, bank: i32| {
            format!(
                "Mfcc initialization failed for channel count {bins}, sample rate {rate} and \
                 filterbank_channel_count {bank}"
            )
        };
        let int = |name: &'static str, v: i64| [(name, AttrValue::I(v))];
        let float = |name: &'static str, v: f32| [(name, AttrValue::F(v))];
        let bank_and_dct = [("filterbank_channel_count", AttrValue::I(5)), ("dct_coefficient_count", AttrValue::I(6))];
        assert_eq!(mfcc_of(spec(), 16000, &bank_and_dct).unwrap_err(), failed(33, 16000, 5));
        assert_eq!(mfcc_of(spec(), 0, &[]).unwrap_err(), failed(33, 0, 40));
        assert_eq!(mfcc_of(spec(), -5, &[]).unwrap_err(), failed(33, -5, 40));
        assert_eq!(mfcc_of(spec(), 16000, &float("lower_frequency_limit", -1.0)).unwrap_err(), failed(33, 16000, 40));
        assert_eq!(mfcc_of(spec(), 16000, &float("lower_frequency_limit", 5000.0)).unwrap_err(), failed(33, 16000, 40));
        assert_eq!(mfcc_of(spec(), 16000, &int("filterbank_channel_count", 0)).unwrap_err(), failed(33, 16000, 0));
        assert_eq!(mfcc_of(spec(), 16000, &int("filterbank_channel_count", -1)).unwrap_err(), failed(33, 16000, -1));
        assert_eq!(mfcc_of(spec(), 16000, &int("dct_coefficient_count", 0)).unwrap_err(), failed(33, 16000, 40));
        let one_bin = Tensor::from_f32(vec![1, 2, 1], vec![1.0; 2]).unwrap();
        assert_eq!(mfcc_of(one_bin, 16000, &[]).unwrap_err(), failed(1, 16000, 40));
        let e = mfcc_of(spec(), 16000, &int("dct_coefficient_count", 1 << 32)).unwrap_err();
        assert_eq!(e, "Attr dct_coefficient_count has value 4294967296 out of range for an int32");
        let flat = Tensor::from_f32(vec![11, 33], vec![1.0; 363]).unwrap();
        assert_eq!(mfcc_of(flat, 16000, &[]).unwrap_err(), "spectrogram must be 3-dimensional[11,33]");
        let rate = Tensor::from_i32(vec![1], vec![16000]).unwrap();
        let e = run("Mfcc", &[], vec![spec(), rate]).unwrap_err();
        assert_eq!(e, "Input sample_rate should be a scalar tensor, got [1] instead.");
    }

    // TensorFlow 2.21's outputs (`tf.raw_ops.AudioSpectrogram`, `tf.raw_ops.Mfcc`) for the
    // inputs above.
    // AudioSpectrogram(window 64, stride 32): each (channel, frame)'s sum over the bins, in float64.
    const MAG_SUMS: [f64; 22] = [
        16.00000047683716,
        16.00000047683716,
        16.00000047683716,
        16.00000047683716,
        16.00000047683716,
        16.00000047683716,
        16.00000047683716,
        16.00000047683716,
        16.00000047683716,
        16.00000047683716,
        16.00000047683716,
        20.083381224423647,
        21.533064231276512,
        19.13191084936261,
        20.915194906294346,
        18.469616195186973,
        20.570040207356215,
        18.626631004735827,
        21.127559952437878,
        19.439340587705374,
        21.698345750570297,
        20.399324774742126,
    ];
    const SQ_SUMS: [f64; 22] = [
        66.00000084936619,
        66.00000084936619,
        66.00000084936619,
        66.00000084936619,
        66.00000084936619,
        66.00000084936619,
        66.00000084936619,
        66.00000084936619,
        66.00000084936619,
        66.00000084936619,
        66.00000084936619,
        17.184435955248773,
        19.734664173796773,
        16.794709732406773,
        19.79876697063446,
        16.589876012760215,
        19.81101615424268,
        16.63325666351011,
        19.78483754117042,
        16.907580392085947,
        19.694462163373828,
        17.344451024429873,
    ];
    const ODD_SUMS: [f64; 6] = [
        16.665905344765633,
        16.665905344765633,
        16.665905344765633,
        19.618960812687874,
        19.866760328412056,
        19.93990769982338,
    ];
    // Whole frames: magnitudes of channel 0 frame 0, channel 1 frames 0 and 10.
    const MAG_0_0: [f32; 33] = [
        1.110223e-16,
        2.08636e-16,
        1.6003518e-16,
        3.284268,
        6.568536,
        3.284268,
        8.456603e-17,
        1.1601956e-16,
        1.110223e-16,
        1.372162e-16,
        1.4917162e-16,
        0.4049786,
        0.8099572,
        0.4049786,
        1.270445e-16,
        7.810449e-17,
        1.110223e-16,
        1.5009362e-16,
        1.7435706e-16,
        0.18080784,
        0.3616157,
        0.18080784,
        2.567716e-16,
        1.3370383e-16,
        1.110223e-16,
        1.585507e-16,
        5.720465e-17,
        0.12994577,
        0.25989154,
        0.12994577,
        1.6265198e-16,
        9.6485497e-17,
        1.110223e-16,
    ];
    const MAG_1_0: [f32; 33] = [
        1.1067617,
        0.8559732,
        0.92920494,
        1.1209543,
        0.9981148,
        0.81215817,
        0.75947976,
        0.73066866,
        0.27360693,
        0.36451253,
        0.25909564,
        0.4934394,
        1.0644128,
        0.5022089,
        0.29609182,
        0.09858619,
        0.42137283,
        1.2086145,
        1.1642947,
        0.5348288,
        0.21039243,
        0.11225142,
        0.050549667,
        0.33404866,
        0.5028885,
        0.27037,
        0.23434016,
        0.20642279,
        0.38302204,
        0.71468675,
        0.44609958,
        1.0238893,
        1.6000394,
    ];
    const MAG_1_10: [f32; 33] = [
        1.048298,
        0.87643576,
        0.96935576,
        1.1698452,
        1.064824,
        0.77853066,
        0.75651544,
        0.71638304,
        0.2834283,
        0.3845876,
        0.29737815,
        0.5327401,
        1.069356,
        0.5475147,
        0.31408325,
        0.11490742,
        0.4120866,
        1.1951196,
        1.1284294,
        0.552061,
        0.22125247,
        0.123078495,
        0.057585053,
        0.3290465,
        0.5174237,
        0.30457008,
        0.25941446,
        0.21490097,
        0.39550564,
        0.69953597,
        0.48017457,
        1.0233775,
        1.5615793,
    ];
    const SQ_1_10: [f32; 33] = [
        1.0989287,
        0.7681396,
        0.93965054,
        1.3685378,
        1.1338502,
        0.60611,
        0.57231563,
        0.5132047,
        0.08033161,
        0.14790761,
        0.08843376,
        0.28381202,
        1.1435221,
        0.29977232,
        0.09864829,
        0.013203716,
        0.16981536,
        1.4283109,
        1.273353,
        0.30477136,
        0.048952654,
        0.015148316,
        0.0033160385,
        0.1082716,
        0.26772726,
        0.09276294,
        0.06729587,
        0.046182428,
        0.15642472,
        0.48935056,
        0.23056762,
        1.0473017,
        2.4385302,
    ];
    const ODD_1_2: [f32; 33] = [
        0.29731917,
        0.82797295,
        1.1528076,
        1.43167,
        1.4343929,
        0.7296854,
        0.5976407,
        0.538108,
        0.18774441,
        0.5745849,
        0.63133574,
        0.8473423,
        0.92834246,
        0.80258065,
        0.5522099,
        0.1955889,
        0.524676,
        0.712219,
        0.53063405,
        0.5267535,
        0.38191178,
        0.18690306,
        0.121264294,
        0.28391045,
        0.54767543,
        0.5619106,
        0.41056207,
        0.34058547,
        0.3735005,
        0.47351795,
        0.61315864,
        0.780601,
        0.84079784,
    ];
    // Mfcc of the squared spectrogram at 16 kHz with the default attributes.
    const MFCC_0_0: [f32; 13] = [
        -179.86572,
        -21.623491,
        -11.502077,
        -27.823128,
        25.962557,
        20.55276,
        -21.931156,
        7.7804623,
        -16.856924,
        16.445776,
        -13.2856045,
        16.341043,
        -0.9399875,
    ];
    const MFCC_1_0: [f32; 13] = [
        -88.51547, -48.634674, -9.531025, -3.257595, -8.56493, -3.6765823, -2.722768, -8.081922, -8.929167, 0.3428947,
        -2.6892154, -4.2437935, 2.4176667,
    ];
    const MFCC_1_10: [f32; 13] = [
        -88.25649, -48.776737, -9.435048, -3.3441377, -8.604937, -3.6026545, -2.72947, -8.145171, -8.880122,
        0.29674223, -2.6191823, -4.3136935, 2.4144368,
    ];
    const MFCC_B_1_3: [f32; 12] = [
        1.7799726,
        -0.95527554,
        -0.5853158,
        -0.33095,
        -0.4681417,
        0.101759784,
        0.83807707,
        -0.15278035,
        -0.008567498,
        -0.06746098,
        0.24283822,
        -0.18137974,
    ];
    const MFCC_B_0_5: [f32; 12] = [
        -34.66879,
        -17.638468,
        -9.086321,
        -20.276197,
        -20.174366,
        1.8112826,
        9.468912,
        -4.7135367,
        -0.88393277,
        16.810583,
        6.8632145,
        -6.9683185,
    ];
    const MFCC_8K_1_2: [f32; 13] = [
        -34.1218, -22.50817, -15.625498, -9.829424, -4.4628763, -1.6117479, 0.3149543, -2.7424772, -1.8584164,
        -1.768046, 3.653831, 6.966764, 6.386798,
    ];
    const ONES_7999: [f32; 13] = [
        -44.931835, -39.224113, -21.44869, -8.79284, -1.6941259, -2.4166496, -5.765184, -7.5115085, -5.5511584,
        -2.7746615, -2.4681802, -5.6024065, -9.53889,
    ];
    const ONES_8000: [f32; 13] = [
        -44.932438, -39.224823, -21.44779, -8.791736, -1.6941944, -2.4175985, -5.7657337, -7.5111356, -5.550428,
        -2.774331, -2.468702, -5.6029487, -9.539105,
    ];
    const ZEROS: [f32; 13] = [
        -247.13936,
        8.881784e-16,
        2.220446e-14,
        -1.0658141e-14,
        8.881784e-16,
        -1.5987212e-14,
        1.15463195e-14,
        -4.440892e-15,
        1.0658141e-14,
        -4.7961635e-14,
        1.5987212e-14,
        -2.842171e-14,
        0.0,
    ];
}
