//! Captured summary writers → writers the graph creates, so a TensorFlow 2 training step that
//! writes summaries runs.
//!
//! `tf.summary.create_file_writer` usually runs eagerly, before the `tf.function` that writes
//! to it under `with writer.as_default():`; the function then *captures* the writer: the
//! exported graph has a `Placeholder` of dtype `resource` that only the summary ops
//! (`WriteSummary`, `WriteScalarSummary`, …, `FlushSummaryWriter`) take as their writer, and
//! no op that creates it. Nothing in the graph says where its events go.
//!
//! What it transforms: such a placeholder — every consumer a summary-writer op taking it as
//! input 0 — becomes a `SummaryWriter` of the same name, marked `_autoclust_captured` unless
//! the graph opens it itself (`CreateSummaryFileWriter` with its log directory). Its
//! writes are dropped and counted by the runtime (`runtime/src/kernels/summary_writer.rs`),
//! and `run` says so in a `note:`.
//!
//! Why it is sound: the summary ops have no outputs and change nothing but the writer's event
//! file, which does not exist here; every other value of the step is computed as before. A
//! placeholder with any other consumer (a variable, a table) is left alone.

use autoclust_graph::{AttrValue, Attrs, DType, Graph, NodeId};

use autoclust_graph::protocol::CAPTURED_WRITER_ATTR as CAPTURED_ATTR;

/// The ops that take a summary writer as input 0.
pub const WRITER_OPS: &[&str] = &[
    "CreateSummaryFileWriter",
    "WriteSummary",
    "WriteScalarSummary",
    "WriteHistogramSummary",
    "WriteRawProtoSummary",
    "FlushSummaryWriter",
    "CloseSummaryWriter",
];

/// The names of the writers `graph` captures (module doc).
fn captured(graph: &Graph) -> Vec<NodeId> {
    let candidates: Vec<NodeId> = graph
        .node_ids()
        .filter(|&id| {
            let n = graph.node(id);
            n.op == "Placeholder" && n.attr("dtype").and_then(AttrValue::as_type) == Some(DType::Resource)
        })
        .collect();
    if candidates.is_empty() {
        return Vec::new();
    }
    let successors = graph.successors();
    candidates
        .into_iter()
        .filter(|id| {
            let users = &successors.data[id.index()];
            !users.is_empty()
                && users.iter().all(|&(user, _, slot)| slot == 0 && WRITER_OPS.contains(&graph.node(user).op.as_str()))
        })
        .collect()
}

/// `graph` with every captured summary writer made by the graph (module doc); `None` when
/// there is none.
pub fn create_captured_writers(graph: &Graph) -> Option<Graph> {
    let writers = captured(graph);
    if writers.is_empty() {
        return None;
    }
    let _span = tracing::debug_span!("create_captured_writers", writers = writers.len()).entered();
    let mut out = graph.clone();
    let successors = graph.successors();
    for id in writers {
        // A writer the graph opens itself (a `CreateSummaryFileWriter` with its log directory)
        // is an ordinary writer; only one nothing opens is marked captured.
        let opened = successors.data[id.index()].iter().any(|&(u, _, _)| graph.node(u).op == "CreateSummaryFileWriter");
        let mut attrs = Attrs::default();
        attrs.insert("container".into(), AttrValue::S(Vec::new()));
        attrs.insert("shared_name".into(), AttrValue::S(Vec::new()));
        if !opened {
            attrs.insert(CAPTURED_ATTR.into(), AttrValue::B(true));
        }
        crate::captured_tables::replace_placeholder(&mut out, graph, id, "SummaryWriter", attrs);
    }
    Some(out)
}

/// `captured-writers`: [`create_captured_writers`] as a pass. `run` and `bench` apply it
/// while loading.
pub struct CapturedWritersPass;

impl crate::pass::Pass for CapturedWritersPass {
    fn name(&self) -> &'static str {
        "captured-writers"
    }
    fn description(&self) -> &'static str {
        "make the summary writers a TF2 function graph captures (tf.summary.create_file_writer run eagerly) writers \
         whose events are dropped, so the step runs"
    }
    fn run(&self, graph: Graph, _ctx: &crate::pass::PassContext) -> Result<Graph, crate::pass::PassError> {
        Ok(create_captured_writers(&graph).unwrap_or(graph))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(text: &str) -> Graph {
        autoclust_graph::text::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    #[test]
    fn a_writer_only_summary_ops_take_becomes_a_captured_writer() {
        let g = graph(
            r#"
            w = Placeholder() {dtype = resource}
            v = Placeholder() {dtype = resource}
            step = Const() {dtype = int64, value = int64[]{1}}
            tag = Const() {dtype = string, value = string[]{"loss"}}
            x = Const() {dtype = float32, value = float32[]{0.5}}
            s = WriteScalarSummary(w, step, tag, x) {T = float32}
            f = FlushSummaryWriter(w, ^s)
            r = ReadVariableOp(v) {dtype = float32}
            "#,
        );
        let out = create_captured_writers(&g).expect("one writer");
        let w = out.node(out.find("w").unwrap());
        assert_eq!(w.op, "SummaryWriter");
        assert_eq!(w.attr(CAPTURED_ATTR), Some(&AttrValue::B(true)));
        assert_eq!(out.node(out.find("v").unwrap()).op, "Placeholder", "a variable is left alone");
        // A handle something else reads is not a writer.
        let g = graph(
            r#"
            w = Placeholder() {dtype = resource}
            f = FlushSummaryWriter(w)
            r = ReadVariableOp(w) {dtype = float32}
            "#,
        );
        assert!(create_captured_writers(&g).is_none());
        // A placeholder the graph opens itself is an ordinary writer (its log directory is in
        // the graph), not a captured one.
        let g = graph(
            r#"
            w = Placeholder() {dtype = resource}
            dir = Const() {dtype = string, value = string[]{"/tmp/logs"}}
            q = Const() {dtype = int32, value = int32[]{10}}
            ms = Const() {dtype = int32, value = int32[]{100}}
            sfx = Const() {dtype = string, value = string[]{".v2"}}
            c = CreateSummaryFileWriter(w, dir, q, ms, sfx)
            f = FlushSummaryWriter(w, ^c)
            "#,
        );
        let out = create_captured_writers(&g).expect("one writer");
        let w = out.node(out.find("w").unwrap());
        assert_eq!(w.op, "SummaryWriter");
        assert_eq!(w.attr(CAPTURED_ATTR), None);
    }
}
