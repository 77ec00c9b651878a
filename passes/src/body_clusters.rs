//! Clusters inside function bodies: the functions a functional `While`,
//! `If` or `Case` (or a call the inliner left alone) runs are clustered and
//! encapsulated like the main graph, so a loop body runs its arithmetic as
//! one compiled call per iteration instead of op by op.
//!
//! What it transforms: every library function named by a function-valued
//! attribute of a node of the graph — or, transitively, of a node of such a
//! function — is instantiated (`_Arg`/`_Retval` around the body), clustered
//! ([`Clusterer::run_partial`]) and encapsulated ([`encapsulate`]); the
//! result is written back under the function's own name and signature, with
//! the new cluster functions added to the library. A function with a
//! polymorphic signature (type attributes), one whose body cannot be
//! instantiated, or one with nothing to cluster is left as it was (the first
//! two with a note naming the function: never silent). The node that calls the function (its
//! attributes included) is never touched.
//!
//! Why it is sound: a body runs against the session's variables one op at a
//! time, and any of its resource handles may alias any other (they are
//! arguments). A body cluster with resource ops (the variable updates in a
//! `tf.cond` branch — every mixed-precision Keras step applies its gradients
//! in one —, a loop body's `assign_add`) runs behind the same bridges as a
//! main-graph cluster, taking the arguments' handles: the safety rule holds
//! whatever the variables, and the bridges read a repeated variable once and
//! publish the last write to it (`crate::encapsulate`, "Function bodies";
//! `runtime::bridge`); a multi-variable update through arguments is never
//! assumed to touch distinct variables. A cluster without resource ops is a
//! pure function of values, and replacing pure nodes by a call of their SSA body
//! changes no value and no order of effects. The body's outputs keep their
//! values (each `_Retval` reads the call's output where it read a member),
//! each control output is anchored by a `NoOp` outside every cluster (so the
//! name the signature lists survives and still waits for what it waited
//! for), and stateful nodes stay where they were. The cycle and safety
//! rules are the main graph's, applied within the body.

use std::collections::{HashMap, HashSet};

use autoclust_graph::function::{fresh_name, instantiate};
use autoclust_graph::{AttrValue, Attrs, FunctionDef, Graph, ListValue, Node, NodeId, Output, RawNode};

use crate::cluster::{ClusterConfig, Clusterer};
use crate::encapsulate::{encapsulate, Bridge, ClusterSpec};
use crate::pipeline::shortfalls;

/// What [`cluster_function_bodies`] did.
#[derive(Clone, Debug, Default)]
pub struct BodyClusters {
    /// The bridge of every cluster encapsulated inside a function body.
    pub bridges: Vec<Bridge>,
    /// Nodes in those clusters.
    pub clustered_nodes: usize,
    /// Nodes of the bodies examined (`_Arg`/`_Retval` excluded).
    pub body_nodes: usize,
    /// Shortfalls, one line per cause, naming the function and the node.
    pub notes: Vec<String>,
    /// Every encapsulated body cluster, with its members' names.
    pub clusters: Vec<BodyCluster>,
}

/// A cluster formed inside a function body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BodyCluster {
    /// The function whose body holds it.
    pub function: String,
    /// The cluster's name (its function is `NAME_fn`).
    pub name: String,
    /// Its members' names in the body, sorted.
    pub nodes: Vec<String>,
}

/// The names of the functions `node`'s attributes call (`f`, `body`, `cond`,
/// `then_branch`, `else_branch`, `branches`, …).
pub(crate) fn called_functions(attrs: &Attrs) -> impl Iterator<Item = &str> {
    attrs.values().flat_map(|a| -> Vec<&str> {
        match a {
            AttrValue::Func(f) => vec![f.name.as_str()],
            AttrValue::List(ListValue::Func(fs)) => fs.iter().map(|f| f.name.as_str()).collect(),
            _ => Vec::new(),
        }
    })
}

