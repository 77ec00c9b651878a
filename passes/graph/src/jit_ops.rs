//! Which ops the JIT lowers: the one list the clusterer admits from and the compiler's
//! lowering table is held to.
//!
//! The clusterer (`autoclust_passes::compilable`) admits a node into a cluster only if its
//! op is here ([`is_jit_op`]); the compiler (`autoclust_compiler::analyze`) lowers exactly
//! [`JIT_COMPUTE_OPS`] — a compiler test probes its lowering table with every registry op
//! and fails when the two drift apart, naming the op — and runs [`HOST_COMPUTE_OPS`] by the
//! interpreter's kernels inside the compiled code. [`VARIABLE_OPS`] never reach the
//! compiler: encapsulation turns them into the bridge's snapshot arguments and write-back
//! results (and the resource scatters into the pure scatters listed here), so the bridge,
//! not the JIT, is what runs them. The dtype restrictions on some of these ops live beside
//! them ([`JIT_FLOAT32_ONLY_OPS`], [`JIT_FLOAT32_ONLY_KERNELS`], [`UINT64_KEY_OPS`]).

use crate::TENSOR_LIST_OPS;

/// The compute ops the compiler lowers (elementwise loops, GEMM and the other kernels,
/// folded shape arithmetic), given supported dtypes.
pub const JIT_COMPUTE_OPS: &[&str] = &[
    // Elementwise arithmetic and math.
    "Add",
    "AddV2",
    "AddN",
    "Sub",
    "Mul",
    "MulNoNan",
    "RealDiv",
    "Div",
    "DivNoNan",
    "Neg",
    "Abs",
    "Exp",
    "Log",
    "Sqrt",
    "Rsqrt",
    "Square",
    "Tanh",
    "Sigmoid",
    "Relu",
    "Maximum",
    "Minimum",
    "Pow",
    "Cast",
    "Select",
    "SelectV2",
    "Reciprocal",
    "Inv",
    "SquaredDifference",
    "Floor",
    "Ceil",
    "Round",
    "Rint",
    "Softsign",
    "SoftsignGrad",
    "Sign",
    "Erf",
    "Erfc",
    "Log1p",
    "Softplus",
    "IsNan",
    "IsFinite",
    "Expm1",
    "Elu",
    "Selu",
    "Relu6",
    "EluGrad",
    "SeluGrad",
    "Relu6Grad",
    "LeakyRelu",
    "LeakyReluGrad",
    "FakeQuantWithMinMaxArgs",
    "FakeQuantWithMinMaxArgsGradient",
    "FakeQuantWithMinMaxVars",
    "FakeQuantWithMinMaxVarsPerChannel",
    "FakeQuantWithMinMaxVarsGradient",
    "FakeQuantWithMinMaxVarsPerChannelGradient",
    "Sin",
    "Cos",
    // Comparisons and logic.
    "Equal",
    "NotEqual",
    "Less",
    "LessEqual",
    "Greater",
    "GreaterEqual",
    "LogicalAnd",
    "LogicalOr",
    "LogicalNot",
    // Linear algebra.
    "MatMul",
    "BatchMatMul",
    "BatchMatMulV2",
    "BiasAdd",
    "BiasAddV1",
    "BiasAddGrad",
    "Einsum",
    "Conv2D",
    "Conv2DBackpropInput",
    "Conv2DBackpropFilter",
    "DepthwiseConv2dNative",
    "DepthwiseConv2dNativeBackpropInput",
    "DepthwiseConv2dNativeBackpropFilter",
    "MaxPool",
    "MaxPoolGrad",
    "AvgPool",
    "AvgPoolGrad",
    "FusedBatchNorm",
    "FusedBatchNormV2",
    "FusedBatchNormV3",
    "FusedBatchNormGrad",
    "FusedBatchNormGradV2",
    "FusedBatchNormGradV3",
    // Reductions.
    "Sum",
    "Mean",
    "Max",
    "Min",
    "Prod",
    "ArgMax",
    "ArgMin",
    "Any",
    "All",
    // Shapes and data movement.
    "Split",
    "SplitV",
    "ReverseV2",
    "StridedSliceGrad",
    "Reshape",
    "Shape",
    "ShapeN",
    "Size",
    "Rank",
    "ExpandDims",
    "Squeeze",
    "Transpose",
    "ConcatV2",
    "Pack",
    "Slice",
    "StridedSlice",
    "Fill",
    "ZerosLike",
    "OnesLike",
    "Tile",
    "BroadcastTo",
    "GatherV2",
    "Gather",
    "UnsortedSegmentSum",
    "Cumsum",
    "Cumprod",
    "Pad",
    "Unpack",
    "L2Loss",
    "InTopKV2",
    "InTopK",
    "ResizeBilinear",
    "ResizeBilinearGrad",
    "ResizeNearestNeighbor",
    "ResizeNearestNeighborGrad",
    "SpaceToBatchND",
    "BatchToSpaceND",
    // Bit-level ops (Keras 3's argmax tests a float's sign bit with them).
    "Bitcast",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "LeftShift",
    "RightShift",
    // The stateless samplers are [`STATELESS_SAMPLER_OPS`]; their V2 helpers:
    "StatelessRandomGetKeyCounter",
    "StatelessRandomGetAlg",
    // Losses, activations and their gradients.
    "Softmax",
    "LogSoftmax",
    "SoftmaxCrossEntropyWithLogits",
    "SparseSoftmaxCrossEntropyWithLogits",
    "ReluGrad",
    "TanhGrad",
    "SigmoidGrad",
    "RsqrtGrad",
    "SqrtGrad",
    "ReciprocalGrad",
    "InvGrad",
    "BroadcastGradientArgs",
    // Division-like ops (folded on constants, a kernel step on run-time values).
    "FloorDiv",
    "FloorMod",
    "Mod",
    "TruncateDiv",
    "TruncateMod",
    // Shape arithmetic, compiled only when its value is known at compile time (the clusterer's
    // `compile_time_known`): TF2 gradients compute reduction indices with these.
    "Range",
    "InvertPermutation",
    "DynamicStitch",
    "ParallelDynamicStitch",
    "ConcatOffset",
    // Plumbing.
    "Identity",
    "IdentityN",
    "StopGradient",
    "Snapshot",
    "PreventGradient",
    "Const",
    "NoOp",
    // Pure scatters (what encapsulation lowers the resource scatters to).
    "TensorScatterAdd",
    "TensorScatterSub",
    "TensorScatterMax",
    "TensorScatterMin",
    "TensorScatterUpdate",
];

