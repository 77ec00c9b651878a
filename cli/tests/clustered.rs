//! The clustered path of `autoclust run` against the plain executor: every
//! TensorFlow fixture (testdata/tf) and every `run` case (testdata/run)
//! gives the same results with and without `--no-cluster` (float32 within
//! 1e-5 relative, integers and bools exactly; for racy fixtures the
//! clustered result must be one of TensorFlow's outcomes, or of the
//! split-read-modify-write outcomes). Also: 4 threads training the
//! clustered MLP on one session, and `bench --json`'s keys.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use autoclust_graph::Tensor;
use autoclust_runtime::tensor_io::{read_safetensors, write_safetensors};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata")
}

type Named = Vec<(String, Tensor)>;

fn close(name: &str, got: &Tensor, want: &Tensor) -> Result<(), String> {
    if got.dtype != want.dtype || got.shape != want.shape {
        return Err(format!("{name}: got {} {:?}, want {} {:?}", got.dtype, got.shape, want.dtype, want.shape));
    }
    let (g, w) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = if got.dtype.is_float() {
            a == b || (a - b).abs() <= 1e-5 * b.abs().max(a.abs()) + 1e-6 || (a.is_nan() && b.is_nan())
        } else {
            a == b
        };
        if !ok {
            return Err(format!("{name}[{i}]: clustered {a}, plain {b}"));
        }
    }
    Ok(())
}

fn same(clustered: &Named, plain: &Named) -> Result<(), String> {
    if clustered.len() != plain.len() {
        return Err(format!("clustered has {} tensors, plain {}", clustered.len(), plain.len()));
    }
    for (name, w) in plain {
        let g = clustered.iter().find(|(n, _)| n == name).ok_or_else(|| format!("'{name}' missing"))?;
        close(name, &g.1, w)?;
    }
    Ok(())
}

