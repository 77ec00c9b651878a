//! PNG decoding: `DecodePng` and `DecodeImage` of a PNG (`tf.io.decode_png`,
//! `tf.io.decode_image`), what serving signatures that take encoded images emit.
//!
//! The decoder reads every standard PNG: bit depths 1–16, grey, grey+alpha, RGB, RGBA and
//! palette images, a `tRNS` transparency chunk, Adam7 interlacing, the five scanline
//! filters, the zlib stream split over any number of `IDAT` chunks (inflated by
//! `miniz_oxide`). It then converts as TensorFlow's `png_io.cc` asks libpng to: `channels`
//! 0 keeps the file's (a palette gives 3, or 4 with `tRNS`; 2 is refused, as TensorFlow's
//! kernel refuses it, though a grey+alpha file keeps its 2); an even count wants alpha —
//! the file's, the `tRNS` key or palette alphas, or an opaque filler — and an odd count drops
//! it (the opaque filler is `(1 << depth) − 1` of the file's depth, so a 1-bit image's alpha
//! is 1, TensorFlow's quirk); 1 channel from a colour image is the ITU-R 601 grey libpng
//! computes in 15-bit fixed point (`(9797·R + 19234·G + 3737·B) >> 15`, + 16384 before the
//! shift for 16-bit samples); grey to colour repeats the
//! sample; grey below 8 bits is scaled up (1-bit 1 is 255); 16-bit samples become `uint8`
//! by their high byte, 8-bit ones `uint16` by ×257.
//!
//! Every decode op accepts every format, as TensorFlow's do (see [`prepare`]): a JPEG goes to
//! [`super::jpeg`], a GIF to [`super::gif`], a BMP to [`super::bmp`].

use std::sync::Arc;

use autoclust_graph::{AttrValue, DType, Node, Tensor, TensorData};

use super::string::strings;
use super::{arity, bmp, budget, gif, jpeg, one, Inputs, PureFn};
use crate::error::{KResult, KernelError};

const SIGNATURE: &[u8; 8] = b"\x89PNG\r\n\x1a\n";

fn bad(msg: impl Into<String>) -> KernelError {
    KernelError::invalid(format!("invalid PNG data: {}", msg.into()))
}

/// A decoded PNG before conversion: samples at the file's bit depth, channels as stored
/// (a palette image has one index channel).
#[derive(Debug)]
struct Raw {
    width: usize,
    height: usize,
    depth: u8,
    color: u8,
    samples: Vec<u16>,
    palette: Vec<[u8; 3]>,
    /// Palette alphas, or the transparent grey / RGB key (at the file's depth).
    trns: Option<Vec<u16>>,
}

