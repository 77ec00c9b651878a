//! Calls of cluster functions: the node the encapsulation pass puts between
//! a cluster's snapshot and write-back, whose op names a function in
//! `graph.library`.
//!
//! The body is instantiated once, when the plan is built (`_Arg` and
//! `_Retval` nodes around pure ops). Each call first asks the session's
//! [`Jit`] — a [`CompileCache`] keyed by function name and input dtypes and
//! shapes — for native code; when the compiler declines (an unsupported op,
//! dtype or shape) or fails, the reason is logged once per signature by the
//! cache and the body runs in the interpreter: a nested plan of the
//! reference executor over the body, fed with the call's inputs. The user
//! never sees a compile failure; a run-time failure of the compiled code is
//! retried in the interpreter, so errors are reported as the reference
//! kernels report them, naming the node inside the cluster:
//! `in cluster node 'gather' (GatherV2): …` (with the user's original op,
//! `ResourceGather→GatherV2`, when the body node records it in
//! `_autoclust_origin_op`); the executor prefixes the call node.
//!
//! Per-call cost: each call site remembers the signature it last ran and
//! the compiled function (or the decline) for it, so a steady-state call
//! compares dtypes and shapes and takes a read lock — no allocation, no
//! cache lookup; the shared [`CompileCache`] is consulted only when the
//! signature changes.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub use autoclust_compiler::{profile, CompilerOptions};
use autoclust_compiler::{CacheKey, CompileCache, CompiledFunction, Compiler};
use autoclust_graph::{same_dims, DType, FunctionDef, Graph, Library, Node, NodeId, Output, Tensor};
use parking_lot::{Mutex, RwLock};

use crate::bridge::{ref_count, same_buffer, InPlaceWriteBack};
use crate::error::{KResult, KernelError, RunError};
use crate::executor::{Plan, RunContext, Schedule};
use crate::kernels::resource::StatefulFn;
use crate::kernels::{Inputs, Outputs, PureFn};
use crate::variables::{VarId, VariableStore};
use smallvec::SmallVec;

/// The interpreter's kernels as the compiler's host kernels (`autoclust_compiler::host`):
/// what a compiled body runs for the ops the compiler types but does not lower.
struct InterpreterKernels;

impl InterpreterKernels {
    fn shared() -> autoclust_compiler::host::HostKernelsRef {
        autoclust_compiler::host::HostKernelsRef(Arc::new(InterpreterKernels))
    }
}

impl autoclust_compiler::host::HostKernels for InterpreterKernels {
    fn prepare(&self, node: &autoclust_graph::Node) -> Result<autoclust_compiler::host::HostFn, String> {
        let f = crate::kernels::prepare(node).map_err(|e| e.to_string())?;
        Ok(Box::new(move |ins: Vec<Tensor>| {
            f(ins.into_iter().collect()).map(|o| o.into_vec()).map_err(|e| e.to_string())
        }))
    }
}

/// A session's JIT: the compile cache and its statistics.
pub struct Jit {
    cache: CompileCache,
    enabled: bool,
    seen: Mutex<HashSet<CacheKey>>,
    compile_nanos: AtomicU64,
    fallbacks: AtomicU64,
    /// Per function that ran: compiled code, or the first reason it was interpreted.
    status: Mutex<BTreeMap<String, FunctionStatus>>,
    /// The bound on a `While`'s iterations (compiled or interpreted), from the options.
    max_loop_iterations: u64,
    /// Each cluster function's instantiated body, by name (as the compile cache keys
    /// them): made once, by the ahead-of-time compiles or the plan, whichever asks first
    /// (at 10⁵ nodes each body was instantiated twice, 0.1 s of the first step).
    bodies: Mutex<std::collections::HashMap<String, BodySlot>>,
}

/// Where [`Jit::body`] keeps one function's body (locked while it is being made, so a
/// second request waits for it instead of making its own).
type BodySlot = Arc<Mutex<Option<Arc<Body>>>>;

/// How a cluster function has run so far (see [`Jit::function_status`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FunctionStatus {
    /// Every call so far ran compiled code.
    Compiled,
    /// At least one call ran in the interpreter; why (the first reason seen,
    /// naming the node inside the cluster when the compiler gave one).
    Interpreted { reason: String },
}

