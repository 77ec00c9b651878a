//! Resource-operation safety analysis (TensorFlow's
//! `resource_operation_safety_analysis.cc`; seed 001; docs/contract.md §4 `analyze`).
//!
//! A cluster runs as: one atomic snapshot of every variable it reads, a pure
//! function, one atomic write-back of every variable it writes. So inside a
//! cluster every read happens before every write, all reads at once and all
//! writes at once. An ordering `a ⇝ b` between two resource ops of one cluster
//! survives clustering iff `a` only reads (reads come first) or `b` only
//! writes (writes come last). Every other ordering — something that writes
//! (write or modify) followed by something that reads (read or modify) — would
//! be lost, so the pair `(a, b)` is *incompatible*: the two ops must never
//! share a cluster. Whatever the variables: the analysis does not know which
//! handles alias.
//!
//! Definition: `(from, to)` is incompatible iff `from ≠ to`, there is a path
//! `from →⁺ to` over data and control edges through any nodes, `from` writes
//! and `to` reads. Edges from `NextIteration` to `Merge` (loop back edges)
//! are dropped, as TensorFlow does; that is sound only because `Merge`,
//! `NextIteration` and the ops inside a v1 loop are never clustered across
//! iterations (see `compilable`).
//!
//! Algorithm: walk a topological order; each node's set holds the *writers*
//! (write/modify ops, densely indexed in topological order) that reach it.
//! A node's set is the union of its predecessors' sets; a reader records its
//! set before adding itself (hence `from ≠ to`); a writer then adds itself.
//! Reads never enter a set (they can never be the `from` of a pair). Sets are
//! [`WriterSet`]s over writer indices (bitsets whose leading run of ones is one
//! number), shared (`Rc`) along chains, and freed as soon as the last consumer
//! of a node has been visited, so memory is at most the width of the graph
//! times `writers/8` bytes, never N×N. Each reader keeps its
//! incoming set, which answers [`SafetyAnalysis::is_incompatible`] in O(1).

use std::rc::Rc;

#[cfg(test)]
use autoclust_graph::effects::resource_kind;
pub use autoclust_graph::effects::CallEffects;
use autoclust_graph::{CycleError, Graph, NodeId, ResourceKind};
pub use writer_set::WriterSet;

mod writer_set;

/// The result of the analysis.
#[derive(Clone, Debug)]
pub struct SafetyAnalysis {
    /// Resource kind of every node (`None`: not a resource op).
    kinds: Vec<Option<ResourceKind>>,
    /// Dense index of every writer (write or modify), in topological order.
    writer_index: Vec<Option<u32>>,
    /// Writer index → node.
    writers: Vec<NodeId>,
    /// For every reader (read or modify): the writers that reach it.
    reached_by: Vec<Option<Rc<WriterSet>>>,
    /// The topological order used (back edges dropped).
    order: Vec<NodeId>,
}

/// Successors of every node over data and control edges, loop back edges dropped (the
/// graph crate's one rule, [`Graph::forward_predecessors`]), deduplicated, in consumer-id
/// order.
pub fn forward_edges(graph: &Graph) -> Vec<Vec<NodeId>> {
    let mut succ = vec![Vec::new(); graph.len()];
    for dst in graph.node_ids() {
        for src in graph.forward_predecessors(dst) {
            succ[src.index()].push(dst);
        }
    }
    for s in &mut succ {
        s.sort_unstable();
        s.dedup();
    }
    succ
}

impl SafetyAnalysis {
    /// Runs the analysis, a call's effects its functions' ([`CallEffects::Interprocedural`]).
    /// Fails only if the graph (without back edges) has a cycle.
    pub fn compute(graph: &Graph) -> Result<SafetyAnalysis, CycleError> {
        SafetyAnalysis::compute_with(graph, CallEffects::Interprocedural)
    }

    /// Runs the analysis with calls counted as `calls` says.
    pub fn compute_with(graph: &Graph, calls: CallEffects) -> Result<SafetyAnalysis, CycleError> {
        SafetyAnalysis::compute_inner(graph, calls, false)
    }

