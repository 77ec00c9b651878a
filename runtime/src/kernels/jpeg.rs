//! JPEG decoding: `DecodeJpeg` and `DecodeImage` of a JPEG (`tf.io.decode_jpeg`,
//! `tf.io.decode_image`), the first op of most image-serving signatures.
//!
//! TensorFlow decodes with libjpeg-turbo; this decoder reproduces its output bit for bit on
//! the files libjpeg-turbo decodes without a warning:
//! - Huffman-coded baseline, extended (8-bit) and progressive frames, any number of scans,
//!   restart intervals, 1, 3 or 4 components with any integral sampling factors;
//! - the accurate integer inverse DCT (`JDCT_ISLOW`, TensorFlow's default
//!   `dct_method`), with its 13-bit fixed-point constants, its rounding and its output range
//!   table;
//! - "fancy" upsampling (the default `fancy_upscaling`): the triangle filters for 2×1, 2×2 and
//!   1×2 chroma, with their alternating rounding biases and edge rules (the rows above the top
//!   and below the last real row repeat it; 2×1 and 2×2 fall back to replication when the
//!   chroma is at most two samples wide); replication otherwise, and for `fancy_upscaling`
//!   false;
//! - YCbCr→RGB in libjpeg's 16-bit fixed-point tables; one channel of a colour file is its
//!   luma (Y) unconverted; a grey file to three channels repeats the sample; RGB files (an
//!   Adobe marker with transform 0, or component ids `R`,`G`,`B`), CMYK and YCCK files, the
//!   last two turned into RGB as TensorFlow's `jpeg_mem.cc` does (inverted when an Adobe
//!   marker is present).
//!
//! What libjpeg-turbo would only decode with a warning (a truncated or corrupt entropy-coded
//! segment, which it pads with zeros and TensorFlow returns as a grey-smeared image) is an
//! error here, as are the features it supports that this decoder does not: arithmetic coding,
//! lossless and hierarchical frames, 12-bit samples, `ratio` other than 1, the fast integer
//! DCT, and progressive files whose coefficients are not all refined (which libjpeg smooths).

use std::sync::Arc;

use autoclust_graph::{AttrValue, DType, Node, Tensor, TensorData};

use super::budget;
use crate::error::{KResult, KernelError};

fn bad(msg: impl Into<String>) -> KernelError {
    KernelError::invalid(format!("invalid JPEG data: {}", msg.into()))
}

fn unsupported(msg: impl Into<String>) -> KernelError {
    KernelError::invalid(format!("unsupported JPEG: {}", msg.into()))
}

/// Zigzag position → natural (row-major) position in an 8×8 block.
const NATURAL: [usize; 64] = [
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21,
    28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54,
    47, 55, 62, 63,
];

/// A canonical Huffman table: for each code length, the largest code and the index of its
/// first value.
#[derive(Clone, Debug, Default)]
struct Huffman {
    values: Vec<u8>,
    maxcode: [i32; 18],
    valptr: [i32; 17],
    mincode: [i32; 17],
}

impl Huffman {
    fn new(counts: &[u8; 16], values: Vec<u8>) -> KResult<Huffman> {
        let total: usize = counts.iter().map(|&c| c as usize).sum();
        if total != values.len() || total > 256 {
            return Err(bad("bad Huffman table"));
        }
        let mut h = Huffman { values, maxcode: [-1; 18], valptr: [0; 17], mincode: [0; 17] };
        let mut code = 0i32;
        let mut k = 0i32;
        for len in 1..=16 {
            let n = counts[len - 1] as i32;
            h.valptr[len] = k;
            h.mincode[len] = code;
            code += n;
            k += n;
            h.maxcode[len] = if n > 0 { code - 1 } else { -1 };
            if code > (1 << len) {
                return Err(bad("bad Huffman table"));
            }
            code <<= 1;
        }
        h.maxcode[17] = i32::MAX;
        Ok(h)
    }
}

/// The entropy-coded segment's bit reader: byte stuffing removed, stopping at a marker.
/// Reading past the segment's end (what libjpeg pads with zeros and a warning) is an error.
struct Bits<'a> {
    data: &'a [u8],
    pos: usize,
    acc: u64,
    /// Bits in `acc` (left-aligned at bit 63).
    n: u32,
    /// Of those, how many came from the data (the rest are the zeros after a marker).
    real: u32,
    at_marker: bool,
}

impl<'a> Bits<'a> {
    fn new(data: &'a [u8], pos: usize) -> Self {
        Bits { data, pos, acc: 0, n: 0, real: 0, at_marker: false }
    }

    fn fill(&mut self) {
        while self.n <= 56 {
            let mut byte = 0u8;
            let mut real = false;
            if !self.at_marker && self.pos < self.data.len() {
                let b = self.data[self.pos];
                if b == 0xff {
                    match self.data.get(self.pos + 1) {
                        Some(0) => {
                            self.pos += 2;
                            byte = 0xff;
                            real = true;
                        }
                        _ => self.at_marker = true,
                    }
                } else {
                    self.pos += 1;
                    byte = b;
                    real = true;
                }
            } else {
                self.at_marker = true;
            }
            self.acc |= (byte as u64) << (56 - self.n);
            self.n += 8;
            if real {
                self.real += 8;
            }
        }
    }

    fn take(&mut self, k: u32) -> KResult<u32> {
        if k == 0 {
            return Ok(0);
        }
        if self.n < k {
            self.fill();
        }
        if k > self.real {
            return Err(bad("premature end of the entropy-coded data"));
        }
        let v = (self.acc >> (64 - k)) as u32;
        self.acc <<= k;
        self.n -= k;
        self.real -= k;
        Ok(v)
    }

    fn bit(&mut self) -> KResult<bool> {
        Ok(self.take(1)? == 1)
    }

    fn decode(&mut self, h: &Huffman) -> KResult<u8> {
        if self.n < 16 {
            self.fill();
        }
        let mut code = 0i32;
        for len in 1..=16 {
            code = (code << 1) | ((self.acc >> (63 - (len - 1))) & 1) as i32;
            if code <= h.maxcode[len] {
                self.take(len as u32)?;
                let idx = h.valptr[len] + code - h.mincode[len];
                return h.values.get(idx as usize).copied().ok_or_else(|| bad("bad Huffman code"));
            }
        }
        Err(bad("bad Huffman code"))
    }

    /// `s` more bits as a signed coefficient (JPEG's EXTEND).
    fn extend(&mut self, s: u8) -> KResult<i32> {
        if s == 0 {
            return Ok(0);
        }
        if s > 16 {
            return Err(bad("bad Huffman value"));
        }
        let v = self.take(s as u32)? as i32;
        Ok(if v < (1 << (s - 1)) { v - (1 << s) + 1 } else { v })
    }

