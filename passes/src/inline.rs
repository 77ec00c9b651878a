//! Function inlining (`opt --passes inline`): each top-level call of a
//! library function — `PartitionedCall`, `StatefulPartitionedCall`, or a
//! node whose op *is* a library function's name — is replaced by the
//! function's body, as TensorFlow's function optimizer does before
//! clustering, so clusters no longer stop at every call of a TF2/Keras graph.
//! Calls inside inlined bodies are inlined in turn (up to
//! [`MAX_ROUNDS`] levels; the library itself is left as it was).
//!
//! The rewrite of a call node `c` with data inputs `d_i` and control inputs:
//! - each body node `n` becomes `c/n` (a fresh name if taken); a use of the
//!   function's argument `i` becomes a use of `d_i` (a control use of the
//!   argument, a control edge from `d_i`'s producer);
//! - **the call's control inputs gate the body**: every body node with no
//!   input from another body node gets them (through one `NoOp`
//!   `c/input_control_node` when there are several), so nothing of the body
//!   starts before the call could have; in a graph with v1 control flow
//!   (a `Switch`), where an input may be dead and a call with a dead input
//!   runs nothing, those nodes also wait for `c/inputs_alive`, an `IdentityN`
//!   of every data input, so the whole body is dead with any input (a
//!   program `autoclust compile` wrote calls its clusters under `cond`s);
//! - the call node itself stays, under its name, as an `IdentityN` of the
//!   return values (a `NoOp` when there are none) with a control edge from
//!   every *effectful* body node (stateful per the registry, a resource op,
//!   a call, an unknown op) and every control output: `c:k` and `^c` still
//!   name the call's results and its completion, so fetches, targets and
//!   control successors keep their meaning and their order after the body's
//!   side effects;
//! - a data consumer of `c:k` reads the return value directly when the body
//!   has no effectful node, and `c:k` (which waits for the body's effects)
//!   otherwise.
//!
//! Soundness: every happens-before the call imposed survives. Whatever
//! preceded the call (data or control) precedes every body node; whatever
//! followed the call (a data or control consumer) follows every effectful
//! body node, except that a data consumer of a *pure* body only waits for the
//! value it reads, which no state can tell apart. Effectful nodes are never
//! merged, removed or duplicated: each is copied once, with its control edges
//! renamed. So the inlined program's outcomes are a subset of the original's.
//!
//! Not inlined (the call stays as it is): a call or function marked
//! `_noinline = true` — unless the call says `_XlaMustCompile = true`: that is
//! how `tf.function(jit_compile=True)` (Keras 3 wraps every grouped
//! convolution in one) keeps its body whole *for XLA*, and inlining lets the
//! body be compiled inside the surrounding clusters instead of splitting them
//! at every call; the body's op-by-op semantics is the function's own, so
//! clustering it is sound by the same rule as any other node —, a body that cannot be instantiated (list arguments,
//! …), a body that creates a variable (`VarHandleOp`, whose node name would
//! change), and functional control flow (`If`, `While`, `Case`), whose
//! branches run conditionally.

use std::collections::{HashMap, HashSet};

use autoclust_graph::function::{fresh_name, instantiate_with};
use autoclust_graph::{
    effects, parse_input, registry, AttrValue, Attrs, Graph, GraphError, InputRef, ListValue, RawNode,
};

/// How many levels of nested calls are inlined.
pub const MAX_ROUNDS: usize = 16;

/// The call ops TensorFlow writes for a function call.
const CALL_OPS: &[&str] = &["PartitionedCall", "StatefulPartitionedCall"];

/// What one run of [`inline_calls`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InlineReport {
    /// Calls replaced by their bodies (nested ones included).
    pub inlined: usize,
}

/// Inlines every inlinable call of `graph` (module doc).
pub fn inline_calls(graph: &Graph) -> Result<(Graph, InlineReport), GraphError> {
    inline_calls_owned(graph.clone())
}

/// [`inline_calls`] taking the graph: a graph without calls comes back as it was, untouched.
pub fn inline_calls_owned(graph: Graph) -> Result<(Graph, InlineReport), GraphError> {
    inline_calls_where(graph, &|_| true)
}

