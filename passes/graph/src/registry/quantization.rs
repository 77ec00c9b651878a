//! Schemas of the fake-quantisation ops of quantisation-aware training (`array_ops.cc`):
//! `FakeQuantWithMinMaxArgs` (range in attributes), `FakeQuantWithMinMaxVars` (a scalar range,
//! usually two variables), `FakeQuantWithMinMaxVarsPerChannel` (a range per last-dimension
//! channel) and their gradients, what `tfmot.quantization.keras.quantize_model` and
//! `tf.quantization.fake_quant_with_min_max_*` put in a training step (float32 only); and
//! `QuantizeAndDequantizeV2`/`V3`/`V4` with `QuantizeAndDequantizeV4Grad`
//! (`tf.quantization.quantize_and_dequantize_v2`, float32 and float64).

use super::build::{arg, bool_attr_or, int_attr_or, pure_op, type_attr_or};
use super::shapes::same_as_0;
use super::{ArgSpec, AttrDefault, AttrKind, AttrSpec, InferCtx, OpFamily, OpSchema, TypeRule};
use crate::DType::{BFloat16, Float16, Float32, Float64, Int32};
use crate::Shape;

const F: TypeRule = TypeRule::Fixed(Float32);

const fn float_attr(name: &'static str) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Float, default: AttrDefault::Optional, allowed: None }
}

const ARGS_ATTRS: &[AttrSpec] =
    &[float_attr("min"), float_attr("max"), int_attr_or("num_bits", 8), bool_attr_or("narrow_range", false)];
const VARS_ATTRS: &[AttrSpec] = &[int_attr_or("num_bits", 8), bool_attr_or("narrow_range", false)];

/// The input's shape, the range's (a scalar, or `[d]` per channel) for the range gradients.
fn vars_gradient(c: &InferCtx<'_>) -> Result<Vec<Shape>, String> {
    Ok(vec![c.shape(1).clone(), c.shape(2).clone(), c.shape(3).clone()])
}

const X: &[ArgSpec] = &[arg("inputs", F)];
const OUT: &[ArgSpec] = &[arg("outputs", F)];
const X_RANGE: &[ArgSpec] = &[arg("inputs", F), arg("min", F), arg("max", F)];
const GRAD_ARGS: &[ArgSpec] = &[arg("gradients", F), arg("inputs", F)];
const GRAD_VARS: &[ArgSpec] = &[arg("gradients", F), arg("inputs", F), arg("min", F), arg("max", F)];
const BACKPROPS: &[ArgSpec] = &[arg("backprops", F)];
const BACKPROPS3: &[ArgSpec] = &[arg("backprops_wrt_input", F), arg("backprop_wrt_min", F), arg("backprop_wrt_max", F)];

fn second_input(c: &InferCtx<'_>) -> Result<Vec<Shape>, String> {
    Ok(vec![c.shape(1).clone()])
}

const T: TypeRule = TypeRule::Attr("T");
const QDQ_TYPES: &[crate::DType] = &[BFloat16, Float16, Float32, Float64];
const QDQ_IN: &[ArgSpec] = &[arg("input", T), arg("input_min", T), arg("input_max", T)];
const QDQ_V3_IN: &[ArgSpec] =
    &[arg("input", T), arg("input_min", T), arg("input_max", T), arg("num_bits", TypeRule::Fixed(Int32))];
const QDQ_OUT: &[ArgSpec] = &[arg("output", T)];
const QDQ_ATTRS: &[AttrSpec] = &[
    bool_attr_or("signed_input", true),
    int_attr_or("num_bits", 8),
    bool_attr_or("range_given", false),
    type_attr_or("T", Float32, QDQ_TYPES),
    str_attr("round_mode"),
    bool_attr_or("narrow_range", false),
    int_attr_or("axis", -1),
];
const QDQ_V3_ATTRS: &[AttrSpec] = &[
    bool_attr_or("signed_input", true),
    bool_attr_or("range_given", true),
    type_attr_or("T", Float32, QDQ_TYPES),
    bool_attr_or("narrow_range", false),
    int_attr_or("axis", -1),
];
const QDQ_GRAD_IN: &[ArgSpec] = &[arg("gradients", T), arg("input", T), arg("input_min", T), arg("input_max", T)];
const QDQ_GRAD_OUT: &[ArgSpec] =
    &[arg("input_backprop", T), arg("input_min_backprop", T), arg("input_max_backprop", T)];
const QDQ_GRAD_ATTRS: &[AttrSpec] = &[type_attr_or("T", Float32, QDQ_TYPES), int_attr_or("axis", -1)];

const fn str_attr(name: &'static str) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::String, default: AttrDefault::Optional, allowed: None }
}

pub(super) static OPS: &[OpSchema] = &[
    pure_op("QuantizeAndDequantizeV2", OpFamily::NeuralNet, QDQ_IN, QDQ_OUT, QDQ_ATTRS, same_as_0),
    pure_op("QuantizeAndDequantizeV3", OpFamily::NeuralNet, QDQ_V3_IN, QDQ_OUT, QDQ_V3_ATTRS, same_as_0),
    pure_op("QuantizeAndDequantizeV4", OpFamily::NeuralNet, QDQ_IN, QDQ_OUT, QDQ_ATTRS, same_as_0),
    pure_op(
        "QuantizeAndDequantizeV4Grad",
        OpFamily::NeuralNet,
        QDQ_GRAD_IN,
        QDQ_GRAD_OUT,
        QDQ_GRAD_ATTRS,
        vars_gradient,
    ),
    pure_op("FakeQuantWithMinMaxArgs", OpFamily::NeuralNet, X, OUT, ARGS_ATTRS, same_as_0),
    pure_op("FakeQuantWithMinMaxVars", OpFamily::NeuralNet, X_RANGE, OUT, VARS_ATTRS, same_as_0),
    pure_op("FakeQuantWithMinMaxVarsPerChannel", OpFamily::NeuralNet, X_RANGE, OUT, VARS_ATTRS, same_as_0),
    pure_op("FakeQuantWithMinMaxArgsGradient", OpFamily::NeuralNet, GRAD_ARGS, BACKPROPS, ARGS_ATTRS, second_input),
    pure_op("FakeQuantWithMinMaxVarsGradient", OpFamily::NeuralNet, GRAD_VARS, BACKPROPS3, VARS_ATTRS, vars_gradient),
    pure_op(
        "FakeQuantWithMinMaxVarsPerChannelGradient",
        OpFamily::NeuralNet,
        GRAD_VARS,
        BACKPROPS3,
        VARS_ATTRS,
        vars_gradient,
    ),
];
