//! `Einsum` (equations parsed by [`autoclust_graph::einsum`]) as one batched GEMM between
//! two rearrangements, the way TensorFlow's own kernel reduces it to `BatchMatMul`:
//!
//! - labels of one operand that appear nowhere else are summed out while that operand is
//!   rearranged;
//! - with two operands, labels are *batch* (both operands and the output), *contracted*
//!   (both operands, not the output), or *free* (one operand and the output). A becomes
//!   `[batch, free_a, contracted]`, B `[batch, contracted, free_b]` (size-1 ellipsis axes
//!   broadcast), one GEMM per batch element gives `[batch, free_a, free_b]`, and a last
//!   rearrangement puts the axes in the output's order.
//!
//! One implementation for compiled clusters ([`crate::kernels::KernelOp::Einsum`]) and the
//! interpreter's kernel; the products go through [`crate::gemm`].

use autoclust_graph::einsum::{Equation, Label};
use autoclust_graph::{DType, Tensor, TensorData};
use std::sync::Arc;

/// An element type Einsum handles: a zero (`Default`), addition and [`crate::gemm`].
pub trait EinsumElem: crate::gemm::GemmElem + Default {
    fn plus(self, o: Self) -> Self;
    /// `c[m,n] = a[m,k]·b[k,n]`, all dense row-major.
    fn matmul(m: usize, k: usize, n: usize, a: &[Self], b: &[Self], c: &mut [Self]) {
        // SAFETY: the slices hold the dense matrices described.
        unsafe {
            crate::gemm::gemm(
                m,
                k,
                n,
                a.as_ptr(),
                k as isize,
                1,
                b.as_ptr(),
                n as isize,
                1,
                c.as_mut_ptr(),
                rayon::current_num_threads(),
            )
        }
    }
}
impl EinsumElem for f32 {
    fn plus(self, o: Self) -> Self {
        self + o
    }
}
impl EinsumElem for f64 {
    fn plus(self, o: Self) -> Self {
        self + o
    }
}
impl EinsumElem for i32 {
    fn plus(self, o: Self) -> Self {
        self.wrapping_add(o)
    }
}
impl EinsumElem for i64 {
    fn plus(self, o: Self) -> Self {
        self.wrapping_add(o)
    }
}

/// Evaluates `eq` on `inputs` (one or two tensors of one dtype).
pub fn einsum(eq: &Equation, inputs: &[&Tensor]) -> Result<Tensor, String> {
    let dtype = inputs.first().map(|t| t.dtype).ok_or("Einsum needs an operand")?;
    if let Some(t) = inputs.iter().find(|t| t.dtype != dtype) {
        return Err(format!("operands have dtypes {dtype} and {}", t.dtype));
    }
    let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape.as_slice()).collect();
    macro_rules! go {
        ($variant:ident) => {{
            let ins: Vec<&[_]> = inputs
                .iter()
                .map(|t| match &t.data {
                    TensorData::$variant(v) => Ok(v.as_slice()),
                    _ => Err(format!("an operand's data is not {dtype}")),
                })
                .collect::<Result<_, String>>()?;
            let (shape, v) = einsum_typed(eq, &ins, &shapes)?;
            Ok(Tensor { dtype, shape, data: TensorData::$variant(Arc::new(v)) })
        }};
    }
    match dtype {
        DType::Float32 => go!(F32),
        DType::Float64 => go!(F64),
        DType::Int32 => go!(I32),
        DType::Int64 => go!(I64),
        d => Err(format!("Einsum of {d} is not supported")),
    }
}

