//! Non-maximum suppression (`tf.image.non_max_suppression*`): `NonMaxSuppression` and `V2`
//! (TF1's: no score threshold; version 1's IoU threshold an attribute), `NonMaxSuppressionV3`, `V4`
//! (optionally padded to `max_output_size`) and `V5` (soft-NMS: a Gaussian decay of the
//! scores of overlapping boxes, with the selected scores as an output), with TensorFlow's CPU
//! kernel's algorithm (`non_max_suppression_op.cc`):
//! - candidates are the boxes whose score is above `score_threshold`, taken best first
//!   (ties: lower index first);
//! - a box's corners may come in either order; the IoU of two boxes is 0 when either has no
//!   area;
//! - hard NMS (`soft_nms_sigma = 0`): a candidate is suppressed when its IoU with a selected
//!   box exceeds `iou_threshold`; soft-NMS (`soft_nms_sigma > 0`): every overlap multiplies
//!   its score by `exp(-0.5 · iou² / sigma)` (the IoU threshold plays no part, as in
//!   TensorFlow's results), and a candidate whose score changed goes back into the queue (if
//!   still above `score_threshold`) instead of being selected;
//! - a candidate is compared with each selected box once.
//!
//! Boxes, scores and thresholds are float32.

use autoclust_graph::{Node, Tensor};

use super::{arity, attr_bool_or, int_scalar, tensor_of, Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let version = match node.op.as_str() {
        "NonMaxSuppression" => 1,
        "NonMaxSuppressionV2" => 2,
        "NonMaxSuppressionV3" => 3,
        "NonMaxSuppressionV4" => 4,
        "NonMaxSuppressionV5" => 5,
        _ => return Ok(None),
    };
    let pad = attr_bool_or(node, "pad_to_max_output_size", false)?;
    // Version 1 takes its IoU threshold as an attribute; 1 and 2 have no score threshold
    // (TensorFlow's `lowest()`: every score above it, so not -inf or NaN, is a candidate).
    let iou_attr = match node.attr("iou_threshold") {
        Some(a) => a.as_float().ok_or_else(|| KernelError::Attr("iou_threshold".into()))?,
        None => 0.5,
    };
    Ok(Some(Box::new(move |inp: Inputs| {
        arity(&inp, [3, 4, 5, 5, 6][version - 1])?;
        let sigma = if version == 5 { scalar(&inp[5], "soft_nms_sigma")? } else { 0.0 };
        let max = int_scalar(&inp[2], "max_output_size")?;
        let iou_threshold = if version == 1 { iou_attr } else { scalar(&inp[3], "iou_threshold")? };
        let score_threshold = if version <= 2 { f32::MIN } else { scalar(&inp[4], "score_threshold")? };
        let (selected, scores) = nms(&inp[0], &inp[1], max, iou_threshold, score_threshold, sigma)?;
        let valid = selected.len();
        let mut idx: Vec<i32> = selected.iter().map(|&i| i as i32).collect();
        let mut sc = scores;
        let n = if pad && version >= 4 { max.max(0) as usize } else { valid };
        idx.resize(n, 0);
        sc.resize(n, 0.0);
        let mut out = Outputs::new();
        out.push(tensor_of(vec![n], idx));
        if version == 5 {
            out.push(tensor_of(vec![n], sc));
        }
        if version >= 4 {
            out.push(tensor_of(Vec::new(), vec![valid as i32]));
        }
        Ok(out)
    })))
}

fn scalar(t: &Tensor, what: &str) -> KResult<f32> {
    match t.as_f32() {
        Some([x]) if t.rank() == 0 => Ok(*x),
        _ => Err(KernelError::invalid(format!(
            "{what} must be a float32 scalar, got {} of shape {:?}",
            t.dtype, t.shape
        ))),
    }
}