/// Pure ops the JIT does not lower but a compiled cluster runs as a *host step* — the
/// interpreter's own kernel called from the compiled plan (XLA's custom calls, in spirit;
/// `autoclust_compiler::host`) — each with the operands that must be known when the cluster
/// is compiled (they fix an output's shape). Every op here is deterministic, touches no
/// resource, and has output shapes its registry shape function determines from its input
/// shapes, those operands and its attributes; its values are the interpreter's by
/// construction. What it buys: the clusters around it are not cut (TensorFlow's XLA
/// compiles all of these), so the elementwise work on either side still fuses and the
/// bridge still snapshots once. Half-precision nodes of these ops stay outside clusters
/// (the interpreter widens half operands its own way per kernel).
pub const HOST_COMPUTE_OPS: &[(&str, &[usize])] = &[
    // Elementwise math without a vector lowering.
    ("Acos", &[]),
    ("Acosh", &[]),
    ("Asin", &[]),
    ("Asinh", &[]),
    ("Atan", &[]),
    ("Atanh", &[]),
    ("Cosh", &[]),
    ("Sinh", &[]),
    ("Tan", &[]),
    ("Atan2", &[]),
    ("BesselI0e", &[]),
    ("BesselI1e", &[]),
    ("BesselI0", &[]),
    ("BesselI1", &[]),
    ("BesselJ0", &[]),
    ("BesselJ1", &[]),
    ("BesselY0", &[]),
    ("BesselY1", &[]),
    ("BesselK0", &[]),
    ("BesselK1", &[]),
    ("BesselK0e", &[]),
    ("BesselK1e", &[]),
    ("Dawsn", &[]),
    ("Expint", &[]),
    ("FresnelCos", &[]),
    ("FresnelSin", &[]),
    ("Spence", &[]),
    ("Digamma", &[]),
    ("Lgamma", &[]),
    ("Erfinv", &[]),
    ("Ndtri", &[]),
    ("Igamma", &[]),
    ("Igammac", &[]),
    ("IgammaGradA", &[]),
    ("Zeta", &[]),
    ("Polygamma", &[]),
    ("Betainc", &[]),
    ("Xdivy", &[]),
    ("Xlogy", &[]),
    ("Xlog1py", &[]),
    ("SoftplusGrad", &[]),
    ("NextAfter", &[]),
    ("ApproximateEqual", &[]),
    ("IsInf", &[]),
    ("ClipByValue", &[]),
    ("CumulativeLogsumexp", &[]),
    ("Bucketize", &[]),
    // Indexing and layout.
    ("OneHot", &[1]),
    ("GatherNd", &[]),
    ("ScatterNd", &[2]),
    ("UnsortedSegmentMax", &[2]),
    ("UnsortedSegmentMin", &[2]),
    ("UnsortedSegmentProd", &[2]),
    ("TopKV2", &[1]),
    ("Roll", &[]),
    ("MirrorPad", &[1]),
    ("MirrorPadGrad", &[1]),
    ("PadV2", &[1]),
    ("DepthToSpace", &[]),
    ("SpaceToDepth", &[]),
    ("LinSpace", &[2]),
    ("EuclideanNorm", &[1]),
    ("MatrixBandPart", &[]),
    ("MatrixDiag", &[]),
    ("MatrixDiagV2", &[1, 2, 3]),
    ("MatrixDiagV3", &[1, 2, 3]),
    ("MatrixDiagPart", &[]),
    ("MatrixDiagPartV2", &[1]),
    ("MatrixDiagPartV3", &[1]),
    ("MatrixSetDiag", &[]),
    ("MatrixSetDiagV2", &[]),
    ("MatrixSetDiagV3", &[]),
    ("Diag", &[]),
    ("DiagPart", &[]),
    ("DataFormatVecPermute", &[]),
    ("DataFormatDimMap", &[]),
    ("ReverseSequence", &[]),
    // Counting and sampling: the output's length is the size or sample-count operand.
    ("PopulationCount", &[]),
    ("DenseBincount", &[1]),
    ("StatelessMultinomial", &[1]),
    // Linear algebra.
    ("BatchMatMulV3", &[]),
    ("Cholesky", &[]),
    ("MatrixInverse", &[]),
    ("MatrixDeterminant", &[]),
    ("LogMatrixDeterminant", &[]),
    ("MatrixSolve", &[]),
    ("MatrixTriangularSolve", &[]),
    ("MatrixSquareRoot", &[]),
    ("Qr", &[]),
    ("SelfAdjointEigV2", &[]),
    ("Svd", &[]),
    ("TridiagonalSolve", &[]),
    ("TridiagonalMatMul", &[]),
    ("BandedTriangularSolve", &[]),
    // Images and neural-network ops without a lowering.
    ("LRN", &[]),
    ("LRNGrad", &[]),
    ("ExtractImagePatches", &[]),
    ("ResizeBicubic", &[1]),
    ("ResizeBicubicGrad", &[]),
    ("ResizeArea", &[1]),
    ("CropAndResize", &[3]),
    ("RGBToHSV", &[]),
    ("HSVToRGB", &[]),
    ("AdjustContrastv2", &[]),
    ("AdjustHue", &[]),
    ("AdjustSaturation", &[]),
    ("MaxPoolV2", &[1, 2]),
    ("MaxPoolGradV2", &[]),
    ("MaxPool3D", &[]),
    ("MaxPool3DGrad", &[]),
    ("AvgPool3D", &[]),
    ("AvgPool3DGrad", &[0]),
    ("Conv3D", &[]),
    ("Conv3DBackpropInputV2", &[0]),
    ("Conv3DBackpropFilterV2", &[1]),
    ("Dilation2D", &[]),
    ("Dilation2DBackpropInput", &[]),
    ("Dilation2DBackpropFilter", &[]),
];

