//! Shape and data-movement ops of a cluster body: views (`Reshape`, `ExpandDims`,
//! `Squeeze`, `Transpose`, slices, `BroadcastTo`, `ReverseV2`), copies and scatters that
//! move elements (`Split`, `Unpack`, `Pack`, `ConcatV2`, `Pad`, `Tile`, `GatherV2`, the
//! TensorScatter ops, `StridedSliceGrad`, `SpaceToBatchND`/`BatchToSpaceND`, `Bitcast`), and
//! encapsulation's shape check of a variable write. Each output's shape is the registry's
//! ([`Outputs`]) at the concrete input shapes and compile-time operands (a shape, an axis, a
//! slice spec); the view or copy that produces it (strides, offsets, pieces) is computed
//! here. An operand not known at compile time declines the body to the interpreter.

use super::*;

/// The ops of this family; any other is "no lowering" (the next family is tried).
pub(super) fn analyze(node: &Node, ins: &[ValueInfo], out: &Outputs<'_>) -> Result<NodeInfo, CompileError> {
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
            Ok(same_values(&ins[0], out.shape(ins[0].dtype)?))
        }
        "Reshape" => {
            need(2)?;
            // The new shape must be known at compile time (its -1 is resolved, and a size
            // TensorFlow refuses is refused, by the registry's shape function).
            int_const(node, &ins[1], "shape")?;
            Ok(same_values(&ins[0], out.shape(ins[0].dtype)?))
        }
        "ExpandDims" => {
            need(2)?;
            int_const(node, &ins[1], "axis")?;
            Ok(NodeInfo { kind: NodeKind::View, outputs: vec![out.one(ins[0].dtype)?] })
        }
        "Squeeze" => {
            need(1)?;
            Ok(same_values(&ins[0], out.shape(ins[0].dtype)?))
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
            let pieces = if op == "Split" {
                attr_int(node, "num_split").filter(|&n| n > 0).ok_or_else(|| {
                    CompileError::Invalid(format!("node '{}' (Split) needs a positive num_split", node.name))
                })? as usize
            } else {
                int_const(node, &ins[1], "size_splits")?.len()
            };
            // Each piece's extent along the axis is what the kernel copies.
            let outputs = out.typed(&vec![value.dtype; pieces])?;
            let sizes = outputs.iter().map(|v| v.shape[a]).collect();
            Ok(kernel(KernelOp::Split { axis: a, sizes }, vec![if op == "Split" { 1 } else { 0 }], outputs))
        }
        // StridedSliceGrad(shape, begin, end, strides, dy): zeros of `shape` with `dy` written
        // into the elements the forward StridedSlice read (the same view, scattered).
        "StridedSliceGrad" => {
            need(5)?;
            let shape = int_const(node, &ins[0], "shape")?;
            let shape: Vec<usize> = shape.iter().map(|&d| usize::try_from(d).unwrap_or(usize::MAX)).collect();
            let dy = &ins[4];
            let value = out.one(dy.dtype)?;
            let x = vi(dy.dtype, shape);
            let fwd = strided_slice(node, &[x, ins[1].clone(), ins[2].clone(), ins[3].clone()])?;
            let (KernelOp::Strided { dims, strides, offset }, sliced) = fwd else {
                return Err(CompileError::Invalid(format!("node '{}': no strided view", node.name)));
            };
            if sliced != dy.shape {
                return Err(CompileError::unsupported(
                    node,
                    "dy does not have the slice's shape (the kernel reports it)",
                ));
            }
            let op = KernelOp::StridedScatter { dims, strides, offset };
            Ok(kernel(op, vec![4], vec![value]))
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
            Ok(kernel(KernelOp::Strided { dims: x.shape.clone(), strides, offset }, vec![0], vec![out.one(x.dtype)?]))
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
            let outputs = out.typed(&vec![x.dtype; n])?;
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
            let value = out.one(x.dtype)?;
            let st = strides_of(&value.shape);
            let offset = (0..r).map(|d| p[2 * d] as isize * st[d] as isize).sum();
            let strides = st.iter().map(|&s| s as isize).collect();
            let op = KernelOp::StridedScatter { dims: x.shape.clone(), strides, offset };
            Ok(kernel(op, vec![0], vec![value]))
        }
        "SpaceToBatchND" | "BatchToSpaceND" => {
            need(3)?;
            let x = &ins[0];
            let block = int_const(node, &ins[1], "block_shape")?;
            let pads = int_const(node, &ins[2], "paddings")?;
            let sb = crate::reshuffle::SpaceBatch::new(op == "SpaceToBatchND", &block, &pads)
                .map_err(|e| CompileError::unsupported(node, e))?;
            // The kernel's own checks of the operands (block sizes, divisibility).
            sb.output_shape(&x.shape).map_err(|e| CompileError::unsupported(node, e))?;
            Ok(kernel(KernelOp::SpaceBatch(sb), vec![0], vec![out.one(x.dtype)?]))
        }
        "Bitcast" => {
            need(1)?;
            let x = &ins[0];
            let to = attr_type(node, "type").ok_or_else(|| CompileError::unsupported(node, "no output type"))?;
            let native = |d: DType| matches!(d, DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64);
            if !native(x.dtype) || !native(to) {
                return Err(CompileError::unsupported(node, format!("Bitcast of {} to {to}", x.dtype)));
            }
            Ok(kernel(KernelOp::Bitcast { to }, vec![0], vec![out.one(to)?]))
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
            Ok(kernel(KernelOp::Strided { dims, strides, offset: 0 }, vec![0], vec![out.one(x.dtype)?]))
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
            Ok(kernel(KernelOp::Strided { dims, strides, offset }, vec![0], vec![out.one(x.dtype)?]))
        }
        "StridedSlice" => {
            need(4)?;
            let (view, _) = strided_slice(node, ins)?;
            Ok(kernel(view, vec![0], vec![out.one(ins[0].dtype)?]))
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
            for (d, &k) in m.iter().enumerate() {
                // The kernel's iteration space must be countable.
                if (k as usize).checked_mul(x.shape[d]).is_none() {
                    return Err(CompileError::unsupported(
                        node,
                        format!("Tile multiples {m:?} of {:?} overflow", x.shape),
                    ));
                }
                dims.extend([k as usize, x.shape[d]]);
                strides.extend([0isize, st[d] as isize]);
            }
            let value = out.one(x.dtype)?;
            Ok(kernel(KernelOp::Strided { dims, strides, offset: 0 }, vec![0], vec![value]))
        }
        "BroadcastTo" => {
            need(2)?;
            let x = &ins[0];
            int_const(node, &ins[1], "shape")?;
            let value = out.one(x.dtype)?;
            if is_compiled_dtype(x.dtype) {
                // A copy whose operand the loop reads with broadcast strides (`plan::fused_spec`),
                // so the broadcast joins its consumers' loop and is never materialised (the
                // gradient of a `Mean` is one, in every BatchNorm's backward pass).
                return Ok(NodeInfo { kind: NodeKind::Elementwise(EwOp::Copy), outputs: vec![value] });
            }
            let strides = broadcast_strides(&x.shape, &value.shape);
            Ok(kernel(KernelOp::Strided { dims: value.shape.clone(), strides, offset: 0 }, vec![0], vec![value]))
        }
        "ConcatV2" => {
            need(2)?;
            let n = ins.len() - 1;
            let first = &ins[0];
            let r = first.shape.len();
            let a = int_const(node, &ins[n], "axis")?;
            let axis = norm_axis(node, a.first().copied().unwrap_or(0), r)?;
            Ok(kernel(KernelOp::Concat { axis }, (0..n).collect(), vec![out.one(first.dtype)?]))
        }
        "Pack" => {
            need(1)?;
            let first = &ins[0];
            let r = first.shape.len() + 1;
            let a = attr_int(node, "axis").unwrap_or(0);
            let axis = norm_axis(node, a, r)?;
            Ok(kernel(KernelOp::Pack { axis }, (0..ins.len()).collect(), vec![out.one(first.dtype)?]))
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
            Ok(kernel(KernelOp::Gather { axis, batch_dims: b }, vec![0, 1], vec![out.one(p.dtype)?]))
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
                let (name, written) = crate::as_written(node);
                if upd.shape.is_empty() && written.starts_with("ResourceScatter") {
                    // A resource scatter's scalar update is legal (the interpreter's kernel
                    // broadcasts it); the compiled scatter takes whole slices only.
                    return Err(CompileError::unsupported(node, "a scalar update is not compiled"));
                }
                return Err(CompileError::Invalid(format!(
                    "node '{name}' ({written}): indices {:?} and updates {:?} do not fit tensor {:?}",
                    idx.shape, upd.shape, x.shape
                )));
            }
            Ok(kernel(KernelOp::Scatter { kind }, vec![0, 1, 2], vec![out.one(x.dtype)?]))
        }
        _ => Err(no_lowering(node)),
    }
}
