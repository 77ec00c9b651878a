//! A deterministic, bounded mutation fuzzer over every reader and `run` (issue 13).
//!
//! Shared by the CI test `cli/tests/fuzz.rs` (a few hundred inputs, seconds) and the
//! long mode `cli/benches/fuzz.rs` (`cargo bench -p autoclust --bench fuzz -- --inputs
//! 100000`). Stable Rust, no instrumentation: the seeds are the project's own fixtures
//! (TensorFlow-made GraphDefs with their feeds and variables, native graphs, SavedModels
//! with `.npz` feeds), each mutated input is written to a fresh directory and the real
//! binary runs on it in a child process under a 4 GB address-space limit and a
//! time limit. Input `i` of a format is a pure function of `(format, i)` (a xorshift
//! stream seeded by both), so a failure is reproduced by its index alone.
//!
//! The oracle is the contract (docs/contract.md §1): exit status 0, 1 or 2; on a non-zero
//! status the first stderr line starts `error:`; never a panic, a signal (abort on a
//! failed allocation, stack overflow), a hang past the time limit, or a partial output
//! file. For `run`, both modes run and must agree: when both succeed their fetched
//! values and variables are equal (within float tolerance, skipped for graphs with
//! unseeded random ops or a race), and a failure in one mode and a success in the
//! other is reported — one of them would be a silently wrong answer.

#![allow(dead_code)] // each including crate uses a part

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The repository root (this file is `cli/tests/fuzz/engine.rs`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().expect("repository root")
}

// ---------------------------------------------------------------------------------------
// Randomness

/// xorshift64*: tiny, deterministic, good enough to pick mutations.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // splitmix64 of the seed, so nearby seeds give unrelated streams.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

// ---------------------------------------------------------------------------------------
// Formats and seeds

/// What is mutated: the graph in one of the readers' formats, or a tensor file the run reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Format {
    /// GraphDef text (`.pbtxt`).
    Pbtxt,
    /// Binary GraphDef (`.pb`).
    Pb,
    /// The native text format (`.graph`).
    Native,
    /// A run's feeds and variables (`.safetensors`).
    Safetensors,
    /// `.npy` / `.npz` feeds of a SavedModel.
    Numpy,
    /// A SavedModel's parts: `saved_model.pb`, `variables.index`, the data shard.
    SavedModel,
}

impl Format {
    pub const ALL: [Format; 6] =
        [Format::Pbtxt, Format::Pb, Format::Native, Format::Safetensors, Format::Numpy, Format::SavedModel];

    pub fn name(self) -> &'static str {
        match self {
            Format::Pbtxt => "pbtxt",
            Format::Pb => "pb",
            Format::Native => "native",
            Format::Safetensors => "safetensors",
            Format::Numpy => "numpy",
            Format::SavedModel => "savedmodel",
        }
    }
    pub fn parse(s: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == s)
    }
    fn is_text(self) -> bool {
        matches!(self, Format::Pbtxt | Format::Native)
    }
}

/// One seed: a set of files (the one to mutate first) and the `run` arguments that use them.
/// Arguments name files by their base names; every case runs in its own directory.
#[derive(Clone, Debug)]
pub struct Seed {
    pub name: String,
    /// (file name in the case directory, bytes); `files[target]` is mutated.
    pub files: Vec<(String, Vec<u8>)>,
    pub target: usize,
    /// The graph operand (a file or a directory name).
    pub graph: String,
    /// `run`'s request: feeds, variables, fetches, targets, signature, steps.
    pub run_args: Vec<String>,
    /// Whether the two modes may legitimately give different values (unseeded random
    /// ops, a racy graph).
    pub nondeterministic: bool,
    /// Whether the graph is racy by design: its runs may succeed or fail by schedule.
    pub racy: bool,
    /// Whether the graph prints to stderr (its output may precede an error line).
    pub prints: bool,
    /// For a binary GraphDef: its text, so that half the inputs are text mutations
    /// converted to binary by `convert` (hostile content in well-formed protobuf).
    pub text: Option<Vec<u8>>,
}

