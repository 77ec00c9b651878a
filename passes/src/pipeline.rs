//! The clustered-run pipeline: what `autoclust run` (and `bench`) do to a
//! graph before running it clustered, in one place.
//!
//! 0. **Inline** every function call ([`crate::inline`]), as TensorFlow's
//!    function optimizer does before clustering.
//! 1. **Prune** to what the fetches and targets need (every `VarHandleOp`
//!    is kept, so every variable still exists): a cluster never runs a node
//!    the request does not need.
//! 2. **Cluster** the pruned graph ([`Clusterer`]).
//! 3. **Anchor**: each fetch gets an `Identity` node and each target a
//!    `NoOp` (control edge) *outside* every cluster, added before
//!    encapsulation. A fetched value computed inside a cluster is then "used
//!    outside", so encapsulation makes it an output of the call, and a
//!    target inside a cluster becomes "wait for the cluster's exit". The
//!    caller fetches and targets the anchors instead.
//! 4. **Encapsulate** each cluster into snapshot → call → write-back
//!    ([`encapsulate`]).
//! 5. **Record origins** on the bridge nodes, so the runtime can name the
//!    user's nodes in errors: `_autoclust_origins` / `_autoclust_origin_ops`
//!    list, per variable of a snapshot, the member that first reads it, and
//!    per variable of a write-back, the member that last writes it;
//!    `_autoclust_validate_shape` says, per written variable, whether its
//!    first writer in the cluster requires the new value to have the
//!    variable's current shape (`AssignVariableOp` only with
//!    `validate_shape = true`; every read-modify-write op always), which is
//!    the check the plain executor's kernel makes.
//!
//! Why it is sound: inlining keeps every order the call imposed
//! ([`crate::inline`]); pruning removes only nodes no fetch, target or variable
//! depends on (the plain executor would not run them either); anchors are
//! `Identity`/`NoOp` nodes that change no value; encapsulation's soundness
//! is argued in [`crate::encapsulate`]; the origin attributes are
//! annotations read only to validate and to word errors.

use std::collections::HashMap;

use autoclust_graph::effects::resource_kind;
use autoclust_graph::{AttrValue, Graph, GraphError, ListValue, Node, NodeId, Output};

use autoclust_graph::infer::attr_output_dtypes;

use crate::cluster::{ClusterConfig, ClusterError, Clusterer, Clustering, Refusal};
use crate::encapsulate::{encapsulate, Bridge, ClusterSpec, Declustered, EncapsulateError};

pub use autoclust_graph::protocol::{ORIGINS_ATTR, ORIGIN_OPS_ATTR, VALIDATE_SHAPE_ATTR};

/// Why a graph cannot run clustered (the caller runs the plain executor instead).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PipelineError {
    #[error("feed of '{0}', which is not a Placeholder")]
    FeedNotPlaceholder(String),
    #[error("'{0}' does not survive pruning")]
    Pruned(String),
    /// Nothing to cluster; `notes` are the shortfalls that may be why (see [`ClusteredProgram::notes`]).
    #[error("no clusters")]
    NoClusters { notes: Vec<String> },
    #[error(transparent)]
    Graph(#[from] GraphError),
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error(transparent)]
    Encapsulate(#[from] EncapsulateError),
}

/// An encapsulated graph and the anchors standing for the request.
#[derive(Clone, Debug)]
pub struct ClusteredProgram {
    pub graph: Graph,
    /// The `Identity` node standing for each fetch (fetch its port 0).
    pub fetch_anchors: Vec<String>,
    /// The `NoOp` node standing for each target.
    pub target_anchors: Vec<String>,
    /// The clusters that were encapsulated, by name.
    pub clusters: Vec<String>,
    /// Clusters left unencapsulated (see [`crate::encapsulate`]).
    pub declustered: Vec<Declustered>,
    /// The bridge of every encapsulated cluster (its function's name included).
    pub bridges: Vec<Bridge>,
    /// Nodes in the encapsulated clusters.
    pub clustered_nodes: usize,
    /// Nodes of the pruned graph (what the request runs), anchors excluded.
    pub total_nodes: usize,
    /// Where the program falls short of what the graph allows, one line per
    /// cause naming the node (without the `note: ` prefix the CLI adds):
    /// nodes declined because their types could not be worked out, clusters
    /// left unencapsulated. Nodes kept out by design are not listed.
    pub notes: Vec<String>,
}

