//! What the end-to-end tests share: running the binary, reading its `note:` lines, and
//! writing a graph into a test's temporary directory. (Not every test file uses all of it.)
#![allow(dead_code)]

use std::process::{Command, Output};

/// Runs `autoclust` with `args`, RUST_LOG unset (what a test reads must not depend on it).
pub fn autoclust(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_autoclust")).args(args).env_remove("RUST_LOG").output().expect("the binary runs")
}

/// The `note:` lines of a run's stderr ("Never silent", docs/contract.md).
pub fn notes(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr).lines().filter(|l| l.starts_with("note: ")).map(String::from).collect()
}

/// Writes `text` to `name` in `dir`; returns the path.
pub fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}