/// Reads the seeds of `format` from the repository's fixtures. Binary GraphDefs are made
/// from the text fixtures by `bin convert`.
pub fn seeds(format: Format, bin: &Path, scratch: &Path) -> Vec<Seed> {
    let root = repo_root();
    let tf = root.join("testdata/tf");
    let mut out = Vec::new();
    match format {
        Format::Pbtxt | Format::Pb | Format::Native | Format::Safetensors => {
            for m in tf_manifests(&tf) {
                let graph_src = tf.join(&m.graph);
                let graph_name = match format {
                    Format::Pb => "g.pb",
                    Format::Native => "g.graph",
                    _ => "g.pbtxt",
                };
                let graph_bytes = match format {
                    Format::Pb | Format::Native => match convert(bin, &graph_src, graph_name, scratch) {
                        Some(b) => b,
                        None => continue,
                    },
                    _ => std::fs::read(&graph_src).expect("fixture graph"),
                };
                let mut files = vec![(graph_name.to_string(), graph_bytes)];
                let mut run_args = Vec::new();
                for (flag, file, local) in
                    [("--feeds", &m.feeds, "feeds.safetensors"), ("--vars", &m.vars, "vars.safetensors")]
                {
                    if let Some(f) = file {
                        files.push((local.to_string(), std::fs::read(tf.join(f)).expect("fixture tensors")));
                        run_args.extend([flag.to_string(), local.to_string()]);
                    }
                }
                for (name, json) in &m.feed_json {
                    run_args.extend(["--feed".into(), format!("{name}={json}")]);
                }
                if !m.fetch.is_empty() {
                    run_args.extend(["--fetch".into(), m.fetch.join(",")]);
                }
                if !m.target.is_empty() {
                    run_args.extend(["--target".into(), m.target.join(",")]);
                }
                run_args.extend(["--steps".into(), m.steps.min(2).to_string()]);
                let text = String::from_utf8_lossy(&files[0].1);
                let nondeterministic = m.racy || has_unseeded_randomness(&text);
                let prints = text.contains("Print");
                let racy = m.racy;
                let target = if format == Format::Safetensors {
                    match files.iter().position(|(n, _)| n.ends_with(".safetensors")) {
                        Some(t) => t,
                        None => continue,
                    }
                } else {
                    0
                };
                let text = (format == Format::Pb).then(|| std::fs::read(&graph_src).expect("fixture graph"));
                out.push(Seed {
                    name: m.name.clone(),
                    files,
                    target,
                    graph: graph_name.into(),
                    run_args,
                    nondeterministic,
                    racy,
                    prints,
                    text,
                });
            }
            if format == Format::Native {
                for dir in ["testdata/run", "testdata/errors"] {
                    for path in sorted_files(&root.join(dir), "graph") {
                        let bytes = std::fs::read(&path).unwrap();
                        let text = String::from_utf8_lossy(&bytes).into_owned();
                        let run_args = run_line_args(&text);
                        out.push(Seed {
                            name: path.file_stem().unwrap().to_string_lossy().into_owned(),
                            files: vec![("g.graph".into(), bytes)],
                            target: 0,
                            graph: "g.graph".into(),
                            run_args,
                            nondeterministic: has_unseeded_randomness(&text),
                            // Seeds 000 and 001's examples are races by design.
                            racy: path.file_stem().is_some_and(|s| s.to_string_lossy().starts_with("seed0")),
                            prints: text.contains("Print"),
                            text: None,
                        });
                    }
                }
            }
        }
        Format::Numpy | Format::SavedModel => {
            let sm = root.join("testdata/savedmodel");
            for (model, signature, feeds) in [
                ("dense2", "serving_default", "dense2.feeds.npz"),
                ("dense2", "serving_default", "dense2.x.npy"),
                ("cnn", "serving_default", "cnn.feeds.npz"),
                ("train", "train_step", "train.feeds.npz"),
            ] {
                let dir = sm.join(model);
                let mut files = Vec::new();
                for part in ["saved_model.pb", "variables/variables.index", "variables/variables.data-00000-of-00001"] {
                    let Ok(b) = std::fs::read(dir.join(part)) else { continue };
                    files.push((format!("m/{part}"), b));
                }
                let local = if feeds.ends_with(".npy") { "feeds.npy" } else { "feeds.npz" };
                files.push((local.into(), std::fs::read(sm.join(feeds)).expect("fixture feeds")));
                let run_args: Vec<String> = ["--signature", signature, "--feeds", local, "--steps", "2"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
                let n = files.len();
                if format == Format::Numpy {
                    out.push(Seed {
                        name: format!("{model}+{local}"),
                        files,
                        target: n - 1,
                        graph: "m".into(),
                        run_args,
                        nondeterministic: false,
                        racy: false,
                        prints: false,
                        text: None,
                    });
                } else if !out.iter().any(|s: &Seed| s.name.starts_with(&format!("{model}/"))) {
                    for t in 0..n - 1 {
                        out.push(Seed {
                            name: format!("{model}/{}", files[t].0.trim_start_matches("m/")),
                            files: files.clone(),
                            target: t,
                            graph: "m".into(),
                            run_args: run_args.clone(),
                            nondeterministic: false,
                            racy: false,
                            prints: false,
                            text: None,
                        });
                    }
                }
            }
        }
    }
    out
}

struct Manifest {
    name: String,
    graph: String,
    feeds: Option<String>,
    vars: Option<String>,
    feed_json: Vec<(String, String)>,
    fetch: Vec<String>,
    target: Vec<String>,
    steps: u64,
    racy: bool,
}

fn tf_manifests(tf: &Path) -> Vec<Manifest> {
    let mut out = Vec::new();
    for path in sorted_files(tf, "json") {
        let text = std::fs::read_to_string(&path).unwrap();
        let Ok(m) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
        let Some(graph) = m["graph"].as_str() else { continue };
        if !graph.ends_with(".pbtxt") {
            continue;
        }
        let list = |k: &str| -> Vec<String> {
            m[k].as_array().map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect()).unwrap_or_default()
        };
        let feed_json = m["string_feeds"]
            .as_object()
            .map(|o| o.iter().map(|(k, v)| (k.clone(), v.to_string())).collect())
            .unwrap_or_default();
        out.push(Manifest {
            name: path.file_stem().unwrap().to_string_lossy().into_owned(),
            graph: graph.to_string(),
            feeds: m["feeds"].as_str().map(String::from),
            vars: m["vars"].as_str().map(String::from),
            feed_json,
            fetch: list("fetch"),
            target: list("target"),
            steps: m["steps"].as_u64().unwrap_or(1),
            racy: m["racy"].as_bool().unwrap_or(false),
        });
    }
    out
}

