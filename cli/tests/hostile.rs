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
    run_on_bytes(name, content.as_bytes(), args)
}

/// [`run_on`] for any bytes (a binary GraphDef).
fn run_on_bytes(name: &str, content: &[u8], args: &[&str]) -> Output {
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

/// Peak resident memory of a finished child, from `wait4` (kilobytes).
fn max_rss_kb(cmd: &mut Command) -> (Output, i64) {
    let child = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    // Read the pipes on threads, then reap the child ourselves to get its rusage.
    let mut child = child;
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let to = std::thread::spawn(move || {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut so, &mut b).unwrap();
        b
    });
    let te = std::thread::spawn(move || {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut se, &mut b).unwrap();
        b
    });
    let mut status = 0;
    // SAFETY: plain FFI calls on a child this process spawned and has not reaped.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid);
    std::mem::forget(child); // reaped above
    use std::os::unix::process::ExitStatusExt;
    let out = Output {
        status: std::process::ExitStatus::from_raw(status),
        stdout: to.join().unwrap(),
        stderr: te.join().unwrap(),
    };
    (out, usage.ru_maxrss)
}

#[test]
fn huge_splat_constants_stay_compact_until_a_kernel_needs_them() {
    // TensorFlow writes `tf.zeros`/`tf.fill` constants as one value and a shape; a few
    // bytes may declare terabytes. Readers keep them compact, so graph-only commands
    // work on them in little memory, and `run` refuses them by name before allocating.
    for (dims, vals, want) in [
        (vec![1_000_000u64, 1_000_000], "float_val: 1", "[1000000,1000000]{1.0, ...}"),
        (vec![1_000_000, 1_000_000], "", "[1000000,1000000]{...}"),
        (vec![1 << 40, 1 << 20], "float_val: 1 float_val: 2", "[1099511627776,1048576]{1.0, 2.0, ...}"),
    ] {
        let g = pbtxt_const(&dims, vals);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("c.pbtxt"), &g).unwrap();
        for args in [
            vec!["analyze", "c.pbtxt"],
            vec!["cluster", "c.pbtxt"],
            vec!["convert", "c.pbtxt", "-o", "c.graph"],
            vec!["convert", "c.graph", "-o", "c.pb"],
            vec!["convert", "c.pb", "-o", "back.pbtxt"],
            vec!["opt", "c.pb", "--passes", "default"],
        ] {
            let (out, rss) = max_rss_kb(bin().current_dir(dir.path()).args(&args));
            assert!(out.status.success(), "{args:?} {dims:?}: {}", String::from_utf8_lossy(&out.stderr));
            assert!(rss < 200_000, "{args:?} {dims:?}: {rss} kB resident");
        }
        // The round trip through both formats keeps the compact form and its values.
        let text = std::fs::read_to_string(dir.path().join("c.graph")).unwrap();
        assert!(text.contains(want), "{want} in {text}");
        let back = std::fs::read_to_string(dir.path().join("back.pbtxt")).unwrap();
        assert_eq!(back.matches("float_val").count(), vals.matches("float_val").count(), "{back}");
        // Running it needs the values: refused, naming the node, in both modes.
        for mode in [&[][..], &["--no-cluster"][..]] {
            let mut args = vec!["run", "{}", "--fetch", "big:0"];
            args.extend(mode);
            let e = refused(&format!("run {dims:?} {mode:?}"), &run_on("c.pbtxt", &g, &args));
            assert!(e.contains("node 'big'") && e.contains("--max-tensor-bytes"), "{e}");
        }
    }
    // Uncountable element counts (2^61 · 2^62) are still refused when read.
    let e = refused(
        "uncountable",
        &run_on("c.pbtxt", &pbtxt_const(&[1 << 61, 1 << 62], "float_val: 1"), &["analyze", "{}"]),
    );
    assert!(e.starts_with("error: c.pbtxt:1:1: node 'big': attribute 'value': tensor float32["), "{e}");
    // Below the budget a splat runs, in both modes, with TensorFlow's values.
    let g = pbtxt_const(&[2, 1024], "float_val: 1 float_val: 2");
    for mode in [&[][..], &["--no-cluster"][..]] {
        let mut args = vec!["run", "{}", "--fetch", "big:0", "--json"];
        args.extend(mode);
        let out = run_on("c.pbtxt", &g, &args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let data = v["fetches"]["big:0"]["data"].as_array().unwrap();
        assert_eq!(data.len(), 2048);
        assert_eq!((data[0].as_f64(), data[1].as_f64(), data[2047].as_f64()), (Some(1.0), Some(2.0), Some(2.0)));
    }
    // The budget still applies when the values are expanded: 4 KB under a 1 KB limit.
    let g = pbtxt_const(&[1024], "float_val: 1");
    assert!(run_on("c.pbtxt", &g, &["run", "{}", "--fetch", "big:0"]).status.success());
    let e =
        refused("1 KB limit", &run_on("c.pbtxt", &g, &["run", "{}", "--fetch", "big:0", "--max-tensor-bytes", "1000"]));
    assert!(e.contains("needs 4096 bytes, more than the limit of 1000 bytes"), "{e}");
    // Dense constants (every value written out) are checked as they are read.
    let dense = pbtxt_const(&[300], &"float_val: 1 ".repeat(300));
    let e = refused("dense", &run_on("c.pbtxt", &dense, &["analyze", "{}", "--max-tensor-bytes", "1000"]));
    assert!(e.contains("needs 1200 bytes"), "{e}");
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
    assert!(e.starts_with("error: s.pb: node 'big': attribute 'value': tensor float32[4, 4] needs 64 bytes"), "{e}");
    assert!(Path::new(&dir.path().join("s.pb")).exists());
}

