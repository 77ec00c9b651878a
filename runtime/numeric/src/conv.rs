//! Convolutions: the 3-D ones (NDHWC) in [`volume`]'s, by the same lowering; here the 2-D
//! ones in NHWC — the window geometry, the attribute parsing and the
//! `Conv2D`/`Conv2DBackpropInput`/`Conv2DBackpropFilter` arithmetic that compiled clusters
//! (the compiler's `KernelOp::Conv`) and the interpreter's kernels
//! (`runtime/src/kernels/conv.rs`, `pool.rs`) share, so both compute the same numbers.
//!
//! `Conv2D` lowers each image to a column matrix (im2col: one row per output pixel, one
//! column per filter tap and input channel) and multiplies it by the HWIO filter, which is
//! already the `[KH·KW·C, O]` matrix, with the GEMM `MatMul` uses. The input gradient is
//! the transposed product scattered back (col2im); the filter gradient is `colᵀ · dy`
//! summed over the batch.
//!
//! Output sizes and padding follow TensorFlow's `GetWindowedOutputSize`: `VALID` has no
//! padding and `⌈(in − k_eff + 1) / stride⌉` outputs, `SAME` has `⌈in / stride⌉` outputs
//! with the padding split evenly (the extra element after), and `EXPLICIT` takes the
//! `explicit_paddings` attribute. `k_eff = (k − 1)·dilation + 1`. Only NHWC.
//!
//! Invariant: every function here is deterministic and independent of the thread count
//! (the GEMM's own invariant), so a compiled cluster and the interpreter agree bit for bit.

use autoclust_graph::{AttrValue, Node};

use crate::gemm::{gemm, gemm_strided, GemmElem};

pub mod volume;
mod winograd;

pub use volume::{conv3d, conv3d_backprop_filter, conv3d_backprop_input, VolumeShape};

/// Why a window op's attributes or operands are refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConvError {
    /// A required attribute is missing or has the wrong type.
    Attr(String),
    /// Attributes or shapes TensorFlow would reject (or this crate does not support).
    Invalid(String),
}

impl std::fmt::Display for ConvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConvError::Attr(a) => write!(f, "missing or malformed attribute '{a}'"),
            ConvError::Invalid(m) => f.write_str(m),
        }
    }
}

type CResult<T> = Result<T, ConvError>;

fn invalid<T>(m: impl Into<String>) -> CResult<T> {
    Err(ConvError::Invalid(m.into()))
}

/// How a window op pads its input.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Padding {
    Valid,
    Same,
    /// `(before, after)` for H and W, from `explicit_paddings` (NHWC order).
    Explicit([(usize, usize); 2]),
}

/// One spatial axis of a windowed op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Axis {
    pub input: usize,
    pub kernel: usize,
    pub stride: usize,
    pub dilation: usize,
    pub pad_before: usize,
    pub output: usize,
}

#[derive(Clone, Copy)]
enum Padding1 {
    Valid,
    Same,
    Explicit(usize, usize),
}

impl Axis {
    fn new(input: usize, kernel: usize, stride: usize, dilation: usize, pad: Padding1) -> CResult<Axis> {
        if stride == 0 || dilation == 0 {
            return invalid("strides and dilations must be positive");
        }
        if kernel == 0 {
            return invalid("window size must be positive");
        }
        let eff = (kernel - 1).checked_mul(dilation).and_then(|e| e.checked_add(1));
        let Some(eff) = eff else { return invalid("window too large") };
        let (output, pad_before) = match pad {
            Padding1::Valid => (if input < eff { 0 } else { (input - eff) / stride + 1 }, 0),
            Padding1::Same => {
                let out = input.div_ceil(stride);
                let needed = ((out.max(1) - 1) * stride + eff).saturating_sub(input);
                (out, needed / 2)
            }
            Padding1::Explicit(before, after) => {
                // Checked: a padding near 2^63 (found by fuzzing) must not wrap into a
                // small, inconsistent output size.
                let Some(padded) = input.checked_add(before).and_then(|p| p.checked_add(after)) else {
                    return invalid("explicit padding too large");
                };
                (if padded < eff { 0 } else { (padded - eff) / stride + 1 }, before)
            }
        };
        Ok(Axis { input, kernel, stride, dilation, pad_before, output })
    }

    /// An axis with TensorFlow's `SAME` (`same`) or `VALID` padding, for the window ops
    /// outside this module (the 3-D ones).
    pub fn windowed(input: usize, kernel: usize, stride: usize, dilation: usize, same: bool) -> CResult<Axis> {
        Axis::new(input, kernel, stride, dilation, if same { Padding1::Same } else { Padding1::Valid })
    }

    /// The taps of output `o` that read input (not padding): computed, not searched, so a
    /// huge window over a small input (a fuzzed `ksize` of 10¹²) costs its inside taps only.
    pub fn inside(&self, o: usize) -> std::ops::Range<usize> {
        let base = o * self.stride;
        let lo = self.pad_before.saturating_sub(base).div_ceil(self.dilation);
        let hi = (self.input + self.pad_before).saturating_sub(base).div_ceil(self.dilation).min(self.kernel);
        lo.min(hi)..hi
    }

    /// The axis of the forward convolution that computes this one's input gradient (see
    /// `ConvShape::transposed`): input and output swapped, padding `K − 1 − pad` before —
    /// for unit strides and dilations and a padding less than the window only.
    fn transposed(&self) -> Option<Axis> {
        (self.stride == 1 && self.dilation == 1 && self.pad_before < self.kernel).then_some(Axis {
            input: self.output,
            kernel: self.kernel,
            stride: 1,
            dilation: 1,
            pad_before: self.kernel - 1 - self.pad_before,
            output: self.input,
        })
    }

    /// The input index tap `k` of output `o` reads, if it is not padding.
    #[inline]
    pub fn source(&self, o: usize, k: usize) -> Option<usize> {
        let i = (o * self.stride + k * self.dilation).checked_sub(self.pad_before)?;
        (i < self.input).then_some(i)
    }
}

/// The geometry of a 2-D window op over NHWC data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Window {
    pub h: Axis,
    pub w: Axis,
}

impl Window {
    pub fn new(
        input: (usize, usize),
        kernel: (usize, usize),
        strides: (usize, usize),
        dilations: (usize, usize),
        padding: &Padding,
    ) -> CResult<Window> {
        let p = |axis: usize| match padding {
            Padding::Valid => Padding1::Valid,
            Padding::Same => Padding1::Same,
            Padding::Explicit(e) => Padding1::Explicit(e[axis].0, e[axis].1),
        };
        Ok(Window {
            h: Axis::new(input.0, kernel.0, strides.0, dilations.0, p(0))?,
            w: Axis::new(input.1, kernel.1, strides.1, dilations.1, p(1))?,
        })
    }
}

fn string_attr<'a>(node: &'a Node, name: &str) -> CResult<Option<&'a str>> {
    match node.attr(name) {
        None => Ok(None),
        Some(a) => a.as_str().map(Some).ok_or_else(|| ConvError::Attr(name.into())),
    }
}

/// Refuses any data format but NHWC.
pub fn require_nhwc(node: &Node) -> CResult<()> {
    match string_attr(node, "data_format")? {
        None | Some("NHWC") => Ok(()),
        Some(f) => invalid(format!("{} with data_format {f} is not supported (only NHWC)", node.op)),
    }
}

/// A 4-element NHWC attribute list (`strides`, `ksize`, `dilations`): its H and W
/// entries; the batch and channel entries must be 1.
pub fn hw_attr(node: &Node, name: &str, required: bool) -> CResult<(usize, usize)> {
    let v = match node.attr(name).map(AttrValue::as_int_list) {
        None if !required => return Ok((1, 1)),
        None | Some(None) => return Err(ConvError::Attr(name.into())),
        Some(Some(v)) => v,
    };
    if v.len() != 4 {
        return invalid(format!("{name} must have 4 elements, got {v:?}"));
    }
    if v[0] != 1 || v[3] != 1 {
        return invalid(format!("{} over the batch or depth dimension is not supported ({name} = {v:?})", node.op));
    }
    let pos = |x: i64| usize::try_from(x).ok().filter(|&x| x > 0);
    match (pos(v[1]), pos(v[2])) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => invalid(format!("{name} must be positive, got {v:?}")),
    }
}