fn sorted_files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|e| e == ext)).collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The `--fetch`/`--target` of a native test graph's `# RUN:` line, if it has one; else
/// nothing (the run fetches nothing and exits 2, still a contract-checked outcome).
fn run_line_args(text: &str) -> Vec<String> {
    for line in text.lines() {
        let Some(rest) = line.trim_start().strip_prefix("# RUN:") else { continue };
        let words: Vec<&str> = rest.split_whitespace().collect();
        let mut args = Vec::new();
        let mut i = 0;
        while i < words.len() {
            if matches!(words[i], "--fetch" | "--target" | "--feed" | "--steps") && i + 1 < words.len() {
                args.extend([words[i].to_string(), words[i + 1].trim_matches('\'').to_string()]);
                i += 2;
            } else {
                i += 1;
            }
        }
        return args;
    }
    Vec::new()
}

/// Random ops without both seeds set draw differently in every process.
fn has_unseeded_randomness(text: &str) -> bool {
    ["Random", "Multinomial", "Shuffle", "TruncatedNormal", "Dropout"].iter().any(|w| text.contains(w))
}

fn convert(bin: &Path, src: &Path, name: &str, scratch: &Path) -> Option<Vec<u8>> {
    let out = scratch.join(format!("{}.{}", src.file_stem()?.to_string_lossy(), name));
    let st = Command::new(bin).arg("convert").arg(src).arg("-o").arg(&out).stderr(Stdio::null()).status().ok()?;
    if !st.success() {
        return None;
    }
    std::fs::read(out).ok()
}

// ---------------------------------------------------------------------------------------
// Mutation

/// Integers that tend to break size and index arithmetic.
const INTERESTING: &[&str] = &[
    "0",
    "-1",
    "1",
    "2",
    "-2147483648",
    "2147483647",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "1000000000000",
    "65536",
    "1e30",
    "-1e30",
    "nan",
    "inf",
    "-0.0",
    "1e-45",
    "99999999999999999999999",
];

/// Makes input `index` of a seed: 1–4 stacked mutations of the target file, mostly
/// structure-aware (a number, a name, a node, a header field) so that most inputs get
/// past the parser and reach inference, clustering, compilation and the kernels; a
/// tenth are raw byte edits for the parsers themselves.
pub fn mutate(seed: &Seed, all: &[Seed], format: Format, rng: &mut Rng) -> Vec<u8> {
    let mut data = seed.files[seed.target].1.clone();
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        let raw = rng.chance(10);
        match format {
            Format::Pbtxt | Format::Native if !raw => mutate_text(&mut data, all, seed.target, format, rng),
            Format::Safetensors if !raw => mutate_safetensors(&mut data, rng),
            Format::Numpy if !raw && rng.chance(2) => mutate_numbers(&mut data, rng),
            _ => mutate_bytes(&mut data, all, seed.target, rng),
        }
    }
    data
}

