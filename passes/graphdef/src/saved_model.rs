//! SavedModel directories, as `tf.saved_model.save` and Keras
//! `model.export` write them: `saved_model.pb` (a `SavedModel` holding
//! `MetaGraphDef`s: the graph with its function library, the signatures,
//! the object graph) and `variables/variables.{index,data-*}` (a checkpoint,
//! read by [`crate::tensor_bundle`]).
//!
//! The graph is the MetaGraphDef's GraphDef, as TensorFlow 2 exports it:
//! one `VarHandleOp` per variable, one `Placeholder` per signature input
//! (`serving_default_x`), and a `StatefulPartitionedCall` per signature
//! whose last inputs are the variables the signature's function captures.
//! A [`Signature`] maps the user's input names and output keys to those
//! graph tensors.
//!
//! Variables are restored through the object graph, as TensorFlow's loader
//! does: the object-graph node of each captured variable comes from the
//! `bound_inputs` of the called function (`SavedConcreteFunction`), and its
//! checkpoint key (`layer/kernel/.ATTRIBUTES/VARIABLE_VALUE`) from walking
//! the saved object graph and the checkpoint's own object graph
//! (`_CHECKPOINTABLE_OBJECT_GRAPH`) together from the root by child name.
//! Each restored variable is named as the session names its `VarHandleOp`
//! (its `shared_name`, else the node name).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};

use autoclust_graph::{DType, Graph, Tensor, TensorData};
use protobuf::Message;

use crate::proto::saved_model::{
    AssetFileDef, MetaGraphDef, SavedModel as SavedModelProto, SavedObjectGraph, TensorInfo, TrackableObjectGraph,
};
use crate::tensor_bundle::{read_checkpoint, CheckpointError, OBJECT_GRAPH_KEY};
use crate::{graph_from_proto, GraphDefError};

/// One tensor of a signature: the user's key and the graph tensor (`node:port`).
#[derive(Clone, Debug, PartialEq)]
pub struct SignatureTensor {
    pub key: String,
    pub tensor: String,
    pub dtype: Option<DType>,
}

/// A SignatureDef: inputs and outputs sorted by key.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Signature {
    pub inputs: Vec<SignatureTensor>,
    pub outputs: Vec<SignatureTensor>,
}

/// A variable restored from the SavedModel's checkpoint.
#[derive(Clone, Debug)]
pub struct RestoredVariable {
    /// The session's name for it (the `VarHandleOp`'s `shared_name`, else its node name).
    pub name: String,
    /// Its checkpoint key.
    pub key: String,
    pub value: Tensor,
}

/// A loaded SavedModel.
#[derive(Debug)]
pub struct SavedModel {
    pub graph: Graph,
    /// By signature name (`serving_default`, `train_step`, …); TensorFlow's
    /// internal `__saved_model_init_op` is left out.
    pub signatures: BTreeMap<String, Signature>,
    /// Every variable a signature's function captures, sorted by name.
    pub variables: Vec<RestoredVariable>,
    /// The checkpoint's serialized object graph, written back into
    /// checkpoints saved from this model so `tf.train.Checkpoint` can restore them.
    pub object_graph: Option<Tensor>,
    /// The op that initialises the model's other resources (its lookup tables), run once
    /// before anything else as TensorFlow's loader does: the `__saved_model_init_op`
    /// signature's output, or a TF1 model's `saved_model_main_op` / `legacy_init_op`.
    pub init_op: Option<String>,
    /// The string tensors that carry the asset files' paths into `init_op`, with each
    /// file's path in the SavedModel's `assets/` directory.
    pub asset_feeds: Vec<(String, String)>,
    /// A TF1 SavedModel's variables are restored by running its Saver's restore op with the
    /// checkpoint prefix fed, as TensorFlow's loader does (such a model has no object graph
    /// to map variables by); so are a TF2 SavedModel's mutable lookup tables (and, again,
    /// its variables). Run before `init_op`.
    pub restore: Option<SaverRestore>,
}

