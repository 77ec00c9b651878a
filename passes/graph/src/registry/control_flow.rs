//! Schemas of TensorFlow 1's control-flow ops (`control_flow_ops.cc`: `Switch`, `Merge`,
//! `Enter`, `Exit`, `NextIteration`, `LoopCond`; `ControlTrigger` is in `ops.rs`) and of the per-step
//! containers v1 loops use (`data_flow_ops.cc`: the `StackV2` family, how v1 while-loop
//! gradients save forward values, and the `TensorArrayV3` family), with TensorFlow's
//! signatures (`tf.raw_ops` names, argument and attribute names, defaults) and shape
//! functions.
//!
//! The `Ref*` forms are not listed: their arguments are reference types, which the
//! registry's type rules do not express; they stay opaque (the frame executor runs them).
//!
//! A `Merge` inside a loop takes its `NextIteration` input over a back edge, which
//! inference visits after the `Merge`: that input is untyped then, and TensorFlow's
//! `MergeShape` makes the output's shape unknown when an input's rank is unknown — so a
//! loop variable's shape is unknown inside its loop unless `_output_shapes` says more.
//!
//! The control-flow ops are not stateful in TensorFlow's OpDefs (Grappler keeps them by
//! `IsControlFlow` instead; here `rewrite::is_pure` and [`crate::effects::V1_CONTROL_FLOW`]
//! do). The container ops are stateful: they create or touch a per-step container through
//! their resource handle.

use super::{ArgSpec, AttrDefault, AttrKind, AttrSpec, InferCtx, OpFamily, OpSchema, ShapeFn, TypeRule};
use crate::{AttrValue, DType, Shape};

type Shapes = Result<Vec<Shape>, String>;

const T: TypeRule = TypeRule::Attr("T");
const DT: TypeRule = TypeRule::Attr("dtype");
const RES: TypeRule = TypeRule::Fixed(DType::Resource);
const BOOL: TypeRule = TypeRule::Fixed(DType::Bool);
const INT32: TypeRule = TypeRule::Fixed(DType::Int32);
const INT64: TypeRule = TypeRule::Fixed(DType::Int64);
const FLOAT: TypeRule = TypeRule::Fixed(DType::Float32);

const fn a(name: &'static str, ty: TypeRule) -> ArgSpec {
    ArgSpec { name, ty, number_attr: None }
}
const fn an(name: &'static str, ty: TypeRule, n: &'static str) -> ArgSpec {
    ArgSpec { name, ty, number_attr: Some(n) }
}
const fn tattr(name: &'static str) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Type, default: AttrDefault::Required, allowed: None }
}
const fn iattr(name: &'static str) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Int, default: AttrDefault::Required, allowed: None }
}
const fn idef(name: &'static str, d: i64) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Int, default: AttrDefault::Int(d), allowed: None }
}
const fn bdef(name: &'static str, d: bool) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Bool, default: AttrDefault::Bool(d), allowed: None }
}
const fn opt(name: &'static str, kind: AttrKind) -> AttrSpec {
    AttrSpec { name, kind, default: AttrDefault::Optional, allowed: None }
}
const fn req(name: &'static str, kind: AttrKind) -> AttrSpec {
    AttrSpec { name, kind, default: AttrDefault::Required, allowed: None }
}

const fn op(
    name: &'static str,
    family: OpFamily,
    stateful: bool,
    inputs: &'static [ArgSpec],
    outputs: &'static [ArgSpec],
    attrs: &'static [AttrSpec],
    shape_fn: ShapeFn,
) -> OpSchema {
    OpSchema { name, family, inputs, outputs, attrs, is_stateful: stateful, shape_fn, value_fn: None }
}
const fn flow(name: &'static str, inputs: &'static [ArgSpec], outputs: &'static [ArgSpec], f: ShapeFn) -> OpSchema {
    op(name, OpFamily::ControlFlow, false, inputs, outputs, T_ONLY, f)
}
const fn container(
    name: &'static str,
    inputs: &'static [ArgSpec],
    outputs: &'static [ArgSpec],
    attrs: &'static [AttrSpec],
    f: ShapeFn,
) -> OpSchema {
    op(name, OpFamily::Container, true, inputs, outputs, attrs, f)
}

