//! Sparse-tensor kernels: what TensorFlow 1 feature columns, `tf.sparse` and
//! `embedding_lookup_sparse` run in ordinary training steps. `SparseToDense`,
//! `SparseFillEmptyRows` and its gradient, `SparseReshape`, the `SparseSegment{Sum,Mean,SqrtN}`
//! reductions (with and without `num_segments`) and their gradients (V1 and V2),
//! `UniqueWithCounts`, `SparseTensorDenseMatMul`, `SparseCross` (feature columns'
//! `crossed_column`, hashed as TensorFlow hashes it), and the `tf.sparse` algebra:
//! `SparseReorder`, `SparseConcat` (output in row-major order), `SparseSlice`, `SparseAdd` (a
//! merge of two index-ordered operands; a sum whose magnitude is below `thresh` is dropped),
//! `SparseReduceSum`/`SparseReduceMax` and their `*Sparse` forms (entries grouped by their
//! kept coordinates), `SparseSparseMaximum`/`SparseSparseMinimum` (a merge with implicit
//! zeros), `SparseTensorDenseAdd`, `SparseDenseCwise{Add,Mul,Div}` (the dense operand
//! broadcast to the sparse shape).
//!
//! A sparse tensor is int64 `indices [N, R]`, `values [N]` and int64 `dense_shape [R]`. Every
//! index is checked before it is used; the checks and their messages follow TensorFlow's CPU
//! kernels (2.21), and the float arithmetic follows their order (segment rows are added in
//! index order, a mean divides the sum by the count), checked against TensorFlow by
//! `testdata/tf/make_fixtures_sparse.py`'s cases in this file's tests.

use autoclust_graph::{DType, Node, Tensor};

use super::elementwise::Num;
use super::{
    arity, attr_bool_or, attr_int_or, attr_type_or, budget, dispatch_num, int_scalar, int_values, one, take_or,
    tensor_of,
};
use super::{Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

/// The sparse ops' kernels, or `None` if `node.op` is not one.
pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let f: PureFn = match node.op.as_str() {
        "SparseToDense" => {
            let validate = attr_bool_or(node, "validate_indices", true)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 4)?;
                one(sparse_to_dense(&inp[0], &inp[1], &inp[2], &inp[3], validate)?)
            })
        }
        "SparseFillEmptyRows" => Box::new(|inp: Inputs| {
            arity(&inp, 4)?;
            fill_empty_rows(&inp[0], &inp[1], &inp[2], &inp[3])
        }),
        "SparseFillEmptyRowsGrad" => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            dispatch_num!(inp[1].dtype, fill_empty_rows_grad(&inp[0], &inp[1]))
        }),
        "SparseReshape" => Box::new(|inp: Inputs| {
            arity(&inp, 3)?;
            sparse_reshape(&inp[0], &inp[1], &inp[2])
        }),
        "SparseSegmentSum" | "SparseSegmentMean" | "SparseSegmentSqrtN" => {
            let scale = Scale::of(&node.op);
            Box::new(move |inp: Inputs| {
                arity(&inp, 3)?;
                one(dispatch_num!(inp[0].dtype, segment_reduce(&inp[0], &inp[1], &inp[2], None, scale))?)
            })
        }
        "SparseSegmentSumWithNumSegments"
        | "SparseSegmentMeanWithNumSegments"
        | "SparseSegmentSqrtNWithNumSegments" => {
            let scale = Scale::of(&node.op);
            Box::new(move |inp: Inputs| {
                arity(&inp, 4)?;
                if inp[3].rank() != 0 {
                    return Err(KernelError::invalid(format!(
                        "num_segments should be a scalar, not shape {}",
                        super::shape_ops::debug_shape(&inp[3].shape)
                    )));
                }
                let num = int_scalar(&inp[3], "num_segments")?;
                one(dispatch_num!(inp[0].dtype, segment_reduce(&inp[0], &inp[1], &inp[2], Some(num), scale))?)
            })
        }
        "SparseSegmentSumGrad" | "SparseSegmentMeanGrad" | "SparseSegmentSqrtNGrad" => {
            let scale = Scale::of(&node.op);
            Box::new(move |inp: Inputs| {
                arity(&inp, 4)?;
                let g = dispatch_num!(inp[0].dtype, segment_grad(&inp[0], &inp[1], &inp[2], &inp[3], scale))?;
                one(g.dense)
            })
        }
        "SparseSegmentSumGradV2" | "SparseSegmentMeanGradV2" | "SparseSegmentSqrtNGradV2" => {
            let scale = Scale::of(&node.op);
            Box::new(move |inp: Inputs| {
                arity(&inp, 4)?;
                let g = dispatch_num!(inp[0].dtype, segment_grad(&inp[0], &inp[1], &inp[2], &inp[3], scale))?;
                g.compact(&inp[0], inp[1].dtype)
            })
        }
        "UniqueWithCounts" => {
            let out_idx = attr_type_or(node, "out_idx", DType::Int32)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                unique_with_counts(&inp[0], out_idx)
            })
        }
        "UniqueV2" | "UniqueWithCountsV2" => {
            let out_idx = attr_type_or(node, "out_idx", DType::Int32)?;
            let with_counts = node.op == "UniqueWithCountsV2";
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                unique_v2(&inp[0], &inp[1], out_idx, with_counts)
            })
        }
        "SparseTensorDenseMatMul" => {
            let adj = (attr_bool_or(node, "adjoint_a", false)?, attr_bool_or(node, "adjoint_b", false)?);
            Box::new(move |inp: Inputs| {
                arity(&inp, 4)?;
                one(dispatch_num!(inp[3].dtype, sparse_dense_matmul(&inp[0], &inp[1], &inp[2], &inp[3], adj))?)
            })
        }
        "SparseReorder" => Box::new(|inp: Inputs| {
            arity(&inp, 3)?;
            let (idx, n, rank) = index_matrix(&inp[0], "input_indices")?;
            let order = row_major_order(&idx, n, rank);
            let (indices, values) = permuted(&idx, rank, &inp[1], &order)?;
            Ok(Outputs::from_vec(vec![indices, values]))
        }),
        "SparseConcat" => {
            let dim = attr_int_or(node, "concat_dim", 0)?;
            Box::new(move |inp: Inputs| sparse_concat(&inp, dim))
        }
        "SparseSlice" => Box::new(|inp: Inputs| {
            arity(&inp, 5)?;
            sparse_slice(&inp)
        }),
        "SparseAdd" => Box::new(|inp: Inputs| {
            arity(&inp, 7)?;
            dispatch_num!(inp[1].dtype, sparse_add(&inp))
        }),
        "SparseSoftmax" => Box::new(|inp: Inputs| {
            arity(&inp, 3)?;
            one(super::dispatch_float!(inp[1].dtype, sparse_softmax(&inp[0], &inp[1], &inp[2]))?)
        }),
        "SparseReduceSum" | "SparseReduceMax" | "SparseReduceSumSparse" | "SparseReduceMaxSparse" => {
            let keep = attr_bool_or(node, "keep_dims", false)?;
            let max = node.op.starts_with("SparseReduceMax");
            let sparse_out = node.op.ends_with("Sparse");
            Box::new(move |inp: Inputs| {
                arity(&inp, 4)?;
                dispatch_num!(inp[1].dtype, sparse_reduce(&inp, keep, max, sparse_out))
            })
        }
        "SparseSparseMaximum" | "SparseSparseMinimum" => {
            let max = node.op == "SparseSparseMaximum";
            Box::new(move |inp: Inputs| {
                arity(&inp, 6)?;
                dispatch_num!(inp[1].dtype, sparse_sparse_extreme(&inp, max))
            })
        }
        "SparseTensorDenseAdd" => Box::new(|inp: Inputs| {
            arity(&inp, 4)?;
            one(dispatch_num!(inp[1].dtype, sparse_dense_add(&inp))?)
        }),
        "SparseDenseCwiseAdd" | "SparseDenseCwiseMul" | "SparseDenseCwiseDiv" => {
            let op = node.op.clone();
            Box::new(move |inp: Inputs| {
                arity(&inp, 4)?;
                one(dispatch_num!(inp[1].dtype, sparse_dense_cwise(&inp, &op))?)
            })
        }
        "SparseCross" => {
            let spec = Cross {
                n: usize::try_from(attr_int_or(node, "N", 0)?).map_err(|_| KernelError::Attr("N".into()))?,
                hashed: attr_bool_or(node, "hashed_output", false)?,
                buckets: attr_int_or(node, "num_buckets", 0)?,
                key: attr_int_or(node, "hash_key", 0)? as u64,
                internal: attr_type_or(node, "internal_type", DType::Int64)?,
                out: attr_type_or(node, "out_type", DType::Int64)?,
            };
            Box::new(move |inp: Inputs| spec.run(&inp))
        }
        _ => return Ok(None),
    };
    Ok(Some(f))
}

fn shape_str(s: &[usize]) -> String {
    super::shape_ops::debug_shape(s)
}

