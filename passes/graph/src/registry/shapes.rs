//! Shape functions and value functions of the supported ops.
//!
//! A shape function returns one static shape per output, or an error
//! message when the inputs cannot be valid (TensorFlow's shape functions
//! fail in the same cases). Unknown ranks and dimensions propagate as
//! unknown; nothing is guessed. A value function folds small integer
//! tensors — shapes, axes, sizes — so that `Reshape(x, Shape(y))`, the
//! gradients' `BroadcastGradientArgs` and `DynamicStitch` of reduced shapes
//! get static shapes, as TensorFlow's `InferenceContext` does with
//! "shape tensors".

use super::{broadcast_shapes, merge_shapes, strided_slice as apply_slice, InferCtx, SliceSpec};
use crate::{AttrValue, DType, Dim, Shape, TensorData};

type Shapes = Result<Vec<Shape>, String>;
type Values = Vec<Option<Vec<Dim>>>;

/// The largest integer tensor whose elements inference keeps.
const MAX_VALUE_ELEMENTS: usize = 1024;

/// One output of shape `s`.
pub(super) fn one(s: Shape) -> Shapes {
    Ok(vec![s])
}

fn rank_err(what: &str, s: &Shape, want: &str) -> String {
    format!("{what} must be {want}, but has shape {s}")
}

/// Normalises an axis into `0..rank`.
fn axis(a: i64, rank: usize, what: &str) -> Result<usize, String> {
    let r = rank as i64;
    if a < -r || a >= r {
        return Err(format!("{what} {a} is out of range for rank {rank}"));
    }
    Ok(if a < 0 { (a + r) as usize } else { a as usize })
}

/// TensorFlow's largest rank; a longer shape operand is not trusted to size a shape.
const MAX_RANK: i64 = 254;

fn unknown_dims(rank: usize) -> Shape {
    Shape::with_dims(vec![None; rank])
}

/// A rank read from a vector operand's length, when plausible.
fn rank_from_len(k: Dim) -> Option<usize> {
    k.filter(|k| (0..=MAX_RANK).contains(k)).map(|k| k as usize)
}

/// The number of elements of a fully known shape, without overflow.
fn elements(s: &Shape) -> Option<i64> {
    s.dims.as_ref()?.iter().try_fold(1i64, |acc, d| d.filter(|d| *d >= 0).and_then(|d| acc.checked_mul(d)))
}

