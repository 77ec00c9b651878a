//! Schemas of the ops that select, move or combine elements by index (`array_ops.cc`,
//! `math_ops.cc`, `state_ops.cc`): the sparse-gradient ops of embedding lookups (`Unique`,
//! `UnsortedSegment{Sum,Max,Min,Prod}`, the sorted `Segment*`), `Where`, `Roll`,
//! `InvertPermutation` (transpose gradients), `OneHot`, `TopKV2`/`TopK` and `InTopKV2`/`InTopK`
//! (Keras' top-k metrics), `GatherNd`/`ResourceGatherNd`/`ScatterNd` and the N-d resource
//! scatters (`ResourceScatterNd{Add,Sub,Update,Max,Min}`), `ReverseV2`, `BroadcastArgs`,
//! `SpaceToBatchND`/`BatchToSpaceND` (dilated convolutions), `Einsum` (Keras attention and
//! `EinsumDense`), `RaggedTensorToTensor`, and `Assert`. Signatures and shape functions follow
//! the ops' `REGISTER_OP`s: unknown ranks and dimensions stay unknown, and a shape function
//! fails only where TensorFlow's would.

use super::shapes::{dims_of, one, same_as_0 as same_as_input};
use super::{ArgSpec, AttrDefault, AttrKind, AttrSpec, InferCtx, OpFamily, OpSchema, ShapeFn, TypeRule};
use crate::DType::{
    self, BFloat16, Complex128, Complex64, Float16, Float32, Float64, Int16, Int32, Int64, Int8, Resource, UInt16,
    UInt32, UInt64, UInt8,
};
use crate::{Dim, Shape};

type Shapes = Result<Vec<Shape>, String>;

const REAL: &[DType] = &[Float16, BFloat16, Float32, Float64, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64];
const NUMBER: &[DType] = &[
    Float16, BFloat16, Float32, Float64, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Complex64,
    Complex128,
];
const INDEX: &[DType] = &[Int32, Int64];
const ONE_HOT_INDEX: &[DType] = &[UInt8, Int8, Int32, Int64];

const T: TypeRule = TypeRule::Attr("T");

const fn a(name: &'static str, ty: TypeRule) -> ArgSpec {
    ArgSpec { name, ty, number_attr: None }
}
const fn ty(name: &'static str) -> TypeRule {
    TypeRule::Attr(name)
}
const fn tattr(name: &'static str, allowed: Option<&'static [DType]>) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Type, default: AttrDefault::Required, allowed }
}
const fn tdef(name: &'static str, d: DType, allowed: &'static [DType]) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Type, default: AttrDefault::Type(d), allowed: Some(allowed) }
}
const fn idef(name: &'static str, d: i64) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Int, default: AttrDefault::Int(d), allowed: None }
}
const fn bdef(name: &'static str, d: bool) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Bool, default: AttrDefault::Bool(d), allowed: None }
}
const fn op(
    name: &'static str,
    family: OpFamily,
    inputs: &'static [ArgSpec],
    outputs: &'static [ArgSpec],
    attrs: &'static [AttrSpec],
    shape_fn: ShapeFn,
) -> OpSchema {
    OpSchema { name, family, inputs, outputs, attrs, is_stateful: false, shape_fn, value_fn: None }
}

// ---------------------------------------------------------------- shape functions

/// `Unique`: x is a vector; y has an unknown length, idx x's.
fn unique(c: &InferCtx<'_>) -> Shapes {
    let x = c.shape(0);
    if let Some(r) = x.rank() {
        if r != 1 {
            return Err(format!("x must be a vector, but has shape {x}"));
        }
    }
    let n = dims_of(x).and_then(|d| d.first().copied()).flatten();
    Ok(vec![Shape::with_dims(vec![None]), Shape::with_dims(vec![n])])
}

/// `Where` (one input): the coordinates of the true elements, `[?, rank]`.
fn where_coords(c: &InferCtx<'_>) -> Shapes {
    Ok(vec![Shape::with_dims(vec![None, c.shape(0).rank().map(|r| r as i64)])])
}

