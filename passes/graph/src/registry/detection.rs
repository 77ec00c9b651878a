//! Schemas of the object-detection ops of TensorFlow's inference graphs (`image_ops.cc`):
//! `CombinedNonMaxSuppression` (batched, per class), `NonMaxSuppressionWithOverlaps`, TF1's
//! `NonMaxSuppression` and `V2`, `NonMaxSuppressionV3`, `V4` (padded output) and `V5` (soft-NMS with scores), the ops
//! `tf.image.non_max_suppression*` emit in SSD / Faster R-CNN / Keras-CV post-processing.

use super::build::{arg, bool_attr_or, pure_op, type_attr_or};
use super::{ArgSpec, AttrDefault, AttrKind, AttrSpec, InferCtx, OpFamily, OpSchema, TypeRule};
use crate::DType::{BFloat16, Float16, Float32, Int32};
use crate::Shape;

type Shapes = Result<Vec<Shape>, String>;

const T: TypeRule = TypeRule::Attr("T");
const T_THR: TypeRule = TypeRule::Attr("T_threshold");
const I32: TypeRule = TypeRule::Fixed(Int32);

/// Boxes `[N, 4]`, scores `[N]`, the other operands scalars.
fn check(c: &InferCtx<'_>) -> Result<(), String> {
    let boxes = c.shape(0);
    if boxes.rank().is_some_and(|r| r != 2) {
        return Err(format!("boxes must be 2-D, but has shape {boxes}"));
    }
    if let Some(Some(k)) = boxes.dims.as_ref().map(|d| d[1]) {
        if k != 4 {
            return Err(format!("boxes must have 4 columns, but has shape {boxes}"));
        }
    }
    if c.shape(1).rank().is_some_and(|r| r != 1) {
        return Err(format!("scores must be 1-D, but has shape {}", c.shape(1)));
    }
    for i in 2..c.inputs.len() {
        if c.shape(i).rank().is_some_and(|r| r != 0) {
            return Err(format!("input {i} must be a scalar, but has shape {}", c.shape(i)));
        }
    }
    Ok(())
}

/// The selected indices: `[max_output_size]` when padded, else `[?]`.
fn selected(c: &InferCtx<'_>, padded: bool) -> Shape {
    Shape::with_dims(vec![if padded { c.scalar_value(2) } else { None }])
}

/// `NonMaxSuppressionWithOverlaps`: a square `overlaps`, scores `[N]`, scalars.
fn with_overlaps(c: &InferCtx<'_>) -> Shapes {
    let o = c.shape(0);
    if let Some(r) = o.rank().filter(|&r| r != 2) {
        return Err(format!("Shape must be rank 2 but is rank {r}"));
    }
    if let Some([Some(a), Some(b)]) = o.dims.as_deref() {
        if a != b {
            return Err(format!("Dimensions must be equal, but are {a} and {b}"));
        }
    }
    if let Some(r) = c.shape(1).rank().filter(|&r| r != 1) {
        return Err(format!("Shape must be rank 1 but is rank {r}"));
    }
    for i in 2..c.inputs.len() {
        if let Some(r) = c.shape(i).rank().filter(|&r| r != 0) {
            return Err(format!("Shape must be rank 0 but is rank {r}"));
        }
    }
    Ok(vec![Shape::with_dims(vec![None])])
}

fn nms_v3(c: &InferCtx<'_>) -> Shapes {
    check(c)?;
    Ok(vec![selected(c, false)])
}

fn nms_v4(c: &InferCtx<'_>) -> Shapes {
    check(c)?;
    Ok(vec![selected(c, c.attr_bool("pad_to_max_output_size", false)), Shape::scalar()])
}

fn nms_v5(c: &InferCtx<'_>) -> Shapes {
    check(c)?;
    let s = selected(c, c.attr_bool("pad_to_max_output_size", false));
    Ok(vec![s.clone(), s, Shape::scalar()])
}