/// A shape from a shape operand's (partially) known value: `-1` and unknown
/// elements are unknown dimensions; other negatives are an error.
fn shape_from_value(v: &[Dim], what: &str) -> Result<Shape, String> {
    v.iter()
        .map(|d| match d {
            Some(x) if *x < -1 => Err(format!("{what} has a negative dimension {x}")),
            Some(-1) | None => Ok(None),
            Some(x) => Ok(Some(*x)),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Shape::with_dims)
}

/// The rank a shape operand implies when its value is unknown: its length.
pub(super) fn shape_from_operand(c: &InferCtx<'_>, i: usize, what: &str) -> Result<Shape, String> {
    if let Some(v) = c.value(i) {
        return shape_from_value(v, what);
    }
    Ok(match c.shape(i).dims.as_deref() {
        Some([k]) => rank_from_len(*k).map(unknown_dims).unwrap_or_default(),
        _ => Shape::unknown(),
    })
}

fn is_int(d: DType) -> bool {
    matches!(d, DType::Int32 | DType::Int64)
}

fn int_output(c: &InferCtx<'_>) -> bool {
    c.out_types.first().copied().is_some_and(is_int)
}

fn require_scalar(c: &InferCtx<'_>, i: usize, what: &str) -> Result<(), String> {
    match c.shape(i).rank() {
        Some(r) if r != 0 => Err(rank_err(what, c.shape(i), "a scalar")),
        _ => Ok(()),
    }
}

// ---------------------------------------------------------------- generic

pub(super) fn none(_: &InferCtx<'_>) -> Shapes {
    Ok(Vec::new())
}

/// `StatelessRandomGetKeyCounter`: a uint64 key `[1]` and counter `[2]` from a seed `[2]`.
pub(super) fn key_counter(c: &InferCtx<'_>) -> Shapes {
    let seed = c.shape(0);
    if seed.rank().is_some_and(|r| r != 1) || seed.dims.as_ref().is_some_and(|d| d[0].is_some_and(|n| n != 2)) {
        return Err(rank_err("seed", c.shape(0), "a vector of 2 elements"));
    }
    Ok(vec![Shape::known(&[1]), Shape::known(&[2])])
}

pub(super) fn scalar(c: &InferCtx<'_>) -> Shapes {
    Ok(vec![Shape::scalar(); c.out_types.len()])
}

/// The dimensions of `s`, `None` for an unknown rank.
pub(super) fn dims_of(s: &Shape) -> Option<&[Dim]> {
    s.dims.as_deref()
}

/// One output shaped like input 1.
pub(super) fn same_as_1(c: &InferCtx<'_>) -> Shapes {
    Ok(vec![c.shape(1).clone()])
}

pub(super) fn same_as_0(c: &InferCtx<'_>) -> Shapes {
    one(c.shape(0).clone())
}

pub(super) fn rank_at_least_1(c: &InferCtx<'_>) -> Shapes {
    if c.shape(0).rank() == Some(0) {
        return Err(rank_err("logits", c.shape(0), "at least rank 1"));
    }
    same_as_0(c)
}

pub(super) fn broadcast_01(c: &InferCtx<'_>) -> Shapes {
    one(broadcast_shapes(c.shape(0), c.shape(1))?)
}

/// `RandomGamma`: the `shape` operand's value, then alpha's shape.
pub(super) fn random_gamma(c: &InferCtx<'_>) -> Shapes {
    let lead = shape_from_value_0(c)?.remove(0);
    one(match (lead.dims, &c.shape(1).dims) {
        (Some(mut l), Some(a)) => {
            l.extend_from_slice(a);
            Shape::with_dims(l)
        }
        _ => Shape::unknown(),
    })
}

/// A candidate sampler: `[num_sampled]` candidates, the true classes' shape, `[num_sampled]`.
pub(super) fn candidate_sampler(c: &InferCtx<'_>) -> Shapes {
    let n = Some(c.attr_int("num_sampled", -1)).filter(|&n| n >= 0);
    let v = Shape::with_dims(vec![n]);
    Ok(vec![v.clone(), c.shape(0).clone(), v])
}

/// `ComputeAccidentalHits`: three vectors of one unknown length.
pub(super) fn accidental_hits(_: &InferCtx<'_>) -> Shapes {
    let v = Shape::with_dims(vec![None]);
    Ok(vec![v.clone(), v.clone(), v])
}

/// Every input broadcast together.
pub(super) fn broadcast_all(c: &InferCtx<'_>) -> Shapes {
    let mut s = Shape::scalar();
    for i in c.inputs {
        s = broadcast_shapes(&s, i.shape)?;
    }
    one(s)
}

/// Comparisons: broadcasting, except that with `incompatible_shape_error`
/// false, incompatible shapes give a scalar `false` instead of an error.
pub(super) fn compare(c: &InferCtx<'_>) -> Shapes {
    match broadcast_shapes(c.shape(0), c.shape(1)) {
        Err(_) if !c.attr_bool("incompatible_shape_error", true) => one(Shape::unknown()),
        r => one(r?),
    }
}

pub(super) fn merge_01(c: &InferCtx<'_>) -> Shapes {
    one(merge_shapes(c.shape(0), c.shape(1))?)
}

pub(super) fn merge_all(c: &InferCtx<'_>) -> Shapes {
    let mut s = Shape::unknown();
    for i in c.inputs {
        s = merge_shapes(&s, i.shape)?;
    }
    one(s)
}

pub(super) fn identity_n(c: &InferCtx<'_>) -> Shapes {
    Ok(c.inputs.iter().map(|i| i.shape.clone()).collect())
}

pub(super) fn value_identity(c: &InferCtx<'_>) -> Values {
    if !int_output(c) {
        return Vec::new();
    }
    vec![c.value(0).map(<[Dim]>::to_vec)]
}

pub(super) fn value_cast(c: &InferCtx<'_>) -> Values {
    value_identity(c)
}

/// `floor(x / y)`, as TensorFlow's `FloorDiv` on integers.
fn floor_div(x: i64, y: i64) -> Option<i64> {
    let q = x.checked_div(y)?;
    Some(if (x % y != 0) && ((x < 0) != (y < 0)) { q - 1 } else { q })
}

fn int_op(op: &str, x: i64, y: i64) -> Option<i64> {
    match op {
        "Add" | "AddV2" => x.checked_add(y),
        "Sub" => x.checked_sub(y),
        "Mul" => x.checked_mul(y),
        "FloorDiv" => floor_div(x, y),
        "FloorMod" => floor_div(x, y).and_then(|q| y.checked_mul(q)).and_then(|p| x.checked_sub(p)),
        "Maximum" => Some(x.max(y)),
        "Minimum" => Some(x.min(y)),
        _ => None,
    }
}

/// Elementwise integer arithmetic on known small values (one side may be a scalar).
pub(super) fn value_binary(c: &InferCtx<'_>) -> Values {
    if !int_output(c) {
        return Vec::new();
    }
    let (Some(x), Some(y)) = (c.value(0), c.value(1)) else { return Vec::new() };
    let (sx, sy) = (c.shape(0).rank(), c.shape(1).rank());
    let n = if x.len() == y.len() && sx == sy {
        x.len()
    } else if sx == Some(0) {
        y.len()
    } else if sy == Some(0) {
        x.len()
    } else {
        return Vec::new();
    };
    let get = |v: &[Dim], i: usize| if v.len() == 1 { v[0] } else { v[i] };
    let out = (0..n)
        .map(|i| match (get(x, i), get(y, i)) {
            (Some(a), Some(b)) => int_op(&c.node.op, a, b),
            _ => None,
        })
        .collect();
    vec![Some(out)]
}

// ---------------------------------------------------------------- sources

pub(super) fn constant(c: &InferCtx<'_>) -> Shapes {
    let Some((dtype, shape)) = c.node.attr("value").and_then(AttrValue::tensor_type) else {
        return one(Shape::unknown());
    };
    if let Some(d) = c.out_types.first() {
        if *d != dtype {
            return Err(format!("value has dtype {dtype} but dtype is {d}"));
        }
    }
    one(Shape::known(shape))
}

pub(super) fn value_const(c: &InferCtx<'_>) -> Values {
    let Some(t) = c.node.attr("value").and_then(AttrValue::as_tensor) else { return Vec::new() };
    let len = match &t.data {
        TensorData::I32(v) => v.len(),
        TensorData::I64(v) => v.len(),
        _ => return Vec::new(),
    };
    if len > MAX_VALUE_ELEMENTS {
        return Vec::new();
    }
    vec![t.to_i64_vec().map(|v| v.into_iter().map(Some).collect())]
}

pub(super) fn placeholder(c: &InferCtx<'_>) -> Shapes {
    one(c.attr_shape("shape").cloned().unwrap_or_default())
}

pub(super) fn placeholder_with_default(c: &InferCtx<'_>) -> Shapes {
    let declared = c.attr_shape("shape").cloned().unwrap_or_default();
    let input = c.shape(0);
    if let (Some(d), Some(i)) = (&declared.dims, &input.dims) {
        let ok = d.len() == i.len() && d.iter().zip(i).all(|(a, b)| a.is_none() || a == b);
        if !ok {
            return Err(format!("default value of shape {input} is not compatible with shape {declared}"));
        }
    }
    one(declared)
}

// ---------------------------------------------------------------- resources

fn variable_shape_of(c: &InferCtx<'_>, i: usize) -> Shape {
    c.inputs[i].handle.map(|h| h.1.clone()).unwrap_or_default()
}

pub(super) fn read_variable(c: &InferCtx<'_>) -> Shapes {
    one(variable_shape_of(c, 0))
}

fn check_compatible(var: &Shape, value: &Shape, what: &str) -> Result<(), String> {
    merge_shapes(var, value)
        .map(|_| ())
        .map_err(|_| format!("{what} of shape {value} does not match the variable's shape {var}"))
}

pub(super) fn assign_variable(c: &InferCtx<'_>) -> Shapes {
    if c.attr_bool("validate_shape", true) {
        check_compatible(&variable_shape_of(c, 0), c.shape(1), "value")?;
    }
    Ok(Vec::new())
}

pub(super) fn resource_gather(c: &InferCtx<'_>) -> Shapes {
    let var = variable_shape_of(c, 0);
    let batch = c.attr_int("batch_dims", 0);
    if batch != 0 {
        return one(Shape::unknown());
    }
    match (&var.dims, &c.shape(1).dims) {
        (Some(v), Some(i)) => {
            if v.is_empty() {
                return Err("cannot gather from a scalar variable".into());
            }
            one(Shape::with_dims(i.iter().chain(&v[1..]).copied().collect()))
        }
        _ => one(Shape::unknown()),
    }
}

fn check_scalars(c: &InferCtx<'_>, from: usize, to: usize) -> Result<(), String> {
    for i in from..to {
        require_scalar(c, i, &format!("input {i}"))?;
    }
    Ok(())
}

pub(super) fn apply_gradient_descent(c: &InferCtx<'_>) -> Shapes {
    require_scalar(c, 1, "alpha")?;
    check_compatible(&variable_shape_of(c, 0), c.shape(2), "delta")?;
    Ok(Vec::new())
}

pub(super) fn apply_momentum(c: &InferCtx<'_>) -> Shapes {
    let var = variable_shape_of(c, 0);
    check_compatible(&var, &variable_shape_of(c, 1), "accum")?;
    require_scalar(c, 2, "lr")?;
    check_compatible(&var, c.shape(3), "grad")?;
    require_scalar(c, 4, "momentum")?;
    Ok(Vec::new())
}

pub(super) fn apply_adam(c: &InferCtx<'_>) -> Shapes {
    let var = variable_shape_of(c, 0);
    check_compatible(&var, &variable_shape_of(c, 1), "m")?;
    check_compatible(&var, &variable_shape_of(c, 2), "v")?;
    check_scalars(c, 3, 9)?;
    check_compatible(&var, c.shape(9), "grad")?;
    Ok(Vec::new())
}

pub(super) fn variable_shape(c: &InferCtx<'_>) -> Shapes {
    one(Shape::with_dims(vec![variable_shape_of(c, 0).rank().map(|r| r as i64)]))
}

pub(super) fn value_variable_shape(c: &InferCtx<'_>) -> Values {
    vec![variable_shape_of(c, 0).dims]
}

// ---------------------------------------------------------------- elementwise

pub(super) fn select(c: &InferCtx<'_>) -> Shapes {
    let out = merge_shapes(c.shape(1), c.shape(2))?;
    let cond = c.shape(0);
    if let (Some(cd), Some(od)) = (&cond.dims, &out.dims) {
        let ok = if cd.len() == od.len() {
            merge_shapes(cond, &out).is_ok()
        } else if cd.len() == 1 {
            od.first().is_some_and(|d| d.is_none() || cd[0].is_none() || *d == cd[0])
        } else {
            cd.is_empty()
        };
        if !ok {
            return Err(format!("condition of shape {cond} does not match the branches' shape {out}"));
        }
    }
    one(out)
}

pub(super) fn select_v2(c: &InferCtx<'_>) -> Shapes {
    let te = broadcast_shapes(c.shape(1), c.shape(2))?;
    one(broadcast_shapes(c.shape(0), &te)?)
}

// ---------------------------------------------------------------- linear algebra, nn

pub(super) fn matmul(c: &InferCtx<'_>) -> Shapes {
    let (a, b) = (c.shape(0), c.shape(1));
    for (s, what) in [(a, "a"), (b, "b")] {
        if s.rank().is_some_and(|r| r != 2) {
            return Err(rank_err(what, s, "a matrix"));
        }
    }
    let (ta, tb) = (c.attr_bool("transpose_a", false), c.attr_bool("transpose_b", false));
    let pick = |s: &Shape, t: bool| match s.dims.as_deref() {
        Some([x, y]) => {
            if t {
                (*y, *x)
            } else {
                (*x, *y)
            }
        }
        _ => (None, None),
    };
    let (m, k1) = pick(a, ta);
    let (k2, n) = pick(b, tb);
    if let (Some(p), Some(q)) = (k1, k2) {
        if p != q {
            return Err(format!(
                "inner dimensions must be equal, but are {p} and {q} (shapes {a} and {b}, transpose_a={ta}, transpose_b={tb})"
            ));
        }
    }
    one(Shape::with_dims(vec![m, n]))
}

/// `BatchMatMul`/`BatchMatMulV2`: the batch dimensions (all but the last two)
/// broadcast (V1 requires them equal), the matrices multiply like `MatMul`
/// with `adj_x`/`adj_y`.
pub(super) fn batch_matmul(c: &InferCtx<'_>) -> Shapes {
    let (a, b) = (c.shape(0), c.shape(1));
    let (Some(da), Some(db)) = (a.dims.as_deref(), b.dims.as_deref()) else { return one(Shape::unknown()) };
    for (d, s, what) in [(da, a, "x"), (db, b, "y")] {
        if d.len() < 2 {
            return Err(rank_err(what, s, "of rank >= 2"));
        }
    }
    let (ra, rb) = (da.len(), db.len());
    let (ax, ay) = (c.attr_bool("adj_x", false), c.attr_bool("adj_y", false));
    let (m, k1) = if ax { (da[ra - 1], da[ra - 2]) } else { (da[ra - 2], da[ra - 1]) };
    let (k2, n) = if ay { (db[rb - 1], db[rb - 2]) } else { (db[rb - 2], db[rb - 1]) };
    if let (Some(p), Some(q)) = (k1, k2) {
        if p != q {
            return Err(format!("inner dimensions must be equal, but are {p} and {q} (shapes {a} and {b})"));
        }
    }
    let batch_a = Shape::with_dims(da[..ra - 2].to_vec());
    let batch_b = Shape::with_dims(db[..rb - 2].to_vec());
    let batch = if c.node.op == "BatchMatMul" {
        merge_shapes(&batch_a, &batch_b)?
    } else {
        broadcast_shapes(&batch_a, &batch_b)?
    };
    let mut dims = batch.dims.unwrap_or_default();
    dims.extend([m, n]);
    one(Shape::with_dims(dims))
}

fn channel_axis(c: &InferCtx<'_>, rank: usize) -> usize {
    let nchw = c.node.attr("data_format").and_then(AttrValue::as_str) == Some("NCHW");
    if nchw && rank >= 3 {
        1
    } else {
        rank - 1
    }
}

pub(super) fn bias_add(c: &InferCtx<'_>) -> Shapes {
    let (v, b) = (c.shape(0), c.shape(1));
    if b.rank().is_some_and(|r| r != 1) {
        return Err(rank_err("bias", b, "a vector"));
    }
    let Some(vd) = &v.dims else { return one(Shape::unknown()) };
    if vd.len() < 2 {
        return Err(rank_err("value", v, "at least rank 2"));
    }
    let ax = channel_axis(c, vd.len());
    let mut out = vd.clone();
    let bias_dim = b.dims.as_ref().and_then(|d| d[0]);
    match (out[ax], bias_dim) {
        (Some(p), Some(q)) if p != q => {
            return Err(format!("bias of size {q} does not match dimension {ax} of value {v}"));
        }
        (None, q) => out[ax] = q,
        _ => {}
    }
    one(Shape::with_dims(out))
}

pub(super) fn bias_add_grad(c: &InferCtx<'_>) -> Shapes {
    let s = c.shape(0);
    match &s.dims {
        Some(d) if d.len() < 2 => Err(rank_err("out_backprop", s, "at least rank 2")),
        Some(d) => one(Shape::with_dims(vec![d[channel_axis(c, d.len())]])),
        None => one(unknown_dims(1)),
    }
}

fn batch_classes(s: &Shape, what: &str) -> Result<(Dim, Dim), String> {
    match s.dims.as_deref() {
        None => Ok((None, None)),
        Some([b, k]) => Ok((*b, *k)),
        Some(_) => Err(rank_err(what, s, "a matrix")),
    }
}

pub(super) fn softmax_xent(c: &InferCtx<'_>) -> Shapes {
    let s = broadcast_shapes(c.shape(0), c.shape(1))?;
    let (b, k) = batch_classes(&s, "features and labels")?;
    Ok(vec![Shape::with_dims(vec![b]), Shape::with_dims(vec![b, k])])
}

pub(super) fn sparse_softmax_xent(c: &InferCtx<'_>) -> Shapes {
    let (b, k) = batch_classes(c.shape(0), "features")?;
    let labels = merge_shapes(c.shape(1), &Shape::with_dims(vec![b]))
        .map_err(|_| format!("labels of shape {} do not match features of shape {}", c.shape(1), c.shape(0)))?;
    let b = labels.dims.as_ref().and_then(|d| d[0]);
    Ok(vec![Shape::with_dims(vec![b]), Shape::with_dims(vec![b, k])])
}

/// The reduction indices of `BroadcastGradientArgs` for two known shapes.
fn gradient_reduction_indices(s0: &[i64], s1: &[i64]) -> Result<(Vec<i64>, Vec<i64>), String> {
    crate::broadcast_gradient_args(s0, s1).ok_or_else(|| format!("incompatible shapes {s0:?} and {s1:?}"))
}

pub(super) fn broadcast_gradient_args(c: &InferCtx<'_>) -> Shapes {
    for i in 0..2 {
        if c.shape(i).rank().is_some_and(|r| r != 1) {
            return Err(rank_err(&format!("s{i}"), c.shape(i), "a vector"));
        }
    }
    if let (Some(a), Some(b)) = (c.known_value(0), c.known_value(1)) {
        let (r0, r1) = gradient_reduction_indices(&a, &b)?;
        return Ok(vec![Shape::known(&[r0.len()]), Shape::known(&[r1.len()])]);
    }
    Ok(vec![unknown_dims(1), unknown_dims(1)])
}

pub(super) fn value_broadcast_gradient_args(c: &InferCtx<'_>) -> Values {
    let (Some(a), Some(b)) = (c.known_value(0), c.known_value(1)) else { return Vec::new() };
    match gradient_reduction_indices(&a, &b) {
        Ok((r0, r1)) => vec![Some(r0.into_iter().map(Some).collect()), Some(r1.into_iter().map(Some).collect())],
        Err(_) => Vec::new(),
    }
}

// ---------------------------------------------------------------- reductions

pub(super) fn reduction(c: &InferCtx<'_>) -> Shapes {
    let keep = c.attr_bool("keep_dims", false);
    let input = c.shape(0);
    if c.shape(1).rank().is_some_and(|r| r > 1) {
        return Err(rank_err("reduction_indices", c.shape(1), "a scalar or a vector"));
    }
    let Some(d) = &input.dims else { return one(Shape::unknown()) };
    let Some(axes) = c.known_value(1) else {
        if elements(c.shape(1)) == Some(0) {
            return one(input.clone());
        }
        return one(if keep { unknown_dims(d.len()) } else { Shape::unknown() });
    };
    let mut reduced = vec![false; d.len()];
    for a in axes {
        if d.is_empty() && (a == 0 || a == -1) {
            continue;
        }
        reduced[axis(a, d.len(), "reduction axis")?] = true;
    }
    let out = d
        .iter()
        .zip(&reduced)
        .filter_map(|(x, r)| match (r, keep) {
            (true, true) => Some(Some(1)),
            (true, false) => None,
            (false, _) => Some(*x),
        })
        .collect();
    one(Shape::with_dims(out))
}

/// Folds a full reduction of a known vector (e.g. `Prod(Shape(x))`).
pub(super) fn value_reduction(c: &InferCtx<'_>) -> Values {
    if !int_output(c) || c.shape(0).rank() != Some(1) {
        return Vec::new();
    }
    let (Some(v), Some(axes)) = (c.value(0), c.known_value(1)) else { return Vec::new() };
    if axes.is_empty() || !axes.iter().all(|&a| a == 0 || a == -1) {
        return Vec::new();
    }
    let known: Option<Vec<i64>> = v.iter().copied().collect();
    let r = known.and_then(|k| match c.node.op.as_str() {
        "Sum" => k.iter().try_fold(0i64, |a, &b| a.checked_add(b)),
        "Prod" => k.iter().try_fold(1i64, |a, &b| a.checked_mul(b)),
        "Max" => k.iter().copied().max(),
        "Min" => k.iter().copied().min(),
        _ => None,
    });
    vec![Some(vec![r])]
}

pub(super) fn arg_reduce(c: &InferCtx<'_>) -> Shapes {
    require_scalar(c, 1, "dimension")?;
    let Some(d) = &c.shape(0).dims else { return one(Shape::unknown()) };
    if d.is_empty() {
        return Err(rank_err("input", c.shape(0), "at least rank 1"));
    }
    match c.scalar_value(1) {
        Some(a) => {
            let k = axis(a, d.len(), "dimension")?;
            one(Shape::with_dims(d.iter().enumerate().filter(|(i, _)| *i != k).map(|(_, x)| *x).collect()))
        }
        None => one(unknown_dims(d.len() - 1)),
    }
}

// ---------------------------------------------------------------- shape ops

pub(super) fn reshape(c: &InferCtx<'_>) -> Shapes {
    if c.shape(1).rank().is_some_and(|r| r > 1) {
        return Err(rank_err("shape", c.shape(1), "a vector"));
    }
    let Some(v) = c.value(1) else { return one(shape_from_operand(c, 1, "shape")?) };
    let mut wildcard = None;
    let mut out = Vec::with_capacity(v.len());
    for (i, d) in v.iter().enumerate() {
        match d {
            Some(-1) => {
                if wildcard.replace(i).is_some() {
                    return Err("only one dimension of the new shape may be -1".into());
                }
                out.push(None);
            }
            Some(x) if *x < -1 => return Err(format!("new shape has a negative dimension {x}")),
            other => out.push(*other),
        }
    }
    let rest: Option<i64> = out
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != wildcard)
        .try_fold(1i64, |acc, (_, d)| d.and_then(|d| acc.checked_mul(d)));
    let shown = |out: &[Dim]| {
        let mut s = Shape::with_dims(out.to_vec());
        if let Some(w) = wildcard {
            s.dims.as_mut().expect("known rank")[w] = Some(-1);
        }
        s
    };
    if rest.is_none() && out.iter().enumerate().all(|(i, d)| Some(i) == wildcard || d.is_some()) {
        // Every size is known and their product overflows (TensorFlow: "Negative dimension
        // size caused by overflow"): it would wrap to a count that might even match the input's.
        return Err(format!("new shape {} has more elements than can be counted", shown(&out)));
    }
    if let (Some(n), Some(p)) = (elements(c.shape(0)), rest) {
        match wildcard {
            Some(w) => {
                if p == 0 || n % p != 0 {
                    if !(p == 0 && n == 0) {
                        return Err(format!(
                            "cannot reshape a tensor of shape {} ({n} elements) into shape {}",
                            c.shape(0),
                            shown(&out)
                        ));
                    }
                } else {
                    out[w] = Some(n / p);
                }
            }
            None if n != p => {
                return Err(format!(
                    "cannot reshape a tensor of shape {} ({n} elements) into shape {} ({p} elements)",
                    c.shape(0),
                    shown(&out)
                ));
            }
            None => {}
        }
    }
    one(Shape::with_dims(out))
}

