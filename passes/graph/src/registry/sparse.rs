//! Schemas of the sparse-tensor ops that TensorFlow 1 feature columns, `tf.sparse` and
//! `embedding_lookup_sparse` put in ordinary training graphs (`sparse_ops.cc`,
//! `math_ops.cc`, `array_ops.cc`): `SparseToDense`, `SparseFillEmptyRows` and its gradient,
//! `SparseReshape`, the `SparseSegment{Sum,Mean,SqrtN}` reductions (with and without
//! `num_segments`) and their gradients (V1 and V2), `UniqueWithCounts` and
//! `SparseTensorDenseMatMul`, `SparseCross` (feature columns' `crossed_column`), and the
//! `tf.sparse` algebra: `SparseReorder`, `SparseConcat`, `SparseSlice`, `SparseAdd`,
//! `SparseReduceSum`/`SparseReduceMax` and their `*Sparse` forms, `SparseTensorDenseAdd`,
//! `SparseDenseCwise{Add,Mul,Div}`, `SparseSoftmax`, `SparseSparseMaximum`/`SparseSparseMinimum`;
//! and `tf.sets` (`set_ops.cc`): `DenseToDenseSetOperation`, `DenseToSparseSetOperation`,
//! `SparseToSparseSetOperation` and `SetSize`.
//!
//! A sparse tensor is three dense tensors (int64 `indices [N, R]`, `values [N]`, int64
//! `dense_shape [R]`), so every op here is an ordinary stateless op on dense values. Shape
//! functions follow TensorFlow's: unknown ranks and dimensions stay unknown, and a shape
//! function fails only where TensorFlow's would.

use super::build::{arg, bool_attr_or, pure_op, repeated, required, type_attr, type_attr_or, typed_list};
use super::shapes::shape_from_operand;
use super::{ArgSpec, AttrKind, AttrSpec, InferCtx, OpFamily, OpSchema, TypeRule};
use crate::DType::{
    self, BFloat16, Float16, Float32, Float64, Int16, Int32, Int64, Int8, UInt16, UInt32, UInt64, UInt8,
};
use crate::{Dim, Shape};

type Shapes = Result<Vec<Shape>, String>;

const REAL: &[DType] = &[Float16, BFloat16, Float32, Float64, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64];
const FLOAT: &[DType] = &[Float16, BFloat16, Float32, Float64];
const INDEX: &[DType] = &[Int32, Int64];

const T: TypeRule = TypeRule::Attr("T");
const I64: TypeRule = TypeRule::Fixed(Int64);
const I32: TypeRule = TypeRule::Fixed(Int32);
const BOOL: TypeRule = TypeRule::Fixed(DType::Bool);

fn rank_is(c: &InferCtx<'_>, i: usize, what: &str, want: usize) -> Result<(), String> {
    match c.shape(i).rank() {
        Some(r) if r != want => Err(format!("{what} must be rank {want}, but has shape {}", c.shape(i))),
        _ => Ok(()),
    }
}

/// Dimension `d` of input `i`, when known.
fn dim(c: &InferCtx<'_>, i: usize, d: usize) -> Dim {
    c.shape(i).dims.as_ref().and_then(|v| v.get(d).copied()).flatten()
}

/// Two dimensions that must agree.
fn merge_dim(a: Dim, b: Dim, what: &str) -> Result<Dim, String> {
    match (a, b) {
        (Some(x), Some(y)) if x != y => Err(format!("{what}: dimensions {x} and {y} differ")),
        (Some(x), _) | (_, Some(x)) => Ok(Some(x)),
        _ => Ok(None),
    }
}

/// `[first] + shape(i)[1..]`, unknown when input `i`'s rank is.
fn rows_like(c: &InferCtx<'_>, i: usize, first: Dim) -> Shape {
    match c.shape(i).dims.as_deref() {
        Some([_, rest @ ..]) => {
            let mut d = vec![first];
            d.extend_from_slice(rest);
            Shape::with_dims(d)
        }
        _ => Shape::unknown(),
    }
}

/// `SparseSoftmax`: the values' shape.
fn sparse_softmax(c: &InferCtx<'_>) -> Shapes {
    rank_is(c, 0, "sp_indices", 2)?;
    rank_is(c, 1, "sp_values", 1)?;
    rank_is(c, 2, "sp_shape", 1)?;
    Ok(vec![c.shape(1).clone()])
}

/// `SparseToDense`: the dense shape is the value of `output_shape`.
fn sparse_to_dense(c: &InferCtx<'_>) -> Shapes {
    if c.shape(1).rank().is_some_and(|r| r > 1) {
        return Err(format!("output_shape must be a scalar or vector, but has shape {}", c.shape(1)));
    }
    rank_is(c, 3, "default_value", 0)?;
    Ok(vec![shape_from_operand(c, 1, "output_shape")?])
}

