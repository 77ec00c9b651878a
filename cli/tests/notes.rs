//! "Never silent" (docs/contract.md): `run`, `bench` and `compile` say on stderr,
//! as `note:` lines naming the node, when they fall short of what the graph
//! allows — whatever RUST_LOG says — and print nothing extra when they do
//! not. `bench --json` reports the clusters it ran and how.

use crate::support::{autoclust, notes, write};

/// A cluster the compiler fully lowers: `tanh(x) * x + x`.
const COMPILED: &str = r#"
x = Placeholder() {dtype = float32, shape = shape[2, 3]}
t = Tanh(x) {T = float32}
m = Mul(t, x) {T = float32}
a = AddV2(m, x) {T = float32}
"#;

/// `Exp` on float64: the clusterer admits it, the compiler's transcendental
/// routines are float32 only, so the cluster runs in the interpreter.
const INTERPRETED: &str = r#"
x = Placeholder() {dtype = float32, shape = shape[2]}
zero = Const() {dtype = int32, value = int32[]{0}}
e = Exp(x) {T = float32}
loop = StatelessWhile(zero, e) {T = [int32, float32], cond = @cond, body = @body}
y = Neg(loop:1) {T = float32}
function cond(i: int32, v: float32) -> (c: bool) {
  three = Const() {dtype = int32, value = int32[]{3}}
  l = Less(i, three:output:0) {T = int32}
  return c = l:z:0
}
function body(i: int32, v: float32) -> (i2: int32, v2: float32) {
  one = Const() {dtype = int32, value = int32[]{1}}
  next = AddV2(i, one:output:0) {T = int32}
  axis = Const() {dtype = int32, value = int32[]{0}}
  grown = ConcatV2(v, v, axis:output:0) {N = 2, T = float32, Tidx = int32}
  return i2 = next:z:0
  return v2 = grown:output:0
}
"#;

/// TensorFlow 1's `Select` with a vector condition picking rows (left-aligned,
/// unlike broadcasting), next to a same-shape `Select` and a scalar one.
const ROW_SELECT: &str = r#"
c = Placeholder() {dtype = bool, shape = shape[2]}
x = Placeholder() {dtype = float32, shape = shape[2, 3]}
y = Neg(x) {T = float32}
s = Select(c, x, y) {T = float32}
g = Greater(s, y) {T = float32}
t = Select(g, s, y) {T = float32}
k = Const() {dtype = bool, value = bool[]{true}}
u = Select(k, t, s) {T = float32}
e = Exp(u) {T = float32}
"#;

