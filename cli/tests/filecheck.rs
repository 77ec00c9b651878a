//! The FileCheck-style test runner: one named test per `testdata/**/*.graph`
//! file that has a `# RUN:` (or `# RUN-FAIL:`) line.
//!
//! A case opens with its RUN line and a one-sentence purpose:
//! ```text
//! # RUN: autoclust opt %s --passes cluster,encapsulate
//! # Tests that …
//! ```
//! `%s` is the case file (relative to the workspace root, the working
//! directory), `%t` a fresh temporary file; the command is the built
//! `autoclust` binary. `RUN` expects exit 0 and checks stdout — or, when
//! the command has `-o %t`, the file written there. `RUN-FAIL` expects
//! exit 1, checks stderr, and requires that `%t` was not created.
//!
//! Checks use LLVM FileCheck's spelling — `CHECK:`, `CHECK-NEXT:`,
//! `CHECK-SAME:`, `CHECK-NOT:`, `CHECK-DAG:`, `CHECK-LABEL:`, with
//! `{{regex}}`, `[[VAR:regex]]` and `[[VAR]]` — translated onto the
//! `filecheck` crate's `check:`/`nextln:`/`sameln:`/`not:`/`unordered:` and
//! `$(…)` syntax. Patterns match anywhere in a line (LLVM's rule; the crate
//! would otherwise demand word boundaries). On failure the test prints the
//! command, the translated directives, the crate's match-by-match
//! explanation and the numbered output.
//!
//! `# XFAIL: reason` marks a case that is known to fail (lit's rule): it
//! passes while the case fails and fails once the case passes, so the mark
//! is removed when the gap is closed.
//!
//! **Lowering cases** (`testdata/compile/`, Cranelift's filetests in spirit)
//! run `autoclust run … --dump-clif %t`: the checked text is then the dump
//! directory — every `.plan` file (the compiled body's steps: fused loops,
//! GEMMs, reductions, folded constants) and then every function's `.clif`,
//! each under a `== FILE` line, in name order (numbers compared as numbers).
//! Machine code (`.s`) is not checked, and tile routines are turned off
//! (`AUTOCLUST_NO_TILES=1`), so the text does not depend on the host's ISA.
//! A case may also hold the exact plan as `# PLAN:` lines; it must match
//! line for line, and `AUTOCLUST_BLESS=1 cargo test -p autoclust --test
//! filecheck` rewrites those lines from the actual output (then review the
//! diff), as Cranelift's precise-output tests are blessed.

use std::path::{Path, PathBuf};
use std::process::Command;

use libtest_mimic::{Arguments, Failed, Trial};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("cli/ has a parent").to_path_buf()
}

/// One directive, already in the `filecheck` crate's syntax, with its line.
#[derive(Debug, Clone)]
struct Directive {
    line: usize,
    text: String,
}

#[derive(Debug)]
struct Case {
    run: Vec<String>,
    expect_failure: bool,
    directives: Vec<Directive>,
    /// Why the case is expected to fail (`# XFAIL:`).
    xfail: Option<String>,
    /// The exact expected `.plan` output of a lowering case (`# PLAN:` lines).
    plan: Option<Vec<String>>,
}

/// Which LLVM directive a comment holds, and its `filecheck` equivalent.
const DIRECTIVES: &[(&str, &str)] = &[
    ("CHECK-NEXT:", "nextln:"),
    ("CHECK-SAME:", "sameln:"),
    ("CHECK-NOT:", "not:"),
    ("CHECK-DAG:", "unordered:"),
    ("CHECK-LABEL:", "check:"),
    ("CHECK:", "check:"),
];

/// Translates an LLVM FileCheck pattern into the `filecheck` crate's syntax.
fn translate_pattern(pattern: &str) -> Result<String, String> {
    let p = pattern.trim();
    let mut out = String::from("$()");
    let mut rest = p;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("{{") {
            let end = r.find("}}").ok_or_else(|| format!("unterminated {{{{ in '{pattern}'"))?;
            out.push_str(&format!("$(=(?m:{}))", &r[..end]));
            rest = &r[end + 2..];
        } else if let Some(r) = rest.strip_prefix("[[") {
            let end = r.find("]]").ok_or_else(|| format!("unterminated [[ in '{pattern}'"))?;
            let inner = &r[..end];
            match inner.split_once(':') {
                Some((name, re)) => out.push_str(&format!("$({name}=(?m:{re}))")),
                None => out.push_str(&format!("$({inner})")),
            }
            rest = &r[end + 2..];
        } else {
            let c = rest.chars().next().expect("non-empty");
            if c == '$' {
                out.push_str("$$");
            } else {
                out.push(c);
            }
            rest = &rest[c.len_utf8()..];
        }
    }
    out.push_str("$()");
    Ok(out)
}

