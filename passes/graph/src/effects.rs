//! Resource effects of ops: TensorFlow's resource-operation table.
//!
//! Follows `resource_operation_table.cc` and docs/contract.md §4 (`analyze`):
//! an op reads, writes, or modifies (reads and writes) resource variables,
//! or has no resource effect. Any op that may call a function — a node whose
//! op names a library function, or that has a `func` (or list of `func`)
//! attribute — is a modify under the contract's rule ([`CallEffects::Conservative`],
//! what `analyze` and `cluster` report); [`resource_kind`] gives a call its functions'
//! real effects instead ([`CallEffects::Interprocedural`], what `run` clusters with).

use std::fmt;

use crate::{AttrValue, Attrs, DType, Graph, Library, ListValue, Node, NodeId, Output};

/// The functions a call node passes its input `slot` to, with the argument index there.
fn call_targets(graph: &Graph, node: &Node, slot: usize) -> Vec<(String, usize)> {
    call_targets_in(&graph.library, node.op.as_str(), |k| node.attr(k), slot)
}

fn call_targets_in<'a>(
    library: &Library,
    op: &str,
    attr: impl Fn(&str) -> Option<&'a AttrValue>,
    slot: usize,
) -> Vec<(String, usize)> {
    let func = |k: &str| attr(k).and_then(AttrValue::as_func).map(|f| f.name.clone());
    let funcs = |k: &str| match attr(k) {
        Some(AttrValue::List(crate::ListValue::Func(fs))) => fs.iter().map(|f| f.name.clone()).collect(),
        _ => Vec::new(),
    };
    match op {
        "If" | "StatelessIf" if slot > 0 => {
            [func("then_branch"), func("else_branch")].into_iter().flatten().map(|f| (f, slot - 1)).collect()
        }
        "While" | "StatelessWhile" => [func("body"), func("cond")].into_iter().flatten().map(|f| (f, slot)).collect(),
        "Case" | "StatelessCase" if slot > 0 => funcs("branches").into_iter().map(|f| (f, slot - 1)).collect(),
        "PartitionedCall" | "StatefulPartitionedCall" => func("f").into_iter().map(|f| (f, slot)).collect(),
        _ if library.function(op).is_some() => vec![(op.to_string(), slot)],
        _ => Vec::new(),
    }
}

/// The element dtype a function body gives its resource argument `arg` (see
/// [`variable_dtype`]), looking through nested calls up to `depth` levels.
fn dtype_in_function(library: &Library, name: &str, arg: usize, depth: usize) -> Option<DType> {
    let f = library.function(name)?;
    let arg_name = &f.signature.inputs.get(arg)?.name;
    let refers = |input: &str| input == arg_name || input.split(':').next() == Some(arg_name.as_str());
    for node in &f.nodes {
        let Some(slot) = node.inputs.iter().position(|i| refers(i)) else { continue };
        let attr = |k: &str| node.attrs.get(k);
        // A bridge node inside the body (`crate::protocol`) lists one dtype per handle input.
        let listed = attr("dtypes").and_then(AttrValue::as_type_list).and_then(|l| l.get(slot).copied());
        let own = listed
            .or_else(|| attr("dtype").or_else(|| attr("T")).and_then(AttrValue::as_type))
            .filter(|t| *t != DType::Resource);
        if own.is_some() {
            return own;
        }
        if depth > 0 {
            let nested = call_targets_in(library, &node.op, attr, slot);
            if let Some(t) = nested.into_iter().find_map(|(g, a)| dtype_in_function(library, &g, a, depth - 1)) {
                return Some(t);
            }
        }
    }
    None
}

/// Whether `node` names a resource variable: a `VarHandleOp`, or a `Placeholder` of dtype
/// `resource` — how a TensorFlow 2 function graph (a `tf.function`'s FuncGraph) captures a
/// variable. A placeholder's variable is named after the node (docs/contract.md §3's rule for a
/// handle without a `shared_name`), so `--vars` can initialise it.
pub fn names_variable(node: &Node) -> bool {
    match node.op.as_str() {
        "VarHandleOp" => true,
        "Placeholder" => node.attr("dtype").and_then(AttrValue::as_type) == Some(DType::Resource),
        _ => false,
    }
}