/// Parses `padding` (and `explicit_paddings` when it is `EXPLICIT`).
pub fn padding_attr(node: &Node) -> CResult<Padding> {
    match string_attr(node, "padding")? {
        Some("VALID") => Ok(Padding::Valid),
        Some("SAME") => Ok(Padding::Same),
        Some("EXPLICIT") => {
            let e = node.attr("explicit_paddings").and_then(AttrValue::as_int_list).unwrap_or(&[]);
            if e.len() != 8 || e[0] != 0 || e[1] != 0 || e[6] != 0 || e[7] != 0 || e.iter().any(|&x| x < 0) {
                return invalid(format!(
                    "explicit_paddings must be 8 non-negative values with no batch or depth padding, got {e:?}"
                ));
            }
            Ok(Padding::Explicit([(e[2] as usize, e[3] as usize), (e[4] as usize, e[5] as usize)]))
        }
        Some(p) => invalid(format!("unknown padding {p}")),
        None => Err(ConvError::Attr("padding".into())),
    }
}

/// The attributes every NHWC window op shares.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WindowAttrs {
    pub strides: (usize, usize),
    pub dilations: (usize, usize),
    pub padding: Padding,
}

impl WindowAttrs {
    pub fn parse(node: &Node, dilated: bool) -> CResult<WindowAttrs> {
        require_nhwc(node)?;
        let strides = hw_attr(node, "strides", true)?;
        let dilations = if dilated { hw_attr(node, "dilations", false)? } else { (1, 1) };
        Ok(WindowAttrs { strides, dilations, padding: padding_attr(node)? })
    }

    /// The geometry of a convolution of `input` `[N,H,W,C]` by a `[KH,KW,C/G,O]` filter: a
    /// grouped convolution (Keras `Conv2D(groups=G)`) when the filter's in-depth divides the
    /// input depth `G > 1` times, as TensorFlow's shape function allows; `O` must be a
    /// multiple of `G` (TensorFlow's check).
    pub fn conv_window(&self, input: [usize; 4], filter: [usize; 4]) -> CResult<Window> {
        if filter[2] == 0 || !input[3].is_multiple_of(filter[2]) || input[3] == 0 {
            return invalid(format!(
                "input depth must be evenly divisible by filter depth: {} vs {}",
                input[3], filter[2]
            ));
        }
        let groups = input[3] / filter[2];
        if groups > 1 && !filter[3].is_multiple_of(groups) {
            return invalid(format!(
                "output depth must be evenly divisible by number of groups: {} vs {groups}",
                filter[3]
            ));
        }
        Window::new((input[1], input[2]), (filter[0], filter[1]), self.strides, self.dilations, &self.padding)
    }

    /// The geometry of a depthwise convolution of `input` `[N,H,W,C]` by a `[KH,KW,C,M]`
    /// filter (the filter's in-depth is the input's).
    pub fn depthwise_window(&self, input: [usize; 4], filter: [usize; 4]) -> CResult<Window> {
        if filter[2] != input[3] {
            return invalid(format!("input depth must equal the filter's input depth: {} vs {}", input[3], filter[2]));
        }
        Window::new((input[1], input[2]), (filter[0], filter[1]), self.strides, self.dilations, &self.padding)
    }
}

/// An element type convolutions run on.
///
/// # Safety
/// Every bit pattern of the type's size must be a valid value, and its size and alignment at
/// most 8 bytes: [`with_scratch`] hands out reused memory holding other values' bits.
pub unsafe trait ConvElem:
    GemmElem
    + Default
    + std::ops::AddAssign
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
{
    /// One half (Winograd's filter transform).
    fn half() -> Self;
}
// SAFETY: plain IEEE floats of 4 and 8 bytes.
unsafe impl ConvElem for f32 {
    fn half() -> f32 {
        0.5
    }
}
// SAFETY: as above.
unsafe impl ConvElem for f64 {
    fn half() -> f64 {
        0.5
    }
}

