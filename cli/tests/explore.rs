//! `autoclust explore` and `autoclust verify` on the seeds' examples in
//! testdata/explore/ (CONTRACT.md §4, docs/semantics.md).

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn case(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/explore").join(name)
}

/// Runs autoclust; (exit code, stdout, stderr).
fn autoclust(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_autoclust"));
    cmd.args(args).env_remove("AUTOCLUST_UNSAFE_IGNORE_SAFETY");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("autoclust runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `explore --json`: each outcome as name → first element, fetches and variables together.
fn explore(file: &str, args: &[&str]) -> Vec<Vec<(String, f64)>> {
    let path = case(file);
    let mut all = vec!["explore", path.to_str().unwrap(), "--json"];
    all.extend_from_slice(args);
    let (code, stdout, stderr) = autoclust(&all, &[]);
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).expect("JSON");
    assert!(v["states_explored"].as_u64().unwrap() >= 1);
    v["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            ["fetches", "variables"]
                .iter()
                .flat_map(|k| o[*k].as_object().unwrap().iter())
                .map(|(n, t)| {
                    assert!(t["dtype"].is_string() && t["shape"].is_array());
                    (n.clone(), t["data"][0].as_f64().unwrap())
                })
                .collect()
        })
        .collect()
}

fn get(row: &[(String, f64)], name: &str) -> f64 {
    row.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no {name} in {row:?}")).1
}

#[test]
fn simplest_example() {
    let rows = explore("simplest.graph", &["--var", "X=0", "--var", "Y=0", "--fetch", "r0:0,r1:0", "--target", "wy"]);
    let pairs: Vec<(f64, f64)> = rows.iter().map(|r| (get(r, "r0:0"), get(r, "r1:0"))).collect();
    assert_eq!(pairs, [(0.0, 0.0), (0.0, 1.0), (2.0, 1.0)]);
}

#[test]
fn load_store_reordering() {
    let rows = explore("load_store.graph", &["--var", "X=0", "--var", "Y=0", "--fetch", "r0:0", "--target", "wx2"]);
    assert!(rows.iter().any(|r| get(r, "X") == 1.0));
    assert!(rows.iter().any(|r| get(r, "X") == 2.0 && get(r, "r0:0") == 0.0));
    assert!(rows.iter().filter(|r| get(r, "X") == 1.0).all(|r| get(r, "r0:0") == 5.0), "{rows:?}");
}

#[test]
fn concurrent_increments() {
    let split: Vec<f64> = explore("increments.graph", &["--var", "X=0"]).iter().map(|r| get(r, "X")).collect();
    assert_eq!(split, [1.0, 2.0]);
    let atomic: Vec<f64> =
        explore("increments.graph", &["--var", "X=0", "--atomic-rmw"]).iter().map(|r| get(r, "X")).collect();
    assert_eq!(atomic, [2.0]);
}

const PROBLEM: &[&str] = &["--var", "v0=0", "--var", "v1=0", "--fetch", "r0:0", "--target", "a7"];

#[test]
fn problem_graph_outcomes_and_clustered_outcomes() {
    for clustered in [false, true] {
        let mut args = PROBLEM.to_vec();
        if clustered {
            args.push("--clustered");
        }
        let rows = explore("problem.graph", &args);
        assert!(rows.iter().any(|r| get(r, "v0") == 6.0));
        assert!(rows.iter().filter(|r| get(r, "v0") == 6.0).all(|r| get(r, "r0:0") == 8.0), "{rows:?}");
    }
}

#[test]
fn verify_passes_with_the_real_clusterer() {
    let path = case("problem.graph");
    for min in ["1", "2"] {
        let mut args = vec!["verify", path.to_str().unwrap(), "--min-cluster-size", min];
        args.extend_from_slice(PROBLEM);
        let (code, stdout, stderr) = autoclust(&args, &[]);
        assert_eq!(code, 0, "{stdout}{stderr}");
        assert_eq!(stdout.lines().count(), 1, "{stdout}");
        assert!(stdout.starts_with("verify: ok"), "{stdout}");
    }
}

/// Seed 001: a clusterer that ignores the safety analysis puts `a6` and
/// `r0` in one cluster; verify finds v0 == 6 with r0 != 8.
#[test]
fn verify_catches_a_clustering_that_ignores_safety() {
    let path = case("problem.graph");
    let mut args = vec!["verify", path.to_str().unwrap(), "--min-cluster-size", "1"];
    args.extend_from_slice(PROBLEM);
    for env in [&[("AUTOCLUST_UNSAFE_IGNORE_SAFETY", "1")][..], &[]] {
        let mut a = args.clone();
        if env.is_empty() {
            a.push("--unsafe-ignore-safety");
        }
        let (code, stdout, stderr) = autoclust(&a, env);
        assert_eq!(code, 1, "{stdout}{stderr}");
        assert!(stderr.starts_with("error:"), "{stderr}");
        let outcome = stdout.lines().find(|l| l.starts_with("outcome:")).expect("an outcome line");
        assert!(outcome.contains("v0 = 6 "), "{outcome}");
        assert!(outcome.contains("r0:0 = ") && !outcome.contains("r0:0 = 8 "), "{outcome}");
        assert!(stdout.contains("schedule:") && stdout.contains("snapshot-read [v1]"), "{stdout}");
    }
}