/// `SparseFillEmptyRows`: `[?, R]`, `[?]`, `[dense_shape[0]]`, `[N]`.
fn fill_empty_rows(c: &InferCtx<'_>) -> Shapes {
    rank_is(c, 0, "indices", 2)?;
    rank_is(c, 1, "values", 1)?;
    rank_is(c, 2, "dense_shape", 1)?;
    rank_is(c, 3, "default_value", 0)?;
    let n = merge_dim(dim(c, 0, 0), dim(c, 1, 0), "indices and values")?;
    let r = merge_dim(dim(c, 0, 1), dim(c, 2, 0), "indices and dense_shape")?;
    let rows = c.value(2).and_then(|v| v.first().copied()).flatten().filter(|&d| d >= 0);
    Ok(vec![
        Shape::with_dims(vec![None, r]),
        Shape::with_dims(vec![None]),
        Shape::with_dims(vec![rows]),
        Shape::with_dims(vec![n]),
    ])
}

/// `SparseFillEmptyRowsGrad`: `d_values` like `reverse_index_map`, `d_default_value` a scalar.
fn fill_empty_rows_grad(c: &InferCtx<'_>) -> Shapes {
    rank_is(c, 0, "reverse_index_map", 1)?;
    rank_is(c, 1, "grad_values", 1)?;
    Ok(vec![Shape::with_dims(vec![dim(c, 0, 0)]), Shape::scalar()])
}

/// `SparseReshape`: `[N, R']` and `[R']`.
fn sparse_reshape(c: &InferCtx<'_>) -> Shapes {
    rank_is(c, 0, "input_indices", 2)?;
    rank_is(c, 1, "input_shape", 1)?;
    rank_is(c, 2, "new_shape", 1)?;
    merge_dim(dim(c, 0, 1), dim(c, 1, 0), "input_indices and input_shape")?;
    let r = dim(c, 2, 0);
    Ok(vec![Shape::with_dims(vec![dim(c, 0, 0), r]), Shape::with_dims(vec![r])])
}

/// `SparseReshape`'s output shape, when both shapes are known: `new_shape` with its `-1`
/// resolved (nothing when the reshape is invalid; the kernel reports that).
fn value_sparse_reshape(c: &InferCtx<'_>) -> Vec<Option<Vec<Dim>>> {
    let (Some(input), Some(new)) = (c.known_value(1), c.known_value(2)) else { return Vec::new() };
    vec![None, resolve_reshape(&input, &new).ok().map(|v| v.into_iter().map(Some).collect())]
}

/// The shape `new` names for a tensor of shape `input`, its one `-1` inferred: TensorFlow's
/// `Reshape` rule for sparse tensors (`reshape_util.cc`), shared with the kernel.
pub fn resolve_reshape(input: &[i64], new: &[i64]) -> Result<Vec<i64>, String> {
    if let Some(d) = input.iter().find(|&&d| d < 0) {
        return Err(format!("input_shape has a negative dimension {d}"));
    }
    let dense = input.iter().try_fold(1i64, |a, &d| a.checked_mul(d)).ok_or("input_shape overflows int64")?;
    let mut unknown = None;
    let mut product = 1i64;
    for (i, &d) in new.iter().enumerate() {
        if d == -1 {
            if unknown.is_some() {
                return Err(format!("only one output dimension may be -1, not both {} and {i}", unknown.unwrap_or(0)));
            }
            unknown = Some(i);
        } else if d < 0 {
            return Err(format!("size {i} must be non-negative, not {d}"));
        } else {
            product = product.checked_mul(d).ok_or("new_shape overflows int64")?;
        }
    }
    let mut out = new.to_vec();
    if let Some(i) = unknown {
        if product <= 0 {
            return Err("reshape cannot infer the missing input size for an empty tensor unless all \
                        specified input sizes are non-zero"
                .into());
        }
        let missing = dense / product;
        if missing * product != dense {
            return Err(format!(
                "Input to reshape is a SparseTensor with {dense} dense values, but the requested shape \
                 requires a multiple of {product}"
            ));
        }
        out[i] = missing;
    } else if product != dense {
        return Err(format!(
            "Input to reshape is a tensor with {dense} dense values, but the requested shape has {product}"
        ));
    }
    Ok(out)
}

/// `SparseSegment*`: `[?] + data.shape[1..]`.
fn segment(c: &InferCtx<'_>) -> Shapes {
    rank_is(c, 1, "indices", 1)?;
    rank_is(c, 2, "segment_ids", 1)?;
    merge_dim(dim(c, 1, 0), dim(c, 2, 0), "indices and segment_ids")?;
    if c.shape(0).rank() == Some(0) {
        return Err("data must be at least rank 1".into());
    }
    Ok(vec![rows_like(c, 0, None)])
}