impl Jit {
    /// A JIT with these compiler options; `enabled: false` always interprets.
    pub fn new(options: CompilerOptions, enabled: bool) -> Jit {
        // The TensorList ops of compiled loop bodies run the interpreter's kernels.
        let host_kernels = options.host_kernels.clone().or_else(|| Some(InterpreterKernels::shared()));
        let options = CompilerOptions { host_kernels, ..options };
        let max_loop_iterations =
            options.max_loop_iterations.unwrap_or(crate::function_call::DEFAULT_MAX_LOOP_ITERATIONS);
        Jit {
            max_loop_iterations,
            cache: CompileCache::new(Compiler::new(options)),
            enabled,
            seen: Mutex::new(HashSet::new()),
            compile_nanos: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
            status: Mutex::new(BTreeMap::new()),
            bodies: Mutex::new(Default::default()),
        }
    }

    /// The body of `function`, instantiated on the first request (a failure is not kept:
    /// the next request reports it again).
    fn body(&self, function: &FunctionDef, library: &Library) -> KResult<Arc<Body>> {
        let entry = self.bodies.lock().entry(function.signature.name.clone()).or_default().clone();
        let mut slot = entry.lock();
        if let Some(body) = slot.as_ref() {
            return Ok(body.clone());
        }
        let body = Arc::new(Body::new(function, library)?);
        *slot = Some(body.clone());
        Ok(body)
    }

    /// Total time spent in successful compiles so far.
    pub fn compile_time(&self) -> Duration {
        Duration::from_nanos(self.compile_nanos.load(Ordering::Relaxed))
    }

    /// Compiles done so far (including declined ones).
    pub fn compile_count(&self) -> usize {
        self.cache.compile_count()
    }

    /// Calls run by the interpreter so far.
    pub fn interpreted_calls(&self) -> u64 {
        self.fallbacks.load(Ordering::Relaxed)
    }

    /// Every cluster function called so far, by name, and how it ran. A
    /// function compiled for one signature and interpreted for another (or
    /// whose compiled code failed at run time) counts as interpreted.
    pub fn function_status(&self) -> BTreeMap<String, FunctionStatus> {
        self.status.lock().clone()
    }

    fn record(&self, function: &str, interpreted: Option<String>) {
        let mut status = self.status.lock();
        let entry = status.entry(function.to_string()).or_insert(FunctionStatus::Compiled);
        if let (FunctionStatus::Compiled, Some(reason)) = (&*entry, interpreted) {
            *entry = FunctionStatus::Interpreted { reason };
        }
    }
}

/// Input dtypes and shapes, by argument.
type Signature = Vec<(DType, Vec<usize>)>;