/// The key TensorFlow's resource manager gives the resource `node` creates (a `VarHandleOp`, a
/// resource placeholder, a lookup table, a summary writer): its `container` and `shared_name`
/// attributes, the node's own name when `shared_name` is empty (docs/contract.md §3).
pub fn resource_key(node: &Node) -> (&str, &str) {
    let text = |k: &str| node.attr(k).and_then(AttrValue::as_str).unwrap_or("");
    let shared = text("shared_name");
    (text("container"), if shared.is_empty() { node.name.as_str() } else { shared })
}

/// How a session names a variable to its users (`--vars` entries, the variables it outputs):
/// the name of its [`resource_key`], prefixed `container/` outside the default container.
pub fn variable_display_name(container: &str, name: &str) -> String {
    if container.is_empty() {
        name.to_string()
    } else {
        format!("{container}/{name}")
    }
}

/// The element dtype of the variable node `id` names ([`names_variable`]): a `VarHandleOp`'s
/// `dtype`; for a resource placeholder (which declares none), the `dtype` — else `T` —
/// attribute of the first op using the handle, directly or through `Identity` (every op
/// touching a variable declares its element type so; a bridge node, in its `dtypes` list).
///
/// Scans the graph for each handle's users; [`variable_dtype_in`] reads them from a
/// [`Successors`](crate::Successors) index instead, for callers typing many variables.
pub fn variable_dtype(graph: &Graph, id: NodeId) -> Option<DType> {
    dtype_of_handle(graph, id, |h, out| {
        for (i, user) in graph.nodes().iter().enumerate() {
            if let Some(slot) = user.inputs.iter().position(|&o| o == h) {
                out.push((NodeId(i as u32), slot));
            }
        }
    })
}

/// [`variable_dtype`] with the handles' users read from `successors` (the graph's): linear in
/// the handle's users, not in the graph.
pub fn variable_dtype_in(graph: &Graph, successors: &crate::Successors, id: NodeId) -> Option<DType> {
    dtype_of_handle(graph, id, |h, out| {
        for &(user, port, slot) in &successors.data[h.node.index()] {
            // The first slot of each user reading `h` (successors list a user's slots in order).
            if port == h.port && out.last().is_none_or(|&(u, _)| u != user) {
                out.push((user, slot as usize));
            }
        }
    })
}

/// [`variable_dtype`]'s walk, with `users(h, out)` appending each node reading handle `h`
/// (in node order) and the first input slot it reads it at.
fn dtype_of_handle(graph: &Graph, id: NodeId, users: impl Fn(Output, &mut Vec<(NodeId, usize)>)) -> Option<DType> {
    let node = graph.node(id);
    if node.op == "VarHandleOp" {
        return node.attr("dtype").and_then(AttrValue::as_type);
    }
    // The handle's outputs, followed through the ops that pass a handle on (an `Identity`,
    // and the `Switch`/`Merge`/`Enter`/`Exit`/`NextIteration`/`IdentityN` of lowered
    // control flow), port by port.
    let mut handles = vec![Output { node: id, port: 0 }];
    let mut seen = std::collections::HashSet::new();
    let mut found = Vec::new();
    while let Some(h) = handles.pop() {
        if !seen.insert(h) {
            continue;
        }
        found.clear();
        users(h, &mut found);
        for &(node, slot) in &found {
            let user = graph.node(node);
            match user.op.as_str() {
                "Identity" | "Enter" | "Exit" | "NextIteration" | "Merge" => {
                    handles.push(Output { node, port: 0 });
                    continue;
                }
                "Switch" if slot == 0 => {
                    handles.extend([Output { node, port: 0 }, Output { node, port: 1 }]);
                    continue;
                }
                "IdentityN" => {
                    handles.push(Output { node, port: slot as u32 });
                    continue;
                }
                _ => {}
            }
            // A call (If, While, PartitionedCall, …): what its body does with the argument.
            if let Some(t) = call_targets(graph, user, slot)
                .into_iter()
                .find_map(|(f, arg)| dtype_in_function(&graph.library, &f, arg, 4))
            {
                return Some(t);
            }
            // The stateful random ops' generator state (`tf.random.Generator`) is an int64
            // variable; their `dtype` is the output's.
            if is_rng_state_op(&user.op) {
                return Some(DType::Int64);
            }
            // Encapsulation's bridge nodes list one dtype per handle input (`dtypes`).
            let listed = user.attr("dtypes").and_then(AttrValue::as_type_list).and_then(|l| l.get(slot).copied());
            let t = listed.or_else(|| user.attr("dtype").or_else(|| user.attr("T")).and_then(AttrValue::as_type));
            if let Some(t) = t.filter(|t| *t != DType::Resource) {
                return Some(t);
            }
        }
    }
    None
}