thread_local! {
    /// Each thread's im2col/partial-product buffer, kept between calls: a fresh buffer per
    /// convolution cost a zeroing pass and, for the large ones, fresh pages from the kernel
    /// (16% of a ResNet-50 training step in `clear_page`/`memset`).
    static SCRATCH: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` with a buffer of `len` elements whose contents are unspecified (earlier calls'
/// values): callers overwrite every element before reading it.
fn with_scratch<T: ConvElem, R>(len: usize, f: impl FnOnce(&mut [T]) -> R) -> R {
    const { assert!(std::mem::size_of::<T>() <= 8 && std::mem::align_of::<T>() <= 8) };
    let words = (len * std::mem::size_of::<T>()).div_ceil(8);
    let run = |v: &mut Vec<u64>| {
        if v.len() < words {
            v.resize(words, 0);
        }
        // SAFETY: the buffer holds at least `len` elements' bytes, 8-byte aligned (≥ T's
        // alignment), and every bit pattern is a valid T (`ConvElem`'s contract); the
        // borrow is exclusive for the call.
        f(unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<T>(), len) })
    };
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut v) => run(&mut v),
        // Nested on this thread (not done today): a fresh buffer keeps it correct.
        Err(_) => run(&mut Vec::new()),
    })
}

/// The shapes of one convolution: input `[N,H,W,C]`, filter `[KH,KW,C,O]`, its window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConvShape {
    pub input: [usize; 4],
    pub filter: [usize; 4],
    pub win: Window,
}

impl ConvShape {
    pub fn output(&self) -> [usize; 4] {
        [self.input[0], self.win.h.output, self.win.w.output, self.filter[3]]
    }
    /// The shape of one image's im2col buffer (of one group), `[OH·OW, KH·KW·C/G]`
    /// (saturating, for a size check before anything is allocated).
    pub fn im2col_shape(&self) -> [usize; 2] {
        let pixels = self.win.h.output.saturating_mul(self.win.w.output);
        let row = self.filter[0].saturating_mul(self.filter[1]).saturating_mul(self.filter[2]);
        [pixels, row]
    }
    /// Multiply-adds of one pass (forward, or either gradient): `N·OH·OW·KH·KW·C/G·O`
    /// (depthwise: `N·OH·OW·KH·KW·C·M`), saturating.
    pub fn macs(&self) -> usize {
        [self.input[0], self.win.h.output, self.win.w.output]
            .into_iter()
            .chain(self.filter)
            .fold(1, usize::saturating_mul)
    }
    /// How many groups a (grouped) convolution has: input depth / the filter's in-depth.
    pub fn groups(&self) -> usize {
        self.input[3].checked_div(self.filter[2]).unwrap_or(1).max(1)
    }
    fn pixels(&self) -> usize {
        self.win.h.output * self.win.w.output
    }
    /// The length of one im2col row: one group's taps, `KH·KW·C/G`.
    fn row(&self) -> usize {
        self.filter[0] * self.filter[1] * self.filter[2]
    }
    /// The forward convolution whose output is this one's input gradient, for an ungrouped
    /// convolution with unit strides and dilations whose padding is less than the window
    /// (`SAME` or `VALID`) and not pointwise: input `dy` `[N, OH, OW, O]`, filter
    /// `[KH, KW, O, C]` (this one's turned half a turn, depths swapped), padding
    /// `K − 1 − pad` before, output `[N, H, W, C]`. Input pixel `i` receives `dy[i − k + pad]`
    /// times tap `k`, which is tap `K − 1 − k` of an output `i` reading `dy[i + k' − (K − 1 − pad)]`.
    fn transposed(&self) -> Option<ConvShape> {
        if self.groups() != 1 || self.is_pointwise() {
            return None;
        }
        let win = Window { h: self.win.h.transposed()?, w: self.win.w.transposed()? };
        let [n, _, _, c] = self.input;
        let [kh, kw, _, o] = self.filter;
        Some(ConvShape { input: [n, self.win.h.output, self.win.w.output, o], filter: [kh, kw, o, c], win })
    }

    /// A 1×1 convolution with stride 1 and no padding: every output pixel is its input pixel
    /// times the filter, so the images are one `[N·H·W, C]` matrix and each pass is one GEMM
    /// per group with no im2col copy (ResNet's bottlenecks, MobileNet's expansions).
    fn is_pointwise(&self) -> bool {
        let unit = |a: &Axis| a.kernel == 1 && a.stride == 1 && a.pad_before == 0 && a.output == a.input;
        unit(&self.win.h) && unit(&self.win.w)
    }
}

/// Which pass of a pointwise convolution [`pointwise`] computes.
#[derive(Clone, Copy)]
enum Pointwise {
    /// `y [NP, O] = x [NP, C] · f [C, O]`, group by group.
    Forward,
    /// `dx [NP, C] = dy [NP, O] · fᵀ`.
    BackpropInput,
    /// `df [C/G, O] = xᵀ · dy`, the sum over every pixel of every image in one GEMM's
    /// reduction (whose order does not depend on the thread count).
    BackpropFilter,
}

/// One pass of a pointwise convolution ([`ConvShape::is_pointwise`]) as one strided GEMM per
/// group, written in place into `out` (the pass's result, dense and zeroed): `a` is `x` or
/// `dy`, `b` the filter or `dy`, as the variant says.
fn pointwise<T: ConvElem>(s: &ConvShape, pass: Pointwise, a: &[T], b: &[T], out: &mut [T], threads: usize) {
    let [n, h, w, c] = s.input;
    let o = s.filter[3];
    let (g, cg) = (s.groups(), s.filter[2]);
    let og = o / g;
    let np = n * h * w;
    let (ci, oi) = (c as isize, o as isize);
    for grp in 0..g {
        let (xc, oc) = (grp * cg, grp * og);
        // (m, k, n, a offset, rsa, csa, b offset, rsb, csb, c offset, rsc, a's and b's and
        // c's required lengths)
        let (m, k, nn, ao, rsa, csa, bo, rsb, csb, co, rsc, need) = match pass {
            Pointwise::Forward => (np, cg, og, xc, ci, 1, oc, oi, 1, oc, oi, [np * c, cg * o, np * o]),
            Pointwise::BackpropInput => (np, og, cg, oc, oi, 1, oc, 1, oi, xc, ci, [np * o, cg * o, np * c]),
            Pointwise::BackpropFilter => (cg, np, og, xc, 1, ci, oc, oi, 1, oc, oi, [np * c, np * o, cg * o]),
        };
        assert!(a.len() >= need[0] && b.len() >= need[1] && out.len() >= need[2], "pointwise operands too short");
        // SAFETY: with the lengths checked above, every element the strides address lies in
        // its slice: rows of `a`, `b` and `out` start at the group's column offset, which is
        // below the row length, and the last row plus its `k`/`n` columns ends within it.
        unsafe {
            gemm_strided(
                m,
                k,
                nn,
                a.as_ptr().add(ao),
                rsa,
                csa,
                b.as_ptr().add(bo),
                rsb,
                csb,
                out.as_mut_ptr().add(co),
                rsc,
                1,
                threads,
            )
        }
    }
}

/// im2col of channels `c0..c0 + cg` of one image `x` (`[H, W, C]`): `[OH·OW, KH·KW·cg]`,
/// zero where the tap is padding.
fn im2col<T: ConvElem>(x: &[T], channels: (usize, usize, usize), win: &Window, col: &mut [T]) {
    im2col_pixels(x, channels, win, 0..win.h.output * win.w.output, col);
}

/// The rows of [`im2col`] for output pixels `pixels` (row-major), into `col` from its start.
fn im2col_pixels<T: ConvElem>(
    x: &[T],
    (c, c0, cg): (usize, usize, usize),
    win: &Window,
    pixels: std::ops::Range<usize>,
    col: &mut [T],
) {
    let (kh, kw) = (win.h.kernel, win.w.kernel);
    let row = kh * kw * cg;
    // All channels and adjacent taps: a window row whose taps all lie inside the input is one
    // contiguous run of `KW·C` values in both the input and the column row — one copy
    // instead of `KW` (each a library call for a few dozen values).
    let whole_rows = cg == c && win.w.dilation == 1;
    let first = pixels.start;
    for pix in pixels {
        let (oy, ox) = (pix / win.w.output, pix % win.w.output);
        {
            let dst = &mut col[(pix - first) * row..][..row];
            for ky in 0..kh {
                let iy = win.h.source(oy, ky);
                if let (true, Some(iy), Some(ix0), Some(_)) =
                    (whole_rows, iy, win.w.source(ox, 0), win.w.source(ox, kw - 1))
                {
                    dst[ky * kw * c..][..kw * c].copy_from_slice(&x[(iy * win.w.input + ix0) * c..][..kw * c]);
                    continue;
                }
                for kx in 0..kw {
                    let d = &mut dst[(ky * kw + kx) * cg..][..cg];
                    match (iy, win.w.source(ox, kx)) {
                        (Some(iy), Some(ix)) => d.copy_from_slice(&x[(iy * win.w.input + ix) * c + c0..][..cg]),
                        _ => d.fill(T::default()),
                    }
                }
            }
        }
    }
}

/// col2im: adds `col` (`[OH·OW, KH·KW·cg]`) back into channels `c0..c0 + cg` of one image
/// `dx` (`[H, W, C]`).
fn col2im<T: ConvElem>(col: &[T], (c, c0, cg): (usize, usize, usize), win: &Window, dx: &mut [T]) {
    let (kh, kw) = (win.h.kernel, win.w.kernel);
    let row = kh * kw * cg;
    for oy in 0..win.h.output {
        for ox in 0..win.w.output {
            let src = &col[(oy * win.w.output + ox) * row..][..row];
            for ky in 0..kh {
                let Some(iy) = win.h.source(oy, ky) else { continue };
                for kx in 0..kw {
                    let Some(ix) = win.w.source(ox, kx) else { continue };
                    let d = &mut dx[(iy * win.w.input + ix) * c + c0..][..cg];
                    for (p, &q) in d.iter_mut().zip(&src[(ky * kw + kx) * cg..][..cg]) {
                        *p += q;
                    }
                }
            }
        }
    }
}

/// `C[m×n] = A·B` with A and B given by row and column strides; slices checked here.
#[allow(clippy::too_many_arguments)]
fn mm<T: ConvElem>(
    m: usize,
    k: usize,
    n: usize,
    a: &[T],
    rsa: isize,
    csa: isize,
    b: &[T],
    rsb: isize,
    csb: isize,
    c: &mut [T],
    threads: usize,
) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n, "gemm operands too short");
    // SAFETY: the slices hold at least m·k, k·n and m·n elements, and every stride pair used
    // by the callers addresses exactly those row- or column-major layouts; `c` is a
    // distinct mutable slice.
    unsafe { gemm(m, k, n, a.as_ptr(), rsa, csa, b.as_ptr(), rsb, csb, c.as_mut_ptr(), threads) }
}

/// A mutable buffer shared by the parts of one parallel section, each writing its own
/// disjoint elements.
#[derive(Clone, Copy)]
struct Shared<T>(*mut T);
// SAFETY: the parts that share it write disjoint ranges (see each use) and the section
// ends before the buffer is read or dropped.
unsafe impl<T> Send for Shared<T> {}
unsafe impl<T> Sync for Shared<T> {}

impl<T> Shared<T> {
    /// The `len` elements from `at`.
    ///
    /// # Safety
    /// No other live slice may overlap `[at, at + len)`, which must lie in the buffer.
    #[allow(clippy::mut_from_ref)]
    unsafe fn slice(&self, at: usize, len: usize) -> &mut [T] {
        // SAFETY: forwarded from the caller.
        unsafe { std::slice::from_raw_parts_mut(self.0.add(at), len) }
    }
}

/// Runs `per_image(b, col)` for every image `b` of `n`, each part of the split with its own
/// column buffer of `col_len` elements: over the images, in parallel, when there are
/// several images and threads (each image's GEMM then runs on one thread); otherwise image
/// by image, each GEMM with every thread. Which thread computes an image never changes its
/// numbers (the GEMM's own invariant), so neither does the split.
fn over_images<T: ConvElem>(
    n: usize,
    col_len: usize,
    threads: usize,
    per_image: &(dyn Fn(usize, &mut [T], usize) + Sync),
) {
    if threads > 1 && n > 1 {
        let parts = threads.min(n);
        let chunk = n.div_ceil(parts);
        crate::team::run(parts, &|p| {
            with_scratch(col_len, |col| {
                for b in p * chunk..((p + 1) * chunk).min(n) {
                    per_image(b, col, 1);
                }
            })
        });
    } else {
        with_scratch(col_len, |col| {
            for b in 0..n {
                per_image(b, col, threads);
            }
        })
    }
}

