//! The resource ops beyond reads, assigns and `AssignAdd`: the optimizers' fused updates
//! (`ResourceApplyAdam`, which reads and writes three variables at once), the indexed
//! scatters and gathers. Their values come from the interpreter's kernels; their steps
//! are seed 000's split read-modify-write (docs/semantics.md).

use std::collections::BTreeSet;

use autoclust_graph::{Graph, Tensor};
use autoclust_passes::cluster::ClusterConfig;
use autoclust_semantics::{
    autoclusterer, explore_graph, verify, ClusterSpec, Exploration, Inputs, Limits, Query, Rmw, RuntimeKernels,
    SemanticsError,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

/// Adam's variables (`w`, its slots `m` and `v`), scalar float32, and its operands: with
/// `m = v = 0` and gradient 1 the update gives `m = 0.5`, `v = 0.25`, `w -= 0.1`.
const ADAM: &str = r#"
w = VarHandleOp() {container = "", dtype = float32, shape = shape[], shared_name = "w"}
m = VarHandleOp() {container = "", dtype = float32, shape = shape[], shared_name = "m"}
v = VarHandleOp() {container = "", dtype = float32, shape = shape[], shared_name = "v"}
b1p = Const() {dtype = float32, value = float32[]{0.5}}
b2p = Const() {dtype = float32, value = float32[]{0.75}}
lr = Const() {dtype = float32, value = float32[]{0.1}}
b1 = Const() {dtype = float32, value = float32[]{0.5}}
b2 = Const() {dtype = float32, value = float32[]{0.75}}
eps = Const() {dtype = float32, value = float32[]{0.0}}
g = Const() {dtype = float32, value = float32[]{1.0}}
seven = Const() {dtype = float32, value = float32[]{7.0}}
eight = Const() {dtype = float32, value = float32[]{8.0}}
nine = Const() {dtype = float32, value = float32[]{9.0}}
adam = ResourceApplyAdam(w, m, v, b1p, b2p, lr, b1, b2, eps, g) {T = float32, use_locking = false, use_nesterov = false}
"#;

fn graph(extra: &str) -> Graph {
    autoclust_graph::text::parse(&format!("{ADAM}{extra}")).unwrap()
}

fn inputs(values: &[(&str, Tensor)]) -> Inputs {
    let mut i = Inputs::default();
    for (n, t) in values {
        i.vars.insert(n.to_string(), t.clone());
    }
    i
}

fn scalars(values: &[(&str, f32)]) -> Inputs {
    inputs(&values.iter().map(|(n, x)| (*n, Tensor::scalar_f32(*x))).collect::<Vec<_>>())
}

fn query(fetches: &[&str], targets: &[&str], rmw: Rmw) -> Query {
    Query {
        fetches: fetches.iter().map(|s| s.to_string()).collect(),
        targets: targets.iter().map(|s| s.to_string()).collect(),
        rmw,
        ..Query::default()
    }
}

/// Each outcome as name → the bits of every element (fetches and variables together).
fn rows(g: &Graph, q: &Query, i: &Inputs) -> Vec<Vec<(String, Vec<f32>)>> {
    let e = explore_graph(g, q, None, i, &RuntimeKernels).unwrap();
    e.outcomes
        .iter()
        .map(|o| o.fetches.iter().chain(&o.variables).map(|(n, t)| (n.clone(), t.as_f32().unwrap().to_vec())).collect())
        .collect()
}

fn get(row: &[(String, Vec<f32>)], name: &str) -> f32 {
    row.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no {name} in {row:?}")).1[0]
}

/// A `ReadVariableOp` of Adam's `m` slot unordered with the update: it reads the slot
/// before or after it, under the split model and the executor's atomic one alike; `m`,
/// `v` and `w` always end updated (the values TensorFlow's formula gives).
#[test]
fn adam_racing_a_read_of_its_slot_has_both_orders() {
    let g = graph("rm = ReadVariableOp(m) {dtype = float32}\n");
    let init = scalars(&[("w", 1.0), ("m", 0.0), ("v", 0.0)]);
    for rmw in [Rmw::Split, Rmw::Atomic] {
        let rows = rows(&g, &query(&["rm:0"], &["adam"], rmw), &init);
        let read: Vec<f32> = rows.iter().map(|r| get(r, "rm:0")).collect();
        assert_eq!(read, [0.0, 0.5], "{rmw:?}: {rows:?}");
        for r in &rows {
            assert_eq!((get(r, "m"), get(r, "v")), (0.5, 0.25), "{rmw:?}: {r:?}");
            assert!((get(r, "w") - 0.9).abs() < 1e-6, "{rmw:?}: {r:?}");
        }
    }
}

/// Seed 001's problem graph with Adam as the write: `adam →ᶜ r0 = Read(x)` and
/// `Assign(x, 8) →ᶜ Assign(m, 7)`. Whenever Adam's write of its slot `m` is the last
/// (m ≠ 7), it followed `Assign(m, 7)`, hence `Assign(x, 8)`, so r0 = 8. The real
/// clusterer keeps this; a cluster {adam, r0} (a write→read path inside, which the safety
/// analysis forbids; forced here) snapshots `x` early and writes `m` back late, and
/// `verify` finds the witness m = 0.5, r0 = 0.
#[test]
fn a_write_read_path_from_adam_in_one_cluster_fails_verify() {
    let g = graph(
        "x = VarHandleOp() {container = \"\", dtype = float32, shape = shape[], shared_name = \"x\"}\n\
         r0 = ReadVariableOp(x, ^adam) {dtype = float32}\n\
         a8 = AssignVariableOp(x, eight) {dtype = float32}\n\
         a7 = AssignVariableOp(m, seven, ^a8) {dtype = float32}\n",
    );
    let init = scalars(&[("w", 1.0), ("m", 0.0), ("v", 0.0), ("x", 0.0)]);
    let q = query(&["r0:0"], &["a7"], Rmw::Split);
    let original = rows(&g, &q, &init);
    assert!(original.iter().any(|r| get(r, "m") == 0.5), "a lost update of m: {original:?}");
    assert!(original.iter().any(|r| get(r, "m") == 4.0), "Adam after Assign(m, 7): {original:?}");
    for r in &original {
        if get(r, "m") != 7.0 {
            assert_eq!(get(r, "r0:0"), 8.0, "{original:?}");
        }
    }
    let safe = autoclusterer(ClusterConfig { min_cluster_size: 1, ..ClusterConfig::default() });
    assert!(verify(&g, &q, &safe, &init, &RuntimeKernels).unwrap().holds());
    let wrong = |g: &Graph| {
        Ok(vec![ClusterSpec { name: "cluster_0".into(), nodes: vec![g.find("adam").unwrap(), g.find("r0").unwrap()] }])
    };
    let verdict = verify(&g, &q, &wrong, &init, &RuntimeKernels).unwrap();
    let (outcome, schedule) = verdict.witness().expect("the forced cluster adds an outcome");
    let m = outcome.variables.iter().find(|(n, _)| n == "m").unwrap().1.as_f32().unwrap()[0];
    let r0 = outcome.fetches[0].1.as_f32().unwrap()[0];
    assert_eq!((m, r0), (0.5, 0.0), "{outcome:?} via {schedule:?}");
    assert!(schedule.iter().any(|s| s.contains("snapshot-read [w, m, v, x]")), "{schedule:?}");
    assert!(schedule.iter().any(|s| s.contains("write-back [w, m, v]")), "{schedule:?}");
}

/// Adam's read half reads all three variables in one step (TensorFlow locks them all
/// before reading any): racing `Assign(v, 9) →ᶜ Assign(m, 7)`, it sees (m, v) = (0, 0),
/// (0, 9) or (7, 9), never the torn (7, 0), whose `w` would be 0.2. So the split model
/// gives exactly the executor's three values of `w`.
#[test]
fn adam_reads_its_variables_in_one_step() {
    let g = graph(
        "wv = AssignVariableOp(v, nine) {dtype = float32}\n\
         wm = AssignVariableOp(m, seven, ^wv) {dtype = float32}\n",
    );
    let init = scalars(&[("w", 1.0), ("m", 0.0), ("v", 0.0)]);
    let finals = |rmw| {
        let rows = rows(&g, &query(&[], &["adam", "wm"], rmw), &init);
        rows.iter().map(|r| get(r, "w").to_bits()).collect::<BTreeSet<u32>>()
    };
    let split = finals(Rmw::Split);
    assert_eq!(split.len(), 3, "{split:?}");
    assert!(!split.contains(&0.2f32.to_bits()), "a torn snapshot: {split:?}");
    assert_eq!(split, finals(Rmw::Atomic));
}

/// Two unordered `ResourceScatterAdd`s of one row: {1, 2, 3} under the split model (a
/// lost update), {3} when each is atomic; a `ResourceGather` of the row racing them reads
/// 0, 1, 2 or 3.
#[test]
fn concurrent_scatter_adds_and_a_gather() {
    let g = autoclust_graph::text::parse(
        r#"
t = VarHandleOp() {container = "", dtype = float32, shape = shape[3], shared_name = "t"}
i = Const() {dtype = int32, value = int32[1]{1}}
one = Const() {dtype = float32, value = float32[1]{1.0}}
two = Const() {dtype = float32, value = float32[1]{2.0}}
s1 = ResourceScatterAdd(t, i, one) {dtype = float32, Tindices = int32}
s2 = ResourceScatterAdd(t, i, two) {dtype = float32, Tindices = int32}
r = ResourceGather(t, i) {dtype = float32, Tindices = int32}
"#,
    )
    .unwrap();
    let init = inputs(&[("t", Tensor::from_f32(vec![3], vec![0.0; 3]).unwrap())]);
    let outcomes = |rmw| {
        let rows = rows(&g, &query(&["r:0"], &["s1", "s2"], rmw), &init);
        let t = |k: usize| -> BTreeSet<u32> {
            rows.iter().map(|r| r.iter().find(|(n, _)| n == "t").unwrap().1[k].to_bits()).collect()
        };
        let read: BTreeSet<u32> = rows.iter().map(|r| get(r, "r:0").to_bits()).collect();
        (t(0), t(1), read)
    };
    let bits = |xs: &[f32]| xs.iter().map(|x| x.to_bits()).collect::<BTreeSet<u32>>();
    let (row0, row1, read) = outcomes(Rmw::Split);
    assert_eq!(row0, bits(&[0.0]), "row 0 untouched");
    assert_eq!(row1, bits(&[1.0, 2.0, 3.0]));
    assert_eq!(read, bits(&[0.0, 1.0, 2.0, 3.0]));
    let (_, row1, read) = outcomes(Rmw::Atomic);
    assert_eq!(row1, bits(&[3.0]));
    assert_eq!(read, bits(&[0.0, 1.0, 2.0, 3.0]));
}

/// An optimizer's variables that are uninitialised are an error naming the node and the
/// variable, as for a read.
#[test]
fn an_uninitialised_slot_names_the_node_and_the_variable() {
    let g = graph("");
    let init = scalars(&[("w", 1.0), ("v", 0.0)]);
    for rmw in [Rmw::Split, Rmw::Atomic] {
        let err = explore_graph(&g, &query(&[], &["adam"], rmw), None, &init, &RuntimeKernels).unwrap_err();
        assert!(err.to_string().contains("'adam'") && err.to_string().contains("'m'"), "{err}");
    }
}

/// One op of a random float32 graph: 0 read, 1 assign, 2 `ResourceApplyMomentum` (two
/// variables), 3 pure add, 4 `ResourceApplyAdam` (three variables; momentum with fewer).
#[derive(Clone, Debug)]
struct Op {
    kind: u8,
    var: usize,
    other: usize,
    a: usize,
    b: usize,
    controls: Vec<usize>,
}

fn op() -> impl Strategy<Value = Op> {
    (0u8..5, 0usize..3, 1usize..3, any::<usize>(), any::<usize>(), prop::collection::vec(any::<usize>(), 0..2))
        .prop_map(|(kind, var, other, a, b, controls)| Op { kind, var, other, a, b, controls })
}

/// The graph's text, fetches (every value) and targets (every write).
fn random_graph(vars_n: usize, ops: &[Op]) -> (Graph, Vec<String>, Vec<String>) {
    let mut text = String::new();
    for v in 0..vars_n {
        text += &format!(
            "v{v} = VarHandleOp() {{container = \"\", dtype = float32, shape = shape[], shared_name = \"v{v}\"}}\n"
        );
    }
    for (name, x) in [("c0", 1.0), ("c1", 2.0), ("half", 0.5), ("quarter", 0.25), ("eps", 0.001)] {
        text += &format!("{name} = Const() {{dtype = float32, value = float32[]{{{x:?}}}}}\n");
    }
    let (mut values, mut fetches, mut targets, mut names) =
        (vec!["c0".to_string(), "c1".to_string()], Vec::new(), Vec::new(), Vec::<String>::new());
    for (i, op) in ops.iter().enumerate() {
        let name = format!("n{i}");
        let var = |k: usize| format!("v{}", (op.var + k) % vars_n);
        let (x, y) = (values[op.a % values.len()].clone(), values[op.b % values.len()].clone());
        let mut controls: Vec<String> = if names.is_empty() {
            vec![]
        } else {
            op.controls.iter().map(|c| names[c % names.len()].clone()).collect()
        };
        controls.sort();
        controls.dedup();
        let ctrl: String = controls.iter().map(|c| format!(", ^{c}")).collect();
        let kind = match op.kind {
            4 if vars_n == 3 => 4,
            2 | 4 if vars_n >= 2 => 2,
            2 | 4 => 1,
            k => k,
        };
        match kind {
            0 => {
                text += &format!("{name} = ReadVariableOp({}{ctrl}) {{dtype = float32}}\n", var(0));
                values.push(name.clone());
                fetches.push(format!("{name}:0"));
            }
            1 => {
                text += &format!("{name} = AssignVariableOp({}, {x}{ctrl}) {{dtype = float32}}\n", var(0));
                targets.push(name.clone());
            }
            2 => {
                let slot = var(1 + (op.other - 1) % (vars_n - 1));
                text += &format!(
                    "{name} = ResourceApplyMomentum({}, {slot}, half, {x}, quarter{ctrl}) \
                     {{T = float32, use_locking = false, use_nesterov = false}}\n",
                    var(0)
                );
                targets.push(name.clone());
            }
            4 => {
                text += &format!(
                    "{name} = ResourceApplyAdam({}, {}, {}, half, quarter, half, half, quarter, eps, {x}{ctrl}) \
                     {{T = float32, use_locking = false, use_nesterov = false}}\n",
                    var(0),
                    var(op.other),
                    var(3 - op.other)
                );
                targets.push(name.clone());
            }
            _ => {
                text += &format!("{name} = AddV2({x}, {y}{ctrl}) {{T = float32}}\n");
                values.push(name.clone());
                fetches.push(format!("{name}:0"));
            }
        }
        names.push(name);
    }
    (autoclust_graph::text::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}")), fetches, targets)
}

fn random_inputs(vars_n: usize) -> Inputs {
    let names: Vec<String> = (0..vars_n).map(|v| format!("v{v}")).collect();
    scalars(&names.iter().enumerate().map(|(i, n)| (n.as_str(), i as f32 + 1.0)).collect::<Vec<_>>())
}

fn bounded(fetches: &[String], targets: &[String], rmw: Rmw, reduce: bool, max_states: usize) -> Query {
    let mut q = query(&[], &[], rmw);
    q.fetches = fetches.to_vec();
    q.targets = targets.to_vec();
    q.limits = Limits { max_states, reduce, ..Limits::default() };
    q
}

fn same_outcomes(a: &Exploration, b: &Exploration) -> bool {
    a.outcomes.len() == b.outcomes.len() && a.outcomes.iter().all(|o| b.contains(o))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// With optimizer updates of two and three variables among reads, assigns and pure
    /// ops: the real clusterer adds no behaviour (seed 000's split model), and the reduced
    /// search finds exactly the outcomes of the full enumeration, for both models.
    #[test]
    fn multi_variable_updates_verify_and_reduce_exactly(
        vars_n in 1usize..4,
        ops in prop::collection::vec(op(), 1..7),
        min_size in 1usize..3,
    ) {
        let (g, fetches, targets) = random_graph(vars_n, &ops);
        let inputs = random_inputs(vars_n);
        let clusterer = autoclusterer(ClusterConfig { min_cluster_size: min_size, ..ClusterConfig::default() });
        let verdict = match verify(&g, &bounded(&fetches, &targets, Rmw::Split, true, 200_000), &clusterer, &inputs, &RuntimeKernels) {
            Err(SemanticsError::StateBound { .. }) => return Err(TestCaseError::reject("state bound")),
            r => r.unwrap(),
        };
        prop_assert!(verdict.holds(), "witness {:?}", verdict.witness());
        for rmw in [Rmw::Split, Rmw::Atomic] {
            let reduced = explore_graph(&g, &bounded(&fetches, &targets, rmw, true, 200_000), None, &inputs, &RuntimeKernels).unwrap();
            match explore_graph(&g, &bounded(&fetches, &targets, rmw, false, 50_000), None, &inputs, &RuntimeKernels) {
                Err(SemanticsError::StateBound { .. }) => {}
                r => prop_assert!(same_outcomes(&reduced, &r.unwrap()), "{rmw:?}"),
            }
        }
    }
}

/// The property above is not vacuous: the real clusterer puts the optimizer updates of
/// these graphs into clusters with the reads and the pure ops that feed them.
#[test]
fn the_real_clusterer_clusters_multi_variable_updates() {
    let op = |kind, var, a, controls: Vec<usize>| Op { kind, var, other: 1, a, b: 0, controls };
    // n0 = Read(v0); n1 = n0 + c0; n2 = Adam(v0, v1, v2, grad n1); n3 = Momentum(v1, v2, grad n0).
    let (g, _, _) =
        random_graph(3, &[op(0, 0, 0, vec![]), op(3, 0, 2, vec![]), op(4, 0, 3, vec![]), op(2, 1, 2, vec![])]);
    let clusters = autoclusterer(ClusterConfig { min_cluster_size: 1, ..ClusterConfig::default() })(&g).unwrap();
    for apply in ["ResourceApplyAdam", "ResourceApplyMomentum"] {
        assert!(clusters.iter().any(|c| c.nodes.iter().any(|&n| g.node(n).op == apply)), "{apply}: {clusters:?}");
    }
}

/// The counterexample the property test above found (before `encapsulate::ssa_order`
/// ordered a multi-variable update before the other writes of its variables): `v0 := 2`
/// and a Momentum update of (v0, v1) in one cluster with no path between them, `v1 := 1`
/// in another, and a read of v0 after it. With the assignment first in the cluster's body,
/// the update read v0 from it and v1 from the snapshot, and the clustered program could
/// fetch the initial v0 while the update used v0 = 2 and the initial v1 — no interleaving
/// of the graph does that.
#[test]
fn an_update_is_ordered_before_an_unordered_write_of_its_variables() {
    let op = |kind: u8, var: usize, a: usize, controls: Vec<usize>| Op { kind, var, other: 1, a, b: 0, controls };
    let ops = [op(1, 2, 1, vec![]), op(2, 0, 1, vec![]), op(1, 1, 0, vec![]), op(0, 2, 0, vec![2])];
    let (g, fetches, targets) = random_graph(2, &ops);
    let clusterer = autoclusterer(ClusterConfig { min_cluster_size: 1, ..ClusterConfig::default() });
    let verdict = verify(
        &g,
        &bounded(&fetches, &targets, Rmw::Split, true, 200_000),
        &clusterer,
        &random_inputs(2),
        &RuntimeKernels,
    )
    .unwrap();
    assert!(verdict.holds(), "witness {:?}", verdict.witness());
}

/// Two momentum updates sharing one of their two variables (`a` of (v0, v1), `b` of
/// (v1, v2)), unordered, beside `v2 := 9 →ᶜ r = Read(v1)`. In one cluster, whichever
/// update came second would read the shared v1 from the first and its other variable from
/// the snapshot; with the assignment and the read between the snapshot and the
/// write-back, the program could fetch the initial v1 while `b` used v2's initial value
/// and `a`'s v1 — no interleaving does that (`r` reading the initial v1 comes before `a`'s
/// write, so after `v2 := 9`). The clusterer keeps the two updates apart.
#[test]
fn updates_sharing_only_some_variables_are_not_clustered_together() {
    let g = autoclust_graph::text::parse(
        r#"
v0 = VarHandleOp() {container = "", dtype = float32, shape = shape[], shared_name = "v0"}
v1 = VarHandleOp() {container = "", dtype = float32, shape = shape[], shared_name = "v1"}
v2 = VarHandleOp() {container = "", dtype = float32, shape = shape[], shared_name = "v2"}
lr = Const() {dtype = float32, value = float32[]{0.5}}
mom = Const() {dtype = float32, value = float32[]{0.25}}
g = Const() {dtype = float32, value = float32[]{1.0}}
nine = Const() {dtype = float32, value = float32[]{9.0}}
a = ResourceApplyMomentum(v0, v1, lr, g, mom) {T = float32, use_locking = false, use_nesterov = false}
b = ResourceApplyMomentum(v1, v2, lr, g, mom) {T = float32, use_locking = false, use_nesterov = false}
w2 = AssignVariableOp(v2, nine) {dtype = float32}
r = ReadVariableOp(v1, ^w2) {dtype = float32}
"#,
    )
    .unwrap();
    let init = scalars(&[("v0", 1.0), ("v1", 2.0), ("v2", 3.0)]);
    for min_cluster_size in [1, 2] {
        let clusterer = autoclusterer(ClusterConfig { min_cluster_size, ..ClusterConfig::default() });
        let clusters = clusterer(&g).unwrap();
        let (a, b) = (g.find("a").unwrap(), g.find("b").unwrap());
        assert!(!clusters.iter().any(|c| c.nodes.contains(&a) && c.nodes.contains(&b)), "{clusters:?}");
        let verdict = verify(&g, &query(&["r"], &["a", "b"], Rmw::Split), &clusterer, &init, &RuntimeKernels).unwrap();
        assert!(verdict.holds(), "witness {:?}", verdict.witness());
    }
    // The pair forced into one cluster: the verifier finds the outcome no interleaving gives.
    let both = |g: &Graph| {
        Ok(vec![ClusterSpec { name: "cluster_0".into(), nodes: vec![g.find("a").unwrap(), g.find("b").unwrap()] }])
    };
    let verdict = verify(&g, &query(&["r"], &["a", "b"], Rmw::Split), &both, &init, &RuntimeKernels).unwrap();
    assert!(verdict.witness().is_some(), "the forced cluster should add an outcome");
}

/// A `ResourceCountUpTo` (TF1's `count_up_to`, outside TensorFlow's resource-op table) is
/// declined naming it, not as its variable's handle "used as a value".
#[test]
fn count_up_to_is_declined_by_name() {
    let g = autoclust_graph::text::parse(
        r#"
c = VarHandleOp() {container = "", dtype = int64, shape = shape[], shared_name = "c"}
n = ResourceCountUpTo(c) {T = int64, limit = 5}
"#,
    )
    .unwrap();
    let init = inputs(&[("c", Tensor::scalar_i64(0))]);
    let err = explore_graph(&g, &query(&["n:0"], &[], Rmw::Split), None, &init, &RuntimeKernels).unwrap_err();
    assert!(
        matches!(&err, SemanticsError::Unsupported { node, op, .. } if node == "n" && op == "ResourceCountUpTo"),
        "{err}"
    );
}
