//! TensorFlow 1 control flow in the model (issue 15 item 3): dead values (seed 002's
//! Switch/Merge), loop frames unrolled into operation instances `(node, frame, iteration)`
//! (seed 000), `parallel_iterations`, and the bound on iterations. Each expected outcome set
//! is counted by hand in the test's comment.

use crate::common::*;
use autoclust_graph::{text, Graph, Tensor};
use autoclust_passes::cluster::ClusterConfig;
use autoclust_semantics::{
    autoclusterer, explore_graph, verify, ClusterFn, ClusterSpec, Exploration, Inputs, Query, Rmw, RuntimeKernels,
    SemanticsError,
};

fn parse(src: &str) -> Graph {
    text::parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

fn q(fetches: &[&str], targets: &[&str], rmw: Rmw, max_iterations: usize) -> Query {
    let mut q = query(fetches, rmw);
    q.targets = targets.iter().map(|s| s.to_string()).collect();
    q.limits.max_iterations = max_iterations;
    q
}

fn try_explore(g: &Graph, q: &Query, inputs: &Inputs) -> Result<Exploration, SemanticsError> {
    explore_graph(g, q, None, inputs, &RuntimeKernels)
}

/// Sorted `(fetch or variable, value)` rows, for the named columns.
fn rows(e: &Exploration, cols: &[&str]) -> Vec<Vec<i32>> {
    let mut out: Vec<Vec<i32>> = ints(e).iter().map(|r| cols.iter().map(|c| get(r, c)).collect()).collect();
    out.sort();
    out
}

/// A cond (`p`) whose true branch writes 7 to `v` through a `Switch`ed handle, and whose
/// false branch adds 9 to `v` and reads the uninitialised `u` (under the branch's pivot).
const COND: &str = r#"
v = VarHandleOp() {dtype = int32, shape = shape[], shared_name = "v"}
u = VarHandleOp() {dtype = int32, shape = shape[], shared_name = "u"}
p = Placeholder() {dtype = bool, shape = shape[]}
seven = Const() {dtype = int32, value = int32[]{7}}
sw_v = Switch(v, p) {T = resource}
sw_u = Switch(u, p) {T = resource}
sw_x = Switch(seven, p) {T = int32}
w_true = AssignVariableOp(sw_v:1, sw_x:1) {dtype = int32}
pivot_f = Identity(sw_x) {T = int32}
nine = Const(^pivot_f) {dtype = int32, value = int32[]{9}}
w_false = AssignAddVariableOp(sw_v, nine) {dtype = int32}
r_u = ReadVariableOp(sw_u) {dtype = int32}
m = Merge(r_u, sw_x:1) {N = 2, T = int32}
"#;

fn feed_p(p: bool) -> Inputs {
    let mut inputs = vars(&[("v", 0)]);
    inputs.feeds.insert("p".into(), Tensor::scalar_bool(p));
    inputs
}

/// The untaken branch's write never happens (seed 002: a dead op does not run), and its
/// read of an uninitialised variable is no error: p = true gives v = 7 and m = 7 (the
/// true branch's value); the false branch's `AssignAdd` would have made v = 9.
#[test]
fn untaken_branch_write_never_happens() {
    let g = parse(COND);
    let query = q(&["m:0"], &["w_true", "w_false"], Rmw::Split, 16);
    let e = try_explore(&g, &query, &feed_p(true)).unwrap();
    assert_eq!(rows(&e, &["m:0", "v"]), [[7, 7]]);
    // p = false: the other branch runs; its read of `u` (uninitialised) is then an error.
    let err = try_explore(&g, &query, &feed_p(false)).unwrap_err();
    assert!(matches!(err, SemanticsError::Uninitialised { ref var, .. } if var == "u"), "{err}");
    let mut inputs = feed_p(false);
    inputs.vars.insert("u".into(), Tensor::scalar_i32(4));
    let e = try_explore(&g, &query, &inputs).unwrap();
    assert_eq!(rows(&e, &["m:0", "v"]), [[4, 9]]);
}

/// A cluster on the untaken branch is dead as a whole: its snapshot and write-back access
/// nothing. The fixed cluster {nine, w_false} lies on the false branch.
#[test]
fn dead_cluster_instance_is_a_no_op() {
    let g = parse(COND);
    let query = q(&["m:0"], &["w_true", "w_false"], Rmw::Split, 16);
    let ids = |names: &[&str]| names.iter().map(|n| g.find(n).unwrap()).collect::<Vec<_>>();
    let cluster = vec![ClusterSpec { name: "cluster_0".into(), nodes: ids(&["nine", "w_false"]) }];
    let clustered = run(&g, &query, &feed_p(true), Some(cluster.clone()));
    assert_eq!(rows(&clustered, &["m:0", "v"]), [[7, 7]]);
    assert!(clustered.witnesses[0].iter().any(|s| s.starts_with("cluster_0: write-back [v]")));
    let mut inputs = feed_p(false);
    inputs.vars.insert("u".into(), Tensor::scalar_i32(4));
    let clustered = run(&g, &query, &inputs, Some(cluster.clone()));
    assert_eq!(rows(&clustered, &["m:0", "v"]), [[4, 9]]);
    let fixed = move |_: &Graph| Ok(cluster.clone());
    let v = verify(&g, &query, &fixed as &ClusterFn<'_>, &inputs, &RuntimeKernels).unwrap();
    assert!(v.holds());
}

/// A while loop of `k` iterations over variable `v`, `parallel_iterations = P`; `body` is
/// the loop body's resource op(s), run under the pivot `i_id` (iteration counter `i_id`,
/// `i_body` = i + 1, `v_enter` the handle, `one_enter` the constant 1).
fn counted_loop(k: i32, parallel: u32, body: &str) -> String {
    format!(
        r#"
v = VarHandleOp() {{dtype = int32, shape = shape[], shared_name = "v"}}
zero = Const() {{dtype = int32, value = int32[]{{0}}}}
k = Const() {{dtype = int32, value = int32[]{{{k}}}}}
one = Const() {{dtype = int32, value = int32[]{{1}}}}
i_enter = Enter(zero) {{T = int32, frame_name = "L", parallel_iterations = {parallel}}}
k_enter = Enter(k) {{T = int32, frame_name = "L", is_constant = true, parallel_iterations = {parallel}}}
one_enter = Enter(one) {{T = int32, frame_name = "L", is_constant = true, parallel_iterations = {parallel}}}
v_enter = Enter(v) {{T = resource, frame_name = "L", is_constant = true, parallel_iterations = {parallel}}}
i_merge = Merge(i_enter, i_next) {{N = 2, T = int32}}
less = Less(i_merge, k_enter) {{T = int32}}
cond = LoopCond(less)
i_sw = Switch(i_merge, cond) {{T = int32}}
i_id = Identity(i_sw:1) {{T = int32}}
i_body = AddV2(i_id, one_enter) {{T = int32}}
i_next = NextIteration(i_body) {{T = int32}}
i_exit = Exit(i_sw) {{T = int32}}
{body}
"#
    )
}

const INCREMENT: &str = "inc = AssignAddVariableOp(v_enter, one_enter, ^i_id) {dtype = int32}";

/// A loop incrementing `v` k times ends with v = k when its iterations run one at a time
/// (`parallel_iterations = 1`), split read-modify-writes or not.
#[test]
fn loop_increments_k_times() {
    for k in [0, 1, 3, 5] {
        let g = parse(&counted_loop(k, 1, INCREMENT));
        for rmw in [Rmw::Split, Rmw::Atomic] {
            let e = try_explore(&g, &q(&["i_exit:0"], &["inc"], rmw, 16), &vars(&[("v", 0)])).unwrap();
            assert_eq!(rows(&e, &["i_exit:0", "v"]), [[k, k]], "k = {k}, {rmw:?}");
        }
    }
}

/// With `parallel_iterations = 10` the three iterations' increments are unordered: as
/// seed 000's concurrent `*X += 1`, split increments can lose updates, v ∈ {1, 2, 3};
/// atomic ones cannot, v = 3.
#[test]
fn parallel_iterations_race_like_concurrent_increments() {
    let g = parse(&counted_loop(3, 10, INCREMENT));
    let split = try_explore(&g, &q(&["i_exit:0"], &["inc"], Rmw::Split, 16), &vars(&[("v", 0)])).unwrap();
    assert_eq!(rows(&split, &["v"]), [[1], [2], [3]]);
    let atomic = try_explore(&g, &q(&["i_exit:0"], &["inc"], Rmw::Atomic, 16), &vars(&[("v", 0)])).unwrap();
    assert_eq!(rows(&atomic, &["v"]), [[3]]);
}

/// A read of `v` unordered with a loop writing v = 1, 2, 3 (one per iteration): with the
/// iterations in order, the read sees any of 0 (before all), 1, 2, 3, and v ends at 3: 4
/// outcomes. With the iterations in parallel the writes land in any order too: the final
/// value is any of 1, 2, 3 and the read any of 0..3, every pair possible: 12 outcomes.
#[test]
fn racy_read_against_a_loops_writes() {
    let body = "w = AssignVariableOp(v_enter, i_body, ^i_id) {dtype = int32}\nr = ReadVariableOp(v) {dtype = int32}";
    let g = parse(&counted_loop(3, 1, body));
    let e = try_explore(&g, &q(&["r:0", "i_exit:0"], &["w"], Rmw::Split, 16), &vars(&[("v", 0)])).unwrap();
    assert_eq!(rows(&e, &["r:0", "v"]), [[0, 3], [1, 3], [2, 3], [3, 3]]);
    let g = parse(&counted_loop(3, 10, body));
    let e = try_explore(&g, &q(&["r:0", "i_exit:0"], &["w"], Rmw::Split, 16), &vars(&[("v", 0)])).unwrap();
    let want: Vec<Vec<i32>> = (0..4).flat_map(|r| (1..4).map(move |v| vec![r, v])).collect();
    assert_eq!(rows(&e, &["r:0", "v"]), want);
}

/// A loop past the bound is an error naming its frame and the bound, never a truncated
/// answer; at the bound it runs.
#[test]
fn loop_past_the_bound_is_an_error() {
    let g = parse(&counted_loop(5, 1, INCREMENT));
    let err = try_explore(&g, &q(&["i_exit:0"], &["inc"], Rmw::Split, 4), &vars(&[("v", 0)])).unwrap_err();
    match &err {
        SemanticsError::LoopBound { frame, max_iterations, .. } => {
            assert_eq!((frame.as_str(), *max_iterations), ("L", 4));
        }
        other => panic!("{other}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("loop frame 'L'") && msg.contains("--max-iterations 4"), "{msg}");
    let e = try_explore(&g, &q(&["i_exit:0"], &["inc"], Rmw::Split, 5), &vars(&[("v", 0)])).unwrap();
    assert_eq!(rows(&e, &["i_exit:0", "v"]), [[5, 5]]);
    // The same when the loop's exit is not fetched (only its writes are targets).
    let err = try_explore(&g, &q(&[], &["inc"], Rmw::Split, 4), &vars(&[("v", 0)])).unwrap_err();
    assert!(matches!(err, SemanticsError::LoopBound { .. }), "{err}");
}

/// Nested loops: an outer loop of 2 iterations around an inner loop of 3, each inner
/// iteration incrementing v: v = 6, one instance per (outer, inner) iteration.
#[test]
fn nested_loops_unroll_per_outer_iteration() {
    let src = r#"
v = VarHandleOp() {dtype = int32, shape = shape[], shared_name = "v"}
zero = Const() {dtype = int32, value = int32[]{0}}
one = Const() {dtype = int32, value = int32[]{1}}
two = Const() {dtype = int32, value = int32[]{2}}
three = Const() {dtype = int32, value = int32[]{3}}
o_enter = Enter(zero) {T = int32, frame_name = "O", parallel_iterations = 1}
o_n = Enter(two) {T = int32, frame_name = "O", is_constant = true, parallel_iterations = 1}
o_one = Enter(one) {T = int32, frame_name = "O", is_constant = true, parallel_iterations = 1}
o_three = Enter(three) {T = int32, frame_name = "O", is_constant = true, parallel_iterations = 1}
o_v = Enter(v) {T = resource, frame_name = "O", is_constant = true, parallel_iterations = 1}
o_merge = Merge(o_enter, o_next) {N = 2, T = int32}
o_less = Less(o_merge, o_n) {T = int32}
o_cond = LoopCond(o_less)
o_sw = Switch(o_merge, o_cond) {T = int32}
o_id = Identity(o_sw:1) {T = int32}
o_z = Sub(o_id, o_id) {T = int32}
i_enter = Enter(o_z) {T = int32, frame_name = "I", parallel_iterations = 1}
i_n = Enter(o_three) {T = int32, frame_name = "I", is_constant = true, parallel_iterations = 1}
i_one = Enter(o_one) {T = int32, frame_name = "I", is_constant = true, parallel_iterations = 1}
i_v = Enter(o_v) {T = resource, frame_name = "I", is_constant = true, parallel_iterations = 1}
i_merge = Merge(i_enter, i_next) {N = 2, T = int32}
i_less = Less(i_merge, i_n) {T = int32}
i_cond = LoopCond(i_less)
i_sw = Switch(i_merge, i_cond) {T = int32}
i_id = Identity(i_sw:1) {T = int32}
inc = AssignAddVariableOp(i_v, i_one, ^i_id) {dtype = int32}
i_body = AddV2(i_id, i_one) {T = int32}
i_next = NextIteration(i_body) {T = int32}
i_exit = Exit(i_sw) {T = int32}
o_body = AddV2(o_id, o_one, ^i_exit) {T = int32}
o_next = NextIteration(o_body) {T = int32}
o_exit = Exit(o_sw) {T = int32}
"#;
    let g = parse(src);
    let e = try_explore(&g, &q(&["o_exit:0"], &["inc"], Rmw::Split, 4), &vars(&[("v", 0)])).unwrap();
    assert_eq!(rows(&e, &["o_exit:0", "v"]), [[2, 6]]);
    // The inner loop's bound is checked in every outer iteration.
    let err = try_explore(&g, &q(&["o_exit:0"], &["inc"], Rmw::Split, 2), &vars(&[("v", 0)])).unwrap_err();
    assert!(matches!(&err, SemanticsError::LoopBound { frame, .. } if frame == "I"), "{err}");
}

/// The real clusterer on a loop with a read-modify-write per iteration: the clustered
/// program (each cluster instantiated per iteration) adds no outcome, and both agree on
/// v = k.
#[test]
fn clustered_loop_verifies() {
    let body = "inc = AssignAddVariableOp(v_enter, i_body, ^i_id) {dtype = int32}\n\
                r = ReadVariableOp(v_enter, ^inc) {dtype = int32}\n\
                twice = Mul(r, r) {T = int32}\n\
                w = AssignVariableOp(v_enter, twice) {dtype = int32}";
    let g = parse(&counted_loop(3, 1, body));
    let query = q(&["i_exit:0"], &["w"], Rmw::Split, 8);
    let config = ClusterConfig { min_cluster_size: 1, ..ClusterConfig::default() };
    let clusterer = autoclusterer(config);
    let v = verify(&g, &query, &clusterer, &vars(&[("v", 0)]), &RuntimeKernels).unwrap();
    assert!(v.holds(), "{:?}", v.witness());
    // The body clustered, one cluster instance per iteration (named after it).
    let schedule = v.clustered.witnesses[0].join("\n");
    assert!(schedule.contains("@L[2]: snapshot-read"), "{schedule}");
    // v: (0+1)^2 = 1, (1+2)^2 = 9, (9+3)^2 = 144.
    assert_eq!(rows(&v.original, &["v"]), [[144]]);
    assert_eq!(rows(&v.clustered, &["v"]), [[144]]);
}

/// Seed 001's problem graph inside a loop body (one iteration): clustering `a0` with `r0`
/// (what the safety analysis forbids) lets the snapshot read v1 before `a1` writes it, so
/// the clustered program can end with v0 = 6 and v2 = r0 = 0, which the original cannot
/// (v0 = 6 implies r0 = 8). `verify` finds it over the cluster's loop instance.
#[test]
fn verify_catches_a_bad_cluster_inside_a_loop() {
    let src = r#"
v0 = VarHandleOp() {dtype = int32, shape = shape[], shared_name = "v0"}
v1 = VarHandleOp() {dtype = int32, shape = shape[], shared_name = "v1"}
v2 = VarHandleOp() {dtype = int32, shape = shape[], shared_name = "v2"}
zero = Const() {dtype = int32, value = int32[]{0}}
k = Const() {dtype = int32, value = int32[]{1}}
one = Const() {dtype = int32, value = int32[]{1}}
i_enter = Enter(zero) {T = int32, frame_name = "L", parallel_iterations = 1}
k_enter = Enter(k) {T = int32, frame_name = "L", is_constant = true, parallel_iterations = 1}
one_enter = Enter(one) {T = int32, frame_name = "L", is_constant = true, parallel_iterations = 1}
h0 = Enter(v0) {T = resource, frame_name = "L", is_constant = true, parallel_iterations = 1}
h1 = Enter(v1) {T = resource, frame_name = "L", is_constant = true, parallel_iterations = 1}
h2 = Enter(v2) {T = resource, frame_name = "L", is_constant = true, parallel_iterations = 1}
i_merge = Merge(i_enter, i_next) {N = 2, T = int32}
less = Less(i_merge, k_enter) {T = int32}
cond = LoopCond(less)
i_sw = Switch(i_merge, cond) {T = int32}
i_id = Identity(i_sw:1) {T = int32}
six = Const(^i_id) {dtype = int32, value = int32[]{6}}
seven = Const(^i_id) {dtype = int32, value = int32[]{7}}
eight = Const(^i_id) {dtype = int32, value = int32[]{8}}
a0 = AssignVariableOp(h0, six) {dtype = int32}
r0 = ReadVariableOp(h1, ^a0) {dtype = int32}
a1 = AssignVariableOp(h1, eight) {dtype = int32}
a2 = AssignVariableOp(h0, seven, ^a1) {dtype = int32}
keep = AssignVariableOp(h2, r0) {dtype = int32}
i_body = AddV2(i_id, one_enter, ^keep, ^a2) {T = int32}
i_next = NextIteration(i_body) {T = int32}
i_exit = Exit(i_sw) {T = int32}
"#;
    let g = parse(src);
    let query = q(&["i_exit:0"], &[], Rmw::Split, 4);
    let inputs = vars(&[("v0", 0), ("v1", 0), ("v2", 0)]);
    let original = try_explore(&g, &query, &inputs).unwrap();
    for r in rows(&original, &["v0", "v2"]) {
        assert!(r[0] != 6 || r[1] == 8, "{r:?}");
    }
    let ids = |names: &[&str]| names.iter().map(|n| g.find(n).unwrap()).collect::<Vec<_>>();
    let bad = vec![ClusterSpec { name: "cluster_0".into(), nodes: ids(&["six", "a0", "r0"]) }];
    let fixed = move |_: &Graph| Ok(bad.clone());
    let v = verify(&g, &query, &fixed as &ClusterFn<'_>, &inputs, &RuntimeKernels).unwrap();
    let (outcome, schedule) = v.witness().expect("the bad cluster adds an outcome");
    let value = |name: &str| outcome.variables.iter().find(|(n, _)| n == name).unwrap().1.as_i32().unwrap()[0];
    assert_eq!((value("v0"), value("v2")), (6, 0));
    assert!(schedule.iter().any(|s| s.starts_with("cluster_0@L[0]: snapshot-read [v1]")), "{schedule:?}");
    // The real clusterer keeps the loop body legal.
    let real = autoclusterer(ClusterConfig { min_cluster_size: 1, ..ClusterConfig::default() });
    assert!(verify(&g, &query, &real, &inputs, &RuntimeKernels).unwrap().holds());
}

/// What the model cannot answer is an error naming the node: a fetch inside a loop (only
/// its Exit is a value of the run), a `Merge` with two live inputs (which one it forwards
/// is a matter of timing), and an unrolling too large to build.
#[test]
fn unanswerable_requests_are_errors_naming_the_node() {
    let g = parse(&counted_loop(2, 1, INCREMENT));
    let err = try_explore(&g, &q(&["i_body:0"], &["inc"], Rmw::Split, 4), &vars(&[("v", 0)])).unwrap_err();
    assert!(err.to_string().contains("node 'i_body'") && err.to_string().contains("inside loop frame 'L'"), "{err}");
    let two_live = parse(
        r#"
a = Const() {dtype = int32, value = int32[]{1}}
b = Const() {dtype = int32, value = int32[]{2}}
p = Const() {dtype = bool, value = bool[]{true}}
sw = Switch(a, p) {T = int32}
m = Merge(sw:1, b) {N = 2, T = int32}
"#,
    );
    let err = try_explore(&two_live, &q(&["m:0"], &[], Rmw::Split, 4), &Inputs::default()).unwrap_err();
    assert!(err.to_string().contains("node 'm'") && err.to_string().contains("more than one of its inputs is live"));
    // A nest two deep at a million iterations: refused before anything is built.
    let nested = parse(
        &(counted_loop(2, 1, INCREMENT)
            .replace("i_body = AddV2(i_id, one_enter)", "i_body = AddV2(i_id, one_enter, ^j_exit)")
            + r#"
j_enter = Enter(i_id) {T = int32, frame_name = "J"}
j_merge = Merge(j_enter, j_next) {N = 2, T = int32}
j_less = Less(j_merge, j_merge) {T = int32}
j_cond = LoopCond(j_less)
j_sw = Switch(j_merge, j_cond) {T = int32}
j_next = NextIteration(j_sw:1) {T = int32}
j_exit = Exit(j_sw) {T = int32}
"#),
    );
    let e = try_explore(&nested, &q(&["i_exit:0"], &["inc"], Rmw::Split, 4), &vars(&[("v", 0)])).unwrap();
    assert_eq!(rows(&e, &["v"]), [[2]]);
    let err = try_explore(&nested, &q(&["i_exit:0"], &["inc"], Rmw::Split, 1_000_000), &vars(&[("v", 0)])).unwrap_err();
    assert!(matches!(err, SemanticsError::TooManyInstances { .. }), "{err}");
}

/// The reduced search (memoised states, partial-order reduction, dead steps first) finds
/// exactly the outcomes of the plain enumeration of every interleaving, on graphs whose
/// deadness depends on a racy read (a `Switch` on it, carried on by control edges) and on
/// a loop whose parallel iterations race.
#[test]
fn reduced_search_matches_every_interleaving_with_control_flow() {
    let racy_cond = parse(
        r#"
v = VarHandleOp() {dtype = int32, shape = shape[], shared_name = "v"}
u = VarHandleOp() {dtype = int32, shape = shape[], shared_name = "u"}
zero = Const() {dtype = int32, value = int32[]{0}}
one = Const() {dtype = int32, value = int32[]{1}}
two = Const() {dtype = int32, value = int32[]{2}}
w = AssignVariableOp(v, one) {dtype = int32}
r = ReadVariableOp(v) {dtype = int32}
pred = Greater(r, zero) {T = int32}
sw = Switch(r, pred) {T = int32}
piv_t = Identity(sw:1) {T = int32}
piv_f = Identity(sw) {T = int32}
a_t = AssignVariableOp(u, two, ^piv_t) {dtype = int32}
a_f = AssignAddVariableOp(u, one, ^piv_f) {dtype = int32}
x = ReadVariableOp(u) {dtype = int32}
"#,
    );
    let racy_loop = parse(&counted_loop(
        2,
        10,
        "inc = AssignAddVariableOp(v_enter, one_enter, ^i_id) {dtype = int32}\nr = ReadVariableOp(v) {dtype = int32}",
    ));
    let cases: [(&Graph, Query, Inputs); 3] = [
        // `r` not fetched: only control edges carry what it read to the writes of `u`.
        (&racy_cond, q(&["x:0"], &["w", "a_t", "a_f"], Rmw::Split, 4), vars(&[("v", 0), ("u", 0)])),
        (&racy_cond, q(&["x:0", "r:0"], &["w", "a_t", "a_f"], Rmw::Atomic, 4), vars(&[("v", 0), ("u", 0)])),
        (&racy_loop, q(&["r:0", "i_exit:0"], &["inc"], Rmw::Split, 2), vars(&[("v", 0)])),
    ];
    for (g, query, inputs) in cases {
        let reduced = try_explore(g, &query, &inputs).unwrap();
        let mut full = query.clone();
        full.limits.reduce = false;
        let every = try_explore(g, &full, &inputs).unwrap();
        assert_eq!(reduced.outcomes, every.outcomes, "{query:?}");
        assert!(reduced.outcomes.len() > 1, "{:?}", reduced.outcomes);
        assert!(reduced.states_explored <= every.states_explored);
    }
}

/// A `NextIteration` delivers to the next iteration, over control edges too: a write with
/// a control input from it runs in iterations 1..=k (the last one only tests the
/// condition), never in iteration 0, where nothing arrives: k writes for k iterations.
#[test]
fn next_iteration_control_edges_reach_the_next_iteration() {
    let body = "probe = AssignAddVariableOp(v_enter, one_enter, ^i_next) {dtype = int32}";
    for k in [0, 1, 3] {
        let g = parse(&counted_loop(k, 1, body));
        let e = try_explore(&g, &q(&["i_exit:0"], &["probe"], Rmw::Atomic, 8), &vars(&[("v", 0)])).unwrap();
        assert_eq!(rows(&e, &["v"]), [[k]], "k = {k}");
    }
}

/// Tensor arrays follow the runtime's rules (TensorFlow's): written once per index, read
/// and gathered back; a gradient array (one per array and `source`, every
/// `TensorArrayGradV3` naming it sharing it) adds a second write to an index and reads an
/// unwritten element as zeros; writing an index twice in a forward array is an error.
#[test]
fn tensor_arrays_write_read_gather_and_aggregate_gradients() {
    let src = r#"
n = Const() {dtype = int32, value = int32[]{3}}
i0 = Const() {dtype = int32, value = int32[]{0}}
i2 = Const() {dtype = int32, value = int32[]{2}}
idx = Const() {dtype = int32, value = int32[2]{2, 0}}
a = Const() {dtype = float32, value = float32[2]{1.0, 2.0}}
b = Const() {dtype = float32, value = float32[2]{10.0, 20.0}}
ta = TensorArrayV3(n) {dtype = float32, element_shape = shape[2], dynamic_size = false}
w0 = TensorArrayWriteV3(ta, i0, a, ta:1) {T = float32}
w2 = TensorArrayWriteV3(ta, i2, b, w0) {T = float32}
g = TensorArrayGatherV3(ta, idx, w2) {dtype = float32, element_shape = shape[2]}
size = TensorArraySizeV3(ta, w2)
grad1 = TensorArrayGradV3(ta, w2) {source = "gradients"}
grad2 = TensorArrayGradV3(ta, w2) {source = "gradients"}
gw1 = TensorArrayWriteV3(grad1, i0, a, grad1:1) {T = float32}
gw2 = TensorArrayWriteV3(grad2, i0, b, gw1) {T = float32}
gr0 = TensorArrayReadV3(grad1, i0, gw2) {dtype = float32}
gr2 = TensorArrayReadV3(grad2, i2, gw2) {dtype = float32}
"#;
    let g = parse(src);
    let e = try_explore(&g, &q(&["g:0", "size:0", "gr0:0", "gr2:0"], &[], Rmw::Split, 4), &Inputs::default()).unwrap();
    assert_eq!(e.outcomes.len(), 1);
    let o = &e.outcomes[0];
    let f32s = |name: &str| o.fetches.iter().find(|(n, _)| n == name).unwrap().1.as_f32().unwrap().to_vec();
    assert_eq!(f32s("g:0"), [10.0, 20.0, 1.0, 2.0]);
    assert_eq!(o.fetches.iter().find(|(n, _)| n == "size:0").unwrap().1.as_i32().unwrap(), [3]);
    assert_eq!(f32s("gr0:0"), [11.0, 22.0]);
    assert_eq!(f32s("gr2:0"), [0.0, 0.0]);
    assert!(o.variables.is_empty(), "containers are not part of the outcome: {:?}", o.variables);
    let twice = parse(&src.replace("w2 = TensorArrayWriteV3(ta, i2, b, w0)", "w2 = TensorArrayWriteV3(ta, i0, b, w0)"));
    let err = try_explore(&twice, &q(&["g:0"], &[], Rmw::Split, 4), &Inputs::default()).unwrap_err();
    assert!(err.to_string().contains("node 'w2'") && err.to_string().contains("already been written"), "{err}");
}
