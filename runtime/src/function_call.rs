//! Function calls and functional control flow, run as TensorFlow's executor
//! runs them: `PartitionedCall`, `StatefulPartitionedCall`, TF1 "Defun"
//! nodes (whose op *is* the name of a library function), `If`/`StatelessIf`,
//! `Case`/`StatelessCase` and `While`/`StatelessWhile`.
//!
//! Each function a plan calls is instantiated once per plan
//! ([`autoclust_graph::function::instantiate_with`]: `_Arg`/`_Retval` nodes
//! around the body) and planned by the reference executor as a nested
//! [`Plan`], with the call's inputs as the `_Arg` feeds and the `_Retval`
//! values as the fetches. The body runs against the **session's**
//! [`VariableStore`]: a resource argument is the caller's handle, so
//! `ReadVariableOp`, `AssignVariableOp`, `AssignAddVariableOp`,
//! `ResourceApply*`, `ResourceGather`, … inside the body act on the session's
//! variables, each op through its own kernel — every variable access atomic,
//! each read-modify-write op holding its locks for that op only. The call as
//! a whole is not atomic (TensorFlow's semantics): other nodes of the step
//! (and other steps) may run between the body's ops. The body runs on the
//! calling worker in the deterministic order, which is one of the orders
//! TensorFlow's executor may pick.
//!
//! Like TensorFlow's `PruneFunctionBody`, a body runs what its outputs and
//! control outputs need plus every node with an effect (resource ops, calls,
//! stateful or unknown ops); unused pure nodes are skipped.
//!
//! Which path a call takes: a call of an encapsulated cluster function (the
//! node the encapsulation pass writes; [`is_cluster_call`]) stays with
//! [`crate::cluster_call`] (JIT with interpreter fallback); every other call is
//! prepared here. A function that calls itself, directly or through others
//! (including through `If`/`While` branches), is an error when the plan is
//! built, never a stack overflow. Errors inside a body name the call node and
//! the inner node: `node 'outer' (StatefulPartitionedCall): in function 'f':
//! node 'inner' (AssignAddVariableOp): …`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use autoclust_graph::{
    effects, registry, AttrValue, Attrs, DType, FuncAttr, FunctionDef, Graph, Library, ListValue, Node, NodeId, Output,
    RawNode, Tensor,
};

use crate::cluster_call::Jit;
use crate::error::{KResult, KernelError, RunError};
use crate::executor::{Plan, RunContext, Schedule};
use crate::kernels::resource::StatefulFn;
use crate::kernels::{self, Inputs, Outputs};
use crate::variables::VariableStore;

/// Ops that call the function named by their `f` attribute.
const CALL_OPS: &[&str] = &["PartitionedCall", "StatefulPartitionedCall"];

/// The functions instantiated while one top-level plan is built: each
/// (function, instantiation attributes) once, and the chain of functions
/// being instantiated, to reject recursion.
pub(crate) struct Instantiations {
    stack: Vec<String>,
    bodies: HashMap<String, Arc<FunctionBody>>,
    /// Iterations after which a `While` is an error ([`DEFAULT_MAX_LOOP_ITERATIONS`]).
    pub(crate) max_loop_iterations: u64,
}

impl Default for Instantiations {
    fn default() -> Instantiations {
        Instantiations { stack: Vec::new(), bodies: HashMap::new(), max_loop_iterations: DEFAULT_MAX_LOOP_ITERATIONS }
    }
}

/// How many iterations a `While` may run before the step fails (TensorFlow
/// has no bound; a loop whose condition never turns false would hang).
/// `SessionOptions::max_loop_iterations` (the CLI's `--max-loop-iterations`)
/// overrides it.
pub use autoclust_graph::limits::DEFAULT_MAX_LOOP_ITERATIONS;

/// Whether `node` is the call of a cluster function written by the
/// encapsulation pass, which [`crate::cluster_call`] runs (JIT first).
///
/// The pass names the function after the cluster and writes the call
/// without attributes (internal `_`-prefixed ones aside); its body is pure SSA whose inputs use autoclust's own
/// `node:port` spelling, which TensorFlow never writes inside a function
/// (TensorFlow writes `node:output_arg:index`). So a cluster call is a node
/// with no attribute but internal (`_`-prefixed) ones whose op names a library function that: has a fixed,
/// non-resource signature, no type attributes, no control outputs, is not
/// stateful; returns only `node:port` values; spells no input in
/// TensorFlow's three-part form; and whose body ops are all stateless (known to the registry
/// as such, or with a pure kernel) with no resource effect or function call. Whatever is misjudged by this
/// test stays correct: a pure body gives the same values on either path.
pub fn is_cluster_call(node: &Node, library: &Library) -> bool {
    let Some(f) = library.function(&node.op) else { return false };
    node.attrs.keys().all(|k| k.starts_with('_')) && is_cluster_function(f, library)
}

