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
//! interpreter runs the cluster (and says so). More uses: a `StridedSlice` with run-time
//! bounds but a known output shape (a loop body's `x[i]`), the fake-quantisation gradients
//! with a run-time range (elementwise work plus range reductions, in quantisation-aware
//! training's backward pass), and the pure ops of `autoclust_graph::jit_ops::HOST_COMPUTE_OPS`
//! (`Atan2`, `Lgamma`, `OneHot`, `MatrixBandPart`, `Cholesky`, …: no lowering, but no reason
//! to cut a cluster either), typed by the registry's signature and shape function.
//!
//! Why it is sound: the kernel is the interpreter's, so the values are the reference's by
//! construction. The compiled plan relies on the types the analysis gave each output (a
//! fused loop reads a popped element's buffer with the strides of its analysed shape), so
//! every call checks each output's dtype and shape against them and fails, naming the node,
//! on a mismatch — never reading a buffer with the wrong shape.

use std::fmt;
use std::sync::Arc;

use autoclust_graph::jit_ops::dynamic_slice;
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
    /// Whether the kernel only computes (one of `jit_ops::HOST_COMPUTE_OPS`: a 3-D
    /// convolution, `LRN`, a linear-algebra op, …), taking no list it would update in place
    /// and running no nested program: such a step may run beside others in a concurrent
    /// region (`plan::region`).
    pub(crate) fn computes_only(&self) -> bool {
        autoclust_graph::jit_ops::HOST_COMPUTE_OPS.iter().any(|(op, _)| *op == self.op)
    }

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
            if t.dtype != *dtype || !autoclust_graph::same_dims(&t.shape, shape) {
                let why = match self.op.as_str() {
                    "StridedSlice" | "Slice" => "the slice's bounds ran past its input, which clamps it",
                    _ => "a TensorList whose elements differ in shape",
                };
                return Err(format!(
                    "{} output {i} is {}{:?} but the compiled code was built for {dtype}{shape:?} ({why})",
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

/// Per dimension of a `StridedSlice` node's `begin`/`end` vectors in `body`, what the body
/// fixes about them although the vectors are not compile-time constants: both `Pack`s of
/// scalars, a bound's value when it is a `Const`, and the extent `end − begin` when the end
/// is the begin's own value plus an integer constant (`Add`/`AddV2`, either order), that
/// value itself, or both are constants (Keras' `RandomCrop`: `x[:, i : i + h, j : j + w]`,
/// its offsets drawn every step). Empty for a slice of another form. The constant-argument
/// walk ([`crate::constant_args`]) and the lowering ([`analyze_dynamic_slice`]) both read
/// it, so a slice they accept is compiled once, not once per offset.
pub fn strided_slice_bounds(body: &autoclust_graph::Graph, node: &Node) -> Vec<dynamic_slice::DimBounds> {
    use autoclust_graph::{AttrValue, Output};
    let scalar = |o: Output| -> Option<i64> {
        let n = body.node(o.node);
        let v = (n.op == "Const").then(|| n.attr("value")?.tensor_value()?.ok()?.to_i64_vec()).flatten()?;
        (v.len() == 1).then(|| v[0])
    };
    let packed = |slot: usize| -> Option<&[Output]> {
        let n = body.node(node.inputs.get(slot)?.node);
        let axis = n.attr("axis").and_then(AttrValue::as_int).unwrap_or(0);
        (n.op == "Pack" && axis == 0).then_some(n.inputs.as_slice())
    };
    if node.op != "StridedSlice" {
        return Vec::new();
    }
    let (Some(begin), Some(end)) = (packed(1), packed(2)) else { return Vec::new() };
    if begin.len() != end.len() {
        return Vec::new();
    }
    begin
        .iter()
        .zip(end)
        .map(|(&b, &e)| {
            let (begin, end) = (scalar(b), scalar(e));
            let extent = if b == e {
                Some(0)
            } else if let (Some(b), Some(e)) = (begin, end) {
                e.checked_sub(b)
            } else {
                let sum = body.node(e.node);
                match sum.inputs.as_slice() {
                    &[x, k] | &[k, x] if x == b && matches!(sum.op.as_str(), "Add" | "AddV2") && e.port == 0 => {
                        scalar(k)
                    }
                    _ => None,
                }
            };
            dynamic_slice::DimBounds { begin, end, extent }
        })
        .collect()
}

/// A `StridedSlice` whose `begin`/`end` are run-time values (`x[i]` in a loop body, `i` the
/// loop counter) but whose output shape is still known: constant strides, and every axis the
/// dynamic bounds cover either shrunk away (`shrink_axis_mask`) or taken whole (its bits in
/// both `begin_mask` and `end_mask`, stride 1). The interpreter's kernel slices; the step
/// checks the shape (and the kernel the bounds, with TensorFlow's errors).
pub(crate) fn analyze_dynamic_slice(
    node: &Node,
    ins: &[crate::analyze::ValueInfo],
    bounds: &[dynamic_slice::DimBounds],
    compiler: &crate::Compiler,
) -> Result<crate::analyze::NodeInfo, crate::CompileError> {
    use crate::analyze::{NodeInfo, NodeKind, ValueInfo};
    let decline = |why: &str| crate::CompileError::unsupported(node, why.to_string());
    if ins.len() != 4 {
        return Err(decline("StridedSlice needs 4 operands"));
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
    if !dynamic_slice::strided_slice_runs(&node.attrs, &strides, bounds) {
        return Err(decline(
            "the slice's bounds are not compile-time integer constants, and it does not only index \
             dimensions, take constant or fixed-extent parts of them",
        ));
    }
    let shape = dynamic_slice::strided_slice_shape(&node.attrs, &strides, bounds, &x.shape)
        .ok_or_else(|| decline("the slice's fixed extent exceeds its input"))?;
    let step = HostStep::prepare(node, compiler.options().host_kernels.as_ref(), vec![x.dtype])?;
    Ok(NodeInfo {
        kind: NodeKind::Kernel { op: crate::kernels::KernelOp::Host(step), data_inputs: vec![0, 1, 2, 3] },
        outputs: vec![ValueInfo { dtype: x.dtype, shape, konst: None, list: None }],
    })
}

/// A `Slice` whose `begin` is a run-time value (a loop body's `x[i * tile : (i + 1) * tile]`,
/// XLA's dynamic slice) but whose `size` is a compile-time constant with no `-1` (which would
/// take the rest of a dimension from the run-time begin): the output's shape is `size`. The
/// interpreter's kernel slices and checks the bounds, with TensorFlow's errors.
pub(crate) fn analyze_dynamic_begin_slice(
    node: &Node,
    ins: &[crate::analyze::ValueInfo],
    compiler: &crate::Compiler,
) -> Result<crate::analyze::NodeInfo, crate::CompileError> {
    use crate::analyze::{NodeInfo, NodeKind, ValueInfo};
    let decline = |why: &str| crate::CompileError::unsupported(node, why.to_string());
    if ins.len() != 3 {
        return Err(decline("Slice needs 3 operands"));
    }
    let size = ins[2]
        .konst
        .as_ref()
        .and_then(Tensor::to_i64_vec)
        .ok_or_else(|| decline("begin is not a compile-time integer constant, nor is size"))?;
    let x = &ins[0];
    if size.len() != x.shape.len() || ins[1].shape != [size.len()] {
        // TensorFlow's error, which the interpreter's kernel reports.
        return Err(crate::CompileError::Invalid(format!(
            "node '{}' (Slice): begin and size do not match the input's rank",
            node.name
        )));
    }
    if !dynamic_slice::slice_size_fixed(&size) {
        return Err(decline("begin is a run-time value and size takes the rest of a dimension (-1)"));
    }
    let shape = size
        .iter()
        .zip(&x.shape)
        .map(|(&n, &d)| usize::try_from(n).ok().filter(|&n| n <= d))
        .collect::<Option<Vec<usize>>>()
        .ok_or_else(|| decline("the slice's size exceeds its input"))?;
    let step = HostStep::prepare(node, compiler.options().host_kernels.as_ref(), vec![x.dtype])?;
    Ok(NodeInfo {
        kind: NodeKind::Kernel { op: crate::kernels::KernelOp::Host(step), data_inputs: vec![0, 1, 2] },
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

/// Whether `op` runs as a host step when the compiler has no lowering for it
/// (`autoclust_graph::jit_ops::HOST_COMPUTE_OPS`).
pub(crate) fn is_host_op(op: &str) -> bool {
    autoclust_graph::jit_ops::is_host_op(op)
}

/// A [`HOST_COMPUTE_OPS`](autoclust_graph::jit_ops::HOST_COMPUTE_OPS) node: its output types
/// from its attributes (the op's signature), its output shapes from the registry's shape
/// function on the concrete input shapes and the compile-time integer operands, each of which
/// must come out fully known (or the node is declined, naming the operand). On constant
/// operands the kernel runs once here and its results are constants.
pub(crate) fn analyze_host_op(
    node: &Node,
    ins: &[crate::analyze::ValueInfo],
    compiler: &crate::Compiler,
) -> Result<crate::analyze::NodeInfo, crate::CompileError> {
    use crate::analyze::{NodeInfo, NodeKind, ValueInfo};
    let (out_types, out_shapes) = host_op_types(node, ins)?;
    let step = HostStep::prepare(node, compiler.options().host_kernels.as_ref(), out_types.clone())?;
    let elements: usize = out_shapes.iter().map(|s| s.iter().product::<usize>()).sum();
    if ins.iter().all(|v| v.konst.is_some()) && elements <= FOLD_ELEMENTS {
        let konsts: Vec<&Tensor> = ins.iter().map(|v| v.konst.as_ref().expect("all constant")).collect();
        // A kernel error on constants is the run's error too: let the interpreter report it.
        let outs = step
            .run(&konsts, &out_shapes)
            .map_err(|e| crate::CompileError::Invalid(format!("node '{}' ({}): {e}", node.name, node.op)))?;
        return Ok(NodeInfo { kind: NodeKind::Constant, outputs: outs.into_iter().map(ValueInfo::constant).collect() });
    }
    Ok(NodeInfo {
        kind: NodeKind::Kernel { op: crate::kernels::KernelOp::Host(step), data_inputs: (0..ins.len()).collect() },
        outputs: out_types
            .into_iter()
            .zip(out_shapes)
            .map(|(dtype, shape)| ValueInfo { dtype, shape, konst: None, list: None })
            .collect(),
    })
}

/// A host op's output types and shapes ([`analyze_host_op`]), without preparing its kernel
/// (what the check of nodes no result needs uses too). An output past the tensor budget
/// declines, so the interpreter's kernel reports it.
pub(crate) fn host_op_types(
    node: &Node,
    ins: &[crate::analyze::ValueInfo],
) -> Result<(Vec<DType>, Vec<Vec<usize>>), crate::CompileError> {
    let decline = |why: String| crate::CompileError::unsupported(node, why);
    let schema =
        autoclust_graph::registry::lookup(&node.op).ok_or_else(|| decline("the op is not in the registry".into()))?;
    let out_types = autoclust_graph::infer::attr_output_dtypes(node)
        .ok_or_else(|| decline("its attributes do not give its output types".into()))?;
    if let Some(want) = autoclust_graph::infer::attr_input_dtypes(node) {
        if want.len() != ins.len() || want.iter().zip(ins).any(|(w, v)| *w != v.dtype) {
            // The interpreter's kernel reports TensorFlow's error for the malformed node.
            return Err(crate::CompileError::Invalid(format!(
                "node '{}' ({}): operand types {:?} are not the {:?} its attributes declare",
                node.name,
                node.op,
                ins.iter().map(|v| v.dtype).collect::<Vec<_>>(),
                want
            )));
        }
    }
    if let Some(d) = ins.iter().map(|v| v.dtype).chain(out_types.iter().copied()).find(|d| !host_dtype(*d)) {
        return Err(decline(format!("dtype {d}")));
    }
    let inferred = crate::analyze::registry_shapes(node, schema, ins, &out_types)?;
    let mut out_shapes = Vec::with_capacity(out_types.len());
    for (i, shape) in inferred.iter().enumerate().take(out_types.len()) {
        match shape.to_known() {
            Some(dims) => out_shapes.push(dims),
            None => {
                let operands = autoclust_graph::jit_ops::host_shape_operands(&node.op).unwrap_or(&[]);
                let missing: Vec<usize> =
                    operands.iter().copied().filter(|&k| ins.get(k).is_some_and(|v| v.konst.is_none())).collect();
                return Err(decline(if missing.is_empty() {
                    format!("output {i}'s shape ({shape}) is not known at compile time")
                } else {
                    format!("operand {missing:?} is not a compile-time constant, so output {i}'s shape ({shape}) is not known")
                }));
            }
        }
    }
    if out_shapes.len() != out_types.len() {
        return Err(decline(format!(
            "its shape function gives {} outputs, {} expected",
            out_shapes.len(),
            out_types.len()
        )));
    }
    for (dtype, shape) in out_types.iter().zip(&out_shapes) {
        autoclust_graph::limits::tensor_elements(*dtype, shape).map_err(|e| decline(e.to_string()))?;
    }
    Ok((out_types.to_vec(), out_shapes))
}

/// Largest host-op result folded at compile time (elements, all outputs together).
const FOLD_ELEMENTS: usize = 1 << 16;

/// The dtypes a host step's operands and results may have (those compiled plans carry).
/// The integer types the loops do not compute pass only between host steps and the plan's
/// arguments and results (`autoclust_graph::jit_ops::HOST_INT_OPS`).
fn host_dtype(d: DType) -> bool {
    matches!(d, DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64 | DType::Bool)
        || autoclust_graph::jit_ops::is_host_int(d)
}
