//! Connectionist temporal classification: the loss `CTCLoss` (`ctc_loss_op.cc`, what
//! `tf.compat.v1.nn.ctc_loss`, Keras 2's `ctc_batch_cost` and `tf.nn.ctc_loss` with sparse labels
//! emit) and the decoder `CTCGreedyDecoder` (`ctc_decoder_ops.cc`), what
//! `keras.ops.ctc_decode(strategy="greedy")` and `tf.nn.ctc_greedy_decoder` emit.
//!
//! `CTCLoss` follows `ctc_loss_calculator.h` step for step, so that its values match
//! TensorFlow's to rounding: a plain softmax per step (its logarithm taken afterwards), the
//! forward and backward recursions over the label sequence with blanks between labels in log
//! space, restricted to the states that can still reach the end, `LogSumExp` with its
//! correction term in single precision, and the gradient with respect to the logits
//! `softmax − exp(log Σ α·β − log p)`. Its label checks (a label at or past the blank ends the
//! sequence; too little time is an error unless `ignore_longer_outputs_than_inputs`) and
//! their messages are TensorFlow's.
//!
//! Greedy decoding: for each batch entry `b`, over its first `sequence_length[b]` time steps of the time-major
//! logits `[max_time, batch, num_classes]`: the best class of each step (the first of equal
//! maxima), skipping the blank class (`blank_index`, negative counting from the end) and,
//! with `merge_repeated`, a class equal to the step before's; the log probability is minus
//! the sum of the steps' best logits. The sequences come out as a sparse tensor: indices
//! `[n, 2]` (batch, position), values `[n]`, dense shape `[batch, longest]`.

use autoclust_graph::{AttrValue, Node, Tensor};

use super::real::Real;
use super::stl;
use super::{arity, int_values, tensor_of, Elem, Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

/// The decoders' input checks (`CTCDecodeHelper::ValidateInputsGenerateOutputs`): time-major
/// logits, one length per batch entry, none past `max_time` (a negative one decodes nothing,
/// as in TensorFlow). Returns `[max_time, batch, classes]`.
fn check_decoder_inputs(logits: &Tensor, lengths: &[i64]) -> KResult<[usize; 3]> {
    let &[max_time, batch, classes] = logits.shape.as_slice() else {
        return Err(KernelError::invalid(format!("inputs is not a 3-Tensor: shape {:?}", logits.shape)));
    };
    if logits.num_elements() == 0 {
        return Err(KernelError::invalid("inputs must not be empty"));
    }
    if lengths.len() != batch {
        return Err(KernelError::invalid(format!(
            "len(sequence_length) != batch_size.  len(sequence_length):  {} batch_size: {batch}",
            lengths.len()
        )));
    }
    if let Some(b) = lengths.iter().position(|&l| l > max_time as i64) {
        return Err(KernelError::invalid(format!("sequence_length({b}) <= {max_time}")));
    }
    Ok([max_time, batch, classes])
}

fn greedy<T: Elem>(logits: &Tensor, lengths: &[i64], merge_repeated: bool, blank: i64) -> KResult<Outputs> {
    let [_, batch, classes] = check_decoder_inputs(logits, lengths)?;
    let blank = if blank < 0 { classes as i64 + blank } else { blank };
    if blank < 0 || blank >= classes as i64 {
        return Err(KernelError::invalid(format!(
            "blank_index expected to be between -{classes} and {} but was {blank}",
            classes as i64 - 1
        )));
    }
    let x = T::slice(logits);
    let mut rows = Vec::with_capacity(batch);
    let mut log_prob = Vec::with_capacity(batch);
    for (b, &len) in lengths.iter().enumerate() {
        let mut sum = 0.0f64;
        let mut prev = -1i64;
        let mut row_out = Vec::new();
        for t in 0..len.max(0) as usize {
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
                row_out.push(c);
            }
            prev = c;
        }
        rows.push(row_out);
        log_prob.push(T::from_f64(sum));
    }
    let [indices, values, shape] = sparse_sequences(&rows);
    Ok([indices, values, shape, tensor_of(vec![batch, 1], log_prob)].into_iter().collect())
}

// ---------------------------------------------------------------- CTCLoss

/// `ctc_loss_util.h`'s `LogSumExp`: the correction term in single precision (`expf`,
/// `log1pf`) whatever `T` is, as TensorFlow computes it.
fn log_sum_exp<T: Real>(a: T, b: T) -> T {
    if a == T::NEG_INF {
        return b;
    }
    if b == T::NEG_INF {
        return a;
    }
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    hi + T::from_f32((lo - hi).to_f32().exp().ln_1p())
}

/// `CTCLoss`'s attributes.
#[derive(Clone, Copy)]
struct LossAttrs {
    collapse_repeated: bool,
    merge_repeated: bool,
    ignore_longer: bool,
}

