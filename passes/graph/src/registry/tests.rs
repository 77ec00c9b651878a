//! Tests of the registry: the table itself, broadcasting, strided slices and
//! each family's shape function (run through whole-graph inference).

use super::*;
use crate::infer::testing::{shape, shape_of, ty, Builder};
use crate::DType::{Bool, Float32, Int32, Int64, Resource};
use crate::{AttrValue, ListValue};

fn s(dims: &[i64]) -> Shape {
    Shape::with_dims(dims.iter().map(|&d| (d >= 0).then_some(d)).collect())
}

fn list(v: &[i64]) -> AttrValue {
    AttrValue::List(ListValue::I(v.to_vec()))
}

#[test]
fn table_covers_the_required_ops_once() {
    let required = [
        "VarHandleOp",
        "ReadVariableOp",
        "AssignVariableOp",
        "AssignAddVariableOp",
        "AssignSubVariableOp",
        "ResourceGather",
        "ResourceScatterAdd",
        "ResourceScatterUpdate",
        "ResourceApplyGradientDescent",
        "ResourceApplyMomentum",
        "ResourceApplyAdam",
        "VarIsInitializedOp",
        "VariableShape",
        "Add",
        "AddV2",
        "Sub",
        "Mul",
        "RealDiv",
        "Div",
        "Neg",
        "Abs",
        "Exp",
        "Log",
        "Sqrt",
        "Rsqrt",
        "Square",
        "Tanh",
        "Sigmoid",
        "Relu",
        "Maximum",
        "Minimum",
        "Pow",
        "Cast",
        "Select",
        "SelectV2",
        "Equal",
        "NotEqual",
        "Less",
        "LessEqual",
        "Greater",
        "GreaterEqual",
        "LogicalAnd",
        "LogicalOr",
        "LogicalNot",
        "MatMul",
        "BiasAdd",
        "Sum",
        "Mean",
        "Max",
        "Min",
        "Prod",
        "ArgMax",
        "Reshape",
        "Shape",
        "Size",
        "ExpandDims",
        "Squeeze",
        "Transpose",
        "ConcatV2",
        "Pack",
        "Slice",
        "StridedSlice",
        "Fill",
        "ZerosLike",
        "OnesLike",
        "Tile",
        "BroadcastTo",
        "GatherV2",
        "Softmax",
        "LogSoftmax",
        "SoftmaxCrossEntropyWithLogits",
        "SparseSoftmaxCrossEntropyWithLogits",
        "ReluGrad",
        "BiasAddGrad",
        "TanhGrad",
        "SigmoidGrad",
        "BroadcastGradientArgs",
        "Identity",
        "IdentityN",
        "NoOp",
        "StopGradient",
        "Const",
        "Placeholder",
        "PlaceholderWithDefault",
        "Reciprocal",
        "SquaredDifference",
        "Range",
        "FloorDiv",
        "FloorMod",
        "DynamicStitch",
        "AddN",
        "ShapeN",
    ];
    for op in required {
        assert!(is_known(op), "{op} missing from the registry");
        assert_eq!(lookup(op).map(|s| s.name), Some(op));
    }
    let mut names: Vec<&str> = all().map(|s| s.name).collect();
    names.sort_unstable();
    let n = names.len();
    names.dedup();
    assert_eq!(names.len(), n, "duplicate schema");
    assert!(!is_known("MyCustomOp"));
}

#[test]
fn statefulness_and_resource_effects() {
    let kind = |op: &str| lookup(op).and_then(OpSchema::resource_kind);
    assert_eq!(kind("ReadVariableOp"), Some(ResourceKind::Read));
    assert_eq!(kind("VariableShape"), Some(ResourceKind::Read));
    assert_eq!(kind("AssignVariableOp"), Some(ResourceKind::Write));
    assert_eq!(kind("AssignAddVariableOp"), Some(ResourceKind::Modify));
    assert_eq!(kind("ResourceApplyAdam"), Some(ResourceKind::Modify));
    assert_eq!(kind("ResourceScatterUpdate"), Some(ResourceKind::Modify));
    assert_eq!(kind("VarHandleOp"), None);
    assert_eq!(kind("MatMul"), None);
    assert!(lookup("VarHandleOp").unwrap().is_stateful);
    assert!(lookup("AssignVariableOp").unwrap().is_stateful);
    assert!(lookup("ReadVariableOp").unwrap().is_stateful);
    assert!(!lookup("Placeholder").unwrap().is_stateful);
    assert!(!lookup("Add").unwrap().is_stateful);
    assert!(!lookup("Const").unwrap().is_stateful);
    // TensorFlow's checks are stateful: the passes must not drop one that gates by control edges.
    assert!(lookup("CheckNumerics").unwrap().is_stateful);
    assert!(lookup("CheckNumericsV2").unwrap().is_stateful);
    assert!(lookup("Assert").unwrap().is_stateful);
    assert_eq!(lookup("MatMul").unwrap().family, OpFamily::MatMul);
}