/// The IoU of boxes `i` and `j` (`[y1, x1, y2, x2]`, corners in either order).
fn iou(b: &[f32], i: usize, j: usize) -> f32 {
    let (p, q) = (&b[4 * i..4 * i + 4], &b[4 * j..4 * j + 4]);
    let corners = |r: &[f32]| (r[0].min(r[2]), r[1].min(r[3]), r[0].max(r[2]), r[1].max(r[3]));
    let (ay0, ax0, ay1, ax1) = corners(p);
    let (by0, bx0, by1, bx1) = corners(q);
    let area_a = (ay1 - ay0) * (ax1 - ax0);
    let area_b = (by1 - by0) * (bx1 - bx0);
    if area_a <= 0.0 || area_b <= 0.0 {
        return 0.0;
    }
    let inter = (ay1.min(by1) - ay0.max(by0)).max(0.0) * (ax1.min(bx1) - ax0.max(bx0)).max(0.0);
    inter / (area_a + area_b - inter)
}

/// A queued candidate: its current score, index, and how many selected boxes it has been
/// compared with.
#[derive(Clone, Copy)]
struct Candidate {
    score: f32,
    index: usize,
    seen: usize,
}

impl PartialEq for Candidate {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == std::cmp::Ordering::Equal
    }
}
impl Eq for Candidate {}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Candidate {
    /// Higher score first; on a tie, the lower index.
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.score.total_cmp(&o.score).then(o.index.cmp(&self.index))
    }
}

