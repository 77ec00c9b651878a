//! Reductions, softmax and cross-entropy, MatMul (transposes, fused epilogue), data
//! movement, compile-time shape ops, the compile cache, Unsupported errors and CLIF dumps.
use crate::common::*;
use autoclust_compiler::{CompileCache, CompileError, Compiler, CompilerOptions};
use autoclust_graph::{AttrValue, DType, Tensor, TensorData};

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Reference reduction by brute force over coordinates.
fn ref_reduce(x: &[f32], shape: &[usize], axes: &[usize], op: &str) -> Vec<f32> {
    let kept: Vec<usize> = (0..shape.len()).filter(|d| !axes.contains(d)).collect();
    let out_shape: Vec<usize> = kept.iter().map(|&d| shape[d]).collect();
    let on: usize = out_shape.iter().product();
    let count: usize = axes.iter().map(|&a| shape[a]).product();
    let mut acc: Vec<Vec<f64>> = vec![Vec::new(); on];
    let st = strides(shape);
    let ost = strides(&out_shape);
    for (i, &v) in x.iter().enumerate() {
        let mut o = 0;
        for (k, &d) in kept.iter().enumerate() {
            o += (i / st[d]) % shape[d] * ost[k];
        }
        acc[o].push(v as f64);
    }
    acc.iter()
        .map(|a| match op {
            "Sum" => a.iter().sum::<f64>() as f32,
            "Mean" => (a.iter().sum::<f64>() / count as f64) as f32,
            "Max" => a.iter().copied().fold(f64::NEG_INFINITY, f64::max) as f32,
            "Min" => a.iter().copied().fold(f64::INFINITY, f64::min) as f32,
            "Prod" => a.iter().product::<f64>() as f32,
            _ => unreachable!(),
        })
        .collect()
}

#[test]
fn reductions_over_various_axes() {
    let shape = [3usize, 4, 5, 6];
    let x = rand_f32(shape.iter().product(), 9, 0.5, 1.5);
    let axes_sets: &[&[i32]] =
        &[&[0], &[1], &[3], &[-1], &[0, 1], &[1, 2], &[0, 2], &[1, 3], &[0, 1, 2, 3], &[0, 3], &[]];
    for op in ["Sum", "Mean", "Max", "Min", "Prod"] {
        for axes in axes_sets {
            for keep in [false, true] {
                let g = graph(vec![
                    arg("x", 0, DType::Float32),
                    ints("ax", axes),
                    node("s", op, &["x", "ax"], vec![("keep_dims", AttrValue::B(keep))]),
                    ret("r", "s", 0),
                ]);
                let f = compiler().compile(&g, &[(DType::Float32, shape.to_vec())]).unwrap();
                let got = f.call(&[f32t(&shape, x.clone())]).unwrap();
                let norm: Vec<usize> =
                    axes.iter().map(|&a| if a < 0 { (a + 4) as usize } else { a as usize }).collect();
                let want = ref_reduce(&x, &shape, &norm, op);
                let want_shape: Vec<usize> =
                    (0..4).filter_map(|d| if norm.contains(&d) { keep.then_some(1) } else { Some(shape[d]) }).collect();
                assert_eq!(got[0].shape, want_shape, "{op} {axes:?} {keep}");
                assert_close(got[0].as_f32().unwrap(), &want, 1e-5, &format!("{op} {axes:?}"));
            }
        }
    }
}

#[test]
fn bias_add_grad_softmax_and_log_softmax() {
    let (b, c) = (6, 10);
    let x = rand_f32(b * c, 3, -5.0, 5.0);
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        node("bg", "BiasAddGrad", &["x"], vec![]),
        node("sm", "Softmax", &["x"], vec![]),
        node("lsm", "LogSoftmax", &["x"], vec![]),
        ret("r0", "bg", 0),
        ret("r1", "sm", 1),
        ret("r2", "lsm", 2),
    ]);
    let f = compiler().compile(&g, &[(DType::Float32, vec![b, c])]).unwrap();
    let got = f.call(&[f32t(&[b, c], x.clone())]).unwrap();
    assert_close(got[0].as_f32().unwrap(), &ref_reduce(&x, &[b, c], &[0], "Sum"), 1e-5, "BiasAddGrad");
    let mut sm = vec![0f32; b * c];
    let mut lsm = vec![0f32; b * c];
    for r in 0..b {
        let row: Vec<f64> = x[r * c..(r + 1) * c].iter().map(|&v| v as f64).collect();
        let s: f64 = row.iter().map(|v| v.exp()).sum();
        for k in 0..c {
            sm[r * c + k] = (row[k].exp() / s) as f32;
            lsm[r * c + k] = (row[k] - s.ln()) as f32;
        }
    }
    assert_close(got[1].as_f32().unwrap(), &sm, 1e-5, "Softmax");
    assert_close(got[2].as_f32().unwrap(), &lsm, 1e-5, "LogSoftmax");
}

#[test]
fn cross_entropy_ops() {
    let (b, c) = (4, 7);
    let logits = rand_f32(b * c, 5, -3.0, 3.0);
    let labels_i: Vec<i32> = vec![0, 6, 3, 3];
    let mut onehot = vec![0f32; b * c];
    for (r, &l) in labels_i.iter().enumerate() {
        onehot[r * c + l as usize] = 1.0;
    }
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        arg("y", 1, DType::Float32),
        arg("yi", 2, DType::Int32),
        node("d", "SoftmaxCrossEntropyWithLogits", &["x", "y"], vec![]),
        node("s", "SparseSoftmaxCrossEntropyWithLogits", &["x", "yi"], vec![]),
        ret("r0", "d", 0),
        ret("r1", "d:1", 1),
        ret("r2", "s", 2),
        ret("r3", "s:1", 3),
    ]);
    let f = compiler()
        .compile(&g, &[(DType::Float32, vec![b, c]), (DType::Float32, vec![b, c]), (DType::Int32, vec![b])])
        .unwrap();
    let got = f
        .call(&[
            f32t(&[b, c], logits.clone()),
            f32t(&[b, c], onehot.clone()),
            Tensor::from_i32(vec![b], labels_i.clone()).unwrap(),
        ])
        .unwrap();
    let mut loss = vec![0f32; b];
    let mut back = vec![0f32; b * c];
    for r in 0..b {
        let row: Vec<f64> = logits[r * c..(r + 1) * c].iter().map(|&v| v as f64).collect();
        let s: f64 = row.iter().map(|v| v.exp()).sum();
        loss[r] = (s.ln() - row[labels_i[r] as usize]) as f32;
        for k in 0..c {
            back[r * c + k] = (row[k].exp() / s - onehot[r * c + k] as f64) as f32;
        }
    }
    for (i, what) in [(0, "dense loss"), (2, "sparse loss")] {
        assert_close(got[i].as_f32().unwrap(), &loss, 1e-5, what);
    }
    for (i, what) in [(1, "dense backprop"), (3, "sparse backprop")] {
        let g = got[i].as_f32().unwrap();
        for (x, y) in g.iter().zip(&back) {
            assert!((x - y).abs() < 1e-6, "{what}: {x} vs {y}");
        }
    }
}

fn ref_matmul(a: &[f32], b: &[f32], m: usize, k: usize, n: usize, ta: bool, tb: bool) -> Vec<f32> {
    let mut c = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut s = 0f64;
            for p in 0..k {
                let av = if ta { a[p * m + i] } else { a[i * k + p] };
                let bv = if tb { b[j * k + p] } else { b[p * n + j] };
                s += av as f64 * bv as f64;
            }
            c[i * n + j] = s as f32;
        }
    }
    c
}

