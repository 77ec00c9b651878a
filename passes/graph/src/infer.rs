//! Dtype and static-shape inference over a whole graph.
//!
//! Nodes are visited in topological order. For an op the registry knows,
//! the node's attributes are checked against the op's schema, its data
//! inputs' count and dtypes against the signature, and the op's shape
//! function gives the output shapes; small integer outputs (shapes, axes,
//! sizes) are folded so that shape operands built from `Shape`, `Pack`,
//! `StridedSlice`, … are known downstream. Resource handles carry their
//! variable's dtype and shape from the `VarHandleOp` (directly or through
//! identities), so `ReadVariableOp` and `ResourceGather` get static shapes.
//!
//! A node whose op names a library function is typed from the function's
//! signature when its argument types are fixed or given by the node's
//! attributes. Any other op is opaque: its outputs are typed only when it
//! says so itself (a `Tout` type list, shapes from `_output_shapes`), and
//! nothing about it is rejected.

/// foldhash, not SipHash: inference looks up a handle or a seed for every resource input
/// of 10⁵–10⁶ nodes, and none of these keys come from an adversary that could flood a bucket.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

use smallvec::SmallVec;

use crate::registry::{self, InferCtx, InputFacts, OpSchema, TypeRule};
use crate::verify::VerifyError;
use crate::{AttrValue, DType, Dim, Graph, ListValue, Node, NodeId, Output, Shape};

/// The dtype and static shape of every output of every node, plus the
/// facts inference folded along the way.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TypeInfo {
    /// Per node: where its outputs start in `types` and how many are typed.
    slots: Vec<(u32, u32)>,
    /// Every typed output, node by node in inference order.
    types: Vec<(DType, Shape)>,
    /// Parallel to `types`: the folded value of a small integer output.
    values: Vec<Option<Box<[Dim]>>>,
    /// How many outputs each node has, when known (registry ops, typed calls).
    out_counts: Vec<Option<u32>>,
    handles: HashMap<Output, Handle>,
}

/// What a resource handle refers to.
#[derive(Clone, Debug, PartialEq)]
struct Handle {
    var: NodeId,
    dtype: DType,
    shape: Shape,
}

impl TypeInfo {
    /// The dtype and shape of one output, if known.
    pub fn output(&self, o: Output) -> Option<&(DType, Shape)> {
        self.outputs(o.node).get(o.port as usize)
    }
    /// The outputs of a node (empty when the node is opaque).
    pub fn outputs(&self, n: NodeId) -> &[(DType, Shape)] {
        match self.slots.get(n.index()) {
            Some(&(start, len)) => &self.types[start as usize..(start + len) as usize],
            None => &[],
        }
    }
    /// Index of an output in `types`, when typed.
    fn slot(&self, o: Output) -> Option<usize> {
        let &(start, len) = self.slots.get(o.node.index())?;
        (o.port < len).then(|| (start + o.port) as usize)
    }
    /// The number of outputs of a node, when known (it is for every registry op).
    pub fn num_outputs(&self, n: NodeId) -> Option<usize> {
        self.out_counts.get(n.index()).copied().flatten().map(|c| c as usize)
    }
    /// The elements of a small integer output (a shape, an axis list, a size)
    /// that inference could fold, each known or not; flat, row-major.
    pub fn value(&self, o: Output) -> Option<&[Dim]> {
        self.values[self.slot(o)?].as_deref()
    }
    /// For a resource handle output: the `VarHandleOp` it refers to and the
    /// variable's dtype and shape.
    pub fn variable(&self, o: Output) -> Option<(NodeId, DType, &Shape)> {
        self.handles.get(&o).map(|h| (h.var, h.dtype, &h.shape))
    }
}

/// Infers every node's output dtypes and static shapes in topological order.
///
/// Fails on a cycle, an output port out of range, or a node of a known op
/// whose attributes, arity, input dtypes or static shapes are invalid.
/// Unknown ops: outputs from `Tout` and `_output_shapes` when present, else none.
pub fn infer(graph: &Graph) -> Result<TypeInfo, VerifyError> {
    let _span = tracing::debug_span!("infer", nodes = graph.len()).entered();
    let order = graph.topo_order()?;
    let mut info = TypeInfo::empty(graph.len());
    for id in order {
        infer_node(graph, id, &mut info)?;
    }
    Ok(info)
}

/// Checks that every node of a known op has as many data inputs as its op's
/// signature, expanded by the node's own attributes (`N`, type lists), asks for,
/// as TensorFlow's graph import does for every node whether or not a step runs it.
/// Commands that execute a graph call this first, so a node with a wrong arity is
/// an error in both modes instead of a node one mode runs (its kernel ignoring
/// the extra input) and the other declines. Nodes whose signature cannot be
/// expanded (an attribute missing) are left to the verifier, which reports them
/// with their context; unknown ops and calls are not checked here.
pub fn check_arities(graph: &Graph) -> Result<(), VerifyError> {
    for node in graph.nodes() {
        let Some(schema) = registry::lookup(&node.op) else { continue };
        let Ok(in_types) = expand_args(node, schema, schema.inputs) else { continue };
        expect_arity(node, in_types.len())?;
    }
    Ok(())
}

