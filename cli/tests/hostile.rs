//! Hostile inputs (issue 13): tiny files declaring absurd sizes or ports. Each
//! must give one `error:` line naming the file or node, exit status 1 — not 101
//! (a panic) and not a signal (an abort on a failed allocation) — in both the
//! clustered and the plain (`--no-cluster`) mode.

use std::path::Path;
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_autoclust"))
}

/// Writes `content` as `name` in a fresh directory and runs `args` there (`{}` is the file).
fn run_on(name: &str, content: &str, args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(name), content).unwrap();
    let args: Vec<String> = args.iter().map(|a| a.replace("{}", name)).collect();
    // A 4 GB address-space limit, as the fuzzing that found these used, would make an
    // attempted multi-terabyte allocation abort; the checks must come first anyway.
    bin().current_dir(dir.path()).args(&args).output().unwrap()
}

/// Checks the error contract; returns the error line.
fn refused(what: &str, out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{what}: panic: {stderr}");
    assert_eq!(out.status.code(), Some(1), "{what}: exit status {:?}: {stderr}", out.status);
    assert!(stderr.starts_with("error: "), "{what}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{what}: one line: {stderr}");
    stderr.trim_end().to_string()
}

fn pbtxt_const(dims: &[u64], vals: &str) -> String {
    let dims: String = dims.iter().map(|d| format!("dim {{ size: {d} }} ")).collect();
    format!(
        "node {{ name: \"big\" op: \"Const\" attr {{ key: \"dtype\" value {{ type: DT_FLOAT }} }} \
         attr {{ key: \"value\" value {{ tensor {{ dtype: DT_FLOAT tensor_shape {{ {dims}}} {vals} }} }} }} }}\n"
    )
}

#[test]
fn huge_constants_are_refused_at_load() {
    for (dims, vals) in [
        (vec![1_000_000u64, 1_000_000], "float_val: 1"),
        (vec![1_000_000, 1_000_000], ""),
        (vec![1 << 61], "float_val: 1"),
        (vec![1 << 62, 4], "float_val: 1"),
    ] {
        let g = pbtxt_const(&dims, vals);
        for cmd in ["analyze", "convert", "cluster"] {
            let mut args = vec![cmd, "{}"];
            if cmd == "convert" {
                args.extend(["-o", "out.graph"]);
            }
            let e = refused(&format!("{cmd} {dims:?}"), &run_on("c.pbtxt", &g, &args));
            assert!(e.starts_with("error: c.pbtxt:1:1: node 'big': attribute 'value': a float32 tensor"), "{e}");
        }
    }
    // The limit is the flag's: a 4 KB constant passes by default and is refused under 1 KB.
    let g = pbtxt_const(&[1024], "float_val: 1");
    assert!(run_on("c.pbtxt", &g, &["analyze", "{}"]).status.success());
    let e = refused("1 KB limit", &run_on("c.pbtxt", &g, &["analyze", "{}", "--max-tensor-bytes", "1000"]));
    assert!(e.contains("needs 4096 bytes, more than the limit of 1000 bytes"), "{e}");
}

#[test]
fn huge_binary_constant_names_the_file_and_node() {
    // The same node as a binary GraphDef, made by `convert` from a small instance.
    let dir = tempfile::tempdir().unwrap();
    let small = pbtxt_const(&[4, 4], "float_val: 1");
    std::fs::write(dir.path().join("s.pbtxt"), small).unwrap();
    let out = bin().current_dir(dir.path()).args(["convert", "s.pbtxt", "-o", "s.pb"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Readable under the default budget, refused under a 32-byte one.
    let out = bin().current_dir(dir.path()).args(["analyze", "s.pb", "--max-tensor-bytes", "32"]).output().unwrap();
    let e = refused("binary", &out);
    assert!(e.starts_with("error: s.pb: node 'big': attribute 'value': a float32 tensor of shape [4, 4]"), "{e}");
    assert!(Path::new(&dir.path().join("s.pb")).exists());
}
