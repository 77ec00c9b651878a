//! `autoclust convert` end to end, through the built binary: GraphDef →
//! native → GraphDef keeps every node, edge and attribute; native printing
//! then parsing is the identity on every fixture; binary `.pb` and standard
//! input/output work.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use autoclust_graph::Graph;

fn autoclust() -> Command {
    Command::new(env!("CARGO_BIN_EXE_autoclust"))
}

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata")
}

fn files_with(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files_with(&p, exts, out);
        } else if p.extension().and_then(|x| x.to_str()).is_some_and(|x| exts.contains(&x)) {
            out.push(p);
        }
    }
}

/// Every fixture graph, except the large benchmark inputs (read elsewhere).
fn fixtures(exts: &[&str]) -> Vec<PathBuf> {
    let mut v = Vec::new();
    files_with(&testdata(), exts, &mut v);
    v.retain(|p| std::fs::metadata(p).is_ok_and(|m| m.len() < 1_000_000));
    v.sort();
    v
}

fn convert(input: &Path, output: &Path) {
    let out = autoclust().arg("convert").arg(input).arg("-o").arg(output).output().unwrap();
    assert!(
        out.status.success(),
        "convert {} -> {} failed: {}",
        input.display(),
        output.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Same nodes (order, names, ops, inputs, devices), attributes bit for bit,
/// same library and versions.
fn assert_same(a: &Graph, b: &Graph, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: node count");
    for (x, y) in a.nodes().iter().zip(b.nodes()) {
        assert_eq!((&x.name, &x.op, &x.device), (&y.name, &y.op, &y.device), "{what}");
        assert_eq!(x.inputs, y.inputs, "{what}: data edges of {}", x.name);
        assert_eq!(x.control_inputs, y.control_inputs, "{what}: control edges of {}", x.name);
        assert_eq!(x.attrs.keys().collect::<Vec<_>>(), y.attrs.keys().collect::<Vec<_>>(), "{what}: {}", x.name);
        for (k, v) in &x.attrs {
            assert!(v.bit_eq(&y.attrs[k]), "{what}: attribute {k} of {} changed: {v:?} vs {:?}", x.name, y.attrs[k]);
        }
    }
    let strip = |g: &Graph| {
        let mut l = g.library.clone();
        l.functions_mut().iter_mut().flat_map(|f| f.nodes.iter_mut()).for_each(|n| n.span = None);
        format!("{l:?}")
    };
    assert_eq!(strip(a), strip(b), "{what}: library");
    assert_eq!(a.versions, b.versions, "{what}: versions");
}

fn read_pbtxt(p: &Path) -> Graph {
    autoclust_graphdef::parse_pbtxt(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn graphdef_to_native_and_back_keeps_everything() {
    let files = fixtures(&["pbtxt"]);
    assert!(files.iter().any(|p| p.ends_with("parse/resource_vars.pbtxt")), "own fixture missing");
    let dir = tempfile::tempdir().unwrap();
    for f in &files {
        let native = dir.path().join("g.graph");
        let back = dir.path().join("g.pbtxt");
        let bin = dir.path().join("g.pb");
        convert(f, &native);
        convert(&native, &back);
        convert(&back, &bin);
        let original = read_pbtxt(f);
        assert_same(&original, &read_pbtxt(&back), &format!("{} via native", f.display()));
        let from_bin = autoclust_graphdef::parse_pb(&std::fs::read(&bin).unwrap()).unwrap();
        assert_same(&original, &from_bin, &format!("{} via .pb", f.display()));
    }
}

#[test]
fn native_print_then_parse_is_identity_on_every_fixture() {
    let dir = tempfile::tempdir().unwrap();
    for f in fixtures(&["pbtxt", "graph"]) {
        let g = if f.extension().is_some_and(|x| x == "graph") {
            match autoclust_graph::text::parse_graph(&std::fs::read_to_string(&f).unwrap()) {
                Ok(g) => g,
                // Bad-input cases live beside good ones; they are tested elsewhere.
                Err(_) => continue,
            }
        } else {
            read_pbtxt(&f)
        };
        let printed = autoclust_graph::text::print_graph(&g);
        let again = autoclust_graph::text::parse_graph(&printed).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert_same(&g, &again, &f.display().to_string());
        assert_eq!(autoclust_graph::text::print_graph(&again), printed, "{}", f.display());
        // The binary prints the same text.
        let out = dir.path().join("p.graph");
        if f.extension().is_some_and(|x| x == "pbtxt") {
            convert(&f, &out);
            assert_eq!(std::fs::read_to_string(&out).unwrap(), printed, "{}", f.display());
        }
    }
}

#[test]
fn reads_standard_input_and_writes_standard_output() {
    let src = testdata().join("parse/resource_vars.pbtxt");
    let mut child =
        autoclust().args(["convert", "-", "-o", "-"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), &std::fs::read(&src).unwrap()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let g = autoclust_graph::text::parse_graph(std::str::from_utf8(&out.stdout).unwrap()).unwrap();
    assert_same(&read_pbtxt(&src), &g, "stdin");
}

#[test]
fn format_flag_overrides_extensions() {
    let dir = tempfile::tempdir().unwrap();
    let odd = dir.path().join("graph.txt");
    std::fs::copy(testdata().join("parse/resource_vars.pbtxt"), &odd).unwrap();
    let out = dir.path().join("out.bin");
    let status = autoclust()
        .arg("convert")
        .arg(&odd)
        .args(["--format", "pbtxt", "--to", "pb", "-o"])
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let g = autoclust_graphdef::parse_pb(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(g.len(), read_pbtxt(&odd).len());
    // Without --format the extension says nothing: a usage error.
    let st = autoclust().arg("convert").arg(&odd).arg("-o").arg(dir.path().join("x.graph")).output().unwrap();
    assert_eq!(st.status.code(), Some(2));
}
