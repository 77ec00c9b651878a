//! What the commands add for SavedModels, checkpoints and numpy files
//! (docs/contract.md §2–3): the selected signature (feeds keyed by its input
//! names, fetches by its output keys) for `run`, `bench`, `explore` and
//! `verify`, the signature's share of the graph for the graph-only commands
//! ([`load_graph_for_signature`]), the variables restored from the
//! SavedModel's checkpoint, `--vars` from a checkpoint prefix, feeds from
//! `.npy`/`.npz`, and `--save-checkpoint`, which writes the variables under
//! the SavedModel's checkpoint keys (with its object graph, so
//! `tf.train.Checkpoint` restores it as well as `tf.train.load_checkpoint`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use autoclust_graph::{DType, Graph, Tensor};
use autoclust_graphdef::saved_model::{SavedModel, SaverRestore, Signature};
use autoclust_graphdef::tensor_bundle::{self, OBJECT_GRAPH_KEY};
use autoclust_runtime::numpy::{read_npy, read_npz};
use autoclust_runtime::tensor_io::read_safetensors;

use crate::io::{check_acyclic, load_graph, load_graph_to_run, load_saved_model, to_run, Format};
use crate::CliError;

/// The SavedModel a graph came from, with the signature `--signature` picked.
#[derive(Clone, Debug, Default)]
pub struct ModelContext {
    /// The directory, as errors show it.
    pub dir: String,
    pub signature_name: String,
    pub signature: Signature,
    /// Initial variable values, named as the session names them.
    pub variables: Vec<(String, Tensor)>,
    /// Session variable name → checkpoint key.
    pub keys: BTreeMap<String, String>,
    pub object_graph: Option<Tensor>,
    /// The op that initialises the model's lookup tables (TensorFlow's loader runs it once,
    /// before anything else), and the asset paths it is fed.
    pub init_op: Option<String>,
    pub asset_feeds: Vec<(String, String)>,
    /// A TF1 SavedModel's Saver restore, run before `init_op`.
    pub restore: Option<SaverRestore>,
    /// A program `compile --signature` wrote ([`compiled_signature`]): feeds and fetches may
    /// also name its tensors (`node` or `node:port`), as before the signature was recorded.
    pub by_node_name: bool,
}

impl ModelContext {
    fn inputs_list(&self) -> String {
        self.signature.inputs.iter().map(|i| i.key.as_str()).collect::<Vec<_>>().join(", ")
    }

    /// The graph tensor of the signature input `key`.
    pub fn feed_tensor(&self, key: &str, what: &str) -> Result<String, CliError> {
        let found = self.signature.inputs.iter().find(|i| i.key == key);
        if found.is_none() && self.by_node_name {
            return Ok(key.to_string());
        }
        found.map(|i| i.tensor.clone()).ok_or_else(|| {
            CliError::input(format!(
                "{what}: '{key}' is not an input of signature '{}' of {} (inputs: {})",
                self.signature_name,
                self.dir,
                self.inputs_list()
            ))
        })
    }

    /// The graph tensor of the signature output `key`.
    pub fn fetch_tensor(&self, key: &str) -> Result<String, CliError> {
        let found = self.signature.outputs.iter().find(|o| o.key == key);
        if found.is_none() && self.by_node_name {
            return Ok(key.to_string());
        }
        found.map(|o| o.tensor.clone()).ok_or_else(|| {
            let outs: Vec<&str> = self.signature.outputs.iter().map(|o| o.key.as_str()).collect();
            CliError::input(format!(
                "--fetch: '{key}' is not an output of signature '{}' of {} (outputs: {})",
                self.signature_name,
                self.dir,
                outs.join(", ")
            ))
        })
    }

    /// Whether `key` is one of the signature's output keys.
    pub fn is_output_key(&self, key: &str) -> bool {
        self.signature.outputs.iter().any(|o| o.key == key)
    }