/// Clusters the bodies of every function `graph`'s nodes call (module doc),
/// rewriting `graph.library` in place.
pub fn cluster_function_bodies(graph: &mut Graph, config: ClusterConfig) -> BodyClusters {
    let _span = tracing::debug_span!("cluster_function_bodies").entered();
    let mut report = BodyClusters::default();
    let mut queue: Vec<String> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for n in graph.nodes() {
        for f in called_functions(&n.attrs) {
            if seen.insert(f.to_string()) {
                queue.push(f.to_string());
            }
        }
    }
    let compiled = compiled_functions(graph);
    let mut k = 0;
    while k < queue.len() {
        let name = queue[k].clone();
        k += 1;
        if compiled.contains(&name) {
            // A `While`/`If` inside a cluster function also runs it, compiled as it is.
            continue;
        }
        let Some(function) = graph.library.function(&name).cloned() else { continue };
        for n in &function.nodes {
            for f in called_functions(&n.attrs) {
                if seen.insert(f.to_string()) {
                    queue.push(f.to_string());
                }
            }
        }
        if !function.signature.attrs.is_empty() {
            report.body_nodes += function.nodes.len();
            report.notes.push(format!(
                "function '{name}' is not clustered: its signature has type attributes ({}), so its body runs op by op",
                function.signature.attrs.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", ")
            ));
            continue;
        }
        match cluster_body(&function, graph, config.clone()) {
            Ok(Some(done)) => {
                report.body_nodes += function.nodes.len();
                report.clustered_nodes += done.clustered_nodes;
                report.notes.extend(done.notes.into_iter().map(|l| format!("in function '{name}': {l}")));
                report.bridges.extend(done.bridges);
                report.clusters.extend(done.clusters);
                let mut library = done.library;
                if let Some(slot) = library.functions_mut().iter_mut().find(|f| f.signature.name == name) {
                    *slot = done.function;
                }
                graph.library = library;
            }
            Ok(None) => report.body_nodes += function.nodes.len(),
            Err(why) => {
                // Never silent (docs/contract.md): the body still runs, op by op.
                report.notes.push(format!("function '{name}' is not clustered ({why}), so its body runs op by op"));
                report.body_nodes += function.nodes.len();
            }
        }
    }
    report
}

/// The functions that the functions `graph`'s nodes call by op name (cluster functions,
/// whose `While`/`If` members the JIT compiles with their functions as they are) name in
/// their attributes, transitively: clustering such a function would put calls in the body
/// the JIT compiles.
fn compiled_functions(graph: &Graph) -> HashSet<String> {
    let mut out: HashSet<String> = HashSet::new();
    let mut queue: Vec<String> = Vec::new();
    for n in graph.nodes() {
        if let Some(f) = graph.library.function(&n.op) {
            for m in &f.nodes {
                queue.extend(called_functions(&m.attrs).map(str::to_string));
            }
        }
    }
    while let Some(name) = queue.pop() {
        if out.insert(name.clone()) {
            if let Some(f) = graph.library.function(&name) {
                for m in &f.nodes {
                    queue.extend(called_functions(&m.attrs).map(str::to_string));
                }
            }
        }
    }
    out
}

/// One clustered body: the rewritten function and the library holding its
/// cluster functions.
struct Done {
    function: FunctionDef,
    library: autoclust_graph::Library,
    bridges: Vec<Bridge>,
    clustered_nodes: usize,
    notes: Vec<String>,
    clusters: Vec<BodyCluster>,
}