#[test]
fn a_fully_compiled_run_prints_no_note_and_bench_counts_its_clusters() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(&dir, "g.graph", COMPILED);
    let feed = "x=[[1,2,3],[4,5,6]]";
    let out = autoclust(&["run", &g, "--feed", feed, "--fetch", "a"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(notes(&out).is_empty(), "{:?}", notes(&out));
    let out = autoclust(&["bench", &g, "--feed", feed, "--fetch", "a", "--steps", "2", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(notes(&out).is_empty(), "{:?}", notes(&out));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["clusters"], 1, "{j}");
    assert_eq!(j["compiled_clusters"], 1, "{j}");
    assert_eq!(j["interpreted_clusters"], 0, "{j}");
    assert_eq!(j["clustered_nodes"], 3, "{j}");
    assert_eq!(j["total_nodes"], 4, "{j}");
    for k in ["unclustered_steps_per_s", "clustered_steps_per_s", "speedup", "compile_ms", "first_step_ms"] {
        assert!(j[k].is_number(), "{k}: {j}");
    }
}

#[test]
fn an_interpreted_cluster_is_named_on_stderr_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(&dir, "g.graph", INTERPRETED);
    // A loop whose carried value grows every iteration: admitted into the cluster, and the
    // compiler declines it at the shapes it is called with (the interpreter runs it).
    let feeds = ["--feed", "x=[0.5,-1]", "--fetch", "y"];
    let mut args = vec!["run", &g];
    args.extend(feeds);
    let out = autoclust(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let n = notes(&out);
    assert_eq!(n.len(), 1, "{n:?}");
    assert!(n[0].starts_with("note: cluster 'cluster_0' runs in the interpreter"), "{}", n[0]);
    assert!(n[0].contains("'loop'"), "{}", n[0]);
    // Stdout carries the fetch only, equal to the plain executor's.
    let mut plain = args.clone();
    plain.push("--no-cluster");
    let reference = autoclust(&plain);
    assert_eq!(out.stdout, reference.stdout);
    assert!(notes(&reference).is_empty(), "{:?}", notes(&reference));
    let mut bench = vec!["bench", &g];
    bench.extend(feeds);
    bench.extend(["--steps", "1", "--json"]);
    let out = autoclust(&bench);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(notes(&out).len(), 1, "{:?}", notes(&out));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((j["clusters"].as_u64(), j["compiled_clusters"].as_u64()), (Some(1), Some(0)), "{j}");
    assert_eq!(j["interpreted_clusters"], 1, "{j}");
}

/// A step that fails after an interpreted cluster ran (a string parse outside every
/// cluster, of the cluster's output) still names that cluster: the failure may be the
/// interpreter's, and the note is what says the cluster was not compiled.
#[test]
fn a_failing_step_still_names_the_interpreted_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "{INTERPRETED}\ns = Placeholder() {{dtype = string, shape = shape[]}}\n\
         a = AsString(y) {{T = float32}}\nj = StringJoin(a, s) {{N = 2}}\n\
         n = StringToNumber(j) {{out_type = float32}}\n"
    );
    let g = write(&dir, "g.graph", &text);
    let feeds = ["--feed", "x=[0.5,-1]", "--feed", "s=\"x\"", "--fetch", "n"];
    for cmd in ["run", "bench"] {
        let mut args = vec![cmd, &g];
        args.extend(feeds);
        let out = autoclust(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{cmd}: {err}");
        assert!(err.contains("StringToNumber") || err.contains("'n'"), "{cmd}: {err}");
        let n = notes(&out);
        assert_eq!(n.len(), 1, "{cmd}: {n:?}");
        assert!(n[0].starts_with("note: cluster 'cluster_0' runs in the interpreter"), "{cmd}: {}", n[0]);
        assert!(out.stdout.is_empty(), "{cmd}");
    }
}

#[test]
fn a_row_picking_select_compiles_and_matches_the_plain_executor() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(&dir, "g.graph", ROW_SELECT);
    let feeds = ["--feed", "c=[true,false]", "--feed", "x=[[1,-2,3],[-4,5,-6]]", "--fetch", "e"];
    let mut args = vec!["run", &g];
    args.extend(feeds);
    let out = autoclust(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(notes(&out).is_empty(), "{:?}", notes(&out));
    let mut plain = args.clone();
    plain.push("--no-cluster");
    let reference = autoclust(&plain);
    assert!(reference.status.success(), "{}", String::from_utf8_lossy(&reference.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&reference.stdout));
    // Row 0 of `s` comes from x, row 1 from -x; `t` then takes -x where it is larger.
    let mut rows = args.clone();
    rows.extend(["--fetch", "s", "--fetch", "t"]);
    let out = String::from_utf8_lossy(&autoclust(&rows).stdout).into_owned();
    assert!(
        out.contains(r#"s:0 = {"dtype": "float32", "shape": [2, 3], "data": [1.0, -2.0, 3.0, 4.0, -5.0, 6.0]}"#),
        "{out}"
    );
    assert!(
        out.contains(r#"t:0 = {"dtype": "float32", "shape": [2, 3], "data": [1.0, 2.0, 3.0, 4.0, -5.0, 6.0]}"#),
        "{out}"
    );
    let mut bench = vec!["bench", &g];
    bench.extend(feeds);
    bench.extend(["--steps", "1", "--json"]);
    let out = autoclust(&bench);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((j["compiled_clusters"].as_u64(), j["interpreted_clusters"].as_u64()), (Some(1), Some(0)), "{j}");
}

#[test]
fn running_unclustered_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(
        &dir,
        "g.graph",
        r#"
x = Placeholder() {dtype = float32, shape = shape[3]}
j = Const() {dtype = float32, value = float32[3]{1.0, 1.0, 1.0}}
k = ExternalValue(j) {dtype = float32}
m = Mul(x, k) {T = float32}
a = AddV2(m, x) {T = float32}
c = Const() {dtype = float32, value = float32[3]{1.0, 1.0, 1.0}}
b = Mul(x, c) {T = float32}
d = AddV2(b, x) {T = float32}
"#,
    );
    // Feeding a node the registry does not know (not a placeholder) rules the clustered path out.
    let out = autoclust(&["run", &g, "--feed", "x=[1,2,3]", "--feed", "k=[2,2,2]", "--fetch", "a"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let n = notes(&out);
    assert_eq!(n, ["note: running unclustered: feed of 'k', which is not a Placeholder"], "{n:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("a:0 = ") && stdout.contains("[3.0, 6.0, 9.0]"), "{stdout}");
    // A fed constant is overridden by its feed, as in TensorFlow: the graph clusters, no note.
    let out = autoclust(&["run", &g, "--feed", "x=[1,2,3]", "--feed", "c=[2,2,2]", "--fetch", "d"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(notes(&out).is_empty(), "{:?}", notes(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("d:0 = ") && stdout.contains("[3.0, 6.0, 9.0]"), "{stdout}");
    let bench = autoclust(&[
        "bench",
        &g,
        "--feed",
        "x=[1,2,3]",
        "--feed",
        "c=[2,2,2]",
        "--fetch",
        "d",
        "--steps",
        "1",
        "--json",
    ]);
    let j: serde_json::Value = serde_json::from_slice(&bench.stdout).unwrap();
    assert_eq!(j["compiled_clusters"].as_u64(), Some(1), "{j}");
}

/// A first step that fails still says why it ran unclustered, before the error: the
/// failure may be the plain executor's own (an op it has no kernel for) where the compiled
/// program would have run (sweep 11: bfloat16 `ResourceApplyAdam`, whose fallback reason
/// only RUST_LOG showed).
#[test]
fn a_failing_unclustered_step_still_says_why_it_is_unclustered() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(
        &dir,
        "g.graph",
        r#"
x = Placeholder() {dtype = float32, shape = shape[3]}
j = Const() {dtype = float32, value = float32[3]{1.0, 1.0, 1.0}}
k = ExternalValue(j) {dtype = float32}
m = Mul(x, k) {T = float32}
l = Log(m) {T = float32}
c = CheckNumerics(l) {T = float32, message = "log of a negative"}
"#,
    );
    // A fed node of an op the registry does not know is not overridden by its feed (a fed
    // `Const` is): nothing says its output's dtype.
    for cmd in ["run", "bench"] {
        let mut args = vec![cmd, g.as_str(), "--feed", "x=[1,-2,3]", "--feed", "k=[2,2,2]", "--fetch", "c"];
        if cmd == "bench" {
            args.extend(["--steps", "1"]);
        }
        let out = autoclust(&args);
        assert_eq!(out.status.code(), Some(1), "{cmd}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let note = stderr.find("note: running unclustered: feed of 'k', which is not a Placeholder");
        let error = stderr.find("error: ");
        // The error's line first (docs/contract.md §1), the note after it.
        assert!(note.is_some() && error == Some(0) && error < note, "{cmd}: {stderr}");
        assert!(stderr.contains("log of a negative"), "{cmd}: {stderr}");
    }
}

/// A TF2 step's int64 captured variable (Keras' Adam iteration counter) whose users are all
/// pruned away by the request still carries over into the clustered session: its dtype is
/// unknown there, not float32, so the run clusters without a note (it used to fall back to
/// the plain executor: "variable ... does not carry over").
#[test]
fn a_pruned_int64_variable_does_not_leave_the_run_unclustered() {
    let tf = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/tf");
    let p = |f: &str| tf.join(f).display().to_string();
    let out = autoclust(&[
        "run",
        &p("tf2_keras_adam.pbtxt"),
        "--feeds",
        &p("tf2_keras_adam.feeds.safetensors"),
        "--vars",
        &p("tf2_keras_adam.vars.safetensors"),
        "--fetch",
        "sequential_4_1/dense_12_1/BiasAdd",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(notes(&out).is_empty(), "{:?}", notes(&out));
}

/// A TF2 step writing summaries to a writer it captured (created eagerly, outside the
/// graph): the step runs, and one note says the summaries were dropped; a writer the graph
/// creates writes TensorFlow's event file (`runtime/src/kernels/summary_writer.rs`) and
/// gives no note.
#[test]
fn summaries_to_a_captured_writer_are_dropped_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let body = r#"
x = Placeholder() {dtype = float32, shape = shape[3]}
step = Const() {dtype = int64, value = int64[]{7}}
tag = Const() {dtype = string, value = string[]{"loss"}}
meta = Const() {dtype = string, value = string[]{""}}
axis = Const() {dtype = int32, value = int32[1]{0}}
loss = Sum(x, axis) {T = float32, Tidx = int32, keep_dims = false}
w = WriteSummary(writer, step, loss, tag, meta, ^create) {T = float32}
s = WriteScalarSummary(writer, step, tag, loss, ^w) {T = float32}
h = WriteHistogramSummary(writer, step, tag, x, ^s) {T = float32}
f = FlushSummaryWriter(writer, ^h)
y = Identity(loss, ^f) {T = float32}
"#;
    let captured = format!("writer = Placeholder() {{dtype = resource, shape = shape[]}}\ncreate = NoOp()\n{body}");
    let g = write(&dir, "captured.graph", &captured);
    for mode in [&[][..], &["--no-cluster"][..]] {
        let out = autoclust(&[&["run", &g, "--feed", "x=[1,2,3]", "--fetch", "y", "--steps", "2"], mode].concat());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).contains("[6.0]"));
        let n = notes(&out);
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(
            n[0].contains("summary writer 'writer' was created outside this graph") && n[0].contains("3 summaries"),
            "{n:?}"
        );
        assert!(n[0].contains("--summary-dir"), "{n:?}");
    }
    // With --summary-dir the captured writer writes there: no note.
    let captured_dir = dir.path().join("captured");
    let out =
        autoclust(&["run", &g, "--feed", "x=[1,2,3]", "--fetch", "y", "--summary-dir", captured_dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(notes(&out).is_empty(), "{:?}", notes(&out));
    let files: Vec<_> = std::fs::read_dir(&captured_dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].to_string_lossy().ends_with(".v2"));
    let logdir = dir.path().join("logs");
    let in_graph = format!(
        r#"writer = SummaryWriter() {{container = "", shared_name = "train"}}
logdir = Const() {{dtype = string, value = string[]{{"{}"}}}}
maxq = Const() {{dtype = int32, value = int32[]{{10}}}}
flushms = Const() {{dtype = int32, value = int32[]{{120000}}}}
suffix = Const() {{dtype = string, value = string[]{{".v2"}}}}
create = CreateSummaryFileWriter(writer, logdir, maxq, flushms, suffix)
{body}"#,
        logdir.display()
    );
    let g = write(&dir, "in_graph.graph", &in_graph);
    let out = autoclust(&["run", &g, "--feed", "x=[1,2,3]", "--fetch", "y", "--steps", "2"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(notes(&out).is_empty(), "{:?}", notes(&out));
    let files: Vec<_> = std::fs::read_dir(&logdir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let bytes = std::fs::read(&files[0]).unwrap();
    // The version record and three events per step, each a TFRecord (8-byte length, 4-byte
    // CRC, data, 4-byte CRC); the scalar event ends with its tag and simple_value 6.0.
    let mut records = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let len = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
        records.push(bytes[at + 12..at + 12 + len].to_vec());
        at += 16 + len;
    }
    assert_eq!(records.len(), 7);
    assert!(records[0].ends_with(b"brain.Event:2"));
    assert!(records[2].ends_with(b"\x0a\x04loss\x15\x00\x00\xc0\x40"), "{:?}", records[2]);
}

/// `compile`'s program runs as written: a TF2 `while` body lists its `ReadVariableOp` as a
/// control output, and that output's anchor must stay a node of the rewritten body (it
/// joined the body's cluster, and running the written program then said the body "is not
/// clustered (control output … names no node)" and ran it op by op). Values as `run`'s.
#[test]
fn a_compiled_program_with_loop_control_outputs_runs_without_notes() {
    let tf = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/tf/");
    let dir = tempfile::tempdir().unwrap();
    let compiled = dir.path().join("p.graph");
    let compiled = compiled.to_str().unwrap();
    let c = autoclust(&["compile", &format!("{tf}tf2_control_flow.pbtxt"), "-o", compiled]);
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    let feeds = format!("{tf}tf2_control_flow.feeds.safetensors");
    let vars = format!("{tf}tf2_control_flow.vars.safetensors");
    let run = |g: &str| {
        let out = autoclust(&["run", g, "--feeds", &feeds, "--vars", &vars, "--fetch", "Identity:0", "--json"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(notes(&out).is_empty(), "{g}: {:?}", notes(&out));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["fetches"].clone()
    };
    assert_eq!(run(compiled), run(&format!("{tf}tf2_control_flow.pbtxt")));
}

/// A command that fails after finding shortfalls prints its `error:` line first, then the
/// notes (docs/contract.md §1: the first line of a failure starts `error:`).
#[test]
fn a_failing_run_prints_its_error_before_its_notes() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(
        &dir,
        "g.graph",
        "x = Const() {dtype = int32, value = int32[2]{1, 2}}\ny = Sqrt(x) {T = int32}\nz = Neg(y) {T = int32}\n",
    );
    let out = autoclust(&["run", &g, "--fetch", "z:0"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(lines.first().is_some_and(|l| l.starts_with("error: node 'y' (Sqrt)")), "{stderr}");
    assert!(lines[1..].iter().any(|l| l.starts_with("note: ") && l.contains("'y'")), "{stderr}");
}

/// A node the request does not need is neither optimized nor verified: an ill-typed one
/// (another SavedModel signature's, say) leaves the run optimized, with no note (sweep 65).
#[test]
fn a_node_the_request_does_not_need_cannot_deoptimize_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(
        &dir,
        "g.graph",
        "x = Placeholder() {dtype = float32, shape = shape[2]}\nt = Tanh(x) {T = float32}\ny = Mul(t, x) {T = float32}\n\
         k = Const() {dtype = int32, value = int32[2]{1, 2}}\nbad = Sqrt(k) {T = int32}\n",
    );
    for mode in [None, Some("--no-cluster")] {
        let mut args = vec!["run", g.as_str(), "--feed", "x=[1,2]", "--fetch", "y"];
        args.extend(mode);
        let out = autoclust(&args);
        assert!(out.status.success(), "{mode:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(notes(&out).is_empty(), "{mode:?}: {:?}", notes(&out));
    }
    // Requested, the same node is still named.
    let out = autoclust(&["run", g.as_str(), "--feed", "x=[1,2]", "--fetch", "y,bad"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("note: running unoptimized: 5:1: node 'bad'"));
}