fn join(v: &[i64]) -> String {
    v.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

/// `SparseToDense`: `default_value` everywhere except at `sparse_indices`, which take
/// `sparse_values` (one value, or one per index). With `validate_indices`, the indices must
/// be in bounds, sorted in row-major order and distinct; without, a repeated index takes its
/// last value. An out-of-bounds index is an error either way.
fn sparse_to_dense(
    indices: &Tensor,
    output_shape: &Tensor,
    values: &Tensor,
    default: &Tensor,
    validate: bool,
) -> KResult<Tensor> {
    if indices.rank() > 2 {
        return Err(KernelError::invalid(format!(
            "sparse_indices should be a scalar, vector, or matrix, got shape {}",
            shape_str(&indices.shape)
        )));
    }
    if output_shape.rank() > 1 {
        return Err(KernelError::invalid(format!(
            "output_shape should be a scalar or vector, got shape {}",
            shape_str(&output_shape.shape)
        )));
    }
    let num_elems = if indices.rank() > 0 { indices.shape[0] } else { 1 };
    let num_dims = if indices.rank() > 1 { indices.shape[1] } else { 1 };
    if !(values.rank() == 0 || (values.rank() == 1 && values.shape[0] == num_elems)) {
        return Err(KernelError::invalid(format!(
            "sparse_values has incorrect shape {}, should be [] or [{num_elems}]",
            shape_str(&values.shape)
        )));
    }
    if default.num_elements() != 1 || default.rank() != 0 {
        return Err(KernelError::invalid(format!(
            "default_value should be a scalar, got shape {}",
            shape_str(&default.shape)
        )));
    }
    let dense = int_values(output_shape, "output_shape")?;
    if dense.len() != num_dims {
        return Err(KernelError::invalid(format!(
            "output_shape has incorrect number of elements: {} should be: {num_dims}",
            dense.len()
        )));
    }
    if let Some(d) = dense.iter().find(|&&d| d < 0) {
        return Err(KernelError::invalid(format!("output_shape has a negative dimension {d}")));
    }
    let shape: Vec<usize> = dense.iter().map(|&d| d as usize).collect();
    budget(values.dtype, &shape)?;
    let idx = int_values(indices, "sparse_indices")?;
    let strides = super::strides(&shape);
    let mut src: Vec<Option<usize>> = vec![None; shape.iter().product()];
    for i in 0..num_elems {
        let at = &idx[i * num_dims..(i + 1) * num_dims];
        if at.iter().zip(&dense).any(|(&x, &d)| x < 0 || x >= d) {
            return Err(KernelError::invalid(if validate {
                format!("indices[{i}] = [{}] is out of bounds: need 0 <= index < [{}]", join(at), join(&dense))
            } else {
                format!("Indices are not valid (out of bounds).  Shape: [{}]", join(&dense))
            }));
        }
        if validate && i > 0 {
            let prev = &idx[(i - 1) * num_dims..i * num_dims];
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
        let flat: usize = at.iter().zip(&strides).map(|(&x, &s)| x as usize * s).sum();
        src[flat] = Some(if values.rank() == 0 { 0 } else { i });
    }
    take_or(values, &src, Some(default), shape)
}

/// The rows and columns of a rank-2 `indices` tensor.
fn index_matrix(indices: &Tensor, what: &str) -> KResult<(Vec<i64>, usize, usize)> {
    if indices.rank() != 2 {
        return Err(KernelError::invalid(format!("{what} must be a matrix, got shape {}", shape_str(&indices.shape))));
    }
    Ok((int_values(indices, what)?, indices.shape[0], indices.shape[1]))
}

/// `SparseSoftmax`: a softmax over each run of consecutive entries that share all but their
/// last coordinate (the input in canonical row-major order, as TensorFlow requires), in the
/// element type: `exp(v − max) / Σ`.
fn sparse_softmax<T: super::elementwise::Float>(indices: &Tensor, values: &Tensor, shape: &Tensor) -> KResult<Tensor> {
    let (idx, n, rank) = index_matrix(indices, "sp_indices")?;
    if shape.rank() != 1 || shape.num_elements() < 2 {
        return Err(KernelError::invalid(format!(
            "Input should have rank >= 2, but received shape: {}",
            int_values(shape, "sp_shape")?.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
        )));
    }
    if values.rank() != 1 || values.shape[0] != n || shape.num_elements() != rank {
        return Err(KernelError::invalid(format!(
            "sp_values {} and sp_shape {} do not fit sp_indices {}",
            shape_str(&values.shape),
            shape_str(&shape.shape),
            shape_str(&indices.shape)
        )));
    }
    let v = T::slice(values);
    let mut out = Vec::with_capacity(n);
    let mut start = 0;
    while start < n {
        let prefix = &idx[start * rank..start * rank + rank - 1];
        let mut end = start + 1;
        while end < n && &idx[end * rank..end * rank + rank - 1] == prefix {
            end += 1;
        }
        let group = &v[start..end];
        let max = group.iter().copied().fold(group[0], |m, x| if x > m { x } else { m });
        let exps: Vec<T> = group.iter().map(|&x| x.sub(max).exp()).collect();
        let sum = exps.iter().copied().fold(T::zero(), |a, e| a.add(e));
        out.extend(exps.into_iter().map(|e| e.div(sum)));
        start = end;
    }
    Ok(tensor_of(vec![n], out))
}

/// `SparseFillEmptyRows`: every row of the dense shape that has no entry gets one, at
/// column 0 (all trailing coordinates 0) with `default_value`. The output lists the rows in
/// order, each row's entries in their input order; `reverse_index_map[i]` is where input
/// entry `i` went, `empty_row_indicator[r]` whether row `r` was filled.
fn fill_empty_rows(indices: &Tensor, values: &Tensor, dense_shape: &Tensor, default: &Tensor) -> KResult<Outputs> {
    let (idx, n, rank) = index_matrix(indices, "indices")?;
    if values.rank() != 1 || values.shape[0] != n {
        return Err(KernelError::invalid(format!(
            "values must be a vector of the {n} indices' length, got shape {}",
            shape_str(&values.shape)
        )));
    }
    if dense_shape.rank() != 1 {
        return Err(KernelError::invalid(format!(
            "dense_shape must be a vector, got shape {}",
            shape_str(&dense_shape.shape)
        )));
    }
    if default.rank() != 0 {
        return Err(KernelError::invalid(format!(
            "default_value must be a scalar, got shape {}",
            shape_str(&default.shape)
        )));
    }
    let dense = int_values(dense_shape, "dense_shape")?;
    if dense.len() != rank {
        return Err(KernelError::invalid(format!(
            "dense_shape has {} elements but indices has {rank} columns",
            dense.len()
        )));
    }
    if rank == 0 {
        return Err(KernelError::invalid("Dense shape cannot be empty."));
    }
    if dense[0] == 0 && n != 0 {
        return Err(KernelError::invalid(format!(
            "Received SparseTensor with dense_shape[0] = 0 but indices.shape[0] = {n}"
        )));
    }
    let rows = usize::try_from(dense[0])
        .map_err(|_| KernelError::invalid(format!("dense_shape[0] must be non-negative, got {}", dense[0])))?;
    budget(DType::Bool, &[rows])?;
    let mut count = vec![0usize; rows];
    for i in 0..n {
        let r = idx[i * rank];
        if r < 0 || r as usize >= rows {
            return Err(KernelError::invalid(format!("indices({i}, 0) is invalid: {r} >= {rows}")));
        }
        count[r as usize] += 1;
    }
    // Where each row's entries start in the output (an empty row takes one slot).
    let mut start = Vec::with_capacity(rows);
    let mut m = 0usize;
    for &c in &count {
        start.push(m);
        m += c.max(1);
    }
    let mut out_idx = vec![0i64; m * rank];
    let mut src: Vec<Option<usize>> = vec![None; m];
    let mut reverse = vec![0i64; n];
    let mut filled = vec![0usize; rows];
    for i in 0..n {
        let r = idx[i * rank] as usize;
        let o = start[r] + filled[r];
        filled[r] += 1;
        out_idx[o * rank..(o + 1) * rank].copy_from_slice(&idx[i * rank..(i + 1) * rank]);
        src[o] = Some(i);
        reverse[i] = o as i64;
    }
    let mut empty = vec![false; rows];
    for r in 0..rows {
        if count[r] == 0 {
            empty[r] = true;
            out_idx[start[r] * rank] = r as i64;
        }
    }
    let out_values = take_or(values, &src, Some(default), vec![m])?;
    Ok(Outputs::from_vec(vec![
        tensor_of(vec![m, rank], out_idx),
        out_values,
        tensor_of(vec![rows], empty),
        tensor_of(vec![n], reverse),
    ]))
}

/// `SparseFillEmptyRowsGrad`: `d_values[i] = grad_values[reverse_index_map[i]]`;
/// `d_default_value` sums the gradients of the filled entries (those no input maps to).
fn fill_empty_rows_grad<T: Num>(reverse: &Tensor, grad: &Tensor) -> KResult<Outputs> {
    if reverse.rank() != 1 || grad.rank() != 1 {
        return Err(KernelError::invalid(format!(
            "reverse_index_map and grad_values must be vectors, got shapes {} and {}",
            shape_str(&reverse.shape),
            shape_str(&grad.shape)
        )));
    }
    let map = int_values(reverse, "reverse_index_map")?;
    let g = T::slice(grad);
    let mut used = vec![false; g.len()];
    let mut d = Vec::with_capacity(map.len());
    for (i, &j) in map.iter().enumerate() {
        let Some(&x) = usize::try_from(j).ok().and_then(|j| g.get(j)) else {
            return Err(KernelError::invalid(format!(
                "Elements in reverse index must be in [0, {}) but got {j} at {i}",
                g.len()
            )));
        };
        used[j as usize] = true;
        d.push(x);
    }
    let mut dd = T::zero();
    for (x, u) in g.iter().zip(&used) {
        if !u {
            dd = dd.add(*x);
        }
    }
    Ok(Outputs::from_vec(vec![tensor_of(vec![map.len()], d), tensor_of(Vec::new(), vec![dd])]))
}

/// `SparseReshape`: the same entries under a new dense shape (one `-1` inferred); each
/// entry keeps its row-major position.
fn sparse_reshape(indices: &Tensor, input_shape: &Tensor, new_shape: &Tensor) -> KResult<Outputs> {
    let (idx, n, rank) = index_matrix(indices, "input_indices")?;
    for (t, what) in [(input_shape, "input_shape"), (new_shape, "new_shape")] {
        if t.rank() != 1 {
            return Err(KernelError::invalid(format!("{what} must be a vector, got shape {}", shape_str(&t.shape))));
        }
    }
    let input = int_values(input_shape, "input_shape")?;
    if input.len() != rank {
        return Err(KernelError::invalid(format!(
            "Input rank ({}) and indices rank ({rank}) do not match",
            input.len()
        )));
    }
    let new = int_values(new_shape, "new_shape")?;
    let out_shape = autoclust_graph::registry::resolve_sparse_reshape(&input, &new).map_err(|e| {
        KernelError::invalid(if e.starts_with("Input to reshape") {
            // TensorFlow prints the inferred dimension as 1.
            let shown: Vec<i64> = new.iter().map(|&d| if d == -1 { 1 } else { d }).collect();
            format!("{e}. input_shape=[{}] output_shape=[{}]", join(&input), join(&shown))
        } else {
            e
        })
    })?;
    let out_rank = out_shape.len();
    let in_strides = row_major_strides(&input);
    let out_strides = row_major_strides(&out_shape);
    let mut out = vec![0i64; n * out_rank];
    for i in 0..n {
        let at = &idx[i * rank..(i + 1) * rank];
        if at.iter().zip(&input).any(|(&x, &d)| x < 0 || x >= d) {
            return Err(KernelError::invalid(format!(
                "indices[{i}] = [{}] is out of bounds: need 0 <= index < [{}]",
                join(at),
                join(&input)
            )));
        }
        let mut flat: i64 = at.iter().zip(&in_strides).map(|(x, s)| x * s).sum();
        for (o, s) in out[i * out_rank..(i + 1) * out_rank].iter_mut().zip(&out_strides) {
            *o = flat / s;
            flat %= s;
        }
    }
    Ok(Outputs::from_vec(vec![tensor_of(vec![n, out_rank], out), tensor_of(vec![out_rank], out_shape)]))
}

/// Row-major strides of a shape of non-negative `i64` dimensions (a zero dimension gives
/// stride 1 where a division would need it; no index exists in an empty shape anyway).
fn row_major_strides(shape: &[i64]) -> Vec<i64> {
    let mut st = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        st[d] = (st[d + 1] * shape[d + 1]).max(1);
    }
    st
}

/// How a sparse segment reduction scales a segment's sum: by 1, `1/count`, `1/sqrt(count)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scale {
    Sum,
    Mean,
    SqrtN,
}

impl Scale {
    fn of(op: &str) -> Scale {
        if op.starts_with("SparseSegmentMean") {
            Scale::Mean
        } else if op.starts_with("SparseSegmentSqrtN") {
            Scale::SqrtN
        } else {
            Scale::Sum
        }
    }

    /// The divisor of a segment of `count` rows.
    fn divisor<T: Num>(self, count: usize) -> Option<T> {
        match self {
            Scale::Sum => None,
            Scale::Mean => Some(T::from_f64(count as f64)),
            Scale::SqrtN => Some(T::from_f64((count as f64).sqrt())),
        }
    }
}

/// The (row, segment) pairs of a sparse segment op, checked: `indices` and `segment_ids` are
/// vectors of one length, ids sorted.
/// `grad`: the gradient ops' wording of a bad index.
fn segment_pairs(indices: &Tensor, ids: &Tensor, rows: usize, grad: bool) -> KResult<(Vec<i64>, Vec<i64>)> {
    if indices.rank() != 1 || ids.rank() != 1 {
        return Err(KernelError::invalid(format!(
            "indices and segment_ids should be vectors, got shapes {} and {}",
            shape_str(&indices.shape),
            shape_str(&ids.shape)
        )));
    }
    if indices.shape[0] != ids.shape[0] {
        return Err(KernelError::invalid(format!(
            "segment_ids and indices should have same size, got {} and {}",
            ids.shape[0], indices.shape[0]
        )));
    }
    let idx = int_values(indices, "indices")?;
    let seg = int_values(ids, "segment_ids")?;
    for (k, &i) in idx.iter().enumerate() {
        if i < 0 || i as usize >= rows {
            return Err(KernelError::invalid(match grad {
                false => format!("Bad: indices[{k}] == {i} out of range [0, {rows})"),
                true => format!("Index {i} out of range [0, {rows})."),
            }));
        }
    }
    let segments = seg.last().map_or(0, |&s| s.max(0) + 1);
    for k in 0..seg.len() {
        if seg[k] < 0 {
            return Err(KernelError::invalid(format!(
                "Segment id {} out of range [0, {segments}), possibly because 'segment_ids' input is not sorted.",
                seg[k]
            )));
        }
        if k > 0 && seg[k] < seg[k - 1] {
            return Err(KernelError::invalid("segment ids are not increasing"));
        }
    }
    Ok((idx, seg))
}

/// `SparseSegment{Sum,Mean,SqrtN}[WithNumSegments]`: `out[s] = scale(Σ data[indices[k]])`
/// over the `k` with `segment_ids[k] = s`, rows added in order; empty segments are 0.
fn segment_reduce<T: Num>(
    data: &Tensor,
    indices: &Tensor,
    ids: &Tensor,
    num: Option<i64>,
    scale: Scale,
) -> KResult<Tensor> {
    if data.rank() == 0 {
        return Err(KernelError::invalid("data must be at least rank 1"));
    }
    let rows = data.shape[0];
    let (idx, seg) = segment_pairs(indices, ids, rows, false)?;
    let last = seg.last().map_or(0, |&s| s + 1);
    let segments = match num {
        Some(n) if n < last => return Err(KernelError::invalid("segment ids must be < num_segments")),
        Some(n) => n,
        None => last,
    };
    let mut shape = data.shape.clone();
    shape[0] = usize::try_from(segments).map_err(|_| KernelError::invalid("num_segments must be non-negative"))?;
    budget(data.dtype, &shape)?;
    let inner: usize = data.shape[1..].iter().product();
    let x = T::slice(data);
    let mut out = vec![T::zero(); shape.iter().product()];
    let mut k = 0;
    while k < seg.len() {
        let s = seg[k] as usize;
        let begin = k;
        while k < seg.len() && seg[k] as usize == s {
            k += 1;
        }
        reduce_rows(&mut out[s * inner..(s + 1) * inner], x, inner, &idx[begin..k], scale);
    }
    Ok(tensor_of(shape, out))
}