/// The label rows of a sparse `[batch, max_len]` tensor, validated as TensorFlow's
/// `SparseTensor::IndicesValid` does (in bounds, ordered, not repeated); the time column only
/// orders them.
fn label_rows(indices: &Tensor, values: &[i64], batch: usize) -> KResult<Vec<Vec<i64>>> {
    let idx = int_values(indices, "labels_indices")?;
    let n = values.len();
    let max_len = (0..n).map(|i| idx[2 * i + 1] + 1).max().unwrap_or(0);
    let invalid = |m: String| Err(KernelError::invalid(format!("label SparseTensor is not valid: {m}")));
    let mut rows = vec![Vec::new(); batch];
    for i in 0..n {
        let (b, t) = (idx[2 * i], idx[2 * i + 1]);
        let at = format!("indices[{i}] = [{b},{t}]");
        if b < 0 || b >= batch as i64 || t < 0 || t >= max_len {
            return invalid(format!("{at} is out of bounds: need 0 <= index < [{batch},{max_len}]"));
        }
        if i > 0 {
            let prev = (idx[2 * i - 2], idx[2 * i - 1]);
            if (b, t) < prev {
                return invalid(format!(
                    "{at} is out of order. Many sparse ops require sorted indices.\n    Use `tf.sparse.reorder` to create a correctly ordered copy.\n\n"
                ));
            }
            if (b, t) == prev {
                return invalid(format!("{at} is repeated"));
            }
        }
        rows[b as usize].push(values[i]);
    }
    Ok(rows)
}