/// `Conv2D`: `x` `[N,H,W,C]` by `f` `[KH,KW,C/G,O]` → `[N,OH,OW,O]`. With `G > 1` groups,
/// output channels `g·O/G..(g+1)·O/G` are input channels `g·C/G..(g+1)·C/G` convolved with
/// their filter columns: one im2col and one GEMM per group — except with one input channel
/// per group (`G = C`, ConvNeXt's and Keras' `DepthwiseConv2D`-as-`groups` layers), which is a
/// depthwise convolution ([`ConvShape::as_depthwise`]).
pub fn conv2d<T: ConvElem>(s: &ConvShape, x: &[T], f: &[T], threads: usize) -> Vec<T> {
    if let Some(d) = s.as_depthwise() {
        return depthwise_conv2d(&d, x, f, threads);
    }
    let [n, h, w, c] = s.input;
    let o = s.filter[3];
    let (g, cg) = (s.groups(), s.filter[2]);
    let og = o / g;
    let (pixels, row) = (s.pixels(), s.row());
    if winograd::applies(s) && winograd::pays(s) {
        // Before allocating: the Winograd path makes its own output.
        return winograd::conv2d(s, x, f, threads);
    }
    let mut out = vec![T::default(); n * pixels * o];
    if out.is_empty() {
        return out;
    }
    if s.is_pointwise() {
        pointwise(s, Pointwise::Forward, x, f, &mut out, threads);
        return out;
    }
    let dst = Shared(out.as_mut_ptr());
    let stack = stacked_images(pixels, n);
    if g == 1 && stack > 1 && crate::gemm::sums_alike_for_any_rows(row) {
        // Few output pixels per image (a deep network's last stages): the im2col rows of
        // `stack` consecutive images, one GEMM — the filter is read once per stack, not once
        // per image. Taken only at depths whose sums do not depend on the product's row count
        // (`gemm::sums_alike_for_any_rows`), so an image's output is the same bits whatever
        // the batch and wherever the image sits in it (a last, partial stack included).
        let units = n.div_ceil(stack);
        over_images::<T>(units, stack * pixels * row, threads, &|u, col, t| {
            let images = u * stack..((u + 1) * stack).min(n);
            let m = images.len() * pixels;
            for (k, b) in images.clone().enumerate() {
                im2col(
                    &x[b * h * w * c..][..h * w * c],
                    (c, 0, c),
                    &s.win,
                    &mut col[k * pixels * row..][..pixels * row],
                );
            }
            // SAFETY: the stack's output rows are its own.
            let y = unsafe { dst.slice(images.start * pixels * o, m * o) };
            mm(m, row, o, col, row as isize, 1, f, o as isize, 1, y, t);
        });
        return out;
    }
    // A few output channels (a segmentation head's one): the product is cheap beside the
    // im2col copy, which is then made and read a block of pixels at a time, in cache — the
    // same sums (blocks taken only where they do not depend on the row count).
    let block = if g == 1 && o < NARROW_OUTPUT && crate::gemm::sums_alike_for_any_rows(row) {
        (NARROW_BLOCK_FLOATS / row.max(1)).clamp(8, pixels.max(8))
    } else {
        pixels
    };
    let scratch = if g > 1 { pixels * og } else { 0 };
    over_images::<T>(n, block.min(pixels) * row + scratch, threads, &|b, buf, t| {
        let (col, tmp) = buf.split_at_mut(block.min(pixels) * row);
        let xb = &x[b * h * w * c..][..h * w * c];
        // SAFETY: image b's output rows are its own.
        let y = unsafe { dst.slice(b * pixels * o, pixels * o) };
        if g == 1 {
            for p0 in (0..pixels).step_by(block) {
                let rows = block.min(pixels - p0);
                im2col_pixels(xb, (c, 0, c), &s.win, p0..p0 + rows, col);
                mm(rows, row, o, col, row as isize, 1, f, o as isize, 1, &mut y[p0 * o..][..rows * o], t);
            }
            return;
        }
        for grp in 0..g {
            im2col(xb, (c, grp * cg, cg), &s.win, col);
            // tmp [pixels, O/G] = col · the group's filter columns (row stride O).
            mm(pixels, row, og, col, row as isize, 1, &f[grp * og..], o as isize, 1, tmp, t);
            for (yr, tr) in y.chunks_mut(o).zip(tmp.chunks(og)) {
                yr[grp * og..][..og].copy_from_slice(tr);
            }
        }
    });
    out
}

/// `Conv2DBackpropInput`: the gradient `[N,H,W,C]` from `f` and `dy` `[N,OH,OW,O]` (group by
/// group for a grouped convolution; a depthwise one's with one input channel per group).
pub fn conv2d_backprop_input<T: ConvElem>(s: &ConvShape, f: &[T], dy: &[T], threads: usize) -> Vec<T> {
    if let Some(d) = s.as_depthwise() {
        return depthwise_conv2d_backprop_input(&d, f, dy, threads);
    }
    let [n, h, w, c] = s.input;
    let o = s.filter[3];
    let (g, cg) = (s.groups(), s.filter[2]);
    let og = o / g;
    let (pixels, row) = (s.pixels(), s.row());
    if let Some(t) = s.transposed() {
        // dx = dy convolved with the filter turned half a turn, its in and out depths
        // swapped: the forward pass's im2col and one `[H·W, KH·KW·O]·[KH·KW·O, C]` product
        // per image, where col2im's product is only `O` deep and scatters `KH·KW` sums into
        // every input pixel.
        let [kh, kw, _, _] = s.filter;
        let mut ft = vec![T::default(); f.len()];
        for ky in 0..kh {
            for kx in 0..kw {
                let (src, dst) = ((ky * kw + kx) * c * o, ((kh - 1 - ky) * kw + (kw - 1 - kx)) * o * c);
                for ci in 0..c {
                    for oi in 0..o {
                        ft[dst + oi * c + ci] = f[src + ci * o + oi];
                    }
                }
            }
        }
        return conv2d(&t, dy, &ft, threads);
    }
    let mut dx = vec![T::default(); n * h * w * c];
    if s.is_pointwise() {
        pointwise(s, Pointwise::BackpropInput, dy, f, &mut dx, threads);
        return dx;
    }
    let dst = Shared(dx.as_mut_ptr());
    over_images::<T>(n, pixels * row, threads, &|b, col, t| {
        // SAFETY: image b's gradient is its own.
        let dxb = unsafe { dst.slice(b * h * w * c, h * w * c) };
        for grp in 0..g {
            // col = dy_b[:, group] [pixels, O/G] · the group's filter columnsᵀ [O/G, row].
            let a = &dy[b * pixels * o + grp * og..];
            mm(pixels, og, row, a, o as isize, 1, &f[grp * og..], 1, o as isize, col, t);
            col2im(col, (c, grp * cg, cg), &s.win, dxb);
        }
    });
    dx
}

/// The deepest product of one filter-gradient GEMM: the depth the unpacked kernel sums in
/// one chain ([`crate::gemm`]); deeper reductions are cut here and their partial products
/// added by the caller, in a fixed order.
const DEPTH: usize = crate::gemm::UNPACKED_MAX_K;

/// Output channels below which a forward convolution makes its im2col rows a block at a time.
const NARROW_OUTPUT: usize = 8;

/// The floats of one such block of im2col rows (64 KiB: in L2 beside the image).
const NARROW_BLOCK_FLOATS: usize = 16 * 1024;

