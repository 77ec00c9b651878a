//! Partitioning an analysed body into steps, and running them.
//!
//! Fusion rule: elementwise nodes are visited in topological order; a node joins the group
//! of one of its elementwise producers when its output shape equals the group's loop shape
//! and none of its other inputs depends (transitively, through any node) on that group.
//! Its other producer groups of that shape merge into the same group when no path leaves
//! one of them and enters another (siblings such as Adam's `m·α` and `√v + ε` chains, whose
//! meeting would otherwise store one chain's result and reload it). That keeps every group
//! convex — nothing leaves a group and comes back — so the step graph stays acyclic and a
//! group can run as one loop nest after all its external inputs exist. A MatMul whose only consumer is in a group of its output shape becomes that
//! group's GEMM prologue (the epilogue is the group's loop).
//!
//! Regions: with more than one thread, runs of steps too small to split themselves across
//! the cores (an LSTM cell's products, a VAE's two GEMM chains, the thousands of small
//! convolutions and loops of a convolutional network's training step) run on the team's
//! threads in dependency order ([`region`]).

mod region;

use std::sync::Arc;

use autoclust_graph::{DType, Graph, NodeId, Tensor, TensorData};
use smallvec::SmallVec;

use crate::analyze::{broadcast_strides, Analysis, EwOp, NodeKind};
use crate::buffers::{fresh_stamp, BufferPool, Derived, Pooled, POOL_MIN_BYTES};
use crate::codegen::{
    scalar_ok, vector_ok, CodeGen, FusedCode, FusedSpec, GemmSpec, JitCode, KernelFn, Member, Operand,
};
use crate::kernels::KernelOp;
use crate::scatter::ScatterBase;
use crate::{CompileError, CompilerOptions};

pub(crate) type ValueId = usize;

#[derive(Clone, Debug)]
pub(crate) struct GemmPrologue {
    func: usize,
    a: ValueId,
    b: ValueId,
    out: ValueId,
}

/// One 16-byte entry of a fused loop's constant table (aligned, so loads from it may be
/// folded into SSE instructions as memory operands).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(16))]
pub(crate) struct ConstLanes(pub [u32; 4]);

#[derive(Clone, Debug)]
pub(crate) enum StepKind {
    Fused {
        func: usize,
        dims: Vec<usize>,
        gemm: Option<GemmPrologue>,
        ops: usize,
        ext: Vec<ValueId>,
        /// The loop's constants; their address is passed after the outputs.
        consts: Vec<ConstLanes>,
        /// The ops its tiles compute with tile routines (empty: f32x4 code only).
        tile_ops: Vec<EwOp>,
        /// The tier of those routines.
        tile_tier: Option<crate::TileTier>,
        /// Whether the loop runs four elements at a time (f32x4 data, i32x4 masks); a
        /// scalar loop (other dtypes, ops without a vector lowering) says so in profiles.
        vector: bool,
    },
    Gemm {
        func: usize,
        m: usize,
        n: usize,
    },
    Kernel {
        op: KernelOp,
    },
    View,
}

#[derive(Clone, Debug)]
pub(crate) struct Step {
    /// The node (or the group's first node) this step lowers, for errors and logs.
    name: String,
    kind: StepKind,
    inputs: Vec<ValueId>,
    outputs: Vec<ValueId>,
}

/// A compiled body: steps over a value table, plus the JIT code they call.
pub(crate) struct Program {
    /// The function this program compiles (for profiles).
    name: String,
    pub(crate) steps: Vec<Step>,
    fns: Vec<KernelFn>,
    types: Vec<(DType, Vec<usize>)>,
    args: Vec<Option<ValueId>>,
    constants: Vec<(ValueId, Tensor)>,
    retvals: Vec<ValueId>,
    /// Values to drop after each step (their last use).
    free_after: Vec<Vec<ValueId>>,
    threads: usize,
    /// Recycled output buffers (see [`crate::buffers`]), shared by values whose buffers are
    /// never live at once ([`assign_pools`]).
    pools: Vec<BufferPool>,
    /// Each value's pool (an index into `pools`).
    pool_of: Vec<u32>,
    /// The step index of each value's last use (`None`: never read by a step).
    last_use: Vec<Option<usize>>,
    /// Whether each value is a donatable argument or one of its views (never moved into a
    /// host step: a failed call hands it back).
    donatable: Vec<bool>,
    /// Outputs that may be computed into an argument's buffer (see [`InPlace`]).
    pub(crate) in_place: Vec<InPlace>,
    /// Per step: the in-place pairs (indices into `in_place`) whose output it computes.
    donates: Vec<SmallVec<[u32; 1]>>,
    /// The concurrent regions, in step order ([`region`]).
    regions: Vec<region::Region>,
    /// Declared last so the code outlives nothing that points into it.
    _code: JitCode,
}

/// An output a call may compute into the buffer of one of its arguments, when the caller
/// donates that argument (passes the only reference to its buffer; XLA's input/output
/// aliasing, jax's buffer donation): the argument (or a view of it) is last read by the
/// fused loop that writes the output — or is the tensor a TensorScatter writes its
/// updates into (an embedding table's sparse update) —, with the output's own dtype and shape (of at least
/// `POOL_MIN_BYTES`: smaller ones are cheaper to allocate) — so each
/// element is read before the same element is written, and by nothing after —, it is no
/// output itself, and no step after that loop can fail (a failed call must leave the
/// argument as it was).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InPlace {
    /// The `_Arg` index and the `_Retval` index.
    pub arg: usize,
    pub retval: usize,
    /// The argument's value and the output's value.
    value: ValueId,
    out: ValueId,
    /// The argument's value and its views (they share its buffer).
    alias: Vec<ValueId>,
    /// Later scatter steps whose indices are known when the output is computed: the only
    /// steps after it that may fail, and only on their indices, which are checked before
    /// the buffer is written ([`Program::donated_out`]).
    prechecks: Vec<usize>,
}

/// A call's donated buffers, indexed like `Program::in_place`: the write pointer into the
/// argument's buffer, taken while the call held its only reference.
pub(crate) type Donated = [Option<*mut u8>];

/// The outputs of `steps` that may be computed into an argument's buffer ([`InPlace`]).
fn in_place_pairs(
    steps: &[Step],
    args: &[Option<ValueId>],
    retvals: &[ValueId],
    types: &[(DType, Vec<usize>)],
    last_use: &[Option<usize>],
) -> Vec<InPlace> {
    let mut pairs: Vec<InPlace> = Vec::new();
    // The step computing each value (`None`: an argument or a constant), and the value a
    // view's buffer belongs to.
    let mut made_at: Vec<Option<usize>> = vec![None; types.len()];
    let mut root: Vec<ValueId> = (0..types.len()).collect();
    for (k, s) in steps.iter().enumerate() {
        for &o in &s.outputs {
            made_at[o] = Some(k);
        }
        if let (StepKind::View, Some(&o), Some(&i)) = (&s.kind, s.outputs.first(), s.inputs.first()) {
            root[o] = root[i];
        }
    }
    let buffer_of = |v: ValueId| root[v];
    for (arg, value) in args.iter().enumerate() {
        let Some(value) = *value else { continue };
        // The argument and its views (they share its buffer), in step order.
        let mut alias = vec![value];
        for s in steps {
            if matches!(s.kind, StepKind::View) && alias.contains(&s.inputs[0]) {
                alias.extend(&s.outputs);
            }
        }
        if alias.iter().any(|v| retvals.contains(v)) {
            continue;
        }
        let Some(si) = alias.iter().filter_map(|&v| last_use[v]).max() else { continue };
        let step = &steps[si];
        let read: Vec<ValueId> = match &step.kind {
            StepKind::Fused { ext, .. } => ext.iter().copied().filter(|v| alias.contains(v)).collect(),
            // A scatter reads each slice of its tensor (input 0) only to combine it with an
            // update written to the same slice, and checks its indices before writing
            // anything; its indices and updates must not share the buffer.
            StepKind::Kernel { op: KernelOp::Scatter { .. } }
                if step.inputs.len() == 3
                    && alias.contains(&step.inputs[0])
                    && !step.inputs[1..].iter().any(|v| alias.contains(v)) =>
            {
                vec![step.inputs[0]]
            }
            _ => continue,
        };
        let Some(&first) = read.first() else { continue };
        let shape = &types[first].1;
        // Small buffers are cheaper to allocate than to donate (the caller locks variables).
        if shape.iter().product::<usize>() * elem_bytes(types[first].0) < POOL_MIN_BYTES {
            continue;
        }
        if read.iter().any(|&v| &types[v].1 != shape) || types[value].0 != types[first].0 {
            continue;
        }
        // A later step that may fail would leave the argument written by a failed call —
        // unless it is a scatter whose indices exist by now: they are checked first.
        let mut prechecks = Vec::new();
        let mut fallible_after = false;
        for (k, s) in steps.iter().enumerate().skip(si + 1) {
            let StepKind::Kernel { op } = &s.kind else { continue };
            if op.infallible() {
                continue;
            }
            let known = |v: ValueId| made_at[v].is_none_or(|m| m < si);
            if matches!(op, KernelOp::Scatter { .. }) && s.inputs.len() == 3 && known(s.inputs[1]) {
                prechecks.push(k);
            } else {
                fallible_after = true;
                break;
            }
        }
        if fallible_after {
            continue;
        }
        // The output, returned once (itself or through views of its type: an `Identity`
        // after a scatter).
        let found = step.outputs.iter().copied().find_map(|o| {
            if types[o] != types[first] || pairs.iter().any(|p| p.out == o) {
                return None;
            }
            let mut returned = retvals.iter().enumerate().filter(|&(_, &r)| buffer_of(r) == o && types[r] == types[o]);
            match (returned.next(), returned.next()) {
                (Some((j, _)), None) => Some((o, j)),
                _ => None,
            }
        });
        if let Some((out, retval)) = found {
            pairs.push(InPlace { arg, retval, value, out, alias, prechecks });
        }
    }
    pairs
}

