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
//!
//! Also `CombinedNonMaxSuppression`, the batched per-class NMS of detection exports (see
//! [`combined_nms`]).

use autoclust_graph::{DType, Node, Tensor};

use super::shape_ops::debug_shape;
use super::{arity, attr_bool_or, int_scalar, tensor_of, Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    if node.op == "NonMaxSuppressionWithOverlaps" {
        return Ok(Some(Box::new(|inp: Inputs| {
            arity(&inp, 5)?;
            let picked = nms_with_overlaps(&inp)?;
            let idx: Vec<i32> = picked.iter().map(|&i| i as i32).collect();
            super::one(tensor_of(vec![idx.len()], idx))
        })));
    }
    if node.op == "CombinedNonMaxSuppression" {
        let pad_per_class = attr_bool_or(node, "pad_per_class", false)?;
        let clip_boxes = attr_bool_or(node, "clip_boxes", true)?;
        return Ok(Some(Box::new(move |inp: Inputs| {
            arity(&inp, 6)?;
            combined_nms(&inp, pad_per_class, clip_boxes)
        })));
    }
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
        let sigma = if version == 5 { super::f32_scalar(&inp[5], "soft_nms_sigma")? } else { 0.0 };
        let max = int_scalar(&inp[2], "max_output_size")?;
        let iou_threshold = if version == 1 { iou_attr } else { super::f32_scalar(&inp[3], "iou_threshold")? };
        let score_threshold = if version <= 2 { f32::MIN } else { super::f32_scalar(&inp[4], "score_threshold")? };
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

/// The IoU of boxes `i` and `j` (`[y1, x1, y2, x2]`, corners in either order), with C++'s
/// `std::min`/`std::max` (Eigen's `numext::mini`/`maxi`): a comparison with NaN is false, so
/// a NaN coordinate makes the IoU NaN, which neither suppresses (`NaN > t` is false) nor
/// keeps a score (`NaN <= t` is false) — TensorFlow's answers, which Rust's NaN-ignoring
/// `f32::min` would change.
fn iou(b: &[f32], i: usize, j: usize) -> f32 {
    let min = |a: f32, b: f32| if b < a { b } else { a };
    let max = |a: f32, b: f32| if a < b { b } else { a };
    let (p, q) = (&b[4 * i..4 * i + 4], &b[4 * j..4 * j + 4]);
    let corners = |r: &[f32]| (min(r[0], r[2]), min(r[1], r[3]), max(r[0], r[2]), max(r[1], r[3]));
    let (ay0, ax0, ay1, ax1) = corners(p);
    let (by0, bx0, by1, bx1) = corners(q);
    let area_a = (ay1 - ay0) * (ax1 - ax0);
    let area_b = (by1 - by0) * (bx1 - bx0);
    if area_a <= 0.0 || area_b <= 0.0 {
        return 0.0;
    }
    let inter = max(min(ay1, by1) - max(ay0, by0), 0.0) * max(min(ax1, bx1) - max(ax0, bx0), 0.0);
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

/// A scalar operand of `CombinedNonMaxSuppression`: TensorFlow's "must be 0-D" check.
fn zero_d<'a>(t: &'a Tensor, what: &str) -> KResult<&'a Tensor> {
    if t.rank() == 0 {
        Ok(t)
    } else {
        Err(KernelError::invalid(format!("{what} must be 0-D, got shape {}", debug_shape(&t.shape))))
    }
}

/// One selected box of one class, as the merge across classes sorts them.
#[derive(Clone, Copy)]
struct Detection {
    score: f32,
    class: usize,
    corners: [f32; 4],
}