fn is_cluster_function(f: &FunctionDef, library: &Library) -> bool {
    let sig = &f.signature;
    let plain_arg = |a: &autoclust_graph::ArgDef| {
        a.number_attr.is_empty()
            && a.type_list_attr.is_empty()
            && !a.is_ref
            && a.dtype.is_some_and(|d| d != DType::Resource)
    };
    let two_part = |s: &str| s.split(':').count() == 2;
    let spelled_by_autoclust = |s: &str| s.starts_with('^') || s.split(':').count() <= 2;
    !sig.is_stateful
        && sig.attrs.is_empty()
        && f.control_ret.is_empty()
        && !f.ret.is_empty()
        && sig.inputs.iter().all(plain_arg)
        && sig.outputs.iter().all(plain_arg)
        && f.ret.iter().all(|(_, v)| two_part(v))
        && {
            let mut seen = HashSet::new();
            f.nodes.iter().all(|n| {
                n.inputs.iter().all(|i| spelled_by_autoclust(i)) && is_pure_node(&n.op, &n.attrs, library, &mut seen)
            })
        }
}

/// Whether a body node computes a pure function of its inputs: a stateless op with no
/// resource or table effect that calls no function — or a functional `While`/`If`/`Case` (which
/// the JIT compiles inside a cluster, `autoclust_compiler::control_flow`) whose functions'
/// nodes are all pure in the same sense. `seen` holds the functions already checked (or
/// being checked: a recursive call is refused when the body is instantiated).
fn is_pure_node(op: &str, attrs: &Attrs, library: &Library, seen: &mut HashSet<String>) -> bool {
    if library.function(op).is_some() || effects::table_kind(op).is_some() {
        return false;
    }
    if attrs.values().any(is_func_like) {
        if !matches!(op, "While" | "StatelessWhile" | "If" | "StatelessIf" | "Case" | "StatelessCase") {
            return false;
        }
        let functions = attrs.values().flat_map(|a| match a {
            AttrValue::Func(f) => std::slice::from_ref(f),
            AttrValue::List(ListValue::Func(fs)) => fs.as_slice(),
            _ => &[],
        });
        return functions.collect::<Vec<_>>().into_iter().all(|f| {
            if !f.attrs.is_empty() {
                return false;
            }
            let Some(g) = library.function(&f.name) else { return false };
            if !seen.insert(f.name.clone()) {
                return true;
            }
            g.signature.attrs.is_empty() && g.nodes.iter().all(|m| is_pure_node(&m.op, &m.attrs, library, seen))
        });
    }
    match registry::lookup(op) {
        Some(schema) => !schema.is_stateful,
        None => kernels::has_pure_kernel(op),
    }
}

fn is_func_like(a: &AttrValue) -> bool {
    a.is_func() || matches!(a, AttrValue::List(ListValue::Func(_)))
}

/// What a node that calls functions does.
enum CallKind<'a> {
    /// `PartitionedCall`/`StatefulPartitionedCall` (`f`) or a Defun node (the op).
    Call {
        name: &'a str,
        attrs: &'a Attrs,
    },
    If {
        then_branch: &'a FuncAttr,
        else_branch: &'a FuncAttr,
    },
    Case {
        branches: &'a [FuncAttr],
    },
    While {
        cond: &'a FuncAttr,
        body: &'a FuncAttr,
    },
}

fn func_attr<'a>(node: &'a Node, name: &str) -> KResult<&'a FuncAttr> {
    node.attr(name).and_then(AttrValue::as_func).ok_or_else(|| KernelError::Attr(name.into()))
}

fn call_kind<'a>(node: &'a Node, library: &Library) -> KResult<Option<CallKind<'a>>> {
    let op = node.op.as_str();
    Ok(Some(match op {
        _ if CALL_OPS.contains(&op) => {
            let f = func_attr(node, "f")?;
            CallKind::Call { name: &f.name, attrs: &f.attrs }
        }
        "If" | "StatelessIf" => {
            CallKind::If { then_branch: func_attr(node, "then_branch")?, else_branch: func_attr(node, "else_branch")? }
        }
        "Case" | "StatelessCase" => match node.attr("branches") {
            Some(AttrValue::List(ListValue::Func(b))) if !b.is_empty() => CallKind::Case { branches: b },
            _ => return Err(KernelError::Attr("branches".into())),
        },
        "While" | "StatelessWhile" => {
            CallKind::While { cond: func_attr(node, "cond")?, body: func_attr(node, "body")? }
        }
        _ if library.function(op).is_some() => CallKind::Call { name: op, attrs: &node.attrs },
        _ => return Ok(None),
    }))
}

