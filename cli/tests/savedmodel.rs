//! End-to-end tests of SavedModel directories, checkpoints and numpy feeds
//! (docs/contract.md §2–3) on the TensorFlow-made fixtures of
//! `testdata/savedmodel/` (made by its `make_fixtures.py`): results equal
//! TensorFlow's in both modes, `train_step` trains, checkpoints round-trip,
//! and bad input gets one `error:` line naming the part at fault.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use autoclust_graph::Tensor;
use autoclust_graphdef::tensor_bundle::{read_checkpoint, OBJECT_GRAPH_KEY};
use autoclust_runtime::numpy::read_npz;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/savedmodel").join(name)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn autoclust(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_autoclust")).args(args).output().expect("the binary runs")
}

fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

fn error_line(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(1), "stdout: {}", String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(err.starts_with("error: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn expected(name: &str) -> Vec<(String, Tensor)> {
    read_npz(&std::fs::read(fixture(name)).unwrap()).unwrap()
}

/// `got` (a JSON tensor) equals TensorFlow's `want` to float32 rounding.
fn assert_close(what: &str, got: &serde_json::Value, want: &Tensor) {
    let shape: Vec<usize> = got["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
    assert_eq!(shape, want.shape, "{what}: shape");
    let data: Vec<f64> = got["data"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    let want = want.to_f64_vec().unwrap();
    for (i, (g, w)) in data.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= 1e-5 + 1e-5 * w.abs(), "{what}[{i}]: {g} vs TensorFlow's {w}");
    }
}

fn check_against_tensorflow(model: &str, feeds: &str, extra: &[&str], expected_npz: &str) {
    for mode in [&[][..], &["--no-cluster"][..]] {
        let dir = fixture(model);
        let feeds = fixture(feeds);
        let mut args = vec!["run", s(&dir), "--feeds", s(&feeds), "--json"];
        args.extend_from_slice(extra);
        args.extend_from_slice(mode);
        let v = json(&autoclust(&args));
        for (key, want) in expected(expected_npz) {
            if key.contains("/.ATTRIBUTES/") {
                continue;
            }
            assert_close(&format!("{model} {mode:?} {key}"), &v["fetches"][&key], &want);
        }
    }
}

#[test]
fn dense_module_with_a_none_batch_matches_tensorflow() {
    check_against_tensorflow("dense2", "dense2.feeds.npz", &[], "dense2.expected.npz");
    // The same batch from a .npy feeds the signature's only input; --fetch takes output keys.
    let out = autoclust(&[
        "run",
        s(&fixture("dense2")),
        "--feeds",
        s(&fixture("dense2.x.npy")),
        "--fetch",
        "logits",
        "--json",
    ]);
    let v = json(&out);
    assert_eq!(v["fetches"].as_object().unwrap().keys().collect::<Vec<_>>(), ["logits"]);
    let want = expected("dense2.expected.npz");
    assert_close("npy logits", &v["fetches"]["logits"], &want.iter().find(|(k, _)| k == "logits").unwrap().1);
}

/// dense2 saved with `MaxShardSizePolicy(100 bytes)`: its variables are split into slices
/// across three data shards; restored through the object graph, they give TensorFlow's outputs.
#[test]
fn saved_model_with_sliced_variables_matches_tensorflow() {
    let index = std::fs::read(fixture("dense2_sliced/variables/variables.index")).unwrap();
    let entries = autoclust_graphdef::table::read_table(&index).unwrap();
    assert!(entries.iter().any(|(k, _)| k.starts_with(b"\0w1/")), "the fixture holds slice keys");
    check_against_tensorflow("dense2_sliced", "dense2.feeds.npz", &[], "dense2.expected.npz");
}

#[test]
fn keras_cnn_export_matches_tensorflow() {
    // cnn.feeds.npz was written by np.savez_compressed (deflated members).
    check_against_tensorflow("cnn", "cnn.feeds.npz", &[], "cnn.expected.npz");
}

#[test]
fn train_step_trains_and_saves_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("ckpt/step5");
    let (train, feeds) = (fixture("train"), fixture("train.feeds.npz"));
    for mode in [&[][..], &["--no-cluster"][..]] {
        let mut args = vec![
            "run",
            s(&train),
            "--signature",
            "train_step",
            "--feeds",
            s(&feeds),
            "--steps",
            "5",
            "--save-checkpoint",
            s(&prefix),
            "--json",
        ];
        args.extend_from_slice(mode);
        let v = json(&autoclust(&args));
        let want = expected("train.expected.npz");
        let get = |k: &str| &want.iter().find(|(n, _)| n == k).unwrap().1;
        assert_close("loss", &v["fetches"]["loss"], get("loss"));
        assert_close("w", &v["variables"]["w"], get("w/.ATTRIBUTES/VARIABLE_VALUE"));
        // The checkpoint holds TensorFlow's keys, the trained values and the object graph.
        let ckpt = read_checkpoint(&prefix).unwrap();
        let keys: Vec<&str> = ckpt.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, [OBJECT_GRAPH_KEY, "b/.ATTRIBUTES/VARIABLE_VALUE", "w/.ATTRIBUTES/VARIABLE_VALUE"]);
        for (k, t) in &ckpt[1..] {
            let json_name = &k[..1];
            assert_close(k, &v["variables"][json_name], t);
            assert_close(k, &v["variables"][json_name], get(k));
        }
    }
    // --vars takes the checkpoint prefix: 3 steps + checkpoint + 2 steps = 5 steps.
    let mid = dir.path().join("mid");
    let base = ["run", s(&train), "--signature", "train_step", "--feeds", s(&feeds)];
    let mut first = base.to_vec();
    first.extend_from_slice(&["--steps", "3", "--save-checkpoint", s(&mid)]);
    json(&autoclust(&[&first[..], &["--json"]].concat()));
    let mut second = base.to_vec();
    second.extend_from_slice(&["--steps", "2", "--vars", s(&mid), "--json"]);
    let v = json(&autoclust(&second));
    let want = expected("train.expected.npz");
    assert_close("resumed loss", &v["fetches"]["loss"], &want.iter().find(|(k, _)| k == "loss").unwrap().1);
    // When TensorFlow is installed, it loads the checkpoint (tf.train.load_checkpoint and
    // tf.train.Checkpoint) with the same values.
    let python = Path::new("/work/tfenv/bin/python");
    if python.exists() {
        let out = Command::new(python)
            .env("TF_CPP_MIN_LOG_LEVEL", "3")
            .args([
                s(&fixture("make_fixtures.py")),
                "--check-checkpoint",
                s(&prefix),
                s(&fixture("train.expected.npz")),
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn graph_commands_take_the_directory() {
    let v = json(&autoclust(&["analyze", s(&fixture("train")), "--json"]));
    assert!(v["resource_ops"].as_array().unwrap().iter().any(|o| o["node"] == "StatefulPartitionedCall_1"));
    let v = json(&autoclust(&["cluster", s(&fixture("cnn")), "--json"]));
    assert!(v["unclustered"].as_array().unwrap().iter().any(|n| n == "serving_default_image"));
    let out = autoclust(&["cluster", s(&fixture("dense2/saved_model.pb")), "--format", "savedmodel", "--json"]);
    assert!(error_line(&out).contains("saved_model.pb/saved_model.pb: cannot read"));
    let b = json(&autoclust(&[
        "bench",
        s(&fixture("dense2")),
        "--feeds",
        s(&fixture("dense2.feeds.npz")),
        "--steps",
        "3",
        "--json",
    ]));
    assert!(b["clustered_steps_per_s"].as_f64().unwrap() > 0.0 && b["unclustered_steps_per_s"].as_f64().unwrap() > 0.0);
}

/// The graph-only commands read `saved_model.pb` alone: a copy without `variables/` (only the
/// graph copied or inspected) still analyzes, clusters and converts; `run`, which needs the
/// values, names the missing checkpoint (sweep 65).
#[test]
fn graph_commands_need_no_variables() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("train");
    std::fs::create_dir(&copy).unwrap();
    std::fs::copy(fixture("train").join("saved_model.pb"), copy.join("saved_model.pb")).unwrap();
    let v = json(&autoclust(&["analyze", s(&copy), "--json"]));
    assert!(v["resource_ops"].as_array().unwrap().iter().any(|o| o["node"] == "StatefulPartitionedCall_1"));
    let v = json(&autoclust(&["cluster", s(&copy), "--json"]));
    assert!(v["unclustered"].as_array().is_some());
    let out = dir.path().join("g.pbtxt");
    let converted = autoclust(&["convert", s(&copy), "-o", s(&out)]);
    assert!(converted.status.success(), "{}", String::from_utf8_lossy(&converted.stderr));
    let e = error_line(&autoclust(&["run", s(&copy), "--feeds", s(&fixture("train.feeds.npz"))]));
    assert!(e.contains("variables.index: cannot read"), "{e}");
}

#[test]
fn clear_errors() {
    let train = fixture("train");
    let feeds = fixture("train.feeds.npz");
    let e = error_line(&autoclust(&["run", s(&train), "--signature", "nope", "--feeds", s(&feeds)]));
    assert!(e.contains("no signature 'nope' (available: serving_default, train_step)"), "{e}");
    let e = error_line(&autoclust(&["run", s(&train), "--signature", "train_step", "--feed", "z=1"]));
    assert!(e.contains("'z' is not an input of signature 'train_step'") && e.contains("(inputs: x, y)"), "{e}");
    let e = error_line(&autoclust(&["run", s(&train), "--signature", "train_step", "--feed", "x=[[1,2,3]]"]));
    assert!(e.contains("input 'y' is not fed"), "{e}");
    let e =
        error_line(&autoclust(&["run", s(&train), "--signature", "train_step", "--feeds", s(&feeds), "--fetch", "w"]));
    assert!(e.contains("'w' is not an output of signature 'train_step'") && e.contains("(outputs: loss)"), "{e}");
    let e = error_line(&autoclust(&[
        "run",
        s(&train),
        "--signature",
        "train_step",
        "--feeds",
        s(&fixture("dense2.x.npy")),
    ]));
    assert!(e.contains("dense2.x.npy: a .npy file feeds one input, but there are 2 (x, y)"), "{e}");
    let usage = autoclust(&["run", s(&fixture("../tf/mlp_784.pbtxt")), "--signature", "x"]);
    assert_eq!(usage.status.code(), Some(2));
    // A corrupt data shard: the checksum error names the file and the tensor.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("m");
    std::fs::create_dir_all(copy.join("variables")).unwrap();
    for f in ["saved_model.pb", "variables/variables.index", "variables/variables.data-00000-of-00001"] {
        std::fs::copy(train.join(f), copy.join(f)).unwrap();
    }
    let data = copy.join("variables/variables.data-00000-of-00001");
    let mut bytes = std::fs::read(&data).unwrap();
    bytes[4] ^= 0x10;
    std::fs::write(&data, &bytes).unwrap();
    let e = error_line(&autoclust(&["run", s(&copy), "--feeds", s(&fixture("dense2.feeds.npz"))]));
    assert!(e.contains("variables.data-00000-of-00001: tensor '") && e.contains("checksum mismatch"), "{e}");
    std::fs::remove_file(copy.join("saved_model.pb")).unwrap();
    let e = error_line(&autoclust(&["analyze", s(&copy)]));
    assert!(e.contains("saved_model.pb: cannot read"), "{e}");
    // A checkpoint prefix with a corrupt index names the index.
    let prefix = dir.path().join("ck");
    std::fs::write(dir.path().join("ck.index"), b"garbage that is not a table at all, long enough to hold a footer")
        .unwrap();
    let e = error_line(&autoclust(&["run", s(&train), "--vars", s(&prefix), "--feeds", s(&feeds)]));
    assert!(e.contains("ck.index: not a table: bad magic number"), "{e}");
}

/// Checkpoints TensorFlow wrote in two data shards (`MaxShardSizePolicy`,
/// testdata/checkpoint/make_fixtures.py) restore whole, in both modes: one with every
/// tensor whole in a shard, and one whose variable `b` TensorFlow split into slices across
/// the shards (a partitioned tensor, put back together from its slice entries).
#[test]
fn multi_shard_and_sliced_checkpoints_restore() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/checkpoint");
    let graph = dir.join("vars.graph");
    for ckpt in ["sharded/ck", "sliced/ck"] {
        for mode in [&[][..], &["--no-cluster"][..]] {
            let prefix = dir.join(ckpt);
            let mut args = vec!["run", s(&graph), "--vars", s(&prefix), "--fetch", "rw,rb,rn,sw", "--json"];
            args.extend_from_slice(mode);
            let v = json(&autoclust(&args));
            let data = |k: &str| v["fetches"][k]["data"].clone();
            let w: Vec<f64> = (0..64).map(f64::from).collect();
            assert_eq!(data("rw:0"), serde_json::json!(w), "{ckpt} {mode:?}");
            let b = data("rb:0");
            let b = b.as_array().unwrap();
            assert_eq!(b.len(), 40);
            for (i, x) in b.iter().enumerate() {
                let want = -1.0 + 2.0 * i as f64 / 39.0;
                assert!((x.as_f64().unwrap() - want).abs() < 1e-6, "{ckpt}: b[{i}] = {x}, want {want}");
            }
            assert_eq!(data("rn:0"), serde_json::json!([7]));
            assert_eq!(data("sw:0"), serde_json::json!([2016.0]));
        }
    }
    // A slice's bytes are checked like any tensor's: the error names the shard and the slice.
    let tmp = tempfile::tempdir().unwrap();
    for f in ["ck.index", "ck.data-00000-of-00002", "ck.data-00001-of-00002"] {
        std::fs::copy(dir.join("sliced").join(f), tmp.path().join(f)).unwrap();
    }
    let shard = tmp.path().join("ck.data-00000-of-00002");
    let mut bytes = std::fs::read(&shard).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x10;
    std::fs::write(&shard, &bytes).unwrap();
    let prefix = tmp.path().join("ck");
    let e = error_line(&autoclust(&["run", s(&graph), "--vars", s(&prefix), "--fetch", "rb"]));
    assert!(e.contains("ck.data-00000-of-00002: tensor '") && e.contains("checksum mismatch"), "{e}");
}

/// A TF1 Saver checkpoint of partitioned variables (`emb` and `dense/w` saved whole, the
/// graph holding `emb/part_0..2` and `dense/w/part_0..1`): `--vars` gives each part its
/// slice, by the graph's `SaveV2` specs (without a Saver, by the parts' names and shapes), and
/// three Adagrad steps give TensorFlow's loss and predictions in both modes (the checkpoint's
/// keys named no variable before).
#[test]
fn partitioned_variables_restore_from_a_saver_checkpoint() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/checkpoint");
    let (graph, prefix, feeds) =
        (dir.join("partitioned.pb"), dir.join("partitioned/init"), dir.join("partitioned.feeds.npz"));
    let want = read_npz(&std::fs::read(dir.join("partitioned.expected.npz")).unwrap()).unwrap();
    for mode in [&[][..], &["--no-cluster"][..]] {
        let mut args = vec!["run", s(&graph), "--vars", s(&prefix), "--feeds", s(&feeds)];
        args.extend(["--fetch", "loss,pred", "--target", "train", "--steps", "3", "--json"]);
        args.extend_from_slice(mode);
        let v = json(&autoclust(&args));
        for (key, t) in &want {
            assert_close(&format!("{key} {mode:?}"), &v["fetches"][format!("{key}:0")], t);
        }
    }
    // `--save-checkpoint` writes the partitioned variables as the graph's Saver wrote `init`:
    // the same keys (each partitioned variable whole, in slices), the parts' values in place.
    let tmp = tempfile::tempdir().unwrap();
    let saved = tmp.path().join("ck");
    let vars = tmp.path().join("vars.safetensors");
    let mut args = vec!["run", s(&graph), "--vars", s(&prefix), "--feeds", s(&feeds), "--target", "train"];
    args.extend(["--save-checkpoint", s(&saved), "--save-vars", s(&vars)]);
    let out = autoclust(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let keys = |p: &Path| -> Vec<String> {
        let mut k: Vec<String> = read_checkpoint(p).unwrap().into_iter().map(|(k, _)| k).collect();
        k.sort();
        k
    };
    assert_eq!(keys(&saved), keys(&prefix));
    let parts = autoclust_runtime::tensor_io::read_safetensors(&std::fs::read(&vars).unwrap()).unwrap();
    let whole = read_checkpoint(&saved).unwrap();
    for (key, t) in whole.iter().filter(|(_, t)| t.rank() == 2) {
        let mut rows: Vec<f32> = Vec::new();
        for k in 0.. {
            match parts.iter().find(|(n, _)| *n == format!("{key}/part_{k}")) {
                Some((_, p)) => rows.extend_from_slice(p.as_f32().unwrap()),
                None => break,
            }
        }
        if !rows.is_empty() {
            assert_eq!(t.as_f32().unwrap(), &rows[..], "{key}");
        }
    }
    // The same graph without its Saver (pruned to the step): the parts are found by their
    // names (`emb/part_K`) and shapes, cut along the one axis where they differ.
    let tmp = tempfile::tempdir().unwrap();
    let pruned = tmp.path().join("step.graph");
    let opt = autoclust(&["opt", s(&graph), "--passes", "prune", "--fetch", "loss,pred", "--target", "train"]);
    assert!(opt.status.success(), "{}", String::from_utf8_lossy(&opt.stderr));
    let text = String::from_utf8(opt.stdout).unwrap();
    assert!(!text.contains("SaveV2") && text.contains("emb/part_1"), "the Saver is pruned, the parts stay");
    std::fs::write(&pruned, text).unwrap();
    let args = ["run", s(&pruned), "--vars", s(&prefix), "--feeds", s(&feeds), "--fetch", "loss,pred", "--target"];
    let v = json(&autoclust(&[&args[..], &["train", "--steps", "3", "--json"]].concat()));
    for (key, t) in &want {
        assert_close(&format!("{key} without a Saver"), &v["fetches"][format!("{key}:0")], t);
    }
}

/// A checkpoint holding more than the graph reads (an inference graph and its training
/// checkpoint): the graph's variables are restored and the rest is named in one `note:`,
/// as TensorFlow's Saver restores only what the graph has; a safetensors file that names
/// no variable of the graph is still an error.
#[test]
fn a_checkpoint_with_extra_tensors_restores_what_the_graph_has() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/checkpoint");
    let tmp = tempfile::tempdir().unwrap();
    let graph = tmp.path().join("w_only.graph");
    std::fs::write(
        &graph,
        "w = VarHandleOp() {container = \"\", dtype = float32, shape = shape[8, 8], shared_name = \"w/.ATTRIBUTES/VARIABLE_VALUE\"}\n\
         rw = ReadVariableOp(w) {dtype = float32}\n",
    )
    .unwrap();
    let prefix = dir.join("sharded/ck");
    let out = autoclust(&["run", s(&graph), "--vars", s(&prefix), "--fetch", "rw", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("note: --vars") && stderr.contains("name no variable of the graph"), "{stderr}");
    assert!(stderr.contains("2 checkpoint tensors") && stderr.contains("b/.ATTRIBUTES/VARIABLE_VALUE"), "{stderr}");
    let v = json(&out);
    assert_eq!(v["fetches"]["rw:0"]["data"][63], serde_json::json!(63.0));
    let vars = tmp.path().join("v.safetensors");
    let t = Tensor::from_f32(vec![1], vec![1.0]).unwrap();
    std::fs::write(&vars, autoclust_runtime::tensor_io::write_safetensors(&[("nope".to_string(), t)]).unwrap())
        .unwrap();
    let e = error_line(&autoclust(&["run", s(&graph), "--vars", s(&vars), "--fetch", "rw"]));
    assert!(e.contains("nope") && e.contains("no such variable"), "{e}");
}

/// `convert` writes the MetaGraphDef's graph and function library: the converted file
/// holds the signature's placeholders and the library's bodies, and analyzes exactly as the
/// directory does.
#[test]
fn convert_writes_the_graph_and_its_library() {
    let dir = tempfile::tempdir().unwrap();
    for ext in ["graph", "pbtxt"] {
        let out = dir.path().join(format!("train.{ext}"));
        let c = autoclust(&["convert", s(&fixture("train")), "-o", s(&out)]);
        assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.contains("train_step_x"), "{text}");
        assert!(text.contains("AssignSubVariableOp"), "the library's train_step body is kept");
        let a = json(&autoclust(&["analyze", s(&fixture("train")), "--json"]));
        let b = json(&autoclust(&["analyze", s(&out), "--json"]));
        assert_eq!(a, b, "{ext}");
    }
}

/// `opt` and `compile` work on the MetaGraphDef's graph and library: inlining brings the
/// train_step body's updates to the top level, and the compiled program snapshots the
/// variables in one bridge per signature function.
#[test]
fn opt_and_compile_take_the_directory() {
    let out = autoclust(&["opt", s(&fixture("train")), "--passes", "inline"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("AssignSubVariableOp = AssignSubVariableOp(w, "), "{text}");
    let stats = json(&autoclust(&["opt", s(&fixture("cnn")), "--passes", "default", "--stats"]));
    assert_eq!(stats["nodes_before"], 45);
    assert!(stats["nodes_after"].as_u64().unwrap() > 45, "the calls are inlined: {stats}");
    let dir = tempfile::tempdir().unwrap();
    let compiled = dir.path().join("train.graph");
    let c = autoclust(&["compile", s(&fixture("train")), "-o", s(&compiled)]);
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    let text = std::fs::read_to_string(&compiled).unwrap();
    assert!(text.contains("_AutoclustSnapshot(w, b, ^train_step_x, ^train_step_y)"), "{text}");
    assert!(text.contains("_AutoclustWriteBack"), "{text}");
}

/// `explore` and `verify` pick the signature, restore its variables from the checkpoint,
/// take feeds by input name and name fetches by output key: one train_step explored is
/// exactly one `run` step, and clustering the signature adds no behaviour.
#[test]
fn explore_and_verify_take_the_signature() {
    let (train, feeds) = (fixture("train"), fixture("train.feeds.npz"));
    let sig = ["--signature", "train_step", "--feeds", s(&feeds)];
    let run = json(&autoclust(&[&["run", s(&train)][..], &sig, &["--no-cluster", "--json"]].concat()));
    for clustered in [&[][..], &["--clustered"][..]] {
        let v = json(&autoclust(&[&["explore", s(&train)][..], &sig, clustered, &["--json"]].concat()));
        let outcomes = v["outcomes"].as_array().unwrap();
        assert_eq!(outcomes.len(), 1, "{v}");
        assert_eq!(outcomes[0]["fetches"], run["fetches"], "{clustered:?}");
        assert_eq!(outcomes[0]["variables"], run["variables"], "{clustered:?}");
    }
    let out = autoclust(&[&["verify", s(&train)][..], &sig].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("verify: ok: all 1 outcomes"));
    // serving_default by default; its outputs equal TensorFlow's.
    let v = json(&autoclust(&["explore", s(&fixture("dense2")), "--feeds", s(&fixture("dense2.feeds.npz")), "--json"]));
    let outcome = &v["outcomes"][0];
    for (key, want) in expected("dense2.expected.npz") {
        assert_close(&format!("explore {key}"), &outcome["fetches"][&key], &want);
    }
    for model in ["dense2", "cnn"] {
        let feeds = fixture(&format!("{model}.feeds.npz"));
        let out = autoclust(&["verify", s(&fixture(model)), "--feeds", s(&feeds)]);
        assert!(out.status.success(), "{model}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("verify: ok"), "{model}");
    }
    // The signature's errors, as for run.
    let e = error_line(&autoclust(&["verify", s(&train), "--signature", "nope"]));
    assert!(e.contains("no signature 'nope' (available: serving_default, train_step)"), "{e}");
    let e = error_line(&autoclust(&["explore", s(&train), "--signature", "train_step", "--feed", "x=[[1,2,3]]"]));
    assert!(e.contains("input 'y' is not fed"), "{e}");
    let e = error_line(&autoclust(&[&["explore", s(&train)][..], &sig, &["--fetch", "w"]].concat()));
    assert!(e.contains("'w' is not an output of signature 'train_step'"), "{e}");
    let usage = autoclust(&["verify", s(&fixture("../tf/mlp_784.pbtxt")), "--signature", "x"]);
    assert_eq!(usage.status.code(), Some(2));
}

/// The nodes `cluster` puts in clusters in the fixture's serving_default signature.
fn clustered_nodes(model: &str) -> Vec<String> {
    let v = json(&autoclust(&["cluster", s(&fixture(model)), "--signature", "serving_default", "--json"]));
    v["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["nodes"].as_array().unwrap())
        .map(|n| n.as_str().unwrap().to_string())
        .collect()
}

/// A Keras export whose lookup tables its init op fills (an integer vocabulary, a string
/// vocabulary with hashed out-of-vocabulary buckets, a vocabulary file among its assets):
/// `run` runs the init op once, as TensorFlow's loader does, and gives TensorFlow's outputs in
/// both modes; the table ops stay outside clusters.
#[test]
fn lookup_tables_are_initialised_and_match_tensorflow() {
    // make_fixtures.py's LOOKUP_WORDS and LOOKUP_COLORS.
    let strings = [
        "--feed",
        r#"words=[["cat", "zebra"], ["fish", "bird"]]"#,
        "--feed",
        r#"colors=[["green", "pink"], ["red", "blue"]]"#,
    ];
    check_against_tensorflow("lookup", "lookup.feeds.npz", &strings, "lookup.expected.npz");
    let clustered = clustered_nodes("lookup");
    assert!(!clustered.is_empty());
    assert!(!clustered.iter().any(|n| n.contains("LookupTable")), "a table op in a cluster: {clustered:?}");
    // A lookup key of the wrong type is an error naming the op, not a panic.
    let e = error_line(&autoclust(&[
        "run",
        s(&fixture("lookup")),
        "--feeds",
        s(&fixture("lookup.feeds.npz")),
        "--feed",
        "words=[[1, 2], [3, 4]]",
        "--feed",
        r#"colors=[["red", "red"], ["red", "red"]]"#,
    ]));
    assert!(e.contains("words"), "{e}");
}

/// A TF1 SavedModel (`Builder`): no object graph, so the variables — one partitioned in
/// three, stored whole as slices — come from running the Saver's restore op with the
/// checkpoint prefix fed, and the vocabulary table from the main op fed the asset's path
/// (recorded in the `saved_model_assets` collection). TensorFlow's serving outputs in both
/// modes, and its loss after five `train` steps (Adam on reference variables).
#[test]
fn tf1_builder_saved_model_restores_through_its_saver_and_feeds_its_assets() {
    let words = ["--feed", r#"words=["b", "zz", "d", "a"]"#];
    check_against_tensorflow("tf1_builder", "tf1_builder.feeds.npz", &words, "tf1_builder.expected.npz");
    let want = expected("tf1_builder.train_expected.npz");
    let loss = &want.iter().find(|(k, _)| k == "loss").unwrap().1;
    let (dir, train) = (fixture("tf1_builder"), fixture("tf1_builder.train.npz"));
    for mode in [&[][..], &["--no-cluster"][..]] {
        let mut args = vec!["run", s(&dir), "--signature", "train", "--steps", "5"];
        args.extend(["--feeds", s(&train), "--fetch", "loss", "--json"]);
        args.extend_from_slice(&words);
        args.extend_from_slice(mode);
        let v = json(&autoclust(&args));
        assert_close(&format!("train loss {mode:?}"), &v["fetches"]["loss"], loss);
    }
}

/// A TF2 SavedModel's mutable tables (MutableHashTable, DenseHashTable) keep their entries
/// only in the checkpoint: restored through the model's Saver, the lookups and size are
/// TensorFlow's (they were the defaults and 0 before).
#[test]
fn mutable_tables_are_restored_from_the_checkpoint() {
    let words = ["--feed", r#"words=["fig", "apple", "zzz"]"#];
    check_against_tensorflow("mutable_tables", "mutable_tables.feeds.npz", &words, "mutable_tables.expected.npz");
}

/// TextVectorization (StaticRegexReplace, StringLower, StringSplitV2, StaticRegexFullMatch,
/// a lookup table, RaggedTensorToTensor) feeding an Embedding: TensorFlow's logits in both
/// modes, and no string op in a cluster.
#[test]
fn text_vectorization_matches_tensorflow() {
    // make_fixtures.py's TEXT_SENTENCES.
    let sentences = r#"sentences=["The cat sat on the MAT!", "A dog, a cat.", "zebras   dance on   mats and the dogs sing loudly"]"#;
    check_against_tensorflow("text", "text.feeds.npz", &["--feed", sentences], "text.expected.npz");
    let clustered = clustered_nodes("text");
    assert!(!clustered.is_empty());
    // The string ops' nodes (inlined from the signature's function), by their last name part.
    let string_ops =
        ["StringLower", "StaticRegexReplace", "StringSplitV2", "LookupTableFindV2", "RaggedTensorToTensor"];
    let in_cluster: Vec<&String> =
        clustered.iter().filter(|n| string_ops.contains(&n.rsplit('/').next().unwrap_or(n))).collect();
    assert!(in_cluster.is_empty(), "a string op in a cluster: {in_cluster:?}");
}

/// TextVectorization's multi_hot (with bigrams: StringNGrams), count and tf_idf modes
/// (RaggedBincount, with weights) in one Keras export: both outputs equal TensorFlow's in both
/// modes, and the dense work after the counts is clustered.
#[test]
fn text_vectorization_output_modes_match_tensorflow() {
    let sentences = r#"sentences=["The cat sat on the MAT!", "A dog, a cat.", "zebras   dance on   mats and the dogs sing loudly"]"#;
    check_against_tensorflow("text_modes", "text_modes.feeds.npz", &["--feed", sentences], "text_modes.expected.npz");
    assert!(!clustered_nodes("text_modes").is_empty());
}

/// `explore` and `verify` on models with lookup tables: the tables are filled by the init op
/// before the step, as `run` fills them, so the explored outcome is TensorFlow's and clustering
/// adds no behaviour.
#[test]
fn explore_and_verify_read_the_initialised_lookup_tables() {
    let (lookup_feeds, text_feeds) = (fixture("lookup.feeds.npz"), fixture("text.feeds.npz"));
    let lookup = [
        "--feeds",
        s(&lookup_feeds),
        "--feed",
        r#"words=[["cat", "zebra"], ["fish", "bird"]]"#,
        "--feed",
        r#"colors=[["green", "pink"], ["red", "blue"]]"#,
    ];
    let sentences = r#"sentences=["The cat sat on the MAT!", "A dog, a cat.", "zebras   dance on   mats and the dogs sing loudly"]"#;
    let text = ["--feeds", s(&text_feeds), "--feed", sentences];
    for (model, args) in [("lookup", &lookup[..]), ("text", &text[..])] {
        for clustered in [&[][..], &["--clustered"][..]] {
            let v = json(&autoclust(&[&["explore", s(&fixture(model))][..], args, clustered, &["--json"]].concat()));
            let outcomes = v["outcomes"].as_array().unwrap();
            assert_eq!(outcomes.len(), 1, "{model}: {v}");
            for (key, want) in expected(&format!("{model}.expected.npz")) {
                assert_close(&format!("explore {model} {key}"), &outcomes[0]["fetches"][&key], &want);
            }
        }
        let out = autoclust(&[&["verify", s(&fixture(model))][..], args].concat());
        assert!(out.status.success(), "{model}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("verify: ok"), "{model}");
    }
}

/// `bench` on every fixture: the Keras export, and the train_step signature.
#[test]
fn bench_takes_every_fixture() {
    for (model, extra) in [("cnn", &[][..]), ("train", &["--signature", "train_step"][..])] {
        let (dir, feeds) = (fixture(model), fixture(&format!("{model}.feeds.npz")));
        let mut args = vec!["bench", s(&dir), "--feeds", s(&feeds), "--steps", "3", "--json"];
        args.extend_from_slice(extra);
        let b = json(&autoclust(&args));
        assert!(b["clustered_steps_per_s"].as_f64().unwrap() > 0.0, "{model}: {b}");
        assert!(b["unclustered_steps_per_s"].as_f64().unwrap() > 0.0, "{model}: {b}");
        assert!(b["compiled_clusters"].as_u64().unwrap() >= 1, "{model}: {b}");
    }
}

/// Issue 16's "done when", literally: from the repository's directory layout, `run` on the
/// train SavedModel's `train_step` for 100 steps leaves `ckpt/step100` (a relative prefix
/// whose directory `run` creates), which TensorFlow restores with the values its own 100
/// steps give (`make_fixtures.py --check-train`, when /work/tfenv exists); `bench` on the
/// directory prints clustered and unclustered steps per second.
#[test]
fn done_when_a_newcomer_benches_and_trains_a_saved_model() {
    let cwd = tempfile::tempdir().unwrap();
    let root = fixture("..");
    let (train, feeds) = (root.join("savedmodel/train"), root.join("savedmodel/train.feeds.npz"));
    let out = Command::new(env!("CARGO_BIN_EXE_autoclust"))
        .current_dir(cwd.path())
        .args([
            "run",
            s(&train),
            "--signature",
            "train_step",
            "--feeds",
            s(&feeds),
            "--steps",
            "100",
            "--save-checkpoint",
            "ckpt/step100",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("loss = {\"dtype\": \"float32\", \"shape\": []"));
    let prefix = cwd.path().join("ckpt/step100");
    let ckpt = read_checkpoint(&prefix).unwrap();
    let keys: Vec<&str> = ckpt.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, [OBJECT_GRAPH_KEY, "b/.ATTRIBUTES/VARIABLE_VALUE", "w/.ATTRIBUTES/VARIABLE_VALUE"]);
    let python = Path::new("/work/tfenv/bin/python");
    if python.exists() {
        let out = Command::new(python)
            .env("TF_CPP_MIN_LOG_LEVEL", "3")
            .args([s(&fixture("make_fixtures.py")), "--check-train", "100", s(&prefix)])
            .output()
            .unwrap();
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && said.contains("100 steps: w, b equal TensorFlow's"), "{said}");
    }
    let out = autoclust(&["bench", s(&fixture("dense2")), "--feeds", s(&fixture("dense2.feeds.npz")), "--steps", "20"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    for line in ["unclustered: ", "clustered: ", "speedup: ", "clusters:    1 (1 compiled, 0 interpreted)"] {
        assert!(text.lines().any(|l| l.starts_with(line)), "no '{line}' in:\n{text}");
    }
}

/// Every missing or corrupt part of a SavedModel is one `error:` line naming the file, for
/// `run` and `bench` alike.
#[test]
fn missing_and_corrupt_saved_model_parts_are_named() {
    let files = ["saved_model.pb", "variables/variables.index", "variables/variables.data-00000-of-00001"];
    let feeds = fixture("dense2.feeds.npz");
    let cases: [(&str, Option<&[u8]>, &str); 6] = [
        ("saved_model.pb", None, "saved_model.pb: cannot read"),
        ("saved_model.pb", Some(b"\xff\xff\xff\xff"), "saved_model.pb: not a SavedModel"),
        ("variables/variables.index", None, "variables.index: cannot read"),
        (
            "variables/variables.index",
            Some(b"not a table, but long enough to hold a footer...."),
            "variables.index: not a table",
        ),
        ("variables/variables.data-00000-of-00001", None, "variables.data-00000-of-00001: cannot read"),
        ("variables/variables.data-00000-of-00001", Some(b"short"), "variables.data-00000-of-00001: tensor '"),
    ];
    for (part, content, want) in cases {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path().join("m");
        std::fs::create_dir_all(m.join("variables")).unwrap();
        for f in files {
            std::fs::copy(fixture("dense2").join(f), m.join(f)).unwrap();
        }
        match content {
            None => std::fs::remove_file(m.join(part)).unwrap(),
            Some(bytes) => std::fs::write(m.join(part), bytes).unwrap(),
        }
        for cmd in ["run", "bench"] {
            let e = error_line(&autoclust(&[cmd, s(&m), "--feeds", s(&feeds), "--steps", "1"]));
            assert!(e.contains(want), "{part} {content:?} {cmd}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }
}

/// With `--signature`, the graph-only commands see what `run` runs of a SavedModel: the
/// signature's function inlined and the graph pruned to its outputs, so `cluster` shows the
/// whole train_step (forward, gradients and both updates) as one cluster.
#[test]
fn graph_commands_take_a_signature() {
    let train = fixture("train");
    let v = json(&autoclust(&["cluster", s(&train), "--signature", "train_step", "--json"]));
    let clusters = v["clusters"].as_array().unwrap();
    assert_eq!(clusters.len(), 1, "{v}");
    let nodes: Vec<&str> = clusters[0]["nodes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    for want in ["AssignSubVariableOp", "AssignSubVariableOp_1", "MatMul", "gradient_tape/MatMul/MatMul"] {
        assert!(
            nodes.contains(&format!("StatefulPartitionedCall_1/StatefulPartitionedCall/{want}").as_str()),
            "{want}"
        );
    }
    assert_eq!(v["unclustered"], serde_json::json!(["b", "train_step_x", "train_step_y", "w"]));
    let v = json(&autoclust(&["analyze", s(&fixture("dense2")), "--signature", "serving_default", "--json"]));
    let ops = v["resource_ops"].as_array().unwrap();
    assert_eq!(ops.len(), 4, "{v}");
    assert!(ops.iter().all(|o| o["op"] == "ReadVariableOp" && o["kind"] == "read"), "{v}");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("serving.graph");
    let c = autoclust(&["convert", s(&train), "--signature", "serving_default", "-o", s(&out)]);
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("serving_default_x = Placeholder") && !text.contains("train_step_x"), "{text}");
    let compiled = dir.path().join("train.graph");
    let c = autoclust(&["compile", s(&train), "--signature", "train_step", "-o", s(&compiled)]);
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    let text = std::fs::read_to_string(&compiled).unwrap();
    assert_eq!(text.matches("= _AutoclustSnapshot(").count(), 1, "{text}");
    assert!(!text.contains("serving_default_x"), "{text}");
    let whole = json(&autoclust(&["opt", s(&train), "--passes", "inline", "--stats"]));
    let one = json(&autoclust(&["opt", s(&train), "--signature", "train_step", "--passes", "inline", "--stats"]));
    assert!(one["nodes_before"].as_u64() < whole["nodes_after"].as_u64(), "{one} vs {whole}");
    let usage = autoclust(&["cluster", s(&fixture("../tf/mlp_784.pbtxt")), "--signature", "x"]);
    assert_eq!(usage.status.code(), Some(2));
    let e = error_line(&autoclust(&["cluster", s(&train), "--signature", "nope"]));
    assert!(e.contains("no signature 'nope' (available: serving_default, train_step)"), "{e}");
}

/// A TF1 `Saver`'s own ops run: `save/control_dependency` (`SaveV2`) writes the variables as a
/// checkpoint at the fed filename, and `save/restore_all` (`RestoreV2` and the assigns) reads
/// one back into them, in both modes.
#[test]
fn tf1_saver_ops_save_and_restore_in_the_graph() {
    use autoclust_runtime::tensor_io::read_safetensors;
    let tf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/tf");
    let graph = tf.join("tf1_summaries_saver_adam.pbtxt");
    let vars = tf.join("tf1_summaries_saver_adam.vars.safetensors");
    let initial = read_safetensors(&std::fs::read(&vars).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for mode in [&[][..], &["--no-cluster"][..]] {
        let prefix = dir.path().join(format!("saved{}", mode.len())).join("model.ckpt");
        let feed = format!("save/Const={}", serde_json::json!(s(&prefix)));
        let mut args = vec!["run", s(&graph), "--vars", s(&vars), "--target", "save/control_dependency"];
        args.extend_from_slice(&["--feed", &feed, "--json"]);
        args.extend_from_slice(mode);
        json(&autoclust(&args));
        let saved = read_checkpoint(&prefix).unwrap();
        assert_eq!(saved.len(), initial.len(), "{saved:?}");
        for (name, t) in &initial {
            let (_, got) = saved.iter().find(|(k, _)| k == name).unwrap_or_else(|| panic!("{name} not saved"));
            assert_eq!((got.dtype, &got.shape, got.to_le_bytes()), (t.dtype, &t.shape, t.to_le_bytes()), "{name}");
        }
        // A checkpoint with other values restores into every variable.
        let changed: Vec<(String, Tensor)> = initial
            .iter()
            .map(|(k, t)| {
                let v = t.to_f64_vec().unwrap().iter().map(|x| x + 1.0).collect::<Vec<_>>();
                let t = match t.dtype {
                    autoclust_graph::DType::Int64 => {
                        Tensor::from_i64(t.shape.clone(), v.iter().map(|&x| x as i64).collect())
                    }
                    _ => Tensor::from_f32(t.shape.clone(), v.iter().map(|&x| x as f32).collect()),
                };
                (k.clone(), t.unwrap())
            })
            .collect();
        let other = dir.path().join(format!("other{}", mode.len()));
        let (index, data) = autoclust_graphdef::tensor_bundle::checkpoint_bytes(&changed).unwrap();
        std::fs::write(autoclust_graphdef::tensor_bundle::index_path(&other), index).unwrap();
        std::fs::write(autoclust_graphdef::tensor_bundle::data_path(&other, 0, 1), data).unwrap();
        let out = dir.path().join(format!("restored{}.safetensors", mode.len()));
        let feed = format!("save/Const={}", serde_json::json!(s(&other)));
        let mut args = vec!["run", s(&graph), "--vars", s(&vars), "--target", "save/restore_all"];
        args.extend_from_slice(&["--feed", &feed, "--save-vars", s(&out), "--json"]);
        args.extend_from_slice(mode);
        json(&autoclust(&args));
        let restored = read_safetensors(&std::fs::read(&out).unwrap()).unwrap();
        for (name, want) in &changed {
            let (_, got) = restored.iter().find(|(k, _)| k == name).unwrap_or_else(|| panic!("{name} not restored"));
            assert_eq!(got.to_le_bytes(), want.to_le_bytes(), "{name}");
        }
    }
    // A missing checkpoint is an error naming the key's file, not a panic.
    let feed = format!("save/Const={}", serde_json::json!(s(&dir.path().join("missing"))));
    let err = error_line(&autoclust(&[
        "run",
        s(&graph),
        "--vars",
        s(&vars),
        "--target",
        "save/restore_all",
        "--feed",
        &feed,
    ]));
    assert!(err.contains("missing.index"), "{err}");
}

/// A Keras 3 `model.export()`: TensorFlow's outputs; and its graph's second handle of a weight
/// (`head/bias`, beside the `head/bias_1` the signature reads) set by `--vars` changes nothing,
/// which a `note:` says, naming the saved variable; setting `head/bias_1` changes the output
/// without a note.
#[test]
fn keras_export_runs_and_vars_outside_the_saved_variables_are_noted() {
    check_against_tensorflow("keras_export", "keras_export.feeds.npz", &[], "keras_export.expected.npz");
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str| {
        let vars = dir.path().join(format!("{}.safetensors", name.replace('/', "_")));
        let t = Tensor::from_f32(vec![3], vec![100.0, 0.0, 0.0]).unwrap();
        std::fs::write(&vars, autoclust_runtime::tensor_io::write_safetensors(&[(name.to_string(), t)]).unwrap())
            .unwrap();
        let (m, f) = (fixture("keras_export"), fixture("keras_export.feeds.npz"));
        autoclust(&["run", s(&m), "--feeds", s(&f), "--vars", s(&vars), "--json"])
    };
    let want = &expected("keras_export.expected.npz")[0].1;
    let other = run("head/bias");
    let v = json(&other);
    assert_close("output_0", &v["fetches"]["output_0"], want);
    let note = String::from_utf8_lossy(&other.stderr);
    assert!(note.contains("note: --vars") && note.contains("head/bias (the saved variable is head/bias_1)"), "{note}");
    let saved = run("head/bias_1");
    assert!(!String::from_utf8_lossy(&saved.stderr).contains("note:"), "{}", String::from_utf8_lossy(&saved.stderr));
    let v = json(&saved);
    assert!(v["fetches"]["output_0"]["data"][0].as_f64().unwrap() > 0.99, "{v}");
}

/// The fixture SavedModel `name` and the program `compile --signature serving_default` makes
/// of it (in a temporary directory, kept while the first value lives).
fn compiled_serving_program(name: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join(format!("{name}.graph"));
    let model = fixture(name);
    let out = autoclust(&["compile", s(&model), "--signature", "serving_default", "-o", s(&program)]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (dir, model, program)
}

/// A Keras 3 export's checkpoint saves each weight twice (`variables/N` and `_all_variables/M`):
/// a program compiled from its signature, run with that checkpoint and the model's feeds file,
/// gives TensorFlow's outputs, and the `note:` on checkpoint tensors it does not use names only
/// those that are no weight's copy (the dropout seed's state), not the 8 aliases.
#[test]
fn a_keras_export_program_takes_its_checkpoint_without_naming_aliases() {
    let (_dir, model, program) = compiled_serving_program("keras_export");
    let (ckpt, feeds) = (model.join("variables/variables"), fixture("keras_export.feeds.npz"));
    let run = autoclust(&["run", s(&program), "--vars", s(&ckpt), "--feeds", s(&feeds), "--json"]);
    let want = &expected("keras_export.expected.npz")[0].1;
    assert_close("output_0", &json(&run)["fetches"]["output_0"], want);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!stderr.contains("_all_variables"), "{stderr}");
    assert!(stderr.contains("1 checkpoint tensor names no variable of the graph and is not used"), "{stderr}");
}

/// A program compiled from a signature takes the SavedModel's own checkpoint as `--vars`:
/// its variables carry their checkpoint keys (object-graph keys such as
/// `w1/.ATTRIBUTES/VARIABLE_VALUE` name no node), and every variable gets the value the
/// SavedModel restores.
#[test]
fn a_program_compiled_from_a_signature_takes_the_models_checkpoint() {
    let (_dir, model, program) = compiled_serving_program("dense2");
    let feeds = fixture("dense2.feeds.npz");
    let restored = json(&autoclust(&["run", s(&model), "--feeds", s(&feeds), "--json"]));
    let ckpt = model.join("variables/variables");
    let x = "serving_default_x=[[0.1, 0.2, 0.3, 0.4]]";
    let run = autoclust(&["run", s(&program), "--vars", s(&ckpt), "--feed", x, "--json"]);
    assert!(!String::from_utf8_lossy(&run.stderr).contains("note:"), "{}", String::from_utf8_lossy(&run.stderr));
    let v = json(&run);
    for name in ["w1", "b1", "w2", "b2"] {
        assert_eq!(v["variables"][name], restored["variables"][name], "{name}");
    }
    // The program records the signature: it takes the model's feeds file (keyed by the
    // signature's input names) and returns the signature's outputs by their keys, in both
    // modes; a tensor's own name still fetches it, as `node:port`.
    for mode in [&[][..], &["--no-cluster"][..]] {
        let mut args = vec!["run", s(&program), "--vars", s(&ckpt), "--feeds", s(&feeds), "--json"];
        args.extend_from_slice(mode);
        let run = autoclust(&args);
        assert!(!String::from_utf8_lossy(&run.stderr).contains("note:"), "{}", String::from_utf8_lossy(&run.stderr));
        let v = json(&run);
        assert!(restored["fetches"].as_object().is_some_and(|f| !f.is_empty()), "{restored}");
        assert_eq!(v["fetches"], restored["fetches"], "{mode:?}");
    }
    let key = restored["fetches"].as_object().unwrap().keys().next().unwrap().clone();
    let v =
        json(&autoclust(&["run", s(&program), "--vars", s(&ckpt), "--feeds", s(&feeds), "--fetch", &key, "--json"]));
    assert_eq!(v["fetches"][&key], restored["fetches"][&key], "{v}");
    let text = std::fs::read_to_string(&program).unwrap();
    let output_node = text
        .lines()
        .find(|l| l.contains("_autoclust_signature_outputs"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no output marked in {text}"))
        .to_string();
    let v = json(&autoclust(&[
        "run",
        s(&program),
        "--vars",
        s(&ckpt),
        "--feeds",
        s(&feeds),
        "--fetch",
        &output_node,
        "--json",
    ]));
    assert!(v["fetches"][format!("{output_node}:0")].is_object(), "{v}");
    let e = error_line(&autoclust(&["run", s(&program), "--vars", s(&ckpt), "--json"]));
    assert!(e.contains("input 'x' is not fed"), "{e}");
}
