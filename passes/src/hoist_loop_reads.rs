//! `hoist-loop-reads`: a variable a functional `While` only reads is read once, before the
//! loop, and its value carried through the loop instead of its handle.
//!
//! What it transforms: a `While`/`StatelessWhile` whose condition and body (and everything
//! they call) write no resource, and a loop-carried resource handle `k` that the body returns
//! unchanged and uses only as the operand of `ReadVariableOp`s (in the body or the condition)
//! or as the handle of `ResourceGather`s (an embedding lookup in a decode loop). Then:
//! - a `ReadVariableOp` of the loop's handle operand `k` is added before the loop — gated by
//!   the loop's control inputs and by the producers of all its operands, so it runs where
//!   the loop could first run — and becomes operand `k` instead of the handle;
//! - the loop gets copies of its functions in which argument and result `k` have the
//!   variable's dtype and each `ReadVariableOp` of argument `k` is an `Identity` of it, each
//!   `ResourceGather` a `GatherV2` of it (a gather of the variable's value, read atomically:
//!   the same value the hoisted read gives, below);
//! - the loop's consumers of output `k` (the unchanged handle) read the handle operand itself.
//!
//! Keras' LSTM/GRU loops read their kernels this way every iteration; afterwards the loop
//! carries only values, so it can be compiled inside a cluster (its reads are the cluster's
//! snapshot), as XLA compiles the same loop.
//!
//! Why it is sound (seed 002's semantics: a run is some total order of the ops consistent
//! with the edges, each variable access atomic):
//! - The loop is one node of its graph: every other node is ordered before it, after it, or
//!   not at all. The hoisted read waits for everything the loop waits for (its control
//!   inputs and its operands' producers) and the loop waits for the read, so anything ordered
//!   before the loop is ordered before the read, and some valid order runs the read and then
//!   the whole loop without interruption; in it no write can fall between the hoisted read
//!   and the loop's own reads, and the loop writes no resource itself. Each of its reads therefore sees the value the hoisted read saw: every
//!   result of the rewritten graph is a result of some order of the original one.
//! - A loop that runs zero times did not read the variable at all; the hoisted read does.
//!   The values are the same; the one difference is a variable that is not initialised,
//!   which the rewritten graph reports (XLA's clusters read every variable at their start
//!   the same way).
//! - The handle flows on unchanged: consumers of the loop's output `k` get the operand that
//!   the body returned as it was.

use std::collections::HashSet;

use autoclust_graph::function::fresh_name;
use autoclust_graph::{AttrValue, DType, FuncAttr, FunctionDef, Graph, ListValue, NodeId, Output, RawNode, Shape};

use crate::pass::{Pass, PassContext, PassError};

/// The pass (module doc).
pub struct HoistLoopReadsPass;

impl Pass for HoistLoopReadsPass {
    fn name(&self) -> &'static str {
        "hoist-loop-reads"
    }
    fn description(&self) -> &'static str {
        "read a variable that a While only reads once before the loop and carry its value instead of its handle \
         (the loop's functions write no resource; the handle is returned unchanged)"
    }
    fn run(&self, mut graph: Graph, _ctx: &PassContext) -> Result<Graph, PassError> {
        let _span = tracing::debug_span!("hoist_loop_reads", nodes = graph.len()).entered();
        let loops: Vec<NodeId> =
            graph.node_ids().filter(|&id| matches!(graph.node(id).op.as_str(), "While" | "StatelessWhile")).collect();
        let mut hoisted = 0;
        for id in loops {
            hoisted += hoist(&mut graph, id)?;
        }
        tracing::debug!(hoisted, "hoisted loop reads");
        Ok(graph)
    }
}

fn plain_function<'g>(graph: &'g Graph, id: NodeId, attr: &str) -> Option<&'g FunctionDef> {
    match graph.node(id).attr(attr)? {
        AttrValue::Func(f) if f.attrs.is_empty() => graph.library.function(&f.name),
        _ => None,
    }
}

/// How a function body uses argument `arg`: the `ReadVariableOp`s and `ResourceGather`s
/// of it (as the handle operand), the `Identity`s forwarding it (only to the function's
/// results: their outputs, spelled `node` or `node:output:0`, feed no node), and whether
/// anything else uses it.
struct Uses {
    reads: Vec<usize>,
    gathers: Vec<usize>,
    forwards: Vec<usize>,
    other: bool,
}

fn uses_of(f: &FunctionDef, arg: &str) -> Uses {
    let mut names: Vec<String> = vec![arg.to_string()];
    let mut reads = Vec::new();
    let mut gathers = Vec::new();
    let mut forwards = Vec::new();
    let mut other = false;
    let mut k = 0;
    while k < names.len() {
        let name = names[k].clone();
        k += 1;
        for (i, n) in f.nodes.iter().enumerate() {
            let Some(pos) = n.inputs.iter().position(|s| s == &name) else { continue };
            let data_uses = n.inputs.iter().filter(|s| *s == &name).count();
            match n.op.as_str() {
                "ReadVariableOp" if pos == 0 && data_uses == 1 && k == 1 => reads.push(i),
                "ResourceGather" if pos == 0 && data_uses == 1 && k == 1 => gathers.push(i),
                "Identity" if pos == 0 && data_uses == 1 && k == 1 => {
                    forwards.push(i);
                    names.push(n.name.clone());
                    names.push(format!("{}:output:0", n.name));
                }
                _ => other = true,
            }
        }
    }
    Uses { reads, gathers, forwards, other }
}