struct GroupBuild {
    /// In topological order.
    members: Vec<NodeId>,
    shape: Vec<usize>,
    gemm: Option<NodeId>,
}

/// Reachability queries on the body with every fusion group contracted to one node (a
/// group runs as a unit, so it waits for the inputs of all its members).
///
/// A node earlier in topological order than a group's first member cannot depend on the
/// group, so a search stops there: it visits only the nodes between the group and the
/// query, not every ancestor (which made fusion quadratic in the body's size). A grouped
/// node stands for its whole group, which waits for every member's inputs: it is cut only
/// when the group's *latest* member is earlier than that. The visited marks are stamps,
/// reset in O(1) per query.
struct GroupReach {
    /// Each node's position in the analysis' topological order.
    pos: Vec<usize>,
    seen: Vec<u32>,
    seen_group: Vec<u32>,
    stamp: u32,
    stack: Vec<NodeId>,
}

impl GroupReach {
    fn new(body: &Graph, order: &[NodeId]) -> GroupReach {
        let mut pos = vec![usize::MAX; body.len()];
        for (i, id) in order.iter().enumerate() {
            pos[id.index()] = i;
        }
        GroupReach { pos, seen: vec![0; body.len()], seen_group: Vec::new(), stamp: 0, stack: Vec::new() }
    }

    /// Whether `start` depends on (or is a member of) any group in `targets`.
    fn depends_on(
        &mut self,
        body: &Graph,
        group_of: &[Option<usize>],
        groups: &[GroupBuild],
        start: NodeId,
        targets: &[usize],
    ) -> bool {
        let Some(first) = targets.iter().map(|&g| self.pos[groups[g].members[0].index()]).min() else {
            return false;
        };
        self.stamp += 1;
        if self.seen_group.len() < groups.len() {
            self.seen_group.resize(groups.len(), 0);
        }
        let stamp = self.stamp;
        self.stack.clear();
        self.stack.push(start);
        while let Some(x) = self.stack.pop() {
            let latest = match group_of[x.index()] {
                Some(h) => self.pos[groups[h].members.last().expect("a live group has members").index()],
                None => self.pos[x.index()],
            };
            if latest < first || std::mem::replace(&mut self.seen[x.index()], stamp) == stamp {
                continue;
            }
            match group_of[x.index()] {
                Some(h) if targets.contains(&h) => return true,
                Some(h) => {
                    if std::mem::replace(&mut self.seen_group[h], stamp) != stamp {
                        for &m in &groups[h].members {
                            self.stack.extend(body.node(m).inputs.iter().map(|o| o.node));
                        }
                    }
                }
                None => self.stack.extend(body.node(x).inputs.iter().map(|o| o.node)),
            }
        }
        false
    }

    /// Whether groups `a` and `b` may become one: no path leaves either and enters the
    /// other (a member of one reading a member of the other directly is fine).
    fn mergeable(
        &mut self,
        body: &Graph,
        group_of: &[Option<usize>],
        groups: &[GroupBuild],
        a: usize,
        b: usize,
    ) -> bool {
        for (from, to) in [(a, b), (b, a)] {
            for &m in &groups[to].members {
                for q in &body.node(m).inputs {
                    let qg = group_of[q.node.index()];
                    if qg == Some(to) || qg == Some(from) {
                        continue;
                    }
                    if self.depends_on(body, group_of, groups, q.node, &[from]) {
                        return false;
                    }
                }
            }
        }
        true
    }
}

/// Builds the program for an analysed body.
/// Bodies whose values all have at most this many elements are compiled with Cranelift's
/// single-pass register allocator (see [`CodeGen::new`]).
pub(crate) const QUICK_REGALLOC_ELEMENTS: usize = 1024;