const T_ONLY: &[AttrSpec] = &[tattr("T")];

// ------------------------------------------------------------------ shapes

fn none(_: &InferCtx<'_>) -> Shapes {
    Ok(Vec::new())
}

fn with_rank(c: &InferCtx<'_>, i: usize, rank: usize, what: &str) -> Result<(), String> {
    match c.shape(i).rank() {
        Some(r) if r != rank => Err(format!("{what} must have rank {rank}, got shape {}", c.shape(i))),
        _ => Ok(()),
    }
}

/// `Enter`, `Exit`, `NextIteration`: the input's shape.
fn forward(c: &InferCtx<'_>) -> Shapes {
    Ok(vec![c.shape(0).clone()])
}

/// `Switch`: both outputs have the data's shape; the predicate is a scalar.
fn switch(c: &InferCtx<'_>) -> Shapes {
    with_rank(c, 1, 0, "pred")?;
    Ok(vec![c.shape(0).clone(), c.shape(0).clone()])
}

/// `LoopCond`: a scalar in, the same scalar out.
fn loop_cond(c: &InferCtx<'_>) -> Shapes {
    with_rank(c, 0, 0, "input")?;
    Ok(vec![Shape::scalar()])
}

/// TensorFlow's `MergeShape`: the first input's shape with every dimension the inputs
/// disagree on unknown; unknown when a rank is unknown or the ranks differ. The
/// `value_index` output is a scalar.
fn merge(c: &InferCtx<'_>) -> Shapes {
    let mut out = c.shape(0).clone();
    if let Some(dims) = out.dims.as_mut() {
        for i in &c.inputs[1..] {
            match &i.shape.dims {
                Some(d) if d.len() == dims.len() => {
                    for (o, x) in dims.iter_mut().zip(d) {
                        if o != x {
                            *o = None;
                        }
                    }
                }
                _ => {
                    out = Shape::unknown();
                    break;
                }
            }
        }
    }
    Ok(vec![out, Shape::scalar()])
}

/// `StackV2`: a scalar handle (`max_size` a scalar).
fn stack(c: &InferCtx<'_>) -> Shapes {
    with_rank(c, 0, 0, "max_size")?;
    Ok(vec![Shape::scalar()])
}

/// `StackPushV2`: the pushed element comes back.
fn stack_push(c: &InferCtx<'_>) -> Shapes {
    Ok(vec![c.shape(1).clone()])
}

fn unknown(_: &InferCtx<'_>) -> Shapes {
    Ok(vec![Shape::unknown()])
}

fn scalar(c: &InferCtx<'_>) -> Shapes {
    Ok(vec![Shape::scalar(); c.out_types.len()])
}

/// `TensorArrayV3`, `TensorArrayGradV3`: a handle of shape `[2]` and a scalar flow.
fn array_handle(_: &InferCtx<'_>) -> Shapes {
    Ok(vec![Shape::known(&[2]), Shape::scalar()])
}

fn element_shape(c: &InferCtx<'_>, attr: &str) -> Option<Shape> {
    c.node.attr(attr).and_then(AttrValue::as_shape).filter(|s| s.dims.is_some()).cloned()
}

/// `TensorArrayGatherV3`: `[n] + element_shape` (unknown without a known element shape).
fn array_gather(c: &InferCtx<'_>) -> Shapes {
    with_rank(c, 1, 1, "indices")?;
    Ok(vec![match (element_shape(c, "element_shape"), c.shape(1).dims.as_ref()) {
        (Some(es), Some(ix)) => {
            let mut dims = vec![ix[0]];
            dims.extend(es.dims.unwrap_or_default());
            Shape::with_dims(dims)
        }
        _ => Shape::unknown(),
    }])
}

/// `TensorArrayConcatV3`: `[?] + element_shape_except0`, and the lengths vector.
fn array_concat(c: &InferCtx<'_>) -> Shapes {
    let value = match element_shape(c, "element_shape_except0") {
        Some(es) => {
            let mut dims = vec![None];
            dims.extend(es.dims.unwrap_or_default());
            Shape::with_dims(dims)
        }
        None => Shape::unknown(),
    };
    Ok(vec![value, Shape::with_dims(vec![None])])
}