    /// Drops the buffered bits and continues at the byte after the marker that stopped them.
    fn restart(&mut self, expected: u8) -> KResult<()> {
        self.acc = 0;
        self.n = 0;
        self.real = 0;
        self.at_marker = false;
        while self.pos < self.data.len() && self.data[self.pos] == 0xff && self.data.get(self.pos + 1) == Some(&0xff) {
            self.pos += 1;
        }
        match self.data.get(self.pos..self.pos + 2) {
            Some([0xff, m]) if *m == 0xd0 + expected => {
                self.pos += 2;
                Ok(())
            }
            _ => Err(bad(format!("expected restart marker RST{expected}"))),
        }
    }
}

#[derive(Clone, Debug)]
struct Component {
    id: u8,
    h: usize,
    v: usize,
    tq: usize,
    /// Blocks per row and column in the coefficient buffer (padded to whole MCUs).
    bw: usize,
    bh: usize,
    coefs: Vec<i16>,
    dc_pred: i32,
    /// libjpeg's `coef_bits`: per coefficient, the point transform of its last scan (-1 never).
    coef_bits: [i32; 64],
}

#[derive(Debug, Default)]
struct Frame {
    width: usize,
    height: usize,
    progressive: bool,
    comps: Vec<Component>,
    maxh: usize,
    maxv: usize,
    mcux: usize,
    mcuy: usize,
    jfif: bool,
    adobe: Option<u8>,
}

impl Frame {
    /// The component's real sample width and height (`downsampled_width` / `_height`).
    fn comp_size(&self, c: &Component) -> (usize, usize) {
        ((self.width * c.h).div_ceil(self.maxh), (self.height * c.v).div_ceil(self.maxv))
    }
}

fn be16(b: &[u8], i: usize) -> KResult<usize> {
    b.get(i..i + 2).map(|s| u16::from_be_bytes([s[0], s[1]]) as usize).ok_or_else(|| bad("truncated marker segment"))
}

/// The body of the marker segment at `pos` (after the marker), and the position after it.
fn segment(b: &[u8], pos: usize) -> KResult<(&[u8], usize)> {
    let len = be16(b, pos)?;
    if len < 2 || pos + len > b.len() {
        return Err(bad("truncated marker segment"));
    }
    Ok((&b[pos + 2..pos + len], pos + len))
}

struct Decoder {
    frame: Option<Frame>,
    qt: [Option<[u16; 64]>; 4],
    dc: [Option<Huffman>; 4],
    ac: [Option<Huffman>; 4],
    restart_interval: usize,
    eobrun: u32,
}

/// One scan's header.
struct Scan {
    comps: Vec<(usize, usize, usize)>, // (component index, DC table, AC table)
    ss: usize,
    se: usize,
    ah: u32,
    al: u32,
}

fn parse_and_decode(b: &[u8]) -> KResult<(Frame, [Option<[u16; 64]>; 4])> {
    if !b.starts_with(&[0xff, 0xd8]) {
        return Err(bad("not a JPEG file (no SOI marker)"));
    }
    let mut d = Decoder {
        frame: None,
        qt: [None; 4],
        dc: Default::default(),
        ac: Default::default(),
        restart_interval: 0,
        eobrun: 0,
    };
    let mut pos = 2;
    let mut jfif = false;
    let mut adobe = None;
    loop {
        // Find the next marker, skipping fill bytes.
        if pos >= b.len() {
            return Err(bad("no EOI marker (the file is truncated)"));
        }
        if b[pos] != 0xff {
            return Err(bad(format!("expected a marker at byte {pos}")));
        }
        while pos < b.len() && b[pos] == 0xff {
            pos += 1;
        }
        let Some(&m) = b.get(pos) else { return Err(bad("no EOI marker (the file is truncated)")) };
        pos += 1;
        match m {
            0xd9 => break,
            0xc0..=0xc2 => {
                let (s, next) = segment(b, pos)?;
                pos = next;
                if d.frame.is_some() {
                    return Err(bad("more than one frame"));
                }
                d.frame = Some(parse_frame(s, m == 0xc2)?);
            }
            0xc3 | 0xc5..=0xc7 | 0xcb | 0xcd..=0xcf => {
                return Err(unsupported("lossless and hierarchical JPEG frames are not supported"));
            }
            0xc9 | 0xca => return Err(unsupported("arithmetic-coded JPEG is not supported")),
            0xc4 => {
                let (s, next) = segment(b, pos)?;
                pos = next;
                parse_dht(&mut d, s)?;
            }
            0xcc => {
                return Err(unsupported("arithmetic-coded JPEG is not supported"));
            }
            0xdb => {
                let (s, next) = segment(b, pos)?;
                pos = next;
                parse_dqt(&mut d, s)?;
            }
            0xdd => {
                let (s, next) = segment(b, pos)?;
                pos = next;
                d.restart_interval = be16(s, 0)?;
            }
            0xda => {
                let (s, next) = segment(b, pos)?;
                let scan = parse_sos(&d, s)?;
                pos = decode_scan(&mut d, &scan, b, next)?;
            }
            0xdc => return Err(unsupported("DNL markers are not supported")),
            0xd0..=0xd7 => return Err(bad("restart marker outside a scan")),
            0xd8 => return Err(bad("a second SOI marker")),
            0x01 => {}
            _ => {
                let (s, next) = segment(b, pos)?;
                pos = next;
                if m == 0xe0 && s.starts_with(b"JFIF\0") {
                    jfif = true;
                }
                if m == 0xee && s.len() >= 12 && s.starts_with(b"Adobe") {
                    adobe = Some(s[11]);
                }
            }
        }
    }
    let mut f = d.frame.ok_or_else(|| bad("no frame header"))?;
    f.jfif = jfif;
    f.adobe = adobe;
    Ok((f, d.qt))
}

fn parse_frame(s: &[u8], progressive: bool) -> KResult<Frame> {
    if s.len() < 6 {
        return Err(bad("truncated frame header"));
    }
    if s[0] != 8 {
        return Err(unsupported(format!("{}-bit samples are not supported (only 8-bit)", s[0])));
    }
    let height = be16(s, 1)?;
    let width = be16(s, 3)?;
    let n = s[5] as usize;
    if width == 0 || height == 0 {
        return Err(bad(format!("image size {width}x{height}")));
    }
    if s.len() != 6 + 3 * n || !matches!(n, 1 | 3 | 4) {
        return Err(unsupported(format!("{n} components (1, 3 or 4 are supported)")));
    }
    let mut comps = Vec::with_capacity(n);
    for i in 0..n {
        let c = &s[6 + 3 * i..9 + 3 * i];
        let (h, v) = ((c[1] >> 4) as usize, (c[1] & 15) as usize);
        if !(1..=4).contains(&h) || !(1..=4).contains(&v) || c[2] > 3 {
            return Err(bad("bad component sampling factors or table"));
        }
        comps.push(Component {
            id: c[0],
            h,
            v,
            tq: c[2] as usize,
            bw: 0,
            bh: 0,
            coefs: Vec::new(),
            dc_pred: 0,
            coef_bits: [-1; 64],
        });
    }
    let maxh = comps.iter().map(|c| c.h).max().unwrap_or(1);
    let maxv = comps.iter().map(|c| c.v).max().unwrap_or(1);
    let mcux = width.div_ceil(8 * maxh);
    let mcuy = height.div_ceil(8 * maxv);
    // The decoded planes take 64 bytes a block; refuse what the tensor budget would.
    let blocks: usize = comps.iter().map(|c| mcux * c.h * mcuy * c.v).sum();
    budget(DType::Int16, &[blocks, 64])?;
    for c in &mut comps {
        c.bw = mcux * c.h;
        c.bh = mcuy * c.v;
        c.coefs = vec![0; c.bw * c.bh * 64];
    }
    Ok(Frame { width, height, progressive, comps, maxh, maxv, mcux, mcuy, jfif: false, adobe: None })
}