/// Sums `per_group`'s contributions over a batch of `n` images into `size` elements: the
/// images are cut into at most [`FILTER_GRAD_GROUPS`] consecutive groups (a split fixed by
/// the batch size alone); `per_group(images, partial, scratch, threads)` adds a group's
/// images, in order, into its own zeroed partial, with a scratch buffer of `scratch`
/// elements and the threads its GEMMs may use; the groups run in parallel and the partials
/// are added in group order — the same additions in the same order however many threads
/// there are.
#[allow(clippy::type_complexity)]
fn sum_image_groups<T: ConvElem>(
    n: usize,
    size: usize,
    scratch: usize,
    threads: usize,
    per_group: &(dyn Fn(std::ops::Range<usize>, &mut [T], &mut [T], usize) + Sync),
) -> Vec<T> {
    let groups = n.clamp(1, FILTER_GRAD_GROUPS);
    let per = n.div_ceil(groups).max(1);
    let groups = n.div_ceil(per);
    let mut partials = vec![T::default(); groups * size];
    let dst = Shared(partials.as_mut_ptr());
    let parallel = threads > 1 && groups > 1;
    let t = if parallel { 1 } else { threads };
    let group = |gi: usize| {
        with_scratch(scratch, |buf: &mut [T]| {
            // SAFETY: group gi's partial is its own.
            let acc = unsafe { dst.slice(gi * size, size) };
            per_group(gi * per..((gi + 1) * per).min(n), acc, buf, t)
        })
    };
    if parallel {
        crate::team::run(groups, &group);
    } else {
        (0..groups).for_each(group);
    }
    let mut total = vec![T::default(); size];
    for part in partials.chunks(size) {
        for (p, &q) in total.iter_mut().zip(part) {
            *p += q;
        }
    }
    total
}

/// How many consecutive images the forward convolution stacks into one GEMM: enough that
/// the product has [`STACK_ROWS`] rows when an image has fewer output pixels (at most the
/// batch), else one. A function of the shape alone, so results never depend on threads.
fn stacked_images(pixels: usize, n: usize) -> usize {
    if pixels == 0 || pixels >= STACK_ROWS {
        1
    } else {
        STACK_ROWS.div_ceil(pixels).min(n).max(1)
    }
}

/// The GEMM rows [`stacked_images`] aims for.
const STACK_ROWS: usize = 64;

/// Image groups whose filter-gradient partials [`conv2d_backprop_filter`] sums: at most
/// this many, fixed by the batch size alone (never by the thread count).
const FILTER_GRAD_GROUPS: usize = 8;

/// `Conv2DBackpropFilter`: the gradient `[KH,KW,C,O]` from `x` and `dy`. When the whole
/// batch has at most `DEPTH` output pixels (and more than one image, one group), it is one
/// GEMM whose depth runs over every image's pixels in order. Otherwise the batch is cut
/// into at most [`FILTER_GRAD_GROUPS`] consecutive groups (a split that depends on the batch
/// size only); each group's partial sums its images in order, the groups run in parallel,
/// and the partials are added in group order — the same additions in the same order
/// however many threads there are. With one input channel per group, the depthwise
/// convolution's filter gradient (images summed in order); a pointwise one
/// ([`ConvShape::is_pointwise`]) is one GEMM per group whose reduction runs over every pixel
/// of every image, split over output blocks only.
pub fn conv2d_backprop_filter<T: ConvElem>(s: &ConvShape, x: &[T], dy: &[T], threads: usize) -> Vec<T> {
    if let Some(d) = s.as_depthwise() {
        return depthwise_conv2d_backprop_filter(&d, x, dy);
    }
    let [n, h, w, c] = s.input;
    let o = s.filter[3];
    let (g, cg) = (s.groups(), s.filter[2]);
    let og = o / g;
    let (pixels, row) = (s.pixels(), s.row());
    let size = row * o;
    let mut df = vec![T::default(); size];
    if n == 0 || size == 0 {
        return df;
    }
    if s.is_pointwise() {
        pointwise(s, Pointwise::BackpropFilter, x, dy, &mut df, threads);
        return df;
    }
    if g == 1 && n * pixels <= DEPTH && n > 1 {
        // Few output pixels in the whole batch: the im2col rows of every image, and one GEMM
        // `colᵀ · dy` whose depth runs over all of them, written straight into the gradient
        // (per-image partials would each cost a pass over the whole `[row, O]` gradient).
        let mut col = vec![T::default(); n * pixels * row];
        for (b, cb) in col.chunks_mut(pixels * row).enumerate() {
            im2col(&x[b * h * w * c..][..h * w * c], (c, 0, c), &s.win, cb);
        }
        mm(row, n * pixels, o, &col, 1, row as isize, dy, o as isize, 1, &mut df, threads);
        return df;
    }
    sum_image_groups(n, size, pixels * row + row * og, threads, &|images, acc, buf, t| {
        let (col, part) = buf.split_at_mut(pixels * row);
        for b in images {
            let xb = &x[b * h * w * c..][..h * w * c];
            for grp in 0..g {
                im2col(xb, (c, grp * cg, cg), &s.win, col);
                // part = colᵀ [row, pixels] · dy_b[:, group] [pixels, O/G], in chunks of at
                // most `DEPTH` pixels, each added to the partial: the unpacked GEMM takes
                // products that deep without copying its operands (a 32×32 image's
                // 1024-deep product, packed, ran at 0.75× the speed of the forward pass).
                for p0 in (0..pixels).step_by(DEPTH) {
                    let k = DEPTH.min(pixels - p0);
                    let a = &dy[(b * pixels + p0) * o + grp * og..];
                    mm(row, k, og, &col[p0 * row..], 1, row as isize, a, o as isize, 1, part, t);
                    for (ar, pr) in acc.chunks_mut(o).zip(part.chunks(og)) {
                        for (p, &q) in ar[grp * og..][..og].iter_mut().zip(pr) {
                            *p += q;
                        }
                    }
                }
            }
        }
    })
}

impl ConvShape {
    /// A grouped convolution with one input channel per group (`[KH, KW, 1, O]` filter over
    /// `C = G > 1` channels) as the depthwise convolution it is: filter `[KH, KW, C, O/C]`,
    /// whose row-major layout is the same buffer (output channel `c·M + q` is group `c`'s
    /// `q`-th), so callers pass the grouped filter and get the grouped layout back.
    pub fn as_depthwise(&self) -> Option<ConvShape> {
        let [kh, kw, cg, o] = self.filter;
        let c = self.input[3];
        (cg == 1 && c > 1 && o % c == 0).then_some(ConvShape { filter: [kh, kw, c, o / c], ..*self })
    }

    /// A depthwise convolution's output: `[N, OH, OW, C·M]` for a `[KH, KW, C, M]` filter.
    pub fn depthwise_output(&self) -> [usize; 4] {
        [self.input[0], self.win.h.output, self.win.w.output, self.input[3] * self.filter[3]]
    }
}

/// The taps of one image of a depthwise convolution, a pixel pair at a time: calls
/// `f(x offset, filter offset, output offset)` (within the image) for every (output pixel,
/// filter tap) that reads input, in a fixed order — output pixels row-major, then taps
/// row-major. The `C` input channels start at the x offset, the `C·M` filter values and output
/// channels at the others: the callers' channel loops are plain slice walks, which the
/// compiler vectorises (the former per-channel callback, with its index arithmetic and bound
/// checks, ran MobileNetV2's depthwise layers at 0.6 GFLOP/s). Each output channel still sums
/// its taps in tap order, so results are unchanged bit for bit.
fn depthwise_pixels(s: &ConvShape, mut f: impl FnMut(usize, usize, usize)) {
    let [_, _, w, c] = s.input;
    let [kh, kw, _, m] = s.filter;
    let (oh, ow) = (s.win.h.output, s.win.w.output);
    for oy in 0..oh {
        for ox in 0..ow {
            let out_base = (oy * ow + ox) * c * m;
            for ky in 0..kh {
                let Some(iy) = s.win.h.source(oy, ky) else { continue };
                for kx in 0..kw {
                    let Some(ix) = s.win.w.source(ox, kx) else { continue };
                    f((iy * w + ix) * c, (ky * kw + kx) * c * m, out_base);
                }
            }
        }
    }
}