/// `CombinedNonMaxSuppression`: boxes `[B, N, q, 4]`, scores `[B, N, C]` (their batch and box
/// dimensions merged), the rest scalars; outputs `[B, P, 4]`, `[B, P]`, `[B, P]`, `[B]` with
/// `P = max_total_size`, or `min(max_total_size, max_output_size_per_class · C)` under
/// `pad_per_class` (unknown unless the values it needs are).
fn combined_nms(c: &InferCtx<'_>) -> Shapes {
    let (boxes, scores) = (c.shape(0), c.shape(1));
    for (s, rank) in [(boxes, 4), (scores, 3)] {
        if let Some(r) = s.rank().filter(|&r| r != rank) {
            return Err(format!("Shape must be rank {rank} but is rank {r}"));
        }
    }
    for i in 2..6 {
        if let Some(r) = c.shape(i).rank().filter(|&r| r != 0) {
            return Err(format!("Shape must be rank 0 but is rank {r}"));
        }
    }
    let dim = |s: &Shape, i: usize| s.dims.as_ref().and_then(|d| d[i]);
    let merged = |i: usize| match (dim(boxes, i), dim(scores, i)) {
        (Some(x), Some(y)) if x != y => Err(format!("Dimensions must be equal, but are {x} and {y}")),
        (x, y) => Ok(x.or(y)),
    };
    let batch = merged(0)?;
    merged(1)?;
    if let Some(d) = dim(boxes, 3).filter(|&d| d != 4) {
        return Err(format!("Dimension must be 4 but is {d}"));
    }
    let classes = dim(scores, 2);
    if let (Some(q), Some(k)) = (dim(boxes, 2), classes) {
        if q != 1 && q != k {
            return Err("third dimension of boxes must be either 1 or equal to the third dimension of scores".into());
        }
    }
    let total = c.scalar_value(3);
    if total.is_some_and(|t| t <= 0) {
        return Err("max_total_size should be > 0 ".into());
    }
    let rows = if c.attr_bool("pad_per_class", false) {
        let per_class = c.scalar_value(2);
        if per_class.is_some_and(|p| p <= 0) {
            return Err("max_output_size_per_class must be > 0 if pad_per_class is set to true ".into());
        }
        match (total, per_class, classes) {
            (Some(t), Some(p), Some(k)) => Some(t.min(p.saturating_mul(k))),
            _ => None,
        }
    } else {
        total
    };
    Ok(vec![
        Shape::with_dims(vec![batch, rows, Some(4)]),
        Shape::with_dims(vec![batch, rows]),
        Shape::with_dims(vec![batch, rows]),
        Shape::with_dims(vec![batch]),
    ])
}

const FLOATS: &[crate::DType] = &[Float16, BFloat16, Float32];
const V3_IN: &[ArgSpec] = &[
    arg("boxes", T),
    arg("scores", T),
    arg("max_output_size", I32),
    arg("iou_threshold", T_THR),
    arg("score_threshold", T_THR),
];
const V5_IN: &[ArgSpec] = &[
    arg("boxes", T),
    arg("scores", T),
    arg("max_output_size", I32),
    arg("iou_threshold", T),
    arg("score_threshold", T),
    arg("soft_nms_sigma", T),
];
const V3_ATTRS: &[AttrSpec] = &[type_attr_or("T", Float32, FLOATS), type_attr_or("T_threshold", Float32, FLOATS)];
const V4_ATTRS: &[AttrSpec] = &[
    type_attr_or("T", Float32, FLOATS),
    type_attr_or("T_threshold", Float32, FLOATS),
    bool_attr_or("pad_to_max_output_size", false),
];
const V5_ATTRS: &[AttrSpec] = &[type_attr_or("T", Float32, FLOATS), bool_attr_or("pad_to_max_output_size", false)];

const V2_IN: &[ArgSpec] =
    &[arg("boxes", T), arg("scores", T), arg("max_output_size", I32), arg("iou_threshold", T_THR)];
const F32: TypeRule = TypeRule::Fixed(Float32);
const V2_ATTRS: &[AttrSpec] =
    &[type_attr_or("T", Float32, &[Float16, Float32]), type_attr_or("T_threshold", Float32, &[Float16, Float32])];

pub(super) static OPS: &[OpSchema] = &[
    pure_op(
        "CombinedNonMaxSuppression",
        OpFamily::NeuralNet,
        &[
            arg("boxes", F32),
            arg("scores", F32),
            arg("max_output_size_per_class", I32),
            arg("max_total_size", I32),
            arg("iou_threshold", F32),
            arg("score_threshold", F32),
        ],
        &[arg("nmsed_boxes", F32), arg("nmsed_scores", F32), arg("nmsed_classes", F32), arg("valid_detections", I32)],
        &[bool_attr_or("pad_per_class", false), bool_attr_or("clip_boxes", true)],
        combined_nms,
    ),
    pure_op(
        "NonMaxSuppression",
        OpFamily::NeuralNet,
        &[arg("boxes", F32), arg("scores", F32), arg("max_output_size", I32)],
        &[arg("selected_indices", I32)],
        &[AttrSpec { name: "iou_threshold", kind: AttrKind::Float, default: AttrDefault::Optional, allowed: None }],
        nms_v3,
    ),
    pure_op("NonMaxSuppressionV2", OpFamily::NeuralNet, V2_IN, &[arg("selected_indices", I32)], V2_ATTRS, nms_v3),
    pure_op(
        "NonMaxSuppressionWithOverlaps",
        OpFamily::NeuralNet,
        &[
            arg("overlaps", F32),
            arg("scores", F32),
            arg("max_output_size", I32),
            arg("overlap_threshold", F32),
            arg("score_threshold", F32),
        ],
        &[arg("selected_indices", I32)],
        &[],
        with_overlaps,
    ),
    pure_op("NonMaxSuppressionV3", OpFamily::NeuralNet, V3_IN, &[arg("selected_indices", I32)], V3_ATTRS, nms_v3),
    pure_op(
        "NonMaxSuppressionV4",
        OpFamily::NeuralNet,
        V3_IN,
        &[arg("selected_indices", I32), arg("valid_outputs", I32)],
        V4_ATTRS,
        nms_v4,
    ),
    pure_op(
        "NonMaxSuppressionV5",
        OpFamily::NeuralNet,
        V5_IN,
        &[arg("selected_indices", I32), arg("selected_scores", T), arg("valid_outputs", I32)],
        V5_ATTRS,
        nms_v5,
    ),
];
