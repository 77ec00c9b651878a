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
//! Float32/64 and int32/64, like the MatMul kernels.

use autoclust_graph::einsum::{Equation, Label};
use autoclust_graph::{DType, Node, Tensor};

use super::matmul::Gemm;
use super::{one, tensor_of, Elem, Inputs, PureFn};
use crate::error::{KResult, KernelError};

/// A dense tensor with axes `order`, taken from `src` (dims `shape`, axes `labels`):
/// labels `src` lacks or has at size 1 are broadcast to `size(label)`, and `src`'s labels
/// missing from `order` are summed over.
fn arrange<T: Elem + std::ops::Add<Output = T>>(
    src: &[T],
    shape: &[usize],
    labels: &[Label],
    order: &[Label],
    size: &dyn Fn(Label) -> usize,
) -> Vec<T> {
    let mut strides = vec![0usize; shape.len()];
    let mut acc = 1;
    for a in (0..shape.len()).rev() {
        strides[a] = acc;
        acc *= shape[a];
    }
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
            let mut v = T::zero();
            sidx.iter_mut().for_each(|i| *i = 0);
            for _ in 0..sum_total {
                let off: usize = sidx.iter().zip(&sum_strides).map(|(i, s)| i * s).sum();
                v = v + src[base + off];
                step(&mut sidx, &sum_dims);
            }
            out.push(v);
        }
        step(&mut idx, &out_dims);
    }
    out
}

/// Advances a row-major multi-index.
fn step(idx: &mut [usize], dims: &[usize]) {
    for a in (0..idx.len()).rev() {
        idx[a] += 1;
        if idx[a] < dims[a] {
            return;
        }
        idx[a] = 0;
    }
}

fn einsum_typed<T: Elem + Gemm + std::ops::Add<Output = T>>(eq: &Equation, ins: &[&Tensor]) -> KResult<Tensor> {
    let dims: Vec<Vec<Option<i64>>> = ins.iter().map(|t| t.shape.iter().map(|&d| Some(d as i64)).collect()).collect();
    let dim_refs: Vec<&[Option<i64>]> = dims.iter().map(Vec::as_slice).collect();
    let sizes = eq.sizes(&dim_refs).map_err(KernelError::invalid)?;
    let size =
        |l: Label| -> usize { sizes.iter().find(|(x, _)| *x == l).and_then(|(_, d)| *d).map_or(1, |d| d as usize) };
    let out_shape: Vec<usize> = eq.output.iter().map(|&l| size(l)).collect();
    if let [a] = ins {
        let v = arrange(T::slice(a), &a.shape, &eq.inputs[0], &eq.output, &size);
        return Ok(tensor_of(out_shape, v));
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
    let a = arrange(T::slice(ins[0]), &ins[0].shape, la, &order_a, &size);
    let b = arrange(T::slice(ins[1]), &ins[1].shape, lb, &order_b, &size);
    let mut c = vec![T::zero(); nb * m * n];
    if m > 0 && n > 0 && k > 0 {
        for i in 0..nb {
            T::gemm(
                m,
                k,
                n,
                &a[i * m * k..(i + 1) * m * k],
                k as isize,
                1,
                &b[i * k * n..(i + 1) * k * n],
                n as isize,
                1,
                &mut c[i * m * n..(i + 1) * m * n],
            );
        }
    }
    let c_labels: Vec<Label> = batch.iter().chain(&free_a).chain(&free_b).copied().collect();
    if c_labels == eq.output {
        return Ok(tensor_of(out_shape, c));
    }
    let c_shape: Vec<usize> = c_labels.iter().map(|&l| size(l)).collect();
    Ok(tensor_of(out_shape, arrange(&c, &c_shape, &c_labels, &eq.output, &size)))
}

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    if node.op != "Einsum" {
        return Ok(None);
    }
    let equation = node
        .attr("equation")
        .and_then(|a| a.as_str())
        .ok_or_else(|| KernelError::invalid("the 'equation' attribute is missing"))?
        .to_string();
    Ok(Some(Box::new(move |inp: Inputs| {
        let ins: Vec<&Tensor> = inp.iter().collect();
        let ranks: Vec<usize> = ins.iter().map(|t| t.rank()).collect();
        let eq = Equation::parse(&equation, &ranks).map_err(KernelError::invalid)?;
        let dtype = ins.first().map(|t| t.dtype).ok_or_else(|| KernelError::invalid("Einsum needs an operand"))?;
        for t in &ins {
            super::check_native(t)?;
            if t.dtype != dtype {
                return Err(KernelError::invalid(format!("operands have dtypes {dtype} and {}", t.dtype)));
            }
        }
        one(match dtype {
            DType::Float32 => einsum_typed::<f32>(&eq, &ins)?,
            DType::Float64 => einsum_typed::<f64>(&eq, &ins)?,
            DType::Int32 => einsum_typed::<i32>(&eq, &ins)?,
            DType::Int64 => einsum_typed::<i64>(&eq, &ins)?,
            d => return Err(KernelError::DType(d)),
        })
    })))
}

