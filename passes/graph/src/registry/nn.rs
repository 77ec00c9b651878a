//! Schemas of the training ops TensorFlow's CNNs and TF1 optimizers emit:
//! the `ResourceApply*`/`ResourceSparseApply*` optimizers, `Conv2D` and
//! `DepthwiseConv2dNative` with their gradients, max and average pooling
//! with theirs, and fused batch normalisation.
//!
//! Signatures follow the ops' `REGISTER_OP`s. Shape functions follow
//! TensorFlow's: `Conv2DShapeWithExplicitPadding`, `DepthwiseConv2DNativeShape`,
//! `MaxPoolShape`/`AvgPoolShape` (window sizes from `GetWindowedOutputSize`),
//! the backprops' sizes from their shape operand (`input_sizes`,
//! `filter_sizes`, `orig_input_shape`) when it is known, `FusedBatchNormShape`,
//! and `ApplyAdamShapeFn`-style checks for the optimizers (slots match the
//! variable, hyperparameters are scalars, a sparse gradient is `indices`
//! rows of the variable). The optimizers are resource modifies
//! ([`crate::effects::table_kind`]: every `ResourceApply*` and
//! `ResourceSparseApply*`), hence stateful.

use super::{merge_shapes, ArgSpec, AttrDefault, AttrKind, AttrSpec, InferCtx, OpFamily, OpSchema, ShapeFn, TypeRule};
use crate::DType::{
    self, BFloat16, Complex128, Complex64, Float16, Float32, Float64, Int16, Int32, Int64, Int8, Resource, UInt16,
    UInt32, UInt64, UInt8,
};
use crate::{Dim, Shape};

type Shapes = Result<Vec<Shape>, String>;

const FLOATS: &[DType] = &[Float16, BFloat16, Float32, Float64];
const NUMBER: &[DType] = &[
    Float16, BFloat16, Float32, Float64, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Complex64,
    Complex128,
];
const INDEX: &[DType] = &[Int32, Int64];
const BN_U: &[DType] = &[Float32];

const T: TypeRule = TypeRule::Attr("T");
const U: TypeRule = TypeRule::Attr("U");
const RES: TypeRule = TypeRule::Fixed(Resource);
const I32: TypeRule = TypeRule::Fixed(Int32);
const I64: TypeRule = TypeRule::Fixed(Int64);
const F32: TypeRule = TypeRule::Fixed(Float32);
const IDX: TypeRule = TypeRule::Attr("Tindices");

const fn a(name: &'static str, ty: TypeRule) -> ArgSpec {
    ArgSpec { name, ty, number_attr: None }
}
const fn tattr(name: &'static str, allowed: &'static [DType]) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Type, default: AttrDefault::Required, allowed: Some(allowed) }
}
const fn tdef(name: &'static str, d: DType, allowed: &'static [DType]) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Type, default: AttrDefault::Type(d), allowed: Some(allowed) }
}
const fn bdef(name: &'static str, d: bool) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Bool, default: AttrDefault::Bool(d), allowed: None }
}
const fn opt(name: &'static str, kind: AttrKind) -> AttrSpec {
    AttrSpec { name, kind, default: AttrDefault::Optional, allowed: None }
}
const fn req(name: &'static str, kind: AttrKind) -> AttrSpec {
    AttrSpec { name, kind, default: AttrDefault::Required, allowed: None }
}

const fn optimizer(name: &'static str, inputs: &'static [ArgSpec], attrs: &'static [AttrSpec], f: ShapeFn) -> OpSchema {
    OpSchema {
        name,
        family: OpFamily::Resource,
        inputs,
        outputs: &[],
        attrs,
        is_stateful: true,
        shape_fn: f,
        value_fn: None,
    }
}
const fn nn(
    name: &'static str,
    inputs: &'static [ArgSpec],
    outputs: &'static [ArgSpec],
    attrs: &'static [AttrSpec],
    f: ShapeFn,
) -> OpSchema {
    OpSchema {
        name,
        family: OpFamily::NeuralNet,
        inputs,
        outputs,
        attrs,
        is_stateful: false,
        shape_fn: f,
        value_fn: None,
    }
}

// ---------------------------------------------------------------- optimizers

const LOCK: &[AttrSpec] = &[tattr("T", NUMBER), bdef("use_locking", false)];
const LOCK_NESTEROV: &[AttrSpec] = &[tattr("T", NUMBER), bdef("use_locking", false), bdef("use_nesterov", false)];
const LOCK_SLOTS: &[AttrSpec] = &[tattr("T", NUMBER), bdef("use_locking", false), bdef("update_slots", true)];
const LOCK_FTRL: &[AttrSpec] = &[tattr("T", NUMBER), bdef("use_locking", false), bdef("multiply_linear_by_lr", false)];
const SPARSE_LOCK: &[AttrSpec] = &[tattr("T", NUMBER), tattr("Tindices", INDEX), bdef("use_locking", false)];
const SPARSE_NESTEROV: &[AttrSpec] =
    &[tattr("T", NUMBER), tattr("Tindices", INDEX), bdef("use_locking", false), bdef("use_nesterov", false)];
const SPARSE_SLOTS: &[AttrSpec] =
    &[tattr("T", NUMBER), tattr("Tindices", INDEX), bdef("use_locking", false), bdef("update_slots", true)];
const SPARSE_FTRL: &[AttrSpec] =
    &[tattr("T", NUMBER), tattr("Tindices", INDEX), bdef("use_locking", false), bdef("multiply_linear_by_lr", false)];

/// No indices operand.
const DENSE: usize = usize::MAX;

/// The variable shape behind handle input `i` (unknown when not traced to a `VarHandleOp`).
fn var_shape(c: &InferCtx<'_>, i: usize) -> Shape {
    c.inputs[i].handle.map(|h| h.1.clone()).unwrap_or_default()
}

/// An optimizer's checks: inputs `0..VARS` are the variable and its slots
/// (compatible shapes), `GRAD` the gradient, `INDICES` (unless [`DENSE`])
/// a vector of row indices; every other input is a scalar hyperparameter.
fn apply_shapes<const VARS: usize, const GRAD: usize, const INDICES: usize>(c: &InferCtx<'_>) -> Shapes {
    let mut var = var_shape(c, 0);
    for i in 1..VARS {
        var = merge_shapes(&var, &var_shape(c, i))
            .map_err(|_| format!("slot {i} of shape {} does not match the variable's {}", var_shape(c, i), var))?;
    }
    for i in VARS..c.inputs.len() {
        if i != GRAD && i != INDICES && c.shape(i).rank().is_some_and(|r| r != 0) {
            return Err(format!("input {i} must be a scalar, but has shape {}", c.shape(i)));
        }
    }
    let grad = c.shape(GRAD);
    if INDICES == DENSE {
        merge_shapes(&var, grad).map_err(|_| format!("grad of shape {grad} does not match the variable's {var}"))?;
        return Ok(Vec::new());
    }
    let indices = c.shape(INDICES);
    if indices.rank().is_some_and(|r| r != 1) {
        return Err(format!("indices must be a vector, but has shape {indices}"));
    }
    if var.rank() == Some(0) {
        return Err("var must be at least 1 dimensional".into());
    }
    if let (Some(v), Some(i)) = (&var.dims, &indices.dims) {
        let mut want = vec![i[0]];
        want.extend(&v[1..]);
        let want = Shape::with_dims(want);
        merge_shapes(&want, grad).map_err(|_| format!("grad of shape {grad} must be {want} (indices, then rows)"))?;
    }
    Ok(Vec::new())
}

const fn dense_apply(
    name: &'static str,
    inputs: &'static [ArgSpec],
    attrs: &'static [AttrSpec],
    f: ShapeFn,
) -> OpSchema {
    optimizer(name, inputs, attrs, f)
}

// ---------------------------------------------------------------- windows

/// A 4-element int-list attribute (`strides`, `ksize`, `dilations`): its two
/// spatial entries for the data format.
fn spatial_attr(c: &InferCtx<'_>, name: &str, nchw: bool, default: i64) -> Result<(i64, i64), String> {
    let v = c.attr_ints(name);
    if v.is_empty() {
        return Ok((default, default));
    }
    if v.len() != 4 {
        return Err(format!("{name} must have 4 elements, got {v:?}"));
    }
    let (h, w) = if nchw { (v[2], v[3]) } else { (v[1], v[2]) };
    if h <= 0 || w <= 0 {
        return Err(format!("{name} must be positive, got {v:?}"));
    }
    Ok((h, w))
}

