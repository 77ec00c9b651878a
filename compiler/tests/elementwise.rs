//! Every elementwise op and random fused DAGs against a scalar Rust reference, with
//! broadcasting (full, row, column, scalar) — including a proptest over random DAGs and shapes.
use crate::common::*;
use autoclust_compiler::CompileError;
use autoclust_graph::{AttrValue, DType, Tensor};
use proptest::prelude::*;

/// Row-major index of `out_idx` read through numpy broadcasting from `shape`.
fn bcast_index(out_shape: &[usize], out_idx: usize, shape: &[usize]) -> usize {
    let mut rem = out_idx;
    let mut coords = vec![0; out_shape.len()];
    for d in (0..out_shape.len()).rev() {
        coords[d] = rem % out_shape[d];
        rem /= out_shape[d];
    }
    let off = out_shape.len() - shape.len();
    let mut idx = 0;
    for (d, &n) in shape.iter().enumerate() {
        idx = idx * n + if n == 1 { 0 } else { coords[d + off] };
    }
    idx
}

fn bshape(a: &[usize], b: &[usize]) -> Vec<usize> {
    let r = a.len().max(b.len());
    (0..r)
        .map(|i| {
            let x = if i + a.len() >= r { a[i + a.len() - r] } else { 1 };
            let y = if i + b.len() >= r { b[i + b.len() - r] } else { 1 };
            x.max(y)
        })
        .collect()
}

/// TensorFlow's (vectorised) Maximum: NaN propagates, a ±0 tie gives the second operand.
fn nan_max(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if a > b {
        a
    } else {
        b
    }
}
/// TensorFlow's (vectorised) Minimum: NaN propagates, a ±0 tie gives the second operand.
fn nan_min(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if a < b {
        a
    } else {
        b
    }
}

fn ref_binary(op: &str, a: f32, b: f32) -> f32 {
    match op {
        "Add" | "AddV2" | "BiasAdd" => a + b,
        "Sub" => a - b,
        "Mul" => a * b,
        "RealDiv" => a / b,
        "Maximum" => nan_max(a, b),
        "Minimum" => nan_min(a, b),
        "SquaredDifference" => (a - b) * (a - b),
        "ReluGrad" => {
            if b > 0.0 {
                a
            } else {
                0.0
            }
        }
        "TanhGrad" => b * (1.0 - a * a),
        "SigmoidGrad" => b * a * (1.0 - a),
        // TensorFlow's gradient formulas (y = a, dy = b).
        "RsqrtGrad" => -0.5 * b * a * a * a,
        "SqrtGrad" => 0.5 * b / a,
        "ReciprocalGrad" | "InvGrad" => -b * a * a,
        "Pow" => a.powf(b),
        _ => panic!("{op}"),
    }
}

fn ref_unary(op: &str, x: f32) -> f32 {
    match op {
        "Neg" => -x,
        "Abs" => x.abs(),
        "Exp" => x.exp(),
        "Log" => x.ln(),
        "Sqrt" => x.sqrt(),
        "Rsqrt" => 1.0 / x.sqrt(),
        "Square" => x * x,
        "Tanh" => x.tanh(),
        "Sigmoid" => 1.0 / (1.0 + (-x).exp()),
        "Relu" => nan_max(x, 0.0),
        "Reciprocal" => 1.0 / x,
        "Floor" => x.floor(),
        "Ceil" => x.ceil(),
        "Round" | "Rint" => x.round_ties_even(),
        "Softsign" => x / (1.0 + x.abs()),
        "Sign" => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                x
            }
        }
        "Identity" | "StopGradient" => x,
        _ => panic!("{op}"),
    }
}

fn ref_cmp(op: &str, a: f32, b: f32) -> bool {
    match op {
        "Less" => a < b,
        "LessEqual" => a <= b,
        "Greater" => a > b,
        "GreaterEqual" => a >= b,
        "Equal" => a == b,
        "NotEqual" => a != b,
        _ => panic!("{op}"),
    }
}

const SHAPES: &[&[usize]] = &[&[5, 37], &[37], &[5, 1], &[], &[1, 37], &[3, 1, 37]];

