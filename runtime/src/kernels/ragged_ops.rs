//! Ragged tensors built, indexed and converted row by row: `RaggedRange` (`tf.ragged.range`: one range
//! per row, scalars broadcast) and `RaggedGather` (`tf.gather` on a `tf.RaggedTensor`, any
//! ragged rank, indices of any rank: the indices' own dimensions become the outer, uniform
//! partitions of the result). Splits are int32 or int64 (`Tsplits`); values of any dtype are
//! moved, never computed. `RaggedTensorToSparse` gives a ragged tensor's sparse form. Errors are
//! TensorFlow's.

use autoclust_graph::{DType, Node, Tensor};

use super::{budget, int_values, take_or, Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

/// The kernels of this module, `None` for any other op.
pub(super) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let splits_type = match node.attr("Tsplits").and_then(|v| v.as_type()) {
        None => DType::Int64,
        Some(t @ (DType::Int32 | DType::Int64)) => t,
        Some(_) => return Err(KernelError::Attr("Tsplits".into())),
    };
    let f: PureFn = match node.op.as_str() {
        "RaggedRange" => Box::new(move |inp: Inputs| {
            super::arity(&inp, 3)?;
            ragged_range(&inp[0], &inp[1], &inp[2], splits_type)
        }),
        "RaggedGather" => {
            let params_rank = node.attr("PARAMS_RAGGED_RANK").and_then(|v| v.as_int()).unwrap_or(1);
            let params_rank = usize::try_from(params_rank)
                .ok()
                .filter(|&r| r >= 1)
                .ok_or_else(|| KernelError::invalid("PARAMS_RAGGED_RANK must be at least 1"))?;
            Box::new(move |inp: Inputs| {
                super::arity(&inp, params_rank + 2)?;
                let splits = inp[..params_rank]
                    .iter()
                    .map(|t| int_values(t, "params_nested_splits"))
                    .collect::<KResult<Vec<_>>>()?;
                ragged_gather(&splits, &inp[params_rank], &inp[params_rank + 1], splits_type)
            })
        }
        "RaggedTensorToSparse" => Box::new(move |inp: Inputs| {
            let rank = inp.len().checked_sub(1).filter(|&r| r >= 1);
            let rank = rank.ok_or_else(|| KernelError::invalid("rt_nested_splits must be non empty"))?;
            let splits = inp[..rank].iter().map(|t| int_values(t, "rt_nested_splits")).collect::<KResult<Vec<_>>>()?;
            ragged_to_sparse(&splits, &inp[rank])
        }),
        _ => return Ok(None),
    };
    Ok(Some(f))
}

/// `RaggedTensorToSparse` (`RaggedTensor.to_sparse()`): the coordinates of every value
/// (row, the position within each ragged level, then the dense value dimensions) in
/// row-major order, the values flattened, and the dense shape (rows, each level's widest
/// row, the value dimensions). Splits are checked as TensorFlow checks them.
fn ragged_to_sparse(splits: &[Vec<i64>], values: &Tensor) -> KResult<Outputs> {
    let bad = |m: &str| Err(KernelError::invalid(m.to_string()));
    let mismatch = "Final value of ragged splits must match the length the corresponding ragged values.";
    for (i, s) in splits.iter().enumerate() {
        let Some(&first) = s.first() else { return bad("ragged splits may not be empty.") };
        if first != 0 {
            return bad("First value of ragged splits must be 0.");
        }
        if let Some(w) = s.windows(2).find(|w| w[1] < w[0]) {
            return Err(KernelError::invalid(format!(
                "Ragged splits should be non decreasing, but we got {} followed by {}",
                w[0], w[1]
            )));
        }
        if i > 0 && s.len() as i64 != splits[i - 1][splits[i - 1].len() - 1] + 1 {
            return bad(mismatch);
        }
    }
    let last = splits[splits.len() - 1][splits[splits.len() - 1].len() - 1];
    if values.shape.first().map(|&n| n as i64) != Some(last) {
        return bad(mismatch);
    }
    let inner = &values.shape[1..];
    let per_value: usize = inner.iter().product();
    let cols = splits.len() + values.shape.len();
    let count = budget(DType::Int64, &[last as usize * per_value, cols])?;
    let mut indices = Vec::with_capacity(count);
    let mut prefix = Vec::with_capacity(cols);
    // Depth-first over the levels: item `p` of level `l` holds items `splits[l][p]..splits[l][p+1]`.
    fn walk(
        splits: &[Vec<i64>],
        level: usize,
        p: usize,
        inner: &[usize],
        per_value: usize,
        prefix: &mut Vec<i64>,
        out: &mut Vec<i64>,
    ) {
        let (lo, hi) = (splits[level][p], splits[level][p + 1]);
        for c in lo..hi {
            prefix.push(c - lo);
            if level + 1 < splits.len() {
                walk(splits, level + 1, c as usize, inner, per_value, prefix, out);
            } else {
                for e in 0..per_value {
                    out.extend_from_slice(prefix);
                    let mut rest = e;
                    let start = out.len();
                    for &d in inner.iter().rev() {
                        out.push((rest % d) as i64);
                        rest /= d;
                    }
                    out[start..].reverse();
                }
            }
            prefix.pop();
        }
    }
    for row in 0..splits[0].len() - 1 {
        prefix.push(row as i64);
        walk(splits, 0, row, inner, per_value, &mut prefix, &mut indices);
        prefix.pop();
    }
    let mut dense = vec![splits[0].len() as i64 - 1];
    dense.extend(splits.iter().map(|s| s.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0)));
    dense.extend(inner.iter().map(|&d| d as i64));
    let n = indices.len() / cols;
    let flat = Tensor { shape: vec![values.num_elements()], ..values.clone() };
    let mut out = Outputs::new();
    out.push(Tensor::from_i64(vec![n, cols], indices).map_err(|e| KernelError::invalid(e.to_string()))?);
    out.push(flat);
    out.push(Tensor::from_i64(vec![cols], dense).map_err(|e| KernelError::invalid(e.to_string()))?);
    Ok(out)
}

