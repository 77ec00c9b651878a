//! Reductions along axes: Sum/Mean/Max/Min/Prod of float32 (vectorised row folds, outer
//! axes reduced by adding whole rows, split over the team when large), float64 and integer
//! reductions, cumulative scans, `InTopK` and `L2Loss`'s sum.
//!
//! **Invariant:** a float32 reduction accumulates in f64 in a fixed order that depends only
//! on the shape and the axes (never on the thread count), so the interpreter's kernel and a
//! compiled cluster's call give the same bits.

use crate::layout::strides_of;

/// Reduction kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceKind {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
}

/// `Cumsum`/`Cumprod` of `x` viewed as `[outer, n, inner]`, along the `n` axis: each output
/// is `combine` of the running value and the element (`exclusive`: the running value before
/// it, starting from `identity`), walked backwards when `reverse`. Shared with the
/// interpreter's kernel, which passes its own element arithmetic.
#[allow(clippy::too_many_arguments)]
pub fn cumulative<T: Copy>(
    x: &[T],
    (outer, n, inner): (usize, usize, usize),
    identity: T,
    combine: impl Fn(T, T) -> T,
    exclusive: bool,
    reverse: bool,
) -> Vec<T> {
    let mut v = vec![identity; x.len()];
    if inner == 1 {
        for o in 0..outer {
            let mut acc = identity;
            for k in 0..n {
                let at = o * n + if reverse { n - 1 - k } else { k };
                let next = combine(acc, x[at]);
                v[at] = if exclusive { acc } else { next };
                acc = next;
            }
        }
        return v;
    }
    // A scan along an outer axis walks whole rows of `inner` elements (a row of running
    // values), not one strided column at a time; each element still combines in scan order.
    let mut acc = vec![identity; inner];
    for o in 0..outer {
        acc.fill(identity);
        for k in 0..n {
            let at = (o * n + if reverse { n - 1 - k } else { k }) * inner;
            let (src, dst) = (&x[at..at + inner], &mut v[at..at + inner]);
            for ((a, d), &e) in acc.iter_mut().zip(dst.iter_mut()).zip(src) {
                let next = combine(*a, e);
                *d = if exclusive { *a } else { next };
                *a = next;
            }
        }
    }
    v
}

/// The column sums of a row-major `[rows, cols]` matrix, added row by row with every
/// partial sum passed through `round`: TensorFlow's bfloat16 `BiasAddGrad` (NHWC), whose
/// CPU kernel keeps its accumulator in the element type (its `AccumulatorType` widens
/// float16 to float32, not bfloat16), so each addition rounds to bfloat16.
pub fn column_sums_rounded(x: &[f32], cols: usize, round: impl Fn(f32) -> f32) -> Vec<f32> {
    let mut acc = vec![0.0f32; cols];
    if cols == 0 {
        return acc;
    }
    for row in x.chunks_exact(cols) {
        for (a, &v) in acc.iter_mut().zip(row) {
            *a = round(*a + v);
        }
    }
    acc
}

/// TensorFlow's `InTopK`: whether each row's target class is among the `k` largest of its
/// `c` predictions (ties counted in the target's favour: only strictly larger predictions
/// push it out); false for a target out of range or a row with a non-finite prediction.
pub fn in_top_k(p: &[f32], c: usize, targets: &[i64], k: i64) -> Vec<bool> {
    targets
        .iter()
        .enumerate()
        .map(|(b, &t)| {
            let row = &p[b * c..(b + 1) * c];
            if t < 0 || t as usize >= c || !row[t as usize].is_finite() {
                return false;
            }
            let target = row[t as usize];
            let mut more = 0i64;
            for &x in row {
                if !x.is_finite() {
                    return false;
                }
                if x > target {
                    more += 1;
                    if more > k {
                        break;
                    }
                }
            }
            more < k
        })
        .collect()
}

/// Σx² in f64, in element order (`L2Loss`; the interpreter's kernel calls it too).
pub fn l2_sum(v: impl Iterator<Item = f64>) -> f64 {
    v.map(|x| x * x).sum()
}

