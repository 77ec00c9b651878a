//! Bad graph files: each gives exactly one `error:` line naming the file
//! (and line where there is one), exit status 1, no panic, and no output file.

use std::process::Command;

/// Runs `convert` on `content` saved as `name`; returns stderr after checking the contract.
fn reject(name: &str, content: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join(name);
    std::fs::write(&input, content).unwrap();
    let out_ext = if name.ends_with(".graph") { "pbtxt" } else { "graph" };
    let output = dir.path().join(format!("out.{out_ext}"));
    let out = Command::new(env!("CARGO_BIN_EXE_autoclust"))
        .current_dir(dir.path())
        .args(["convert", name, "-o"])
        .arg(&output)
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
    assert!(stderr.starts_with("error: "), "{name}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{name}: one line: {stderr}");
    assert!(!stderr.contains("panicked"), "{name}: {stderr}");
    assert!(stderr.starts_with(&format!("error: {name}")), "{name}: names the file: {stderr}");
    assert!(!output.exists(), "{name}: no output file");
    assert!(std::fs::read_dir(dir.path()).unwrap().count() == 1, "{name}: no temporary file left");
    stderr
}

/// The `LINE` of `error: FILE:LINE:COL: …`.
fn line_of(stderr: &str, name: &str) -> u32 {
    let rest = stderr.strip_prefix(&format!("error: {name}:")).unwrap_or_else(|| panic!("no line: {stderr}"));
    rest.split(':').next().unwrap().parse().unwrap_or_else(|_| panic!("no line: {stderr}"))
}

const NODE_A: &str = "node {\n  name: \"a\"\n  op: \"Const\"\n}\n";

#[test]
fn truncated_pbtxt() {
    let text = format!("{NODE_A}node {{\n  name: \"b\"\n  op: \"Identity\"\n  input: \"a\"\n");
    let e = reject("trunc.pbtxt", text.as_bytes());
    assert_eq!(line_of(&e, "trunc.pbtxt"), 9, "{e}");
    assert!(e.contains("end of input"), "{e}");
}

#[test]
fn truncated_native() {
    let e = reject("trunc.graph", b"a = Const() {dtype = float32, value = float32[2]{1.0,");
    assert_eq!(line_of(&e, "trunc.graph"), 1, "{e}");
}

#[test]
fn unknown_field() {
    let e = reject("unknown.pbtxt", format!("{NODE_A}node {{\n  name: \"b\"\n  colour: \"red\"\n}}\n").as_bytes());
    assert_eq!(line_of(&e, "unknown.pbtxt"), 7, "{e}");
    assert!(e.contains("unknown field 'colour'"), "{e}");
}

#[test]
fn bad_escape() {
    let e = reject("escape.pbtxt", b"node {\n  name: \"a\\z\"\n  op: \"Const\"\n}\n");
    assert_eq!(line_of(&e, "escape.pbtxt"), 2, "{e}");
    assert!(e.contains("bad escape"), "{e}");
    let e = reject("escape.graph", b"a = Const() {s = \"\\q\"}\n");
    assert!(e.contains("escape.graph:1:19: bad escape"), "{e}");
}

#[test]
fn missing_input_node() {
    let e = reject(
        "missing.pbtxt",
        format!("{NODE_A}node {{\n  name: \"b\"\n  op: \"Neg\"\n  input: \"nowhere:1\"\n}}\n").as_bytes(),
    );
    assert_eq!(line_of(&e, "missing.pbtxt"), 5, "{e}");
    assert!(e.contains("'nowhere:1'") && e.contains("'b'"), "{e}");
    let e = reject("missing.graph", b"a = Const()\nb = Neg(^ghost)\n");
    assert_eq!(line_of(&e, "missing.graph"), 2, "{e}");
}

#[test]
fn cycle_names_its_nodes() {
    let e = reject("cycle.graph", b"# three nodes in a ring\na = Neg(c)\nb = Neg(a)\nc = Identity(^b)\nd = Neg(a)\n");
    assert!(e.contains("a -> b -> c -> a"), "{e}");
    assert_eq!(line_of(&e, "cycle.graph"), 2, "{e}");
    let text = "node {\n  name: \"x\"\n  op: \"Neg\"\n  input: \"y\"\n}\nnode {\n  name: \"y\"\n  op: \"Neg\"\n  input: \"x\"\n}\n";
    let e = reject("cycle.pbtxt", text.as_bytes());
    assert!(e.contains("x -> y -> x"), "{e}");
}

#[test]
fn duplicate_node() {
    let e = reject("dup.pbtxt", format!("{NODE_A}{NODE_A}").as_bytes());
    assert_eq!(line_of(&e, "dup.pbtxt"), 5, "{e}");
    assert!(e.contains("duplicate node name 'a'"), "{e}");
    let e = reject("dup.graph", b"a = X()\n\na = Y()\n");
    assert_eq!(line_of(&e, "dup.graph"), 3, "{e}");
}

#[test]
fn garbage_binary() {
    let garbage: Vec<u8> = (0..400u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    let e = reject("garbage.pb", &garbage);
    assert!(e.contains("not a binary GraphDef"), "{e}");
}

#[test]
fn bad_tensor_content() {
    let text = "node {\n  name: \"c\"\n  op: \"Const\"\n  attr {\n    key: \"value\"\n    value {\n      tensor {\n        dtype: DT_FLOAT\n        tensor_shape {\n          dim {\n            size: 2\n          }\n        }\n        tensor_content: \"\\000\\000\"\n      }\n    }\n  }\n}\n";
    let e = reject("tensor.pbtxt", text.as_bytes());
    assert_eq!(line_of(&e, "tensor.pbtxt"), 1, "{e}");
    assert!(e.contains("tensor_content has 2 bytes"), "{e}");
}

#[test]
fn missing_file() {
    let out = Command::new(env!("CARGO_BIN_EXE_autoclust"))
        .args(["convert", "/nonexistent/x.pbtxt", "-o", "/tmp/never.graph"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: /nonexistent/x.pbtxt: cannot read"));
}

/// A reader that stops early (`autoclust cluster G | head -1`) ends the process quietly, as
/// for any Unix filter: no panic message, no "failed printing to stdout".
#[cfg(unix)]
#[test]
fn closed_stdout_is_not_a_panic() {
    use std::io::Read;
    use std::process::Stdio;
    // A graph whose `analyze` printout (8000 lines, ~300 KB) overflows any pipe buffer.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.graph");
    let mut text = String::from("v = VarHandleOp() {dtype = float32, shape = shape[], shared_name = \"v\"}\n");
    for i in 0..8000 {
        text.push_str(&format!("read_{i} = ReadVariableOp(v) {{dtype = float32}}\n"));
    }
    std::fs::write(&path, text).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_autoclust"))
        .args(["analyze"])
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read one byte, then close the pipe while the CLI still has lines to print.
    let mut out = child.stdout.take().unwrap();
    let mut one = [0u8; 1];
    out.read_exact(&mut one).unwrap();
    drop(out);
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    child.wait().unwrap();
    assert!(!err.contains("panicked"), "stderr: {err}");
}
