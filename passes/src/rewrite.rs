//! What the graph-optimization passes (`constant-fold`, `dependency-optimize`,
//! `arithmetic-simplify`, `cse`) share: which nodes are *pure* (may be merged,
//! folded or removed), which nodes the request pins, and [`Rewrite`], an edit
//! list (uses redirected, nodes removed or replaced) applied in place.
//!
//! Invariant every user keeps: a stateful node (registry `is_stateful`, a
//! resource op, a call, an unknown op, a random op) is never removed, merged
//! or replaced, and keeps every control input it had (or one implying it).

use std::collections::{HashMap, HashSet};

use autoclust_graph::{effects, registry, AttrValue, DType, Graph, GraphError, Node, NodeId, Output, RawNode};

use crate::pass::PassContext;

/// Ops that are not pure whatever the registry says: graph sources whose
/// value is supplied at run time and nodes that exist only for their control
/// edges — and v1 control flow ([`effects::V1_CONTROL_FLOW`]: its nodes are not values
/// but frames).
const NEVER_PURE: &[&str] =
    &["Placeholder", "PlaceholderWithDefault", "VarHandleOp", "_Arg", "_Retval", "NoOp", "ControlTrigger"];

/// Whether `id` is a v1 control-flow node ([`effects::V1_CONTROL_FLOW`]).
pub(crate) fn is_control_flow(graph: &Graph, id: NodeId) -> bool {
    effects::V1_CONTROL_FLOW.contains(&graph.node(id).op.as_str())
}

/// Whether `node` computes its outputs from its inputs alone, with no effect:
/// a known, non-stateful op that touches no resource, calls no function, and
/// handles no resource value.
pub(crate) fn is_pure(graph: &Graph, node: &Node) -> bool {
    if NEVER_PURE.contains(&node.op.as_str())
        || effects::V1_CONTROL_FLOW.contains(&node.op.as_str())
        || effects::resource_kind(node, &graph.library).is_some()
        || effects::may_call_function(node, &graph.library)
        || node.attrs.values().any(|a| a.is_func())
        || handles_resource(node)
    {
        return false;
    }
    match registry::lookup(&node.op) {
        // Stateless random ops draw from their key/counter or seed alone (the
        // same inputs, the same numbers): pure, unlike the stateful samplers.
        Some(schema) => {
            !schema.is_stateful && (schema.family != registry::OpFamily::Random || node.op.starts_with("Stateless"))
        }
        None => false,
    }
}

pub(crate) fn handles_resource(node: &Node) -> bool {
    attrs_handle_resource(&node.attrs)
}

/// Whether an attribute types a value as a resource (a handle passes through the node).
pub(crate) fn attrs_handle_resource(attrs: &autoclust_graph::Attrs) -> bool {
    attrs.values().any(|a| match a {
        AttrValue::Type(t) => matches!(t, DType::Resource),
        AttrValue::List(autoclust_graph::ListValue::Type(ts)) => ts.iter().any(|t| matches!(t, DType::Resource)),
        _ => false,
    })
}

/// The nodes a pass must keep under their name with the same outputs: the
/// request's fetches and targets and the fed nodes when the context names
/// them, otherwise every node nothing consumes (what a caller may fetch).
pub(crate) fn pinned(graph: &Graph, ctx: &PassContext) -> Vec<bool> {
    let mut pin = vec![false; graph.len()];
    match &ctx.preserve {
        Some(names) => {
            for n in names.iter().chain(ctx.fed.iter()) {
                if let Some(id) = graph.find(n) {
                    pin[id.index()] = true;
                }
            }
        }
        None => {
            let mut used = vec![false; graph.len()];
            for n in graph.nodes() {
                for p in n.inputs.iter().map(|o| o.node).chain(n.control_inputs.iter().copied()) {
                    used[p.index()] = true;
                }
            }
            for (i, u) in used.iter().enumerate() {
                pin[i] = !u;
            }
            for n in &ctx.fed {
                if let Some(id) = graph.find(n) {
                    pin[id.index()] = true;
                }
            }
        }
    }
    pin
}

/// Edits to apply to a graph in one rebuild ([`Rewrite::apply`]).
#[derive(Default)]
pub(crate) struct Rewrite {
    /// Data uses of an output become uses of another (followed transitively).
    data: HashMap<Output, Output>,
    /// Removed nodes; a control use of one becomes control uses of these
    /// nodes (expanded transitively when they are removed too).
    removed: HashMap<NodeId, Vec<NodeId>>,
    /// Nodes replaced in place (same name): their new op, inputs and attributes.
    replaced: HashMap<NodeId, RawNode>,
    /// Control inputs to drop from a node.
    drop_control: HashSet<(NodeId, NodeId)>,
    /// Control inputs to add to a node (resolved like the others).
    add_control: HashMap<NodeId, Vec<NodeId>>,
    /// New nodes (appended; inputs already written as strings).
    added: Vec<RawNode>,
    /// Data uses of an output that now read a new node's output (by name).
    named: HashMap<Output, String>,
}