fn is_nchw(c: &InferCtx<'_>) -> Result<bool, String> {
    match c.node.attr("data_format").and_then(|a| a.as_str()) {
        None | Some("NHWC") => Ok(false),
        Some("NCHW") => Ok(true),
        Some(f) => Err(format!("unknown data_format {f}")),
    }
}

/// `(before, after)` explicit padding of the two spatial dimensions.
fn explicit_padding(c: &InferCtx<'_>, nchw: bool) -> Result<Option<[(i64, i64); 2]>, String> {
    match c.node.attr("padding").and_then(|a| a.as_str()) {
        Some("SAME") | Some("VALID") => Ok(None),
        Some("EXPLICIT") => {
            let e = c.attr_ints("explicit_paddings");
            if e.len() != 8 || e.iter().any(|&x| x < 0) {
                return Err(format!("explicit_paddings must be 8 non-negative values, got {e:?}"));
            }
            let (h, w) = if nchw { (4, 6) } else { (2, 4) };
            Ok(Some([(e[h], e[h + 1]), (e[w], e[w + 1])]))
        }
        Some(p) => Err(format!("unknown padding {p}")),
        None => Err("missing padding".into()),
    }
}

/// TensorFlow's `GetWindowedOutputSize` for one dimension.
fn windowed(
    input: Dim,
    k: Dim,
    stride: i64,
    dilation: i64,
    same: bool,
    explicit: Option<(i64, i64)>,
) -> Result<Dim, String> {
    let (Some(input), Some(k)) = (input, k) else { return Ok(None) };
    if stride <= 0 || dilation <= 0 {
        return Err(format!("strides and dilations must be positive, got {stride} and {dilation}"));
    }
    // In 128 bits: sizes, paddings and dilations near 2^63 (found by fuzzing) must not
    // wrap into a plausible output size.
    let (input, k, stride, dilation) = (input as i128, k as i128, stride as i128, dilation as i128);
    let eff = (k - 1) * dilation + 1;
    let out = match explicit {
        Some((b, a)) => (input + b as i128 + a as i128 - eff + stride) / stride,
        None if same => (input + stride - 1) / stride,
        None => (input - eff + stride) / stride,
    };
    let out = i64::try_from(out).map_err(|_| format!("computed output size {out} does not fit in 64 bits"))?;
    if out < 0 {
        return Err(format!(
            "computed output size would be negative: {out} (input {input}, window {eff}, stride {stride})"
        ));
    }
    Ok(Some(out))
}

fn rank4(s: &Shape, what: &str) -> Result<Option<Vec<Dim>>, String> {
    match &s.dims {
        None => Ok(None),
        Some(d) if d.len() == 4 => Ok(Some(d.clone())),
        Some(_) => Err(format!("{what} must be 4-dimensional, but has shape {s}")),
    }
}

/// `[N, OH, OW, depth]` (or NCHW) of a window op over `input` with an
/// `(kh, kw)` window.
fn window_output(c: &InferCtx<'_>, input: &Shape, kernel: (Dim, Dim), depth: Dim, dilated: bool) -> Shapes {
    let nchw = is_nchw(c)?;
    let strides = spatial_attr(c, "strides", nchw, 1)?;
    let dilations = if dilated { spatial_attr(c, "dilations", nchw, 1)? } else { (1, 1) };
    let explicit = explicit_padding(c, nchw)?;
    let same = c.node.attr("padding").and_then(|a| a.as_str()) == Some("SAME");
    let Some(d) = rank4(input, "input")? else { return Ok(vec![Shape::with_dims(vec![None; 4])]) };
    let (n, h, w) = if nchw { (d[0], d[2], d[3]) } else { (d[0], d[1], d[2]) };
    let oh = windowed(h, kernel.0, strides.0, dilations.0, same, explicit.map(|e| e[0]))?;
    let ow = windowed(w, kernel.1, strides.1, dilations.1, same, explicit.map(|e| e[1]))?;
    Ok(vec![Shape::with_dims(if nchw { vec![n, depth, oh, ow] } else { vec![n, oh, ow, depth] })])
}

fn in_depth(input: &Shape, nchw: bool) -> Dim {
    input.dims.as_ref().filter(|d| d.len() == 4).and_then(|d| if nchw { d[1] } else { d[3] })
}

fn conv2d(c: &InferCtx<'_>) -> Shapes {
    let f = rank4(c.shape(1), "filter")?;
    let (kh, kw, fin, fout) = f.map_or((None, None, None, None), |f| (f[0], f[1], f[2], f[3]));
    let depth = in_depth(c.shape(0), is_nchw(c)?);
    if let (Some(d), Some(i)) = (depth, fin) {
        if i == 0 || d % i != 0 {
            return Err(format!("input depth {d} is not a multiple of the filter's input depth {i}"));
        }
    }
    window_output(c, c.shape(0), (kh, kw), fout, true)
}

fn depthwise(c: &InferCtx<'_>) -> Shapes {
    let f = rank4(c.shape(1), "filter")?;
    let (kh, kw, fin, mult) = f.map_or((None, None, None, None), |f| (f[0], f[1], f[2], f[3]));
    let depth = in_depth(c.shape(0), is_nchw(c)?);
    if let (Some(d), Some(i)) = (depth, fin) {
        if d != i {
            return Err(format!("input depth {d} does not match the filter's {i}"));
        }
    }
    let out = match (depth.or(fin), mult) {
        (Some(d), Some(m)) => Some(d * m),
        _ => None,
    };
    window_output(c, c.shape(0), (kh, kw), out, true)
}

/// A 4-D shape from the value of shape operand `i`, else an unknown 4-D shape.
fn shape_operand(c: &InferCtx<'_>, i: usize, what: &str) -> Shapes {
    if let Some(r) = c.shape(i).rank() {
        if r != 1 {
            return Err(format!("{what} must be a vector, but has shape {}", c.shape(i)));
        }
    }
    Ok(vec![match c.value(i) {
        Some(v) if v.len() == 4 => Shape::with_dims(v.iter().map(|d| d.filter(|x| *x >= 0)).collect()),
        Some(v) => return Err(format!("{what} must have 4 elements, got {}", v.len())),
        None => Shape::with_dims(vec![None; 4]),
    }])
}

fn from_input_0(c: &InferCtx<'_>) -> Shapes {
    shape_operand(c, 0, "input_sizes")
}
fn from_input_1(c: &InferCtx<'_>) -> Shapes {
    shape_operand(c, 1, "filter_sizes")
}
fn avg_pool_grad(c: &InferCtx<'_>) -> Shapes {
    shape_operand(c, 0, "orig_input_shape")
}

fn pool(c: &InferCtx<'_>) -> Shapes {
    let nchw = is_nchw(c)?;
    let (kh, kw) = spatial_attr(c, "ksize", nchw, 1)?;
    let k = c.attr_ints("ksize");
    let depth_k = if k.len() == 4 {
        if nchw {
            k[1]
        } else {
            k[3]
        }
    } else {
        1
    };
    if depth_k != 1 || k.first().is_some_and(|&b| b != 1) {
        return Err(format!("pooling over the batch or depth dimension is not supported (ksize {k:?})"));
    }
    let depth = in_depth(c.shape(0), nchw);
    window_output(c, c.shape(0), (Some(kh), Some(kw)), depth, false)
}

/// `MaxPoolV2`: `MaxPool` with `ksize` and `strides` as operands 1 and 2 (lists of four in
/// the data format's order); the spatial sizes are known when both operands' values are.
fn pool_v2(c: &InferCtx<'_>) -> Shapes {
    let nchw = is_nchw(c)?;
    let same = c.node.attr("padding").and_then(|a| a.as_str()) == Some("SAME");
    let Some(d) = rank4(c.shape(0), "input")? else { return Ok(vec![Shape::with_dims(vec![None; 4])]) };
    let (n, h, w, depth) = if nchw { (d[0], d[2], d[3], d[1]) } else { (d[0], d[1], d[2], d[3]) };
    let spatial = |i: usize| -> Option<(i64, i64)> {
        match c.value(i)? {
            &[_, p1, p2, p3] => {
                let (a, b) = if nchw { (p2, p3) } else { (p1, p2) };
                Some((a?, b?))
            }
            _ => None,
        }
    };
    let (oh, ow) = match (spatial(1), spatial(2)) {
        (Some((kh, kw)), Some((sh, sw))) if kh > 0 && kw > 0 && sh > 0 && sw > 0 => {
            (windowed(h, Some(kh), sh, 1, same, None)?, windowed(w, Some(kw), sw, 1, same, None)?)
        }
        _ => (None, None),
    };
    Ok(vec![Shape::with_dims(if nchw { vec![n, depth, oh, ow] } else { vec![n, oh, ow, depth] })])
}

