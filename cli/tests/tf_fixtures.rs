//! Numerics against real TensorFlow: runs every `testdata/tf/*.json`
//! manifest through `autoclust run`, both `--no-cluster` (the reference
//! executor) and clustered (the JIT behind the bridge), and compares with the
//! results TensorFlow stored next to it (testdata/tf/README.md): float32
//! within 1e-5 relative (absolute floor 1e-6), integers and bools exactly;
//! for racy graphs the result must be one of TensorFlow's `outcomes`.
//!
//! Each manifest also records how the clustered run must go, as
//! `"clusters": {"compiled": C, "interpreted": I, "notes": N}` — clusters
//! that ran compiled, clusters the interpreter ran, and `note:` lines
//! (docs/contract.md, "Never silent") — checked with `autoclust bench --json`
//! and the clustered run's stderr, so a regression to interpretation or to
//! an unclustered run fails here. `AUTOCLUST_BLESS=1` rewrites the records
//! from what the current build does (review the diff: it is the claim).
//!
//! String tensors (no safetensors dtype) use three more manifest fields:
//! `string_feeds` (each given as `--feed NAME=JSON`), `expected_strings` (string
//! fetches, compared exactly — through `data_b64` when TensorFlow's bytes are not UTF-8,
//! e.g. a serialized `Summary`; such a fixture is fetched with `--json` instead of
//! `--out`) and `expected_stderr` (what TensorFlow's `PrintV2` ops printed, compared
//! with the run's stderr less its `note:` lines).
//!
//! Differential guard for the graph-optimization pipeline (`opt --passes
//! default`): every fixture also runs with `--no-optimize` in both modes, and
//! all four runs must match TensorFlow's results (the cluster record is
//! checked on the default, optimized, clustered run).

use std::path::{Path, PathBuf};
use std::process::Command;

use autoclust_graph::Tensor;
use autoclust_runtime::tensor_io::read_safetensors;

/// Fixtures the runtime cannot run yet, with the reason (reported, not hidden).
const UNSUPPORTED: &[(&str, &str)] = &[];

/// `testdata/tf`, or `AUTOCLUST_FIXTURE_DIR` when set: fixtures made by the same generators
/// into another directory (large probes such as `keras.applications` models that are too big
/// to keep in the repository) run through the same comparisons.
fn dir() -> PathBuf {
    match std::env::var_os("AUTOCLUST_FIXTURE_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/tf"),
    }
}

/// `got` against TensorFlow's `want`: float32 within 1e-5 relative (absolute floor 1e-6),
/// integers and bools exactly. A fixture in half precision records `"half_tolerance"`: its
/// floats then agree within that fraction of the tensor's largest magnitude (TensorFlow
/// accumulates some half-precision sums in half precision, in Eigen's order, where autoclust
/// accumulates in float32 — as TensorFlow does with oneDNN; see make_fixtures_keras_sweep.py).
fn close(name: &str, got: &Tensor, want: &Tensor, half_tolerance: Option<f64>) -> Result<(), String> {
    if got.dtype != want.dtype || got.shape != want.shape {
        return Err(format!("{name}: got {} {:?}, want {} {:?}", got.dtype, got.shape, want.dtype, want.shape));
    }
    let (g, w) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
    let float = got.dtype.is_float();
    let scale = w.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = match half_tolerance {
            _ if !float => a == b,
            // Equal infinities (their difference is NaN).
            _ if a == b || (a.is_nan() && b.is_nan()) => true,
            Some(tol) => (a - b).abs() <= tol * scale + 1e-6,
            None => (a - b).abs() <= 1e-5 * b.abs().max(a.abs()) + 1e-6,
        };
        if !ok {
            return Err(format!("{name}[{i}]: got {a}, want {b}"));
        }
    }
    Ok(())
}

fn flat(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec().unwrap()
}

fn run_fixture(manifest: &Path, clustered: bool, optimize: bool) -> Result<(), String> {
    run_fixture_on(manifest, None, clustered, optimize)
}