pub(crate) fn build(
    body: &Graph,
    an: &Analysis,
    options: &CompilerOptions,
    name: &str,
) -> Result<Program, CompileError> {
    let n = body.len();
    let threads = if options.threads == 0 { crate::team::cores() } else { options.threads };
    // Value ids.
    let mut vid: Vec<Vec<ValueId>> = vec![Vec::new(); n];
    let mut types = Vec::new();
    for &id in &an.order {
        let info = an.nodes[id.index()].as_ref().expect("analysed");
        for o in &info.outputs {
            vid[id.index()].push(types.len());
            types.push((o.dtype, o.shape.clone()));
        }
    }
    let val = |o: autoclust_graph::Output| vid[o.node.index()][o.port as usize];
    let kind = |id: NodeId| &an.nodes[id.index()].as_ref().expect("analysed").kind;

    // Consumers of each value (node ids, with repeats), for liveness and fusion.
    let mut consumers: Vec<Vec<NodeId>> = vec![Vec::new(); types.len()];
    for &id in &an.order {
        for &o in &body.node(id).inputs {
            consumers[val(o)].push(id);
        }
    }

    // Fusion groups. A node joins the first producer group of its shape that stays convex
    // with it; each further producer group of that shape (an Adam update's `m·α` and
    // `√v + ε` chains meeting in one division) merges in when the union stays convex too,
    // so the siblings' intermediate never goes through memory.
    let mut group_of: Vec<Option<usize>> = vec![None; n];
    let mut groups: Vec<GroupBuild> = Vec::new();
    let mut reach = GroupReach::new(body, &an.order);
    for &id in &an.order {
        let node = body.node(id);
        if let NodeKind::Elementwise(_) = kind(id) {
            let shape = &an.nodes[id.index()].as_ref().expect("analysed").outputs[0].shape;
            let mut candidates: SmallVec<[usize; 4]> = SmallVec::new();
            for o in &node.inputs {
                if let Some(g) = group_of[o.node.index()] {
                    if groups[g].shape == *shape && !candidates.contains(&g) {
                        candidates.push(g);
                    }
                }
            }
            let mut chosen: SmallVec<[usize; 4]> = SmallVec::new();
            for &g in &candidates {
                let mut with = chosen.clone();
                with.push(g);
                // Every input outside the groups joined must not depend on any of them.
                let convex = node.inputs.iter().all(|q| {
                    group_of[q.node.index()].is_some_and(|h| with.contains(&h))
                        || !reach.depends_on(body, &group_of, &groups, q.node, &with)
                });
                if convex && chosen.iter().all(|&c| reach.mergeable(body, &group_of, &groups, c, g)) {
                    chosen.push(g);
                }
            }
            let g = match chosen.first() {
                Some(&g) => g,
                None => {
                    groups.push(GroupBuild { members: Vec::new(), shape: shape.clone(), gemm: None });
                    groups.len() - 1
                }
            };
            for &h in chosen.iter().skip(1) {
                let moved = std::mem::take(&mut groups[h].members);
                for &m in &moved {
                    group_of[m.index()] = Some(g);
                }
                groups[g].members.extend(moved);
                let pos = &reach.pos;
                groups[g].members.sort_unstable_by_key(|m| pos[m.index()]);
            }
            groups[g].members.push(id);
            group_of[id.index()] = Some(g);
        }
    }

    // GEMM prologues.
    let mut prologue_of: Vec<Option<usize>> = vec![None; n];
    for &id in &an.order {
        if let NodeKind::MatMul { .. } = kind(id) {
            let out = vid[id.index()][0];
            if let [c] = consumers[out].as_slice() {
                if let Some(g) = group_of[c.index()] {
                    if groups[g].gemm.is_none() && groups[g].shape == types[out].1 {
                        groups[g].gemm = Some(id);
                        prologue_of[id.index()] = Some(g);
                    }
                }
            }
        }
    }

    let dump = options.dump_clif_dir.as_deref();
    if let Some(d) = dump {
        std::fs::create_dir_all(d).map_err(|e| CompileError::Codegen(format!("creating {}: {e}", d.display())))?;
    }
    let tier = if options.no_tile_routines { None } else { crate::TileTier::select(options.max_tile_tier) };
    let largest = types.iter().map(|(_, s)| s.iter().product::<usize>()).max().unwrap_or(0);
    let mut cg = CodeGen::new(name, dump, tier, largest <= QUICK_REGALLOC_ELEMENTS)?;
    // Identical loops (by `FusedSpec::code_key`) share one compiled function.
    let mut fused_code: std::collections::HashMap<String, FusedCode> = std::collections::HashMap::new();
    let mut steps: Vec<(usize, Step)> = Vec::new(); // (position in topo order, step)
    let mut args: Vec<Option<ValueId>> = Vec::new();
    let mut constants = Vec::new();
    let mut group_done = vec![false; groups.len()];
    let mut prologues: Vec<(usize, GemmPrologue)> = Vec::new();
    for (pos, &id) in an.order.iter().enumerate() {
        let node = body.node(id);
        let info = an.nodes[id.index()].as_ref().expect("analysed");
        let outs = vid[id.index()].clone();
        match kind(id) {
            NodeKind::Arg(i) => {
                if args.len() <= *i {
                    args.resize(i + 1, None);
                }
                args[*i] = Some(outs[0]);
            }
            NodeKind::Retval(_) => {}
            NodeKind::Constant => {
                for (v, o) in outs.iter().zip(&info.outputs) {
                    constants.push((*v, o.konst.clone().expect("constant")));
                }
            }
            NodeKind::View => steps.push((pos, view_step(&node.name, val(node.inputs[0]), outs))),
            NodeKind::Kernel { op, data_inputs } => steps.push((
                pos,
                Step {
                    name: node.name.clone(),
                    kind: StepKind::Kernel { op: op.clone() },
                    inputs: data_inputs.iter().map(|&i| val(node.inputs[i])).collect(),
                    outputs: outs,
                },
            )),
            NodeKind::MatMul { transpose_a, transpose_b } => {
                let spec = gemm_spec(
                    &types[val(node.inputs[0])].1,
                    &types[val(node.inputs[1])].1,
                    *transpose_a,
                    *transpose_b,
                    threads,
                );
                let func = cg.gemm(&spec)?;
                if prologue_of[id.index()].is_none() {
                    steps.push((
                        pos,
                        Step {
                            name: node.name.clone(),
                            kind: StepKind::Gemm { func, m: spec.m, n: spec.n },
                            inputs: vec![val(node.inputs[0]), val(node.inputs[1])],
                            outputs: outs,
                        },
                    ));
                } else {
                    // Remember the function; the group emits it as its prologue.
                    let g = prologue_of[id.index()].expect("checked");
                    let (a, b) = (val(node.inputs[0]), val(node.inputs[1]));
                    prologues.push((g, GemmPrologue { func, a, b, out: outs[0] }));
                }
            }
            NodeKind::Elementwise(_) => {
                let g = group_of[id.index()].expect("grouped");
                if group_done[g] {
                    continue;
                }
                // Emit the group when its last member is reached (all members analysed).
                if *groups[g].members.last().expect("non-empty") != id {
                    continue;
                }
                group_done[g] = true;
                if groups[g].members.len() == 1
                    && groups[g].gemm.is_none()
                    && matches!(kind(id), NodeKind::Elementwise(EwOp::Copy))
                    && types[val(node.inputs[0])].1.iter().product::<usize>() == types[outs[0]].1.iter().product()
                {
                    // A lone Identity (a ReadVariableOp of the original graph, say, whose value
                    // feeds a GEMM) aliases its operand (a broadcasting copy is a loop): tensors are immutable, so a copy would
                    // only cost time (a 784×256 weight copy was 10% of the MLP step).
                    steps.push((pos, view_step(&node.name, val(node.inputs[0]), outs)));
                    continue;
                }
                let (spec, ext, live) = fused_spec(body, an, &groups[g], &group_of, g, &vid, &consumers)?;
                let code = match fused_code.entry(spec.code_key()) {
                    std::collections::hash_map::Entry::Occupied(e) => e.get().clone(),
                    std::collections::hash_map::Entry::Vacant(e) => e.insert(cg.fused(&spec)?).clone(),
                };
                let FusedCode { func, consts, tile_ops, tile_tier } = code;
                let consts = consts.into_iter().map(ConstLanes).collect();
                let gemm = prologues.iter().find(|x| x.0 == g).map(|x| x.1.clone());
                let mut inputs = ext.clone();
                if let Some(gp) = &gemm {
                    // The GEMM's operands are the step's real inputs; its product is internal.
                    inputs.retain(|&v| v != gp.out);
                    inputs.push(gp.a);
                    inputs.push(gp.b);
                }
                steps.push((
                    pos,
                    Step {
                        name: body.name(groups[g].members[0]).to_string(),
                        kind: StepKind::Fused {
                            func,
                            dims: spec.dims.clone(),
                            gemm,
                            ops: spec.members.len(),
                            ext,
                            consts,
                            tile_ops,
                            tile_tier,
                            vector: spec.vector,
                        },
                        inputs,
                        outputs: live,
                    },
                ));
            }
        }
    }
    let (code, fns) = cg.finish()?;

    // Order steps: Kahn over value producers, ties broken by topological position.
    let mut producer: Vec<Option<usize>> = vec![None; types.len()];
    for (si, (_, s)) in steps.iter().enumerate() {
        for &o in &s.outputs {
            producer[o] = Some(si);
        }
    }
    let mut pending: Vec<usize> =
        steps.iter().map(|(_, s)| s.inputs.iter().filter(|&&v| producer[v].is_some()).count()).collect();
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); steps.len()];
    for (si, (_, s)) in steps.iter().enumerate() {
        for &v in &s.inputs {
            if let Some(p) = producer[v] {
                users[p].push(si);
            }
        }
    }
    // Steps that may share a core wait until no other step is ready, so that runs of them
    // grow long enough (between host steps: a loop body's list pops) to form regions.
    // Loops wait longest: independent loops (a bidirectional RNN's two directions) then
    // become ready together and run side by side in one region, each on a core, as the
    // plain executor runs them.
    let shares: Vec<bool> = steps.iter().map(|(_, s)| threads > 1 && region::may_share_core(s, &types)).collect();
    let class: Vec<u8> = steps
        .iter()
        .zip(&shares)
        .map(|((_, s), &sh)| match &s.kind {
            StepKind::Kernel { op: KernelOp::While(_) } if sh => 2,
            _ => u8::from(sh),
        })
        .collect();
    let key = |si: usize, pos: usize| std::cmp::Reverse((class[si], pos, si));
    let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<(u8, usize, usize)>> =
        steps.iter().enumerate().filter(|(si, _)| pending[*si] == 0).map(|(si, (pos, _))| key(si, *pos)).collect();
    let mut order = Vec::with_capacity(steps.len());
    let mut batch = Vec::new();
    while let Some(std::cmp::Reverse((c, _, si))) = ready.pop() {
        batch.clear();
        batch.push(si);
        if c == 2 {
            // Only loops are ready (they come last): take them all before their users.
            while let Some(std::cmp::Reverse((_, _, sj))) = ready.pop() {
                batch.push(sj);
            }
        }
        for &si in &batch {
            order.push(si);
            for &u in &users[si] {
                pending[u] -= 1;
                if pending[u] == 0 {
                    ready.push(key(u, steps[u].0));
                }
            }
        }
    }
    if order.len() != steps.len() {
        return Err(CompileError::Codegen("fusion produced a cyclic step graph".into()));
    }
    let mut slots: Vec<Option<Step>> = steps.into_iter().map(|(_, s)| Some(s)).collect();
    let steps: Vec<Step> = order.iter().map(|&si| slots[si].take().expect("once")).collect();
    let shares: Vec<bool> = order.iter().map(|&si| shares[si]).collect();

    let retvals: Vec<ValueId> = an.retvals.iter().map(|&o| val(o)).collect();
    let mut last_use: Vec<Option<usize>> = vec![None; types.len()];
    for (si, s) in steps.iter().enumerate() {
        for &v in &s.inputs {
            last_use[v] = Some(si);
        }
    }
    let in_place = in_place_pairs(&steps, &args, &retvals, &types, &last_use);
    // A donatable argument whose output's step has later scatters to check stays (with its
    // views) until the call ends: should one of them fail, the call hands it back unwritten.
    let kept: std::collections::HashSet<ValueId> = retvals
        .iter()
        .chain(in_place.iter().filter(|p| !p.prechecks.is_empty()).flat_map(|p| p.alias.iter()))
        .copied()
        .collect();
    let mut donatable = vec![false; types.len()];
    for v in in_place.iter().flat_map(|p| p.alias.iter()) {
        donatable[*v] = true;
    }
    let mut free_after = vec![Vec::new(); steps.len()];
    for (v, lu) in last_use.iter().enumerate() {
        if let Some(si) = lu {
            if !kept.contains(&v) {
                free_after[*si].push(v);
            }
        }
    }
    let (pool_of, pool_count) = assign_pools(&steps, &types, &last_use, &retvals, &in_place);
    let pools = (0..pool_count).map(|_| BufferPool::default()).collect();
    let mut made_by: Vec<Option<usize>> = vec![None; types.len()];
    for (si, s) in steps.iter().enumerate() {
        for &o in &s.outputs {
            made_by[o] = Some(si);
        }
    }
    let mut donates: Vec<SmallVec<[u32; 1]>> = vec![SmallVec::new(); steps.len()];
    for (k, p) in in_place.iter().enumerate() {
        if let Some(si) = made_by[p.out] {
            donates[si].push(k as u32);
        }
    }
    let keep: Vec<ValueId> = in_place.iter().flat_map(|p| p.alias.iter().copied()).collect();
    let regions = region::regions(&steps, &shares, &types, &last_use, &retvals, &keep);
    Ok(Program {
        name: name.to_string(),
        steps,
        fns,
        types,
        args,
        constants,
        retvals,
        free_after,
        threads,
        pools,
        pool_of,
        last_use,
        donatable,
        in_place,
        donates,
        regions,
        _code: code,
    })
}