/// `UnsortedSegment*`: `[num_segments] + data.shape[segment_ids.rank..]`.
fn unsorted_segment(c: &InferCtx<'_>) -> Shapes {
    let (data, ids) = (c.shape(0), c.shape(1));
    if let Some(ns) = c.shape(2).rank() {
        if ns != 0 {
            return Err(format!("num_segments should be a scalar, but has shape {}", c.shape(2)));
        }
    }
    let num: Dim = c.scalar_value(2);
    if let Some(n) = num {
        if n < 0 {
            return Err(format!("num_segments must be non-negative, got {n}"));
        }
    }
    let (Some(d), Some(i)) = (dims_of(data), dims_of(ids)) else { return one(Shape::unknown()) };
    if i.len() > d.len() {
        return Err(format!("segment_ids of shape {ids} has a higher rank than data of shape {data}"));
    }
    for (k, (x, y)) in d.iter().zip(i).enumerate() {
        if let (Some(x), Some(y)) = (x, y) {
            if x != y {
                return Err(format!(
                    "segment_ids.shape {ids} must be a prefix of data.shape {data} (dimension {k}: {y} vs {x})"
                ));
            }
        }
    }
    let mut out = vec![num];
    out.extend_from_slice(&d[i.len()..]);
    one(Shape::with_dims(out))
}

/// `Roll`: the input's shape; `shift` and `axis` are scalars or vectors of one length.
fn roll(c: &InferCtx<'_>) -> Shapes {
    let (shift, axis) = (c.shape(1), c.shape(2));
    for (s, what) in [(shift, "shift"), (axis, "axis")] {
        if s.rank().is_some_and(|r| r > 1) {
            return Err(format!("{what} must be a scalar or a vector, but has shape {s}"));
        }
    }
    if let (Some(x), Some(y)) = (dims_of(shift), dims_of(axis)) {
        if let (Some(Some(p)), Some(Some(q))) = (x.first(), y.first()) {
            if p != q {
                return Err(format!("shift and axis must have the same size, got {p} and {q}"));
            }
        }
    }
    one(c.shape(0).clone())
}

/// `InvertPermutation`: a vector in, the same shape out.
fn invert_permutation(c: &InferCtx<'_>) -> Shapes {
    let x = c.shape(0);
    if x.rank().is_some_and(|r| r != 1) {
        return Err(format!("x must be a vector, but has shape {x}"));
    }
    one(x.clone())
}

/// `OneHot`: `depth` inserted into the indices' shape at `axis` (-1: last).
fn one_hot(c: &InferCtx<'_>) -> Shapes {
    let axis = c.attr_int("axis", -1);
    if axis < -1 {
        return Err(format!("axis must be >= -1, got {axis}"));
    }
    for (i, what) in [(1, "depth"), (2, "on_value"), (3, "off_value")] {
        if c.shape(i).rank().is_some_and(|r| r != 0) {
            return Err(format!("{what} must be a scalar, but has shape {}", c.shape(i)));
        }
    }
    let depth = c.scalar_value(1);
    if let Some(d) = depth {
        if d < 0 {
            return Err(format!("depth must be non-negative, got {d}"));
        }
    }
    let Some(idx) = dims_of(c.shape(0)) else { return one(Shape::unknown()) };
    let at = if axis == -1 { idx.len() } else { axis as usize };
    if at > idx.len() {
        return Err(format!("axis {axis} is out of range for indices of rank {}", idx.len()));
    }
    let mut out = idx.to_vec();
    out.insert(at, depth);
    one(Shape::with_dims(out))
}

/// `ResourceScatterNd*`: no outputs; indices' last dimension indexes the variable and
/// `updates.shape == indices.shape[:-1] + var.shape[indices.shape[-1]:]` when known.
fn scatter_nd(c: &InferCtx<'_>) -> Shapes {
    let (idx, upd) = (c.shape(1), c.shape(2));
    if idx.rank() == Some(0) {
        return Err("indices must have rank at least 1".into());
    }
    let var = c.inputs[0].handle.map(|(_, s)| s);
    if let (Some(i), Some(u), Some(v)) = (dims_of(idx), dims_of(upd), var.and_then(dims_of)) {
        let Some(&Some(k)) = i.last() else { return Ok(Vec::new()) };
        let k = k as usize;
        if k > v.len() {
            return Err(format!("indices.shape[-1] = {k} exceeds the variable's rank {}", v.len()));
        }
        let want: Vec<Dim> = i[..i.len() - 1].iter().chain(&v[k..]).copied().collect();
        let compatible = want.len() == u.len() && want.iter().zip(u).all(|(w, g)| w.is_none() || g.is_none() || w == g);
        if !compatible {
            return Err(format!(
                "updates must have shape {} (indices.shape[:-1] + ref.shape[{k}:]), got {upd}",
                Shape::with_dims(want)
            ));
        }
    }
    Ok(Vec::new())
}

