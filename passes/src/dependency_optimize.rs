//! Dependency optimization (`opt --passes dependency-optimize`), Grappler's
//! `dependency_optimizer`:
//! - **relay nodes removed**: a `NoOp`, or a pure node
//!   ([`crate::rewrite::is_pure`], e.g. an `Identity`) whose value nobody
//!   reads, exists only to order its control users after its inputs. It is
//!   removed and each control user gets the node's data producers and control
//!   inputs as control inputs instead — when that adds no edges
//!   (`inputs × users ≤ inputs + users`, Grappler's rule, so fan-in/fan-out
//!   hubs stay);
//! - **redundant control edges dropped**: a control input `a` of `b` is
//!   dropped when another input of `b` already depends on `a` (a path of data
//!   or control edges `a ⇝ p` with `p` an input of `b`, not through a v1
//!   `Merge`, which waits for one input only), found by one backward search
//!   per node from all its inputs, up to [`SEARCH_LIMIT`] nodes per control
//!   input;
//! - **gated identities bypassed**: `Identity(x, ^g…)` (TensorFlow's
//!   `tuple/control_dependency`) is removed; its data users read `x` and get
//!   the control inputs `^g…`, its control users wait for `x`'s producer and
//!   `g…` — when that adds at most one edge (`gates × users ≤ gates + users + 1`);
//! - nodes nothing consumes any more (pure ones and `Const`s) are removed.
//!
//! A relay waiting on a v1 control-flow node (a `Switch`'s `group_deps`) is
//! removed only when it is a `NoOp` whose control users each read an output
//! of that node (the moved edge is implied by that read, which also carries
//! the node's deadness).
//!
//! Never removed: the nodes the request fetches, targets or feeds, and
//! stateful, resource, random or unknown ops.
//!
//! Soundness: every happens-before survives. A relay `r` with inputs `P` and
//! control users `S` ordered each `s ∈ S` after each `p ∈ P`; the new edges
//! `p → s` say exactly that, and `r` itself has no observable value. A
//! bypassed `Identity(x, ^g)` gave its users `x`'s value once `x` and `g`
//! were done; reading `x` with `^g` gives the same value at the same
//! earliest time. A
//! dropped edge `a → b` is implied by the path `a ⇝ p → b`, which stays (only
//! edges into `b` are considered, one at a time against the current graph).

use autoclust_graph::{Graph, NodeId, Output};

use crate::pass::{PassContext, PassError};
use crate::rewrite::{is_control_flow, is_pure, pinned, pinned_names, remove_dead, Rewrite};

/// Most nodes a node's redundancy search visits per control input before giving up
/// (keeping the edges it has not proven redundant).
pub const SEARCH_LIMIT: usize = 4096;

/// What one run of [`dependency_optimize`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DependencyReport {
    /// Relay nodes removed.
    pub relays: usize,
    /// Control edges dropped as implied by other paths.
    pub edges: usize,
    /// Gated identities bypassed.
    pub identities: usize,
}

/// Removes control relays and redundant control edges (module doc).
pub fn dependency_optimize(graph: &Graph, ctx: &PassContext) -> Result<(Graph, DependencyReport), PassError> {
    dependency_optimize_owned(graph.clone(), ctx)
}

/// [`dependency_optimize`] editing `graph` in place (what the pass runs).
pub(crate) fn dependency_optimize_owned(
    graph: Graph,
    ctx: &PassContext,
) -> Result<(Graph, DependencyReport), PassError> {
    let _span = tracing::debug_span!("dependency_optimize", nodes = graph.len()).entered();
    let keep = pinned_names(&graph, ctx);
    let mut report = DependencyReport::default();
    let graph = remove_relays(graph, ctx, &mut report)?;
    let graph = bypass_gated_identities(graph, ctx, &mut report)?;
    let graph = drop_redundant(graph, &mut report)?;
    let out = remove_dead(graph, &keep, ctx)?;
    tracing::debug!(relays = report.relays, edges = report.edges, nodes = out.len(), "dependency-optimize done");
    Ok((out, report))
}