    /// The analysis the clusterer uses: [`SafetyAnalysis::compute_with`], with every guard
    /// (`Assert`, `crate::encapsulate::is_guard`) counted as a reader. Encapsulation runs a
    /// guard at its cluster's exit, before the write-back, so a write reaching it must not
    /// share its cluster (it would be published only after the check, which the graph orders
    /// after the write) — a write→read pair. Not the contract's `analyze`: an `Assert`
    /// touches no variable.
    pub fn for_clustering(graph: &Graph, calls: CallEffects) -> Result<SafetyAnalysis, CycleError> {
        SafetyAnalysis::compute_inner(graph, calls, true)
    }

    fn compute_inner(graph: &Graph, calls: CallEffects, guards_read: bool) -> Result<SafetyAnalysis, CycleError> {
        let _span = tracing::debug_span!("safety_analysis", nodes = graph.len()).entered();
        let order = graph.topo_order()?;
        let n = graph.len();
        let kinds: Vec<Option<ResourceKind>> = graph
            .nodes()
            .iter()
            .map(|node| {
                if guards_read && crate::encapsulate::is_guard(&node.op) {
                    return Some(ResourceKind::Read);
                }
                autoclust_graph::effects::resource_kind_with(node, &graph.library, calls)
            })
            .collect();

        let mut writer_index = vec![None; n];
        let mut writers = Vec::new();
        for &id in &order {
            if kinds[id.index()].is_some_and(ResourceKind::writes) {
                writer_index[id.index()] = Some(writers.len() as u32);
                writers.push(id);
            }
        }

        // Remaining consumers of each node; its set is dropped at zero.
        let succ = forward_edges(graph);
        let mut remaining: Vec<u32> = succ.iter().map(|s| s.len() as u32).collect();
        let mut preds: Vec<Vec<NodeId>> = vec![Vec::new(); n];
        for (src, s) in succ.iter().enumerate() {
            for d in s {
                preds[d.index()].push(NodeId(src as u32));
            }
        }

        let mut live: Vec<Option<Rc<WriterSet>>> = vec![None; n];
        let mut reached_by: Vec<Option<Rc<WriterSet>>> = vec![None; n];
        for &id in &order {
            let i = id.index();
            // Union of the predecessors' sets, sharing when only one is non-empty.
            let mut acc: Option<Rc<WriterSet>> = None;
            let mut owned = false;
            for p in &preds[i] {
                if let Some(ps) = &live[p.index()] {
                    match &mut acc {
                        None => acc = Some(Rc::clone(ps)),
                        Some(a) if Rc::ptr_eq(a, ps) => {}
                        Some(a) => {
                            if !owned {
                                *a = Rc::new((**a).clone());
                                owned = true;
                            }
                            let m = Rc::get_mut(a).expect("freshly copied set is unique");
                            m.union_with(ps);
                        }
                    }
                }
            }
            for p in &preds[i] {
                let r = &mut remaining[p.index()];
                *r -= 1;
                if *r == 0 {
                    live[p.index()] = None;
                }
            }
            let kind = kinds[i];
            if kind.is_some_and(ResourceKind::reads) {
                reached_by[i] = acc.clone();
            }
            if let Some(w) = writer_index[i] {
                let mut set = match acc {
                    Some(a) => Rc::try_unwrap(a).unwrap_or_else(|rc| (*rc).clone()),
                    None => WriterSet::new(),
                };
                set.insert(w as usize);
                acc = Some(Rc::new(set));
            }
            if remaining[i] > 0 {
                live[i] = acc;
            }
        }
        Ok(SafetyAnalysis { kinds, writer_index, writers, reached_by, order })
    }

    /// The resource kind of a node, if it is a resource op.
    pub fn kind(&self, id: NodeId) -> Option<ResourceKind> {
        self.kinds.get(id.index()).copied().flatten()
    }