/// `Einsum`: the output axes of the equation, sized from the operands (see [`crate::einsum`]).
fn einsum(c: &InferCtx<'_>) -> Shapes {
    let eq = c.node.attr("equation").and_then(|a| a.as_str()).ok_or("the 'equation' attribute is missing")?;
    let dims: Option<Vec<&[Dim]>> = (0..c.inputs.len()).map(|i| dims_of(c.shape(i))).collect();
    let Some(dims) = dims else { return one(Shape::unknown()) };
    let ranks: Vec<usize> = dims.iter().map(|d| d.len()).collect();
    let e = crate::einsum::Equation::parse(eq, &ranks)?;
    let sizes = e.sizes(&dims)?;
    one(Shape::with_dims(e.output_dims(&sizes)))
}

/// `Segment*` (sorted ids): `[?] + data.shape[1:]` — the segment count is the last id + 1.
fn sorted_segment(c: &InferCtx<'_>) -> Shapes {
    let Some(d) = dims_of(c.shape(0)) else { return one(Shape::unknown()) };
    if d.is_empty() {
        return Err("data must have rank at least 1".into());
    }
    if let Some(i) = dims_of(c.shape(1)) {
        if i.len() != 1 {
            return Err(format!("segment_ids must be a vector, got {}", c.shape(1)));
        }
    }
    let mut out = vec![None];
    out.extend(&d[1..]);
    one(Shape::with_dims(out))
}

/// `TopKV2` / `TopK`: values and indices of shape `input.shape[:-1] + [k]`.
fn top_k(c: &InferCtx<'_>) -> Shapes {
    let k: Dim = if c.node.op == "TopK" {
        c.node.attr("k").and_then(|a| a.as_int())
    } else {
        c.value(1).and_then(|v| v.first().copied().flatten())
    };
    let Some(d) = dims_of(c.shape(0)) else { return Ok(vec![Shape::unknown(), Shape::unknown()]) };
    let Some((&last, outer)) = d.split_last() else { return Err("input must be at least 1-D".into()) };
    if let (Some(n), Some(k)) = (last, k) {
        if k > n {
            return Err(format!("input must have at least k columns. Had {n}, needed {k}"));
        }
    }
    let mut out = outer.to_vec();
    out.push(k);
    Ok(vec![Shape::with_dims(out.clone()), Shape::with_dims(out)])
}

/// `GatherNd`: `indices.shape[:-1] + params.shape[K:]` with K = `indices.shape[-1]`.
fn gather_nd(c: &InferCtx<'_>) -> Shapes {
    gather_nd_shape(dims_of(c.shape(0)), dims_of(c.shape(1)))
}

/// `ResourceGatherNd`: as `GatherNd`, with the variable's shape when it is known.
fn resource_gather_nd(c: &InferCtx<'_>) -> Shapes {
    gather_nd_shape(c.inputs[0].handle.and_then(|(_, s)| dims_of(s)), dims_of(c.shape(1)))
}

fn gather_nd_shape(p: Option<&[Dim]>, i: Option<&[Dim]>) -> Shapes {
    let (Some(p), Some(i)) = (p, i) else { return one(Shape::unknown()) };
    let Some((&k, outer)) = i.split_last() else { return Err("indices must be at least a vector".into()) };
    let Some(k) = k else { return one(Shape::unknown()) };
    if k as usize > p.len() {
        return Err(format!("index innermost dimension length must be <= params rank; saw: {k} vs. {}", p.len()));
    }
    let mut out = outer.to_vec();
    out.extend(&p[k as usize..]);
    one(Shape::with_dims(out))
}

/// `ScatterNd`: the shape operand's value.
fn scatter_nd_shape(c: &InferCtx<'_>) -> Shapes {
    match c.value(2) {
        Some(v) => one(Shape::with_dims(v.to_vec())),
        None => one(Shape::unknown()),
    }
}

/// `BroadcastArgs`: a vector as long as the longer operand.
fn broadcast_args(c: &InferCtx<'_>) -> Shapes {
    let len = |i: usize| dims_of(c.shape(i)).and_then(|d| d.first().copied().flatten());
    one(Shape::with_dims(vec![match (len(0), len(1)) {
        (Some(a), Some(b)) => Some(a.max(b)),
        _ => None,
    }]))
}