/// [`inline_calls_owned`] limited to the calls `select` picks (at every level: a call inside
/// an inlined body is inlined only if `select` picks it too).
pub fn inline_calls_where(
    graph: Graph,
    select: &dyn Fn(&autoclust_graph::Node) -> bool,
) -> Result<(Graph, InlineReport), GraphError> {
    let _span = tracing::debug_span!("inline", nodes = graph.len()).entered();
    let mut report = InlineReport::default();
    let mut current = graph;
    for _ in 0..MAX_ROUNDS {
        if !current.nodes().iter().any(|n| is_call(&current, n) && select(n)) {
            break;
        }
        let (next, n) = inline_round(&current, select)?;
        if n == 0 {
            break;
        }
        report.inlined += n;
        current = next;
    }
    tracing::debug!(inlined = report.inlined, nodes = current.len(), "inline done");
    Ok((current, report))
}

/// Whether `node` calls a library function [`inline_calls`] would consider.
pub fn is_call(graph: &Graph, node: &autoclust_graph::Node) -> bool {
    callee(graph, node).is_some()
}

/// The function a node calls and the attributes binding its signature.
fn callee<'g>(graph: &'g Graph, node: &'g autoclust_graph::Node) -> Option<(&'g str, &'g Attrs)> {
    if CALL_OPS.contains(&node.op.as_str()) {
        let f = node.attr("f")?.as_func()?;
        return Some((&f.name, &f.attrs));
    }
    graph.library.function(&node.op).map(|f| (f.signature.name.as_str(), &node.attrs))
}

fn is_true(a: Option<&AttrValue>) -> bool {
    matches!(a, Some(AttrValue::B(true)))
}

/// Whether a body node may have an effect another node can observe or order against.
fn is_effectful(node: &autoclust_graph::Node, graph: &Graph) -> bool {
    if effects::table_kind(&node.op).is_some()
        || graph.library.function(&node.op).is_some()
        || node.attrs.values().any(|a| a.is_func())
    {
        return true;
    }
    match registry::lookup(&node.op) {
        Some(schema) => schema.is_stateful,
        None => !matches!(node.op.as_str(), "NoOp"),
    }
}

/// One level: every inlinable call of the current graph.
fn inline_round(graph: &Graph, select: &dyn Fn(&autoclust_graph::Node) -> bool) -> Result<(Graph, usize), GraphError> {
    let mut raw = graph.to_raw();
    let mut taken: HashSet<String> = raw.iter().map(|n| n.name.clone()).collect();
    // Replacement of `call:port` for data consumers.
    let mut redirect: HashMap<(String, u32), String> = HashMap::new();
    let mut out: Vec<RawNode> = Vec::with_capacity(raw.len());
    let mut inlined = 0;
    for (id, call_raw) in graph.node_ids().zip(raw.drain(..)) {
        let node = graph.node(id);
        let expansion = if select(node) { expand(graph, node, &call_raw, &mut taken) } else { None };
        let Some(expansion) = expansion else {
            out.push(call_raw);
            continue;
        };
        inlined += 1;
        for (port, value) in expansion.redirect.into_iter().enumerate() {
            redirect.insert((node.name.clone(), port as u32), value);
        }
        out.extend(expansion.nodes);
    }
    if inlined == 0 {
        return Ok((graph.clone(), 0));
    }
    for n in &mut out {
        for input in &mut n.inputs {
            if let Some(InputRef::Data { node, port }) = parse_input(input) {
                if let Some(r) = redirect.get(&(node.to_string(), port)) {
                    *input = r.clone();
                }
            }
        }
    }
    let g = Graph::from_raw(out, graph.library.clone(), graph.versions.clone())?;
    Ok((g, inlined))
}

struct Expansion {
    /// The body's nodes and the node standing for the call.
    nodes: Vec<RawNode>,
    /// Per output port: the input string its data consumers use.
    redirect: Vec<String>,
}

