//! The JIT lowerings of issue 20's real-model ops: fused batch normalisation and its
//! gradient, depthwise convolutions and their gradients, Cumsum/Cumprod, the stateless
//! random samplers and the remaining `ResourceApply*` optimizers. Each graph must run as
//! compiled clusters only (no interpreted cluster, no `note:`), give the plain executor's
//! values, and match an independent reference (a direct formula here, or TensorFlow's own
//! numbers) — so a lowering that silently fell back to the interpreter, or a kernel both
//! modes share that computed the wrong thing, fails.

use std::collections::HashMap;

use crate::support::{autoclust, notes, write};

/// A fetched tensor: shape and values (as f64).
#[derive(Debug, PartialEq)]
struct Value {
    shape: Vec<usize>,
    data: Vec<f64>,
}

/// `name:port = {json}` lines (and `--json`'s object form) into values by name.
fn parse(stdout: &[u8]) -> HashMap<String, Value> {
    let text = String::from_utf8_lossy(stdout);
    let mut out = HashMap::new();
    let mut add = |name: &str, v: &serde_json::Value| {
        let shape = v["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
        let data = v["data"].as_array().unwrap().iter().map(|d| d.as_f64().unwrap_or(f64::NAN)).collect();
        out.insert(name.to_string(), Value { shape, data });
    };
    if let Ok(j) = serde_json::from_str::<serde_json::Value>(&text) {
        for section in ["fetches", "variables"] {
            if let Some(m) = j[section].as_object() {
                for (k, v) in m {
                    add(k, v);
                }
            }
        }
        return out;
    }
    for line in text.lines() {
        if let Some((name, json)) = line.split_once(" = ") {
            add(name, &serde_json::from_str(json).unwrap());
        }
    }
    out
}

/// Runs `args` clustered and unclustered; asserts the clustered run printed no note and that
/// `bench` counts only compiled clusters; returns both runs' values.
fn both_modes(graph: &str, args: &[&str]) -> (HashMap<String, Value>, HashMap<String, Value>, serde_json::Value) {
    let mut run = vec!["run", graph];
    run.extend(args);
    let out = autoclust(&run);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(notes(&out).is_empty(), "{:?}", notes(&out));
    let mut plain = run.clone();
    plain.push("--no-cluster");
    let reference = autoclust(&plain);
    assert!(reference.status.success(), "{}", String::from_utf8_lossy(&reference.stderr));
    let mut bench = vec!["bench", graph];
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        match *a {
            "--json" => {}
            "--steps" => {
                rest.next();
            }
            a => bench.push(a),
        }
    }
    bench.extend(["--steps", "1", "--json"]);
    let b = autoclust(&bench);
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    let j: serde_json::Value = serde_json::from_slice(&b.stdout).unwrap();
    assert!(j["compiled_clusters"].as_u64().unwrap() >= 1, "{j}");
    assert_eq!(j["interpreted_clusters"], 0, "{j}");
    (parse(&out.stdout), parse(&reference.stdout), j)
}

/// Asserts the compiled run's `keys` have the plain executor's shapes and bits.
fn assert_same_bits(got: &HashMap<String, Value>, plain: &HashMap<String, Value>, keys: &[&str]) {
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for &k in keys {
        assert_eq!(got[k].shape, plain[k].shape, "{k}");
        assert_eq!(bits(&got[k].data), bits(&plain[k].data), "{k}: compiled vs interpreter");
    }
}

fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol * (1.0 + w.abs()), "{what}[{i}]: {g} vs {w}");
    }
}

/// Deterministic values in [-2, 2] with three decimals.
fn data(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s % 4001) as f64 - 2000.0) / 1000.0
        })
        .collect()
}

/// A JSON nested list of `v` in `shape`.
fn nested(v: &[f64], shape: &[usize]) -> String {
    if shape.len() <= 1 {
        return format!("[{}]", v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(","));
    }
    let n = v.len() / shape[0];
    format!("[{}]", v.chunks(n).map(|c| nested(c, &shape[1..])).collect::<Vec<_>>().join(","))
}

const BATCH_NORM: &str = r#"
x = Placeholder() {dtype = float32, shape = shape[2, 2, 3, 4]}
scale = Const() {dtype = float32, value = float32[4]{1.5, -0.5, 2.0, 1.0}}
offset = Const() {dtype = float32, value = float32[4]{0.1, 0.2, 0.3, 0.4}}
mean = Const() {dtype = float32, value = float32[4]{0.5, 0.5, 0.5, 0.5}}
var = Const() {dtype = float32, value = float32[4]{2.0, 2.0, 2.0, 2.0}}
bn = FusedBatchNormV3(x, scale, offset, mean, var) {T = float32, U = float32, epsilon = 0.001, exponential_avg_factor = 0.25, is_training = true, data_format = "NHWC"}
r = Relu(bn:0) {T = float32}
g = FusedBatchNormGradV3(r, x, scale, bn:3, bn:4, bn:5) {T = float32, U = float32, epsilon = 0.001, is_training = true, data_format = "NHWC"}
t = AddV2(g:0, x) {T = float32}
inf = FusedBatchNorm(x, scale, offset, mean, var) {T = float32, epsilon = 0.001, is_training = false, data_format = "NHWC"}
ig = FusedBatchNormGradV2(r, x, scale, mean, var) {T = float32, U = float32, epsilon = 0.001, is_training = false, data_format = "NHWC"}
"#;

/// `FusedBatchNormV3` in training mode with a running-average factor, its gradient, and the
/// inference forms: compiled, equal to the plain executor, and equal to the definitions.
#[test]
fn fused_batch_norm_and_its_gradient_compile_and_match() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(&dir, "bn.graph", BATCH_NORM);
    let x = data(48, 1);
    let feed = format!("x={}", nested(&x, &[2, 2, 3, 4]));
    let fetches = ["bn:0", "bn:1", "bn:2", "t:0", "g:1", "g:2", "inf:0", "ig:0", "ig:1"];
    let mut args = vec!["--feed", &feed];
    for f in &fetches {
        args.extend(["--fetch", f]);
    }
    let (got, plain, _) = both_modes(&g, &args);
    for f in fetches {
        assert_eq!(got[f], plain[f], "{f}");
    }
    // The definitions, in f64: per channel the batch mean and the biased variance normalise;
    // the running outputs blend the unbiased variance with factor 1/4.
    let (scale, offset) = ([1.5, -0.5, 2.0, 1.0], [0.1, 0.2, 0.3, 0.4]);
    for k in 0..4 {
        let col: Vec<f64> = x.iter().skip(k).step_by(4).map(|&v| v as f32 as f64).collect();
        let n = col.len() as f64;
        let m = col.iter().sum::<f64>() / n;
        let v = col.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n;
        assert_close(&[got["bn:1"].data[k]], &[0.75 * 0.5 + 0.25 * m], 1e-6, "running mean");
        assert_close(&[got["bn:2"].data[k]], &[0.75 * 2.0 + 0.25 * v * n / (n - 1.0)], 1e-6, "running variance");
        for (j, &xv) in col.iter().enumerate() {
            let y = (xv - m) / (v + 0.001).sqrt() * scale[k] + offset[k];
            assert_close(&[got["bn:0"].data[j * 4 + k]], &[y], 1e-5, "y");
            let yi = (xv - 0.5) / (2.001f64).sqrt() * scale[k] + offset[k];
            assert_close(&[got["inf:0"].data[j * 4 + k]], &[yi], 1e-5, "inference y");
        }
        // The offset gradient is Σ dy, dy = relu(y).
        let dy: f64 = (0..col.len()).map(|j| got["bn:0"].data[j * 4 + k].max(0.0)).sum();
        assert_close(&[got["g:2"].data[k]], &[dy], 1e-5, "offset gradient");
    }
}

const DEPTHWISE: &str = r#"
x = Placeholder() {dtype = float32, shape = shape[2, 5, 4, 3]}
f = Placeholder() {dtype = float32, shape = shape[3, 2, 3, 2]}
y = DepthwiseConv2dNative(x, f) {T = float32, data_format = "NHWC", dilations = [1, 1, 1, 1], padding = "SAME", strides = [1, 2, 1, 1]}
t = Tanh(y) {T = float32}
xs = Shape(x) {T = float32, out_type = int32}
fs = Shape(f) {T = float32, out_type = int32}
dx = DepthwiseConv2dNativeBackpropInput(xs, f, t) {T = float32, data_format = "NHWC", dilations = [1, 1, 1, 1], padding = "SAME", strides = [1, 2, 1, 1]}
df = DepthwiseConv2dNativeBackpropFilter(x, fs, t) {T = float32, data_format = "NHWC", dilations = [1, 1, 1, 1], padding = "SAME", strides = [1, 2, 1, 1]}
v = DepthwiseConv2dNative(x, f) {T = float32, data_format = "NHWC", dilations = [1, 2, 1, 1], padding = "VALID", strides = [1, 1, 1, 1]}
"#;

/// The depthwise convolution of `x` `[N,H,W,C]` by `f` `[KH,KW,C,M]` with padding before
/// (`ph`, `pw`), by its definition.
#[allow(clippy::too_many_arguments)]
fn depthwise_reference(
    x: &[f64],
    [n, h, w, c]: [usize; 4],
    f: &[f64],
    [kh, kw, _, m]: [usize; 4],
    (oh, ow): (usize, usize),
    (sh, sw): (usize, usize),
    (dh, dw): (usize, usize),
    (ph, pw): (usize, usize),
) -> Vec<f64> {
    let mut out = vec![0.0; n * oh * ow * c * m];
    for b in 0..n {
        for oy in 0..oh {
            for ox in 0..ow {
                for ch in 0..c {
                    for q in 0..m {
                        let mut s = 0.0;
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (oy * sh + ky * dh) as isize - ph as isize;
                                let ix = (ox * sw + kx * dw) as isize - pw as isize;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                    continue;
                                }
                                let xv = x[((b * h + iy as usize) * w + ix as usize) * c + ch];
                                s += xv * f[((ky * kw + kx) * c + ch) * m + q];
                            }
                        }
                        out[((b * oh + oy) * ow + ox) * c * m + ch * m + q] = s;
                    }
                }
            }
        }
    }
    out
}

/// `DepthwiseConv2dNative` (SAME with strides, VALID with a dilation) and its two gradients
/// (their size operands from `Shape`s): compiled, equal to the plain executor; the forward
/// values equal the definition, and the gradients are its adjoints (⟨dx, x⟩ = ⟨t, y⟩ =
/// ⟨df, f⟩ for the linear map y = x ⊛ f).
#[test]
fn depthwise_convolutions_compile_and_match() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(&dir, "dw.graph", DEPTHWISE);
    let (x, f) = (data(120, 2), data(36, 3));
    let feeds = [format!("x={}", nested(&x, &[2, 5, 4, 3])), format!("f={}", nested(&f, &[3, 2, 3, 2]))];
    let fetches = ["y:0", "t:0", "dx:0", "df:0", "v:0"];
    let mut args = vec!["--feed", &feeds[0], "--feed", &feeds[1]];
    for f in &fetches {
        args.extend(["--fetch", f]);
    }
    let (got, plain, _) = both_modes(&g, &args);
    for k in fetches {
        assert_eq!(got[k], plain[k], "{k}");
    }
    // SAME, stride 2 × 1 over 5 × 4 with a 3 × 2 filter: 3 × 4 outputs, padding 1 above, 1 right.
    let y = depthwise_reference(&x, [2, 5, 4, 3], &f, [3, 2, 3, 2], (3, 4), (2, 1), (1, 1), (1, 0));
    assert_eq!(got["y:0"].shape, vec![2, 3, 4, 6]);
    assert_close(&got["y:0"].data, &y, 1e-5, "SAME forward");
    // VALID with dilation 2 along H: effective height 5, so 1 × 3 outputs.
    let v = depthwise_reference(&x, [2, 5, 4, 3], &f, [3, 2, 3, 2], (1, 3), (1, 1), (2, 1), (0, 0));
    assert_eq!(got["v:0"].shape, vec![2, 1, 3, 6]);
    assert_close(&got["v:0"].data, &v, 1e-5, "dilated VALID forward");
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(p, q)| p * q).sum::<f64>();
    let ty = dot(&got["t:0"].data, &got["y:0"].data);
    assert_close(&[dot(&got["dx:0"].data, &x)], &[ty], 1e-4, "input gradient adjoint");
    assert_close(&[dot(&got["df:0"].data, &f)], &[ty], 1e-4, "filter gradient adjoint");
}

const CUMULATIVE: &str = r#"
x = Placeholder() {dtype = float32, shape = shape[2, 3, 4]}
i = Placeholder() {dtype = int32, shape = shape[2, 3, 4]}
a0 = Const() {dtype = int32, value = int32[]{0}}
a1 = Const() {dtype = int32, value = int32[]{1}}
am1 = Const() {dtype = int32, value = int32[]{-1}}
s = Cumsum(x, a1) {T = float32, Tidx = int32}
se = Cumsum(x, am1) {T = float32, Tidx = int32, exclusive = true}
sr = Cumsum(x, a0) {T = float32, Tidx = int32, reverse = true}
p = Cumprod(x, a1) {T = float32, Tidx = int32, exclusive = true, reverse = true}
pi = Cumprod(i, am1) {T = int32, Tidx = int32}
si = Cumsum(i, a1) {T = int32, Tidx = int32, reverse = true, exclusive = true}
"#;

