//! `autoclust explore` and `autoclust verify` on the seeds' examples in
//! testdata/explore/ (docs/contract.md §4, docs/semantics.md).

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn case(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/explore").join(name)
}

/// Runs autoclust; (exit code, stdout, stderr).
fn autoclust(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_autoclust"));
    cmd.args(args);
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

/// Seed 001: a clustering that ignores the safety analysis puts `a6` and `r0` in one
/// cluster; `verify --clusters` finds v0 == 6 with r0 != 8. Bad cluster files are errors
/// naming the file.
#[test]
fn verify_catches_a_clustering_that_ignores_safety() {
    let path = case("problem.graph");
    let dir = tempfile::tempdir().unwrap();
    let clusters = dir.path().join("clusters.json");
    let write = |json: &str| std::fs::write(&clusters, json).unwrap();
    write(r#"{"clusters": [{"name": "wrong", "nodes": ["a6", "r0"]}]}"#);
    let mut args = vec!["verify", path.to_str().unwrap(), "--clusters", clusters.to_str().unwrap()];
    args.extend_from_slice(PROBLEM);
    let (code, stdout, stderr) = autoclust(&args, &[]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stderr.starts_with("error:"), "{stderr}");
    let outcome = stdout.lines().find(|l| l.starts_with("outcome:")).expect("an outcome line");
    assert!(outcome.contains("v0 = 6 "), "{outcome}");
    assert!(outcome.contains("r0:0 = ") && !outcome.contains("r0:0 = 8 "), "{outcome}");
    assert!(stdout.contains("schedule:") && stdout.contains("snapshot-read [v1]"), "{stdout}");
    // A legal clustering of the same nodes' neighbours passes.
    write(r#"{"clusters": [{"name": "ok", "nodes": ["six", "a6"]}]}"#);
    let (code, stdout, stderr) = autoclust(&args, &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    for (json, says) in [
        (r#"{"clusters": [{"name": "c", "nodes": ["nope"]}]}"#, "no node 'nope' in the graph"),
        (
            r#"{"clusters": [{"name": "c", "nodes": ["a6"]}, {"name": "d", "nodes": ["a6"]}]}"#,
            "node 'a6' is in two clusters",
        ),
        (r#"{"groups": []}"#, "expected {\"clusters\""),
        ("not json", "not JSON"),
    ] {
        write(json);
        let (code, stdout, stderr) = autoclust(&args, &[]);
        assert_eq!(code, 1, "{json}: {stdout}{stderr}");
        assert!(stderr.contains("clusters.json: ") && stderr.contains(says), "{json}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// A clustering given by file that cannot be built — contracting a cluster makes a cycle
/// with a node outside it — is refused naming the cycle, by `verify` and `explore
/// --clustered` alike (sweep 75b: `verify` said "ok" for TensorFlow's own clusters of a Keras
/// step, which are cyclic once Grappler's renamed nodes are gone, and failed internally on a
/// v1 cond).
#[test]
fn a_cyclic_clustering_from_a_file_is_refused_naming_the_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let graph = dir.path().join("g.graph");
    std::fs::write(
        &graph,
        "x = Placeholder() {dtype = float32, shape = shape[2]}\n\
         a = Neg(x) {T = float32}\n\
         b = Abs(a) {T = float32}\n\
         out = Neg(b) {T = float32}\n",
    )
    .unwrap();
    let clusters = dir.path().join("clusters.json");
    std::fs::write(&clusters, r#"{"clusters": [{"name": "c", "nodes": ["a", "out"]}]}"#).unwrap();
    let (g, c) = (graph.to_str().unwrap(), clusters.to_str().unwrap());
    for args in [
        vec!["verify", g, "--feed", "x=[1,2]", "--fetch", "out", "--clusters", c],
        vec!["explore", g, "--clustered", "--feed", "x=[1,2]", "--fetch", "out", "--clusters", c],
    ] {
        let (code, stdout, stderr) = autoclust(&args, &[]);
        assert_eq!(code, 1, "{args:?}: {stdout}{stderr}");
        assert!(
            stderr.contains("clusters.json: the clustering cannot be built")
                && stderr.contains("(cluster 'c' -> node 'b' -> cluster 'c')"),
            "{args:?}: {stderr}"
        );
    }
    // {a, b} is a legal cluster of the same chain.
    std::fs::write(&clusters, r#"{"clusters": [{"name": "c", "nodes": ["a", "b"]}]}"#).unwrap();
    let (code, stdout, stderr) = autoclust(&["verify", g, "--feed", "x=[1,2]", "--fetch", "out", "--clusters", c], &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
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

/// A seeded stateful random op (dropout's `RandomUniform`) takes its first run's values in
/// `explore` and `verify`, the values `run`'s first step draws; an unseeded one is refused
/// by name (its values differ on every run).
#[test]
fn seeded_random_ops_explore_as_run_draws_them() {
    let path = case("seeded_dropout.graph");
    let p = path.to_str().unwrap();
    let args = ["--var", "X=[1,2,3,4]", "--fetch", "u:0,y:0", "--target", "w"];
    let mut all = vec!["explore", p, "--json"];
    all.extend(args);
    let (code, stdout, stderr) = autoclust(&all, &[]);
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let outcomes = v["outcomes"].as_array().unwrap();
    assert_eq!(outcomes.len(), 1, "{stdout}");
    let u = &outcomes[0]["fetches"]["u:0"]["data"];
    let y: Vec<f64> =
        outcomes[0]["fetches"]["y:0"]["data"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    let (code, stdout, stderr) = autoclust(&["run", p, "--fetch", "u:0", "--json"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(&r["fetches"]["u:0"]["data"], u, "{stdout}");
    let u: Vec<f64> = u.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    assert!(u.iter().all(|&x| x > 0.0 && x < 1.0), "{u:?}");
    for (k, (&yk, &uk)) in y.iter().zip(&u).enumerate() {
        assert_eq!(yk as f32, (k as f32 + 1.0) * uk as f32, "y = X · u");
    }
    let mut verify = vec!["verify", p];
    verify.extend(args);
    let (code, stdout, stderr) = autoclust(&verify, &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.starts_with("verify: ok"), "{stdout}");
    // Unseeded: refused, naming the node.
    let dir = tempfile::tempdir().unwrap();
    let unseeded = dir.path().join("g.graph");
    let text = std::fs::read_to_string(&path).unwrap().replace(", seed = 7, seed2 = 3", "");
    std::fs::write(&unseeded, text).unwrap();
    let mut all = vec!["explore", unseeded.to_str().unwrap()];
    all.extend(args);
    let (code, _, stderr) = autoclust(&all, &[]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.starts_with("error:") && stderr.contains("'u'") && stderr.contains("unseeded"), "{stderr}");
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

/// A TensorFlow-made fixture's request (testdata/tf/NAME.json): feeds, vars, fetches, targets.
fn tf_request(name: &str) -> (PathBuf, Vec<String>) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/tf");
    let m: Value = serde_json::from_slice(&std::fs::read(dir.join(format!("{name}.json"))).unwrap()).unwrap();
    let mut args = Vec::new();
    for key in ["feeds", "vars"] {
        if let Some(f) = m[key].as_str() {
            args.extend([format!("--{key}"), dir.join(f).display().to_string()]);
        }
    }
    for key in ["fetch", "target"] {
        let list: Vec<&str> = m[key].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        if !list.is_empty() {
            args.extend([format!("--{key}"), list.join(",")]);
        }
    }
    (dir.join(m["graph"].as_str().unwrap()), args)
}

/// `verify` passes; `explore` (original and `--clustered`) has exactly one outcome, equal
/// to the plain executor's values — the independent oracle: `run --no-cluster
/// --no-optimize`, one step, on the graph as loaded.
fn check_against_the_plain_executor(graph: &std::path::Path, args: &[String]) {
    let label = graph.display().to_string();
    let with = |cmd: &[&str]| -> Vec<String> {
        let mut all: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
        all.insert(1, label.clone());
        all.extend_from_slice(args);
        all
    };
    let call = |all: Vec<String>| {
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        autoclust(&refs, &[])
    };
    let (code, stdout, stderr) = call(with(&["verify"]));
    assert_eq!(code, 0, "{label}: verify: {stdout}{stderr}");
    assert!(stdout.starts_with("verify: ok"), "{label}: {stdout}");
    let (code, stdout, stderr) = call(with(&["run", "--no-cluster", "--no-optimize", "--json"]));
    assert_eq!(code, 0, "{label}: run: {stderr}");
    let plain: Value = serde_json::from_str(&stdout).unwrap();
    for clustered in [false, true] {
        let mut cmd = vec!["explore", "--json"];
        if clustered {
            cmd.push("--clustered");
        }
        let (code, stdout, stderr) = call(with(&cmd));
        assert_eq!(code, 0, "{label}: explore: {stderr}");
        let v: Value = serde_json::from_str(&stdout).unwrap();
        let outcomes = v["outcomes"].as_array().unwrap();
        assert_eq!(outcomes.len(), 1, "{label} (clustered {clustered}): {stdout}");
        for key in ["fetches", "variables"] {
            assert_eq!(outcomes[0][key], plain[key], "{label} (clustered {clustered}): {key}");
        }
    }
}

/// Issue 15 item 3: the TensorFlow-made v1 control-flow fixtures (cond, gradients through a
/// cond, while, nested while, a while loop updating a variable each iteration, gradients
/// through a while loop — its stacks —, `map_fn` and a `dynamic_rnn` training step — their
/// tensor arrays —, a loop over reference variables) explore and verify over their operation
/// instances, with the plain executor's numbers.
#[test]
fn v1_control_flow_fixtures_verify_and_match_the_plain_executor() {
    for name in [
        "v1cf_cond",
        "v1cf_grad_cond",
        "v1cf_while",
        "v1cf_nested_while",
        "v1cf_while_var",
        "v1cf_grad_while",
        "v1cf_map_fn",
        "v1cf_dynamic_rnn",
        "v1cf_ref_loop",
    ] {
        let (graph, args) = tf_request(name);
        check_against_the_plain_executor(&graph, &args);
    }
}

/// The frame-executor cases of testdata/run (a cluster on an untaken branch, a dead control
/// edge, an Enter only iteration 0 sees), with their RUN lines' inputs.
#[test]
fn v1_run_cases_verify_and_match_the_plain_executor() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/run");
    let cases: [(&str, &[&str]); 4] = [
        ("v1_dead_cluster_call.graph", &["--feed", "x=[0.5,1.0]", "--feed", "p=false", "--fetch", "m:0,after2:0"]),
        ("v1_dead_cluster_call_true.graph", &["--feed", "x=[0.5,1.0]", "--feed", "p=true", "--fetch", "m:0,after2:0"]),
        ("v1_dead_cluster_control_edge.graph", &["--feed", "x=[0.5,1.0]", "--feed", "p=false", "--fetch", "m:0"]),
        ("v1_first_iteration_enter.graph", &["--feed", "x=2.0", "--fetch", "y:0", "--target", "done"]),
    ];
    for (file, args) in cases {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        check_against_the_plain_executor(&dir.join(file), &args);
    }
}

/// Tensor arrays split and concatenated (no TensorFlow fixture has them): as the plain
/// executor runs them.
#[test]
fn tensor_array_split_and_concat_match_the_plain_executor() {
    let args: Vec<String> = ["--fetch", "c:0,c:1,r1:0"].iter().map(|s| s.to_string()).collect();
    check_against_the_plain_executor(&case("v1_tensor_array_split_concat.graph"), &args);
}

/// `--max-iterations`: a loop past it is an error naming the frame; at it, the answer.
#[test]
fn max_iterations_bounds_loops_with_a_clear_error() {
    let (graph, args) = tf_request("v1cf_while");
    let run_with = |bound: &str| {
        let mut all = vec!["explore".to_string(), graph.display().to_string(), "--max-iterations".into(), bound.into()];
        all.extend(args.iter().cloned());
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        autoclust(&refs, &[])
    };
    // The fixture's loop runs 7 iterations (i_out = 7).
    let (code, _, stderr) = run_with("6");
    assert_eq!(code, 1);
    assert!(
        stderr.contains("loop frame 'while/while_context' runs more than --max-iterations 6 iterations")
            && stderr.contains("raise --max-iterations"),
        "{stderr}"
    );
    let (code, stdout, stderr) = run_with("7");
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("i_out:0 = 7 (int32)"), "{stdout}");
    let (code, _, stderr) = run_with("0");
    assert_eq!(code, 2, "{stderr}");
}

/// A pure functional loop (`StatelessWhile`), in the plain program and inside a cluster (the
/// clusterer admits it, the JIT compiles it): explore evaluates it with the runtime, both
/// programs have the one outcome `v = (2 tanh)³(0.3)`, and verify holds.
#[test]
fn pure_loops_are_explored_and_verified() {
    let want = (0..3).fold(0.3f64, |y, _| 2.0 * y.tanh());
    for clustered in [false, true] {
        let mut args = vec!["--var", "v=0.3", "--target", "w"];
        if clustered {
            args.push("--clustered");
        }
        let rows = explore("pure_loop.graph", &args);
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert!((get(&rows[0], "v") - want).abs() < 1e-5, "{rows:?}");
    }
    let path = case("pure_loop.graph");
    let (code, stdout, stderr) = autoclust(&["verify", path.to_str().unwrap(), "--var", "v=0.3", "--target", "w"], &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.starts_with("verify: ok"), "{stdout}");
    let (_, out, _) = autoclust(&["cluster", path.to_str().unwrap()], &[]);
    assert!(out.lines().next().unwrap().contains("loop"), "the loop is clustered: {out}");
}

/// TensorFlow 2 function graphs capture their variables as resource `Placeholder`s (no
/// `VarHandleOp`): `verify` and `explore` resolve them as `run` does (named after the node),
/// so TF2/Keras steps explore and verify, with the plain executor's numbers — the Keras LSTM
/// step and a `tf.while_loop` over TensorArrays included, whose loops read a variable every
/// iteration (explored with the read before the loop, `hoist-loop-reads`).
#[test]
fn tf2_function_graphs_with_captured_variables_verify_and_match_the_plain_executor() {
    for name in ["tf2_mlp_sgd", "keras_mlp_inference", "keras_lstm_classifier", "tf2_tensor_array"] {
        let (graph, args) = tf_request(name);
        check_against_the_plain_executor(&graph, &args);
    }
}

/// The TensorFlow 1 optimizers' fused updates (`ResourceApply*` — several variables read
/// and written at once — and `ResourceSparseApply*`), the embedding lookups and their
/// sparse updates (`ResourceGather`, `ResourceScatterAdd`/`Sub`) and the Keras optimizers
/// that update slots by scatters: `explore` models them with the interpreter's kernels, so
/// these training steps verify and explore to exactly the plain executor's values.
#[test]
fn tf1_optimizer_and_embedding_steps_verify_and_match_the_plain_executor() {
    for name in [
        "mlp_opt_adadelta",
        "mlp_opt_adagrad",
        "mlp_opt_adagrad_da",
        "mlp_opt_adam",
        "mlp_opt_ftrl",
        "mlp_opt_ftrl_v2",
        "mlp_opt_momentum",
        "mlp_opt_momentum_nesterov",
        "mlp_opt_proximal_adagrad",
        "mlp_opt_proximal_sgd",
        "mlp_opt_rmsprop",
        "mlp_opt_rmsprop_centered",
        "mlp_raw_opts",
        "ref_mlp_momentum",
        "cnn_strided",
        "embedding",
        "embedding_int64",
        "embedding_adagrad",
        "embedding_adagrad_da",
        "embedding_adam",
        "embedding_ftrl",
        "embedding_momentum",
        "embedding_raw_sparse",
        "embedding_rmsprop",
        "keras_wide_deep",
        "keras_gru_rmsprop",
        "tf2_bn_depthwise_ftrl",
        "tf2_gather_scatter_nd",
    ] {
        let (graph, args) = tf_request(name);
        check_against_the_plain_executor(&graph, &args);
    }
}

/// `array_ops` scatters into one table three times (`ResourceScatterNdAdd`/`Sub`/`Update`,
/// unordered): the executor's atomic read-modify-writes give one outcome, the plain
/// executor's; seed 000's split model adds the lost updates (three outcomes, the
/// executor's among them); `verify` holds. Clustered, the scatters share clusters (each
/// cluster's reads and writes atomic): fewer outcomes, each one of the original's.
#[test]
fn racing_scatters_have_the_executors_outcome_and_the_split_models_lost_updates() {
    let (graph, args) = tf_request("array_ops");
    let call = |cmd: &[&str]| {
        let mut all: Vec<String> = vec![cmd[0].to_string(), graph.display().to_string()];
        all.extend(cmd[1..].iter().map(|s| s.to_string()));
        all.extend(args.iter().cloned());
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        let (code, stdout, stderr) = autoclust(&refs, &[]);
        assert_eq!(code, 0, "{cmd:?}: {stdout}{stderr}");
        stdout
    };
    assert!(call(&["verify"]).starts_with("verify: ok"));
    let plain: Value = serde_json::from_str(&call(&["run", "--no-cluster", "--no-optimize", "--json"])).unwrap();
    let outcomes = |extra: &[&str]| -> Vec<Value> {
        let mut cmd = vec!["explore", "--json"];
        cmd.extend_from_slice(extra);
        let v: Value = serde_json::from_str(&call(&cmd)).unwrap();
        v["outcomes"].as_array().unwrap().clone()
    };
    let is_plain = |o: &Value| o["fetches"] == plain["fetches"] && o["variables"] == plain["variables"];
    let atomic = outcomes(&["--atomic-rmw"]);
    assert_eq!(atomic.len(), 1);
    assert!(is_plain(&atomic[0]));
    let split = outcomes(&[]);
    assert_eq!(split.len(), 3);
    assert!(split.iter().any(is_plain));
    let clustered = outcomes(&["--clustered"]);
    assert!(!clustered.is_empty() && clustered.len() < split.len(), "{clustered:?}");
    assert!(clustered.iter().all(|o| split.contains(o)), "{clustered:?}");
    assert!(clustered.iter().any(is_plain), "{clustered:?}");
}

/// TensorFlow 1 graphs calling `tf.function`s that read and write the variables they are
/// passed (`StatefulPartitionedCall`, nested calls, a legacy `Defun` called by name): the
/// calls are inlined as `run` inlines them, so these steps verify and explore to the plain
/// executor's values (which runs the calls op by op, uninlined).
#[test]
fn graphs_calling_functions_on_variables_verify_and_match_the_plain_executor() {
    for name in ["function_calls", "calls_nested", "calls_train_step"] {
        let (graph, args) = tf_request(name);
        check_against_the_plain_executor(&graph, &args);
    }
}

/// Issue 20 item 5: functional control flow whose bodies write variables — `tf.cond` and
/// `tf.while_loop` in a TF2 function graph (`If`, `While` over captured variables) and in a
/// `tf.function` called from a TF1 graph (an `If`, a `StatelessIf`, a `While` adding to a
/// variable each iteration, a `StatelessWhile`): explore and verify lower them to TensorFlow
/// 1 control flow (`lower-control-flow`) and reach the plain executor's values, which runs
/// them as functional ops.
#[test]
fn functional_control_flow_on_variables_verifies_and_matches_the_plain_executor() {
    for name in ["tf2_control_flow", "calls_cond_while"] {
        let (graph, args) = tf_request(name);
        check_against_the_plain_executor(&graph, &args);
    }
}

/// `opt --passes inline,lower-control-flow` changes no result: the lowered graph runs in the
/// plain executor (its frame-aware path) to exactly the fetches and variables of the
/// functional one — on the TensorFlow fixtures and the hand cases of
/// testdata/lower-control-flow (both branches of an If, a Case's in- and out-of-range
/// indices, a loop writing a variable, an If and a call nested in a loop).
#[test]
fn lowered_graphs_run_like_the_originals() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let hand = root.join("testdata/lower-control-flow");
    let strings = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let dir = tempfile::tempdir().unwrap();
    // `run` takes variables from a file: safetensors with one int32 scalar `v`.
    let var_file = |value: i32| {
        let header = br#"{"v":{"dtype":"I32","shape":[],"data_offsets":[0,4]}}"#;
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header);
        bytes.extend_from_slice(&value.to_le_bytes());
        let path = dir.path().join(format!("v{value}.safetensors"));
        std::fs::write(&path, bytes).unwrap();
        path.display().to_string()
    };
    let (v1, v10) = (var_file(1), var_file(10));
    let mut cases: Vec<(PathBuf, Vec<String>)> = Vec::new();
    for name in ["tf2_control_flow", "calls_cond_while", "tf2_pure_loops", "tf2_keras_lstm_gru"] {
        cases.push(tf_request(name));
    }
    for p in ["true", "false"] {
        let feed = format!("p={p}");
        let args = ["--vars", v1.as_str(), "--feed", feed.as_str(), "--fetch", "c:0,after:0"];
        cases.push((hand.join("if_on_variable.graph"), strings(&args)));
    }
    for i in ["0", "1", "2", "7", "-1"] {
        let feed = format!("i={i}");
        let args = ["--vars", v1.as_str(), "--feed", feed.as_str(), "--fetch", "c:0"];
        cases.push((hand.join("case_chain.graph"), strings(&args)));
    }
    cases.push((hand.join("while_on_variable.graph"), strings(&["--vars", v10.as_str(), "--fetch", "loop:0,after:0"])));
    cases.push((hand.join("nested.graph"), strings(&["--vars", v10.as_str(), "--fetch", "loop:0,top:0"])));
    for (k, (graph, args)) in cases.iter().enumerate() {
        let label = graph.display().to_string();
        let (code, lowered, stderr) =
            autoclust(&["opt", graph.to_str().unwrap(), "--passes", "inline,lower-control-flow"], &[]);
        assert_eq!(code, 0, "{label}: opt: {stderr}");
        let top_level = |text: &str| {
            text.lines()
                .filter(|l| !l.starts_with(' ') && !l.starts_with('#'))
                .filter(|l| {
                    ["= If(", "= StatelessIf(", "= While(", "= StatelessWhile(", "= Case("]
                        .iter()
                        .any(|op| l.contains(op))
                })
                .count()
        };
        assert_eq!(top_level(&lowered), 0, "{label}: functional control flow left:\n{lowered}");
        let path = dir.path().join(format!("lowered_{k}.graph"));
        std::fs::write(&path, lowered).unwrap();
        let run = |g: &str| {
            let mut all = vec!["run", g, "--no-cluster", "--no-optimize", "--json"];
            all.extend(args.iter().map(String::as_str));
            let (code, stdout, stderr) = autoclust(&all, &[]);
            assert_eq!(code, 0, "{label} ({g}): run: {stderr}");
            stdout
        };
        assert_eq!(run(path.to_str().unwrap()), run(graph.to_str().unwrap()), "{label} {args:?}");
    }
}