/// Runs `autoclust run ARGS [--no-cluster]`; returns (fetches, variables) or stderr.
fn run(args: &[String], plain: bool) -> Result<(Named, Named), String> {
    let tmp = tempfile::tempdir().unwrap();
    let (out, saved) = (tmp.path().join("out.safetensors"), tmp.path().join("vars.safetensors"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_autoclust"));
    cmd.arg("run").args(args);
    if plain {
        cmd.arg("--no-cluster");
    }
    cmd.arg("--out").arg(&out).arg("--save-vars").arg(&saved);
    let res = cmd.output().unwrap();
    if !res.status.success() {
        return Err(String::from_utf8_lossy(&res.stderr).into_owned());
    }
    let read = |p: &Path| read_safetensors(&std::fs::read(p).unwrap()).unwrap();
    Ok((read(&out), read(&saved)))
}

fn manifest_args(m: &serde_json::Value, d: &Path) -> Vec<String> {
    let mut args = vec![d.join(m["graph"].as_str().unwrap()).display().to_string()];
    for (flag, key) in [("--feeds", "feeds"), ("--vars", "vars")] {
        if let Some(f) = m[key].as_str() {
            args.push(flag.into());
            args.push(d.join(f).display().to_string());
        }
    }
    for (flag, key) in [("--fetch", "fetch"), ("--target", "target")] {
        let list: Vec<&str> =
            m[key].as_array().map(|a| a.iter().map(|x| x.as_str().unwrap()).collect()).unwrap_or_default();
        if !list.is_empty() {
            args.push(flag.into());
            args.push(list.join(","));
        }
    }
    args.push("--steps".into());
    args.push(m["steps"].as_u64().unwrap_or(1).to_string());
    args
}

fn is_outcome(o: &serde_json::Value, fetches: &Named, vars: &Named) -> bool {
    let matches = |got: &Named, want: &serde_json::Value| {
        want.as_object().is_some_and(|w| {
            w.iter().all(|(k, v)| {
                let w: Vec<f64> = v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
                got.iter().find(|(n, _)| n == k).is_some_and(|(_, t)| t.to_f64_vec().unwrap() == w)
            })
        })
    };
    matches(fetches, &o["fetches"]) && matches(vars, &o["variables"])
}

fn differential(m: &Path) -> Result<(), String> {
    let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(m).unwrap()).unwrap();
    let args = manifest_args(&manifest, &root().join("tf"));
    let plain = run(&args, true);
    let clustered = run(&args, false);
    let (plain, clustered) = match (plain, clustered) {
        (Err(_), Err(_)) => return Ok(()),
        (Ok(_), Err(e)) => return Err(format!("only the clustered run failed: {e}")),
        (Err(e), Ok(_)) => return Err(format!("only the plain run failed: {e}")),
        (Ok(p), Ok(c)) => (p, c),
    };
    if manifest["racy"].as_bool().unwrap_or(false) {
        let any = ["outcomes", "outcomes_split_rmw"].iter().any(|key| {
            manifest[*key].as_array().is_some_and(|os| os.iter().any(|o| is_outcome(o, &clustered.0, &clustered.1)))
        });
        return if any { Ok(()) } else { Err(format!("clustered result is no allowed outcome: {clustered:?}")) };
    }
    same(&clustered.0, &plain.0).map_err(|e| format!("fetches: {e}"))?;
    same(&clustered.1, &plain.1).map_err(|e| format!("variables: {e}"))
}

#[test]
fn tensorflow_fixtures_same_clustered_and_plain() {
    let mut manifests: Vec<PathBuf> = std::fs::read_dir(root().join("tf"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    manifests.sort();
    assert!(!manifests.is_empty());
    let failures: Vec<String> = manifests
        .iter()
        .filter_map(|m| differential(m).err().map(|e| format!("{}: {e}", m.file_stem().unwrap().to_string_lossy())))
        .collect();
    assert!(failures.is_empty(), "{} of {} differ:\n{}", failures.len(), manifests.len(), failures.join("\n"));
}

#[test]
fn run_cases_same_clustered_and_plain() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, t: &[(&str, Tensor)]| -> String {
        let p = dir.path().join(name);
        let named: Named = t.iter().map(|(n, t)| (n.to_string(), t.clone())).collect();
        std::fs::write(&p, write_safetensors(&named).unwrap()).unwrap();
        p.display().to_string()
    };
    let g = |n: &str| root().join("run").join(n).display().to_string();
    let counter_vars = write("c.safetensors", &[("x", Tensor::scalar_i64(10))]);
    let affine_vars = write(
        "w.safetensors",
        &[
            ("w", Tensor::from_f32(vec![2, 2], vec![1.0, 0.0, 0.0, -1.0]).unwrap()),
            ("b", Tensor::from_f32(vec![2], vec![0.5, 0.5]).unwrap()),
        ],
    );
    let loop_vars = write("l.safetensors", &[("v", Tensor::scalar_f32(0.25))]);
    let affine_feeds = write("f.safetensors", &[("x", Tensor::from_f32(vec![1, 2], vec![2.0, 3.0]).unwrap())]);
    let cases: Vec<Vec<String>> = vec![
        vec![g("counter.graph"), "--vars".into(), counter_vars, "--feed".into(), "step=3".into()]
            .into_iter()
            .chain(["--fetch", "r", "--steps", "4"].map(String::from))
            .collect(),
        vec![g("affine.graph"), "--vars".into(), affine_vars, "--feeds".into(), affine_feeds]
            .into_iter()
            .chain(["--fetch", "relu:0,y,mm"].map(String::from))
            .collect(),
        vec![g("seed000_simplest.graph"), "--target".into(), "wy".into()],
        vec![g("loop_body.graph"), "--vars".into(), loop_vars, "--feed".into(), "n=5".into()]
            .into_iter()
            .chain(["--fetch", "loop:1,loop:0", "--steps", "3"].map(String::from))
            .collect(),
    ];
    for args in &cases {
        let plain = run(args, true).unwrap_or_else(|e| panic!("{args:?}: plain failed: {e}"));
        let clustered = run(args, false).unwrap_or_else(|e| panic!("{args:?}: clustered failed: {e}"));
        same(&clustered.0, &plain.0).unwrap_or_else(|e| panic!("{args:?}: fetches: {e}"));
        same(&clustered.1, &plain.1).unwrap_or_else(|e| panic!("{args:?}: variables: {e}"));
    }
}

#[test]
fn four_threads_train_the_clustered_mlp() {
    use autoclust_passes::cluster::ClusterConfig;
    use autoclust_passes::pipeline::clustered_program;
    use autoclust_runtime::{RunRequest, Session, SessionOptions};
    let d = root().join("tf");
    let full = autoclust_graphdef::parse_pbtxt(&std::fs::read_to_string(d.join("mlp_sgd.pbtxt")).unwrap()).unwrap();
    // The pipeline `run` uses: prune to the training step (the initialisers
    // have no kernels), cluster, anchor `train`, encapsulate.
    let train = full.find("train").unwrap();
    let program = clustered_program(&full, &[], &[], &[train], ClusterConfig::default()).unwrap();
    assert!(!program.clusters.is_empty(), "the MLP step clusters");
    let step = program.target_anchors[0].clone();
    let session = Session::new(Arc::new(program.graph), SessionOptions::default());
    let read = |f: &str| read_safetensors(&std::fs::read(d.join(f)).unwrap()).unwrap();
    for (name, t) in read("mlp_sgd.vars.safetensors") {
        session.set_variable(&name, t).unwrap();
    }
    let feeds = read("mlp_sgd.feeds.safetensors").into_iter().map(|(n, t)| (session.output(&n).unwrap(), t)).collect();
    let request = RunRequest { feeds, fetches: vec![], targets: vec![session.node(&step).unwrap()] };
    let shapes: Vec<(String, Vec<usize>)> =
        session.variables().into_iter().map(|(n, t)| (n, t.shape.clone())).collect();
    let (session, request, shapes) = (&session, &request, &shapes);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(move || {
                for _ in 0..10 {
                    session.run(request).expect("a clustered step runs");
                    for (name, t) in session.variables() {
                        let want = &shapes.iter().find(|(n, _)| *n == name).unwrap().1;
                        assert_eq!(&t.shape, want, "{name} is whole");
                        assert!(t.to_f64_vec().unwrap().iter().all(|x| x.is_finite()), "{name} is finite");
                    }
                }
            });
        }
    });
    let trained = session.variables();
    assert_ne!(trained, read("mlp_sgd.vars.safetensors").into_iter().collect::<Vec<_>>(), "the steps trained");
}