/// Edits a safetensors file's JSON header (shapes, dtypes, offsets, names) and keeps its
/// length prefix consistent, or edits the data bytes (values: NaN, infinities, indices).
fn mutate_safetensors(data: &mut Vec<u8>, rng: &mut Rng) {
    if data.len() < 8 {
        return mutate_bytes(data, &[], 0, rng);
    }
    let n = u64::from_le_bytes(data[..8].try_into().unwrap()) as usize;
    if n > data.len() - 8 {
        return mutate_bytes(data, &[], 0, rng);
    }
    let body = data.split_off(8 + n);
    let mut header = data.split_off(8);
    let mut body = body;
    if rng.chance(2) || body.is_empty() {
        match rng.below(3) {
            0 => mutate_numbers(&mut header, rng),
            1 => {
                let dtypes = ["F32", "F64", "I32", "I64", "BOOL", "U8", "F16", "BF16", "I8", "X"];
                let text = String::from_utf8_lossy(&header).into_owned();
                let from = rng.pick(&dtypes[..5]);
                header = text.replacen(&format!("\"{from}\""), &format!("\"{}\"", rng.pick(&dtypes)), 1).into_bytes();
            }
            _ => {
                let words = word_spans(&header);
                if words.len() >= 2 {
                    let (a, b) = *rng.pick(&words);
                    let (c, d) = *rng.pick(&words);
                    let w = header[c..d].to_vec();
                    header.splice(a..b, w);
                }
            }
        }
    } else {
        let i = rng.below(body.len());
        let w = (body.len() - i).min(4);
        let v: [u8; 4] =
            *rng.pick(&[[0, 0, 0xc0, 0x7f], [0, 0, 0x80, 0x7f], [0xff; 4], [0x7f, 0xff, 0xff, 0xff], [0; 4]]);
        body[i..i + w].copy_from_slice(&v[..w]);
    }
    if !rng.chance(8) {
        data.truncate(0);
        data.extend_from_slice(&(header.len() as u64).to_le_bytes());
    }
    data.extend_from_slice(&header);
    data.append(&mut body);
}

fn mutate_bytes(data: &mut Vec<u8>, all: &[Seed], target: usize, rng: &mut Rng) {
    if data.is_empty() {
        data.push(rng.next() as u8);
        return;
    }
    let len = data.len();
    match rng.below(10) {
        0 => {
            let i = rng.below(len);
            data[i] ^= 1 << rng.below(8);
        }
        1 => {
            let i = rng.below(len);
            data[i] = *rng.pick(&[0u8, 0xff, 0x7f, 0x80, 0x01, 0xfe]);
        }
        2 => {
            // A varint of an interesting size spliced in (protobuf lengths, tags, dims).
            let v = *rng.pick(&[0u64, 1, 127, 128, 1 << 31, u32::MAX as u64, 1 << 40, u64::MAX >> 1, u64::MAX]);
            let mut bytes = Vec::new();
            let mut x = v;
            loop {
                let b = (x & 0x7f) as u8;
                x >>= 7;
                if x == 0 {
                    bytes.push(b);
                    break;
                }
                bytes.push(b | 0x80);
            }
            let i = rng.below(len);
            let end = (i + bytes.len()).min(len);
            data.splice(i..end, bytes);
        }
        3 => data.truncate(rng.below(len)),
        4 => {
            // Duplicate a chunk in place.
            let a = rng.below(len);
            let n = 1 + rng.below((len - a).min(256));
            let chunk = data[a..a + n].to_vec();
            let at = rng.below(len);
            data.splice(at..at, chunk);
        }
        5 => {
            let a = rng.below(len);
            let n = 1 + rng.below((len - a).min(64));
            data.drain(a..a + n);
        }
        6 if !all.is_empty() => {
            // Splice a chunk of another seed's file of the same role.
            let other = &rng.pick(all).files;
            let Some((_, o)) = other.get(target.min(other.len() - 1)) else { return };
            if o.is_empty() {
                return;
            }
            let a = rng.below(o.len());
            let n = 1 + rng.below((o.len() - a).min(512));
            let at = rng.below(len);
            data.splice(at..at, o[a..a + n].iter().copied());
        }
        7 => {
            // A little-endian 32/64-bit field overwritten (safetensors header length, npy
            // header length, offsets, checksums).
            let v: u64 = *rng.pick(&[0, 1, u32::MAX as u64, 1 << 31, u64::MAX, 1 << 40]);
            let w = if rng.chance(2) { 4 } else { 8 };
            if len >= w {
                let i = if rng.chance(3) { 0 } else { rng.below(len - w + 1) };
                data[i..i + w].copy_from_slice(&v.to_le_bytes()[..w]);
            }
        }
        8 => {
            // A number in an embedded text header (safetensors JSON, npy dict) replaced.
            mutate_numbers(data, rng);
        }
        _ => {
            let i = rng.below(len);
            data[i] = rng.next() as u8;
        }
    }
}

/// Replaces one ASCII integer/float in `data` (anywhere) by an interesting value.
fn mutate_numbers(data: &mut Vec<u8>, rng: &mut Rng) {
    let spans = number_spans(data);
    if spans.is_empty() {
        return;
    }
    let (a, b) = *rng.pick(&spans);
    let v = rng.pick(INTERESTING).as_bytes().to_vec();
    data.splice(a..b, v);
}

