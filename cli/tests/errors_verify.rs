//! Bad graphs that parse but break an op's signature: wrong arity and wrong
//! dtype (an input against the op's attribute, or an attribute against all its inputs)
//! give one `error:` line naming the node, exit 1, and no panic, both
//! in a command that only analyses (`cluster`, which verifies first and names
//! file:line) and in one that executes (`run`).

use std::path::PathBuf;
use std::process::Command;

fn case(name: &str, body: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("autoclust-errors-verify-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path
}

fn fails(cmd: &str, path: &PathBuf, needle: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_autoclust")).arg(cmd).arg(path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{cmd}: {stderr}");
    let first = stderr.lines().next().unwrap_or_default();
    assert!(first.starts_with("error:"), "{cmd}: {stderr}");
    assert!(first.contains(needle), "{cmd}: expected '{needle}' in: {first}");
    assert!(!stderr.contains("panicked"), "{cmd}: {stderr}");
}

/// Removes a case's file, and its directory once the last case is gone.
fn done(path: &PathBuf) {
    let _ = std::fs::remove_file(path);
    if let Some(dir) = path.parent() {
        let _ = std::fs::remove_dir(dir); // fails while the other test's file is still there
    }
}

const ARITY: &str = "a = Const() {dtype = float32, value = float32[]{1.0}}\nb = AddV2(a) {T = float32}\n";
const DTYPE: &str = "a = Const() {dtype = float32, value = float32[]{1.0}}\n\
i = Const() {dtype = int32, value = int32[]{1}}\n\
b = AddV2(a, i) {T = float32}\n";

#[test]
fn wrong_arity_is_reported_with_its_line() {
    let p = case("arity.graph", ARITY);
    fails("cluster", &p, "arity.graph: 2:1: node 'b'");
    fails("run", &p, "node 'b'");
    done(&p);
}

#[test]
fn wrong_dtype_is_reported_with_its_line() {
    let p = case("dtype.graph", DTYPE);
    fails("cluster", &p, "dtype.graph: 3:1: node 'b'");
    fails("run", &p, "node 'b'");
    fails("run", &p, "int32");
    done(&p);
}

/// Attributes that contradict every input (`T = int32` on float32 operands): the plain
/// executor's kernel would run on the values it is given and a cluster typed by the attribute
/// would not, so both modes refuse the graph at load, as TensorFlow refuses it at import.
const CONTRADICTED: &str = "a = Const() {dtype = float32, value = float32[2]{1.0, -2.0}}\n\
b = Neg(a) {T = int32}\n";

#[test]
fn attributes_contradicting_the_inputs_are_refused_in_both_modes() {
    let p = case("contradicted.graph", CONTRADICTED);
    for mode in [None, Some("--no-cluster")] {
        let out = Command::new(env!("CARGO_BIN_EXE_autoclust"))
            .args(["run", p.to_str().unwrap(), "--fetch", "b:0"])
            .args(mode)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{mode:?}: {stderr}");
        assert!(
            stderr.starts_with("error:")
                && stderr.contains("2:1: node 'b': input 0 of Neg must be int32, got float32 from 'a'"),
            "{mode:?}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{mode:?}: no partial output");
    }
    done(&p);
}

/// A `Const` whose value is not of its declared dtype, and a type attribute set to an integer:
/// TensorFlow refuses both at import. They were declined by inference alone ("running
/// unoptimized") and the plain executor printed an int32 tensor for a float32 node (sweep 73).
#[test]
fn malformed_attributes_are_refused_at_load_in_both_modes() {
    let cases = [
        (
            "const_dtype.graph",
            "c = Const() {dtype = float32, value = int32[2]{1, 1}}\n",
            "c:0",
            "1:1: node 'c': attribute 'value' of Const has dtype int32 but the node's dtype is float32",
        ),
        (
            "attr_kind.graph",
            "x = Const() {dtype = int32, value = int32[2]{1, 2}}\ny = AddV2(x, x) {T = 3}\n",
            "y:0",
            "2:1: node 'y': attribute 'T' of AddV2 must be a type",
        ),
    ];
    for (name, body, fetch, needle) in cases {
        let p = case(name, body);
        for mode in [None, Some("--no-cluster")] {
            let out = Command::new(env!("CARGO_BIN_EXE_autoclust"))
                .args(["run", p.to_str().unwrap(), "--fetch", fetch])
                .args(mode)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{name} {mode:?}: {stderr}");
            assert!(stderr.starts_with("error:") && stderr.contains(needle), "{name} {mode:?}: {stderr}");
            assert!(out.stdout.is_empty(), "{name} {mode:?}: no partial output");
        }
        done(&p);
    }
}
