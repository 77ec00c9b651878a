//! Constant folding with shape materialisation (`opt --passes
//! constant-fold`), Grappler's `constfold`:
//! - a *pure* node ([`crate::rewrite::is_pure`]) whose data inputs are all
//!   constants is evaluated once, at optimization time, by the context's
//!   [`Evaluator`](crate::pass::Evaluator) (the runtime's kernels), and
//!   replaced by a `Const` of its value — in place, under its own name, when
//!   it has one output; by one new `Const` per port (`NAME/folded_K`) when it
//!   has several (`BroadcastGradientArgs`), the node itself then left to
//!   dead-node removal;
//! - `Shape`, `Size` and `Rank` of a value whose static shape inference
//!   knows fully become `Const`s whatever the value (so `BroadcastGradientArgs`
//!   of two such shapes folds in turn) — not of a fed node, whose value may
//!   not have the shape the graph gives it; of a v1 control-flow output
//!   (`Switch`, `Enter`, `Exit`: its data input's shape) the `Const` is gated on a new
//!   `Identity` of that output instead, so it is dead when the output is
//!   (Grappler's `ConstantFoldingCtrl`; constants folded from it inherit the
//!   gate); so does each output of a
//!   `ShapeN` whose input's shape is fully known (a new `Const`
//!   `NAME/shape_K`, gated on that input's producer); and
//!   `BroadcastGradientArgs(Shape(a), Shape(b))` becomes two empty index
//!   `Const`s when `b` provably has `a`'s shape at run time — one is the
//!   other through elementwise ops of one tensor, `BiasAdd`, and binary
//!   elementwise ops with a scalar operand, which keep their input's shape
//!   (a cheap stand-in for Grappler's symbolic shapes);
//! - afterwards, pure nodes and `Const`s nothing consumes any more are
//!   removed (unless the request fetches, targets or feeds them).
//!
//! Folded in topological order, so whole constant subgraphs collapse in one run.
//! Bounded: a node is evaluated only when inference knows its output shape
//! (or, for a `Range` of scalar constants, its length is computed first)
//! and every output has at most [`MAX_FOLD_ELEMENTS`] elements (issue 13:
//! never materialise a huge tensor); a kernel error leaves the node as it
//! was (the run reports it as before); variant and resource outputs are not folded.
//!
//! Soundness: a pure node's value depends on its inputs only, so the
//! constant is the value every run computes (the same kernels compute it).
//! Ordering survives: the new `Const` keeps the node's control inputs and
//! inherits those of its constant inputs (a `Const` gated on a stateful op
//! stays gated through any chain of folds), and a materialised shape gets a
//! control edge from the value's producer, so whatever waited for the value
//! still waits for it. Stateful, resource, random and fed nodes are never folded.

use std::collections::HashMap;

use autoclust_graph::infer::TypeInfo;
use autoclust_graph::{AttrValue, Attrs, DType, Graph, NodeId, Output, RawNode, Tensor};

use crate::pass::{PassContext, PassError};
use crate::rewrite::{input_strings, is_control_flow, is_pure, pinned_names, remove_dead, Rewrite};

/// Largest output (in elements) a fold may create.
pub const MAX_FOLD_ELEMENTS: usize = 1 << 20;

/// What one run of [`constant_fold`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FoldReport {
    /// Nodes evaluated into constants.
    pub folded: usize,
    /// `Shape`/`Size`/`Rank` nodes materialised from static shapes.
    pub shapes: usize,
}

fn const_value(graph: &Graph, id: NodeId, ctx: &PassContext) -> Option<Tensor> {
    let n = graph.node(id);
    if n.op != "Const" || ctx.fed.contains(&n.name) {
        return None;
    }
    match n.attr("value") {
        Some(AttrValue::Tensor(t)) => Some(t.clone()),
        _ => None,
    }
}

fn const_node(name: String, value: Tensor, inputs: Vec<String>, device: String) -> RawNode {
    let mut attrs = Attrs::new();
    attrs.insert("dtype".into(), AttrValue::Type(value.dtype));
    attrs.insert("value".into(), AttrValue::Tensor(value));
    RawNode { name, op: "Const".into(), inputs, attrs, device, span: None }
}

