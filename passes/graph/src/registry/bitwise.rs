//! The bit-level ops: `Bitcast` (Keras 3's `ops.argmax` tells −0.0 from +0.0 with a
//! `Bitcast` to int32 and a `BitwiseAnd` of the sign bit, so every Keras accuracy metric
//! has them) and the integer bitwise ops `BitwiseAnd`/`BitwiseOr`/`BitwiseXor`, `Invert`,
//! `LeftShift` and `RightShift`, and `PopulationCount` (set bits per element, as uint8). Signatures and shape functions follow their
//! `REGISTER_OP`s in TensorFlow's `array_ops.cc` and `bitwise_ops.cc`.

use super::{ArgSpec, AttrDefault, AttrKind, AttrSpec, InferCtx, OpFamily, OpSchema, ShapeFn, TypeRule};
use crate::DType::{self, Int16, Int32, Int64, Int8, UInt16, UInt32, UInt64, UInt8};
use crate::{AttrValue, Shape};

type Shapes = Result<Vec<Shape>, String>;

const T: TypeRule = TypeRule::Attr("T");
const INTEGER: &[DType] = &[Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64];

const fn a(name: &'static str, ty: TypeRule) -> ArgSpec {
    ArgSpec { name, ty, number_attr: None }
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

const T_INT: &[AttrSpec] =
    &[AttrSpec { name: "T", kind: AttrKind::Type, default: AttrDefault::Required, allowed: Some(INTEGER) }];
const BITCAST_ATTRS: &[AttrSpec] = &[
    AttrSpec { name: "T", kind: AttrKind::Type, default: AttrDefault::Required, allowed: None },
    AttrSpec { name: "type", kind: AttrKind::Type, default: AttrDefault::Required, allowed: None },
];

/// `Bitcast`: the same shape between equal widths; a narrower output type adds a last
/// dimension of `in / out` elements; a wider one drops the last dimension, which must hold
/// `out / in` elements.
pub(super) fn bitcast(c: &InferCtx<'_>) -> Shapes {
    let width = |name: &str| c.node.attr(name).and_then(AttrValue::as_type).and_then(DType::size_of);
    let (Some(from), Some(to)) = (width("T"), width("type")) else {
        return Err("Bitcast needs fixed-width numeric types".into());
    };
    let input = c.shape(0);
    if from == to {
        return Ok(vec![input.clone()]);
    }
    let Some(dims) = &input.dims else { return Ok(vec![Shape::unknown()]) };
    if from > to {
        let mut d = dims.clone();
        d.push(Some((from / to) as i64));
        return Ok(vec![Shape::with_dims(d)]);
    }
    match dims.last() {
        None => Err("cannot bitcast a scalar to a wider type".into()),
        Some(Some(n)) if *n != (to / from) as i64 => {
            Err(format!("last dimension {n} does not match the output type's width ratio {}", to / from))
        }
        Some(_) => Ok(vec![Shape::with_dims(dims[..dims.len() - 1].to_vec())]),
    }
}

pub(super) const OPS: &[OpSchema] = &[
    op("Bitcast", OpFamily::Unary, &[a("input", T)], &[a("output", TypeRule::Attr("type"))], BITCAST_ATTRS, bitcast),
    op("BitwiseAnd", OpFamily::Binary, &[a("x", T), a("y", T)], &[a("z", T)], T_INT, super::shapes::broadcast_01),
    op("BitwiseOr", OpFamily::Binary, &[a("x", T), a("y", T)], &[a("z", T)], T_INT, super::shapes::broadcast_01),
    op("BitwiseXor", OpFamily::Binary, &[a("x", T), a("y", T)], &[a("z", T)], T_INT, super::shapes::broadcast_01),
    op("LeftShift", OpFamily::Binary, &[a("x", T), a("y", T)], &[a("z", T)], T_INT, super::shapes::broadcast_01),
    op("RightShift", OpFamily::Binary, &[a("x", T), a("y", T)], &[a("z", T)], T_INT, super::shapes::broadcast_01),
    op("Invert", OpFamily::Unary, &[a("x", T)], &[a("y", T)], T_INT, super::shapes::same_as_0),
    op(
        "PopulationCount",
        OpFamily::Unary,
        &[a("x", T)],
        &[a("y", TypeRule::Fixed(UInt8))],
        T_INT,
        super::shapes::same_as_0,
    ),
];
