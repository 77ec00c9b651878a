//! The graph: nodes with resolved, typed edges, plus the function library.
//!
//! Invariants a [`Graph`] keeps (checked when it is built by
//! [`Graph::from_raw`] or [`Graph::add_node`]): node names are unique; every
//! data and control input names an existing node. What it does *not* promise
//! is acyclicity, port ranges, arity or dtypes: those are the verifier's
//! (`crate::verify`), so that tools can still load and show a broken graph.

use std::collections::HashMap;
use std::fmt;

use crate::{AttrValue, Attrs, ListValue};

/// Index of a node in its [`Graph`], in creation order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl NodeId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

/// One output of a node: TensorFlow's `node:port`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Output {
    pub node: NodeId,
    pub port: u32,
}

/// A position in a source file, 1-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Span {
    pub line: u32,
    pub column: u32,
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// A node with resolved inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub name: String,
    pub op: String,
    /// Ordered data inputs.
    pub inputs: Vec<Output>,
    /// Control inputs (`^name`), in file order.
    pub control_inputs: Vec<NodeId>,
    pub attrs: Attrs,
    /// The requested device (`NodeDef.device`), often empty.
    pub device: String,
    /// Where the node was defined, when it came from a text file.
    pub span: Option<Span>,
}

impl Node {
    pub fn attr(&self, name: &str) -> Option<&crate::AttrValue> {
        self.attrs.get(name)
    }

    /// A node of `op` with `attrs` and no inputs, outside any graph: what asks a kernel or a
    /// shape function about an op (the runtime's probes, tests).
    pub fn unconnected(name: &str, op: &str, attrs: &[(&str, crate::AttrValue)]) -> Node {
        Node {
            name: name.to_string(),
            op: op.to_string(),
            inputs: Vec::new(),
            control_inputs: Vec::new(),
            attrs: attrs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
            device: String::new(),
            span: None,
        }
    }
}

/// A node as written in a file: inputs are still TensorFlow input strings
/// (`a`, `a:1`, `^a`). Readers produce these; [`Graph::from_raw`] resolves them.
#[derive(Clone, Debug, PartialEq)]
pub struct RawNode {
    pub name: String,
    pub op: String,
    pub inputs: Vec<String>,
    pub attrs: Attrs,
    pub device: String,
    pub span: Option<Span>,
}

/// `VersionDef`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Versions {
    pub producer: i32,
    pub min_consumer: i32,
    pub bad_consumers: Vec<i32>,
}

/// `OpDef.ArgDef`: one input or output of a function signature.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ArgDef {
    pub name: String,
    pub description: String,
    /// A fixed type, or `None` when the type comes from an attribute.
    pub dtype: Option<crate::DType>,
    pub type_attr: String,
    pub number_attr: String,
    pub type_list_attr: String,
    pub is_ref: bool,
}

/// `OpDef.AttrDef`.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct AttrDef {
    pub name: String,
    /// TensorFlow's type string: `type`, `int`, `list(type)`, `func`, …
    pub ty: String,
    pub default: Option<crate::AttrValue>,
    pub allowed_values: Option<crate::AttrValue>,
    pub has_minimum: bool,
    pub minimum: i64,
    pub description: String,
}

/// `OpDef` as used for a function's signature.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Signature {
    pub name: String,
    pub inputs: Vec<ArgDef>,
    pub outputs: Vec<ArgDef>,
    pub control_outputs: Vec<String>,
    pub attrs: Vec<AttrDef>,
    pub is_stateful: bool,
    pub description: String,
}

/// `FunctionDef`. The body keeps TensorFlow's function-body input strings
/// (`arg`, `node:output_arg:index`, `^node`) unresolved; autoclust's own
/// cluster functions use `node:port` (two parts, which TensorFlow never
/// writes inside a function), so the two forms cannot be confused.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct FunctionDef {
    pub signature: Signature,
    pub attrs: Attrs,
    pub nodes: Vec<RawNode>,
    /// Output arg name → `node:output_arg:index` (or `node:port`).
    pub ret: Vec<(String, String)>,
    /// Control output name → node name.
    pub control_ret: Vec<(String, String)>,
}

/// `GradientDef`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct GradientDef {
    pub function_name: String,
    pub gradient_func: String,
}

/// `FunctionDefLibrary`. The functions are shared (`Arc`): every graph instantiated from a
/// function body carries the library its calls resolve in, and copying it per body made
/// memory grow with (bodies × library) — 15 GB for a 30,000-node graph's 379 cluster
/// functions. Cloning a library is a reference count; [`Library::functions_mut`] copies on
/// write.
#[derive(Clone, Debug, Default)]
pub struct Library {
    pub functions: std::sync::Arc<Vec<FunctionDef>>,
    pub gradients: Vec<GradientDef>,
    /// Each function's position by name (the first of a repeated name), built at the first
    /// lookup and shared with the clones that share `functions`; replaced when they are
    /// edited. A linear search per lookup made every pass that asks "is this op a function?"
    /// for each node quadratic once encapsulation adds a function per cluster (2,000
    /// functions at 10⁶ nodes).
    index: std::sync::Arc<std::sync::OnceLock<HashMap<String, usize, foldhash::fast::RandomState>>>,
}

impl PartialEq for Library {
    fn eq(&self, other: &Library) -> bool {
        self.functions == other.functions && self.gradients == other.gradients
    }
}

impl Library {
    pub fn new(functions: Vec<FunctionDef>, gradients: Vec<GradientDef>) -> Library {
        Library { functions: std::sync::Arc::new(functions), gradients, index: Default::default() }
    }
    /// The functions, for editing (copied first if another library shares them).
    pub fn functions_mut(&mut self) -> &mut Vec<FunctionDef> {
        self.index = Default::default();
        std::sync::Arc::make_mut(&mut self.functions)
    }
    pub fn function(&self, name: &str) -> Option<&FunctionDef> {
        let index = self.index.get_or_init(|| {
            let mut index = HashMap::with_capacity_and_hasher(self.functions.len(), Default::default());
            for (i, f) in self.functions.iter().enumerate() {
                index.entry(f.signature.name.clone()).or_insert(i);
            }
            index
        });
        index.get(name).map(|&i| &self.functions[i])
    }
    pub fn is_empty(&self) -> bool {
        self.functions.is_empty() && self.gradients.is_empty()
    }
}