fn nms(
    boxes: &Tensor,
    scores: &Tensor,
    max: i64,
    iou_threshold: f32,
    score_threshold: f32,
    sigma: f32,
) -> KResult<(Vec<usize>, Vec<f32>)> {
    let (Some(b), Some(s)) = (boxes.as_f32(), scores.as_f32()) else {
        return Err(KernelError::invalid("boxes and scores must be float32"));
    };
    if boxes.rank() != 2 || boxes.shape[1] != 4 {
        return Err(KernelError::invalid(format!("boxes must be 2-D with 4 columns, got shape {:?}", boxes.shape)));
    }
    let n = boxes.shape[0];
    if scores.rank() != 1 || scores.shape[0] != n {
        return Err(KernelError::invalid(format!(
            "scores has incompatible shape {:?}: need [{n}] for boxes of shape {:?}",
            scores.shape, boxes.shape
        )));
    }
    if max < 0 {
        return Err(KernelError::invalid("max_output_size must be non-negative"));
    }
    if !(0.0..=1.0).contains(&iou_threshold) {
        return Err(KernelError::invalid("iou_threshold must be in [0, 1]"));
    }
    if sigma < 0.0 {
        return Err(KernelError::invalid("soft_nms_sigma must be non-negative"));
    }
    let soft = sigma > 0.0;
    let coeff = if soft { -0.5 / sigma } else { 0.0 };
    let mut queue: std::collections::BinaryHeap<Candidate> =
        (0..n).filter(|&i| s[i] > score_threshold).map(|i| Candidate { score: s[i], index: i, seen: 0 }).collect();
    let (mut selected, mut selected_scores) = (Vec::new(), Vec::new());
    while selected.len() < max as usize {
        let Some(mut c) = queue.pop() else { break };
        let original = c.score;
        let mut hard = false;
        for j in (c.seen..selected.len()).rev() {
            let sim = iou(b, c.index, selected[j]);
            // Soft-NMS decays every overlap, above the IoU threshold too (TensorFlow's results).
            let weight = if soft {
                (coeff * sim * sim).exp()
            } else if sim <= iou_threshold {
                1.0
            } else {
                0.0
            };
            c.score *= weight;
            if !soft && sim > iou_threshold {
                hard = true;
                break;
            }
            if c.score <= score_threshold {
                break;
            }
        }
        c.seen = selected.len();
        if hard {
            continue;
        }
        if c.score == original {
            selected.push(c.index);
            selected_scores.push(c.score);
        } else if c.score > score_threshold {
            queue.push(c);
        }
    }
    Ok((selected, selected_scores))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::compute;
    use crate::kernels::tests_support::node;

    /// TensorFlow 2.21's `gen_image_ops.non_max_suppression_v3/v4/v5` on three overlapping
    /// boxes, two overlapping boxes far away, and one alone.
    #[test]
    fn nms_matches_tensorflow() {
        let boxes = Tensor::from_f32(
            vec![6, 4],
            vec![
                0., 0., 1., 1., 0., 0.1, 1., 1.1, 0., -0.1, 1., 0.9, 0., 10., 1., 11., 0., 10.1, 1., 11.1, 0., 100.,
                1., 101.,
            ],
        )
        .unwrap();
        let scores = Tensor::from_f32(vec![6], vec![0.9, 0.75, 0.6, 0.95, 0.5, 0.3]).unwrap();
        let f = Tensor::scalar_f32;
        let run = |op: &str, pad: bool, ins: Vec<Tensor>| {
            let n = node(op, &[("pad_to_max_output_size", autoclust_graph::AttrValue::B(pad))]);
            let mut all = vec![boxes.clone(), scores.clone()];
            all.extend(ins);
            compute(&n, &all).unwrap()
        };
        let o = run("NonMaxSuppressionV3", false, vec![Tensor::scalar_i32(3), f(0.5), f(0.0)]);
        assert_eq!(o[0].as_i32().unwrap(), &[3, 0, 5]);
        let o = run("NonMaxSuppressionV3", false, vec![Tensor::scalar_i32(10), f(0.5), f(0.4)]);
        assert_eq!(o[0].as_i32().unwrap(), &[3, 0]);
        let o = run("NonMaxSuppressionV4", true, vec![Tensor::scalar_i32(5), f(0.5), f(0.4)]);
        assert_eq!((o[0].as_i32().unwrap(), o[1].as_i32().unwrap()), (&[3, 0, 0, 0, 0][..], &[2][..]));
        let o = run("NonMaxSuppressionV5", false, vec![Tensor::scalar_i32(6), f(0.5), f(0.0), f(0.5)]);
        assert_eq!(o[0].as_i32().unwrap(), &[3, 0, 1, 5, 4, 2]);
        let want = [0.95, 0.9, 0.38400355, 0.3, 0.2560026, 0.19697244];
        for (a, b) in o[1].as_f32().unwrap().iter().zip(want) {
            assert!((a - b).abs() < 1e-6, "{:?}", o[1]);
        }
        assert_eq!(o[2].as_i32().unwrap(), &[6]);
        let o = run("NonMaxSuppressionV5", false, vec![Tensor::scalar_i32(6), f(0.5), f(0.0), f(0.0)]);
        assert_eq!(o[0].as_i32().unwrap(), &[3, 0, 5]);
        // TF1's versions: no score threshold (every finite score is a candidate; -inf and NaN
        // are not), version 1's IoU threshold an attribute defaulting to 0.5.
        let v1 = |attrs: &[(&str, autoclust_graph::AttrValue)]| {
            compute(&node("NonMaxSuppression", attrs), &[boxes.clone(), scores.clone(), Tensor::scalar_i32(10)])
                .unwrap()
        };
        assert_eq!(v1(&[])[0].as_i32().unwrap(), &[3, 0, 5]);
        assert_eq!(
            v1(&[("iou_threshold", autoclust_graph::AttrValue::F(0.9))])[0].as_i32().unwrap(),
            &[3, 0, 1, 2, 4, 5]
        );
        let odd = Tensor::from_f32(vec![6], vec![0.9, 0.75, 0.6, 0.95, f32::NEG_INFINITY, f32::NAN]).unwrap();
        let v2 = |thr: f32| {
            compute(&node("NonMaxSuppressionV2", &[]), &[boxes.clone(), odd.clone(), Tensor::scalar_i32(10), f(thr)])
        };
        assert_eq!(v2(0.5).unwrap()[0].as_i32().unwrap(), &[3, 0]);
        assert!(v2(1.5).unwrap_err().to_string().contains("iou_threshold must be in [0, 1]"));
        // Corners given in the other order: the same boxes.
        let flipped = Tensor::from_f32(vec![2, 4], vec![1., 1., 0., 0., 1., 1.1, 0., 0.1]).unwrap();
        let n = node("NonMaxSuppressionV3", &[]);
        let o = compute(
            &n,
            &[flipped, Tensor::from_f32(vec![2], vec![0.5, 0.6]).unwrap(), Tensor::scalar_i32(2), f(0.5), f(0.0)],
        )
        .unwrap();
        assert_eq!(o[0].as_i32().unwrap(), &[1]);
    }
}
