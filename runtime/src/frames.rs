//! The frame-aware executor for TensorFlow 1 control flow (control flow v1:
//! `Switch`, `Merge`, `Enter`, `Exit`, `NextIteration`, `LoopCond`,
//! `ControlTrigger` and their `Ref*` forms), chosen by [`crate::executor::Plan`]
//! only when the planned nodes contain one of these ops; every other graph
//! keeps the plain dataflow executor.
//!
//! It follows TensorFlow's executor (`propagator_state.cc`) rule for rule:
//! - **Dead tensors**: an output without a value. A node with a dead data
//!   input or a control input from a dead node is dead: its kernel does not
//!   run and all its outputs (and its control edges) are dead. `Switch`
//!   produces one live and one dead output; `Merge` runs when all its control
//!   inputs and one live data input have arrived (output: the value and its
//!   `value_index`) and is dead only when all its data inputs are dead (or one
//!   comes from a dead `Enter`: a loop on an untaken branch);
//!   `ControlTrigger` is never dead.
//! - **Frames**: an `Enter` moves its value into iteration 0 of the child
//!   frame keyed by (parent frame, parent iteration, `frame_name`) (an
//!   `is_constant` `Enter` into every iteration, present and future);
//!   `NextIteration` into the next iteration of its frame (a dead one stops);
//!   `Exit` into the parent frame's iteration (a dead `Exit` of the frame's
//!   last iteration reaches the parent as dead when the frame completes).
//!   Every (frame, iteration) has its own pending counts; at most
//!   `parallel_iterations` iterations of a frame are in flight (a
//!   `NextIteration` past the window waits for the oldest iteration to
//!   finish); a frame that would start iteration `max_loop_iterations + 1` is
//!   an error naming the frame.
//!
//! The schedule runs on the calling thread (the `parallel` schedule runs the
//! deterministic one): first-in first-out, or uniformly among the ready
//! nodes under a seed. Fetching a dead output is an error naming the node
//! (TensorFlow: "Retval\[0\] does not have value").

use std::collections::{HashMap, VecDeque};

use autoclust_graph::{Graph, NodeId, Output, Tensor};
use rand::{Rng, SeedableRng};

use crate::error::{KernelError, RunError};
use crate::executor::{NodeKernel, RunContext, Schedule};

pub(crate) enum Kind {
    /// Runs its kernel.
    Kernel(NodeKernel),
    /// Passes input 0 through (`LoopCond`).
    Forward,
    Switch,
    Merge,
    Enter {
        frame: u32,
        constant: bool,
        parallel: u32,
    },
    Exit,
    NextIteration,
    ControlTrigger,
}

pub(crate) struct FNode {
    pub id: NodeId,
    pub kind: Kind,
    pub n_data: u32,
    /// Data inputs plus control inputs (TensorFlow's pending count; a `Merge`
    /// counts `2 * control + 1`).
    pub pending: u32,
    pub input_base: u32,
    pub n_outputs: u32,
    /// (output port, consumer, consumer's input index).
    pub out_edges: Vec<(u32, u32, u32)>,
    pub control_out: Vec<u32>,
}

/// The frame-aware form of a plan.
pub(crate) struct FramePlan {
    pub nodes: Vec<FNode>,
    pub roots: Vec<u32>,
    pub total_inputs: u32,
    /// (planned node, port) of each fetch.
    pub fetches: Vec<(u32, u32)>,
    pub frame_names: Vec<String>,
    /// `Enter` nodes per frame name (a frame instance is complete once all arrived).
    pub frame_inputs: Vec<u32>,
    pub max_loop_iterations: u64,
}