#[cfg(test)]
thread_local! {
    /// Redirections [`Rewrite::resolve`] followed on this thread: what a pass's tests count
    /// to show it builds no chain of them (resolving through one per node is quadratic).
    pub(crate) static RESOLVE_HOPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl Rewrite {
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
            && self.removed.is_empty()
            && self.replaced.is_empty()
            && self.drop_control.is_empty()
            && self.added.is_empty()
            && self.add_control.is_empty()
    }
    /// The control inputs [`Rewrite::add_control`] gave `node` so far.
    pub fn added_controls(&self, node: NodeId) -> &[NodeId] {
        self.add_control.get(&node).map(Vec::as_slice).unwrap_or_default()
    }
    /// Gives `node` the control input `input` (or what stands for it).
    pub fn add_control(&mut self, node: NodeId, input: NodeId) {
        self.add_control.entry(node).or_default().push(input);
    }
    /// Adds a node (its inputs are final strings).
    pub fn add(&mut self, node: RawNode) {
        self.added.push(node);
    }
    /// Data uses of `from` read the output `to` of an added node instead.
    pub fn redirect_named(&mut self, from: Output, to: String) {
        self.named.insert(from, to);
    }
    /// The input string a data use of `o` becomes.
    pub fn output_string(&self, graph: &Graph, o: Output) -> String {
        let r = self.resolve(o);
        match self.named.get(&r) {
            Some(s) => s.clone(),
            None => graph.output_name(r),
        }
    }
    pub fn redirect(&mut self, from: Output, to: Output) {
        self.data.insert(from, to);
    }
    /// The output a use of `o` reads after the edits so far.
    pub fn resolve(&self, mut o: Output) -> Output {
        let mut hops = 0;
        while let Some(&next) = self.data.get(&o) {
            o = next;
            hops += 1;
            if hops > self.data.len() {
                break;
            }
        }
        #[cfg(test)]
        RESOLVE_HOPS.with(|c| c.set(c.get() + hops as u64));
        o
    }
    pub fn remove(&mut self, id: NodeId, control_to: Vec<NodeId>) {
        self.removed.insert(id, control_to);
    }
    pub fn replace(&mut self, id: NodeId, node: RawNode) {
        self.replaced.insert(id, node);
    }
    pub fn drop_control(&mut self, node: NodeId, input: NodeId) {
        self.drop_control.insert((node, input));
    }

    /// Appends the control inputs standing for a control use of `id` to `out`, in order.
    /// Several uses may append the same node: callers remove repeats once, with
    /// [`dedup_in_order`] (a membership test per append made a node with 10⁵ control inputs,
    /// a training step's final `NoOp`, cost 10¹⁰ comparisons).
    pub fn resolve_control(&self, id: NodeId, out: &mut Vec<NodeId>) {
        if !self.removed.contains_key(&id) {
            out.push(id);
            return;
        }
        let mut stack = vec![id];
        let mut seen = HashSet::new();
        while let Some(c) = stack.pop() {
            if !seen.insert(c) {
                continue;
            }
            match self.removed.get(&c) {
                Some(to) => stack.extend(to.iter().rev().copied()),
                None => out.push(c),
            }
        }
    }

    /// The graph with every edit applied; node order and names kept. Edits in
    /// place: only nodes an edit touches change, the rest keep their storage
    /// (renumbered when nodes are removed) — no node is rebuilt from strings.
    /// The result is the graph a rebuild from every node's resolved input
    /// strings would give: each node's control inputs resolved through removed
    /// nodes, without repeats, itself or its data producers.
    pub fn apply(&self, mut graph: Graph) -> Result<Graph, GraphError> {
        if self.is_empty() {
            return Ok(graph);
        }
        let old_len = graph.len();
        // Added nodes go after every old one (ids `old_len..`), as a rebuild appends them.
        let added_names: HashMap<&str, NodeId> =
            self.added.iter().enumerate().map(|(k, n)| (n.name.as_str(), NodeId((old_len + k) as u32))).collect();
        // Each old node's new inputs, computed against the old graph before anything moves.
        let mut rewired: Vec<(NodeId, Vec<Output>, Vec<NodeId>)> = Vec::new();
        let (mut data, mut controls) = (Vec::new(), Vec::new());
        for id in graph.node_ids() {
            if self.removed.contains_key(&id) || self.replaced.contains_key(&id) {
                continue;
            }
            let n = graph.node(id);
            data.clear();
            controls.clear();
            for &o in &n.inputs {
                let r = self.resolve(o);
                data.push(match self.named.get(&r) {
                    None => r,
                    Some(s) => match autoclust_graph::parse_input(s) {
                        Some(autoclust_graph::InputRef::Data { node, port }) => {
                            match added_names.get(node).copied().or_else(|| graph.find(node)) {
                                Some(p) => Output { node: p, port },
                                None => {
                                    return Err(GraphError::UnknownInput {
                                        node: n.name.clone(),
                                        input: s.clone(),
                                        span: n.span,
                                    })
                                }
                            }
                        }
                        _ => {
                            return Err(GraphError::MalformedInput {
                                node: n.name.clone(),
                                input: s.clone(),
                                span: n.span,
                            })
                        }
                    },
                });
            }
            for &c in &n.control_inputs {
                if !self.drop_control.is_empty() && self.drop_control.contains(&(id, c)) {
                    continue;
                }
                self.resolve_control(c, &mut controls);
            }
            for &c in self.add_control.get(&id).into_iter().flatten() {
                self.resolve_control(c, &mut controls);
            }
            dedup_in_order(&mut controls);
            controls.retain(|&c| c != id && !n.inputs.iter().any(|&o| self.resolve(o).node == c));
            if data != n.inputs || controls != n.control_inputs {
                rewired.push((id, data.clone(), controls.clone()));
            }
        }
        graph.append_raw(self.added.clone())?;
        for (&id, raw) in &self.replaced {
            if !self.removed.contains_key(&id) {
                graph.replace_raw(id, raw.clone())?;
            }
        }
        for (id, data, controls) in rewired {
            graph.set_inputs(id, &data, &controls);
        }
        let mut remove = vec![false; graph.len()];
        for &id in self.removed.keys() {
            remove[id.index()] = true;
        }
        graph.remove_nodes(&remove)?;
        Ok(graph)
    }
}