/// `Dilation2D`: the input's batch and depth, the spatial sizes of a window of the filter's
/// `[FH, FW]` with `strides` and `rates` (its dilation).
fn dilation2d(c: &InferCtx<'_>) -> Shapes {
    let (sh, sw) = spatial_attr(c, "strides", false, 1)?;
    let (rh, rw) = spatial_attr(c, "rates", false, 1)?;
    let same = c.node.attr("padding").and_then(|a| a.as_str()) == Some("SAME");
    let Some(d) = rank4(c.shape(0), "input")? else { return Ok(vec![Shape::with_dims(vec![None; 4])]) };
    let (kh, kw) = match &c.shape(1).dims {
        Some(f) if f.len() == 3 => (f[0], f[1]),
        Some(f) => return Err(format!("filter must be 3-dimensional, got rank {}", f.len())),
        None => (None, None),
    };
    let oh = windowed(d[1], kh, sh, rh, same, None)?;
    let ow = windowed(d[2], kw, sw, rw, same, None)?;
    Ok(vec![Shape::with_dims(vec![d[0], oh, ow, d[3]])])
}

/// `MaxPoolWithArgmax`: the pooled values and, of the same shape, where each came from.
fn pool_with_argmax(c: &InferCtx<'_>) -> Shapes {
    let out = pool(c)?;
    Ok(vec![out[0].clone(), out[0].clone()])
}

fn max_pool_grad(c: &InferCtx<'_>) -> Shapes {
    rank4(c.shape(0), "orig_input")?;
    Ok(vec![c.shape(0).clone()])
}

/// `MaxPoolGradGrad`: the pooled shape, `orig_output`'s (the gradient is `orig_input`'s).
fn max_pool_grad_grad(c: &InferCtx<'_>) -> Shapes {
    rank4(c.shape(0), "orig_input")?;
    rank4(c.shape(1), "orig_output")?;
    Ok(vec![c.shape(1).clone()])
}

// ---------------------------------------------------------------- batch norm

fn channel_count(c: &InferCtx<'_>) -> Result<Dim, String> {
    let nchw = is_nchw(c)?;
    let x = rank4(c.shape(0), "x")?;
    let mut depth = x.and_then(|d| if nchw { d[1] } else { d[3] });
    for (i, what) in [(1, "scale"), (2, "offset")] {
        match &c.shape(i).dims {
            None => {}
            Some(d) if d.len() == 1 => match (depth, d[0]) {
                (Some(a), Some(b)) if a != b => {
                    return Err(format!("{what} has {b} channels but x has {a}"));
                }
                (None, b) => depth = b,
                _ => {}
            },
            Some(_) => return Err(format!("{what} must be a vector, but has shape {}", c.shape(i))),
        }
    }
    Ok(depth)
}

fn fused_batch_norm(c: &InferCtx<'_>) -> Shapes {
    let depth = channel_count(c)?;
    let v = Shape::with_dims(vec![depth]);
    let mut out = vec![c.shape(0).clone(), v.clone(), v.clone(), v.clone(), v];
    if c.out_types.len() == 6 {
        out.push(Shape::unknown());
    }
    Ok(out)
}

fn fused_batch_norm_grad(c: &InferCtx<'_>) -> Shapes {
    let x = merge_shapes(c.shape(0), c.shape(1)).map_err(|e| format!("y_backprop and x: {e}"))?;
    rank4(&x, "x")?;
    let nchw = is_nchw(c)?;
    let depth = x.dims.as_ref().and_then(|d| if nchw { d[1] } else { d[3] });
    let depth = match (&c.shape(2).dims, depth) {
        (Some(s), Some(d)) if s.len() == 1 && s[0].is_some_and(|s| s != d) => {
            return Err(format!("scale has {:?} channels but x has {d}", s[0]))
        }
        (Some(s), None) if s.len() == 1 => s[0],
        _ => depth,
    };
    let v = Shape::with_dims(vec![depth]);
    Ok(vec![x, v.clone(), v, Shape::known(&[0]), Shape::known(&[0])])
}

// ------------------------------------------------- 3-D windows, bincount, image transforms

fn rank_n(s: &Shape, n: usize, what: &str) -> Result<Option<Vec<Dim>>, String> {
    match &s.dims {
        None => Ok(None),
        Some(d) if d.len() == n => Ok(Some(d.clone())),
        Some(_) => Err(format!("{what} must be {n}-dimensional, but has shape {s}")),
    }
}

/// The three spatial entries of a 5-element NDHWC attribute (`strides`, `ksize`,
/// `dilations`); the batch and channel entries must be 1.
fn spatial3(c: &InferCtx<'_>, name: &str) -> Result<[i64; 3], String> {
    let v = c.attr_ints(name);
    if v.is_empty() && name == "dilations" {
        return Ok([1, 1, 1]);
    }
    if c.node.attr("data_format").and_then(|a| a.as_str()).is_some_and(|f| f != "NDHWC") {
        return Err("only the NDHWC data format is supported".into());
    }
    match v[..] {
        [1, a, b, d, 1] => Ok([a, b, d]),
        _ => Err(format!("{name} must be 5 values [1, d, h, w, 1], got {v:?}")),
    }
}

/// `[N, OD, OH, OW, depth]` of a 3-D window op over `input` with a `kernel` window.
fn window3(c: &InferCtx<'_>, input: &Shape, kernel: [Dim; 3], depth: Dim, dilated: bool) -> Shapes {
    let strides = spatial3(c, "strides")?;
    let dilations = if dilated { spatial3(c, "dilations")? } else { [1, 1, 1] };
    let same = c.node.attr("padding").and_then(|a| a.as_str()) == Some("SAME");
    let Some(d) = rank_n(input, 5, "input")? else { return Ok(vec![Shape::with_dims(vec![None; 5])]) };
    let mut out = vec![d[0]];
    let spatial: Result<Vec<Dim>, String> =
        (0..3).map(|i| windowed(d[i + 1], kernel[i], strides[i], dilations[i], same, None)).collect();
    out.extend(spatial?);
    out.push(depth);
    Ok(vec![Shape::with_dims(out)])
}

fn conv3d(c: &InferCtx<'_>) -> Shapes {
    let f = rank_n(c.shape(1), 5, "filter")?;
    let (k, fin, fout) = f.map_or(([None; 3], None, None), |f| ([f[0], f[1], f[2]], f[3], f[4]));
    let depth = rank_n(c.shape(0), 5, "input")?.and_then(|d| d[4]);
    if let (Some(d), Some(i)) = (depth, fin) {
        if i == 0 || d % i != 0 {
            return Err(format!("input depth {d} is not a multiple of the filter's input depth {i}"));
        }
    }
    window3(c, c.shape(0), k, fout, true)
}

fn pool3d(c: &InferCtx<'_>) -> Shapes {
    let k = spatial3(c, "ksize")?;
    let depth = rank_n(c.shape(0), 5, "input")?.and_then(|d| d[4]);
    window3(c, c.shape(0), [Some(k[0]), Some(k[1]), Some(k[2])], depth, false)
}

/// A 5-D shape from the value of shape operand `i`, else an unknown 5-D shape.
fn shape5_operand(c: &InferCtx<'_>, i: usize, what: &str) -> Shapes {
    Ok(vec![match c.value(i) {
        Some(v) if v.len() == 5 => Shape::with_dims(v.iter().map(|d| d.filter(|x| *x >= 0)).collect()),
        Some(v) => return Err(format!("{what} must have 5 elements, got {}", v.len())),
        None => Shape::with_dims(vec![None; 5]),
    }])
}
fn conv3d_input_sizes(c: &InferCtx<'_>) -> Shapes {
    shape5_operand(c, 0, "input_sizes")
}
fn conv3d_filter_sizes(c: &InferCtx<'_>) -> Shapes {
    shape5_operand(c, 1, "filter_sizes")
}
fn max_pool3d_grad(c: &InferCtx<'_>) -> Shapes {
    rank_n(c.shape(0), 5, "orig_input")?;
    Ok(vec![c.shape(0).clone()])
}
fn avg_pool3d_grad(c: &InferCtx<'_>) -> Shapes {
    shape5_operand(c, 0, "orig_input_shape")
}