/// `SparseSegment*WithNumSegments`: `[num_segments] + data.shape[1..]`.
fn segment_with_num(c: &InferCtx<'_>) -> Shapes {
    segment(c)?;
    rank_is(c, 3, "num_segments", 0)?;
    let num = c.scalar_value(3);
    if let Some(n) = num.filter(|&n| n < 0) {
        return Err(format!("num_segments must be non-negative, got {n}"));
    }
    Ok(vec![rows_like(c, 0, num)])
}

/// The operands both gradient forms check: vectors `indices` and `segment_ids` of one
/// length, and a scalar row count named `dim0`.
fn segment_grad_operands(c: &InferCtx<'_>, dim0: &str) -> Result<(), String> {
    rank_is(c, 1, "indices", 1)?;
    rank_is(c, 2, "segment_ids", 1)?;
    rank_is(c, 3, dim0, 0)?;
    merge_dim(dim(c, 1, 0), dim(c, 2, 0), "indices and segment_ids")?;
    Ok(())
}

/// `SparseSegment*Grad`: `[output_dim0] + grad.shape[1..]`.
fn segment_grad(c: &InferCtx<'_>) -> Shapes {
    segment_grad_operands(c, "output_dim0")?;
    let d0 = c.scalar_value(3).filter(|&n| n >= 0);
    Ok(vec![rows_like(c, 0, d0)])
}

/// `SparseSegment*GradV2`: one row per distinct index, and the sorted distinct indices.
fn segment_grad_v2(c: &InferCtx<'_>) -> Shapes {
    segment_grad_operands(c, "dense_output_dim0")?;
    Ok(vec![rows_like(c, 0, None), Shape::with_dims(vec![None])])
}

/// `UniqueWithCounts`: `y` and `count` of unknown length, `idx` like `x`.
fn unique_with_counts(c: &InferCtx<'_>) -> Shapes {
    rank_is(c, 0, "x", 1)?;
    Ok(vec![Shape::with_dims(vec![None]), Shape::with_dims(vec![dim(c, 0, 0)]), Shape::with_dims(vec![None])])
}

/// `UniqueV2`/`UniqueWithCountsV2`: the distinct slices of `x` along `axis` (a vector of at
/// most one axis).
const fn unique_v2(name: &'static str, outputs: &'static [ArgSpec]) -> OpSchema {
    const INPUTS: &[ArgSpec] = &[arg("x", T), arg("axis", TypeRule::Attr("Taxis"))];
    const ATTRS: &[AttrSpec] =
        &[type_attr("T", None), type_attr_or("Taxis", Int64, INDEX), type_attr_or("out_idx", Int32, INDEX)];
    pure_op(name, OpFamily::Shape, INPUTS, outputs, ATTRS, unique_v2_shapes)
}

/// The slices' count is data-dependent: `y` keeps `x`'s rank, `idx` and `count` are vectors.
fn unique_v2_shapes(c: &InferCtx<'_>) -> Shapes {
    rank_is(c, 1, "axis", 1)?;
    let y = c.shape(0).rank().map_or_else(Shape::unknown, |r| Shape::with_dims(vec![None; r]));
    let mut out = vec![y, Shape::with_dims(vec![None])];
    if c.out_types.len() > 2 {
        out.push(Shape::with_dims(vec![None]));
    }
    Ok(out)
}

/// `SparseTensorDenseMatMul`: `[rows of op(a), columns of op(b)]`.
fn sparse_dense_matmul(c: &InferCtx<'_>) -> Shapes {
    rank_is(c, 0, "a_indices", 2)?;
    rank_is(c, 1, "a_values", 1)?;
    rank_is(c, 2, "a_shape", 1)?;
    rank_is(c, 3, "b", 2)?;
    if let Some(r) = dim(c, 2, 0).filter(|&r| r != 2) {
        return Err(format!("a_shape must have 2 elements, got {r}"));
    }
    let (adj_a, adj_b) = (c.attr_bool("adjoint_a", false), c.attr_bool("adjoint_b", false));
    let a_shape = c.value(2).filter(|v| v.len() == 2);
    let rows = a_shape.and_then(|v| v[usize::from(adj_a)]);
    let inner_a = a_shape.and_then(|v| v[usize::from(!adj_a)]);
    let inner_b = dim(c, 3, usize::from(adj_b));
    merge_dim(inner_a, inner_b, "the inner dimensions of a and b")?;
    Ok(vec![Shape::with_dims(vec![rows, dim(c, 3, usize::from(!adj_b))])])
}