/// Whether `op` reads and advances a random generator's int64 state variable
/// (`stateful_random_ops.cc`).
pub fn is_rng_state_op(op: &str) -> bool {
    matches!(
        op,
        "RngReadAndSkip"
            | "RngSkip"
            | "StatefulStandardNormalV2"
            | "StatefulTruncatedNormal"
            | "StatefulUniform"
            | "StatefulUniformFullInt"
            | "StatefulUniformInt"
            | "StatefulRandomBinomial"
    )
}

/// How a resource op touches variables (`XlaResourceOpKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceKind {
    Read,
    Write,
    /// Read and write (`kReadWrite`): AssignAdd, ResourceApply*, calls, …
    Modify,
}

impl ResourceKind {
    pub fn reads(self) -> bool {
        matches!(self, ResourceKind::Read | ResourceKind::Modify)
    }
    pub fn writes(self) -> bool {
        matches!(self, ResourceKind::Write | ResourceKind::Modify)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceKind::Read => "read",
            ResourceKind::Write => "write",
            ResourceKind::Modify => "modify",
        }
    }
}

impl fmt::Display for ResourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kind of an op in the static table, ignoring function calls.
pub fn table_kind(op: &str) -> Option<ResourceKind> {
    use ResourceKind::*;
    Some(match op {
        "ReadVariableOp"
        | "ResourceGather"
        | "ResourceGatherNd"
        | "VarIsInitializedOp"
        | "VariableShape"
        | "CollectiveReduceV2"
        | "StackCloseV2"
        | "TensorArrayConcatV3"
        | "TensorArrayGatherV3"
        | "TensorArrayGradV3"
        | "TensorArrayCloseV3"
        | "TensorArrayReadV3"
        | "TensorArraySizeV3" => Read,
        "AssignVariableOp"
        | "StackV2"
        | "TensorArrayV3"
        | "TensorArrayScatterV3"
        | "TensorArraySplitV3"
        | "TensorArrayWriteV3" => Write,
        "AssignAddVariableOp" | "AssignSubVariableOp" | "ResourceStridedSliceAssign" | "StackPopV2" | "StackPushV2" => {
            Modify
        }
        _ if is_rng_state_op(op) => Modify,
        _ if op.starts_with("ResourceApply") || op.starts_with("ResourceSparseApply") => Modify,
        _ if op.starts_with("ResourceScatter") => Modify,
        _ => return None,
    })
}

/// Whether the node may call a function: its op is a library function, or
/// one of its attributes is a function (`SymbolicGradient`, `PartitionedCall`,
/// `While`, `If`, `Case` …).
pub fn may_call_function(node: &Node, library: &Library) -> bool {
    node.attrs.values().any(|a| a.is_func()) || (!library.functions.is_empty() && library.function(&node.op).is_some())
}

/// The resource kind of a node: the table's; for a call, modify — unless every function it
/// calls is known and touches no resource ([`calls_touch_no_resource`]), when it has none;
/// none otherwise.
pub fn resource_kind(node: &Node, library: &Library) -> Option<ResourceKind> {
    table_kind(&node.op).or_else(|| {
        (may_call_function(node, library) && !calls_touch_no_resource(node, library)).then_some(ResourceKind::Modify)
    })
}

/// How a safety analysis counts the effects of an op that calls functions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CallEffects {
    /// The contract's and TensorFlow's rule (`XlaResourceOpKindForNode`): any op that may
    /// call a function (a `func` attribute, or a function-library op) is modify — a pure
    /// `StatelessWhile` too. What `analyze` and `cluster` report.
    Conservative,
    /// A call's real effects ([`resource_kind`]): none when every function it runs,
    /// transitively, touches no resource. Sound under the seeds' semantics (such a call
    /// reads and writes no variable), and what `run`, `bench` and `compile` cluster with, so
    /// a recurrent step's pure loops share a cluster with the optimizer's updates;
    /// `analyze --interprocedural` and `cluster --interprocedural` show it.
    #[default]
    Interprocedural,
}

