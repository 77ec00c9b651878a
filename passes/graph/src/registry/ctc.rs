//! Schemas of the connectionist-temporal-classification ops (`ctc_ops.cc`): `CTCLoss` (what
//! `tf.compat.v1.nn.ctc_loss`, Keras 2's `ctc_batch_cost` and `tf.nn.ctc_loss` with sparse
//! labels emit) and the decoders `CTCBeamSearchDecoder` (`tf.nn.ctc_beam_search_decoder`,
//! `keras.ops.ctc_decode(strategy="beam_search")`) and `CTCGreedyDecoder`, what `keras.ops.ctc_decode(strategy="greedy")` and
//! `tf.nn.ctc_greedy_decoder` emit. Its outputs are a sparse tensor (indices, values,
//! dense shape) of the decoded label sequences, whose entry count depends on the data, and
//! each sequence's negated sum of the best logits.

use super::build::{arg, bool_attr_or, int_attr_or, pure_op, repeated, required, type_attr_or};
use super::{ArgSpec, AttrKind, AttrSpec, InferCtx, OpFamily, OpSchema, TypeRule};
use crate::DType::{Float32, Float64, Int32, Int64};
use crate::Shape;

const T: TypeRule = TypeRule::Attr("T");

/// `[?, 2]`, `[?]`, `[2]` and `[batch, 1]`; the inputs must be time-major logits of rank 3
/// and a vector of lengths.
fn greedy(c: &InferCtx<'_>) -> Result<Vec<Shape>, String> {
    let batch = match c.shape(0).dims.as_deref() {
        None => None,
        Some([_, b, _]) => *b,
        Some(_) => return Err(format!("inputs must be [max_time, batch, num_classes], but has shape {}", c.shape(0))),
    };
    if c.shape(1).rank().is_some_and(|r| r != 1) {
        return Err(format!("sequence_length must be a vector, but has shape {}", c.shape(1)));
    }
    Ok(vec![
        Shape::with_dims(vec![None, Some(2)]),
        Shape::with_dims(vec![None]),
        Shape::with_dims(vec![Some(2)]),
        Shape::with_dims(vec![batch, Some(1)]),
    ])
}

const GREEDY_IN: &[ArgSpec] = &[arg("inputs", T), arg("sequence_length", TypeRule::Fixed(Int32))];
const GREEDY_OUT: &[ArgSpec] = &[
    arg("decoded_indices", TypeRule::Fixed(Int64)),
    arg("decoded_values", TypeRule::Fixed(Int64)),
    arg("decoded_shape", TypeRule::Fixed(Int64)),
    arg("log_probability", T),
];
const GREEDY_ATTRS: &[AttrSpec] = &[
    bool_attr_or("merge_repeated", false),
    int_attr_or("blank_index", -1),
    type_attr_or("T", Float32, &[Float32, Float64]),
];

/// `CTCLoss`: the loss `[batch]` and the gradient, shaped as the logits.
fn loss(c: &InferCtx<'_>) -> Result<Vec<Shape>, String> {
    let logits = c.shape(0).clone();
    let batch = match logits.dims.as_deref() {
        None => None,
        Some([_, b, _]) => *b,
        Some(_) => return Err(format!("inputs must be [max_time, batch, num_classes], but has shape {logits}")),
    };
    if c.shape(1).rank().is_some_and(|r| r != 2) {
        return Err(format!("labels_indices must be a matrix, but has shape {}", c.shape(1)));
    }
    for (i, what) in [(2, "labels_values"), (3, "sequence_length")] {
        if c.shape(i).rank().is_some_and(|r| r != 1) {
            return Err(format!("{what} must be a vector, but has shape {}", c.shape(i)));
        }
    }
    Ok(vec![Shape::with_dims(vec![batch]), logits])
}

const LOSS_IN: &[ArgSpec] = &[
    arg("inputs", T),
    arg("labels_indices", TypeRule::Fixed(Int64)),
    arg("labels_values", TypeRule::Fixed(Int32)),
    arg("sequence_length", TypeRule::Fixed(Int32)),
];
const LOSS_OUT: &[ArgSpec] = &[arg("loss", T), arg("gradient", T)];
const LOSS_ATTRS: &[AttrSpec] = &[
    bool_attr_or("preprocess_collapse_repeated", false),
    bool_attr_or("ctc_merge_repeated", true),
    bool_attr_or("ignore_longer_outputs_than_inputs", false),
    type_attr_or("T", Float32, &[Float32, Float64]),
];

/// `top_paths` sparse tensors (`[?, 2]` indices, `[?]` values, `[2]` shapes, each list in
/// turn) and `[batch, top_paths]` log probabilities.
fn beam(c: &InferCtx<'_>) -> Result<Vec<Shape>, String> {
    let single = greedy(c)?;
    let top = c.attr_int("top_paths", 1);
    if top < 1 || c.attr_int("beam_width", 1) < 1 {
        return Err("beam_width and top_paths must be at least 1".into());
    }
    let mut out = Vec::new();
    for one in &single[..3] {
        out.extend(std::iter::repeat_n(one.clone(), top as usize));
    }
    out.push(Shape::with_dims(vec![single[3].dims.as_ref().and_then(|d| d[0]), Some(top)]));
    Ok(out)
}

const BEAM_OUT: &[ArgSpec] = &[
    repeated("decoded_indices", TypeRule::Fixed(Int64), "top_paths"),
    repeated("decoded_values", TypeRule::Fixed(Int64), "top_paths"),
    repeated("decoded_shape", TypeRule::Fixed(Int64), "top_paths"),
    arg("log_probability", T),
];
const BEAM_ATTRS: &[AttrSpec] = &[
    required("beam_width", AttrKind::Int),
    required("top_paths", AttrKind::Int),
    bool_attr_or("merge_repeated", true),
    type_attr_or("T", Float32, &[Float32, Float64]),
];

pub(super) static OPS: &[OpSchema] = &[
    pure_op("CTCBeamSearchDecoder", OpFamily::NeuralNet, GREEDY_IN, BEAM_OUT, BEAM_ATTRS, beam),
    pure_op("CTCGreedyDecoder", OpFamily::NeuralNet, GREEDY_IN, GREEDY_OUT, GREEDY_ATTRS, greedy),
    pure_op("CTCLoss", OpFamily::NeuralNet, LOSS_IN, LOSS_OUT, LOSS_ATTRS, loss),
];