#[test]
fn broadcasting_follows_tensorflow() {
    let b = |x: &Shape, y: &Shape| broadcast_shapes(x, y).map(|s| s.to_string());
    assert_eq!(b(&s(&[2, 1, 3]), &s(&[4, 1])).unwrap(), "[2,4,3]");
    assert_eq!(b(&s(&[]), &s(&[2, 3])).unwrap(), "[2,3]");
    assert_eq!(b(&s(&[-1]), &s(&[3])).unwrap(), "[3]");
    assert_eq!(b(&s(&[-1]), &s(&[1])).unwrap(), "[?]");
    assert_eq!(b(&s(&[-1, 5]), &s(&[-1, 1])).unwrap(), "[?,5]");
    assert_eq!(b(&Shape::unknown(), &s(&[3])).unwrap(), "[*]");
    let e = b(&s(&[2, 3]), &s(&[4, 3])).unwrap_err();
    assert!(e.contains("[2,3] and [4,3]"), "{e}");
    // Symmetric.
    assert_eq!(b(&s(&[4, 1]), &s(&[2, 1, 3])).unwrap(), "[2,4,3]");
}

#[test]
fn merging_shapes() {
    assert_eq!(merge_shapes(&s(&[-1, 3]), &s(&[2, -1])).unwrap(), s(&[2, 3]));
    assert!(merge_shapes(&s(&[2]), &s(&[3])).is_err());
    assert!(merge_shapes(&s(&[2]), &s(&[2, 1])).is_err());
    assert_eq!(merge_shapes(&Shape::unknown(), &s(&[2])).unwrap(), s(&[2]));
}

fn spec(begin: &[i64], end: &[i64], strides: &[i64]) -> SliceSpec {
    SliceSpec { begin: begin.to_vec(), end: end.to_vec(), strides: strides.to_vec(), ..SliceSpec::default() }
}

fn ss(input: &[i64], sp: &SliceSpec) -> Result<String, String> {
    let d: Vec<Dim> = input.iter().map(|&x| (x >= 0).then_some(x)).collect();
    strided_slice(&d, sp).map(|o| Shape::with_dims(o.shape).to_string())
}

#[test]
fn strided_slice_masks() {
    // x[1:3]
    assert_eq!(ss(&[5], &spec(&[1], &[3], &[1])).unwrap(), "[2]");
    // x[::-1] via both masks
    let sp = SliceSpec { begin_mask: 1, end_mask: 1, ..spec(&[0], &[0], &[-1]) };
    assert_eq!(ss(&[5], &sp).unwrap(), "[5]");
    // x[::2] on 5 elements -> 3
    let sp = SliceSpec { begin_mask: 1, end_mask: 1, ..spec(&[0], &[0], &[2]) };
    assert_eq!(ss(&[5], &sp).unwrap(), "[3]");
    // x[0] on [?, 784] (shrink): the rest of the dims pass through.
    let sp = SliceSpec { shrink_axis_mask: 1, ..spec(&[0], &[1], &[1]) };
    assert_eq!(ss(&[-1, 784], &sp).unwrap(), "[784]");
    // x[:, 1] on [2, 3]
    let sp = SliceSpec { begin_mask: 1, end_mask: 1, shrink_axis_mask: 2, ..spec(&[0, 1], &[0, 2], &[1, 1]) };
    assert_eq!(ss(&[2, 3], &sp).unwrap(), "[2]");
    // x[..., None] on [2, 3]
    let sp = SliceSpec { ellipsis_mask: 1, new_axis_mask: 2, ..spec(&[0, 0], &[0, 0], &[1, 1]) };
    assert_eq!(ss(&[2, 3], &sp).unwrap(), "[2,3,1]");
    // x[None, ..., 1:] on [4, 5, 6]
    let sp = SliceSpec { new_axis_mask: 1, ellipsis_mask: 2, end_mask: 4, ..spec(&[0, 0, 1], &[0, 0, 0], &[1, 1, 1]) };
    assert_eq!(ss(&[4, 5, 6], &sp).unwrap(), "[1,4,5,5]");
    // x[-2:] clamps; x[3:1] is empty; x[10:20] clamps to empty.
    assert_eq!(ss(&[5], &SliceSpec { end_mask: 1, ..spec(&[-2], &[0], &[1]) }).unwrap(), "[2]");
    assert_eq!(ss(&[5], &spec(&[3], &[1], &[1])).unwrap(), "[0]");
    assert_eq!(ss(&[5], &spec(&[10], &[20], &[1])).unwrap(), "[0]");
    // x[4:1:-2] -> indices 4, 2
    assert_eq!(ss(&[5], &spec(&[4], &[1], &[-2])).unwrap(), "[2]");
    // Errors: zero stride, shrink out of bounds, too many indices, two ellipses.
    assert!(ss(&[5], &spec(&[0], &[1], &[0])).unwrap_err().contains("zero"));
    assert!(ss(&[5], &SliceSpec { shrink_axis_mask: 1, ..spec(&[5], &[6], &[1]) }).is_err());
    assert!(ss(&[5], &spec(&[0, 0], &[1, 1], &[1, 1])).is_err());
    assert!(ss(&[5], &SliceSpec { ellipsis_mask: 3, ..spec(&[0, 0], &[1, 1], &[1, 1]) }).is_err());
}

