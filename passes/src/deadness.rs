//! Deadness analysis for TensorFlow 1 control flow, after XLA's `DeadnessAnalysis`
//! (`tensorflow/compiler/jit/deadness_analysis.cc`).
//!
//! # What it computes
//! For every node, its **frame** (root, or the loop frame its `Enter`s name, nested as
//! TensorFlow's `BuildControlFlowInfo` nests them) and, for every output, a **predicate**:
//! a boolean formula over symbols that is true exactly when, in one iteration of the
//! node's frame, that output carries a live tensor rather than a dead one. Symbols are
//! * `name:port` — the value of the boolean tensor a `Switch` tests (two `Switch`es on the
//!   same tensor share it, and so do `Switch`es on `Identity`s of it); `Switch` output 1 is
//!   `input ∧ s`, output 0 is `input ∧ ¬s` (`s` is `#true` or `#false` for a constant);
//! * `*name` — "this node is live", for a node whose liveness the rules below cannot
//!   express (a `Merge` with control inputs or an `Enter` input outside a loop, the
//!   `Merge`s and `Exit`s of a loop that is not well formed). Such a symbol is exact by definition, so it never makes two nodes look
//!   alike that are not.
//!
//! A node is live iff all its data and control inputs are (`And`); a `Merge` iff one of its
//! data inputs is (`Or`); `ControlTrigger` always (`#true`); an `Enter` carries its input's
//! predicate into the frame. For a loop frame whose loop-variable (not `is_constant`)
//! `Enter`s all carry one predicate `Q`
//! (XLA's loop handling, in its optimistic form, checked afterwards), every loop `Merge` is
//! `Q` in every iteration, the loop body (after `Switch(merge, LoopCond)`) is `Q ∧ c` for
//! the `LoopCond` symbol `c`, and every `Exit` is `Q` in the parent frame — provided every
//! `NextIteration` feeding a loop `Merge` carries exactly `Q ∧ c` and every `Exit` input
//! exactly `Q ∧ ¬c`, which the analysis checks once the whole graph has predicates; a frame
//! that fails the check gets `*name` symbols for its `Merge`s and `Exit`s instead.
//!
//! Predicates are hash-consed in a [`PredicateFactory`] and kept in a canonical form
//! (flattened, sorted and deduplicated `And`/`Or` operands, `x ∧ ¬x = #false`,
//! `x ∨ ¬x = #true`, absorption, and the common-factor rule
//! `(a ∧ b) ∨ (a ∧ ¬b) = a` that makes a `Merge` of both branches of a cond as live as the
//! cond's input), so equal predicates have equal [`PredId`]s.
//!
//! # Why clustering on it is sound
//! The clusterer only puts nodes of one frame with one predicate in a cluster, and never a
//! control-flow op. A cluster becomes one call node whose inputs are its members' outside
//! inputs; the frame executor runs a node with a dead input as dead as a whole. Every
//! member's predicate `P` is the conjunction of its inputs' predicates, so, by induction
//! along the members' order, `P` is the conjunction of the outside inputs it depends on:
//! the call is live exactly when `P` holds, i.e. when every member would have been live,
//! and dead (with every output dead) exactly when every member would have been dead. A
//! cluster inside a loop frame runs once per iteration, on that iteration's values, as its
//! members would. The analysis only has to be right where it claims equality: predicates
//! it cannot work out get a symbol of their own.

use std::collections::HashMap;
use std::fmt::Write as _;

use autoclust_graph::{Graph, NodeId, Output};

/// A predicate, an index into its [`PredicateFactory`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PredId(u32);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Pred {
    True,
    False,
    /// A symbol (index into the factory's names), positive or negated.
    Sym(u32, bool),
    And(Vec<PredId>),
    Or(Vec<PredId>),
    Not(PredId),
}

/// Hash-consed predicates in canonical form: structurally equal predicates share an id.
#[derive(Clone, Debug, Default)]
pub struct PredicateFactory {
    preds: Vec<Pred>,
    ids: HashMap<Pred, PredId>,
    symbols: Vec<String>,
    symbol_ids: HashMap<String, u32>,
}

impl PredicateFactory {
    pub fn new() -> PredicateFactory {
        PredicateFactory::default()
    }

    fn intern(&mut self, p: Pred) -> PredId {
        if let Some(&id) = self.ids.get(&p) {
            return id;
        }
        let id = PredId(self.preds.len() as u32);
        self.preds.push(p.clone());
        self.ids.insert(p, id);
        id
    }

    pub fn true_(&mut self) -> PredId {
        self.intern(Pred::True)
    }
    pub fn false_(&mut self) -> PredId {
        self.intern(Pred::False)
    }

    /// The positive literal of the symbol `name`.
    pub fn symbol(&mut self, name: &str) -> PredId {
        let s = match self.symbol_ids.get(name) {
            Some(&s) => s,
            None => {
                let s = self.symbols.len() as u32;
                self.symbols.push(name.to_string());
                self.symbol_ids.insert(name.to_string(), s);
                s
            }
        };
        self.intern(Pred::Sym(s, true))
    }

