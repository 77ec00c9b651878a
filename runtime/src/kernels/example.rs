//! `tf.train.Example` parsing, the input end of Estimator and TFX serving graphs:
//! `ParseExampleV2` (`tf.io.parse_example`, `tf.io.parse_single_example`), the v1
//! `ParseExample` (keys as scalar inputs) and `ParseSingleExample` (keys as attributes).
//!
//! Each serialized `Example` is read straight from its protobuf wire format (both the packed
//! and the one-tag-per-value encodings of float and int64 lists; unknown fields skipped; a
//! repeated map key, the last one). A feature is then, per kind of key:
//! - **sparse** (`VarLenFeature`): its values, with indices `(example, position)` (just
//!   `position` for a scalar input) and a dense shape `[batch, longest]`;
//! - **dense** of a fully known shape (`FixedLenFeature`): exactly that many values, or the
//!   default when the feature is absent (an empty default means required: absent is an
//!   error); the default must have the dense shape;
//! - **dense** whose first dimension is unknown (`FixedLenSequenceFeature`): any multiple of
//!   the row size, padded with the (one-element) default up to the batch's longest;
//! - **ragged** (`RaggedFeature`): the values of all examples in a row and their row splits
//!   (`[batch + 1]`; empty for a scalar input, as TensorFlow gives them).
//!
//! A feature whose list is of another type than the key's is an error even when empty, as
//! in TensorFlow; errors name the key and the example's index as TensorFlow's do
//! (`Name: <unknown>, Key: seq, Index: 2.  Data types don't match. …`).

use std::collections::HashMap;
use std::sync::Arc;

use autoclust_graph::{AttrValue, DType, ListValue, Node, Tensor, TensorData};

use super::ragged_ops::splits_tensor;
use super::string::strings;
use super::wire::{Payload, Wire};
use super::{Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

/// The kernels of this module, `None` for any other op.
pub(super) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let f: PureFn = match node.op.as_str() {
        "ParseExampleV2" => {
            let attrs = Attrs::read(node, "Tdense", "sparse_types")?;
            let ragged_types = type_list(node, "ragged_value_types")?;
            let split_types = type_list(node, "ragged_split_types")?;
            if ragged_types.len() != split_types.len() {
                return Err(KernelError::invalid("ragged_value_types and ragged_split_types differ in length"));
            }
            Box::new(move |inp: Inputs| {
                let nd = attrs.dense.len();
                expect_inputs(&inp, 5 + nd)?;
                let keys = |i: usize, what: &str, n: usize| -> KResult<Vec<Vec<u8>>> {
                    let v = strings(&inp[i], what)?;
                    if v.len() != n {
                        return Err(KernelError::invalid(format!("Expected len({what}) == {n}, got {}", v.len())));
                    }
                    Ok(v.to_vec())
                };
                let spec = Spec {
                    sparse: keys(2, "sparse_keys", attrs.sparse.len())?.into_iter().zip(attrs.sparse.clone()).collect(),
                    dense: attrs.dense_specs(keys(3, "dense_keys", nd)?, &inp[5..])?,
                    ragged: keys(4, "ragged_keys", ragged_types.len())?
                        .into_iter()
                        .zip(ragged_types.iter().zip(&split_types))
                        .map(|(k, (&v, &s))| (k, v, s))
                        .collect(),
                };
                parse(&spec, &inp[0], &inp[1])
            })
        }
        "ParseExample" => {
            let attrs = Attrs::read(node, "Tdense", "sparse_types")?;
            Box::new(move |inp: Inputs| {
                let (ns, nd) = (attrs.sparse.len(), attrs.dense.len());
                expect_inputs(&inp, 2 + ns + 2 * nd)?;
                let key = |t: &Tensor| -> KResult<Vec<u8>> {
                    match strings(t, "a key")? {
                        [k] => Ok(k.clone()),
                        v => Err(KernelError::invalid(format!("a key must be one string, got {}", v.len()))),
                    }
                };
                let sparse_keys = inp[2..2 + ns].iter().map(key).collect::<KResult<Vec<_>>>()?;
                let dense_keys = inp[2 + ns..2 + ns + nd].iter().map(key).collect::<KResult<Vec<_>>>()?;
                if inp[0].shape.len() != 1 {
                    return Err(KernelError::invalid(format!(
                        "Expected serialized to be a vector, got shape: {:?}",
                        inp[0].shape
                    )));
                }
                let spec = Spec {
                    sparse: sparse_keys.into_iter().zip(attrs.sparse.clone()).collect(),
                    dense: attrs.dense_specs(dense_keys, &inp[2 + ns + nd..])?,
                    ragged: Vec::new(),
                };
                parse(&spec, &inp[0], &inp[1])
            })
        }
        "ParseSingleExample" => {
            let attrs = Attrs::read(node, "Tdense", "sparse_types")?;
            let sparse_keys = string_list(node, "sparse_keys")?;
            let dense_keys = string_list(node, "dense_keys")?;
            if sparse_keys.len() != attrs.sparse.len() || dense_keys.len() != attrs.dense.len() {
                return Err(KernelError::invalid("the key lists and the type lists differ in length"));
            }
            Box::new(move |inp: Inputs| {
                expect_inputs(&inp, 1 + attrs.dense.len())?;
                if !inp[0].shape.is_empty() {
                    return Err(KernelError::invalid(format!(
                        "Expected serialized to be a scalar, got shape: {:?}",
                        inp[0].shape
                    )));
                }
                let spec = Spec {
                    sparse: sparse_keys.iter().cloned().zip(attrs.sparse.clone()).collect(),
                    dense: attrs.dense_specs(dense_keys.clone(), &inp[1..])?,
                    ragged: Vec::new(),
                };
                let names = Tensor::from_strings(vec![0], Vec::new()).expect("empty");
                parse(&spec, &inp[0], &names)
            })
        }
        _ => return Ok(None),
    };
    Ok(Some(f))
}

