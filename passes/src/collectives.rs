//! Collectives of one process → the arithmetic they perform, so a `tf.distribute` step whose
//! replicas all live in the graph (MirroredStrategy over the devices of one machine) runs.
//!
//! A `CollectiveReduceV2`/`CollectiveGatherV2` (and their V1 forms `CollectiveReduce`/
//! `CollectiveGather`) is one member of a group of `group_size` peers, one per device, that
//! meet at run time: each contributes its input and each receives the reduction (`merge_op`
//! folded over the peers, then `final_op`) or the concatenation along dimension 0 in the
//! group's device order. When every peer of a group is a node of this graph, nothing needs to
//! meet: each group becomes the computation itself.
//!
//! What it transforms: the peers of one collective — same op, same group key, one per device
//! of the group, `group_size` of them — become one fold (`AddV2`/`Mul`/`Minimum`/`Maximum`,
//! then `Div` by the group size for `final_op: "Div"`) or one `ConcatV2` over their inputs in
//! device order, and each peer an `Identity` of it under its own name (fetches and control
//! edges keep working). Their ordering tokens are dropped: a collective here is one node,
//! ordered by its data and control inputs, which it keeps. Which peers make one collective:
//! V1 ops name it (`instance_key` attributes); V2 ops take their instance key as an input
//! (TensorFlow feeds a captured counter), so the peers are paired by their order on each
//! device — the n-th collective of a group on one device with the n-th on every other, as
//! TensorFlow's replicas issue them — and an `Assert` checks at run time that paired peers
//! were given the same instance key (a pairing the keys contradict is an error, never a
//! silently wrong sum).
//!
//! Why it is sound: a collective's outputs are a pure function of its peers' inputs, which is
//! what replaces them; a group that does not meet all its peers in this graph (a multi-worker
//! collective, a group size the graph does not match) is an error naming the node.

use std::collections::BTreeMap;

use autoclust_graph::device::DeviceName;
use autoclust_graph::{AttrValue, Attrs, DType, Graph, ListValue, NodeId, RawNode, Tensor};

/// Why the collectives of a graph cannot run here.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("node '{node}' ({op}): {message}")]
pub struct CollectiveError {
    pub node: String,
    pub op: String,
    pub message: String,
}

/// The collective ops this pass replaces.
pub const COLLECTIVE_OPS: &[&str] =
    &["CollectiveReduceV2", "CollectiveGatherV2", "CollectiveReduce", "CollectiveGather"];

/// What the peers of one group share: gather (not reduce), the group key, and a V1 op's
/// instance key.
type GroupKey = (bool, i64, Option<i64>);

/// One collective node and what groups it.
struct Peer {
    id: NodeId,
    group: GroupKey,
    size: i64,
    device: String,
}

