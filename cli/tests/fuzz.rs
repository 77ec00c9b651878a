//! The fuzz harness in CI (issue 13): a deterministic slice of the mutation fuzzer over
//! every reader and `run` (see `fuzz/engine.rs`), and a replay of every reproducer it has
//! found, kept in `testdata/fuzz/` with its expected exit status and first error line.
//!
//! The long mode is `cargo bench -p autoclust --bench fuzz -- --inputs 100000`.

#[path = "fuzz/engine.rs"]
mod engine;

use std::path::{Path, PathBuf};

use engine::{Format, Limits};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_autoclust"))
}

/// Inputs per format in CI (override with AUTOCLUST_FUZZ_INPUTS). Each input is three
/// process runs of a debug build; 24 keeps the test at about a minute on two cores.
fn inputs_per_format() -> u64 {
    std::env::var("AUTOCLUST_FUZZ_INPUTS").ok().and_then(|s| s.parse().ok()).unwrap_or(24)
}

fn fuzz_format(format: Format) {
    let keep = tempfile::tempdir().unwrap();
    let limits = Limits { timeout: std::time::Duration::from_secs(60), ..Limits::default() };
    let t = engine::fuzz(&bin(), format, 0..inputs_per_format(), 2, limits, keep.path());
    assert_eq!(t.inputs, inputs_per_format());
    if !t.findings.is_empty() {
        let kept = keep.keep();
        let mut msg = format!("{} of {} {} inputs break the contract:\n", t.findings.len(), t.inputs, format.name());
        for f in &t.findings {
            msg += &format!("{f}\n");
        }
        msg += &format!("(all kept under {}; make a reproducer in testdata/fuzz/ once fixed)", kept.display());
        panic!("{msg}");
    }
    eprintln!("{}: {} inputs, exits {:?}", format.name(), t.inputs, t.exits);
    // Not vacuous: the mutations reach both success and refusal.
    assert!(t.exits.contains_key(&1), "{format:?}: no input was refused: {:?}", t.exits);
}

#[test]
fn fuzzed_pbtxt_keeps_the_contract() {
    fuzz_format(Format::Pbtxt);
}

#[test]
fn fuzzed_pb_keeps_the_contract() {
    fuzz_format(Format::Pb);
}

#[test]
fn fuzzed_native_keeps_the_contract() {
    fuzz_format(Format::Native);
}

#[test]
fn fuzzed_safetensors_keeps_the_contract() {
    fuzz_format(Format::Safetensors);
}

#[test]
fn fuzzed_numpy_keeps_the_contract() {
    fuzz_format(Format::Numpy);
}

#[test]
fn fuzzed_savedmodel_keeps_the_contract() {
    fuzz_format(Format::SavedModel);
}

/// A reproducer: `NAME.expect` holds `args:` (the command line, `{}` for the input file
/// `NAME.<ext>` beside it; other paths relative to the repository root), `exit:` and
/// `error:` (the exact `error:` line of stderr — notes saying why the run fell back may come
/// first —, `-` when none is expected).
#[test]
fn reproducers_give_their_recorded_outcome() {
    let dir = engine::repo_root().join("testdata/fuzz");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "expect") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let field = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(k).map(str::trim))
                .unwrap_or_else(|| panic!("{}: no `{k}` line", path.display()))
                .to_string()
        };
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let input = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_stem().is_some_and(|s| s.to_string_lossy() == stem) && p != &path)
            .unwrap_or_else(|| panic!("{}: no input file beside it", path.display()));
        let args: Vec<String> =
            field("args:").split_whitespace().map(|a| a.replace("{}", &input.display().to_string())).collect();
        let o = engine::run(&bin(), &engine::repo_root(), &args, Limits::default());
        assert_eq!(engine::violation(&o, false), None, "{}: {}", path.display(), o.stderr);
        let exit: i32 = field("exit:").parse().unwrap();
        assert_eq!(o.code, Some(exit), "{}: {}", path.display(), o.stderr);
        let want = field("error:");
        if want != "-" {
            let got = o.error_line().trim_start_matches("error:").trim();
            let got = got.replace(&input.display().to_string(), "{}");
            assert_eq!(got, want, "{}", path.display());
        }
        checked += 1;
    }
    assert!(checked > 0 || Path::new(&dir).join("README.md").exists(), "testdata/fuzz has no reproducers");
}

/// The seeds themselves run cleanly: without this, every mutated input could be failing
/// for a reason the mutation did not cause, and the fuzzer would test nothing but errors.
#[test]
fn unmutated_seeds_run() {
    let scratch = tempfile::tempdir().unwrap();
    for format in Format::ALL {
        let seeds = engine::seeds(format, &bin(), scratch.path());
        let mut failed = Vec::new();
        for seed in seeds.iter().step_by(7) {
            let dir = tempfile::tempdir().unwrap();
            engine::write_case(seed, &seed.files[seed.target].1, dir.path());
            for args in engine::commands(seed, format) {
                let o = engine::run(&bin(), dir.path(), &args, Limits::default());
                if o.code != Some(0) && !seed.run_args.is_empty() {
                    failed.push(format!("{} {}: {}", format.name(), seed.name, o.first_line()));
                }
            }
        }
        assert!(failed.is_empty(), "{failed:#?}");
    }
}
