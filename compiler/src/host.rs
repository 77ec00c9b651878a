//! Host kernels: ops this compiler types but does not lower, run by a kernel the embedding
//! runtime provides (XLA's custom calls, in spirit).
//!
//! What it is for: TensorFlow's TensorList ops (`DT_VARIANT` lists of tensors, the Keras RNN
//! loop's inputs, outputs and gradient accumulators) live inside the loop bodies a cluster
//! compiles ([`crate::control_flow`]). Their values are reference-counted lists, not
//! buffers, so a fused loop has nothing to do with them; what the compiled body needs is
//! their *types* at compile time ([`crate::lists`]) and a call of the interpreter's own
//! kernel at run time. The runtime implements [`HostKernels`] with its kernel registry and
//! puts it in [`crate::CompilerOptions::host_kernels`]; without one, such ops decline and the
//! interpreter runs the cluster (and says so). Two more uses: a `StridedSlice` with run-time
//! bounds but a known output shape (a loop body's `x[i]`), and the fake-quantisation gradients
//! with a run-time range (elementwise work plus range reductions, in quantisation-aware
//! training's backward pass).
//!
//! Why it is sound: the kernel is the interpreter's, so the values are the reference's by
//! construction. The compiled plan relies on the types the analysis gave each output (a
//! fused loop reads a popped element's buffer with the strides of its analysed shape), so
//! every call checks each output's dtype and shape against them and fails, naming the node,
//! on a mismatch — never reading a buffer with the wrong shape.

use std::fmt;
use std::sync::Arc;

use autoclust_graph::{DType, Node, Tensor};

/// A prepared kernel: operands in, results out, or an error message.
pub type HostFn = Box<dyn Fn(Vec<Tensor>) -> Result<Vec<Tensor>, String> + Send + Sync>;

/// Kernels for ops the compiler types but does not lower (module doc).
pub trait HostKernels: Send + Sync {
    /// The kernel of `node` with its attributes fixed, or an error when there is none.
    fn prepare(&self, node: &Node) -> Result<HostFn, String>;
}

/// A shared [`HostKernels`] in the compiler's options.
#[derive(Clone)]
pub struct HostKernelsRef(pub Arc<dyn HostKernels>);

impl fmt::Debug for HostKernelsRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HostKernels")
    }
}

/// One host-kernel step of a plan: the kernel and the types the analysis gave its outputs.
#[derive(Clone)]
pub struct HostStep {
    op: String,
    kernel: Arc<HostFn>,
    dtypes: Vec<DType>,
}

impl HostStep {
    /// Prepares `node`'s kernel with the compiler's host kernels.
    pub(crate) fn prepare(
        node: &Node,
        kernels: Option<&HostKernelsRef>,
        dtypes: Vec<DType>,
    ) -> Result<HostStep, crate::CompileError> {
        let Some(kernels) = kernels else {
            return Err(crate::CompileError::unsupported(node, "no host kernels were given to the compiler"));
        };
        let kernel = kernels.0.prepare(node).map_err(|e| crate::CompileError::unsupported(node, e))?;
        Ok(HostStep { op: node.op.clone(), kernel: Arc::new(kernel), dtypes })
    }

    /// Runs the kernel and checks its results against the analysed types.
    pub(crate) fn run(&self, inputs: &[&Tensor], out_shapes: &[Vec<usize>]) -> Result<Vec<Tensor>, String> {
        self.run_owned(inputs.iter().map(|&t| t.clone()).collect(), out_shapes)
    }

    /// As [`HostStep::run`] on owned operands (a list the caller no longer holds is
    /// updated in place).
    pub(crate) fn run_owned(&self, inputs: Vec<Tensor>, out_shapes: &[Vec<usize>]) -> Result<Vec<Tensor>, String> {
        let outs = (self.kernel)(inputs)?;
        if outs.len() != out_shapes.len() {
            return Err(format!("{} returned {} values, {} were expected", self.op, outs.len(), out_shapes.len()));
        }
        for (i, (t, (shape, dtype))) in outs.iter().zip(out_shapes.iter().zip(&self.dtypes)).enumerate() {
            if t.dtype != *dtype || t.shape != *shape {
                return Err(format!(
                    "{} output {i} is {}{:?} but the compiled code was built for {dtype}{shape:?} \
                     (a TensorList whose elements differ in shape)",
                    self.op, t.dtype, t.shape
                ));
            }
        }
        Ok(outs)
    }
}

impl PartialEq for HostStep {
    fn eq(&self, other: &HostStep) -> bool {
        Arc::ptr_eq(&self.kernel, &other.kernel)
    }
}

impl fmt::Debug for HostStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.op)
    }
}