impl Raw {
    fn stored_channels(&self) -> usize {
        match self.color {
            0 | 3 => 1,
            4 => 2,
            2 => 3,
            _ => 4,
        }
    }
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn paeth(a: i32, b: i32, c: i32) -> u8 {
    let p = a + b - c;
    let (pa, pb, pc) = ((p - a).abs(), (p - b).abs(), (p - c).abs());
    (if pa <= pb && pa <= pc {
        a
    } else if pb <= pc {
        b
    } else {
        c
    }) as u8
}

/// Undoes the scanline filters of a `rows × row_bytes` image in `data` (each row led by
/// its filter byte), `bpp` bytes per complete pixel; returns the filtered-out bytes.
fn unfilter(data: &[u8], rows: usize, row_bytes: usize, bpp: usize) -> KResult<Vec<u8>> {
    let mut out = vec![0u8; rows * row_bytes];
    for y in 0..rows {
        let line = &data[y * (row_bytes + 1)..(y + 1) * (row_bytes + 1)];
        let (kind, src) = (line[0], &line[1..]);
        let (done, rest) = out.split_at_mut(y * row_bytes);
        let prev = if y == 0 { None } else { Some(&done[(y - 1) * row_bytes..]) };
        let cur = &mut rest[..row_bytes];
        for x in 0..row_bytes {
            let a = if x >= bpp { cur[x - bpp] as i32 } else { 0 };
            let b = prev.map_or(0, |p| p[x] as i32);
            let c = if x >= bpp { prev.map_or(0, |p| p[x - bpp] as i32) } else { 0 };
            let predicted = match kind {
                0 => 0,
                1 => a as u8,
                2 => b as u8,
                3 => ((a + b) / 2) as u8,
                4 => paeth(a, b, c),
                k => return Err(bad(format!("unknown filter type {k}"))),
            };
            cur[x] = src[x].wrapping_add(predicted);
        }
    }
    Ok(out)
}

/// The samples of `rows` unfiltered rows of `width` pixels.
fn unpack(bytes: &[u8], width: usize, rows: usize, channels: usize, depth: u8) -> Vec<u16> {
    let row_bytes = (width * channels * depth as usize).div_ceil(8);
    let mut out = Vec::with_capacity(width * rows * channels);
    for y in 0..rows {
        let row = &bytes[y * row_bytes..(y + 1) * row_bytes];
        for i in 0..width * channels {
            out.push(match depth {
                16 => u16::from_be_bytes([row[2 * i], row[2 * i + 1]]),
                8 => row[i] as u16,
                d => {
                    let bit = i * d as usize;
                    ((row[bit / 8] >> (8 - d as usize - bit % 8)) & ((1u8 << d) - 1)) as u16
                }
            });
        }
    }
    out
}

fn parse(bytes: &[u8]) -> KResult<Raw> {
    if bytes.len() < 8 || &bytes[..8] != SIGNATURE {
        return Err(bad("no PNG signature"));
    }
    let mut at = 8;
    let mut header = None;
    let mut idat = Vec::new();
    let mut palette = Vec::new();
    let mut trns_bytes: Option<Vec<u8>> = None;
    loop {
        if at + 12 > bytes.len() {
            return Err(bad("truncated before IEND"));
        }
        let len = be32(&bytes[at..]) as usize;
        let kind = &bytes[at + 4..at + 8];
        let body = bytes.get(at + 8..at + 8 + len).ok_or_else(|| bad("a chunk runs past the end"))?;
        match kind {
            b"IHDR" if body.len() == 13 => header = Some(body.to_vec()),
            b"PLTE" => palette = body.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect(),
            b"tRNS" => trns_bytes = Some(body.to_vec()),
            b"IDAT" => idat.extend_from_slice(body),
            b"IEND" => break,
            _ => {}
        }
        at += 12 + len;
    }
    let h = header.ok_or_else(|| bad("no IHDR chunk"))?;
    let (width, height) = (be32(&h[0..]) as usize, be32(&h[4..]) as usize);
    let (depth, color, interlace) = (h[8], h[9], h[12]);
    let valid_depth = match color {
        0 => matches!(depth, 1 | 2 | 4 | 8 | 16),
        3 => matches!(depth, 1 | 2 | 4 | 8),
        2 | 4 | 6 => matches!(depth, 8 | 16),
        _ => false,
    };
    if !valid_depth || h[10] != 0 || h[11] != 0 || interlace > 1 {
        return Err(bad(format!("unsupported header: bit depth {depth}, colour type {color}")));
    }
    if width == 0 || height == 0 {
        return Err(bad("zero width or height"));
    }
    if color == 3 && palette.is_empty() {
        return Err(bad("a palette image without PLTE"));
    }
    let mut raw = Raw { width, height, depth, color, samples: Vec::new(), palette, trns: None };
    let channels = raw.stored_channels();
    budget(DType::UInt16, &[height, width, 4])?;
    let bits = channels * depth as usize;
    let bpp = bits.div_ceil(8);
    // Adam7 passes as (x0, y0, dx, dy); a plain image is one pass.
    let passes: &[(usize, usize, usize, usize)] = if interlace == 1 {
        &[(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
    } else {
        &[(0, 0, 1, 1)]
    };
    let expected: usize = passes
        .iter()
        .map(|&(x0, y0, dx, dy)| {
            let (w, r) = (width.saturating_sub(x0).div_ceil(dx), height.saturating_sub(y0).div_ceil(dy));
            if w == 0 || r == 0 {
                0
            } else {
                r * (1 + (w * bits).div_ceil(8))
            }
        })
        .sum();
    let data = miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(&idat, expected)
        .map_err(|e| bad(format!("the compressed image data is corrupt ({:?})", e.status)))?;
    if data.len() < expected {
        return Err(bad(format!("{} bytes of image data where {expected} are needed", data.len())));
    }
    raw.samples = vec![0u16; width * height * channels];
    let mut offset = 0;
    for &(x0, y0, dx, dy) in passes {
        let (w, r) = (width.saturating_sub(x0).div_ceil(dx), height.saturating_sub(y0).div_ceil(dy));
        if w == 0 || r == 0 {
            continue;
        }
        let row_bytes = (w * bits).div_ceil(8);
        let size = r * (1 + row_bytes);
        let plain = unfilter(&data[offset..offset + size], r, row_bytes, bpp)?;
        offset += size;
        let samples = unpack(&plain, w, r, channels, depth);
        for py in 0..r {
            for px in 0..w {
                let (x, y) = (x0 + px * dx, y0 + py * dy);
                let src = (py * w + px) * channels;
                let dst = (y * width + x) * channels;
                raw.samples[dst..dst + channels].copy_from_slice(&samples[src..src + channels]);
            }
        }
    }
    raw.trns = trns_bytes.map(|t| match color {
        3 => t.iter().map(|&a| a as u16).collect(),
        _ => t.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect(),
    });
    Ok(raw)
}

/// The converted image: `[height, width, channels]` of `uint8` (`sixteen`: `uint16`).
fn convert(raw: &Raw, want: usize, sixteen: bool) -> KResult<Tensor> {
    let has_trns = raw.trns.is_some();
    let channels = match want {
        0 if raw.color == 3 => 3 + has_trns as usize,
        0 => raw.stored_channels(),
        c => c,
    };
    let shape = vec![raw.height, raw.width, channels];
    budget(if sixteen { DType::UInt16 } else { DType::UInt8 }, &shape)?;
    let want_alpha = channels % 2 == 0;
    let want_gray = channels < 3;
    let stored = raw.stored_channels();
    // Samples are carried at `depth` bits: the file's, or 8 once a palette or a grey image
    // below 8 bits is expanded.
    let depth = if raw.depth < 8 { 8 } else { raw.depth };
    let max = (1u32 << depth) - 1;
    let scale_low = |v: u16| -> u32 {
        match raw.depth {
            1 => v as u32 * 255,
            2 => v as u32 * 85,
            4 => v as u32 * 17,
            _ => v as u32,
        }
    };
    // The alpha added to an image without one: TensorFlow asks libpng for `(1 << d) − 1` with
    // `d` the *file's* bit depth, so a 1-, 2- or 4-bit grey or palette image gets alpha 1, 3
    // or 15, not 255 (what `tf.io.decode_png(…, channels=4)` returns).
    let filler = (1u32 << raw.depth) - 1;
    let mut out: Vec<u16> = Vec::with_capacity(shape.iter().product());
    for px in raw.samples.chunks_exact(stored) {
        // (r, g, b, a) at `depth` bits; grey images have r = g = b.
        let (rgb, alpha, is_gray): ([u32; 3], u32, bool) = match raw.color {
            3 => {
                let i = px[0] as usize;
                let c = raw.palette.get(i).copied().unwrap_or([0, 0, 0]);
                let a = raw.trns.as_ref().map_or(filler, |t| t.get(i).copied().unwrap_or(255) as u32);
                ([c[0] as u32, c[1] as u32, c[2] as u32], a, false)
            }
            0 | 4 => {
                let g = scale_low(px[0]);
                let a = if raw.color == 4 {
                    px[1] as u32
                } else {
                    match &raw.trns {
                        Some(t) if t.first() == Some(&px[0]) => 0,
                        _ => filler,
                    }
                };
                ([g; 3], a, true)
            }
            _ => {
                let c = [px[0] as u32, px[1] as u32, px[2] as u32];
                let a = if raw.color == 6 {
                    px[3] as u32
                } else {
                    match &raw.trns {
                        Some(t) if t.len() >= 3 && t[..3] == px[..3] => 0,
                        _ => max,
                    }
                };
                (c, a, false)
            }
        };
        let gray = if is_gray {
            rgb[0]
        } else if want_gray {
            let [r, g, b] = rgb;
            if r == g && r == b {
                r
            } else {
                // libpng rounds 16-bit samples but truncates 8-bit ones ("the historical approach").
                let round = if depth == 16 { 16384 } else { 0 };
                (9797 * r + 19234 * g + 3737 * b + round) >> 15
            }
        } else {
            0
        };
        let to_out = |v: u32| -> u16 {
            match (depth, sixteen) {
                (16, false) => (v >> 8) as u16,
                (16, true) => v as u16,
                (_, true) => (v * 257) as u16,
                _ => v as u16,
            }
        };
        if want_gray {
            out.push(to_out(gray));
        } else {
            out.extend(rgb.iter().map(|&v| to_out(v)));
        }
        if want_alpha {
            out.push(to_out(alpha));
        }
    }
    let data = if sixteen {
        TensorData::Raw(Arc::new(out.iter().flat_map(|v| v.to_le_bytes()).collect()))
    } else {
        TensorData::Raw(Arc::new(out.iter().map(|&v| v as u8).collect()))
    };
    Ok(Tensor { dtype: if sixteen { DType::UInt16 } else { DType::UInt8 }, shape, data })
}

/// The format `bytes` start with, when it is not PNG.
fn other_format(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("JPEG")
    } else if bytes.starts_with(b"GIF8") {
        Some("GIF")
    } else if bytes.starts_with(b"BM") {
        Some("BMP")
    } else {
        None
    }
}

/// `uint8` image values as `float32` in `[0, 1]`, as `DecodeImage` with `dtype = float32`
/// gives them (`x · (1/255)`, `x · (1/65535)` for `uint16`).
fn to_float(t: Tensor) -> Tensor {
    let TensorData::Raw(b) = &t.data else { return t };
    let v: Vec<f32> = if t.dtype == DType::UInt16 {
        b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]) as f32 * (1.0 / 65535.0)).collect()
    } else {
        b.iter().map(|&x| x as f32 * (1.0 / 255.0)).collect()
    };
    Tensor { dtype: DType::Float32, shape: t.shape.clone(), data: TensorData::F32(Arc::new(v)) }
}