/// The reference scan of `x` `[2, 3, 4]` along `axis`.
fn scan(x: &[f64], axis: usize, prod: bool, exclusive: bool, reverse: bool) -> Vec<f64> {
    let dims = [2usize, 3, 4];
    let (outer, n, inner): (usize, usize, usize) =
        (dims[..axis].iter().product(), dims[axis], dims[axis + 1..].iter().product());
    let mut out = vec![0.0; x.len()];
    for o in 0..outer {
        for i in 0..inner {
            let idx: Vec<usize> = (0..n).map(|k| (o * n + k) * inner + i).collect();
            let order: Vec<usize> = if reverse { idx.iter().rev().copied().collect() } else { idx };
            let mut acc = if prod { 1.0 } else { 0.0 };
            for at in order {
                let next = if prod { acc * x[at] } else { acc + x[at] };
                out[at] = if exclusive { acc } else { next };
                acc = next;
            }
        }
    }
    out
}

/// Cumsum/Cumprod along every axis, exclusive and reverse, float32 and int32: compiled,
/// equal to the plain executor and to the definition.
#[test]
fn cumulative_sums_and_products_compile_and_match() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(&dir, "cum.graph", CUMULATIVE);
    let x = data(24, 4);
    let ints: Vec<f64> = (0..24).map(|k| ((k * 7) % 5) as f64 - 2.0).collect();
    let feeds = [format!("x={}", nested(&x, &[2, 3, 4])), format!("i={}", nested(&ints, &[2, 3, 4]))];
    let fetches = ["s:0", "se:0", "sr:0", "p:0", "pi:0", "si:0"];
    let mut args = vec!["--feed", &feeds[0], "--feed", &feeds[1]];
    for f in &fetches {
        args.extend(["--fetch", f]);
    }
    let (got, plain, _) = both_modes(&g, &args);
    for k in fetches {
        assert_eq!(got[k], plain[k], "{k}");
    }
    let xf: Vec<f64> = x.iter().map(|&v| v as f32 as f64).collect();
    assert_close(&got["s:0"].data, &scan(&xf, 1, false, false, false), 1e-5, "Cumsum axis 1");
    assert_close(&got["se:0"].data, &scan(&xf, 2, false, true, false), 1e-5, "exclusive Cumsum axis -1");
    assert_close(&got["sr:0"].data, &scan(&xf, 0, false, false, true), 1e-5, "reverse Cumsum axis 0");
    assert_close(&got["p:0"].data, &scan(&xf, 1, true, true, true), 1e-5, "exclusive reverse Cumprod");
    assert_eq!(got["pi:0"].data, scan(&ints, 2, true, false, false), "int Cumprod");
    assert_eq!(got["si:0"].data, scan(&ints, 1, false, true, true), "int Cumsum");
}

const RANDOM: &str = r#"
seed = Placeholder() {dtype = int64, shape = shape[2]}
shape = Const() {dtype = int32, value = int32[2]{2, 3}}
kc = StatelessRandomGetKeyCounter(seed) {Tseed = int64}
alg = StatelessRandomGetAlg() {}
u = StatelessRandomUniformV2(shape, kc:0, kc:1, alg) {dtype = float32, Tshape = int32}
n = StatelessRandomNormalV2(shape, kc:0, kc:1, alg) {dtype = float32, Tshape = int32}
tn = StatelessTruncatedNormalV2(shape, kc:0, kc:1, alg) {dtype = float64, Tshape = int32}
u1 = StatelessRandomUniform(shape, seed) {dtype = float32, T = int32, Tseed = int64}
n1 = StatelessRandomNormal(shape, seed) {dtype = float64, T = int32, Tseed = int64}
t1 = StatelessTruncatedNormal(shape, seed) {dtype = float32, T = int32, Tseed = int64}
lo = Const() {dtype = int32, value = int32[]{-5}}
hi = Const() {dtype = int32, value = int32[]{7}}
i1 = StatelessRandomUniformInt(shape, seed, lo, hi) {dtype = int32, T = int32, Tseed = int64}
f1 = StatelessRandomUniformFullInt(shape, seed) {dtype = int32, T = int32, Tseed = int64}
f2 = StatelessRandomUniformFullIntV2(shape, kc:0, kc:1, alg) {dtype = int64, Tshape = int32}
f3 = Add(f2, f2) {T = int64}
keep = GreaterEqual(u, half) {T = float32}
half = Const() {dtype = float32, value = float32[]{0.5}}
z = Const() {dtype = float32, value = float32[]{0}}
d = SelectV2(keep, n, z) {T = float32}
"#;

/// The stateless samplers (V2 from a key and counter, V1 from a seed) inside a compiled
/// cluster draw bit for bit the plain executor's numbers — and TensorFlow's:
/// `tf.random.stateless_uniform([6], seed=[1, 2])` gives the values below (TensorFlow 2.21).
#[test]
fn stateless_random_ops_compile_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(&dir, "rnd.graph", RANDOM);
    let fetches = ["u:0", "n:0", "tn:0", "u1:0", "n1:0", "t1:0", "i1:0", "d:0", "f1:0", "f3:0"];
    let mut args = vec!["--feed", "seed=[1,2]"];
    for f in &fetches {
        args.extend(["--fetch", f]);
    }
    let (got, plain, _) = both_modes(&g, &args);
    for k in fetches {
        assert_eq!(got[k], plain[k], "{k}");
    }
    let tf = [0.844_060_4f32, 0.192_045_33, 0.996_223_2, 0.160_387_4, 0.271_990_18, 0.649_346];
    let f32s = |v: &Value| v.data.iter().map(|&x| x as f32).collect::<Vec<f32>>();
    assert_eq!(f32s(&got["u:0"]), tf);
    assert_eq!(f32s(&got["u1:0"]), tf);
    assert!(got["t1:0"].data.iter().all(|v| v.abs() < 2.0));
    assert!(got["i1:0"].data.iter().all(|&v| (-5.0..7.0).contains(&v)));
    // tf.random.stateless_uniform([5], seed=[1, 2], dtype=tf.int32, minval=None, maxval=None).
    let full = [1105988140.0, 1738052849.0, -335576002.0, 370444179.0, 10670227.0];
    assert_eq!(got["f1:0"].data[..5], full);
}

/// A full-range draw of unsigned integers (the op's default dtype) stays outside clusters:
/// a cluster carries no unsigned values; `--explain` says why.
#[test]
fn unsigned_full_range_draws_stay_outside_clusters() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(
        &dir,
        "u.graph",
        r#"
seed = Placeholder() {dtype = int64, shape = shape[2]}
shape = Const() {dtype = int32, value = int32[1]{4}}
kc = StatelessRandomGetKeyCounter(seed) {Tseed = int64}
alg = StatelessRandomGetAlg() {}
u = StatelessRandomUniformFullIntV2(shape, kc:0, kc:1, alg) {dtype = uint64, Tshape = int32}
"#,
    );
    let out = autoclust(&["cluster", &g, "--explain"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("StatelessRandomUniformFullIntV2 drawing uint64"), "{text}");
}

/// The optimizers that encapsulation lowers to elementwise code since this change, with
/// their hyperparameters as scalars.
const OPTIMIZERS: &[(&str, usize, &str)] = &[
    ("ResourceApplyAdaMax", 3, "b1p, lr, b1, b2, eps, g"),
    ("ResourceApplyAdamWithAmsgrad", 4, "b1p, b2p, lr, b1, b2, eps, g"),
    ("ResourceApplyAdadelta", 3, "lr, rho, eps, g"),
    ("ResourceApplyCenteredRMSProp", 4, "lr, rho, mom, eps, g"),
    ("ResourceApplyFtrl", 3, "g, lr, l1, l2, lrp"),
    ("ResourceApplyFtrlV2", 3, "g, lr, l1, l2, shrink, lrp2"),
    ("ResourceApplyProximalGradientDescent", 1, "lr, l1, l2, g"),
    ("ResourceApplyProximalAdagrad", 2, "lr, l1, l2, g"),
    ("ResourceApplyAddSign", 2, "lr, alpha, decay, beta, g"),
    ("ResourceApplyPowerSign", 2, "lr, alpha, decay, beta, g"),
];

/// AdaMax, Adadelta, CenteredRMSProp, Ftrl, FtrlV2 (multiplying the linear term by lr, and a
/// learning-rate power other than −½), the proximal ones, AddSign and PowerSign, three steps
/// on a gradient of a fed value: compiled, and every variable equal to the plain kernels'.
#[test]
fn remaining_optimizers_compile_and_match_the_kernels() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from(
        "x = Placeholder() {dtype = float32, shape = shape[6]}\n\
         w = Const() {dtype = float32, value = float32[6]{0.5, -0.25, 1.0, -1.5, 0.75, 0.125}}\n\
         g = Mul(x, w) {T = float32}\n",
    );
    let scalars = [
        ("b1p", 0.81),
        ("b2p", 0.998),
        ("lr", 0.05),
        ("b1", 0.9),
        ("b2", 0.999),
        ("eps", 1e-3),
        ("rho", 0.95),
        ("mom", 0.8),
        ("l1", 0.01),
        ("l2", 0.02),
        ("alpha", 1.0),
        ("decay", 0.5),
        ("beta", 0.9),
        ("lrp", -0.5),
        ("lrp2", -0.25),
        ("shrink", 0.1),
    ];
    for (k, v) in scalars {
        text += &format!("{k} = Const() {{dtype = float32, value = float32[]{{{v}}}}}\n");
    }
    let mut vars: Vec<(String, autoclust_graph::Tensor)> = Vec::new();
    let mut targets = Vec::new();
    for (i, (op, slots, operands)) in OPTIMIZERS.iter().enumerate() {
        let name = op.trim_start_matches("ResourceApply").to_lowercase();
        let mut handles = Vec::new();
        for s in 0..*slots {
            let h = format!("{name}_{s}");
            text += &format!("{h} = VarHandleOp() {{dtype = float32, shape = shape[6], shared_name = \"{h}\"}}\n");
            // Accumulators positive (CenteredRMSProp's mean gradient 0, so ms − mg² stays
            // positive), parameters of both signs.
            let v: Vec<f32> = data(6, 10 + (i * 4 + s) as u64)
                .iter()
                .map(|&x| match s {
                    0 => x as f32,
                    1 if *op == "ResourceApplyCenteredRMSProp" => 0.0,
                    _ => 0.1 + x.abs() as f32,
                })
                .collect();
            vars.push((h.clone(), autoclust_graph::Tensor::from_f32(vec![6], v).unwrap()));
            handles.push(h);
        }
        let extra = if *op == "ResourceApplyFtrlV2" { ", multiply_linear_by_lr = true" } else { "" };
        text += &format!("{name} = {op}({}, {operands}) {{T = float32{extra}}}\n", handles.join(", "));
        targets.push(name);
    }
    let g = write(&dir, "opt.graph", &text);
    let vars_file = dir.path().join("vars.safetensors");
    std::fs::write(&vars_file, autoclust_runtime::tensor_io::write_safetensors(&vars).unwrap()).unwrap();
    let vars_file = vars_file.display().to_string();
    let mut args = vec!["--vars", &vars_file, "--feed", "x=[1.5,-2,0.25,3,-0.5,1]", "--steps", "3", "--json"];
    for t in &targets {
        args.extend(["--target", t]);
    }
    let (got, plain, bench) = both_modes(&g, &args);
    // Everything but the feed and the variable handles is in clusters: every optimizer op.
    let handles = vars.len() as u64;
    assert_eq!(
        bench["total_nodes"].as_u64().unwrap() - bench["clustered_nodes"].as_u64().unwrap(),
        1 + handles,
        "{bench}"
    );
    assert_eq!(got.len(), vars.len(), "{got:?}");
    for (name, before) in &vars {
        let (a, b) = (&got[name.as_str()], &plain[name.as_str()]);
        assert!(a.data.iter().all(|v| v.is_finite()), "{name}: {:?}", a.data);
        assert_close(&a.data, &b.data, 1e-5, name);
        assert_ne!(a.data, before.to_f64_vec().unwrap(), "{name} did not change");
    }
}

const MODULAR: &str = r#"
x = Placeholder() {dtype = float32, shape = shape[2, 4]}
y = Placeholder() {dtype = float32, shape = shape[4]}
i = Placeholder() {dtype = int32, shape = shape[2, 4]}
j = Placeholder() {dtype = int32, shape = shape[4]}
fm = FloorMod(x, y) {T = float32}
m = Mod(x, y) {T = float32}
fd = FloorDiv(x, y) {T = float32}
e = Exp(fm) {T = float32}
im = FloorMod(i, j) {T = int32}
tm = TruncateMod(i, j) {T = int32}
td = TruncateDiv(i, j) {T = int32}
id = FloorDiv(i, j) {T = int32}
s = AddV2(tm, td) {T = int32}
"#;

