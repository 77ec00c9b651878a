//! End-to-end tests of `autoclust run` on the small native graphs in
//! `testdata/run/`: feeds, variables, steps, fetch/target, outputs, and
//! errors naming the node.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use autoclust_graph::Tensor;
use autoclust_runtime::tensor_io::{read_safetensors, write_safetensors};

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/run").join(name)
}

fn autoclust(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_autoclust")).args(args).output().expect("the binary runs")
}

fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

#[test]
fn counter_steps_feed_and_json() {
    let g = testdata("counter.graph");
    let dir = tempfile::tempdir().unwrap();
    let vars = dir.path().join("vars.safetensors");
    std::fs::write(&vars, write_safetensors(&[("x".into(), Tensor::scalar_i64(10))]).unwrap()).unwrap();
    let out = autoclust(&[
        "run",
        g.to_str().unwrap(),
        "--no-cluster",
        "--vars",
        vars.to_str().unwrap(),
        "--feed",
        "step=3",
        "--fetch",
        "r",
        "--steps",
        "4",
        "--json",
    ]);
    let v = json(&out);
    assert_eq!(v["fetches"]["r:0"], serde_json::json!({"dtype": "int64", "shape": [], "data": [22]}));
    assert_eq!(v["variables"]["x"]["data"], serde_json::json!([22]));
}

/// A variable outside the default container is shown as `container/name` and takes its
/// `--vars` entry by that name too, in both modes: the variables a run writes can be read back.
#[test]
fn variables_in_a_container_round_trip_by_their_shown_name() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("c.graph");
    std::fs::write(
        &g,
        "x = VarHandleOp() {container = \"box\", dtype = int64, shape = shape[], shared_name = \"x\"}\n\
         y = VarHandleOp() {container = \"\", dtype = int64, shape = shape[], shared_name = \"x\"}\n\
         one = Const() {dtype = int64, value = int64[]{1}}\n\
         inc = AssignAddVariableOp(x, one) {dtype = int64}\n\
         dec = AssignSubVariableOp(y, one) {dtype = int64}\n\
         r = ReadVariableOp(x, ^inc) {dtype = int64}\n",
    )
    .unwrap();
    let vars = dir.path().join("vars.safetensors");
    std::fs::write(
        &vars,
        write_safetensors(&[("box/x".into(), Tensor::scalar_i64(10)), ("x".into(), Tensor::scalar_i64(5))]).unwrap(),
    )
    .unwrap();
    for mode in [Some("--no-cluster"), None] {
        let mut args = vec!["run", g.to_str().unwrap()];
        args.extend(mode);
        args.extend(["--vars", vars.to_str().unwrap(), "--target", "dec", "--fetch", "r", "--json"]);
        let v = json(&autoclust(&args));
        assert_eq!(v["fetches"]["r:0"]["data"], serde_json::json!([11]), "{mode:?}");
        assert_eq!(v["variables"]["box/x"]["data"], serde_json::json!([11]), "{mode:?}");
        assert_eq!(v["variables"]["x"]["data"], serde_json::json!([4]), "{mode:?}");
    }
}

/// `affine.graph`'s variables (`w` = diag(1, −1), `b` = [0.5, 0.5]) written to
/// `dir/v.safetensors`; returns the path.
fn affine_vars(dir: &std::path::Path) -> std::path::PathBuf {
    let vars = dir.join("v.safetensors");
    std::fs::write(
        &vars,
        write_safetensors(&[
            ("w".into(), Tensor::from_f32(vec![2, 2], vec![1.0, 0.0, 0.0, -1.0]).unwrap()),
            ("b".into(), Tensor::from_f32(vec![2], vec![0.5, 0.5]).unwrap()),
        ])
        .unwrap(),
    )
    .unwrap();
    vars
}

