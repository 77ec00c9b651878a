//! Helpers shared by the compiler's integration tests: building cluster bodies by hand.
#![allow(dead_code)]

use autoclust_compiler::{Compiler, CompilerOptions};
use autoclust_graph::{AttrValue, Attrs, DType, Graph, Library, RawNode, Tensor};

pub fn node(name: &str, op: &str, inputs: &[&str], attrs: Vec<(&str, AttrValue)>) -> RawNode {
    let mut a = Attrs::new();
    for (k, v) in attrs {
        a.insert(k.to_string(), v);
    }
    RawNode {
        name: name.into(),
        op: op.into(),
        inputs: inputs.iter().map(|s| s.to_string()).collect(),
        attrs: a,
        device: String::new(),
        span: None,
    }
}

pub fn arg(name: &str, index: i64, dtype: DType) -> RawNode {
    node(name, "_Arg", &[], vec![("index", AttrValue::I(index)), ("T", AttrValue::Type(dtype))])
}

pub fn ret(name: &str, input: &str, index: i64) -> RawNode {
    node(name, "_Retval", &[input], vec![("index", AttrValue::I(index))])
}

pub fn konst(name: &str, t: Tensor) -> RawNode {
    let d = t.dtype;
    node(name, "Const", &[], vec![("value", AttrValue::Tensor(t)), ("dtype", AttrValue::Type(d))])
}

pub fn ints(name: &str, v: &[i32]) -> RawNode {
    konst(name, Tensor::from_i32(vec![v.len()], v.to_vec()).unwrap())
}

pub fn graph(nodes: Vec<RawNode>) -> Graph {
    Graph::from_raw(nodes, Library::default(), None).unwrap()
}

pub fn compiler() -> Compiler {
    Compiler::new(CompilerOptions { threads: 2, ..Default::default() })
}

/// Deterministic pseudo-random floats in [lo, hi).
pub fn rand_f32(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            lo + (hi - lo) * ((s >> 40) as f32 / (1u64 << 24) as f32)
        })
        .collect()
}

pub fn f32t(shape: &[usize], v: Vec<f32>) -> Tensor {
    Tensor::from_f32(shape.to_vec(), v).unwrap()
}

/// Relative closeness with an absolute floor; NaN matches NaN, infinities must match exactly.
pub fn close(a: f32, b: f32, rel: f32) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a.is_infinite() || b.is_infinite() {
        return a == b;
    }
    (a - b).abs() <= rel * a.abs().max(b.abs()) + 1e-30
}

pub fn assert_close(got: &[f32], want: &[f32], rel: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(close(*g, *w, rel), "{what}: element {i}: got {g}, want {w}");
    }
}
