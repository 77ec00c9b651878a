//! Schemas of the connectionist-temporal-classification ops (`ctc_ops.cc`): `CTCLoss` (what
//! `tf.compat.v1.nn.ctc_loss`, Keras 2's `ctc_batch_cost` and `tf.nn.ctc_loss` with sparse
//! labels emit) and the decoder `CTCGreedyDecoder`, what `keras.ops.ctc_decode(strategy="greedy")` and
//! `tf.nn.ctc_greedy_decoder` emit. Its outputs are a sparse tensor (indices, values,
//! dense shape) of the decoded label sequences, whose entry count depends on the data, and
//! each sequence's negated sum of the best logits.

use super::build::{arg, bool_attr_or, int_attr_or, pure_op, type_attr_or};
use super::{ArgSpec, AttrSpec, InferCtx, OpFamily, OpSchema, TypeRule};
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

pub(super) static OPS: &[OpSchema] = &[
    pure_op("CTCGreedyDecoder", OpFamily::NeuralNet, GREEDY_IN, GREEDY_OUT, GREEDY_ATTRS, greedy),
    pure_op("CTCLoss", OpFamily::NeuralNet, LOSS_IN, LOSS_OUT, LOSS_ATTRS, loss),
];
