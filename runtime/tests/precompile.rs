//! Compiling ahead (issue 19): the clusters of an encapsulated graph compile before the first
//! step — a snapshot's outputs are typed from its variables' handles and a cluster call's from
//! the `_output_shapes` encapsulation records — so the step itself compiles nothing.

use std::sync::Arc;

use autoclust_graph::{text, Tensor};
use autoclust_runtime::{RunRequest, Session, SessionOptions};

/// Two clusters: the second takes the first's output, and writes the variable back.
const TWO_CLUSTERS: &str = r#"
x = VarHandleOp() {container = "", dtype = float32, shape = shape[8], shared_name = "x"}
snap = _AutoclustSnapshot(x) {dtypes = [float32]}
c1 = first_fn(snap) {_output_shapes = [shape[8]]}
c2 = second_fn(c1) {_output_shapes = [shape[8]]}
wb = _AutoclustWriteBack(x, c2) {dtypes = [float32]}
function first_fn(x_0: float32) -> (y: float32) {
  n = Neg(x_0) {T = float32}
  return y = n:0
}
function second_fn(y: float32) -> (x_1: float32) {
  t = Tanh(y) {T = float32}
  return x_1 = t:0
}
"#;

fn session(graph: &str) -> Session {
    let graph = text::parse(graph).unwrap_or_else(|e| panic!("{e}"));
    let s = Session::new(Arc::new(graph), SessionOptions { threads: 1, schedule_seed: None, ..Default::default() });
    s.set_variable("x", Tensor::from_f32(vec![8], (0..8).map(|i| i as f32 / 4.0).collect()).unwrap()).unwrap();
    s
}

fn step(s: &Session) -> Vec<f32> {
    s.run(&RunRequest { feeds: vec![], fetches: vec![], targets: vec![s.node("wb").unwrap()] }).unwrap();
    s.variable_store().find_by_name("x").unwrap().read().unwrap().as_f32().unwrap().to_vec()
}

#[test]
fn every_cluster_compiles_before_the_first_step() {
    let s = session(TWO_CLUSTERS);
    assert_eq!(s.jit().precompile(s.graph(), 2), 2);
    assert_eq!(s.jit().compile_count(), 2);
    let x = step(&s);
    assert_eq!(s.jit().compile_count(), 2, "the step found both clusters compiled");
    let want: Vec<f32> = (0..8).map(|i| (-(i as f32 / 4.0)).tanh()).collect();
    for (a, b) in x.iter().zip(&want) {
        assert!((a - b).abs() < 1e-6, "{x:?} != {want:?}");
    }
}

#[test]
fn a_call_of_unknown_output_shape_leaves_the_next_cluster_to_its_first_call() {
    let s = session(&TWO_CLUSTERS.replace("c1 = first_fn(snap) {_output_shapes = [shape[8]]}", "c1 = first_fn(snap)"));
    assert_eq!(s.jit().precompile(s.graph(), 1), 1);
    step(&s);
    assert_eq!(s.jit().compile_count(), 2, "the second cluster compiled at its call");
}