/// [`run_fixture`], running `program` (a program `compile` wrote from the fixture) instead
/// of the fixture's graph when given.
fn run_fixture_on(manifest: &Path, program: Option<&Path>, clustered: bool, optimize: bool) -> Result<(), String> {
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(manifest).unwrap()).unwrap();
    let d = dir();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.safetensors");
    let saved = tmp.path().join("vars.safetensors");
    let graph = program.map_or_else(|| d.join(m["graph"].as_str().unwrap()), Path::to_path_buf);
    let mut args: Vec<String> = vec!["run".into(), graph.display().to_string()];
    if !clustered {
        args.push("--no-cluster".into());
    }
    if !optimize {
        args.push("--no-optimize".into());
    }
    for (flag, key) in [("--feeds", "feeds"), ("--vars", "vars")] {
        if let Some(f) = m[key].as_str() {
            args.push(flag.into());
            args.push(d.join(f).display().to_string());
        }
    }
    let list = |key: &str| -> Vec<String> {
        m[key].as_array().map(|a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect()).unwrap_or_default()
    };
    let (mut fetch, target) = (list("fetch"), list("target"));
    if let Some(feeds) = m["string_feeds"].as_object() {
        for (name, t) in feeds {
            args.push("--feed".into());
            args.push(format!("{name}={t}"));
        }
    }
    let strings = m["expected_strings"].as_object().filter(|o| !o.is_empty());
    if let Some(strings) = strings {
        fetch.extend(strings.keys().cloned());
    }
    if !fetch.is_empty() {
        args.push("--fetch".into());
        args.push(fetch.join(","));
    }
    if !target.is_empty() {
        args.push("--target".into());
        args.push(target.join(","));
    }
    args.push("--steps".into());
    args.push(m["steps"].as_u64().unwrap_or(1).to_string());
    if strings.is_some() {
        args.push("--json".into());
    } else {
        args.extend(["--out".into(), out.display().to_string()]);
    }
    args.extend(["--save-vars".into(), saved.display().to_string()]);
    let res = Command::new(env!("CARGO_BIN_EXE_autoclust")).args(&args).output().unwrap();
    if !res.status.success() {
        return Err(format!("run failed: {}", String::from_utf8_lossy(&res.stderr)));
    }
    let stderr = String::from_utf8_lossy(&res.stderr);
    let notes: Vec<&str> = stderr.lines().filter(|l| l.starts_with("note: ")).collect();
    if !clustered && !notes.is_empty() {
        return Err(format!("--no-cluster printed notes: {notes:?}"));
    }
    if clustered && optimize && program.is_none() {
        check_cluster_record(manifest, &m, &args, &notes)?;
    } else if clustered && notes.iter().any(|n| n.contains("unoptimized")) {
        return Err(format!("optimization fell back: {notes:?}"));
    }
    if let Some(want) = m["expected_stderr"].as_str() {
        let printed: String = stderr.split_inclusive('\n').filter(|l| !l.starts_with("note: ")).collect();
        if printed != want {
            return Err(format!("stderr: got {printed:?}, TensorFlow printed {want:?}"));
        }
    }
    let got_f = match strings {
        None => read_safetensors(&std::fs::read(&out).unwrap()).unwrap(),
        Some(strings) => {
            let json: serde_json::Value =
                serde_json::from_slice(&res.stdout).map_err(|e| format!("run --json: {e}"))?;
            let mut got = Vec::new();
            for (name, t) in json["fetches"].as_object().ok_or("run --json: no fetches")? {
                let dtype = autoclust_graph::DType::from_name(t["dtype"].as_str().unwrap_or("")).unwrap();
                if let Some(want) = strings.get(name) {
                    // Bytes that are not UTF-8 (a serialized Summary) are compared exactly, in base64.
                    let key = if want.get("data_b64").is_some() { "data_b64" } else { "data" };
                    let list = |v: &serde_json::Value| -> Vec<String> {
                        v[key]
                            .as_array()
                            .map_or(vec![], |a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect())
                    };
                    let (data, want_data) = (list(t), list(want));
                    if t["shape"] != want["shape"] || data != want_data {
                        return Err(format!(
                            "{name}: got {} {data:?}, TensorFlow gave {} {want_data:?}",
                            t["shape"], want["shape"]
                        ));
                    }
                    continue;
                }
                let t = autoclust_runtime::tensor_io::tensor_from_json(&t.to_string(), dtype).unwrap();
                got.push((name.clone(), t));
            }
            got
        }
    };
    let got_v = read_safetensors(&std::fs::read(&saved).unwrap()).unwrap();
    if m["racy"].as_bool().unwrap_or(false) {
        let outcomes = m["outcomes"].as_array().ok_or("racy fixture without outcomes")?;
        let matches = |o: &serde_json::Value| {
            let same = |got: &[(String, Tensor)], want: &serde_json::Value| {
                want.as_object().unwrap().iter().all(|(k, v)| {
                    let w: Vec<f64> = v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
                    got.iter().find(|(n, _)| n == k).is_some_and(|(_, t)| flat(t) == w)
                })
            };
            same(&got_f, &o["fetches"]) && same(&got_v, &o["variables"])
        };
        if !outcomes.iter().any(matches) {
            return Err(format!("result is not one of TensorFlow's outcomes: fetches {got_f:?}, vars {got_v:?}"));
        }
        return Ok(());
    }
    for (key, got) in [("expected_fetches", &got_f), ("expected_vars", &got_v)] {
        let Some(f) = m[key].as_str() else { continue };
        let want = read_safetensors(&std::fs::read(d.join(f)).unwrap()).unwrap();
        for (name, w) in &want {
            let g = got.iter().find(|(n, _)| n == name).ok_or_else(|| format!("{key}: '{name}' missing"))?;
            close(name, &g.1, w, m["half_tolerance"].as_f64())?;
        }
    }
    Ok(())
}