fn remove_relays(owned: Graph, ctx: &PassContext, report: &mut DependencyReport) -> Result<Graph, PassError> {
    let graph = &owned;
    let pin = pinned(graph, ctx);
    let succ = graph.successors();
    let mut rw = Rewrite::default();
    for id in graph.topo_order()? {
        let node = graph.node(id);
        if pin[id.index()] || !succ.data[id.index()].is_empty() {
            continue;
        }
        if node.op != "NoOp" && !is_pure(graph, node) {
            continue;
        }
        // A control edge out of a Switch (the pivot Identity's input) would not
        // carry its branch's deadness. A NoOp waiting on a v1 control-flow node
        // by a control edge goes only when each of its control users reads an
        // output of that node anyway: the moved edge is then implied (and
        // dropped), and that data input already makes the user dead whenever
        // the control edge would have.
        if node.inputs.iter().any(|o| is_control_flow(graph, o.node)) {
            continue;
        }
        let cf: Vec<NodeId> = node.control_inputs.iter().copied().filter(|&p| is_control_flow(graph, p)).collect();
        if !cf.is_empty()
            && (node.op != "NoOp"
                || !succ.control[id.index()]
                    .iter()
                    .all(|&u| cf.iter().all(|&p| graph.node(u).inputs.iter().any(|o| o.node == p))))
        {
            continue;
        }
        let users = succ.control[id.index()].len();
        if users == 0 {
            continue;
        }
        // The node's predecessors, as its control users will see them.
        let mut preds: Vec<NodeId> = Vec::new();
        for p in node.inputs.iter().map(|o| o.node).chain(node.control_inputs.iter().copied()) {
            rw.resolve_control(p, &mut preds);
        }
        crate::rewrite::dedup_in_order(&mut preds);
        let n = preds.len();
        if n * users > n + users {
            continue;
        }
        rw.remove(id, preds);
        report.relays += 1;
    }
    Ok(rw.apply(owned)?)
}

/// `Identity(x, ^g…)` (TensorFlow's `tuple/control_dependency`): its data
/// users read `x` and get `^g…` instead, its control users wait for `x`'s
/// producer and `g…`; when that adds no edges (Grappler's rule).
fn bypass_gated_identities(owned: Graph, ctx: &PassContext, report: &mut DependencyReport) -> Result<Graph, PassError> {
    let graph = &owned;
    let pin = pinned(graph, ctx);
    let succ = graph.successors();
    let mut rw = Rewrite::default();
    for id in graph.topo_order()? {
        let node = graph.node(id);
        if pin[id.index()]
            || node.control_inputs.is_empty()
            || node.inputs.len() != 1
            || !matches!(node.op.as_str(), "Identity" | "Snapshot" | "StopGradient")
            || !is_pure(graph, node)
            || node
                .inputs
                .iter()
                .map(|o| o.node)
                .chain(node.control_inputs.iter().copied())
                .any(|p| is_control_flow(graph, p))
        {
            continue;
        }
        let mut data_users: Vec<NodeId> = succ.data[id.index()].iter().map(|&(u, _, _)| u).collect();
        data_users.sort();
        data_users.dedup();
        let users = data_users.len() + succ.control[id.index()].len();
        // Its own gates and those an earlier bypass (of its input) handed it.
        let mut gates: Vec<NodeId> = node.control_inputs.clone();
        gates.extend(rw.added_controls(id).iter().copied());
        if users == 0 || gates.len() * users > gates.len() + users + 1 {
            continue;
        }
        let x = node.inputs[0];
        rw.redirect(Output { node: id, port: 0 }, x);
        for &u in &data_users {
            for &g in &gates {
                rw.add_control(u, g);
            }
        }
        let mut to = vec![rw.resolve(x).node];
        to.extend(gates.iter().copied());
        rw.remove(id, to);
        report.identities += 1;
    }
    Ok(rw.apply(owned)?)
}