/// Runs `graph` (native format) fetching `fetch`, clustered and with `--no-cluster`; both
/// must refuse with an error line naming `node` and containing `what`.
fn run_refused(graph: &str, fetch: &str, extra: &[&str], node: &str, what: &str) {
    for plain in [false, true] {
        let mut args = vec!["run", "{}", "--fetch", fetch];
        args.extend(extra);
        if plain {
            args.push("--no-cluster");
        }
        let mode = if plain { "plain" } else { "clustered" };
        let e = refused(&format!("{mode} {fetch}"), &run_on("g.graph", graph, &args));
        assert!(e.contains(&format!("node '{node}'")), "{mode}: names the node: {e}");
        assert!(e.contains(what), "{mode}: {e}");
    }
}

const TOO_LARGE: &str = "--max-tensor-bytes";
const UNCOUNTABLE: &str = "more elements than can be counted";

#[test]
fn run_time_sizes_are_refused_in_both_modes() {
    // Fill: 4 TB; and 2^62 * 4 elements, which wrap to 0 in 64 bits.
    let fill = |dims: &str| {
        format!(
            "x = Placeholder() {{dtype = float32, shape = shape[]}}\n\
             d = Const() {{dtype = int64, value = int64[{n}]{{{dims}}}}}\n\
             f = Fill(d, x) {{T = float32, index_type = int64}}\n\
             y = Neg(f) {{T = float32}}\n",
            n = dims.split(',').count()
        )
    };
    run_refused(&fill("1000000, 1000000"), "y", &["--feed", "x=1"], "f", TOO_LARGE);
    run_refused(&fill("4611686018427387904, 4, 1"), "y", &["--feed", "x=1"], "f", UNCOUNTABLE);
    // The dims fed at run time.
    let fed = "x = Placeholder() {dtype = float32, shape = shape[]}\n\
               d = Placeholder() {dtype = int64, shape = shape[3]}\n\
               f = Fill(d, x) {T = float32, index_type = int64}\n\
               y = Sum(f, r) {T = float32, Tidx = int32, keep_dims = false}\n\
               r = Const() {dtype = int32, value = int32[3]{0, 1, 2}}\n";
    run_refused(fed, "y", &["--feed", "x=1", "--feed", "d=[4611686018427387904, 4, 1]"], "f", UNCOUNTABLE);
    // Tile.
    let tile = "x = Placeholder() {dtype = float32, shape = shape[2]}\n\
                m = Const() {dtype = int32, value = int32[1]{2000000000}}\n\
                t = Tile(x, m) {T = float32, Tmultiples = int32}\n\
                y = Neg(t) {T = float32}\n";
    run_refused(tile, "y", &["--feed", "x=[1, 2]"], "t", TOO_LARGE);
    // Range to i64::MAX.
    let range = "s = Const() {dtype = int64, value = int64[]{0}}\n\
                 l = Const() {dtype = int64, value = int64[]{9223372036854775807}}\n\
                 k = Const() {dtype = int64, value = int64[]{1}}\n\
                 r = Range(s, l, k) {Tidx = int64}\n\
                 y = Neg(r) {T = int64}\n";
    run_refused(range, "y", &[], "r", UNCOUNTABLE);
    let range = range.replace("9223372036854775807", "1000000000000");
    run_refused(&range, "y", &[], "r", TOO_LARGE);
    // RandomUniform of 4 TB.
    let random = "d = Const() {dtype = int32, value = int32[2]{1000000, 1000000}}\n\
                  u = RandomUniform(d) {T = int32, dtype = float32, seed = 1, seed2 = 2}\n\
                  y = Neg(u) {T = float32}\n";
    run_refused(random, "y", &[], "u", TOO_LARGE);
    // Kernels whose output outgrows their inputs (found by hand probes after the fuzzer):
    // many indices into large rows, one input concatenated many times, an outer product,
    // an output shape or segment count given as a value. Each input is within 256 MB.
    let budget = ["--max-tensor-bytes", "268435456"];
    let big = "x = Const() {dtype = float32, value = float32[1000,1000]{1.0, ...}}\n\
               ax = Const() {dtype = int32, value = int32[]{0}}\n";
    let gather = format!(
        "{big}i = Const() {{dtype = int32, value = int32[100000]{{0, ...}}}}\n\
         g = GatherV2(x, i, ax) {{Tparams = float32, Tindices = int32, Taxis = int32, batch_dims = 0}}\n"
    );
    run_refused(&gather, "g", &budget, "g", TOO_LARGE);
    let gather_nd = format!(
        "{big}i = Const() {{dtype = int32, value = int32[100000,1]{{0, ...}}}}\n\
         g = GatherNd(x, i) {{Tparams = float32, Tindices = int32}}\n"
    );
    run_refused(&gather_nd, "g", &budget, "g", TOO_LARGE);
    let xs = vec!["x"; 100].join(", ");
    let concat = format!("{big}c = ConcatV2({xs}, ax) {{T = float32, N = 100, Tidx = int32}}\n");
    run_refused(&concat, "c", &budget, "c", TOO_LARGE);
    let outer = "a = Const() {dtype = float32, value = float32[20000]{1.0, ...}}\n\
                 e = Einsum(a, a) {T = float32, N = 2, equation = \"i,j->ij\"}\n";
    run_refused(outer, "e", &budget, "e", TOO_LARGE);
    let segments = "d = Const() {dtype = float32, value = float32[2]{1.0, 2.0}}\n\
                    ids = Const() {dtype = int32, value = int32[2]{0, 1}}\n\
                    n = Const() {dtype = int32, value = int32[]{1000000000}}\n\
                    s = UnsortedSegmentSum(d, ids, n) {T = float32, Tindices = int32, Tnumsegments = int32}\n";
    run_refused(segments, "s", &budget, "s", TOO_LARGE);
    let scatter = "i = Const() {dtype = int32, value = int32[1,1]{0}}\n\
                   u = Const() {dtype = float32, value = float32[1]{1.0}}\n\
                   sh = Const() {dtype = int32, value = int32[1]{1000000000}}\n\
                   s = ScatterNd(i, u, sh) {T = float32, Tindices = int32}\n";
    run_refused(scatter, "s", &budget, "s", TOO_LARGE);
    // The budget is the flag's: a 4 KB Fill runs by default and is refused under 1 KB.
    let small = fill("1024");
    let ok = run_on("g.graph", &small, &["run", "{}", "--fetch", "y", "--feed", "x=1"]);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    run_refused(&small, "y", &["--feed", "x=1", "--max-tensor-bytes", "1000"], "f", "needs 4096 bytes");
}