    pub fn not(&mut self, p: PredId) -> PredId {
        match self.preds[p.0 as usize].clone() {
            Pred::True => self.false_(),
            Pred::False => self.true_(),
            Pred::Sym(s, b) => self.intern(Pred::Sym(s, !b)),
            Pred::Not(x) => x,
            _ => self.intern(Pred::Not(p)),
        }
    }

    /// The conjunct list of `p` (itself unless it is an `And`).
    fn conjuncts(&self, p: PredId) -> Vec<PredId> {
        match &self.preds[p.0 as usize] {
            Pred::And(v) => v.clone(),
            Pred::True => Vec::new(),
            _ => vec![p],
        }
    }

    /// Whether `a` and `b` are complementary literals (`x` and `¬x`).
    fn complementary(&self, a: PredId, b: PredId) -> bool {
        match (&self.preds[a.0 as usize], &self.preds[b.0 as usize]) {
            (Pred::Sym(x, p), Pred::Sym(y, q)) => x == y && p != q,
            (Pred::Not(x), _) => *x == b,
            (_, Pred::Not(y)) => *y == a,
            _ => false,
        }
    }

    /// The operands of an And (`conjunction`) or an Or over `ops`: nested ones of the same
    /// kind flattened, the identity (true for And, false for Or) dropped, sorted and
    /// deduplicated; `Err` with the absorbing value (false for And, true for Or) when an
    /// operand is that value or two operands are complementary.
    fn junction_operands(&mut self, ops: &[PredId], conjunction: bool) -> Result<Vec<PredId>, PredId> {
        let absorbing = |this: &mut Self| if conjunction { this.false_() } else { this.true_() };
        let mut v = Vec::new();
        for &o in ops {
            match (&self.preds[o.0 as usize], conjunction) {
                (Pred::False, true) | (Pred::True, false) => return Err(absorbing(self)),
                (Pred::True, true) | (Pred::False, false) => {}
                (Pred::And(inner), true) | (Pred::Or(inner), false) => v.extend(inner.iter().copied()),
                _ => v.push(o),
            }
        }
        v.sort_unstable();
        v.dedup();
        for (i, &a) in v.iter().enumerate() {
            if v[i + 1..].iter().any(|&b| self.complementary(a, b)) {
                return Err(absorbing(self));
            }
        }
        Ok(v)
    }

    pub fn and(&mut self, ops: &[PredId]) -> PredId {
        let v = match self.junction_operands(ops, true) {
            Ok(v) => v,
            Err(absorbing) => return absorbing,
        };
        match v.len() {
            0 => self.true_(),
            1 => v[0],
            _ => self.intern(Pred::And(v)),
        }
    }

    pub fn or(&mut self, ops: &[PredId]) -> PredId {
        let v = match self.junction_operands(ops, false) {
            Ok(v) => v,
            Err(absorbing) => return absorbing,
        };
        // Absorption: `a ∨ (a ∧ b) = a`.
        let sets: Vec<Vec<PredId>> = v.iter().map(|&p| self.conjuncts(p)).collect();
        let keep: Vec<bool> = (0..v.len())
            .map(|i| {
                !(0..v.len()).any(|j| {
                    j != i && sets[j].iter().all(|x| sets[i].contains(x)) && (sets[j].len() < sets[i].len() || j < i)
                })
            })
            .collect();
        let v: Vec<PredId> = v.iter().zip(&keep).filter(|(_, &k)| k).map(|(&p, _)| p).collect();
        let sets: Vec<Vec<PredId>> = sets.into_iter().zip(&keep).filter(|(_, &k)| k).map(|(s, _)| s).collect();
        match v.len() {
            0 => return self.false_(),
            1 => return v[0],
            _ => {}
        }
        // Common factor: `(a ∧ b) ∨ (a ∧ c) = a ∧ (b ∨ c)`.
        let common: Vec<PredId> = sets[0].iter().copied().filter(|x| sets[1..].iter().all(|s| s.contains(x))).collect();
        if !common.is_empty() {
            let rests: Vec<PredId> = sets
                .iter()
                .map(|s| {
                    let rest: Vec<PredId> = s.iter().copied().filter(|x| !common.contains(x)).collect();
                    self.and(&rest)
                })
                .collect();
            let rest = self.or(&rests);
            let mut all = common;
            all.push(rest);
            return self.and(&all);
        }
        self.intern(Pred::Or(v))
    }

    /// XLA's notation: `#true`, `#false`, `name:port`, `~x`, `(a & b)`, `(a | b)`.
    pub fn to_string(&self, p: PredId) -> String {
        let mut s = String::new();
        self.write(p, &mut s);
        s
    }

