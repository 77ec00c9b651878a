//! `autoclust opt` beyond FileCheck (docs/contract.md §4): `--passes default` is the
//! optimization pipeline run before clustering, `--fetch`/`--target` prune
//! first, and `--stats` prints a Grappler-style JSON summary.

use std::process::Command;

const GRAPH: &str = r#"
function scale(x: float32) -> (y: float32) {
  two = Const() {dtype = float32, value = float32[]{2.0}}
  m = Mul(x, two:0) {T = float32}
  return y = m:0
}
a = Placeholder() {dtype = float32, shape = shape[3]}
c = StatefulPartitionedCall(a) {Tin = [float32], Tout = [float32], f = @scale}
e = Exp(c) {T = float32}
unused = Neg(a) {T = float32}
"#;

fn opt(args: &[&str]) -> (bool, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.graph");
    std::fs::write(&g, GRAPH).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_autoclust")).arg("opt").arg(&g).args(args).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn stats_count_top_level_and_function_nodes_per_pass() {
    let (ok, stdout, stderr) = opt(&["--passes", "default", "--stats"]);
    assert!(ok, "{stderr}");
    let j: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    // a, c, e, unused; the call becomes c/two, c/m and the IdentityN named c
    // (kept: without --fetch every node nothing consumes may be fetched).
    assert_eq!(j["nodes_before"], 4, "{j}");
    assert_eq!(j["nodes_after"], 6, "{j}");
    assert_eq!(j["function_nodes_before"], 2, "{j}");
    assert_eq!(j["function_nodes_after"], 2, "{j}");
    let passes = j["passes"].as_array().unwrap();
    let names: Vec<&str> = passes.iter().map(|p| p["pass"].as_str().unwrap()).collect();
    assert_eq!(names, autoclust_passes::pass::DEFAULT_PIPELINE, "{j}");
    assert_eq!(passes[0]["nodes_after"], 6);
    assert!(passes.iter().all(|p| p["ms"].as_f64().unwrap() >= 0.0));
}

#[test]
fn fetch_prunes_before_the_passes() {
    let (ok, stdout, stderr) = opt(&["--passes", "default", "--fetch", "e"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("c/m = Mul(a, c/two)"), "{stdout}");
    assert!(!stdout.contains("unused"), "{stdout}");
    let (ok, _, stderr) = opt(&["--passes", "default", "--fetch", "nope"]);
    assert!(!ok);
    assert!(stderr.starts_with("error: --fetch 'nope': names no node"), "{stderr}");
}
