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
//! A label repeated within an operand is first reduced to that operand's diagonal (one
//! strided copy: the label's stride is the sum of its axes' strides); repeated in the output,
//! the result over distinct labels is spread over the diagonal of a zero tensor.
//!
//! One implementation for compiled clusters (the compiler's `KernelOp::Einsum`) and the
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
    let strides = crate::layout::strides_of(shape);
    let stride_of = |l: Label| match labels.iter().position(|x| *x == l) {
        Some(a) if shape[a] != 1 => strides[a],
        _ => 0,
    };
    let out_dims: Vec<usize> = order.iter().map(|&l| size(l)).collect();
    let out_strides: Vec<usize> = order.iter().map(|&l| stride_of(l)).collect();
    let summed: Vec<usize> = (0..labels.len()).filter(|&a| !order.contains(&labels[a])).collect();
    let sum_dims: Vec<usize> = summed.iter().map(|&a| shape[a]).collect();
    let sum_strides: Vec<usize> = summed.iter().map(|&a| strides[a]).collect();
    if summed.is_empty() {
        let st: Vec<isize> = out_strides.iter().map(|&s| s as isize).collect();
        return crate::layout::strided_copy(src, &out_dims, &st, 0);
    }
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
                crate::layout::next_index(&mut sidx, &sum_dims);
            }
            out.push(v);
        }
        crate::layout::next_index(&mut idx, &out_dims);
    }
    out
}

fn einsum_typed<T: EinsumElem>(
    eq: &Equation,
    ins: &[&[T]],
    shapes: &[&[usize]],
) -> Result<(Vec<usize>, Vec<T>), String> {
    if eq.has_diagonals() {
        return with_diagonals(eq, ins, shapes);
    }
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
    // Each operand is read in place when its free and contracted labels each walk memory as
    // one strided axis (any transpose of them is then just a pair of strides the GEMM's
    // packing follows); otherwise it is first rearranged to [batch, free, contracted].
    let view = |i: usize, groups: [&[Label]; 2], order: &[Label]| {
        let (x, shape, labels): (&[T], &[usize], &[Label]) = (ins[i], shapes[i], &eq.inputs[i]);
        let summed = labels.iter().any(|l| !order.contains(l));
        let strides = crate::layout::strides_of(shape);
        let g0 = one_axis(groups[0], labels, shape, &strides, &size);
        let g1 = one_axis(groups[1], labels, shape, &strides, &size);
        match (summed, g0, g1) {
            (false, Some(g0), Some(g1)) => {
                let bs = batch.iter().map(|&l| label_stride(l, labels, shape, &strides)).collect();
                Operand { data: std::borrow::Cow::Borrowed(x), batch_strides: bs, axes: [g0, g1] }
            }
            _ => {
                let dense = arrange(x, shape, labels, order, &size);
                let dims: Vec<usize> = order.iter().map(|&l| size(l)).collect();
                let st = crate::layout::strides_of(&dims);
                let nbat = batch.len();
                let bs = (0..nbat).map(|i| if dims[i] == 1 { 0 } else { st[i] as isize }).collect();
                let (p, q) = (prod(groups[0]), prod(groups[1]));
                // Dense [batch, p, q]: the first group strides by q, the second by 1.
                Operand { data: std::borrow::Cow::Owned(dense), batch_strides: bs, axes: [(p, q as isize), (q, 1)] }
            }
        }
    };
    let a = view(0, [&free_a, &contracted], &order_a);
    let b = view(1, [&contracted, &free_b], &order_b);
    let (rsa, csa) = (a.axes[0].1, a.axes[1].1);
    let (rsb, csb) = (b.axes[0].1, b.axes[1].1);
    // C written straight into the output's layout when free_a and free_b each are one
    // strided axis of it; otherwise into [batch, free_a, free_b], rearranged after.
    let out_strides = crate::layout::strides_of(&out_shape);
    let c_direct = match (
        one_axis(&free_a, &eq.output, &out_shape, &out_strides, &size),
        one_axis(&free_b, &eq.output, &out_shape, &out_strides, &size),
    ) {
        (Some(ra), Some(rb)) => Some((ra.1, rb.1)),
        _ => None,
    };
    let c_labels: Vec<Label> = batch.iter().chain(&free_a).chain(&free_b).copied().collect();
    let c_shape: Vec<usize> = c_labels.iter().map(|&l| size(l)).collect();
    let (c_strides, rsc, csc): (Vec<isize>, isize, isize) = match c_direct {
        Some((rsc, csc)) => {
            let bs = batch.iter().map(|&l| label_stride(l, &eq.output, &out_shape, &out_strides)).collect();
            (bs, rsc, csc)
        }
        None => {
            let st = crate::layout::strides_of(&c_shape);
            ((0..batch.len()).map(|i| st[i] as isize).collect(), n as isize, 1)
        }
    };
    let mut c = vec![T::default(); nb * m * n];
    if m > 0 && n > 0 && k > 0 {
        let batch_dims: Vec<usize> = batch.iter().map(|&l| size(l)).collect();
        let mut offsets = Vec::with_capacity(nb);
        let mut idx = vec![0usize; batch.len()];
        for _ in 0..nb {
            let at = |st: &[isize]| idx.iter().zip(st).map(|(&i, &s)| i as isize * s).sum::<isize>();
            offsets.push((at(&a.batch_strides), at(&b.batch_strides), at(&c_strides)));
            crate::layout::next_index(&mut idx, &batch_dims);
        }
        batched_gemm(m, k, n, &a.data, (rsa, csa), &b.data, (rsb, csb), &mut c, (rsc, csc), &offsets);
    }
    if c_direct.is_some() || c_labels == eq.output {
        return Ok((out_shape, c));
    }
    let v = arrange(&c, &c_shape, &c_labels, &eq.output, &size);
    Ok((out_shape, v))
}