/// Checks (or with `AUTOCLUST_BLESS=1` rewrites) the manifest's `"clusters"`
/// record against `bench --json` on the same inputs and the run's notes.
fn check_cluster_record(
    manifest: &Path,
    m: &serde_json::Value,
    run_args: &[String],
    notes: &[&str],
) -> Result<(), String> {
    // The run's inputs without its outputs and step count.
    let mut args: Vec<String> = vec!["bench".into()];
    let mut i = 1;
    while i < run_args.len() {
        match run_args[i].as_str() {
            "--out" | "--save-vars" | "--steps" => i += 2,
            "--json" => i += 1,
            a => {
                args.push(a.to_string());
                i += 1;
            }
        }
    }
    args.extend(["--steps".into(), "1".into(), "--json".into()]);
    let res = Command::new(env!("CARGO_BIN_EXE_autoclust")).args(&args).output().unwrap();
    if !res.status.success() {
        return Err(format!("bench failed: {}", String::from_utf8_lossy(&res.stderr)));
    }
    let bench: serde_json::Value = serde_json::from_slice(&res.stdout).map_err(|e| format!("bench --json: {e}"))?;
    let got = serde_json::json!({
        "compiled": bench["compiled_clusters"],
        "interpreted": bench["interpreted_clusters"],
        "notes": notes.len(),
    });
    if std::env::var_os("AUTOCLUST_BLESS").is_some() {
        let mut m = m.clone();
        m["clusters"] = got;
        let text = serde_json::to_string_pretty(&m).unwrap() + "\n";
        std::fs::write(manifest, text).unwrap();
        return Ok(());
    }
    let want = &m["clusters"];
    if want.is_null() {
        return Err(format!("no \"clusters\" record (run with AUTOCLUST_BLESS=1 to write {got})"));
    }
    if *want != got {
        return Err(format!("clusters: got {got}, the manifest records {want}; notes: {notes:?}"));
    }
    Ok(())
}

/// Every fixture's manifest, sorted.
fn manifests() -> Vec<PathBuf> {
    let mut manifests: Vec<PathBuf> = std::fs::read_dir(dir())
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "json")).collect()
        })
        .unwrap_or_default();
    manifests.sort();
    manifests
}