#[test]
fn strided_slice_in_a_graph_folds_shape_values() {
    // batch = Shape(x)[0]; Reshape(y, Pack(batch, -1)) keeps the unknown batch.
    let mut b = Builder::new();
    b.input("x", Float32, Some(&[-1, 4, 5]))
        .node("sh", "Shape", &["x"], &[("T", ty(Float32))])
        .const_i32("b0", &[1], &[1])
        .const_i32("e0", &[1], &[3])
        .const_i32("s0", &[1], &[1])
        .node("tail", "StridedSlice", &["sh", "b0", "e0", "s0"], &[("T", ty(Int32)), ("Index", ty(Int32))])
        .node("n", "Prod", &["tail", "z"], &[("T", ty(Int32)), ("Tidx", ty(Int32)), ("keep_dims", AttrValue::B(false))])
        .const_i32("z", &[], &[0])
        .const_i32("m1", &[], &[-1])
        .node("shp", "Pack", &["m1", "n"], &[("T", ty(Int32)), ("N", AttrValue::I(2))])
        .node("flat", "Reshape", &["x", "shp"], &[("T", ty(Float32)), ("Tshape", ty(Int32))]);
    assert_eq!(shape_of(&b, "tail"), "[2]");
    assert_eq!(shape_of(&b, "n"), "[]");
    assert_eq!(shape_of(&b, "flat"), "[?,20]");
    let mut b2 = Builder::new();
    b2.input("x", Float32, Some(&[-1, 784]))
        .node("sh", "Shape", &["x"], &[("T", ty(Float32))])
        .const_i32("b0", &[1], &[0])
        .const_i32("e0", &[1], &[1])
        .const_i32("s0", &[1], &[1])
        .node(
            "batch",
            "StridedSlice",
            &["sh", "b0", "e0", "s0"],
            &[("T", ty(Int32)), ("Index", ty(Int32)), ("shrink_axis_mask", AttrValue::I(1))],
        );
    assert_eq!(shape_of(&b2, "batch"), "[]");
}

fn reduce(b: &mut Builder, name: &str, op: &str, x: &str, axes: &str, keep: bool) {
    b.node(name, op, &[x, axes], &[("T", ty(Float32)), ("Tidx", ty(Int32)), ("keep_dims", AttrValue::B(keep))]);
}

#[test]
fn reductions_with_and_without_keep_dims() {
    let mut b = Builder::new();
    b.input("x", Float32, Some(&[2, 3, 4])).const_i32("a1", &[1], &[1]).const_i32("am1", &[], &[-1]);
    b.const_i32("all", &[3], &[0, 1, 2]).const_i32("bad", &[1], &[3]).input("dyn", Int32, Some(&[1]));
    reduce(&mut b, "sk", "Sum", "x", "a1", true);
    reduce(&mut b, "s", "Sum", "x", "a1", false);
    reduce(&mut b, "m", "Mean", "x", "am1", false);
    reduce(&mut b, "mx", "Max", "x", "all", false);
    reduce(&mut b, "mxk", "Min", "x", "all", true);
    reduce(&mut b, "dk", "Prod", "x", "dyn", true);
    reduce(&mut b, "d", "Prod", "x", "dyn", false);
    assert_eq!(shape_of(&b, "sk"), "[2,1,4]");
    assert_eq!(shape_of(&b, "s"), "[2,4]");
    assert_eq!(shape_of(&b, "m"), "[2,3]");
    assert_eq!(shape_of(&b, "mx"), "[]");
    assert_eq!(shape_of(&b, "mxk"), "[1,1,1]");
    assert_eq!(shape_of(&b, "dk"), "[?,?,?]");
    assert_eq!(shape_of(&b, "d"), "[*]");
    reduce(&mut b, "oops", "Sum", "x", "bad", false);
    let e = shape_of(&b, "oops");
    assert!(e.contains("node 'oops'") && e.contains("out of range"), "{e}");

    let mut b = Builder::new();
    b.input("x", Float32, Some(&[2, 3])).const_i32("d", &[], &[1]);
    b.node("am", "ArgMax", &["x", "d"], &[("T", ty(Float32)), ("Tidx", ty(Int32)), ("output_type", ty(Int64))]);
    assert_eq!(shape_of(&b, "am"), "[2]");
    let info = crate::infer::infer(&b.build()).unwrap();
    let g = b.build();
    assert_eq!(info.outputs(g.find("am").unwrap())[0].0, Int64);
}

fn reshape(b: &mut Builder, name: &str, x: &str, shape: &str) {
    b.node(name, "Reshape", &[x, shape], &[("T", ty(Float32)), ("Tshape", ty(Int32))]);
}