const FEED: &str = "x = Placeholder() {dtype = float32, shape = shape[]}\ny = Neg(x) {T = float32}\n";

#[test]
fn fetch_ports_are_checked_in_both_modes() {
    // Port 2^32 - 1 used to wrap to another output's slot (the feed's value, exit 0);
    // 2^31 - 1 to allocate a slot table of 8 GB.
    for fetch in ["y:4294967295", "x:4294967295", "y:2147483647", "y:1"] {
        for plain in [false, true] {
            let mut args = vec!["run", "{}", "--feed", "x=2", "--fetch", fetch];
            if plain {
                args.push("--no-cluster");
            }
            let e = refused(fetch, &run_on("g.graph", FEED, &args));
            let node = fetch.split(':').next().unwrap();
            assert!(e.starts_with(&format!("error: --fetch '{fetch}': node '{node}' (")), "{e}");
            assert!(e.ends_with("has 1 output(s)"), "{e}");
        }
    }
    let ok = run_on("g.graph", FEED, &["run", "{}", "--feed", "x=2", "--fetch", "y:0"]);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
}

#[test]
fn input_ports_are_checked_at_load_for_every_command() {
    let consts = "a = Const() {dtype = float32, value = float32[]{1.0}}\nb = Neg(a:99) {T = float32}\n";
    let fed = "x = Placeholder() {dtype = float32, shape = shape[]}\ny = Neg(x:4294967295) {T = float32}\n";
    let call = "function f(a: float32) -> (out: float32) {\n  n = Neg(a) {T = float32}\n  return out = n:0\n}\n\
                x = Placeholder() {dtype = float32, shape = shape[]}\n\
                c = f(x)\n\
                y = Neg(c:4294967295) {T = float32}\n";
    for (graph, line, input, producer) in [
        (consts, 2, "a:99", "'a' (Const) has 1 output(s)"),
        (fed, 2, "x:4294967295", "'x' (Placeholder) has 1 output(s)"),
        (call, 7, "c:4294967295", "'c' (f) has 1 output(s)"),
    ] {
        for cmd in [&["analyze", "{}"][..], &["cluster", "{}"], &["run", "{}", "--feed", "x=1", "--no-cluster"]] {
            let e = refused(&format!("{cmd:?} {input}"), &run_on("g.graph", graph, cmd));
            assert!(e.starts_with(&format!("error: g.graph:{line}:1: node '")), "{e}");
            assert!(e.contains(&format!("input '{input}' reads output")) && e.ends_with(producer), "{e}");
        }
    }
}