/// Every edge's dtype against the dtype its consumer expects, both read from attributes
/// alone: the producer's output types from its op's signature and attributes
/// ([`attr_output_dtypes`]), the consumer's input types from its own. TensorFlow refuses
/// such a graph at import ("… incompatible with expected …"); without this check the plain
/// executor's kernels, which dispatch on the values they are given, would run a node whose
/// attributes contradict its inputs, and a cluster typed by those attributes would not.
/// Edges whose types are not known from attributes (unknown ops, calls) are left to
/// inference.
pub fn check_edge_dtypes(graph: &Graph) -> Result<(), VerifyError> {
    for node in graph.nodes() {
        let Some(schema) = registry::lookup(&node.op) else { continue };
        // The attributes a known op sets must be of their kind (a `T` that is not a type),
        // and a `Const`'s value of the dtype it declares: TensorFlow refuses both at import
        // (sweep 73: such a node was declined by inference alone and the plain executor ran it).
        // (Kinds only: a dtype outside the registry's allowed list is the kernels' to refuse.)
        if let Some(spec) = schema.attrs.iter().find(|a| node.attr(a.name).is_some_and(|v| !a.kind.accepts(v))) {
            return Err(bad_attr(node, spec.name, format!("must be {}", spec.kind.name())));
        }
        if node.op == "Const" {
            if let (Some(d), Some((v, _))) =
                (node.attr("dtype").and_then(AttrValue::as_type), node.attr("value").and_then(AttrValue::tensor_type))
            {
                if d != v {
                    return Err(bad_attr(node, "value", format!("has dtype {v} but the node's dtype is {d}")));
                }
            }
        }
        let Ok(in_types) = expand_args(node, schema, schema.inputs) else { continue };
        for (i, (&want, &o)) in in_types.iter().zip(&node.inputs).enumerate() {
            let got = attr_output_dtypes(graph.node(o.node)).and_then(|t| t.get(o.port as usize).copied());
            match got {
                Some(got) if !dtype_fits(want, got) => return Err(dtype_mismatch(graph, node, i, want, got)),
                _ => {}
            }
        }
    }
    Ok(())
}

/// Input `i` of `node` has dtype `got` where `expected` is declared.
fn dtype_mismatch(graph: &Graph, node: &Node, i: usize, expected: DType, got: DType) -> VerifyError {
    VerifyError::DTypeMismatch {
        node: node.name.clone(),
        span: node.span,
        op: node.op.clone(),
        input: i,
        producer: graph.output_name(node.inputs[i]),
        expected,
        got,
    }
}

/// `node` has `expected` data inputs, or the verifier's arity error naming it.
fn expect_arity(node: &Node, expected: usize) -> Result<(), VerifyError> {
    if expected == node.inputs.len() {
        return Ok(());
    }
    Err(VerifyError::Arity {
        node: node.name.clone(),
        span: node.span,
        op: node.op.clone(),
        expected,
        got: node.inputs.len(),
    })
}

/// Like [`infer`], but a node whose inference fails does not stop the rest:
/// its error is returned beside the others (with the node's id), its outputs
/// are typed from its attributes alone when its op's signature allows it
/// (shapes unknown), and inference goes on downstream. For clients that
/// decline such nodes one by one instead of giving up on the whole graph
/// (the clusterer, encapsulation). Fails only on a cycle.
pub fn infer_partial(graph: &Graph) -> Result<(TypeInfo, Vec<(NodeId, VerifyError)>), VerifyError> {
    infer_partial_seeded(graph, &Seeds::default(), None)
}

/// Shapes the outputs of a function call or a functional loop that its schema leaves
/// unknown, from its inputs' concrete types: what a client that knows the called body
/// (the JIT, [`infer_partial_seeded`]) can say. Asked only for nodes of the
/// [`registry::OpFamily::Call`] family or naming a library function, whose every input has
/// a known dtype and shape.
pub trait CallShapes {
    /// The shape of every output of `node`, called with `inputs`, or `None`.
    fn output_shapes(&self, graph: &Graph, node: &Node, inputs: &[(DType, Vec<usize>)]) -> Option<Vec<Vec<usize>>>;
}

/// What a run knows before its first step that the graph does not say: the shapes of the
/// values it feeds and the type of each variable's current value. Inference seeded with
/// them ([`infer_partial_seeded`]) gives the types the first step will see, so the
/// clusters it calls can be compiled before it (a Keras step's batch dimension is `-1` in
/// the graph and its variables are resource placeholders with no shape at all).
#[derive(Clone, Debug, Default)]
pub struct Seeds {
    /// The dtype and shape of the value fed to an output (a placeholder's, a function
    /// body's `_Arg`'s).
    pub outputs: HashMap<Output, (DType, Vec<usize>)>,
    /// The dtype and shape of the value of the variable a node names (a `VarHandleOp`
    /// or a resource `Placeholder`).
    pub variables: HashMap<NodeId, (DType, Vec<usize>)>,
    /// The type of an opaque node's output (a function body's `_Arg`) known only in part
    /// (`[?, 3]`); used where `outputs` has no seed for the node.
    pub partial: HashMap<Output, (DType, Shape)>,
}