#[test]
fn bench_json_has_the_contract_keys() {
    let d = root().join("tf");
    let res = Command::new(env!("CARGO_BIN_EXE_autoclust"))
        .arg("bench")
        .arg(d.join("mlp_sgd.pbtxt"))
        .arg("--feeds")
        .arg(d.join("mlp_sgd.feeds.safetensors"))
        .arg("--vars")
        .arg(d.join("mlp_sgd.vars.safetensors"))
        .args(["--fetch", "loss:0", "--target", "train", "--steps", "3", "--json"])
        .output()
        .unwrap();
    assert!(res.status.success(), "{}", String::from_utf8_lossy(&res.stderr));
    let v: serde_json::Value = serde_json::from_slice(&res.stdout).unwrap();
    let obj = v.as_object().unwrap();
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "clustered_nodes",
            "clustered_steps_per_s",
            "clusters",
            "compile_ms",
            "compiled_clusters",
            "first_step_ms",
            "interpreted_clusters",
            "speedup",
            "total_nodes",
            "uncalled_clusters",
            "unclustered_steps_per_s"
        ]
    );
    assert!(obj["clustered_nodes"].as_u64() <= obj["total_nodes"].as_u64());
    assert_eq!(
        obj["compiled_clusters"].as_u64().unwrap() + obj["interpreted_clusters"].as_u64().unwrap(),
        obj["clusters"].as_u64().unwrap()
    );
    assert_eq!(obj["uncalled_clusters"], 0);
    for (k, x) in obj {
        let x = x.as_f64().unwrap_or_else(|| panic!("{k} is a number"));
        assert!(x.is_finite() && x >= 0.0, "{k} = {x}");
    }
    assert!(obj["clustered_steps_per_s"].as_f64().unwrap() > 0.0);
    assert!(obj["first_step_ms"].as_f64().unwrap() > 0.0, "{v}");
}

/// Runs `autoclust run` on a native graph in both modes; returns each mode's stderr (empty on success).
/// A cluster in the branch a step never takes (each branch has an op the JIT does not
/// compile, so the `If` stays a node and its branches get clusters of their own) is counted
/// as uncalled, not as compiled or interpreted, and the three counts add up to the clusters
/// (sweep 17: an untaken sparse branch's clusters made the counts look lost).
#[test]
fn bench_counts_the_clusters_of_an_untaken_branch_as_uncalled() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("branches.graph");
    std::fs::write(
        &g,
        "p = Placeholder() {dtype = bool, shape = shape[]}\n\
         x = Placeholder() {dtype = float32, shape = shape[64]}\n\
         r = StatelessIf(p, x) {Tcond = bool, Tin = [float32], Tout = [float32], else_branch = @no, then_branch = @yes}\n\
         y = Identity(r:0) {T = float32}\n\
         function yes(a: float32) -> (b: float32) {\n\
           e = Exp(a) {T = float32}\n\
           m = Mul(e:y:0, a) {T = float32}\n\
           c = CheckNumerics(m:z:0) {T = float32, message = \"yes\"}\n\
           return b = c:output:0\n\
         }\n\
         function no(a: float32) -> (b: float32) {\n\
           n = Neg(a) {T = float32}\n\
           t = Tanh(n:y:0) {T = float32}\n\
           c = CheckNumerics(t:y:0) {T = float32, message = \"no\"}\n\
           return b = c:output:0\n\
         }\n",
    )
    .unwrap();
    let feeds = dir.path().join("f.safetensors");
    std::fs::write(
        &feeds,
        write_safetensors(&[
            ("p".into(), Tensor::from_bool(vec![], vec![true]).unwrap()),
            ("x".into(), Tensor::from_f32(vec![64], vec![0.5; 64]).unwrap()),
        ])
        .unwrap(),
    )
    .unwrap();
    let res = Command::new(env!("CARGO_BIN_EXE_autoclust"))
        .args(["bench", g.to_str().unwrap(), "--feeds", feeds.to_str().unwrap(), "--fetch", "y", "--steps", "3"])
        .arg("--json")
        .output()
        .unwrap();
    assert!(res.status.success(), "{}", String::from_utf8_lossy(&res.stderr));
    let v: serde_json::Value = serde_json::from_slice(&res.stdout).unwrap();
    let n = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"));
    assert!(n("uncalled_clusters") >= 1, "the else branch's cluster never ran: {v}");
    assert!(n("compiled_clusters") >= 1, "the then branch's cluster ran: {v}");
    assert_eq!(n("compiled_clusters") + n("interpreted_clusters") + n("uncalled_clusters"), n("clusters"), "{v}");
}