    /// An error when a signature input has no value among `fed` (input keys; for a compiled
    /// program also the input's tensor or node name).
    pub fn check_all_fed(&self, fed: &[String]) -> Result<(), CliError> {
        let is_fed = |i: &autoclust_graphdef::saved_model::SignatureTensor| {
            fed.contains(&i.key)
                || (self.by_node_name
                    && fed.iter().any(|f| *f == i.tensor || i.tensor.rsplit_once(':').is_some_and(|(n, _)| n == f)))
        };
        match self.signature.inputs.iter().find(|i| !is_fed(i)) {
            Some(i) => Err(CliError::input(format!(
                "signature '{}' of {}: input '{}' is not fed (use --feeds F.npz or --feed {}=JSON)",
                self.signature_name, self.dir, i.key, i.key
            ))),
            None => Ok(()),
        }
    }
}

/// Whether `path` (with `--format`) names a SavedModel directory.
pub fn is_saved_model(path: &Path, format: Option<Format>) -> Result<bool, CliError> {
    Ok(path.as_os_str() != "-" && Format::for_path(path, format)? == Format::SavedModel)
}

/// The SavedModel in `path`, read once: its graph (checked as every loaded graph is) and
/// the signature `signature` (default `serving_default`) with its variables restored from
/// the checkpoint; an unknown signature is an error listing the available ones.
pub fn load_model(path: &Path, signature: Option<&str>) -> Result<(Graph, ModelContext), CliError> {
    let sm = load_saved_model(path)?;
    let dir = path.display().to_string();
    check_acyclic(&sm.graph, &dir)?;
    let SavedModel { graph, mut signatures, variables, object_graph, init_op, asset_feeds, restore } = sm;
    let name = signature.unwrap_or("serving_default");
    let Some(sig) = signatures.remove(name) else {
        let names: Vec<&str> = signatures.keys().map(String::as_str).collect();
        let available = if names.is_empty() { "none".to_string() } else { names.join(", ") };
        return Err(CliError::input(format!("{dir}: no signature '{name}' (available: {available})")));
    };
    let keys = variables.iter().map(|v| (v.name.clone(), v.key.clone())).collect();
    let variables = variables.into_iter().map(|v| (v.name, v.value)).collect();
    let model = ModelContext {
        dir,
        signature_name: name.to_string(),
        signature: sig,
        variables,
        keys,
        object_graph,
        init_op,
        asset_feeds,
        restore,
        by_node_name: false,
    };
    Ok((graph, model))
}

/// `--signature` without a SavedModel is a usage error.
pub fn no_signature_without_model(path: &Path, signature: Option<&str>) -> Result<(), CliError> {
    match signature {
        Some(_) => Err(CliError::usage(format!("{}: --signature needs a SavedModel directory", path.display()))),
        None => Ok(()),
    }
}

/// The graph of `path` for the graph-only commands (`analyze`, `cluster`, `convert`, `opt`,
/// `compile`): as written, or with `--signature NAME` (a SavedModel only) the signature's
/// share of it ([`load_signature_graph`]).
pub fn load_graph_for_signature(
    path: &Path,
    format: Option<Format>,
    signature: Option<&str>,
) -> Result<Graph, CliError> {
    Ok(load_signature_graph(path, format, signature)?.0)
}

/// The graph of `path` as written, or with `--signature NAME` (a SavedModel only) the
/// signature's share of it: its function calls inlined (as `run` does) and the graph pruned to
/// the signature's outputs (every variable kept, each marked with its checkpoint key), with
/// the model the signature came from.
pub fn load_signature_graph(
    path: &Path,
    format: Option<Format>,
    signature: Option<&str>,
) -> Result<(Graph, Option<ModelContext>), CliError> {
    let Some(name) = signature else { return Ok((load_graph(path, format)?, None)) };
    if !is_saved_model(path, format)? {
        no_signature_without_model(path, signature)?;
    }
    let (graph, model) = load_model(path, Some(name))?;
    let shown = || path.display().to_string();
    let (graph, _) =
        autoclust_passes::inline::inline_calls(&graph).map_err(|e| CliError::input(format!("{}: {e}", shown())))?;
    let mut fetches = Vec::new();
    for out in &model.signature.outputs {
        let (node, port) = out.tensor.rsplit_once(':').unwrap_or((out.tensor.as_str(), "0"));
        let found = graph.find(node).zip(port.parse::<u32>().ok());
        let (node, port) = found.ok_or_else(|| {
            CliError::input(format!(
                "{}: signature '{name}': output '{}' names no tensor of the graph",
                shown(),
                out.key
            ))
        })?;
        fetches.push(autoclust_graph::Output { node, port });
    }
    let mut graph = autoclust_passes::pipeline::prune(&graph, &fetches, &[])
        .map_err(|e| CliError::input(format!("{}: {e}", shown())))?;
    mark_checkpoint_keys(&mut graph, &model);
    Ok((graph, Some(model)))
}