/// Which buffer pool each value's buffers come from, and how many pools there are.
///
/// Values of one dtype and size whose buffers are never live at once share a pool: walking
/// the steps in order, a value takes the pool of an earlier value whose buffer (with every
/// view of it) was last read by a step before the one that writes this value, so a step's
/// intermediates reuse the buffers of values already dead — what XLA's buffer assignment
/// does by liveness, and what a training step's first call (no page faults for dead
/// values' memory) and its cache footprint need. A value the call returns, one computed
/// into a donated argument, and a scatter's output (its pool remembers how its contents
/// derive from the last call's) keep a pool of their own, as before: their buffers outlive
/// the call.
///
/// Sharing is never needed for soundness: a pool hands out only a buffer it holds the only
/// reference to ([`crate::buffers`]), so a value still alive (held by `vals`, a view, a
/// running step in a concurrent region, or the caller) is never overwritten — a wrong
/// guess here costs a fresh buffer, not a wrong result.
fn assign_pools(
    steps: &[Step],
    types: &[(DType, Vec<usize>)],
    last_use: &[Option<usize>],
    retvals: &[ValueId],
    in_place: &[InPlace],
) -> (Vec<u32>, usize) {
    const FOREVER: usize = usize::MAX;
    let n = types.len();
    // The value whose buffer each value is (a view's is its input's).
    let mut root: Vec<ValueId> = (0..n).collect();
    for s in steps {
        if matches!(s.kind, StepKind::View) {
            if let (Some(&o), Some(&i)) = (s.outputs.first(), s.inputs.first()) {
                root[o] = root[i];
            }
        }
    }
    // When each buffer is last read (a value nothing reads stays until the call ends).
    let mut end = vec![0usize; n];
    for v in 0..n {
        let e = last_use[v].unwrap_or(FOREVER);
        end[root[v]] = end[root[v]].max(e);
    }
    // A fused loop's GEMM prologue writes its product at the step and the loop reads it there.
    let prologue = |s: &Step| match &s.kind {
        StepKind::Fused { gemm: Some(gp), .. } => Some(gp.out),
        _ => None,
    };
    for (si, s) in steps.iter().enumerate() {
        if let Some(p) = prologue(s).filter(|&p| last_use[p].is_none()) {
            end[root[p]] = si;
        }
    }
    let mut own = vec![false; n];
    for &v in retvals {
        own[root[v]] = true;
    }
    for p in in_place {
        own[root[p.out]] = true;
    }
    for s in steps {
        if matches!(s.kind, StepKind::Kernel { op: KernelOp::Scatter { .. } }) {
            for &o in &s.outputs {
                own[root[o]] = true;
            }
        }
    }
    let mut pool_of: Vec<u32> = vec![u32::MAX; n];
    let mut count = 0u32;
    let mut fresh = || {
        count += 1;
        count - 1
    };
    // Per dtype and element count: the shareable pools and the step after which each is free.
    let mut free: std::collections::HashMap<(DType, usize), Vec<(u32, usize)>> = std::collections::HashMap::new();
    for (si, s) in steps.iter().enumerate() {
        for o in prologue(s).into_iter().chain(s.outputs.iter().copied()) {
            if root[o] != o || pool_of[o] != u32::MAX {
                continue;
            }
            if own[o] {
                pool_of[o] = fresh();
                continue;
            }
            let (dtype, shape) = &types[o];
            let class = free.entry((*dtype, shape.iter().product())).or_default();
            match class.iter_mut().find(|(_, until)| *until < si) {
                Some((pool, until)) => {
                    pool_of[o] = *pool;
                    *until = end[o];
                }
                None => {
                    pool_of[o] = fresh();
                    class.push((pool_of[o], end[o]));
                }
            }
        }
    }
    // Values no step writes (arguments, constants, views) are never allocated from a pool.
    for p in pool_of.iter_mut().filter(|p| **p == u32::MAX) {
        *p = fresh();
    }
    (pool_of, count as usize)
}

/// The estimated nanoseconds on one core of a GEMM or a fused loop (with or without its
/// GEMM prologue) too small to split itself across the cores (larger ones use both cores
/// already), which may therefore run beside other steps ([`region`]). `None` for larger
/// ones and every other step.
fn small_cost(step: &Step, types: &[(DType, Vec<usize>)]) -> Option<usize> {
    let macs = |a, b, c| gemm_macs(types, a, b, c);
    match &step.kind {
        StepKind::Gemm { .. } => {
            let m = macs(step.inputs[0], step.inputs[1], step.outputs[0]);
            (m < crate::gemm::SPLIT_MACS_AWAKE).then_some(m / 32)
        }
        StepKind::Fused { dims, gemm, ops, .. } => {
            let work = dims.iter().product::<usize>() * ops.max(&1);
            let pro = gemm.as_ref().map_or(0, |gp| macs(gp.a, gp.b, gp.out));
            (work < PARALLEL_WORK && pro < crate::gemm::SPLIT_MACS_AWAKE).then_some(work / 2 + pro / 32)
        }
        // Kernels decide for themselves whether to split (a softmax, a reduction, a
        // convolution at their own thresholds); paired, they could not.
        StepKind::Kernel { .. } => None,
        StepKind::View => None,
    }
}

/// The multiply-adds of a GEMM `C = A·B`: m·k·n from the element counts of A (m·k),
/// B (k·n) and C (m·n).
fn gemm_macs(types: &[(DType, Vec<usize>)], a: ValueId, b: ValueId, c: ValueId) -> usize {
    let elems = |v: ValueId| types[v].1.iter().product::<usize>();
    ((elems(a) * elems(b) * elems(c)) as f64).sqrt() as usize
}

/// A step whose output shares its input's buffer (tensors are immutable).
fn view_step(name: &str, input: ValueId, outputs: Vec<ValueId>) -> Step {
    Step { name: name.to_string(), kind: StepKind::View, inputs: vec![input], outputs }
}

fn gemm_spec(a: &[usize], b: &[usize], ta: bool, tb: bool, threads: usize) -> GemmSpec {
    // Row-major A is [r, c] with strides (c, 1); its transpose swaps them.
    let (m, k, a_strides) = if ta { (a[1], a[0], (1, a[1] as isize)) } else { (a[0], a[1], (a[1] as isize, 1)) };
    let (n, b_strides) = if tb { (b[0], (1, b[1] as isize)) } else { (b[1], (b[1] as isize, 1)) };
    GemmSpec { m, k, n, a_strides, b_strides, threads }
}