/// `SpaceToBatchND` (`to_batch`) and `BatchToSpaceND`: input `[B, s_1..s_M, rest..]`, block
/// shape `[M]`, paddings or crops `[M, 2]`. SpaceToBatchND gives `[B·Πb, (s_i + p_i0 + p_i1) / b_i,
/// rest..]`, BatchToSpaceND `[B / Πb, s_i·b_i − c_i0 − c_i1, rest..]`; dimensions whose operands
/// are not known stay unknown.
fn space_batch(c: &InferCtx<'_>, to_batch: bool) -> Shapes {
    let input = dims_of(c.shape(0));
    let (block, pads) = (c.known_value(1), c.known_value(2));
    let (Some(input), Some(block)) = (input, block) else {
        return one(match (input, c.shape(1).dims.as_ref().and_then(|d| d.first().copied().flatten())) {
            (Some(d), _) => Shape::with_dims(vec![None; d.len()]),
            _ => Shape::unknown(),
        });
    };
    let m = block.len();
    if input.len() < m + 1 {
        return Err(format!("input has rank {}, needs at least {}", input.len(), m + 1));
    }
    if block.iter().any(|&b| b < 1) {
        return Err(format!("block_shape {block:?} must be positive"));
    }
    if let Some(p) = &pads {
        if p.len() != 2 * m {
            return Err(format!(
                "{} has {} elements, not [{m}, 2]",
                if to_batch { "paddings" } else { "crops" },
                p.len()
            ));
        }
        if p.iter().any(|&x| x < 0) {
            return Err(format!("{} must be non-negative", if to_batch { "paddings" } else { "crops" }));
        }
    }
    let prod: i64 = block.iter().product();
    let mut out = Vec::with_capacity(input.len());
    out.push(match input[0] {
        Some(b) if to_batch => Some(b * prod),
        Some(b) if b % prod != 0 => return Err(format!("batch {b} is not divisible by the block size {prod}")),
        Some(b) => Some(b / prod),
        None => None,
    });
    for i in 0..m {
        let extra = pads.as_ref().map(|p| p[2 * i] + p[2 * i + 1]);
        out.push(match (input[1 + i], extra) {
            (Some(s), Some(e)) if to_batch => {
                if (s + e) % block[i] != 0 {
                    return Err(format!("padded size {} is not divisible by the block size {}", s + e, block[i]));
                }
                Some((s + e) / block[i])
            }
            (Some(s), Some(e)) => {
                if s * block[i] < e {
                    return Err(format!("crops {e} exceed the size {}", s * block[i]));
                }
                Some(s * block[i] - e)
            }
            _ => None,
        });
    }
    out.extend_from_slice(&input[m + 1..]);
    one(Shape::with_dims(out))
}

fn space_to_batch(c: &InferCtx<'_>) -> Shapes {
    space_batch(c, true)
}

fn batch_to_space(c: &InferCtx<'_>) -> Shapes {
    space_batch(c, false)
}

/// `InTopKV2` / `InTopK`: one bool per row of `predictions` `[batch, classes]`.
fn in_top_k(c: &InferCtx<'_>) -> Shapes {
    one(Shape::with_dims(vec![dims_of(c.shape(0)).and_then(|d| d.first().copied().flatten())]))
}

fn no_outputs(_: &InferCtx<'_>) -> Shapes {
    Ok(Vec::new())
}

/// `RaggedRange`: `[rows + 1]` splits (rows from the vector operands, 1 for scalars) and
/// values of unknown length.
fn ragged_range(c: &InferCtx<'_>) -> Shapes {
    let mut rows: Option<Option<i64>> = None;
    for i in 0..3 {
        match dims_of(c.shape(i)) {
            Some([]) => {}
            Some([n]) => rows = Some(*n),
            Some(_) => return Err(format!("operand {i} must be a scalar or vector, but has shape {}", c.shape(i))),
            None => rows = Some(None),
        }
    }
    let splits = rows.unwrap_or(Some(1)).map(|n| n + 1);
    Ok(vec![Shape::with_dims(vec![splits]), Shape::with_dims(vec![None])])
}

