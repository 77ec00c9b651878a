//! Origins: which user node each variable slot of a bridge stands for.
//!
//! Encapsulation replaces a cluster's resource ops by one snapshot and one
//! write-back, so the runtime no longer sees the nodes the user wrote. This
//! module writes, on every bridge node, the attributes that name them
//! (the names are [`autoclust_graph::protocol`]'s):
//! - `_autoclust_origins` / `_autoclust_origin_ops`: per variable of a
//!   snapshot, the member that first reads it; per variable of a write-back,
//!   the member that last writes it (its name and op), so run-time errors
//!   (an uninitialised variable, a shape change) name the user's node;
//! - `_autoclust_validate_shape`: per written variable, whether its first
//!   writer in the cluster requires the new value to have the variable's
//!   current shape (`AssignVariableOp` only with `validate_shape = true`;
//!   every read-modify-write op always) — the check the plain executor's
//!   kernel makes, which the write-back then makes too.
//!
//! Sound because the attributes are annotations: nothing reads them but the
//! write-back's shape check (which repeats the original kernel's) and the
//! wording of errors.

use std::collections::HashMap;

use autoclust_graph::effects::resource_kind;
use autoclust_graph::protocol::{ORIGINS_ATTR, ORIGIN_OPS_ATTR, VALIDATE_SHAPE_ATTR};
use autoclust_graph::{AttrValue, Graph, ListValue, Node, NodeId};

use crate::compilable::traced_variable;
use crate::encapsulate::{Bridge, ClusterSpec};

/// Whether a write by `node` requires the value to keep the variable's shape
/// (what the plain executor's kernel checks).
fn validates_shape(node: &Node) -> bool {
    match node.op.as_str() {
        "AssignVariableOp" => node.attr("validate_shape").and_then(AttrValue::as_bool).unwrap_or(false),
        _ => true,
    }
}

/// Writes the origin attributes (module doc) on every bridge node of `out`,
/// the encapsulation of `pruned`'s clusters `specs`; `position` is each node's
/// place in a topological order of `pruned`.
pub(crate) fn record_origins(
    pruned: &Graph,
    specs: &[ClusterSpec],
    out: &mut Graph,
    bridges: &[Bridge],
    position: &[usize],
) {
    let spec_of: HashMap<&str, &ClusterSpec> = specs.iter().map(|s| (s.name.as_str(), s)).collect();
    for bridge in bridges {
        let Some(spec) = spec_of.get(bridge.cluster.as_str()) else { continue };
        let mut ordered: Vec<NodeId> = spec.nodes.clone();
        ordered.sort_by_key(|id| position[id.index()]);
        // The members touching each variable (by the variable its handle names through
        // `Identity` chains, whichever handle node they use), in order, with whether they
        // read and write it.
        let mut touching: HashMap<String, Vec<(NodeId, bool, bool)>> = HashMap::new();
        for &m in &ordered {
            let node = pruned.node(m);
            let Some(kind) = resource_kind(node, &pruned.library) else { continue };
            let mut seen: Vec<String> = Vec::new();
            for i in &node.inputs {
                if let Some(var) = traced_variable(pruned, i.node) {
                    if !seen.contains(&var) {
                        touching.entry(var.clone()).or_default().push((m, kind.reads(), kind.writes()));
                        seen.push(var);
                    }
                }
            }
        }
        let users = |handle: &str| -> &[(NodeId, bool, bool)] {
            pruned
                .find(handle)
                .and_then(|h| traced_variable(pruned, h))
                .and_then(|var| touching.get(&var))
                .map_or(&[], Vec::as_slice)
        };
        if let Some(id) = bridge.snapshot.as_deref().and_then(|n| out.find(n)) {
            let n = out.node(id).inputs.len();
            let mut names = Vec::with_capacity(n);
            let mut ops = Vec::with_capacity(n);
            for h in handle_names(out, id, n) {
                let reader = users(&h).iter().find(|u| u.1).map(|u| u.0);
                names.push(reader.map(|r| pruned.name(r).to_string()).unwrap_or_default());
                ops.push(reader.map(|r| pruned.node(r).op.clone()).unwrap_or_default());
            }
            set_origins(out, id, names, ops, None);
        }
        if let Some(id) = bridge.write_back.as_deref().and_then(|n| out.find(n)) {
            let n = out.node(id).inputs.len() / 2;
            let (mut names, mut ops, mut validate) = (Vec::new(), Vec::new(), Vec::new());
            for h in handle_names(out, id, n) {
                let writers: Vec<NodeId> = users(&h).iter().filter(|u| u.2).map(|u| u.0).collect();
                let last = writers.last().copied();
                names.push(last.map(|r| pruned.name(r).to_string()).unwrap_or_default());
                ops.push(last.map(|r| pruned.node(r).op.clone()).unwrap_or_default());
                validate.push(writers.first().is_some_and(|&w| validates_shape(pruned.node(w))));
            }
            set_origins(out, id, names, ops, Some(validate));
        }
    }
}

/// The names of the first `count` inputs' nodes of `node` (a bridge's handles).
fn handle_names(g: &Graph, node: NodeId, count: usize) -> Vec<String> {
    g.node(node).inputs.iter().take(count).map(|o| g.name(o.node).to_string()).collect()
}

fn set_origins(out: &mut Graph, id: NodeId, names: Vec<String>, ops: Vec<String>, validate: Option<Vec<bool>>) {
    let strings = |v: Vec<String>| AttrValue::List(ListValue::S(v.into_iter().map(String::into_bytes).collect()));
    let attrs = out.attrs_mut(id);
    attrs.insert(ORIGINS_ATTR.into(), strings(names));
    attrs.insert(ORIGIN_OPS_ATTR.into(), strings(ops));
    if let Some(v) = validate {
        attrs.insert(VALIDATE_SHAPE_ATTR.into(), AttrValue::List(ListValue::B(v)));
    }
}