/// Builds the loop-nest spec of a group; returns it with the external input values (in
/// spec order) and the live output values.
#[allow(clippy::type_complexity)]
fn fused_spec(
    body: &Graph,
    an: &Analysis,
    g: &GroupBuild,
    group_of: &[Option<usize>],
    gi: usize,
    vid: &[Vec<ValueId>],
    consumers: &[Vec<NodeId>],
) -> Result<(FusedSpec, Vec<ValueId>, Vec<ValueId>), CompileError> {
    let shape = &g.shape;
    let mut ext: Vec<ValueId> = Vec::new();
    let mut ext_shapes: Vec<(DType, Vec<usize>)> = Vec::new();
    let mut members: Vec<Member> = Vec::new();
    let mut member_index = std::collections::HashMap::new();
    for &id in &g.members {
        let node = body.node(id);
        let info = an.nodes[id.index()].as_ref().expect("analysed");
        let NodeKind::Elementwise(op) = info.kind else { unreachable!("grouped nodes are elementwise") };
        let mut args = Vec::new();
        let mut adt = Vec::new();
        // A copy's operand is its first input (a same-shape Reshape or reduction has a shape
        // or axes input besides, see `analyze::same_values`).
        let operands = if matches!(op, EwOp::Copy) { &node.inputs[..1] } else { &node.inputs[..] };
        for (i, &o) in operands.iter().enumerate() {
            let v = an.value(o);
            adt.push(v.dtype);
            if group_of[o.node.index()] == Some(gi) {
                args.push(Operand::Member(member_index[&o.node]));
                continue;
            }
            if let Some(k) = &v.konst {
                if k.num_elements() == 1 {
                    if let Some(x) = k.to_f64_vec() {
                        args.push(Operand::Scalar(v.dtype, x[0]));
                        continue;
                    }
                }
            }
            let value = vid[o.node.index()][o.port as usize];
            let view = operand_view(&node.op, i, &v.shape, shape);
            let k = match ext.iter().zip(&ext_shapes).position(|(&e, (_, s))| e == value && *s == view) {
                Some(k) => k,
                None => {
                    ext.push(value);
                    ext_shapes.push((v.dtype, view));
                    ext.len() - 1
                }
            };
            args.push(Operand::Input(k));
        }
        let m = Member { op, args, dtype: info.outputs[0].dtype };
        if !scalar_ok(&m, &adt) || (op.is_transcendental() && m.dtype != DType::Float32) {
            return Err(CompileError::unsupported(
                node,
                format!("{op:?} on {}", adt.first().map(|d| d.to_string()).unwrap_or_default()),
            ));
        }
        if matches!(op, EwOp::Cast) && !cast_ok(adt[0], m.dtype) {
            return Err(CompileError::unsupported(node, format!("Cast {} -> {}", adt[0], m.dtype)));
        }
        member_index.insert(id, members.len());
        members.push(m);
    }
    // Live outputs: used outside the group (including by _Retval).
    let mut outputs = Vec::new();
    let mut live = Vec::new();
    for (mi, &id) in g.members.iter().enumerate() {
        let v = vid[id.index()][0];
        if consumers[v].iter().any(|c| group_of[c.index()] != Some(gi)) {
            outputs.push(mi);
            live.push(v);
        }
    }
    // Collapse the loop nest.
    let in_strides: Vec<Vec<isize>> = ext_shapes.iter().map(|(_, s)| broadcast_strides(s, shape)).collect();
    let mut dims: Vec<usize> = Vec::new();
    let mut strides: Vec<Vec<isize>> = vec![Vec::new(); ext.len()];
    for (d, &size) in shape.iter().enumerate() {
        if size == 1 {
            continue;
        }
        let mergeable = !dims.is_empty()
            && in_strides.iter().zip(&strides).all(|(s, acc)| acc.last().copied() == Some(s[d] * size as isize));
        if mergeable {
            *dims.last_mut().expect("non-empty") *= size;
            for (s, acc) in in_strides.iter().zip(strides.iter_mut()) {
                *acc.last_mut().expect("non-empty") = s[d];
            }
        } else {
            dims.push(size);
            for (s, acc) in in_strides.iter().zip(strides.iter_mut()) {
                acc.push(s[d]);
            }
        }
    }
    if dims.is_empty() {
        dims.push(if shape.contains(&0) { 0 } else { 1 });
        for acc in strides.iter_mut() {
            acc.push(0);
        }
    }
    // Float32 values are f32x4 vectors, bools i32x4 lane masks (loaded from and stored
    // to byte rows four at a time).
    let vector = ext_shapes.iter().all(|(d, _)| matches!(d, DType::Float32 | DType::Bool))
        && outputs.iter().all(|&m| matches!(members[m].dtype, DType::Float32 | DType::Bool))
        && members.iter().all(|m| {
            let adt: Vec<DType> = m
                .args
                .iter()
                .map(|a| match a {
                    Operand::Input(k) => ext_shapes[*k].0,
                    Operand::Member(j) => members[*j].dtype,
                    Operand::Scalar(d, _) => *d,
                })
                .collect();
            vector_ok(m, &adt)
        });
    let inputs = ext_shapes.iter().map(|(d, _)| *d).zip(strides).collect();
    Ok((FusedSpec { dims, inputs, members, outputs, vector }, ext, live))
}

/// The shape an elementwise operand is read with inside its group: its own shape, aligned to
/// the right as broadcasting does, except for TensorFlow's `Select` (v1), whose rank-1
/// condition picks whole rows of higher-rank operands — it is aligned to the left, as the
/// shape `[n, 1, …, 1]`.
pub(crate) fn operand_view(op: &str, input: usize, own: &[usize], out: &[usize]) -> Vec<usize> {
    if op == "Select" && input == 0 && own.len() == 1 && out.len() > 1 {
        let mut view = vec![1; out.len()];
        view[0] = own[0];
        return view;
    }
    own.to_vec()
}

fn cast_ok(from: DType, to: DType) -> bool {
    let ok = |d: DType| matches!(d, DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64 | DType::Bool);
    ok(from) && ok(to)
}

/// One fused step's arguments to [`Program::run_fused`].
#[derive(Clone, Copy)]
struct FusedRun<'a> {
    step: &'a Step,
    func: usize,
    dims: &'a [usize],
    ops: usize,
    ext: &'a [ValueId],
    consts: &'a [ConstLanes],
}

/// Value `v` of the table (a clone: tensors share their buffers).
fn value(vals: &[Option<Tensor>], v: ValueId, node: &str) -> Result<Tensor, CompileError> {
    vals[v].clone().ok_or_else(|| CompileError::Runtime { node: node.into(), reason: format!("value {v} missing") })
}

/// A raw pointer the worker threads may share (the buffers it points to outlive the scope).
#[derive(Clone, Copy)]
struct SharedPtrs(*const *mut u8);
// SAFETY: the pointer table and the buffers it lists are alive for the whole parallel
// section, inputs are only read, and each task writes a disjoint range of the outputs.
unsafe impl Send for SharedPtrs {}
unsafe impl Sync for SharedPtrs {}

/// Minimum elements × ops before a loop is split across threads.
const PARALLEL_WORK: usize = 1 << 18;

/// Chunks per thread when a loop is split (dynamic balance on a shared machine).
const CHUNKS_PER_THREAD: usize = 4;

fn data_ptr(t: &Tensor) -> *mut u8 {
    match &t.data {
        TensorData::F32(v) => v.as_ptr() as *mut u8,
        TensorData::F64(v) => v.as_ptr() as *mut u8,
        TensorData::I32(v) => v.as_ptr() as *mut u8,
        TensorData::I64(v) => v.as_ptr() as *mut u8,
        TensorData::Bool(v) => v.as_ptr() as *mut u8,
        TensorData::Raw(v) => v.as_ptr() as *mut u8,
        TensorData::Str(_) | TensorData::List(_) | TensorData::Optional(_) => std::ptr::null_mut(),
    }
}

/// An output buffer the generated code fills before `finish` marks it initialised.
enum OutBuf {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
}

/// Bytes per element of the dtypes outputs are allocated for.
fn elem_bytes(d: DType) -> usize {
    match d {
        DType::Float64 | DType::Int64 => 8,
        DType::Bool => 1,
        _ => 4,
    }
}

/// An output buffer: fresh, or recycled from the value's pool.
enum Out {
    Fresh(OutBuf),
    Pooled(Pooled),
    /// A donated argument's buffer (see [`InPlace`]) and the write pointer taken while the
    /// call held its only reference.
    Donated(TensorData, *mut u8),
}

impl Out {
    fn ptr(&mut self) -> *mut u8 {
        match self {
            Out::Fresh(b) => b.ptr(),
            Out::Pooled(p) => p.write_ptr().expect("taken from the pool while unique"),
            Out::Donated(_, p) => *p,
        }
    }
}

/// A write pointer into `data`'s buffer when `data` holds its only reference.
fn unique_ptr(data: &mut TensorData) -> Option<*mut u8> {
    match data {
        TensorData::F32(v) => Arc::get_mut(v).map(|v| v.as_mut_ptr() as *mut u8),
        TensorData::F64(v) => Arc::get_mut(v).map(|v| v.as_mut_ptr() as *mut u8),
        TensorData::I32(v) => Arc::get_mut(v).map(|v| v.as_mut_ptr() as *mut u8),
        TensorData::I64(v) => Arc::get_mut(v).map(|v| v.as_mut_ptr() as *mut u8),
        TensorData::Bool(v) => Arc::get_mut(v).map(|v| v.as_mut_ptr() as *mut u8),
        TensorData::Str(_) | TensorData::Raw(_) | TensorData::List(_) | TensorData::Optional(_) => None,
    }
}

/// The references to `data`'s buffer.
fn strong_count(data: &TensorData) -> usize {
    match data {
        TensorData::F32(v) => Arc::strong_count(v),
        TensorData::F64(v) => Arc::strong_count(v),
        TensorData::I32(v) => Arc::strong_count(v),
        TensorData::I64(v) => Arc::strong_count(v),
        TensorData::Bool(v) => Arc::strong_count(v),
        TensorData::Str(v) => Arc::strong_count(v),
        TensorData::Raw(v) => Arc::strong_count(v),
        TensorData::List(v) => Arc::strong_count(v),
        TensorData::Optional(v) => Arc::strong_count(v),
    }
}