/// `RaggedGather`: `OUTPUT_RAGGED_RANK` splits vectors (the first `[indices.shape[0] + 1]`),
/// then the values `[?] + params_dense_values.shape[1:]`.
/// `RaggedTensorToSparse`: `[?, ragged rank + value rank]` indices, the values flattened,
/// and the dense shape's `ragged rank + value rank` entries.
fn ragged_to_sparse(c: &InferCtx<'_>) -> Shapes {
    let ragged = c.inputs.len() - 1;
    let values = c.shape(ragged);
    let cols = values.rank().map(|r| (ragged + r) as i64);
    let count = values.num_elements().map(|n| n as i64);
    Ok(vec![Shape::with_dims(vec![None, cols]), Shape::with_dims(vec![count]), Shape::with_dims(vec![cols])])
}

fn ragged_gather(c: &InferCtx<'_>) -> Shapes {
    let params = usize::try_from(c.attr_int("PARAMS_RAGGED_RANK", 1)).unwrap_or(0);
    let outputs = usize::try_from(c.attr_int("OUTPUT_RAGGED_RANK", 0)).unwrap_or(0);
    let mut out = Vec::with_capacity(outputs + 1);
    let first = dims_of(c.shape(params + 1)).and_then(|d| d.first().copied().flatten()).map(|n| n + 1);
    for k in 0..outputs {
        out.push(Shape::with_dims(vec![if k == 0 { first } else { None }]));
    }
    out.push(match dims_of(c.shape(params)) {
        Some(d) if !d.is_empty() => Shape::with_dims(std::iter::once(None).chain(d[1..].iter().copied()).collect()),
        _ => Shape::unknown(),
    });
    Ok(out)
}

// ---------------------------------------------------------------- the table

const SEGMENT_IN: &[ArgSpec] = &[a("data", T), a("segment_ids", ty("Tindices")), a("num_segments", ty("Tnumsegments"))];
const SEGMENT_OUT: &[ArgSpec] = &[a("output", T)];
const SEGMENT_SUM_ATTRS: &[AttrSpec] =
    &[tattr("T", Some(NUMBER)), tattr("Tindices", Some(INDEX)), tdef("Tnumsegments", Int32, INDEX)];
const SEGMENT_MINMAX_ATTRS: &[AttrSpec] =
    &[tattr("T", Some(REAL)), tattr("Tindices", Some(INDEX)), tdef("Tnumsegments", Int32, INDEX)];
const SCATTER_ND_IN: &[ArgSpec] = &[a("ref", TypeRule::Fixed(Resource)), a("indices", ty("Tindices")), a("updates", T)];
const SCATTER_ND_ATTRS: &[AttrSpec] = &[tattr("T", None), tattr("Tindices", Some(INDEX)), bdef("use_locking", true)];

const SORTED_SEGMENT_IN: &[ArgSpec] = &[a("data", T), a("segment_ids", ty("Tindices"))];
const SORTED_SUM_ATTRS: &[AttrSpec] = &[tattr("T", Some(NUMBER)), tattr("Tindices", Some(INDEX))];
const SORTED_MINMAX_ATTRS: &[AttrSpec] = &[tattr("T", Some(REAL)), tattr("Tindices", Some(INDEX))];
const TOPK_OUT: &[ArgSpec] = &[a("values", T), a("indices", ty("index_type"))];

const fn sorted_segment_op(name: &'static str, attrs: &'static [AttrSpec]) -> OpSchema {
    op(name, OpFamily::Reduction, SORTED_SEGMENT_IN, SEGMENT_OUT, attrs, sorted_segment)
}
const fn segment(name: &'static str, attrs: &'static [AttrSpec]) -> OpSchema {
    op(name, OpFamily::Reduction, SEGMENT_IN, SEGMENT_OUT, attrs, unsorted_segment)
}
const fn scatter_nd_op(name: &'static str) -> OpSchema {
    let mut o = op(name, OpFamily::Resource, SCATTER_ND_IN, &[], SCATTER_ND_ATTRS, scatter_nd);
    o.is_stateful = true;
    o
}