/// Removes repeated ids from `v`, keeping each one's first position.
pub(crate) fn dedup_in_order(v: &mut Vec<NodeId>) {
    if v.len() <= 16 {
        let mut k = 0;
        for i in 0..v.len() {
            if !v[..k].contains(&v[i]) {
                v[k] = v[i];
                k += 1;
            }
        }
        v.truncate(k);
    } else {
        let mut seen = rustc_hash::FxHashSet::default();
        v.retain(|&x| seen.insert(x));
    }
}

/// The input strings of a replacement node: data inputs resolved through
/// `rw`, then the control inputs (resolved) after them.
pub(crate) fn input_strings(graph: &Graph, rw: &Rewrite, data: &[Output], control: &[NodeId]) -> Vec<String> {
    let mut inputs: Vec<String> = data.iter().map(|&o| rw.output_string(graph, o)).collect();
    let mut controls = Vec::new();
    for &c in control {
        rw.resolve_control(c, &mut controls);
    }
    dedup_in_order(&mut controls);
    let data_preds: HashSet<NodeId> = data.iter().map(|&o| rw.resolve(o).node).collect();
    controls.retain(|c| !data_preds.contains(c));
    inputs.extend(controls.iter().map(|&c| format!("^{}", graph.name(c))));
    inputs
}

/// Removes every pure node ([`is_pure`], or a `Const`) that nothing consumes
/// and the request does not pin, repeatedly: its value is never observed.
/// A removed node's control inputs are not needed by anyone (it had no
/// consumers), so no ordering is lost.
pub(crate) fn remove_dead(graph: Graph, keep: &HashSet<String>, ctx: &PassContext) -> Result<Graph, GraphError> {
    let pin: Vec<bool> = graph.nodes().iter().map(|n| keep.contains(&n.name)).collect();
    let mut uses = vec![0usize; graph.len()];
    for n in graph.nodes() {
        for p in n.inputs.iter().map(|o| o.node).chain(n.control_inputs.iter().copied()) {
            uses[p.index()] += 1;
        }
    }
    let removable = |id: NodeId| {
        let n = graph.node(id);
        !pin[id.index()] && (is_pure(&graph, n) || (n.op == "Const" && !ctx.fed.contains(&n.name)))
    };
    let mut dead = vec![false; graph.len()];
    let mut stack: Vec<NodeId> = graph.node_ids().filter(|&id| uses[id.index()] == 0 && removable(id)).collect();
    while let Some(id) = stack.pop() {
        if dead[id.index()] {
            continue;
        }
        dead[id.index()] = true;
        let n = graph.node(id);
        for p in n.inputs.iter().map(|o| o.node).chain(n.control_inputs.iter().copied()) {
            uses[p.index()] -= 1;
            if uses[p.index()] == 0 && removable(p) {
                stack.push(p);
            }
        }
    }
    if !dead.iter().any(|&d| d) {
        return Ok(graph);
    }
    let mut graph = graph;
    graph.remove_nodes(&dead)?;
    Ok(graph)
}

/// The names of the nodes [`pinned`] keeps, computed on a pass's input graph
/// (so nodes a rewrite orphans stay removable).
pub(crate) fn pinned_names(graph: &Graph, ctx: &PassContext) -> HashSet<String> {
    let pin = pinned(graph, ctx);
    graph.node_ids().filter(|id| pin[id.index()]).map(|id| graph.name(id).to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedup_keeps_first_positions_short_and_long() {
        let ids = |v: &[u32]| v.iter().map(|&i| NodeId(i)).collect::<Vec<_>>();
        let mut v = ids(&[3, 1, 3, 2, 1]);
        dedup_in_order(&mut v);
        assert_eq!(v, ids(&[3, 1, 2]));
        let long: Vec<u32> = (0..100).map(|i| (i * 7) % 40).collect();
        let mut v = ids(&long);
        dedup_in_order(&mut v);
        let mut want = Vec::new();
        for x in long {
            if !want.contains(&x) {
                want.push(x);
            }
        }
        assert_eq!(v, ids(&want));
    }
}
