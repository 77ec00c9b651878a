//! Arithmetic simplification (`opt --passes arithmetic-simplify`), the
//! identities of Grappler's `arithmetic_optimizer` that remove a node
//! outright. A pure node `n` whose value is provably one of its inputs `x`
//! is bypassed: its data users read `x`, its control users wait for `x`'s
//! producer, and `n` is removed when nothing else needs it. The identities:
//! - `x * 1`, `1 * x`, `x / 1` (`Mul`, `RealDiv`, `Div`), `x - 0` (`Sub`),
//!   `x + 0`, `0 + x` (`Add`, `AddV2`) — only when the constant's every
//!   dimension is 1 and its rank is at most `x`'s, so broadcasting leaves
//!   `x`'s shape (`x + zeros([4])` with `x` of shape `[1]` is *not* `x`); for
//!   floats `x + 0` needs the constant to be `-0.0` (`-0.0 + +0.0` is `+0.0`,
//!   so `x + (+0.0)` is not bit for bit `x`), while `x - (+0.0)` and `x * 1` are;
//! - `Neg(Neg(x))`, `Transpose(Transpose(x, p), q)` when `p∘q` is the
//!   identity (both permutations constant);
//! - `AddN(x)` of one input, `Identity`/`Snapshot`/`StopGradient` of a value
//!   (so Identity chains disappear), `Cast` to the type it already has,
//!   `Reshape` to the static shape `x` already has (both fully known).
//!
//! Conditions: `n` has no control inputs (its data users would otherwise
//! stop waiting for them), is not fetched, targeted or fed (its name must
//! stay), and inference gives `n` and `x` the same dtype (and the same
//! shape where the rule does not imply it).
//!
//! Soundness: `n`'s value equals `x`'s value bit for bit under the
//! conditions above, and `n`, having no control inputs, starts as soon as `x`
//! is ready; so every user of `n` sees the same value no earlier than before,
//! and a control user of `n` still waits for `x`'s producer. Only pure
//! nodes are bypassed: stateful and resource ops are untouched.

use std::collections::HashMap;

use autoclust_graph::infer::{infer_partial, TypeInfo};
use autoclust_graph::{AttrValue, DType, Graph, Node, NodeId, Output, Tensor};

use crate::pass::{PassContext, PassError};
use crate::rewrite::{is_control_flow, is_pure, pinned, pinned_names, remove_dead, Rewrite};

/// What one run of [`arithmetic_simplify`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimplifyReport {
    /// Nodes bypassed.
    pub bypassed: usize,
}

fn const_of<'g>(graph: &'g Graph, o: Output, ctx: &PassContext) -> Option<&'g Tensor> {
    let n = graph.node(o.node);
    if n.op != "Const" || ctx.fed.contains(&n.name) {
        return None;
    }
    match n.attr("value") {
        Some(AttrValue::Tensor(t)) => Some(t),
        _ => None,
    }
}

/// Every element equals `v` (floats compared with their sign bit: `want_neg_zero`).
fn all_equal(t: &Tensor, v: f64, neg_zero: Option<bool>) -> bool {
    if !(t.dtype.is_float() || t.dtype.is_integer()) {
        return false;
    }
    let Some(vals) = t.to_f64_vec() else { return false };
    !vals.is_empty()
        && vals.iter().all(|&x| x == v && neg_zero.is_none_or(|neg| !t.dtype.is_float() || x.is_sign_negative() == neg))
}

fn rank(info: &TypeInfo, o: Output) -> Option<usize> {
    info.output(o).and_then(|(_, s)| s.rank())
}

/// The constant `c` broadcasts into `x` without changing `x`'s shape.
fn broadcasts_into(c: &Tensor, x_rank: Option<usize>) -> bool {
    c.shape.iter().all(|&d| d == 1) && x_rank.is_some_and(|r| c.shape.len() <= r)
}

fn perm(graph: &Graph, o: Output, ctx: &PassContext) -> Option<Vec<i64>> {
    const_of(graph, o, ctx)?.to_i64_vec()
}