/// FloorMod, Mod (truncating, as TensorFlow's), FloorDiv on floats and FloorMod, TruncateMod,
/// TruncateDiv, FloorDiv on ints, on run-time values with broadcasting: compiled, equal to
/// the plain executor and to TensorFlow's definitions (values from TensorFlow 2.21).
#[test]
fn division_like_ops_compile_and_match() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(&dir, "mod.graph", MODULAR);
    let feeds =
        ["x=[[-7,7,-7.5,5.5],[7,-7,0.5,-0.25]]", "y=[3,-3,2,-2]", "i=[[-7,7,-7,7],[8,-8,9,-9]]", "j=[3,-3,2,-2]"];
    let fetches = ["fm:0", "m:0", "fd:0", "e:0", "im:0", "tm:0", "td:0", "id:0", "s:0"];
    let mut args = Vec::new();
    for f in &feeds {
        args.extend(["--feed", f]);
    }
    for f in &fetches {
        args.extend(["--fetch", f]);
    }
    let (got, plain, _) = both_modes(&g, &args);
    for k in fetches {
        assert_eq!(got[k], plain[k], "{k}");
    }
    // tf.raw_ops.FloorMod / Mod / FloorDiv of [-7, 7, -7.5, 5.5] by [3, -3, 2, -2]:
    assert_eq!(got["fm:0"].data[..4], [2.0, -2.0, 0.5, -0.5]);
    assert_eq!(got["m:0"].data[..4], [-1.0, 1.0, -1.5, 1.5]);
    assert_eq!(got["fd:0"].data[..4], [-3.0, -3.0, -4.0, -3.0]);
    // Integers [-7, 7, -7, 7] by [3, -3, 2, -2]: floor and truncation.
    assert_eq!(got["im:0"].data[..4], [2.0, -2.0, 1.0, -1.0]);
    assert_eq!(got["tm:0"].data[..4], [-1.0, 1.0, -1.0, 1.0]);
    assert_eq!(got["td:0"].data[..4], [-2.0, -2.0, -3.0, -3.0]);
    assert_eq!(got["id:0"].data[..4], [-3.0, -3.0, -4.0, -4.0]);
    // An integer zero divisor is TensorFlow's error in both modes.
    for cluster in [true, false] {
        let mut run =
            vec!["run", &g, "--feed", feeds[0], "--feed", feeds[1], "--feed", feeds[2], "--feed", "j=[3,0,2,1]"];
        run.extend(["--fetch", "tm:0"]);
        if !cluster {
            run.push("--no-cluster");
        }
        let out = autoclust(&run);
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("Integer division by zero"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Newton's iteration for `sqrt(c)` (`c` carried unchanged), then a branch on a fed
/// threshold, all pure: TensorFlow 2 writes such loops and conditionals as `StatelessWhile`
/// and `StatelessIf`.
const FUNCTIONAL_CONTROL_FLOW: &str = r#"
a = Placeholder() {dtype = float32, shape = shape[4]}
n = Placeholder() {dtype = int32, shape = shape[]}
t = Placeholder() {dtype = float32, shape = shape[]}
zero = Const() {dtype = int32, value = int32[]{0}}
ex = Exp(a) {T = float32}
x0 = Mul(ex, ex) {T = float32}
loop = StatelessWhile(zero, x0, ex, n) {T = [int32, float32, float32, int32], cond = @cond, body = @body, parallel_iterations = 10}
s = Sum(loop:1, zero) {T = float32, Tidx = int32}
big = Greater(s, t) {T = float32}
br = StatelessIf(big, loop:1) {Tcond = bool, Tin = [float32], Tout = [float32], then_branch = @yes, else_branch = @no}
out = Tanh(br) {T = float32}
function cond(i: int32, x: float32, c: float32, n: int32) -> (c: bool) {
  l = Less(i, n) {T = int32}
  return c = l:z:0
}
function body(i: int32, x: float32, c: float32, n: int32) -> (i2: int32, x2: float32, c2: float32, n2: int32) {
  one = Const() {dtype = int32, value = int32[]{1}}
  next = AddV2(i, one:output:0) {T = int32}
  q = RealDiv(c, x) {T = float32}
  s = AddV2(x, q:z:0) {T = float32}
  half = Const() {dtype = float32, value = float32[]{0.5}}
  x2 = Mul(s:z:0, half:output:0) {T = float32}
  return i2 = next:z:0
  return x2 = x2:z:0
  return c2 = c
  return n2 = n
}
function yes(a: float32) -> (b: float32) {
  e = Neg(a) {T = float32}
  return b = e:y:0
}
function no(a: float32) -> (b: float32) {
  e = Square(a) {T = float32}
  return b = e:y:0
}
"#;

/// A pure `StatelessWhile` and `StatelessIf` join the cluster and run as compiled code (the
/// plan shows one `While` and one `If` step; no interpreted cluster, no note), give the plain
/// executor's values, and equal the definitions: Newton's iteration converges to
/// `sqrt(exp(a)) = exp(a/2)`, then the branch the threshold selects. The iteration bound
/// holds for the compiled loop as for the interpreted one.
#[test]
fn functional_loops_and_branches_compile_and_match() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(&dir, "cf.graph", FUNCTIONAL_CONTROL_FLOW);
    let a = [0.1, 0.2, -0.3, 1.0];
    let feed_a = format!("a={}", nested(&a, &[4]));
    let sqrt: Vec<f64> = a.iter().map(|x: &f64| (x / 2.0).exp()).collect();
    let total: f64 = sqrt.iter().sum();
    for (threshold, then) in [("t=0", true), ("t=1000", false)] {
        let args = ["--feed", &feed_a, "--feed", "n=30", "--feed", threshold, "--fetch", "out:0", "--fetch", "loop:1"];
        let (got, plain, _) = both_modes(&g, &args);
        assert_eq!(got["out:0"], plain["out:0"]);
        assert_eq!(got["loop:1"], plain["loop:1"]);
        assert_close(&got["loop:1"].data, &sqrt, 1e-6, "newton");
        let want: Vec<f64> = sqrt.iter().map(|r| if then { (-r).tanh() } else { (r * r).tanh() }).collect();
        assert!(total > 0.0);
        assert_close(&got["out:0"].data, &want, 1e-6, threshold);
    }
    let dump = dir.path().join("dump");
    let d = dump.display().to_string();
    let args = ["run", &g, "--feed", &feed_a, "--feed", "n=3", "--feed", "t=0", "--fetch", "out:0", "--dump-clif", &d];
    let out = autoclust(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let plan = std::fs::read_to_string(dump.join("cluster_0_fn.plan")).unwrap();
    assert!(plan.contains("kernel While(@cond, @body) at loop"), "{plan}");
    assert!(plan.contains("kernel If(@yes, @no) at br"), "{plan}");
    // The loop-invariant operand `c` is carried unchanged: the body is compiled with it as
    // an argument still (it is not a compile-time constant here), and the body's plan exists.
    assert!(dump.join("cluster_0_fn_body.plan").exists());
    // The iteration bound: the same error in both modes, naming the condition.
    for cluster in [true, false] {
        let mut run = vec!["run", &g, "--feed", &feed_a, "--feed", "n=5", "--feed", "t=0", "--fetch", "out:0"];
        run.extend(["--max-loop-iterations", "3"]);
        if !cluster {
            run.push("--no-cluster");
        }
        let out = autoclust(&run);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("the loop ran 3 iterations and its condition 'cond' is still true"), "{err}");
    }
}

/// `run`s `graph` with `args` and `--dump-clif`, and returns the plan of its first cluster.
fn first_cluster_plan(dir: &tempfile::TempDir, graph: &str, args: &[&str]) -> String {
    let dump = dir.path().join("dump");
    let d = dump.display().to_string();
    let mut run = vec!["run", graph];
    run.extend(args);
    run.extend(["--dump-clif", &d]);
    let out = autoclust(&run);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::read_to_string(dump.join("cluster_0_fn.plan")).unwrap()
}

/// Two independent loops in one cluster (a bidirectional RNN's two directions): the plan
/// runs them side by side in one concurrent region when the machine has more than one core
/// — the steps that feed each loop first, then both loops, adjacent, before their users —
/// and the values are the plain executor's and the definition's.
#[test]
fn independent_loops_run_side_by_side_in_one_region() {
    let dir = tempfile::tempdir().unwrap();
    let loops = FUNCTIONAL_CONTROL_FLOW.split("function yes").next().unwrap().split("function cond").nth(1).unwrap();
    let src = format!(
        "a = Placeholder() {{dtype = float32, shape = shape[4]}}\n\
         b = Placeholder() {{dtype = float32, shape = shape[4]}}\n\
         n = Placeholder() {{dtype = int32, shape = shape[]}}\n\
         zero = Const() {{dtype = int32, value = int32[]{{0}}}}\n\
         ea = Exp(a) {{T = float32}}\n\
         xa = Mul(ea, ea) {{T = float32}}\n\
         la = StatelessWhile(zero, xa, ea, n) {{T = [int32, float32, float32, int32], cond = @cond, body = @body}}\n\
         ta = Tanh(la:1) {{T = float32}}\n\
         eb = Exp(b) {{T = float32}}\n\
         xb = Mul(eb, eb) {{T = float32}}\n\
         lb = StatelessWhile(zero, xb, eb, n) {{T = [int32, float32, float32, int32], cond = @cond, body = @body}}\n\
         tb = Tanh(lb:1) {{T = float32}}\n\
         out = AddV2(ta, tb) {{T = float32}}\n\
         function cond{loops}"
    );
    let g = write(&dir, "two_loops.graph", &src);
    let (a, b) = ([0.1, 0.2, -0.3, 1.0], [2.0, -1.0, 0.5, 0.0]);
    let (feed_a, feed_b) = (format!("a={}", nested(&a, &[4])), format!("b={}", nested(&b, &[4])));
    let args = ["--feed", &feed_a, "--feed", &feed_b, "--feed", "n=30", "--fetch", "out:0"];
    let (got, plain, _) = both_modes(&g, &args);
    assert_same_bits(&got, &plain, &["out:0"]);
    let want: Vec<f64> =
        a.iter().zip(&b).map(|(x, y): (&f64, &f64)| (x / 2.0).exp().tanh() + (y / 2.0).exp().tanh()).collect();
    assert_close(&got["out:0"].data, &want, 1e-6, "two newton loops");
    let plan = first_cluster_plan(&dir, &g, &args);
    if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
        let lines: Vec<&str> = plan.lines().collect();
        let at =
            |name: &str| lines.iter().position(|l| l.contains(&format!("While(@cond, @body) at {name} |"))).unwrap();
        let (la, lb) = (at("la"), at("lb"));
        assert_eq!(la.abs_diff(lb), 1, "the loops are adjacent: {plan}");
        let region = |i: usize| lines[i].rsplit_once("| ").map(|(_, r)| r.to_string());
        assert!(region(la).is_some_and(|r| r.starts_with("region")), "{plan}");
        assert_eq!(region(la), region(lb), "{plan}");
    }
}

/// Two independent host compute kernels in one cluster (`Lgamma`: the interpreter's kernel,
/// no loop lowering) run side by side in one concurrent region, as the plain executor runs
/// them (sweep 72: a step of 3-D convolutions, `LRN` and `Dilation2D` ran clustered at 0.85×
/// plain, one kernel after another), with the plain executor's bits.
#[test]
fn independent_host_kernels_share_a_region() {
    let dir = tempfile::tempdir().unwrap();
    let src = "a = Placeholder() {dtype = float32, shape = shape[4096]}\n\
               b = Placeholder() {dtype = float32, shape = shape[4096]}\n\
               ea = Exp(a) {T = float32}\n\
               eb = Exp(b) {T = float32}\n\
               la = Lgamma(ea) {T = float32}\n\
               lb = Lgamma(eb) {T = float32}\n\
               out = AddV2(la, lb) {T = float32}\n";
    let g = write(&dir, "host.graph", src);
    let (a, b) = (data(4096, 1), data(4096, 2));
    let (feed_a, feed_b) = (format!("a={}", nested(&a, &[4096])), format!("b={}", nested(&b, &[4096])));
    let args = ["--feed", &feed_a, "--feed", &feed_b, "--fetch", "out:0"];
    let (got, plain, _) = both_modes(&g, &args);
    assert_same_bits(&got, &plain, &["out:0"]);
    let plan = first_cluster_plan(&dir, &g, &args);
    if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
        let region = |name: &str| {
            plan.lines()
                .find(|l| l.contains(&format!("Host(Lgamma) at {name} |")))
                .and_then(|l| l.rsplit_once("| ").map(|(_, r)| r.to_string()))
        };
        assert!(region("la").is_some_and(|r| r.starts_with("region")), "{plan}");
        assert_eq!(region("la"), region("lb"), "{plan}");
    }
}