/// [`einsum_typed`] of an equation with repeated labels: each operand's diagonals taken, the
/// equation evaluated over distinct labels, its result spread over the output's diagonals.
fn with_diagonals<T: EinsumElem>(
    eq: &Equation,
    ins: &[&[T]],
    shapes: &[&[usize]],
) -> Result<(Vec<usize>, Vec<T>), String> {
    use autoclust_graph::einsum::distinct;
    let dims: Vec<Vec<Option<i64>>> = shapes.iter().map(|s| s.iter().map(|&d| Some(d as i64)).collect()).collect();
    let dim_refs: Vec<&[Option<i64>]> = dims.iter().map(Vec::as_slice).collect();
    // Checks that each repeated label has one size.
    let sizes = eq.sizes(&dim_refs)?;
    let size =
        |l: Label| -> usize { sizes.iter().find(|(x, _)| *x == l).and_then(|(_, d)| *d).map_or(1, |d| d as usize) };
    let mut data: Vec<Vec<T>> = Vec::with_capacity(ins.len());
    let mut inner_shapes: Vec<Vec<usize>> = Vec::with_capacity(ins.len());
    let mut inner_inputs = Vec::with_capacity(ins.len());
    for ((x, shape), labels) in ins.iter().zip(shapes).zip(&eq.inputs) {
        let once = distinct(labels);
        let strides = crate::layout::strides_of(shape);
        // A label's walk along the diagonal steps every axis it names at once.
        let st: Vec<isize> = once
            .iter()
            .map(|l| labels.iter().zip(&strides).filter(|(x, _)| *x == l).map(|(_, &s)| s as isize).sum())
            .collect();
        let d: Vec<usize> = once.iter().map(|l| labels.iter().position(|x| x == l).map_or(1, |a| shape[a])).collect();
        data.push(if once.len() < labels.len() { crate::layout::strided_copy(x, &d, &st, 0) } else { x.to_vec() });
        inner_shapes.push(d);
        inner_inputs.push(once);
    }
    let out_once = distinct(&eq.output);
    let inner = Equation { inputs: inner_inputs, output: out_once.clone() };
    let refs: Vec<&[T]> = data.iter().map(Vec::as_slice).collect();
    let shape_refs: Vec<&[usize]> = inner_shapes.iter().map(Vec::as_slice).collect();
    let (y_shape, y) = einsum_typed(&inner, &refs, &shape_refs)?;
    if out_once.len() == eq.output.len() {
        return Ok((y_shape, y));
    }
    let out_shape: Vec<usize> = eq.output.iter().map(|&l| size(l)).collect();
    let out_strides = crate::layout::strides_of(&out_shape);
    let spread: Vec<usize> = out_once
        .iter()
        .map(|l| eq.output.iter().zip(&out_strides).filter(|(x, _)| *x == l).map(|(_, &s)| s).sum())
        .collect();
    let mut out = vec![T::default(); out_shape.iter().product()];
    let mut idx = vec![0usize; y_shape.len()];
    for &v in &y {
        out[idx.iter().zip(&spread).map(|(i, s)| i * s).sum::<usize>()] = v;
        crate::layout::next_index(&mut idx, &y_shape);
    }
    Ok((out_shape, out))
}

