//! TensorFlow's pure `TensorScatter{Add,Sub,Update,Max,Min}`: a tensor with the rows its
//! `[..., K]` indices name combined with the updates (duplicates accumulate, in index order).
//! Encapsulation writes them into cluster bodies for the `ResourceScatter*` ops, so the
//! interpreter runs them whenever the JIT declines a body; graphs use them directly too
//! (`tf.tensor_scatter_nd_*`). The combine is the compiler's `ScatterKind`, shared with the
//! compiled scatter.
//!
//! A scatter encapsulation wrote for a `ResourceScatter{Add,Sub,Update,Max,Min}` (its
//! [`ORIGIN_OP_ATTR`]) keeps that op's contract: TensorFlow's resource scatter takes a scalar
//! update for every indexed row, which the pure op does not, and a wrong shape is worded as
//! the plain kernel words it — so a clustered run accepts and refuses what a plain run does.

use std::sync::Arc;

use autoclust_graph::{Tensor, TensorData, ORIGIN_OP_ATTR};
use autoclust_numeric::scatter::ScatterKind;

use super::{Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

/// TensorFlow's pure `TensorScatter{Add,Sub,Update,Max,Min}`, which the
/// encapsulation pass writes into bodies for `ResourceScatter*`; the
/// interpreter needs them when the JIT declines a body. `indices` is
/// `[..., K]` into the first K dimensions of `tensor`; duplicates accumulate.
pub(crate) fn prepare(node: &autoclust_graph::Node) -> KResult<Option<PureFn>> {
    let Some(kind) = ScatterKind::from_tf(&node.op) else { return Ok(None) };
    let resource_scatter = node
        .attr(ORIGIN_OP_ATTR)
        .and_then(|a| a.as_str())
        .is_some_and(|o| o.starts_with("ResourceScatter") && !o.starts_with("ResourceScatterNd"));
    Ok(Some(Box::new(move |mut inp: Inputs| -> KResult<Outputs> {
        super::arity(&inp, 3)?;
        let updates = inp.pop().expect("three inputs");
        let indices = inp.pop().expect("three inputs");
        let mut tensor = inp.pop().expect("three inputs");
        if updates.dtype != tensor.dtype {
            return Err(KernelError::invalid(format!(
                "updates have dtype {} but the tensor {}",
                updates.dtype, tensor.dtype
            )));
        }
        let idx = super::int_values(&indices, "indices")?;
        let k = indices.shape.last().copied().unwrap_or(1);
        if indices.shape.is_empty() || k == 0 || k > tensor.shape.len() {
            return Err(KernelError::invalid(format!(
                "indices of shape {:?} do not fit {:?}",
                indices.shape, tensor.shape
            )));
        }
        let slice: usize = tensor.shape[k..].iter().product();
        let rows = idx.len() / k;
        let mut want: Vec<usize> = indices.shape[..indices.shape.len() - 1].to_vec();
        want.extend_from_slice(&tensor.shape[k..]);
        // A resource scatter's scalar update goes to every element of every indexed row.
        let scalar = resource_scatter && updates.rank() == 0;
        if updates.shape != want && !scalar {
            return Err(KernelError::invalid(if resource_scatter {
                format!("updates must have shape {want:?} or be a scalar, got {:?}", updates.shape)
            } else {
                format!("updates must have shape {want:?}, got {:?}", updates.shape)
            }));
        }
        let mut offsets = Vec::with_capacity(rows);
        for r in 0..rows {
            let mut off = 0usize;
            for (d, &i) in idx[r * k..(r + 1) * k].iter().enumerate() {
                if i < 0 || i as usize >= tensor.shape[d] {
                    return Err(KernelError::invalid(format!(
                        "indices[{r}] = {:?} does not index {:?}",
                        &idx[r * k..(r + 1) * k],
                        tensor.shape
                    )));
                }
                off = off * tensor.shape[d] + i as usize;
            }
            offsets.push(off * slice);
        }
        match (kind, &mut tensor.data, &updates.data) {
            // `TensorScatterUpdate` takes every dtype: Keras' mixed-precision loss scaling
            // scatters `IsFinite` bools of an embedding's sparse gradient.
            (ScatterKind::Update, TensorData::Bool(v), TensorData::Bool(u)) => {
                overwrite_rows(Arc::make_mut(v).as_mut_slice(), u, &offsets, slice, scalar)
            }
            (ScatterKind::Update, TensorData::Str(v), TensorData::Str(u)) => {
                overwrite_rows(Arc::make_mut(v).as_mut_slice(), u, &offsets, slice, scalar)
            }
            _ => {
                super::dispatch_num!(tensor.dtype, scatter_rows(kind, &mut tensor, &offsets, slice, &updates, scalar))?
            }
        }
        super::one(tensor)
    })))
}

fn scatter_rows<T: super::elementwise::Num>(
    kind: ScatterKind,
    tensor: &mut Tensor,
    offsets: &[usize],
    slice: usize,
    updates: &Tensor,
    scalar: bool,
) -> KResult<()> {
    let u = T::slice(updates).to_vec();
    let v = T::vec_mut(&mut tensor.data);
    for (r, &off) in offsets.iter().enumerate() {
        for j in 0..slice {
            let (p, q) = (&mut v[off + j], u[if scalar { 0 } else { r * slice + j }]);
            *p = match kind {
                ScatterKind::Add => p.add(q),
                ScatterKind::Sub => p.sub(q),
                ScatterKind::Update => q,
                ScatterKind::Max => p.maximum(q),
                ScatterKind::Min => p.minimum(q),
            };
        }
    }
    Ok(())
}

/// `TensorScatterUpdate` of a non-numeric dtype: each indexed row replaced, in index order
/// (with duplicate indices the last update wins, as in TensorFlow's CPU kernel); with
/// `scalar`, every element of each row becomes the one update.
fn overwrite_rows<T: Clone>(v: &mut [T], updates: &[T], offsets: &[usize], slice: usize, scalar: bool) {
    for (r, &off) in offsets.iter().enumerate() {
        if scalar {
            v[off..off + slice].fill(updates[0].clone());
        } else {
            v[off..off + slice].clone_from_slice(&updates[r * slice..(r + 1) * slice]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(op: &str, inputs: Vec<Tensor>) -> KResult<Tensor> {
        let node = autoclust_graph::Node::unconnected("s", op, Default::default());
        let f = prepare(&node)?.expect("a scatter op");
        Ok(f(inputs.into_iter().collect())?.pop().expect("one output"))
    }

    /// `tf.tensor_scatter_nd_update(tf.fill([5], True), [[1], [3], [1]], [False, False, True])`
    /// is `[True, True, True, False, True]` in TensorFlow 2.21 (the last duplicate wins); a
    /// string tensor's rows are replaced the same way; `Add` of bools is still refused.
    #[test]
    fn update_takes_bool_and_string_tensors() {
        let idx = Tensor::from_i32(vec![3, 1], vec![1, 3, 1]).unwrap();
        let t = Tensor::from_bool(vec![5], vec![true; 5]).unwrap();
        let u = Tensor::from_bool(vec![3], vec![false, false, true]).unwrap();
        let got = run("TensorScatterUpdate", vec![t.clone(), idx.clone(), u.clone()]).unwrap();
        assert_eq!(got.as_bool().unwrap(), &[true, true, true, false, true]);
        let s =
            Tensor::from_strings(vec![2, 2], vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]).unwrap();
        let su = Tensor::from_strings(vec![1, 2], vec![b"x".to_vec(), b"yz".to_vec()]).unwrap();
        let got = run("TensorScatterUpdate", vec![s, Tensor::from_i32(vec![1, 1], vec![1]).unwrap(), su]).unwrap();
        assert_eq!(got.as_strings().unwrap(), &[b"a".to_vec(), b"b".to_vec(), b"x".to_vec(), b"yz".to_vec()]);
        assert!(run("TensorScatterAdd", vec![t, idx, u]).is_err());
    }
}
