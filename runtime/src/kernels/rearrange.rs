//! Ops that move elements without arithmetic, for any dtype (strings included): the
//! block rearrangements `DepthToSpace` and `SpaceToDepth` (sub-pixel convolutions,
//! space-to-depth stems), `ReverseSequence` (TensorFlow 1 bidirectional RNNs), `Reverse`
//! (the V1 op, a mask of axes), `Diag` and `DiagPart` (`tf.linalg.tensor_diag`),
//! `DynamicPartition` (`tf.dynamic_partition`), the row updates `InplaceUpdate`,
//! `InplaceAdd` and `InplaceSub`, and `Empty`.
//!
//! Each computes, for every output element, the input position it comes from, and moves
//! the elements with [`super::take_or`]; sizes go through the tensor budget first. Errors
//! carry TensorFlow's messages.

use autoclust_graph::{DType, Node, Tensor};

use super::elementwise::Num;
use super::shape_ops::debug_shape;
use super::{
    arity, attr_bool_or, attr_int_or, attr_type, budget, dispatch_all, dispatch_num, int_values, one, strides, take_or,
    tensor_of, Elem, Inputs, Outputs, PureFn,
};
use crate::error::{KResult, KernelError};

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let f: PureFn = match node.op.as_str() {
        "DataFormatDimMap" | "DataFormatVecPermute" => {
            let format = |name: &str| -> KResult<Vec<u8>> {
                let f = node.attr(name).and_then(|a| a.as_str()).unwrap_or(if name == "src_format" {
                    "NHWC"
                } else {
                    "NCHW"
                });
                let what = if name == "src_format" { "Source" } else { "Destination" };
                if f.len() != 4 && f.len() != 5 {
                    return Err(KernelError::invalid(format!(
                        "{what} format must be of length 4 or 5, received {name} = {f}"
                    )));
                }
                Ok(f.as_bytes().to_vec())
            };
            let (src, dst) = (format("src_format")?, format("dst_format")?);
            let mut sorted = (src.clone(), dst.clone());
            sorted.0.sort_unstable();
            sorted.1.sort_unstable();
            if sorted.0 != sorted.1 {
                return Err(KernelError::invalid(format!(
                    "Destination format {} is not a permutation of source format {}",
                    String::from_utf8_lossy(&dst),
                    String::from_utf8_lossy(&src)
                )));
            }
            if node.op == "DataFormatDimMap" {
                Box::new(move |inp: Inputs| {
                    arity(&inp, 1)?;
                    one(data_format_dim_map(&inp[0], &src, &dst)?)
                })
            } else {
                Box::new(move |inp: Inputs| {
                    arity(&inp, 1)?;
                    one(data_format_vec_permute(&inp[0], &src, &dst)?)
                })
            }
        }
        "DepthToSpace" | "SpaceToDepth" => {
            let to_space = node.op == "DepthToSpace";
            let block = attr_int_or(node, "block_size", 0)?;
            if block < 2 {
                return Err(KernelError::invalid(format!("Value for attr 'block_size' of {block} must be at least 2")));
            }
            let format = node.attr("data_format").and_then(|a| a.as_str().map(str::to_string));
            if format.as_deref().is_some_and(|f| f != "NHWC") {
                return Err(KernelError::invalid(format!(
                    "Only NHWC data_format supported on CPU. Got {}",
                    format.unwrap_or_default()
                )));
            }
            let block = block as usize;
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                one(if to_space { depth_to_space(&inp[0], block)? } else { space_to_depth(&inp[0], block)? })
            })
        }
        "ReverseSequence" => {
            let seq_dim = attr_int_or(node, "seq_dim", -1)?;
            let batch_dim = attr_int_or(node, "batch_dim", 0)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                one(reverse_sequence(&inp[0], &inp[1], seq_dim, batch_dim)?)
            })
        }
        "Reverse" => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            let dims = inp[1].as_bool().filter(|_| inp[1].dtype == DType::Bool && inp[1].rank() == 1);
            let Some(dims) = dims.filter(|d| d.len() == inp[0].rank()) else {
                return Err(KernelError::invalid(format!(
                    "'dims' must have the same number of values as 'input' has dimensions ({}), got shape {:?}",
                    inp[0].rank(),
                    inp[1].shape
                )));
            };
            let axes: Vec<usize> = (0..dims.len()).filter(|&i| dims[i]).collect();
            one(reverse_axes(&inp[0], &axes)?)
        }),
        "Diag" => Box::new(|inp: Inputs| {
            arity(&inp, 1)?;
            let d = &inp[0];
            if d.rank() == 0 {
                return Err(KernelError::invalid("Input must be at least rank 1, got 0"));
            }
            let n = d.num_elements();
            let mut shape = d.shape.clone();
            shape.extend_from_slice(&d.shape);
            budget(d.dtype, &shape)?;
            let src: Vec<Option<usize>> = (0..n * n).map(|i| if i / n == i % n { Some(i / n) } else { None }).collect();
            one(take_or(d, &src, Some(&zero_of(d)?), shape)?)
        }),
        "DiagPart" => Box::new(|inp: Inputs| {
            arity(&inp, 1)?;
            let t = &inp[0];
            let r = t.rank();
            if r == 0 || !r.is_multiple_of(2) || t.shape[..r / 2] != t.shape[r / 2..] {
                return Err(KernelError::invalid(format!(
                    "Invalid shape {:?}: the input must have an even rank and dimensions [D1, ..., Dk, D1, ..., Dk]",
                    t.shape
                )));
            }
            let n: usize = t.shape[..r / 2].iter().product();
            let src: Vec<Option<usize>> = (0..n).map(|i| Some(i * n + i)).collect();
            one(take_or(t, &src, None, t.shape[..r / 2].to_vec())?)
        }),
        "DynamicPartition" => {
            let parts = attr_int_or(node, "num_partitions", 1)?;
            if parts < 1 {
                return Err(KernelError::invalid(format!("num_partitions = {parts} must be at least 1")));
            }
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                dynamic_partition(&inp[0], &inp[1], parts as usize)
            })
        }
        "InplaceUpdate" | "InplaceAdd" | "InplaceSub" => {
            let how = match node.op.as_str() {
                "InplaceUpdate" => Row::Update,
                "InplaceAdd" => Row::Add,
                _ => Row::Sub,
            };
            Box::new(move |inp: Inputs| {
                arity(&inp, 3)?;
                one(inplace(&inp[0], &inp[1], &inp[2], how)?)
            })
        }
        "Empty" => {
            let dtype = attr_type(node, "dtype")?;
            // `init` asks for zeros; without it TensorFlow leaves memory uninitialised, and
            // zeros are one of its possible contents.
            attr_bool_or(node, "init", false)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let shape = super::shape_values(&inp[0], "shape")?;
                budget(dtype, &shape)?;
                one(Tensor::zeros(dtype, shape).map_err(|e| KernelError::invalid(e.to_string()))?)
            })
        }
        _ => return Ok(None),
    };
    Ok(Some(f))
}

