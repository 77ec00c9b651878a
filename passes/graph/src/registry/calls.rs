//! Schemas of TensorFlow's function-call and functional control-flow ops
//! (`functional_ops.cc`): `PartitionedCall`, `StatefulPartitionedCall`,
//! `If`/`StatelessIf`, `Case`/`StatelessCase`, `While`/`StatelessWhile`.
//!
//! Their argument lists are typed by `list(type)` attributes (`Tin`/`Tout`,
//! or `T` for loops), so inference types the outputs and checks the inputs
//! against them. The `func` attributes (`f`, `then_branch`, `branches`,
//! `cond`, `body`) are not listed: the registry has no `func` attribute kind,
//! and the runtime reports a missing one. Output shapes come from the
//! node's `output_shapes` attribute when it has one per output, else stay
//! unknown (a loop may change its values' shapes; `_output_shapes` refines
//! them as for every op). Every one of these ops may call a function, so
//! [`crate::effects::resource_kind`] makes them a resource *modify* whatever
//! the table says, and no cluster ever takes them.

use super::{ArgSpec, AttrDefault, AttrKind, AttrSpec, InferCtx, OpFamily, OpSchema, TypeRule};
use crate::{AttrValue, DType, ListValue, Shape};

const fn list(name: &'static str, attr: &'static str) -> ArgSpec {
    ArgSpec { name, ty: TypeRule::ListAttr(attr), number_attr: None }
}
const fn types(name: &'static str) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::ListType, default: AttrDefault::Required, allowed: None }
}
const fn optional(name: &'static str, kind: AttrKind) -> AttrSpec {
    AttrSpec { name, kind, default: AttrDefault::Optional, allowed: None }
}

const CALL_IN: &[ArgSpec] = &[list("args", "Tin")];
const CALL_OUT: &[ArgSpec] = &[list("output", "Tout")];
const CALL_ATTRS: &[AttrSpec] = &[
    types("Tin"),
    types("Tout"),
    optional("config", AttrKind::String),
    optional("config_proto", AttrKind::String),
    optional("executor_type", AttrKind::String),
];

const IF_IN: &[ArgSpec] =
    &[ArgSpec { name: "cond", ty: TypeRule::Attr("Tcond"), number_attr: None }, list("input", "Tin")];
const IF_ATTRS: &[AttrSpec] = &[
    AttrSpec { name: "Tcond", kind: AttrKind::Type, default: AttrDefault::Required, allowed: None },
    types("Tin"),
    types("Tout"),
];

const CASE_IN: &[ArgSpec] =
    &[ArgSpec { name: "branch_index", ty: TypeRule::Fixed(DType::Int32), number_attr: None }, list("input", "Tin")];
const CASE_ATTRS: &[AttrSpec] = &[types("Tin"), types("Tout")];

const WHILE_IN: &[ArgSpec] = &[list("input", "T")];
const WHILE_OUT: &[ArgSpec] = &[list("output", "T")];
const WHILE_ATTRS: &[AttrSpec] = &[
    types("T"),
    AttrSpec { name: "parallel_iterations", kind: AttrKind::Int, default: AttrDefault::Int(10), allowed: None },
];

/// The `output_shapes` attribute when it gives one shape per output; else unknown shapes.
pub(super) fn declared_output_shapes(c: &InferCtx<'_>) -> Result<Vec<Shape>, String> {
    match c.node.attr("output_shapes") {
        Some(AttrValue::List(ListValue::Shape(v))) if v.len() == c.out_types.len() => Ok(v.clone()),
        _ => Ok(Vec::new()),
    }
}

const fn call(
    name: &'static str,
    stateful: bool,
    inputs: &'static [ArgSpec],
    outputs: &'static [ArgSpec],
    attrs: &'static [AttrSpec],
) -> OpSchema {
    OpSchema {
        name,
        family: OpFamily::Call,
        inputs,
        outputs,
        attrs,
        is_stateful: stateful,
        shape_fn: declared_output_shapes,
        value_fn: None,
    }
}

pub(super) static OPS: &[OpSchema] = &[
    call("PartitionedCall", false, CALL_IN, CALL_OUT, CALL_ATTRS),
    call("StatefulPartitionedCall", true, CALL_IN, CALL_OUT, CALL_ATTRS),
    call("If", true, IF_IN, CALL_OUT, IF_ATTRS),
    call("StatelessIf", false, IF_IN, CALL_OUT, IF_ATTRS),
    call("Case", true, CASE_IN, CALL_OUT, CASE_ATTRS),
    call("StatelessCase", false, CASE_IN, CALL_OUT, CASE_ATTRS),
    call("While", true, WHILE_IN, WHILE_OUT, WHILE_ATTRS),
    call("StatelessWhile", false, WHILE_IN, WHILE_OUT, WHILE_ATTRS),
];

#[cfg(test)]
mod tests {
    use crate::infer::testing::{shape_of, ty, Builder};
    use crate::verify::{verify, VerifyError};
    use crate::{AttrValue, DType::*, ListValue, Output, Shape};

    fn types(v: &[crate::DType]) -> AttrValue {
        AttrValue::List(ListValue::Type(v.to_vec()))
    }

    #[test]
    fn loops_and_calls_are_typed_from_their_type_lists() {
        let mut b = Builder::new();
        b.input("x", Float32, Some(&[2])).input("n", Int32, Some(&[]));
        let shapes = AttrValue::List(ListValue::Shape(vec![Shape::with_dims(vec![]), Shape::with_dims(vec![Some(2)])]));
        b.node("loop", "While", &["n", "x"], &[("T", types(&[Int32, Float32])), ("output_shapes", shapes)]);
        b.node("sloop", "StatelessWhile", &["n", "x"], &[("T", types(&[Int32, Float32]))]);
        b.node("call", "StatefulPartitionedCall", &["x"], &[("Tin", types(&[Float32])), ("Tout", types(&[Int32]))]);
        b.node("use", "AddV2", &["loop:1", "x"], &[("T", ty(Float32))]);
        let g = b.build();
        let info = verify(&g).unwrap();
        let dtype = |n: &str, port| info.output(Output { node: g.find(n).unwrap(), port }).unwrap().0;
        assert_eq!((dtype("loop", 0), dtype("loop", 1), dtype("call", 0)), (Int32, Float32, Int32));
        assert_eq!(shape_of(&b, "loop:1"), "[2]");
        assert_eq!(shape_of(&b, "sloop:1"), "[*]", "unknown without output_shapes");
        assert!(crate::registry::lookup("While").unwrap().is_stateful);
        assert!(!crate::registry::lookup("StatelessWhile").unwrap().is_stateful);
    }

    #[test]
    fn inputs_must_match_the_declared_types() {
        let mut b = Builder::new();
        b.input("p", Bool, Some(&[])).input("x", Float32, Some(&[2]));
        b.node(
            "cond",
            "If",
            &["p", "x"],
            &[("Tcond", ty(Bool)), ("Tin", types(&[Int32])), ("Tout", types(&[Float32]))],
        );
        assert!(matches!(verify(&b.build()), Err(VerifyError::DTypeMismatch { .. })));
        let mut b = Builder::new();
        b.input("x", Float32, Some(&[2]));
        b.node("call", "PartitionedCall", &["x"], &[("Tout", types(&[Float32]))]);
        assert!(matches!(verify(&b.build()), Err(VerifyError::MissingAttr { .. })));
    }
}