/// `Shape`/`Size`/`Rank` of a fully known static shape.
fn materialise(op: &str, out_type: DType, dims: &[usize]) -> Option<Tensor> {
    let vals: Vec<i64> = match op {
        "Shape" => dims.iter().map(|&d| d as i64).collect(),
        "Size" => vec![dims.iter().try_fold(1i64, |a, &d| a.checked_mul(d as i64))?],
        "Rank" => vec![dims.len() as i64],
        _ => return None,
    };
    let shape = if op == "Shape" { vec![vals.len()] } else { vec![] };
    match out_type {
        DType::Int32 => {
            let v: Option<Vec<i32>> = vals.iter().map(|&x| i32::try_from(x).ok()).collect();
            Tensor::from_i32(shape, v?).ok()
        }
        DType::Int64 => Tensor::from_i64(shape, vals).ok(),
        _ => None,
    }
}

/// Folds constants and materialises known shapes (module doc).
pub fn constant_fold(graph: &Graph, ctx: &PassContext) -> Result<(Graph, FoldReport), PassError> {
    constant_fold_owned(graph.clone(), ctx)
}

/// [`constant_fold`] editing `graph` in place (what the pass runs).
pub(crate) fn constant_fold_owned(owned: Graph, ctx: &PassContext) -> Result<(Graph, FoldReport), PassError> {
    let graph = &owned;
    let _span = tracing::debug_span!("constant_fold", nodes = graph.len()).entered();
    let keep = pinned_names(graph, ctx);
    let order = graph.topo_order()?;
    let info = ctx.types(graph)?;
    let mut rw = Rewrite::default();
    let mut report = FoldReport::default();
    // Known values, and the control inputs a use of each must inherit.
    let mut values: HashMap<Output, Tensor> = HashMap::new();
    let mut gates: HashMap<NodeId, Vec<NodeId>> = HashMap::new();
    // Gates that are new nodes (by name): the `Identity` of a control-flow output a shape waits on.
    let mut named_gates: HashMap<NodeId, Vec<String>> = HashMap::new();
    for id in order {
        let node = graph.node(id);
        if let Some(t) = const_value(graph, id, ctx) {
            values.insert(Output { node: id, port: 0 }, t);
            gates.insert(id, node.control_inputs.clone());
            continue;
        }
        if ctx.fed.contains(&node.name) || !is_pure(graph, node) {
            continue;
        }
        let outs = info.outputs(id);
        if outs.is_empty() || outs.iter().any(|(t, _)| matches!(t, DType::Variant | DType::Resource)) {
            continue;
        }
        // Shape materialisation of a v1 control-flow output (a Switch branch,
        // a loop variable): the constant waits on a new `Identity` of that
        // output, which is dead when the output is (Grappler's
        // `ConstantFoldingCtrl`), so it lives in the same branch and frame.
        if matches!(node.op.as_str(), "Shape" | "Size" | "Rank")
            && node.inputs.len() == 1
            && matches!(graph.node(node.inputs[0].node).op.as_str(), "Switch" | "Enter" | "Exit")
        {
            let x = node.inputs[0];
            // Each output of these is its data input 0 (or dead).
            let Some(&source) = graph.node(x.node).inputs.first() else { continue };
            let Some((dtype, shape)) = info.output(x).or_else(|| info.output(source)) else { continue };
            if matches!(dtype, DType::Resource | DType::Variant | DType::Ref(_)) {
                continue;
            }
            let Some(dims) = shape.to_known() else { continue };
            let Some(value) = materialise(&node.op, outs[0].0, &dims) else { continue };
            let ident = fresh(graph, &format!("{}/ctrl_identity", node.name));
            let mut attrs = Attrs::new();
            attrs.insert("T".into(), AttrValue::Type(*dtype));
            rw.add(RawNode {
                name: ident.clone(),
                op: "Identity".into(),
                inputs: vec![rw.output_string(graph, x)],
                attrs,
                device: node.device.clone(),
                span: None,
            });
            let mut inputs = input_strings(graph, &rw, &[], &node.control_inputs);
            inputs.push(format!("^{ident}"));
            rw.replace(id, const_node(node.name.clone(), value.clone(), inputs, node.device.clone()));
            values.insert(Output { node: id, port: 0 }, value);
            gates.insert(id, node.control_inputs.clone());
            named_gates.insert(id, vec![ident]);
            report.shapes += 1;
            continue;
        }
        // Shape materialisation: only the static shape of the input matters.
        if matches!(node.op.as_str(), "Shape" | "Size" | "Rank")
            && node.inputs.len() == 1
            && !is_control_flow(graph, node.inputs[0].node)
            && !ctx.fed.contains(graph.name(node.inputs[0].node))
        {
            let Some(dims) = info.output(node.inputs[0]).and_then(|(_, s)| s.to_known()) else { continue };
            let Some(value) = materialise(&node.op, outs[0].0, &dims) else { continue };
            let mut control = node.control_inputs.clone();
            control.push(node.inputs[0].node);
            let inputs = input_strings(graph, &rw, &[], &control);
            rw.replace(id, const_node(node.name.clone(), value.clone(), inputs, node.device.clone()));
            values.insert(Output { node: id, port: 0 }, value);
            gates.insert(id, control);
            report.shapes += 1;
            continue;
        }
        // ShapeN: one `Const` per input whose static shape is fully known
        // (`NAME/shape_K`), each gated on its input's producer.
        if node.op == "ShapeN" && outs.len() == node.inputs.len() {
            let mut any = false;
            let mut all_control = node.control_inputs.clone();
            for (k, &input) in node.inputs.iter().enumerate() {
                if is_control_flow(graph, input.node) || ctx.fed.contains(graph.name(input.node)) {
                    continue;
                }
                let Some(dims) = info.output(input).and_then(|(_, s)| s.to_known()) else { continue };
                let Some(value) = materialise("Shape", outs[k].0, &dims) else { continue };
                let mut control = node.control_inputs.clone();
                control.push(input.node);
                all_control.push(input.node);
                let name = fresh(graph, &format!("{}/shape_{k}", node.name));
                let inputs = input_strings(graph, &rw, &[], &control);
                rw.add(const_node(name.clone(), value.clone(), inputs, node.device.clone()));
                rw.redirect_named(Output { node: id, port: k as u32 }, name);
                values.insert(Output { node: id, port: k as u32 }, value);
                any = true;
            }
            if any {
                gates.insert(id, all_control);
                report.shapes += 1;
            }
            continue;
        }
        // BroadcastGradientArgs(Shape(a), Shape(b)) of two values that have
        // the same shape at run time (one is an elementwise function of the
        // other, `same_shape_root`): nothing to reduce on either side.
        if node.op == "BroadcastGradientArgs" && node.inputs.len() == 2 && outs.len() == 2 {
            let shape_of = |o: Output| {
                let s = graph.node(o.node);
                // Not of a v1 control-flow output: a control edge from it would not carry its deadness.
                (s.op == "Shape"
                    && s.inputs.len() == 1
                    && !ctx.fed.contains(&s.name)
                    && !is_control_flow(graph, s.inputs[0].node))
                .then(|| (s, s.inputs[0]))
            };
            if let (Some((s0, a)), Some((s1, b))) = (shape_of(node.inputs[0]), shape_of(node.inputs[1])) {
                let same = s0.attr("out_type") == s1.attr("out_type")
                    && same_shape_root(graph, a, ctx, &info) == same_shape_root(graph, b, ctx, &info);
                let empty = match outs[0].0 {
                    DType::Int32 => Tensor::from_i32(vec![0], vec![]).ok(),
                    DType::Int64 => Tensor::from_i64(vec![0], vec![]).ok(),
                    _ => None,
                };
                if let (true, Some(empty)) = (same, empty) {
                    let mut control = node.control_inputs.clone();
                    for s in [s0, s1] {
                        control.extend(s.control_inputs.iter().copied());
                        control.push(s.inputs[0].node);
                    }
                    let inputs = input_strings(graph, &rw, &[], &control);
                    for k in 0..2u32 {
                        let name = fresh(graph, &format!("{}/folded_{k}", node.name));
                        rw.add(const_node(name.clone(), empty.clone(), inputs.clone(), node.device.clone()));
                        rw.redirect_named(Output { node: id, port: k }, name);
                        values.insert(Output { node: id, port: k }, empty.clone());
                    }
                    gates.insert(id, control);
                    report.shapes += 1;
                    continue;
                }
            }
        }
        let Some(eval) = &ctx.evaluator else { continue };
        let Some(inputs) = node.inputs.iter().map(|o| values.get(o).cloned()).collect::<Option<Vec<Tensor>>>() else {
            continue;
        };
        if node.inputs.is_empty() {
            // Sources other than Const (none are pure today) are left alone.
            continue;
        }
        let small = outs.iter().all(|(_, s)| s.num_elements().is_some_and(|n| n <= MAX_FOLD_ELEMENTS))
            || (node.op == "Range" && range_len(&inputs).is_some_and(|n| n <= MAX_FOLD_ELEMENTS as f64));
        if !small {
            continue;
        }
        let results = match eval(node, &inputs) {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(node = %node.name, error = %e, "not folded");
                continue;
            }
        };
        if results.len() != outs.len()
            || results.iter().zip(outs).any(|(r, (t, _))| r.dtype != *t || r.num_elements() > MAX_FOLD_ELEMENTS)
        {
            continue;
        }
        // The control inputs the constant must keep: the node's and its inputs'.
        let mut control = node.control_inputs.clone();
        for o in &node.inputs {
            for &g in gates.get(&o.node).into_iter().flatten() {
                if !control.contains(&g) {
                    control.push(g);
                }
            }
        }
        let mut inputs = input_strings(graph, &rw, &[], &control);
        let mut named: Vec<String> = Vec::new();
        for o in &node.inputs {
            for g in named_gates.get(&o.node).into_iter().flatten() {
                if !named.contains(g) {
                    named.push(g.clone());
                }
            }
        }
        inputs.extend(named.iter().map(|g| format!("^{g}")));
        if !named.is_empty() {
            named_gates.insert(id, named);
        }
        if results.len() == 1 {
            let value = results.into_iter().next().expect("one result");
            rw.replace(id, const_node(node.name.clone(), value.clone(), inputs, node.device.clone()));
            values.insert(Output { node: id, port: 0 }, value);
            gates.insert(id, control);
        } else {
            for (k, value) in results.into_iter().enumerate() {
                let name = fresh(graph, &format!("{}/folded_{k}", node.name));
                rw.add(const_node(name.clone(), value.clone(), inputs.clone(), node.device.clone()));
                rw.redirect_named(Output { node: id, port: k as u32 }, name);
            }
            // Users of the new constants see them as plain values; the
            // original stays for its control users until dead-node removal.
        }
        report.folded += 1;
    }
    let out = rw.apply(owned)?;
    let out = remove_dead(out, &keep, ctx)?;
    tracing::debug!(folded = report.folded, shapes = report.shapes, nodes = out.len(), "constant-fold done");
    Ok((out, report))
}

