//! Array kernels that move elements without arithmetic: `Transpose`,
//! `ConcatV2`/`Concat`, `Pack`/`Unpack`, `Split`, `Slice`, `StridedSlice`
//! (all five masks) and `StridedSliceGrad`, `Tile`, `GatherV2`/`Gather`, `Fill`, `ZerosLike`,
//! `OnesLike`, `BroadcastTo`, `Range`, `OneHot`, `UnsortedSegment{Sum,Prod,Max,Min}`,
//! `Unique`, `InvertPermutation`, `DynamicStitch`; `GatherV2` with `batch_dims`.
//! Out-of-range indices are errors, never reads past a buffer.

use autoclust_graph::{Node, Tensor, TensorData};
use autoclust_numeric::layout::next_index;

use super::by_position;
use super::elementwise::Num;
use super::{
    arity, attr_bool_or, attr_int_or, budget, dispatch_all, dispatch_num, int_scalar, int_values, norm_axis, one,
    shape_values, strides, take_or, tensor_of, Elem, Inputs, Outputs, PureFn,
};
use crate::error::{KResult, KernelError};

/// `t` with its dimensions permuted: output dim `i` is input dim `perm[i]`.
pub(crate) fn transpose_typed<T: Elem>(t: &Tensor, perm: &[usize]) -> Tensor {
    let in_strides = strides(&t.shape);
    let out_shape: Vec<usize> = perm.iter().map(|&p| t.shape[p]).collect();
    let st: Vec<isize> = perm.iter().map(|&p| in_strides[p] as isize).collect();
    let v = autoclust_numeric::layout::strided_copy(T::slice(t), &out_shape, &st, 0);
    tensor_of(out_shape, v)
}

fn transpose(t: &Tensor, perm: &[i64]) -> KResult<Tensor> {
    if perm.len() != t.rank() {
        return Err(KernelError::invalid(format!(
            "transpose expects a permutation of {} dims, got {perm:?}",
            t.rank()
        )));
    }
    let mut seen = vec![false; perm.len()];
    let mut p = Vec::with_capacity(perm.len());
    for &d in perm {
        let i = norm_axis(d, t.rank(), "permutation entry")?;
        if std::mem::replace(&mut seen[i], true) {
            return Err(KernelError::invalid(format!("{perm:?} is not a permutation")));
        }
        p.push(i);
    }
    if p.iter().enumerate().all(|(i, &x)| i == x) {
        return Ok(t.clone());
    }
    fn go<T: Elem>(t: &Tensor, p: &[usize]) -> KResult<Tensor> {
        Ok(transpose_typed::<T>(t, p))
    }
    dispatch_all!(t.dtype, go(t, &p))
}

/// Copies the box `begin + k*stride` (k < sizes) out of `t`.
fn strided_copy<T: Elem>(t: &Tensor, begin: &[i64], stride: &[i64], sizes: &[usize]) -> Vec<T> {
    let st = strides(&t.shape);
    if sizes.iter().product::<usize>() == 0 {
        return Vec::new();
    }
    let base: i64 = begin.iter().zip(&st).map(|(&b, &s)| b * s as i64).sum();
    let step: Vec<isize> = stride.iter().zip(&st).map(|(&k, &s)| (k * s as i64) as isize).collect();
    autoclust_numeric::layout::strided_copy(T::slice(t), sizes, &step, base as isize)
}

fn slice(t: &Tensor, begin: &[i64], size: &[i64]) -> KResult<Tensor> {
    if begin.len() != t.rank() || size.len() != t.rank() {
        return Err(KernelError::invalid(format!("Slice: begin and size must have length {}", t.rank())));
    }
    let mut sizes = Vec::with_capacity(t.rank());
    for (d, (&b, &s)) in begin.iter().zip(size).enumerate() {
        let dim = t.shape[d] as i64;
        let s = if s == -1 { dim - b } else { s };
        if b < 0 || s < 0 || b + s > dim {
            return Err(KernelError::invalid(format!(
                "Slice: begin {begin:?} and size {size:?} are out of bounds for shape {:?}",
                t.shape
            )));
        }
        sizes.push(s as usize);
    }
    let ones = vec![1; t.rank()];
    fn go<T: Elem>(t: &Tensor, b: &[i64], o: &[i64], s: &[usize]) -> KResult<Tensor> {
        Ok(tensor_of(s.to_vec(), strided_copy::<T>(t, b, o, s)))
    }
    if !by_position::typed(t.dtype) {
        // Strings, bytes, complex: the same copy of element positions (TensorList unstacking).
        let iota = tensor_of(t.shape.clone(), (0..t.num_elements() as i64).collect::<Vec<i64>>());
        let src: Vec<Option<usize>> =
            strided_copy::<i64>(&iota, begin, &ones, &sizes).into_iter().map(|p| Some(p as usize)).collect();
        return take_or(t, &src, None, sizes);
    }
    dispatch_all!(t.dtype, go(t, begin, &ones, &sizes))
}

/// XLA's `DynamicSlice`/`DynamicUpdateSlice` start indices: one per dimension of `shape`, each
/// clamped to `0..=dim − size` so the window of `size` lies inside (a size larger than its
/// dimension is an error, as XLA's shape check).
fn xla_clamped_starts(shape: &[usize], starts: &[i64], size: &[i64]) -> KResult<Vec<i64>> {
    if starts.len() != shape.len() || size.len() != shape.len() {
        return Err(KernelError::invalid(format!(
            "{} start indices and {} sizes for an operand of rank {}",
            starts.len(),
            size.len(),
            shape.len()
        )));
    }
    shape
        .iter()
        .zip(starts.iter().zip(size))
        .enumerate()
        .map(|(i, (&d, (&b, &s)))| {
            let d = d as i64;
            if s < 0 || s > d {
                return Err(KernelError::invalid(format!("size {s} of dimension {i} does not fit its {d} elements")));
            }
            Ok(b.clamp(0, d - s))
        })
        .collect()
}

/// StridedSlice masks.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SliceMasks {
    pub begin: i64,
    pub end: i64,
    pub ellipsis: i64,
    pub new_axis: i64,
    pub shrink: i64,
}

impl SliceMasks {
    /// The masks of a `StridedSlice`/`StridedSliceGrad` node (0 when absent).
    pub(crate) fn of(node: &Node) -> KResult<SliceMasks> {
        Ok(SliceMasks {
            begin: attr_int_or(node, "begin_mask", 0)?,
            end: attr_int_or(node, "end_mask", 0)?,
            ellipsis: attr_int_or(node, "ellipsis_mask", 0)?,
            new_axis: attr_int_or(node, "new_axis_mask", 0)?,
            shrink: attr_int_or(node, "shrink_axis_mask", 0)?,
        })
    }
}

/// The dense box and final shape of a strided slice: `(begin, stride, sizes, final_shape)`.
#[allow(clippy::type_complexity)]
pub(crate) fn strided_slice_spec(
    shape: &[usize],
    begin: &[i64],
    end: &[i64],
    stride: &[i64],
    m: SliceMasks,
) -> KResult<(Vec<i64>, Vec<i64>, Vec<usize>, Vec<usize>)> {
    let n = begin.len();
    if end.len() != n || stride.len() != n {
        return Err(KernelError::invalid("StridedSlice: begin, end and strides must have the same length"));
    }
    let rank = shape.len();
    let bit = |mask: i64, i: usize| (mask >> i) & 1 == 1;
    // Sparse → dense: each dense dim gets (sparse index or None for a full dim).
    let mut dense: Vec<Option<usize>> = Vec::with_capacity(rank);
    // Final shape entries: Some(dense dim) or None (a new axis of size 1).
    let mut final_dims: Vec<Option<usize>> = Vec::new();
    let mut saw_ellipsis = false;
    for i in 0..n {
        if bit(m.ellipsis, i) && !saw_ellipsis {
            saw_ellipsis = true;
            let after_real = (i + 1..n).filter(|&j| !bit(m.new_axis, j)).count();
            let full = rank.saturating_sub(dense.len() + after_real);
            for _ in 0..full {
                final_dims.push(Some(dense.len()));
                dense.push(None);
            }
        } else if bit(m.new_axis, i) {
            final_dims.push(None);
        } else {
            if dense.len() >= rank {
                return Err(KernelError::invalid(format!("StridedSlice: index {i} is out of range for rank {rank}")));
            }
            final_dims.push(Some(dense.len()));
            dense.push(Some(i));
        }
    }
    while dense.len() < rank {
        final_dims.push(Some(dense.len()));
        dense.push(None);
    }
    let mut b_out = Vec::with_capacity(rank);
    let mut s_out = Vec::with_capacity(rank);
    let mut sizes = Vec::with_capacity(rank);
    let mut shrunk = vec![false; rank];
    for (d, spec) in dense.iter().enumerate() {
        let dim = shape[d] as i64;
        let Some(i) = *spec else {
            b_out.push(0);
            s_out.push(1);
            sizes.push(shape[d]);
            continue;
        };
        let s = stride[i];
        if s == 0 {
            return Err(KernelError::invalid("StridedSlice: stride must be non-zero"));
        }
        if bit(m.shrink, i) {
            let x = if begin[i] < 0 { begin[i] + dim } else { begin[i] };
            if x < 0 || x >= dim {
                return Err(KernelError::invalid(format!(
                    "StridedSlice: slice index {} of dimension {d} out of bounds (size {dim})",
                    begin[i]
                )));
            }
            b_out.push(x);
            s_out.push(1);
            sizes.push(1);
            shrunk[d] = true;
            continue;
        }
        let canon = |x: i64, masked: bool, is_begin: bool| -> i64 {
            if masked {
                return match (s > 0, is_begin) {
                    (true, true) => 0,
                    (true, false) => dim,
                    (false, true) => dim - 1,
                    (false, false) => -1,
                };
            }
            let x = if x < 0 { x + dim } else { x };
            if s > 0 {
                x.clamp(0, dim)
            } else {
                x.clamp(-1, dim - 1)
            }
        };
        let b = canon(begin[i], bit(m.begin, i), true);
        let e = canon(end[i], bit(m.end, i), false);
        let size = if s > 0 {
            if e > b {
                (e - b + s - 1) / s
            } else {
                0
            }
        } else if b > e {
            (b - e + (-s) - 1) / (-s)
        } else {
            0
        };
        b_out.push(if size == 0 { 0 } else { b });
        s_out.push(s);
        sizes.push(size as usize);
    }
    let final_shape = final_dims
        .iter()
        .filter_map(|f| match f {
            None => Some(1),
            Some(d) if shrunk[*d] => None,
            Some(d) => Some(sizes[*d]),
        })
        .collect();
    Ok((b_out, s_out, sizes, final_shape))
}

fn strided_slice(t: &Tensor, begin: &[i64], end: &[i64], stride: &[i64], m: SliceMasks) -> KResult<Tensor> {
    // Strings (`serialized[0]` before parsing one example) move by their positions.
    if is_untyped(t) {
        return by_positions(t, |pos| strided_slice(pos, begin, end, stride, m));
    }
    let (b, s, sizes, final_shape) = strided_slice_spec(&t.shape, begin, end, stride, m)?;
    fn go<T: Elem>(t: &Tensor, b: &[i64], s: &[i64], sizes: &[usize], fs: Vec<usize>) -> KResult<Tensor> {
        Ok(tensor_of(fs, strided_copy::<T>(t, b, s, sizes)))
    }
    dispatch_all!(t.dtype, go(t, &b, &s, &sizes, final_shape))
}

/// `StridedSliceGrad`: a zero tensor of `shape` with `dy` written into the
/// region `StridedSlice(shape, begin, end, strides)` selects.
/// The flat positions of the elements of a `shape` tensor that a strided slice selects, in
/// the slice's order, and the slice's final shape.
pub(crate) fn slice_positions(
    shape: &[usize],
    begin: &[i64],
    end: &[i64],
    stride: &[i64],
    m: SliceMasks,
) -> KResult<(Vec<usize>, Vec<usize>)> {
    let n = budget(autoclust_graph::DType::Int64, shape)?;
    let iota = tensor_of(shape.to_vec(), (0..n as i64).collect::<Vec<i64>>());
    let t = strided_slice(&iota, begin, end, stride, m)?;
    Ok((t.as_i64().unwrap_or(&[]).iter().map(|&p| p as usize).collect(), t.shape.clone()))
}

