//! TensorFlow 1 loop frames unrolled to a bound: the graph of *operation instances*.
//!
//! Seed 000 defines an operation instance as a `(node, frame)` pair, and seed 002 (§4) says
//! each node fires at most once per "execution context", an iteration of each loop around
//! it. [`unroll`] makes those instances explicit, up to `max_iterations` iterations per
//! loop (iterations `0..=max_iterations`: the body may run `max_iterations` times), so the
//! explorer's model (each node fires once) applies unchanged:
//!
//! - a node in frame `F` gets one copy per iteration `0..=N` of `F` (and of every frame
//!   around `F`), named `node@F[i]` (`node@outer[i]@inner[j]` when nested); nodes outside
//!   every loop keep their names;
//! - an `Enter` copies its input from the parent context into iteration 0, and into every
//!   iteration when `is_constant`; a non-constant `Enter` is dead in later iterations (what
//!   its consumers there see: nothing arrives);
//! - the `NextIteration` of iteration `i` feeds the `Merge` of iteration `i + 1`; in
//!   iteration 0 that `Merge` input is dead;
//! - an `Exit` becomes one instance per iteration (`exit@F[i]`) and, under the `Exit`'s own
//!   name in the parent context, a `Merge` of them: the live one is the iteration whose
//!   `LoopCond` was false (dead when every iteration is dead, as TensorFlow sends a frame's
//!   dead exits when it completes);
//! - `Enter`, `NextIteration`, `LoopCond` and the per-iteration `Exit`s become `Identity`
//!   (deadness passes through them like through any op), so the result is acyclic;
//! - the `NextIteration`s of the last iteration are kept as *bound sentinels*: if one is
//!   live, the loop would run past the bound, and the explorer says so instead of
//!   answering for a truncated loop.
//!
//! - `parallel_iterations` orders the steps: iteration `j` of a frame starts once iteration
//!   `j - P` is done ([`Unrolled::order_iterations`]).
//!
//! Dead values themselves (`Switch`, `Merge`, propagation) are the explorer's
//! ([`crate::explore`]); clusters of the clustered program are instantiated per iteration
//! like their members.

use std::collections::HashMap;

use autoclust_graph::{AttrValue, Attrs, DType, Graph, NodeId, Output, RawNode, Tensor};
use autoclust_passes::deadness::DeadnessAnalysis;

use crate::model::{ClusterSpec, LoopBound, Program, Step, StepId, StepKind};
use crate::SemanticsError;

/// The default bound on each loop's iterations (`--max-iterations`).
pub const DEFAULT_MAX_ITERATIONS: usize = 16;

/// More operation instances than this is refused (a deep nest with a large bound).
const MAX_INSTANCES: usize = 1_000_000;

/// A node that is always dead (`Identity(Switch(false, false):1)`), for inputs that never
/// arrive: its output carries a dead value, its control edges deadness.
const DEAD_PRED: &str = "_explore/never";
const DEAD_SWITCH: &str = "_explore/never_switch";
const DEAD: &str = "_explore/dead";

/// Whether `name` is the unroller's always-dead predicate (what a never-arriving input's
/// chain ends in: it names no variable).
pub(crate) fn is_dead_sentinel(name: &str) -> bool {
    name == DEAD_PRED
}

const ENTER: &[&str] = &["Enter", "RefEnter"];
const EXIT: &[&str] = &["Exit", "RefExit"];
const NEXT: &[&str] = &["NextIteration", "RefNextIteration"];

/// Whether the graph has loop frames (or any loop op: `Enter`, `Exit`, `NextIteration`,
/// `LoopCond`), so [`unroll`] is needed.
pub fn has_frames(graph: &Graph) -> bool {
    graph.nodes().iter().any(|n| is_frame_op(&n.op))
}

/// Whether `op` only makes sense in a graph with frames (refused by the model unless
/// unrolled first).
pub(crate) fn is_frame_op(op: &str) -> bool {
    ENTER.contains(&op) || EXIT.contains(&op) || NEXT.contains(&op) || op == "LoopCond"
}