#[test]
fn function_body_ports_are_checked_at_load_for_every_command() {
    // Found by hand after the fuzzer: a body reading `n:y:4294967295` passed the load
    // check, and the clustered run panicked in encapsulation on the inlined port.
    for (input, line) in [("n:y:4294967295", "3:3: "), ("n:y:7", "3:3: ")] {
        let g = format!(
            "function f(x: float32) -> (y: float32) {{\n  n = Neg(x) {{T = float32}}\n  m = Neg({input}) {{T = float32}}\n  \
             return y = m:y:0\n}}\n\
             a = Placeholder() {{dtype = float32, shape = shape[]}}\nc = f(a)\n"
        );
        for cmd in [
            &["analyze", "{}"][..],
            &["cluster", "{}"],
            &["run", "{}", "--feed", "a=1", "--fetch", "c"],
            &["run", "{}", "--feed", "a=1", "--fetch", "c", "--no-cluster"],
        ] {
            let e = refused(&format!("{cmd:?} {input}"), &run_on("g.graph", &g, cmd));
            let want = format!(
                "error: g.graph: function 'f': {line}node 'm': input '{input}' reads output {} but 'n' (Neg) has 1 output(s)",
                input.rsplit(':').next().unwrap()
            );
            assert_eq!(e, want);
        }
    }
}