/// Records `model`'s signature on the program `compile --signature` made of it: each input's
/// `Placeholder` and each node whose outputs the signature returns carry
/// [`SIGNATURE_ATTR`](autoclust_graph::protocol::SIGNATURE_ATTR) and their keys, so `run` and
/// `bench` take the signature's feeds and fetches, as for the SavedModel ([`compiled_signature`]).
/// A tensor the program no longer has (`compile --fetch` pruned it) is left out.
pub fn mark_signature(graph: &mut Graph, model: &ModelContext) {
    use autoclust_graph::protocol::{SIGNATURE_ATTR, SIGNATURE_INPUT_ATTR, SIGNATURE_OUTPUTS_ATTR};
    use autoclust_graph::{AttrValue, ListValue};
    let split = |t: &str| -> (String, String) {
        let (n, p) = t.rsplit_once(':').unwrap_or((t, "0"));
        (n.to_string(), p.to_string())
    };
    let sig_name = AttrValue::S(model.signature_name.clone().into_bytes());
    for input in &model.signature.inputs {
        let (node, _) = split(&input.tensor);
        if let Some(id) = graph.find(&node) {
            let attrs = graph.attrs_mut(id);
            attrs.insert(SIGNATURE_ATTR.into(), sig_name.clone());
            attrs.insert(SIGNATURE_INPUT_ATTR.into(), AttrValue::S(input.key.clone().into_bytes()));
        }
    }
    let mut outputs: BTreeMap<String, Vec<Vec<u8>>> = BTreeMap::new();
    for out in &model.signature.outputs {
        let (node, port) = split(&out.tensor);
        outputs.entry(node).or_default().push(format!("{}={port}", out.key).into_bytes());
    }
    for (node, entries) in outputs {
        if let Some(id) = graph.find(&node) {
            let attrs = graph.attrs_mut(id);
            attrs.insert(SIGNATURE_ATTR.into(), sig_name.clone());
            attrs.insert(SIGNATURE_OUTPUTS_ATTR.into(), AttrValue::List(ListValue::S(entries)));
        }
    }
}

/// The signature a program `compile --signature` wrote records ([`mark_signature`]), as the
/// model `run` and `bench` take feeds and fetches by; `None` for any other graph. Its variables
/// come from `--vars` (the SavedModel's checkpoint: each variable carries its key).
pub fn compiled_signature(graph: &Graph, path: &Path) -> Option<ModelContext> {
    use autoclust_graph::protocol::{
        CHECKPOINT_KEY_ATTR, SIGNATURE_ATTR, SIGNATURE_INPUT_ATTR, SIGNATURE_OUTPUTS_ATTR,
    };
    use autoclust_graph::{AttrValue, ListValue};
    use autoclust_graphdef::saved_model::SignatureTensor;
    let text = |v: &[u8]| String::from_utf8_lossy(v).into_owned();
    let mut name = None;
    let mut signature = Signature::default();
    let mut keys = BTreeMap::new();
    for n in graph.nodes() {
        if let Some(AttrValue::S(k)) = n.attr(CHECKPOINT_KEY_ATTR) {
            keys.insert(variable_name(n), text(k));
        }
        let Some(AttrValue::S(sig)) = n.attr(SIGNATURE_ATTR) else { continue };
        name.get_or_insert_with(|| text(sig));
        if let Some(AttrValue::S(key)) = n.attr(SIGNATURE_INPUT_ATTR) {
            let dtype = n.attr("dtype").and_then(|a| a.as_type());
            signature.inputs.push(SignatureTensor { key: text(key), tensor: format!("{}:0", n.name), dtype });
        }
        if let Some(AttrValue::List(ListValue::S(entries))) = n.attr(SIGNATURE_OUTPUTS_ATTR) {
            for e in entries {
                let e = text(e);
                let (key, port) = e.rsplit_once('=').unwrap_or((e.as_str(), "0"));
                let tensor = format!("{}:{port}", n.name);
                signature.outputs.push(SignatureTensor { key: key.to_string(), tensor, dtype: None });
            }
        }
    }
    signature.inputs.sort_by(|a, b| a.key.cmp(&b.key));
    signature.outputs.sort_by(|a, b| a.key.cmp(&b.key));
    Some(ModelContext {
        dir: path.display().to_string(),
        signature_name: name?,
        signature,
        keys,
        by_node_name: true,
        ..Default::default()
    })
}