#[test]
fn every_binary_op_with_every_broadcast() {
    let ops = [
        "Add",
        "AddV2",
        "Sub",
        "Mul",
        "RealDiv",
        "Maximum",
        "Minimum",
        "SquaredDifference",
        "ReluGrad",
        "TanhGrad",
        "SigmoidGrad",
        "RsqrtGrad",
        "SqrtGrad",
        "ReciprocalGrad",
        "InvGrad",
        "Pow",
    ];
    for op in ops {
        for ys in SHAPES {
            let xs: &[usize] = &[5, 37];
            let out = bshape(xs, ys);
            let lo = if op == "Pow" { 0.1 } else { -3.0 };
            let x = rand_f32(xs.iter().product(), 11, lo, 3.0);
            let mut y = rand_f32(ys.iter().product(), 12, -3.0, 3.0);
            if !y.is_empty() && op != "Pow" {
                y[0] = x[0]; // an exact tie for Maximum/Minimum/comparisons
            }
            let g = graph(vec![
                arg("x", 0, DType::Float32),
                arg("y", 1, DType::Float32),
                node("o", op, &["x", "y"], vec![]),
                ret("r", "o", 0),
            ]);
            let compiled = compiler().compile(&g, &[(DType::Float32, xs.to_vec()), (DType::Float32, ys.to_vec())]);
            // The gradient ops take two operands of one shape (TensorFlow's shape function
            // merges them): a broadcast is declined, never lowered.
            if op.ends_with("Grad") && *ys != xs {
                assert!(matches!(compiled, Err(CompileError::Invalid(_))), "{op} {ys:?}: broadcast not declined");
                continue;
            }
            let f = compiled.unwrap_or_else(|e| panic!("{op}: {e}"));
            let got = f.call(&[f32t(xs, x.clone()), f32t(ys, y.clone())]).unwrap();
            assert_eq!(got[0].shape, out);
            let n: usize = out.iter().product();
            let want: Vec<f32> =
                (0..n).map(|i| ref_binary(op, x[bcast_index(&out, i, xs)], y[bcast_index(&out, i, ys)])).collect();
            assert_close(got[0].as_f32().unwrap(), &want, 1e-5, &format!("{op} {xs:?} {ys:?}"));
        }
    }
}

#[test]
fn bias_add_broadcasts_along_the_last_axis() {
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        arg("b", 1, DType::Float32),
        node("o", "BiasAdd", &["x", "b"], vec![("data_format", AttrValue::S(b"NHWC".to_vec()))]),
        ret("r", "o", 0),
    ]);
    let x = rand_f32(2 * 3 * 5, 1, -1.0, 1.0);
    let b = rand_f32(5, 2, -1.0, 1.0);
    let f = compiler().compile(&g, &[(DType::Float32, vec![2, 3, 5]), (DType::Float32, vec![5])]).unwrap();
    let got = f.call(&[f32t(&[2, 3, 5], x.clone()), f32t(&[5], b.clone())]).unwrap();
    let want: Vec<f32> = (0..30).map(|i| x[i] + b[i % 5]).collect();
    assert_close(got[0].as_f32().unwrap(), &want, 1e-6, "BiasAdd");
}

#[test]
fn every_unary_op() {
    let ops = [
        "Neg",
        "Abs",
        "Exp",
        "Log",
        "Sqrt",
        "Rsqrt",
        "Square",
        "Tanh",
        "Sigmoid",
        "Relu",
        "Reciprocal",
        "Floor",
        "Ceil",
        "Round",
        "Rint",
        "Softsign",
        "Sign",
        "Identity",
        "StopGradient",
    ];
    for op in ops {
        for n in [1usize, 3, 4, 15, 16, 17, 64, 1001] {
            let positive = matches!(op, "Log" | "Sqrt" | "Rsqrt");
            let mut x = rand_f32(n, n as u64, if positive { 0.01 } else { -8.0 }, 8.0);
            if !positive && n > 2 {
                x[1] = 0.0;
                x[2] = -0.0;
            }
            let g = graph(vec![arg("x", 0, DType::Float32), node("o", op, &["x"], vec![]), ret("r", "o", 0)]);
            let f = compiler().compile(&g, &[(DType::Float32, vec![n])]).unwrap();
            let got = f.call(&[f32t(&[n], x.clone())]).unwrap();
            let want: Vec<f32> = x.iter().map(|&v| ref_unary(op, v)).collect();
            assert_close(got[0].as_f32().unwrap(), &want, 1e-6, op);
        }
    }
}