/// `acc` combined with every element of a contiguous row, in f64 like [`reduce`]'s other paths,
/// with eight independent accumulators (a single serial chain is bound by the add latency:
/// ~4 cycles per element), combined at the end — a reassociation only, exact for Max/Min.
fn fold_row(acc: f64, row: &[f32], kind: ReduceKind) -> f64 {
    const LANES: usize = 8;
    let chunks = row.chunks_exact(LANES);
    let tail = chunks.remainder();
    match kind {
        ReduceKind::Sum | ReduceKind::Mean => {
            let mut a = [0.0f64; LANES];
            for c in chunks {
                for l in 0..LANES {
                    a[l] += c[l] as f64;
                }
            }
            let mut s = acc + a.iter().sum::<f64>();
            for &x in tail {
                s += x as f64;
            }
            s
        }
        ReduceKind::Prod => {
            let mut a = [1.0f64; LANES];
            for c in chunks {
                for l in 0..LANES {
                    a[l] *= c[l] as f64;
                }
            }
            let mut s = acc * a.iter().product::<f64>();
            for &x in tail {
                s *= x as f64;
            }
            s
        }
        ReduceKind::Max | ReduceKind::Min => {
            let max = kind == ReduceKind::Max;
            let pick = |a: f64, x: f64| {
                if a.is_nan() || x.is_nan() {
                    f64::NAN
                } else if max {
                    a.max(x)
                } else {
                    a.min(x)
                }
            };
            let mut a = [acc; LANES];
            for c in chunks {
                for l in 0..LANES {
                    a[l] = pick(a[l], c[l] as f64);
                }
            }
            let mut s = a.iter().fold(acc, |s, &x| pick(s, x));
            for &x in tail {
                s = pick(s, x as f64);
            }
            s
        }
    }
}

/// The identity of `kind`'s combine.
fn reduce_init(kind: ReduceKind) -> f64 {
    match kind {
        ReduceKind::Sum | ReduceKind::Mean => 0.0,
        ReduceKind::Prod => 1.0,
        ReduceKind::Max => f64::NEG_INFINITY,
        ReduceKind::Min => f64::INFINITY,
    }
}

/// `a` combined with `x` (NaN wins for Max/Min, as in TensorFlow).
#[inline(always)]
fn reduce_combine(kind: ReduceKind, a: f64, x: f64) -> f64 {
    match kind {
        ReduceKind::Sum | ReduceKind::Mean => a + x,
        ReduceKind::Prod => a * x,
        ReduceKind::Max => {
            if x.is_nan() || a.is_nan() {
                f64::NAN
            } else {
                a.max(x)
            }
        }
        ReduceKind::Min => {
            if x.is_nan() || a.is_nan() {
                f64::NAN
            } else {
                a.min(x)
            }
        }
    }
}

/// `acc[i] ⊕= row[i]`: one loop per kind, so that each vectorises (the kind is not
/// re-examined per element).
fn combine_rows(acc: &mut [f64], row: &[f32], kind: ReduceKind) {
    match kind {
        ReduceKind::Sum | ReduceKind::Mean => acc.iter_mut().zip(row).for_each(|(a, &x)| *a += x as f64),
        ReduceKind::Prod => acc.iter_mut().zip(row).for_each(|(a, &x)| *a *= x as f64),
        ReduceKind::Max => {
            acc.iter_mut().zip(row).for_each(|(a, &x)| *a = reduce_combine(ReduceKind::Max, *a, x as f64))
        }
        ReduceKind::Min => {
            acc.iter_mut().zip(row).for_each(|(a, &x)| *a = reduce_combine(ReduceKind::Min, *a, x as f64))
        }
    }
}

/// Elements below which a reduction runs on one thread.
const PARALLEL_REDUCE: usize = 1 << 16;