/// A sparse tensor's three outputs of unknown size: `[?, rank]`, `[?]`, and `[rank]` (the
/// rank from input `shape_input`'s length).
fn sparse_triple(c: &InferCtx<'_>, shape_input: usize) -> Vec<Shape> {
    let r = dim(c, shape_input, 0);
    vec![Shape::with_dims(vec![None, r]), Shape::with_dims(vec![None]), Shape::with_dims(vec![r])]
}

/// `SparseReorder`: indices and values as given.
fn sparse_reorder(c: &InferCtx<'_>) -> Shapes {
    rank_is(c, 0, "input_indices", 2)?;
    Ok(vec![c.shape(0).clone(), c.shape(1).clone()])
}

fn sparse_triple_from_2(c: &InferCtx<'_>) -> Shapes {
    Ok(sparse_triple(c, 2))
}

/// `SparseConcat`: the shapes are inputs `2N..3N`.
fn sparse_concat(c: &InferCtx<'_>) -> Shapes {
    let n = c.inputs.len() / 3;
    Ok(sparse_triple(c, 2 * n))
}

/// `SparseReduceSum`: dense, rank unknown unless the shape and axes are known.
fn sparse_reduce_sum(c: &InferCtx<'_>) -> Shapes {
    let (Some(shape), Some(axes)) = (c.known_value(2), c.known_value(3)) else { return Ok(vec![Shape::unknown()]) };
    let r = shape.len() as i64;
    let mut reduced = vec![false; shape.len()];
    for a in axes {
        if a < -r || a >= r {
            return Err(format!("Invalid reduction dimension {a} for input with {r} dimensions"));
        }
        reduced[a.rem_euclid(r.max(1)) as usize] = true;
    }
    let keep = c.attr_bool("keep_dims", false);
    let dims = shape
        .iter()
        .zip(&reduced)
        .filter_map(|(&d, &red)| match (red, keep) {
            (true, true) => Some(Some(1)),
            (true, false) => None,
            (false, _) => Some(Some(d)),
        })
        .collect();
    Ok(vec![Shape::with_dims(dims)])
}

/// `SparseReduceSumSparse`/`SparseReduceMaxSparse`: `[?, r]`, `[?]`, `[r]`, the output
/// rank `r` known when the dense form's output shape is.
fn sparse_reduce_sparse(c: &InferCtx<'_>) -> Shapes {
    let r = sparse_reduce_sum(c)?[0].rank().map(|r| r as i64);
    Ok(vec![Shape::with_dims(vec![None, r]), Shape::with_dims(vec![None]), Shape::with_dims(vec![r])])
}

/// `SparseSparseMaximum`/`Minimum`: the union of the two index lists, `[?, rank]` and `[?]`.
fn sparse_sparse_extreme(c: &InferCtx<'_>) -> Shapes {
    rank_is(c, 0, "a_indices", 2)?;
    Ok(vec![Shape::with_dims(vec![None, dim(c, 0, 1)]), Shape::with_dims(vec![None])])
}

/// `SparseTensorDenseAdd`: the dense operand's shape.
fn sparse_dense_add(c: &InferCtx<'_>) -> Shapes {
    Ok(vec![c.shape(3).clone()])
}

/// `SparseDenseCwise*`: one value per sparse entry.
fn sparse_dense_cwise(c: &InferCtx<'_>) -> Shapes {
    rank_is(c, 0, "sp_indices", 2)?;
    Ok(vec![Shape::with_dims(vec![dim(c, 0, 0)])])
}

/// `SparseCross`: `[?, 2]`, `[?]`, `[2]`.
fn sparse_cross(_: &InferCtx<'_>) -> Shapes {
    Ok(vec![Shape::with_dims(vec![None, Some(2)]), Shape::with_dims(vec![None]), Shape::known(&[2])])
}

const SEGMENT_SUM_ATTRS: &[AttrSpec] =
    &[type_attr("T", Some(REAL)), type_attr_or("Tidx", Int32, INDEX), type_attr_or("Tsegmentids", Int32, INDEX)];
const SEGMENT_MEAN_ATTRS: &[AttrSpec] =
    &[type_attr("T", Some(FLOAT)), type_attr_or("Tidx", Int32, INDEX), type_attr_or("Tsegmentids", Int32, INDEX)];
const SEGMENT_SUM_NUM_ATTRS: &[AttrSpec] = &[
    type_attr("T", Some(REAL)),
    type_attr_or("Tidx", Int32, INDEX),
    type_attr_or("Tnumsegments", Int32, INDEX),
    type_attr_or("Tsegmentids", Int32, INDEX),
];
const SEGMENT_MEAN_NUM_ATTRS: &[AttrSpec] = &[
    type_attr("T", Some(FLOAT)),
    type_attr_or("Tidx", Int32, INDEX),
    type_attr_or("Tnumsegments", Int32, INDEX),
    type_attr_or("Tsegmentids", Int32, INDEX),
];
const SEGMENT_IN: &[super::ArgSpec] =
    &[arg("data", T), arg("indices", TypeRule::Attr("Tidx")), arg("segment_ids", TypeRule::Attr("Tsegmentids"))];
