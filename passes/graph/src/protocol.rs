//! The names of the bridge protocol between the passes that write a clustered program
//! and the runtime that runs it — one definition each, so writer and reader never drift.
//!
//! Encapsulation (`autoclust_passes::encapsulate`, `::pipeline`) writes them; the
//! runtime's bridge kernels, call path and error messages read them. A graph written by
//! `autoclust compile` carries them, so they are part of the native format's vocabulary
//! (docs/native-format.md) and must stay stable.

/// The op of a cluster's snapshot-read node: reads every variable of the cluster in one
/// atomic step.
pub const SNAPSHOT_OP: &str = "_AutoclustSnapshot";
/// The op of a cluster's write-back node: writes every variable the cluster writes in one
/// atomic step.
pub const WRITE_BACK_OP: &str = "_AutoclustWriteBack";
/// The op inside a cluster body that checks a variable write keeps the variable's shape
/// (the plain assign kernels' `validate_shape` check).
pub const SAME_SHAPE_OP: &str = "_AutoclustSameShape";

/// The attribute the `cluster` pass writes on every member of a cluster (its cluster's
/// name).
pub const CLUSTER_ATTR: &str = "_autoclust_cluster";
/// Per variable of a bridge node: the original node it stands for (absent: unknown).
pub const ORIGINS_ATTR: &str = "_autoclust_origins";
/// Per variable of a bridge node: the op of that original node.
pub const ORIGIN_OPS_ATTR: &str = "_autoclust_origin_ops";
/// On a `SummaryWriter` the `captured-writers` pass makes from a captured writer handle:
/// its writes are dropped (counted), as its log directory is not in the graph.
pub const CAPTURED_WRITER_ATTR: &str = "_autoclust_captured";
/// Per variable of a write-back: whether the value must keep the variable's shape.
pub const VALIDATE_SHAPE_ATTR: &str = "_autoclust_validate_shape";
/// Attribute of a node in a cluster body naming the user's op it was rewritten from
/// (`ResourceGather` for a `GatherV2`, `AssignVariableOp` for a shape check), so errors
/// inside a cluster name what the user wrote.
pub const ORIGIN_OP_ATTR: &str = "_autoclust_origin_op";
/// Attribute of a node in a cluster body that carries out a user's node under another name
/// (a `ResourceScatter*`'s write, named as the variable's next SSA value): that node's name,
/// so an error inside the cluster names the node the user wrote.
pub const ORIGIN_NODE_ATTR: &str = "_autoclust_origin_node";
/// The attribute of the node the `anchor` pass adds for each fetch (`fetch:NODE:PORT`,
/// an `Identity`) and target (`target:NODE`, a `NoOp`) of a request, outside every
/// cluster: the caller fetches and targets the anchors instead.
pub const ANCHOR_ATTR: &str = "_autoclust_anchor";
/// On a node the `ref-variables` rewrite made from one whose output was a reference (a
/// `VariableV2`, an `Assign`, a `RefMerge`, …): the variable's dtype, so a fetch of that
/// output reads the variable's value, as TensorFlow 1 dereferences a fetched reference.
pub const REF_OUTPUT_ATTR: &str = "_autoclust_ref_dtype";
/// On a node a request fetches or targets, in a program `compile` writes for that request
/// (`compile --fetch/--target`): the node keeps its name outside its cluster (encapsulation
/// stands an `Identity` of the call's output, or a `NoOp`, in for it), so the program is run
/// by the request's own names. `true` when set.
pub const KEEP_NAME_ATTR: &str = "_autoclust_keep_name";
/// The prefix of every op the protocol adds (the runtime names the user's op instead of
/// these in errors).
pub const OP_PREFIX: &str = "_Autoclust";

/// On a variable node of a graph taken from a SavedModel signature (`compile`/`opt
/// --signature`): the key the SavedModel's checkpoint stores the variable under, so `--vars`
/// with that checkpoint sets it (object-graph keys such as `w/.ATTRIBUTES/VARIABLE_VALUE`
/// name no node).
pub const CHECKPOINT_KEY_ATTR: &str = "_autoclust_checkpoint_key";
/// On the nodes a program `compile --signature NAME` writes for a SavedModel signature's inputs
/// and outputs: the signature's name. Such a program is run (`run`, `bench`) as the SavedModel
/// was: feeds keyed by the signature's input names, fetches by its output keys.
pub const SIGNATURE_ATTR: &str = "_autoclust_signature";
/// On a `Placeholder` of such a program: the signature input key it stands for.
pub const SIGNATURE_INPUT_ATTR: &str = "_autoclust_signature_input";
/// On a node of such a program whose outputs the signature returns: `KEY=PORT` for each.
pub const SIGNATURE_OUTPUTS_ATTR: &str = "_autoclust_signature_outputs";

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "target" && n != "tests") {
                    sources(&p, out);
                }
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    /// Issue 12: every protocol name is spelled in this file only; the library sources of
    /// every crate use the constants (tests may spell names they check).
    #[test]
    fn protocol_names_are_defined_once() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = Vec::new();
        for krate in [
            "passes/src",
            "passes/graph/src",
            "passes/graphdef/src",
            "runtime/src",
            "compiler/src",
            "cli/src",
            "semantics/src",
        ] {
            sources(&root.join(krate), &mut files);
        }
        assert!(files.len() > 50, "found the sources ({} files)", files.len());
        let names = [
            super::SNAPSHOT_OP,
            super::WRITE_BACK_OP,
            super::SAME_SHAPE_OP,
            super::CLUSTER_ATTR,
            super::ORIGINS_ATTR,
            super::ORIGIN_OPS_ATTR,
            super::VALIDATE_SHAPE_ATTR,
            super::ORIGIN_OP_ATTR,
            super::ORIGIN_NODE_ATTR,
            super::ANCHOR_ATTR,
            super::CAPTURED_WRITER_ATTR,
        ];
        let mut spelled = Vec::new();
        for f in &files {
            if f.ends_with("protocol.rs") {
                continue;
            }
            let text = std::fs::read_to_string(f).unwrap();
            // Only the library part: a file's unit tests may spell the names they check.
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            for n in names {
                if code.contains(&format!("\"{n}\"")) {
                    spelled.push(format!("{} spells \"{n}\"", f.display()));
                }
            }
        }
        assert!(spelled.is_empty(), "use autoclust_graph::protocol instead:\n{}", spelled.join("\n"));
    }
}