/// A loop whose carried value grows (`ConcatV2` each iteration: TensorFlow needs a shape
/// invariant for it, and XLA does not compile it) is declined by the compiler: the cluster
/// runs in the interpreter and `run` says so, naming the loop; the values are the plain
/// executor's.
#[test]
fn a_loop_whose_carried_shape_changes_is_interpreted_and_named() {
    let g = r#"
x = Placeholder() {dtype = float32, shape = shape[2]}
zero = Const() {dtype = int32, value = int32[]{0}}
e = Exp(x) {T = float32}
loop = StatelessWhile(zero, e) {T = [int32, float32], cond = @cond, body = @body}
y = Neg(loop:1) {T = float32}
function cond(i: int32, v: float32) -> (c: bool) {
  three = Const() {dtype = int32, value = int32[]{3}}
  l = Less(i, three:output:0) {T = int32}
  return c = l:z:0
}
function body(i: int32, v: float32) -> (i2: int32, v2: float32) {
  one = Const() {dtype = int32, value = int32[]{1}}
  next = AddV2(i, one:output:0) {T = int32}
  axis = Const() {dtype = int32, value = int32[]{0}}
  grown = ConcatV2(v, v, axis:output:0) {N = 2, T = float32, Tidx = int32}
  return i2 = next:z:0
  return v2 = grown:output:0
}
"#;
    let dir = tempfile::tempdir().unwrap();
    let g = write(&dir, "grow.graph", g);
    let out = autoclust(&["run", &g, "--feed", "x=[0.5,-1]", "--fetch", "y:0"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let n = notes(&out);
    assert!(n.iter().any(|l| l.contains("'loop'") && l.contains("a shape that changes across iterations")), "{n:?}");
    let plain = autoclust(&["run", &g, "--feed", "x=[0.5,-1]", "--fetch", "y:0", "--no-cluster"]);
    assert_eq!(parse(&out.stdout)["y:0"], parse(&plain.stdout)["y:0"]);
    assert_eq!(parse(&out.stdout)["y:0"].shape, vec![16]);
}

/// A pure `StatelessCase` (`tf.switch_case`) joins its cluster and runs the selected branch
/// compiled; an index out of range runs the last branch, as TensorFlow does.
#[test]
fn a_case_compiles_and_runs_the_selected_branch() {
    let g = r#"
x = Placeholder() {dtype = float32, shape = shape[3]}
i = Placeholder() {dtype = int32, shape = shape[]}
e = Exp(x) {T = float32}
c = StatelessCase(i, e) {Tin = [float32], Tout = [float32], branches = [@neg, @sq, @half]}
y = Tanh(c) {T = float32}
function neg(a: float32) -> (b: float32) {
  n = Neg(a) {T = float32}
  return b = n:y:0
}
function sq(a: float32) -> (b: float32) {
  n = Square(a) {T = float32}
  return b = n:y:0
}
function half(a: float32) -> (b: float32) {
  h = Const() {dtype = float32, value = float32[]{0.5}}
  n = Mul(a, h:output:0) {T = float32}
  return b = n:z:0
}
"#;
    let dir = tempfile::tempdir().unwrap();
    let g = write(&dir, "case.graph", g);
    let x = [0.1, -0.2, 0.3];
    let feed_x = format!("x={}", nested(&x, &[3]));
    for (index, branch) in [(0, 0), (1, 1), (2, 2), (7, 2), (-1, 2)] {
        let feed_i = format!("i={index}");
        let (got, plain, _) = both_modes(&g, &["--feed", &feed_x, "--feed", &feed_i, "--fetch", "y:0"]);
        assert_eq!(got["y:0"], plain["y:0"], "index {index}");
        let want: Vec<f64> = x
            .iter()
            .map(|v: &f64| {
                let e = v.exp();
                [-e, e * e, e * 0.5][branch].tanh()
            })
            .collect();
        assert_close(&got["y:0"].data, &want, 1e-6, &format!("index {index}"));
    }
    let dump = dir.path().join("dump");
    let d = dump.display().to_string();
    let out = autoclust(&["run", &g, "--feed", &feed_x, "--feed", "i=1", "--fetch", "y:0", "--dump-clif", &d]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let plan = std::fs::read_to_string(dump.join("cluster_0_fn.plan")).unwrap();
    assert!(plan.contains("kernel Case(@neg, @sq, @half) at c"), "{plan}");
}

const SPACE_BATCH_BITS: &str = r#"
x = Placeholder() {dtype = float32, shape = shape[2, 2, 4, 1]}
y = Placeholder() {dtype = float32, shape = shape[8, 1, 3, 2]}
f = Placeholder() {dtype = float32, shape = shape[4]}
block = Const() {dtype = int32, value = int32[2]{2, 2}}
pads = Const() {dtype = int32, value = int32[2, 2]{0, 0, 2, 0}}
crops = Const() {dtype = int32, value = int32[2, 2]{0, 1, 1, 2}}
s = SpaceToBatchND(x, block, pads) {T = float32, Tblock_shape = int32, Tpaddings = int32}
sr = Relu(s) {T = float32}
b = BatchToSpaceND(y, block, crops) {T = float32, Tblock_shape = int32, Tcrops = int32}
bn = Neg(b) {T = float32}
begin = Const() {dtype = int32, value = int32[4]{0, 0, 0, 0}}
size = Const() {dtype = int32, value = int32[4]{2, 2, 2, 1}}
xs = Slice(x, begin, size) {T = float32, Index = int32}
pp = Const() {dtype = int32, value = int32[4, 2]{0, 0, 1, 0, 0, 2, 0, 0}}
p = Pad(xs, pp) {T = float32, Tpaddings = int32}
pn = Neg(p) {T = float32}
fa = Abs(f) {T = float32}
fs = Sub(f, fa) {T = float32}
bc = Bitcast(fs) {T = float32, type = int32}
sign = Const() {dtype = int32, value = int32[]{-2147483648}}
and = BitwiseAnd(bc, sign) {T = int32}
shifts = Const() {dtype = int32, value = int32[4]{31, 1, 40, -3}}
rs = RightShift(bc, shifts) {T = int32}
one = Const() {dtype = int32, value = int32[]{1}}
or = BitwiseOr(bc, one) {T = int32}
xo = BitwiseXor(bc, or) {T = int32}
ls = LeftShift(or, shifts) {T = int32}
back = Bitcast(bc) {T = int32, type = float32}
l2 = L2Loss(x) {T = float32}
u = Unpack(y) {T = float32, num = 8, axis = 0}
u3 = Neg(u:3) {T = float32}
"#;

/// `SpaceToBatchND` (with padding) and `BatchToSpaceND` (with crops) — a dilated Keras
/// `Conv1D` is wrapped in them —, `Pad`, `Bitcast` and the bitwise ops (Keras 3's `argmax`
/// tests a float's sign bit with `Bitcast` + `BitwiseAnd`), `L2Loss` (`tf.clip_by_global_norm`)
/// and `Unpack` (`TimeDistributed`'s gradient): compiled, equal to the plain executor, and equal
/// to TensorFlow 2.21's values for the same operands (or their definitions).
#[test]
fn space_batch_pad_and_bit_ops_compile_and_match_tensorflow() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(&dir, "sb.graph", SPACE_BATCH_BITS);
    let x: Vec<f64> = (0..16).map(|k| k as f64 - 5.5).collect();
    let y: Vec<f64> = (0..48).map(|k| k as f64).collect();
    let f = [1.5, 0.0, 0.25, -2.25];
    let feeds = [
        format!("x={}", nested(&x, &[2, 2, 4, 1])),
        format!("y={}", nested(&y, &[8, 1, 3, 2])),
        format!("f={}", nested(&f, &[4])),
    ];
    let fetches = ["sr:0", "bn:0", "pn:0", "bc:0", "and:0", "rs:0", "or:0", "xo:0", "ls:0", "back:0", "l2:0", "u3:0"];
    let mut args = vec!["--feed", &feeds[0], "--feed", &feeds[1], "--feed", &feeds[2]];
    for k in &fetches {
        args.extend(["--fetch", k]);
    }
    let (got, plain, _) = both_modes(&g, &args);
    for k in fetches {
        assert_eq!(got[k], plain[k], "{k}");
    }
    // TensorFlow: tf.raw_ops.SpaceToBatchND(x, [2, 2], [[0, 0], [2, 0]]), then Relu.
    let s = [
        0.0, -5.5, -3.5, 0.0, 2.5, 4.5, 0.0, -4.5, -2.5, 0.0, 3.5, 5.5, 0.0, -1.5, 0.5, 0.0, 6.5, 8.5, 0.0, -0.5, 1.5,
        0.0, 7.5, 9.5,
    ];
    assert_eq!(got["sr:0"].shape, [8, 1, 3, 1]);
    assert_eq!(got["sr:0"].data, s.iter().map(|&v: &f64| v.max(0.0)).collect::<Vec<_>>());
    let b = [12.0, 13.0, 2.0, 3.0, 14.0, 15.0, 18.0, 19.0, 8.0, 9.0, 20.0, 21.0];
    assert_eq!(got["bn:0"].shape, [2, 1, 3, 2]);
    assert_eq!(got["bn:0"].data, b.iter().map(|v: &f64| -v).collect::<Vec<_>>());
    let p = [
        0.0, 0.0, 0.0, 0.0, -5.5, -4.5, 0.0, 0.0, -1.5, -0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.5, 3.5, 0.0, 0.0, 6.5,
        7.5, 0.0, 0.0,
    ];
    assert_eq!(got["pn:0"].shape, [2, 3, 4, 1]);
    assert_eq!(got["pn:0"].data, p.iter().map(|v: &f64| -v).collect::<Vec<_>>());
    // f − |f| = [0, 0, 0, −4.5]: TensorFlow's tf.bitcast and tf.bitwise on those floats.
    assert_eq!(got["bc:0"].data, [0.0, 0.0, 0.0, -1_064_304_640.0]);
    assert_eq!(got["and:0"].data, [0.0, 0.0, 0.0, -2_147_483_648.0]);
    assert_eq!(got["rs:0"].data, [0.0, 0.0, 0.0, -1_064_304_640.0]);
    assert_eq!(got["or:0"].data, [1.0, 1.0, 1.0, -1_064_304_639.0]);
    assert_eq!(got["xo:0"].data, [1.0, 1.0, 1.0, 1.0]);
    assert_eq!(got["ls:0"].data, [-2_147_483_648.0, 2.0, -2_147_483_648.0, -1_064_304_639.0]);
    assert_eq!(got["back:0"].data, [0.0, 0.0, 0.0, -4.5]);
    assert_eq!(got["l2:0"].data, [x.iter().map(|v| v * v).sum::<f64>() / 2.0]);
    assert_eq!(got["u3:0"].shape, [1, 3, 2]);
    assert_eq!(got["u3:0"].data, y[18..24].iter().map(|v| -v).collect::<Vec<_>>());
    assert_clustered(&g, &["s", "b", "p", "bc", "and", "rs", "or", "xo", "ls", "back", "l2", "u"]);
}

/// Each of `nodes` is a cluster member (none is left to the plain executor).
fn assert_clustered(graph: &str, nodes: &[&str]) {
    let c = autoclust(&["cluster", graph, "--json"]);
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    let j: serde_json::Value = serde_json::from_slice(&c.stdout).unwrap();
    let unclustered: Vec<&str> = j["unclustered"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    for n in nodes {
        assert!(!unclustered.contains(n), "{n} is unclustered: {unclustered:?}");
    }
}

const RESIZE_TOPK: &str = r#"
x = Placeholder() {dtype = float32, shape = shape[1, 3, 4, 2]}
dy = Placeholder() {dtype = float32, shape = shape[1, 5, 3, 2]}
p = Placeholder() {dtype = float32, shape = shape[5, 4]}
t = Placeholder() {dtype = int32, shape = shape[5]}
s53 = Const() {dtype = int32, value = int32[2]{5, 3}}
s46 = Const() {dtype = int32, value = int32[2]{4, 6}}
s25 = Const() {dtype = int32, value = int32[2]{2, 5}}
r = ResizeBilinear(x, s53) {T = float32, align_corners = false, half_pixel_centers = true}
a = ResizeBilinear(x, s46) {T = float32, align_corners = true, half_pixel_centers = false}
l = ResizeBilinear(x, s25) {T = float32}
g = ResizeBilinearGrad(dy, x) {T = float32, align_corners = false, half_pixel_centers = true}
one = Const() {dtype = int32, value = int32[]{1}}
two = Const() {dtype = int32, value = int32[]{2}}
pp = Mul(p, p) {T = float32}
k1 = InTopKV2(pp, t, one) {T = int32}
k2 = InTopKV2(pp, t, two) {T = int32}
rn = Neg(r) {T = float32}
an = Neg(a) {T = float32}
ln = Neg(l) {T = float32}
gn = Neg(g) {T = float32}
k = LogicalAnd(k1, k2) {}
k1f = Cast(k1) {SrcT = bool, DstT = float32}
k2f = Cast(k2) {SrcT = bool, DstT = float32}
kf = Cast(k) {SrcT = bool, DstT = float32}
s27 = Const() {dtype = int32, value = int32[2]{2, 7}}
s34 = Const() {dtype = int32, value = int32[2]{3, 4}}
n = ResizeNearestNeighbor(x, s53) {T = float32, align_corners = false, half_pixel_centers = true}
na = ResizeNearestNeighbor(x, s27) {T = float32, align_corners = true, half_pixel_centers = false}
ng = ResizeNearestNeighborGrad(dy, s34) {T = float32, align_corners = false, half_pixel_centers = true}
nn = Neg(n) {T = float32}
nan = Neg(na) {T = float32}
ngn = Neg(ng) {T = float32}
four = Const() {dtype = float32, value = float32[]{4}}
x4 = Mul(x, four) {T = float32}
xi = Cast(x4) {SrcT = float32, DstT = int32}
ri = ResizeBilinear(xi, s53) {T = int32, align_corners = false, half_pixel_centers = true}
xd = Cast(x) {SrcT = float32, DstT = float64}
rd = ResizeBilinear(xd, s46) {T = float64, align_corners = true, half_pixel_centers = false}
rin = Neg(ri) {T = float32}
rdn = Neg(rd) {T = float32}
"#;

/// `ResizeBilinear` (half-pixel centers, align_corners, legacy; float32 images, and int32 and
/// float64 ones, which the clusterer admits and the compiler must then lower: `both_modes`
/// fails on an interpreted cluster), `ResizeNearestNeighbor`, their
/// gradients, and `InTopKV2`
/// (ties, a row with a non-finite prediction, a target out of range): compiled, equal to the plain executor, and equal
/// to TensorFlow 2.21's values for the same operands.
#[test]
fn resize_bilinear_and_in_top_k_compile_and_match_tensorflow() {
    let dir = tempfile::tempdir().unwrap();
    let gr = write(&dir, "rt.graph", RESIZE_TOPK);
    let x: Vec<f64> = (0..24).map(|k| ((k * 7) % 11 - 5) as f64 / 4.0).collect();
    let dy: Vec<f64> = (0..30).map(|k| ((k * 5) % 7 - 3) as f64 / 2.0).collect();
    let feeds = [
        format!("x={}", nested(&x, &[1, 3, 4, 2])),
        format!("dy={}", nested(&dy, &[1, 5, 3, 2])),
        // Squared: the same order per row, and 1e30² overflows to inf (TensorFlow's row of a NaN).
        "p=[[0.1,0.5,0.5,0.2],[0.3,0.3,0.3,0.3],[1.0,1e30,0.0,0.0],[0.0,0.2,0.1,0.4],[0.9,0.1,0.2,0.3]]".to_string(),
        "t=[2,0,0,1,7]".to_string(),
    ];
    let fetches =
        ["rn:0", "an:0", "ln:0", "gn:0", "k1f:0", "k2f:0", "kf:0", "nn:0", "nan:0", "ngn:0", "rin:0", "rdn:0"];
    let mut args = vec![];
    for f in &feeds {
        args.extend(["--feed", f]);
    }
    for f in &fetches {
        args.extend(["--fetch", f]);
    }
    let (got, plain, _) = both_modes(&gr, &args);
    for k in fetches {
        assert_eq!(got[k], plain[k], "{k}");
    }
    let neg = |v: &[f64]| v.iter().map(|x| -x).collect::<Vec<_>>();
    let r = [
        -1.125,
        0.625,
        -0.125,
        0.25,
        0.8750001192092896,
        -0.12499988079071045,
        -1.024999976158142,
        0.5416666269302368,
        -0.024999991059303284,
        -0.20000004768371582,
        0.9750001430511475,
        -0.024999871850013733,
        -0.875,
        0.4166666269302368,
        0.125,
        -0.875,
        1.1250001192092896,
        0.12500011920928955,
        -0.7249999642372131,
        0.5666666626930237,
        0.27500003576278687,
        -0.7249999642372131,
        -0.10000038146972656,
        0.2750001549720764,
        -0.625,
        0.6666666269302368,
        0.375,
        -0.625,
        -0.9166669845581055,
        0.37500011920928955,
    ];
    assert_eq!(got["rn:0"].shape, [1, 5, 3, 2]);
    assert_close(&got["rn:0"].data, &neg(&r), 1e-6, "ResizeBilinear half-pixel");
    let a = [
        -1.25,
        0.5,
        -0.7999999523162842,
        0.9500000476837158,
        -0.34999996423721313,
        0.8499999046325684,
        0.10000002384185791,
        -0.35000014305114746,
        0.5500000715255737,
        -0.44999992847442627,
        1.0,
        0.0,
        -1.0833333730697632,
        0.6666666865348816,
        -0.6333332657814026,
        0.016666650772094727,
        -0.18333329260349274,
        -0.4500000476837158,
        0.2666667103767395,
        -0.5500000715255737,
        0.7166667580604553,
        -0.2833332419395447,
        1.1666666269302368,
        0.1666666716337204,
        -0.9166666269302368,
        0.8333333730697632,
        -0.4666666090488434,
        -0.366666704416275,
        -0.01666662096977234,
        -1.0166665315628052,
        0.4333333671092987,
        -0.5666666030883789,
        0.5166666507720947,
        -0.11666658520698547,
        0.41666656732559204,
        0.3333333432674408,
        -0.75,
        1.0,
        -0.29999998211860657,
        -0.20000004768371582,
        0.15000003576278687,
        -0.8499999642372131,
        0.6000000238418579,
        -0.3999999761581421,
        -0.05000019073486328,
        0.05000007152557373,
        -1.25,
        0.5,
    ];
    assert_close(&got["an:0"].data, &neg(&a), 1e-6, "ResizeBilinear align_corners");
    // The int32 image is 4·x (exact integers) and the float64 one x: TensorFlow reads both as
    // float32, so their resizes are 4·r (scaling by a power of two is exact) and a.
    let r4: Vec<f64> = r.iter().map(|v| 4.0 * v).collect();
    assert_close(&got["rin:0"].data, &neg(&r4), 4e-6, "ResizeBilinear of int32");
    assert_close(&got["rdn:0"].data, &neg(&a), 1e-6, "ResizeBilinear of float64");
    let l = [
        -1.25,
        0.5,
        -0.6499999761581421,
        1.100000023841858,
        -0.04999998211860657,
        0.04999995231628418,
        0.5500000715255737,
        -0.44999992847442627,
        1.0,
        0.0,
        -0.875,
        0.875,
        -0.2749999761581421,
        -0.7250000238418579,
        0.32500001788139343,
        -0.6749999523162842,
        0.3749999403953552,
        -0.07499992847442627,
        0.0,
        0.375,
    ];
    assert_close(&got["ln:0"].data, &neg(&l), 1e-6, "ResizeBilinear legacy");
    let g = [
        -1.5,
        0.08333343267440796,
        -5.960464477539063e-08,
        -0.4833333492279053,
        0.4499998688697815,
        -0.26666688919067383,
        0.7500001788139343,
        1.166666865348816,
        0.7499998211860657,
        -0.75,
        -0.4999999403953552,
        0.05000007152557373,
        -0.6499999165534973,
        0.1333335041999817,
        -1.4901161193847656e-07,
        -0.3333333730697632,
        -0.08333314955234528,
        1.5,
        0.0833333283662796,
        -0.40000006556510925,
        -0.04999985918402672,
        -0.5333335995674133,
        -0.75,
        0.8333334922790527,
    ];
    assert_eq!(got["gn:0"].shape, [1, 3, 4, 2]);
    assert_close(&got["gn:0"].data, &neg(&g), 1e-6, "ResizeBilinearGrad");
    assert_eq!(got["k1f:0"].data, [1.0, 1.0, 0.0, 0.0, 0.0]);
    assert_eq!(got["k2f:0"].data, [1.0, 1.0, 0.0, 1.0, 0.0]);
    assert_eq!(got["kf:0"].data, [1.0, 1.0, 0.0, 0.0, 0.0]);
    let n = [
        -1.25, 0.5, 0.25, -0.75, 1.0, 0.0, -1.25, 0.5, 0.25, -0.75, 1.0, 0.0, -1.0, 0.75, 0.5, -0.5, 1.25, 0.25, -0.75,
        1.0, 0.75, -0.25, -1.25, 0.5, -0.75, 1.0, 0.75, -0.25, -1.25, 0.5,
    ];
    assert_eq!(got["nn:0"].data, neg(&n));
    let na = [
        -1.25, 0.5, -0.5, 1.25, -0.5, 1.25, 0.25, -0.75, 0.25, -0.75, 1.0, 0.0, 1.0, 0.0, -0.75, 1.0, 0.0, -1.0, 0.0,
        -1.0, 0.75, -0.25, 0.75, -0.25, -1.25, 0.5, -1.25, 0.5,
    ];
    assert_eq!(got["nan:0"].shape, [1, 2, 7, 2]);
    assert_eq!(got["nan:0"].data, neg(&na));
    let ng = [
        -2.0, -0.5, 0.0, 0.0, 1.0, -1.0, 0.5, 2.0, 0.5, -0.5, 0.0, 0.0, -1.5, 1.0, 0.0, -1.0, 0.5, 2.0, 0.0, 0.0, 0.0,
        -2.0, -0.5, 1.0,
    ];
    assert_eq!(got["ngn:0"].data, neg(&ng));
    assert_clustered(&gr, &["r", "a", "l", "g", "k1", "k2", "n", "na", "ng", "ri", "rd"]);
}

/// A Keras-style recurrent loop: the inputs unstacked into a TensorList, the state updated
/// from a variable the loop only reads (the `hoist-loop-reads` pass carries its value), each
/// state pushed onto an accumulator list; a second loop pops the accumulator (a while-loop
/// gradient's shape) and a `TensorListStack` gathers the states. Everything is compiled —
/// the loops with their list ops inside one cluster — and equals the plain executor and the
/// recurrence computed here.
#[test]
fn a_recurrent_loop_with_tensor_lists_and_a_read_only_variable_compiles() {
    let g = r#"
w = VarHandleOp() {dtype = float32, shape = shape[2], shared_name = "w"}
x = Placeholder() {dtype = float32, shape = shape[3,2]}
zero = Const() {dtype = int32, value = int32[]{0}}
n = Const() {dtype = int32, value = int32[]{3}}
es = Const() {dtype = int32, value = int32[1]{2}}
esu = Const() {dtype = int32, value = int32[1]{-1}}
xs = TensorListFromTensor(x, es) {element_dtype = float32, shape_type = int32}
acc = EmptyTensorList(esu, n) {element_dtype = float32, shape_type = int32}
h0 = Const() {dtype = float32, value = float32[2]{0.25, -0.5}}
s0 = Const() {dtype = float32, value = float32[2]{0.0, 0.0}}
loop = While(zero, h0, xs, acc, w) {T = [int32, float32, variant, variant, resource], cond = @cond, body = @body}
st = TensorListStack(loop:3, es) {element_dtype = float32, num_elements = 3}
back = StatelessWhile(zero, loop:3, s0) {T = [int32, variant, float32], cond = @cond2, body = @body2}
function cond(i: int32, h: float32, xs: variant, acc: variant, w: resource) -> (c: bool) {
  three = Const() {dtype = int32, value = int32[]{3}}
  l = Less(i, three:0) {T = int32}
  return c = l:0
}
function body(i: int32, h: float32, xs: variant, acc: variant, w: resource) -> (i2: int32, h2: float32, xs2: variant, acc2: variant, w2: resource) {
  es = Const() {dtype = int32, value = int32[1]{2}}
  xi = TensorListGetItem(xs, i, es:0) {element_dtype = float32}
  r = ReadVariableOp(w) {dtype = float32}
  m = Mul(h, r:0) {T = float32}
  a = AddV2(m:0, xi:0) {T = float32}
  hn = Tanh(a:0) {T = float32}
  pushed = TensorListPushBack(acc, hn:0) {element_dtype = float32}
  one = Const() {dtype = int32, value = int32[]{1}}
  next = AddV2(i, one:0) {T = int32}
  return i2 = next:0
  return h2 = hn:0
  return xs2 = xs
  return acc2 = pushed:0
  return w2 = w
}
function cond2(i: int32, acc: variant, s: float32) -> (c: bool) {
  three = Const() {dtype = int32, value = int32[]{3}}
  l = Less(i, three:0) {T = int32}
  return c = l:0
}
function body2(i: int32, acc: variant, s: float32) -> (i2: int32, acc2: variant, s2: float32) {
  esu = Const() {dtype = int32, value = int32[1]{-1}}
  pop = TensorListPopBack(acc, esu:0) {element_dtype = float32}
  k = Cast(i) {SrcT = int32, DstT = float32}
  one = Const() {dtype = int32, value = int32[]{1}}
  onef = Const() {dtype = float32, value = float32[]{1.0}}
  wk = AddV2(k:0, onef:0) {T = float32}
  t = Mul(pop:1, wk:0) {T = float32}
  sum = AddV2(s, t:0) {T = float32}
  next = AddV2(i, one:0) {T = int32}
  return i2 = next:0
  return acc2 = pop:0
  return s2 = sum:0
}
"#;
    let dir = tempfile::tempdir().unwrap();
    let g = write(&dir, "rnn.graph", g);
    let w = [0.5f64, -1.0];
    let vars = vec![("w".to_string(), autoclust_graph::Tensor::from_f32(vec![2], vec![0.5, -1.0]).unwrap())];
    let vars_file = dir.path().join("vars.safetensors");
    std::fs::write(&vars_file, autoclust_runtime::tensor_io::write_safetensors(&vars).unwrap()).unwrap();
    let vars_file = vars_file.display().to_string();
    let x = [0.1f64, 0.2, -0.3, 0.4, 1.0, -2.0];
    let feed = format!("x={}", nested(&x, &[3, 2]));
    let args = ["--vars", &vars_file, "--feed", &feed, "--fetch", "loop:1", "--fetch", "st:0", "--fetch", "back:2"];
    let (got, plain, bench) = both_modes(&g, &args);
    for k in ["loop:1", "st:0", "back:2"] {
        assert_eq!(got[k], plain[k], "{k}");
    }
    // The recurrence, and the popped states weighted 1, 2, 3 from the last.
    let mut h = [0.25f64, -0.5];
    let mut states = Vec::new();
    for t in 0..3 {
        for j in 0..2 {
            h[j] = (h[j] * w[j] + x[2 * t + j]).tanh();
        }
        states.push(h);
    }
    assert_close(&got["loop:1"].data, &h, 1e-6, "final state");
    assert_close(&got["st:0"].data, &states.concat(), 1e-6, "stacked states");
    let sum: Vec<f64> = (0..2).map(|j| (0..3).map(|k| states[2 - k][j] * (k as f64 + 1.0)).sum()).collect();
    assert_close(&got["back:2"].data, &sum, 1e-6, "popped");
    // Only the feed and the handle stay outside clusters.
    assert_eq!(bench["total_nodes"].as_u64().unwrap() - bench["clustered_nodes"].as_u64().unwrap(), 2, "{bench}");
    let dump = dir.path().join("dump");
    let d = dump.display().to_string();
    let out = autoclust(&["run", &g, "--vars", &vars_file, "--feed", &feed, "--fetch", "back:2", "--dump-clif", &d]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let plan = std::fs::read_to_string(dump.join("cluster_0_fn.plan")).unwrap();
    assert!(plan.contains("kernel While(@cond_hoisted, @body_hoisted) at loop"), "{plan}");
    assert!(plan.contains("kernel While(@cond2, @body2) at back"), "{plan}");
}

const INT_REDUCTIONS: &str = r#"
x = Placeholder() {dtype = int32, shape = shape[2, 3]}
y = Placeholder() {dtype = int64, shape = shape[2, 3]}
a0 = Const() {dtype = int32, value = int32[]{0}}
a1 = Const() {dtype = int32, value = int32[]{1}}
both = Const() {dtype = int32, value = int32[2]{0, 1}}
mx = Max(x, a1) {T = int32, Tidx = int32, keep_dims = false}
mn = Min(x, a0) {T = int32, Tidx = int32, keep_dims = false}
sm = Sum(x, both) {T = int32, Tidx = int32, keep_dims = false}
pr = Prod(y, a1) {T = int64, Tidx = int32, keep_dims = true}
me = Mean(x, a1) {T = int32, Tidx = int32, keep_dims = false}
men = Mean(y, a0) {T = int64, Tidx = int32, keep_dims = false}
mxn = Neg(mx) {T = int32}
"#;

/// Reductions of run-time integer values (Keras' bincount takes the `Max` of its int32 input;
/// the clusterer admits them): compiled, equal to the plain executor and to TensorFlow's
/// integer semantics (`Mean` truncates toward zero).
#[test]
fn integer_reductions_compile_and_match() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(&dir, "ir.graph", INT_REDUCTIONS);
    let mut args = vec!["--feed", "x=[[3,-1,7],[2,9,-4]]", "--feed", "y=[[3,-1,7],[2,9,-10]]"];
    let fetches = ["mx:0", "mn:0", "sm:0", "pr:0", "me:0", "men:0", "mxn:0"];
    for f in &fetches {
        args.extend(["--fetch", f]);
    }
    let (got, plain, _) = both_modes(&g, &args);
    for k in fetches {
        assert_eq!(got[k], plain[k], "{k}");
    }
    assert_eq!(got["mx:0"].data, [7.0, 9.0]);
    assert_eq!(got["mn:0"].data, [2.0, -1.0, -4.0]);
    assert_eq!(got["sm:0"].data, [16.0]);
    assert_eq!(got["pr:0"].shape, [2, 1]);
    assert_eq!(got["pr:0"].data, [-21.0, -180.0]);
    assert_eq!(got["me:0"].data, [3.0, 2.0]);
    assert_eq!(got["men:0"].data, [2.0, 4.0, -1.0]);
    assert_eq!(got["mxn:0"].data, [-7.0, -9.0]);
    assert_clustered(&g, &["mx", "mn", "sm", "pr", "me", "men"]);
}

/// Float64 reductions (`Sum`, `Mean`, `Max`, `Min`, `Prod` over leading, middle, trailing and
/// all axes) compile — they were admitted into clusters and then left to the interpreter —
/// and give the interpreter's values bit for bit (each output accumulated in input order).
#[test]
fn float64_reductions_compile_and_match_the_interpreter_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let graph = write(
        &dir,
        "f64_reduce.graph",
        "x = Placeholder() {dtype = float64, shape = shape[3, 4, 5]}\n\
         a0 = Const() {dtype = int32, value = int32[1]{0}}\n\
         a1 = Const() {dtype = int32, value = int32[1]{1}}\n\
         a02 = Const() {dtype = int32, value = int32[2]{0, 2}}\n\
         all = Const() {dtype = int32, value = int32[3]{0, 1, 2}}\n\
         e = Exp(x) {T = float64}\n\
         s = Sum(e, a0) {T = float64, Tidx = int32, keep_dims = false}\n\
         m = Mean(e, a1) {T = float64, Tidx = int32, keep_dims = true}\n\
         mx = Max(x, all) {T = float64, Tidx = int32, keep_dims = false}\n\
         mn = Min(x, a02) {T = float64, Tidx = int32, keep_dims = false}\n\
         p = Prod(e, a1) {T = float64, Tidx = int32, keep_dims = false}\n\
         out = AddV2(s, s) {T = float64}\n",
    );
    let x: Vec<f64> = data(60, 7).iter().map(|v| v * 3.0 - 1.0).collect();
    let feed = format!("x={}", nested(&x, &[3, 4, 5]));
    let args =
        ["--feed", &feed, "--fetch", "out:0", "--fetch", "m:0", "--fetch", "mx:0", "--fetch", "mn:0", "--fetch", "p:0"];
    let (got, want, _) = both_modes(&graph, &args);
    assert_same_bits(&got, &want, &["out:0", "m:0", "mx:0", "mn:0", "p:0"]);
}

/// A float64 Softmax or ArgMax (float32-only lowerings in the JIT) stays outside clusters
/// instead of sending its cluster to the interpreter: the elementwise ops around them still
/// compile, and no `note:` is printed. A float64 `MatMul` (the einsum kernel's product, as
/// float64 `BatchMatMulV2`) joins its producers' cluster, bit for bit the plain executor's.
#[test]
fn float64_ops_the_jit_lowers_for_float32_only_stay_outside_clusters() {
    let dir = tempfile::tempdir().unwrap();
    let graph = write(
        &dir,
        "f64_kernels.graph",
        "x = Placeholder() {dtype = float64, shape = shape[2, 3]}\n\
         w = Const() {dtype = float64, value = float64[3, 2]{1, 2, 3, 4, 5, 6}}\n\
         ax = Const() {dtype = int32, value = int32[]{1}}\n\
         a = Neg(x) {T = float64}\n\
         b = Square(a) {T = float64}\n\
         mm = MatMul(b, w) {T = float64, transpose_a = false, transpose_b = false}\n\
         sm = Softmax(mm) {T = float64}\n\
         am = ArgMax(sm, ax) {T = float64, Tidx = int32, output_type = int64}\n\
         c = Neg(sm) {T = float64}\n\
         d = Square(c) {T = float64}\n",
    );
    let args = ["--feed", "x=[[1,2,3],[4,5,6]]", "--fetch", "d:0", "--fetch", "am:0", "--fetch", "mm:0"];
    let (got, want, _) = both_modes(&graph, &args);
    assert_same_bits(&got, &want, &["d:0", "am:0", "mm:0"]);
    // (x²)·w, x = [[1,2,3],[4,5,6]], w = [[1,2],[3,4],[5,6]].
    assert_eq!(got["mm:0"].data, [58.0, 72.0, 271.0, 348.0]);
    assert_clustered(&graph, &["a", "b", "mm"]);
}

/// A float64 `MatMul` with either operand transposed, compiled (inside a cluster with its
/// producers), equals the plain executor bit for bit.
#[test]
fn float64_matmul_compiles_with_transposes() {
    let dir = tempfile::tempdir().unwrap();
    let graph = write(
        &dir,
        "f64_mm.graph",
        "x = Placeholder() {dtype = float64, shape = shape[3, 4]}\n\
         y = Placeholder() {dtype = float64, shape = shape[3, 4]}\n\
         a = Neg(x) {T = float64}\n\
         b = Square(y) {T = float64}\n\
         ta = MatMul(a, b) {T = float64, transpose_a = true, transpose_b = false}\n\
         tb = MatMul(a, b) {T = float64, transpose_a = false, transpose_b = true}\n\
         tt = MatMul(ta, a) {T = float64, transpose_a = true, transpose_b = true}\n\
         o = AddN(ta, ta) {N = 2, T = float64}\n",
    );
    let xs = nested(&data(12, 7), &[3, 4]);
    let ys = nested(&data(12, 8), &[3, 4]);
    let (fx, fy) = (format!("x={xs}"), format!("y={ys}"));
    let args = ["--feed", &fx, "--feed", &fy, "--fetch", "o:0", "--fetch", "tb:0", "--fetch", "tt:0"];
    let (got, want, _) = both_modes(&graph, &args);
    assert_same_bits(&got, &want, &["o:0", "tb:0", "tt:0"]);
    assert_eq!(got["tt:0"].shape, [4, 3]);
    assert_clustered(&graph, &["a", "b", "ta", "tb", "tt", "o"]);
}

const HOST_STEPS: &str = r#"
x = Placeholder() {dtype = float32, shape = shape[3, 4]}
y = Placeholder() {dtype = float32, shape = shape[3, 4]}
l = Placeholder() {dtype = int32, shape = shape[3]}
dp = Placeholder() {dtype = int32, shape = shape[]}
a = Neg(x) {T = float32}
at = Atan2(a, y) {T = float32}
sq = Square(y) {T = float32}
xl = Xlogy(at, sq) {T = float32}
sg = SoftplusGrad(xl, x) {T = float32}
half = Const() {dtype = float32, value = float32[]{0.5}}
sqh = AddV2(sq, half) {T = float32}
lgp = Lgamma(sqh) {T = float32}
lg = Neg(lgp) {T = float32}
depth = Const() {dtype = int32, value = int32[]{4}}
on = Const() {dtype = float32, value = float32[]{1}}
off = Const() {dtype = float32, value = float32[]{0}}
oh = OneHot(l, depth, on, off) {T = float32, TI = int32, axis = -1}
soh = Mul(sg, oh) {T = float32}
m = AddV2(soh, sg) {T = float32}
lo = Const() {dtype = int64, value = int64[]{-1}}
up = Const() {dtype = int64, value = int64[]{0}}
bp = MatrixBandPart(m, lo, up) {T = float32, Tindex = int64}
k = Const() {dtype = int32, value = int32[]{2}}
tk = TopKV2(bp, k) {T = float32, sorted = true}
out = AddV2(tk:0, tk:0) {T = float32}
ones = Const() {dtype = float32, value = float32[4, 4]{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}}
mask = MatrixBandPart(ones, lo, up) {T = float32, Tindex = int64}
mm = MatMul(x, mask) {T = float32, transpose_a = false, transpose_b = false}
ohd = OneHot(l, dp, on, off) {T = float32, TI = int32, axis = -1}
ohn = Neg(ohd) {T = float32}
"#;

/// Pure ops without a lowering (`Atan2`, `Xlogy`, `SoftplusGrad`, `Lgamma`, `OneHot`,
/// `MatrixBandPart`, `TopKV2`) join clusters as host steps — the interpreter's kernel called
/// from the compiled code — so the cluster is not cut at each of them: every node but the
/// feeds is clustered, nothing is interpreted, the values are the plain executor's bit for
/// bit and TensorFlow 2.21's. A `OneHot` whose depth is a run-time value (it fixes the
/// output's shape) stays outside, with its reason.
#[test]
fn host_step_ops_join_clusters_and_match_tensorflow() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(&dir, "host.graph", HOST_STEPS);
    let x = [0.5, -1.25, 2.0, 0.0, 1.5, -0.75, 0.25, -2.0, 3.0, 0.125, -0.5, 1.0];
    let y = [1.0, -2.0, 0.5, 0.0, -1.5, 0.75, 2.5, -0.25, 0.5, 1.25, -3.0, 2.0];
    let feeds = [format!("x={}", nested(&x, &[3, 4])), format!("y={}", nested(&y, &[3, 4]))];
    let fetches = ["at:0", "xl:0", "sg:0", "lg:0", "bp:0", "out:0", "tk:1", "mm:0", "ohn:0"];
    let mut args = vec!["--feed", &feeds[0], "--feed", &feeds[1], "--feed", "l=[2,0,3]", "--feed", "dp=3"];
    for k in &fetches {
        args.extend(["--fetch", k]);
    }
    let (got, plain, _) = both_modes(&g, &args);
    assert_same_bits(&got, &plain, &fetches);
    // TensorFlow 2.21 (tf.math.atan2, xlogy, raw_ops.SoftplusGrad, lgamma, one_hot,
    // linalg.band_part, math.top_k) on the same operands.
    let tf: [(&str, &[f64]); 6] = [
        (
            "at:0",
            &[
                -0.463_647_544,
                2.582_993_507,
                -1.325_817_704,
                -0.0,
                -2.356_194_496,
                0.785_398_126,
                -0.099_668_659,
                1.695_151_329,
                -1.405_647_635,
                -0.099_668_652,
                2.976_444_006,
                -0.463_647_604,
            ],
        ),
        (
            "xl:0",
            &[
                -0.0,
                3.580_789_328,
                1.837_973_595,
                -0.0,
                -1.910_709_262,
                -0.451_889_932,
                -0.182_650_939,
                -4.699_957_371,
                1.948_641_419,
                -0.044_480_834,
                6.539_916_039,
                -0.642_752_051,
            ],
        ),
        (
            "lg:0",
            &[
                0.120_782_234,
                -2.453_736_782,
                -0.203_280_956,
                -0.572_364_926,
                -0.475_214_660,
                0.032_957_099,
                -6.115_915_775,
                -0.458_655_477,
                -0.203_280_956,
                -0.027_667_522,
                -11.689_332_963,
                -2.453_736_782,
            ],
        ),
        (
            "bp:0",
            &[
                -0.0,
                0.0,
                0.0,
                0.0,
                -3.124_294_043,
                -0.144_975_916,
                0.0,
                0.0,
                1.856_225_491,
                -0.023_628_637,
                2.469_084_263,
                0.0,
            ],
        ),
        ("out:0", &[-0.0, 0.0, 0.0, 0.0, 4.938_168_526, 3.712_450_981]),
        ("tk:1", &[0.0, 1.0, 2.0, 3.0, 2.0, 0.0]),
    ];
    for (k, want) in tf {
        assert_close(&got[k].data, want, 1e-6, k);
    }
    // The causal mask folded from constants: x times the lower-triangular ones.
    let mm: Vec<f64> = (0..3).flat_map(|r| (0..4).map(move |c| (c..4).map(|i| x[r * 4 + i]).sum::<f64>())).collect();
    assert_close(&got["mm:0"].data, &mm, 1e-6, "mm:0");
    assert_eq!(got["ohn:0"].shape, [3, 3]);
    assert_clustered(
        &g,
        &["a", "at", "sq", "xl", "sg", "lgp", "lg", "oh", "soh", "m", "bp", "tk", "out", "mask", "mm"],
    );
    let c = autoclust(&["cluster", &g, "--explain"]);
    let text = String::from_utf8_lossy(&c.stdout);
    let line = text.lines().find(|l| l.contains("ohd (OneHot)")).unwrap_or_else(|| panic!("no line for ohd:\n{text}"));
    assert!(line.contains("must be known at compile time"), "{line}");
}

/// ArgMax/ArgMin skip NaNs as TensorFlow's CPU kernel does (Eigen's arg reducers start from
/// index 0 holding the type's lowest value and take only a strictly better element): a
/// leading NaN no longer wins (sweep 11: `[nan, -3, 1, .25]` gave 0 where TensorFlow gives
/// 2), and a row of NaNs gives 0 — compiled and interpreted alike.
#[test]
fn arg_max_and_min_skip_nans_as_tensorflow() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(
        &dir,
        "arg.graph",
        "x = Placeholder() {dtype = float32, shape = shape[3, 4]}\n\
         s = Placeholder() {dtype = float32, shape = shape[3, 4]}\n\
         n = Log(s) {T = float32}\n\
         y = AddV2(x, n) {T = float32}\n\
         ax = Const() {dtype = int32, value = int32[]{1}}\n\
         amx = ArgMax(y, ax) {T = float32, Tidx = int32, output_type = int64}\n\
         amn = ArgMin(y, ax) {T = float32, Tidx = int32, output_type = int32}\n",
    );
    // y = [[nan, -3, 1, .25], [7, nan, nan, nan], [nan, nan, nan, nan]] (Log(-1) is NaN).
    let args = [
        "--feed",
        "x=[[0,-3,1,0.25],[7,2,-5,9],[0,0,0,0]]",
        "--feed",
        "s=[[-1,1,1,1],[1,-1,-1,-1],[-1,-1,-1,-1]]",
        "--fetch",
        "amx:0",
        "--fetch",
        "amn:0",
    ];
    let (got, plain, _) = both_modes(&g, &args);
    for (k, want) in [("amx:0", [2.0, 0.0, 0.0]), ("amn:0", [1.0, 0.0, 0.0])] {
        assert_eq!(got[k].data, want, "clustered {k}");
        assert_eq!(plain[k].data, want, "plain {k}");
    }
    assert_clustered(&g, &["amx", "amn"]);
}

