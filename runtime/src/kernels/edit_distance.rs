//! `EditDistance` (`tf.edit_distance`, `edit_distance_op.cc`): the Levenshtein distance
//! between the sequences of two sparse tensors, one per index prefix (all but the last
//! coordinate). The error rate of CTC speech and OCR models is computed with it.
//!
//! As in TensorFlow, each operand's entries are taken in the order given (TensorFlow assumes
//! row-major sorted indices and groups consecutive entries with one prefix), the two group
//! lists are merged by prefix: a prefix with both gets the distance (divided by the truth's
//! length under `normalize`), one with only a hypothesis gets its length (∞ normalized), one
//! with only a truth its length (1 normalized). The output is float32 of shape
//! `max(hypothesis_shape, truth_shape)` over the prefix dimensions, zero elsewhere.

use autoclust_graph::{Node, Tensor, TensorData};

use super::shape_ops::debug_shape;
use super::{attr_bool_or, int_values, one, Inputs, PureFn};
use crate::error::{KResult, KernelError};

/// The kernel, or `None` if `node` is not an `EditDistance`.
pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    if node.op != "EditDistance" {
        return Ok(None);
    }
    let normalize = attr_bool_or(node, "normalize", true)?;
    Ok(Some(Box::new(move |inp: Inputs| {
        super::arity(&inp, 6)?;
        one(edit_distance(&inp, normalize)?)
    })))
}

/// One sparse operand: its indices as rows, the values' element comparator, its dense shape.
struct Sparse<'a> {
    rows: Vec<i64>,
    rank: usize,
    values: &'a Tensor,
    shape: Vec<i64>,
}