/// The ops a cluster may run on the integer types the JIT's loops do not compute (int8,
/// uint8, int16, uint16, uint32, uint64: [`is_host_int`]): the compiler runs them by the
/// interpreter's kernel ([`HOST_COMPUTE_OPS`]; a `Cast` from or to such a type is a host step
/// too), so such a value only passes from a cluster's argument or a host step to a host step
/// or a cluster's result, never into a fused loop. `Cast` takes an image's uint8 pixels to
/// float; `PopulationCount` gives uint8 from any integer type.
pub const HOST_INT_OPS: &[&str] = &["Cast", "PopulationCount"];

/// Whether `t` is one of the integer types only [`HOST_INT_OPS`] take inside a cluster.
pub fn is_host_int(t: crate::DType) -> bool {
    use crate::DType::*;
    matches!(t, Int8 | UInt8 | Int16 | UInt16 | UInt32 | UInt64)
}

/// Whether `op` is one of [`HOST_INT_OPS`].
pub fn takes_host_ints(op: &str) -> bool {
    HOST_INT_OPS.contains(&op)
}

/// What the lists of this module say about one op, looked up once per op name: the
/// clusterer asks for every node of a graph (10⁵–10⁶ nodes), and a scan of the lists was a
/// few hundred string comparisons per node.
#[derive(Clone, Copy, Default)]
struct OpClass {
    jit_compute: bool,
    host_operands: Option<&'static [usize]>,
    stateless_sampler: bool,
    variable: bool,
    tensor_list: bool,
    float32_only: bool,
    float_only_kernel: bool,
    no_float64: bool,
}