/// Whether result `k` of `body` is argument `k` (directly or through forwarding `Identity`s).
fn returns_arg(body: &FunctionDef, k: usize, forwards: &[usize]) -> bool {
    let (Some(arg), Some(out)) = (body.signature.inputs.get(k), body.signature.outputs.get(k)) else {
        return false;
    };
    let Some((_, value)) = body.ret.iter().find(|(name, _)| *name == out.name) else { return false };
    value == &arg.name
        || forwards.iter().any(|&i| {
            let n = &body.nodes[i];
            value == &n.name || *value == format!("{}:output:0", n.name)
        })
}

/// The dtype the reads give (all must agree).
fn read_dtype(f: &FunctionDef, reads: &[usize]) -> Option<Option<DType>> {
    let mut dtype = None;
    for &i in reads {
        let d = f.nodes[i].attrs.get("dtype").and_then(AttrValue::as_type)?;
        if dtype.is_some_and(|x| x != d) {
            return None;
        }
        dtype = Some(d);
    }
    Some(dtype)
}

/// `f` with argument (and, for the body, result) `k` of type `dtype`, its reads made
/// `Identity`s and its gathers `GatherV2`s of the value: `ResourceGather(h, i)` with
/// `batch_dims = b` is `GatherV2(read(h), i, b)` with `batch_dims = b` (the axis a new
/// `Const` of the function).
fn retyped(f: &FunctionDef, k: usize, dtype: DType, uses: &Uses, body: bool) -> FunctionDef {
    let mut g = f.clone();
    g.signature.inputs[k].dtype = Some(dtype);
    if body {
        g.signature.outputs[k].dtype = Some(dtype);
    }
    let private = |name: &String| name.starts_with('_') && name != "_output_shapes" && name != "_class";
    for &i in uses.reads.iter().chain(&uses.forwards) {
        let n: &mut RawNode = &mut g.nodes[i];
        n.op = "Identity".into();
        n.attrs.retain(|name, _| private(name));
        n.attrs.insert("T".into(), AttrValue::Type(dtype));
    }
    let mut taken: HashSet<String> = g.nodes.iter().map(|n| n.name.clone()).collect();
    for &i in &uses.gathers {
        let n = &g.nodes[i];
        let batch_dims = n.attrs.get("batch_dims").and_then(AttrValue::as_int).unwrap_or(0);
        let tindices = n.attrs.get("Tindices").cloned().unwrap_or(AttrValue::Type(DType::Int32));
        let axis = fresh_name(&format!("{}/axis", n.name), &mut taken);
        let mut attrs = autoclust_graph::Attrs::default();
        attrs.insert("dtype".into(), AttrValue::Type(DType::Int32));
        let value = autoclust_graph::Tensor::scalar_i32(i32::try_from(batch_dims).unwrap_or(i32::MAX));
        attrs.insert("value".into(), AttrValue::Tensor(value));
        let konst = RawNode {
            name: axis.clone(),
            op: "Const".into(),
            inputs: vec![],
            attrs,
            device: n.device.clone(),
            span: None,
        };
        let n: &mut RawNode = &mut g.nodes[i];
        n.op = "GatherV2".into();
        n.attrs.retain(|name, _| private(name));
        n.attrs.insert("Tparams".into(), AttrValue::Type(dtype));
        n.attrs.insert("Tindices".into(), tindices);
        n.attrs.insert("Taxis".into(), AttrValue::Type(DType::Int32));
        n.attrs.insert("batch_dims".into(), AttrValue::I(batch_dims));
        // The data inputs (handle, indices) stay; the axis goes after them, before any
        // control input.
        let data = n.inputs.iter().take_while(|s| !s.starts_with('^')).count();
        n.inputs.insert(data, format!("{axis}:output:0"));
        g.nodes.push(konst);
    }
    g
}