/// [`infer_partial`] with what a run knows ([`Seeds`]): a seeded output takes the fed
/// shape, and a variable node's handle the value's type, where they fit what the graph
/// declares (a seed that contradicts it is ignored: the run itself reports the mismatch).
///
/// `calls`, when given, shapes the calls and loops whose outputs the graph leaves unknown
/// ([`CallShapes`]).
pub fn infer_partial_seeded(
    graph: &Graph,
    seeds: &Seeds,
    calls: Option<&dyn CallShapes>,
) -> Result<(TypeInfo, Vec<(NodeId, VerifyError)>), VerifyError> {
    let _span = tracing::debug_span!("infer_partial", nodes = graph.len()).entered();
    let order = graph.topo_order()?;
    let mut info = TypeInfo::empty(graph.len());
    let mut errors = Vec::new();
    let seeded = !seeds.outputs.is_empty() || !seeds.variables.is_empty() || !seeds.partial.is_empty();
    for id in order {
        if let Err(e) = infer_node(graph, id, &mut info) {
            let node = graph.node(id);
            if info.slots[id.index()].1 == 0 {
                if let Some(types) = attr_output_dtypes(node) {
                    info.out_counts[id.index()] = Some(types.len() as u32);
                    info.set_outputs(id, types.into_iter().map(|t| (t, Shape::unknown())));
                }
            }
            errors.push((id, e));
        }
        if seeded {
            info.seed(id, seeds);
        }
        if let Some(calls) = calls {
            info.shape_call(graph, id, calls);
        }
    }
    Ok((info, errors))
}

/// The dtypes a node's outputs have according to its op's signature and the
/// node's own attributes alone (`T`, `dtype`, `out_type`, `Tidx`, `DstT`,
/// `Tout`, … wherever the OpDef ties an output to an attribute), without
/// looking at any input. `None` for ops the registry does not know (except
/// calls typed by a `Tout` list) or when an attribute the rule needs is missing.
pub fn attr_output_dtypes(node: &Node) -> Option<SmallVec<[DType; 4]>> {
    match registry::lookup(&node.op) {
        Some(schema) => expand_args(node, schema, schema.outputs).ok(),
        None => node.attr("Tout").and_then(AttrValue::as_type_list).map(|t| t.iter().copied().collect()),
    }
}

/// The dtypes a node's data inputs must have according to its op's signature
/// and its attributes (what a producer the registry does not know must have
/// given it). `None` for ops the registry does not know.
pub fn attr_input_dtypes(node: &Node) -> Option<SmallVec<[DType; 4]>> {
    let schema = registry::lookup(&node.op)?;
    expand_args(node, schema, schema.inputs).ok()
}

/// The static shape of one output (unknown when not inferable). Infers only
/// the output's data ancestors, so it is cheap on a big graph.
pub fn static_shape(graph: &Graph, output: Output) -> Shape {
    if output.node.index() >= graph.len() {
        return Shape::unknown();
    }
    let Some(order) = data_ancestors(graph, output.node) else { return Shape::unknown() };
    let mut info = TypeInfo::empty(graph.len());
    for id in order {
        if infer_node(graph, id, &mut info).is_err() {
            return Shape::unknown();
        }
    }
    info.output(output).map(|t| t.1.clone()).unwrap_or_default()
}

/// `target` and its data ancestors in topological order; `None` on a cycle.
fn data_ancestors(graph: &Graph, target: NodeId) -> Option<Vec<NodeId>> {
    // 0 = unseen, 1 = on the stack, 2 = done.
    let mut state = vec![0u8; graph.len()];
    let mut order = Vec::new();
    let mut stack = vec![(target, 0usize)];
    state[target.index()] = 1;
    while let Some((id, next)) = stack.last_mut() {
        let inputs = &graph.node(*id).inputs;
        if let Some(o) = inputs.get(*next) {
            *next += 1;
            match state[o.node.index()] {
                0 => {
                    state[o.node.index()] = 1;
                    stack.push((o.node, 0));
                }
                1 => return None,
                _ => {}
            }
        } else {
            state[id.index()] = 2;
            order.push(*id);
            stack.pop();
        }
    }
    Some(order)
}

/// Whether a value of shape `dims` fits the declared `shape`.
fn fits(shape: &Shape, dims: &[usize]) -> bool {
    match &shape.dims {
        None => true,
        Some(d) => d.len() == dims.len() && d.iter().zip(dims).all(|(x, &n)| x.is_none_or(|x| x < 0 || x == n as i64)),
    }
}