/// The attributes all three ops share: the sparse value types and the dense types and shapes.
#[derive(Clone)]
struct Attrs {
    sparse: Vec<DType>,
    /// Per dense key: its dtype and shape (`None`: the unknown first dimension of a
    /// `FixedLenSequenceFeature`).
    dense: Vec<(DType, Vec<Option<usize>>)>,
}

impl Attrs {
    fn read(node: &Node, dense_types: &str, sparse_types: &str) -> KResult<Attrs> {
        let sparse = type_list(node, sparse_types)?;
        let types = type_list(node, dense_types)?;
        let shapes: Vec<Vec<Option<usize>>> = match node.attr("dense_shapes") {
            None | Some(AttrValue::List(ListValue::Empty)) => Vec::new(),
            Some(AttrValue::List(ListValue::Shape(v))) => v
                .iter()
                .map(|s| {
                    let dims = s.dims.as_ref().ok_or_else(|| KernelError::invalid("dense_shapes must have a rank"))?;
                    dims.iter()
                        .enumerate()
                        .map(|(i, d)| match d {
                            Some(d) if *d >= 0 => Ok(Some(*d as usize)),
                            _ if i == 0 => Ok(None),
                            _ => Err(KernelError::invalid(
                                "dense_shapes: only the first dimension may be unknown (a FixedLenSequenceFeature)",
                            )),
                        })
                        .collect()
                })
                .collect::<KResult<_>>()?,
            Some(_) => return Err(KernelError::Attr("dense_shapes".into())),
        };
        if shapes.len() != types.len() {
            return Err(KernelError::invalid(format!(
                "len(dense_shapes) != len(dense_keys): {} vs. {}",
                shapes.len(),
                types.len()
            )));
        }
        for t in sparse.iter().chain(&types) {
            if !matches!(t, DType::Float32 | DType::Int64 | DType::String) {
                return Err(KernelError::invalid(format!("a feature is float, int64 or string, not {t}")));
            }
        }
        Ok(Attrs { sparse, dense: types.into_iter().zip(shapes).collect() })
    }

