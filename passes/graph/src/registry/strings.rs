//! Schemas of the string ops `tf.print` and `tf.strings` emit (`string_ops.cc`,
//! `logging_ops.cc`): `AsString`, `StringToNumber`, `StringFormat`, `PrintV2` (stateful, no
//! outputs), `StringJoin`, `Substr`, `StringLength`, `StringSplitV2`, `StaticRegexReplace`, `ReduceJoin`, and the Unicode code-point ops
//! (`UnicodeDecode[WithOffsets]`, `UnicodeEncode`, `UnicodeTranscode`).
//! Their string outputs are `DType::String`, which no cluster accepts (the compilable check
//! refuses every string-typed input or output), so they always run in the plain kernels.

use super::shapes::{none, same_as_0};
use super::{broadcast_shapes, merge_shapes, ArgSpec, AttrDefault, AttrKind, AttrSpec, InferCtx, OpFamily, OpSchema};
use super::{ShapeFn, TypeRule};
use crate::DType::{
    self, BFloat16, Bool, Complex128, Complex64, Float16, Float32, Float64, Int16, Int32, Int64, Int8, String as Str,
    UInt16, UInt32, UInt64, UInt8, Variant,
};
use crate::Shape;

type Shapes = Result<Vec<Shape>, String>;

const STR: TypeRule = TypeRule::Fixed(Str);
/// TensorFlow 2.21's `AsString` `T` list (`string_ops.cc`: the real number types, complex,
/// bool, variant and string).
const AS_STRING_TYPES: &[DType] = &[
    Float32, Float64, Int32, UInt8, Int16, Int8, Int64, BFloat16, UInt16, Float16, UInt32, UInt64, Complex64,
    Complex128, Bool, Variant, Str,
];
const TO_NUMBER_TYPES: &[DType] = &[Float32, Float64, Int32, Int64];
const INDEX: &[DType] = &[Int32, Int64];