#[test]
fn matmul_with_transposes_and_fused_epilogue() {
    let (m, k, n) = (9, 13, 11);
    for ta in [false, true] {
        for tb in [false, true] {
            let a_shape = if ta { vec![k, m] } else { vec![m, k] };
            let b_shape = if tb { vec![n, k] } else { vec![k, n] };
            let a = rand_f32(m * k, 1, -1.0, 1.0);
            let b = rand_f32(k * n, 2, -1.0, 1.0);
            let bias = rand_f32(n, 3, -1.0, 1.0);
            let g = graph(vec![
                arg("a", 0, DType::Float32),
                arg("b", 1, DType::Float32),
                arg("bias", 2, DType::Float32),
                node(
                    "mm",
                    "MatMul",
                    &["a", "b"],
                    vec![("transpose_a", AttrValue::B(ta)), ("transpose_b", AttrValue::B(tb))],
                ),
                node("ba", "BiasAdd", &["mm", "bias"], vec![]),
                node("re", "Relu", &["ba"], vec![]),
                node(
                    "mm2",
                    "MatMul",
                    &["a", "b"],
                    vec![("transpose_a", AttrValue::B(ta)), ("transpose_b", AttrValue::B(tb))],
                ),
                ret("r0", "re", 0),
                ret("r1", "mm2", 1),
            ]);
            let f = compiler()
                .compile(
                    &g,
                    &[(DType::Float32, a_shape.clone()), (DType::Float32, b_shape.clone()), (DType::Float32, vec![n])],
                )
                .unwrap();
            let desc = f.describe();
            assert!(desc.iter().any(|d| d.contains("gemm prologue")), "{desc:?}");
            assert!(desc.iter().any(|d| d.starts_with("gemm [")), "{desc:?}");
            let got =
                f.call(&[f32t(&a_shape, a.clone()), f32t(&b_shape, b.clone()), f32t(&[n], bias.clone())]).unwrap();
            let c = ref_matmul(&a, &b, m, k, n, ta, tb);
            let relu: Vec<f32> = c.iter().enumerate().map(|(i, &v)| (v + bias[i % n]).max(0.0)).collect();
            // f32 accumulation against an f64 reference: tolerance scales with k, not |c|.
            for (what, g, w) in [("epilogue", &got[0], &relu), ("plain", &got[1], &c)] {
                for (x, y) in g.as_f32().unwrap().iter().zip(w.iter()) {
                    assert!((x - y).abs() <= 1e-5 * (1.0 + y.abs()), "{what} ta={ta} tb={tb}: {x} vs {y}");
                }
            }
        }
    }
}

#[test]
fn data_movement_and_compile_time_shapes() {
    let x = rand_f32(2 * 3 * 4, 7, -1.0, 1.0);
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        ints("perm", &[2, 0, 1]),
        node("t", "Transpose", &["x", "perm"], vec![]),
        ints("b", &[0, 1, 1]),
        ints("s", &[2, 2, -1]),
        node("sl", "Slice", &["x", "b", "s"], vec![]),
        node("shape", "Shape", &["x"], vec![]),
        ints("m1", &[-1]),
        node("flat", "Reshape", &["x", "m1"], vec![]),
        konst("ax0", Tensor::scalar_i32(0)),
        node("cat", "ConcatV2", &["flat", "flat", "ax0"], vec![]),
        ints("bshape", &[3, 2, 3, 4]),
        node("bt", "BroadcastTo", &["x", "bshape"], vec![]),
        node("pk", "Pack", &["x", "x"], vec![("axis", AttrValue::I(1))]),
        konst("idx", Tensor::from_i32(vec![3], vec![2, 0, 2]).unwrap()),
        konst("gax", Tensor::scalar_i32(2)),
        node("ga", "GatherV2", &["x", "idx", "gax"], vec![]),
        ints("ssb", &[1, 0]),
        ints("sse", &[2, 3]),
        ints("sss", &[1, 2]),
        node("ss", "StridedSlice", &["x", "ssb", "sse", "sss"], vec![("shrink_axis_mask", AttrValue::I(1))]),
        node("z", "ZerosLike", &["x"], vec![]),
        node("size", "Size", &["x"], vec![]),
        ret("r0", "t", 0),
        ret("r1", "sl", 1),
        ret("r2", "shape", 2),
        ret("r3", "cat", 3),
        ret("r4", "bt", 4),
        ret("r5", "pk", 5),
        ret("r6", "ga", 6),
        ret("r7", "ss", 7),
        ret("r8", "z", 8),
        ret("r9", "size", 9),
    ]);
    let f = compiler().compile(&g, &[(DType::Float32, vec![2, 3, 4])]).unwrap();
    let got = f.call(&[f32t(&[2, 3, 4], x.clone())]).unwrap();
    let at = |i: usize, j: usize, k: usize| x[i * 12 + j * 4 + k];
    // Transpose [4,2,3]
    let t: Vec<f32> = (0..4)
        .flat_map(|k| (0..2).flat_map(move |i| (0..3).map(move |j| (k, i, j))))
        .map(|(k, i, j)| at(i, j, k))
        .collect();
    assert_eq!(got[0].shape, vec![4, 2, 3]);
    assert_eq!(got[0].as_f32().unwrap(), &t[..]);
    let sl: Vec<f32> = (0..2)
        .flat_map(|i| (1..3).flat_map(move |j| (1..4).map(move |k| (i, j, k))))
        .map(|(i, j, k)| at(i, j, k))
        .collect();
    assert_eq!(got[1].shape, vec![2, 2, 3]);
    assert_eq!(got[1].as_f32().unwrap(), &sl[..]);
    assert_eq!(got[2].as_i32().unwrap(), &[2, 3, 4]);
    let cat: Vec<f32> = x.iter().chain(x.iter()).copied().collect();
    assert_eq!(got[3].as_f32().unwrap(), &cat[..]);
    let bt: Vec<f32> = (0..3).flat_map(|_| x.iter().copied()).collect();
    assert_eq!(got[4].shape, vec![3, 2, 3, 4]);
    assert_eq!(got[4].as_f32().unwrap(), &bt[..]);
    assert_eq!(got[5].shape, vec![2, 2, 3, 4]);
    let pk: Vec<f32> =
        (0..2).flat_map(|i| (0..2).flat_map(move |_| (0..12).map(move |r| i * 12 + r))).map(|p| x[p]).collect();
    assert_eq!(got[5].as_f32().unwrap(), &pk[..]);
    let ga: Vec<f32> = (0..2)
        .flat_map(|i| (0..3).flat_map(move |j| [2, 0, 2].map(|k| (i, j, k))))
        .map(|(i, j, k)| at(i, j, k))
        .collect();
    assert_eq!(got[6].shape, vec![2, 3, 3]);
    assert_eq!(got[6].as_f32().unwrap(), &ga[..]);
    // x[1, 0:3:2, :] → [2,4]
    let ss: Vec<f32> = [0, 2].iter().flat_map(|&j| (0..4).map(move |k| (j, k))).map(|(j, k)| at(1, j, k)).collect();
    assert_eq!(got[7].shape, vec![2, 4]);
    assert_eq!(got[7].as_f32().unwrap(), &ss[..]);
    assert_eq!(got[8].as_f32().unwrap(), &[0.0; 24][..]);
    assert_eq!(got[9].as_i32().unwrap(), &[24]);
}

#[test]
fn broadcast_gradient_args_feed_a_sum() {
    // The gradient of x[4,3] + y[3] with respect to y: Sum over BroadcastGradientArgs' r1.
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        arg("y", 1, DType::Float32),
        node("sx", "Shape", &["x"], vec![]),
        node("sy", "Shape", &["y"], vec![]),
        node("bga", "BroadcastGradientArgs", &["sx", "sy"], vec![]),
        node("gy", "Sum", &["x", "bga:1"], vec![]),
        node("gr", "Reshape", &["gy", "sy"], vec![]),
        ret("r", "gr", 0),
    ]);
    let x = rand_f32(12, 1, -1.0, 1.0);
    let f = compiler().compile(&g, &[(DType::Float32, vec![4, 3]), (DType::Float32, vec![3])]).unwrap();
    let got = f.call(&[f32t(&[4, 3], x.clone()), f32t(&[3], vec![0.0; 3])]).unwrap();
    assert_eq!(got[0].shape, vec![3]);
    assert_close(got[0].as_f32().unwrap(), &ref_reduce(&x, &[4, 3], &[0], "Sum"), 1e-6, "bga");
}

#[test]
fn reductions_over_nothing_fuse_with_their_neighbours() {
    // The gradient of `x * y` for operands of one shape, as TF2 writes it inside a loop
    // body: `Sum(dz * y, r0)` over BroadcastGradientArgs' (empty) axes, `Reshape` to x's
    // shape, then the next op. Reducing nothing and reshaping to the same shape keep every
    // element in place, so the whole chain is one fused loop (it was a loop, a Reduce
    // kernel, a view and a second loop); a Sum over an extent-1 axis is a view.
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        arg("y", 1, DType::Float32),
        arg("dz", 2, DType::Float32),
        arg("w", 3, DType::Float32),
        node("sx", "Shape", &["x"], vec![]),
        node("sy", "Shape", &["y"], vec![]),
        node("bga", "BroadcastGradientArgs", &["sx", "sy"], vec![]),
        node("m", "Mul", &["dz", "y"], vec![]),
        node("s", "Sum", &["m", "bga:0"], vec![]),
        node("gx", "Reshape", &["s", "sx"], vec![]),
        node("out", "Tanh", &["gx"], vec![]),
        ints("zero", &[0]),
        node("sw", "Sum", &["w", "zero"], vec![]),
        ret("r0", "out", 0),
        ret("r1", "sw", 1),
    ]);
    let (n, m) = (4, 3);
    let (x, y, dz) = (rand_f32(n * m, 1, -1.0, 1.0), rand_f32(n * m, 2, -1.0, 1.0), rand_f32(n * m, 3, -1.0, 1.0));
    let w = rand_f32(m, 4, -1.0, 1.0);
    let s = vec![n, m];
    let f = compiler()
        .compile(
            &g,
            &[
                (DType::Float32, s.clone()),
                (DType::Float32, s.clone()),
                (DType::Float32, s.clone()),
                (DType::Float32, vec![1, m]),
            ],
        )
        .unwrap();
    let desc = f.describe();
    assert!(!desc.iter().any(|d| d.contains("Reduce")), "{desc:?}");
    assert_eq!(desc.iter().filter(|d| d.starts_with("fused")).count(), 1, "{desc:?}");
    assert!(desc.iter().any(|d| d.starts_with("fused 4 ops")), "{desc:?}");
    let got = f.call(&[f32t(&s, x), f32t(&s, y.clone()), f32t(&s, dz.clone()), f32t(&[1, m], w.clone())]).unwrap();
    let want: Vec<f32> = dz.iter().zip(&y).map(|(a, b)| (a * b).tanh()).collect();
    assert_eq!(got[0].shape, s);
    assert_close(got[0].as_f32().unwrap(), &want, 1e-6, "x*y gradient");
    assert_eq!(got[1].shape, vec![m]);
    assert_eq!(got[1].as_f32().unwrap(), &w[..]);
}

