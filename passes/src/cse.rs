//! Common-subexpression elimination (`opt --passes cse`), Grappler's
//! `dedup`: two *pure* nodes ([`crate::rewrite::is_pure`]) with the same op,
//! attributes, device, data inputs (after earlier merges) and control inputs
//! compute the same values, so the later one is removed and its uses read
//! the first. Graphs made by unrolling a computation (TF2 traces, the
//! `scalar_10k` benchmark's ten identical chains) shrink by the repeat factor.
//! Pure *calls* ([`crate::pure_calls`]: a `While`, `If` or `PartitionedCall`
//! whose functions, transitively, hold only pure nodes) merge too when they
//! call the same functions up to names — a Keras model called twice in a step
//! traces each of its loops twice, under two names.
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
//! ops, resource ops other than reads (below), stateful random ops, calls of
//! impure functions, `Placeholder`s, v1 control flow
//! other than a `Switch` of a value (module [`is_value_switch`]), and the
//! nodes the request fetches, targets or feeds (they keep their names).
//! Constants larger than [`MAX_CONST_ELEMENTS`] are not compared.
//!
//! Two `ReadVariableOp`s of the same handle with the same control inputs are
//! merged too, as Grappler's dedup does, but only when no effect can come
//! between them ([`no_effect_between`]: every write, call or other stateful
//! op is ordered before both or after both): the merged read is the original
//! program's run in which the second read follows the first at once, so the
//! optimized outcomes are a subset of the original ones.

use std::collections::{HashMap, HashSet};

use autoclust_graph::{effects, AttrValue, Graph, NodeId, Output, Successors};

use crate::pass::PassContext;
use crate::pure_calls::PureCalls;
use crate::rewrite::{handles_resource, is_pure, pinned, Rewrite};

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

/// Most pairs of twin reads [`no_effect_between`] examines in one run (each
/// costs a walk of the graph); later twins stay apart.
pub const MAX_READ_CHECKS: usize = 256;

/// Whether no effect can come between two `ReadVariableOp`s `a` and `b` of
/// the same handle with the same control inputs: every node that is neither
/// pure nor a read, a source or a `NoOp` (so every write, call, unknown or
/// stateful op) is an ancestor of both or a descendant of both — or a
/// resource op whose handles all name other variables than the read's
/// (`VarHandleOp`s and resource `Placeholder`s, [`variable_key`]; a handle
/// computed or passed as an argument may alias any variable). Then some run of the original reads `b`
/// right after `a` (they wait for the same nodes), and every run does so as
/// far as any effect can tell, so one read serves both.
fn no_effect_between(
    graph: &Graph,
    succ: &Successors,
    a: NodeId,
    b: NodeId,
    fed: &HashSet<String>,
    checks: &mut ReadChecks,
    pure_call: &[bool],
) -> bool {
    if checks.count >= MAX_READ_CHECKS {
        return false;
    }
    checks.count += 1;
    // What each node may do to variables: the same for every pair, found once.
    if checks.reach.is_empty() {
        checks.classify(graph, fed, pure_call);
    }
    let mine = variable_key(graph.node(graph.node(a).inputs[0].node), fed)
        .map(|k| checks.var_ids.get(&k).copied().unwrap_or(u32::MAX));
    let walk = |start: NodeId, forward: bool| -> Vec<bool> {
        let mut seen = vec![false; graph.len()];
        let mut stack = vec![start];
        let mut visit = |m: NodeId, stack: &mut Vec<NodeId>| {
            if !seen[m.index()] {
                seen[m.index()] = true;
                stack.push(m);
            }
        };
        while let Some(n) = stack.pop() {
            if forward {
                for &(u, _, _) in &succ.data[n.index()] {
                    visit(u, &mut stack);
                }
                for &u in &succ.control[n.index()] {
                    visit(u, &mut stack);
                }
            } else {
                let node = graph.node(n);
                for o in &node.inputs {
                    visit(o.node, &mut stack);
                }
                for &c in &node.control_inputs {
                    visit(c, &mut stack);
                }
            }
        }
        seen
    };
    let (anc_a, anc_b, desc_a, desc_b) = (walk(a, false), walk(b, false), walk(a, true), walk(b, true));
    graph.node_ids().all(|e| {
        let i = e.index();
        (anc_a[i] && anc_b[i])
            || (desc_a[i] && desc_b[i])
            || match &checks.reach[i] {
                Reach::Harmless => true,
                Reach::Any => false,
                // A resource op whose handles all name other variables than the read's.
                Reach::Only(vars) => mine.is_some_and(|m| !vars.contains(&m)),
            }
    })
}