/// Writes on each variable node of `graph` the key the model's checkpoint stores it under
/// ([`autoclust_graph::protocol::CHECKPOINT_KEY_ATTR`]), so a program compiled from a
/// signature takes the SavedModel's own checkpoint as `--vars`.
fn mark_checkpoint_keys(graph: &mut Graph, model: &ModelContext) {
    use autoclust_graph::protocol::CHECKPOINT_KEY_ATTR;
    let marks: Vec<(autoclust_graph::NodeId, String)> = graph
        .node_ids()
        .filter(|&id| autoclust_graph::effects::names_variable(graph.node(id)))
        .filter_map(|id| model.keys.get(&variable_name(graph.node(id))).map(|k| (id, k.clone())))
        .collect();
    for (id, key) in marks {
        graph.attrs_mut(id).insert(CHECKPOINT_KEY_ATTR.into(), autoclust_graph::AttrValue::S(key.into_bytes()));
    }
}

/// The name a session gives the variable of node `n`.
fn variable_name(n: &autoclust_graph::Node) -> String {
    let (container, name) = autoclust_graph::effects::resource_key(n);
    autoclust_graph::effects::variable_display_name(container, name)
}

/// Loads a graph for `run`/`bench`; for a SavedModel also its signature
/// (`signature`, default `serving_default`) and variables; for a program `compile --signature`
/// wrote, the signature it records.
pub fn load_to_run(
    path: &Path,
    format: Option<Format>,
    signature: Option<&str>,
) -> Result<(Graph, Option<ModelContext>), CliError> {
    if !is_saved_model(path, format)? {
        no_signature_without_model(path, signature)?;
        let graph = load_graph_to_run(path, format)?;
        let model = compiled_signature(&graph, path);
        return Ok((graph, model));
    }
    let (graph, model) = load_model(path, signature)?;
    Ok((to_run(graph, path)?, Some(model)))
}

fn read_file(path: &Path) -> Result<Vec<u8>, CliError> {
    std::fs::read(path).map_err(|e| CliError::input(format!("{}: cannot read: {e}", path.display())))
}

/// The tensors of a feeds file: safetensors, `.npz` (keyed by member
/// name) or `.npy` (one tensor, keyed `None`: the only input).
pub fn read_feed_file(path: &Path) -> Result<Vec<(Option<String>, Tensor)>, CliError> {
    let bytes = read_file(path)?;
    let err = |e: autoclust_runtime::tensor_io::TensorIoError| CliError::input(format!("{}: {e}", path.display()));
    Ok(match path.extension().and_then(|e| e.to_str()) {
        Some("npy") => vec![(None, read_npy(&bytes).map_err(err)?)],
        Some("npz") => read_npz(&bytes).map_err(err)?.into_iter().map(|(n, t)| (Some(n), t)).collect(),
        _ => read_safetensors(&bytes).map_err(err)?.into_iter().map(|(n, t)| (Some(n), t)).collect(),
    })
}