/// A float64 reduction over `axes` of `v` (of `shape`), each output element accumulated in
/// input order with TensorFlow's element arithmetic (`TfArith`: NaN-propagating max/min) —
/// the additions, products and comparisons the interpreter's float64 kernel makes, in the
/// same order, so the two agree bit for bit.
pub fn reduce_f64(v: &[f64], shape: &[usize], axes: &[usize], kind: ReduceKind) -> Vec<f64> {
    use autoclust_graph::arith::TfArith;
    let init = match kind {
        ReduceKind::Max => <f64 as TfArith>::lowest(),
        ReduceKind::Min => <f64 as TfArith>::highest(),
        ReduceKind::Prod => 1.0,
        ReduceKind::Sum | ReduceKind::Mean => 0.0,
    };
    let (mut out, count) = match kind {
        ReduceKind::Sum | ReduceKind::Mean => fold_in_order(v, shape, axes, init, |a, x| a + x),
        ReduceKind::Prod => fold_in_order(v, shape, axes, init, |a, x| a * x),
        ReduceKind::Max => fold_in_order(v, shape, axes, init, TfArith::maximum),
        ReduceKind::Min => fold_in_order(v, shape, axes, init, TfArith::minimum),
    };
    if kind == ReduceKind::Mean {
        let n = count as f64;
        for o in &mut out {
            *o /= n;
        }
    }
    out
}

/// An integer reduction of `v` (row-major `shape`) over `axes`, as the interpreter's kernels
/// compute it: sums and products wrap (in 32 bits when `bits32`), so their order never
/// matters; `Mean` is the wrapped sum divided by the count, truncated (0 over no element);
/// `Max`/`Min` of no element are the type's lowest/highest value.
pub fn reduce_int<T: Copy + Into<i64>>(
    v: &[T],
    shape: &[usize],
    axes: &[usize],
    kind: ReduceKind,
    bits32: bool,
) -> Vec<i64> {
    let (lowest, highest) = if bits32 { (i32::MIN as i64, i32::MAX as i64) } else { (i64::MIN, i64::MAX) };
    // One fold per kind (and width), so each inner loop is a plain integer loop.
    let (mut out, count) = match (kind, bits32) {
        (ReduceKind::Sum, true) => {
            let (o, c) = fold_in_order(v, shape, axes, 0i32, |a, x: T| a.wrapping_add(x.into() as i32));
            (o.into_iter().map(i64::from).collect(), c)
        }
        (ReduceKind::Prod, true) => {
            let (o, c) = fold_in_order(v, shape, axes, 1i32, |a, x: T| a.wrapping_mul(x.into() as i32));
            (o.into_iter().map(i64::from).collect(), c)
        }
        // A mean sums in 64 bits whatever the width (TensorFlow's `MeanReducer` casts int32 to
        // int64 first), so an int32 sum past 2³¹ still gives the exact mean.
        (ReduceKind::Sum | ReduceKind::Mean, _) => {
            fold_in_order(v, shape, axes, 0i64, |a, x: T| a.wrapping_add(x.into()))
        }
        (ReduceKind::Prod, false) => fold_in_order(v, shape, axes, 1i64, |a, x: T| a.wrapping_mul(x.into())),
        (ReduceKind::Max, _) => fold_in_order(v, shape, axes, lowest, |a, x: T| a.max(x.into())),
        (ReduceKind::Min, _) => fold_in_order(v, shape, axes, highest, |a, x: T| a.min(x.into())),
    };
    if kind == ReduceKind::Mean {
        let wrap = |x: i64| if bits32 { x as i32 as i64 } else { x };
        for o in &mut out {
            *o = if count == 0 { 0 } else { wrap(o.wrapping_div(count as i64)) };
        }
    }
    out
}

/// `Any` (`all` false) or `All` of a bool tensor over `axes`.
pub fn reduce_bool(v: &[bool], shape: &[usize], axes: &[usize], all: bool) -> Vec<bool> {
    if all {
        fold_in_order(v, shape, axes, true, |a, x| a & x).0
    } else {
        fold_in_order(v, shape, axes, false, |a, x| a | x).0
    }
}