/// One segment of a sparse segment reduction, in TensorFlow's order (its CPU kernel's
/// `Reduce`): one row is copied; up to nine rows are added left to right and scaled by the
/// reciprocal `1/n` (`1/sqrt(n)`); more rows are added as a first chunk of `n mod 8` rows
/// (8 or 9 when that is 0 or 1) and then blocks of 8, each block summed before it is added,
/// and the total divided by `n` (`sqrt(n)`).
fn reduce_rows<T: Num>(dst: &mut [T], x: &[T], inner: usize, rows: &[i64], scale: Scale) {
    let row = |i: i64| &x[i as usize * inner..(i as usize + 1) * inner];
    let sum_into = |dst: &mut [T], rows: &[i64]| {
        dst.copy_from_slice(row(rows[0]));
        for &i in &rows[1..] {
            dst.iter_mut().zip(row(i)).for_each(|(d, &y)| *d = d.add(y));
        }
    };
    let n = rows.len();
    match n {
        1 => dst.copy_from_slice(row(rows[0])),
        2..=9 => {
            sum_into(dst, rows);
            if let Some(div) = scale.divisor::<T>(n) {
                let r = T::one().div(div);
                dst.iter_mut().for_each(|d| *d = d.mul(r));
            }
        }
        _ => {
            let first = match n & 7 {
                0 => 8,
                1 => 9,
                r => r,
            };
            sum_into(dst, &rows[..first]);
            let mut block = vec![T::zero(); inner];
            for chunk in rows[first..].chunks(8) {
                sum_into(&mut block, chunk);
                dst.iter_mut().zip(&block).for_each(|(d, &b)| *d = d.add(b));
            }
            if let Some(div) = scale.divisor::<T>(n) {
                dst.iter_mut().for_each(|d| *d = d.div(div));
            }
        }
    }
}

/// A `SparseSegment*Grad`'s result: the dense gradient and which of its rows an index hit.
struct SegmentGrad {
    dense: Tensor,
    hit: Vec<bool>,
}

impl SegmentGrad {
    /// The V2 ops' form: only the rows an index hit, and those sorted indices.
    fn compact(self, grad: &Tensor, index_dtype: DType) -> KResult<Outputs> {
        let rows: Vec<i64> = self.hit.iter().enumerate().filter(|(_, &h)| h).map(|(r, _)| r as i64).collect();
        let inner: usize = grad.shape[1..].iter().product();
        let src: Vec<Option<usize>> =
            rows.iter().flat_map(|&r| (0..inner).map(move |j| Some(r as usize * inner + j))).collect();
        let mut shape = grad.shape.clone();
        shape[0] = rows.len();
        let values = take_or(&self.dense, &src, None, shape)?;
        let n = rows.len();
        Ok(Outputs::from_vec(vec![values, super::int_tensor(index_dtype, vec![n], rows)?]))
    }
}

/// `SparseSegment{Sum,Mean,SqrtN}Grad`: `out[indices[k]] += grad[segment_ids[k]] · w(s)`, with
/// `w` 1, `1/count`, `1/sqrt(count)` of the segment, accumulated in `k` order.
fn segment_grad<T: Num>(
    grad: &Tensor,
    indices: &Tensor,
    ids: &Tensor,
    dim0: &Tensor,
    scale: Scale,
) -> KResult<SegmentGrad> {
    if grad.rank() == 0 {
        return Err(KernelError::invalid("gradient must be at least rank 1"));
    }
    if dim0.rank() != 0 {
        return Err(KernelError::invalid(format!(
            "output_dim0 should be a scalar, got shape {}",
            shape_str(&dim0.shape)
        )));
    }
    let d0 = int_scalar(dim0, "output_dim0")?;
    let d0 = usize::try_from(d0).map_err(|_| KernelError::invalid(format!("output_dim0 must be >= 0, got {d0}")))?;
    let (idx, seg) = segment_pairs(indices, ids, d0, true)?;
    let segments = grad.shape[0];
    let mut counts = vec![0usize; segments];
    for &s in &seg {
        let Some(c) = counts.get_mut(s as usize) else {
            return Err(KernelError::invalid("Invalid number of segments"));
        };
        *c += 1;
    }
    let mut shape = grad.shape.clone();
    shape[0] = d0;
    budget(grad.dtype, &shape)?;
    let inner: usize = grad.shape[1..].iter().product();
    let g = T::slice(grad);
    // TensorFlow computes the weights in double and rounds them to T once.
    let weights: Vec<Option<T>> = counts
        .iter()
        .map(|&c| match scale {
            Scale::Sum => None,
            Scale::Mean => Some(T::from_f64(1.0 / c.max(1) as f64)),
            Scale::SqrtN => Some(T::from_f64(1.0 / (c.max(1) as f64).sqrt())),
        })
        .collect();
    let mut out = vec![T::zero(); shape.iter().product()];
    let mut hit = vec![false; d0];
    for (&i, &s) in idx.iter().zip(&seg) {
        let (i, s) = (i as usize, s as usize);
        hit[i] = true;
        let src = &g[s * inner..(s + 1) * inner];
        let dst = &mut out[i * inner..(i + 1) * inner];
        match weights[s] {
            Some(w) => dst.iter_mut().zip(src).for_each(|(d, &y)| *d = d.add(y.mul(w))),
            None => dst.iter_mut().zip(src).for_each(|(d, &y)| *d = d.add(y)),
        }
    }
    Ok(SegmentGrad { dense: tensor_of(shape, out), hit })
}

/// A hashable key for one element of any dtype with a flat buffer: floats by their bits with
/// -0.0 folded into 0.0 (a NaN is never equal to anything, so each NaN gets its own key).
#[derive(Clone, PartialEq, Eq, Hash)]
enum Key {
    Bits(u64),
    Bytes(Vec<u8>),
    Unique(usize),
}

fn keys(t: &Tensor) -> KResult<Vec<Key>> {
    use autoclust_graph::TensorData as D;
    let float = |f: f64, i: usize| if f.is_nan() { Key::Unique(i) } else { Key::Bits((f + 0.0).to_bits()) };
    Ok(match &t.data {
        D::F32(v) => v.iter().enumerate().map(|(i, &x)| float(f64::from(x), i)).collect(),
        D::F64(v) => v.iter().enumerate().map(|(i, &x)| float(x, i)).collect(),
        D::I32(v) => v.iter().map(|&x| Key::Bits(x as u64)).collect(),
        D::I64(v) => v.iter().map(|&x| Key::Bits(x as u64)).collect(),
        D::Bool(v) => v.iter().map(|&x| Key::Bits(u64::from(x))).collect(),
        D::Str(v) => v.iter().map(|b| Key::Bytes(b.clone())).collect(),
        _ => return Err(KernelError::DType(t.dtype)),
    })
}

/// `UniqueWithCounts`: the distinct elements in order of first occurrence, each element's
/// position in that list, and how often each distinct element occurs.
fn unique_with_counts(x: &Tensor, out_idx: DType) -> KResult<Outputs> {
    if x.rank() != 1 {
        return Err(KernelError::invalid(format!("unique expects a 1D vector, got shape {}", shape_str(&x.shape))));
    }
    unique_slices(x, 0, out_idx, true)
}

/// `UniqueV2`/`UniqueWithCountsV2`: as the V1 ops, over the slices of `x` along the one axis
/// `axis` names (an empty `axis`: a vector's elements), TensorFlow's checks and messages.
fn unique_v2(x: &Tensor, axis: &Tensor, out_idx: DType, with_counts: bool) -> KResult<Outputs> {
    let a = int_values(axis, "axis")?;
    let axis = match a[..] {
        [] if x.rank() == 1 => 0,
        [] => return Err(KernelError::invalid("unique expects a 1D vector.")),
        [a] => {
            let r = x.rank() as i64;
            let a = if a < 0 { a + r } else { a };
            if !(0..r).contains(&a) {
                return Err(KernelError::invalid(format!("axis has to be between [0, {r})")));
            }
            a as usize
        }
        _ => {
            return Err(KernelError::invalid(format!(
                "axis does not support input tensors larger than 1 elements, got {}",
                a.len()
            )))
        }
    };
    unique_slices(x, axis, out_idx, with_counts)
}

/// The distinct slices of `x` along `axis` in order of first occurrence, each slice's
/// position in that list, and (`with_counts`) how often each distinct slice occurs. Any
/// dtype; floats compare as [`keys`] does (a slice holding a NaN equals no other).
fn unique_slices(x: &Tensor, axis: usize, out_idx: DType, with_counts: bool) -> KResult<Outputs> {
    let (outer, len) = (x.shape[..axis].iter().product::<usize>(), x.shape[axis]);
    let inner: usize = x.shape[axis + 1..].iter().product();
    let keys = keys(x)?;
    let slice = |i: usize| -> Vec<Key> {
        (0..outer).flat_map(|o| keys[(o * len + i) * inner..(o * len + i + 1) * inner].iter().cloned()).collect()
    };
    let mut first: Vec<usize> = Vec::new();
    let mut counts: Vec<i64> = Vec::new();
    let mut idx = Vec::with_capacity(len);
    let mut seen: std::collections::HashMap<Vec<Key>, usize> = std::collections::HashMap::with_capacity(len);
    for i in 0..len {
        let next = first.len();
        let j = *seen.entry(slice(i)).or_insert(next);
        if j == next {
            first.push(i);
            counts.push(0);
        }
        counts[j] += 1;
        idx.push(j as i64);
    }
    let n = first.len();
    let positions: Vec<Option<usize>> = (0..outer)
        .flat_map(|o| first.iter().flat_map(move |&i| (0..inner).map(move |k| Some((o * len + i) * inner + k))))
        .collect();
    let mut shape = x.shape.clone();
    shape[axis] = n;
    let mut out =
        Outputs::from_vec(vec![take_or(x, &positions, None, shape)?, super::int_tensor(out_idx, vec![len], idx)?]);
    if with_counts {
        out.push(super::int_tensor(out_idx, vec![n], counts)?);
    }
    Ok(out)
}

/// `SparseTensorDenseMatMul`: `op(A) · op(B)` for a sparse rank-2 `A`, adding each entry's
/// products into its output row in entry order.
fn sparse_dense_matmul<T: Num>(
    a_indices: &Tensor,
    a_values: &Tensor,
    a_shape: &Tensor,
    b: &Tensor,
    (adj_a, adj_b): (bool, bool),
) -> KResult<Tensor> {
    let (idx, n, rank) = index_matrix(a_indices, "a_indices")?;
    if rank != 2 {
        return Err(KernelError::invalid(format!("a_indices must have 2 columns, got {rank}")));
    }
    let shape = int_values(a_shape, "a_shape")?;
    if shape.len() != 2 || shape.iter().any(|&d| d < 0) {
        return Err(KernelError::invalid(format!("a_shape must be 2 non-negative dimensions, got {shape:?}")));
    }
    if a_values.dtype != b.dtype || a_values.rank() != 1 || a_values.shape[0] != n {
        return Err(KernelError::invalid(format!(
            "a_values must be a {} vector of length {n}, got {} of shape {}",
            b.dtype,
            a_values.dtype,
            shape_str(&a_values.shape)
        )));
    }
    if b.rank() != 2 {
        return Err(KernelError::invalid(format!("Tensor 'b' is not a matrix, got shape {}", shape_str(&b.shape))));
    }
    let (a_rows, a_cols) = (shape[0] as usize, shape[1] as usize);
    let (out_rows, inner_a) = if adj_a { (a_cols, a_rows) } else { (a_rows, a_cols) };
    let (inner_b, out_cols) = if adj_b { (b.shape[1], b.shape[0]) } else { (b.shape[0], b.shape[1]) };
    if inner_a != inner_b {
        return Err(KernelError::invalid(format!(
            "Cannot multiply A and B because inner dimension does not match: {inner_a} vs. {inner_b}.  Did you \
             forget a transpose?  Dimensions of A: [{a_rows}, {a_cols}).  Dimensions of B: {}",
            shape_str(&b.shape)
        )));
    }
    budget(b.dtype, &[out_rows, out_cols])?;
    let (av, bv) = (T::slice(a_values), T::slice(b));
    let mut out = vec![T::zero(); out_rows * out_cols];
    for e in 0..n {
        let (r, c) = (idx[2 * e], idx[2 * e + 1]);
        let (m, k) = if adj_a { (c, r) } else { (r, c) };
        // TensorFlow's wording: `m` is the row of op(A), `k` its column.
        let (mi, ki) = if adj_a { (1, 0) } else { (0, 1) };
        if k < 0 || k as usize >= inner_a {
            return Err(KernelError::invalid(format!("k ({k}) from index[{e},{ki}] out of bounds (>={inner_a})")));
        }
        if m < 0 || m as usize >= out_rows {
            return Err(KernelError::invalid(format!("m ({m}) from index[{e},{mi}] out of bounds (>={out_rows})")));
        }
        let (m, k) = (m as usize, k as usize);
        let a = av[e];
        let row = &mut out[m * out_cols..(m + 1) * out_cols];
        for (j, o) in row.iter_mut().enumerate() {
            let bkj = if adj_b { bv[j * inner_b + k] } else { bv[k * out_cols + j] };
            *o = o.add(a.mul(bkj));
        }
    }
    Ok(tensor_of(vec![out_rows, out_cols], out))
}

