//! Lookup tables: TensorFlow's `HashTableV2` (immutable once initialised),
//! `MutableHashTableV2` and `MutableDenseHashTableV2` (`tf.lookup.experimental.DenseHashTable`:
//! a mutable table whose `empty_key` and `deleted_key` may not be used as keys; scalar keys
//! and values only; its export lists the entries, not TensorFlow's buckets), as Keras' `StringLookup`/`IntegerLookup`, `tf.lookup.StaticHashTable`
//! and vocabulary feature columns build them, with the ops that fill and read them.
//!
//! A table is a session resource ([`LookupTables`], held by the session's
//! [`VariableStore`]) named by `(container, shared_name)` — the node's name when
//! `shared_name` is empty, as TensorFlow names a table its kernel creates. Its handle is a
//! scalar `resource` tensor holding `LKUP`, the container, a NUL and the name, so a handle
//! passed into a function body or through an `Identity` still names the table, and a session
//! built from another (the optimized or clustered one `run` builds from the plain one) that
//! [`LookupTables::adopt`]s its tables sees the same entries.
//!
//! Semantics follow `lookup_table_op.cc`: an immutable table is initialised once
//! (`LookupTableImportV2`, `InitializeTableV2`, `InitializeTableFromTextFileV2`); initialising
//! it again with the same entries does nothing, with other entries is an error; a key given
//! twice with different values is an error; reading it before initialisation is an error
//! ("Table not initialized."). A mutable table's import replaces its contents, insert
//! overwrites, remove deletes. `LookupTableFindV2` gives each key's value or the scalar
//! default. Keys are int32, int64 or string; values int32, int64, float, double, bool or
//! string scalars. Each op holds the table's lock for the whole op.

use std::collections::HashMap;
use std::sync::Arc;

use autoclust_graph::{AttrValue, DType, Node, Tensor, TensorData};
use parking_lot::Mutex;

use super::resource::StatefulFn;
use super::{arity, attr_type, one, Inputs, Outputs};
use crate::error::{KResult, KernelError};
use crate::variables::VariableStore;

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Key {
    Int(i64),
    Str(Vec<u8>),
}

#[derive(Clone, Debug, PartialEq)]
enum Value {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(Vec<u8>),
}

#[derive(Debug)]
struct Table {
    name: String,
    mutable: bool,
    key_dtype: DType,
    value_dtype: DType,
    initialized: bool,
    entries: HashMap<Key, Value>,
    /// A `MutableDenseHashTableV2`'s `empty_key` and `deleted_key`, which no op may use.
    reserved: Option<(Key, Key)>,
}

/// A table, shared by the sessions that adopted it.
type SharedTable = Arc<Mutex<Table>>;

/// The lookup tables of a session, by `(container, name)`.
#[derive(Debug, Default)]
pub struct LookupTables {
    tables: Mutex<HashMap<(String, String), SharedTable>>,
}

impl LookupTables {
    /// Makes `other`'s tables this session's too (the same tables, not copies).
    pub fn adopt(&self, other: &LookupTables) {
        let theirs = other.tables.lock();
        let mut ours = self.tables.lock();
        for (k, t) in theirs.iter() {
            ours.entry(k.clone()).or_insert_with(|| t.clone());
        }
    }

    fn get(&self, handle: &Tensor) -> KResult<SharedTable> {
        let key = decode_handle(handle)?;
        self.tables
            .lock()
            .get(&key)
            .cloned()
            .ok_or_else(|| KernelError::invalid(format!("lookup table '{}' does not exist", key.1)))
    }
}

const MAGIC: &[u8; 4] = b"LKUP";

fn handle_tensor(container: &str, name: &str) -> Tensor {
    super::resource::named_handle(MAGIC, container, name)
}

fn decode_handle(t: &Tensor) -> KResult<(String, String)> {
    let not_a_table = || KernelError::invalid(format!("expected a lookup table handle, got a {} tensor", t.dtype));
    if let TensorData::Raw(b) = &t.data {
        if t.dtype == DType::Resource && !b.starts_with(MAGIC) {
            return Err(KernelError::invalid(
                "this handle does not name a lookup table the graph creates: a table captured from outside the graph \
                 (a TensorFlow 2 function graph's resource Placeholder) has no entries here; export the model as a \
                 SavedModel, whose init op fills its tables",
            ));
        }
    }
    super::resource::decode_named_handle(MAGIC, t).ok_or_else(not_a_table)
}

