//! The fuzzer's long mode (issue 13): `cargo bench -p autoclust --bench fuzz -- [--inputs N]
//! [--formats pbtxt,pb,native,safetensors,numpy,savedmodel] [--start S] [--threads T]
//! [--bin PATH]`. Runs the release binary (or `--bin`, a copy that a rebuild of
//! `target/release` cannot replace under a long run) on inputs `S..S+N` of each format under a 4 GB address-space
//! limit, prints a table of outcomes, and keeps every case that breaks the contract under
//! `target/fuzz-findings/` with the command that shows it.

#[path = "../tests/fuzz/engine.rs"]
mod engine;

use std::path::PathBuf;
use std::time::Instant;

use engine::{Format, Limits};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |k: &str| args.iter().position(|a| a == k).and_then(|i| args.get(i + 1)).cloned();
    if args.iter().any(|a| a == "--list") {
        return; // `cargo bench -- --list`
    }
    let inputs: u64 = opt("--inputs").and_then(|s| s.parse().ok()).unwrap_or(2_000);
    let start: u64 = opt("--start").and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let threads: usize = opt("--threads")
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2));
    let formats: Vec<Format> = match opt("--formats") {
        Some(list) => {
            list.split(',').map(|f| Format::parse(f).unwrap_or_else(|| panic!("unknown format {f}"))).collect()
        }
        None => Format::ALL.to_vec(),
    };
    let bin = opt("--bin").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_autoclust")), PathBuf::from);
    let keep = engine::repo_root().join("target/fuzz-findings");
    let limits = Limits::default();
    println!("| format | inputs | executions | exit 0 | exit 1 | exit 2 | findings | seconds |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut all = Vec::new();
    for f in formats {
        let t0 = Instant::now();
        let t = engine::fuzz(&bin, f, start..start + inputs, threads, limits, &keep);
        let n = |c: i32| t.exits.get(&c).copied().unwrap_or(0);
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.0} |",
            f.name(),
            t.inputs,
            t.executions,
            n(0),
            n(1),
            n(2),
            t.findings.len(),
            t0.elapsed().as_secs_f64()
        );
        all.extend(t.findings);
    }
    for f in &all {
        println!("finding: {f}");
    }
    if !all.is_empty() {
        std::process::exit(1);
    }
}