/// What a node may do to variables, for [`no_effect_between`].
enum Reach {
    /// Nothing an effect can be ordered against: pure, a read, a handle, a constant.
    Harmless,
    /// Any variable (a call, an unknown stateful op, a handle it cannot name).
    Any,
    /// Only the variables listed (ids in [`ReadChecks::var_ids`]).
    Only(smallvec::SmallVec<[u32; 2]>),
}

/// What [`no_effect_between`] keeps across the pairs of one run: how many it examined, and
/// the nodes that are harmless between two reads (computed at the first pair).
#[derive(Default)]
struct ReadChecks {
    count: usize,
    /// Per node (empty until the first pair).
    reach: Vec<Reach>,
    /// The variables' keys ([`variable_key`]), numbered.
    var_ids: HashMap<(Vec<u8>, Vec<u8>), u32>,
}

impl ReadChecks {
    fn classify(&mut self, graph: &Graph, fed: &HashSet<String>, pure_call: &[bool]) {
        let mut id_of = |k: (Vec<u8>, Vec<u8>)| {
            let next = self.var_ids.len() as u32;
            *self.var_ids.entry(k).or_insert(next)
        };
        self.reach = graph
            .nodes()
            .iter()
            .zip(pure_call)
            .map(|(n, &pure_call)| {
                let harmless = is_pure(graph, n)
                    || pure_call
                    || matches!(
                        n.op.as_str(),
                        "ReadVariableOp"
                            | "VarHandleOp"
                            | "Placeholder"
                            | "PlaceholderWithDefault"
                            | "_Arg"
                            | "NoOp"
                            | "Const"
                    );
                if harmless {
                    return Reach::Harmless;
                }
                if effects::table_kind(&n.op).is_none() || effects::may_call_function(n, &graph.library) {
                    return Reach::Any;
                }
                let mut vars = smallvec::SmallVec::new();
                for o in &n.inputs {
                    let p = graph.node(o.node);
                    match variable_key(p, fed) {
                        Some(k) => vars.push(id_of(k)),
                        // A value input; anything that may carry a handle is not known to be
                        // another variable.
                        None if effects::names_variable(p) || handles_resource(p) || p.op == "_Arg" => {
                            return Reach::Any
                        }
                        None => {}
                    }
                }
                Reach::Only(vars)
            })
            .collect();
    }
}

/// The variable a `VarHandleOp` names: (container, shared name — the node's
/// name when empty); a resource `Placeholder` (not fed) names the one called
/// after it.
fn variable_key(n: &autoclust_graph::Node, fed: &HashSet<String>) -> Option<(Vec<u8>, Vec<u8>)> {
    if effects::names_variable(n) && n.op == "Placeholder" && !fed.contains(&n.name) {
        // A resource placeholder names the variable called after the node (docs/contract.md §3).
        return Some((Vec::new(), n.name.clone().into_bytes()));
    }
    if n.op != "VarHandleOp" {
        return None;
    }
    let s = |k: &str| match n.attr(k) {
        Some(AttrValue::S(b)) => b.clone(),
        _ => Vec::new(),
    };
    let shared = s("shared_name");
    Some((s("container"), if shared.is_empty() { n.name.clone().into_bytes() } else { shared }))
}

/// Merges identical pure nodes (module doc).
pub fn cse(graph: &Graph, ctx: &PassContext) -> Result<(Graph, CseReport), crate::pass::PassError> {
    cse_owned(graph.clone(), ctx)
}

