//! `RaggedTensorToTensor`: a ragged tensor made dense, as `RaggedTensor.to_tensor` and Keras'
//! `TextVectorization` (its token ids padded or cut to `output_sequence_length`) emit it.
//!
//! Ragged rank 1, partitioned by `ROW_SPLITS` (`splits[i]..splits[i+1]` are row `i`'s values)
//! or by `FIRST_DIM_SIZE` + `VALUE_ROWIDS` (each value's row, non-decreasing). The `shape`
//! operand fixes the output's dimensions where it is not -1 (a scalar -1 or an empty shape:
//! nothing fixed): row `i`, column `j` is value `splits[i] + j` when row `i` has it and both
//! indices are inside the output, else `default_value` (a scalar, or one inner element,
//! broadcast). Rows and columns past the output's size are dropped, as TensorFlow drops
//! them. Any element type: values are moved, never computed.

use std::sync::Arc;

use autoclust_graph::{AttrValue, ListValue, Node, Tensor, TensorData};

use super::{budget, int_values, one, Inputs, PureFn};
use crate::error::{KResult, KernelError};

/// The row partition a node declares (`row_partition_types`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Partition {
    RowSplits,
    RowIds,
}

fn partition(node: &Node) -> KResult<Partition> {
    let types: Vec<Vec<u8>> = match node.attr("row_partition_types") {
        Some(AttrValue::List(ListValue::S(v))) => v.clone(),
        _ => return Err(KernelError::Attr("row_partition_types".into())),
    };
    match types.iter().map(Vec::as_slice).collect::<Vec<_>>().as_slice() {
        [b"ROW_SPLITS"] => Ok(Partition::RowSplits),
        [b"FIRST_DIM_SIZE", b"VALUE_ROWIDS"] => Ok(Partition::RowIds),
        other => Err(KernelError::invalid(format!(
            "RaggedTensorToTensor: row partitions {:?} are not supported (ragged rank 1 only: [ROW_SPLITS] or \
             [FIRST_DIM_SIZE, VALUE_ROWIDS])",
            other.iter().map(|t| String::from_utf8_lossy(t).into_owned()).collect::<Vec<_>>()
        ))),
    }
}

/// `splits` from a partition's operands, checked: starts at 0, non-decreasing, ends at `nvals`.
fn row_splits(kind: Partition, parts: &[Tensor], nvals: usize) -> KResult<Vec<usize>> {
    let bad = |m: String| KernelError::invalid(format!("RaggedTensorToTensor: {m}"));
    let splits: Vec<i64> = match kind {
        Partition::RowSplits => int_values(&parts[0], "row_splits")?,
        Partition::RowIds => {
            let nrows = int_values(&parts[0], "first_dim_size")?;
            let [nrows] = nrows.as_slice() else { return Err(bad("first_dim_size must be a scalar".into())) };
            let nrows = usize::try_from(*nrows).map_err(|_| bad(format!("first_dim_size {nrows} is negative")))?;
            let ids = int_values(&parts[1], "value_rowids")?;
            if ids.len() != nvals {
                return Err(bad(format!("{} value_rowids for {nvals} values", ids.len())));
            }
            let mut splits = vec![0i64; nrows + 1];
            let mut prev = 0;
            for &r in &ids {
                if r < prev || r as usize >= nrows {
                    return Err(bad(format!("value_rowids must be sorted and < {nrows}, got {r}")));
                }
                prev = r;
                splits[r as usize + 1] += 1;
            }
            for i in 0..nrows {
                splits[i + 1] += splits[i];
            }
            splits
        }
    };
    let ok = splits.first() == Some(&0)
        && splits.windows(2).all(|w| w[0] <= w[1])
        && splits.last().is_some_and(|&l| l as usize == nvals);
    if !ok {
        return Err(bad(format!("row_splits must start at 0, not decrease and end at {nvals} (the values)")));
    }
    Ok(splits.into_iter().map(|x| x as usize).collect())
}

