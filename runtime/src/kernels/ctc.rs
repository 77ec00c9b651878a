//! Connectionist-temporal-classification decoding: `CTCGreedyDecoder` (`ctc_decoder_ops.cc`),
//! what `keras.ops.ctc_decode(strategy="greedy")` and `tf.nn.ctc_greedy_decoder` emit.
//!
//! For each batch entry `b`, over its first `sequence_length[b]` time steps of the time-major
//! logits `[max_time, batch, num_classes]`: the best class of each step (the first of equal
//! maxima), skipping the blank class (`blank_index`, negative counting from the end) and,
//! with `merge_repeated`, a class equal to the step before's; the log probability is minus
//! the sum of the steps' best logits. The sequences come out as a sparse tensor: indices
//! `[n, 2]` (batch, position), values `[n]`, dense shape `[batch, longest]`.

use autoclust_graph::{AttrValue, Node, Tensor};

use super::{arity, int_values, tensor_of, Elem, Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

fn greedy<T: Elem>(logits: &Tensor, lengths: &[i64], merge_repeated: bool, blank: i64) -> KResult<Outputs> {
    let &[max_time, batch, classes] = logits.shape.as_slice() else {
        return Err(KernelError::invalid(format!("inputs is not a 3-Tensor: shape {:?}", logits.shape)));
    };
    if logits.num_elements() == 0 {
        return Err(KernelError::invalid("inputs must not be empty"));
    }
    if lengths.len() != batch {
        return Err(KernelError::invalid(format!("len(sequence_length) != batch_size: {} vs {batch}", lengths.len())));
    }
    let blank = if blank < 0 { classes as i64 + blank } else { blank };
    if blank < 0 || blank >= classes as i64 {
        return Err(KernelError::invalid(format!(
            "blank_index expected to be between -{classes} and {} but was {blank}",
            classes as i64 - 1
        )));
    }
    let x = T::slice(logits);
    let mut indices = Vec::new();
    let mut values = Vec::new();
    let mut log_prob = Vec::with_capacity(batch);
    let mut longest = 0i64;
    for (b, &len) in lengths.iter().enumerate() {
        if len < 0 || len as usize > max_time {
            return Err(KernelError::invalid(format!("sequence_length({b}) = {len} is not in [0, {max_time}]")));
        }
        let mut sum = 0.0f64;
        let mut prev = -1i64;
        let mut count = 0i64;
        for t in 0..len as usize {
            let row = &x[(t * batch + b) * classes..(t * batch + b + 1) * classes];
            let (mut best, mut arg) = (row[0], 0usize);
            for (c, &v) in row.iter().enumerate().skip(1) {
                if v > best {
                    best = v;
                    arg = c;
                }
            }
            sum -= best.to_f64();
            let c = arg as i64;
            if c != blank && !(merge_repeated && c == prev) {
                indices.extend([b as i64, count]);
                values.push(c);
                count += 1;
            }
            prev = c;
        }
        longest = longest.max(count);
        log_prob.push(T::from_f64(sum));
    }
    let n = values.len();
    Ok([
        tensor_of(vec![n, 2], indices),
        tensor_of(vec![n], values),
        tensor_of(vec![2], vec![batch as i64, longest]),
        tensor_of(vec![batch, 1], log_prob),
    ]
    .into_iter()
    .collect())
}

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    if node.op != "CTCGreedyDecoder" {
        return Ok(None);
    }
    let merge = node.attr("merge_repeated").and_then(AttrValue::as_bool).unwrap_or(false);
    let blank = node.attr("blank_index").and_then(AttrValue::as_int).unwrap_or(-1);
    Ok(Some(Box::new(move |inp: Inputs| {
        arity(&inp, 2)?;
        let lengths = int_values(&inp[1], "sequence_length")?;
        if inp[1].shape.len() != 1 {
            return Err(KernelError::invalid(format!("sequence_length is not a vector: shape {:?}", inp[1].shape)));
        }
        match inp[0].dtype {
            autoclust_graph::DType::Float32 => greedy::<f32>(&inp[0], &lengths, merge, blank),
            autoclust_graph::DType::Float64 => greedy::<f64>(&inp[0], &lengths, merge, blank),
            d => Err(KernelError::DType(d)),
        }
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(logits: &[f32], shape: [usize; 3], lengths: &[i32], merge: bool, blank: i64) -> KResult<Outputs> {
        let mut n = super::super::probe("CTCGreedyDecoder");
        n.attrs.insert("merge_repeated".into(), AttrValue::B(merge));
        n.attrs.insert("blank_index".into(), AttrValue::I(blank));
        let f = prepare(&n).unwrap().unwrap();
        f([tensor_of(shape.to_vec(), logits.to_vec()), tensor_of(vec![lengths.len()], lengths.to_vec())]
            .into_iter()
            .collect())
    }

    /// TensorFlow 2.21, `tf.nn.ctc_greedy_decoder` on one sequence of 5 steps over classes
    /// {0, 1, blank = 2}: best classes 0 0 2 1 1.
    #[test]
    fn matches_tensorflow_with_and_without_merging() {
        #[rustfmt::skip]
        let logits = [
            0.9, 0.1, 0.0,
            0.8, 0.1, 0.1,
            0.1, 0.2, 0.7,
            0.2, 0.6, 0.2,
            0.1, 0.5, 0.4,
        ];
        let out = decode(&logits, [5, 1, 3], &[5], true, -1).unwrap();
        assert_eq!(out[1].as_i64().unwrap(), &[0, 1]);
        assert_eq!(out[0].as_i64().unwrap(), &[0, 0, 0, 1]);
        assert_eq!(out[2].as_i64().unwrap(), &[1, 2]);
        assert!((out[3].as_f32().unwrap()[0] + 3.5).abs() < 1e-6);
        let out = decode(&logits, [5, 1, 3], &[5], false, -1).unwrap();
        assert_eq!(out[1].as_i64().unwrap(), &[0, 0, 1, 1]);
        // A blank in front: class 0 is blank, so only the 1s (and the 2) count; length 4 drops step 5.
        let out = decode(&logits, [5, 1, 3], &[4], true, 0).unwrap();
        assert_eq!(out[1].as_i64().unwrap(), &[2, 1]);
        assert_eq!(out[2].as_i64().unwrap(), &[1, 2]);
    }

    #[test]
    fn bad_lengths_and_shapes_are_errors() {
        let e = decode(&[0.0; 6], [2, 1, 3], &[3], true, -1).unwrap_err();
        assert!(e.to_string().contains("is not in [0, 2]"), "{e}");
        let e = decode(&[0.0; 6], [2, 1, 3], &[1, 1], true, -1).unwrap_err();
        assert!(e.to_string().contains("len(sequence_length)"), "{e}");
        let e = decode(&[0.0; 6], [2, 1, 3], &[1], true, 3).unwrap_err();
        assert!(e.to_string().contains("blank_index"), "{e}");
    }
}