/// `DecodePng`, `DecodeJpeg`, `DecodeImage`, `DecodeBmp` and `DecodeGif`. As in TensorFlow's
/// `decode_image_op.cc` (one kernel behind all of them), the file's first bytes pick the
/// decoder, not the op: a JPEG is decoded with `DecodeJpeg`'s attributes (or TensorFlow's
/// defaults), a GIF gives all its frames to `DecodeGif` and to `DecodeImage` expanding
/// animations (`[frames, h, w, 3]`, even for one) and its only frame to `DecodePng` and
/// `DecodeJpeg` (more is an error); `DecodeGif` gives a PNG or JPEG as one frame; only
/// `DecodeBmp` and `DecodeImage` take a BMP, and `DecodeBmp` nothing else.
pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let op: &'static str = match node.op.as_str() {
        "DecodePng" => "DecodePng",
        "DecodeJpeg" => "DecodeJpeg",
        "DecodeImage" => "DecodeImage",
        "DecodeBmp" => "DecodeBmp",
        "DecodeGif" => "DecodeGif",
        "DecodeAndCropJpeg" => return Ok(Some(decode_and_crop(jpeg::Options::of(node)?))),
        _ => return Ok(None),
    };
    // `DecodeGif` has no `channels`: always RGB.
    let channels = if op == "DecodeGif" { 3 } else { node.attr("channels").and_then(AttrValue::as_int).unwrap_or(0) };
    if !matches!(channels, 0 | 1 | 3 | 4) {
        return Err(KernelError::invalid(format!("`channels` must be 0, 1, 3 or 4 but got {channels}")));
    }
    let dtype = node.attr("dtype").and_then(AttrValue::as_type).unwrap_or(DType::UInt8);
    let allowed = match op {
        "DecodeImage" => matches!(dtype, DType::UInt8 | DType::UInt16 | DType::Float32),
        "DecodePng" => matches!(dtype, DType::UInt8 | DType::UInt16),
        _ => dtype == DType::UInt8,
    };
    if !allowed {
        return Err(KernelError::DType(dtype));
    }
    let expand = op == "DecodeGif"
        || (op == "DecodeImage" && node.attr("expand_animations").and_then(AttrValue::as_bool).unwrap_or(true));
    let jpeg_opts = jpeg::Options::of(node)?;
    Ok(Some(Box::new(move |inp: Inputs| {
        arity(&inp, 1)?;
        let contents = scalar_contents(&inp[0])?;
        let wrong_op = |format: &str, ops: &str| {
            Err(KernelError::invalid(format!(
                "Trying to decode {format} format using DecodeBmp op. Use {ops} or `decode_image` instead."
            )))
        };
        // The decoded image, and whether it is `uint8` bytes still to widen (a PNG is decoded
        // straight to its dtype).
        let (t, from_bytes) = match other_format(contents) {
            Some("JPEG") => {
                if channels == 4 {
                    return Err(KernelError::invalid("JPEG does not support 4 channels"));
                }
                if op == "DecodeBmp" {
                    return wrong_op("JPEG", "`decode_jpeg`");
                }
                (as_frame(jpeg::decode(contents, jpeg_opts)?, op == "DecodeGif"), true)
            }
            Some("GIF") => {
                if !matches!(channels, 0 | 3) {
                    return Err(KernelError::invalid(format!("channels must be 0 or 3 for GIF, got {channels}")));
                }
                if op == "DecodeBmp" {
                    return wrong_op("GIF", "`decode_gif`");
                }
                let still = matches!(op, "DecodePng" | "DecodeJpeg");
                let mut t = gif::decode(contents, expand || still)?;
                if still && t.shape[0] != 1 {
                    return Err(KernelError::invalid(format!(
                        "Got {} frames, but animated gifs can only be decoded by tf.io.decode_gif or tf.io.decode_image",
                        t.shape[0]
                    )));
                }
                if !expand {
                    t.shape.remove(0);
                }
                (t, true)
            }
            Some(_) => {
                // `channels` = 1 is refused first (inside `bmp::decode` too), then the op.
                if channels != 1 && !matches!(op, "DecodeBmp" | "DecodeImage") {
                    return Err(KernelError::invalid(format!(
                        "Trying to decode BMP format using a wrong op. Use `decode_bmp` or `decode_image` instead. Op used: {op}"
                    )));
                }
                (bmp::decode(contents, channels)?, true)
            }
            None => {
                let raw = parse(contents)?;
                if op == "DecodeBmp" {
                    return wrong_op("PNG", "`decode_png`");
                }
                (as_frame(convert(&raw, channels as usize, dtype == DType::UInt16)?, op == "DecodeGif"), false)
            }
        };
        // TensorFlow widens a decoded JPEG's, GIF's or BMP's bytes by ×256 to `uint16`.
        let t = if from_bytes && dtype == DType::UInt16 { widen(t) } else { t };
        let t = if dtype == DType::Float32 { to_float(t) } else { t };
        one(t)
    })))
}