    fn write(&self, p: PredId, out: &mut String) {
        match &self.preds[p.0 as usize] {
            Pred::True => out.push_str("#true"),
            Pred::False => out.push_str("#false"),
            Pred::Sym(s, b) => {
                if !b {
                    out.push('~');
                }
                out.push_str(&self.symbols[*s as usize]);
            }
            Pred::Not(x) => {
                out.push('~');
                self.write(*x, out);
            }
            Pred::And(v) | Pred::Or(v) => {
                let sep = if matches!(self.preds[p.0 as usize], Pred::And(_)) { " & " } else { " | " };
                out.push('(');
                let mut strs: Vec<String> = v.iter().map(|&x| self.to_string(x)).collect();
                strs.sort();
                let _ = write!(out, "{}", strs.join(sep));
                out.push(')');
            }
        }
    }
}

/// The frame of every node and the predicate of every output (see the module doc).
#[derive(Clone, Debug)]
pub struct DeadnessAnalysis {
    factory: PredicateFactory,
    /// Per node: its frame (0 = root).
    frame: Vec<u32>,
    /// Frame names (index 0 = the root, named "").
    frame_names: Vec<String>,
    /// Per node: the predicate of its non-`Switch` outputs and control edges.
    node_pred: Vec<PredId>,
    /// Per `Switch` node: the symbol of the tensor it tests.
    switch_sym: Vec<Option<PredId>>,
    /// Pairs (Enter, Exit) of each loop frame: a frame runs as one unit, so each of its exits
    /// depends on every one of its enters (what the clusterer's cycle check must know).
    loop_edges: Vec<(NodeId, NodeId)>,
}

/// The tensor an `Identity` chain forwards: a `Switch` on `Identity(p)` tests the value of
/// `p` (TensorFlow's conds switch on `pred_id = Identity(pred)` and on `pred` itself), so both
/// get one symbol. An `Identity` runs in its input's frame and iteration, on the same value.
fn through_identities(graph: &Graph, mut o: Output) -> Output {
    for _ in 0..graph.len() {
        let n = graph.node(o.node);
        match (n.op.as_str(), n.inputs.first()) {
            ("Identity" | "Snapshot", Some(&i)) if n.inputs.len() == 1 => o = i,
            _ => break,
        }
    }
    o
}

/// The value of a scalar boolean `Const` (a `Switch` on it always takes one side: XLA's
/// `ConstantTrueSwitchCondition`).
fn constant_bool(graph: &Graph, o: Output) -> Option<bool> {
    let n = graph.node(o.node);
    if n.op != "Const" || o.port != 0 {
        return None;
    }
    let t = n.attr("value")?.tensor_value()?.ok()?;
    match t.as_bool()? {
        [b] => Some(*b),
        _ => None,
    }
}

/// The `Enter`s whose value reaches only the first iteration of their frame: not
/// `is_constant`, yet used by something other than a `Merge` (TensorFlow builds loop
/// variables as `Enter → Merge` and loop invariants as `is_constant` `Enter`s; a graph that
/// breaks the rule — an edited or hand-made one — has consumers that run in iteration 0 and
/// wait forever in every later one). Their consumers' liveness is then not what the
/// loop's predicates say, so each such `Enter` gets a symbol of its own: nothing after it
/// shares a cluster with nodes that do not wait for it (a cluster waits for all its
/// inputs, and would make those nodes wait forever too).
fn first_iteration_only_enters(graph: &Graph) -> Vec<bool> {
    let mut out = vec![false; graph.len()];
    let mut used_by_other = vec![false; graph.len()];
    for id in graph.node_ids() {
        let node = graph.node(id);
        if is_op(graph, id, MERGE) {
            continue;
        }
        for o in &node.inputs {
            used_by_other[o.node.index()] = true;
        }
        for c in &node.control_inputs {
            used_by_other[c.index()] = true;
        }
    }
    for id in graph.node_ids() {
        if is_op(graph, id, ENTER) {
            let constant = graph.node(id).attr("is_constant").and_then(|v| v.as_bool()).unwrap_or(false);
            out[id.index()] = !constant && used_by_other[id.index()];
        }
    }
    out
}

fn is_op(graph: &Graph, id: NodeId, ops: &[&str]) -> bool {
    ops.contains(&graph.node(id).op.as_str())
}
const SWITCH: &[&str] = &["Switch", "RefSwitch"];
const MERGE: &[&str] = &["Merge", "RefMerge"];
const ENTER: &[&str] = &["Enter", "RefEnter"];
const EXIT: &[&str] = &["Exit", "RefExit"];
const NEXT: &[&str] = &["NextIteration", "RefNextIteration"];