    /// The dense keys' specs, their defaults checked against their shapes.
    fn dense_specs(&self, keys: Vec<Vec<u8>>, defaults: &[Tensor]) -> KResult<Vec<Dense>> {
        keys.into_iter()
            .zip(&self.dense)
            .zip(defaults)
            .enumerate()
            .map(|(i, ((key, (dtype, shape)), default))| {
                if default.dtype != *dtype {
                    return Err(KernelError::invalid(format!(
                        "dense_defaults[{i}] is {}, the key's type is {dtype}",
                        default.dtype
                    )));
                }
                let fixed: Option<Vec<usize>> = shape.iter().copied().collect();
                let ok = match &fixed {
                    // Empty: required; else exactly the dense shape.
                    Some(s) => default.num_elements() == 0 || default.shape == *s,
                    // The padding value of a sequence feature.
                    None => default.num_elements() == 1,
                };
                if !ok {
                    return Err(KernelError::invalid(format!(
                        "def_value[{i}].shape() == {:?} is not compatible with dense_shapes_[{i}] == {}",
                        default.shape,
                        show_shape(shape)
                    )));
                }
                Ok(Dense { key, dtype: *dtype, shape: shape.clone(), default: default.clone() })
            })
            .collect()
    }
}

/// One dense key.
struct Dense {
    key: Vec<u8>,
    dtype: DType,
    shape: Vec<Option<usize>>,
    default: Tensor,
}

/// What to parse: `(key, type)` per sparse key, the dense keys, `(key, value type, split
/// type)` per ragged key.
struct Spec {
    sparse: Vec<(Vec<u8>, DType)>,
    dense: Vec<Dense>,
    ragged: Vec<(Vec<u8>, DType, DType)>,
}

/// One feature's values.
#[derive(Clone, Debug, PartialEq)]
enum Values {
    /// A `Feature` with no list set: no values, of any type.
    Unset,
    Bytes(Vec<Vec<u8>>),
    Float(Vec<f32>),
    Int64(Vec<i64>),
}

impl Values {
    fn len(&self) -> usize {
        match self {
            Values::Unset => 0,
            Values::Bytes(v) => v.len(),
            Values::Float(v) => v.len(),
            Values::Int64(v) => v.len(),
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            Values::Unset => "none",
            Values::Bytes(_) => "string",
            Values::Float(_) => "float",
            Values::Int64(_) => "int64",
        }
    }

    fn matches(&self, dtype: DType) -> bool {
        matches!(
            (self, dtype),
            (Values::Unset, _)
                | (Values::Bytes(_), DType::String)
                | (Values::Float(_), DType::Float32)
                | (Values::Int64(_), DType::Int64)
        )
    }
}

/// Values of one dtype gathered across examples.
enum Column {
    Bytes(Vec<Vec<u8>>),
    Float(Vec<f32>),
    Int64(Vec<i64>),
}

impl Column {
    fn new(dtype: DType) -> Column {
        match dtype {
            DType::Float32 => Column::Float(Vec::new()),
            DType::Int64 => Column::Int64(Vec::new()),
            _ => Column::Bytes(Vec::new()),
        }
    }

    fn len(&self) -> usize {
        match self {
            Column::Bytes(v) => v.len(),
            Column::Float(v) => v.len(),
            Column::Int64(v) => v.len(),
        }
    }

    /// Appends `values` (of this column's type, or unset).
    fn extend(&mut self, values: &Values) {
        match (self, values) {
            (Column::Bytes(c), Values::Bytes(v)) => c.extend(v.iter().cloned()),
            (Column::Float(c), Values::Float(v)) => c.extend_from_slice(v),
            (Column::Int64(c), Values::Int64(v)) => c.extend_from_slice(v),
            _ => {}
        }
    }