/// `graph` with the collectives of each group replaced by what they compute (module doc);
/// `None` when it has none.
pub fn pair_collectives(graph: &Graph) -> Result<Option<Graph>, CollectiveError> {
    let collectives: Vec<NodeId> =
        graph.node_ids().filter(|&id| COLLECTIVE_OPS.contains(&graph.node(id).op.as_str())).collect();
    if collectives.is_empty() {
        return Ok(None);
    }
    let _span = tracing::debug_span!("pair_collectives", collectives = collectives.len()).entered();
    let err = |id: NodeId, message: String| {
        let n = graph.node(id);
        CollectiveError { node: n.name.clone(), op: n.op.clone(), message }
    };
    let order = graph.topo_order().map_err(|e| err(collectives[0], e.to_string()))?;
    let mut position = vec![0usize; graph.len()];
    for (i, id) in order.iter().enumerate() {
        position[id.index()] = i;
    }
    let mut peers = Vec::new();
    for &id in &collectives {
        peers.push(peer(graph, id).map_err(|m| err(id, m))?);
    }
    // Group → device → the group's collectives on that device in execution order.
    let mut groups: BTreeMap<GroupKey, BTreeMap<DeviceKey, Vec<usize>>> = BTreeMap::new();
    for (k, p) in peers.iter().enumerate() {
        groups.entry(p.group).or_default().entry(device_key(&p.device)).or_default().push(k);
    }
    let mut out = graph.clone();
    for by_device in groups.values_mut() {
        for list in by_device.values_mut() {
            list.sort_by_key(|&k| position[peers[k].id.index()]);
        }
        let first = &peers[by_device.values().next().expect("a group has a device")[0]];
        let devices = by_device.len();
        if first.size != devices as i64 {
            return Err(err(
                first.id,
                format!(
                    "its group has {} peers but {devices} in this graph (on {}): collectives across processes \
                     (multi-worker strategies) cannot run here",
                    first.size,
                    by_device.keys().map(shown).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        let count = by_device.values().next().map_or(0, Vec::len);
        if let Some((d, list)) = by_device.iter().find(|(_, l)| l.len() != count) {
            return Err(err(
                peers[list[0]].id,
                format!(
                    "device {} runs {} collectives of its group, another device {count}: the peers cannot be paired",
                    shown(d),
                    list.len()
                ),
            ));
        }
        for n in 0..count {
            let members: Vec<NodeId> = by_device.values().map(|l| peers[l[n]].id).collect();
            replace_group(&mut out, graph, &members).map_err(|m| err(members[0], m))?;
        }
    }
    out.topo_order().map_err(|_| {
        err(collectives[0], "the peers paired by their order on each device depend on each other".into())
    })?;
    Ok(Some(out))
}

/// A peer's device as TensorFlow ranks a group's devices (job, replica, task, type, index,
/// numbers by value), one key however the name is spelt; `None` (first) for an unplaced peer.
type DeviceKey = Option<DeviceName>;

fn device_key(device: &str) -> DeviceKey {
    DeviceName::parse(device)
}

/// How a message names the device of `key`.
fn shown(key: &DeviceKey) -> String {
    key.as_ref().map_or_else(|| "no device".to_string(), |d| format!("/{d}"))
}

fn int_attr(graph: &Graph, id: NodeId, name: &str) -> Result<i64, String> {
    graph.node(id).attr(name).and_then(AttrValue::as_int).ok_or_else(|| format!("attribute '{name}' is missing"))
}

/// The scalar integer constant feeding input `slot` of `id`.
fn const_input(graph: &Graph, id: NodeId, slot: usize, what: &str) -> Result<i64, String> {
    let n = graph.node(id);
    let o = n.inputs.get(slot).ok_or_else(|| format!("input {slot} ({what}) is missing"))?;
    let p = graph.node(o.node);
    let value = (p.op == "Const")
        .then(|| p.attr("value").and_then(AttrValue::as_tensor).and_then(|t| t.to_i64_vec()))
        .flatten()
        .filter(|v| v.len() == 1);
    value.map(|v| v[0]).ok_or_else(|| format!("its {what} ('{}') is not a constant", p.name))
}

fn peer(graph: &Graph, id: NodeId) -> Result<Peer, String> {
    let n = graph.node(id);
    let gather = n.op.starts_with("CollectiveGather");
    let (size, key, instance) = if n.op.ends_with("V2") {
        (const_input(graph, id, 1, "group size")?, const_input(graph, id, 2, "group key")?, None)
    } else {
        (
            int_attr(graph, id, "group_size")?,
            int_attr(graph, id, "group_key")?,
            Some(int_attr(graph, id, "instance_key")?),
        )
    };
    if !gather {
        for (attr, allowed) in [("merge_op", &["Add", "Mul", "Min", "Max"][..]), ("final_op", &["Id", "Div"][..])] {
            let v = string_attr(graph, id, attr)?;
            if !allowed.contains(&v.as_str()) {
                return Err(format!("{attr} '{v}' is not one of {}", allowed.join(", ")));
            }
        }
    }
    Ok(Peer { id, group: (gather, key, instance), size, device: n.device.clone() })
}

fn string_attr(graph: &Graph, id: NodeId, name: &str) -> Result<String, String> {
    match graph.node(id).attr(name) {
        Some(AttrValue::S(s)) => Ok(String::from_utf8_lossy(s).into_owned()),
        _ => Err(format!("attribute '{name}' is missing")),
    }
}

fn raw(name: String, op: &str, inputs: Vec<String>, attrs: Vec<(&str, AttrValue)>, device: &str) -> RawNode {
    let attrs: Attrs = attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    RawNode { name, op: op.into(), inputs, attrs, device: device.into(), span: None }
}

/// Replaces the peers `members` (in device order) of one collective in `out` (module doc).
fn replace_group(out: &mut Graph, graph: &Graph, members: &[NodeId]) -> Result<(), String> {
    let first = graph.node(members[0]);
    let input = |id: NodeId, slot: usize| -> String {
        let o = graph.node(id).inputs[slot];
        let name = graph.name(o.node);
        if o.port == 0 {
            name.to_string()
        } else {
            format!("{name}:{}", o.port)
        }
    };
    let dtype = first.attr("T").and_then(AttrValue::as_type).ok_or("attribute 'T' is missing")?;
    for &m in &members[1..] {
        let n = graph.node(m);
        let same = |a: &str| n.attr(a) == first.attr(a);
        if !(n.op == first.op && same("T") && same("merge_op") && same("final_op")) {
            return Err(format!(
                "its peer '{}' (paired by their order on their devices) is a different collective",
                n.name
            ));
        }
    }
    // Every peer's control inputs order the computation that replaces them all.
    let mut controls: Vec<String> = Vec::new();
    for &m in members {
        for &c in &graph.node(m).control_inputs {
            let c = format!("^{}", graph.name(c));
            if !controls.contains(&c) {
                controls.push(c);
            }
        }
    }
    let base = format!("{}/peers", first.name);
    let device = first.device.as_str();
    let t = AttrValue::Type(dtype);
    let mut added = Vec::new();
    let result = if first.op.starts_with("CollectiveGather") {
        let axis = format!("{base}/axis");
        added.push(raw(axis.clone(), "Const", vec![], const_attrs(Tensor::scalar_i32(0)), device));
        let mut inputs: Vec<String> = members.iter().map(|&m| input(m, 0)).collect();
        inputs.push(axis);
        inputs.extend(controls.iter().cloned());
        let name = format!("{base}/gather");
        let attrs =
            vec![("N", AttrValue::I(members.len() as i64)), ("T", t.clone()), ("Tidx", AttrValue::Type(DType::Int32))];
        added.push(raw(name.clone(), "ConcatV2", inputs, attrs, device));
        name
    } else {
        let op = match string_attr(graph, members[0], "merge_op")?.as_str() {
            "Add" => "AddV2",
            "Mul" => "Mul",
            "Min" => "Minimum",
            _ => "Maximum",
        };
        let mut acc = input(members[0], 0);
        if members.len() == 1 {
            let name = format!("{base}/merge");
            let mut inputs = vec![acc];
            inputs.extend(controls.iter().cloned());
            added.push(raw(name.clone(), "Identity", inputs, vec![("T", t.clone())], device));
            acc = name;
        }
        for (k, &m) in members.iter().enumerate().skip(1) {
            let name = format!("{base}/merge_{k}");
            let mut inputs = vec![acc, input(m, 0)];
            if k == 1 {
                inputs.extend(controls.iter().cloned());
            }
            added.push(raw(name.clone(), op, inputs, vec![("T", t.clone())], device));
            acc = name;
        }
        if string_attr(graph, members[0], "final_op")? == "Div" {
            let size = format!("{base}/group_size");
            added.push(raw(
                size.clone(),
                "Const",
                vec![],
                const_attrs(Tensor::scalar_i32(members.len() as i32)),
                device,
            ));
            let cast = format!("{base}/group_size_{dtype}");
            let cast_attrs = vec![("SrcT", AttrValue::Type(DType::Int32)), ("DstT", t.clone())];
            added.push(raw(cast.clone(), "Cast", vec![size], cast_attrs, device));
            let name = format!("{base}/final");
            added.push(raw(name.clone(), "Div", vec![acc, cast], vec![("T", t.clone())], device));
            acc = name;
        }
        acc
    };
    // V2 peers were paired by order: their instance keys must agree.
    let mut checks = Vec::new();
    if first.op.ends_with("V2") {
        for (k, &m) in members.iter().enumerate().skip(1) {
            let same = format!("{base}/same_instance_{k}");
            let (a, b) = (input(members[0], 3), input(m, 3));
            let eq_attrs = vec![("T", AttrValue::Type(DType::Int32)), ("incompatible_shape_error", AttrValue::B(true))];
            added.push(raw(same.clone(), "Equal", vec![a.clone(), b.clone()], eq_attrs, device));
            let message = format!("{base}/message_{k}");
            let text = format!(
                "collectives {} and {} were paired by their order on their devices, but their instance keys differ:",
                first.name,
                graph.name(m)
            );
            let strings = Tensor::from_strings(vec![], vec![text.into_bytes()]).map_err(|e| e.to_string())?;
            added.push(raw(message.clone(), "Const", vec![], const_attrs(strings), device));
            let assert = format!("{base}/check_{k}");
            let types = AttrValue::List(ListValue::Type(vec![DType::String, DType::Int32, DType::Int32]));
            added.push(raw(assert.clone(), "Assert", vec![same, message, a, b], vec![("T", types)], device));
            checks.push(format!("^{assert}"));
        }
    }
    out.append_raw(added).map_err(|e| e.to_string())?;
    for &m in members {
        let n = graph.node(m);
        let mut inputs = vec![result.clone()];
        inputs.extend(checks.iter().cloned());
        let stand_in = raw(n.name.clone(), "Identity", inputs, vec![("T", t.clone())], &n.device);
        out.replace_raw(m, stand_in).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `collectives`: [`pair_collectives`] as a registered pass.
pub struct CollectivesPass;

impl crate::pass::Pass for CollectivesPass {
    fn name(&self) -> &'static str {
        "collectives"
    }
    fn description(&self) -> &'static str {
        "replace the collectives of a multi-device step whose peers are all in the graph (MirroredStrategy's \
         CollectiveReduceV2/CollectiveGatherV2) by the reduction or concatenation they compute"
    }
    fn run(&self, graph: Graph, _ctx: &crate::pass::PassContext) -> Result<Graph, crate::pass::PassError> {
        Ok(pair_collectives(&graph)?.unwrap_or(graph))
    }
}

fn const_attrs(value: Tensor) -> Vec<(&'static str, AttrValue)> {
    vec![("dtype", AttrValue::Type(value.dtype)), ("value", AttrValue::Tensor(value))]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, op: &str, inputs: &[&str], attrs: Vec<(&str, AttrValue)>, device: &str) -> RawNode {
        raw(name.into(), op, inputs.iter().map(|s| s.to_string()).collect(), attrs, device)
    }

    fn int_const(name: &str, v: i32, device: &str) -> RawNode {
        node(name, "Const", &[], const_attrs(Tensor::scalar_i32(v)), device)
    }

    fn float_attrs() -> Vec<(&'static str, AttrValue)> {
        vec![("T", AttrValue::Type(DType::Float32))]
    }

    /// Two replicas, each with `count` V2 reductions of group 1 (their instance keys fed).
    fn mirrored(count: usize, merge: &str, fin: &str, size: i32) -> Graph {
        let mut nodes = vec![node("x", "Placeholder", &[], vec![("dtype", AttrValue::Type(DType::Float32))], "")];
        for d in 0..2 {
            let dev = format!("/job:localhost/replica:0/task:0/device:CPU:{d}");
            for k in 0..count {
                let p = format!("r{d}_{k}");
                nodes.push(int_const(&format!("{p}/size"), size, &dev));
                nodes.push(int_const(&format!("{p}/group"), 1, &dev));
                nodes.push(node(
                    &format!("{p}/key"),
                    "Placeholder",
                    &[],
                    vec![("dtype", AttrValue::Type(DType::Int32))],
                    &dev,
                ));
                nodes.push(node(&format!("{p}/in"), "Mul", &["x", "x"], float_attrs(), &dev));
                let prev = if k == 0 { "x".to_string() } else { format!("r{d}_{}", k - 1) };
                let mut attrs = float_attrs();
                attrs.push(("merge_op", AttrValue::S(merge.into())));
                attrs.push(("final_op", AttrValue::S(fin.into())));
                attrs.push(("Nordering_token", AttrValue::I(0)));
                let (input, size, group, key) =
                    (format!("{p}/in"), format!("{p}/size"), format!("{p}/group"), format!("{p}/key"));
                let ctl = format!("^{prev}");
                nodes.push(node(&p, "CollectiveReduceV2", &[&input, &size, &group, &key, &ctl], attrs, &dev));
            }
        }
        Graph::from_raw(nodes, Default::default(), None).unwrap()
    }

    fn op_of(g: &Graph, name: &str) -> String {
        g.node(g.find(name).unwrap_or_else(|| panic!("no node {name}"))).op.clone()
    }

    #[test]
    fn peers_become_the_reduction_under_their_own_names() {
        let g = mirrored(2, "Add", "Div", 2);
        let out = pair_collectives(&g).unwrap().expect("rewritten");
        for p in ["r0_0", "r0_1", "r1_0", "r1_1"] {
            assert_eq!(op_of(&out, p), "Identity", "{p}");
        }
        // The k-th reduction of each device pairs with the k-th of the other: r0_1 with r1_1.
        let merged = out.node(out.find("r0_1/peers/merge_1").unwrap());
        let names: Vec<&str> = merged.inputs.iter().map(|o| out.name(o.node)).collect();
        assert_eq!(names, ["r0_1/in", "r1_1/in"]);
        assert_eq!(op_of(&out, "r0_1/peers/final"), "Div");
        // Control inputs of the peers order the reduction; the stand-ins wait for the check.
        assert_eq!(merged.control_inputs.iter().map(|&c| out.name(c)).collect::<Vec<_>>(), ["r0_0", "r1_0"]);
        let stand_in = out.node(out.find("r1_1").unwrap());
        assert_eq!(out.name(stand_in.inputs[0].node), "r0_1/peers/final");
        assert_eq!(out.name(stand_in.control_inputs[0]), "r0_1/peers/check_1");
        assert_eq!(op_of(&out, "r0_1/peers/check_1"), "Assert");
        assert!(out.topo_order().is_ok());
    }

    #[test]
    fn merge_ops_map_to_elementwise_ops_and_gathers_concatenate_in_device_order() {
        for (merge, op) in [("Mul", "Mul"), ("Min", "Minimum"), ("Max", "Maximum"), ("Add", "AddV2")] {
            let out = pair_collectives(&mirrored(1, merge, "Id", 2)).unwrap().unwrap();
            assert_eq!(op_of(&out, "r0_0/peers/merge_1"), op);
            assert!(out.find("r0_0/peers/final").is_none());
        }
        // V1 gathers name their instance: no order pairing and no check. Devices rank by
        // number (CPU:10 after CPU:2).
        let mut nodes = vec![node("x", "Placeholder", &[], vec![("dtype", AttrValue::Type(DType::Float32))], "")];
        for d in [10, 2] {
            let mut attrs = float_attrs();
            attrs.extend([
                ("group_size", AttrValue::I(2)),
                ("group_key", AttrValue::I(3)),
                ("instance_key", AttrValue::I(7)),
            ]);
            nodes.push(node(&format!("g{d}"), "CollectiveGather", &["x"], attrs, &format!("/device:CPU:{d}")));
        }
        let g = Graph::from_raw(nodes, Default::default(), None).unwrap();
        let out = pair_collectives(&g).unwrap().unwrap();
        let concat = out.node(out.find("g2/peers/gather").unwrap());
        assert_eq!(concat.op, "ConcatV2");
        assert_eq!(concat.inputs.iter().map(|o| out.name(o.node)).collect::<Vec<_>>(), ["x", "x", "g2/peers/axis"]);
        assert!(out.find("g2/peers/check_1").is_none());
        assert_eq!(op_of(&out, "g10"), "Identity");
    }

    #[test]
    fn groups_that_do_not_meet_in_the_graph_are_errors() {
        // A group of 4 with 2 peers here: a multi-worker collective.
        let e = pair_collectives(&mirrored(1, "Add", "Id", 4)).unwrap_err();
        assert!(e.to_string().contains("its group has 4 peers but 2 in this graph"), "{e}");
        // Unequal counts per device.
        let g = mirrored(2, "Add", "Id", 2);
        let mut raw = g.to_raw();
        raw.retain(|n| n.name != "r1_1");
        let g = Graph::from_raw(raw, Default::default(), None).unwrap();
        let e = pair_collectives(&g).unwrap_err();
        assert!(e.to_string().contains("cannot be paired"), "{e}");
        // One device however it is spelt: two peers on `/cpu:0` and `/device:CPU:0` are on
        // one device, so a group of two has one device here.
        let mut raw = mirrored(1, "Add", "Id", 2).to_raw();
        for n in raw.iter_mut().filter(|n| n.device.ends_with("CPU:1")) {
            n.device = "/cpu:0".into();
        }
        let e = pair_collectives(&Graph::from_raw(raw, Default::default(), None).unwrap()).unwrap_err();
        assert!(e.to_string().contains("its group has 2 peers but 1 in this graph (on /CPU:0)"), "{e}");
        // A merge op TensorFlow does not have.
        let e = pair_collectives(&mirrored(1, "Xor", "Id", 2)).unwrap_err();
        assert!(e.to_string().contains("merge_op 'Xor'"), "{e}");
        // No collective: nothing to do.
        let plain = Graph::from_raw(vec![int_const("c", 1, "")], Default::default(), None).unwrap();
        assert!(pair_collectives(&plain).unwrap().is_none());
    }
}