fn keys_of(t: &Tensor, dtype: DType) -> KResult<Vec<Key>> {
    if t.dtype != dtype {
        return Err(KernelError::invalid(format!("the table's keys are {dtype}, got {}", t.dtype)));
    }
    Ok(match &t.data {
        TensorData::I32(v) => v.iter().map(|&x| Key::Int(x.into())).collect(),
        TensorData::I64(v) => v.iter().map(|&x| Key::Int(x)).collect(),
        TensorData::Str(v) => v.iter().map(|s| Key::Str(s.clone())).collect(),
        _ => return Err(KernelError::DType(t.dtype)),
    })
}

fn values_of(t: &Tensor, dtype: DType) -> KResult<Vec<Value>> {
    if t.dtype != dtype {
        return Err(KernelError::invalid(format!("the table's values are {dtype}, got {}", t.dtype)));
    }
    Ok(match &t.data {
        TensorData::I32(v) => v.iter().map(|&x| Value::Int(x.into())).collect(),
        TensorData::I64(v) => v.iter().map(|&x| Value::Int(x)).collect(),
        TensorData::F32(v) => v.iter().map(|&x| Value::Float(x.into())).collect(),
        TensorData::F64(v) => v.iter().map(|&x| Value::Float(x)).collect(),
        TensorData::Bool(v) => v.iter().map(|&x| Value::Bool(x)).collect(),
        TensorData::Str(v) => v.iter().map(|s| Value::Str(s.clone())).collect(),
        _ => return Err(KernelError::DType(t.dtype)),
    })
}

fn tensor_of_values(dtype: DType, shape: Vec<usize>, values: Vec<Value>) -> KResult<Tensor> {
    let bad = |e: autoclust_graph::TensorError| KernelError::invalid(e.to_string());
    let int = |v: &Value| if let Value::Int(x) = v { *x } else { 0 };
    let float = |v: &Value| if let Value::Float(x) = v { *x } else { 0.0 };
    match dtype {
        DType::Int32 => Tensor::from_i32(shape, values.iter().map(|v| int(v) as i32).collect()),
        DType::Int64 => Tensor::from_i64(shape, values.iter().map(int).collect()),
        DType::Float32 => Tensor::from_f32(shape, values.iter().map(|v| float(v) as f32).collect()),
        DType::Float64 => Tensor::from_f64(shape, values.iter().map(float).collect()),
        DType::Bool => Tensor::from_bool(shape, values.iter().map(|v| matches!(v, Value::Bool(true))).collect()),
        DType::String => Tensor::from_strings(
            shape,
            values.into_iter().map(|v| if let Value::Str(s) = v { s } else { Vec::new() }).collect(),
        ),
        d => return Err(KernelError::DType(d)),
    }
    .map_err(bad)
}

fn tensor_of_keys(dtype: DType, keys: Vec<Key>) -> KResult<Tensor> {
    let bad = |e: autoclust_graph::TensorError| KernelError::invalid(e.to_string());
    let n = vec![keys.len()];
    let int = |k: &Key| if let Key::Int(x) = k { *x } else { 0 };
    match dtype {
        DType::Int32 => Tensor::from_i32(n, keys.iter().map(|k| int(k) as i32).collect()),
        DType::Int64 => Tensor::from_i64(n, keys.iter().map(int).collect()),
        DType::String => Tensor::from_strings(
            n,
            keys.into_iter().map(|k| if let Key::Str(s) = k { s } else { Vec::new() }).collect(),
        ),
        d => return Err(KernelError::DType(d)),
    }
    .map_err(bad)
}

fn show(k: &Key) -> String {
    match k {
        Key::Int(x) => x.to_string(),
        Key::Str(s) => String::from_utf8_lossy(s).into_owned(),
    }
}