/// A row-splits vector in the op's `Tsplits`/`row_splits_type` dtype (int32 or int64).
pub(super) fn splits_tensor(dtype: DType, splits: Vec<i64>) -> KResult<Tensor> {
    let n = splits.len();
    Ok(match dtype {
        DType::Int32 => {
            let v = splits
                .into_iter()
                .map(|s| i32::try_from(s).map_err(|_| KernelError::invalid("a row split past int32")))
                .collect::<KResult<Vec<i32>>>()?;
            Tensor::from_i32(vec![n], v).expect("n")
        }
        _ => Tensor::from_i64(vec![n], splits).expect("n"),
    })
}

/// `RaggedRange`: row `i` is `range(starts[i], limits[i], deltas[i])`; a scalar operand is the
/// same for every row, vectors must have one length.
fn ragged_range(starts: &Tensor, limits: &Tensor, deltas: &Tensor, splits_type: DType) -> KResult<Outputs> {
    let dtype = starts.dtype;
    if limits.dtype != dtype || deltas.dtype != dtype {
        return Err(KernelError::invalid("starts, limits, and deltas must have the same dtype"));
    }
    for (t, what) in [(starts, "starts"), (limits, "limits"), (deltas, "deltas")] {
        if t.rank() > 1 {
            return Err(KernelError::invalid(format!("{what} must be a scalar or vector")));
        }
    }
    let vectors: Vec<usize> = [starts, limits, deltas].iter().filter(|t| t.rank() == 1).map(|t| t.shape[0]).collect();
    if vectors.windows(2).any(|w| w[0] != w[1]) {
        return Err(KernelError::invalid("starts, limits, and deltas must have the same shape"));
    }
    let rows = vectors.first().copied().unwrap_or(1);
    let at = |v: &[f64], i: usize| if v.len() == 1 && rows != 1 { v[0] } else { v[i] };
    let float = dtype.is_float();
    let (s, l, d) = (
        starts.to_f64_vec().ok_or(KernelError::DType(dtype))?,
        limits.to_f64_vec().ok_or(KernelError::DType(dtype))?,
        deltas.to_f64_vec().ok_or(KernelError::DType(dtype))?,
    );
    let mut splits = vec![0i64];
    let mut values: Vec<f64> = Vec::new();
    for i in 0..rows {
        let (start, limit, delta) = (at(&s, i), at(&l, i), at(&d, i));
        if delta == 0.0 {
            return Err(KernelError::invalid("Requires delta != 0"));
        }
        let size = if (delta > 0.0 && limit < start) || (delta < 0.0 && limit > start) {
            0
        } else if float {
            ((limit - start) / delta).abs().ceil() as usize
        } else {
            let (span, step) = ((limit - start).abs() as u64, delta.abs() as u64);
            span.div_ceil(step) as usize
        };
        budget(dtype, &[values.len().saturating_add(size)])?;
        // Each value is the previous plus delta, in the element type (as TensorFlow adds).
        let mut v = start;
        for _ in 0..size {
            values.push(v);
            v = if dtype == DType::Float32 { (v as f32 + delta as f32) as f64 } else { v + delta };
        }
        splits.push(values.len() as i64);
    }
    let n = values.len();
    let values = match dtype {
        DType::Float32 => Tensor::from_f32(vec![n], values.into_iter().map(|x| x as f32).collect()),
        DType::Float64 => Tensor::from_f64(vec![n], values),
        DType::Int32 => Tensor::from_i32(vec![n], values.into_iter().map(|x| x as i32).collect()),
        DType::Int64 => Tensor::from_i64(vec![n], values.into_iter().map(|x| x as i64).collect()),
        d => return Err(KernelError::DType(d)),
    }
    .map_err(|e| KernelError::invalid(e.to_string()))?;
    let mut out = Outputs::new();
    out.push(splits_tensor(splits_type, splits)?);
    out.push(values);
    Ok(out)
}