impl DeadnessAnalysis {
    /// Analyses `graph`. A graph without a topological order (over forward edges) gets a
    /// symbol of its own for every node: nothing then looks alike.
    pub fn compute(graph: &Graph) -> DeadnessAnalysis {
        let _span = tracing::debug_span!("deadness", nodes = graph.len()).entered();
        let n = graph.len();
        let mut a = DeadnessAnalysis {
            factory: PredicateFactory::new(),
            frame: vec![0; n],
            frame_names: vec![String::new()],
            node_pred: Vec::new(),
            switch_sym: vec![None; n],
            loop_edges: Vec::new(),
        };
        let Ok(order) = graph.topo_order() else {
            a.node_pred = graph.node_ids().map(|id| a.factory.symbol(&format!("*{}", graph.name(id)))).collect();
            a.frame = (0..n as u32).collect();
            return a;
        };
        if !graph.nodes().iter().any(|n| autoclust_graph::effects::is_v1_control_flow(&n.op)) {
            let t = a.factory.true_();
            a.node_pred = vec![t; n];
            return a;
        }
        a.assign_frames(graph, &order);
        let mut bad = vec![false; a.frame_names.len()];
        loop {
            a.propagate(graph, &order, &bad);
            let newly_bad = a.check_loops(graph, &bad);
            if newly_bad.is_empty() {
                break;
            }
            for f in newly_bad {
                bad[f as usize] = true;
            }
        }
        for f in 1..a.frame_names.len() as u32 {
            let enters: Vec<NodeId> =
                graph.node_ids().filter(|&i| is_op(graph, i, ENTER) && a.frame[i.index()] == f).collect();
            let exits: Vec<NodeId> = graph
                .node_ids()
                .filter(|&i| {
                    is_op(graph, i, EXIT) && graph.node(i).inputs.first().is_some_and(|o| a.frame[o.node.index()] == f)
                })
                .collect();
            for &e in &enters {
                for &x in &exits {
                    a.loop_edges.push((e, x));
                }
            }
        }
        a
    }

    /// Frames as `BuildControlFlowInfo` assigns them: an `Enter` is in the frame it names
    /// (child of its input's frame), an `Exit` in its input's frame's parent, every other
    /// node in its forward inputs' frame (the root without inputs; a frame of its own when
    /// they disagree).
    fn assign_frames(&mut self, graph: &Graph, order: &[NodeId]) {
        let mut index: HashMap<(u32, String), u32> = HashMap::new();
        let mut parent: Vec<u32> = vec![0];
        for &id in order {
            let node = graph.node(id);
            let first = graph.forward_predecessors(id).next();
            let f = if is_op(graph, id, ENTER) {
                let pf = first.map_or(0, |p| self.frame[p.index()]);
                let name = node.attr("frame_name").and_then(|v| v.as_str()).unwrap_or(&node.name).to_string();
                *index.entry((pf, name.clone())).or_insert_with(|| {
                    self.frame_names.push(name);
                    parent.push(pf);
                    (self.frame_names.len() - 1) as u32
                })
            } else if graph
                .forward_predecessors(id)
                .any(|p| self.frame[p.index()] != first.map_or(0, |q| self.frame[q.index()]))
            {
                // Inputs from different frames (TensorFlow rejects such graphs): a frame of
                // its own, so the node never shares a cluster with either side.
                self.frame_names.push(format!("?{}", node.name));
                parent.push(0);
                (self.frame_names.len() - 1) as u32
            } else if is_op(graph, id, EXIT) {
                first.map_or(0, |p| parent[self.frame[p.index()] as usize])
            } else {
                first.map_or(0, |p| self.frame[p.index()])
            };
            self.frame[id.index()] = f;
        }
    }

    /// The predicate of output `o` under the current node predicates.
    pub fn output_pred(&mut self, graph: &Graph, o: Output) -> PredId {
        let p = self.node_pred[o.node.index()];
        match self.switch_sym[o.node.index()] {
            Some(s) if is_op(graph, o.node, SWITCH) => {
                let lit = if o.port == 1 { s } else { self.factory.not(s) };
                self.factory.and(&[p, lit])
            }
            _ => p,
        }
    }

    fn is_loop_merge(graph: &Graph, id: NodeId) -> bool {
        is_op(graph, id, MERGE) && graph.node(id).inputs.iter().any(|o| is_op(graph, o.node, NEXT))
    }

    /// The predicate every loop-variable (not `is_constant`) `Enter` of frame `f` carries, if
    /// they all carry one. Loop invariants (`is_constant` `Enter`s) do not decide when the
    /// loop's merges fire; their own predicates reach their users through `And` as usual.
    fn frame_entry(&mut self, graph: &Graph, f: u32) -> Option<PredId> {
        let mut q = None;
        for id in graph.node_ids() {
            let constant = graph.node(id).attr("is_constant").and_then(|v| v.as_bool()).unwrap_or(false);
            if is_op(graph, id, ENTER) && self.frame[id.index()] == f && !constant {
                let p = match graph.node(id).inputs.first() {
                    Some(&o) => self.output_pred(graph, o),
                    None => self.factory.true_(),
                };
                let p = graph.node(id).control_inputs.iter().fold(p, |acc, &c| {
                    let cp = self.node_pred[c.index()];
                    self.factory.and(&[acc, cp])
                });
                match q {
                    None => q = Some(p),
                    Some(x) if x == p => {}
                    Some(_) => return None,
                }
            }
        }
        q
    }

