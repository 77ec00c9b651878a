//! `tf.sets` kernels (TensorFlow's `set_kernels.cc`): `DenseToDenseSetOperation`,
//! `DenseToSparseSetOperation`, `SparseToSparseSetOperation` and `SetSize`. They also carry
//! `tf.compat.v1.metrics`' `precision_at_k`/`recall_at_k` family.
//!
//! A "row" (TensorFlow's group) is all dimensions but the last; each row's values form a set
//! (a value repeated in a row counts once). The set operations apply `a-b`, `b-a`,
//! `intersection` or `union` row by row and return a sparse tensor: int64 `indices [n, rank]`,
//! `values [n]` sorted ascending within each row (strings bytewise), and int64 `shape [rank]`
//! whose last dimension is the largest result row's size. Rows with an empty result have no
//! entries. `SetSize` counts each row's distinct values (int32, shape `set_shape[:-1]`).
//!
//! Element types are TensorFlow's: int8, int16, int32, int64, uint8, uint16 and string. A
//! sparse operand is grouped by its row coordinates; with `validate_indices` its indices must
//! be in bounds, in row-major order and distinct (TensorFlow's `IndicesValid` messages).
//! Without it, they must still be in bounds (TensorFlow's `CheckGroup`); an unsorted operand's
//! entries are then grouped by row wherever they appear.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use autoclust_graph::{DType, Node, Tensor, TensorData};

use super::{arity, attr_bool_or, int_values, tensor_of};
use super::{Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

/// The set kernels, or `None` if `node.op` is not one.
pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let kind = match node.op.as_str() {
        "SetSize" => {
            let validate = attr_bool_or(node, "validate_indices", true)?;
            return Ok(Some(Box::new(move |inp: Inputs| {
                arity(&inp, 3)?;
                set_size(&inp, validate)
            })));
        }
        "DenseToDenseSetOperation" => Kind::DenseDense,
        "DenseToSparseSetOperation" => Kind::DenseSparse,
        "SparseToSparseSetOperation" => Kind::SparseSparse,
        _ => return Ok(None),
    };
    let op = SetOp::of(node)?;
    let validate = attr_bool_or(node, "validate_indices", true)?;
    Ok(Some(Box::new(move |inp: Inputs| {
        arity(&inp, kind.arity())?;
        set_operation(&inp, kind, op, validate)
    })))
}

#[derive(Clone, Copy)]
enum Kind {
    DenseDense,
    DenseSparse,
    SparseSparse,
}