/// Errors building a graph from named nodes.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GraphError {
    #[error("{}duplicate node name '{name}'", at(.span))]
    DuplicateNode { name: String, span: Option<Span> },
    #[error("{}node '{node}': input '{input}' names no node in the graph", at(.span))]
    UnknownInput { node: String, input: String, span: Option<Span> },
    #[error("{}node '{node}': malformed input '{input}'", at(.span))]
    MalformedInput { node: String, input: String, span: Option<Span> },
    #[error("{}node '{node}': data input '{input}' follows a control input", at(.span))]
    DataAfterControl { node: String, input: String, span: Option<Span> },
    /// A `node:port` whose port is past the producer's outputs (when its op says how many).
    #[error(transparent)]
    PortOutOfRange(Box<PortOutOfRange>),
    /// A chain of function calls nested deeper than [`crate::limits::MAX_CALL_DEPTH`]
    /// levels; `site` is `node 'n'` (or `function 'f'` for a chain no node starts),
    /// `chain` the first functions of the longest chain.
    #[error(
        "{}{site}: function calls nested deeper than {} levels ({chain}: {depth} levels)",
        at(.span),
        crate::limits::MAX_CALL_DEPTH
    )]
    CallsTooDeep { site: String, chain: String, depth: usize, span: Option<Span> },
}

impl GraphError {
    /// Where the error is, when the node has a position.
    pub fn span(&self) -> Option<Span> {
        match self {
            GraphError::DuplicateNode { span, .. }
            | GraphError::UnknownInput { span, .. }
            | GraphError::MalformedInput { span, .. }
            | GraphError::DataAfterControl { span, .. }
            | GraphError::CallsTooDeep { span, .. } => *span,
            GraphError::PortOutOfRange(p) => p.span,
        }
    }
}

/// [`GraphError::PortOutOfRange`]: node `node`'s input `input` reads output `port` of
/// `producer`, whose op `op` has `outputs` outputs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}node '{node}': input '{input}' reads output {port} but '{producer}' ({op}) has {outputs} output(s)", at(.span))]
pub struct PortOutOfRange {
    pub node: String,
    pub input: String,
    pub port: u32,
    pub producer: String,
    pub op: String,
    pub outputs: usize,
    pub span: Option<Span>,
}

fn at(span: &Option<Span>) -> String {
    match span {
        Some(s) => format!("{s}: "),
        None => String::new(),
    }
}

/// A dataflow graph.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Graph {
    nodes: Vec<Node>,
    index: NameIndex,
    pub library: Library,
    pub versions: Option<Versions>,
    /// Replaced by a fresh value by every edit of the nodes (see [`Graph::revision`]).
    stamp: Stamp,
    /// The topological order, once asked for; cleared by every edit of the nodes other
    /// than of their attributes (which do not order nodes).
    topo: TopoCache,
}

/// [`Graph::topo_order`]'s result kept between edits: a run of passes asks for it a
/// dozen times between edits (at 10⁶ nodes ~0.1 s each). Not part of equality; a clone
/// shares it.
#[derive(Clone, Default)]
struct TopoCache(std::sync::OnceLock<std::sync::Arc<[NodeId]>>);

impl PartialEq for TopoCache {
    fn eq(&self, _: &TopoCache) -> bool {
        true
    }
}

impl fmt::Debug for TopoCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", if self.0.get().is_some() { "sorted" } else { "unsorted" })
    }
}

/// A number no other graph's node list has had: fresh at construction and after
/// every edit, kept by a clone (whose nodes are the same). Not part of equality.
#[derive(Clone, Copy)]
struct Stamp(u64);

impl Stamp {
    fn fresh() -> Stamp {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Stamp(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}

impl Default for Stamp {
    fn default() -> Stamp {
        Stamp::fresh()
    }
}

impl PartialEq for Stamp {
    fn eq(&self, _: &Stamp) -> bool {
        true
    }
}

impl fmt::Debug for Stamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// A graph as it was at one point (see [`Graph::revision`]). Holds a share of the
/// graph's library, so an edit of the library's functions copies them and shows.
#[derive(Clone, Debug)]
pub struct Revision {
    stamp: u64,
    library: Library,
    versions: Option<Versions>,
}

/// An input string split into its parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputRef<'a> {
    Data { node: &'a str, port: u32 },
    Control { node: &'a str },
}

/// Splits a GraphDef input string: `a` → (a, 0), `a:3` → (a, 3), `^a` → control.
pub fn parse_input(s: &str) -> Option<InputRef<'_>> {
    if let Some(rest) = s.strip_prefix('^') {
        return (!rest.is_empty()).then_some(InputRef::Control { node: rest });
    }
    match s.rsplit_once(':') {
        Some((node, port)) if !node.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            port.parse().ok().map(|port| InputRef::Data { node, port })
        }
        Some(_) => None,
        None => (!s.is_empty()).then_some(InputRef::Data { node: s, port: 0 }),
    }
}

impl Graph {
    pub fn new() -> Graph {
        Graph::default()
    }

    /// Resolves named nodes into a graph. Nodes may refer to nodes defined
    /// later in the list (GraphDefs are not required to be sorted).
    pub fn from_raw(raw: Vec<RawNode>, library: Library, versions: Option<Versions>) -> Result<Graph, GraphError> {
        let _span = tracing::debug_span!("graph_from_raw", nodes = raw.len()).entered();
        let index = name_index(raw.iter().map(|n| (&n.name, n.span)), raw.len())?;
        let resolved = raw.iter().map(|n| resolve_inputs(n, &index)).collect::<Result<Vec<_>, _>>()?;
        let mut nodes = Vec::with_capacity(raw.len());
        for (n, (inputs, control_inputs)) in raw.into_iter().zip(resolved) {
            nodes.push(Node {
                name: n.name,
                op: n.op,
                inputs,
                control_inputs,
                attrs: n.attrs,
                device: n.device,
                span: n.span,
            });
        }
        Ok(Graph { nodes, index, library, versions, stamp: Stamp::fresh(), topo: TopoCache::default() })
    }

    /// A graph of nodes whose inputs are already ids into `nodes` (what [`Graph::from_raw`]
    /// gives after resolving names): only the names are indexed. Fails on a duplicate name
    /// or an input id out of range.
    pub fn from_nodes(nodes: Vec<Node>, library: Library, versions: Option<Versions>) -> Result<Graph, GraphError> {
        let _span = tracing::debug_span!("graph_from_nodes", nodes = nodes.len()).entered();
        let index = name_index(nodes.iter().map(|n| (&n.name, n.span)), nodes.len())?;
        for n in &nodes {
            let ids = n.inputs.iter().map(|o| o.node).chain(n.control_inputs.iter().copied());
            if let Some(bad) = ids.into_iter().find(|id| id.index() >= nodes.len()) {
                return Err(GraphError::UnknownInput { node: n.name.clone(), input: bad.to_string(), span: n.span });
            }
        }
        Ok(Graph { nodes, index, library, versions, stamp: Stamp::fresh(), topo: TopoCache::default() })
    }

    /// The graph as it is now, for [`Graph::unchanged_since`].
    pub fn revision(&self) -> Revision {
        Revision { stamp: self.stamp.0, library: self.library.clone(), versions: self.versions.clone() }
    }

