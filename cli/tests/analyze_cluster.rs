//! End-to-end tests of `autoclust analyze` and `autoclust cluster` on the
//! TensorFlow fixtures (`testdata/tf/*.pbtxt`) and small hand-written graphs:
//! exact contract JSON for the safety analysis, the clustering guarantees
//! (every node exactly once, sorted names, no incompatible pair in a
//! cluster, determinism), `--explain`, `--dot`, and error exits.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_autoclust"))
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/tf").join(name)
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("runs autoclust")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn ok_json(args: &[&str]) -> Value {
    let o = run(args);
    assert!(o.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(&stdout(&o)).expect("valid JSON")
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn analyze_seed001_problem_exact_json() {
    let o = run(&["analyze", path(&fixture("seed001_problem.pbtxt")), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        stdout(&o).trim_end(),
        concat!(
            r#"{"resource_ops":[{"node":"assign_v0_6","op":"AssignVariableOp","kind":"write"},"#,
            r#"{"node":"assign_v0_7","op":"AssignVariableOp","kind":"write"},"#,
            r#"{"node":"assign_v1_8","op":"AssignVariableOp","kind":"write"},"#,
            r#"{"node":"r0","op":"ReadVariableOp","kind":"read"}],"#,
            r#""incompatible_pairs":[{"from":"assign_v0_6","to":"r0"}]}"#
        )
    );
}

#[test]
fn analyze_seed001_ssa_and_seed000() {
    let v = ok_json(&["analyze", path(&fixture("seed001_ssa.pbtxt")), "--json"]);
    assert_eq!(v["incompatible_pairs"], serde_json::json!([{"from": "assign_42", "to": "r1"}]));
    assert_eq!(v["resource_ops"].as_array().unwrap().len(), 5);
    // seed 000: *X = 1 → *Y = 2 and r0 = *Y → r1 = *X: no write reaches a read.
    let v = ok_json(&["analyze", path(&fixture("seed000_simplest.pbtxt")), "--json"]);
    assert_eq!(v["incompatible_pairs"], serde_json::json!([]));
}

fn resource_kinds(v: &Value) -> BTreeMap<String, String> {
    v["resource_ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["node"].as_str().unwrap().to_string(), r["kind"].as_str().unwrap().to_string()))
        .collect()
}

/// As the contract says (TensorFlow's rule), every op that calls a function is `modify`,
/// however pure the function: `PartitionedCall` of `affine` and the Defun-style `ScaleShift`
/// too. With `--interprocedural` (what `run` clusters with) a call has the resource effects
/// of the functions it runs: a call of a function that touches no variable is no resource
/// op at all, a call of one that reads and writes a variable is `modify`; so the only
/// write→read pairs left are between real accesses (none here).
#[test]
fn analyze_calls_are_modify_unless_interprocedural() {
    let g = fixture("function_calls.pbtxt");
    let v = ok_json(&["analyze", path(&g), "--json"]);
    let kinds = resource_kinds(&v);
    for call in ["StatefulPartitionedCall", "PartitionedCall", "ScaleShift"] {
        assert_eq!(kinds.get(call).map(String::as_str), Some("modify"), "{call}");
    }
    let v = ok_json(&["analyze", path(&g), "--json", "--interprocedural"]);
    let kinds = resource_kinds(&v);
    assert_eq!(kinds.get("StatefulPartitionedCall").map(String::as_str), Some("modify"));
    for pure in ["PartitionedCall", "ScaleShift"] {
        assert_eq!(kinds.get(pure), None, "{pure} runs a function that touches no variable");
    }
    assert_eq!(v["incompatible_pairs"], serde_json::json!([]));
}

#[test]
fn analyze_text_output() {
    let o = run(&["analyze", path(&fixture("seed001_problem.pbtxt"))]);
    assert!(o.status.success());
    let text = stdout(&o);
    assert!(text.contains("incompatible pairs: 1"), "{text}");
    assert!(text.contains("assign_v0_6 -> r0"), "{text}");
}

/// Checks the contract's guarantees on `cluster --json` output, using
/// `analyze --json` for the pairs. Returns node → cluster name.
fn check_cluster_json(graph: &Path, extra: &[&str]) -> BTreeMap<String, String> {
    let mut args = vec!["cluster", path(graph), "--json"];
    args.extend_from_slice(extra);
    let v = ok_json(&args);
    let mut of = BTreeMap::new();
    let mut all = BTreeSet::new();
    for (i, c) in v["clusters"].as_array().unwrap().iter().enumerate() {
        let name = c["name"].as_str().unwrap();
        assert_eq!(name, format!("cluster_{i}"));
        let nodes: Vec<&str> = c["nodes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
        assert!(nodes.windows(2).all(|w| w[0] < w[1]), "cluster nodes not sorted: {nodes:?}");
        for n in nodes {
            assert!(all.insert(n.to_string()), "{n} twice");
            of.insert(n.to_string(), name.to_string());
        }
    }
    let unclustered: Vec<&str> = v["unclustered"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert!(unclustered.windows(2).all(|w| w[0] < w[1]), "unclustered not sorted");
    for n in unclustered {
        assert!(all.insert(n.to_string()), "{n} twice");
    }
    let mut analyze = vec!["analyze", path(graph), "--json"];
    analyze.extend(extra.iter().filter(|&&a| a == "--interprocedural"));
    let analysis = ok_json(&analyze);
    let ops = analysis["resource_ops"].as_array().unwrap();
    for r in ops {
        assert!(all.contains(r["node"].as_str().unwrap()), "a node is missing from the clustering");
    }
    for p in analysis["incompatible_pairs"].as_array().unwrap() {
        let (f, t) = (p["from"].as_str().unwrap(), p["to"].as_str().unwrap());
        assert!(!of.contains_key(f) || of.get(f) != of.get(t), "{f} and {t} share {:?}", of.get(f));
    }
    let again = ok_json(&args);
    assert_eq!(v, again, "not deterministic");
    of
}

#[test]
fn cluster_every_fixture_keeps_the_guarantees() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/tf");
    let Ok(entries) = std::fs::read_dir(&dir) else { return };
    let mut graphs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pbtxt"))
        .collect();
    graphs.sort();
    for g in graphs {
        for min in ["1", "2", "3"] {
            check_cluster_json(&g, &["--min-cluster-size", min]);
        }
        check_cluster_json(&g, &["--min-cluster-size", "1", "--interprocedural"]);
    }
}

/// `cluster --optimize` also lists the clusters `run` forms inside branch and loop bodies
/// (TF2's `tf.cond` and `tf.while_loop` updating a variable): the updates sit in them, behind
/// bridges on the bodies' arguments. Without `--optimize` the contract's JSON is unchanged.
#[test]
fn cluster_optimize_lists_the_clusters_inside_function_bodies() {
    let g = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/tf/tf2_control_flow.pbtxt");
    let v = ok_json(&["cluster", path(&g), "--optimize", "--json"]);
    let bodies = v["function_clusters"].as_array().expect("function_clusters");
    let members = |function: &str| -> Vec<&str> {
        bodies
            .iter()
            .filter(|c| c["function"] == function)
            .flat_map(|c| c["nodes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()))
            .collect()
    };
    assert!(members("cond_true_16").contains(&"cond/AssignAddVariableOp"), "{v}");
    assert!(members("cond_false_17").contains(&"cond/AssignSubVariableOp"), "{v}");
    let body = members("while_body_44");
    assert!(body.contains(&"while/AssignAddVariableOp") && body.contains(&"while/Tanh"), "{v}");
    let names: Vec<&str> = bodies.iter().map(|c| c["name"].as_str().unwrap()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "ordered by function, then name");
    let text = stdout(&run(&["cluster", path(&g), "--optimize"]));
    assert!(text.contains("in function 'cond_true_16': cond_true_16_cluster_0 (2 nodes):"), "{text}");
    let plain = ok_json(&["cluster", path(&g), "--json"]);
    assert!(plain.get("function_clusters").is_none(), "{plain}");
}

#[test]
fn cluster_seed001_problem_separates_the_pair() {
    let of = check_cluster_json(&fixture("seed001_problem.pbtxt"), &["--min-cluster-size", "1"]);
    assert!(of.contains_key("assign_v0_6"), "the write is compilable: {of:?}");
    assert_ne!(of.get("assign_v0_6"), of.get("r0"));
    assert!(!of.contains_key("var_0") && !of.contains_key("var_1"), "variable handles are never clustered");
}

#[test]
fn cluster_explain_names_the_refusals() {
    let o = run(&["cluster", path(&fixture("seed001_problem.pbtxt")), "--explain", "--min-cluster-size", "1"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = stdout(&o);
    assert!(text.contains("write->read pair (assign_v0_6, r0)"), "{text}");
    assert!(text.contains("not compilable: var_0 (VarHandleOp)"), "{text}");
}

#[test]
fn cluster_dot_file() {
    let dir = tempfile::tempdir().unwrap();
    let dot = dir.path().join("c.dot");
    let o = run(&["cluster", path(&fixture("seed001_ssa.pbtxt")), "--dot", path(&dot)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&dot).unwrap();
    assert!(text.starts_with("digraph"));
    assert!(text.contains("subgraph \"cluster_0\""), "{text}");
    assert!(text.contains("style=dashed, color=red"), "the unsafe pair is drawn");
}

/// Issue 15 item 4: a TF1 nested `while_loop` draws its frames as nested dashed boxes, the
/// inner loop's box inside the outer one's, each cluster inside the box of its frame.
#[test]
fn cluster_dot_draws_loop_frames_as_nested_boxes() {
    let dir = tempfile::tempdir().unwrap();
    let dot = dir.path().join("c.dot");
    let o = run(&["cluster", path(&fixture("v1cf_nested_while.pbtxt")), "--dot", path(&dot)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&dot).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let opens: Vec<usize> =
        lines.iter().enumerate().filter(|(_, l)| l.contains("subgraph \"cluster_frame_")).map(|(i, _)| i).collect();
    assert_eq!(opens.len(), 2, "one box per loop frame:\n{text}");
    let label = |i: usize| lines[i + 1];
    assert!(label(opens[0]).contains("label=\"frame while/while_context\""), "{}", label(opens[0]));
    assert!(label(opens[1]).contains("label=\"frame while/while/while_context\""), "{}", label(opens[1]));
    // The inner box opens inside the outer one: deeper indentation, before the outer closes.
    let indent = |l: &str| l.len() - l.trim_start().len();
    assert!(indent(lines[opens[1]]) > indent(lines[opens[0]]), "{text}");
    let outer_close = (opens[0] + 1..lines.len())
        .find(|&i| lines[i].trim() == "}" && indent(lines[i]) == indent(lines[opens[0]]))
        .expect("the outer box closes");
    assert!(opens[1] < outer_close, "the inner frame's box is nested in the outer one's:\n{text}");
    // The loop body's clusters sit inside a frame box; every node is drawn once.
    let first_cluster = lines.iter().position(|l| l.contains("subgraph \"cluster_") && !l.contains("frame")).unwrap();
    assert!(first_cluster > 0);
    let declared = lines.iter().filter(|l| l.trim_start().starts_with('n') && l.contains("[label=")).count();
    let src = std::fs::read_to_string(fixture("v1cf_nested_while.pbtxt")).unwrap();
    let nodes = src.matches("\nnode {").count() + usize::from(src.starts_with("node {"));
    assert_eq!(declared, nodes, "every node drawn once");
    assert!(text.trim_end().ends_with('}'));
}

const CYCLE: &str = r#"node {
  name: "a"
  op: "NoOp"
  input: "^c"
}
node {
  name: "b"
  op: "NoOp"
  input: "^a"
}
node {
  name: "c"
  op: "NoOp"
  input: "^b"
}
"#;

#[test]
fn errors_exit_1_and_usage_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("cycle.pbtxt");
    std::fs::write(&g, CYCLE).unwrap();
    for cmd in ["analyze", "cluster"] {
        let o = run(&[cmd, path(&g)]);
        assert_eq!(o.status.code(), Some(1), "{cmd}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.starts_with("error:") && err.contains("a -> b -> c -> a"), "{err}");
    }
    let dot = dir.path().join("out.dot");
    let o = run(&["cluster", path(&g), "--dot", path(&dot)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(!dot.exists(), "a failed command writes no output file");
    let o = run(&["cluster", path(&fixture("seed001_ssa.pbtxt")), "--min-cluster-size", "0"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&["analyze", path(&dir.path().join("missing.pbtxt"))]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("error:"));
}

/// A MirroredStrategy step (TensorFlow's graph, two replicas on CPU:0 and CPU:1): no cluster
/// holds nodes of both devices, as TensorFlow's auto-clustering, and `--explain` says why.
#[test]
fn clusters_of_a_two_replica_step_stay_on_their_devices() {
    let g = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/tf/dist_mirrored_keras_adam.pbtxt");
    let text = std::fs::read_to_string(&g).unwrap();
    let parsed = autoclust_graphdef::parse_pbtxt(&text).unwrap();
    let v = ok_json(&["cluster", path(&g), "--json"]);
    let clusters = v["clusters"].as_array().unwrap();
    assert!(clusters.len() >= 2, "{v}");
    for c in clusters {
        let devices: BTreeSet<&str> = c["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| parsed.node(parsed.find(n.as_str().unwrap()).unwrap()).device.as_str())
            .filter(|d| !d.is_empty())
            .collect();
        assert!(devices.len() <= 1, "{} spans {devices:?}", c["name"]);
    }
    let out = run(&["cluster", path(&g), "--explain"]);
    assert!(stdout(&out).contains("placed on different devices"), "{}", stdout(&out));
}