/// `DenseBincount`: `[size]` for a 1-D input, `[rows, size]` for a 2-D one.
fn dense_bincount(c: &InferCtx<'_>) -> Shapes {
    let size = c.scalar_value(1).filter(|&s| s >= 0);
    if c.scalar_value(1).is_some_and(|s| s < 0) {
        return Err("size must be non-negative".into());
    }
    Ok(vec![match &c.shape(0).dims {
        None => Shape::unknown(),
        Some(d) if d.len() <= 1 => Shape::with_dims(vec![size]),
        Some(d) if d.len() == 2 => Shape::with_dims(vec![d[0], size]),
        Some(d) => return Err(format!("input must be at most 2-dimensional, got rank {}", d.len())),
    }])
}

/// `HistogramFixedWidth`: `[nbins]`.
fn histogram(c: &InferCtx<'_>) -> Shapes {
    if c.scalar_value(2).is_some_and(|n| n <= 0) {
        return Err("nbins should be a positive number".into());
    }
    Ok(vec![Shape::with_dims(vec![c.scalar_value(2)])])
}

/// `LRN`: a rank-4 input, the same shape out.
fn lrn(c: &InferCtx<'_>) -> Shapes {
    rank4(c.shape(0), "input")?;
    Ok(vec![c.shape(0).clone()])
}

/// `LRNGrad`: the three rank-4 operands agree; the gradient has their shape.
fn lrn_grad(c: &InferCtx<'_>) -> Shapes {
    let mut s = c.shape(0).clone();
    for i in 0..3 {
        rank4(c.shape(i), "input")?;
        s = merge_shapes(&s, c.shape(i))?;
    }
    Ok(vec![s])
}

/// `RaggedBincount`: `[len(splits) - 1, size]`.
fn ragged_bincount(c: &InferCtx<'_>) -> Shapes {
    if c.scalar_value(2).is_some_and(|s| s < 0) {
        return Err("size must be non-negative".into());
    }
    let rows = c.shape(0).dims.as_ref().and_then(|d| d.first().copied()).flatten().map(|n| (n - 1).max(0));
    Ok(vec![Shape::with_dims(vec![rows, c.scalar_value(2)])])
}

/// `SparseBincount`: `[size]` for a vector, `[dense_shape[0], size]` otherwise.
fn sparse_bincount(c: &InferCtx<'_>) -> Shapes {
    if c.scalar_value(3).is_some_and(|s| s < 0) {
        return Err("size must be non-negative".into());
    }
    let shape = match c.value(2) {
        Some([_]) => vec![c.scalar_value(3)],
        Some([rows, ..]) => vec![*rows, c.scalar_value(3)],
        _ => return Ok(vec![Shape::unknown()]),
    };
    Ok(vec![Shape::with_dims(shape)])
}

/// `Bincount`: `[size]`.
fn flat_bincount(c: &InferCtx<'_>) -> Shapes {
    if c.scalar_value(1).is_some_and(|s| s < 0) {
        return Err("size must be non-negative".into());
    }
    Ok(vec![Shape::with_dims(vec![c.scalar_value(1)])])
}

/// `ImageProjectiveTransformV2/V3`: `[batch, output_shape[0], output_shape[1], channels]`.
fn projective_transform(c: &InferCtx<'_>) -> Shapes {
    let images = rank4(c.shape(0), "images")?;
    let (n, ch) = images.map_or((None, None), |d| (d[0], d[3]));
    let (h, w) = match c.value(2) {
        Some([h, w]) => (h.filter(|x| *x > 0), w.filter(|x| *x > 0)),
        Some(v) => return Err(format!("output_shape must have 2 elements, got {}", v.len())),
        None => (None, None),
    };
    Ok(vec![Shape::with_dims(vec![n, h, w, ch])])
}

// ---------------------------------------------------------------- tables

const CONV_ATTRS: &[AttrSpec] = &[
    tattr("T", &[Float16, BFloat16, Float32, Float64, Int32]),
    req("strides", AttrKind::ListInt),
    opt("use_cudnn_on_gpu", AttrKind::Bool),
    req("padding", AttrKind::String),
    opt("explicit_paddings", AttrKind::ListInt),
    opt("data_format", AttrKind::String),
    opt("dilations", AttrKind::ListInt),
];
const CONV3D_ATTRS: &[AttrSpec] = &[
    tattr("T", FLOATS),
    req("strides", AttrKind::ListInt),
    req("padding", AttrKind::String),
    opt("data_format", AttrKind::String),
    opt("dilations", AttrKind::ListInt),
];
const CONV3D_GRAD_ATTRS: &[AttrSpec] = &[
    tattr("T", FLOATS),
    req("strides", AttrKind::ListInt),
    req("padding", AttrKind::String),
    opt("data_format", AttrKind::String),
    opt("dilations", AttrKind::ListInt),
    tdef("Tshape", Int32, INDEX),
];
const POOL3D_ATTRS: &[AttrSpec] = &[
    tattr("T", FLOATS),
    req("ksize", AttrKind::ListInt),
    req("strides", AttrKind::ListInt),
    req("padding", AttrKind::String),
    opt("data_format", AttrKind::String),
];
const MAX_POOL3D_GRAD_ATTRS: &[AttrSpec] = &[
    tdef("T", Float32, FLOATS),
    tdef("TInput", Float32, FLOATS),
    req("ksize", AttrKind::ListInt),
    req("strides", AttrKind::ListInt),
    req("padding", AttrKind::String),
    opt("data_format", AttrKind::String),
];
const LRN_ATTRS: &[AttrSpec] = &[
    AttrSpec { name: "depth_radius", kind: AttrKind::Int, default: AttrDefault::Int(5), allowed: None },
    AttrSpec { name: "bias", kind: AttrKind::Float, default: AttrDefault::Optional, allowed: None },
    AttrSpec { name: "alpha", kind: AttrKind::Float, default: AttrDefault::Optional, allowed: None },
    AttrSpec { name: "beta", kind: AttrKind::Float, default: AttrDefault::Optional, allowed: None },
    tdef("T", Float32, &[Float16, BFloat16, Float32]),
];
const HISTOGRAM_ATTRS: &[AttrSpec] =
    &[tattr("T", &[Int32, Int64, Float32, Float64]), tdef("dtype", Int32, &[Int32, Int64])];
const BINCOUNT_ATTRS: &[AttrSpec] =
    &[tattr("Tidx", INDEX), tattr("T", &[Int32, Int64, Float32, Float64]), bdef("binary_output", false)];
