//! An independent checker of a clustering's guarantees, for tests and
//! debugging: it shares no code with the contraction engine (plain Kahn
//! sorts over the quotient graph instead of the incremental order).
//!
//! Checked: every node is in at most one cluster and `of_node` agrees with
//! the cluster lists; no cluster holds an incompatible pair, nor two
//! multi-variable updates sharing only some variables
//! ([`crate::compilable::updates_conflict`]); contracting
//! every cluster leaves the graph acyclic; and, optionally, maximality: no
//! two clusters joined by an edge can be merged without a cycle or one of
//! those pairs.

use autoclust_graph::{Graph, NodeId};

use super::Clustering;
use crate::safety::forward_edges;

/// Checks `clustering`; `incompatible(a, b)` must tell whether `(a, b)` is an
/// incompatible pair. Returns the first violation found.
pub fn check_clustering(
    graph: &Graph,
    clustering: &Clustering,
    incompatible: &dyn Fn(NodeId, NodeId) -> bool,
    maximal: bool,
) -> Result<(), String> {
    let n = graph.len();
    if clustering.of_node.len() != n {
        return Err(format!("of_node has {} entries for {n} nodes", clustering.of_node.len()));
    }
    let updates: Vec<Option<Vec<Option<String>>>> =
        graph.node_ids().map(|id| crate::compilable::multi_variable_update(graph, id)).collect();
    let devices: Vec<Option<String>> =
        graph.node_ids().map(|id| super::contract::canonical_device(&graph.node(id).device)).collect();
    let apart = |a: NodeId, b: NodeId| {
        let updates = match (&updates[a.index()], &updates[b.index()]) {
            (Some(x), Some(y)) => crate::compilable::updates_conflict(x, y),
            _ => false,
        };
        let placed = matches!((&devices[a.index()], &devices[b.index()]), (Some(x), Some(y)) if x != y);
        updates || placed
    };
    let mut seen = vec![None; n];
    for (ci, c) in clustering.clusters.iter().enumerate() {
        if c.name != format!("cluster_{ci}") {
            return Err(format!("cluster {ci} is named {}", c.name));
        }
        for &m in &c.nodes {
            if let Some(other) = seen[m.index()].replace(ci) {
                return Err(format!("node {} in clusters {other} and {ci}", graph.name(m)));
            }
            if clustering.of_node[m.index()].map(|x| x.index()) != Some(ci) {
                return Err(format!("of_node disagrees for {}", graph.name(m)));
            }
        }
        for &a in &c.nodes {
            for &b in &c.nodes {
                if a != b && incompatible(a, b) {
                    return Err(format!("{} holds incompatible pair ({}, {})", c.name, graph.name(a), graph.name(b)));
                }
                if a != b && apart(a, b) {
                    return Err(format!(
                        "{} holds updates sharing only some variables, or nodes of two devices ({}, {})",
                        c.name,
                        graph.name(a),
                        graph.name(b)
                    ));
                }
            }
        }
    }
    for id in graph.node_ids() {
        if clustering.of_node[id.index()].is_some() && seen[id.index()].is_none() {
            return Err(format!("of_node puts {} in a cluster that does not list it", graph.name(id)));
        }
    }
    let succ = forward_edges(graph);
    let quotient = |merge: Option<(usize, usize)>| -> Vec<usize> {
        // Quotient ids: clusters 0..k, then one per unclustered node.
        let k = clustering.clusters.len();
        (0..n)
            .map(|i| match clustering.of_node[i] {
                Some(c) => match merge {
                    Some((a, b)) if c.index() == b => a,
                    _ => c.index(),
                },
                None => k + i,
            })
            .collect()
    };
    let acyclic = |q: &[usize]| -> bool {
        let m = clustering.clusters.len() + n;
        let mut edges: Vec<Vec<usize>> = vec![Vec::new(); m];
        let mut indeg = vec![0usize; m];
        for (src, s) in succ.iter().enumerate() {
            for d in s {
                let (a, b) = (q[src], q[d.index()]);
                if a != b {
                    edges[a].push(b);
                    indeg[b] += 1;
                }
            }
        }
        let mut ready: Vec<usize> = (0..m).filter(|&v| indeg[v] == 0).collect();
        let mut done = 0;
        while let Some(v) = ready.pop() {
            done += 1;
            for &w in &edges[v] {
                indeg[w] -= 1;
                if indeg[w] == 0 {
                    ready.push(w);
                }
            }
        }
        done == m
    };
    if !acyclic(&quotient(None)) {
        return Err("contracting the clusters leaves a cycle".into());
    }
    if maximal {
        let mut adjacent = std::collections::BTreeSet::new();
        for (src, s) in succ.iter().enumerate() {
            for d in s {
                if let (Some(a), Some(b)) = (clustering.of_node[src], clustering.of_node[d.index()]) {
                    if a != b {
                        adjacent.insert((a.min(b).index(), a.max(b).index()));
                    }
                }
            }
        }
        for (a, b) in adjacent {
            let (ca, cb) = (&clustering.clusters[a], &clustering.clusters[b]);
            let unsafe_pair = ca
                .nodes
                .iter()
                .any(|&x| cb.nodes.iter().any(|&y| incompatible(x, y) || incompatible(y, x) || apart(x, y)));
            if !unsafe_pair && acyclic(&quotient(Some((a, b)))) {
                return Err(format!("adjacent clusters {} and {} could be merged", ca.name, cb.name));
            }
        }
    }
    Ok(())
}