fn parse_dht(d: &mut Decoder, mut s: &[u8]) -> KResult<()> {
    while !s.is_empty() {
        if s.len() < 17 {
            return Err(bad("truncated Huffman table"));
        }
        let (class, id) = (s[0] >> 4, (s[0] & 15) as usize);
        if class > 1 || id > 3 {
            return Err(bad("bad Huffman table class or id"));
        }
        let counts: [u8; 16] = s[1..17].try_into().unwrap();
        let total: usize = counts.iter().map(|&c| c as usize).sum();
        if s.len() < 17 + total {
            return Err(bad("truncated Huffman table"));
        }
        let h = Huffman::new(&counts, s[17..17 + total].to_vec())?;
        if class == 0 {
            d.dc[id] = Some(h);
        } else {
            d.ac[id] = Some(h);
        }
        s = &s[17 + total..];
    }
    Ok(())
}

fn parse_dqt(d: &mut Decoder, mut s: &[u8]) -> KResult<()> {
    while !s.is_empty() {
        let (precision, id) = (s[0] >> 4, (s[0] & 15) as usize);
        if precision > 1 || id > 3 {
            return Err(bad("bad quantisation table"));
        }
        let size = if precision == 0 { 64 } else { 128 };
        if s.len() < 1 + size {
            return Err(bad("truncated quantisation table"));
        }
        let mut t = [0u16; 64];
        for (k, &nat) in NATURAL.iter().enumerate() {
            t[nat] = if precision == 0 { s[1 + k] as u16 } else { u16::from_be_bytes([s[1 + 2 * k], s[2 + 2 * k]]) };
        }
        d.qt[id] = Some(t);
        s = &s[1 + size..];
    }
    Ok(())
}

fn parse_sos(d: &Decoder, s: &[u8]) -> KResult<Scan> {
    let f = d.frame.as_ref().ok_or_else(|| bad("scan before the frame header"))?;
    let n = *s.first().ok_or_else(|| bad("truncated scan header"))? as usize;
    if n == 0 || n > 4 || s.len() != 4 + 2 * n {
        return Err(bad("bad scan header"));
    }
    let mut comps = Vec::with_capacity(n);
    for i in 0..n {
        let (id, t) = (s[1 + 2 * i], s[2 + 2 * i]);
        let ci = f.comps.iter().position(|c| c.id == id).ok_or_else(|| bad(format!("scan names component {id}")))?;
        let (td, ta) = ((t >> 4) as usize, (t & 15) as usize);
        if td > 3 || ta > 3 {
            return Err(bad("bad Huffman table id in scan"));
        }
        comps.push((ci, td, ta));
    }
    let (ss, se) = (s[1 + 2 * n] as usize, s[2 + 2 * n] as usize);
    let (ah, al) = ((s[3 + 2 * n] >> 4) as u32, (s[3 + 2 * n] & 15) as u32);
    if f.progressive {
        let ok = if ss == 0 { se == 0 } else { ss <= se && se <= 63 && n == 1 };
        if !ok || al > 13 || (ah != 0 && ah != al + 1) {
            return Err(bad("bad progressive scan parameters"));
        }
    } else if ss != 0 || se != 63 || ah != 0 || al != 0 {
        return Err(bad("bad sequential scan parameters"));
    }
    if f.comps.iter().map(|c| c.h * c.v).sum::<usize>() > 10 && n > 1 {
        return Err(bad("too many blocks in an MCU"));
    }
    Ok(Scan { comps, ss, se, ah, al })
}

/// Decodes one scan's entropy-coded data starting at `pos`; returns the position of the
/// marker that ends it.
fn decode_scan(d: &mut Decoder, scan: &Scan, b: &[u8], pos: usize) -> KResult<usize> {
    let f = d.frame.as_mut().unwrap();
    for &(ci, td, ta) in &scan.comps {
        let needs_dc = scan.ss == 0 && scan.ah == 0;
        let needs_ac = scan.ss > 0 || !f.progressive;
        if (needs_dc && d.dc[td].is_none()) || (needs_ac && d.ac[ta].is_none()) {
            return Err(bad("scan uses an undefined Huffman table"));
        }
        let c = &mut f.comps[ci];
        c.dc_pred = 0;
        for k in scan.ss..=scan.se {
            if f.progressive && scan.ah != 0 && c.coef_bits[k] != scan.ah as i32 {
                return Err(bad("progressive refinement out of order"));
            }
            c.coef_bits[k] = scan.al as i32;
        }
    }
    d.eobrun = 0;
    let mut bits = Bits::new(b, pos);
    let single = scan.comps.len() == 1;
    // A single-component scan codes the component's own blocks, one per MCU; an
    // interleaved one whole MCUs.
    let (units_x, units_y) = if single {
        let c = &f.comps[scan.comps[0].0];
        let (w, h) = ((f.width * c.h).div_ceil(f.maxh).div_ceil(8), (f.height * c.v).div_ceil(f.maxv).div_ceil(8));
        (w, h)
    } else {
        (f.mcux, f.mcuy)
    };
    let total = units_x * units_y;
    let mut rst = 0u8;
    for unit in 0..total {
        if d.restart_interval > 0 && unit > 0 && unit % d.restart_interval == 0 {
            bits.restart(rst)?;
            rst = (rst + 1) & 7;
            d.eobrun = 0;
            for &(ci, _, _) in &scan.comps {
                f.comps[ci].dc_pred = 0;
            }
        }
        let (ux, uy) = (unit % units_x, unit / units_x);
        for &(ci, td, ta) in &scan.comps {
            let (h, v) = if single { (1, 1) } else { (f.comps[ci].h, f.comps[ci].v) };
            for by in 0..v {
                for bx in 0..h {
                    let c = &mut f.comps[ci];
                    let (x, y) = (ux * h + bx, uy * v + by);
                    let off = (y * c.bw + x) * 64;
                    let mut pred = c.dc_pred;
                    let block: &mut [i16; 64] = (&mut c.coefs[off..off + 64]).try_into().unwrap();
                    decode_block(
                        d.dc[td].as_ref(),
                        d.ac[ta].as_ref(),
                        &mut bits,
                        block,
                        &mut pred,
                        scan,
                        &mut d.eobrun,
                        f.progressive,
                    )?;
                    c.dc_pred = pred;
                }
            }
        }
    }
    // Skip to the marker after the scan (any remaining bits are padding).
    let mut p = bits.pos;
    while p + 1 < b.len() && !(b[p] == 0xff && b[p + 1] != 0 && !(0xd0..=0xd7).contains(&b[p + 1])) {
        p += 1;
    }
    if p + 1 >= b.len() {
        return Err(bad("no marker after the scan (the file is truncated)"));
    }
    Ok(p)
}