#[test]
fn reshape_with_wildcard() {
    let mut b = Builder::new();
    b.input("x", Float32, Some(&[2, 3, 4])).input("img", Float32, Some(&[-1, 784]));
    b.const_i32("s1", &[2], &[-1, 4]).const_i32("s2", &[4], &[-1, 28, 28, 1]).const_i32("s3", &[2], &[5, -1]);
    b.const_i32("s4", &[2], &[6, 5]).const_i32("s5", &[2], &[-1, -1]).input("dyn", Int32, Some(&[3]));
    reshape(&mut b, "r1", "x", "s1");
    reshape(&mut b, "r2", "img", "s2");
    reshape(&mut b, "r3", "x", "dyn");
    assert_eq!(shape_of(&b, "r1"), "[6,4]");
    assert_eq!(shape_of(&b, "r2"), "[?,28,28,1]");
    assert_eq!(shape_of(&b, "r3"), "[?,?,?]");
    let mut bad = Builder { raw: b.raw.clone(), ..Builder::default() };
    reshape(&mut bad, "r4", "x", "s3");
    assert!(shape_of(&bad, "r4").contains("cannot reshape a tensor of shape [2,3,4] (24 elements) into shape [5,-1]"));
    let mut bad = Builder { raw: b.raw.clone(), ..Builder::default() };
    reshape(&mut bad, "r5", "x", "s4");
    assert!(shape_of(&bad, "r5").contains("(30 elements)"));
    let mut bad = Builder { raw: b.raw.clone(), ..Builder::default() };
    reshape(&mut bad, "r6", "x", "s5");
    assert!(shape_of(&bad, "r6").contains("only one"));
    // An empty input into sizes whose product wraps to 0 in 64 bits.
    let mut bad = Builder { raw: b.raw.clone(), ..Builder::default() };
    let wraps = crate::Tensor::from_i64(vec![3], vec![1 << 62, 4, 1]).unwrap();
    bad.input("empty", Float32, Some(&[0, 3]));
    bad.node("wraps", "Const", &[], &[("dtype", ty(Int64)), ("value", AttrValue::Tensor(wraps))]);
    bad.node("r7", "Reshape", &["empty", "wraps"], &[("T", ty(Float32)), ("Tshape", ty(Int64))]);
    assert!(shape_of(&bad, "r7").contains("more elements than can be counted"), "{}", shape_of(&bad, "r7"));
    // Reshape(g, Shape(x)) restores x's shape, as gradients do.
    b.input("g", Float32, None).node("sx", "Shape", &["x"], &[("T", ty(Float32))]);
    reshape(&mut b, "back", "g", "sx");
    assert_eq!(shape_of(&b, "back"), "[2,3,4]");
}

fn matmul(b: &mut Builder, name: &str, x: &str, y: &str, ta: bool, tb: bool) {
    b.node(
        name,
        "MatMul",
        &[x, y],
        &[("T", ty(Float32)), ("transpose_a", AttrValue::B(ta)), ("transpose_b", AttrValue::B(tb))],
    );
}

#[test]
fn matmul_transposes() {
    let mut b = Builder::new();
    b.input("a", Float32, Some(&[2, 3])).input("b", Float32, Some(&[4, 3])).input("c", Float32, Some(&[-1, 4]));
    matmul(&mut b, "ab", "a", "b", false, true);
    matmul(&mut b, "ba", "b", "a", false, true);
    matmul(&mut b, "ca", "c", "b", false, false);
    matmul(&mut b, "at", "a", "a", true, false);
    assert_eq!(shape_of(&b, "ab"), "[2,4]");
    assert_eq!(shape_of(&b, "ba"), "[4,2]");
    assert_eq!(shape_of(&b, "ca"), "[?,3]");
    assert_eq!(shape_of(&b, "at"), "[3,3]");
    matmul(&mut b, "bad", "a", "b", false, false);
    let e = shape_of(&b, "bad");
    assert!(e.contains("node 'bad'") && e.contains("inner dimensions must be equal, but are 3 and 4"), "{e}");
}

#[test]
fn elementwise_broadcasts_and_errors_name_the_node() {
    let mut b = Builder::new();
    b.input("x", Float32, Some(&[-1, 10])).input("bias", Float32, Some(&[10])).input("y", Float32, Some(&[3]));
    b.node("add", "AddV2", &["x", "bias"], &[("T", ty(Float32))]);
    b.node("lt", "Less", &["x", "bias"], &[("T", ty(Float32))]);
    b.node("sel", "SelectV2", &["lt", "x", "bias"], &[("T", ty(Float32))]);
    b.node("ba", "BiasAdd", &["x", "bias"], &[("T", ty(Float32))]);
    b.node("bag", "BiasAddGrad", &["ba"], &[("T", ty(Float32))]);
    b.node("r", "Relu", &["ba"], &[("T", ty(Float32))]);
    b.node("rg", "ReluGrad", &["r", "ba"], &[("T", ty(Float32))]);
    assert_eq!(shape_of(&b, "add"), "[?,10]");
    assert_eq!(shape_of(&b, "sel"), "[?,10]");
    assert_eq!(shape_of(&b, "ba"), "[?,10]");
    assert_eq!(shape_of(&b, "bag"), "[10]");
    assert_eq!(shape_of(&b, "rg"), "[?,10]");
    let g = b.build();
    let info = crate::infer::infer(&g).unwrap();
    assert_eq!(info.outputs(g.find("lt").unwrap())[0].0, Bool);
    b.node("oops", "Mul", &["x", "y"], &[("T", ty(Float32))]);
    let e = shape_of(&b, "oops");
    assert!(e.contains("node 'oops'") && e.contains("incompatible shapes"), "{e}");
}