/// `dst` with its elements at `pos` (a slice of final shape `slice`) replaced by `value`
/// broadcast to that shape: `StridedSliceAssign`'s semantics, TensorFlow's error when the
/// value does not broadcast.
pub(crate) fn assign_slice(dst: &Tensor, pos: &[usize], slice: &[usize], value: &Tensor) -> KResult<Tensor> {
    if value.dtype != dst.dtype {
        return Err(KernelError::invalid(format!("the value is {} but the tensor {}", value.dtype, dst.dtype)));
    }
    let debug = super::shape_ops::debug_shape;
    if super::elementwise::broadcast_shape(&value.shape, slice).ok().as_deref() != Some(slice) {
        return Err(KernelError::invalid(format!(
            "Cannot broadcast input shape {} into final shape {}",
            debug(&value.shape),
            debug(slice)
        )));
    }
    let st = super::elementwise::bcast_strides(&value.shape, slice);
    let mut from = Vec::with_capacity(pos.len());
    let mut idx = vec![0usize; slice.len()];
    for _ in 0..pos.len() {
        from.push(idx.iter().zip(&st).map(|(i, s)| i * s).sum::<usize>());
        for d in (0..slice.len()).rev() {
            idx[d] += 1;
            if idx[d] < slice[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    fn write<T: Elem>(dst: &Tensor, pos: &[usize], from: &[usize], value: &Tensor) -> KResult<Tensor> {
        let mut out = T::slice(dst).to_vec();
        let v = T::slice(value);
        for (&p, &f) in pos.iter().zip(from) {
            out[p] = v[f];
        }
        Ok(tensor_of(dst.shape.clone(), out))
    }
    if dst.dtype == autoclust_graph::DType::String {
        let (mut out, v) = (strings_of(dst), strings_of(value));
        for (&p, &f) in pos.iter().zip(&from) {
            out[p] = v[f].clone();
        }
        return Tensor::from_strings(dst.shape.clone(), out).map_err(|e| KernelError::invalid(e.to_string()));
    }
    dispatch_all!(dst.dtype, write(dst, pos, &from, value))
}

fn strings_of(t: &Tensor) -> Vec<Vec<u8>> {
    match &t.data {
        autoclust_graph::TensorData::Str(v) => v.to_vec(),
        _ => Vec::new(),
    }
}

fn strided_slice_grad(
    shape: &[usize],
    begin: &[i64],
    end: &[i64],
    stride: &[i64],
    m: SliceMasks,
    dy: &Tensor,
) -> KResult<Tensor> {
    let (b, s, sizes, final_shape) = strided_slice_spec(shape, begin, end, stride, m)?;
    if dy.shape != final_shape {
        return Err(KernelError::invalid(format!(
            "shape of dy was {} instead of {}",
            super::shape_ops::debug_shape(&dy.shape),
            super::shape_ops::debug_shape(&final_shape)
        )));
    }
    // dy's rows (its innermost dimension) scattered one at a time: copied whole when the
    // innermost stride is 1, element by element at that stride otherwise.
    fn go<T: Elem>(shape: &[usize], b: &[i64], s: &[i64], sizes: &[usize], dy: &Tensor) -> KResult<Tensor> {
        let n: usize = shape.iter().product();
        let mut v = vec![T::zero(); n];
        let src = T::slice(dy);
        let st = strides(shape);
        let Some((&inner, outer)) = sizes.split_last() else {
            // A scalar: the one element.
            v.iter_mut().zip(src).for_each(|(o, &x)| *o = x);
            return Ok(tensor_of(shape.to_vec(), v));
        };
        if inner == 0 || src.is_empty() {
            return Ok(tensor_of(shape.to_vec(), v));
        }
        let r = outer.len();
        let step = s[r] * st[r] as i64;
        let mut idx = vec![0usize; r];
        for row in src.chunks_exact(inner) {
            let outer_offset: i64 = (0..r).map(|d| (b[d] + idx[d] as i64 * s[d]) * st[d] as i64).sum();
            let base = outer_offset + b[r] * st[r] as i64;
            if step == 1 {
                v[base as usize..][..inner].copy_from_slice(row);
            } else {
                for (k, &x) in row.iter().enumerate() {
                    v[(base + k as i64 * step) as usize] = x;
                }
            }
            next_index(&mut idx, outer);
        }
        Ok(tensor_of(shape.to_vec(), v))
    }
    dispatch_all!(dy.dtype, go(shape, &b, &s, &sizes, dy))
}

pub(crate) fn concat(values: &[Tensor], axis: i64) -> KResult<Tensor> {
    let first = values.first().ok_or_else(|| KernelError::invalid("Concat needs at least one value"))?;
    let rank = first.rank();
    if rank == 0 {
        return Err(KernelError::invalid("Concat of scalars is not allowed; use Pack"));
    }
    let ax = norm_axis(axis, rank, "concat axis")?;
    let mut out_shape = first.shape.clone();
    out_shape[ax] = 0;
    for v in values {
        if v.dtype != first.dtype
            || v.rank() != rank
            || v.shape.iter().enumerate().any(|(i, &d)| i != ax && d != first.shape[i])
        {
            return Err(KernelError::invalid(format!(
                "ConcatOp: dimensions of inputs should match: shape[0] = {:?} vs. {:?}",
                first.shape, v.shape
            )));
        }
        out_shape[ax] = out_shape[ax].saturating_add(v.shape[ax]);
    }
    // Many copies of one input can make an output far past the budget.
    autoclust_graph::limits::tensor_elements(first.dtype, &out_shape)?;
    fn go<T: Elem>(values: &[Tensor], ax: usize, out_shape: Vec<usize>) -> KResult<Tensor> {
        let outer: usize = out_shape[..ax].iter().product();
        let inner: usize = out_shape[ax + 1..].iter().product();
        let mut v = Vec::with_capacity(out_shape.iter().product());
        for o in 0..outer {
            for t in values {
                let chunk = t.shape[ax] * inner;
                v.extend_from_slice(&T::slice(t)[o * chunk..(o + 1) * chunk]);
            }
        }
        Ok(tensor_of(out_shape, v))
    }
    if !by_position::typed(first.dtype) {
        // Strings, bytes, complex: concatenate element positions (TensorList stacking).
        let mut offset = 0i64;
        let iotas: Vec<Tensor> = values
            .iter()
            .map(|v| {
                let n = v.num_elements() as i64;
                offset += n;
                tensor_of(v.shape.clone(), (offset - n..offset).collect::<Vec<i64>>())
            })
            .collect();
        let pos = go::<i64>(&iotas, ax, out_shape.clone())?;
        let flat = by_position::flat_concat(&values.iter().collect::<Vec<_>>())?;
        let src: Vec<Option<usize>> = pos.as_i64().unwrap_or(&[]).iter().map(|&p| Some(p as usize)).collect();
        return take_or(&flat, &src, None, out_shape);
    }
    dispatch_all!(first.dtype, go(values, ax, out_shape))
}

pub(crate) fn pack(values: &[Tensor], axis: i64) -> KResult<Tensor> {
    let first = values.first().ok_or_else(|| KernelError::invalid("Pack needs at least one value"))?;
    let ax = norm_axis(axis, first.rank() + 1, "pack axis")?;
    let mut expanded = Vec::with_capacity(values.len());
    for v in values {
        if v.shape != first.shape || v.dtype != first.dtype {
            return Err(KernelError::invalid(format!(
                "Shapes of all inputs must match: values[0].shape = {:?} != {:?}",
                first.shape, v.shape
            )));
        }
        let mut t = v.clone();
        t.shape.insert(ax, 1);
        expanded.push(t);
    }
    concat(&expanded, ax as i64)
}

pub(crate) fn split(t: &Tensor, axis: i64, sizes: &[usize]) -> KResult<Outputs> {
    let ax = norm_axis(axis, t.rank(), "split axis")?;
    let mut out = Outputs::new();
    let mut start = 0usize;
    for &s in sizes {
        let mut begin = vec![0i64; t.rank()];
        begin[ax] = start as i64;
        let mut size: Vec<i64> = t.shape.iter().map(|&d| d as i64).collect();
        size[ax] = s as i64;
        out.push(slice(t, &begin, &size)?);
        start += s;
    }
    Ok(out)
}

fn tile(t: &Tensor, multiples: &[i64]) -> KResult<Tensor> {
    if multiples.len() != t.rank() || multiples.iter().any(|&m| m < 0) {
        return Err(KernelError::invalid(format!("Tile: multiples {multiples:?} do not fit shape {:?}", t.shape)));
    }
    let out_shape = t
        .shape
        .iter()
        .zip(multiples)
        .map(|(&d, &m)| d.checked_mul(m as usize))
        .collect::<Option<Vec<usize>>>()
        .ok_or_else(|| {
            KernelError::invalid(format!("Tile: multiples {multiples:?} of shape {:?} overflow", t.shape))
        })?;
    budget(t.dtype, &out_shape)?;
    // Output rows (the innermost dimension) one at a time: the source row repeated.
    fn go<T: Elem>(t: &Tensor, out_shape: Vec<usize>) -> KResult<Tensor> {
        let x = T::slice(t);
        let st = strides(&t.shape);
        let n: usize = out_shape.iter().product();
        let Some((&inner_out, outer)) = out_shape.split_last() else {
            return Ok(tensor_of(out_shape, x.to_vec()));
        };
        if n == 0 {
            return Ok(tensor_of(out_shape, Vec::<T>::new()));
        }
        let r = outer.len();
        let inner = t.shape[r];
        let mut v = Vec::with_capacity(n);
        let mut idx = vec![0usize; r];
        for _ in 0..n / inner_out {
            let base: usize = (0..r).map(|d| (idx[d] % t.shape[d]) * st[d]).sum();
            let row = &x[base..][..inner];
            for _ in 0..inner_out / inner {
                v.extend_from_slice(row);
            }
            next_index(&mut idx, outer);
        }
        Ok(tensor_of(out_shape, v))
    }
    dispatch_all!(t.dtype, go(t, out_shape))
}

/// `SplitV`'s sizes: at most one `-1`, filled in so the sizes add up to the dimension `n`.
fn split_sizes(sizes: &[i64], n: usize) -> KResult<Vec<usize>> {
    let known: i64 = sizes.iter().filter(|&&s| s >= 0).sum();
    let unknown = sizes.iter().filter(|&&s| s < 0).count();
    let bad = || KernelError::invalid(format!("size_splits {sizes:?} do not add up to the split dimension {n}"));
    if unknown > 1 || sizes.iter().any(|&s| s < -1) {
        return Err(bad());
    }
    let rest = n as i64 - known;
    if (unknown == 0 && rest != 0) || rest < 0 {
        return Err(bad());
    }
    Ok(sizes.iter().map(|&s| if s < 0 { rest as usize } else { s as usize }).collect())
}

/// `Cumsum`/`Cumprod` along `axis`, `exclusive` (start from the identity) and/or `reverse`
/// (the compiler's loop, `autoclust_numeric::reduce::cumulative`, with this dtype's
/// arithmetic).
fn cumulative<T: Num>(t: &Tensor, axis: usize, prod: bool, exclusive: bool, reverse: bool) -> KResult<Tensor> {
    if t.rank() == 0 {
        return Ok(t.clone());
    }
    let dims = (t.shape[..axis].iter().product(), t.shape[axis], t.shape[axis + 1..].iter().product());
    let x = T::slice(t);
    let v = if prod {
        autoclust_numeric::reduce::cumulative(x, dims, T::from_i64(1), |a: T, b| a.mul(b), exclusive, reverse)
    } else {
        autoclust_numeric::reduce::cumulative(x, dims, T::zero(), |a: T, b| a.add(b), exclusive, reverse)
    };
    Ok(tensor_of(t.shape.clone(), v))
}

/// `CumulativeLogsumexp`: the running `log(Σ exp)` along `axis`, each step
/// `max + log1p(exp(min − max))` (−∞ the identity, as TensorFlow's scan).
fn cumulative_logsumexp<T: super::elementwise::Float>(
    t: &Tensor,
    axis: usize,
    exclusive: bool,
    reverse: bool,
) -> KResult<Tensor> {
    if t.rank() == 0 {
        return Ok(t.clone());
    }
    let dims = (t.shape[..axis].iter().product(), t.shape[axis], t.shape[axis + 1..].iter().product());
    let minus_inf = T::from_f64(f64::NEG_INFINITY);
    let add = move |a: T, b: T| {
        let (lo, hi) = if a < b { (a, b) } else { (b, a) };
        if lo == minus_inf {
            return hi;
        }
        hi.add(lo.sub(hi).exp().ln_1p())
    };
    let v = autoclust_numeric::reduce::cumulative(T::slice(t), dims, minus_inf, add, exclusive, reverse);
    Ok(tensor_of(t.shape.clone(), v))
}

/// `LinSpace(start, stop, num)`: `start + i·step` in the element type, `step =
/// (stop − start)/(num − 1)`, the last element exactly `stop` (TensorFlow's kernel).
fn lin_space<T: super::elementwise::Float>(start: &Tensor, stop: &Tensor, num: usize) -> KResult<Tensor> {
    for (t, what) in [(start, "start"), (stop, "stop")] {
        if t.rank() != 0 || t.dtype != T::DTYPE {
            return Err(KernelError::invalid(format!(
                "{what} must be a {} scalar, not {} of shape {}",
                T::DTYPE,
                t.dtype,
                super::shape_ops::debug_shape(&t.shape)
            )));
        }
    }
    budget(T::DTYPE, &[num])?;
    let (a, b) = (T::slice(start)[0], T::slice(stop)[0]);
    let v: Vec<T> = if num == 1 {
        vec![a]
    } else {
        let step = b.sub(a).div(T::from_i64(num as i64 - 1));
        (0..num).map(|i| if i == num - 1 { b } else { a.add(step.mul(T::from_i64(i as i64))) }).collect()
    };
    Ok(tensor_of(vec![num], v))
}

/// `Where(condition)`: the coordinates of the true (non-zero) elements, int64 `[count, rank]`,
/// in row-major order.
fn where_true(t: &Tensor) -> KResult<Tensor> {
    let truth: Vec<bool> = match t.as_bool() {
        Some(b) => b.to_vec(),
        None => t
            .to_f64_vec()
            .ok_or_else(|| KernelError::invalid(format!("Where: unsupported dtype {}", t.dtype)))?
            .iter()
            .map(|&x| x != 0.0)
            .collect(),
    };
    let st = strides(&t.shape);
    let mut coords = Vec::new();
    for (flat, _) in truth.iter().enumerate().filter(|(_, &b)| b) {
        let mut rem = flat;
        for &s in &st {
            coords.push((rem / s.max(1)) as i64);
            rem %= s.max(1);
        }
    }
    let count = truth.iter().filter(|&&b| b).count();
    Tensor::from_i64(vec![count, t.rank()], coords).map_err(|e| KernelError::invalid(e.to_string()))
}

/// How `Pad`/`PadV2` (constant) and `MirrorPad` fill the border.
#[derive(Clone, Copy, PartialEq)]
enum PadMode {
    Constant,
    /// Mirror without the edge element (`[1,2,3]` → `3,2,|1,2,3|,2,1`).
    Reflect,
    /// Mirror with the edge element (`[1,2,3]` → `2,1,|1,2,3|,3,2`).
    Symmetric,
}

/// `t` grown by `paddings` (`[rank, 2]`, row `d` = before/after of dimension `d`).
fn pad(t: &Tensor, paddings: &[i64], mode: PadMode, fill: Option<&Tensor>) -> KResult<Tensor> {
    let r = t.rank();
    if paddings.len() != 2 * r || paddings.iter().any(|&p| p < 0) {
        return Err(KernelError::invalid(format!(
            "paddings {paddings:?} do not fit shape {:?} (need [{r}, 2], >= 0)",
            t.shape
        )));
    }
    for d in 0..r {
        let (a, b, n) = (paddings[2 * d] as usize, paddings[2 * d + 1] as usize, t.shape[d]);
        let limit = match mode {
            PadMode::Constant => usize::MAX,
            PadMode::Reflect => n.saturating_sub(1),
            PadMode::Symmetric => n,
        };
        if a > limit || b > limit {
            return Err(KernelError::invalid(format!(
                "paddings must be no greater than the dimension size ({n}, minus one for REFLECT): [{a}, {b}]"
            )));
        }
    }
    if let Some(f) = fill {
        if f.rank() != 0 || f.dtype != t.dtype {
            return Err(KernelError::invalid("constant_values must be a scalar of the input's dtype"));
        }
    }
    let out_shape = (0..r)
        .map(|d| t.shape[d].checked_add(paddings[2 * d] as usize)?.checked_add(paddings[2 * d + 1] as usize))
        .collect::<Option<Vec<usize>>>()
        .ok_or_else(|| KernelError::invalid(format!("paddings {paddings:?} of shape {:?} overflow", t.shape)))?;
    budget(t.dtype, &out_shape)?;
    fn go<T: Elem>(
        t: &Tensor,
        paddings: &[i64],
        mode: PadMode,
        fill: Option<&Tensor>,
        out_shape: Vec<usize>,
    ) -> KResult<Tensor> {
        let x = T::slice(t);
        let c = fill.map(|f| T::slice(f)[0]).unwrap_or_else(T::zero);
        let st = strides(&t.shape);
        let n: usize = out_shape.iter().product();
        let r = out_shape.len();
        if matches!(mode, PadMode::Constant) && r > 0 {
            // The fill, then the input's rows copied whole into place (the general walk
            // below computes a source offset per output element: 6% of a MobileNetV2
            // training step).
            let mut v = vec![c; n];
            let ost = strides(&out_shape);
            let inner = t.shape[r - 1];
            if inner > 0 && !x.is_empty() {
                let origin: usize = (0..r).map(|d| paddings[2 * d] as usize * ost[d]).sum();
                let mut idx = vec![0usize; r - 1];
                for row in x.chunks_exact(inner) {
                    let at = origin + idx.iter().zip(&ost).map(|(&i, &s)| i * s).sum::<usize>();
                    v[at..at + inner].copy_from_slice(row);
                    next_index(&mut idx, &t.shape[..r - 1]);
                }
            }
            return Ok(tensor_of(out_shape, v));
        }
        let mut v = Vec::with_capacity(n);
        let mut idx = vec![0usize; r];
        for _ in 0..n {
            let mut off = Some(0usize);
            for d in 0..r {
                let (before, len) = (paddings[2 * d], t.shape[d] as i64);
                let i = idx[d] as i64 - before;
                let src = if (0..len).contains(&i) {
                    Some(i)
                } else {
                    match mode {
                        PadMode::Constant => None,
                        PadMode::Reflect => Some(if i < 0 { -i } else { 2 * (len - 1) - i }),
                        PadMode::Symmetric => Some(if i < 0 { -i - 1 } else { 2 * len - 1 - i }),
                    }
                };
                off = match (off, src) {
                    (Some(o), Some(s)) => Some(o + s as usize * st[d]),
                    _ => None,
                };
            }
            v.push(off.map(|o| x[o]).unwrap_or(c));
            next_index(&mut idx, &out_shape);
        }
        Ok(tensor_of(out_shape, v))
    }
    dispatch_all!(t.dtype, go(t, paddings, mode, fill, out_shape))
}

/// `MirrorPadGrad`: the gradient of a `MirrorPad`, each padded element's gradient added to
/// the element it mirrored. Folded one dimension at a time (the border slices added onto
/// the rows they copied, then the border cut), as TensorFlow's kernel does.
fn mirror_pad_grad(g: &Tensor, paddings: &Tensor, symmetric: bool) -> KResult<Tensor> {
    let p = int_values(paddings, "paddings")?;
    let r = g.rank();
    if paddings.shape != [r, 2] {
        return Err(KernelError::invalid(format!(
            "The first dimension of paddings must be the rank of inputs{:?} {:?}",
            paddings.shape, g.shape
        )));
    }
    let mut out_shape = Vec::with_capacity(r);
    for d in 0..r {
        let (a, b) = (p[2 * d], p[2 * d + 1]);
        let n = g.shape[d] as i64 - a.max(0) - b.max(0);
        let ok = if symmetric { a <= n && b <= n } else { a < n && b < n };
        if a < 0 || b < 0 || n < 0 || !ok {
            return Err(KernelError::invalid(if symmetric {
                format!("paddings must be no greater than the output dimension size: {a}, {b} greater than {n}")
            } else {
                format!("paddings must be less than the output dimension size: {a}, {b} not less than {n}")
            }));
        }
        out_shape.push(n as usize);
    }
    fn go<T: Num>(g: &Tensor, p: &[i64], symmetric: bool, out_shape: &[usize]) -> KResult<Tensor> {
        let mut shape = g.shape.clone();
        let mut v = T::slice(g).to_vec();
        for d in 0..shape.len() {
            let (a, b) = (p[2 * d] as usize, p[2 * d + 1] as usize);
            let (outer, len, inner) =
                (shape[..d].iter().product::<usize>(), shape[d], shape[d + 1..].iter().product::<usize>());
            let n = out_shape[d];
            let skip = usize::from(!symmetric);
            let mut next = Vec::with_capacity(outer * n * inner);
            for o in 0..outer {
                let block = &v[o * len * inner..(o + 1) * len * inner];
                let mut rows: Vec<T> = block[a * inner..(a + n) * inner].to_vec();
                // Row `i < a` of the border mirrors row `a − i − 1 + skip` of the centre; row
                // `a + n + j` mirrors row `n − 1 − j − skip`.
                for i in 0..a {
                    let dst = a - i - 1 + skip;
                    for k in 0..inner {
                        rows[dst * inner + k] = rows[dst * inner + k].add(block[i * inner + k]);
                    }
                }
                for j in 0..b {
                    let dst = n - 1 - j - skip;
                    for k in 0..inner {
                        rows[dst * inner + k] = rows[dst * inner + k].add(block[(a + n + j) * inner + k]);
                    }
                }
                next.extend(rows);
            }
            v = next;
            shape[d] = n;
        }
        Ok(tensor_of(shape, v))
    }
    budget(g.dtype, &out_shape)?;
    dispatch_num!(g.dtype, go(g, &p, symmetric, &out_shape))
}

/// `GatherV2(params, indices, axis)` with `batch_dims = 0`.
pub(crate) fn gather(params: &Tensor, indices: &Tensor, axis: usize) -> KResult<Tensor> {
    gather_batched(params, indices, axis as i64, 0)
}

/// The multi-index of flat position `i` in `shape`, as TensorFlow prints it (`[1,0]`).
fn index_string(shape: &[usize], mut i: usize) -> String {
    let mut parts = vec![0usize; shape.len()];
    for (d, &n) in shape.iter().enumerate().rev() {
        if n > 0 {
            parts[d] = i % n;
            i /= n;
        }
    }
    let p: Vec<String> = parts.iter().map(usize::to_string).collect();
    p.join(",")
}

/// `GatherV2(params, indices, axis)` with `batch_dims`: the first `batch_dims`
/// dimensions of params and indices are matched one to one; the output is
/// `params.shape[:axis] + indices.shape[batch_dims:] + params.shape[axis+1:]`.
pub(crate) fn gather_batched(params: &Tensor, indices: &Tensor, axis: i64, batch_dims: i64) -> KResult<Tensor> {
    if is_untyped(params) {
        return by_positions(params, |pos| gather_batched(pos, indices, axis, batch_dims));
    }
    super::check_native(params)?;
    if params.rank() == 0 {
        return Err(KernelError::invalid("params must be at least 1 dimensional"));
    }
    let (prank, irank) = (params.rank() as i64, indices.rank() as i64);
    let bd = if batch_dims < 0 { batch_dims + irank } else { batch_dims };
    if bd < 0 || bd > irank {
        return Err(KernelError::invalid(format!(
            "Expected batch_dims in the range [{}, {irank}], but got {batch_dims}",
            -irank
        )));
    }
    if bd >= prank {
        return Err(KernelError::invalid(format!("batch_dims ({bd}) must be less than rank(params) ({prank}).")));
    }
    if axis < -prank || axis >= prank {
        return Err(KernelError::invalid(format!("Expected axis in the range [{}, {prank}), but got {axis}", -prank)));
    }
    let axis = if axis < 0 { axis + prank } else { axis } as usize;
    let bd = bd as usize;
    if axis < bd {
        return Err(KernelError::invalid(format!("batch_dims ({bd}) must be less than or equal to axis ({axis}).")));
    }
    for d in 0..bd {
        if params.shape[d] != indices.shape[d] {
            return Err(KernelError::invalid(format!(
                "params.shape[{d}]: {} should be equal to indices.shape[{d}]: {}",
                params.shape[d], indices.shape[d]
            )));
        }
    }
    let idx = int_values(indices, "indices")?;
    let dim = params.shape[axis];
    for (i, &x) in idx.iter().enumerate() {
        if x < 0 || x as usize >= dim {
            return Err(KernelError::invalid(format!(
                "indices[{}] = {x} is not in [0, {dim})",
                index_string(&indices.shape, i)
            )));
        }
    }
    let mut out_shape = params.shape[..axis].to_vec();
    out_shape.extend(&indices.shape[bd..]);
    out_shape.extend(&params.shape[axis + 1..]);
    // Many indices into large rows: an output far larger than either input.
    autoclust_graph::limits::tensor_elements(params.dtype, &out_shape)?;
    struct Layout {
        batch: usize,
        outer: usize,
        dim: usize,
        inner: usize,
        per_batch: usize,
    }
    let l = Layout {
        batch: params.shape[..bd].iter().product(),
        outer: params.shape[bd..axis].iter().product(),
        dim,
        inner: params.shape[axis + 1..].iter().product(),
        per_batch: indices.shape[bd..].iter().product(),
    };
    fn go<T: Elem>(p: &Tensor, idx: &[i64], l: Layout, out_shape: Vec<usize>) -> KResult<Tensor> {
        let x = T::slice(p);
        let mut v = Vec::with_capacity(out_shape.iter().product());
        for b in 0..l.batch {
            let ids = &idx[b * l.per_batch..(b + 1) * l.per_batch];
            for o in 0..l.outer {
                let base = (b * l.outer + o) * l.dim;
                for &i in ids {
                    let start = (base + i as usize) * l.inner;
                    v.extend_from_slice(&x[start..start + l.inner]);
                }
            }
        }
        Ok(tensor_of(out_shape, v))
    }
    dispatch_all!(params.dtype, go(params, &idx, l, out_shape))
}

fn fill(dims: &[usize], value: &Tensor) -> KResult<Tensor> {
    if value.num_elements() != 1 || value.rank() != 0 {
        return Err(KernelError::invalid("Fill: value must be a scalar"));
    }
    let n = budget(value.dtype, dims)?;
    fn go<T: Elem>(dims: &[usize], n: usize, value: &Tensor) -> KResult<Tensor> {
        Ok(tensor_of(dims.to_vec(), vec![T::slice(value)[0]; n]))
    }
    dispatch_all!(value.dtype, go(dims, n, value))
}

/// `tf.linalg.band_part`: keeps element (i, j) of each innermost matrix when
/// `i − j ≤ num_lower` and `j − i ≤ num_upper` (a negative bound keeps that whole triangle).
fn band_part<T: Elem>(t: &Tensor, lower: i64, upper: i64) -> KResult<Tensor> {
    let r = t.rank();
    if r < 2 {
        return Err(KernelError::invalid(format!("input must be at least 2-dim, received shape: {:?}", t.shape)));
    }
    let (m, n) = (t.shape[r - 2] as i64, t.shape[r - 1] as i64);
    if lower > m || upper > n {
        return Err(KernelError::invalid(format!(
            "num_lower must be negative or less or equal to number of rows ({m}) got: {lower}; num_upper must be negative or less or equal to number of columns ({n}) got: {upper}"
        )));
    }
    // Row by row: row i keeps columns i − lower ..= i + upper (a negative bound keeps the
    // whole side), zeros around them.
    let (m, n) = (m as usize, n as usize);
    let src = T::slice(t);
    let mut v = vec![T::zero(); src.len()];
    for (r, (out, row)) in v.chunks_exact_mut(n.max(1)).zip(src.chunks_exact(n.max(1))).enumerate() {
        let i = (r % m.max(1)) as i64;
        let from = if lower < 0 { 0 } else { (i - lower).max(0) as usize };
        let to = if upper < 0 { n } else { ((i + upper + 1).max(0) as usize).min(n) };
        if from < to {
            out[from..to].copy_from_slice(&row[from..to]);
        }
    }
    Ok(tensor_of(t.shape.clone(), v))
}

fn filled_like(t: &Tensor, one_value: bool) -> KResult<Tensor> {
    if let (Some(list), false) = (t.as_list(), one_value) {
        // TensorFlow's zeros_like of a TensorList (in RNN gradients): the same slots, each
        // set element replaced by zeros of its shape.
        let items = list
            .items()
            .iter()
            .map(|x| x.as_ref().map(|e| filled_like(e, false)).transpose())
            .collect::<KResult<_>>()?;
        return Ok(Tensor::from_list(list.with_items(items)));
    }
    if let (Some(optional), false) = (t.as_optional(), one_value) {
        // TensorFlow's zeros_like of an Optional (a v2 cond's intermediates, wrapped for its
        // gradient): none stays none, a value becomes zeros of each component.
        let components = optional
            .as_ref()
            .map(|c| c.iter().map(|e| filled_like(e, false)).collect::<KResult<Vec<_>>>())
            .transpose()?;
        return Ok(Tensor::from_optional(components));
    }
    fn go<T: Elem>(t: &Tensor, one_value: bool) -> KResult<Tensor> {
        Ok(tensor_of(t.shape.clone(), vec![if one_value { T::one() } else { T::zero() }; t.num_elements()]))
    }
    dispatch_all!(t.dtype, go(t, one_value))
}

fn range<T: Num>(start: &Tensor, limit: &Tensor, delta: &Tensor) -> KResult<Tensor> {
    for (t, what) in [(start, "start"), (limit, "limit"), (delta, "delta")] {
        if t.rank() > 1 || t.num_elements() != 1 {
            return Err(KernelError::invalid(format!(
                "{what} must be a scalar, not shape {}",
                super::shape_ops::debug_shape(&t.shape)
            )));
        }
        if t.dtype != T::DTYPE {
            return Err(KernelError::invalid(format!("{what} must have dtype {}, got {}", T::DTYPE, t.dtype)));
        }
    }
    let (s0, l0, d0) = (T::slice(start)[0], T::slice(limit)[0], T::slice(delta)[0]);
    let fmt = |x: T| if T::IS_INT { x.to_i64().to_string() } else { x.to_f64().to_string() };
    if d0 == T::zero() {
        return Err(KernelError::invalid(format!("Requires delta != 0: {}", fmt(d0))));
    }
    if d0 > T::zero() && s0 > l0 {
        return Err(KernelError::invalid(format!("Requires start <= limit when delta > 0: {}/{}", fmt(s0), fmt(l0))));
    }
    if d0 < T::zero() && s0 < l0 {
        return Err(KernelError::invalid(format!("Requires start >= limit when delta < 0: {}/{}", fmt(s0), fmt(l0))));
    }
    // TensorFlow's size: integer ceiling division for ints, `ceil(|(limit - start) / delta|)`
    // in the element type for floats.
    let n = if T::IS_INT {
        let (s, l, d) = (i128::from(s0.to_i64()), i128::from(l0.to_i64()), i128::from(d0.to_i64()));
        ((l - s).abs() + d.abs() - 1) / d.abs()
    } else {
        l0.sub(s0).div(d0).abs().to_f64().ceil() as i128
    };
    let n = u64::try_from(n).map_err(|_| KernelError::invalid("Requires the range size to fit in int64"))?;
    let n = autoclust_graph::limits::check_count(T::DTYPE, n)?;
    let mut v = Vec::with_capacity(n);
    let mut x = s0;
    for _ in 0..n {
        v.push(x);
        x = x.add(d0);
    }
    Ok(tensor_of(vec![n], v))
}

fn one_hot<T: Elem>(indices: &Tensor, depth: usize, on: &Tensor, off: &Tensor, axis: i64) -> KResult<Tensor> {
    let idx = int_values(indices, "indices")?;
    let ax = if axis == -1 { indices.rank() } else { norm_axis(axis, indices.rank() + 1, "axis")? };
    let (on, off) = (T::slice(on)[0], T::slice(off)[0]);
    let mut shape = indices.shape.clone();
    shape.insert(ax, depth);
    budget(T::DTYPE, &shape)?;
    let outer: usize = indices.shape[..ax].iter().product();
    let inner: usize = indices.shape[ax..].iter().product();
    let mut v = vec![off; outer * depth * inner];
    for o in 0..outer {
        for i in 0..inner {
            let x = idx[o * inner + i];
            if x >= 0 && (x as usize) < depth {
                v[(o * depth + x as usize) * inner + i] = on;
            }
        }
    }
    Ok(tensor_of(shape, v))
}

/// How an `UnsortedSegment*` op combines the rows of one segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SegmentReduce {
    Sum,
    Prod,
    Max,
    Min,
}

/// The identity TensorFlow fills empty segments with: 0, 1, `lowest()`, `highest()`
/// (the finite extremes for floats, as Eigen's `NumTraits`).
fn segment_identity<T: Num>(r: SegmentReduce) -> T {
    let float_max = if T::DTYPE == autoclust_graph::DType::Float32 { f64::from(f32::MAX) } else { f64::MAX };
    match r {
        SegmentReduce::Sum => T::zero(),
        SegmentReduce::Prod => T::one(),
        SegmentReduce::Max if T::IS_INT => T::lowest(),
        SegmentReduce::Min if T::IS_INT => T::highest(),
        SegmentReduce::Max => T::from_f64(-float_max),
        SegmentReduce::Min => T::from_f64(float_max),
    }
}

fn unsorted_segment<T: Num>(r: SegmentReduce, data: &Tensor, ids: &Tensor, num: usize) -> KResult<Tensor> {
    let seg = int_values(ids, "segment_ids")?;
    if data.shape.len() < ids.rank() || data.shape[..ids.rank()] != ids.shape[..] {
        return Err(KernelError::invalid(format!(
            "data.shape = {} does not start with segment_ids.shape = {}",
            super::shape_ops::debug_shape(&data.shape),
            super::shape_ops::debug_shape(&ids.shape)
        )));
    }
    for (i, &s) in seg.iter().enumerate() {
        if s >= 0 && s as usize >= num {
            return Err(KernelError::invalid(format!(
                "segment_ids[{}] = {s} is out of range [0, {num})",
                index_string(&ids.shape, i)
            )));
        }
    }
    let mut out_shape = vec![num];
    out_shape.extend(&data.shape[ids.rank()..]);
    // `num_segments` is an input: checked before the output is allocated.
    autoclust_graph::limits::tensor_elements(data.dtype, &out_shape)?;
    let inner: usize = data.shape[ids.rank()..].iter().product();
    let x = T::slice(data);
    let mut v = vec![segment_identity::<T>(r); num * inner];
    for (i, &s) in seg.iter().enumerate() {
        // Negative ids drop their rows, as in TensorFlow.
        if s < 0 {
            continue;
        }
        let dst = &mut v[s as usize * inner..(s as usize + 1) * inner];
        for (d, &y) in dst.iter_mut().zip(&x[i * inner..(i + 1) * inner]) {
            *d = match r {
                SegmentReduce::Sum => d.add(y),
                SegmentReduce::Prod => d.mul(y),
                // TensorFlow's segment reducers keep the accumulator only when the new
                // value is below (above) it: a NaN is replaced by any later value, and a
                // later NaN replaces the accumulator (`acc = x < acc ? acc : x`).
                SegmentReduce::Max => {
                    if y < *d {
                        *d
                    } else {
                        y
                    }
                }
                SegmentReduce::Min => {
                    if y > *d {
                        *d
                    } else {
                        y
                    }
                }
            };
        }
    }
    let mut shape = vec![num];
    shape.extend(&data.shape[ids.rank()..]);
    Ok(tensor_of(shape, v))
}

/// `Segment{Sum,Prod,Max,Min,Mean}`: like the unsorted ops over `last id + 1` segments, but
/// the ids must be a non-decreasing vector of non-negative values (TensorFlow's checks),
/// and empty segments are 0 for Max, Min and Mean (Sum 0, Prod 1 as before).
fn sorted_segment<T: Num>(r: SegmentReduce, mean: bool, data: &Tensor, ids: &Tensor) -> KResult<Tensor> {
    if ids.rank() != 1 {
        return Err(KernelError::invalid(format!(
            "segment_ids should be a vector, not shape {}",
            super::shape_ops::debug_shape(&ids.shape)
        )));
    }
    if data.rank() == 0 || data.shape[0] != ids.shape[0] {
        return Err(KernelError::invalid(format!(
            "segment_ids should be the same size as dimension 0 of input: {} vs {}",
            ids.shape[0],
            super::shape_ops::debug_shape(&data.shape)
        )));
    }
    let seg = int_values(ids, "segment_ids")?;
    for (i, w) in seg.windows(2).enumerate() {
        if w[1] < w[0] {
            return Err(KernelError::invalid(format!(
                "segment ids are not increasing: segment_ids[{}] = {} after {}",
                i + 1,
                w[1],
                w[0]
            )));
        }
    }
    if let Some(&s) = seg.first().filter(|&&s| s < 0) {
        return Err(KernelError::invalid(format!("segment ids must be >= 0, got {s}")));
    }
    let num = seg.last().map_or(0, |&l| l as usize + 1);
    let mut out = unsorted_segment::<T>(r, data, ids, num)?;
    let inner: usize = data.shape[1..].iter().product();
    let mut count = vec![0usize; num];
    for &s in &seg {
        count[s as usize] += 1;
    }
    let v = T::vec_mut(&mut out.data);
    for (k, &c) in count.iter().enumerate() {
        let row = &mut v[k * inner..(k + 1) * inner];
        if c == 0 && matches!(r, SegmentReduce::Max | SegmentReduce::Min) {
            row.iter_mut().for_each(|x| *x = T::zero());
        } else if mean && c > 0 {
            let n = T::from_i64(c as i64);
            row.iter_mut().for_each(|x| *x = x.div(n));
        }
    }
    Ok(out)
}

/// `TopKV2`: the `k` largest entries of each innermost row, largest first, ties by lower
/// index (TensorFlow's stable order; NaN counts as larger than every number), and their
/// indices as `index_type`.
///
/// Each element becomes one integer key that orders rows that way (the value's order-preserving
/// bits, complemented so that ascending is largest first, −0 and +0 equal, NaN above +∞ —
/// int64 values exactly), paired with its index, so every pair is distinct: the `k` first
/// pairs are selected in linear time and only they are sorted (a full sort of every row made a
/// top-1 of 10⁵ entries 40× slower than TensorFlow's, sweep 64).
fn top_k<T: Elem>(x: &Tensor, k: usize, index_type: autoclust_graph::DType) -> KResult<Outputs> {
    let Some(&n) = x.shape.last() else {
        return Err(KernelError::invalid("input must be at least 1-D"));
    };
    if k > n {
        return Err(KernelError::invalid(format!("input must have at least k columns. Had {n}, needed {k}")));
    }
    let rows = x.num_elements().checked_div(n).unwrap_or(0);
    let v = T::slice(x);
    // Largest first: the complement of an order-preserving map to u64.
    let of_float = |f: f64| -> u64 {
        if f.is_nan() {
            return 0;
        }
        let b = (if f == 0.0 { 0.0f64 } else { f }).to_bits();
        !(if b >> 63 == 1 { !b } else { b | (1 << 63) })
    };
    let exact = x.as_i64();
    let mut vals = Vec::with_capacity(rows * k);
    let mut idx: Vec<i64> = Vec::with_capacity(rows * k);
    let mut keyed: Vec<(u64, u32)> = Vec::with_capacity(n);
    for r in 0..rows {
        let at = r * n;
        keyed.clear();
        match exact {
            Some(e) => keyed.extend(e[at..at + n].iter().zip(0u32..).map(|(&x, i)| (!((x as u64) ^ (1 << 63)), i))),
            None => keyed.extend(v[at..at + n].iter().zip(0u32..).map(|(x, i)| (of_float(x.to_f64()), i))),
        }
        if k == 0 {
            continue;
        }
        if k < n {
            keyed.select_nth_unstable(k - 1);
        }
        let top = &mut keyed[..k];
        top.sort_unstable();
        for &(_, i) in top.iter() {
            vals.push(v[at + i as usize]);
            idx.push(i64::from(i));
        }
    }
    let mut shape = x.shape.clone();
    *shape.last_mut().expect("rank >= 1") = k;
    let indices = match index_type {
        autoclust_graph::DType::Int64 => tensor_of(shape.clone(), idx),
        autoclust_graph::DType::Int32 => {
            tensor_of(shape.clone(), idx.into_iter().map(|i| i as i32).collect::<Vec<_>>())
        }
        d => return Err(KernelError::DType(d)),
    };
    Ok(Outputs::from_vec(vec![tensor_of(shape, vals), indices]))
}

/// The text of a failed `Assert`, as TensorFlow 2.21 prints it: `[msg here] [1.5 -2 3...]
/// [[1.5 -2][3...]...] [3.5] [1 0]` for a string, a vector, a matrix, a scalar and bools
/// with `summarize = 3`.
fn assert_message(data: &[Tensor], summarize: usize) -> String {
    // TensorFlow's `AssertOp`: each datum's `SummarizeValue(summarize)` (print_v2 false, the
    // V1 `Print` op's summary) in brackets, joined by spaces.
    data.iter()
        .map(|t| {
            let v = super::string::summarize_value_v1(t, summarize.min(i64::MAX as usize) as i64);
            format!("[{}]", String::from_utf8_lossy(&v))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `ReverseV2`: `x` with the order of elements reversed along each axis in `axes`.
fn reverse<T: Elem>(x: &Tensor, axes: &[usize]) -> KResult<Tensor> {
    let v = T::slice(x);
    let st = super::strides(&x.shape);
    let mut out = Vec::with_capacity(v.len());
    let mut idx = vec![0usize; x.shape.len()];
    for _ in 0..v.len() {
        let src: usize =
            idx.iter().enumerate().map(|(d, &i)| if axes.contains(&d) { x.shape[d] - 1 - i } else { i } * st[d]).sum();
        out.push(v[src]);
        next_index(&mut idx, &x.shape);
    }
    Ok(tensor_of(x.shape.clone(), out))
}

/// The flat offset of each index tuple of `indices` (`[..., K]`) into the first K
/// dimensions of `shape`, checked as TensorFlow checks them; and the slice size after them.
fn nd_offsets(shape: &[usize], indices: &Tensor, what: &str) -> KResult<(Vec<usize>, usize, usize)> {
    let Some(&k) = indices.shape.last() else {
        return Err(KernelError::invalid("indices must be at least a vector"));
    };
    if k > shape.len() {
        return Err(KernelError::invalid(format!(
            "index innermost dimension length must be <= {what} rank; saw: {k} vs. {}",
            shape.len()
        )));
    }
    let idx = int_values(indices, "indices")?;
    let st = super::strides(shape);
    let slice: usize = shape[k..].iter().product();
    let n: usize = indices.shape[..indices.rank() - 1].iter().product();
    let mut offsets = Vec::with_capacity(n);
    for t in 0..n {
        let mut off = 0usize;
        for d in 0..k {
            let i = idx[t * k + d];
            if i < 0 || i as usize >= shape[d] {
                let tuple: Vec<String> = idx[t * k..(t + 1) * k].iter().map(|i| i.to_string()).collect();
                return Err(KernelError::invalid(format!(
                    "indices[{}] = [{}] does not index into {what} shape {}",
                    index_string(&indices.shape[..indices.rank() - 1], t),
                    tuple.join(", "),
                    super::shape_ops::debug_shape(shape)
                )));
            }
            off += i as usize * st[d];
        }
        offsets.push(off);
    }
    Ok((offsets, slice, k))
}

/// `GatherNd`: `params` sliced at each index tuple: shape `indices.shape[:-1] + params.shape[K:]`.
/// `GatherNd` of any native dtype (also `ResourceGatherNd`'s, on the variable's value).
pub(crate) fn gather_nd_any(params: &Tensor, indices: &Tensor) -> KResult<Tensor> {
    if is_untyped(params) {
        return by_positions(params, |pos| gather_nd::<i64>(pos, indices));
    }
    dispatch_all!(params.dtype, gather_nd(params, indices))
}

/// Whether `t` holds strings or raw bytes, which the typed kernels do not move.
fn is_untyped(t: &Tensor) -> bool {
    matches!(t.data, autoclust_graph::TensorData::Str(_) | autoclust_graph::TensorData::Raw(_))
}

/// An element-moving op on a dtype without a typed path (strings, raw-byte dtypes): the op
/// runs on the int64 positions of `t`'s elements, and the elements follow their positions.
fn by_positions(t: &Tensor, op: impl FnOnce(&Tensor) -> KResult<Tensor>) -> KResult<Tensor> {
    let n = t.num_elements();
    let pos = op(&tensor_of(t.shape.clone(), (0..n as i64).collect::<Vec<i64>>()))?;
    let src: Vec<Option<usize>> = pos.as_i64().unwrap_or(&[]).iter().map(|&p| Some(p as usize)).collect();
    super::take_or(t, &src, None, pos.shape.clone())
}

fn gather_nd<T: Elem>(params: &Tensor, indices: &Tensor) -> KResult<Tensor> {
    let (offsets, slice, k) = nd_offsets(&params.shape, indices, "params")?;
    let mut shape = indices.shape[..indices.rank() - 1].to_vec();
    shape.extend(&params.shape[k..]);
    autoclust_graph::limits::tensor_elements(params.dtype, &shape)?;
    let v = T::slice(params);
    let mut out = Vec::with_capacity(offsets.len() * slice);
    for &o in &offsets {
        out.extend_from_slice(&v[o..o + slice]);
    }
    Ok(tensor_of(shape, out))
}

/// `ScatterNd`: zeros of `shape` with each update slice added at its index tuple
/// (duplicates accumulate).
fn scatter_nd<T: Num>(indices: &Tensor, updates: &Tensor, shape: &[usize]) -> KResult<Tensor> {
    let (offsets, slice, _) = nd_offsets(shape, indices, "output")?;
    let u = T::slice(updates);
    if u.len() != offsets.len() * slice {
        return Err(KernelError::invalid(format!(
            "updates must have shape indices.shape[:-1] + shape[K:]; got updates {} for indices {}",
            super::shape_ops::debug_shape(&updates.shape),
            super::shape_ops::debug_shape(&indices.shape)
        )));
    }
    let mut out = vec![T::zero(); shape.iter().product()];
    for (t, &o) in offsets.iter().enumerate() {
        for j in 0..slice {
            out[o + j] = out[o + j].add(u[t * slice + j]);
        }
    }
    Ok(tensor_of(shape.to_vec(), out))
}

/// `ScatterNd` of bools: TensorFlow's sum of bools is their logical or (Eigen's
/// `scalar_sum_op<bool>`), so a repeated index is true if any of its updates is
/// (Keras 3's sparse Adagrad scatters a mask this way).
fn scatter_nd_bool(indices: &Tensor, updates: &Tensor, shape: &[usize]) -> KResult<Tensor> {
    let (offsets, slice, _) = nd_offsets(shape, indices, "output")?;
    let u = updates.as_bool().ok_or(KernelError::DType(updates.dtype))?;
    if u.len() != offsets.len() * slice {
        return Err(KernelError::invalid(format!(
            "updates must have shape indices.shape[:-1] + shape[K:]; got updates {} for indices {}",
            super::shape_ops::debug_shape(&updates.shape),
            super::shape_ops::debug_shape(&indices.shape)
        )));
    }
    let mut out = vec![false; shape.iter().product()];
    for (t, &o) in offsets.iter().enumerate() {
        for j in 0..slice {
            out[o + j] |= u[t * slice + j];
        }
    }
    Tensor::from_bool(shape.to_vec(), out).map_err(|e| KernelError::invalid(e.to_string()))
}

/// `Unique`: the distinct elements of a vector in order of first occurrence, and
/// for each element the position of its value in that list.
fn unique<T: Elem>(x: &Tensor, out_idx: autoclust_graph::DType) -> KResult<Outputs> {
    if x.rank() != 1 {
        return Err(KernelError::invalid(format!(
            "unique expects a 1D vector, got shape {}",
            super::shape_ops::debug_shape(&x.shape)
        )));
    }
    let v = T::slice(x);
    let mut ys: Vec<T> = Vec::new();
    let mut idx: Vec<i64> = Vec::with_capacity(v.len());
    // Keyed by the value's bits (floats: -0.0 folded into 0.0; a NaN never equals
    // anything, so each NaN is its own entry, as with TensorFlow's hash map).
    let mut seen: std::collections::HashMap<u64, i64> = std::collections::HashMap::with_capacity(v.len());
    for &e in v {
        let f = e.to_f64();
        let key = if T::DTYPE.is_float() {
            if f.is_nan() {
                idx.push(ys.len() as i64);
                ys.push(e);
                continue;
            }
            (if f == 0.0 { 0.0 } else { f }).to_bits()
        } else {
            e.to_i64() as u64
        };
        let next = ys.len() as i64;
        let k = *seen.entry(key).or_insert(next);
        if k == next {
            ys.push(e);
        }
        idx.push(k);
    }
    let n = ys.len();
    let mut out = Outputs::new();
    out.push(tensor_of(vec![n], ys));
    out.push(super::int_tensor(out_idx, vec![v.len()], idx)?);
    Ok(out)
}

/// `Roll`: each element moved `shift[i]` places along `axis[i]`, wrapping around (`shift`
/// and `axis` scalars or vectors of one length; an axis named twice moves by the sum). Any
/// dtype.
fn roll(t: &Tensor, shift: &Tensor, axis: &Tensor) -> KResult<Tensor> {
    if shift.rank() > 1 || axis.rank() > 1 {
        return Err(KernelError::invalid("shift and axis must be scalars or 1-D vectors"));
    }
    let (shifts, axes) = (int_values(shift, "shift")?, int_values(axis, "axis")?);
    if shifts.len() != axes.len() {
        return Err(KernelError::invalid(format!(
            "shift and axis must have the same size, got {} and {}",
            shifts.len(),
            axes.len()
        )));
    }
    let rank = t.rank();
    let mut total = vec![0i64; rank];
    for (&s, &a) in shifts.iter().zip(&axes) {
        let a = norm_axis(a, rank, "axis")
            .map_err(|_| KernelError::invalid(format!("axis {a} is out of range for a tensor of rank {rank}")))?;
        total[a] = total[a].wrapping_add(s);
    }
    // Output index j along an axis of size n reads input index (j - shift) mod n.
    let n = t.num_elements();
    let st = strides(&t.shape);
    let mut src = Vec::with_capacity(n);
    let mut idx = vec![0usize; rank];
    for _ in 0..n {
        let mut off = 0usize;
        for d in 0..rank {
            let size = t.shape[d] as i64;
            let from = (idx[d] as i64 - total[d]).rem_euclid(size.max(1));
            off += from as usize * st[d];
        }
        src.push(Some(off));
        next_index(&mut idx, &t.shape);
    }
    super::take_or(t, &src, None, t.shape.clone())
}

/// `InvertPermutation`: `y[x[i]] = i`.
fn invert_permutation(x: &Tensor) -> KResult<Tensor> {
    if x.rank() != 1 {
        return Err(KernelError::invalid(format!(
            "invert_permutation expects a 1D vector, got shape {}",
            super::shape_ops::debug_shape(&x.shape)
        )));
    }
    let v = int_values(x, "x")?;
    let n = v.len();
    let mut y = vec![-1i64; n];
    for (i, &d) in v.iter().enumerate() {
        if d < 0 || d as usize >= n {
            return Err(KernelError::invalid(format!("{d} is not between 0 and {n}")));
        }
        if y[d as usize] != -1 {
            return Err(KernelError::invalid(format!("{d} is duplicated in the input.")));
        }
        y[d as usize] = i as i64;
    }
    super::int_tensor(x.dtype, vec![n], y)
}

/// `DynamicStitch(indices[0..n], data[0..n])`: `merged[indices[m][i]] = data[m][i]`,
/// later pieces overwriting earlier ones; rows no index names are zero.
fn dynamic_stitch(inp: &Inputs) -> KResult<Tensor> {
    if inp.is_empty() || !inp.len().is_multiple_of(2) {
        return Err(KernelError::invalid("DynamicStitch needs as many data inputs as index inputs"));
    }
    let n = inp.len() / 2;
    let (indices, data) = inp.split_at(n);
    let dtype = data[0].dtype;
    let idx: Vec<Vec<i64>> = indices.iter().map(|t| int_values(t, "indices")).collect::<KResult<_>>()?;
    let (i0, d0) = (&indices[0], &data[0]);
    if d0.rank() < i0.rank() || d0.shape[..i0.rank()] != i0.shape[..] {
        return Err(KernelError::invalid(format!(
            "data[0].shape = {} does not start with indices[0].shape = {}",
            super::shape_ops::debug_shape(&d0.shape),
            super::shape_ops::debug_shape(&i0.shape)
        )));
    }
    let row_shape = &d0.shape[i0.rank()..];
    let mut max_index = -1i64;
    for m in 0..n {
        let (im, dm) = (&indices[m], &data[m]);
        if dm.dtype != dtype {
            return Err(KernelError::invalid(format!("data[{m}] has dtype {} but data[0] {dtype}", dm.dtype)));
        }
        let mut want = im.shape.clone();
        want.extend_from_slice(row_shape);
        if dm.shape != want {
            return Err(KernelError::invalid(format!(
                "data[{m}].shape = {} does not start with indices[{m}].shape = {}",
                super::shape_ops::debug_shape(&dm.shape),
                super::shape_ops::debug_shape(&im.shape)
            )));
        }
        for &x in &idx[m] {
            if x < 0 {
                return Err(KernelError::invalid(format!("indices[{m}] has a negative index {x}")));
            }
            max_index = max_index.max(x);
        }
    }
    let rows = (max_index + 1) as usize;
    let inner: usize = row_shape.iter().product();
    let mut shape = vec![rows];
    shape.extend_from_slice(row_shape);
    fn go<T: Elem>(data: &[Tensor], idx: &[Vec<i64>], rows: usize, inner: usize, shape: Vec<usize>) -> KResult<Tensor> {
        let mut v = vec![T::zero(); rows * inner];
        for (d, ids) in data.iter().zip(idx) {
            let x = T::slice(d);
            for (k, &i) in ids.iter().enumerate() {
                let i = i as usize;
                v[i * inner..(i + 1) * inner].copy_from_slice(&x[k * inner..(k + 1) * inner]);
            }
        }
        Ok(tensor_of(shape, v))
    }
    dispatch_all!(dtype, go(data, &idx, rows, inner, shape))
}

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let f: PureFn = match node.op.as_str() {
        "Transpose" => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            one(transpose(&inp[0], &int_values(&inp[1], "perm")?)?)
        }),
        "ConcatV2" => Box::new(|inp: Inputs| {
            let (axis, values) = inp.split_last().ok_or_else(|| KernelError::invalid("ConcatV2 needs inputs"))?;
            one(concat(values, int_scalar(axis, "axis")?)?)
        }),
        "Concat" => Box::new(|inp: Inputs| {
            let (axis, values) = inp.split_first().ok_or_else(|| KernelError::invalid("Concat needs inputs"))?;
            one(concat(values, int_scalar(axis, "axis")?)?)
        }),
        "Pack" => {
            let axis = attr_int_or(node, "axis", 0)?;
            Box::new(move |inp: Inputs| one(pack(&inp, axis)?))
        }
        "Unpack" => {
            let axis = attr_int_or(node, "axis", 0)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let t = &inp[0];
                let ax = norm_axis(axis, t.rank(), "unpack axis")?;
                let mut outs = split(t, ax as i64, &vec![1; t.shape[ax]])?;
                for o in outs.iter_mut() {
                    o.shape.remove(ax);
                }
                Ok(outs)
            })
        }
        "Split" => {
            let num = attr_int_or(node, "num_split", 1)?.max(1) as usize;
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                let t = &inp[1];
                let ax = norm_axis(int_scalar(&inp[0], "axis")?, t.rank(), "split axis")?;
                if !t.shape[ax].is_multiple_of(num) {
                    return Err(KernelError::invalid(format!(
                        "Number of ways to split should evenly divide the split dimension ({} vs {num})",
                        t.shape[ax]
                    )));
                }
                split(t, ax as i64, &vec![t.shape[ax] / num; num])
            })
        }
        "SplitV" => Box::new(|inp: Inputs| {
            arity(&inp, 3)?;
            let t = &inp[0];
            let ax = norm_axis(int_scalar(&inp[2], "axis")?, t.rank(), "split axis")?;
            let sizes = split_sizes(&int_values(&inp[1], "size_splits")?, t.shape[ax])?;
            split(t, ax as i64, &sizes)
        }),
        "MatrixBandPart" => Box::new(|inp: Inputs| {
            arity(&inp, 3)?;
            let lower = int_scalar(&inp[1], "num_lower")?;
            let upper = int_scalar(&inp[2], "num_upper")?;
            one(dispatch_all!(inp[0].dtype, band_part(&inp[0], lower, upper))?)
        }),
        "Bucketize" => {
            let boundaries: Vec<f32> = match node.attr("boundaries") {
                Some(autoclust_graph::AttrValue::List(autoclust_graph::ListValue::F(v))) => v.clone(),
                Some(autoclust_graph::AttrValue::List(autoclust_graph::ListValue::Empty)) => Vec::new(),
                _ => return Err(KernelError::Attr("boundaries".into())),
            };
            if boundaries.windows(2).any(|w| w[0] > w[1]) {
                return Err(KernelError::invalid("Expected sorted boundaries"));
            }
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let t = &inp[0];
                let v = t.to_f64_vec().ok_or(KernelError::DType(t.dtype))?;
                // The index of the first boundary above the value (std::upper_bound, whose
                // test is `value < boundary`: a NaN is below none, so it lands past the last
                // bucket, as in TensorFlow), the value against float boundaries.
                let idx: Vec<i32> = v
                    .iter()
                    .map(|&x| {
                        boundaries.partition_point(|&b| x.partial_cmp(&f64::from(b)) != Some(std::cmp::Ordering::Less))
                            as i32
                    })
                    .collect();
                one(tensor_of(t.shape.clone(), idx))
            })
        }
        "Cumsum" | "Cumprod" => {
            let prod = node.op == "Cumprod";
            let exclusive = node.attr("exclusive").and_then(|a| a.as_bool()).unwrap_or(false);
            let reverse = node.attr("reverse").and_then(|a| a.as_bool()).unwrap_or(false);
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                let t = &inp[0];
                let ax = norm_axis(int_scalar(&inp[1], "axis")?, t.rank().max(1), "cumulative axis")?;
                one(dispatch_num!(t.dtype, cumulative(t, ax, prod, exclusive, reverse))?)
            })
        }
        "Where" => Box::new(|inp: Inputs| {
            arity(&inp, 1)?;
            one(where_true(&inp[0])?)
        }),
        "XlaDynamicSlice" => Box::new(|inp: Inputs| {
            arity(&inp, 3)?;
            let size = int_values(&inp[2], "size_indices")?;
            let begin = xla_clamped_starts(&inp[0].shape, &int_values(&inp[1], "start_indices")?, &size)?;
            one(slice(&inp[0], &begin, &size)?)
        }),
        "XlaDynamicUpdateSlice" => Box::new(|inp: Inputs| {
            arity(&inp, 3)?;
            let (input, update) = (&inp[0], &inp[1]);
            if input.dtype != update.dtype {
                return Err(KernelError::invalid(format!(
                    "update is {} but the input is {}",
                    update.dtype, input.dtype
                )));
            }
            let size: Vec<i64> = update.shape.iter().map(|&d| d as i64).collect();
            let begin = xla_clamped_starts(&input.shape, &int_values(&inp[2], "indices")?, &size)?;
            let end: Vec<i64> = begin.iter().zip(&size).map(|(b, s)| b + s).collect();
            let (pos, slice) =
                slice_positions(&input.shape, &begin, &end, &vec![1; begin.len()], SliceMasks::default())?;
            one(assign_slice(input, &pos, &slice, update)?)
        }),
        "Slice" => Box::new(|inp: Inputs| {
            arity(&inp, 3)?;
            one(slice(&inp[0], &int_values(&inp[1], "begin")?, &int_values(&inp[2], "size")?)?)
        }),
        "StridedSlice" => {
            let m = SliceMasks::of(node)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 4)?;
                let (b, e, s) =
                    (int_values(&inp[1], "begin")?, int_values(&inp[2], "end")?, int_values(&inp[3], "strides")?);
                one(strided_slice(&inp[0], &b, &e, &s, m)?)
            })
        }
        "TensorStridedSliceUpdate" => {
            let m = SliceMasks::of(node)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 5)?;
                let (b, e, s) =
                    (int_values(&inp[1], "begin")?, int_values(&inp[2], "end")?, int_values(&inp[3], "strides")?);
                let (pos, slice) = slice_positions(&inp[0].shape, &b, &e, &s, m)?;
                one(assign_slice(&inp[0], &pos, &slice, &inp[4])?)
            })
        }
        "StridedSliceGrad" => {
            let m = SliceMasks::of(node)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 5)?;
                let shape = shape_values(&inp[0], "shape")?;
                budget(inp[4].dtype, &shape)?;
                let (b, e, s) =
                    (int_values(&inp[1], "begin")?, int_values(&inp[2], "end")?, int_values(&inp[3], "strides")?);
                one(strided_slice_grad(&shape, &b, &e, &s, m, &inp[4])?)
            })
        }
        "Pad" | "PadV2" | "MirrorPad" => {
            let mode = match node.op.as_str() {
                "MirrorPad" => match node.attr("mode").and_then(|a| a.as_str()) {
                    Some("REFLECT") => PadMode::Reflect,
                    Some("SYMMETRIC") => PadMode::Symmetric,
                    other => {
                        return Err(KernelError::invalid(format!(
                            "MirrorPad: mode {other:?} is not REFLECT or SYMMETRIC"
                        )))
                    }
                },
                _ => PadMode::Constant,
            };
            Box::new(move |inp: Inputs| {
                let fill = match inp.len() {
                    2 => None,
                    3 => Some(&inp[2]),
                    n => return Err(KernelError::Arity { expected: 2, got: n }),
                };
                one(pad(&inp[0], &int_values(&inp[1], "paddings")?, mode, fill)?)
            })
        }
        "MirrorPadGrad" => {
            let symmetric = match node.attr("mode").and_then(|a| a.as_str()) {
                Some("REFLECT") => false,
                Some("SYMMETRIC") => true,
                other => {
                    return Err(KernelError::invalid(format!(
                        "MirrorPadGrad: mode {other:?} is not REFLECT or SYMMETRIC"
                    )))
                }
            };
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                one(mirror_pad_grad(&inp[0], &inp[1], symmetric)?)
            })
        }
        "Tile" => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            one(tile(&inp[0], &int_values(&inp[1], "multiples")?)?)
        }),
        "GatherV2" => {
            let batch_dims = attr_int_or(node, "batch_dims", 0)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 3)?;
                one(gather_batched(&inp[0], &inp[1], int_scalar(&inp[2], "axis")?, batch_dims)?)
            })
        }
        "Gather" => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            one(gather(&inp[0], &inp[1], 0)?)
        }),
        "Fill" => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            one(fill(&shape_values(&inp[0], "dims")?, &inp[1])?)
        }),
        "ZerosLike" | "OnesLike" => {
            let ones = node.op == "OnesLike";
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                one(filled_like(&inp[0], ones)?)
            })
        }
        "BroadcastTo" => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            let shape = shape_values(&inp[1], "shape")?;
            let t = &inp[0];
            fn go<T: Elem>(t: &Tensor, s: &[usize]) -> KResult<Tensor> {
                super::elementwise::broadcast_to::<T>(t, s)
            }
            one(dispatch_all!(t.dtype, go(t, &shape))?)
        }),
        "Range" => Box::new(|inp: Inputs| {
            arity(&inp, 3)?;
            one(dispatch_num!(inp[0].dtype, range(&inp[0], &inp[1], &inp[2]))?)
        }),
        "LinSpace" => Box::new(|inp: Inputs| {
            arity(&inp, 3)?;
            let num = int_scalar(&inp[2], "num")?;
            if num <= 0 {
                return Err(KernelError::invalid(format!("Requires num > 0: {num}")));
            }
            one(super::dispatch_float!(inp[0].dtype, lin_space(&inp[0], &inp[1], num as usize))?)
        }),
        "CumulativeLogsumexp" => {
            let exclusive = attr_bool_or(node, "exclusive", false)?;
            let reverse = attr_bool_or(node, "reverse", false)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                let t = &inp[0];
                let ax = norm_axis(int_scalar(&inp[1], "axis")?, t.rank().max(1), "cumulative axis")?;
                one(super::dispatch_float!(t.dtype, cumulative_logsumexp(t, ax, exclusive, reverse))?)
            })
        }
        "OneHot" => {
            let axis = attr_int_or(node, "axis", -1)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 4)?;
                let depth = int_scalar(&inp[1], "depth")?;
                if depth < 0 {
                    return Err(KernelError::invalid(format!("depth must be non-negative, got: {depth}")));
                }
                if inp[2].dtype != inp[3].dtype || inp[2].num_elements() != 1 || inp[3].num_elements() != 1 {
                    return Err(KernelError::invalid("OneHot: on_value and off_value must be scalars of one dtype"));
                }
                one(dispatch_all!(inp[2].dtype, one_hot(&inp[0], depth as usize, &inp[2], &inp[3], axis))?)
            })
        }
        "UnsortedSegmentSum" | "UnsortedSegmentProd" | "UnsortedSegmentMax" | "UnsortedSegmentMin" => {
            let r = match node.op.as_str() {
                "UnsortedSegmentSum" => SegmentReduce::Sum,
                "UnsortedSegmentProd" => SegmentReduce::Prod,
                "UnsortedSegmentMax" => SegmentReduce::Max,
                _ => SegmentReduce::Min,
            };
            Box::new(move |inp: Inputs| {
                arity(&inp, 3)?;
                if inp[2].rank() != 0 {
                    return Err(KernelError::invalid(format!(
                        "num_segments should be a scalar, not shape {}",
                        super::shape_ops::debug_shape(&inp[2].shape)
                    )));
                }
                let num = int_scalar(&inp[2], "num_segments")?;
                if num < 0 {
                    return Err(KernelError::invalid(format!("Input num_segments == {num} must not be negative.")));
                }
                one(dispatch_num!(inp[0].dtype, unsorted_segment(r, &inp[0], &inp[1], num as usize))?)
            })
        }
        // The compiler's kernels (`autoclust_numeric::reshuffle`), so both modes agree.
        "SpaceToBatchND" | "BatchToSpaceND" => {
            let to_batch = node.op == "SpaceToBatchND";
            Box::new(move |inp: Inputs| {
                arity(&inp, 3)?;
                let block = int_values(&inp[1], "block_shape")?;
                let pads = int_values(&inp[2], if to_batch { "paddings" } else { "crops" })?;
                let sb = autoclust_numeric::reshuffle::SpaceBatch::new(to_batch, &block, &pads)
                    .map_err(KernelError::invalid)?;
                let out = sb.output_shape(&inp[0].shape).map_err(KernelError::invalid)?;
                budget(inp[0].dtype, &out)?;
                one(sb.run(&inp[0]).map_err(KernelError::invalid)?)
            })
        }
        "ResizeBilinear" | "ResizeBilinearGrad" => {
            let grad = node.op == "ResizeBilinearGrad";
            let attrs = autoclust_numeric::resize::Resize::of(node);
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                let x = &inp[0];
                if grad {
                    let orig = &inp[1];
                    if orig.dtype != autoclust_graph::DType::Float32 {
                        return Err(KernelError::DType(orig.dtype));
                    }
                    let dy = x.as_f32().ok_or(KernelError::DType(x.dtype))?;
                    if x.rank() != 4 || orig.rank() != 4 || x.shape[0] != orig.shape[0] || x.shape[3] != orig.shape[3] {
                        return Err(KernelError::invalid(format!(
                            "grads {:?} and original_image {:?} do not match",
                            x.shape, orig.shape
                        )));
                    }
                    let (s, o) = (&x.shape, &orig.shape);
                    attrs.check(o, (s[1], s[2])).map_err(KernelError::invalid)?;
                    let v = attrs.backward(dy, (s[0], s[1], s[2], s[3]), (o[1], o[2]));
                    return one(tensor_of(o.clone(), v));
                }
                let size = int_values(&inp[1], "size")?;
                let [h, w] = size[..] else {
                    return Err(KernelError::invalid(format!(
                        "size must be a 1-D int32 Tensor of 2 elements, got {size:?}"
                    )));
                };
                if h <= 0 || w <= 0 {
                    return Err(KernelError::invalid(format!("output dimensions must be positive, got [{h}, {w}]")));
                }
                let (h, w) = (h as usize, w as usize);
                attrs.check(&x.shape, (h, w)).map_err(KernelError::invalid)?;
                let out = vec![x.shape[0], h, w, x.shape[3]];
                budget(autoclust_graph::DType::Float32, &out)?;
                let xf: std::borrow::Cow<'_, [f32]> = match x.as_f32() {
                    Some(v) => v.into(),
                    None => x.to_f64_vec().ok_or(KernelError::DType(x.dtype))?.iter().map(|&v| v as f32).collect(),
                };
                one(tensor_of(out, attrs.forward(&xf, &x.shape, (h, w))))
            })
        }
        "ResizeNearestNeighbor" | "ResizeNearestNeighborGrad" => {
            let grad = node.op == "ResizeNearestNeighborGrad";
            let attrs = autoclust_numeric::resize::Resize::of(node);
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                let x = &inp[0];
                let size = int_values(&inp[1], "size")?;
                let [h, w] = size[..] else {
                    return Err(KernelError::invalid(format!(
                        "size must be a 1-D int32 Tensor of 2 elements, got {size:?}"
                    )));
                };
                if h <= 0 || w <= 0 || x.rank() != 4 {
                    return Err(KernelError::invalid(format!("invalid resize of {:?} to [{h}, {w}]", x.shape)));
                }
                let (h, w) = (h as usize, w as usize);
                let out = vec![x.shape[0], h, w, x.shape[3]];
                let (image, hw) = if grad { (&out, (x.shape[1], x.shape[2])) } else { (&x.shape, (h, w)) };
                attrs.check(image, hw).map_err(KernelError::invalid)?;
                budget(x.dtype, &out)?;
                if grad {
                    let dy = x.as_f32().ok_or(KernelError::DType(x.dtype))?;
                    let s = &x.shape;
                    return one(tensor_of(out.clone(), attrs.nearest_backward(dy, (s[0], s[1], s[2], s[3]), (h, w))));
                }
                let s = x.shape.clone();
                one(dispatch_all!(x.dtype, nearest_any(x, &attrs, &s, (h, w), out))?)
            })
        }
        "InTopKV2" | "InTopK" => {
            let attr_k = if node.op == "InTopK" {
                Some(node.attr("k").and_then(|a| a.as_int()).ok_or_else(|| KernelError::Attr("k".into()))?)
            } else {
                None
            };
            Box::new(move |inp: Inputs| {
                arity(&inp, if attr_k.is_some() { 2 } else { 3 })?;
                let (p, t) = (&inp[0], &inp[1]);
                let k = match attr_k {
                    Some(k) => k,
                    None => int_scalar(&inp[2], "k")?,
                };
                let pv = p.as_f32().ok_or(KernelError::DType(p.dtype))?;
                let tv = int_values(t, "targets")?;
                if p.rank() != 2 {
                    return Err(KernelError::invalid(format!(
                        "predictions must be 2-dimensional, got rank {}",
                        p.rank()
                    )));
                }
                if t.rank() != 1 || t.shape[0] != p.shape[0] {
                    return Err(KernelError::invalid(format!(
                        "First dimension of predictions {} must match length of targets {}",
                        p.shape[0],
                        t.shape.first().copied().unwrap_or(0)
                    )));
                }
                let v = autoclust_numeric::reduce::in_top_k(pv, p.shape[1], &tv, k);
                one(tensor_of(vec![tv.len()], v))
            })
        }
        "Bitcast" => {
            let to = super::attr_type(node, "type")?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                one(autoclust_numeric::reshuffle::bitcast(&inp[0], to).map_err(KernelError::invalid)?)
            })
        }
        "BitwiseAnd" | "BitwiseOr" | "BitwiseXor" | "LeftShift" | "RightShift" => {
            let kind = autoclust_numeric::reshuffle::BitwiseKind::from_tf(&node.op).expect("a bitwise op");
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                if inp[0].dtype != inp[1].dtype {
                    return Err(KernelError::invalid(format!("{} and {} operands", inp[0].dtype, inp[1].dtype)));
                }
                let out = super::elementwise::broadcast_shape(&inp[0].shape, &inp[1].shape)?;
                one(kind.run(&inp[0], &inp[1], &out).map_err(KernelError::invalid)?)
            })
        }
        "Invert" => Box::new(|inp: Inputs| {
            arity(&inp, 1)?;
            let t = &inp[0];
            one(match (t.as_i32(), t.as_i64()) {
                (Some(v), _) => tensor_of(t.shape.clone(), v.iter().map(|x| !x).collect::<Vec<i32>>()),
                (_, Some(v)) => tensor_of(t.shape.clone(), v.iter().map(|x| !x).collect::<Vec<i64>>()),
                // Any other integer type held as bytes (uint64 and the narrow ones): every bit
                // flipped is every byte flipped.
                _ => match &t.data {
                    TensorData::Raw(b) if t.dtype.is_integer() => Tensor {
                        dtype: t.dtype,
                        shape: t.shape.clone(),
                        data: TensorData::Raw(std::sync::Arc::new(b.iter().map(|x| !x).collect())),
                    },
                    _ => return Err(KernelError::DType(t.dtype)),
                },
            })
        }),
        // Set bits of each element's two's-complement bytes, as uint8 (`PopulationCount`).
        "PopulationCount" => Box::new(|inp: Inputs| {
            arity(&inp, 1)?;
            let t = &inp[0];
            let width = t.dtype.size_of().filter(|_| t.dtype.is_integer()).ok_or(KernelError::DType(t.dtype))?;
            let bytes = t.to_le_bytes().ok_or(KernelError::DType(t.dtype))?;
            let counts: Vec<u8> =
                bytes.chunks_exact(width).map(|c| c.iter().map(|b| b.count_ones() as u8).sum()).collect();
            one(Tensor::from_le_bytes(autoclust_graph::DType::UInt8, t.shape.clone(), &counts)
                .map_err(|e| KernelError::invalid(e.to_string()))?)
        }),
        "ReverseV2" => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            let r = inp[0].rank() as i64;
            let mut axes = Vec::new();
            for a in int_values(&inp[1], "axis")? {
                let ax = if a < 0 { a + r } else { a };
                if ax < 0 || ax >= r.max(1) {
                    return Err(KernelError::invalid(format!("'axis'[..] = {a} is out of valid range [-{r}, {r})")));
                }
                if axes.contains(&(ax as usize)) {
                    return Err(KernelError::invalid(format!("axis {ax} specified more than once")));
                }
                axes.push(ax as usize);
            }
            one(dispatch_all!(inp[0].dtype, reverse(&inp[0], &axes))?)
        }),
        "GatherNd" => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            one(gather_nd_any(&inp[0], &inp[1])?)
        }),
        "ScatterNd" => Box::new(|inp: Inputs| {
            arity(&inp, 3)?;
            let shape = int_values(&inp[2], "shape")?;
            if shape.iter().any(|&d| d < 0) {
                return Err(KernelError::invalid(format!("shape must be non-negative, got {shape:?}")));
            }
            let shape: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
            // The output's shape is an input: checked before anything is sized from it.
            autoclust_graph::limits::tensor_elements(inp[1].dtype, &shape)?;
            if inp[1].dtype == autoclust_graph::DType::Bool {
                return one(scatter_nd_bool(&inp[0], &inp[1], &shape)?);
            }
            one(dispatch_num!(inp[1].dtype, scatter_nd(&inp[0], &inp[1], &shape))?)
        }),
        "BroadcastArgs" => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            let (a, b) = (int_values(&inp[0], "s0")?, int_values(&inp[1], "s1")?);
            let n = a.len().max(b.len());
            let mut out = vec![0i64; n];
            for (i, o) in out.iter_mut().enumerate() {
                let x = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
                let y = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
                *o = if x == y || y == 1 {
                    x
                } else if x == 1 {
                    y
                } else {
                    return Err(KernelError::invalid(format!("Incompatible shapes: {a:?} vs. {b:?}")));
                };
            }
            one(match inp[0].dtype {
                autoclust_graph::DType::Int64 => tensor_of(vec![n], out),
                _ => tensor_of(vec![n], out.into_iter().map(|x| x as i32).collect::<Vec<_>>()),
            })
        }),
        "SegmentSum" | "SegmentProd" | "SegmentMax" | "SegmentMin" | "SegmentMean" => {
            let (r, mean) = match node.op.as_str() {
                "SegmentSum" => (SegmentReduce::Sum, false),
                "SegmentMean" => (SegmentReduce::Sum, true),
                "SegmentProd" => (SegmentReduce::Prod, false),
                "SegmentMax" => (SegmentReduce::Max, false),
                _ => (SegmentReduce::Min, false),
            };
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                one(dispatch_num!(inp[0].dtype, sorted_segment(r, mean, &inp[0], &inp[1]))?)
            })
        }
        "TopKV2" | "TopK" => {
            let index_type = super::attr_type_or(node, "index_type", autoclust_graph::DType::Int32)?;
            let k_attr = (node.op == "TopK").then(|| super::attr_int_or(node, "k", 0)).transpose()?;
            Box::new(move |inp: Inputs| {
                let k = match k_attr {
                    Some(k) => {
                        arity(&inp, 1)?;
                        k
                    }
                    None => {
                        arity(&inp, 2)?;
                        if inp[1].rank() != 0 {
                            return Err(KernelError::invalid("k must be a scalar"));
                        }
                        int_scalar(&inp[1], "k")?
                    }
                };
                if k < 0 {
                    return Err(KernelError::invalid(format!("Need k >= 0, got {k}")));
                }
                dispatch_num!(inp[0].dtype, top_k(&inp[0], k as usize, index_type))
            })
        }
        "Assert" => {
            let summarize = super::attr_int_or(node, "summarize", 3)?.max(0) as usize;
            Box::new(move |inp: Inputs| {
                let Some(cond) = inp.first() else { return Err(KernelError::invalid("Assert needs a condition")) };
                if cond.dtype != autoclust_graph::DType::Bool || cond.num_elements() != 1 {
                    return Err(KernelError::invalid(format!(
                        "In[0] should be a scalar bool, got {} of shape {}",
                        cond.dtype,
                        super::shape_ops::debug_shape(&cond.shape)
                    )));
                }
                if cond.as_bool().is_some_and(|b| b[0]) {
                    return Ok(Outputs::new());
                }
                Err(KernelError::invalid(format!("assertion failed: {}", assert_message(&inp[1..], summarize))))
            })
        }
        "Unique" => {
            let out_idx = super::attr_type_or(node, "out_idx", autoclust_graph::DType::Int32)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                dispatch_all!(inp[0].dtype, unique(&inp[0], out_idx))
            })
        }
        "Roll" => Box::new(|inp: Inputs| {
            arity(&inp, 3)?;
            one(roll(&inp[0], &inp[1], &inp[2])?)
        }),
        "InvertPermutation" => Box::new(|inp: Inputs| {
            arity(&inp, 1)?;
            one(invert_permutation(&inp[0])?)
        }),
        "DynamicStitch" | "ParallelDynamicStitch" => Box::new(|inp: Inputs| one(dynamic_stitch(&inp)?)),
        _ => return Ok(None),
    };
    Ok(Some(f))
}