#[test]
fn comparisons_select_and_logical_ops() {
    for cmp in ["Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual"] {
        for ys in SHAPES {
            let xs: &[usize] = &[5, 37];
            let out = bshape(xs, ys);
            let x = rand_f32(185, 5, -2.0, 2.0).iter().map(|v| v.round()).collect::<Vec<_>>();
            let y = rand_f32(ys.iter().product(), 6, -2.0, 2.0).iter().map(|v| v.round()).collect::<Vec<_>>();
            // A bool output, a select on it, and a logical combination cast back to float.
            let g = graph(vec![
                arg("x", 0, DType::Float32),
                arg("y", 1, DType::Float32),
                node("c", cmp, &["x", "y"], vec![]),
                node("s", "SelectV2", &["c", "x", "y"], vec![]),
                node("z", "Greater", &["x", "y"], vec![]),
                node("n", "LogicalNot", &["z"], vec![]),
                node("a", "LogicalAnd", &["c", "n"], vec![]),
                node("o", "LogicalOr", &["a", "z"], vec![]),
                node(
                    "f",
                    "Cast",
                    &["o"],
                    vec![("SrcT", AttrValue::Type(DType::Bool)), ("DstT", AttrValue::Type(DType::Float32))],
                ),
                ret("r0", "c", 0),
                ret("r1", "s", 1),
                ret("r2", "f", 2),
            ]);
            let f = compiler().compile(&g, &[(DType::Float32, xs.to_vec()), (DType::Float32, ys.to_vec())]).unwrap();
            let got = f.call(&[f32t(xs, x.clone()), f32t(ys, y.clone())]).unwrap();
            let n: usize = out.iter().product();
            let pairs: Vec<(f32, f32)> =
                (0..n).map(|i| (x[bcast_index(&out, i, xs)], y[bcast_index(&out, i, ys)])).collect();
            let c: Vec<bool> = pairs.iter().map(|&(a, b)| ref_cmp(cmp, a, b)).collect();
            assert_eq!(got[0].as_bool().unwrap(), &c[..], "{cmp}");
            let s: Vec<f32> = pairs.iter().zip(&c).map(|(&(a, b), &c)| if c { a } else { b }).collect();
            assert_eq!(got[1].as_f32().unwrap(), &s[..], "{cmp} select");
            // (c ∧ ¬z) ∨ z with z = a > b simplifies to c ∨ z.
            let o: Vec<f32> = pairs.iter().zip(&c).map(|(&(a, b), &c)| (c || a > b) as u8 as f32).collect();
            assert_eq!(got[2].as_f32().unwrap(), &o[..], "{cmp} logic");
        }
    }
}

#[test]
fn integer_and_f64_ops_use_the_scalar_loop() {
    let g = graph(vec![
        arg("x", 0, DType::Int32),
        arg("y", 1, DType::Int32),
        node("a", "Mul", &["x", "y"], vec![]),
        node("b", "Maximum", &["a", "x"], vec![]),
        node(
            "c",
            "Cast",
            &["b"],
            vec![("SrcT", AttrValue::Type(DType::Int32)), ("DstT", AttrValue::Type(DType::Float64))],
        ),
        node("d", "Square", &["c"], vec![]),
        node(
            "e",
            "Cast",
            &["d"],
            vec![("SrcT", AttrValue::Type(DType::Float64)), ("DstT", AttrValue::Type(DType::Int64))],
        ),
        ret("r0", "b", 0),
        ret("r1", "e", 1),
    ]);
    let x: Vec<i32> = (0..23).map(|i| i * 7 - 80).collect();
    let y: Vec<i32> = (0..23).map(|i| 5 - i).collect();
    let f = compiler().compile(&g, &[(DType::Int32, vec![23]), (DType::Int32, vec![23])]).unwrap();
    let got = f
        .call(&[Tensor::from_i32(vec![23], x.clone()).unwrap(), Tensor::from_i32(vec![23], y.clone()).unwrap()])
        .unwrap();
    let b: Vec<i32> = x.iter().zip(&y).map(|(&x, &y)| (x * y).max(x)).collect();
    assert_eq!(got[0].as_i32().unwrap(), &b[..]);
    let e: Vec<i64> = b.iter().map(|&v| (v as f64 * v as f64) as i64).collect();
    assert_eq!(got[1].as_i64().unwrap(), &e[..]);
}

/// NaN, infinities and out-of-range floats cast to int32/int64 as TensorFlow's x86 Cast kernel
/// gives them (measured with TensorFlow 2.21): the conversion's "indefinite" MIN, not a
/// saturated value; values in range truncate toward zero.
#[test]
fn float_to_int_casts_of_out_of_range_values_give_tensorflows_min() {
    let cast = |src: DType, dst: DType| {
        vec![
            arg("x", 0, src),
            node("c", "Cast", &["x"], vec![("SrcT", AttrValue::Type(src)), ("DstT", AttrValue::Type(dst))]),
            ret("r", "c", 0),
        ]
    };
    let xs = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 3e9, -3e9, 1e20, -2.7, 2.7, 40000.0, -2.0f32.powi(31)];
    let n = xs.len();
    let m32 = i32::MIN;
    let want32 = [m32, m32, m32, m32, m32, m32, -2, 2, 40000, m32];
    let want64 = [i64::MIN, i64::MIN, i64::MIN, 3_000_000_000, -3_000_000_000, i64::MIN, -2, 2, 40000, -(1 << 31)];
    for src in [DType::Float32, DType::Float64] {
        let input = if src == DType::Float32 {
            f32t(&[n], xs.to_vec())
        } else {
            Tensor::from_f64(vec![n], xs.iter().map(|&x| f64::from(x)).collect()).unwrap()
        };
        let f = compiler().compile(&graph(cast(src, DType::Int32)), &[(src, vec![n])]).unwrap();
        assert_eq!(f.call(std::slice::from_ref(&input)).unwrap()[0].as_i32().unwrap(), want32, "{src:?} → int32");
        let f = compiler().compile(&graph(cast(src, DType::Int64)), &[(src, vec![n])]).unwrap();
        assert_eq!(f.call(&[input]).unwrap()[0].as_i64().unwrap(), want64, "{src:?} → int64");
    }
}