#[test]
fn independent_products_run_in_a_concurrent_region_and_match_one_thread() {
    // An LSTM cell's two products (x·W, h·U) and, from their sum dz, the four products of
    // its gradient (dz·Wᵀ, dz·Uᵀ, xᵀ·dz + acc, hᵀ·dz): independent steps of a few
    // microseconds each, which a 2-thread program runs in one concurrent region.
    let (b, d, u) = (32usize, 32usize, 64usize);
    let mm = |name: &str, a: &str, bb: &str, ta: bool, tb: bool| {
        node(name, "MatMul", &[a, bb], vec![("transpose_a", AttrValue::B(ta)), ("transpose_b", AttrValue::B(tb))])
    };
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        arg("h", 1, DType::Float32),
        arg("w", 2, DType::Float32),
        arg("uu", 3, DType::Float32),
        arg("acc", 4, DType::Float32),
        mm("xw", "x", "w", false, false),
        mm("hu", "h", "uu", false, false),
        node("z", "Add", &["xw", "hu"], vec![]),
        node("dz", "Tanh", &["z"], vec![]),
        mm("dx", "dz", "w", false, true),
        mm("dh", "dz", "uu", false, true),
        mm("dw", "x", "dz", true, false),
        node("dwacc", "AddV2", &["dw", "acc"], vec![]),
        mm("du", "h", "dz", true, false),
        ret("r0", "dx", 0),
        ret("r1", "dh", 1),
        ret("r2", "dwacc", 2),
        ret("r3", "du", 3),
    ]);
    let shapes = [vec![b, d], vec![b, u], vec![d, 4 * u], vec![u, 4 * u], vec![d, 4 * u]];
    let sig: Vec<(DType, Vec<usize>)> = shapes.iter().map(|s| (DType::Float32, s.clone())).collect();
    let ins: Vec<Tensor> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| f32t(s, rand_f32(s.iter().product(), 10 + i as u64, -0.5, 0.5)))
        .collect();
    let two = compiler().compile(&g, &sig).unwrap();
    let desc = two.describe();
    assert!(desc.iter().filter(|d| d.ends_with("| region 0")).count() >= 6, "{desc:?}");
    let one = Compiler::new(CompilerOptions { threads: 1, ..Default::default() }).compile(&g, &sig).unwrap();
    assert!(!one.describe().iter().any(|d| d.contains("| region")), "{:?}", one.describe());
    let want = one.call(&ins).unwrap();
    for _ in 0..20 {
        let got = two.call(&ins).unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.shape, w.shape);
            assert_eq!(g.as_f32().unwrap(), w.as_f32().unwrap(), "a region computes what one thread does");
        }
    }
}

/// An optimizer's updates `w − 0.1·g` of eight variables, independent loops in one
/// concurrent region: each donated variable is written in place (its output is its
/// input's buffer) with the values one thread computes without donation, and a variable
/// whose buffer someone else still holds is left as it was.
#[test]
fn donated_updates_in_a_concurrent_region_write_in_place() {
    let (vars, n) = (8usize, 256 * 64);
    let mut nodes = Vec::new();
    for i in 0..vars {
        nodes.push(arg(&format!("w{i}"), 2 * i as i64, DType::Float32));
        nodes.push(arg(&format!("g{i}"), 2 * i as i64 + 1, DType::Float32));
        nodes.push(konst(&format!("lr{i}"), Tensor::scalar_f32(0.1)));
        nodes.push(node(&format!("d{i}"), "Mul", &[&format!("g{i}"), &format!("lr{i}")], vec![]));
        nodes.push(node(&format!("u{i}"), "Sub", &[&format!("w{i}"), &format!("d{i}")], vec![]));
        nodes.push(ret(&format!("r{i}"), &format!("u{i}"), i as i64));
    }
    let g = graph(nodes);
    let sig: Vec<(DType, Vec<usize>)> = (0..2 * vars).map(|_| (DType::Float32, vec![256, 64])).collect();
    let inputs =
        || -> Vec<Tensor> { (0..2 * vars).map(|i| f32t(&[256, 64], rand_f32(n, 40 + i as u64, -1.0, 1.0))).collect() };
    let two = Compiler::new(CompilerOptions { threads: 2, ..Default::default() }).compile(&g, &sig).unwrap();
    assert!(two.describe().iter().filter(|d| d.contains("| region 0")).count() >= vars, "{:?}", two.describe());
    let pairs = two.in_place_pairs();
    assert_eq!(pairs.len(), vars, "{pairs:?}");
    let one = Compiler::new(CompilerOptions { threads: 1, ..Default::default() }).compile(&g, &sig).unwrap();
    let want = one.call(&inputs()).unwrap();
    for round in 0..50 {
        let ins = inputs();
        let addresses: Vec<usize> = ins.iter().map(|t| t.as_f32().unwrap().as_ptr() as usize).collect();
        // Round by round, one variable's buffer is also held elsewhere (a concurrent reader).
        let held = ins[2 * (round % vars)].clone();
        let got = two.call_donating(ins, &pairs).unwrap_or_else(|(e, _)| panic!("{e}"));
        for (j, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.as_f32().unwrap(), w.as_f32().unwrap(), "output {j}");
            let at = g.as_f32().unwrap().as_ptr() as usize;
            if j == round % vars {
                assert_ne!(at, addresses[2 * j], "a shared buffer is never written");
            } else {
                assert_eq!(at, addresses[2 * j], "output {j} reuses its variable's buffer (round {round})");
            }
        }
        assert_eq!(
            held.as_f32().unwrap(),
            inputs()[2 * (round % vars)].as_f32().unwrap(),
            "the shared value is intact"
        );
    }
}

/// Steps of a few hundred nanoseconds (eight updates of 4-element variables) run in plan
/// order: a region's locks and cache transfers would cost more than the second core gives.
#[test]
fn tiny_independent_steps_form_no_region() {
    let mut nodes = Vec::new();
    for i in 0..8 {
        nodes.push(arg(&format!("w{i}"), i as i64, DType::Float32));
        nodes.push(node(&format!("u{i}"), "Tanh", &[&format!("w{i}")], vec![]));
        nodes.push(ret(&format!("r{i}"), &format!("u{i}"), i as i64));
    }
    let c = Compiler::new(CompilerOptions { threads: 2, ..Default::default() });
    let tiny: Vec<(DType, Vec<usize>)> = (0..8).map(|_| (DType::Float32, vec![4])).collect();
    let f = c.compile(&graph(nodes.clone()), &tiny).unwrap();
    assert!(!f.describe().iter().any(|d| d.contains("| region")), "{:?}", f.describe());
    // The same updates over 16k elements each are worth one.
    let large: Vec<(DType, Vec<usize>)> = (0..8).map(|_| (DType::Float32, vec![16384])).collect();
    let f = c.compile(&graph(nodes), &large).unwrap();
    assert!(f.describe().iter().filter(|d| d.contains("| region 0")).count() == 8, "{:?}", f.describe());
}

