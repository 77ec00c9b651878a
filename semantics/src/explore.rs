//! Enumerating a program's outcomes: every order of its steps consistent with
//! their dependencies, reduced to the orders that can differ.
//!
//! A *state* is the set of steps done, the variables' values, and the values
//! still needed later (read results some undone step or a fetch consumes,
//! the old value a split read-modify-write holds between its halves, a
//! cluster's pending write-back). Pure values are functions of these, so
//! two paths reaching equal states have equal futures: the search memoises
//! states by a 128-bit fingerprint and explores each once.
//!
//! Partial-order reduction: when an enabled step conflicts (same variable,
//! one of the two writes) with no undone step other than its own successors,
//! it commutes with everything that could run before it, so running it
//! first loses no outcome (the "ample set" of size one of Peled's and
//! Godefroid's partial-order methods; the swap argument: moving it ahead of
//! independent steps changes no value read or written). Only otherwise are
//! all enabled steps tried. Together these keep graphs with tens of accesses
//! to a few variables at thousands of states.

use std::cell::RefCell;
use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::rc::Rc;

use autoclust_graph::{DType, NodeId, Output, Tensor, TensorData, TensorList};
use fixedbitset::FixedBitSet;

use crate::eval::{synthetic, PureEval};
use crate::model::{Access, AccessOp, Program, StepId, StepKind, VarId, VarKind};
use crate::SemanticsError;

/// Values for placeholders and initial variable values, by name (docs/contract.md §3).
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// Placeholder node name → value.
    pub feeds: HashMap<String, Tensor>,
    /// Variable name (shared_name, or handle node name) → initial value.
    pub vars: HashMap<String, Tensor>,
}

/// Limits and strategy of a search.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Stop with [`SemanticsError::StateBound`] after this many states.
    pub max_states: usize,
    /// Memoise states and apply partial-order reduction (the default). Off,
    /// every interleaving of the steps is enumerated: the reference the
    /// reduced search is tested against.
    pub reduce: bool,
    /// Iterations each TensorFlow 1 loop is unrolled to ([`crate::unroll`]); a loop that
    /// would go on past them is an error ([`SemanticsError::LoopBound`]).
    pub max_iterations: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_states: 1_000_000, reduce: true, max_iterations: crate::unroll::DEFAULT_MAX_ITERATIONS }
    }
}

/// One outcome: the fetched values and the final variable values.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// `node:port` → value, sorted by name.
    pub fetches: Vec<(String, Tensor)>,
    /// Variable name → final value, sorted by name; uninitialised variables are absent.
    pub variables: Vec<(String, Tensor)>,
}

impl PartialEq for Outcome {
    fn eq(&self, other: &Outcome) -> bool {
        let same = |a: &[(String, Tensor)], b: &[(String, Tensor)]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.0 == y.0 && x.1.bit_eq(&y.1))
        };
        same(&self.fetches, &other.fetches) && same(&self.variables, &other.variables)
    }
}

impl Outcome {
    /// The deterministic order outcomes are listed in.
    pub fn cmp_canonical(&self, other: &Outcome) -> std::cmp::Ordering {
        let list = |a: &[(String, Tensor)], b: &[(String, Tensor)]| {
            for (x, y) in a.iter().zip(b) {
                let c = x.0.cmp(&y.0).then_with(|| cmp_tensor(&x.1, &y.1));
                if c.is_ne() {
                    return c;
                }
            }
            a.len().cmp(&b.len())
        };
        list(&self.fetches, &other.fetches).then_with(|| list(&self.variables, &other.variables))
    }

    fn fingerprint(&self) -> u128 {
        fingerprint(|h| {
            for (name, t) in self.fetches.iter().chain(&self.variables) {
                name.hash(h);
                hash_tensor(t, h);
            }
            self.fetches.len().hash(h);
        })
    }
}

/// The result of a search.
#[derive(Clone, Debug)]
pub struct Exploration {
    /// Distinct outcomes, sorted ([`Outcome::cmp_canonical`]).
    pub outcomes: Vec<Outcome>,
    /// For each outcome, a schedule producing it: the steps in order, described.
    pub witnesses: Vec<Vec<String>>,
    /// Distinct states visited.
    pub states_explored: usize,
}

impl Exploration {
    /// Whether `o` is one of the outcomes.
    pub fn contains(&self, o: &Outcome) -> bool {
        self.outcomes.iter().any(|x| x == o)
    }
}

/// Explores every outcome of `program`.
pub fn explore(
    program: &Program<'_>,
    eval: &dyn PureEval,
    inputs: &Inputs,
    limits: Limits,
) -> Result<Exploration, SemanticsError> {
    let _span = tracing::debug_span!("explore", steps = program.steps.len()).entered();
    // Pure values are the interpreter's kernels' values as a session step computes them:
    // subnormals flushed to zero (`autoclust_runtime::FlushDenormals`).
    let _flush = autoclust_runtime::FlushDenormals::new();
    let n = program.steps.len();
    let mut value_users = vec![Vec::new(); n];
    for (s, sources) in program.value_sources.iter().enumerate() {
        for src in sources {
            value_users[src.0 as usize].push(StepId(s as u32));
        }
    }
    // after[s]: steps that transitively depend on s.
    let mut after = vec![FixedBitSet::with_capacity(n); n];
    for s in (0..n).rev() {
        for d in &program.steps[s].deps {
            // Steps are not topologically numbered (clusters come last), so
            // close the relation by a fixpoint below.
            after[d.0 as usize].insert(s);
        }
    }
    loop {
        let mut changed = false;
        for s in 0..n {
            let succ: Vec<usize> = after[s].ones().collect();
            for t in succ {
                let extra = after[t].clone();
                let before = after[s].count_ones(..);
                after[s].union_with(&extra);
                changed |= after[s].count_ones(..) != before;
            }
        }
        if !changed {
            break;
        }
    }
    let conflicts = (0..n)
        .map(|s| {
            let mut c = FixedBitSet::with_capacity(n);
            for t in 0..n {
                if t != s && conflict(program, s, t) {
                    c.insert(t);
                }
            }
            c
        })
        .collect();
    let mut fetch_needs = FixedBitSet::with_capacity(n);
    for s in &program.fetch_sources {
        fetch_needs.insert(s.0 as usize);
    }
    let mut vars = vec![None; program.vars.len()];
    for (i, v) in program.vars.iter().enumerate() {
        vars[i] = match v.kind {
            VarKind::Resource => inputs.vars.get(&v.name).cloned(),
            // A stack is created empty by the run (its `StackV2`).
            VarKind::Stack => {
                let element_dtype = v.dtype.unwrap_or(DType::Float32);
                Some(Tensor::from_list(TensorList::new(element_dtype, None, Vec::new())))
            }
            // Tensor arrays are created by their steps.
            VarKind::TensorArray { .. } | VarKind::GradientArray => None,
        };
    }
    let root = State {
        done: FixedBitSet::with_capacity(n),
        vars,
        values: vec![None; program.graph.len()],
        dead: if program.control_flow { vec![0; program.graph.len()] } else { Vec::new() },
        pending: vec![None; n],
    };
    let mut ex = Explorer {
        program,
        eval,
        inputs,
        limits,
        value_users,
        after,
        conflicts,
        fetch_needs,
        visited: HashSet::new(),
        found: HashMap::new(),
        outcomes: Vec::new(),
        path: Vec::new(),
        states: 1,
        pure_cache: RefCell::new(HashMap::new()),
        kernel_cache: RefCell::new(HashMap::new()),
    };
    ex.visited.insert(ex.key(&root));
    ex.search(root)?;
    let states_explored = if limits.reduce { ex.visited.len() } else { ex.states };
    let mut pairs: Vec<(Outcome, Vec<String>)> = ex.outcomes;
    pairs.sort_by(|a, b| a.0.cmp_canonical(&b.0));
    let (outcomes, witnesses) = pairs.into_iter().unzip();
    tracing::debug!(states_explored, "explored");
    Ok(Exploration { outcomes, witnesses, states_explored })
}

