//! The plain executor in seeded-random mode, run many times, only ever
//! produces outcomes in `explore --atomic-rmw`'s set (it runs each
//! read-modify-write atomically, under the variable's lock).

use std::sync::Arc;

use crate::common::*;
use autoclust_graph::{Graph, Output, Tensor};
use autoclust_runtime::{RunRequest, Session, SessionOptions};
use autoclust_semantics::{explore_graph, Exploration, Inputs, Outcome, Query, Rmw, RuntimeKernels};
use proptest::prelude::*;

/// Runs the graph once with a seeded-random schedule; its outcome.
fn run_seeded(g: &Graph, q: &Query, inputs: &Inputs, seed: u64) -> Outcome {
    let session = Session::new(Arc::new(g.clone()), SessionOptions { schedule_seed: Some(seed), ..Default::default() });
    for (name, t) in &inputs.vars {
        session.set_variable(name, t.clone()).unwrap();
    }
    let fetches: Vec<Output> = q.fetches.iter().map(|f| session.output(f).unwrap()).collect();
    let targets = q.targets.iter().map(|t| session.node(t).unwrap()).collect();
    let out = session.run(&RunRequest { feeds: Vec::new(), fetches, targets }).unwrap();
    let mut fetched: Vec<(String, Tensor)> = q.fetches.iter().cloned().zip(out.fetches).collect();
    fetched.sort_by(|a, b| a.0.cmp(&b.0));
    Outcome { fetches: fetched, variables: session.variables() }
}

/// Checks `seeds` runs against the atomic-RMW exploration; returns how many distinct outcomes the runs hit.
fn check(g: &Graph, q: &Query, inputs: &Inputs, seeds: u64) -> Result<usize, String> {
    let q = Query { rmw: Rmw::Atomic, ..q.clone() };
    let e: Exploration = explore_graph(g, &q, None, inputs, &RuntimeKernels).map_err(|e| e.to_string())?;
    let mut hit = Vec::new();
    for seed in 0..seeds {
        let o = run_seeded(g, &q, inputs, seed);
        if !e.contains(&o) {
            return Err(format!("seed {seed}: executor outcome {o:?} not in {:?}", e.outcomes));
        }
        if !hit.contains(&o) {
            hit.push(o);
        }
    }
    Ok(hit.len())
}

#[test]
fn seeded_executor_outcomes_are_explored_outcomes() {
    // Seed 000's concurrent increments: the executor always gets 2.
    let inc = Builder::new()
        .var("X")
        .constant("one", 1)
        .assign_add("inc1", &["X", "one"])
        .assign_add("inc2", &["X", "one"])
        .build();
    let q = Query { targets: vec!["inc1".into(), "inc2".into()], ..query(&[], Rmw::Atomic) };
    assert_eq!(check(&inc, &q, &vars(&[("X", 0)]), 200), Ok(1));

    // Seed 001's problem graph: the executor explores several schedules.
    let problem = Builder::new()
        .var("v0")
        .var("v1")
        .constant("six", 6)
        .constant("seven", 7)
        .constant("eight", 8)
        .assign("a6", &["v0", "six"])
        .read("r0", &["v1", "^a6"])
        .assign("a8", &["v1", "eight"])
        .assign("a7", &["v0", "seven", "^a8"])
        .build();
    let q = Query { targets: vec!["a7".into()], ..query(&["r0:0"], Rmw::Atomic) };
    let hit = check(&problem, &q, &vars(&[("v0", 0), ("v1", 0)]), 300).unwrap();
    assert!(hit >= 2, "seeded schedules should differ, hit {hit}");
}

/// An optimizer's fused update of three variables (`ResourceApplyAdam`, run by the
/// executor under all three locks) racing writes of its slots and a read of one: every
/// seeded schedule's outcome is one `explore --atomic-rmw` finds.
#[test]
fn seeded_executor_outcomes_with_adam_are_explored_outcomes() {
    let g = autoclust_graph::text::parse(
        r#"
w = VarHandleOp() {container = "", dtype = float32, shape = shape[2], shared_name = "w"}
m = VarHandleOp() {container = "", dtype = float32, shape = shape[2], shared_name = "m"}
v = VarHandleOp() {container = "", dtype = float32, shape = shape[2], shared_name = "v"}
b1p = Const() {dtype = float32, value = float32[]{0.5}}
b2p = Const() {dtype = float32, value = float32[]{0.75}}
lr = Const() {dtype = float32, value = float32[]{0.1}}
b1 = Const() {dtype = float32, value = float32[]{0.5}}
b2 = Const() {dtype = float32, value = float32[]{0.75}}
eps = Const() {dtype = float32, value = float32[]{0.001}}
g = Const() {dtype = float32, value = float32[2]{1.0, -2.0}}
seven = Const() {dtype = float32, value = float32[2]{7.0, 7.0}}
nine = Const() {dtype = float32, value = float32[2]{9.0, 9.0}}
adam = ResourceApplyAdam(w, m, v, b1p, b2p, lr, b1, b2, eps, g) {T = float32, use_locking = false, use_nesterov = false}
wv = AssignVariableOp(v, nine) {dtype = float32}
wm = AssignVariableOp(m, seven, ^wv) {dtype = float32}
rm = ReadVariableOp(m) {dtype = float32}
"#,
    )
    .unwrap();
    let mut inputs = Inputs::default();
    for (name, x) in [("w", 1.0f32), ("m", 0.0), ("v", 0.0)] {
        inputs.vars.insert(name.into(), Tensor::from_f32(vec![2], vec![x; 2]).unwrap());
    }
    let q = Query { targets: vec!["adam".into(), "wm".into()], ..query(&["rm:0"], Rmw::Atomic) };
    let hit = check(&g, &q, &inputs, 300).unwrap();
    assert!(hit >= 2, "seeded schedules should differ, hit {hit}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn random_graphs_executor_within_explore(vars_n in 1usize..4, ops in prop::collection::vec(op_spec(), 1..7)) {
        let (g, fetches, targets) = build(vars_n, &ops);
        let pairs: Vec<(String, i32)> = (0..vars_n).map(|v| (format!("v{v}"), v as i32)).collect();
        let inputs = vars(&pairs.iter().map(|(n, v)| (n.as_str(), *v)).collect::<Vec<_>>());
        let q = Query { fetches, targets, ..Query::default() };
        check(&g, &q, &inputs, 16).map_err(TestCaseError::fail)?;
    }
}
