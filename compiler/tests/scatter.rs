//! TensorScatter{Add,Sub,Update,Max,Min} against a brute-force reference (int32 and int64
//! indices, duplicates, index depth 1 and 2, fused with elementwise neighbours), `_Arg` →
//! `Identity` → `_Retval` passthroughs, GatherV2 with either index dtype, and Unsupported
//! (never a panic) for what the compiler does not lower.
use crate::common::*;
use autoclust_compiler::CompileError;
use autoclust_graph::{AttrValue, DType, ListValue, Tensor};

const KINDS: [&str; 5] =
    ["TensorScatterAdd", "TensorScatterSub", "TensorScatterUpdate", "TensorScatterMax", "TensorScatterMin"];

/// Applies updates one slice at a time, the way TensorFlow's CPU kernel walks the indices.
fn reference(op: &str, x: &[f32], shape: &[usize], idx: &[i64], depth: usize, upd: &[f32]) -> Vec<f32> {
    let mut out = x.to_vec();
    let slice: usize = shape[depth..].iter().product();
    for (k, ix) in idx.chunks(depth).enumerate() {
        let mut row = 0usize;
        for (d, &i) in ix.iter().enumerate() {
            row = row * shape[d] + i as usize;
        }
        for j in 0..slice {
            let (o, u) = (&mut out[row * slice + j], upd[k * slice + j]);
            *o = match op {
                "TensorScatterAdd" => *o + u,
                "TensorScatterSub" => *o - u,
                "TensorScatterUpdate" => u,
                "TensorScatterMax" => o.max(u),
                _ => o.min(u),
            };
        }
    }
    out
}

fn index_tensor(dtype: DType, shape: &[usize], v: &[i64]) -> Tensor {
    match dtype {
        DType::Int64 => Tensor::from_i64(shape.to_vec(), v.to_vec()).unwrap(),
        _ => Tensor::from_i32(shape.to_vec(), v.iter().map(|&i| i as i32).collect()).unwrap(),
    }
}

fn scatter_body(op: &str, idx_dtype: DType) -> autoclust_graph::Graph {
    graph(vec![
        arg("x", 0, DType::Float32),
        arg("i", 1, idx_dtype),
        arg("u", 2, DType::Float32),
        node("s", op, &["x", "i", "u"], vec![]),
        ret("r", "s", 0),
    ])
}

#[test]
fn scatter_ops_match_reference_with_duplicates() {
    // Depth 1 into [6, 3] (rows, with row 2 three times) and depth 2 into [4, 5] (elements).
    let cases: [(&[usize], &[usize], Vec<i64>); 2] =
        [(&[6, 3], &[5, 1], vec![2, 0, 2, 5, 2]), (&[4, 5], &[4, 2], vec![1, 4, 3, 0, 1, 4, 0, 0])];
    for (shape, ishape, idx) in cases {
        let depth = ishape[1];
        let n: usize = shape.iter().product();
        let ushape: Vec<usize> = std::iter::once(ishape[0]).chain(shape[depth..].iter().copied()).collect();
        let un: usize = ushape.iter().product();
        let x = rand_f32(n, 5, -1.0, 1.0);
        let u = rand_f32(un, 6, -1.0, 1.0);
        for op in KINDS {
            for idt in [DType::Int32, DType::Int64] {
                let f = compiler()
                    .compile(
                        &scatter_body(op, idt),
                        &[(DType::Float32, shape.to_vec()), (idt, ishape.to_vec()), (DType::Float32, ushape.clone())],
                    )
                    .unwrap();
                let out = f
                    .call(&[f32t(shape, x.clone()), index_tensor(idt, ishape, &idx), f32t(&ushape, u.clone())])
                    .unwrap();
                let want = reference(op, &x, shape, &idx, depth, &u);
                assert_close(out[0].as_f32().unwrap(), &want, 1e-6, &format!("{op} {idt} {shape:?}"));
                assert_eq!(out[0].shape, shape.to_vec());
            }
        }
    }
}

