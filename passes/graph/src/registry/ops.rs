//! The table of supported ops: signatures and attributes as in TensorFlow's
//! `REGISTER_OP`s, each with its shape function from [`super::shapes`].

use super::shapes as s;
use super::{ArgSpec, AttrDefault, AttrKind, AttrSpec, OpFamily, OpSchema, ShapeFn, TypeRule, ValueFn};
use crate::DType::{self, *};

const FLOATS: &[DType] = &[Float16, BFloat16, Float32, Float64];
const FLOAT_COMPLEX: &[DType] = &[Float16, BFloat16, Float32, Float64, Complex64, Complex128];
const REAL: &[DType] = &[Float16, BFloat16, Float32, Float64, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64];
const NUMBER: &[DType] = &[
    Float16, BFloat16, Float32, Float64, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Complex64,
    Complex128,
];
const INDEX: &[DType] = &[Int32, Int64];

const T: TypeRule = TypeRule::Attr("T");
const RES: TypeRule = TypeRule::Fixed(Resource);
/// The dtypes of the full-range integer random ops.
const FULL_INT: &[DType] = &[Int32, Int64, UInt32, UInt64];
const BOOL: TypeRule = TypeRule::Fixed(Bool);
const INT32: TypeRule = TypeRule::Fixed(Int32);

const fn ty(name: &'static str) -> TypeRule {
    TypeRule::Attr(name)
}
const fn a(name: &'static str, ty: TypeRule) -> ArgSpec {
    ArgSpec { name, ty, number_attr: None }
}
const fn an(name: &'static str, ty: TypeRule, n: &'static str) -> ArgSpec {
    ArgSpec { name, ty, number_attr: Some(n) }
}
const fn tattr(name: &'static str, allowed: Option<&'static [DType]>) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Type, default: AttrDefault::Required, allowed }
}
const fn tdef(name: &'static str, d: DType, allowed: &'static [DType]) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Type, default: AttrDefault::Type(d), allowed: Some(allowed) }
}
const fn iattr(name: &'static str) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Int, default: AttrDefault::Required, allowed: None }
}
const fn idef(name: &'static str, d: i64) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Int, default: AttrDefault::Int(d), allowed: None }
}
const fn bdef(name: &'static str, d: bool) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Bool, default: AttrDefault::Bool(d), allowed: None }
}
const fn opt(name: &'static str, kind: AttrKind) -> AttrSpec {
    AttrSpec { name, kind, default: AttrDefault::Optional, allowed: None }
}
const fn req(name: &'static str, kind: AttrKind) -> AttrSpec {
    AttrSpec { name, kind, default: AttrDefault::Required, allowed: None }
}

const fn op(
    name: &'static str,
    family: OpFamily,
    inputs: &'static [ArgSpec],
    outputs: &'static [ArgSpec],
    attrs: &'static [AttrSpec],
    shape_fn: ShapeFn,
) -> OpSchema {
    OpSchema { name, family, inputs, outputs, attrs, is_stateful: false, shape_fn, value_fn: None }
}
/// `BatchMatMul` and `BatchMatMulV2`: one signature (V1 requires equal batch
/// dimensions, V2 broadcasts them; the shape function tells them apart).
const fn batch_matmul(name: &'static str) -> OpSchema {
    const INPUTS: &[ArgSpec] = &[a("x", T), a("y", T)];
    const OUTPUTS: &[ArgSpec] = &[a("output", T)];
    const ATTRS: &[AttrSpec] = &[tattr("T", Some(NUMBER)), bdef("adj_x", false), bdef("adj_y", false)];
    op(name, OpFamily::MatMul, INPUTS, OUTPUTS, ATTRS, s::batch_matmul)
}
const fn stateful(mut o: OpSchema) -> OpSchema {
    o.is_stateful = true;
    o
}
const fn valued(mut o: OpSchema, f: ValueFn) -> OpSchema {
    o.value_fn = Some(f);
    o
}

const T_ANY: &[AttrSpec] = &[tattr("T", None)];
const T_FLOATS: &[AttrSpec] = &[tattr("T", Some(FLOATS))];
const T_FLOAT_COMPLEX: &[AttrSpec] = &[tattr("T", Some(FLOAT_COMPLEX))];
const T_REAL: &[AttrSpec] = &[tattr("T", Some(REAL))];
const T_F32_F64: &[AttrSpec] = &[tattr("T", Some(&[Float32, Float64]))];
/// `ApproximateEqual`: any number type, `|x - y| < tolerance`.
const APPROX_ATTRS: &[AttrSpec] = &[
    tattr("T", Some(NUMBER)),
    AttrSpec { name: "tolerance", kind: AttrKind::Float, default: AttrDefault::Optional, allowed: None },
];
const T_NUMBER: &[AttrSpec] = &[tattr("T", Some(NUMBER))];

const X_T: &[ArgSpec] = &[a("x", T)];
const Y_T: &[ArgSpec] = &[a("y", T)];
const XY_T: &[ArgSpec] = &[a("x", T), a("y", T)];
const ABX_T: &[ArgSpec] = &[a("a", T), a("b", T), a("x", T)];
const Z_T: &[ArgSpec] = &[a("z", T)];
const Z_BOOL: &[ArgSpec] = &[a("z", BOOL)];
const XY_BOOL: &[ArgSpec] = &[a("x", BOOL), a("y", BOOL)];
const Y_DY_T: &[ArgSpec] = &[a("y", T), a("dy", T)];
const COMPARE_ATTRS: &[AttrSpec] = &[tattr("T", None), bdef("incompatible_shape_error", true)];
const REDUCE_IN: &[ArgSpec] = &[a("input", T), a("reduction_indices", ty("Tidx"))];
const OUTPUT_T: &[ArgSpec] = &[a("output", T)];
const INPUT_T: &[ArgSpec] = &[a("input", T)];
const REDUCE_ATTRS: &[AttrSpec] = &[tattr("T", Some(NUMBER)), tdef("Tidx", Int32, INDEX), bdef("keep_dims", false)];
const UPDATE_IN: &[ArgSpec] = &[a("resource", RES), a("value", ty("dtype"))];
const DTYPE_ATTRS: &[AttrSpec] = &[tattr("dtype", None), opt("validate_shape", AttrKind::Bool)];
const SCATTER_IN: &[ArgSpec] = &[a("resource", RES), a("indices", ty("Tindices")), a("updates", ty("dtype"))];
const SCATTER_ATTRS: &[AttrSpec] = &[tattr("dtype", None), tattr("Tindices", Some(INDEX))];

const SLICE_ASSIGN_ATTRS: &[AttrSpec] = &[
    tattr("T", None),
    tattr("Index", Some(INDEX)),
    idef("begin_mask", 0),
    idef("end_mask", 0),
    idef("ellipsis_mask", 0),
    idef("new_axis_mask", 0),
    idef("shrink_axis_mask", 0),
];