impl TypeInfo {
    /// Applies the seeds of node `id` (just inferred) to its outputs and its handle.
    fn seed(&mut self, id: NodeId, seeds: &Seeds) {
        if self.slots[id.index()].1 == 0 {
            // An op inference does not type (`_Arg`): the seeds are its outputs.
            let fed: Vec<(DType, Shape)> = (0..)
                .map_while(|port| seeds.outputs.get(&Output { node: id, port }))
                .map(|(d, s)| (*d, Shape::known(s)))
                .collect();
            if !fed.is_empty() {
                self.set_outputs(id, fed);
            } else {
                let partial: Vec<(DType, Shape)> =
                    (0..).map_while(|port| seeds.partial.get(&Output { node: id, port }).cloned()).collect();
                if !partial.is_empty() {
                    self.set_outputs(id, partial);
                }
            }
        }
        for port in 0..self.slots[id.index()].1 {
            let o = Output { node: id, port };
            if let (Some((dtype, dims)), Some(slot)) = (seeds.outputs.get(&o), self.slot(o)) {
                if self.types[slot].0 == *dtype && fits(&self.types[slot].1, dims) {
                    self.types[slot].1 = Shape::known(dims);
                }
            }
        }
        if let Some((dtype, dims)) = seeds.variables.get(&id) {
            let o = Output { node: id, port: 0 };
            let declared = self.handles.get(&o);
            if declared.is_none_or(|h| h.dtype == *dtype && fits(&h.shape, dims)) {
                self.handles.insert(o, Handle { var: id, dtype: *dtype, shape: Shape::known(dims) });
            }
        }
    }

    /// Asks `calls` for the output shapes of node `id` (just inferred) when it is a call
    /// whose outputs are not all known and whose inputs are.
    fn shape_call(&mut self, graph: &Graph, id: NodeId, calls: &dyn CallShapes) {
        let node = graph.node(id);
        let is_call = graph.library.function(&node.op).is_some()
            || registry::lookup(&node.op).is_some_and(|s| s.family == registry::OpFamily::Call);
        if !is_call || self.outputs(id).iter().all(|t| t.1.is_fully_known()) {
            return;
        }
        let Some(inputs) = node
            .inputs
            .iter()
            .map(|&o| self.output(o).and_then(|(d, s)| Some((*d, s.to_known()?))))
            .collect::<Option<Vec<_>>>()
        else {
            return;
        };
        let Some(shapes) = calls.output_shapes(graph, node, &inputs) else { return };
        let (start, len) = self.slots[id.index()];
        if shapes.len() != len as usize {
            return;
        }
        for (k, dims) in shapes.iter().enumerate() {
            let t = &mut self.types[start as usize + k].1;
            if fits(t, dims) {
                *t = Shape::known(dims);
            }
        }
    }

    fn empty(n: usize) -> TypeInfo {
        TypeInfo {
            slots: vec![(0, 0); n],
            types: Vec::with_capacity(n),
            values: Vec::with_capacity(n),
            out_counts: vec![None; n],
            handles: HashMap::default(),
        }
    }

    /// Records a node's typed outputs (once per node).
    fn set_outputs(&mut self, id: NodeId, types: impl IntoIterator<Item = (DType, Shape)>) {
        let start = self.types.len();
        self.types.extend(types);
        self.values.resize(self.types.len(), None);
        self.slots[id.index()] = (start as u32, (self.types.len() - start) as u32);
    }
}

/// Whether a value of dtype `got` may feed an argument of dtype `want`
/// (a legacy reference type feeds its base type).
fn dtype_fits(want: DType, got: DType) -> bool {
    want == got || matches!(got, DType::Ref(b) if DType::from_tf(b.0) == Some(want))
}

fn infer_node(graph: &Graph, id: NodeId, info: &mut TypeInfo) -> Result<(), VerifyError> {
    let node = graph.node(id);
    check_ports(graph, node, info)?;
    if let Some(schema) = registry::lookup(&node.op) {
        return infer_known(graph, id, node, schema, info);
    }
    if let Some(f) = graph.library.function(&node.op) {
        return infer_call(graph, id, node, &f.signature, info);
    }
    infer_opaque(id, node, info);
    Ok(())
}

fn check_ports(graph: &Graph, node: &Node, info: &TypeInfo) -> Result<(), VerifyError> {
    for (i, o) in node.inputs.iter().enumerate() {
        if let Some(k) = info.num_outputs(o.node) {
            if o.port as usize >= k {
                let producer = graph.node(o.node);
                return Err(VerifyError::PortOutOfRange {
                    node: node.name.clone(),
                    span: node.span,
                    input: i,
                    producer: producer.name.clone(),
                    op: producer.op.clone(),
                    port: o.port,
                    outputs: k,
                });
            }
        }
    }
    Ok(())
}