fn number_spans(data: &[u8]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut i = 0;
    while i < data.len() {
        let starts =
            data[i].is_ascii_digit() && (i == 0 || !(data[i - 1].is_ascii_alphanumeric() || data[i - 1] == b'_'));
        if starts {
            let mut j = i;
            while j < data.len() && (data[j].is_ascii_digit() || data[j] == b'.' || data[j] == b'e') {
                j += 1;
            }
            let a = if i > 0 && data[i - 1] == b'-' { i - 1 } else { i };
            spans.push((a, j));
            i = j;
        } else {
            i += 1;
        }
    }
    spans
}

/// Structure-aware edits of a text graph: numbers, names, whole nodes, nesting.
fn mutate_text(data: &mut Vec<u8>, all: &[Seed], target: usize, format: Format, rng: &mut Rng) {
    match rng.below(8) {
        0 | 1 => mutate_numbers(data, rng),
        2 | 3 => {
            // One name replaced by another from the file: dangling inputs, self-loops,
            // cycles, duplicate names, ops or attributes that do not exist. In GraphDef
            // text only quoted strings, so the message syntax survives.
            let words = if format == Format::Pbtxt { quoted_spans(data) } else { word_spans(data) };
            if words.len() < 2 {
                return;
            }
            let (a, b) = *rng.pick(&words);
            let (c, d) = *rng.pick(&words);
            let replacement = data[c..d].to_vec();
            data.splice(a..b, replacement);
        }
        4 => {
            // A whole node removed, duplicated (under a new name) or moved.
            let mut nodes = node_spans(data, format);
            if nodes.is_empty() {
                return;
            }
            let (a, b) = *rng.pick(&nodes);
            let node = data[a..b].to_vec();
            match rng.below(3) {
                0 => {
                    data.drain(a..b);
                }
                1 => {
                    let renamed = rename_node(&node, format, rng.below(1000));
                    let (_, at) = *rng.pick(&nodes);
                    data.splice(at..at, renamed);
                }
                _ => {
                    data.drain(a..b);
                    nodes = node_spans(data, format);
                    let at = nodes.get(rng.below(nodes.len().max(1))).map_or(data.len(), |s| s.0);
                    data.splice(at..at, node);
                }
            }
        }
        5 if !all.is_empty() => {
            // A node of another seed of the same format.
            let other = &rng.pick(all).files;
            let Some((_, o)) = other.get(target.min(other.len() - 1)) else { return };
            let theirs = node_spans(o, format);
            let ours = node_spans(data, format);
            if theirs.is_empty() || ours.is_empty() {
                return;
            }
            let (a, b) = *rng.pick(&theirs);
            let (_, at) = *rng.pick(&ours);
            data.splice(at..at, o[a..b].iter().copied());
        }
        6 => {
            // Deep or broken nesting.
            let opener = *rng.pick(&[&b"{"[..], b"[", b"(", b"}", b"]", b")", b"\"", b"@f{"]);
            let times = if rng.chance(4) { 1 + rng.below(20_000) } else { 1 + rng.below(4) };
            let at = rng.below(data.len() + 1);
            let ins: Vec<u8> = opener.iter().copied().cycle().take(opener.len() * times).collect();
            data.splice(at..at, ins);
        }
        _ => edit_lines(data, rng, |lines, rng| {
            let (i, j) = (rng.below(lines.len()), rng.below(lines.len()));
            lines.swap(i, j);
        }),
    }
}

/// The byte spans of the top-level nodes: `node {` … `}` blocks in GraphDef text, one
/// line each in the native format (comments excluded).
fn node_spans(data: &[u8], format: Format) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = None;
    let mut pos = 0;
    for line in data.split_inclusive(|&c| c == b'\n') {
        let end = pos + line.len();
        if format == Format::Pbtxt {
            if line.starts_with(b"node {") {
                start = Some(pos);
            } else if line.starts_with(b"}") {
                if let Some(s) = start.take() {
                    spans.push((s, end));
                }
            }
        } else if line.contains(&b'=') && !line.starts_with(b"#") && !line.starts_with(b" ") {
            spans.push((pos, end));
        }
        pos = end;
    }
    spans
}

/// A copy of a node under a new name (`_fz<k>` appended to its first name).
fn rename_node(node: &[u8], format: Format, k: usize) -> Vec<u8> {
    let text = String::from_utf8_lossy(node);
    let renamed = if format == Format::Pbtxt {
        match text.find("name: \"").and_then(|i| text[i + 7..].find('"').map(|j| i + 7 + j)) {
            Some(end) => format!("{}_fz{k}{}", &text[..end], &text[end..]),
            None => text.into_owned(),
        }
    } else {
        match text.find(" =") {
            Some(end) => format!("{}_fz{k}{}", &text[..end], &text[end..]),
            None => text.into_owned(),
        }
    };
    renamed.into_bytes()
}

fn quoted_spans(data: &[u8]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut i = 0;
    while i < data.len() {
        if data[i] == b'"' {
            let mut j = i + 1;
            while j < data.len() && data[j] != b'"' && data[j] != b'\\' && data[j] != b'\n' {
                j += 1;
            }
            if j < data.len() && data[j] == b'"' {
                spans.push((i + 1, j));
            }
            i = j + 1;
        } else {
            i += 1;
        }
    }
    spans
}