    /// One pass in topological order; frames in `bad` get `*name` symbols for their loop
    /// `Merge`s and `Exit`s. Loop merges of good frames are their entry predicate `Q`.
    fn propagate(&mut self, graph: &Graph, order: &[NodeId], bad: &[bool]) {
        let n = graph.len();
        let t = self.factory.true_();
        self.node_pred = vec![t; n];
        let mut entry: HashMap<u32, Option<PredId>> = HashMap::new();
        let first_iteration_only = first_iteration_only_enters(graph);
        for &id in order {
            let node = graph.node(id);
            let op = node.op.as_str();
            let own = |a: &mut DeadnessAnalysis| a.factory.symbol(&format!("*{}", node.name));
            let p = if op == "ControlTrigger" {
                t
            } else if first_iteration_only[id.index()] {
                own(self)
            } else if is_op(graph, id, MERGE) {
                if Self::is_loop_merge(graph, id) {
                    let f = self.frame[id.index()];
                    let q = match entry.get(&f) {
                        Some(q) => *q,
                        None => {
                            let q = self.frame_entry(graph, f);
                            entry.insert(f, q);
                            q
                        }
                    };
                    match q {
                        Some(q) if !bad[f as usize] => q,
                        _ => own(self),
                    }
                } else if !node.control_inputs.is_empty() || node.inputs.iter().any(|o| is_op(graph, o.node, ENTER)) {
                    // Control inputs, or a dead `Enter` input (which the executor lets make a
                    // `Merge` dead at once): not a plain `Or`.
                    own(self)
                } else {
                    let ins: Vec<PredId> = node.inputs.iter().map(|&o| self.output_pred(graph, o)).collect();
                    self.factory.or(&ins)
                }
            } else if is_op(graph, id, EXIT) {
                let f = node.inputs.first().map_or(0, |o| self.frame[o.node.index()]);
                let q = match entry.get(&f) {
                    Some(q) => *q,
                    None => {
                        let q = self.frame_entry(graph, f);
                        entry.insert(f, q);
                        q
                    }
                };
                match q {
                    Some(q) if !bad[f as usize] && f != 0 => q,
                    _ => own(self),
                }
            } else {
                let mut ins: Vec<PredId> = node.inputs.iter().map(|&o| self.output_pred(graph, o)).collect();
                ins.extend(node.control_inputs.iter().map(|&c| self.node_pred[c.index()]));
                self.factory.and(&ins)
            };
            self.node_pred[id.index()] = p;
            if is_op(graph, id, SWITCH) {
                self.switch_sym[id.index()] = node.inputs.get(1).map(|&o| {
                    let o = through_identities(graph, o);
                    match constant_bool(graph, o) {
                        Some(true) => self.factory.true_(),
                        Some(false) => self.factory.false_(),
                        None => self.factory.symbol(&format!("{}:{}", graph.name(o.node), o.port)),
                    }
                });
            }
        }
    }

    /// Frames whose loop assumption does not hold: every `NextIteration` into a loop
    /// `Merge` must carry `Q ∧ c` and every `Exit` input `Q ∧ ¬c`, for the frame's one
    /// `LoopCond` symbol `c` and entry predicate `Q`.
    fn check_loops(&mut self, graph: &Graph, bad: &[bool]) -> Vec<u32> {
        let mut out = Vec::new();
        for f in 1..self.frame_names.len() as u32 {
            if bad[f as usize] {
                continue;
            }
            let ok = (|| {
                let q = self.frame_entry(graph, f)?;
                let conds: Vec<NodeId> = graph
                    .node_ids()
                    .filter(|&i| graph.node(i).op == "LoopCond" && self.frame[i.index()] == f)
                    .collect();
                let [c] = conds.as_slice() else { return None };
                let sym = self.factory.symbol(&format!("{}:0", graph.name(*c)));
                let live = self.factory.and(&[q, sym]);
                let nsym = self.factory.not(sym);
                let last = self.factory.and(&[q, nsym]);
                for id in graph.node_ids() {
                    if self.frame[id.index()] != f {
                        continue;
                    }
                    if Self::is_loop_merge(graph, id) {
                        if self.node_pred[id.index()] != q {
                            return None;
                        }
                        for &o in &graph.node(id).inputs {
                            if is_op(graph, o.node, NEXT) && self.output_pred(graph, o) != live {
                                return None;
                            }
                        }
                    }
                }
                for id in graph.node_ids() {
                    if is_op(graph, id, EXIT) {
                        if let Some(&o) = graph.node(id).inputs.first() {
                            if self.frame[o.node.index()] == f
                                && (self.output_pred(graph, o) != last || self.node_pred[id.index()] != q)
                            {
                                return None;
                            }
                        }
                    }
                }
                Some(())
            })()
            .is_some();
            if !ok {
                tracing::debug!(frame = %self.frame_names[f as usize], "deadness: loop frame not well formed");
                out.push(f);
            }
        }
        out
    }