/// Reads the RUN line, the purpose sentence and the directives of a case.
fn parse_case(text: &str) -> Result<Case, String> {
    let mut run: Option<(Vec<String>, bool)> = None;
    let mut xfail = None;
    let mut plan: Option<Vec<String>> = None;
    let mut directives = Vec::new();
    let mut first_comment_lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Some(comment) = line.trim_start().strip_prefix('#') else { continue };
        let comment = comment.trim_start();
        if first_comment_lines.len() < 2 {
            first_comment_lines.push((i + 1, comment.to_string()));
        }
        let (is_run, fail) = if let Some(r) = comment.strip_prefix("RUN-FAIL:") {
            (Some(r), true)
        } else {
            (comment.strip_prefix("RUN:"), false)
        };
        if let Some(reason) = comment.strip_prefix("XFAIL:") {
            xfail = Some(reason.trim().to_string());
            continue;
        }
        if let Some(line) = comment.strip_prefix("PLAN:") {
            plan.get_or_insert_with(Vec::new).push(line.strip_prefix(' ').unwrap_or(line).to_string());
            continue;
        }
        if let Some(cmd) = is_run {
            if run.is_some() {
                return Err(format!("line {}: a case has exactly one RUN line", i + 1));
            }
            run = Some((cmd.split_whitespace().map(str::to_string).collect(), fail));
            continue;
        }
        for (llvm, ours) in DIRECTIVES {
            if let Some(pattern) = comment.strip_prefix(llvm) {
                let translated = translate_pattern(pattern).map_err(|e| format!("line {}: {e}", i + 1))?;
                directives.push(Directive { line: i + 1, text: format!("{ours} {translated}") });
                break;
            }
        }
        if comment.starts_with("CHECK") && directives.last().is_none_or(|d| d.line != i + 1) {
            return Err(format!("line {}: unknown directive '{comment}'", i + 1));
        }
    }
    let (run, expect_failure) = run.ok_or("no RUN line")?;
    if run.first().map(String::as_str) != Some("autoclust") {
        return Err("the RUN command must start with 'autoclust'".into());
    }
    match first_comment_lines.as_slice() {
        [(1, r), (2, purpose)] if r.starts_with("RUN") && !purpose.is_empty() && !purpose.starts_with("CHECK") => {}
        _ => return Err("a case opens with its RUN line, then a one-sentence purpose comment".into()),
    }
    if directives.is_empty() && plan.is_none() {
        return Err("no CHECK or PLAN lines".into());
    }
    if plan.is_some() && !run.iter().any(|a| a == "--dump-clif") {
        return Err("PLAN lines need a RUN line with --dump-clif %t".into());
    }
    Ok(Case { run, expect_failure, directives, xfail, plan })
}

/// Checks `output` against the directives; the error explains the mismatch.
fn check_output(directives: &[Directive], output: &str) -> Result<(), String> {
    let mut builder = filecheck::CheckerBuilder::new();
    for d in directives {
        match builder.directive(&d.text) {
            Ok(true) => {}
            Ok(false) => return Err(format!("line {}: not a directive: {}", d.line, d.text)),
            Err(e) => return Err(format!("line {}: bad directive '{}': {e}", d.line, d.text)),
        }
    }
    let checker = builder.finish();
    let (ok, explanation) =
        checker.explain(output, filecheck::NO_VARIABLES).map_err(|e| format!("filecheck error: {e}"))?;
    if ok {
        return Ok(());
    }
    let mut msg = String::from("FileCheck failed.\n--- directives (translated) ---\n");
    for d in directives {
        msg.push_str(&format!("  line {:>3}: {}\n", d.line, d.text));
    }
    msg.push_str("--- explanation ---\n");
    msg.push_str(&explanation);
    msg.push_str("--- output ---\n");
    for (i, l) in output.lines().enumerate() {
        msg.push_str(&format!("{:>4} | {l}\n", i + 1));
    }
    Err(msg)
}

fn run_case(root: &Path, rel: &str) -> Result<(), Failed> {
    let text = std::fs::read_to_string(root.join(rel)).map_err(|e| format!("{rel}: {e}"))?;
    let case = parse_case(&text).map_err(|e| format!("{rel}: {e}"))?;
    let result = execute(root, rel, &case);
    match (&case.xfail, result) {
        (None, r) => r,
        (Some(_), Err(_)) => Ok(()),
        (Some(reason), Ok(())) => Err(format!("{rel}: marked XFAIL ({reason}) but passes: remove the mark").into()),
    }
}

