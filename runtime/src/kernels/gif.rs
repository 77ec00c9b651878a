//! GIF decoding as TensorFlow's `DecodeGif` (and `DecodeImage`/`DecodePng`/`DecodeJpeg` given
//! a GIF) does it: giflib 5.2.1's `DGifSlurp` with TensorFlow's image-counter patch, then
//! `gif_io.cc`'s compositing.
//!
//! Reading follows giflib record by record: extensions collect until the next image, whose
//! first graphics-control block (exactly 4 bytes) gives its transparent index; an image's
//! LZW data is decoded by giflib's algorithm (12-bit codes, deferred clear, interlaced rows
//! as four passes) and anything after its last pixel up to the block terminator is skipped.
//! A read or decode error ends the file: the images decoded before it are kept (the patch),
//! unless there are none or the error is an end code before the image's last pixel, which
//! fail.
//!
//! Compositing is `gif_io.cc`'s, not the GIF specification's: the canvas is as large as the
//! largest frame (not the screen descriptor), each frame starts from the previous one
//! (disposal methods are ignored; the first starts black), a frame is clipped to the canvas,
//! a transparent pixel keeps what is under it, and an index past the colour table is an error.
//! The result is `uint8` `[frames, height, width, 3]`.

use std::sync::Arc;

use autoclust_graph::{DType, Tensor, TensorData};

use super::budget;
use crate::error::{KResult, KernelError};

/// giflib's error codes that TensorFlow's messages name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GifError {
    ReadFailed,
    NotGif,
    NoScreenDescriptor,
    NoImageDescriptor,
    WrongRecord,
    ImageDefect,
    EofTooSoon,
    /// giflib returns an error without setting a code (an image of zero size).
    Unknown,
}

impl GifError {
    fn text(self) -> &'static str {
        match self {
            GifError::ReadFailed => "Failed to read from given file",
            GifError::NotGif => "Data is not in GIF format",
            GifError::NoScreenDescriptor => "No screen descriptor detected",
            GifError::NoImageDescriptor => "No Image Descriptor detected",
            GifError::WrongRecord => "Wrong record type detected",
            GifError::ImageDefect => "Image is defective, decoding aborted",
            GifError::EofTooSoon => "Image EOF detected before image complete",
            GifError::Unknown => "Unknown error",
        }
    }
}

type GResult<T> = Result<T, GifError>;

/// The file as giflib's memory reader sees it: a read of `n` bytes fails when fewer remain.
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> GResult<&'a [u8]> {
        if self.data.len() - self.pos < n {
            self.pos = self.data.len();
            return Err(GifError::ReadFailed);
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn byte(&mut self) -> GResult<u8> {
        Ok(self.take(1)?[0])
    }

    /// One data sub-block (`None` for the zero-length terminator).
    fn block(&mut self) -> GResult<Option<&'a [u8]>> {
        match self.byte()? {
            0 => Ok(None),
            n => self.take(n as usize).map(Some),
        }
    }

    fn colour_table(&mut self, flags: u8) -> GResult<Option<Palette>> {
        if flags & 0x80 == 0 {
            return Ok(None);
        }
        let n = 1usize << ((flags & 7) + 1);
        Ok(Some(self.take(3 * n)?.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect()))
    }
}

const LZ_MAX_CODE: usize = 4095;
const LZ_BITS: u32 = 12;
const NO_SUCH_CODE: usize = 4098;

/// giflib's LZW decoder state for one image (`DGifSetupDecompress` … `DGifDecompressLine`).
struct Lzw {
    bits_per_pixel: u32,
    clear: usize,
    eof: usize,
    running_code: usize,
    running_bits: u32,
    max_code1: usize,
    last_code: usize,
    shift_state: u32,
    shift_word: u64,
    /// The current data sub-block's unread bytes.
    block: Vec<u8>,
    block_pos: usize,
    prefix: Vec<usize>,
    suffix: Vec<u8>,
    stack: Vec<u8>,
}

