//! Schemas of the `tf.train.Example` parsers (`parsing_ops.cc`): `ParseExampleV2`
//! (`tf.io.parse_example`, `tf.io.parse_single_example`), the v1 `ParseExample` and
//! `ParseSingleExample`. Their outputs are lists sized by attributes: per sparse key its
//! indices, values and dense shape; per dense key its values; per ragged key (V2) its values
//! and row splits. String inputs keep them out of every cluster. Also the raw decoders
//! (`DecodeRaw`, `DecodePaddedRaw`), `DecodeCSV`, and `tf.io.serialize_tensor`/`parse_tensor`'s
//! `SerializeTensor` and `ParseTensor`, and `Fingerprint`.

use super::build::{arg as a, bool_attr_or, pure_op, repeated as n, type_attr};
use super::{ArgSpec, AttrDefault, AttrKind, AttrSpec, InferCtx, OpFamily, OpSchema, ShapeFn, TypeRule};
use crate::DType::{
    self, BFloat16, Bool, Complex128, Complex64, Float16, Float32, Float64, Int16, Int32, Int64, Int8, String as Str,
    UInt16, UInt8,
};
use crate::Shape;

type Shapes = Result<Vec<Shape>, String>;

const STR: TypeRule = TypeRule::Fixed(Str);
const I64: TypeRule = TypeRule::Fixed(Int64);
const FEATURE_TYPES: &[DType] = &[Float32, Int64, Str];
const SPLIT_TYPES: &[DType] = &[Int32, Int64];

const fn types(name: &'static str, allowed: &'static [DType]) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::ListType, default: AttrDefault::Optional, allowed: Some(allowed) }
}
const fn attr(name: &'static str, kind: AttrKind) -> AttrSpec {
    AttrSpec { name, kind, default: AttrDefault::Optional, allowed: None }
}
const fn op(
    name: &'static str,
    inputs: &'static [ArgSpec],
    outputs: &'static [ArgSpec],
    attrs: &'static [AttrSpec],
    shape_fn: ShapeFn,
) -> OpSchema {
    pure_op(name, OpFamily::Shape, inputs, outputs, attrs, shape_fn)
}

/// The outputs' shapes for a `serialized` of rank `rank` (0 or 1; `None` unknown) and batch
/// `batch`: sparse indices `[?, rank + 1]`, values `[?]`, shapes `[rank + 1]`; dense
/// `[batch] + dense_shape` (just `dense_shape` for a scalar); ragged values `[?]` and splits
/// `[batch + 1]` (`[0]` for a scalar, as TensorFlow gives them).
fn outputs(c: &InferCtx<'_>, rank: Option<usize>, num_sparse: usize, num_ragged: usize) -> Shapes {
    if rank.is_some_and(|r| r > 1) {
        return Err(format!("serialized must be a scalar or a vector, but has shape {}", c.shape(0)));
    }
    let batch = match rank {
        Some(1) => c.shape(0).dims.as_ref().and_then(|d| d[0]),
        _ => None,
    };
    let dense_shapes: Vec<Shape> = match c.node.attr("dense_shapes") {
        Some(crate::AttrValue::List(crate::ListValue::Shape(v))) => v.clone(),
        _ => Vec::new(),
    };
    let mut out = Vec::new();
    let index_rank = rank.map(|r| Some(r as i64 + 1));
    for _ in 0..num_sparse {
        out.push(Shape::with_dims(vec![None, index_rank.flatten()]));
    }
    for _ in 0..num_sparse {
        out.push(Shape::with_dims(vec![None]));
    }
    for _ in 0..num_sparse {
        out.push(match index_rank {
            Some(r) => Shape::with_dims(vec![r]),
            None => Shape::with_dims(vec![None]),
        });
    }
    for s in &dense_shapes {
        // A FixedLenSequenceFeature's unknown first dimension is written as -1.
        let dims = s.dims.as_ref().map(|d| d.iter().map(|x| x.filter(|&x| x >= 0)).collect::<Vec<_>>());
        out.push(match (rank, dims) {
            (Some(0), Some(d)) => Shape::with_dims(d),
            (Some(1), Some(d)) => Shape::with_dims(std::iter::once(batch).chain(d).collect()),
            _ => Shape::unknown(),
        });
    }
    for _ in 0..num_ragged {
        out.push(Shape::with_dims(vec![None]));
    }
    for _ in 0..num_ragged {
        out.push(match rank {
            Some(0) => Shape::known(&[0]),
            Some(_) => Shape::with_dims(vec![batch.map(|b| b + 1)]),
            None => Shape::with_dims(vec![None]),
        });
    }
    Ok(out)
}

