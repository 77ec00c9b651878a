//! BMP decoding as TensorFlow's `DecodeBmp` (and `DecodeImage` given a BMP) does it in
//! `decode_image_op.cc`: only four header fields are read — the pixel data's offset (byte 10),
//! the width (18), the signed height (22, negative for top-down rows) and the bits per pixel
//! (16-bit at 28) — and nothing else (compression and palette are ignored: an 8-bit file's
//! palette indices come out as grey levels, as TensorFlow gives them). `bpp / 8` must be 1, 3
//! or 4; rows are padded to 4 bytes; the file must end exactly after the last row. B,G,R(,A)
//! become R,G,B(,A); more channels than the file has are filled (grey repeated, alpha 255);
//! `channels = 1` is refused for a BMP whatever the file holds, as TensorFlow refuses it.

use std::sync::Arc;

use autoclust_graph::{DType, Tensor, TensorData};

use super::budget;
use crate::error::{KResult, KernelError};

fn le_i32(b: &[u8], at: usize) -> i32 {
    i32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Decodes `data` (which starts with `BM`) to `uint8` `[height, width, channels]`;
/// `channels` 0 keeps the file's.
pub(crate) fn decode(data: &[u8], channels: i64) -> KResult<Tensor> {
    let bad = |m: String| Err(KernelError::invalid(m));
    if channels == 1 {
        return bad("`channels` must be 0, 3 or 4 for BMP, but got 1".into());
    }
    if data.len() < 32 {
        return bad(format!(
            "Incomplete bmp content, requires at least 32 bytes to find the header size, width, height, and bpp, got {} bytes",
            data.len()
        ));
    }
    let offset = le_i32(data, 10);
    let width = le_i32(data, 18);
    let height = le_i32(data, 22);
    let bpp = i16::from_le_bytes([data[28], data[29]]);
    let file_channels = (bpp / 8) as i64;
    if !matches!(file_channels, 1 | 3 | 4) {
        return bad(format!("Number of channels inherent in the image must be 1, 3 or 4, was {file_channels}"));
    }
    let out_channels = if channels == 0 { file_channels } else { channels } as usize;
    if width <= 0 {
        return bad("Width must be positive".into());
    }
    if height == 0 {
        return bad("Height must be nonzero".into());
    }
    if offset < 0 {
        return bad("header size must be nonnegative".into());
    }
    let (w, h) = (width as i64, (height as i64).abs());
    if w * h >= (i32::MAX / 8) as i64 {
        return bad("Total possible pixel bytes must be less than 2^30".into());
    }
    let fc = file_channels as usize;
    let row = ((fc as i64 * w + 3) / 4 * 4) as usize;
    let (w, h) = (w as usize, h as usize);
    let diff = data.len() as i64 - offset as i64 - (row * h) as i64;
    if diff != 0 {
        return bad(format!(
            "Input size should match (header_size + row_size * abs_height) but they differ by {}",
            diff as i32
        ));
    }
    budget(DType::UInt8, &[h, w, out_channels])?;
    let pixels = &data[offset as usize..];
    let top_down = height < 0;
    let mut out = Vec::with_capacity(h * w * out_channels);
    for i in 0..h {
        let src = if top_down { i } else { h - 1 - i };
        let r = &pixels[src * row..src * row + w * fc];
        for p in r.chunks_exact(fc) {
            match (fc, out_channels) {
                (1, 1) => out.push(p[0]),
                (1, 3) => out.extend([p[0]; 3]),
                (1, _) => out.extend([p[0], p[0], p[0], 255]),
                (3, 3) | (4, 3) => out.extend([p[2], p[1], p[0]]),
                (3, _) => out.extend([p[2], p[1], p[0], 255]),
                _ => out.extend([p[2], p[1], p[0], p[3]]),
            }
        }
    }
    Ok(Tensor { dtype: DType::UInt8, shape: vec![h, w, out_channels], data: TensorData::Raw(Arc::new(out)) })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A BMP file: a 54-byte header (only the fields TensorFlow reads filled in) then `rows`
    /// as stored (bottom-up unless `height` < 0), each padded to 4 bytes.
    pub(crate) fn bmp(width: i32, height: i32, bpp: i16, rows: &[Vec<u8>]) -> Vec<u8> {
        let mut out = vec![0u8; 54];
        out[..2].copy_from_slice(b"BM");
        out[10..14].copy_from_slice(&54i32.to_le_bytes());
        out[14..18].copy_from_slice(&40i32.to_le_bytes());
        out[18..22].copy_from_slice(&width.to_le_bytes());
        out[22..26].copy_from_slice(&height.to_le_bytes());
        out[28..30].copy_from_slice(&bpp.to_le_bytes());
        for r in rows {
            out.extend_from_slice(r);
            out.resize(out.len() + (4 - r.len() % 4) % 4, 0);
        }
        out
    }

    fn bytes(t: &Tensor) -> (Vec<usize>, Vec<u8>) {
        match &t.data {
            TensorData::Raw(b) => (t.shape.clone(), b.to_vec()),
            _ => unreachable!(),
        }
    }

    #[test]
    fn rows_flip_and_colours_swap() {
        // 2x2, 24-bit, bottom-up: the stored first row is the image's last.
        let f = bmp(2, 2, 24, &[vec![1, 2, 3, 4, 5, 6], vec![7, 8, 9, 10, 11, 12]]);
        let (shape, v) = bytes(&decode(&f, 0).unwrap());
        assert_eq!(shape, vec![2, 2, 3]);
        assert_eq!(v, vec![9, 8, 7, 12, 11, 10, 3, 2, 1, 6, 5, 4]);
        // The same rows top-down, with alpha filled.
        let f = bmp(2, -2, 24, &[vec![1, 2, 3, 4, 5, 6], vec![7, 8, 9, 10, 11, 12]]);
        let (shape, v) = bytes(&decode(&f, 4).unwrap());
        assert_eq!(shape, vec![2, 2, 4]);
        assert_eq!(&v[..8], &[3, 2, 1, 255, 6, 5, 4, 255]);
        // 32-bit keeps its fourth byte as alpha, even 0; 8-bit is grey (the palette ignored).
        let f = bmp(1, 1, 32, &[vec![1, 2, 3, 0]]);
        assert_eq!(bytes(&decode(&f, 0).unwrap()).1, vec![3, 2, 1, 0]);
        assert_eq!(bytes(&decode(&f, 3).unwrap()).1, vec![3, 2, 1]);
        let f = bmp(3, 1, 8, &[vec![5, 6, 7]]);
        assert_eq!(bytes(&decode(&f, 0).unwrap()), (vec![1, 3, 1], vec![5, 6, 7]));
        assert_eq!(bytes(&decode(&f, 3).unwrap()).1, vec![5, 5, 5, 6, 6, 6, 7, 7, 7]);
    }

    #[test]
    fn malformed_files_are_errors_with_tensorflow_s_words() {
        let err = |f: &[u8], c: i64| decode(f, c).unwrap_err().to_string();
        let good = bmp(2, 2, 24, &[vec![0; 6], vec![0; 6]]);
        assert!(err(&good, 1).contains("must be 0, 3 or 4 for BMP"));
        assert!(err(&good[..20], 0).contains("requires at least 32 bytes"));
        let mut extra = good.clone();
        extra.push(0);
        assert!(err(&extra, 0).ends_with("they differ by 1"), "{}", err(&extra, 0));
        assert!(err(&good[..good.len() - 1], 0).ends_with("they differ by -1"));
        assert!(err(&bmp(2, 2, 16, &[vec![0; 4], vec![0; 4]]), 0).contains("must be 1, 3 or 4, was 2"));
        assert!(err(&bmp(0, 2, 24, &[]), 0).contains("Width must be positive"));
        assert!(err(&bmp(2, 0, 24, &[]), 0).contains("Height must be nonzero"));
        assert!(err(&bmp(1 << 20, 1 << 10, 24, &[]), 0).contains("less than 2^30"));
        let mut neg = good.clone();
        neg[10..14].copy_from_slice(&(-1i32).to_le_bytes());
        assert!(err(&neg, 0).contains("header size must be nonnegative"));
    }
}