impl Lzw {
    fn new(bits_per_pixel: u32) -> Lzw {
        let clear = 1 << bits_per_pixel;
        Lzw {
            bits_per_pixel,
            clear,
            eof: clear + 1,
            running_code: clear + 2,
            running_bits: bits_per_pixel + 1,
            max_code1: 1 << (bits_per_pixel + 1),
            last_code: NO_SUCH_CODE,
            shift_state: 0,
            shift_word: 0,
            block: Vec::new(),
            block_pos: 0,
            prefix: vec![NO_SUCH_CODE; LZ_MAX_CODE + 1],
            suffix: vec![0; LZ_MAX_CODE + 1],
            stack: Vec::with_capacity(LZ_MAX_CODE),
        }
    }

    /// `DGifBufferedInput`: the next byte of the data sub-blocks; a zero-length block here
    /// (the terminator before the end code) is a defect.
    fn next_byte(&mut self, r: &mut Reader<'_>) -> GResult<u8> {
        if self.block_pos == self.block.len() {
            let n = r.byte()?;
            if n == 0 {
                return Err(GifError::ImageDefect);
            }
            self.block = r.take(n as usize)?.to_vec();
            self.block_pos = 0;
        }
        self.block_pos += 1;
        Ok(self.block[self.block_pos - 1])
    }

    /// `DGifDecompressInput`: the next code, growing the code width as giflib does.
    fn code(&mut self, r: &mut Reader<'_>) -> GResult<usize> {
        if self.running_bits > LZ_BITS {
            return Err(GifError::ImageDefect);
        }
        while self.shift_state < self.running_bits {
            let b = self.next_byte(r)?;
            self.shift_word |= (b as u64) << self.shift_state;
            self.shift_state += 8;
        }
        let code = (self.shift_word & ((1 << self.running_bits) - 1)) as usize;
        self.shift_word >>= self.running_bits;
        self.shift_state -= self.running_bits;
        if self.running_code < LZ_MAX_CODE + 2 {
            self.running_code += 1;
            if self.running_code > self.max_code1 && self.running_bits < LZ_BITS {
                self.max_code1 <<= 1;
                self.running_bits += 1;
            }
        }
        Ok(code)
    }

    /// `DGifGetPrefixChar`: the first byte of `code`'s string.
    fn prefix_char(&self, mut code: usize) -> usize {
        let mut i = 0;
        while code > self.clear && i <= LZ_MAX_CODE {
            i += 1;
            if code > LZ_MAX_CODE {
                return NO_SUCH_CODE;
            }
            code = self.prefix[code];
        }
        code
    }

    /// `DGifDecompressLine`: fills `line`, pixels left on the stack carrying to the next call.
    fn line(&mut self, r: &mut Reader<'_>, line: &mut [u8]) -> GResult<()> {
        let mut i = 0;
        while i < line.len() {
            if let Some(b) = self.stack.pop() {
                line[i] = b;
                i += 1;
                continue;
            }
            let code = self.code(r)?;
            if code == self.eof {
                return Err(GifError::EofTooSoon);
            }
            if code == self.clear {
                self.prefix.iter_mut().for_each(|p| *p = NO_SUCH_CODE);
                self.running_code = self.eof + 1;
                self.running_bits = self.bits_per_pixel + 1;
                self.max_code1 = 1 << self.running_bits;
                self.last_code = NO_SUCH_CODE;
                continue;
            }
            let defined = self.running_code - 2;
            if code < self.clear {
                line[i] = code as u8;
                i += 1;
            } else {
                let mut prefix = code;
                if code > LZ_MAX_CODE || self.prefix[code] == NO_SUCH_CODE {
                    prefix = self.last_code;
                    let from = if code == defined { self.last_code } else { code };
                    let c = self.prefix_char(from) as u8;
                    if defined <= LZ_MAX_CODE {
                        self.suffix[defined] = c;
                    }
                    self.stack.push(c);
                }
                while self.stack.len() < LZ_MAX_CODE && prefix > self.clear && prefix <= LZ_MAX_CODE {
                    self.stack.push(self.suffix[prefix]);
                    prefix = self.prefix[prefix];
                }
                if self.stack.len() >= LZ_MAX_CODE || prefix > LZ_MAX_CODE {
                    return Err(GifError::ImageDefect);
                }
                self.stack.push(prefix as u8);
            }
            if self.last_code != NO_SUCH_CODE && defined <= LZ_MAX_CODE && self.prefix[defined] == NO_SUCH_CODE {
                self.prefix[defined] = self.last_code;
                let from = if code == defined { self.last_code } else { code };
                self.suffix[defined] = self.prefix_char(from) as u8;
            }
            self.last_code = code;
        }
        Ok(())
    }
}