fn list_len(c: &InferCtx<'_>, name: &str) -> usize {
    c.node.attr(name).and_then(crate::AttrValue::as_type_list).map_or(0, <[DType]>::len)
}

fn parse_example_v2(c: &InferCtx<'_>) -> Shapes {
    for (i, what) in [(1, "names"), (2, "sparse_keys"), (3, "dense_keys"), (4, "ragged_keys")] {
        if c.shape(i).rank().is_some_and(|r| r > 1) {
            return Err(format!("{what} must be a vector, but has shape {}", c.shape(i)));
        }
    }
    outputs(c, c.shape(0).rank(), list_len(c, "sparse_types"), list_len(c, "ragged_value_types"))
}

fn parse_example(c: &InferCtx<'_>) -> Shapes {
    if c.shape(0).rank().is_some_and(|r| r != 1) {
        return Err(format!("serialized must be a vector, but has shape {}", c.shape(0)));
    }
    outputs(c, Some(1), list_len(c, "sparse_types"), 0)
}

fn parse_single_example(c: &InferCtx<'_>) -> Shapes {
    if c.shape(0).rank().is_some_and(|r| r != 0) {
        return Err(format!("serialized must be a scalar, but has shape {}", c.shape(0)));
    }
    outputs(c, Some(0), list_len(c, "sparse_types"), 0)
}

const SPARSE_OUT: [ArgSpec; 3] = [
    n("sparse_indices", I64, "num_sparse"),
    a("sparse_values", TypeRule::ListAttr("sparse_types")),
    n("sparse_shapes", I64, "num_sparse"),
];

/// `DecodeRaw`'s and `DecodePaddedRaw`'s output types (`DecodeRaw` also takes the complex
/// types and bool; `DecodePaddedRaw` bfloat16 but not half).
const RAW_TYPES: &[DType] =
    &[Float16, BFloat16, Float32, Float64, Int8, Int16, Int32, Int64, UInt8, UInt16, Complex64, Complex128, Bool];

/// `DecodeRaw`: the input's shape and one more dimension, unknown (the strings' length
/// decides it at run time).
fn decode_raw(c: &InferCtx<'_>) -> Shapes {
    Ok(vec![match &c.shape(0).dims {
        Some(d) => Shape::with_dims(d.iter().copied().chain([None]).collect()),
        None => Shape::unknown(),
    }])
}

/// A string scalar (`SerializeTensor`'s output).
fn scalar_string(_: &InferCtx<'_>) -> Shapes {
    Ok(vec![Shape::scalar()])
}

/// `ParseTensor`: the shape is in the bytes (TensorFlow's shape function says unknown); its
/// input must be a scalar.
fn parsed_tensor(c: &InferCtx<'_>) -> Shapes {
    match c.shape(0).rank() {
        Some(r) if r != 0 => Err(format!("Shape must be rank 0 but is rank {r}")),
        _ => Ok(vec![Shape::unknown()]),
    }
}

/// `DecodeCSV`: every default a scalar or a vector of at most one value; every output the
/// records' shape.
fn decode_csv(c: &InferCtx<'_>) -> Shapes {
    for i in 1..c.inputs.len() {
        match c.shape(i).dims.as_deref() {
            Some(d) if d.len() > 1 => return Err(format!("Shape must be at most rank 1 but is rank {}", d.len())),
            Some([Some(n)]) if *n > 1 => {
                return Err("Shape of a default must be a length-0 or length-1 vector, or a scalar.".into())
            }
            _ => {}
        }
    }
    Ok(vec![c.shape(0).clone(); c.inputs.len() - 1])
}

const CSV_TYPES: &[DType] = &[Float32, Float64, Int32, Int64, Str];

/// `Fingerprint`: one 8-byte row per slice along the first dimension of `data`.
fn fingerprint(c: &InferCtx<'_>) -> Shapes {
    match c.shape(0).dims.as_deref() {
        Some([]) => Err("Shape must be at least rank 1 but is rank 0".into()),
        Some(d) => Ok(vec![Shape::with_dims(vec![d[0], Some(8)])]),
        None => Ok(vec![Shape::with_dims(vec![None, Some(8)])]),
    }
}