const RANGE_IN_BODIES: &str = r#"
x = Placeholder() {dtype = float32, shape = shape[6]}
p = Placeholder() {dtype = bool, shape = shape[]}
zero = Const() {dtype = int32, value = int32[]{0}}
n = Size(x) {T = float32, out_type = int32}
acc0 = Const() {dtype = float32, value = float32[2]{0, 0}}
loop = StatelessWhile(zero, acc0, n, x) {T = [int32, float32, int32, float32], cond = @cond, body = @body}
out = Neg(loop:1) {T = float32}
br = StatelessIf(p, n, x) {Tcond = bool, Tin = [int32, float32], Tout = [float32], then_branch = @ramp, else_branch = @flat}
bo = Neg(br) {T = float32}
bad = StatelessWhile(zero, acc0, n, x) {T = [int32, float32, int32, float32], cond = @cond, body = @growing}
badn = Neg(bad:1) {T = float32}
function cond(i: int32, acc: float32, n: int32, x: float32) -> (c: bool) {
  three = Const() {dtype = int32, value = int32[]{3}}
  l = Less(i, three:output:0) {T = int32}
  return c = l:z:0
}
function body(i: int32, acc: float32, n: int32, x: float32) -> (i2: int32, acc2: float32, n2: int32, x2: float32) {
  zero = Const() {dtype = int32, value = int32[]{0}}
  one = Const() {dtype = int32, value = int32[]{1}}
  two = Const() {dtype = int32, value = int32[]{2}}
  size = Const() {dtype = int32, value = int32[1]{2}}
  shp = Const() {dtype = int32, value = int32[1]{1}}
  r = Range(zero:output:0, n, one:output:0) {Tidx = int32}
  rf = Cast(r:output:0) {SrcT = int32, DstT = float32}
  w = Mul(rf:y:0, x) {T = float32}
  b = Mul(i, two:output:0) {T = int32}
  bb = Reshape(b:z:0, shp:output:0) {T = int32, Tshape = int32}
  sl = Slice(w:z:0, bb:output:0, size:output:0) {T = float32, Index = int32}
  acc2 = AddV2(acc, sl:output:0) {T = float32}
  next = AddV2(i, one:output:0) {T = int32}
  return i2 = next:z:0
  return acc2 = acc2:z:0
  return n2 = n
  return x2 = x
}
function growing(i: int32, acc: float32, n: int32, x: float32) -> (i2: int32, acc2: float32, n2: int32, x2: float32) {
  zero = Const() {dtype = int32, value = int32[]{0}}
  one = Const() {dtype = int32, value = int32[]{1}}
  r = Range(zero:output:0, i, one:output:0) {Tidx = int32}
  rf = Cast(r:output:0) {SrcT = int32, DstT = float32}
  s = Sum(rf:y:0, zero:output:0) {T = float32, Tidx = int32, keep_dims = false}
  acc2 = AddV2(acc, s:output:0) {T = float32}
  next = AddV2(i, one:output:0) {T = int32}
  return i2 = next:z:0
  return acc2 = acc2:z:0
  return n2 = n
  return x2 = x
}
function ramp(n: int32, x: float32) -> (y: float32) {
  zero = Const() {dtype = int32, value = int32[]{0}}
  one = Const() {dtype = int32, value = int32[]{1}}
  r = Range(zero:output:0, n, one:output:0) {Tidx = int32}
  rf = Cast(r:output:0) {SrcT = int32, DstT = float32}
  w = Mul(rf:y:0, x) {T = float32}
  return y = w:z:0
}
function flat(n: int32, x: float32) -> (y: float32) {
  e = Neg(x) {T = float32}
  return y = e:y:0
}
"#;

