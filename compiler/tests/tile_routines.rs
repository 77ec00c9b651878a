//! The tile routines of every tier (AVX2+FMA, AVX-512F) give bit for bit the results of
//! Cranelift's own f32x4 code (the invariant of `tile_routines.rs`), so tiled and untiled
//! loops — and hosts with either tier or neither — agree exactly. Each test runs once per
//! tier the host has; on a host with neither it prints so and checks nothing wide.
use crate::common::*;
use autoclust_compiler::{CompiledFunction, Compiler, CompilerOptions, TileTier};
use autoclust_graph::{DType, Graph};

/// The tiers this host can run (capped by `AUTOCLUST_NO_AVX512` / `AUTOCLUST_NO_TILES`
/// as the compiler is), narrowest first.
fn tiers() -> Vec<TileTier> {
    TileTier::ALL.into_iter().filter(|&t| TileTier::select(Some(t)) == Some(t)).collect()
}

/// One compilation per tier the host has, each paired with the f32x4-only compilation.
fn per_tier(g: &Graph, inputs: &[(DType, Vec<usize>)]) -> Vec<(TileTier, CompiledFunction, CompiledFunction)> {
    let plain = || {
        let f = Compiler::new(CompilerOptions { threads: 2, no_tile_routines: true, ..Default::default() })
            .compile(g, inputs)
            .unwrap();
        assert!(!f.describe().iter().any(|s| s.contains(" tiles for ")), "{:?}", f.describe());
        f
    };
    let tiers = tiers();
    if tiers.is_empty() {
        eprintln!("no AVX2+FMA or AVX-512F here: only the f32x4 code runs");
    }
    tiers
        .into_iter()
        .map(|tier| {
            let tiled = Compiler::new(CompilerOptions { threads: 2, max_tile_tier: Some(tier), ..Default::default() })
                .compile(g, inputs)
                .unwrap();
            let tag = format!("{} tiles for ", tier.name());
            assert!(tiled.describe().iter().any(|s| s.contains(&tag)), "expected {tag} in {:?}", tiled.describe());
            (tier, tiled, plain())
        })
        .collect()
}

fn assert_same_bits(got: &[f32], want: &[f32], xs: &[f32], what: &str) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            g.to_bits() == w.to_bits(),
            "{what}: element {i} (x = {:e}): tiled {g:e} ({:#x}), f32x4 {w:e} ({:#x})",
            xs[i % xs.len()],
            g.to_bits(),
            w.to_bits()
        );
    }
}

/// Every 61st float32 bit pattern (both signs, subnormals, NaNs, ±inf) after the special
/// values and the edges of each routine's ranges — first, so they run through the tiles
/// (the last elements of a row run the f32x4 loop and the scalar tail).
fn sweep() -> Vec<f32> {
    let mut v =
        vec![0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -f32::NAN, f32::MIN_POSITIVE, f32::MAX, f32::MIN];
    v.extend([88.72283, 88.7229, 89.0, -87.3365, -87.33655, -103.97, 9.2, -9.2, 8.4, 1e-45, -1e-45, -1.0, -1.5, 1e-8]);
    v.extend((0..u32::MAX / 61).map(|k| f32::from_bits(k * 61)));
    v
}

#[test]
fn tile_routines_match_the_f32x4_code_bit_for_bit() {
    let xs = sweep();
    for op in ["Exp", "Tanh", "Sigmoid", "Log", "Log1p", "Erf", "Erfc"] {
        let g = graph(vec![arg("x", 0, DType::Float32), node("y", op, &["x"], vec![]), ret("r", "y", 0)]);
        for (tier, tiled, plain) in per_tier(&g, &[(DType::Float32, vec![xs.len()])]) {
            let x = f32t(&[xs.len()], xs.clone());
            let a = tiled.call(std::slice::from_ref(&x)).unwrap();
            let b = plain.call(&[x]).unwrap();
            assert_same_bits(a[0].as_f32().unwrap(), b[0].as_f32().unwrap(), &xs, &format!("{op} ({tier:?})"));
        }
    }
}