/// One GEMM operand: its data (in place, or rearranged) and how to walk it.
struct Operand<'a, T: Clone> {
    data: std::borrow::Cow<'a, [T]>,
    /// Element stride of each batch label (0 where it is broadcast).
    batch_strides: Vec<isize>,
    /// `(size, stride)` of the operand's two matrix axes (rows, columns).
    axes: [(usize, isize); 2],
}

/// The stride of label `l` in an operand (0 when it is absent or broadcast from size 1).
fn label_stride(l: Label, labels: &[Label], shape: &[usize], strides: &[usize]) -> isize {
    match labels.iter().position(|x| *x == l) {
        Some(a) if shape[a] != 1 => strides[a] as isize,
        _ => 0,
    }
}

/// `group` (labels in that order) as one strided axis `(size, stride)` of an operand with
/// `labels`, `shape` and `strides`, if walking the group's labels in order walks memory
/// with one stride (labels of size 1 do not matter); None otherwise, or when a label is
/// broadcast (absent, or size 1 in the operand but larger in the equation).
fn one_axis(
    group: &[Label],
    labels: &[Label],
    shape: &[usize],
    strides: &[usize],
    size: &dyn Fn(Label) -> usize,
) -> Option<(usize, isize)> {
    let mut acc: Option<(usize, isize)> = None;
    for &l in group {
        let n = size(l);
        if n == 1 {
            continue;
        }
        let a = labels.iter().position(|x| *x == l)?;
        if shape[a] != n {
            return None;
        }
        let s = strides[a] as isize;
        acc = Some(match acc {
            None => (n, s),
            Some((p, t)) if t == s * n as isize => (p * n, s),
            Some(_) => return None,
        });
    }
    Some(acc.unwrap_or((1, 1)))
}

