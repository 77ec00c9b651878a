//! A first end-to-end check: one fused add-multiply-tanh over broadcast inputs.
use crate::common::*;
use autoclust_graph::DType;

#[test]
fn add_mul_tanh_with_row_broadcast() {
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        arg("b", 1, DType::Float32),
        node("s", "AddV2", &["x", "b"], vec![]),
        node("m", "Mul", &["s", "x"], vec![]),
        node("t", "Tanh", &["m"], vec![]),
        ret("r", "t", 0),
    ]);
    let (rows, cols) = (7, 37);
    let f = compiler().compile(&g, &[(DType::Float32, vec![rows, cols]), (DType::Float32, vec![cols])]).unwrap();
    let x = rand_f32(rows * cols, 1, -2.0, 2.0);
    let b = rand_f32(cols, 2, -1.0, 1.0);
    let out = f.call(&[f32t(&[rows, cols], x.clone()), f32t(&[cols], b.clone())]).unwrap();
    let want: Vec<f32> = (0..rows * cols).map(|i| ((x[i] + b[i % cols]) * x[i]).tanh()).collect();
    assert_close(out[0].as_f32().unwrap(), &want, 1e-5, "tanh chain");
    assert_eq!(f.describe().len(), 1, "{:?}", f.describe());
}
