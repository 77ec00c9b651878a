//! Instantiating a function body: a [`FunctionDef`] becomes a [`Graph`] with
//! one `_Arg` node per input (attrs `T`, `index`) and one `_Retval` node per
//! output (attrs `T`, `index`), as TensorFlow's `FunctionLibraryRuntime`
//! does before it runs a function. The runtime and the explorer use it to
//! execute cluster bodies.
//!
//! Body inputs keep the FunctionDef spelling and are resolved here:
//! - `arg` — a signature input (the `_Arg` node's output 0);
//! - `node:port` — autoclust's own cluster functions (two parts);
//! - `node:output_arg:index` — TensorFlow's form. The port is the position of
//!   `output_arg` among the producer's output args plus `index`; for a
//!   producer that calls a library function the positions come from its
//!   signature, for a few well-known multi-output ops from a small table,
//!   and otherwise the op is taken to have one output arg (port = index);
//! - `^node` — a control input.
//!
//! Type attributes of a polymorphic signature (`x: T`) and `$T`
//! placeholders in body attributes are filled from the call's attributes
//! ([`instantiate_with`]). List arguments (`N * T`, `list(T)`) are not
//! supported and give [`FunctionError::ListArgument`].

use std::collections::HashSet;

/// The maps of an instantiation, on foldhash (seeded per process like std's SipHash; a
/// function's names are hashed several times each, 10⁵ of them when a large graph's
/// clusters are instantiated).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

use crate::{
    ArgDef, AttrValue, Attrs, DType, FunctionDef, Graph, GraphError, Library, ListValue, Node, NodeId, Output,
};

/// `base`, or `base_1`, `base_2`, … — the first name not in `taken`, which it then joins.
pub fn fresh_name<S: std::hash::BuildHasher>(base: &str, taken: &mut HashSet<String, S>) -> String {
    let mut name = base.to_string();
    let mut k = 1;
    while taken.contains(&name) {
        name = format!("{base}_{k}");
        k += 1;
    }
    taken.insert(name.clone());
    name
}

/// Why a function body could not be instantiated. Every variant names the
/// function and, where there is one, the body node at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FunctionError {
    #[error("function '{function}': node '{node}': input '{input}' names no argument or node of the body")]
    UnknownInput { function: String, node: String, input: String },
    #[error("function '{function}': node '{node}': malformed input '{input}'")]
    MalformedInput { function: String, node: String, input: String },
    #[error("function '{function}': node '{node}': op {op} has no output arg '{arg}'")]
    UnknownOutputArg { function: String, node: String, op: String, arg: String },
    #[error("function '{function}': argument '{arg}' has type attribute '{attr}' but no value was given for it")]
    UnboundTypeAttr { function: String, arg: String, attr: String },
    #[error("function '{function}': argument '{arg}' is a list argument, which is not supported")]
    ListArgument { function: String, arg: String },
    #[error("function '{function}': node '{node}' uses the op {op}, which only the function's signature makes")]
    ReservedOp { function: String, node: String, op: String },
    #[error("function '{function}': output '{output}' has no return value")]
    MissingReturn { function: String, output: String },
    #[error("function '{function}': return value '{output}' is not an output of the signature")]
    UnknownReturn { function: String, output: String },
    #[error("function '{function}': node '{node}': attribute placeholder '${placeholder}' has no value")]
    UnboundPlaceholder { function: String, node: String, placeholder: String },
    #[error(
        "function '{function}': node '{node}': attribute '{attr}' nests deeper than {} levels once its \
         placeholders are filled",
        crate::limits::MAX_ATTR_DEPTH
    )]
    NestedTooDeep { function: String, node: String, attr: String },
    #[error("function '{function}': {source}")]
    Graph { function: String, source: GraphError },
}

/// Instantiates a function whose signature has only fixed dtypes (or type
/// attributes with defaults).
pub fn instantiate(function: &FunctionDef, library: &Library) -> Result<Graph, FunctionError> {
    instantiate_with(function, library, &Attrs::new())
}