#[test]
fn cache_hits_same_signature_and_recompiles_new_shapes() {
    let g = graph(vec![arg("x", 0, DType::Float32), node("e", "Exp", &["x"], vec![]), ret("r", "e", 0)]);
    let cache = CompileCache::new(compiler());
    let f1 = cache.get_or_compile("f", &g, &[(DType::Float32, vec![8])], &[]).unwrap();
    let _ = cache.get_or_compile("f", &g, &[(DType::Float32, vec![8])], &[]).unwrap();
    assert_eq!((cache.compile_count(), cache.hit_count()), (1, 1));
    let f2 = cache.get_or_compile("f", &g, &[(DType::Float32, vec![9])], &[]).unwrap();
    assert_eq!((cache.compile_count(), cache.len()), (2, 2));
    // An identical body under another name shares the code compiled for `f`.
    let shared = cache.get_or_compile("other", &g, &[(DType::Float32, vec![8])], &[]).unwrap();
    assert_eq!((cache.compile_count(), cache.shared_count(), cache.len()), (2, 1, 3));
    assert_eq!(shared.call(&[f32t(&[8], vec![0.0; 8])]).unwrap()[0].as_f32().unwrap(), &[1.0; 8]);
    // A different body does not.
    let neg = graph(vec![arg("x", 0, DType::Float32), node("e", "Neg", &["x"], vec![]), ret("r", "e", 0)]);
    let _ = cache.get_or_compile("neg", &neg, &[(DType::Float32, vec![8])], &[]).unwrap();
    assert_eq!(cache.compile_count(), 3);
    assert_eq!(f2.call(&[f32t(&[9], vec![0.0; 9])]).unwrap()[0].as_f32().unwrap(), &[1.0; 9]);
    // A compiled function rejects inputs of another shape.
    assert!(matches!(f1.call(&[f32t(&[9], vec![0.0; 9])]), Err(CompileError::InputMismatch { index: 0, .. })));
    // Failures are cached too.
    let bad = graph(vec![arg("x", 0, DType::Float32), node("u", "Unique", &["x"], vec![]), ret("r", "u", 0)]);
    assert!(cache.get_or_compile("bad", &bad, &[(DType::Float32, vec![3])], &[]).is_err());
    assert!(cache.get_or_compile("bad", &bad, &[(DType::Float32, vec![3])], &[]).is_err());
    assert_eq!(cache.compile_count(), 4);
    // A declined body shares nothing: under another name it is compiled (and declined)
    // again, so the reason names that body's own node.
    assert!(cache.get_or_compile("bad2", &bad, &[(DType::Float32, vec![3])], &[]).is_err());
    assert_eq!((cache.compile_count(), cache.shared_count()), (5, 1));
}

/// XLA's megamorphic rule: a function compiled for more than `MEGAMORPHIC_COMPILES`
/// signatures with fewer than `MIN_CALLS_PER_COMPILE` calls per compile compiles no new
/// signature (for good), while the ones compiled before still hit; called often enough, it
/// keeps compiling (sweep 62: a `Where`-fed cluster compiled on every step).
#[test]
fn megamorphic_functions_stop_compiling_new_signatures() {
    use autoclust_compiler::{MEGAMORPHIC_COMPILES, MIN_CALLS_PER_COMPILE};
    let g = graph(vec![arg("x", 0, DType::Float32), node("e", "Exp", &["x"], vec![]), ret("r", "e", 0)]);
    let sig = |n: usize| vec![(DType::Float32, vec![n])];
    let cache = CompileCache::new(compiler());
    // Called once per new shape: compiles up to the threshold, then refuses.
    let mut calls = 0u64;
    for n in 1..=MEGAMORPHIC_COMPILES + 1 {
        calls += 1;
        cache.get_or_compile_within("f", &g, &sig(n), &[], &[], Some(calls)).unwrap();
    }
    calls += 1;
    let e = cache.get_or_compile_within("f", &g, &sig(100), &[], &[], Some(calls)).unwrap_err();
    assert!(matches!(e, CompileError::Megamorphic { signatures, .. } if signatures == MEGAMORPHIC_COMPILES + 1), "{e}");
    assert!(e.to_string().contains("input shapes keep changing"), "{e}");
    assert_eq!(cache.compile_count(), MEGAMORPHIC_COMPILES + 1);
    // A signature compiled before still hits; the rule sticks even when calls catch up.
    assert!(cache.get_or_compile_within("f", &g, &sig(1), &[], &[], Some(calls + 1)).is_ok());
    assert!(cache.get_or_compile_within("f", &g, &sig(101), &[], &[], Some(u64::MAX)).is_err());
    // Another function called often enough per compile keeps compiling.
    let many = MIN_CALLS_PER_COMPILE * 100;
    for n in 1..=MEGAMORPHIC_COMPILES + 3 {
        cache.get_or_compile_within("busy", &g, &sig(n), &[], &[], Some(many)).unwrap();
    }
    // Without a call count (ahead-of-time compiles) the rule does not apply.
    cache.get_or_compile_typed("f", &g, &sig(102), &[], &[]).unwrap();
}

