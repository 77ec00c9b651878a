//! The matrix-diagonal ops: `MatrixDiag` (V1/V2/V3: `tf.eye`, `tf.linalg.diag`),
//! `MatrixDiagPart` (V1/V2/V3: `tf.linalg.diag_part`) and `MatrixSetDiag` (V1/V2/V3:
//! `tf.linalg.set_diag`). Signatures and shape functions follow their `REGISTER_OP`s in
//! TensorFlow's `array_ops.cc`; output dimensions that depend on the values of `k`,
//! `num_rows` or `num_cols` are computed when those are known and stay unknown otherwise.

use super::{ArgSpec, AttrDefault, AttrKind, AttrSpec, InferCtx, OpFamily, OpSchema, ShapeFn, TypeRule};
use crate::DType::Int32;
use crate::{Dim, Shape};

type Shapes = Result<Vec<Shape>, String>;

const T: TypeRule = TypeRule::Attr("T");
const INT: TypeRule = TypeRule::Fixed(Int32);

const fn a(name: &'static str, ty: TypeRule) -> ArgSpec {
    ArgSpec { name, ty, number_attr: None }
}
const fn op(
    name: &'static str,
    inputs: &'static [ArgSpec],
    outputs: &'static [ArgSpec],
    attrs: &'static [AttrSpec],
    shape_fn: ShapeFn,
) -> OpSchema {
    OpSchema { name, family: OpFamily::Shape, inputs, outputs, attrs, is_stateful: false, shape_fn, value_fn: None }
}

const T_ATTR: &[AttrSpec] =
    &[AttrSpec { name: "T", kind: AttrKind::Type, default: AttrDefault::Required, allowed: None }];
const T_ALIGN: &[AttrSpec] = &[
    AttrSpec { name: "T", kind: AttrKind::Type, default: AttrDefault::Required, allowed: None },
    AttrSpec { name: "align", kind: AttrKind::String, default: AttrDefault::Optional, allowed: None },
];

/// The leading (batch) dimensions of input `i`, dropping its last `drop`; `None` for an
/// unknown rank.
fn batch(c: &InferCtx<'_>, i: usize, drop: usize) -> Result<Option<Vec<Dim>>, String> {
    match &c.shape(i).dims {
        None => Ok(None),
        Some(d) if d.len() < drop => Err(format!("input {i} must be at least {drop}-dim, got rank {}", d.len())),
        Some(d) => Ok(Some(d[..d.len() - drop].to_vec())),
    }
}

/// `k` as `(k0, k1)` when known.
fn diag_range(c: &InferCtx<'_>, i: usize) -> Option<(i64, i64)> {
    match c.value(i)? {
        [Some(k)] => Some((*k, *k)),
        [Some(k0), Some(k1)] => Some((*k0, *k1)),
        _ => None,
    }
}

fn scalar_value(c: &InferCtx<'_>, i: usize) -> Option<i64> {
    match c.value(i)? {
        [Some(v)] => Some(*v),
        _ => None,
    }
}

fn with(mut lead: Vec<Dim>, tail: &[Dim]) -> Shape {
    lead.extend_from_slice(tail);
    Shape::with_dims(lead)
}

/// `MatrixDiag`: `[..., n]` → `[..., n, n]`.
fn matrix_diag(c: &InferCtx<'_>) -> Shapes {
    let Some(lead) = batch(c, 0, 1)? else { return Ok(vec![Shape::unknown()]) };
    let n = c.shape(0).dims.as_ref().and_then(|d| d.last().copied()).flatten();
    Ok(vec![with(lead, &[n, n])])
}