/// Instantiates a function with the call's attributes, which bind the
/// signature's type attributes and the body's `$name` placeholders.
pub fn instantiate_with(function: &FunctionDef, library: &Library, call_attrs: &Attrs) -> Result<Graph, FunctionError> {
    let fname = function.signature.name.clone();
    let _span = tracing::debug_span!("instantiate", function = %fname).entered();

    // Attribute values: the call's, then the signature's defaults.
    let mut bound: HashMap<&str, &AttrValue> = HashMap::default();
    for def in &function.signature.attrs {
        if let Some(d) = &def.default {
            bound.insert(&def.name, d);
        }
    }
    for (k, v) in call_attrs {
        bound.insert(k, v);
    }
    let arg_dtype = |arg: &ArgDef| -> Result<DType, FunctionError> {
        if !arg.number_attr.is_empty() || !arg.type_list_attr.is_empty() {
            return Err(FunctionError::ListArgument { function: fname.clone(), arg: arg.name.clone() });
        }
        if let Some(t) = arg.dtype {
            return Ok(t);
        }
        bound.get(arg.type_attr.as_str()).and_then(|v| v.as_type()).ok_or_else(|| FunctionError::UnboundTypeAttr {
            function: fname.clone(),
            arg: arg.name.clone(),
            attr: arg.type_attr.clone(),
        })
    };

    // Graph-wide names: body nodes keep theirs; `_Arg`/`_Retval` nodes take
    // the argument's name when it is free, else a numbered variant. Nodes are
    // numbered arguments first, then the body in order, then the returns, and
    // inputs are resolved straight to those ids (no `node:port` strings to parse again).
    let nargs = function.signature.inputs.len();
    let mut body_ids: HashMap<&str, (NodeId, &str)> = HashMap::default();
    body_ids.reserve(function.nodes.len());
    for (j, n) in function.nodes.iter().enumerate() {
        if body_ids.insert(&n.name, (NodeId((nargs + j) as u32), &n.op)).is_some() {
            let source = GraphError::DuplicateNode { name: n.name.clone(), span: n.span };
            return Err(FunctionError::Graph { function: fname.clone(), source });
        }
    }
    let mut added: HashMap<String, ()> = HashMap::default();
    let mut fresh = |base: &str| {
        let mut name = base.to_string();
        let mut k = 1;
        while body_ids.contains_key(name.as_str()) || added.contains_key(&name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        added.insert(name.clone(), ());
        name
    };

    let mut nodes = Vec::with_capacity(nargs + function.nodes.len() + function.ret.len());
    let mut arg_ids: HashMap<&str, NodeId> = HashMap::default();
    for (i, arg) in function.signature.inputs.iter().enumerate() {
        let dtype = arg_dtype(arg)?;
        let name = fresh(&arg.name);
        arg_ids.insert(&arg.name, NodeId(i as u32));
        let mut attrs = Attrs::new();
        attrs.insert("T".into(), AttrValue::Type(dtype));
        attrs.insert("index".into(), AttrValue::I(i as i64));
        nodes.push(Node {
            name,
            op: "_Arg".into(),
            inputs: vec![],
            control_inputs: vec![],
            attrs,
            device: String::new(),
            span: None,
        });
    }

    let resolver = InputResolver { function: &fname, library, args: &arg_ids, nodes: &body_ids };
    for n in &function.nodes {
        // `_Arg`/`_Retval` stand for the signature; a body spelling one (a malformed or fuzzed
        // graph) would be an argument or a return without its index and value.
        if n.op == "_Arg" || n.op == "_Retval" {
            return Err(FunctionError::ReservedOp { function: fname.clone(), node: n.name.clone(), op: n.op.clone() });
        }
        let mut inputs = Vec::with_capacity(n.inputs.len());
        let mut control_inputs = Vec::new();
        for input in &n.inputs {
            match resolver.resolve(&n.name, input)? {
                Resolved::Control(id) => control_inputs.push(id),
                Resolved::Data(o) => {
                    if !control_inputs.is_empty() {
                        let source =
                            GraphError::DataAfterControl { node: n.name.clone(), input: input.clone(), span: n.span };
                        return Err(FunctionError::Graph { function: fname.clone(), source });
                    }
                    inputs.push(o);
                }
            }
        }
        let attrs = substitute(&n.attrs, &bound).map_err(|placeholder| FunctionError::UnboundPlaceholder {
            function: fname.clone(),
            node: n.name.clone(),
            placeholder,
        })?;
        // A placeholder inside a function attribute nests the caller's value one level
        // deeper per call: bounded like the values the readers accept, so a chain of calls
        // cannot build a value too deep to print, compare or drop.
        if let Some((k, _)) = attrs.iter().find(|(_, v)| v.depth() > crate::limits::MAX_ATTR_DEPTH) {
            return Err(FunctionError::NestedTooDeep {
                function: fname.clone(),
                node: n.name.clone(),
                attr: k.clone(),
            });
        }
        nodes.push(Node {
            name: n.name.clone(),
            op: n.op.clone(),
            inputs,
            control_inputs,
            attrs,
            device: n.device.clone(),
            span: n.span,
        });
    }

    for (name, _) in &function.ret {
        if !function.signature.outputs.iter().any(|o| &o.name == name) {
            return Err(FunctionError::UnknownReturn { function: fname.clone(), output: name.clone() });
        }
    }
    for (i, out) in function.signature.outputs.iter().enumerate() {
        let dtype = arg_dtype(out)?;
        let Some((_, value)) = function.ret.iter().find(|(k, _)| k == &out.name) else {
            return Err(FunctionError::MissingReturn { function: fname.clone(), output: out.name.clone() });
        };
        // A return is a value: a control input (`^node`, a fuzzed graph's) returns nothing.
        let Resolved::Data(input) = resolver.resolve(&format!("return {}", out.name), value)? else {
            return Err(FunctionError::MissingReturn { function: fname.clone(), output: out.name.clone() });
        };
        let mut attrs = Attrs::new();
        attrs.insert("T".into(), AttrValue::Type(dtype));
        attrs.insert("index".into(), AttrValue::I(i as i64));
        let name = fresh(&format!("{}_retval", out.name));
        nodes.push(Node {
            name,
            op: "_Retval".into(),
            inputs: vec![input],
            control_inputs: vec![],
            attrs,
            device: String::new(),
            span: None,
        });
    }

    let graph = Graph::from_nodes(nodes, library.clone(), None)
        .map_err(|source| FunctionError::Graph { function: fname.clone(), source })?;
    // Every body's ports are checked as the top-level graph's are at load: an output
    // index past what its producer has is an error naming the node, for whatever pass
    // instantiates the body (inlining, body clustering, the runtime), not a panic later.
    graph.check_ports().map_err(|source| FunctionError::Graph { function: fname, source })?;
    Ok(graph)
}

/// Checks every function body's data inputs and return values as [`Graph::check_ports`]
/// checks the top level, without instantiating (a body with unbound type attributes is
/// checked too): `node:out_arg:index` must name an output its producer has, where the
/// producer's op and attributes say how many (placeholders and opaque ops are not
/// checked), and an argument has exactly one. Run at load by every command.
pub fn check_function_ports(library: &Library) -> Result<(), FunctionError> {
    for function in library.functions.iter() {
        let fname = function.signature.name.as_str();
        // Numbered as `instantiate` numbers them: arguments, then the body.
        let nargs = function.signature.inputs.len();
        let args: HashMap<&str, NodeId> =
            function.signature.inputs.iter().enumerate().map(|(i, a)| (a.name.as_str(), NodeId(i as u32))).collect();
        let nodes: HashMap<&str, (NodeId, &str)> = function
            .nodes
            .iter()
            .enumerate()
            .map(|(j, n)| (n.name.as_str(), (NodeId((nargs + j) as u32), n.op.as_str())))
            .collect();
        let resolver = InputResolver { function: fname, library, args: &args, nodes: &nodes };
        let returns = function.ret.iter().map(|(k, v)| (format!("return {k}"), v));
        let inputs = function.nodes.iter().flat_map(|n| n.inputs.iter().map(move |i| (n.name.clone(), i)));
        for (node, input) in inputs.chain(returns) {
            // Unknown names and malformed inputs are the instantiation's errors to report.
            let Ok(Resolved::Data(o)) = resolver.resolve(&node, input) else { continue };
            let Some(producer) = o.node.index().checked_sub(nargs).map(|j| &function.nodes[j]) else {
                continue; // an argument: one output, and a bare name reads it
            };
            let count = crate::registry::output_count(&producer.op, &producer.attrs, library);
            if let Some(outputs) = count.filter(|&c| o.port as usize >= c) {
                return Err(FunctionError::Graph {
                    function: fname.to_string(),
                    source: GraphError::PortOutOfRange(Box::new(crate::graph::PortOutOfRange {
                        node: node.clone(),
                        input: input.clone(),
                        port: o.port,
                        producer: producer.name.clone(),
                        op: producer.op.clone(),
                        outputs,
                        span: function.nodes.iter().find(|n| n.name == node).and_then(|n| n.span),
                    })),
                });
            }
        }
    }
    Ok(())
}

/// A function-body input resolved to the instantiated graph's numbering.
enum Resolved {
    Data(Output),
    Control(NodeId),
}

struct InputResolver<'a> {
    function: &'a str,
    library: &'a Library,
    /// Each argument's node.
    args: &'a HashMap<&'a str, NodeId>,
    /// Each body node's id and op.
    nodes: &'a HashMap<&'a str, (NodeId, &'a str)>,
}

impl InputResolver<'_> {
    /// Resolves a function-body input (`arg`, `node:port`, `node:out_arg:index`, `^node`,
    /// `^arg`) to the node and port it reads.
    fn resolve(&self, node: &str, input: &str) -> Result<Resolved, FunctionError> {
        let unknown =
            || FunctionError::UnknownInput { function: self.function.into(), node: node.into(), input: input.into() };
        let malformed =
            || FunctionError::MalformedInput { function: self.function.into(), node: node.into(), input: input.into() };
        if let Some(ctrl) = input.strip_prefix('^') {
            return match (self.nodes.get(ctrl), self.args.get(ctrl)) {
                (Some(&(id, _)), _) | (None, Some(&id)) => Ok(Resolved::Control(id)),
                (None, None) => Err(unknown()),
            };
        }
        let mut parts = input.split(':');
        let (id, port) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(arg), None, None, None) => (*self.args.get(arg).ok_or_else(unknown)?, 0),
            (Some(producer), Some(port), None, None) => {
                let port: u32 = port.parse().map_err(|_| malformed())?;
                (self.nodes.get(producer).ok_or_else(unknown)?.0, port)
            }
            (Some(producer), Some(out_arg), Some(index), None) => {
                let index: u32 = index.parse().map_err(|_| malformed())?;
                let &(id, op) = self.nodes.get(producer).ok_or_else(unknown)?;
                let base = self.output_arg_position(op, out_arg).ok_or_else(|| FunctionError::UnknownOutputArg {
                    function: self.function.into(),
                    node: node.into(),
                    op: op.to_string(),
                    arg: out_arg.to_string(),
                })?;
                (id, base.checked_add(index).ok_or_else(malformed)?)
            }
            _ => return Err(malformed()),
        };
        Ok(Resolved::Data(Output { node: id, port }))
    }

    /// The first port of output arg `arg` of `op`, when each output arg
    /// before it is a single tensor.
    fn output_arg_position(&self, op: &str, arg: &str) -> Option<u32> {
        if let Some(f) = self.library.function(op) {
            return f.signature.outputs.iter().position(|o| o.name == arg).map(|p| p as u32);
        }
        if let Some(args) = multi_output_args(op) {
            return args.iter().position(|a| *a == arg).map(|p| p as u32);
        }
        // A registered op with several output args, those before `arg` single tensors.
        if let Some(schema) = crate::registry::lookup(op).filter(|s| s.outputs.len() > 1) {
            let k = schema.outputs.iter().position(|o| o.name == arg)?;
            let single = |o: &crate::registry::ArgSpec| {
                o.number_attr.is_none() && !matches!(o.ty, crate::registry::TypeRule::ListAttr(_))
            };
            return schema.outputs[..k].iter().all(single).then_some(k as u32);
        }
        // An op with one output arg (possibly a list, indexed by `index`).
        Some(0)
    }
}