/// The input `n`'s value provably equals (module doc), if any.
fn bypass(graph: &Graph, id: NodeId, info: &TypeInfo, ctx: &PassContext) -> Option<Output> {
    let node: &Node = graph.node(id);
    let ins = &node.inputs;
    let binary = |identity: f64, neg_zero: Option<bool>, commutes: bool| -> Option<Output> {
        if ins.len() != 2 {
            return None;
        }
        if let Some(c) = const_of(graph, ins[1], ctx) {
            if all_equal(c, identity, neg_zero) && broadcasts_into(c, rank(info, ins[0])) {
                return Some(ins[0]);
            }
        }
        if commutes {
            if let Some(c) = const_of(graph, ins[0], ctx) {
                if all_equal(c, identity, neg_zero) && broadcasts_into(c, rank(info, ins[1])) {
                    return Some(ins[1]);
                }
            }
        }
        None
    };
    match node.op.as_str() {
        "Mul" => binary(1.0, None, true),
        "RealDiv" | "Div" => binary(1.0, None, false),
        "Sub" => binary(0.0, Some(false), false),
        "Add" | "AddV2" => binary(0.0, Some(true), true),
        "Neg" => {
            let inner = graph.node(ins.first()?.node);
            (inner.op == "Neg" && inner.control_inputs.is_empty() && is_pure(graph, inner)).then(|| inner.inputs[0])
        }
        "Transpose" => {
            let inner = graph.node(ins.first()?.node);
            if inner.op != "Transpose" || !inner.control_inputs.is_empty() || ins.len() != 2 || inner.inputs.len() != 2
            {
                return None;
            }
            let (p, q) = (perm(graph, inner.inputs[1], ctx)?, perm(graph, ins[1], ctx)?);
            // out[i] = inner[q[i]] = x[p[q[i]]]
            let identity = p.len() == q.len()
                && q.iter()
                    .enumerate()
                    .all(|(i, &qi)| usize::try_from(qi).ok().and_then(|k| p.get(k)) == Some(&(i as i64)));
            identity.then(|| inner.inputs[0])
        }
        "AddN" if ins.len() == 1 => Some(ins[0]),
        "Identity" | "Snapshot" | "StopGradient" if ins.len() == 1 => Some(ins[0]),
        "Cast" if ins.len() == 1 => {
            let src = node.attr("SrcT").and_then(AttrValue::as_type)?;
            let dst = node.attr("DstT").and_then(AttrValue::as_type)?;
            (src == dst).then(|| ins[0])
        }
        "Reshape" if ins.len() == 2 => {
            let before = info.output(ins[0])?.1.to_known()?;
            let out = info.outputs(id).first()?.1.to_known()?;
            (before == out).then(|| ins[0])
        }
        _ => None,
    }
}

/// Bypasses the nodes the identities of the module doc make redundant.
pub fn arithmetic_simplify(graph: &Graph, ctx: &PassContext) -> Result<(Graph, SimplifyReport), PassError> {
    let _span = tracing::debug_span!("arithmetic_simplify", nodes = graph.len()).entered();
    let keep = pinned_names(graph, ctx);
    let pin = pinned(graph, ctx);
    let (info, _) = infer_partial(graph).map_err(|e| PassError::InvalidInput(Box::new(e)))?;
    let mut rw = Rewrite::default();
    let mut report = SimplifyReport::default();
    let mut bypassed: HashMap<NodeId, Output> = HashMap::new();
    for id in graph.topo_order()? {
        let node = graph.node(id);
        if pin[id.index()] || !node.control_inputs.is_empty() || !is_pure(graph, node) {
            continue;
        }
        let Some(x) = bypass(graph, id, &info, ctx) else { continue };
        if is_control_flow(graph, x.node) {
            // An Identity of a Switch output is a frame's pivot: its control users must not move onto the Switch.
            continue;
        }
        let same_dtype = match (info.outputs(id).first(), info.output(x)) {
            (Some((t, _)), Some((u, _))) => t == u && !matches!(t, DType::Resource),
            _ => false,
        };
        if !same_dtype || graph.output_count(id) != Some(1) {
            continue;
        }
        rw.redirect(Output { node: id, port: 0 }, x);
        bypassed.insert(id, x);
        report.bypassed += 1;
    }
    // Bypassed nodes keep existing for their control users until dependency
    // optimization or dead-node removal; control users of a bypassed node
    // now wait for the producer of the value instead.
    for (&id, &x) in &bypassed {
        rw.remove(id, vec![rw.resolve(x).node]);
    }
    let out = rw.apply(graph)?;
    let out = remove_dead(out, &keep, ctx)?;
    tracing::debug!(bypassed = report.bypassed, nodes = out.len(), "arithmetic-simplify done");
    Ok((out, report))
}