/// The nodes replacing `node`, or `None` when it is not an inlinable call.
fn expand(
    graph: &Graph,
    node: &autoclust_graph::Node,
    call_raw: &RawNode,
    taken: &mut HashSet<String>,
) -> Option<Expansion> {
    let (fname, bind) = callee(graph, node)?;
    let function = graph.library.function(fname)?;
    // `tf.function(jit_compile=True)` marks its function `_noinline` only so that XLA gets
    // it whole; its calls say `_XlaMustCompile`. Inlined, its body joins the surrounding
    // clusters (compiled, as asked) instead of cutting them at every call.
    let must_compile = is_true(node.attr("_XlaMustCompile"));
    if !must_compile && (is_true(node.attr("_noinline")) || is_true(function.attrs.get("_noinline"))) {
        return None;
    }
    let call = &node.name;
    let data_inputs: Vec<String> = call_raw.inputs.iter().filter(|s| !s.starts_with('^')).cloned().collect();
    let control_inputs: Vec<String> = call_raw.inputs.iter().filter(|s| s.starts_with('^')).cloned().collect();
    let mut nodes = Vec::new();
    let gate: Vec<String> = if control_inputs.len() > 1 {
        let name = fresh_name(&format!("{call}/input_control_node"), taken);
        nodes.push(RawNode {
            name: name.clone(),
            op: "NoOp".into(),
            inputs: control_inputs.clone(),
            attrs: Attrs::new(),
            device: node.device.clone(),
            span: node.span,
        });
        vec![format!("^{name}")]
    } else {
        control_inputs.clone()
    };
    // In a graph with v1 control flow a value may be dead, and a call with a dead input does
    // not run at all: its outputs are dead. The inlined body keeps that (module doc).
    let dead_inputs_possible =
        !data_inputs.is_empty() && graph.nodes().iter().any(|n| n.op == "Switch" || n.op == "RefSwitch");
    let body = match inline_body(graph, fname, bind, call, &data_inputs, &gate, dead_inputs_possible, taken) {
        Ok(b) => b,
        Err(why) => {
            tracing::debug!(call = %node.name, error = %why, "not inlined");
            return None;
        }
    };
    nodes.extend(body.nodes);
    let effectful = body.effectful;
    let returns = body.returns;
    // The call's own name: its results and its completion.
    let mut stand_in_inputs: Vec<String> = returns.iter().map(|r| r.0.clone()).collect();
    stand_in_inputs.extend(effectful.iter().cloned());
    if returns.is_empty() {
        // Even a body without effects completes after the call's control inputs.
        stand_in_inputs.extend(gate.iter().cloned());
    }
    let mut attrs = Attrs::new();
    let op = if returns.is_empty() {
        "NoOp"
    } else {
        let types: Option<Vec<_>> = returns.iter().map(|r| r.1.as_type()).collect();
        attrs.insert("T".into(), AttrValue::List(ListValue::Type(types?)));
        "IdentityN"
    };
    nodes.push(RawNode {
        name: call.clone(),
        op: op.into(),
        inputs: stand_in_inputs,
        attrs,
        device: node.device.clone(),
        span: node.span,
    });
    let redirect = returns
        .iter()
        .enumerate()
        .map(|(k, (value, _))| {
            if effectful.is_empty() {
                value.clone()
            } else if k == 0 {
                call.clone()
            } else {
                format!("{call}:{k}")
            }
        })
        .collect();
    Some(Expansion { nodes, redirect })
}

/// A function body instantiated into a graph's namespace ([`inline_body`]): what inlining a
/// call and lowering functional control flow (`crate::lower_control_flow`) both splice in.
#[derive(Clone, Debug)]
pub struct InlinedBody {
    /// The body's nodes (every one but `_Arg` and `_Retval`), named `prefix/name`.
    pub nodes: Vec<RawNode>,
    /// Per return value, in index order: the input naming it and its dtype (`T`).
    pub returns: Vec<(String, AttrValue)>,
    /// `^name` of every effectful body node and every control output (module doc).
    pub effectful: Vec<String>,
}

