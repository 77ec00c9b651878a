//! TensorFlow's pure `TensorScatter{Add,Sub,Update,Max,Min}`: a tensor with the rows its
//! `[..., K]` indices name combined with the updates (duplicates accumulate, in index order).
//! Encapsulation writes them into cluster bodies for the `ResourceScatter*` ops, so the
//! interpreter runs them whenever the JIT declines a body; graphs use them directly too
//! (`tf.tensor_scatter_nd_*`). The combine is the compiler's `ScatterKind`, shared with the
//! compiled scatter.

use autoclust_graph::Tensor;
use autoclust_numeric::scatter::ScatterKind;

use super::{Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

/// TensorFlow's pure `TensorScatter{Add,Sub,Update,Max,Min}`, which the
/// encapsulation pass writes into bodies for `ResourceScatter*`; the
/// interpreter needs them when the JIT declines a body. `indices` is
/// `[..., K]` into the first K dimensions of `tensor`; duplicates accumulate.
pub(crate) fn prepare(node: &autoclust_graph::Node) -> KResult<Option<PureFn>> {
    let Some(kind) = ScatterKind::from_tf(&node.op) else { return Ok(None) };
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
        if updates.shape != want {
            return Err(KernelError::invalid(format!("updates must have shape {want:?}, got {:?}", updates.shape)));
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
        super::dispatch_num!(tensor.dtype, scatter_rows(kind, &mut tensor, &offsets, slice, &updates))?;
        super::one(tensor)
    })))
}

fn scatter_rows<T: super::elementwise::Num>(
    kind: ScatterKind,
    tensor: &mut Tensor,
    offsets: &[usize],
    slice: usize,
    updates: &Tensor,
) -> KResult<()> {
    let u = T::slice(updates).to_vec();
    let v = T::vec_mut(&mut tensor.data);
    for (r, &off) in offsets.iter().enumerate() {
        for j in 0..slice {
            let (p, q) = (&mut v[off + j], u[r * slice + j]);
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