#[test]
fn opaque_producer_ports_are_bounded_by_the_executor() {
    // An op that does not declare its outputs: its ports pass the load check, and the
    // executor bounds them before sizing its slot table (this once allocated 8 GB).
    let g =
        "x = Placeholder() {dtype = float32, shape = shape[]}\nu = NoSuchOp(x)\ny = Neg(u:2147483647) {T = float32}\n";
    for plain in [false, true] {
        let mut args = vec!["run", "{}", "--feed", "x=1", "--fetch", "y"];
        if plain {
            args.push("--no-cluster");
        }
        let e = refused("opaque", &run_on("g.graph", g, &args));
        assert!(e.contains("node 'y' (Neg): input 'u:2147483647' reads output 2147483647 of 'u' (NoSuchOp)"), "{e}");
    }
}

/// Runs `autoclust run` on a one-variable graph in a fresh directory with
/// `outputs` (output options); returns the result and the files left there.
fn run_with_outputs(outputs: &[&str]) -> (Output, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let graph = "v = VarHandleOp() {container = \"\", dtype = float32, shape = shape[], shared_name = \"v\"}\n\
                 one = Const() {dtype = float32, value = float32[]{1.0}}\n\
                 init = AssignVariableOp(v, one) {dtype = float32}\n\
                 r = ReadVariableOp(v, ^init) {dtype = float32}\n";
    std::fs::write(dir.path().join("g.graph"), graph).unwrap();
    let mut args = vec!["run", "g.graph", "--fetch", "r:0"];
    args.extend_from_slice(outputs);
    let out = bin().current_dir(dir.path()).args(&args).output().unwrap();
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "g.graph")
        .collect();
    left.sort();
    (out, left)
}