fn drop_redundant(owned: Graph, report: &mut DependencyReport) -> Result<Graph, PassError> {
    let graph = &owned;
    let order = graph.topo_order()?;
    let mut pos = vec![0usize; graph.len()];
    for (i, id) in order.iter().enumerate() {
        pos[id.index()] = i;
    }
    let mut search = Search { mark: vec![0; graph.len()], stamp: 0, stack: Vec::new() };
    let mut dropped = vec![0u32; graph.len()];
    let mut rw = Rewrite::default();
    for &b in &order {
        let node = graph.node(b);
        if node.control_inputs.is_empty() {
            continue;
        }
        let stamp = search.strict_ancestors(graph, node, &pos);
        for &a in &node.control_inputs {
            if dropped[a.index()] == stamp {
                continue;
            }
            if node.inputs.iter().any(|o| o.node == a) || search.mark[a.index()] == stamp {
                rw.drop_control(b, a);
                dropped[a.index()] = stamp;
                report.edges += 1;
            }
        }
    }
    Ok(rw.apply(owned)?)
}

/// The reusable state of the redundancy searches: visit stamps instead of a
/// hash set per search, and one stack.
struct Search {
    mark: Vec<u32>,
    stamp: u32,
    stack: Vec<NodeId>,
}

impl Search {
    /// Marks (with the returned stamp) the strict ancestors of `b`'s inputs
    /// that come after its earliest control input in topological order (`pos`),
    /// not through a `Merge` (which waits for one input only: a path through
    /// it implies no order). A control input `a` of `b` that gets marked is
    /// redundant: some other input `p` of `b` depends on it (`a ⇝ p`; never
    /// `p = a`, the graph being acyclic), and dropping every marked one at
    /// once is sound, since following "depends on a marked input" from any
    /// dropped edge ends at an input that stays. One search per node (not one
    /// per control edge, which cost a step's final `NoOp` with ten thousand
    /// control inputs a hundred million steps), visiting at most
    /// [`SEARCH_LIMIT`] nodes per control input: past that, what is marked
    /// so far is still proven, the rest is kept.
    fn strict_ancestors(&mut self, graph: &Graph, b: &autoclust_graph::Node, pos: &[usize]) -> u32 {
        self.stamp += 1;
        let stamp = self.stamp;
        let floor = b.control_inputs.iter().map(|a| pos[a.index()]).min().unwrap_or(0);
        let budget = SEARCH_LIMIT.saturating_mul(b.control_inputs.len());
        let is_merge = |n: NodeId| matches!(graph.node(n).op.as_str(), "Merge" | "RefMerge");
        self.stack.clear();
        for p in b.inputs.iter().map(|o| o.node).chain(b.control_inputs.iter().copied()) {
            if !is_merge(p) {
                self.stack.extend(graph.forward_predecessors(p));
            }
        }
        let mut visited = 0usize;
        while let Some(n) = self.stack.pop() {
            if pos[n.index()] < floor || self.mark[n.index()] == stamp {
                continue;
            }
            self.mark[n.index()] = stamp;
            visited += 1;
            #[cfg(test)]
            tests::VISITS.with(|v| v.set(v.get() + 1));
            if visited > budget {
                break;
            }
            if !is_merge(n) {
                self.stack.extend(graph.forward_predecessors(n));
            }
        }
        stamp
    }
}

/// `dependency-optimize`: [`dependency_optimize`] as a registered pass.
pub(crate) struct DependencyOptimizePass;