pub(super) fn shape_of(c: &InferCtx<'_>) -> Shapes {
    one(Shape::with_dims(vec![c.shape(0).rank().map(|r| r as i64)]))
}

pub(super) fn value_shape_of(c: &InferCtx<'_>) -> Values {
    vec![c.shape(0).dims.clone()]
}

/// `ConcatOffset`: one offset vector per shape operand, as long as that operand.
pub(super) fn concat_offset(c: &InferCtx<'_>) -> Shapes {
    Ok(c.inputs[1..].iter().map(|i| i.shape.clone()).collect())
}

pub(super) fn shape_n(c: &InferCtx<'_>) -> Shapes {
    Ok(c.inputs.iter().map(|i| Shape::with_dims(vec![i.shape.rank().map(|r| r as i64)])).collect())
}

pub(super) fn value_shape_n(c: &InferCtx<'_>) -> Values {
    c.inputs.iter().map(|i| i.shape.dims.clone()).collect()
}

pub(super) fn value_size(c: &InferCtx<'_>) -> Values {
    vec![Some(vec![elements(c.shape(0))])]
}

pub(super) fn value_rank(c: &InferCtx<'_>) -> Values {
    vec![Some(vec![c.shape(0).rank().map(|n| n as i64)])]
}

pub(super) fn expand_dims(c: &InferCtx<'_>) -> Shapes {
    if elements(c.shape(1)).is_some_and(|n| n != 1) {
        return Err(rank_err("dim", c.shape(1), "a single element"));
    }
    let Some(d) = &c.shape(0).dims else { return one(Shape::unknown()) };
    match c.scalar_value(1) {
        Some(a) => {
            let k = axis(a, d.len() + 1, "dim")?;
            let mut out = d.clone();
            out.insert(k, Some(1));
            one(Shape::with_dims(out))
        }
        None => one(unknown_dims(d.len() + 1)),
    }
}