/// `CombinedNonMaxSuppression` (`tf.image.combined_non_max_suppression`, the
/// post-processing of TF Object Detection API and Keras-CV exports): per image and class,
/// hard NMS of the boxes scoring above `score_threshold` (a box per class when `q` is the
/// class count, one shared box when `q = 1`), at most `max_output_size_per_class` each;
/// then every class's picks merged by score, the best `max_total_size` kept, corners
/// clipped to [0, 1] under `clip_boxes`, the rest of each row zero. Each class's candidates
/// wait in a `std::priority_queue` ordered by score alone and the merge is `std::sort`, both
/// of which leave equal scores in libstdc++'s order: [`super::stl`] reproduces it, so ties
/// come out as TensorFlow's. The class is output as a float; `valid_detections` counts the
/// rows filled. TensorFlow 2.21 checks `scores`' rank after reading its third dimension (a
/// rank below 3 aborts its process); here it is checked first.
fn combined_nms(inp: &Inputs, pad_per_class: bool, clip_boxes: bool) -> KResult<Outputs> {
    let bad = |m: String| Err(KernelError::invalid(m));
    let (boxes, scores) = (&inp[0], &inp[1]);
    if boxes.rank() != 4 {
        return bad(format!("boxes must be 4-D{}", debug_shape(&boxes.shape)));
    }
    if scores.rank() != 3 {
        return bad(format!("scores must be 3-D{}", debug_shape(&scores.shape)));
    }
    let (batch, n, q) = (boxes.shape[0], boxes.shape[1], boxes.shape[2]);
    let classes = scores.shape[2];
    if q != 1 && q != classes {
        return bad("third dimension of boxes must be either 1 or num classes".into());
    }
    if boxes.shape[3] != 4 {
        return bad("boxes must have 4 columns".into());
    }
    if scores.shape[1] != n {
        return bad("scores has incompatible shape".into());
    }
    if scores.shape[0] != batch {
        return bad("boxes and scores must have same batch size".into());
    }
    let per_class = int_scalar(zero_d(&inp[2], "max_size_per_class")?, "max_output_size_per_class")?;
    if per_class <= 0 {
        return bad("max_size_per_class must be positive".into());
    }
    let total = int_scalar(zero_d(&inp[3], "max_total_size")?, "max_total_size")?;
    if total <= 0 {
        return bad("max_total_size must be > 0".into());
    }
    let iou_threshold = super::f32_scalar(zero_d(&inp[4], "iou_threshold")?, "iou_threshold")?;
    let score_threshold = super::f32_scalar(zero_d(&inp[5], "score_threshold")?, "score_threshold")?;
    if !(0.0..=1.0).contains(&iou_threshold) {
        return bad("iou_threshold must be in [0, 1]".into());
    }
    let size_per_class = (per_class as usize).min(n);
    if (size_per_class as u64) * (classes as u64) > i32::MAX as u64 {
        return bad("size_per_class * num_classes causes overflow".into());
    }
    let (Some(b), Some(s)) = (boxes.as_f32(), scores.as_f32()) else {
        return bad("boxes and scores must be float32".into());
    };
    let max_total = (per_class * classes as i64).min(i32::MAX as i64);
    let rows = if pad_per_class { total.min(max_total) } else { total } as usize;
    super::budget(DType::Float32, &[batch, rows, 4])?;
    let mut out_boxes = vec![0f32; batch * rows * 4];
    let mut out_scores = vec![0f32; batch * rows];
    let mut out_classes = vec![0f32; batch * rows];
    let mut valid = vec![0i32; batch];
    let mut class_boxes = vec![0f32; n * 4];
    for img in 0..batch {
        let mut picks: Vec<Option<Detection>> = vec![None; size_per_class * classes];
        for c in 0..classes {
            for i in 0..n {
                let k = q.min(c + 1) - 1;
                let at = ((img * n + i) * q + k) * 4;
                class_boxes[4 * i..4 * i + 4].copy_from_slice(&b[at..at + 4]);
            }
            let score = |i: usize| s[(img * n + i) * classes + c];
            let below = |x: usize, y: usize| score(x) < score(y);
            let mut queue: Vec<usize> = Vec::new();
            for i in (0..n).filter(|&i| score(i) > score_threshold) {
                queue.push(i);
                super::stl::push_heap(&mut queue, &below);
            }
            let mut selected: Vec<usize> = Vec::new();
            while selected.len() < size_per_class && !queue.is_empty() {
                super::stl::pop_heap(&mut queue, &below);
                let i = queue.pop().expect("not empty");
                if selected.iter().rev().any(|&j| iou(&class_boxes, i, j) > iou_threshold) {
                    continue;
                }
                let mut corners = [0f32; 4];
                corners.copy_from_slice(&class_boxes[4 * i..4 * i + 4]);
                picks[selected.len() + size_per_class * c] = Some(Detection { score: score(i), class: c, corners });
                selected.push(i);
            }
        }
        // std::sort by descending score; empty slots score -inf.
        let key = |d: &Option<Detection>| d.map_or(f32::NEG_INFINITY, |d| d.score);
        let mut order: Vec<usize> = (0..picks.len()).collect();
        super::stl::sort(&mut order, &|x, y| key(&picks[y]) < key(&picks[x]));
        let count = picks.iter().filter(|d| d.is_some()).count();
        let filled = count.min(rows);
        valid[img] = filled as i32;
        for (row, d) in order.iter().filter_map(|&k| picks[k]).take(filled).enumerate() {
            let at = img * rows + row;
            for (o, v) in out_boxes[4 * at..4 * at + 4].iter_mut().zip(d.corners) {
                // `max(min(v, 1), 0)` as C++'s `std::min`/`max` take it: NaN stays NaN.
                *o = if clip_boxes { clamp_unit(v) } else { v };
            }
            out_scores[at] = d.score;
            out_classes[at] = d.class as f32;
        }
    }
    Ok([
        tensor_of(vec![batch, rows, 4], out_boxes),
        tensor_of(vec![batch, rows], out_scores),
        tensor_of(vec![batch, rows], out_classes),
        tensor_of(vec![batch], valid),
    ]
    .into_iter()
    .collect())
}