    /// Whether this graph is the one `revision` was taken of (or a clone of it),
    /// with no edit since: no node added, removed, replaced, rewired or given new
    /// attributes (through any `&mut self` method), the same library functions
    /// (never edited: [`Library::functions_mut`] copies them while `revision` shares
    /// them), gradients and versions. `false` can mean an edit that changed nothing
    /// in the end; `true` means the graph is exactly as it was. What the pass driver
    /// uses to verify only graphs a pass changed.
    pub fn unchanged_since(&self, revision: &Revision) -> bool {
        self.stamp.0 == revision.stamp
            && std::sync::Arc::ptr_eq(&self.library.functions, &revision.library.functions)
            && self.library.gradients == revision.library.gradients
            && self.versions == revision.versions
    }

    /// Records an edit of the nodes.
    fn edited(&mut self) {
        self.stamp = Stamp::fresh();
        self.topo = TopoCache::default();
    }

    /// How many outputs node `id` has, when its op says (see [`crate::registry::output_count`]).
    pub fn output_count(&self, id: NodeId) -> Option<usize> {
        let n = self.node(id);
        crate::registry::output_count(&n.op, &n.attrs, &self.library)
    }

    /// Checks that every data input reads an output its producer has, where the producer's
    /// op says how many (an opaque op's ports are not checked). The loaders' check, so no
    /// command works on a `node:port` that cannot exist; `verify` says the same with types.
    pub fn check_ports(&self) -> Result<(), GraphError> {
        let mut counts: Vec<Option<Option<usize>>> = vec![None; self.nodes.len()];
        for n in &self.nodes {
            for &o in &n.inputs {
                let count = *counts[o.node.index()].get_or_insert_with(|| self.output_count(o.node));
                if let Some(outputs) = count.filter(|&c| o.port as usize >= c) {
                    let p = self.node(o.node);
                    return Err(GraphError::PortOutOfRange(Box::new(PortOutOfRange {
                        node: n.name.clone(),
                        input: self.output_name(o),
                        port: o.port,
                        producer: p.name.clone(),
                        op: p.op.clone(),
                        outputs,
                        span: n.span,
                    })));
                }
            }
        }
        Ok(())
    }

    /// Checks that no chain of function calls nests deeper than
    /// [`crate::limits::MAX_CALL_DEPTH`] levels. A node calls the library functions its
    /// op or any of its function attributes (`f`, `then_branch`, `body`, …, also
    /// inside lists and other functions' attributes) names; a function calls what its
    /// body's nodes call. Linear in the library's size and iterative, so any chain can
    /// be measured; recursion (a function reaching itself) is left to the runtime,
    /// which reports it with its cycle.
    pub fn check_call_depth(&self) -> Result<(), GraphError> {
        use crate::limits::MAX_CALL_DEPTH;
        let functions = &self.library.functions;
        let index: HashMap<&str, usize> =
            functions.iter().enumerate().map(|(i, f)| (f.signature.name.as_str(), i)).collect();
        let calls_of = |nodes: &mut dyn Iterator<Item = (&str, &Attrs)>| {
            let mut out: Vec<usize> = Vec::new();
            for (op, attrs) in nodes {
                out.extend(index.get(op));
                let mut values: Vec<&AttrValue> = attrs.values().collect();
                while let Some(v) = values.pop() {
                    let funcs = match v {
                        AttrValue::Func(f) => std::slice::from_ref(f),
                        AttrValue::List(ListValue::Func(fs)) => fs.as_slice(),
                        _ => &[],
                    };
                    for f in funcs {
                        out.extend(index.get(f.name.as_str()));
                        values.extend(f.attrs.values());
                    }
                }
            }
            out.sort_unstable();
            out.dedup();
            out
        };
        let calls: Vec<Vec<usize>> = functions
            .iter()
            .map(|f| calls_of(&mut f.nodes.iter().map(|n| (n.op.as_str(), &n.attrs)).chain([("", &f.attrs)])))
            .collect();
        // depth[f]: functions in the longest chain starting at f (itself included);
        // next[f]: the callee that chain continues with. Post-order, back edges skipped.
        let n = functions.len();
        let (mut depth, mut next, mut state) = (vec![0usize; n], vec![usize::MAX; n], vec![0u8; n]);
        for root in 0..n {
            if state[root] != 0 {
                continue;
            }
            state[root] = 1;
            let mut stack = vec![(root, 0usize)];
            while let Some(top) = stack.last_mut() {
                let (f, k) = *top;
                if let Some(&c) = calls[f].get(k) {
                    top.1 += 1;
                    if state[c] == 0 {
                        state[c] = 1;
                        stack.push((c, 0));
                    }
                } else {
                    let best = calls[f].iter().copied().filter(|&c| state[c] == 2).max_by_key(|&c| depth[c]);
                    depth[f] = 1 + best.map_or(0, |c| depth[c]);
                    next[f] = best.unwrap_or(usize::MAX);
                    state[f] = 2;
                    stack.pop();
                }
            }
        }
        let too_deep = |site: String, start: usize, levels: usize, span: Option<Span>| {
            let mut names = Vec::new();
            let mut f = start;
            while f != usize::MAX && names.len() < 3 {
                names.push(functions[f].signature.name.as_str());
                f = next[f];
            }
            let more = if f != usize::MAX { " -> …" } else { "" };
            GraphError::CallsTooDeep { site, chain: format!("{}{more}", names.join(" -> ")), depth: levels, span }
        };
        for node in &self.nodes {
            let deepest =
                calls_of(&mut std::iter::once((node.op.as_str(), &node.attrs))).into_iter().max_by_key(|&c| depth[c]);
            if let Some(c) = deepest.filter(|&c| depth[c] > MAX_CALL_DEPTH) {
                return Err(too_deep(format!("node '{}'", node.name), c, depth[c], node.span));
            }
        }
        if let Some(f) = (0..n).filter(|&f| depth[f] > MAX_CALL_DEPTH).max_by_key(|&f| depth[f]) {
            let site = format!("function '{}'", functions[f].signature.name);
            return Err(too_deep(site, f, depth[f], None));
        }
        Ok(())
    }

    // In-place edits (issue 19): a pass that changes a few nodes of a large graph
    // edits them where they are instead of rebuilding every node from strings.
    // Each keeps the invariants `from_raw` checks (unique names, every input
    // resolves) and gives the graph `from_raw` would give for the same nodes.

