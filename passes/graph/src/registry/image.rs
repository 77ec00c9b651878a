//! Schemas of the image ops (`image_ops.cc`): resizing (`ResizeBilinear`, `ResizeBicubic`,
//! `ResizeArea`, `ResizeNearestNeighbor` and the gradients of the bilinear, bicubic and
//! nearest ones), `CropAndResize` and its two gradients, `ExtractImagePatches`, and the colour
//! adjustments (`AdjustHue`, `AdjustSaturation`, `AdjustContrastv2`, `RGBToHSV`, `HSVToRGB`),
//! and kernel resampling (`ScaleAndTranslate` and its gradient: antialiased `tf.image.resize`). NHWC images; shape
//! functions follow TensorFlow's: the spatial size from the `size` operand when it is known.

use super::build::{arg as a, bool_attr_or as bdef, pure_op as op, type_attr as tattr};
use super::shapes::{dims_of, one, same_as_0 as same_as_input, same_as_1};
use super::{AttrDefault, AttrKind, AttrSpec, InferCtx, OpFamily, OpSchema, TypeRule};
use crate::DType::{
    self, BFloat16, Float16, Float32, Float64, Int16, Int32, Int64, Int8, UInt16, UInt32, UInt64, UInt8,
};
use crate::Shape;

type Shapes = Result<Vec<Shape>, String>;

const REAL: &[DType] = &[Float16, BFloat16, Float32, Float64, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64];
const T: TypeRule = TypeRule::Attr("T");

const RESIZE_ATTRS: &[AttrSpec] =
    &[tattr("T", Some(REAL)), bdef("align_corners", false), bdef("half_pixel_centers", false)];
/// The colour ops' images: float32 (and the half types through it).
const DRAW_ATTRS: &[AttrSpec] = &[tattr("T", Some(&[Float16, Float32]))];
const COLOR_ATTRS: &[AttrSpec] = &[tattr("T", Some(&[Float16, BFloat16, Float32]))];

/// `ResizeBilinear`, `ResizeNearestNeighbor` and its gradient: `[batch, size[0], size[1], channels]`.
fn resize_bilinear(c: &InferCtx<'_>) -> Shapes {
    let d = dims_of(c.shape(0));
    let at = |i: usize| d.and_then(|d| d.get(i).copied().flatten());
    let size = c.known_value(1);
    let hw = |i: usize| size.as_ref().and_then(|s| s.get(i).copied());
    one(Shape::with_dims(vec![at(0), hw(0), hw(1), at(3)]))
}

/// `CropAndResizeGradBoxes`: `[num_boxes, 4]`.
fn crop_grad_boxes(c: &InferCtx<'_>) -> Shapes {
    one(Shape::with_dims(vec![dims_of(c.shape(2)).and_then(|d| d.first().copied().flatten()), Some(4)]))
}

/// `CropAndResizeGradImage`: the value of `image_size`.
fn crop_grad_image(c: &InferCtx<'_>) -> Shapes {
    one(Shape::with_dims(match c.value(3) {
        Some(v) if v.len() == 4 => v.to_vec(),
        _ => vec![None; 4],
    }))
}

/// `CropAndResize`: `[num_boxes, crop_height, crop_width, depth]`.
fn crop_and_resize(c: &InferCtx<'_>) -> Shapes {
    let boxes = dims_of(c.shape(1)).and_then(|d| d.first().copied().flatten());
    let depth = dims_of(c.shape(0)).and_then(|d| d.get(3).copied().flatten());
    let size = c.known_value(3);
    let hw = |i: usize| size.as_ref().and_then(|s| s.get(i).copied());
    one(Shape::with_dims(vec![boxes, hw(0), hw(1), depth]))
}

