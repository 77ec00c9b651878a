//! `RaggedTensorToTensor`: a ragged tensor made dense, as `RaggedTensor.to_tensor` and Keras'
//! `TextVectorization` (its token ids padded or cut to `output_sequence_length`) emit it.
//!
//! Any ragged rank, each ragged dimension partitioned by `ROW_SPLITS` (`splits[i]..splits[i+1]`
//! are row `i`'s elements) or `VALUE_ROWIDS` (each element's row, non-decreasing; after a
//! `FIRST_DIM_SIZE` giving the outermost row count) — `tf.ragged.stack`, nested
//! `from_row_splits`, and TensorFlow's own ragged ops emit both. The `shape`
//! operand fixes the output's dimensions where it is not -1 (a scalar -1 or an empty shape:
//! nothing fixed): row `i`, column `j` is value `splits[i] + j` when row `i` has it and both
//! indices are inside the output, else `default_value` (a scalar, or one inner element,
//! broadcast). Rows and columns past the output's size are dropped, as TensorFlow drops
//! them. Any element type: values are moved, never computed.

use std::sync::Arc;

use autoclust_graph::{AttrValue, ListValue, Node, Tensor, TensorData};

use super::{budget, int_values, one, Inputs, PureFn};
use crate::error::{KResult, KernelError};

/// How one ragged dimension is partitioned (`row_partition_types`, after an optional
/// leading `FIRST_DIM_SIZE`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Partition {
    RowSplits,
    RowIds,
}

/// The partitions a node declares, outermost first, and whether a `FIRST_DIM_SIZE` operand
/// precedes them (TensorFlow requires one when the outermost partition is `VALUE_ROWIDS`).
fn partitions(node: &Node) -> KResult<(bool, Vec<Partition>)> {
    let types: Vec<Vec<u8>> = match node.attr("row_partition_types") {
        Some(AttrValue::List(ListValue::S(v))) => v.clone(),
        _ => return Err(KernelError::Attr("row_partition_types".into())),
    };
    let names: Vec<String> = types.iter().map(|t| String::from_utf8_lossy(t).into_owned()).collect();
    let first_dim = names.first().is_some_and(|t| t == "FIRST_DIM_SIZE");
    let parts: Option<Vec<Partition>> = names[usize::from(first_dim)..]
        .iter()
        .map(|t| match t.as_str() {
            "ROW_SPLITS" => Some(Partition::RowSplits),
            "VALUE_ROWIDS" => Some(Partition::RowIds),
            _ => None,
        })
        .collect();
    match parts {
        Some(p) if !p.is_empty() && (first_dim || p[0] == Partition::RowSplits) => Ok((first_dim, p)),
        _ => Err(KernelError::invalid(format!(
            "RaggedTensorToTensor: row partitions {names:?} are not valid: ROW_SPLITS and VALUE_ROWIDS, the first \
             VALUE_ROWIDS after a FIRST_DIM_SIZE"
        ))),
    }
}

