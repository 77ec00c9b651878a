//! Fused elementwise chain benchmark: 32 ops (cycling Mul, AddV2, Tanh, Mul by the input,
//! Exp, Sub, Maximum, Minimum) over 1,000,000 float32 — the JIT's one fused loop nest vs a
//! naive Rust implementation that runs each op as its own loop into a fresh buffer (what an
//! op-by-op interpreter does), plus the compile time of the chain.

use autoclust_compiler::{CompiledFunction, Compiler, CompilerOptions};
use autoclust_graph::{AttrValue, Attrs, DType, Graph, Library, RawNode, Tensor};

const N: usize = 1_000_000;
const OPS: usize = 32;

fn main() {
    divan::main();
}

fn raw(name: &str, op: &str, inputs: &[&str], attrs: Vec<(&str, AttrValue)>) -> RawNode {
    let mut a = Attrs::new();
    for (k, v) in attrs {
        a.insert(k.into(), v);
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

fn scalar(name: &str, x: f32) -> RawNode {
    raw(
        name,
        "Const",
        &[],
        vec![("value", AttrValue::Tensor(Tensor::scalar_f32(x))), ("dtype", AttrValue::Type(DType::Float32))],
    )
}

/// The chain as a cluster body.
pub fn chain(ops: usize) -> Graph {
    let mut nodes = vec![
        raw("x", "_Arg", &[], vec![("index", AttrValue::I(0)), ("T", AttrValue::Type(DType::Float32))]),
        scalar("c_mul", 0.9),
        scalar("c_add", 0.1),
        scalar("c_sub", 1.0),
        scalar("c_max", -1.0),
        scalar("c_min", 1.0),
    ];
    let mut prev = "x".to_string();
    for i in 0..ops {
        let name = format!("op{i}");
        let n = match i % 8 {
            0 => raw(&name, "Mul", &[&prev, "c_mul"], vec![]),
            1 => raw(&name, "AddV2", &[&prev, "c_add"], vec![]),
            2 => raw(&name, "Tanh", &[&prev], vec![]),
            3 => raw(&name, "Mul", &[&prev, "x"], vec![]),
            4 => raw(&name, "Exp", &[&prev], vec![]),
            5 => raw(&name, "Sub", &[&prev, "c_sub"], vec![]),
            6 => raw(&name, "Maximum", &[&prev, "c_max"], vec![]),
            _ => raw(&name, "Minimum", &[&prev, "c_min"], vec![]),
        };
        nodes.push(n);
        prev = name;
    }
    nodes.push(raw("r", "_Retval", &[&prev], vec![("index", AttrValue::I(0))]));
    Graph::from_raw(nodes, Library::default(), None).unwrap()
}

/// One op per loop, each into a fresh buffer.
fn naive(x: &[f32], ops: usize) -> Vec<f32> {
    let mut v = x.to_vec();
    for i in 0..ops {
        v = match i % 8 {
            0 => v.iter().map(|a| a * 0.9).collect(),
            1 => v.iter().map(|a| a + 0.1).collect(),
            2 => v.iter().map(|a| a.tanh()).collect(),
            3 => v.iter().zip(x).map(|(a, b)| a * b).collect(),
            4 => v.iter().map(|a| a.exp()).collect(),
            5 => v.iter().map(|a| a - 1.0).collect(),
            6 => v.iter().map(|a| a.max(-1.0)).collect(),
            _ => v.iter().map(|a| a.min(1.0)).collect(),
        };
    }
    v
}

fn input() -> Tensor {
    Tensor::from_f32(vec![N], (0..N).map(|i| ((i % 1000) as f32 / 500.0) - 1.0).collect()).unwrap()
}

fn compiled(threads: usize) -> CompiledFunction {
    Compiler::new(CompilerOptions { threads, ..Default::default() })
        .compile(&chain(OPS), &[(DType::Float32, vec![N])])
        .unwrap()
}

#[divan::bench(sample_count = 20)]
fn compile_chain_32(b: divan::Bencher<'_, '_>) {
    let g = chain(OPS);
    let c = Compiler::new(CompilerOptions::default());
    b.bench(|| c.compile(&g, &[(DType::Float32, vec![N])]).unwrap());
}

#[divan::bench(sample_count = 20)]
fn jit_chain_32_all_threads(b: divan::Bencher<'_, '_>) {
    let f = compiled(0);
    let x = input();
    b.bench(|| f.call(std::slice::from_ref(&x)).unwrap());
}

#[divan::bench(sample_count = 20)]
fn jit_chain_32_one_thread(b: divan::Bencher<'_, '_>) {
    let f = compiled(1);
    let x = input();
    b.bench(|| f.call(std::slice::from_ref(&x)).unwrap());
}

#[divan::bench(sample_count = 10)]
fn naive_chain_32(b: divan::Bencher<'_, '_>) {
    let x = input();
    let v = x.as_f32().unwrap();
    b.bench(|| naive(v, OPS));
}