    /// Appends `times` copies of the default's elements.
    fn extend_default(&mut self, default: &Tensor, times: usize) {
        for _ in 0..times {
            match (&mut *self, &default.data) {
                (Column::Bytes(c), TensorData::Str(v)) => c.extend(v.iter().cloned()),
                (Column::Float(c), TensorData::F32(v)) => c.extend_from_slice(v),
                (Column::Int64(c), TensorData::I64(v)) => c.extend_from_slice(v),
                _ => {}
            }
        }
    }

    fn into_tensor(self, shape: Vec<usize>) -> KResult<Tensor> {
        let t = match self {
            Column::Bytes(v) => Tensor { dtype: DType::String, shape, data: TensorData::Str(Arc::new(v)) },
            Column::Float(v) => Tensor::from_f32(shape, v).map_err(|e| KernelError::invalid(e.to_string()))?,
            Column::Int64(v) => Tensor::from_i64(shape, v).map_err(|e| KernelError::invalid(e.to_string()))?,
        };
        Ok(t)
    }
}

/// Parses every example of `serialized` (a scalar or a vector) under `spec`: the outputs in
/// the ops' order (sparse indices, values and shapes, dense values, ragged values and splits).
fn parse(spec: &Spec, serialized: &Tensor, names: &Tensor) -> KResult<Outputs> {
    let scalar = match serialized.shape.len() {
        0 => true,
        1 => false,
        _ => {
            return Err(KernelError::invalid(format!(
                "Expected serialized to be a scalar or vector, got shape: {:?}",
                serialized.shape
            )))
        }
    };
    let examples = strings(serialized, "serialized")?;
    let names = strings(names, "names")?;
    if !names.is_empty() && names.len() != examples.len() {
        return Err(KernelError::invalid("names must be empty or have the shape of serialized"));
    }
    let batch = examples.len();
    let name = |b: usize| -> String {
        names.get(b).map_or_else(|| "<unknown>".to_string(), |n| String::from_utf8_lossy(n).into_owned())
    };
    // Every example's features, decoded once.
    let parsed: Vec<HashMap<Vec<u8>, Values>> = examples
        .iter()
        .enumerate()
        .map(|(b, bytes)| {
            read_example(bytes)
                .map_err(|why| {
                    KernelError::invalid(format!("Could not parse example input, value: '{}' ({why})", escaped(bytes)))
                })
                .map_err(|e| if names.is_empty() { e } else { KernelError::invalid(format!("Name: {}, {e}", name(b))) })
        })
        .collect::<KResult<_>>()?;
    let typed = |b: usize, key: &[u8], dtype: DType| -> KResult<Option<&Values>> {
        let Some(v) = parsed[b].get(key) else { return Ok(None) };
        if !v.matches(dtype) {
            return Err(KernelError::invalid(format!(
                "Name: {}, Key: {}, Index: {b}.  Data types don't match. Data type: {} but expected type: {}",
                name(b),
                String::from_utf8_lossy(key),
                v.type_name(),
                dtype.tf_name()
            )));
        }
        Ok(Some(v))
    };
    let mut out = Outputs::new();
    let mut sparse_values = Vec::new();
    let mut sparse_shapes = Vec::new();
    for (key, dtype) in &spec.sparse {
        let mut indices = Vec::new();
        let mut column = Column::new(*dtype);
        let mut longest = 0usize;
        for b in 0..batch {
            let Some(v) = typed(b, key, *dtype)? else { continue };
            for j in 0..v.len() {
                if !scalar {
                    indices.push(b as i64);
                }
                indices.push(j as i64);
            }
            longest = longest.max(v.len());
            column.extend(v);
        }
        let n = column.len();
        let rank = if scalar { 1 } else { 2 };
        out.push(Tensor::from_i64(vec![n, rank], indices).expect("rank indices per value"));
        sparse_values.push(column.into_tensor(vec![n])?);
        let shape = if scalar { vec![longest as i64] } else { vec![batch as i64, longest as i64] };
        sparse_shapes.push(Tensor::from_i64(vec![rank], shape).expect("rank"));
    }
    out.extend(sparse_values);
    out.extend(sparse_shapes);
    for d in &spec.dense {
        out.push(dense(d, batch, scalar, &|b| typed(b, &d.key, d.dtype), &name)?);
    }
    let mut ragged_splits = Vec::new();
    for (key, dtype, split_type) in &spec.ragged {
        let mut column = Column::new(*dtype);
        let mut splits = vec![0i64];
        for b in 0..batch {
            if let Some(v) = typed(b, key, *dtype)? {
                column.extend(v);
            }
            splits.push(column.len() as i64);
        }
        let n = column.len();
        out.push(column.into_tensor(vec![n])?);
        // A scalar input's row splits are empty, as TensorFlow gives them.
        if scalar {
            splits.clear();
        }
        ragged_splits.push(splits_tensor(*split_type, splits)?);
    }
    out.extend(ragged_splits);
    Ok(out)
}