/// The [`OpClass`] of every op some list names.
fn op_class(op: &str) -> OpClass {
    type Index = std::collections::HashMap<&'static str, OpClass, foldhash::fast::FixedState>;
    static INDEX: std::sync::OnceLock<Index> = std::sync::OnceLock::new();
    let index = INDEX.get_or_init(|| {
        let mut index = Index::default();
        for &op in JIT_COMPUTE_OPS {
            index.entry(op).or_default().jit_compute = true;
        }
        for &(op, operands) in HOST_COMPUTE_OPS {
            index.entry(op).or_default().host_operands = Some(operands);
        }
        for &op in STATELESS_SAMPLER_OPS {
            index.entry(op).or_default().stateless_sampler = true;
        }
        for &op in VARIABLE_OPS {
            index.entry(op).or_default().variable = true;
        }
        for &op in TENSOR_LIST_OPS {
            index.entry(op).or_default().tensor_list = true;
        }
        for &op in JIT_FLOAT32_ONLY_OPS.iter().chain(JIT_FLOAT32_ONLY_KERNELS) {
            index.entry(op).or_default().float32_only = true;
        }
        for &op in JIT_FLOAT_ONLY_KERNELS {
            index.entry(op).or_default().float_only_kernel = true;
        }
        for &op in JIT_NO_FLOAT64_OPS {
            index.entry(op).or_default().no_float64 = true;
        }
        index
    });
    index.get(op).copied().unwrap_or_default()
}

/// The operands of a [`HOST_COMPUTE_OPS`] op that must be known at compile time, or `None`
/// when `op` is not run as a host step.
pub fn host_shape_operands(op: &str) -> Option<&'static [usize]> {
    op_class(op).host_operands
}

/// Whether a compiled cluster runs `op` as a host step ([`HOST_COMPUTE_OPS`]).
pub fn is_host_op(op: &str) -> bool {
    host_shape_operands(op).is_some()
}

/// The variable ops the bridge snapshots and writes back: admitted into clusters, turned
/// by encapsulation into arguments, results and pure ops before the compiler sees a body.
pub const VARIABLE_OPS: &[&str] = &[
    "ReadVariableOp",
    "AssignVariableOp",
    "AssignAddVariableOp",
    "AssignSubVariableOp",
    "ResourceGather",
    "ResourceScatterAdd",
    "ResourceScatterSub",
    "ResourceScatterMax",
    "ResourceScatterMin",
    "ResourceScatterUpdate",
    "ResourceScatterNdAdd",
    "ResourceScatterNdSub",
    "ResourceScatterNdMax",
    "ResourceScatterNdMin",
    "ResourceScatterNdUpdate",
    "ResourceApplyGradientDescent",
    "ResourceApplyMomentum",
    "ResourceApplyAdam",
    "ResourceApplyAdamWithAmsgrad",
    "ResourceApplyKerasMomentum",
    "ResourceApplyAdagrad",
    "ResourceApplyAdagradV2",
    "ResourceApplyRMSProp",
    "ResourceApplyAdaMax",
    "ResourceApplyAdadelta",
    "ResourceApplyCenteredRMSProp",
    "ResourceApplyFtrl",
    "ResourceApplyFtrlV2",
    "ResourceApplyProximalGradientDescent",
    "ResourceApplyProximalAdagrad",
    "ResourceApplyAddSign",
    "ResourceApplyPowerSign",
    "VariableShape",
];