/// `arithmetic-simplify`: [`arithmetic_simplify`] as a registered pass.
pub(crate) struct ArithmeticSimplifyPass;

impl crate::pass::Pass for ArithmeticSimplifyPass {
    fn name(&self) -> &'static str {
        "arithmetic-simplify"
    }
    fn description(&self) -> &'static str {
        "bypass x*1, x/1, x-0, x+(-0), Neg(Neg x), inverse Transposes, AddN(x), Identity chains, Cast to the same \
         type, Reshape to the same shape (same dtype and shape only)"
    }
    fn run(&self, graph: Graph, ctx: &PassContext) -> Result<Graph, PassError> {
        Ok(arithmetic_simplify(&graph, ctx)?.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> Graph {
        autoclust_graph::text::parse(src).unwrap()
    }

    fn run(src: &str) -> (Graph, SimplifyReport) {
        arithmetic_simplify(&parse(src), &PassContext::default()).unwrap()
    }

    #[test]
    fn bypasses_identities_and_chains() {
        let (out, r) = run("x = Placeholder() {dtype = float32, shape = shape[2, 3]}\n\
             one = Const() {dtype = float32, value = float32[]{1.0}}\n\
             m = Mul(x, one) {T = float32}\n\
             i1 = Identity(m) {T = float32}\n\
             i2 = Identity(i1) {T = float32}\n\
             n1 = Neg(i2) {T = float32}\n\
             n2 = Neg(n1) {T = float32}\n\
             c = Cast(n2) {SrcT = float32, DstT = float32}\n\
             y = Exp(c) {T = float32}\n");
        assert_eq!(r.bypassed, 5);
        let y = out.node(out.find("y").unwrap());
        assert_eq!(y.inputs[0].node, out.find("x").unwrap());
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn keeps_broadcasting_adds_and_positive_zero_adds() {
        let (out, r) = run("x = Placeholder() {dtype = float32, shape = shape[1]}\n\
             z = Const() {dtype = float32, value = float32[4]{0.0, 0.0, 0.0, 0.0}}\n\
             p = Const() {dtype = float32, value = float32[]{0.0}}\n\
             a = AddV2(x, z) {T = float32}\n\
             b = AddV2(x, p) {T = float32}\n\
             s = Sub(x, p) {T = float32}\n\
             y = AddN(a, b, s) {N = 3, T = float32}\n");
        assert_eq!(r.bypassed, 1);
        assert!(out.find("a").is_some() && out.find("b").is_some() && out.find("s").is_none());
    }

    #[test]
    fn inverse_transposes_cancel_and_control_inputs_block() {
        let (out, r) = run("x = Placeholder() {dtype = float32, shape = shape[2, 3, 4]}\n\
             p = Const() {dtype = int32, value = int32[3]{1, 2, 0}}\n\
             q = Const() {dtype = int32, value = int32[3]{2, 0, 1}}\n\
             t1 = Transpose(x, p) {T = float32, Tperm = int32}\n\
             t2 = Transpose(t1, q) {T = float32, Tperm = int32}\n\
             g = NoOp()\n\
             i = Identity(t2, ^g) {T = float32}\n\
             y = Exp(i) {T = float32}\n");
        assert_eq!(r.bypassed, 1);
        let i = out.node(out.find("i").unwrap());
        assert_eq!(i.inputs[0].node, out.find("x").unwrap());
    }
}