#[test]
fn shape_ops() {
    let mut b = Builder::new();
    let t = || ("T", ty(Float32));
    b.input("x", Float32, Some(&[2, 3])).input("v", Float32, Some(&[3]));
    b.const_i32("perm", &[2], &[1, 0]).const_i32("ax1", &[], &[1]).const_i32("ax0", &[], &[0]);
    b.const_i32("m", &[2], &[2, 3]).const_i32("dims", &[3], &[4, 1, 3]);
    b.node("tr", "Transpose", &["x", "perm"], &[t(), ("Tperm", ty(Int32))]);
    b.node("cat", "ConcatV2", &["x", "x", "ax1"], &[t(), ("N", AttrValue::I(2)), ("Tidx", ty(Int32))]);
    b.node("pk", "Pack", &["v", "v"], &[t(), ("N", AttrValue::I(2)), ("axis", AttrValue::I(1))]);
    b.node("ex", "ExpandDims", &["x", "ax1"], &[t(), ("Tdim", ty(Int32))]);
    b.node("sq", "Squeeze", &["ex"], &[t(), ("squeeze_dims", list(&[1]))]);
    b.node("sqa", "Squeeze", &["ex"], &[t()]);
    b.node("tl", "Tile", &["x", "m"], &[t(), ("Tmultiples", ty(Int32))]);
    b.node("bt", "BroadcastTo", &["v", "dims"], &[t(), ("Tidx", ty(Int32))]);
    b.node("sh", "Shape", &["x"], &[t()]);
    b.node("sz", "Size", &["x"], &[t()]);
    b.const_f32("one", &[], &[1.0]);
    b.node("fill", "Fill", &["sh", "one"], &[t()]);
    b.const_i32("idx", &[4], &[0, 1, 1, 0]);
    b.node(
        "g",
        "GatherV2",
        &["x", "idx", "ax1"],
        &[("Tparams", ty(Float32)), ("Tindices", ty(Int32)), ("Taxis", ty(Int32))],
    );
    b.const_i32("beg", &[2], &[0, 1]).const_i32("size", &[2], &[-1, 2]);
    b.node("sl", "Slice", &["x", "beg", "size"], &[t(), ("Index", ty(Int32))]);
    b.node("zl", "ZerosLike", &["x"], &[t()]);
    b.node("idn", "IdentityN", &["x", "v"], &[("T", AttrValue::List(ListValue::Type(vec![Float32, Float32])))]);
    b.const_i32("lim", &[], &[5]);
    b.node("rg", "Range", &["ax0", "lim", "ax1"], &[("Tidx", ty(Int32))]);
    b.node("un", "Unpack", &["x"], &[t(), ("num", AttrValue::I(2))]);
    assert_eq!(shape_of(&b, "tr"), "[3,2]");
    assert_eq!(shape_of(&b, "cat"), "[2,6]");
    assert_eq!(shape_of(&b, "pk"), "[3,2]");
    assert_eq!(shape_of(&b, "ex"), "[2,1,3]");
    assert_eq!(shape_of(&b, "sq"), "[2,3]");
    assert_eq!(shape_of(&b, "sqa"), "[2,3]");
    assert_eq!(shape_of(&b, "tl"), "[4,9]");
    assert_eq!(shape_of(&b, "bt"), "[4,1,3]");
    assert_eq!(shape_of(&b, "sh"), "[2]");
    assert_eq!(shape_of(&b, "sz"), "[]");
    assert_eq!(shape_of(&b, "fill"), "[2,3]");
    assert_eq!(shape_of(&b, "g"), "[2,4]");
    assert_eq!(shape_of(&b, "sl"), "[2,2]");
    assert_eq!(shape_of(&b, "zl"), "[2,3]");
    assert_eq!(shape_of(&b, "idn:1"), "[3]");
    assert_eq!(shape_of(&b, "rg"), "[5]");
    assert_eq!(shape_of(&b, "un:1"), "[3]");
    // A tiled dimension past 64 bits is refused (TensorFlow: overflow when multiplying),
    // not left unknown.
    let mut bad = Builder { raw: b.raw.clone(), ..Builder::default() };
    let huge = crate::Tensor::from_i64(vec![2], vec![1, i64::MAX]).unwrap();
    bad.node("huge", "Const", &[], &[("dtype", ty(Int64)), ("value", AttrValue::Tensor(huge))]);
    bad.node("tl2", "Tile", &["x", "huge"], &[t(), ("Tmultiples", ty(Int64))]);
    assert!(shape_of(&bad, "tl2").contains("overflows"), "{}", shape_of(&bad, "tl2"));
}