/// The Saver restore a TF1 SavedModel's loader runs ([`SavedModel::restore`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaverRestore {
    /// The op to run (`save/restore_all`).
    pub op: String,
    /// The string tensor to feed the checkpoint prefix to (`save/Const:0`).
    pub filename_tensor: String,
    /// `DIR/variables/variables`.
    pub prefix: String,
}

/// Why a SavedModel could not be loaded; every variant names the file at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SavedModelError {
    #[error("{path}: cannot read: {message}")]
    Io { path: String, message: String },
    #[error("{path}: not a SavedModel: {message}")]
    Proto { path: String, message: String },
    #[error("{path}: {source}")]
    Graph { path: String, source: GraphDefError },
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error("{path}: {message}")]
    Restore { path: String, message: String },
}

/// `DIR/variables/variables`, the checkpoint prefix of a SavedModel.
pub fn variables_prefix(dir: &Path) -> PathBuf {
    dir.join("variables").join("variables")
}

/// The graph of the SavedModel in `dir` alone (its MetaGraphDef as [`load_saved_model`] picks
/// it), for the commands that need no variable values (`analyze`, `cluster`, `convert`,
/// `opt`): a directory whose `variables/` is missing or damaged still reads.
pub fn load_saved_model_graph(dir: &Path) -> Result<Graph, SavedModelError> {
    let (meta, shown) = read_meta_graph(dir)?;
    graph_from_proto(meta.graph_def.unwrap_or_default(), &[])
        .map_err(|source| SavedModelError::Graph { path: shown, source })
}

/// The MetaGraphDef tagged `serve` (else the first) of `dir/saved_model.pb`, and that file's
/// path as errors show it.
fn read_meta_graph(dir: &Path) -> Result<(MetaGraphDef, String), SavedModelError> {
    let pb_path = dir.join("saved_model.pb");
    let shown = pb_path.display().to_string();
    let bytes =
        std::fs::read(&pb_path).map_err(|e| SavedModelError::Io { path: shown.clone(), message: e.to_string() })?;
    let proto_err = |message: String| SavedModelError::Proto { path: shown.clone(), message };
    if let Some(at) = crate::wire::first_incomplete_field(&bytes) {
        // Cut short: rust-protobuf would read a smaller model (`wire::first_incomplete_field`).
        return Err(proto_err(format!(
            "truncated or corrupt: the field at byte {at} runs past the end of the {} bytes",
            bytes.len()
        )));
    }
    let sm = SavedModelProto::parse_from_bytes(&bytes).map_err(|e| proto_err(e.to_string()))?;
    let mut metas = sm.meta_graphs;
    if metas.is_empty() {
        return Err(proto_err("no MetaGraphDef".into()));
    }
    let pick = metas.iter().position(|m| m.meta_info_def.tags.iter().any(|t| t == "serve")).unwrap_or(0);
    Ok((metas.swap_remove(pick), shown))
}