/// Output arg names of well-known ops with several single-tensor output args.
fn multi_output_args(op: &str) -> Option<&'static [&'static str]> {
    Some(match op {
        "Switch" | "RefSwitch" => &["output_false", "output_true"],
        "Merge" | "RefMerge" => &["output", "value_index"],
        "Unique" => &["y", "idx"],
        "UniqueWithCounts" => &["y", "idx", "count"],
        "TopK" | "TopKV2" => &["values", "indices"],
        "FusedBatchNorm" | "FusedBatchNormV2" => {
            &["y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"]
        }
        "FusedBatchNormV3" => {
            &["y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2", "reserve_space_3"]
        }
        "BroadcastGradientArgs" => &["r0", "r1"],
        "SparseSoftmaxCrossEntropyWithLogits" | "SoftmaxCrossEntropyWithLogits" => &["loss", "backprop"],
        "MaxPoolWithArgmax" => &["output", "argmax"],
        _ => return None,
    })
}

/// Replaces `$name` placeholders (also inside lists of functions' attrs) by
/// the bound values; returns the first unbound placeholder's name.
fn substitute(attrs: &Attrs, bound: &HashMap<&str, &AttrValue>) -> Result<Attrs, String> {
    // Most nodes have nothing to substitute: one copy.
    let plain = |v: &AttrValue| {
        !matches!(v, AttrValue::Placeholder(_) | AttrValue::Func(_) | AttrValue::List(ListValue::Func(_)))
    };
    if attrs.values().all(plain) {
        return Ok(attrs.clone());
    }
    let mut out = Attrs::new();
    for (k, v) in attrs {
        out.insert(k.clone(), substitute_value(v, bound)?);
    }
    Ok(out)
}