fn word_spans(data: &[u8]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut i = 0;
    let is_word = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'/';
    while i < data.len() {
        if data[i].is_ascii_alphabetic() || data[i] == b'_' {
            let mut j = i;
            while j < data.len() && is_word(data[j]) {
                j += 1;
            }
            spans.push((i, j));
            i = j;
        } else {
            i += 1;
        }
    }
    spans
}

fn edit_lines(data: &mut Vec<u8>, rng: &mut Rng, f: impl FnOnce(&mut Vec<Vec<u8>>, &mut Rng)) {
    let mut lines: Vec<Vec<u8>> = data.split(|&c| c == b'\n').map(<[u8]>::to_vec).collect();
    if lines.is_empty() {
        return;
    }
    f(&mut lines, rng);
    *data = lines.join(&b'\n');
}

// ---------------------------------------------------------------------------------------
// Running

/// Limits every child runs under.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub address_space: u64,
    pub timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { address_space: 4 << 30, timeout: Duration::from_secs(20) }
    }
}

/// What one child did.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    pub fn first_line(&self) -> &str {
        self.stderr.lines().next().unwrap_or("")
    }

    /// The `error:` line of stderr (after any `note:` saying why the run was unclustered or
    /// unoptimized), or the first line when there is none.
    pub fn error_line(&self) -> &str {
        self.stderr.lines().find(|l| l.starts_with("error:")).unwrap_or_else(|| self.first_line())
    }
}

/// Runs `bin args` in `dir` under `limits`.
pub fn run(bin: &Path, dir: &Path, args: &[String], limits: Limits) -> Outcome {
    use std::io::Read;
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let mut cmd = Command::new(bin);
    cmd.current_dir(dir).args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.env_remove("RUST_LOG").env("RUST_BACKTRACE", "0");
    let aspace = limits.address_space;
    // SAFETY: only async-signal-safe calls (setrlimit) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let r = libc::rlimit { rlim_cur: aspace as libc::rlim_t, rlim_max: aspace as libc::rlim_t };
            libc::setrlimit(libc::RLIMIT_AS, &r);
            let core = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            libc::setrlimit(libc::RLIMIT_CORE, &core);
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("spawn autoclust");
    // Drain both pipes on threads so a chatty child cannot block on a full pipe.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let to = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = so.read_to_end(&mut b);
        b
    });
    let te = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = se.read_to_end(&mut b);
        b
    });
    let start = Instant::now();
    let mut timed_out = false;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if start.elapsed() > limits.timeout {
            timed_out = true;
            let _ = child.kill();
            break child.wait().expect("wait");
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let stdout = String::from_utf8_lossy(&to.join().unwrap()).into_owned();
    let stderr = String::from_utf8_lossy(&te.join().unwrap()).into_owned();
    Outcome { code: status.code(), signal: status.signal(), timed_out, stdout, stderr }
}

/// Why an outcome breaks the contract, if it does. `prints`: the graph prints to stderr
/// (`PrintV2`, `Print`), so its output may come before the error line; `note:` lines may
/// always come before it (the notes of the steps that ran).
pub fn violation(o: &Outcome, prints: bool) -> Option<String> {
    if o.timed_out {
        return Some("hang (time limit)".into());
    }
    if let Some(s) = o.signal {
        return Some(format!("killed by signal {s}"));
    }
    if o.stderr.contains("panicked at") || o.code == Some(101) {
        return Some("panic".into());
    }
    if o.stderr.contains("memory allocation of") {
        return Some("allocation failure".into());
    }
    match o.code {
        Some(0) => None,
        Some(1) | Some(2) => {
            let mut lines = o.stderr.lines();
            let before: Vec<&str> = lines.by_ref().take_while(|l| !l.starts_with("error:")).collect();
            let has_error = o.stderr.lines().any(|l| l.starts_with("error:"));
            if has_error && (prints || before.iter().all(|l| l.starts_with("note:"))) {
                None
            } else {
                Some(format!("exit {:?} without an `error:` first line", o.code))
            }
        }
        c => Some(format!("exit status {c:?}")),
    }
}

/// One mutated input and every check made on it.
#[derive(Clone, Debug)]
pub struct Finding {
    pub format: Format,
    pub index: u64,
    pub seed: String,
    pub args: Vec<String>,
    pub what: String,
    pub first_line: String,
    /// The case directory, kept for a failure.
    pub dir: PathBuf,
}

impl std::fmt::Display for Finding {
    /// What broke, the command that shows it, its first stderr line and where the case is kept.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} input {} (seed {}): {}\n  autoclust {}\n  first line: {}\n  in {}",
            self.format.name(),
            self.index,
            self.seed,
            self.what,
            self.args.join(" "),
            self.first_line,
            self.dir.display()
        )
    }
}