/// One ragged dimension's `splits` from its partition operand, checked: starts at 0, never
/// decreases, ends at `nvals` (the next level's size, or the values' for the innermost).
/// `nrows` is this level's number of rows when it is known from the level above (or from
/// `FIRST_DIM_SIZE`); row ids need it, splits are checked against it.
fn row_splits(kind: Partition, part: &Tensor, nrows: Option<usize>, nvals: usize) -> KResult<Vec<usize>> {
    let bad = |m: String| KernelError::invalid(format!("RaggedTensorToTensor: {m}"));
    let splits: Vec<i64> = match kind {
        Partition::RowSplits => int_values(part, "row_splits")?,
        Partition::RowIds => {
            let nrows = nrows.ok_or_else(|| bad("VALUE_ROWIDS without a FIRST_DIM_SIZE".into()))?;
            let ids = int_values(part, "value_rowids")?;
            if ids.len() != nvals {
                return Err(bad(format!("{} value_rowids for {nvals} values", ids.len())));
            }
            let mut splits = vec![0i64; nrows + 1];
            let mut prev = 0;
            for &r in &ids {
                if r < prev || r < 0 || r as usize >= nrows {
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
        && splits.last().is_some_and(|&l| l as usize == nvals)
        && nrows.is_none_or(|n| splits.len() == n + 1);
    if !ok {
        return Err(bad(format!("row_splits must start at 0, not decrease and end at {nvals} (the values)")));
    }
    Ok(splits.into_iter().map(|x| x as usize).collect())
}

/// Every ragged level's splits, outermost first: the partition operands `parts` (after
/// `FIRST_DIM_SIZE` when `first_dim`) read innermost first, since a level's row ids are as
/// many as the level below has rows.
fn all_splits(first_dim: bool, kinds: &[Partition], parts: &[Tensor], nvals: usize) -> KResult<Vec<Vec<usize>>> {
    let top_rows = if first_dim {
        let n = int_values(&parts[0], "first_dim_size")?;
        let [n] = n.as_slice() else {
            return Err(KernelError::invalid("RaggedTensorToTensor: first_dim_size must be a scalar"));
        };
        Some(usize::try_from(*n).map_err(|_| KernelError::invalid(format!("first_dim_size {n} is negative")))?)
    } else {
        None
    };
    let ops = &parts[usize::from(first_dim)..];
    // Level sizes: a ROW_SPLITS level has `len - 1` rows; a VALUE_ROWIDS level's rows are the
    // level above's values, known once the level above is read. Read outermost first for the
    // row counts, but each level's values count is the next level's rows (innermost: nvals).
    let mut rows: Vec<Option<usize>> = vec![None; kinds.len()];
    rows[0] = top_rows;
    for (k, &kind) in kinds.iter().enumerate() {
        if kind == Partition::RowSplits {
            let n = ops[k].num_elements();
            let n = n.checked_sub(1).ok_or_else(|| KernelError::invalid("RaggedTensorToTensor: empty row_splits"))?;
            rows[k] = Some(n);
        }
    }
    let mut levels: Vec<Vec<usize>> = Vec::with_capacity(kinds.len());
    for (k, &kind) in kinds.iter().enumerate() {
        let nrows = if k == 0 { rows[0] } else { Some(*levels[k - 1].last().expect("splits are non-empty")) };
        // This level's elements are the next level's rows (the values, innermost). A row-ids
        // level below counts its rows only through this level, so nothing more is checked.
        let nvals_here = match kinds.get(k + 1) {
            None => nvals,
            Some(Partition::RowSplits) => rows[k + 1].expect("a splits level knows its rows"),
            Some(Partition::RowIds) => match kind {
                Partition::RowIds => ops[k].num_elements(),
                Partition::RowSplits => {
                    let own = int_values(&ops[k], "row_splits")?;
                    own.last().map_or(0, |&l| l.max(0) as usize)
                }
            },
        };
        levels.push(row_splits(kind, &ops[k], nrows, nvals_here)?);
    }
    Ok(levels)
}

/// The output's picks from `values` (by inner block) or the default, and its shape: output
/// dimension 0 has the outermost level's rows, dimension `k + 1` the longest row of level
/// `k`, each fixed by `want` where it is not -1 (rows and columns past it dropped).
fn layout(levels: &[Vec<usize>], inner: &[usize], want: &[i64]) -> KResult<(Vec<usize>, Vec<Option<usize>>)> {
    let ragged = levels.len();
    let rank = 1 + ragged + inner.len();
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
    let mut shape = vec![fixed(0, levels[0].len() - 1)?];
    for (k, splits) in levels.iter().enumerate() {
        let widest = splits.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        shape.push(fixed(1 + k, widest)?);
    }
    for (k, &d) in inner.iter().enumerate() {
        if fixed(1 + ragged + k, d)? != d {
            return Err(KernelError::invalid(format!(
                "RaggedTensorToTensor: inner dimension {k} of the values is {d}, the shape asks {}",
                want[1 + ragged + k]
            )));
        }
    }
    let outer = &shape[..1 + ragged];
    let n: usize = outer.iter().product();
    budget(autoclust_graph::DType::Int64, &[n])?;
    let mut picks = Vec::with_capacity(n);
    let mut idx = vec![0usize; outer.len()];
    for _ in 0..n {
        // Row idx[0] of the outermost level, then element idx[k + 1] of the row it leads to.
        let mut at = (idx[0] < levels[0].len() - 1).then_some(idx[0]);
        for (k, splits) in levels.iter().enumerate() {
            at = at.and_then(|row| (splits[row] + idx[k + 1] < splits[row + 1]).then(|| splits[row] + idx[k + 1]));
        }
        picks.push(at);
        autoclust_numeric::layout::next_index(&mut idx, outer);
    }
    shape.extend_from_slice(inner);
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
    let (first_dim, kinds) = partitions(node)?;
    let nparts = usize::from(first_dim) + kinds.len();
    Ok(Some(Box::new(move |inp: Inputs| {
        super::arity(&inp, 3 + nparts)?;
        let (shape, values, default) = (&inp[0], &inp[1], &inp[2]);
        let Some((&nvals, inner)) = values.shape.split_first() else {
            return Err(KernelError::invalid("RaggedTensorToTensor: values must have rank >= 1"));
        };
        let levels = all_splits(first_dim, &kinds, &inp[3..], nvals)?;
        let want = int_values(shape, "shape")?;
        // A scalar -1 (unknown rank) fixes nothing.
        let want = if shape.shape.is_empty() { Vec::new() } else { want };
        let (out_shape, picks) = layout(&levels, inner, &want)?;
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

    /// Ragged rank 2, TensorFlow 2.21's values: values 1..=7, inner splits [0,2,3,3,7], outer
    /// [0,2,4] is `[[[1,2,-1,-1],[3,-1,-1,-1]],[[-1,-1,-1,-1],[4,5,6,7]]]`; cut to [3,1,3] it
    /// is `[[[1,2,-1]],[[-1,-1,-1]],[[-1,-1,-1]]]`; the same by FIRST_DIM_SIZE 3 and row ids
    /// [0,0,2,2] and [0,0,1,3,3,3,3] is `[[[1,2,0,0],[3,0,0,0]],[[0]*4]*2,[[0]*4,[4,5,6,7]]]`.
    #[test]
    fn two_ragged_dimensions_by_splits_and_by_row_ids() {
        let v = || Tensor::from_i64(vec![7], (1..=7).collect()).unwrap();
        let i64s = |x: &[i64]| Tensor::from_i64(vec![x.len()], x.to_vec()).unwrap();
        let k = prepare(&node(&["ROW_SPLITS", "ROW_SPLITS"])).unwrap().unwrap();
        let run = |shape: Tensor, default: i64| {
            k([shape, v(), Tensor::scalar_i64(default), i64s(&[0, 2, 4]), i64s(&[0, 2, 3, 3, 7])].into_iter().collect())
                .unwrap()
        };
        let out = run(i64s(&[-1, -1, -1]), -1);
        assert_eq!(out[0].shape, [2, 2, 4]);
        assert_eq!(out[0].as_i64().unwrap(), &[1, 2, -1, -1, 3, -1, -1, -1, -1, -1, -1, -1, 4, 5, 6, 7]);
        let out = run(i64s(&[3, 1, 3]), -1);
        assert_eq!(out[0].shape, [3, 1, 3]);
        assert_eq!(out[0].as_i64().unwrap(), &[1, 2, -1, -1, -1, -1, -1, -1, -1]);
        let k = prepare(&node(&["FIRST_DIM_SIZE", "VALUE_ROWIDS", "VALUE_ROWIDS"])).unwrap().unwrap();
        let parts = [Tensor::scalar_i64(3), i64s(&[0, 0, 2, 2]), i64s(&[0, 0, 1, 3, 3, 3, 3])];
        let mut inputs: Inputs = [Tensor::scalar_i64(-1), v(), Tensor::scalar_i64(0)].into_iter().collect();
        inputs.extend(parts.iter().cloned());
        let out = k(inputs).unwrap();
        assert_eq!(out[0].shape, [3, 2, 4]);
        let mut want = vec![1, 2, 0, 0, 3, 0, 0, 0];
        want.extend([0; 12]);
        want.extend([4, 5, 6, 7]);
        assert_eq!(out[0].as_i64().unwrap(), &want[..]);
        // Inner row ids that do not cover the values are an error, not a wrong tensor.
        let mut inputs: Inputs = [Tensor::scalar_i64(-1), v(), Tensor::scalar_i64(0)].into_iter().collect();
        inputs.extend([Tensor::scalar_i64(3), i64s(&[0, 0, 2, 2]), i64s(&[0, 0, 1, 3])]);
        assert!(k(inputs).is_err());
        assert!(prepare(&node(&["VALUE_ROWIDS"])).is_err());
    }
}