const SEGMENT_NUM_IN: &[super::ArgSpec] = &[
    arg("data", T),
    arg("indices", TypeRule::Attr("Tidx")),
    arg("segment_ids", TypeRule::Attr("Tsegmentids")),
    arg("num_segments", TypeRule::Attr("Tnumsegments")),
];
const GRAD_IN: &[super::ArgSpec] = &[
    arg("grad", T),
    arg("indices", TypeRule::Attr("Tidx")),
    arg("segment_ids", TypeRule::Attr("Tsegmentids")),
    arg("output_dim0", I32),
];
const GRAD_V2_IN: &[super::ArgSpec] = &[
    arg("grad", T),
    arg("indices", TypeRule::Attr("Tidx")),
    arg("segment_ids", TypeRule::Attr("Tsegmentids")),
    arg("dense_output_dim0", I32),
];
const OUTPUT: &[super::ArgSpec] = &[arg("output", T)];
const GRAD_V2_OUT: &[super::ArgSpec] = &[arg("output", T), arg("sorted_unique_indices", TypeRule::Attr("Tidx"))];

const CWISE_IN: &[super::ArgSpec] =
    &[arg("sp_indices", I64), arg("sp_values", T), arg("sp_shape", I64), arg("dense", T)];
const CWISE_ATTRS: &[AttrSpec] = &[type_attr("T", Some(REAL))];
const fn cwise(name: &'static str) -> OpSchema {
    pure_op(name, OpFamily::Binary, CWISE_IN, OUTPUT, CWISE_ATTRS, sparse_dense_cwise)
}

const fn seg(name: &'static str, attrs: &'static [AttrSpec]) -> OpSchema {
    pure_op(name, OpFamily::Reduction, SEGMENT_IN, OUTPUT, attrs, segment)
}
const fn seg_num(name: &'static str, attrs: &'static [AttrSpec]) -> OpSchema {
    pure_op(name, OpFamily::Reduction, SEGMENT_NUM_IN, OUTPUT, attrs, segment_with_num)
}
const fn seg_grad(name: &'static str, attrs: &'static [AttrSpec]) -> OpSchema {
    pure_op(name, OpFamily::Reduction, GRAD_IN, OUTPUT, attrs, segment_grad)
}
const fn seg_grad_v2(name: &'static str, attrs: &'static [AttrSpec]) -> OpSchema {
    pure_op(name, OpFamily::Reduction, GRAD_V2_IN, GRAD_V2_OUT, attrs, segment_grad_v2)
}

/// `EditDistance`: float32 over the prefix dimensions (rank one less than the sparse
/// operands'), each the larger of the two dense shapes' (known only from the values).
fn edit_distance(c: &InferCtx<'_>) -> Result<Vec<Shape>, String> {
    let dims = |i: usize| c.value(i).map(<[Dim]>::to_vec);
    Ok(vec![match (dims(2), dims(5)) {
        (Some(h), Some(t)) if h.len() == t.len() && !t.is_empty() => Shape::with_dims(
            h.iter().zip(&t).take(t.len() - 1).map(|(a, b)| a.zip(*b).map(|(a, b)| a.max(b))).collect(),
        ),
        _ => match c.shape(5).dims.as_deref() {
            Some([Some(r)]) if *r >= 1 => Shape::with_dims(vec![None; *r as usize - 1]),
            _ => Shape::unknown(),
        },
    }])
}

/// The element types of TensorFlow's set kernels (`set_kernels.cc`).
const SET_T: &[DType] = &[Int8, Int16, Int32, Int64, UInt8, UInt16, DType::String];

const SET_ATTRS: &[AttrSpec] =
    &[required("set_operation", AttrKind::String), bool_attr_or("validate_indices", true), type_attr("T", Some(SET_T))];

const SET_OUT: &[super::ArgSpec] = &[arg("result_indices", I64), arg("result_values", T), arg("result_shape", I64)];

/// The rank of a set operand: a dense input's rank, or a sparse input's `shape` length.
/// TensorFlow's `SetShapeFn` requires rank >= 2 and equal ranks.
fn set_rank(c: &InferCtx<'_>, i: usize, dense: bool) -> Result<Dim, String> {
    let r = if dense { c.shape(i).rank().map(|r| r as i64) } else { dim(c, i, 0) };
    if let Some(r) = r.filter(|&r| r < 2) {
        return Err(format!("Shape must be at least rank 2 but is rank {r}"));
    }
    Ok(r)
}