/// A one-element zero of `t`'s dtype (the fill of `Diag`).
fn zero_of(t: &Tensor) -> KResult<Tensor> {
    Tensor::zeros(t.dtype, Vec::new()).map_err(|e| KernelError::invalid(e.to_string()))
}

fn nhwc(t: &Tensor) -> KResult<[usize; 4]> {
    match t.shape[..] {
        [n, h, w, c] => Ok([n, h, w, c]),
        _ => Err(KernelError::invalid(format!("Input rank should be: 4 instead of: {}", t.rank()))),
    }
}

/// `out[b, h·s + i, w·s + j, c] = in[b, h, w, (i·s + j)·C + c]`.
fn depth_to_space(t: &Tensor, s: usize) -> KResult<Tensor> {
    let [n, h, w, d] = nhwc(t)?;
    if d % (s * s) != 0 {
        return Err(KernelError::invalid(format!("Input depth dimension {d} should be divisible by: {}", s * s)));
    }
    let c = d / (s * s);
    let shape = vec![n, h * s, w * s, c];
    let mut src = Vec::with_capacity(budget(t.dtype, &shape)?);
    for b in 0..n {
        for oh in 0..h * s {
            for ow in 0..w * s {
                let base = ((b * h + oh / s) * w + ow / s) * d + ((oh % s) * s + ow % s) * c;
                src.extend((0..c).map(|k| Some(base + k)));
            }
        }
    }
    take_or(t, &src, None, shape)
}