/// A `StridedSlice` whose `begin`/`end` are run-time values (`x[i]` in a loop body, `i` the
/// loop counter) but whose output shape is still known: constant strides, and every axis the
/// dynamic bounds cover either shrunk away (`shrink_axis_mask`) or taken whole (its bits in
/// both `begin_mask` and `end_mask`, stride 1). The interpreter's kernel slices; the step
/// checks the shape (and the kernel the bounds, with TensorFlow's errors).
pub(crate) fn analyze_dynamic_slice(
    node: &Node,
    ins: &[crate::analyze::ValueInfo],
    compiler: &crate::Compiler,
) -> Result<crate::analyze::NodeInfo, crate::CompileError> {
    use crate::analyze::{NodeInfo, NodeKind, ValueInfo};
    let decline = |why: &str| crate::CompileError::unsupported(node, why.to_string());
    if ins.len() != 4 {
        return Err(decline("StridedSlice needs 4 operands"));
    }
    let mask = |name: &str| node.attr(name).and_then(autoclust_graph::AttrValue::as_int).unwrap_or(0);
    if mask("ellipsis_mask") != 0 || mask("new_axis_mask") != 0 {
        return Err(decline("a run-time slice with an ellipsis or new axis is not compiled"));
    }
    let strides = ins[3]
        .konst
        .as_ref()
        .and_then(Tensor::to_i64_vec)
        .ok_or_else(|| decline("the slice's strides are not a compile-time constant"))?;
    let x = &ins[0];
    if strides.len() > x.shape.len() || ins[1].shape != [strides.len()] || ins[2].shape != [strides.len()] {
        return Err(decline("the slice's bounds do not match its input"));
    }
    let (begin, end, shrink) = (mask("begin_mask"), mask("end_mask"), mask("shrink_axis_mask"));
    let mut shape = Vec::with_capacity(x.shape.len());
    for (d, &n) in x.shape.iter().enumerate() {
        let bit = 1i64 << d;
        if d >= strides.len() {
            shape.push(n);
        } else if shrink & bit != 0 {
            // One element, wherever the run-time index puts it.
        } else if begin & bit != 0 && end & bit != 0 && strides[d] == 1 {
            shape.push(n);
        } else {
            return Err(decline("begin is not a compile-time integer constant"));
        }
    }
    let step = HostStep::prepare(node, compiler.options().host_kernels.as_ref(), vec![x.dtype])?;
    Ok(NodeInfo {
        kind: NodeKind::Kernel { op: crate::kernels::KernelOp::Host(step), data_inputs: vec![0, 1, 2, 3] },
        outputs: vec![ValueInfo { dtype: x.dtype, shape, konst: None, list: None }],
    })
}

/// Whether `op` is a fake-quantisation gradient with a run-time range (a host step).
pub(crate) fn is_fake_quant_grad(op: &str) -> bool {
    matches!(op, "FakeQuantWithMinMaxVarsGradient" | "FakeQuantWithMinMaxVarsPerChannelGradient")
}

/// `FakeQuantWithMinMaxVarsGradient` and its per-channel form (gradients, inputs, min, max →
/// the input's gradient and the range's two): an elementwise pass with two reductions that
/// depend on the run-time range, run by the interpreter's kernel inside the compiled plan
/// so that a quantisation-aware training step's backward pass is not cut at each of them.
pub(crate) fn analyze_fake_quant_grad(
    node: &Node,
    ins: &[crate::analyze::ValueInfo],
    compiler: &crate::Compiler,
) -> Result<crate::analyze::NodeInfo, crate::CompileError> {
    use crate::analyze::{NodeInfo, NodeKind, ValueInfo};
    let per_channel = node.op.ends_with("PerChannelGradient");
    let fits = |v: &ValueInfo, x: &ValueInfo| {
        v.dtype == DType::Float32
            && if per_channel { v.shape.len() == 1 && x.shape.last() == Some(&v.shape[0]) } else { v.shape.is_empty() }
    };
    let ok = ins.len() == 4
        && ins[..2].iter().all(|v| v.dtype == DType::Float32)
        && ins[0].shape == ins[1].shape
        && fits(&ins[2], &ins[1])
        && fits(&ins[3], &ins[1]);
    if !ok {
        // TensorFlow's error, which the interpreter's kernel reports.
        return Err(crate::CompileError::Invalid(format!(
            "node '{}' ({}): operands {:?} do not fit",
            node.name,
            node.op,
            ins.iter().map(|v| (v.dtype, &v.shape)).collect::<Vec<_>>()
        )));
    }
    let step = HostStep::prepare(node, compiler.options().host_kernels.as_ref(), vec![DType::Float32; 3])?;
    let out = |shape: &Vec<usize>| ValueInfo { dtype: DType::Float32, shape: shape.clone(), konst: None, list: None };
    Ok(NodeInfo {
        kind: NodeKind::Kernel { op: crate::kernels::KernelOp::Host(step), data_inputs: vec![0, 1, 2, 3] },
        outputs: vec![out(&ins[1].shape), out(&ins[2].shape), out(&ins[3].shape)],
    })
}