impl FramePlan {
    /// Builds the frame-aware plan of the planned nodes `ids` (`plan_index`
    /// maps a graph node to its plan index); `kernel` prepares each kernel.
    pub(crate) fn build(
        graph: &Graph,
        ids: &[NodeId],
        plan_index: &[u32],
        fed: &dyn Fn(NodeId) -> Option<Vec<u32>>,
        kernel: &mut dyn FnMut(NodeId) -> Result<NodeKernel, RunError>,
        fetches: &[Output],
        max_loop_iterations: u64,
    ) -> Result<FramePlan, RunError> {
        let mut frame_names: Vec<String> = Vec::new();
        let mut frame_inputs: Vec<u32> = Vec::new();
        let mut nodes = Vec::with_capacity(ids.len());
        let mut total_inputs = 0u32;
        for &id in ids {
            let node = graph.node(id);
            let err = |m: String| RunError::Node {
                node: node.name.clone(),
                op: node.op.clone(),
                error: KernelError::invalid(m),
            };
            let fed_map = fed(id);
            let is_fed = fed_map.is_some();
            let kind = if let Some(map) = fed_map {
                Kind::Kernel(NodeKernel::Fed(map))
            } else {
                match node.op.as_str() {
                    "Switch" | "RefSwitch" => Kind::Switch,
                    "Merge" | "RefMerge" => Kind::Merge,
                    "Exit" | "RefExit" => Kind::Exit,
                    "NextIteration" | "RefNextIteration" => Kind::NextIteration,
                    "LoopCond" => Kind::Forward,
                    "ControlTrigger" => Kind::ControlTrigger,
                    "Enter" | "RefEnter" => {
                        let name = node
                            .attr("frame_name")
                            .and_then(|a| a.as_str())
                            .ok_or_else(|| err("Enter without a frame_name attribute".into()))?
                            .to_string();
                        let constant = node.attr("is_constant").and_then(|a| a.as_bool()).unwrap_or(false);
                        let parallel = node.attr("parallel_iterations").and_then(|a| a.as_int()).unwrap_or(10);
                        if parallel < 1 {
                            return Err(err(format!("parallel_iterations must be at least 1, got {parallel}")));
                        }
                        let frame = match frame_names.iter().position(|n| *n == name) {
                            Some(f) => f,
                            None => {
                                frame_names.push(name);
                                frame_inputs.push(0);
                                frame_names.len() - 1
                            }
                        };
                        frame_inputs[frame] += 1;
                        Kind::Enter { frame: frame as u32, constant, parallel: parallel.min(u32::MAX as i64) as u32 }
                    }
                    _ => match kernel(id)? {
                        NodeKernel::Fed(_) => {
                            let dtype =
                                node.attr("dtype").and_then(|a| a.as_type()).map(|d| d.name()).unwrap_or_default();
                            return Err(RunError::MissingFeed { node: node.name.clone(), dtype });
                        }
                        k => Kind::Kernel(k),
                    },
                }
            };
            let (n_data, n_control) =
                if is_fed { (0, 0) } else { (node.inputs.len() as u32, node.control_inputs.len() as u32) };
            if matches!(kind, Kind::Switch) && n_data != 2 {
                return Err(err(format!("Switch takes 2 inputs, got {n_data}")));
            }
            if matches!(kind, Kind::Enter { .. } | Kind::Exit | Kind::NextIteration | Kind::Forward) && n_data != 1 {
                return Err(err(format!("{} takes 1 input, got {n_data}", node.op)));
            }
            let pending = if matches!(kind, Kind::Merge) { 2 * n_control + 1 } else { n_data + n_control };
            let n_outputs = match kind {
                Kind::Switch | Kind::Merge => 2,
                Kind::ControlTrigger => 0,
                Kind::Enter { .. } | Kind::Exit | Kind::NextIteration | Kind::Forward => 1,
                Kind::Kernel(_) => graph.output_count(id).unwrap_or(0) as u32,
            };
            nodes.push(FNode {
                id,
                kind,
                n_data,
                pending,
                input_base: total_inputs,
                n_outputs,
                out_edges: Vec::new(),
                control_out: Vec::new(),
            });
            total_inputs += n_data;
        }
        for i in 0..nodes.len() {
            if nodes[i].n_data == 0
                && nodes[i].pending == 0
                && matches!(nodes[i].kind, Kind::Kernel(NodeKernel::Fed(_)))
            {
                continue;
            }
            let node = graph.node(nodes[i].id);
            for (k, o) in node.inputs.iter().enumerate() {
                let p = plan_index[o.node.index()] as usize;
                nodes[p].n_outputs = nodes[p].n_outputs.max(o.port + 1);
                nodes[p].out_edges.push((o.port, i as u32, k as u32));
            }
            for c in &node.control_inputs {
                let p = plan_index[c.index()] as usize;
                nodes[p].control_out.push(i as u32);
            }
        }
        let mut fetch_idx = Vec::with_capacity(fetches.len());
        for o in fetches {
            let p = plan_index[o.node.index()];
            nodes[p as usize].n_outputs = nodes[p as usize].n_outputs.max(o.port + 1);
            fetch_idx.push((p, o.port));
        }
        let roots = (0..nodes.len() as u32)
            .filter(|&i| {
                let n = &nodes[i as usize];
                n.n_data == 0 && n.pending == 0
            })
            .collect();
        Ok(FramePlan { nodes, roots, total_inputs, fetches: fetch_idx, frame_names, frame_inputs, max_loop_iterations })
    }
}

struct IterState {
    pending: Vec<u32>,
    dead: Vec<u32>,
    inputs: Vec<Option<Tensor>>,
    outstanding_ops: u32,
    outstanding_frames: u32,
}

struct Frame {
    name: u32,
    parent: Option<(usize, u64)>,
    iterations: HashMap<u64, IterState>,
    iteration_count: u64,
    outstanding_iterations: u32,
    max_parallel: u32,
    pending_inputs: u32,
    loop_invariants: Vec<(u32, Option<Tensor>)>,
    next_iter_roots: Vec<(u32, Option<Tensor>)>,
    dead_exits: Vec<u32>,
}

/// A ready node: (plan node, frame, iteration, dead).
type Tagged = (u32, usize, u64, bool);

struct Run<'a, 'c> {
    ctx: &'a RunContext<'c>,
    plan: &'a FramePlan,
    frames: Vec<Option<Frame>>,
    children: HashMap<(usize, u64, u32), usize>,
    ready: VecDeque<Tagged>,
    /// `None` = not produced; `Some(None)` = dead.
    fetched: Vec<Option<Option<Tensor>>>,
    /// Iterations started this step per loop (frame name), over all its instances: a loop
    /// nested in another runs once per outer iteration, and the bound is on its total, so
    /// nested loops cannot multiply it into a hang.
    loop_totals: HashMap<u32, u64>,
}

const ROOT_FRAME: u32 = u32::MAX;