fn both_modes(graph: &str, args: &[&str]) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.graph");
    std::fs::write(&path, graph).unwrap();
    let run = |plain: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_autoclust"));
        cmd.arg("run").arg(&path).args(args);
        if plain {
            cmd.arg("--no-cluster");
        }
        let res = cmd.output().unwrap();
        if res.status.success() {
            String::new()
        } else {
            String::from_utf8_lossy(&res.stderr).trim().to_string()
        }
    };
    (run(true), run(false))
}

/// `w` (clusterable, validate_shape) writes a [3] value after `a0` (unclusterable: its value has
/// an unknown shape) gave `x` the shape [4]: AssignVariableOp must refuse, in both modes.
const SHAPE_CHANGE: &str = r#"
x = VarHandleOp() {dtype = float32, shape = shape[3], shared_name = "x", container = ""}
p = Placeholder() {dtype = float32, shape = shape[?]}
a0 = AssignVariableOp(x, p) {dtype = float32}
c = Const() {dtype = float32, value = float32[3]{1.0, 2.0, 3.0}}
n = Neg(c) {T = float32}
w = AssignVariableOp(x, n, ^a0) {dtype = float32, validate_shape = true}
"#;

#[test]
fn write_back_refuses_a_shape_change_like_the_plain_executor() {
    let (plain, clustered) = both_modes(SHAPE_CHANGE, &["--feed", "p=[1,2,3,4]", "--target", "w"]);
    let want = "node 'w' (AssignVariableOp): Cannot update variable 'x' with shape [4] using a Tensor with shape \
                [3], shapes must be equal";
    assert_eq!(plain, format!("error: {want}"));
    assert!(clustered.ends_with(want), "clustered: {clustered}");
    // Without validate_shape the write may change the shape, in both modes.
    let free = SHAPE_CHANGE.replace(", validate_shape = true", "");
    assert_eq!(both_modes(&free, &["--feed", "p=[1,2,3,4]", "--target", "w"]), (String::new(), String::new()));
}

const UNINITIALISED: &str = r#"
x = VarHandleOp() {dtype = float32, shape = shape[3], shared_name = "x", container = ""}
r = ReadVariableOp(x) {dtype = float32}
m = Mul(r, r) {T = float32}
n = Neg(m) {T = float32}
"#;

#[test]
fn uninitialised_variable_fails_in_both_modes() {
    let (plain, clustered) = both_modes(UNINITIALISED, &["--fetch", "n"]);
    assert_eq!(plain, "error: node 'r' (ReadVariableOp): variable 'x' is uninitialised");
    assert!(clustered.starts_with("error: node '"), "clustered: {clustered}");
    assert!(clustered.ends_with("variable 'x' is uninitialised"), "clustered: {clustered}");
}

#[test]
fn uninitialised_variable_error_names_the_original_read() {
    let (plain, clustered) = both_modes(UNINITIALISED, &["--fetch", "n"]);
    let want = "node 'r' (ReadVariableOp): variable 'x' is uninitialised";
    assert_eq!(plain, format!("error: {want}"));
    assert!(clustered.ends_with(want), "clustered: {clustered}");
}

/// `AssignAddVariableOp` requires the delta to have the variable's shape (no broadcasting):
/// a [1] delta to a [3] variable fails in both modes with the plain kernel's words, even
/// though the cluster body computes the update with a broadcasting `AddV2`.
const BROADCAST_DELTA: &str = r#"
x = VarHandleOp() {dtype = float32, shape = shape[3], shared_name = "x", container = ""}
p = Placeholder() {dtype = float32, shape = shape[?]}
r = ReadVariableOp(x) {dtype = float32}
d = Mul(p, p) {T = float32}
inc = AssignAddVariableOp(x, d, ^r) {dtype = float32}
"#;