/// The clusterer keeps out of clusters exactly the float64 (and integer) ops the compiler
/// declines (`jit_ops::float_type_refusal`): each was admitted once and sent its whole cluster to the
/// interpreter — a 669-node WaveNet cluster for one float64 `BiasAddGrad` (sweep 62).
#[test]
fn float64_ops_the_compiler_declines_are_the_ones_the_clusterer_refuses() {
    use autoclust_graph::jit_ops::float_type_refusal;
    let t = |d: DType| vec![("T", autoclust_graph::AttrValue::Type(d))];
    let unary =
        |op: &str| graph(vec![arg("x", 0, DType::Float64), node("y", op, &["x"], t(DType::Float64)), ret("r", "y", 0)]);
    let binary = |op: &str| {
        graph(vec![
            arg("x", 0, DType::Float64),
            arg("z", 1, DType::Float64),
            node("y", op, &["x", "z"], t(DType::Float64)),
            ret("r", "y", 0),
        ])
    };
    let m = || (DType::Float64, vec![4, 3]);
    type Case = (&'static str, autoclust_graph::Graph, Vec<(DType, Vec<usize>)>);
    let cases: Vec<Case> = vec![
        ("Relu6", unary("Relu6"), vec![m()]),
        ("LeakyRelu", unary("LeakyRelu"), vec![m()]),
        ("BiasAddGrad", unary("BiasAddGrad"), vec![m()]),
        ("Relu6Grad", binary("Relu6Grad"), vec![m(), m()]),
        ("EluGrad", binary("EluGrad"), vec![m(), m()]),
        ("SeluGrad", binary("SeluGrad"), vec![m(), m()]),
        ("LeakyReluGrad", binary("LeakyReluGrad"), vec![m(), m()]),
        ("MatMul", binary("MatMul"), vec![(DType::Float64, vec![3, 3]), (DType::Float64, vec![3, 3])]),
        ("SoftmaxCrossEntropyWithLogits", binary("SoftmaxCrossEntropyWithLogits"), vec![m(), m()]),
        ("Relu", unary("Relu"), vec![m()]),
        ("Neg", unary("Neg"), vec![m()]),
        ("ReluGrad", binary("ReluGrad"), vec![m(), m()]),
        ("Mul", binary("Mul"), vec![m(), m()]),
        ("Maximum", binary("Maximum"), vec![m(), m()]),
    ];
    for (op, g, sig) in cases {
        let compiled = compiler().compile(&g, &sig);
        let refused = float_type_refusal(op, Some(DType::Float64));
        assert_eq!(
            compiled.is_err(),
            refused.is_some(),
            "{op}: compile {:?}, clusterer refusal {refused:?}",
            compiled.err()
        );
        // Every op here compiles on float32.
        assert!(float_type_refusal(op, Some(DType::Float32)).is_none(), "{op}");
    }
    // The float-only kernels on int32 (an int32 `Conv2D` was admitted and sent its cluster to
    // the interpreter, sweep 64), and on float64, which they compile.
    let window = |d: DType| {
        use autoclust_graph::{AttrValue, ListValue};
        vec![
            ("T", AttrValue::Type(d)),
            ("strides", AttrValue::List(ListValue::I(vec![1, 1, 1, 1]))),
            ("ksize", AttrValue::List(ListValue::I(vec![1, 2, 2, 1]))),
            ("padding", AttrValue::S(b"VALID".to_vec())),
        ]
    };
    for d in [DType::Int32, DType::Float64] {
        let conv =
            graph(vec![arg("x", 0, d), arg("f", 1, d), node("y", "Conv2D", &["x", "f"], window(d)), ret("r", "y", 0)]);
        let pool = graph(vec![arg("x", 0, d), node("y", "MaxPool", &["x"], window(d)), ret("r", "y", 0)]);
        let bmm = graph(vec![
            arg("x", 0, d),
            arg("z", 1, d),
            node("y", "BatchMatMulV2", &["x", "z"], t(d)),
            ret("r", "y", 0),
        ]);
        let image = (d, vec![1, 3, 3, 1]);
        for (op, g, sig) in [
            ("Conv2D", conv, vec![image.clone(), (d, vec![2, 2, 1, 1])]),
            ("MaxPool", pool, vec![image]),
            ("BatchMatMulV2", bmm, vec![(d, vec![2, 3, 3]), (d, vec![2, 3, 3])]),
        ] {
            let compiled = compiler().compile(&g, &sig);
            let refused = float_type_refusal(op, Some(d));
            assert_eq!(compiled.is_err(), refused.is_some(), "{op} on {d}: {:?}, {refused:?}", compiled.err());
        }
    }
}

#[test]
fn unsupported_ops_and_dtypes_are_reported_with_the_node() {
    let cases: Vec<(Vec<autoclust_graph::RawNode>, DType, &str)> = vec![
        (vec![node("u", "Unique", &["x"], vec![])], DType::Float32, "u"),
        (vec![node("e", "Exp", &["x"], vec![])], DType::Float64, "e"),
        // Softmax is lowered for float32 only (float64 reductions are: `kernels::reduce_f64`).
        (vec![node("s", "Softmax", &["x"], vec![])], DType::Float64, "s"),
        (vec![node("sh", "Shape", &["x"], vec![]), node("rs", "Reshape", &["x", "x"], vec![])], DType::Int32, "rs"),
    ];
    for (body, dt, name) in cases {
        let last = body.last().unwrap().name.clone();
        let mut nodes = vec![arg("x", 0, dt)];
        nodes.extend(body);
        nodes.push(ret("r", &last, 0));
        let err = compiler().compile(&graph(nodes), &[(dt, vec![3])]).unwrap_err();
        match err {
            CompileError::Unsupported { node, .. } => assert_eq!(node, name),
            e => panic!("{name}: {e}"),
        }
    }
}

/// Loops that generate the same code (each variable's `w − 0.1·g`, one shape) are compiled
/// once; a loop with another constant is its own function.
#[test]
fn identical_loops_compile_once() {
    let dir = std::env::temp_dir().join(format!("autoclust-dedup-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let c = Compiler::new(CompilerOptions { dump_clif_dir: Some(dir.clone()), threads: 1, ..Default::default() });
    let mut nodes = Vec::new();
    for i in 0..4 {
        nodes.push(arg(&format!("w{i}"), 2 * i as i64, DType::Float32));
        nodes.push(arg(&format!("g{i}"), 2 * i as i64 + 1, DType::Float32));
        let lr = if i == 3 { 0.2 } else { 0.1 };
        nodes.push(konst(&format!("lr{i}"), Tensor::scalar_f32(lr)));
        nodes.push(node(&format!("d{i}"), "Mul", &[&format!("g{i}"), &format!("lr{i}")], vec![]));
        nodes.push(node(&format!("u{i}"), "Sub", &[&format!("w{i}"), &format!("d{i}")], vec![]));
        nodes.push(ret(&format!("r{i}"), &format!("u{i}"), i as i64));
    }
    let sig: Vec<(DType, Vec<usize>)> = (0..8).map(|_| (DType::Float32, vec![16])).collect();
    let f = c.compile_named(&graph(nodes), &sig, "upd").unwrap();
    let clif = std::fs::read_dir(&dir).unwrap().filter(|e| e.as_ref().unwrap().path().extension().unwrap() == "clif");
    assert_eq!(clif.count(), 2, "three identical loops share one function, the fourth has its own");
    let ins: Vec<Tensor> = (0..8).map(|i| f32t(&[16], rand_f32(16, 70 + i as u64, -1.0, 1.0))).collect();
    let got = f.call(&ins).unwrap();
    for i in 0..4 {
        let lr = if i == 3 { 0.2f32 } else { 0.1 };
        let (w, g) = (ins[2 * i].as_f32().unwrap(), ins[2 * i + 1].as_f32().unwrap());
        let want: Vec<f32> = w.iter().zip(g).map(|(w, g)| w - g * lr).collect();
        assert_eq!(got[i].as_f32().unwrap(), &want[..], "output {i}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn dump_clif_writes_ir_and_disassembly_per_function() {
    let dir = std::env::temp_dir().join(format!("autoclust-clif-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let c = Compiler::new(CompilerOptions { dump_clif_dir: Some(dir.clone()), threads: 1, ..Default::default() });
    let g = graph(vec![
        arg("a", 0, DType::Float32),
        arg("b", 1, DType::Float32),
        node("mm", "MatMul", &["a", "b"], vec![]),
        node("t", "Tanh", &["mm"], vec![]),
        ret("r", "t", 0),
    ]);
    c.compile_named(&g, &[(DType::Float32, vec![2, 3]), (DType::Float32, vec![3, 4])], "my/cluster").unwrap();
    let mut files: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    files.sort();
    assert_eq!(
        files,
        ["my_cluster.plan", "my_cluster_0.clif", "my_cluster_0.s", "my_cluster_1.clif", "my_cluster_1.s"]
    );
    let plan = std::fs::read_to_string(dir.join("my_cluster.plan")).unwrap();
    assert!(plan.contains("MatMul") || plan.contains("mm"), "{plan}");
    let text = std::fs::read_to_string(dir.join("my_cluster_1.clif")).unwrap();
    assert!(text.contains("f32x4") && text.contains("function"), "{text}");
    let text = std::fs::read_to_string(dir.join("my_cluster_0.clif")).unwrap();
    assert!(text.contains("call"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tile_repeats_along_every_axis() {
    let x: Vec<f32> = (0..6).map(|v| v as f32).collect();
    for (multiples, want) in [
        (vec![1, 1], x.clone()),
        (vec![2, 1], vec![0., 1., 2., 3., 4., 5., 0., 1., 2., 3., 4., 5.]),
        (vec![1, 2], vec![0., 1., 2., 0., 1., 2., 3., 4., 5., 3., 4., 5.]),
    ] {
        let g = graph(vec![
            arg("x", 0, DType::Float32),
            ints("m", &multiples),
            node("t", "Tile", &["x", "m"], vec![]),
            ret("r", "t", 0),
        ]);
        let f = compiler().compile(&g, &[(DType::Float32, vec![2, 3])]).unwrap();
        let got = f.call(&[f32t(&[2, 3], x.clone())]).unwrap();
        let m: Vec<usize> = multiples.iter().map(|&k| k as usize).collect();
        assert_eq!(got[0].shape, vec![2 * m[0], 3 * m[1]]);
        assert_eq!(got[0].as_f32().unwrap(), want.as_slice(), "multiples {multiples:?}");
    }
}

/// `x[None, ..., 1:3]` (new axis + ellipsis), `x[..., 0]` (ellipsis + shrink) and a compiled
/// two-operand Einsum, against values computed here.
#[test]
fn strided_slice_masks_and_einsum() {
    let x = rand_f32(2 * 3 * 4, 9, -1.0, 1.0);
    let y = rand_f32(4 * 5, 10, -1.0, 1.0);
    let eq = |s: &str| ("equation", AttrValue::S(s.as_bytes().to_vec()));
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        arg("y", 1, DType::Float32),
        ints("b1", &[0, 0, 1]),
        ints("e1", &[0, 0, 3]),
        ints("s1", &[1, 1, 1]),
        node(
            "na",
            "StridedSlice",
            &["x", "b1", "e1", "s1"],
            vec![("new_axis_mask", AttrValue::I(1)), ("ellipsis_mask", AttrValue::I(2))],
        ),
        ints("b2", &[0, 0]),
        ints("e2", &[0, 1]),
        ints("s2", &[1, 1]),
        node(
            "el",
            "StridedSlice",
            &["x", "b2", "e2", "s2"],
            vec![("ellipsis_mask", AttrValue::I(1)), ("shrink_axis_mask", AttrValue::I(2))],
        ),
        node("es", "Einsum", &["x", "y"], vec![eq("abc,cd->bad"), ("N", AttrValue::I(2))]),
        ret("r0", "na", 0),
        ret("r1", "el", 1),
        ret("r2", "es", 2),
    ]);
    let f = compiler().compile(&g, &[(DType::Float32, vec![2, 3, 4]), (DType::Float32, vec![4, 5])]).unwrap();
    assert!(f.describe().iter().any(|s| s.contains("Einsum")), "{:?}", f.describe());
    let got = f.call(&[f32t(&[2, 3, 4], x.clone()), f32t(&[4, 5], y.clone())]).unwrap();
    let at = |i: usize, j: usize, k: usize| x[i * 12 + j * 4 + k];
    assert_eq!(got[0].shape, vec![1, 2, 3, 2]);
    let na: Vec<f32> = (0..2)
        .flat_map(|i| (0..3).flat_map(move |j| (1..3).map(move |k| (i, j, k))))
        .map(|(i, j, k)| at(i, j, k))
        .collect();
    assert_eq!(got[0].as_f32().unwrap(), &na[..]);
    assert_eq!(got[1].shape, vec![2, 3]);
    let el: Vec<f32> = (0..2).flat_map(|i| (0..3).map(move |j| (i, j))).map(|(i, j)| at(i, j, 0)).collect();
    assert_eq!(got[1].as_f32().unwrap(), &el[..]);
    assert_eq!(got[2].shape, vec![3, 2, 5]);
    let mut es = Vec::new();
    for b in 0..3 {
        for a in 0..2 {
            for d in 0..5 {
                es.push((0..4).map(|c| at(a, b, c) * y[c * 5 + d]).sum::<f32>());
            }
        }
    }
    assert_close(got[2].as_f32().unwrap(), &es, 1e-5, "einsum");
}

/// GatherV2 with batch_dims 1 (TensorFlow's `tf.gather(params, idx, axis=1, batch_dims=1)`):
/// out[b, i] = params[b, idx[b, i]], against values computed here.
#[test]
fn gather_with_batch_dims() {
    let params: Vec<f32> = (0..2 * 4 * 3).map(|v| v as f32).collect(); // [2, 4, 3]
    let idx = Tensor::from_i32(vec![2, 2], vec![3, 0, 1, 1]).unwrap();
    let g = graph(vec![
        arg("p", 0, DType::Float32),
        arg("i", 1, DType::Int32),
        konst("axis", Tensor::scalar_i32(1)),
        node("g", "GatherV2", &["p", "i", "axis"], vec![("batch_dims", AttrValue::I(1))]),
        ret("r", "g", 0),
    ]);
    let f = compiler().compile(&g, &[(DType::Float32, vec![2, 4, 3]), (DType::Int32, vec![2, 2])]).unwrap();
    let got = f.call(&[f32t(&[2, 4, 3], params.clone()), idx]).unwrap();
    assert_eq!(got[0].shape, vec![2, 2, 3]);
    let row = |b: usize, i: usize| params[(b * 4 + i) * 3..(b * 4 + i) * 3 + 3].to_vec();
    let want: Vec<f32> = [row(0, 3), row(0, 0), row(1, 1), row(1, 1)].concat();
    assert_eq!(got[0].as_f32().unwrap(), want.as_slice());
}

/// A reduction whose axes arrive as an argument (computed outside the cluster, as TF2
/// gradients do with `Range(0, Rank(x), 1)`) compiles once the argument is a constant,
/// and the compiled code refuses other values for it.
#[test]
fn shape_operands_from_arguments_compile_as_constants() {
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        arg("axes", 1, DType::Int32),
        node("s", "Sum", &["x", "axes"], vec![("keep_dims", AttrValue::B(false))]),
        ret("r", "s", 0),
    ]);
    assert_eq!(autoclust_compiler::constant_args(&g), [1]);
    let sig = [(DType::Float32, vec![2, 3]), (DType::Int32, vec![1])];
    let err = compiler().compile(&g, &sig).unwrap_err();
    assert!(err.to_string().contains("not a compile-time integer constant"), "{err}");
    let axes = Tensor::from_i32(vec![1], vec![1]).unwrap();
    let f = compiler().compile_with_constants(&g, &sig, &[(1, axes.clone())], "sum").unwrap();
    let x = f32t(&[2, 3], vec![1., 2., 3., 4., 5., 6.]);
    let got = f.call(&[x.clone(), axes]).unwrap();
    assert_eq!(got[0].as_f32().unwrap(), &[6.0, 15.0]);
    let other = Tensor::from_i32(vec![1], vec![0]).unwrap();
    assert!(matches!(f.call(&[x, other]), Err(CompileError::InputMismatch { index: 1, .. })));
    // The cache keys on the constant's value.
    let cache = CompileCache::new(compiler());
    for a in [0, 1, 0] {
        let axes = Tensor::from_i32(vec![1], vec![a]).unwrap();
        cache.get_or_compile("sum", &g, &sig, &[(1, axes)]).unwrap();
    }
    assert_eq!(cache.compile_count(), 2);
}

/// UnsortedSegmentSum (embedding gradients): rows summed into their segments, a negative
/// id dropped, against values computed here; an id out of range is a run-time error.
#[test]
fn unsorted_segment_sum() {
    let g = graph(vec![
        arg("d", 0, DType::Float32),
        arg("ids", 1, DType::Int32),
        konst("n", Tensor::scalar_i32(3)),
        node("s", "UnsortedSegmentSum", &["d", "ids", "n"], vec![]),
        ret("r", "s", 0),
    ]);
    let f = compiler().compile(&g, &[(DType::Float32, vec![4, 2]), (DType::Int32, vec![4])]).unwrap();
    let d = f32t(&[4, 2], vec![1., 2., 3., 4., 5., 6., 7., 8.]);
    let ids = Tensor::from_i32(vec![4], vec![2, 0, -1, 2]).unwrap();
    let got = f.call(&[d.clone(), ids]).unwrap();
    assert_eq!(got[0].shape, vec![3, 2]);
    assert_eq!(got[0].as_f32().unwrap(), &[3., 4., 0., 0., 8., 10.]);
    let bad = Tensor::from_i32(vec![4], vec![0, 3, 0, 0]).unwrap();
    assert!(matches!(f.call(&[d, bad]), Err(CompileError::Runtime { .. })));
}

/// TensorFlow 2's reduction gradient: the kept-dims shape is a `DynamicStitch` of
/// `Range(rank)` and the axes with the input's shape and ones, folded at compile time; the
/// `ConcatV2` gradient slices at the offsets `ConcatOffset` folds.
#[test]
fn dynamic_stitch_and_concat_offset_fold_into_shapes() {
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        arg("y", 1, DType::Float32),
        node("sh", "Shape", &["x"], vec![]),
        ints("start", &[0]),
        ints("delta", &[1]),
        node("rk", "Size", &["sh"], vec![]),
        konst("s0", Tensor::scalar_i32(0)),
        konst("d1", Tensor::scalar_i32(1)),
        node("rng", "Range", &["s0", "rk", "d1"], vec![("Tidx", AttrValue::Type(DType::Int32))]),
        ints("axes", &[1]),
        ints("ones", &[1]),
        node("st", "DynamicStitch", &["rng", "axes", "sh", "ones"], vec![("N", AttrValue::I(2))]),
        node("sum", "Sum", &["x", "axes"], vec![]),
        node("kept", "Reshape", &["sum", "st"], vec![]),
        konst("ax", Tensor::scalar_i32(1)),
        node("cat", "ConcatV2", &["x", "y", "ax"], vec![("N", AttrValue::I(2))]),
        node("shy", "Shape", &["y"], vec![]),
        node("off", "ConcatOffset", &["ax", "sh", "shy"], vec![("N", AttrValue::I(2))]),
        node("back", "Slice", &["cat", "off:1", "shy"], vec![]),
        ret("r0", "kept", 0),
        ret("r1", "back", 1),
        ret("r2", "off", 2),
    ]);
    let x = rand_f32(24, 5, -1.0, 1.0);
    let y = rand_f32(16, 6, -1.0, 1.0);
    let f = compiler().compile(&g, &[(DType::Float32, vec![2, 3, 4]), (DType::Float32, vec![2, 2, 4])]).unwrap();
    let got = f.call(&[f32t(&[2, 3, 4], x.clone()), f32t(&[2, 2, 4], y.clone())]).unwrap();
    assert_eq!(got[0].shape, vec![2, 1, 4]);
    assert_close(got[0].as_f32().unwrap(), &ref_reduce(&x, &[2, 3, 4], &[1], "Sum"), 1e-6, "stitched reshape");
    assert_eq!(got[1].shape, vec![2, 2, 4]);
    assert_eq!(got[1].as_f32().unwrap(), &y[..]);
    assert_eq!(got[2].as_i32().unwrap(), &[0, 0, 0]);
}

/// Conv2D and its two gradients compile (as the shared `conv` kernels) at the shapes
/// compiled for; hand-computed values on a 3×3 image, a 2×2 filter, VALID and SAME.
#[test]
fn convolutions_and_their_gradients_compile() {
    let s = |v: &str| AttrValue::S(v.as_bytes().to_vec());
    let list = |v: Vec<i64>| AttrValue::List(autoclust_graph::ListValue::I(v));
    let attrs = |pad: &str| vec![("padding", s(pad)), ("strides", list(vec![1, 1, 1, 1]))];
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        arg("f", 1, DType::Float32),
        node("y", "Conv2D", &["x", "f"], attrs("VALID")),
        node("xs", "Shape", &["x"], vec![]),
        node("fs", "Shape", &["f"], vec![]),
        node("dx", "Conv2DBackpropInput", &["xs", "f", "y"], attrs("VALID")),
        node("df", "Conv2DBackpropFilter", &["x", "fs", "y"], attrs("VALID")),
        node("same", "Conv2D", &["x", "f"], attrs("SAME")),
        ret("r0", "y", 0),
        ret("r1", "dx", 1),
        ret("r2", "df", 2),
        ret("r3", "same", 3),
    ]);
    let x: Vec<f32> = (1..=9).map(|v| v as f32).collect();
    let f = vec![1.0, 0.0, 0.0, -1.0];
    let c = compiler().compile(&g, &[(DType::Float32, vec![1, 3, 3, 1]), (DType::Float32, vec![2, 2, 1, 1])]).unwrap();
    let got = c.call(&[f32t(&[1, 3, 3, 1], x), f32t(&[2, 2, 1, 1], f)]).unwrap();
    // y[i][j] = x[i][j] - x[i+1][j+1] = -4 everywhere.
    assert_eq!(got[0].shape, vec![1, 2, 2, 1]);
    assert_eq!(got[0].as_f32().unwrap(), &[-4.0; 4][..]);
    // dx = y (-4) scattered through the filter: +(-4) at the taps' top-left, -(-4) at bottom-right.
    assert_eq!(got[1].as_f32().unwrap(), &[-4.0, -4.0, 0.0, -4.0, 0.0, 4.0, 0.0, 4.0, 4.0][..]);
    // df[ky][kx] = Σ x[i+ky][j+kx]·(-4): windows sum 12, 16, 24, 28.
    assert_eq!(got[2].as_f32().unwrap(), &[-48.0, -64.0, -96.0, -112.0][..]);
    // SAME pads after: the last row and column read zeros below/right.
    assert_eq!(got[3].shape, vec![1, 3, 3, 1]);
    assert_eq!(got[3].as_f32().unwrap(), &[-4.0, -4.0, 3.0, -4.0, -4.0, 6.0, 7.0, 8.0, 9.0][..]);
}

/// `Any`/`All` over every axis subset of a bool tensor, empty reductions included.
#[test]
fn any_and_all_reduce_bools() {
    let shape = [2usize, 3, 2];
    let x: Vec<bool> = (0..12).map(|i| i % 5 == 0 || i == 7).collect();
    let xt = Tensor {
        dtype: DType::Bool,
        shape: shape.to_vec(),
        data: autoclust_graph::TensorData::Bool(std::sync::Arc::new(x.clone())),
    };
    for op in ["Any", "All"] {
        for axes in [&[][..], &[0], &[1], &[2], &[0, 2], &[0, 1, 2], &[-1]] {
            let g = graph(vec![
                arg("x", 0, DType::Bool),
                ints("ax", axes),
                node("s", op, &["x", "ax"], vec![("keep_dims", AttrValue::B(false))]),
                ret("r", "s", 0),
            ]);
            let f = compiler().compile(&g, &[(DType::Bool, shape.to_vec())]).unwrap();
            let got = f.call(std::slice::from_ref(&xt)).unwrap();
            let norm: Vec<usize> = axes.iter().map(|&a| if a < 0 { (a + 3) as usize } else { a as usize }).collect();
            let f32s: Vec<f32> = x.iter().map(|&b| b as u8 as f32).collect();
            let want: Vec<bool> = ref_reduce(&f32s, &shape, &norm, if op == "Any" { "Max" } else { "Min" })
                .iter()
                .map(|&v| v > 0.5)
                .collect();
            let TensorData::Bool(b) = &got[0].data else { panic!("{op} gave {}", got[0].dtype) };
            assert_eq!(&b[..], &want[..], "{op} over {axes:?}");
        }
    }
    // An empty input: Any is false, All is true.
    let empty = Tensor {
        dtype: DType::Bool,
        shape: vec![0, 2],
        data: autoclust_graph::TensorData::Bool(std::sync::Arc::new(vec![])),
    };
    for (op, want) in [("Any", false), ("All", true)] {
        let g = graph(vec![
            arg("x", 0, DType::Bool),
            ints("ax", &[0]),
            node("s", op, &["x", "ax"], vec![]),
            ret("r", "s", 0),
        ]);
        let got =
            compiler().compile(&g, &[(DType::Bool, vec![0, 2])]).unwrap().call(std::slice::from_ref(&empty)).unwrap();
        let TensorData::Bool(b) = &got[0].data else { panic!() };
        assert_eq!(&b[..], &[want, want][..], "{op} of nothing");
    }
}

/// Split and SplitV (with a −1 size) along a middle axis: each piece is the slice of rows.
#[test]
fn split_and_split_v_compile_to_their_slices() {
    let x: Vec<f32> = (0..24).map(|v| v as f32).collect();
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        konst("ax", Tensor::scalar_i32(1)),
        node("s", "Split", &["ax", "x"], vec![("num_split", AttrValue::I(2))]),
        ints("sizes", &[1, -1, 1]),
        node("v", "SplitV", &["x", "sizes", "ax"], vec![("num_split", AttrValue::I(3))]),
        ret("r0", "s:0", 0),
        ret("r1", "s:1", 1),
        ret("r2", "v:0", 2),
        ret("r3", "v:1", 3),
        ret("r4", "v:2", 4),
    ]);
    let f = compiler().compile(&g, &[(DType::Float32, vec![2, 4, 3])]).unwrap();
    let got = f.call(&[f32t(&[2, 4, 3], x.clone())]).unwrap();
    let rows = |from: usize, to: usize| -> Vec<f32> {
        (0..2).flat_map(|b| (from..to).flat_map(move |r| (0..3).map(move |c| (b * 12 + r * 3 + c) as f32))).collect()
    };
    for (k, (from, to)) in [(0, 2), (2, 4), (0, 1), (1, 3), (3, 4)].into_iter().enumerate() {
        assert_eq!(got[k].shape, vec![2, to - from, 3], "output {k}");
        assert_eq!(got[k].as_f32().unwrap(), &rows(from, to)[..], "output {k}");
    }
}