impl OutBuf {
    fn new(dtype: DType, n: usize) -> Option<OutBuf> {
        Some(match dtype {
            DType::Float32 => OutBuf::F32(Vec::with_capacity(n)),
            DType::Float64 => OutBuf::F64(Vec::with_capacity(n)),
            DType::Int32 => OutBuf::I32(Vec::with_capacity(n)),
            DType::Int64 => OutBuf::I64(Vec::with_capacity(n)),
            DType::Bool => OutBuf::Bool(Vec::with_capacity(n)),
            _ => return None,
        })
    }
    fn ptr(&mut self) -> *mut u8 {
        match self {
            OutBuf::F32(v) => v.as_mut_ptr() as *mut u8,
            OutBuf::F64(v) => v.as_mut_ptr() as *mut u8,
            OutBuf::I32(v) => v.as_mut_ptr() as *mut u8,
            OutBuf::I64(v) => v.as_mut_ptr() as *mut u8,
            OutBuf::Bool(v) => v.as_mut_ptr() as *mut u8,
        }
    }
    /// # Safety
    /// All `n` elements must have been written with valid values of the type.
    unsafe fn finish(self, dtype: DType, shape: Vec<usize>, n: usize) -> Tensor {
        // SAFETY: guaranteed by the caller; capacity is n.
        let data = unsafe {
            match self {
                OutBuf::F32(mut v) => {
                    v.set_len(n);
                    TensorData::F32(Arc::new(v))
                }
                OutBuf::F64(mut v) => {
                    v.set_len(n);
                    TensorData::F64(Arc::new(v))
                }
                OutBuf::I32(mut v) => {
                    v.set_len(n);
                    TensorData::I32(Arc::new(v))
                }
                OutBuf::I64(mut v) => {
                    v.set_len(n);
                    TensorData::I64(Arc::new(v))
                }
                OutBuf::Bool(mut v) => {
                    v.set_len(n);
                    TensorData::Bool(Arc::new(v))
                }
            }
        };
        Tensor { dtype, shape, data }
    }
}

impl Program {
    pub(crate) fn output_type(&self, j: usize) -> Option<(DType, &[usize])> {
        self.retvals.get(j).map(|&v| (self.types[v].0, self.types[v].1.as_slice()))
    }

    pub(crate) fn output_types(&self) -> Vec<(DType, Vec<usize>)> {
        self.retvals.iter().map(|&v| self.types[v].clone()).collect()
    }

    pub(crate) fn describe(&self) -> Vec<String> {
        let mut out: Vec<String> = self.steps.iter().map(|s| self.describe_step(s)).collect();
        for (k, r) in self.regions.iter().enumerate() {
            for d in &mut out[r.start..r.end] {
                d.push_str(&format!(" | region {k}"));
            }
        }
        out
    }

    /// One step as `--dump-clif` and profiles write it.
    fn describe_step(&self, s: &Step) -> String {
        match &s.kind {
            StepKind::Fused { dims, gemm, ops, tile_ops, tile_tier, vector, .. } => format!(
                "fused {} ops over {:?} ({} in, {} out{}{}{}) at {}",
                ops,
                dims,
                s.inputs.len(),
                s.outputs.len(),
                if *vector { "" } else { ", scalar" },
                if gemm.is_some() { ", gemm prologue" } else { "" },
                match tile_tier {
                    Some(t) if !tile_ops.is_empty() => format!(", {} tiles for {tile_ops:?}", t.name()),
                    _ => String::new(),
                },
                s.name
            ),
            StepKind::Gemm { m, n, .. } => format!("gemm [{m},{n}] at {}", s.name),
            StepKind::Kernel { op } => format!("kernel {op:?} at {}", s.name),
            StepKind::View => format!("view at {}", s.name),
        }
    }

    /// The pool value `v`'s buffers are recycled through.
    fn pool(&self, v: ValueId) -> &BufferPool {
        &self.pools[self.pool_of[v] as usize]
    }

    /// Whether value `v` is big enough to recycle its buffers.
    fn pooled(&self, v: ValueId) -> bool {
        let (d, s) = &self.types[v];
        s.iter().product::<usize>() * elem_bytes(*d) >= POOL_MIN_BYTES
    }

    /// A buffer for value `v`: a recycled one nobody else holds, else a fresh one.
    fn alloc(&self, v: ValueId, name: &str) -> Result<Out, CompileError> {
        let (d, s) = &self.types[v];
        let n: usize = s.iter().product();
        if self.pooled(v) {
            if let Some(p) = self.pool(v).take(*d, n, None) {
                return Ok(Out::Pooled(p));
            }
        }
        OutBuf::new(*d, n)
            .map(Out::Fresh)
            .ok_or_else(|| CompileError::Runtime { node: name.into(), reason: format!("dtype {d} output") })
    }

    /// The tensor of value `v` once its buffer is fully written; keeps a reference in the
    /// pool for a later call.
    ///
    /// # Safety
    /// Every element of the buffer must have been written with a valid value.
    unsafe fn finish(&self, v: ValueId, out: Out) -> Tensor {
        let (dtype, shape) = self.types[v].clone();
        let n = shape.iter().product();
        let t = match out {
            // SAFETY: guaranteed by the caller.
            Out::Fresh(b) => unsafe { b.finish(dtype, shape, n) },
            Out::Pooled(p) => Tensor { dtype, shape, data: p.data },
            // A donated buffer is not pooled: the variable it goes back to holds it.
            Out::Donated(data, _) => return Tensor { dtype, shape, data },
        };
        if self.pooled(v) {
            self.pool(v).put(Pooled { data: t.data.clone(), stamp: fresh_stamp(), derived: None });
        }
        t
    }

    fn gemm_call(&self, func: usize, a: &Tensor, b: &Tensor, out: ValueId, name: &str) -> Result<Tensor, CompileError> {
        if a.as_f32().is_none() || b.as_f32().is_none() {
            return Err(CompileError::Runtime { node: name.into(), reason: "MatMul operands are not float32".into() });
        }
        let mut c = self.alloc(out, name)?;
        let ptrs = [data_ptr(a), data_ptr(b), c.ptr()];
        // SAFETY: the function was generated for exactly these shapes; c holds m*n elements.
        unsafe { (self.fns[func])(ptrs.as_ptr(), 0, 0) };
        // SAFETY: sgemm (beta = 0) wrote all m*n elements.
        Ok(unsafe { self.finish(out, c) })
    }