    /// Appends nodes given by name, as [`Graph::from_raw`] resolves them: their
    /// inputs may name existing nodes and each other. Nothing changes on error.
    pub fn append_raw(&mut self, raw: Vec<RawNode>) -> Result<(), GraphError> {
        let base = self.nodes.len();
        let mut fresh: HashMap<&str, NodeId> = HashMap::with_capacity(raw.len());
        for (k, n) in raw.iter().enumerate() {
            if self.index.contains_key(&n.name) || fresh.insert(&n.name, NodeId((base + k) as u32)).is_some() {
                return Err(GraphError::DuplicateNode { name: n.name.clone(), span: n.span });
            }
        }
        let lookup = |name: &str| self.index.get(name).or_else(|| fresh.get(name)).copied();
        let resolved = raw.iter().map(|n| resolve_inputs_with(n, &lookup)).collect::<Result<Vec<_>, _>>()?;
        drop(fresh);
        if !raw.is_empty() {
            self.edited();
        }
        for (n, (inputs, control_inputs)) in raw.into_iter().zip(resolved) {
            self.index.insert(n.name.clone(), NodeId(self.nodes.len() as u32));
            self.nodes.push(Node {
                name: n.name,
                op: n.op,
                inputs,
                control_inputs,
                attrs: n.attrs,
                device: n.device,
                span: n.span,
            });
        }
        Ok(())
    }

    /// Replaces node `id` by `raw` (inputs by name), keeping its position; the
    /// name may change if the new one is free.
    pub fn replace_raw(&mut self, id: NodeId, raw: RawNode) -> Result<(), GraphError> {
        let (inputs, control_inputs) = resolve_inputs_with(&raw, &|name: &str| self.index.get(name).copied())?;
        let old = &self.nodes[id.index()].name;
        if *old != raw.name {
            if self.index.contains_key(&raw.name) {
                return Err(GraphError::DuplicateNode { name: raw.name, span: raw.span });
            }
            self.index.remove(old);
            self.index.insert(raw.name.clone(), id);
        }
        self.edited();
        self.nodes[id.index()] = Node {
            name: raw.name,
            op: raw.op,
            inputs,
            control_inputs,
            attrs: raw.attrs,
            device: raw.device,
            span: raw.span,
        };
        Ok(())
    }

    /// Sets node `id`'s inputs (every id must be a node of the graph). Reuses the
    /// node's vectors: no allocation unless an input list grows.
    pub fn set_inputs(&mut self, id: NodeId, inputs: &[Output], control_inputs: &[NodeId]) {
        let len = self.nodes.len();
        assert!(
            inputs.iter().map(|o| o.node).chain(control_inputs.iter().copied()).all(|p| p.index() < len),
            "set_inputs: an input of {id} does not exist"
        );
        let n = &mut self.nodes[id.index()];
        let mut edited = false;
        if n.inputs != inputs {
            n.inputs.clear();
            n.inputs.extend_from_slice(inputs);
            edited = true;
        }
        if n.control_inputs != control_inputs {
            n.control_inputs.clear();
            n.control_inputs.extend_from_slice(control_inputs);
            edited = true;
        }
        if edited {
            self.edited();
        }
    }

    /// Removes the nodes `remove` marks, keeping the others in order (renumbered,
    /// as `from_raw` over the kept nodes would number them). Fails, changing
    /// nothing, when a kept node has an input from a removed one.
    pub fn remove_nodes(&mut self, remove: &[bool]) -> Result<(), GraphError> {
        let removed = |p: NodeId| remove.get(p.index()).copied().unwrap_or(false);
        if !self.nodes.iter().enumerate().any(|(i, _)| removed(NodeId(i as u32))) {
            return Ok(());
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if removed(NodeId(i as u32)) {
                continue;
            }
            let data = n.inputs.iter().find(|o| removed(o.node)).map(|&o| self.output_name(o));
            let dangling = data.or_else(|| {
                n.control_inputs.iter().find(|&&c| removed(c)).map(|c| format!("^{}", self.nodes[c.index()].name))
            });
            if let Some(input) = dangling {
                return Err(GraphError::UnknownInput { node: n.name.clone(), input, span: n.span });
            }
        }
        self.edited();
        let mut new_id = vec![u32::MAX; self.nodes.len()];
        let mut next = 0u32;
        for (i, slot) in new_id.iter_mut().enumerate() {
            if !removed(NodeId(i as u32)) {
                *slot = next;
                next += 1;
            }
        }
        // The name index is renumbered in one scan of its entries: no name is hashed.
        self.index.retain(|_, id| match new_id[id.index()] {
            u32::MAX => false,
            k => {
                *id = NodeId(k);
                true
            }
        });
        let old = std::mem::take(&mut self.nodes);
        self.nodes.reserve(next as usize);
        for (i, mut n) in old.into_iter().enumerate() {
            if new_id[i] == u32::MAX {
                continue;
            }
            for o in &mut n.inputs {
                o.node = NodeId(new_id[o.node.index()]);
            }
            for c in &mut n.control_inputs {
                *c = NodeId(new_id[c.index()]);
            }
            self.nodes.push(n);
        }
        Ok(())
    }

    /// Adds a node whose inputs already exist. Fails on a duplicate name.
    pub fn add_node(&mut self, node: Node) -> Result<NodeId, GraphError> {
        if self.index.contains_key(&node.name) {
            return Err(GraphError::DuplicateNode { name: node.name, span: node.span });
        }
        let id = NodeId(self.nodes.len() as u32);
        for inp in node.inputs.iter().map(|o| o.node).chain(node.control_inputs.iter().copied()) {
            assert!(inp.index() < self.nodes.len(), "add_node: input {inp} does not exist yet");
        }
        self.index.insert(node.name.clone(), id);
        if self.nodes.len() == self.nodes.capacity() {
            // Grow by an eighth, not double: passes add a few nodes to graphs of 10⁶
            // (160 MB of nodes would become 320 MB for one anchor).
            self.nodes.reserve_exact(self.nodes.len() / 8 + 16);
        }
        self.nodes.push(node);
        self.edited();
        Ok(id)
    }

    /// Converts back to named nodes (inputs as `a`, `a:1`, `^a`).
    pub fn to_raw(&self) -> Vec<RawNode> {
        self.nodes
            .iter()
            .map(|n| RawNode {
                name: n.name.clone(),
                op: n.op.clone(),
                inputs: n
                    .inputs
                    .iter()
                    .map(|o| self.output_name(*o))
                    .chain(n.control_inputs.iter().map(|c| format!("^{}", self.nodes[c.index()].name)))
                    .collect(),
                attrs: n.attrs.clone(),
                device: n.device.clone(),
                span: n.span,
            })
            .collect()
    }

    /// `name` for port 0, `name:port` otherwise — how GraphDef writes inputs.
    pub fn output_name(&self, o: Output) -> String {
        let name = &self.nodes[o.node.index()].name;
        if o.port == 0 {
            name.clone()
        } else {
            format!("{name}:{}", o.port)
        }
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }
    /// Mutable access to a node's attributes and device. Inputs and names are
    /// changed only through rebuilding, so the graph's invariants hold.
    pub fn attrs_mut(&mut self, id: NodeId) -> &mut Attrs {
        // Attributes do not order nodes: the topological order stays.
        self.stamp = Stamp::fresh();
        &mut self.nodes[id.index()].attrs
    }
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
    pub fn node_ids(&self) -> impl DoubleEndedIterator<Item = NodeId> + ExactSizeIterator + '_ {
        (0..self.nodes.len() as u32).map(NodeId)
    }
    pub fn find(&self, name: &str) -> Option<NodeId> {
        self.index.get(name).copied()
    }
    pub fn name(&self, id: NodeId) -> &str {
        &self.nodes[id.index()].name
    }