pub(super) fn squeeze(c: &InferCtx<'_>) -> Shapes {
    let axes = c.attr_ints("squeeze_dims");
    let Some(d) = &c.shape(0).dims else { return one(Shape::unknown()) };
    if axes.is_empty() {
        if d.iter().any(Option::is_none) {
            return one(Shape::unknown());
        }
        return one(Shape::with_dims(d.iter().filter(|x| **x != Some(1)).copied().collect()));
    }
    let mut drop = vec![false; d.len()];
    for a in axes {
        let k = axis(a, d.len(), "squeeze dimension")?;
        if let Some(x) = d[k] {
            if x != 1 {
                return Err(format!("cannot squeeze dimension {k} of size {x} (shape {})", c.shape(0)));
            }
        }
        drop[k] = true;
    }
    one(Shape::with_dims(d.iter().zip(&drop).filter(|(_, &x)| !x).map(|(d, _)| *d).collect()))
}

pub(super) fn transpose(c: &InferCtx<'_>) -> Shapes {
    if c.shape(1).rank().is_some_and(|r| r != 1) {
        return Err(rank_err("perm", c.shape(1), "a vector"));
    }
    let input = &c.shape(0).dims;
    let Some(perm) = c.known_value(1) else {
        let rank = input.as_ref().map(Vec::len).or(c.shape(1).dims.as_ref().and_then(|d| rank_from_len(d[0])));
        return one(rank.map(unknown_dims).unwrap_or_default());
    };
    let rank = perm.len();
    if let Some(d) = input {
        if d.len() != rank {
            return Err(format!("perm {perm:?} has {rank} elements but the input has rank {}", d.len()));
        }
    }
    let mut seen = vec![false; rank];
    let mut out = Vec::with_capacity(rank);
    for &p in &perm {
        let k = axis(p, rank, "perm entry")?;
        if std::mem::replace(&mut seen[k], true) {
            return Err(format!("perm {perm:?} is not a permutation"));
        }
        out.push(input.as_ref().and_then(|d| d[k]));
    }
    one(Shape::with_dims(out))
}

