//! Schemas of TensorFlow 1's summary ops (`summary_ops.cc`): `ScalarSummary`,
//! `HistogramSummary`, `TensorSummaryV2` and `MergeSummary` — what `tf.compat.v1.summary.scalar`,
//! `.histogram`, `.text`/`.tensor_summary` and `.merge_all` put in nearly every TF1 training graph. Each returns a
//! serialized `Summary` protocol buffer as a string scalar, so they never enter a
//! cluster (the compilable check refuses string outputs) and run in the plain kernels.
//! Also `Timestamp` (`tf.timestamp()`, defined beside them in `logging_ops.cc`), and
//! TensorFlow 2's summary writers (`summary_ops.cc`: `SummaryWriter`,
//! `CreateSummaryFileWriter`, `WriteSummary`, `WriteScalarSummary`, `WriteHistogramSummary`,
//! `WriteRawProtoSummary`, `FlushSummaryWriter`, `CloseSummaryWriter`) that `tf.summary.*`
//! inside a `tf.function` emits: stateful ops on a writer resource, never clustered.

use super::{ArgSpec, AttrDefault, AttrKind, AttrSpec, InferCtx, OpFamily, OpSchema, ShapeFn, TypeRule};
use crate::DType::{
    self, BFloat16, Float16, Float32, Float64, Int16, Int32, Int64, Int8, String as Str, UInt16, UInt32, UInt64, UInt8,
};
use crate::Shape;

const STR: TypeRule = TypeRule::Fixed(Str);
const RES: TypeRule = TypeRule::Fixed(DType::Resource);
const I32: TypeRule = TypeRule::Fixed(Int32);
const I64: TypeRule = TypeRule::Fixed(Int64);
const T: TypeRule = TypeRule::Attr("T");
/// `TF_CALL_REAL_NUMBER_TYPES`, the types the kernels are registered for.
const REAL: &[DType] = &[Float16, BFloat16, Float32, Float64, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64];
const T_REAL: AttrSpec =
    AttrSpec { name: "T", kind: AttrKind::Type, default: AttrDefault::Type(Float32), allowed: Some(REAL) };

const SUMMARY_OUT: &[ArgSpec] = &[a("summary", STR)];

const fn a(name: &'static str, ty: TypeRule) -> ArgSpec {
    ArgSpec { name, ty, number_attr: None }
}
const fn op(name: &'static str, inputs: &'static [ArgSpec], attrs: &'static [AttrSpec], shape_fn: ShapeFn) -> OpSchema {
    OpSchema {
        name,
        family: OpFamily::Shape,
        inputs,
        outputs: SUMMARY_OUT,
        attrs,
        is_stateful: false,
        shape_fn,
        value_fn: None,
    }
}

/// Every summary op returns one serialized `Summary`: a string scalar (TensorFlow's shape
/// functions check nothing else; the kernels check the inputs).
fn scalar_out(_: &InferCtx<'_>) -> Result<Vec<Shape>, String> {
    Ok(vec![Shape::scalar()])
}

fn no_outputs(_: &InferCtx<'_>) -> Result<Vec<Shape>, String> {
    Ok(Vec::new())
}

/// A writer op: stateful, on the writer handle (input 0), with no outputs.
const fn writer_op(name: &'static str, inputs: &'static [ArgSpec], attrs: &'static [AttrSpec]) -> OpSchema {
    OpSchema { outputs: &[], is_stateful: true, ..op(name, inputs, attrs, no_outputs) }
}

const fn sattr(name: &'static str) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::String, default: AttrDefault::Optional, allowed: None }
}

pub(super) const OPS: &[OpSchema] = &[
    op("ScalarSummary", &[a("tags", STR), a("values", TypeRule::Attr("T"))], &[T_REAL], scalar_out),
    op("HistogramSummary", &[a("tag", STR), a("values", TypeRule::Attr("T"))], &[T_REAL], scalar_out),
    op(
        "TensorSummaryV2",
        &[a("tag", STR), a("tensor", TypeRule::Attr("T")), a("serialized_summary_metadata", STR)],
        &[AttrSpec { name: "T", kind: AttrKind::Type, default: AttrDefault::Required, allowed: None }],
        scalar_out,
    ),
    // `tf.timestamp()`, in `logging_ops.cc` with the summaries: stateful (each run reads the
    // clock; never folded, merged or clustered).
    OpSchema {
        outputs: &[a("ts", TypeRule::Fixed(Float64))],
        is_stateful: true,
        ..op("Timestamp", &[], &[], scalar_out)
    },
    OpSchema {
        outputs: &[a("writer", RES)],
        is_stateful: true,
        ..op("SummaryWriter", &[], &[sattr("shared_name"), sattr("container")], scalar_out)
    },
    writer_op(
        "CreateSummaryFileWriter",
        &[a("writer", RES), a("logdir", STR), a("max_queue", I32), a("flush_millis", I32), a("filename_suffix", STR)],
        &[],
    ),
    writer_op(
        "WriteSummary",
        &[a("writer", RES), a("step", I64), a("tensor", T), a("tag", STR), a("summary_metadata", STR)],
        &[AttrSpec { name: "T", kind: AttrKind::Type, default: AttrDefault::Required, allowed: None }],
    ),
    writer_op("WriteScalarSummary", &[a("writer", RES), a("step", I64), a("tag", STR), a("value", T)], &[T_REAL]),
    writer_op("WriteHistogramSummary", &[a("writer", RES), a("step", I64), a("tag", STR), a("values", T)], &[T_REAL]),
    writer_op("WriteRawProtoSummary", &[a("writer", RES), a("step", I64), a("tensor", STR)], &[]),
    writer_op("FlushSummaryWriter", &[a("writer", RES)], &[]),
    writer_op("CloseSummaryWriter", &[a("writer", RES)], &[]),
    op(
        "MergeSummary",
        &[ArgSpec { name: "inputs", ty: STR, number_attr: Some("N") }],
        &[AttrSpec { name: "N", kind: AttrKind::Int, default: AttrDefault::Required, allowed: None }],
        scalar_out,
    ),
];