/// Function `fname`'s body (instantiated with `bind`) as nodes of `graph`'s namespace:
/// each body node `n` becomes `prefix/n` (fresh in `taken`), a use of argument `i` a use of
/// `args[i]` (a control use, a control edge from `args[i]`'s node), and every body node with
/// no input from another body node gets the control inputs `gate` — and, with `gate_on_args`,
/// waits for `prefix/inputs_alive`, an `IdentityN` of every argument, so that the body of a
/// call with a dead input is dead, as the call would be (a node is dead when any input is).
/// The module doc's rewrite, without the call's stand-in.
#[allow(clippy::too_many_arguments)]
pub fn inline_body(
    graph: &Graph,
    fname: &str,
    bind: &Attrs,
    prefix: &str,
    args: &[String],
    gate: &[String],
    gate_on_args: bool,
    taken: &mut HashSet<String>,
) -> Result<InlinedBody, String> {
    let function = graph.library.function(fname).ok_or_else(|| format!("no function '{fname}' in the library"))?;
    if function.nodes.iter().any(|n| n.op == "VarHandleOp") {
        return Err(format!("function '{fname}' creates a variable (VarHandleOp)"));
    }
    let body = instantiate_with(function, &graph.library, bind).map_err(|e| e.to_string())?;
    let index_of = |n: &autoclust_graph::Node| -> Result<usize, String> {
        n.attr("index")
            .and_then(AttrValue::as_int)
            .map(|i| i as usize)
            .ok_or_else(|| format!("function '{fname}': node '{}' has no index", n.name))
    };

    // Names: `_Arg` i → `args[i]`; other nodes → `prefix/name`.
    let mut arg_input: HashMap<usize, String> = HashMap::new();
    let mut new_name: HashMap<usize, String> = HashMap::new();
    for b in body.node_ids() {
        let n = body.node(b);
        match n.op.as_str() {
            "_Arg" => {
                let i = index_of(n)?;
                let arg = args
                    .get(i)
                    .ok_or_else(|| format!("function '{fname}' takes argument {i}, but {} are given", args.len()))?;
                arg_input.insert(b.index(), arg.clone());
            }
            "_Retval" => {}
            _ => {
                new_name.insert(b.index(), fresh_name(&format!("{prefix}/{}", n.name), taken));
            }
        }
    }
    let data_ref = |o: autoclust_graph::Output| -> String {
        if let Some(arg) = arg_input.get(&o.node.index()) {
            return arg.clone();
        }
        let name = &new_name[&o.node.index()];
        if o.port == 0 {
            name.clone()
        } else {
            format!("{name}:{}", o.port)
        }
    };
    let control_ref = |c: autoclust_graph::NodeId| -> String {
        match arg_input.get(&c.index()) {
            Some(arg) => match parse_input(arg) {
                Some(InputRef::Data { node, .. }) | Some(InputRef::Control { node }) => format!("^{node}"),
                None => format!("^{arg}"),
            },
            None => format!("^{}", new_name[&c.index()]),
        }
    };
    let mut nodes = Vec::new();
    let mut gate = gate.to_vec();
    if gate_on_args {
        let mut arg_types: Vec<(usize, AttrValue)> = Vec::new();
        for b in body.node_ids() {
            let n = body.node(b);
            if n.op == "_Arg" {
                let t = n.attr("T").ok_or_else(|| format!("function '{fname}': argument without a type"))?;
                arg_types.push((index_of(n)?, t.clone()));
            }
        }
        arg_types.sort_by_key(|a| a.0);
        if arg_types.len() == args.len() && !args.is_empty() {
            let name = fresh_name(&format!("{prefix}/inputs_alive"), taken);
            let types: Option<Vec<_>> = arg_types.iter().map(|(_, t)| t.as_type()).collect();
            let types = types.ok_or_else(|| format!("function '{fname}': an argument's type is not one dtype"))?;
            let mut attrs = Attrs::new();
            attrs.insert("T".into(), AttrValue::List(ListValue::Type(types)));
            nodes.push(RawNode {
                name: name.clone(),
                op: "IdentityN".into(),
                inputs: args.to_vec(),
                attrs,
                device: String::new(),
                span: None,
            });
            gate.push(format!("^{name}"));
        }
    }
    let mut effectful: Vec<String> = Vec::new();
    let control_ret: HashSet<&str> = function.control_ret.iter().map(|(_, n)| n.as_str()).collect();
    let mut returns: Vec<(usize, String, AttrValue)> = Vec::new();
    for b in body.node_ids() {
        let n = body.node(b);
        if n.op == "_Arg" {
            continue;
        }
        if n.op == "_Retval" {
            let k = index_of(n)?;
            let t = n.attr("T").ok_or_else(|| format!("function '{fname}': return {k} has no type"))?;
            // A malformed body (a fuzzed one) may return nothing: refuse it, never index past.
            let value = n.inputs.first().ok_or_else(|| format!("function '{fname}': return {k} has no value"))?;
            returns.push((k, data_ref(*value), t.clone()));
            continue;
        }
        let mut inputs: Vec<String> = n.inputs.iter().map(|&o| data_ref(o)).collect();
        inputs.extend(n.control_inputs.iter().map(|&c| control_ref(c)));
        let from_body = n
            .inputs
            .iter()
            .map(|o| o.node)
            .chain(n.control_inputs.iter().copied())
            .any(|p| new_name.contains_key(&p.index()));
        if !from_body {
            inputs.extend(gate.iter().cloned());
        }
        let name = new_name[&b.index()].clone();
        if is_effectful(n, graph) || control_ret.contains(n.name.as_str()) {
            effectful.push(format!("^{name}"));
        }
        nodes.push(RawNode {
            name,
            op: n.op.clone(),
            inputs,
            attrs: n.attrs.clone(),
            device: n.device.clone(),
            span: n.span,
        });
    }
    returns.sort_by_key(|r| r.0);
    Ok(InlinedBody { nodes, returns: returns.into_iter().map(|(_, v, t)| (v, t)).collect(), effectful })
}