fn substitute_value(v: &AttrValue, bound: &HashMap<&str, &AttrValue>) -> Result<AttrValue, String> {
    Ok(match v {
        AttrValue::Placeholder(p) => (*bound.get(p.as_str()).ok_or_else(|| p.clone())?).clone(),
        AttrValue::Func(f) => {
            let mut f = f.clone();
            f.attrs = substitute(&f.attrs, bound)?;
            AttrValue::Func(f)
        }
        AttrValue::List(ListValue::Func(fs)) => {
            let mut out = Vec::with_capacity(fs.len());
            for f in fs {
                let mut f = f.clone();
                f.attrs = substitute(&f.attrs, bound)?;
                out.push(f);
            }
            AttrValue::List(ListValue::Func(out))
        }
        other => other.clone(),
    })
}

/// For each argument of `body`, whether its `_Retval` of the same index returns it unchanged
/// (directly or through `Identity`): a loop-invariant value (the compiler keeps it fixed
/// across iterations, the clusterer relies on that).
pub fn passed_through(body: &Graph, args: usize) -> Vec<bool> {
    let index = |id: NodeId| body.node(id).attr("index").and_then(AttrValue::as_int);
    let mut through = vec![false; args];
    for id in body.node_ids().filter(|&id| body.node(id).op == "_Retval") {
        let Some(i) = index(id).and_then(|i| usize::try_from(i).ok()).filter(|&i| i < args) else { continue };
        let mut src = body.node(id).inputs.first().copied();
        while let Some(o) = src {
            let n = body.node(o.node);
            match n.op.as_str() {
                "Identity" => src = n.inputs.first().copied(),
                "_Arg" => {
                    through[i] = o.port == 0 && index(o.node) == Some(i as i64);
                    break;
                }
                _ => break,
            }
        }
    }
    through
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AttrDef, FuncAttr, Output, RawNode, Signature};

    fn node(name: &str, op: &str, inputs: &[&str], attrs: Attrs) -> RawNode {
        RawNode {
            name: name.into(),
            op: op.into(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            attrs,
            device: String::new(),
            span: None,
        }
    }
    fn arg(name: &str, dtype: Option<DType>, type_attr: &str) -> ArgDef {
        ArgDef { name: name.into(), dtype, type_attr: type_attr.into(), ..ArgDef::default() }
    }
    fn t(attr: AttrValue) -> Attrs {
        [("T".to_string(), attr)].into_iter().collect()
    }

    /// `f(x, y) -> (s, d)`: `add = AddV2(x, y)`, `sp = Split…`, returns `add:0` and `sp:1`.
    fn sample() -> FunctionDef {
        FunctionDef {
            signature: Signature {
                name: "f".into(),
                inputs: vec![arg("x", Some(DType::Float32), ""), arg("y", Some(DType::Float32), "")],
                outputs: vec![arg("s", Some(DType::Float32), ""), arg("d", Some(DType::Float32), "")],
                ..Signature::default()
            },
            nodes: vec![
                node("add", "AddV2", &["x", "y"], t(AttrValue::Type(DType::Float32))),
                node("sw", "Switch", &["add:output:0", "y"], Attrs::new()),
                node("id", "Identity", &["sw:output_true:0", "^add"], Attrs::new()),
            ],
            ret: vec![("s".into(), "add:0".into()), ("d".into(), "id:output:0".into())],
            ..FunctionDef::default()
        }
    }

    #[test]
    fn builds_args_body_and_retvals() {
        let g = instantiate(&sample(), &Library::default()).unwrap();
        let names: Vec<&str> = g.nodes().iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["x", "y", "add", "sw", "id", "s_retval", "d_retval"]);
        let x = g.node(g.find("x").unwrap());
        assert_eq!(x.op, "_Arg");
        assert_eq!(x.attr("T"), Some(&AttrValue::Type(DType::Float32)));
        assert_eq!(x.attr("index"), Some(&AttrValue::I(0)));
        let sw = g.find("sw").unwrap();
        let id = g.node(g.find("id").unwrap());
        assert_eq!(id.inputs, vec![Output { node: sw, port: 1 }]);
        assert_eq!(id.control_inputs, vec![g.find("add").unwrap()]);
        let d = g.node(g.find("d_retval").unwrap());
        assert_eq!(d.op, "_Retval");
        assert_eq!(d.attr("index"), Some(&AttrValue::I(1)));
        assert_eq!(d.inputs, vec![Output { node: g.find("id").unwrap(), port: 0 }]);
    }

    #[test]
    fn arg_names_colliding_with_nodes_are_renamed() {
        let mut f = sample();
        f.nodes.push(node("x", "Identity", &["add:0"], Attrs::new()));
        let g = instantiate(&f, &Library::default()).unwrap();
        let arg = g.node(g.find("x_1").unwrap());
        assert_eq!(arg.op, "_Arg");
        let add = g.node(g.find("add").unwrap());
        assert_eq!(add.inputs[0].node, g.find("x_1").unwrap());
    }

    #[test]
    fn binds_type_attrs_and_placeholders() {
        let mut f = sample();
        f.signature.inputs[0] = arg("x", None, "T");
        f.signature.attrs = vec![AttrDef { name: "T".into(), ty: "type".into(), ..AttrDef::default() }];
        f.nodes[0].attrs = t(AttrValue::Placeholder("T".into()));
        let e = instantiate(&f, &Library::default()).unwrap_err();
        assert!(matches!(e, FunctionError::UnboundTypeAttr { .. }), "{e}");
        let g = instantiate_with(&f, &Library::default(), &t(AttrValue::Type(DType::Float64))).unwrap();
        let add = g.node(g.find("add").unwrap());
        assert_eq!(add.attr("T"), Some(&AttrValue::Type(DType::Float64)));
        assert_eq!(g.node(g.find("x").unwrap()).attr("T"), Some(&AttrValue::Type(DType::Float64)));
    }

    #[test]
    fn reports_bad_inputs_and_returns() {
        let mut f = sample();
        f.nodes[0].inputs[1] = "nope".into();
        let e = instantiate(&f, &Library::default()).unwrap_err();
        assert_eq!(e.to_string(), "function 'f': node 'add': input 'nope' names no argument or node of the body");
        let mut f = sample();
        f.nodes[1].inputs[0] = "add:x:y".into();
        assert!(matches!(instantiate(&f, &Library::default()), Err(FunctionError::MalformedInput { .. })));
        let mut f = sample();
        f.nodes[2].inputs[0] = "sw:nothing:0".into();
        assert!(matches!(instantiate(&f, &Library::default()), Err(FunctionError::UnknownOutputArg { .. })));
        let mut f = sample();
        f.ret.pop();
        assert!(matches!(instantiate(&f, &Library::default()), Err(FunctionError::MissingReturn { .. })));
        let mut f = sample();
        f.signature.inputs[1].number_attr = "N".into();
        assert!(matches!(instantiate(&f, &Library::default()), Err(FunctionError::ListArgument { .. })));
    }

    #[test]
    fn library_calls_use_the_callee_signature_for_output_args() {
        let callee = sample();
        let caller = FunctionDef {
            signature: Signature {
                name: "g".into(),
                inputs: vec![arg("a", Some(DType::Float32), "")],
                outputs: vec![arg("o", Some(DType::Float32), "")],
                ..Signature::default()
            },
            nodes: vec![node("call", "f", &["a", "a"], Attrs::new())],
            ret: vec![("o".into(), "call:d:0".into())],
            ..FunctionDef::default()
        };
        let lib = Library::new(vec![callee, caller.clone()], vec![]);
        let g = instantiate(&caller, &lib).unwrap();
        let o = g.node(g.find("o_retval").unwrap());
        assert_eq!(o.inputs, vec![Output { node: g.find("call").unwrap(), port: 1 }]);
    }

    #[test]
    fn placeholders_cannot_nest_values_past_the_limit() {
        // `h = @k{x = $F}`: the bound value one level deeper.
        let nested = |levels: usize| {
            let mut v = AttrValue::I(1);
            for _ in 1..levels {
                v = AttrValue::Func(FuncAttr { name: "k".into(), attrs: [("x".to_string(), v)].into_iter().collect() });
            }
            v
        };
        let mut f = sample();
        f.signature.attrs = vec![AttrDef { name: "F".into(), ty: "func".into(), ..AttrDef::default() }];
        let template =
            FuncAttr { name: "k".into(), attrs: [("x".to_string(), AttrValue::Placeholder("F".into()))].into() };
        f.nodes[0].attrs.insert("h".into(), AttrValue::Func(template));
        let bind = |levels| [("F".to_string(), nested(levels))].into_iter().collect::<Attrs>();
        let g = instantiate_with(&f, &Library::default(), &bind(99)).unwrap();
        assert_eq!(g.node(g.find("add").unwrap()).attr("h").unwrap().depth(), 100);
        let e = instantiate_with(&f, &Library::default(), &bind(100)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "function 'f': node 'add': attribute 'h' nests deeper than 100 levels once its placeholders are filled"
        );
    }
}