impl Table {
    /// Initialises an immutable table, or replaces a mutable table's contents.
    fn import(&mut self, keys: Vec<Key>, values: Vec<Value>) -> KResult<()> {
        if keys.len() != values.len() {
            return Err(KernelError::invalid(format!(
                "table '{}': {} keys but {} values",
                self.name,
                keys.len(),
                values.len()
            )));
        }
        let mut entries: HashMap<Key, Value> = HashMap::with_capacity(keys.len());
        for (k, v) in keys.into_iter().zip(values) {
            // A dense table's export is its bucket array: empty and deleted buckets hold the
            // reserved keys, and importing it skips them (TensorFlow's `ImportValues`).
            if self.reserved.as_ref().is_some_and(|(e, d)| k == *e || k == *d) {
                continue;
            }
            if !self.mutable {
                if let Some(old) = entries.get(&k).filter(|old| **old != v) {
                    return Err(KernelError::invalid(format!(
                        "HashTable has different value for same key. Key {} has {old:?} and trying to add value {v:?}",
                        show(&k)
                    )));
                }
            }
            entries.insert(k, v);
        }
        if !self.mutable && self.initialized {
            return if entries == self.entries {
                Ok(())
            } else {
                Err(KernelError::invalid(format!("table '{}' was already initialized with different data", self.name)))
            };
        }
        self.entries = entries;
        self.initialized = true;
        Ok(())
    }

    /// TensorFlow's refusal of a dense table's reserved keys as table keys.
    fn check_keys(&self, keys: &[Key]) -> KResult<()> {
        if let Some((empty, deleted)) = &self.reserved {
            for k in keys {
                let which = if k == empty {
                    "empty_key"
                } else if k == deleted {
                    "deleted_key"
                } else {
                    continue;
                };
                return Err(KernelError::invalid(format!("Using the {which} as a table key is not allowed")));
            }
        }
        Ok(())
    }

    fn check_initialized(&self) -> KResult<()> {
        if self.mutable || self.initialized {
            Ok(())
        } else {
            Err(KernelError::invalid(format!("Table not initialized: lookup table '{}'", self.name)))
        }
    }
}

/// `InitializeTableFromTextFileV2`'s attributes: which column of each line is the key and
/// which the value (a delimited column `>= 0`, the whole line -2, the line number -1), how
/// many lines (-1: all), the delimiter, and the offset added to line numbers.
struct TextFileSpec {
    key_index: i64,
    value_index: i64,
    vocab_size: i64,
    delimiter: String,
    offset: i64,
}

/// TensorFlow's text-file initialiser: each line of `text` gives a key and a value.
fn text_file_entries(
    text: &str,
    spec: &TextFileSpec,
    key_dtype: DType,
    value_dtype: DType,
) -> KResult<(Vec<Key>, Vec<Value>)> {
    let TextFileSpec { key_index, value_index, vocab_size, ref delimiter, offset } = *spec;
    let delimiter = delimiter.as_str();
    let (mut keys, mut values) = (Vec::new(), Vec::new());
    for (n, line) in text.lines().enumerate() {
        if vocab_size >= 0 && n as i64 >= vocab_size {
            break;
        }
        let columns: Vec<&str> = if delimiter.is_empty() { vec![line] } else { line.split(delimiter).collect() };
        let field = |index: i64, dtype: DType| -> KResult<String> {
            Ok(match index {
                -2 => line.to_string(),
                -1 => (n as i64 + offset).to_string(),
                i if i >= 0 => columns.get(i as usize).map(|s| s.to_string()).ok_or_else(|| {
                    KernelError::invalid(format!("line {}: no column {i} (delimiter {delimiter:?})", n + 1))
                })?,
                i => return Err(KernelError::invalid(format!("invalid column index {i} for {dtype}"))),
            })
        };
        let parse_int = |s: &str| {
            s.trim()
                .parse::<i64>()
                .map_err(|_| KernelError::invalid(format!("line {}: '{s}' is not an integer", n + 1)))
        };
        let k = field(key_index, key_dtype)?;
        keys.push(match key_dtype {
            DType::String => Key::Str(k.into_bytes()),
            _ => Key::Int(parse_int(&k)?),
        });
        let v = field(value_index, value_dtype)?;
        values.push(match value_dtype {
            DType::String => Value::Str(v.into_bytes()),
            DType::Float32 | DType::Float64 => Value::Float(
                v.trim()
                    .parse::<f64>()
                    .map_err(|_| KernelError::invalid(format!("line {}: '{v}' is not a number", n + 1)))?,
            ),
            _ => Value::Int(parse_int(&v)?),
        });
    }
    if vocab_size >= 0 && (keys.len() as i64) < vocab_size {
        return Err(KernelError::invalid(format!(
            "Invalid vocab_size in file: expected {vocab_size} lines, got {}",
            keys.len()
        )));
    }
    Ok((keys, values))
}

