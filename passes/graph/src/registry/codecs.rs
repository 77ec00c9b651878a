//! Schemas of the image and text codecs serving signatures put in front of a model
//! (`image_ops.cc`, `string_ops.cc`): `DecodePng`, `DecodeJpeg`, `DecodeAndCropJpeg`, `DecodeImage`, `DecodeBmp`,
//! `DecodeGif` (each decodes PNG, JPEG, GIF or BMP, as the data's first bytes say),
//! `DecodeBase64` and
//! `EncodeBase64` (web-safe alphabet). Decoded images are `[height, width, channels]`, the
//! height and width known only from the data; strings never enter clusters.

use super::build::{arg, bool_attr_or, int_attr_or, pure_op, type_attr_or};
use super::shapes::same_as_0;
use super::{ArgSpec, AttrDefault, AttrKind, AttrSpec, InferCtx, OpFamily, OpSchema, TypeRule};
use crate::DType::{Float32, Int32, String as Str, UInt16, UInt8};
use crate::Shape;

/// `[?, ?, channels]` (`channels` 0: unknown); `DecodeImage` expanding animations: unknown
/// rank (a GIF gives `[frames, h, w, c]`); `DecodeGif`: `[frames, h, w, 3]`.
fn image(c: &InferCtx<'_>) -> Result<Vec<Shape>, String> {
    if c.shape(0).rank().is_some_and(|r| r != 0) {
        return Err(format!("contents must be a scalar, but has shape {}", c.shape(0)));
    }
    if c.node.op == "DecodeImage" && c.attr_bool("expand_animations", true) {
        return Ok(vec![Shape::unknown()]);
    }
    if c.node.op == "DecodeGif" {
        return Ok(vec![Shape::with_dims(vec![None, None, None, Some(3)])]);
    }
    let channels = c.attr_int("channels", 0);
    Ok(vec![Shape::with_dims(vec![None, None, (channels > 0).then_some(channels)])])
}

/// `[crop height, crop width, channels]`, the window's size when its value is known.
fn crop(c: &InferCtx<'_>) -> Result<Vec<Shape>, String> {
    let mut out = image(c)?;
    if let Some([_, _, h, w]) = c.known_value(1).as_deref() {
        let channels = c.attr_int("channels", 0);
        out = vec![Shape::with_dims(vec![Some(*h), Some(*w), (channels > 0).then_some(channels)])];
    }
    Ok(out)
}

const CONTENTS: &[ArgSpec] = &[arg("contents", TypeRule::Fixed(Str))];
const CROP_IN: &[ArgSpec] = &[arg("contents", TypeRule::Fixed(Str)), arg("crop_window", TypeRule::Fixed(Int32))];
const IMAGE: &[ArgSpec] = &[arg("image", TypeRule::Attr("dtype"))];
const TEXT_IN: &[ArgSpec] = &[arg("input", TypeRule::Fixed(Str))];
const TEXT_OUT: &[ArgSpec] = &[arg("output", TypeRule::Fixed(Str))];
const PNG_ATTRS: &[AttrSpec] = &[int_attr_or("channels", 0), type_attr_or("dtype", UInt8, &[UInt8, UInt16])];
const JPEG_ATTRS: &[AttrSpec] = &[
    int_attr_or("channels", 0),
    int_attr_or("ratio", 1),
    bool_attr_or("fancy_upscaling", true),
    bool_attr_or("try_recover_truncated", false),
    AttrSpec { name: "acceptable_fraction", kind: AttrKind::Float, default: AttrDefault::Optional, allowed: None },
    AttrSpec { name: "dct_method", kind: AttrKind::String, default: AttrDefault::Optional, allowed: None },
];
const JPEG_OUT: &[ArgSpec] = &[arg("image", TypeRule::Fixed(UInt8))];
const IMAGE_ATTRS: &[AttrSpec] = &[
    int_attr_or("channels", 0),
    type_attr_or("dtype", UInt8, &[UInt8, UInt16, Float32]),
    bool_attr_or("expand_animations", true),
];

pub(super) static OPS: &[OpSchema] = &[
    pure_op("DecodePng", OpFamily::Shape, CONTENTS, IMAGE, PNG_ATTRS, image),
    pure_op("DecodeImage", OpFamily::Shape, CONTENTS, IMAGE, IMAGE_ATTRS, image),
    pure_op("DecodeJpeg", OpFamily::Shape, CONTENTS, JPEG_OUT, JPEG_ATTRS, image),
    pure_op("DecodeAndCropJpeg", OpFamily::Shape, CROP_IN, JPEG_OUT, JPEG_ATTRS, crop),
    pure_op("DecodeBmp", OpFamily::Shape, CONTENTS, JPEG_OUT, &[int_attr_or("channels", 0)], image),
    pure_op("DecodeGif", OpFamily::Shape, CONTENTS, JPEG_OUT, &[], image),
    pure_op("DecodeBase64", OpFamily::Shape, TEXT_IN, TEXT_OUT, &[], same_as_0),
    pure_op("EncodeBase64", OpFamily::Shape, TEXT_IN, TEXT_OUT, &[bool_attr_or("pad", false)], same_as_0),
];