    /// Every resource op, by node id.
    pub fn resource_ops(&self) -> impl Iterator<Item = (NodeId, ResourceKind)> + '_ {
        self.kinds.iter().enumerate().filter_map(|(i, k)| k.map(|k| (NodeId(i as u32), k)))
    }

    /// Whether `(from, to)` is an incompatible pair (ordered: `from` reaches `to`).
    pub fn is_incompatible(&self, from: NodeId, to: NodeId) -> bool {
        match (self.writer_index.get(from.index()).copied().flatten(), self.reached_by.get(to.index())) {
            (Some(w), Some(Some(set))) => set.contains(w as usize),
            _ => false,
        }
    }

    /// Every incompatible pair, sorted by `(from, to)` node id.
    pub fn pairs(&self) -> Vec<(NodeId, NodeId)> {
        let mut out = Vec::new();
        for (to, set) in self.reached_by.iter().enumerate() {
            if let Some(set) = set {
                out.extend(set.ones().map(|w| (self.writers[w], NodeId(to as u32))));
            }
        }
        out.sort_unstable();
        out
    }

    /// Number of writers (the size of the writer index space).
    pub fn writer_count(&self) -> usize {
        self.writers.len()
    }

    /// The dense writer index of a write/modify op.
    pub fn writer_index(&self, id: NodeId) -> Option<usize> {
        self.writer_index.get(id.index()).copied().flatten().map(|w| w as usize)
    }

    /// The writer with a dense index.
    pub fn writer(&self, index: usize) -> NodeId {
        self.writers[index]
    }

    /// For a reader (read or modify): the dense indices of the writers reaching it.
    pub fn reaching_writers(&self, id: NodeId) -> Option<&WriterSet> {
        self.reached_by.get(id.index()).and_then(|s| s.as_deref())
    }

    /// [`SafetyAnalysis::reaching_writers`] as the shared set itself (readers reached by the
    /// same writers share one), for a caller that keeps it without copying.
    pub fn reaching_writers_shared(&self, id: NodeId) -> Option<Rc<WriterSet>> {
        self.reached_by.get(id.index()).and_then(Clone::clone)
    }

    /// The topological order the analysis used (back edges dropped).
    pub fn order(&self) -> &[NodeId] {
        &self.order
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoclust_graph::{AttrValue, Attrs, DType, FuncAttr, FunctionDef, Library, RawNode, Signature};

    /// Builds the §5.1 test graphs of the TF reference.
    #[derive(Default)]
    struct Builder {
        nodes: Vec<RawNode>,
        library: Library,
    }

    impl Builder {
        fn node(&mut self, name: &str, op: &str, inputs: &[&str]) -> &mut Builder {
            self.nodes.push(RawNode {
                name: name.into(),
                op: op.into(),
                inputs: inputs.iter().map(|s| s.to_string()).collect(),
                attrs: Attrs::new(),
                device: String::new(),
                span: None,
            });
            self
        }
        fn read(&mut self, id: &str) -> String {
            self.node(&format!("Var{id}"), "VarHandleOp", &[]);
            self.node(&format!("Read{id}"), "ReadVariableOp", &[&format!("Var{id}")]);
            format!("Read{id}")
        }
        fn write(&mut self, id: &str) -> String {
            self.node(&format!("Var{id}"), "VarHandleOp", &[]);
            self.node(&format!("ValueToAssign{id}"), "Const", &[]);
            self.node(
                &format!("Assignee{id}"),
                "AssignVariableOp",
                &[&format!("Var{id}"), &format!("ValueToAssign{id}")],
            );
            format!("Assignee{id}")
        }
        fn modify(&mut self, id: &str) -> String {
            self.node(&format!("Var{id}"), "VarHandleOp", &[]);
            self.node(&format!("Increment{id}"), "Const", &[]);
            self.node(
                &format!("Increment{id}_1"),
                "AssignAddVariableOp",
                &[&format!("Var{id}"), &format!("Increment{id}")],
            );
            format!("Increment{id}_1")
        }
        fn neutral(&mut self, id: &str) -> String {
            self.node(&format!("Const{id}"), "Const", &[]);
            format!("Const{id}")
        }
        /// `Const_func`, a function that reads a variable (so a call of it is a modify; a
        /// call of a function touching no variable is no resource op: `t21`).
        fn library(&mut self) {
            self.pure_library();
            let f = &mut self.library.functions_mut()[0];
            f.nodes.push(RawNode {
                name: "inner".into(),
                op: "ReadVariableOp".into(),
                inputs: vec![],
                attrs: Attrs::new(),
                device: String::new(),
                span: None,
            });
        }
        /// `Const_func` with an empty body (TensorFlow's test's constant function).
        fn pure_library(&mut self) {
            self.library.functions_mut().push(FunctionDef {
                signature: Signature { name: "Const_func".into(), ..Default::default() },
                ..Default::default()
            });
        }
        fn call(&mut self, name: &str) -> String {
            self.node(name, "Const_func", &[]);
            name.into()
        }
        fn symgrad(&mut self) -> String {
            self.node("Const", "Const", &[]);
            self.node("SymbolicGradient", "SymbolicGradient", &["Const"]);
            let f = AttrValue::Func(FuncAttr { name: "Const_func".into(), attrs: Default::default() });
            let last = self.nodes.last_mut().unwrap();
            last.attrs.insert("f".into(), f);
            last.attrs.insert("Tout".into(), AttrValue::List(autoclust_graph::ListValue::Type(vec![DType::Float32])));
            "SymbolicGradient".into()
        }
        fn ctrl(&mut self, from: &str, to: &str) {
            let n = self.nodes.iter_mut().find(|n| n.name == to).unwrap();
            n.inputs.push(format!("^{from}"));
        }
        fn pairs(&self) -> Vec<(String, String)> {
            let g = Graph::from_raw(self.nodes.clone(), self.library.clone(), None).unwrap();
            let a = SafetyAnalysis::compute(&g).unwrap();
            let pairs = a.pairs();
            for &(f, t) in &pairs {
                assert!(a.is_incompatible(f, t));
                assert!(!a.is_incompatible(t, f));
            }
            assert_eq!(pairs, brute_force(&g), "bitset analysis disagrees with brute force");
            pairs.into_iter().map(|(f, t)| (g.name(f).to_string(), g.name(t).to_string())).collect()
        }
    }

    /// The definition, checked by DFS from every writer.
    pub(crate) fn brute_force(g: &Graph) -> Vec<(NodeId, NodeId)> {
        let succ = forward_edges(g);
        let mut out = Vec::new();
        for from in g.node_ids() {
            if !resource_kind(g.node(from), &g.library).is_some_and(ResourceKind::writes) {
                continue;
            }
            let mut seen = vec![false; g.len()];
            let mut stack: Vec<NodeId> = succ[from.index()].clone();
            while let Some(n) = stack.pop() {
                if std::mem::replace(&mut seen[n.index()], true) {
                    continue;
                }
                stack.extend(succ[n.index()].iter().copied());
            }
            for to in g.node_ids() {
                if seen[to.index()]
                    && to != from
                    && resource_kind(g.node(to), &g.library).is_some_and(ResourceKind::reads)
                {
                    out.push((from, to));
                }
            }
        }
        out.sort_unstable();
        out
    }

    fn p(a: &str, b: &str) -> (String, String) {
        (a.into(), b.into())
    }

    /// A guard (`Assert`) reached by a write is a write→read pair for the clusterer, which
    /// runs the guard before the cluster's write-back, and nothing for the contract's analysis.
    #[test]
    fn guards_read_for_the_clusterer_only() {
        let mut b = Builder::default();
        let w = b.write("0");
        b.node("ok", "Const", &[]);
        b.node("check", "Assert", &["ok"]);
        b.ctrl(&w, "check");
        b.node("early", "Assert", &["ok"]);
        b.ctrl("early", &w);
        let g = Graph::from_raw(b.nodes.clone(), b.library.clone(), None).unwrap();
        let id = |n: &str| g.find(n).unwrap();
        let clustering = SafetyAnalysis::for_clustering(&g, CallEffects::Interprocedural).unwrap();
        assert_eq!(clustering.pairs(), vec![(id(&w), id("check"))]);
        assert_eq!(clustering.kind(id("check")), Some(ResourceKind::Read));
        let contract = SafetyAnalysis::compute(&g).unwrap();
        assert!(contract.pairs().is_empty());
        assert_eq!(contract.kind(id("check")), None);
    }

    #[test]
    fn t01_write_read() {
        let mut b = Builder::default();
        let r = b.read("R");
        let w = b.write("W");
        b.ctrl(&w, &r);
        assert_eq!(b.pairs(), [p("AssigneeW", "ReadR")]);
    }
    #[test]
    fn t02_read_write() {
        let mut b = Builder::default();
        let r = b.read("R");
        let w = b.write("W");
        b.ctrl(&r, &w);
        assert_eq!(b.pairs(), []);
    }
    #[test]
    fn t03_read_write_no_edges() {
        let mut b = Builder::default();
        b.read("R");
        b.write("W");
        assert_eq!(b.pairs(), []);
    }
    #[test]
    fn t04_read_modify() {
        let mut b = Builder::default();
        let r = b.read("R");
        let m = b.modify("M");
        b.ctrl(&r, &m);
        assert_eq!(b.pairs(), []);
    }
    #[test]
    fn t05_modify_read() {
        let mut b = Builder::default();
        let r = b.read("R");
        let m = b.modify("M");
        b.ctrl(&m, &r);
        assert_eq!(b.pairs(), [p("IncrementM_1", "ReadR")]);
    }
    #[test]
    fn t06_modify_write() {
        let mut b = Builder::default();
        let m = b.modify("M");
        let w = b.write("W");
        b.ctrl(&m, &w);
        assert_eq!(b.pairs(), []);
    }
    #[test]
    fn t07_write_modify() {
        let mut b = Builder::default();
        let m = b.modify("M");
        let w = b.write("W");
        b.ctrl(&w, &m);
        assert_eq!(b.pairs(), [p("AssigneeW", "IncrementM_1")]);
    }
    #[test]
    fn t08_read_modify_write() {
        let mut b = Builder::default();
        let r = b.read("R");
        let m = b.modify("M");
        let w = b.write("W");
        b.ctrl(&r, &m);
        b.ctrl(&m, &w);
        assert_eq!(b.pairs(), []);
    }
    #[test]
    fn t09_write_modify_read() {
        let mut b = Builder::default();
        let r = b.read("R");
        let m = b.modify("M");
        let w = b.write("W");
        b.ctrl(&w, &m);
        b.ctrl(&m, &r);
        assert_eq!(b.pairs(), [p("IncrementM_1", "ReadR"), p("AssigneeW", "ReadR"), p("AssigneeW", "IncrementM_1")]);
    }
    #[test]
    fn t10_write_read_modify() {
        let mut b = Builder::default();
        let r = b.read("R");
        b.modify("M");
        let w = b.write("W");
        b.ctrl(&w, &r);
        b.ctrl(&r, "IncrementM_1");
        assert_eq!(b.pairs(), [p("AssigneeW", "ReadR"), p("AssigneeW", "IncrementM_1")]);
    }
    #[test]
    fn t11_call_read() {
        let mut b = Builder::default();
        b.library();
        let r = b.read("R");
        let c = b.call("C");
        b.ctrl(&c, &r);
        assert_eq!(b.pairs(), [p("C", "ReadR")]);
    }
    #[test]
    fn t12_read_call() {
        let mut b = Builder::default();
        b.library();
        let r = b.read("R");
        let c = b.call("C");
        b.ctrl(&r, &c);
        assert_eq!(b.pairs(), []);
    }
    #[test]
    fn t13_call_write() {
        let mut b = Builder::default();
        b.library();
        let w = b.write("W");
        let c = b.call("C");
        b.ctrl(&c, &w);
        assert_eq!(b.pairs(), []);
    }
    #[test]
    fn t14_write_call() {
        let mut b = Builder::default();
        b.library();
        let w = b.write("W");
        let c = b.call("C");
        b.ctrl(&w, &c);
        assert_eq!(b.pairs(), [p("AssigneeW", "C")]);
    }
    #[test]
    fn t21_call_of_pure_function() {
        let mut b = Builder::default();
        b.pure_library();
        let w = b.write("W");
        let r = b.read("R");
        let c = b.call("C");
        b.ctrl(&w, &c);
        b.ctrl(&c, &r);
        assert_eq!(b.pairs(), [p("AssigneeW", "ReadR")]);
        // The same body under SymbolicGradient (which runs a gradient of it) stays a modify.
        let sg = b.symgrad();
        b.ctrl(&sg, &r);
        assert!(b.pairs().contains(&p("SymbolicGradient", "ReadR")));
    }
    #[test]
    fn t15_symbolic_gradient_read() {
        let mut b = Builder::default();
        b.library();
        let r = b.read("R");
        let sg = b.symgrad();
        b.ctrl(&sg, &r);
        assert_eq!(b.pairs(), [p("SymbolicGradient", "ReadR")]);
    }
    #[test]
    fn t16_write_symbolic_gradient() {
        let mut b = Builder::default();
        b.library();
        let w = b.write("W");
        let sg = b.symgrad();
        b.ctrl(&w, &sg);
        assert_eq!(b.pairs(), [p("AssigneeW", "SymbolicGradient")]);
    }
    #[test]
    fn t17_chain_of_ops() {
        let mut b = Builder::default();
        let w0 = b.write("W0");
        let n0 = b.neutral("N0");
        let r0 = b.read("R0");
        let w1 = b.write("W1");
        let n1 = b.neutral("N1");
        let r1 = b.read("R1");
        b.ctrl(&w0, &n0);
        b.ctrl(&n0, &r0);
        b.ctrl(&r0, &w1);
        b.ctrl(&w1, &n1);
        b.ctrl(&n1, &r1);
        assert_eq!(b.pairs(), [p("AssigneeW0", "ReadR0"), p("AssigneeW0", "ReadR1"), p("AssigneeW1", "ReadR1")]);
    }
    fn dag(repeated: bool) -> Vec<(String, String)> {
        let mut b = Builder::default();
        let w0 = b.write("W0");
        let w1 = b.write("W1");
        let n = b.neutral("N");
        let r0 = b.read("R0");
        let r1 = b.read("R1");
        b.ctrl(&w0, &n);
        b.ctrl(&w1, &n);
        b.ctrl(&n, &r0);
        b.ctrl(&n, &r1);
        if repeated {
            b.ctrl(&w1, &r1);
        }
        b.pairs()
    }
    #[test]
    fn t18_dag_of_ops() {
        let want = [
            p("AssigneeW0", "ReadR0"),
            p("AssigneeW0", "ReadR1"),
            p("AssigneeW1", "ReadR0"),
            p("AssigneeW1", "ReadR1"),
        ];
        assert_eq!(dag(false), want);
    }
    #[test]
    fn t19_dag_of_ops_with_repeated_paths() {
        let want = [
            p("AssigneeW0", "ReadR0"),
            p("AssigneeW0", "ReadR1"),
            p("AssigneeW1", "ReadR0"),
            p("AssigneeW1", "ReadR1"),
        ];
        assert_eq!(dag(true), want);
    }
    #[test]
    fn t20_loop() {
        let mut b = Builder::default();
        b.node("init", "Placeholder", &[]);
        b.node("init_1", "Placeholder", &[]);
        b.node("enter", "Enter", &["init"]);
        b.node("iv", "Merge", &["enter", "next_iteration"]);
        b.node("latch", "Switch", &["iv", "init_1"]);
        b.node("exit", "Exit", &["iv"]);
        b.node("next_iteration", "NextIteration", &["latch:1"]);
        let w = b.write("W");
        let r = b.read("R");
        b.ctrl("iv", &w);
        b.ctrl(&w, &r);
        b.ctrl(&r, "next_iteration");
        assert_eq!(b.pairs(), [p("AssigneeW", "ReadR")]);
    }

    /// Seed 001's worked example: r0 = Read(v0); Assign(v0, 42); r1 = Read(v0);
    /// r2 = r1 + 1; Assign(v0, r2); Assign(v1, r0), ordered by control edges
    /// in that serial order. Every write before a later read is a pair.
    #[test]
    fn seed_001_serial_order() {
        let mut b = Builder::default();
        b.node("v0", "VarHandleOp", &[]).node("v1", "VarHandleOp", &[]);
        b.node("r0", "ReadVariableOp", &["v0"]);
        b.node("c42", "Const", &[]);
        b.node("a0", "AssignVariableOp", &["v0", "c42", "^r0"]);
        b.node("r1", "ReadVariableOp", &["v0", "^a0"]);
        b.node("one", "Const", &[]);
        b.node("r2", "AddV2", &["r1", "one"]);
        b.node("a1", "AssignVariableOp", &["v0", "r2"]);
        b.node("a2", "AssignVariableOp", &["v1", "r0", "^a1"]);
        assert_eq!(b.pairs(), [p("a0", "r1")]);
    }

    /// Seed 001's problem graph: Assign(v0, 7) → Assign(v1, 8) → … and
    /// Assign(v0, 6) → r0 = Read(v1): the write of v0 reaches the read of v1,
    /// so they are incompatible though they touch different variables.
    #[test]
    fn seed_001_cross_variable_pair() {
        let mut b = Builder::default();
        b.node("v0", "VarHandleOp", &[]).node("v1", "VarHandleOp", &[]);
        b.node("c6", "Const", &[]).node("c7", "Const", &[]).node("c8", "Const", &[]);
        b.node("w7", "AssignVariableOp", &["v0", "c7"]);
        b.node("w8", "AssignVariableOp", &["v1", "c8", "^w7"]);
        b.node("w6", "AssignVariableOp", &["v0", "c6"]);
        b.node("r0", "ReadVariableOp", &["v1", "^w6"]);
        assert_eq!(b.pairs(), [p("w6", "r0")]);
    }

    /// Seed 000's simplest example: *X = 1 → *Y = 2 and r0 = *Y → r1 = *X.
    #[test]
    fn seed_000_store_store_load_load() {
        let mut b = Builder::default();
        b.node("x", "VarHandleOp", &[]).node("y", "VarHandleOp", &[]);
        b.node("one", "Const", &[]).node("two", "Const", &[]);
        b.node("wx", "AssignVariableOp", &["x", "one"]);
        b.node("wy", "AssignVariableOp", &["y", "two", "^wx"]);
        b.node("r0", "ReadVariableOp", &["y"]);
        b.node("r1", "ReadVariableOp", &["x", "^r0"]);
        assert_eq!(b.pairs(), []);
        // Load/store reordering: *X = 1 → r0 = *Y is a pair.
        b.node("r2", "ReadVariableOp", &["y", "^wx"]);
        assert_eq!(b.pairs(), [p("wx", "r2")]);
    }

    #[test]
    fn cycle_is_an_error() {
        let mut b = Builder::default();
        b.node("a", "NoOp", &["^c"]).node("b", "NoOp", &["^a"]).node("c", "NoOp", &["^b"]);
        let g = Graph::from_raw(b.nodes.clone(), Library::default(), None).unwrap();
        let e = SafetyAnalysis::compute(&g).unwrap_err();
        assert_eq!(e.nodes, ["a", "b", "c", "a"]);
    }
}
