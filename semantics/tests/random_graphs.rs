//! Property tests over thousands of small random graphs with resource ops:
//! the reduced search (memoisation + partial-order reduction) finds exactly
//! the outcomes of the plain enumeration of every interleaving, and
//! `verify` holds for the real clusterer.

use crate::common::*;
use autoclust_passes::cluster::ClusterConfig;
use autoclust_semantics::{
    autoclusterer, explore_graph, verify, Exploration, Limits, Query, Rmw, RuntimeKernels, SemanticsError,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

fn query_for(fetches: &[String], targets: &[String], rmw: Rmw, reduce: bool) -> Query {
    Query {
        fetches: fetches.to_vec(),
        targets: targets.to_vec(),
        rmw,
        limits: Limits { max_states: 2_000_000, reduce, ..Limits::default() },
    }
}

fn initial(vars_n: usize) -> autoclust_semantics::Inputs {
    let pairs: Vec<(String, i32)> = (0..vars_n).map(|v| (format!("v{v}"), v as i32)).collect();
    vars(&pairs.iter().map(|(n, v)| (n.as_str(), *v)).collect::<Vec<_>>())
}

fn same_outcomes(a: &Exploration, b: &Exploration) -> bool {
    a.outcomes.len() == b.outcomes.len() && a.outcomes.iter().all(|o| b.contains(o))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    /// Partial-order reduction and memoisation lose no outcome and add none.
    #[test]
    fn reduction_matches_full_enumeration(vars_n in 1usize..4, ops in prop::collection::vec(op_spec(), 1..7)) {
        let (g, fetches, targets) = build(vars_n, &ops);
        let inputs = initial(vars_n);
        for rmw in [Rmw::Split, Rmw::Atomic] {
            let reduced = explore_graph(&g, &query_for(&fetches, &targets, rmw, true), None, &inputs, &RuntimeKernels).unwrap();
            // The unreduced enumeration is exponential; the rare graph whose
            // enumeration exceeds the bound is rejected, not run for minutes.
            let mut q = query_for(&fetches, &targets, rmw, false);
            q.limits.max_states = 100_000;
            let full = match explore_graph(&g, &q, None, &inputs, &RuntimeKernels) {
                Err(SemanticsError::StateBound { .. }) => return Err(TestCaseError::reject("state bound")),
                r => r.unwrap(),
            };
            prop_assert!(same_outcomes(&reduced, &full), "reduced {:?}\nfull {:?}", reduced.outcomes, full.outcomes);
            prop_assert!(reduced.states_explored <= full.states_explored);
        }
    }

    /// The real clusterer adds no behaviour under the RFC's model (seed 000,
    /// split read-modify-writes: the model the safety analysis is built
    /// for). Under `--atomic-rmw` it may: see
    /// `seeds::clustered_increment_loses_executor_atomicity`.
    #[test]
    fn verify_holds_for_the_real_clusterer(
        vars_n in 1usize..4,
        ops in prop::collection::vec(op_spec(), 1..9),
        min_size in 1usize..3,
    ) {
        let (g, fetches, targets) = build(vars_n, &ops);
        let inputs = initial(vars_n);
        let clusterer = autoclusterer(ClusterConfig { min_cluster_size: min_size, ..ClusterConfig::default() });
        let rmw = Rmw::Split;
        // A few random graphs have huge state spaces; they are rejected (and
        // counted by proptest) rather than letting one case take minutes.
        let mut q = query_for(&fetches, &targets, rmw, true);
        q.limits.max_states = 200_000;
        let verdict = match verify(&g, &q, &clusterer, &inputs, &RuntimeKernels) {
            Err(SemanticsError::StateBound { .. }) => return Err(TestCaseError::reject("state bound")),
            r => r.unwrap(),
        };
        prop_assert!(verdict.holds(), "witness {:?}", verdict.witness());
        // The reduction is exact for the clustered program too (checked where
        // the unreduced enumeration stays small).
        let mut q = query_for(&fetches, &targets, rmw, false);
        q.limits.max_states = 50_000;
        match explore_graph(&g, &q, Some(&clusterer), &inputs, &RuntimeKernels) {
            Err(SemanticsError::StateBound { .. }) => {}
            r => prop_assert!(same_outcomes(&verdict.clustered, &r.unwrap())),
        }
    }
}

/// The property above is not vacuous: the real clusterer does put resource
/// ops into clusters, and ignoring the safety analysis can break a graph.
#[test]
fn real_clusterer_clusters_resource_ops() {
    let (g, _, _) = build(
        2,
        &[
            OpSpec { kind: 1, var: 0, a: 0, b: 0, controls: vec![] },
            OpSpec { kind: 0, var: 1, a: 0, b: 0, controls: vec![0] },
            OpSpec { kind: 3, var: 0, a: 2, b: 1, controls: vec![] },
        ],
    );
    let clusters = autoclusterer(ClusterConfig { min_cluster_size: 1, ..ClusterConfig::default() })(&g).unwrap();
    assert!(clusters.iter().any(|c| c.nodes.iter().any(|&n| g.node(n).op.contains("Variable"))), "{clusters:?}");
}

/// The case this property test found: `r = Read(v0)` unordered with
/// `Assign(v0, 1)` in one cluster, and `AssignAdd(v1, r)` there too. When
/// the body serialised the assign before the read, the read saw the
/// in-cluster write (effectively reading at the write-back) while the
/// assign-add read `v1` at the snapshot: `r == 1 && v1 == 2` became possible,
/// which no order of the original allows. Reads now come first
/// (`encapsulate::ssa_order`).
#[test]
fn unordered_write_and_read_in_one_cluster_read_the_snapshot() {
    let op = |kind, var, a, b, controls: Vec<usize>| OpSpec { kind, var, a, b, controls };
    let ops = vec![
        op(1, 1, 1, 0, vec![]),  // n0: v1 := c1
        op(1, 0, 1, 0, vec![0]), // n1: v0 := c1, after n0
        op(1, 0, 1, 0, vec![]),  // n2: v0 := c1
        op(1, 0, 0, 0, vec![]),  // n3: v0 := c0
        op(0, 0, 0, 0, vec![]),  // n4: r = v0
        op(2, 1, 2, 0, vec![]),  // n5: v1 += r
        op(3, 0, 2, 0, vec![]),  // n6: r + c0
    ];
    let (g, fetches, targets) = build(2, &ops);
    let inputs = initial(2);
    let clusterer = autoclusterer(ClusterConfig { min_cluster_size: 1, ..ClusterConfig::default() });
    let verdict =
        verify(&g, &query_for(&fetches, &targets, Rmw::Split, true), &clusterer, &inputs, &RuntimeKernels).unwrap();
    assert!(verdict.holds(), "witness {:?}", verdict.witness());
}

/// A random graph under a cond: `r = Read(v0)` races with the ops, a `Switch` on `r > 0`
/// gives two pivots, and each op may wait (a control edge) on one of them, so whether it
/// runs depends on the schedule. No fetches (a dead one is an error): every write is a
/// target and the variables are the outcome.
fn cond_graph(vars_n: usize, ops: &[OpSpec], guards: &[u8]) -> (autoclust_graph::Graph, Vec<String>) {
    let mut src = String::new();
    for v in 0..vars_n {
        src += &format!("v{v} = VarHandleOp() {{dtype = int32, shape = shape[], shared_name = \"v{v}\"}}\n");
    }
    src += "c0 = Const() {dtype = int32, value = int32[]{1}}\nc1 = Const() {dtype = int32, value = int32[]{2}}\n";
    src += "z = Const() {dtype = int32, value = int32[]{0}}\n";
    src += "r = ReadVariableOp(v0) {dtype = int32}\npred = Greater(r, z) {T = int32}\n";
    src += "sw = Switch(r, pred) {T = int32}\npt = Identity(sw:1) {T = int32}\npf = Identity(sw) {T = int32}\n";
    let mut values = vec!["c0".to_string(), "c1".to_string(), "r".to_string()];
    let (mut names, mut targets) = (Vec::<String>::new(), Vec::new());
    for (i, op) in ops.iter().enumerate() {
        let name = format!("n{i}");
        let mut controls: Vec<String> = if names.is_empty() {
            vec![]
        } else {
            op.controls.iter().map(|c| format!("^{}", names[c % names.len()])).collect()
        };
        match guards.get(i).copied().unwrap_or(0) % 3 {
            1 => controls.push("^pt".into()),
            2 => controls.push("^pf".into()),
            _ => {}
        }
        controls.sort();
        controls.dedup();
        let var = format!("v{}", op.var % vars_n);
        let a = values[op.a % values.len()].clone();
        let b = values[op.b % values.len()].clone();
        let ins = |mut base: Vec<String>| {
            base.extend(controls.iter().cloned());
            base.join(", ")
        };
        src += &match op.kind {
            0 => format!("{name} = ReadVariableOp({}) {{dtype = int32}}\n", ins(vec![var])),
            1 => format!("{name} = AssignVariableOp({}) {{dtype = int32}}\n", ins(vec![var, a])),
            2 => format!("{name} = AssignAddVariableOp({}) {{dtype = int32}}\n", ins(vec![var, a])),
            _ => format!("{name} = AddV2({}) {{T = int32}}\n", ins(vec![a, b])),
        };
        if matches!(op.kind, 0 | 3) {
            values.push(name.clone());
        } else {
            targets.push(name.clone());
        }
        names.push(name);
    }
    (autoclust_graph::text::parse(&src).unwrap(), targets)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// With dead values (seed 002) whose deadness depends on a racy read, the reduced search
    /// still finds exactly the outcomes of every interleaving, and the real clusterer (which
    /// keeps clusters under one deadness predicate) adds none.
    #[test]
    fn reduction_and_verify_with_dead_values(
        vars_n in 1usize..3,
        ops in prop::collection::vec(op_spec(), 1..6),
        guards in prop::collection::vec(0u8..3, 6),
    ) {
        let (g, targets) = cond_graph(vars_n, &ops, &guards);
        prop_assume!(!targets.is_empty());
        let inputs = initial(vars_n);
        for rmw in [Rmw::Split, Rmw::Atomic] {
            let reduced = explore_graph(&g, &query_for(&[], &targets, rmw, true), None, &inputs, &RuntimeKernels).unwrap();
            let mut q = query_for(&[], &targets, rmw, false);
            q.limits.max_states = 100_000;
            let full = match explore_graph(&g, &q, None, &inputs, &RuntimeKernels) {
                Err(SemanticsError::StateBound { .. }) => return Err(TestCaseError::reject("state bound")),
                r => r.unwrap(),
            };
            prop_assert!(same_outcomes(&reduced, &full), "reduced {:?}\nfull {:?}", reduced.outcomes, full.outcomes);
        }
        let clusterer = autoclusterer(ClusterConfig { min_cluster_size: 1, ..ClusterConfig::default() });
        let verdict = verify(&g, &query_for(&[], &targets, Rmw::Split, true), &clusterer, &inputs, &RuntimeKernels).unwrap();
        prop_assert!(verdict.holds(), "witness {:?}", verdict.witness());
    }
}