fn conflict(p: &Program<'_>, a: usize, b: usize) -> bool {
    let (x, y) = (&p.steps[a], &p.steps[b]);
    x.writes.iter().any(|v| y.reads.contains(v) || y.writes.contains(v)) || y.writes.iter().any(|v| x.reads.contains(v))
}

/// A dead node: it did not run (seed 002's dead tensors), all its outputs are dead, and
/// its control edges make their targets dead.
const DEAD_NODE: u8 = 0xff;

/// Whether output `port` of a node with dead mask `mask` is dead.
fn dead_port(mask: u8, port: u32) -> bool {
    mask == DEAD_NODE || (port < 8 && mask & (1 << port) != 0)
}

/// Values a step hands to its second half: `(variable, value)` pairs.
type Handover = Rc<[(VarId, Tensor)]>;

#[derive(Clone)]
struct State {
    done: FixedBitSet,
    vars: Vec<Option<Tensor>>,
    /// Per node: its output values, once known.
    values: Vec<Option<Rc<[Tensor]>>>,
    /// Per node, with control flow only (else empty): which of its known outputs are dead
    /// ([`DEAD_NODE`], or bit `p` for port `p` of a `Switch`).
    dead: Vec<u8>,
    /// Per step: values it hands to its second half (a split RMW's old
    /// value; a snapshot's pending write-back).
    pending: Vec<Option<Handover>>,
}

struct Explorer<'a, 'g> {
    program: &'a Program<'g>,
    eval: &'a dyn PureEval,
    inputs: &'a Inputs,
    limits: Limits,
    value_users: Vec<Vec<StepId>>,
    after: Vec<FixedBitSet>,
    conflicts: Vec<FixedBitSet>,
    fetch_needs: FixedBitSet,
    visited: HashSet<u128>,
    found: HashMap<u128, usize>,
    outcomes: Vec<(Outcome, Vec<String>)>,
    path: Vec<StepId>,
    /// States entered (with revisits when not reducing).
    states: usize,
    /// Pure node outputs by fingerprint of (node, input values).
    pure_cache: RefCell<HashMap<u128, Rc<[Tensor]>>>,
    /// Resource kernels' outputs and variable values by fingerprint of (node, input
    /// values, variable values).
    kernel_cache: RefCell<HashMap<u128, KernelResult>>,
}

/// What a resource kernel gives: its outputs and its variables' values afterwards.
type KernelResult = (Vec<Tensor>, Vec<Tensor>);

/// What an access does: its outputs and the values it writes, by variable.
type AccessResult = (Vec<Tensor>, Vec<(VarId, Tensor)>);

impl Explorer<'_, '_> {
    /// Depth-first search over the states from `root`, on an explicit stack: a schedule is as
    /// long as the program has steps, and one call frame per step overflowed the thread's
    /// stack (`verify --clusters` on a generated graph of 10⁵ nodes, ~2·10⁴ steps, aborted
    /// the process). Only states with choices left to try stay on the stack: the last choice
    /// of a state (with partial-order reduction usually its only one) takes the state over
    /// instead of a copy, so a run of ample steps holds one state, not one per step (each a
    /// value slot per node: copies per step took 20 GB at 10⁵ nodes). The order of the search,
    /// the states visited and the schedules recorded are those of the recursion.
    fn search(&mut self, root: State) -> Result<(), SemanticsError> {
        /// A state with choices left: the steps to try from it, the next one's index, and
        /// the length of the schedule that reached it.
        struct Frame {
            state: State,
            choices: Vec<usize>,
            next: usize,
            depth: usize,
        }
        let mut stack: Vec<Frame> = Vec::new();
        let mut reached = Some(root);
        loop {
            if let Some(mut state) = reached.take() {
                match self.choices(&mut state)? {
                    Some(choices) => stack.push(Frame { state, choices, next: 0, depth: self.path.len() }),
                    None => self.record(state)?,
                }
            }
            let Some(top) = stack.last_mut() else { return Ok(()) };
            let (s, depth) = (top.choices[top.next], top.depth);
            top.next += 1;
            let mut next = if top.next < top.choices.len() {
                top.state.clone()
            } else {
                match stack.pop() {
                    Some(frame) => frame.state,
                    None => return Ok(()),
                }
            };
            self.apply(StepId(s as u32), &mut next)?;
            next.done.insert(s);
            self.states += 1;
            let key = self.key(&next);
            if self.visited.insert(key) || !self.limits.reduce {
                let count = if self.limits.reduce { self.visited.len() } else { self.states };
                if count > self.limits.max_states {
                    return Err(SemanticsError::StateBound { limit: self.limits.max_states });
                }
                self.path.truncate(depth);
                self.path.push(StepId(s as u32));
                reached = Some(next);
            }
        }
    }

    /// The steps to try from `state` (never empty): every enabled step, or the one that may
    /// run first (see the module documentation); `None` when every step is done.
    fn choices(&mut self, state: &mut State) -> Result<Option<Vec<usize>>, SemanticsError> {
        let n = self.program.steps.len();
        let enabled: Vec<usize> = (0..n)
            .filter(|&s| {
                !state.done.contains(s) && self.program.steps[s].deps.iter().all(|d| state.done.contains(d.0 as usize))
            })
            .collect();
        if enabled.is_empty() {
            if state.done.count_ones(..) == n {
                return Ok(None);
            }
            let stuck: Vec<String> =
                (0..n).filter(|&s| !state.done.contains(s)).map(|s| self.program.describe(StepId(s as u32))).collect();
            return Err(SemanticsError::Deadlock { steps: stuck.join("; ") });
        }
        // A step no undone step (other than its successors) conflicts with
        // may run first: see the module documentation.
        let mut ample = enabled
            .iter()
            .copied()
            .filter(|_| self.limits.reduce)
            .find(|&s| self.conflicts[s].ones().all(|t| state.done.contains(t) || self.after[s].contains(t)));
        // A dead step accesses nothing, so it commutes with every step: run it first.
        if self.program.control_flow && self.limits.reduce && ample.is_none() {
            for &s in &enabled {
                if self.step_dead(StepId(s as u32), state)? {
                    ample = Some(s);
                    break;
                }
            }
        }
        Ok(Some(match ample {
            Some(s) => vec![s],
            None => enabled,
        }))
    }

    fn record(&mut self, mut state: State) -> Result<(), SemanticsError> {
        let p = self.program;
        let mut fetches = Vec::new();
        for b in &p.loop_bounds {
            if !self.node_dead(&mut state, b.node)? {
                return Err(SemanticsError::LoopBound {
                    frame: b.frame.clone(),
                    max_iterations: b.max_iterations,
                    node: p.graph.name(b.node).to_string(),
                });
            }
        }
        for &o in &p.fetches {
            let name = format!("{}:{}", p.graph.name(o.node), o.port);
            match self.value_or_dead(&mut state, o)? {
                Some(t) => fetches.push((name, t)),
                None => return Err(SemanticsError::DeadFetch { fetch: name }),
            }
        }
        fetches.sort_by(|a, b| a.0.cmp(&b.0));
        let mut variables: Vec<(String, Tensor)> = p
            .vars
            .iter()
            .zip(&state.vars)
            .filter(|(v, _)| !v.kind.is_container())
            .filter_map(|(v, t)| t.as_ref().map(|t| (v.name.clone(), t.clone())))
            .collect();
        variables.sort_by(|a, b| a.0.cmp(&b.0));
        let outcome = Outcome { fetches, variables };
        let fp = outcome.fingerprint();
        if !self.found.contains_key(&fp) {
            self.found.insert(fp, self.outcomes.len());
            let schedule = self.path.iter().map(|&s| p.describe(s)).collect();
            self.outcomes.push((outcome, schedule));
        }
        Ok(())
    }