/// The one input a `.npy` feed goes to: the signature's only input, else the graph's only
/// (non-resource) `Placeholder` — among those the request's fetches and targets (`request`,
/// `node` or `node:port`) depend on, when it names any.
pub fn only_input(
    graph: &Graph,
    model: Option<&ModelContext>,
    path: &Path,
    request: &[String],
) -> Result<String, CliError> {
    let is_feed = |n: &autoclust_graph::Node| {
        n.op == "Placeholder" && n.attr("dtype").and_then(|a| a.as_type()) != Some(DType::Resource)
    };
    let roots = request
        .iter()
        .filter_map(|r| graph.find(r).or_else(|| graph.find(r.rsplit_once(':').map_or(r.as_str(), |(n, _)| n))));
    let needed = graph.ancestors(roots, |_| false);
    let candidates: Vec<String> = match model {
        Some(m) => m.signature.inputs.iter().map(|i| i.key.clone()).collect(),
        None => {
            let all: Vec<&autoclust_graph::Node> = graph.nodes().iter().filter(|n| is_feed(n)).collect();
            let used: Vec<&autoclust_graph::Node> = graph
                .node_ids()
                .filter(|id| needed[id.index()] && is_feed(graph.node(*id)))
                .map(|id| graph.node(id))
                .collect();
            if used.is_empty() { all } else { used }.iter().map(|n| n.name.clone()).collect()
        }
    };
    match candidates.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(CliError::input(format!(
            "{}: a .npy file feeds one input, but there are {} ({}); use .npz keyed by name",
            path.display(),
            candidates.len(),
            candidates.join(", ")
        ))),
    }
}

/// Whether `path` names a checkpoint prefix (`PATH.index` exists) rather than a file.
pub fn is_checkpoint_prefix(path: &Path) -> bool {
    !path.is_file() && tensor_bundle::index_path(path).is_file()
}

/// `--vars`: a safetensors file, or a checkpoint prefix whose keys are
/// session variable names or (for a SavedModel) its checkpoint keys. A key that names no
/// variable of `graph` but a TF1 partitioned variable (`emb` saved whole, the graph holding
/// `emb/part_0`, `emb/part_1`, …) gives each part its slice, as the graph's Saver
/// ([`partitions`]) would restore it, or, with no Saver in the graph, as the parts' names and
/// shapes say ([`parts_by_name`]).
pub fn read_vars(path: &Path, model: Option<&ModelContext>, graph: &Graph) -> Result<Vec<(String, Tensor)>, CliError> {
    if !is_checkpoint_prefix(path) {
        let bytes = read_file(path)?;
        return read_safetensors(&bytes).map_err(|e| CliError::input(format!("{}: {e}", path.display())));
    }
    let tensors = tensor_bundle::read_checkpoint(path).map_err(|e| CliError::input(e.to_string()))?;
    // Keys a SavedModel's checkpoint uses: its own, or those a program compiled from one of
    // its signatures records on its variables (`CHECKPOINT_KEY_ATTR`).
    let marked: Vec<(String, String)> = graph
        .nodes()
        .iter()
        .filter_map(|n| match n.attr(autoclust_graph::protocol::CHECKPOINT_KEY_ATTR) {
            Some(autoclust_graph::AttrValue::S(k)) => Some((String::from_utf8_lossy(k).into_owned(), variable_name(n))),
            _ => None,
        })
        .collect();
    let by_key: BTreeMap<&str, &str> = match model {
        Some(m) => m.keys.iter().map(|(n, k)| (k.as_str(), n.as_str())).collect(),
        None => marked.iter().map(|(k, n)| (k.as_str(), n.as_str())).collect(),
    };
    let mut parts = partitions(graph);
    let mut vars = Vec::with_capacity(tensors.len());
    for (k, t) in tensors.into_iter().filter(|(k, _)| k != OBJECT_GRAPH_KEY) {
        if let Some(n) = by_key.get(k.as_str()) {
            vars.push((n.to_string(), t));
            continue;
        }
        if !parts.contains_key(&k) && !names_variable(graph, &k) {
            if let Some(list) = parts_by_name(graph, &k, &t.shape) {
                parts.insert(k.clone(), list);
            }
        }
        match parts.get(&k).filter(|_| !names_variable(graph, &k)) {
            Some(list) => {
                for (var, spec) in list {
                    let part = autoclust_runtime::kernels::checkpoint_slice(&t, spec, &k)
                        .map_err(|e| CliError::input(format!("{}: {e}", path.display())))?;
                    vars.push((var.clone(), part));
                }
            }
            None => vars.push((k, t)),
        }
    }
    Ok(vars)
}