/// Folds each element of `v` (row-major `shape`) into its output element (the `axes`
/// removed), in input order, from `init`; returns the outputs and how many inputs each has.
/// Reduced axes that form one run (`[outer, n, inner]` once adjacent dimensions of a kind
/// and unit dimensions are merged: a row sum, a column sum, a bias gradient) take a direct
/// loop — contiguous rows, or whole rows combined into a row of accumulators — and any
/// other pattern an index walk; the order in which each output meets its inputs is the
/// same either way.
fn fold_in_order<T: Copy, A: Copy>(
    v: &[T],
    shape: &[usize],
    axes: &[usize],
    init: A,
    f: impl Fn(A, T) -> A,
) -> (Vec<A>, usize) {
    let count: usize = axes.iter().map(|&a| shape[a]).product();
    let simple = match reduce_runs(shape, axes).as_slice() {
        [] => Some((1, 1, 1)),
        [(true, n)] => Some((1, *n, 1)),
        [(false, k)] => Some((*k, 1, 1)),
        [(false, k), (true, n)] => Some((*k, *n, 1)),
        [(true, n), (false, i)] => Some((1, *n, *i)),
        [(false, k), (true, n), (false, i)] => Some((*k, *n, *i)),
        _ => None,
    };
    if let Some((outer, n, inner)) = simple {
        let mut out = vec![init; outer * inner];
        if v.is_empty() {
            return (out, count);
        }
        if inner == 1 {
            for (o, row) in out.iter_mut().zip(v.chunks_exact(n.max(1))) {
                *o = row.iter().fold(*o, |a, &x| f(a, x));
            }
        } else {
            for (acc, block) in out.chunks_exact_mut(inner).zip(v.chunks_exact(n * inner)) {
                for row in block.chunks_exact(inner) {
                    for (a, &x) in acc.iter_mut().zip(row) {
                        *a = f(*a, x);
                    }
                }
            }
        }
        return (out, count);
    }
    let r = shape.len();
    let mut ostride = vec![0usize; r];
    let mut out_len = 1usize;
    for (d, (os, &n)) in ostride.iter_mut().zip(shape).enumerate().rev() {
        if !axes.contains(&d) {
            *os = out_len;
            out_len *= n;
        }
    }
    let mut out = vec![init; out_len];
    if v.is_empty() {
        return (out, count);
    }
    // Walk the leading dimensions; the last one is a tight loop with a fixed output stride.
    let last = shape[r - 1];
    let last_stride = ostride[r - 1];
    let mut idx = vec![0usize; r - 1];
    for row in v.chunks_exact(last) {
        let base: usize = idx.iter().zip(&ostride).map(|(i, s)| i * s).sum();
        for (j, &x) in row.iter().enumerate() {
            let o = base + j * last_stride;
            out[o] = f(out[o], x);
        }
        crate::layout::next_index(&mut idx, &shape[..r - 1]);
    }
    (out, count)
}

/// `shape` collapsed into runs of reduced (`true`) and kept dimensions with their element
/// counts, adjacent dimensions of a kind merged and size-1 dimensions dropped.
fn reduce_runs(shape: &[usize], axes: &[usize]) -> Vec<(bool, usize)> {
    let mut runs: Vec<(bool, usize)> = Vec::new();
    for (d, &n) in shape.iter().enumerate() {
        if n == 1 {
            continue;
        }
        let red = axes.contains(&d);
        match runs.last_mut() {
            Some((r, m)) if *r == red => *m *= n,
            _ => runs.push((red, n)),
        }
    }
    runs
}