pub(super) const OPS: &[OpSchema] = &[
    op(
        "Fingerprint",
        &[a("data", TypeRule::Attr("T")), a("method", STR)],
        &[a("fingerprint", TypeRule::Fixed(UInt8))],
        &[type_attr("T", None)],
        fingerprint,
    ),
    op(
        "DecodeCSV",
        &[a("records", STR), a("record_defaults", TypeRule::ListAttr("OUT_TYPE"))],
        &[a("output", TypeRule::ListAttr("OUT_TYPE"))],
        &[
            types("OUT_TYPE", CSV_TYPES),
            attr("field_delim", AttrKind::String),
            bool_attr_or("use_quote_delim", true),
            attr("na_value", AttrKind::String),
            attr("select_cols", AttrKind::ListInt),
        ],
        decode_csv,
    ),
    op(
        "SerializeTensor",
        &[a("tensor", TypeRule::Attr("T"))],
        &[a("serialized", STR)],
        &[type_attr("T", None)],
        scalar_string,
    ),
    op(
        "ParseTensor",
        &[a("serialized", STR)],
        &[a("output", TypeRule::Attr("out_type"))],
        &[type_attr("out_type", None)],
        parsed_tensor,
    ),
    op(
        "DecodeRaw",
        &[a("bytes", STR)],
        &[a("output", TypeRule::Attr("out_type"))],
        &[type_attr("out_type", Some(RAW_TYPES)), bool_attr_or("little_endian", true)],
        decode_raw,
    ),
    op(
        "DecodePaddedRaw",
        &[a("input_bytes", STR), a("fixed_length", TypeRule::Fixed(Int32))],
        &[a("output", TypeRule::Attr("out_type"))],
        &[type_attr("out_type", Some(RAW_TYPES)), bool_attr_or("little_endian", true)],
        decode_raw,
    ),
    op(
        "ParseExampleV2",
        &[
            a("serialized", STR),
            a("names", STR),
            a("sparse_keys", STR),
            a("dense_keys", STR),
            a("ragged_keys", STR),
            a("dense_defaults", TypeRule::ListAttr("Tdense")),
        ],
        &[
            SPARSE_OUT[0],
            SPARSE_OUT[1],
            SPARSE_OUT[2],
            a("dense_values", TypeRule::ListAttr("Tdense")),
            a("ragged_values", TypeRule::ListAttr("ragged_value_types")),
            a("ragged_row_splits", TypeRule::ListAttr("ragged_split_types")),
        ],
        &[
            types("Tdense", FEATURE_TYPES),
            attr("num_sparse", AttrKind::Int),
            types("sparse_types", FEATURE_TYPES),
            types("ragged_value_types", FEATURE_TYPES),
            types("ragged_split_types", SPLIT_TYPES),
            attr("dense_shapes", AttrKind::ListShape),
        ],
        parse_example_v2,
    ),
    op(
        "ParseExample",
        &[
            a("serialized", STR),
            a("names", STR),
            n("sparse_keys", STR, "Nsparse"),
            n("dense_keys", STR, "Ndense"),
            a("dense_defaults", TypeRule::ListAttr("Tdense")),
        ],
        &[
            n("sparse_indices", I64, "Nsparse"),
            a("sparse_values", TypeRule::ListAttr("sparse_types")),
            n("sparse_shapes", I64, "Nsparse"),
            a("dense_values", TypeRule::ListAttr("Tdense")),
        ],
        &[
            attr("Nsparse", AttrKind::Int),
            attr("Ndense", AttrKind::Int),
            types("sparse_types", FEATURE_TYPES),
            types("Tdense", FEATURE_TYPES),
            attr("dense_shapes", AttrKind::ListShape),
        ],
        parse_example,
    ),
    op(
        "ParseSingleExample",
        &[a("serialized", STR), a("dense_defaults", TypeRule::ListAttr("Tdense"))],
        &[SPARSE_OUT[0], SPARSE_OUT[1], SPARSE_OUT[2], a("dense_values", TypeRule::ListAttr("Tdense"))],
        &[
            attr("num_sparse", AttrKind::Int),
            attr("sparse_keys", AttrKind::ListString),
            attr("dense_keys", AttrKind::ListString),
            types("sparse_types", FEATURE_TYPES),
            types("Tdense", FEATURE_TYPES),
            attr("dense_shapes", AttrKind::ListShape),
        ],
        parse_single_example,
    ),
];