/// One image as giflib keeps it.
struct Image {
    left: usize,
    top: usize,
    width: usize,
    height: usize,
    colours: Option<Palette>,
    /// Colour indices, rows top to bottom (interlacing undone).
    raster: Vec<u8>,
    transparent: Option<u8>,
}

/// An extension block: its function code (0 for a continuation) and bytes.
type Extension = (u8, Vec<u8>);

/// The first graphics-control block's transparent index (`DGifSavedExtensionToGCB`).
fn transparent_index(ext: &[Extension]) -> Option<u8> {
    let (_, b) = ext.iter().find(|(f, _)| *f == 0xF9)?;
    (b.len() == 4 && b[0] & 1 == 1).then(|| b[3])
}

/// Reads an image after its `0x2C`, taking the extensions read since the last image. An
/// error drops the image (TensorFlow's patch to giflib) and ends the file.
fn read_image(r: &mut Reader<'_>, ext: &mut Vec<Extension>) -> GResult<Image> {
    let d = r.take(9)?;
    let u16le = |i: usize| u16::from_le_bytes([d[i], d[i + 1]]) as usize;
    let (left, top, width, height, flags) = (u16le(0), u16le(2), u16le(4), u16le(6), d[8]);
    let colours = r.colour_table(flags)?;
    let bits = r.byte()? as u32;
    if bits > 8 {
        return Err(GifError::ReadFailed);
    }
    // Counted from here: a failure drops this image.
    if width == 0 || height == 0 {
        return Err(GifError::Unknown);
    }
    budget(DType::UInt8, &[height, width]).map_err(|_| GifError::ReadFailed)?;
    let mut raster = vec![0u8; width * height];
    let mut lzw = Lzw::new(bits);
    if flags & 0x40 != 0 {
        for (start, step) in [(0, 8), (4, 8), (2, 4), (1, 2)] {
            for y in (start..height).step_by(step) {
                lzw.line(r, &mut raster[y * width..(y + 1) * width])?;
            }
        }
    } else {
        lzw.line(r, &mut raster)?;
    }
    // Skip whatever follows the last pixel up to the block terminator.
    while r.block()?.is_some() {}
    let transparent = transparent_index(ext);
    ext.clear();
    Ok(Image { left, top, width, height, colours, raster, transparent })
}

/// A colour table.
type Palette = Vec<[u8; 3]>;

/// `DGifSlurp`: the global colour table and the images decoded before the end of the file
/// or the error that ended it early (TensorFlow logs that error and goes on).
fn slurp(data: &[u8]) -> Result<(Option<Palette>, Vec<Image>), String> {
    let open = |e: GifError| format!("failed to open gif file: {}", e.text());
    let mut r = Reader { data, pos: 0 };
    let magic = r.take(6).map_err(open)?;
    if &magic[..3] != b"GIF" {
        return Err(open(GifError::NotGif));
    }
    let screen = r.take(7).map_err(|_| open(GifError::NoScreenDescriptor))?;
    let global = r.colour_table(screen[4]).map_err(|_| open(GifError::NoScreenDescriptor))?;
    let mut images = Vec::new();
    let mut ext: Vec<Extension> = Vec::new();
    let err = loop {
        let record = match r.byte() {
            Ok(b) => b,
            Err(e) => break Some(e),
        };
        match record {
            0x2C => match read_image(&mut r, &mut ext) {
                Ok(img) => images.push(img),
                Err(e) => break Some(e),
            },
            0x21 => {
                let step = (|| -> GResult<()> {
                    let label = r.byte()?;
                    // giflib reads a second length byte when the first block is empty.
                    if let Some(b) = r.block()? {
                        ext.push((label, b.to_vec()));
                    }
                    while let Some(b) = r.block()? {
                        ext.push((0, b.to_vec()));
                    }
                    Ok(())
                })();
                if let Err(e) = step {
                    break Some(e);
                }
            }
            0x3B => break None,
            _ => break Some(GifError::WrongRecord),
        }
    };
    let err = err.or((images.is_empty()).then_some(GifError::NoImageDescriptor));
    let slurp_failed = |e: GifError| format!("failed to slurp gif file: {}", e.text());
    match err {
        Some(e) if images.is_empty() || e == GifError::EofTooSoon => Err(slurp_failed(e)),
        _ => Ok((global, images)),
    }
}