/// Encapsulation's shape check of a variable write (`_AutoclustSameShape(value, current)`)
/// sits between an optimizer's delta and the `AssignAddVariableOp`'s add: once checked it is
/// a copy, so delta and add are one loop (it was a view that cut them into two).
#[test]
fn a_checked_variable_write_fuses_with_its_value_and_its_add() {
    let g = graph(vec![
        arg("g", 0, DType::Float32),
        arg("m", 1, DType::Float32),
        node("d", "Sub", &["g", "m"], vec![]),
        node("dd", "Mul", &["d", "d"], vec![]),
        node("chk", autoclust_graph::protocol::SAME_SHAPE_OP, &["dd", "m"], vec![]),
        node("m1", "AddV2", &["m", "chk"], vec![]),
        ret("r0", "m1", 0),
    ]);
    let n = 1000;
    let f = compiler().compile(&g, &[(DType::Float32, vec![n]), (DType::Float32, vec![n])]).unwrap();
    let desc = f.describe();
    assert_eq!(desc.len(), 1, "{desc:?}");
    assert!(desc[0].contains("4 ops"), "{desc:?}");
    let (gv, mv) = (rand_f32(n, 3, -1.0, 1.0), rand_f32(n, 4, -1.0, 1.0));
    let got = f.call(&[f32t(&[n], gv.clone()), f32t(&[n], mv.clone())]).unwrap();
    let want: Vec<f32> = gv.iter().zip(&mv).map(|(&g, &m)| m + (g - m) * (g - m)).collect();
    assert_eq!(got[0].as_f32().unwrap(), &want[..]);
    // A write of another shape is not compiled (the interpreter's kernel reports it).
    let err = compiler().compile(&g, &[(DType::Float32, vec![n]), (DType::Float32, vec![1])]).unwrap_err();
    assert!(err.to_string().contains("variable write of shape"), "{err}");
}

#[test]
fn a_fused_dag_writes_each_live_output_once() {
    // x → a = x*w → b = tanh(a) → c = b + x; d = exp(a) - c; outputs a (live), d.
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        arg("w", 1, DType::Float32),
        node("a", "Mul", &["x", "w"], vec![]),
        node("b", "Tanh", &["a"], vec![]),
        node("c", "AddV2", &["b", "x"], vec![]),
        node("e", "Exp", &["a"], vec![]),
        node("d", "Sub", &["e", "c"], vec![]),
        ret("r0", "a", 0),
        ret("r1", "d", 1),
    ]);
    let (m, n) = (300, 300); // large enough to split across threads
    let f = compiler().compile(&g, &[(DType::Float32, vec![m, n]), (DType::Float32, vec![m, 1])]).unwrap();
    let desc = f.describe();
    assert_eq!(desc.len(), 1, "{desc:?}");
    assert!(desc[0].contains("5 ops") && desc[0].contains("2 in, 2 out"), "{desc:?}");
    let x = rand_f32(m * n, 1, -1.0, 1.0);
    let w = rand_f32(m, 2, -1.0, 1.0);
    let got = f.call(&[f32t(&[m, n], x.clone()), f32t(&[m, 1], w.clone())]).unwrap();
    let a: Vec<f32> = (0..m * n).map(|i| x[i] * w[i / n]).collect();
    let d: Vec<f32> = (0..m * n).map(|i| a[i].exp() - (a[i].tanh() + x[i])).collect();
    assert_close(got[0].as_f32().unwrap(), &a, 0.0, "a");
    let dd: Vec<f32> = got[1].as_f32().unwrap().to_vec();
    for i in 0..m * n {
        assert!((dd[i] - d[i]).abs() <= 1e-6 * (1.0 + d[i].abs()), "d[{i}] = {} want {}", dd[i], d[i]);
    }
}

// ---- proptest over random DAGs ----