/// Runs the pipeline (module doc) for a request on `graph`: `feeds` are the
/// fed outputs (each must be a `Placeholder`'s), `fetches` and `targets` the
/// requested outputs and nodes, all ids of `graph`.
pub fn clustered_program(
    graph: &Graph,
    feeds: &[Output],
    fetches: &[Output],
    targets: &[NodeId],
    config: ClusterConfig,
) -> Result<ClusteredProgram, PipelineError> {
    let _span = tracing::debug_span!("clustered_program", nodes = graph.len()).entered();
    for o in feeds {
        let op = graph.node(o.node).op.as_str();
        if op != "Placeholder" && op != "PlaceholderWithDefault" {
            return Err(PipelineError::FeedNotPlaceholder(graph.name(o.node).to_string()));
        }
    }
    // Function calls become their bodies first (TensorFlow's function optimizer
    // does the same before clustering): clusters no longer stop at every call.
    // Inlining keeps every node name of the caller (the call stays as an
    // `IdentityN` of its results), so the request carries over by name.
    let inlined;
    let (graph, fetches, targets) = if graph.nodes().iter().any(|n| crate::inline::is_call(graph, n)) {
        let (g, report) = crate::inline::inline_calls(graph)?;
        tracing::debug!(inlined = report.inlined, "inlined function calls");
        inlined = g;
        let by_name = |o: &Output| -> Result<Output, PipelineError> {
            let name = graph.name(o.node);
            let node = inlined.find(name).ok_or_else(|| PipelineError::Pruned(name.to_string()))?;
            Ok(Output { node, port: o.port })
        };
        let fetches = fetches.iter().map(by_name).collect::<Result<Vec<_>, _>>()?;
        let targets = targets
            .iter()
            .map(|&t| by_name(&Output { node: t, port: 0 }).map(|o| o.node))
            .collect::<Result<Vec<_>, _>>()?;
        (&inlined, fetches, targets)
    } else {
        (graph, fetches.to_vec(), targets.to_vec())
    };
    let (fetches, targets) = (&fetches[..], &targets[..]);
    let mut pruned = prune(graph, fetches, targets)?;
    let total_nodes = pruned.len();
    let clustering = Clusterer::new(config.clone()).run_partial(&pruned)?;
    let mut notes = shortfalls(&pruned, &clustering);
    let specs: Vec<ClusterSpec> =
        clustering.clusters.iter().map(|c| ClusterSpec { name: c.name.clone(), nodes: c.nodes.clone() }).collect();
    let fetch_anchors = fetches
        .iter()
        .enumerate()
        .map(|(k, o)| {
            let name = graph.name(o.node);
            let node = pruned.find(name).ok_or_else(|| PipelineError::Pruned(name.to_string()))?;
            let anchor = fresh_name(&pruned, &format!("_autoclust_fetch_{k}"));
            let mut identity = anchor_node(&anchor, "Identity", vec![Output { node, port: o.port }], vec![]);
            if let Some(t) = attr_output_dtypes(pruned.node(node)).and_then(|ts| ts.get(o.port as usize).copied()) {
                identity.attrs.insert("T".into(), AttrValue::Type(t));
            }
            pruned.add_node(identity)?;
            Ok(anchor)
        })
        .collect::<Result<Vec<_>, PipelineError>>()?;
    let target_anchors = targets
        .iter()
        .enumerate()
        .map(|(k, &t)| {
            let name = graph.name(t);
            let node = pruned.find(name).ok_or_else(|| PipelineError::Pruned(name.to_string()))?;
            let anchor = fresh_name(&pruned, &format!("_autoclust_target_{k}"));
            pruned.add_node(anchor_node(&anchor, "NoOp", vec![], vec![node]))?;
            Ok(anchor)
        })
        .collect::<Result<Vec<_>, PipelineError>>()?;
    let mut encapsulated = encapsulate(&pruned, &specs)?;
    record_origins(&pruned, &specs, &mut encapsulated.graph, &encapsulated.bridges);
    tracing::debug!(
        clusters = encapsulated.bridges.len(),
        declustered = encapsulated.declustered.len(),
        "clustered for run"
    );
    for d in &encapsulated.declustered {
        notes.push(format!(
            "cluster '{}' is not encapsulated: variable '{}' is reached through two handles ('{}' and '{}')",
            d.cluster, d.variable, d.handles.0, d.handles.1
        ));
    }
    let clustered_nodes: usize =
        specs.iter().filter(|s| encapsulated.bridges.iter().any(|b| b.cluster == s.name)).map(|s| s.nodes.len()).sum();
    // The bodies of loops, branches and the calls left in place get their own (pure) clusters.
    let bodies = crate::body_clusters::cluster_function_bodies(&mut encapsulated.graph, config);
    notes.extend(bodies.notes);
    let mut bridges = encapsulated.bridges;
    bridges.extend(bodies.bridges);
    if bridges.is_empty() {
        return Err(PipelineError::NoClusters { notes });
    }
    Ok(ClusteredProgram {
        graph: encapsulated.graph,
        fetch_anchors,
        target_anchors,
        clusters: bridges.iter().map(|b| b.cluster.clone()).collect(),
        declustered: encapsulated.declustered,
        bridges,
        clustered_nodes: clustered_nodes + bodies.clustered_nodes,
        total_nodes: total_nodes + bodies.body_nodes,
        notes,
    })
}