#[test]
fn feeds_and_gradient_descent() {
    let args = ["--var", "w=1.0", "--var", "step=0", "--feed", "x=2.0", "--atomic-rmw", "--fetch", "rw2:0"];
    let mut args = args.to_vec();
    args.extend_from_slice(&["--target", "update,inc,inc2"]);
    let rows = explore("training_step.graph", &args);
    // The update is w - 0.5 * (w * 2) = 0; rw2 reads w before or after it.
    assert!(rows.iter().all(|r| get(r, "step") == 2.0 && get(r, "w") == 0.0), "{rows:?}");
    let rw2: Vec<f64> = rows.iter().map(|r| get(r, "rw2:0")).collect();
    assert_eq!(rw2, [0.0, 1.0]);
}

#[test]
fn errors_name_the_node_and_exit_1() {
    let path = case("increments.graph");
    let p = path.to_str().unwrap();
    let (code, _, stderr) = autoclust(&["explore", p], &[]);
    assert_eq!(code, 1);
    assert!(stderr.starts_with("error:") && stderr.contains("'inc") && stderr.contains("'X'"), "{stderr}");

    let (code, _, stderr) = autoclust(&["explore", p, "--var", "X=0", "--max-states", "2"], &[]);
    assert_eq!(code, 1);
    assert!(stderr.starts_with("error:") && stderr.contains("--max-states"), "{stderr}");

    let (code, _, stderr) = autoclust(&["explore", p, "--var", "X=0", "--fetch", "nope:0"], &[]);
    assert_eq!(code, 1);
    assert!(stderr.contains("'nope'"), "{stderr}");

    let (code, _, _) = autoclust(&["explore", p, "--var", "X0"], &[]);
    assert_eq!(code, 2);
}

/// The graph-optimization pipeline (`opt --passes default`, what `run`
/// applies first) adds no behaviour: on each seed example, every outcome of
/// the optimized program is an outcome of the original (and with
/// `--atomic-rmw`, the executor's model).
#[test]
fn optimized_outcomes_are_a_subset_of_the_originals() {
    let cases: &[(&str, &[&str])] = &[
        ("simplest.graph", &["--var", "X=0", "--var", "Y=0", "--fetch", "r0:0,r1:0", "--target", "wy"]),
        ("load_store.graph", &["--var", "X=0", "--var", "Y=0", "--fetch", "r0:0", "--target", "wx2"]),
        ("increments.graph", &["--var", "X=0"]),
        ("problem.graph", PROBLEM),
        ("twin_reads.graph", &["--var", "X=1", "--var", "Y=1", "--fetch", "s:0,t:0", "--target", "wa,wb"]),
        (
            "training_step.graph",
            &[
                "--var",
                "w=1.0",
                "--var",
                "step=0",
                "--feed",
                "x=2.0",
                "--fetch",
                "rw2:0",
                "--target",
                "update,inc,inc2",
            ],
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (file, args) in cases {
        // The request's fetches and targets, for opt to keep.
        let mut opt: Vec<String> =
            vec!["opt".into(), case(file).display().to_string(), "--passes".into(), "default".into()];
        for flag in ["--fetch", "--target"] {
            if let Some(i) = args.iter().position(|a| *a == flag) {
                opt.extend([flag.to_string(), args[i + 1].to_string()]);
            }
        }
        let opt: Vec<&str> = opt.iter().map(String::as_str).collect();
        let (code, optimized, stderr) = autoclust(&opt, &[]);
        assert_eq!(code, 0, "{file}: {stderr}");
        let path = dir.path().join(file);
        std::fs::write(&path, optimized).unwrap();
        for atomic in [false, true] {
            let mut a = args.to_vec();
            if atomic {
                a.push("--atomic-rmw");
            }
            let original = explore(file, &a);
            let rows = explore(path.to_str().unwrap(), &a);
            assert!(!rows.is_empty(), "{file}");
            for r in &rows {
                assert!(
                    original.contains(r),
                    "{file} (atomic {atomic}): optimized outcome {r:?} not among {original:?}"
                );
            }
        }
    }
}
