//! The clustered-run pipeline: what `autoclust run` (and `bench`) do to a
//! graph before running it clustered, in one place.
//!
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
//! Why it is sound: pruning removes only nodes no fetch, target or variable
//! depends on (the plain executor would not run them either); anchors are
//! `Identity`/`NoOp` nodes that change no value; encapsulation's soundness
//! is argued in [`crate::encapsulate`]; the origin attributes are
//! annotations read only to validate and to word errors.

use std::collections::HashMap;

use autoclust_graph::effects::resource_kind;
use autoclust_graph::{AttrValue, Graph, GraphError, ListValue, Node, NodeId, Output};

use crate::cluster::{ClusterConfig, ClusterError, Clusterer};
use crate::encapsulate::{encapsulate, ClusterSpec, Declustered, EncapsulateError};

/// Per variable of a bridge node: the original node it stands for.
pub const ORIGINS_ATTR: &str = "_autoclust_origins";
/// Per variable of a bridge node: the op of that original node.
pub const ORIGIN_OPS_ATTR: &str = "_autoclust_origin_ops";
/// Per variable of a write-back: whether the value must keep the variable's shape.
pub const VALIDATE_SHAPE_ATTR: &str = "_autoclust_validate_shape";

/// Why a graph cannot run clustered (the caller runs the plain executor instead).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PipelineError {
    #[error("feed of '{0}', which is not a Placeholder")]
    FeedNotPlaceholder(String),
    #[error("'{0}' does not survive pruning")]
    Pruned(String),
    #[error("no clusters")]
    NoClusters,
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
    let mut pruned = prune(graph, fetches, targets)?;
    let clustering = Clusterer::new(config).run(&pruned)?;
    if clustering.clusters.is_empty() {
        return Err(PipelineError::NoClusters);
    }
    let specs: Vec<ClusterSpec> =
        clustering.clusters.iter().map(|c| ClusterSpec { name: c.name.clone(), nodes: c.nodes.clone() }).collect();
    let fetch_anchors = fetches
        .iter()
        .enumerate()
        .map(|(k, o)| {
            let name = graph.name(o.node);
            let node = pruned.find(name).ok_or_else(|| PipelineError::Pruned(name.to_string()))?;
            let anchor = fresh_name(&pruned, &format!("_autoclust_fetch_{k}"));
            pruned.add_node(anchor_node(&anchor, "Identity", vec![Output { node, port: o.port }], vec![]))?;
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
    Ok(ClusteredProgram {
        graph: encapsulated.graph,
        fetch_anchors,
        target_anchors,
        clusters: encapsulated.bridges.iter().map(|b| b.cluster.clone()).collect(),
        declustered: encapsulated.declustered,
    })
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
    let raw = graph.to_raw().into_iter().zip(&needed).filter(|(_, &k)| k).map(|(r, _)| r).collect();
    Graph::from_raw(raw, graph.library.clone(), graph.versions.clone())
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
    let position: HashMap<NodeId, usize> = order.iter().enumerate().map(|(i, &id)| (id, i)).collect();
    for bridge in bridges {
        let Some(spec) = specs.iter().find(|s| s.name == bridge.cluster) else { continue };
        let mut ordered: Vec<NodeId> = spec.nodes.clone();
        ordered.sort_by_key(|id| position.get(id).copied().unwrap_or(usize::MAX));
        // The members touching the handle named `handle`, with how they touch it.
        let users = |handle: &str| -> Vec<(NodeId, bool, bool)> {
            ordered
                .iter()
                .filter(|&&m| pruned.node(m).inputs.iter().any(|i| pruned.name(i.node) == handle))
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
            PipelineError::NoClusters
        );
    }
}