/// The inverse of [`depth_to_space`].
fn space_to_depth(t: &Tensor, s: usize) -> KResult<Tensor> {
    let [n, h, w, c] = nhwc(t)?;
    if h % s != 0 || w % s != 0 {
        return Err(KernelError::invalid(format!(
            "Image width {w} and height {h} should be divisible by block_size: {s}"
        )));
    }
    let shape = vec![n, h / s, w / s, c * s * s];
    let mut src = Vec::with_capacity(budget(t.dtype, &shape)?);
    for b in 0..n {
        for oh in 0..h / s {
            for ow in 0..w / s {
                for i in 0..s {
                    for j in 0..s {
                        let base = ((b * h + oh * s + i) * w + ow * s + j) * c;
                        src.extend((0..c).map(|k| Some(base + k)));
                    }
                }
            }
        }
    }
    take_or(t, &src, None, shape)
}

/// Index stepping: calls `f(flat, index)` for every element of `shape` in row-major order.
fn for_each_index(shape: &[usize], mut f: impl FnMut(usize, &[usize])) {
    let n: usize = shape.iter().product();
    let mut idx = vec![0usize; shape.len()];
    for flat in 0..n {
        f(flat, &idx);
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

fn reverse_sequence(t: &Tensor, lens: &Tensor, seq_dim: i64, batch_dim: i64) -> KResult<Tensor> {
    let r = t.rank() as i64;
    let axis = |d: i64, what: &str| {
        usize::try_from(d)
            .ok()
            .filter(|&d| (d as i64) < r)
            .ok_or_else(|| KernelError::invalid(format!("Invalid {what} {d} for input of rank {r}")))
    };
    let (sd, bd) = (axis(seq_dim, "seq_dim")?, axis(batch_dim, "batch_dim")?);
    if sd == bd {
        return Err(KernelError::invalid(format!("seq_dim == batch_dim == {sd}")));
    }
    let lens = int_values(lens, "seq_lengths")?;
    if lens.len() != t.shape[bd] {
        return Err(KernelError::invalid(format!(
            "Length of seq_lengths != input.dims({bd}), ({} vs. {})",
            lens.len(),
            t.shape[bd]
        )));
    }
    for (i, &l) in lens.iter().enumerate() {
        if l < 0 {
            return Err(KernelError::invalid(format!("seq_lens({i}) < 0")));
        }
        if l as usize > t.shape[sd] {
            return Err(KernelError::invalid(format!("seq_lens({i}) > input.dims({sd})")));
        }
    }
    let st = strides(&t.shape);
    let mut src = Vec::with_capacity(t.num_elements());
    for_each_index(&t.shape, |flat, idx| {
        let (l, s) = (lens[idx[bd]] as usize, idx[sd]);
        src.push(Some(if s < l { flat - s * st[sd] + (l - 1 - s) * st[sd] } else { flat }));
    });
    take_or(t, &src, None, t.shape.clone())
}

/// `t` reversed along each of `axes`.
fn reverse_axes(t: &Tensor, axes: &[usize]) -> KResult<Tensor> {
    let st = strides(&t.shape);
    let mut src = Vec::with_capacity(t.num_elements());
    for_each_index(&t.shape, |flat, idx| {
        let mut s = flat;
        for &a in axes {
            s = s - idx[a] * st[a] + (t.shape[a] - 1 - idx[a]) * st[a];
        }
        src.push(Some(s));
    });
    take_or(t, &src, None, t.shape.clone())
}

/// `DynamicPartition`: output `p` holds, in order, the slices `data[i…]` whose
/// `partitions[i…] == p` (`partitions`' shape a prefix of `data`'s).
fn dynamic_partition(data: &Tensor, partitions: &Tensor, parts: usize) -> KResult<Outputs> {
    if partitions.dtype != DType::Int32 {
        return Err(KernelError::DType(partitions.dtype));
    }
    let pr = partitions.rank();
    if data.rank() < pr || data.shape[..pr] != partitions.shape[..] {
        return Err(KernelError::invalid(format!(
            "data.shape must start with partitions.shape, got data.shape = {:?}, partitions.shape = {:?}",
            data.shape, partitions.shape
        )));
    }
    let p = int_values(partitions, "partitions")?;
    let slice: usize = data.shape[pr..].iter().product();
    let mut srcs: Vec<Vec<Option<usize>>> = vec![Vec::new(); parts];
    for (i, &q) in p.iter().enumerate() {
        let Some(dst) = usize::try_from(q).ok().filter(|&q| q < parts) else {
            let at = index_of(i, &partitions.shape);
            return Err(KernelError::invalid(format!("partitions{at} = {q} is not in [0, {parts})")));
        };
        srcs[dst].extend((i * slice..(i + 1) * slice).map(Some));
    }
    let mut out = Outputs::new();
    for src in srcs {
        let mut shape = vec![src.len() / slice.max(1)];
        if slice == 0 {
            shape[0] = 0;
        }
        shape.extend_from_slice(&data.shape[pr..]);
        out.push(take_or(data, &src, None, shape)?);
    }
    if slice == 0 {
        // Rows of no elements still count: recount them from the partitions.
        for (q, t) in out.iter_mut().enumerate() {
            t.shape[0] = p.iter().filter(|&&x| x as usize == q).count();
        }
    }
    Ok(out)
}

/// TensorFlow's spelling of a multi-index in messages: `[1]`, `[0,2]`.
fn index_of(mut flat: usize, shape: &[usize]) -> String {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = flat % shape[d].max(1);
        flat /= shape[d].max(1);
    }
    format!("[{}]", idx.iter().map(usize::to_string).collect::<Vec<_>>().join(","))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Row {
    Update,
    Add,
    Sub,
}

/// `x` with rows `i[k]` replaced by (or increased or decreased by) `v[k]`, in order.
fn inplace(x: &Tensor, i: &Tensor, v: &Tensor, how: Row) -> KResult<Tensor> {
    let rows = int_values(i, "i")?;
    if i.rank() > 1 || x.rank() == 0 || v.rank() != x.rank() || v.shape[0] != rows.len() || v.shape[1..] != x.shape[1..]
    {
        return Err(KernelError::invalid(format!(
            "x, i and v shapes do not agree: x {:?}, i {:?}, v {:?}",
            x.shape, i.shape, v.shape
        )));
    }
    if v.dtype != x.dtype {
        return Err(KernelError::invalid(format!("x is {} but v is {}", x.dtype, v.dtype)));
    }
    let row: usize = x.shape[1..].iter().product();
    let check = |r: i64| {
        usize::try_from(r)
            .ok()
            .filter(|&r| r < x.shape[0])
            .ok_or_else(|| KernelError::invalid(format!("i = {r} is not in [0, {})", x.shape[0])))
    };
    let checked: Vec<usize> = rows.iter().map(|&r| check(r)).collect::<KResult<_>>()?;
    if how == Row::Update {
        return dispatch_all!(x.dtype, update_rows(x, &checked, v, row));
    }
    dispatch_num!(x.dtype, add_rows(x, &checked, v, row, how == Row::Sub))
}

fn update_rows<T: Elem>(x: &Tensor, rows: &[usize], v: &Tensor, row: usize) -> KResult<Tensor> {
    let mut out = T::slice(x).to_vec();
    let v = T::slice(v);
    for (k, &r) in rows.iter().enumerate() {
        out[r * row..(r + 1) * row].copy_from_slice(&v[k * row..(k + 1) * row]);
    }
    Ok(tensor_of(x.shape.clone(), out))
}

fn add_rows<T: Num>(x: &Tensor, rows: &[usize], v: &Tensor, row: usize, sub: bool) -> KResult<Tensor> {
    let mut out = T::slice(x).to_vec();
    let v = T::slice(v);
    for (k, &r) in rows.iter().enumerate() {
        for (o, &d) in out[r * row..(r + 1) * row].iter_mut().zip(&v[k * row..(k + 1) * row]) {
            *o = if sub { o.sub(d) } else { o.add(d) };
        }
    }
    Ok(tensor_of(x.shape.clone(), out))
}

/// `DataFormatDimMap`: each axis index of the source layout (taken modulo the rank, as
/// `floormod`) becomes that axis' index in the destination layout.
fn data_format_dim_map(x: &Tensor, src: &[u8], dst: &[u8]) -> KResult<Tensor> {
    let rank = src.len() as i64;
    let map: Vec<i64> = src.iter().map(|c| dst.iter().position(|d| d == c).expect("a permutation") as i64).collect();
    let y: Vec<i64> = super::int_values(x, "x")?.iter().map(|&v| map[v.rem_euclid(rank) as usize]).collect();
    super::int_tensor(x.dtype, x.shape.clone(), y)
}

/// `DataFormatVecPermute`: a vector (or `[n, 2]` matrix of rows) of per-axis values in the source
/// layout, reordered into the destination layout; `n` is the layout's length or its number of
/// spatial axes (the layout without `N` and `C`).
fn data_format_vec_permute(x: &Tensor, src: &[u8], dst: &[u8]) -> KResult<Tensor> {
    let spatial = |f: &[u8]| f.iter().copied().filter(|c| *c != b'N' && *c != b'C').collect::<Vec<u8>>();
    let n = x.shape.first().copied().unwrap_or(0);
    let (full, sp) = (src.len(), spatial(src).len());
    match x.rank() {
        1 if n == full || n == sp => {}
        1 => {
            return Err(KernelError::invalid(format!(
                "1D input must be of size {sp} or {full}, but got shape {}",
                debug_shape(&x.shape)
            )))
        }
        2 if n != full && n != sp => {
            return Err(KernelError::invalid(format!(
                "First dimension of 2D input must be of size {sp} or {full}, but got shape {}",
                debug_shape(&x.shape)
            )))
        }
        2 if x.shape[1] != 2 => {
            return Err(KernelError::invalid(format!(
                "Second dimension of 2D input must be of size 2, but got shape {}",
                debug_shape(&x.shape)
            )))
        }
        2 => {}
        _ => {
            return Err(KernelError::invalid(format!(
                "input must be a vector or 2D tensor, but got shape {}",
                debug_shape(&x.shape)
            )))
        }
    }
    let (src, dst) = if n == full { (src.to_vec(), dst.to_vec()) } else { (spatial(src), spatial(dst)) };
    let row = if x.rank() == 2 { 2 } else { 1 };
    let v = super::int_values(x, "x")?;
    let mut y = Vec::with_capacity(v.len());
    for c in &dst {
        let from = src.iter().position(|s| s == c).expect("a permutation");
        y.extend_from_slice(&v[from * row..(from + 1) * row]);
    }
    super::int_tensor(x.dtype, x.shape.clone(), y)
}

#[cfg(test)]
#[allow(clippy::excessive_precision, clippy::approx_constant)] // TensorFlow's printed values
mod tests {
    use super::*;
    use crate::kernels::tests_support::{node, run1};
    use autoclust_graph::AttrValue;

    /// TensorFlow 2.21's `DataFormatDimMap` and `DataFormatVecPermute`.
    #[test]
    fn data_format_ops_match_tensorflow() {
        let fmt = |op: &str, src: &str, dst: &str| {
            node(op, &[("src_format", AttrValue::S(src.into())), ("dst_format", AttrValue::S(dst.into()))])
        };
        let ints = |v: &[i32]| Tensor::from_i32(vec![v.len()], v.to_vec()).unwrap();
        let map = |src: &str, dst: &str, x: &[i32]| run1(&fmt("DataFormatDimMap", src, dst), &[ints(x)]);
        assert_eq!(
            map("NHWC", "NCHW", &[-4, -3, -2, -1, 0, 1, 2, 3, 4]).unwrap().as_i32().unwrap(),
            &[0, 2, 3, 1, 0, 2, 3, 1, 0]
        );
        assert_eq!(map("NDHWC", "NCDHW", &[0, 1, 2, 3, 4]).unwrap().as_i32().unwrap(), &[0, 2, 3, 4, 1]);
        assert_eq!(map("NCHW", "NHWC", &[0, 1, 2, 3]).unwrap().as_i32().unwrap(), &[0, 3, 1, 2]);
        let defaults = run1(&node("DataFormatDimMap", &[]), &[Tensor::scalar_i64(1)]).unwrap();
        assert_eq!(defaults.as_i64().unwrap(), &[2]);
        let e = map("NHW", "NCH", &[0]).unwrap_err().to_string();
        assert!(e.contains("Source format must be of length 4 or 5, received src_format = NHW"), "{e}");
        let perm = |src: &str, dst: &str, x: Tensor| run1(&fmt("DataFormatVecPermute", src, dst), &[x]);
        assert_eq!(perm("NHWC", "NCHW", ints(&[10, 20, 30, 40])).unwrap().as_i32().unwrap(), &[10, 40, 20, 30]);
        assert_eq!(perm("NCHW", "NHWC", ints(&[10, 20, 30, 40])).unwrap().as_i32().unwrap(), &[10, 30, 40, 20]);
        assert_eq!(
            perm("NDHWC", "NCDHW", ints(&[10, 20, 30, 40, 50])).unwrap().as_i32().unwrap(),
            &[10, 50, 20, 30, 40]
        );
        assert_eq!(perm("ABCD", "BADC", ints(&[1, 2, 3, 4])).unwrap().as_i32().unwrap(), &[2, 1, 4, 3]);
        assert_eq!(perm("NHWC", "NCHW", ints(&[10, 20])).unwrap().as_i32().unwrap(), &[10, 20]);
        let rows = Tensor::from_i64(vec![4, 2], vec![1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        assert_eq!(perm("NHWC", "NCHW", rows).unwrap().as_i64().unwrap(), &[1, 2, 7, 8, 3, 4, 5, 6]);
        let e = perm("NHWC", "NCHW", ints(&[1, 2, 3])).unwrap_err().to_string();
        assert!(e.contains("1D input must be of size 2 or 4, but got shape [3]"), "{e}");
        let e = perm("NHWC", "NCH", ints(&[1, 2, 3, 4])).unwrap_err().to_string();
        assert!(e.contains("Destination format must be of length 4 or 5, received dst_format = NCH"), "{e}");
    }

    fn iota_f32(shape: &[usize]) -> Tensor {
        let n = shape.iter().product::<usize>();
        Tensor::from_f32(shape.to_vec(), (0..n).map(|i| i as f32).collect()).unwrap()
    }
    fn iota_i32(shape: &[usize]) -> Tensor {
        let n = shape.iter().product::<usize>();
        Tensor::from_i32(shape.to_vec(), (0..n as i32).collect()).unwrap()
    }
    fn f(t: &Tensor) -> Vec<f32> {
        t.as_f32().unwrap().to_vec()
    }

    // Every expected value and message below is TensorFlow 2.21's.

    #[test]
    fn depth_to_space_and_back_match_tensorflow() {
        let bs = [("block_size", AttrValue::I(2))];
        let r = run1(&node("DepthToSpace", &bs), &[iota_f32(&[2, 2, 2, 8])]).unwrap();
        assert_eq!(r.shape, vec![2, 4, 4, 2]);
        assert_eq!(
            f(&r)[..32],
            [
                0., 1., 2., 3., 8., 9., 10., 11., 4., 5., 6., 7., 12., 13., 14., 15., 16., 17., 18., 19., 24., 25.,
                26., 27., 20., 21., 22., 23., 28., 29., 30., 31.
            ]
        );
        let back = run1(&node("SpaceToDepth", &bs), &[r]).unwrap();
        assert_eq!(f(&back), f(&iota_f32(&[2, 2, 2, 8])));
        let r = run1(&node("SpaceToDepth", &bs), &[iota_f32(&[1, 4, 6, 2])]).unwrap();
        assert_eq!(r.shape, vec![1, 2, 3, 8]);
        assert_eq!(f(&r)[..16], [0., 1., 2., 3., 12., 13., 14., 15., 4., 5., 6., 7., 16., 17., 18., 19.]);
        let e = run1(&node("SpaceToDepth", &bs), &[iota_f32(&[1, 3, 4, 1])]).unwrap_err();
        assert_eq!(e.to_string(), "Image width 4 and height 3 should be divisible by block_size: 2");
        let e = run1(&node("DepthToSpace", &bs), &[iota_f32(&[1, 3, 4, 3])]).unwrap_err();
        assert_eq!(e.to_string(), "Input depth dimension 3 should be divisible by: 4");
        let strings = Tensor::from_strings(vec![1, 1, 1, 4], (0..4).map(|i| vec![b'a' + i]).collect()).unwrap();
        let r = run1(&node("DepthToSpace", &bs), &[strings]).unwrap();
        assert_eq!(r.shape, vec![1, 2, 2, 1]);
    }

    #[test]
    fn reverse_sequence_and_reverse_match_tensorflow() {
        let n = node("ReverseSequence", &[("seq_dim", AttrValue::I(1)), ("batch_dim", AttrValue::I(0))]);
        let lens = Tensor::from_i64(vec![3], vec![2, 0, 5]).unwrap();
        let r = run1(&n, &[iota_i32(&[3, 5, 2]), lens]).unwrap();
        assert_eq!(
            r.as_i32().unwrap(),
            &[
                2, 3, 0, 1, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 28, 29, 26, 27, 24, 25, 22, 23,
                20, 21
            ]
        );
        let n2 = node("ReverseSequence", &[("seq_dim", AttrValue::I(0)), ("batch_dim", AttrValue::I(1))]);
        let r = run1(&n2, &[iota_f32(&[4, 3]), Tensor::from_i32(vec![3], vec![3, 1, 4]).unwrap()]).unwrap();
        assert_eq!(f(&r), [6., 1., 11., 3., 4., 8., 0., 7., 5., 9., 10., 2.]);
        let e = run1(&n, &[iota_i32(&[3, 5, 2]), Tensor::from_i64(vec![3], vec![2, 6, 5]).unwrap()]).unwrap_err();
        assert_eq!(e.to_string(), "seq_lens(1) > input.dims(1)");
        let dims = Tensor::from_bool(vec![2], vec![true, false]).unwrap();
        let r = run1(&node("Reverse", &[]), &[iota_f32(&[4, 3]), dims]).unwrap();
        assert_eq!(f(&r), [9., 10., 11., 6., 7., 8., 3., 4., 5., 0., 1., 2.]);
    }

    #[test]
    fn diag_and_diag_part_match_tensorflow() {
        let r = run1(&node("Diag", &[]), &[iota_f32(&[2, 3])]).unwrap();
        assert_eq!(r.shape, vec![2, 3, 2, 3]);
        let want: Vec<f32> = (0..36).map(|i| if i % 7 == 0 { (i / 7) as f32 } else { 0.0 }).collect();
        assert_eq!(f(&r), want);
        let r = run1(&node("DiagPart", &[]), &[iota_f32(&[2, 3, 2, 3])]).unwrap();
        assert_eq!(r.shape, vec![2, 3]);
        assert_eq!(f(&r), [0., 7., 14., 21., 28., 35.]);
        assert!(run1(&node("DiagPart", &[]), &[iota_f32(&[2, 3])]).is_err());
    }

    #[test]
    fn dynamic_partition_matches_tensorflow() {
        let n = node("DynamicPartition", &[("num_partitions", AttrValue::I(3))]);
        let data = Tensor::from_f32(vec![6], (10..16).map(|x| x as f32).collect()).unwrap();
        let p = Tensor::from_i32(vec![6], vec![1, 0, 2, 1, 1, 0]).unwrap();
        let out = crate::kernels::compute(&n, &[data, p]).unwrap();
        assert_eq!(f(&out[0]), [11., 15.]);
        assert_eq!(f(&out[1]), [10., 13., 14.]);
        assert_eq!(f(&out[2]), [12.]);
        let n2 = node("DynamicPartition", &[("num_partitions", AttrValue::I(2))]);
        let p = Tensor::from_i32(vec![2, 3], vec![0, 1, 0, 1, 1, 0]).unwrap();
        let out = crate::kernels::compute(&n2, &[iota_i32(&[2, 3, 2]), p]).unwrap();
        assert_eq!((out[0].shape.clone(), out[0].as_i32().unwrap()), (vec![3, 2], &[0, 1, 4, 5, 10, 11][..]));
        assert_eq!(out[1].as_i32().unwrap(), &[2, 3, 6, 7, 8, 9]);
        let p = Tensor::from_i32(vec![3], vec![0, 3, 1]).unwrap();
        let e = crate::kernels::compute(&n2, &[iota_f32(&[3]), p]).unwrap_err();
        assert_eq!(e.to_string(), "partitions[1] = 3 is not in [0, 2)");
    }

    #[test]
    fn inplace_row_updates_match_tensorflow() {
        let x = iota_f32(&[4, 3]);
        let v = Tensor::from_f32(vec![2, 3], vec![100.0; 6]).unwrap();
        let i = Tensor::from_i32(vec![2], vec![3, 1]).unwrap();
        let r = run1(&node("InplaceUpdate", &[]), &[x.clone(), i.clone(), v.clone()]).unwrap();
        assert_eq!(f(&r), [0., 1., 2., 100., 100., 100., 6., 7., 8., 100., 100., 100.]);
        let r = run1(&node("InplaceAdd", &[]), &[x.clone(), i, v.clone()]).unwrap();
        assert_eq!(f(&r), [0., 1., 2., 103., 104., 105., 6., 7., 8., 109., 110., 111.]);
        let twice = Tensor::from_i32(vec![2], vec![0, 0]).unwrap();
        let r = run1(&node("InplaceSub", &[]), &[x.clone(), twice, v.clone()]).unwrap();
        assert_eq!(f(&r), [-200., -199., -198., 3., 4., 5., 6., 7., 8., 9., 10., 11.]);
        let bad = Tensor::from_i32(vec![2], vec![0, 4]).unwrap();
        assert!(run1(&node("InplaceUpdate", &[]), &[x, bad, v]).is_err());
        let e = node("Empty", &[("dtype", AttrValue::Type(DType::Float32)), ("init", AttrValue::B(true))]);
        let r = run1(&e, &[Tensor::from_i32(vec![2], vec![2, 3]).unwrap()]).unwrap();
        assert_eq!((r.shape.clone(), f(&r)), (vec![2, 3], vec![0.0; 6]));
    }
}