/// Whether `graph` has a variable node called `name`.
fn names_variable(graph: &Graph, name: &str) -> bool {
    graph.find(name).is_some_and(|id| autoclust_graph::effects::names_variable(graph.node(id)))
}

/// The parts of a TF1 partitioned variable saved whole as `key` (shape `full`) when the graph
/// has no Saver to say how it was cut: its variables `key/part_0`, `key/part_1`, … in order
/// (for an optimizer's slot saved as `emb/Adagrad`, `emb/part_0/Adagrad`, …), each the next
/// run of the one dimension along which their shapes (their `shape` attributes) differ from
/// `full` — how `fixed_size_partitioner` and the other TF1 partitioners cut a variable, along
/// one axis. `None` unless the parts tile `full` exactly.
fn parts_by_name(graph: &Graph, key: &str, full: &[usize]) -> Option<Vec<(String, String)>> {
    let splits = key.match_indices('/').map(|(i, _)| (&key[..i], &key[i..])).chain([(key, "")]);
    let (base, rest) = splits.filter(|(b, r)| graph.find(&format!("{b}/part_0{r}")).is_some()).last()?;
    let mut shapes: Vec<(String, Vec<usize>)> = Vec::new();
    while let Some(id) = graph.find(&format!("{base}/part_{}{rest}", shapes.len())) {
        let node = graph.node(id);
        if !autoclust_graph::effects::names_variable(node) {
            return None;
        }
        let dims = node.attr("shape").and_then(|a| a.as_shape())?.dims.clone()?;
        let dims: Vec<usize> = dims.iter().map(|&d| d.and_then(|d| usize::try_from(d).ok())).collect::<Option<_>>()?;
        shapes.push((node.name.clone(), dims));
    }
    if shapes.len() < 2 || shapes.iter().any(|(_, d)| d.len() != full.len()) {
        return None;
    }
    // The axis of the cut: the one dimension where some part is shorter than `full`.
    let axis = (0..full.len()).find(|&a| shapes.iter().any(|(_, d)| d[a] != full[a])).unwrap_or(0);
    let fits = shapes.iter().all(|(_, d)| (0..full.len()).all(|a| a == axis || d[a] == full[a]));
    if !fits || shapes.iter().map(|(_, d)| d[axis]).sum::<usize>() != full[axis] {
        return None;
    }
    let head: Vec<String> = full.iter().map(usize::to_string).collect();
    let mut start = 0;
    let mut out = Vec::with_capacity(shapes.len());
    for (name, d) in shapes {
        let ranges: Vec<String> =
            (0..full.len()).map(|a| if a == axis { format!("{start},{}", d[a]) } else { "-".into() }).collect();
        start += d[axis];
        out.push((name, format!("{} {}", head.join(" "), ranges.join(":"))));
    }
    Some(out)
}

/// A TF1 graph's partitioned variables, from its Saver's `SaveV2` nodes: checkpoint key →
/// each part variable with its `shape_and_slices` spec (`"10 4 0,4:0,4"`). A saved tensor
/// reaches `SaveV2` from its variable directly or through `Identity`/`ReadVariableOp`.
pub fn partitions(graph: &Graph) -> BTreeMap<String, Vec<(String, String)>> {
    let mut out: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let strings = |o: &autoclust_graph::Output| -> Option<Vec<String>> {
        let n = graph.node(o.node);
        let t = n.attr("value").and_then(|v| v.as_tensor()).filter(|_| n.op == "Const")?;
        Some(t.as_strings()?.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect())
    };
    for n in graph.nodes().iter().filter(|n| n.op == "SaveV2" && n.inputs.len() >= 3) {
        let (Some(names), Some(specs)) = (strings(&n.inputs[1]), strings(&n.inputs[2])) else { continue };
        for (i, (key, spec)) in names.iter().zip(&specs).enumerate() {
            if spec.is_empty() {
                continue;
            }
            let Some(mut o) = n.inputs.get(3 + i).copied() else { continue };
            while matches!(graph.node(o.node).op.as_str(), "Identity" | "ReadVariableOp") {
                match graph.node(o.node).inputs.first() {
                    Some(&up) => o = up,
                    None => break,
                }
            }
            let var = graph.node(o.node);
            if autoclust_graph::effects::names_variable(var) {
                out.entry(key.clone()).or_default().push((var.name.clone(), spec.clone()));
            }
        }
    }
    out
}