impl Jit {
    /// Compiles ahead, on a scoped pool of `threads` workers (0: one per core), the
    /// cluster functions that `graph`'s call nodes run, for the input dtypes and shapes
    /// inference gives them — when every one is static and the body takes no argument as
    /// a compile-time constant (whose value only a call knows). The first step then
    /// finds them in the cache, where the executor would compile each one when it first
    /// reaches it (one after another when the clusters wait on each other). Each
    /// (function, signature) compiles once either way, and a call gets what its own
    /// compile would have given (declines included, with their reasons), whatever the
    /// order the pool compiled in; a function whose inferred signature turns out not to
    /// be the call's is compiled again by the call. Returns how many were compiled.
    ///
    /// `seeds` are what the caller knows of the first step that the graph does not say
    /// (the fed shapes, the variables' types: [`crate::Session::seeds`]); without them a
    /// TensorFlow 2 step, whose variables are shapeless resource placeholders and whose
    /// batch dimension is `-1`, has no static signature at all.
    pub fn precompile(&self, graph: &Graph, threads: usize, seeds: &autoclust_graph::infer::Seeds) -> usize {
        if !self.enabled {
            return 0;
        }
        let body_shapes = BodyShapes { jit: self, in_body: false };
        let Ok((types, _)) = autoclust_graph::infer::infer_partial_seeded(graph, seeds, Some(&body_shapes)) else {
            return 0;
        };
        let mut seen: HashSet<(&str, Signature)> = HashSet::new();
        let mut work = Vec::new();
        let mut calls = 0;
        for node in graph.nodes() {
            if !is_call(&node.op, &graph.library) || !crate::function_call::is_cluster_call(node, &graph.library) {
                continue;
            }
            calls += 1;
            let sig: Option<Signature> =
                node.inputs.iter().map(|&o| types.output(o).and_then(|(d, s)| Some((*d, s.to_known()?)))).collect();
            if sig.is_none() {
                let unknown = node.inputs.iter().find(|&&o| types.output(o).and_then(|(_, s)| s.to_known()).is_none());
                tracing::debug!(call = %node.name, input = ?unknown.map(|o| graph.name(o.node)), "not precompiled: an input's type is not static");
            }
            // A TensorList argument's type (its length and element shapes) is known only
            // from the value: such a cluster compiles at its first call.
            if let Some(sig) = sig.filter(|s| s.iter().all(|(d, _)| *d != DType::Variant)) {
                if seen.insert((node.op.as_str(), sig.clone())) {
                    work.push((node.op.as_str(), sig));
                }
            }
        }
        tracing::debug!(calls, signatures = work.len(), "precompiling");
        let threads =
            if threads == 0 { std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) } else { threads };
        let next = std::sync::atomic::AtomicUsize::new(0);
        let compiled = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..threads.min(work.len()) {
                scope.spawn(|| {
                    while let Some((name, sig)) = work.get(next.fetch_add(1, Ordering::Relaxed)) {
                        let Some(function) = graph.library.function(name) else { continue };
                        let Ok(body) = self.body(function, &graph.library) else { continue };
                        if body.constant_args.is_empty() {
                            let _ = self.cache.get_or_compile(name, &body.graph, sig, &[]);
                            compiled.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        compiled.into_inner()
    }
}

/// Shapes the results of a cluster call for [`Jit::precompile`] by inferring the cluster's
/// body for the call's argument types, so a cluster fed by another's results compiles
/// ahead too; inside a body, a loop's results as its inputs' (the JIT compiles a loop only
/// when its carried values keep their types: `autoclust_compiler`'s `control_flow`). A
/// wrong guess costs a compile, never a wrong call: a call checks its signature.
struct BodyShapes<'j> {
    jit: &'j Jit,
    in_body: bool,
}

impl autoclust_graph::infer::CallShapes for BodyShapes<'_> {
    fn output_shapes(&self, graph: &Graph, node: &Node, inputs: &[(DType, Vec<usize>)]) -> Option<Vec<Vec<usize>>> {
        if self.in_body && matches!(node.op.as_str(), "While" | "StatelessWhile") {
            return Some(inputs.iter().map(|(_, s)| s.clone()).collect());
        }
        let function = graph.library.function(&node.op)?;
        if !crate::function_call::is_cluster_call(node, &graph.library) {
            return None;
        }
        let body = self.jit.body(function, &graph.library).ok()?;
        let mut seeds = autoclust_graph::infer::Seeds::default();
        for (&feed, &arg) in body.feeds.iter().zip(&body.feed_arg) {
            seeds.outputs.insert(feed, inputs.get(arg)?.clone());
        }
        let inner = BodyShapes { jit: self.jit, in_body: true };
        let (types, _) = autoclust_graph::infer::infer_partial_seeded(&body.graph, &seeds, Some(&inner)).ok()?;
        let shapes: Option<Vec<Vec<usize>>> = body.fetches.iter().map(|&o| types.output(o)?.1.to_known()).collect();
        if shapes.is_none() {
            let unknown = body.fetches.iter().find(|&&o| types.output(o).and_then(|t| t.1.to_known()).is_none());
            tracing::debug!(call = %node.name, result = ?unknown.map(|&o| body.graph.output_name(o)), "a result's shape is not inferred");
        }
        shapes
    }
}

impl Default for Jit {
    fn default() -> Jit {
        Jit::new(CompilerOptions::default(), true)
    }
}

/// Whether `op` names a function of `library` (a cluster call).
pub(crate) fn is_call(op: &str, library: &Library) -> bool {
    library.function(op).is_some()
}

/// One function body, ready for the JIT and the interpreter.
struct Body {
    name: String,
    graph: Graph,
    /// `_Arg` outputs sorted by node (the interpreter's feed order), and the
    /// argument index each one takes.
    feeds: Vec<Output>,
    feed_arg: Vec<usize>,
    /// The value each `_Retval` returns, in output order.
    fetches: Vec<Output>,
    /// Arguments whose values the compiler needs as constants (shape operands
    /// computed outside the cluster; [`autoclust_compiler::constant_args`]).
    constant_args: Vec<usize>,
    plan: OnceLock<Result<Arc<Plan>, RunError>>,
    /// Calls so far (the megamorphic rule, [`autoclust_compiler::CompileCache::get_or_compile_within`]).
    calls: std::sync::atomic::AtomicU64,
}

impl Body {
    fn new(function: &FunctionDef, library: &Library) -> KResult<Body> {
        let name = function.signature.name.clone();
        let graph = autoclust_graph::function::instantiate(function, library)
            .map_err(|e| KernelError::invalid(format!("cannot instantiate the cluster function: {e}")))?;
        let index = |id: NodeId| graph.node(id).attr("index").and_then(|a| a.as_int()).unwrap_or(-1);
        let mut args: Vec<(NodeId, i64)> =
            graph.node_ids().filter(|&id| graph.node(id).op == "_Arg").map(|id| (id, index(id))).collect();
        args.sort();
        let mut rets: Vec<(i64, Output)> = graph
            .node_ids()
            .filter(|&id| graph.node(id).op == "_Retval")
            .filter_map(|id| graph.node(id).inputs.first().map(|&o| (index(id), o)))
            .collect();
        rets.sort_by_key(|r| r.0);
        let n = args.len();
        if args.iter().any(|a| a.1 < 0 || a.1 as usize >= n) {
            return Err(KernelError::invalid(format!("function '{name}': malformed _Arg indices")));
        }
        Ok(Body {
            name,
            feeds: args.iter().map(|a| Output { node: a.0, port: 0 }).collect(),
            feed_arg: args.iter().map(|a| a.1 as usize).collect(),
            fetches: rets.into_iter().map(|r| r.1).collect(),
            constant_args: autoclust_compiler::constant_args(&graph),
            graph,
            plan: OnceLock::new(),
            calls: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Runs the body with the reference executor.
    /// A `While` in the body (one the JIT compiles, run here when it declined or failed)
    /// stops after `max_loop_iterations`, as everywhere in the session.
    fn interpret(&self, inputs: &[Tensor], max_loop_iterations: u64) -> KResult<Vec<Tensor>> {
        if inputs.len() != self.feeds.len() {
            return Err(KernelError::Arity { expected: self.feeds.len(), got: inputs.len() });
        }
        let store = VariableStore::new();
        let plan = self
            .plan
            .get_or_init(|| {
                // Every node runs, as in the plain run: one no result needs (a gradient only a
                // control edge waited for) still fails there when it is malformed.
                let every: Vec<NodeId> = self
                    .graph
                    .node_ids()
                    .filter(|&id| !matches!(self.graph.node(id).op.as_str(), "_Arg" | "_Retval"))
                    .collect();
                let request = (self.feeds.as_slice(), self.fetches.as_slice(), every.as_slice());
                Plan::build_limited(&self.graph, &store, None, request, max_loop_iterations).map(Arc::new)
            })
            .clone()
            .map_err(|e| KernelError::invalid(format!("in function '{}': {e}", self.name)))?;
        // An argument whose dtype is not the one its `_Arg` declares is refused here as the
        // compiled path refuses it, never computed in another type.
        for (feed, &i) in self.feeds.iter().zip(&self.feed_arg) {
            let arg = self.graph.node(feed.node);
            if let Some(t) = arg.attr("T").and_then(|a| a.as_type()).filter(|&t| t != inputs[i].dtype) {
                return Err(KernelError::invalid(format!(
                    "in function '{}': _Arg '{}' is {t} but input {i} is {}",
                    self.name, arg.name, inputs[i].dtype
                )));
            }
        }
        let feeds: Vec<Tensor> = self.feed_arg.iter().map(|&i| inputs[i].clone()).collect();
        let ctx =
            RunContext { graph: &self.graph, store: &store, plan: &plan, feeds: crate::executor::feed_values(feeds) };
        ctx.run(Schedule::Deterministic).map_err(|e| self.blame(e))
    }

    /// A failure inside the body, worded to name the node in the cluster (and the user's
    /// original op when the encapsulation pass recorded it).
    fn blame(&self, e: RunError) -> KernelError {
        match e {
            RunError::Node { node, op, error } => {
                let body_node = self.graph.find(&node).map(|id| self.graph.node(id));
                let origin_attr = |key: &str| {
                    body_node
                        .and_then(|n| n.attr(key))
                        .and_then(|a| a.as_str())
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                };
                let origin = origin_attr(ORIGIN_OP_ATTR).filter(|o| *o != op);
                // A node standing for a user's node under another name (a scatter's write,
                // named as the variable's SSA value) is reported as that node and its op.
                let stands_for = origin_attr(autoclust_graph::protocol::ORIGIN_NODE_ATTR);
                let op = match origin {
                    // Internal ops (encapsulation's shape checks) stand for the user's op.
                    Some(o) if op.starts_with(autoclust_graph::protocol::OP_PREFIX) || stands_for.is_some() => o,
                    Some(o) => format!("{o}\u{2192}{op}"),
                    None => op,
                };
                let node = stands_for.unwrap_or(node);
                KernelError::invalid(format!("in cluster node '{node}' ({op}): {error}"))
            }
            e => KernelError::invalid(format!("in function '{}': {e}", self.name)),
        }
    }
}

pub use autoclust_graph::ORIGIN_OP_ATTR;

/// What a call site last ran: its signature and the compiled function (`None`:
/// the compiler declined this signature, so the interpreter runs it).
struct SiteCache {
    sig: Vec<(DType, Vec<usize>)>,
    /// The TensorList arguments' types (compiled for like shapes); without their lengths
    /// when `any_length`.
    lists: ListArgs,
    /// Whether `compiled` serves every length of the list arguments ([`list_types`]).
    any_length: bool,
    /// The values of the arguments compiled as constants.
    constants: Vec<(usize, Tensor)>,
    compiled: Option<Arc<CompiledFunction>>,
}

impl SiteCache {
    /// Whether a call with `inputs` runs what this site ran last: O(1) per list argument (a
    /// list's type is read from its summary, [`ListType::of_value`]).
    fn matches(&self, inputs: &[Tensor]) -> bool {
        self.sig.len() == inputs.len()
            && self.sig.iter().zip(inputs).all(|((d, s), t)| *d == t.dtype && same_dims(s, &t.shape))
            && self.constants.iter().all(|(i, t)| inputs[*i].bit_eq(t))
            && self
                .lists
                .iter()
                .all(|(i, want)| inputs[*i].as_list().is_some_and(|l| want.describes(l, self.any_length)))
    }
}

use autoclust_compiler::lists::ListType;

/// The types of a call's TensorList arguments, by argument index.
type ListArgs = Vec<(usize, ListType)>;

/// The TensorList arguments' types: exact, and with their lengths forgotten.
fn list_types(inputs: &[Tensor]) -> (ListArgs, ListArgs) {
    let exact = autoclust_compiler::lists::list_args(inputs);
    let any = exact.iter().map(|(i, t)| (*i, t.any_length())).collect();
    (exact, any)
}

/// The values of `body`'s constant arguments in this call: small integer
/// tensors only (others stay run-time values; the compiler declines if it
/// needed them).
fn constant_values(body: &Body, inputs: &[Tensor]) -> Vec<(usize, Tensor)> {
    body.constant_args
        .iter()
        .filter_map(|&i| inputs.get(i).map(|t| (i, t)))
        .filter(|(_, t)| {
            matches!(t.dtype, DType::Int32 | DType::Int64)
                && t.num_elements() <= autoclust_compiler::constant_args::MAX_CONSTANT_ARG_ELEMENTS
        })
        .map(|(i, t)| (i, t.clone()))
        .collect()
}

/// The compiled function for this signature (`None`: interpret), from the call
/// site's memory or, on a new signature, the session's cache.
fn lookup(
    jit: &Jit,
    body: &Body,
    site: &RwLock<Option<SiteCache>>,
    inputs: &[Tensor],
) -> Option<Arc<CompiledFunction>> {
    if let Some(hit) = site.read().as_ref().filter(|c| c.matches(inputs)) {
        return hit.compiled.clone();
    }
    let sig: Vec<(DType, Vec<usize>)> = inputs.iter().map(|t| (t.dtype, t.shape.clone())).collect();
    let constants = constant_values(body, inputs);
    let calls = body.calls.load(Ordering::Relaxed);
    // A body taking lists is compiled first for any length of them: a loop body pushing to
    // (or popping from) a list it is called with gets a longer (shorter) list every
    // iteration, and compiled per length it compiled once per iteration. Only a body that
    // needs a length at compile time (a `TensorListStack` without `num_elements`, a length
    // in shape arithmetic) declines that and is compiled for the lengths it is called with.
    let (exact, any) = list_types(inputs);
    let compile = |lists: &[(usize, ListType)]| {
        jit.cache.get_or_compile_within(&body.name, &body.graph, &sig, lists, &constants, Some(calls))
    };
    let (result, lists, any_length) = match (exact != any).then(|| compile(&any)) {
        Some(Ok(f)) => (Ok(f), any, true),
        Some(Err(e @ autoclust_compiler::CompileError::Megamorphic { .. })) => (Err(e), exact, false),
        _ => (compile(&exact), exact, false),
    };
    let compiled = match result {
        Ok(f) => {
            let mut seen = jit.seen.lock();
            let key: CacheKey =
                (body.name.clone(), sig.clone(), autoclust_compiler::constant_key(&constants), lists.clone());
            if !seen.contains(&key) {
                jit.compile_nanos.fetch_add(f.compile_time().as_nanos() as u64, Ordering::Relaxed);
                seen.insert(key);
            }
            drop(seen);
            jit.record(&body.name, None);
            Some(Arc::new(f))
        }
        Err(e) => {
            tracing::info!(function = %body.name, error = %e, "not compiled; the interpreter runs it");
            jit.record(&body.name, Some(e.to_string()));
            None
        }
    };
    *site.write() = Some(SiteCache { sig, lists, any_length, constants, compiled: compiled.clone() });
    compiled
}

/// The kernel of a call node: JIT first, the interpreter otherwise.
pub(crate) fn prepare(function: &FunctionDef, library: &Library, jit: Arc<Jit>) -> KResult<PureFn> {
    let body = jit.body(function, library)?;
    let site: RwLock<Option<SiteCache>> = RwLock::new(None);
    Ok(Box::new(move |inputs: Inputs| -> KResult<Outputs> { call_site(&jit, &body, &site, inputs, None) }))
}

/// What surrounds a cluster call whose outputs a write-back node publishes and nothing
/// else orders (found by the executor): the call may do that write-back itself, in place
/// (see `crate::bridge`).
pub(crate) struct Bridged {
    /// Per call input: the variable it is a snapshot of (`None`: another value).
    pub inputs: Vec<Option<VarId>>,
    pub write_back: InPlaceWriteBack,
}

/// The kernel of a call node that may write its variables back in place ([`Bridged`]).
pub(crate) fn prepare_bridged(
    function: &FunctionDef,
    library: &Library,
    jit: Arc<Jit>,
    bridged: Bridged,
) -> KResult<StatefulFn> {
    let body = jit.body(function, library)?;
    let site: RwLock<Option<SiteCache>> = RwLock::new(None);
    Ok(Box::new(move |store: &VariableStore, inputs: Inputs| -> KResult<Outputs> {
        call_site(&jit, &body, &site, inputs, Some((store, &bridged)))
    }))
}

/// One call: compiled code (in place when [`try_in_place`] can), else the interpreter.
fn call_site(
    jit: &Jit,
    body: &Body,
    site: &RwLock<Option<SiteCache>>,
    inputs: Inputs,
    bridged: Option<(&VariableStore, &Bridged)>,
) -> KResult<Outputs> {
    let mut inputs = inputs;
    body.calls.fetch_add(1, Ordering::Relaxed);
    if jit.enabled {
        if let Some(f) = lookup(jit, body, site, &inputs) {
            if let Some((_, b)) = bridged {
                match try_in_place(b, &f, inputs) {
                    InPlace::Done(out) => return Ok(out),
                    InPlace::NotTaken(back) => inputs = back,
                    InPlace::Failed(e, back) => {
                        tracing::debug!(function = %body.name, error = %e, "compiled call failed; interpreting");
                        jit.record(&body.name, Some(format!("the compiled code failed at run time ({e})")));
                        jit.fallbacks.fetch_add(1, Ordering::Relaxed);
                        return Ok(body.interpret(&back?, jit.max_loop_iterations)?.into_iter().collect());
                    }
                }
            }
            if inputs.iter().any(|t| t.as_list().is_some() && t.data.is_unique()) {
                return call_owning_lists(jit, body, &f, inputs);
            }
            match f.call(&inputs) {
                Ok(out) => return Ok(out.into_iter().collect()),
                Err(e) => {
                    tracing::debug!(function = %body.name, error = %e, "compiled call failed; interpreting");
                    jit.record(&body.name, Some(format!("the compiled code failed at run time ({e})")));
                }
            }
        }
    } else {
        jit.record(&body.name, Some("the JIT is disabled".into()));
    }
    jit.fallbacks.fetch_add(1, Ordering::Relaxed);
    Ok(body.interpret(&inputs, jit.max_loop_iterations)?.into_iter().collect())
}

/// A compiled call given a TensorList only it holds: the inputs are moved in, so the list
/// ops update the list in place — a loop body pushing onto (or popping from) the list it is
/// passed would otherwise copy every element every iteration, the loop O(n²) in its trip
/// count. The list is then gone should the compiled code fail, so a failure is not retried in
/// the interpreter: it is reported as the interpreter reports a failing node (a host step's
/// message is the interpreter kernel's own), with the cluster node and its original op.
fn call_owning_lists(jit: &Jit, body: &Body, f: &CompiledFunction, inputs: Inputs) -> KResult<Outputs> {
    match f.call_owned(inputs.into_vec()) {
        Ok(out) => Ok(out.into_iter().collect()),
        Err(e) => {
            tracing::debug!(function = %body.name, error = %e, "compiled call failed on an owned list");
            jit.record(&body.name, Some(format!("the compiled code failed at run time ({e})")));
            Err(match e {
                autoclust_compiler::CompileError::Runtime { node, reason } => {
                    let op = body.graph.find(&node).map(|id| body.graph.node(id).op.clone()).unwrap_or_default();
                    body.blame(RunError::Node { node, op, error: KernelError::invalid(reason) })
                }
                e => KernelError::invalid(format!("in function '{}': {e}", body.name)),
            })
        }
    }
}

/// How an in-place attempt ended.
enum InPlace {
    /// Computed and published (the outputs).
    Done(Outputs),
    /// Not attempted: run the call as usual with these inputs.
    NotTaken(Inputs),
    /// The compiled code failed; the variables are as they were, and the inputs are back
    /// for the interpreter (an error if a donated one could not be restored).
    Failed(String, KResult<Vec<Tensor>>),
}

/// Runs `f` with the write-back done in place when some output goes back to a variable
/// whose snapshot is the input it may overwrite, and nobody else holds that buffer: the
/// variable and this call's input are its only two references, checked under the lock of
/// every written variable, which is held until the outputs are published. Not on a rayon
/// worker (the compiled code's parallel parts would run on that pool, whose other tasks
/// may be waiting for these locks).
fn try_in_place(b: &Bridged, f: &CompiledFunction, inputs: Inputs) -> InPlace {
    if rayon::current_thread_index().is_some() {
        return InPlace::NotTaken(inputs);
    }
    let pairs: SmallVec<[(usize, usize); 4]> = f
        .in_place_iter()
        .filter(|&(i, j)| b.inputs.get(i).copied().flatten().is_some_and(|v| b.write_back.output_for(v) == Some(j)))
        .collect();
    if pairs.is_empty() {
        return InPlace::NotTaken(inputs);
    }
    let mut guards = b.write_back.lock();
    if !b.write_back.accepts(&guards, |j| f.output_type(j)) {
        return InPlace::NotTaken(inputs);
    }
    let var = |i: usize| b.inputs[i].expect("paired inputs are snapshots");
    let donate: SmallVec<[(usize, usize); 4]> = pairs
        .into_iter()
        .filter(|&(i, j)| {
            guards.get(var(i)).is_some_and(|cur| same_buffer(&cur.data, &inputs[i].data))
                && ref_count(&inputs[i].data) == 2 + f.own_refs((i, j), &inputs[i])
        })
        .collect();
    if donate.is_empty() {
        return InPlace::NotTaken(inputs);
    }
    // The variable's reference goes; the input is now the buffer's only one.
    for &(i, _) in &donate {
        guards.take(var(i));
    }
    // Kept for the interpreter should the compiled code fail (the donated ones come back).
    let mut kept: Vec<Option<Tensor>> =
        inputs.iter().enumerate().map(|(i, t)| (!donate.iter().any(|d| d.0 == i)).then(|| t.clone())).collect();
    match f.call_donating(inputs.into_vec(), &donate) {
        Ok(outs) => {
            b.write_back.publish(&mut guards, &outs);
            InPlace::Done(outs.into_iter().collect())
        }
        Err((e, back)) => {
            for (i, t) in back {
                guards.set(var(i), t.clone());
                kept[i] = Some(t);
            }
            let inputs = kept.into_iter().collect::<Option<Vec<Tensor>>>().ok_or_else(|| {
                KernelError::invalid(format!("the compiled code failed after writing a variable in place ({e})"))
            });
            InPlace::Failed(e.to_string(), inputs)
        }
    }
}
