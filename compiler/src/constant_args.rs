//! Which arguments of a body must be known when it is compiled (XLA's
//! "compile-time constant inputs", its backwards constant analysis).
//!
//! Some operands fix the *shape* of a result, not its values: a `Reshape`'s
//! shape, a reduction's axes, a `Transpose`'s permutation, `Fill`'s dims,
//! `Range`'s bounds, … The compiler lowers code for fixed shapes, so these
//! operands must be compile-time constants. Inside a cluster they usually
//! are (constants, `Shape` of an input, integer arithmetic on those), but in
//! TensorFlow 2 gradient graphs they are often computed *outside* the
//! cluster — by a `Range` over a rank, a `Shape` of a loop output, an
//! `InvertPermutation` — and reach the body as an `_Arg`.
//!
//! [`constant_args`] walks backwards from every such operand through the
//! integer arithmetic that computes it (any op but `Shape`/`Size`/`Rank`/
//! `ShapeN`, whose outputs depend only on shapes, which the compiler always
//! knows) and returns the `_Arg` indices it reaches. The runtime compiles a
//! body with those arguments' *values* baked in and makes the values part of
//! the compile-cache key, as XLA does: a new value means a new compile, the
//! same value reuses the code.
//!
//! Soundness: the compiled function is only ever called with the argument
//! values it was compiled for (the cache key and the call site both compare
//! them), so treating them as constants changes nothing observable.

use autoclust_graph::{AttrValue, DType, Graph};

/// Largest constant argument baked into a compile (elements); bigger ones
/// stay run-time values (and the compile declines if it needed them).
pub const MAX_CONSTANT_ARG_ELEMENTS: usize = 64;

/// The operand slots of `op` that fix a result's shape (must be constants).
fn shape_operands(op: &str, inputs: usize) -> Vec<usize> {
    match op {
        "Reshape" | "Tile" | "BroadcastTo" | "ExpandDims" | "Transpose" | "Sum" | "Mean" | "Max" | "Min" | "Prod"
        | "All" | "Any" | "ArgMax" | "ArgMin" | "EuclideanNorm" | "Cumsum" | "Cumprod" | "ReverseV2" => vec![1],
        "Fill" | "InvertPermutation" | "Empty" => vec![0],
        "Conv2DBackpropInput" | "DepthwiseConv2dNativeBackpropInput" | "AvgPoolGrad" => vec![0],
        "Conv2DBackpropFilter" | "DepthwiseConv2dNativeBackpropFilter" => vec![1],
        "Range" | "BroadcastGradientArgs" | "BroadcastArgs" => (0..inputs).collect(),
        "Slice" => vec![1, 2],
        "StridedSlice" => vec![1, 2, 3],
        "StridedSliceGrad" => vec![0, 1, 2, 3],
        "ConcatV2" if inputs > 0 => vec![inputs - 1],
        "GatherV2" => vec![2],
        "Split" => vec![0],
        "SplitV" => vec![1, 2],
        "Pad" | "PadV2" | "MirrorPad" => vec![1],
        "SpaceToBatchND" | "BatchToSpaceND" => vec![1, 2],
        "InTopKV2" => vec![2],
        "ResizeBilinear" | "ResizeNearestNeighbor" | "ResizeNearestNeighborGrad" => vec![1],
        "OneHot" => vec![1],
        "UnsortedSegmentSum" | "UnsortedSegmentMax" | "UnsortedSegmentMin" | "UnsortedSegmentProd" => vec![2],
        "ScatterNd" => vec![2],
        // A TensorList's length and element shape fix the shape of what is read or stacked
        // from it (`crate::lists`): `tf.scan`/`tf.map_fn` reserve their output list to a
        // sequence length another cluster computed.
        "TensorListReserve" => vec![0, 1],
        "EmptyTensorList" | "TensorListFromTensor" | "TensorListPopBack" | "TensorListStack" => {
            vec![if op == "EmptyTensorList" { 0 } else { 1 }]
        }
        "TensorListGetItem" | "TensorListGather" => vec![2],
        op if autoclust_graph::jit_ops::is_stateless_sampler(op) => vec![0],
        // The host-step ops' shape operands (`jit_ops::HOST_COMPUTE_OPS`).
        op => autoclust_graph::jit_ops::host_shape_operands(op).map(<[usize]>::to_vec).unwrap_or_default(),
    }
}