/// `RaggedGather`: the rows `indices` names of the ragged tensor (`splits`, outermost first,
/// over `values`).
fn ragged_gather(splits: &[Vec<i64>], values: &Tensor, indices: &Tensor, splits_type: DType) -> KResult<Outputs> {
    let rows = splits[0].len().checked_sub(1).ok_or_else(|| KernelError::invalid("params_nested_splits is empty"))?;
    for (k, s) in splits.iter().enumerate() {
        let inner = if k + 1 < splits.len() {
            splits[k + 1].len().saturating_sub(1)
        } else {
            values.shape.first().copied().unwrap_or(0)
        };
        let valid = s.first() == Some(&0)
            && s.windows(2).all(|w| w[0] <= w[1])
            && s.last().is_some_and(|&l| l as usize <= inner);
        if !valid {
            return Err(KernelError::invalid(
                "Invalid params_nested_splits: they must start at 0, not decrease, and stay within their values",
            ));
        }
    }
    let idx = int_values(indices, "indices")?;
    // The indices' own dimensions: uniform partitions, outermost first.
    let mut out_splits: Vec<Vec<i64>> = Vec::new();
    let dims = &indices.shape;
    let mut count = 1usize;
    for w in 0..dims.len().saturating_sub(1) {
        count *= dims[w];
        let step = dims[w + 1] as i64;
        out_splits.push((0..=count as i64).map(|i| i * step).collect());
    }
    // Each gathered row's range at every ragged level, then the values' rows.
    let mut ranges: Vec<(i64, i64)> = Vec::with_capacity(idx.len());
    for (k, &i) in idx.iter().enumerate() {
        if i < 0 || i as usize >= rows {
            return Err(KernelError::invalid(format!("indices[{k}] = {i} is not in [0, {rows})")));
        }
        ranges.push((i, i + 1));
    }
    for s in splits {
        let mut level = vec![0i64];
        let mut next = Vec::new();
        for &(a, b) in &ranges {
            for r in a..b {
                let (lo, hi) = (s[r as usize], s[r as usize + 1]);
                level.push(level.last().expect("starts at 0") + (hi - lo));
                next.push((lo, hi));
            }
        }
        out_splits.push(level);
        ranges = next;
    }
    let inner: usize = values.shape.iter().skip(1).product();
    let total: usize = ranges.iter().map(|&(a, b)| (b - a) as usize).sum();
    let mut shape = vec![total];
    shape.extend(values.shape.iter().skip(1));
    budget(values.dtype, &shape)?;
    let src: Vec<Option<usize>> =
        ranges.iter().flat_map(|&(a, b)| (a as usize * inner)..(b as usize * inner)).map(Some).collect();
    let mut out = Outputs::new();
    for s in out_splits {
        out.push(splits_tensor(splits_type, s)?);
    }
    out.push(take_or(values, &src, None, shape)?);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn i64s(t: &Tensor) -> Vec<i64> {
        t.to_i64_vec().unwrap()
    }

    /// TensorFlow 2.21's values (`tf.raw_ops.RaggedRange`, `tf.raw_ops.RaggedGather`).
    #[test]
    fn ranges_and_gathers_match_tensorflow() {
        let v = |x: &[i32]| Tensor::from_i32(vec![x.len()], x.to_vec()).unwrap();
        let o = ragged_range(&v(&[0, 5, 2, -1]), &v(&[3, 5, 10, -7]), &v(&[1, 2, 3, -2]), DType::Int64).unwrap();
        assert_eq!(i64s(&o[0]), [0, 3, 3, 6, 9]);
        assert_eq!(i64s(&o[1]), [0, 1, 2, 2, 5, 8, -1, -3, -5]);
        let f = |x: &[f32]| Tensor::from_f32(vec![x.len()], x.to_vec()).unwrap();
        let o =
            ragged_range(&Tensor::scalar_f32(0.5), &Tensor::scalar_f32(2.0), &f(&[0.4, 0.7]), DType::Int32).unwrap();
        assert_eq!(o[0].as_i32().unwrap(), [0, 4, 7]);
        assert_eq!(o[1].as_f32().unwrap(), [0.5, 0.9, 1.3, 1.6999999, 0.5, 1.2, 1.9000001]);
        let e = ragged_range(&v(&[0]), &v(&[3]), &v(&[0]), DType::Int64).unwrap_err();
        assert!(e.to_string().contains("Requires delta != 0"), "{e}");
        let e = ragged_range(&v(&[0]), &Tensor::scalar_f32(2.0), &v(&[1, 2]), DType::Int64).unwrap_err();
        assert!(e.to_string().contains("dtype"), "{e}");

        // [[[1,2],[3]], [], [[4,5,6]], [[7],[8],[9]]]
        let splits = vec![vec![0, 2, 2, 3, 6], vec![0, 2, 3, 6, 7, 8, 9]];
        let values = Tensor::from_i32(vec![9], (1..=9).collect()).unwrap();
        let o = ragged_gather(&splits, &values, &v(&[3, 0, 1, 3]), DType::Int64).unwrap();
        assert_eq!(i64s(&o[0]), [0, 3, 5, 5, 8]);
        assert_eq!(i64s(&o[1]), [0, 1, 2, 3, 5, 6, 7, 8, 9]);
        assert_eq!(o[2].as_i32().unwrap(), [7, 8, 9, 1, 2, 3, 7, 8, 9]);
        let idx2 = Tensor::from_i32(vec![3, 2], vec![2, 0, 1, 3, 0, 0]).unwrap();
        let o = ragged_gather(&splits, &values, &idx2, DType::Int64).unwrap();
        assert_eq!(i64s(&o[0]), [0, 2, 4, 6]);
        assert_eq!(i64s(&o[1]), [0, 1, 3, 3, 6, 8, 10]);
        assert_eq!(i64s(&o[2]), [0, 3, 5, 6, 7, 8, 9, 11, 12, 14, 15]);
        assert_eq!(o[3].as_i32().unwrap(), [4, 5, 6, 1, 2, 3, 7, 8, 9, 1, 2, 3, 1, 2, 3]);
        // Ragged rank 1 over rows of two: whole rows move.
        let rows = Tensor::from_f32(vec![3, 2], vec![1., 2., 3., 4., 5., 6.]).unwrap();
        let o =
            ragged_gather(&[vec![0, 1, 3]], &rows, &Tensor::from_i64(vec![3], vec![1, 1, 0]).unwrap(), DType::Int64)
                .unwrap();
        assert_eq!(i64s(&o[0]), [0, 2, 4, 5]);
        assert_eq!(o[1].shape, [5, 2]);
        assert_eq!(o[1].as_f32().unwrap(), [3., 4., 5., 6., 3., 4., 5., 6., 1., 2.]);
        let e = ragged_gather(&[vec![0, 1, 3]], &rows, &v(&[2]), DType::Int64).unwrap_err();
        assert!(e.to_string().contains("indices[0] = 2 is not in [0, 2)"), "{e}");
    }
    #[test]
    fn ragged_to_sparse_matches_tensorflow_at_ragged_rank_two() {
        // tf.RaggedTensor.from_nested_row_splits(tf.reshape(tf.range(10), [5, 2]),
        //     [[0, 2, 2, 3], [0, 1, 3, 5]]).to_sparse()
        let values = Tensor::from_i32(vec![5, 2], (0..10).collect()).unwrap();
        let out = ragged_to_sparse(&[vec![0, 2, 2, 3], vec![0, 1, 3, 5]], &values).unwrap();
        let want: Vec<i64> = [
            [0, 0, 0, 0],
            [0, 0, 0, 1],
            [0, 1, 0, 0],
            [0, 1, 0, 1],
            [0, 1, 1, 0],
            [0, 1, 1, 1],
            [2, 0, 0, 0],
            [2, 0, 0, 1],
            [2, 0, 1, 0],
            [2, 0, 1, 1],
        ]
        .concat();
        assert_eq!((out[0].shape.clone(), out[0].as_i64().unwrap().to_vec()), (vec![10, 4], want));
        assert_eq!(out[1].shape, [10]);
        assert_eq!(out[2].as_i64().unwrap(), [3, 2, 2, 2]);
        let e = ragged_to_sparse(&[vec![0, 2, 1]], &values).unwrap_err();
        assert_eq!(e.to_string(), "Ragged splits should be non decreasing, but we got 2 followed by 1");
    }
}