/// Tallies over a run of the fuzzer.
#[derive(Default, Debug)]
pub struct Tally {
    pub inputs: u64,
    pub executions: u64,
    /// Exit status → count, over every execution.
    pub exits: BTreeMap<i32, u64>,
    pub findings: Vec<Finding>,
}

/// Writes the case files of `seed` with `data` as its target into `dir`.
pub fn write_case(seed: &Seed, data: &[u8], dir: &Path) {
    for (k, (name, bytes)) in seed.files.iter().enumerate() {
        let path = dir.join(name);
        if let Some(p) = path.parent() {
            std::fs::create_dir_all(p).unwrap();
        }
        std::fs::write(&path, if k == seed.target { data } else { bytes }).unwrap();
    }
}

/// The commands run on one input: the reader through `analyze` (graph formats), then
/// `run` in both modes with `--out`, whose partial output is checked too.
pub fn commands(seed: &Seed, format: Format) -> Vec<Vec<String>> {
    let mut cmds = Vec::new();
    if matches!(format, Format::Pbtxt | Format::Pb | Format::Native | Format::SavedModel) {
        cmds.push(vec!["analyze".to_string(), seed.graph.clone()]);
    }
    let mut run: Vec<String> = vec!["run".into(), seed.graph.clone()];
    run.extend(seed.run_args.iter().cloned());
    // A budget well inside the 4 GB limit (two or three live tensors at the limit fit),
    // and loops bounded so a mutated trip count is an error, not a long wait.
    run.extend(["--max-tensor-bytes", "268435456", "--max-loop-iterations", "100000", "--json"].map(String::from));
    cmds.push(run.clone());
    let mut plain = run;
    plain.push("--no-cluster".into());
    cmds.push(plain);
    cmds
}

/// Fuzzes inputs `range` of `format`, `threads` at a time. Cases that break the
/// contract are kept under `keep` (one directory each).
pub fn fuzz(
    bin: &Path,
    format: Format,
    range: std::ops::Range<u64>,
    threads: usize,
    limits: Limits,
    keep: &Path,
) -> Tally {
    let scratch = tempfile::tempdir().unwrap();
    let seeds = seeds(format, bin, scratch.path());
    assert!(!seeds.is_empty(), "no seeds for {format:?}");
    let next = std::sync::atomic::AtomicU64::new(range.start);
    let tally = std::sync::Mutex::new(Tally::default());
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= range.end {
                    break;
                }
                let (execs, exits, findings) = fuzz_one(bin, format, i, &seeds, limits, keep);
                let mut t = tally.lock().unwrap();
                t.inputs += 1;
                t.executions += execs;
                for e in exits {
                    *t.exits.entry(e).or_default() += 1;
                }
                t.findings.extend(findings);
            });
        }
    });
    tally.into_inner().unwrap()
}

/// The bytes of one input: the target file itself, or (binary GraphDefs) GraphDef
/// text that `convert` turns into the target file.
pub enum Input {
    Bytes(Vec<u8>),
    ViaText(Vec<u8>),
}

/// The seed and bytes of input `index` of `format`.
pub fn input(format: Format, index: u64, seeds: &[Seed]) -> (usize, Input) {
    let mut rng = Rng::new(index.wrapping_mul(0x100).wrapping_add(format as u64));
    let k = rng.below(seeds.len());
    if let Some(text) = seeds[k].text.as_ref().filter(|_| rng.chance(2)) {
        let mut as_text = seeds[k].clone();
        as_text.files[as_text.target].1 = text.clone();
        let data = mutate(&as_text, &[], Format::Pbtxt, &mut rng);
        return (k, Input::ViaText(data));
    }
    let data = mutate(&seeds[k], seeds, format, &mut rng);
    (k, Input::Bytes(data))
}

/// Writes input `index`'s files into `dir`; `None` when a text input for a binary
/// GraphDef does not convert (the text reader refused it: nothing left to test).
pub fn write_input(bin: &Path, seed: &Seed, input: &Input, dir: &Path) -> Option<Vec<u8>> {
    match input {
        Input::Bytes(data) => {
            write_case(seed, data, dir);
            Some(data.clone())
        }
        Input::ViaText(text) => {
            std::fs::write(dir.join("src.pbtxt"), text).unwrap();
            let target = &seed.files[seed.target].0;
            let st = Command::new(bin)
                .current_dir(dir)
                .args(["convert", "src.pbtxt", "-o", target])
                .stderr(Stdio::null())
                .status()
                .ok()?;
            let data = std::fs::read(dir.join(target)).ok().filter(|_| st.success())?;
            write_case(seed, &data, dir);
            Some(data)
        }
    }
}