/// The kernel of a node that calls functions, or `None` for any other node.
pub(crate) fn prepare(
    graph: &Graph,
    store: &VariableStore,
    jit: Option<&Arc<Jit>>,
    id: NodeId,
    inst: &mut Instantiations,
) -> KResult<Option<StatefulFn>> {
    let node = graph.node(id);
    let library = &graph.library;
    let Some(kind) = call_kind(node, library)? else { return Ok(None) };
    let limit = inst.max_loop_iterations;
    let mut body = |f: &FuncAttr| instantiate(&f.name, &f.attrs, library, store, jit, inst);
    Ok(Some(match kind {
        CallKind::Call { name, attrs } => {
            let f = body(&FuncAttr { name: name.to_string(), attrs: attrs.clone() })?;
            Box::new(move |store: &VariableStore, inputs: Inputs| -> KResult<Outputs> {
                Ok(f.invoke(store, inputs.into_vec())?.into_iter().collect())
            })
        }
        CallKind::If { then_branch, else_branch } => {
            let (then_f, else_f) = (body(then_branch)?, body(else_branch)?);
            Box::new(move |store: &VariableStore, inputs: Inputs| -> KResult<Outputs> {
                let mut args = inputs.into_vec();
                if args.is_empty() {
                    return Err(KernelError::Arity { expected: 1, got: 0 });
                }
                let cond = args.remove(0);
                let f = if to_bool(&cond, "cond")? { &then_f } else { &else_f };
                Ok(f.invoke(store, args)?.into_iter().collect())
            })
        }
        CallKind::Case { branches } => {
            let bodies = branches.iter().map(&mut body).collect::<KResult<Vec<_>>>()?;
            Box::new(move |store: &VariableStore, inputs: Inputs| -> KResult<Outputs> {
                let mut args = inputs.into_vec();
                if args.is_empty() {
                    return Err(KernelError::Arity { expected: 1, got: 0 });
                }
                let index = args.remove(0);
                let i = kernels::int_scalar(&index, "branch_index")?;
                // TensorFlow runs the last branch for an index out of range.
                let f = usize::try_from(i).ok().and_then(|i| bodies.get(i)).unwrap_or(&bodies[bodies.len() - 1]);
                Ok(f.invoke(store, args)?.into_iter().collect())
            })
        }
        CallKind::While { cond, body: loop_body } => {
            let (cond_f, body_f) = (body(cond)?, body(loop_body)?);
            if cond_f.ret_types.len() != 1 {
                return Err(KernelError::invalid(format!(
                    "the loop condition '{}' returns {} values, not 1",
                    cond_f.name,
                    cond_f.ret_types.len()
                )));
            }
            if body_f.ret_types.len() != body_f.arg_types.len() {
                return Err(KernelError::invalid(format!(
                    "the loop body '{}' takes {} values but returns {}",
                    body_f.name,
                    body_f.arg_types.len(),
                    body_f.ret_types.len()
                )));
            }
            Box::new(move |store: &VariableStore, inputs: Inputs| -> KResult<Outputs> {
                let mut values = inputs.into_vec();
                let mut done: u64 = 0;
                loop {
                    let c = cond_f.invoke(store, values.clone())?;
                    if !to_bool(&c[0], "the loop condition")? {
                        return Ok(values.into_iter().collect());
                    }
                    if done == limit {
                        return Err(KernelError::invalid(format!(
                            "the loop ran {limit} iterations and its condition '{}' is still true: \
                             --max-loop-iterations {limit} reached (raise it if the loop is meant to run longer)",
                            cond_f.name
                        )));
                    }
                    values = body_f.invoke(store, values)?;
                    done += 1;
                }
            })
        }
    }))
}

/// Runs `node`, a call of functions (`While`, `If`, `Case`, `PartitionedCall`, a Defun-style
/// op) of `library`, on `inputs`, against an empty variable store: how the semantics
/// explorer evaluates a call whose functions touch no variable
/// (`autoclust_graph::effects::calls_touch_no_resource`), with the same kernels and loop
/// bound as `run`. The node's control inputs are dropped (the caller ordered it already).
pub fn run_call(node: &Node, library: &Library, inputs: &[Tensor], max_loop_iterations: u64) -> KResult<Vec<Tensor>> {
    let arg = |i: usize| format!("_autoclust_call_arg_{i}");
    let mut raw: Vec<RawNode> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut attrs = Attrs::new();
            attrs.insert("dtype".into(), AttrValue::Type(t.dtype));
            RawNode { name: arg(i), op: "Placeholder".into(), inputs: vec![], attrs, device: String::new(), span: None }
        })
        .collect();
    raw.push(RawNode {
        name: node.name.clone(),
        op: node.op.clone(),
        inputs: (0..inputs.len()).map(|i| format!("{}:0", arg(i))).collect(),
        attrs: node.attrs.clone(),
        device: String::new(),
        span: None,
    });
    let graph = Graph::from_raw(raw, library.clone(), None).map_err(|e| KernelError::invalid(e.to_string()))?;
    let id = graph.find(&node.name).ok_or_else(|| KernelError::invalid("the call node is missing"))?;
    let store = VariableStore::new();
    let mut inst = Instantiations { max_loop_iterations, ..Default::default() };
    let f = prepare(&graph, &store, None, id, &mut inst)?
        .ok_or_else(|| KernelError::invalid(format!("{} calls no function", node.op)))?;
    Ok(f(&store, inputs.iter().cloned().collect())?.into_vec())
}

/// TensorFlow's `ToBool` of a predicate: a scalar is true when non-zero
/// (a string when non-empty); any other tensor when it has elements.
fn to_bool(t: &Tensor, what: &str) -> KResult<bool> {
    t.truth()
        .ok_or_else(|| KernelError::invalid(format!("{what} must be a scalar number, bool or string, got {}", t.dtype)))
}

