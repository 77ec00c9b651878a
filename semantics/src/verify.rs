//! `verify`: clustering adds no behaviour iff every outcome of the clustered
//! program is an outcome of the original one (seed 001's correctness
//! criterion). A clustered outcome the original cannot produce is a
//! counterexample, reported with the schedule that produces it.

use std::collections::HashSet;

use autoclust_graph::{effects, Graph, Output};
use autoclust_passes::cluster::{ClusterConfig, Clusterer};

use crate::eval::PureEval;
use crate::explore::{explore, Exploration, Inputs, Limits, Outcome};
use crate::model::{prune, ClusterSpec, Program, Rmw};
use crate::unroll::{has_frames, unroll};
use crate::SemanticsError;

/// What to run: fetches, targets, and the read-modify-write model.
#[derive(Clone, Debug, Default)]
pub struct Query {
    /// `node` or `node:port`.
    pub fetches: Vec<String>,
    pub targets: Vec<String>,
    pub rmw: Rmw,
    pub limits: Limits,
}

/// Clusters a (pruned) graph: the real clusterer ([`autoclusterer`]) or a
/// fixed clustering in tests.
pub type ClusterFn<'a> = dyn Fn(&Graph) -> Result<Vec<ClusterSpec>, SemanticsError> + 'a;

/// The project's clusterer with `config`, as a [`ClusterFn`].
pub fn autoclusterer(config: ClusterConfig) -> impl Fn(&Graph) -> Result<Vec<ClusterSpec>, SemanticsError> {
    move |g: &Graph| {
        let clustering =
            Clusterer::new(config.clone()).run(g).map_err(|e| SemanticsError::Clustering(e.to_string()))?;
        Ok(clustering.clusters.into_iter().map(|c| ClusterSpec { name: c.name, nodes: c.nodes }).collect())
    }
}

/// Explores `graph` after pruning it to the query. With `clusterer`, the
/// clustered program is explored: the clusterer is run on the pruned graph
/// (what the runtime compiles).
pub fn explore_graph(
    graph: &Graph,
    query: &Query,
    clusterer: Option<&ClusterFn<'_>>,
    inputs: &Inputs,
    eval: &dyn PureEval,
) -> Result<Exploration, SemanticsError> {
    // TensorFlow 1 reference variables become resource variables first, as `run` turns them
    // (autoclust_passes::ref_variables: each dereference a read where TensorFlow makes it).
    let converted = autoclust_passes::ref_variables::ref_to_resource(graph)
        .map_err(|e| SemanticsError::Clustering(format!("turning reference variables into resource variables: {e}")))?;
    let graph = converted.as_ref().unwrap_or(graph);
    let (pruned, fetches) = prune(graph, &query.fetches, &query.targets)?;
    let clusters = clusterer.map(|c| c(&pruned)).transpose()?;
    let (pruned, fetches, clusters) = lower_effectful_control_flow(pruned, fetches, clusters)?;
    if !has_frames(&pruned) {
        let program = Program::build(&pruned, fetches, query.rmw, clusters.as_deref())?;
        return explore(&program, eval, inputs, query.limits);
    }
    // Loop frames: explore their operation instances, unrolled to the bound.
    let unrolled = unroll(&pruned, &fetches, clusters.as_deref(), query.limits.max_iterations)?;
    let mut program =
        Program::build(&unrolled.graph, unrolled.fetches.clone(), query.rmw, unrolled.clusters.as_deref())?;
    unrolled.order_iterations(&mut program);
    program.loop_bounds = unrolled.bounds.clone();
    explore(&program, eval, inputs, query.limits)
}

/// A graph to explore, its fetches and the clustered program's clusters.
type Request = (Graph, Vec<Output>, Option<Vec<ClusterSpec>>);

