//! The stateless random samplers of a cluster body (TensorFlow's Philox, `crate::random`):
//! the shape operand is a compile-time value; the seed (V1) or key, counter and algorithm
//! (V2) are data, carried as uint64 from kernel to kernel.

use super::*;

/// The ops of this family; any other is "no lowering" (the next family is tried).
pub(super) fn analyze(node: &Node, ins: &[ValueInfo], out: &Outputs<'_>) -> Result<NodeInfo, CompileError> {
    let op = node.op.as_str();
    let need = |n: usize| check_arity(node, ins, n);
    match op {
        // Stateless random samplers (TensorFlow's Philox, `crate::random`): the shape operand
        // is a compile-time value, the seed (V1) or key, counter and algorithm (V2) are data.
        op if autoclust_graph::jit_ops::is_stateless_sampler(op) => {
            use crate::random::Dist;
            let v2 = op.ends_with("V2");
            // Full-range integers: no bounds, int32/int64 only (the clusterer keeps unsigned
            // draws out, `jit_ops::draws_unsigned`).
            let full = op.starts_with("StatelessRandomUniformFullInt");
            let dist = if op.contains("Truncated") {
                Some(Dist::Truncated)
            } else if op.contains("Normal") {
                Some(Dist::Normal)
            } else if op.contains("Int") {
                None
            } else {
                // A half-precision uniform rewritten to float32 (`crate::half`) keeps its draw.
                match node.attr(crate::half::HALF_UNIFORM_ATTR).and_then(AttrValue::as_type) {
                    Some(half) => Some(Dist::UniformHalf { bf16: half == DType::BFloat16 }),
                    None => Some(Dist::Uniform),
                }
            };
            let data: Vec<usize> = match (v2, dist.is_some() || full) {
                (false, true) => vec![1],
                (false, false) => vec![1, 2, 3],
                (true, true) => vec![1, 2, 3],
                (true, false) => vec![1, 2, 3, 4, 5],
            };
            need(data.len() + 1)?;
            let dtype = match (attr_type(node, "dtype"), dist) {
                (Some(d), _) => d,
                (None, Some(_)) => DType::Float32,
                (None, None) => return Err(CompileError::unsupported(node, "no dtype attribute")),
            };
            let dtype_ok = match dist {
                Some(_) => matches!(dtype, DType::Float32 | DType::Float64),
                None => matches!(dtype, DType::Int32 | DType::Int64),
            };
            let vector = |v: &ValueInfo, len: usize| v.shape[..] == [len];
            let operands_ok = if v2 {
                ins[1].dtype == DType::UInt64
                    && vector(&ins[1], 1)
                    && ins[2].dtype == DType::UInt64
                    && vector(&ins[2], 2)
                    && ins[3].shape.is_empty()
                    && ins[3].dtype == DType::Int32
            } else {
                matches!(ins[1].dtype, DType::Int32 | DType::Int64) && vector(&ins[1], 2)
            };
            let bounds_ok = dist.is_some()
                || full
                || data[data.len() - 2..].iter().all(|&i| ins[i].shape.is_empty() && ins[i].dtype == dtype);
            if !dtype_ok || !operands_ok || !bounds_ok {
                return Err(CompileError::unsupported(node, "operands the kernel refuses (it reports them)"));
            }
            // The shape operand must be a compile-time value for the registry to give the shape.
            int_const(node, &ins[0], "shape")?;
            Ok(kernel(KernelOp::StatelessRandom { dist, v2, full, dtype }, data, vec![out.one(dtype)?]))
        }
        // Philox on CPU (what the kernels implement).
        "StatelessRandomGetAlg" => {
            Ok(NodeInfo { kind: NodeKind::Constant, outputs: vec![konst(Tensor::scalar_i32(1))] })
        }
        "StatelessRandomGetKeyCounter" => {
            need(1)?;
            if !matches!(ins[0].dtype, DType::Int32 | DType::Int64) || ins[0].shape[..] != [2] {
                return Err(CompileError::unsupported(node, "the seed is not an integer vector of 2"));
            }
            Ok(kernel(KernelOp::KeyCounter, vec![0], out.typed(&[DType::UInt64; 2])?))
        }
        _ => Err(no_lowering(node)),
    }
}