/// The stateless random ops that pass uint64 keys and counters from kernel to kernel (no
/// loop ever computes on them): the only ops whose uint64 operands a cluster may carry.
pub const UINT64_KEY_OPS: &[&str] = &[
    "StatelessRandomGetKeyCounter",
    "StatelessRandomUniformV2",
    "StatelessRandomNormalV2",
    "StatelessTruncatedNormalV2",
    "StatelessRandomUniformIntV2",
    "StatelessRandomUniformFullIntV2",
];

/// The elementwise ops the JIT computes in float32 only (its transcendental routines,
/// `autoclust_compiler::analyze::EwOp::is_transcendental`, kept equal by a compiler test):
/// the clusterer admits them on float32 alone, so a float64 `Exp` stays outside clusters
/// instead of sending its cluster to the interpreter.
pub const JIT_FLOAT32_ONLY_OPS: &[&str] =
    &["Exp", "Log", "Tanh", "Sigmoid", "Pow", "Erf", "Erfc", "Log1p", "Softplus", "Expm1", "Elu", "Selu", "Sin", "Cos"];

/// The kernel ops (not elementwise) the JIT lowers for float32 only (its GEMM, softmax and
/// arg-extreme kernels); admitted into clusters on float32 alone, like
/// [`JIT_FLOAT32_ONLY_OPS`].
pub const JIT_FLOAT32_ONLY_KERNELS: &[&str] = &[
    "Softmax",
    "LogSoftmax",
    "ArgMax",
    "ArgMin",
    "BiasAddGrad",
    "SoftmaxCrossEntropyWithLogits",
    "SparseSoftmaxCrossEntropyWithLogits",
    "ResizeBilinearGrad",
    "ResizeNearestNeighborGrad",
];

/// The elementwise ops the JIT lowers for float32 but not float64 (its float64 loops build
/// only the constants 0, ±1 and ½, and these need others: Relu6's 6, the ELU/SELU gradients'
/// and leaky ReLU's coefficients); admitted into clusters on any type but float64. (The
/// fake-quantisation ops, which have no float64 loop either, take float32 only and have no
/// type attribute: nothing to refuse.)
pub const JIT_NO_FLOAT64_OPS: &[&str] = &["Relu6", "Relu6Grad", "EluGrad", "SeluGrad", "LeakyRelu", "LeakyReluGrad"];

/// The kernel ops the JIT lowers for float32 and float64 only (its products — `MatMul`,
/// batched, `Einsum` —, convolutions, pooling, batch normalisation and `L2Loss`); TensorFlow also runs some of
/// them on integers (an int32 `Conv2D`, a uint8 `MaxPool`), which the interpreter computes.
pub const JIT_FLOAT_ONLY_KERNELS: &[&str] = &[
    "MatMul",
    "Conv2D",
    "Conv2DBackpropInput",
    "Conv2DBackpropFilter",
    "DepthwiseConv2dNative",
    "DepthwiseConv2dNativeBackpropInput",
    "DepthwiseConv2dNativeBackpropFilter",
    "MaxPool",
    "MaxPoolGrad",
    "AvgPool",
    "AvgPoolGrad",
    "FusedBatchNorm",
    "FusedBatchNormV2",
    "FusedBatchNormV3",
    "FusedBatchNormGrad",
    "FusedBatchNormGradV2",
    "FusedBatchNormGradV3",
    "BatchMatMul",
    "BatchMatMulV2",
    "Einsum",
    "L2Loss",
];

