//! Captured lookup tables → tables the graph creates, so a TensorFlow 2 function graph that
//! builds a `tf.lookup` table inside the function runs.
//!
//! When a `tf.function` creates a `StaticHashTable`, `StaticVocabularyTable`,
//! `MutableHashTable` or `DenseHashTable`, TensorFlow lifts the table's creation out of the
//! function (it becomes a resource the function *captures*: a `Placeholder` of dtype
//! `resource` in the exported graph) but leaves the ops that fill and read it —
//! `LookupTableImportV2`, `LookupTableInsertV2`, `LookupTableFindV2` — in the graph, on that
//! placeholder.
//!
//! What it transforms: a resource `Placeholder` whose every consumer is a lookup-table op
//! taking it as the table, at least one of which fills it (`LookupTableImportV2`,
//! `InitializeTableV2`, `LookupTableInsertV2`), becomes a `HashTableV2` — a
//! `MutableHashTableV2` when a consumer inserts or removes entries — of the same name, with
//! the key and value dtypes its consumers declare (`Tin`/`Tout`).
//!
//! Why it is sound: the graph itself fills the table before it is read (TensorFlow runs the
//! same filling ops on the captured table at every call: an immutable table's re-import of
//! the same entries changes nothing, as in TensorFlow), so a table created empty by the graph
//! holds what TensorFlow's captured table holds whenever the graph reads it. A table the
//! graph only reads (filled outside it, by Keras' `adapt` or a SavedModel's init op) is left
//! alone: its entries are not in the graph, and running it says so.
//! A `DenseHashTable` becomes a hash table with its find, insert, remove and size semantics;
//! only its bucket-order export and its `empty_key` checks differ, and neither changes a
//! lookup.

use autoclust_graph::{AttrValue, Attrs, DType, Graph, NodeId, RawNode};

/// The lookup-table ops that take a table as input 0, and whether they fill it
/// (`Some(true)`: import/initialise, `Some(false)`: insert/remove, `None`: read only).
fn table_use(op: &str) -> Option<Option<bool>> {
    Some(match op {
        "LookupTableImportV2" | "InitializeTableV2" => Some(true),
        "LookupTableInsertV2" | "LookupTableRemoveV2" => Some(false),
        "LookupTableFindV2" | "LookupTableSizeV2" | "LookupTableExportV2" => None,
        _ => return None,
    })
}

/// What the consumers of one placeholder say about its table.
#[derive(Default)]
struct TableFacts {
    filled: bool,
    mutated: bool,
    key: Option<DType>,
    value: Option<DType>,
}

/// `graph` with every captured table that the graph fills created by the graph instead
/// (module doc); `None` when there is none.
pub fn create_captured_tables(graph: &Graph) -> Option<Graph> {
    let is_resource_placeholder = |id: NodeId| {
        let n = graph.node(id);
        n.op == "Placeholder" && n.attr("dtype").and_then(AttrValue::as_type) == Some(DType::Resource)
    };
    let candidates: Vec<NodeId> = graph.node_ids().filter(|&id| is_resource_placeholder(id)).collect();
    if candidates.is_empty() {
        return None;
    }
    let successors = graph.successors();
    let mut tables: Vec<(NodeId, DType, DType, bool)> = Vec::new();
    'placeholders: for id in candidates {
        let mut facts = TableFacts::default();
        let users = &successors.data[id.index()];
        if users.is_empty() {
            continue;
        }
        for &(user, _, slot) in users {
            let u = graph.node(user);
            let Some(fills) = table_use(&u.op) else { continue 'placeholders };
            if slot != 0 {
                continue 'placeholders;
            }
            match fills {
                Some(true) => facts.filled = true,
                Some(false) => {
                    facts.filled |= u.op == "LookupTableInsertV2";
                    facts.mutated = true;
                }
                None => {}
            }
            let (k, v) = match u.op.as_str() {
                "LookupTableExportV2" => ("Tkeys", "Tvalues"),
                _ => ("Tin", "Tout"),
            };
            for (name, seen) in [(k, &mut facts.key), (v, &mut facts.value)] {
                if let Some(d) = u.attr(name).and_then(AttrValue::as_type) {
                    if seen.is_some_and(|s| s != d) {
                        continue 'placeholders;
                    }
                    *seen = Some(d);
                }
            }
        }
        if let (true, Some(k), Some(v)) = (facts.filled, facts.key, facts.value) {
            tables.push((id, k, v, facts.mutated));
        }
    }
    if tables.is_empty() {
        return None;
    }
    let _span = tracing::debug_span!("create_captured_tables", tables = tables.len()).entered();
    let mut out = graph.clone();
    for (id, key, value, mutable) in tables {
        let mut attrs = Attrs::default();
        attrs.insert("key_dtype".into(), AttrValue::Type(key));
        attrs.insert("value_dtype".into(), AttrValue::Type(value));
        attrs.insert("container".into(), AttrValue::S(Vec::new()));
        attrs.insert("shared_name".into(), AttrValue::S(Vec::new()));
        attrs.insert("use_node_name_sharing".into(), AttrValue::B(false));
        replace_placeholder(&mut out, graph, id, if mutable { "MutableHashTableV2" } else { "HashTableV2" }, attrs);
    }
    Some(out)
}