/// `t` with a leading frame axis when `frame` (`DecodeGif` given a still image).
fn as_frame(mut t: Tensor, frame: bool) -> Tensor {
    if frame {
        t.shape.insert(0, 1);
    }
    t
}

/// `DecodeAndCropJpeg`: the crop window `[y, x, height, width]` of a JPEG.
fn decode_and_crop(opts: jpeg::Options) -> PureFn {
    Box::new(move |inp: Inputs| {
        arity(&inp, 2)?;
        let contents = scalar_contents(&inp[0])?;
        let w = super::int_values(&inp[1], "crop_window")?;
        let [y, x, h, wd] = w[..] else {
            return Err(KernelError::invalid(format!("crop_window must have four elements, got {}", w.len())));
        };
        if let Some(f) = other_format(contents).or(Some("PNG")).filter(|f| *f != "JPEG") {
            return Err(KernelError::invalid(format!(
                "DecodeAndCropJpeg operation can run on JPEG only, but detected {f}."
            )));
        }
        one(jpeg::decode_window(contents, opts, Some([y, x, h, wd]))?)
    })
}

/// The encoded image: a scalar string.
fn scalar_contents(t: &Tensor) -> KResult<&[u8]> {
    match strings(t, "contents")? {
        [one] if t.shape.is_empty() && one.is_empty() => Err(KernelError::invalid("Input is empty.")),
        [one] if t.shape.is_empty() => Ok(one.as_slice()),
        _ => Err(KernelError::invalid(format!("contents must be a scalar, got shape {:?}", t.shape))),
    }
}