/// The operands of a functional `While`/`If`/`Case` whose values the functions it calls need
/// at compile time (`Range` bounds in a loop body, say): the compiler
/// (`crate::control_flow`) compiles a branch with its compile-time operands fixed — argument
/// `i` is operand `i + 1`, after the predicate or index — and a loop's condition and body
/// with those of its loop-invariant operands (passed through unchanged) fixed. So such an
/// operand computed outside the cluster is baked in like any shape operand.
fn control_flow_operands(body: &Graph, node: &autoclust_graph::Node, depth: usize) -> Vec<usize> {
    let Some(depth) = depth.checked_sub(1) else { return Vec::new() };
    let instantiate = |name: &str| {
        let f = body.library.function(name)?;
        autoclust_graph::function::instantiate(f, &body.library).ok()
    };
    let func = |attr: &str| node.attr(attr).and_then(AttrValue::as_func).filter(|f| f.attrs.is_empty());
    let mut slots = Vec::new();
    if matches!(node.op.as_str(), "While" | "StatelessWhile") {
        let (Some(cond), Some(loop_body)) = (func("cond"), func("body")) else { return slots };
        let Some(loop_body) = instantiate(&loop_body.name) else { return slots };
        let invariant = crate::control_flow::passed_through(&loop_body, node.inputs.len());
        slots.extend(constant_args_within(&loop_body, depth));
        if let Some(cond) = instantiate(&cond.name) {
            slots.extend(constant_args_within(&cond, depth));
        }
        slots.retain(|&i| invariant.get(i).copied().unwrap_or(false));
    } else {
        let branches: Vec<&autoclust_graph::FuncAttr> = match node.attr("branches") {
            Some(AttrValue::List(autoclust_graph::ListValue::Func(fs))) => fs.iter().collect(),
            _ => ["then_branch", "else_branch"].into_iter().filter_map(func).collect(),
        };
        for b in branches.into_iter().filter(|f| f.attrs.is_empty()) {
            if let Some(g) = instantiate(&b.name) {
                slots.extend(constant_args_within(&g, depth).into_iter().map(|i| i + 1));
            }
        }
    }
    slots.sort_unstable();
    slots.dedup();
    slots
}

/// Whether the size operand of `Slice` node `n` is a constant with no `-1` ("to the end",
/// which depends on the start).
fn known_size(body: &Graph, n: &autoclust_graph::Node) -> bool {
    let Some(size) = n.inputs.get(2).map(|o| body.node(o.node)) else { return false };
    size.op == "Const"
        && size
            .attr("value")
            .and_then(AttrValue::tensor_value)
            .and_then(Result::ok)
            .and_then(|t| t.to_i64_vec())
            .is_some_and(|v| autoclust_graph::jit_ops::dynamic_slice::slice_size_fixed(&v))
}

/// Whether `StridedSlice` node `n` is one the compiler runs with run-time `begin`/`end`
/// (`crate::host::analyze_dynamic_slice`): constant strides, every sliced dimension
/// indexed, of known bounds or of a fixed extent ([`crate::host::strided_slice_bounds`]).
fn runs_with_run_time_bounds(body: &Graph, n: &autoclust_graph::Node) -> bool {
    let Some(strides) = n.inputs.get(3).map(|o| body.node(o.node)) else { return false };
    let strides = (strides.op == "Const").then(|| strides.attr("value")?.tensor_value()?.ok()?.to_i64_vec()).flatten();
    strides.is_some_and(|s| {
        autoclust_graph::jit_ops::dynamic_slice::strided_slice_runs(
            &n.attrs,
            &s,
            &crate::host::strided_slice_bounds(body, n),
        )
    })
}

/// Ops whose outputs depend only on their inputs' shapes: the walk stops there.
fn shape_only(op: &str) -> bool {
    matches!(op, "Shape" | "Size" | "Rank" | "ShapeN" | "ZerosLike" | "OnesLike")
}

/// The indices of the `_Arg` nodes whose values must be compile-time
/// constants (module doc), sorted. Arguments typed other than int32/int64
/// are never listed.
pub fn constant_args(body: &Graph) -> Vec<usize> {
    constant_args_within(body, CONTROL_FLOW_DEPTH)
}

/// How deep [`constant_args`] follows functional control flow into the functions it calls
/// (a recursive library stops there: its deeper operands stay run-time values, and a body
/// that needed them declines, which the runtime reports).
const CONTROL_FLOW_DEPTH: usize = 8;

fn constant_args_within(body: &Graph, depth: usize) -> Vec<usize> {
    let mut needed = vec![false; body.len()];
    let mut stack = Vec::new();
    for id in body.node_ids() {
        let n = body.node(id);
        let slots = match n.op.as_str() {
            "While" | "StatelessWhile" | "If" | "StatelessIf" | "Case" | "StatelessCase" => {
                control_flow_operands(body, n, depth)
            }
            // A `Slice` of a constant size whatever its start (no `-1`) runs with a run-time
            // start (the compiler's dynamic slice, XLA's `DynamicSlice`): its start need
            // not be known, so a start drawn each step (`tf.image.random_crop`) compiles once.
            "Slice" if known_size(body, n) => vec![2],
            // So does a `StridedSlice` whose run-time bounds are a fixed extent apart (Keras'
            // `RandomCrop`) or index or take whole what they slice: only its strides.
            "StridedSlice" if runs_with_run_time_bounds(body, n) => vec![3],
            op => shape_operands(op, n.inputs.len()),
        };
        for slot in slots {
            if let Some(o) = n.inputs.get(slot) {
                stack.push(o.node);
            }
        }
    }
    let mut args = Vec::new();
    while let Some(id) = stack.pop() {
        if std::mem::replace(&mut needed[id.index()], true) {
            continue;
        }
        let n = body.node(id);
        if n.op == "_Arg" {
            // Without a `T` the caller decides from the value it passes.
            let integer = matches!(n.attr("T").and_then(AttrValue::as_type), None | Some(DType::Int32 | DType::Int64));
            if let (true, Some(i)) = (integer, n.attr("index").and_then(AttrValue::as_int)) {
                args.push(i as usize);
            }
            continue;
        }
        if shape_only(&n.op) {
            continue;
        }
        stack.extend(n.inputs.iter().map(|o| o.node));
    }
    args.sort_unstable();
    args.dedup();
    args
}