impl Kind {
    fn arity(self) -> usize {
        match self {
            Kind::DenseDense => 2,
            Kind::DenseSparse => 4,
            Kind::SparseSparse => 6,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum SetOp {
    AMinusB,
    BMinusA,
    Intersection,
    Union,
}

impl SetOp {
    /// The `set_operation` attribute, case-insensitive as in TensorFlow.
    fn of(node: &Node) -> KResult<SetOp> {
        let Some(s) = node.attr("set_operation").and_then(|a| a.as_str()) else {
            return Err(KernelError::invalid("Missing set_operation."));
        };
        Ok(match s.to_ascii_lowercase().as_str() {
            "a-b" => SetOp::AMinusB,
            "b-a" => SetOp::BMinusA,
            "intersection" => SetOp::Intersection,
            "union" => SetOp::Union,
            other => return Err(KernelError::invalid(format!("Invalid set_operation {other}."))),
        })
    }

    fn apply(self, a: &BTreeSet<Elem>, b: &BTreeSet<Elem>) -> BTreeSet<Elem> {
        match self {
            SetOp::AMinusB => a.difference(b).cloned().collect(),
            SetOp::BMinusA => b.difference(a).cloned().collect(),
            SetOp::Intersection => a.intersection(b).cloned().collect(),
            SetOp::Union => a.union(b).cloned().collect(),
        }
    }
}

/// One set element: an integer of any of the set dtypes, or a byte string. Within one
/// operand every element has the same variant, so the derived order is numeric or bytewise.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Elem {
    Int(i64),
    Bytes(Vec<u8>),
}

fn check_dtype(dtype: DType) -> KResult<()> {
    use DType::*;
    match dtype {
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | String => Ok(()),
        d => Err(KernelError::DType(d)),
    }
}

fn elems(t: &Tensor) -> KResult<Vec<Elem>> {
    check_dtype(t.dtype)?;
    Ok(match &t.data {
        TensorData::I32(v) => v.iter().map(|&x| Elem::Int(i64::from(x))).collect(),
        TensorData::I64(v) => v.iter().map(|&x| Elem::Int(x)).collect(),
        TensorData::Str(v) => v.iter().map(|b| Elem::Bytes(b.clone())).collect(),
        // int8, int16, uint8 and uint16 as their little-endian bytes; f64 holds them exactly.
        TensorData::Raw(_) => {
            t.to_f64_vec().ok_or(KernelError::DType(t.dtype))?.into_iter().map(|x| Elem::Int(x as i64)).collect()
        }
        _ => return Err(KernelError::DType(t.dtype)),
    })
}

/// A tensor of `dtype` holding `v` (elements of that dtype, as [`elems`] read them).
fn from_elems(dtype: DType, v: Vec<Elem>) -> KResult<Tensor> {
    let n = v.len();
    let int = |e: &Elem| match e {
        Elem::Int(x) => *x,
        Elem::Bytes(_) => 0,
    };
    Ok(match dtype {
        DType::Int32 => tensor_of(vec![n], v.iter().map(|e| int(e) as i32).collect::<Vec<i32>>()),
        DType::Int64 => tensor_of(vec![n], v.iter().map(int).collect::<Vec<i64>>()),
        DType::String => Tensor {
            dtype,
            shape: vec![n],
            data: TensorData::Str(Arc::new(
                v.into_iter()
                    .map(|e| match e {
                        Elem::Bytes(b) => b,
                        Elem::Int(_) => Vec::new(),
                    })
                    .collect(),
            )),
        },
        DType::Int8 | DType::UInt8 => raw(dtype, n, v.iter().map(|e| int(e) as u8).collect()),
        DType::Int16 => raw(dtype, n, v.iter().flat_map(|e| (int(e) as i16).to_le_bytes()).collect()),
        DType::UInt16 => raw(dtype, n, v.iter().flat_map(|e| (int(e) as u16).to_le_bytes()).collect()),
        d => return Err(KernelError::DType(d)),
    })
}

fn raw(dtype: DType, n: usize, bytes: Vec<u8>) -> Tensor {
    Tensor { dtype, shape: vec![n], data: TensorData::Raw(Arc::new(bytes)) }
}

fn join<T: ToString>(v: &[T]) -> String {
    v.iter().map(T::to_string).collect::<Vec<_>>().join(",")
}

/// A row's coordinates (all but the last) and its values.
type Rows = BTreeMap<Vec<i64>, BTreeSet<Elem>>;

/// A sparse operand from `inp[base..base + 3]`, grouped into rows, and its dense shape.
fn sparse_rows(inp: &Inputs, base: usize, validate: bool) -> KResult<(Rows, Vec<i64>)> {
    let (indices, values, shape_t) = (&inp[base], &inp[base + 1], &inp[base + 2]);
    if shape_t.rank() != 1 {
        return Err(KernelError::invalid("Shape must be a 1D tensor."));
    }
    let shape = int_values(shape_t, "shape")?;
    if let Some(d) = shape.iter().find(|&&d| d < 0) {
        return Err(KernelError::invalid(format!("Dimension {d} must be >= 0")));
    }
    if shape.len() < 2 {
        return Err(KernelError::invalid(format!("Invalid rank {}.", shape.len())));
    }
    if indices.rank() != 2 {
        return Err(KernelError::invalid(format!("Sparse indices must be rank 2 but is rank {}", indices.rank())));
    }
    if values.rank() != 1 {
        return Err(KernelError::invalid(format!("Sparse values must be rank 1 but is rank {}", values.rank())));
    }
    let (n, rank) = (indices.shape[0], indices.shape[1]);
    if values.shape[0] != n {
        return Err(KernelError::invalid(format!(
            "Number of elements in index tensor ({n}) does not match number of elements in value tensor ({})",
            values.shape[0]
        )));
    }
    if rank != shape.len() {
        return Err(KernelError::invalid(format!("Index rank ({rank}) and shape rank ({}) do not match", shape.len())));
    }
    let idx = int_values(indices, "indices")?;
    let vals = elems(values)?;
    let mut rows = Rows::new();
    for (i, v) in vals.into_iter().enumerate() {
        let at = &idx[i * rank..(i + 1) * rank];
        if validate {
            if at.iter().zip(&shape).any(|(&x, &d)| x < 0 || x >= d) {
                return Err(KernelError::invalid(format!(
                    "indices[{i}] = [{}] is out of bounds: need 0 <= index < [{}]",
                    join(at),
                    join(&shape)
                )));
            }
            if i > 0 {
                let prev = &idx[(i - 1) * rank..i * rank];
                match prev.cmp(at) {
                    std::cmp::Ordering::Greater => {
                        return Err(KernelError::invalid(format!(
                            "indices[{i}] = [{}] is out of order. Many sparse ops require sorted indices.\n    \
                             Use `tf.sparse.reorder` to create a correctly ordered copy.\n\n",
                            join(at)
                        )))
                    }
                    std::cmp::Ordering::Equal => {
                        return Err(KernelError::invalid(format!("indices[{i}] = [{}] is repeated", join(at))))
                    }
                    std::cmp::Ordering::Less => {}
                }
            }
        } else if let Some(j) = (0..rank).find(|&j| at[j] < 0 || at[j] >= shape[j]) {
            return Err(KernelError::invalid(format!("indices[{i}, {j}] expected < {}, got {}.", shape[j], at[j])));
        }
        rows.entry(at[..rank - 1].to_vec()).or_default().insert(v);
    }
    Ok((rows, shape))
}

/// A dense operand's rows, in row-major order, and its shape.
fn dense_rows(t: &Tensor) -> KResult<(Vec<BTreeSet<Elem>>, Vec<i64>)> {
    let shape: Vec<i64> = t.shape.iter().map(|&d| d as i64).collect();
    let vals = elems(t)?;
    let last = t.shape.last().copied().unwrap_or(1);
    let groups: usize = t.shape[..t.rank().saturating_sub(1)].iter().product();
    let rows = (0..groups).map(|g| vals[g * last..(g + 1) * last].iter().cloned().collect()).collect();
    Ok((rows, shape))
}

/// TensorFlow's `GroupShapeFromInputs`: both ranks at least 2 and all but the last
/// dimensions equal; the shared row shape.
fn group_shape(a: &[i64], b: &[i64]) -> KResult<Vec<i64>> {
    for s in [a, b] {
        if s.len() < 2 {
            return Err(KernelError::invalid(format!("Shape [{}] has rank {} < 2", join(s), s.len())));
        }
    }
    let (ga, gb) = (&a[..a.len() - 1], &b[..b.len() - 1]);
    if ga != gb {
        return Err(KernelError::invalid(format!("Mismatched shapes [{}] vs [{}]", join(ga), join(gb))));
    }
    Ok(ga.to_vec())
}

/// The coordinates of row `flat` of a row shape `group`.
fn unflatten(mut flat: i64, group: &[i64]) -> Vec<i64> {
    let mut at = vec![0; group.len()];
    for (a, &d) in at.iter_mut().zip(group).rev() {
        *a = flat % d;
        flat /= d;
    }
    at
}

fn set_operation(inp: &Inputs, kind: Kind, op: SetOp, validate: bool) -> KResult<Outputs> {
    let (dt1, dt2) = match kind {
        Kind::DenseDense => (inp[0].dtype, inp[1].dtype),
        Kind::DenseSparse => (inp[0].dtype, inp[2].dtype),
        Kind::SparseSparse => (inp[1].dtype, inp[4].dtype),
    };
    check_dtype(dt1)?;
    if dt1 != dt2 {
        return Err(KernelError::invalid(format!("set1 is {dt1} but set2 is {dt2}")));
    }
    let empty = BTreeSet::new();
    let mut out: Vec<(Vec<i64>, BTreeSet<Elem>)> = Vec::new();
    let mut push = |at: Vec<i64>, a: &BTreeSet<Elem>, b: &BTreeSet<Elem>| {
        let s = op.apply(a, b);
        if !s.is_empty() {
            out.push((at, s));
        }
    };
    let group = match kind {
        Kind::DenseDense | Kind::DenseSparse => {
            let (rows1, shape1) = dense_rows(&inp[0])?;
            let (rows2, shape2) = match kind {
                Kind::DenseDense => {
                    let (r, s) = dense_rows(&inp[1])?;
                    (Err(r), s)
                }
                _ => {
                    let (r, s) = sparse_rows(inp, 1, validate)?;
                    (Ok(r), s)
                }
            };
            let group = group_shape(&shape1, &shape2)?;
            for (g, a) in rows1.iter().enumerate() {
                let at = unflatten(g as i64, &group);
                let b = match &rows2 {
                    Err(dense) => &dense[g],
                    Ok(sparse) => sparse.get(&at).unwrap_or(&empty),
                };
                push(at, a, b);
            }
            group
        }
        Kind::SparseSparse => {
            let (rows1, shape1) = sparse_rows(inp, 0, validate)?;
            let (rows2, shape2) = sparse_rows(inp, 3, validate)?;
            let group = group_shape(&shape1, &shape2)?;
            let keys: BTreeSet<&Vec<i64>> = rows1.keys().chain(rows2.keys()).collect();
            for at in keys {
                push(at.clone(), rows1.get(at).unwrap_or(&empty), rows2.get(at).unwrap_or(&empty));
            }
            group
        }
    };
    let rank = group.len() + 1;
    let n: usize = out.iter().map(|(_, s)| s.len()).sum();
    let max = out.iter().map(|(_, s)| s.len()).max().unwrap_or(0);
    let mut indices = Vec::with_capacity(n * rank);
    let mut values = Vec::with_capacity(n);
    for (at, set) in out {
        for (k, v) in set.into_iter().enumerate() {
            indices.extend_from_slice(&at);
            indices.push(k as i64);
            values.push(v);
        }
    }
    let mut shape = group;
    shape.push(max as i64);
    Ok(Outputs::from_vec(vec![
        tensor_of(vec![n, rank], indices),
        from_elems(dt1, values)?,
        tensor_of(vec![rank], shape),
    ]))
}

/// `SetSize`: the number of distinct values in each row, int32 of shape `set_shape[:-1]`.
fn set_size(inp: &Inputs, validate: bool) -> KResult<Outputs> {
    check_dtype(inp[1].dtype)?;
    let (rows, shape) = sparse_rows(inp, 0, validate)?;
    let group = &shape[..shape.len() - 1];
    let dims: Vec<usize> = group.iter().map(|&d| d as usize).collect();
    let total = super::budget(DType::Int32, &dims)?;
    let mut out = vec![0i32; total];
    for (at, set) in rows {
        let flat = at.iter().zip(group).fold(0i64, |acc, (&x, &d)| acc * d + x);
        out[flat as usize] = set.len() as i32;
    }
    Ok(Outputs::from_vec(vec![tensor_of(dims, out)]))
}

#[cfg(test)]
mod tests {
    use autoclust_graph::{AttrValue, DType, Tensor, TensorData};

    use crate::kernels::compute;
    use crate::kernels::tests_support::node;

    fn i64s(shape: &[usize], v: &[i64]) -> Tensor {
        Tensor::from_i64(shape.to_vec(), v.to_vec()).unwrap()
    }
    fn strs(shape: &[usize], v: &[&str]) -> Tensor {
        Tensor {
            dtype: DType::String,
            shape: shape.to_vec(),
            data: TensorData::Str(std::sync::Arc::new(v.iter().map(|s| s.as_bytes().to_vec()).collect())),
        }
    }
    fn raw(dtype: DType, shape: &[usize], bytes: Vec<u8>) -> Tensor {
        Tensor { dtype, shape: shape.to_vec(), data: TensorData::Raw(std::sync::Arc::new(bytes)) }
    }
    fn set_node(op: &str, set_op: &str) -> autoclust_graph::Node {
        node(op, &[("set_operation", AttrValue::S(set_op.as_bytes().to_vec()))])
    }
    /// Indices, values (as i64 or strings) and shape of a set operation's result.
    fn run(op: &str, set_op: &str, inputs: &[Tensor]) -> (Vec<i64>, Vec<String>, Vec<i64>) {
        let out = compute(&set_node(op, set_op), inputs).unwrap();
        let vals: Vec<String> = match &out[1].data {
            TensorData::Str(v) => v.iter().map(|b| String::from_utf8(b.clone()).unwrap()).collect(),
            _ => out[1].to_f64_vec().unwrap().iter().map(|x| (*x as i64).to_string()).collect(),
        };
        assert_eq!(out[0].shape, vec![vals.len(), out[2].num_elements()]);
        (out[0].as_i64().unwrap().to_vec(), vals, out[2].as_i64().unwrap().to_vec())
    }
    fn s(v: &[i64]) -> Vec<String> {
        v.iter().map(i64::to_string).collect()
    }
    const OPS: [&str; 4] = ["a-b", "b-a", "intersection", "union"];

    // Every expected value below comes from TensorFlow 2.21 (`tf.raw_ops.*SetOperation`,
    // `tf.raw_ops.SetSize`).

    /// Rank 3, duplicates within rows, a row whose result is empty.
    #[test]
    fn dense_to_dense_int64_rank3_matches_tensorflow() {
        let a = i64s(&[2, 2, 4], &[1, 2, 2, 5, 7, 7, 7, 7, 3, 1, 4, 1, 0, 0, 0, 0]);
        let b = i64s(&[2, 2, 4], &[2, 9, 1, 1, 7, 8, 8, 8, 5, 9, 2, 6, 0, 0, 0, 0]);
        let want: [(&[i64], &[i64], &[i64]); 4] = [
            (&[0, 0, 0, 1, 0, 0, 1, 0, 1, 1, 0, 2], &[5, 1, 3, 4], &[2, 2, 3]),
            (&[0, 0, 0, 0, 1, 0, 1, 0, 0, 1, 0, 1, 1, 0, 2, 1, 0, 3], &[9, 8, 2, 5, 6, 9], &[2, 2, 4]),
            (&[0, 0, 0, 0, 0, 1, 0, 1, 0, 1, 1, 0], &[1, 2, 7, 0], &[2, 2, 2]),
            (
                &[
                    0, 0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 3, 0, 1, 0, 0, 1, 1, 1, 0, 0, 1, 0, 1, 1, 0, 2, 1, 0, 3, 1, 0, 4,
                    1, 0, 5, 1, 0, 6, 1, 1, 0,
                ],
                &[1, 2, 5, 9, 7, 8, 1, 2, 3, 4, 5, 6, 9, 0],
                &[2, 2, 7],
            ),
        ];
        for (op, (idx, vals, shape)) in OPS.iter().zip(want) {
            let got = run("DenseToDenseSetOperation", op, &[a.clone(), b.clone()]);
            assert_eq!(got, (idx.to_vec(), s(vals), shape.to_vec()), "{op}");
        }
    }

    /// Strings order bytewise ("" < "Z" < "z" < "zz"); duplicates count once.
    #[test]
    fn dense_to_dense_strings_match_tensorflow() {
        let a = strs(&[2, 3], &["b", "a", "b", "zz", "z", ""]);
        let b = strs(&[2, 3], &["a", "c", "c", "zz", "Z", "z"]);
        let want: [(&[i64], &[&str], &[i64]); 4] = [
            (&[0, 0, 1, 0], &["b", ""], &[2, 1]),
            (&[0, 0, 1, 0], &["c", "Z"], &[2, 1]),
            (&[0, 0, 1, 0, 1, 1], &["a", "z", "zz"], &[2, 2]),
            (&[0, 0, 0, 1, 0, 2, 1, 0, 1, 1, 1, 2, 1, 3], &["a", "b", "c", "", "Z", "z", "zz"], &[2, 4]),
        ];
        for (op, (idx, vals, shape)) in OPS.iter().zip(want) {
            let got = run("DenseToDenseSetOperation", op, &[a.clone(), b.clone()]);
            let vals: Vec<String> = vals.iter().map(|v| v.to_string()).collect();
            assert_eq!(got, (idx.to_vec(), vals, shape.to_vec()), "{op}");
        }
    }

    #[test]
    fn narrow_integer_types_match_tensorflow() {
        let u = raw(DType::UInt8, &[2, 3], vec![200, 3, 200, 255, 0, 1]);
        let v = raw(DType::UInt8, &[2, 3], vec![3, 255, 1, 1, 1, 1]);
        let out = compute(&set_node("DenseToDenseSetOperation", "union"), &[u, v]).unwrap();
        assert_eq!(out[1].dtype, DType::UInt8);
        assert_eq!(out[0].as_i64().unwrap(), &[0, 0, 0, 1, 0, 2, 0, 3, 1, 0, 1, 1, 1, 2]);
        assert_eq!(out[1].to_f64_vec().unwrap(), vec![1., 3., 200., 255., 0., 1., 255.]);
        assert_eq!(out[2].as_i64().unwrap(), &[2, 4]);
        let le = |v: &[i16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let a = raw(DType::Int16, &[2, 2], le(&[-5, 3, -1, 0]));
        let b = raw(DType::Int16, &[2, 2], le(&[3, -7, 1, 1]));
        assert_eq!(run("DenseToDenseSetOperation", "b-a", &[a, b]), (vec![0, 0, 1, 0], s(&[-7, 1]), vec![2, 1]));
    }

    fn sparse2() -> [Tensor; 3] {
        [i64s(&[4, 3], &[0, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 2]), i64s(&[4], &[2, 3, 7, 4]), i64s(&[3], &[2, 2, 3])]
    }

    #[test]
    fn dense_to_sparse_matches_tensorflow() {
        let a = i64s(&[2, 2, 4], &[1, 2, 2, 5, 7, 7, 7, 7, 3, 1, 4, 1, 0, 0, 0, 0]);
        let want: [(&[i64], &[i64], &[i64]); 4] = [
            (&[0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 0], &[1, 5, 1, 3, 0], &[2, 2, 2]),
            (&[0, 0, 0], &[3], &[2, 2, 1]),
            (&[0, 0, 0, 0, 1, 0, 1, 0, 0], &[2, 7, 4], &[2, 2, 1]),
            (
                &[0, 0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 3, 0, 1, 0, 1, 0, 0, 1, 0, 1, 1, 0, 2, 1, 1, 0],
                &[1, 2, 3, 5, 7, 1, 3, 4, 0],
                &[2, 2, 4],
            ),
        ];
        for (op, (idx, vals, shape)) in OPS.iter().zip(want) {
            let mut inp = vec![a.clone()];
            inp.extend(sparse2());
            assert_eq!(run("DenseToSparseSetOperation", op, &inp), (idx.to_vec(), s(vals), shape.to_vec()), "{op}");
        }
    }

    fn sparse1() -> [Tensor; 3] {
        [i64s(&[4, 3], &[0, 0, 0, 0, 0, 2, 1, 1, 0, 1, 1, 1]), i64s(&[4], &[3, 3, 5, 6]), i64s(&[3], &[2, 2, 4])]
    }

    #[test]
    fn sparse_to_sparse_and_set_size_match_tensorflow() {
        let want: [(&[i64], &[i64], &[i64]); 4] = [
            (&[1, 1, 0, 1, 1, 1], &[5, 6], &[2, 2, 2]),
            (&[0, 0, 0, 0, 1, 0, 1, 0, 0], &[2, 7, 4], &[2, 2, 1]),
            (&[0, 0, 0], &[3], &[2, 2, 1]),
            (&[0, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 0, 1, 1, 0, 1, 1, 1], &[2, 3, 7, 4, 5, 6], &[2, 2, 2]),
        ];
        for (op, (idx, vals, shape)) in OPS.iter().zip(want) {
            let mut inp = sparse1().to_vec();
            inp.extend(sparse2());
            assert_eq!(run("SparseToSparseSetOperation", op, &inp), (idx.to_vec(), s(vals), shape.to_vec()), "{op}");
        }
        let size = compute(&node("SetSize", &[]), &sparse1()).unwrap();
        assert_eq!((size[0].shape.clone(), size[0].as_i32().unwrap().to_vec()), (vec![2, 2], vec![1, 0, 0, 2]));
        let size = compute(
            &node("SetSize", &[]),
            &[i64s(&[3, 2], &[0, 0, 0, 1, 2, 0]), strs(&[3], &["x", "x", "y"]), i64s(&[2], &[3, 4])],
        )
        .unwrap();
        assert_eq!(size[0].as_i32().unwrap(), &[1, 0, 1]);
    }

    /// TensorFlow's messages for bad operands.
    #[test]
    fn bad_operands_are_errors_with_tensorflow_messages() {
        let err = |op: &str, attrs: &[(&str, AttrValue)], inp: &[Tensor]| {
            compute(&node(op, attrs), inp).unwrap_err().to_string()
        };
        let union = [("set_operation", AttrValue::S(b"union".to_vec()))];
        let d2d = "DenseToDenseSetOperation";
        assert_eq!(err(d2d, &union, &[i64s(&[2], &[1, 2]), i64s(&[2], &[1, 2])]), "Shape [2] has rank 1 < 2");
        assert_eq!(err(d2d, &union, &[i64s(&[1, 2], &[1, 2]), i64s(&[2, 1], &[1, 2])]), "Mismatched shapes [1] vs [2]");
        let xor = [("set_operation", AttrValue::S(b"xor".to_vec()))];
        assert_eq!(err(d2d, &xor, &[i64s(&[1, 2], &[1, 2]), i64s(&[1, 1], &[1])]), "Invalid set_operation xor.");
        assert_eq!(err(d2d, &[], &[i64s(&[1, 1], &[1]), i64s(&[1, 1], &[1])]), "Missing set_operation.");
        let f = Tensor::from_f32(vec![1, 1], vec![1.0]).unwrap();
        assert!(err(d2d, &union, &[f.clone(), f]).contains("float"));
        let sz = |idx: &[i64], shape: &[i64]| {
            [
                i64s(&[idx.len() / shape.len(), shape.len()], idx),
                i64s(&[idx.len() / shape.len()], &[1, 2]),
                i64s(&[shape.len()], shape),
            ]
        };
        assert_eq!(
            err("SetSize", &[], &sz(&[1, 0, 0, 0], &[2, 2])),
            "indices[1] = [0,0] is out of order. Many sparse ops require sorted indices.\n    Use `tf.sparse.reorder` to create a correctly ordered copy.\n\n"
        );
        assert_eq!(err("SetSize", &[], &sz(&[0, 0, 0, 0], &[2, 2])), "indices[1] = [0,0] is repeated");
        assert_eq!(
            err("SetSize", &[], &sz(&[0, 0, 0, 5], &[2, 2])),
            "indices[1] = [0,5] is out of bounds: need 0 <= index < [2,2]"
        );
        let no_validate = [("validate_indices", AttrValue::B(false))];
        assert_eq!(err("SetSize", &no_validate, &sz(&[0, 0, 0, 5], &[2, 2])), "indices[1, 1] expected < 2, got 5.");
        assert_eq!(err("SetSize", &[], &[i64s(&[1, 1], &[0]), i64s(&[1], &[1]), i64s(&[1], &[2])]), "Invalid rank 1.");
        // Unsorted but not validated: grouped by row all the same.
        let out = compute(&node("SetSize", &no_validate), &sz(&[1, 0, 0, 0], &[2, 2])).unwrap();
        assert_eq!(out[0].as_i32().unwrap(), &[1, 1]);
    }
}
