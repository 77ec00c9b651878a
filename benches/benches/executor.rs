//! Plain-executor benchmarks (issue 3): per-op overhead on a 10,000-node
//! graph of scalar ops, a 32-op elementwise chain on 1,000,000 float32, and
//! the 784-256-10 MLP training step (batch 64, ResourceApplyGradientDescent).
//! Graphs are built in Rust so the benchmark does not depend on a parser.
//! Each runs deterministically on one thread (`threads1`) and on the
//! machine's cores (`parallel`).

use std::sync::Arc;

use autoclust_graph::{AttrValue, Attrs, DType, Graph, Library, RawNode, Shape, Tensor};
use autoclust_runtime::{RunRequest, Session, SessionOptions};
use divan::Bencher;

fn main() {
    divan::main();
}

fn n(name: &str, op: &str, inputs: &[&str], attrs: &[(&str, AttrValue)]) -> RawNode {
    RawNode {
        name: name.into(),
        op: op.into(),
        inputs: inputs.iter().map(|s| s.to_string()).collect(),
        attrs: attrs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect::<Attrs>(),
        device: String::new(),
        span: None,
    }
}

fn konst(name: &str, t: Tensor) -> RawNode {
    n(name, "Const", &[], &[("dtype", AttrValue::Type(t.dtype)), ("value", AttrValue::Tensor(t))])
}

fn session(nodes: Vec<RawNode>, threads: usize) -> Session {
    Session::new(
        Arc::new(Graph::from_raw(nodes, Library::default(), None).unwrap()),
        SessionOptions { threads, schedule_seed: None, ..Default::default() },
    )
}

const THREADS: [usize; 2] = [1, 0];

/// 10,000 scalar AddV2s in a chain; time per run / 10,000 = per-op overhead.
#[divan::bench(args = THREADS)]
fn scalar_ops_10k(bencher: Bencher<'_, '_>, threads: usize) {
    let mut nodes = vec![konst("c", Tensor::scalar_f32(1.0))];
    let mut prev = "c".to_string();
    for i in 0..9_999 {
        let name = format!("a{i}");
        nodes.push(n(&name, "AddV2", &[&prev, "c"], &[]));
        prev = name;
    }
    let s = session(nodes, threads);
    let req = RunRequest { feeds: vec![], fetches: vec![s.output(&prev).unwrap()], targets: vec![] };
    s.run(&req).unwrap();
    bencher.counter(divan::counter::ItemsCount::new(10_000usize)).bench(|| s.run(&req).unwrap());
}

/// 32 elementwise ops (alternating Mul and Add by scalars) on 1,000,000 float32.
#[divan::bench(args = THREADS)]
fn elementwise_chain_32_1m(bencher: Bencher<'_, '_>, threads: usize) {
    let mut nodes = vec![
        n(
            "x",
            "Placeholder",
            &[],
            &[("dtype", AttrValue::Type(DType::Float32)), ("shape", AttrValue::Shape(Shape::known(&[1_000_000])))],
        ),
        konst("m", Tensor::scalar_f32(1.0001)),
        konst("a", Tensor::scalar_f32(0.5)),
    ];
    let mut prev = "x".to_string();
    for i in 0..32 {
        let name = format!("e{i}");
        if i % 2 == 0 {
            nodes.push(n(&name, "Mul", &[&prev, "m"], &[]));
        } else {
            nodes.push(n(&name, "AddV2", &[&prev, "a"], &[]));
        }
        prev = name;
    }
    let s = session(nodes, threads);
    let x = Tensor::from_f32(vec![1_000_000], (0..1_000_000).map(|i| (i % 97) as f32).collect()).unwrap();
    let req = RunRequest {
        feeds: vec![(s.output("x").unwrap(), x)],
        fetches: vec![s.output(&prev).unwrap()],
        targets: vec![],
    };
    s.run(&req).unwrap();
    bencher.bench(|| s.run(&req).unwrap());
}

fn var(name: &str, shape: &[usize]) -> RawNode {
    n(
        name,
        "VarHandleOp",
        &[],
        &[
            ("dtype", AttrValue::Type(DType::Float32)),
            ("shape", AttrValue::Shape(Shape::known(shape))),
            ("shared_name", AttrValue::S(name.as_bytes().to_vec())),
        ],
    )
}

