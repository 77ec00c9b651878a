//! Run-time errors inside a cluster name the node inside the cluster: a `ResourceGather`
//! whose indices are fed at run time and out of range fails in both modes, and the
//! clustered error names the call node, the cluster node ('gather') and the reason, like
//! the plain executor's error does. A `ResourceScatter*` is written into its cluster as a
//! pure scatter named after the variable's SSA value: its errors still name the scatter the
//! user wrote and its op, in the plain kernel's words, and it takes a scalar update as the
//! plain kernel does.

use std::process::Command;

const GRAPH: &str = r#"# A gather from a variable with fed indices, scaled.
table = VarHandleOp() {container = "", dtype = float32, shape = shape[10,2], shared_name = "table"}
init_value = Const() {dtype = float32, value = float32[10,2]{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}}
init = AssignVariableOp(table, init_value) {dtype = float32}
ids = Placeholder() {dtype = int32, shape = shape[3]}
gather = ResourceGather(table, ids, ^init) {Tindices = int32, dtype = float32, batch_dims = 0}
two = Const() {dtype = float32, value = float32[]{2}}
scaled = Mul(gather, two) {T = float32}
"#;

/// Runs `autoclust run` on `graph` fetching `fetch` with `feeds` (`NAME=JSON`); returns
/// (success, stdout+stderr).
fn run_graph(graph: &str, feeds: &[&str], fetch: &str, plain: bool) -> (bool, String) {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("g.graph");
    std::fs::write(&path, graph).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_autoclust"));
    cmd.arg("run").arg(&path).arg("--fetch").arg(fetch);
    for f in feeds {
        cmd.arg("--feed").arg(f);
    }
    if plain {
        cmd.arg("--no-cluster");
    }
    let out = cmd.output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// GRAPH fetching `scaled` with `ids` fed.
fn run(ids: &str, plain: bool) -> (bool, String) {
    run_graph(GRAPH, &[&format!("ids={ids}")], "scaled", plain)
}

#[test]
fn in_range_indices_run_in_both_modes() {
    for plain in [false, true] {
        let (ok, text) = run("[1, 9, 0]", plain);
        assert!(ok, "plain={plain}: {text}");
        assert!(text.contains("36"), "plain={plain}: row 9 doubled (36, 38) expected in {text}");
    }
}

#[test]
fn out_of_range_index_names_the_gather_in_both_modes() {
    let (ok, plain) = run("[1, 12, 0]", true);
    assert!(!ok, "plain run must fail: {plain}");
    assert!(plain.contains("'gather'"), "plain error names the gather: {plain}");
    assert!(plain.contains("12"), "plain error names the bad index: {plain}");

    let (ok, clustered) = run("[1, 12, 0]", false);
    assert!(!ok, "clustered run must fail: {clustered}");
    let line = clustered.lines().find(|l| l.starts_with("error:")).unwrap_or(&clustered).to_string();
    assert!(line.contains("in cluster node 'gather'"), "clustered error names the node in the cluster: {line}");
    assert!(line.contains("12"), "clustered error names the bad index: {line}");
    assert!(line.contains("cluster"), "clustered error names the call node: {line}");
    assert_eq!(line.matches("error:").count(), 1, "one line, one error: {line}");
}

/// A valid `ResourceScatterAdd` into `v` (3 rows), then `second = OP(v, idx1, neg(upd))`
/// after it: with one index in `idx1` and three update rows, the second scatter's updates
/// have the wrong shape (TensorFlow: "must have shape [1, 2] or be a scalar").
fn scatter_graph(op: &str, updates_shape: &str) -> String {
    format!(
        r#"v = VarHandleOp() {{container = "", dtype = float32, shape = shape[4,2], shared_name = "v"}}
init_value = Const() {{dtype = float32, value = float32[4,2]{{0, 1, 2, 3, 4, 5, 6, 7}}}}
init = AssignVariableOp(v, init_value) {{dtype = float32}}
idx = Placeholder() {{dtype = int32, shape = shape[?]}}
idx1 = Placeholder() {{dtype = int32, shape = shape[?]}}
upd = Placeholder() {{dtype = float32, shape = shape{updates_shape}}}
first = ResourceScatterAdd(v, idx, upd, ^init) {{Tindices = int32, dtype = float32}}
neg = Neg(upd) {{T = float32}}
second = {op}(v, idx1, neg, ^first) {{Tindices = int32, dtype = float32}}
r = ReadVariableOp(v, ^second) {{dtype = float32}}
"#
    )
}

/// Runs `autoclust run` on `graph` fetching `r`; returns (success, stdout+stderr).
fn run_scatter(graph: &str, feeds: &[&str], plain: bool) -> (bool, String) {
    run_graph(graph, feeds, "r", plain)
}

/// The clustered error named `v_ssa_1` (TensorScatterMin), the variable's SSA value, and
/// said "must have shape [1, 2]": it names the scatter and its op in the plain kernel's words.
#[test]
fn a_clustered_scatter_with_wrongly_shaped_updates_is_named_as_written() {
    let feeds = ["idx=[1, 2, 1]", "idx1=[1]", "upd=[[1, 1], [2, 2], [3, 3]]"];
    for op in ["ResourceScatterMin", "ResourceScatterUpdate", "ResourceScatterAdd", "ResourceScatterMax"] {
        let graph = scatter_graph(op, "[?,2]");
        let (ok, plain) = run_scatter(&graph, &feeds, true);
        assert!(!ok, "{op}: the plain run must fail: {plain}");
        let want = format!("'second' ({op}): updates must have shape [1, 2] or be a scalar, got [3, 2]");
        assert!(plain.contains(&want), "{op}: plain error {plain}");
        let (ok, clustered) = run_scatter(&graph, &feeds, false);
        assert!(!ok, "{op}: the clustered run must fail: {clustered}");
        let line = clustered.lines().find(|l| l.starts_with("error:")).unwrap_or(&clustered).to_string();
        assert!(line.contains("in cluster node 'second' ("), "{op}: names the scatter: {line}");
        assert!(line.contains(&format!("in cluster node {want}")), "{op}: the plain kernel's words: {line}");
        assert!(!line.contains("_ssa_") && !line.contains("TensorScatter"), "{op}: {line}");
    }
}

/// A scalar update goes to every element of the indexed rows in both modes (the clustered
/// run refused it: the pure scatter takes no scalar).
#[test]
fn a_clustered_scatter_takes_a_scalar_update() {
    let feeds = ["idx=[1, 2]", "idx1=[3]", "upd=5"];
    for op in ["ResourceScatterMin", "ResourceScatterUpdate"] {
        let graph = scatter_graph(op, "[]");
        let (ok, plain) = run_scatter(&graph, &feeds, true);
        assert!(ok, "{op}: plain {plain}");
        let (ok, clustered) = run_scatter(&graph, &feeds, false);
        assert!(ok, "{op}: clustered {clustered}");
        let value = |text: &str| text.lines().find(|l| l.starts_with("r:0")).unwrap_or("").to_string();
        assert_eq!(value(&clustered), value(&plain), "{op}");
        assert!(value(&plain).contains("-5.0"), "{op}: {plain}");
        // A note saying why the cluster is interpreted names the scatter as written too.
        assert!(!clustered.contains("_ssa_"), "{op}: {clustered}");
    }
}