/// Reduces `axes` of a row-major float32 tensor of `shape`, accumulating in f64.
///
/// The shape is first collapsed into alternating runs of kept and reduced dimensions
/// (size-1 dimensions dropped), then walked in memory order without any transpose: a
/// reduced innermost run folds each contiguous row with eight accumulators
/// ([`fold_row`]); a kept innermost run adds whole rows into the accumulators (the
/// bias-gradient and BatchNorm pattern, `[N·H·W, C] → [C]`). Large inputs are split over
/// the team along the outermost run: kept → disjoint output slices; reduced → one partial
/// accumulator per part, combined in part order (a reassociation of the sum only).
pub fn reduce(v: &[f32], shape: &[usize], axes: &[usize], kind: ReduceKind) -> Vec<f32> {
    // Collapse into runs of kept (K) / reduced (R) dimensions, dropping size-1 dims.
    let runs = reduce_runs(shape, axes);
    let reduced: usize = axes.iter().map(|&a| shape[a]).product();
    let out_len: usize = v
        .len()
        .checked_div(reduced)
        .unwrap_or_else(|| shape.iter().enumerate().filter(|(d, _)| !axes.contains(d)).map(|(_, &n)| n).product());
    if reduced == 1 {
        // Only size-1 axes reduced: a copy, as TensorFlow's reduction kernels special-case
        // it (−0.0 stays −0.0, where 0 + −0.0 would give +0.0).
        return v.to_vec();
    }
    let init = reduce_init(kind);
    let mut acc = vec![init; out_len];
    let parts = rayon::current_num_threads().min(runs.first().map_or(1, |r| r.1));
    if v.len() >= PARALLEL_REDUCE && parts > 1 && runs.len() > 1 {
        let (red0, n0) = runs[0];
        let inner: usize = runs[1..].iter().map(|r| r.1).product();
        let span = |p: usize| (p * n0 / parts, (p + 1) * n0 / parts);
        if !red0 {
            // Disjoint output slices: kept outer rows own their accumulators.
            let out_inner = out_len / n0;
            struct Out(*mut f64);
            // SAFETY: each part writes only its own rows of `acc`.
            unsafe impl Send for Out {}
            unsafe impl Sync for Out {}
            let out = Out(acc.as_mut_ptr());
            crate::team::run(parts, &|p| {
                let out = &out;
                let (r0, r1) = span(p);
                let mut sub = runs.clone();
                sub[0].1 = r1 - r0;
                // SAFETY: rows r0..r1 of the output, disjoint from every other part's.
                let a = unsafe { std::slice::from_raw_parts_mut(out.0.add(r0 * out_inner), (r1 - r0) * out_inner) };
                accumulate(&v[r0 * inner..r1 * inner], &sub, kind, a);
            });
        } else {
            let partial: Vec<std::sync::Mutex<Vec<f64>>> =
                (0..parts).map(|_| std::sync::Mutex::new(Vec::new())).collect();
            crate::team::run(parts, &|p| {
                let (r0, r1) = span(p);
                let mut sub = runs.clone();
                sub[0].1 = r1 - r0;
                let mut a = vec![init; out_len];
                accumulate(&v[r0 * inner..r1 * inner], &sub, kind, &mut a);
                *partial[p].lock().unwrap_or_else(|e| e.into_inner()) = a;
            });
            for part in partial {
                let part = part.into_inner().unwrap_or_else(|e| e.into_inner());
                for (a, x) in acc.iter_mut().zip(part) {
                    *a = reduce_combine(kind, *a, x);
                }
            }
        }
    } else {
        accumulate(v, &runs, kind, &mut acc);
    }
    match kind {
        ReduceKind::Mean => acc.into_iter().map(|a| (a / reduced as f64) as f32).collect(),
        _ => acc.into_iter().map(|a| a as f32).collect(),
    }
}