/// Replaces the captured-resource placeholder `id` of `graph` in `out` (a copy of it) by a
/// node of `op` that creates the resource: the same name, device and control inputs.
pub(crate) fn replace_placeholder(out: &mut Graph, graph: &Graph, id: NodeId, op: &str, attrs: Attrs) {
    let n = graph.node(id);
    let raw = RawNode {
        name: n.name.clone(),
        op: op.into(),
        inputs: n.control_inputs.iter().map(|&c| format!("^{}", graph.node(c).name)).collect(),
        attrs,
        device: n.device.clone(),
        span: n.span,
    };
    out.replace_raw(id, raw).expect("the same name and existing control inputs");
}

/// `captured-tables`: [`create_captured_tables`] as a pass (the graph unchanged when it
/// captures no table it fills). `run` and `bench` apply it while loading.
pub struct CapturedTablesPass;

impl crate::pass::Pass for CapturedTablesPass {
    fn name(&self) -> &'static str {
        "captured-tables"
    }
    fn description(&self) -> &'static str {
        "create the lookup tables a TF2 function graph captures but fills itself (tf.lookup tables built in a tf.function)"
    }
    fn run(&self, graph: Graph, _ctx: &crate::pass::PassContext) -> Result<Graph, crate::pass::PassError> {
        Ok(create_captured_tables(&graph).unwrap_or(graph))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(text: &str) -> Graph {
        autoclust_graph::text::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    #[test]
    fn a_captured_table_the_graph_fills_is_created_by_it() {
        let g = graph(
            r#"
            t = Placeholder() {dtype = resource}
            k = Const() {dtype = int64, value = int64[2]{1, 2}}
            v = Const() {dtype = float32, value = float32[2]{5.0, 6.0}}
            init = LookupTableImportV2(t, k, v) {Tin = int64, Tout = float32}
            q = Placeholder() {dtype = int64, shape = shape[2]}
            d = Const() {dtype = float32, value = float32[]{-1.0}}
            find = LookupTableFindV2(t, q, d, ^init) {Tin = int64, Tout = float32}
            "#,
        );
        let out = create_captured_tables(&g).expect("one table");
        let t = out.node(out.find("t").unwrap());
        assert_eq!(t.op, "HashTableV2");
        assert_eq!(t.attr("key_dtype").and_then(AttrValue::as_type), Some(DType::Int64));
        assert_eq!(t.attr("value_dtype").and_then(AttrValue::as_type), Some(DType::Float32));
        // An insert makes it mutable.
        let g = graph(
            r#"
            t = Placeholder() {dtype = resource}
            k = Const() {dtype = int64, value = int64[2]{1, 2}}
            v = Const() {dtype = float32, value = float32[2]{5.0, 6.0}}
            ins = LookupTableInsertV2(t, k, v) {Tin = int64, Tout = float32}
            "#,
        );
        assert_eq!(create_captured_tables(&g).unwrap().node(NodeId(0)).op, "MutableHashTableV2");
    }

    #[test]
    fn tables_filled_outside_and_variables_are_left_alone() {
        // Only read: its entries come from outside the graph.
        let read_only = graph(
            r#"
            t = Placeholder() {dtype = resource}
            q = Placeholder() {dtype = string, shape = shape[2]}
            d = Const() {dtype = int64, value = int64[]{-1}}
            find = LookupTableFindV2(t, q, d) {Tin = string, Tout = int64}
            "#,
        );
        assert!(create_captured_tables(&read_only).is_none());
        // A captured variable.
        let var = graph(
            r#"
            w = Placeholder() {dtype = resource}
            r = ReadVariableOp(w) {dtype = float32}
            "#,
        );
        assert!(create_captured_tables(&var).is_none());
    }
}