/// One note per node the clusterer declined for a shortfall of the analysis
/// ([`NotCompilable::is_shortfall`]), in node order.
pub fn shortfalls(graph: &Graph, clustering: &Clustering) -> Vec<String> {
    clustering
        .explanations
        .iter()
        .filter_map(|r| match r {
            Refusal::NotCompilable { node, reason } if reason.is_shortfall() => {
                let n = graph.node(*node);
                Some(format!("node '{}' ({}) is not clustered: {reason}", n.name, n.op))
            }
            _ => None,
        })
        .collect()
}

/// `graph` without the nodes no fetch, target or `VarHandleOp` needs (all
/// of it when nothing is requested).
pub fn prune(graph: &Graph, fetches: &[Output], targets: &[NodeId]) -> Result<Graph, GraphError> {
    let mut needed = vec![fetches.is_empty() && targets.is_empty(); graph.len()];
    let mut stack: Vec<NodeId> = fetches.iter().map(|o| o.node).chain(targets.iter().copied()).collect();
    stack.extend(graph.node_ids().filter(|&id| autoclust_graph::effects::names_variable(graph.node(id))));
    while let Some(id) = stack.pop() {
        if std::mem::replace(&mut needed[id.index()], true) {
            continue;
        }
        stack.extend(graph.predecessors(id).filter(|p| !needed[p.index()]));
    }
    // Renumbered as `from_raw` over the kept nodes would, without re-resolving every input.
    let mut pruned = graph.clone();
    let remove: Vec<bool> = needed.iter().map(|&k| !k).collect();
    pruned.remove_nodes(&remove)?;
    Ok(pruned)
}

fn fresh_name(g: &Graph, base: &str) -> String {
    let mut name = base.to_string();
    let mut k = 0;
    while g.find(&name).is_some() {
        k += 1;
        name = format!("{base}_{k}");
    }
    name
}

fn anchor_node(name: &str, op: &str, inputs: Vec<Output>, control_inputs: Vec<NodeId>) -> Node {
    Node {
        name: name.to_string(),
        op: op.into(),
        inputs,
        control_inputs,
        attrs: Default::default(),
        device: String::new(),
        span: None,
    }
}

/// Whether a write by `node` requires the value to keep the variable's shape
/// (what the plain executor's kernel checks).
fn validates_shape(node: &Node) -> bool {
    match node.op.as_str() {
        "AssignVariableOp" => node.attr("validate_shape").and_then(AttrValue::as_bool).unwrap_or(false),
        _ => true,
    }
}