/// Instantiates (or finds) a function body for this plan.
fn instantiate(
    name: &str,
    attrs: &Attrs,
    library: &Library,
    store: &VariableStore,
    jit: Option<&Arc<Jit>>,
    inst: &mut Instantiations,
) -> KResult<Arc<FunctionBody>> {
    let function = library
        .function(name)
        .ok_or_else(|| KernelError::invalid(format!("function '{name}' is not in the graph's library")))?;
    if inst.stack.iter().any(|f| f == name) {
        let mut chain = inst.stack.clone();
        chain.push(name.to_string());
        let start = chain.iter().position(|f| f == name).unwrap_or(0);
        return Err(KernelError::invalid(format!(
            "function '{name}' calls itself recursively ({}), which is not supported",
            chain[start..].join(" -> ")
        )));
    }
    // Loaders refuse deeper chains (`Graph::check_call_depth`); this bounds the descent
    // (plan building here, invocation at run time) for graphs built in memory too.
    let limit = autoclust_graph::limits::MAX_CALL_DEPTH;
    if inst.stack.len() >= limit {
        return Err(KernelError::invalid(format!(
            "function '{name}': function calls nested deeper than {limit} levels (the chain starts at '{}')",
            inst.stack[0]
        )));
    }
    // Only the attributes the signature declares select an instantiation.
    let bound: Attrs = attrs
        .iter()
        .filter(|(k, _)| function.signature.attrs.iter().any(|a| &a.name == *k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let key = format!("{name}{bound:?}");
    if let Some(b) = inst.bodies.get(&key) {
        return Ok(b.clone());
    }
    inst.stack.push(name.to_string());
    let body = FunctionBody::build(function, &bound, library, store, jit, inst);
    inst.stack.pop();
    let body = Arc::new(body?);
    inst.bodies.insert(key, body.clone());
    Ok(body)
}

/// One instantiated function: its graph and the nested plan that runs it.
pub(crate) struct FunctionBody {
    name: String,
    graph: Graph,
    plan: Plan,
    /// The argument index of each plan feed (the plan's feeds are sorted by node).
    feed_arg: Vec<usize>,
    arg_types: Vec<DType>,
    ret_types: Vec<DType>,
}

impl FunctionBody {
    fn build(
        function: &FunctionDef,
        attrs: &Attrs,
        library: &Library,
        store: &VariableStore,
        jit: Option<&Arc<Jit>>,
        inst: &mut Instantiations,
    ) -> KResult<FunctionBody> {
        let name = function.signature.name.clone();
        let _span = tracing::debug_span!("instantiate_call", function = %name).entered();
        let graph = autoclust_graph::function::instantiate_with(function, library, attrs)
            .map_err(|e| KernelError::invalid(format!("cannot instantiate: {e}")))?;
        let graph = crate::kernels::random::scope_random_ops(graph, &name)
            .map_err(|e| KernelError::invalid(format!("cannot instantiate: {e}")))?;
        let index = |id: NodeId| graph.node(id).attr("index").and_then(AttrValue::as_int).unwrap_or(-1);
        let dtype = |id: NodeId| graph.node(id).attr("T").and_then(AttrValue::as_type).unwrap_or(DType::Float32);
        let args: Vec<NodeId> = graph.node_ids().filter(|&id| graph.node(id).op == "_Arg").collect();
        let mut rets: Vec<(i64, NodeId)> =
            graph.node_ids().filter(|&id| graph.node(id).op == "_Retval").map(|id| (index(id), id)).collect();
        rets.sort();
        let mut arg_types = vec![DType::Float32; args.len()];
        let mut feed_arg = Vec::with_capacity(args.len());
        for &a in &args {
            let i = usize::try_from(index(a)).ok().filter(|&i| i < args.len());
            let i = i.ok_or_else(|| KernelError::invalid(format!("function '{name}': malformed _Arg indices")))?;
            arg_types[i] = dtype(a);
            feed_arg.push(i);
        }
        let feeds: Vec<Output> = args.iter().map(|&node| Output { node, port: 0 }).collect();
        let fetches: Vec<Output> = rets.iter().map(|&(_, r)| graph.node(r).inputs[0]).collect();
        let ret_types = rets.iter().map(|&(_, r)| dtype(r)).collect();
        // Like TensorFlow's PruneFunctionBody: outputs, control outputs and every effect run.
        let control_ret: Vec<&str> = function.control_ret.iter().map(|(_, n)| n.as_str()).collect();
        let targets: Vec<NodeId> = graph
            .node_ids()
            .filter(|&id| {
                let n = graph.node(id);
                n.op != "_Arg"
                    && n.op != "_Retval"
                    && (control_ret.contains(&n.name.as_str()) || has_effect(n, library))
            })
            .collect();
        let plan = Plan::build_with(&graph, store, jit, &feeds, &fetches, &targets, inst)
            .map_err(|e| KernelError::invalid(format!("in function '{name}': {e}")))?;
        Ok(FunctionBody { name, graph, plan, feed_arg, arg_types, ret_types })
    }

    /// Runs the body on `args` (in argument order) against the session's variables.
    fn invoke(&self, store: &VariableStore, args: Vec<Tensor>) -> KResult<Vec<Tensor>> {
        if args.len() != self.arg_types.len() {
            return Err(KernelError::invalid(format!(
                "function '{}' takes {} arguments, the call passed {}",
                self.name,
                self.arg_types.len(),
                args.len()
            )));
        }
        for (i, (t, &want)) in args.iter().zip(&self.arg_types).enumerate() {
            if t.dtype != want {
                return Err(KernelError::invalid(format!(
                    "argument {i} of function '{}' must be {want}, the call passed {}",
                    self.name, t.dtype
                )));
            }
        }
        let mut slots: Vec<Option<Tensor>> = args.into_iter().map(Some).collect();
        let feeds: Vec<Tensor> =
            self.feed_arg.iter().map(|&i| slots[i].take().expect("each argument feeds one _Arg")).collect();
        let ctx =
            RunContext { graph: &self.graph, store, plan: &self.plan, feeds: crate::executor::feed_values(feeds) };
        let out = ctx.run(Schedule::Deterministic).map_err(|e| self.inner_error(e))?;
        for (i, (t, &want)) in out.iter().zip(&self.ret_types).enumerate() {
            if t.dtype != want {
                return Err(KernelError::invalid(format!(
                    "in function '{}': return value {i} must be {want}, the body produced {}",
                    self.name, t.dtype
                )));
            }
        }
        Ok(out)
    }

    fn inner_error(&self, e: RunError) -> KernelError {
        KernelError::invalid(format!("in function '{}': {e}", self.name))
    }
}

/// Registers the variables that `VarHandleOp`s inside library functions
/// name, so they exist (for `--vars`, `set_variable` and the saved
/// variables) before a plan instantiates the bodies.
pub(crate) fn register_body_variables(store: &VariableStore, library: &Library) {
    for raw in library.functions.iter().flat_map(|f| &f.nodes).filter(|n| n.op == "VarHandleOp") {
        let node = Node {
            name: raw.name.clone(),
            op: raw.op.clone(),
            inputs: Vec::new(),
            control_inputs: Vec::new(),
            attrs: raw.attrs.clone(),
            device: raw.device.clone(),
            span: raw.span,
        };
        store.register_handle(&node);
    }
}

/// Whether a body node must run even when no output needs it: a resource
/// effect or a call, a stateful op, or an op the registry does not know and
/// the runtime has no pure kernel for.
fn has_effect(node: &Node, library: &Library) -> bool {
    if effects::resource_kind(node, library).is_some() {
        return true;
    }
    match registry::lookup(&node.op) {
        Some(schema) => schema.is_stateful,
        None => !kernels::has_pure_kernel(&node.op),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use autoclust_graph::{text, Tensor};

    use super::*;
    use crate::{RunRequest, Session, SessionOptions};

    const VAR: &str = "v = VarHandleOp() {container = \"\", dtype = float32, shape = shape[], shared_name = \"v\"}\n";

    fn session(src: &str, threads: usize) -> Session {
        let graph = text::parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        Session::new(Arc::new(graph), SessionOptions { threads, schedule_seed: None, ..Default::default() })
    }

    fn run(s: &Session, feeds: &[(&str, Tensor)], fetches: &[&str]) -> Result<Vec<Tensor>, RunError> {
        let req = RunRequest {
            feeds: feeds.iter().map(|(n, t)| (s.output(n).unwrap(), t.clone())).collect(),
            fetches: fetches.iter().map(|n| s.output(n).unwrap()).collect(),
            targets: Vec::new(),
        };
        s.run(&req).map(|o| o.fetches)
    }

    fn f32s(t: &Tensor) -> Vec<f32> {
        t.as_f32().unwrap().to_vec()
    }

    fn var(s: &Session, name: &str) -> f32 {
        let vars = s.variables();
        f32s(&vars.iter().find(|(n, _)| n == name).unwrap().1)[0]
    }

    const BUMP: &str = "function bump(h: resource, a: float32) -> (out: float32) stateful {
  add = AssignAddVariableOp(h, a) {dtype = float32}
  r = ReadVariableOp(h, ^add) {dtype = float32}
  return out = r:value:0
}
";

    #[test]
    fn stateful_call_acts_on_the_session_variables() {
        let src = format!(
            "{VAR}x = Placeholder() {{dtype = float32, shape = shape[]}}
call = StatefulPartitionedCall(v, x) {{Tin = [resource, float32], Tout = [float32], f = @bump}}
{BUMP}"
        );
        let s = session(&src, 1);
        s.set_variable("v", Tensor::scalar_f32(1.0)).unwrap();
        for (step, want) in [(1, 3.5f32), (2, 6.0)] {
            let out = run(&s, &[("x", Tensor::scalar_f32(2.5))], &["call:0"]).unwrap();
            assert_eq!(f32s(&out[0]), vec![want], "step {step}");
        }
        assert_eq!(var(&s, "v"), 6.0);
    }

    #[test]
    fn defun_node_returns_values_in_signature_order() {
        // The body computes `sum` before `diff` but the signature returns them the other way round.
        let src = "a = Const() {dtype = float32, value = float32[]{5.0}}
b = Const() {dtype = float32, value = float32[]{2.0}}
pair = SumDiff(a, b)
function SumDiff(x: float32, y: float32) -> (diff: float32, sum: float32) {
  s = AddV2(x, y) {T = float32}
  d = Sub(x, y) {T = float32}
  return sum = s:z:0
  return diff = d:z:0
}
";
        let s = session(src, 1);
        assert!(!is_cluster_call(s.graph().node(s.node("pair").unwrap()), &s.graph().library));
        let out = run(&s, &[], &["pair:0", "pair:1"]).unwrap();
        assert_eq!((f32s(&out[0]), f32s(&out[1])), (vec![3.0], vec![7.0]));
    }

    #[test]
    fn nested_calls_share_the_variables() {
        let src = format!(
            "{VAR}x = Placeholder() {{dtype = float32, shape = shape[]}}
outer = StatefulPartitionedCall(v, x) {{Tin = [resource, float32], Tout = [float32, float32], f = @outer_fn}}
function outer_fn(h: resource, a: float32) -> (after: float32, inner: float32) stateful {{
  sq = PartitionedCall(a) {{Tin = [float32], Tout = [float32], f = @square}}
  b = StatefulPartitionedCall(h, sq:output:0) {{Tin = [resource, float32], Tout = [float32], f = @bump}}
  r = ReadVariableOp(h, ^b) {{dtype = float32}}
  return after = r:value:0
  return inner = b:output:0
}}
function square(a: float32) -> (y: float32) {{
  m = Mul(a, a) {{T = float32}}
  return y = m:z:0
}}
{BUMP}"
        );
        let s = session(&src, 1);
        s.set_variable("v", Tensor::scalar_f32(1.0)).unwrap();
        let out = run(&s, &[("x", Tensor::scalar_f32(3.0))], &["outer:0", "outer:1"]).unwrap();
        assert_eq!((f32s(&out[0]), f32s(&out[1])), (vec![10.0], vec![10.0]));
        assert_eq!(var(&s, "v"), 10.0);
    }

    #[test]
    fn bodies_are_instantiated_once_per_plan() {
        let src = format!(
            "{VAR}one = Const() {{dtype = float32, value = float32[]{{1.0}}}}
c1 = StatefulPartitionedCall(v, one) {{Tin = [resource, float32], Tout = [float32], f = @bump}}
c2 = StatefulPartitionedCall(v, one, ^c1) {{Tin = [resource, float32], Tout = [float32], f = @bump}}
{BUMP}"
        );
        let s = session(&src, 1);
        let store = VariableStore::new();
        let mut inst = Instantiations::default();
        let fetch = [s.output("c2").unwrap()];
        Plan::build_with(s.graph(), &store, None, &[], &fetch, &[], &mut inst).unwrap();
        assert_eq!(inst.bodies.len(), 1);
        s.set_variable("v", Tensor::scalar_f32(0.0)).unwrap();
        assert_eq!(f32s(&run(&s, &[], &["c2"]).unwrap()[0]), vec![2.0]);
    }

    /// A random op in a function body and one in the main graph with the same name and seeds
    /// have generators of their own (TensorFlow: one kernel each), so both draw the same first
    /// numbers; two calls of the function share the body op's generator.
    #[test]
    fn random_ops_in_bodies_have_their_own_generators() {
        let src = "shape = Const() {dtype = int32, value = int32[1]{4}}
r = RandomUniform(shape) {dtype = float32, T = int32, seed = 7, seed2 = 3}
c1 = StatefulPartitionedCall(shape) {Tin = [int32], Tout = [float32], f = @draw}
c2 = StatefulPartitionedCall(shape, ^c1) {Tin = [int32], Tout = [float32], f = @draw}
function draw(s: int32) -> (y: float32) stateful {
  r = RandomUniform(s) {dtype = float32, T = int32, seed = 7, seed2 = 3}
  return y = r:output:0
}
";
        let s = session(src, 1);
        let out = run(&s, &[], &["r", "c1", "c2"]).unwrap();
        assert_eq!(f32s(&out[0]), f32s(&out[1]), "the body's op starts its own sequence");
        assert_ne!(f32s(&out[1]), f32s(&out[2]), "the second call continues the body op's sequence");
    }

    #[test]
    fn recursion_is_an_error_when_the_plan_is_built() {
        let src = "a = Const() {dtype = float32, value = float32[]{1.0}}
call = PartitionedCall(a) {Tin = [float32], Tout = [float32], f = @f}
function f(x: float32) -> (y: float32) {
  c = PartitionedCall(x) {Tin = [float32], Tout = [float32], f = @g}
  return y = c:output:0
}
function g(x: float32) -> (y: float32) {
  c = f(x)
  return y = c:y:0
}
";
        let s = session(src, 1);
        let e = run(&s, &[], &["call"]).unwrap_err().to_string();
        assert!(e.starts_with("node 'call' (PartitionedCall): in function 'f': node 'c' (PartitionedCall)"), "{e}");
        assert!(e.ends_with("function 'f' calls itself recursively (f -> g -> f), which is not supported"), "{e}");
    }

    #[test]
    fn errors_name_the_call_and_the_inner_node() {
        let src = format!(
            "{VAR}x = Placeholder() {{dtype = float32, shape = shape[]}}
outer = StatefulPartitionedCall(v, x) {{Tin = [resource, float32], Tout = [float32], f = @wrap}}
function wrap(h: resource, a: float32) -> (y: float32) stateful {{
  r = ReadVariableOp(h) {{dtype = float32}}
  s = AddV2(r:value:0, a) {{T = float32}}
  return y = s:z:0
}}
"
        );
        let s = session(&src, 1);
        let e = run(&s, &[("x", Tensor::scalar_f32(1.0))], &["outer"]).unwrap_err().to_string();
        assert_eq!(
            e,
            "node 'outer' (StatefulPartitionedCall): in function 'wrap': node 'r' (ReadVariableOp): \
             variable 'v' is uninitialised"
        );
        // The session stays usable.
        s.set_variable("v", Tensor::scalar_f32(2.0)).unwrap();
        assert_eq!(f32s(&run(&s, &[("x", Tensor::scalar_f32(1.0))], &["outer"]).unwrap()[0]), vec![3.0]);
        // A wrong argument dtype names the function.
        let e = run(&s, &[("x", Tensor::scalar_i32(1))], &["outer"]);
        assert!(e.is_err());
    }

    #[test]
    fn effects_run_and_unused_pure_nodes_do_not() {
        // `bump` is neither returned nor a control output, yet it runs (it is stateful); the
        // malformed Reshape feeds nothing and is pruned, as TensorFlow's PruneFunctionBody does.
        let src = format!(
            "{VAR}one = Const() {{dtype = float32, value = float32[]{{1.0}}}}
call = StatefulPartitionedCall(v, one) {{Tin = [resource, float32], Tout = [float32], f = @side}}
function side(h: resource, a: float32) -> (y: float32) stateful {{
  bump = AssignAddVariableOp(h, a) {{dtype = float32}}
  k = Const() {{dtype = int32, value = int32[1]{{7}}}}
  bad = Reshape(a, k:output:0) {{T = float32, Tshape = int32}}
  n = Neg(a) {{T = float32}}
  return y = n:y:0
}}
"
        );
        let s = session(&src, 1);
        s.set_variable("v", Tensor::scalar_f32(0.0)).unwrap();
        assert_eq!(f32s(&run(&s, &[], &["call"]).unwrap()[0]), vec![-1.0]);
        assert_eq!(var(&s, "v"), 1.0);
    }

    const BRANCHES: &str = "function then_fn(h: resource, a: float32) -> (y: float32) stateful {
  add = AssignAddVariableOp(h, a) {dtype = float32}
  r = ReadVariableOp(h, ^add) {dtype = float32}
  return y = r:value:0
}
function else_fn(h: resource, a: float32) -> (y: float32) {
  n = Neg(a) {T = float32}
  return y = n:y:0
}
";

    #[test]
    fn if_and_case_pick_a_branch() {
        let src = format!(
            "{VAR}p = Placeholder() {{dtype = bool, shape = shape[]}}
i = Placeholder() {{dtype = int32, shape = shape[]}}
x = Const() {{dtype = float32, value = float32[]{{4.0}}}}
cond = If(p, v, x) {{Tcond = bool, Tin = [resource, float32], Tout = [float32], then_branch = @then_fn, else_branch = @else_fn}}
case = Case(i, v, x) {{Tin = [resource, float32], Tout = [float32], branches = [@else_fn, @then_fn]}}
{BRANCHES}"
        );
        let s = session(&src, 1);
        s.set_variable("v", Tensor::scalar_f32(1.0)).unwrap();
        let t = Tensor::scalar_bool(true);
        assert_eq!(f32s(&run(&s, &[("p", t)], &["cond"]).unwrap()[0]), vec![5.0]);
        let f = Tensor::scalar_bool(false);
        assert_eq!(f32s(&run(&s, &[("p", f)], &["cond"]).unwrap()[0]), vec![-4.0]);
        assert_eq!(var(&s, "v"), 5.0);
        assert_eq!(f32s(&run(&s, &[("i", Tensor::scalar_i32(0))], &["case"]).unwrap()[0]), vec![-4.0]);
        assert_eq!(f32s(&run(&s, &[("i", Tensor::scalar_i32(1))], &["case"]).unwrap()[0]), vec![9.0]);
        // Out of range: the last branch, as in TensorFlow.
        assert_eq!(f32s(&run(&s, &[("i", Tensor::scalar_i32(7))], &["case"]).unwrap()[0]), vec![13.0]);
        assert_eq!(var(&s, "v"), 13.0);
    }

    #[test]
    fn to_bool_follows_tensorflow() {
        assert!(to_bool(&Tensor::scalar_i32(3), "c").unwrap());
        assert!(!to_bool(&Tensor::scalar_f32(0.0), "c").unwrap());
        assert!(to_bool(&Tensor::from_f32(vec![1], vec![0.0]).unwrap(), "c").unwrap());
        assert!(!to_bool(&Tensor::from_f32(vec![0], vec![]).unwrap(), "c").unwrap());
    }

    #[test]
    fn while_loops_carry_values_and_update_variables() {
        // for i in 0..n: v += i; s = s * 2
        let src = format!(
            "{VAR}n = Placeholder() {{dtype = int32, shape = shape[]}}
zero = Const() {{dtype = int32, value = int32[]{{0}}}}
s0 = Const() {{dtype = float32, value = float32[]{{1.0}}}}
loop = While(zero, s0, v, n) {{T = [int32, float32, resource, int32], cond = @cond, body = @body, parallel_iterations = 10}}
function cond(i: int32, s: float32, h: resource, n: int32) -> (c: bool) {{
  l = Less(i, n) {{T = int32}}
  return c = l:z:0
}}
function body(i: int32, s: float32, h: resource, n: int32) -> (i2: int32, s2: float32, h2: resource, n2: int32) stateful {{
  f = Cast(i) {{SrcT = int32, DstT = float32}}
  add = AssignAddVariableOp(h, f:y:0) {{dtype = float32}}
  one = Const() {{dtype = int32, value = int32[]{{1}}}}
  next = AddV2(i, one:output:0) {{T = int32}}
  two = Const() {{dtype = float32, value = float32[]{{2.0}}}}
  dbl = Mul(s, two:output:0) {{T = float32}}
  return i2 = next:z:0
  return s2 = dbl:z:0
  return h2 = h
  return n2 = n
}}
"
        );
        let s = session(&src, 1);
        s.set_variable("v", Tensor::scalar_f32(0.0)).unwrap();
        let out = run(&s, &[("n", Tensor::scalar_i32(5))], &["loop:0", "loop:1"]).unwrap();
        assert_eq!(out[0].as_i32().unwrap(), &[5]);
        assert_eq!(f32s(&out[1]), vec![32.0]);
        assert_eq!(var(&s, "v"), 10.0);
        // Zero trips: the inputs come back unchanged.
        let out = run(&s, &[("n", Tensor::scalar_i32(0))], &["loop:1"]).unwrap();
        assert_eq!(f32s(&out[0]), vec![1.0]);
    }

    #[test]
    fn concurrent_calls_lose_no_increment() {
        // Each AssignAdd inside the body is atomic, so 4 threads x 200 steps add exactly 800.
        let src = format!(
            "{VAR}one = Const() {{dtype = float32, value = float32[]{{1.0}}}}
call = StatefulPartitionedCall(v, one) {{Tin = [resource, float32], Tout = [float32], f = @bump}}
{BUMP}"
        );
        let s = Arc::new(session(&src, 2));
        s.set_variable("v", Tensor::scalar_f32(0.0)).unwrap();
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        run(&s, &[], &["call"]).unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(var(&s, "v"), 800.0);
    }

    #[test]
    fn variables_created_inside_bodies_belong_to_the_session() {
        let src = "call = StatefulPartitionedCall() {Tin = [], Tout = [float32], f = @count}
function count() -> (y: float32) stateful {
  h = VarHandleOp() {container = \"\", dtype = float32, shape = shape[], shared_name = \"counter\"}
  one = Const() {dtype = float32, value = float32[]{1.0}}
  add = AssignAddVariableOp(h:resource:0, one:output:0) {dtype = float32}
  r = ReadVariableOp(h:resource:0, ^add) {dtype = float32}
  return y = r:value:0
}
";
        let s = session(src, 1);
        s.set_variable("counter", Tensor::scalar_f32(10.0)).unwrap();
        run(&s, &[], &["call"]).unwrap();
        assert_eq!(f32s(&run(&s, &[], &["call"]).unwrap()[0]), vec![12.0]);
        assert_eq!(var(&s, "counter"), 12.0);
    }

    #[test]
    fn cluster_calls_are_told_apart() {
        let src = "a = Const() {dtype = float32, value = float32[]{1.0}}
c = cluster_0_fn(a)
d = tf_fn(a)
e = stateful_fn(a)
function cluster_0_fn(x: float32) -> (y: float32) {
  n = Neg(x) {T = float32}
  m = Mul(n:0, x) {T = float32}
  return y = m:0
}
function tf_fn(x: float32) -> (y: float32) {
  n = Neg(x) {T = float32}
  return y = n:y:0
}
function stateful_fn(x: float32) -> (y: float32) {
  r = RandomUniform(x) {T = int32, dtype = float32}
  return y = r:0
}
";
        let g = text::parse(src).unwrap();
        let call = |n: &str| is_cluster_call(g.node(g.find(n).unwrap()), &g.library);
        assert!(call("c"));
        assert!(!call("d"), "TensorFlow's spelling");
        assert!(!call("e"), "a stateful body");
        assert!(!call("a"));
        // Both paths compute the same value.
        let s = session(src, 1);
        let out = run(&s, &[], &["c", "d"]).unwrap();
        assert_eq!((f32s(&out[0]), f32s(&out[1])), (vec![-1.0], vec![-1.0]));
    }
}