fn join(v: &[i64]) -> String {
    v.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

/// `CTCLossCalculator::PopulateLPrimes`: the target sequence `l` of one batch entry's raw
/// labels (repeats collapsed when asked; a label ≥ the blank ends it), checked as TensorFlow
/// checks it.
fn target(label: &[i64], b: usize, classes: usize, attrs: LossAttrs, time: i64) -> KResult<Vec<i64>> {
    let bad = |m: String| Err(KernelError::invalid(m));
    if label.is_empty() {
        return bad(format!("Labels length is zero in batch {b}"));
    }
    let blank = classes as i64 - 1;
    let (mut l, mut finished) = (Vec::new(), false);
    for (i, &x) in label.iter().enumerate() {
        if i == 0 || !attrs.collapse_repeated || x != label[i - 1] {
            if x >= blank {
                finished = true;
            } else {
                if finished {
                    return bad(format!(
                        "Saw a non-null label (index >= num_classes - 1) following a null label, batch: {b} num_classes: {classes} labels: {} labels seen so far: {}",
                        join(label),
                        join(&l)
                    ));
                }
                l.push(x);
            }
        }
    }
    if l.iter().any(|&x| x < 0) {
        return bad(format!("All labels must be nonnegative integers, batch: {b} labels: {}", join(&l)));
    }
    if !attrs.ignore_longer && label.len() as i64 > time {
        return bad(format!(
            "Not enough time for target transition sequence (required: {}, available: {time}){b}You can turn this error into a warning by using the flag ignore_longer_outputs_than_inputs",
            label.len()
        ));
    }
    if l.is_empty() && time > 0 {
        // TensorFlow's kernel reads out of bounds here (its result is undefined).
        return bad(format!(
            "every label of batch {b} is the blank or past it ({}): no target sequence is left",
            join(label)
        ));
    }
    Ok(l)
}

/// One batch entry's loss and gradient (`CTCLossCalculator::CalculateLoss` for one item):
/// `x` is its `[time, classes]` logits (rows `stride` apart), `grad` its `[time, classes]`
/// gradient rows (zero on entry).
fn loss_one<T: Real>(x: &[T], stride: usize, time: usize, classes: usize, l: &[i64], merge: bool, grad: &mut [T]) -> T {
    let blank = classes - 1;
    // The softmax of each step, and its logarithm (a probability that underflows is -inf).
    let mut y = vec![T::ZERO; time * classes];
    for t in 0..time {
        let row = &x[t * stride..t * stride + classes];
        let m = row.iter().copied().fold(row[0], |a, b| if b > a { b } else { a });
        let mut sum = T::ZERO;
        for (c, &v) in row.iter().enumerate() {
            let e = (v - m).exp();
            y[t * classes + c] = e;
            sum = sum + e;
        }
        for c in 0..classes {
            y[t * classes + c] = y[t * classes + c] / sum;
        }
    }
    let logy: Vec<T> = y.iter().map(|&v| v.ln()).collect();
    // l' = blank, l0, blank, l1, …, blank.
    let mut lp = vec![blank; 2 * l.len() + 1];
    for (i, &c) in l.iter().enumerate() {
        lp[2 * i + 1] = c as usize;
    }
    let u_len = lp.len();
    let ly = |u: usize, t: usize| logy[t * classes + lp[u]];
    let range = |t: usize| {
        let lo = (u_len as i64 - 2 * (time - t) as i64).max(0) as usize;
        (lo, u_len.min(2 * (t + 1)))
    };
    let mut alpha = vec![T::NEG_INF; u_len * time];
    alpha[0] = ly(0, 0);
    alpha[time] = ly(1, 0);
    for t in 1..time {
        let (lo, hi) = range(t);
        for u in lo..hi {
            let a = |u: usize| alpha[u * time + t - 1];
            let mut s = if merge || lp[u] == blank { a(u) } else { T::NEG_INF };
            if u > 0 {
                s = log_sum_exp(s, a(u - 1));
            }
            if u > 1 && lp[u] != blank && !(merge && lp[u] == lp[u - 2]) {
                s = log_sum_exp(s, a(u - 2));
            }
            alpha[u * time + t] = ly(u, t) + s;
        }
    }
    let mut beta = vec![T::NEG_INF; u_len * time];
    beta[(u_len - 2) * time + time - 1] = T::ZERO;
    beta[(u_len - 1) * time + time - 1] = T::ZERO;
    for t in (0..time.saturating_sub(1)).rev() {
        let (lo, hi) = range(t);
        for u in lo..hi {
            let mut s = beta[u * time + t];
            if merge || lp[u] == blank {
                s = log_sum_exp(s, beta[u * time + t + 1] + ly(u, t + 1));
            }
            if u + 1 < u_len {
                s = log_sum_exp(s, beta[(u + 1) * time + t + 1] + ly(u + 1, t + 1));
            }
            if u + 2 < u_len && lp[u] != blank && !(merge && lp[u] == lp[u + 2]) {
                s = log_sum_exp(s, beta[(u + 2) * time + t + 1] + ly(u + 2, t + 1));
            }
            beta[u * time + t] = s;
        }
    }
    let mut logp = T::NEG_INF;
    for u in 0..u_len {
        logp = log_sum_exp(logp, alpha[u * time] + beta[u * time]);
    }
    for t in 0..time {
        let g = &mut grad[t * stride..t * stride + classes];
        if logp == T::NEG_INF {
            g.copy_from_slice(&y[t * classes..(t + 1) * classes]);
            continue;
        }
        let mut ps = vec![T::NEG_INF; classes];
        for u in 0..u_len {
            ps[lp[u]] = log_sum_exp(ps[lp[u]], alpha[u * time + t] + beta[u * time + t]);
        }
        for c in 0..classes {
            g[c] = y[t * classes + c] - T::from_f32((ps[c] - logp).to_f32().exp());
        }
    }
    -logp
}

/// `CTCLoss` (`ctc_loss_op.cc`): per batch entry, minus the log probability of its label
/// sequence under the softmax of time-major logits `[max_time, batch, classes]` (the blank
/// is the last class), by the forward–backward recursions in log space, and the gradient with
/// respect to the logits. Entries with no time (or too little, with
/// `ignore_longer_outputs_than_inputs`) have loss 0 and gradient 0.
fn ctc_loss<T: Real>(inp: &Inputs, attrs: LossAttrs) -> KResult<Outputs> {
    let (x, indices, values, lengths) = (&inp[0], &inp[1], &inp[2], &inp[3]);
    let bad = |m: String| Err(KernelError::invalid(m));
    let &[max_time, batch, classes] = x.shape.as_slice() else {
        return bad("inputs is not a 3-Tensor".into());
    };
    if lengths.rank() != 1 {
        return bad("sequence_length is not a vector".into());
    }
    if indices.rank() != 2 {
        return bad("labels_indices is not a matrix".into());
    }
    if indices.shape[1] <= 1 {
        return bad(format!("labels_indices second dimension must be >= 1. Received {}", indices.shape[1]));
    }
    if values.rank() != 1 {
        return bad("labels_values is not a vector".into());
    }
    if max_time == 0 {
        return bad("Max time or first dimension of input cannot be 0.".into());
    }
    let lengths = int_values(lengths, "sequence_length")?;
    if lengths.len() != batch {
        return bad(format!(
            "len(sequence_length) != batch_size.  len(sequence_length):  {} batch_size: {batch}",
            lengths.len()
        ));
    }
    let dims = |s: &[usize]| format!("[{}]", s.iter().map(usize::to_string).collect::<Vec<_>>().join(","));
    if indices.shape[0] != values.shape[0] {
        return bad(format!(
            "labels_indices and labels_values must contain the same number of rows, but saw shapes: {} vs. {}",
            dims(&indices.shape),
            dims(&values.shape)
        ));
    }
    if indices.shape[1] != 2 {
        return bad("Order length must be SparseTensor rank.".into());
    }
    if batch == 0 {
        return bad("batch_size must not be 0".into());
    }
    let labels = label_rows(indices, &int_values(values, "labels_values")?, batch)?;
    for (b, &len) in lengths.iter().enumerate() {
        if len > max_time as i64 {
            return bad(format!("sequence_length({b}) <= {max_time}"));
        }
    }
    for (b, &len) in lengths.iter().enumerate() {
        if len < 0 {
            return bad(format!("seq_len({b}) < 0"));
        }
    }
    let targets: Vec<Vec<i64>> = labels
        .iter()
        .enumerate()
        .map(|(b, label)| target(label, b, classes, attrs, lengths[b]))
        .collect::<KResult<_>>()?;
    let xs = T::slice(x);
    let mut loss = vec![T::ZERO; batch];
    let mut grad = vec![T::ZERO; max_time * batch * classes];
    let stride = batch * classes;
    for b in 0..batch {
        let time = lengths[b] as usize;
        if time == 0 || (attrs.ignore_longer && labels[b].len() > time) {
            continue;
        }
        loss[b] = loss_one(
            &xs[b * classes..],
            stride,
            time,
            classes,
            &targets[b],
            attrs.merge_repeated,
            &mut grad[b * classes..],
        );
    }
    Ok([tensor_of(vec![batch], loss), tensor_of(vec![max_time, batch, classes], grad)].into_iter().collect())
}

// ---------------------------------------------------------------- CTCBeamSearchDecoder

/// A prefix's log probabilities: ending in a blank, in its last label, and both.
#[derive(Clone, Copy, Debug)]
struct BeamProb<T> {
    total: T,
    blank: T,
    label: T,
}

impl<T: Real> BeamProb<T> {
    const NONE: BeamProb<T> = BeamProb { total: T::NEG_INF, blank: T::NEG_INF, label: T::NEG_INF };
}

/// A prefix in the beam's tree (`ctc_beam_entry.h`).
struct BeamEntry<T> {
    parent: Option<usize>,
    label: i64,
    children: Vec<(i64, usize)>,
    oldp: BeamProb<T>,
    newp: BeamProb<T>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum HeapState {
    Unordered,
    BottomKnown,
    HeapSorted,
}

/// `gtl::TopN<BeamEntry*, greater-by-total>`: at most `limit` entries, the comparisons
/// reading each entry's current total.
struct TopN {
    elements: Vec<usize>,
    limit: usize,
    state: HeapState,
}

impl TopN {
    fn new(limit: usize) -> TopN {
        TopN { elements: Vec::new(), limit, state: HeapState::Unordered }
    }

    fn size(&self) -> usize {
        self.elements.len().min(self.limit)
    }

    fn push(&mut self, v: usize, gt: &dyn Fn(usize, usize) -> bool) {
        if self.limit == 0 {
            return;
        }
        if self.state != HeapState::HeapSorted {
            self.elements.push(v);
            let last = self.elements.len() - 1;
            if self.state != HeapState::Unordered && !gt(self.elements[last], self.elements[0]) {
                self.elements.swap(0, last);
            }
            if self.elements.len() == self.limit + 1 {
                stl::make_heap(&mut self.elements, gt);
                stl::pop_heap(&mut self.elements, gt);
                self.state = HeapState::HeapSorted;
            }
        } else if gt(v, self.elements[0]) {
            *self.elements.last_mut().expect("a full heap") = v;
            stl::push_heap(&mut self.elements, gt);
            stl::pop_heap(&mut self.elements, gt);
        }
    }

    fn peek_bottom(&mut self, gt: &dyn Fn(usize, usize) -> bool) -> usize {
        if self.state == HeapState::Unordered {
            let mut mi = 0;
            for i in 1..self.elements.len() {
                if gt(self.elements[mi], self.elements[i]) {
                    mi = i;
                }
            }
            self.elements.swap(0, mi);
            self.state = HeapState::BottomKnown;
        }
        self.elements[0]
    }

    /// The entries, most probable first; the container is left empty.
    fn extract(&mut self, gt: &dyn Fn(usize, usize) -> bool) -> Vec<usize> {
        let mut out = std::mem::take(&mut self.elements);
        if self.state == HeapState::HeapSorted {
            out.pop();
            stl::sort_heap(&mut out, gt);
        } else {
            stl::sort(&mut out, gt);
        }
        self.state = HeapState::Unordered;
        out
    }
}

/// The beam's order: `a` before `b` when its current total is greater.
fn by_total<T: Real>(entries: &[BeamEntry<T>]) -> impl Fn(usize, usize) -> bool + '_ {
    move |a, b| entries[a].newp.total > entries[b].newp.total
}

/// One batch entry's beam search (`CTCBeamSearchDecoder<T>` with the default scorer and no
/// label selection): the `top_paths` best prefixes and their log probabilities.
struct BeamSearch<T> {
    entries: Vec<BeamEntry<T>>,
    leaves: TopN,
    width: usize,
    classes: usize,
}

impl<T: Real> BeamSearch<T> {
    fn new(width: usize, classes: usize) -> BeamSearch<T> {
        let root = BeamEntry {
            parent: None,
            label: -1,
            children: Vec::new(),
            oldp: BeamProb::NONE,
            newp: BeamProb { total: T::ZERO, blank: T::ZERO, label: T::NEG_INF },
        };
        let mut s = BeamSearch { entries: vec![root], leaves: TopN::new(width), width, classes };
        s.leaves.push(0, &by_total(&s.entries));
        s
    }

    fn active(&self, e: usize) -> bool {
        self.entries[e].newp.total != T::NEG_INF
    }

    fn child(&mut self, e: usize, label: i64) -> usize {
        if let Some(&(_, c)) = self.entries[e].children.iter().find(|(l, _)| *l == label) {
            return c;
        }
        let c = self.entries.len();
        self.entries.push(BeamEntry {
            parent: Some(e),
            label,
            children: Vec::new(),
            oldp: BeamProb::NONE,
            newp: BeamProb::NONE,
        });
        self.entries[e].children.push((label, c));
        c
    }

    /// Whether a prefix with probabilities `p` may enter the beam.
    fn candidate(&mut self, total: T) -> bool {
        if total == T::NEG_INF {
            return false;
        }
        if self.leaves.size() < self.width {
            return true;
        }
        let bottom = self.leaves.peek_bottom(&by_total(&self.entries));
        total > self.entries[bottom].newp.total
    }

    fn step(&mut self, x: &[T]) {
        let blank = self.classes - 1;
        let m = x.iter().copied().fold(x[0], |a, b| if b > a { b } else { a });
        let mut sum = T::ZERO;
        for &v in x {
            sum = sum + (v - m).exp();
        }
        let norm = m + sum.ln();
        let branches = self.leaves.extract(&by_total(&self.entries));
        for &e in &branches {
            self.entries[e].oldp = self.entries[e].newp;
        }
        // Existing prefixes go on, ending in a blank or repeating their last label.
        for &e in &branches {
            if let Some(p) = self.entries[e].parent {
                if self.active(p) {
                    let (pe, ee) = (&self.entries[p], &self.entries[e]);
                    let prev = if ee.label == pe.label { pe.oldp.blank } else { pe.oldp.total };
                    let l = log_sum_exp(ee.newp.label, prev);
                    self.entries[e].newp.label = l;
                }
                let label = self.entries[e].label as usize;
                let l = self.entries[e].newp.label + (x[label] - norm);
                self.entries[e].newp.label = l;
            }
            let en = &mut self.entries[e];
            en.newp.blank = (en.oldp.total + x[blank]) - norm;
            en.newp.total = log_sum_exp(en.newp.blank, en.newp.label);
            self.leaves.push(e, &by_total(&self.entries));
        }
        // New prefixes: each label appended to each prefix that was in the beam.
        for &e in &branches {
            if !self.candidate(self.entries[e].oldp.total) {
                continue;
            }
            for (label, &logit) in x[..blank].iter().enumerate() {
                let c = self.child(e, label as i64);
                if self.active(c) {
                    continue;
                }
                let ee = &self.entries[e];
                let prev = if label as i64 == ee.label { ee.oldp.blank } else { ee.oldp.total };
                let l = (logit - norm) + prev;
                let cn = &mut self.entries[c];
                cn.newp = BeamProb { total: l, blank: T::NEG_INF, label: l };
                if self.candidate(l) {
                    if self.leaves.size() == self.width {
                        let bottom = self.leaves.peek_bottom(&by_total(&self.entries));
                        self.entries[bottom].newp = BeamProb::NONE;
                    }
                    self.leaves.push(c, &by_total(&self.entries));
                } else {
                    self.entries[c].oldp = BeamProb::NONE;
                    self.entries[c].newp = BeamProb::NONE;
                }
            }
        }
    }

    /// The `n` best prefixes (labels, repeats merged when `merge`) and their log probabilities.
    fn top_paths(&mut self, n: usize, merge: bool) -> KResult<Vec<(Vec<i64>, T)>> {
        if n > self.width {
            return Err(KernelError::invalid("requested more paths than the beam width."));
        }
        if n > self.leaves.size() {
            return Err(KernelError::invalid("Less leaves in the beam search than requested."));
        }
        let gt = by_total(&self.entries);
        let mut best = TopN::new(n);
        for &e in &self.leaves.elements[..self.leaves.size()] {
            best.push(e, &gt);
        }
        Ok(best
            .extract(&gt)
            .into_iter()
            .map(|e| {
                let (mut labels, mut prev, mut at) = (Vec::new(), -1i64, e);
                while let Some(p) = self.entries[at].parent {
                    let l = self.entries[at].label;
                    if !merge || l != prev {
                        labels.push(l);
                    }
                    prev = l;
                    at = p;
                }
                labels.reverse();
                (labels, self.entries[e].newp.total)
            })
            .collect())
    }
}

/// `CTCBeamSearchDecoder` (`ctc_decoder_ops.cc`, `ctc_beam_search.h`).
fn beam_search<T: Real>(logits: &Tensor, lengths: &[i64], width: usize, top: usize, merge: bool) -> KResult<Outputs> {
    let [_, batch, classes] = check_decoder_inputs(logits, lengths)?;
    let x = T::slice(logits);
    let mut paths: Vec<Vec<Vec<i64>>> = vec![Vec::with_capacity(batch); top];
    let mut log_prob = Vec::with_capacity(batch * top);
    for (b, &len) in lengths.iter().enumerate() {
        let mut search = BeamSearch::<T>::new(width, classes);
        for t in 0..len.max(0) as usize {
            search.step(&x[(t * batch + b) * classes..(t * batch + b + 1) * classes]);
        }
        for (p, (labels, score)) in search.top_paths(top, merge)?.into_iter().enumerate() {
            paths[p].push(labels);
            log_prob.push(score);
        }
    }
    let mut out: Outputs = Default::default();
    let sparse: Vec<[Tensor; 3]> = paths.iter().map(|rows| sparse_sequences(rows)).collect();
    for k in 0..3 {
        for s in &sparse {
            out.push(s[k].clone());
        }
    }
    out.push(tensor_of(vec![batch, top], log_prob));
    Ok(out)
}

/// Decoded sequences (one per batch entry) as a sparse tensor: indices `[n, 2]`, values
/// `[n]`, dense shape `[batch, longest]`.
fn sparse_sequences(rows: &[Vec<i64>]) -> [Tensor; 3] {
    let (mut indices, mut values) = (Vec::new(), Vec::new());
    for (b, r) in rows.iter().enumerate() {
        for (i, &v) in r.iter().enumerate() {
            indices.extend([b as i64, i as i64]);
            values.push(v);
        }
    }
    let longest = rows.iter().map(Vec::len).max().unwrap_or(0) as i64;
    let n = values.len();
    [tensor_of(vec![n, 2], indices), tensor_of(vec![n], values), tensor_of(vec![2], vec![rows.len() as i64, longest])]
}

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    if node.op == "CTCBeamSearchDecoder" {
        let int = |k: &str| node.attr(k).and_then(AttrValue::as_int).unwrap_or(0);
        let (width, top) = (int("beam_width"), int("top_paths"));
        if width < 1 || top < 1 {
            return Err(KernelError::invalid(format!("beam_width ({width}) and top_paths ({top}) must be at least 1")));
        }
        let merge = node.attr("merge_repeated").and_then(AttrValue::as_bool).unwrap_or(true);
        return Ok(Some(Box::new(move |inp: Inputs| {
            arity(&inp, 2)?;
            if inp[1].rank() != 1 {
                return Err(KernelError::invalid("sequence_length is not a vector"));
            }
            let lengths = int_values(&inp[1], "sequence_length")?;
            match inp[0].dtype {
                autoclust_graph::DType::Float32 => {
                    beam_search::<f32>(&inp[0], &lengths, width as usize, top as usize, merge)
                }
                autoclust_graph::DType::Float64 => {
                    beam_search::<f64>(&inp[0], &lengths, width as usize, top as usize, merge)
                }
                d => Err(KernelError::DType(d)),
            }
        })));
    }
    if node.op == "CTCLoss" {
        let flag = |k: &str, d: bool| node.attr(k).and_then(AttrValue::as_bool).unwrap_or(d);
        let attrs = LossAttrs {
            collapse_repeated: flag("preprocess_collapse_repeated", false),
            merge_repeated: flag("ctc_merge_repeated", true),
            ignore_longer: flag("ignore_longer_outputs_than_inputs", false),
        };
        return Ok(Some(Box::new(move |inp: Inputs| {
            arity(&inp, 4)?;
            match inp[0].dtype {
                autoclust_graph::DType::Float32 => ctc_loss::<f32>(&inp, attrs),
                autoclust_graph::DType::Float64 => ctc_loss::<f64>(&inp, attrs),
                d => Err(KernelError::DType(d)),
            }
        })));
    }
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

    /// A decoder node run on `logits` and per-entry `lengths`.
    fn decoder_run(n: &Node, logits: Tensor, lengths: &[i32]) -> KResult<Outputs> {
        let f = prepare(n).unwrap().unwrap();
        f([logits, tensor_of(vec![lengths.len()], lengths.to_vec())].into_iter().collect())
    }

    fn decode(logits: &[f32], shape: [usize; 3], lengths: &[i32], merge: bool, blank: i64) -> KResult<Outputs> {
        let mut n = super::super::probe("CTCGreedyDecoder");
        n.attrs.insert("merge_repeated".into(), AttrValue::B(merge));
        n.attrs.insert("blank_index".into(), AttrValue::I(blank));
        decoder_run(&n, tensor_of(shape.to_vec(), logits.to_vec()), lengths)
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
        assert_eq!(e.to_string(), "sequence_length(0) <= 2");
        let e = decode(&[0.0; 6], [2, 1, 3], &[1, 1], true, -1).unwrap_err();
        assert!(e.to_string().contains("len(sequence_length)"), "{e}");
        let e = decode(&[0.0; 6], [2, 1, 3], &[1], true, 3).unwrap_err();
        assert!(e.to_string().contains("blank_index"), "{e}");
    }

    fn loss_node(merge: bool, collapse: bool, ignore: bool) -> Node {
        let mut n = super::super::probe("CTCLoss");
        n.attrs.insert("ctc_merge_repeated".into(), AttrValue::B(merge));
        n.attrs.insert("preprocess_collapse_repeated".into(), AttrValue::B(collapse));
        n.attrs.insert("ignore_longer_outputs_than_inputs".into(), AttrValue::B(ignore));
        n
    }

    /// Loss and gradient of `labels` (one row per batch entry) under `logits` `[t, b, c]`.
    fn loss64(n: &Node, logits: &[f64], shape: [usize; 3], labels: &[&[i32]], lengths: &[i32]) -> KResult<Outputs> {
        let (mut idx, mut vals) = (Vec::new(), Vec::new());
        for (b, row) in labels.iter().enumerate() {
            for (t, &v) in row.iter().enumerate() {
                idx.extend([b as i64, t as i64]);
                vals.push(v);
            }
        }
        let f = prepare(n).unwrap().unwrap();
        f([
            tensor_of(shape.to_vec(), logits.to_vec()),
            tensor_of(vec![vals.len(), 2], idx),
            tensor_of(vec![vals.len()], vals),
            tensor_of(vec![lengths.len()], lengths.to_vec()),
        ]
        .into_iter()
        .collect())
    }

    /// The probability of `label` by brute force: every alignment of `time` steps whose
    /// collapse (repeats merged when `merge`, then blanks dropped) is `label`.
    fn brute_force(probs: &[f64], time: usize, classes: usize, label: &[usize], merge: bool) -> f64 {
        let blank = classes - 1;
        let mut total = 0.0;
        for code in 0..classes.pow(time as u32) {
            let path: Vec<usize> = (0..time).map(|t| code / classes.pow(t as u32) % classes).collect();
            let mut out = Vec::new();
            let mut prev = None;
            for &c in &path {
                if c != blank && !(merge && prev == Some(c)) {
                    out.push(c);
                }
                prev = Some(c);
            }
            if out == label {
                total += path.iter().enumerate().map(|(t, &c)| probs[t * classes + c]).product::<f64>();
            }
        }
        total
    }

    /// Graves' thesis example (fig. 7.5): two steps, label `a`, p = 0.58.
    #[test]
    fn loss_and_gradient_of_a_two_step_example() {
        let probs = [0.3f64, 0.7, 0.4, 0.6];
        let logits: Vec<f64> = probs.iter().map(|p| p.ln()).collect();
        let out = loss64(&loss_node(true, false, false), &logits, [2, 1, 2], &[&[0]], &[2]).unwrap();
        let loss = out[0].as_f64().unwrap()[0];
        assert!((loss + 0.58f64.ln()).abs() < 1e-6, "{loss}");
        let g = out[1].as_f64().unwrap();
        // Step 0: a is on paths (a,a) and (a,-): 0.30 of 0.58.
        assert!((g[0] - (0.3 - 0.30 / 0.58)).abs() < 1e-6, "{g:?}");
        assert!((g[1] - (0.7 - 0.28 / 0.58)).abs() < 1e-6, "{g:?}");
    }

    /// Against brute force over every alignment, with and without merging repeats, and the
    /// gradient against central differences of the loss.
    #[test]
    fn loss_matches_every_alignment_and_gradient_matches_differences() {
        let (time, classes) = (5, 3);
        let mut seed = 7u64;
        let logits: Vec<f64> = (0..time * classes)
            .map(|_| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                ((seed >> 33) as f64 / (1u64 << 31) as f64) * 4.0 - 2.0
            })
            .collect();
        let probs: Vec<f64> = logits
            .chunks(classes)
            .flat_map(|r| {
                let s: f64 = r.iter().map(|x| x.exp()).sum();
                r.iter().map(move |x| x.exp() / s)
            })
            .collect();
        for merge in [true, false] {
            for label in [&[0i32][..], &[0, 1], &[1, 1], &[0, 1, 0]] {
                let n = loss_node(merge, false, false);
                let out = loss64(&n, &logits, [time, 1, classes], &[label], &[time as i32]).unwrap();
                let want: Vec<usize> = label.iter().map(|&x| x as usize).collect();
                let p = brute_force(&probs, time, classes, &want, merge);
                let loss = out[0].as_f64().unwrap()[0];
                assert!((loss + p.ln()).abs() < 1e-5, "merge {merge} {label:?}: {loss} vs {}", -p.ln());
                let g = out[1].as_f64().unwrap();
                for k in [0, 4, 7, 14] {
                    // Not smaller: `LogSumExp`'s single-precision term puts ~1e-7 of noise in the loss.
                    let h = 1e-3;
                    let mut up = logits.clone();
                    up[k] += h;
                    let mut down = logits.clone();
                    down[k] -= h;
                    let at = |x: &[f64]| {
                        loss64(&n, x, [time, 1, classes], &[label], &[time as i32]).unwrap()[0].as_f64().unwrap()[0]
                    };
                    let numeric = (at(&up) - at(&down)) / (2.0 * h);
                    assert!((g[k] - numeric).abs() < 5e-4, "merge {merge} {label:?} [{k}]: {} vs {numeric}", g[k]);
                }
            }
        }
    }

    #[test]
    fn short_sequences_and_bad_labels_as_tensorflow_treats_them() {
        let logits = [0.0f64; 2 * 2 * 3];
        let n = loss_node(true, false, false);
        let e = loss64(&n, &logits, [2, 2, 3], &[&[0, 1, 0], &[1]], &[2, 2]).unwrap_err().to_string();
        assert!(
            e.starts_with("Not enough time for target transition sequence (required: 3, available: 2)0You can"),
            "{e}"
        );
        // Ignored: loss 0 and gradient 0 for that entry; the other computed.
        let out = loss64(&loss_node(true, false, true), &logits, [2, 2, 3], &[&[0, 1, 0], &[1]], &[2, 2]).unwrap();
        assert_eq!(out[0].as_f64().unwrap()[0], 0.0);
        assert!(out[0].as_f64().unwrap()[1] > 0.0);
        assert!(out[1].as_f64().unwrap().chunks(3).step_by(2).all(|r| r == [0.0; 3]));
        // A length of 0 is too little time for any label, unless ignored: then loss 0.
        assert!(loss64(&n, &logits, [2, 2, 3], &[&[0], &[1]], &[0, 2]).is_err());
        let out = loss64(&loss_node(true, false, true), &logits, [2, 2, 3], &[&[0], &[1]], &[0, 2]).unwrap();
        assert_eq!(out[0].as_f64().unwrap()[0], 0.0);
        // A label at the blank ends the sequence; a real one after it is an error.
        let e = loss64(&n, &logits, [2, 2, 3], &[&[2, 0], &[1]], &[2, 2]).unwrap_err().to_string();
        assert!(e.contains("Saw a non-null label (index >= num_classes - 1) following a null label, batch: 0"), "{e}");
        assert!(loss64(&n, &logits, [2, 2, 3], &[&[0, 2], &[1]], &[2, 2]).is_ok());
        let e = loss64(&n, &logits, [2, 2, 3], &[&[0], &[]], &[2, 2]).unwrap_err().to_string();
        assert_eq!(e, "Labels length is zero in batch 1");
        let e = loss64(&n, &logits, [2, 2, 3], &[&[0], &[1]], &[3, 2]).unwrap_err().to_string();
        assert_eq!(e, "sequence_length(0) <= 2");
        // [1, 1] in 2 steps passes TensorFlow's check (raw length 2) but has no path: +inf, gradient = softmax.
        let out = loss64(&n, &logits, [2, 2, 3], &[&[1, 1], &[1]], &[2, 2]).unwrap();
        assert_eq!(out[0].as_f64().unwrap()[0], f64::INFINITY);
        assert!((out[1].as_f64().unwrap()[0] - 1.0 / 3.0).abs() < 1e-12);
    }

    fn beam64(
        logits: &[f64],
        shape: [usize; 3],
        lengths: &[i32],
        width: i64,
        top: i64,
        merge: bool,
    ) -> KResult<Outputs> {
        let mut n = super::super::probe("CTCBeamSearchDecoder");
        n.attrs.insert("beam_width".into(), AttrValue::I(width));
        n.attrs.insert("top_paths".into(), AttrValue::I(top));
        n.attrs.insert("merge_repeated".into(), AttrValue::B(merge));
        decoder_run(&n, tensor_of(shape.to_vec(), logits.to_vec()), lengths)
    }

    /// Graves' example again: the beam holds "a" (0.58) and "" (0.42).
    #[test]
    fn beam_search_of_a_two_step_example() {
        let logits: Vec<f64> = [0.3f64, 0.7, 0.4, 0.6].iter().map(|p| p.ln()).collect();
        let out = beam64(&logits, [2, 1, 2], &[2], 2, 2, true).unwrap();
        assert_eq!(out.len(), 7);
        assert_eq!(out[2].as_i64().unwrap(), &[0]); // path 0's values: "a"
        assert_eq!(out[3].as_i64().unwrap(), &[] as &[i64]); // path 1: ""
        assert_eq!(out[4].as_i64().unwrap(), &[1, 1]);
        assert_eq!(out[5].as_i64().unwrap(), &[1, 0]);
        let lp = out[6].as_f64().unwrap();
        assert!((lp[0] - 0.58f64.ln()).abs() < 1e-6 && (lp[1] - 0.42f64.ln()).abs() < 1e-6, "{lp:?}");
        let e = beam64(&logits, [2, 1, 2], &[2], 2, 3, true).unwrap_err().to_string();
        assert_eq!(e, "requested more paths than the beam width.");
        let e = beam64(&logits, [2, 1, 2], &[0], 2, 2, true).unwrap_err().to_string();
        assert_eq!(e, "Less leaves in the beam search than requested.");
    }

    /// A beam wide enough to hold every prefix is exact: its best paths are the most probable
    /// label sequences by brute force over every alignment, with their probabilities.
    #[test]
    fn a_wide_beam_finds_the_most_probable_sequences() {
        let (time, classes) = (4, 3);
        let mut seed = 99u64;
        let logits: Vec<f64> = (0..time * classes)
            .map(|_| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                ((seed >> 33) as f64 / (1u64 << 31) as f64) * 3.0
            })
            .collect();
        let probs: Vec<f64> = logits
            .chunks(classes)
            .flat_map(|r| {
                let s: f64 = r.iter().map(|x| x.exp()).sum();
                r.iter().map(move |x| x.exp() / s)
            })
            .collect();
        let mut sequences: Vec<(Vec<usize>, f64)> = Vec::new();
        for len in 0..=time {
            for code in 0..(classes - 1).pow(len as u32) {
                let l: Vec<usize> = (0..len).map(|i| code / (classes - 1).pow(i as u32) % (classes - 1)).collect();
                let p = brute_force(&probs, time, classes, &l, true);
                if p > 0.0 {
                    sequences.push((l, p));
                }
            }
        }
        sequences.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap());
        let out = beam64(&logits, [time, 1, classes], &[time as i32], 200, 4, false).unwrap();
        for (k, (l, p)) in sequences.iter().take(4).enumerate() {
            let got: Vec<usize> = out[4 + k].as_i64().unwrap().iter().map(|&x| x as usize).collect();
            assert_eq!(&got, l, "path {k}");
            assert!((out[12].as_f64().unwrap()[k] - p.ln()).abs() < 1e-5, "path {k}");
        }
    }
}
