//! Shape and data-movement ops of a cluster body: views (`Reshape`, `ExpandDims`,
//! `Squeeze`, `Transpose`, slices, `BroadcastTo`, `ReverseV2`), copies and scatters that
//! move elements (`Split`, `Unpack`, `Pack`, `ConcatV2`, `Pad`, `Tile`, `GatherV2`, the
//! TensorScatter ops, `StridedSliceGrad`, `SpaceToBatchND`/`BatchToSpaceND`, `Bitcast`), and
//! encapsulation's shape check of a variable write. Each output's shape is computed from
//! the concrete input shapes and the compile-time operands (a shape, an axis, a slice
//! spec); an operand not known at compile time declines the body to the interpreter.

use super::*;

/// The ops of this family; any other is "no lowering" (the next family is tried).
pub(super) fn analyze(node: &Node, ins: &[ValueInfo]) -> Result<NodeInfo, CompileError> {
    let op = node.op.as_str();
    let need = |n: usize| check_arity(node, ins, n);
    match op {
        // Encapsulation's check of a variable write (value, current): decided here, at the
        // shapes being compiled for; a mismatch leaves the call to the interpreter, whose
        // kernel reports it as the plain executor does.
        autoclust_graph::protocol::SAME_SHAPE_OP => {
            need(2)?;
            if ins[0].shape != ins[1].shape {
                return Err(CompileError::unsupported(
                    node,
                    format!("a variable write of shape {:?} to a variable of shape {:?}", ins[0].shape, ins[1].shape),
                ));
            }
            // Passed, it is a copy of the value: it fuses into the loop that computes the
            // value and the loop that applies it (an `AssignAddVariableOp`'s add), where a
            // view between them cut Keras optimizers' updates into 1-op loops.
            Ok(same_values(&ins[0], ins[0].shape.clone()))
        }
        "Reshape" => {
            need(2)?;
            let want = int_const(node, &ins[1], "shape")?;
            // TensorFlow's rules: one -1 at most, no other negative size (found by fuzzing: a
            // size of -2³¹ was taken as a second wildcard, where the kernel refuses the graph).
            if let Some((i, d)) = want.iter().enumerate().find(|(_, &d)| d < -1) {
                return Err(CompileError::Invalid(format!(
                    "node '{}': Reshape: size {i} must be non-negative, not {d}",
                    node.name
                )));
            }
            if want.iter().filter(|&&d| d == -1).count() > 1 {
                return Err(CompileError::Invalid(format!(
                    "node '{}': Reshape: can only specify one unknown dimension, got {want:?}",
                    node.name
                )));
            }
            let n = ins[0].elements();
            let known = want.iter().filter(|&&d| d >= 0).try_fold(1usize, |a, &d| a.checked_mul(d as usize));
            let shape: Vec<usize> = want
                .iter()
                .map(|&d| if d < 0 { known.and_then(|k| n.checked_div(k)).unwrap_or(0) } else { d as usize })
                .collect();
            if shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) != Some(n) {
                return Err(CompileError::Invalid(format!(
                    "node '{}': cannot reshape {:?} to {want:?}",
                    node.name, ins[0].shape
                )));
            }
            Ok(same_values(&ins[0], shape))
        }
        "ExpandDims" => {
            need(2)?;
            let a = int_const(node, &ins[1], "axis")?;
            let r = ins[0].shape.len() as i64 + 1;
            let a = a.first().copied().unwrap_or(0);
            let a = if a < 0 { a + r } else { a };
            if !(0..r).contains(&a) {
                return Err(CompileError::Invalid(format!("node '{}': bad axis", node.name)));
            }
            let mut shape = ins[0].shape.clone();
            shape.insert(a as usize, 1);
            Ok(NodeInfo { kind: NodeKind::View, outputs: vec![vi(ins[0].dtype, shape)] })
        }
        "Squeeze" => {
            need(1)?;
            let dims = node.attr("squeeze_dims").or(node.attr("axis")).and_then(AttrValue::as_int_list).unwrap_or(&[]);
            let r = ins[0].shape.len();
            let axes: Vec<usize> = dims.iter().map(|&a| norm_axis(node, a, r)).collect::<Result<_, _>>()?;
            let shape: Vec<usize> = ins[0]
                .shape
                .iter()
                .enumerate()
                .filter(|(i, &d)| !(d == 1 && (axes.is_empty() || axes.contains(i))))
                .map(|(_, &d)| d)
                .collect();
            Ok(same_values(&ins[0], shape))
        }
        // Split(axis, value) into `num_split` equal pieces; SplitV(value, size_splits, axis)
        // with at most one size of -1 (the rest).
        "Split" | "SplitV" => {
            let (value, axis) = if op == "Split" {
                need(2)?;
                (&ins[1], int_const(node, &ins[0], "the axis")?)
            } else {
                need(3)?;
                (&ins[0], int_const(node, &ins[2], "the axis")?)
            };
            let a = norm_axis(node, axis.first().copied().unwrap_or(0), value.shape.len())?;
            let dim = value.shape[a];
            let sizes: Vec<usize> = if op == "Split" {
                let n = attr_int(node, "num_split").filter(|&n| n > 0).ok_or_else(|| {
                    CompileError::Invalid(format!("node '{}' (Split) needs a positive num_split", node.name))
                })? as usize;
                if dim % n != 0 {
                    return Err(CompileError::unsupported(
                        node,
                        format!("{dim} does not split {n} ways (the kernel reports it)"),
                    ));
                }
                vec![dim / n; n]
            } else {
                let want = int_const(node, &ins[1], "size_splits")?;
                let known: i64 = want.iter().filter(|&&x| x >= 0).sum();
                let free = want.iter().filter(|&&x| x == -1).count();
                if want.iter().any(|&x| x < -1) || free > 1 || known > dim as i64 || (free == 0 && known != dim as i64)
                {
                    return Err(CompileError::unsupported(
                        node,
                        format!("size_splits {want:?} of {dim} (the kernel reports it)"),
                    ));
                }
                want.iter().map(|&x| if x < 0 { dim - known as usize } else { x as usize }).collect()
            };
            let outputs = sizes
                .iter()
                .map(|&k| {
                    let mut s = value.shape.clone();
                    s[a] = k;
                    vi(value.dtype, s)
                })
                .collect();
            Ok(kernel(KernelOp::Split { axis: a, sizes }, vec![if op == "Split" { 1 } else { 0 }], outputs))
        }
        // StridedSliceGrad(shape, begin, end, strides, dy): zeros of `shape` with `dy` written
        // into the elements the forward StridedSlice read (the same view, scattered).
        "StridedSliceGrad" => {
            need(5)?;
            let shape = int_const(node, &ins[0], "shape")?;
            let shape: Vec<usize> = shape.iter().map(|&d| usize::try_from(d).unwrap_or(usize::MAX)).collect();
            let dy = &ins[4];
            within_budget(node, dy.dtype, &shape)?;
            let x = vi(dy.dtype, shape.clone());
            let fwd = strided_slice(node, &[x, ins[1].clone(), ins[2].clone(), ins[3].clone()])?;
            let (NodeKind::Kernel { op: KernelOp::Strided { dims, strides, offset }, .. }, Some(out)) =
                (fwd.kind, fwd.outputs.first())
            else {
                return Err(CompileError::Invalid(format!("node '{}': no strided view", node.name)));
            };
            if out.shape != dy.shape {
                return Err(CompileError::unsupported(
                    node,
                    "dy does not have the slice's shape (the kernel reports it)",
                ));
            }
            let op = KernelOp::StridedScatter { dims, strides, offset };
            Ok(kernel(op, vec![4], vec![vi(dy.dtype, shape)]))
        }
        // ReverseV2: a strided view walking the reversed axes backwards.
        "ReverseV2" => {
            need(2)?;
            let x = &ins[0];
            let r = x.shape.len();
            let mut rev = vec![false; r];
            for a in int_const(node, &ins[1], "axis")? {
                let a = norm_axis(node, a, r)?;
                if std::mem::replace(&mut rev[a], true) {
                    return Err(CompileError::Invalid(format!(
                        "node '{}' (ReverseV2): axis {a} given twice",
                        node.name
                    )));
                }
            }
            let st = strides_of(&x.shape);
            let mut offset = 0isize;
            let mut strides = Vec::with_capacity(r);
            for d in 0..r {
                if rev[d] && x.shape[d] > 0 {
                    offset += (x.shape[d] - 1) as isize * st[d] as isize;
                    strides.push(-(st[d] as isize));
                } else {
                    strides.push(st[d] as isize);
                }
            }
            let dims = x.shape.clone();
            Ok(kernel(KernelOp::Strided { dims: dims.clone(), strides, offset }, vec![0], vec![vi(x.dtype, dims)]))
        }
        // Unpack: a Split into pieces of one along the axis, each without that axis.
        "Unpack" => {
            need(1)?;
            let x = &ins[0];
            let a = norm_axis(node, attr_int(node, "axis").unwrap_or(0), x.shape.len())?;
            let n = x.shape[a];
            if attr_int(node, "num").is_some_and(|k| k != n as i64) {
                return Err(CompileError::unsupported(
                    node,
                    format!("num does not match dimension {n} (the kernel reports it)"),
                ));
            }
            let mut piece = x.shape.clone();
            piece.remove(a);
            let outputs = (0..n).map(|_| vi(x.dtype, piece.clone())).collect();
            Ok(kernel(KernelOp::Split { axis: a, sizes: vec![1; n] }, vec![0], outputs))
        }
        // Zero padding: the input scattered into a zeroed output of the padded shape.
        "Pad" => {
            need(2)?;
            let x = &ins[0];
            let p = int_const(node, &ins[1], "paddings")?;
            let r = x.shape.len();
            if p.len() != 2 * r || p.iter().any(|&v| v < 0) {
                return Err(CompileError::unsupported(node, format!("paddings {p:?} for rank {r}")));
            }
            let out: Vec<usize> = (0..r).map(|d| x.shape[d] + p[2 * d] as usize + p[2 * d + 1] as usize).collect();
            within_budget(node, x.dtype, &out)?;
            let st = strides_of(&out);
            let offset = (0..r).map(|d| p[2 * d] as isize * st[d] as isize).sum();
            let strides = st.iter().map(|&s| s as isize).collect();
            let op = KernelOp::StridedScatter { dims: x.shape.clone(), strides, offset };
            Ok(kernel(op, vec![0], vec![vi(x.dtype, out)]))
        }
        "SpaceToBatchND" | "BatchToSpaceND" => {
            need(3)?;
            let x = &ins[0];
            let block = int_const(node, &ins[1], "block_shape")?;
            let pads = int_const(node, &ins[2], "paddings")?;
            let sb = crate::reshuffle::SpaceBatch::new(op == "SpaceToBatchND", &block, &pads)
                .map_err(|e| CompileError::unsupported(node, e))?;
            let out = sb.output_shape(&x.shape).map_err(|e| CompileError::unsupported(node, e))?;
            Ok(kernel(KernelOp::SpaceBatch(sb), vec![0], vec![vi(x.dtype, out)]))
        }
        "Bitcast" => {
            need(1)?;
            let x = &ins[0];
            let to = attr_type(node, "type").ok_or_else(|| CompileError::unsupported(node, "no output type"))?;
            let native = |d: DType| matches!(d, DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64);
            if !native(x.dtype) || !native(to) {
                return Err(CompileError::unsupported(node, format!("Bitcast of {} to {to}", x.dtype)));
            }
            let out = crate::reshuffle::bitcast_shape(&x.shape, x.dtype, to)
                .map_err(|e| CompileError::unsupported(node, e))?;
            Ok(kernel(KernelOp::Bitcast { to }, vec![0], vec![vi(to, out)]))
        }
        "Transpose" => {
            need(2)?;
            let x = &ins[0];
            let perm = int_const(node, &ins[1], "perm")?;
            let r = x.shape.len();
            let mut seen = vec![false; r];
            let mut p = Vec::with_capacity(r);
            for &a in &perm {
                let a = norm_axis(node, a, r)?;
                if seen[a] {
                    return Err(CompileError::Invalid(format!(
                        "node '{}': perm {perm:?} is not a permutation",
                        node.name
                    )));
                }
                seen[a] = true;
                p.push(a);
            }
            if p.len() != r {
                return Err(CompileError::Invalid(format!("node '{}': perm {perm:?} has the wrong length", node.name)));
            }
            let st = strides_of(&x.shape);
            let dims: Vec<usize> = p.iter().map(|&a| x.shape[a]).collect();
            let strides: Vec<isize> = p.iter().map(|&a| st[a] as isize).collect();
            Ok(kernel(KernelOp::Strided { dims: dims.clone(), strides, offset: 0 }, vec![0], vec![vi(x.dtype, dims)]))
        }
        "Slice" => {
            need(3)?;
            let x = &ins[0];
            let begin = int_const(node, &ins[1], "begin")?;
            let size = int_const(node, &ins[2], "size")?;
            let r = x.shape.len();
            if begin.len() != r || size.len() != r {
                return Err(CompileError::Invalid(format!("node '{}': begin/size rank mismatch", node.name)));
            }
            let st = strides_of(&x.shape);
            let mut dims = Vec::with_capacity(r);
            let mut offset = 0isize;
            for d in 0..r {
                let b = begin[d];
                let s = if size[d] < 0 { x.shape[d] as i64 - b } else { size[d] };
                if b < 0 || s < 0 || (b + s) as usize > x.shape[d] {
                    return Err(CompileError::Invalid(format!("node '{}': slice out of bounds", node.name)));
                }
                dims.push(s as usize);
                offset += b as isize * st[d] as isize;
            }
            let strides = st.iter().map(|&s| s as isize).collect();
            Ok(kernel(KernelOp::Strided { dims: dims.clone(), strides, offset }, vec![0], vec![vi(x.dtype, dims)]))
        }
        "StridedSlice" => {
            need(4)?;
            strided_slice(node, ins)
        }
        "Tile" => {
            // out[j] with j_d = k_d * X_d + i_d is x[i]: iterate the 2r-dim
            // space [M_0, X_0, M_1, X_1, ...] row-major with stride 0 on the
            // repeat axes; its row-major order is exactly the output's.
            need(2)?;
            let x = &ins[0];
            let m = int_const(node, &ins[1], "multiples")?;
            if m.len() != x.shape.len() || m.iter().any(|&k| k < 0) {
                return Err(CompileError::Invalid(format!("node '{}': bad Tile multiples {m:?}", node.name)));
            }
            let st = strides_of(&x.shape);
            let mut dims = Vec::with_capacity(2 * m.len());
            let mut strides = Vec::with_capacity(2 * m.len());
            let mut out = Vec::with_capacity(m.len());
            for (d, &k) in m.iter().enumerate() {
                dims.extend([k as usize, x.shape[d]]);
                strides.extend([0isize, st[d] as isize]);
                out.push((k as usize).checked_mul(x.shape[d]).ok_or_else(|| {
                    CompileError::unsupported(node, format!("Tile multiples {m:?} of {:?} overflow", x.shape))
                })?);
            }
            Ok(kernel(KernelOp::Strided { dims, strides, offset: 0 }, vec![0], vec![vi(x.dtype, out)]))
        }
        "BroadcastTo" => {
            need(2)?;
            let x = &ins[0];
            let want = dims_of(node, &int_const(node, &ins[1], "shape")?, "shape")?;
            let out = broadcast_shapes(&x.shape, &want).filter(|s| *s == want).ok_or_else(|| {
                CompileError::Invalid(format!("node '{}': cannot broadcast {:?} to {want:?}", node.name, x.shape))
            })?;
            if is_compiled_dtype(x.dtype) {
                // A copy whose operand the loop reads with broadcast strides (`plan::fused_spec`),
                // so the broadcast joins its consumers' loop and is never materialised (the
                // gradient of a `Mean` is one, in every BatchNorm's backward pass).
                return Ok(NodeInfo { kind: NodeKind::Elementwise(EwOp::Copy), outputs: vec![vi(x.dtype, out)] });
            }
            let strides = broadcast_strides(&x.shape, &out);
            Ok(kernel(KernelOp::Strided { dims: out.clone(), strides, offset: 0 }, vec![0], vec![vi(x.dtype, out)]))
        }
        "ConcatV2" => {
            need(2)?;
            let n = ins.len() - 1;
            let first = &ins[0];
            let r = first.shape.len();
            let a = int_const(node, &ins[n], "axis")?;
            let axis = norm_axis(node, a.first().copied().unwrap_or(0), r)?;
            let mut shape = first.shape.clone();
            shape[axis] = 0;
            for v in &ins[..n] {
                if v.dtype != first.dtype
                    || v.shape.len() != r
                    || v.shape.iter().enumerate().any(|(d, &s)| d != axis && s != first.shape[d])
                {
                    return Err(CompileError::Invalid(format!("node '{}': ConcatV2 inputs do not match", node.name)));
                }
                shape[axis] += v.shape[axis];
            }
            Ok(kernel(KernelOp::Concat { axis }, (0..n).collect(), vec![vi(first.dtype, shape)]))
        }
        "Pack" => {
            need(1)?;
            let first = &ins[0];
            let r = first.shape.len() + 1;
            let a = attr_int(node, "axis").unwrap_or(0);
            let axis = norm_axis(node, a, r)?;
            if ins.iter().any(|v| v.shape != first.shape || v.dtype != first.dtype) {
                return Err(CompileError::Invalid(format!("node '{}': Pack inputs do not match", node.name)));
            }
            let mut shape = first.shape.clone();
            shape.insert(axis, ins.len());
            Ok(kernel(KernelOp::Pack { axis }, (0..ins.len()).collect(), vec![vi(first.dtype, shape)]))
        }
        "GatherV2" | "Gather" => {
            need(2)?;
            let (p, idx) = (&ins[0], &ins[1]);
            let axis = if op == "GatherV2" {
                need(3)?;
                let a = int_const(node, &ins[2], "axis")?;
                norm_axis(node, a.first().copied().unwrap_or(0), p.shape.len())?
            } else {
                0
            };
            if !matches!(idx.dtype, DType::Int32 | DType::Int64) || p.shape.is_empty() {
                return Err(CompileError::unsupported(node, "gather needs integer indices into a tensor of rank >= 1"));
            }
            // batch_dims b: params and indices share their first b dimensions.
            let mut b = attr_int(node, "batch_dims").unwrap_or(0);
            if b < 0 {
                b += idx.shape.len() as i64;
            }
            let b = usize::try_from(b)
                .ok()
                .filter(|&b| b <= idx.shape.len() && b <= axis && p.shape[..b] == idx.shape[..b])
                .ok_or_else(|| {
                    CompileError::Invalid(format!("node '{}': batch_dims does not fit the shapes", node.name))
                })?;
            let mut shape = p.shape[..axis].to_vec();
            shape.extend_from_slice(&idx.shape[b..]);
            shape.extend_from_slice(&p.shape[axis + 1..]);
            Ok(kernel(KernelOp::Gather { axis, batch_dims: b }, vec![0, 1], vec![vi(p.dtype, shape)]))
        }
        _ if ScatterKind::from_tf(op).is_some() => {
            need(3)?;
            let kind = ScatterKind::from_tf(op).expect("checked");
            let (x, idx, upd) = (&ins[0], &ins[1], &ins[2]);
            if !matches!(idx.dtype, DType::Int32 | DType::Int64) {
                return Err(CompileError::unsupported(node, format!("indices of dtype {}", idx.dtype)));
            }
            let numeric = matches!(x.dtype, DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64);
            if upd.dtype != x.dtype || !(numeric || kind == ScatterKind::Update && x.dtype == DType::Bool) {
                return Err(CompileError::unsupported(node, format!("{op} of {} into {}", upd.dtype, x.dtype)));
            }
            // indices [..., K] address the first K dims; updates are indices[:-1] + tensor[K:].
            let Some((&depth, batch)) = idx.shape.split_last() else {
                return Err(CompileError::unsupported(node, "scalar indices"));
            };
            let mut want = batch.to_vec();
            if depth <= x.shape.len() {
                want.extend_from_slice(&x.shape[depth..]);
            }
            if depth == 0 {
                return Err(CompileError::unsupported(node, "indices with an empty last dimension"));
            }
            if depth > x.shape.len() || upd.shape != want {
                return Err(CompileError::Invalid(format!(
                    "node '{}': {op} indices {:?} and updates {:?} do not fit tensor {:?}",
                    node.name, idx.shape, upd.shape, x.shape
                )));
            }
            Ok(kernel(KernelOp::Scatter { kind }, vec![0, 1, 2], vec![vi(x.dtype, x.shape.clone())]))
        }
        _ => Err(no_lowering(node)),
    }
}