/// Why the JIT does not compute `op` with type attribute `t` (`T`) although it lowers the op
/// (`None`: it does): the float32-only ops and kernels on any other type but half precision
/// (the compiler computes half in float32), the float-only kernels on any non-float type, the
/// ops without a float64 lowering on float64.
pub fn float_type_refusal(op: &str, t: Option<crate::DType>) -> Option<String> {
    let t = t?;
    let c = op_class(op);
    // TensorFlow's scan keeps a half accumulator, rounded every step; the compiler
    // computes half precision in float32 (the interpreter rounds as TensorFlow does).
    if matches!(op, "Cumsum" | "Cumprod") && t.is_half() {
        return Some(format!("{op} on {t}, which TensorFlow accumulates in {t}"));
    }
    if c.float32_only && t != crate::DType::Float32 && !t.is_half() {
        return Some(format!("{op} on {t}"));
    }
    let float = matches!(t, crate::DType::Float32 | crate::DType::Float64) || t.is_half();
    if c.float_only_kernel && !float {
        return Some(format!("{op} on {t}"));
    }
    if c.no_float64 && t == crate::DType::Float64 {
        return Some(format!("{op} on {t}"));
    }
    None
}

/// Whether the clusterer may put `op` in a cluster (given supported dtypes): a compute op
/// the JIT lowers, a host-step op ([`HOST_COMPUTE_OPS`]), a variable op the bridge runs, or a
/// TensorList op (typed by the compiler, run by the interpreter's list kernels).
pub fn is_jit_op(op: &str) -> bool {
    let c = op_class(op);
    c.jit_compute || c.host_operands.is_some() || c.stateless_sampler || c.variable || c.tensor_list
}

/// The stateless random samplers the JIT lowers (TensorFlow's Philox): pure functions of
/// their seed (V1) or key, counter and algorithm (V2), their shape operand (input 0) a
/// compile-time value (the full-range integer ones for int32/int64 only: a cluster carries
/// no unsigned values). The compiler's sampler lowering and its constant-operand rule
/// both read this list.
pub const STATELESS_SAMPLER_OPS: &[&str] = &[
    "StatelessRandomUniform",
    "StatelessRandomNormal",
    "StatelessTruncatedNormal",
    "StatelessRandomUniformInt",
    "StatelessRandomUniformV2",
    "StatelessRandomNormalV2",
    "StatelessTruncatedNormalV2",
    "StatelessRandomUniformIntV2",
    "StatelessRandomUniformFullInt",
    "StatelessRandomUniformFullIntV2",
];

/// Whether `op` draws full-range unsigned integers (a `StatelessRandomUniformFullInt*` whose
/// `dtype`, `dtype_attr` here, is uint32 or uint64, its default): a cluster carries no
/// unsigned values, so such a draw stays outside clusters.
pub fn draws_unsigned(op: &str, dtype_attr: Option<crate::DType>) -> bool {
    op.starts_with("StatelessRandomUniformFullInt")
        && !matches!(dtype_attr, Some(crate::DType::Int32 | crate::DType::Int64))
}

/// Whether `op` is one of [`STATELESS_SAMPLER_OPS`].
pub fn is_stateless_sampler(op: &str) -> bool {
    op_class(op).stateless_sampler
}

/// Whether `op` is one of [`TENSOR_LIST_OPS`].
pub fn is_tensor_list_op(op: &str) -> bool {
    op_class(op).tensor_list
}

/// Whether `op` is one of the variable ops the bridge snapshots and writes back.
pub fn is_variable_op(op: &str) -> bool {
    op_class(op).variable
}

/// The run-time-bounds slices the compiler runs as host steps inside a compiled body (XLA's
/// dynamic slice), whose output shape is known although their bounds are not. One rule for
/// the clusterer (`autoclust_passes::compilable`, which keeps other run-time-bound slices of
/// loop bodies out of clusters), the compiler (`autoclust_compiler::host`, which lowers
/// them) and the constant-argument walk (`autoclust_compiler::constant_args`, which then
/// leaves their bounds run-time values).
pub mod dynamic_slice {
    use crate::{AttrValue, Attrs};

    /// A `Slice` whose `size` is this constant may take a run-time `begin`: every
    /// dimension's size is given (no `-1`, which would make the size depend on `begin`).
    pub fn slice_size_fixed(size: &[i64]) -> bool {
        size.iter().all(|&d| d >= 0)
    }