const fn a(name: &'static str, ty: TypeRule) -> ArgSpec {
    ArgSpec { name, ty, number_attr: None }
}
const fn opt(name: &'static str, kind: AttrKind) -> AttrSpec {
    AttrSpec { name, kind, default: AttrDefault::Optional, allowed: None }
}
const fn req(name: &'static str, kind: AttrKind) -> AttrSpec {
    AttrSpec { name, kind, default: AttrDefault::Required, allowed: None }
}
const fn idef(name: &'static str, d: i64) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Int, default: AttrDefault::Int(d), allowed: None }
}
const fn bdef(name: &'static str, d: bool) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Bool, default: AttrDefault::Bool(d), allowed: None }
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

fn scalar_out(_: &InferCtx<'_>) -> Shapes {
    Ok(vec![Shape::scalar()])
}

/// `StringJoin`: the common shape of the non-scalar inputs (all scalars: a scalar).
fn string_join(c: &InferCtx<'_>) -> Shapes {
    let mut out = Shape::scalar();
    for i in c.inputs {
        match i.shape.rank() {
            Some(0) => {}
            None => {
                if out.rank() == Some(0) {
                    out = Shape::unknown();
                }
            }
            Some(_) => out = if out.rank() == Some(0) { i.shape.clone() } else { merge_shapes(&out, i.shape)? },
        }
    }
    Ok(vec![out])
}

/// `ReduceJoin`: the input's shape less the reduced axes (kept as 1 with `keep_dims`), when
/// the axes are known; an empty axis list reduces nothing.
/// `UnsortedSegmentJoin`: `[num_segments] + inputs.shape[rank(segment_ids):]`.
fn unsorted_segment_join(c: &InferCtx<'_>) -> Shapes {
    let n = c.scalar_value(2);
    match (c.shape(0).dims.as_ref(), c.shape(1).rank()) {
        (Some(dims), Some(r)) if r <= dims.len() => {
            let mut out = vec![n];
            out.extend_from_slice(&dims[r..]);
            Ok(vec![Shape::with_dims(out)])
        }
        _ => Ok(vec![Shape::unknown()]),
    }
}

fn reduce_join(c: &InferCtx<'_>) -> Shapes {
    let (Some(dims), Some(axes)) = (c.shape(0).dims.as_ref(), c.known_value(1)) else {
        return Ok(vec![Shape::unknown()]);
    };
    let rank = dims.len() as i64;
    let mut red = Vec::new();
    for a in axes {
        let d = if a < 0 { a + rank } else { a };
        if d < 0 || d >= rank {
            return Err(format!("Invalid reduction dimension {a} for input with {rank} dimension(s)"));
        }
        red.push(d as usize);
    }
    let keep = c.attr_bool("keep_dims", false);
    let out = dims
        .iter()
        .enumerate()
        .filter_map(|(d, &n)| match (red.contains(&d), keep) {
            (false, _) => Some(n),
            (true, true) => Some(Some(1)),
            (true, false) => None,
        })
        .collect();
    Ok(vec![Shape::with_dims(out)])
}

/// `Substr`: `input` broadcast with `pos` (`pos` and `len` alike).
fn substr(c: &InferCtx<'_>) -> Shapes {
    merge_shapes(c.shape(1), c.shape(2)).map_err(|e| format!("pos and len must have the same shape: {e}"))?;
    Ok(vec![broadcast_shapes(c.shape(0), c.shape(1))?])
}

/// `StringSplitV2`: a vector in; indices `[?, 2]`, values `[?]`, dense shape `[2]`.
/// `StringNGrams`: `[?]` n-grams, and splits like the input's.
fn string_ngrams(c: &InferCtx<'_>) -> Shapes {
    for (i, what) in [(0, "data"), (1, "data_splits")] {
        if c.shape(i).rank().is_some_and(|r| r != 1) {
            return Err(format!("{what} must be a vector, but has shape {}", c.shape(i)));
        }
    }
    Ok(vec![Shape::with_dims(vec![None]), c.shape(1).clone()])
}

fn string_split(c: &InferCtx<'_>) -> Shapes {
    if c.shape(0).rank().is_some_and(|r| r != 1) {
        return Err(format!("input must be a vector, but has shape {}", c.shape(0)));
    }
    if c.shape(1).rank().is_some_and(|r| r != 0) {
        return Err(format!("the separator must be a scalar, but has shape {}", c.shape(1)));
    }
    Ok(vec![Shape::with_dims(vec![None, Some(2)]), Shape::with_dims(vec![None]), Shape::known(&[2])])
}

/// `RegexReplace`, `RegexFullMatch`: the input's shape; the pattern (and rewrite) scalars.
fn regex_operands(c: &InferCtx<'_>) -> Shapes {
    for i in 1..c.inputs.len() {
        if c.shape(i).rank().is_some_and(|r| r != 0) {
            return Err(format!("operand {i} must be a scalar, but has shape {}", c.shape(i)));
        }
    }
    Ok(vec![c.shape(0).clone()])
}

/// `UnicodeDecode[WithOffsets]`: row splits `[n + 1]` for the `n` input strings, then the
/// code points (and their byte starts) `[?]`.
fn unicode_decode(c: &InferCtx<'_>) -> Shapes {
    let splits = match c.shape(0).dims.as_ref() {
        Some(d) => Shape::with_dims(vec![d.iter().try_fold(1i64, |n, x| x.map(|x| n * x)).map(|n| n + 1)]),
        None => Shape::with_dims(vec![None]),
    };
    Ok(std::iter::once(splits).chain((1..c.out_types.len()).map(|_| Shape::with_dims(vec![None]))).collect())
}

/// `UnicodeEncode`: one string per row, `len(input_splits) - 1`.
fn unicode_encode(c: &InferCtx<'_>) -> Shapes {
    for (i, what) in [(0, "input_values"), (1, "input_splits")] {
        if c.shape(i).rank().is_some_and(|r| r != 1) {
            return Err(format!("{what} must be a vector, but has shape {}", c.shape(i)));
        }
    }
    let rows = c.shape(1).dims.as_ref().and_then(|d| d[0]).map(|n| (n - 1).max(0));
    Ok(vec![Shape::with_dims(vec![rows])])
}

const UNICODE_DECODE_ATTRS: &[AttrSpec] = &[
    req("input_encoding", AttrKind::String),
    opt("errors", AttrKind::String),
    idef("replacement_char", 65533),
    bdef("replace_control_characters", false),
    AttrSpec { name: "Tsplits", kind: AttrKind::Type, default: AttrDefault::Type(Int64), allowed: Some(INDEX) },
];

pub(super) const OPS: &[OpSchema] = &[
    op(
        "UnicodeDecode",
        &[a("input", STR)],
        &[a("row_splits", TypeRule::Attr("Tsplits")), a("char_values", TypeRule::Fixed(Int32))],
        UNICODE_DECODE_ATTRS,
        unicode_decode,
    ),
    op(
        "UnicodeDecodeWithOffsets",
        &[a("input", STR)],
        &[
            a("row_splits", TypeRule::Attr("Tsplits")),
            a("char_values", TypeRule::Fixed(Int32)),
            a("char_to_byte_starts", TypeRule::Fixed(Int64)),
        ],
        UNICODE_DECODE_ATTRS,
        unicode_decode,
    ),
    op(
        "UnicodeEncode",
        &[a("input_values", TypeRule::Fixed(Int32)), a("input_splits", TypeRule::Attr("Tsplits"))],
        &[a("output", STR)],
        &[
            opt("errors", AttrKind::String),
            req("output_encoding", AttrKind::String),
            idef("replacement_char", 65533),
            AttrSpec { name: "Tsplits", kind: AttrKind::Type, default: AttrDefault::Type(Int64), allowed: Some(INDEX) },
        ],
        unicode_encode,
    ),
    op(
        "AsString",
        &[a("input", TypeRule::Attr("T"))],
        &[a("output", STR)],
        &[
            AttrSpec {
                name: "T",
                kind: AttrKind::Type,
                default: AttrDefault::Required,
                allowed: Some(AS_STRING_TYPES),
            },
            idef("precision", -1),
            bdef("scientific", false),
            bdef("shortest", false),
            idef("width", -1),
            opt("fill", AttrKind::String),
        ],
        same_as_0,
    ),
    op(
        "StringToNumber",
        &[a("string_tensor", STR)],
        &[a("output", TypeRule::Attr("out_type"))],
        &[AttrSpec {
            name: "out_type",
            kind: AttrKind::Type,
            default: AttrDefault::Type(Float32),
            allowed: Some(TO_NUMBER_TYPES),
        }],
        same_as_0,
    ),
    op(
        "StringFormat",
        &[a("inputs", TypeRule::ListAttr("T"))],
        &[a("output", STR)],
        &[
            AttrSpec { name: "T", kind: AttrKind::ListType, default: AttrDefault::Required, allowed: None },
            opt("template", AttrKind::String),
            opt("placeholder", AttrKind::String),
            idef("summarize", 3),
        ],
        scalar_out,
    ),
    // Stateful in TensorFlow: never pruned, merged or folded, and it runs where the
    // graph's control edges put it.
    OpSchema {
        is_stateful: true,
        ..op(
            "PrintV2",
            &[a("input", STR)],
            &[],
            &[opt("output_stream", AttrKind::String), opt("end", AttrKind::String)],
            none,
        )
    },
    op(
        "StringJoin",
        &[ArgSpec { name: "inputs", ty: STR, number_attr: Some("N") }],
        &[a("output", STR)],
        &[req("N", AttrKind::Int), opt("separator", AttrKind::String)],
        string_join,
    ),
    op(
        "ReduceJoin",
        &[a("inputs", STR), a("reduction_indices", TypeRule::Fixed(Int32))],
        &[a("output", STR)],
        &[bdef("keep_dims", false), opt("separator", AttrKind::String)],
        reduce_join,
    ),
    op(
        "UnsortedSegmentJoin",
        &[
            a("inputs", STR),
            a("segment_ids", TypeRule::Attr("Tindices")),
            a("num_segments", TypeRule::Attr("Tnumsegments")),
        ],
        &[a("output", STR)],
        &[
            opt("separator", AttrKind::String),
            AttrSpec { name: "Tindices", kind: AttrKind::Type, default: AttrDefault::Required, allowed: Some(INDEX) },
            AttrSpec {
                name: "Tnumsegments",
                kind: AttrKind::Type,
                default: AttrDefault::Type(Int32),
                allowed: Some(INDEX),
            },
        ],
        unsorted_segment_join,
    ),
    op(
        "Substr",
        &[a("input", STR), a("pos", TypeRule::Attr("T")), a("len", TypeRule::Attr("T"))],
        &[a("output", STR)],
        &[
            AttrSpec { name: "T", kind: AttrKind::Type, default: AttrDefault::Required, allowed: Some(INDEX) },
            opt("unit", AttrKind::String),
        ],
        substr,
    ),
    op(
        "StringToHashBucketFast",
        &[a("input", STR)],
        &[a("output", TypeRule::Fixed(Int64))],
        &[req("num_buckets", AttrKind::Int)],
        same_as_0,
    ),
    op(
        "StringToHashBucketStrong",
        &[a("input", STR)],
        &[a("output", TypeRule::Fixed(Int64))],
        &[req("num_buckets", AttrKind::Int), req("key", AttrKind::ListInt)],
        same_as_0,
    ),
    op(
        "StringToHashBucket",
        &[a("string_tensor", STR)],
        &[a("output", TypeRule::Fixed(Int64))],
        &[req("num_buckets", AttrKind::Int)],
        same_as_0,
    ),
    op(
        "StringLength",
        &[a("input", STR)],
        &[a("output", TypeRule::Fixed(Int32))],
        &[opt("unit", AttrKind::String)],
        same_as_0,
    ),
    op(
        "StringSplitV2",
        &[a("input", STR), a("sep", STR)],
        &[a("indices", TypeRule::Fixed(Int64)), a("values", STR), a("shape", TypeRule::Fixed(Int64))],
        &[idef("maxsplit", -1)],
        string_split,
    ),
    op(
        "StringNGrams",
        &[a("data", STR), a("data_splits", TypeRule::Attr("Tsplits"))],
        &[a("ngrams", STR), a("ngrams_splits", TypeRule::Attr("Tsplits"))],
        &[
            req("separator", AttrKind::String),
            req("ngram_widths", AttrKind::ListInt),
            req("left_pad", AttrKind::String),
            req("right_pad", AttrKind::String),
            req("pad_width", AttrKind::Int),
            req("preserve_short_sequences", AttrKind::Bool),
            AttrSpec { name: "Tsplits", kind: AttrKind::Type, default: AttrDefault::Type(Int64), allowed: Some(INDEX) },
        ],
        string_ngrams,
    ),
    op("StringLower", &[a("input", STR)], &[a("output", STR)], &[opt("encoding", AttrKind::String)], same_as_0),
    op(
        "UnicodeTranscode",
        &[a("input", STR)],
        &[a("output", STR)],
        &[
            req("input_encoding", AttrKind::String),
            req("output_encoding", AttrKind::String),
            opt("errors", AttrKind::String),
            idef("replacement_char", 65533),
            bdef("replace_control_characters", false),
        ],
        same_as_0,
    ),
    op("StringUpper", &[a("input", STR)], &[a("output", STR)], &[opt("encoding", AttrKind::String)], same_as_0),
    op(
        "StaticRegexFullMatch",
        &[a("input", STR)],
        &[a("output", TypeRule::Fixed(Bool))],
        &[req("pattern", AttrKind::String)],
        same_as_0,
    ),
    op(
        "RegexFullMatch",
        &[a("input", STR), a("pattern", STR)],
        &[a("output", TypeRule::Fixed(Bool))],
        &[],
        regex_operands,
    ),
    op(
        "RegexReplace",
        &[a("input", STR), a("pattern", STR), a("rewrite", STR)],
        &[a("output", STR)],
        &[bdef("replace_global", true)],
        regex_operands,
    ),
    op("StringStrip", &[a("input", STR)], &[a("output", STR)], &[], same_as_0),
    op(
        "StringSplit",
        &[a("input", STR), a("delimiter", STR)],
        &[a("indices", TypeRule::Fixed(Int64)), a("values", STR), a("shape", TypeRule::Fixed(Int64))],
        &[bdef("skip_empty", true)],
        string_split,
    ),
    // The V1 `tf.Print`: passes `input` through and logs `data`. Stateful, as TensorFlow's.
    OpSchema {
        is_stateful: true,
        ..op(
            "Print",
            &[a("input", TypeRule::Attr("T")), a("data", TypeRule::ListAttr("U"))],
            &[a("output", TypeRule::Attr("T"))],
            &[
                req("T", AttrKind::Type),
                AttrSpec { name: "U", kind: AttrKind::ListType, default: AttrDefault::Required, allowed: None },
                opt("message", AttrKind::String),
                idef("first_n", -1),
                idef("summarize", 3),
            ],
            same_as_0,
        )
    },
    op(
        "StaticRegexReplace",
        &[a("input", STR)],
        &[a("output", STR)],
        &[req("pattern", AttrKind::String), req("rewrite", AttrKind::String), bdef("replace_global", true)],
        same_as_0,
    ),
];