/// [`cse`] editing `graph` in place (what the pass runs).
pub(crate) fn cse_owned(owned: Graph, ctx: &PassContext) -> Result<(Graph, CseReport), crate::pass::PassError> {
    let graph = &owned;
    let _span = tracing::debug_span!("cse", nodes = graph.len()).entered();
    let order = graph.topo_order()?;
    let pin = pinned(graph, ctx);
    let succ = graph.successors();
    let mut rw = Rewrite::default();
    // Keyed by the keys' own hashes (no second hashing); each candidate's key text, once
    // spelled out, is kept: its inputs were resolved before it (topological order), so
    // its key never changes.
    let mut seen: Candidates = HashMap::default();
    // foldhash, seeded per process: fast, and names chosen to collide cannot make the
    // candidate lists long.
    let state = foldhash::fast::RandomState::default();
    let (mut inputs, mut controls) = (Vec::new(), Vec::new());
    let mut report = CseReport::default();
    let mut read_checks = ReadChecks::default();
    // Pure calls, and their attributes with each function named by its class: their keys'.
    let mut calls = PureCalls::new(&graph.library);
    let pure_call: Vec<bool> = if graph.library.functions.is_empty() {
        vec![false; graph.len()]
    } else {
        graph.nodes().iter().map(|n| calls.is_pure_call(n)).collect()
    };
    let mut canonical = CanonicalAttrs::default();
    for id in order {
        let node = graph.node(id);
        let read = node.op == "ReadVariableOp" && node.inputs.len() == 1 && !ctx.fed.contains(&node.name);
        if pin[id.index()] || !(is_pure(graph, node) || is_value_switch(node) || read || pure_call[id.index()]) {
            continue;
        }
        if pure_call[id.index()] {
            // A call by a function's name keys on the function's class.
            let op = match graph.library.function(&node.op) {
                Some(_) => calls.class_of(&node.op).map(|c| format!("#fn{c}")),
                None => Some(node.op.clone()),
            };
            match (op, calls.canonical_attrs(&node.attrs)) {
                (Some(op), Some(attrs)) => canonical.insert(id, (op, attrs)),
                _ => continue,
            };
        }
        if node.op == "Const" {
            match node.attr("value") {
                Some(AttrValue::Tensor(t)) if t.num_elements() <= MAX_CONST_ELEMENTS => {}
                _ => continue,
            }
        }
        // Two nodes merge when their keys (op, device, attributes, resolved inputs and
        // control inputs, as text) are equal. The key's parts are hashed without writing
        // the text, so a node costs no allocation; it is spelled out only to confirm a
        // hash match.
        let hash = key_hash(&state, graph, &rw, &canonical, id, &mut inputs, &mut controls);
        let matching = match seen.get_mut(&hash) {
            None => None,
            Some(candidates) => {
                let key = key_string(graph, &rw, &canonical, id, &mut inputs, &mut controls);
                candidates
                    .iter_mut()
                    .position(|(c, text)| {
                        *text.get_or_insert_with(|| key_string(graph, &rw, &canonical, *c, &mut inputs, &mut controls))
                            == key
                    })
                    .map(|k| candidates[k].0)
            }
        };
        match matching {
            Some(first) => {
                if read && !no_effect_between(graph, &succ, first, id, &ctx.fed, &mut read_checks, &pure_call) {
                    continue;
                }
                let used = succ.data[id.index()].iter().map(|&(_, port, _)| port as usize + 1).max().unwrap_or(1);
                let ports = graph.output_count(id).unwrap_or(1).max(used);
                for p in 0..ports as u32 {
                    rw.redirect(Output { node: id, port: p }, Output { node: first, port: p });
                }
                rw.remove(id, vec![first]);
                report.merged += 1;
            }
            None => seen.entry(hash).or_default().push((id, None)),
        }
    }
    let out = rw.apply(owned)?;
    tracing::debug!(merged = report.merged, nodes = out.len(), "cse done");
    Ok((out, report))
}

/// A pure call's op and attributes with each function named by its class
/// ([`PureCalls::canonical_attrs`]), by node: what its key holds instead of its own.
type CanonicalAttrs = HashMap<NodeId, (String, Vec<(String, AttrValue)>)>;