    /// The frame of a node (0 = the root).
    pub fn frame(&self, id: NodeId) -> u32 {
        self.frame[id.index()]
    }

    /// The name of frame `f` (`""` for the root).
    pub fn frame_name(&self, f: u32) -> &str {
        &self.frame_names[f as usize]
    }

    /// The number of frames (the root included).
    pub fn frame_count(&self) -> usize {
        self.frame_names.len()
    }

    /// The parent of every frame (`None` for the root): the frame of the nodes that feed
    /// its `Enter`s.
    pub fn frame_parents(&self, graph: &Graph) -> Vec<Option<u32>> {
        let mut parents = vec![None; self.frame_names.len()];
        for id in graph.node_ids() {
            let f = self.frame[id.index()];
            if f != 0 && parents[f as usize].is_none() && is_op(graph, id, ENTER) {
                if let Some(i) = graph.node(id).inputs.first() {
                    let p = self.frame[i.node.index()];
                    if p != f {
                        parents[f as usize] = Some(p);
                    }
                }
            }
        }
        // A frame whose Enters cannot say (no data input), or whose chain of parents does
        // not reach the root (a malformed graph), hangs off the root: the frames form a tree.
        for f in 1..parents.len() {
            let mut at = f;
            let mut steps = 0;
            while at != 0 && steps <= parents.len() {
                at = parents[at].map_or(0, |p| p as usize);
                steps += 1;
            }
            if at != 0 || parents[f].is_none() {
                parents[f] = Some(0);
            }
        }
        parents
    }

    /// The predicate of a node's non-`Switch` outputs and control edges: when it is live.
    pub fn node_predicate(&self, id: NodeId) -> PredId {
        self.node_pred[id.index()]
    }

    /// A predicate in XLA's notation.
    pub fn describe(&self, p: PredId) -> String {
        self.factory.to_string(p)
    }

    /// Every output's predicate in XLA's notation (`Switch` outputs included).
    pub fn output_predicate_string(&mut self, graph: &Graph, o: Output) -> String {
        let p = self.output_pred(graph, o);
        self.factory.to_string(p)
    }

    /// (Enter, Exit) pairs of each loop frame.
    pub fn loop_edges(&self) -> &[(NodeId, NodeId)] {
        &self.loop_edges
    }

    /// Whether two nodes may share a cluster: same frame, same predicate.
    pub fn same_class(&self, a: NodeId, b: NodeId) -> bool {
        self.frame[a.index()] == self.frame[b.index()] && self.node_pred[a.index()] == self.node_pred[b.index()]
    }

    /// Why two nodes may not share a cluster, if they may not.
    pub fn why_apart(&self, graph: &Graph, a: NodeId, b: NodeId) -> Option<String> {
        let (fa, fb) = (self.frame[a.index()], self.frame[b.index()]);
        let frame = |f: u32| {
            if f == 0 {
                "the root frame".to_string()
            } else {
                format!("frame {}", self.frame_names[f as usize])
            }
        };
        if fa != fb {
            return Some(format!("{} is in {}, {} in {}", graph.name(a), frame(fa), graph.name(b), frame(fb)));
        }
        let (pa, pb) = (self.node_pred[a.index()], self.node_pred[b.index()]);
        (pa != pb).then(|| {
            format!(
                "deadness predicates differ: {} is live on {}, {} on {}",
                graph.name(a),
                self.describe(pa),
                graph.name(b),
                self.describe(pb)
            )
        })
    }
}

/// The node attribute [`DeadnessAnnotatePass`] writes: the node's predicate (for a
/// `Switch`, that of its false output `:0`).
pub const DEADNESS_ATTR: &str = "_deadness";
/// A `Switch`'s true output's predicate.
pub const DEADNESS_TRUE_ATTR: &str = "_deadness_true";
/// The loop frame of a node outside the root frame.
pub const FRAME_ATTR: &str = "_frame";

/// `deadness`: annotates every node with its deadness predicate (and loop frame), what
/// FileCheck cases ported from TensorFlow's `deadness_analysis_test.cc` check.
pub struct DeadnessAnnotatePass;