/// A `Range` inside a loop body or a branch (`tf.image.non_max_suppression_padded`'s
/// `StatelessWhile` and `StatelessIf`, which TensorFlow's XLA clusters) whose bounds are
/// operands known when the cluster is compiled — here the `Size` of the input, passed
/// through the loop unchanged or given to the branch — no longer keeps the loop or branch
/// out of its cluster: the compiler folds it in the body compiled for that value. The loop
/// body's `Slice` at a loop-counter offset (a constant size) runs as a host step. Compiled,
/// equal to the plain executor bit for bit and to the definition (TensorFlow's `tf.range`).
/// A `Range` over the loop counter itself (its length changes each iteration) keeps its loop
/// out, with the reason in `cluster --explain`.
#[test]
fn range_in_loop_and_branch_bodies_compiles_on_compile_time_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(&dir, "range.graph", RANGE_IN_BODIES);
    let x = [0.5, -1.25, 2.0, 0.75, -3.0, 1.5];
    let feed_x = format!("x={}", nested(&x, &[6]));
    for (pred, then) in [("p=true", true), ("p=false", false)] {
        let args = ["--feed", &feed_x, "--feed", pred, "--fetch", "out:0", "--fetch", "bo:0", "--fetch", "badn:0"];
        let (got, plain, _) = both_modes(&g, &args);
        assert_same_bits(&got, &plain, &["out:0", "bo:0", "badn:0"]);
        // w[k] = k * x[k]; the loop sums w[0:2] + w[2:4] + w[4:6].
        let w: Vec<f64> = x.iter().enumerate().map(|(k, v)| k as f64 * v).collect();
        let acc = [-(w[0] + w[2] + w[4]), -(w[1] + w[3] + w[5])];
        assert_close(&got["out:0"].data, &acc, 1e-6, "loop");
        let branch: Vec<f64> = if then { w.iter().map(|v| -v).collect() } else { x.to_vec() };
        assert_close(&got["bo:0"].data, &branch, 1e-6, pred);
        // Sums of range(0), range(1), range(2).
        assert_close(&got["badn:0"].data, &[-1.0, -1.0], 0.0, "growing");
    }
    assert_clustered(&g, &["loop", "out", "br", "bo", "n"]);
    let c = autoclust(&["cluster", &g, "--explain"]);
    let text = String::from_utf8_lossy(&c.stdout).to_string() + &String::from_utf8_lossy(&c.stderr);
    let line = text.lines().find(|l| l.contains("bad (StatelessWhile)")).unwrap_or_else(|| panic!("no bad:\n{text}"));
    assert!(line.contains("'r' (Range) on values not known when the body is compiled"), "{line}");
}

