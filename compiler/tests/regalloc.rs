//! Small bodies compile with Cranelift's single-pass register allocator, large ones with
//! the backtracking one (`plan::QUICK_REGALLOC_ELEMENTS`): both must compute the same bits.
//! A long chain that keeps its input and many constants live (so the allocators spill
//! differently) runs at 8 elements (single pass) and at 4,096 whose first 8 are the same.
use crate::common::*;
use autoclust_graph::{AttrValue, DType, Tensor};

fn chain(n: usize) -> autoclust_compiler::CompiledFunction {
    let t = || vec![("T", AttrValue::Type(DType::Float32))];
    let mut nodes = vec![arg("x", 0, DType::Float32)];
    let mut prev = "x".to_string();
    for i in 0..40 {
        let c = format!("c{i}");
        nodes.push(konst(&c, Tensor::from_f32(vec![], vec![0.25 + i as f32 * 0.125]).unwrap()));
        let a = format!("a{i}");
        let op = ["Mul", "AddV2", "Sub", "Maximum"][i % 4];
        nodes.push(node(&a, op, &[&prev, &c], t()));
        let u = format!("u{i}");
        let un = ["Tanh", "Sigmoid", "Exp", "Neg", "Square"][i % 5];
        nodes.push(node(&u, un, &[&a], t()));
        let s = format!("s{i}");
        nodes.push(node(&s, "AddV2", &[&u, "x"], t()));
        prev = s;
    }
    nodes.push(ret("r", &prev, 0));
    compiler().compile(&graph(nodes), &[(DType::Float32, vec![n])]).unwrap()
}

#[test]
fn both_register_allocators_compute_the_same_bits() {
    let big = rand_f32(4096, 7, -2.0, 2.0);
    let small = big[..8].to_vec();
    let got_small = chain(8).call(&[f32t(&[8], small)]).unwrap();
    let got_big = chain(4096).call(&[f32t(&[4096], big)]).unwrap();
    let a = got_small[0].as_f32().unwrap();
    let b = &got_big[0].as_f32().unwrap()[..8];
    assert_eq!(a.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), b.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
}