#[test]
fn assign_add_refuses_a_broadcasting_delta_in_both_modes() {
    let args = ["--feed", "p=[2]", "--vars", "", "--target", "inc"];
    let dir = tempfile::tempdir().unwrap();
    let vars = dir.path().join("v.safetensors");
    let x = Tensor::from_f32(vec![3], vec![1.0, 2.0, 3.0]).unwrap();
    std::fs::write(&vars, write_safetensors(&[("x".to_string(), x)]).unwrap()).unwrap();
    let mut args: Vec<&str> = args.to_vec();
    let v = vars.to_str().unwrap();
    args[3] = v;
    let (plain, clustered) = both_modes(BROADCAST_DELTA, &args);
    let want = "node 'inc' (AssignAddVariableOp): Cannot update variable 'x' with shape [3] using a Tensor with \
                shape [1], shapes must be equal";
    assert_eq!(plain, format!("error: {want}"));
    assert!(clustered.ends_with(want), "clustered: {clustered}");
    // A delta of the right shape runs in both modes.
    args[1] = "p=[1,2,3]";
    assert_eq!(both_modes(BROADCAST_DELTA, &args), (String::new(), String::new()));
}

/// Ops with an unknown batch dimension cluster (as in XLA, the cluster is compiled for the
/// shapes it is called with): a `[?, 3]` placeholder feeds a clustered chain, and runs with two
/// batch sizes in one session give the plain executor's numbers, each compiled once.
#[test]
fn dynamic_batch_clusters_and_recompiles_per_shape() {
    use autoclust_graph::Output;
    use autoclust_passes::cluster::ClusterConfig;
    use autoclust_passes::pipeline::clustered_program;
    use autoclust_runtime::cluster_call::CompilerOptions;
    use autoclust_runtime::{Jit, RunRequest, Session, SessionOptions};
    let text = "p = Placeholder() {dtype = float32, shape = shape[?,3]}\n\
                t = Tanh(p) {T = float32}\n\
                e = Exp(t) {T = float32}\n\
                k = Const() {dtype = int32, value = int32[1]{1}}\n\
                s = Sum(e, k) {T = float32, Tidx = int32, keep_dims = false}\n";
    let graph = Arc::new(autoclust_graph::text::parse(text).unwrap());
    let out = |g: &autoclust_graph::Graph, n: &str| Output { node: g.find(n).unwrap(), port: 0 };
    let program =
        clustered_program(&graph, &[out(&graph, "p")], &[out(&graph, "s")], &[], ClusterConfig::default()).unwrap();
    assert_eq!(program.clusters.len(), 1, "the dynamic-shape chain must cluster");
    let cg = Arc::new(program.graph);
    let options = SessionOptions { threads: 1, schedule_seed: None, ..Default::default() };
    let clustered = Session::with_jit(cg.clone(), options.clone(), Jit::new(CompilerOptions::default(), true));
    let plain = Session::new(graph.clone(), options);
    for (i, batch) in [2usize, 5, 2].into_iter().enumerate() {
        let x = Tensor::from_f32(vec![batch, 3], (0..batch * 3).map(|v| v as f32 * 0.1 - 0.4).collect()).unwrap();
        let req = |g: &autoclust_graph::Graph, fetch: &str| RunRequest {
            feeds: vec![(out(g, "p"), x.clone())],
            fetches: vec![out(g, fetch)],
            targets: vec![],
        };
        let want = plain.run(&req(&graph, "s")).unwrap().fetches;
        let got = clustered.run(&req(&cg, &program.fetch_anchors[0])).unwrap().fetches;
        close("s", &got[0], &want[0]).unwrap();
        assert_eq!(got[0].shape, vec![batch]);
        // Batch 2, then 5: two compiles; batch 2 again comes from the cache.
        assert_eq!(clustered.jit().compile_count(), if i == 0 { 1 } else { 2 }, "batch {batch}");
        assert!(!clustered.jit().compile_time().is_zero(), "compiled, not declined");
    }
}

