//! Anchors: the request made to stand outside every cluster.
//!
//! For each fetch `n:p` of [`PassContext::request`] an `Identity` of `n:p`
//! (named `_autoclust_fetch_K`), and for each target `t` a `NoOp` with a
//! control edge from `t` (named `_autoclust_target_K`), each marked with
//! [`ANCHOR_ATTR`] (`fetch:n:p`, `target:t`). Added after clustering and
//! before encapsulation, the anchors belong to no cluster: a fetched value
//! computed inside a cluster is then "used outside", so encapsulation makes it
//! an output of the cluster's call, and a target inside a cluster becomes
//! "wait for the cluster's exit" (its write-back). The caller fetches and
//! targets the anchors instead ([`RunRecord::fetch_anchors`]).
//!
//! A fetch of what was a TF1 reference before the `ref-variables` rewrite (its node carries
//! `REF_OUTPUT_ATTR`) is anchored by a `ReadVariableOp` of the variable instead (after the
//! update op whose output it was): TensorFlow 1 returns the variable's value.
//!
//! Why it is sound: an `Identity` forwards its input's value and a `NoOp`
//! waits for its control input, so fetching or targeting an anchor observes
//! what fetching or targeting the node observes; the anchors have no other
//! consumer and change no other node's value.
//!
//! With [`PassContext::keep_request_names`] (`compile --fetch/--target`) the request's nodes
//! are marked to keep their names instead (`KEEP_NAME_ATTR`, which encapsulation honours), so
//! the written program is fetched and targeted by the request's own names.
//!
//! [`RunRecord::fetch_anchors`]: crate::pass::RunRecord::fetch_anchors

use autoclust_graph::infer::attr_output_dtypes;
use autoclust_graph::protocol::{ANCHOR_ATTR, KEEP_NAME_ATTR};
use autoclust_graph::{AttrValue, Graph, Node, NodeId, Output};

use crate::pass::{Pass, PassContext, PassError};

/// `anchor`: an anchor per fetch and target (module doc).
pub struct AnchorPass;

impl Pass for AnchorPass {
    fn name(&self) -> &'static str {
        "anchor"
    }
    fn description(&self) -> &'static str {
        "add an Identity per fetch and a NoOp per target of the request outside every cluster \
         (_autoclust_anchor), for the caller to fetch and target instead"
    }
    fn run(&self, mut graph: Graph, ctx: &PassContext) -> Result<Graph, PassError> {
        let (fetches, targets) = crate::prune::resolve(&graph, ctx)?;
        if fetches.is_empty() && targets.is_empty() {
            return Ok(graph);
        }
        if ctx.keep_request_names {
            // `compile --fetch/--target`: the request's nodes keep their names instead.
            for id in fetches.iter().map(|o| o.node).chain(targets.iter().copied()) {
                graph.attrs_mut(id).insert(KEEP_NAME_ATTR.into(), AttrValue::B(true));
            }
            return Ok(graph);
        }
        // The fetched outputs' dtypes, from inference where attributes do not say.
        let mut types = None;
        let mut fetch_anchors = Vec::with_capacity(fetches.len());
        for (k, o) in fetches.iter().enumerate() {
            let name = fresh_name(&graph, &format!("_autoclust_fetch_{k}"));
            let mark = AttrValue::S(format!("fetch:{}:{}", graph.name(o.node), o.port).into_bytes());
            // What was a TF1 reference (a `VariableV2`, an `Assign`'s output) is fetched as the
            // variable's value, as a TensorFlow 1 session returns it.
            if let Some(mut read) = crate::ref_variables::reference_read(&graph, &name, *o) {
                read.attrs.insert(ANCHOR_ATTR.into(), mark);
                graph.add_node(read)?;
                fetch_anchors.push(name);
                continue;
            }
            let mut identity = anchor_node(&name, "Identity", vec![*o], vec![]);
            let mut dtype = attr_output_dtypes(graph.node(o.node)).and_then(|ts| ts.get(o.port as usize).copied());
            if dtype.is_none() {
                let types = types.get_or_insert_with(|| ctx.types(&graph).ok());
                dtype = types.as_ref().and_then(|t| t.output(*o)).map(|(d, _)| *d);
            }
            if let Some(t) = dtype {
                identity.attrs.insert("T".into(), AttrValue::Type(t));
            }
            identity.attrs.insert(ANCHOR_ATTR.into(), mark);
            graph.add_node(identity)?;
            fetch_anchors.push(name);
        }
        let mut target_anchors = Vec::with_capacity(targets.len());
        for (k, &t) in targets.iter().enumerate() {
            let name = fresh_name(&graph, &format!("_autoclust_target_{k}"));
            let mut noop = anchor_node(&name, "NoOp", vec![], vec![t]);
            let mark = format!("target:{}", graph.name(t));
            noop.attrs.insert(ANCHOR_ATTR.into(), AttrValue::S(mark.into_bytes()));
            graph.add_node(noop)?;
            target_anchors.push(name);
        }
        ctx.record(|r| {
            r.fetch_anchors = fetch_anchors;
            r.target_anchors = target_anchors;
        });
        Ok(graph)
    }
}

/// `base`, or `base_K` for the first K that names no node of `g`.
pub(crate) fn fresh_name(g: &Graph, base: &str) -> String {
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