fn int_attr(node: &Node, name: &str, default: i64) -> i64 {
    node.attr(name).and_then(AttrValue::as_int).unwrap_or(default)
}

/// Whether `op` changes a table's entries (fills, imports, inserts or removes).
pub fn writes_table(op: &str) -> bool {
    matches!(
        op,
        "LookupTableImportV2"
            | "InitializeTableV2"
            | "InitializeTableFromTextFileV2"
            | "LookupTableInsertV2"
            | "LookupTableRemoveV2"
    )
}

/// Whether [`prepare`] has a kernel for `op`.
pub fn is_lookup_op(op: &str) -> bool {
    !matches!(prepare(&super::probe(op)), Ok(None))
}

/// The kernel of a lookup-table op, or `None` for any other op.
pub fn prepare(node: &Node) -> KResult<Option<StatefulFn>> {
    let f: StatefulFn = match node.op.as_str() {
        "HashTableV2" | "MutableHashTableV2" | "MutableDenseHashTableV2" => {
            let (container, name) = autoclust_graph::effects::resource_key(node);
            let (container, name) = (container.to_string(), name.to_string());
            let (key_dtype, value_dtype) = (attr_type(node, "key_dtype")?, attr_type(node, "value_dtype")?);
            let mutable = node.op != "HashTableV2";
            let dense = node.op == "MutableDenseHashTableV2";
            if dense && node.attr("value_shape").and_then(AttrValue::as_shape).is_some_and(|s| s.rank() != Some(0)) {
                return Err(KernelError::invalid(
                    "a DenseHashTable with non-scalar values (value_shape) is not supported: only scalar keys and values",
                ));
            }
            Box::new(move |store: &VariableStore, inp: Inputs| {
                arity(&inp, if dense { 2 } else { 0 })?;
                let reserved = if dense {
                    let (e, d) = (keys_of(&inp[0], key_dtype)?, keys_of(&inp[1], key_dtype)?);
                    let ([e], [d]) = (e.as_slice(), d.as_slice()) else {
                        return Err(KernelError::invalid(
                            "a DenseHashTable's empty_key and deleted_key must be scalars (vector keys are not supported)",
                        ));
                    };
                    if e == d {
                        return Err(KernelError::invalid("Empty and deleted keys must have different values"));
                    }
                    Some((e.clone(), d.clone()))
                } else {
                    None
                };
                let tables = store.lookup_tables();
                let mut all = tables.tables.lock();
                let table = all.entry((container.clone(), name.clone())).or_insert_with(|| {
                    Arc::new(Mutex::new(Table {
                        name: name.clone(),
                        mutable,
                        key_dtype,
                        value_dtype,
                        initialized: false,
                        entries: HashMap::new(),
                        reserved: reserved.clone(),
                    }))
                });
                let t = table.lock();
                if (t.key_dtype, t.value_dtype, t.mutable) != (key_dtype, value_dtype, mutable) {
                    return Err(KernelError::invalid(format!(
                        "lookup table '{name}' exists as a {} {}->{} table",
                        if t.mutable { "mutable" } else { "immutable" },
                        t.key_dtype,
                        t.value_dtype
                    )));
                }
                one(handle_tensor(&container, &name))
            })
        }
        "LookupTableImportV2" | "InitializeTableV2" => Box::new(move |store: &VariableStore, inp: Inputs| {
            arity(&inp, 3)?;
            let table = store.lookup_tables().get(&inp[0])?;
            let mut t = table.lock();
            let keys = keys_of(&inp[1], t.key_dtype)?;
            let values = values_of(&inp[2], t.value_dtype)?;
            t.import(keys, values)?;
            Ok(Outputs::new())
        }),
        "InitializeTableFromTextFileV2" => {
            let spec = TextFileSpec {
                key_index: int_attr(node, "key_index", -2),
                value_index: int_attr(node, "value_index", -1),
                vocab_size: int_attr(node, "vocab_size", -1),
                delimiter: node.attr("delimiter").and_then(AttrValue::as_str).unwrap_or("\t").to_string(),
                offset: int_attr(node, "offset", 0),
            };
            Box::new(move |store: &VariableStore, inp: Inputs| {
                arity(&inp, 2)?;
                let table = store.lookup_tables().get(&inp[0])?;
                let TensorData::Str(names) = &inp[1].data else { return Err(KernelError::DType(inp[1].dtype)) };
                let [path] = names.as_slice() else {
                    return Err(KernelError::invalid("filename must be a scalar string"));
                };
                let path = String::from_utf8_lossy(path).into_owned();
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| KernelError::invalid(format!("cannot read vocabulary file '{path}': {e}")))?;
                let mut t = table.lock();
                let (keys, values) = text_file_entries(&text, &spec, t.key_dtype, t.value_dtype)?;
                t.import(keys, values).map_err(|e| KernelError::invalid(format!("vocabulary file '{path}': {e}")))?;
                Ok(Outputs::new())
            })
        }
        "LookupTableFindV2" => Box::new(move |store: &VariableStore, inp: Inputs| {
            arity(&inp, 3)?;
            let table = store.lookup_tables().get(&inp[0])?;
            let t = table.lock();
            t.check_initialized()?;
            let keys = keys_of(&inp[1], t.key_dtype)?;
            t.check_keys(&keys)?;
            let default = values_of(&inp[2], t.value_dtype)?;
            let [default] = default.as_slice() else {
                return Err(KernelError::invalid(format!(
                    "Expected shape [] for default value, got {:?}",
                    inp[2].shape
                )));
            };
            let found: Vec<Value> = keys.iter().map(|k| t.entries.get(k).unwrap_or(default).clone()).collect();
            one(tensor_of_values(t.value_dtype, inp[1].shape.clone(), found)?)
        }),
        "LookupTableInsertV2" => Box::new(move |store: &VariableStore, inp: Inputs| {
            arity(&inp, 3)?;
            let table = store.lookup_tables().get(&inp[0])?;
            let mut t = table.lock();
            if !t.mutable {
                return Err(KernelError::invalid(format!("table '{}' is immutable: insert is not supported", t.name)));
            }
            let keys = keys_of(&inp[1], t.key_dtype)?;
            t.check_keys(&keys)?;
            let values = values_of(&inp[2], t.value_dtype)?;
            if keys.len() != values.len() {
                return Err(KernelError::invalid(format!("{} keys but {} values", keys.len(), values.len())));
            }
            t.entries.extend(keys.into_iter().zip(values));
            Ok(Outputs::new())
        }),
        "LookupTableRemoveV2" => Box::new(move |store: &VariableStore, inp: Inputs| {
            arity(&inp, 2)?;
            let table = store.lookup_tables().get(&inp[0])?;
            let mut t = table.lock();
            if !t.mutable {
                return Err(KernelError::invalid(format!("table '{}' is immutable: remove is not supported", t.name)));
            }
            let keys = keys_of(&inp[1], t.key_dtype)?;
            t.check_keys(&keys)?;
            for k in keys {
                t.entries.remove(&k);
            }
            Ok(Outputs::new())
        }),
        "LookupTableSizeV2" => Box::new(move |store: &VariableStore, inp: Inputs| {
            arity(&inp, 1)?;
            let table = store.lookup_tables().get(&inp[0])?;
            let n = table.lock().entries.len() as i64;
            one(Tensor::scalar_i64(n))
        }),
        "LookupTableExportV2" => Box::new(move |store: &VariableStore, inp: Inputs| {
            arity(&inp, 1)?;
            let table = store.lookup_tables().get(&inp[0])?;
            let t = table.lock();
            // TensorFlow's order is its hash map's; sorted keys make it deterministic.
            let mut entries: Vec<(&Key, &Value)> = t.entries.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let n = entries.len();
            let keys = tensor_of_keys(t.key_dtype, entries.iter().map(|(k, _)| (*k).clone()).collect())?;
            let values = tensor_of_values(t.value_dtype, vec![n], entries.iter().map(|(_, v)| (*v).clone()).collect())?;
            Ok([keys, values].into_iter().collect())
        }),
        _ => return Ok(None),
    };
    Ok(Some(f))
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::node;
    use super::*;

    fn strings(v: &[&str]) -> Tensor {
        Tensor::from_strings(vec![v.len()], v.iter().map(|s| s.as_bytes().to_vec()).collect()).unwrap()
    }

    fn run(f: &StatefulFn, store: &VariableStore, inputs: Vec<Tensor>) -> KResult<Outputs> {
        f(store, inputs.into_iter().collect())
    }

    fn table(op: &str, store: &VariableStore) -> Tensor {
        let create = prepare(&node(
            op,
            &[
                ("shared_name", AttrValue::S(b"vocab".to_vec())),
                ("key_dtype", AttrValue::Type(DType::String)),
                ("value_dtype", AttrValue::Type(DType::Int64)),
            ],
        ))
        .unwrap()
        .unwrap();
        run(&create, store, vec![]).unwrap().remove(0)
    }

    #[test]
    fn a_static_table_is_initialised_once_and_looked_up_with_a_default() {
        let store = VariableStore::new();
        let h = table("HashTableV2", &store);
        let find = prepare(&node("LookupTableFindV2", &[])).unwrap().unwrap();
        let import = prepare(&node("LookupTableImportV2", &[])).unwrap().unwrap();
        let keys = strings(&["a", "b", "c"]);
        let values = Tensor::from_i64(vec![3], vec![1, 2, 3]).unwrap();
        // Not initialised yet: TensorFlow's error.
        let err = run(&find, &store, vec![h.clone(), strings(&["a"]), Tensor::scalar_i64(-1)]).unwrap_err();
        assert!(err.to_string().contains("Table not initialized"), "{err}");
        run(&import, &store, vec![h.clone(), keys.clone(), values.clone()]).unwrap();
        // The same entries again: nothing happens; other entries: an error.
        run(&import, &store, vec![h.clone(), keys.clone(), values]).unwrap();
        let other = Tensor::from_i64(vec![3], vec![1, 2, 4]).unwrap();
        assert!(run(&import, &store, vec![h.clone(), keys, other]).is_err());
        let q = Tensor::from_strings(vec![2, 2], [b"c".to_vec(), b"x".to_vec(), b"a".to_vec(), b"".to_vec()].to_vec())
            .unwrap();
        let out = run(&find, &store, vec![h.clone(), q, Tensor::scalar_i64(-1)]).unwrap();
        assert_eq!((out[0].shape.as_slice(), out[0].as_i64().unwrap()), (&[2, 2][..], &[3, -1, 1, -1][..]));
        // A wrong key dtype and a non-scalar default are errors.
        assert!(run(&find, &store, vec![h.clone(), Tensor::scalar_i64(1), Tensor::scalar_i64(-1)]).is_err());
        let bad_default = Tensor::from_i64(vec![2], vec![0, 0]).unwrap();
        assert!(run(&find, &store, vec![h.clone(), strings(&["a"]), bad_default]).is_err());
        let size = prepare(&node("LookupTableSizeV2", &[])).unwrap().unwrap();
        assert_eq!(run(&size, &store, vec![h.clone()]).unwrap()[0].as_i64().unwrap(), &[3]);
        // Insert is for mutable tables only; a key with two values is an error.
        let insert = prepare(&node("LookupTableInsertV2", &[])).unwrap().unwrap();
        assert!(run(&insert, &store, vec![h, strings(&["d"]), Tensor::from_i64(vec![1], vec![4]).unwrap()]).is_err());
        let store2 = VariableStore::new();
        let h2 = table("HashTableV2", &store2);
        let dup = run(&import, &store2, vec![h2, strings(&["a", "a"]), Tensor::from_i64(vec![2], vec![1, 2]).unwrap()]);
        assert!(dup.unwrap_err().to_string().contains("different value for same key"));
    }

    /// TensorFlow 2.21's `DenseHashTable(int64, float32, default_value=0.0, empty_key=-1,
    /// deleted_key=-2)`: insert 10→3, 30→4, remove 30, lookup [10, 20, 30] is [3, 0, 0], size
    /// 1; the empty and deleted keys are refused in insert and lookup with TensorFlow's message.
    #[test]
    fn a_dense_table_refuses_its_reserved_keys() {
        let store = VariableStore::new();
        let create = prepare(&node(
            "MutableDenseHashTableV2",
            &[("key_dtype", AttrValue::Type(DType::Int64)), ("value_dtype", AttrValue::Type(DType::Float32))],
        ))
        .unwrap()
        .unwrap();
        let h = run(&create, &store, vec![Tensor::scalar_i64(-1), Tensor::scalar_i64(-2)]).unwrap().remove(0);
        let insert = prepare(&node("LookupTableInsertV2", &[])).unwrap().unwrap();
        let remove = prepare(&node("LookupTableRemoveV2", &[])).unwrap().unwrap();
        let find = prepare(&node("LookupTableFindV2", &[])).unwrap().unwrap();
        let i64s = |v: &[i64]| Tensor::from_i64(vec![v.len()], v.to_vec()).unwrap();
        let f32s = |v: &[f32]| Tensor::from_f32(vec![v.len()], v.to_vec()).unwrap();
        run(&insert, &store, vec![h.clone(), i64s(&[10, 30]), f32s(&[3.0, 4.0])]).unwrap();
        run(&remove, &store, vec![h.clone(), i64s(&[30])]).unwrap();
        let got = run(&find, &store, vec![h.clone(), i64s(&[10, 20, 30]), Tensor::scalar_f32(0.0)]).unwrap();
        assert_eq!(got[0].as_f32().unwrap(), &[3.0, 0.0, 0.0]);
        let e = run(&insert, &store, vec![h.clone(), i64s(&[-2]), f32s(&[1.0])]).unwrap_err().to_string();
        assert!(e.contains("Using the deleted_key as a table key is not allowed"), "{e}");
        let e = run(&find, &store, vec![h, i64s(&[-1]), Tensor::scalar_f32(0.0)]).unwrap_err().to_string();
        assert!(e.contains("Using the empty_key as a table key is not allowed"), "{e}");
    }

    #[test]
    fn a_mutable_table_inserts_removes_and_exports_and_is_shared_by_adoption() {
        let store = VariableStore::new();
        let h = table("MutableHashTableV2", &store);
        let insert = prepare(&node("LookupTableInsertV2", &[])).unwrap().unwrap();
        let remove = prepare(&node("LookupTableRemoveV2", &[])).unwrap().unwrap();
        let export = prepare(&node("LookupTableExportV2", &[])).unwrap().unwrap();
        run(&insert, &store, vec![h.clone(), strings(&["b", "a"]), Tensor::from_i64(vec![2], vec![2, 1]).unwrap()])
            .unwrap();
        run(&insert, &store, vec![h.clone(), strings(&["a"]), Tensor::from_i64(vec![1], vec![10]).unwrap()]).unwrap();
        run(&remove, &store, vec![h.clone(), strings(&["b", "zz"])]).unwrap();
        let out = run(&export, &store, vec![h.clone()]).unwrap();
        assert_eq!(out[0], strings(&["a"]));
        assert_eq!(out[1].as_i64().unwrap(), &[10]);
        // Another session adopting the tables sees the same table.
        let other = VariableStore::new();
        other.lookup_tables().adopt(store.lookup_tables());
        let find = prepare(&node("LookupTableFindV2", &[])).unwrap().unwrap();
        let got = run(&find, &other, vec![h, strings(&["a", "b"]), Tensor::scalar_i64(0)]).unwrap();
        assert_eq!(got[0].as_i64().unwrap(), &[10, 0]);
    }

    #[test]
    fn text_file_lines_give_keys_and_values() {
        let spec = |key_index, value_index, vocab_size, offset| TextFileSpec {
            key_index,
            value_index,
            vocab_size,
            delimiter: "\t".into(),
            offset,
        };
        let (k, v) =
            text_file_entries("emerson\t7\nlake\t8\n", &spec(0, 1, -1, 0), DType::String, DType::Int64).unwrap();
        assert_eq!(k, vec![Key::Str(b"emerson".to_vec()), Key::Str(b"lake".to_vec())]);
        assert_eq!(v, vec![Value::Int(7), Value::Int(8)]);
        // Whole line -> line number (StringLookup's vocabulary file), with an offset.
        let (k, v) = text_file_entries("x\ny\n", &spec(-2, -1, -1, 1), DType::String, DType::Int64).unwrap();
        assert_eq!((k[1].clone(), v[1].clone()), (Key::Str(b"y".to_vec()), Value::Int(2)));
        assert!(text_file_entries("x\n", &spec(-2, -1, 3, 0), DType::String, DType::Int64).is_err());
    }
}