/// A graph's operation instances, with the fetches and clusters mapped onto them.
#[derive(Debug)]
pub struct Unrolled {
    /// The acyclic graph of operation instances.
    pub graph: Graph,
    pub fetches: Vec<Output>,
    /// The clusters, one per instance of each (a cluster lies in one frame).
    pub clusters: Option<Vec<ClusterSpec>>,
    /// The last iteration's `NextIteration`s: live means the loop goes on past the bound.
    pub bounds: Vec<LoopBound>,
    /// Per node of `graph`: its frame and iteration vector (one index per enclosing loop).
    instance: Vec<(u32, Vec<u32>)>,
    /// Per frame: the loops from the outermost down to it.
    chain: Vec<Vec<u32>>,
    /// Per frame: its `parallel_iterations`.
    parallel: Vec<u32>,
}

impl Unrolled {
    /// Adds `parallel_iterations` to the steps' order: TensorFlow starts iteration `j` of a
    /// frame only once iteration `j - P` is done, all of it (nested loops included), so
    /// every step of iteration `j` comes after every step of iteration `j - P` of the same
    /// frame instance.
    pub fn order_iterations(&self, program: &mut Program<'_>) {
        let node_of = |s: &Step| match s.kind {
            StepKind::Whole { node } | StepKind::RmwRead { node } | StepKind::RmwWrite { node } => Some(node),
            StepKind::Snapshot { cluster } | StepKind::WriteBack { cluster } => {
                program.clusters[cluster].members.first().copied()
            }
        };
        // Steps by (frame, iteration vector down to that frame).
        let mut at: HashMap<(u32, &[u32]), Vec<StepId>> = HashMap::new();
        for (i, s) in program.steps.iter().enumerate() {
            let Some(node) = node_of(s) else { continue };
            let (f, ctx) = &self.instance[node.index()];
            for (k, &frame) in self.chain[*f as usize].iter().enumerate() {
                at.entry((frame, &ctx[..=k])).or_default().push(StepId(i as u32));
            }
        }
        let mut extra: Vec<(usize, Vec<StepId>)> = Vec::new();
        for (i, s) in program.steps.iter().enumerate() {
            let Some(node) = node_of(s) else { continue };
            let (f, ctx) = &self.instance[node.index()];
            let mut deps = Vec::new();
            for (k, &frame) in self.chain[*f as usize].iter().enumerate() {
                let p = self.parallel[frame as usize];
                if ctx[k] >= p {
                    let mut earlier = ctx[..=k].to_vec();
                    earlier[k] -= p;
                    if let Some(steps) = at.get(&(frame, earlier.as_slice())) {
                        deps.extend_from_slice(steps);
                    }
                }
            }
            if !deps.is_empty() {
                extra.push((i, deps));
            }
        }
        for (i, deps) in extra {
            let step = &mut program.steps[i];
            step.deps.extend(deps);
            step.deps.sort();
            step.deps.dedup();
        }
    }
}

struct Frames<'g> {
    graph: &'g Graph,
    da: DeadnessAnalysis,
    /// Per frame: the frames from the outermost loop down to it (empty for the root).
    chain: Vec<Vec<u32>>,
    n: u32,
}