#[test]
fn outputs_are_safetensors() {
    let g = testdata("affine.graph");
    let dir = tempfile::tempdir().unwrap();
    let vars = affine_vars(dir.path());
    let feeds = dir.path().join("f.safetensors");
    std::fs::write(
        &feeds,
        write_safetensors(&[("x".into(), Tensor::from_f32(vec![1, 2], vec![2.0, 3.0]).unwrap())]).unwrap(),
    )
    .unwrap();
    let out_file = dir.path().join("out.safetensors");
    let saved = dir.path().join("saved.safetensors");
    let out = autoclust(&[
        "run",
        g.to_str().unwrap(),
        "--no-cluster",
        "--vars",
        vars.to_str().unwrap(),
        "--feeds",
        feeds.to_str().unwrap(),
        "--fetch",
        "relu:0,y",
        "--out",
        out_file.to_str().unwrap(),
        "--save-vars",
        saved.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got = read_safetensors(&std::fs::read(&out_file).unwrap()).unwrap();
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["relu:0", "y:0"]);
    assert_eq!(got[0].1.as_f32().unwrap(), &[2.5, 0.0]);
    assert_eq!(got[1].1.as_f32().unwrap(), &[2.5, -2.5]);
    let saved = read_safetensors(&std::fs::read(&saved).unwrap()).unwrap();
    assert_eq!(saved.len(), 2);
}

#[test]
fn errors_name_the_node_and_write_nothing() {
    let g = testdata("affine.graph");
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("out.safetensors");
    // Uninitialised variable.
    let out = autoclust(&[
        "run",
        g.to_str().unwrap(),
        "--no-cluster",
        "--threads",
        "1",
        "--feed",
        "x=[[1, 2]]",
        "--fetch",
        "relu",
        "--out",
        out_file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("error: node 'rw' (ReadVariableOp): variable 'w' is uninitialised"), "{err}");
    assert!(!out_file.exists(), "a failed run writes no output file");
    // Missing feed.
    let out = autoclust(&["run", g.to_str().unwrap(), "--no-cluster", "--fetch", "relu"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: node 'x': Placeholder needs a feed"));
    // An op without a kernel, only when it must run.
    let out = autoclust(&["run", g.to_str().unwrap(), "--no-cluster", "--feed", "x=[[1, 2]]", "--fetch", "bad"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: node 'bad' (NoSuchOp): no kernel"));
    // Unknown fetch; malformed feed.
    let out = autoclust(&["run", g.to_str().unwrap(), "--fetch", "nope:0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("'nope:0'"));
    let out = autoclust(&["run", g.to_str().unwrap(), "--feed", "x=[[1, 2], [3]]", "--fetch", "rw"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: --feed 'x'"));
}

/// A check whose output only gates the result through a control edge
/// (`tf.debugging.assert_all_finite`) still runs in both modes: the default passes used to
/// drop it as pure, and NaN went through (sweep 62).
#[test]
fn a_check_gating_by_control_edge_fails_the_step() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.graph");
    std::fs::write(
        &g,
        "x = Placeholder() {dtype = float32, shape = shape[3]}\n\
         l = Log(x) {T = float32}\n\
         chk = CheckNumerics(l) {T = float32, message = \"not finite\"}\n\
         k = Const(^chk) {dtype = float32, value = float32[]{2.0}}\n\
         y = Mul(x, k) {T = float32}\n",
    )
    .unwrap();
    for mode in [&[][..], &["--no-cluster"][..]] {
        let mut args = vec!["run", g.to_str().unwrap(), "--feed", "x=[1, -1, 3]", "--fetch", "y"];
        args.extend(mode);
        let out = autoclust(&args);
        assert_eq!(out.status.code(), Some(1), "{mode:?}: {}", String::from_utf8_lossy(&out.stdout));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("error: node 'chk' (CheckNumerics): not finite"), "{mode:?}: {err}");
        // Finite inputs pass.
        let mut args = vec!["run", g.to_str().unwrap(), "--feed", "x=[1, 2, 3]", "--fetch", "y"];
        args.extend(mode);
        let out = autoclust(&args);
        assert!(out.status.success(), "{mode:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

/// A cluster fed a data-dependent shape (a `Where` whose row count changes every step) stops
/// compiling after XLA's megamorphic threshold, says so in a note, and gives the plain
/// executor's result (sweep 62: it compiled on every step, 0.11× the plain executor and its
/// memory growing without bound, in silence).
#[test]
fn a_cluster_whose_shapes_keep_changing_goes_to_the_interpreter_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.graph");
    std::fs::write(
        &g,
        "v = VarHandleOp() {dtype = float32, shape = shape[], shared_name = \"t\"}\n\
         zero = Const() {dtype = float32, value = float32[]{0.0}}\n\
         one = Const() {dtype = float32, value = float32[]{1.0}}\n\
         init = AssignVariableOp(v, zero) {dtype = float32}\n\
         x = Placeholder() {dtype = float32, shape = shape[40]}\n\
         t = ReadVariableOp(v) {dtype = float32}\n\
         m = Greater(x, t) {T = float32}\n\
         w = Where(m) {T = bool}\n\
         g = GatherNd(x, w) {Tparams = float32, Tindices = int64}\n\
         a = Tanh(g) {T = float32}\n\
         b = Mul(a, g) {T = float32}\n\
         ax = Const() {dtype = int32, value = int32[]{0}}\n\
         s = Sum(b, ax) {T = float32, Tidx = int32}\n\
         bump = AssignAddVariableOp(v, one, ^s) {dtype = float32}\n",
    )
    .unwrap();
    let x = format!("x={:?}", (0..40).collect::<Vec<i32>>());
    let args = |steps: &str, mode: &[&'static str]| -> Vec<String> {
        let mut a: Vec<String> = ["run", g.to_str().unwrap(), "--init", "init", "--feed", &x, "--fetch", "s"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(["--target", "bump", "--steps", steps].map(String::from));
        a.extend(mode.iter().map(|s| s.to_string()));
        a
    };
    let run = |a: Vec<String>| autoclust(&a.iter().map(String::as_str).collect::<Vec<_>>());
    // A few steps: each new shape compiles, nothing to say.
    let out = run(args("5", &[]));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    // Thirty: megamorphic after eleven compiles, named once at the end; same result as plain.
    let out = run(args("30", &[]));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    let notes: Vec<&str> = err.lines().filter(|l| l.starts_with("note: ")).collect();
    assert_eq!(notes.len(), 1, "{err}");
    assert!(notes[0].contains("runs in the interpreter") && notes[0].contains("input shapes keep changing"), "{err}");
    let plain = run(args("30", &["--no-cluster"]));
    assert_eq!(String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&plain.stdout));
}

/// Slice bounds drawn from a variable that changes every step (Keras' `RandomCrop`, a random
/// offset from a seed variable): a `Slice` of constant size and a `StridedSlice` whose bounds
/// are a fixed extent apart (`x[o : o + 4, 0:]`, Keras 3's `RandomCrop`) compile once, their
/// starts run-time values (no note in 40 steps); a `StridedSlice` whose extent moves too
/// (`x[o : 2 * o]`) is compiled for each value until XLA's rule calls it megamorphic, then
/// runs in the interpreter with a note (sweep 69: it compiled on every step, for good, its
/// memory growing, in silence). All give the plain executor's results.
#[test]
fn slice_bounds_that_change_every_step_do_not_compile_every_step() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.graph");
    std::fs::write(
        &g,
        "v = VarHandleOp() {dtype = int32, shape = shape[], shared_name = \"off\"}\n\
         w = VarHandleOp() {dtype = float32, shape = shape[4,3], shared_name = \"w\"}\n\
         zero = Const() {dtype = int32, value = int32[]{0}}\n\
         one = Const() {dtype = int32, value = int32[]{1}}\n\
         seven = Const() {dtype = int32, value = int32[]{7}}\n\
         four = Const() {dtype = int32, value = int32[]{4}}\n\
         ws = Const() {dtype = float32, value = float32[4,3]{0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5}}\n\
         init = AssignVariableOp(v, zero) {dtype = int32}\n\
         initw = AssignVariableOp(w, ws) {dtype = float32}\n\
         x = Placeholder() {dtype = float32, shape = shape[10,3]}\n\
         r = ReadVariableOp(v) {dtype = int32}\n\
         o = FloorMod(r, seven) {T = int32}\n\
         begin = Pack(o, zero) {N = 2, T = int32, axis = 0}\n\
         size = Const() {dtype = int32, value = int32[2]{4, 3}}\n\
         sl = Slice(x, begin, size) {Index = int32, T = float32}\n\
         e = AddV2(o, four) {T = int32}\n\
         b2 = Pack(o, zero) {N = 2, T = int32, axis = 0}\n\
         e2 = Pack(e, zero) {N = 2, T = int32, axis = 0}\n\
         st = Const() {dtype = int32, value = int32[2]{1, 1}}\n\
         ss = StridedSlice(x, b2, e2, st) {Index = int32, T = float32, begin_mask = 0, end_mask = 2, ellipsis_mask = 0, new_axis_mask = 0, shrink_axis_mask = 0}\n\
         rw = ReadVariableOp(w) {dtype = float32}\n\
         m = Mul(sl, rw) {T = float32}\n\
         m2 = Mul(ss, rw) {T = float32}\n\
         ax = Const() {dtype = int32, value = int32[2]{0, 1}}\n\
         s = Sum(m, ax) {T = float32, Tidx = int32}\n\
         s2 = Sum(m2, ax) {T = float32, Tidx = int32}\n\
         two = Const() {dtype = int32, value = int32[]{2}}\n\
         e3 = Mul(o, two) {T = int32}\n\
         e3s = Pack(e3, zero) {N = 2, T = int32, axis = 0}\n\
         ss3 = StridedSlice(x, b2, e3s, st) {Index = int32, T = float32, begin_mask = 0, end_mask = 2, ellipsis_mask = 0, new_axis_mask = 0, shrink_axis_mask = 0}\n\
         s3 = Sum(ss3, ax) {T = float32, Tidx = int32}\n\
         lr = Const() {dtype = float32, value = float32[]{0.01}}\n\
         d = Mul(lr, sl) {T = float32}\n\
         upd = AssignSubVariableOp(w, d) {dtype = float32}\n\
         bump = AssignAddVariableOp(v, one, ^r) {dtype = int32}\n",
    )
    .unwrap();
    let rows: Vec<Vec<f32>> = (0..10).map(|r| (0..3).map(|c| (r * 3 + c) as f32 * 0.1).collect()).collect();
    let x = format!("x={rows:?}");
    let run = |fetch: &str, mode: &[&str]| {
        let mut a = vec!["run", g.to_str().unwrap(), "--init", "init,initw", "--feed", &x, "--fetch", fetch];
        a.extend(["--target", "bump,upd", "--steps", "40"]);
        a.extend(mode);
        autoclust(&a)
    };
    let out = run("s", &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&run("s", &["--no-cluster"]).stdout));
    let out = run("s2", &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&run("s2", &["--no-cluster"]).stdout));
    let out = run("s3", &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    let notes: Vec<&str> = err.lines().filter(|l| l.starts_with("note: ")).collect();
    assert_eq!(notes.len(), 1, "{err}");
    assert!(notes[0].contains("runs in the interpreter") && notes[0].contains("constant arguments"), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&run("s3", &["--no-cluster"]).stdout));
}

/// A fixed-extent slice (`x[o : o + 4]`) is compiled for its extent; when the offset runs
/// past the end TensorFlow clamps the slice (fewer rows), which the compiled code's shape
/// check catches: that call runs in the interpreter, gives TensorFlow's answer and says so.
#[test]
fn fixed_extent_slices_past_the_end_are_clamped_as_tensorflow_clamps_them() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.graph");
    std::fs::write(
        &g,
        "v = VarHandleOp() {dtype = int32, shape = shape[], shared_name = \"off\"}\n\
         zero = Const() {dtype = int32, value = int32[]{0}}\n\
         one = Const() {dtype = int32, value = int32[]{1}}\n\
         ten = Const() {dtype = int32, value = int32[]{10}}\n\
         four = Const() {dtype = int32, value = int32[]{4}}\n\
         init = AssignVariableOp(v, zero) {dtype = int32}\n\
         x = Placeholder() {dtype = float32, shape = shape[10,3]}\n\
         r = ReadVariableOp(v) {dtype = int32}\n\
         o = FloorMod(r, ten) {T = int32}\n\
         e = AddV2(o, four) {T = int32}\n\
         b = Pack(o, zero) {N = 2, T = int32, axis = 0}\n\
         e2 = Pack(e, zero) {N = 2, T = int32, axis = 0}\n\
         st = Const() {dtype = int32, value = int32[2]{1, 1}}\n\
         ss = StridedSlice(x, b, e2, st) {Index = int32, T = float32, begin_mask = 0, end_mask = 2, ellipsis_mask = 0, new_axis_mask = 0, shrink_axis_mask = 0}\n\
         sq = Square(ss) {T = float32}\n\
         ax = Const() {dtype = int32, value = int32[2]{0, 1}}\n\
         s = Sum(sq, ax) {T = float32, Tidx = int32}\n\
         bump = AssignAddVariableOp(v, one, ^r) {dtype = int32}\n",
    )
    .unwrap();
    let rows: Vec<Vec<f32>> = (0..10).map(|r| (0..3).map(|c| (r * 3 + c) as f32).collect()).collect();
    let x = format!("x={rows:?}");
    for steps in ["6", "7", "10"] {
        let run = |mode: &[&str]| {
            let mut a = vec!["run", g.to_str().unwrap(), "--init", "init", "--feed", &x, "--fetch", "s"];
            a.extend(["--target", "bump", "--steps", steps]);
            a.extend(mode);
            autoclust(&a)
        };
        let out = run(&[]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let err = String::from_utf8_lossy(&out.stderr);
        if steps == "10" {
            // Offsets 7, 8 and 9 run past the end: said once.
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(
                err.starts_with("note: cluster ") && err.contains("the slice's bounds ran past its input"),
                "{err}"
            );
        } else {
            assert!(err.is_empty(), "{err}");
        }
        assert_eq!(String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&run(&["--no-cluster"]).stdout));
        if steps == "10" {
            // Row 9 alone: 27² + 28² + 29².
            assert!(
                String::from_utf8_lossy(&out.stdout).contains("[2354.0]"),
                "{}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
    }
}

/// TensorFlow's kernels run with subnormals flushed to zero (its pool threads set FTZ/DAZ):
/// `Cast(1e-40 → bool)` is false, `1 / 1e-38` is inf (1e-38 is subnormal in float32) and
/// `1e-20 · 1e-20` is 0 — TensorFlow 2.21's values (sweep 70), in both modes. (A constant
/// folded before the run is left alone, as the process's modes leave it.)
#[test]
fn subnormals_are_flushed_to_zero_as_in_tensorflow() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.graph");
    std::fs::write(
        &g,
        "x = Placeholder() {dtype = float32, shape = shape[5]}\n\
         r = Reciprocal(x) {T = float32}\n\
         b = Cast(x) {SrcT = float32, DstT = bool}\n\
         e = Placeholder() {dtype = float32, shape = shape[]}\n\
         m = Mul(e, e) {T = float32}\n\
         rb = Cast(r) {SrcT = float32, DstT = bool}\n",
    )
    .unwrap();
    for mode in [&[][..], &["--no-cluster"]] {
        let mut a =
            vec!["run", g.to_str().unwrap(), "--feed", "x=[1e-40, -1e-40, 1e-38, 2e-38, 1.0]", "--feed", "e=1e-20"];
        a.extend(["--fetch", "r,b,m", "--json"]);
        a.extend(mode);
        let out = autoclust(&a);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        let f = &json["fetches"];
        assert_eq!(
            f["r:0"]["data"],
            serde_json::json!(["Infinity", "-Infinity", "Infinity", 5e37, 1.0]),
            "{mode:?}: {text}"
        );
        assert_eq!(f["b:0"]["data"], serde_json::json!([false, false, false, true, true]), "{mode:?}: {text}");
        assert_eq!(f["m:0"]["data"], serde_json::json!([0.0]), "{mode:?}: {text}");
    }
    // The explorer computes pure values as a step does.
    let out = autoclust(&[
        "explore",
        g.to_str().unwrap(),
        "--feed",
        "x=[1e-40, -1e-40, 1e-38, 2e-38, 1.0]",
        "--fetch",
        "b",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json(&out);
    assert_eq!(v["outcomes"][0]["fetches"]["b:0"]["data"], serde_json::json!([false, false, false, true, true]), "{v}");
}

#[test]
fn seed_example_respects_control_edges_under_every_schedule() {
    let g = testdata("seed000_simplest.graph");
    let dir = tempfile::tempdir().unwrap();
    let vars = dir.path().join("v.safetensors");
    std::fs::write(
        &vars,
        write_safetensors(&[("X".into(), Tensor::scalar_f32(0.0)), ("Y".into(), Tensor::scalar_f32(0.0))]).unwrap(),
    )
    .unwrap();
    for seed in 0..8 {
        let seed = seed.to_string();
        let out = autoclust(&[
            "run",
            g.to_str().unwrap(),
            "--no-cluster",
            "--vars",
            vars.to_str().unwrap(),
            "--fetch",
            "r0,r1",
            "--target",
            "wy",
            "--schedule-seed",
            &seed,
            "--json",
        ]);
        let v = json(&out);
        let (r0, r1) =
            (v["fetches"]["r0:0"]["data"][0].as_f64().unwrap(), v["fetches"]["r1:0"]["data"][0].as_f64().unwrap());
        assert!(!(r0 == 2.0 && r1 == 0.0), "seed {seed}: r0 == 2 implies r1 == 1");
        assert_eq!(v["variables"]["Y"]["data"][0], 2.0);
    }
}

#[test]
fn with_neither_fetch_nor_target_every_node_runs() {
    let g = testdata("seed000_simplest.graph");
    let out = autoclust(&["run", g.to_str().unwrap(), "--no-cluster", "--threads", "1", "--json"]);
    let v = json(&out);
    assert_eq!(v["variables"]["X"]["data"][0], 1.0);
    assert_eq!(v["variables"]["Y"]["data"][0], 2.0);
}

/// A TensorFlow 1 step whose variables and lookup tables are initialised by ops the program
/// runs first (`init`, `init_all_tables`): `--init` runs them once before the step, in `run`
/// (both modes), `explore` and `verify`, with TensorFlow's results (make_tf1_tables.py).
#[test]
fn init_runs_tf1_initialisers_before_the_step() {
    let g = testdata("tf1_tables.pbtxt");
    let want = expected("tf1_tables");
    let feeds =
        ["--feed", r#"color=["red","blue","pink"]"#, "--feed", "size=[5,9,2]", "--feed", "x=[[1,2],[3,4],[5,6]]"];
    let close = |what: &str, got: &serde_json::Value, want: &serde_json::Value| {
        let (got, want) = (got["data"].as_array().unwrap(), want.as_array().unwrap());
        assert_eq!(got.len(), want.len(), "{what}");
        for (a, b) in got.iter().zip(want) {
            assert!((a.as_f64().unwrap() - b.as_f64().unwrap()).abs() < 1e-5, "{what}: {got:?} != {want:?}");
        }
    };
    let init = ["--init", "init,init_all_tables"];
    for mode in [&[][..], &["--no-cluster"][..]] {
        let base = [&["run", g.to_str().unwrap()][..], &feeds, &init, mode, &["--json"]].concat();
        let v = json(&autoclust(&[&base[..], &["--fetch", "y"]].concat()));
        close("y", &v["fetches"]["y:0"], &want["y"]);
        let v = json(&autoclust(&[&base[..], &["--target", "train"]].concat()));
        close("w", &v["variables"]["w"], &want["w"]);
        close("emb", &v["variables"]["emb"], &want["emb"]);
    }
    let v =
        json(&autoclust(&[&["explore", g.to_str().unwrap()][..], &feeds, &init, &["--fetch", "y", "--json"]].concat()));
    close("explore y", &v["outcomes"][0]["fetches"]["y:0"], &want["y"]);
    let out = autoclust(&[&["verify", g.to_str().unwrap()][..], &feeds, &init, &["--target", "train"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Without the table initialiser: TensorFlow's error, naming the lookup.
    let out = autoclust(&[&["run", g.to_str().unwrap()][..], &feeds, &["--init", "init", "--fetch", "y"]].concat());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && e.contains("LookupTableFindV2") && e.contains("Table not initialized"), "{e}");
    let out = autoclust(&[&["run", g.to_str().unwrap()][..], &feeds, &["--init", "nope", "--fetch", "y"]].concat());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--init 'nope'"));
}

/// TF1 estimator-style steps built with tf.compat.v1.feature_column
/// (make_tf1_feature_columns.py): embedding, indicator, numeric and bucketized columns over
/// vocabulary lists and hash buckets with a row that has no tags; and a wide-and-deep step with
/// linear_model, a weighted identity column, a hashed crossed column and FTRL. Their sparse ops
/// (SparseToDense, SparseFillEmptyRows, SparseReshape, SparseSegment{Mean,SqrtN,Sum} and their
/// gradients, SparseCross) and string gathers run; `y`, `loss` and every variable after one
/// step equal TensorFlow's in both modes; the clustered run compiles every cluster; explore
/// and verify pass.
#[test]
fn tf1_feature_columns_match_tensorflow() {
    let deep = [
        r#"color=[["red"],["pink"],["blue"]]"#,
        r#"tags=[["a","c"],["",""],["d","zz"]]"#,
        "age=[[20],[45],[70]]",
        r#"city=[["paris"],["rome"],["oslo"]]"#,
        "label=[[1],[0],[2]]",
    ];
    check_feature_columns("tf1_feature_columns", &deep, 12);
    let wide = [
        r#"color=[["red"],["pink"],["blue"]]"#,
        r#"city=[["paris"],["rome"],["oslo"]]"#,
        "uid=[[3],[12],[7]]",
        "w=[[0.5],[2],[1]]",
        "age=[[20],[45],[70]]",
        "label=[[1],[0],[1]]",
    ];
    check_feature_columns("tf1_feature_columns_wide", &wide, 27);
}

fn check_feature_columns(name: &str, feeds: &[&str], variables: usize) {
    let g = testdata(&format!("{name}.pbtxt"));
    let want = expected(name);
    let mut feed_args = vec!["--init", "init,init_all_tables"];
    for f in feeds {
        feed_args.extend(["--feed", f]);
    }
    let feeds = &feed_args[..];
    // Relative: Adagrad's accumulators reach 1e6, where one float32 step is 0.06.
    let close = |what: &str, got: &serde_json::Value, want: &serde_json::Value| {
        let got = got["data"].as_array().unwrap_or_else(|| panic!("{name} {what}: {got}"));
        let want: Vec<f64> = match want.as_array() {
            Some(w) => w.iter().map(|x| x.as_f64().unwrap()).collect(),
            None => vec![want.as_f64().unwrap()],
        };
        assert_eq!(got.len(), want.len(), "{name} {what}");
        for (a, b) in got.iter().zip(&want) {
            let a = a.as_f64().unwrap();
            assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0), "{name} {what}: {got:?} != {want:?}");
        }
    };
    for mode in [&[][..], &["--no-cluster"][..]] {
        let base = [&["run", g.to_str().unwrap()][..], feeds, mode, &["--json"]].concat();
        let v = json(&autoclust(&[&base[..], &["--fetch", "y,loss"]].concat()));
        close("y", &v["fetches"]["y:0"], &want["y"]);
        close("loss", &v["fetches"]["loss:0"], &want["loss"]);
        let v = json(&autoclust(&[&base[..], &["--target", "train"]].concat()));
        let vars = want["variables"].as_object().unwrap();
        assert_eq!(vars.len(), variables, "{name}");
        for (var, w) in vars {
            close(var, &v["variables"][var], w);
        }
    }
    let b = json(&autoclust(
        &[&["bench", g.to_str().unwrap()][..], feeds, &["--target", "train", "--json", "--steps", "3"]].concat(),
    ));
    assert_eq!(b["interpreted_clusters"], 0, "{name}: {b}");
    assert!(b["compiled_clusters"].as_u64().unwrap() >= 1, "{name}: {b}");
    let v = json(&autoclust(&[&["explore", g.to_str().unwrap()][..], feeds, &["--fetch", "y", "--json"]].concat()));
    close("explore y", &v["outcomes"][0]["fetches"]["y:0"], &want["y"]);
    let out = autoclust(&[&["verify", g.to_str().unwrap()][..], feeds, &["--target", "train"]].concat());
    assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Runs TF1 fixture `name` in both modes with `feeds`: every fetch, and every variable of
/// `variables` after one `train` step, within `rel` (relative, absolute below 1) of TensorFlow's
/// values in `name.expected.json`, with nothing said on stderr (no fallback).
fn check_against_tensorflow(name: &str, feeds: &[String], fetches: &[&str], variables: &[&str], rel: f64) {
    let g = testdata(&format!("{name}.pbtxt"));
    let want = expected(name);
    let close = |what: &str, got: &serde_json::Value, want: &serde_json::Value| {
        let got = got["data"].as_array().unwrap_or_else(|| panic!("{name} {what}: {got}"));
        let want = want.as_array().unwrap_or_else(|| panic!("{name} {what}: expected {want}"));
        assert_eq!(got.len(), want.len(), "{name} {what}");
        for (a, b) in got.iter().zip(want) {
            let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            assert!((a - b).abs() <= rel * b.abs().max(1.0), "{name} {what}: {got:?} != {want:?}");
        }
    };
    let fetch_list = fetches.join(",");
    for mode in [&[][..], &["--no-cluster"][..]] {
        let mut base = vec!["run", g.to_str().unwrap(), "--init", "init", "--json"];
        for f in feeds {
            base.extend(["--feed", f.as_str()]);
        }
        base.extend_from_slice(mode);
        let out = autoclust(&[&base[..], &["--fetch", &fetch_list]].concat());
        assert!(out.stderr.is_empty(), "{name} {mode:?}: {}", String::from_utf8_lossy(&out.stderr));
        let v = json(&out);
        for k in fetches {
            close(k, &v["fetches"][format!("{k}:0")], &want[*k]);
        }
        let out = autoclust(&[&base[..], &["--target", "train"]].concat());
        assert!(out.stderr.is_empty(), "{name} {mode:?}: {}", String::from_utf8_lossy(&out.stderr));
        let v = json(&out);
        for k in variables {
            close(k, &v["variables"][*k], &want[*k]);
        }
    }
}

/// TensorFlow's values for fixture `name`.
fn expected(name: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(testdata(&format!("{name}.expected.json"))).unwrap()).unwrap()
}

/// The feeds a fixture's expected values record under `"feeds"`, as `--feed` arguments.
fn recorded_feeds(want: &serde_json::Value) -> Vec<String> {
    want["feeds"].as_object().unwrap().iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// The keys of a fixture's expected values that are fetches (not feeds or variables).
fn recorded_fetches<'a>(want: &'a serde_json::Value, variables: &[&str]) -> Vec<&'a str> {
    want.as_object().unwrap().keys().map(String::as_str).filter(|k| *k != "feeds" && !variables.contains(k)).collect()
}

/// TensorFlow's image resampling ops in an inference graph (bicubic with half-pixel centers and
/// align_corners, area, crop_and_resize bilinear and nearest with boxes leaving the image,
/// extract_patches into a patch embedding) and the colour ops (hue, saturation, contrast, HSV
/// round trip): every fetch, and a gain variable after one SGD step through the bicubic and
/// crop gradients (`ResizeBicubicGrad`, `CropAndResizeGradImage`, `CropAndResizeGradBoxes`),
/// within 1e-4 relative of TensorFlow's (pixel values up to 255), in both modes, nothing on
/// stderr.
#[test]
fn tf1_image_resampling_ops_match_tensorflow() {
    let want = expected("tf1_image_ops");
    let fetches = recorded_fetches(&want, &["gain"]);
    assert_eq!(fetches.len(), 11);
    check_against_tensorflow("tf1_image_ops", &recorded_feeds(&want), &fetches, &["gain"], 1e-4);
}

/// A TensorFlow 1 step over tf.linalg (Cholesky, triangular solve, slogdet, inv, solve, det and
/// their gradients), special functions (lgamma, erfinv, digamma, ndtri, inverse hyperbolics) and
/// element-moving ops (depth_to_space, reverse_sequence, dynamic_partition, searchsorted, …):
/// every fetch, and every variable after one step, within 1e-5 of TensorFlow's, in both modes,
/// with nothing said on stderr (no fallback).
#[test]
fn tf1_linalg_special_and_rearrange_ops_match_tensorflow() {
    let want = expected("tf1_linalg_special");
    let variables = ["w", "log_noise", "k", "v"];
    let fetches = recorded_fetches(&want, &variables);
    assert!(fetches.len() > 15, "{fetches:?}");
    check_against_tensorflow("tf1_linalg_special", &recorded_feeds(&want), &fetches, &variables, 1e-5);
}

/// A TF1 step with LRN (and LRNGrad), Roll, Xlogy (and Xdivy in its gradient), and hard and soft
/// non-maximum suppression on the side (make_tf1_lrn_nms.py): the fetches and the variable
/// after one SGD step equal TensorFlow's in both modes.
#[test]
fn tf1_lrn_roll_xlogy_and_nms_match_tensorflow() {
    let want = expected("tf1_lrn_nms");
    let feeds: Vec<String> = ["x", "boxes", "scores"].iter().map(|k| format!("{k}={}", want[*k])).collect();
    let fetches = ["loss", "hard", "valid", "soft", "soft_scores"];
    check_against_tensorflow("tf1_lrn_nms", &feeds, &fetches, &["k"], 1e-5);
}

/// A TF1 step with reflection padding (MirrorPad, MirrorPadGrad), max_pool_with_argmax (and
/// MaxPoolGradWithArgmax), the raw AMSGrad update, a running maximum by ResourceScatterNdMax,
/// unique rows and columns (UniqueV2, UniqueWithCountsV2) and the keyed and V1 string hash
/// buckets (make_tf1_pool_hash.py): every fetch and every variable after one step within 1e-5
/// of TensorFlow's, in both modes, nothing on stderr.
#[test]
fn tf1_argmax_pooling_amsgrad_unique_and_hashes_match_tensorflow() {
    let want = expected("tf1_pool_hash");
    let variables = ["k", "k_m", "k_v", "k_vhat", "best"];
    let fetches = recorded_fetches(&want, &variables);
    assert_eq!(fetches.len(), 9, "{fetches:?}");
    let feeds = recorded_feeds(&want);
    check_against_tensorflow("tf1_pool_hash", &feeds, &fetches, &variables, 1e-5);
    // The explorer models the AMSGrad update and the scatter-max as read-modify-writes of
    // their variables, and the clustered step's outcomes are the original's.
    let g = testdata("tf1_pool_hash.pbtxt");
    let mut args = vec!["verify", g.to_str().unwrap(), "--init", "init", "--target", "train"];
    for f in &feeds {
        args.extend(["--feed", f.as_str()]);
    }
    let out = autoclust(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Runs fixture `name` in both modes with its recorded feeds, fetching every recorded value,
/// and compares with TensorFlow's: strings, integers and shapes exactly, float32 within 1e-5
/// (relative, floor 1); nothing may be printed on stderr.
fn matches_tensorflow_exactly(name: &str, count: usize) {
    let want = expected(name);
    let fetches = recorded_fetches(&want, &[]);
    assert_eq!(fetches.len(), count, "{fetches:?}");
    let feeds = if want.get("feeds").is_some() { recorded_feeds(&want) } else { Vec::new() };
    let g = testdata(&format!("{name}.pbtxt"));
    for mode in [&[][..], &["--no-cluster"][..]] {
        let mut args = vec!["run", g.to_str().unwrap(), "--json"];
        for f in &feeds {
            args.extend(["--feed", f.as_str()]);
        }
        let list = fetches.join(",");
        args.extend(["--fetch", &list]);
        args.extend_from_slice(mode);
        let out = autoclust(&args);
        assert!(out.status.success() && out.stderr.is_empty(), "{mode:?}: {}", String::from_utf8_lossy(&out.stderr));
        let v = json(&out);
        for k in &fetches {
            let (got, w) = (&v["fetches"][format!("{k}:0")], &want[*k]);
            assert_eq!(got["shape"], w["shape"], "{name} {k} {mode:?}");
            assert_eq!(got["dtype"], w["dtype"], "{name} {k} {mode:?}");
            let float = w["dtype"] == "float32";
            let (g, w) = (got["data"].as_array().unwrap(), w["data"].as_array().unwrap());
            assert_eq!(g.len(), w.len(), "{name} {k}");
            for (a, b) in g.iter().zip(w) {
                if float {
                    let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
                    assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0), "{name} {k}: {g:?} != {w:?}");
                } else {
                    assert_eq!(a, b, "{name} {k}: {g:?} != {w:?}");
                }
            }
        }
    }
}

/// The input end of a serving graph (make_tf1_parse_example.py): serialized `tf.train.Example`s
/// parsed by ParseExampleV2 (every kind of feature: fixed-length with and without default, a
/// padded sequence, sparse int64 and string, ragged), by ParseExampleV2 on one scalar, the raw
/// ParseSingleExample and the v1 ParseExample, then a wide model on the features: every fetch
/// is TensorFlow's, in both modes.
#[test]
fn tf1_example_parsing_matches_tensorflow() {
    matches_tensorflow_exactly("tf1_parse_example", 28);
}

/// Character-level text input (make_tf1_unicode.py): UnicodeDecode of fed words into a
/// character embedding, UnicodeDecodeWithOffsets and UnicodeEncode (UTF-8 and UTF-16-BE round
/// trips), malformed bytes replaced or ignored as TensorFlow's ICU converter does, control
/// characters replaced: every fetch is TensorFlow's, in both modes.
#[test]
fn tf1_unicode_ops_match_tensorflow() {
    matches_tensorflow_exactly("tf1_unicode", 14);
}

/// Keras' orthogonal initializer in a TF1 init graph (make_tf1_orthogonal_init.py): a seeded
/// normal sample, its Qr, R's diagonal signs folded into Q. Both variables `init` writes are
/// TensorFlow's within 1e-6, in both modes.
#[test]
fn tf1_orthogonal_initializer_matches_tensorflow() {
    let want = expected("tf1_orthogonal_init");
    let g = testdata("tf1_orthogonal_init.pbtxt");
    for mode in [&[][..], &["--no-cluster"][..]] {
        let out = autoclust(
            &[&["run", g.to_str().unwrap(), "--init", "init", "--target", "init", "--json"][..], mode].concat(),
        );
        assert!(out.status.success() && out.stderr.is_empty(), "{mode:?}: {}", String::from_utf8_lossy(&out.stderr));
        let v = json(&out);
        for k in ["k", "r"] {
            let got = v["variables"][k]["data"].as_array().unwrap();
            let w = want[k].as_array().unwrap();
            assert_eq!(got.len(), w.len(), "{k}");
            for (a, b) in got.iter().zip(w) {
                assert!((a.as_f64().unwrap() - b.as_f64().unwrap()).abs() <= 1e-6, "{k} {mode:?}: {got:?} != {w:?}");
            }
        }
    }
}

/// Antialiased and kernel resizing (make_tf1_scale_translate.py): `tf.image.resize` with
/// `antialias=True` and the lanczos3/lanczos5/gaussian/mitchellcubic methods, every sampling
/// kernel of the raw ScaleAndTranslate with a translation, a uint8 image (a float→uint8 Cast),
/// and a gain variable after one SGD step through ScaleAndTranslateGrad: TensorFlow's values
/// within 1e-5, in both modes.
#[test]
fn tf1_scale_and_translate_match_tensorflow() {
    let want = expected("tf1_scale_translate");
    let fetches = recorded_fetches(&want, &["gain"]);
    assert_eq!(fetches.len(), 11, "{fetches:?}");
    check_against_tensorflow("tf1_scale_translate", &recorded_feeds(&want), &fetches, &["gain"], 1e-5);
}

/// Ragged input pipelines (make_tf1_ragged.py): `tf.ragged.range` (RaggedRange, int and float),
/// `tf.gather` of a ragged batch (RaggedGather) by 1-D and 2-D indices and of a ragged rank 2
/// tensor, made dense and summed: every fetch is TensorFlow's, in both modes.
#[test]
fn tf1_ragged_range_and_gather_match_tensorflow() {
    matches_tensorflow_exactly("tf1_ragged", 13);
}

/// A TF1 session returns a fetched reference variable's value (`sess.run(w)`), and an
/// update op's output as the variable after the update (`sess.run(assign_add(step, 1))`);
/// the rewrite to resource variables must not turn them into handles or missing outputs.
#[test]
fn fetched_reference_variables_give_their_values() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.graph");
    std::fs::write(
        &g,
        "w = VariableV2() {container = \"\", dtype = float32, shape = shape[2], shared_name = \"\"}\n\
         step = VariableV2() {container = \"\", dtype = int64, shape = shape[], shared_name = \"\"}\n\
         one = Const() {dtype = int64, value = int64[]{1}}\n\
         inc = AssignAdd(step, one) {T = int64, use_locking = false}\n\
         r = Identity(w) {T = float32}\n",
    )
    .unwrap();
    let vars = dir.path().join("vars.safetensors");
    let values =
        [("w".into(), Tensor::from_f32(vec![2], vec![1.5, -2.0]).unwrap()), ("step".into(), Tensor::scalar_i64(7))];
    std::fs::write(&vars, write_safetensors(&values).unwrap()).unwrap();
    for mode in [&["--no-cluster"][..], &[]] {
        let mut args =
            vec!["run", g.to_str().unwrap(), "--vars", vars.to_str().unwrap(), "--fetch", "w,inc:0,r", "--json"];
        args.extend(mode);
        let v = json(&autoclust(&args));
        assert_eq!(
            v["fetches"]["w:0"],
            serde_json::json!({"dtype": "float32", "shape": [2], "data": [1.5, -2.0]}),
            "{mode:?}"
        );
        assert_eq!(v["fetches"]["inc:0"], serde_json::json!({"dtype": "int64", "shape": [], "data": [8]}), "{mode:?}");
        assert_eq!(v["fetches"]["r:0"]["data"], serde_json::json!([1.5, -2.0]), "{mode:?}");
        assert_eq!(v["variables"]["step"]["data"], serde_json::json!([8]), "{mode:?}");
    }
}

/// `tf.compat.v1.count_up_to` on a ref variable (`CountUpTo`, rewritten to
/// `ResourceCountUpTo`) and on a resource variable: each step gives the value before the
/// increment, and reaching `limit` is TensorFlow's OutOfRange error naming the node.
#[test]
fn count_up_to_counts_and_stops_at_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.graph");
    std::fs::write(
        &g,
        "n = VariableV2() {container = \"\", dtype = int64, shape = shape[], shared_name = \"\"}\n\
         c = CountUpTo(n) {T = int64, limit = 3}\n\
         r = VarHandleOp() {container = \"\", dtype = int32, shape = shape[], shared_name = \"r\"}\n\
         d = ResourceCountUpTo(r) {T = int32, limit = 2}\n",
    )
    .unwrap();
    let vars = dir.path().join("vars.safetensors");
    let values = [("n".into(), Tensor::scalar_i64(1)), ("r".into(), Tensor::from_i32(vec![], vec![0]).unwrap())];
    std::fs::write(&vars, write_safetensors(&values).unwrap()).unwrap();
    let run = |steps: &str| {
        autoclust(&[
            "run",
            g.to_str().unwrap(),
            "--vars",
            vars.to_str().unwrap(),
            "--fetch",
            "c,d",
            "--steps",
            steps,
            "--json",
        ])
    };
    let v = json(&run("2"));
    assert_eq!((v["fetches"]["c:0"]["data"][0].as_i64(), v["fetches"]["d:0"]["data"][0].as_i64()), (Some(2), Some(1)));
    assert_eq!((v["variables"]["n"]["data"][0].as_i64(), v["variables"]["r"]["data"][0].as_i64()), (Some(3), Some(2)));
    let out = run("3");
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("step 3 of 3") && e.contains("node 'd' (ResourceCountUpTo): Reached limit of 2"), "{e}");
}

/// A `tf.cond` branch updating variables runs its reads, arithmetic and writes as one
/// compiled cluster behind bridges that take the branch's resource arguments — and a caller
/// passing one variable as two of them gets the graph's answer: the write the branch orders
/// last wins (`b` is read first but written after `a`, so a write-back in first-touch order
/// would leave `3 * 2 = 6`).
#[test]
fn branch_updates_run_compiled_behind_bridges_even_when_arguments_alias() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.graph");
    std::fs::write(
        &g,
        r#"w = VarHandleOp() {container = "", dtype = float32, shape = shape[], shared_name = "w"}
p = Placeholder() {dtype = bool, shape = shape[]}
g = Placeholder() {dtype = float32, shape = shape[]}
c = If(p, w, w, g) {Tcond = bool, Tin = [resource, resource, float32], Tout = [], then_branch = @apply, else_branch = @skip}
function apply(a: resource, b: resource, grad: float32) -> () controls (wa, wb) stateful {
  rb = ReadVariableOp(b) {dtype = float32}
  ra = ReadVariableOp(a) {dtype = float32}
  x = Mul(ra:value:0, grad) {T = float32}
  hundred = Const() {dtype = float32, value = float32[]{100.0}}
  y = AddV2(rb:value:0, hundred:output:0) {T = float32}
  wa = AssignVariableOp(a, x:z:0) {dtype = float32}
  wb = AssignVariableOp(b, y:z:0, ^wa) {dtype = float32}
  control_return wa = wa
  control_return wb = wb
}
function skip(a: resource, b: resource, grad: float32) -> () {
}
"#,
    )
    .unwrap();
    let vars = dir.path().join("vars.safetensors");
    std::fs::write(&vars, write_safetensors(&[("w".into(), Tensor::scalar_f32(3.0))]).unwrap()).unwrap();
    let args = |cmd: &'static str, taken: &'static str| {
        vec![
            cmd,
            g.to_str().unwrap(),
            "--vars",
            vars.to_str().unwrap(),
            "--feed",
            taken,
            "--feed",
            "g=2.0",
            "--target",
            "c",
            "--json",
        ]
        .into_iter()
        .map(str::to_string)
        .collect::<Vec<String>>()
    };
    let call = |a: Vec<String>| autoclust(&a.iter().map(String::as_str).collect::<Vec<_>>());
    for mode in [None, Some("--no-cluster")] {
        for (taken, want) in [("p=true", 103.0), ("p=false", 3.0)] {
            let mut a = args("run", taken);
            a.extend(mode.map(str::to_string));
            let v = json(&call(a));
            assert_eq!(v["variables"]["w"]["data"][0].as_f64(), Some(want), "{mode:?} {taken}: {v}");
        }
    }
    let mut a = args("bench", "p=true");
    a.extend(["--steps", "3"].map(str::to_string));
    let out = call(a);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("note:"), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json(&out);
    assert_eq!((v["compiled_clusters"].as_u64(), v["interpreted_clusters"].as_u64()), (Some(1), Some(0)), "{v}");
    assert_eq!(v["clustered_nodes"].as_u64(), Some(7), "{v}");
}

/// An `Assert` inside a cluster (`testdata/cluster/assert_guard.graph`) still checks: a
/// passing step gives the plain executor's values, a failing one its error, in both modes;
/// and the program `compile` writes runs by the graph's own names.
#[test]
fn asserts_in_clusters_check_and_compiled_programs_keep_the_graphs_names() {
    let dir = tempfile::tempdir().unwrap();
    let g = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/cluster/assert_guard.graph");
    let vars = dir.path().join("vars.safetensors");
    let values = [("v".into(), Tensor::scalar_f32(1.0)), ("w".into(), Tensor::scalar_f32(0.0))];
    std::fs::write(&vars, write_safetensors(&values).unwrap()).unwrap();
    let compiled = dir.path().join("compiled.graph");
    let out = autoclust(&["compile", g.to_str().unwrap(), "-o", compiled.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for program in [&g, &compiled] {
        for mode in [None, Some("--no-cluster")] {
            let run = |x: &str| {
                let feed = format!("x={x}");
                let mut args = vec!["run", program.to_str().unwrap(), "--vars", vars.to_str().unwrap()];
                args.extend(["--feed", &feed, "--fetch", "out", "--target", "upd,check2", "--json"]);
                args.extend(mode);
                autoclust(&args)
            };
            let v = json(&run("[1.0, -3.0]"));
            let got = |k: &str| v["variables"][k]["data"][0].as_f64();
            assert_eq!(v["fetches"]["out:0"]["data"][0].as_f64(), Some(8.0), "{program:?} {mode:?}: {v}");
            assert_eq!((got("v"), got("w")), (Some(9.0), Some(3.0)), "{program:?} {mode:?}: {v}");
            let failed = run("[1.0, -30.0]");
            assert_eq!(failed.status.code(), Some(1), "{program:?} {mode:?}");
            let e = String::from_utf8_lossy(&failed.stderr);
            assert!(
                e.contains("node 'check' (Assert): assertion failed: [max too large:] [30]"),
                "{program:?} {mode:?}: {e}"
            );
        }
    }
}

/// A float16 VALID `AvgPool` whose window sum passes the float16 range is infinite, as
/// TensorFlow 2.21 sums the window in float16 (`tf.nn.avg_pool2d` of 5000s over 4×4 gives
/// `inf`, of 1000s `1000`), in the interpreter and in a compiled cluster alike.
#[test]
fn float16_average_pooling_overflows_as_tensorflow_does() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.graph");
    std::fs::write(
        &g,
        r#"x = Placeholder() {dtype = float16, shape = shape[1,4,4,2]}
p = AvgPool(x) {T = float16, data_format = "NHWC", ksize = [1, 4, 4, 1], padding = "VALID", strides = [1, 1, 1, 1]}
q = AvgPool(x) {T = float16, data_format = "NHWC", ksize = [1, 2, 2, 1], padding = "VALID", strides = [1, 2, 2, 1]}
n = Neg(p) {T = float16}
"#,
    )
    .unwrap();
    let row = "[5000.0, 1000.0]";
    let x = format!("x=[[{}]]", vec![format!("[{}]", [row; 4].join(", ")); 4].join(", "));
    for mode in [None, Some("--no-cluster")] {
        let mut args = vec!["run", g.to_str().unwrap(), "--feed", &x, "--fetch", "p,q,n", "--json"];
        args.extend(mode);
        let v = json(&autoclust(&args));
        let f = &v["fetches"];
        assert_eq!(f["p:0"]["data"], serde_json::json!(["Infinity", 1000.0]), "{mode:?}: {v}");
        assert_eq!(f["n:0"]["data"], serde_json::json!(["-Infinity", -1000.0]), "{mode:?}: {v}");
        assert_eq!(f["q:0"]["data"][0].as_f64(), Some(5000.0), "{mode:?}: {v}");
    }
}

/// A half `MaxPool` window holding only NaNs and -inf gives the half type's lowest finite
/// value, where TensorFlow's reducer starts (TensorFlow 2.21: -65504 in float16,
/// -3.3895314e38 in bfloat16), compiled and interpreted alike.
#[test]
fn half_max_pooling_starts_at_the_lowest_finite_value() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.graph");
    std::fs::write(
        &g,
        r#"x = Placeholder() {dtype = float16, shape = shape[1,2,2,1]}
p = MaxPool(x) {T = float16, data_format = "NHWC", ksize = [1, 2, 2, 1], padding = "VALID", strides = [1, 1, 1, 1]}
n = Neg(p) {T = float16}
y = Placeholder() {dtype = bfloat16, shape = shape[1,2,2,1]}
q = MaxPool(y) {T = bfloat16, data_format = "NHWC", ksize = [1, 2, 2, 1], padding = "VALID", strides = [1, 1, 1, 1]}
"#,
    )
    .unwrap();
    let window = r#"[[[["NaN"],["-Infinity"]],[["NaN"],["NaN"]]]]"#;
    let (x, y) = (format!("x={window}"), format!("y={window}"));
    for mode in [None, Some("--no-cluster")] {
        let mut args = vec!["run", g.to_str().unwrap(), "--feed", &x, "--feed", &y, "--fetch", "p,n,q", "--json"];
        args.extend(mode);
        let v = json(&autoclust(&args));
        let f = &v["fetches"];
        assert_eq!(f["p:0"]["data"][0].as_f64(), Some(-65504.0), "{mode:?}: {v}");
        assert_eq!(f["n:0"]["data"][0].as_f64(), Some(65504.0), "{mode:?}: {v}");
        let q = f["q:0"]["data"][0].as_f64().unwrap_or(0.0);
        assert!((q + 3.3895314e38).abs() < 1e31, "{mode:?}: {v}");
    }
}

/// A MirroredStrategy step over two devices: its all-reduce has both peers in the graph and
/// runs as their sum (TensorFlow's answer 24, checked against TensorFlow by `tf_fixtures`);
/// peers paired by their order on their devices but fed different instance keys are an
/// error naming both, in both modes, never a sum of the wrong pair.
#[test]
fn collectives_of_one_process_run_and_mismatched_instance_keys_are_errors() {
    let tf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/tf");
    let g = tf.join("dist_mirrored_allreduce.pbtxt");
    let vars = tf.join("dist_mirrored_allreduce.vars.safetensors");
    for mode in [None, Some("--no-cluster")] {
        let run = |key: &str| {
            let key = format!("Placeholder_1={key}");
            let mut args = vec!["run", g.to_str().unwrap(), "--vars", vars.to_str().unwrap()];
            args.extend([
                "--feed",
                "x=3.0",
                "--feed",
                "Placeholder=100",
                "--feed",
                &key,
                "--fetch",
                "Identity_2",
                "--json",
            ]);
            args.extend(mode);
            autoclust(&args)
        };
        let v = json(&run("100"));
        assert_eq!(v["fetches"]["Identity_2:0"]["data"][0].as_f64(), Some(24.0), "{mode:?}: {v}");
        let failed = run("101");
        assert_eq!(failed.status.code(), Some(1), "{mode:?}");
        let e = String::from_utf8_lossy(&failed.stderr);
        assert!(
            e.contains("collectives CollectiveReduceV2 and CollectiveReduceV2_1 were paired by their order")
                && e.contains("[100] [101]"),
            "{mode:?}: {e}"
        );
    }
}

/// `tf.raw_ops.Save`/`Restore` (V1 checkpoints): `Restore` reads the file TensorFlow's `Save`
/// wrote (its values, and TensorFlow's error for a wrong dtype); `Save` writes one `Restore`
/// reads back. That TensorFlow reads autoclust's file is the entry-for-entry equality that
/// `autoclust-graphdef`'s `tensor_slices` tests check against the same TensorFlow file.
#[test]
fn v1_save_and_restore_round_trip_and_read_tensorflows_file() {
    let dir = tempfile::tempdir().unwrap();
    let tf_file = testdata("../checkpoint/v1_save.ckpt");
    let restore = |file: &str, name: &str, dt: &str| {
        format!(
            "node {{ name: \"path\" op: \"Const\" attr {{ key: \"dtype\" value {{ type: DT_STRING }} }} \
             attr {{ key: \"value\" value {{ tensor {{ dtype: DT_STRING tensor_shape {{ }} string_val: \"{file}\" }} }} }} }}\n\
             node {{ name: \"name\" op: \"Const\" attr {{ key: \"dtype\" value {{ type: DT_STRING }} }} \
             attr {{ key: \"value\" value {{ tensor {{ dtype: DT_STRING tensor_shape {{ }} string_val: \"{name}\" }} }} }} }}\n\
             node {{ name: \"restored\" op: \"Restore\" input: \"path\" input: \"name\" attr {{ key: \"dt\" value {{ type: {dt} }} }} }}\n"
        )
    };
    let g = dir.path().join("restore.pbtxt");
    std::fs::write(&g, restore(tf_file.to_str().unwrap(), "b/c", "DT_INT64")).unwrap();
    let v = json(&autoclust(&["run", g.to_str().unwrap(), "--fetch", "restored", "--json"]));
    assert_eq!(v["fetches"]["restored:0"]["data"], serde_json::json!([7, 8, 9]), "{v}");
    std::fs::write(&g, restore(tf_file.to_str().unwrap(), "b/c", "DT_FLOAT")).unwrap();
    let out = autoclust(&["run", g.to_str().unwrap(), "--fetch", "restored"]);
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("Expected to restore a tensor of type float, got a tensor of type int64 instead"), "{e}");

    let saved = dir.path().join("mine.ckpt");
    let save = format!(
        "node {{ name: \"path\" op: \"Const\" attr {{ key: \"dtype\" value {{ type: DT_STRING }} }} \
         attr {{ key: \"value\" value {{ tensor {{ dtype: DT_STRING tensor_shape {{ }} string_val: \"{}\" }} }} }} }}\n\
         node {{ name: \"names\" op: \"Const\" attr {{ key: \"dtype\" value {{ type: DT_STRING }} }} \
         attr {{ key: \"value\" value {{ tensor {{ dtype: DT_STRING tensor_shape {{ dim {{ size: 1 }} }} string_val: \"w\" }} }} }} }}\n\
         node {{ name: \"x\" op: \"Placeholder\" attr {{ key: \"dtype\" value {{ type: DT_FLOAT }} }} }}\n\
         node {{ name: \"save\" op: \"Save\" input: \"path\" input: \"names\" input: \"x\" \
         attr {{ key: \"T\" value {{ list {{ type: DT_FLOAT }} }} }} }}\n",
        saved.display()
    );
    let s = dir.path().join("save.pbtxt");
    std::fs::write(&s, save).unwrap();
    let out = autoclust(&["run", s.to_str().unwrap(), "--feed", "x=[[1.5, -2.0]]", "--target", "save"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(&g, restore(saved.to_str().unwrap(), "w", "DT_FLOAT")).unwrap();
    let v = json(&autoclust(&["run", g.to_str().unwrap(), "--fetch", "restored", "--json"]));
    assert_eq!(v["fetches"]["restored:0"]["data"], serde_json::json!([1.5, -2.0]), "{v}");
    assert_eq!(v["fetches"]["restored:0"]["shape"], serde_json::json!([1, 2]), "{v}");
}

/// A program compiled for every node (no --fetch/--target) runs a TF1-style `train` alone
/// as the original graph does: the initializer's assignments, which `train` does not need,
/// are not in its clusters (they were, and re-ran at every step: sweep 65).
#[test]
fn a_program_compiled_for_every_node_runs_one_final_node_alone() {
    let dir = tempfile::tempdir().unwrap();
    let g = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/cluster/init_and_train.graph");
    let vars = dir.path().join("vars.safetensors");
    let values = [("v".into(), Tensor::scalar_f32(5.0)), ("w".into(), Tensor::scalar_f32(10.0))];
    std::fs::write(&vars, write_safetensors(&values).unwrap()).unwrap();
    let compiled = dir.path().join("compiled.graph");
    let out = autoclust(&["compile", g.to_str().unwrap(), "-o", compiled.to_str().unwrap(), "--min-cluster-size", "1"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&compiled).unwrap();
    assert!(text.contains("_AutoclustWriteBack"), "nothing was clustered:\n{text}");
    for program in [&g, &compiled] {
        for mode in [None, Some("--no-cluster")] {
            let mut args = vec!["run", program.to_str().unwrap(), "--vars", vars.to_str().unwrap()];
            args.extend(["--target", "train", "--steps", "3", "--json"]);
            args.extend(mode);
            let out = autoclust(&args);
            assert!(out.status.success(), "{program:?} {mode:?}: {}", String::from_utf8_lossy(&out.stderr));
            let v = json(&out);
            let got = |k: &str| v["variables"][k]["data"][0].as_f64();
            assert_eq!((got("v"), got("w")), (Some(40.0), Some(13.0)), "{program:?} {mode:?}: {v}");
        }
    }
}

/// A float32 vector as a `.npy` file (format 1.0).
fn npy_f32(values: &[f32]) -> Vec<u8> {
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}", values.len());
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    values.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    out
}

/// A `.npy` feed goes to the one placeholder the request depends on, whatever other
/// placeholders the graph has; with no request it must be the graph's only one (sweep 65).
#[test]
fn an_npy_feed_goes_to_the_one_placeholder_the_request_needs() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.graph");
    std::fs::write(
        &g,
        "x = Placeholder() {dtype = float32, shape = shape[2]}\ny = Placeholder() {dtype = float32, shape = shape[2]}\n\
         a = Neg(x) {T = float32}\nb = Neg(y) {T = float32}\n",
    )
    .unwrap();
    let npy = dir.path().join("v.npy");
    std::fs::write(&npy, npy_f32(&[1.5, -2.0])).unwrap();
    let (g, npy) = (g.to_str().unwrap(), npy.to_str().unwrap());
    for mode in [None, Some("--no-cluster")] {
        let mut args = vec!["run", g, "--feeds", npy, "--fetch", "b", "--json"];
        args.extend(mode);
        let out = autoclust(&args);
        assert!(out.status.success(), "{mode:?}: {}", String::from_utf8_lossy(&out.stderr));
        let v = json(&out);
        assert_eq!(v["fetches"]["b:0"]["data"], serde_json::json!([-1.5, 2.0]), "{mode:?}: {v}");
    }
    let out = autoclust(&["run", g, "--feeds", npy]);
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.starts_with("error: ") && e.contains("a .npy file feeds one input, but there are 2 (x, y)"), "{e}");
}

/// String feeds too large for `--feed`'s JSON on a command line (Linux caps one argument at
/// 128 KiB: sweep 70) travel as numpy string arrays: `np.save("s.npy", np.array(["ab",
/// "été"]))` writes `<U3` (UTF-32), `np.array([b"x", b"yz"])` `|S2`.
#[test]
fn numpy_string_arrays_feed_string_placeholders() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.graph");
    std::fs::write(
        &g,
        "s = Placeholder() {dtype = string, shape = shape[3]}\n\
         n = StringLength(s) {unit = \"UTF8_CHAR\"}\n",
    )
    .unwrap();
    let npy = |descr: &str, count: usize, data: &[u8]| {
        let header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({count},), }}\n");
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    };
    let utf32: Vec<u8> =
        ["ab\0", "été", "\0\0\0"].iter().flat_map(|w| w.chars().flat_map(|c| (c as u32).to_le_bytes())).collect();
    let cases = [(npy("<U3", 3, &utf32), [2, 3, 0]), (npy("|S2", 3, b"x\0yz\0\0"), [1, 2, 0])];
    for (i, (bytes, want)) in cases.iter().enumerate() {
        let f = dir.path().join(format!("s{i}.npy"));
        std::fs::write(&f, bytes).unwrap();
        for mode in [None, Some("--no-cluster")] {
            let mut args = vec!["run", g.to_str().unwrap(), "--feeds", f.to_str().unwrap(), "--fetch", "n", "--json"];
            args.extend(mode);
            let out = autoclust(&args);
            assert!(out.status.success(), "{mode:?}: {}", String::from_utf8_lossy(&out.stderr));
            assert_eq!(json(&out)["fetches"]["n:0"]["data"], serde_json::json!(want), "{i} {mode:?}");
        }
    }
}

/// `ResourceScatterNd*` join clusters (as TensorFlow's XLA clusters them: sweep 65): encapsulation
/// turns them into the pure `TensorScatter*` on the variable's value, the indices as given.
/// Values as TensorFlow's `tf.compat.v1.scatter_nd_add`/`_update` give them.
#[test]
fn resource_scatter_nd_updates_are_clustered() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.graph");
    std::fs::write(
        &g,
        r#"v = VarHandleOp() {container = "", dtype = float32, shape = shape[4, 3], shared_name = "v"}
idx = Const() {dtype = int32, value = int32[2, 2]{0, 1, 2, 2}}
x = Placeholder() {dtype = float32, shape = shape[2]}
u = Mul(x, x) {T = float32}
s = ResourceScatterNdAdd(v, idx, u) {T = float32, Tindices = int32, use_locking = true}
r = ReadVariableOp(v, ^s) {dtype = float32}
w = ResourceScatterNdUpdate(v, idx, x, ^r) {T = float32, Tindices = int32, use_locking = true}
"#,
    )
    .unwrap();
    let vars = dir.path().join("vars.safetensors");
    let v0 = Tensor::from_f32(vec![4, 3], (0..12).map(|i| i as f32).collect()).unwrap();
    std::fs::write(&vars, write_safetensors(&[("v".into(), v0)]).unwrap()).unwrap();
    let (g, vars) = (g.to_str().unwrap(), vars.to_str().unwrap());
    let base = ["--vars", vars, "--feed", "x=[2,3]", "--fetch", "r", "--target", "w"];
    for mode in [None, Some("--no-cluster")] {
        let mut args = vec!["run", g];
        args.extend(base);
        args.push("--json");
        args.extend(mode);
        let out = autoclust(&args);
        assert!(out.status.success(), "{mode:?}: {}", String::from_utf8_lossy(&out.stderr));
        let v = json(&out);
        let r: Vec<f64> = v["fetches"]["r:0"]["data"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        assert_eq!(r, [0., 5., 2., 3., 4., 5., 6., 7., 17., 9., 10., 11.], "{mode:?}");
        let w: Vec<f64> = v["variables"]["v"]["data"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        assert_eq!(w, [0., 2., 2., 3., 4., 5., 6., 7., 3., 9., 10., 11.], "{mode:?}");
    }
    let mut args = vec!["bench", g];
    args.extend(base);
    args.extend(["--steps", "2", "--json"]);
    let out = autoclust(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let b = json(&out);
    assert_eq!((b["compiled_clusters"].as_u64(), b["interpreted_clusters"].as_u64()), (Some(2), Some(0)), "{b}");
    assert_eq!(b["clustered_nodes"].as_u64(), Some(5), "{b}");
}

/// `tf.sets` (`testdata/run/tf_sets.graph`): DenseToDenseSetOperation on int64 and string rows
/// and SetSize equal TensorFlow 2.21's values in both modes; the set ops stay out of clusters
/// with a reason; mismatched rows are an error naming the node.
#[test]
fn tf_sets_match_tensorflow_and_stay_unclustered() {
    let g = testdata("tf_sets.graph");
    let g = g.to_str().unwrap();
    let feeds = [
        "--feed",
        "a=[[1,2,3,3],[4,5,6,7],[9,9,9,9]]",
        "--feed",
        "b=[[3,1,8],[7,7,0],[1,2,3]]",
        "--feed",
        r#"s1=[["b","a"],["x","x"]]"#,
        "--feed",
        r#"s2=[["a","c"],["","X"]]"#,
    ];
    let fetch = ["--fetch", "inter:0,inter:1,inter:2,size:0,diff_dense:0,su:0,su:1,su:2", "--json"];
    // TensorFlow 2.21: tf.sets.intersection/size/difference (densified with -1)/union.
    let want = serde_json::json!({
        "inter:0": [0, 0, 0, 1, 1, 0], "inter:1": [1, 3, 7], "inter:2": [3, 2], "size:0": [2, 1, 0],
        "diff_dense:0": [2, -1, -1, 4, 5, 6, 9, -1, -1],
        "su:0": [0, 0, 0, 1, 0, 2, 1, 0, 1, 1, 1, 2], "su:1": ["a", "b", "c", "", "X", "x"], "su:2": [2, 3],
    });
    for mode in [&[][..], &["--no-cluster"][..]] {
        let v = json(&autoclust(&[&["run", g][..], &feeds, mode, &fetch].concat()));
        for (k, w) in want.as_object().unwrap() {
            assert_eq!(&v["fetches"][k]["data"], w, "{k} {mode:?}");
        }
        let out = autoclust(
            &[&["run", g, "--feed", "a=[[1,2,3,4]]", "--feed", "b=[[1,2,3],[4,5,6]]", "--fetch", "size"][..], mode]
                .concat(),
        );
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("node 'inter' (DenseToDenseSetOperation): Mismatched shapes [1] vs [2]"), "{err}");
    }
    let out = autoclust(&["cluster", g, "--explain"]);
    let text = String::from_utf8_lossy(&out.stdout);
    for node in ["inter (DenseToDenseSetOperation)", "size (SetSize)", "su (DenseToDenseSetOperation)"] {
        assert!(text.contains(&format!("not compilable: {node}")), "{text}");
    }
}

/// A fetch on the untaken branch of a TF1 `cond` is an error naming that fetch, in both
/// modes and in `bench` (the clustered program fetches an anchor, `_autoclust_fetch_K:0`,
/// which the user never wrote).
#[test]
fn a_dead_fetch_is_named_as_the_user_wrote_it_in_both_modes() {
    let tf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/tf");
    let p = |f: &str| tf.join(f).to_string_lossy().into_owned();
    let (g, feeds, vars) = (p("v1cf_cond.pbtxt"), p("v1cf_cond.feeds.safetensors"), p("v1cf_cond.vars.safetensors"));
    for (cmd, mode) in [("run", None), ("run", Some("--no-cluster")), ("bench", None)] {
        let mut args = vec![cmd, &g, "--feeds", &feeds, "--vars", &vars, "--fetch", "y:0", "--fetch", "cond_1/add:0"];
        if cmd == "bench" {
            args.extend(["--steps", "2"]);
        }
        args.extend(mode);
        let out = autoclust(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{cmd} {mode:?}: {err}");
        assert!(err.contains("'cond_1/add:0'") && err.contains("dead"), "{cmd} {mode:?}: {err}");
        assert!(!err.contains("_autoclust"), "{cmd} {mode:?}: {err}");
    }
}

/// An output path that is not a regular file — a FIFO here, `/dev/null` for a user who wants
/// no output — is written in place: the atomic write's rename would replace the device or
/// FIFO with a regular file (`--out /dev/null` run as root replaced the machine's
/// `/dev/null`).
#[test]
fn a_fifo_or_device_output_is_written_in_place_not_replaced() {
    use std::os::unix::fs::FileTypeExt;
    let g = testdata("affine.graph");
    let dir = tempfile::tempdir().unwrap();
    let vars = affine_vars(dir.path());
    let fifo = dir.path().join("out.safetensors");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let out = autoclust(&[
        "run",
        g.to_str().unwrap(),
        "--vars",
        vars.to_str().unwrap(),
        "--feed",
        "x=[[2.0, 3.0]]",
        "--fetch",
        "y",
        "--out",
        fifo.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Checked before joining: a reader of a FIFO that was replaced would wait forever.
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo(), "the FIFO is still a FIFO");
    let bytes = reader.join().unwrap();
    let got = read_safetensors(&bytes).unwrap();
    assert_eq!(got[0].1.as_f32().unwrap(), &[2.5, -2.5]);
}
