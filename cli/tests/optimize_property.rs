//! Property test of the graph-optimization pipeline (`opt --passes default`,
//! what `run` applies first): on random graphs of float arithmetic over
//! constants (0, -0, 1, 2, …) and a variable that is read and written in a
//! fixed order, the optimized graph gives bit for bit the fetches and the
//! variable the original gives, step after step, with the request's nodes
//! kept by name (any NaN standing for any NaN).

use std::sync::Arc;

use autoclust_graph::{Graph, Tensor};
use autoclust_passes::pass::{PassContext, Pipeline};
use autoclust_runtime::{RunRequest, Session, SessionOptions};
use proptest::prelude::*;

const CONSTS: &[&str] = &["0.0", "-0.0", "1.0", "2.0", "0.5", "-3.0"];

/// One generated node: (kind, first operand, second operand, constant).
type Step = (u8, usize, usize, usize);

/// The graph's text, its fetched value nodes and its target writes.
fn build(steps: &[Step]) -> (String, Vec<String>, Vec<String>) {
    let mut src = String::from(
        "v = VarHandleOp() {dtype = float32, shape = shape[2], shared_name = \"v\"}\n\
         r0 = ReadVariableOp(v) {dtype = float32}\n",
    );
    let mut values: Vec<String> = vec!["r0".into()];
    // The last stateful node: every read and write waits for the one before.
    let mut last_effect = "r0".to_string();
    let mut writes = Vec::new();
    for (i, &(kind, a, b, c)) in steps.iter().enumerate() {
        let mut x = values[a % values.len()].clone();
        let mut y = values[b % values.len()].clone();
        let name = format!("n{i}");
        // Binary ops often take a fresh constant on one side (where the identities are).
        if (1..=4).contains(&(kind % 12)) && b % 3 != 2 {
            let k = format!("{name}_k");
            src.push_str(&format!(
                "{k} = Const() {{dtype = float32, value = float32[]{{{}}}}}\n",
                CONSTS[c % CONSTS.len()]
            ));
            if b % 3 == 0 {
                y = k;
            } else {
                x = k;
            }
        }
        let line = match kind % 12 {
            0 => format!("{name} = Const() {{dtype = float32, value = float32[]{{{}}}}}", CONSTS[c % CONSTS.len()]),
            1 => format!("{name} = Mul({x}, {y}) {{T = float32}}"),
            2 => format!("{name} = AddV2({x}, {y}) {{T = float32}}"),
            3 => format!("{name} = Sub({x}, {y}) {{T = float32}}"),
            4 => format!("{name} = RealDiv({x}, {y}) {{T = float32}}"),
            5 => format!("{name} = Neg({x}) {{T = float32}}"),
            6 => format!("{name} = Identity({x}) {{T = float32}}"),
            7 => format!("{name} = Cast({x}) {{DstT = float32, SrcT = float32}}"),
            8 => format!("{name} = AddN({x}) {{N = 1, T = float32}}"),
            9 => format!("{name} = Exp({x}) {{T = float32}}"),
            10 => {
                let line = format!("{name} = ReadVariableOp(v, ^{last_effect}) {{dtype = float32}}");
                last_effect = name.clone();
                line
            }
            _ => {
                // Writes keep the variable's shape: broadcast the value against a read.
                let line = format!(
                    "{name}_b = AddV2({x}, r0) {{T = float32}}\n\
                     {name}_z = Sub({name}_b, r0) {{T = float32}}\n\
                     {name} = AssignVariableOp(v, {name}_z, ^{last_effect}) {{dtype = float32, validate_shape = false}}"
                );
                last_effect = name.clone();
                writes.push(name.clone());
                src.push_str(&line);
                src.push('\n');
                continue;
            }
        };
        src.push_str(&line);
        src.push('\n');
        values.push(name);
    }
    let fetches: Vec<String> = values.iter().rev().take(3).cloned().collect();
    (src, fetches, writes)
}

/// Runs two steps; the fetches of each and the variable after each.
fn outcomes(graph: Graph, fetches: &[String], targets: &[String]) -> Vec<Tensor> {
    let session =
        Session::new(Arc::new(graph), SessionOptions { threads: 1, schedule_seed: None, ..Default::default() });
    session.set_variable("v", Tensor::from_f32(vec![2], vec![0.5, -1.25]).unwrap()).unwrap();
    let request = RunRequest {
        feeds: vec![],
        fetches: fetches.iter().map(|f| session.output(f).unwrap()).collect(),
        targets: targets.iter().map(|t| session.node(t).unwrap()).collect(),
    };
    let mut out = Vec::new();
    for _ in 0..2 {
        out.extend(session.run(&request).unwrap().fetches);
        out.extend(session.variables().into_iter().map(|(_, t)| t));
    }
    out
}

/// Bit-for-bit equality, except that any NaN equals any NaN: a NaN's sign and payload are
/// not part of TensorFlow's semantics (x86's 0/0 gives a negative NaN, a folded `Neg` of it
/// flips the sign, and an optimization may legitimately skip that pair).
fn same_bits(want: &Tensor, got: &Tensor) -> bool {
    match (want.as_f32(), got.as_f32()) {
        (Some(w), Some(g)) if want.shape == got.shape => {
            w.iter().zip(g).all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()))
        }
        _ => want.bit_eq(got),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
    #[test]
    fn optimized_graphs_compute_the_same_bits(steps in proptest::collection::vec((0u8..12, 0usize..64, 0usize..64, 0usize..8), 1..24)) {
        let (src, fetches, targets) = build(&steps);
        let graph = autoclust_graph::text::parse(&src).unwrap();
        let ctx = PassContext {
            preserve: Some(fetches.iter().chain(&targets).cloned().collect()),
            evaluator: Some(Arc::new(|n, i| autoclust_runtime::compute(n, i).map_err(|e| e.to_string()))),
            // Bit for bit: without it a float `x + 0.0` goes as in TensorFlow (a -0.0 becomes +0.0).
            exact_signed_zeros: true,
            ..PassContext::default()
        };
        let optimized = Pipeline::parse("default").unwrap().run(graph.clone(), &ctx).unwrap();
        prop_assert!(optimized.len() <= graph.len());
        let want = outcomes(graph, &fetches, &targets);
        let got = outcomes(optimized, &fetches, &targets);
        prop_assert_eq!(want.len(), got.len());
        for (w, g) in want.iter().zip(&got) {
            prop_assert!(same_bits(w, g), "{:?} vs {:?}\n{}", w, g, src);
        }
    }
}