/// Runs `per_image(b, image's slice of out)` for each of `n` images, over `threads` parts
/// (images are independent, so the split never changes a bit).
fn per_image_out<T: ConvElem>(out: &mut [T], n: usize, threads: usize, per_image: &(dyn Fn(usize, &mut [T]) + Sync)) {
    let len = out.len().checked_div(n).unwrap_or(0);
    if threads > 1 && n > 1 {
        let parts = threads.min(n);
        let chunk = n.div_ceil(parts);
        let dst = Shared(out.as_mut_ptr());
        crate::team::run(parts, &|p| {
            for b in p * chunk..((p + 1) * chunk).min(n) {
                // SAFETY: image b's slice is its own.
                per_image(b, unsafe { dst.slice(b * len, len) });
            }
        });
    } else if len > 0 {
        for (b, o) in out.chunks_mut(len).enumerate() {
            per_image(b, o);
        }
    }
}

/// `DepthwiseConv2dNative`: `x` `[N,H,W,C]` by `f` `[KH,KW,C,M]` → `[N,OH,OW,C·M]` (output
/// channel `c·M + q` is input channel `c` through filter slice `q`).
pub fn depthwise_conv2d<T: ConvElem>(s: &ConvShape, x: &[T], f: &[T], threads: usize) -> Vec<T> {
    let [n, h, w, c] = s.input;
    let mut out = vec![T::default(); s.depthwise_output().iter().product()];
    per_image_out(&mut out, n, threads, &|b, o| {
        let xb = &x[b * h * w * c..][..h * w * c];
        let m = s.filter[3];
        depthwise_pixels(s, |xi, fi, oi| {
            let (xr, fr, or) = (&xb[xi..xi + c], &f[fi..fi + c * m], &mut o[oi..oi + c * m]);
            if m == 1 {
                for ((o, &x), &f) in or.iter_mut().zip(xr).zip(fr) {
                    *o += x * f;
                }
            } else {
                for ((os, &x), fs) in or.chunks_exact_mut(m).zip(xr).zip(fr.chunks_exact(m)) {
                    for (o, &f) in os.iter_mut().zip(fs) {
                        *o += x * f;
                    }
                }
            }
        });
    });
    out
}

/// `DepthwiseConv2dNativeBackpropInput`: the gradient `[N,H,W,C]` from `f` and `dy`.
pub fn depthwise_conv2d_backprop_input<T: ConvElem>(s: &ConvShape, f: &[T], dy: &[T], threads: usize) -> Vec<T> {
    let [n, h, w, c] = s.input;
    let per: usize = s.depthwise_output()[1..].iter().product();
    let mut dx = vec![T::default(); n * h * w * c];
    per_image_out(&mut dx, n, threads, &|b, d| {
        let g = &dy[b * per..][..per];
        let m = s.filter[3];
        depthwise_pixels(s, |xi, fi, oi| {
            let (dr, fr, gr) = (&mut d[xi..xi + c], &f[fi..fi + c * m], &g[oi..oi + c * m]);
            if m == 1 {
                for ((d, &g), &f) in dr.iter_mut().zip(gr).zip(fr) {
                    *d += g * f;
                }
            } else {
                for ((d, gs), fs) in dr.iter_mut().zip(gr.chunks_exact(m)).zip(fr.chunks_exact(m)) {
                    for (&g, &f) in gs.iter().zip(fs) {
                        *d += g * f;
                    }
                }
            }
        });
    });
    dx
}