    /// The state's fingerprint: done steps, variables, and live values.
    fn key(&self, st: &State) -> u128 {
        let p = self.program;
        fingerprint(|h| {
            st.done.as_slice().hash(h);
            for v in &st.vars {
                match v {
                    Some(t) => {
                        1u8.hash(h);
                        hash_tensor(t, h);
                    }
                    None => 0u8.hash(h),
                }
            }
            for s in st.done.ones() {
                let live =
                    self.fetch_needs.contains(s) || self.value_users[s].iter().any(|u| !st.done.contains(u.0 as usize));
                if !live {
                    continue;
                }
                s.hash(h);
                let nodes: &[NodeId] = match p.steps[s].kind {
                    StepKind::Whole { ref node } => std::slice::from_ref(node),
                    StepKind::Snapshot { cluster } => &p.clusters[cluster].members,
                    _ => &[],
                };
                for n in nodes {
                    if let Some(vals) = &st.values[n.index()] {
                        for t in vals.iter() {
                            hash_tensor(t, h);
                        }
                    }
                }
            }
            if p.control_flow {
                // Deadness reaches later steps over control edges too: hash it for every done step.
                for s in st.done.ones() {
                    if let Some(n) = self.step_node(StepId(s as u32)) {
                        st.dead[n.index()].hash(h);
                    }
                }
            }
            for (s, pending) in st.pending.iter().enumerate() {
                if let Some(pending) = pending {
                    s.hash(h);
                    for (v, t) in pending.iter() {
                        v.hash(h);
                        hash_tensor(t, h);
                    }
                }
            }
        })
    }

    /// Runs step `s` on `st`.
    fn apply(&self, s: StepId, st: &mut State) -> Result<(), SemanticsError> {
        let p = self.program;
        if p.control_flow && self.step_dead(s, st)? {
            // Seed 002: a dead op does not run; a dead resource op accesses nothing.
            match p.steps[s.0 as usize].kind {
                StepKind::Whole { node } | StepKind::RmwRead { node } | StepKind::RmwWrite { node } => {
                    st.dead[node.index()] = DEAD_NODE;
                    if !matches!(p.steps[s.0 as usize].kind, StepKind::RmwRead { .. }) {
                        st.values[node.index()] = Some(Vec::new().into());
                    }
                }
                StepKind::Snapshot { cluster } => {
                    for &m in &p.clusters[cluster].members {
                        st.dead[m.index()] = DEAD_NODE;
                        st.values[m.index()] = Some(Vec::new().into());
                    }
                }
                StepKind::WriteBack { .. } => {}
            }
            return Ok(());
        }
        match p.steps[s.0 as usize].kind {
            StepKind::Whole { node } => {
                let a = p.access[node.index()].expect("a step's node is a resource op");
                let current: Vec<Option<Tensor>> = a.vars().map(|v| st.vars[v.0 as usize].clone()).collect();
                let (outputs, written) = self.run_access(node, a, current, st)?;
                for (v, w) in written {
                    st.vars[v.0 as usize] = Some(w);
                }
                st.values[node.index()] = Some(outputs.into());
            }
            StepKind::RmwRead { node } => {
                // Every variable of the op at once (see `AccessOp::Apply`).
                let a = p.access[node.index()].expect("a step's node is a resource op");
                let mut old = Vec::new();
                for v in a.vars() {
                    old.push((v, self.require(node, v, st.vars[v.0 as usize].clone())?));
                }
                st.pending[s.0 as usize] = Some(old.into());
            }
            StepKind::RmwWrite { node } => {
                let a = p.access[node.index()].expect("a step's node is a resource op");
                let read = StepId(s.0 - 1);
                let old = st.pending[read.0 as usize].take().expect("the read half ran first");
                if a.op.runs_kernel() {
                    let current = old.iter().map(|(_, t)| Some(t.clone())).collect();
                    let (outputs, written) = self.run_access(node, a, current, st)?;
                    for (v, w) in written {
                        st.vars[v.0 as usize] = Some(w);
                    }
                    st.values[node.index()] = Some(outputs.into());
                } else {
                    let new = self.update(node, a.op, old[0].1.clone(), st)?;
                    st.vars[a.var.0 as usize] = Some(new);
                    st.values[node.index()] = Some(Vec::new().into());
                }
            }
            StepKind::Snapshot { cluster } => {
                let c = &p.clusters[cluster];
                // SSA: each variable's current value inside the cluster.
                let mut ssa: HashMap<VarId, Option<Tensor>> =
                    c.reads.iter().map(|v| (*v, st.vars[v.0 as usize].clone())).collect();
                for &m in &c.members {
                    match p.access[m.index()] {
                        Some(a) => {
                            let current = a.vars().map(|v| ssa.get(&v).cloned().flatten()).collect();
                            let (outputs, written) = self.run_access(m, a, current, st)?;
                            for (v, w) in written {
                                ssa.insert(v, Some(w));
                            }
                            st.values[m.index()] = Some(outputs.into());
                        }
                        None => {
                            let vals = self.compute_pure(m, st)?;
                            st.values[m.index()] = Some(vals);
                        }
                    }
                }
                let writes: Vec<(VarId, Tensor)> =
                    c.writes.iter().filter_map(|v| ssa.get(v).cloned().flatten().map(|t| (*v, t))).collect();
                st.pending[s.0 as usize] = Some(writes.into());
            }
            StepKind::WriteBack { .. } => {
                let snapshot = StepId(s.0 - 1);
                let writes = st.pending[snapshot.0 as usize].take().expect("the snapshot ran first");
                for (v, t) in writes.iter() {
                    st.vars[v.0 as usize] = Some(t.clone());
                }
            }
        }
        Ok(())
    }

    /// The node whose deadness a step decides (a cluster's: its first member).
    fn step_node(&self, s: StepId) -> Option<NodeId> {
        match self.program.steps[s.0 as usize].kind {
            StepKind::Whole { node } | StepKind::RmwRead { node } | StepKind::RmwWrite { node } => Some(node),
            StepKind::Snapshot { cluster } | StepKind::WriteBack { cluster } => {
                self.program.clusters[cluster].members.first().copied()
            }
        }
    }