/// A boolean mask computed before a routine and used after it crosses the tile buffer as
/// a lane mask.
#[test]
fn masks_cross_tile_segments() {
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        konst("half", autoclust_graph::Tensor::scalar_f32(0.5)),
        node("g", "Greater", &["x", "half"], vec![]),
        node("t", "Tanh", &["x"], vec![]),
        node("e", "Exp", &["t"], vec![]),
        node("s", "SelectV2", &["g", "e", "x"], vec![]),
        ret("r", "s", 0),
    ]);
    let n = 1000;
    let xs = rand_f32(n, 3, -2.0, 2.0);
    for (tier, tiled, plain) in per_tier(&g, &[(DType::Float32, vec![n])]) {
        let a = tiled.call(&[f32t(&[n], xs.clone())]).unwrap();
        let b = plain.call(&[f32t(&[n], xs.clone())]).unwrap();
        assert_same_bits(a[0].as_f32().unwrap(), b[0].as_f32().unwrap(), &xs, &format!("select ({tier:?})"));
        for (i, (&x, &y)) in xs.iter().zip(a[0].as_f32().unwrap()).enumerate() {
            let want = if x > 0.5 { (x as f64).tanh().exp() } else { x as f64 };
            assert!((y as f64 - want).abs() <= 1e-5 * want.abs().max(1.0), "element {i}: {y} vs {want}");
        }
    }
}

/// A DAG whose values cross the tile segments in every way: a routine reading an input row
/// directly and another reading a buffered member, a copied input read again from its row, a routine result that is both an output
/// and an operand of later members, a buffered value read two segments later, broadcast
/// operands (a per-column bias and a scalar), and rows of 1000 (three tiles and a tail) so
/// each row also runs the f32x4 loop and the scalar tail after its tiles.
#[test]
fn tiled_dags_match_untiled_ones() {
    let (rows, cols) = (3, 1000);
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        arg("bias", 1, DType::Float32),
        arg("k", 2, DType::Float32),
        node("a", "Mul", &["x", "k"], vec![]),
        node("a2", "BiasAdd", &["a", "bias"], vec![]),
        node("t", "Tanh", &["a2"], vec![]),
        node("s", "Sigmoid", &["x"], vec![]),
        node("xi", "Identity", &["x"], vec![]),
        node("m", "Mul", &["t", "xi"], vec![]),
        node("e", "Exp", &["m"], vec![]),
        node("d", "Sub", &["e", "a2"], vec![]),
        node("u", "Mul", &["d", "s"], vec![]),
        node("v", "Maximum", &["u", "t"], vec![]),
        ret("r0", "v", 0),
        ret("r1", "t", 1),
        ret("r2", "a2", 2),
    ]);
    let sig = [(DType::Float32, vec![rows, cols]), (DType::Float32, vec![cols]), (DType::Float32, vec![])];
    let xs = rand_f32(rows * cols, 7, -6.0, 6.0);
    let inputs = [f32t(&[rows, cols], xs.clone()), f32t(&[cols], rand_f32(cols, 8, -1.0, 1.0)), f32t(&[], vec![1.5])];
    for (tier, tiled, plain) in per_tier(&g, &sig) {
        let a = tiled.call(&inputs).unwrap();
        let b = plain.call(&inputs).unwrap();
        for (k, (ta, tb)) in a.iter().zip(&b).enumerate() {
            assert_same_bits(ta.as_f32().unwrap(), tb.as_f32().unwrap(), &xs, &format!("output {k} ({tier:?})"));
        }
        // And the values are right, not just equal: against Rust's f64 functions.
        let bias = inputs[1].as_f32().unwrap();
        let got = a[0].as_f32().unwrap();
        for (i, &x) in xs.iter().enumerate() {
            let x = x as f64;
            let a2 = (x * 1.5) as f32 as f64 + bias[i % cols] as f64;
            let t = a2.tanh();
            let e = (t * x).exp();
            let s = 1.0 / (1.0 + (-x).exp());
            let want = ((e - a2) * s).max(t);
            assert!((got[i] as f64 - want).abs() <= 1e-5 * want.abs().max(1.0), "element {i}: {} vs {want}", got[i]);
        }
    }
}