    /// TensorScatter into a recycled buffer: when the scattered tensor is this value's
    /// previous output and the buffer it was derived from is free again, only the rows
    /// that differ are copied (see [`crate::buffers`]). `None` when the plain kernel
    /// should run instead (small or non-numeric tensors, nothing to recycle).
    fn scatter_pooled(
        &self,
        kind: crate::scatter::ScatterKind,
        ins: &[&Tensor],
        out: ValueId,
    ) -> Option<Result<Tensor, String>> {
        if !self.pooled(out) || ins.len() != 3 {
            return None;
        }
        let (x, indices, updates) = (ins[0], ins[1], ins[2]);
        let (offsets, slice) = match crate::scatter::scatter_rows(x, indices, updates) {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        let (dtype, shape) = &self.types[out];
        if x.dtype != *dtype || updates.dtype != *dtype || &x.shape != shape {
            return None;
        }
        let pool = self.pool(out);
        let known = pool.lookup(&x.data);
        let prefer = known.as_ref().and_then(|k| k.1.as_ref()).map(|d| d.base);
        let mut dst = pool.take(*dtype, x.num_elements(), prefer)?;
        let base = match known.as_ref().and_then(|k| k.1.as_ref()) {
            Some(d) if d.base == dst.stamp => ScatterBase::Rows(&d.rows, d.slice),
            _ => ScatterBase::Full,
        };
        if !crate::scatter::scatter_into(&mut dst.data, x, updates, &offsets, slice, kind, base) {
            pool.put(dst);
            return None;
        }
        let t = Tensor { dtype: *dtype, shape: shape.clone(), data: dst.data.clone() };
        dst.stamp = fresh_stamp();
        dst.derived = known.map(|(stamp, _)| Derived { base: stamp, rows: Arc::new(offsets), slice });
        pool.put(dst);
        Some(Ok(t))
    }

    /// TensorScatter into its tensor's own buffer, when the caller donated it (see
    /// [`InPlace`]; a scatter into an embedding table then touches only the updated rows,
    /// and the table is never copied). `None` when the donation is not taken here (the
    /// pooled or plain kernel runs instead); an error before anything is written.
    fn scatter_donated(
        &self,
        si: usize,
        kind: crate::scatter::ScatterKind,
        vals: &[Option<Tensor>],
        donations: &Donated,
        written: &mut bool,
    ) -> Option<Result<Tensor, String>> {
        if self.donates[si].is_empty() {
            return None;
        }
        let step = &self.steps[si];
        let o = step.outputs[0];
        // First, while the argument's values hold the buffer's only references.
        let Out::Donated(data, ptr) = self.donated_out(si, o, vals, donations)? else { return None };
        let [x, indices, updates] = [0, 1, 2].map(|k| step.inputs.get(k).and_then(|&v| vals[v].as_ref()));
        let (x, indices, updates) = (x?, indices?, updates?);
        let (dtype, shape) = &self.types[o];
        if data_ptr(x) != ptr || data_ptr(indices) == ptr || data_ptr(updates) == ptr {
            return None;
        }
        if x.dtype != *dtype || updates.dtype != *dtype || &x.shape != shape {
            return None;
        }
        let (offsets, slice) = match crate::scatter::scatter_rows(x, indices, updates) {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        // SAFETY: `ptr` is the donated buffer of `x` (checked above), whose only references
        // are the argument's values this step reads last (`donated_out`) and `data`; nothing
        // else reads or writes it during the call, and `updates` does not share it.
        let done =
            unsafe { crate::scatter::scatter_in_buffer(ptr, *dtype, x.num_elements(), updates, &offsets, slice, kind) };
        if !done {
            return None;
        }
        *written = true;
        Some(Ok(Tensor { dtype: *dtype, shape: shape.clone(), data }))
    }

    /// The references the pool of in-place pair `k`'s output holds on `data`'s buffer (a
    /// buffer it handed out, now a variable's value), which a donating call drops.
    pub(crate) fn pool_refs(&self, k: usize, data: &TensorData) -> usize {
        self.in_place.get(k).map_or(0, |p| usize::from(self.pool(p.out).holds(data)))
    }

    pub(crate) fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, CompileError> {
        let mut vals = self.initial_values(inputs.iter().cloned());
        self.run_steps(&mut vals, &[], &mut false)
    }

    /// The value table at the start of a call: the arguments and the constants.
    fn initial_values(&self, inputs: impl Iterator<Item = Tensor>) -> Vec<Option<Tensor>> {
        let mut vals: Vec<Option<Tensor>> = vec![None; self.types.len()];
        for (a, t) in self.args.iter().zip(inputs) {
            if let Some(v) = a {
                vals[*v] = Some(t);
            }
        }
        for (v, t) in &self.constants {
            vals[*v] = Some(t.clone());
        }
        vals
    }

    /// Runs the steps on owned inputs; the outputs `self.in_place[k]` (`k` in `donate`)
    /// are computed into their argument's buffer when the argument holds the only
    /// reference to it (else, or when anything else still holds the buffer at that step,
    /// into a buffer of their own).
    pub(crate) fn run_owned(
        &self,
        mut inputs: Vec<Tensor>,
        donate: &[usize],
    ) -> Result<Vec<Tensor>, crate::DonationFailure> {
        let mut donations: Vec<Option<*mut u8>> = vec![None; self.in_place.len()];
        for &k in donate {
            let Some(p) = self.in_place.get(k) else { continue };
            // The buffer may be one this output's pool handed out two calls ago.
            if let Some(t) = inputs.get(p.arg) {
                self.pool(p.out).forget(&t.data);
            }
            donations[k] = inputs.get_mut(p.arg).and_then(|t| unique_ptr(&mut t.data));
        }
        let mut vals = self.initial_values(inputs.into_iter());
        let mut written = false;
        match self.run_steps(&mut vals, &donations, &mut written) {
            Ok(outs) => Ok(outs),
            Err(e) => {
                let back = if written {
                    Vec::new()
                } else {
                    self.in_place
                        .iter()
                        .zip(&donations)
                        .filter(|(_, d)| d.is_some())
                        .filter_map(|(p, _)| vals[p.value].take().map(|t| (p.arg, t)))
                        .collect()
                };
                Err((e, back))
            }
        }
    }

    fn run_steps(
        &self,
        vals: &mut [Option<Tensor>],
        donations: &Donated,
        written: &mut bool,
    ) -> Result<Vec<Tensor>, CompileError> {
        // `Some(nested)` when profiling: whether this call runs inside another's step.
        let profiling = crate::profile::enabled().then(crate::profile::nested);
        let call_start = profiling.map(|_| std::time::Instant::now());
        let mut regions = self.regions.iter().peekable();
        let mut si = 0;
        while si < self.steps.len() {
            if let Some(r) = regions.next_if(|r| r.start == si) {
                self.run_region(r, vals, donations, written, profiling)?;
                // Values the region kept (donatable arguments it did not write).
                for k in r.start..r.end {
                    for &v in &self.free_after[k] {
                        vals[v] = None;
                    }
                }
                si = r.end;
                continue;
            }
            let step = &self.steps[si];
            let start = profiling.map(|nested| (std::time::Instant::now(), nested, crate::profile::InStep::enter()));
            match &step.kind {
                StepKind::View => {
                    let x = value(vals, step.inputs[0], &step.name)?;
                    let (dtype, shape) = self.types[step.outputs[0]].clone();
                    vals[step.outputs[0]] = Some(Tensor { dtype, shape, data: x.data });
                }
                StepKind::Kernel { op: KernelOp::Host(h) } => {
                    // Owned operands: a value this step reads last is moved in, so a list op
                    // updates a list no one else holds in place (a loop pushing onto its
                    // accumulator every iteration would copy it every iteration otherwise).
                    let mut ins: Vec<Tensor> = Vec::with_capacity(step.inputs.len());
                    for (k, &v) in step.inputs.iter().enumerate() {
                        let last = self.last_use[v] == Some(si)
                            && !self.donatable[v]
                            && !self.retvals.contains(&v)
                            && !step.inputs[k + 1..].contains(&v)
                            && !step.inputs[..k].contains(&v);
                        let t = if last { vals[v].take() } else { vals[v].clone() };
                        ins.push(t.ok_or_else(|| CompileError::Runtime {
                            node: step.name.clone(),
                            reason: format!("value {v} missing"),
                        })?);
                    }
                    let shapes: Vec<Vec<usize>> = step.outputs.iter().map(|&o| self.types[o].1.clone()).collect();
                    let outs = h
                        .run_owned(ins, &shapes)
                        .map_err(|reason| CompileError::Runtime { node: step.name.clone(), reason })?;
                    for (&o, t) in step.outputs.iter().zip(outs) {
                        vals[o] = Some(t);
                    }
                }
                _ => {
                    let outs = self.step_outputs(si, vals, donations, written)?;
                    for (&o, t) in step.outputs.iter().zip(outs) {
                        vals[o] = Some(t);
                    }
                }
            }
            for &v in &self.free_after[si] {
                vals[v] = None;
            }
            if let Some((start, nested, in_step)) = start {
                drop(in_step);
                self.record(si, nested, start);
            }
            si += 1;
        }
        if let (Some(nested), Some(start)) = (profiling, call_start) {
            let time = start.elapsed();
            crate::profile::record_call(self as *const Program as usize, nested, time, || self.name.clone());
        }
        self.retvals.iter().map(|&v| value(vals, v, "_Retval")).collect()
    }

    fn record(&self, si: usize, nested: bool, start: std::time::Instant) {
        crate::profile::record(self as *const Program as usize, si, nested, start.elapsed(), || {
            (self.name.clone(), self.describe_step(&self.steps[si]))
        });
    }

    /// The outputs of step `si` (a GEMM, a fused loop or a kernel other than a host step),
    /// reading its inputs from `vals`.
    fn step_outputs(
        &self,
        si: usize,
        vals: &[Option<Tensor>],
        donations: &Donated,
        written: &mut bool,
    ) -> Result<Vec<Tensor>, CompileError> {
        let step = &self.steps[si];
        match &step.kind {
            StepKind::Kernel { op } => {
                if let KernelOp::Scatter { kind } = op {
                    if let Some(r) = self.scatter_donated(si, *kind, vals, donations, written) {
                        return r
                            .map(|t| vec![t])
                            .map_err(|reason| CompileError::Runtime { node: step.name.clone(), reason });
                    }
                }
                let ins: Vec<Tensor> =
                    step.inputs.iter().map(|&v| value(vals, v, &step.name)).collect::<Result<_, _>>()?;
                let refs: Vec<&Tensor> = ins.iter().collect();
                let recycled = match op {
                    KernelOp::Scatter { kind } => self.scatter_pooled(*kind, &refs, step.outputs[0]),
                    _ => None,
                };
                match recycled {
                    Some(r) => r.map(|t| vec![t]),
                    None => {
                        let shapes: Vec<Vec<usize>> = step.outputs.iter().map(|&o| self.types[o].1.clone()).collect();
                        let outs = op.run(&refs, &shapes);
                        if let (KernelOp::Scatter { .. }, Ok(outs)) = (op, &outs) {
                            // Remember the output so the next call can recycle it.
                            let o = step.outputs[0];
                            if self.pooled(o) {
                                let p = Pooled { data: outs[0].data.clone(), stamp: fresh_stamp(), derived: None };
                                self.pool(o).put(p);
                            }
                        }
                        outs
                    }
                }
                .map_err(|reason| CompileError::Runtime { node: step.name.clone(), reason })
            }
            StepKind::Gemm { func, .. } => {
                let a = value(vals, step.inputs[0], &step.name)?;
                let b = value(vals, step.inputs[1], &step.name)?;
                Ok(vec![self.gemm_call(*func, &a, &b, step.outputs[0], &step.name)?])
            }
            StepKind::Fused { func, dims, gemm, ops, ext, consts, .. } => {
                let product = match gemm {
                    Some(gp) => {
                        let a = value(vals, gp.a, &step.name)?;
                        let b = value(vals, gp.b, &step.name)?;
                        Some((gp.out, self.gemm_call(gp.func, &a, &b, gp.out, &step.name)?))
                    }
                    None => None,
                };
                let fused = FusedRun { step, func: *func, dims, ops: *ops, ext, consts };
                self.run_fused(si, &fused, vals, product.as_ref(), donations, written)
            }
            StepKind::View => unreachable!("views are run by run_steps"),
        }
    }

    /// The donated buffer output `o` of step `si` may be written into, when every
    /// reference to it is one of its argument's values (the argument or a view) in `vals`
    /// that this step reads last (any other reference — a kernel's output sharing the
    /// buffer, a step still reading it — makes the count differ).
    fn donated_out(&self, si: usize, o: ValueId, vals: &[Option<Tensor>], donations: &Donated) -> Option<Out> {
        let k = self.donates[si].iter().map(|&k| k as usize).find(|&k| self.in_place[k].out == o)?;
        let ptr = donations.get(k).copied().flatten()?;
        let mut holders = 0;
        let mut data = None;
        for &v in &self.in_place[k].alias {
            let Some(t) = &vals[v] else { continue };
            if data_ptr(t) != ptr {
                continue;
            }
            // An alias still in the table but read only before this step (kept for a failed
            // call to hand back) holds a reference too; one read later, or returned, forbids.
            if self.last_use[v] > Some(si) || self.retvals.contains(&v) {
                return None;
            }
            holders += 1;
            data = Some(&t.data);
        }
        let data = data?;
        if strong_count(data) != holders {
            return None;
        }
        // The later scatters that could still fail must not (their indices, checked now).
        for &ps in &self.in_place[k].prechecks {
            let s = &self.steps[ps];
            let indices = vals.get(s.inputs[1]).and_then(Option::as_ref)?;
            let updates: usize = self.types[s.inputs[2]].1.iter().product();
            crate::scatter::check_scatter(&self.types[s.inputs[0]].1, indices, updates).ok()?;
        }
        Some(Out::Donated(data.clone(), ptr))
    }

    /// Runs a fused loop; `product` is its GEMM prologue's output (a value of the step's
    /// own, not in `vals`).
    fn run_fused(
        &self,
        si: usize,
        run: &FusedRun<'_>,
        vals: &[Option<Tensor>],
        product: Option<&(ValueId, Tensor)>,
        donations: &Donated,
        written: &mut bool,
    ) -> Result<Vec<Tensor>, CompileError> {
        let FusedRun { step, func, dims, ops, ext, consts } = *run;
        let f = self.fns[func];
        // Donated buffers first, while the only references are the values (not `held`).
        let mut donated: SmallVec<[Option<Out>; 2]> = step
            .outputs
            .iter()
            .map(|&o| if self.donates[si].is_empty() { None } else { self.donated_out(si, o, vals, donations) })
            .collect();
        let mut ptrs: SmallVec<[*mut u8; 8]> = SmallVec::with_capacity(ext.len() + step.outputs.len() + 1);
        // Hold the input tensors so their buffers stay alive during the call.
        let mut held: SmallVec<[Tensor; 4]> = SmallVec::with_capacity(ext.len());
        for &v in ext {
            let t = match product {
                Some((p, t)) if *p == v => t.clone(),
                _ => value(vals, v, &step.name)?,
            };
            ptrs.push(data_ptr(&t));
            held.push(t);
        }
        let mut outs: SmallVec<[Out; 2]> = SmallVec::with_capacity(step.outputs.len());
        for (&o, d) in step.outputs.iter().zip(donated.iter_mut()) {
            *written |= d.is_some();
            let mut b = match d.take() {
                Some(b) => b,
                None => self.alloc(o, &step.name)?,
            };
            ptrs.push(b.ptr());
            outs.push(b);
        }
        // Only read (never written) by the kernel.
        ptrs.push(consts.as_ptr() as *mut u8);
        let total: usize = dims.iter().product();
        if total > 0 {
            let outer = dims[0];
            let work = total.saturating_mul(ops.max(1));
            let shared = SharedPtrs(ptrs.as_ptr());
            if self.threads > 1 && work >= PARALLEL_WORK && outer >= 2 {
                // Split the outermost dimension into a few chunks per thread, so a worker
                // that starts late (another process holds its core) still takes a share
                // instead of finding one half-sized chunk already claimed; a rank-1 nest
                // splits at multiples of a tile (and so of the unrolled vector step) so only
                // the last chunk runs the tails. Chunks are claimed dynamically (`team`).
                let parts = (self.threads * CHUNKS_PER_THREAD).min(outer);
                let mut chunk = outer.div_ceil(parts);
                if dims.len() == 1 {
                    chunk = chunk.div_ceil(crate::tile_routines::TILE) * crate::tile_routines::TILE;
                }
                // The fused code emits no loop a range could not reach (`CodeGen::fused`): a
                // chunk of a rank-1 nest starts and ends at multiples of TILE, but the last.
                debug_assert!(dims.len() > 1 || chunk % crate::tile_routines::TILE == 0);
                let ranges: Vec<(usize, usize)> =
                    (0..outer).step_by(chunk.max(1)).map(|s| (s, (s + chunk).min(outer))).collect();
                crate::team::run(ranges.len(), &|k| {
                    let (s, e) = ranges[k];
                    let p = shared;
                    // SAFETY: see SharedPtrs; each range writes disjoint output elements.
                    unsafe { f(p.0, s as i64, e as i64) };
                });
            } else {
                // SAFETY: the kernel was generated for these dtypes and shapes; outputs have
                // capacity for every element it writes.
                unsafe { f(ptrs.as_ptr(), 0, outer as i64) };
            }
        }
        drop(held);
        // SAFETY: the loop nest writes every element of every live output exactly once.
        Ok(step.outputs.iter().zip(outs).map(|(&o, b)| unsafe { self.finish(o, b) }).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(kind: StepKind, inputs: &[ValueId], outputs: &[ValueId]) -> Step {
        Step { name: "s".into(), kind, inputs: inputs.to_vec(), outputs: outputs.to_vec() }
    }

    fn kernel(inputs: &[ValueId], outputs: &[ValueId]) -> Step {
        step(StepKind::Kernel { op: KernelOp::L2Loss }, inputs, outputs)
    }

    /// A value reuses the pool of one whose buffer (views included) is dead by the step that
    /// writes it, never one still read there; returned and scattered values keep their own.
    #[test]
    fn dead_buffers_are_shared_and_escaping_ones_are_not() {
        let big = (DType::Float32, vec![4096]);
        let types = vec![big.clone(); 8];
        let steps = vec![
            kernel(&[0], &[1]),               // 0: v1
            kernel(&[1], &[2]),               // 1: v2 (v1 read here: no sharing)
            kernel(&[2], &[3]),               // 2: v3 takes v1's pool
            step(StepKind::View, &[3], &[4]), // 3: v4 is v3's buffer
            kernel(&[4], &[5]),               // 4: v5 returned: its own pool
            kernel(&[2, 5], &[6]),            // 5: v6 (v3 dead since 4 through its view)
            step(StepKind::Kernel { op: KernelOp::Scatter { kind: crate::scatter::ScatterKind::Update } }, &[6], &[7]),
        ];
        let mut last_use = vec![None; types.len()];
        for (si, s) in steps.iter().enumerate() {
            for &v in &s.inputs {
                last_use[v] = Some(si);
            }
        }
        let (pool_of, count) = assign_pools(&steps, &types, &last_use, &[5, 7], &[]);
        assert_eq!(pool_of[3], pool_of[1], "v1 is dead after step 1");
        assert_ne!(pool_of[2], pool_of[1], "v1 is read while v2 is written");
        assert_eq!(pool_of[6], pool_of[1], "v3 and its view are dead after step 4");
        assert!(pool_of.iter().filter(|&&p| p == pool_of[5]).count() == 1, "a returned value's pool is its own");
        assert!(pool_of.iter().filter(|&&p| p == pool_of[7]).count() == 1, "a scatter's pool is its own");
        assert!(pool_of.iter().all(|&p| (p as usize) < count));
        // Another size never shares.
        let mut mixed = types.clone();
        mixed[3] = (DType::Float32, vec![8192]);
        mixed[4] = mixed[3].clone();
        let (pool_of, _) = assign_pools(&steps, &mixed, &last_use, &[5, 7], &[]);
        assert_ne!(pool_of[3], pool_of[1]);
    }
}