/// A `shape_and_slices` spec (`"10 4 0,4:-"`): the whole tensor's shape and the slice's
/// extents (`-`: the whole dimension). `None` if malformed.
fn parse_slice_spec(spec: &str) -> Option<(Vec<usize>, Vec<autoclust_graphdef::ordered_code::Extent>)> {
    let words: Vec<&str> = spec.split_whitespace().collect();
    let (slices, dims) = words.split_last()?;
    let shape: Vec<usize> = dims.iter().map(|d| d.parse().ok()).collect::<Option<_>>()?;
    let extents: Vec<autoclust_graphdef::ordered_code::Extent> = slices
        .split(':')
        .map(|e| match e {
            "-" => Some((0, None)),
            _ => {
                let (start, len) = e.split_once(',')?;
                Some((start.parse().ok()?, Some(len.parse().ok()?)))
            }
        })
        .collect::<Option<_>>()?;
    (extents.len() == shape.len()).then_some((shape, extents))
}

/// The files of `--save-checkpoint PREFIX`: the index and the one data
/// shard, with SavedModel variables under their checkpoint keys, and a TF1 graph's
/// partitioned variables (`partitions`: its Saver's keys and slice specs) saved in slices
/// under their Saver key, as its `Saver` writes them (and restores them).
pub fn checkpoint_files(
    prefix: &Path,
    variables: &[(String, Tensor)],
    model: Option<&ModelContext>,
    partitions: &BTreeMap<String, Vec<(String, String)>>,
) -> Result<Vec<(PathBuf, Vec<u8>)>, CliError> {
    let value: BTreeMap<&str, &Tensor> = variables.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut sliced = Vec::new();
    let mut in_slices: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
    for (key, parts) in partitions {
        let mut slices = Vec::new();
        let mut whole = None;
        for (var, spec) in parts {
            let (Some(t), Some((shape, extents))) = (value.get(var.as_str()), parse_slice_spec(spec)) else { break };
            let dims: Vec<usize> =
                extents.iter().zip(&shape).map(|(&(_, l), &d)| l.map_or(d, |l| l as usize)).collect();
            if t.shape != dims || whole.as_ref().is_some_and(|(w, dt)| *w != shape || *dt != t.dtype) {
                break;
            }
            whole = Some((shape, t.dtype));
            slices.push((extents, (*t).clone()));
        }
        match whole {
            Some((shape, dtype)) if slices.len() == parts.len() => {
                in_slices.extend(parts.iter().map(|(v, _)| v.as_str()));
                sliced.push(tensor_bundle::SlicedTensor { key: key.clone(), dtype, shape, slices });
            }
            _ => {}
        }
    }
    let mut tensors: Vec<(String, Tensor)> = variables
        .iter()
        .filter(|(n, _)| !in_slices.contains(n.as_str()))
        .map(|(n, t)| (model.and_then(|m| m.keys.get(n)).cloned().unwrap_or_else(|| n.clone()), t.clone()))
        .collect();
    if let Some(og) = model.and_then(|m| m.object_graph.clone()) {
        tensors.push((OBJECT_GRAPH_KEY.to_string(), og));
    }
    let (index, data) = tensor_bundle::checkpoint_bytes_with_slices(&tensors, &sliced)
        .map_err(|e| CliError::input(format!("{}: {e}", prefix.display())))?;
    Ok(vec![(tensor_bundle::data_path(prefix, 0, 1), data), (tensor_bundle::index_path(prefix), index)])
}