/// Reads the SavedModel in `dir` (the MetaGraphDef tagged `serve`, else the first).
pub fn load_saved_model(dir: &Path) -> Result<SavedModel, SavedModelError> {
    let _span = tracing::info_span!("load_saved_model", dir = %dir.display()).entered();
    let (meta, shown) = read_meta_graph(dir)?;
    let proto_err = |message: String| SavedModelError::Proto { path: shown.clone(), message };
    let graph = graph_from_proto(meta.graph_def.clone().unwrap_or_default(), &[])
        .map_err(|source| SavedModelError::Graph { path: shown.clone(), source })?;

    let node_of = |tensor: &str| tensor.split(':').next().unwrap_or(tensor).trim_start_matches('^').to_string();
    let init_op = meta
        .signature_def
        .get("__saved_model_init_op")
        .and_then(|def| def.outputs.values().next())
        .map(|info| node_of(&info.name))
        .or_else(|| {
            ["saved_model_main_op", "legacy_init_op"].iter().find_map(|k| {
                let list = meta.collection_def.get(*k)?.node_list().value.first()?;
                Some(node_of(list))
            })
        })
        .filter(|n| graph.find(n).is_some());
    // TF1's `Builder` records its assets in the `saved_model_assets` collection instead.
    let collected: Vec<AssetFileDef> = meta
        .collection_def
        .get("saved_model_assets")
        .filter(|c| c.has_any_list())
        .map(|c| c.any_list().value.iter().filter_map(|any| AssetFileDef::parse_from_bytes(&any.value).ok()).collect())
        .unwrap_or_default();
    let mut asset_feeds: Vec<(String, String)> = meta
        .asset_file_def
        .iter()
        .chain(&collected)
        .filter(|a| !a.tensor_info.name.is_empty())
        .map(|a| {
            let tensor = &a.tensor_info.name;
            let tensor = if tensor.contains(':') { tensor.clone() } else { format!("{tensor}:0") };
            (tensor, dir.join("assets").join(&a.filename).display().to_string())
        })
        .collect();
    // A tensor named in both places is fed once.
    asset_feeds.sort();
    asset_feeds.dedup_by(|a, b| a.0 == b.0);

    let mut signatures = BTreeMap::new();
    for (name, def) in &meta.signature_def {
        if name.starts_with("__") {
            continue;
        }
        let side =
            |m: &std::collections::HashMap<String, TensorInfo>| -> Result<Vec<SignatureTensor>, SavedModelError> {
                let mut v = Vec::new();
                for (key, info) in m {
                    if info.name.is_empty() {
                        return Err(proto_err(format!("signature '{name}': '{key}' is not a dense tensor")));
                    }
                    let tensor = if info.name.contains(':') { info.name.clone() } else { format!("{}:0", info.name) };
                    let node = tensor.rsplit_once(':').map_or(tensor.as_str(), |(n, _)| n);
                    if graph.find(node).is_none() {
                        return Err(proto_err(format!(
                            "signature '{name}': '{key}' names '{tensor}', not in the graph"
                        )));
                    }
                    v.push(SignatureTensor { key: key.clone(), tensor, dtype: DType::from_tf(info.dtype.value()) });
                }
                v.sort_by(|a, b| a.key.cmp(&b.key));
                Ok(v)
            };
        signatures.insert(name.clone(), Signature { inputs: side(&def.inputs)?, outputs: side(&def.outputs)? });
    }

    // Graph variable name → saved-object node id, from the calls' captured inputs.
    let saved = meta.object_graph_def.clone().unwrap_or_default();
    let mut var_objects: BTreeMap<String, i32> = BTreeMap::new();
    for id in graph.node_ids() {
        let node = graph.node(id);
        let callee = node.attr("f").and_then(|a| a.as_func()).map(|f| f.name.as_str()).unwrap_or(node.op.as_str());
        let Some(cf) = saved.concrete_functions.get(callee) else { continue };
        let k = cf.bound_inputs.len();
        if k > node.inputs.len() {
            continue;
        }
        for (input, &object) in node.inputs[node.inputs.len() - k..].iter().zip(&cf.bound_inputs) {
            let handle = graph.node(input.node);
            if handle.op != "VarHandleOp" {
                continue;
            }
            let shared = handle.attr("shared_name").and_then(|a| a.as_str()).unwrap_or("");
            let name = if shared.is_empty() { handle.name.clone() } else { shared.to_string() };
            var_objects.insert(name, object);
        }
    }

    let prefix = variables_prefix(dir);
    let (variables, object_graph) = if var_objects.is_empty() {
        (Vec::new(), None)
    } else {
        let tensors = read_checkpoint(&prefix)?;
        let ckpt_path = crate::tensor_bundle::index_path(&prefix).display().to_string();
        let restore_err = |message: String| SavedModelError::Restore { path: ckpt_path.clone(), message };
        let object_graph = tensors.iter().find(|(k, _)| k == OBJECT_GRAPH_KEY).map(|(_, t)| t.clone());
        let keys = checkpoint_keys(&saved, object_graph.as_ref()).map_err(&restore_err)?;
        let by_key: HashMap<&str, &Tensor> = tensors.iter().map(|(k, t)| (k.as_str(), t)).collect();
        let mut variables = Vec::new();
        for (name, object) in var_objects {
            let key = keys.get(&object).ok_or_else(|| {
                restore_err(format!("variable '{name}' (object {object}) has no checkpoint key in the object graph"))
            })?;
            let value = by_key
                .get(key.as_str())
                .ok_or_else(|| restore_err(format!("variable '{name}': no tensor '{key}' in the checkpoint")))?;
            variables.push(RestoredVariable { name, key: key.clone(), value: (*value).clone() });
        }
        (variables, object_graph)
    };
    // A TF1 SavedModel (no object graph): its Saver restores the variables by name. A TF2
    // SavedModel's mutable lookup tables keep their entries in the checkpoint too (as
    // `table-keys`/`table-values`, which its traced restore function imports), so its Saver
    // restore runs as well when it has one.
    let saver = meta.saver_def.clone().unwrap_or_default();
    let mutable_tables =
        graph.nodes().iter().any(|n| matches!(n.op.as_str(), "MutableHashTableV2" | "MutableDenseHashTableV2"));
    let restore = ((meta.object_graph_def.is_none() || mutable_tables)
        && !saver.restore_op_name.is_empty()
        && graph.find(&node_of(&saver.restore_op_name)).is_some()
        && crate::tensor_bundle::index_path(&prefix).is_file())
    .then(|| SaverRestore {
        op: node_of(&saver.restore_op_name),
        filename_tensor: if saver.filename_tensor_name.contains(':') {
            saver.filename_tensor_name.clone()
        } else {
            format!("{}:0", saver.filename_tensor_name)
        },
        prefix: prefix.display().to_string(),
    });
    tracing::debug!(nodes = graph.len(), signatures = signatures.len(), variables = variables.len(), "loaded");
    Ok(SavedModel { graph, signatures, variables, object_graph, init_op, asset_feeds, restore })
}