/// The output's picks from `values` (by inner block) or the default, and its shape.
fn layout(splits: &[usize], inner: &[usize], want: &[i64]) -> KResult<(Vec<usize>, Vec<Option<usize>>)> {
    let nrows = splits.len() - 1;
    let widest = splits.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
    let rank = 2 + inner.len();
    if !want.is_empty() && want.len() != rank {
        return Err(KernelError::invalid(format!(
            "RaggedTensorToTensor: shape {want:?} has rank {}, the ragged tensor {rank}",
            want.len()
        )));
    }
    let fixed = |i: usize, natural: usize| -> KResult<usize> {
        match want.get(i) {
            None | Some(-1) => Ok(natural),
            Some(&d) if d >= 0 => Ok(d as usize),
            Some(d) => Err(KernelError::invalid(format!("RaggedTensorToTensor: dimension {d} in shape"))),
        }
    };
    let (rows, cols) = (fixed(0, nrows)?, fixed(1, widest)?);
    for (k, &d) in inner.iter().enumerate() {
        if fixed(2 + k, d)? != d {
            return Err(KernelError::invalid(format!(
                "RaggedTensorToTensor: inner dimension {k} of the values is {d}, the shape asks {}",
                want[2 + k]
            )));
        }
    }
    let mut shape = vec![rows, cols];
    shape.extend_from_slice(inner);
    let mut picks = Vec::with_capacity(rows * cols);
    for i in 0..rows {
        for j in 0..cols {
            picks.push((i < nrows && splits[i] + j < splits[i + 1]).then(|| splits[i] + j));
        }
    }
    Ok((shape, picks))
}