#[derive(Clone, Debug)]
enum Op {
    Bin(&'static str, usize, usize),
    Un(&'static str, usize),
    SelGreater(usize, usize),
}

const BIN: &[&str] = &["AddV2", "Sub", "Mul", "Maximum", "Minimum", "SquaredDifference"];
const UN: &[&str] = &["Tanh", "Sigmoid", "Neg", "Abs", "Relu", "Square", "Exp"];

fn dag_strategy() -> impl Strategy<Value = (Vec<usize>, Vec<Vec<usize>>, Vec<Op>, u64)> {
    let dims = prop::collection::vec(prop::sample::select(vec![1usize, 2, 3, 5, 17, 33]), 1..=3);
    dims.prop_flat_map(|out| {
        let r = out.len();
        let input = (prop::collection::vec(any::<bool>(), r), 0..=r).prop_map({
            let out = out.clone();
            move |(keep, drop)| {
                let s: Vec<usize> = out.iter().zip(&keep).map(|(&d, &k)| if k { d } else { 1 }).collect();
                s[drop.min(r)..].to_vec()
            }
        });
        let inputs = prop::collection::vec(input, 1..=3);
        (
            Just(out),
            inputs,
            prop::collection::vec(
                (0..3usize, any::<prop::sample::Index>(), any::<prop::sample::Index>(), any::<prop::sample::Index>()),
                1..10,
            ),
            any::<u64>(),
        )
    })
    .prop_map(|(out, mut inputs, raw, seed)| {
        // Make sure at least one input has the full output shape.
        inputs[0] = out.clone();
        let mut ops = Vec::new();
        for (i, (kind, a, b, o)) in raw.into_iter().enumerate() {
            let avail = inputs.len() + i;
            let (a, b) = (a.index(avail), b.index(avail));
            ops.push(match kind {
                0 => Op::Bin(BIN[o.index(BIN.len())], a, b),
                1 => Op::Un(UN[o.index(UN.len())], a),
                _ => Op::SelGreater(a, b),
            });
        }
        (out, inputs, ops, seed)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]
    #[test]
    fn random_fused_dags_match_the_reference((_out, inputs, ops, seed) in dag_strategy()) {
        let mut nodes = Vec::new();
        let mut names: Vec<String> = Vec::new();
        let mut shapes: Vec<Vec<usize>> = Vec::new();
        let mut data: Vec<Vec<f32>> = Vec::new();
        for (i, s) in inputs.iter().enumerate() {
            nodes.push(arg(&format!("in{i}"), i as i64, DType::Float32));
            names.push(format!("in{i}"));
            shapes.push(s.clone());
            data.push(rand_f32(s.iter().product(), seed.wrapping_add(i as u64), -2.0, 2.0));
        }
        for (k, op) in ops.iter().enumerate() {
            let name = format!("n{k}");
            let (shape, vals): (Vec<usize>, Vec<f32>) = match op {
                Op::Bin(o, a, b) => {
                    nodes.push(node(&name, o, &[&names[*a], &names[*b]], vec![]));
                    let s = bshape(&shapes[*a], &shapes[*b]);
                    let n: usize = s.iter().product();
                    let v = (0..n).map(|i| ref_binary(o, data[*a][bcast_index(&s, i, &shapes[*a])], data[*b][bcast_index(&s, i, &shapes[*b])])).collect();
                    (s, v)
                }
                Op::Un(o, a) => {
                    nodes.push(node(&name, o, &[&names[*a]], vec![]));
                    (shapes[*a].clone(), data[*a].iter().map(|&x| ref_unary(o, x)).collect())
                }
                Op::SelGreater(a, b) => {
                    nodes.push(node(&format!("{name}_c"), "Greater", &[&names[*a], &names[*b]], vec![]));
                    nodes.push(node(&name, "SelectV2", &[&format!("{name}_c"), &names[*a], &names[*b]], vec![]));
                    let s = bshape(&shapes[*a], &shapes[*b]);
                    let n: usize = s.iter().product();
                    let v = (0..n).map(|i| {
                        let (x, y) = (data[*a][bcast_index(&s, i, &shapes[*a])], data[*b][bcast_index(&s, i, &shapes[*b])]);
                        if x > y { x } else { y }
                    }).collect();
                    (s, v)
                }
            };
            names.push(name);
            shapes.push(shape);
            data.push(vals);
        }
        // Return the last node and the first computed node.
        let last = names.len() - 1;
        let first = inputs.len();
        nodes.push(ret("r0", &names[last], 0));
        nodes.push(ret("r1", &names[first], 1));
        let g = graph(nodes);
        let sig: Vec<(DType, Vec<usize>)> = inputs.iter().map(|s| (DType::Float32, s.clone())).collect();
        let f = compiler().compile(&g, &sig).unwrap();
        let args: Vec<Tensor> = inputs.iter().zip(&data).map(|(s, d)| f32t(s, d.clone())).collect();
        let got = f.call(&args).unwrap();
        for (j, idx) in [last, first].into_iter().enumerate() {
            prop_assert_eq!(&got[j].shape, &shapes[idx]);
            for (i, (&g, &w)) in got[j].as_f32().unwrap().iter().zip(&data[idx]).enumerate() {
                let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= 1e-4 * w.abs().max(1.0);
                prop_assert!(ok, "output {} element {}: got {} want {} ({:?})", j, i, g, w, f.describe());
            }
        }
    }
}

#[test]
fn maximum_minimum_relu_with_constants_propagate_nan() {
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        konst("c", Tensor::scalar_f32(0.5)),
        node("a", "Maximum", &["x", "c"], vec![]),
        node("b", "Minimum", &["c", "x"], vec![]),
        node("r", "Relu", &["x"], vec![]),
        node("m", "Maximum", &["x", "a"], vec![]),
        ret("r0", "a", 0),
        ret("r1", "b", 1),
        ret("r2", "r", 2),
        ret("r3", "m", 3),
    ]);
    let x = vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 0.25, 0.75, -3.0, 2.0, f32::NAN];
    let n = x.len();
    let f = compiler().compile(&g, &[(DType::Float32, vec![n])]).unwrap();
    let got = f.call(&[f32t(&[n], x.clone())]).unwrap();
    let same = |g: &[f32], w: &[f32], what: &str| {
        for (a, b) in g.iter().zip(w) {
            assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()), "{what}: {g:?} vs {w:?}");
        }
    };
    same(got[0].as_f32().unwrap(), &x.iter().map(|&v| nan_max(v, 0.5)).collect::<Vec<_>>(), "max");
    same(got[1].as_f32().unwrap(), &x.iter().map(|&v| nan_min(0.5, v)).collect::<Vec<_>>(), "min");
    // max(x, +0): relu(-0) = +0 as TensorFlow's vectorised kernel gives.
    let relu: Vec<f32> = x.iter().map(|&v| nan_max(v, 0.0)).collect();
    same(got[2].as_f32().unwrap(), &relu, "relu");
    same(got[3].as_f32().unwrap(), &x.iter().map(|&v| nan_max(v, nan_max(v, 0.5))).collect::<Vec<_>>(), "max-nan");
}