/// One dense key's output: `[batch] + shape` (just `shape` for a scalar input).
fn dense<'v>(
    d: &Dense,
    batch: usize,
    scalar: bool,
    typed: &dyn Fn(usize) -> KResult<Option<&'v Values>>,
    name: &dyn Fn(usize) -> String,
) -> KResult<Tensor> {
    let key = String::from_utf8_lossy(&d.key);
    let stride: usize = d.shape.iter().skip(1).map(|x| x.unwrap_or(1)).product();
    let mut column = Column::new(d.dtype);
    let rows: usize;
    match d.shape.iter().copied().collect::<Option<Vec<usize>>>() {
        Some(fixed) => {
            let count: usize = fixed.iter().product();
            for b in 0..batch {
                match typed(b)? {
                    Some(v) if v.len() == count => column.extend(v),
                    Some(v) => {
                        return Err(KernelError::invalid(format!(
                            "Name: {}, Key: {key}, Index: {b}.  Number of {} values != expected.  Values size: {} but output shape: {}",
                            name(b),
                            d.dtype.tf_name(),
                            v.len(),
                            show_shape(&d.shape)
                        )))
                    }
                    None if d.default.num_elements() == 0 => {
                        return Err(KernelError::invalid(format!(
                            "Name: {}, Feature: {key} (data type: {}) is required but could not be found.",
                            name(b),
                            d.dtype.tf_name()
                        )))
                    }
                    None => column.extend_default(&d.default, 1),
                }
            }
            rows = fixed.first().copied().unwrap_or(1);
        }
        None => {
            // A sequence feature: any number of rows, padded to the longest.
            let mut longest = 0usize;
            for b in 0..batch {
                if let Some(v) = typed(b)? {
                    if stride == 0 || v.len() % stride != 0 {
                        return Err(KernelError::invalid(format!(
                            "Name: {}, Key: {key}, Index: {b}.  Number of {} values is not a multiple of stride length. Saw {} values but output shape is: {}",
                            name(b),
                            d.dtype.tf_name(),
                            v.len(),
                            show_shape(&d.shape)
                        )));
                    }
                    longest = longest.max(v.len() / stride);
                }
            }
            let mut shape = vec![batch, longest];
            shape.extend(d.shape.iter().skip(1).map(|x| x.unwrap_or(0)));
            autoclust_graph::limits::tensor_elements(d.dtype, &shape)
                .map_err(|e| KernelError::invalid(format!("Key: {key}: {e}")))?;
            for b in 0..batch {
                let have = match typed(b)? {
                    Some(v) => {
                        column.extend(v);
                        v.len() / stride.max(1)
                    }
                    None => 0,
                };
                column.extend_default(&d.default, (longest - have) * stride);
            }
            rows = longest;
        }
    }
    let mut shape: Vec<usize> = if scalar { Vec::new() } else { vec![batch] };
    if !d.shape.is_empty() {
        shape.push(rows);
        shape.extend(d.shape.iter().skip(1).map(|x| x.unwrap_or(0)));
    }
    column.into_tensor(shape)
}