#[test]
fn tensorflow_fixtures_match() {
    let manifests = manifests();
    let mut failures = Vec::new();
    let mut ran = 0;
    for m in &manifests {
        let stem = m.file_stem().unwrap().to_string_lossy().to_string();
        // `AUTOCLUST_FIXTURES=strings` runs only the fixtures whose name contains it.
        if std::env::var("AUTOCLUST_FIXTURES").is_ok_and(|f| !stem.contains(&f)) {
            continue;
        }
        if let Some((_, why)) = UNSUPPORTED.iter().find(|(n, _)| *n == stem) {
            eprintln!("skipping {stem}: {why}");
            continue;
        }
        for (clustered, optimize) in [(false, true), (true, true), (false, false), (true, false)] {
            ran += 1;
            if let Err(e) = run_fixture(m, clustered, optimize) {
                let mode = if clustered { "clustered" } else { "--no-cluster" };
                let opt = if optimize { "" } else { ", --no-optimize" };
                failures.push(format!("{stem} ({mode}{opt}): {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{} of {ran} fixture runs differ:\n{}", failures.len(), failures.join("\n"));
}

/// `compile --fetch/--target` for each fixture's request writes a program that runs to
/// TensorFlow's results by the request's own names — as written (`--no-cluster
/// --no-optimize`: its cluster calls and bridges as they are) and through `run`'s pipeline
/// again (its cluster calls inlined and clustered anew). The program keeps what the request
/// does not need out of every step: a TF1 initializer that shared a cluster with a loop's
/// first value once re-ran on every training step of the written program.
#[test]
fn compiled_programs_match_tensorflow() {
    let manifests = manifests();
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let mut ran = 0;
    for manifest in &manifests {
        let stem = manifest.file_stem().unwrap().to_string_lossy().to_string();
        if std::env::var("AUTOCLUST_FIXTURES").is_ok_and(|f| !stem.contains(&f))
            || UNSUPPORTED.iter().any(|(n, _)| *n == stem)
        {
            continue;
        }
        let m: serde_json::Value = serde_json::from_slice(&std::fs::read(manifest).unwrap()).unwrap();
        let list = |key: &str| -> Vec<String> {
            m[key].as_array().map(|a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect()).unwrap_or_default()
        };
        let mut fetch = list("fetch");
        if let Some(strings) = m["expected_strings"].as_object() {
            fetch.extend(strings.keys().cloned());
        }
        let target = list("target");
        let program = tmp.path().join(format!("{stem}.graph"));
        let mut args: Vec<String> = vec![
            "compile".into(),
            dir().join(m["graph"].as_str().unwrap()).display().to_string(),
            "-o".into(),
            program.display().to_string(),
        ];
        if !fetch.is_empty() {
            args.extend(["--fetch".into(), fetch.join(",")]);
        }
        if !target.is_empty() {
            args.extend(["--target".into(), target.join(",")]);
        }
        let res = Command::new(env!("CARGO_BIN_EXE_autoclust")).args(&args).output().unwrap();
        if !res.status.success() {
            failures.push(format!("{stem}: compile failed: {}", String::from_utf8_lossy(&res.stderr)));
            continue;
        }
        for (clustered, optimize) in [(false, false), (true, true)] {
            ran += 1;
            if let Err(e) = run_fixture_on(manifest, Some(&program), clustered, optimize) {
                failures.push(format!("{stem} (compiled, {}): {e}", if clustered { "run" } else { "as written" }));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {ran} runs of compiled programs differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// `PrintV2` output order follows the graph's edges whatever the schedule: every fixture
/// with an `expected_stderr` prints exactly TensorFlow's text under several seeded-random
/// schedules and with several threads.
#[test]
fn prints_follow_control_edges_under_any_schedule() {
    let d = dir();
    let mut checked = 0;
    for entry in std::fs::read_dir(&d).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let Some(want) = m["expected_stderr"].as_str().filter(|s| !s.is_empty()) else { continue };
        let mut args: Vec<String> = vec!["run".into(), d.join(m["graph"].as_str().unwrap()).display().to_string()];
        if let Some(f) = m["feeds"].as_str() {
            args.extend(["--feeds".into(), d.join(f).display().to_string()]);
        }
        if let Some(feeds) = m["string_feeds"].as_object() {
            for (name, t) in feeds {
                args.extend(["--feed".into(), format!("{name}={t}")]);
            }
        }
        for (flag, key) in [("--fetch", "fetch"), ("--target", "target")] {
            let list: Vec<&str> = m[key].as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect();
            if !list.is_empty() {
                args.extend([flag.into(), list.join(",")]);
            }
        }
        args.push("--json".into());
        let modes: Vec<Vec<String>> = (1..=4)
            .map(|s| vec!["--no-cluster".to_string(), "--schedule-seed".into(), s.to_string()])
            .chain([
                vec!["--threads".to_string(), "4".into()],
                vec!["--no-cluster".into(), "--threads".into(), "4".into()],
            ])
            .collect();
        for extra in modes {
            let res = Command::new(env!("CARGO_BIN_EXE_autoclust")).args(&args).args(&extra).output().unwrap();
            assert!(res.status.success(), "{}: {}", path.display(), String::from_utf8_lossy(&res.stderr));
            let stderr = String::from_utf8_lossy(&res.stderr);
            let printed: String = stderr.split_inclusive('\n').filter(|l| !l.starts_with("note: ")).collect();
            assert_eq!(printed, want, "{} with {extra:?}", path.display());
        }
        checked += 1;
    }
    assert!(checked >= 2, "only {checked} fixtures print");
}

/// `opt --passes run` prints the program `run` executes (issue 12: the run pipeline as
/// data): for every fixture, the printed program for the fixture's request, run by the
/// plain executor with nothing more done to it (`--no-cluster --no-optimize`), its
/// anchors fetched and targeted instead of the nodes they stand for, gives TensorFlow's
/// results. Racy and string fixtures are left to the test above.
#[test]
fn the_printed_run_program_matches_tensorflow() {
    let d = dir();
    let mut manifests: Vec<PathBuf> = std::fs::read_dir(&d)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    manifests.sort();
    let (mut failures, mut ran) = (Vec::new(), 0);
    for manifest in &manifests {
        let m: serde_json::Value = serde_json::from_slice(&std::fs::read(manifest).unwrap()).unwrap();
        let stem = manifest.file_stem().unwrap().to_string_lossy().to_string();
        if m["racy"].as_bool().unwrap_or(false) || m["string_feeds"].is_object() || m["expected_strings"].is_object() {
            continue;
        }
        if UNSUPPORTED.iter().any(|(n, _)| *n == stem) {
            continue;
        }
        ran += 1;
        if let Err(e) = run_printed_program(&d, &m) {
            failures.push(format!("{stem}: {e}"));
        }
    }
    assert!(ran >= 20, "only {ran} fixtures ran");
    assert!(failures.is_empty(), "{} of {ran} printed programs differ:\n{}", failures.len(), failures.join("\n"));
}

fn run_printed_program(d: &Path, m: &serde_json::Value) -> Result<(), String> {
    let tmp = tempfile::tempdir().unwrap();
    let list = |key: &str| -> Vec<String> {
        m[key].as_array().map(|a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect()).unwrap_or_default()
    };
    let (fetch, target) = (list("fetch"), list("target"));
    let mut opt: Vec<String> =
        vec!["opt".into(), d.join(m["graph"].as_str().unwrap()).display().to_string(), "--passes".into(), "run".into()];
    let mut run: Vec<String> = vec!["run".into(), tmp.path().join("program.graph").display().to_string()];
    run.extend(["--no-cluster".into(), "--no-optimize".into()]);
    // The anchors `anchor` names in request order (no fixture has a node of those names).
    let anchors = |flag: &str, names: &[String], base: &str, port: &str| -> [Vec<String>; 2] {
        let anchored: Vec<String> = (0..names.len()).map(|k| format!("{base}{k}{port}")).collect();
        [vec![flag.into(), names.join(",")], vec![flag.into(), anchored.join(",")]]
    };
    for (flag, names, base, port) in
        [("--fetch", &fetch, "_autoclust_fetch_", ":0"), ("--target", &target, "_autoclust_target_", "")]
    {
        if !names.is_empty() {
            let [o, r] = anchors(flag, names, base, port);
            opt.extend(o);
            run.extend(r);
        }
    }
    let res = Command::new(env!("CARGO_BIN_EXE_autoclust")).args(&opt).output().unwrap();
    if !res.status.success() {
        return Err(format!("opt failed: {}", String::from_utf8_lossy(&res.stderr)));
    }
    std::fs::write(tmp.path().join("program.graph"), &res.stdout).unwrap();
    for (flag, key) in [("--feeds", "feeds"), ("--vars", "vars")] {
        if let Some(f) = m[key].as_str() {
            run.extend([flag.into(), d.join(f).display().to_string()]);
        }
    }
    let (out, saved) = (tmp.path().join("out.safetensors"), tmp.path().join("vars.safetensors"));
    run.extend(["--steps".into(), m["steps"].as_u64().unwrap_or(1).to_string()]);
    run.extend(["--out".into(), out.display().to_string(), "--save-vars".into(), saved.display().to_string()]);
    let res = Command::new(env!("CARGO_BIN_EXE_autoclust")).args(&run).output().unwrap();
    if !res.status.success() {
        return Err(format!("running the program failed: {}", String::from_utf8_lossy(&res.stderr)));
    }
    // Fetch k came back as `_autoclust_fetch_k:0`.
    let got_f: Vec<(String, Tensor)> = read_safetensors(&std::fs::read(&out).unwrap())
        .unwrap()
        .into_iter()
        .map(|(name, t)| {
            let k: usize = name.trim_start_matches("_autoclust_fetch_").trim_end_matches(":0").parse().unwrap();
            (fetch[k].clone(), t)
        })
        .collect();
    let got_v = read_safetensors(&std::fs::read(&saved).unwrap()).unwrap();
    for (key, got) in [("expected_fetches", &got_f), ("expected_vars", &got_v)] {
        let Some(f) = m[key].as_str() else { continue };
        let want = read_safetensors(&std::fs::read(d.join(f)).unwrap()).unwrap();
        for (name, w) in &want {
            let g = got.iter().find(|(n, _)| n == name).ok_or_else(|| format!("{key}: '{name}' missing"))?;
            close(name, &g.1, w, m["half_tolerance"].as_f64())?;
        }
    }
    Ok(())
}