/// MaxPool/AvgPool and their gradients compile (the shared `pool` kernels): ties go to the
/// first maximum in scan order; SAME averages divide by the real elements only.
#[test]
fn pooling_and_its_gradients_compile() {
    let s = |v: &str| AttrValue::S(v.as_bytes().to_vec());
    let list = |v: Vec<i64>| AttrValue::List(autoclust_graph::ListValue::I(v));
    let attrs =
        |pad: &str| vec![("padding", s(pad)), ("strides", list(vec![1, 1, 1, 1])), ("ksize", list(vec![1, 2, 2, 1]))];
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        arg("dy", 1, DType::Float32),
        arg("a", 2, DType::Float32),
        arg("da", 3, DType::Float32),
        node("y", "MaxPool", &["x"], attrs("VALID")),
        node("dx", "MaxPoolGrad", &["x", "y", "dy"], attrs("VALID")),
        node("ay", "AvgPool", &["a"], attrs("SAME")),
        node("ash", "Shape", &["a"], vec![]),
        node("adx", "AvgPoolGrad", &["ash", "da"], attrs("SAME")),
        ret("r0", "y", 0),
        ret("r1", "dx", 1),
        ret("r2", "ay", 2),
        ret("r3", "adx", 3),
    ]);
    let sig = [
        (DType::Float32, vec![1, 3, 3, 1]),
        (DType::Float32, vec![1, 2, 2, 1]),
        (DType::Float32, vec![1, 2, 2, 1]),
        (DType::Float32, vec![1, 2, 2, 1]),
    ];
    let f = compiler().compile(&g, &sig).unwrap();
    let got = f
        .call(&[
            f32t(&[1, 3, 3, 1], vec![1.0, 5.0, 5.0, 2.0, 0.0, 3.0, 7.0, 7.0, 1.0]),
            f32t(&[1, 2, 2, 1], vec![1.0, 10.0, 100.0, 1000.0]),
            f32t(&[1, 2, 2, 1], vec![1.0, 2.0, 3.0, 4.0]),
            f32t(&[1, 2, 2, 1], vec![4.0, 2.0, 2.0, 1.0]),
        ])
        .unwrap();
    assert_eq!(got[0].as_f32().unwrap(), &[5.0, 5.0, 7.0, 7.0][..]);
    assert_eq!(got[1].as_f32().unwrap(), &[0.0, 11.0, 0.0, 0.0, 0.0, 0.0, 100.0, 1000.0, 0.0][..]);
    assert_eq!(got[2].as_f32().unwrap(), &[2.5, 3.0, 3.5, 4.0][..]);
    assert_eq!(got[3].as_f32().unwrap(), &[1.0, 2.0, 2.0, 4.0][..]);
}