/// Decodes `data` (which starts with `GIF8`): all frames (`all_frames`) or the first, as
/// `uint8` `[frames, height, width, 3]`.
pub(crate) fn decode(data: &[u8], all_frames: bool) -> KResult<Tensor> {
    let fail = |m: String| KernelError::invalid(format!("Invalid GIF data (size {}), {m}", data.len()));
    let (global, images) = slurp(data).map_err(fail)?;
    let width = images.iter().map(|i| i.width).max().unwrap_or(0);
    let height = images.iter().map(|i| i.height).max().unwrap_or(0);
    let frames = if all_frames { images.len() } else { 1 };
    budget(DType::UInt8, &[frames, height, width, 3])?;
    let frame_len = height * width * 3;
    let mut out = vec![0u8; frames * frame_len];
    for (k, img) in images.iter().take(frames).enumerate() {
        if k > 0 {
            out.copy_within((k - 1) * frame_len..k * frame_len, k * frame_len);
        }
        let canvas = &mut out[k * frame_len..(k + 1) * frame_len];
        let (x0, y0) = (img.left.min(width), img.top.min(height));
        let (x1, y1) = ((img.left + img.width).min(width), (img.top + img.height).min(height));
        let Some(colours) = img.colours.as_ref().or(global.as_ref()) else {
            return Err(fail(format!("missing color map for frame {k}")));
        };
        for y in y0..y1 {
            for x in x0..x1 {
                let idx = img.raster[(y - img.top) * img.width + (x - img.left)];
                let px = &mut canvas[(y * width + x) * 3..(y * width + x) * 3 + 3];
                if Some(idx) == img.transparent {
                    if k == 0 {
                        px.fill(0);
                    }
                    continue;
                }
                let Some(c) = colours.get(idx as usize) else {
                    return Err(fail(format!("found color index {idx} outside of color map range {}", colours.len())));
                };
                px.copy_from_slice(c);
            }
        }
    }
    Ok(Tensor { dtype: DType::UInt8, shape: vec![frames, height, width, 3], data: TensorData::Raw(Arc::new(out)) })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// LZW-encodes `pixels` (each < 2^`bits`) as a GIF encoder does: a clear code first, codes
    /// growing to 12 bits, a clear when the table fills, the end code last; packed LSB first.
    pub(crate) fn lzw(pixels: &[u8], bits: u32) -> Vec<u8> {
        use std::collections::HashMap;
        let clear = 1usize << bits;
        let mut out: Vec<u8> = Vec::new();
        let (mut acc, mut nacc) = (0u64, 0u32);
        let mut width = bits + 1;
        let mut emit = |code: usize, width: u32, out: &mut Vec<u8>| {
            acc |= (code as u64) << nacc;
            nacc += width;
            while nacc >= 8 {
                out.push(acc as u8);
                acc >>= 8;
                nacc -= 8;
            }
        };
        let mut table: HashMap<(usize, u8), usize> = HashMap::new();
        let mut next = clear + 2;
        emit(clear, width, &mut out);
        let mut cur: Option<usize> = None;
        for &p in pixels {
            match cur {
                None => cur = Some(p as usize),
                Some(c) => {
                    if let Some(&n) = table.get(&(c, p)) {
                        cur = Some(n);
                    } else {
                        emit(c, width, &mut out);
                        if next < 4096 {
                            table.insert((c, p), next);
                            next += 1;
                            if next > (1 << width) && width < 12 {
                                width += 1;
                            }
                        } else {
                            emit(clear, width, &mut out);
                            table.clear();
                            next = clear + 2;
                            width = bits + 1;
                        }
                        cur = Some(p as usize);
                    }
                }
            }
        }
        if let Some(c) = cur {
            emit(c, width, &mut out);
            // The decoder grows its width one code later than the encoder adds an entry.
            if next < 4096 && next + 1 > (1 << width) && width < 12 {
                width += 1;
            }
        }
        emit(clear + 1, width, &mut out);
        if nacc > 0 {
            out.push(acc as u8);
        }
        out
    }

    /// Image data: the code size, then `codes` in sub-blocks of at most 255, then 0.
    pub(crate) fn blocks(bits: u8, codes: &[u8]) -> Vec<u8> {
        let mut v = vec![bits];
        for c in codes.chunks(255) {
            v.push(c.len() as u8);
            v.extend_from_slice(c);
        }
        v.push(0);
        v
    }

    pub(crate) struct Frame<'a> {
        pub left: u16,
        pub top: u16,
        pub width: u16,
        pub height: u16,
        pub pixels: &'a [u8],
        pub local: Option<&'a [[u8; 3]]>,
        pub transparent: Option<u8>,
    }

    /// A GIF file: the screen descriptor with `global` (a power-of-two size), then `frames`.
    pub(crate) fn gif(global: Option<&[[u8; 3]]>, frames: &[Frame<'_>]) -> Vec<u8> {
        let table_flag = |t: &[[u8; 3]]| 0x80 | (t.len().trailing_zeros() as u8 - 1);
        let mut v = b"GIF89a".to_vec();
        v.extend_from_slice(&[10, 0, 10, 0, global.map_or(0, table_flag), 0, 0]);
        for c in global.unwrap_or(&[]) {
            v.extend_from_slice(c);
        }
        for f in frames {
            if let Some(t) = f.transparent {
                v.extend_from_slice(&[0x21, 0xF9, 4, 1, 0, 0, t, 0]);
            }
            v.push(0x2C);
            for x in [f.left, f.top, f.width, f.height] {
                v.extend_from_slice(&x.to_le_bytes());
            }
            v.push(f.local.map_or(0, table_flag));
            for c in f.local.unwrap_or(&[]) {
                v.extend_from_slice(c);
            }
            v.extend(blocks(8, &lzw(f.pixels, 8)));
        }
        v.push(0x3B);
        v
    }

    fn frame(pixels: &[u8], w: u16, h: u16) -> Frame<'_> {
        Frame { left: 0, top: 0, width: w, height: h, pixels, local: None, transparent: None }
    }

    fn bytes(t: &Tensor) -> Vec<u8> {
        match &t.data {
            TensorData::Raw(b) => b.to_vec(),
            _ => unreachable!(),
        }
    }

    const PALETTE: [[u8; 3]; 4] = [[0, 0, 0], [255, 0, 0], [0, 255, 0], [0, 0, 255]];

    /// The decoder reads back what the test encoder wrote, for long runs (codes up to 12
    /// bits, a table reset) and random pixels alike.
    #[test]
    fn lzw_round_trips() {
        let mut rng = 12345u64;
        let mut pix = Vec::new();
        for i in 0..40_000 {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            pix.push(if i % 3000 < 1500 { (rng >> 60) as u8 } else { (i / 700) as u8 % 4 });
        }
        let data = blocks(8, &lzw(&pix, 8));
        let mut r = Reader { data: &data[1..], pos: 0 };
        let mut out = vec![0u8; pix.len()];
        Lzw::new(8).line(&mut r, &mut out).unwrap();
        assert_eq!(out, pix);
    }

    #[test]
    fn frames_compose_as_tensorflow_does() {
        // Frame 0 covers the top-left 2x2 of a 3x3 canvas (the canvas is the largest frame,
        // frame 1), frame 1 covers it all with index 0 transparent, frame 2 draws one pixel
        // outside the canvas (clipped) with a local table.
        let local = [[9, 9, 9], [8, 8, 8]];
        let f = gif(
            Some(&PALETTE),
            &[
                frame(&[1, 2, 3, 1], 2, 2),
                Frame { transparent: Some(0), ..frame(&[0, 0, 2, 0, 3, 0, 0, 0, 1], 3, 3) },
                Frame { left: 2, top: 2, local: Some(&local), ..frame(&[1, 0, 0, 0], 2, 2) },
            ],
        );
        let t = decode(&f, true).unwrap();
        assert_eq!(t.shape, vec![3, 3, 3, 3]);
        let v = bytes(&t);
        let px = |k: usize, y: usize, x: usize| &v[((k * 3 + y) * 3 + x) * 3..][..3];
        assert_eq!(px(0, 0, 0), &[255, 0, 0]);
        assert_eq!(px(0, 1, 1), &[255, 0, 0]);
        assert_eq!(px(0, 2, 2), &[0, 0, 0]); // outside frame 0: black
        assert_eq!(px(1, 0, 0), &[255, 0, 0]); // transparent: kept
        assert_eq!(px(1, 0, 2), &[0, 255, 0]);
        assert_eq!(px(1, 1, 1), &[0, 0, 255]);
        assert_eq!(px(1, 2, 2), &[255, 0, 0]);
        assert_eq!(px(2, 2, 2), &[8, 8, 8]); // the local table, clipped to one pixel
        assert_eq!(px(2, 1, 1), &[0, 0, 255]);
        let first = decode(&f, false).unwrap();
        assert_eq!(first.shape, vec![1, 3, 3, 3]);
        assert_eq!(bytes(&first), v[..27]);
    }

    #[test]
    fn interlaced_rows_land_in_order() {
        // Rows 0..10 stored in interlaced order 0,8 | 4 | 2,6 | 1,3,5,7,9.
        let rows: Vec<u8> = (0..10).collect();
        let stored: Vec<u8> = [0, 8, 4, 2, 6, 1, 3, 5, 7, 9].iter().map(|&r| rows[r] % 4).collect();
        let mut f = gif(Some(&PALETTE), &[frame(&stored, 1, 10)]);
        let flags = f.iter().position(|&b| b == 0x2C).unwrap() + 9;
        f[flags] |= 0x40;
        let v = bytes(&decode(&f, true).unwrap());
        let got: Vec<u8> = v.chunks(3).map(|c| PALETTE.iter().position(|p| p == c).unwrap() as u8).collect();
        assert_eq!(got, rows.iter().map(|r| r % 4).collect::<Vec<_>>());
    }

    #[test]
    fn broken_files_keep_earlier_frames_or_fail_as_tensorflow_does() {
        let good = gif(Some(&PALETTE), &[frame(&[1, 2, 3, 0], 2, 2), frame(&[3, 3, 3, 3], 2, 2)]);
        let err = |d: &[u8]| decode(d, true).unwrap_err().to_string();
        // A missing trailer: both frames.
        assert_eq!(decode(&good[..good.len() - 1], true).unwrap().shape[0], 2);
        // Truncated inside the second frame: the first survives.
        assert_eq!(decode(&good[..good.len() - 6], true).unwrap().shape[0], 1);
        // Truncated inside the first: nothing decoded.
        let e = err(&good[..30]);
        assert!(e.starts_with("Invalid GIF data (size 30), failed to slurp gif file:"), "{e}");
        assert!(err(&good[..8]).contains("failed to open gif file: No screen descriptor detected"));
        // An index past the table.
        let small = [[1, 2, 3], [4, 5, 6]];
        let e = err(&gif(Some(&small), &[frame(&[0, 3], 2, 1)]));
        assert!(e.ends_with("found color index 3 outside of color map range 2"), "{e}");
        // No colour table at all.
        assert!(err(&gif(None, &[frame(&[0], 1, 1)])).ends_with("missing color map for frame 0"));
        // An end code before the last pixel: fatal even after a good frame.
        let mut early = gif(Some(&PALETTE), &[frame(&[1], 1, 1)]);
        early.pop();
        early.push(0x2C);
        early.extend_from_slice(&[0, 0, 0, 0, 2, 0, 2, 0, 0]);
        early.extend(blocks(2, &lzw(&[1], 2)));
        early.push(0x3B);
        assert!(err(&early).ends_with("Image EOF detected before image complete"));
        // Garbage where a record should be: earlier frames kept.
        let mut junk = good.clone();
        let n = junk.len();
        junk[n - 1] = 0x99;
        assert_eq!(decode(&junk, true).unwrap().shape[0], 2);
    }

    /// Every truncation and single-byte change of a small animated file decodes or fails
    /// with an error; never a panic.
    #[test]
    fn mutations_never_panic() {
        let f = gif(
            Some(&PALETTE),
            &[frame(&[1, 2, 3, 0, 1, 2], 3, 2), Frame { transparent: Some(1), ..frame(&[1, 1, 2, 2, 3, 3], 2, 3) }],
        );
        for n in 0..f.len() {
            let _ = decode(&f[..n], true);
        }
        for i in 0..f.len() {
            for x in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut m = f.clone();
                m[i] ^= x;
                let _ = decode(&m, true);
            }
        }
    }
}