/// Ops whose output 0 has the shape of their input 0 whatever the values:
/// elementwise functions of one tensor, and `BiasAdd` (the bias broadcasts
/// along the last dimension only).
const SAME_SHAPE_AS_INPUT_0: &[&str] = &[
    "Identity",
    "Snapshot",
    "StopGradient",
    "Cast",
    "Relu",
    "Relu6",
    "Elu",
    "Selu",
    "LeakyRelu",
    "Softmax",
    "LogSoftmax",
    "ZerosLike",
    "OnesLike",
    "BiasAdd",
];

/// The value whose run-time shape `o` provably has, followed back through
/// [`SAME_SHAPE_AS_INPUT_0`] and unary elementwise ops (pure ones, not fed).
/// A binary elementwise op one of whose operands is statically a scalar
/// broadcasts to the other's shape, so that one is followed too.
fn same_shape_root(graph: &Graph, mut o: Output, ctx: &PassContext, info: &TypeInfo) -> Output {
    use autoclust_graph::registry::{lookup, OpFamily};
    let scalar = |o: Output| info.output(o).is_some_and(|(_, s)| s.rank() == Some(0));
    loop {
        let n = graph.node(o.node);
        if o.port != 0 || n.inputs.is_empty() || ctx.fed.contains(&n.name) || !is_pure(graph, n) {
            return o;
        }
        let family = lookup(&n.op).map(|s| s.family);
        let binary = family == Some(OpFamily::Binary) && n.inputs.len() == 2;
        o = if family == Some(OpFamily::Unary)
            || SAME_SHAPE_AS_INPUT_0.contains(&n.op.as_str())
            || (binary && scalar(n.inputs[1]))
        {
            n.inputs[0]
        } else if binary && scalar(n.inputs[0]) {
            n.inputs[1]
        } else {
            return o;
        };
    }
}