const fn unary(name: &'static str, attrs: &'static [AttrSpec]) -> OpSchema {
    op(name, OpFamily::Unary, X_T, Y_T, attrs, s::same_as_0)
}
const fn binary(name: &'static str, attrs: &'static [AttrSpec]) -> OpSchema {
    valued(op(name, OpFamily::Binary, XY_T, Z_T, attrs, s::broadcast_01), s::value_binary)
}
/// A special function of two float32/float64 arguments (`math_ops.cc`: `Igamma`, `Zeta`, …),
/// broadcasting like the binary ops.
const fn special2(name: &'static str) -> OpSchema {
    op(name, OpFamily::Binary, XY_T, Z_T, T_F32_F64, s::broadcast_01)
}
const fn compare(name: &'static str) -> OpSchema {
    op(name, OpFamily::Binary, XY_T, Z_BOOL, COMPARE_ATTRS, s::compare)
}
const fn logical2(name: &'static str) -> OpSchema {
    op(name, OpFamily::Binary, XY_BOOL, Z_BOOL, &[], s::broadcast_01)
}
const fn grad2(name: &'static str) -> OpSchema {
    op(name, OpFamily::NeuralNet, Y_DY_T, Z_T, T_FLOAT_COMPLEX, s::merge_01)
}
/// `(gradients, features|outputs) -> backprops` of an activation (`nn_ops.cc`).
const fn activation_grad(name: &'static str, second: &'static str) -> OpSchema {
    let inputs: &'static [ArgSpec] = if second.len() == 7 { ACT_GRAD_OUTPUTS } else { ACT_GRAD_FEATURES };
    op(name, OpFamily::NeuralNet, inputs, BACKPROPS, T_FLOATS, s::merge_01)
}
const BACKPROPS: &[ArgSpec] = &[a("backprops", T)];
const LEAKY_ATTRS: &[AttrSpec] = &[tattr("T", Some(FLOATS)), opt("alpha", AttrKind::Float)];
const ACT_GRAD_OUTPUTS: &[ArgSpec] = &[a("gradients", T), a("outputs", T)];
const ACT_GRAD_FEATURES: &[ArgSpec] = &[a("gradients", T), a("features", T)];
const fn reduction(name: &'static str) -> OpSchema {
    valued(op(name, OpFamily::Reduction, REDUCE_IN, OUTPUT_T, REDUCE_ATTRS, s::reduction), s::value_reduction)
}
const fn resource_update(name: &'static str) -> OpSchema {
    stateful(op(name, OpFamily::Resource, UPDATE_IN, &[], DTYPE_ATTRS, s::assign_variable))
}
const fn scatter(name: &'static str) -> OpSchema {
    stateful(op(name, OpFamily::Resource, SCATTER_IN, &[], SCATTER_ATTRS, s::none))
}
/// `TensorScatter{Add,Sub,Max,Min,Update}(tensor, indices, updates)`: a new tensor of
/// `tensor`'s shape (`array_ops.cc`).
const fn tensor_scatter(name: &'static str) -> OpSchema {
    const INPUTS: &[ArgSpec] = &[a("tensor", T), a("indices", ty("Tindices")), a("updates", T)];
    const OUTPUTS: &[ArgSpec] = &[a("output", T)];
    const ATTRS: &[AttrSpec] = &[tattr("T", None), tattr("Tindices", Some(INDEX))];
    op(name, OpFamily::Shape, INPUTS, OUTPUTS, ATTRS, s::same_as_0)
}
const RANDOM_ATTRS: &[AttrSpec] =
    &[tattr("dtype", Some(FLOATS)), tattr("T", Some(INDEX)), idef("seed", 0), idef("seed2", 0)];
const RANDOM_IN: &[ArgSpec] = &[a("shape", T)];
const RANDOM_OUT: &[ArgSpec] = &[a("output", ty("dtype"))];
/// A candidate sampler (`candidate_sampler_ops.cc`): `true_classes` `[batch, num_true]` in,
/// `num_sampled` candidates and the expected counts of the true and the sampled ones out.
const fn sampler(name: &'static str) -> OpSchema {
    stateful(op(name, OpFamily::Random, SAMPLER_IN, SAMPLER_OUT, SAMPLER_ATTRS, s::candidate_sampler))
}
const SAMPLER_IN: &[ArgSpec] = &[a("true_classes", TypeRule::Fixed(Int64))];
const SAMPLER_OUT: &[ArgSpec] = &[
    a("sampled_candidates", TypeRule::Fixed(Int64)),
    a("true_expected_count", TypeRule::Fixed(Float32)),
    a("sampled_expected_count", TypeRule::Fixed(Float32)),
];
const SAMPLER_ATTRS: &[AttrSpec] = &[
    iattr("num_true"),
    iattr("num_sampled"),
    req("unique", AttrKind::Bool),
    iattr("range_max"),
    idef("seed", 0),
    idef("seed2", 0),
];
/// The rate and output types of the Poisson samplers.
const POISSON_TYPES: &[DType] = &[Float16, Float32, Float64, Int32, Int64];
const fn random(name: &'static str) -> OpSchema {
    stateful(op(name, OpFamily::Random, RANDOM_IN, RANDOM_OUT, RANDOM_ATTRS, s::shape_from_value_0))
}
const STATELESS_V2_IN: &[ArgSpec] = &[
    a("shape", ty("Tshape")),
    a("key", TypeRule::Fixed(UInt64)),
    a("counter", TypeRule::Fixed(UInt64)),
    a("alg", TypeRule::Fixed(Int32)),
];
const STATELESS_V2_ATTRS: &[AttrSpec] = &[tdef("dtype", Float32, FLOATS), tdef("Tshape", Int32, INDEX)];
const STATELESS_V1_ATTRS: &[AttrSpec] =
    &[tdef("dtype", Float32, FLOATS), tattr("T", Some(INDEX)), tdef("Tseed", Int64, INDEX)];
const STATEFUL_FLOAT_ATTRS: &[AttrSpec] = &[tdef("dtype", Float32, REAL), tdef("shape_dtype", Int64, INDEX)];
const STATEFUL_DRAW_IN: &[ArgSpec] =
    &[a("resource", RES), a("algorithm", TypeRule::Fixed(Int64)), a("shape", ty("shape_dtype"))];
const fn stateful_draw(name: &'static str, attrs: &'static [AttrSpec]) -> OpSchema {
    stateful(op(name, OpFamily::Resource, STATEFUL_DRAW_IN, RANDOM_OUT, attrs, s::shape_from_value_2))
}
const fn stateless_v2(name: &'static str) -> OpSchema {
    op(name, OpFamily::Random, STATELESS_V2_IN, RANDOM_OUT, STATELESS_V2_ATTRS, s::shape_from_value_0)
}
const STATELESS_V1_IN: &[ArgSpec] = &[a("shape", T), a("seed", ty("Tseed"))];
const fn stateless_v1(name: &'static str) -> OpSchema {
    op(name, OpFamily::Random, STATELESS_V1_IN, RANDOM_OUT, STATELESS_V1_ATTRS, s::shape_from_value_0)
}
const fn identity(name: &'static str) -> OpSchema {
    valued(op(name, OpFamily::Control, INPUT_T, OUTPUT_T, T_ANY, s::same_as_0), s::value_identity)
}

const APPLY_ATTRS: &[AttrSpec] = &[tattr("T", Some(NUMBER)), bdef("use_locking", false), bdef("use_nesterov", false)];