const HOST_INTS: &str = r#"
u = Placeholder() {dtype = uint8, shape = shape[6]}
v = Placeholder() {dtype = int32, shape = shape[4]}
i8 = Placeholder() {dtype = int8, shape = shape[8]}
u8 = Placeholder() {dtype = uint8, shape = shape[8]}
i16 = Placeholder() {dtype = int16, shape = shape[8]}
u16 = Placeholder() {dtype = uint16, shape = shape[8]}
i32 = Placeholder() {dtype = int32, shape = shape[8]}
u32 = Placeholder() {dtype = uint32, shape = shape[8]}
i64 = Placeholder() {dtype = int64, shape = shape[8]}
u64 = Placeholder() {dtype = uint64, shape = shape[8]}
half = Const() {dtype = float32, value = float32[]{0.5}}
uf = Cast(u) {SrcT = uint8, DstT = float32, Truncate = false}
ufh = Mul(uf, half) {T = float32}
ui = Cast(u) {SrcT = uint8, DstT = int32, Truncate = false}
uin = Neg(ui) {T = int32}
vn = Neg(v) {T = int32}
back = Cast(vn) {SrcT = int32, DstT = uint8, Truncate = false}
p8 = PopulationCount(i8) {T = int8}
pu8 = PopulationCount(u8) {T = uint8}
p16 = PopulationCount(i16) {T = int16}
pu16 = PopulationCount(u16) {T = uint16}
i32n = Neg(i32) {T = int32}
p32 = PopulationCount(i32n) {T = int32}
pu32 = PopulationCount(u32) {T = uint32}
i64n = Neg(i64) {T = int64}
p64 = PopulationCount(i64n) {T = int64}
pu64 = PopulationCount(u64) {T = uint64}
c8 = Cast(p8) {SrcT = uint8, DstT = int32}
cu8 = Cast(pu8) {SrcT = uint8, DstT = int32}
c16 = Cast(p16) {SrcT = uint8, DstT = int32}
cu16 = Cast(pu16) {SrcT = uint8, DstT = int32}
c32 = Cast(p32) {SrcT = uint8, DstT = int32}
cu32 = Cast(pu32) {SrcT = uint8, DstT = int32}
c64 = Cast(p64) {SrcT = uint8, DstT = int32}
cu64 = Cast(pu64) {SrcT = uint8, DstT = int32}
all = AddN(c8, cu8, c16, cu16, c32, cu32, c64, cu64) {N = 8, T = int32}
"#;

/// `Cast` from and to uint8 (an image's pixels) and `PopulationCount` on every integer type
/// (its result is uint8) join clusters: the compiled code runs them by the interpreter's
/// kernel, the narrow values passing only between those steps and the cluster's arguments and
/// results. Compiled, equal to the plain executor, and to TensorFlow 2.21's values
/// (`tf.cast`, `tf.raw_ops.PopulationCount`) on the same operands.
#[test]
fn uint8_casts_and_population_count_join_clusters_and_match_tensorflow() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(&dir, "ints.graph", HOST_INTS);
    let signed = "[-128,-1,0,1,7,85,127,-86]";
    let unsigned = "[128,255,0,1,7,85,127,170]";
    // i32 and i64 are negated in the cluster before their count.
    let negated = "[128,1,0,-1,-7,-85,-127,86]";
    let feeds = [
        "u=[0,1,127,128,200,255]".to_string(),
        "v=[1,-256,-300,-7]".to_string(),
        format!("i8={signed}"),
        format!("u8={unsigned}"),
        format!("i16={signed}"),
        format!("u16={unsigned}"),
        format!("i32={negated}"),
        format!("u32={unsigned}"),
        format!("i64={negated}"),
        format!("u64={unsigned}"),
    ];
    let fetches = ["ufh:0", "uin:0", "back:0", "c8:0", "cu8:0", "c16:0", "c32:0", "c64:0", "cu64:0", "p64:0", "all:0"];
    let mut args = Vec::new();
    for f in &feeds {
        args.extend(["--feed", f.as_str()]);
    }
    for k in fetches {
        args.extend(["--fetch", k]);
    }
    let (got, plain, _) = both_modes(&g, &args);
    assert_same_bits(&got, &plain, &fetches);
    // TensorFlow 2.21: tf.cast(uint8 [0, 1, 127, 128, 200, 255]) and of int32 [-1, 256, 300, 7]
    // to uint8; PopulationCount of [-128, -1, 0, 1, 7, 85, 127, -86] per type.
    assert_eq!(got["ufh:0"].data, [0.0, 0.5, 63.5, 64.0, 100.0, 127.5]);
    assert_eq!(got["uin:0"].data, [0.0, -1.0, -127.0, -128.0, -200.0, -255.0]);
    assert_eq!(got["back:0"].data, [255.0, 0.0, 44.0, 7.0]);
    let eight = [1.0, 8.0, 0.0, 1.0, 3.0, 4.0, 7.0, 4.0];
    assert_eq!(got["c8:0"].data, eight);
    assert_eq!(got["cu8:0"].data, eight);
    assert_eq!(got["c16:0"].data, [9.0, 16.0, 0.0, 1.0, 3.0, 4.0, 7.0, 12.0]);
    assert_eq!(got["c32:0"].data, [25.0, 32.0, 0.0, 1.0, 3.0, 4.0, 7.0, 28.0]);
    assert_eq!(got["c64:0"].data, [57.0, 64.0, 0.0, 1.0, 3.0, 4.0, 7.0, 60.0]);
    assert_eq!(got["p64:0"].data, got["c64:0"].data);
    assert_eq!(got["cu64:0"].data, eight);
    // c8, cu8, cu16, cu32 and cu64 count the same bits; c16, c32 and c64 the sign extension.
    let all: Vec<f64> =
        (0..8).map(|k| 5.0 * eight[k] + got["c16:0"].data[k] + got["c32:0"].data[k] + got["c64:0"].data[k]).collect();
    assert_eq!(got["all:0"].data, all);
    assert_clustered(&g, &["uf", "ufh", "ui", "back", "p8", "pu8", "p16", "pu16", "p32", "pu32", "p64", "pu64", "all"]);
}