/// ReverseV2 over every axis subset (a strided view with negative strides), size-1 axes
/// included.
#[test]
fn reverse_v2_over_every_axis_subset() {
    for shape in [vec![2usize, 3, 4], vec![3, 1, 5], vec![1, 4, 1]] {
        let n: usize = shape.iter().product();
        let x: Vec<f32> = (0..n).map(|v| v as f32).collect();
        for mask in 0..8u32 {
            let axes: Vec<i32> = (0..3).filter(|a| mask & (1 << a) != 0).collect();
            let g = graph(vec![
                arg("x", 0, DType::Float32),
                ints("ax", &axes),
                node("r", "ReverseV2", &["x", "ax"], vec![("Tidx", AttrValue::Type(DType::Int32))]),
                ret("o", "r", 0),
            ]);
            let f = compiler().compile(&g, &[(DType::Float32, shape.clone())]).unwrap();
            let got = f.call(&[f32t(&shape, x.clone())]).unwrap();
            let st = strides(&shape);
            let want: Vec<f32> = (0..n)
                .map(|i| {
                    let src: usize = (0..3)
                        .map(|d| {
                            let k = i / st[d] % shape[d];
                            (if axes.contains(&(d as i32)) { shape[d] - 1 - k } else { k }) * st[d]
                        })
                        .sum();
                    x[src]
                })
                .collect();
            assert_eq!(got[0].as_f32().unwrap(), &want[..], "shape {shape:?} axes {axes:?}");
        }
    }
}