/// Every supported op.
pub(super) static OPS: &[OpSchema] = &[
    // ---- Sources.
    valued(
        op(
            "Const",
            OpFamily::Source,
            &[],
            &[a("output", ty("dtype"))],
            &[req("value", AttrKind::Tensor), tattr("dtype", None)],
            s::constant,
        ),
        s::value_const,
    ),
    op(
        "Placeholder",
        OpFamily::Source,
        &[],
        &[a("output", ty("dtype"))],
        &[tattr("dtype", None), opt("shape", AttrKind::Shape)],
        s::placeholder,
    ),
    op(
        "PlaceholderWithDefault",
        OpFamily::Source,
        &[a("input", ty("dtype"))],
        &[a("output", ty("dtype"))],
        &[tattr("dtype", None), req("shape", AttrKind::Shape)],
        s::placeholder_with_default,
    ),
    // ---- Resource variables.
    stateful(op(
        "VarHandleOp",
        OpFamily::Resource,
        &[],
        &[a("resource", RES)],
        &[
            tattr("dtype", None),
            req("shape", AttrKind::Shape),
            opt("container", AttrKind::String),
            opt("shared_name", AttrKind::String),
        ],
        s::scalar,
    )),
    stateful(op(
        "ReadVariableOp",
        OpFamily::Resource,
        &[a("resource", RES)],
        &[a("value", ty("dtype"))],
        &[tattr("dtype", None)],
        s::read_variable,
    )),
    resource_update("AssignVariableOp"),
    resource_update("AssignAddVariableOp"),
    resource_update("AssignSubVariableOp"),
    stateful(op(
        "ResourceGather",
        OpFamily::Resource,
        &[a("resource", RES), a("indices", ty("Tindices"))],
        &[a("output", ty("dtype"))],
        &[tattr("dtype", None), tattr("Tindices", Some(INDEX)), idef("batch_dims", 0), bdef("validate_indices", true)],
        s::resource_gather,
    )),
    scatter("ResourceScatterAdd"),
    scatter("ResourceScatterSub"),
    scatter("ResourceScatterUpdate"),
    scatter("ResourceScatterMul"),
    scatter("ResourceScatterDiv"),
    scatter("ResourceScatterMax"),
    scatter("ResourceScatterMin"),
    stateful(op(
        "ResourceApplyGradientDescent",
        OpFamily::Resource,
        &[a("var", RES), a("alpha", T), a("delta", T)],
        &[],
        APPLY_ATTRS,
        s::apply_gradient_descent,
    )),
    stateful(op(
        "ResourceApplyMomentum",
        OpFamily::Resource,
        &[a("var", RES), a("accum", RES), a("lr", T), a("grad", T), a("momentum", T)],
        &[],
        APPLY_ATTRS,
        s::apply_momentum,
    )),
    stateful(op(
        "ResourceApplyAdam",
        OpFamily::Resource,
        &[
            a("var", RES),
            a("m", RES),
            a("v", RES),
            a("beta1_power", T),
            a("beta2_power", T),
            a("lr", T),
            a("beta1", T),
            a("beta2", T),
            a("epsilon", T),
            a("grad", T),
        ],
        &[],
        APPLY_ATTRS,
        s::apply_adam,
    )),
    // `tf.compat.v1.count_up_to` (the ref op `CountUpTo` becomes this when ref variables
    // are rewritten): the scalar before the increment, OutOfRange at `limit`.
    stateful(op(
        "ResourceCountUpTo",
        OpFamily::Resource,
        &[a("resource", RES)],
        &[a("output", T)],
        &[iattr("limit"), tattr("T", Some(INDEX))],
        s::scalar,
    )),
    stateful(op(
        "VarIsInitializedOp",
        OpFamily::Resource,
        &[a("resource", RES)],
        &[a("is_initialized", BOOL)],
        &[],
        s::scalar,
    )),
    valued(
        stateful(op(
            "VariableShape",
            OpFamily::Resource,
            &[a("input", RES)],
            &[a("output", ty("out_type"))],
            &[tdef("out_type", Int32, INDEX)],
            s::variable_shape,
        )),
        s::value_variable_shape,
    ),
    // ---- Elementwise, one input.
    unary("Neg", T_NUMBER),
    unary("Abs", T_REAL),
    unary("Sign", T_NUMBER),
    unary("Exp", T_FLOAT_COMPLEX),
    unary("Expm1", T_FLOAT_COMPLEX),
    unary("Log", T_FLOAT_COMPLEX),
    unary("Log1p", T_FLOAT_COMPLEX),
    unary("Sqrt", T_FLOAT_COMPLEX),
    unary("Rsqrt", T_FLOAT_COMPLEX),
    unary("Square", T_NUMBER),
    unary("Reciprocal", T_NUMBER),
    unary("Inv", T_NUMBER),
    unary("Tanh", T_FLOAT_COMPLEX),
    unary("Sigmoid", T_FLOAT_COMPLEX),
    unary("Floor", T_FLOATS),
    unary("Ceil", T_FLOATS),
    unary("Round", T_NUMBER),
    unary("Softplus", T_FLOATS),
    unary("Erf", T_FLOATS),
    unary("Erfc", T_FLOATS),
    unary("Sin", T_FLOAT_COMPLEX),
    unary("Cos", T_FLOAT_COMPLEX),
    unary("Tan", T_FLOAT_COMPLEX),
    unary("Asin", T_FLOAT_COMPLEX),
    unary("Acos", T_FLOAT_COMPLEX),
    unary("Atan", T_FLOAT_COMPLEX),
    unary("Sinh", T_FLOAT_COMPLEX),
    unary("Cosh", T_FLOAT_COMPLEX),
    unary("Asinh", T_FLOAT_COMPLEX),
    unary("Acosh", T_FLOAT_COMPLEX),
    unary("Atanh", T_FLOAT_COMPLEX),
    unary("Lgamma", T_FLOATS),
    unary("Digamma", T_FLOATS),
    unary("Erfinv", T_FLOATS),
    unary("Ndtri", T_FLOATS),
    unary("BesselI0e", T_FLOATS),
    unary("BesselI1e", T_FLOATS),
    unary("BesselI0", T_FLOATS),
    unary("BesselI1", T_FLOATS),
    unary("BesselJ0", T_FLOATS),
    unary("BesselJ1", T_FLOATS),
    unary("BesselY0", T_FLOATS),
    unary("BesselY1", T_FLOATS),
    unary("BesselK0", T_FLOATS),
    unary("BesselK1", T_FLOATS),
    unary("BesselK0e", T_FLOATS),
    unary("BesselK1e", T_FLOATS),
    unary("Dawsn", T_FLOATS),
    unary("Expint", T_FLOATS),
    unary("FresnelCos", T_FLOATS),
    unary("FresnelSin", T_FLOATS),
    unary("Spence", T_FLOATS),
    unary("Rint", T_FLOATS),
    unary("Softsign", T_FLOATS),
    // Stateful, as TensorFlow registers it: a check whose output only gates other nodes
    // through control edges (`tf.debugging.assert_all_finite`) must still run.
    stateful(op(
        "CheckNumerics",
        OpFamily::Unary,
        &[a("tensor", T)],
        &[a("output", T)],
        &[tattr("T", Some(FLOATS)), req("message", AttrKind::String)],
        s::same_as_0,
    )),
    // Stateful, as TensorFlow registers it: a check whose output only gates other nodes
    // through control edges (`tf.debugging.assert_all_finite`) must still run.
    stateful(op(
        "CheckNumericsV2",
        OpFamily::Unary,
        &[a("tensor", T)],
        &[a("output", T)],
        &[tattr("T", Some(FLOATS)), req("message", AttrKind::String)],
        s::same_as_0,
    )),
    op(
        "EnsureShape",
        OpFamily::Unary,
        &[a("input", T)],
        &[a("output", T)],
        &[tattr("T", None), req("shape", AttrKind::Shape)],
        s::ensure_shape,
    ),
    op("Selu", OpFamily::Unary, &[a("features", T)], &[a("activations", T)], &[tattr("T", Some(FLOATS))], s::same_as_0),
    op(
        "ClipByValue",
        OpFamily::Binary,
        &[a("t", T), a("clip_value_min", T), a("clip_value_max", T)],
        &[a("output", T)],
        &[tattr("T", Some(NUMBER))],
        s::same_as_0,
    ),
    op("Relu", OpFamily::Unary, &[a("features", T)], &[a("activations", T)], &[tattr("T", Some(REAL))], s::same_as_0),
    op("Relu6", OpFamily::Unary, &[a("features", T)], &[a("activations", T)], &[tattr("T", Some(REAL))], s::same_as_0),
    op("Elu", OpFamily::Unary, &[a("features", T)], &[a("activations", T)], &[tattr("T", Some(FLOATS))], s::same_as_0),
    op("LogicalNot", OpFamily::Unary, &[a("x", BOOL)], &[a("y", BOOL)], &[], s::same_as_0),
    op("IsNan", OpFamily::Unary, &[a("x", T)], &[a("y", BOOL)], &[tattr("T", Some(FLOATS))], s::same_as_0),
    op("IsInf", OpFamily::Unary, &[a("x", T)], &[a("y", BOOL)], &[tattr("T", Some(FLOATS))], s::same_as_0),
    op("IsFinite", OpFamily::Unary, &[a("x", T)], &[a("y", BOOL)], &[tattr("T", Some(FLOATS))], s::same_as_0),
    valued(
        op(
            "Cast",
            OpFamily::Unary,
            &[a("x", ty("SrcT"))],
            &[a("y", ty("DstT"))],
            &[tattr("SrcT", None), tattr("DstT", None), bdef("Truncate", false)],
            s::same_as_0,
        ),
        s::value_cast,
    ),
    op("ZerosLike", OpFamily::Unary, &[a("x", T)], &[a("y", T)], &[tattr("T", None)], s::same_as_0),
    op("OnesLike", OpFamily::Unary, &[a("x", T)], &[a("y", T)], &[tattr("T", None)], s::same_as_0),
    // ---- Elementwise, broadcasting.
    binary("Add", T_ANY),
    binary("AddV2", T_NUMBER),
    binary("Sub", T_NUMBER),
    binary("Mul", T_NUMBER),
    binary("Div", T_NUMBER),
    binary("RealDiv", T_NUMBER),
    binary("DivNoNan", T_FLOAT_COMPLEX),
    binary("FloorDiv", T_NUMBER),
    binary("FloorMod", T_REAL),
    binary("Mod", T_REAL),
    binary("TruncateDiv", T_NUMBER),
    binary("TruncateMod", T_REAL),
    binary("MulNoNan", T_FLOAT_COMPLEX),
    binary("Maximum", T_REAL),
    binary("Minimum", T_REAL),
    binary("Pow", T_NUMBER),
    binary("Atan2", T_FLOATS),
    binary("Xlogy", T_FLOATS),
    binary("Xdivy", T_FLOATS),
    binary("Xlog1py", T_FLOATS),
    special2("Igamma"),
    special2("Igammac"),
    special2("IgammaGradA"),
    special2("Zeta"),
    special2("Polygamma"),
    special2("NextAfter"),
    op("ApproximateEqual", OpFamily::Binary, XY_T, Z_BOOL, APPROX_ATTRS, s::same_as_0),
    // a, b, x of one shape, any of them a scalar (`math_ops.cc`), broadcast here.
    op("Betainc", OpFamily::Binary, ABX_T, Z_T, T_F32_F64, s::broadcast_all),
    op(
        "Bucketize",
        OpFamily::Unary,
        &[a("input", T)],
        &[a("output", TypeRule::Fixed(Int32))],
        &[tattr("T", Some(&[Int32, Int64, Float32, Float64])), req("boundaries", AttrKind::ListFloat)],
        s::same_as_0,
    ),
    op(
        "MatrixBandPart",
        OpFamily::Unary,
        &[a("input", T), a("num_lower", ty("Tindex")), a("num_upper", ty("Tindex"))],
        &[a("band", T)],
        &[tattr("T", None), tdef("Tindex", Int64, INDEX)],
        s::same_as_0,
    ),
    binary("SquaredDifference", T_NUMBER),
    compare("Equal"),
    compare("NotEqual"),
    compare("Less"),
    compare("LessEqual"),
    compare("Greater"),
    compare("GreaterEqual"),
    logical2("LogicalAnd"),
    logical2("LogicalOr"),
    op(
        "Select",
        OpFamily::Binary,
        &[a("condition", BOOL), a("t", T), a("e", T)],
        &[a("output", T)],
        &[tattr("T", None)],
        s::select,
    ),
    op(
        "SelectV2",
        OpFamily::Binary,
        &[a("condition", BOOL), a("t", T), a("e", T)],
        &[a("output", T)],
        &[tattr("T", None)],
        s::select_v2,
    ),
    op(
        "AddN",
        OpFamily::Binary,
        &[an("inputs", T, "N")],
        &[a("sum", T)],
        &[iattr("N"), tattr("T", None)],
        s::merge_all,
    ),
    // `tf.math.accumulate_n`'s op (TF1 gradients with `EXPERIMENTAL_ACCUMULATE_N`): AddN with
    // a declared `shape`.
    op(
        "AccumulateNV2",
        OpFamily::Binary,
        &[an("inputs", T, "N")],
        &[a("sum", T)],
        &[iattr("N"), tattr("T", None), req("shape", AttrKind::Shape)],
        s::merge_all,
    ),
    // ---- Linear algebra and NN.
    op(
        "MatMul",
        OpFamily::MatMul,
        &[a("a", T), a("b", T)],
        &[a("product", T)],
        &[tattr("T", Some(NUMBER)), bdef("transpose_a", false), bdef("transpose_b", false)],
        s::matmul,
    ),
    batch_matmul("BatchMatMulV2"),
    batch_matmul("BatchMatMul"),
    op(
        "BatchMatMulV3",
        OpFamily::MatMul,
        &[a("x", ty("Ta")), a("y", ty("Tb"))],
        &[a("output", ty("Tout"))],
        &[tattr("Ta", None), tattr("Tb", None), tattr("Tout", None), bdef("adj_x", false), bdef("adj_y", false)],
        s::batch_matmul,
    ),
    op(
        "BiasAddV1",
        OpFamily::NeuralNet,
        &[a("value", T), a("bias", T)],
        &[a("output", T)],
        &[tattr("T", Some(NUMBER))],
        s::bias_add,
    ),
    op(
        "Cumsum",
        OpFamily::Shape,
        &[a("x", T), a("axis", ty("Tidx"))],
        &[a("out", T)],
        &[tattr("T", Some(NUMBER)), tdef("Tidx", Int32, INDEX), bdef("exclusive", false), bdef("reverse", false)],
        s::same_as_0,
    ),
    op(
        "CumulativeLogsumexp",
        OpFamily::Shape,
        &[a("x", T), a("axis", ty("Tidx"))],
        &[a("out", T)],
        &[tattr("T", Some(FLOATS)), tdef("Tidx", Int32, INDEX), bdef("exclusive", false), bdef("reverse", false)],
        s::same_as_0,
    ),
    op(
        "LinSpace",
        OpFamily::Shape,
        &[a("start", T), a("stop", T), a("num", ty("Tidx"))],
        &[a("output", T)],
        &[tattr("T", Some(FLOATS)), tdef("Tidx", Int32, INDEX)],
        s::lin_space,
    ),
    op(
        "Cumprod",
        OpFamily::Shape,
        &[a("x", T), a("axis", ty("Tidx"))],
        &[a("out", T)],
        &[tattr("T", Some(NUMBER)), tdef("Tidx", Int32, INDEX), bdef("exclusive", false), bdef("reverse", false)],
        s::same_as_0,
    ),
    tensor_scatter("TensorScatterAdd"),
    tensor_scatter("TensorScatterSub"),
    tensor_scatter("TensorScatterMax"),
    tensor_scatter("TensorScatterMin"),
    tensor_scatter("TensorScatterUpdate"),
    op(
        "Concat",
        OpFamily::Shape,
        &[a("concat_dim", INT32), an("values", T, "N")],
        &[a("output", T)],
        &[iattr("N"), tattr("T", None)],
        s::concat_v1,
    ),
    op(
        "Gather",
        OpFamily::Shape,
        &[a("params", ty("Tparams")), a("indices", ty("Tindices"))],
        &[a("output", ty("Tparams"))],
        &[tattr("Tparams", None), tattr("Tindices", Some(INDEX)), bdef("validate_indices", true)],
        s::gather_v1,
    ),
    op(
        "ParallelDynamicStitch",
        OpFamily::Shape,
        &[an("indices", TypeRule::Fixed(Int32), "N"), an("data", T, "N")],
        &[a("merged", T)],
        &[iattr("N"), tattr("T", None)],
        s::dynamic_stitch,
    ),
    op("ControlTrigger", OpFamily::Control, &[], &[], &[], s::none),
    op(
        "BiasAdd",
        OpFamily::NeuralNet,
        &[a("value", T), a("bias", T)],
        &[a("output", T)],
        &[tattr("T", Some(NUMBER)), opt("data_format", AttrKind::String)],
        s::bias_add,
    ),
    op(
        "BiasAddGrad",
        OpFamily::NeuralNet,
        &[a("out_backprop", T)],
        &[a("output", T)],
        &[tattr("T", Some(NUMBER)), opt("data_format", AttrKind::String)],
        s::bias_add_grad,
    ),
    op(
        "Softmax",
        OpFamily::NeuralNet,
        &[a("logits", T)],
        &[a("softmax", T)],
        &[tattr("T", Some(FLOATS))],
        s::rank_at_least_1,
    ),
    op(
        "LogSoftmax",
        OpFamily::NeuralNet,
        &[a("logits", T)],
        &[a("logsoftmax", T)],
        &[tattr("T", Some(FLOATS))],
        s::rank_at_least_1,
    ),
    op(
        "SoftmaxCrossEntropyWithLogits",
        OpFamily::NeuralNet,
        &[a("features", T), a("labels", T)],
        &[a("loss", T), a("backprop", T)],
        &[tattr("T", Some(FLOATS))],
        s::softmax_xent,
    ),
    op(
        "SparseSoftmaxCrossEntropyWithLogits",
        OpFamily::NeuralNet,
        &[a("features", T), a("labels", ty("Tlabels"))],
        &[a("loss", T), a("backprop", T)],
        &[tattr("T", Some(FLOATS)), tdef("Tlabels", Int64, INDEX)],
        s::sparse_softmax_xent,
    ),
    op(
        "ReluGrad",
        OpFamily::NeuralNet,
        &[a("gradients", T), a("features", T)],
        &[a("backprops", T)],
        &[tattr("T", Some(REAL))],
        s::merge_01,
    ),
    op(
        "Relu6Grad",
        OpFamily::NeuralNet,
        &[a("gradients", T), a("features", T)],
        &[a("backprops", T)],
        &[tattr("T", Some(REAL))],
        s::merge_01,
    ),
    activation_grad("EluGrad", "outputs"),
    activation_grad("SeluGrad", "outputs"),
    activation_grad("SoftplusGrad", "features"),
    activation_grad("SoftsignGrad", "features"),
    op(
        "LeakyReluGrad",
        OpFamily::NeuralNet,
        &[a("gradients", T), a("features", T)],
        &[a("backprops", T)],
        LEAKY_ATTRS,
        s::merge_01,
    ),
    op("LeakyRelu", OpFamily::Unary, &[a("features", T)], &[a("activations", T)], LEAKY_ATTRS, s::same_as_0),
    grad2("TanhGrad"),
    grad2("SigmoidGrad"),
    grad2("SqrtGrad"),
    grad2("RsqrtGrad"),
    grad2("ReciprocalGrad"),
    grad2("InvGrad"),
    op("L2Loss", OpFamily::NeuralNet, &[a("t", T)], &[a("output", T)], &[tattr("T", Some(FLOATS))], s::scalar),
    valued(
        op(
            "BroadcastGradientArgs",
            OpFamily::Shape,
            &[a("s0", T), a("s1", T)],
            &[a("r0", T), a("r1", T)],
            &[tdef("T", Int32, INDEX)],
            s::broadcast_gradient_args,
        ),
        s::value_broadcast_gradient_args,
    ),
    // ---- Reductions.
    reduction("Sum"),
    reduction("EuclideanNorm"),
    reduction("Mean"),
    reduction("Max"),
    reduction("Min"),
    reduction("Prod"),
    op(
        "All",
        OpFamily::Reduction,
        &[a("input", BOOL), a("reduction_indices", ty("Tidx"))],
        &[a("output", BOOL)],
        &[tdef("Tidx", Int32, INDEX), bdef("keep_dims", false)],
        s::reduction,
    ),
    op(
        "Any",
        OpFamily::Reduction,
        &[a("input", BOOL), a("reduction_indices", ty("Tidx"))],
        &[a("output", BOOL)],
        &[tdef("Tidx", Int32, INDEX), bdef("keep_dims", false)],
        s::reduction,
    ),
    op(
        "ArgMax",
        OpFamily::Reduction,
        &[a("input", T), a("dimension", ty("Tidx"))],
        &[a("output", ty("output_type"))],
        &[tattr("T", Some(NUMBER)), tdef("Tidx", Int32, INDEX), tdef("output_type", Int64, INDEX)],
        s::arg_reduce,
    ),
    op(
        "ArgMin",
        OpFamily::Reduction,
        &[a("input", T), a("dimension", ty("Tidx"))],
        &[a("output", ty("output_type"))],
        &[tattr("T", Some(NUMBER)), tdef("Tidx", Int32, INDEX), tdef("output_type", Int64, INDEX)],
        s::arg_reduce,
    ),
    // ---- Shapes.
    valued(
        op(
            "Reshape",
            OpFamily::Shape,
            &[a("tensor", T), a("shape", ty("Tshape"))],
            &[a("output", T)],
            &[tattr("T", None), tdef("Tshape", Int32, INDEX)],
            s::reshape,
        ),
        s::value_identity,
    ),
    valued(
        op(
            "Shape",
            OpFamily::Shape,
            &[a("input", T)],
            &[a("output", ty("out_type"))],
            &[tattr("T", None), tdef("out_type", Int32, INDEX)],
            s::shape_of,
        ),
        s::value_shape_of,
    ),
    // The offsets of each input in a concatenation (ConcatV2's gradient when shapes are
    // only known at run time, e.g. in Bidirectional RNNs).
    op(
        "ConcatOffset",
        OpFamily::Shape,
        &[a("concat_dim", TypeRule::Fixed(Int32)), an("shape", ty("shape_type"), "N")],
        &[an("offset", ty("shape_type"), "N")],
        &[iattr("N"), tdef("shape_type", Int32, INDEX)],
        s::concat_offset,
    ),
    valued(
        op(
            "ShapeN",
            OpFamily::Shape,
            &[an("input", T, "N")],
            &[an("output", ty("out_type"), "N")],
            &[iattr("N"), tattr("T", None), tdef("out_type", Int32, INDEX)],
            s::shape_n,
        ),
        s::value_shape_n,
    ),
    valued(
        op(
            "Size",
            OpFamily::Shape,
            &[a("input", T)],
            &[a("output", ty("out_type"))],
            &[tattr("T", None), tdef("out_type", Int32, INDEX)],
            s::scalar,
        ),
        s::value_size,
    ),
    valued(
        op(
            "Rank",
            OpFamily::Shape,
            &[a("input", T)],
            &[a("output", TypeRule::Fixed(Int32))],
            &[tattr("T", None)],
            s::scalar,
        ),
        s::value_rank,
    ),
    valued(
        op(
            "ExpandDims",
            OpFamily::Shape,
            &[a("input", T), a("dim", ty("Tdim"))],
            &[a("output", T)],
            &[tattr("T", None), tdef("Tdim", Int32, INDEX)],
            s::expand_dims,
        ),
        s::value_identity,
    ),
    valued(
        op(
            "Squeeze",
            OpFamily::Shape,
            &[a("input", T)],
            &[a("output", T)],
            &[tattr("T", None), opt("squeeze_dims", AttrKind::ListInt)],
            s::squeeze,
        ),
        s::value_identity,
    ),
    op(
        "Transpose",
        OpFamily::Shape,
        &[a("x", T), a("perm", ty("Tperm"))],
        &[a("y", T)],
        &[tattr("T", None), tdef("Tperm", Int32, INDEX)],
        s::transpose,
    ),
    // `tf.linalg.adjoint` / `transpose(conjugate=True)`: a Transpose whose complex
    // elements are conjugated (a plain Transpose for real ones).
    op(
        "ConjugateTranspose",
        OpFamily::Shape,
        &[a("x", T), a("perm", ty("Tperm"))],
        &[a("y", T)],
        &[tattr("T", None), tdef("Tperm", Int32, INDEX)],
        s::transpose,
    ),
    valued(
        op(
            "ConcatV2",
            OpFamily::Shape,
            &[an("values", T, "N"), a("axis", ty("Tidx"))],
            &[a("output", T)],
            &[iattr("N"), tattr("T", None), tdef("Tidx", Int32, INDEX)],
            s::concat_v2,
        ),
        s::value_concat_v2,
    ),
    valued(
        op(
            "Pack",
            OpFamily::Shape,
            &[an("values", T, "N")],
            &[a("output", T)],
            &[iattr("N"), tattr("T", None), idef("axis", 0)],
            s::pack,
        ),
        s::value_pack,
    ),
    op(
        "Split",
        OpFamily::Shape,
        &[a("split_dim", INT32), a("value", T)],
        &[an("output", T, "num_split")],
        &[iattr("num_split"), tattr("T", None)],
        s::split,
    ),
    op(
        "SplitV",
        OpFamily::Shape,
        &[a("value", T), a("size_splits", ty("Tlen")), a("split_dim", INT32)],
        &[an("output", T, "num_split")],
        &[iattr("num_split"), tattr("T", None), tdef("Tlen", Int64, INDEX)],
        s::split_v,
    ),
    op(
        "Unpack",
        OpFamily::Shape,
        &[a("value", T)],
        &[an("output", T, "num")],
        &[iattr("num"), tattr("T", None), idef("axis", 0)],
        s::unpack,
    ),
    valued(
        op(
            "Slice",
            OpFamily::Shape,
            &[a("input", T), a("begin", ty("Index")), a("size", ty("Index"))],
            &[a("output", T)],
            &[tattr("T", None), tattr("Index", Some(INDEX))],
            s::slice,
        ),
        s::value_slice,
    ),
    // TensorFlow's tf2xla ops (`tf.compiler.tf2xla.python.xla`), which its CPU session also
    // runs: start indices clamped so the slice lies inside the operand, as XLA's.
    op(
        "XlaDynamicSlice",
        OpFamily::Shape,
        &[a("input", T), a("start_indices", ty("Tindices")), a("size_indices", ty("Tindices"))],
        &[a("output", T)],
        &[tattr("T", None), tattr("Tindices", Some(INDEX))],
        s::xla_dynamic_slice,
    ),
    op(
        "XlaDynamicUpdateSlice",
        OpFamily::Shape,
        &[a("input", T), a("update", T), a("indices", ty("Tindices"))],
        &[a("output", T)],
        &[tattr("T", None), tattr("Tindices", Some(INDEX))],
        s::same_as_0,
    ),
    valued(
        op(
            "StridedSlice",
            OpFamily::Shape,
            &[a("input", T), a("begin", ty("Index")), a("end", ty("Index")), a("strides", ty("Index"))],
            &[a("output", T)],
            &[
                tattr("T", None),
                tattr("Index", Some(INDEX)),
                idef("begin_mask", 0),
                idef("end_mask", 0),
                idef("ellipsis_mask", 0),
                idef("new_axis_mask", 0),
                idef("shrink_axis_mask", 0),
            ],
            s::strided_slice,
        ),
        s::value_strided_slice,
    ),
    op(
        "StridedSliceGrad",
        OpFamily::Shape,
        &[
            a("shape", ty("Index")),
            a("begin", ty("Index")),
            a("end", ty("Index")),
            a("strides", ty("Index")),
            a("dy", T),
        ],
        &[a("output", T)],
        &[
            tattr("T", None),
            tattr("Index", Some(INDEX)),
            idef("begin_mask", 0),
            idef("end_mask", 0),
            idef("ellipsis_mask", 0),
            idef("new_axis_mask", 0),
            idef("shrink_axis_mask", 0),
        ],
        s::shape_from_value_0,
    ),
    op(
        "TensorStridedSliceUpdate",
        OpFamily::Shape,
        &[a("input", T), a("begin", ty("Index")), a("end", ty("Index")), a("strides", ty("Index")), a("value", T)],
        &[a("output", T)],
        SLICE_ASSIGN_ATTRS,
        s::same_as_0,
    ),
    // `tf.random.Generator`'s draw: the Philox state `[counter_lo, counter_hi, key]` before
    // the counter advances by 256·delta (Keras 2's random preprocessing layers use it).
    stateful(op(
        "RngReadAndSkip",
        OpFamily::Resource,
        &[a("resource", RES), a("alg", TypeRule::Fixed(Int32)), a("delta", TypeRule::Fixed(UInt64))],
        &[a("value", TypeRule::Fixed(Int64))],
        &[],
        |_| Ok(vec![crate::Shape::with_dims(vec![Some(3)])]),
    )),
    // `RngSkip`: advances the generator's counter by 256·delta, reading nothing out.
    stateful(op(
        "RngSkip",
        OpFamily::Resource,
        &[a("resource", RES), a("algorithm", TypeRule::Fixed(Int64)), a("delta", TypeRule::Fixed(Int64))],
        &[],
        &[],
        s::none,
    )),
    // The stateful generators of `tf.random.Generator` before `RngReadAndSkip`: each draws
    // what the stateless V2 op draws from the state's key and counter, then advances the
    // counter by 256 per output element.
    stateful_draw("StatefulUniform", STATEFUL_FLOAT_ATTRS),
    stateful_draw("StatefulStandardNormalV2", STATEFUL_FLOAT_ATTRS),
    stateful_draw("StatefulTruncatedNormal", STATEFUL_FLOAT_ATTRS),
    stateful_draw("StatefulUniformFullInt", &[tdef("dtype", UInt64, FULL_INT), tdef("shape_dtype", Int64, INDEX)]),
    stateful(op(
        "StatefulUniformInt",
        OpFamily::Resource,
        &[
            a("resource", RES),
            a("algorithm", TypeRule::Fixed(Int64)),
            a("shape", ty("shape_dtype")),
            a("minval", ty("dtype")),
            a("maxval", ty("dtype")),
        ],
        &[a("output", ty("dtype"))],
        &[tdef("dtype", Int64, REAL), tdef("shape_dtype", Int64, INDEX)],
        s::shape_from_value_2,
    )),
    // `tf.random.Generator.binomial`: the stateless binomial's draw from the state's key and
    // counter, then the counter moved on.
    stateful(op(
        "StatefulRandomBinomial",
        OpFamily::Resource,
        &[
            a("resource", RES),
            a("algorithm", TypeRule::Fixed(Int64)),
            a("shape", ty("S")),
            a("counts", T),
            a("probs", T),
        ],
        &[a("output", ty("dtype"))],
        &[tattr("S", Some(INDEX)), tdef("T", Float64, POISSON_TYPES), tdef("dtype", Int64, POISSON_TYPES)],
        s::shape_from_value_2,
    )),
    stateful(op(
        "ResourceStridedSliceAssign",
        OpFamily::Resource,
        &[a("ref", RES), a("begin", ty("Index")), a("end", ty("Index")), a("strides", ty("Index")), a("value", T)],
        &[],
        SLICE_ASSIGN_ATTRS,
        s::none,
    )),
    valued(
        op(
            "Fill",
            OpFamily::Shape,
            &[a("dims", ty("index_type")), a("value", T)],
            &[a("output", T)],
            &[tattr("T", None), tdef("index_type", Int32, INDEX)],
            s::fill,
        ),
        s::value_fill,
    ),
    op(
        "Pad",
        OpFamily::Shape,
        &[a("input", T), a("paddings", ty("Tpaddings"))],
        &[a("output", T)],
        &[tattr("T", None), tdef("Tpaddings", Int32, INDEX)],
        s::pad,
    ),
    op(
        "PadV2",
        OpFamily::Shape,
        &[a("input", T), a("paddings", ty("Tpaddings")), a("constant_values", T)],
        &[a("output", T)],
        &[tattr("T", None), tdef("Tpaddings", Int32, INDEX)],
        s::pad,
    ),
    op(
        "MirrorPad",
        OpFamily::Shape,
        &[a("input", T), a("paddings", ty("Tpaddings"))],
        &[a("output", T)],
        &[tattr("T", None), tdef("Tpaddings", Int32, INDEX), opt("mode", AttrKind::String)],
        s::pad,
    ),
    op(
        "MirrorPadGrad",
        OpFamily::Shape,
        &[a("input", T), a("paddings", ty("Tpaddings"))],
        &[a("output", T)],
        &[tattr("T", None), tdef("Tpaddings", Int32, INDEX), opt("mode", AttrKind::String)],
        s::mirror_pad_grad,
    ),
    op(
        "Tile",
        OpFamily::Shape,
        &[a("input", T), a("multiples", ty("Tmultiples"))],
        &[a("output", T)],
        &[tattr("T", None), tdef("Tmultiples", Int32, INDEX)],
        s::tile,
    ),
    op(
        "BroadcastTo",
        OpFamily::Shape,
        &[a("input", T), a("shape", ty("Tidx"))],
        &[a("output", T)],
        &[tattr("T", None), tdef("Tidx", Int32, INDEX)],
        s::broadcast_to,
    ),
    valued(
        op(
            "GatherV2",
            OpFamily::Shape,
            &[a("params", ty("Tparams")), a("indices", ty("Tindices")), a("axis", ty("Taxis"))],
            &[a("output", ty("Tparams"))],
            &[
                tattr("Tparams", None),
                tattr("Tindices", Some(INDEX)),
                tattr("Taxis", Some(INDEX)),
                idef("batch_dims", 0),
            ],
            s::gather_v2,
        ),
        s::value_gather_v2,
    ),
    valued(
        op(
            "Range",
            OpFamily::Shape,
            &[a("start", ty("Tidx")), a("limit", ty("Tidx")), a("delta", ty("Tidx"))],
            &[a("output", ty("Tidx"))],
            &[tdef("Tidx", Int32, REAL)],
            s::range,
        ),
        s::value_range,
    ),
    valued(
        op(
            "DynamicStitch",
            OpFamily::Shape,
            &[an("indices", TypeRule::Fixed(Int32), "N"), an("data", T, "N")],
            &[a("merged", T)],
            &[iattr("N"), tattr("T", None)],
            s::dynamic_stitch,
        ),
        s::value_dynamic_stitch,
    ),
    // ---- Random numbers (stateful: each run draws anew).
    random("RandomUniform"),
    random("RandomStandardNormal"),
    random("TruncatedNormal"),
    stateful(op(
        "RandomUniformInt",
        OpFamily::Random,
        &[a("shape", T), a("minval", ty("Tout")), a("maxval", ty("Tout"))],
        &[a("output", ty("Tout"))],
        &[tattr("Tout", Some(INDEX)), tattr("T", Some(INDEX)), idef("seed", 0), idef("seed2", 0)],
        s::shape_from_value_0,
    )),
    stateful(op(
        "RandomGamma",
        OpFamily::Random,
        &[a("shape", ty("S")), a("alpha", T)],
        &[a("output", T)],
        &[tattr("S", Some(INDEX)), tattr("T", Some(FLOATS)), idef("seed", 0), idef("seed2", 0)],
        s::random_gamma,
    )),
    stateful(op(
        "RandomPoissonV2",
        OpFamily::Random,
        &[a("shape", ty("S")), a("rate", ty("R"))],
        &[a("output", ty("dtype"))],
        &[
            tattr("S", Some(INDEX)),
            tdef("R", Float64, POISSON_TYPES),
            tdef("dtype", Int64, POISSON_TYPES),
            idef("seed", 0),
            idef("seed2", 0),
        ],
        s::random_gamma,
    )),
    op(
        "StatelessRandomGammaV2",
        OpFamily::Random,
        &[a("shape", T), a("seed", ty("Tseed")), a("alpha", ty("dtype"))],
        &[a("output", ty("dtype"))],
        &[tattr("dtype", Some(FLOATS)), tattr("T", Some(INDEX)), tdef("Tseed", Int64, INDEX)],
        s::shape_from_value_0,
    ),
    op(
        "StatelessRandomGammaV3",
        OpFamily::Random,
        &[
            a("shape", ty("shape_dtype")),
            a("key", TypeRule::Fixed(UInt64)),
            a("counter", TypeRule::Fixed(UInt64)),
            a("alg", TypeRule::Fixed(Int32)),
            a("alpha", ty("dtype")),
        ],
        &[a("output", ty("dtype"))],
        &[tattr("dtype", Some(FLOATS)), tdef("shape_dtype", Int32, INDEX)],
        s::shape_from_value_0,
    ),
    op(
        "StatelessRandomPoisson",
        OpFamily::Random,
        &[a("shape", T), a("seed", ty("Tseed")), a("lam", ty("Rtype"))],
        &[a("output", ty("dtype"))],
        &[
            tattr("Rtype", Some(POISSON_TYPES)),
            tattr("dtype", Some(POISSON_TYPES)),
            tattr("T", Some(INDEX)),
            tdef("Tseed", Int64, INDEX),
        ],
        s::shape_from_value_0,
    ),
    // `tf.random.stateless_binomial`: counts and probs (of one float type `T`) broadcast
    // against each other, the output of `dtype` (the binomial's types are the Poisson's).
    op(
        "StatelessRandomBinomial",
        OpFamily::Random,
        &[a("shape", ty("S")), a("seed", ty("Tseed")), a("counts", T), a("probs", T)],
        &[a("output", ty("dtype"))],
        &[
            tattr("S", Some(INDEX)),
            tdef("Tseed", Int64, INDEX),
            tdef("T", Float64, POISSON_TYPES),
            tdef("dtype", Int64, POISSON_TYPES),
        ],
        s::shape_from_value_0,
    ),
    // `tf.random.stateless_parameterized_truncated_normal`: the four parameters broadcast
    // together to the trailing dimensions of `shape`.
    op(
        "StatelessParameterizedTruncatedNormal",
        OpFamily::Random,
        &[
            a("shape", ty("S")),
            a("seed", ty("Tseed")),
            a("means", ty("dtype")),
            a("stddevs", ty("dtype")),
            a("minvals", ty("dtype")),
            a("maxvals", ty("dtype")),
        ],
        &[a("output", ty("dtype"))],
        &[tattr("S", Some(INDEX)), tdef("Tseed", Int64, INDEX), tattr("dtype", Some(&[Float16, Float32, Float64]))],
        s::shape_from_value_0,
    ),
    // TF1's `parameterized_truncated_normal`: per-batch (first dimension) parameters.
    stateful(op(
        "ParameterizedTruncatedNormal",
        OpFamily::Random,
        &[
            a("shape", T),
            a("means", ty("dtype")),
            a("stdevs", ty("dtype")),
            a("minvals", ty("dtype")),
            a("maxvals", ty("dtype")),
        ],
        &[a("output", ty("dtype"))],
        &[tattr("dtype", Some(FLOATS)), tattr("T", Some(INDEX)), idef("seed", 0), idef("seed2", 0)],
        s::shape_from_value_0,
    )),
    // `tf.random.experimental.index_shuffle`: a scalar or one index per output (the seed
    // `[3]` or `[n, 3]`); pure and deterministic.
    op(
        "RandomIndexShuffle",
        OpFamily::Random,
        &[a("index", ty("dtype")), a("seed", ty("Tseed")), a("max_index", ty("dtype"))],
        &[a("output", ty("dtype"))],
        &[idef("rounds", 4), tattr("dtype", Some(FULL_INT)), tattr("Tseed", Some(FULL_INT))],
        s::index_shuffle,
    ),
    sampler("LogUniformCandidateSampler"),
    sampler("UniformCandidateSampler"),
    op(
        "ComputeAccidentalHits",
        OpFamily::Random,
        &[a("true_classes", TypeRule::Fixed(Int64)), a("sampled_candidates", TypeRule::Fixed(Int64))],
        &[
            a("indices", TypeRule::Fixed(Int32)),
            a("ids", TypeRule::Fixed(Int64)),
            a("weights", TypeRule::Fixed(Float32)),
        ],
        &[iattr("num_true"), idef("seed", 0), idef("seed2", 0)],
        s::accidental_hits,
    ),
    stateful(op(
        "RandomShuffle",
        OpFamily::Random,
        &[a("value", T)],
        &[a("output", T)],
        &[tattr("T", None), idef("seed", 0), idef("seed2", 0)],
        s::same_as_0,
    )),
    stateful(op(
        "Multinomial",
        OpFamily::Random,
        &[a("logits", T), a("num_samples", TypeRule::Fixed(Int32))],
        &[a("output", ty("output_dtype"))],
        &[tattr("T", Some(FLOATS)), tdef("output_dtype", Int64, INDEX), idef("seed", 0), idef("seed2", 0)],
        s::multinomial,
    )),
    // ---- Stateless random numbers (pure: the same key, counter or seed, the same numbers).
    op(
        "StatelessMultinomial",
        OpFamily::Random,
        &[a("logits", T), a("num_samples", TypeRule::Fixed(Int32)), a("seed", ty("Tseed"))],
        &[a("output", ty("output_dtype"))],
        &[tattr("T", Some(FLOATS)), tdef("Tseed", Int64, INDEX), tdef("output_dtype", Int64, INDEX)],
        s::multinomial,
    ),
    op(
        "StatelessRandomGetKeyCounter",
        OpFamily::Random,
        &[a("seed", ty("Tseed"))],
        &[a("key", TypeRule::Fixed(UInt64)), a("counter", TypeRule::Fixed(UInt64))],
        &[tdef("Tseed", Int64, INDEX)],
        s::key_counter,
    ),
    op("StatelessRandomGetAlg", OpFamily::Random, &[], &[a("alg", TypeRule::Fixed(Int32))], &[], s::scalar),
    op(
        "StatelessShuffle",
        OpFamily::Random,
        &[
            a("value", T),
            a("key", TypeRule::Fixed(UInt64)),
            a("counter", TypeRule::Fixed(UInt64)),
            a("alg", TypeRule::Fixed(Int32)),
        ],
        &[a("output", T)],
        &[tattr("T", None)],
        s::same_as_0,
    ),
    stateless_v2("StatelessRandomUniformV2"),
    stateless_v2("StatelessRandomNormalV2"),
    stateless_v2("StatelessTruncatedNormalV2"),
    op(
        "StatelessRandomUniformIntV2",
        OpFamily::Random,
        &[
            a("shape", ty("Tshape")),
            a("key", TypeRule::Fixed(UInt64)),
            a("counter", TypeRule::Fixed(UInt64)),
            a("alg", TypeRule::Fixed(Int32)),
            a("minval", ty("dtype")),
            a("maxval", ty("dtype")),
        ],
        &[a("output", ty("dtype"))],
        &[tattr("dtype", Some(INDEX)), tdef("Tshape", Int32, INDEX)],
        s::shape_from_value_0,
    ),
    // `tf.random.Generator.uniform_full_int` / `stateless_random_uniform_full_int`: every bit
    // pattern of the integer type equally likely.
    op(
        "StatelessRandomUniformFullIntV2",
        OpFamily::Random,
        &[
            a("shape", ty("Tshape")),
            a("key", TypeRule::Fixed(UInt64)),
            a("counter", TypeRule::Fixed(UInt64)),
            a("alg", TypeRule::Fixed(Int32)),
        ],
        &[a("output", ty("dtype"))],
        &[tdef("dtype", UInt64, FULL_INT), tdef("Tshape", Int32, INDEX)],
        s::shape_from_value_0,
    ),
    op(
        "StatelessRandomUniformFullInt",
        OpFamily::Random,
        &[a("shape", T), a("seed", ty("Tseed"))],
        &[a("output", ty("dtype"))],
        &[tdef("dtype", UInt64, FULL_INT), tattr("T", Some(INDEX)), tdef("Tseed", Int64, INDEX)],
        s::shape_from_value_0,
    ),
    stateless_v1("StatelessRandomUniform"),
    stateless_v1("StatelessRandomNormal"),
    stateless_v1("StatelessTruncatedNormal"),
    op(
        "StatelessRandomUniformInt",
        OpFamily::Random,
        &[a("shape", T), a("seed", ty("Tseed")), a("minval", ty("dtype")), a("maxval", ty("dtype"))],
        &[a("output", ty("dtype"))],
        &[tattr("dtype", Some(INDEX)), tattr("T", Some(INDEX)), tdef("Tseed", Int64, INDEX)],
        s::shape_from_value_0,
    ),
    // ---- Identities and control.
    identity("Identity"),
    // Internal, written by encapsulation into cluster bodies: `value`, or a failure unless
    // `value` and `current` have equal shapes (the check a variable write makes; the message
    // names the attribute `variable`).
    op(
        crate::protocol::SAME_SHAPE_OP,
        OpFamily::Control,
        &[a("value", T), a("current", T)],
        OUTPUT_T,
        &[tattr("T", None), opt("variable", AttrKind::String)],
        s::same_as_0,
    ),
    identity("StopGradient"),
    identity("Snapshot"),
    // `tf.guarantee_const`: an identity TensorFlow declares stateful (so nothing folds or
    // merges it away before a compiler that trusts the guarantee sees it).
    OpSchema { is_stateful: true, value_fn: None, ..identity("GuaranteeConst") },
    valued(
        op(
            "PreventGradient",
            OpFamily::Control,
            &[a("input", T)],
            &[a("output", T)],
            &[tattr("T", None), opt("message", AttrKind::String)],
            s::same_as_0,
        ),
        s::value_identity,
    ),
    op(
        "IdentityN",
        OpFamily::Control,
        &[a("input", TypeRule::ListAttr("T"))],
        &[a("output", TypeRule::ListAttr("T"))],
        &[req("T", AttrKind::ListType)],
        s::identity_n,
    ),
    op("NoOp", OpFamily::Control, &[], &[], &[], s::none),
];
