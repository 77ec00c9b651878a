//! Half precision in compiled bodies (`compiler/src/half.rs`): float16/bfloat16 computed in
//! float32 with one rounding per op. The rounding is checked bit for bit against
//! `autoclust_graph::half`'s conversions (the interpreter's) on every float16 value, its
//! neighbours, the exact ties between float16 values and a sweep of float32 bit patterns, in
//! the vector loop and the scalar tails; whole bodies against a per-op rounded reference.
use crate::common::*;
use autoclust_compiler::CompileError;
use autoclust_graph::half::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
use autoclust_graph::{AttrValue, DType, Tensor, TensorData};

fn ty(d: DType) -> AttrValue {
    AttrValue::Type(d)
}

fn cast(name: &str, input: &str, from: DType, to: DType) -> autoclust_graph::RawNode {
    node(name, "Cast", &[input], vec![("SrcT", ty(from)), ("DstT", ty(to))])
}

fn half_tensor(shape: &[usize], v: &[f32], d: DType) -> Tensor {
    autoclust_graph::half::narrow(&f32t(shape, v.to_vec()), d).expect("float32 narrows")
}

fn bits_of(t: &Tensor) -> Vec<u16> {
    let TensorData::Raw(b) = &t.data else { panic!("half bits, got {:?}", t.dtype) };
    b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect()
}

/// Every float16 value, its float32 neighbours, the exact midpoints to the next float16 and
/// their neighbours, and every 1009th float32 bit pattern.
fn rounding_inputs() -> Vec<f32> {
    let mut v = Vec::new();
    for h in 0..=u16::MAX {
        let x = f16_to_f32(h);
        let next = f16_to_f32(h.wrapping_add(1));
        v.extend([x, f32::from_bits(x.to_bits().wrapping_add(1)), f32::from_bits(x.to_bits().wrapping_sub(1))]);
        if x.is_finite() && next.is_finite() && (next > x) == (x >= 0.0) {
            let mid = (x + next) / 2.0; // exact: one more bit than float16 has
            v.extend([mid, f32::from_bits(mid.to_bits() + 1), f32::from_bits(mid.to_bits() - 1)]);
        }
    }
    v.extend((0..u32::MAX / 1009).map(|k| f32::from_bits(k * 1009)));
    v.extend([65504.0, 65519.99, 65520.0, 1.0 / 16384.0, 2.980_232_2e-8, 2.980_233e-8, f32::MAX, f32::MIN_POSITIVE]);
    v
}

fn check_rounding(half: DType, reference: impl Fn(f32) -> f32) {
    let xs = rounding_inputs();
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        cast("h", "x", DType::Float32, half),
        cast("y", "h", half, DType::Float32),
        ret("r", "y", 0),
    ]);
    // The whole sweep (vector loop) and short lengths (the scalar tails).
    for len in [xs.len(), 1, 3, 5, 7, 9] {
        let xs = &xs[xs.len() - len..];
        let f = compiler().compile(&g, &[(DType::Float32, vec![len])]).unwrap();
        let out = f.call(&[f32t(&[len], xs.to_vec())]).unwrap();
        for (&x, &got) in xs.iter().zip(out[0].as_f32().unwrap()) {
            let want = reference(x);
            if want.is_nan() {
                assert!(got.is_nan(), "{half}: {x:e} ({:#010x}) gave {got:e}, want NaN", x.to_bits());
            } else {
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{half}: {x:e} ({:#010x}) gave {got:e}, want {want:e}",
                    x.to_bits()
                );
            }
        }
    }
}

#[test]
fn float16_rounding_is_the_interpreters_bit_for_bit() {
    check_rounding(DType::Float16, |x| f16_to_f32(f32_to_f16(x)));
}

#[test]
fn bfloat16_rounding_is_the_interpreters_bit_for_bit() {
    check_rounding(DType::BFloat16, |x| bf16_to_f32(f32_to_bf16(x)));
}