#[test]
fn shape_op_errors() {
    let base = || {
        let mut b = Builder::new();
        b.input("x", Float32, Some(&[2, 3])).const_i32("ax1", &[], &[1]).const_i32("perm", &[2], &[0, 0]);
        b
    };
    let t = || ("T", ty(Float32));
    let mut b = base();
    b.node("sq", "Squeeze", &["x"], &[t(), ("squeeze_dims", list(&[1]))]);
    assert!(shape_of(&b, "sq").contains("cannot squeeze dimension 1 of size 3"));
    let mut b = base();
    b.node("tr", "Transpose", &["x", "perm"], &[t(), ("Tperm", ty(Int32))]);
    assert!(shape_of(&b, "tr").contains("not a permutation"));
    let mut b = base();
    b.const_i32("dims", &[1], &[2]);
    b.node("bt", "BroadcastTo", &["x", "dims"], &[t(), ("Tidx", ty(Int32))]);
    assert!(shape_of(&b, "bt").contains("cannot broadcast"));
    let mut b = base();
    b.node("tr", "Transpose", &["x", "ax1"], &[t(), ("Tperm", ty(Int32))]);
    b.node("cat0", "ConcatV2", &["x", "tr", "ax1"], &[t(), ("N", AttrValue::I(2)), ("Tidx", ty(Int32))]);
    assert!(shape_of(&b, "tr").contains("perm"));
    let mut b = base();
    b.const_i32("ax0", &[], &[0]).const_i32("p10", &[2], &[1, 0]);
    b.node("tr", "Transpose", &["x", "p10"], &[t(), ("Tperm", ty(Int32))]);
    b.node("cat0", "ConcatV2", &["x", "tr", "ax0"], &[t(), ("N", AttrValue::I(2)), ("Tidx", ty(Int32))]);
    assert!(shape_of(&b, "cat0").contains("dimension 1 of value 1 is 2, but earlier values have 3"));
    let mut b = base();
    b.node("ex", "ExpandDims", &["x", "ax1"], &[t(), ("Tdim", ty(Int32))]);
    b.node("pk", "Pack", &["x", "ex"], &[t(), ("N", AttrValue::I(2))]);
    assert!(shape_of(&b, "pk").contains("node 'pk'"));
}

#[test]
fn variables_give_read_shapes() {
    let mut b = Builder::new();
    b.var("w", Float32, &[784, 10]).node("wi", "Identity", &["w"], &[("T", ty(Resource))]);
    b.node("r", "ReadVariableOp", &["wi"], &[("dtype", ty(Float32))]);
    b.input("ids", Int32, Some(&[5]));
    b.node("emb", "ResourceGather", &["w", "ids"], &[("dtype", ty(Float32)), ("Tindices", ty(Int32))]);
    b.node("vs", "VariableShape", &["w"], &[]);
    b.node("init", "VarIsInitializedOp", &["w"], &[]);
    assert_eq!(shape_of(&b, "w"), "[]");
    assert_eq!(shape_of(&b, "r"), "[784,10]");
    assert_eq!(shape_of(&b, "emb"), "[5,10]");
    assert_eq!(shape_of(&b, "vs"), "[2]");
    assert_eq!(shape_of(&b, "init"), "[]");
    // Reshape by the variable's shape uses the folded VariableShape.
    b.input("g", Float32, None);
    b.node("rs", "Reshape", &["g", "vs"], &[("T", ty(Float32)), ("Tshape", ty(Int32))]);
    assert_eq!(shape_of(&b, "rs"), "[784,10]");
    let g = b.build();
    let info = crate::infer::infer(&g).unwrap();
    let wi = crate::Output { node: g.find("wi").unwrap(), port: 0 };
    assert_eq!(info.variable(wi).map(|v| v.0), g.find("w"));
    // Assigning a value of the wrong shape is an error.
    b.const_f32("c", &[2], &[1.0, 2.0]);
    b.node("bad", "AssignVariableOp", &["w", "c"], &[("dtype", ty(Float32))]);
    assert!(shape_of(&b, "bad").contains("does not match the variable's shape [784,10]"));
}

#[test]
fn gradient_helpers_fold() {
    // The pattern tf.gradients builds for `x + b` with x: [?,10], b: [10].
    let mut b = Builder::new();
    b.input("x", Float32, Some(&[-1, 10])).input("bias", Float32, Some(&[10])).input("grad", Float32, Some(&[-1, 10]));
    b.node("sx", "Shape", &["x"], &[("T", ty(Float32))]).node("sb", "Shape", &["bias"], &[("T", ty(Float32))]);
    b.node("bga", "BroadcastGradientArgs", &["sb", "sb"], &[("T", ty(Int32))]);
    b.const_i32("s2", &[1], &[1]).const_i32("s3", &[2], &[4, 1]);
    b.node("bgb", "BroadcastGradientArgs", &["s3", "s2"], &[("T", ty(Int32))]);
    b.node(
        "sum",
        "Sum",
        &["grad", "bgb:1"],
        &[("T", ty(Float32)), ("Tidx", ty(Int32)), ("keep_dims", AttrValue::B(false))],
    );
    assert_eq!(shape_of(&b, "bga"), "[0]");
    assert_eq!(shape_of(&b, "bgb"), "[1]");
    assert_eq!(shape_of(&b, "bgb:1"), "[2]");
    assert_eq!(shape_of(&b, "sum"), "[]");
    let g = b.build();
    let info = crate::infer::infer(&g).unwrap();
    let v = |n: &str, p| info.value(crate::Output { node: g.find(n).unwrap(), port: p }).map(<[Dim]>::to_vec);
    assert_eq!(v("bgb", 0), Some(vec![Some(1)]));
    assert_eq!(v("bgb", 1), Some(vec![Some(0), Some(1)]));
    assert_eq!(v("sx", 0), Some(vec![None, Some(10)]));
    // reduced_shape: DynamicStitch([range(rank), axes], [shape, fill(1)]).
    b.const_i32("r0", &[], &[0]).const_i32("r2", &[], &[2]).const_i32("r1", &[], &[1]).const_i32("axes", &[1], &[1]);
    b.node("rng", "Range", &["r0", "r2", "r1"], &[("Tidx", ty(Int32))]);
    b.const_i32("ones", &[1], &[1]);
    b.node("stitch", "DynamicStitch", &["rng", "axes", "sx", "ones"], &[("T", ty(Int32)), ("N", AttrValue::I(2))]);
    b.node("kept", "Reshape", &["grad", "stitch"], &[("T", ty(Float32)), ("Tshape", ty(Int32))]);
    b.node("q", "FloorDiv", &["sx", "stitch"], &[("T", ty(Int32))]);
    b.node("tiled", "Tile", &["kept", "q"], &[("T", ty(Float32)), ("Tmultiples", ty(Int32))]);
    assert_eq!(shape_of(&b, "stitch"), "[2]");
    assert_eq!(shape_of(&b, "kept"), "[?,1]");
    assert_eq!(shape_of(&b, "tiled"), "[?,10]");
}