const TRANSFORM_ATTRS: &[AttrSpec] = &[
    tattr("dtype", &[UInt8, Int32, Int64, Float16, BFloat16, Float32, Float64]),
    req("interpolation", AttrKind::String),
    opt("fill_mode", AttrKind::String),
];
const DEPTHWISE_ATTRS: &[AttrSpec] = &[
    tattr("T", FLOATS),
    req("strides", AttrKind::ListInt),
    req("padding", AttrKind::String),
    opt("explicit_paddings", AttrKind::ListInt),
    opt("data_format", AttrKind::String),
    opt("dilations", AttrKind::ListInt),
];
/// `MaxPool`/`MaxPoolGrad`: TensorFlow's OpDef defaults `T` to float32, so graphs
/// with default attributes stripped (SavedModel function bodies) omit it.
/// `MaxPoolWithArgmax` and its gradient: NHWC only, the argmax's index type, and whether the
/// flat index counts the batch.
const ARGMAX_POOL_ATTRS: &[AttrSpec] = &[
    tdef(
        "T",
        Float32,
        &[Float16, BFloat16, Float32, Float64, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64],
    ),
    tdef("Targmax", Int64, INDEX),
    req("ksize", AttrKind::ListInt),
    req("strides", AttrKind::ListInt),
    req("padding", AttrKind::String),
    bdef("include_batch_in_index", false),
];
const POOL_ATTRS: &[AttrSpec] = &[
    tdef(
        "T",
        Float32,
        &[Float16, BFloat16, Float32, Float64, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64],
    ),
    req("ksize", AttrKind::ListInt),
    req("strides", AttrKind::ListInt),
    req("padding", AttrKind::String),
    opt("explicit_paddings", AttrKind::ListInt),
    opt("data_format", AttrKind::String),
];
const DILATION_ATTRS: &[AttrSpec] = &[
    tdef(
        "T",
        Float32,
        &[Float16, BFloat16, Float32, Float64, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64],
    ),
    req("strides", AttrKind::ListInt),
    req("rates", AttrKind::ListInt),
    req("padding", AttrKind::String),
];
const POOL_V2_ATTRS: &[AttrSpec] = &[
    tdef(
        "T",
        Float32,
        &[Float16, BFloat16, Float32, Float64, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64],
    ),
    req("padding", AttrKind::String),
    opt("data_format", AttrKind::String),
];
const AVG_POOL_ATTRS: &[AttrSpec] = &[
    tattr("T", FLOATS),
    req("ksize", AttrKind::ListInt),
    req("strides", AttrKind::ListInt),
    req("padding", AttrKind::String),
    opt("data_format", AttrKind::String),
];
const BN_ATTRS: &[AttrSpec] = &[
    tattr("T", &[Float16, BFloat16, Float32]),
    tdef("U", Float32, BN_U),
    opt("epsilon", AttrKind::Float),
    opt("exponential_avg_factor", AttrKind::Float),
    opt("data_format", AttrKind::String),
    bdef("is_training", true),
];
const BN_V1_ATTRS: &[AttrSpec] = &[
    tattr("T", &[Float32]),
    opt("epsilon", AttrKind::Float),
    opt("exponential_avg_factor", AttrKind::Float),
    opt("data_format", AttrKind::String),
    bdef("is_training", true),
];
const BN_IN: &[ArgSpec] = &[a("x", T), a("scale", U), a("offset", U), a("mean", U), a("variance", U)];
const BN_V1_IN: &[ArgSpec] = &[a("x", T), a("scale", T), a("offset", T), a("mean", T), a("variance", T)];
const BN_OUT: &[ArgSpec] =
    &[a("y", T), a("batch_mean", U), a("batch_variance", U), a("reserve_space_1", U), a("reserve_space_2", U)];
const BN_V1_OUT: &[ArgSpec] =
    &[a("y", T), a("batch_mean", T), a("batch_variance", T), a("reserve_space_1", T), a("reserve_space_2", T)];
const BN_V3_OUT: &[ArgSpec] = &[
    a("y", T),
    a("batch_mean", U),
    a("batch_variance", U),
    a("reserve_space_1", U),
    a("reserve_space_2", U),
    a("reserve_space_3", U),
];
const BN_GRAD_OUT: &[ArgSpec] = &[
    a("x_backprop", T),
    a("scale_backprop", U),
    a("offset_backprop", U),
    a("reserve_space_3", U),
    a("reserve_space_4", U),
];
const BN_GRAD_V1_OUT: &[ArgSpec] = &[
    a("x_backprop", T),
    a("scale_backprop", T),
    a("offset_backprop", T),
    a("reserve_space_3", T),
    a("reserve_space_4", T),
];

