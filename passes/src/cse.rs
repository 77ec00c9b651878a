//! Common-subexpression elimination (`opt --passes cse`), Grappler's
//! `dedup`: two *pure* nodes ([`crate::rewrite::is_pure`]) with the same op,
//! attributes, device, data inputs (after earlier merges) and control inputs
//! compute the same values, so the later one is removed and its uses read
//! the first. Graphs made by unrolling a computation (TF2 traces, the
//! `scalar_10k` benchmark's ten identical chains) shrink by the repeat factor.
//!
//! Visited in topological order, so a merge makes the merged node's users
//! candidates in turn (whole repeated chains collapse in one run).
//!
//! Soundness: a pure node's outputs are a function of its inputs and
//! attributes; equal inputs (the same outputs of the same nodes) and equal
//! attributes give equal values, and equal control inputs give the same
//! earliest start, so a user of the removed node sees the same value no
//! earlier than it could before. A control user of the removed node waits for
//! the kept one, which has the same control inputs. Never merged: stateful
//! ops, resource ops (two `ReadVariableOp`s of one variable may have a write
//! between them), random ops, calls, `Placeholder`s, v1 control flow, and the
//! nodes the request fetches, targets or feeds (they keep their names).
//! Constants larger than [`MAX_CONST_ELEMENTS`] are not compared.

use std::collections::HashMap;

use autoclust_graph::{AttrValue, Graph, NodeId, Output};

use crate::pass::PassContext;
use crate::rewrite::{is_pure, pinned, Rewrite};

/// Largest `Const` (in elements) compared with others.
pub const MAX_CONST_ELEMENTS: usize = 4096;

/// What one run of [`cse`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CseReport {
    pub merged: usize,
}

/// Merges identical pure nodes (module doc).
pub fn cse(graph: &Graph, ctx: &PassContext) -> Result<(Graph, CseReport), crate::pass::PassError> {
    let _span = tracing::debug_span!("cse", nodes = graph.len()).entered();
    let order = graph.topo_order()?;
    let pin = pinned(graph, ctx);
    let mut rw = Rewrite::default();
    let mut seen: HashMap<String, NodeId> = HashMap::new();
    let mut report = CseReport::default();
    for id in order {
        let node = graph.node(id);
        if pin[id.index()] || !is_pure(graph, node) {
            continue;
        }
        if node.op == "Const" {
            match node.attr("value") {
                Some(AttrValue::Tensor(t)) if t.num_elements() <= MAX_CONST_ELEMENTS => {}
                _ => continue,
            }
        }
        let inputs: Vec<Output> = node.inputs.iter().map(|&o| rw.resolve(o)).collect();
        let mut controls = Vec::new();
        for &c in &node.control_inputs {
            rw.resolve_control(c, &mut controls);
        }
        controls.sort();
        controls.dedup();
        let key = format!("{}|{}|{:?}|{:?}|{:?}", node.op, node.device, node.attrs, inputs, controls);
        match seen.get(&key) {
            Some(&first) => {
                let ports = graph.output_count(id).unwrap_or(1).max(1);
                for p in 0..ports as u32 {
                    rw.redirect(Output { node: id, port: p }, Output { node: first, port: p });
                }
                rw.remove(id, vec![first]);
                report.merged += 1;
            }
            None => {
                seen.insert(key, id);
            }
        }
    }
    let out = rw.apply(graph)?;
    tracing::debug!(merged = report.merged, nodes = out.len(), "cse done");
    Ok((out, report))
}

/// `cse`: [`cse`] as a registered pass.
pub(crate) struct CsePass;

impl crate::pass::Pass for CsePass {
    fn name(&self) -> &'static str {
        "cse"
    }
    fn description(&self) -> &'static str {
        "merge identical pure nodes (same op, attributes, inputs, control inputs); never stateful, resource, random \
         or fetched nodes"
    }
    fn run(&self, graph: Graph, ctx: &PassContext) -> Result<Graph, crate::pass::PassError> {
        Ok(cse(&graph, ctx)?.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> Graph {
        autoclust_graph::text::parse(src).unwrap()
    }

    fn names(g: &Graph) -> Vec<&str> {
        g.nodes().iter().map(|n| n.name.as_str()).collect()
    }

    #[test]
    fn merges_repeated_chains() {
        let g = parse(
            "x = Placeholder() {dtype = float32, shape = shape[]}\n\
             a = Const() {dtype = float32, value = float32[]{2.0}}\n\
             b = Const() {dtype = float32, value = float32[]{2.0}}\n\
             m1 = Mul(x, a) {T = float32}\n\
             m2 = Mul(x, b) {T = float32}\n\
             e1 = Exp(m1) {T = float32}\n\
             e2 = Exp(m2) {T = float32}\n\
             s = AddV2(e1, e2) {T = float32}\n",
        );
        let (out, r) = cse(&g, &PassContext::default()).unwrap();
        assert_eq!(r.merged, 3);
        assert_eq!(names(&out), ["x", "a", "m1", "e1", "s"]);
        let s = out.node(out.find("s").unwrap());
        assert_eq!(s.inputs[0], s.inputs[1]);
    }

    #[test]
    fn never_merges_reads_or_random_or_pinned() {
        let g = parse(
            "v = VarHandleOp() {dtype = float32, shape = shape[], shared_name = \"v\"}\n\
             r1 = ReadVariableOp(v) {dtype = float32}\n\
             r2 = ReadVariableOp(v) {dtype = float32}\n\
             sh = Const() {dtype = int32, value = int32[1]{2}}\n\
             u1 = RandomUniform(sh) {T = int32, dtype = float32}\n\
             u2 = RandomUniform(sh) {T = int32, dtype = float32}\n\
             s = AddV2(r1, r2) {T = float32}\n\
             t = AddV2(u1, u2) {T = float32}\n\
             p = AddV2(r1, r2) {T = float32}\n",
        );
        let ctx = PassContext {
            preserve: Some(["s", "t", "p"].iter().map(|s| s.to_string()).collect()),
            ..PassContext::default()
        };
        let (out, r) = cse(&g, &ctx).unwrap();
        assert_eq!(r.merged, 0);
        assert_eq!(out.len(), g.len());
    }

    #[test]
    fn different_control_inputs_are_not_merged() {
        let g = parse(
            "x = Placeholder() {dtype = float32, shape = shape[]}\n\
             n = NoOp()\n\
             e1 = Exp(x) {T = float32}\n\
             e2 = Exp(x, ^n) {T = float32}\n\
             s = AddV2(e1, e2) {T = float32}\n",
        );
        let (out, r) = cse(&g, &PassContext::default()).unwrap();
        assert_eq!(r.merged, 0);
        assert_eq!(out.len(), 5);
    }
}
