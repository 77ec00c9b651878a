//! Hostile sizes (issue 13): a body whose compile-time shapes are past the tensor budget
//! (`autoclust_graph::limits`) or past 64 bits is declined with a `CompileError` naming the
//! node — so the interpreter runs it and its kernel reports the error — never a panic, an
//! abort on a failed allocation, or a tensor whose element count wrapped.
use crate::common::*;
use autoclust_compiler::CompileError;
use autoclust_graph::{DType, Tensor};

fn i64s(name: &str, v: &[i64]) -> autoclust_graph::RawNode {
    konst(name, Tensor::from_i64(vec![v.len()], v.to_vec()).unwrap())
}

/// Compiles `nodes` (+ a `_Retval` of `out`) for one f32 input `x` of shape `[2, 3]`.
fn compile(nodes: Vec<autoclust_graph::RawNode>, out: &str) -> Result<(), CompileError> {
    compile_for(nodes, out, &[2, 3])
}

fn compile_for(nodes: Vec<autoclust_graph::RawNode>, out: &str, x: &[usize]) -> Result<(), CompileError> {
    let mut nodes = nodes;
    nodes.insert(0, arg("x", 0, DType::Float32));
    nodes.push(ret("r", out, 0));
    compiler().compile(&graph(nodes), &[(DType::Float32, x.to_vec())]).map(drop)
}

fn declined(r: Result<(), CompileError>, node: &str, what: &str) {
    match r {
        Err(CompileError::Unsupported { node: n, reason, .. }) => {
            assert_eq!(n, node, "{reason}");
            assert!(reason.contains(what), "{reason}");
        }
        other => panic!("expected a decline naming '{node}', got {other:?}"),
    }
}

#[test]
fn huge_fill_is_declined_before_folding() {
    let half = konst("half", Tensor::scalar_f32(0.5));
    // A constant fill value would be folded into a 4 TB constant.
    let r =
        compile(vec![i64s("d", &[1_000_000, 1_000_000]), half.clone(), node("f", "Fill", &["d", "half"], vec![])], "f");
    declined(r, "f", "--max-tensor-bytes");
    // 2^62 * 4 wraps to 0 elements in 64 bits.
    let r = compile(vec![i64s("d", &[1 << 62, 4, 1]), half.clone(), node("f", "Fill", &["d", "half"], vec![])], "f");
    declined(r, "f", "more elements than can be counted");
    // Negative dims are the interpreter's to report.
    let r = compile(vec![i64s("d", &[-1, 2]), half, node("f", "Fill", &["d", "half"], vec![])], "f");
    declined(r, "f", "negative");
}

#[test]
fn huge_tile_broadcast_and_reshape_are_declined() {
    let r = compile(vec![i64s("m", &[1_000_000, 1_000_000]), node("t", "Tile", &["x", "m"], vec![])], "t");
    declined(r, "t", "--max-tensor-bytes");
    let r = compile(vec![i64s("m", &[1, i64::MAX]), node("t", "Tile", &["x", "m"], vec![])], "t");
    declined(r, "t", "overflow");
    let r = compile(vec![i64s("s", &[1 << 40, 2, 3]), node("b", "BroadcastTo", &["x", "s"], vec![])], "b");
    declined(r, "b", "--max-tensor-bytes");
    // An empty input reshaped to dims whose product wraps to 0 in 64 bits.
    let r = compile_for(vec![i64s("s", &[1 << 62, 4, 1]), node("y", "Reshape", &["x", "s"], vec![])], "y", &[0, 3]);
    assert!(matches!(r, Err(CompileError::Invalid(_))), "{r:?}");
}