/// The ops of this area.
pub(super) static OPS: &[OpSchema] = &[
    // ---- Dense optimizers.
    dense_apply(
        "ResourceApplyAdagrad",
        &[a("var", RES), a("accum", RES), a("lr", T), a("grad", T)],
        LOCK_SLOTS,
        apply_shapes::<2, 3, DENSE>,
    ),
    dense_apply(
        "ResourceApplyAdagradDA",
        &[
            a("var", RES),
            a("gradient_accumulator", RES),
            a("gradient_squared_accumulator", RES),
            a("grad", T),
            a("lr", T),
            a("l1", T),
            a("l2", T),
            a("global_step", I64),
        ],
        LOCK,
        apply_shapes::<3, 3, DENSE>,
    ),
    dense_apply(
        "ResourceApplyAdagradV2",
        &[a("var", RES), a("accum", RES), a("lr", T), a("epsilon", T), a("grad", T)],
        LOCK_SLOTS,
        apply_shapes::<2, 4, DENSE>,
    ),
    dense_apply(
        "ResourceApplyKerasMomentum",
        &[a("var", RES), a("accum", RES), a("lr", T), a("grad", T), a("momentum", T)],
        LOCK_NESTEROV,
        apply_shapes::<2, 3, DENSE>,
    ),
    dense_apply(
        "ResourceApplyAdamWithAmsgrad",
        &[
            a("var", RES),
            a("m", RES),
            a("v", RES),
            a("vhat", RES),
            a("beta1_power", T),
            a("beta2_power", T),
            a("lr", T),
            a("beta1", T),
            a("beta2", T),
            a("epsilon", T),
            a("grad", T),
        ],
        LOCK,
        apply_shapes::<4, 10, DENSE>,
    ),
    dense_apply(
        "ResourceApplyAdaMax",
        &[
            a("var", RES),
            a("m", RES),
            a("v", RES),
            a("beta1_power", T),
            a("lr", T),
            a("beta1", T),
            a("beta2", T),
            a("epsilon", T),
            a("grad", T),
        ],
        LOCK,
        apply_shapes::<3, 8, DENSE>,
    ),
    dense_apply(
        "ResourceApplyAdadelta",
        &[
            a("var", RES),
            a("accum", RES),
            a("accum_update", RES),
            a("lr", T),
            a("rho", T),
            a("epsilon", T),
            a("grad", T),
        ],
        LOCK,
        apply_shapes::<3, 6, DENSE>,
    ),
    dense_apply(
        "ResourceApplyRMSProp",
        &[
            a("var", RES),
            a("ms", RES),
            a("mom", RES),
            a("lr", T),
            a("rho", T),
            a("momentum", T),
            a("epsilon", T),
            a("grad", T),
        ],
        LOCK,
        apply_shapes::<3, 7, DENSE>,
    ),
    dense_apply(
        "ResourceApplyCenteredRMSProp",
        &[
            a("var", RES),
            a("mg", RES),
            a("ms", RES),
            a("mom", RES),
            a("lr", T),
            a("rho", T),
            a("momentum", T),
            a("epsilon", T),
            a("grad", T),
        ],
        LOCK,
        apply_shapes::<4, 8, DENSE>,
    ),
    dense_apply(
        "ResourceApplyFtrl",
        &[
            a("var", RES),
            a("accum", RES),
            a("linear", RES),
            a("grad", T),
            a("lr", T),
            a("l1", T),
            a("l2", T),
            a("lr_power", T),
        ],
        LOCK_FTRL,
        apply_shapes::<3, 3, DENSE>,
    ),
    dense_apply(
        "ResourceApplyFtrlV2",
        &[
            a("var", RES),
            a("accum", RES),
            a("linear", RES),
            a("grad", T),
            a("lr", T),
            a("l1", T),
            a("l2", T),
            a("l2_shrinkage", T),
            a("lr_power", T),
        ],
        LOCK_FTRL,
        apply_shapes::<3, 3, DENSE>,
    ),
    dense_apply(
        "ResourceApplyProximalGradientDescent",
        &[a("var", RES), a("alpha", T), a("l1", T), a("l2", T), a("delta", T)],
        LOCK,
        apply_shapes::<1, 4, DENSE>,
    ),
    dense_apply(
        "ResourceApplyProximalAdagrad",
        &[a("var", RES), a("accum", RES), a("lr", T), a("l1", T), a("l2", T), a("grad", T)],
        LOCK,
        apply_shapes::<2, 5, DENSE>,
    ),
    dense_apply(
        "ResourceApplyAddSign",
        &[a("var", RES), a("m", RES), a("lr", T), a("alpha", T), a("sign_decay", T), a("beta", T), a("grad", T)],
        LOCK,
        apply_shapes::<2, 6, DENSE>,
    ),
    dense_apply(
        "ResourceApplyPowerSign",
        &[a("var", RES), a("m", RES), a("lr", T), a("logbase", T), a("sign_decay", T), a("beta", T), a("grad", T)],
        LOCK,
        apply_shapes::<2, 6, DENSE>,
    ),
    // ---- Sparse optimizers (IndexedSlices gradients).
    optimizer(
        "ResourceSparseApplyAdagrad",
        &[a("var", RES), a("accum", RES), a("lr", T), a("grad", T), a("indices", IDX)],
        SPARSE_SLOTS,
        apply_shapes::<2, 3, 4>,
    ),
    optimizer(
        "ResourceSparseApplyAdagradDA",
        &[
            a("var", RES),
            a("gradient_accumulator", RES),
            a("gradient_squared_accumulator", RES),
            a("grad", T),
            a("indices", IDX),
            a("lr", T),
            a("l1", T),
            a("l2", T),
            a("global_step", I64),
        ],
        SPARSE_LOCK,
        apply_shapes::<3, 3, 4>,
    ),
    optimizer(
        "ResourceSparseApplyAdagradV2",
        &[a("var", RES), a("accum", RES), a("lr", T), a("epsilon", T), a("grad", T), a("indices", IDX)],
        SPARSE_SLOTS,
        apply_shapes::<2, 4, 5>,
    ),
    optimizer(
        "ResourceSparseApplyMomentum",
        &[a("var", RES), a("accum", RES), a("lr", T), a("grad", T), a("indices", IDX), a("momentum", T)],
        SPARSE_NESTEROV,
        apply_shapes::<2, 3, 4>,
    ),
    optimizer(
        "ResourceSparseApplyKerasMomentum",
        &[a("var", RES), a("accum", RES), a("lr", T), a("grad", T), a("indices", IDX), a("momentum", T)],
        SPARSE_NESTEROV,
        apply_shapes::<2, 3, 4>,
    ),
    optimizer(
        "ResourceSparseApplyAdadelta",
        &[
            a("var", RES),
            a("accum", RES),
            a("accum_update", RES),
            a("lr", T),
            a("rho", T),
            a("epsilon", T),
            a("grad", T),
            a("indices", IDX),
        ],
        SPARSE_LOCK,
        apply_shapes::<3, 6, 7>,
    ),
    optimizer(
        "ResourceSparseApplyRMSProp",
        &[
            a("var", RES),
            a("ms", RES),
            a("mom", RES),
            a("lr", T),
            a("rho", T),
            a("momentum", T),
            a("epsilon", T),
            a("grad", T),
            a("indices", IDX),
        ],
        SPARSE_LOCK,
        apply_shapes::<3, 7, 8>,
    ),
    optimizer(
        "ResourceSparseApplyCenteredRMSProp",
        &[
            a("var", RES),
            a("mg", RES),
            a("ms", RES),
            a("mom", RES),
            a("lr", T),
            a("rho", T),
            a("momentum", T),
            a("epsilon", T),
            a("grad", T),
            a("indices", IDX),
        ],
        SPARSE_LOCK,
        apply_shapes::<4, 8, 9>,
    ),
    optimizer(
        "ResourceSparseApplyFtrl",
        &[
            a("var", RES),
            a("accum", RES),
            a("linear", RES),
            a("grad", T),
            a("indices", IDX),
            a("lr", T),
            a("l1", T),
            a("l2", T),
            a("lr_power", T),
        ],
        SPARSE_FTRL,
        apply_shapes::<3, 3, 4>,
    ),
    optimizer(
        "ResourceSparseApplyFtrlV2",
        &[
            a("var", RES),
            a("accum", RES),
            a("linear", RES),
            a("grad", T),
            a("indices", IDX),
            a("lr", T),
            a("l1", T),
            a("l2", T),
            a("l2_shrinkage", T),
            a("lr_power", T),
        ],
        SPARSE_FTRL,
        apply_shapes::<3, 3, 4>,
    ),
    optimizer(
        "ResourceSparseApplyProximalGradientDescent",
        &[a("var", RES), a("alpha", T), a("l1", T), a("l2", T), a("grad", T), a("indices", IDX)],
        SPARSE_LOCK,
        apply_shapes::<1, 4, 5>,
    ),
    optimizer(
        "ResourceSparseApplyProximalAdagrad",
        &[a("var", RES), a("accum", RES), a("lr", T), a("l1", T), a("l2", T), a("grad", T), a("indices", IDX)],
        SPARSE_LOCK,
        apply_shapes::<2, 5, 6>,
    ),
    // ---- Convolutions.
    nn("Conv2D", &[a("input", T), a("filter", T)], &[a("output", T)], CONV_ATTRS, conv2d),
    nn(
        "Conv2DBackpropInput",
        &[a("input_sizes", I32), a("filter", T), a("out_backprop", T)],
        &[a("output", T)],
        CONV_ATTRS,
        from_input_0,
    ),
    nn(
        "Conv2DBackpropFilter",
        &[a("input", T), a("filter_sizes", I32), a("out_backprop", T)],
        &[a("output", T)],
        CONV_ATTRS,
        from_input_1,
    ),
    nn("DepthwiseConv2dNative", &[a("input", T), a("filter", T)], &[a("output", T)], DEPTHWISE_ATTRS, depthwise),
    nn(
        "DepthwiseConv2dNativeBackpropInput",
        &[a("input_sizes", I32), a("filter", T), a("out_backprop", T)],
        &[a("output", T)],
        DEPTHWISE_ATTRS,
        from_input_0,
    ),
    nn(
        "DepthwiseConv2dNativeBackpropFilter",
        &[a("input", T), a("filter_sizes", I32), a("out_backprop", T)],
        &[a("output", T)],
        DEPTHWISE_ATTRS,
        from_input_1,
    ),
    // ---- 3-D convolutions and pooling (NDHWC).
    nn("Conv3D", &[a("input", T), a("filter", T)], &[a("output", T)], CONV3D_ATTRS, conv3d),
    nn(
        "Conv3DBackpropInputV2",
        &[a("input_sizes", TypeRule::Attr("Tshape")), a("filter", T), a("out_backprop", T)],
        &[a("output", T)],
        CONV3D_GRAD_ATTRS,
        conv3d_input_sizes,
    ),
    nn(
        "Conv3DBackpropFilterV2",
        &[a("input", T), a("filter_sizes", I32), a("out_backprop", T)],
        &[a("output", T)],
        CONV3D_ATTRS,
        conv3d_filter_sizes,
    ),
    nn("MaxPool3D", &[a("input", T)], &[a("output", T)], POOL3D_ATTRS, pool3d),
    nn(
        "MaxPool3DGrad",
        &[a("orig_input", TypeRule::Attr("TInput")), a("orig_output", TypeRule::Attr("TInput")), a("grad", T)],
        &[a("output", T)],
        MAX_POOL3D_GRAD_ATTRS,
        max_pool3d_grad,
    ),
    nn("AvgPool3D", &[a("input", T)], &[a("output", T)], POOL3D_ATTRS, pool3d),
    nn("AvgPool3DGrad", &[a("orig_input_shape", I32), a("grad", T)], &[a("output", T)], POOL3D_ATTRS, avg_pool3d_grad),
    // ---- Preprocessing: `tf.math.bincount` / Keras CategoryEncoding, Keras' random image
    // transforms.
    nn(
        "DenseBincount",
        &[a("input", TypeRule::Attr("Tidx")), a("size", TypeRule::Attr("Tidx")), a("weights", T)],
        &[a("output", T)],
        BINCOUNT_ATTRS,
        dense_bincount,
    ),
    // `tf.histogram_fixed_width`: counts of values in `nbins` equal bins of `value_range`.
    nn(
        "HistogramFixedWidth",
        &[a("values", T), a("value_range", T), a("nbins", TypeRule::Fixed(Int32))],
        &[a("out", TypeRule::Attr("dtype"))],
        HISTOGRAM_ATTRS,
        histogram,
    ),
    nn("LRN", &[a("input", T)], &[a("output", T)], LRN_ATTRS, lrn),
    nn(
        "LRNGrad",
        &[a("input_grads", T), a("input_image", T), a("output_image", T)],
        &[a("output", T)],
        LRN_ATTRS,
        lrn_grad,
    ),
    nn(
        "RaggedBincount",
        &[
            a("splits", TypeRule::Fixed(Int64)),
            a("values", TypeRule::Attr("Tidx")),
            a("size", TypeRule::Attr("Tidx")),
            a("weights", T),
        ],
        &[a("output", T)],
        BINCOUNT_ATTRS,
        ragged_bincount,
    ),
    nn(
        "SparseBincount",
        &[
            a("indices", TypeRule::Fixed(Int64)),
            a("values", TypeRule::Attr("Tidx")),
            a("dense_shape", TypeRule::Fixed(Int64)),
            a("size", TypeRule::Attr("Tidx")),
            a("weights", T),
        ],
        &[a("output", T)],
        BINCOUNT_ATTRS,
        sparse_bincount,
    ),
    nn(
        "Bincount",
        &[a("arr", I32), a("size", I32), a("weights", T)],
        &[a("bins", T)],
        &[tattr("T", &[Int32, Int64, Float32, Float64])],
        flat_bincount,
    ),
    nn(
        "ImageProjectiveTransformV2",
        &[a("images", TypeRule::Attr("dtype")), a("transforms", F32), a("output_shape", I32)],
        &[a("transformed_images", TypeRule::Attr("dtype"))],
        TRANSFORM_ATTRS,
        projective_transform,
    ),
    nn(
        "ImageProjectiveTransformV3",
        &[a("images", TypeRule::Attr("dtype")), a("transforms", F32), a("output_shape", I32), a("fill_value", F32)],
        &[a("transformed_images", TypeRule::Attr("dtype"))],
        TRANSFORM_ATTRS,
        projective_transform,
    ),
    // ---- Pooling.
    nn("MaxPool", &[a("input", T)], &[a("output", T)], POOL_ATTRS, pool),
    nn(
        "MaxPoolGrad",
        &[a("orig_input", T), a("orig_output", T), a("grad", T)],
        &[a("output", T)],
        POOL_ATTRS,
        max_pool_grad,
    ),
    // Morphological dilation (`tf.nn.dilation2d`, `erosion2d`) and its gradients.
    nn("Dilation2D", &[a("input", T), a("filter", T)], &[a("output", T)], DILATION_ATTRS, dilation2d),
    nn(
        "Dilation2DBackpropInput",
        &[a("input", T), a("filter", T), a("out_backprop", T)],
        &[a("in_backprop", T)],
        DILATION_ATTRS,
        |c| Ok(vec![c.shape(0).clone()]),
    ),
    nn(
        "Dilation2DBackpropFilter",
        &[a("input", T), a("filter", T), a("out_backprop", T)],
        &[a("filter_backprop", T)],
        DILATION_ATTRS,
        |c| Ok(vec![c.shape(1).clone()]),
    ),
    // `MaxPool`/`MaxPoolGrad` with `ksize` and `strides` as int32 operands (`tf.nn.max_pool`
    // given tensors for them).
    // Fractional pooling (seeded regions of k or k + 1 rows and columns) and its gradients.
    nn("FractionalMaxPool", &[a("value", T)], FRACTIONAL_OUT, FRACTIONAL_ATTRS, fractional_pool),
    nn("FractionalAvgPool", &[a("value", T)], FRACTIONAL_OUT, FRACTIONAL_ATTRS, fractional_pool),
    nn(
        "FractionalMaxPoolGrad",
        &[
            a("orig_input", T),
            a("orig_output", T),
            a("out_backprop", T),
            a("row_pooling_sequence", I64),
            a("col_pooling_sequence", I64),
        ],
        &[a("output", T)],
        FRACTIONAL_GRAD_ATTRS,
        |c| Ok(vec![c.shape(0).clone()]),
    ),
    nn(
        "FractionalAvgPoolGrad",
        &[
            a("orig_input_tensor_shape", I64),
            a("out_backprop", T),
            a("row_pooling_sequence", I64),
            a("col_pooling_sequence", I64),
        ],
        &[a("output", T)],
        FRACTIONAL_GRAD_ATTRS,
        super::shapes::shape_from_value_0,
    ),
    nn("MaxPoolV2", &[a("input", T), a("ksize", I32), a("strides", I32)], &[a("output", T)], POOL_V2_ATTRS, pool_v2),
    nn(
        "MaxPoolGradV2",
        &[a("orig_input", T), a("orig_output", T), a("grad", T), a("ksize", I32), a("strides", I32)],
        &[a("output", T)],
        POOL_V2_ATTRS,
        max_pool_grad,
    ),
    nn(
        "MaxPoolGradGrad",
        &[a("orig_input", T), a("orig_output", T), a("grad", T)],
        &[a("output", T)],
        POOL_ATTRS,
        max_pool_grad_grad,
    ),
    nn(
        "MaxPoolWithArgmax",
        &[a("input", T)],
        &[a("output", T), a("argmax", TypeRule::Attr("Targmax"))],
        ARGMAX_POOL_ATTRS,
        pool_with_argmax,
    ),
    nn(
        "MaxPoolGradWithArgmax",
        &[a("input", T), a("grad", T), a("argmax", TypeRule::Attr("Targmax"))],
        &[a("output", T)],
        ARGMAX_POOL_ATTRS,
        max_pool_grad,
    ),
    nn("AvgPool", &[a("value", T)], &[a("output", T)], AVG_POOL_ATTRS, pool),
    nn("AvgPoolGrad", &[a("orig_input_shape", I32), a("grad", T)], &[a("output", T)], AVG_POOL_ATTRS, avg_pool_grad),
    // ---- Batch normalisation.
    nn("FusedBatchNorm", BN_V1_IN, BN_V1_OUT, BN_V1_ATTRS, fused_batch_norm),
    nn("FusedBatchNormV2", BN_IN, BN_OUT, BN_ATTRS, fused_batch_norm),
    nn("FusedBatchNormV3", BN_IN, BN_V3_OUT, BN_ATTRS, fused_batch_norm),
    nn(
        "FusedBatchNormGrad",
        &[a("y_backprop", T), a("x", T), a("scale", T), a("reserve_space_1", T), a("reserve_space_2", T)],
        BN_GRAD_V1_OUT,
        BN_V1_ATTRS,
        fused_batch_norm_grad,
    ),
    nn(
        "FusedBatchNormGradV2",
        &[a("y_backprop", T), a("x", T), a("scale", F32), a("reserve_space_1", U), a("reserve_space_2", U)],
        BN_GRAD_OUT,
        BN_ATTRS,
        fused_batch_norm_grad,
    ),
    nn(
        "FusedBatchNormGradV3",
        &[
            a("y_backprop", T),
            a("x", T),
            a("scale", F32),
            a("reserve_space_1", U),
            a("reserve_space_2", U),
            a("reserve_space_3", U),
        ],
        &[
            a("x_backprop", T),
            a("scale_backprop", U),
            a("offset_backprop", U),
            a("reserve_space_4", U),
            a("reserve_space_5", U),
        ],
        BN_ATTRS,
        fused_batch_norm_grad,
    ),
];