#[allow(clippy::too_many_arguments)]
fn decode_block(
    dc: Option<&Huffman>,
    ac: Option<&Huffman>,
    bits: &mut Bits<'_>,
    block: &mut [i16; 64],
    pred: &mut i32,
    scan: &Scan,
    eobrun: &mut u32,
    progressive: bool,
) -> KResult<()> {
    if !progressive {
        let s = bits.decode(dc.unwrap())?;
        *pred = pred.wrapping_add(bits.extend(s)?);
        block[0] = *pred as i16;
        let ac = ac.unwrap();
        let mut k = 1;
        while k < 64 {
            let rs = bits.decode(ac)?;
            let (r, s) = ((rs >> 4) as usize, rs & 15);
            if s != 0 {
                k += r;
                if k > 63 {
                    return Err(bad("coefficient index past the block"));
                }
                block[NATURAL[k]] = bits.extend(s)? as i16;
                k += 1;
            } else if r == 15 {
                k += 16;
            } else {
                break;
            }
        }
        return Ok(());
    }
    let al = scan.al;
    if scan.ss == 0 {
        if scan.ah == 0 {
            let s = bits.decode(dc.unwrap())?;
            *pred = pred.wrapping_add(bits.extend(s)?);
            block[0] = (*pred << al) as i16;
        } else if bits.bit()? {
            block[0] |= (1i32 << al) as i16;
        }
        return Ok(());
    }
    let ac = ac.unwrap();
    if scan.ah == 0 {
        if *eobrun > 0 {
            *eobrun -= 1;
            return Ok(());
        }
        let mut k = scan.ss;
        while k <= scan.se {
            let rs = bits.decode(ac)?;
            let (r, s) = ((rs >> 4) as u32, rs & 15);
            if s != 0 {
                k += r as usize;
                if k > scan.se {
                    return Err(bad("coefficient index past the band"));
                }
                block[NATURAL[k]] = (bits.extend(s)? << al) as i16;
            } else if r == 15 {
                k += 15;
            } else {
                *eobrun = (1 << r) + bits.take(r)? - 1;
                break;
            }
            k += 1;
        }
        return Ok(());
    }
    // AC refinement: one more bit of every coefficient already non-zero, and new ±1 << al
    // coefficients placed by zero-run counts that skip the non-zero ones.
    let p1 = 1i16 << al;
    let m1 = (-1i16) << al;
    let refine = |bits: &mut Bits<'_>, c: &mut i16| -> KResult<()> {
        if bits.bit()? && (*c & p1) == 0 {
            *c = if *c >= 0 { c.wrapping_add(p1) } else { c.wrapping_add(m1) };
        }
        Ok(())
    };
    let mut k = scan.ss;
    if *eobrun == 0 {
        while k <= scan.se {
            let rs = bits.decode(ac)?;
            let (mut r, s) = ((rs >> 4) as i32, rs & 15);
            let mut value = 0i16;
            if s != 0 {
                if s != 1 {
                    return Err(bad("bad refinement coefficient size"));
                }
                value = if bits.bit()? { p1 } else { m1 };
            } else if r != 15 {
                *eobrun = (1 << r) + bits.take(r as u32)?;
                break;
            }
            while k <= scan.se {
                let c = &mut block[NATURAL[k]];
                if *c != 0 {
                    refine(bits, c)?;
                } else {
                    if r == 0 {
                        break;
                    }
                    r -= 1;
                }
                k += 1;
            }
            if value != 0 {
                if k > scan.se {
                    return Err(bad("coefficient index past the band"));
                }
                block[NATURAL[k]] = value;
            }
            k += 1;
        }
    }
    if *eobrun > 0 {
        while k <= scan.se {
            let c = &mut block[NATURAL[k]];
            if *c != 0 {
                refine(bits, c)?;
            }
            k += 1;
        }
        *eobrun -= 1;
    }
    Ok(())
}

// The accurate integer IDCT's constants: FIX(x) = round(x · 2^13).
const CONST_BITS: u32 = 13;
const PASS1_BITS: u32 = 2;
const FIX_0_298631336: i64 = 2446;
const FIX_0_390180644: i64 = 3196;
const FIX_0_541196100: i64 = 4433;
const FIX_0_765366865: i64 = 6270;
const FIX_0_899976223: i64 = 7373;
const FIX_1_175875602: i64 = 9633;
const FIX_1_501321110: i64 = 12299;
const FIX_1_847759065: i64 = 15137;
const FIX_1_961570560: i64 = 16069;
const FIX_2_053119869: i64 = 16819;
const FIX_2_562915447: i64 = 20995;
const FIX_3_072711026: i64 = 25172;

fn descale(x: i64, n: u32) -> i64 {
    (x + (1 << (n - 1))) >> n
}

/// One 1-D pass of the Loeffler–Ligtenberg–Moschytz IDCT on `x[0..8]` (`x[k]` the k-th
/// frequency), as libjpeg's `jpeg_idct_islow` computes it; returns the eight outputs before
/// descaling, in order.
fn idct_1d(x: [i64; 8]) -> [i64; 8] {
    let (z2, z3) = (x[2], x[6]);
    let z1 = (z2 + z3) * FIX_0_541196100;
    let tmp2 = z1 + z3 * -FIX_1_847759065;
    let tmp3 = z1 + z2 * FIX_0_765366865;
    let tmp0 = (x[0] + x[4]) << CONST_BITS;
    let tmp1 = (x[0] - x[4]) << CONST_BITS;
    let (tmp10, tmp13, tmp11, tmp12) = (tmp0 + tmp3, tmp0 - tmp3, tmp1 + tmp2, tmp1 - tmp2);
    let (t0, t1, t2, t3) = (x[7], x[5], x[3], x[1]);
    let (z1, z2, z3, z4) = (t0 + t3, t1 + t2, t0 + t2, t1 + t3);
    let z5 = (z3 + z4) * FIX_1_175875602;
    let (t0, t1, t2, t3) = (t0 * FIX_0_298631336, t1 * FIX_2_053119869, t2 * FIX_3_072711026, t3 * FIX_1_501321110);
    let (z1, z2) = (z1 * -FIX_0_899976223, z2 * -FIX_2_562915447);
    let z3 = z3 * -FIX_1_961570560 + z5;
    let z4 = z4 * -FIX_0_390180644 + z5;
    let (t0, t1, t2, t3) = (t0 + z1 + z3, t1 + z2 + z4, t2 + z2 + z3, t3 + z1 + z4);
    [tmp10 + t3, tmp11 + t2, tmp12 + t1, tmp13 + t0, tmp13 - t0, tmp12 - t1, tmp11 - t2, tmp10 - t3]
}