/// The MLP training step 784-256-10, batch 64: forward, softmax cross
/// entropy, hand-built gradients, four ResourceApplyGradientDescent.
#[divan::bench(args = THREADS)]
fn mlp_784_256_10_step(bencher: Bencher<'_, '_>, threads: usize) {
    let f = |d: DType| ("T", AttrValue::Type(d));
    let rd = |name: &str, v: &str| n(name, "ReadVariableOp", &[v], &[("dtype", AttrValue::Type(DType::Float32))]);
    let ta = ("transpose_a", AttrValue::B(true));
    let tb = ("transpose_b", AttrValue::B(true));
    let nodes = vec![
        n(
            "x",
            "Placeholder",
            &[],
            &[("dtype", AttrValue::Type(DType::Float32)), ("shape", AttrValue::Shape(Shape::known(&[64, 784])))],
        ),
        n(
            "y",
            "Placeholder",
            &[],
            &[("dtype", AttrValue::Type(DType::Float32)), ("shape", AttrValue::Shape(Shape::known(&[64, 10])))],
        ),
        var("w1", &[784, 256]),
        var("b1", &[256]),
        var("w2", &[256, 10]),
        var("b2", &[10]),
        rd("rw1", "w1"),
        rd("rb1", "b1"),
        rd("rw2", "w2"),
        rd("rb2", "b2"),
        n("h1", "MatMul", &["x", "rw1"], &[f(DType::Float32)]),
        n("h1b", "BiasAdd", &["h1", "rb1"], &[f(DType::Float32)]),
        n("a1", "Relu", &["h1b"], &[f(DType::Float32)]),
        n("l", "MatMul", &["a1", "rw2"], &[f(DType::Float32)]),
        n("logits", "BiasAdd", &["l", "rb2"], &[f(DType::Float32)]),
        n("xent", "SoftmaxCrossEntropyWithLogits", &["logits", "y"], &[f(DType::Float32)]),
        konst("axis0", Tensor::from_i32(vec![1], vec![0]).unwrap()),
        n("loss", "Mean", &["xent", "axis0"], &[f(DType::Float32)]),
        konst("inv_batch", Tensor::scalar_f32(1.0 / 64.0)),
        n("dlogits", "Mul", &["xent:1", "inv_batch"], &[f(DType::Float32)]),
        n("gb2", "BiasAddGrad", &["dlogits"], &[f(DType::Float32)]),
        n("gw2", "MatMul", &["a1", "dlogits"], &[f(DType::Float32), ta.clone()]),
        n("da1", "MatMul", &["dlogits", "rw2"], &[f(DType::Float32), tb.clone()]),
        n("dh1", "ReluGrad", &["da1", "a1"], &[f(DType::Float32)]),
        n("gb1", "BiasAddGrad", &["dh1"], &[f(DType::Float32)]),
        n("gw1", "MatMul", &["x", "dh1"], &[f(DType::Float32), ta]),
        konst("lr", Tensor::scalar_f32(0.01)),
        n("u_w1", "ResourceApplyGradientDescent", &["w1", "lr", "gw1"], &[f(DType::Float32)]),
        n("u_b1", "ResourceApplyGradientDescent", &["b1", "lr", "gb1"], &[f(DType::Float32)]),
        n("u_w2", "ResourceApplyGradientDescent", &["w2", "lr", "gw2"], &[f(DType::Float32)]),
        n("u_b2", "ResourceApplyGradientDescent", &["b2", "lr", "gb2"], &[f(DType::Float32)]),
        n("train", "NoOp", &["^u_w1", "^u_b1", "^u_w2", "^u_b2"], &[]),
    ];
    let s = session(nodes, threads);
    let fill = |shape: Vec<usize>, k: f32| {
        let len: usize = shape.iter().product();
        Tensor::from_f32(shape, (0..len).map(|i| ((i as f32 * k).sin()) * 0.05).collect()).unwrap()
    };
    s.set_variable("w1", fill(vec![784, 256], 0.37)).unwrap();
    s.set_variable("b1", fill(vec![256], 0.11)).unwrap();
    s.set_variable("w2", fill(vec![256, 10], 0.53)).unwrap();
    s.set_variable("b2", fill(vec![10], 0.7)).unwrap();
    let x = fill(vec![64, 784], 0.013);
    let y = Tensor::from_f32(vec![64, 10], (0..640).map(|i| if i % 10 == (i / 10) % 10 { 1.0 } else { 0.0 }).collect())
        .unwrap();
    let req = RunRequest {
        feeds: vec![(s.output("x").unwrap(), x), (s.output("y").unwrap(), y)],
        fetches: vec![s.output("loss").unwrap()],
        targets: vec![s.node("train").unwrap()],
    };
    s.run(&req).unwrap();
    bencher.bench(|| s.run(&req).unwrap());
}