/// TensorFlow 2 function graphs (`tf.function` FuncGraphs: variables captured as resource
/// `Placeholder`s, batch dimension unknown, gradients full of shape arithmetic) cluster whole —
/// the Keras Adam step in two, split where the optimizer's iteration counter is written and
/// then read; the Keras CNN around its convolutions — and run compiled (no call falls back to the interpreter) with TensorFlow's
/// numbers (the variables are named after their placeholders).
#[test]
fn tf2_function_graphs_cluster_whole_and_compile() {
    use autoclust_graph::Output;
    use autoclust_passes::cluster::ClusterConfig;
    use autoclust_passes::pipeline::clustered_program;
    use autoclust_runtime::cluster_call::CompilerOptions;
    use autoclust_runtime::{Jit, RunRequest, Session, SessionOptions};
    let d = root().join("tf");
    // The CNN's Conv2D and MaxPool ops stay outside clusters (the JIT has no lowering for them),
    // so its step is several clusters around them. The attention step's Einsums (and their
    // gradients) compile, as does the `[None, :, :1]` StridedSlice (a new axis).
    for (name, clusters) in [
        ("tf2_linear_step", 1),
        ("tf2_mlp_sgd", 1),
        ("tf2_keras_adam", 2),
        ("tf2_keras_cnn", 0),
        ("tf2_einsum_attention", 2),
    ] {
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(d.join(format!("{name}.json"))).unwrap()).unwrap();
        let graph = autoclust_graphdef::parse_pbtxt(&std::fs::read_to_string(d.join(format!("{name}.pbtxt"))).unwrap())
            .unwrap();
        let read = |f: &str| read_safetensors(&std::fs::read(d.join(f)).unwrap()).unwrap();
        let feeds = read(m["feeds"].as_str().unwrap());
        let out = |g: &autoclust_graph::Graph, n: &str| {
            let (node, port) = n.split_once(':').unwrap_or((n, "0"));
            Output { node: g.find(node).unwrap(), port: port.parse().unwrap() }
        };
        let fetch: Vec<String> =
            m["fetch"].as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_string()).collect();
        let fed: Vec<Output> = feeds.iter().map(|(n, _)| out(&graph, n)).collect();
        let fetches: Vec<Output> = fetch.iter().map(|f| out(&graph, f)).collect();
        let program = clustered_program(&graph, &fed, &fetches, &[], ClusterConfig::default()).unwrap();
        if clusters > 0 {
            assert_eq!(program.clusters.len(), clusters, "{name}: clusters");
        } else {
            assert!(program.clusters.len() >= 2, "{name}: clusters {:?}", program.clusters);
        }
        let cg = Arc::new(program.graph);
        let session =
            Session::with_jit(cg.clone(), SessionOptions::default(), Jit::new(CompilerOptions::default(), true));
        for (v, t) in read(m["vars"].as_str().unwrap()) {
            session.set_variable(&v, t).unwrap();
        }
        let request = RunRequest {
            feeds: feeds.iter().map(|(n, t)| (out(&cg, n), t.clone())).collect(),
            fetches: program.fetch_anchors.iter().map(|a| out(&cg, a)).collect(),
            targets: vec![],
        };
        let mut got = vec![];
        for _ in 0..m["steps"].as_u64().unwrap() {
            got = session.run(&request).unwrap().fetches;
        }
        assert!(session.jit().compile_count() >= 1, "{name}: compiled");
        assert_eq!(session.jit().interpreted_calls(), 0, "{name}: every call ran compiled");
        let want = read(m["expected_fetches"].as_str().unwrap());
        for (f, g) in fetch.iter().zip(&got) {
            let w = &want.iter().find(|(n, _)| n == f).unwrap().1;
            close(&format!("{name} {f}"), g, w).unwrap();
        }
        let want_vars = read(m["expected_vars"].as_str().unwrap());
        for (v, w) in &want_vars {
            let g = session.variables().into_iter().find(|(n, _)| n == v).unwrap().1;
            close(&format!("{name} variable {v}"), &g, w).unwrap();
        }
    }
}

/// A loop body's arithmetic is clustered and compiled (not run op by op, not
/// interpreted): `bench --json` counts the body's clusters as compiled.
#[test]
fn loop_body_clusters_are_compiled() {
    let dir = tempfile::tempdir().unwrap();
    let vars = dir.path().join("v.safetensors");
    std::fs::write(&vars, write_safetensors(&[("v".to_string(), Tensor::scalar_f32(0.25))]).unwrap()).unwrap();
    let res = Command::new(env!("CARGO_BIN_EXE_autoclust"))
        .arg("bench")
        .arg(root().join("run/loop_body.graph"))
        .arg("--vars")
        .arg(&vars)
        .args(["--feed", "n=4", "--fetch", "loop:1", "--steps", "3", "--json"])
        .output()
        .unwrap();
    assert!(res.status.success(), "{}", String::from_utf8_lossy(&res.stderr));
    let v: serde_json::Value = serde_json::from_slice(&res.stdout).unwrap();
    let count = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"));
    assert!(count("clusters") >= 2, "{v}");
    assert_eq!(count("compiled_clusters"), count("clusters"), "{v}");
    assert_eq!(count("interpreted_clusters"), 0, "{v}");
    assert!(count("clustered_nodes") >= 6, "{v}");
}