/// libjpeg's post-IDCT range limit: `x + 128` clamped to [0, 255] for |x| < 512, wrapping
/// (its table is indexed by `x & 1023`) beyond.
fn range_limit(x: i64) -> u8 {
    let y = (x & 1023) as i32;
    match y {
        0..=127 => (y + 128) as u8,
        128..=511 => 255,
        512..=895 => 0,
        _ => (y - 896) as u8,
    }
}

/// Which inverse DCT libjpeg runs (`dct_method`): TensorFlow's default is the fast one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Idct {
    /// `JDCT_ISLOW` (`INTEGER_ACCURATE`).
    Accurate,
    /// `JDCT_IFAST` (`INTEGER_FAST` and the default `""`).
    Fast,
}

/// Dequantises one block and inverse-transforms it into `out` (row stride `stride`) in
/// libjpeg's two passes: `pass` over each column, the results narrowed by `mid` into the
/// workspace, `pass` over each row, and each output descaled and range-limited by `last`.
fn idct_2d(
    coefs: &[i16],
    q: &[i32; 64],
    out: &mut [u8],
    stride: usize,
    pass: fn([i64; 8]) -> [i64; 8],
    mid: fn(i64) -> i64,
    last: fn(i64) -> u8,
) {
    let mut ws = [0i64; 64];
    for col in 0..8 {
        let x: [i64; 8] = std::array::from_fn(|r| coefs[r * 8 + col] as i64 * q[r * 8 + col] as i64);
        let y = pass(x);
        for r in 0..8 {
            ws[r * 8 + col] = mid(y[r]);
        }
    }
    for row in 0..8 {
        let x: [i64; 8] = std::array::from_fn(|c| ws[row * 8 + c]);
        let y = pass(x);
        for c in 0..8 {
            out[row * stride + c] = last(y[c]);
        }
    }
}

/// One block with the accurate integer IDCT (`jpeg_idct_islow`).
fn idct_islow(coefs: &[i16], q: &[i32; 64], out: &mut [u8], stride: usize) {
    // The workspace holds C `int`s.
    let mid = |y: i64| descale(y, CONST_BITS - PASS1_BITS) as i32 as i64;
    let last = |y: i64| range_limit(descale(y, CONST_BITS + PASS1_BITS + 3));
    idct_2d(coefs, q, out, stride, idct_1d, mid, last)
}

/// The AAN scale factors `round(2^14 · a(u) · a(v))`, `a(0) = 1`, `a(k) = √2·cos(kπ/16)`,
/// by which libjpeg folds the fast IDCT's first multiplications into the quantisation table.
const AAN_SCALES: [i64; 64] = [
    16384, 22725, 21407, 19266, 16384, 12873, 8867, 4520, 22725, 31521, 29692, 26722, 22725, 17855, 12299, 6270, 21407,
    29692, 27969, 25172, 21407, 16819, 11585, 5906, 19266, 26722, 25172, 22654, 19266, 15137, 10426, 5315, 16384,
    22725, 21407, 19266, 16384, 12873, 8867, 4520, 12873, 17855, 16819, 15137, 12873, 10114, 6967, 3552, 8867, 12299,
    11585, 10426, 8867, 6967, 4799, 2446, 4520, 6270, 5906, 5315, 4520, 3552, 2446, 1247,
];

/// The fast IDCT's multiplier table: each quantiser times its AAN factor, kept to 2 more bits
/// (rounded).
fn ifast_table(q: &[u16; 64]) -> [i32; 64] {
    // libjpeg keeps them as `short`s.
    std::array::from_fn(|i| ((q[i] as i64 * AAN_SCALES[i] + (1 << 11)) >> 12) as i16 as i32)
}

/// One 1-D pass of the Arai–Agui–Nakajima IDCT as libjpeg's `jpeg_idct_ifast` computes it:
/// 8-bit constants, products truncated (`>> 8`, no rounding).
fn ifast_1d(x: [i64; 8]) -> [i64; 8] {
    const F1_082: i64 = 277;
    const F1_414: i64 = 362;
    const F1_847: i64 = 473;
    const F2_613: i64 = 669;
    let mul = |v: i64, c: i64| (v * c) >> 8;
    let (tmp10, tmp11) = (x[0] + x[4], x[0] - x[4]);
    let tmp13 = x[2] + x[6];
    let tmp12 = mul(x[2] - x[6], F1_414) - tmp13;
    let (tmp0, tmp3, tmp1, tmp2) = (tmp10 + tmp13, tmp10 - tmp13, tmp11 + tmp12, tmp11 - tmp12);
    let (z13, z10, z11, z12) = (x[5] + x[3], x[5] - x[3], x[1] + x[7], x[1] - x[7]);
    let tmp7 = z11 + z13;
    let tmp11 = mul(z11 - z13, F1_414);
    let z5 = mul(z10 + z12, F1_847);
    let tmp10 = mul(z12, F1_082) - z5;
    let tmp12 = mul(z10, -F2_613) + z5;
    let tmp6 = tmp12 - tmp7;
    let tmp5 = tmp11 - tmp6;
    let tmp4 = tmp10 + tmp5;
    [tmp0 + tmp7, tmp1 + tmp6, tmp2 + tmp5, tmp3 - tmp4, tmp3 + tmp4, tmp2 - tmp5, tmp1 - tmp6, tmp0 - tmp7]
}

/// One block with the fast IDCT (`jpeg_idct_ifast`; `q` from [`ifast_table`]): the
/// workspace keeps the first pass's values as they are, the outputs are truncated.
fn idct_ifast(coefs: &[i16], q: &[i32; 64], out: &mut [u8], stride: usize) {
    idct_2d(coefs, q, out, stride, ifast_1d, |y| y, |y| range_limit(y >> (PASS1_BITS + 3)))
}

/// A component's samples: `w × h` real ones in rows of `stride`.
struct Plane {
    data: Vec<u8>,
    stride: usize,
    w: usize,
    h: usize,
}

impl Plane {
    fn at(&self, x: usize, y: usize) -> i32 {
        self.data[y * self.stride + x] as i32
    }
}

/// One block's dequantise-and-transform: coefficients, multipliers, output, row stride.
type BlockIdct = fn(&[i16], &[i32; 64], &mut [u8], usize);