/// `uint8` samples as `uint16` × 256.
fn widen(t: Tensor) -> Tensor {
    let TensorData::Raw(b) = &t.data else { return t };
    let v: Vec<u8> = b.iter().flat_map(|&x| (x as u16 * 256).to_le_bytes()).collect();
    Tensor { dtype: DType::UInt16, shape: t.shape.clone(), data: TensorData::Raw(Arc::new(v)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PNG file from its IHDR fields and unfiltered rows (filter `kinds` per row cycled).
    fn png(width: u32, height: u32, depth: u8, color: u8, rows: &[Vec<u8>], extra: &[(&[u8; 4], Vec<u8>)]) -> Vec<u8> {
        fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], body: &[u8]) {
            out.extend_from_slice(&(body.len() as u32).to_be_bytes());
            out.extend_from_slice(kind);
            out.extend_from_slice(body);
            out.extend_from_slice(&[0, 0, 0, 0]); // CRC (not checked, as libpng's default for ancillary data is lenient)
        }
        let mut out = SIGNATURE.to_vec();
        let mut ihdr = width.to_be_bytes().to_vec();
        ihdr.extend_from_slice(&height.to_be_bytes());
        ihdr.extend_from_slice(&[depth, color, 0, 0, 0]);
        chunk(&mut out, b"IHDR", &ihdr);
        for (k, b) in extra {
            chunk(&mut out, k, b);
        }
        let raw: Vec<u8> = rows.iter().flat_map(|r| std::iter::once(0u8).chain(r.iter().copied())).collect();
        let z = miniz_oxide::deflate::compress_to_vec_zlib(&raw, 6);
        let (a, b) = z.split_at(z.len() / 2);
        chunk(&mut out, b"IDAT", a);
        chunk(&mut out, b"IDAT", b);
        chunk(&mut out, b"IEND", &[]);
        out
    }

    fn decode(bytes: &[u8], channels: usize) -> Vec<u8> {
        let t = convert(&parse(bytes).unwrap(), channels, false).unwrap();
        match t.data {
            TensorData::Raw(b) => b.to_vec(),
            _ => unreachable!(),
        }
    }

    #[test]
    fn filters_invert() {
        // Row 1 Sub-filtered, row 2 Up, row 3 Average, row 4 Paeth, over RGB pixels.
        let plain: Vec<Vec<u8>> = (0..4).map(|y| (0..9).map(|i| (i * 29 + y * 71) as u8).collect()).collect();
        let mut filtered = Vec::new();
        for (y, row) in plain.iter().enumerate() {
            let kind = (y + 1) as u8;
            filtered.push(kind);
            for x in 0..9 {
                let a = if x >= 3 { row[x - 3] as i32 } else { 0 };
                let b = if y > 0 { plain[y - 1][x] as i32 } else { 0 };
                let c = if x >= 3 && y > 0 { plain[y - 1][x - 3] as i32 } else { 0 };
                let p = match kind {
                    1 => a as u8,
                    2 => b as u8,
                    3 => ((a + b) / 2) as u8,
                    _ => paeth(a, b, c),
                };
                filtered.push(row[x].wrapping_sub(p));
            }
        }
        let got = unfilter(&filtered, 4, 9, 3).unwrap();
        assert_eq!(got, plain.concat());
    }

    #[test]
    fn conversions_follow_libpng() {
        // 2×1 RGB: grey by 601 weights in 15-bit fixed point; alpha added opaque.
        let rgb = png(2, 1, 8, 2, &[vec![255, 0, 0, 10, 200, 30]], &[]);
        assert_eq!(decode(&rgb, 0), vec![255, 0, 0, 10, 200, 30]);
        assert_eq!(decode(&rgb, 1), vec![76, 123]);
        assert_eq!(decode(&rgb, 4), vec![255, 0, 0, 255, 10, 200, 30, 255]);
        // 1-bit grey scales to 0/255 and becomes RGB on request.
        let bits = png(3, 1, 1, 0, &[vec![0b1010_0000]], &[]);
        assert_eq!(decode(&bits, 0), vec![255, 0, 255]);
        assert_eq!(decode(&bits, 3), vec![255, 255, 255, 0, 0, 0, 255, 255, 255]);
        // A palette with tRNS gives RGBA; an odd channel count drops the alpha.
        let pal = png(2, 1, 8, 3, &[vec![1, 0]], &[(b"PLTE", vec![1, 2, 3, 4, 5, 6]), (b"tRNS", vec![7])]);
        assert_eq!(decode(&pal, 0), vec![4, 5, 6, 255, 1, 2, 3, 7]);
        assert_eq!(decode(&pal, 3), vec![4, 5, 6, 1, 2, 3]);
        // 16-bit grey keeps its high byte; a tRNS key makes that grey transparent.
        let g16 = png(2, 1, 16, 0, &[vec![0x12, 0x34, 0xab, 0xcd]], &[(b"tRNS", vec![0xab, 0xcd])]);
        assert_eq!(decode(&g16, 2), vec![0x12, 0xff, 0xab, 0]);
    }

    #[test]
    fn adam7_interlacing_places_every_pixel() {
        // A 5×3 grey image interlaced by hand: pixel (x, y) holds 10·y + x.
        let (w, h) = (5usize, 3usize);
        let passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)];
        let mut rows = Vec::new();
        for (x0, y0, dx, dy) in passes {
            for y in (y0..h).step_by(dy) {
                let row: Vec<u8> = (x0..w).step_by(dx).map(|x| (10 * y + x) as u8).collect();
                if !row.is_empty() {
                    rows.push(row);
                }
            }
        }
        let mut bytes = png(w as u32, h as u32, 8, 0, &rows, &[]);
        bytes[8 + 8 + 12] = 1; // the IHDR's interlace byte
        let want: Vec<u8> = (0..h).flat_map(|y| (0..w).map(move |x| (10 * y + x) as u8)).collect();
        assert_eq!(decode(&bytes, 0), want);
    }

    /// Every truncation and every single-byte change of a few small PNGs decodes or fails
    /// cleanly: no panic, no out-of-bounds slice (hostile input, issue 13).
    #[test]
    fn mutated_files_never_panic() {
        let files = [
            png(3, 2, 8, 2, &[vec![1, 2, 3, 4, 5, 6, 7, 8, 9], vec![9, 8, 7, 6, 5, 4, 3, 2, 1]], &[]),
            png(
                5,
                2,
                2,
                3,
                &[vec![0b0001_1011, 0b0100_0000], vec![0b1110_0100, 0]],
                &[(b"PLTE", vec![7; 9]), (b"tRNS", vec![1])],
            ),
            png(2, 2, 16, 4, &[vec![1; 8], vec![2; 8]], &[]),
        ];
        for file in &files {
            for n in 0..file.len() {
                let _ = parse(&file[..n]).map(|r| convert(&r, 0, false));
            }
            for i in 0..file.len() {
                for flip in [0x01u8, 0x80, 0xff] {
                    let mut m = file.clone();
                    m[i] ^= flip;
                    if let Ok(r) = parse(&m) {
                        for ch in [0, 1, 3, 4] {
                            let _ = convert(&r, ch, ch == 4);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn corrupt_files_are_errors() {
        let good = png(2, 1, 8, 2, &[vec![1, 2, 3, 4, 5, 6]], &[]);
        assert!(parse(&good[..20]).is_err());
        assert!(parse(b"not a png").unwrap_err().to_string().contains("signature"));
        let mut bad_filter = good.clone();
        // Corrupt the zlib stream.
        let n = bad_filter.len();
        bad_filter[n - 20] ^= 0xff;
        assert!(parse(&bad_filter).is_err());
        assert_eq!(other_format(&[0xff, 0xd8, 0xff, 0xe0]), Some("JPEG"));
    }
}

/// Which op takes which format, and the shapes each gives, as TensorFlow's one kernel decides.
#[cfg(test)]
mod dispatch_tests {
    use autoclust_graph::{AttrValue, DType, Tensor};

    use crate::kernels::gif::tests::{gif, Frame};
    use crate::kernels::tests_support::{node, run1};

    const PALETTE: [[u8; 3]; 2] = [[10, 20, 30], [40, 50, 60]];

    fn frame(pixels: &[u8]) -> Frame<'_> {
        Frame { left: 0, top: 0, width: 2, height: 1, pixels, local: None, transparent: None }
    }

    fn decode(op: &str, attrs: &[(&str, AttrValue)], data: &[u8]) -> Result<Tensor, String> {
        let c = Tensor::from_strings(vec![], vec![data.to_vec()]).unwrap();
        run1(&node(op, attrs), &[c]).map_err(|e| e.to_string())
    }

    #[test]
    fn every_op_takes_the_formats_tensorflow_s_does() {
        let still = gif(Some(&PALETTE), &[frame(&[0, 1])]);
        let animated = gif(Some(&PALETTE), &[frame(&[0, 1]), frame(&[1, 1])]);
        let bmp = crate::kernels::bmp::tests::bmp(1, 1, 24, &[vec![1, 2, 3]]);
        assert_eq!(decode("DecodeGif", &[], &still).unwrap().shape, vec![1, 1, 2, 3]);
        assert_eq!(decode("DecodeImage", &[], &still).unwrap().shape, vec![1, 1, 2, 3]);
        let no_expand = [("expand_animations", AttrValue::B(false))];
        assert_eq!(decode("DecodeImage", &no_expand, &animated).unwrap().shape, vec![1, 2, 3]);
        assert_eq!(decode("DecodePng", &[], &still).unwrap().shape, vec![1, 2, 3]);
        let e = decode("DecodeJpeg", &[], &animated).unwrap_err();
        assert!(e.contains("Got 2 frames, but animated gifs can only be decoded by tf.io.decode_gif"), "{e}");
        let e = decode("DecodeImage", &[("channels", AttrValue::I(4))], &still).unwrap_err();
        assert!(e.contains("channels must be 0 or 3 for GIF, got 4"), "{e}");
        let e = decode("DecodeBmp", &[], &still).unwrap_err();
        assert!(e.contains("Trying to decode GIF format using DecodeBmp op"), "{e}");
        assert_eq!(decode("DecodeBmp", &[], &bmp).unwrap().shape, vec![1, 1, 3]);
        let u16 = [("dtype", AttrValue::Type(DType::UInt16))];
        let t = decode("DecodeImage", &u16, &bmp).unwrap();
        assert_eq!(t.to_f64_vec().unwrap(), vec![3.0 * 256.0, 2.0 * 256.0, 256.0]);
        let e = decode("DecodePng", &[], &bmp).unwrap_err();
        assert!(e.contains("Use `decode_bmp` or `decode_image` instead. Op used: DecodePng"), "{e}");
        let e = decode("DecodeImage", &[("channels", AttrValue::I(1))], &bmp).unwrap_err();
        assert!(e.contains("`channels` must be 0, 3 or 4 for BMP, but got 1"), "{e}");
        assert!(decode("DecodeGif", &[], b"").unwrap_err().contains("Input is empty."));
    }
}
