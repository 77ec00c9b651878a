//! Issue 14: the graph optimizations reach function bodies (`function_bodies.rs`) and change no
//! result. A While body's constant arithmetic is folded by `opt --passes default`, and `run` gives
//! the same fetches and variables in all four modes (clustered or not × optimized or not).

use std::path::PathBuf;
use std::process::Command;

fn graph() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/run/loop_body_consts.graph")
}

fn autoclust(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_autoclust")).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn loop_body_constants_fold_and_results_stay() {
    let g = graph();
    let g = g.to_str().unwrap();
    let opt = autoclust(&["opt", g, "--passes", "default", "--fetch", "loop:1"]);
    assert!(opt.contains("k = Const() {dtype = float32, value = float32[]{1.5}}"), "{opt}");
    assert!(
        opt.contains("dbl = Mul(s, k:0)") && !opt.contains("two = Const") && !opt.contains("out = Identity"),
        "{opt}"
    );
    assert!(opt.contains("add = AssignAddVariableOp(h, g:0)"), "{opt}");
    let dir = tempfile::tempdir().unwrap();
    let vars = dir.path().join("v.safetensors");
    let v = autoclust_graph::Tensor::scalar_f32(0.25);
    std::fs::write(&vars, autoclust_runtime::tensor_io::write_safetensors(&[("v".to_string(), v)]).unwrap()).unwrap();
    let vars = vars.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut a =
            vec!["run", g, "--vars", vars, "--feed", "n=5", "--fetch", "loop:1,loop:0", "--steps", "3", "--json"];
        a.extend_from_slice(extra);
        autoclust(&a)
    };
    let reference = run(&["--no-cluster", "--no-optimize"]);
    assert!(reference.contains("\"loop:1\""), "{reference}");
    for mode in [&["--no-cluster"][..], &["--no-optimize"][..], &[][..]] {
        assert_eq!(run(mode), reference, "{mode:?}");
    }
}