#[test]
fn output_files_are_all_written_or_none() {
    // Two options naming one file would keep only one of them: a usage error, before running.
    for (outputs, says) in [
        (
            &["--out", "o.safetensors", "--save-vars", "o.safetensors"][..],
            "--out and --save-vars both name o.safetensors",
        ),
        (
            &["--out", "o.safetensors", "--save-vars", "./o.safetensors"][..],
            "--out and --save-vars both name ./o.safetensors",
        ),
        (&["--out", "o.safetensors", "--save-vars", "missing/v.safetensors"][..], "directory missing does not exist"),
        (&["--out", "missing/o.safetensors", "--save-vars", "v.safetensors"][..], "directory missing does not exist"),
        (&["--out", ".", "--save-vars", "v.safetensors"][..], "is a directory"),
        (&["--out", "c.index", "--save-checkpoint", "c"][..], "--out and --save-checkpoint both name c.index"),
    ] {
        for mode in [&[][..], &["--no-cluster"][..]] {
            let mut args = outputs.to_vec();
            args.extend_from_slice(mode);
            let (out, left) = run_with_outputs(&args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(stderr.starts_with("error: ") && stderr.contains(says), "{args:?}: {stderr}");
            assert!(left.is_empty(), "{args:?} left {left:?}");
        }
    }
    // The good case writes both, and a checkpoint directory is created.
    let (out, left) =
        run_with_outputs(&["--out", "o.safetensors", "--save-vars", "v.safetensors", "--save-checkpoint", "ck/step"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(left, ["ck", "o.safetensors", "v.safetensors"]);
}

/// Runs `args` in a fresh directory holding `g.graph` = `graph`; returns (exit code, stderr).
fn probe(graph: &str, args: &[&str]) -> (Option<i32>, String) {
    let out = run_on("g.graph", graph, args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{args:?}: panic: {stderr}");
    (out.status.code(), stderr.trim_end().to_string())
}

const NEG: &str = "x = Placeholder() {dtype = float32, shape = shape[]}\ny = Neg(x) {T = float32}\n";

#[test]
fn usage_mistakes_are_refused_not_guessed() {
    for (args, code, says) in [
        (&["run", "{}", "--feed", "x=2", "--feed", "x=3", "--fetch", "y"][..], 2, "error: --feed 'x' is given twice"),
        (&["run", "{}", "--feed", "x=2", "--fetch", "y", "--steps", "0"][..], 2, "error: --steps must be at least 1"),
        (
            &["run", "{}", "--feed", "x=2", "--fetch", "y", "--threads", "100000"][..],
            2,
            "error: --threads 100000: at most 1024",
        ),
        (
            &["bench", "{}", "--feed", "x=2", "--fetch", "y", "--threads", "100000"][..],
            2,
            "error: --threads 100000: at most 1024",
        ),
        (
            &["run", "{}", "--feed", "x=true", "--fetch", "y"][..],
            1,
            "error: --feed 'x': true is a bool, not a float32 number",
        ),
        (
            &["run", "{}", "--feed", "x=[1, false]", "--fetch", "y"][..],
            1,
            "error: --feed 'x': false is a bool, not a float32 number",
        ),
        (
            &["explore", "{}", "--feed", "x=2", "--feed", "x=3", "--fetch", "y"][..],
            2,
            "error: --feed 'x' is given twice",
        ),
    ] {
        let (got, stderr) = probe(NEG, args);
        assert_eq!(got, Some(code), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().next(), Some(says), "{args:?}");
    }
}

/// `for (;;) i += 1` — a loop whose condition never turns false.
const ENDLESS: &str = "zero = Const() {dtype = int32, value = int32[]{0}}
loop = While(zero) {T = [int32], cond = @cond, body = @body, parallel_iterations = 10}
function cond(i: int32) -> (c: bool) {
  t = Const() {dtype = bool, value = bool[]{true}}
  return c = t:output:0
}
function body(i: int32) -> (i2: int32) {
  one = Const() {dtype = int32, value = int32[]{1}}
  next = AddV2(i, one:output:0) {T = int32}
  return i2 = next:z:0
}
";

#[test]
fn endless_loops_stop_at_the_iteration_bound_naming_the_loop_and_step() {
    // Clustered, the pure loop is compiled inside `cluster_0`: the error names the loop
    // through the cluster.
    for (mode, node) in [
        (&[][..], "node 'cluster_0' (cluster_0_fn): in cluster node 'loop' (While)"),
        (&["--no-cluster"][..], "node 'loop' (While)"),
    ] {
        let mut args = vec!["run", "{}", "--fetch", "loop", "--max-loop-iterations", "500", "--steps", "2"];
        args.extend_from_slice(mode);
        let (code, stderr) = probe(ENDLESS, &args);
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert_eq!(
            stderr,
            format!(
                "error: step 1 of 2: {node}: the loop ran 500 iterations and its condition 'cond' is still true: \
                 --max-loop-iterations 500 reached (raise it if the loop is meant to run longer)"
            ),
            "{args:?}"
        );
    }
    // A bound the loop stays under changes nothing: `i < 7` ends at 7.
    let bounded = ENDLESS.replace(
        "t = Const() {dtype = bool, value = bool[]{true}}\n  return c = t:output:0",
        "seven = Const() {dtype = int32, value = int32[]{7}}\n  l = Less(i, seven:output:0) {T = int32}\n  return c = l:z:0",
    );
    let out = run_on("g.graph", &bounded, &["run", "{}", "--fetch", "loop", "--max-loop-iterations", "7", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"data\": [7]"), "{}", String::from_utf8_lossy(&out.stdout));
    let (code, stderr) = probe(NEG, &["run", "{}", "--feed", "x=1", "--fetch", "y", "--max-loop-iterations", "0"]);
    assert_eq!((code, stderr.as_str()), (Some(2), "error: --max-loop-iterations must be at least 1"));
}

/// `levels` nested attribute values in the native format, `@f{a = @f{a = … 1 …}}`, as
/// attribute `f` of a `NoOp` `x` beside a constant `c`.
fn native_nested_funcs(levels: usize) -> String {
    let mut v = "1".to_string();
    for _ in 1..levels {
        v = format!("@f{{a = {v}}}");
    }
    format!("c = Const() {{dtype = float32, value = float32[]{{1.0}}}}\nx = NoOp() {{f = {v}}}\n")
}

/// The same graph as a `.pbtxt`: `func { name: "f" attr { key: "a" value { … } } }`.
fn pbtxt_nested_funcs(levels: usize) -> String {
    let mut v = "i: 1".to_string();
    for _ in 1..levels {
        v = format!("func {{ name: \"f\" attr {{ key: \"a\" value {{ {v} }} }} }}");
    }
    format!(
        "node {{ name: \"c\" op: \"Const\" attr {{ key: \"dtype\" value {{ type: DT_FLOAT }} }} \
         attr {{ key: \"value\" value {{ tensor {{ dtype: DT_FLOAT float_val: 1 }} }} }} }}\n\
         node {{ name: \"x\" op: \"NoOp\"\n  attr {{ key: \"f\" value {{ {v} }} }}\n}}\n"
    )
}

/// The same graph as a binary GraphDef, written field by field (no encoder
/// would build a message this deep).
fn pb_nested_funcs(levels: usize) -> Vec<u8> {
    fn field(number: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for mut n in [u64::from(number << 3 | 2), payload.len() as u64] {
            while n >= 0x80 {
                out.push(n as u8 | 0x80);
                n >>= 7;
            }
            out.push(n as u8);
        }
        out.extend_from_slice(payload);
        out
    }
    let entry = |key: &[u8], value: &[u8]| [field(1, key), field(2, value)].concat();
    let mut v = vec![3 << 3, 1]; // AttrValue { i: 1 }
    for _ in 1..levels {
        let func = [field(1, b"f"), field(2, &entry(b"a", &v))].concat();
        v = field(10, &func); // AttrValue { func: NameAttrList { name: "f", attr { "a": v } } }
    }
    // c = Const { dtype: DT_FLOAT, value: tensor { dtype: DT_FLOAT float_val: 1 } }
    let tensor = [&[1 << 3, 1][..], &field(5, &1f32.to_le_bytes())].concat();
    let c = [
        field(1, b"c"),
        field(2, b"Const"),
        field(5, &entry(b"dtype", &[6 << 3, 1])),
        field(5, &entry(b"value", &field(8, &tensor))),
    ];
    [field(1, &c.concat()), field(1, &[field(1, b"x"), field(2, b"NoOp"), field(5, &entry(b"f", &v))].concat())]
        .concat()
}

/// The commands that read a graph, each on `{}`.
const READERS: [&[&str]; 5] = [
    &["analyze", "{}"],
    &["convert", "{}", "-o", "out.graph"],
    &["cluster", "{}"],
    &["run", "{}", "--fetch", "c"],
    &["run", "{}", "--fetch", "c", "--no-cluster"],
];

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    // Found by fuzzing: ~3,400 nested func attributes in a .pbtxt, ~11,300 nested lists or
    // ~7,400 nested `@f{…}` in the native format overflowed the stack (SIGABRT).
    let lists = format!("x = NoOp() {{f = {}1{}}}\n", "[".repeat(20_000), "]".repeat(20_000));
    let cases: [(&str, Vec<u8>, &str); 5] = [
        (
            "d.pbtxt",
            pbtxt_nested_funcs(5_000).into_bytes(),
            "error: d.pbtxt:3:4125: node 'x': attribute 'f': nested deeper than 100 levels",
        ),
        (
            "d.graph",
            native_nested_funcs(10_000).into_bytes(),
            "error: d.graph:2:717: node 'x': attribute 'f': nested deeper than 100 levels",
        ),
        (
            "d.graph",
            lists.into_bytes(),
            "error: d.graph:1:18: node 'x': attribute 'f': lists hold strings, ints, floats, bools, types, shapes, tensors or functions",
        ),
        ("d.pb", pb_nested_funcs(5_000), "error: d.pb: not a binary GraphDef: messages nested deeper than 400 levels"),
        ("d.pb", pb_nested_funcs(101), "error: d.pb: node 'x': attribute 'f': nested deeper than 100 levels"),
    ];
    for (name, content, says) in cases {
        for args in READERS {
            let e = refused(&format!("{args:?} {name}"), &run_on_bytes(name, &content, args));
            assert_eq!(e, says, "{args:?}");
        }
    }
}

#[test]
fn nesting_up_to_the_limit_is_read_printed_and_run() {
    for (name, content) in [
        ("n.pbtxt", pbtxt_nested_funcs(100).into_bytes()),
        ("n.graph", native_nested_funcs(100).into_bytes()),
        ("n.pb", pb_nested_funcs(100)),
    ] {
        for args in
            READERS.iter().chain([&["convert", "{}", "-o", "out.pbtxt"][..], &["convert", "{}", "-o", "out.pb"]].iter())
        {
            let out = run_on_bytes(name, &content, args);
            assert!(out.status.success(), "{args:?} {name}: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    // What `convert` writes at the limit reads back, in every format.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("n.graph"), native_nested_funcs(100)).unwrap();
    for (from, to) in [("n.graph", "a.pbtxt"), ("a.pbtxt", "b.pb"), ("b.pb", "c.graph")] {
        let out = bin().current_dir(dir.path()).args(["convert", from, "-o", to]).output().unwrap();
        assert!(out.status.success(), "{from} -> {to}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let back = std::fs::read_to_string(dir.path().join("c.graph")).unwrap();
    assert_eq!(back, native_nested_funcs(100));
}

/// `levels` functions, each calling the next; `y = f0(x)` with the last one `-a`.
fn call_chain(levels: usize) -> String {
    let mut src = String::new();
    for i in 0..levels {
        src.push_str(&format!("function f{i}(a: float32) -> (out: float32) {{\n"));
        if i + 1 == levels {
            src.push_str("  m = Neg(a) {T = float32}\n  return out = m:y:0\n}\n");
        } else {
            src.push_str(&format!("  m = f{}(a)\n  return out = m:out:0\n}}\n", i + 1));
        }
    }
    src + "x = Placeholder() {dtype = float32, shape = shape[]}\ny = f0(x)\n"
}

#[test]
fn call_chains_deeper_than_the_limit_are_refused_at_load() {
    // Found by fuzzing: 10,000 functions each calling the next took 23 GB (plan building
    // descends once per level, and each level's body held a copy of the library).
    let chain = call_chain(10_000);
    let line = 4 * 10_000 + 2;
    for args in [
        &["analyze", "{}"][..],
        &["convert", "{}", "-o", "out.pbtxt"],
        &["cluster", "{}"],
        &["run", "{}", "--feed", "x=2", "--fetch", "y"],
        &["run", "{}", "--feed", "x=2", "--fetch", "y", "--no-cluster", "--no-optimize"],
    ] {
        let e = refused(&format!("{args:?}"), &run_on("g.graph", &chain, args));
        assert_eq!(
            e,
            format!(
                "error: g.graph:{line}:1: node 'y': function calls nested deeper than 1000 levels \
                 (f0 -> f1 -> f2 -> …: 10000 levels)"
            ),
            "{args:?}"
        );
    }
    // At the limit the graph loads; a chain of 100 calls also runs, in both modes.
    for args in [&["analyze", "{}"][..], &["cluster", "{}"]] {
        let out = run_on("g.graph", &call_chain(1000), args);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    for mode in [&[][..], &["--no-cluster", "--no-optimize"]] {
        let mut args = vec!["run", "{}", "--feed", "x=2", "--fetch", "y", "--json"];
        args.extend_from_slice(mode);
        let out = run_on("g.graph", &call_chain(100), &args);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).contains("\"data\": [-2.0]"), "{args:?}");
    }
}

/// A TF2 loop (made by TensorFlow: `tf.TensorArray(dynamic_size=True)` written 10⁸ times with
/// 8 KB) grows its list past `--max-tensor-bytes` long before `--max-loop-iterations`: the
/// element that crosses the budget fails, naming the `TensorListSetItem`, in both modes
/// (sweep 75: only the final `TensorListStack` was checked, and the list grew until the
/// allocator aborted the process).
#[test]
fn a_list_growing_every_iteration_stops_at_the_tensor_budget() {
    let graph = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/run/tensor_array_grows_every_iteration.pbtxt");
    for mode in [&[][..], &["--no-cluster"][..]] {
        let mut args =
            vec!["run", graph, "--feed", "x=[1,2]", "--fetch", "Identity:0", "--max-tensor-bytes", "1000000"];
        args.extend_from_slice(mode);
        let out = bin().args(&args).output().unwrap();
        let e = refused(&format!("{mode:?}"), &out);
        assert!(
            e.contains("node 'while/TensorArrayV2Write/TensorListSetItem' (TensorListSetItem): tensor float32[126, 2000] needs 1008000 bytes"),
            "{mode:?}: {e}"
        );
    }
}