/// Writes the origin attributes (module doc, step 5) on every bridge node.
fn record_origins(pruned: &Graph, specs: &[ClusterSpec], out: &mut Graph, bridges: &[crate::encapsulate::Bridge]) {
    let Ok(order) = pruned.topo_order() else { return };
    let mut position = vec![usize::MAX; pruned.len()];
    for (i, &id) in order.iter().enumerate() {
        position[id.index()] = i;
    }
    let spec_of: HashMap<&str, &ClusterSpec> = specs.iter().map(|s| (s.name.as_str(), s)).collect();
    for bridge in bridges {
        let Some(spec) = spec_of.get(bridge.cluster.as_str()) else { continue };
        let mut ordered: Vec<NodeId> = spec.nodes.clone();
        ordered.sort_by_key(|id| position[id.index()]);
        // The members touching the handle named `handle`, with how they touch it.
        let users = |handle: &str| -> Vec<(NodeId, bool, bool)> {
            let Some(h) = pruned.find(handle) else { return Vec::new() };
            ordered
                .iter()
                .filter(|&&m| pruned.node(m).inputs.iter().any(|i| i.node == h))
                .filter_map(|&m| {
                    let kind = resource_kind(pruned.node(m), &pruned.library)?;
                    Some((m, kind.reads(), kind.writes()))
                })
                .collect()
        };
        if let Some(id) = bridge.snapshot.as_deref().and_then(|n| out.find(n)) {
            let n = out.node(id).inputs.len();
            let mut names = Vec::with_capacity(n);
            let mut ops = Vec::with_capacity(n);
            for h in handle_names(out, id, n) {
                let reader = users(&h).into_iter().find(|u| u.1).map(|u| u.0);
                names.push(reader.map(|r| pruned.name(r).to_string()).unwrap_or_default());
                ops.push(reader.map(|r| pruned.node(r).op.clone()).unwrap_or_default());
            }
            set_origins(out, id, names, ops, None);
        }
        if let Some(id) = bridge.write_back.as_deref().and_then(|n| out.find(n)) {
            let n = out.node(id).inputs.len() / 2;
            let (mut names, mut ops, mut validate) = (Vec::new(), Vec::new(), Vec::new());
            for h in handle_names(out, id, n) {
                let writers: Vec<NodeId> = users(&h).into_iter().filter(|u| u.2).map(|u| u.0).collect();
                let last = writers.last().copied();
                names.push(last.map(|r| pruned.name(r).to_string()).unwrap_or_default());
                ops.push(last.map(|r| pruned.node(r).op.clone()).unwrap_or_default());
                validate.push(writers.first().is_some_and(|&w| validates_shape(pruned.node(w))));
            }
            set_origins(out, id, names, ops, Some(validate));
        }
    }
}

/// The names of the first `count` inputs' nodes of `node` (a bridge's handles).
fn handle_names(g: &Graph, node: NodeId, count: usize) -> Vec<String> {
    g.node(node).inputs.iter().take(count).map(|o| g.name(o.node).to_string()).collect()
}