fn missing(node: &Node, attr: &str) -> VerifyError {
    VerifyError::MissingAttr { node: node.name.clone(), span: node.span, op: node.op.clone(), attr: attr.into() }
}

fn bad_attr(node: &Node, attr: &str, message: String) -> VerifyError {
    VerifyError::BadAttr { node: node.name.clone(), span: node.span, op: node.op.clone(), attr: attr.into(), message }
}

/// The attributes the node sets, against the registry's schema of its op: of the right
/// kind, type attributes among the allowed dtypes (absent ones are not checked; nothing is
/// for an op the registry does not know). For passes that see nodes the verifier has not,
/// such as the bodies the compiler instantiates: a malformed attribute is refused there as
/// the verifier and the kernels refuse it, never read as its default.
pub fn check_set_attrs(node: &Node) -> Result<(), VerifyError> {
    match registry::lookup(&node.op) {
        Some(schema) => check_attrs_with(node, schema, false),
        None => Ok(()),
    }
}

/// Checks the node's attributes against the schema: present when required,
/// of the right kind, type attributes among the allowed dtypes.
fn check_attrs(node: &Node, schema: &OpSchema) -> Result<(), VerifyError> {
    check_attrs_with(node, schema, true)
}

fn check_attrs_with(node: &Node, schema: &OpSchema, required: bool) -> Result<(), VerifyError> {
    for spec in schema.attrs {
        let Some(v) = node.attr(spec.name) else {
            if required && spec.default == registry::AttrDefault::Required {
                return Err(missing(node, spec.name));
            }
            continue;
        };
        if !spec.kind.accepts(v) {
            return Err(bad_attr(node, spec.name, format!("must be {}", spec.kind.name())));
        }
        if let (Some(t), Some(allowed)) = (v.as_type(), spec.allowed) {
            if !allowed.contains(&t) {
                let names: Vec<String> = allowed.iter().map(|d| d.name()).collect();
                return Err(bad_attr(node, spec.name, format!("is {t}, which is not one of {}", names.join(", "))));
            }
        }
    }
    Ok(())
}

/// A type attribute's value, or its schema default.
fn type_attr(node: &Node, schema: &OpSchema, name: &str) -> Result<DType, VerifyError> {
    if let Some(v) = node.attr(name) {
        return v.as_type().ok_or_else(|| bad_attr(node, name, "must be a type".into()));
    }
    match schema.attr(name).map(|a| a.default) {
        Some(registry::AttrDefault::Type(d)) => Ok(d),
        _ => Err(missing(node, name)),
    }
}

/// Expands argument specs into one dtype per tensor.
fn expand_args(
    node: &Node,
    schema: &OpSchema,
    args: &[registry::ArgSpec],
) -> Result<SmallVec<[DType; 4]>, VerifyError> {
    let mut out = SmallVec::new();
    for arg in args {
        match arg.ty {
            TypeRule::ListAttr(name) => {
                let list = node.attr(name).ok_or_else(|| missing(node, name))?;
                let types =
                    list.as_type_list().ok_or_else(|| bad_attr(node, name, "must be a list of types".into()))?;
                out.extend_from_slice(types);
            }
            rule => {
                let d = match rule {
                    TypeRule::Fixed(d) => d,
                    TypeRule::Attr(name) => type_attr(node, schema, name)?,
                    TypeRule::ListAttr(_) => unreachable!("handled above"),
                };
                let count = match arg.number_attr {
                    None => 1,
                    Some(n) => {
                        let v = node.attr(n).ok_or_else(|| missing(node, n))?;
                        let k = v.as_int().ok_or_else(|| bad_attr(node, n, "must be an int".into()))?;
                        let k =
                            usize::try_from(k).map_err(|_| bad_attr(node, n, format!("is {k}, which is negative")))?;
                        if k > crate::limits::MAX_NODE_ARITY {
                            return Err(bad_attr(
                                node,
                                n,
                                format!("is {k}, more than the {} a node may have", crate::limits::MAX_NODE_ARITY),
                            ));
                        }
                        k
                    }
                };
                out.extend(std::iter::repeat_n(d, count));
            }
        }
    }
    Ok(out)
}

fn input_facts<'a>(node: &Node, info: &'a TypeInfo) -> SmallVec<[InputFacts<'a>; 4]> {
    node.inputs
        .iter()
        .map(|o| {
            let slot = info.slot(*o);
            let t = slot.map(|i| &info.types[i]);
            let resource = t.is_some_and(|t| t.0 == DType::Resource);
            InputFacts {
                dtype: t.map(|t| t.0),
                shape: t.map_or(&registry::UNKNOWN_SHAPE, |t| &t.1),
                value: slot.and_then(|i| info.values[i].as_deref()),
                handle: if resource { info.handles.get(o).map(|h| (h.dtype, &h.shape)) } else { None },
            }
        })
        .collect()
}

