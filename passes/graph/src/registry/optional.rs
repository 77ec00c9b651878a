//! Schemas of the Optional ops (`optional_ops.cc`): `DT_VARIANT` scalars that hold a list
//! of tensors or nothing. TF2's `cond_v2` makes each branch of a differentiated `If`/`Case`
//! return its intermediates wrapped in Optionals (`OptionalFromValue` in the branch taken,
//! `OptionalNone` in the others), and the gradient's branches unwrap them with
//! `OptionalGetValue`; `tf.data` iterators' `get_next_as_optional` uses them too.

use super::build::{arg as a, pure_op as op, required as req, typed_list};
use super::calls::declared_output_shapes;
use super::{AttrKind, InferCtx, OpFamily, OpSchema, TypeRule};
use crate::{DType, Shape};

const VARIANT: TypeRule = TypeRule::Fixed(DType::Variant);

fn scalar(_c: &InferCtx<'_>) -> Result<Vec<Shape>, String> {
    Ok(vec![Shape::scalar()])
}

pub(super) static OPS: &[OpSchema] = &[
    op(
        "OptionalFromValue",
        OpFamily::Shape,
        &[typed_list("components", "Toutput_types")],
        &[a("optional", VARIANT)],
        &[req("Toutput_types", AttrKind::ListType)],
        scalar,
    ),
    op("OptionalNone", OpFamily::Shape, &[], &[a("optional", VARIANT)], &[], scalar),
    op(
        "OptionalHasValue",
        OpFamily::Shape,
        &[a("optional", VARIANT)],
        &[a("has_value", TypeRule::Fixed(DType::Bool))],
        &[],
        scalar,
    ),
    op(
        "OptionalGetValue",
        OpFamily::Shape,
        &[a("optional", VARIANT)],
        &[typed_list("components", "output_types")],
        &[req("output_types", AttrKind::ListType), req("output_shapes", AttrKind::ListShape)],
        declared_output_shapes,
    ),
];