/// `Concat(concat_dim, values…)` (TensorFlow 1): `ConcatV2`'s shape with the axis first.
pub(super) fn concat_v1(c: &InferCtx<'_>) -> Shapes {
    let Some((axis, values)) = c.inputs.split_first() else { return one(Shape::unknown()) };
    let mut v2 = values.to_vec();
    v2.push(*axis);
    concat_v2(&InferCtx { node: c.node, inputs: &v2, out_types: c.out_types })
}

/// `Gather(params, indices)` (TensorFlow 1): `indices.shape + params.shape[1..]`.
pub(super) fn gather_v1(c: &InferCtx<'_>) -> Shapes {
    let (Some(p), Some(i)) = (&c.shape(0).dims, &c.shape(1).dims) else { return one(Shape::unknown()) };
    if p.is_empty() {
        return Err("params must be at least a vector".into());
    }
    one(Shape::with_dims(i.iter().chain(&p[1..]).copied().collect()))
}

/// `EnsureShape(input)`: the input's shape refined by the `shape` attribute (an unknown
/// attribute dimension keeps the input's); a known mismatch is TensorFlow's run-time error.
pub(super) fn ensure_shape(c: &InferCtx<'_>) -> Shapes {
    let input = c.shape(0);
    let Some(want) = c.attr_shape("shape").and_then(|s| s.dims.clone()) else { return one(input.clone()) };
    let Some(have) = &input.dims else { return one(Shape::with_dims(want)) };
    if have.len() != want.len() {
        return Err(format!("input has shape {input} but EnsureShape wants rank {}", want.len()));
    }
    let mut out = Vec::with_capacity(want.len());
    for (i, (h, w)) in have.iter().zip(&want).enumerate() {
        out.push(match (h, w) {
            (Some(h), Some(w)) if h != w => return Err(format!("dimension {i} of {input} is {h}, not {w}")),
            (Some(h), _) => Some(*h),
            (None, w) => *w,
        });
    }
    one(Shape::with_dims(out))
}

pub(super) fn concat_v2(c: &InferCtx<'_>) -> Shapes {
    let n = c.inputs.len() - 1;
    require_scalar(c, n, "axis")?;
    let values = &c.inputs[..n];
    let rank = values.iter().find_map(|v| v.shape.rank());
    let Some(rank) = rank else { return one(Shape::unknown()) };
    for v in values {
        if v.shape.rank().is_some_and(|r| r != rank) {
            return Err(format!("all values must have the same rank, got {} and {}", values[0].shape, v.shape));
        }
    }
    if rank == 0 {
        return Err("cannot concatenate scalars".into());
    }
    let Some(a) = c.scalar_value(n) else { return one(unknown_dims(rank)) };
    let k = axis(a, rank, "axis")?;
    let mut out: Vec<Dim> = vec![None; rank];
    let mut total = Some(0i64);
    for (j, v) in values.iter().enumerate() {
        let Some(d) = &v.shape.dims else {
            total = None;
            continue;
        };
        total = total.zip(d[k]).and_then(|(t, x)| t.checked_add(x));
        for (i, x) in d.iter().enumerate() {
            if i == k {
                continue;
            }
            match (out[i], x) {
                (Some(p), Some(q)) if p != *q => {
                    return Err(format!(
                        "dimension {i} of value {j} is {q}, but earlier values have {p} (concatenating on axis {k})"
                    ));
                }
                (None, q) => out[i] = *q,
                _ => {}
            }
        }
    }
    out[k] = total;
    one(Shape::with_dims(out))
}

pub(super) fn value_concat_v2(c: &InferCtx<'_>) -> Values {
    let n = c.inputs.len() - 1;
    if !int_output(c) || !c.inputs[..n].iter().all(|i| i.shape.rank() == Some(1)) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for i in 0..n {
        match c.value(i) {
            Some(v) => out.extend_from_slice(v),
            None => return Vec::new(),
        }
    }
    vec![Some(out)]
}