/// A dense tensor with axes `order`, taken from `src` (dims `shape`, axes `labels`):
/// labels `src` lacks or has at size 1 are broadcast to `size(label)`, and `src`'s labels
/// missing from `order` are summed over.
fn arrange<T: EinsumElem>(
    src: &[T],
    shape: &[usize],
    labels: &[Label],
    order: &[Label],
    size: &dyn Fn(Label) -> usize,
) -> Vec<T> {
    let strides = crate::kernels::strides_of(shape);
    let stride_of = |l: Label| match labels.iter().position(|x| *x == l) {
        Some(a) if shape[a] != 1 => strides[a],
        _ => 0,
    };
    let out_dims: Vec<usize> = order.iter().map(|&l| size(l)).collect();
    let out_strides: Vec<usize> = order.iter().map(|&l| stride_of(l)).collect();
    let summed: Vec<usize> = (0..labels.len()).filter(|&a| !order.contains(&labels[a])).collect();
    let sum_dims: Vec<usize> = summed.iter().map(|&a| shape[a]).collect();
    let sum_strides: Vec<usize> = summed.iter().map(|&a| strides[a]).collect();
    let total: usize = out_dims.iter().product();
    let mut out = Vec::with_capacity(total);
    let mut idx = vec![0usize; out_dims.len()];
    let mut sidx = vec![0usize; sum_dims.len()];
    let sum_total: usize = sum_dims.iter().product();
    for _ in 0..total {
        let base: usize = idx.iter().zip(&out_strides).map(|(i, s)| i * s).sum();
        if summed.is_empty() {
            out.push(src[base]);
        } else {
            let mut v = T::default();
            sidx.iter_mut().for_each(|i| *i = 0);
            for _ in 0..sum_total {
                let off: usize = sidx.iter().zip(&sum_strides).map(|(i, s)| i * s).sum();
                v = v.plus(src[base + off]);
                crate::kernels::next_index(&mut sidx, &sum_dims);
            }
            out.push(v);
        }
        crate::kernels::next_index(&mut idx, &out_dims);
    }
    out
}

fn einsum_typed<T: EinsumElem>(
    eq: &Equation,
    ins: &[&[T]],
    shapes: &[&[usize]],
) -> Result<(Vec<usize>, Vec<T>), String> {
    let dims: Vec<Vec<Option<i64>>> = shapes.iter().map(|s| s.iter().map(|&d| Some(d as i64)).collect()).collect();
    let dim_refs: Vec<&[Option<i64>]> = dims.iter().map(Vec::as_slice).collect();
    let sizes = eq.sizes(&dim_refs)?;
    let size =
        |l: Label| -> usize { sizes.iter().find(|(x, _)| *x == l).and_then(|(_, d)| *d).map_or(1, |d| d as usize) };
    let out_shape: Vec<usize> = eq.output.iter().map(|&l| size(l)).collect();
    if let [a] = ins {
        let v = arrange(a, shapes[0], &eq.inputs[0], &eq.output, &size);
        return Ok((out_shape, v));
    }
    let (la, lb) = (&eq.inputs[0], &eq.inputs[1]);
    let batch: Vec<Label> = eq.output.iter().copied().filter(|l| la.contains(l) && lb.contains(l)).collect();
    let free_a: Vec<Label> = eq.output.iter().copied().filter(|l| la.contains(l) && !lb.contains(l)).collect();
    let free_b: Vec<Label> = eq.output.iter().copied().filter(|l| lb.contains(l) && !la.contains(l)).collect();
    let contracted: Vec<Label> = la.iter().copied().filter(|l| lb.contains(l) && !eq.output.contains(l)).collect();
    let prod = |ls: &[Label]| ls.iter().map(|&l| size(l)).product::<usize>();
    let (nb, m, k, n) = (prod(&batch), prod(&free_a), prod(&contracted), prod(&free_b));
    let order_a: Vec<Label> = batch.iter().chain(&free_a).chain(&contracted).copied().collect();
    let order_b: Vec<Label> = batch.iter().chain(&contracted).chain(&free_b).copied().collect();
    let a = arrange(ins[0], shapes[0], la, &order_a, &size);
    let b = arrange(ins[1], shapes[1], lb, &order_b, &size);
    let mut c = vec![T::default(); nb * m * n];
    if m > 0 && n > 0 && k > 0 {
        for i in 0..nb {
            T::matmul(
                m,
                k,
                n,
                &a[i * m * k..(i + 1) * m * k],
                &b[i * k * n..(i + 1) * k * n],
                &mut c[i * m * n..(i + 1) * m * n],
            );
        }
    }
    let c_labels: Vec<Label> = batch.iter().chain(&free_a).chain(&free_b).copied().collect();
    if c_labels == eq.output {
        return Ok((out_shape, c));
    }
    let c_shape: Vec<usize> = c_labels.iter().map(|&l| size(l)).collect();
    let v = arrange(&c, &c_shape, &c_labels, &eq.output, &size);
    Ok((out_shape, v))
}