/// Gathers blocks of `block` elements from `values` (or the default's one block).
fn take(
    values: &Tensor,
    default: &Tensor,
    picks: &[Option<usize>],
    block: usize,
    shape: Vec<usize>,
) -> KResult<Tensor> {
    fn gather<T: Clone>(v: &[T], d: &[T], picks: &[Option<usize>], block: usize) -> Vec<T> {
        let mut out = Vec::with_capacity(picks.len() * block);
        for p in picks {
            match p {
                Some(i) => out.extend_from_slice(&v[i * block..(i + 1) * block]),
                None if d.len() == block => out.extend_from_slice(d),
                None => out.extend((0..block).map(|_| d[0].clone())),
            }
        }
        out
    }
    if default.dtype != values.dtype || (default.num_elements() != 1 && default.num_elements() != block) {
        return Err(KernelError::invalid(format!(
            "RaggedTensorToTensor: default_value must be one {} element or one inner element, got {} {:?}",
            values.dtype, default.dtype, default.shape
        )));
    }
    let data = match (&values.data, &default.data) {
        (TensorData::F32(v), TensorData::F32(d)) => TensorData::F32(Arc::new(gather(v, d, picks, block))),
        (TensorData::F64(v), TensorData::F64(d)) => TensorData::F64(Arc::new(gather(v, d, picks, block))),
        (TensorData::I32(v), TensorData::I32(d)) => TensorData::I32(Arc::new(gather(v, d, picks, block))),
        (TensorData::I64(v), TensorData::I64(d)) => TensorData::I64(Arc::new(gather(v, d, picks, block))),
        (TensorData::Bool(v), TensorData::Bool(d)) => TensorData::Bool(Arc::new(gather(v, d, picks, block))),
        (TensorData::Str(v), TensorData::Str(d)) => TensorData::Str(Arc::new(gather(v, d, picks, block))),
        (TensorData::Raw(v), TensorData::Raw(d)) => {
            let width = values.dtype.size_of().ok_or(KernelError::DType(values.dtype))?;
            let (v, d): (Vec<&[u8]>, Vec<&[u8]>) = (v.chunks(width).collect(), d.chunks(width).collect());
            TensorData::Raw(Arc::new(gather(&v, &d, picks, block).concat()))
        }
        _ => return Err(KernelError::DType(values.dtype)),
    };
    Ok(Tensor { dtype: values.dtype, shape, data })
}

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    if node.op != "RaggedTensorToTensor" {
        return Ok(None);
    }
    let kind = partition(node)?;
    let nparts = if kind == Partition::RowSplits { 1 } else { 2 };
    Ok(Some(Box::new(move |inp: Inputs| {
        super::arity(&inp, 3 + nparts)?;
        let (shape, values, default) = (&inp[0], &inp[1], &inp[2]);
        let Some((&nvals, inner)) = values.shape.split_first() else {
            return Err(KernelError::invalid("RaggedTensorToTensor: values must have rank >= 1"));
        };
        let splits = row_splits(kind, &inp[3..], nvals)?;
        let want = int_values(shape, "shape")?;
        // A scalar -1 (unknown rank) fixes nothing.
        let want = if shape.shape.is_empty() { Vec::new() } else { want };
        let (out_shape, picks) = layout(&splits, inner, &want)?;
        budget(values.dtype, &out_shape)?;
        let block: usize = inner.iter().product();
        one(take(values, default, &picks, block, out_shape)?)
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(types: &[&str]) -> Node {
        let types = AttrValue::List(ListValue::S(types.iter().map(|t| t.as_bytes().to_vec()).collect()));
        super::super::tests_support::node("RaggedTensorToTensor", &[("row_partition_types", types)])
    }

    #[test]
    fn rows_are_padded_and_cut_as_tensorflow_does() {
        // tf.RaggedTensor.from_row_splits([1, 2, 3, 4, 5, 6], [0, 3, 3, 6]).to_tensor(
        //     default_value=-1, shape=[4, 2]) == [[1, 2], [-1, -1], [4, 5], [-1, -1]]
        let k = prepare(&node(&["ROW_SPLITS"])).unwrap().unwrap();
        let values = Tensor::from_i64(vec![6], vec![1, 2, 3, 4, 5, 6]).unwrap();
        let splits = Tensor::from_i64(vec![4], vec![0, 3, 3, 6]).unwrap();
        let shape = Tensor::from_i64(vec![2], vec![4, 2]).unwrap();
        let out = k([shape, values.clone(), Tensor::scalar_i64(-1), splits.clone()].into_iter().collect()).unwrap();
        assert_eq!(out[0].shape, [4, 2]);
        assert_eq!(out[0].as_i64().unwrap(), &[1, 2, -1, -1, 4, 5, -1, -1]);
        // Unknown shape: as many rows as there are, as wide as the widest.
        let out = k([Tensor::scalar_i64(-1), values, Tensor::scalar_i64(0), splits].into_iter().collect()).unwrap();
        assert_eq!(out[0].shape, [3, 3]);
        assert_eq!(out[0].as_i64().unwrap(), &[1, 2, 3, 0, 0, 0, 4, 5, 6]);
    }

    #[test]
    fn row_ids_strings_and_inner_dimensions() {
        let k = prepare(&node(&["FIRST_DIM_SIZE", "VALUE_ROWIDS"])).unwrap().unwrap();
        let words = Tensor::from_strings(vec![3], vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]).unwrap();
        let out = k([
            Tensor::from_i64(vec![2], vec![-1, -1]).unwrap(),
            words,
            Tensor::from_strings(vec![], vec![b"".to_vec()]).unwrap(),
            Tensor::scalar_i64(3),
            Tensor::from_i64(vec![3], vec![0, 0, 2]).unwrap(),
        ]
        .into_iter()
        .collect())
        .unwrap();
        let TensorData::Str(s) = &out[0].data else { panic!("strings") };
        assert_eq!(out[0].shape, [3, 2]);
        assert_eq!(s.as_slice(), [b"a".to_vec(), b"b".to_vec(), vec![], vec![], b"c".to_vec(), vec![]]);
        // Values with an inner dimension keep it; unsorted row ids are an error.
        let k = prepare(&node(&["ROW_SPLITS"])).unwrap().unwrap();
        let v = Tensor::from_f32(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        let splits = Tensor::from_i32(vec![3], vec![0, 0, 2]).unwrap();
        let out = k([Tensor::scalar_i64(-1), v, Tensor::scalar_f32(9.0), splits].into_iter().collect()).unwrap();
        assert_eq!(out[0].shape, [2, 2, 2]);
        assert_eq!(out[0].as_f32().unwrap(), &[9.0, 9.0, 9.0, 9.0, 1.0, 2.0, 3.0, 4.0]);
        let k = prepare(&node(&["FIRST_DIM_SIZE", "VALUE_ROWIDS"])).unwrap().unwrap();
        let bad = k([
            Tensor::scalar_i64(-1),
            Tensor::from_i64(vec![2], vec![1, 2]).unwrap(),
            Tensor::scalar_i64(0),
            Tensor::scalar_i64(2),
            Tensor::from_i64(vec![2], vec![1, 0]).unwrap(),
        ]
        .into_iter()
        .collect());
        assert!(bad.is_err());
    }
}