    /// What a body fixes about one dimension of a `StridedSlice`'s `begin`/`end` vectors
    /// when the vectors themselves are run-time values (`Pack`s of scalars, some computed):
    /// each bound's value when it is a constant, and `end − begin` when that is fixed
    /// although the bounds are not (`x[:, i : i + h]`, Keras' `RandomCrop`).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct DimBounds {
        pub begin: Option<i64>,
        pub end: Option<i64>,
        pub extent: Option<i64>,
    }

    /// A `StridedSlice` with these attributes and constant `strides` may take run-time
    /// `begin`/`end`: no ellipsis or new axis, and every sliced dimension either shrunk to
    /// one element (wherever the index puts it) or, at stride 1, with both bounds known
    /// (masked or constant, `bounds[d]`) or a fixed extent apart (neither masked). Its output
    /// shape is then [`strided_slice_shape`]'s — when a fixed extent's `begin` is in range;
    /// the host step that runs it checks, and a call it does not fit runs in the interpreter.
    pub fn strided_slice_runs(attrs: &Attrs, strides: &[i64], bounds: &[DimBounds]) -> bool {
        let mask = |name: &str| attrs.get(name).and_then(AttrValue::as_int).unwrap_or(0);
        if mask("ellipsis_mask") != 0 || mask("new_axis_mask") != 0 {
            return false;
        }
        let (begin, end, shrink) = (mask("begin_mask"), mask("end_mask"), mask("shrink_axis_mask"));
        strides.iter().enumerate().all(|(d, &stride)| {
            let bit = 1i64 << d;
            let b = bounds.get(d).copied().unwrap_or_default();
            let (begin_masked, end_masked) = (begin & bit != 0, end & bit != 0);
            shrink & bit != 0
                || (stride == 1
                    && ((begin_masked || b.begin.is_some()) && (end_masked || b.end.is_some())
                        || (!begin_masked && !end_masked && b.extent.is_some_and(|k| k >= 0))))
        })
    }

    /// The output shape of a slice [`strided_slice_runs`] accepts, from its input's shape:
    /// shrunk dimensions dropped, known bounds clamped as TensorFlow clamps them, fixed
    /// extents taken, the dimensions past `strides` kept whole. `None` when a fixed extent
    /// exceeds its dimension.
    pub fn strided_slice_shape(
        attrs: &Attrs,
        strides: &[i64],
        bounds: &[DimBounds],
        input: &[usize],
    ) -> Option<Vec<usize>> {
        let mask = |name: &str| attrs.get(name).and_then(AttrValue::as_int).unwrap_or(0);
        let (begin, end, shrink) = (mask("begin_mask"), mask("end_mask"), mask("shrink_axis_mask"));
        let mut shape = Vec::with_capacity(input.len());
        for (d, &n) in input.iter().enumerate() {
            let bit = 1i64 << d;
            if d >= strides.len() {
                shape.push(n);
                continue;
            }
            if shrink & bit != 0 {
                continue;
            }
            let b = bounds.get(d).copied().unwrap_or_default();
            let n_i = n as i64;
            let clamp = |c: i64| (if c < 0 { c + n_i } else { c }).clamp(0, n_i);
            let from = if begin & bit != 0 { Some(0) } else { b.begin.map(clamp) };
            let to = if end & bit != 0 { Some(n_i) } else { b.end.map(clamp) };
            match (from, to) {
                (Some(from), Some(to)) => shape.push((to - from).max(0) as usize),
                _ => {
                    let k = b.extent.and_then(|k| usize::try_from(k).ok())?;
                    shape.push(Some(k).filter(|&k| k <= n)?);
                }
            }
        }
        Some(shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every listed op is a registry op and listed once.
    #[test]
    fn the_lists_name_registry_ops_once() {
        let mut seen = std::collections::HashSet::new();
        for op in JIT_COMPUTE_OPS.iter().chain(STATELESS_SAMPLER_OPS).chain(VARIABLE_OPS) {
            assert!(crate::registry::is_known(op), "{op} is not a registry op");
            assert!(seen.insert(*op), "{op} is listed twice");
        }
        for op in
            UINT64_KEY_OPS.iter().chain(JIT_FLOAT32_ONLY_OPS).chain(JIT_FLOAT32_ONLY_KERNELS).chain(JIT_NO_FLOAT64_OPS)
        {
            assert!(
                JIT_COMPUTE_OPS.contains(op) || is_stateless_sampler(op),
                "{op} has a dtype rule but is not lowered"
            );
        }
    }

    #[test]
    fn run_time_slices_index_or_take_whole_dimensions() {
        use dynamic_slice::*;
        let attrs = |masks: &[(&str, i64)]| -> crate::Attrs {
            masks.iter().map(|&(k, v)| (k.to_string(), crate::AttrValue::I(v))).collect()
        };
        // x[i] of a [5, 3, 2] input: the first dimension indexed, the rest whole.
        let x_i = attrs(&[("shrink_axis_mask", 1)]);
        assert!(strided_slice_runs(&x_i, &[1], &[]));
        assert_eq!(strided_slice_shape(&x_i, &[1], &[], &[5, 3, 2]), Some(vec![3, 2]));
        // x[:, j]: the first dimension whole (both masks, stride 1), the second indexed.
        let x_j = attrs(&[("begin_mask", 1), ("end_mask", 1), ("shrink_axis_mask", 2)]);
        assert!(strided_slice_runs(&x_j, &[1, 1], &[]));
        assert_eq!(strided_slice_shape(&x_j, &[1, 1], &[], &[5, 3, 2]), Some(vec![5, 2]));
        // x[::2, j] and x[: i + 1] take a run-time-dependent or strided part: not.
        assert!(!strided_slice_runs(&x_j, &[2, 1], &[]));
        assert!(!strided_slice_runs(&attrs(&[("begin_mask", 1)]), &[1], &[]));
        assert!(!strided_slice_runs(&attrs(&[("shrink_axis_mask", 1), ("new_axis_mask", 2)]), &[1], &[]));
        // x[:, i : i + 2, j : j + 1, :] (RandomCrop): fixed extents, the outer dims whole.
        let crop = attrs(&[("begin_mask", 9), ("end_mask", 9)]);
        let ext = |k| DimBounds { extent: Some(k), ..DimBounds::default() };
        let bounds = [DimBounds::default(), ext(2), ext(1), DimBounds::default()];
        assert!(strided_slice_runs(&crop, &[1, 1, 1, 1], &bounds));
        assert_eq!(strided_slice_shape(&crop, &[1, 1, 1, 1], &bounds, &[4, 5, 3, 2]), Some(vec![4, 2, 1, 2]));
        assert_eq!(strided_slice_shape(&crop, &[1, 1, 1, 1], &bounds, &[4, 1, 3, 2]), None);
        assert!(!strided_slice_runs(&crop, &[1, 2, 1, 1], &bounds));
        assert!(!strided_slice_runs(&crop, &[1, 1, 1, 1], &bounds[..2]));
        assert!(!strided_slice_runs(&crop, &[1, 1, 1, 1], &[DimBounds::default(), ext(-1), ext(1)]));
        // x[i : i + 4, 1:] and x[i : i + 4, -2:]: a constant begin with the end masked,
        // clamped as TensorFlow clamps it.
        let rows = attrs(&[("end_mask", 2)]);
        let from = |c| DimBounds { begin: Some(c), end: Some(0), extent: None };
        assert!(strided_slice_runs(&rows, &[1, 1], &[ext(4), from(1)]));
        assert_eq!(strided_slice_shape(&rows, &[1, 1], &[ext(4), from(1)], &[10, 3]), Some(vec![4, 2]));
        assert_eq!(strided_slice_shape(&rows, &[1, 1], &[ext(4), from(-2)], &[10, 3]), Some(vec![4, 2]));
        assert_eq!(strided_slice_shape(&rows, &[1, 1], &[ext(4), from(5)], &[10, 3]), Some(vec![4, 0]));
        assert!(!strided_slice_runs(&rows, &[1, 1], &[ext(4), DimBounds::default()]));
        assert!(slice_size_fixed(&[2, 0, 3]));
        assert!(!slice_size_fixed(&[2, -1]));
    }
}