impl crate::pass::Pass for DependencyOptimizePass {
    fn name(&self) -> &'static str {
        "dependency-optimize"
    }
    fn description(&self) -> &'static str {
        "remove NoOp/pure nodes that only relay control (rewiring their control users), bypass Identity(x, ^g) \
         (users read x with ^g), drop control edges implied by other paths, remove dead pure nodes"
    }
    fn run(&self, graph: Graph, ctx: &PassContext) -> Result<Graph, PassError> {
        let mut out = dependency_optimize_owned(graph, ctx)?.0;
        crate::function_bodies::optimize_bodies(&mut out, ctx, "dependency-optimize", |body, c| {
            Ok(dependency_optimize(body, c)?.0)
        });
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// Nodes the redundancy searches visited on this thread.
        pub(super) static VISITS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    /// Issue 19: `n` writes that a final `NoOp` waits on, each after a few pure ops and
    /// the write before it, a quarter of them also after a write a few places earlier.
    /// Dropping the implied edges must cost about ten times more at ten times the size
    /// (one search per control edge from every other input cost the `NoOp` n² steps).
    #[test]
    fn redundancy_search_work_grows_near_linearly() {
        let work = |n: usize| {
            let mut src = String::from(
                "v = VarHandleOp() {dtype = float32, shape = shape[], shared_name = \"v\"}\n\
                 c = Const() {dtype = float32, value = float32[]{1.0}}\n",
            );
            let mut seed = 0x2545_F491_4F6C_DD1Du64;
            for i in 0..n {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let back = 2 + (seed >> 8) as usize % 8;
                let extra =
                    if i >= back && seed.is_multiple_of(4) { format!(", ^w{}", i - back) } else { String::new() };
                let after = if i > 0 { format!(", ^w{}", i - 1) } else { String::new() };
                src.push_str(&format!(
                    "a{i} = Neg(c) {{T = float32}}\nb{i} = Exp(a{i}) {{T = float32}}\n\
                     w{i} = AssignVariableOp(v, b{i}{after}{extra}) {{dtype = float32}}\n"
                ));
            }
            let all: Vec<String> = (0..n).map(|i| format!("^w{i}")).collect();
            src.push_str(&format!("step = NoOp({})\n", all.join(", ")));
            let g = parse(&src);
            VISITS.with(|v| v.set(0));
            let (out, rep) = dependency_optimize(&g, &PassContext::default()).unwrap();
            // Every write but the last is implied by the chain of writes.
            assert_eq!(controls(&out, "step"), vec![format!("w{}", n - 1)]);
            assert!(rep.edges >= n - 1);
            VISITS.with(|v| v.get())
        };
        let (small, large) = (work(300), work(3_000));
        assert!(large < 15 * small, "{small} nodes visited at 300 writes, {large} at 3,000: superlinear");
    }

    fn parse(src: &str) -> Graph {
        autoclust_graph::text::parse(src).unwrap()
    }

    fn controls(g: &Graph, name: &str) -> Vec<String> {
        g.node(g.find(name).unwrap()).control_inputs.iter().map(|&c| g.name(c).to_string()).collect()
    }

    #[test]
    fn a_check_that_only_gates_by_control_edges_is_kept() {
        // `tf.debugging.assert_all_finite`: the check's output is unused, its control edge
        // gates the result; removing it would let NaN through (sweep 62).
        let g = parse(
            "x = Placeholder() {dtype = float32, shape = shape[3]}\n\
             chk = CheckNumerics(x) {T = float32, message = \"m\"}\n\
             chk2 = CheckNumericsV2(x) {T = float32, message = \"m\"}\n\
             k = Const(^chk, ^chk2) {dtype = float32, value = float32[]{2.0}}\n\
             y = Mul(x, k) {T = float32}\n",
        );
        let (out, _) = dependency_optimize(&g, &PassContext::default()).unwrap();
        for name in ["chk", "chk2"] {
            let id = out.find(name).unwrap_or_else(|| panic!("{name} was removed"));
            let k = out.node(out.find("k").unwrap());
            assert!(k.control_inputs.contains(&id), "{name} no longer gates k");
        }
    }

    #[test]
    fn relays_are_removed_and_their_order_kept() {
        let g = parse(
            "v = VarHandleOp() {dtype = float32, shape = shape[], shared_name = \"v\"}\n\
             c = Const() {dtype = float32, value = float32[]{1.0}}\n\
             w = AssignVariableOp(v, c) {dtype = float32}\n\
             n = NoOp(^w)\n\
             i = Identity(c, ^n) {T = float32}\n\
             r = ReadVariableOp(v, ^i) {dtype = float32}\n",
        );
        let (out, rep) = dependency_optimize(&g, &PassContext::default()).unwrap();
        assert_eq!(rep.relays, 2);
        assert!(out.find("n").is_none() && out.find("i").is_none());
        // r still waits for w (and c, which w already waits for, is dropped).
        assert_eq!(controls(&out, "r"), ["w"]);
    }

    #[test]
    fn implied_control_edges_are_dropped_and_hubs_kept() {
        let g = parse(
            "v = VarHandleOp() {dtype = float32, shape = shape[], shared_name = \"v\"}\n\
             c = Const() {dtype = float32, value = float32[]{1.0}}\n\
             w1 = AssignVariableOp(v, c) {dtype = float32}\n\
             w2 = AssignVariableOp(v, c, ^w1) {dtype = float32}\n\
             w3 = AssignVariableOp(v, c, ^w1, ^w2) {dtype = float32}\n\
             h = NoOp(^w1, ^w2, ^w3)\n\
             r1 = ReadVariableOp(v, ^h) {dtype = float32}\n\
             r2 = ReadVariableOp(v, ^h) {dtype = float32}\n\
             r3 = ReadVariableOp(v, ^h) {dtype = float32}\n",
        );
        let (out, rep) = dependency_optimize(&g, &PassContext::default()).unwrap();
        // h relays 3 inputs to 3 users: kept (9 > 6); its w1, w2 inputs and w3's w1 are implied.
        assert!(out.find("h").is_some());
        assert_eq!(rep.edges, 3);
        assert_eq!(controls(&out, "w3"), ["w2"]);
        assert_eq!(controls(&out, "h"), ["w3"]);
    }

    #[test]
    fn a_path_through_a_merge_implies_no_order() {
        let g = parse(
            "v = VarHandleOp() {dtype = float32, shape = shape[], shared_name = \"v\"}\n\
             c = Const() {dtype = float32, value = float32[]{1.0}}\n\
             x = Placeholder() {dtype = float32, shape = shape[]}\n\
             w = AssignVariableOp(v, c) {dtype = float32}\n\
             i = Identity(c, ^w) {T = float32}\n\
             m = Merge(x, i) {N = 2, T = float32}\n\
             r = ReadVariableOp(v, ^w, ^m) {dtype = float32}\n",
        );
        let (out, rep) = dependency_optimize(&g, &PassContext::default()).unwrap();
        assert_eq!(rep.edges, 0);
        assert_eq!(controls(&out, "r"), ["w", "m"]);
    }

    #[test]
    fn gated_identities_are_bypassed_keeping_every_gate() {
        let g = parse(
            "v = VarHandleOp() {dtype = float32, shape = shape[], shared_name = \"v\"}\n\
             x = Placeholder() {dtype = float32, shape = shape[]}\n\
             w1 = AssignVariableOp(v, x) {dtype = float32}\n\
             w2 = AssignVariableOp(v, x) {dtype = float32}\n\
             i1 = Identity(x, ^w1) {T = float32}\n\
             i2 = Identity(i1, ^w2) {T = float32}\n\
             e = Exp(i2) {T = float32}\n",
        );
        let (out, rep) = dependency_optimize(&g, &PassContext::default()).unwrap();
        assert_eq!(rep.identities, 2);
        assert!(out.find("i1").is_none() && out.find("i2").is_none());
        let e = out.node(out.find("e").unwrap());
        assert_eq!(e.inputs[0].node, out.find("x").unwrap());
        let mut c = controls(&out, "e");
        c.sort();
        assert_eq!(c, ["w1", "w2"]);
    }
}