/// `DepthwiseConv2dNativeBackpropFilter`: the gradient `[KH,KW,C,M]` from `x` and `dy`,
/// summed image by image in batch order.
pub fn depthwise_conv2d_backprop_filter<T: ConvElem>(s: &ConvShape, x: &[T], dy: &[T]) -> Vec<T> {
    let [n, h, w, c] = s.input;
    let per: usize = s.depthwise_output()[1..].iter().product();
    let mut df = vec![T::default(); s.filter.iter().product()];
    for b in 0..n {
        let (xb, g) = (&x[b * h * w * c..][..h * w * c], &dy[b * per..][..per]);
        let m = s.filter[3];
        depthwise_pixels(s, |xi, fi, oi| {
            let (xr, dfr, gr) = (&xb[xi..xi + c], &mut df[fi..fi + c * m], &g[oi..oi + c * m]);
            if m == 1 {
                for ((df, &x), &g) in dfr.iter_mut().zip(xr).zip(gr) {
                    *df += x * g;
                }
            } else {
                for ((dfs, &x), gs) in dfr.chunks_exact_mut(m).zip(xr).zip(gr.chunks_exact(m)) {
                    for (df, &g) in dfs.iter_mut().zip(gs) {
                        *df += x * g;
                    }
                }
            }
        });
    }
    df
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    /// A grouped convolution with one input channel per group runs as a depthwise one; it
    /// must compute the grouped convolution's definition (and its gradients their adjoint
    /// identities: <dy, conv(x)> = <conv_input_grad(dy), x> = <filter_grad(x, dy), f>).
    #[test]
    fn one_channel_groups_are_depthwise() {
        let attrs = WindowAttrs { strides: (2, 1), dilations: (1, 1), padding: Padding::Same };
        let (input, filter) = ([2usize, 7, 6, 4], [3usize, 2, 1, 8]);
        let s = ConvShape { input, filter, win: attrs.conv_window(input, filter).unwrap() };
        assert!(s.as_depthwise().is_some());
        let x = data(input.iter().product(), 4);
        let f = data(filter.iter().product(), 5);
        let y = conv2d(&s, &x, &f, 1);
        let [n, h, w, c] = input;
        let [kh, kw, _, o] = filter;
        let (oh, ow) = (s.win.h.output, s.win.w.output);
        let mut want = vec![0f64; n * oh * ow * o];
        for b in 0..n {
            for oy in 0..oh {
                for ox in 0..ow {
                    for oc in 0..o {
                        let g = oc / (o / c);
                        let mut acc = 0f64;
                        for ky in 0..kh {
                            let Some(iy) = s.win.h.source(oy, ky) else { continue };
                            for kx in 0..kw {
                                let Some(ix) = s.win.w.source(ox, kx) else { continue };
                                acc += x[((b * h + iy) * w + ix) * c + g] as f64 * f[(ky * kw + kx) * o + oc] as f64;
                            }
                        }
                        want[((b * oh + oy) * ow + ox) * o + oc] = acc;
                    }
                }
            }
        }
        for (i, (&g, &w)) in y.iter().zip(&want).enumerate() {
            assert!((g as f64 - w).abs() < 1e-5, "output {i}: {g} vs {w}");
        }
        let dy = data(y.len(), 6);
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(&p, &q)| p as f64 * q as f64).sum::<f64>();
        let forward = dot(&dy, &y);
        let dx = conv2d_backprop_input(&s, &f, &dy, 1);
        let df = conv2d_backprop_filter(&s, &x, &dy, 1);
        assert!((dot(&dx, &x) - forward).abs() < 1e-4, "input gradient");
        assert!((dot(&df, &f) - forward).abs() < 1e-4, "filter gradient");
    }

    /// 1×1 stride-1 convolutions run as one GEMM per group over all images
    /// ([`ConvShape::is_pointwise`]); plain and grouped, their three passes must compute the
    /// definitions (float64 sums), on one thread and several with identical bits.
    #[test]
    fn pointwise_convolutions_match_their_definition() {
        let attrs = WindowAttrs { strides: (1, 1), dilations: (1, 1), padding: Padding::Same };
        for (input, filter) in
            [([3usize, 5, 4, 6], [1usize, 1, 6, 8]), ([3, 5, 4, 6], [1, 1, 3, 8]), ([4, 16, 16, 32], [1, 1, 32, 64])]
        {
            let s = ConvShape { input, filter, win: attrs.conv_window(input, filter).unwrap() };
            assert!(s.is_pointwise() && s.as_depthwise().is_none());
            let [n, h, w, c] = input;
            let (cg, o) = (filter[2], filter[3]);
            let og = o / (c / cg);
            let np = n * h * w;
            let x = data(np * c, 7);
            let f = data(cg * o, 8);
            let dy = data(np * o, 9);
            let (mut y, mut dx, mut df) = (vec![0f64; np * o], vec![0f64; np * c], vec![0f64; cg * o]);
            for p in 0..np {
                for oc in 0..o {
                    let grp = oc / og;
                    for i in 0..cg {
                        let (xv, fv, gv) =
                            (x[p * c + grp * cg + i] as f64, f[i * o + oc] as f64, dy[p * o + oc] as f64);
                        y[p * o + oc] += xv * fv;
                        dx[p * c + grp * cg + i] += gv * fv;
                        df[i * o + oc] += xv * gv;
                    }
                }
            }
            let close = |got: &[f32], want: &[f64], what: &str| {
                assert_eq!(got.len(), want.len(), "{what}");
                for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
                    assert!(
                        (g as f64 - w).abs() < 1e-3 * (1.0 + w.abs()),
                        "{what} {input:?}/{filter:?}[{i}]: {g} vs {w}"
                    );
                }
            };
            close(&conv2d(&s, &x, &f, 1), &y, "forward");
            close(&conv2d_backprop_input(&s, &f, &dy, 1), &dx, "input gradient");
            close(&conv2d_backprop_filter(&s, &x, &dy, 1), &df, "filter gradient");
            assert_eq!(conv2d(&s, &x, &f, 1), conv2d(&s, &x, &f, 2));
            assert_eq!(conv2d_backprop_input(&s, &f, &dy, 1), conv2d_backprop_input(&s, &f, &dy, 2));
            assert_eq!(conv2d_backprop_filter(&s, &x, &dy, 1), conv2d_backprop_filter(&s, &x, &dy, 2));
        }
    }

    /// Unit-stride convolutions take their input gradient as a forward convolution
    /// ([`ConvShape::transposed`]) and their filter gradient in chunks of at most [`DEPTH`]
    /// pixels; both against the float64 definition, with `SAME`, `VALID` and uneven explicit
    /// padding, non-square kernels, more pixels than one chunk, and the strided and dilated
    /// convolutions that keep col2im.
    #[test]
    fn unit_stride_gradients_match_their_definition() {
        type Case = ([usize; 4], [usize; 4], (usize, usize), (usize, usize), Padding);
        let cases: [Case; 6] = [
            ([2, 24, 25, 3], [3, 3, 3, 5], (1, 1), (1, 1), Padding::Same),
            ([3, 7, 9, 4], [2, 3, 4, 6], (1, 1), (1, 1), Padding::Valid),
            ([2, 6, 5, 2], [5, 1, 2, 3], (1, 1), (1, 1), Padding::Explicit([(3, 1), (0, 2)])),
            ([1, 8, 8, 3], [3, 3, 3, 2], (1, 1), (1, 1), Padding::Explicit([(0, 2), (1, 0)])),
            ([2, 9, 8, 3], [3, 3, 3, 4], (2, 1), (1, 1), Padding::Same),
            ([2, 9, 8, 3], [3, 2, 3, 4], (1, 1), (2, 1), Padding::Same),
        ];
        for (input, filter, strides, dilations, padding) in cases {
            let attrs = WindowAttrs { strides, dilations, padding: padding.clone() };
            let s = ConvShape { input, filter, win: attrs.conv_window(input, filter).unwrap() };
            let [n, h, w, c] = input;
            let [kh, kw, _, o] = filter;
            let [_, oh, ow, _] = s.output();
            let x = data(n * h * w * c, 4);
            let f = data(kh * kw * c * o, 5);
            let dy = data(n * oh * ow * o, 6);
            let (mut dx, mut df) = (vec![0f64; x.len()], vec![0f64; f.len()]);
            for b in 0..n {
                for (oy, ox) in (0..oh).flat_map(|oy| (0..ow).map(move |ox| (oy, ox))) {
                    for (ky, kx) in (0..kh).flat_map(|ky| (0..kw).map(move |kx| (ky, kx))) {
                        let (Some(iy), Some(ix)) = (s.win.h.source(oy, ky), s.win.w.source(ox, kx)) else { continue };
                        for (ci, oc) in (0..c).flat_map(|ci| (0..o).map(move |oc| (ci, oc))) {
                            let g = dy[((b * oh + oy) * ow + ox) * o + oc] as f64;
                            let fi = ((ky * kw + kx) * c + ci) * o + oc;
                            let xi = ((b * h + iy) * w + ix) * c + ci;
                            dx[xi] += g * f[fi] as f64;
                            df[fi] += g * x[xi] as f64;
                        }
                    }
                }
            }
            let close = |got: &[f32], want: &[f64], what: &str| {
                assert_eq!(got.len(), want.len(), "{what}");
                for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
                    assert!(
                        (g as f64 - w).abs() < 1e-4 * (1.0 + w.abs()),
                        "{what} {input:?}/{filter:?}[{i}]: {g} vs {w}"
                    );
                }
            };
            let unit = strides == (1, 1) && dilations == (1, 1);
            assert_eq!(s.transposed().is_some(), unit, "{input:?}/{filter:?}");
            close(&conv2d_backprop_input(&s, &f, &dy, 1), &dx, "input gradient");
            close(&conv2d_backprop_filter(&s, &x, &dy, 1), &df, "filter gradient");
            assert_eq!(conv2d_backprop_input(&s, &f, &dy, 1), conv2d_backprop_input(&s, &f, &dy, 2));
            assert_eq!(conv2d_backprop_filter(&s, &x, &dy, 1), conv2d_backprop_filter(&s, &x, &dy, 2));
        }
    }

    /// 3×3 unit-stride convolutions over at least 16 channels can take Winograd's F(2×2, 3×3)
    /// (`winograd.rs`; the dispatcher takes it where enough output tiles pay for the filter
    /// transform, and the test calls it directly too), forward, input gradient (as the forward
    /// convolution of `dy`) and filter gradient, and the direct paths — including those for
    /// few output pixels, which stack images into one GEMM:
    /// against the float64 definition at odd and even output sizes (partial edge tiles),
    /// `SAME`, `VALID` and uneven explicit padding, one image and several, an image of several
    /// blocks of tile rows, with the same bits on one thread and two; below 16 channels the
    /// direct product stays.
    #[test]
    fn winograd_convolutions_match_their_definition() {
        type Case = ([usize; 4], [usize; 4], Padding, bool);
        let cases: [Case; 10] = [
            // Few output pixels: the forward stacks images into one GEMM, the filter gradient
            // takes one GEMM over the whole batch (and Winograd, called below, does not pay).
            ([3, 1, 2, 20], [3, 3, 20, 16], Padding::Same, true),
            ([2, 3, 3, 24], [3, 3, 24, 16], Padding::Valid, true),
            ([4, 5, 3, 8], [3, 3, 8, 16], Padding::Same, false),
            ([2, 8, 8, 16], [3, 3, 16, 16], Padding::Same, true),
            // 32 tile rows of 33 tiles: three blocks of tile rows (`winograd::BLOCK`).
            ([1, 64, 66, 16], [3, 3, 16, 16], Padding::Same, true),
            ([1, 7, 9, 16], [3, 3, 16, 24], Padding::Same, true),
            ([3, 9, 6, 20], [3, 3, 20, 16], Padding::Valid, true),
            ([2, 5, 7, 16], [3, 3, 16, 17], Padding::Explicit([(2, 0), (0, 1)]), true),
            ([1, 3, 3, 16], [3, 3, 16, 16], Padding::Valid, true),
            ([2, 8, 8, 8], [3, 3, 8, 16], Padding::Same, false),
        ];
        for (input, filter, padding, takes) in cases {
            let attrs = WindowAttrs { strides: (1, 1), dilations: (1, 1), padding };
            let s = ConvShape { input, filter, win: attrs.conv_window(input, filter).unwrap() };
            assert_eq!(winograd::applies(&s), takes, "{input:?}/{filter:?}");
            let [n, h, w, c] = input;
            let o = filter[3];
            let [_, oh, ow, _] = s.output();
            let x = data(n * h * w * c, 11);
            let f = data(9 * c * o, 12);
            let dy = data(n * oh * ow * o, 13);
            let (mut y, mut dx, mut df) = (vec![0f64; n * oh * ow * o], vec![0f64; x.len()], vec![0f64; f.len()]);
            for b in 0..n {
                for (oy, ox) in (0..oh).flat_map(|oy| (0..ow).map(move |ox| (oy, ox))) {
                    for (ky, kx) in (0..3).flat_map(|ky| (0..3).map(move |kx| (ky, kx))) {
                        let (Some(iy), Some(ix)) = (s.win.h.source(oy, ky), s.win.w.source(ox, kx)) else { continue };
                        for (ci, oc) in (0..c).flat_map(|ci| (0..o).map(move |oc| (ci, oc))) {
                            let (yi, fi, xi) = (
                                ((b * oh + oy) * ow + ox) * o + oc,
                                ((ky * 3 + kx) * c + ci) * o + oc,
                                ((b * h + iy) * w + ix) * c + ci,
                            );
                            y[yi] += x[xi] as f64 * f[fi] as f64;
                            dx[xi] += dy[yi] as f64 * f[fi] as f64;
                            df[fi] += dy[yi] as f64 * x[xi] as f64;
                        }
                    }
                }
            }
            // Sums of 9·C products of values in [-1, 1]: bound by a few ulps of 9·C.
            let tol = 4.0 * f32::EPSILON as f64 * (9 * c.max(o)) as f64;
            let close = |got: &[f32], want: &[f64], what: &str| {
                assert_eq!(got.len(), want.len(), "{what}");
                for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
                    assert!((g as f64 - w).abs() < tol, "{what} {input:?}/{filter:?}[{i}]: {g} vs {w}");
                }
            };
            close(&conv2d(&s, &x, &f, 1), &y, "forward");
            close(&conv2d_backprop_input(&s, &f, &dy, 1), &dx, "input gradient");
            // The filter gradient sums N·OH·OW products per element.
            let tol_f = 4.0 * f32::EPSILON as f64 * (n * oh * ow * 4) as f64;
            for (i, (&g, &w)) in conv2d_backprop_filter(&s, &x, &dy, 1).iter().zip(&df).enumerate() {
                assert!((g as f64 - w).abs() < tol_f, "filter gradient {input:?}/{filter:?}[{i}]: {g} vs {w}");
            }
            assert_eq!(conv2d(&s, &x, &f, 1), conv2d(&s, &x, &f, 2));
            assert_eq!(conv2d_backprop_filter(&s, &x, &dy, 1), conv2d_backprop_filter(&s, &x, &dy, 3));
            if takes {
                // Winograd itself, at every size (the dispatcher takes it only where it pays).
                close(&winograd::conv2d(&s, &x, &f, 1), &y, "winograd forward");
                assert_eq!(winograd::conv2d(&s, &x, &f, 1), winograd::conv2d(&s, &x, &f, 2));
            }
            assert_eq!(conv2d_backprop_input(&s, &f, &dy, 1), conv2d_backprop_input(&s, &f, &dy, 2));
            // The same convolutions in float64 (the Winograd path is generic): within a few
            // float64 ulps of the definition, which was summed in float64 from the same values.
            let wide = |v: &[f32]| v.iter().map(|&a| f64::from(a)).collect::<Vec<f64>>();
            let (x64, f64_, dy64) = (wide(&x), wide(&f), wide(&dy));
            let close64 = |got: Vec<f64>, want: &[f64], terms: usize, what: &str| {
                let tol = 8.0 * f64::EPSILON * terms as f64;
                assert_eq!(got.len(), want.len(), "{what}");
                for (i, (g, w)) in got.iter().zip(want).enumerate() {
                    assert!((g - w).abs() < tol, "float64 {what} {input:?}/{filter:?}[{i}]: {g} vs {w}");
                }
            };
            close64(conv2d(&s, &x64, &f64_, 2), &y, 9 * c.max(o), "forward");
            close64(conv2d_backprop_input(&s, &f64_, &dy64, 2), &dx, 9 * c.max(o), "input gradient");
            close64(conv2d_backprop_filter(&s, &x64, &dy64, 2), &df, n * oh * ow * 4, "filter gradient");
        }
    }

    /// A filter tap that only ever meets SAME padding has an exactly zero gradient, as in
    /// TensorFlow's direct sum (sweep 71: Winograd's transforms left ~1e-7 there, which Adam
    /// turned into learning-rate-sized updates of frozen taps). One-row images: the 3×3
    /// filter's top and bottom rows see padding only, over enough tiles that Winograd would
    /// have paid.
    #[test]
    fn taps_that_only_meet_padding_get_exactly_zero_gradients() {
        let (n, w, c, o) = (8, 96, 16, 16);
        let (input, filter) = ([n, 1, w, c], [3, 3, c, o]);
        let attrs = WindowAttrs { strides: (1, 1), dilations: (1, 1), padding: Padding::Same };
        let s = ConvShape { input, filter, win: attrs.conv_window(input, filter).unwrap() };
        assert!(winograd::applies(&s) && winograd::pays(&s), "a shape the forward takes Winograd for");
        let (x, dy) = (data(n * w * c, 21), data(n * w * o, 22));
        for threads in [1, 2] {
            let df = conv2d_backprop_filter(&s, &x, &dy, threads);
            let row = 3 * c * o;
            assert!(df[..row].iter().chain(&df[2 * row..]).all(|&v| v == 0.0), "padding-only taps");
            assert!(df[row..2 * row].iter().any(|&v| v != 0.0), "the middle row sees the image");
        }
    }

    /// The split over images (and the filter gradient's groups) never changes a bit: one
    /// thread and several give identical results, whatever the batch size.
    /// A convolution with few output channels makes its im2col rows a block of pixels at a
    /// time: the same bits as one im2col of the whole image and one product, and the
    /// definition within float32 rounding (one output channel runs the one-column product).
    #[test]
    fn narrow_outputs_in_pixel_blocks_equal_the_whole_image_product() {
        let attrs = WindowAttrs { strides: (1, 1), dilations: (1, 1), padding: Padding::Same };
        for o in [1usize, 3] {
            let (input, filter) = ([2usize, 40, 37, 5], [3usize, 3, 5, o]);
            let s = ConvShape { input, filter, win: attrs.conv_window(input, filter).unwrap() };
            let (pixels, row) = (s.pixels(), s.row());
            assert!(pixels > NARROW_BLOCK_FLOATS / row, "several blocks");
            let x = data(input.iter().product(), 11);
            let f = data(filter.iter().product(), 12);
            let got = conv2d(&s, &x, &f, 2);
            let mut col = vec![0f32; pixels * row];
            let mut want = vec![0f32; 2 * pixels * o];
            for b in 0..2 {
                let xb = &x[b * 40 * 37 * 5..][..40 * 37 * 5];
                im2col(xb, (5, 0, 5), &s.win, &mut col);
                mm(
                    pixels,
                    row,
                    o,
                    &col,
                    row as isize,
                    1,
                    &f,
                    o as isize,
                    1,
                    &mut want[b * pixels * o..][..pixels * o],
                    1,
                );
                for (i, r) in col.chunks(row).enumerate() {
                    for q in 0..o {
                        let exact: f64 =
                            r.iter().zip(f[q..].iter().step_by(o)).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum();
                        let g = f64::from(got[(b * pixels + i) * o + q]);
                        assert!((g - exact).abs() <= 1e-5 * exact.abs().max(1.0), "o={o} pixel {i}: {g} vs {exact}");
                    }
                }
            }
            assert_eq!(got, want, "o={o}");
        }
    }

    #[test]
    fn results_do_not_depend_on_the_thread_count() {
        let attrs = WindowAttrs { strides: (2, 1), dilations: (1, 1), padding: Padding::Same };
        // Plain, and grouped (two groups of two input channels, three outputs each).
        for (n, c, filter) in [1usize, 2, 5, 11].into_iter().flat_map(|n| [(n, 3, [3, 2, 3, 4]), (n, 4, [3, 2, 2, 6])])
        {
            let input = [n, 7, 6, c];
            let s = ConvShape { input, filter, win: attrs.conv_window(input, filter).unwrap() };
            let x = data(input.iter().product(), 1);
            let f = data(filter.iter().product(), 2);
            let dy = data(s.output().iter().product(), 3);
            for threads in [2, 3] {
                assert_eq!(conv2d(&s, &x, &f, 1), conv2d(&s, &x, &f, threads), "forward n={n}");
                assert_eq!(
                    conv2d_backprop_input(&s, &f, &dy, 1),
                    conv2d_backprop_input(&s, &f, &dy, threads),
                    "input gradient n={n}"
                );
                assert_eq!(
                    conv2d_backprop_filter(&s, &x, &dy, 1),
                    conv2d_backprop_filter(&s, &x, &dy, threads),
                    "filter gradient n={n}"
                );
            }
        }
    }
}