/// StridedSliceGrad writes dy into the elements the forward slice read, zeros elsewhere.
#[test]
fn strided_slice_grad_scatters_into_zeros() {
    let g = graph(vec![
        arg("dy", 0, DType::Float32),
        ints("shape", &[4, 3]),
        ints("begin", &[1, 0]),
        ints("end", &[4, 3]),
        ints("strides", &[2, 2]),
        node(
            "g",
            "StridedSliceGrad",
            &["shape", "begin", "end", "strides", "dy"],
            vec![("Index", AttrValue::Type(DType::Int32))],
        ),
        ret("o", "g", 0),
    ]);
    let f = compiler().compile(&g, &[(DType::Float32, vec![2, 2])]).unwrap();
    let got = f.call(&[f32t(&[2, 2], vec![1.0, 2.0, 3.0, 4.0])]).unwrap();
    assert_eq!(got[0].shape, vec![4, 3]);
    assert_eq!(got[0].as_f32().unwrap(), &[0.0, 0.0, 0.0, 1.0, 0.0, 2.0, 0.0, 0.0, 0.0, 3.0, 0.0, 4.0][..]);
}

/// MulNoNan: a zero `y` gives 0 even against an infinite or NaN `x`.
#[test]
fn mul_no_nan_zeroes_whatever_x_is() {
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        arg("y", 1, DType::Float32),
        node("m", "MulNoNan", &["x", "y"], vec![]),
        ret("r", "m", 0),
    ]);
    let f = compiler().compile(&g, &[(DType::Float32, vec![5]), (DType::Float32, vec![5])]).unwrap();
    let x = vec![f32::INFINITY, f32::NAN, 2.0, f32::NAN, -3.0];
    let y = vec![0.0, 0.0, 0.0, 1.0, 2.0];
    let got = f.call(&[f32t(&[5], x), f32t(&[5], y)]).unwrap();
    let v = got[0].as_f32().unwrap();
    assert_eq!(&v[..3], &[0.0, 0.0, 0.0]);
    assert!(v[3].is_nan());
    assert_eq!(v[4], -6.0);
}

/// Threads compile different clusters at once (the cache holds no lock across a
/// compile) and identical bodies compile once whatever the thread count.
#[test]
fn cache_compiles_concurrently_and_once_per_distinct_body() {
    let exp = graph(vec![arg("x", 0, DType::Float32), node("e", "Exp", &["x"], vec![]), ret("r", "e", 0)]);
    let neg = graph(vec![arg("x", 0, DType::Float32), node("e", "Neg", &["x"], vec![]), ret("r", "e", 0)]);
    for threads in [1, 4] {
        let cache = CompileCache::new(compiler());
        std::thread::scope(|s| {
            for t in 0..threads {
                let (cache, exp, neg) = (&cache, &exp, &neg);
                s.spawn(move || {
                    for i in (t..16).step_by(threads) {
                        let body = if i % 2 == 0 { exp } else { neg };
                        let f =
                            cache.get_or_compile(&format!("f{i}"), body, &[(DType::Float32, vec![4])], &[]).unwrap();
                        let want = if i % 2 == 0 { 1.0 } else { -0.0 };
                        assert_eq!(f.call(&[f32t(&[4], vec![0.0; 4])]).unwrap()[0].as_f32().unwrap(), &[want; 4]);
                    }
                });
            }
        });
        assert_eq!((cache.compile_count(), cache.shared_count(), cache.len()), (2, 14, 16), "{threads} threads");
    }
}

/// Operands TensorFlow's shape functions refuse are declined (so the interpreter's kernel
/// reports TensorFlow's error), whatever the op family: the families take their output shapes
/// from the registry's shape functions. Before they did, a `Squeeze` of an axis of size 3
/// compiled to a copy that kept the axis, where the plain run fails.
#[test]
fn operands_the_shape_functions_refuse_are_declined() {
    use autoclust_graph::ListValue;
    let squeeze = |axes: Vec<i64>| {
        vec![node(
            "n",
            "Squeeze",
            &["x"],
            vec![("T", AttrValue::Type(DType::Float32)), ("squeeze_dims", AttrValue::List(ListValue::I(axes)))],
        )]
    };
    let cases: Vec<(&str, Vec<autoclust_graph::RawNode>)> = vec![
        ("Squeeze of a dimension of 3", squeeze(vec![1])),
        (
            "Split 3 ways of 2",
            vec![ints("ax", &[0]), node("n", "Split", &["ax", "x"], vec![("num_split", AttrValue::I(3))])],
        ),
        ("Reshape of 6 into 4", vec![ints("s", &[4]), node("n", "Reshape", &["x", "s"], vec![])]),
        (
            "ConcatV2 of mismatched ranks",
            vec![ints("ax", &[0]), ints("v", &[1, 2]), node("n", "ConcatV2", &["x", "v", "ax"], vec![])],
        ),
    ];
    for (what, mut nodes) in cases {
        nodes.insert(0, arg("x", 0, DType::Float32));
        nodes.push(ret("r", "n", 0));
        let r = compiler().compile(&graph(nodes), &[(DType::Float32, vec![2, 3])]);
        assert!(matches!(r, Err(CompileError::Invalid(_)) | Err(CompileError::Unsupported { .. })), "{what}: {r:?}");
    }
    // The accepted forms still compile.
    let mut nodes = squeeze(vec![0]);
    nodes.insert(0, arg("x", 0, DType::Float32));
    nodes.push(ret("r", "n", 0));
    let f = compiler().compile(&graph(nodes), &[(DType::Float32, vec![1, 3])]).expect("Squeeze of a size-1 axis");
    let out = f.call(&[f32t(&[1, 3], vec![1.0, 2.0, 3.0])]).unwrap();
    assert_eq!(out[0].shape, vec![3]);
}

/// A variable read through an `Identity` (as encapsulation writes a `ReadVariableOp`) that
/// feeds a product, then updated `w − 0.1·g`: the view's last use is the product, before the
/// update, and the update is still computed into the donated buffer — on one thread and on
/// two — with the undonated values.
#[test]
fn a_variable_read_through_a_view_is_still_updated_in_place() {
    let (n, b) = (128usize, 8usize);
    let g = graph(vec![
        arg("w", 0, DType::Float32),
        arg("x", 1, DType::Float32),
        arg("g", 2, DType::Float32),
        node("r", "Identity", &["w"], vec![]),
        node(
            "y",
            "MatMul",
            &["x", "r"],
            vec![("transpose_a", AttrValue::B(false)), ("transpose_b", AttrValue::B(false))],
        ),
        konst("lr", Tensor::scalar_f32(0.1)),
        node("d", "Mul", &["g", "lr"], vec![]),
        node("u", "Sub", &["w", "d"], vec![]),
        ret("r0", "y", 0),
        ret("r1", "u", 1),
    ]);
    let sig = [(DType::Float32, vec![n, n]), (DType::Float32, vec![b, n]), (DType::Float32, vec![n, n])];
    let inputs = || {
        vec![
            f32t(&[n, n], rand_f32(n * n, 1, -1.0, 1.0)),
            f32t(&[b, n], rand_f32(b * n, 2, -1.0, 1.0)),
            f32t(&[n, n], rand_f32(n * n, 3, -1.0, 1.0)),
        ]
    };
    let want = compiler().compile(&g, &sig).unwrap().call(&inputs()).unwrap();
    for threads in [1, 2] {
        let f = Compiler::new(CompilerOptions { threads, ..Default::default() }).compile(&g, &sig).unwrap();
        let pairs = f.in_place_pairs();
        assert_eq!(pairs, vec![(0, 1)], "{:?}", f.describe());
        for _ in 0..3 {
            let ins = inputs();
            let at = ins[0].as_f32().unwrap().as_ptr() as usize;
            let got = f.call_donating(ins, &pairs).unwrap_or_else(|(e, _)| panic!("{e}"));
            assert_eq!(got[0].as_f32().unwrap(), want[0].as_f32().unwrap());
            assert_eq!(got[1].as_f32().unwrap(), want[1].as_f32().unwrap());
            assert_eq!(got[1].as_f32().unwrap().as_ptr() as usize, at, "updated in place ({threads} threads)");
        }
    }
}