pub(super) static OPS: &[OpSchema] = &[
    op(
        "Where",
        OpFamily::Shape,
        &[a("input", T)],
        &[a("index", TypeRule::Fixed(Int64))],
        &[AttrSpec { name: "T", kind: AttrKind::Type, default: AttrDefault::Type(DType::Bool), allowed: None }],
        where_coords,
    ),
    op(
        "Unique",
        OpFamily::Shape,
        &[a("x", T)],
        &[a("y", T), a("idx", ty("out_idx"))],
        &[tattr("T", None), tdef("out_idx", Int32, INDEX)],
        unique,
    ),
    segment("UnsortedSegmentSum", SEGMENT_SUM_ATTRS),
    segment("UnsortedSegmentProd", SEGMENT_SUM_ATTRS),
    segment("UnsortedSegmentMax", SEGMENT_MINMAX_ATTRS),
    segment("UnsortedSegmentMin", SEGMENT_MINMAX_ATTRS),
    op(
        "Roll",
        OpFamily::Shape,
        &[a("input", T), a("shift", ty("Tshift")), a("axis", ty("Taxis"))],
        &[a("output", T)],
        &[tattr("T", None), tattr("Tshift", Some(INDEX)), tattr("Taxis", Some(INDEX))],
        roll,
    ),
    op(
        "InvertPermutation",
        OpFamily::Shape,
        &[a("x", T)],
        &[a("y", T)],
        &[tdef("T", Int32, INDEX)],
        invert_permutation,
    ),
    op(
        "OneHot",
        OpFamily::Shape,
        &[a("indices", ty("TI")), a("depth", TypeRule::Fixed(Int32)), a("on_value", T), a("off_value", T)],
        &[a("output", T)],
        &[idef("axis", -1), tattr("T", None), tdef("TI", Int64, ONE_HOT_INDEX)],
        one_hot,
    ),
    sorted_segment_op("SegmentSum", SORTED_SUM_ATTRS),
    sorted_segment_op("SegmentProd", SORTED_SUM_ATTRS),
    sorted_segment_op("SegmentMean", SORTED_SUM_ATTRS),
    sorted_segment_op("SegmentMax", SORTED_MINMAX_ATTRS),
    sorted_segment_op("SegmentMin", SORTED_MINMAX_ATTRS),
    op(
        "TopKV2",
        OpFamily::Shape,
        &[a("input", T), a("k", ty("Tk"))],
        TOPK_OUT,
        &[
            bdef("sorted", true),
            tattr("T", Some(REAL)),
            tdef("Tk", Int32, &[Int16, Int32, Int64]),
            tdef("index_type", Int32, &[Int16, Int32, Int64]),
        ],
        top_k,
    ),
    op(
        "TopK",
        OpFamily::Shape,
        &[a("input", T)],
        TOPK_OUT,
        &[
            AttrSpec { name: "k", kind: AttrKind::Int, default: AttrDefault::Required, allowed: None },
            bdef("sorted", true),
            tattr("T", Some(REAL)),
            tdef("index_type", Int32, &[Int16, Int32, Int64]),
        ],
        top_k,
    ),
    // `Assert` is stateful in TensorFlow (it must not be pruned or reordered past its
    // control edges); a false condition fails the run with the data as its message.
    OpSchema {
        is_stateful: true,
        ..op(
            "Assert",
            OpFamily::Control,
            &[a("condition", TypeRule::Fixed(crate::DType::Bool)), a("data", TypeRule::ListAttr("T"))],
            &[],
            &[
                AttrSpec { name: "T", kind: AttrKind::ListType, default: AttrDefault::Required, allowed: None },
                idef("summarize", 3),
            ],
            no_outputs,
        )
    },
    op(
        "InTopKV2",
        OpFamily::Shape,
        &[a("predictions", TypeRule::Fixed(Float32)), a("targets", T), a("k", T)],
        &[a("precision", TypeRule::Fixed(DType::Bool))],
        &[tdef("T", Int32, INDEX)],
        in_top_k,
    ),
    op(
        "InTopK",
        OpFamily::Shape,
        &[a("predictions", TypeRule::Fixed(Float32)), a("targets", T)],
        &[a("precision", TypeRule::Fixed(DType::Bool))],
        &[
            AttrSpec { name: "k", kind: AttrKind::Int, default: AttrDefault::Required, allowed: None },
            tdef("T", Int32, INDEX),
        ],
        in_top_k,
    ),
    op(
        "SpaceToBatchND",
        OpFamily::Shape,
        &[a("input", T), a("block_shape", ty("Tblock_shape")), a("paddings", ty("Tpaddings"))],
        &[a("output", T)],
        &[tattr("T", None), tdef("Tblock_shape", Int32, INDEX), tdef("Tpaddings", Int32, INDEX)],
        space_to_batch,
    ),
    op(
        "BatchToSpaceND",
        OpFamily::Shape,
        &[a("input", T), a("block_shape", ty("Tblock_shape")), a("crops", ty("Tcrops"))],
        &[a("output", T)],
        &[tattr("T", None), tdef("Tblock_shape", Int32, INDEX), tdef("Tcrops", Int32, INDEX)],
        batch_to_space,
    ),
    op(
        "ReverseV2",
        OpFamily::Shape,
        &[a("tensor", T), a("axis", ty("Tidx"))],
        &[a("output", T)],
        &[tdef("Tidx", Int32, INDEX), tattr("T", None)],
        same_as_input,
    ),
    op(
        "GatherNd",
        OpFamily::Shape,
        &[a("params", ty("Tparams")), a("indices", ty("Tindices"))],
        &[a("output", ty("Tparams"))],
        &[
            tattr("Tparams", None),
            tattr("Tindices", Some(&[Int16, Int32, Int64])),
            AttrSpec {
                name: "bad_indices_policy",
                kind: AttrKind::String,
                default: AttrDefault::Optional,
                allowed: None,
            },
        ],
        gather_nd,
    ),
    OpSchema {
        is_stateful: true,
        ..op(
            "ResourceGatherNd",
            OpFamily::Resource,
            &[a("resource", TypeRule::Fixed(Resource)), a("indices", ty("Tindices"))],
            &[a("output", ty("dtype"))],
            &[tattr("dtype", None), tattr("Tindices", Some(INDEX))],
            resource_gather_nd,
        )
    },
    op(
        "ScatterNd",
        OpFamily::Shape,
        &[a("indices", ty("Tindices")), a("updates", T), a("shape", ty("Tindices"))],
        &[a("output", T)],
        &[tattr("T", None), tattr("Tindices", Some(&[Int16, Int32, Int64]))],
        scatter_nd_shape,
    ),
    op(
        "BroadcastArgs",
        OpFamily::Shape,
        &[a("s0", T), a("s1", T)],
        &[a("r0", T)],
        &[tdef("T", Int32, INDEX)],
        broadcast_args,
    ),
    op(
        "Einsum",
        OpFamily::Shape,
        &[ArgSpec { name: "inputs", ty: T, number_attr: Some("N") }],
        &[a("output", T)],
        &[
            AttrSpec { name: "equation", kind: AttrKind::String, default: AttrDefault::Required, allowed: None },
            AttrSpec { name: "N", kind: AttrKind::Int, default: AttrDefault::Required, allowed: None },
            tattr("T", Some(NUMBER)),
        ],
        einsum,
    ),
    scatter_nd_op("ResourceScatterNdAdd"),
    scatter_nd_op("ResourceScatterNdSub"),
    scatter_nd_op("ResourceScatterNdUpdate"),
    scatter_nd_op("ResourceScatterNdMax"),
    scatter_nd_op("ResourceScatterNdMin"),
    op(
        "RaggedRange",
        OpFamily::Shape,
        &[a("starts", T), a("limits", T), a("deltas", T)],
        &[a("rt_nested_splits", ty("Tsplits")), a("rt_dense_values", T)],
        &[tdef("T", Int32, &[BFloat16, Float32, Float64, Int32, Int64]), tdef("Tsplits", Int64, INDEX)],
        ragged_range,
    ),
    op(
        "RaggedGather",
        OpFamily::Shape,
        &[
            ArgSpec { name: "params_nested_splits", ty: ty("Tsplits"), number_attr: Some("PARAMS_RAGGED_RANK") },
            a("params_dense_values", ty("Tvalues")),
            a("indices", ty("Tindices")),
        ],
        &[
            ArgSpec { name: "output_nested_splits", ty: ty("Tsplits"), number_attr: Some("OUTPUT_RAGGED_RANK") },
            a("output_dense_values", ty("Tvalues")),
        ],
        &[
            tattr("Tvalues", None),
            tattr("Tindices", Some(INDEX)),
            tdef("Tsplits", Int64, INDEX),
            AttrSpec { name: "PARAMS_RAGGED_RANK", kind: AttrKind::Int, default: AttrDefault::Required, allowed: None },
            AttrSpec { name: "OUTPUT_RAGGED_RANK", kind: AttrKind::Int, default: AttrDefault::Required, allowed: None },
        ],
        ragged_gather,
    ),
    op(
        "RaggedTensorToSparse",
        OpFamily::Shape,
        &[
            ArgSpec { name: "rt_nested_splits", ty: ty("Tsplits"), number_attr: Some("RAGGED_RANK") },
            a("rt_dense_values", T),
        ],
        &[
            a("sparse_indices", TypeRule::Fixed(Int64)),
            a("sparse_values", T),
            a("sparse_dense_shape", TypeRule::Fixed(Int64)),
        ],
        &[
            tattr("T", None),
            tdef("Tsplits", Int64, INDEX),
            AttrSpec { name: "RAGGED_RANK", kind: AttrKind::Int, default: AttrDefault::Required, allowed: None },
        ],
        ragged_to_sparse,
    ),
    op(
        "RaggedTensorToTensor",
        OpFamily::Shape,
        &[
            a("shape", ty("Tshape")),
            a("values", T),
            a("default_value", T),
            ArgSpec { name: "row_partition_tensors", ty: ty("Tindex"), number_attr: Some("num_row_partition_tensors") },
        ],
        &[a("result", T)],
        &[
            tattr("T", None),
            tattr("Tindex", Some(INDEX)),
            tattr("Tshape", Some(INDEX)),
            AttrSpec {
                name: "num_row_partition_tensors",
                kind: AttrKind::Int,
                default: AttrDefault::Required,
                allowed: None,
            },
            AttrSpec {
                name: "row_partition_types",
                kind: AttrKind::ListString,
                default: AttrDefault::Required,
                allowed: None,
            },
        ],
        ragged_to_tensor,
    ),
];