/// `TensorArrayReadV3`: the element shape is known only at run time (unknown).
fn array_read(c: &InferCtx<'_>) -> Shapes {
    with_rank(c, 1, 0, "index")?;
    unknown(c)
}

// ------------------------------------------------------------------ table

pub(super) static OPS: &[OpSchema] = &[
    // ---- v1 control flow.
    flow("Switch", &[a("data", T), a("pred", BOOL)], &[a("output_false", T), a("output_true", T)], switch),
    op(
        "Merge",
        OpFamily::ControlFlow,
        false,
        &[an("inputs", T, "N")],
        &[a("output", T), a("value_index", INT32)],
        &[tattr("T"), iattr("N")],
        merge,
    ),
    op(
        "Enter",
        OpFamily::ControlFlow,
        false,
        &[a("data", T)],
        &[a("output", T)],
        &[tattr("T"), req("frame_name", AttrKind::String), bdef("is_constant", false), idef("parallel_iterations", 10)],
        forward,
    ),
    flow("Exit", &[a("data", T)], &[a("output", T)], forward),
    flow("NextIteration", &[a("data", T)], &[a("output", T)], forward),
    op("LoopCond", OpFamily::ControlFlow, false, &[a("input", BOOL)], &[a("output", BOOL)], &[], loop_cond),
    // ---- Stacks.
    container(
        "StackV2",
        &[a("max_size", INT32)],
        &[a("handle", RES)],
        &[tattr("elem_type"), opt("stack_name", AttrKind::String)],
        stack,
    ),
    container(
        "StackPushV2",
        &[a("handle", RES), a("elem", T)],
        &[a("output", T)],
        &[tattr("T"), bdef("swap_memory", false)],
        stack_push,
    ),
    container(
        "StackPopV2",
        &[a("handle", RES)],
        &[a("elem", TypeRule::Attr("elem_type"))],
        &[tattr("elem_type")],
        unknown,
    ),
    container("StackCloseV2", &[a("handle", RES)], &[], &[], none),
    // ---- Tensor arrays.
    container(
        "TensorArrayV3",
        &[a("size", INT32)],
        &[a("handle", RES), a("flow", FLOAT)],
        &[
            tattr("dtype"),
            opt("element_shape", AttrKind::Shape),
            bdef("dynamic_size", false),
            bdef("clear_after_read", true),
            bdef("identical_element_shapes", false),
            opt("tensor_array_name", AttrKind::String),
        ],
        array_handle,
    ),
    container(
        "TensorArrayGradV3",
        &[a("handle", RES), a("flow_in", FLOAT)],
        &[a("grad_handle", RES), a("flow_out", FLOAT)],
        &[req("source", AttrKind::String)],
        array_handle,
    ),
    container(
        "TensorArrayWriteV3",
        &[a("handle", RES), a("index", INT32), a("value", T), a("flow_in", FLOAT)],
        &[a("flow_out", FLOAT)],
        T_ONLY,
        scalar,
    ),
    container(
        "TensorArrayReadV3",
        &[a("handle", RES), a("index", INT32), a("flow_in", FLOAT)],
        &[a("value", DT)],
        &[tattr("dtype")],
        array_read,
    ),
    container(
        "TensorArrayGatherV3",
        &[a("handle", RES), a("indices", INT32), a("flow_in", FLOAT)],
        &[a("value", DT)],
        &[tattr("dtype"), opt("element_shape", AttrKind::Shape)],
        array_gather,
    ),
    container(
        "TensorArrayScatterV3",
        &[a("handle", RES), a("indices", INT32), a("value", T), a("flow_in", FLOAT)],
        &[a("flow_out", FLOAT)],
        T_ONLY,
        scalar,
    ),
    container(
        "TensorArrayConcatV3",
        &[a("handle", RES), a("flow_in", FLOAT)],
        &[a("value", DT), a("lengths", INT64)],
        &[tattr("dtype"), opt("element_shape_except0", AttrKind::Shape)],
        array_concat,
    ),
    container(
        "TensorArraySplitV3",
        &[a("handle", RES), a("value", T), a("lengths", INT64), a("flow_in", FLOAT)],
        &[a("flow_out", FLOAT)],
        T_ONLY,
        scalar,
    ),
    container("TensorArraySizeV3", &[a("handle", RES), a("flow_in", FLOAT)], &[a("size", INT32)], &[], scalar),
    container("TensorArrayCloseV3", &[a("handle", RES)], &[], &[], none),
];