#[cfg(test)]
mod tests {

    /// Every host-step op's shape operands are compile-time arguments (else a `TopKV2` whose
    /// `k` another cluster computed would send its cluster to the interpreter).
    #[test]
    fn host_step_shape_operands_are_constant_args() {
        for (op, operands) in autoclust_graph::jit_ops::HOST_COMPUTE_OPS {
            let listed = super::shape_operands(op, 8);
            for k in *operands {
                assert!(listed.contains(k), "{op}: operand {k} fixes a shape but is not a constant argument");
            }
        }
    }

    use super::*;

    fn body(src: &str) -> Graph {
        autoclust_graph::text::parse(src).unwrap()
    }

    #[test]
    fn reaches_arguments_through_integer_arithmetic_not_through_shape() {
        let g = body(
            r#"
x = _Arg() {T = float32, index = 0}
r = _Arg() {T = int32, index = 1}
k = _Arg() {T = int32, index = 2}
data = _Arg() {T = int32, index = 3}
one = Const() {dtype = int32, value = int32[]{1}}
rk = AddV2(r, one) {T = int32}
m = Max(x, rk) {T = float32, Tidx = int32}
s = Shape(x) {T = float32, out_type = int32}
t = Reshape(m, s) {T = float32, Tshape = int32}
d = Mul(data, k) {T = int32}
o = _Retval(t) {T = float32, index = 0}
p = _Retval(d) {T = int32, index = 1}
"#,
        );
        // r feeds the axes through AddV2; x only through Shape; k and data are data.
        assert_eq!(constant_args(&g), [1]);
    }

    /// `tf.map_fn`'s output list reserved to a length another cluster computed: the length
    /// must be known for the stacked result's shape.
    #[test]
    fn a_list_length_argument_is_baked() {
        let g = body(
            r#"
n = _Arg() {T = int32, index = 0}
shape = Const() {dtype = int32, value = int32[0]{}}
l = TensorListReserve(shape, n) {element_dtype = float32, shape_type = int32}
s = TensorListStack(l, shape) {element_dtype = float32, num_elements = -1}
o = _Retval(s) {T = float32, index = 0}
"#,
        );
        assert_eq!(constant_args(&g), [0]);
    }

    /// A `Range` in a loop body on a loop-invariant operand (non_max_suppression_padded's
    /// tile count) bakes the cluster argument that operand comes from; one on a value the body
    /// changes does not (the compiler could not fix it anyway).
    #[test]
    fn a_loop_invariant_range_bound_is_baked() {
        let g = body(
            r#"
n = _Arg() {T = int32, index = 0}
m = _Arg() {T = int32, index = 1}
zero = Const() {dtype = int32, value = int32[]{0}}
loop = StatelessWhile(zero, n, m) {T = [int32, int32, int32], cond = @cond, body = @body}
o = _Retval(loop:0) {T = int32, index = 0}
function cond(i: int32, n: int32, m: int32) -> (c: bool) {
  three = Const() {dtype = int32, value = int32[]{3}}
  l = Less(i, three:output:0) {T = int32}
  return c = l:z:0
}
function body(i: int32, n: int32, m: int32) -> (i2: int32, n2: int32, m2: int32) {
  zero = Const() {dtype = int32, value = int32[]{0}}
  one = Const() {dtype = int32, value = int32[]{1}}
  r = Range(zero:output:0, n, one:output:0) {Tidx = int32}
  s = Range(zero:output:0, m, one:output:0) {Tidx = int32}
  next = AddV2(i, one:output:0) {T = int32}
  m2 = AddV2(m, one:output:0) {T = int32}
  return i2 = next:z:0
  return n2 = n
  return m2 = m2:z:0
}
"#,
        );
        assert_eq!(constant_args(&g), [0]);
    }

    #[test]
    fn float_arguments_are_never_baked() {
        let g = body(
            r#"
x = _Arg() {T = float32, index = 0}
c = Cast(x) {SrcT = float32, DstT = int32}
y = _Arg() {T = float32, index = 1}
f = Fill(c, y) {T = float32, index_type = int32}
o = _Retval(f) {T = float32, index = 0}
"#,
        );
        assert!(constant_args(&g).is_empty());
    }
}