const FRACTIONAL_TYPES: &[DType] = &[Float32, Float64, Int32, Int64];
const FRACTIONAL_OUT: &[ArgSpec] = &[a("output", T), a("row_pooling_sequence", I64), a("col_pooling_sequence", I64)];
const FRACTIONAL_ATTRS: &[AttrSpec] = &[
    req("pooling_ratio", AttrKind::ListFloat),
    bdef("pseudo_random", false),
    bdef("overlapping", false),
    bdef("deterministic", false),
    AttrSpec { name: "seed", kind: AttrKind::Int, default: AttrDefault::Int(0), allowed: None },
    AttrSpec { name: "seed2", kind: AttrKind::Int, default: AttrDefault::Int(0), allowed: None },
    tattr("T", FRACTIONAL_TYPES),
];
const FRACTIONAL_GRAD_ATTRS: &[AttrSpec] = &[bdef("overlapping", false), tattr("T", FRACTIONAL_TYPES)];

/// `FractionalMaxPool`/`FractionalAvgPool`: each known dimension divided by its ratio (in
/// float32, as the kernel does) and floored; the row and column sequences hold one more
/// boundary than the output has rows and columns.
fn fractional_pool(c: &InferCtx<'_>) -> Result<Vec<Shape>, String> {
    let ratio: Vec<f32> = match c.node.attr("pooling_ratio") {
        Some(crate::AttrValue::List(crate::ListValue::F(v))) => v.clone(),
        _ => return Err("pooling_ratio must be a list of 4 floats".into()),
    };
    if ratio.len() != 4 {
        return Err(format!("pooling_ratio field must specify 4 dimensions, got {}", ratio.len()));
    }
    if let Some(r) = ratio.iter().find(|&&r| r < 1.0) {
        return Err(format!("pooling_ratio cannot be smaller than 1, got: {r}"));
    }
    let input = c.shape(0);
    if input.rank().is_some_and(|r| r != 4) {
        return Err(format!("input must be 4-dimensional, got {input:?}"));
    }
    let dims: Vec<Dim> =
        (0..4).map(|i| input.dims.as_ref().and_then(|d| d[i]).map(|d| (d as f32 / ratio[i]).floor() as i64)).collect();
    let seq = |d: Dim| Shape::with_dims(vec![d.map(|d| d + 1)]);
    Ok(vec![Shape::with_dims(dims.clone()), seq(dims[1]), seq(dims[2])])
}