const COUNT_SAMPLE_REVERSE: &str = r#"
x = Placeholder() {dtype = float32, shape = shape[3, 4]}
y = Placeholder() {dtype = int32, shape = shape[4, 3, 2]}
d = Placeholder() {dtype = int32, shape = shape[2, 3]}
w = Placeholder() {dtype = float32, shape = shape[2, 3]}
d64 = Placeholder() {dtype = int64, shape = shape[6]}
lg = Placeholder() {dtype = float32, shape = shape[2, 3]}
sd = Placeholder() {dtype = int64, shape = shape[2]}
size = Placeholder() {dtype = int32, shape = shape[]}
onef = Const() {dtype = float32, value = float32[]{1}}
xs = Mul(x, onef) {T = float32}
l1 = Const() {dtype = int64, value = int64[3]{4, 0, 2}}
rs1 = ReverseSequence(xs, l1) {T = float32, Tlen = int64, seq_dim = 1, batch_dim = 0}
rs1n = Neg(rs1) {T = float32}
l2 = Const() {dtype = int32, value = int32[3]{1, 3, 4}}
rs2 = ReverseSequence(y, l2) {T = int32, Tlen = int32, seq_dim = 0, batch_dim = 1}
rs2n = Neg(rs2) {T = int32}
l3 = Const() {dtype = int32, value = int32[4]{2, 1, 2, 0}}
rs3 = ReverseSequence(y, l3) {T = int32, Tlen = int32, seq_dim = 2, batch_dim = 0}
rs3n = Neg(rs3) {T = int32}
five = Const() {dtype = int32, value = int32[]{5}}
bc1 = DenseBincount(d, five, w) {T = float32, Tidx = int32, binary_output = false}
bc1n = Neg(bc1) {T = float32}
nw = Const() {dtype = float32, value = float32[0]{}}
bc2 = DenseBincount(d, five, nw) {T = float32, Tidx = int32, binary_output = true}
bc2n = Neg(bc2) {T = float32}
four = Const() {dtype = int64, value = int64[]{4}}
iw = Const() {dtype = int32, value = int32[6]{1, 2, 3, 4, 5, 6}}
bc3 = DenseBincount(d64, four, iw) {T = int32, Tidx = int64, binary_output = false}
bc3n = Neg(bc3) {T = int32}
six = Const() {dtype = int64, value = int64[]{6}}
nw64 = Const() {dtype = int64, value = int64[0]{}}
bc4 = DenseBincount(d64, six, nw64) {T = int64, Tidx = int64, binary_output = false}
bc4n = Neg(bc4) {T = int64}
fw = Const() {dtype = float64, value = float64[6]{1.5, 2, 3, 4, 5, 6}}
bc5 = DenseBincount(d64, six, fw) {T = float64, Tidx = int64, binary_output = true}
bc5n = Neg(bc5) {T = float64}
dyn = DenseBincount(d, size, w) {T = float32, Tidx = int32, binary_output = false}
dynn = Neg(dyn) {T = float32}
lgs = Mul(lg, onef) {T = float32}
ns = Const() {dtype = int32, value = int32[]{6}}
seed = Const() {dtype = int64, value = int64[2]{7, 13}}
mn1 = StatelessMultinomial(lgs, ns, seed) {T = float32, Tseed = int64, output_dtype = int64}
mn1n = Neg(mn1) {T = int64}
lgd = Cast(lgs) {SrcT = float32, DstT = float64}
n4 = Const() {dtype = int32, value = int32[]{4}}
seed2 = Const() {dtype = int32, value = int32[2]{1, 2}}
mn2 = StatelessMultinomial(lgd, n4, seed2) {T = float64, Tseed = int32, output_dtype = int32}
mn2n = Neg(mn2) {T = int32}
mn3 = StatelessMultinomial(lgs, ns, sd) {T = float32, Tseed = int64, output_dtype = int64}
mn3n = Neg(mn3) {T = int64}
"#;

/// `ReverseSequence` (seq_dim/batch_dim either way round and a third axis, int32 and int64
/// lengths), `DenseBincount` (int32 and int64 input, float32, float64, int32 and int64 weights
/// or none, `binary_output`) and `StatelessMultinomial` (float32 and float64 logits, int32 and
/// int64 seeds — constant or fed — and outputs) join clusters as host steps: compiled, equal
/// to the plain executor bit for bit (the sampler is a function of its seed), and to
/// TensorFlow 2.21's values on the same operands. A bincount whose size is a run-time value
/// (it fixes the output's shape) stays outside, with its reason.
#[test]
fn reverse_sequence_bincount_and_multinomial_join_clusters_and_match_tensorflow() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(&dir, "csr.graph", COUNT_SAMPLE_REVERSE);
    let x: Vec<f64> = (0..12).map(|k| k as f64 * 0.5 - 1.0).collect();
    let y: Vec<f64> = (0..24).map(f64::from).collect();
    let feeds = [
        format!("x={}", nested(&x, &[3, 4])),
        format!("y={}", nested(&y, &[4, 3, 2])),
        "d=[[1,1,3],[0,4,4]]".to_string(),
        "w=[[0.5,1.5,2.0],[1.0,-1.0,3.0]]".to_string(),
        "d64=[3,1,3,5,0,3]".to_string(),
        "lg=[[0,1,2],[2,1,0]]".to_string(),
        "sd=[7,13]".to_string(),
        "size=5".to_string(),
    ];
    let fetches = [
        "rs1n:0", "rs2n:0", "rs3n:0", "bc1n:0", "bc2n:0", "bc3n:0", "bc4n:0", "bc5n:0", "dynn:0", "mn1n:0", "mn2n:0",
        "mn3n:0",
    ];
    let mut args = Vec::new();
    for f in &feeds {
        args.extend(["--feed", f.as_str()]);
    }
    for k in fetches {
        args.extend(["--fetch", k]);
    }
    let (got, plain, _) = both_modes(&g, &args);
    assert_same_bits(&got, &plain, &fetches);
    let neg = |v: &[f64]| v.iter().map(|x| -x).collect::<Vec<f64>>();
    // TensorFlow 2.21, tf.raw_ops.ReverseSequence / DenseBincount / StatelessMultinomial.
    let tf: [(&str, Vec<f64>); 11] = [
        ("rs1n:0", vec![0.5, 0.0, -0.5, -1.0, 1.0, 1.5, 2.0, 2.5, 3.5, 3.0, 4.0, 4.5]),
        (
            "rs2n:0",
            vec![
                0., 1., 14., 15., 22., 23., 6., 7., 8., 9., 16., 17., 12., 13., 2., 3., 10., 11., 18., 19., 20., 21.,
                4., 5.,
            ],
        ),
        (
            "rs3n:0",
            vec![
                1., 0., 3., 2., 5., 4., 6., 7., 8., 9., 10., 11., 13., 12., 15., 14., 17., 16., 18., 19., 20., 21.,
                22., 23.,
            ],
        ),
        ("bc1n:0", vec![0.0, 2.0, 0.0, 2.0, 0.0, 1.0, 0.0, 0.0, 0.0, 2.0]),
        ("bc2n:0", vec![0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]),
        ("bc3n:0", vec![5.0, 2.0, 0.0, 10.0]),
        ("bc4n:0", vec![1.0, 1.0, 0.0, 3.0, 0.0, 1.0]),
        ("bc5n:0", vec![1.0, 1.0, 0.0, 1.0, 0.0, 1.0]),
        ("mn1n:0", vec![1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0]),
        ("mn2n:0", vec![2.0, 2.0, 1.0, 2.0, 0.0, 0.0, 1.0, 0.0]),
        ("mn3n:0", vec![1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0]),
    ];
    for (k, want) in tf {
        assert_eq!(got[k].data, neg(&want), "{k}");
    }
    assert_eq!(got["dynn:0"].data, got["bc1n:0"].data);
    assert_clustered(&g, &["rs1", "rs2", "rs3", "bc1", "bc2", "bc3", "bc4", "bc5", "mn1", "mn2", "mn3"]);
    let c = autoclust(&["cluster", &g, "--explain"]);
    let text = String::from_utf8_lossy(&c.stdout).to_string() + &String::from_utf8_lossy(&c.stderr);
    let line = text.lines().find(|l| l.contains("dyn (DenseBincount)")).unwrap_or_else(|| panic!("no dyn:\n{text}"));
    assert!(line.contains("must be known at compile time"), "{line}");
}

/// `RngReadAndSkip` (a `tf.random.Generator`'s state advance) reads and writes its variable in
/// one step, which the bridge does not run: it stays outside clusters and `cluster --explain`
/// says why (TensorFlow's XLA clusters it with its own resource-variable lowering).
#[test]
fn rng_read_and_skip_stays_outside_clusters_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(
        &dir,
        "rng.graph",
        "v = VarHandleOp() {dtype = int64, shape = shape[3], shared_name = \"rng\"}\n\
         alg = Const() {dtype = int32, value = int32[]{1}}\n\
         delta = Placeholder() {dtype = uint64, shape = shape[]}\n\
         r = RngReadAndSkip(v, alg, delta) {}\n\
         n = Neg(r) {T = int64}\n",
    );
    let c = autoclust(&["cluster", &g, "--explain"]);
    let text = String::from_utf8_lossy(&c.stdout).to_string() + &String::from_utf8_lossy(&c.stderr);
    let line = text.lines().find(|l| l.contains("r (RngReadAndSkip)")).unwrap_or_else(|| panic!("no r:\n{text}"));
    assert!(line.contains("reads and advances a random generator's state variable"), "{line}");
}

const DEAD_SLICE: &str = r#"
v = VarHandleOp() {container = "", dtype = float32, shape = shape[], shared_name = "v"}
x = Placeholder() {dtype = float32, shape = shape[4]}
one = Const() {dtype = int32, value = int32[]{1}}
onef = Const() {dtype = float32, value = float32[]{1}}
two = Const() {dtype = float32, value = float32[]{2}}
a = AssignAddVariableOp(v, onef) {dtype = float32}
r0 = ReadVariableOp(v, ^a) {dtype = float32}
y = Mul(x, r0) {T = float32}
zi = Const() {dtype = int32, value = int32[]{0}}
j = ArgMin(y, zi) {T = float32, Tidx = int32, output_type = int32}
b = Pack(j) {N = 1, T = int32, axis = 0}
k = AddV2(j, one) {T = int32}
e = Pack(k) {N = 1, T = int32, axis = 0}
st = Const() {dtype = int32, value = int32[1]{1}}
s = StridedSlice(y, b, e, st) {Index = int32, T = float32, begin_mask = 0, ellipsis_mask = 0, end_mask = 0, new_axis_mask = 0, shrink_axis_mask = 1}
r = RealDiv(s, two, ^a) {T = float32}
z = Square(y) {T = float32}
update = NoOp(^r)
zero = Const() {dtype = float32, value = float32[]{0}}
init = AssignVariableOp(v, zero) {dtype = float32}
"#;

/// A slice at a run-time index (an `ArgMin` of the cluster's own values) whose value no result
/// needs — only a control edge from it reaches the step's final `NoOp`, as in
/// `tf.compat.v1.metrics.sensitivity_at_specificity`'s update (sweep 68) — no longer sends its
/// cluster to the interpreter: dead members are analysed as live ones are (a host step),
/// so the body compiles, with no note, and computes the plain executor's values.
#[test]
fn a_dead_run_time_slice_does_not_decline_its_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(&dir, "dead_slice.graph", DEAD_SLICE);
    let args = ["--feed", "x=[1,2,3,4]", "--fetch", "z:0", "--target", "update", "--init", "init", "--no-optimize"];
    let (got, plain, bench) = both_modes(&g, &args);
    assert_same_bits(&got, &plain, &["z:0"]);
    assert_eq!(got["z:0"].data, [1.0, 4.0, 9.0, 16.0]);
    assert_eq!(bench["interpreted_clusters"], 0, "{bench}");
}