fn infer_known(
    graph: &Graph,
    id: NodeId,
    node: &Node,
    schema: &OpSchema,
    info: &mut TypeInfo,
) -> Result<(), VerifyError> {
    check_attrs(node, schema)?;
    let in_types = expand_args(node, schema, schema.inputs)?;
    expect_arity(node, in_types.len())?;
    let (out_types, shapes, values) = {
        let facts = input_facts(node, info);
        check_inputs(graph, node, schema, &in_types, &facts, info)?;
        let out_types = expand_args(node, schema, schema.outputs)?;
        let ctx = InferCtx { node, inputs: &facts, out_types: &out_types };
        let mut shapes = schema.infer_shapes(&ctx).map_err(|message| VerifyError::Shape {
            node: node.name.clone(),
            span: node.span,
            op: node.op.clone(),
            message,
        })?;
        shapes.resize(out_types.len(), Shape::unknown());
        refine_with_output_shapes(node, &mut shapes);
        let values = schema.infer_values(&ctx);
        (out_types, shapes, values)
    };
    propagate_handles(id, node, &out_types, info);
    info.out_counts[id.index()] = Some(out_types.len() as u32);
    info.set_outputs(id, out_types.iter().copied().zip(shapes));
    let start = info.slots[id.index()].0 as usize;
    for (port, v) in values.into_iter().enumerate().take(out_types.len()) {
        info.values[start + port] = v.map(Vec::into_boxed_slice);
    }
    Ok(())
}