#[cfg(test)]
mod tests {
    use super::super::{lookup, InputFacts};
    use super::*;
    use crate::{AttrValue, ListValue, Node};

    use crate::infer::testing::bare_node as node;

    fn infer(n: &Node, shapes: &[Shape], values: &[Option<Vec<Dim>>], outs: usize) -> Shapes {
        let facts: Vec<InputFacts<'_>> = shapes
            .iter()
            .zip(values)
            .map(|(s, v)| InputFacts { dtype: Some(Float32), shape: s, value: v.as_deref(), handle: None })
            .collect();
        let out_types = vec![Float32; outs];
        let ctx = InferCtx { node: n, inputs: &facts, out_types: &out_types };
        lookup(&n.op).unwrap().infer_shapes(&ctx)
    }

    fn ints(v: &[i64]) -> AttrValue {
        AttrValue::List(ListValue::I(v.to_vec()))
    }
    fn s(x: &str) -> AttrValue {
        AttrValue::S(x.as_bytes().to_vec())
    }

    /// The 3-D window ops (Keras' Conv3D: SAME stride 2, grouped; MaxPooling3D VALID), a
    /// 2-D `DenseBincount` and an image transform to another output size.
    #[test]
    fn volume_bincount_and_transform_shapes() {
        let conv = node("Conv3D", &[("strides", ints(&[1, 2, 1, 2, 1])), ("padding", s("SAME"))]);
        let out = infer(&conv, &[Shape::known(&[2, 5, 6, 7, 4]), Shape::known(&[3, 3, 3, 2, 6])], &[None, None], 1);
        assert_eq!(out.unwrap(), vec![Shape::known(&[2, 3, 6, 4, 6])]);
        let bad = infer(&conv, &[Shape::known(&[2, 5, 6, 7, 5]), Shape::known(&[3, 3, 3, 2, 6])], &[None, None], 1);
        assert!(bad.is_err());
        let pool = node(
            "MaxPool3D",
            &[("ksize", ints(&[1, 2, 2, 3, 1])), ("strides", ints(&[1, 2, 2, 1, 1])), ("padding", s("VALID"))],
        );
        let out = infer(&pool, &[Shape::known(&[1, 5, 4, 6, 3])], &[None], 1);
        assert_eq!(out.unwrap(), vec![Shape::known(&[1, 2, 2, 4, 3])]);
        let bincount = node("DenseBincount", &[]);
        let out = infer(
            &bincount,
            &[Shape::known(&[4, 5]), Shape::scalar(), Shape::known(&[0])],
            &[None, Some(vec![Some(7)]), None],
            1,
        );
        assert_eq!(out.unwrap(), vec![Shape::known(&[4, 7])]);
        let tr = node("ImageProjectiveTransformV3", &[("interpolation", s("BILINEAR"))]);
        let out = infer(
            &tr,
            &[Shape::known(&[3, 5, 6, 2]), Shape::known(&[3, 8]), Shape::known(&[2]), Shape::scalar()],
            &[None, None, Some(vec![Some(7), Some(4)]), None],
            1,
        );
        assert_eq!(out.unwrap(), vec![Shape::known(&[3, 7, 4, 2])]);
    }

    #[test]
    fn conv_and_pool_shapes_follow_tensorflow() {
        let conv = node("Conv2D", &[("strides", ints(&[1, 2, 2, 1])), ("padding", s("SAME"))]);
        let out = infer(&conv, &[Shape::known(&[8, 12, 12, 3]), Shape::known(&[3, 3, 3, 4])], &[None, None], 1);
        assert_eq!(out.unwrap(), vec![Shape::known(&[8, 6, 6, 4])]);
        let valid = node("Conv2D", &[("strides", ints(&[1, 2, 2, 1])), ("padding", s("VALID"))]);
        let out = infer(&valid, &[Shape::known(&[8, 3, 3, 4]), Shape::known(&[2, 2, 4, 3])], &[None, None], 1);
        assert_eq!(out.unwrap(), vec![Shape::known(&[8, 1, 1, 3])]);
        let explicit = node(
            "Conv2D",
            &[
                ("strides", ints(&[1, 1, 1, 1])),
                ("padding", s("EXPLICIT")),
                ("explicit_paddings", ints(&[0, 0, 1, 0, 0, 1, 0, 0])),
            ],
        );
        let out = infer(&explicit, &[Shape::known(&[8, 6, 6, 4]), Shape::known(&[2, 2, 4, 4])], &[None, None], 1);
        assert_eq!(out.unwrap(), vec![Shape::known(&[8, 6, 6, 4])]);
        let bad = infer(&conv, &[Shape::known(&[8, 12, 12, 5]), Shape::known(&[3, 3, 3, 4])], &[None, None], 1);
        assert!(bad.is_err());
        let pool = node(
            "MaxPool",
            &[("ksize", ints(&[1, 2, 2, 1])), ("strides", ints(&[1, 2, 2, 1])), ("padding", s("VALID"))],
        );
        let out = infer(&pool, &[Shape::with_dims(vec![None, Some(12), Some(12), Some(4)])], &[None], 1);
        assert_eq!(out.unwrap(), vec![Shape::with_dims(vec![None, Some(6), Some(6), Some(4)])]);
        let dw = node("DepthwiseConv2dNative", &[("strides", ints(&[1, 1, 1, 1])), ("padding", s("SAME"))]);
        let out = infer(&dw, &[Shape::known(&[8, 6, 6, 2]), Shape::known(&[3, 3, 2, 2])], &[None, None], 1);
        assert_eq!(out.unwrap(), vec![Shape::known(&[8, 6, 6, 4])]);
        let bi = node("Conv2DBackpropInput", &[("strides", ints(&[1, 1, 1, 1])), ("padding", s("SAME"))]);
        let sizes = Some(vec![Some(8), Some(12), Some(12), Some(3)]);
        let out =
            infer(&bi, &[Shape::known(&[4]), Shape::known(&[3, 3, 3, 4]), Shape::unknown()], &[sizes, None, None], 1);
        assert_eq!(out.unwrap(), vec![Shape::known(&[8, 12, 12, 3])]);
    }

    #[test]
    fn batch_norm_shapes() {
        let bn = node("FusedBatchNormV3", &[]);
        let v = Shape::known(&[0]);
        let out = infer(
            &bn,
            &[Shape::known(&[8, 6, 6, 4]), Shape::known(&[4]), Shape::known(&[4]), v.clone(), v],
            &[None, None, None, None, None],
            6,
        )
        .unwrap();
        assert_eq!(out[0], Shape::known(&[8, 6, 6, 4]));
        assert_eq!(out[1], Shape::known(&[4]));
        assert_eq!(out.len(), 6);
    }

    #[test]
    fn optimizers_are_stateful_modifies_with_checked_operands() {
        for s in OPS.iter().filter(|s| s.family == OpFamily::Resource) {
            assert!(s.is_stateful, "{}", s.name);
            assert_eq!(s.resource_kind(), Some(crate::ResourceKind::Modify), "{}", s.name);
        }
        let sparse = node("ResourceSparseApplyAdagrad", &[]);
        let sc = Shape::scalar();
        let ok = infer(
            &sparse,
            &[sc.clone(), sc.clone(), sc.clone(), Shape::known(&[5, 4]), Shape::known(&[5])],
            &[None, None, None, None, None],
            0,
        );
        assert!(ok.is_ok());
        let bad_lr = infer(
            &sparse,
            &[sc.clone(), sc.clone(), Shape::known(&[2]), Shape::known(&[5, 4]), Shape::known(&[5])],
            &[None, None, None, None, None],
            0,
        );
        assert!(bad_lr.unwrap_err().contains("scalar"));
    }
}