/// TensorFlow's spelling of a dense shape (`[?,2]`).
fn show_shape(shape: &[Option<usize>]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.map_or("?".to_string(), |d| d.to_string())).collect();
    format!("[{}]", dims.join(","))
}

/// A short printable form of a malformed input.
fn escaped(bytes: &[u8]) -> String {
    bytes.iter().take(64).flat_map(|&b| std::ascii::escape_default(b)).map(char::from).collect()
}

fn expect_inputs(inp: &Inputs, n: usize) -> KResult<()> {
    if inp.len() != n {
        return Err(KernelError::invalid(format!("expected {n} inputs, got {}", inp.len())));
    }
    Ok(())
}

fn type_list(node: &Node, name: &str) -> KResult<Vec<DType>> {
    match node.attr(name) {
        None => Ok(Vec::new()),
        Some(v) => v.as_type_list().map(<[DType]>::to_vec).ok_or_else(|| KernelError::Attr(name.into())),
    }
}

fn string_list(node: &Node, name: &str) -> KResult<Vec<Vec<u8>>> {
    match node.attr(name) {
        None | Some(AttrValue::List(ListValue::Empty)) => Ok(Vec::new()),
        Some(AttrValue::List(ListValue::S(v))) => Ok(v.clone()),
        Some(_) => Err(KernelError::Attr(name.into())),
    }
}

/// An `Example`'s features by key (a key given twice: the last one, as protobuf maps do).
fn read_example(bytes: &[u8]) -> Result<HashMap<Vec<u8>, Values>, &'static str> {
    let mut features = HashMap::new();
    let mut example = Wire::new(bytes);
    while let Some((field, payload)) = example.field()? {
        // Example.features = 1 (a Features message; several merge).
        let (1, Payload::Bytes(fs)) = (field, payload) else { continue };
        let mut fs = Wire::new(fs);
        while let Some((field, payload)) = fs.field()? {
            // Features.feature = 1: map<string, Feature> entries.
            let (1, Payload::Bytes(entry)) = (field, payload) else { continue };
            let (mut key, mut value) = (Vec::new(), Values::Unset);
            let mut entry = Wire::new(entry);
            while let Some((field, payload)) = entry.field()? {
                match (field, payload) {
                    (1, Payload::Bytes(k)) => key = k.to_vec(),
                    (2, Payload::Bytes(f)) => value = read_feature(f)?,
                    _ => {}
                }
            }
            features.insert(key, value);
        }
    }
    Ok(features)
}

