//! The clustered-run pipeline: what `autoclust run` (and `bench`) do to a
//! graph, after optimization, before running it clustered — the passes of
//! [`CLUSTERED_PIPELINE`], run for one request, and what they recorded.
//!
//! 0. **Inline** every function call ([`crate::inline`]), as TensorFlow's
//!    function optimizer does before clustering.
//! 1. **Prune** to what the fetches and targets need (every `VarHandleOp`
//!    is kept, so every variable still exists; [`crate::prune`]): a cluster
//!    never runs a node the request does not need.
//! 2. **Cluster** the pruned graph ([`Clusterer::run_partial`]).
//! 3. **Anchor** each fetch and target outside every cluster ([`crate::anchor`]).
//! 4. **Encapsulate** each cluster into snapshot → call → write-back
//!    ([`crate::encapsulate`]), recording on the bridge nodes the user's nodes
//!    they stand for (`crate::origins`).
//! 5. **Cluster the bodies** of loops, branches and the calls left in place
//!    ([`crate::body_clusters`]).
//!
//! The passes are the registered ones, so `opt --passes clustered --fetch F`
//! prints the program this builds (`--passes run` adds what comes before:
//! the reference-variable rewrite and the optimization passes). Unlike
//! `opt`, the pipeline runs unverified ([`Pipeline::run_unverified`]): `run`
//! executes graphs with ops the registry cannot type.
//!
//! Why it is sound: each pass's module argues its own soundness; the sequence
//! keeps every value and effect the request observes.
//!
//! [`CLUSTERED_PIPELINE`]: crate::pass::CLUSTERED_PIPELINE

use autoclust_graph::{Graph, GraphError, NodeId, Output};

use crate::cluster::{ClusterConfig, ClusterError, Clustering, Refusal};
use crate::encapsulate::{Bridge, Declustered, EncapsulateError};
use crate::pass::{PassContext, PassError, Pipeline, Request, RunRecord};

pub use crate::prune::prune;
pub use autoclust_graph::protocol::{ORIGINS_ATTR, ORIGIN_OPS_ATTR, VALIDATE_SHAPE_ATTR};

/// Why a graph cannot run clustered (the caller runs the plain executor instead).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PipelineError {
    #[error("feed of '{0}', which is not a Placeholder")]
    FeedNotPlaceholder(String),
    /// Nothing to cluster; `notes` are the shortfalls that may be why (see [`ClusteredProgram::notes`]).
    #[error("no clusters")]
    NoClusters { notes: Vec<String> },
    #[error(transparent)]
    Graph(#[from] GraphError),
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error(transparent)]
    Encapsulate(#[from] EncapsulateError),
    #[error(transparent)]
    Pass(PassError),
}