fn cluster_body(function: &FunctionDef, graph: &Graph, config: ClusterConfig) -> Result<Option<Done>, String> {
    let fname = &function.signature.name;
    let mut body = instantiate(function, &graph.library).map_err(|e| e.to_string())?;
    // An argument whose name is also a body node's would make `^name` ambiguous
    // in the rewritten body: leave such a function alone.
    let node_names: HashSet<&str> = function.nodes.iter().map(|n| n.name.as_str()).collect();
    if let Some(a) = function.signature.inputs.iter().find(|a| node_names.contains(a.name.as_str())) {
        return Err(format!("argument '{}' has the name of a node of the body", a.name));
    }
    // Control outputs keep their names: each is anchored outside every cluster.
    let mut taken: HashSet<String> = body.nodes().iter().map(|n| n.name.clone()).collect();
    let mut control_ret = Vec::with_capacity(function.control_ret.len());
    for (out, node) in &function.control_ret {
        let id = body.find(node).ok_or_else(|| format!("control output '{out}' names no node"))?;
        let anchor = fresh_name(&format!("{node}/_autoclust_control"), &mut taken);
        // `_XlaCompile = false` keeps the anchor itself out of the clusters (a kept-out
        // design choice, no note): a `NoOp` is compilable, and one waiting on a read whose
        // value feeds a cluster would join it and leave the control output naming a node
        // that only the cluster function holds.
        let mut attrs = Attrs::new();
        attrs.insert("_XlaCompile".into(), AttrValue::B(false));
        body.add_node(Node {
            name: anchor.clone(),
            op: "NoOp".into(),
            inputs: vec![],
            control_inputs: vec![id],
            attrs,
            device: String::new(),
            span: None,
        })
        .map_err(|e| e.to_string())?;
        control_ret.push((out.clone(), anchor));
    }
    let clustering = Clusterer::new(config).run_partial(&body).map_err(|e| e.to_string())?;
    let mut notes = shortfalls(&body, &clustering);
    if clustering.clusters.is_empty() {
        return Ok(None);
    }
    let specs: Vec<ClusterSpec> = clustering
        .clusters
        .iter()
        .map(|c| ClusterSpec { name: fresh_name(&format!("{fname}_{}", c.name), &mut taken), nodes: c.nodes.clone() })
        .collect();
    let encapsulated = encapsulate(&body, &specs).map_err(|e| e.to_string())?;
    if encapsulated.bridges.is_empty() {
        return Ok(None);
    }
    for d in &encapsulated.declustered {
        notes.push(format!(
            "cluster '{}' is not encapsulated: variable '{}' is reached through two handles",
            d.cluster, d.variable
        ));
    }
    let encapsulated_specs: Vec<&ClusterSpec> =
        specs.iter().filter(|s| encapsulated.bridges.iter().any(|b| b.cluster == s.name)).collect();
    let clustered_nodes = encapsulated_specs.iter().map(|s| s.nodes.len()).sum();
    let clusters = encapsulated_specs
        .iter()
        .map(|s| {
            let mut nodes: Vec<String> = s.nodes.iter().map(|&n| body.name(n).to_string()).collect();
            nodes.sort_unstable();
            BodyCluster { function: fname.clone(), name: s.name.clone(), nodes }
        })
        .collect();
    let mut rewritten = to_function_def(&encapsulated.graph, function)?;
    rewritten.control_ret = control_ret;
    Ok(Some(Done {
        function: rewritten,
        library: encapsulated.graph.library.clone(),
        bridges: encapsulated.bridges,
        clustered_nodes,
        notes,
        clusters,
    }))
}