/// Half arguments and results cross the boundary converted; every op rounds once; `AddN`
/// rounds each partial sum; ops that only move or pick values add no rounding.
#[test]
fn a_half_body_rounds_after_every_op() {
    for half in [DType::Float16, DType::BFloat16] {
        let t = || vec![("T", ty(half))];
        let g = graph(vec![
            arg("a", 0, half),
            arg("b", 1, half),
            node("s", "AddV2", &["a", "b"], t()),
            node("m", "Mul", &["s", "b"], t()),
            node("n", "AddN", &["m", "a", "b"], [t(), vec![("N", AttrValue::I(3))]].concat()),
            node("mx", "Maximum", &["n", "a"], t()),
            cast("wide", "mx", half, DType::Float32),
            ret("r0", "mx", 0),
            ret("r1", "wide", 1),
        ]);
        let n = 1003;
        let (a, b) = (rand_f32(n, 7, -3.0, 3.0), rand_f32(n, 8, -3.0, 3.0));
        let (ha, hb) = (half_tensor(&[n], &a, half), half_tensor(&[n], &b, half));
        let f = compiler().compile(&g, &[(half, vec![n]), (half, vec![n])]).unwrap();
        assert_eq!(f.output_types(), vec![(half, vec![n]), (DType::Float32, vec![n])]);
        let out = f.call(&[ha.clone(), hb.clone()]).unwrap();
        assert_eq!(out[0].dtype, half);
        type Narrow = fn(f32) -> u16;
        type Widen = fn(u16) -> f32;
        let (to, from): (Narrow, Widen) =
            if half == DType::BFloat16 { (f32_to_bf16, bf16_to_f32) } else { (f32_to_f16, f16_to_f32) };
        let r = |x: f32| from(to(x));
        let want: Vec<u16> = bits_of(&ha)
            .iter()
            .zip(bits_of(&hb))
            .map(|(&x, y)| {
                let (x, y) = (from(x), from(y));
                let m = r(r(x + y) * y);
                let n = r(r(m + x) + y);
                to(if n < x { x } else { n })
            })
            .collect();
        assert_eq!(bits_of(&out[0]), want, "{half}");
        let wide: Vec<f32> = want.iter().map(|&h| from(h)).collect();
        assert_eq!(out[1].as_f32().unwrap(), wide.as_slice());
        // The rounding fuses: one loop, no step per rounding.
        assert!(f.describe().len() <= 3, "{half}: {:#?}", f.describe());
        // A converted argument has no buffer to compute in place.
        assert!(f.in_place_pairs().is_empty());
    }
}

/// `Sigmoid` in float16 is `e / (1 + e)` rounded at each step: TensorFlow 2.21's bits
/// (`tf.sigmoid` on a float16 constant), which one rounding of the exact value misses.
#[test]
fn a_compiled_float16_sigmoid_has_tensorflows_bits() {
    let g = graph(vec![
        arg("x", 0, DType::Float16),
        node("y", "Sigmoid", &["x"], vec![("T", ty(DType::Float16))]),
        ret("r", "y", 0),
    ]);
    let xs = [-5.875, -5.75, -5.25, -4.875, 20.0, -20.0, 0.0, 12.0];
    let f = compiler().compile(&g, &[(DType::Float16, vec![xs.len()])]).unwrap();
    let out = f.call(&[half_tensor(&[xs.len()], &xs, DType::Float16)]).unwrap();
    let got = bits_of(&out[0]);
    assert_eq!(got[..4], [6589, 6784, 7513, 8129]);
    // Saturated and exact ends: e^20 overflows float16, so the result is exactly 1.
    assert_eq!(f16_to_f32(got[4]), 1.0);
    assert_eq!(f16_to_f32(got[6]), 0.5);
    assert!(f16_to_f32(got[5]) < 1e-8);
}