/// `RaggedTensorToTensor`: the `shape` operand's dimensions where they are known and not -1.
fn ragged_to_tensor(c: &InferCtx<'_>) -> Shapes {
    match c.value(0) {
        Some(v) if c.shape(0).rank() == Some(1) => {
            one(Shape::with_dims(v.iter().map(|d| d.filter(|&x| x >= 0)).collect()))
        }
        _ => one(Shape::unknown()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{lookup, InputFacts};
    use crate::{AttrValue, DType, Node, Shape};

    use crate::infer::testing::bare_node as node;

    fn infer(n: &Node, shapes: &[Shape], values: &[Option<Vec<Option<i64>>>]) -> Result<Vec<Shape>, String> {
        let facts: Vec<InputFacts<'_>> = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| InputFacts {
                dtype: None,
                shape: s,
                value: values.get(i).and_then(|v| v.as_deref()),
                handle: None,
            })
            .collect();
        let ctx = super::InferCtx { node: n, inputs: &facts, out_types: &[DType::Float32] };
        lookup(&n.op).unwrap().infer_shapes(&ctx)
    }

    #[test]
    fn segment_and_unique_shapes() {
        let n = node("UnsortedSegmentSum", &[]);
        let out = infer(
            &n,
            &[Shape::known(&[6, 4]), Shape::known(&[6]), Shape::scalar()],
            &[None, None, Some(vec![Some(3)])],
        )
        .unwrap();
        assert_eq!(out, vec![Shape::known(&[3, 4])]);
        assert!(infer(&n, &[Shape::known(&[6, 4]), Shape::known(&[5]), Shape::scalar()], &[]).is_err());
        let u = infer(&node("Unique", &[]), &[Shape::known(&[7])], &[]).unwrap();
        assert_eq!(u, vec![Shape::with_dims(vec![None]), Shape::known(&[7])]);
        assert!(infer(&node("Unique", &[]), &[Shape::known(&[2, 2])], &[]).is_err());
    }

    #[test]
    fn one_hot_inserts_depth_at_axis() {
        let scalars = [Shape::scalar(), Shape::scalar(), Shape::scalar()];
        let mut shapes = vec![Shape::known(&[2, 3])];
        shapes.extend(scalars.iter().cloned());
        let depth = Some(vec![Some(5)]);
        let last = infer(&node("OneHot", &[]), &shapes, &[None, depth.clone()]).unwrap();
        assert_eq!(last, vec![Shape::known(&[2, 3, 5])]);
        let first = infer(&node("OneHot", &[("axis", AttrValue::I(0))]), &shapes, &[None, depth]).unwrap();
        assert_eq!(first, vec![Shape::known(&[5, 2, 3])]);
        assert!(infer(&node("OneHot", &[("axis", AttrValue::I(-2))]), &shapes, &[]).is_err());
    }
}
