//! Schemas of ops that move elements or search them (`array_ops.cc`, `math_ops.cc`,
//! `data_flow_ops.cc`): `DepthToSpace`, `SpaceToDepth`, `ReverseSequence`, `Reverse` (V1),
//! `Diag`, `DiagPart`, `DynamicPartition`, `InplaceUpdate`/`Add`/`Sub`, `Empty`,
//! `LowerBound`, `UpperBound`, `ListDiff` and `UnravelIndex`. Shape functions follow
//! TensorFlow's: block sizes must divide what they divide when the dimensions are known,
//! data-dependent sizes (`DynamicPartition`'s rows, `ListDiff`'s length) stay unknown.

use super::build::{arg, bool_attr_or, pure_op, repeated, required, type_attr, type_attr_or};
use super::shapes::{same_as_0, shape_from_operand};
use super::{ArgSpec, AttrKind, AttrSpec, InferCtx, OpFamily, OpSchema, TypeRule};
use crate::DType::{self, Bool, Int32, Int64};
use crate::{Dim, Shape};

type Shapes = Result<Vec<Shape>, String>;

const INDEX: &[DType] = &[Int32, Int64];
const T: TypeRule = TypeRule::Attr("T");

/// Dimension `d` of input `i`, when known.
fn dim(c: &InferCtx<'_>, i: usize, d: usize) -> Dim {
    c.shape(i).dims.as_ref().and_then(|v| v.get(d).copied()).flatten()
}

fn rank4(c: &InferCtx<'_>) -> Result<bool, String> {
    match c.shape(0).rank() {
        None => Ok(false),
        Some(4) => Ok(true),
        Some(r) => Err(format!("input must be rank 4, but has shape {} (rank {r})", c.shape(0))),
    }
}

/// `DepthToSpace` (NHWC): `[N, H·s, W·s, C/s²]`.
fn depth_to_space(c: &InferCtx<'_>) -> Shapes {
    if !rank4(c)? {
        return Ok(vec![Shape::unknown()]);
    }
    let s = c.attr_int("block_size", 0);
    if s < 2 {
        return Err(format!("block_size = {s} must be at least 2"));
    }
    let depth = dim(c, 0, 3);
    if let Some(d) = depth.filter(|d| d % (s * s) != 0) {
        return Err(format!("Input depth dimension {d} should be divisible by: {}", s * s));
    }
    let (h, w) = (dim(c, 0, 1), dim(c, 0, 2));
    Ok(vec![Shape::with_dims(vec![dim(c, 0, 0), h.map(|h| h * s), w.map(|w| w * s), depth.map(|d| d / (s * s))])])
}

/// `SpaceToDepth` (NHWC): `[N, H/s, W/s, C·s²]`.
fn space_to_depth(c: &InferCtx<'_>) -> Shapes {
    if !rank4(c)? {
        return Ok(vec![Shape::unknown()]);
    }
    let s = c.attr_int("block_size", 0);
    if s < 2 {
        return Err(format!("block_size = {s} must be at least 2"));
    }
    let (h, w) = (dim(c, 0, 1), dim(c, 0, 2));
    if h.is_some_and(|h| h % s != 0) || w.is_some_and(|w| w % s != 0) {
        return Err(format!("Image height {h:?} and width {w:?} should be divisible by block_size: {s}"));
    }
    Ok(vec![Shape::with_dims(vec![dim(c, 0, 0), h.map(|h| h / s), w.map(|w| w / s), dim(c, 0, 3).map(|d| d * s * s)])])
}

/// `Diag`: `shape + shape`.
fn diag(c: &InferCtx<'_>) -> Shapes {
    match c.shape(0).dims.as_deref() {
        None => Ok(vec![Shape::unknown()]),
        Some([]) => Err("Input must be at least rank 1, got 0".into()),
        Some(d) => Ok(vec![Shape::with_dims([d, d].concat())]),
    }
}