#[test]
fn scatter_add_on_int32_and_fused_with_neighbours() {
    let g = graph(vec![
        arg("x", 0, DType::Int32),
        arg("i", 1, DType::Int64),
        arg("u", 2, DType::Int32),
        node("s", "TensorScatterAdd", &["x", "i", "u"], vec![]),
        ret("r", "s", 0),
    ]);
    let f = compiler().compile(&g, &[(DType::Int32, vec![4]), (DType::Int64, vec![3, 1]), (DType::Int32, vec![3])]);
    let out = f
        .unwrap()
        .call(&[
            Tensor::from_i32(vec![4], vec![1, 2, 3, 4]).unwrap(),
            index_tensor(DType::Int64, &[3, 1], &[3, 0, 3]),
            Tensor::from_i32(vec![3], vec![10, 20, 30]).unwrap(),
        ])
        .unwrap();
    assert_eq!(out[0].to_i64_vec().unwrap(), vec![21, 2, 3, 44]);

    // Elementwise ops before and after the scatter (as the encapsulation pass emits them).
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        arg("i", 1, DType::Int32),
        arg("u", 2, DType::Float32),
        node("x2", "Mul", &["x", "x"], vec![]),
        node("u2", "Neg", &["u"], vec![]),
        node("s", "TensorScatterSub", &["x2", "i", "u2"], vec![]),
        node("t", "Tanh", &["s"], vec![]),
        ret("r", "t", 0),
    ]);
    let f = compiler()
        .compile(&g, &[(DType::Float32, vec![5, 2]), (DType::Int32, vec![2, 1]), (DType::Float32, vec![2, 2])])
        .unwrap();
    let x = rand_f32(10, 1, -1.0, 1.0);
    let u = rand_f32(4, 2, -1.0, 1.0);
    let out =
        f.call(&[f32t(&[5, 2], x.clone()), index_tensor(DType::Int32, &[2, 1], &[4, 1]), f32t(&[2, 2], u.clone())]);
    let x2: Vec<f32> = x.iter().map(|v| v * v).collect();
    let u2: Vec<f32> = u.iter().map(|v| -v).collect();
    let want: Vec<f32> =
        reference("TensorScatterSub", &x2, &[5, 2], &[4, 1], 1, &u2).iter().map(|v| v.tanh()).collect();
    assert_close(out.unwrap()[0].as_f32().unwrap(), &want, 1e-5, "fused scatter");
}

#[test]
fn scatter_errors_are_reported_not_panics() {
    let f = compiler()
        .compile(
            &scatter_body("TensorScatterAdd", DType::Int32),
            &[(DType::Float32, vec![3]), (DType::Int32, vec![1, 1]), (DType::Float32, vec![1])],
        )
        .unwrap();
    for bad in [3i64, -1] {
        let r = f.call(&[f32t(&[3], vec![0.0; 3]), index_tensor(DType::Int32, &[1, 1], &[bad]), f32t(&[1], vec![1.0])]);
        assert!(matches!(r, Err(CompileError::Runtime { ref node, .. }) if node == "s"), "{r:?}");
    }
    // Updates that do not fit the indices, and float indices.
    let r = compiler().compile(
        &scatter_body("TensorScatterAdd", DType::Int32),
        &[(DType::Float32, vec![3]), (DType::Int32, vec![2, 1]), (DType::Float32, vec![3])],
    );
    assert!(matches!(r, Err(CompileError::Invalid(_))), "{r:?}");
    let r = compiler().compile(
        &scatter_body("TensorScatterMax", DType::Float32),
        &[(DType::Float32, vec![3]), (DType::Float32, vec![2, 1]), (DType::Float32, vec![2])],
    );
    assert!(matches!(r, Err(CompileError::Unsupported { ref node, .. }) if node == "s"), "{r:?}");
}