/// `ExtractImagePatches`: the windowed output size of the effective (dilated) window per
/// spatial dimension, `ksize_rows · ksize_cols · depth` channels.
fn extract_image_patches(c: &InferCtx<'_>) -> Shapes {
    let (k, s, r) = (c.attr_ints("ksizes"), c.attr_ints("strides"), c.attr_ints("rates"));
    if k.len() != 4 || s.len() != 4 || r.len() != 4 {
        return Err("ksizes, strides and rates must have 4 elements".into());
    }
    let same = matches!(c.node.attr("padding").and_then(crate::AttrValue::as_str), Some("SAME"));
    let d = dims_of(c.shape(0));
    let at = |i: usize| d.and_then(|d| d.get(i).copied().flatten());
    let out = |i: usize| {
        let eff = (k[i] - 1) * r[i] + 1;
        // VALID: no patch when the window is wider than the input (integer division truncates
        // toward zero, so `(n - eff) / s + 1` alone would give 1 for n = 3, eff = 4, s = 2).
        at(i).map(|n| {
            if same {
                (n + s[i] - 1) / s[i]
            } else if n < eff {
                0
            } else {
                (n - eff) / s[i] + 1
            }
        })
    };
    one(Shape::with_dims(vec![at(0), out(1), out(2), at(3).map(|d| d * k[1] * k[2])]))
}

/// `ScaleAndTranslate`: `[batch, size[0], size[1], channels]`, float32.
fn scale_and_translate(c: &InferCtx<'_>) -> Shapes {
    if c.shape(0).rank().is_some_and(|r| r != 4) {
        return Err(format!("images must be 4-dimensional, but has shape {}", c.shape(0)));
    }
    resize_bilinear(c)
}

/// `ScaleAndTranslateGrad`: the original image's shape.
fn scale_and_translate_grad(c: &InferCtx<'_>) -> Shapes {
    one(c.shape(1).clone())
}

const KERNEL_TYPE: AttrSpec =
    AttrSpec { name: "kernel_type", kind: AttrKind::String, default: AttrDefault::Optional, allowed: None };
const GRAD_ATTRS: &[AttrSpec] = &[tattr("T", Some(&[Float32])), KERNEL_TYPE, bdef("antialias", true)];