fn component_plane(f: &Frame, c: &Component, q: &[u16; 64], idct: Idct) -> Plane {
    let (q, transform): ([i32; 64], BlockIdct) = match idct {
        Idct::Accurate => (q.map(i32::from), idct_islow),
        Idct::Fast => (ifast_table(q), idct_ifast),
    };
    let stride = c.bw * 8;
    let mut data = vec![0u8; stride * c.bh * 8];
    for by in 0..c.bh {
        for bx in 0..c.bw {
            let off = (by * c.bw + bx) * 64;
            transform(&c.coefs[off..off + 64], &q, &mut data[by * 8 * stride + bx * 8..], stride);
        }
    }
    let (w, h) = f.comp_size(c);
    Plane { data, stride, w, h }
}

/// The component upsampled to `w` columns (the image's, or a crop's region) by `f.height` rows.
///
/// libjpeg-turbo picks the 2×1 and 2×2 methods from the whole image's chroma width (fancy when
/// it exceeds 2 samples) and keeps them for a crop's region unless that is under 2 samples
/// wide (then it picks again, from the region's). The methods are `jdsample.c`'s.
fn upsample(f: &Frame, c: &Component, p: &Plane, fancy: bool, w: usize) -> KResult<Vec<u8>> {
    let h = f.height;
    let whole = f.comp_size(c).0;
    let wide = p.w >= 2 && whole > 2;
    let (hx, vx) = (f.maxh / c.h, f.maxv / c.v);
    if !f.maxh.is_multiple_of(c.h) || !f.maxv.is_multiple_of(c.v) {
        return Err(unsupported("fractional sampling factors are not supported"));
    }
    let mut out = vec![0u8; w * h];
    let row = |y: usize| y.min(p.h - 1);
    match (hx, vx) {
        (1, 1) => {
            for y in 0..h {
                out[y * w..(y + 1) * w].copy_from_slice(&p.data[y * p.stride..y * p.stride + w]);
            }
        }
        (2, 1) if fancy && wide => {
            let mut line = vec![0u8; 2 * p.w];
            for y in 0..h {
                let r = |x: usize| p.at(x, y);
                let n = p.w;
                line[0] = r(0) as u8;
                line[1] = ((r(0) * 3 + r(1) + 2) >> 2) as u8;
                for i in 1..n - 1 {
                    let v = r(i) * 3;
                    line[2 * i] = ((v + r(i - 1) + 1) >> 2) as u8;
                    line[2 * i + 1] = ((v + r(i + 1) + 2) >> 2) as u8;
                }
                line[2 * n - 2] = ((r(n - 1) * 3 + r(n - 2) + 1) >> 2) as u8;
                line[2 * n - 1] = r(n - 1) as u8;
                out[y * w..(y + 1) * w].copy_from_slice(&line[..w]);
            }
        }
        (1, 2) if fancy => {
            for y in 0..h {
                let (r, up) = (y / 2, y % 2 == 0);
                let other = if up { row(r.saturating_sub(1)) } else { row(r + 1) };
                let bias = if up { 1 } else { 2 };
                for x in 0..w {
                    out[y * w + x] = ((p.at(x, r) * 3 + p.at(x, other) + bias) >> 2) as u8;
                }
            }
        }
        (2, 2) if fancy && wide => {
            let n = p.w;
            let mut sums = vec![0i32; n];
            let mut line = vec![0u8; 2 * n];
            for y in 0..h {
                let (r, up) = (y / 2, y % 2 == 0);
                let other = if up { row(r.saturating_sub(1)) } else { row(r + 1) };
                for (x, s) in sums.iter_mut().enumerate() {
                    *s = p.at(x, r) * 3 + p.at(x, other);
                }
                line[0] = ((sums[0] * 4 + 8) >> 4) as u8;
                line[1] = ((sums[0] * 3 + sums[1] + 7) >> 4) as u8;
                for i in 1..n - 1 {
                    line[2 * i] = ((sums[i] * 3 + sums[i - 1] + 8) >> 4) as u8;
                    line[2 * i + 1] = ((sums[i] * 3 + sums[i + 1] + 7) >> 4) as u8;
                }
                line[2 * n - 2] = ((sums[n - 1] * 3 + sums[n - 2] + 8) >> 4) as u8;
                line[2 * n - 1] = ((sums[n - 1] * 4 + 7) >> 4) as u8;
                out[y * w..(y + 1) * w].copy_from_slice(&line[..w]);
            }
        }
        _ => {
            for y in 0..h {
                for x in 0..w {
                    out[y * w + x] = p.data[(y / vx) * p.stride + x / hx];
                }
            }
        }
    }
    Ok(out)
}

const SCALEBITS: u32 = 16;
const ONE_HALF: i64 = 1 << (SCALEBITS - 1);

const fn fix16(x: f64) -> i64 {
    (x * (1u64 << SCALEBITS) as f64 + 0.5) as i64
}

/// libjpeg's YCbCr→RGB tables (`build_ycc_rgb_table`).
struct YccTables {
    cr_r: [i32; 256],
    cb_b: [i32; 256],
    cr_g: [i64; 256],
    cb_g: [i64; 256],
}

fn ycc_tables() -> YccTables {
    let mut t = YccTables { cr_r: [0; 256], cb_b: [0; 256], cr_g: [0; 256], cb_g: [0; 256] };
    for i in 0..256 {
        let x = i as i64 - 128;
        t.cr_r[i] = ((fix16(1.40200) * x + ONE_HALF) >> SCALEBITS) as i32;
        t.cb_b[i] = ((fix16(1.77200) * x + ONE_HALF) >> SCALEBITS) as i32;
        t.cr_g[i] = -fix16(0.71414) * x;
        t.cb_g[i] = -fix16(0.34414) * x + ONE_HALF;
    }
    t
}

fn clamp(x: i32) -> u8 {
    x.clamp(0, 255) as u8
}

/// `[y, cb, cr]` → RGB.
fn ycc_rgb(t: &YccTables, y: u8, cb: u8, cr: u8) -> [u8; 3] {
    let (y, cb, cr) = (y as i32, cb as usize, cr as usize);
    [clamp(y + t.cr_r[cr]), clamp(y + ((t.cb_g[cb] + t.cr_g[cr]) >> SCALEBITS) as i32), clamp(y + t.cb_b[cb])]
}

/// Decodes a JPEG file to `[height, width, channels]` `uint8` (`channels` 0: 1 for a grey
/// file, 3 otherwise).
pub(crate) fn decode(bytes: &[u8], opts: Options) -> KResult<Tensor> {
    decode_window(bytes, opts, None)
}