/// The resource kind of a node as `calls` counts calls.
pub fn resource_kind_with(node: &Node, library: &Library, calls: CallEffects) -> Option<ResourceKind> {
    match calls {
        CallEffects::Interprocedural => resource_kind(node, library),
        CallEffects::Conservative => {
            table_kind(&node.op).or_else(|| may_call_function(node, library).then_some(ResourceKind::Modify))
        }
    }
}

/// Ops that run exactly the functions their attributes name (and nothing else), so their
/// effects are those functions' effects. Any other op with a function attribute
/// (`SymbolicGradient` runs a gradient *of* its function, a dataset op runs it on elements
/// it owns, …) keeps the conservative modify.
pub const RUNS_NAMED_FUNCTIONS: &[&str] = &[
    "PartitionedCall",
    "StatefulPartitionedCall",
    "While",
    "StatelessWhile",
    "If",
    "StatelessIf",
    "Case",
    "StatelessCase",
];

/// Whether `node` runs only functions of `library` (a call by op name, or an op of
/// [`RUNS_NAMED_FUNCTIONS`]) and none of them, nor any function they call in turn, has a
/// node that accesses a resource (an op of [`table_kind`]'s table, or a call that may): then
/// the call reads and writes no variable — a pure `While`/`If` of a TensorFlow 2 graph.
pub fn calls_touch_no_resource(node: &Node, library: &Library) -> bool {
    calls_only(node, library, |_| false)
}

/// Whether `node` runs only functions of `library` (as [`calls_touch_no_resource`]) and none
/// of them, transitively, writes a resource: every resource op in them only reads.
pub fn calls_write_no_resource(node: &Node, library: &Library) -> bool {
    calls_only(node, library, |k| !k.writes())
}

/// Whether `node` runs only known functions whose resource ops, transitively, all have a
/// kind `allowed` accepts (a call that may run unknown code is never accepted).
fn calls_only(node: &Node, library: &Library, allowed: impl Fn(ResourceKind) -> bool) -> bool {
    if library.function(&node.op).is_none() && !RUNS_NAMED_FUNCTIONS.contains(&node.op.as_str()) {
        return false;
    }
    fn called<'a>(op: &'a str, attrs: &'a Attrs, library: &'a Library, out: &mut Vec<&'a str>) {
        if library.function(op).is_some() {
            out.push(op);
        }
        for a in attrs.values() {
            match a {
                AttrValue::Func(f) => out.push(&f.name),
                AttrValue::List(ListValue::Func(fs)) => out.extend(fs.iter().map(|f| f.name.as_str())),
                _ => {}
            }
        }
    }
    let mut stack: Vec<&str> = Vec::new();
    called(&node.op, &node.attrs, library, &mut stack);
    let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
    while let Some(name) = stack.pop() {
        if !seen.insert(name) {
            continue;
        }
        let Some(f) = library.function(name) else { return false };
        for n in &f.nodes {
            let calls = library.function(&n.op).is_some() || n.attrs.values().any(AttrValue::is_func);
            if table_kind(&n.op).is_some_and(|k| !allowed(k))
                || calls && library.function(&n.op).is_none() && !RUNS_NAMED_FUNCTIONS.contains(&n.op.as_str())
            {
                return false;
            }
            called(&n.op, &n.attrs, library, &mut stack);
        }
    }
    true
}

/// TensorFlow 1 control-flow ops that move values between branches, frames and iterations:
/// their outputs may be dead (seed 002).
pub const V1_CONTROL_FLOW: &[&str] = &[
    "Switch",
    "RefSwitch",
    "Merge",
    "RefMerge",
    "Enter",
    "RefEnter",
    "Exit",
    "RefExit",
    "NextIteration",
    "RefNextIteration",
    "LoopCond",
];