/// `ReluGrad` and `Relu6Grad` are TensorFlow's products `dy · (x > 0)` and
/// `dy · (0 < x < 6)`: a NaN or infinite gradient where the mask is 0 gives NaN (sweep 75: a
/// select hid a NaN pixel's gradient from most of a MobileNet's variables), a negative one
/// −0 — compiled in float32 (vector loop and tail) and float64 alike.
#[test]
fn relu_grads_multiply_by_the_mask_as_tensorflow() {
    let dys = [f32::NAN, f32::INFINITY, -2.0, f32::INFINITY, 2.0, f32::NEG_INFINITY, 3.0, -1.0, 5.0];
    let xs = [-1.0, 0.0, -1.0, 7.0, f32::NAN, 6.0, 1.0, 3.0, -0.0];
    let n = dys.len();
    let want = |six: bool| -> Vec<f32> {
        dys.iter().zip(&xs).map(|(&g, &x)| g * if x > 0.0 && (!six || x < 6.0) { 1.0 } else { 0.0 }).collect()
    };
    let same = |g: &[f32], w: &[f32], what: &str| {
        for (a, b) in g.iter().zip(w) {
            assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()), "{what}: {g:?} vs {w:?}");
        }
    };
    let g = graph(vec![
        arg("dy", 0, DType::Float32),
        arg("x", 1, DType::Float32),
        node("r", "ReluGrad", &["dy", "x"], vec![]),
        node("r6", "Relu6Grad", &["dy", "x"], vec![]),
        ret("o0", "r", 0),
        ret("o1", "r6", 1),
    ]);
    let f = compiler().compile(&g, &[(DType::Float32, vec![n]), (DType::Float32, vec![n])]).unwrap();
    let got = f.call(&[f32t(&[n], dys.to_vec()), f32t(&[n], xs.to_vec())]).unwrap();
    same(got[0].as_f32().unwrap(), &want(false), "ReluGrad");
    same(got[1].as_f32().unwrap(), &want(true), "Relu6Grad");
    let g = graph(vec![
        arg("dy", 0, DType::Float64),
        arg("x", 1, DType::Float64),
        node("r", "ReluGrad", &["dy", "x"], vec![]),
        ret("o0", "r", 0),
    ]);
    let f = compiler().compile(&g, &[(DType::Float64, vec![n]), (DType::Float64, vec![n])]).unwrap();
    let f64t = |v: &[f32]| Tensor::from_f64(vec![n], v.iter().map(|&q| f64::from(q)).collect()).unwrap();
    let got = f.call(&[f64t(&dys), f64t(&xs)]).unwrap();
    let got: Vec<f32> = got[0].as_f64().unwrap().iter().map(|&q| q as f32).collect();
    same(&got, &want(false), "ReluGrad f64");
}

/// The vector loop runs 8 f32x4 copies per iteration for chains of 4+ ops, then single
/// vectors, then scalars: every length around those steps (and a length large enough to
/// be split across threads at an odd boundary) must match the reference.
#[test]
fn unrolled_loop_and_tails_at_every_length() {
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        konst("c", Tensor::scalar_f32(0.5)),
        node("a", "Mul", &["x", "c"], vec![]),
        node("b", "Tanh", &["a"], vec![]),
        node("d", "Exp", &["b"], vec![]),
        node("e", "Sub", &["d", "x"], vec![]),
        node("s", "Sigmoid", &["e"], vec![]),
        ret("r", "s", 0),
    ]);
    let lengths: Vec<usize> = (0..=70).chain([95, 96, 97, 127, 128, 129, 100_003]).collect();
    for n in lengths {
        let x = rand_f32(n, n as u64, -3.0, 3.0);
        let f = compiler().compile(&g, &[(DType::Float32, vec![n])]).unwrap();
        let got = f.call(&[f32t(&[n], x.clone())]).unwrap();
        let want: Vec<f32> = x
            .iter()
            .map(|&v| {
                let e = ((v * 0.5).tanh().exp() - v) as f64;
                (1.0 / (1.0 + (-e).exp())) as f32
            })
            .collect();
        assert_close(got[0].as_f32().unwrap(), &want, 1e-5, &format!("length {n}"));
    }
}

