//! The CI-sized scale test (issue 19): a 10,000-node training step of the shape
//! `benches/scale/gen_graph.py` writes (resource reads and writes around short elementwise
//! paths, string round trips, `PrintV2`s the final `NoOp` waits on, extra control edges),
//! generated here by the same recipe. Its blocks that share a variable are ordered by control
//! edges, so the step has one outcome: the clustered run must leave every variable exactly as
//! the plain executor does. Timing is for `benches/` (BENCHMARKS.md), not for this test.

use std::fmt::Write as _;
use std::process::Command;

/// xorshift64*: a fixed pseudo-random sequence, the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The graph (`.pbtxt`) and its variables (`.safetensors`) with about `n` nodes.
fn training_step(n: usize) -> (String, Vec<u8>) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut nodes: Vec<(String, String, Vec<String>, String)> = Vec::new();
    let f32t = r#"attr { key: "T" value { type: DT_FLOAT } }"#;
    let dtype = r#"attr { key: "dtype" value { type: DT_FLOAT } }"#;
    let n_vars = (n / 100).max(10);
    for i in 0..n_vars {
        let attrs = format!(
            r#"{dtype} attr {{ key: "shape" value {{ shape {{ dim {{ size: 4 }} }} }} }} attr {{ key: "shared_name" value {{ s: "v{i}" }} }}"#
        );
        nodes.push((format!("v{i}"), "VarHandleOp".into(), vec![], attrs));
    }
    let half = format!(
        r#"{dtype} attr {{ key: "value" value {{ tensor {{ dtype: DT_FLOAT tensor_shape {{ }} float_val: 0.5 }} }} }}"#
    );
    nodes.push(("half".into(), "Const".into(), vec![], half));
    let mut last_write: Vec<Option<String>> = vec![None; n_vars];
    let mut sinks = Vec::new();
    let mut b = 0;
    while nodes.len() + 1 < n {
        let var = b % n_vars;
        let mut inputs = vec![format!("v{var}")];
        inputs.extend(last_write[var].iter().map(|w| format!("^{w}")));
        let read = format!("b{b}/read");
        nodes.push((read.clone(), "ReadVariableOp".into(), inputs, dtype.into()));
        let mut vals = vec![read];
        for j in 0..5 + rng.below(6) {
            let name = format!("b{b}/e{j}");
            let last = vals.last().unwrap().clone();
            let op = ["AddV2", "Mul", "Sub", "Tanh", "Neg", "Sigmoid", "AddV2"][rng.below(7)];
            let inputs = if matches!(op, "Tanh" | "Neg" | "Sigmoid") {
                vec![last]
            } else {
                let k = rng.below(vals.len() + 1);
                vec![last, vals.get(k).cloned().unwrap_or_else(|| "half".into())]
            };
            nodes.push((name.clone(), op.into(), inputs, f32t.into()));
            vals.push(name);
        }
        if rng.below(100) == 0 {
            let (s, num, fmt, print) =
                (format!("b{b}/as_string"), format!("b{b}/to_number"), format!("b{b}/format"), format!("b{b}/print"));
            let last = vals.last().unwrap().clone();
            nodes.push((s.clone(), "AsString".into(), vec![last], format!(r#"{f32t} attr {{ key: "precision" value {{ i: 9 }} }} attr {{ key: "scientific" value {{ b: true }} }}"#)));
            nodes.push((
                num.clone(),
                "StringToNumber".into(),
                vec![s],
                r#"attr { key: "out_type" value { type: DT_FLOAT } }"#.into(),
            ));
            vals.push(num.clone());
            let fa = r#"attr { key: "T" value { list { type: DT_FLOAT } } } attr { key: "template" value { s: "x = {}" } } attr { key: "placeholder" value { s: "{}" } } attr { key: "summarize" value { i: 3 } }"#;
            nodes.push((fmt.clone(), "StringFormat".into(), vec![num], fa.into()));
            let pa = r#"attr { key: "output_stream" value { s: "file:///dev/null" } } attr { key: "end" value { s: "\n" } }"#;
            nodes.push((print.clone(), "PrintV2".into(), vec![fmt], pa.into()));
            sinks.push(print);
        }
        let op = if rng.below(2) == 0 { "AssignVariableOp" } else { "AssignAddVariableOp" };
        let write = format!("b{b}/write");
        nodes.push((write.clone(), op.into(), vec![format!("v{var}"), vals.last().unwrap().clone()], dtype.into()));
        last_write[var] = Some(write.clone());
        sinks.push(write);
        b += 1;
    }
    // Extra control edges from an earlier node to a later one: never a cycle.
    let first = n_vars + 1;
    for _ in 0..nodes.len() / 20 {
        let i = first + 1 + rng.below(nodes.len() - first - 1);
        let j = first + rng.below(i - first);
        let from = format!("^{}", nodes[j].0);
        if !nodes[i].2.contains(&from) {
            nodes[i].2.push(from);
        }
    }
    nodes.push(("step".into(), "NoOp".into(), sinks.iter().map(|s| format!("^{s}")).collect(), String::new()));
    let mut text = String::new();
    for (name, op, inputs, attrs) in &nodes {
        let ins: String = inputs.iter().map(|i| format!(r#"input: "{i}" "#)).collect();
        writeln!(text, r#"node {{ name: "{name}" op: "{op}" {ins}{attrs} }}"#).unwrap();
    }
    // safetensors: u64 header length, JSON header, then the f32 data.
    let mut header = String::from("{");
    let mut data = Vec::new();
    for i in 0..n_vars {
        let at = data.len();
        for k in 0..4 {
            data.extend_from_slice(&(((i * 4 + k) % 13) as f32 / 13.0 - 0.5).to_le_bytes());
        }
        let sep = if i == 0 { "" } else { "," };
        write!(header, r#"{sep}"v{i}":{{"dtype":"F32","shape":[4],"data_offsets":[{at},{}]}}"#, at + 16).unwrap();
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut vars = (header.len() as u64).to_le_bytes().to_vec();
    vars.extend_from_slice(header.as_bytes());
    vars.extend_from_slice(&data);
    (text, vars)
}

#[test]
fn ten_thousand_nodes_run_the_same_clustered_and_plain() {
    let dir = tempfile::tempdir().unwrap();
    let (graph, vars) = training_step(10_000);
    assert!(graph.lines().count() >= 9_990, "the generator makes ~10^4 nodes");
    std::fs::write(dir.path().join("g.pbtxt"), graph).unwrap();
    std::fs::write(dir.path().join("v.safetensors"), vars).unwrap();
    let run = |mode: &[&str], out: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_autoclust"))
            .current_dir(dir.path())
            .args(["run", "g.pbtxt", "--vars", "v.safetensors", "--target", "step", "--save-vars", out])
            .args(mode)
            .output()
            .unwrap();
        assert!(o.status.success(), "{mode:?}: {}", String::from_utf8_lossy(&o.stderr));
        std::fs::read(dir.path().join(out)).unwrap()
    };
    let clustered = run(&[], "clustered.safetensors");
    let plain = run(&["--no-cluster"], "plain.safetensors");
    let initial = std::fs::read(dir.path().join("v.safetensors")).unwrap();
    assert_ne!(plain, initial, "the step changes the variables");
    assert!(clustered == plain, "the clustered step leaves the variables as the plain executor does");
    // And it did cluster: most of the graph is in clusters.
    let o = Command::new(env!("CARGO_BIN_EXE_autoclust"))
        .current_dir(dir.path())
        .args(["bench", "g.pbtxt", "--vars", "v.safetensors", "--target", "step", "--steps", "1", "--json"])
        .args(["--only", "clustered"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let (clustered_nodes, total) = (json["clustered_nodes"].as_u64().unwrap(), json["total_nodes"].as_u64().unwrap());
    assert!(clustered_nodes * 2 > total, "{clustered_nodes} of {total} nodes clustered");
    assert_eq!(json["interpreted_clusters"].as_u64(), Some(0), "every cluster compiled");
}