impl Frames<'_> {
    fn depth(&self, f: u32) -> usize {
        self.chain[f as usize].len()
    }

    /// Whether frame `g` is `f` or one of the frames around it.
    fn encloses(&self, g: u32, f: u32) -> bool {
        g == 0 || self.chain[f as usize].get(self.depth(g) - 1) == Some(&g)
    }

    /// The name of `node`'s instance in context `ctx` of frame `f`.
    fn name(&self, node: NodeId, f: u32, ctx: &[u32]) -> String {
        let mut s = self.graph.name(node).to_string();
        for (fr, i) in self.chain[f as usize].iter().zip(ctx) {
            s.push_str(&format!("@{}[{i}]", self.da.frame_name(*fr)));
        }
        s
    }

    fn unsupported(&self, node: NodeId, why: String) -> SemanticsError {
        let n = self.graph.node(node);
        SemanticsError::Unsupported { node: n.name.clone(), op: n.op.clone(), why }
    }

    /// The input `p:port` (or `^p`) of a node instance in context `ctx` of frame `f`.
    /// `enter`: the consumer is an `Enter` (its input lives in the parent context), with
    /// whether it is `is_constant`.
    fn input(
        &self,
        consumer: NodeId,
        f: u32,
        ctx: &[u32],
        p: NodeId,
        port: Option<u32>,
        enter: Option<bool>,
    ) -> Result<String, SemanticsError> {
        let dead = || match port {
            Some(_) => DEAD.to_string(),
            None => format!("^{DEAD}"),
        };
        let named = |name: String| match port {
            None => format!("^{name}"),
            Some(0) => name,
            Some(k) => format!("{name}:{k}"),
        };
        let g = self.da.frame(p);
        let last = ctx.last().copied().unwrap_or(0);
        if let Some(constant) = enter {
            if port.is_some() && !constant && last > 0 {
                return Ok(dead());
            }
            let outer = self.chain[f as usize].len().saturating_sub(1);
            if !self.encloses(g, f) || self.depth(g) > outer {
                return Err(self.unsupported(consumer, "its input is not in the loop's parent frame".into()));
            }
            return Ok(named(self.name(p, g, &ctx[..self.depth(g)])));
        }
        if NEXT.contains(&self.graph.node(p).op.as_str()) {
            if g != f {
                return Err(self.unsupported(consumer, "it reads a NextIteration of another frame".into()));
            }
            if last == 0 {
                return Ok(dead());
            }
            let mut prev = ctx.to_vec();
            *prev.last_mut().expect("a NextIteration is in a loop frame") -= 1;
            return Ok(named(self.name(p, g, &prev)));
        }
        if !self.encloses(g, f) {
            return Err(self.unsupported(
                consumer,
                format!("it reads '{}' of another loop frame without an Exit", self.graph.name(p)),
            ));
        }
        Ok(named(self.name(p, g, &ctx[..self.depth(g)])))
    }

    /// Every input of `id` as an instance in context `ctx` of frame `f`.
    fn inputs(&self, id: NodeId, f: u32, ctx: &[u32], enter: Option<bool>) -> Result<Vec<String>, SemanticsError> {
        let node = self.graph.node(id);
        let mut out = Vec::with_capacity(node.inputs.len() + node.control_inputs.len());
        for o in &node.inputs {
            out.push(self.input(id, f, ctx, o.node, Some(o.port), enter)?);
        }
        for &c in &node.control_inputs {
            out.push(self.input(id, f, ctx, c, None, enter)?);
        }
        Ok(out)
    }

    /// Every iteration vector of frame `f`.
    fn contexts(&self, f: u32) -> Vec<Vec<u32>> {
        let mut all = vec![Vec::new()];
        for _ in 0..self.depth(f) {
            all = all.into_iter().flat_map(|c| (0..self.n).map(move |i| [c.clone(), vec![i]].concat())).collect();
        }
        all
    }
}