/// Whether `op` belongs to v1 control flow: one of [`V1_CONTROL_FLOW`], or `ControlTrigger`
/// (never dead itself, but part of the same machinery).
pub fn is_v1_control_flow(op: &str) -> bool {
    op == "ControlTrigger" || V1_CONTROL_FLOW.contains(&op)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_are_keyed_by_container_and_shared_name() {
        let s = |v: &str| AttrValue::S(v.as_bytes().to_vec());
        let named = Node::unconnected("h", "VarHandleOp", &[("container", s("c")), ("shared_name", s("w"))]);
        assert_eq!(resource_key(&named), ("c", "w"));
        let unnamed = Node::unconnected("h", "VarHandleOp", &[("container", s("")), ("shared_name", s(""))]);
        assert_eq!(resource_key(&unnamed), ("", "h"));
        assert_eq!(resource_key(&Node::unconnected("p", "Placeholder", &[])), ("", "p"));
        assert_eq!(variable_display_name("c", "w"), "c/w");
        assert_eq!(variable_display_name("", "w"), "w");
    }

    #[test]
    fn table() {
        assert_eq!(table_kind("ReadVariableOp"), Some(ResourceKind::Read));
        assert_eq!(table_kind("ResourceGather"), Some(ResourceKind::Read));
        assert_eq!(table_kind("AssignVariableOp"), Some(ResourceKind::Write));
        assert_eq!(table_kind("AssignAddVariableOp"), Some(ResourceKind::Modify));
        assert_eq!(table_kind("ResourceApplyAdam"), Some(ResourceKind::Modify));
        assert_eq!(table_kind("ResourceScatterAdd"), Some(ResourceKind::Modify));
        assert_eq!(table_kind("VarHandleOp"), None);
        assert_eq!(table_kind("Identity"), None);
    }

    /// A captured variable's dtype comes from its first typed user, through handle-passing
    /// ops (the scan and the successor index agree, port by port).
    #[test]
    fn placeholder_variables_are_typed_by_their_users_either_way() {
        let g = crate::text::parse(
            r#"
a = Placeholder() {dtype = resource, shape = shape[]}
b = Placeholder() {dtype = resource, shape = shape[]}
c = Placeholder() {dtype = resource, shape = shape[]}
p = Placeholder() {dtype = bool, shape = shape[]}
ia = Identity(a:0) {T = resource}
ra = ReadVariableOp(ia:0) {dtype = int64}
sw = Switch(b:0, p:0) {T = resource}
rb = ReadVariableOp(sw:1) {dtype = float64}
idn = IdentityN(b:0, c:0) {T = [resource, resource]}
rc = ReadVariableOp(idn:1) {dtype = int32}
"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let succ = g.successors();
        for (name, want) in [("a", DType::Int64), ("b", DType::Float64), ("c", DType::Int32)] {
            let id = g.node_ids().find(|&i| g.name(i) == name).expect("node");
            assert_eq!(variable_dtype(&g, id), Some(want), "{name} by scan");
            assert_eq!(variable_dtype_in(&g, &succ, id), Some(want), "{name} by index");
        }
    }

    /// A variable passed to a call whose body reaches it first through a bridge node (a
    /// cluster inside the body) is typed by that node's `dtypes` entry for the argument's
    /// slot, not its first.
    #[test]
    fn a_variable_used_by_a_bridge_inside_a_called_body_takes_its_slots_dtype() {
        let g = crate::text::parse(
            r#"
w = Placeholder() {dtype = resource, shape = shape[]}
step = Placeholder() {dtype = resource, shape = shape[]}
p = Placeholder() {dtype = bool, shape = shape[]}
c = If(p, w, step) {Tcond = bool, Tin = [resource, resource], Tout = [], then_branch = @t, else_branch = @t}
function t(a: resource, b: resource) -> () stateful {
  s = _AutoclustSnapshot(a, b) {cluster = "k", dtypes = [float32, int64]}
}
"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let succ = g.successors();
        for (name, want) in [("w", DType::Float32), ("step", DType::Int64)] {
            let id = g.node_ids().find(|&i| g.name(i) == name).expect("node");
            assert_eq!(variable_dtype(&g, id), Some(want), "{name} by scan");
            assert_eq!(variable_dtype_in(&g, &succ, id), Some(want), "{name} by index");
        }
    }
}