    /// Every node's data and control predecessors, deduplicated, in input order.
    pub fn predecessors(&self, id: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        let n = &self.nodes[id.index()];
        n.inputs.iter().map(|o| o.node).chain(n.control_inputs.iter().copied())
    }

    /// Which nodes the `roots` depend on through data or control edges, the roots included
    /// (indexed by node): the reverse reachability pruning and feed resolution share. The walk
    /// does not continue past a node for which `cut` holds (a fed node), which is itself kept.
    pub fn ancestors(&self, roots: impl IntoIterator<Item = NodeId>, cut: impl Fn(NodeId) -> bool) -> Vec<bool> {
        let mut seen = vec![false; self.len()];
        let mut stack: Vec<NodeId> = roots.into_iter().collect();
        while let Some(id) = stack.pop() {
            if std::mem::replace(&mut seen[id.index()], true) || cut(id) {
                continue;
            }
            stack.extend(self.predecessors(id).filter(|p| !seen[p.index()]));
        }
        seen
    }

    /// Whether `src → dst` is a loop back edge: TensorFlow's v1 while loops close their
    /// cycle through `NextIteration → Merge`, the one edge every topological order here
    /// drops (inference, verification, the safety analysis, the clusterer's cycle graph,
    /// encapsulation), so such graphs are DAGs. Only that edge: a `NextIteration` feeding
    /// anything else keeps its edge, so a path through it still orders the clusterer.
    pub fn is_back_edge(&self, src: NodeId, dst: NodeId) -> bool {
        matches!(self.nodes[src.index()].op.as_str(), "NextIteration" | "RefNextIteration")
            && matches!(self.nodes[dst.index()].op.as_str(), "Merge" | "RefMerge")
    }

    /// Predecessors over forward edges only: [`Graph::predecessors`] without
    /// the loop back edges ([`Graph::is_back_edge`]).
    pub fn forward_predecessors(&self, id: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        self.predecessors(id).filter(move |p| !self.is_back_edge(*p, id))
    }

    /// Successor lists for every node (data and control edges alike, with
    /// repeats when a node consumes another twice), each in consumer-id order.
    pub fn successors(&self) -> Successors {
        let n = self.nodes.len();
        let mut data = Counting::new(n);
        let mut control = Counting::new(n);
        for node in &self.nodes {
            for o in &node.inputs {
                data.count(o.node.index());
            }
            for c in &node.control_inputs {
                control.count(c.index());
            }
        }
        let (mut data, mut control) = (data.filling((NodeId(0), 0, 0)), control.filling(NodeId(0)));
        for (i, node) in self.nodes.iter().enumerate() {
            let me = NodeId(i as u32);
            for (slot, o) in node.inputs.iter().enumerate() {
                data.fill(o.node.index(), (me, o.port, slot as u32));
            }
            for c in &node.control_inputs {
                control.fill(c.index(), me);
            }
        }
        Successors { data: data.done(), control: control.done() }
    }

    /// A topological order (data and control edges, the loop back edges
    /// `NextIteration → Merge` dropped), deterministic: among ready nodes the one
    /// created first goes first. A cycle is an error naming the nodes on one cycle.
    pub fn topo_order(&self) -> Result<Vec<NodeId>, CycleError> {
        if let Some(order) = self.topo.0.get() {
            return Ok(order.to_vec());
        }
        let order = self.sort()?;
        let _ = self.topo.0.set(order.as_slice().into());
        Ok(order)
    }