/// Folds `v` (collapsed into `runs`) into `acc` (one accumulator per kept element).
fn accumulate(v: &[f32], runs: &[(bool, usize)], kind: ReduceKind, acc: &mut [f64]) {
    if v.is_empty() {
        return; // Empty reductions keep the identity (TensorFlow: 0, 1, −inf, +inf; Mean NaN).
    }
    match runs {
        [] | [(false, _)] => {
            // Nothing reduced (or everything has size 1).
            for (a, &x) in acc.iter_mut().zip(v) {
                *a = reduce_combine(kind, *a, x as f64);
            }
        }
        [(true, _)] => acc[0] = fold_row(acc[0], v, kind),
        [(false, _), (true, inner)] => {
            // [K, R]: one contiguous row per output element.
            for (a, row) in acc.iter_mut().zip(v.chunks_exact(*inner)) {
                *a = fold_row(*a, row, kind);
            }
        }
        [(true, _), (false, inner)] => {
            // [R, K]: add whole rows.
            for row in v.chunks_exact(*inner) {
                combine_rows(acc, row, kind);
            }
        }
        _ => {
            // General case: walk the input, keeping the output offset in step.
            let dims: Vec<usize> = runs.iter().map(|r| r.1).collect();
            let kept_dims: Vec<usize> = runs.iter().filter(|r| !r.0).map(|r| r.1).collect();
            let kept_strides = strides_of(&kept_dims);
            let mut ostr = Vec::with_capacity(runs.len());
            let mut k = 0;
            for r in runs {
                if r.0 {
                    ostr.push(0usize);
                } else {
                    ostr.push(kept_strides[k]);
                    k += 1;
                }
            }
            let r = dims.len();
            let inner = dims[r - 1];
            let inner_reduced = runs[r - 1].0;
            let mut idx = vec![0usize; r];
            let mut obase = 0usize;
            let mut ibase = 0usize;
            'outer: loop {
                let row = &v[ibase..ibase + inner];
                if inner_reduced {
                    acc[obase] = fold_row(acc[obase], row, kind);
                } else {
                    combine_rows(&mut acc[obase..obase + inner], row, kind);
                }
                ibase += inner;
                let mut d = r - 1;
                loop {
                    if d == 0 {
                        break 'outer;
                    }
                    d -= 1;
                    idx[d] += 1;
                    obase += ostr[d];
                    if idx[d] < dims[d] {
                        break;
                    }
                    obase -= ostr[d] * dims[d];
                    idx[d] = 0;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::next_index;

    /// Integer reductions wrap at their width, except a mean, which TensorFlow sums in 64
    /// bits: int32 [2³¹ − 6, 2³¹ − 6, 2³¹ − 6, −7] sums to a wrapped 2³¹ − 25 but means 1610612729.
    #[test]
    fn int32_means_sum_in_64_bits() {
        let v = [2147483642i64, 2147483642, 2147483642, -7];
        assert_eq!(reduce_int(&v, &[4], &[0], ReduceKind::Sum, true), [2147483623]);
        assert_eq!(reduce_int(&v, &[4], &[0], ReduceKind::Mean, true), [1610612729]);
        assert_eq!(reduce_int(&[-7, 2], &[2], &[0], ReduceKind::Mean, true), [-2]);
    }

    /// The integer, float64 and bool reductions (direct loops for one reduced run, an index
    /// walk otherwise) give, for every axis subset of shapes with unit and empty dimensions,
    /// exactly what folding each element into its output by multi-index in input order gives.
    #[test]
    fn in_order_folds_match_the_definition_for_every_axis_subset() {
        for shape in [vec![3usize, 1, 4, 5], vec![6, 7, 9], vec![5, 0, 3], vec![2, 3, 1, 2, 3], vec![4], vec![]] {
            let n: usize = shape.iter().product();
            let ints: Vec<i64> = (0..n).map(|i| ((i as i64 * 7919) % 1013 - 500) * 4_000_000).collect();
            let floats: Vec<f64> = (0..n).map(|i| ((i * 7919 % 1013) as f64 - 500.0) / 3.0).collect();
            let bools: Vec<bool> = (0..n).map(|i| i % 3 == 0 || i % 7 == 1).collect();
            let r = shape.len();
            for bits in 0..(1u32 << r) {
                let axes: Vec<usize> = (0..r).filter(|&d| bits & (1 << d) != 0).collect();
                let out_len: usize = (0..r).filter(|d| !axes.contains(d)).map(|d| shape[d]).product();
                let def = |init: f64, f: &dyn Fn(f64, usize) -> f64| {
                    let mut want = vec![init; out_len];
                    let mut idx = vec![0usize; r];
                    for i in 0..n {
                        let o = (0..r).filter(|d| !axes.contains(d)).fold(0, |o, d| o * shape[d] + idx[d]);
                        want[o] = f(want[o], i);
                        next_index(&mut idx, &shape);
                    }
                    want
                };
                let at = format!("{shape:?} axes {axes:?}");
                let i32s: Vec<i32> = ints.iter().map(|&x| x as i32).collect();
                let sum32 = def(0.0, &|a, i| f64::from((a as i32).wrapping_add(i32s[i])));
                let got = reduce_int(&i32s[..], &shape, &axes, ReduceKind::Sum, true);
                assert_eq!(got, sum32.iter().map(|&x| x as i64).collect::<Vec<_>>(), "int32 sum {at}");
                let max = def(i64::MIN as f64, &|a, i| (a as i64).max(ints[i]) as f64);
                let got = reduce_int(&ints[..], &shape, &axes, ReduceKind::Max, false);
                assert_eq!(got, max.iter().map(|&x| x as i64).collect::<Vec<_>>(), "int64 max {at}");
                let sum = def(0.0, &|a, i| a + floats[i]);
                let got = reduce_f64(&floats, &shape, &axes, ReduceKind::Sum);
                assert_eq!(
                    got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    sum.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    "float64 sum in input order {at}"
                );
                let any = def(0.0, &|a, i| if a > 0.0 || bools[i] { 1.0 } else { 0.0 });
                let all = def(1.0, &|a, i| if a > 0.0 && bools[i] { 1.0 } else { 0.0 });
                assert_eq!(reduce_bool(&bools, &shape, &axes, false), any.iter().map(|&x| x > 0.0).collect::<Vec<_>>());
                assert_eq!(reduce_bool(&bools, &shape, &axes, true), all.iter().map(|&x| x > 0.0).collect::<Vec<_>>());
            }
        }
    }

    /// A scan along any axis (inner runs of 1 and of several elements), exclusive and/or
    /// reversed, equals the running value along each line, combined in scan order.
    #[test]
    fn cumulative_matches_a_line_by_line_scan() {
        for (outer, n, inner) in [(1usize, 5usize, 1usize), (3, 4, 1), (2, 5, 3), (1, 7, 16), (2, 0, 3), (3, 1, 2)] {
            let x: Vec<f32> = (0..outer * n * inner).map(|i| ((i * 37 % 11) as f32 - 5.0) * 0.3 + 0.1).collect();
            for (exclusive, reverse) in [(false, false), (true, false), (false, true), (true, true)] {
                let got = cumulative(&x, (outer, n, inner), 0.0f32, |a, b| a + b, exclusive, reverse);
                let mut want = vec![0.0f32; x.len()];
                for o in 0..outer {
                    for i in 0..inner {
                        let mut acc = 0.0f32;
                        let order: Vec<usize> = if reverse { (0..n).rev().collect() } else { (0..n).collect() };
                        for j in order {
                            let at = (o * n + j) * inner + i;
                            let next = acc + x[at];
                            want[at] = if exclusive { acc } else { next };
                            acc = next;
                        }
                    }
                }
                assert_eq!(
                    got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "{outer}x{n}x{inner} exclusive {exclusive} reverse {reverse}"
                );
            }
        }
    }

    /// The eight-lane row fold agrees with a serial fold: exactly for Max/Min (NaN anywhere
    /// gives NaN), to f64 rounding for Sum/Prod, at lengths around the lane count.
    #[test]
    fn fold_row_matches_a_serial_fold() {
        for n in [0usize, 1, 7, 8, 9, 15, 16, 17, 100, 1001] {
            let row: Vec<f32> = (0..n).map(|i| ((i * 37 % 11) as f32 - 5.0) * 0.25 + 0.01).collect();
            let serial = |init: f64, f: &dyn Fn(f64, f64) -> f64| row.iter().fold(init, |a, &x| f(a, x as f64));
            let sum = fold_row(1.5, &row, ReduceKind::Sum);
            assert!((sum - serial(1.5, &|a, x| a + x)).abs() < 1e-9, "sum n={n}");
            let short: Vec<f32> = row.iter().take(40).map(|x| 1.0 + x * 0.01).collect();
            let prod = fold_row(2.0, &short, ReduceKind::Prod);
            let want = short.iter().fold(2.0f64, |a, &x| a * x as f64);
            assert!((prod - want).abs() <= 1e-12 * want.abs(), "prod n={n}");
            assert_eq!(fold_row(f64::NEG_INFINITY, &row, ReduceKind::Max), serial(f64::NEG_INFINITY, &f64::max));
            assert_eq!(fold_row(f64::INFINITY, &row, ReduceKind::Min), serial(f64::INFINITY, &f64::min));
            if n > 0 {
                let mut with_nan = row.clone();
                with_nan[n / 2] = f32::NAN;
                assert!(fold_row(f64::NEG_INFINITY, &with_nan, ReduceKind::Max).is_nan(), "max n={n}");
                assert!(fold_row(f64::INFINITY, &with_nan, ReduceKind::Min).is_nan(), "min n={n}");
            }
        }
    }

    /// Every subset of axes of rank-3 and rank-4 tensors, small and above the parallel
    /// threshold (both splits: a kept and a reduced outermost run), every kind, against a
    /// serial f64 fold by multi-index.
    #[test]
    fn reduce_matches_the_definition_for_every_axis_subset() {
        // Reducing only size-1 axes is a copy (TensorFlow's special case): −0.0 survives.
        let neg_zero = reduce(&[-0.0, 2.0], &[1, 2], &[0], ReduceKind::Sum);
        assert_eq!(
            neg_zero.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            vec![(-0.0f32).to_bits(), 2.0f32.to_bits()]
        );
        for shape in [vec![3usize, 1, 4, 5], vec![64, 33, 40], vec![5, 0, 3], vec![70, 1000, 2]] {
            let n: usize = shape.iter().product();
            let v: Vec<f32> = (0..n).map(|i| ((i * 7919 % 1013) as f32 - 500.0) / 64.0).collect();
            let r = shape.len();
            for bits in 0..(1u32 << r) {
                let axes: Vec<usize> = (0..r).filter(|&d| bits & (1 << d) != 0).collect();
                let kept: Vec<usize> = (0..r).filter(|d| !axes.contains(d)).map(|d| shape[d]).collect();
                let out_len: usize = kept.iter().product();
                let count: usize = axes.iter().map(|&a| shape[a]).product();
                for kind in [ReduceKind::Sum, ReduceKind::Mean, ReduceKind::Max, ReduceKind::Min, ReduceKind::Prod] {
                    if kind == ReduceKind::Prod && n > 1000 {
                        continue; // products of thousands of terms over/underflow either way
                    }
                    let mut want = vec![reduce_init(kind); out_len];
                    let mut idx = vec![0usize; r];
                    for &x in &v {
                        let o = (0..r).filter(|d| !axes.contains(d)).fold(0, |o, d| o * shape[d] + idx[d]);
                        want[o] = reduce_combine(kind, want[o], x as f64);
                        next_index(&mut idx, &shape);
                    }
                    let want: Vec<f32> = want
                        .into_iter()
                        .map(|a| if kind == ReduceKind::Mean { (a / count as f64) as f32 } else { a as f32 })
                        .collect();
                    let got = reduce(&v, &shape, &axes, kind);
                    assert_eq!(got.len(), want.len(), "{shape:?} {axes:?} {kind:?}");
                    for (g, w) in got.iter().zip(&want) {
                        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= 1e-6 * w.abs().max(1.0);
                        assert!(ok, "{shape:?} axes {axes:?} {kind:?}: {g} vs {w}");
                    }
                }
            }
        }
    }
}