impl From<PassError> for PipelineError {
    fn from(e: PassError) -> PipelineError {
        match e {
            PassError::Graph(e) => PipelineError::Graph(e),
            PassError::Cluster(e) => PipelineError::Cluster(*e),
            PassError::Encapsulate(e) => PipelineError::Encapsulate(*e),
            e => PipelineError::Pass(e),
        }
    }
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

/// `graph` with each fed node that is not a placeholder replaced by a `Placeholder` of the same
/// name and output dtype (`None`: no such node): a fed value overrides the node, which then
/// neither runs nor needs its inputs, as when TensorFlow feeds a `Const` (a small eager tensor
/// a function captured). Only nodes of one output whose dtype the attributes give are
/// replaced; [`PipelineError::FeedNotPlaceholder`] names every other.
fn override_fed_nodes(graph: &Graph, feeds: &[Output]) -> Result<Option<Graph>, PipelineError> {
    let mut rewrite = crate::rewrite::Rewrite::default();
    let mut refused = Vec::new();
    let mut any = false;
    for o in feeds {
        let node = graph.node(o.node);
        if matches!(node.op.as_str(), "Placeholder" | "PlaceholderWithDefault") {
            continue;
        }
        let dtype = autoclust_graph::infer::attr_output_dtypes(node).filter(|d| d.len() == 1).map(|d| d[0]);
        match dtype {
            Some(dtype) if graph.output_count(o.node) == Some(1) => {
                let mut attrs = autoclust_graph::Attrs::default();
                attrs.insert("dtype".into(), autoclust_graph::AttrValue::Type(dtype));
                rewrite.replace(
                    o.node,
                    autoclust_graph::RawNode {
                        name: node.name.clone(),
                        op: "Placeholder".into(),
                        inputs: Vec::new(),
                        attrs,
                        device: node.device.clone(),
                        span: None,
                    },
                );
                any = true;
            }
            _ => refused.push(node.name.clone()),
        }
    }
    if !refused.is_empty() {
        return Err(PipelineError::FeedNotPlaceholder(refused.join("', '")));
    }
    Ok(if any { Some(rewrite.apply(graph.clone())?) } else { None })
}

/// Runs the pipeline (module doc) for a request on `graph`: `feeds` are the
/// fed outputs (a fed node that is not a placeholder is overridden by its feed,
/// [`override_fed_nodes`]), `fetches` and `targets` the requested outputs and nodes,
/// all ids of `graph`.
pub fn clustered_program(
    graph: &Graph,
    feeds: &[Output],
    fetches: &[Output],
    targets: &[NodeId],
    config: ClusterConfig,
) -> Result<ClusteredProgram, PipelineError> {
    let _span = tracing::debug_span!("clustered_program", nodes = graph.len()).entered();
    let overridden = override_fed_nodes(graph, feeds)?;
    let graph = overridden.as_ref().unwrap_or(graph);
    // The request by name: inlining keeps every node name of the caller (a call
    // stays as an `IdentityN` of its results), so it carries over.
    let request = Request {
        fetches: fetches.iter().map(|o| (graph.name(o.node).to_string(), o.port)).collect(),
        targets: targets.iter().map(|&t| graph.name(t).to_string()).collect(),
    };
    let fed = feeds.iter().map(|o| graph.name(o.node).to_string()).collect();
    let ctx = PassContext { cluster_config: config, ..PassContext::for_request(request, fed) };
    let program = Pipeline::parse("clustered")?.run_unverified(graph.clone(), &ctx)?;
    let notes = ctx.take_notes();
    let RunRecord {
        cluster_ran: _,
        total_nodes,
        fetch_anchors,
        target_anchors,
        bridges,
        declustered,
        clustered_nodes,
        body_nodes,
    } = ctx.take_record();
    tracing::debug!(clusters = bridges.len(), declustered = declustered.len(), "clustered for run");
    if bridges.is_empty() {
        return Err(PipelineError::NoClusters { notes });
    }
    Ok(ClusteredProgram {
        graph: program,
        fetch_anchors,
        target_anchors,
        clusters: bridges.iter().map(|b| b.cluster.clone()).collect(),
        declustered,
        bridges,
        clustered_nodes,
        total_nodes: total_nodes + body_nodes,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Clusterer;
    use autoclust_graph::{AttrValue, ListValue, Node};

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

    /// A fed node of one typed output is overridden by its feed (a `Placeholder` of its name:
    /// it no longer runs nor needs its inputs); a fed node the rule cannot retype is refused,
    /// named with every other such node.
    #[test]
    fn a_fed_node_is_overridden_by_its_feed() {
        let g = parse(COUNTER);
        let m = Output { node: g.find("m").unwrap(), port: 0 };
        let a = Output { node: g.find("a").unwrap(), port: 0 };
        let config = ClusterConfig { min_cluster_size: 1, ..ClusterConfig::default() };
        let p = clustered_program(&g, &[m], &[a], &[], config.clone()).unwrap();
        let fed = p.graph.find("m").map(|id| p.graph.node(id)).unwrap();
        assert_eq!(fed.op, "Placeholder");
        assert!(fed.inputs.is_empty());
        assert_eq!(fed.attr("dtype"), Some(&AttrValue::Type(autoclust_graph::DType::Float32)));
        let w = Output { node: g.find("w").unwrap(), port: 0 };
        let err = clustered_program(&g, &[m, w], &[a], &[], config).unwrap_err();
        assert_eq!(err, PipelineError::FeedNotPlaceholder("w".into()));
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

    /// A request whose only clusterable node is one node, under the default minimum
    /// size: nothing clusters, and the anchors added after `cluster` are not clustered
    /// in its place.
    #[test]
    fn anchors_never_cluster() {
        let g = parse(
            "p0 = Placeholder() {dtype = float32, shape = shape[]}\n\
             c1 = Placeholder() {dtype = float32, shape = shape[]}\n\
             b2 = Add(p0, c1) {T = float32}\n",
        );
        let o = |n: &str| Output { node: g.find(n).unwrap(), port: 0 };
        let e = clustered_program(&g, &[o("p0"), o("c1")], &[o("c1"), o("b2")], &[], ClusterConfig::default());
        assert_eq!(e.unwrap_err(), PipelineError::NoClusters { notes: vec![] });
        let one = ClusterConfig { min_cluster_size: 1, ..ClusterConfig::default() };
        let p = clustered_program(&g, &[o("p0"), o("c1")], &[o("c1"), o("b2")], &[], one).unwrap();
        for a in &p.fetch_anchors {
            let id =
                p.graph.find(a).unwrap_or_else(|| panic!("{a} is outside: {}", autoclust_graph::text::print(&p.graph)));
            assert_eq!(p.graph.node(id).op, "Identity");
        }
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