#[test]
fn softmax_cross_entropy() {
    let mut b = Builder::new();
    b.input("logits", Float32, Some(&[-1, 10])).input("labels", Float32, Some(&[-1, 10]));
    b.input("ids", Int64, Some(&[-1]));
    b.node("xe", "SoftmaxCrossEntropyWithLogits", &["logits", "labels"], &[("T", ty(Float32))]);
    b.node(
        "sxe",
        "SparseSoftmaxCrossEntropyWithLogits",
        &["logits", "ids"],
        &[("T", ty(Float32)), ("Tlabels", ty(Int64))],
    );
    b.node("sm", "Softmax", &["logits"], &[("T", ty(Float32))]);
    assert_eq!(shape_of(&b, "xe:0"), "[?]");
    assert_eq!(shape_of(&b, "xe:1"), "[?,10]");
    assert_eq!(shape_of(&b, "sxe:1"), "[?,10]");
    assert_eq!(shape_of(&b, "sm"), "[?,10]");
}

#[test]
fn placeholder_shapes() {
    let mut b = Builder::new();
    b.input("u", Float32, None).const_f32("d", &[3], &[0.0; 3]);
    b.node("pwd", "PlaceholderWithDefault", &["d"], &[("dtype", ty(Float32)), ("shape", shape(&[-1]))]);
    assert_eq!(shape_of(&b, "u"), "[*]");
    assert_eq!(shape_of(&b, "pwd"), "[?]");
    b.node("bad", "PlaceholderWithDefault", &["d"], &[("dtype", ty(Float32)), ("shape", shape(&[2]))]);
    assert!(shape_of(&b, "bad").contains("not compatible"));
}

#[test]
fn comparisons_may_tolerate_incompatible_shapes() {
    let mut b = Builder::new();
    b.input("x", Float32, Some(&[2])).input("y", Float32, Some(&[3]));
    b.node("eq", "Equal", &["x", "y"], &[("T", ty(Float32)), ("incompatible_shape_error", AttrValue::B(false))]);
    assert_eq!(shape_of(&b, "eq"), "[*]");
    b.node("ne", "NotEqual", &["x", "y"], &[("T", ty(Float32))]);
    assert!(shape_of(&b, "ne").contains("incompatible shapes"));
}

#[test]
fn random_ops_take_their_shape_operand() {
    let mut b = Builder::new();
    b.const_i32("dims", &[2], &[784, 10]);
    b.node("u", "RandomUniform", &["dims"], &[("dtype", ty(Float32)), ("T", ty(Int32))]);
    assert_eq!(shape_of(&b, "u"), "[784,10]");
    assert!(lookup("RandomUniform").unwrap().is_stateful);
}