impl<'a> Sparse<'a> {
    fn new(indices: &Tensor, values: &'a Tensor, shape: &Tensor, what: &str) -> KResult<Sparse<'a>> {
        let bad = |m: String| Err(KernelError::invalid(m));
        if indices.shape.len() != 2 {
            return bad(format!("{what}_indices should be a matrix, but got shape: {}", debug_shape(&indices.shape)));
        }
        if values.shape.len() != 1 {
            return bad(format!("{what}_values should be a vector, but got shape: {}", debug_shape(&values.shape)));
        }
        if shape.shape.len() != 1 {
            return bad(format!("{what}_shape should be a vector, but got shape: {}", debug_shape(&shape.shape)));
        }
        let rank = indices.shape[1];
        if shape.shape[0] != rank {
            return bad(format!(
                "Expected {what}_shape.NumElements == #cols({what}_indices), their shapes are: {} and {}",
                debug_shape(&shape.shape),
                debug_shape(&indices.shape)
            ));
        }
        if values.shape[0] != indices.shape[0] {
            return bad(format!("{what}_values has {} elements for {} indices", values.shape[0], indices.shape[0]));
        }
        Ok(Sparse { rows: int_values(indices, "indices")?, rank, values, shape: int_values(shape, "shape")? })
    }

    /// Runs of consecutive entries with one prefix: (prefix, first entry, end).
    fn groups(&self) -> Vec<(&[i64], usize, usize)> {
        let n = self.values.shape[0];
        let prefix = |i: usize| &self.rows[i * self.rank..i * self.rank + self.rank - 1];
        let mut out: Vec<(&[i64], usize, usize)> = Vec::new();
        for i in 0..n {
            match out.last_mut() {
                Some(g) if g.0 == prefix(i) => g.2 = i + 1,
                _ => out.push((prefix(i), i, i + 1)),
            }
        }
        out
    }
}

/// Whether element `i` of `a` equals element `j` of `b` (`std::equal_to`: NaN ≠ NaN, −0 = 0).
fn same(a: &Tensor, i: usize, b: &Tensor, j: usize) -> bool {
    match (&a.data, &b.data) {
        (TensorData::I64(x), TensorData::I64(y)) => x[i] == y[j],
        (TensorData::I32(x), TensorData::I32(y)) => x[i] == y[j],
        (TensorData::F32(x), TensorData::F32(y)) => x[i] == y[j],
        (TensorData::F64(x), TensorData::F64(y)) => x[i] == y[j],
        (TensorData::Bool(x), TensorData::Bool(y)) => x[i] == y[j],
        (TensorData::Str(x), TensorData::Str(y)) => x[i] == y[j],
        (TensorData::Raw(x), TensorData::Raw(y)) => {
            let w = a.dtype.size_of().unwrap_or(1);
            x[i * w..(i + 1) * w] == y[j * w..(j + 1) * w]
        }
        _ => false,
    }
}

/// Levenshtein distance between `t[ts..te]` and `h[hs..he]` (one row of the table kept).
fn levenshtein(t: &Tensor, (ts, te): (usize, usize), h: &Tensor, (hs, he): (usize, usize)) -> usize {
    let mut row: Vec<usize> = (0..=he - hs).collect();
    for i in ts..te {
        let mut diag = row[0];
        row[0] += 1;
        for j in hs..he {
            let k = j - hs + 1;
            let sub = diag + usize::from(!same(t, i, h, j));
            diag = row[k];
            row[k] = sub.min(row[k] + 1).min(row[k - 1] + 1);
        }
    }
    row[he - hs]
}

fn edit_distance(inp: &[Tensor], normalize: bool) -> KResult<Tensor> {
    let hyp = Sparse::new(&inp[0], &inp[1], &inp[2], "hypothesis")?;
    let truth = Sparse::new(&inp[3], &inp[4], &inp[5], "truth")?;
    if truth.rank < 2 {
        return Err(KernelError::invalid(format!(
            "Input SparseTensors must have rank at least 2, but truth_shape rank is: {}",
            truth.rank
        )));
    }
    if truth.rank != hyp.rank {
        return Err(KernelError::invalid(format!(
            "Expected truth and hypothesis to have matching ranks, but their shapes are: [{}] and [{}]",
            truth.rank, hyp.rank
        )));
    }
    if inp[1].dtype != inp[4].dtype {
        return Err(KernelError::invalid(format!(
            "hypothesis_values and truth_values differ in dtype: {} and {}",
            inp[1].dtype, inp[4].dtype
        )));
    }
    let dims: Vec<usize> = (0..truth.rank - 1)
        .map(|d| usize::try_from(hyp.shape[d].max(truth.shape[d])))
        .collect::<Result<_, _>>()
        .map_err(|_| KernelError::invalid("a dense shape dimension is negative"))?;
    let total = super::budget(autoclust_graph::DType::Float32, &dims)?;
    let mut out = vec![0f32; total];
    let place = |g: &[i64]| -> KResult<usize> {
        let mut loc = 0usize;
        for (&c, &d) in g.iter().zip(&dims) {
            if c < 0 || c as usize >= d {
                return Err(KernelError::invalid(format!(
                    "Edit distance: an index prefix {g:?} lies outside the output shape {}",
                    debug_shape(&dims)
                )));
            }
            loc = loc * d + c as usize;
        }
        Ok(loc)
    };
    let (hg, tg) = (hyp.groups(), truth.groups());
    let (mut i, mut j) = (0, 0);
    while i < hg.len() || j < tg.len() {
        let order = match (hg.get(i), tg.get(j)) {
            (Some(h), Some(t)) => t.0.cmp(h.0),
            (Some(_), None) => std::cmp::Ordering::Greater,
            _ => std::cmp::Ordering::Less,
        };
        match order {
            std::cmp::Ordering::Equal => {
                let (h, t) = (hg[i], tg[j]);
                let d = levenshtein(truth.values, (t.1, t.2), hyp.values, (h.1, h.2)) as f32;
                out[place(t.0)?] = if normalize { d / (t.2 - t.1) as f32 } else { d };
                i += 1;
                j += 1;
            }
            // A hypothesis with no truth.
            std::cmp::Ordering::Greater => {
                let h = hg[i];
                let n = (h.2 - h.1) as f32;
                out[place(h.0)?] = if normalize { n / 0.0 } else { n };
                i += 1;
            }
            // A truth with no hypothesis.
            std::cmp::Ordering::Less => {
                let t = tg[j];
                out[place(t.0)?] = if normalize { 1.0 } else { (t.2 - t.1) as f32 };
                j += 1;
            }
        }
    }
    Tensor::from_f32(dims, out).map_err(|e| KernelError::invalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::{node, run1};
    use super::*;
    use autoclust_graph::AttrValue;

    fn sparse(indices: &[[i64; 2]], values: &[i64], shape: [i64; 2]) -> [Tensor; 3] {
        [
            Tensor::from_i64(vec![indices.len(), 2], indices.iter().flatten().copied().collect()).unwrap(),
            Tensor::from_i64(vec![values.len()], values.to_vec()).unwrap(),
            Tensor::from_i64(vec![2], shape.to_vec()).unwrap(),
        ]
    }

    #[test]
    fn distances_as_tensorflow_gives_them() {
        // hypothesis: [1 2 3], [4], (none), [9]; truth: [1 3], (none), [5 6], [9]
        let h = sparse(&[[0, 0], [0, 1], [0, 2], [1, 0], [3, 0]], &[1, 2, 3, 4, 9], [4, 3]);
        let t = sparse(&[[0, 0], [0, 1], [2, 0], [2, 1], [3, 0]], &[1, 3, 5, 6, 9], [4, 2]);
        let inputs: Vec<Tensor> = h.into_iter().chain(t).collect();
        let raw = node("EditDistance", &[("normalize", AttrValue::B(false))]);
        assert_eq!(run1(&raw, &inputs).unwrap().as_f32().unwrap(), [1.0, 1.0, 2.0, 0.0]);
        let norm = node("EditDistance", &[("normalize", AttrValue::B(true))]);
        let out = run1(&norm, &inputs).unwrap();
        assert_eq!(out.shape, [4]);
        assert_eq!(out.as_f32().unwrap(), [0.5, f32::INFINITY, 1.0, 0.0]);
    }

    #[test]
    fn levenshtein_counts_edits() {
        let s = |v: &[i64]| Tensor::from_i64(vec![v.len()], v.to_vec()).unwrap();
        let (a, b) = (s(&[1, 2, 3, 4, 5]), s(&[2, 3, 9, 5, 6]));
        assert_eq!(levenshtein(&a, (0, 5), &b, (0, 5)), 3);
        assert_eq!(levenshtein(&a, (0, 0), &b, (0, 5)), 5);
        assert_eq!(levenshtein(&a, (1, 3), &b, (0, 2)), 0);
    }
}