/// Writes node `id`'s merge key: op, device, attributes (internal `_` ones left out:
/// `_class` colocation, `_has_manual_control_dependencies`, … do not change a pure
/// node's value, and Grappler's dedup ignores them too; a pure call's functions by class),
/// data inputs and sorted control inputs, each resolved through the edits so far
/// (`inputs`, `controls`: scratch).
fn write_key(
    out: &mut dyn std::fmt::Write,
    graph: &Graph,
    rw: &Rewrite,
    canonical: &CanonicalAttrs,
    id: NodeId,
    inputs: &mut Vec<Output>,
    controls: &mut Vec<NodeId>,
) {
    resolve_key_inputs(graph, rw, id, inputs, controls);
    let (op, attrs) = key_op_attrs(graph, canonical, id);
    // Writing to a string cannot fail.
    let _ = write!(out, "{}|{}|{:?}|{:?}|{:?}", op, graph.node(id).device, attrs, inputs, controls);
}

/// The op and attributes node `id`'s key holds: a pure call's canonical ones, else its own
/// (internal `_` attributes left out).
fn key_op_attrs<'a>(graph: &'a Graph, canonical: &'a CanonicalAttrs, id: NodeId) -> (&'a str, KeyAttrs<'a>) {
    match canonical.get(&id) {
        Some((op, attrs)) => (op, KeyAttrs::Canonical(attrs)),
        None => (&graph.node(id).op, KeyAttrs::Own(&graph.node(id).attrs)),
    }
}

/// A key's attributes, formatted as a list of (name, value) pairs.
enum KeyAttrs<'a> {
    Canonical(&'a [(String, AttrValue)]),
    Own(&'a autoclust_graph::Attrs),
}

impl std::fmt::Debug for KeyAttrs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyAttrs::Canonical(a) => DebugList(a.iter().map(|(k, v)| (k, v))).fmt(f),
            KeyAttrs::Own(a) => DebugList(a.iter().filter(|(k, _)| !k.starts_with('_'))).fmt(f),
        }
    }
}

/// A hash of the key [`write_key`] writes: equal keys give equal hashes (the same op,
/// device and attribute text, the same resolved inputs and controls).
fn key_hash(
    state: &foldhash::fast::RandomState,
    graph: &Graph,
    rw: &Rewrite,
    canonical: &CanonicalAttrs,
    id: NodeId,
    inputs: &mut Vec<Output>,
    controls: &mut Vec<NodeId>,
) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    resolve_key_inputs(graph, rw, id, inputs, controls);
    let mut h = state.build_hasher();
    let (op, attrs) = key_op_attrs(graph, canonical, id);
    h.write(op.as_bytes());
    h.write_u8(0xff);
    h.write(graph.node(id).device.as_bytes());
    h.write_u8(0xff);
    // Writing to a hasher cannot fail.
    let _ = std::fmt::Write::write_fmt(&mut HashWriter(&mut h), format_args!("{attrs:?}"));
    h.write_usize(inputs.len());
    for o in inputs.iter() {
        h.write_u32(o.node.0);
        h.write_u32(o.port);
    }
    for c in controls.iter() {
        h.write_u32(c.0);
    }
    h.finish()
}

/// The data inputs and the sorted control inputs of node `id`, each resolved through the
/// edits so far, into the scratch vectors.
fn resolve_key_inputs(graph: &Graph, rw: &Rewrite, id: NodeId, inputs: &mut Vec<Output>, controls: &mut Vec<NodeId>) {
    let node = graph.node(id);
    inputs.clear();
    inputs.extend(node.inputs.iter().map(|&o| rw.resolve(o)));
    controls.clear();
    for &c in &node.control_inputs {
        rw.resolve_control(c, controls);
    }
    controls.sort();
    controls.dedup();
}

fn key_string(
    graph: &Graph,
    rw: &Rewrite,
    canonical: &CanonicalAttrs,
    id: NodeId,
    inputs: &mut Vec<Output>,
    controls: &mut Vec<NodeId>,
) -> String {
    let mut key = String::new();
    write_key(&mut key, graph, rw, canonical, id, inputs, controls);
    key
}

/// Nodes by [`key_hash`], each with its key text once spelled out.
type Candidates = HashMap<u64, Vec<(NodeId, Option<String>)>, std::hash::BuildHasherDefault<KeyHasher>>;