pub(super) fn pack(c: &InferCtx<'_>) -> Shapes {
    let mut s = Shape::unknown();
    for (j, i) in c.inputs.iter().enumerate() {
        s = merge_shapes(&s, i.shape).map_err(|_| format!("value {j} has shape {}, unlike earlier values", i.shape))?;
    }
    let Some(d) = s.dims else { return one(Shape::unknown()) };
    let k = axis(c.attr_int("axis", 0), d.len() + 1, "axis")?;
    let mut out = d;
    out.insert(k, Some(c.inputs.len() as i64));
    one(Shape::with_dims(out))
}

pub(super) fn value_pack(c: &InferCtx<'_>) -> Values {
    if !int_output(c) || !c.inputs.iter().all(|i| i.shape.rank() == Some(0)) {
        return Vec::new();
    }
    let v: Option<Vec<Dim>> = (0..c.inputs.len()).map(|i| c.value(i).map(|v| v[0])).collect();
    vec![v]
}

/// Split(split_dim, value): `num_split` equal pieces along the axis.
pub(super) fn split(c: &InferCtx<'_>) -> Shapes {
    let num = c.out_types.len() as i64;
    let axis = c.value(0).and_then(|v| v.first().copied().flatten());
    split_pieces(c.shape(1), axis, |dim| match dim {
        Some(d) if d % num != 0 => Err(format!("dimension {d} does not split into {num} equal pieces")),
        Some(d) => Ok(vec![Some(d / num); num as usize]),
        None => Ok(vec![None; num as usize]),
    })
}

/// SplitV(value, size_splits, split_dim): pieces of the given sizes, one of them −1 (the rest).
pub(super) fn split_v(c: &InferCtx<'_>) -> Shapes {
    let num = c.out_types.len();
    let axis = c.value(2).and_then(|v| v.first().copied().flatten());
    let sizes = c.value(1).map(<[Dim]>::to_vec);
    split_pieces(c.shape(0), axis, |dim| {
        let Some(sizes) = &sizes else { return Ok(vec![None; num]) };
        if sizes.len() != num {
            return Err(format!("size_splits has {} elements but num_split is {num}", sizes.len()));
        }
        let known: i64 = sizes.iter().filter_map(|&s| s.filter(|&s| s >= 0)).sum();
        Ok(sizes
            .iter()
            .map(|&s| match (s, dim) {
                (Some(-1), Some(d)) => Some(d - known),
                (Some(s), _) if s >= 0 => Some(s),
                _ => None,
            })
            .collect())
    })
}

/// The outputs of a split of `input` along `axis` (if known), each with the dimension
/// `pieces(dimension)` gives.
fn split_pieces(
    input: &Shape,
    axis: Option<i64>,
    pieces: impl FnOnce(Option<i64>) -> Result<Vec<Dim>, String>,
) -> Shapes {
    let Some(d) = &input.dims else {
        return Ok(pieces(None)?.iter().map(|_| Shape::unknown()).collect());
    };
    let Some(a) = axis else {
        return Ok(pieces(None)?.iter().map(|_| Shape::with_dims(vec![None; d.len()])).collect());
    };
    let k = self::axis(a, d.len(), "split_dim")?;
    Ok(pieces(d[k])?
        .into_iter()
        .map(|p| {
            let mut out = d.clone();
            out[k] = p;
            Shape::with_dims(out)
        })
        .collect())
}

pub(super) fn unpack(c: &InferCtx<'_>) -> Shapes {
    let num = c.out_types.len();
    let Some(d) = &c.shape(0).dims else { return Ok(vec![Shape::unknown(); num]) };
    if d.is_empty() {
        return Err("cannot unpack a scalar".into());
    }
    let k = axis(c.attr_int("axis", 0), d.len(), "axis")?;
    if let Some(x) = d[k] {
        if x != num as i64 {
            return Err(format!("dimension {k} of {} is {x}, but num is {num}", c.shape(0)));
        }
    }
    let mut out = d.clone();
    out.remove(k);
    Ok(vec![Shape::with_dims(out); num])
}

pub(super) fn slice(c: &InferCtx<'_>) -> Shapes {
    let input = c.shape(0);
    let (begin, size) = (c.value(1), c.value(2));
    let rank = input.rank().or(begin.map(<[Dim]>::len)).or(size.map(<[Dim]>::len));
    let Some(rank) = rank else { return one(Shape::unknown()) };
    for (v, what) in [(begin, "begin"), (size, "size")] {
        if v.is_some_and(|v| v.len() != rank) {
            return Err(format!("{what} has {} elements but the input has rank {rank}", v.map_or(0, <[Dim]>::len)));
        }
    }
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        let dim = input.dims.as_ref().and_then(|d| d[i]);
        let b = begin.and_then(|b| b[i]);
        let s = size.and_then(|s| s[i]);
        if let Some(b) = b {
            if b < 0 || dim.is_some_and(|d| b > d) {
                return Err(format!("begin {b} is out of range for dimension {i} of {input}"));
            }
        }
        out.push(match s {
            Some(-1) => dim.zip(b).map(|(d, b)| d - b),
            Some(s) if s < -1 => return Err(format!("size {s} of dimension {i} is negative")),
            Some(s) => {
                if let (Some(d), Some(b)) = (dim, b) {
                    if b + s > d {
                        return Err(format!("slice {b}..{} is out of range for dimension {i} of {input}", b + s));
                    }
                }
                Some(s)
            }
            None => None,
        });
    }
    one(Shape::with_dims(out))
}

/// `XlaDynamicSlice(input, start_indices, size_indices)`: the sizes (XLA clamps the starts
/// so the slice lies inside the input, which each size must fit).
pub(super) fn xla_dynamic_slice(c: &InferCtx<'_>) -> Shapes {
    let input = c.shape(0);
    let Some(size) = c.value(2) else {
        return one(input.rank().map_or_else(Shape::unknown, |r| Shape::with_dims(vec![None; r])));
    };
    if input.rank().is_some_and(|r| r != size.len()) {
        return Err(format!("size_indices has {} elements but the input has rank {:?}", size.len(), input.rank()));
    }
    for (i, s) in size.iter().enumerate() {
        let dim = input.dims.as_ref().and_then(|d| d[i]);
        if let Some(s) = *s {
            if s < 0 || dim.is_some_and(|d| s > d) {
                return Err(format!("size {s} of dimension {i} does not fit the input {input}"));
            }
        }
    }
    one(Shape::with_dims(size.to_vec()))
}

pub(super) fn value_slice(c: &InferCtx<'_>) -> Values {
    let (Some(v), Some(b), Some(s)) = (c.value(0), c.scalar_value(1), c.scalar_value(2)) else { return Vec::new() };
    if !int_output(c) || c.shape(0).rank() != Some(1) || b < 0 {
        return Vec::new();
    }
    let end = if s == -1 { Some(v.len()) } else { b.checked_add(s).and_then(|e| usize::try_from(e).ok()) };
    let Some(end) = end else { return Vec::new() };
    v.get(b as usize..end).map(|x| vec![Some(x.to_vec())]).unwrap_or_default()
}