/// The graph with every functional `If`/`Case`/`While` that touches a variable and lies
/// outside the clusters lowered to TensorFlow 1 control flow
/// (`autoclust_passes::lower_control_flow`), so its bodies' accesses are steps of their own
/// and its loops unroll like a v1 loop; the fetches and clusters mapped onto it by name (the
/// lowering keeps every other node's name, and a lowered node's name as its results).
///
/// A functional node inside a cluster stays: the cluster is one atomic step whose members
/// the interpreter computes, loops included (the clusterer admits only pure ones). Nested
/// control flow in a lowered body is lowered with it. The clusters are the clusterer's on the
/// unlowered graph, as `run` forms them; the pure clusters `run` also forms inside loop and
/// branch bodies (`cluster-bodies`) are not modelled: the lowered bodies run op by op (pure
/// clusters hold no variable access, so they only narrow the orders).
pub(crate) fn lower_effectful_control_flow(
    graph: Graph,
    fetches: Vec<Output>,
    clusters: Option<Vec<ClusterSpec>>,
) -> Result<Request, SemanticsError> {
    use autoclust_passes::lower_control_flow::{is_functional_control_flow, lower_control_flow_where};
    let mut in_cluster = vec![false; graph.len()];
    for c in clusters.iter().flatten() {
        for n in &c.nodes {
            in_cluster[n.index()] = true;
        }
    }
    let wanted: HashSet<String> = graph
        .node_ids()
        .filter(|&id| {
            let n = graph.node(id);
            is_functional_control_flow(&n.op)
                && !in_cluster[id.index()]
                && effects::resource_kind(n, &graph.library).is_some()
        })
        .map(|id| graph.name(id).to_string())
        .collect();
    if wanted.is_empty() {
        return Ok((graph, fetches, clusters));
    }
    let (lowered, report) = lower_control_flow_where(graph.clone(), &|_, n| wanted.contains(&n.name))
        .map_err(|e| SemanticsError::Clustering(format!("lowering functional control flow: {e}")))?;
    if let Some((node, why)) = report.left.iter().find(|(n, _)| wanted.contains(n)) {
        let op = graph.find(node).map(|id| graph.node(id).op.clone()).unwrap_or_default();
        return Err(SemanticsError::Unsupported {
            node: node.clone(),
            op,
            why: format!("functional control flow on variables that cannot be lowered: {why}"),
        });
    }
    let find = |id: autoclust_graph::NodeId| lowered.find(graph.name(id)).expect("the lowering keeps names");
    let fetches = fetches.into_iter().map(|o| Output { node: find(o.node), port: o.port }).collect();
    let clusters = clusters.map(|cs| {
        cs.into_iter().map(|c| ClusterSpec { name: c.name, nodes: c.nodes.into_iter().map(find).collect() }).collect()
    });
    tracing::debug!(lowered = report.lowered, nodes = lowered.len(), "functional control flow lowered");
    Ok((lowered, fetches, clusters))
}

/// The result of [`verify`].
#[derive(Clone, Debug)]
pub struct Verdict {
    pub original: Exploration,
    pub clustered: Exploration,
    /// Index into `clustered.outcomes` of the first outcome the original cannot produce.
    pub counterexample: Option<usize>,
}

impl Verdict {
    /// Whether clustering added no behaviour.
    pub fn holds(&self) -> bool {
        self.counterexample.is_none()
    }
    /// The outcome only the clustered program produces, with its schedule.
    pub fn witness(&self) -> Option<(&Outcome, &[String])> {
        self.counterexample.map(|i| (&self.clustered.outcomes[i], self.clustered.witnesses[i].as_slice()))
    }
}

/// Checks that every outcome of the clustered program is one of the original's.
pub fn verify(
    graph: &Graph,
    query: &Query,
    clusterer: &ClusterFn<'_>,
    inputs: &Inputs,
    eval: &dyn PureEval,
) -> Result<Verdict, SemanticsError> {
    let _span = tracing::debug_span!("verify").entered();
    let original = explore_graph(graph, query, None, inputs, eval)?;
    let clustered = explore_graph(graph, query, Some(clusterer), inputs, eval)?;
    let counterexample = clustered.outcomes.iter().position(|o| !original.contains(o));
    Ok(Verdict { original, clustered, counterexample })
}