/// Saved-object node id → checkpoint key of its `VARIABLE_VALUE`, by walking
/// both object graphs from the root together (breadth-first, by child name).
fn checkpoint_keys(saved: &SavedObjectGraph, object_graph: Option<&Tensor>) -> Result<HashMap<i32, String>, String> {
    let Some(t) = object_graph else {
        return Err(format!("the checkpoint has no '{OBJECT_GRAPH_KEY}' to map variables by"));
    };
    let TensorData::Str(items) = &t.data else {
        return Err(format!("'{OBJECT_GRAPH_KEY}' is not a string tensor"));
    };
    let bytes = items.first().ok_or_else(|| format!("'{OBJECT_GRAPH_KEY}' is empty"))?;
    let ckpt = TrackableObjectGraph::parse_from_bytes(bytes).map_err(|e| format!("bad '{OBJECT_GRAPH_KEY}': {e}"))?;
    let mut keys = HashMap::new();
    let mut seen = vec![false; saved.nodes.len()];
    let mut queue = VecDeque::from([(0usize, 0usize)]);
    while let Some((s, c)) = queue.pop_front() {
        let (Some(sn), Some(cn)) = (saved.nodes.get(s), ckpt.nodes.get(c)) else { continue };
        if std::mem::replace(&mut seen[s], true) {
            continue;
        }
        if let Some(attr) = cn.attributes.iter().find(|a| a.name == "VARIABLE_VALUE") {
            keys.insert(s as i32, attr.checkpoint_key.clone());
        }
        for child in &sn.children {
            if let Some(cc) = cn.children.iter().find(|x| x.local_name == child.local_name) {
                if let (Ok(a), Ok(b)) = (usize::try_from(child.node_id), usize::try_from(cc.node_id)) {
                    queue.push_back((a, b));
                }
            }
        }
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/savedmodel").join(name)
    }

    #[test]
    fn loads_signatures_and_variables() {
        let m = load_saved_model(&fixture("train")).unwrap();
        assert_eq!(m.signatures.keys().collect::<Vec<_>>(), ["serving_default", "train_step"]);
        let t = &m.signatures["train_step"];
        let ins: Vec<(&str, &str)> = t.inputs.iter().map(|s| (s.key.as_str(), s.tensor.as_str())).collect();
        assert_eq!(ins, [("x", "train_step_x:0"), ("y", "train_step_y:0")]);
        assert_eq!(t.outputs[0].key, "loss");
        let vars: Vec<(&str, &str)> = m.variables.iter().map(|v| (v.name.as_str(), v.key.as_str())).collect();
        assert_eq!(vars, [("b", "b/.ATTRIBUTES/VARIABLE_VALUE"), ("w", "w/.ATTRIBUTES/VARIABLE_VALUE")]);
        assert_eq!(m.variables[1].value.shape, vec![3, 2]);
        assert!(m.object_graph.is_some());
    }

    #[test]
    fn keras_export_maps_variables_through_the_object_graph() {
        let m = load_saved_model(&fixture("cnn")).unwrap();
        assert!(m.signatures.contains_key("serving_default"));
        // Keras names the handles `conv/kernel_1`…; the checkpoint keys are `variables/N`.
        let k = m.variables.iter().find(|v| v.name == "conv/kernel_1").unwrap();
        assert_eq!(k.key, "variables/0/.ATTRIBUTES/VARIABLE_VALUE");
        assert_eq!(k.value.shape, vec![3, 3, 1, 4]);
        assert_eq!(m.variables.len(), 4);
    }

    #[test]
    fn missing_and_corrupt_parts_name_the_file() {
        let dir = std::env::temp_dir().join(format!("autoclust-sm-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("variables")).unwrap();
        let e = load_saved_model(&dir).unwrap_err().to_string();
        assert!(e.contains("saved_model.pb: cannot read"), "{e}");
        std::fs::write(dir.join("saved_model.pb"), b"\xff\xff\xff").unwrap();
        let e = load_saved_model(&dir).unwrap_err().to_string();
        assert!(e.contains("saved_model.pb: not a SavedModel"), "{e}");
        // Cut short (a partial download): an error, not a smaller model.
        let pb = std::fs::read(fixture("dense2/saved_model.pb")).unwrap();
        std::fs::write(dir.join("saved_model.pb"), &pb[..pb.len() - 3]).unwrap();
        let e = load_saved_model(&dir).unwrap_err().to_string();
        assert!(e.contains("saved_model.pb: not a SavedModel") && e.contains("truncated"), "{e}");
        std::fs::copy(fixture("dense2/saved_model.pb"), dir.join("saved_model.pb")).unwrap();
        let e = load_saved_model(&dir).unwrap_err().to_string();
        assert!(e.contains("variables.index: cannot read"), "{e}");
        std::fs::copy(fixture("dense2/variables/variables.index"), dir.join("variables/variables.index")).unwrap();
        let e = load_saved_model(&dir).unwrap_err().to_string();
        assert!(e.contains("variables.data-00000-of-00001: cannot read"), "{e}");
        let mut data = std::fs::read(fixture("dense2/variables/variables.data-00000-of-00001")).unwrap();
        data[0] ^= 1;
        std::fs::write(dir.join("variables/variables.data-00000-of-00001"), data).unwrap();
        let e = load_saved_model(&dir).unwrap_err().to_string();
        assert!(e.contains("checksum mismatch"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