/// The hasher of a map keyed by [`key_hash`]es: a key is already a hash.
#[derive(Default)]
struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = x;
    }
}

/// Formats an iterator's items as a list, like a `Vec` of them.
struct DebugList<I>(I);

impl<I: Iterator<Item = T> + Clone, T: std::fmt::Debug> std::fmt::Debug for DebugList<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.clone()).finish()
    }
}

/// A `fmt::Write` that feeds a hasher.
struct HashWriter<'a, H>(&'a mut H);

impl<H: std::hash::Hasher> std::fmt::Write for HashWriter<'_, H> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.write(s.as_bytes());
        Ok(())
    }
}

/// `cse`: [`cse`] as a registered pass.
pub(crate) struct CsePass;

impl crate::pass::Pass for CsePass {
    fn name(&self) -> &'static str {
        "cse"
    }
    fn description(&self) -> &'static str {
        "merge identical pure nodes (same op, attributes, inputs, control inputs) and pure calls of functions equal \
         up to names; never stateful, resource, random or fetched nodes"
    }
    fn run(&self, graph: Graph, ctx: &PassContext) -> Result<Graph, crate::pass::PassError> {
        let mut out = cse_owned(graph, ctx)?.0;
        crate::function_bodies::optimize_bodies(&mut out, ctx, "cse", |body, c| Ok(cse(body, c)?.0));
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
             one = Const() {dtype = float32, value = float32[]{1.0}}\n\
             w = AssignVariableOp(v, one) {dtype = float32}\n\
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
    fn reads_merge_only_when_every_write_is_after_both() {
        let g = parse(
            "v = VarHandleOp() {dtype = float32, shape = shape[], shared_name = \"v\"}\n\
             r1 = ReadVariableOp(v) {dtype = float32}\n\
             r2 = ReadVariableOp(v) {dtype = float32}\n\
             s = AddV2(r1, r2) {T = float32}\n\
             w = AssignVariableOp(v, s) {dtype = float32}\n\
             r3 = ReadVariableOp(v) {dtype = float32}\n\
             r4 = ReadVariableOp(v) {dtype = float32}\n\
             w2 = AssignVariableOp(v, r3, ^w) {dtype = float32}\n\
             t = AddV2(r3, r4) {T = float32}\n",
        );
        let ctx = PassContext {
            preserve: Some(["w2", "t"].iter().map(|s| s.to_string()).collect()),
            ..PassContext::default()
        };
        let (out, r) = cse(&g, &ctx).unwrap();
        // r2 merges into r1 (w waits for both); r3/r4 may see w2 between them, and r1/r3 may see w.
        assert_eq!(r.merged, 1, "{out:?}");
        assert_eq!(names(&out), ["v", "r1", "s", "w", "r3", "r4", "w2", "t"]);
    }

    #[test]
    fn writes_to_other_variables_do_not_block_twin_reads() {
        let src = |target: &str| {
            format!(
                "p = Placeholder() {{dtype = resource, shape = shape[]}}\n\
                 q = Placeholder() {{dtype = resource, shape = shape[]}}\n\
                 r1 = ReadVariableOp(p) {{dtype = float32}}\n\
                 r2 = ReadVariableOp(p) {{dtype = float32}}\n\
                 s = AddV2(r1, r2) {{T = float32}}\n\
                 one = Const() {{dtype = float32, value = float32[]{{1.0}}}}\n\
                 w = AssignVariableOp({target}, one) {{dtype = float32}}\n"
            )
        };
        let ctx = || PassContext {
            preserve: Some(["s", "w"].iter().map(|s| s.to_string()).collect()),
            ..PassContext::default()
        };
        // A write to q, unordered with the reads of p: they merge.
        assert_eq!(cse(&parse(&src("q")), &ctx()).unwrap().1.merged, 1);
        // A write to p that may come between them: they do not.
        assert_eq!(cse(&parse(&src("p")), &ctx()).unwrap().1.merged, 0);
        // Nor when p is fed (its handle may be any variable's).
        let mut fed = ctx();
        fed.fed.insert("p".into());
        assert_eq!(cse(&parse(&src("q")), &fed).unwrap().1.merged, 0);
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