/// Writes an instantiated (and rewritten) body back as `original`'s
/// FunctionDef: same signature and attributes, `_Arg` outputs spelled by the
/// argument's name, every other value `node:port`.
pub(crate) fn to_function_def(body: &Graph, original: &FunctionDef) -> Result<FunctionDef, String> {
    let index = |id: NodeId| body.node(id).attr("index").and_then(AttrValue::as_int);
    let mut arg_name: HashMap<NodeId, &str> = HashMap::new();
    for id in body.node_ids().filter(|&id| body.node(id).op == "_Arg") {
        let i = index(id).and_then(|i| usize::try_from(i).ok()).ok_or("malformed _Arg index")?;
        let arg = original.signature.inputs.get(i).ok_or("_Arg index out of range")?;
        arg_name.insert(id, &arg.name);
    }
    let data = |o: &Output| -> String {
        match arg_name.get(&o.node) {
            Some(a) => a.to_string(),
            None => format!("{}:{}", body.name(o.node), o.port),
        }
    };
    let control = |c: &NodeId| -> String {
        match arg_name.get(c) {
            Some(a) => format!("^{a}"),
            None => format!("^{}", body.name(*c)),
        }
    };
    let mut nodes = Vec::with_capacity(body.len());
    let mut ret = Vec::with_capacity(original.signature.outputs.len());
    for id in body.node_ids() {
        let n = body.node(id);
        match n.op.as_str() {
            "_Arg" => {}
            "_Retval" => {
                let i = index(id).and_then(|i| usize::try_from(i).ok()).ok_or("malformed _Retval index")?;
                let out = original.signature.outputs.get(i).ok_or("_Retval index out of range")?;
                ret.push((out.name.clone(), data(&n.inputs[0])));
            }
            _ => nodes.push(RawNode {
                name: n.name.clone(),
                op: n.op.clone(),
                inputs: n.inputs.iter().map(data).chain(n.control_inputs.iter().map(control)).collect(),
                attrs: n.attrs.clone(),
                device: n.device.clone(),
                span: n.span,
            }),
        }
    }
    Ok(FunctionDef {
        signature: original.signature.clone(),
        attrs: original.attrs.clone(),
        nodes,
        ret,
        control_ret: original.control_ret.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// for i in 0..n: v += float(i); s = tanh(s * 2 + 1)
    const LOOP: &str = "v = VarHandleOp() {container = \"\", dtype = float32, shape = shape[], shared_name = \"v\"}
n = Placeholder() {dtype = int32, shape = shape[]}
zero = Const() {dtype = int32, value = int32[]{0}}
s0 = Const() {dtype = float32, value = float32[]{1.0}}
loop = While(zero, s0, v, n) {T = [int32, float32, resource, int32], cond = @cond, body = @body, parallel_iterations = 10}
function cond(i: int32, s: float32, h: resource, n: int32) -> (c: bool) {
  l = Less(i, n) {T = int32}
  return c = l:z:0
}
function body(i: int32, s: float32, h: resource, n: int32) -> (i2: int32, s2: float32, h2: resource, n2: int32) stateful {
  f = Cast(i) {SrcT = int32, DstT = float32}
  add = AssignAddVariableOp(h, f:y:0) {dtype = float32}
  one = Const() {dtype = int32, value = int32[]{1}}
  next = AddV2(i, one:output:0) {T = int32}
  two = Const() {dtype = float32, value = float32[]{2.0}}
  dbl = Mul(s, two:output:0) {T = float32}
  onef = Const() {dtype = float32, value = float32[]{1.0}}
  inc = AddV2(dbl:z:0, onef:output:0) {T = float32}
  t = Tanh(inc:z:0) {T = float32}
  return i2 = next:z:0
  return s2 = t:y:0
  return h2 = h
  return n2 = n
  control_return done = add
}
";

    fn parse(src: &str) -> Graph {
        autoclust_graph::text::parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"))
    }

    #[test]
    fn loop_bodies_get_clusters_behind_bridges_and_keep_their_signature() {
        let mut g = parse(LOOP);
        let before = g.library.function("body").unwrap().clone();
        let report = cluster_function_bodies(&mut g, ClusterConfig::default());
        let body = g.library.function("body").unwrap();
        assert_eq!(body.signature, before.signature);
        // The float arithmetic became a cluster, and so did the variable update, behind
        // bridges that take the body's resource argument.
        let calls: Vec<&RawNode> = body.nodes.iter().filter(|n| g.library.function(&n.op).is_some()).collect();
        assert!(!calls.is_empty(), "{body:#?}");
        assert!(!body.nodes.iter().any(|n| n.op == "AssignAddVariableOp"), "{body:#?}");
        assert!(!body.nodes.iter().any(|n| n.op == "Tanh"), "Tanh should be inside a cluster");
        let bridged: Vec<&Bridge> = report.bridges.iter().filter(|b| b.write_back.is_some()).collect();
        assert_eq!(bridged.len(), 1, "{report:?}");
        for b in &report.bridges {
            assert!(g.library.function(&b.function).is_some());
        }
        let node = |name: &str| body.nodes.iter().find(|n| n.name == name).unwrap();
        let (snapshot, write_back) =
            (bridged[0].snapshot.as_deref().unwrap(), bridged[0].write_back.as_deref().unwrap());
        assert_eq!(node(snapshot).inputs[0], "h");
        assert_eq!(node(write_back).inputs[0], "h");
        assert!(report.clustered_nodes >= 4, "{report:?}");
        // The control output still names a node of the body, which waits for the update's
        // write-back.
        let (_, anchor) = &body.control_ret[0];
        assert_eq!(node(anchor).inputs, vec![format!("^{write_back}")]);
        // The rewritten body instantiates, and the loop node is untouched.
        autoclust_graph::function::instantiate(body, &g.library).unwrap();
        assert_eq!(g.node(g.find("loop").unwrap()).attrs, parse(LOOP).node(parse(LOOP).find("loop").unwrap()).attrs);
    }

    /// A control output on a read whose value feeds the body's cluster (TF2's `while`
    /// bodies list their `ReadVariableOp`s as control outputs): the read joins the cluster
    /// (through the snapshot), and the anchor stays a node of the body, waiting on the
    /// cluster, in no cluster function.
    #[test]
    fn a_control_output_on_a_read_feeding_a_cluster_stays_in_the_body() {
        let src = "v = VarHandleOp() {container = \"\", dtype = float32, shape = shape[], shared_name = \"v\"}
n = Placeholder() {dtype = int32, shape = shape[]}
zero = Const() {dtype = int32, value = int32[]{0}}
s0 = Const() {dtype = float32, value = float32[]{1.0}}
loop = While(zero, s0, v, n) {T = [int32, float32, resource, int32], cond = @cond, body = @body}
function cond(i: int32, s: float32, h: resource, n: int32) -> (c: bool) {
  l = Less(i, n) {T = int32}
  return c = l:z:0
}
function body(i: int32, s: float32, h: resource, n: int32) -> (i2: int32, s2: float32, h2: resource, n2: int32) stateful {
  r = ReadVariableOp(h) {dtype = float32}
  m = Mul(s, r:value:0) {T = float32}
  t = Tanh(m:z:0) {T = float32}
  one = Const() {dtype = int32, value = int32[]{1}}
  next = AddV2(i, one:output:0) {T = int32}
  return i2 = next:z:0
  return s2 = t:y:0
  return h2 = h
  return n2 = n
  control_return read = r
}
";
        let mut g = parse(src);
        let report = cluster_function_bodies(&mut g, ClusterConfig::default());
        assert!(!report.bridges.is_empty(), "{report:?}");
        let body = g.library.function("body").unwrap();
        let (_, anchor) = &body.control_ret[0];
        let node = body.nodes.iter().find(|n| &n.name == anchor).unwrap_or_else(|| panic!("{body:#?}"));
        let reader = report.bridges.iter().find(|b| b.snapshot.is_some()).unwrap_or_else(|| panic!("{report:?}"));
        assert_eq!(node.inputs, vec![format!("^{}", reader.call)]);
        for b in &report.bridges {
            let f = g.library.function(&b.function).unwrap();
            assert!(f.nodes.iter().all(|n| &n.name != anchor), "the anchor joined {}", b.function);
        }
        autoclust_graph::function::instantiate(body, &g.library).unwrap();
    }

    #[test]
    fn bodies_left_unclustered_are_noted_by_name() {
        let src = "x = Placeholder() {dtype = float32, shape = shape[]}
c = PartitionedCall(x) {Tin = [float32], Tout = [float32], f = @poly{T = float32}}
d = PartitionedCall(x) {Tin = [float32], Tout = [float32], f = @clash}
function poly(a: T) -> (b: T) attrs {T: type} {
  n = Neg(a) {T = float32}
  t = Tanh(n:y:0) {T = float32}
  return b = t:y:0
}
function clash(n: float32) -> (b: float32) {
  n = Neg(n) {T = float32}
  t = Tanh(n:y:0) {T = float32}
  return b = t:y:0
}
";
        let mut g = parse(src);
        let before = g.library.clone();
        let report = cluster_function_bodies(&mut g, ClusterConfig::default());
        assert_eq!(g.library, before);
        assert_eq!(
            report.notes,
            [
                "function 'poly' is not clustered: its signature has type attributes (T), so its body runs op by op",
                "function 'clash' is not clustered (argument 'n' has the name of a node of the body), so its body \
                 runs op by op",
            ]
        );
    }

    #[test]
    fn nothing_to_cluster_leaves_the_library_alone() {
        let src = "x = Placeholder() {dtype = float32, shape = shape[]}
c = StatefulPartitionedCall(x) {Tin = [float32], Tout = [float32], f = @f}
function f(a: float32) -> (b: float32) {
  n = Neg(a) {T = float32}
  return b = n:y:0
}
";
        let mut g = parse(src);
        let before = g.library.clone();
        let report = cluster_function_bodies(&mut g, ClusterConfig::default());
        assert!(report.bridges.is_empty());
        assert_eq!(g.library, before);
    }
}