fn execute(root: &Path, rel: &str, case: &Case) -> Result<(), Failed> {
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let tmp_file = tmp.path().join("out.graph");
    let tmp_str = tmp_file.to_string_lossy().to_string();
    let args: Vec<String> = case.run[1..].iter().map(|a| a.replace("%s", rel).replace("%t", &tmp_str)).collect();
    let output_to_file = case.run.iter().any(|a| a.contains("%t"));
    let dump_dir = case.run.windows(2).any(|w| w[0] == "--dump-clif" && w[1] == "%t");
    let result = Command::new(env!("CARGO_BIN_EXE_autoclust"))
        .args(&args)
        .current_dir(root)
        .env_remove("RUST_LOG")
        .env_remove("AUTOCLUST_NO_AVX512")
        .env("AUTOCLUST_NO_TILES", "1")
        .output()
        .map_err(|e| format!("cannot run autoclust: {e}"))?;
    let stdout = String::from_utf8_lossy(&result.stdout).to_string();
    let stderr = String::from_utf8_lossy(&result.stderr).to_string();
    let command = format!("autoclust {}", args.join(" "));
    let code = result.status.code();
    let checked = if case.expect_failure {
        if code != Some(1) {
            return Err(format!(
                "{command}: expected exit 1, got {code:?}\n--- stdout ---\n{stdout}--- stderr ---\n{stderr}"
            )
            .into());
        }
        if output_to_file && tmp_file.exists() {
            return Err(format!("{command}: failed but left an output file").into());
        }
        stderr
    } else {
        if code != Some(0) {
            return Err(format!("{command}: expected exit 0, got {code:?}\n--- stderr ---\n{stderr}").into());
        }
        if dump_dir {
            let (plans, dump) = read_dump(&tmp_file).map_err(|e| format!("{command}: {e}"))?;
            if let Some(want) = &case.plan {
                check_plan(root, rel, want, &plans).map_err(|e| format!("{rel}\n$ {command}\n{e}"))?;
            }
            dump
        } else if output_to_file {
            std::fs::read_to_string(&tmp_file).map_err(|e| format!("{command}: no output file: {e}"))?
        } else {
            stdout
        }
    };
    if case.directives.is_empty() {
        return Ok(());
    }
    check_output(&case.directives, &checked).map_err(|e| format!("{rel}\n$ {command}\n{e}").into())
}

/// A dump file's name as a sort key: runs of digits compare as numbers, so
/// `f_2` comes before `f_10`.
fn natural_key(name: &str) -> Vec<(String, u64)> {
    let mut key = Vec::new();
    let mut text = String::new();
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            let mut n = c.to_digit(10).unwrap_or(0) as u64;
            while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
                n = n.saturating_mul(10).saturating_add(d as u64);
                chars.next();
            }
            key.push((std::mem::take(&mut text), n));
        } else {
            text.push(c);
        }
    }
    key.push((text, u64::MAX));
    key
}

/// The `.plan` lines of a `--dump-clif` directory, and the checked text: every
/// `.plan` file, then every `.clif` file, each under a `== FILE` line.
fn read_dump(dir: &Path) -> Result<(Vec<String>, String), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("no dump directory {}: {e}", dir.display()))?;
    let mut names: Vec<String> =
        entries.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into()).collect();
    names.sort_by_key(|n| natural_key(n));
    let (mut plans, mut text) = (Vec::new(), String::new());
    for ext in [".plan", ".clif"] {
        for name in names.iter().filter(|n| n.ends_with(ext)) {
            let body = std::fs::read_to_string(dir.join(name)).map_err(|e| format!("{name}: {e}"))?;
            if ext == ".plan" {
                plans.extend(body.lines().map(str::to_string));
            }
            text.push_str(&format!("== {name}\n{body}"));
            if !body.ends_with('\n') {
                text.push('\n');
            }
        }
    }
    if plans.is_empty() {
        return Err(format!("nothing was compiled: no .plan file in {}", dir.display()));
    }
    Ok((plans, text))
}

/// Compares a case's `# PLAN:` lines with the actual plan; under
/// `AUTOCLUST_BLESS=1` rewrites them instead.
fn check_plan(root: &Path, rel: &str, want: &[String], got: &[String]) -> Result<(), String> {
    if want == got {
        return Ok(());
    }
    if std::env::var_os("AUTOCLUST_BLESS").is_some() {
        let path = root.join(rel);
        let text = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
        let mut out = String::new();
        let mut written = false;
        for line in text.lines() {
            if line.trim_start().starts_with("# PLAN:") {
                if !written {
                    for g in got {
                        out.push_str(&format!("# PLAN: {g}\n"));
                    }
                    written = true;
                }
                continue;
            }
            out.push_str(line);
            out.push('\n');
        }
        std::fs::write(&path, out).map_err(|e| e.to_string())?;
        eprintln!("{rel}: blessed {} PLAN lines", got.len());
        return Ok(());
    }
    let mut msg = String::from("the plan differs from the case's PLAN lines (AUTOCLUST_BLESS=1 rewrites them)\n");
    for i in 0..want.len().max(got.len()) {
        match (want.get(i), got.get(i)) {
            (Some(w), Some(g)) if w == g => msg.push_str(&format!("  {w}\n")),
            (w, g) => {
                if let Some(w) = w {
                    msg.push_str(&format!("- {w}\n"));
                }
                if let Some(g) = g {
                    msg.push_str(&format!("+ {g}\n"));
                }
            }
        }
    }
    Err(msg)
}

