//! Schemas of the file ops (`io_ops.cc`): `ReadFile` (a file's bytes as a string scalar) and
//! `WriteFile` (stateful, no outputs: never pruned, merged or folded, and it runs where the
//! graph's edges put it). String inputs keep both out of every cluster.

use super::build::{arg as a, pure_op};
use super::shapes::none;
use super::{InferCtx, OpFamily, OpSchema, TypeRule};
use crate::DType::String as Str;
use crate::Shape;

const STR: TypeRule = TypeRule::Fixed(Str);

fn scalar_out(_: &InferCtx<'_>) -> Result<Vec<Shape>, String> {
    Ok(vec![Shape::scalar()])
}

pub(super) const OPS: &[OpSchema] = &[
    OpSchema {
        is_stateful: true,
        ..pure_op("ReadFile", OpFamily::Shape, &[a("filename", STR)], &[a("contents", STR)], &[], scalar_out)
    },
    OpSchema {
        is_stateful: true,
        ..pure_op("WriteFile", OpFamily::Shape, &[a("filename", STR), a("contents", STR)], &[], &[], none)
    },
];