/// `MatrixDiagV2`/`V3`: the rows and columns TensorFlow's kernel picks (square unless one
/// is given) when `k`, `num_rows`, `num_cols` and the diagonal's length are known.
fn matrix_diag_v3(c: &InferCtx<'_>) -> Shapes {
    let Some((k0, k1)) = diag_range(c, 1) else { return Ok(vec![Shape::unknown()]) };
    let lead_dims = if k0 == k1 { 1 } else { 2 };
    let Some(lead) = batch(c, 0, lead_dims)? else { return Ok(vec![Shape::unknown()]) };
    let len = c.shape(0).dims.as_ref().and_then(|d| d.last().copied()).flatten();
    let (rows, cols) = (scalar_value(c, 2).unwrap_or(-1), scalar_value(c, 3).unwrap_or(-1));
    let dims = len.map(|len| {
        let (min_rows, min_cols) = (len - k1.min(0), len + k0.max(0));
        match (rows, cols) {
            (-1, -1) => (min_rows.max(min_cols), min_rows.max(min_cols)),
            (-1, c) => (min_rows, c),
            (r, -1) => (r, min_cols),
            rc => rc,
        }
    });
    let known = |v: Option<i64>| v.filter(|&x| x >= 0);
    let (r, cl) = match dims {
        Some((r, cl)) => (known(Some(r)), known(Some(cl))),
        None => (known(Some(rows)), known(Some(cols))),
    };
    Ok(vec![with(lead, &[r, cl])])
}

/// `MatrixDiagPart`: `[..., m, n]` → `[..., min(m, n)]`.
fn matrix_diag_part(c: &InferCtx<'_>) -> Shapes {
    let Some(lead) = batch(c, 0, 2)? else { return Ok(vec![Shape::unknown()]) };
    let d = c.shape(0).dims.as_ref().expect("rank known");
    let (m, n) = (d[d.len() - 2], d[d.len() - 1]);
    Ok(vec![with(lead, &[m.zip(n).map(|(m, n)| m.min(n))])])
}

/// `MatrixDiagPartV2`/`V3`: `[..., (num_diags,) max_diag_len]`.
fn matrix_diag_part_v3(c: &InferCtx<'_>) -> Shapes {
    let Some(lead) = batch(c, 0, 2)? else { return Ok(vec![Shape::unknown()]) };
    let Some((k0, k1)) = diag_range(c, 1) else { return Ok(vec![Shape::unknown()]) };
    let d = c.shape(0).dims.as_ref().expect("rank known");
    let (m, n) = (d[d.len() - 2], d[d.len() - 1]);
    let len = m.zip(n).map(|(m, n)| (m + k1.min(0)).min(n - k0.max(0)).max(0));
    if k0 == k1 {
        Ok(vec![with(lead, &[len])])
    } else {
        Ok(vec![with(lead, &[Some(k1 - k0 + 1), len])])
    }
}

fn same_as_0(c: &InferCtx<'_>) -> Shapes {
    Ok(vec![c.shape(0).clone()])
}

pub(super) static OPS: &[OpSchema] = &[
    op("MatrixDiag", &[a("diagonal", T)], &[a("output", T)], T_ATTR, matrix_diag),
    op(
        "MatrixDiagV2",
        &[a("diagonal", T), a("k", INT), a("num_rows", INT), a("num_cols", INT), a("padding_value", T)],
        &[a("output", T)],
        T_ATTR,
        matrix_diag_v3,
    ),
    op(
        "MatrixDiagV3",
        &[a("diagonal", T), a("k", INT), a("num_rows", INT), a("num_cols", INT), a("padding_value", T)],
        &[a("output", T)],
        T_ALIGN,
        matrix_diag_v3,
    ),
    op("MatrixDiagPart", &[a("input", T)], &[a("diagonal", T)], T_ATTR, matrix_diag_part),
    op(
        "MatrixDiagPartV2",
        &[a("input", T), a("k", INT), a("padding_value", T)],
        &[a("diagonal", T)],
        T_ATTR,
        matrix_diag_part_v3,
    ),
    op(
        "MatrixDiagPartV3",
        &[a("input", T), a("k", INT), a("padding_value", T)],
        &[a("diagonal", T)],
        T_ALIGN,
        matrix_diag_part_v3,
    ),
    op("MatrixSetDiag", &[a("input", T), a("diagonal", T)], &[a("output", T)], T_ATTR, same_as_0),
    op("MatrixSetDiagV2", &[a("input", T), a("diagonal", T), a("k", INT)], &[a("output", T)], T_ATTR, same_as_0),
    op("MatrixSetDiagV3", &[a("input", T), a("diagonal", T), a("k", INT)], &[a("output", T)], T_ALIGN, same_as_0),
];
