//! Graphviz rendering of a clustering: one coloured box (`subgraph
//! cluster_N`) per cluster, every data edge solid, every control edge
//! dotted, and every incompatible pair of the safety analysis as a dashed
//! red edge. A graph with TensorFlow 1 loops draws each loop frame as a grey
//! dashed box (`subgraph cluster_frame_F`, labelled with the frame name)
//! holding its nodes, its clusters (a cluster never spans frames) and the
//! boxes of the loops nested in it.

use std::fmt::Write;

use autoclust_graph::{Graph, NodeId};

use super::Clustering;
use crate::deadness::DeadnessAnalysis;
use crate::safety::SafetyAnalysis;

const PALETTE: [&str; 8] = ["#cfe8ff", "#d7f5d0", "#ffe5c2", "#f2d5f7", "#fff6b3", "#d0f2ef", "#ffd6d6", "#e3e3ff"];

fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            _ => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The clustered graph in the dot language.
pub fn render(graph: &Graph, clustering: &Clustering, safety: &SafetyAnalysis) -> String {
    let mut out = String::from("digraph autoclust {\n  rankdir=TB;\n  node [shape=box, style=rounded, fontsize=10];\n");
    let has_frames = graph.node_ids().any(|id| matches!(graph.node(id).op.as_str(), "Enter" | "RefEnter"));
    let deadness = has_frames.then(|| DeadnessAnalysis::compute(graph));
    let frame_of = |id: NodeId| deadness.as_ref().map_or(0, |d| d.frame(id));
    let frames = deadness.as_ref().map_or(1, DeadnessAnalysis::frame_count);
    let parents = deadness.as_ref().map_or_else(|| vec![None], |d| d.frame_parents(graph));
    let mut children: Vec<Vec<u32>> = vec![Vec::new(); frames];
    for (f, p) in parents.iter().enumerate() {
        if let Some(p) = p {
            children[*p as usize].push(f as u32);
        }
    }
    let mut cluster_frames: Vec<Vec<usize>> = vec![Vec::new(); frames];
    for (i, c) in clustering.clusters.iter().enumerate() {
        cluster_frames[c.nodes.first().map_or(0, |&n| frame_of(n)) as usize].push(i);
    }
    let mut loose: Vec<Vec<NodeId>> = vec![Vec::new(); frames];
    for id in graph.node_ids() {
        if clustering.cluster_of(id).is_none() {
            loose[frame_of(id) as usize].push(id);
        }
    }
    let view = FrameView { graph, clustering, deadness: deadness.as_ref(), children, cluster_frames, loose };
    view.emit(&mut out, 0, 1);
    for id in graph.node_ids() {
        let node = graph.node(id);
        for o in &node.inputs {
            let _ = writeln!(out, "  n{} -> n{};", o.node.0, id.0);
        }
        for c in &node.control_inputs {
            let _ = writeln!(out, "  n{} -> n{} [style=dotted];", c.0, id.0);
        }
    }
    for (from, to) in safety.pairs() {
        let _ = writeln!(out, "  n{} -> n{} [style=dashed, color=red, constraint=false];", from.0, to.0);
    }
    out.push_str("}\n");
    out
}

/// What one frame's box holds, for the nested rendering.
struct FrameView<'a> {
    graph: &'a Graph,
    clustering: &'a Clustering,
    deadness: Option<&'a DeadnessAnalysis>,
    /// The frames nested directly in each frame.
    children: Vec<Vec<u32>>,
    /// The clusters of each frame.
    cluster_frames: Vec<Vec<usize>>,
    /// The unclustered nodes of each frame.
    loose: Vec<Vec<NodeId>>,
}

impl FrameView<'_> {
    fn label(&self, id: NodeId) -> String {
        let n = self.graph.node(id);
        quote(&format!("{}\n{}", n.name, n.op))
    }

    /// Writes frame `f`'s contents (inside its box unless it is the root), then its
    /// nested frames, at `depth` levels of indentation. Frames nest as a tree (each has
    /// one parent), so the recursion ends.
    fn emit(&self, out: &mut String, f: u32, depth: usize) {
        let pad = "  ".repeat(depth);
        let inner = if f == 0 { depth } else { depth + 1 };
        let ipad = "  ".repeat(inner);
        if f != 0 {
            let name = self.deadness.map_or("", |d| d.frame_name(f));
            let _ = writeln!(out, "{pad}subgraph {} {{", quote(&format!("cluster_frame_{f}")));
            let _ = writeln!(
                out,
                "{ipad}label={}; style=dashed; color=\"#888888\"; fontcolor=\"#555555\";",
                quote(&format!("frame {name}"))
            );
        }
        for &i in &self.cluster_frames[f as usize] {
            let c = &self.clustering.clusters[i];
            let colour = PALETTE[i % PALETTE.len()];
            let _ = writeln!(out, "{ipad}subgraph {} {{", quote(&format!("cluster_{i}")));
            let _ = writeln!(
                out,
                "{ipad}  label={}; style=filled; color=\"#555555\"; fillcolor={};",
                quote(&c.name),
                quote(colour)
            );
            for &n in &c.nodes {
                let _ = writeln!(
                    out,
                    "{ipad}  n{} [label={}, style=\"rounded,filled\", fillcolor=white];",
                    n.0,
                    self.label(n)
                );
            }
            let _ = writeln!(out, "{ipad}}}");
        }
        for &id in &self.loose[f as usize] {
            let _ = writeln!(out, "{ipad}n{} [label={}];", id.0, self.label(id));
        }
        for &child in &self.children[f as usize] {
            self.emit(out, child, inner);
        }
        if f != 0 {
            let _ = writeln!(out, "{pad}}}");
        }
    }
}