/// `ResizeNearestNeighbor` of any element type, by the compiler's kernel.
fn nearest_any<T: Elem>(
    x: &Tensor,
    attrs: &autoclust_numeric::resize::Resize,
    shape: &[usize],
    hw: (usize, usize),
    out: Vec<usize>,
) -> KResult<Tensor> {
    Ok(tensor_of(out, attrs.nearest_forward(T::slice(x), shape, hw)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::tests_support::{node, run1};
    use autoclust_graph::{AttrValue, DType};

    /// TensorFlow 2.21: `tf.raw_ops.PopulationCount` of int8 [-1, 0, 5] is [8, 0, 2], of int32 -1 is 32,
    /// of int64 [-1, 2**40] is [64, 1], of uint16 65535 is 16 — uint8 results.
    #[test]
    fn population_count_counts_each_width() {
        let pc = |t: Tensor| {
            let out = run1(&node("PopulationCount", &[]), &[t]).unwrap();
            assert_eq!(out.dtype, DType::UInt8);
            out.to_le_bytes().unwrap()
        };
        let raw = |d: DType, bytes: &[u8], n: usize| Tensor::from_le_bytes(d, vec![n], bytes).unwrap();
        assert_eq!(pc(raw(DType::Int8, &[0xff, 0, 5], 3)), [8, 0, 2]);
        assert_eq!(pc(Tensor::from_i32(vec![1], vec![-1]).unwrap()), [32]);
        assert_eq!(pc(Tensor::from_i64(vec![2], vec![-1, 1 << 40]).unwrap()), [64, 1]);
        assert_eq!(pc(raw(DType::UInt16, &[0xff, 0xff], 1)), [16]);
        assert!(run1(&node("PopulationCount", &[]), &[Tensor::from_f32(vec![1], vec![1.0]).unwrap()]).is_err());
    }

    /// TensorFlow 2.21: `tf.raw_ops.Bucketize(input=[nan, -1, 0.5, 1, 7, inf], boundaries=[0, 1, 5])`
    /// is [3, 0, 1, 2, 3, 3] — a NaN past the last bucket (`std::upper_bound`'s `value < b`).
    #[test]
    fn bucketize_puts_nan_past_the_last_bucket() {
        let b =
            node("Bucketize", &[("boundaries", AttrValue::List(autoclust_graph::ListValue::F(vec![0.0, 1.0, 5.0])))]);
        let x = Tensor::from_f32(vec![6], vec![f32::NAN, -1.0, 0.5, 1.0, 7.0, f32::INFINITY]).unwrap();
        assert_eq!(run1(&b, &[x]).unwrap().to_i64_vec().unwrap(), [3, 0, 1, 2, 3, 3]);
        let x = Tensor::from_f64(vec![2], vec![f64::NAN, 1.0]).unwrap();
        assert_eq!(run1(&b, &[x]).unwrap().to_i64_vec().unwrap(), [3, 2]);
    }

    /// TensorFlow 2.21 (sweep 70), `a` = [[1, nan, -2, 3], [inf, -inf, 0, -0], [nan, nan, 5,
    /// -1], [2, nan, nan, -5]]: `segment_max(a, [0, 0, 1, 1])` is [[inf, -inf, 0, 3], [2, nan,
    /// nan, -1]], `segment_min` [[1, -inf, -2, -0], [2, nan, nan, -5]], and
    /// `unsorted_segment_max(a, [1, 0, 1, 0], 3)` [[inf, nan, nan, -0], [nan, nan, 5, 3],
    /// [lowest; 4]]: a value replaces the accumulator unless it is below (above) it.
    #[test]
    fn segment_extremes_treat_nan_as_tensorflow_does() {
        let (nan, inf) = (f32::NAN, f32::INFINITY);
        let a = Tensor::from_f32(
            vec![4, 4],
            vec![1.0, nan, -2.0, 3.0, inf, -inf, 0.0, -0.0, nan, nan, 5.0, -1.0, 2.0, nan, nan, -5.0],
        )
        .unwrap();
        let ids = |v: &[i32]| Tensor::from_i32(vec![v.len()], v.to_vec()).unwrap();
        let bits = |t: Tensor| {
            t.as_f32()
                .unwrap()
                .iter()
                .map(|x| if x.is_nan() { "nan".to_string() } else { format!("{x:?}") })
                .collect::<Vec<_>>()
        };
        let want = |v: &[f32]| {
            v.iter().map(|x| if x.is_nan() { "nan".to_string() } else { format!("{x:?}") }).collect::<Vec<_>>()
        };
        let smax = run1(&node("SegmentMax", &[]), &[a.clone(), ids(&[0, 0, 1, 1])]).unwrap();
        assert_eq!(bits(smax), want(&[inf, -inf, 0.0, 3.0, 2.0, nan, nan, -1.0]));
        let smin = run1(&node("SegmentMin", &[]), &[a.clone(), ids(&[0, 0, 1, 1])]).unwrap();
        assert_eq!(bits(smin), want(&[1.0, -inf, -2.0, -0.0, 2.0, nan, nan, -5.0]));
        let umax = run1(&node("UnsortedSegmentMax", &[]), &[a, ids(&[1, 0, 1, 0]), Tensor::scalar_i32(3)]).unwrap();
        let low = f32::MIN;
        assert_eq!(bits(umax), want(&[inf, nan, nan, -0.0, nan, nan, 5.0, 3.0, low, low, low, low]));
    }

    /// `ZerosLike` of an Optional (what `tf.gradients` passes for a v2 cond's wrapped
    /// intermediates, TF1 dropout under a training placeholder): a value becomes zeros of each
    /// component, none stays none; `OnesLike` of one is refused, as in TensorFlow.
    #[test]
    fn zeros_like_of_an_optional() {
        let some = Tensor::from_optional(Some(vec![
            Tensor::from_f32(vec![2], vec![1.5, -2.0]).unwrap(),
            Tensor::from_i32(vec![], vec![7]).unwrap(),
        ]));
        let z =
            run1(&node("ZerosLike", &[("T", AttrValue::Type(DType::Variant))]), std::slice::from_ref(&some)).unwrap();
        let parts = z.as_optional().unwrap().as_ref().unwrap();
        assert_eq!(parts[0].as_f32().unwrap(), &[0.0, 0.0]);
        assert_eq!((parts[1].as_i32().unwrap(), parts[1].shape.len()), (&[0][..], 0));
        let none = Tensor::from_optional(None);
        let z = run1(&node("ZerosLike", &[("T", AttrValue::Type(DType::Variant))]), &[none]).unwrap();
        assert!(z.as_optional().unwrap().is_none());
        assert!(run1(&node("OnesLike", &[("T", AttrValue::Type(DType::Variant))]), &[some]).is_err());
    }

    fn iota(shape: Vec<usize>) -> Tensor {
        let n = shape.iter().product::<usize>() as i32;
        Tensor::from_i32(shape, (0..n).collect()).unwrap()
    }
    fn v(x: &[i32]) -> Tensor {
        Tensor::from_i32(vec![x.len()], x.to_vec()).unwrap()
    }

    #[test]
    fn nd_gathers_and_scatters_reverse_and_broadcast_args() {
        let x = iota(vec![3, 4]);
        let idx = Tensor::from_i32(vec![2, 2], vec![0, 1, 2, 3]).unwrap();
        assert_eq!(run1(&node("GatherNd", &[]), &[x.clone(), idx.clone()]).unwrap().as_i32().unwrap(), &[1, 11]);
        let rows = run1(&node("GatherNd", &[]), &[x.clone(), Tensor::from_i32(vec![1, 1], vec![2]).unwrap()]).unwrap();
        assert_eq!((rows.shape.clone(), rows.as_i32().unwrap().to_vec()), (vec![1, 4], vec![8, 9, 10, 11]));
        let bad = Tensor::from_i32(vec![1, 2], vec![3, 0]).unwrap();
        let e = run1(&node("GatherNd", &[]), &[x.clone(), bad]).unwrap_err().to_string();
        assert!(e.contains("indices[0] = [3, 0] does not index into params shape [3,4]"), "{e}");
        // Duplicate tuples accumulate.
        let dup = Tensor::from_i32(vec![3, 1], vec![1, 0, 1]).unwrap();
        let upd = Tensor::from_i32(vec![3, 2], vec![1, 2, 3, 4, 5, 6]).unwrap();
        let sc = run1(&node("ScatterNd", &[]), &[dup, upd, v(&[2, 2])]).unwrap();
        assert_eq!(sc.as_i32().unwrap(), &[3, 4, 6, 8]);
        // Bools: a repeated index ors its updates (TensorFlow 2.21:
        // scatter_nd([[1],[1],[3]], [True, False, True], [5]) = [F, T, F, T, F]).
        let idx = Tensor::from_i32(vec![3, 1], vec![1, 1, 3]).unwrap();
        let upd = Tensor::from_bool(vec![3], vec![true, false, true]).unwrap();
        let sc = run1(&node("ScatterNd", &[]), &[idx, upd, v(&[5])]).unwrap();
        assert_eq!(sc.as_bool().unwrap(), &[false, true, false, true, false]);
        let r = run1(&node("ReverseV2", &[]), &[x.clone(), v(&[-1, 0])]).unwrap();
        assert_eq!(r.as_i32().unwrap(), &[11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
        assert!(run1(&node("ReverseV2", &[]), &[x, v(&[2])]).is_err());
        assert_eq!(
            run1(&node("BroadcastArgs", &[]), &[v(&[2, 1, 3]), v(&[4, 1])]).unwrap().as_i32().unwrap(),
            &[2, 4, 3]
        );
        assert!(run1(&node("BroadcastArgs", &[]), &[v(&[2, 3]), v(&[4])]).is_err());
    }

    #[test]
    fn sorted_segments_fill_empty_segments_with_zero_and_check_the_ids() {
        let data = Tensor::from_f32(vec![4, 2], vec![1., -2., 3., -4., 5., 6., -7., 8.]).unwrap();
        let ids = v(&[0, 0, 2, 2]);
        let run = |op: &str| run1(&node(op, &[]), &[data.clone(), ids.clone()]);
        assert_eq!(run("SegmentSum").unwrap().as_f32().unwrap(), &[4., -6., 0., 0., -2., 14.]);
        assert_eq!(run("SegmentMean").unwrap().as_f32().unwrap(), &[2., -3., 0., 0., -1., 7.]);
        assert_eq!(run("SegmentMax").unwrap().as_f32().unwrap(), &[3., -2., 0., 0., 5., 8.]);
        assert_eq!(run("SegmentMin").unwrap().as_f32().unwrap(), &[1., -4., 0., 0., -7., 6.]);
        assert_eq!(run("SegmentProd").unwrap().as_f32().unwrap(), &[3., 8., 1., 1., -35., 48.]);
        let e = run1(&node("SegmentSum", &[]), &[data.clone(), v(&[0, 2, 1, 3])]).unwrap_err().to_string();
        assert!(e.contains("not increasing"), "{e}");
        let e = run1(&node("SegmentSum", &[]), &[data, v(&[0, 1])]).unwrap_err().to_string();
        assert!(e.contains("same size as dimension 0"), "{e}");
    }

    #[test]
    fn top_k_takes_the_largest_first_and_breaks_ties_by_index() {
        let x = Tensor::from_f32(vec![2, 4], vec![1., 3., 3., 2., f32::NAN, -1., 5., 5.]).unwrap();
        let out =
            prepare(&node("TopKV2", &[])).unwrap().unwrap()(smallvec::smallvec![x.clone(), Tensor::scalar_i32(3)])
                .unwrap();
        let vals = out[0].as_f32().unwrap();
        assert_eq!(&vals[..3], &[3., 3., 2.]);
        assert!(vals[3].is_nan() && vals[4] == 5. && vals[5] == 5.);
        assert_eq!(out[1].as_i32().unwrap(), &[1, 2, 3, 0, 2, 3]);
        let e =
            prepare(&node("TopKV2", &[])).unwrap().unwrap()(smallvec::smallvec![x, Tensor::scalar_i32(5)]).unwrap_err();
        assert!(e.to_string().contains("at least k columns"), "{e}");
    }

    /// `MatrixBandPart` row by row equals the definition (keep `(i, j)` when `i − j ≤ lower`
    /// and `j − i ≤ upper`, a negative bound unbounded) on tall, wide and batched matrices.
    #[test]
    fn band_part_keeps_the_band_of_every_matrix() {
        for (shape, lower, upper) in [
            (vec![2, 4, 6], 1, 2),
            (vec![5, 3], -1, 0),
            (vec![3, 5], 0, -1),
            (vec![2, 3, 3], -1, -1),
            (vec![4, 4], 0, 0),
            (vec![6, 2], 4, 1),
            (vec![0, 3], 0, 0),
        ] {
            let count: usize = shape.iter().product();
            let x = Tensor::from_f32(shape.clone(), (0..count).map(|i| i as f32 + 1.0).collect()).unwrap();
            let b = prepare(&node("MatrixBandPart", &[])).unwrap().unwrap()(smallvec::smallvec![
                x,
                Tensor::scalar_i64(lower),
                Tensor::scalar_i64(upper)
            ])
            .unwrap();
            let (m, n) = (shape[shape.len() - 2] as i64, shape[shape.len() - 1] as i64);
            let want: Vec<f32> = (0..count as i64)
                .map(|k| {
                    let (i, j) = ((k / n) % m, k % n);
                    let keep = (lower < 0 || i - j <= lower) && (upper < 0 || j - i <= upper);
                    if keep {
                        k as f32 + 1.0
                    } else {
                        0.0
                    }
                })
                .collect();
            assert_eq!(b[0].as_f32().unwrap(), &want[..], "{shape:?} {lower} {upper}");
        }
    }

    /// The selection gives what a stable sort of each whole row gives, for every k, with
    /// ties, signed zeros, infinities and NaN among the values; int64 values past 2⁵³ keep
    /// their exact order.
    #[test]
    fn top_k_selection_equals_a_full_stable_sort() {
        let pool = [3.0, -1.0, 0.0, -0.0, 7.5, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 3.0, -2.5];
        let n = 23;
        let row: Vec<f64> = (0..3 * n).map(|i| pool[(i * 7 + i / 5) % pool.len()]).collect();
        let x = Tensor::from_f64(vec![3, n], row.clone()).unwrap();
        let key = |f: f64| if f.is_nan() { (f64::INFINITY, 1) } else { (f, 0) };
        for k in [0, 1, 2, 5, n - 1, n] {
            let out = prepare(&node("TopKV2", &[])).unwrap().unwrap()(smallvec::smallvec![
                x.clone(),
                Tensor::scalar_i32(k as i32)
            ])
            .unwrap();
            let idx = out[1].as_i32().unwrap();
            for r in 0..3 {
                let mut order: Vec<usize> = (0..n).collect();
                order.sort_by(|&a, &b| {
                    let (ka, kb) = (key(row[r * n + a]), key(row[r * n + b]));
                    kb.0.partial_cmp(&ka.0).unwrap().then(kb.1.cmp(&ka.1))
                });
                let want: Vec<i32> = order[..k].iter().map(|&i| i as i32).collect();
                assert_eq!(&idx[r * k..(r + 1) * k], &want[..], "k {k} row {r}");
            }
        }
        let big = (1i64 << 53) + 1;
        let x = Tensor::from_i64(vec![4], vec![1i64 << 53, big, i64::MIN, i64::MAX]).unwrap();
        let out =
            prepare(&node("TopKV2", &[])).unwrap().unwrap()(smallvec::smallvec![x, Tensor::scalar_i32(4)]).unwrap();
        assert_eq!(out[0].as_i64().unwrap(), &[i64::MAX, big, 1i64 << 53, i64::MIN]);
    }

    #[test]
    fn a_false_assert_fails_with_its_data() {
        let f = prepare(&node("Assert", &[("summarize", AttrValue::I(2))])).unwrap().unwrap();
        let msg = Tensor {
            dtype: DType::String,
            shape: vec![],
            data: autoclust_graph::TensorData::Str(std::sync::Arc::new(vec![b"x must be positive".to_vec()])),
        };
        let x = Tensor::from_f32(vec![3], vec![-1., 2., 3.]).unwrap();
        let ok = Tensor {
            dtype: DType::Bool,
            shape: vec![],
            data: autoclust_graph::TensorData::Bool(std::sync::Arc::new(vec![true])),
        };
        assert!(f(smallvec::smallvec![ok, msg.clone(), x.clone()]).unwrap().is_empty());
        let no = Tensor {
            dtype: DType::Bool,
            shape: vec![],
            data: autoclust_graph::TensorData::Bool(std::sync::Arc::new(vec![false])),
        };
        let e = f(smallvec::smallvec![no, msg, x]).unwrap_err().to_string();
        assert!(e.contains("assertion failed: [x must be positive] [-1 2...]"), "{e}");
    }

    /// TensorFlow 2.21's text for a failed `tf.debugging.Assert(False, ['msg here', x,
    /// reshape(x, [2, 2]), 3.5, [True, False]], summarize=3)` with `x = [1.5, -2, 3, 4]`.
    #[test]
    fn assert_messages_are_tensorflows() {
        let s = |b: &[u8]| Tensor {
            dtype: DType::String,
            shape: vec![],
            data: autoclust_graph::TensorData::Str(std::sync::Arc::new(vec![b.to_vec()])),
        };
        let x = Tensor::from_f32(vec![4], vec![1.5, -2., 3., 4.]).unwrap();
        let m = Tensor::from_f32(vec![2, 2], vec![1.5, -2., 3., 4.]).unwrap();
        let b = Tensor {
            dtype: DType::Bool,
            shape: vec![2],
            data: autoclust_graph::TensorData::Bool(std::sync::Arc::new(vec![true, false])),
        };
        let text = assert_message(&[s(b"msg here"), x, m, Tensor::scalar_f32(3.5), b], 3);
        assert_eq!(text, "[msg here] [1.5 -2 3...] [[1.5 -2][3...]...] [3.5] [1 0]");
    }

    /// `MirrorPadGrad` in both modes, in two and three dimensions, and its two errors:
    /// values and messages from TensorFlow 2.21.
    #[test]
    fn mirror_pad_grad_matches_tensorflow() {
        let grad = |x: Tensor, p: &[i32], mode: &str| {
            let n = node("MirrorPadGrad", &[("mode", AttrValue::S(mode.as_bytes().to_vec()))]);
            let p = Tensor::from_i32(vec![p.len() / 2, 2], p.to_vec()).unwrap();
            run1(&n, &[x, p])
        };
        let iota = |shape: Vec<usize>| {
            let n = shape.iter().product::<usize>();
            Tensor::from_f32(shape, (1..=n).map(|i| i as f32).collect()).unwrap()
        };
        let x = iota(vec![6, 7]);
        let r = grad(x.clone(), &[1, 1, 2, 1], "REFLECT").unwrap();
        assert_eq!(r.shape, [4, 4]);
        let want = [10., 20., 34., 13., 20., 40., 68., 26., 62., 124., 194., 68., 31., 62., 97., 34.];
        assert_eq!(r.as_f32().unwrap(), want);
        let s = grad(x.clone(), &[1, 1, 2, 1], "SYMMETRIC").unwrap();
        let want = [24., 24., 17., 40., 33., 33., 19., 41., 47., 47., 26., 55., 136., 136., 73., 152.];
        assert_eq!(s.as_f32().unwrap(), want);
        let t = grad(iota(vec![2, 6, 3]), &[0, 0, 2, 1, 0, 1], "SYMMETRIC").unwrap();
        assert_eq!(t.shape, [2, 3, 2]);
        assert_eq!(t.as_f32().unwrap(), [11., 28., 11., 28., 29., 64., 47., 100., 47., 100., 65., 136.]);
        let e = grad(x.clone(), &[3, 0, 0, 0], "REFLECT").unwrap_err().to_string();
        assert!(e.contains("paddings must be less than the output dimension size: 3, 0 not less than 3"), "{e}");
        let e = grad(x, &[1, 1], "REFLECT").unwrap_err().to_string();
        assert!(e.contains("The first dimension of paddings must be the rank of inputs[1, 2] [6, 7]"), "{e}");
    }

    /// The examples of TensorFlow's `tf.pad` documentation, and the errors.
    #[test]
    fn pad_constant_reflect_symmetric() {
        let t = Tensor::from_i32(vec![2, 3], vec![1, 2, 3, 4, 5, 6]).unwrap();
        let p = Tensor::from_i32(vec![2, 2], vec![1, 1, 2, 2]).unwrap();
        let mirror = |mode: &str| {
            let n = node("MirrorPad", &[("mode", AttrValue::S(mode.as_bytes().to_vec()))]);
            run1(&n, &[t.clone(), p.clone()]).unwrap()
        };
        let reflect = mirror("REFLECT");
        assert_eq!(reflect.shape, vec![4, 7]);
        assert_eq!(
            reflect.as_i32().unwrap(),
            &[6, 5, 4, 5, 6, 5, 4, 3, 2, 1, 2, 3, 2, 1, 6, 5, 4, 5, 6, 5, 4, 3, 2, 1, 2, 3, 2, 1]
        );
        assert_eq!(
            mirror("SYMMETRIC").as_i32().unwrap(),
            &[2, 1, 1, 2, 3, 3, 2, 2, 1, 1, 2, 3, 3, 2, 5, 4, 4, 5, 6, 6, 5, 5, 4, 4, 5, 6, 6, 5]
        );
        let c = run1(&node("PadV2", &[]), &[t.clone(), p.clone(), Tensor::scalar_i32(9)]).unwrap();
        assert_eq!(&c.as_i32().unwrap()[..9], &[9, 9, 9, 9, 9, 9, 9, 9, 9]);
        assert_eq!(&c.as_i32().unwrap()[9..12], &[1, 2, 3]);
        let z = run1(&node("Pad", &[]), &[t.clone(), p.clone()]).unwrap();
        assert_eq!(z.as_i32().unwrap().iter().sum::<i32>(), 21);
        // REFLECT may not pad by the whole dimension; negative paddings are refused.
        let big = Tensor::from_i32(vec![2, 2], vec![0, 0, 3, 0]).unwrap();
        let n = node("MirrorPad", &[("mode", AttrValue::S(b"REFLECT".to_vec()))]);
        assert!(run1(&n, &[t.clone(), big]).is_err());
        let neg = Tensor::from_i32(vec![2, 2], vec![0, -1, 0, 0]).unwrap();
        assert!(run1(&node("Pad", &[]), &[t, neg]).is_err());
    }

    /// The constant pad's row copies against the definition: a rank-3 pad of every axis
    /// (and a zero-length axis, which leaves only the fill).
    #[test]
    fn constant_pad_places_every_element() {
        let (shape, pads) = ([2usize, 3, 4], [1usize, 0, 2, 1, 0, 3]);
        let t = Tensor::from_i32(shape.to_vec(), (1..=24).collect()).unwrap();
        let p = Tensor::from_i32(vec![3, 2], pads.iter().map(|&x| x as i32).collect()).unwrap();
        let got = run1(&node("PadV2", &[]), &[t, p.clone(), Tensor::scalar_i32(-7)]).unwrap();
        let out = [3usize, 6, 7];
        assert_eq!(got.shape, out);
        let mut want = vec![-7; out.iter().product()];
        for a in 0..2 {
            for b in 0..3 {
                for c in 0..4 {
                    want[((a + 1) * 6 + b + 2) * 7 + c] = (1 + (a * 3 + b) * 4 + c) as i32;
                }
            }
        }
        assert_eq!(got.as_i32().unwrap(), &want[..]);
        let empty = Tensor::from_i32(vec![2, 0, 4], vec![]).unwrap();
        let got = run1(&node("Pad", &[]), &[empty, p]).unwrap();
        assert_eq!(got.shape, [3, 3, 7]);
        assert!(got.as_i32().unwrap().iter().all(|&x| x == 0));
    }

    #[test]
    fn clip_by_value_with_scalar_and_tensor_bounds() {
        let t = Tensor::from_f32(vec![4], vec![-3.0, 0.5, 2.0, f32::NAN]).unwrap();
        let r =
            run1(&node("ClipByValue", &[]), &[t.clone(), Tensor::scalar_f32(-1.0), Tensor::scalar_f32(1.0)]).unwrap();
        let got = r.as_f32().unwrap();
        assert_eq!(&got[..3], &[-1.0, 0.5, 1.0]);
        assert!(got[3].is_nan());
        let lo = Tensor::from_f32(vec![4], vec![-4.0, 1.0, 0.0, 0.0]).unwrap();
        let r = run1(&node("ClipByValue", &[]), &[t.clone(), lo, Tensor::scalar_f32(1.5)]).unwrap();
        assert_eq!(&r.as_f32().unwrap()[..3], &[-3.0, 1.0, 1.5]);
        let bad = Tensor::from_f32(vec![2], vec![0.0, 1.0]).unwrap();
        assert!(run1(&node("ClipByValue", &[]), &[t, bad, Tensor::scalar_f32(1.0)]).is_err());
    }

    #[test]
    fn transpose_and_concat() {
        let t = run1(&node("Transpose", &[]), &[iota(vec![2, 3]), v(&[1, 0])]).unwrap();
        assert_eq!((t.shape.clone(), t.as_i32().unwrap().to_vec()), (vec![3, 2], vec![0, 3, 1, 4, 2, 5]));
        let c = run1(&node("ConcatV2", &[]), &[iota(vec![2, 1]), iota(vec![2, 2]), Tensor::scalar_i32(-1)]).unwrap();
        assert_eq!((c.shape.clone(), c.as_i32().unwrap().to_vec()), (vec![2, 3], vec![0, 0, 1, 1, 2, 3]));
        assert!(run1(&node("ConcatV2", &[]), &[iota(vec![2, 1]), iota(vec![3, 1]), Tensor::scalar_i32(1)]).is_err());
        let p = run1(&node("Pack", &[("axis", AttrValue::I(1))]), &[v(&[1, 2]), v(&[3, 4])]).unwrap();
        assert_eq!((p.shape.clone(), p.as_i32().unwrap().to_vec()), (vec![2, 2], vec![1, 3, 2, 4]));
    }

    #[test]
    fn slices() {
        // tf2xla's dynamic slices clamp their starts into the operand (TensorFlow 2.21's CPU
        // session: xla.dynamic_slice(iota([3,4]), [2, -1], [2, 2]) is [[4, 5], [8, 9]]).
        let s = run1(&node("XlaDynamicSlice", &[]), &[iota(vec![3, 4]), v(&[2, -1]), v(&[2, 2])]).unwrap();
        assert_eq!(s.as_i32().unwrap(), &[4, 5, 8, 9]);
        assert!(run1(&node("XlaDynamicSlice", &[]), &[iota(vec![3, 4]), v(&[0, 0]), v(&[4, 1])]).is_err());
        // xla.dynamic_update_slice(iota([2,3]), [[-1,-2]], [5, 2]) is [[0,1,2],[3,-1,-2]].
        let up = Tensor::from_i32(vec![1, 2], vec![-1, -2]).unwrap();
        let s = run1(&node("XlaDynamicUpdateSlice", &[]), &[iota(vec![2, 3]), up, v(&[5, 2])]).unwrap();
        assert_eq!(s.as_i32().unwrap(), &[0, 1, 2, 3, -1, -2]);
        let s = run1(&node("Slice", &[]), &[iota(vec![3, 4]), v(&[1, 1]), v(&[2, -1])]).unwrap();
        assert_eq!((s.shape.clone(), s.as_i32().unwrap().to_vec()), (vec![2, 3], vec![5, 6, 7, 9, 10, 11]));
        assert!(run1(&node("Slice", &[]), &[iota(vec![3, 4]), v(&[2, 0]), v(&[2, 1])]).is_err());
        // x[1:, ::-2] on a [3,4] tensor.
        let ss = node("StridedSlice", &[("end_mask", AttrValue::I(2)), ("begin_mask", AttrValue::I(2))]);
        let s = run1(&ss, &[iota(vec![3, 4]), v(&[1, 0]), v(&[3, 0]), v(&[1, -2])]).unwrap();
        assert_eq!((s.shape.clone(), s.as_i32().unwrap().to_vec()), (vec![2, 2], vec![7, 5, 11, 9]));
        // x[-1] (shrink) and x[:, None] (new axis) and x[..., 1].
        let shrink = node("StridedSlice", &[("shrink_axis_mask", AttrValue::I(1))]);
        let s = run1(&shrink, &[iota(vec![3, 4]), v(&[-1]), v(&[0]), v(&[1])]).unwrap();
        assert_eq!((s.shape.clone(), s.as_i32().unwrap().to_vec()), (vec![4], vec![8, 9, 10, 11]));
        let newax = node(
            "StridedSlice",
            &[("begin_mask", AttrValue::I(1)), ("end_mask", AttrValue::I(1)), ("new_axis_mask", AttrValue::I(2))],
        );
        let s = run1(&newax, &[iota(vec![3]), v(&[0, 0]), v(&[0, 0]), v(&[1, 1])]).unwrap();
        assert_eq!(s.shape, vec![3, 1]);
        let ell = node("StridedSlice", &[("ellipsis_mask", AttrValue::I(1)), ("shrink_axis_mask", AttrValue::I(2))]);
        let s = run1(&ell, &[iota(vec![2, 3]), v(&[0, 1]), v(&[0, 2]), v(&[1, 1])]).unwrap();
        assert_eq!((s.shape.clone(), s.as_i32().unwrap().to_vec()), (vec![2], vec![1, 4]));
        // Out-of-range ends clamp.
        let s = run1(&node("StridedSlice", &[]), &[iota(vec![3]), v(&[1]), v(&[100]), v(&[1])]).unwrap();
        assert_eq!(s.as_i32().unwrap(), &[1, 2]);
    }

    #[test]
    fn gather_tile_fill() {
        let g = run1(&node("GatherV2", &[]), &[iota(vec![3, 2]), v(&[2, 0, 2]), Tensor::scalar_i32(0)]).unwrap();
        assert_eq!((g.shape.clone(), g.as_i32().unwrap().to_vec()), (vec![3, 2], vec![4, 5, 0, 1, 4, 5]));
        let g = run1(&node("GatherV2", &[]), &[iota(vec![3, 2]), v(&[1]), Tensor::scalar_i32(1)]).unwrap();
        assert_eq!(g.as_i32().unwrap(), &[1, 3, 5]);
        let e = run1(&node("GatherV2", &[]), &[iota(vec![3, 2]), v(&[3]), Tensor::scalar_i32(0)]).unwrap_err();
        assert!(e.to_string().contains("not in [0, 3)"), "{e}");
        let t = run1(&node("Tile", &[]), &[iota(vec![1, 2]), v(&[2, 2])]).unwrap();
        assert_eq!((t.shape.clone(), t.as_i32().unwrap().to_vec()), (vec![2, 4], vec![0, 1, 0, 1, 0, 1, 0, 1]));
        let f = run1(&node("Fill", &[]), &[v(&[2, 2]), Tensor::scalar_f32(1.5)]).unwrap();
        assert_eq!(f.as_f32().unwrap(), &[1.5; 4]);
        let b = run1(&node("BroadcastTo", &[]), &[v(&[1, 2]), v(&[2, 2])]).unwrap();
        assert_eq!(b.as_i32().unwrap(), &[1, 2, 1, 2]);
    }

    #[test]
    fn range_onehot_segments_split() {
        let r =
            run1(&node("Range", &[]), &[Tensor::scalar_i32(1), Tensor::scalar_i32(8), Tensor::scalar_i32(3)]).unwrap();
        assert_eq!(r.as_i32().unwrap(), &[1, 4, 7]);
        let oh = run1(
            &node("OneHot", &[]),
            &[v(&[0, 2, 5]), Tensor::scalar_i32(3), Tensor::scalar_f32(1.0), Tensor::scalar_f32(0.0)],
        )
        .unwrap();
        assert_eq!(oh.as_f32().unwrap(), &[1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]);
        let s =
            run1(&node("UnsortedSegmentSum", &[]), &[iota(vec![3, 2]), v(&[1, 0, 1]), Tensor::scalar_i32(2)]).unwrap();
        assert_eq!(s.as_i32().unwrap(), &[2, 3, 4, 6]);
        let parts = crate::kernels::compute(
            &node("Split", &[("num_split", AttrValue::I(2))]),
            &[Tensor::scalar_i32(1), iota(vec![2, 4])],
        )
        .unwrap();
        assert_eq!(parts[1].as_i32().unwrap(), &[2, 3, 6, 7]);
    }

    #[test]
    fn unique_keeps_first_occurrence_order() {
        let x = Tensor::from_i64(vec![7], vec![5, 3, 5, 9, 3, 3, 1]).unwrap();
        let out =
            crate::kernels::compute(&node("Unique", &[("out_idx", AttrValue::Type(DType::Int64))]), &[x]).unwrap();
        assert_eq!(out[0].to_i64_vec().unwrap(), [5, 3, 9, 1]);
        assert_eq!(out[1].dtype, DType::Int64);
        assert_eq!(out[1].to_i64_vec().unwrap(), [0, 1, 0, 2, 1, 1, 3]);
        let f = Tensor::from_f32(vec![4], vec![0.0, -0.0, f32::NAN, f32::NAN]).unwrap();
        let out = crate::kernels::compute(&node("Unique", &[]), &[f]).unwrap();
        assert_eq!(out[1].as_i32().unwrap(), &[0, 0, 1, 2], "-0 equals 0; NaNs are all distinct");
        assert!(run1(&node("Unique", &[]), &[iota(vec![2, 2])]).unwrap_err().to_string().contains("1D"));
    }

    #[test]
    fn segment_max_min_prod_fill_empty_segments_like_tensorflow() {
        let x = Tensor::from_f32(vec![4], vec![1.5, -2.0, 3.0, 0.5]).unwrap();
        let ids = v(&[0, 2, 0, -1]);
        let three = Tensor::scalar_i32(3);
        let mx = run1(&node("UnsortedSegmentMax", &[]), &[x.clone(), ids.clone(), three.clone()]).unwrap();
        assert_eq!(mx.as_f32().unwrap(), &[3.0, f32::MIN, -2.0]);
        let mn = run1(&node("UnsortedSegmentMin", &[]), &[x.clone(), ids.clone(), three.clone()]).unwrap();
        assert_eq!(mn.as_f32().unwrap(), &[1.5, f32::MAX, -2.0]);
        let p = run1(&node("UnsortedSegmentProd", &[]), &[x.clone(), ids, three.clone()]).unwrap();
        assert_eq!(p.as_f32().unwrap(), &[4.5, 1.0, -2.0]);
        let e = run1(&node("UnsortedSegmentSum", &[]), &[x, v(&[0, 3, 0, 0]), three]).unwrap_err();
        assert_eq!(e.to_string(), "segment_ids[1] = 3 is out of range [0, 3)");
    }

    #[test]
    fn stitch_invert_and_batched_gather() {
        let st = run1(
            &node("DynamicStitch", &[]),
            &[
                v(&[0, 2]),
                v(&[1, 2]),
                Tensor::from_f32(vec![2], vec![1.0, 2.0]).unwrap(),
                Tensor::from_f32(vec![2], vec![3.0, 4.0]).unwrap(),
            ],
        )
        .unwrap();
        assert_eq!(st.as_f32().unwrap(), &[1.0, 3.0, 4.0], "later pieces win");
        let inv = run1(&node("InvertPermutation", &[]), &[v(&[2, 0, 3, 1])]).unwrap();
        assert_eq!(inv.as_i32().unwrap(), &[1, 3, 0, 2]);
        assert!(run1(&node("InvertPermutation", &[]), &[v(&[0, 0])]).unwrap_err().to_string().contains("duplicated"));
        // params [2, 3], indices [2, 2], batch_dims 1, axis 1: out[b, i] = params[b, idx[b, i]].
        let g = run1(
            &node("GatherV2", &[("batch_dims", AttrValue::I(1))]),
            &[iota(vec![2, 3]), Tensor::from_i32(vec![2, 2], vec![2, 0, 1, 1]).unwrap(), Tensor::scalar_i32(1)],
        )
        .unwrap();
        assert_eq!((g.shape.clone(), g.as_i32().unwrap().to_vec()), (vec![2, 2], vec![2, 0, 4, 4]));
        let e = run1(
            &node("GatherV2", &[]),
            &[iota(vec![3]), Tensor::from_i32(vec![2, 2], vec![0, 1, 2, 7]).unwrap(), Tensor::scalar_i32(0)],
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "indices[1,1] = 7 is not in [0, 3)");
    }

    /// `StridedSliceGrad` scatters dy by rows (a whole-row copy at stride 1, a strided store
    /// otherwise); `StridedSlice` of its result gives dy back and every other element is 0.
    /// `Tile` repeats whole source rows; checked element by element against the definition.
    #[test]
    fn strided_slice_grads_and_tiles_by_rows_match_their_definitions() {
        // (shape, begin, end, strides)
        type Case<'a> = [&'a [i32]; 4];
        let cases: [Case<'_>; 5] = [
            [&[4, 6], &[3, 5], &[0, 0], &[-1, -2]],
            [&[4, 6], &[1, 0], &[3, 6], &[1, 1]],
            [&[5, 2, 7], &[0, 1, 1], &[5, 2, 6], &[2, 1, 1]],
            [&[5, 2, 7], &[4, 0, 6], &[0, 2, 0], &[-3, 1, -3]],
            [&[6], &[1], &[6], &[2]],
        ];
        for [shape, begin, end, strides] in cases {
            let slice = run1(
                &node("StridedSlice", &[]),
                &[iota(shape.iter().map(|&d| d as usize).collect()), v(begin), v(end), v(strides)],
            )
            .unwrap();
            let dy = Tensor::from_i32(slice.shape.clone(), (1..=slice.num_elements() as i32).collect()).unwrap();
            let g =
                run1(&node("StridedSliceGrad", &[]), &[v(shape), v(begin), v(end), v(strides), dy.clone()]).unwrap();
            let back = run1(&node("StridedSlice", &[]), &[g.clone(), v(begin), v(end), v(strides)]).unwrap();
            assert_eq!(back.as_i32().unwrap(), dy.as_i32().unwrap(), "{shape:?} {begin:?} {end:?} {strides:?}");
            let (gs, ds) = (g.as_i32().unwrap(), dy.as_i32().unwrap());
            assert_eq!(gs.iter().filter(|&&x| x != 0).count(), ds.len(), "{shape:?} {strides:?}: {gs:?}");
            assert_eq!(gs.iter().sum::<i32>(), ds.iter().sum::<i32>());
        }
        for (shape, multiples) in [(vec![2, 3], [2, 3, 1]), (vec![3, 1, 2], [1, 2, 3]), (vec![1, 4, 1], [3, 1, 2])] {
            let t = iota(shape.clone());
            let m = &multiples[..shape.len()];
            let out = run1(&node("Tile", &[]), &[t.clone(), v(m)]).unwrap();
            let want: Vec<usize> = shape.iter().zip(m).map(|(&d, &k)| d * k as usize).collect();
            assert_eq!(out.shape, want);
            let st = strides(&shape);
            let mut idx = vec![0usize; want.len()];
            for &got in out.as_i32().unwrap() {
                let off: usize = (0..idx.len()).map(|d| (idx[d] % shape[d]) * st[d]).sum();
                assert_eq!(got, t.as_i32().unwrap()[off], "{shape:?} {m:?} at {idx:?}");
                next_index(&mut idx, &want);
            }
        }
    }

    #[test]
    fn strided_slice_grad_scatters_dy() {
        let nd = node("StridedSliceGrad", &[("shrink_axis_mask", AttrValue::I(2))]);
        let dy = Tensor::from_f32(vec![2], vec![5.0, 6.0]).unwrap();
        let g = run1(&nd, &[v(&[3, 2]), v(&[0, 1]), v(&[3, 2]), v(&[2, 1]), dy]).unwrap();
        assert_eq!(g.as_f32().unwrap(), &[0.0, 5.0, 0.0, 0.0, 0.0, 6.0]);
    }

    #[test]
    fn range_errors_and_float_sizes() {
        let r = run1(&node("Range", &[]), &[Tensor::scalar_f32(0.5), Tensor::scalar_f32(2.0), Tensor::scalar_f32(0.3)])
            .unwrap();
        assert_eq!(r.shape, vec![5]);
        let e = run1(&node("Range", &[]), &[Tensor::scalar_i32(5), Tensor::scalar_i32(1), Tensor::scalar_i32(1)])
            .unwrap_err();
        assert_eq!(e.to_string(), "Requires start <= limit when delta > 0: 5/1");
    }

    /// Sizes from operand values are checked before allocating: past the budget or past
    /// 64 bits is a `TooLarge` error, never an abort, a capacity-overflow panic or a
    /// wrapped element count.
    #[test]
    fn hostile_sizes_are_refused_before_allocating() {
        let too_large = |e: KernelError| matches!(e, KernelError::TooLarge(_)) || panic!("{e}");
        let dims = |d: &[i64]| Tensor::from_i64(vec![d.len()], d.to_vec()).unwrap();
        let fill = |d: &[i64]| run1(&node("Fill", &[]), &[dims(d), Tensor::scalar_f32(1.0)]);
        assert!(too_large(fill(&[1_000_000, 1_000_000]).unwrap_err()));
        // 2^62 * 4 wraps to 0 in 64 bits: the old kernel made a "tensor" with no data.
        let e = fill(&[1 << 62, 4, 1]).unwrap_err();
        assert!(e.to_string().contains("more elements than can be counted"), "{e}");
        assert_eq!(fill(&[0, 1 << 62, 4]).unwrap().num_elements(), 0);
        let tile = |m: &[i64]| run1(&node("Tile", &[]), &[iota(vec![2, 3]), dims(m)]);
        assert!(too_large(tile(&[1_000_000, 1_000_000]).unwrap_err()));
        assert!(tile(&[1, i64::MAX]).unwrap_err().to_string().contains("overflow"));
        let range =
            |l: i64| run1(&node("Range", &[]), &[Tensor::scalar_i64(0), Tensor::scalar_i64(l), Tensor::scalar_i64(1)]);
        assert!(too_large(range(i64::MAX).unwrap_err()));
        assert_eq!(range(5).unwrap().as_i64().unwrap(), &[0, 1, 2, 3, 4]);
        let e = run1(
            &node("Range", &[]),
            &[Tensor::scalar_f32(0.0), Tensor::scalar_f32(f32::MAX), Tensor::scalar_f32(f32::MIN_POSITIVE)],
        )
        .unwrap_err();
        assert!(e.to_string().contains("int64") || matches!(e, KernelError::TooLarge(_)), "{e}");
        let bcast = run1(&node("BroadcastTo", &[]), &[Tensor::scalar_f32(1.0), dims(&[1 << 40, 1 << 10])]);
        assert!(too_large(bcast.unwrap_err()));
        let pad = run1(&node("Pad", &[]), &[iota(vec![2]), Tensor::from_i64(vec![1, 2], vec![0, 1 << 40]).unwrap()]);
        assert!(too_large(pad.unwrap_err()));
        let onehot = run1(
            &node("OneHot", &[]),
            &[v(&[0, 1]), Tensor::scalar_i32(i32::MAX), Tensor::scalar_f32(1.0), Tensor::scalar_f32(0.0)],
        );
        assert!(too_large(onehot.unwrap_err()));
        // Elementwise broadcasting of two small operands to a huge result.
        let (col, row) = (iota(vec![1 << 16, 1]), iota(vec![1, 1 << 16]));
        assert!(too_large(run1(&node("AddV2", &[]), &[col, row]).unwrap_err()));
    }

    /// TensorFlow's `tf.roll` on the same inputs.
    #[test]
    fn roll_wraps_each_axis_and_sums_repeated_axes() {
        let x = Tensor::from_i32(vec![3, 4], (0..12).collect()).unwrap();
        let shift = Tensor::from_i32(vec![3], vec![1, -1, 5]).unwrap();
        let axis = Tensor::from_i32(vec![3], vec![0, 1, 0]).unwrap();
        let r = run1(&node("Roll", &[]), &[x, shift, axis]).unwrap();
        assert_eq!(r.as_i32().unwrap(), &[1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8]);
        let s = Tensor::from_strings(vec![3], vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]).unwrap();
        let r = run1(&node("Roll", &[]), &[s, Tensor::scalar_i32(1), Tensor::scalar_i32(0)]).unwrap();
        assert!(
            matches!(&r.data, autoclust_graph::TensorData::Str(v) if **v == [b"c".to_vec(), b"a".to_vec(), b"b".to_vec()])
        );
        let e = run1(&node("Roll", &[]), &[Tensor::scalar_i32(1), Tensor::scalar_i32(1), Tensor::scalar_i32(0)]);
        assert!(e.is_err());
    }
}