/// [`decode`] of the window `[y, x, height, width]` only (`DecodeAndCropJpeg`), as
/// libjpeg-turbo decodes one: the window's left edge moved left to an iMCU column boundary,
/// those columns upsampled as an image of their own (so its left and right columns use the
/// edge rules), all rows decoded, then the window cut out.
pub(crate) fn decode_window(bytes: &[u8], opts: Options, window: Option<[i64; 4]>) -> KResult<Tensor> {
    let (f, qt) = parse_and_decode(bytes)?;
    let nc = f.comps.len();
    let channels = if opts.channels == 0 { nc.min(3) } else { opts.channels };
    if !matches!(channels, 1 | 3) {
        return Err(KernelError::invalid(format!("JPEG images decode to 1 or 3 channels, not {channels}")));
    }
    if f.progressive {
        for c in &f.comps {
            if c.coef_bits[0] >= 0 && c.coef_bits[1..10].iter().any(|&b| b != 0) {
                return Err(unsupported(
                    "a progressive JPEG whose first AC coefficients are not fully refined (libjpeg smooths its blocks)",
                ));
            }
        }
    }
    // The region decoded: columns `x0 .. x0 + region_w` (the whole image without a window).
    let (x0, region_w, [wy, wx, wh, ww]) = match window {
        None => (0, f.width, [0, 0, f.height, f.width]),
        Some([y, x, h, w]) => {
            let fits = |o: i64, n: i64, size: usize| {
                o >= 0 && n > 0 && o.checked_add(n).is_some_and(|e| e as u128 <= size as u128)
            };
            if !fits(y, h, f.height) || !fits(x, w, f.width) {
                return Err(KernelError::invalid(format!(
                    "invalid crop window [{y}, {x}, {h}, {w}] for a {}x{} image",
                    f.height, f.width
                )));
            }
            let (y, x, h, w) = (y as usize, x as usize, h as usize, w as usize);
            let align = if nc == 1 { 8 } else { 8 * f.maxh };
            let x0 = x / align * align;
            (x0, w + x - x0, [y, x, h, w])
        }
    };
    let shape = vec![wh, ww, channels];
    budget(DType::UInt8, &[f.height, region_w, channels])?;
    // Colour space, as libjpeg's `default_decompress_parms` decides it.
    #[derive(PartialEq)]
    enum Space {
        Grey,
        Ycc,
        Rgb,
        Cmyk,
        Ycck,
    }
    let ids: Vec<u8> = f.comps.iter().map(|c| c.id).collect();
    let space = match nc {
        1 => Space::Grey,
        3 if f.jfif => Space::Ycc,
        3 => match f.adobe {
            Some(0) => Space::Rgb,
            Some(_) => Space::Ycc,
            None if ids == [b'R', b'G', b'B'] => Space::Rgb,
            None => Space::Ycc,
        },
        _ => match f.adobe {
            Some(2) => Space::Ycck,
            _ => Space::Cmyk,
        },
    };
    if channels == 1 && matches!(space, Space::Cmyk | Space::Ycck) {
        return Err(unsupported("a CMYK JPEG cannot be decoded to one channel"));
    }
    let mut planes = Vec::with_capacity(nc);
    for c in &f.comps {
        // One channel of a YCbCr file needs only its luma.
        if channels == 1 && planes.len() == 1 && space == Space::Ycc {
            break;
        }
        let q = qt[c.tq].as_ref().ok_or_else(|| bad("component uses an undefined quantisation table"))?;
        let mut p = component_plane(&f, c, q, opts.idct);
        if region_w != f.width {
            // The region's own columns of this component, as libjpeg-turbo's
            // `jpeg_crop_scanline` sets `downsampled_width` for them.
            let (cx, cw) = (x0 * c.h / f.maxh, (region_w * c.h).div_ceil(f.maxh));
            let rows = p.data.len() / p.stride;
            let data = (0..rows).flat_map(|r| p.data[r * p.stride + cx..r * p.stride + cx + cw].to_vec()).collect();
            p = Plane { data, stride: cw, w: cw, h: p.h };
        }
        planes.push(upsample(&f, c, &p, opts.fancy, region_w)?);
    }
    let n = region_w * f.height;
    let mut out = vec![0u8; n * channels];
    match (space, channels) {
        (Space::Grey, 1) | (Space::Ycc, 1) => out.copy_from_slice(&planes[0]),
        (Space::Grey, _) => {
            for (i, &y) in planes[0].iter().enumerate() {
                out[3 * i..3 * i + 3].fill(y);
            }
        }
        (Space::Ycc, _) => {
            let t = ycc_tables();
            for i in 0..n {
                out[3 * i..3 * i + 3].copy_from_slice(&ycc_rgb(&t, planes[0][i], planes[1][i], planes[2][i]));
            }
        }
        (Space::Rgb, 3) => {
            for i in 0..n {
                out[3 * i..3 * i + 3].copy_from_slice(&[planes[0][i], planes[1][i], planes[2][i]]);
            }
        }
        (Space::Rgb, _) => {
            // libjpeg's `rgb_gray_convert`: ITU-R 601 weights in 16-bit fixed point.
            for (i, o) in out.iter_mut().enumerate() {
                let (r, g, b) = (planes[0][i] as i64, planes[1][i] as i64, planes[2][i] as i64);
                *o = ((fix16(0.29900) * r + fix16(0.58700) * g + fix16(0.11400) * b + ONE_HALF) >> SCALEBITS) as u8;
            }
        }
        (space, _) => {
            let t = ycc_tables();
            let adobe = f.adobe.is_some();
            for i in 0..n {
                let [c, m, y] = if space == Space::Ycck {
                    let rgb = ycc_rgb(&t, planes[0][i], planes[1][i], planes[2][i]);
                    rgb.map(|v| 255 - v)
                } else {
                    [planes[0][i], planes[1][i], planes[2][i]]
                };
                let (c, m, y, k) = (c as i32, m as i32, y as i32, planes[3][i] as i32);
                let rgb = if adobe {
                    [k * c / 255, k * m / 255, k * y / 255]
                } else {
                    [(255 - k) * (255 - c) / 255, (255 - k) * (255 - m) / 255, (255 - k) * (255 - y) / 255]
                };
                out[3 * i..3 * i + 3].copy_from_slice(&rgb.map(|v| v as u8));
            }
        }
    }
    if window.is_some() {
        let (dx, row) = (wx - x0, region_w * channels);
        out =
            (wy..wy + wh).flat_map(|r| out[r * row + dx * channels..r * row + (dx + ww) * channels].to_vec()).collect();
    }
    Ok(Tensor { dtype: DType::UInt8, shape, data: TensorData::Raw(Arc::new(out)) })
}

/// The decoding attributes: `DecodeJpeg`'s, or TensorFlow's defaults for `DecodeImage` and
/// `DecodePng` given a JPEG (fancy upsampling and the fast IDCT).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Options {
    pub channels: usize,
    pub fancy: bool,
    pub idct: Idct,
}