/// Bool inputs (a row and a broadcast one) and bool outputs keep a loop vectorised — bytes
/// widened to lane masks and narrowed back four at a time, in the tiles beside a tile
/// routine too — and give the reference's results at every length around the unrolled
/// loop, the four-element loop, the scalar tail and whole tiles.
#[test]
fn bool_inputs_and_outputs_stay_vectorised_at_every_length() {
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        arg("y", 1, DType::Float32),
        arg("m", 2, DType::Bool),
        arg("k", 3, DType::Bool),
        node("e", "Exp", &["x"], vec![]),
        node("c", "Greater", &["e", "y"], vec![]),
        node("s", "SelectV2", &["m", "e", "x"], vec![]),
        node("t", "LogicalAnd", &["m", "k"], vec![]),
        node("u", "LogicalOr", &["c", "t"], vec![]),
        node("v", "SelectV2", &["u", "s", "y"], vec![]),
        ret("r0", "s", 0),
        ret("r1", "u", 1),
        ret("r2", "v", 2),
        ret("r3", "c", 3),
        ret("r4", "e", 4),
    ]);
    let lengths: Vec<usize> = (0..=70).chain([255, 256, 257, 300, 1000, 100_003]).collect();
    for n in lengths {
        for k in [false, true] {
            let x = rand_f32(n, n as u64, -2.0, 2.0);
            let y = rand_f32(n, n as u64 + 1, 0.0, 3.0);
            let m: Vec<bool> = (0..n).map(|i| (i * 7 + n) % 3 != 0).collect();
            let f = compiler()
                .compile(
                    &g,
                    &[
                        (DType::Float32, vec![n]),
                        (DType::Float32, vec![n]),
                        (DType::Bool, vec![n]),
                        (DType::Bool, vec![1]),
                    ],
                )
                .unwrap();
            let desc = f.describe();
            assert!(desc.iter().all(|d| !d.contains("scalar")), "{desc:?}");
            let got = f
                .call(&[
                    f32t(&[n], x.clone()),
                    f32t(&[n], y.clone()),
                    Tensor::from_bool(vec![n], m.clone()).unwrap(),
                    Tensor::from_bool(vec![1], vec![k]).unwrap(),
                ])
                .unwrap();
            // The JIT's exp (the tile routines', bit-identical to its f32x4 code), not libm's.
            let e = got[4].as_f32().unwrap().to_vec();
            let c: Vec<bool> = e.iter().zip(&y).map(|(&e, &y)| e > y).collect();
            let s: Vec<f32> = (0..n).map(|i| if m[i] { e[i] } else { x[i] }).collect();
            let u: Vec<bool> = (0..n).map(|i| c[i] || (m[i] && k)).collect();
            let v: Vec<f32> = (0..n).map(|i| if u[i] { s[i] } else { y[i] }).collect();
            assert_close(&e, &x.iter().map(|v| v.exp()).collect::<Vec<_>>(), 1e-6, "exp");
            assert_eq!(got[0].as_f32().unwrap(), &s[..], "s, length {n}");
            assert_eq!(got[1].as_bool().unwrap(), &u[..], "u, length {n} k {k}");
            assert_eq!(got[2].as_f32().unwrap(), &v[..], "v, length {n}");
            assert_eq!(got[3].as_bool().unwrap(), &c[..], "c, length {n}");
        }
    }
}

