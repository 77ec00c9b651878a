//! Linear algebra and neural-network ops of a cluster body: `MatMul`, `BatchMatMul`,
//! `Einsum`, the softmax family and its losses, `BiasAddGrad`, `L2Loss`, `InTopK`,
//! convolutions, pooling, fused batch normalisation, resizes, and their gradients — each a
//! kernel step of the plan, its output shapes from the concrete input shapes and the op's
//! attributes, checked as TensorFlow's shape functions check them.

use super::*;

/// The ops of this family; any other is "no lowering" (the next family is tried).
pub(super) fn analyze(node: &Node, ins: &[ValueInfo]) -> Result<NodeInfo, CompileError> {
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
            if ins[0].dtype != DType::Float32 || ins[1].dtype != DType::Float32 {
                return Err(CompileError::unsupported(node, format!("MatMul on {}", ins[0].dtype)));
            }
            let (m, k1) = if ta { (a[1], a[0]) } else { (a[0], a[1]) };
            let (k2, n) = if tb { (b[1], b[0]) } else { (b[0], b[1]) };
            if k1 != k2 {
                return Err(CompileError::Invalid(format!(
                    "node '{}': MatMul inner dimensions {k1} and {k2}",
                    node.name
                )));
            }
            Ok(NodeInfo {
                kind: NodeKind::MatMul { transpose_a: ta, transpose_b: tb },
                outputs: vec![vi(DType::Float32, vec![m, n])],
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
            let r = x.shape.len();
            let axes: Vec<usize> = (0..r - 1).collect();
            Ok(kernel(
                KernelOp::Reduce { kind: ReduceKind::Sum, axes },
                vec![0],
                vec![vi(x.dtype, vec![x.shape[r - 1]])],
            ))
        }
        "Softmax" | "LogSoftmax" => {
            need(1)?;
            let x = &ins[0];
            if x.dtype != DType::Float32 || x.shape.is_empty() {
                return Err(CompileError::unsupported(node, "softmax needs float32 of rank >= 1"));
            }
            Ok(kernel(KernelOp::Softmax { log: op == "LogSoftmax" }, vec![0], vec![vi(x.dtype, x.shape.clone())]))
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
            let b = f.shape[0];
            Ok(kernel(KernelOp::SoftmaxXent, vec![0, 1], vec![vi(f.dtype, vec![b]), vi(f.dtype, f.shape.clone())]))
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
            let b = f.shape[0];
            Ok(kernel(
                KernelOp::SparseSoftmaxXent,
                vec![0, 1],
                vec![vi(f.dtype, vec![b]), vi(f.dtype, f.shape.clone())],
            ))
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
            within_budget(node, DType::Float32, &out_shape)?;
            Ok(kernel(KernelOp::ResizeBilinear { attrs, grad, out_hw }, vec![0], vec![vi(DType::Float32, out_shape)]))
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
            within_budget(node, x.dtype, &out_shape)?;
            Ok(kernel(KernelOp::ResizeNearest { attrs, grad, out_hw }, vec![0], vec![vi(x.dtype, out_shape)]))
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
            Ok(kernel(KernelOp::InTopK { k }, vec![0, 1], vec![vi(DType::Bool, vec![t.shape[0]])]))
        }
        "L2Loss" => {
            need(1)?;
            let x = &ins[0];
            if !matches!(x.dtype, DType::Float32 | DType::Float64) {
                return Err(CompileError::unsupported(node, format!("L2Loss of {}", x.dtype)));
            }
            Ok(kernel(KernelOp::L2Loss, vec![0], vec![vi(x.dtype, vec![])]))
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
            let dims: Vec<Vec<Option<i64>>> =
                ins.iter().map(|v| v.shape.iter().map(|&d| Some(d as i64)).collect()).collect();
            let refs: Vec<&[Option<i64>]> = dims.iter().map(Vec::as_slice).collect();
            let sizes =
                equation.sizes(&refs).map_err(|e| CompileError::Invalid(format!("node '{}': {e}", node.name)))?;
            let shape: Vec<usize> = equation.output_dims(&sizes).iter().map(|d| d.unwrap_or(1) as usize).collect();
            Ok(kernel(KernelOp::Einsum { equation }, (0..ins.len()).collect(), vec![vi(first.dtype, shape)]))
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
            let dims: Vec<Vec<Option<i64>>> =
                ins[..2].iter().map(|v| v.shape.iter().map(|&d| Some(d as i64)).collect()).collect();
            let refs: Vec<&[Option<i64>]> = dims.iter().map(Vec::as_slice).collect();
            let sizes = equation
                .sizes(&refs)
                .map_err(|e| CompileError::unsupported(node, format!("batch dimensions do not match: {e}")))?;
            let shape: Vec<usize> = equation.output_dims(&sizes).iter().map(|d| d.unwrap_or(1) as usize).collect();
            Ok(kernel(KernelOp::Einsum { equation }, vec![0, 1], vec![vi(x.dtype, shape)]))
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
            let mut outputs = vec![vi(dtype, x.shape.clone())];
            outputs.extend((0..if grad { 2 } else { 4 }).map(|_| vi(dtype, vec![c])));
            outputs.extend((0..if grad { 2 } else { usize::from(v3) }).map(|_| vi(dtype, vec![0])));
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
            let out = if matches!(kind, PoolKind::Max | PoolKind::Avg) { pooled } else { input };
            Ok(kernel(KernelOp::Pool { kind, shape }, data, vec![vi(dtype, out.to_vec())]))
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
            let out = match kind {
                ConvKind::Forward | ConvKind::Depthwise => output,
                ConvKind::BackpropInput | ConvKind::DepthwiseBackpropInput => input,
                ConvKind::BackpropFilter | ConvKind::DepthwiseBackpropFilter => filter,
            };
            Ok(kernel(KernelOp::Conv { kind, shape }, data.to_vec(), vec![vi(dtype, out.to_vec())]))
        }
        _ => Err(no_lowering(node)),
    }
}