/// A `Feature`: `bytes_list = 1`, `float_list = 2`, `int64_list = 3`, each a message whose
/// field 1 holds the values (packed or one tag each). A later list of another kind replaces
/// an earlier one (a oneof); one of the same kind adds to it (a merge).
fn read_feature(bytes: &[u8]) -> Result<Values, &'static str> {
    let mut value = Values::Unset;
    let mut feature = Wire::new(bytes);
    while let Some((kind, payload)) = feature.field()? {
        let Payload::Bytes(list) = payload else { continue };
        let mut list = Wire::new(list);
        match kind {
            1 => {
                let mut v = match std::mem::replace(&mut value, Values::Unset) {
                    Values::Bytes(v) => v,
                    _ => Vec::new(),
                };
                while let Some((f, p)) = list.field()? {
                    if let (1, Payload::Bytes(b)) = (f, p) {
                        v.push(b.to_vec());
                    }
                }
                value = Values::Bytes(v);
            }
            2 => {
                let mut v = match std::mem::replace(&mut value, Values::Unset) {
                    Values::Float(v) => v,
                    _ => Vec::new(),
                };
                while let Some((f, p)) = list.field()? {
                    match (f, p) {
                        (1, Payload::Fixed32(b)) => v.push(f32::from_le_bytes(b)),
                        (1, Payload::Bytes(packed)) => {
                            if packed.len() % 4 != 0 {
                                return Err("packed floats not a multiple of 4 bytes");
                            }
                            v.extend(packed.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4"))));
                        }
                        _ => {}
                    }
                }
                value = Values::Float(v);
            }
            3 => {
                let mut v = match std::mem::replace(&mut value, Values::Unset) {
                    Values::Int64(v) => v,
                    _ => Vec::new(),
                };
                while let Some((f, p)) = list.field()? {
                    match (f, p) {
                        (1, Payload::Varint(x)) => v.push(x as i64),
                        (1, Payload::Bytes(packed)) => {
                            let mut w = Wire::new(packed);
                            while !w.is_done() {
                                v.push(w.varint()? as i64);
                            }
                        }
                        _ => {}
                    }
                }
                value = Values::Int64(v);
            }
            _ => {}
        }
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut n: u64) -> Vec<u8> {
        let mut b = Vec::new();
        loop {
            let x = (n & 0x7F) as u8;
            n >>= 7;
            if n == 0 {
                b.push(x);
                return b;
            }
            b.push(x | 0x80);
        }
    }

    fn ld(field: u64, payload: &[u8]) -> Vec<u8> {
        let mut b = varint(field << 3 | 2);
        b.extend(varint(payload.len() as u64));
        b.extend_from_slice(payload);
        b
    }

    /// One Example with `features` (key, Feature bytes), each map entry written separately.
    fn example(features: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let entries: Vec<u8> =
            features.iter().flat_map(|(k, f)| ld(1, &[ld(1, k.as_bytes()), ld(2, f)].concat())).collect();
        ld(1, &entries)
    }

    #[test]
    fn reads_both_encodings_skips_unknown_fields_and_keeps_the_last_key() {
        let packed_floats = ld(2, &ld(1, &[1.5f32.to_le_bytes(), (-2.0f32).to_le_bytes()].concat()));
        let unpacked_floats: Vec<u8> = ld(
            2,
            &[varint(1 << 3 | 5), 1.5f32.to_le_bytes().to_vec(), varint(1 << 3 | 5), (-2.0f32).to_le_bytes().to_vec()]
                .concat(),
        );
        let packed_ints = ld(3, &ld(1, &[varint(7), varint(u64::MAX)].concat()));
        let unpacked_ints = ld(3, &[varint(1 << 3), varint(7), varint(1 << 3), varint(u64::MAX)].concat());
        // An unknown varint field 9 in the feature, and the key "a" given twice.
        let mut with_unknown = varint(9 << 3);
        with_unknown.extend(varint(300));
        with_unknown.extend(ld(1, &[ld(1, b"x"), ld(1, b"")].concat()));
        let bytes = example(&[
            ("f", packed_floats),
            ("g", unpacked_floats),
            ("i", packed_ints),
            ("j", unpacked_ints),
            ("s", with_unknown),
            ("a", ld(3, &ld(1, &varint(1)))),
            ("a", ld(3, &ld(1, &varint(2)))),
            ("e", Vec::new()),
        ]);
        let f = read_example(&bytes).unwrap();
        assert_eq!(f[&b"f"[..]], Values::Float(vec![1.5, -2.0]));
        assert_eq!(f[&b"g"[..]], f[&b"f"[..]]);
        assert_eq!(f[&b"i"[..]], Values::Int64(vec![7, -1]));
        assert_eq!(f[&b"j"[..]], f[&b"i"[..]]);
        assert_eq!(f[&b"s"[..]], Values::Bytes(vec![b"x".to_vec(), Vec::new()]));
        assert_eq!(f[&b"a"[..]], Values::Int64(vec![2]));
        assert_eq!(f[&b"e"[..]], Values::Unset);
        // Truncated input is refused, never read past its end.
        for cut in 1..bytes.len() {
            let _ = read_example(&bytes[..cut]);
        }
        assert!(read_example(&[0x0a, 0x05, 0x01]).is_err());
        assert!(read_example(&[0xff; 11]).is_err());
    }

    fn float_feature(v: &[f32]) -> Vec<u8> {
        ld(2, &ld(1, &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()))
    }

    fn strs(v: &[&[u8]]) -> Tensor {
        Tensor::from_strings(vec![v.len()], v.iter().map(|s| s.to_vec()).collect()).unwrap()
    }

    /// `ParseExampleV2` of `examples` with one dense float key `f` of `shape` and `default`.
    fn parse_dense(examples: &[Vec<u8>], shape: Vec<autoclust_graph::Dim>, default: Tensor) -> KResult<Outputs> {
        let mut node = super::super::probe("ParseExampleV2");
        node.attrs.insert("Tdense".into(), AttrValue::List(ListValue::Type(vec![DType::Float32])));
        node.attrs.insert(
            "dense_shapes".into(),
            AttrValue::List(ListValue::Shape(vec![autoclust_graph::Shape::with_dims(shape)])),
        );
        let f = prepare(&node)?.expect("a kernel");
        let ex: Vec<&[u8]> = examples.iter().map(Vec::as_slice).collect();
        f(Inputs::from_vec(vec![strs(&ex), strs(&[]), strs(&[]), strs(&[b"f"]), strs(&[]), default]))
    }

    /// TensorFlow's refusals, in its words (checked against TensorFlow 2.21).
    #[test]
    fn refuses_what_tensorflow_refuses() {
        let three = example(&[("f", float_feature(&[1.0, 2.0, 3.0]))]);
        let err = |r: KResult<Outputs>| r.expect_err("refused").to_string();
        let zeros = |n: usize| Tensor::from_f32(vec![n], vec![0.0; n]).unwrap();
        assert!(err(parse_dense(std::slice::from_ref(&three), vec![Some(2)], zeros(2))).contains(
            "Name: <unknown>, Key: f, Index: 0.  Number of float values != expected.  Values size: 3 but output shape: [2]"
        ));
        assert!(err(parse_dense(std::slice::from_ref(&three), vec![None, Some(2)], Tensor::scalar_f32(0.0))).contains(
            "Key: f, Index: 0.  Number of float values is not a multiple of stride length. Saw 3 values but output shape is: [?,2]"
        ));
        assert!(err(parse_dense(std::slice::from_ref(&three), vec![Some(3)], Tensor::scalar_f32(5.0)))
            .contains("def_value[0].shape() == [] is not compatible with dense_shapes_[0] == [3]"));
        assert!(err(parse_dense(&[three.clone(), Vec::new()], vec![Some(3)], zeros(0)))
            .contains("Name: <unknown>, Feature: f (data type: float) is required but could not be found."));
        let ints = example(&[("f", ld(3, &ld(1, &[])))]);
        assert!(err(parse_dense(&[ints], vec![Some(3)], zeros(3)))
            .contains("Key: f, Index: 0.  Data types don't match. Data type: int64 but expected type: float"));
        assert!(err(parse_dense(&[vec![0xff, 0x01]], vec![Some(3)], zeros(3)))
            .contains("Could not parse example input, value: '\\xff\\x01'"));
        // An absent feature takes the default; a sequence is padded to the longest.
        let out = parse_dense(&[three.clone(), Vec::new()], vec![Some(3)], zeros(3)).unwrap();
        assert_eq!(out[0].as_f32().unwrap(), [1.0, 2.0, 3.0, 0.0, 0.0, 0.0]);
        let out = parse_dense(&[three, Vec::new()], vec![None], Tensor::scalar_f32(-1.0)).unwrap();
        assert_eq!(out[0].shape, [2, 3]);
        assert_eq!(out[0].as_f32().unwrap(), [1.0, 2.0, 3.0, -1.0, -1.0, -1.0]);
    }
}