/// One `m×k · k×n` product per batch element, at `offsets` (into A, B and C) with the given
/// (row, column) strides. Many small products are spread over the team one product per
/// part; a few large ones are each split by [`crate::gemm::gemm_strided`] itself.
#[allow(clippy::too_many_arguments)]
fn batched_gemm<T: EinsumElem>(
    m: usize,
    k: usize,
    n: usize,
    a: &[T],
    (rsa, csa): (isize, isize),
    b: &[T],
    (rsb, csb): (isize, isize),
    c: &mut [T],
    (rsc, csc): (isize, isize),
    offsets: &[(isize, isize, isize)],
) {
    #[derive(Clone, Copy)]
    struct Ptrs<T>(*const T, *const T, *mut T);
    // SAFETY: the parts below write disjoint elements of C and only read A and B.
    unsafe impl<T> Send for Ptrs<T> {}
    unsafe impl<T> Sync for Ptrs<T> {}
    impl<T> Ptrs<T> {
        /// The pointers, taken through the whole (Sync) struct: a closure that named a
        /// field would capture that raw pointer alone.
        fn get(self) -> (*const T, *const T, *mut T) {
            (self.0, self.1, self.2)
        }
    }
    let p = Ptrs(a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
    let threads = rayon::current_num_threads();
    let macs = m * k * n;
    let one = |i: usize, threads: usize| {
        let (pa, pb, pc) = p.get();
        let (oa, ob, oc) = offsets[i];
        // SAFETY: the offsets and strides come from the operands' own shapes, so every index
        // stays inside `a`, `b` and `c`; distinct batch elements write distinct C elements.
        unsafe {
            crate::gemm::gemm_strided(
                m,
                k,
                n,
                pa.offset(oa),
                rsa,
                csa,
                pb.offset(ob),
                rsb,
                csb,
                pc.offset(oc),
                rsc,
                csc,
                threads,
            )
        }
    };
    let nb = offsets.len();
    if threads > 1 && nb > 1 && macs < crate::gemm::PARALLEL_MACS && macs * nb >= crate::gemm::PARALLEL_MACS {
        let parts = threads.min(nb);
        crate::team::run(parts, &|part| {
            for i in (part * nb / parts)..((part + 1) * nb / parts) {
                one(i, 1);
            }
        });
    } else {
        for i in 0..nb {
            one(i, threads);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::next_index;

    /// The definition: a sum over every assignment of every label.
    fn naive(eq: &Equation, ins: &[&[f64]], shapes: &[&[usize]]) -> Vec<f64> {
        let dims: Vec<Vec<Option<i64>>> = shapes.iter().map(|s| s.iter().map(|&d| Some(d as i64)).collect()).collect();
        let refs: Vec<&[Option<i64>]> = dims.iter().map(Vec::as_slice).collect();
        let sizes = eq.sizes(&refs).unwrap();
        let labels: Vec<Label> = sizes.iter().map(|(l, _)| *l).collect();
        let size: Vec<usize> = sizes.iter().map(|(_, d)| d.unwrap_or(1) as usize).collect();
        let at = |l: &Label, idx: &[usize]| idx[labels.iter().position(|x| x == l).unwrap()];
        let out_dims: Vec<usize> =
            eq.output.iter().map(|l| size[labels.iter().position(|x| x == l).unwrap()]).collect();
        let mut out = vec![0.0; out_dims.iter().product()];
        let total: usize = size.iter().product();
        let mut idx = vec![0usize; labels.len()];
        for _ in 0..total {
            let mut p = 1.0;
            for (t, (x, shape)) in ins.iter().zip(shapes).enumerate() {
                let off =
                    eq.inputs[t].iter().zip(*shape).fold(0, |o, (l, &d)| o * d + if d == 1 { 0 } else { at(l, &idx) });
                p *= x[off];
            }
            let o = eq.output.iter().zip(&out_dims).fold(0, |o, (l, &d)| o * d + at(l, &idx));
            out[o] += p;
            next_index(&mut idx, &size);
        }
        out
    }

    /// Equations whose operands are read in place (transposed operands, a transposed or
    /// interleaved output, broadcast batch axes) or need rearranging (summed labels, an
    /// operand whose contracted labels are in the other order), against the definition.
    #[test]
    fn strided_and_rearranged_products_match_the_definition() {
        let cases: &[(&str, &[&[usize]])] = &[
            ("bqhd,bkhd->bhqk", &[&[2, 5, 3, 4], &[2, 6, 3, 4]]),
            ("bhqk,bkhd->bqhd", &[&[2, 3, 5, 6], &[2, 6, 3, 4]]),
            ("ij,jk->ki", &[&[7, 5], &[5, 9]]),
            ("ji,kj->ik", &[&[5, 7], &[9, 5]]),
            ("abc,acd->bda", &[&[3, 4, 5], &[3, 5, 2]]),
            ("hd,dh->", &[&[3, 4], &[4, 3]]),
            ("xhd,hdy->xy", &[&[2, 3, 4], &[3, 4, 5]]),
            ("xhd,dhy->xy", &[&[2, 3, 4], &[4, 3, 5]]),
            ("ijz,jk->ik", &[&[4, 3, 2], &[3, 5]]),
            ("...ij,...jk->...ik", &[&[2, 1, 3, 4], &[5, 4, 2]]),
            ("bij,bjk->bik", &[&[40, 20, 30], &[40, 30, 25]]),
        ];
        for (text, shapes) in cases {
            let ranks: Vec<usize> = shapes.iter().map(|s| s.len()).collect();
            let eq = Equation::parse(text, &ranks).unwrap();
            let data: Vec<Vec<f64>> = shapes
                .iter()
                .enumerate()
                .map(|(t, s)| (0..s.iter().product::<usize>()).map(|i| ((i * 31 + t * 7) % 13) as f64 - 6.0).collect())
                .collect();
            let ins: Vec<&[f64]> = data.iter().map(Vec::as_slice).collect();
            let (_, got) = einsum_typed(&eq, &ins, shapes).unwrap();
            assert_eq!(got, naive(&eq, &ins, shapes), "{text}");
        }
    }
}