    /// Whether step `s` (enabled: every step it depends on is done) is dead: a data input
    /// or a control input of its node is dead (for a cluster, an input from outside it —
    /// the cluster call's inputs). A split read-modify-write's and a cluster's second step
    /// are dead with their first.
    fn step_dead(&self, s: StepId, st: &mut State) -> Result<bool, SemanticsError> {
        let p = self.program;
        match p.steps[s.0 as usize].kind {
            StepKind::Whole { node } | StepKind::RmwRead { node } => self.inputs_dead(node, None, st),
            StepKind::RmwWrite { node } => Ok(st.dead[node.index()] == DEAD_NODE),
            StepKind::Snapshot { cluster } => {
                for &m in &p.clusters[cluster].members {
                    if self.inputs_dead(m, Some(cluster), st)? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
            StepKind::WriteBack { cluster } => {
                Ok(p.clusters[cluster].members.first().is_some_and(|m| st.dead[m.index()] == DEAD_NODE))
            }
        }
    }

    /// Whether a data or control input of `id` from outside `cluster` is dead.
    fn inputs_dead(&self, id: NodeId, cluster: Option<usize>, st: &mut State) -> Result<bool, SemanticsError> {
        let p = self.program;
        let node = p.graph.node(id);
        let outside = |n: NodeId| cluster.is_none() || p.cluster_of[n.index()] != cluster;
        for &c in &node.control_inputs {
            if outside(c) && self.node_dead(st, c)? {
                return Ok(true);
            }
        }
        for &o in &node.inputs {
            if outside(o.node) && self.value_or_dead(st, o)?.is_none() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether node `id` is dead as a whole (what its control edges carry).
    fn node_dead(&self, st: &mut State, id: NodeId) -> Result<bool, SemanticsError> {
        self.ensure(st, id)?;
        Ok(st.dead[id.index()] == DEAD_NODE)
    }

    /// A whole access of `node` (`a`) to its variables holding `current` (in
    /// [`Access::vars`] order): its outputs and the values it writes.
    fn run_access(
        &self,
        node: NodeId,
        a: Access,
        mut current: Vec<Option<Tensor>>,
        st: &mut State,
    ) -> Result<AccessResult, SemanticsError> {
        if a.op.runs_kernel() {
            return self.kernel(node, a, current, st);
        }
        let (outputs, written) = self.access(node, a.op, current.swap_remove(0), st)?;
        Ok((outputs, written.map(|w| (a.var, w)).into_iter().collect()))
    }

    /// An op the interpreter's kernel computes ([`AccessOp::runs_kernel`]): its outputs
    /// and, when it writes, the new value of each of its variables. Kernels run once per
    /// distinct (node, inputs, variable values), like pure nodes.
    fn kernel(
        &self,
        node: NodeId,
        a: Access,
        current: Vec<Option<Tensor>>,
        st: &mut State,
    ) -> Result<AccessResult, SemanticsError> {
        let p = self.program;
        let vars: Vec<VarId> = a.vars().collect();
        let mut values = Vec::with_capacity(vars.len());
        for (&v, t) in vars.iter().zip(current) {
            values.push((p.vars[v.0 as usize].name.as_str(), self.require(node, v, t)?));
        }
        let n = p.graph.node(node);
        let handles = crate::model::handle_slots(&n.op);
        let mut inputs = Vec::with_capacity(n.inputs.len());
        for slot in 0..n.inputs.len() {
            inputs.push(if handles.contains(&slot) { None } else { Some(self.input(node, slot, st)?) });
        }
        let key = fingerprint(|h| {
            node.hash(h);
            for t in inputs.iter().flatten().chain(values.iter().map(|(_, t)| t)) {
                hash_tensor(t, h);
            }
        });
        let cached = self.kernel_cache.borrow().get(&key).cloned();
        let (outputs, after) = match cached {
            Some(hit) => hit,
            None => {
                let out = crate::eval::resource_kernel(n, &inputs, &values).map_err(|m| self.kernel_error(node, m))?;
                self.kernel_cache.borrow_mut().insert(key, out.clone());
                out
            }
        };
        let written = if a.op.writes() { vars.into_iter().zip(after).collect() } else { Vec::new() };
        Ok((outputs, written))
    }

    /// A whole access of `node` to a variable holding `current`: its outputs
    /// and the value it writes, if any.
    fn access(
        &self,
        node: NodeId,
        op: AccessOp,
        current: Option<Tensor>,
        st: &mut State,
    ) -> Result<(Vec<Tensor>, Option<Tensor>), SemanticsError> {
        let p = self.program;
        let var = p.access[node.index()].expect("resource op").var;
        Ok(match op {
            AccessOp::Read => (vec![self.require(node, var, current)?], None),
            AccessOp::IsInitialized => (vec![Tensor::scalar_bool(current.is_some())], None),
            AccessOp::Shape => {
                let t = self.require(node, var, current)?;
                let out_type = p.graph.node(node).attr("out_type").and_then(|a| a.as_type()).unwrap_or(DType::Int32);
                let dims: Vec<i64> = t.shape.iter().map(|&d| d as i64).collect();
                let shape = match out_type {
                    DType::Int64 => Tensor::from_i64(vec![dims.len()], dims),
                    _ => Tensor::from_i32(vec![dims.len()], dims.iter().map(|&d| d as i32).collect()),
                }
                .map_err(|e| self.kernel_error(node, e.to_string()))?;
                (vec![shape], None)
            }
            AccessOp::Assign => {
                let value = self.input(node, 1, st)?;
                (Vec::new(), Some(value))
            }
            AccessOp::AssignAdd | AccessOp::AssignSub | AccessOp::ApplyGradientDescent => {
                let old = self.require(node, var, current)?;
                (Vec::new(), Some(self.update(node, op, old, st)?))
            }
            AccessOp::StackPush | AccessOp::StackPop => {
                let stack = self.require(node, var, current)?;
                let mut list = stack.as_list().cloned().ok_or_else(|| self.kernel_error(node, "not a stack".into()))?;
                let elem = if op == AccessOp::StackPush {
                    let elem = self.input(node, 1, st)?;
                    list.push(elem.clone());
                    elem
                } else {
                    list.pop().flatten().ok_or_else(|| {
                        self.kernel_error(node, "Pop on an empty stack (TensorFlow: \"Stack is empty\")".into())
                    })?
                };
                (vec![elem], Some(Tensor::from_list(list)))
            }
            AccessOp::StackClose | AccessOp::TaClose => (Vec::new(), None),
            AccessOp::TaCreate
            | AccessOp::TaGrad
            | AccessOp::TaWrite
            | AccessOp::TaScatter
            | AccessOp::TaRead
            | AccessOp::TaGather
            | AccessOp::TaSize
            | AccessOp::TaConcat
            | AccessOp::TaSplit => self.tensor_array(node, op, var, current, st)?,
            AccessOp::Gather | AccessOp::Scatter | AccessOp::Apply | AccessOp::RngSkip => {
                unreachable!("the interpreter's kernel computes these (Explorer::kernel)")
            }
        })
    }

    /// A tensor-array op (TensorFlow's `TensorArray` kernels, as the runtime's
    /// `containers.rs` runs them): its outputs and the array it leaves.
    fn tensor_array(
        &self,
        node: NodeId,
        op: AccessOp,
        var: VarId,
        current: Option<Tensor>,
        st: &mut State,
    ) -> Result<(Vec<Tensor>, Option<Tensor>), SemanticsError> {
        let p = self.program;
        let flow = || Tensor::scalar_f32(0.0);
        let handle = || Tensor::scalar_i32(0);
        let err = |m: String| self.kernel_error(node, m);
        let ints = |t: &Tensor, what: &str| t.to_i64_vec().ok_or_else(|| err(format!("{what} must be integers")));
        let list_of = |t: Option<Tensor>| -> Result<TensorList, SemanticsError> {
            t.and_then(|t| t.as_list().cloned()).ok_or_else(|| err("the handle names no live TensorArray".into()))
        };
        let kind = p.vars[var.0 as usize].kind;
        let element_dtype = p.vars[var.0 as usize].dtype.unwrap_or(DType::Float32);
        let attr_shape = |name: &str| {
            let s = p.graph.node(node).attr(name)?.as_shape()?;
            s.dims.as_ref().map(|d| d.iter().map(|x| x.unwrap_or(-1)).collect::<Vec<i64>>())
        };
        let zeros = |shape: &Option<Vec<i64>>| match shape {
            Some(s) if s.iter().all(|&d| d >= 0) => {
                Tensor::zeros(element_dtype, s.iter().map(|&d| d as usize).collect()).map_err(|e| err(e.to_string()))
            }
            _ => Err(err("the element was never written and its shape is not fully known".into())),
        };
        let index = |list: &mut TensorList, i: i64, writing: bool| -> Result<usize, SemanticsError> {
            if i < 0 {
                return Err(err(format!("index {i} is negative")));
            }
            let i = i as usize;
            if i >= list.len() {
                if writing && kind == (VarKind::TensorArray { dynamic: true }) {
                    list.resize(i + 1);
                } else {
                    return Err(err(format!("index {i} is out of range for a TensorArray of size {}", list.len())));
                }
            }
            Ok(i)
        };
        let write = |list: &mut TensorList, i: i64, v: Tensor| -> Result<(), SemanticsError> {
            let i = index(list, i, true)?;
            let shape: Vec<i64> = v.shape.iter().map(|&d| d as i64).collect();
            if let Some(es) = &list.element_shape {
                let fits = es.len() == shape.len() && es.iter().zip(&shape).all(|(&a, &b)| a < 0 || a == b);
                if !fits {
                    return Err(err(format!(
                        "the value's shape {:?} does not fit the TensorArray's element shape {es:?}",
                        v.shape
                    )));
                }
            }
            list.element_shape = Some(shape);
            let new = match list.items()[i].clone() {
                None => v,
                Some(old) if kind == VarKind::GradientArray => {
                    let add = synthetic(p.graph.name(node), "AddV2", old.dtype);
                    self.eval.compute(&add, &[old, v]).map_err(&err)?.swap_remove(0)
                }
                Some(_) => {
                    return Err(err(format!(
                        "could not write to TensorArray index {i} because it has already been written to"
                    )))
                }
            };
            list.set(i, new);
            Ok(())
        };
        let read = |list: &mut TensorList, i: i64| -> Result<Tensor, SemanticsError> {
            let i = index(list, i, false)?;
            match &list.items()[i] {
                Some(t) => Ok(t.clone()),
                None if kind == VarKind::GradientArray => zeros(&list.element_shape),
                None => Err(err(format!(
                    "could not read from TensorArray index {i} because it has not yet been written to"
                ))),
            }
        };
        let scalar = |t: &Tensor, what: &str| match ints(t, what)?.as_slice() {
            [i] if t.shape.is_empty() => Ok(*i),
            _ => Err(err(format!("{what} must be an integer scalar"))),
        };
        Ok(match op {
            AccessOp::TaCreate => {
                let size = scalar(&self.input(node, 0, st)?, "size")?;
                if size < 0 {
                    return Err(err(format!("size {size} is negative")));
                }
                autoclust_graph::limits::check_count(DType::Resource, size as u64).map_err(|e| err(e.to_string()))?;
                let list = TensorList::new(element_dtype, attr_shape("element_shape"), vec![None; size as usize]);
                (vec![handle(), flow()], Some(Tensor::from_list(list)))
            }
            AccessOp::TaGrad => {
                if current.is_some() {
                    return Ok((vec![handle(), flow()], None));
                }
                let forward = self.program.access[node.index()].and_then(|a| a.source).expect("a gradient's source");
                let f = list_of(st.vars[forward.0 as usize].clone())?;
                let n = f.len();
                let list = TensorList::new(element_dtype, f.element_shape, vec![None; n]);
                (vec![handle(), flow()], Some(Tensor::from_list(list)))
            }
            AccessOp::TaWrite => {
                let mut list = list_of(current)?;
                let i = scalar(&self.input(node, 1, st)?, "index")?;
                write(&mut list, i, self.input(node, 2, st)?)?;
                (vec![flow()], Some(Tensor::from_list(list)))
            }
            AccessOp::TaScatter => {
                let mut list = list_of(current)?;
                let idx = ints(&self.input(node, 1, st)?, "indices")?;
                let value = self.input(node, 2, st)?;
                if value.shape.first().copied() != Some(idx.len()) {
                    return Err(err(format!(
                        "the value's first dimension ({:?}) must match the number of indices ({})",
                        value.shape.first(),
                        idx.len()
                    )));
                }
                let unpack = synthetic(p.graph.name(node), "Unpack", value.dtype);
                let parts = self.eval.compute(&unpack, &[value]).map_err(&err)?;
                for (&i, part) in idx.iter().zip(parts) {
                    write(&mut list, i, part)?;
                }
                (vec![flow()], Some(Tensor::from_list(list)))
            }
            AccessOp::TaRead => {
                let mut list = list_of(current)?;
                let i = scalar(&self.input(node, 1, st)?, "index")?;
                (vec![read(&mut list, i)?], None)
            }
            AccessOp::TaGather => {
                let mut list = list_of(current)?;
                let idx = ints(&self.input(node, 1, st)?, "indices")?;
                let items = idx.iter().map(|&i| read(&mut list, i)).collect::<Result<Vec<_>, _>>()?;
                if items.is_empty() {
                    let mut dims = vec![0i64];
                    dims.extend(list.element_shape.clone().or_else(|| attr_shape("element_shape")).unwrap_or_default());
                    return Ok((vec![zeros(&Some(dims))?], None));
                }
                let pack = synthetic(p.graph.name(node), "Pack", element_dtype);
                (vec![self.eval.compute(&pack, &items).map_err(&err)?.swap_remove(0)], None)
            }
            AccessOp::TaSize => {
                let list = list_of(current)?;
                (vec![Tensor::scalar_i32(list.len() as i32)], None)
            }
            AccessOp::TaConcat => {
                let mut list = list_of(current)?;
                let n = list.len() as i64;
                let items = (0..n).map(|i| read(&mut list, i)).collect::<Result<Vec<_>, _>>()?;
                let lengths: Vec<i64> = items.iter().map(|t| t.shape.first().copied().unwrap_or(0) as i64).collect();
                let value = if items.is_empty() {
                    let mut dims = vec![0i64];
                    dims.extend(
                        list.element_shape.clone().map(|s| s.get(1..).unwrap_or_default().to_vec()).unwrap_or_default(),
                    );
                    zeros(&Some(dims))?
                } else {
                    let concat = synthetic(p.graph.name(node), "ConcatV2", element_dtype);
                    let mut ins = items;
                    ins.push(Tensor::scalar_i32(0));
                    self.eval.compute(&concat, &ins).map_err(&err)?.swap_remove(0)
                };
                let lengths = Tensor::from_i64(vec![lengths.len()], lengths).map_err(|e| err(e.to_string()))?;
                (vec![value, lengths], None)
            }
            AccessOp::TaSplit => {
                let mut list = list_of(current)?;
                let value = self.input(node, 1, st)?;
                let lengths = self.input(node, 2, st)?;
                if ints(&lengths, "lengths")?.iter().any(|&l| l < 0) {
                    return Err(err("lengths must be non-negative".into()));
                }
                let split = synthetic(p.graph.name(node), "SplitV", value.dtype);
                let parts = self.eval.compute(&split, &[value, lengths, Tensor::scalar_i32(0)]).map_err(&err)?;
                for (i, part) in parts.into_iter().enumerate() {
                    write(&mut list, i as i64, part)?;
                }
                (vec![flow()], Some(Tensor::from_list(list)))
            }
            _ => unreachable!("tensor_array is only called for tensor-array ops"),
        })
    }

    /// The compute half of a read-modify-write: the new value from the old.
    fn update(&self, node: NodeId, op: AccessOp, old: Tensor, st: &mut State) -> Result<Tensor, SemanticsError> {
        let name = self.program.graph.name(node);
        let binary = |op_name: &str, a: Tensor, b: Tensor| -> Result<Tensor, SemanticsError> {
            let n = synthetic(name, op_name, a.dtype);
            let mut out = self.eval.compute(&n, &[a, b]).map_err(|m| self.kernel_error(node, m))?;
            if out.is_empty() {
                return Err(self.kernel_error(node, format!("{op_name} produced no value")));
            }
            Ok(out.swap_remove(0))
        };
        match op {
            AccessOp::AssignAdd => binary("AddV2", old, self.input(node, 1, st)?),
            AccessOp::AssignSub => binary("Sub", old, self.input(node, 1, st)?),
            AccessOp::ApplyGradientDescent => {
                let alpha = self.input(node, 1, st)?;
                let delta = self.input(node, 2, st)?;
                let step = binary("Mul", alpha, delta)?;
                binary("Sub", old, step)
            }
            _ => unreachable!("update is only called for read-modify-writes"),
        }
    }

    fn require(&self, node: NodeId, var: VarId, current: Option<Tensor>) -> Result<Tensor, SemanticsError> {
        current.ok_or_else(|| SemanticsError::Uninitialised {
            node: self.program.graph.name(node).to_string(),
            var: self.program.vars[var.0 as usize].name.clone(),
        })
    }

    fn kernel_error(&self, node: NodeId, message: String) -> SemanticsError {
        SemanticsError::Kernel { node: self.program.graph.name(node).to_string(), message }
    }

    /// The value of data input `slot` of `node`.
    fn input(&self, node: NodeId, slot: usize, st: &mut State) -> Result<Tensor, SemanticsError> {
        let o = *self
            .program
            .graph
            .node(node)
            .inputs
            .get(slot)
            .ok_or_else(|| self.kernel_error(node, format!("has no input {slot}")))?;
        self.value(st, o)
    }

    /// The value of a live output, computing pure nodes on demand.
    fn value(&self, st: &mut State, o: Output) -> Result<Tensor, SemanticsError> {
        if self.program.control_flow {
            return self.value_or_dead(st, o)?.ok_or_else(|| {
                self.kernel_error(o.node, format!("output {} is dead where a value is needed (internal)", o.port))
            });
        }
        // Without control flow (the hot path of acyclic graphs): no deadness to look at.
        let vals = match &st.values[o.node.index()] {
            Some(v) => v.clone(),
            None => self.ensure(st, o.node)?,
        };
        vals.get(o.port as usize).cloned().ok_or_else(|| self.kernel_error(o.node, format!("has no output {}", o.port)))
    }

    /// The value of an output, `None` when it is dead.
    fn value_or_dead(&self, st: &mut State, o: Output) -> Result<Option<Tensor>, SemanticsError> {
        let vals = self.ensure(st, o.node)?;
        if self.program.control_flow && dead_port(st.dead[o.node.index()], o.port) {
            return Ok(None);
        }
        vals.get(o.port as usize)
            .cloned()
            .map(Some)
            .ok_or_else(|| self.kernel_error(o.node, format!("has no output {}", o.port)))
    }

    /// A node's outputs, computing a pure node on demand (its deadness too).
    ///
    /// The missing pure values it needs are computed first, deepest first, on an explicit
    /// stack ([`Explorer::fill_ancestors`]): computing each node's inputs by recursion
    /// overflowed the thread's stack on a long chain of pure nodes (`verify --clusters` on a
    /// generated graph of 10⁵ nodes aborted the process).
    fn ensure(&self, st: &mut State, id: NodeId) -> Result<Rc<[Tensor]>, SemanticsError> {
        if let Some(v) = &st.values[id.index()] {
            return Ok(v.clone());
        }
        self.fill_ancestors(st, id)?;
        self.ensure_one(st, id)
    }

    /// Computes the missing values `ensure(id)` would compute by recursion — the nodes
    /// [`Explorer::compute_pure`] asks for ([`Explorer::demand`]), in the order it asks,
    /// stopping where it would stop (at an input that fails or, with control flow, is dead)
    /// — each after its own, so every `compute_pure` finds its inputs known and the call
    /// depth stays constant. Only where the work happens moves: the same nodes are computed
    /// in the same order, so the values and the first error are those of the recursion.
    fn fill_ancestors(&self, st: &mut State, id: NodeId) -> Result<(), SemanticsError> {
        let mut stack: Vec<(NodeId, usize)> = vec![(id, 0)];
        while let Some(&(node, k)) = stack.last() {
            let next = if k > 0 && !self.demand_met(st, node, k - 1) { None } else { self.demand(node, k) };
            match next {
                Some(dep) => {
                    if let Some(top) = stack.last_mut() {
                        top.1 += 1;
                    }
                    if st.values[dep.node().index()].is_none() {
                        // Deeper than there are nodes: a cycle of pure nodes, which a verified
                        // graph does not hold (the recursion never ended on one either).
                        if stack.len() > self.program.graph.len() {
                            return Err(self.kernel_error(dep.node(), "its value depends on itself (internal)".into()));
                        }
                        stack.push((dep.node(), 0));
                    }
                }
                None => {
                    stack.pop();
                    self.ensure_one(st, node)?;
                }
            }
        }
        Ok(())
    }

    /// The `k`-th value [`Explorer::compute_pure`] of `node` asks for (through
    /// [`Explorer::dead_values`]' [`Explorer::inputs_dead`] with control flow), `None` past
    /// the last — or for a node `ensure` does not compute, whose `ensure_one` fails.
    /// Whether `compute_pure` gets to ask is [`Explorer::demand_met`]'s question.
    fn demand(&self, node: NodeId, k: usize) -> Option<Demand> {
        let p = self.program;
        if p.access[node.index()].is_some() || p.cluster_of[node.index()].is_some() {
            return None;
        }
        let n = p.graph.node(node);
        let data = |k: usize| n.inputs.get(k).map(|&o| Demand::Data(o));
        if p.control_flow {
            return match n.op.as_str() {
                "Merge" | "RefMerge" => data(k),
                "ControlTrigger" => None,
                _ => match n.control_inputs.get(k) {
                    Some(&c) => Some(Demand::Control(c)),
                    None => data(k - n.control_inputs.len()),
                },
            };
        }
        let asked = match n.op.as_str() {
            "Const" | "Placeholder" | "NoOp" | "VarHandleOp" | "StackV2" => 0,
            "PlaceholderWithDefault" if self.inputs.feeds.contains_key(&n.name) => 0,
            "PlaceholderWithDefault" | "Identity" | "StopGradient" | "Snapshot" => 1,
            _ => n.inputs.len(),
        };
        if k < asked {
            data(k)
        } else {
            None
        }
    }

    /// Whether `compute_pure` of `node`, its `k`-th demand known, goes on to the next: not
    /// when reading it fails, nor when it is dead and makes `node` dead (all but a `Merge`).
    fn demand_met(&self, st: &mut State, node: NodeId, k: usize) -> bool {
        let merge = matches!(self.program.graph.node(node).op.as_str(), "Merge" | "RefMerge");
        match self.demand(node, k) {
            None => false,
            Some(Demand::Control(c)) => matches!(self.node_dead(st, c), Ok(false)),
            Some(Demand::Data(o)) if self.program.control_flow => match self.value_or_dead(st, o) {
                Ok(Some(_)) => true,
                Ok(None) => merge,
                Err(_) => false,
            },
            Some(Demand::Data(o)) => self.value(st, o).is_ok(),
        }
    }

    /// A node's outputs once its inputs are known: computes a pure node (its deadness too).
    fn ensure_one(&self, st: &mut State, id: NodeId) -> Result<Rc<[Tensor]>, SemanticsError> {
        Ok(match &st.values[id.index()] {
            Some(v) => v.clone(),
            None => {
                let p = self.program;
                if p.access[id.index()].is_some() || p.cluster_of[id.index()].is_some() {
                    return Err(self.kernel_error(id, "value needed before its step ran (internal)".into()));
                }
                let v = self.compute_pure(id, st)?;
                st.values[id.index()] = Some(v.clone());
                v
            }
        })
    }

    /// Seed 002's dead values for a pure node: `Merge` forwards its live input (dead when
    /// none is), `ControlTrigger` is never dead, any other op with a dead data or control
    /// input is dead, and a live `Switch` kills the output its predicate does not take.
    /// Sets the node's dead mask; returns its outputs when decided here, `None` when the
    /// node is live and its kernel computes them.
    fn dead_values(&self, id: NodeId, st: &mut State) -> Result<Option<Rc<[Tensor]>>, SemanticsError> {
        let node = self.program.graph.node(id);
        let dead = |st: &mut State| {
            st.dead[id.index()] = DEAD_NODE;
            Ok(Some(Rc::from(Vec::new())))
        };
        match node.op.as_str() {
            "Merge" | "RefMerge" => {
                let mut live = None;
                for (slot, &o) in node.inputs.iter().enumerate() {
                    if let Some(t) = self.value_or_dead(st, o)? {
                        if live.is_some() {
                            return Err(SemanticsError::Unsupported {
                                node: node.name.clone(),
                                op: node.op.clone(),
                                why: "more than one of its inputs is live: which one it forwards depends on \
                                      timing, which explore does not model"
                                    .into(),
                            });
                        }
                        live = Some((slot, t));
                    }
                }
                return match live {
                    None => dead(st),
                    Some((slot, t)) => {
                        st.dead[id.index()] = 0;
                        Ok(Some(vec![t, Tensor::scalar_i32(slot as i32)].into()))
                    }
                };
            }
            "ControlTrigger" => {
                st.dead[id.index()] = 0;
                return Ok(Some(Rc::from(Vec::new())));
            }
            _ => {}
        }
        if self.inputs_dead(id, None, st)? {
            return dead(st);
        }
        st.dead[id.index()] = 0;
        match node.op.as_str() {
            "Switch" | "RefSwitch" => {
                let data = self.input(id, 0, st)?;
                let pred = self.input(id, 1, st)?;
                let taken = match pred.as_bool() {
                    Some(&[b]) => b,
                    _ => return Err(self.kernel_error(id, "the predicate of a Switch must be a scalar bool".into())),
                };
                // Port 1 (true) is live when the predicate holds, port 0 (false) otherwise.
                st.dead[id.index()] = if taken { 1 } else { 2 };
                Ok(Some(vec![data.clone(), data].into()))
            }
            // A handle's value only carries its deadness (the variable is resolved statically).
            "VarHandleOp" | "StackV2" => Ok(Some(vec![Tensor::scalar_i32(0)].into())),
            "Placeholder" if autoclust_graph::effects::names_variable(node) => {
                Ok(Some(vec![Tensor::scalar_i32(0)].into()))
            }
            _ => Ok(None),
        }
    }

    /// Evaluates a pure node from its inputs.
    fn compute_pure(&self, id: NodeId, st: &mut State) -> Result<Rc<[Tensor]>, SemanticsError> {
        if self.program.control_flow {
            if let Some(decided) = self.dead_values(id, st)? {
                return Ok(decided);
            }
        }
        let node = self.program.graph.node(id);
        let unsupported = |why: &str| SemanticsError::Unsupported {
            node: node.name.clone(),
            op: node.op.clone(),
            why: why.to_string(),
        };
        let outputs = match node.op.as_str() {
            "Const" => vec![node
                .attr("value")
                .and_then(|a| a.tensor_value())
                .ok_or_else(|| self.kernel_error(id, "Const without a tensor 'value'".into()))?
                .map_err(|e| self.kernel_error(id, e.to_string()))?
                .into_owned()],
            "Placeholder" if autoclust_graph::effects::names_variable(node) => {
                return Err(unsupported("a resource handle used as a value"))
            }
            "Placeholder" => match self.inputs.feeds.get(&node.name) {
                Some(t) => vec![t.clone()],
                None => return Err(SemanticsError::MissingFeed { node: node.name.clone() }),
            },
            "PlaceholderWithDefault" => match self.inputs.feeds.get(&node.name) {
                Some(t) => vec![t.clone()],
                None => vec![self.input(id, 0, st)?],
            },
            "Identity" | "StopGradient" | "Snapshot" => vec![self.input(id, 0, st)?],
            "NoOp" => Vec::new(),
            "VarHandleOp" => return Err(unsupported("a resource handle used as a value")),
            // A stack's handle only carries its deadness (the stack is resolved statically).
            "StackV2" => vec![Tensor::scalar_i32(0)],
            _ => {
                let mut ins = Vec::with_capacity(node.inputs.len());
                for slot in 0..node.inputs.len() {
                    ins.push(self.input(id, slot, st)?);
                }
                // Many paths compute the same node from the same inputs:
                // kernels run once per distinct (node, inputs).
                let key = fingerprint(|h| {
                    id.hash(h);
                    ins.iter().for_each(|t| hash_tensor(t, h));
                });
                if let Some(hit) = self.pure_cache.borrow().get(&key) {
                    return Ok(hit.clone());
                }
                let out: Rc<[Tensor]> = self.eval.compute(node, &ins).map_err(|m| self.kernel_error(id, m))?.into();
                self.pure_cache.borrow_mut().insert(key, out.clone());
                return Ok(out);
            }
        };
        Ok(outputs.into())
    }
}

/// A value [`Explorer::compute_pure`] asks for: a data input, or (with control flow) a
/// control input whose deadness it looks at.
#[derive(Clone, Copy)]
enum Demand {
    Data(Output),
    Control(NodeId),
}

impl Demand {
    fn node(self) -> NodeId {
        match self {
            Demand::Data(o) => o.node,
            Demand::Control(c) => c,
        }
    }
}

/// A 128-bit fingerprint from two independently keyed 64-bit hashes.
fn fingerprint(feed: impl Fn(&mut DefaultHasher)) -> u128 {
    let mut a = DefaultHasher::new();
    0x5eed_u64.hash(&mut a);
    feed(&mut a);
    let mut b = DefaultHasher::new();
    0xa11ce_u64.hash(&mut b);
    feed(&mut b);
    ((a.finish() as u128) << 64) | b.finish() as u128
}

/// Hashes a tensor's dtype, shape and exact bits.
pub(crate) fn hash_tensor(t: &Tensor, h: &mut impl Hasher) {
    t.dtype.to_tf().hash(h);
    t.shape.hash(h);
    match &t.data {
        TensorData::F32(v) => v.iter().for_each(|x| x.to_bits().hash(h)),
        TensorData::F64(v) => v.iter().for_each(|x| x.to_bits().hash(h)),
        TensorData::I32(v) => v.hash(h),
        TensorData::I64(v) => v.hash(h),
        TensorData::Bool(v) => v.hash(h),
        TensorData::Str(v) => v.hash(h),
        TensorData::Raw(v) => v.hash(h),
        TensorData::List(l) => {
            l.element_dtype.to_tf().hash(h);
            for x in l.items() {
                x.is_some().hash(h);
                if let Some(t) = x {
                    hash_tensor(t, h);
                }
            }
        }
        TensorData::Optional(o) => {
            o.is_some().hash(h);
            for t in o.iter().flatten() {
                hash_tensor(t, h);
            }
        }
    }
}

/// A total order on tensors: dtype, shape, then elements numerically.
fn cmp_tensor(a: &Tensor, b: &Tensor) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let head = a.dtype.to_tf().cmp(&b.dtype.to_tf()).then_with(|| a.shape.cmp(&b.shape));
    if head != Ordering::Equal {
        return head;
    }
    match (&a.data, &b.data) {
        (TensorData::I32(x), TensorData::I32(y)) => x.cmp(y),
        (TensorData::I64(x), TensorData::I64(y)) => x.cmp(y),
        (TensorData::Bool(x), TensorData::Bool(y)) => x.cmp(y),
        (TensorData::Str(x), TensorData::Str(y)) => x.cmp(y),
        (TensorData::Raw(x), TensorData::Raw(y)) => x.cmp(y),
        (TensorData::F32(x), TensorData::F32(y)) => {
            x.iter().zip(y.iter()).map(|(p, q)| p.total_cmp(q)).find(|c| c.is_ne()).unwrap_or(x.len().cmp(&y.len()))
        }
        (TensorData::F64(x), TensorData::F64(y)) => {
            x.iter().zip(y.iter()).map(|(p, q)| p.total_cmp(q)).find(|c| c.is_ne()).unwrap_or(x.len().cmp(&y.len()))
        }
        (TensorData::List(x), TensorData::List(y)) => x
            .items()
            .iter()
            .zip(y.items())
            .map(|(p, q)| match (p, q) {
                (Some(p), Some(q)) => cmp_tensor(p, q),
                _ => p.is_some().cmp(&q.is_some()),
            })
            .find(|c| c.is_ne())
            .unwrap_or(x.len().cmp(&y.len())),
        (TensorData::Optional(x), TensorData::Optional(y)) => match (x.as_ref(), y.as_ref()) {
            (Some(p), Some(q)) => {
                p.iter().zip(q).map(|(p, q)| cmp_tensor(p, q)).find(|c| c.is_ne()).unwrap_or(p.len().cmp(&q.len()))
            }
            (p, q) => p.is_some().cmp(&q.is_some()),
        },
        _ => Ordering::Equal,
    }
}

#[cfg(test)]
mod tests {
    use autoclust_graph::{AttrValue, Attrs, DType, Graph, Library, RawNode, Shape, Tensor};

    use crate::{explore_graph, verify, ClusterSpec, Inputs, Query, RuntimeKernels};

    /// A scalar int32 resource variable named `name`.
    fn int32_variable(name: &str) -> RawNode {
        raw(
            name,
            "VarHandleOp",
            &[],
            &[
                ("dtype", AttrValue::Type(DType::Int32)),
                ("shared_name", AttrValue::S(name.as_bytes().to_vec())),
                ("container", AttrValue::S(Vec::new())),
                ("shape", AttrValue::Shape(Shape::scalar())),
            ],
        )
    }

    fn raw(name: &str, op: &str, inputs: &[&str], attrs: &[(&str, AttrValue)]) -> RawNode {
        let mut a = Attrs::new();
        for (k, v) in attrs {
            a.insert((*k).into(), v.clone());
        }
        RawNode {
            name: name.into(),
            op: op.into(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            attrs: a,
            device: String::new(),
            span: None,
        }
    }

    /// A pure chain far deeper than a test thread's 2 MiB stack allows recursion for (its
    /// values were computed by recursion through `ensure`/`compute_pure`, which aborted
    /// `verify --clusters` on a generated graph of 10⁵ nodes): explored and verified, with
    /// a cluster at its head, to the chain's value.
    #[test]
    fn a_deep_pure_chain_is_computed_without_deep_recursion() {
        const DEPTH: usize = 200_000;
        let int = || AttrValue::Type(DType::Int32);
        let mut nodes = vec![int32_variable("v"), raw("r", "ReadVariableOp", &["v"], &[("dtype", int())])];
        let names: Vec<String> = (0..DEPTH).map(|i| format!("n{i}")).collect();
        for i in 0..DEPTH {
            let input = if i == 0 { "r" } else { names[i - 1].as_str() };
            nodes.push(raw(&names[i], "Neg", &[input], &[("T", int())]));
        }
        let graph = Graph::from_raw(nodes, Library::default(), None).unwrap();
        let query = Query { fetches: vec![names[DEPTH - 1].clone()], ..Query::default() };
        let inputs = Inputs { vars: [("v".to_string(), Tensor::scalar_i32(7))].into(), ..Inputs::default() };
        let explored = explore_graph(&graph, &query, None, &inputs, &RuntimeKernels).unwrap();
        assert_eq!(explored.outcomes.len(), 1);
        // An even number of negations.
        assert_eq!(explored.outcomes[0].fetches[0].1.as_i32(), Some(&[7][..]));
        let head = |g: &Graph| {
            let ids = ["r", "n0"].iter().map(|n| g.find(n).expect("chain head")).collect();
            Ok(vec![ClusterSpec { name: "cluster_0".into(), nodes: ids }])
        };
        let verdict = verify(&graph, &query, &head, &inputs, &RuntimeKernels).unwrap();
        assert!(verdict.holds());
        assert_eq!(verdict.clustered.outcomes[0].fetches[0].1.as_i32(), Some(&[7][..]));
    }

    /// A schedule longer than a 256 KiB stack allowed one search frame per step for (the
    /// search recursed once per step, which aborted `verify --clusters` on a generated graph
    /// of 10⁵ nodes): a chain of writes, each after the last, explored and verified with two
    /// of them clustered. (Longer chains are slow to explore in a debug build: every state
    /// scans every step.)
    #[test]
    fn a_long_schedule_is_searched_without_deep_recursion() {
        std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(long_schedule)
            .expect("a test thread")
            .join()
            .expect("explored without overflow");
    }

    fn long_schedule() {
        const WRITES: usize = 1_500;
        let int = || AttrValue::Type(DType::Int32);
        let mut nodes = vec![
            int32_variable("v"),
            raw("one", "Const", &[], &[("dtype", int()), ("value", AttrValue::Tensor(Tensor::scalar_i32(1)))]),
        ];
        let names: Vec<String> = (0..WRITES).map(|i| format!("w{i}")).collect();
        for i in 0..WRITES {
            let after = if i == 0 { None } else { Some(format!("^{}", names[i - 1])) };
            let mut inputs = vec!["v", "one"];
            inputs.extend(after.as_deref());
            nodes.push(raw(&names[i], "AssignAddVariableOp", &inputs, &[("dtype", int())]));
        }
        let graph = Graph::from_raw(nodes, Library::default(), None).unwrap();
        let query = Query { targets: vec![names[WRITES - 1].clone()], ..Query::default() };
        let inputs = Inputs { vars: [("v".to_string(), Tensor::scalar_i32(7))].into(), ..Inputs::default() };
        let explored = explore_graph(&graph, &query, None, &inputs, &RuntimeKernels).unwrap();
        assert_eq!(explored.outcomes.len(), 1);
        assert_eq!(explored.outcomes[0].variables[0].1.as_i32(), Some(&[7 + WRITES as i32][..]));
        // Each read-modify-write is two steps (its read, its write) unless atomic.
        assert_eq!(explored.witnesses[0].len(), 2 * WRITES);
        let pair = |g: &Graph| {
            let ids = ["w0", "w1"].iter().map(|n| g.find(n).expect("first writes")).collect();
            Ok(vec![ClusterSpec { name: "cluster_0".into(), nodes: ids }])
        };
        let verdict = verify(&graph, &query, &pair, &inputs, &RuntimeKernels).unwrap();
        assert!(verdict.holds());
    }
}