/// A float16 `Mean` divides the float16 sum by the count as a float16 value, as TensorFlow
/// 2.21 does: `mean([4e4, 4e4]) = inf`, 2048 ones and a zero average to 1. The compiled body
/// gives the interpreter's values (`runtime/src/kernels/half.rs` runs the same program).
#[test]
fn a_compiled_float16_mean_overflows_and_rounds_its_count_as_tensorflow() {
    let mean = |v: Vec<f32>, shape: Vec<usize>, axis: i32| {
        let g = graph(vec![
            arg("x", 0, DType::Float16),
            ints("axes", &[axis]),
            node(
                "m",
                "Mean",
                &["x", "axes"],
                vec![("T", ty(DType::Float16)), ("Tidx", ty(DType::Int32)), ("keep_dims", AttrValue::B(false))],
            ),
            ret("r", "m", 0),
        ]);
        let f = compiler().compile(&g, &[(DType::Float16, shape.clone())]).unwrap();
        let out = f.call(&[half_tensor(&shape, &v, DType::Float16)]).unwrap();
        bits_of(&out[0]).into_iter().map(f16_to_f32).collect::<Vec<f32>>()
    };
    assert_eq!(mean(vec![40000.0, 40000.0, 1.0, 2.0], vec![2, 2], 1), [f32::INFINITY, 1.5]);
    let mut ones = vec![1.0; 2048];
    ones.push(0.0);
    assert_eq!(mean(ones, vec![2049], 0), [1.0]);
    assert_eq!(mean(vec![0.001; 70000], vec![70000], 0), [0.0]);
    // Within range and below 2048 elements: the float32 mean rounded once.
    let v: Vec<f32> = (0..300).map(|i| (i % 7) as f32 * 0.25).collect();
    let want = f16_to_f32(f32_to_f16(f16_to_f32(f32_to_f16(v.iter().sum::<f32>())) / 300.0));
    assert_eq!(mean(v, vec![300], 0), [want]);
}

/// Half values that would cross into a function or be reinterpreted are declined, naming
/// the node, so the interpreter runs the cluster.
#[test]
fn a_bitcast_of_half_bytes_is_declined() {
    let g = graph(vec![
        arg("x", 0, DType::Float16),
        node("y", "Bitcast", &["x"], vec![("T", ty(DType::Float16)), ("type", ty(DType::Int16))]),
        ret("r", "y", 0),
    ]);
    match compiler().compile(&g, &[(DType::Float16, vec![4])]) {
        Err(CompileError::Unsupported { node, reason, .. }) => {
            assert_eq!(node, "y");
            assert!(reason.contains("bitcast"), "{reason}");
        }
        other => panic!("expected a decline, got {other:?}"),
    }
}

/// A bfloat16 `BiasAddGrad` sums its rows in order with every partial sum rounded to
/// bfloat16, as TensorFlow 2.21's kernel does (its accumulator is bfloat16), so a compiled
/// body gives TensorFlow's bits where a float32 sum rounded once is off by up to 5%
/// (2,048 rows of values near 1: the partial sums reach 2^11, where bfloat16's step is 16);
/// a float16 one is a float32 sum rounded once (TensorFlow accumulates float16 in float32).
#[test]
fn bfloat16_bias_grad_rounds_every_partial_sum() {
    let (rows, cols) = (2048usize, 3usize);
    let x = rand_f32(rows * cols, 5, 0.5, 1.5);
    for half in [DType::BFloat16, DType::Float16] {
        let g = graph(vec![
            arg("x", 0, DType::Float32),
            cast("h", "x", DType::Float32, half),
            node("b", "BiasAddGrad", &["h"], vec![("T", ty(half)), ("data_format", AttrValue::S(b"NHWC".to_vec()))]),
            cast("y", "b", half, DType::Float32),
            ret("r", "y", 0),
        ]);
        let f = compiler().compile(&g, &[(DType::Float32, vec![rows, cols])]).unwrap();
        let got = f.call(&[f32t(&[rows, cols], x.clone())]).unwrap()[0].as_f32().unwrap().to_vec();
        let round = |v: f32| autoclust_graph::half::round_to(v, half);
        let hx: Vec<f32> = x.iter().map(|&v| round(v)).collect();
        let want: Vec<f32> = if half == DType::BFloat16 {
            let mut acc = vec![0.0f32; cols];
            for row in hx.chunks_exact(cols) {
                for (a, &v) in acc.iter_mut().zip(row) {
                    *a = round(*a + v);
                }
            }
            acc
        } else {
            (0..cols).map(|c| round(hx.iter().skip(c).step_by(cols).sum::<f32>())).collect()
        };
        assert_eq!(got, want, "{half}");
        if half == DType::BFloat16 {
            let once: Vec<f32> = (0..cols).map(|c| round(hx.iter().skip(c).step_by(cols).sum::<f32>())).collect();
            assert_ne!(got, once, "the rounding order matters here");
        }
    }
}