pub(super) static OPS: &[OpSchema] = &[
    op(
        "ScaleAndTranslate",
        OpFamily::Shape,
        &[
            a("images", T),
            a("size", TypeRule::Fixed(Int32)),
            a("scale", TypeRule::Fixed(Float32)),
            a("translation", TypeRule::Fixed(Float32)),
        ],
        &[a("resized_images", TypeRule::Fixed(Float32))],
        &[tattr("T", Some(REAL)), KERNEL_TYPE, bdef("antialias", true)],
        scale_and_translate,
    ),
    op(
        "ScaleAndTranslateGrad",
        OpFamily::Shape,
        &[
            a("grads", T),
            a("original_image", T),
            a("scale", TypeRule::Fixed(Float32)),
            a("translation", TypeRule::Fixed(Float32)),
        ],
        &[a("output", T)],
        GRAD_ATTRS,
        scale_and_translate_grad,
    ),
    op(
        "DrawBoundingBoxes",
        OpFamily::Shape,
        &[a("images", T), a("boxes", TypeRule::Fixed(Float32))],
        &[a("output", T)],
        DRAW_ATTRS,
        same_as_input,
    ),
    op(
        "DrawBoundingBoxesV2",
        OpFamily::Shape,
        &[a("images", T), a("boxes", TypeRule::Fixed(Float32)), a("colors", TypeRule::Fixed(Float32))],
        &[a("output", T)],
        DRAW_ATTRS,
        same_as_input,
    ),
    op("RGBToHSV", OpFamily::Shape, &[a("images", T)], &[a("output", T)], COLOR_ATTRS, same_as_input),
    op("HSVToRGB", OpFamily::Shape, &[a("images", T)], &[a("output", T)], COLOR_ATTRS, same_as_input),
    op(
        "ResizeBilinear",
        OpFamily::Shape,
        &[a("images", T), a("size", TypeRule::Fixed(Int32))],
        &[a("resized_images", TypeRule::Fixed(Float32))],
        RESIZE_ATTRS,
        resize_bilinear,
    ),
    op(
        "AdjustHue",
        OpFamily::Shape,
        &[a("images", T), a("delta", TypeRule::Fixed(Float32))],
        &[a("output", T)],
        COLOR_ATTRS,
        same_as_input,
    ),
    op(
        "AdjustSaturation",
        OpFamily::Shape,
        &[a("images", T), a("scale", TypeRule::Fixed(Float32))],
        &[a("output", T)],
        COLOR_ATTRS,
        same_as_input,
    ),
    op(
        "AdjustContrastv2",
        OpFamily::Shape,
        &[a("images", T), a("contrast_factor", TypeRule::Fixed(Float32))],
        &[a("output", T)],
        COLOR_ATTRS,
        same_as_input,
    ),
    op(
        "ResizeBicubic",
        OpFamily::Shape,
        &[a("images", T), a("size", TypeRule::Fixed(Int32))],
        &[a("resized_images", TypeRule::Fixed(Float32))],
        RESIZE_ATTRS,
        resize_bilinear,
    ),
    op(
        "ResizeArea",
        OpFamily::Shape,
        &[a("images", T), a("size", TypeRule::Fixed(Int32))],
        &[a("resized_images", TypeRule::Fixed(Float32))],
        &[tattr("T", Some(REAL)), bdef("align_corners", false)],
        resize_bilinear,
    ),
    op(
        "CropAndResize",
        OpFamily::Shape,
        &[
            a("image", T),
            a("boxes", TypeRule::Fixed(Float32)),
            a("box_ind", TypeRule::Fixed(Int32)),
            a("crop_size", TypeRule::Fixed(Int32)),
        ],
        &[a("crops", TypeRule::Fixed(Float32))],
        &[
            tattr("T", Some(REAL)),
            AttrSpec { name: "method", kind: AttrKind::String, default: AttrDefault::Optional, allowed: None },
            AttrSpec {
                name: "extrapolation_value",
                kind: AttrKind::Float,
                default: AttrDefault::Optional,
                allowed: None,
            },
        ],
        crop_and_resize,
    ),
    op(
        "ExtractImagePatches",
        OpFamily::Shape,
        &[a("images", T)],
        &[a("patches", T)],
        &[
            AttrSpec { name: "ksizes", kind: AttrKind::ListInt, default: AttrDefault::Required, allowed: None },
            AttrSpec { name: "strides", kind: AttrKind::ListInt, default: AttrDefault::Required, allowed: None },
            AttrSpec { name: "rates", kind: AttrKind::ListInt, default: AttrDefault::Required, allowed: None },
            tattr("T", None),
            AttrSpec { name: "padding", kind: AttrKind::String, default: AttrDefault::Required, allowed: None },
        ],
        extract_image_patches,
    ),
    op(
        "ResizeBicubicGrad",
        OpFamily::Shape,
        &[a("grads", TypeRule::Fixed(Float32)), a("original_image", T)],
        &[a("output", T)],
        &[tattr("T", Some(&[Float32, Float64])), bdef("align_corners", false), bdef("half_pixel_centers", false)],
        same_as_1,
    ),
    op(
        "CropAndResizeGradBoxes",
        OpFamily::Shape,
        &[
            a("grads", TypeRule::Fixed(Float32)),
            a("image", T),
            a("boxes", TypeRule::Fixed(Float32)),
            a("box_ind", TypeRule::Fixed(Int32)),
        ],
        &[a("output", TypeRule::Fixed(Float32))],
        &[
            tattr("T", Some(REAL)),
            AttrSpec { name: "method", kind: AttrKind::String, default: AttrDefault::Optional, allowed: None },
        ],
        crop_grad_boxes,
    ),
    op(
        "CropAndResizeGradImage",
        OpFamily::Shape,
        &[
            a("grads", TypeRule::Fixed(Float32)),
            a("boxes", TypeRule::Fixed(Float32)),
            a("box_ind", TypeRule::Fixed(Int32)),
            a("image_size", TypeRule::Fixed(Int32)),
        ],
        &[a("output", T)],
        &[
            tattr("T", Some(&[Float16, Float32, Float64])),
            AttrSpec { name: "method", kind: AttrKind::String, default: AttrDefault::Optional, allowed: None },
        ],
        crop_grad_image,
    ),
    op(
        "ResizeBilinearGrad",
        OpFamily::Shape,
        &[a("grads", TypeRule::Fixed(Float32)), a("original_image", T)],
        &[a("output", T)],
        RESIZE_ATTRS,
        same_as_1,
    ),
    op(
        "ResizeNearestNeighbor",
        OpFamily::Shape,
        &[a("images", T), a("size", TypeRule::Fixed(Int32))],
        &[a("resized_images", T)],
        RESIZE_ATTRS,
        resize_bilinear,
    ),
    op(
        "ResizeNearestNeighborGrad",
        OpFamily::Shape,
        &[a("grads", T), a("size", TypeRule::Fixed(Int32))],
        &[a("output", T)],
        RESIZE_ATTRS,
        resize_bilinear,
    ),
];