impl Options {
    pub(crate) fn of(node: &Node) -> KResult<Options> {
        let channels = node.attr("channels").and_then(AttrValue::as_int).unwrap_or(0).max(0) as usize;
        let mut opts = Options { channels, fancy: true, idct: Idct::Fast };
        if !matches!(node.op.as_str(), "DecodeJpeg" | "DecodeAndCropJpeg") {
            return Ok(opts);
        }
        let ratio = node.attr("ratio").and_then(AttrValue::as_int).unwrap_or(1);
        if ratio != 1 {
            return Err(unsupported(format!("`ratio` {ratio} (only 1, full size, is supported)")));
        }
        opts.idct = match node.attr("dct_method").and_then(AttrValue::as_str).unwrap_or_default() {
            "" | "INTEGER_FAST" => Idct::Fast,
            "INTEGER_ACCURATE" => Idct::Accurate,
            other => {
                return Err(KernelError::invalid(format!(
                    "`dct_method` must be one of '', 'INTEGER_FAST', 'INTEGER_ACCURATE', not {other:?}"
                )))
            }
        };
        opts.fancy = node.attr("fancy_upscaling").and_then(AttrValue::as_bool).unwrap_or(true);
        Ok(opts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The O(n²) definition of the 2-D IDCT, rounded: libjpeg's integer IDCT is within one
    /// level of it.
    fn reference(coefs: &[i32; 64]) -> [f64; 64] {
        let c = |u: usize| if u == 0 { std::f64::consts::FRAC_1_SQRT_2 } else { 1.0 };
        let mut out = [0.0; 64];
        for y in 0..8 {
            for x in 0..8 {
                let mut s = 0.0;
                for v in 0..8 {
                    for u in 0..8 {
                        s += c(u)
                            * c(v)
                            * coefs[v * 8 + u] as f64
                            * (((2 * x + 1) as f64 * u as f64 * std::f64::consts::PI) / 16.0).cos()
                            * (((2 * y + 1) as f64 * v as f64 * std::f64::consts::PI) / 16.0).cos();
                    }
                }
                out[y * 8 + x] = (s / 4.0 + 128.0).clamp(0.0, 255.0);
            }
        }
        out
    }

    #[test]
    fn integer_idct_tracks_the_definition() {
        let mut seed = 12345u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as i32
        };
        let ones = [1i32; 64];
        for _ in 0..200 {
            let mut c = [0i32; 64];
            for (k, v) in c.iter_mut().enumerate() {
                let span = if k == 0 { 1024 } else { 64 >> (k / 16) };
                *v = next() % span - span / 2;
            }
            let coefs: Vec<i16> = c.iter().map(|&v| v as i16).collect();
            let mut out = [0u8; 64];
            idct_islow(&coefs, &ones, &mut out, 8);
            let r = reference(&c);
            for i in 0..64 {
                assert!((out[i] as f64 - r[i]).abs() <= 1.0, "sample {i}: {} vs {}", out[i], r[i]);
            }
        }
    }

    #[test]
    fn range_limit_is_libjpegs_table() {
        assert_eq!(range_limit(-128), 0);
        assert_eq!(range_limit(-1), 127);
        assert_eq!(range_limit(0), 128);
        assert_eq!(range_limit(127), 255);
        assert_eq!(range_limit(300), 255);
        assert_eq!(range_limit(-300), 0);
        // Beyond ±512 the table wraps.
        assert_eq!(range_limit(1024), 128);
    }

    #[test]
    fn ycc_tables_match_libjpeg() {
        let t = ycc_tables();
        // Neutral chroma leaves grey unchanged; the extremes saturate.
        assert_eq!(ycc_rgb(&t, 77, 128, 128), [77, 77, 77]);
        assert_eq!(t.cr_r[255], 178);
        assert_eq!(t.cb_b[0], -227);
        assert_eq!(ycc_rgb(&t, 255, 0, 255), [255, 208, 28]);
    }

    const FILES: [(&str, &[u8], [usize; 2]); 3] = [
        ("baseline 4:2:0", include_bytes!("../../../testdata/jpeg/tf_420_q75.jpg"), [37, 45]),
        (
            "progressive 4:2:0 with restarts",
            include_bytes!("../../../testdata/jpeg/pil_420_progressive_restart.jpg"),
            [30, 41],
        ),
        ("4:4:0", include_bytes!("../../../testdata/jpeg/patched_440.jpg"), [40, 24]),
    ];

    #[test]
    fn decodes_every_channel_count_and_method() {
        for (what, file, [h, w]) in FILES {
            for channels in [0, 1, 3] {
                for idct in [Idct::Fast, Idct::Accurate] {
                    for fancy in [true, false] {
                        let t =
                            decode(file, Options { channels, fancy, idct }).unwrap_or_else(|e| panic!("{what}: {e}"));
                        assert_eq!(t.shape, vec![h, w, if channels == 1 { 1 } else { 3 }], "{what}");
                    }
                }
            }
            // The two IDCTs differ, by at most a few levels.
            let fast = decode(file, Options { channels: 3, fancy: true, idct: Idct::Fast }).unwrap();
            let slow = decode(file, Options { channels: 3, fancy: true, idct: Idct::Accurate }).unwrap();
            let (TensorData::Raw(a), TensorData::Raw(b)) = (&fast.data, &slow.data) else { panic!() };
            assert!(a != b, "{what}");
            assert!(a.iter().zip(b.iter()).all(|(x, y)| x.abs_diff(*y) <= 8), "{what}");
        }
    }

    /// Truncations and bit flips anywhere give an image or an error, never a panic (the
    /// fuzzer's hostile-input contract).
    #[test]
    fn mutated_files_never_panic() {
        let opts = Options { channels: 0, fancy: true, idct: Idct::Fast };
        for (_, file, _) in FILES {
            for n in (0..file.len()).step_by(3) {
                let _ = decode(&file[..n], opts);
            }
            for i in 0..file.len() {
                for flip in [0x01u8, 0x80, 0xff] {
                    let mut m = file.to_vec();
                    m[i] ^= flip;
                    let _ = decode(&m, opts);
                }
            }
        }
        // A truncated entropy-coded segment is an error, not zeros.
        let (_, file, _) = FILES[0];
        let cut = &file[..file.len() - 40];
        assert!(decode(cut, opts).is_err());
    }

    #[test]
    fn crop_windows_are_checked_and_cut() {
        let (_, file, [h, w]) = FILES[0];
        let opts = Options { channels: 3, fancy: true, idct: Idct::Fast };
        let t = decode_window(file, opts, Some([2, 17, 5, 9])).unwrap();
        assert_eq!(t.shape, vec![5, 9, 3]);
        // The whole image as a window is the image.
        let whole = decode_window(file, opts, Some([0, 0, h as i64, w as i64])).unwrap();
        assert!(whole.bit_eq(&decode(file, opts).unwrap()));
        for bad in [[0, 0, 0, 1], [0, w as i64, 1, 1], [-1, 0, 1, 1], [0, 1, 1, i64::MAX]] {
            assert!(decode_window(file, opts, Some(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn corrupt_files_are_errors() {
        let opts = Options { channels: 0, fancy: true, idct: Idct::Fast };
        assert!(decode(b"", opts).is_err());
        assert!(decode(&[0xff, 0xd8, 0xff, 0xd9], opts).is_err());
        assert!(decode(&[0xff, 0xd8, 0xff, 0xc0, 0, 2], opts).is_err());
    }
}