fn slice_spec(c: &InferCtx<'_>) -> Option<SliceSpec> {
    Some(SliceSpec {
        begin: c.known_value(1)?,
        end: c.known_value(2)?,
        strides: c.known_value(3)?,
        begin_mask: c.attr_int("begin_mask", 0),
        end_mask: c.attr_int("end_mask", 0),
        ellipsis_mask: c.attr_int("ellipsis_mask", 0),
        new_axis_mask: c.attr_int("new_axis_mask", 0),
        shrink_axis_mask: c.attr_int("shrink_axis_mask", 0),
    })
}

pub(super) fn strided_slice(c: &InferCtx<'_>) -> Shapes {
    for i in 1..4 {
        if c.shape(i).rank().is_some_and(|r| r != 1) {
            return Err(rank_err(["begin", "end", "strides"][i - 1], c.shape(i), "a vector"));
        }
    }
    let (Some(d), Some(spec)) = (&c.shape(0).dims, slice_spec(c)) else { return one(Shape::unknown()) };
    one(Shape::with_dims(apply_slice(d, &spec)?.shape))
}

pub(super) fn value_strided_slice(c: &InferCtx<'_>) -> Values {
    let (Some(v), Some(spec)) = (c.value(0), slice_spec(c)) else { return Vec::new() };
    if !int_output(c) || c.shape(0).rank() != Some(1) {
        return Vec::new();
    }
    let Ok(outcome) = apply_slice(&[Some(v.len() as i64)], &spec) else { return Vec::new() };
    let d = outcome.dense[0];
    let (Some(b), Some(n)) = (d.begin, d.size) else { return Vec::new() };
    let out: Option<Vec<Dim>> =
        (0..n).map(|j| usize::try_from(b + j * d.stride).ok().and_then(|i| v.get(i).copied())).collect();
    vec![out]
}

pub(super) fn shape_from_value_0(c: &InferCtx<'_>) -> Shapes {
    one(shape_from_operand(c, 0, "shape")?)
}

/// The output shape is the value of operand 2 (a stateful generator's `shape`, after its
/// `resource` and `algorithm`).
pub(super) fn shape_from_value_2(c: &InferCtx<'_>) -> Shapes {
    one(shape_from_operand(c, 2, "shape")?)
}

pub(super) fn fill(c: &InferCtx<'_>) -> Shapes {
    if c.shape(0).rank().is_some_and(|r| r != 1) {
        return Err(rank_err("dims", c.shape(0), "a vector"));
    }
    require_scalar(c, 1, "value")?;
    if let Some(v) = c.value(0) {
        if let Some(x) = v.iter().flatten().find(|x| **x < 0) {
            return Err(format!("dims has a negative dimension {x}"));
        }
    }
    one(shape_from_operand(c, 0, "dims")?)
}

pub(super) fn value_fill(c: &InferCtx<'_>) -> Values {
    let (Some(dims), Some(x)) = (c.known_value(0), c.value(1)) else { return Vec::new() };
    let n = dims.iter().try_fold(1i64, |acc, d| acc.checked_mul(*d)).unwrap_or(-1);
    if !int_output(c) || x.len() != 1 || n < 0 || n as usize > MAX_VALUE_ELEMENTS {
        return Vec::new();
    }
    vec![Some(vec![x[0]; n as usize])]
}

/// `Pad`/`PadV2`/`MirrorPad`: each dimension grows by its row `[before, after]` of `paddings`.
pub(super) fn pad(c: &InferCtx<'_>) -> Shapes {
    padded(c, 1)
}

/// `MirrorPadGrad`: the padded gradient folded back onto the input's shape, each
/// dimension `paddings[d]` shorter.
pub(super) fn mirror_pad_grad(c: &InferCtx<'_>) -> Shapes {
    padded(c, -1)
}

/// The input's shape with each dimension grown (`sign` 1) or shrunk (−1) by its row of
/// the `[rank, 2]` paddings operand.
fn padded(c: &InferCtx<'_>, sign: i64) -> Shapes {
    let input = &c.shape(0).dims;
    let Some(p) = c.value(1) else {
        return one(input.as_ref().map(|d| unknown_dims(d.len())).unwrap_or_default());
    };
    if p.len() % 2 != 0 {
        return Err(format!("paddings has {} elements, not [rank, 2]", p.len()));
    }
    let r = p.len() / 2;
    if let Some(d) = input {
        if d.len() != r {
            return Err(format!("paddings has {r} rows but the input has rank {}", d.len()));
        }
    }
    let out = (0..r)
        .map(|i| match (input.as_ref().and_then(|d| d[i]), p[2 * i], p[2 * i + 1]) {
            (_, Some(a), Some(b)) if a < 0 || b < 0 => Err(format!("negative padding [{a}, {b}]")),
            (Some(x), Some(a), Some(b)) if x + sign * (a + b) < 0 => {
                Err(format!("paddings [{a}, {b}] exceed dimension {x}"))
            }
            (Some(x), Some(a), Some(b)) => Ok(Some(x + sign * (a + b))),
            _ => Ok(None),
        })
        .collect::<Result<Vec<_>, _>>()?;
    one(Shape::with_dims(out))
}

pub(super) fn tile(c: &InferCtx<'_>) -> Shapes {
    if c.shape(1).rank().is_some_and(|r| r != 1) {
        return Err(rank_err("multiples", c.shape(1), "a vector"));
    }
    let input = &c.shape(0).dims;
    let Some(m) = c.value(1) else {
        let rank = input.as_ref().map(Vec::len).or(c.shape(1).dims.as_ref().and_then(|d| rank_from_len(d[0])));
        return one(rank.map(unknown_dims).unwrap_or_default());
    };
    if let Some(d) = input {
        if d.len() != m.len() {
            return Err(format!("multiples has {} elements but the input has rank {}", m.len(), d.len()));
        }
    }
    let out = m
        .iter()
        .enumerate()
        .map(|(i, k)| match (input.as_ref().and_then(|d| d[i]), k) {
            (_, Some(k)) if *k < 0 => Err(format!("multiple {k} is negative")),
            (_, Some(0)) => Ok(Some(0)),
            // TensorFlow's shape inference refuses a product past 64 bits ("caused by
            // overflow when multiplying"); an unknown dimension would let it through.
            (Some(x), Some(k)) => {
                x.checked_mul(*k).map(Some).ok_or_else(|| format!("dimension {i} overflows: {x} times multiple {k}"))
            }
            _ => Ok(None),
        })
        .collect::<Result<Vec<_>, _>>()?;
    one(Shape::with_dims(out))
}

pub(super) fn broadcast_to(c: &InferCtx<'_>) -> Shapes {
    if c.shape(1).rank().is_some_and(|r| r != 1) {
        return Err(rank_err("shape", c.shape(1), "a vector"));
    }
    let target = shape_from_operand(c, 1, "shape")?;
    let (Some(t), Some(i)) = (&target.dims, &c.shape(0).dims) else { return one(target) };
    if i.len() > t.len() {
        return Err(format!("cannot broadcast a tensor of shape {} to shape {target}", c.shape(0)));
    }
    let b = broadcast_shapes(c.shape(0), &target)
        .map_err(|_| format!("cannot broadcast a tensor of shape {} to shape {target}", c.shape(0)))?;
    // The result is the target; where the target's dimension is unknown the input may tell.
    let out = t
        .iter()
        .zip(b.dims.as_deref().unwrap_or_default())
        .map(|(t, b)| match (t, b) {
            (Some(x), _) => Some(*x),
            (None, Some(x)) if *x != 1 => Some(*x),
            _ => None,
        })
        .collect();
    one(Shape::with_dims(out))
}