#[test]
fn a_broadcast_joins_its_consumers_loop() {
    // The gradient of a Mean over N·H·W (every BatchNorm's backward pass):
    // dy[C] → Reshape [1,1,1,C] → BroadcastTo [N,H,W,C] → RealDiv by N·H·W → Mul by x.
    let (n, h, w, c) = (4, 5, 6, 8);
    let g = graph(vec![
        arg("dy", 0, DType::Float32),
        arg("x", 1, DType::Float32),
        ints("s1", &[1, 1, 1, c as i32]),
        node("r", "Reshape", &["dy", "s1"], vec![]),
        ints("s4", &[n as i32, h as i32, w as i32, c as i32]),
        node("b", "BroadcastTo", &["r", "s4"], vec![]),
        konst("k", Tensor::from_f32(vec![], vec![(n * h * w) as f32]).unwrap()),
        node("d", "RealDiv", &["b", "k"], vec![]),
        node("m", "Mul", &["d", "x"], vec![]),
        ret("r0", "m", 0),
        // A broadcast nothing else reads is a loop of its own, never an alias of its operand.
        ints("s2", &[3, c as i32]),
        node("b2", "BroadcastTo", &["dy", "s2"], vec![]),
        ret("r1", "b2", 1),
        // A constant broadcast is folded.
        konst("kc", Tensor::from_f32(vec![2], vec![1.5, -2.0]).unwrap()),
        ints("s3", &[2, 2]),
        node("bc", "BroadcastTo", &["kc", "s3"], vec![]),
        ret("r2", "bc", 2),
    ]);
    let f = compiler().compile(&g, &[(DType::Float32, vec![c]), (DType::Float32, vec![n, h, w, c])]).unwrap();
    let desc = f.describe();
    assert!(desc.iter().all(|d| !d.contains("Strided")), "{desc:?}");
    assert!(desc.iter().any(|d| d.contains("fused 3 ops")), "{desc:?}");
    let dy = rand_f32(c, 5, -1.0, 1.0);
    let x = rand_f32(n * h * w * c, 6, -1.0, 1.0);
    let got = f.call(&[f32t(&[c], dy.clone()), f32t(&[n, h, w, c], x.clone())]).unwrap();
    let want: Vec<f32> = x.iter().enumerate().map(|(i, &xv)| dy[i % c] / (n * h * w) as f32 * xv).collect();
    assert_eq!(got[0].as_f32().unwrap(), &want[..]);
    assert_eq!(got[1].shape, vec![3, c]);
    let rows: Vec<f32> = (0..3).flat_map(|_| dy.iter().copied()).collect();
    assert_eq!(got[1].as_f32().unwrap(), &rows[..]);
    assert_eq!(got[2].shape, vec![2, 2]);
    assert_eq!(got[2].as_f32().unwrap(), &[1.5, -2.0, 1.5, -2.0]);
}

/// `IsFinite` (one per gradient in every loss-scaled mixed-precision step): false for ±inf
/// and NaN, true for everything else, subnormals and the largest floats included — in the
/// float32 vector loop with its tails and in the float64 scalar loop.
#[test]
fn is_finite_in_float32_and_float64() {
    let xs = [0.0f32, -0.0, 1.0, -3.5, f32::MAX, f32::MIN, 1e-45, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 7.0];
    for dtype in [DType::Float32, DType::Float64] {
        let g = graph(vec![
            arg("x", 0, dtype),
            node("y", "IsFinite", &["x"], vec![("T", AttrValue::Type(dtype))]),
            ret("r", "y", 0),
        ]);
        let f = compiler().compile(&g, &[(dtype, vec![xs.len()])]).unwrap();
        let input = match dtype {
            DType::Float32 => f32t(&[xs.len()], xs.to_vec()),
            _ => Tensor::from_f64(vec![xs.len()], xs.iter().map(|&x| f64::from(x)).collect()).unwrap(),
        };
        let out = f.call(&[input]).unwrap();
        let want: Vec<bool> = xs.iter().map(|x| x.is_finite()).collect();
        assert_eq!(out[0].as_bool().unwrap(), want.as_slice(), "{dtype}");
    }
}

/// `Round` ties to even (2.5 → 2, −0.5 → −0) and `SoftsignGrad`'s `dy / (1 + |x|)²` bit for
/// bit as the interpreter computes them.
#[test]
fn round_ties_to_even_and_softsign_gradient() {
    let xs = [0.5f32, 1.5, 2.5, -0.5, -2.5, 3.49, -7.5, 1e9, 0.0];
    let g = graph(vec![arg("x", 0, DType::Float32), node("o", "Round", &["x"], vec![]), ret("r", "o", 0)]);
    let f = compiler().compile(&g, &[(DType::Float32, vec![xs.len()])]).unwrap();
    let got = f.call(&[f32t(&[xs.len()], xs.to_vec())]).unwrap();
    let want: Vec<u32> = xs.iter().map(|x| x.round_ties_even().to_bits()).collect();
    assert_eq!(got[0].as_f32().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>(), want);
    let n = 37;
    let (dy, x) = (rand_f32(n, 3, -2.0, 2.0), rand_f32(n, 4, -9.0, 9.0));
    let g = graph(vec![
        arg("dy", 0, DType::Float32),
        arg("x", 1, DType::Float32),
        node("o", "SoftsignGrad", &["dy", "x"], vec![]),
        ret("r", "o", 0),
    ]);
    let f = compiler().compile(&g, &[(DType::Float32, vec![n]), (DType::Float32, vec![n])]).unwrap();
    let got = f.call(&[f32t(&[n], dy.clone()), f32t(&[n], x.clone())]).unwrap();
    let want: Vec<f32> = dy.iter().zip(&x).map(|(&d, &v)| d / ((1.0 + v.abs()) * (1.0 + v.abs()))).collect();
    assert_eq!(got[0].as_f32().unwrap(), want.as_slice());
}