impl crate::pass::Pass for DeadnessAnnotatePass {
    fn name(&self) -> &'static str {
        "deadness"
    }
    fn description(&self) -> &'static str {
        "annotate every node with its v1 deadness predicate (_deadness, a Switch's true output _deadness_true) \
         and its loop frame (_frame)"
    }
    fn run(&self, mut graph: Graph, _ctx: &crate::pass::PassContext) -> Result<Graph, crate::pass::PassError> {
        let mut d = DeadnessAnalysis::compute(&graph);
        let ids: Vec<NodeId> = graph.node_ids().collect();
        for &id in &ids {
            let p0 = d.output_predicate_string(&graph, Output { node: id, port: 0 });
            let p1 = is_op(&graph, id, SWITCH).then(|| d.output_predicate_string(&graph, Output { node: id, port: 1 }));
            let f = d.frame(id);
            let frame = (f != 0).then(|| d.frame_name(f).to_string());
            let attrs = graph.attrs_mut(id);
            attrs.insert(DEADNESS_ATTR.into(), autoclust_graph::AttrValue::S(p0.into_bytes()));
            if let Some(p1) = p1 {
                attrs.insert(DEADNESS_TRUE_ATTR.into(), autoclust_graph::AttrValue::S(p1.into_bytes()));
            }
            if let Some(frame) = frame {
                attrs.insert(FRAME_ATTR.into(), autoclust_graph::AttrValue::S(frame.into_bytes()));
            }
        }
        Ok(graph)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn analyse(text: &str) -> (Graph, DeadnessAnalysis) {
        let g = autoclust_graph::text::parse(text).unwrap();
        let d = DeadnessAnalysis::compute(&g);
        (g, d)
    }
    fn pred(g: &Graph, d: &mut DeadnessAnalysis, out: &str) -> String {
        let (n, port) = out.split_once(':').map_or((out, 0), |(n, p)| (n, p.parse().unwrap()));
        d.output_predicate_string(g, Output { node: g.find(n).unwrap(), port })
    }
    fn same(g: &Graph, d: &DeadnessAnalysis, a: &str, b: &str) -> bool {
        d.same_class(g.find(a).unwrap(), g.find(b).unwrap())
    }

    #[test]
    fn factory_canonicalises() {
        let mut f = PredicateFactory::new();
        let (a, b, c) = (f.symbol("a"), f.symbol("b"), f.symbol("c"));
        // AndIsCommutative / OrIsCommutative / AndIsAssociative (deadness_analysis_test.cc).
        assert_eq!(f.and(&[a, b]), f.and(&[b, a]));
        assert_eq!(f.or(&[a, b]), f.or(&[b, a]));
        let ab = f.and(&[a, b]);
        let bc = f.and(&[b, c]);
        assert_eq!(f.and(&[ab, c]), f.and(&[a, bc]));
        // x & ~x, x | ~x.
        let na = f.not(a);
        let (and, or) = (f.and(&[a, na]), f.or(&[a, na]));
        assert_eq!((f.to_string(and), f.to_string(or)), ("#false".to_string(), "#true".to_string()));
        // (a & b) | (a & ~b) = a: a Merge of both branches (AndOrDistributiveSimplified).
        let nb = f.not(b);
        let anb = f.and(&[a, nb]);
        assert_eq!(f.or(&[ab, anb]), a);
        // Absorption: a | (a & b) = a.
        assert_eq!(f.or(&[a, ab]), a);
        // (a & b) | (a & c) = a & (b | c).
        let ac = f.and(&[a, c]);
        let or = f.or(&[ab, ac]);
        assert_eq!(f.to_string(or), "((b | c) & a)");
        assert_eq!(f.not(na), a);
    }

    const COND: &str = "x = Placeholder() {dtype = float32, shape = shape[]}
p = Placeholder() {dtype = bool, shape = shape[]}
q = Placeholder() {dtype = bool, shape = shape[]}
sw = Switch(x, p) {T = float32}
t1 = Neg(sw:1) {T = float32}
t2 = Exp(t1) {T = float32}
f1 = Neg(sw) {T = float32}
m = Merge(f1, t2) {N = 2, T = float32}
after = Neg(m) {T = float32}
sw2 = Switch(x, q) {T = float32}
u = AddV2(t1, sw2:1) {T = float32}
k = Const(^t1) {dtype = float32, value = float32[]{1.0}}
";

    #[test]
    fn switch_branches_merge_and_conjunctions() {
        let (g, mut d) = analyse(COND);
        // BasicPositive/BasicNegative: the two outputs of a Switch.
        assert_eq!(pred(&g, &mut d, "sw:1"), "p:0");
        assert_eq!(pred(&g, &mut d, "sw:0"), "~p:0");
        assert_eq!(pred(&g, &mut d, "t2"), "p:0");
        // Merge of both branches: as live as the cond's input.
        assert_eq!(pred(&g, &mut d, "m"), "#true");
        assert_eq!(pred(&g, &mut d, "after"), "#true");
        // And of two switches (AndOfAnd-like): p & q.
        assert_eq!(pred(&g, &mut d, "u"), "(p:0 & q:0)");
        // A control edge carries deadness too (ControlInputs).
        assert_eq!(pred(&g, &mut d, "k"), "p:0");
        assert!(same(&g, &d, "t1", "t2") && same(&g, &d, "t1", "k"));
        assert!(!same(&g, &d, "t1", "f1") && !same(&g, &d, "t1", "u") && !same(&g, &d, "x", "t1"));
        assert!(same(&g, &d, "x", "after"));
    }

    const LOOP: &str = "x = Placeholder() {dtype = float32, shape = shape[]}
n = Placeholder() {dtype = float32, shape = shape[]}
enter = Enter(x) {T = float32, frame_name = \"L\"}
limit = Enter(n) {T = float32, frame_name = \"L\", is_constant = true}
merge = Merge(enter, next) {N = 2, T = float32}
less = Less(merge, limit) {T = float32}
cond = LoopCond(less)
sw = Switch(merge, cond) {T = float32}
ident = Identity(sw:1) {T = float32}
b1 = Exp(ident) {T = float32}
b2 = AddV2(b1, ident) {T = float32}
inv = Neg(limit) {T = float32}
next = NextIteration(b2) {T = float32}
exit = Exit(sw) {T = float32}
after = Neg(exit) {T = float32}
";

    #[test]
    fn a_well_formed_loop_has_control_equivalent_bodies() {
        let (g, mut d) = analyse(LOOP);
        // Loop: the merges carry the entry predicate, the body the LoopCond symbol
        // (ControlEquivalentLoopBodies), the exits the entry predicate again.
        assert_eq!(pred(&g, &mut d, "merge"), "#true");
        assert_eq!(pred(&g, &mut d, "b2"), "cond:0");
        assert_eq!(pred(&g, &mut d, "exit"), "#true");
        assert!(same(&g, &d, "b1", "b2") && same(&g, &d, "ident", "b2"));
        assert!(!same(&g, &d, "b1", "inv"), "loop-invariant vs body");
        assert!(!same(&g, &d, "b1", "after") && !same(&g, &d, "x", "less"), "different frames");
        assert!(same(&g, &d, "x", "after"));
        let edges: Vec<(&str, &str)> = d.loop_edges().iter().map(|&(a, b)| (g.name(a), g.name(b))).collect();
        assert_eq!(edges, [("enter", "exit"), ("limit", "exit")]);
    }

    #[test]
    fn a_loop_entered_under_different_predicates_gets_symbols_of_its_own() {
        let text = LOOP
            .replace("limit = Enter(n)", "sw0 = Switch(n, p)\nlimit = Enter(sw0:1)")
            .replace("x = Placeholder()", "p = Placeholder() {dtype = bool, shape = shape[]}\nx = Placeholder()");
        let text = text.replace("sw0 = Switch(n, p)", "sw0 = Switch(n, p) {T = float32}");
        let (g, mut d) = analyse(&text);
        assert_eq!(pred(&g, &mut d, "merge"), "*merge");
        assert_eq!(pred(&g, &mut d, "exit"), "*exit");
        assert!(same(&g, &d, "b1", "b2"), "one body still shares a predicate");
    }

    #[test]
    fn a_node_mixing_frames_is_alone_in_its_frame() {
        let text = format!("{LOOP}bad = AddV2(b1, x) {{T = float32}}\nbad2 = Neg(bad) {{T = float32}}\n");
        let (g, d) = analyse(&text);
        assert!(!same(&g, &d, "bad", "b1") && !same(&g, &d, "bad", "x"));
        assert!(same(&g, &d, "bad", "bad2"), "what only it feeds shares its frame");
    }

    #[test]
    fn a_control_flow_node_inference_rejects_is_no_shortfall() {
        // `pred` must be a scalar: inference rejects the Switch, which never clusters anyway.
        let g = autoclust_graph::text::parse(
            "x = Placeholder() {dtype = float32, shape = shape[2]}
p = Placeholder() {dtype = bool, shape = shape[2]}
sw = Switch(x, p) {T = float32}
a = Neg(sw:1) {T = float32}
b = Exp(a) {T = float32}
",
        )
        .unwrap();
        let c = crate::cluster::Clusterer::default().run_partial(&g).unwrap();
        let sw = g.find("sw").unwrap();
        assert!(!c.explanations.iter().any(|r| matches!(r,
            crate::cluster::Refusal::NotCompilable { node, reason } if *node == sw && reason.is_shortfall())));
        let (a, b) = (g.find("a").unwrap(), g.find("b").unwrap());
        assert!(c.cluster_of(a).is_some() && c.cluster_of(a) == c.cluster_of(b));
    }

    #[test]
    fn a_graph_without_control_flow_is_all_true() {
        let (g, mut d) = analyse("x = Placeholder() {dtype = float32, shape = shape[]}\ny = Neg(x) {T = float32}\n");
        assert_eq!(pred(&g, &mut d, "y"), "#true");
        assert!(same(&g, &d, "x", "y"));
    }
}
