//! Resource effects of ops: TensorFlow's resource-operation table.
//!
//! Follows `resource_operation_table.cc` and CONTRACT.md §4 (`analyze`):
//! an op reads, writes, or modifies (reads and writes) resource variables,
//! or has no resource effect. Any op that may call a function — a node whose
//! op names a library function, or that has a `func` (or list of `func`)
//! attribute — is conservatively a modify.

use std::fmt;

use crate::{AttrValue, DType, Graph, Library, Node, NodeId};

/// Whether `node` names a resource variable: a `VarHandleOp`, or a `Placeholder` of dtype
/// `resource` — how a TensorFlow 2 function graph (a `tf.function`'s FuncGraph) captures a
/// variable. A placeholder's variable is named after the node (CONTRACT.md §3's rule for a
/// handle without a `shared_name`), so `--vars` can initialise it.
pub fn names_variable(node: &Node) -> bool {
    match node.op.as_str() {
        "VarHandleOp" => true,
        "Placeholder" => node.attr("dtype").and_then(AttrValue::as_type) == Some(DType::Resource),
        _ => false,
    }
}

/// The element dtype of the variable node `id` names ([`names_variable`]): a `VarHandleOp`'s
/// `dtype`; for a resource placeholder (which declares none), the `dtype` — else `T` —
/// attribute of the first op using the handle, directly or through `Identity` (every op
/// touching a variable declares its element type so; a bridge node, in its `dtypes` list).
pub fn variable_dtype(graph: &Graph, id: NodeId) -> Option<DType> {
    let node = graph.node(id);
    if node.op == "VarHandleOp" {
        return node.attr("dtype").and_then(AttrValue::as_type);
    }
    let mut handles = vec![id];
    let mut seen = vec![false; graph.len()];
    while let Some(h) = handles.pop() {
        if std::mem::replace(&mut seen[h.index()], true) {
            continue;
        }
        for (i, user) in graph.nodes().iter().enumerate() {
            let Some(slot) = user.inputs.iter().position(|o| o.node == h) else { continue };
            if user.op == "Identity" {
                handles.push(NodeId(i as u32));
                continue;
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
        "AssignAddVariableOp"
        | "AssignSubVariableOp"
        | "ResourceStridedSliceAssign"
        | "RngReadAndSkip"
        | "RngSkip"
        | "StatefulStandardNormalV2"
        | "StatefulTruncatedNormal"
        | "StatefulUniform"
        | "StatefulUniformFullInt"
        | "StatefulUniformInt"
        | "StackPopV2"
        | "StackPushV2" => Modify,
        _ if op.starts_with("ResourceApply") || op.starts_with("ResourceSparseApply") => Modify,
        _ if op.starts_with("ResourceScatter") => Modify,
        _ => return None,
    })
}

/// Whether the node may call a function: its op is a library function, or
/// one of its attributes is a function (`SymbolicGradient`, `PartitionedCall`,
/// `While`, `If`, `Case` …).
pub fn may_call_function(node: &Node, library: &Library) -> bool {
    library.function(&node.op).is_some() || node.attrs.values().any(|a| a.is_func())
}

/// The resource kind of a node: the table's, else modify for a call, else none.
pub fn resource_kind(node: &Node, library: &Library) -> Option<ResourceKind> {
    table_kind(&node.op).or_else(|| may_call_function(node, library).then_some(ResourceKind::Modify))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