#[cfg(test)]
thread_local! {
    /// The most iterations of one frame in flight during this thread's last run (tests).
    static PEAK_ITERATIONS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

impl<'a, 'c> Run<'a, 'c> {
    fn new_iteration(&self) -> IterState {
        IterState {
            pending: self.plan.nodes.iter().map(|n| n.pending).collect(),
            dead: vec![0; self.plan.nodes.len()],
            inputs: vec![None; self.plan.total_inputs as usize],
            outstanding_ops: 0,
            outstanding_frames: 0,
        }
    }

    fn frame(&mut self, f: usize) -> &mut Frame {
        self.frames[f].as_mut().expect("a live frame")
    }

    fn iter_state(&mut self, f: usize, iter: u64) -> &mut IterState {
        self.frame(f).iterations.get_mut(&iter).expect("a live iteration")
    }

    fn frame_name(&self, f: usize) -> String {
        let name = self.frames[f].as_ref().map(|fr| fr.name).unwrap_or(ROOT_FRAME);
        if name == ROOT_FRAME {
            "(root)".into()
        } else {
            self.plan.frame_names[name as usize].clone()
        }
    }

    fn node_error(&self, i: u32, error: KernelError) -> RunError {
        let node = self.ctx.graph.node(self.plan.nodes[i as usize].id);
        RunError::Node { node: node.name.clone(), op: node.op.clone(), error }
    }

    /// TensorFlow's `ActivateNodes`: delivers `outputs` of node `i` to its
    /// consumers in (`f`, `iter`); ready consumers join the queue.
    fn activate(&mut self, i: u32, f: usize, iter: u64, outputs: &[Option<Tensor>], is_dead: bool) {
        let plan = self.plan;
        let node = &plan.nodes[i as usize];
        let mut newly_ready: Vec<Tagged> = Vec::new();
        {
            let st = self.iter_state(f, iter);
            let is_enter = matches!(node.kind, Kind::Enter { .. });
            let edges = node
                .out_edges
                .iter()
                .map(|&(port, dst, k)| (Some((port, k)), dst))
                .chain(node.control_out.iter().map(|&dst| (None, dst)));
            for (data, dst) in edges {
                let d = &plan.nodes[dst as usize];
                let di = dst as usize;
                let value = match data {
                    Some((port, _)) if !is_dead => outputs.get(port as usize).cloned().flatten(),
                    _ => None,
                };
                let (ready, dead) = if matches!(d.kind, Kind::Merge) {
                    match data {
                        None => {
                            st.pending[di] -= 2;
                            if is_dead {
                                // A dead control input makes TensorFlow's Merge dead only
                                // through its data inputs; the control edge just arrives.
                            }
                            let count = st.pending[di];
                            let dead = st.dead[di] == d.n_data;
                            (count == 0 || (count == 1 && dead), dead)
                        }
                        Some((_, k)) => {
                            if let Some(v) = value {
                                let count = st.pending[di];
                                st.pending[di] &= !1;
                                if count & 1 == 1 {
                                    st.inputs[(d.input_base + k) as usize] = Some(v);
                                }
                                (count == 1, false)
                            } else {
                                st.dead[di] += 1;
                                let dead = st.dead[di] == d.n_data || is_enter;
                                (st.pending[di] == 1 && dead, dead)
                            }
                        }
                    }
                } else {
                    let increment_dead = is_dead || (data.is_some() && value.is_none());
                    if let (Some((_, k)), Some(v)) = (data, value) {
                        st.inputs[(d.input_base + k) as usize] = Some(v);
                    }
                    st.pending[di] -= 1;
                    if increment_dead {
                        st.dead[di] += 1;
                    }
                    (st.pending[di] == 0, st.dead[di] > 0)
                };
                if ready {
                    let dead = dead && !matches!(d.kind, Kind::ControlTrigger);
                    st.outstanding_ops += 1;
                    newly_ready.push((dst, f, iter, dead));
                }
            }
        }
        self.ready.extend(newly_ready);
    }

    fn activate_loop_invariants(&mut self, f: usize, iter: u64) {
        let invs = self.frame(f).loop_invariants.clone();
        for (i, v) in invs {
            let dead = v.is_none();
            self.activate(i, f, iter, &[v], dead);
        }
    }

    fn increment_iteration(&mut self, f: usize) -> Result<u64, RunError> {
        let limit = self.plan.max_loop_iterations;
        let next = self.frame(f).iteration_count + 1;
        let loop_name = self.frame(f).name;
        let total = self.loop_totals.entry(loop_name).or_insert(0);
        *total += 1;
        if next > limit || *total > limit {
            let name = self.frame_name(f);
            let i = self.plan.nodes.iter().position(
                |n| matches!(n.kind, Kind::Enter { frame, .. } if self.plan.frame_names[frame as usize] == name),
            );
            let msg = format!(
                "the while loop of frame '{name}' ran {limit} iterations in this step (over all its \
                 instances) and is still going: --max-loop-iterations {limit} reached (raise it if the \
                 loop is meant to run longer)"
            );
            return Err(match i {
                Some(i) => self.node_error(i as u32, KernelError::invalid(msg)),
                None => RunError::BadRequest { name, message: msg },
            });
        }
        let st = self.new_iteration();
        let fr = self.frame(f);
        fr.iteration_count = next;
        fr.iterations.insert(next, st);
        fr.outstanding_iterations += 1;
        #[cfg(test)]
        {
            let n = fr.outstanding_iterations;
            PEAK_ITERATIONS.with(|p| p.set(p.get().max(n)));
        }
        fr.dead_exits.clear();
        let roots = std::mem::take(&mut fr.next_iter_roots);
        for (i, v) in roots {
            self.activate(i, f, next, &[v], false);
        }
        self.activate_loop_invariants(f, next);
        Ok(next)
    }

    fn is_iteration_done(&self, f: usize, iter: u64) -> bool {
        let fr = self.frames[f].as_ref().expect("a live frame");
        let Some(st) = fr.iterations.get(&iter) else { return false };
        if st.outstanding_ops == 0 && st.outstanding_frames == 0 {
            if iter == 0 {
                fr.pending_inputs == 0
            } else {
                !fr.iterations.contains_key(&(iter - 1))
            }
        } else {
            false
        }
    }

    /// Deletes finished iterations from `iter` on; whether the frame is done.
    fn cleanup_iterations(&mut self, f: usize, iter: u64) -> Result<bool, RunError> {
        let mut curr = iter;
        while curr <= self.frame(f).iteration_count && self.is_iteration_done(f, curr) {
            let fr = self.frame(f);
            fr.iterations.remove(&curr);
            fr.outstanding_iterations -= 1;
            curr += 1;
            if !self.frame(f).next_iter_roots.is_empty() {
                self.increment_iteration(f)?;
            }
        }
        let fr = self.frame(f);
        Ok(fr.pending_inputs == 0 && fr.outstanding_iterations == 0 && fr.parent.is_some())
    }

    fn decrement_outstanding(&mut self, f: usize, iter: u64) -> Result<bool, RunError> {
        let st = self.iter_state(f, iter);
        st.outstanding_ops -= 1;
        if st.outstanding_ops == 0 {
            self.cleanup_iterations(f, iter)
        } else {
            Ok(false)
        }
    }

    /// TensorFlow's `DeleteFrame` then `CleanupFramesIterations` up the parents.
    fn frame_done(&mut self, f: usize) -> Result<(), RunError> {
        let mut f = f;
        loop {
            let fr = self.frames[f].take().expect("a live frame");
            let Some((pf, piter)) = fr.parent else { return Ok(()) };
            self.children.remove(&(pf, piter, fr.name));
            // Dead exits reach the parent as dead inputs.
            let plan = self.plan;
            let mut newly_ready = Vec::new();
            {
                let st = self.iter_state(pf, piter);
                for &e in &fr.dead_exits {
                    let node = &plan.nodes[e as usize];
                    let dsts = node.out_edges.iter().map(|e| e.1).chain(node.control_out.iter().copied());
                    for dst in dsts {
                        let d = &plan.nodes[dst as usize];
                        let di = dst as usize;
                        st.dead[di] += 1;
                        let (ready, mut dead) = if matches!(d.kind, Kind::Merge) {
                            let dead = st.dead[di] == d.n_data;
                            (st.pending[di] == 1 && dead, dead)
                        } else {
                            st.pending[di] -= 1;
                            (st.pending[di] == 0, true)
                        };
                        if ready {
                            if matches!(d.kind, Kind::ControlTrigger) {
                                dead = false;
                            }
                            st.outstanding_ops += 1;
                            newly_ready.push((dst, pf, piter, dead));
                        }
                    }
                }
                st.outstanding_frames -= 1;
            }
            self.ready.extend(newly_ready);
            if self.cleanup_iterations(pf, piter)? {
                f = pf;
            } else {
                return Ok(());
            }
        }
    }

    fn child_frame(&mut self, f: usize, iter: u64, name: u32, parallel: u32) -> usize {
        if let Some(&c) = self.children.get(&(f, iter, name)) {
            return c;
        }
        let mut iterations = HashMap::new();
        iterations.insert(0, self.new_iteration());
        self.frames.push(Some(Frame {
            name,
            parent: Some((f, iter)),
            iterations,
            iteration_count: 0,
            outstanding_iterations: 1,
            max_parallel: parallel,
            pending_inputs: self.plan.frame_inputs[name as usize],
            loop_invariants: Vec::new(),
            next_iter_roots: Vec::new(),
            dead_exits: Vec::new(),
        }));
        let c = self.frames.len() - 1;
        self.children.insert((f, iter, name), c);
        self.iter_state(f, iter).outstanding_frames += 1;
        c
    }

    /// Runs one ready node and propagates its outputs.
    fn process(&mut self, (i, f, iter, is_dead): Tagged) -> Result<(), RunError> {
        let plan = self.plan;
        let node = &plan.nodes[i as usize];
        let n_out = node.n_outputs as usize;
        let mut inputs: Vec<Option<Tensor>> = {
            let st = self.iter_state(f, iter);
            let base = node.input_base as usize;
            st.inputs[base..base + node.n_data as usize].iter_mut().map(Option::take).collect()
        };
        let transfer = matches!(node.kind, Kind::Enter { .. } | Kind::Exit | Kind::NextIteration);
        let outputs: Vec<Option<Tensor>> = if is_dead && !transfer {
            vec![None; n_out]
        } else {
            match &node.kind {
                Kind::Enter { .. } | Kind::Exit | Kind::NextIteration | Kind::Forward => {
                    vec![if is_dead { None } else { inputs[0].take() }]
                }
                Kind::ControlTrigger => Vec::new(),
                Kind::Switch => {
                    let pred = inputs[1].take().ok_or_else(|| self.missing(i, 1))?;
                    let p = pred.as_bool().filter(|b| b.len() == 1 && pred.shape.is_empty()).map(|b| b[0]).ok_or_else(
                        || {
                            self.node_error(
                                i,
                                KernelError::invalid(format!(
                                    "pred must be a scalar bool, got {} {:?}",
                                    pred.dtype, pred.shape
                                )),
                            )
                        },
                    )?;
                    let v = inputs[0].take().ok_or_else(|| self.missing(i, 0))?;
                    if p {
                        vec![None, Some(v)]
                    } else {
                        vec![Some(v), None]
                    }
                }
                Kind::Merge => {
                    let (k, v) = inputs
                        .iter_mut()
                        .enumerate()
                        .find_map(|(k, v)| v.take().map(|v| (k, v)))
                        .ok_or_else(|| self.missing(i, 0))?;
                    vec![Some(v), Some(Tensor::scalar_i32(k as i32))]
                }
                Kind::Kernel(k) => {
                    let outs = match k {
                        NodeKernel::Fed(map) => {
                            let mut outs = vec![None; n_out.max(map.len())];
                            for (port, &k) in map.iter().enumerate() {
                                if k != u32::MAX {
                                    outs[port] = self.ctx.feeds[k as usize].lock().clone();
                                }
                            }
                            outs
                        }
                        _ => {
                            let mut vals = crate::kernels::Inputs::with_capacity(inputs.len());
                            for (k, v) in inputs.iter_mut().enumerate() {
                                vals.push(v.take().ok_or_else(|| self.missing(i, k))?);
                            }
                            let res = match k {
                                NodeKernel::Pure(func) => func(vals),
                                NodeKernel::Stateful(func) => func(self.ctx.store, vals),
                                NodeKernel::Fed(_) => unreachable!("handled above"),
                            };
                            let outs = res.map_err(|e| self.node_error(i, e))?;
                            if outs.len() < n_out {
                                return Err(self.node_error(
                                    i,
                                    KernelError::invalid(format!(
                                        "output port {} is out of range: the op produced {} outputs",
                                        n_out - 1,
                                        outs.len()
                                    )),
                                ));
                            }
                            outs.into_iter().map(Some).collect()
                        }
                    };
                    outs
                }
            }
        };
        if !matches!(node.kind, Kind::Exit) {
            self.record_fetches(i, f, &outputs, true);
        }
        let frame_done = match node.kind {
            Kind::Enter { frame, constant, parallel } => {
                let child = self.child_frame(f, iter, frame, parallel);
                let v = if is_dead { None } else { outputs.into_iter().next().flatten() };
                if constant {
                    self.frame(child).loop_invariants.push((i, v.clone()));
                    let iters: Vec<u64> = {
                        let mut it: Vec<u64> = self.frame(child).iterations.keys().copied().collect();
                        it.sort_unstable();
                        it
                    };
                    for it in iters {
                        self.activate(i, child, it, std::slice::from_ref(&v), v.is_none());
                    }
                } else {
                    let dead = v.is_none();
                    self.activate(i, child, 0, &[v], dead);
                }
                self.frame(child).pending_inputs -= 1;
                if self.frame(child).pending_inputs == 0 && self.cleanup_iterations(child, 0)? {
                    self.frame_done(child)?;
                }
                self.decrement_outstanding(f, iter)?
            }
            Kind::Exit => {
                if is_dead {
                    if let Some((pf, _)) = self.frame(f).parent {
                        self.record_fetches(i, pf, &[], false);
                    }
                    let fr = self.frame(f);
                    if iter == fr.iteration_count {
                        fr.dead_exits.push(i);
                    }
                } else {
                    let (pf, piter) = self.frame(f).parent.ok_or_else(|| {
                        self.node_error(i, KernelError::invalid("Exit outside of any while loop frame"))
                    })?;
                    self.record_fetches(i, pf, &outputs, true);
                    self.activate(i, pf, piter, &outputs, false);
                }
                self.decrement_outstanding(f, iter)?
            }
            Kind::NextIteration => {
                if !is_dead && outputs[0].is_some() {
                    let fr = self.frame(f);
                    if iter == fr.iteration_count && fr.outstanding_iterations == fr.max_parallel {
                        let v = outputs.into_iter().next().flatten();
                        fr.next_iter_roots.push((i, v));
                    } else {
                        let out_iter = if iter == fr.iteration_count { self.increment_iteration(f)? } else { iter + 1 };
                        self.activate(i, f, out_iter, &outputs, false);
                    }
                }
                self.decrement_outstanding(f, iter)?
            }
            _ => {
                self.activate(i, f, iter, &outputs, is_dead);
                self.decrement_outstanding(f, iter)?
            }
        };
        if frame_done {
            self.frame_done(f)?;
        }
        Ok(())
    }

    /// Keeps the fetched outputs of node `i` whose values land in frame `f` if that is
    /// the root frame. A dead value (an `Exit` of an earlier iteration) never replaces
    /// a live one; `overwrite` is false for those.
    fn record_fetches(&mut self, i: u32, f: usize, outputs: &[Option<Tensor>], overwrite: bool) {
        if self.frames[f].as_ref().is_none_or(|fr| fr.parent.is_some()) {
            return;
        }
        for (k, &(fi, port)) in self.plan.fetches.iter().enumerate() {
            if fi == i && (overwrite || self.fetched[k].is_none()) {
                self.fetched[k] = Some(outputs.get(port as usize).cloned().flatten());
            }
        }
    }

    fn missing(&self, i: u32, k: usize) -> RunError {
        self.node_error(i, KernelError::invalid(format!("internal error: input {k} has no value when the node ran")))
    }
}

/// Runs a frame-aware plan; returns the fetched values in fetch order.
pub(crate) fn run(ctx: &RunContext<'_>, plan: &FramePlan, schedule: Schedule<'_>) -> Result<Vec<Tensor>, RunError> {
    #[cfg(test)]
    PEAK_ITERATIONS.with(|p| p.set(0));
    let outer = crate::containers::begin_run();
    let result = run_frames(ctx, plan, schedule);
    crate::containers::end_run(outer);
    result
}

fn run_frames(ctx: &RunContext<'_>, plan: &FramePlan, schedule: Schedule<'_>) -> Result<Vec<Tensor>, RunError> {
    let mut run = Run {
        ctx,
        plan,
        frames: Vec::new(),
        children: HashMap::new(),
        ready: VecDeque::new(),
        fetched: vec![None; plan.fetches.len()],
        loop_totals: HashMap::new(),
    };
    let mut root_iter = run.new_iteration();
    root_iter.outstanding_ops = plan.roots.len() as u32;
    let mut iterations = HashMap::new();
    iterations.insert(0, root_iter);
    run.frames.push(Some(Frame {
        name: ROOT_FRAME,
        parent: None,
        iterations,
        iteration_count: 0,
        outstanding_iterations: 1,
        max_parallel: 1,
        pending_inputs: 0,
        loop_invariants: Vec::new(),
        next_iter_roots: Vec::new(),
        dead_exits: Vec::new(),
    }));
    run.ready.extend(plan.roots.iter().map(|&i| (i, 0usize, 0u64, false)));
    let mut rng = match schedule {
        Schedule::Seeded(seed) => Some(rand::rngs::StdRng::seed_from_u64(seed)),
        _ => None,
    };
    loop {
        let next = match &mut rng {
            Some(rng) if !run.ready.is_empty() => {
                let k = rng.gen_range(0..run.ready.len());
                run.ready.swap_remove_back(k)
            }
            _ => run.ready.pop_front(),
        };
        let Some(t) = next else { break };
        run.process(t)?;
    }
    let graph = ctx.graph;
    run.fetched
        .into_iter()
        .enumerate()
        .map(|(k, v)| {
            let (i, port) = plan.fetches[k];
            let name = format!("{}:{port}", graph.name(plan.nodes[i as usize].id));
            match v {
                Some(Some(t)) => Ok(t),
                Some(None) => Err(RunError::BadRequest {
                    name,
                    message: format!(
                        "Retval[{k}] does not have value: the fetched output is dead (it lies on an untaken \
                         branch of a Switch)"
                    ),
                }),
                None => Err(RunError::BadRequest {
                    name,
                    message: format!(
                        "Retval[{k}] does not have value: the node never ran (a control-flow frame never \
                         completed: its inputs come from different frames or a loop never reached it)"
                    ),
                }),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use autoclust_graph::{text, Tensor};

    use crate::{RunError, RunRequest, Session, SessionOptions};

    const VAR: &str = "v = VarHandleOp() {container = \"\", dtype = float32, shape = shape[], shared_name = \"v\"}\n";

    fn session(src: &str, options: SessionOptions) -> Session {
        let graph = text::parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        Session::new(Arc::new(graph), options)
    }

    fn run(s: &Session, feeds: &[(&str, Tensor)], fetches: &[&str]) -> Result<Vec<Tensor>, RunError> {
        let req = RunRequest {
            feeds: feeds.iter().map(|(n, t)| (s.output(n).unwrap(), t.clone())).collect(),
            fetches: fetches.iter().map(|n| s.output(n).unwrap()).collect(),
            targets: Vec::new(),
        };
        s.run(&req).map(|o| o.fetches)
    }

    fn var(s: &Session) -> f32 {
        s.variables().iter().find(|(n, _)| n == "v").unwrap().1.as_f32().unwrap()[0]
    }

    /// `x` through a Switch on `p`: the false branch negates, the true branch
    /// adds one to the variable and doubles `x`; a Merge joins them.
    const COND: &str = "x = Placeholder() {dtype = float32, shape = shape[]}
p = Placeholder() {dtype = bool, shape = shape[]}
sw = Switch(x, p) {T = float32}
neg = Neg(sw:0) {T = float32}
dbl = AddV2(sw:1, sw:1) {T = float32}
pivot = Identity(sw:1) {T = float32}
one = Const(^pivot) {dtype = float32, value = float32[]{1.0}}
bump = AssignAddVariableOp(v, one) {dtype = float32}
after = Identity(dbl, ^bump) {T = float32}
m = Merge(neg, after) {N = 2, T = float32}
c = Const() {dtype = float32, value = float32[]{7.0}}
gated = Identity(c, ^dbl) {T = float32}
trigger = ControlTrigger(^dbl)
triggered = Identity(c, ^trigger) {T = float32}
";

    #[test]
    fn switch_kills_one_branch_and_merge_takes_the_live_input() {
        for threads in [1, 4] {
            let s = session(&format!("{VAR}{COND}"), SessionOptions { threads, ..Default::default() });
            s.set_variable("v", Tensor::scalar_f32(0.0)).unwrap();
            let f = |p: bool| vec![("x", Tensor::scalar_f32(3.0)), ("p", Tensor::scalar_bool(p))];
            let out = run(&s, &f(false), &["m:0", "m:1"]).unwrap();
            assert_eq!(out, vec![Tensor::scalar_f32(-3.0), Tensor::scalar_i32(0)]);
            // The dead branch's kernels did not run: the variable is untouched.
            assert_eq!(var(&s), 0.0);
            let out = run(&s, &f(true), &["m:0", "m:1"]).unwrap();
            assert_eq!(out, vec![Tensor::scalar_f32(6.0), Tensor::scalar_i32(1)]);
            assert_eq!(var(&s), 1.0);
        }
    }

    #[test]
    fn deadness_flows_over_control_edges_but_not_into_a_control_trigger() {
        let s = session(&format!("{VAR}{COND}"), SessionOptions::default());
        s.set_variable("v", Tensor::scalar_f32(0.0)).unwrap();
        let feeds = [("x", Tensor::scalar_f32(3.0)), ("p", Tensor::scalar_bool(false))];
        // `gated` waits on the dead `dbl` through a control edge: dead, so fetching it fails.
        let err = run(&s, &feeds, &["gated:0"]).unwrap_err().to_string();
        assert!(err.contains("'gated:0'") && err.contains("Retval[0] does not have value"), "{err}");
        // A dead output fetched directly, the error names the node.
        let err = run(&s, &feeds, &["m:0", "dbl:0"]).unwrap_err().to_string();
        assert!(err.contains("'dbl:0'") && err.contains("Retval[1]"), "{err}");
        // A ControlTrigger is live even when its inputs are dead.
        assert_eq!(run(&s, &feeds, &["triggered:0"]).unwrap(), vec![Tensor::scalar_f32(7.0)]);
    }

    /// `while i < n: i += 1; x = x + x` with `parallel_iterations = par`; `n` and `one`
    /// enter as loop constants; `x` goes through a chain of identities (so the counter can
    /// run ahead of it); `x_source` may put the loop on a branch.
    fn while_loop(par: u32, x_source: &str) -> String {
        format!(
            "n = Placeholder() {{dtype = int32, shape = shape[]}}
zero = Const() {{dtype = int32, value = int32[]{{0}}}}
one = Const() {{dtype = int32, value = int32[]{{1}}}}
i_enter = Enter(zero) {{T = int32, frame_name = \"L\", is_constant = false, parallel_iterations = {par}}}
x_enter = Enter({x_source}) {{T = float32, frame_name = \"L\", is_constant = false, parallel_iterations = {par}}}
n_enter = Enter(n) {{T = int32, frame_name = \"L\", is_constant = true, parallel_iterations = {par}}}
one_enter = Enter(one) {{T = int32, frame_name = \"L\", is_constant = true, parallel_iterations = {par}}}
i_merge = Merge(i_enter, i_next) {{N = 2, T = int32}}
x_merge = Merge(x_enter, x_next) {{N = 2, T = float32}}
less = Less(i_merge, n_enter) {{T = int32}}
cond = LoopCond(less)
i_sw = Switch(i_merge, cond) {{T = int32}}
x_sw = Switch(x_merge, cond) {{T = float32}}
i_body = AddV2(i_sw:1, one_enter) {{T = int32}}
x_body = AddV2(x_sw:1, x_sw:1) {{T = float32}}
x_b1 = Identity(x_body) {{T = float32}}
x_b2 = Identity(x_b1) {{T = float32}}
x_b3 = Identity(x_b2) {{T = float32}}
x_b4 = Identity(x_b3) {{T = float32}}
x_b5 = Identity(x_b4) {{T = float32}}
i_next = NextIteration(i_body) {{T = int32}}
x_next = NextIteration(x_b5) {{T = float32}}
i_exit = Exit(i_sw:0) {{T = int32}}
x_exit = Exit(x_sw:0) {{T = float32}}
"
        )
    }

    #[test]
    fn while_loops_iterate_in_frames_under_every_schedule() {
        let src = format!("x = Placeholder() {{dtype = float32, shape = shape[]}}\n{}", while_loop(10, "x"));
        for options in [
            SessionOptions::default(),
            SessionOptions { threads: 1, ..Default::default() },
            SessionOptions { schedule_seed: Some(3), ..Default::default() },
        ] {
            let s = session(&src, options);
            for (n, want) in [(0, 1.5), (1, 3.0), (5, 48.0)] {
                let feeds = [("x", Tensor::scalar_f32(1.5)), ("n", Tensor::scalar_i32(n))];
                let out = run(&s, &feeds, &["i_exit:0", "x_exit:0"]).unwrap();
                assert_eq!(out, vec![Tensor::scalar_i32(n), Tensor::scalar_f32(want)], "n = {n}");
            }
        }
    }

    #[test]
    fn parallel_iterations_bounds_the_iterations_in_flight() {
        let src = format!("x = Placeholder() {{dtype = float32, shape = shape[]}}\n{}", while_loop(2, "x"));
        let s = session(&src, SessionOptions::default());
        let feeds = [("x", Tensor::scalar_f32(1.0)), ("n", Tensor::scalar_i32(20))];
        let out = run(&s, &feeds, &["x_exit:0"]).unwrap();
        assert_eq!(out, vec![Tensor::scalar_f32(1048576.0)]);
        assert!(super::PEAK_ITERATIONS.with(|p| p.get()) <= 2);
        let src = format!("x = Placeholder() {{dtype = float32, shape = shape[]}}\n{}", while_loop(10, "x"));
        let s = session(&src, SessionOptions::default());
        run(&s, &feeds, &["x_exit:0"]).unwrap();
        // The counter runs ahead of the body when the window allows it.
        assert!(super::PEAK_ITERATIONS.with(|p| p.get()) > 2);
    }

    #[test]
    fn the_loop_iteration_limit_names_the_frame() {
        let src = format!("x = Placeholder() {{dtype = float32, shape = shape[]}}\n{}", while_loop(10, "x"));
        let s = session(&src, SessionOptions { max_loop_iterations: Some(4), ..Default::default() });
        let ok = [("x", Tensor::scalar_f32(1.0)), ("n", Tensor::scalar_i32(4))];
        assert_eq!(run(&s, &ok, &["i_exit:0"]).unwrap(), vec![Tensor::scalar_i32(4)]);
        let over = [("x", Tensor::scalar_f32(1.0)), ("n", Tensor::scalar_i32(5))];
        let err = run(&s, &over, &["i_exit:0"]).unwrap_err().to_string();
        assert!(err.contains("frame 'L'") && err.contains("--max-loop-iterations 4"), "{err}");
    }

    #[test]
    fn a_loop_on_an_untaken_branch_is_dead_and_its_exits_reach_the_merge() {
        // TensorFlow's rule: a dead Enter makes the loop's Merge dead, the frame's dead
        // exits reach the parent once the frame is done.
        let src = format!(
            "x = Placeholder() {{dtype = float32, shape = shape[]}}
p = Placeholder() {{dtype = bool, shape = shape[]}}
sw = Switch(x, p) {{T = float32}}
other = Neg(sw:0) {{T = float32}}
{}
m = Merge(other, x_exit) {{N = 2, T = float32}}
",
            while_loop(10, "sw:1")
        );
        let s = session(&src, SessionOptions::default());
        let f =
            |p: bool| vec![("x", Tensor::scalar_f32(2.0)), ("p", Tensor::scalar_bool(p)), ("n", Tensor::scalar_i32(3))];
        assert_eq!(run(&s, &f(true), &["m:0"]).unwrap(), vec![Tensor::scalar_f32(16.0)]);
        assert_eq!(run(&s, &f(false), &["m:0"]).unwrap(), vec![Tensor::scalar_f32(-2.0)]);
        let err = run(&s, &f(false), &["x_exit:0"]).unwrap_err().to_string();
        assert!(err.contains("Retval[0] does not have value"), "{err}");
    }

    #[test]
    fn nested_loops_get_one_frame_per_outer_iteration() {
        // for i in 0..n: for j in 0..i: acc += 1  (acc = n(n-1)/2)
        let src = "n = Placeholder() {dtype = int32, shape = shape[]}
zero = Const() {dtype = int32, value = int32[]{0}}
one = Const() {dtype = int32, value = int32[]{1}}
i_enter = Enter(zero) {T = int32, frame_name = \"outer\", parallel_iterations = 10}
a_enter = Enter(zero) {T = int32, frame_name = \"outer\", parallel_iterations = 10}
n_enter = Enter(n) {T = int32, frame_name = \"outer\", is_constant = true, parallel_iterations = 10}
one_o = Enter(one) {T = int32, frame_name = \"outer\", is_constant = true, parallel_iterations = 10}
i_m = Merge(i_enter, i_next) {N = 2, T = int32}
a_m = Merge(a_enter, a_next) {N = 2, T = int32}
lc = LoopCond(lt)
lt = Less(i_m, n_enter) {T = int32}
i_sw = Switch(i_m, lc) {T = int32}
a_sw = Switch(a_m, lc) {T = int32}
pivot = Identity(i_sw:1) {T = int32}
j0 = Const(^pivot) {dtype = int32, value = int32[]{0}}
j_enter = Enter(j0) {T = int32, frame_name = \"inner\", parallel_iterations = 10}
b_enter = Enter(a_sw:1) {T = int32, frame_name = \"inner\", parallel_iterations = 10}
lim = Enter(i_sw:1) {T = int32, frame_name = \"inner\", is_constant = true, parallel_iterations = 10}
one_i = Enter(one_o) {T = int32, frame_name = \"inner\", is_constant = true, parallel_iterations = 10}
j_m = Merge(j_enter, j_next) {N = 2, T = int32}
b_m = Merge(b_enter, b_next) {N = 2, T = int32}
ilt = Less(j_m, lim) {T = int32}
ilc = LoopCond(ilt)
j_sw = Switch(j_m, ilc) {T = int32}
b_sw = Switch(b_m, ilc) {T = int32}
j_b = AddV2(j_sw:1, one_i) {T = int32}
b_b = AddV2(b_sw:1, one_i) {T = int32}
j_next = NextIteration(j_b) {T = int32}
b_next = NextIteration(b_b) {T = int32}
b_exit = Exit(b_sw:0) {T = int32}
i_b = AddV2(i_sw:1, one_o) {T = int32}
i_next = NextIteration(i_b) {T = int32}
a_next = NextIteration(b_exit) {T = int32}
a_exit = Exit(a_sw:0) {T = int32}
";
        for options in [SessionOptions::default(), SessionOptions { schedule_seed: Some(9), ..Default::default() }] {
            let s = session(src, options);
            for n in [0, 1, 6] {
                let out = run(&s, &[("n", Tensor::scalar_i32(n))], &["a_exit:0"]).unwrap();
                assert_eq!(out, vec![Tensor::scalar_i32(n * (n - 1) / 2)], "n = {n}");
            }
        }
    }
}