/// The set operations: `[?, r]`, `[?]`, `[r]` (the result's size depends on the values).
fn set_operation(a: Result<Dim, String>, b: Result<Dim, String>) -> Shapes {
    let r = merge_dim(a?, b?, "the ranks of set1 and set2")?;
    Ok(vec![Shape::with_dims(vec![None, r]), Shape::with_dims(vec![None]), Shape::with_dims(vec![r])])
}

fn dense_to_dense_set(c: &InferCtx<'_>) -> Shapes {
    set_operation(set_rank(c, 0, true), set_rank(c, 1, true))
}

fn dense_to_sparse_set(c: &InferCtx<'_>) -> Shapes {
    set_operation(set_rank(c, 0, true), set_rank(c, 3, false))
}

fn sparse_to_sparse_set(c: &InferCtx<'_>) -> Shapes {
    set_operation(set_rank(c, 2, false), set_rank(c, 5, false))
}

/// `SetSize`: `set_shape[:-1]` when the shape's value is known, otherwise unknown.
fn set_size(c: &InferCtx<'_>) -> Shapes {
    Ok(vec![match c.value(2) {
        Some(v) if !v.is_empty() => Shape::with_dims(v[..v.len() - 1].to_vec()),
        _ => Shape::unknown(),
    }])
}