/// Issue 17: `bench --profile` says where a clustered step's time goes — per compiled
/// function and per plan step (the MLP's GEMMs and fused loops by name), each step's
/// calls per training step, and shares that add up to at most the measured wall time.
#[test]
fn bench_profile_names_the_functions_and_steps_that_took_the_time() {
    let d = root().join("tf");
    let res = Command::new(env!("CARGO_BIN_EXE_autoclust"))
        .arg("bench")
        .arg(d.join("mlp_sgd.pbtxt"))
        .arg("--feeds")
        .arg(d.join("mlp_sgd.feeds.safetensors"))
        .arg("--vars")
        .arg(d.join("mlp_sgd.vars.safetensors"))
        .args(["--fetch", "loss:0", "--target", "train", "--steps", "3", "--json", "--profile"])
        .output()
        .unwrap();
    assert!(res.status.success(), "{}", String::from_utf8_lossy(&res.stderr));
    let v: serde_json::Value = serde_json::from_slice(&res.stdout).unwrap();
    let p = &v["profile"];
    assert_eq!(p["steps"], 3, "{p}");
    let functions = p["functions"].as_array().unwrap();
    assert!(!functions.is_empty(), "{p}");
    assert!(functions.iter().all(|f| f["function"].as_str().unwrap().ends_with("_fn")), "{p}");
    let steps = p["steps_table"].as_array().unwrap();
    assert!(steps.iter().any(|s| s["what"].as_str().unwrap().contains("gemm")), "the MLP's products are listed: {p}");
    assert!(steps.iter().all(|s| s["calls_per_step"].as_f64().unwrap() >= 1.0), "{p}");
    let outermost: f64 = functions.iter().filter(|f| f["nested"] == false).map(|f| f["share"].as_f64().unwrap()).sum();
    assert!(outermost > 0.0 && outermost <= 100.0, "{outermost}");
    assert!(p["compiled_ms_per_step"].as_f64().unwrap() <= p["ms_per_step"].as_f64().unwrap());
    // The text form prints the same tables.
    let res = Command::new(env!("CARGO_BIN_EXE_autoclust"))
        .arg("bench")
        .arg(d.join("mlp_sgd.pbtxt"))
        .arg("--feeds")
        .arg(d.join("mlp_sgd.feeds.safetensors"))
        .arg("--vars")
        .arg(d.join("mlp_sgd.vars.safetensors"))
        .args(["--fetch", "loss:0", "--target", "train", "--steps", "2", "--profile", "--only", "clustered"])
        .output()
        .unwrap();
    assert!(res.status.success(), "{}", String::from_utf8_lossy(&res.stderr));
    let text = String::from_utf8_lossy(&res.stdout);
    assert!(text.contains("profile:     2 clustered steps") && text.contains("in compiled code"), "{text}");
    assert!(text.contains("cluster_") && text.contains("gemm"), "{text}");
}

/// Sweep 71: with loops compiled inside a cluster (a Keras LSTM and GRU step), `bench
/// --profile` said "in compiled code 184%": the loop bodies' steps were added on top of the
/// `While` steps that contain them. The share is the outermost calls' time, the bodies are
/// listed as nested.
#[test]
fn bench_profile_counts_loop_bodies_once() {
    let d = root().join("tf");
    let res = Command::new(env!("CARGO_BIN_EXE_autoclust"))
        .arg("bench")
        .arg(d.join("tf2_keras_lstm_gru.pbtxt"))
        .arg("--feeds")
        .arg(d.join("tf2_keras_lstm_gru.feeds.safetensors"))
        .arg("--vars")
        .arg(d.join("tf2_keras_lstm_gru.vars.safetensors"))
        .args(["--fetch", "Identity:0", "--steps", "3", "--json", "--profile", "--only", "clustered"])
        .output()
        .unwrap();
    assert!(res.status.success(), "{}", String::from_utf8_lossy(&res.stderr));
    let v: serde_json::Value = serde_json::from_slice(&res.stdout).unwrap();
    let p = &v["profile"];
    let functions = p["functions"].as_array().unwrap();
    assert!(functions.iter().any(|f| f["nested"] == true), "the loop bodies are nested: {p}");
    assert!(functions.iter().any(|f| f["nested"] == false), "{p}");
    let compiled = p["compiled_ms_per_step"].as_f64().unwrap();
    assert!(compiled > 0.0 && compiled <= p["ms_per_step"].as_f64().unwrap(), "{p}");
    let outermost: f64 = functions.iter().filter(|f| f["nested"] == false).map(|f| f["share"].as_f64().unwrap()).sum();
    assert!(outermost <= 100.0, "{outermost}: {p}");
}

