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
//! between them), stateful random ops, calls, `Placeholder`s, v1 control flow
//! other than a `Switch` of a value (module [`is_value_switch`]), and the
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

/// A v1 `Switch` of a value (not a resource or reference): a function of its
/// data and predicate inputs — the same value on the same live port — so two
/// with the same inputs, control inputs and attributes are one (Grappler's
/// dedup merges them too). Other v1 control-flow ops are never merged.
fn is_value_switch(node: &autoclust_graph::Node) -> bool {
    node.op == "Switch"
        && node.inputs.len() == 2
        && matches!(node.attr("T"), Some(AttrValue::Type(t)) if !matches!(t, autoclust_graph::DType::Resource | autoclust_graph::DType::Ref(_)))
}

/// Merges identical pure nodes (module doc).
pub fn cse(graph: &Graph, ctx: &PassContext) -> Result<(Graph, CseReport), crate::pass::PassError> {
    let _span = tracing::debug_span!("cse", nodes = graph.len()).entered();
    let order = graph.topo_order()?;
    let pin = pinned(graph, ctx);
    let succ = graph.successors();
    let mut rw = Rewrite::default();
    let mut seen: HashMap<String, NodeId> = HashMap::new();
    let mut report = CseReport::default();
    for id in order {
        let node = graph.node(id);
        if pin[id.index()] || !(is_pure(graph, node) || is_value_switch(node)) {
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
        // Internal attributes (`_class` colocation, `_has_manual_control_dependencies`, …)
        // do not change a pure node's value; Grappler's dedup ignores them too.
        let attrs: Vec<_> = node.attrs.iter().filter(|(k, _)| !k.starts_with('_')).collect();
        let key = format!("{}|{}|{:?}|{:?}|{:?}", node.op, node.device, attrs, inputs, controls);
        match seen.get(&key) {
            Some(&first) => {
                let used = succ.data[id.index()].iter().map(|&(_, port, _)| port as usize + 1).max().unwrap_or(1);
                let ports = graph.output_count(id).unwrap_or(1).max(used);
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
        let mut out = cse(&graph, ctx)?.0;
        crate::function_bodies::optimize_bodies(&mut out, ctx, |body, c| Ok(cse(body, c)?.0));
        Ok(out)
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
    fn internal_attributes_do_not_block_a_merge() {
        let g = parse(
            "a = Const() {_class = [\"loc:@w1\"], dtype = float32, value = float32[]{0.01}}\n\
             b = Const() {_class = [\"loc:@w2\"], dtype = float32, value = float32[]{0.01}}\n\
             s = AddV2(a, b) {T = float32}\n",
        );
        let (out, r) = cse(&g, &PassContext::default()).unwrap();
        assert_eq!(r.merged, 1);
        assert_eq!(names(&out), ["a", "s"]);
    }

    #[test]
    fn stateless_random_ops_merge_but_stateful_ones_do_not() {
        let g = parse(
            "seed = Const() {dtype = int64, value = int64[2]{1, 2}}\n\
             k1 = StatelessRandomGetKeyCounter(seed) {Tseed = int64}\n\
             k2 = StatelessRandomGetKeyCounter(seed) {Tseed = int64}\n\
             s = IdentityN(k1, k2:1, k2) {T = [uint64, uint64, uint64]}\n",
        );
        let (out, r) = cse(&g, &PassContext::default()).unwrap();
        assert_eq!(r.merged, 1);
        assert_eq!(names(&out), ["seed", "k1", "s"]);
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