/// Unrolls every loop frame of `graph` to `max_iterations` iterations (see the module
/// documentation). `fetches` must lie outside every loop; each cluster in one frame.
pub fn unroll(
    graph: &Graph,
    fetches: &[Output],
    clusters: Option<&[ClusterSpec]>,
    max_iterations: usize,
) -> Result<Unrolled, SemanticsError> {
    let _span = tracing::debug_span!("unroll", nodes = graph.len(), max_iterations).entered();
    // Iterations 0..=max_iterations: the loop body may run `max_iterations` times, and the
    // iteration after the last body still tests the condition (as the runtime's
    // `--max-loop-iterations`: starting iteration `max + 1` is the error).
    let n = u32::try_from(max_iterations.max(1)).unwrap_or(u32::MAX - 1) + 1;
    let da = DeadnessAnalysis::compute(graph);
    let parents = da.frame_parents(graph);
    for id in graph.node_ids() {
        let f = da.frame(id);
        if da.frame_name(f).starts_with('?') {
            let node = graph.node(id);
            return Err(SemanticsError::Unsupported {
                node: node.name.clone(),
                op: node.op.clone(),
                why: "its inputs come from different loop frames".into(),
            });
        }
    }
    let chain: Vec<Vec<u32>> = (0..da.frame_count())
        .map(|f| {
            if f == 0 {
                return Vec::new();
            }
            let mut c = vec![f as u32];
            let mut at = f;
            while let Some(p) = parents[at].filter(|&p| p != 0) {
                c.push(p);
                at = p as usize;
                if c.len() > parents.len() {
                    break;
                }
            }
            c.reverse();
            c
        })
        .collect();
    let fr = Frames { graph, da, chain, n };

    // Refuse what would not fit before building it.
    let mut instances: usize = 3;
    for id in graph.node_ids() {
        let f = fr.da.frame(id);
        // An Exit is one instance per iteration of the loop it leaves, plus its join.
        let extra = u32::from(EXIT.contains(&graph.node(id).op.as_str()));
        let per = (n as usize).checked_pow(fr.depth(f) as u32 + extra).unwrap_or(usize::MAX);
        instances = instances.saturating_add(per.saturating_mul(1 + extra as usize));
    }
    if instances > MAX_INSTANCES {
        return Err(SemanticsError::TooManyInstances { limit: MAX_INSTANCES, max_iterations });
    }

    let mut raw: Vec<RawNode> = Vec::new();
    let mut attrs = Attrs::new();
    attrs.insert("dtype".into(), AttrValue::Type(DType::Bool));
    attrs.insert("value".into(), AttrValue::Tensor(Tensor::scalar_bool(false)));
    raw.push(RawNode {
        name: DEAD_PRED.into(),
        op: "Const".into(),
        inputs: vec![],
        attrs,
        device: String::new(),
        span: None,
    });
    let mut attrs = Attrs::new();
    attrs.insert("T".into(), AttrValue::Type(DType::Bool));
    raw.push(RawNode {
        name: DEAD_SWITCH.into(),
        op: "Switch".into(),
        inputs: vec![DEAD_PRED.into(), DEAD_PRED.into()],
        attrs: attrs.clone(),
        device: String::new(),
        span: None,
    });
    raw.push(RawNode {
        name: DEAD.into(),
        op: "Identity".into(),
        inputs: vec![format!("{DEAD_SWITCH}:1")],
        attrs,
        device: String::new(),
        span: None,
    });
    // Per instance (the unrolled graph keeps `raw`'s order): its frame and iteration vector.
    let mut instance: Vec<(u32, Vec<u32>)> = vec![(0, Vec::new()); raw.len()];
    let mut sentinels: Vec<(String, String)> = Vec::new();
    for id in graph.node_ids() {
        let node = graph.node(id);
        let f = fr.da.frame(id);
        let op = node.op.as_str();
        if EXIT.contains(&op) {
            let Some(first) = node.inputs.first() else {
                return Err(fr.unsupported(id, "an Exit without an input".into()));
            };
            let c = fr.da.frame(first.node);
            if c == 0 || parents[c as usize] != Some(f) {
                return Err(fr.unsupported(id, "its input is not in a loop frame inside the Exit's frame".into()));
            }
            for ctx in fr.contexts(f) {
                let mut joined = Vec::with_capacity(n as usize);
                for i in 0..n {
                    let inner = [ctx.clone(), vec![i]].concat();
                    let name = fr.name(id, c, &inner);
                    instance.push((c, inner.clone()));
                    raw.push(RawNode {
                        name: name.clone(),
                        op: "Identity".into(),
                        inputs: fr.inputs(id, c, &inner, None)?,
                        attrs: node.attrs.clone(),
                        device: node.device.clone(),
                        span: node.span,
                    });
                    joined.push(name);
                }
                let mut attrs = node.attrs.clone();
                attrs.insert("N".into(), AttrValue::I(n as i64));
                instance.push((f, ctx.clone()));
                raw.push(RawNode {
                    name: fr.name(id, f, &ctx),
                    op: "Merge".into(),
                    inputs: joined,
                    attrs,
                    device: node.device.clone(),
                    span: node.span,
                });
            }
            continue;
        }
        let enter = ENTER.contains(&op).then(|| node.attr("is_constant").and_then(|a| a.as_bool()).unwrap_or(false));
        let renamed = if is_frame_op(op) { "Identity" } else { op };
        for ctx in fr.contexts(f) {
            let name = fr.name(id, f, &ctx);
            if NEXT.contains(&op) && ctx.last() == Some(&(n - 1)) {
                sentinels.push((name.clone(), fr.da.frame_name(f).to_string()));
            }
            instance.push((f, ctx.clone()));
            raw.push(RawNode {
                name,
                op: renamed.to_string(),
                inputs: fr.inputs(id, f, &ctx, enter)?,
                attrs: node.attrs.clone(),
                device: node.device.clone(),
                span: node.span,
            });
        }
    }
    let unrolled = Graph::from_raw(raw, graph.library.clone(), graph.versions.clone()).map_err(|e| {
        SemanticsError::Unsupported {
            node: DEAD.into(),
            op: "Identity".into(),
            why: format!("unrolling the loop frames made a malformed graph: {e}"),
        }
    })?;
    let find = |name: &str| unrolled.find(name).expect("every instance was added");

    let mut mapped_fetches = Vec::with_capacity(fetches.len());
    for o in fetches {
        let f = fr.da.frame(o.node);
        if f != 0 {
            return Err(fr.unsupported(
                o.node,
                format!("fetched inside loop frame '{}' (fetch the loop's Exit instead)", fr.da.frame_name(f)),
            ));
        }
        mapped_fetches.push(Output { node: find(graph.name(o.node)), port: o.port });
    }
    let mapped_clusters = match clusters {
        None => None,
        Some(specs) => {
            let mut out = Vec::new();
            for spec in specs {
                let members: Vec<NodeId> = spec.nodes.iter().copied().filter(|m| m.index() < graph.len()).collect();
                let Some(&first) = members.first() else { continue };
                let f = fr.da.frame(first);
                if let Some(&m) =
                    members.iter().find(|&&m| fr.da.frame(m) != f || EXIT.contains(&graph.node(m).op.as_str()))
                {
                    return Err(SemanticsError::Clustering(format!(
                        "cluster {} spans loop frames ('{}' is not in frame '{}')",
                        spec.name,
                        graph.name(m),
                        fr.da.frame_name(f)
                    )));
                }
                for ctx in fr.contexts(f) {
                    let mut name = spec.name.clone();
                    for (fr_id, i) in fr.chain[f as usize].iter().zip(&ctx) {
                        name.push_str(&format!("@{}[{i}]", fr.da.frame_name(*fr_id)));
                    }
                    let nodes = members.iter().map(|&m| find(&fr.name(m, f, &ctx))).collect();
                    out.push(ClusterSpec { name, nodes });
                }
            }
            Some(out)
        }
    };
    let bounds = sentinels
        .into_iter()
        .map(|(name, frame)| LoopBound { node: find(&name), frame, max_iterations: n as usize - 1 })
        .collect();
    // `parallel_iterations` of each frame (TensorFlow's default 10 when its Enters do not say).
    let mut parallel = vec![u32::MAX; fr.da.frame_count()];
    for id in graph.node_ids() {
        let node = graph.node(id);
        if ENTER.contains(&node.op.as_str()) {
            let p = node.attr("parallel_iterations").and_then(|a| a.as_int()).unwrap_or(10).clamp(1, u32::MAX as i64);
            let f = fr.da.frame(id) as usize;
            parallel[f] = parallel[f].min(p as u32);
        }
    }
    tracing::debug!(instances = unrolled.len(), "unrolled");
    Ok(Unrolled {
        graph: unrolled,
        fetches: mapped_fetches,
        clusters: mapped_clusters,
        bounds,
        instance,
        chain: fr.chain,
        parallel,
    })
}