/// Hoists what can be hoisted from loop `id`; returns how many handles it replaced.
fn hoist(graph: &mut Graph, id: NodeId) -> Result<usize, PassError> {
    let node = graph.node(id).clone();
    if !autoclust_graph::effects::calls_write_no_resource(&node, &graph.library) {
        return Ok(0);
    }
    let (Some(cond), Some(body)) = (plain_function(graph, id, "cond"), plain_function(graph, id, "body")) else {
        return Ok(0);
    };
    let (mut cond, mut body) = (cond.clone(), body.clone());
    let Some(AttrValue::List(ListValue::Type(mut types))) = node.attr("T").cloned() else { return Ok(0) };
    if types.len() != node.inputs.len()
        || body.signature.inputs.len() != types.len()
        || body.signature.outputs.len() != types.len()
        || cond.signature.inputs.len() != types.len()
    {
        return Ok(0);
    }
    let mut replaced: Vec<(usize, DType)> = Vec::new();
    let handles: Vec<usize> = (0..types.len()).filter(|&k| types[k] == DType::Resource).collect();
    for k in handles {
        let bu = uses_of(&body, &body.signature.inputs[k].name.clone());
        let cu = uses_of(&cond, &cond.signature.inputs[k].name.clone());
        if bu.other || cu.other || !cu.forwards.is_empty() || !returns_arg(&body, k, &bu.forwards) {
            continue;
        }
        let both = |u: &Uses| u.reads.iter().chain(&u.gathers).copied().collect::<Vec<_>>();
        let (Some(bd), Some(cd)) = (read_dtype(&body, &both(&bu)), read_dtype(&cond, &both(&cu))) else {
            continue;
        };
        let dtype = match (bd, cd) {
            (Some(a), Some(b)) if a != b => continue,
            (Some(a), _) | (None, Some(a)) => a,
            (None, None) => continue,
        };
        body = retyped(&body, k, dtype, &bu, true);
        cond = retyped(&cond, k, dtype, &cu, false);
        types[k] = dtype;
        replaced.push((k, dtype));
    }
    if replaced.is_empty() {
        return Ok(0);
    }
    // New functions: the originals may have other callers.
    let mut taken: HashSet<String> = graph.library.functions_mut().iter().map(|f| f.signature.name.clone()).collect();
    body.signature.name = fresh_name(&format!("{}_hoisted", body.signature.name), &mut taken);
    cond.signature.name = fresh_name(&format!("{}_hoisted", cond.signature.name), &mut taken);
    let (body_name, cond_name) = (body.signature.name.clone(), cond.signature.name.clone());
    graph.library.functions_mut().extend([body, cond]);

    // The reads before the loop, where its first iteration would read: after the loop's
    // control inputs and after every operand's producer (an operand may be computed from a
    // write of this very variable, which the loop's reads must see).
    let mut node_names: HashSet<String> = graph.nodes().iter().map(|n| n.name.clone()).collect();
    let mut gate_nodes: Vec<NodeId> = node.control_inputs.clone();
    let handles: Vec<NodeId> = replaced.iter().map(|&(k, _)| node.inputs[k].node).collect();
    for o in &node.inputs {
        if !gate_nodes.contains(&o.node) && !handles.contains(&o.node) {
            gate_nodes.push(o.node);
        }
    }
    let gates: Vec<String> = gate_nodes.iter().map(|&c| format!("^{}", graph.name(c))).collect();
    let mut raw = Vec::new();
    let mut read_names = Vec::new();
    for &(k, dtype) in &replaced {
        let name = fresh_name(&format!("{}/hoisted_read_{k}", node.name), &mut node_names);
        let mut inputs = vec![graph.output_name(node.inputs[k])];
        inputs.extend(gates.iter().cloned());
        let mut attrs = autoclust_graph::Attrs::default();
        attrs.insert("dtype".into(), AttrValue::Type(dtype));
        raw.push(RawNode {
            name: name.clone(),
            op: "ReadVariableOp".into(),
            inputs,
            attrs,
            device: node.device.clone(),
            span: None,
        });
        read_names.push((k, name));
    }
    graph.append_raw(raw)?;

    // The loop: values in, functions retyped.
    let mut inputs = node.inputs.clone();
    for (k, name) in &read_names {
        if let Some(read) = graph.find(name) {
            inputs[*k] = Output { node: read, port: 0 };
        }
    }
    graph.set_inputs(id, &inputs, &node.control_inputs);
    let attrs = graph.attrs_mut(id);
    attrs.insert("T".into(), AttrValue::List(ListValue::Type(types)));
    attrs.insert("body".into(), AttrValue::Func(FuncAttr { name: body_name, attrs: Default::default() }));
    attrs.insert("cond".into(), AttrValue::Func(FuncAttr { name: cond_name, attrs: Default::default() }));
    for key in ["output_shapes", "_output_shapes"] {
        if let Some(AttrValue::List(ListValue::Shape(shapes))) = attrs.get_mut(key) {
            for &(k, _) in &replaced {
                if let Some(s) = shapes.get_mut(k) {
                    *s = Shape::unknown();
                }
            }
        }
    }
    if let Some(AttrValue::List(ListValue::I(read_only))) = attrs.get_mut("_read_only_resource_inputs") {
        read_only.retain(|i| !replaced.iter().any(|&(k, _)| *i == k as i64));
    }

    // Consumers of the unchanged handles read the operand itself.
    for user in graph.node_ids().collect::<Vec<_>>() {
        let n = graph.node(user);
        if !n.inputs.iter().any(|o| o.node == id && replaced.iter().any(|&(k, _)| o.port as usize == k)) {
            continue;
        }
        let new_inputs: Vec<Output> = n
            .inputs
            .iter()
            .map(|&o| {
                if o.node == id && replaced.iter().any(|&(k, _)| o.port as usize == k) {
                    node.inputs[o.port as usize]
                } else {
                    o
                }
            })
            .collect();
        let controls = n.control_inputs.clone();
        graph.set_inputs(user, &new_inputs, &controls);
    }
    Ok(replaced.len())
}
