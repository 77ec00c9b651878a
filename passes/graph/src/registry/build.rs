//! Constructors for the schema tables, usable in `const` context: one spelling of an
//! argument, an attribute and a schema for every table that adopts them (the older tables
//! still carry local copies; new tables use these).

use super::{ArgSpec, AttrDefault, AttrKind, AttrSpec, OpFamily, OpSchema, ShapeFn, TypeRule};
use crate::DType;

/// An argument whose dtype follows `ty`.
pub(super) const fn arg(name: &'static str, ty: TypeRule) -> ArgSpec {
    ArgSpec { name, ty, number_attr: None }
}

/// A required type attribute, restricted to `allowed` when given.
pub(super) const fn type_attr(name: &'static str, allowed: Option<&'static [DType]>) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Type, default: AttrDefault::Required, allowed }
}

/// A type attribute with a default.
pub(super) const fn type_attr_or(name: &'static str, d: DType, allowed: &'static [DType]) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Type, default: AttrDefault::Type(d), allowed: Some(allowed) }
}

/// A bool attribute with a default.
pub(super) const fn bool_attr_or(name: &'static str, d: bool) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Bool, default: AttrDefault::Bool(d), allowed: None }
}

/// A stateless op.
pub(super) const fn pure_op(
    name: &'static str,
    family: OpFamily,
    inputs: &'static [ArgSpec],
    outputs: &'static [ArgSpec],
    attrs: &'static [AttrSpec],
    shape_fn: ShapeFn,
) -> OpSchema {
    OpSchema { name, family, inputs, outputs, attrs, is_stateful: false, shape_fn, value_fn: None }
}

/// An argument repeated `number_attr` times, each of dtype `ty`.
pub(super) const fn repeated(name: &'static str, ty: TypeRule, number_attr: &'static str) -> ArgSpec {
    ArgSpec { name, ty, number_attr: Some(number_attr) }
}

/// An argument list typed by a `list(type)` attribute.
pub(super) const fn typed_list(name: &'static str, attr: &'static str) -> ArgSpec {
    ArgSpec { name, ty: TypeRule::ListAttr(attr), number_attr: None }
}

/// A required attribute of `kind`.
pub(super) const fn required(name: &'static str, kind: AttrKind) -> AttrSpec {
    AttrSpec { name, kind, default: AttrDefault::Required, allowed: None }
}

/// An int attribute with a default.
pub(super) const fn int_attr_or(name: &'static str, d: i64) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Int, default: AttrDefault::Int(d), allowed: None }
}