fn set_origins(out: &mut Graph, id: NodeId, names: Vec<String>, ops: Vec<String>, validate: Option<Vec<bool>>) {
    let strings = |v: Vec<String>| AttrValue::List(ListValue::S(v.into_iter().map(String::into_bytes).collect()));
    let attrs = out.attrs_mut(id);
    attrs.insert(ORIGINS_ATTR.into(), strings(names));
    attrs.insert(ORIGIN_OPS_ATTR.into(), strings(ops));
    if let Some(v) = validate {
        attrs.insert(VALIDATE_SHAPE_ATTR.into(), AttrValue::List(ListValue::B(v)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> Graph {
        autoclust_graph::text::parse(src).unwrap()
    }

    const COUNTER: &str = r#"
x = VarHandleOp() {dtype = float32, shape = shape[2], shared_name = "x", container = ""}
r = ReadVariableOp(x) {dtype = float32}
c = Const() {dtype = float32, value = float32[]{2.0}}
m = Mul(r, c) {T = float32}
a = AddV2(m, c) {T = float32}
w = AssignVariableOp(x, a) {dtype = float32, validate_shape = true}
unused = Neg(c) {T = float32}
"#;

    #[test]
    fn anchors_fetches_and_targets_and_records_origins() {
        let g = parse(COUNTER);
        let fetch = Output { node: g.find("a").unwrap(), port: 0 };
        let target = g.find("w").unwrap();
        let p = clustered_program(&g, &[], &[fetch], &[target], ClusterConfig::default()).unwrap();
        assert_eq!(p.clusters.len(), 1, "{}", autoclust_graph::text::print(&p.graph));
        assert!(p.graph.find("unused").is_none(), "pruned");
        let anchor = p.graph.node(p.graph.find(&p.fetch_anchors[0]).unwrap());
        assert_eq!(anchor.op, "Identity");
        assert_eq!(p.graph.node(p.graph.find(&p.target_anchors[0]).unwrap()).op, "NoOp");
        let strings = |n: &Node, a: &str| -> Vec<String> {
            match n.attr(a) {
                Some(AttrValue::List(ListValue::S(v))) => {
                    v.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect()
                }
                other => panic!("{a}: {other:?}"),
            }
        };
        let snap = p.graph.nodes().iter().find(|n| n.op == crate::encapsulate::SNAPSHOT_OP).unwrap();
        assert_eq!(strings(snap, ORIGINS_ATTR), ["r"]);
        assert_eq!(strings(snap, ORIGIN_OPS_ATTR), ["ReadVariableOp"]);
        let wb = p.graph.nodes().iter().find(|n| n.op == crate::encapsulate::WRITE_BACK_OP).unwrap();
        assert_eq!(strings(wb, ORIGINS_ATTR), ["w"]);
        assert_eq!(wb.attr(VALIDATE_SHAPE_ATTR), Some(&AttrValue::List(ListValue::B(vec![true]))));
    }

    #[test]
    fn feeding_a_non_placeholder_is_refused() {
        let g = parse(COUNTER);
        let m = Output { node: g.find("m").unwrap(), port: 0 };
        let err = clustered_program(&g, &[m], &[m], &[], ClusterConfig::default()).unwrap_err();
        assert_eq!(err, PipelineError::FeedNotPlaceholder("m".into()));
    }

    #[test]
    fn nothing_to_cluster_is_an_error() {
        let g = parse("c = Const() {dtype = float32, value = float32[]{2.0}}\n");
        let c = Output { node: g.find("c").unwrap(), port: 0 };
        assert_eq!(
            clustered_program(&g, &[], &[c], &[], ClusterConfig::default()).unwrap_err(),
            PipelineError::NoClusters { notes: vec![] }
        );
    }

    /// The Keras LSTM's `Max(x, range)`: a cluster reads a value made by an op
    /// outside it (`Range` of a run-time limit) whose dtype only its `Tidx`
    /// attribute gives. This
    /// used to leave the whole graph unclustered ("cannot tell the dtype").
    #[test]
    fn inputs_from_outside_are_typed_from_attributes() {
        let g = parse(
            r#"
x = Placeholder() {dtype = int32, shape = shape[4]}
s = Const() {dtype = int32, value = int32[]{0}}
l = Placeholder() {dtype = int32, shape = shape[]}
d = Const() {dtype = int32, value = int32[]{1}}
r = Range(s, l, d) {Tidx = int32}
m = Maximum(x, r) {T = int32}
n = Mul(m, m) {T = int32}
"#,
        );
        let fetch = Output { node: g.find("n").unwrap(), port: 0 };
        let feeds: Vec<Output> = ["x", "l"].iter().map(|n| Output { node: g.find(n).unwrap(), port: 0 }).collect();
        let p = clustered_program(&g, &feeds, &[fetch], &[], ClusterConfig::default()).unwrap();
        assert_eq!(p.clusters.len(), 1);
        assert_eq!(p.clustered_nodes, 2);
        assert_eq!(p.total_nodes, 7);
        assert!(p.notes.is_empty(), "{:?}", p.notes);
        let anchor = p.graph.node(p.graph.find(&p.fetch_anchors[0]).unwrap());
        assert_eq!(anchor.attr("T"), Some(&AttrValue::Type(autoclust_graph::DType::Int32)));
    }

    /// A call is inlined before clustering, so one cluster spans the caller's
    /// nodes and the callee's body.
    #[test]
    fn clusters_span_inlined_calls() {
        let g = parse(
            r#"
function scale(x: float32) -> (y: float32) {
  two = Const() {dtype = float32, value = float32[]{2.0}}
  m = Mul(x, two:0) {T = float32}
  return y = m:0
}
a = Placeholder() {dtype = float32, shape = shape[3]}
t = Tanh(a) {T = float32}
c = StatefulPartitionedCall(t) {Tin = [float32], Tout = [float32], f = @scale}
e = Exp(c) {T = float32}
"#,
        );
        let feed = Output { node: g.find("a").unwrap(), port: 0 };
        let fetch = Output { node: g.find("e").unwrap(), port: 0 };
        let p = clustered_program(&g, &[feed], &[fetch], &[], ClusterConfig::default()).unwrap();
        assert_eq!(p.clusters.len(), 1, "{}", autoclust_graph::text::print(&p.graph));
        let body = &p.graph.library.functions.last().unwrap();
        let ops: Vec<&str> = body.nodes.iter().map(|n| n.op.as_str()).collect();
        for op in ["Tanh", "Mul", "Exp"] {
            assert!(ops.contains(&op), "{op} not in the cluster: {ops:?}");
        }
        assert!(p.graph.nodes().iter().all(|n| n.op != "StatefulPartitionedCall"));
    }

    /// TensorFlow's `Chains` case: A(unknown) → B → C → D(unknown) → E → F
    /// gives {B, C} and {E, F}: B and E are typed by their own attributes.
    #[test]
    fn nodes_after_unknown_ops_are_typed_by_their_attributes() {
        let g = parse(
            r#"
a = MysteryOp() {}
b = Relu(a) {T = float32}
c = Tanh(b) {T = float32}
d = MysteryOp(c) {}
e = Relu(d) {T = float32}
f = Tanh(e) {T = float32}
"#,
        );
        let clustering = Clusterer::new(ClusterConfig::default()).run_partial(&g).unwrap();
        let mut got: Vec<Vec<&str>> = clustering
            .clusters
            .iter()
            .map(|c| {
                let mut v: Vec<&str> = c.nodes.iter().map(|&n| g.name(n)).collect();
                v.sort();
                v
            })
            .collect();
        got.sort();
        assert_eq!(got, [["b", "c"], ["e", "f"]]);
        let fetch = Output { node: g.find("f").unwrap(), port: 0 };
        let p = clustered_program(&g, &[], &[fetch], &[], ClusterConfig::default()).unwrap();
        assert_eq!(p.clusters.len(), 2, "{}", autoclust_graph::text::print(&p.graph));
        assert!(p.notes.is_empty(), "{:?}", p.notes);
    }

    /// A node whose inference fails is declined alone, with a note naming it;
    /// the rest clusters.
    #[test]
    fn an_untypable_node_is_declined_alone_with_a_note() {
        let g = parse(
            r#"
x = Placeholder() {dtype = float32, shape = shape[2, 3]}
y = Placeholder() {dtype = float32, shape = shape[2, 3]}
bad = MatMul(x, y) {T = float32}
t = Tanh(x) {T = float32}
u = Exp(t) {T = float32}
"#,
        );
        let feeds: Vec<Output> = ["x", "y"].iter().map(|n| Output { node: g.find(n).unwrap(), port: 0 }).collect();
        let fetches: Vec<Output> = ["bad", "u"].iter().map(|n| Output { node: g.find(n).unwrap(), port: 0 }).collect();
        let clustering = Clusterer::new(ClusterConfig::default()).run_partial(&g).unwrap();
        let bad = g.find("bad").unwrap();
        assert!(
            clustering.explanations.iter().any(|r| matches!(r,
            Refusal::NotCompilable { node, reason: crate::compilable::NotCompilable::Untyped { .. } } if *node == bad))
        );
        let p = clustered_program(&g, &feeds, &fetches, &[], ClusterConfig::default()).unwrap();
        assert_eq!(p.clusters.len(), 1);
        assert_eq!(p.notes.len(), 1, "{:?}", p.notes);
        assert!(
            p.notes[0].starts_with("node 'bad' (MatMul) is not clustered: its types could not be inferred"),
            "{}",
            p.notes[0]
        );
    }
}