pub(super) fn gather_v2(c: &InferCtx<'_>) -> Shapes {
    require_scalar(c, 2, "axis")?;
    let (Some(p), Some(i)) = (&c.shape(0).dims, &c.shape(1).dims) else { return one(Shape::unknown()) };
    let batch = c.attr_int("batch_dims", 0);
    let batch = if batch < 0 { batch + i.len() as i64 } else { batch };
    if batch < 0 || batch as usize > i.len() {
        return Err(format!("batch_dims {batch} is out of range for indices of rank {}", i.len()));
    }
    if p.is_empty() {
        return Err("params must be at least a vector".into());
    }
    let Some(a) = c.scalar_value(2) else {
        return one(unknown_dims(p.len() + i.len() - 1 - batch as usize));
    };
    let k = axis(a, p.len(), "axis")?;
    let out: Vec<Dim> = p[..k].iter().chain(&i[batch as usize..]).chain(&p[k + 1..]).copied().collect();
    one(Shape::with_dims(out))
}

pub(super) fn value_gather_v2(c: &InferCtx<'_>) -> Values {
    let (Some(p), Some(idx)) = (c.value(0), c.known_value(1)) else { return Vec::new() };
    if !int_output(c) || c.shape(0).rank() != Some(1) || c.scalar_value(2).is_some_and(|a| a != 0 && a != -1) {
        return Vec::new();
    }
    let out: Option<Vec<Dim>> = idx.iter().map(|&i| usize::try_from(i).ok().and_then(|i| p.get(i).copied())).collect();
    vec![out]
}

fn range_len(c: &InferCtx<'_>) -> Result<Option<i64>, String> {
    let (Some(s), Some(l), Some(d)) = (c.scalar_value(0), c.scalar_value(1), c.scalar_value(2)) else {
        return Ok(None);
    };
    if d == 0 {
        return Err("delta must not be zero".into());
    }
    if (d > 0 && s > l) || (d < 0 && s < l) {
        return Err(format!("start {s} and limit {l} are in the wrong order for delta {d}"));
    }
    let (span, step) = ((i128::from(l) - i128::from(s)).abs(), i128::from(d).abs());
    Ok(i64::try_from((span + step - 1) / step).ok())
}

/// `Multinomial`, `StatelessMultinomial`: `[batch, num_samples]` from a logits matrix.
pub(super) fn multinomial(c: &InferCtx<'_>) -> Shapes {
    if c.shape(0).rank().is_some_and(|r| r != 2) {
        return Err(rank_err("logits", c.shape(0), "a matrix"));
    }
    require_scalar(c, 1, "num_samples")?;
    let batch = c.shape(0).dims.as_ref().and_then(|d| d[0]);
    one(Shape::with_dims(vec![batch, c.scalar_value(1)]))
}

/// `LinSpace`: `[num]`, scalar `start` and `stop`.
pub(super) fn lin_space(c: &InferCtx<'_>) -> Shapes {
    require_scalar(c, 0, "start")?;
    require_scalar(c, 1, "stop")?;
    require_scalar(c, 2, "num")?;
    match c.scalar_value(2) {
        Some(n) if n <= 0 => Err(format!("Requires num > 0: {n}")),
        n => one(Shape::with_dims(vec![n])),
    }
}

pub(super) fn range(c: &InferCtx<'_>) -> Shapes {
    for i in 0..3 {
        require_scalar(c, i, ["start", "limit", "delta"][i])?;
    }
    one(Shape::with_dims(vec![range_len(c)?]))
}

pub(super) fn value_range(c: &InferCtx<'_>) -> Values {
    let (Ok(Some(n)), Some(s), Some(d)) = (range_len(c), c.scalar_value(0), c.scalar_value(2)) else {
        return Vec::new();
    };
    if !int_output(c) || n as usize > MAX_VALUE_ELEMENTS {
        return Vec::new();
    }
    vec![Some((0..n).map(|j| Some(s + j * d)).collect())]
}

pub(super) fn dynamic_stitch(c: &InferCtx<'_>) -> Shapes {
    let n = c.inputs.len() / 2;
    if n == 0 {
        return one(Shape::unknown());
    }
    let mut max_index: Option<i64> = Some(-1);
    for i in 0..n {
        match c.known_value(i) {
            Some(v) => max_index = max_index.map(|m| v.iter().copied().fold(m, i64::max)),
            None => max_index = None,
        }
    }
    let (Some(ir), Some(dd)) = (c.shape(0).rank(), &c.shape(n).dims) else {
        return one(Shape::unknown());
    };
    if dd.len() < ir {
        return Err(format!("data {} has lower rank than indices {}", c.shape(n), c.shape(0)));
    }
    let mut out = vec![max_index.and_then(|m| m.checked_add(1))];
    out.extend_from_slice(&dd[ir..]);
    one(Shape::with_dims(out))
}

pub(super) fn value_dynamic_stitch(c: &InferCtx<'_>) -> Values {
    let n = c.inputs.len() / 2;
    if !int_output(c) {
        return Vec::new();
    }
    let mut out: Vec<Dim> = Vec::new();
    for i in 0..n {
        let (Some(idx), Some(data)) = (c.known_value(i), c.value(n + i)) else { return Vec::new() };
        if idx.len() != data.len() {
            return Vec::new();
        }
        for (&k, &x) in idx.iter().zip(data) {
            let Ok(k) = usize::try_from(k) else { return Vec::new() };
            if k >= MAX_VALUE_ELEMENTS {
                return Vec::new();
            }
            if out.len() <= k {
                out.resize(k + 1, None);
            }
            out[k] = x;
        }
    }
    vec![Some(out)]
}

/// `RandomIndexShuffle`: a scalar when index, max_index and the seed (`[3]`) are one value
/// each, else a vector of one output per index, max_index or seed row.
pub(super) fn index_shuffle(c: &InferCtx<'_>) -> Shapes {
    let (index, seed, max) = (c.shape(0), c.shape(1), c.shape(2));
    let (Some(ri), Some(rs), Some(rm)) = (index.rank(), seed.rank(), max.rank()) else {
        return one(Shape::unknown());
    };
    if ri > 1 || rm > 1 || !(1..=2).contains(&rs) {
        return Err(format!(
            "index and max_index must be scalars or vectors and seed [3] or [n, 3], got ranks {ri}, {rs}, {rm}"
        ));
    }
    if ri == 0 && rs == 1 && rm == 0 {
        return one(Shape::with_dims(vec![]));
    }
    let first = |s: &Shape, vector_rank: usize| dims_of(s).filter(|d| d.len() == vector_rank).and_then(|d| d[0]);
    let n = first(index, 1).or_else(|| first(max, 1)).or_else(|| first(seed, 2));
    one(Shape::with_dims(vec![n]))
}