#[test]
fn reference_types_feed_their_base_type() {
    let mut b = Builder::new();
    let float_ref = crate::DType::Ref(crate::RefBase(1));
    b.input("v", float_ref, Some(&[2])).input("x", Float32, Some(&[2]));
    b.node("add", "AddV2", &["v", "x"], &[("T", ty(Float32))]);
    assert_eq!(shape_of(&b, "add"), "[2]");
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn dim() -> impl Strategy<Value = Dim> {
        prop_oneof![Just(None), Just(Some(1)), Just(Some(2)), Just(Some(3))]
    }
    fn shape() -> impl Strategy<Value = Shape> {
        prop_oneof![
            1 => Just(Shape::unknown()),
            6 => proptest::collection::vec(dim(), 0..4).prop_map(Shape::with_dims),
        ]
    }

    proptest! {
        #[test]
        fn broadcasting_is_symmetric_and_absorbing(a in shape(), b in shape()) {
            let ab = broadcast_shapes(&a, &b);
            let ba = broadcast_shapes(&b, &a);
            prop_assert_eq!(ab.is_ok(), ba.is_ok());
            if let (Ok(ab), Ok(ba)) = (ab, ba) {
                prop_assert_eq!(&ab, &ba);
                // Broadcasting the result with either operand changes nothing known.
                let again = broadcast_shapes(&ab, &a).unwrap();
                prop_assert!(merge_shapes(&again, &ab).is_ok());
                if let (Some(r), Some(x), Some(y)) = (ab.rank(), a.rank(), b.rank()) {
                    prop_assert_eq!(r, x.max(y));
                }
            }
        }

        #[test]
        fn strided_slice_sizes_match_enumeration(
            len in 0i64..8, begin in -10i64..10, end in -10i64..10,
            stride in prop_oneof![-3i64..0, 1i64..4], bm in any::<bool>(), em in any::<bool>(),
        ) {
            let sp = SliceSpec {
                begin_mask: i64::from(bm),
                end_mask: i64::from(em),
                ..spec(&[begin], &[end], &[stride])
            };
            let out = strided_slice(&[Some(len)], &sp).unwrap();
            // Enumerate Python's slice semantics index by index.
            let norm = |x: i64| if x < 0 { x + len } else { x };
            let (lo, hi) = if stride > 0 { (0, len) } else { (-1, len - 1) };
            let b0 = if bm { if stride > 0 { 0 } else { len - 1 } } else { norm(begin).clamp(lo, hi) };
            let e0 = if em { if stride > 0 { len } else { -1 } } else { norm(end).clamp(lo, hi) };
            let mut taken = 0;
            let mut i = b0;
            while (stride > 0 && i < e0) || (stride < 0 && i > e0) {
                prop_assert!((0..len).contains(&i));
                taken += 1;
                i += stride;
            }
            prop_assert_eq!(out.shape, vec![Some(taken)]);
        }
    }
}

/// `ExtractImagePatches` with VALID padding and a window wider than the input gives no patch
/// (TensorFlow's and the kernel's 0, not the 1 that truncating `(n - eff) / s + 1` gave), and
/// the usual count otherwise.
#[test]
fn extract_image_patches_valid_window_wider_than_the_input() {
    let mut b = Builder::new();
    b.input("x", Float32, Some(&[1, 3, 7, 2]));
    let attrs = |k: i64| {
        vec![
            ("T", ty(Float32)),
            ("ksizes", list(&[1, k, k, 1])),
            ("strides", list(&[1, 2, 2, 1])),
            ("rates", list(&[1, 1, 1, 1])),
            ("padding", AttrValue::S("VALID".into())),
        ]
    };
    b.node("wide", "ExtractImagePatches", &["x"], &attrs(4));
    b.node("fits", "ExtractImagePatches", &["x"], &attrs(3));
    assert_eq!(shape_of(&b, "wide"), "[1,0,2,32]");
    assert_eq!(shape_of(&b, "fits"), "[1,1,3,18]");
}

/// `BandedTriangularSolve` broadcasts the batch dimensions and takes `M` from either operand;
/// `TridiagonalMatMul` is the rhs's shape with the diagonals' batch and `M` merged in.
/// TensorFlow 2.21's shape functions give `bts` and `m_from_bands` the same shapes and refuse
/// both bad nodes too; for `tmm` they infer only `[?,?,3]` (ours is the refinement).
#[test]
fn banded_solve_and_tridiagonal_matmul_shapes() {
    let mut b = Builder::new();
    b.input("bands", Float32, Some(&[2, 1, 3, 4]))
        .input("rhs", Float32, Some(&[5, 4, 2]))
        .input("bands_m", Float32, Some(&[3, -1]))
        .input("rhs_m", Float32, Some(&[-1, 2]))
        .input("d", Float32, Some(&[2, 1, -1]))
        .input("d4", Float32, Some(&[-1, 1, 4]))
        .input("x", Float32, Some(&[-1, -1, 3]))
        .input("d2", Float32, Some(&[2, 2, 4]));
    let f = [("T", ty(Float32))];
    b.node("bts", "BandedTriangularSolve", &["bands", "rhs"], &f);
    b.node("m_from_bands", "BandedTriangularSolve", &["bands_m", "rhs_m"], &f);
    b.node("tmm", "TridiagonalMatMul", &["d", "d4", "d", "x"], &f);
    assert_eq!(shape_of(&b, "bts"), "[2,5,4,2]");
    assert_eq!(shape_of(&b, "m_from_bands"), "[?,2]");
    assert_eq!(shape_of(&b, "tmm"), "[2,4,3]");
    let mut bad = Builder::new();
    bad.input("bands", Float32, Some(&[2, 1, 3, 4])).input("bad_rhs", Float32, Some(&[5, 2]));
    bad.node("bad", "BandedTriangularSolve", &["bands", "bad_rhs"], &f);
    let e = shape_of(&bad, "bad");
    assert!(e.contains("node 'bad'") && e.contains("different M"), "{e}");
    b.node("rows", "TridiagonalMatMul", &["d2", "d4", "d4", "x"], &f);
    let e = shape_of(&b, "rows");
    assert!(e.contains("node 'rows'") && e.contains("superdiag must have shape [..., 1, M]"), "{e}");
}