#[cfg(test)]
mod tests {
    use crate::kernels::tests_support::{node, run1};
    use autoclust_graph::{AttrValue, Tensor};

    fn einsum(eq: &str, ins: &[Tensor]) -> Result<Tensor, String> {
        let n = node(
            "Einsum",
            &[("equation", AttrValue::S(eq.as_bytes().to_vec())), ("N", AttrValue::I(ins.len() as i64))],
        );
        run1(&n, ins).map_err(|e| e.to_string())
    }
    fn t(shape: &[usize], v: Vec<f32>) -> Tensor {
        Tensor::from_f32(shape.to_vec(), v).unwrap()
    }
    fn iota(shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        t(shape, (0..n).map(|i| i as f32).collect())
    }

    /// Against a direct sum over every label (the definition).
    #[test]
    fn matches_the_definition() {
        // "bqhd,bkhd->bhqk": Keras attention scores.
        let (b, q, k, h, d) = (2, 3, 4, 2, 5);
        let x = iota(&[b, q, h, d]);
        let y = t(&[b, k, h, d], (0..b * k * h * d).map(|i| (i % 7) as f32 - 3.0).collect());
        let got = einsum("bqhd,bkhd->bhqk", &[x.clone(), y.clone()]).unwrap();
        assert_eq!(got.shape, vec![b, h, q, k]);
        let (xs, ys) = (x.as_f32().unwrap(), y.as_f32().unwrap());
        let mut want = Vec::new();
        for bi in 0..b {
            for hi in 0..h {
                for qi in 0..q {
                    for ki in 0..k {
                        let mut s = 0.0;
                        for di in 0..d {
                            s += xs[((bi * q + qi) * h + hi) * d + di] * ys[((bi * k + ki) * h + hi) * d + di];
                        }
                        want.push(s);
                    }
                }
            }
        }
        assert_eq!(got.as_f32().unwrap(), want.as_slice());
    }

    #[test]
    fn one_operand_transposes_and_sums() {
        let x = iota(&[2, 3]);
        assert_eq!(einsum("ij->ji", std::slice::from_ref(&x)).unwrap().as_f32().unwrap(), &[0., 3., 1., 4., 2., 5.]);
        assert_eq!(einsum("ij->i", std::slice::from_ref(&x)).unwrap().as_f32().unwrap(), &[3., 12.]);
        let s = einsum("ij->", &[x]).unwrap();
        assert!(s.shape.is_empty());
        assert_eq!(s.as_f32().unwrap(), &[15.]);
    }

    #[test]
    fn broadcast_ellipsis_outer_product_and_summed_free_labels() {
        // [2,1,2,3] x [4,3,2] -> [2,4,2,2] with the size-1 ellipsis axis broadcast.
        let a = iota(&[2, 1, 2, 3]);
        let b = t(&[4, 3, 2], (0..24).map(|i| (i % 5) as f32).collect());
        let c = einsum("...ij,...jk->...ik", &[a.clone(), b.clone()]).unwrap();
        assert_eq!(c.shape, vec![2, 4, 2, 2]);
        let (av, bv, cv) = (a.as_f32().unwrap(), b.as_f32().unwrap(), c.as_f32().unwrap());
        let want = |p: usize, q: usize, i: usize, k: usize| {
            (0..3).map(|j| av[(p * 2 + i) * 3 + j] * bv[(q * 3 + j) * 2 + k]).sum::<f32>()
        };
        let at = |p: usize, q: usize, i: usize, k: usize| ((p * 4 + q) * 2 + i) * 2 + k;
        for (p, q, i, k) in [(1, 3, 1, 0), (0, 2, 0, 1), (1, 0, 1, 1)] {
            assert_eq!(cv[at(p, q, i, k)], want(p, q, i, k));
        }
        // Outer product and a label summed inside one operand.
        let u = t(&[2], vec![1., 2.]);
        let v = t(&[3], vec![1., 10., 100.]);
        assert_eq!(
            einsum("i,j->ij", &[u.clone(), v.clone()]).unwrap().as_f32().unwrap(),
            &[1., 10., 100., 2., 20., 200.]
        );
        let m = iota(&[2, 3]);
        assert_eq!(einsum("ij,k->k", &[m, u]).unwrap().as_f32().unwrap(), &[15., 30.]);
    }

    #[test]
    fn errors_name_the_problem() {
        let e = einsum("ij,jk->ik", &[iota(&[2, 3]), iota(&[4, 5])]).unwrap_err();
        assert!(e.contains("'j' has size 3"), "{e}");
        let e = einsum("ii->i", &[iota(&[2, 2])]).unwrap_err();
        assert!(e.contains("diagonal"), "{e}");
    }
}