/// Checks each data input's dtype (and a resource input's variable dtype).
fn check_inputs(
    graph: &Graph,
    node: &Node,
    schema: &OpSchema,
    in_types: &[DType],
    facts: &[InputFacts<'_>],
    info: &TypeInfo,
) -> Result<(), VerifyError> {
    // The dtype a resource input's variable must have: the op's `dtype`, else its `T`.
    let var_dtype = ["dtype", "T"]
        .into_iter()
        .filter(|_| schema.family == registry::OpFamily::Resource)
        .find(|a| schema.attr(a).is_some_and(|s| s.kind == registry::AttrKind::Type))
        .and_then(|a| node.attr(a).and_then(AttrValue::as_type));
    for (i, (want, f)) in in_types.iter().zip(facts).enumerate() {
        let o = node.inputs[i];
        if let Some(got) = f.dtype {
            if !dtype_fits(*want, got) {
                return Err(dtype_mismatch(graph, node, i, *want, got));
            }
        }
        if let (DType::Resource, Some(h), Some(vd)) = (want, info.handles.get(&o), var_dtype) {
            if h.dtype != vd {
                return Err(VerifyError::VariableDType {
                    node: node.name.clone(),
                    span: node.span,
                    op: node.op.clone(),
                    input: i,
                    variable: graph.name(h.var).to_string(),
                    expected: vd,
                    got: h.dtype,
                });
            }
        }
    }
    Ok(())
}

/// Resource handles: a `VarHandleOp` makes one; identities pass them on.
fn propagate_handles(id: NodeId, node: &Node, out_types: &[DType], info: &mut TypeInfo) {
    match node.op.as_str() {
        "VarHandleOp" => {
            let dtype = node.attr("dtype").and_then(AttrValue::as_type);
            let shape = node.attr("shape").and_then(AttrValue::as_shape).cloned().unwrap_or_default();
            if let Some(dtype) = dtype {
                info.handles.insert(Output { node: id, port: 0 }, Handle { var: id, dtype, shape });
            }
        }
        "Identity" | "IdentityN" | "Snapshot" | "StopGradient" => {
            for (port, o) in node.inputs.iter().enumerate() {
                if out_types.get(port) == Some(&DType::Resource) {
                    if let Some(h) = info.handles.get(o).cloned() {
                        info.handles.insert(Output { node: id, port: port as u32 }, h);
                    }
                }
            }
        }
        _ => {}
    }
}

/// The `_output_shapes` attribute TensorFlow may record.
fn output_shapes_attr(node: &Node) -> Option<&[Shape]> {
    match node.attr("_output_shapes")? {
        AttrValue::List(ListValue::Shape(v)) => Some(v),
        AttrValue::List(ListValue::Empty) => Some(&[]),
        _ => None,
    }
}

/// Makes inferred shapes more specific with `_output_shapes` where the two agree.
fn refine_with_output_shapes(node: &Node, shapes: &mut [Shape]) {
    let Some(recorded) = output_shapes_attr(node) else { return };
    if recorded.len() != shapes.len() {
        return;
    }
    for (s, r) in shapes.iter_mut().zip(recorded) {
        if let Ok(m) = registry::merge_shapes(s, r) {
            *s = m;
        }
    }
}

fn infer_call(
    graph: &Graph,
    id: NodeId,
    node: &Node,
    sig: &crate::Signature,
    info: &mut TypeInfo,
) -> Result<(), VerifyError> {
    let single = |a: &crate::ArgDef| a.number_attr.is_empty() && a.type_list_attr.is_empty();
    let arg_type = |a: &crate::ArgDef| a.dtype.or_else(|| node.attr(&a.type_attr).and_then(AttrValue::as_type));
    if sig.inputs.iter().all(single) {
        expect_arity(node, sig.inputs.len())?;
        for (i, (arg, o)) in sig.inputs.iter().zip(&node.inputs).enumerate() {
            if let (Some(want), Some(got)) = (arg_type(arg), info.output(*o).map(|t| t.0)) {
                if !dtype_fits(want, got) {
                    return Err(VerifyError::DTypeMismatch {
                        node: node.name.clone(),
                        span: node.span,
                        op: node.op.clone(),
                        input: i,
                        producer: graph.output_name(*o),
                        expected: want,
                        got,
                    });
                }
            }
        }
    }
    if !sig.outputs.iter().all(single) {
        return Ok(());
    }
    info.out_counts[id.index()] = Some(sig.outputs.len() as u32);
    let types: Option<Vec<DType>> = sig.outputs.iter().map(arg_type).collect();
    if let Some(types) = types {
        let mut shapes = vec![Shape::unknown(); types.len()];
        refine_with_output_shapes(node, &mut shapes);
        info.set_outputs(id, types.into_iter().zip(shapes));
    }
    Ok(())
}

fn infer_opaque(id: NodeId, node: &Node, info: &mut TypeInfo) {
    if node.op == crate::protocol::SNAPSHOT_OP {
        return infer_snapshot(id, node, info);
    }
    let Some(types) = node.attr("Tout").and_then(AttrValue::as_type_list) else { return };
    let mut shapes = vec![Shape::unknown(); types.len()];
    refine_with_output_shapes(node, &mut shapes);
    info.set_outputs(id, types.iter().copied().zip(shapes));
}

/// The bridge's snapshot: output `i` is the value of the variable behind data input
/// `i`, of the dtype its `dtypes` attribute names and the shape its handle carries
/// (unknown when the handle's `VarHandleOp` is out of sight). Typed statically, a
/// cluster call's signature is known before the first step, so it compiles ahead.
fn infer_snapshot(id: NodeId, node: &Node, info: &mut TypeInfo) {
    let Some(types) = node.attr("dtypes").and_then(AttrValue::as_type_list) else { return };
    let shapes: Vec<Shape> = (0..types.len())
        .map(|i| {
            node.inputs
                .get(i)
                .and_then(|o| info.handles.get(o))
                .filter(|h| h.dtype == types[i])
                .map(|h| h.shape.clone())
                .unwrap_or_default()
        })
        .collect();
    info.out_counts[id.index()] = Some(types.len() as u32);
    info.set_outputs(id, types.iter().copied().zip(shapes));
}

/// A small builder of graphs for the tests of inference, the verifier and the registry.
#[cfg(test)]
pub(crate) mod testing {
    use crate::{AttrValue, Attrs, DType, Graph, Library, RawNode, Shape, Tensor};

    #[derive(Default)]
    pub(crate) struct Builder {
        pub raw: Vec<RawNode>,
        pub library: Library,
    }

    pub(crate) fn ty(d: DType) -> AttrValue {
        AttrValue::Type(d)
    }

    /// A node of `op` with `attrs` and no inputs, for calling a shape function directly.
    pub(crate) fn bare_node(op: &str, attrs: &[(&str, AttrValue)]) -> crate::Node {
        crate::Node::unconnected("n", op, attrs)
    }

    /// A shape attribute; `-1` is an unknown dimension.
    pub(crate) fn shape(dims: &[i64]) -> AttrValue {
        AttrValue::Shape(Shape::with_dims(dims.iter().map(|&d| (d >= 0).then_some(d)).collect()))
    }

    impl Builder {
        pub(crate) fn new() -> Builder {
            Builder::default()
        }

        pub(crate) fn node(&mut self, name: &str, op: &str, inputs: &[&str], attrs: &[(&str, AttrValue)]) -> &mut Self {
            let attrs: Attrs = attrs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
            self.raw.push(RawNode {
                name: name.into(),
                op: op.into(),
                inputs: inputs.iter().map(|s| s.to_string()).collect(),
                attrs,
                device: String::new(),
                span: None,
            });
            self
        }

        /// A `Placeholder`; `-1` dims are unknown, `None` is unknown rank.
        pub(crate) fn input(&mut self, name: &str, d: DType, dims: Option<&[i64]>) -> &mut Self {
            let mut attrs = vec![("dtype", ty(d))];
            if let Some(dims) = dims {
                attrs.push(("shape", shape(dims)));
            }
            self.node(name, "Placeholder", &[], &attrs)
        }

        pub(crate) fn const_i32(&mut self, name: &str, dims: &[usize], v: &[i32]) -> &mut Self {
            let t = Tensor::from_i32(dims.to_vec(), v.to_vec()).expect("test tensor");
            self.node(name, "Const", &[], &[("dtype", ty(DType::Int32)), ("value", AttrValue::Tensor(t))])
        }

        pub(crate) fn const_f32(&mut self, name: &str, dims: &[usize], v: &[f32]) -> &mut Self {
            let t = Tensor::from_f32(dims.to_vec(), v.to_vec()).expect("test tensor");
            self.node(name, "Const", &[], &[("dtype", ty(DType::Float32)), ("value", AttrValue::Tensor(t))])
        }

        pub(crate) fn var(&mut self, name: &str, d: DType, dims: &[i64]) -> &mut Self {
            self.node(name, "VarHandleOp", &[], &[("dtype", ty(d)), ("shape", shape(dims))])
        }

        pub(crate) fn build(&self) -> Graph {
            Graph::from_raw(self.raw.clone(), self.library.clone(), None).expect("test graph builds")
        }
    }

    /// The inferred shape of `name:port`, printed (`[2,?]`), or the error.
    pub(crate) fn shape_of(b: &Builder, out: &str) -> String {
        let g = b.build();
        let (name, port) = out.split_once(':').map_or((out, 0), |(n, p)| (n, p.parse().expect("port")));
        match super::infer(&g) {
            Ok(info) => {
                let o = crate::Output { node: g.find(name).expect("node exists"), port };
                info.output(o).map_or("none".to_string(), |t| t.1.to_string())
            }
            Err(e) => format!("error: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use crate::{AttrValue, DType, ListValue};

    #[test]
    fn seeds_refine_fed_shapes_and_captured_variables_but_never_contradict_the_graph() {
        use crate::{Output, Shape};
        let g = crate::text::parse(
            "p = Placeholder() {dtype = float32, shape = shape[?, 4]}
v = Placeholder() {dtype = resource, shape = shape[]}
w = VarHandleOp() {container = \"\", dtype = float32, shape = shape[2], shared_name = \"w\"}
r = ReadVariableOp(v) {dtype = float32}
s = ReadVariableOp(w) {dtype = float32}
n = Neg(p) {T = float32}",
        )
        .unwrap();
        let id = |name: &str| g.find(name).unwrap();
        let out = |name: &str| Output { node: id(name), port: 0 };
        let shape = |info: &super::TypeInfo, name: &str| info.output(out(name)).unwrap().1.clone();
        let mut seeds = super::Seeds::default();
        seeds.outputs.insert(out("p"), (DType::Float32, vec![2, 4]));
        seeds.variables.insert(id("v"), (DType::Float32, vec![3]));
        let (info, _) = super::infer_partial_seeded(&g, &seeds, None).unwrap();
        assert_eq!(shape(&info, "n"), Shape::known(&[2, 4]));
        assert_eq!(shape(&info, "r"), Shape::known(&[3]));
        assert_eq!(shape(&info, "s"), Shape::known(&[2]));
        // A fed shape the placeholder does not allow, a value of another dtype, a variable
        // whose declared shape differs: the graph's own types stay.
        seeds.outputs.insert(out("p"), (DType::Float32, vec![2, 5]));
        seeds.variables.insert(id("w"), (DType::Float32, vec![7]));
        let (info, _) = super::infer_partial_seeded(&g, &seeds, None).unwrap();
        assert_eq!(shape(&info, "n").dims, Some(vec![None, Some(4)]));
        assert_eq!(shape(&info, "s"), Shape::known(&[2]));
        seeds.outputs.insert(out("p"), (DType::Int32, vec![2, 4]));
        let (info, _) = super::infer_partial_seeded(&g, &seeds, None).unwrap();
        assert_eq!(shape(&info, "n").dims, Some(vec![None, Some(4)]));
    }

    #[test]
    fn a_snapshot_is_typed_from_its_variables_handles() {
        let mut b = Builder::new();
        b.var("v", DType::Float32, &[4, 3]).var("w", DType::Int32, &[-1]).var("u", DType::Float32, &[2]);
        // `u` is declared float32 but the snapshot says int32: its shape is not trusted.
        let dtypes = AttrValue::List(ListValue::Type(vec![DType::Float32, DType::Int32, DType::Int32]));
        b.node("snap", crate::protocol::SNAPSHOT_OP, &["v", "w", "u"], &[("dtypes", dtypes)]);
        assert_eq!(shape_of(&b, "snap:0"), "[4,3]");
        assert_eq!(shape_of(&b, "snap:1"), "[?]");
        assert_eq!(shape_of(&b, "snap:2"), "[*]");
        let g = b.build();
        let info = super::infer(&g).unwrap();
        let snap = g.find("snap").unwrap();
        assert_eq!(
            info.outputs(snap).iter().map(|t| t.0).collect::<Vec<_>>(),
            [DType::Float32, DType::Int32, DType::Int32]
        );
        // Port 3 does not exist.
        b.node("bad", "Identity", &["snap:3"], &[("T", ty(DType::Float32))]);
        assert!(shape_of(&b, "bad").starts_with("error:"), "{}", shape_of(&b, "bad"));
    }
}