/// A TF2 `while` loop (a `cond` inside) and its gradient, whose loop-body clusters take the
/// gradient accumulators — TensorLists one element longer (forward, `PushBack`) or shorter
/// (gradient, `PopBack`) every iteration: each body compiles a bounded number of times, not
/// once per iteration, and runs compiled with TensorFlow's numbers (sweep 69: the list's
/// length was in the compile key and its type was read by scanning every element, so a body
/// recompiled every iteration and the step grew as n², 0.18× the plain executor at n = 400).
#[test]
fn loop_bodies_taking_growing_lists_compile_once_not_per_iteration() {
    use autoclust_graph::Output;
    use autoclust_passes::cluster::ClusterConfig;
    use autoclust_passes::pipeline::clustered_program;
    use autoclust_runtime::cluster_call::CompilerOptions;
    use autoclust_runtime::{Jit, RunRequest, Session, SessionOptions};
    let d = root().join("tf2_while_lists");
    let graph =
        Arc::new(autoclust_graphdef::parse_pbtxt(&std::fs::read_to_string(d.join("graph.pbtxt")).unwrap()).unwrap());
    let read = |f: &str| read_safetensors(&std::fs::read(d.join(f)).unwrap()).unwrap();
    let out = |g: &autoclust_graph::Graph, n: &str| {
        let (node, port) = n.split_once(':').unwrap_or((n, "0"));
        Output { node: g.find(node).unwrap(), port: port.parse().unwrap() }
    };
    let feeds = read("feeds.safetensors");
    let fetch = ["Identity:0", "Identity_1:0"];
    let fed: Vec<Output> = feeds.iter().map(|(n, _)| out(&graph, n)).collect();
    let fetches: Vec<Output> = fetch.iter().map(|f| out(&graph, f)).collect();
    let program = clustered_program(&graph, &fed, &fetches, &[], ClusterConfig::default()).unwrap();
    let cg = Arc::new(program.graph);
    let options = SessionOptions { threads: 1, schedule_seed: None, ..Default::default() };
    let clustered = Session::with_jit(cg.clone(), options.clone(), Jit::new(CompilerOptions::default(), true));
    let plain = Session::new(graph.clone(), options);
    for (v, t) in read("vars.safetensors") {
        clustered.set_variable(&v, t.clone()).unwrap();
        plain.set_variable(&v, t).unwrap();
    }
    let request = |g: &autoclust_graph::Graph, n: i32, fetch: &[String]| RunRequest {
        feeds: feeds
            .iter()
            .map(|(name, t)| (out(g, name), if name == "n" { Tensor::scalar_i32(n) } else { t.clone() }))
            .collect(),
        fetches: fetch.iter().map(|f| out(g, f)).collect(),
        targets: vec![],
    };
    let anchors = program.fetch_anchors.clone();
    let names: Vec<String> = fetch.iter().map(|f| f.to_string()).collect();
    // One step at n = 100: TensorFlow's numbers, every call compiled.
    let got = clustered.run(&request(&cg, 100, &anchors)).unwrap().fetches;
    let want = read("exp1.safetensors");
    for (f, g) in fetch.iter().zip(&got) {
        close(f, g, &want.iter().find(|(n, _)| n == f).unwrap().1).unwrap();
    }
    for (v, w) in read("expv1.safetensors") {
        let g = clustered.variables().into_iter().find(|(n, _)| *n == v).unwrap().1;
        close(&v, &g, &w).unwrap();
    }
    assert_eq!(
        clustered.jit().interpreted_calls(),
        0,
        "every call ran compiled: {:?}",
        clustered.jit().function_status()
    );
    let after_100 = clustered.jit().compile_count();
    assert!(after_100 < 40, "{after_100} compiles for 100 iterations: a body compiled per iteration");
    // A longer loop compiles nothing new, and agrees with the plain executor.
    plain.run(&request(&graph, 100, &names)).unwrap();
    let got = clustered.run(&request(&cg, 150, &anchors)).unwrap().fetches;
    let want = plain.run(&request(&graph, 150, &names)).unwrap().fetches;
    for ((f, g), w) in fetch.iter().zip(&got).zip(&want) {
        close(f, g, w).unwrap();
    }
    assert_eq!(clustered.jit().compile_count(), after_100, "n = 150 compiled again");
    assert_eq!(clustered.jit().interpreted_calls(), 0);
}
