//! Reductions and scans of a cluster body: `Sum`/`Mean`/`Max`/`Min`/`Prod`, `Any`/`All`,
//! `ArgMax`/`ArgMin`, `Cumsum`/`Cumprod` and `UnsortedSegmentSum` — kernel steps, folded
//! when their inputs are constants. Axes are compile-time operands; a repeated axis is
//! declined so the interpreter's kernel reports TensorFlow's error.

use super::*;

/// The ops of this family; any other is "no lowering" (the next family is tried).
pub(super) fn analyze(node: &Node, ins: &[ValueInfo], out: &Outputs<'_>) -> Result<NodeInfo, CompileError> {
    let op = node.op.as_str();
    let need = |n: usize| check_arity(node, ins, n);
    match op {
        "Sum" | "Mean" | "Max" | "Min" | "Prod" => {
            need(2)?;
            let x = &ins[0];
            let int = matches!(x.dtype, DType::Int32 | DType::Int64);
            let int_constant = int && x.konst.is_some();
            // Run-time integer values (Keras' bincount takes the `Max` of its int32 input) are
            // reduced exactly by `kernels::reduce_int`.
            if !matches!(x.dtype, DType::Float32 | DType::Float64) && !int {
                return Err(CompileError::unsupported(node, format!("{op} on {}", x.dtype)));
            }
            let r = x.shape.len();
            let mut axes: Vec<usize> =
                int_const(node, &ins[1], "axes")?.iter().map(|&a| norm_axis(node, a, r)).collect::<Result<_, _>>()?;
            distinct_axes(node, &mut axes)?;
            let shape = out.shape(x.dtype)?;
            let kind = match op {
                "Sum" => ReduceKind::Sum,
                "Mean" => ReduceKind::Mean,
                "Max" => ReduceKind::Max,
                "Min" => ReduceKind::Min,
                _ => ReduceKind::Prod,
            };
            if let (true, Some(t)) = (int_constant, &x.konst) {
                // Shape arithmetic (`Prod(Shape(x))` and friends, everywhere in TF2 gradients):
                // the shapes are known at compile time, so fold it.
                let folded = fold_int_reduce(t, &axes, kind, shape)
                    .ok_or_else(|| CompileError::unsupported(node, format!("{op} on {}", x.dtype)))?;
                return Ok(NodeInfo { kind: NodeKind::Constant, outputs: vec![konst(folded)] });
            }
            if axes.iter().all(|&a| x.shape[a] == 1) {
                // Reducing nothing (no axes, or only extent-1 axes — a gradient's `Sum` over
                // the axes `BroadcastGradientArgs` found for operands of one shape): every
                // output element is its one input element, in the same order.
                return Ok(same_values(x, shape));
            }
            Ok(kernel(KernelOp::Reduce { kind, axes }, vec![0], vec![vi(x.dtype, shape)]))
        }
        // Any/All of bools: a max/min reduction of 0/1 (empty reductions give false/true).
        "Any" | "All" => {
            need(2)?;
            let x = &ins[0];
            if x.dtype != DType::Bool {
                return Err(CompileError::Invalid(format!("node '{}' ({op}) needs a bool input", node.name)));
            }
            let r = x.shape.len();
            let mut axes: Vec<usize> =
                int_const(node, &ins[1], "axes")?.iter().map(|&a| norm_axis(node, a, r)).collect::<Result<_, _>>()?;
            distinct_axes(node, &mut axes)?;
            Ok(kernel(KernelOp::BoolReduce { all: op == "All", axes }, vec![0], vec![out.one(DType::Bool)?]))
        }
        "ArgMax" | "ArgMin" => {
            need(2)?;
            let x = &ins[0];
            let to = attr_type(node, "output_type").unwrap_or(DType::Int64);
            if x.dtype != DType::Float32 || x.shape.is_empty() || !matches!(to, DType::Int32 | DType::Int64) {
                return Err(CompileError::unsupported(node, format!("{op} of {} to {to}", x.dtype)));
            }
            let a = int_const(node, &ins[1], "dimension")?;
            let axis = norm_axis(node, a.first().copied().unwrap_or(0), x.shape.len())?;
            if x.shape[axis] == 0 {
                return Err(CompileError::unsupported(node, "an empty dimension (the interpreter reports it)"));
            }
            let value = out.one(to)?;
            Ok(kernel(KernelOp::ArgExtreme { axis, min: op == "ArgMin", out: to }, vec![0], vec![value]))
        }
        "Cumsum" | "Cumprod" => {
            need(2)?;
            let x = &ins[0];
            if x.shape.is_empty() || !matches!(x.dtype, DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64) {
                return Err(CompileError::unsupported(node, format!("{op} of a {} scalar or non-numeric", x.dtype)));
            }
            let axis = match int_const(node, &ins[1], "axis")?[..] {
                [a] => norm_axis(node, a, x.shape.len())?,
                _ => return Err(CompileError::unsupported(node, "axis is not a scalar")),
            };
            let op = KernelOp::Cumulative {
                prod: op == "Cumprod",
                exclusive: attr_bool(node, "exclusive"),
                reverse: attr_bool(node, "reverse"),
                outer: x.shape[..axis].iter().product(),
                n: x.shape[axis],
                inner: x.shape[axis + 1..].iter().product(),
            };
            Ok(kernel(op, vec![0], vec![out.one(x.dtype)?]))
        }
        "UnsortedSegmentSum" => {
            need(3)?;
            let (data, ids) = (&ins[0], &ins[1]);
            let num = match int_const(node, &ins[2], "num_segments")?[..] {
                [n] if n >= 0 => n as usize,
                _ => return Err(CompileError::unsupported(node, "num_segments is not a non-negative scalar")),
            };
            if !matches!(data.dtype, DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64)
                || !matches!(ids.dtype, DType::Int32 | DType::Int64)
                || data.shape.len() < ids.shape.len()
                || data.shape[..ids.shape.len()] != ids.shape[..]
            {
                return Err(CompileError::unsupported(node, "operands the kernel checks (the interpreter reports)"));
            }
            let inner: usize = data.shape[ids.shape.len()..].iter().product();
            Ok(kernel(KernelOp::SegmentSum { num, inner }, vec![0, 1], vec![out.one(data.dtype)?]))
        }
        _ => Err(no_lowering(node)),
    }
}