pub(super) static OPS: &[OpSchema] = &[
    pure_op(
        "DenseToDenseSetOperation",
        OpFamily::Shape,
        &[arg("set1", T), arg("set2", T)],
        SET_OUT,
        SET_ATTRS,
        dense_to_dense_set,
    ),
    pure_op(
        "DenseToSparseSetOperation",
        OpFamily::Shape,
        &[arg("set1", T), arg("set2_indices", I64), arg("set2_values", T), arg("set2_shape", I64)],
        SET_OUT,
        SET_ATTRS,
        dense_to_sparse_set,
    ),
    pure_op(
        "SparseToSparseSetOperation",
        OpFamily::Shape,
        &[
            arg("set1_indices", I64),
            arg("set1_values", T),
            arg("set1_shape", I64),
            arg("set2_indices", I64),
            arg("set2_values", T),
            arg("set2_shape", I64),
        ],
        SET_OUT,
        SET_ATTRS,
        sparse_to_sparse_set,
    ),
    pure_op(
        "SetSize",
        OpFamily::Shape,
        &[arg("set_indices", I64), arg("set_values", T), arg("set_shape", I64)],
        &[arg("size", I32)],
        &[bool_attr_or("validate_indices", true), type_attr("T", Some(SET_T))],
        set_size,
    ),
    pure_op(
        "EditDistance",
        OpFamily::Shape,
        &[
            arg("hypothesis_indices", I64),
            arg("hypothesis_values", T),
            arg("hypothesis_shape", I64),
            arg("truth_indices", I64),
            arg("truth_values", T),
            arg("truth_shape", I64),
        ],
        &[arg("output", TypeRule::Fixed(Float32))],
        &[type_attr("T", None), bool_attr_or("normalize", true)],
        edit_distance,
    ),
    pure_op(
        "SparseToDense",
        OpFamily::Shape,
        &[
            arg("sparse_indices", TypeRule::Attr("Tindices")),
            arg("output_shape", TypeRule::Attr("Tindices")),
            arg("sparse_values", T),
            arg("default_value", T),
        ],
        &[arg("dense", T)],
        &[bool_attr_or("validate_indices", true), type_attr("T", None), type_attr("Tindices", Some(INDEX))],
        sparse_to_dense,
    ),
    pure_op(
        "SparseFillEmptyRows",
        OpFamily::Shape,
        &[arg("indices", I64), arg("values", T), arg("dense_shape", I64), arg("default_value", T)],
        &[
            arg("output_indices", I64),
            arg("output_values", T),
            arg("empty_row_indicator", BOOL),
            arg("reverse_index_map", I64),
        ],
        &[type_attr("T", None)],
        fill_empty_rows,
    ),
    pure_op(
        "SparseFillEmptyRowsGrad",
        OpFamily::Shape,
        &[arg("reverse_index_map", I64), arg("grad_values", T)],
        &[arg("d_values", T), arg("d_default_value", T)],
        &[type_attr("T", None)],
        fill_empty_rows_grad,
    ),
    OpSchema {
        value_fn: Some(value_sparse_reshape),
        ..pure_op(
            "SparseReshape",
            OpFamily::Shape,
            &[arg("input_indices", I64), arg("input_shape", I64), arg("new_shape", I64)],
            &[arg("output_indices", I64), arg("output_shape", I64)],
            &[],
            sparse_reshape,
        )
    },
    seg("SparseSegmentSum", SEGMENT_SUM_ATTRS),
    seg("SparseSegmentMean", SEGMENT_MEAN_ATTRS),
    seg("SparseSegmentSqrtN", SEGMENT_MEAN_ATTRS),
    seg_num("SparseSegmentSumWithNumSegments", SEGMENT_SUM_NUM_ATTRS),
    seg_num("SparseSegmentMeanWithNumSegments", SEGMENT_MEAN_NUM_ATTRS),
    seg_num("SparseSegmentSqrtNWithNumSegments", SEGMENT_MEAN_NUM_ATTRS),
    seg_grad("SparseSegmentSumGrad", SEGMENT_MEAN_ATTRS),
    seg_grad("SparseSegmentMeanGrad", SEGMENT_MEAN_ATTRS),
    seg_grad("SparseSegmentSqrtNGrad", SEGMENT_MEAN_ATTRS),
    seg_grad_v2("SparseSegmentSumGradV2", SEGMENT_MEAN_ATTRS),
    seg_grad_v2("SparseSegmentMeanGradV2", SEGMENT_MEAN_ATTRS),
    seg_grad_v2("SparseSegmentSqrtNGradV2", SEGMENT_MEAN_ATTRS),
    pure_op(
        "UniqueWithCounts",
        OpFamily::Shape,
        &[arg("x", T)],
        &[arg("y", T), arg("idx", TypeRule::Attr("out_idx")), arg("count", TypeRule::Attr("out_idx"))],
        &[type_attr("T", None), type_attr_or("out_idx", Int32, INDEX)],
        unique_with_counts,
    ),
    unique_v2("UniqueV2", &[arg("y", T), arg("idx", TypeRule::Attr("out_idx"))]),
    unique_v2(
        "UniqueWithCountsV2",
        &[arg("y", T), arg("idx", TypeRule::Attr("out_idx")), arg("count", TypeRule::Attr("out_idx"))],
    ),
    pure_op(
        "SparseTensorDenseMatMul",
        OpFamily::MatMul,
        &[arg("a_indices", TypeRule::Attr("Tindices")), arg("a_values", T), arg("a_shape", I64), arg("b", T)],
        &[arg("product", T)],
        &[
            type_attr("T", None),
            type_attr_or("Tindices", Int64, INDEX),
            bool_attr_or("adjoint_a", false),
            bool_attr_or("adjoint_b", false),
        ],
        sparse_dense_matmul,
    ),
    pure_op(
        "SparseReorder",
        OpFamily::Shape,
        &[arg("input_indices", I64), arg("input_values", T), arg("input_shape", I64)],
        &[arg("output_indices", I64), arg("output_values", T)],
        &[type_attr("T", None)],
        sparse_reorder,
    ),
    pure_op(
        "SparseConcat",
        OpFamily::Shape,
        &[repeated("indices", I64, "N"), repeated("values", T, "N"), repeated("shapes", I64, "N")],
        &[arg("output_indices", I64), arg("output_values", T), arg("output_shape", I64)],
        &[required("concat_dim", AttrKind::Int), required("N", AttrKind::Int), type_attr("T", None)],
        sparse_concat,
    ),
    pure_op(
        "SparseSlice",
        OpFamily::Shape,
        &[arg("indices", I64), arg("values", T), arg("shape", I64), arg("start", I64), arg("size", I64)],
        &[arg("output_indices", I64), arg("output_values", T), arg("output_shape", I64)],
        &[type_attr("T", None)],
        sparse_triple_from_2,
    ),
    pure_op(
        "SparseAdd",
        OpFamily::Binary,
        &[
            arg("a_indices", I64),
            arg("a_values", T),
            arg("a_shape", I64),
            arg("b_indices", I64),
            arg("b_values", T),
            arg("b_shape", I64),
            arg("thresh", TypeRule::Attr("Treal")),
        ],
        &[arg("sum_indices", I64), arg("sum_values", T), arg("sum_shape", I64)],
        &[type_attr("T", Some(REAL)), type_attr("Treal", Some(REAL))],
        sparse_triple_from_2,
    ),
    pure_op(
        "SparseSparseMaximum",
        OpFamily::Binary,
        &[
            arg("a_indices", I64),
            arg("a_values", T),
            arg("a_shape", I64),
            arg("b_indices", I64),
            arg("b_values", T),
            arg("b_shape", I64),
        ],
        &[arg("output_indices", I64), arg("output_values", T)],
        &[type_attr("T", Some(REAL))],
        sparse_sparse_extreme,
    ),
    pure_op(
        "SparseSparseMinimum",
        OpFamily::Binary,
        &[
            arg("a_indices", I64),
            arg("a_values", T),
            arg("a_shape", I64),
            arg("b_indices", I64),
            arg("b_values", T),
            arg("b_shape", I64),
        ],
        &[arg("output_indices", I64), arg("output_values", T)],
        &[type_attr("T", Some(REAL))],
        sparse_sparse_extreme,
    ),
    pure_op(
        "SparseSoftmax",
        OpFamily::NeuralNet,
        &[arg("sp_indices", I64), arg("sp_values", T), arg("sp_shape", I64)],
        &[arg("output", T)],
        &[type_attr("T", Some(FLOAT))],
        sparse_softmax,
    ),
    pure_op(
        "SparseReduceSum",
        OpFamily::Reduction,
        &[arg("input_indices", I64), arg("input_values", T), arg("input_shape", I64), arg("reduction_axes", I32)],
        &[arg("output", T)],
        &[bool_attr_or("keep_dims", false), type_attr("T", Some(REAL))],
        sparse_reduce_sum,
    ),
    pure_op(
        "SparseReduceMax",
        OpFamily::Reduction,
        &[arg("input_indices", I64), arg("input_values", T), arg("input_shape", I64), arg("reduction_axes", I32)],
        &[arg("output", T)],
        &[bool_attr_or("keep_dims", false), type_attr("T", Some(REAL))],
        sparse_reduce_sum,
    ),
    pure_op(
        "SparseReduceSumSparse",
        OpFamily::Reduction,
        &[arg("input_indices", I64), arg("input_values", T), arg("input_shape", I64), arg("reduction_axes", I32)],
        &[arg("output_indices", I64), arg("output_values", T), arg("output_shape", I64)],
        &[bool_attr_or("keep_dims", false), type_attr("T", Some(REAL))],
        sparse_reduce_sparse,
    ),
    pure_op(
        "SparseReduceMaxSparse",
        OpFamily::Reduction,
        &[arg("input_indices", I64), arg("input_values", T), arg("input_shape", I64), arg("reduction_axes", I32)],
        &[arg("output_indices", I64), arg("output_values", T), arg("output_shape", I64)],
        &[bool_attr_or("keep_dims", false), type_attr("T", Some(REAL))],
        sparse_reduce_sparse,
    ),
    pure_op(
        "SparseTensorDenseAdd",
        OpFamily::Binary,
        &[
            arg("a_indices", TypeRule::Attr("Tindices")),
            arg("a_values", T),
            arg("a_shape", TypeRule::Attr("Tindices")),
            arg("b", T),
        ],
        &[arg("output", T)],
        &[type_attr("T", Some(REAL)), type_attr("Tindices", Some(INDEX))],
        sparse_dense_add,
    ),
    cwise("SparseDenseCwiseAdd"),
    cwise("SparseDenseCwiseMul"),
    cwise("SparseDenseCwiseDiv"),
    pure_op(
        "SparseCross",
        OpFamily::Shape,
        &[
            repeated("indices", I64, "N"),
            typed_list("values", "sparse_types"),
            repeated("shapes", I64, "N"),
            typed_list("dense_inputs", "dense_types"),
        ],
        &[arg("output_indices", I64), arg("output_values", TypeRule::Attr("out_type")), arg("output_shape", I64)],
        &[
            required("N", AttrKind::Int),
            required("hashed_output", AttrKind::Bool),
            required("num_buckets", AttrKind::Int),
            required("hash_key", AttrKind::Int),
            required("sparse_types", AttrKind::ListType),
            required("dense_types", AttrKind::ListType),
            type_attr("out_type", Some(&[Int64, DType::String])),
            type_attr("internal_type", Some(&[Int64, DType::String])),
        ],
        sparse_cross,
    ),
];

#[cfg(test)]
mod tests {
    use super::resolve_reshape;

    #[test]
    fn reshape_infers_the_missing_dimension_and_rejects_mismatches() {
        assert_eq!(resolve_reshape(&[2, 3, 4], &[6, -1]).unwrap(), vec![6, 4]);
        assert_eq!(resolve_reshape(&[2, 3], &[3, 2]).unwrap(), vec![3, 2]);
        assert!(resolve_reshape(&[2, 3], &[4, -1]).unwrap_err().contains("multiple of 4"));
        assert!(resolve_reshape(&[2, 3], &[-1, -1]).unwrap_err().contains("only one"));
        assert!(resolve_reshape(&[2, 3], &[5, 1]).unwrap_err().contains("6 dense values"));
        assert!(resolve_reshape(&[0, 3], &[0, -1]).unwrap_err().contains("empty tensor"));
        assert!(resolve_reshape(&[2, 3], &[-2, 3]).unwrap_err().contains("non-negative"));
    }
}