fn fuzz_one(
    bin: &Path,
    format: Format,
    index: u64,
    seeds: &[Seed],
    limits: Limits,
    keep: &Path,
) -> (u64, Vec<i32>, Vec<Finding>) {
    let (k, inp) = input(format, index, seeds);
    let seed = &seeds[k];
    let dir = tempfile::tempdir().unwrap();
    let Some(data) = write_input(bin, seed, &inp, dir.path()) else { return (0, Vec::new(), Vec::new()) };
    let mut findings = Vec::new();
    let mut exits = Vec::new();
    let mut runs: Vec<(Vec<String>, Outcome)> = Vec::new();
    for args in commands(seed, format) {
        let o = run(bin, dir.path(), &args, limits);
        exits.push(o.code.unwrap_or(-1));
        if let Some(what) = violation(&o, seed.prints) {
            findings.push((args.clone(), what, o.first_line().to_string()));
        }
        runs.push((args, o));
    }
    // The two modes of `run` (the last two commands) must agree — unless the graph is
    // racy: then the clustered outcome must be one the plain executor gives under some
    // schedule (`--schedule-seed`), which settles most races a mutation creates.
    if let [.., (a_args, a), (b_args, b)] = &runs[..] {
        if !seed.racy && violation(a, seed.prints).is_none() && violation(b, seed.prints).is_none() {
            if let Some(what) = disagreement(a, b, seed.nondeterministic) {
                let reached = (1..=16).any(|s| {
                    let mut args = b_args.clone();
                    args.extend(["--schedule-seed".to_string(), s.to_string()]);
                    let o = run(bin, dir.path(), &args, limits);
                    same_outcome(a, &o)
                });
                if !reached {
                    findings.push((a_args.clone(), what, a.first_line().to_string()));
                }
            }
        }
    }
    let execs = runs.len() as u64;
    let findings = findings
        .into_iter()
        .map(|(args, what, first_line)| {
            let kept = keep.join(format!("{}-{index}", format.name()));
            let _ = std::fs::create_dir_all(&kept);
            write_case(seed, &data, &kept);
            Finding { format, index, seed: seed.name.clone(), args, what, first_line, dir: kept }
        })
        .collect();
    (execs, exits, findings)
}

/// A difference between the clustered and the plain run that the contract forbids.
fn disagreement(clustered: &Outcome, plain: &Outcome, nondeterministic: bool) -> Option<String> {
    match (clustered.code, plain.code) {
        (Some(0), Some(0)) => {
            if nondeterministic {
                return None;
            }
            let a: serde_json::Value = serde_json::from_str(&clustered.stdout).ok()?;
            let b: serde_json::Value = serde_json::from_str(&plain.stdout).ok()?;
            // A mutated constant can blow values up until summation order (the JIT's
            // parallel reductions vs the interpreter's) decides even their signs through
            // cancellation: past 1e8, only the exit statuses are compared.
            if max_abs(&a).max(max_abs(&b)) > 1e8 {
                return None;
            }
            if json_close(&a, &b) {
                None
            } else {
                Some("clustered and --no-cluster runs give different values".into())
            }
        }
        (Some(0), Some(_)) => Some(format!("clustered run succeeds, --no-cluster fails: {}", plain.first_line())),
        (Some(_), Some(0)) => Some(format!("--no-cluster run succeeds, clustered fails: {}", clustered.first_line())),
        _ => None,
    }
}

/// Whether two runs ended alike: both succeeded with close values, or both failed
/// with the same first line once the mode's own wording (a cluster's bridge node) is
/// set aside.
fn same_outcome(a: &Outcome, b: &Outcome) -> bool {
    match (a.code, b.code) {
        (Some(0), Some(0)) => disagreement(a, b, false).is_none(),
        (Some(x), Some(y)) if x == y => {
            let tail = |o: &Outcome| o.first_line().rsplit("): ").next().unwrap_or("").to_string();
            tail(a) == tail(b)
        }
        _ => false,
    }
}

fn max_abs(v: &serde_json::Value) -> f64 {
    use serde_json::Value as V;
    match v {
        V::Number(x) => x.as_f64().map_or(0.0, f64::abs),
        V::Array(x) => x.iter().map(max_abs).fold(0.0, f64::max),
        V::Object(x) => x.values().map(max_abs).fold(0.0, f64::max),
        _ => 0.0,
    }
}

fn json_close(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as V;
    match (a, b) {
        (V::Number(x), V::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
            // Loose: a mutated training step (Adam dividing by a tiny second moment) turns
            // summation-order rounding into visible differences; a wrong op or a lost
            // update is far outside this.
            x == y || (x - y).abs() <= 1e-3 + 1e-2 * x.abs().max(y.abs())
        }
        (V::Array(x), V::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_close(x, y)),
        (V::Object(x), V::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_close(v, w)))
        }
        _ => a == b,
    }
}
