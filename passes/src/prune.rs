//! Pruning: the graph cut down to what a request needs.
//!
//! Keeps every node a fetch or target depends on (through data or control
//! edges), and every node that names a variable (`VarHandleOp` and the
//! like), so every variable still exists for the request's successors; the
//! rest goes. With no request ([`PassContext::request`] `None`, or empty) the
//! graph is kept whole.
//!
//! Why it is sound: the plain executor runs exactly the ancestors of the
//! request too, so no value or effect the request can observe depends on a
//! removed node; a cluster then never contains a node the request does not
//! need, and never waits for one.

use autoclust_graph::{Graph, GraphError, NodeId, Output};

use crate::pass::{Pass, PassContext, PassError};

/// `graph` without the nodes no fetch, target or variable-naming node needs
/// (all of it when nothing is requested).
pub fn prune(graph: &Graph, fetches: &[Output], targets: &[NodeId]) -> Result<Graph, GraphError> {
    let _span = tracing::debug_span!("prune", nodes = graph.len()).entered();
    if fetches.is_empty() && targets.is_empty() {
        return Ok(graph.clone());
    }
    let roots = fetches.iter().map(|o| o.node).chain(targets.iter().copied());
    let variables = graph.node_ids().filter(|&id| autoclust_graph::effects::names_variable(graph.node(id)));
    let needed = graph.ancestors(roots.chain(variables), |_| false);
    if needed.iter().all(|&k| k) {
        return Ok(graph.clone());
    }
    // Renumbered as `from_raw` over the kept nodes would, without re-resolving every input.
    let mut pruned = graph.clone();
    let remove: Vec<bool> = needed.iter().map(|&k| !k).collect();
    pruned.remove_nodes(&remove)?;
    Ok(pruned)
}

/// The request's fetches and targets as ids of `graph`; a name `graph` lacks is
/// [`PassError::Pruned`].
pub(crate) fn resolve(graph: &Graph, ctx: &PassContext) -> Result<(Vec<Output>, Vec<NodeId>), PassError> {
    let Some(request) = &ctx.request else { return Ok((Vec::new(), Vec::new())) };
    let find = |kind: &'static str, name: &str| {
        graph.find(name).ok_or_else(|| PassError::Pruned { kind, name: name.to_string() })
    };
    let fetches = request
        .fetches
        .iter()
        .map(|(name, port)| find("fetch", name).map(|node| Output { node, port: *port }))
        .collect::<Result<Vec<_>, _>>()?;
    let targets = request.targets.iter().map(|name| find("target", name)).collect::<Result<Vec<_>, _>>()?;
    Ok((fetches, targets))
}

/// `prune`: the graph cut down to the request (module doc).
pub struct PrunePass;

impl Pass for PrunePass {
    fn name(&self) -> &'static str {
        "prune"
    }
    fn description(&self) -> &'static str {
        "keep only what the request (--fetch/--target) needs, every variable included; nothing without a request"
    }
    fn run(&self, graph: Graph, ctx: &PassContext) -> Result<Graph, PassError> {
        let (fetches, targets) = resolve(&graph, ctx)?;
        if fetches.is_empty() && targets.is_empty() {
            return Ok(graph);
        }
        Ok(prune(&graph, &fetches, &targets)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pass::Request;

    #[test]
    fn keeps_the_request_and_every_variable() {
        let g = autoclust_graph::text::parse(
            r#"
v = VarHandleOp() {dtype = float32, shape = shape[], shared_name = "v", container = ""}
x = Placeholder() {dtype = float32, shape = shape[]}
y = Neg(x) {T = float32}
z = Exp(x) {T = float32}
t = NoOp() {}
"#,
        )
        .unwrap();
        let request = Request { fetches: vec![("y".into(), 0)], targets: vec![] };
        let ctx = PassContext::for_request(request, Default::default());
        let out = PrunePass.run(g.clone(), &ctx).unwrap();
        let names: Vec<&str> = out.nodes().iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["v", "x", "y"]);
        // No request: everything stays.
        assert_eq!(PrunePass.run(g.clone(), &PassContext::default()).unwrap(), g);
        let missing = Request { fetches: vec![], targets: vec!["nope".into()] };
        let e = PrunePass.run(g, &PassContext::for_request(missing, Default::default())).unwrap_err();
        assert_eq!(e.to_string(), "target 'nope' does not survive pruning");
    }
}