#[test]
fn identity_passthroughs_of_args_to_outputs() {
    for dt in [DType::Float32, DType::Int64, DType::Bool] {
        let g = graph(vec![
            arg("a", 0, dt),
            arg("b", 1, DType::Float32),
            node("ia", "Identity", &["a"], vec![("T", AttrValue::Type(dt))]),
            node("ib", "Identity", &["b"], vec![]),
            node("ib2", "Identity", &["ib"], vec![]),
            ret("r0", "ia", 0),
            ret("r1", "b", 1),
            ret("r2", "ib2", 2),
            ret("r3", "a", 3),
        ]);
        let a = match dt {
            DType::Float32 => f32t(&[3], vec![1.0, -2.0, 3.5]),
            DType::Int64 => Tensor::from_i64(vec![3], vec![7, -8, 1 << 40]).unwrap(),
            _ => Tensor::from_bool(vec![3], vec![true, false, true]).unwrap(),
        };
        let b = f32t(&[2, 2], vec![0.5, 1.5, -0.0, f32::NAN]);
        let f = compiler().compile(&g, &[(dt, vec![3]), (DType::Float32, vec![2, 2])]).unwrap();
        let out = f.call(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(out.len(), 4);
        for (o, want) in out.iter().zip([&a, &b, &b, &a]) {
            assert_eq!((o.dtype, &o.shape), (want.dtype, &want.shape));
            let (g, w) = (o.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
            assert!(g.iter().zip(&w).all(|(x, y)| x.to_bits() == y.to_bits()), "{dt}: {g:?} vs {w:?}");
        }
    }
}

#[test]
fn gather_v2_accepts_int32_and_int64_indices_and_axes() {
    let params: Vec<f32> = (0..12).map(|v| v as f32).collect();
    for idt in [DType::Int32, DType::Int64] {
        for (axis, want) in [
            (0i64, vec![8.0, 9.0, 10.0, 11.0, 0.0, 1.0, 2.0, 3.0, 8.0, 9.0, 10.0, 11.0]),
            (1, vec![2.0, 0.0, 2.0, 6.0, 4.0, 6.0, 10.0, 8.0, 10.0]),
        ] {
            let axis_t = match idt {
                DType::Int64 => Tensor::scalar_i64(axis),
                _ => Tensor::scalar_i32(axis as i32),
            };
            let g = graph(vec![
                arg("p", 0, DType::Float32),
                arg("i", 1, idt),
                konst("ax", axis_t),
                node("g", "GatherV2", &["p", "i", "ax"], vec![]),
                ret("r", "g", 0),
            ]);
            let f = compiler().compile(&g, &[(DType::Float32, vec![3, 4]), (idt, vec![3])]).unwrap();
            let out = f.call(&[f32t(&[3, 4], params.clone()), index_tensor(idt, &[3], &[2, 0, 2])]).unwrap();
            assert_eq!(out[0].as_f32().unwrap(), &want[..], "{idt} axis {axis}");
        }
    }
}

#[test]
fn unknown_ops_and_bad_arity_are_unsupported_or_invalid_never_panics() {
    let ops = ["Unique", "TensorScatterNd", "ScatterNd", "Where", "Conv2D", "TopKV2", "TensorScatterAdd", "GatherV2"];
    for op in ops {
        for arity in 0..3usize {
            let inputs: Vec<&str> = ["x", "y"].iter().take(arity).copied().collect();
            let g = graph(vec![
                arg("x", 0, DType::Float32),
                arg("y", 1, DType::Int32),
                node("n", op, &inputs, vec![]),
                ret("r", "n", 0),
            ]);
            let r = compiler().compile(&g, &[(DType::Float32, vec![4]), (DType::Int32, vec![1])]);
            assert!(
                matches!(r, Err(CompileError::Unsupported { .. }) | Err(CompileError::Invalid(_))),
                "{op}/{arity}: {r:?}"
            );
        }
    }
}

#[test]
fn axis_operands_on_scalars_are_errors_not_panics() {
    let cases: Vec<Vec<autoclust_graph::RawNode>> = vec![
        vec![ints("ax", &[0]), node("n", "Sum", &["x", "ax"], vec![])],
        vec![ints("ax", &[-1]), node("n", "Max", &["x", "ax"], vec![])],
        vec![konst("ax", Tensor::scalar_i32(0)), node("n", "ConcatV2", &["x", "x", "ax"], vec![])],
        vec![ints("p", &[0]), node("n", "Transpose", &["x", "p"], vec![])],
        vec![node("n", "Squeeze", &["x"], vec![("squeeze_dims", AttrValue::List(ListValue::I(vec![0])))])],
        vec![konst("ax", Tensor::scalar_i32(0)), node("n", "GatherV2", &["x", "y", "ax"], vec![])],
        vec![node("n", "TensorScatterUpdate", &["x", "y", "x"], vec![])],
    ];
    for mut nodes in cases {
        let name = nodes.last().map(|n| n.op.clone()).unwrap_or_default();
        nodes.insert(0, arg("x", 0, DType::Float32));
        nodes.insert(1, arg("y", 1, DType::Int32));
        nodes.push(ret("r", "n", 0));
        let r = compiler().compile(&graph(nodes), &[(DType::Float32, vec![]), (DType::Int32, vec![1])]);
        assert!(matches!(r, Err(CompileError::Unsupported { .. }) | Err(CompileError::Invalid(_))), "{name}: {r:?}");
    }
}

/// The runtime's training-step pattern over a table big enough for recycled buffers: the
/// "variable" holds the table, each call scatters into it and the result replaces it. The
/// compiled function recycles the buffer the variable released and copies only the rows
/// the previous step changed; the result must still equal a from-scratch reference after
/// every step, and no value anyone still holds may ever change (some old tables are kept
/// alive on purpose, so the pool must skip them and fall back to full copies).
#[test]
fn repeated_scatter_steps_recycle_buffers_and_stay_exact() {
    let (rows, cols, batch) = (600usize, 16usize, 7usize);
    for op in KINDS {
        let f = compiler().compile(
            &scatter_body(op, DType::Int32),
            &[(DType::Float32, vec![rows, cols]), (DType::Int32, vec![batch, 1]), (DType::Float32, vec![batch, cols])],
        );
        let f = f.unwrap();
        let init = rand_f32(rows * cols, 11, -1.0, 1.0);
        let mut want = init.clone();
        let mut var = f32t(&[rows, cols], init);
        let mut kept: Vec<(Tensor, Vec<f32>)> = Vec::new();
        for step in 0..40u64 {
            // Indices move around the table and repeat within a batch now and then.
            let idx: Vec<i64> = (0..batch as u64).map(|k| ((step * 37 + k * k * 13) % rows as u64) as i64).collect();
            let upd = rand_f32(batch * cols, 100 + step, -0.5, 0.5);
            let out = f
                .call(&[var.clone(), index_tensor(DType::Int32, &[batch, 1], &idx), f32t(&[batch, cols], upd.clone())])
                .unwrap()
                .remove(0);
            want = reference(op, &want, &[rows, cols], &idx, 1, &upd);
            assert_eq!(out.as_f32().unwrap(), &want[..], "{op} step {step}");
            if step % 9 == 4 {
                kept.push((var.clone(), var.as_f32().unwrap().to_vec()));
            }
            var = out;
            for (t, snapshot) in &kept {
                assert_eq!(t.as_f32().unwrap(), &snapshot[..], "{op} step {step}: a held value changed");
            }
        }
    }
}

/// A scatter into a donated table (an embedding's sparse update written back to its
/// variable) is computed in the table's own buffer: the output is the input's buffer, with
/// the values the undonated call computes (duplicate indices included), for every kind and
/// for two tables updated side by side on two threads; a table someone else still holds is
/// never written, and an index out of range fails before anything is written, handing the
/// table back as it was.
#[test]
fn scatter_into_a_donated_table_writes_in_place() {
    let (rows, width, n) = (4096usize, 16usize, 64usize);
    for op in KINDS {
        let g = graph(vec![
            arg("t0", 0, DType::Float32),
            arg("t1", 1, DType::Float32),
            arg("i", 2, DType::Int32),
            arg("u", 3, DType::Float32),
            arg("i1", 4, DType::Int32),
            node("u1", "Neg", &["u"], vec![]),
            node("s0", op, &["t0", "i", "u"], vec![]),
            node("s1", op, &["t1", "i1", "u1"], vec![]),
            ret("r0", "s0", 0),
            ret("r1", "s1", 1),
        ]);
        let sig = [
            (DType::Float32, vec![rows, width]),
            (DType::Float32, vec![rows, width]),
            (DType::Int32, vec![n, 1]),
            (DType::Float32, vec![n, width]),
            (DType::Int32, vec![n, 1]),
        ];
        let idx: Vec<i64> = (0..n as i64).map(|k| (k * 37) % 50).collect(); // duplicates
                                                                            // `bad`: table 1's indices end out of range (table 0's are fine).
        let inputs = |bad: bool| -> Vec<Tensor> {
            let mut ix = idx.clone();
            if bad {
                ix[n - 1] = rows as i64;
            }
            vec![
                f32t(&[rows, width], rand_f32(rows * width, 7, -1.0, 1.0)),
                f32t(&[rows, width], rand_f32(rows * width, 8, -1.0, 1.0)),
                index_tensor(DType::Int32, &[n, 1], &idx),
                f32t(&[n, width], rand_f32(n * width, 9, -1.0, 1.0)),
                index_tensor(DType::Int32, &[n, 1], &ix),
            ]
        };
        let want = compiler().compile(&g, &sig).unwrap().call(&inputs(false)).unwrap();
        let x = rand_f32(rows * width, 7, -1.0, 1.0);
        let u = rand_f32(n * width, 9, -1.0, 1.0);
        assert_eq!(want[0].as_f32().unwrap(), &reference(op, &x, &[rows, width], &idx, 1, &u)[..], "{op}");
        for threads in [1, 2] {
            let f = autoclust_compiler::Compiler::new(autoclust_compiler::CompilerOptions {
                threads,
                ..Default::default()
            })
            .compile(&g, &sig)
            .unwrap();
            let pairs = f.in_place_pairs();
            assert_eq!(pairs, vec![(0, 0), (1, 1)], "{op}: both tables may be scattered in place");
            for round in 0..4 {
                let ins = inputs(false);
                let at: Vec<usize> = ins[..2].iter().map(|t| t.as_f32().unwrap().as_ptr() as usize).collect();
                // In rounds 2 and 3 someone else (a concurrent reader) holds table 1.
                let held = (round >= 2).then(|| ins[1].clone());
                let got = f.call_donating(ins, &pairs).unwrap_or_else(|(e, _)| panic!("{e}"));
                for j in 0..2 {
                    assert_eq!(got[j].as_f32().unwrap(), want[j].as_f32().unwrap(), "{op} output {j}");
                    let out_at = got[j].as_f32().unwrap().as_ptr() as usize;
                    if j == 1 && held.is_some() {
                        assert_ne!(out_at, at[j], "{op}: a shared table is never written");
                    } else {
                        assert_eq!(out_at, at[j], "{op}: output {j} is its table's buffer ({threads} threads)");
                    }
                }
                if let Some(h) = held {
                    assert_eq!(h.as_f32().unwrap(), inputs(false)[1].as_f32().unwrap(), "{op}: held table intact");
                }
            }
            // An index of the second scatter out of range: an error naming it, and both
            // tables handed back unwritten (the first scatter checked the second's indices).
            let (e, back) = f.call_donating(inputs(true), &pairs).expect_err("index out of range");
            assert!(matches!(e, CompileError::Runtime { ref node, .. } if node == "s1"), "{e:?}");
            let fresh = inputs(false);
            let mut given: Vec<usize> = back.iter().map(|(i, _)| *i).collect();
            given.sort();
            assert_eq!(given, vec![0, 1], "{op}: both tables come back");
            for (i, t) in &back {
                assert_eq!(t.as_f32().unwrap(), fresh[*i].as_f32().unwrap(), "{op}: table {i} handed back intact");
            }
        }
    }
}
