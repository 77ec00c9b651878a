//! The MLP training-step cluster (784-256-10, batch 64, sparse softmax cross-entropy, SGD
//! update computed in the cluster): results against a plain Rust reference, and compile time.
use crate::common::*;
use autoclust_graph::{AttrValue, DType, Tensor};

const B: usize = 64;
const I: usize = 784;
const H: usize = 256;
const O: usize = 10;
const LR: f32 = 0.1;

fn body() -> autoclust_graph::Graph {
    let t = |b: bool| AttrValue::B(b);
    graph(vec![
        arg("x", 0, DType::Float32),
        arg("y", 1, DType::Int32),
        arg("w1", 2, DType::Float32),
        arg("b1", 3, DType::Float32),
        arg("w2", 4, DType::Float32),
        arg("b2", 5, DType::Float32),
        node("mm1", "MatMul", &["x", "w1"], vec![]),
        node("pre1", "BiasAdd", &["mm1", "b1"], vec![]),
        node("h", "Relu", &["pre1"], vec![]),
        node("mm2", "MatMul", &["h", "w2"], vec![]),
        node("logits", "BiasAdd", &["mm2", "b2"], vec![]),
        node("xent", "SparseSoftmaxCrossEntropyWithLogits", &["logits", "y"], vec![]),
        ints("ax0", &[0]),
        node("loss", "Mean", &["xent", "ax0"], vec![]),
        node("shape", "Shape", &["xent"], vec![]),
        node("n", "Size", &["xent"], vec![]),
        node(
            "nf",
            "Cast",
            &["n"],
            vec![("SrcT", AttrValue::Type(DType::Int32)), ("DstT", AttrValue::Type(DType::Float32))],
        ),
        node("dl", "RealDiv", &["xent:1", "nf"], vec![]),
        node("dw2", "MatMul", &["h", "dl"], vec![("transpose_a", t(true))]),
        node("db2", "BiasAddGrad", &["dl"], vec![]),
        node("dh", "MatMul", &["dl", "w2"], vec![("transpose_b", t(true))]),
        node("dpre", "ReluGrad", &["dh", "h"], vec![]),
        node("dw1", "MatMul", &["x", "dpre"], vec![("transpose_a", t(true))]),
        node("db1", "BiasAddGrad", &["dpre"], vec![]),
        konst("lr", Tensor::scalar_f32(LR)),
        node("s1", "Mul", &["dw1", "lr"], vec![]),
        node("nw1", "Sub", &["w1", "s1"], vec![]),
        node("s2", "Mul", &["db1", "lr"], vec![]),
        node("nb1", "Sub", &["b1", "s2"], vec![]),
        node("s3", "Mul", &["dw2", "lr"], vec![]),
        node("nw2", "Sub", &["w2", "s3"], vec![]),
        node("s4", "Mul", &["db2", "lr"], vec![]),
        node("nb2", "Sub", &["b2", "s4"], vec![]),
        ret("r0", "loss", 0),
        ret("r1", "nw1", 1),
        ret("r2", "nb1", 2),
        ret("r3", "nw2", 3),
        ret("r4", "nb2", 4),
    ])
}

fn mm(a: &[f32], b: &[f32], m: usize, k: usize, n: usize, ta: bool, tb: bool) -> Vec<f32> {
    let mut c = vec![0f32; m * n];
    for i in 0..m {
        for p in 0..k {
            let av = if ta { a[p * m + i] } else { a[i * k + p] };
            if av == 0.0 {
                continue;
            }
            for j in 0..n {
                let bv = if tb { b[j * k + p] } else { b[p * n + j] };
                c[i * n + j] += av * bv;
            }
        }
    }
    c
}

#[test]
fn mlp_training_step_matches_reference_and_compiles_fast() {
    let g = body();
    let sig = vec![
        (DType::Float32, vec![B, I]),
        (DType::Int32, vec![B]),
        (DType::Float32, vec![I, H]),
        (DType::Float32, vec![H]),
        (DType::Float32, vec![H, O]),
        (DType::Float32, vec![O]),
    ];
    let c = compiler();
    let f = c.compile(&g, &sig).unwrap();
    // Best of a few compiles (the first includes one-time lazy initialisation).
    let best = (0..5).map(|_| c.compile(&g, &sig).unwrap().compile_time()).min().unwrap();
    eprintln!("MLP step: compile {:?} (first {:?}); steps:\n  {}", best, f.compile_time(), f.describe().join("\n  "));
    assert!(best.as_millis() < 50, "compile took {best:?}");

    let x = rand_f32(B * I, 1, 0.0, 1.0);
    let y: Vec<i32> = (0..B as i32).map(|i| (i * 7) % O as i32).collect();
    let w1 = rand_f32(I * H, 2, -0.05, 0.05);
    let b1 = rand_f32(H, 3, -0.1, 0.1);
    let w2 = rand_f32(H * O, 4, -0.1, 0.1);
    let b2 = rand_f32(O, 5, -0.1, 0.1);
    let out = f
        .call(&[
            f32t(&[B, I], x.clone()),
            Tensor::from_i32(vec![B], y.clone()).unwrap(),
            f32t(&[I, H], w1.clone()),
            f32t(&[H], b1.clone()),
            f32t(&[H, O], w2.clone()),
            f32t(&[O], b2.clone()),
        ])
        .unwrap();

    // Reference.
    let mut h = mm(&x, &w1, B, I, H, false, false);
    for (i, v) in h.iter_mut().enumerate() {
        *v = (*v + b1[i % H]).max(0.0);
    }
    let mut logits = mm(&h, &w2, B, H, O, false, false);
    for (i, v) in logits.iter_mut().enumerate() {
        *v += b2[i % O];
    }
    let mut dl = vec![0f32; B * O];
    let mut loss = 0f64;
    for r in 0..B {
        let row = &logits[r * O..(r + 1) * O];
        let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let s: f32 = row.iter().map(|v| (v - m).exp()).sum();
        loss += (s.ln() + m - row[y[r] as usize]) as f64;
        for k in 0..O {
            dl[r * O + k] = ((row[k] - m).exp() / s - if k == y[r] as usize { 1.0 } else { 0.0 }) / B as f32;
        }
    }
    let loss = (loss / B as f64) as f32;
    let dw2 = mm(&h, &dl, H, B, O, true, false);
    let db2: Vec<f32> = (0..O).map(|k| (0..B).map(|r| dl[r * O + k]).sum()).collect();
    let dh = mm(&dl, &w2, B, O, H, false, true);
    let dpre: Vec<f32> = dh.iter().zip(&h).map(|(&d, &h)| if h > 0.0 { d } else { 0.0 }).collect();
    let dw1 = mm(&x, &dpre, I, B, H, true, false);
    let db1: Vec<f32> = (0..H).map(|k| (0..B).map(|r| dpre[r * H + k]).sum()).collect();
    let upd = |w: &[f32], g: &[f32]| -> Vec<f32> { w.iter().zip(g).map(|(w, g)| w - LR * g).collect() };
    let want = [vec![loss], upd(&w1, &dw1), upd(&b1, &db1), upd(&w2, &dw2), upd(&b2, &db2)];
    for (k, w) in want.iter().enumerate() {
        let got = out[k].as_f32().unwrap();
        assert_eq!(got.len(), w.len());
        for (i, (g, w)) in got.iter().zip(w).enumerate() {
            assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "output {k} element {i}: {g} vs {w}");
        }
    }
}
