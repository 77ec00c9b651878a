//! Linear algebra and neural-network ops of a cluster body: `MatMul`, `BatchMatMul`,
//! `Einsum`, the softmax family and its losses, `BiasAddGrad`, `L2Loss`, `InTopK`,
//! convolutions, pooling, fused batch normalisation, resizes, and their gradients — each a
//! kernel step of the plan. The output shapes are the registry's ([`Outputs`]); a window's
//! geometry (what the kernel loops over) is computed here and must agree with them.

use super::*;

/// The ops of this family; any other is "no lowering" (the next family is tried).
pub(super) fn analyze(node: &Node, ins: &[ValueInfo], out: &Outputs<'_>) -> Result<NodeInfo, CompileError> {
    let op = node.op.as_str();
    let need = |n: usize| check_arity(node, ins, n);
    match op {
        "MatMul" => {
            need(2)?;
            let (ta, tb) = (attr_bool(node, "transpose_a"), attr_bool(node, "transpose_b"));
            let (a, b) = (&ins[0].shape, &ins[1].shape);
            if a.len() != 2 || b.len() != 2 {
                return Err(CompileError::Invalid(format!("node '{}': MatMul needs matrices", node.name)));
            }
            if ins[0].dtype == DType::Float64 && ins[1].dtype == DType::Float64 {
                // float64: the einsum kernel's strided product (the float32 path's fused
                // prologues and epilogues are float32 only), operands read in place.
                let a = if ta { "ji" } else { "ij" };
                let b = if tb { "kj" } else { "jk" };
                let equation = autoclust_graph::einsum::Equation::parse(&format!("{a},{b}->ik"), &[2, 2])
                    .map_err(|e| CompileError::Invalid(format!("node '{}': {e}", node.name)))?;
                return Ok(kernel(KernelOp::Einsum { equation }, vec![0, 1], vec![out.one(DType::Float64)?]));
            }
            if ins[0].dtype != DType::Float32 || ins[1].dtype != DType::Float32 {
                return Err(CompileError::unsupported(node, format!("MatMul on {}", ins[0].dtype)));
            }
            Ok(NodeInfo {
                kind: NodeKind::MatMul { transpose_a: ta, transpose_b: tb },
                outputs: vec![out.one(DType::Float32)?],
            })
        }
        "BiasAddGrad" => {
            need(1)?;
            let x = &ins[0];
            if x.dtype != DType::Float32 || x.shape.is_empty() {
                return Err(CompileError::unsupported(node, "BiasAddGrad needs float32 of rank >= 1"));
            }
            if node.attr("data_format").and_then(AttrValue::as_str).is_some_and(|f| f != "NHWC") {
                return Err(CompileError::unsupported(node, "BiasAddGrad with data_format other than NHWC"));
            }
            if let Some(half) =
                node.attr(crate::half::ROUNDED_ROWS_ATTR).and_then(AttrValue::as_type).filter(|d| d.is_half())
            {
                return Ok(kernel(KernelOp::BiasGradRounded { half }, vec![0], vec![out.one(x.dtype)?]));
            }
            let r = x.shape.len();
            let axes: Vec<usize> = (0..r - 1).collect();
            Ok(kernel(KernelOp::Reduce { kind: ReduceKind::Sum, axes }, vec![0], vec![out.one(x.dtype)?]))
        }
        "Softmax" | "LogSoftmax" => {
            need(1)?;
            let x = &ins[0];
            if x.dtype != DType::Float32 || x.shape.is_empty() {
                return Err(CompileError::unsupported(node, "softmax needs float32 of rank >= 1"));
            }
            Ok(kernel(KernelOp::Softmax { log: op == "LogSoftmax" }, vec![0], vec![out.one(x.dtype)?]))
        }
        "SoftmaxCrossEntropyWithLogits" => {
            need(2)?;
            let (f, l) = (&ins[0], &ins[1]);
            if f.dtype != DType::Float32 || f.shape.len() != 2 || l.shape != f.shape {
                return Err(CompileError::unsupported(
                    node,
                    "needs float32 [batch, classes] logits and labels of the same shape",
                ));
            }
            Ok(kernel(KernelOp::SoftmaxXent, vec![0, 1], out.typed(&[f.dtype; 2])?))
        }
        "SparseSoftmaxCrossEntropyWithLogits" => {
            need(2)?;
            let (f, l) = (&ins[0], &ins[1]);
            if f.dtype != DType::Float32 || f.shape.len() != 2 || l.shape != [f.shape[0]] {
                return Err(CompileError::unsupported(
                    node,
                    "needs float32 [batch, classes] logits and [batch] labels",
                ));
            }
            Ok(kernel(KernelOp::SparseSoftmaxXent, vec![0, 1], out.typed(&[f.dtype; 2])?))
        }
        "ResizeBilinear" | "ResizeBilinearGrad" => {
            need(2)?;
            let grad = op == "ResizeBilinearGrad";
            let attrs = crate::resize::Resize::of(node);
            let (x, out_shape) = if grad {
                let (dy, orig) = (&ins[0], &ins[1]);
                if orig.shape.len() != 4
                    || dy.shape.len() != 4
                    || orig.shape[0] != dy.shape[0]
                    || orig.shape[3] != dy.shape[3]
                {
                    return Err(CompileError::unsupported(
                        node,
                        "ResizeBilinearGrad operands (the kernel reports them)",
                    ));
                }
                (dy, orig.shape.clone())
            } else {
                let x = &ins[0];
                let size = int_const(node, &ins[1], "size")?;
                let [h, w] = size[..] else { return Err(CompileError::unsupported(node, "size is not [2]")) };
                if h <= 0 || w <= 0 || x.shape.len() != 4 {
                    return Err(CompileError::unsupported(node, "resize operands (the kernel reports them)"));
                }
                (x, vec![x.shape[0], h as usize, w as usize, x.shape[3]])
            };
            // The forward resize reads any real image type as float32 (TensorFlow's kernel
            // casts each element) and writes float32; the gradient is float32 only.
            let out_dtype = if grad { ins[1].dtype } else { DType::Float32 };
            let readable = if grad {
                x.dtype == DType::Float32
            } else {
                matches!(x.dtype, DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64)
            };
            if !readable || out_dtype != DType::Float32 {
                return Err(CompileError::unsupported(node, format!("{op} of {}", x.dtype)));
            }
            let (image, hw) = if grad {
                (&out_shape, (out_shape[1], out_shape[2]))
            } else {
                (&x.shape, (out_shape[1], out_shape[2]))
            };
            attrs.check(image, hw).map_err(|e| CompileError::unsupported(node, e))?;
            let out_hw = (out_shape[1], out_shape[2]);
            let value = out.one(DType::Float32)?;
            geometry_agrees(node, &out_shape, &value)?;
            Ok(kernel(KernelOp::ResizeBilinear { attrs, grad, out_hw }, vec![0], vec![value]))
        }
        "ResizeNearestNeighbor" | "ResizeNearestNeighborGrad" => {
            need(2)?;
            let grad = op == "ResizeNearestNeighborGrad";
            let attrs = crate::resize::Resize::of(node);
            let x = &ins[0];
            let size = int_const(node, &ins[1], "size")?;
            let [h, w] = size[..] else { return Err(CompileError::unsupported(node, "size is not [2]")) };
            if h <= 0 || w <= 0 || x.shape.len() != 4 || (grad && x.dtype != DType::Float32) {
                return Err(CompileError::unsupported(node, "resize operands (the kernel reports them)"));
            }
            let out_hw = (h as usize, w as usize);
            let out_shape = vec![x.shape[0], out_hw.0, out_hw.1, x.shape[3]];
            let image = if grad { &out_shape } else { &x.shape };
            let hw = if grad { (x.shape[1], x.shape[2]) } else { out_hw };
            attrs.check(image, hw).map_err(|e| CompileError::unsupported(node, e))?;
            let value = out.one(x.dtype)?;
            geometry_agrees(node, &out_shape, &value)?;
            Ok(kernel(KernelOp::ResizeNearest { attrs, grad, out_hw }, vec![0], vec![value]))
        }
        "InTopKV2" | "InTopK" => {
            need(2)?;
            let (p, t) = (&ins[0], &ins[1]);
            if p.dtype != DType::Float32 || p.shape.len() != 2 || t.shape.len() != 1 || t.shape[0] != p.shape[0] {
                return Err(CompileError::unsupported(node, "InTopK operands (the kernel reports them)"));
            }
            let k = if op == "InTopK" {
                attr_int(node, "k").ok_or_else(|| CompileError::unsupported(node, "no k"))?
            } else {
                need(3)?;
                match int_const(node, &ins[2], "k")?[..] {
                    [k] => k,
                    _ => return Err(CompileError::unsupported(node, "k is not a scalar")),
                }
            };
            Ok(kernel(KernelOp::InTopK { k }, vec![0, 1], vec![out.one(DType::Bool)?]))
        }
        "L2Loss" => {
            need(1)?;
            let x = &ins[0];
            if !matches!(x.dtype, DType::Float32 | DType::Float64) {
                return Err(CompileError::unsupported(node, format!("L2Loss of {}", x.dtype)));
            }
            Ok(kernel(KernelOp::L2Loss, vec![0], vec![out.one(x.dtype)?]))
        }
        "Einsum" => {
            let eq = node
                .attr("equation")
                .and_then(|a| a.as_str())
                .ok_or_else(|| CompileError::unsupported(node, "the 'equation' attribute is missing"))?;
            let ranks: Vec<usize> = ins.iter().map(|v| v.shape.len()).collect();
            let equation = autoclust_graph::einsum::Equation::parse(eq, &ranks)
                .map_err(|e| CompileError::Invalid(format!("node '{}': {e}", node.name)))?;
            let first = ins.first().ok_or_else(|| CompileError::unsupported(node, "Einsum needs an operand"))?;
            if !matches!(first.dtype, DType::Float32 | DType::Float64) || ins.iter().any(|v| v.dtype != first.dtype) {
                return Err(CompileError::unsupported(node, "Einsum is compiled for float32 and float64 operands"));
            }
            Ok(kernel(KernelOp::Einsum { equation }, (0..ins.len()).collect(), vec![out.one(first.dtype)?]))
        }
        "BatchMatMul" | "BatchMatMulV2" => {
            // A batched matmul is the einsum `...ij,...jk->...ik` (transposed operands
            // swap their last two letters), batch dimensions broadcast.
            need(2)?;
            let (x, y) = (&ins[0], &ins[1]);
            if x.shape.len() < 2 || y.shape.len() < 2 {
                return Err(CompileError::Invalid(format!("node '{}': operands of rank < 2", node.name)));
            }
            if !matches!(x.dtype, DType::Float32 | DType::Float64) || y.dtype != x.dtype {
                return Err(CompileError::unsupported(node, "BatchMatMul is compiled for float32 and float64"));
            }
            let a = if attr_bool(node, "adj_x") { "...ji" } else { "...ij" };
            let b = if attr_bool(node, "adj_y") { "...kj" } else { "...jk" };
            let eq = format!("{a},{b}->...ik");
            let equation = autoclust_graph::einsum::Equation::parse(&eq, &[x.shape.len(), y.shape.len()])
                .map_err(|e| CompileError::Invalid(format!("node '{}': {e}", node.name)))?;
            Ok(kernel(KernelOp::Einsum { equation }, vec![0, 1], vec![out.one(x.dtype)?]))
        }
        // NHWC fused batch normalisation and its gradient (a kernel step, `crate::batchnorm`);
        // operand shapes are checked here, a mismatch leaves the error to the interpreter.
        "FusedBatchNorm"
        | "FusedBatchNormV2"
        | "FusedBatchNormV3"
        | "FusedBatchNormGrad"
        | "FusedBatchNormGradV2"
        | "FusedBatchNormGradV3" => {
            let grad = op.starts_with("FusedBatchNormGrad");
            let v3 = op.ends_with("V3");
            need(if grad && v3 { 6 } else { 5 })?;
            crate::conv::require_nhwc(node).map_err(|e| CompileError::unsupported(node, e.to_string()))?;
            let attrs = crate::batchnorm::BnAttrs::parse(node)
                .ok_or_else(|| CompileError::unsupported(node, "an attribute has the wrong type"))?;
            let x = &ins[if grad { 1 } else { 0 }];
            let dtype = x.dtype;
            if !matches!(dtype, DType::Float32 | DType::Float64) || ins[..5].iter().any(|v| v.dtype != dtype) {
                return Err(CompileError::unsupported(node, format!("{op} of mixed or non-float dtypes")));
            }
            if x.shape.len() != 4 {
                return Err(CompileError::unsupported(node, "x is not 4-dimensional (the kernel reports it)"));
            }
            let c = x.shape[3];
            let vector = |v: &ValueInfo| v.shape[..] == [c];
            let ok = if grad {
                ins[0].shape == x.shape && ins[2..5].iter().all(vector)
            } else {
                let running =
                    |v: &ValueInfo| vector(v) || attrs.running_unused() && v.shape.iter().product::<usize>() == 0;
                vector(&ins[1]) && vector(&ins[2]) && running(&ins[3]) && running(&ins[4])
            };
            if !ok {
                return Err(CompileError::unsupported(node, "operand shapes do not match (the kernel reports it)"));
            }
            // The forward V3's third reserve space, which TensorFlow's shape function leaves
            // open, is empty on CPU.
            let count = if grad { 5 } else { 5 + usize::from(v3) };
            let mut kernel_shapes = vec![None; count];
            kernel_shapes[count - 1] = Some(vec![0]);
            let outputs = out.refined(&vec![dtype; count], &kernel_shapes)?;
            Ok(kernel(KernelOp::BatchNorm { attrs, grad }, (0..5).collect(), outputs))
        }
        // NHWC pooling and its gradients; AvgPoolGrad's input shape must be known.
        "MaxPool" | "AvgPool" | "MaxPoolGrad" | "AvgPoolGrad" => {
            use crate::kernels::PoolKind;
            use crate::pool::{PoolAttrs, PoolShape};
            need(match op {
                "MaxPoolGrad" => 3,
                "AvgPoolGrad" => 2,
                _ => 1,
            })?;
            let attrs = PoolAttrs::parse(node).map_err(|e| CompileError::unsupported(node, e.to_string()))?;
            let (kind, input, data) = match op {
                "AvgPoolGrad" => {
                    let d = int_const(node, &ins[0], "orig_input_shape")?;
                    let d: Vec<usize> = d.iter().map(|&x| usize::try_from(x).unwrap_or(usize::MAX)).collect();
                    let d = <[usize; 4]>::try_from(d)
                        .ok()
                        .filter(|d| d.iter().all(|&x| x < 1 << 31))
                        .ok_or_else(|| CompileError::unsupported(node, "orig_input_shape is not 4 valid sizes"))?;
                    (PoolKind::AvgGrad, d, vec![1])
                }
                _ => {
                    let d = <[usize; 4]>::try_from(ins[0].shape.clone())
                        .map_err(|_| CompileError::unsupported(node, "the input is not 4-dimensional"))?;
                    match op {
                        "MaxPool" => (PoolKind::Max, d, vec![0]),
                        "AvgPool" => (PoolKind::Avg, d, vec![0]),
                        _ => (PoolKind::MaxGrad, d, vec![0, 2]),
                    }
                }
            };
            let dtype = ins[data[0]].dtype;
            if !matches!(dtype, DType::Float32 | DType::Float64) || data.iter().any(|&i| ins[i].dtype != dtype) {
                return Err(CompileError::unsupported(node, format!("{op} of {dtype}")));
            }
            let win = attrs.window(input).map_err(|e| CompileError::unsupported(node, e.to_string()))?;
            let shape = PoolShape { input, win };
            let pooled = shape.output();
            let grad_ok = match kind {
                PoolKind::MaxGrad => ins[1].shape[..] == pooled[..] && ins[2].shape[..] == pooled[..],
                PoolKind::AvgGrad => ins[1].shape[..] == pooled[..],
                _ => true,
            };
            if !grad_ok {
                return Err(CompileError::unsupported(node, "gradient shapes do not match (the kernel reports it)"));
            }
            let value = out.one(dtype)?;
            let lowered = if matches!(kind, PoolKind::Max | PoolKind::Avg) { pooled } else { input };
            geometry_agrees(node, &lowered, &value)?;
            Ok(kernel(KernelOp::Pool { kind, shape }, data, vec![value]))
        }
        // NHWC convolutions: the geometry is fixed at the shapes compiled for; the gradients'
        // size operands must be compile-time values (constant arguments, `Shape`s).
        "Conv2D"
        | "Conv2DBackpropInput"
        | "Conv2DBackpropFilter"
        | "DepthwiseConv2dNative"
        | "DepthwiseConv2dNativeBackpropInput"
        | "DepthwiseConv2dNativeBackpropFilter" => {
            use crate::conv::{ConvShape, WindowAttrs};
            use crate::kernels::ConvKind;
            need(if matches!(op, "Conv2D" | "DepthwiseConv2dNative") { 2 } else { 3 })?;
            let attrs = WindowAttrs::parse(node, true).map_err(|e| CompileError::unsupported(node, e.to_string()))?;
            let four = |v: &ValueInfo, what: &str| -> Result<[usize; 4], CompileError> {
                <[usize; 4]>::try_from(v.shape.clone())
                    .map_err(|_| CompileError::unsupported(node, format!("{what} is not 4-dimensional")))
            };
            let sizes = |v: &ValueInfo, what: &str| -> Result<[usize; 4], CompileError> {
                let d = int_const(node, v, what)?;
                let d: Vec<usize> = d.iter().map(|&x| usize::try_from(x).unwrap_or(usize::MAX)).collect();
                <[usize; 4]>::try_from(d)
                    .ok()
                    .filter(|d| d.iter().all(|&x| x < 1 << 31))
                    .ok_or_else(|| CompileError::unsupported(node, format!("{what} is not 4 valid sizes")))
            };
            let depthwise = op.starts_with("Depthwise");
            let (kind, input, filter, data, dy) = match op {
                "Conv2D" | "DepthwiseConv2dNative" => (
                    if depthwise { ConvKind::Depthwise } else { ConvKind::Forward },
                    four(&ins[0], "the input")?,
                    four(&ins[1], "the filter")?,
                    [0, 1],
                    None,
                ),
                "Conv2DBackpropInput" | "DepthwiseConv2dNativeBackpropInput" => (
                    if depthwise { ConvKind::DepthwiseBackpropInput } else { ConvKind::BackpropInput },
                    sizes(&ins[0], "input_sizes")?,
                    four(&ins[1], "the filter")?,
                    [1, 2],
                    Some(&ins[2]),
                ),
                _ => (
                    if depthwise { ConvKind::DepthwiseBackpropFilter } else { ConvKind::BackpropFilter },
                    four(&ins[0], "the input")?,
                    sizes(&ins[1], "filter_sizes")?,
                    [0, 2],
                    Some(&ins[2]),
                ),
            };
            let dtype = ins[data[0]].dtype;
            if !matches!(dtype, DType::Float32 | DType::Float64) || ins[data[1]].dtype != dtype {
                return Err(CompileError::unsupported(node, format!("{op} of {dtype}")));
            }
            let win = if depthwise { attrs.depthwise_window(input, filter) } else { attrs.conv_window(input, filter) }
                .map_err(|e| CompileError::unsupported(node, e.to_string()))?;
            let shape = ConvShape { input, filter, win };
            let output = if depthwise { shape.depthwise_output() } else { shape.output() };
            if let Some(dy) = dy {
                if dy.shape[..] != output[..] {
                    return Err(CompileError::unsupported(node, "out_backprop does not match (the kernel reports it)"));
                }
            }
            let lowered = match kind {
                ConvKind::Forward | ConvKind::Depthwise => output,
                ConvKind::BackpropInput | ConvKind::DepthwiseBackpropInput => input,
                ConvKind::BackpropFilter | ConvKind::DepthwiseBackpropFilter => filter,
            };
            let value = out.one(dtype)?;
            geometry_agrees(node, &lowered, &value)?;
            Ok(kernel(KernelOp::Conv { kind, shape }, data.to_vec(), vec![value]))
        }
        _ => Err(no_lowering(node)),
    }
}

/// A window's geometry (the loops a pooling, convolution or resize kernel runs) must produce
/// the output its shape function gives; otherwise the node is declined (the interpreter's
/// kernel, which computes the same geometry, reports the operands).
fn geometry_agrees(node: &Node, lowered: &[usize], value: &ValueInfo) -> Result<(), CompileError> {
    if lowered[..] != value.shape[..] {
        return Err(CompileError::Invalid(format!(
            "node '{}' ({}): its window gives {lowered:?}, its shape function {:?}",
            node.name, node.op, value.shape
        )));
    }
    Ok(())
}