    fn sort(&self) -> Result<Vec<NodeId>, CycleError> {
        // Successors in compressed-sparse-row form: two flat arrays instead of
        // a list per node, so a 100,000-node graph sorts without 100,000 allocations.
        let n = self.nodes.len();
        let mut start = vec![0u32; n + 1];
        for i in 0..n {
            for p in self.forward_predecessors(NodeId(i as u32)) {
                start[p.index() + 1] += 1;
            }
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut succ = vec![0u32; start[n] as usize];
        let mut pending = Vec::with_capacity(n);
        for i in 0..n {
            let mut count = 0u32;
            for p in self.forward_predecessors(NodeId(i as u32)) {
                let slot = &mut fill[p.index()];
                succ[*slot as usize] = i as u32;
                *slot += 1;
                count += 1;
            }
            pending.push(count);
        }
        let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<u32>> =
            (0..n as u32).filter(|&i| pending[i as usize] == 0).map(std::cmp::Reverse).collect();
        let mut order = Vec::with_capacity(n);
        while let Some(std::cmp::Reverse(i)) = ready.pop() {
            order.push(NodeId(i));
            for &s in &succ[start[i as usize] as usize..start[i as usize + 1] as usize] {
                let p = &mut pending[s as usize];
                *p -= 1;
                if *p == 0 {
                    ready.push(std::cmp::Reverse(s));
                }
            }
        }
        if order.len() == n {
            return Ok(order);
        }
        Err(CycleError { nodes: self.find_cycle(&pending) })
    }

    /// Walks predecessors among the nodes left with pending inputs until a
    /// node repeats; the repeated stretch is a cycle.
    fn find_cycle(&self, pending: &[u32]) -> Vec<String> {
        let start = pending.iter().position(|&p| p > 0).expect("a cycle leaves a pending node");
        let mut pos: HashMap<u32, usize> = HashMap::new();
        let mut path = Vec::new();
        let mut cur = NodeId(start as u32);
        loop {
            if let Some(&i) = pos.get(&cur.0) {
                // `path` follows predecessor edges; reverse it into edge order and
                // start at the earliest-created node so the message is deterministic.
                let mut ids: Vec<NodeId> = path[i..].iter().rev().copied().collect();
                let first = ids.iter().enumerate().min_by_key(|(_, id)| **id).map(|(k, _)| k).unwrap_or(0);
                ids.rotate_left(first);
                ids.push(ids[0]);
                return ids.into_iter().map(|id| self.name(id).to_string()).collect();
            }
            pos.insert(cur.0, path.len());
            path.push(cur);
            cur = self
                .forward_predecessors(cur)
                .find(|p| pending[p.index()] > 0)
                .expect("a pending node has a pending input");
        }
    }
}

fn resolve_inputs(n: &RawNode, index: &NameIndex) -> Result<(Vec<Output>, Vec<NodeId>), GraphError> {
    resolve_inputs_with(n, &|name: &str| index.get(name).copied())
}

fn resolve_inputs_with(
    n: &RawNode,
    index: &dyn Fn(&str) -> Option<NodeId>,
) -> Result<(Vec<Output>, Vec<NodeId>), GraphError> {
    let mut inputs = Vec::with_capacity(n.inputs.len());
    let mut controls = Vec::new();
    for s in &n.inputs {
        let lookup = |name: &str| {
            index(name).ok_or_else(|| GraphError::UnknownInput { node: n.name.clone(), input: s.clone(), span: n.span })
        };
        match parse_input(s) {
            Some(InputRef::Data { node, port }) => {
                if !controls.is_empty() {
                    return Err(GraphError::DataAfterControl { node: n.name.clone(), input: s.clone(), span: n.span });
                }
                inputs.push(Output { node: lookup(node)?, port });
            }
            Some(InputRef::Control { node }) => controls.push(lookup(node)?),
            None => return Err(GraphError::MalformedInput { node: n.name.clone(), input: s.clone(), span: n.span }),
        }
    }
    Ok((inputs, controls))
}

/// The index of `count` node names, in order (ids `0..count`); fails on the first repeat.
fn name_index<'a>(
    names: impl Iterator<Item = (&'a String, Option<Span>)>,
    count: usize,
) -> Result<NameIndex, GraphError> {
    let mut index = NameIndex::with_capacity_and_hasher(count, Default::default());
    for (i, (name, span)) in names.enumerate() {
        if index.insert(name.clone(), NodeId(i as u32)).is_some() {
            return Err(GraphError::DuplicateNode { name: name.clone(), span });
        }
    }
    Ok(index)
}

/// Node names to ids. foldhash, seeded per process like std's SipHash (so names chosen to
/// collide cannot make loading quadratic), hashes a node name several times faster: a
/// 10⁵-node graph's loading hashes every name and every input reference.
type NameIndex = HashMap<String, NodeId, foldhash::fast::RandomState>;

/// Successor lists computed by [`Graph::successors`].
#[derive(Clone, Debug)]
pub struct Successors {
    /// For each node: (consumer, producer port, consumer input slot).
    pub data: Lists<(NodeId, u32, u32)>,
    /// For each node: nodes with a control input from it.
    pub control: Lists<NodeId>,
}

/// One list per node in two flat arrays (compressed sparse rows): `lists[i]` is node
/// `i`'s slice. A `Vec` per node was two million allocations at 10⁶ nodes, made again by
/// every pass that asks for successors.
#[derive(Clone, Debug, Default)]
pub struct Lists<T> {
    /// `items[start[i]..start[i + 1]]` is list `i`.
    start: Vec<u32>,
    items: Vec<T>,
}

impl<T> std::ops::Index<usize> for Lists<T> {
    type Output = [T];
    fn index(&self, i: usize) -> &[T] {
        &self.items[self.start[i] as usize..self.start[i + 1] as usize]
    }
}

impl<T> Lists<T> {
    /// The number of lists.
    pub fn len(&self) -> usize {
        self.start.len().saturating_sub(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// [`Lists`] being sized: one count per list, then [`Counting::filling`].
struct Counting(Vec<u32>);

impl Counting {
    /// `n` empty lists.
    fn new(n: usize) -> Counting {
        Counting(vec![0; n + 1])
    }

    fn count(&mut self, i: usize) {
        self.0[i + 1] += 1;
    }

    /// Every slot holds `blank` until filled.
    fn filling<T: Clone>(mut self, blank: T) -> Filling<T> {
        for i in 1..self.0.len() {
            self.0[i] += self.0[i - 1];
        }
        let total = self.0.last().copied().unwrap_or(0) as usize;
        Filling {
            next: self.0[..self.0.len().saturating_sub(1)].to_vec(),
            lists: Lists { start: self.0, items: vec![blank; total] },
        }
    }
}

/// [`Lists`] being filled in order, each list's items at its next free slot.
struct Filling<T> {
    next: Vec<u32>,
    lists: Lists<T>,
}

impl<T> Filling<T> {
    fn fill(&mut self, i: usize, item: T) {
        let at = &mut self.next[i];
        self.lists.items[*at as usize] = item;
        *at += 1;
    }

    fn done(self) -> Lists<T> {
        self.lists
    }
}

impl Successors {
    /// Every successor of `id` over data and control edges (with repeats).
    pub fn all(&self, id: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        self.data[id.index()].iter().map(|e| e.0).chain(self.control[id.index()].iter().copied())
    }
}

/// A cycle in a graph that must be a DAG.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("graph has a cycle: {}", .nodes.join(" -> "))]
pub struct CycleError {
    /// The nodes on the cycle, in edge order, the first repeated at the end.
    pub nodes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lookups by name see the library as it is: the first of a repeated name, and again
    /// after an edit (the index is rebuilt), while a clone keeps the functions it shares.
    #[test]
    fn library_lookups_follow_edits() {
        let f = |name: &str, nodes: usize| FunctionDef {
            signature: Signature { name: name.into(), ..Default::default() },
            nodes: (0..nodes).map(|i| raw(&format!("n{i}"), "NoOp", &[])).collect(),
            ..Default::default()
        };
        let mut lib = Library::new(vec![f("a", 1), f("b", 2), f("a", 3)], vec![]);
        assert_eq!(lib.function("a").map(|x| x.nodes.len()), Some(1));
        assert_eq!(lib.function("b").map(|x| x.nodes.len()), Some(2));
        assert!(lib.function("c").is_none());
        let before = lib.clone();
        lib.functions_mut().insert(0, f("b", 4));
        lib.functions_mut().push(f("c", 5));
        assert_eq!(lib.function("b").map(|x| x.nodes.len()), Some(4));
        assert_eq!(lib.function("a").map(|x| x.nodes.len()), Some(1));
        assert_eq!(lib.function("c").map(|x| x.nodes.len()), Some(5));
        assert_eq!(before.function("b").map(|x| x.nodes.len()), Some(2));
        assert!(before.function("c").is_none());
    }

    fn raw(name: &str, op: &str, inputs: &[&str]) -> RawNode {
        RawNode {
            name: name.into(),
            op: op.into(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            attrs: Attrs::new(),
            device: String::new(),
            span: None,
        }
    }

    /// Every edit shows in [`Graph::unchanged_since`]; a call that edits nothing, a
    /// failed edit and a clone do not.
    /// Ancestors follow data and control edges from every root, keep a cut node but not
    /// what only it depends on, and leave unrelated nodes out.
    #[test]
    fn ancestors_follow_data_and_control_edges_up_to_cuts() {
        let g = Graph::from_raw(
            vec![
                raw("a", "Const", &[]),
                raw("b", "Neg", &["a"]),
                raw("c", "NoOp", &["^b"]),
                raw("d", "Neg", &["a"]),
                raw("e", "Const", &[]),
            ],
            Library::default(),
            None,
        )
        .unwrap();
        let names = |seen: Vec<bool>| -> Vec<&str> {
            g.node_ids().filter(|id| seen[id.index()]).map(|id| g.name(id)).collect()
        };
        assert_eq!(names(g.ancestors([NodeId(2)], |_| false)), ["a", "b", "c"]);
        assert_eq!(names(g.ancestors([NodeId(2), NodeId(4)], |id| id == NodeId(1))), ["b", "c", "e"]);
        assert_eq!(names(g.ancestors([NodeId(3), NodeId(3)], |_| false)), ["a", "d"]);
        assert!(names(g.ancestors([], |_| false)).is_empty());
    }

    #[test]
    fn revisions_see_every_edit() {
        let mut g = Graph::from_raw(
            vec![raw("a", "Const", &[]), raw("b", "Neg", &["a"]), raw("c", "Neg", &["b"])],
            Library::default(),
            None,
        )
        .unwrap();
        let r = g.revision();
        assert!(g.unchanged_since(&r) && g.clone().unchanged_since(&r));
        g.set_inputs(NodeId(2), &[Output { node: NodeId(1), port: 0 }], &[]);
        g.remove_nodes(&[false, false, false]).unwrap();
        g.append_raw(Vec::new()).unwrap();
        assert!(g.append_raw(vec![raw("a", "Const", &[])]).is_err());
        assert!(g.remove_nodes(&[false, true, false]).is_err());
        assert!(g.unchanged_since(&r), "no edit");
        let other = Graph::from_raw(g.to_raw(), Library::default(), None).unwrap();
        assert!(!other.unchanged_since(&r), "another graph, even an equal one");
        type Edit = Box<dyn Fn(&mut Graph)>;
        let edits: Vec<Edit> = vec![
            Box::new(|g| g.set_inputs(NodeId(2), &[Output { node: NodeId(0), port: 0 }], &[])),
            Box::new(|g| g.set_inputs(NodeId(2), &[Output { node: NodeId(1), port: 0 }], &[NodeId(0)])),
            Box::new(|g| g.remove_nodes(&[false, false, true]).unwrap()),
            Box::new(|g| g.append_raw(vec![raw("d", "Neg", &["c"])]).unwrap()),
            Box::new(|g| g.replace_raw(NodeId(2), raw("c", "Neg", &["b"])).unwrap()),
            Box::new(|g| {
                let _ = g.attrs_mut(NodeId(0));
            }),
            Box::new(|g| {
                g.add_node(Node { name: "e".into(), ..g.node(NodeId(0)).clone() }).unwrap();
            }),
            Box::new(|g| g.library.functions_mut().clear()),
            Box::new(|g| {
                g.library.gradients.push(GradientDef { function_name: "f".into(), gradient_func: "g".into() })
            }),
            Box::new(|g| g.versions = Some(Versions::default())),
        ];
        for (k, edit) in edits.iter().enumerate() {
            let mut h = g.clone();
            let r = h.revision();
            edit(&mut h);
            assert!(!h.unchanged_since(&r), "edit {k} not seen");
        }
    }

    /// The in-place edits give the graph `from_raw` builds from the edited node list.
    #[test]
    fn in_place_edits_match_a_rebuild() {
        let build = |nodes: Vec<RawNode>| Graph::from_raw(nodes, Library::default(), None).unwrap();
        let mut g = build(vec![
            raw("a", "Const", &[]),
            raw("b", "Neg", &["a"]),
            raw("c", "Neg", &["b", "^a"]),
            raw("d", "AddV2", &["c", "b"]),
        ]);
        g.append_raw(vec![raw("e", "Neg", &["f"]), raw("f", "Const", &["^a"])]).unwrap();
        g.replace_raw(NodeId(3), raw("d", "AddV2", &["e", "c"])).unwrap();
        g.set_inputs(NodeId(2), &[Output { node: NodeId(0), port: 0 }], &[]);
        g.remove_nodes(&[false, true, false, false, false, false]).unwrap();
        let want = build(vec![
            raw("a", "Const", &[]),
            raw("c", "Neg", &["a"]),
            raw("d", "AddV2", &["e", "c"]),
            raw("e", "Neg", &["f"]),
            raw("f", "Const", &["^a"]),
        ]);
        assert_eq!(g, want);
        assert!(matches!(g.append_raw(vec![raw("a", "Const", &[])]), Err(GraphError::DuplicateNode { .. })));
        assert!(matches!(g.remove_nodes(&[true]), Err(GraphError::UnknownInput { .. })));
        assert_eq!(g, want, "a failed edit changes nothing");
    }

    #[test]
    fn ports_are_checked_against_declared_outputs() {
        let mut split = raw("s", "ConcatOffset", &["axis", "x"]);
        split.attrs.insert("N".into(), crate::AttrValue::I(3));
        let nodes = |port: &str| {
            vec![
                raw("x", "Placeholder", &[]),
                raw("axis", "Const", &[]),
                split.clone(),
                raw("y", "Neg", &[port]),
                raw("z", "NoSuchOp", &["x"]),
                raw("w", "Neg", &["z:7"]),
            ]
        };
        let g = Graph::from_raw(nodes("s:2"), Library::default(), None).unwrap();
        assert_eq!(g.output_count(g.find("s").unwrap()), Some(3));
        assert_eq!(g.output_count(g.find("x").unwrap()), Some(1));
        // An opaque op declares nothing: its ports are not checked here.
        assert_eq!(g.output_count(g.find("z").unwrap()), None);
        assert_eq!(g.check_ports(), Ok(()));
        for (port, n) in [("s:3", 3), ("x:4294967295", 1), ("axis:1", 1)] {
            let g = Graph::from_raw(nodes(port), Library::default(), None).unwrap();
            let e = g.check_ports().unwrap_err();
            let producer = port.split(':').next().unwrap();
            assert!(e.to_string().starts_with(&format!("node 'y': input '{port}' reads output")), "{e}");
            assert!(
                e.to_string().contains(&format!("'{producer}'"))
                    && e.to_string().ends_with(&format!("has {n} output(s)")),
                "{e}"
            );
        }
    }

    #[test]
    fn parses_inputs() {
        assert_eq!(parse_input("a"), Some(InputRef::Data { node: "a", port: 0 }));
        assert_eq!(parse_input("a/b:2"), Some(InputRef::Data { node: "a/b", port: 2 }));
        assert_eq!(parse_input("^a"), Some(InputRef::Control { node: "a" }));
        assert_eq!(parse_input(""), None);
        assert_eq!(parse_input("a:x"), None);
        assert_eq!(parse_input("^"), None);
    }

    #[test]
    fn resolves_forward_references_and_orders_topologically() {
        let g = Graph::from_raw(
            vec![raw("c", "Add", &["a", "b:1", "^a"]), raw("a", "X", &[]), raw("b", "Y", &[])],
            Library::default(),
            None,
        )
        .unwrap();
        let order: Vec<&str> = g.topo_order().unwrap().into_iter().map(|i| g.name(i)).collect();
        assert_eq!(order, ["a", "b", "c"]);
        assert_eq!(g.to_raw()[0].inputs, ["a", "b:1", "^a"]);
    }

    #[test]
    fn the_kept_topological_order_follows_edits() {
        let mut g = Graph::from_raw(
            vec![raw("a", "X", &[]), raw("b", "X", &[]), raw("c", "X", &["a"])],
            Library::default(),
            None,
        )
        .unwrap();
        let names = |g: &Graph| g.topo_order().unwrap().into_iter().map(|i| g.name(i).to_string()).collect::<Vec<_>>();
        assert_eq!(names(&g), ["a", "b", "c"]);
        let (a, b) = (g.find("a").unwrap(), g.find("b").unwrap());
        // a now waits for b: a stale order would still put a first.
        g.set_inputs(a, &[], &[g.find("b").unwrap()]);
        assert_eq!(names(&g), ["b", "a", "c"]);
        g.attrs_mut(b).insert("k".into(), crate::AttrValue::I(1));
        assert_eq!(names(&g), ["b", "a", "c"]);
        let d = g.add_node(Node { name: "d".into(), op: "X".into(), ..g.node(b).clone() }).unwrap();
        g.set_inputs(b, &[], &[d]);
        assert_eq!(names(&g), ["d", "b", "a", "c"]);
        let clone = g.clone();
        assert_eq!(names(&clone), names(&g));
    }

    #[test]
    fn successor_lists_in_consumer_order_with_repeats() {
        let g = Graph::from_raw(
            vec![raw("a", "X", &[]), raw("b", "X", &["a", "a:1", "^a"]), raw("c", "X", &["b"]), raw("d", "X", &["^a"])],
            Library::default(),
            None,
        )
        .unwrap();
        let s = g.successors();
        let id = |n: &str| g.find(n).unwrap();
        assert_eq!(s.data.len(), 4);
        assert_eq!(&s.data[id("a").index()], &[(id("b"), 0, 0), (id("b"), 1, 1)]);
        assert_eq!(&s.control[id("a").index()], &[id("b"), id("d")]);
        assert_eq!(&s.data[id("b").index()], &[(id("c"), 0, 0)]);
        assert!(s.data[id("c").index()].is_empty() && s.control[id("d").index()].is_empty());
        assert_eq!(s.all(id("a")).collect::<Vec<_>>(), [id("b"), id("b"), id("b"), id("d")]);
    }

    #[test]
    fn reports_cycle_with_its_nodes() {
        let g = Graph::from_raw(
            vec![raw("a", "X", &["c"]), raw("b", "X", &["a"]), raw("c", "X", &["^b"]), raw("d", "X", &["a"])],
            Library::default(),
            None,
        )
        .unwrap();
        let e = g.topo_order().unwrap_err();
        assert_eq!(e.to_string(), "graph has a cycle: a -> b -> c -> a");
    }

    #[test]
    fn next_iteration_edges_are_back_edges() {
        let g = Graph::from_raw(
            vec![
                raw("enter", "Enter", &[]),
                raw("merge", "Merge", &["enter", "next"]),
                raw("body", "Identity", &["merge"]),
                raw("next", "NextIteration", &["body"]),
            ],
            Library::default(),
            None,
        )
        .unwrap();
        let order: Vec<&str> = g.topo_order().unwrap().into_iter().map(|i| g.name(i)).collect();
        assert_eq!(order, ["enter", "merge", "body", "next"]);
    }

    #[test]
    fn rejects_duplicates_and_unknown_inputs() {
        let e = Graph::from_raw(vec![raw("a", "X", &[]), raw("a", "X", &[])], Library::default(), None).unwrap_err();
        assert!(matches!(e, GraphError::DuplicateNode { .. }));
        let e = Graph::from_raw(vec![raw("a", "X", &["zz:1"])], Library::default(), None).unwrap_err();
        assert_eq!(e.to_string(), "node 'a': input 'zz:1' names no node in the graph");
    }

    /// `levels` functions `f0 … f{levels-1}`, each calling the next (directly, or through
    /// a `PartitionedCall`'s `f` when `partitioned`), and `y = f0(x)` unless `unused`.
    fn call_chain(levels: usize, partitioned: bool, unused: bool) -> String {
        let mut src = String::new();
        for i in 0..levels {
            src.push_str(&format!("function f{i}(a: float32) -> (out: float32) {{\n"));
            if i + 1 == levels {
                src.push_str("  m = Neg(a) {T = float32}\n  return out = m:y:0\n}\n");
            } else if partitioned {
                let next = i + 1;
                src.push_str(&format!(
                    "  m = PartitionedCall(a) {{Tin = [float32], Tout = [float32], f = @f{next}}}\n  return out = m:output:0\n}}\n"
                ));
            } else {
                src.push_str(&format!("  m = f{}(a)\n  return out = m:out:0\n}}\n", i + 1));
            }
        }
        src.push_str("x = Placeholder() {dtype = float32, shape = shape[]}\n");
        if !unused {
            src.push_str("y = f0(x)\n");
        }
        src
    }

    #[test]
    fn call_chains_deeper_than_the_limit_are_refused() {
        use crate::text::parse_graph;
        for partitioned in [false, true] {
            assert_eq!(parse_graph(&call_chain(1000, partitioned, false)).unwrap().check_call_depth(), Ok(()));
            let e = parse_graph(&call_chain(1001, partitioned, false)).unwrap().check_call_depth().unwrap_err();
            assert!(e.span().is_some_and(|s| s.column == 1), "{e}");
            assert!(
                e.to_string().ends_with(
                    "node 'y': function calls nested deeper than 1000 levels (f0 -> f1 -> f2 -> …: 1001 levels)"
                ),
                "{e}"
            );
        }
        // Measured iteratively: 10,000 levels (found by fuzzing) are no problem to measure.
        let e = parse_graph(&call_chain(10_000, false, false)).unwrap().check_call_depth().unwrap_err();
        assert!(e.to_string().contains("(f0 -> f1 -> f2 -> …: 10000 levels)"), "{e}");
        // A chain no node starts is named by its first function.
        let e = parse_graph(&call_chain(1001, true, true)).unwrap().check_call_depth().unwrap_err();
        assert_eq!(
            e.to_string(),
            "function 'f0': function calls nested deeper than 1000 levels (f0 -> f1 -> f2 -> …: 1001 levels)"
        );
        // Recursion is not a depth: the runtime reports it with its cycle.
        let rec = "function f(a: float32) -> (out: float32) {\n  m = f(a)\n  return out = m:out:0\n}\n\
                   x = Placeholder() {dtype = float32, shape = shape[]}\ny = f(x)\n";
        assert_eq!(parse_graph(rec).unwrap().check_call_depth(), Ok(()));
    }
}