#[cfg(test)]
mod tests {
    use crate::infer::testing::{shape_of, ty, Builder};
    use crate::verify::verify;
    use crate::{AttrValue, DType::*, Output};

    #[test]
    fn a_while_loop_and_a_cond_are_typed() {
        let mut b = Builder::new();
        b.input("x", Float32, Some(&[2, 3])).input("p", Bool, Some(&[]));
        let frame = ("frame_name", AttrValue::S("L".into()));
        b.node("enter", "Enter", &["x"], &[("T", ty(Float32)), frame.clone()]);
        b.node("merge", "Merge", &["enter", "next"], &[("T", ty(Float32)), ("N", AttrValue::I(2))]);
        b.node("pe", "Enter", &["p"], &[("T", ty(Bool)), frame, ("is_constant", AttrValue::B(true))]);
        b.node("cond", "LoopCond", &["pe"], &[]);
        b.node("sw", "Switch", &["merge", "cond"], &[("T", ty(Float32))]);
        b.node("body", "Neg", &["sw:1"], &[("T", ty(Float32))]);
        b.node("next", "NextIteration", &["body"], &[("T", ty(Float32))]);
        b.node("exit", "Exit", &["sw"], &[("T", ty(Float32))]);
        b.node("s2", "Switch", &["x", "p"], &[("T", ty(Float32))]);
        b.node("m2", "Merge", &["s2", "s2:1"], &[("T", ty(Float32)), ("N", AttrValue::I(2))]);
        let g = b.build();
        let info = verify(&g).unwrap();
        let dtype = |n: &str, port| info.output(Output { node: g.find(n).unwrap(), port }).unwrap().0;
        assert_eq!((dtype("merge", 0), dtype("merge", 1), dtype("cond", 0)), (Float32, Int32, Bool));
        assert_eq!(shape_of(&b, "enter"), "[2,3]");
        assert_eq!(shape_of(&b, "merge"), "[*]", "the back edge is untyped: unknown, as MergeShape");
        assert_eq!(shape_of(&b, "sw:1"), "[*]");
        assert_eq!(shape_of(&b, "s2:1"), "[2,3]");
        assert_eq!(shape_of(&b, "m2"), "[2,3]");
        assert_eq!(shape_of(&b, "m2:1"), "[]");
    }

    #[test]
    fn containers_are_typed_from_their_attributes() {
        let mut b = Builder::new();
        b.input("n", Int32, Some(&[])).input("v", Float32, Some(&[4]));
        b.node("ta", "TensorArrayV3", &["n"], &[("dtype", ty(Float32))]);
        b.node("w", "TensorArrayWriteV3", &["ta", "n", "v", "ta:1"], &[("T", ty(Float32))]);
        b.node("r", "TensorArrayReadV3", &["ta", "n", "w"], &[("dtype", ty(Float32))]);
        b.node("c", "TensorArrayConcatV3", &["ta", "w"], &[("dtype", ty(Float32))]);
        b.node("st", "StackV2", &["n"], &[("elem_type", ty(Float32))]);
        b.node("push", "StackPushV2", &["st", "v"], &[("T", ty(Float32))]);
        b.node("pop", "StackPopV2", &["st"], &[("elem_type", ty(Float32))]);
        let g = b.build();
        let info = verify(&g).unwrap();
        let dtype = |n: &str, port| info.output(Output { node: g.find(n).unwrap(), port }).unwrap().0;
        assert_eq!((dtype("ta", 0), dtype("ta", 1), dtype("r", 0), dtype("c", 1)), (Resource, Float32, Float32, Int64));
        assert_eq!(shape_of(&b, "ta"), "[2]");
        assert_eq!(shape_of(&b, "push"), "[4]");
        assert_eq!(dtype("pop", 0), Float32);
        assert!(crate::registry::lookup("StackPushV2").unwrap().is_stateful);
        assert!(!crate::registry::lookup("Switch").unwrap().is_stateful);
    }
}