fn collect_cases(dir: &Path, root: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect_cases(&p, root, out);
        } else if p.extension().is_some_and(|e| e == "graph") {
            let has_run = std::fs::read_to_string(&p).is_ok_and(|t| t.lines().any(|l| l.contains("# RUN")));
            if has_run {
                out.push(p.strip_prefix(root).expect("under root").to_string_lossy().to_string());
            }
        }
    }
}

/// Checks of the runner itself: a broken expectation must fail.
fn self_tests() -> Vec<Trial> {
    let output = "a = Const() {dtype = float32}\nb = Neg(a) {T = float32}\nc = Neg(b) {T = float32}\n";
    let case = |checks: &'static str, should_pass: bool| {
        move || -> Result<(), Failed> {
            let text = format!("# RUN: autoclust opt %s --passes verify\n# Self-test.\n{checks}");
            let case = parse_case(&text)?;
            let got = check_output(&case.directives, output);
            match (got, should_pass) {
                (Ok(()), true) | (Err(_), false) => Ok(()),
                (Ok(()), false) => Err("a broken expectation passed".into()),
                (Err(e), true) => Err(e.into()),
            }
        }
    };
    vec![
        Trial::test("harness/check_and_next_pass", case("# CHECK: a = Const\n# CHECK-NEXT: b = Neg(a)\n", true)),
        Trial::test("harness/next_fails_on_gap", case("# CHECK: a = Const\n# CHECK-NEXT: c = Neg\n", false)),
        Trial::test("harness/missing_text_fails", case("# CHECK: d = Neg\n", false)),
        Trial::test("harness/plan_mismatch_fails", || {
            if std::env::var_os("AUTOCLUST_BLESS").is_some() {
                return Ok(()); // blessing would rewrite the (absent) case file
            }
            let want = vec!["step 0: a".to_string()];
            match check_plan(&workspace_root(), "unused", &want, &["step 0: b".to_string()]) {
                Err(e) if e.contains("- step 0: a") && e.contains("+ step 0: b") => Ok(()),
                Err(e) => Err(e.into()),
                Ok(()) => Err("a wrong plan passed".into()),
            }
        }),
        Trial::test("harness/dump_files_in_natural_order", || {
            let mut names = vec!["f_10.clif", "f_2.clif", "f_1.clif", "a.plan"];
            names.sort_by_key(|n| natural_key(n));
            if names == ["a.plan", "f_1.clif", "f_2.clif", "f_10.clif"] {
                Ok(())
            } else {
                Err(format!("{names:?}").into())
            }
        }),
        Trial::test(
            "harness/not_fails_when_present",
            case("# CHECK: a = Const\n# CHECK-NOT: Neg(a)\n# CHECK: c =\n", false),
        ),
        Trial::test("harness/dag_any_order", case("# CHECK-DAG: c = Neg\n# CHECK-DAG: b = Neg\n", true)),
        Trial::test(
            "harness/regex_and_vars",
            case("# CHECK: [[X:\\w]] = Neg(a)\n# CHECK: = Neg([[X]]) {{[{]}}T = float32}{{$}}\n", true),
        ),
        Trial::test("harness/vars_must_agree", case("# CHECK: [[X:\\w]] = Neg(a)\n# CHECK: c = Neg([[X]]x)\n", false)),
        Trial::test("harness/mid_word_match", case("# CHECK: onst() {dtype = float3\n", true)),
        Trial::test("harness/dollar_is_literal", case("# CHECK-NOT: $T\n# CHECK: Neg\n", true)),
    ]
}

fn main() {
    let args = Arguments::from_args();
    let root = workspace_root();
    let mut cases = Vec::new();
    collect_cases(&root.join("testdata"), &root, &mut cases);
    let mut trials = self_tests();
    for rel in cases {
        let root = root.clone();
        trials.push(Trial::test(rel.clone(), move || run_case(&root, &rel)));
    }
    libtest_mimic::run(&args, trials).exit();
}