/// `DiagPart`: the first half of an even-rank shape whose halves agree.
fn diag_part(c: &InferCtx<'_>) -> Shapes {
    match c.shape(0).dims.as_deref() {
        None => Ok(vec![Shape::unknown()]),
        Some(d) if d.is_empty() || d.len() % 2 != 0 => {
            Err(format!("Input must have even and non-zero rank, input rank is {}", d.len()))
        }
        Some(d) => {
            let (a, b) = d.split_at(d.len() / 2);
            let merged = a
                .iter()
                .zip(b)
                .map(|(x, y)| match (x, y) {
                    (Some(x), Some(y)) if x != y => Err(format!("dimensions {x} and {y} of {} differ", c.shape(0))),
                    (x, y) => Ok(x.or(*y)),
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(vec![Shape::with_dims(merged)])
        }
    }
}

/// `DynamicPartition`: `num_partitions` outputs of `[?] + data.shape[rank(partitions)..]`.
fn dynamic_partition(c: &InferCtx<'_>) -> Shapes {
    let n = c.attr_int("num_partitions", 1).max(0) as usize;
    let part = match (c.shape(0).dims.as_deref(), c.shape(1).rank()) {
        (Some(d), Some(r)) if d.len() < r => {
            return Err(format!("data {} must have at least the rank of partitions {}", c.shape(0), c.shape(1)))
        }
        (Some(d), Some(r)) => {
            let mut dims = vec![None];
            dims.extend_from_slice(&d[r..]);
            Shape::with_dims(dims)
        }
        _ => Shape::unknown(),
    };
    Ok(vec![part; n])
}

/// `LowerBound`/`UpperBound`: the values' shape.
fn bounds(c: &InferCtx<'_>) -> Shapes {
    for (i, what) in [(0, "sorted_inputs"), (1, "values")] {
        if c.shape(i).rank().is_some_and(|r| r != 2) {
            return Err(format!("{what} must be a matrix, but has shape {}", c.shape(i)));
        }
    }
    Ok(vec![c.shape(1).clone()])
}

/// `ListDiff`: two vectors of unknown length.
fn list_diff(c: &InferCtx<'_>) -> Shapes {
    for (i, what) in [(0, "x"), (1, "y")] {
        if c.shape(i).rank().is_some_and(|r| r != 1) {
            return Err(format!("{what} must be a vector, but has shape {}", c.shape(i)));
        }
    }
    Ok(vec![Shape::with_dims(vec![None]), Shape::with_dims(vec![None])])
}

/// `UnravelIndex`: `[len(dims)]` for a scalar index, `[len(dims), n]` for a vector.
fn unravel_index(c: &InferCtx<'_>) -> Shapes {
    let k = dim(c, 1, 0);
    Ok(vec![match c.shape(0).dims.as_deref() {
        Some([]) => Shape::with_dims(vec![k]),
        Some([n]) => Shape::with_dims(vec![k, *n]),
        Some(_) => return Err(format!("indices must be a scalar or vector, but has shape {}", c.shape(0))),
        None => Shape::unknown(),
    }])
}

/// `Empty`: the value of `shape`.
fn empty(c: &InferCtx<'_>) -> Shapes {
    Ok(vec![shape_from_operand(c, 0, "shape")?])
}

const T_ANY: &[AttrSpec] = &[type_attr("T", None)];
const BLOCK: &[AttrSpec] = &[
    type_attr("T", None),
    required("block_size", AttrKind::Int),
    AttrSpec { name: "data_format", kind: AttrKind::String, default: super::AttrDefault::Optional, allowed: None },
];

/// `InplaceUpdate`/`Add`/`Sub`: rows `i` of `x` replaced by, or combined with, the rows of `v`.
const fn inplace(name: &'static str) -> OpSchema {
    const INPUTS: &[ArgSpec] = &[arg("x", T), arg("i", TypeRule::Fixed(Int32)), arg("v", T)];
    const OUTPUTS: &[ArgSpec] = &[arg("y", T)];
    pure_op(name, OpFamily::Shape, INPUTS, OUTPUTS, T_ANY, same_as_0)
}

/// `NthElement`: the input's shape less its last dimension (which must be there).
fn nth_element(c: &InferCtx<'_>) -> Shapes {
    match c.shape(0).dims.as_deref() {
        None => Ok(vec![Shape::unknown()]),
        Some([]) => Err("Input must be at least rank 1 but is rank 0".into()),
        Some(d) => Ok(vec![Shape::with_dims(d[..d.len() - 1].to_vec())]),
    }
}

/// `DataFormatDimMap`/`DataFormatVecPermute`: index types, the formats as strings.
const FORMAT_ATTRS: &[AttrSpec] = &[
    type_attr_or("T", Int32, INDEX),
    AttrSpec { name: "src_format", kind: AttrKind::String, default: super::AttrDefault::Optional, allowed: None },
    AttrSpec { name: "dst_format", kind: AttrKind::String, default: super::AttrDefault::Optional, allowed: None },
];

pub(super) static OPS: &[OpSchema] = &[
    // Grappler's layout optimizer puts these in graphs it converts between NHWC and NCHW.
    pure_op("DataFormatDimMap", OpFamily::Shape, &[arg("x", T)], &[arg("y", T)], FORMAT_ATTRS, same_as_0),
    pure_op("DataFormatVecPermute", OpFamily::Shape, &[arg("x", T)], &[arg("y", T)], FORMAT_ATTRS, same_as_0),
    pure_op("DepthToSpace", OpFamily::Shape, &[arg("input", T)], &[arg("output", T)], BLOCK, depth_to_space),
    pure_op("SpaceToDepth", OpFamily::Shape, &[arg("input", T)], &[arg("output", T)], BLOCK, space_to_depth),
    pure_op(
        "ReverseSequence",
        OpFamily::Shape,
        &[arg("input", T), arg("seq_lengths", TypeRule::Attr("Tlen"))],
        &[arg("output", T)],
        &[
            required("seq_dim", AttrKind::Int),
            AttrSpec { name: "batch_dim", kind: AttrKind::Int, default: super::AttrDefault::Int(0), allowed: None },
            type_attr("T", None),
            type_attr_or("Tlen", Int64, INDEX),
        ],
        same_as_0,
    ),
    pure_op(
        "Reverse",
        OpFamily::Shape,
        &[arg("tensor", T), arg("dims", TypeRule::Fixed(Bool))],
        &[arg("output", T)],
        T_ANY,
        same_as_0,
    ),
    pure_op("Diag", OpFamily::Shape, &[arg("diagonal", T)], &[arg("output", T)], T_ANY, diag),
    pure_op("DiagPart", OpFamily::Shape, &[arg("input", T)], &[arg("diagonal", T)], T_ANY, diag_part),
    pure_op(
        "DynamicPartition",
        OpFamily::Shape,
        &[arg("data", T), arg("partitions", TypeRule::Fixed(Int32))],
        &[repeated("outputs", T, "num_partitions")],
        &[required("num_partitions", AttrKind::Int), type_attr("T", None)],
        dynamic_partition,
    ),
    inplace("InplaceUpdate"),
    inplace("InplaceAdd"),
    inplace("InplaceSub"),
    pure_op(
        "Empty",
        OpFamily::Shape,
        &[arg("shape", TypeRule::Fixed(Int32))],
        &[arg("output", TypeRule::Attr("dtype"))],
        &[type_attr("dtype", None), bool_attr_or("init", false)],
        empty,
    ),
    pure_op(
        "NthElement",
        OpFamily::Reduction,
        &[arg("input", T), arg("n", TypeRule::Fixed(Int32))],
        &[arg("values", T)],
        &[bool_attr_or("reverse", false), type_attr("T", None)],
        nth_element,
    ),
    pure_op(
        "LowerBound",
        OpFamily::Shape,
        &[arg("sorted_inputs", T), arg("values", T)],
        &[arg("output", TypeRule::Attr("out_type"))],
        &[type_attr("T", None), type_attr_or("out_type", Int32, INDEX)],
        bounds,
    ),
    pure_op(
        "UpperBound",
        OpFamily::Shape,
        &[arg("sorted_inputs", T), arg("values", T)],
        &[arg("output", TypeRule::Attr("out_type"))],
        &[type_attr("T", None), type_attr_or("out_type", Int32, INDEX)],
        bounds,
    ),
    pure_op(
        "ListDiff",
        OpFamily::Shape,
        &[arg("x", T), arg("y", T)],
        &[arg("out", T), arg("idx", TypeRule::Attr("out_idx"))],
        &[type_attr("T", None), type_attr_or("out_idx", Int32, INDEX)],
        list_diff,
    ),
    pure_op(
        "UnravelIndex",
        OpFamily::Shape,
        &[arg("indices", TypeRule::Attr("Tidx")), arg("dims", TypeRule::Attr("Tidx"))],
        &[arg("output", TypeRule::Attr("Tidx"))],
        &[type_attr_or("Tidx", Int32, INDEX)],
        unravel_index,
    ),
];
