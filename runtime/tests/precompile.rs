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
    assert_eq!(s.jit().precompile(s.graph(), 2, &Default::default()), 2);
    assert_eq!(s.jit().compile_count(), 2);
    let x = step(&s);
    assert_eq!(s.jit().compile_count(), 2, "the step found both clusters compiled");
    let want: Vec<f32> = (0..8).map(|i| (-(i as f32 / 4.0)).tanh()).collect();
    for (a, b) in x.iter().zip(&want) {
        assert!((a - b).abs() < 1e-6, "{x:?} != {want:?}");
    }
}

#[test]
fn a_cluster_fed_by_another_compiles_ahead_from_the_types_of_the_first_ones_body() {
    // No `_output_shapes` on the first call: its result's shape is inferred from its body.
    let s = session(&TWO_CLUSTERS.replace("c1 = first_fn(snap) {_output_shapes = [shape[8]]}", "c1 = first_fn(snap)"));
    assert_eq!(s.jit().precompile(s.graph(), 1, &Default::default()), 2);
    step(&s);
    assert_eq!(s.jit().compile_count(), 2, "the step compiled nothing");
}

/// A TensorFlow 2 step: the variable is a shapeless resource placeholder, the batch `-1`.
const CAPTURED: &str = r#"
v = Placeholder() {dtype = resource, shape = shape[]}
p = Placeholder() {dtype = float32, shape = shape[?, 4]}
snap = _AutoclustSnapshot(v) {dtypes = [float32]}
c1 = first_fn(snap, p)
c2 = second_fn(c1)
wb = _AutoclustWriteBack(v, c2) {dtypes = [float32]}
r = ReadVariableOp(v) {dtype = float32}
function first_fn(w: float32, x: float32) -> (y: float32) {
  m = MatMul(x, w) {T = float32, transpose_a = false, transpose_b = false}
  s = Sum(m:0, axis:0) {T = float32, Tidx = int32, keep_dims = false}
  axis = Const() {dtype = int32, value = int32[]{0}}
  n = Neg(w) {T = float32}
  a = AddV2(n:0, s:0) {T = float32}
  return y = a:0
}
function second_fn(y: float32) -> (w2: float32) {
  t = Tanh(y) {T = float32}
  return w2 = t:0
}
"#;

#[test]
fn fed_shapes_and_variables_values_give_a_captured_variables_clusters_their_signatures() {
    let graph = text::parse(CAPTURED).unwrap_or_else(|e| panic!("{e}"));
    let s = Session::new(Arc::new(graph), SessionOptions { threads: 1, schedule_seed: None, ..Default::default() });
    s.set_variable("v", Tensor::from_f32(vec![4, 3], (0..12).map(|i| i as f32 / 8.0).collect()).unwrap()).unwrap();
    let x = Tensor::from_f32(vec![2, 4], (0..8).map(|i| i as f32 - 3.0).collect()).unwrap();
    let feeds = vec![(s.output("p").unwrap(), x)];
    assert_eq!(s.jit().precompile(s.graph(), 1, &Default::default()), 0, "nothing is static in the graph itself");
    assert_eq!(s.jit().precompile(s.graph(), 2, &s.seeds(&feeds)), 2);
    let request = RunRequest { feeds, fetches: vec![], targets: vec![s.node("wb").unwrap()] };
    s.run(&request).unwrap();
    assert_eq!(s.jit().compile_count(), 2, "the step found both clusters compiled");
    let w = s.variable_store().find_by_name("v").unwrap().read().unwrap();
    assert_eq!(w.shape, vec![4, 3]);
    // w' = tanh(-w + colsum(x·w)), against the same arithmetic in f64.
    let w0: Vec<f64> = (0..12).map(|i| i as f64 / 8.0).collect();
    let x0: Vec<f64> = (0..8).map(|i| i as f64 - 3.0).collect();
    for j in 0..3 {
        let colsum: f64 = (0..2).map(|b| (0..4).map(|k| x0[b * 4 + k] * w0[k * 3 + j]).sum::<f64>()).sum();
        for k in 0..4 {
            let want = (-w0[k * 3 + j] + colsum).tanh();
            let got = w.as_f32().unwrap()[k * 3 + j] as f64;
            assert!((got - want).abs() < 1e-5, "w[{k},{j}] = {got}, want {want}");
        }
    }
}

#[test]
fn a_call_of_unknown_output_shape_leaves_the_next_cluster_to_its_first_call() {
    // The first body's result has a shape only its values give (`Unique`).
    let s = session(
        &TWO_CLUSTERS
            .replace("c1 = first_fn(snap) {_output_shapes = [shape[8]]}", "c1 = first_fn(snap)")
            .replace("n = Neg(x_0) {T = float32}", "n = Unique(x_0) {T = float32, out_idx = int32}"),
    );
    assert_eq!(s.jit().precompile(s.graph(), 1, &Default::default()), 1);
    step(&s);
    assert_eq!(s.jit().compile_count(), 2, "the second cluster compiled at its call");
}