/// The entries' order sorted by index, row-major (stable).
fn row_major_order(idx: &[i64], n: usize, rank: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| idx[a * rank..(a + 1) * rank].cmp(&idx[b * rank..(b + 1) * rank]));
    order
}

/// Indices and values with the entries taken in `order`.
fn permuted(idx: &[i64], rank: usize, values: &Tensor, order: &[usize]) -> KResult<(Tensor, Tensor)> {
    let n = order.len();
    if values.rank() != 1 || values.shape[0] != idx.len().checked_div(rank).unwrap_or(values.shape[0]) {
        return Err(KernelError::invalid(format!(
            "values must be a vector with one value per index, got shape {}",
            shape_str(&values.shape)
        )));
    }
    let mut out = Vec::with_capacity(n * rank);
    for &e in order {
        out.extend_from_slice(&idx[e * rank..(e + 1) * rank]);
    }
    let src: Vec<Option<usize>> = order.iter().map(|&e| Some(e)).collect();
    Ok((tensor_of(vec![n, rank], out), take_or(values, &src, None, vec![n])?))
}

/// `SparseConcat`: the operands side by side along `dim` (indices shifted by the sizes before
/// them), in row-major order.
fn sparse_concat(inp: &[Tensor], dim: i64) -> KResult<Outputs> {
    if !inp.len().is_multiple_of(3) || inp.len() < 6 {
        return Err(KernelError::invalid(format!(
            "SparseConcat needs N >= 2 sparse operands, got {} inputs",
            inp.len()
        )));
    }
    let n = inp.len() / 3;
    let shapes: Vec<Vec<i64>> = (0..n).map(|i| int_values(&inp[2 * n + i], "shapes")).collect::<KResult<_>>()?;
    let rank = shapes[0].len();
    let d = if dim < 0 { dim + rank as i64 } else { dim };
    if d < 0 || d as usize >= rank {
        return Err(KernelError::invalid(format!(
            "Concat dimension must be in range [{}, {rank}), got {dim}",
            -(rank as i64)
        )));
    }
    let d = d as usize;
    let mut out_shape = shapes[0].clone();
    out_shape[d] = 0;
    let (mut all, mut src_values) = (Vec::new(), Vec::new());
    for (i, sh) in shapes.iter().enumerate() {
        if sh.len() != rank || sh.iter().zip(&shapes[0]).enumerate().any(|(k, (a, b))| k != d && a != b) {
            return Err(KernelError::invalid(format!(
                "All SparseTensors' shapes must match except on the concat dimension, got {:?} and {sh:?}",
                shapes[0]
            )));
        }
        let (idx, k, r) = index_matrix(&inp[i], "indices")?;
        if r != rank || inp[n + i].rank() != 1 || inp[n + i].shape[0] != k {
            return Err(KernelError::invalid(format!("sparse operand {i} has mismatched indices and values")));
        }
        for e in 0..k {
            let mut row = idx[e * rank..(e + 1) * rank].to_vec();
            row[d] += out_shape[d];
            all.extend(row);
            src_values.push((i, e));
        }
        out_shape[d] += sh[d];
    }
    let total = src_values.len();
    let order = row_major_order(&all, total, rank);
    // Gather the values: concatenate them first (one dtype), then permute.
    let mut flat_src = Vec::with_capacity(total);
    let mut offsets = vec![0usize; n];
    for i in 1..n {
        offsets[i] = offsets[i - 1] + inp[n + i - 1].shape[0];
    }
    for &(i, e) in &src_values {
        flat_src.push(offsets[i] + e);
    }
    let values = match inp[n..2 * n]
        .iter()
        .map(|t| match &t.data {
            autoclust_graph::TensorData::Str(v) => Some(v.as_slice()),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
    {
        // Strings have no typed concat: join the lists.
        Some(lists) => {
            let all: Vec<Vec<u8>> = lists.concat();
            let len = all.len();
            Tensor::from_strings(vec![len], all).map_err(|e| KernelError::invalid(e.to_string()))?
        }
        None => super::array::concat(&inp[n..2 * n], 0)?,
    };
    let picked: Vec<usize> = order.iter().map(|&o| flat_src[o]).collect();
    let mut out_idx = Vec::with_capacity(total * rank);
    for &o in &order {
        out_idx.extend_from_slice(&all[o * rank..(o + 1) * rank]);
    }
    let src: Vec<Option<usize>> = picked.into_iter().map(Some).collect();
    Ok(Outputs::from_vec(vec![
        tensor_of(vec![total, rank], out_idx),
        take_or(&values, &src, None, vec![total])?,
        tensor_of(vec![rank], out_shape),
    ]))
}

/// `SparseSlice`: the entries inside `[start, start + size)` (clipped to the shape), shifted to
/// the slice's origin, in their input order.
fn sparse_slice(inp: &[Tensor]) -> KResult<Outputs> {
    let (idx, n, rank) = index_matrix(&inp[0], "indices")?;
    let shape = int_values(&inp[2], "shape")?;
    let (start, size) = (int_values(&inp[3], "start")?, int_values(&inp[4], "size")?);
    if shape.len() != rank || start.len() != rank || size.len() != rank {
        return Err(KernelError::invalid(format!(
            "Expected start and size of {rank} elements (the rank), got {} and {}",
            start.len(),
            size.len()
        )));
    }
    let out_shape: Vec<i64> =
        (0..rank).map(|d| (start[d].saturating_add(size[d])).min(shape[d]).saturating_sub(start[d]).max(0)).collect();
    let mut keep = Vec::new();
    let mut out_idx = Vec::new();
    for e in 0..n {
        let at = &idx[e * rank..(e + 1) * rank];
        if (0..rank).all(|d| at[d] >= start[d] && at[d] < start[d] + out_shape[d]) {
            keep.push(Some(e));
            out_idx.extend((0..rank).map(|d| at[d] - start[d]));
        }
    }
    let m = keep.len();
    Ok(Outputs::from_vec(vec![
        tensor_of(vec![m, rank], out_idx),
        take_or(&inp[1], &keep, None, vec![m])?,
        tensor_of(vec![rank], out_shape),
    ]))
}

/// `SparseAdd`: a merge of `a` and `b`, each taken in its index order; an index in both sums
/// its values, kept when `|sum| >= thresh`; an index in one operand is copied.
fn sparse_add<T: Num>(inp: &[Tensor]) -> KResult<Outputs> {
    let (ai, an, rank) = index_matrix(&inp[0], "a_indices")?;
    let (bi, bn, brank) = index_matrix(&inp[3], "b_indices")?;
    let (ash, bsh) = (int_values(&inp[2], "a_shape")?, int_values(&inp[5], "b_shape")?);
    if ash != bsh || rank != brank || ash.len() != rank {
        return Err(KernelError::invalid(format!(
            "Operands do not have the same ranks or shapes: {ash:?} and {bsh:?}"
        )));
    }
    let (av, bv) = (T::slice(&inp[1]), T::slice(&inp[4]));
    if av.len() != an || bv.len() != bn || inp[4].dtype != inp[1].dtype {
        return Err(KernelError::invalid("each operand needs one value of its dtype per index"));
    }
    let thresh = inp[6].to_f64_vec().and_then(|v| v.first().copied()).ok_or(KernelError::DType(inp[6].dtype))?;
    let (mut out_idx, mut out_v) = (Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    let row = |v: &[i64], k: usize| v[k * rank..(k + 1) * rank].to_vec();
    while i < an && j < bn {
        match row(&ai, i).cmp(&row(&bi, j)) {
            std::cmp::Ordering::Less => {
                out_idx.extend(row(&ai, i));
                out_v.push(av[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out_idx.extend(row(&bi, j));
                out_v.push(bv[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                let s = av[i].add(bv[j]);
                if s.to_f64().abs() >= thresh {
                    out_idx.extend(row(&ai, i));
                    out_v.push(s);
                }
                i += 1;
                j += 1;
            }
        }
    }
    for (k, &v) in av.iter().enumerate().skip(i) {
        out_idx.extend(row(&ai, k));
        out_v.push(v);
    }
    for (k, &v) in bv.iter().enumerate().skip(j) {
        out_idx.extend(row(&bi, k));
        out_v.push(v);
    }
    let m = out_v.len();
    Ok(Outputs::from_vec(vec![
        tensor_of(vec![m, rank], out_idx),
        tensor_of(vec![m], out_v),
        tensor_of(vec![rank], ash),
    ]))
}

/// The dense shape of a sparse operand and each entry's flat offset in it, checked in bounds.
fn dense_offsets(idx: &[i64], n: usize, rank: usize, shape: &[i64]) -> KResult<(Vec<usize>, Vec<usize>)> {
    if shape.len() != rank || shape.iter().any(|&d| d < 0) {
        return Err(KernelError::invalid(format!("the dense shape {shape:?} does not fit indices of rank {rank}")));
    }
    let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    let st = super::strides(&dims);
    let mut offs = Vec::with_capacity(n);
    for e in 0..n {
        let at = &idx[e * rank..(e + 1) * rank];
        if at.iter().zip(shape).any(|(&x, &d)| x < 0 || x >= d) {
            return Err(KernelError::invalid(format!(
                "indices[{e}] = [{}] is out of bounds: need 0 <= index < [{}]",
                join(at),
                join(shape)
            )));
        }
        offs.push(at.iter().zip(&st).map(|(&x, &s)| x as usize * s).sum());
    }
    Ok((dims, offs))
}

/// `SparseReduceSum`/`SparseReduceMax` and their `*Sparse` forms, as TensorFlow's
/// `sparse_reduce_op.cc`: the entries are grouped by their coordinates in the kept
/// dimensions (sorted by those, then by the reduced ones), and each group's values summed in
/// that order or their maximum taken. The dense forms write each group's result at its kept
/// coordinates in a tensor of zeros (a kept position with no entry is 0, also for `Max`);
/// the sparse forms return one entry per group (indices with zeros in reduced dimensions
/// under `keep_dims`), its values and the reduced shape.
fn sparse_reduce<T: Num>(inp: &[Tensor], keep: bool, max: bool, sparse_out: bool) -> KResult<Outputs> {
    let (idx, n, rank) = index_matrix(&inp[0], "input_indices")?;
    let shape = int_values(&inp[2], "input_shape")?;
    let (dims, _) = dense_offsets(&idx, n, rank, &shape)?;
    if inp[3].rank() > 1 {
        return Err(KernelError::invalid(format!(
            "Expected reduction_axes to be a scalar or a vector; got shape: {}",
            shape_str(&inp[3].shape)
        )));
    }
    let mut reduced = vec![false; rank];
    for a in int_values(&inp[3], "reduction_axes")? {
        let r = rank as i64;
        if a < -r || a >= r {
            return Err(KernelError::invalid(format!(
                "Invalid reduction dimension {a}, for input with {rank} dimensions."
            )));
        }
        reduced[a.rem_euclid(r) as usize] = true;
    }
    let v = T::slice(&inp[1]);
    if v.len() != n {
        return Err(KernelError::invalid("input_values must have one value per index"));
    }
    let kept: Vec<usize> = (0..rank).filter(|&d| !reduced[d]).collect();
    let key: Vec<usize> = kept.iter().copied().chain((0..rank).filter(|&d| reduced[d])).collect();
    let coord = |e: usize, d: usize| idx[e * rank + d];
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| key.iter().map(|&d| coord(a, d)).cmp(key.iter().map(|&d| coord(b, d))));
    // Consecutive runs of equal kept coordinates, each with its reduced value.
    let mut groups: Vec<(usize, T)> = Vec::new();
    let mut start = 0;
    while start < n {
        let first = order[start];
        let mut end = start + 1;
        while end < n && kept.iter().all(|&d| coord(order[end], d) == coord(first, d)) {
            end += 1;
        }
        let mut acc = v[first];
        for &e in &order[start + 1..end] {
            acc = if max { acc.maximum(v[e]) } else { acc.add(v[e]) };
        }
        groups.push((first, acc));
        start = end;
    }
    let out_dims: Vec<usize> = if keep {
        (0..rank).map(|d| if reduced[d] { 1 } else { dims[d] }).collect()
    } else {
        kept.iter().map(|&d| dims[d]).collect()
    };
    if sparse_out {
        let width = out_dims.len();
        let mut out_idx = vec![0i64; groups.len() * width];
        for (g, &(e, _)) in groups.iter().enumerate() {
            for (j, &d) in kept.iter().enumerate() {
                out_idx[g * width + if keep { d } else { j }] = coord(e, d);
            }
        }
        let values: Vec<T> = groups.iter().map(|&(_, x)| x).collect();
        let out_shape: Vec<i64> = out_dims.iter().map(|&d| d as i64).collect();
        return Ok(Outputs::from_iter([
            tensor_of(vec![groups.len(), width], out_idx),
            tensor_of(vec![groups.len()], values),
            tensor_of(vec![width], out_shape),
        ]));
    }
    budget(inp[1].dtype, &out_dims)?;
    let kept_dims: Vec<usize> = kept.iter().map(|&d| dims[d]).collect();
    let st = super::strides(&kept_dims);
    let mut out = vec![T::zero(); kept_dims.iter().product()];
    for &(e, x) in &groups {
        let o: usize = kept.iter().zip(&st).map(|(&d, &s)| coord(e, d) as usize * s).sum();
        out[o] = x;
    }
    Ok(Outputs::from_iter([tensor_of(out_dims, out)]))
}

/// `SparseSparseMaximum`/`SparseSparseMinimum`, as TensorFlow's
/// `sparse_sparse_binary_op_shared.cc`: the two entry lists (taken to be in row-major order)
/// merged by index; an index on one side only meets an implicit zero on the other; every
/// union entry is kept, zeros included.
fn sparse_sparse_extreme<T: Num>(inp: &[Tensor], max: bool) -> KResult<Outputs> {
    if inp[0].rank() != 2 || inp[3].rank() != 2 {
        return Err(KernelError::invalid(format!(
            "Inputs a_indices and b_indices should be matrices but received shapes: {}, {}",
            shape_str(&inp[0].shape),
            shape_str(&inp[3].shape)
        )));
    }
    if inp[1].rank() != 1 || inp[4].rank() != 1 {
        return Err(KernelError::invalid(format!(
            "Inputs a_values and b_values should be vectors but received shapes: {} and {}",
            shape_str(&inp[1].shape),
            shape_str(&inp[4].shape)
        )));
    }
    let (an, bn) = (inp[0].shape[0], inp[3].shape[0]);
    if inp[1].shape[0] != an || inp[4].shape[0] != bn {
        return Err(KernelError::invalid(format!(
            "Expected {an} and {bn} non-empty input values, got {} and {}",
            inp[1].shape[0], inp[4].shape[0]
        )));
    }
    let (ash, bsh) = (int_values(&inp[2], "a_shape")?, int_values(&inp[5], "b_shape")?);
    if ash.len() != bsh.len() {
        return Err(KernelError::invalid(format!(
            "Operands do not have the same ranks; got shapes: {} and {}",
            join(&ash),
            join(&bsh)
        )));
    }
    if let Some(d) = (0..ash.len()).find(|&d| ash[d] != bsh[d]) {
        return Err(KernelError::invalid(format!(
            "Operands' shapes do not match: got {} and {} for dimension {d}",
            ash[d], bsh[d]
        )));
    }
    let rank = inp[0].shape[1];
    let (ai, bi) = (int_values(&inp[0], "a_indices")?, int_values(&inp[3], "b_indices")?);
    let (av, bv) = (T::slice(&inp[1]), T::slice(&inp[4]));
    let row = |m: &[i64], i: usize| m[i * rank..(i + 1) * rank].to_vec();
    let (mut i, mut j) = (0, 0);
    let (mut idx, mut vals) = (Vec::with_capacity((an + bn) * rank), Vec::with_capacity(an + bn));
    let op = |x: T, y: T| if max { x.maximum(y) } else { x.minimum(y) };
    while i < an || j < bn {
        let order = if i == an {
            std::cmp::Ordering::Greater
        } else if j == bn {
            std::cmp::Ordering::Less
        } else {
            ai[i * rank..(i + 1) * rank].cmp(&bi[j * rank..(j + 1) * rank])
        };
        match order {
            std::cmp::Ordering::Less => {
                idx.extend(row(&ai, i));
                vals.push(op(av[i], T::zero()));
                i += 1;
            }
            std::cmp::Ordering::Equal => {
                idx.extend(row(&ai, i));
                vals.push(op(av[i], bv[j]));
                i += 1;
                j += 1;
            }
            std::cmp::Ordering::Greater => {
                idx.extend(row(&bi, j));
                vals.push(op(T::zero(), bv[j]));
                j += 1;
            }
        }
    }
    let n = vals.len();
    Ok(Outputs::from_iter([tensor_of(vec![n, rank], idx), tensor_of(vec![n], vals)]))
}

/// `SparseTensorDenseAdd`: `b` with each sparse entry added at its index.
fn sparse_dense_add<T: Num>(inp: &[Tensor]) -> KResult<Tensor> {
    let (idx, n, rank) = index_matrix(&inp[0], "a_indices")?;
    let shape = int_values(&inp[2], "a_shape")?;
    let b = &inp[3];
    if b.shape.iter().map(|&d| d as i64).collect::<Vec<_>>() != shape || b.dtype != inp[1].dtype {
        return Err(KernelError::invalid(format!(
            "Dimensions of a_shape {shape:?} and b {} must match",
            shape_str(&b.shape)
        )));
    }
    let (_, offs) = dense_offsets(&idx, n, rank, &shape)?;
    let a = T::slice(&inp[1]);
    if a.len() != n {
        return Err(KernelError::invalid("a_values must have one value per index"));
    }
    let mut out = T::slice(b).to_vec();
    for (e, &o) in offs.iter().enumerate() {
        out[o] = out[o].add(a[e]);
    }
    Ok(tensor_of(b.shape.clone(), out))
}

/// `SparseDenseCwise{Add,Mul,Div}`: each entry's value with the dense operand (broadcast to the
/// sparse shape) at its index.
fn sparse_dense_cwise<T: Num>(inp: &[Tensor], op: &str) -> KResult<Tensor> {
    let (idx, n, rank) = index_matrix(&inp[0], "sp_indices")?;
    let shape = int_values(&inp[2], "sp_shape")?;
    let (dims, offs) = dense_offsets(&idx, n, rank, &shape)?;
    let dense = super::elementwise::broadcast_to::<T>(&inp[3], &dims).map_err(|_| {
        KernelError::invalid(format!(
            "SparseDenseBinaryOpShared broadcasts dense to sparse only; got incompatible shapes: [{}] vs. {}",
            join(&shape),
            shape_str(&inp[3].shape)
        ))
    })?;
    let (v, d) = (T::slice(&inp[1]), T::slice(&dense));
    if v.len() != n {
        return Err(KernelError::invalid("sp_values must have one value per index"));
    }
    let out: Vec<T> = offs
        .iter()
        .enumerate()
        .map(|(e, &o)| match op {
            "SparseDenseCwiseAdd" => v[e].add(d[o]),
            "SparseDenseCwiseMul" => v[e].mul(d[o]),
            _ => v[e].div(d[o]),
        })
        .collect();
    Ok(tensor_of(vec![n], out))
}

/// One feature of a crossed column.
#[derive(Clone, Copy)]
enum Feature<'a> {
    Int(i64),
    Str(&'a [u8]),
}

impl Feature<'_> {
    /// The feature's hash in a cross: an integer is its own bits, a string its Fingerprint64.
    fn hash(self) -> u64 {
        match self {
            Feature::Int(v) => v as u64,
            Feature::Str(b) => super::string::fingerprint64(b),
        }
    }
    fn text(self) -> Vec<u8> {
        match self {
            Feature::Int(v) => v.to_string().into_bytes(),
            Feature::Str(b) => b.to_vec(),
        }
    }
}

/// Farmhash's `FingerprintCat64`: folds `fp2` into `fp1`.
fn fingerprint_cat64(fp1: u64, fp2: u64) -> u64 {
    const MUL: u64 = 0xc6a4_a793_5bd1_e995;
    let shift_mix = |v: u64| v ^ (v >> 47);
    let mut r = fp1 ^ MUL;
    r ^= shift_mix(fp2.wrapping_mul(MUL)).wrapping_mul(MUL);
    r = r.wrapping_mul(MUL);
    r = shift_mix(r).wrapping_mul(MUL);
    shift_mix(r)
}

/// `SparseCross`'s attributes.
struct Cross {
    n: usize,
    hashed: bool,
    buckets: i64,
    key: u64,
    internal: DType,
    out: DType,
}

impl Cross {
    /// The features of every column (sparse inputs first, then dense), row by row.
    fn columns<'a>(&self, inp: &'a [Tensor]) -> KResult<(usize, Vec<Vec<Vec<Feature<'a>>>>)> {
        let n = self.n;
        if inp.len() < 3 * n {
            return Err(KernelError::Arity { expected: 3 * n, got: inp.len() });
        }
        let features = |t: &'a Tensor| -> KResult<Vec<Feature<'a>>> {
            if self.internal == DType::String && t.dtype != DType::String {
                return Err(KernelError::invalid(format!(
                    "Input values should be of internal type 7 but received {}",
                    if t.dtype == DType::Int64 { 9 } else { 3 }
                )));
            }
            match (&t.data, t.dtype) {
                (autoclust_graph::TensorData::Str(v), _) => Ok(v.iter().map(|b| Feature::Str(b)).collect()),
                (_, DType::Int64 | DType::Int32) => {
                    Ok(int_values(t, "values")?.into_iter().map(Feature::Int).collect())
                }
                (_, d) => Err(KernelError::DType(d)),
            }
        };
        let dense = &inp[3 * n..];
        let batch = match (n, dense.first()) {
            (0, Some(d)) if d.rank() == 2 => d.shape[0],
            (0, _) => return Err(KernelError::invalid("SparseCross needs at least one input column of rank 2")),
            _ => {
                let sh = int_values(&inp[2 * n], "shapes")?;
                usize::try_from(sh.first().copied().unwrap_or(-1))
                    .map_err(|_| KernelError::invalid(format!("shapes[0] must be a valid dense shape, got {sh:?}")))?
            }
        };
        budget(DType::Int64, &[batch])?;
        let mut cols = Vec::with_capacity(inp.len() - 2 * n);
        for c in 0..n {
            let (idx, values, shape) = (&inp[c], &inp[n + c], &inp[2 * n + c]);
            let (ix, k, rank) = index_matrix(idx, "indices")?;
            let sh = int_values(shape, "shapes")?;
            if rank != 2 || sh.len() != 2 {
                return Err(KernelError::invalid(format!(
                    "Expected indices[{c}] of rank 2 and shapes[{c}] of 2 elements, got {rank} columns and {} elements",
                    sh.len()
                )));
            }
            if sh[0] != batch as i64 {
                return Err(KernelError::invalid(format!("Expected batch size {batch} got {}", sh[0])));
            }
            let v = features(values)?;
            if v.len() != k {
                return Err(KernelError::invalid(format!(
                    "Expected size of values[{c}] to be {k} (the rows of indices[{c}]), got {}",
                    v.len()
                )));
            }
            let mut rows: Vec<Vec<Feature<'a>>> = vec![Vec::new(); batch];
            for (e, f) in v.into_iter().enumerate() {
                let r = ix[e * 2];
                let row = usize::try_from(r).ok().and_then(|r| rows.get_mut(r)).ok_or_else(|| {
                    KernelError::invalid(format!("indices[{c}][{e}] has row {r}, not in [0, {batch})"))
                })?;
                row.push(f);
            }
            cols.push(rows);
        }
        for (c, d) in dense.iter().enumerate() {
            if d.rank() != 2 || d.shape[0] != batch {
                return Err(KernelError::invalid(format!(
                    "Expected dense_inputs[{c}] to be a matrix of {batch} rows, got shape {}",
                    shape_str(&d.shape)
                )));
            }
            let w = d.shape[1];
            let v = features(d)?;
            cols.push((0..batch).map(|r| v[r * w..(r + 1) * w].to_vec()).collect());
        }
        Ok((batch, cols))
    }

    /// Each row's cartesian product of its columns' features, the last column varying
    /// fastest; a row with an empty column crosses to nothing.
    fn run(&self, inp: &[Tensor]) -> KResult<Outputs> {
        if !self.hashed && self.out != DType::String {
            return Err(KernelError::invalid("an unhashed SparseCross outputs strings: out_type must be string"));
        }
        let (batch, cols) = self.columns(inp)?;
        let mut indices: Vec<i64> = Vec::new();
        let mut hashes: Vec<i64> = Vec::new();
        let mut texts: Vec<Vec<u8>> = Vec::new();
        let mut widest = 0usize;
        for r in 0..batch {
            let row: Vec<&[Feature<'_>]> = cols.iter().map(|c| &c[r][..]).collect();
            if row.is_empty() || row.iter().any(|f| f.is_empty()) {
                continue;
            }
            let count = row
                .iter()
                .try_fold(1usize, |a, f| a.checked_mul(f.len()))
                .ok_or_else(|| KernelError::invalid(format!("the cross of row {r} has too many elements")))?;
            budget(DType::Int64, &[indices.len() / 2 + count, 2])?;
            widest = widest.max(count);
            let mut pick = vec![0usize; row.len()];
            for j in 0..count {
                indices.extend([r as i64, j as i64]);
                if self.hashed {
                    let h = row.iter().zip(&pick).fold(self.key, |h, (f, &p)| fingerprint_cat64(h, f[p].hash()));
                    let m = if self.buckets > 0 { self.buckets as u64 } else { i64::MAX as u64 };
                    hashes.push((h % m) as i64);
                } else {
                    let parts: Vec<Vec<u8>> = row.iter().zip(&pick).map(|(f, &p)| f[p].text()).collect();
                    texts.push(parts.join(&b"_X_"[..]));
                }
                for d in (0..row.len()).rev() {
                    pick[d] += 1;
                    if pick[d] < row[d].len() {
                        break;
                    }
                    pick[d] = 0;
                }
            }
        }
        let m = indices.len() / 2;
        let values = if self.hashed {
            tensor_of(vec![m], hashes)
        } else {
            Tensor::from_strings(vec![m], texts).map_err(|e| KernelError::invalid(e.to_string()))?
        };
        Ok(Outputs::from_vec(vec![
            tensor_of(vec![m, 2], indices),
            values,
            tensor_of(vec![2], vec![batch as i64, widest as i64]),
        ]))
    }
}

/// Every expected value and message below is TensorFlow 2.21's for the same call (run
/// eagerly through `gen_sparse_ops`/`gen_math_ops`/`gen_array_ops`, CPU).
#[cfg(test)]
mod tests {
    #[test]
    fn sparse_softmax_matches_tensorflow() {
        // TensorFlow 2.21: tf.raw_ops.SparseSoftmax on a [3, 4] and a [2, 2, 4] sparse tensor.
        let idx = Tensor::from_i64(vec![6, 2], vec![0, 0, 0, 2, 0, 3, 1, 1, 2, 0, 2, 1]).unwrap();
        let vals = Tensor::from_f32(vec![6], vec![1.0, 2.0, -1.0, 5.0, 0.5, 0.5]).unwrap();
        let shape = Tensor::from_i64(vec![2], vec![3, 4]).unwrap();
        let r = crate::kernels::compute(&super::super::probe("SparseSoftmax"), &[idx, vals, shape]).unwrap();
        let want = [0.25949648, 0.70538455, 0.035119027, 1.0, 0.5, 0.5];
        for (g, w) in r[0].as_f32().unwrap().iter().zip(want) {
            assert!((g - w).abs() < 1e-7, "{:?}", r[0]);
        }
        let idx3 = Tensor::from_i64(vec![5, 3], vec![0, 0, 1, 0, 0, 2, 0, 1, 0, 1, 0, 0, 1, 0, 3]).unwrap();
        let v3 = Tensor::from_f64(vec![5], vec![1., 3., 7., -2., 100.]).unwrap();
        let s3 = Tensor::from_i64(vec![3], vec![2, 2, 4]).unwrap();
        let r = crate::kernels::compute(&super::super::probe("SparseSoftmax"), &[idx3, v3, s3]).unwrap();
        let want = [0.11920292202211755, 0.8807970779778823, 1.0, 5.0345753587649823e-45, 1.0];
        for (g, w) in r[0].as_f64().unwrap().iter().zip(want) {
            assert!((g - w).abs() <= 1e-15 * w.max(1e-300), "{:?}", r[0]);
        }
        let e = crate::kernels::compute(
            &super::super::probe("SparseSoftmax"),
            &[
                Tensor::from_i64(vec![1, 1], vec![0]).unwrap(),
                Tensor::from_f32(vec![1], vec![1.0]).unwrap(),
                Tensor::from_i64(vec![1], vec![3]).unwrap(),
            ],
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "Input should have rank >= 2, but received shape: 3");
    }

    use autoclust_graph::{AttrValue, Tensor, TensorData};

    use crate::kernels::compute;
    use crate::kernels::tests_support::{node, run1};

    fn i64s(shape: &[usize], v: &[i64]) -> Tensor {
        Tensor::from_i64(shape.to_vec(), v.to_vec()).unwrap()
    }
    fn i32s(v: &[i32]) -> Tensor {
        Tensor::from_i32(vec![v.len()], v.to_vec()).unwrap()
    }
    fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_f32(shape.to_vec(), v.to_vec()).unwrap()
    }
    fn strs(v: &[&str]) -> Tensor {
        Tensor::from_strings(vec![v.len()], v.iter().map(|s| s.as_bytes().to_vec()).collect()).unwrap()
    }
    fn err(op: &str, attrs: &[(&str, AttrValue)], inputs: &[Tensor]) -> String {
        compute(&node(op, attrs), inputs).unwrap_err().to_string()
    }
    fn close(got: &Tensor, want: &[f32]) {
        let g = got.as_f32().unwrap();
        assert_eq!(g.len(), want.len(), "{g:?} vs {want:?}");
        for (a, b) in g.iter().zip(want) {
            assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "{g:?} vs {want:?}");
        }
    }

    #[test]
    fn sparse_to_dense_fills_validates_and_lets_the_last_repeat_win_unvalidated() {
        let no_validate = [("validate_indices", AttrValue::B(false))];
        let d = run1(
            &node("SparseToDense", &no_validate),
            &[
                i64s(&[3, 2], &[1, 0, 0, 1, 1, 0]),
                i64s(&[2], &[2, 2]),
                f32s(&[3], &[1., 2., 3.]),
                Tensor::scalar_f32(0.),
            ],
        )
        .unwrap();
        assert_eq!((d.shape.clone(), d.as_f32().unwrap().to_vec()), (vec![2, 2], vec![0., 2., 3., 0.]));
        // A scalar value for every index, a vector of indices (rank-1 output).
        let d = run1(
            &node("SparseToDense", &no_validate),
            &[i64s(&[2], &[3, 0]), i64s(&[1], &[5]), Tensor::scalar_i64(7), Tensor::scalar_i64(-1)],
        )
        .unwrap();
        assert_eq!(d.as_i64().unwrap(), &[7, -1, -1, 7, -1]);
        let d = run1(
            &node("SparseToDense", &[]),
            &[
                i64s(&[2, 1], &[0, 2]),
                i64s(&[1], &[3]),
                strs(&["a", "b"]),
                Tensor::from_strings(vec![], vec![b"z".to_vec()]).unwrap(),
            ],
        )
        .unwrap();
        assert!(matches!(&d.data, TensorData::Str(v) if **v == [b"a".to_vec(), b"z".to_vec(), b"b".to_vec()]));
        let two =
            |idx: &[i64]| [i64s(&[2, 2], idx), i64s(&[2], &[2, 2]), f32s(&[2], &[1., 2.]), Tensor::scalar_f32(0.)];
        assert!(err("SparseToDense", &[], &two(&[1, 0, 0, 1])).contains("indices[1] = [0,1] is out of order"));
        assert!(err("SparseToDense", &[], &two(&[0, 1, 0, 1])).contains("indices[1] = [0,1] is repeated"));
        assert!(err("SparseToDense", &[], &two(&[0, 1, 2, 1]))
            .contains("indices[1] = [2,1] is out of bounds: need 0 <= index < [2,2]"));
        assert!(err("SparseToDense", &no_validate, &two(&[0, 1, 2, 1]))
            .contains("Indices are not valid (out of bounds).  Shape: [2,2]"));
    }

    #[test]
    fn fill_empty_rows_orders_by_row_keeping_each_rows_input_order() {
        let out = compute(
            &node("SparseFillEmptyRows", &[]),
            &[
                i64s(&[4, 2], &[3, 1, 1, 2, 3, 0, 1, 0]),
                f32s(&[4], &[1., 2., 3., 4.]),
                i64s(&[2], &[5, 4]),
                Tensor::scalar_f32(-1.),
            ],
        )
        .unwrap();
        assert_eq!(out[0].as_i64().unwrap(), &[0, 0, 1, 2, 1, 0, 2, 0, 3, 1, 3, 0, 4, 0]);
        assert_eq!(out[1].as_f32().unwrap(), &[-1., 2., 4., -1., 1., 3., -1.]);
        assert_eq!(out[2].as_bool().unwrap(), &[true, false, true, false, true]);
        assert_eq!(out[3].as_i64().unwrap(), &[4, 1, 5, 2]);
        let bad = |row: i64| {
            err(
                "SparseFillEmptyRows",
                &[],
                &[i64s(&[1, 2], &[row, 1]), f32s(&[1], &[1.]), i64s(&[2], &[5, 4]), Tensor::scalar_f32(-1.)],
            )
        };
        assert!(bad(5).contains("indices(0, 0) is invalid: 5 >= 5"));
        assert!(bad(-1).contains("indices(0, 0) is invalid: -1 >= 5"));
        let g = compute(
            &node("SparseFillEmptyRowsGrad", &[]),
            &[i64s(&[3], &[2, 0, 3]), f32s(&[5], &[1., 2., 4., 8., 16.])],
        )
        .unwrap();
        assert_eq!((g[0].as_f32().unwrap(), g[1].as_f32().unwrap()), (&[4., 1., 8.][..], &[18.][..]));
    }

    #[test]
    fn sparse_reshape_moves_each_entry_to_its_row_major_place() {
        let out = compute(
            &node("SparseReshape", &[]),
            &[i64s(&[2, 3], &[0, 0, 1, 1, 2, 3]), i64s(&[3], &[2, 3, 4]), i64s(&[2], &[4, -1])],
        )
        .unwrap();
        assert_eq!((out[0].as_i64().unwrap(), out[1].as_i64().unwrap()), (&[0, 1, 3, 5][..], &[4, 6][..]));
        let bad = |new: &[i64]| {
            err("SparseReshape", &[], &[i64s(&[1, 3], &[0, 0, 1]), i64s(&[3], &[2, 3, 4]), i64s(&[new.len()], new)])
        };
        assert!(bad(&[5, -1]).contains(
            "Input to reshape is a SparseTensor with 24 dense values, but the requested shape requires a multiple of 5. \
             input_shape=[2,3,4] output_shape=[5,1]"
        ));
        assert!(
            bad(&[5, 5]).contains("Input to reshape is a tensor with 24 dense values, but the requested shape has 25")
        );
        assert!(bad(&[-1, -1]).contains("only one output dimension may be -1, not both 0 and 1"));
    }

    #[test]
    fn sparse_segment_reductions_match_tensorflow() {
        let d = f32s(&[4, 2], &[1., 2., 3., 4., 5., 6., 7., 8.]);
        let mean = run1(&node("SparseSegmentMean", &[]), &[d.clone(), i32s(&[0, 1, 3, 2, 2]), i32s(&[0, 0, 0, 2, 2])])
            .unwrap();
        assert_eq!(mean.shape, vec![3, 2]);
        close(&mean, &[3.6666667, 4.666667, 0., 0., 5., 6.]);
        let sqrtn = run1(&node("SparseSegmentSqrtN", &[]), &[d.clone(), i32s(&[0, 1, 3]), i32s(&[0, 0, 1])]).unwrap();
        close(&sqrtn, &[2.828427, 4.2426405, 7., 8.]);
        let sum = run1(
            &node("SparseSegmentSumWithNumSegments", &[]),
            &[d.clone(), i32s(&[0, 1, 3]), i32s(&[0, 0, 1]), Tensor::scalar_i32(4)],
        )
        .unwrap();
        assert_eq!(
            (sum.shape.clone(), sum.as_f32().unwrap().to_vec()),
            (vec![4, 2], vec![4., 6., 7., 8., 0., 0., 0., 0.])
        );
        let e = err(
            "SparseSegmentMeanWithNumSegments",
            &[],
            &[d.clone(), i32s(&[0, 1, 3]), i32s(&[0, 0, 3]), Tensor::scalar_i32(2)],
        );
        assert!(e.contains("segment ids must be < num_segments"), "{e}");
        assert!(err("SparseSegmentSum", &[], &[d.clone(), i32s(&[0, 1, 3]), i32s(&[1, 0, 1])])
            .contains("segment ids are not increasing"));
        assert!(err("SparseSegmentSum", &[], &[d.clone(), i32s(&[0, 4, 3]), i32s(&[0, 0, 1])])
            .contains("Bad: indices[1] == 4 out of range [0, 4)"));
        assert!(err("SparseSegmentSum", &[], &[d, i32s(&[0, 1, 3]), i32s(&[-1, 0, 1])])
            .contains("Segment id -1 out of range [0, 2), possibly because 'segment_ids' input is not sorted."));
    }

    /// Rows of very different magnitudes, so that the order of the additions shows in the bits.
    #[test]
    fn sparse_segment_reductions_add_in_tensorflows_order_bit_for_bit() {
        let rows: [f32; 12] = [
            17640524.0,
            0.4001572,
            0.000978738,
            6.7226796,
            1867558.0,
            -6.840945,
            0.09500884,
            -3027144.2,
            -0.51609427,
            41.05985,
            0.14404356,
            5.817094,
        ];
        let d = f32s(&[12, 1], &rows);
        // (rows, [mean, sqrtn, sum] as TensorFlow's float32 bits)
        let want: [(usize, [u32; 3]); 4] = [
            (3, [1253274334, 1260087353, 1267111462]),
            (10, [1237921550, 1251937470, 1266383570]),
            (11, [1236722934, 1251452387, 1266383570]),
            (12, [1235724091, 1251029285, 1266383576]),
        ];
        for (n, bits) in want {
            let idx: Vec<i32> = (0..n as i32).collect();
            for (op, b) in ["SparseSegmentMean", "SparseSegmentSqrtN", "SparseSegmentSum"].iter().zip(bits) {
                let got = run1(&node(op, &[]), &[d.clone(), i32s(&idx), i32s(&vec![0; n])]).unwrap();
                assert_eq!(got.as_f32().unwrap()[0].to_bits(), b, "{op} over {n} rows");
            }
        }
    }

    #[test]
    fn sparse_segment_gradients_match_tensorflow() {
        let g = f32s(&[3, 2], &[1., 2., 3., 4., 5., 6.]);
        let ins = |idx: &[i32]| [g.clone(), i32s(idx), i32s(&[0, 0, 1, 2]), Tensor::scalar_i32(5)];
        let mean = run1(&node("SparseSegmentMeanGrad", &[]), &ins(&[0, 1, 0, 3])).unwrap();
        assert_eq!(mean.shape, vec![5, 2]);
        close(&mean, &[3.5, 5., 0.5, 1., 0., 0., 5., 6., 0., 0.]);
        let sqrtn = run1(&node("SparseSegmentSqrtNGrad", &[]), &ins(&[0, 1, 0, 3])).unwrap();
        close(&sqrtn, &[3.7071068, 5.4142137, 0.70710677, std::f32::consts::SQRT_2, 0., 0., 5., 6., 0., 0.]);
        let sum = run1(&node("SparseSegmentSumGrad", &[]), &ins(&[0, 1, 0, 3])).unwrap();
        close(&sum, &[4., 6., 1., 2., 0., 0., 5., 6., 0., 0.]);
        let v2 = compute(&node("SparseSegmentMeanGradV2", &[]), &ins(&[3, 1, 0, 3])).unwrap();
        close(&v2[0], &[3., 4., 0.5, 1., 5.5, 7.]);
        assert_eq!(v2[1].as_i32().unwrap(), &[0, 1, 3]);
        let bad_seg = [g.clone(), i32s(&[0, 1]), i32s(&[0, 4]), Tensor::scalar_i32(5)];
        assert!(err("SparseSegmentMeanGrad", &[], &bad_seg).contains("Invalid number of segments"));
        let bad_idx = [g, i32s(&[0, 7]), i32s(&[0, 1]), Tensor::scalar_i32(5)];
        assert!(err("SparseSegmentMeanGrad", &[], &bad_idx).contains("Index 7 out of range [0, 5)."));
    }

    #[test]
    fn unique_v2_finds_distinct_slices_as_tensorflow_does() {
        let x = Tensor::from_i32(vec![4, 3], vec![1, 0, 1, 2, 0, 2, 1, 0, 1, 3, 3, 3]).unwrap();
        let axis = |a: &[i64]| Tensor::from_i64(vec![a.len()], a.to_vec()).unwrap();
        let run = |op: &str, x: &Tensor, a: &[i64]| compute(&node(op, &[]), &[x.clone(), axis(a)]);
        let rows = run("UniqueV2", &x, &[0]).unwrap();
        assert_eq!(rows[0].shape, [3, 3]);
        assert_eq!(rows[0].as_i32().unwrap(), [1, 0, 1, 2, 0, 2, 3, 3, 3]);
        assert_eq!(rows[1].as_i32().unwrap(), [0, 1, 0, 2]);
        for a in [1, -1] {
            let cols = run("UniqueV2", &x, &[a]).unwrap();
            assert_eq!(cols[0].shape, [4, 2]);
            assert_eq!(cols[0].as_i32().unwrap(), [1, 0, 2, 0, 1, 0, 3, 3]);
            assert_eq!(cols[1].as_i32().unwrap(), [0, 1, 0]);
        }
        let counted = run("UniqueWithCountsV2", &x, &[0]).unwrap();
        assert_eq!(counted[2].as_i32().unwrap(), [2, 1, 1]);
        let v = Tensor::from_f32(vec![4], vec![4.0, 1.0, 4.0, 2.0]).unwrap();
        let flat = run("UniqueV2", &v, &[]).unwrap();
        assert_eq!(flat[0].as_f32().unwrap(), [4.0, 1.0, 2.0]);
        assert_eq!(flat[1].as_i32().unwrap(), [0, 1, 0, 2]);
        let x3 = Tensor::from_i32(vec![2, 2, 2], vec![1, 2, 1, 2, 1, 2, 1, 3]).unwrap();
        for a in [1, 2] {
            let same = run("UniqueV2", &x3, &[a]).unwrap();
            assert_eq!(same[0].as_i32().unwrap(), x3.as_i32().unwrap());
            assert_eq!(same[1].as_i32().unwrap(), [0, 1]);
        }
        // TensorFlow 2.21's errors.
        let e = |a: &[i64]| run("UniqueV2", &x, a).unwrap_err().to_string();
        assert!(e(&[]).contains("unique expects a 1D vector."), "{}", e(&[]));
        assert!(e(&[2]).contains("axis has to be between [0, 2)"), "{}", e(&[2]));
        assert!(e(&[0, 1]).contains("axis does not support input tensors larger than 1 elements"), "{}", e(&[0, 1]));
    }

    #[test]
    fn unique_with_counts_on_strings_and_floats() {
        let out = compute(&node("UniqueWithCounts", &[]), &[strs(&["b", "a", "b", "c", "a", "b"])]).unwrap();
        assert!(matches!(&out[0].data, TensorData::Str(v) if **v == [b"b".to_vec(), b"a".to_vec(), b"c".to_vec()]));
        assert_eq!((out[1].as_i32().unwrap(), out[2].as_i32().unwrap()), (&[0, 1, 0, 2, 1, 0][..], &[3, 2, 1][..]));
        let out = compute(
            &node("UniqueWithCounts", &[("out_idx", AttrValue::Type(autoclust_graph::DType::Int64))]),
            &[f32s(&[6], &[1., -0., 0., f32::NAN, f32::NAN, 1.])],
        )
        .unwrap();
        let y = out[0].as_f32().unwrap();
        assert_eq!(
            (y.len(), y[0], y[1].to_bits(), y[2].is_nan(), y[3].is_nan()),
            (4, 1., (-0f32).to_bits(), true, true)
        );
        assert_eq!((out[1].as_i64().unwrap(), out[2].as_i64().unwrap()), (&[0, 1, 1, 2, 3, 0][..], &[2, 2, 1, 1][..]));
    }

    #[test]
    fn sparse_dense_matmul_with_and_without_adjoints() {
        let a = [i64s(&[3, 2], &[0, 1, 2, 0, 0, 0]), f32s(&[3], &[2., 3., 5.]), i64s(&[2], &[3, 2])];
        let p = run1(
            &node("SparseTensorDenseMatMul", &[]),
            &[a[0].clone(), a[1].clone(), a[2].clone(), f32s(&[2, 2], &[1., 2., 3., 4.])],
        )
        .unwrap();
        assert_eq!((p.shape.clone(), p.as_f32().unwrap().to_vec()), (vec![3, 2], vec![11., 18., 0., 0., 3., 6.]));
        let adj = [("adjoint_a", AttrValue::B(true)), ("adjoint_b", AttrValue::B(true))];
        let p = run1(
            &node("SparseTensorDenseMatMul", &adj),
            &[a[0].clone(), a[1].clone(), a[2].clone(), f32s(&[2, 3], &[1., 2., 3., 4., 5., 6.])],
        )
        .unwrap();
        assert_eq!((p.shape.clone(), p.as_f32().unwrap().to_vec()), (vec![2, 2], vec![14., 38., 2., 8.]));
        let e = err(
            "SparseTensorDenseMatMul",
            &[],
            &[
                i64s(&[2, 2], &[0, 1, 3, 0]),
                f32s(&[2], &[2., 3.]),
                i64s(&[2], &[3, 2]),
                f32s(&[2, 2], &[1., 2., 3., 4.]),
            ],
        );
        assert!(e.contains("m (3) from index[1,0] out of bounds (>=3)"), "{e}");
    }

    #[test]
    fn sparse_cross_hashes_and_joins_as_tensorflow_does() {
        let s64 = |n: i64| AttrValue::I(n);
        let cross = |n: i64, hashed: bool, buckets: i64, key: i64, string: bool| {
            let t = if string { autoclust_graph::DType::String } else { autoclust_graph::DType::Int64 };
            node(
                "SparseCross",
                &[
                    ("N", s64(n)),
                    ("hashed_output", AttrValue::B(hashed)),
                    ("num_buckets", s64(buckets)),
                    ("hash_key", s64(key)),
                    ("out_type", AttrValue::Type(t)),
                    ("internal_type", AttrValue::Type(t)),
                ],
            )
        };
        // A sparse int64 column (row 0 {3, 5}, row 1 empty, row 2 {7}) crossed with a dense
        // string column.
        let sp = [i64s(&[3, 2], &[0, 0, 0, 1, 2, 0]), i64s(&[3], &[3, 5, 7]), i64s(&[2], &[3, 2])];
        let dense = Tensor::from_strings(
            vec![3, 2],
            ["a", "b", "c", "d", "e", "f"].iter().map(|s| s.as_bytes().to_vec()).collect(),
        )
        .unwrap();
        let ins = [sp[0].clone(), sp[1].clone(), sp[2].clone(), dense.clone()];
        let out = compute(&cross(1, true, 11, 956888297470, false), &ins).unwrap();
        assert_eq!(out[0].as_i64().unwrap(), &[0, 0, 0, 1, 0, 2, 0, 3, 2, 0, 2, 1]);
        assert_eq!(out[1].as_i64().unwrap(), &[7, 10, 4, 9, 0, 10]);
        assert_eq!(out[2].as_i64().unwrap(), &[3, 4]);
        // No buckets: the hash modulo int64's largest value.
        let out = compute(&cross(1, true, 0, 956888297470, false), &ins).unwrap();
        assert_eq!(
            out[1].as_i64().unwrap(),
            &[
                4855451275547336152,
                3302797561873708220,
                1400899581459493255,
                6967780403841078329,
                5785055058097186729,
                4248272816791748458
            ]
        );
        // Dense columns only, unhashed and hashed.
        let pqr = Tensor::from_strings(vec![3, 1], vec![b"p".to_vec(), b"q".to_vec(), b"r".to_vec()]).unwrap();
        let out = compute(&cross(0, false, 0, 0, true), &[dense.clone(), pqr.clone()]).unwrap();
        let want: Vec<Vec<u8>> =
            ["a_X_p", "b_X_p", "c_X_q", "d_X_q", "e_X_r", "f_X_r"].iter().map(|s| s.as_bytes().to_vec()).collect();
        assert!(matches!(&out[1].data, TensorData::Str(v) if **v == want));
        let out = compute(&cross(0, true, 0, 5, false), &[dense, pqr]).unwrap();
        assert_eq!(
            out[1].as_i64().unwrap(),
            &[
                6613846311707836347,
                6049114119091453315,
                4269352465137134501,
                180144845060906389,
                3428736871398203054,
                6267934502996413274
            ]
        );
        // Two sparse columns (int64, string) and a dense int64 column, 1000 buckets.
        let s2 = [i64s(&[4, 2], &[0, 0, 1, 0, 1, 1, 2, 0]), strs(&["x", "y", "z", "w"]), i64s(&[2], &[3, 2])];
        let out = compute(
            &cross(2, true, 1000, 956888297470, false),
            &[
                sp[0].clone(),
                s2[0].clone(),
                sp[1].clone(),
                s2[1].clone(),
                sp[2].clone(),
                s2[2].clone(),
                i64s(&[3, 1], &[9, 8, 7]),
            ],
        )
        .unwrap();
        assert_eq!((out[1].as_i64().unwrap(), out[2].as_i64().unwrap()), (&[223, 21, 499][..], &[3, 2][..]));
    }

    /// TensorFlow 2.21's `SparseReduceMax`, `SparseReduceMaxSparse` and `SparseReduceSumSparse`
    /// on one `[2, 3, 3]` tensor (a kept position without entries is 0 in the dense max, even
    /// when the other groups are negative), and `SparseSparseMaximum`/`Minimum`.
    #[test]
    fn sparse_reductions_and_extremes_match_tensorflow() {
        let sp = [
            i64s(&[5, 3], &[0, 1, 0, 0, 1, 2, 1, 0, 1, 1, 2, 0, 1, 2, 1]),
            f32s(&[5], &[-3., 5., -1., -2., -7.]),
            i64s(&[3], &[2, 3, 3]),
        ];
        let reduce = |op: &str, axes: &[i32], keep: bool| {
            let mut inputs = sp.to_vec();
            inputs.push(i32s(axes));
            compute(&node(op, &[("keep_dims", AttrValue::B(keep))]), &inputs).unwrap()
        };
        let dense = reduce("SparseReduceMax", &[1], false);
        assert_eq!((&dense[0].shape[..], dense[0].as_f32().unwrap()), (&[2, 3][..], &[-3., 0., 5., -2., -1., 0.][..]));
        let dense = reduce("SparseReduceMax", &[-1], false);
        assert_eq!(dense[0].as_f32().unwrap(), &[0., 5., 0., -1., 0., -2.]);
        let dense = reduce("SparseReduceMax", &[0, 2], true);
        assert_eq!((&dense[0].shape[..], dense[0].as_f32().unwrap()), (&[1, 3, 1][..], &[-1., 5., -2.][..]));
        let all = reduce("SparseReduceMax", &[0, 1, 2], false);
        assert_eq!((all[0].shape.len(), all[0].as_f32().unwrap()), (0, &[5.][..]));
        let m = reduce("SparseReduceMaxSparse", &[1], false);
        assert_eq!(m[0].as_i64().unwrap(), &[0, 0, 0, 2, 1, 0, 1, 1]);
        assert_eq!(m[1].as_f32().unwrap(), &[-3., 5., -2., -1.]);
        assert_eq!(m[2].as_i64().unwrap(), &[2, 3]);
        let s = reduce("SparseReduceSumSparse", &[1], false);
        assert_eq!(s[1].as_f32().unwrap(), &[-3., 5., -2., -8.]);
        let s = reduce("SparseReduceSumSparse", &[0, 2], true);
        assert_eq!(s[0].as_i64().unwrap(), &[0, 0, 0, 0, 1, 0, 0, 2, 0]);
        assert_eq!((s[1].as_f32().unwrap(), s[2].as_i64().unwrap()), (&[-1., 2., -9.][..], &[1, 3, 1][..]));
        let s = reduce("SparseReduceSumSparse", &[0, 1, 2], false);
        assert_eq!((&s[0].shape[..], s[1].as_f32().unwrap(), &s[2].shape[..]), (&[1, 0][..], &[-8.][..], &[0][..]));
        let a = [i64s(&[3, 2], &[0, 0, 1, 1, 2, 0]), f32s(&[3], &[-1., 4., 2.]), i64s(&[2], &[4, 4])];
        let b = [i64s(&[3, 2], &[0, 1, 1, 1, 3, 3]), f32s(&[3], &[-5., 3., -6.]), i64s(&[2], &[4, 4])];
        let ab: Vec<Tensor> = a.iter().chain(&b).cloned().collect();
        let mx = compute(&node("SparseSparseMaximum", &[]), &ab).unwrap();
        assert_eq!(mx[0].as_i64().unwrap(), &[0, 0, 0, 1, 1, 1, 2, 0, 3, 3]);
        assert_eq!(mx[1].as_f32().unwrap(), &[0., 0., 4., 2., 0.]);
        let mn = compute(&node("SparseSparseMinimum", &[]), &ab).unwrap();
        assert_eq!(mn[1].as_f32().unwrap(), &[-1., -5., 3., 0., -6.]);
        let mut bad = ab.clone();
        bad[5] = i64s(&[2], &[4, 5]);
        let e = compute(&node("SparseSparseMinimum", &[]), &bad).unwrap_err().to_string();
        assert!(e.contains("Operands' shapes do not match: got 4 and 5 for dimension 1"), "{e}");
    }

    /// TensorFlow 2.21's `gen_sparse_ops` results for the `tf.sparse` algebra.
    #[test]
    fn sparse_algebra_matches_tensorflow() {
        let out = compute(
            &node("SparseReorder", &[]),
            &[i64s(&[4, 2], &[2, 1, 0, 3, 1, 0, 0, 1]), f32s(&[4], &[1., 2., 3., 4.]), i64s(&[2], &[3, 4])],
        )
        .unwrap();
        assert_eq!(out[0].as_i64().unwrap(), &[0, 1, 0, 3, 1, 0, 2, 1]);
        assert_eq!(out[1].as_f32().unwrap(), &[4., 2., 3., 1.]);
        let concat = |dim: i64, b_idx: &[i64], b_shape: &[i64]| {
            compute(
                &node("SparseConcat", &[("concat_dim", AttrValue::I(dim)), ("N", AttrValue::I(2))]),
                &[
                    i64s(&[2, 2], &[0, 1, 1, 0]),
                    i64s(&[2, 2], b_idx),
                    f32s(&[2], &[1., 2.]),
                    f32s(&[2], &[3., 4.]),
                    i64s(&[2], &[2, 3]),
                    i64s(&[2], b_shape),
                ],
            )
            .unwrap()
        };
        let o = concat(0, &[0, 0, 2, 1], &[3, 3]);
        assert_eq!(
            (o[0].as_i64().unwrap(), o[1].as_f32().unwrap()),
            (&[0, 1, 1, 0, 2, 0, 4, 1][..], &[1., 2., 3., 4.][..])
        );
        assert_eq!(o[2].as_i64().unwrap(), &[5, 3]);
        let o = concat(1, &[0, 0, 1, 2], &[2, 4]);
        assert_eq!(
            (o[0].as_i64().unwrap(), o[1].as_f32().unwrap()),
            (&[0, 1, 0, 3, 1, 0, 1, 5][..], &[1., 3., 2., 4.][..])
        );
        assert_eq!(o[2].as_i64().unwrap(), &[2, 7]);
        // String values (tf.sparse.concat of string features).
        let o = compute(
            &node("SparseConcat", &[("concat_dim", AttrValue::I(1)), ("N", AttrValue::I(2))]),
            &[
                i64s(&[2, 2], &[0, 1, 1, 0]),
                i64s(&[2, 2], &[0, 0, 1, 2]),
                strs(&["a", "b"]),
                strs(&["c", "d"]),
                i64s(&[2], &[2, 3]),
                i64s(&[2], &[2, 4]),
            ],
        )
        .unwrap();
        assert!(
            matches!(&o[1].data, TensorData::Str(v) if **v == [b"a".to_vec(), b"c".to_vec(), b"b".to_vec(), b"d".to_vec()])
        );
        let add = |b_idx: &[i64], b_vals: &[f32], thresh: f32| {
            compute(
                &node("SparseAdd", &[]),
                &[
                    i64s(&[2, 2], &[0, 1, 1, 0]),
                    f32s(&[2], &[1., 2.]),
                    i64s(&[2], &[2, 3]),
                    i64s(&[b_vals.len(), 2], b_idx),
                    f32s(&[b_vals.len()], b_vals),
                    i64s(&[2], &[2, 3]),
                    Tensor::scalar_f32(thresh),
                ],
            )
            .unwrap()
        };
        let o = add(&[0, 1, 1, 2, 0, 0], &[3., -2., 5.], 0.0);
        assert_eq!(
            (o[0].as_i64().unwrap(), o[1].as_f32().unwrap()),
            (&[0, 1, 1, 0, 1, 2, 0, 0][..], &[4., 2., -2., 5.][..])
        );
        let o = add(&[0, 1, 1, 0], &[-1., 0.5], 0.6);
        assert_eq!((o[0].as_i64().unwrap(), o[1].as_f32().unwrap()), (&[1, 0][..], &[2.5][..]));
        let sp = [i64s(&[3, 2], &[0, 1, 1, 0, 1, 2]), f32s(&[3], &[1., 2., 3.]), i64s(&[2], &[2, 3])];
        let r =
            run1(&node("SparseReduceSum", &[]), &[sp[0].clone(), sp[1].clone(), sp[2].clone(), i32s(&[1])]).unwrap();
        assert_eq!((r.shape.clone(), r.as_f32().unwrap().to_vec()), (vec![2], vec![1., 5.]));
        let r = run1(
            &node("SparseReduceSum", &[("keep_dims", AttrValue::B(true))]),
            &[sp[0].clone(), sp[1].clone(), sp[2].clone(), i32s(&[0, 1])],
        )
        .unwrap();
        assert_eq!((r.shape.clone(), r.as_f32().unwrap().to_vec()), (vec![1, 1], vec![6.]));
        let two = [i64s(&[2, 2], &[0, 1, 1, 0]), f32s(&[2], &[1., 2.]), i64s(&[2], &[2, 3])];
        let r = run1(
            &node("SparseTensorDenseAdd", &[]),
            &[two[0].clone(), two[1].clone(), two[2].clone(), f32s(&[2, 3], &[10., 20., 30., 40., 50., 60.])],
        )
        .unwrap();
        assert_eq!(r.as_f32().unwrap(), &[10., 21., 30., 42., 50., 60.]);
        let cw = |op: &str, dense: Tensor| {
            run1(&node(op, &[]), &[two[0].clone(), two[1].clone(), two[2].clone(), dense])
                .unwrap()
                .as_f32()
                .unwrap()
                .to_vec()
        };
        assert_eq!(cw("SparseDenseCwiseMul", f32s(&[2, 1], &[10., 40.])), vec![10., 80.]);
        assert_eq!(cw("SparseDenseCwiseDiv", f32s(&[3], &[10., 20., 30.])), vec![0.05, 0.2]);
        assert_eq!(cw("SparseDenseCwiseAdd", f32s(&[3], &[10., 20., 30.])), vec![21., 12.]);
        let o = compute(
            &node("SparseSlice", &[]),
            &[
                i64s(&[4, 2], &[0, 1, 1, 0, 1, 2, 2, 2]),
                f32s(&[4], &[1., 2., 3., 4.]),
                i64s(&[2], &[3, 3]),
                i64s(&[2], &[1, 1]),
                i64s(&[2], &[5, 2]),
            ],
        )
        .unwrap();
        assert_eq!((o[0].as_i64().unwrap(), o[1].as_f32().unwrap()), (&[0, 1, 1, 1][..], &[3., 4.][..]));
        assert_eq!(o[2].as_i64().unwrap(), &[2, 2]);
    }

    #[test]
    fn gathers_move_strings() {
        let t = Tensor::from_strings(vec![2, 2], ["a", "b", "c", "d"].iter().map(|s| s.as_bytes().to_vec()).collect())
            .unwrap();
        let g = run1(&node("GatherNd", &[]), &[t, i64s(&[2, 2], &[1, 0, 0, 1])]).unwrap();
        assert!(matches!(&g.data, TensorData::Str(v) if **v == [b"c".to_vec(), b"b".to_vec()]));
        let g =
            run1(&node("GatherV2", &[]), &[strs(&["a", "b", "c"]), i32s(&[2, 0, 2]), Tensor::scalar_i32(0)]).unwrap();
        assert!(matches!(&g.data, TensorData::Str(v) if **v == [b"c".to_vec(), b"a".to_vec(), b"c".to_vec()]));
    }
}