/// The element count of `Range(start, limit, delta)` on scalar constants
/// (static inference leaves a float `Range`'s length unknown).
fn range_len(inputs: &[Tensor]) -> Option<f64> {
    let mut v = Vec::with_capacity(3);
    for t in inputs {
        match t.to_f64_vec()?.as_slice() {
            [x] => v.push(*x),
            _ => return None,
        }
    }
    let [start, limit, delta] = v[..] else { return None };
    let n = ((limit - start) / delta).ceil();
    (n.is_finite() && delta != 0.0).then_some(n.max(0.0))
}

fn fresh(graph: &Graph, base: &str) -> String {
    if graph.find(base).is_none() {
        return base.to_string();
    }
    (1..).map(|i| format!("{base}_{i}")).find(|n| graph.find(n).is_none()).expect("a free name")
}

/// `constant-fold`: [`constant_fold`] as a registered pass.
pub(crate) struct ConstantFoldPass;

impl crate::pass::Pass for ConstantFoldPass {
    fn name(&self) -> &'static str {
        "constant-fold"
    }
    fn description(&self) -> &'static str {
        "evaluate pure nodes of constant inputs into Consts (outputs up to 1 Mi elements), materialise \
         Shape/Size/Rank of known static shapes, drop what becomes dead"
    }
    fn run(&self, graph: Graph, ctx: &PassContext) -> Result<Graph, PassError> {
        let mut out = constant_fold_owned(graph, ctx)?.0;
        crate::function_bodies::optimize_bodies(
            &mut out,
            ctx,
            "constant-fold",
            |body, c| Ok(constant_fold(body, c)?.0),
        );
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> Graph {
        autoclust_graph::text::parse(src).unwrap()
    }

    /// A stand-in evaluator: AddV2/Mul of float scalars.
    fn ctx() -> PassContext {
        let eval: crate::pass::Evaluator = std::sync::Arc::new(|n, ins| {
            let a = ins[0].as_f32().ok_or("f32")?[0];
            let b = ins[1].as_f32().ok_or("f32")?[0];
            let v = match n.op.as_str() {
                "AddV2" => a + b,
                "Mul" => a * b,
                _ => return Err("no kernel".into()),
            };
            Ok(vec![Tensor::scalar_f32(v)])
        });
        PassContext { evaluator: Some(eval), ..PassContext::default() }
    }

    #[test]
    fn folds_chains_in_place_and_drops_dead_constants() {
        let g = parse(
            "x = Placeholder() {dtype = float32, shape = shape[]}\n\
             a = Const() {dtype = float32, value = float32[]{2.0}}\n\
             b = Const() {dtype = float32, value = float32[]{3.0}}\n\
             s = AddV2(a, b) {T = float32}\n\
             m = Mul(s, a) {T = float32}\n\
             y = Mul(x, m) {T = float32}\n",
        );
        let (out, r) = constant_fold(&g, &ctx()).unwrap();
        assert_eq!(r.folded, 2);
        let names: Vec<&str> = out.nodes().iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["x", "m", "y"]);
        let m = out.node(out.find("m").unwrap());
        assert_eq!(m.op, "Const");
        assert_eq!(m.attr("value"), Some(&AttrValue::Tensor(Tensor::scalar_f32(10.0))));
    }

    #[test]
    fn keeps_control_inputs_of_folded_constants_and_never_folds_stateful_or_fed() {
        let g = parse(
            "v = VarHandleOp() {dtype = float32, shape = shape[], shared_name = \"v\"}\n\
             w = AssignVariableOp(v, c0) {dtype = float32}\n\
             c0 = Const() {dtype = float32, value = float32[]{1.0}}\n\
             a = Const(^w) {dtype = float32, value = float32[]{2.0}}\n\
             f = Const() {dtype = float32, value = float32[]{3.0}}\n\
             s = AddV2(a, c0) {T = float32}\n\
             t = AddV2(f, c0) {T = float32}\n\
             r = ReadVariableOp(v, ^s) {dtype = float32}\n",
        );
        let mut c = ctx();
        c.fed.insert("f".into());
        let (out, r) = constant_fold(&g, &c).unwrap();
        assert_eq!(r.folded, 1);
        let s = out.node(out.find("s").unwrap());
        assert_eq!(s.op, "Const");
        assert_eq!(s.control_inputs, vec![out.find("w").unwrap()]);
        assert_eq!(out.node(out.find("t").unwrap()).op, "AddV2");
        assert_eq!(out.node(out.find("w").unwrap()).op, "AssignVariableOp");
    }

    #[test]
    fn materialises_known_shapes_with_an_edge_from_the_value() {
        let g = parse(
            "x = Placeholder() {dtype = float32, shape = shape[2, 3]}\n\
             y = Placeholder() {dtype = float32, shape = shape[?, 3]}\n\
             sx = Shape(x) {T = float32, out_type = int32}\n\
             nx = Size(x) {T = float32, out_type = int32}\n\
             sy = Shape(y) {T = float32, out_type = int32}\n\
             sn = ShapeN(x, y) {N = 2, T = float32, out_type = int64}\n\
             u = IdentityN(sn, sn:1) {T = [int64, int64]}\n",
        );
        let (out, r) = constant_fold(&g, &PassContext::default()).unwrap();
        assert_eq!(r.shapes, 3);
        let sx = out.node(out.find("sx").unwrap());
        assert_eq!(sx.op, "Const");
        assert_eq!(sx.attr("value"), Some(&AttrValue::Tensor(Tensor::from_i32(vec![2], vec![2, 3]).unwrap())));
        assert_eq!(sx.control_inputs, vec![out.find("x").unwrap()]);
        let nx = out.node(out.find("nx").unwrap());
        assert_eq!(nx.attr("value"), Some(&AttrValue::Tensor(Tensor::scalar_i32(6))));
        assert_eq!(out.node(out.find("sy").unwrap()).op, "Shape");
        // ShapeN: the known port becomes a Const gated on x, the other stays.
        let u = out.node(out.find("u").unwrap());
        let s0 = out.node(u.inputs[0].node);
        assert_eq!((s0.name.as_str(), s0.op.as_str()), ("sn/shape_0", "Const"));
        assert_eq!(s0.attr("value"), Some(&AttrValue::Tensor(Tensor::from_i64(vec![2], vec![2, 3]).unwrap())));
        assert_eq!(s0.control_inputs, vec![out.find("x").unwrap()]);
        assert_eq!(u.inputs[1], Output { node: out.find("sn").unwrap(), port: 1 });
    }

    #[test]
    fn range_of_constants_folds_when_short() {
        let eval: crate::pass::Evaluator = std::sync::Arc::new(|n, ins| {
            assert_eq!(n.op, "Range");
            let v: Vec<f32> = (0..3).map(|i| ins[0].as_f32().unwrap()[0] + i as f32).collect();
            Ok(vec![Tensor::from_f32(vec![3], v).unwrap()])
        });
        let g = parse(
            "a = Const() {dtype = float32, value = float32[]{0.5}}\n\
             b = Const() {dtype = float32, value = float32[]{3.0}}\n\
             d = Const() {dtype = float32, value = float32[]{1.0}}\n\
             big = Const() {dtype = float32, value = float32[]{1e12}}\n\
             r = Range(a, b, d) {Tidx = float32}\n\
             huge = Range(a, big, d) {Tidx = float32}\n",
        );
        let ctx = PassContext { evaluator: Some(eval), ..PassContext::default() };
        let (out, r) = constant_fold(&g, &ctx).unwrap();
        assert_eq!(r.folded, 1);
        assert_eq!(out.node(out.find("r").unwrap()).op, "Const");
        assert_eq!(out.node(out.find("huge").unwrap()).op, "Range");
        assert_eq!(range_len(&[Tensor::scalar_f32(0.5), Tensor::scalar_f32(3.0), Tensor::scalar_f32(1.0)]), Some(3.0));
    }
}