/// `std::max(std::min(v, 1.0f), 0.0f)`: NaN stays NaN (each comparison with NaN is false,
/// so each returns its first operand).
fn clamp_unit(v: f32) -> f32 {
    let m = if 1.0 < v { 1.0 } else { v };
    if m < 0.0 {
        0.0
    } else {
        m
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
    Ok(greedy(s, max as usize, iou_threshold, score_threshold, sigma, |i, j| iou(b, i, j)))
}

/// `NonMaxSuppressionWithOverlaps`: hard NMS with a given similarity matrix (`overlaps[i][j]`
/// for candidate `i` against selected `j`), TensorFlow's checks in its order (no range check
/// on `overlap_threshold`).
fn nms_with_overlaps(inp: &Inputs) -> KResult<Vec<usize>> {
    let bad = |m: String| Err(KernelError::invalid(m));
    let zero_d = |t: &Tensor, what: &str| -> KResult<()> {
        if t.rank() == 0 {
            Ok(())
        } else {
            Err(KernelError::invalid(format!("{what} must be 0-D, got shape {}", debug_shape(&t.shape))))
        }
    };
    zero_d(&inp[2], "max_output_size")?;
    zero_d(&inp[3], "overlap_threshold")?;
    zero_d(&inp[4], "score_threshold")?;
    let (overlaps, scores) = (&inp[0], &inp[1]);
    if overlaps.rank() != 2 {
        return bad(format!("overlaps must be 2-D{}", debug_shape(&overlaps.shape)));
    }
    if overlaps.shape[0] != overlaps.shape[1] {
        return bad(format!("overlaps must be square{}", debug_shape(&overlaps.shape)));
    }
    let n = overlaps.shape[0];
    if scores.rank() != 1 {
        return bad(format!(
            "scores must be 1-D{} (Shape must be rank 1 but is rank {})",
            debug_shape(&scores.shape),
            scores.rank()
        ));
    }
    if scores.shape[0] != n {
        return bad(format!(
            "scores has incompatible shape (Dimensions must be equal, but are {n} and {})",
            scores.shape[0]
        ));
    }
    let max = int_scalar(&inp[2], "max_output_size")?;
    if max < 0 {
        return bad("output size must be non-negative".into());
    }
    let (Some(o), Some(s)) = (overlaps.as_f32(), scores.as_f32()) else {
        return bad("overlaps and scores must be float32".into());
    };
    let (threshold, score_threshold) =
        (super::f32_scalar(&inp[3], "overlap_threshold")?, super::f32_scalar(&inp[4], "score_threshold")?);
    Ok(greedy(s, max as usize, threshold, score_threshold, 0.0, |i, j| o[i * n + j]).0)
}

/// TensorFlow's greedy selection (`DoNonMaxSuppressionOp`): candidates above
/// `score_threshold` best first (ties: lower index), each compared once with every box
/// selected since it was last looked at, `similarity(candidate, selected)`.
fn greedy(
    s: &[f32],
    max: usize,
    iou_threshold: f32,
    score_threshold: f32,
    sigma: f32,
    similarity: impl Fn(usize, usize) -> f32,
) -> (Vec<usize>, Vec<f32>) {
    let n = s.len();
    let soft = sigma > 0.0;
    let coeff = if soft { -0.5 / sigma } else { 0.0 };
    let mut queue: std::collections::BinaryHeap<Candidate> =
        (0..n).filter(|&i| s[i] > score_threshold).map(|i| Candidate { score: s[i], index: i, seen: 0 }).collect();
    let (mut selected, mut selected_scores) = (Vec::new(), Vec::new());
    while selected.len() < max {
        let Some(mut c) = queue.pop() else { break };
        let original = c.score;
        let mut hard = false;
        for j in (c.seen..selected.len()).rev() {
            let sim = similarity(c.index, selected[j]);
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
    (selected, selected_scores)
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

    fn combined(boxes: Tensor, scores: Tensor, per_class: i32, total: i32, pad: bool, clip: bool) -> Vec<Tensor> {
        use autoclust_graph::AttrValue::B;
        let n = node("CombinedNonMaxSuppression", &[("pad_per_class", B(pad)), ("clip_boxes", B(clip))]);
        let ins = [boxes, scores, Tensor::scalar_i32(per_class), Tensor::scalar_i32(total)];
        let mut all = ins.to_vec();
        all.extend([Tensor::scalar_f32(0.5), Tensor::scalar_f32(0.0)]);
        compute(&n, &all).unwrap()
    }

    /// TensorFlow 2.21's `tf.image.combined_non_max_suppression`: per-class picks merged by
    /// score, clipping, `pad_per_class`, and ties in libstdc++'s heap and sort order.
    #[test]
    fn combined_nms_matches_tensorflow() {
        let boxes = Tensor::from_f32(
            vec![1, 4, 1, 4],
            vec![0., 0., 1., 1., 0., 0.1, 1., 1.1, 0., -0.1, 1., 0.9, 0., 10., 1., 11.],
        )
        .unwrap();
        let scores = Tensor::from_f32(vec![1, 4, 2], vec![0.9, 0.1, 0.75, 0.8, 0.6, 0.3, 0.95, 0.2]).unwrap();
        let o = combined(boxes.clone(), scores.clone(), 3, 5, false, true);
        assert_eq!(o[0].shape, vec![1, 5, 4]);
        let want = [0., 1., 1., 1., 0., 0., 1., 1., 0., 0.1, 1., 1., 0., 1., 1., 1., 0., 0., 0., 0.];
        assert_eq!(o[0].as_f32().unwrap(), &want);
        assert_eq!(o[1].as_f32().unwrap(), &[0.95, 0.9, 0.8, 0.2, 0.0]);
        assert_eq!(o[2].as_f32().unwrap(), &[0., 0., 1., 1., 0.]);
        assert_eq!(o[3].as_i32().unwrap(), &[4]);
        let o = combined(boxes.clone(), scores.clone(), 3, 5, false, false);
        assert_eq!(&o[0].as_f32().unwrap()[..12], &[0., 10., 1., 11., 0., 0., 1., 1., 0., 0.1, 1., 1.1]);
        let o = combined(boxes, scores, 1, 5, true, true);
        assert_eq!((o[1].shape.clone(), o[1].as_f32().unwrap()), (vec![1, 2], &[0.95, 0.8][..]));
        assert_eq!((o[2].as_f32().unwrap(), o[3].as_i32().unwrap()), (&[0., 1.][..], &[2][..]));
        // Twenty disjoint boxes scoring alike: the per-class queue's heap order picks 0, 2, 6,
        // 14, 19; over two classes the merge (introsort past 16 entries) puts class 1 first,
        // each class's boxes in this order.
        let n = 20;
        let disjoint: Vec<f32> = (0..n).flat_map(|i| [0.0, 3.0 * i as f32, 1.0, 3.0 * i as f32 + 1.0]).collect();
        let boxes = Tensor::from_f32(vec![1, n, 1, 4], disjoint).unwrap();
        let column =
            |o: &[Tensor]| -> Vec<usize> { o[0].as_f32().unwrap().chunks(4).map(|b| (b[1] / 3.0) as usize).collect() };
        let o = combined(boxes.clone(), Tensor::from_f32(vec![1, n, 1], vec![0.5; n]).unwrap(), 5, 5, false, false);
        assert_eq!(column(&o), [0, 2, 6, 14, 19]);
        let o = combined(boxes, Tensor::from_f32(vec![1, n, 2], vec![0.5; 2 * n]).unwrap(), 20, 40, false, false);
        let order = [12, 2, 6, 14, 19, 18, 17, 16, 13, 15, 0, 11, 10, 9, 8, 5, 7, 4, 1, 3];
        assert_eq!(column(&o), [order, order].concat());
        let classes: Vec<f32> = o[2].as_f32().unwrap().to_vec();
        assert_eq!(classes, [vec![1.0; 20], vec![0.0; 20]].concat());
    }

    /// TensorFlow's checks, in its order, with its words.
    #[test]
    fn combined_nms_refuses_as_tensorflow_does() {
        let n = node("CombinedNonMaxSuppression", &[]);
        let run = |b: Vec<usize>, s: Vec<usize>, per: i32, total: i32, iou: f32| {
            let z = |sh: &Vec<usize>| Tensor::from_f32(sh.clone(), vec![0.0; sh.iter().product()]).unwrap();
            let ins = [
                z(&b),
                z(&s),
                Tensor::scalar_i32(per),
                Tensor::scalar_i32(total),
                Tensor::scalar_f32(iou),
                Tensor::scalar_f32(0.0),
            ];
            compute(&n, &ins).map_err(|e| e.to_string())
        };
        let e = |r: Result<Vec<Tensor>, String>| r.unwrap_err();
        assert!(e(run(vec![1, 1, 4], vec![1, 1, 1], 1, 1, 0.5)).contains("boxes must be 4-D[1,1,4]"));
        assert!(e(run(vec![1, 1, 1, 4], vec![1, 1], 1, 1, 0.5)).contains("scores must be 3-D[1,1]"));
        assert!(e(run(vec![1, 2, 3, 4], vec![1, 2, 2], 1, 1, 0.5))
            .contains("third dimension of boxes must be either 1 or num classes"));
        assert!(e(run(vec![1, 2, 1, 3], vec![1, 2, 2], 1, 1, 0.5)).contains("boxes must have 4 columns"));
        assert!(e(run(vec![1, 2, 1, 4], vec![1, 3, 2], 1, 1, 0.5)).contains("scores has incompatible shape"));
        assert!(
            e(run(vec![2, 2, 1, 4], vec![1, 2, 2], 1, 1, 0.5)).contains("boxes and scores must have same batch size")
        );
        assert!(e(run(vec![1, 2, 1, 4], vec![1, 2, 2], 0, 1, 0.5)).contains("max_size_per_class must be positive"));
        assert!(e(run(vec![1, 2, 1, 4], vec![1, 2, 2], 1, 0, 0.5)).contains("max_total_size must be > 0"));
        assert!(e(run(vec![1, 2, 1, 4], vec![1, 2, 2], 1, 1, f32::NAN)).contains("iou_threshold must be in [0, 1]"));
        // No boxes: every row zero, none valid.
        let o = run(vec![2, 0, 1, 4], vec![2, 0, 3], 2, 3, 0.5).unwrap();
        assert_eq!((o[0].shape.clone(), o[3].as_i32().unwrap()), (vec![2, 3, 4], &[0, 0][..]));
    }

    /// A NaN corner makes an IoU of NaN, as C++'s `std::min`/`max` compute it: TF1's NMS decays
    /// that box's score to 0 and queues it again (picked last), V3 with a zero score threshold
    /// drops it (TensorFlow 2.21's answers).
    #[test]
    fn nan_boxes_are_treated_as_tensorflow_treats_them() {
        let boxes =
            Tensor::from_f32(vec![4, 4], vec![0., 0., 1., 1., f32::NAN, 0., 1., 1., 0., 5., 1., 6., 0., 7., 1., 8.])
                .unwrap();
        let scores = Tensor::from_f32(vec![4], vec![0.9, 0.8, 0.1, 0.05]).unwrap();
        let v1 =
            compute(&node("NonMaxSuppression", &[]), &[boxes.clone(), scores.clone(), Tensor::scalar_i32(10)]).unwrap();
        assert_eq!(v1[0].as_i32().unwrap(), &[0, 2, 3, 1]);
        let f = Tensor::scalar_f32;
        let v3 = compute(&node("NonMaxSuppressionV3", &[]), &[boxes, scores, Tensor::scalar_i32(10), f(0.5), f(0.0)])
            .unwrap();
        assert_eq!(v3[0].as_i32().unwrap(), &[0, 2, 3]);
    }

    /// TensorFlow 2.21's `NonMaxSuppressionWithOverlaps`: the similarity is the overlap of the
    /// candidate's row with the selected box's column; the threshold is not range-checked.
    #[test]
    fn nms_with_overlaps_matches_tensorflow() {
        let run = |o: Vec<f32>, n: usize, s: Vec<f32>, max: i32, t: f32, st: f32| {
            let over = Tensor::from_f32(vec![n, o.len() / n.max(1)], o).unwrap();
            let scores = Tensor::from_f32(vec![s.len()], s).unwrap();
            let ins = [over, scores, Tensor::scalar_i32(max), Tensor::scalar_f32(t), Tensor::scalar_f32(st)];
            compute(&node("NonMaxSuppressionWithOverlaps", &[]), &ins).map(|o| o[0].as_i32().unwrap().to_vec())
        };
        assert_eq!(run(vec![0., 0.9, 0., 0.], 2, vec![0.5, 0.9], 10, 0.5, 0.).unwrap(), [1]);
        assert_eq!(run(vec![0., 0., 0.9, 0.], 2, vec![0.5, 0.9], 10, 0.5, 0.).unwrap(), [1, 0]);
        let o = vec![1., 0.6, 0.2, 0.6, 1., 0.7, 0.2, 0.7, 1.];
        let s = vec![0.9, 0.8, 0.7];
        for (max, t, st, want) in [
            (10, 0.5, 0., vec![0, 2]),
            (10, 5., 0., vec![0, 1, 2]),
            (10, -1., 0., vec![0]),
            (1, 0.5, 0., vec![0]),
            (10, 0.65, 0.75, vec![0, 1]),
        ] {
            assert_eq!(run(o.clone(), 3, s.clone(), max, t, st).unwrap(), want, "{max} {t} {st}");
        }
        let err = |r: KResult<Vec<i32>>| r.unwrap_err().to_string();
        assert!(err(run(vec![1., 2., 3., 1., 2., 3.], 2, vec![0.9, 0.8], 10, 0.5, 0.))
            .contains("overlaps must be square[2,3]"));
        assert!(err(run(o.clone(), 3, vec![0.9, 0.8], 10, 0.5, 0.))
            .contains("scores has incompatible shape (Dimensions must be equal, but are 3 and 2)"));
        assert!(err(run(o, 3, s, -1, 0.5, 0.)).contains("output size must be non-negative"));
    }
}
