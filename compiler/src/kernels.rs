//! Library kernels: the non-elementwise ops a compiled cluster calls once per op.
//!
//! Every kernel takes its parameters resolved at compile time (axes, permutations, slice
//! bounds are constants by then) and its runtime tensors, and returns fresh tensors. The
//! same code folds constants during analysis, so compile-time and run-time results agree.
//! Data movement is dtype-generic (a strided copy covers Transpose, Slice, StridedSlice
//! and BroadcastTo); numeric kernels are float32.

use std::sync::Arc;

use autoclust_graph::{DType, Tensor, TensorData};

/// Reduction kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceKind {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
}

/// A non-elementwise op with its compile-time parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum KernelOp {
    /// Reduce `axes` (sorted, unique) of the input; output shape is the kept dims.
    Reduce { kind: ReduceKind, axes: Vec<usize> },
    /// `Any` (`all` false) or `All` of a bool tensor over `axes` (sorted, unique).
    BoolReduce { all: bool, axes: Vec<usize> },
    /// Softmax or LogSoftmax over the last axis.
    Softmax { log: bool },
    /// SoftmaxCrossEntropyWithLogits: (logits `[B,C]`, labels `[B,C]`) → (loss `[B]`, backprop `[B,C]`).
    SoftmaxXent,
    /// SparseSoftmaxCrossEntropyWithLogits: (logits `[B,C]`, labels `[B]` int) → (loss, backprop).
    SparseSoftmaxXent,
    /// `out[i] = in[offset + Σ i_d·strides_d]` over `dims` (Transpose, Slice, StridedSlice, BroadcastTo).
    Strided { dims: Vec<usize>, strides: Vec<isize>, offset: isize },
    /// The inverse of [`KernelOp::Strided`] (`StridedSliceGrad`): an output of zeros (its
    /// analysed shape) with input element `i` written at `offset + Σ i_d·strides_d`.
    StridedScatter { dims: Vec<usize>, strides: Vec<isize>, offset: isize },
    /// ConcatV2 along `axis` (all inputs data; the axis operand is dropped at compile time).
    Concat { axis: usize },
    /// Pack along `axis`.
    Pack { axis: usize },
    /// Split (SplitV) along `axis` into consecutive pieces of `sizes` (one output each).
    Split { axis: usize, sizes: Vec<usize> },
    /// ArgMax/ArgMin of float32 along `axis` (the first index of the extreme; a NaN never
    /// replaces the running best, as TensorFlow's CPU kernel), as int32 or int64 `out`.
    ArgExtreme { axis: usize, min: bool, out: DType },
    /// `UnsortedSegmentSum(data, segment_ids, num_segments)`: rows of `data`
    /// (its trailing `inner` elements after the ids' dimensions) summed into
    /// `num` segments; negative ids drop their rows, as in TensorFlow.
    SegmentSum { num: usize, inner: usize },
    /// GatherV2: (params, indices) along `axis`, the first `batch_dims`
    /// dimensions shared by params and indices (gathered batch by batch).
    Gather { axis: usize, batch_dims: usize },
    /// TensorScatter{Add,Sub,Update,Max,Min}: (tensor, indices `[..., K]`, updates) — a copy
    /// of `tensor` with each indexed slice `tensor[i_0..i_K-1, ...]` combined with its update.
    Scatter { kind: ScatterKind },
    /// Einsum of one or two operands (see [`crate::einsum`]).
    Einsum { equation: autoclust_graph::einsum::Equation },
    /// A 2-D NHWC convolution or one of its gradients (see [`crate::conv`]); the data
    /// operands only: (input, filter), (filter, dy) or (input, dy).
    Conv { kind: ConvKind, shape: crate::conv::ConvShape },
    /// A 2-D NHWC pooling op or its gradient (see [`crate::pool`]); data operands: (input),
    /// (input, dy) for `MaxPoolGrad`, (dy) for `AvgPoolGrad`.
    Pool { kind: PoolKind, shape: crate::pool::PoolShape },
    /// `FusedBatchNorm*` (x, scale, offset, mean, variance → y, batch mean and variance, two
    /// reserve spaces, and for V3 an empty third) or `FusedBatchNormGrad*` (dy, x, scale,
    /// reserved mean and variance → dx, scale and offset gradients, two empty outputs), over
    /// the last (channel) axis of x (see [`crate::batchnorm`]).
    BatchNorm { attrs: crate::batchnorm::BnAttrs, grad: bool },
    /// `Cumsum`/`Cumprod` along the middle axis of `[outer, n, inner]` (see [`cumulative`]).
    Cumulative { prod: bool, exclusive: bool, reverse: bool, outer: usize, n: usize, inner: usize },
    /// A stateless random sampler (see [`crate::random`]): `dist` (`None`: uniform
    /// integers) from a seed (`v2` false: data operands seed, and for integers minval and
    /// maxval) or a key, counter and algorithm (`v2`: key, counter, alg, minval, maxval).
    StatelessRandom { dist: Option<crate::random::Dist>, v2: bool, dtype: DType },
    /// `StatelessRandomGetKeyCounter`: (seed) → (key uint64 `[1]`, counter uint64 `[2]`).
    KeyCounter,
    /// The division-like binary ops with TensorFlow's element arithmetic
    /// (`autoclust_graph::arith`, the interpreter's), operands broadcast to the output shape;
    /// an integer zero divisor is an error, as in TensorFlow's CPU kernels.
    Modular { kind: ModularKind },
    /// `SpaceToBatchND` / `BatchToSpaceND` (see [`crate::reshuffle`]).
    SpaceBatch(crate::reshuffle::SpaceBatch),
    /// `ResizeBilinear` of float32 NHWC images to `out_hw`, or (`grad`) `ResizeBilinearGrad`
    /// of float32 gradients onto `out_hw` (see [`crate::resize`]).
    ResizeBilinear { attrs: crate::resize::Resize, grad: bool, out_hw: (usize, usize) },
    /// `ResizeNearestNeighbor` (any dtype) or (`grad`) `ResizeNearestNeighborGrad` (float32) to `out_hw`.
    ResizeNearest { attrs: crate::resize::Resize, grad: bool, out_hw: (usize, usize) },
    /// `InTopKV2`/`InTopK` with a compile-time `k`: (predictions `[B, C]` float32, targets `[B]`) → bool `[B]`.
    InTopK { k: i64 },
    /// `L2Loss`: Σx²/2 of a float tensor, summed in f64 in element order (the interpreter's
    /// kernel, so both modes agree bit for bit).
    L2Loss,
    /// `Bitcast` to `to` (the same bytes as another type).
    Bitcast { to: DType },
    /// An integer bitwise binary op, operands broadcast to the output shape.
    Bitwise { kind: crate::reshuffle::BitwiseKind },
    /// A functional `While` whose condition and body are compiled ([`crate::control_flow`]):
    /// operands and results are the loop-carried values.
    While(crate::control_flow::LoopRef),
    /// A functional `If` whose branches are compiled ([`crate::control_flow`]): operand 0
    /// the predicate, the rest the branch's arguments.
    If(crate::control_flow::BranchesRef),
    /// A functional `Case` whose branches are compiled: operand 0 the branch index.
    Case(crate::control_flow::BranchesRef),
    /// An op run by the runtime's kernel, its outputs checked against their analysed
    /// types ([`crate::host`]): the TensorList ops.
    Host(crate::host::HostStep),
}

/// Which division-like op a [`KernelOp::Modular`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModularKind {
    FloorDiv,
    FloorMod,
    /// `TruncateDiv` (and integer `Div`): truncating for integers, `/` for floats.
    TruncateDiv,
    /// `TruncateMod` and `Mod`: C's `%` / `fmod`.
    TruncateMod,
}

impl ModularKind {
    /// The kind for a TensorFlow op name.
    pub fn from_tf(op: &str) -> Option<ModularKind> {
        Some(match op {
            "FloorDiv" => ModularKind::FloorDiv,
            "FloorMod" => ModularKind::FloorMod,
            "TruncateDiv" => ModularKind::TruncateDiv,
            "TruncateMod" | "Mod" => ModularKind::TruncateMod,
            _ => return None,
        })
    }

    /// One element, by TensorFlow's arithmetic (the caller rules out integer zero divisors).
    pub fn apply<T: autoclust_graph::arith::TfArith>(self, a: T, b: T) -> T {
        match self {
            ModularKind::FloorDiv => a.floordiv(b),
            ModularKind::FloorMod => a.floormod(b),
            ModularKind::TruncateDiv => a.div(b),
            ModularKind::TruncateMod => a.truncmod(b),
        }
    }
}

/// `f(a[i], b[j])` over `out` (row-major), `a` and `b` broadcast to it (shapes aligned at
/// the right; a size-1 or missing dimension repeats).
pub fn broadcast_binary<T: Copy>(
    a: &[T],
    a_shape: &[usize],
    b: &[T],
    b_shape: &[usize],
    out: &[usize],
    f: impl Fn(T, T) -> T,
) -> Vec<T> {
    let strides = |shape: &[usize]| -> Vec<usize> {
        let lead = out.len() - shape.len();
        let mut st = vec![0usize; out.len()];
        let mut acc = 1;
        for d in (0..shape.len()).rev() {
            if shape[d] != 1 {
                st[lead + d] = acc;
            }
            acc *= shape[d];
        }
        st
    };
    let (sa, sb) = (strides(a_shape), strides(b_shape));
    let n: usize = out.iter().product();
    let mut v = Vec::with_capacity(n);
    let mut idx = vec![0usize; out.len()];
    let (mut ia, mut ib) = (0usize, 0usize);
    for _ in 0..n {
        v.push(f(a[ia], b[ib]));
        for d in (0..out.len()).rev() {
            idx[d] += 1;
            ia += sa[d];
            ib += sb[d];
            if idx[d] < out[d] {
                break;
            }
            ia -= sa[d] * out[d];
            ib -= sb[d] * out[d];
            idx[d] = 0;
        }
    }
    v
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
    for o in 0..outer {
        for i in 0..inner {
            let mut acc = identity;
            for k in 0..n {
                let j = if reverse { n - 1 - k } else { k };
                let at = (o * n + j) * inner + i;
                let next = combine(acc, x[at]);
                v[at] = if exclusive { acc } else { next };
                acc = next;
            }
        }
    }
    v
}

/// Which pooling a [`KernelOp::Pool`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolKind {
    Max,
    MaxGrad,
    Avg,
    AvgGrad,
}

/// Which convolution a [`KernelOp::Conv`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvKind {
    Forward,
    BackpropInput,
    BackpropFilter,
    /// `DepthwiseConv2dNative` and its gradients (filter `[KH,KW,C,M]`).
    Depthwise,
    DepthwiseBackpropInput,
    DepthwiseBackpropFilter,
}

/// How a TensorScatter op combines an update with the existing slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScatterKind {
    /// Duplicate indices accumulate.
    Add,
    /// Duplicate indices accumulate (subtracting).
    Sub,
    /// Overwrite; with duplicate indices the last update in index order wins.
    Update,
    /// `x < u ? u : x` (Eigen's `cwiseMax`, as TensorFlow's CPU kernel).
    Max,
    /// `u < x ? u : x`.
    Min,
}

impl ScatterKind {
    /// The kind for a TensorFlow op name.
    pub fn from_tf(op: &str) -> Option<ScatterKind> {
        Some(match op {
            "TensorScatterAdd" => ScatterKind::Add,
            "TensorScatterSub" => ScatterKind::Sub,
            "TensorScatterUpdate" => ScatterKind::Update,
            "TensorScatterMax" => ScatterKind::Max,
            "TensorScatterMin" => ScatterKind::Min,
            _ => return None,
        })
    }
}

/// Element types a scatter can combine.
trait ScatterElem: Copy + PartialOrd {
    fn combine(kind: ScatterKind, x: Self, u: Self) -> Self;
}

macro_rules! scatter_elem {
    ($($t:ty),*) => {$(
        impl ScatterElem for $t {
            fn combine(kind: ScatterKind, x: $t, u: $t) -> $t {
                match kind {
                    ScatterKind::Add => x + u,
                    ScatterKind::Sub => x - u,
                    ScatterKind::Update => u,
                    ScatterKind::Max => if x < u { u } else { x },
                    ScatterKind::Min => if u < x { u } else { x },
                }
            }
        }
    )*};
}
scatter_elem!(f32, f64);

macro_rules! scatter_int_elem {
    ($($t:ty),*) => {$(
        impl ScatterElem for $t {
            fn combine(kind: ScatterKind, x: $t, u: $t) -> $t {
                // Integer scatters wrap like TensorFlow's (two's-complement) kernels.
                match kind {
                    ScatterKind::Add => x.wrapping_add(u),
                    ScatterKind::Sub => x.wrapping_sub(u),
                    ScatterKind::Update => u,
                    ScatterKind::Max => x.max(u),
                    ScatterKind::Min => x.min(u),
                }
            }
        }
    )*};
}
scatter_int_elem!(i32, i64);

/// Scatters `updates` (`offsets.len()` slices of `slice` elements each) into a copy of `x`.
fn scatter<T: ScatterElem>(x: &[T], updates: &[T], offsets: &[usize], slice: usize, kind: ScatterKind) -> Vec<T> {
    let mut out = x.to_vec();
    scatter_in_place(&mut out, updates, offsets, slice, kind);
    out
}

/// Element offsets of the slices `indices` (`[..., K]`, row-major) addresses in `shape`,
/// checking every index like TensorFlow does.
fn scatter_offsets(shape: &[usize], idx: &[i64], depth: usize) -> Result<Vec<usize>, String> {
    let st = strides_of(shape);
    if depth == 0 {
        return Err(err("indices must have a non-empty last dimension"));
    }
    idx.chunks(depth)
        .map(|ix| {
            let mut o = 0usize;
            for (d, &i) in ix.iter().enumerate() {
                if i < 0 || i as usize >= shape[d] {
                    return Err(err(format!("indices {ix:?} do not index into shape {shape:?}")));
                }
                o += i as usize * st[d];
            }
            Ok(o)
        })
        .collect()
}

/// Row-major strides (in elements) of a shape.
pub fn strides_of(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Advances a row-major multi-index over `shape` by one element (wrapping to all zeros after
/// the last).
pub fn next_index(idx: &mut [usize], shape: &[usize]) {
    for d in (0..idx.len()).rev() {
        idx[d] += 1;
        if idx[d] < shape[d] {
            return;
        }
        idx[d] = 0;
    }
}

fn err(reason: impl Into<String>) -> String {
    reason.into()
}

fn f32_of(t: &Tensor) -> Result<&[f32], String> {
    t.as_f32().ok_or_else(|| err(format!("expected float32, got {}", t.dtype)))
}

fn tensor_f32(shape: Vec<usize>, v: Vec<f32>) -> Tensor {
    Tensor { dtype: DType::Float32, shape, data: TensorData::F32(Arc::new(v)) }
}

/// Applies `$f` (a generic fn over `&[T] -> Vec<T>`) to whichever typed buffer `$t` holds.
macro_rules! map_data {
    ($t:expr, $f:expr) => {
        match &$t.data {
            TensorData::F32(v) => TensorData::F32(Arc::new($f(&v[..]))),
            TensorData::F64(v) => TensorData::F64(Arc::new($f(&v[..]))),
            TensorData::I32(v) => TensorData::I32(Arc::new($f(&v[..]))),
            TensorData::I64(v) => TensorData::I64(Arc::new($f(&v[..]))),
            TensorData::Bool(v) => TensorData::Bool(Arc::new($f(&v[..]))),
            _ => return Err(err(format!("dtype {} is not supported here", $t.dtype))),
        }
    };
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

/// Rows `[start, start + len)` of each of the `outer` rows of `row` elements.
fn split_piece<T: Copy>(v: &[T], outer: usize, row: usize, start: usize, len: usize) -> Vec<T> {
    let mut o = Vec::with_capacity(outer * len);
    for r in 0..outer {
        o.extend_from_slice(&v[r * row + start..][..len]);
    }
    o
}

impl KernelOp {
    /// Whether the kernel cannot fail on the dtypes and shapes it was compiled for (the
    /// others reject index, label or segment values out of range, or an empty axis).
    pub fn infallible(&self) -> bool {
        matches!(
            self,
            KernelOp::Reduce { .. }
                | KernelOp::Softmax { .. }
                | KernelOp::SoftmaxXent
                | KernelOp::Strided { .. }
                | KernelOp::Concat { .. }
                | KernelOp::Pack { .. }
                | KernelOp::Einsum { .. }
                | KernelOp::SpaceBatch(_)
                | KernelOp::L2Loss
                | KernelOp::InTopK { .. }
                | KernelOp::ResizeBilinear { .. }
                | KernelOp::ResizeNearest { .. }
                | KernelOp::Bitcast { .. }
                | KernelOp::Bitwise { .. }
        )
    }

    /// Runs the kernel; `out_shapes` are the analysed output shapes.
    pub fn run(&self, inputs: &[&Tensor], out_shapes: &[Vec<usize>]) -> Result<Vec<Tensor>, String> {
        match self {
            KernelOp::While(l) => l.0.run(inputs),
            KernelOp::If(b) | KernelOp::Case(b) => b.0.run(inputs),
            KernelOp::Host(h) => h.run(inputs, out_shapes),
            KernelOp::Reduce { kind, axes } => {
                let x = inputs[0];
                let shape = out_shapes[0].clone();
                match &x.data {
                    TensorData::I32(v) => {
                        let v: Vec<i64> = v.iter().map(|&e| i64::from(e)).collect();
                        let r = reduce_int(&v, &x.shape, axes, *kind, true);
                        let data = TensorData::I32(Arc::new(r.into_iter().map(|e| e as i32).collect()));
                        Ok(vec![Tensor { dtype: DType::Int32, shape, data }])
                    }
                    TensorData::I64(v) => {
                        let data = TensorData::I64(Arc::new(reduce_int(v, &x.shape, axes, *kind, false)));
                        Ok(vec![Tensor { dtype: DType::Int64, shape, data }])
                    }
                    TensorData::F64(v) => {
                        let data = TensorData::F64(Arc::new(reduce_f64(v, &x.shape, axes, *kind)));
                        Ok(vec![Tensor { dtype: DType::Float64, shape, data }])
                    }
                    _ => Ok(vec![tensor_f32(shape, reduce(f32_of(x)?, &x.shape, axes, *kind))]),
                }
            }
            KernelOp::BoolReduce { all, axes } => {
                let x = inputs[0];
                let TensorData::Bool(b) = &x.data else { return Err(err(format!("{} is not bool", x.dtype))) };
                let v: Vec<f32> = b.iter().map(|&t| if t { 1.0 } else { 0.0 }).collect();
                let kind = if *all { ReduceKind::Min } else { ReduceKind::Max };
                let r = reduce(&v, &x.shape, axes, kind);
                let data = TensorData::Bool(Arc::new(r.iter().map(|&m| m > 0.5).collect()));
                Ok(vec![Tensor { dtype: DType::Bool, shape: out_shapes[0].clone(), data }])
            }
            KernelOp::Softmax { log } => {
                let x = inputs[0];
                let v = f32_of(x)?;
                let c = *x.shape.last().unwrap_or(&1);
                let mut out = vec![0f32; v.len()];
                if c > 0 {
                    for (row, o) in v.chunks(c).zip(out.chunks_mut(c)) {
                        softmax_row(row, o, *log);
                    }
                }
                Ok(vec![tensor_f32(x.shape.clone(), out)])
            }
            KernelOp::SoftmaxXent => {
                let (logits, labels) = (f32_of(inputs[0])?, f32_of(inputs[1])?);
                let shape = &inputs[0].shape;
                let (b, c) = (shape[0], shape[1]);
                let mut loss = vec![0f32; b];
                let mut back = vec![0f32; b * c];
                for r in 0..b {
                    let row = &logits[r * c..(r + 1) * c];
                    let lab = &labels[r * c..(r + 1) * c];
                    let o = &mut back[r * c..(r + 1) * c];
                    softmax_row(row, o, true);
                    let mut l = 0f32;
                    for k in 0..c {
                        let logp = o[k];
                        if lab[k] != 0.0 {
                            l -= lab[k] * logp;
                        }
                        o[k] = logp.exp() - lab[k];
                    }
                    loss[r] = l;
                }
                Ok(vec![tensor_f32(vec![b], loss), tensor_f32(vec![b, c], back)])
            }
            KernelOp::SparseSoftmaxXent => {
                let logits = f32_of(inputs[0])?;
                let labels = inputs[1].to_i64_vec().ok_or_else(|| err("labels must be int32 or int64"))?;
                let shape = &inputs[0].shape;
                let (b, c) = (shape[0], shape[1]);
                let mut loss = vec![0f32; b];
                let mut back = vec![0f32; b * c];
                for r in 0..b {
                    let row = &logits[r * c..(r + 1) * c];
                    let o = &mut back[r * c..(r + 1) * c];
                    let label = labels[r];
                    if label < 0 || label as usize >= c {
                        // TensorFlow's CPU kernel reports this as an error; so do we.
                        return Err(err(format!("label {label} is not in [0, {c})")));
                    }
                    softmax_row(row, o, true);
                    loss[r] = -o[label as usize];
                    for (k, x) in o.iter_mut().enumerate() {
                        *x = x.exp() - if k == label as usize { 1.0 } else { 0.0 };
                    }
                }
                Ok(vec![tensor_f32(vec![b], loss), tensor_f32(vec![b, c], back)])
            }
            KernelOp::Strided { dims, strides, offset } => {
                let x = inputs[0];
                let data = map_data!(x, |v| strided_copy(v, dims, strides, *offset));
                Ok(vec![Tensor { dtype: x.dtype, shape: out_shapes[0].clone(), data }])
            }
            KernelOp::StridedScatter { dims, strides, offset } => {
                let x = inputs[0];
                let len: usize = out_shapes[0].iter().product();
                let data = map_data!(x, |v| crate::layout::strided_scatter(v, len, dims, strides, *offset));
                Ok(vec![Tensor { dtype: x.dtype, shape: out_shapes[0].clone(), data }])
            }
            KernelOp::Concat { axis } => {
                let out_shape = out_shapes[0].clone();
                let outer: usize = out_shape[..*axis].iter().product();
                let blocks: Vec<usize> = inputs.iter().map(|t| t.shape[*axis..].iter().product()).collect();
                let dtype = inputs[0].dtype;
                let data = concat_data(inputs, outer, &blocks)?;
                Ok(vec![Tensor { dtype, shape: out_shape, data }])
            }
            KernelOp::Pack { axis } => {
                let out_shape = out_shapes[0].clone();
                let outer: usize = out_shape[..*axis].iter().product();
                let blocks: Vec<usize> = inputs.iter().map(|t| t.shape[*axis..].iter().product()).collect();
                let dtype = inputs[0].dtype;
                let data = concat_data(inputs, outer, &blocks)?;
                Ok(vec![Tensor { dtype, shape: out_shape, data }])
            }
            KernelOp::Split { axis, sizes } => {
                let x = inputs[0];
                let outer: usize = x.shape[..*axis].iter().product();
                let inner: usize = x.shape[*axis + 1..].iter().product();
                let row = x.shape[*axis] * inner;
                let mut outs = Vec::with_capacity(sizes.len());
                let mut at = 0;
                for (k, &size) in sizes.iter().enumerate() {
                    let (start, len) = (at * inner, size * inner);
                    let data = map_data!(x, |v| split_piece(v, outer, row, start, len));
                    outs.push(Tensor { dtype: x.dtype, shape: out_shapes[k].clone(), data });
                    at += size;
                }
                Ok(outs)
            }
            KernelOp::ArgExtreme { axis, min, out } => {
                let x = inputs[0];
                let v = f32_of(x)?;
                let r = x.shape[*axis];
                if r == 0 {
                    return Err(err("ArgMax/ArgMin over an empty dimension"));
                }
                let outer: usize = x.shape[..*axis].iter().product();
                let inner: usize = x.shape[*axis + 1..].iter().product();
                let mut idx = Vec::with_capacity(outer * inner);
                for o in 0..outer {
                    for i in 0..inner {
                        let (mut best, mut bv) = (0usize, v[o * r * inner + i]);
                        for j in 1..r {
                            let x = v[o * r * inner + j * inner + i];
                            if (!*min && x > bv) || (*min && x < bv) {
                                best = j;
                                bv = x;
                            }
                        }
                        idx.push(best);
                    }
                }
                let shape = out_shapes[0].clone();
                let t = match out {
                    DType::Int32 => Tensor::from_i32(shape, idx.into_iter().map(|i| i as i32).collect()),
                    _ => Tensor::from_i64(shape, idx.into_iter().map(|i| i as i64).collect()),
                };
                Ok(vec![t.map_err(|e| err(e.to_string()))?])
            }
            KernelOp::Einsum { equation } => Ok(vec![crate::einsum::einsum(equation, inputs).map_err(err)?]),
            KernelOp::Pool { kind, shape } => {
                fn go<T: crate::pool::PoolElem>(kind: PoolKind, s: &crate::pool::PoolShape, ins: &[&[T]]) -> Vec<T> {
                    match kind {
                        PoolKind::Max => crate::pool::max_pool(s, ins[0]),
                        PoolKind::MaxGrad => crate::pool::max_pool_grad(s, ins[0], ins[1]),
                        PoolKind::Avg => crate::pool::avg_pool(s, ins[0]),
                        PoolKind::AvgGrad => crate::pool::avg_pool_grad(s, ins[0]),
                    }
                }
                let dtype = inputs[0].dtype;
                let data = match dtype {
                    DType::Float32 => {
                        let v = inputs.iter().map(|t| f32_of(t)).collect::<Result<Vec<_>, _>>()?;
                        TensorData::F32(Arc::new(go(*kind, shape, &v)))
                    }
                    DType::Float64 => {
                        let v = inputs
                            .iter()
                            .map(|t| t.as_f64().ok_or_else(|| err("mixed pooling dtypes")))
                            .collect::<Result<Vec<_>, _>>()?;
                        TensorData::F64(Arc::new(go(*kind, shape, &v)))
                    }
                    d => return Err(err(format!("pooling of {d}"))),
                };
                Ok(vec![Tensor { dtype, shape: out_shapes[0].clone(), data }])
            }
            KernelOp::Conv { kind, shape } => {
                fn go<T: crate::conv::ConvElem + std::ops::Mul<Output = T>>(
                    kind: ConvKind,
                    s: &crate::conv::ConvShape,
                    a: &[T],
                    b: &[T],
                ) -> Vec<T> {
                    use crate::conv as c;
                    let threads = rayon::current_num_threads();
                    match kind {
                        ConvKind::Forward => c::conv2d(s, a, b, threads),
                        ConvKind::BackpropInput => c::conv2d_backprop_input(s, a, b, threads),
                        ConvKind::BackpropFilter => c::conv2d_backprop_filter(s, a, b, threads),
                        ConvKind::Depthwise => c::depthwise_conv2d(s, a, b, threads),
                        ConvKind::DepthwiseBackpropInput => c::depthwise_conv2d_backprop_input(s, a, b, threads),
                        ConvKind::DepthwiseBackpropFilter => c::depthwise_conv2d_backprop_filter(s, a, b),
                    }
                }
                let (a, b) = (inputs[0], inputs[1]);
                let data = match (&a.data, &b.data) {
                    (TensorData::F32(x), TensorData::F32(y)) => TensorData::F32(Arc::new(go(*kind, shape, x, y))),
                    (TensorData::F64(x), TensorData::F64(y)) => TensorData::F64(Arc::new(go(*kind, shape, x, y))),
                    _ => return Err(err(format!("convolution of {} and {}", a.dtype, b.dtype))),
                };
                Ok(vec![Tensor { dtype: a.dtype, shape: out_shapes[0].clone(), data }])
            }
            KernelOp::BatchNorm { attrs, grad } => {
                fn go<T: crate::batchnorm::BnElem>(
                    a: &crate::batchnorm::BnAttrs,
                    grad: bool,
                    ins: &[&[T]],
                    c: usize,
                    outs: usize,
                ) -> Vec<Vec<T>> {
                    let mut v = if grad {
                        let (dx, ds, doff) =
                            crate::batchnorm::batch_norm_grad(a, ins[0], ins[1], c, ins[2], ins[3], ins[4]);
                        vec![dx, ds, doff]
                    } else {
                        let unused = a.running_unused() && ins[3].len() != c;
                        let (m, v) = if unused { (None, None) } else { (Some(ins[3]), Some(ins[4])) };
                        let r = crate::batchnorm::batch_norm(a, ins[0], c, ins[1], ins[2], m, v);
                        vec![r.y, r.batch_mean, r.batch_variance, r.reserve_mean, r.reserve_variance]
                    };
                    v.resize(outs, Vec::new());
                    v
                }
                let x = inputs[if *grad { 1 } else { 0 }];
                let c = x.shape.last().copied().unwrap_or(0);
                let n = out_shapes.len();
                let data: Vec<TensorData> = match x.dtype {
                    DType::Float32 => {
                        let v = inputs.iter().map(|t| f32_of(t)).collect::<Result<Vec<_>, _>>()?;
                        go(attrs, *grad, &v, c, n).into_iter().map(|o| TensorData::F32(Arc::new(o))).collect()
                    }
                    DType::Float64 => {
                        let v = inputs
                            .iter()
                            .map(|t| t.as_f64().ok_or_else(|| err("mixed batch-norm dtypes")))
                            .collect::<Result<Vec<_>, _>>()?;
                        go(attrs, *grad, &v, c, n).into_iter().map(|o| TensorData::F64(Arc::new(o))).collect()
                    }
                    d => return Err(err(format!("batch normalisation of {d}"))),
                };
                Ok(data
                    .into_iter()
                    .zip(out_shapes)
                    .map(|(data, shape)| Tensor { dtype: x.dtype, shape: shape.clone(), data })
                    .collect())
            }
            KernelOp::Cumulative { .. } => {
                use autoclust_graph::arith::TfArith;
                fn go<T: TfArith>(v: &[T], one: T, zero: T, op: &KernelOp) -> Vec<T> {
                    let KernelOp::Cumulative { prod, exclusive, reverse, outer, n, inner } = *op else {
                        unreachable!("called for Cumulative")
                    };
                    let dims = (outer, n, inner);
                    if prod {
                        cumulative(v, dims, one, T::mul, exclusive, reverse)
                    } else {
                        cumulative(v, dims, zero, T::add, exclusive, reverse)
                    }
                }
                let x = inputs[0];
                let data = match &x.data {
                    TensorData::F32(v) => TensorData::F32(Arc::new(go(v, 1.0, 0.0, self))),
                    TensorData::F64(v) => TensorData::F64(Arc::new(go(v, 1.0, 0.0, self))),
                    TensorData::I32(v) => TensorData::I32(Arc::new(go(v, 1, 0, self))),
                    TensorData::I64(v) => TensorData::I64(Arc::new(go(v, 1, 0, self))),
                    _ => return Err(err(format!("cumulative sum or product of {}", x.dtype))),
                };
                Ok(vec![Tensor { dtype: x.dtype, shape: out_shapes[0].clone(), data }])
            }
            KernelOp::Modular { kind } => {
                use autoclust_graph::arith::TfArith;
                fn go<T: TfArith>(kind: ModularKind, a: &[T], b: &[T], sh: [&[usize]; 3]) -> Result<Vec<T>, String> {
                    // `y − y == y` only for y = 0 (integers).
                    if T::IS_INT && b.iter().any(|&y| y.sub(y) == y) {
                        return Err(err("Integer division by zero"));
                    }
                    Ok(broadcast_binary(a, sh[0], b, sh[1], sh[2], |x, y| kind.apply(x, y)))
                }
                let (a, b) = (inputs[0], inputs[1]);
                let sh = [&a.shape[..], &b.shape[..], &out_shapes[0][..]];
                let data = match (&a.data, &b.data) {
                    (TensorData::F32(x), TensorData::F32(y)) => TensorData::F32(Arc::new(go(*kind, x, y, sh)?)),
                    (TensorData::F64(x), TensorData::F64(y)) => TensorData::F64(Arc::new(go(*kind, x, y, sh)?)),
                    (TensorData::I32(x), TensorData::I32(y)) => TensorData::I32(Arc::new(go(*kind, x, y, sh)?)),
                    (TensorData::I64(x), TensorData::I64(y)) => TensorData::I64(Arc::new(go(*kind, x, y, sh)?)),
                    _ => return Err(err(format!("{kind:?} of {} and {}", a.dtype, b.dtype))),
                };
                Ok(vec![Tensor { dtype: a.dtype, shape: out_shapes[0].clone(), data }])
            }
            KernelOp::SpaceBatch(sb) => Ok(vec![sb.run(inputs[0])?]),
            KernelOp::ResizeBilinear { attrs, grad, out_hw } => {
                let x = inputs[0];
                let s = &x.shape;
                let out = if *grad {
                    attrs.backward(f32_of(x)?, (s[0], s[1], s[2], s[3]), *out_hw)
                } else if let Some(v) = x.as_f32() {
                    attrs.forward(v, s, *out_hw)
                } else {
                    // Another real type, read as float32 as the interpreter's kernel reads it.
                    let v = x.to_f64_vec().ok_or_else(|| err(format!("ResizeBilinear of {}", x.dtype)))?;
                    let v: Vec<f32> = v.iter().map(|&e| e as f32).collect();
                    attrs.forward(&v, s, *out_hw)
                };
                Ok(vec![tensor_f32(out_shapes[0].clone(), out)])
            }
            KernelOp::ResizeNearest { attrs, grad, out_hw } => {
                let x = inputs[0];
                let s = x.shape.clone();
                if *grad {
                    let out = attrs.nearest_backward(f32_of(x)?, (s[0], s[1], s[2], s[3]), *out_hw);
                    return Ok(vec![tensor_f32(out_shapes[0].clone(), out)]);
                }
                let data = map_data!(x, |v| attrs.nearest_forward(v, &s, *out_hw));
                Ok(vec![Tensor { dtype: x.dtype, shape: out_shapes[0].clone(), data }])
            }
            KernelOp::InTopK { k } => {
                let p = f32_of(inputs[0])?;
                let t = inputs[1].to_i64_vec().ok_or_else(|| err("targets must be int32 or int64"))?;
                let c = inputs[0].shape[1];
                let v = in_top_k(p, c, &t, *k);
                Ok(vec![Tensor { dtype: DType::Bool, shape: vec![t.len()], data: TensorData::Bool(Arc::new(v)) }])
            }
            KernelOp::L2Loss => {
                let x = inputs[0];
                let t = match &x.data {
                    TensorData::F32(v) => {
                        tensor_f32(vec![], vec![(l2_sum(v.iter().map(|&e| f64::from(e))) / 2.0) as f32])
                    }
                    TensorData::F64(v) => Tensor {
                        dtype: DType::Float64,
                        shape: vec![],
                        data: TensorData::F64(Arc::new(vec![l2_sum(v.iter().copied()) / 2.0])),
                    },
                    _ => return Err(err(format!("L2Loss of {}", x.dtype))),
                };
                Ok(vec![t])
            }
            KernelOp::Bitcast { to } => Ok(vec![crate::reshuffle::bitcast(inputs[0], *to)?]),
            KernelOp::Bitwise { kind } => Ok(vec![kind.run(inputs[0], inputs[1], &out_shapes[0])?]),
            KernelOp::KeyCounter => {
                let gen = crate::random::generator_from_seed(inputs[0])?;
                let (key, counter) = crate::random::key_counter_tensors(&gen);
                Ok(vec![key, counter])
            }
            KernelOp::StatelessRandom { dist, v2, dtype: out_dtype } => {
                let out_dtype = *out_dtype;
                let gen = if *v2 {
                    crate::random::generator_from_key_counter(inputs[0], inputs[1], inputs[2])?
                } else {
                    crate::random::generator_from_seed(inputs[0])?
                };
                let shape = out_shapes[0].clone();
                let n: usize = shape.iter().product();
                let t = match (dist, out_dtype) {
                    (Some(d), DType::Float32) => tensor_f32(shape, crate::random::sample_f32(*d, gen, n)),
                    (Some(d), DType::Float64) => Tensor {
                        dtype: DType::Float64,
                        shape,
                        data: TensorData::F64(Arc::new(crate::random::sample_f64(*d, gen, n))),
                    },
                    (None, DType::Int32 | DType::Int64) => {
                        let (lo, hi) = if *v2 { (inputs[3], inputs[4]) } else { (inputs[1], inputs[2]) };
                        crate::random::uniform_ints(gen, out_dtype, shape, lo, hi)?
                    }
                    (_, d) => return Err(err(format!("stateless random {d}"))),
                };
                Ok(vec![t])
            }
            KernelOp::Gather { axis, batch_dims } => {
                let params = inputs[0];
                let idx = inputs[1].to_i64_vec().ok_or_else(|| err("indices must be int32 or int64"))?;
                let batch: usize = params.shape[..*batch_dims].iter().product();
                let outer: usize = params.shape[*batch_dims..*axis].iter().product();
                let n = params.shape[*axis];
                let inner: usize = params.shape[*axis + 1..].iter().product();
                if let Some(bad) = idx.iter().find(|&&i| i < 0 || i as usize >= n) {
                    return Err(err(format!("index {bad} is not in [0, {n})")));
                }
                let g = Gather { batch, outer, n, inner };
                let data = map_data!(params, |v| g.run(v, &idx));
                Ok(vec![Tensor { dtype: params.dtype, shape: out_shapes[0].clone(), data }])
            }
            KernelOp::SegmentSum { num, inner } => {
                let (data, ids) = (inputs[0], inputs[1]);
                let seg = ids.to_i64_vec().ok_or_else(|| err("segment_ids must be int32 or int64"))?;
                if let Some(bad) = seg.iter().find(|&&s| s >= 0 && s as usize >= *num) {
                    return Err(err(format!("segment id {bad} is out of range [0, {num})")));
                }
                let (num, inner) = (*num, *inner);
                let data = match &data.data {
                    TensorData::F32(v) => TensorData::F32(Arc::new(segment_sum(v, &seg, num, inner))),
                    TensorData::F64(v) => TensorData::F64(Arc::new(segment_sum(v, &seg, num, inner))),
                    TensorData::I32(v) => TensorData::I32(Arc::new(segment_sum(v, &seg, num, inner))),
                    TensorData::I64(v) => TensorData::I64(Arc::new(segment_sum(v, &seg, num, inner))),
                    _ => return Err(err(format!("UnsortedSegmentSum of {}", data.dtype))),
                };
                Ok(vec![Tensor { dtype: inputs[0].dtype, shape: out_shapes[0].clone(), data }])
            }
            KernelOp::Scatter { kind } => {
                let (x, indices, updates) = (inputs[0], inputs[1], inputs[2]);
                let (offsets, slice) = scatter_rows(x, indices, updates)?;
                let k = *kind;
                let data = match (&x.data, &updates.data) {
                    (TensorData::F32(v), TensorData::F32(u)) => {
                        TensorData::F32(Arc::new(scatter(v, u, &offsets, slice, k)))
                    }
                    (TensorData::F64(v), TensorData::F64(u)) => {
                        TensorData::F64(Arc::new(scatter(v, u, &offsets, slice, k)))
                    }
                    (TensorData::I32(v), TensorData::I32(u)) => {
                        TensorData::I32(Arc::new(scatter(v, u, &offsets, slice, k)))
                    }
                    (TensorData::I64(v), TensorData::I64(u)) => {
                        TensorData::I64(Arc::new(scatter(v, u, &offsets, slice, k)))
                    }
                    (TensorData::Bool(v), TensorData::Bool(u)) if k == ScatterKind::Update => {
                        let mut out = v.to_vec();
                        for (j, &o) in offsets.iter().enumerate() {
                            out[o..o + slice].copy_from_slice(&u[j * slice..(j + 1) * slice]);
                        }
                        TensorData::Bool(Arc::new(out))
                    }
                    _ => return Err(err(format!("scatter of {} updates into {}", updates.dtype, x.dtype))),
                };
                Ok(vec![Tensor { dtype: x.dtype, shape: out_shapes[0].clone(), data }])
            }
        }
    }
}

/// Checks a TensorScatter's operands (tensor, indices `[..., K]`, updates) and returns the
/// element offset of every updated slice and the slice length.
pub fn scatter_rows(x: &Tensor, indices: &Tensor, updates: &Tensor) -> Result<(Vec<usize>, usize), String> {
    let idx = indices.to_i64_vec().ok_or_else(|| err("indices must be int32 or int64"))?;
    let depth = indices.shape.last().copied().unwrap_or(0);
    if depth > x.shape.len() {
        return Err(err(format!("index depth {depth} exceeds rank {}", x.shape.len())));
    }
    let offsets = if idx.is_empty() { Vec::new() } else { scatter_offsets(&x.shape, &idx, depth)? };
    let slice: usize = x.shape[depth..].iter().product();
    if updates.num_elements() != offsets.len() * slice {
        return Err(err(format!(
            "updates {:?} do not match indices {:?} into {:?}",
            updates.shape, indices.shape, x.shape
        )));
    }
    Ok((offsets, slice))
}

/// Combines `updates` (one `slice`-long row per offset, in order) into `dst` in place.
fn scatter_in_place<T: ScatterElem>(dst: &mut [T], updates: &[T], offsets: &[usize], slice: usize, kind: ScatterKind) {
    for (k, &o) in offsets.iter().enumerate() {
        for (d, &u) in dst[o..o + slice].iter_mut().zip(&updates[k * slice..(k + 1) * slice]) {
            *d = T::combine(kind, *d, u);
        }
    }
}

/// How [`scatter_into`] turns the destination into a copy of the scattered tensor first.
pub(crate) enum ScatterBase<'r> {
    /// The destination holds garbage: copy every element.
    Full,
    /// The destination already equals the tensor except in these rows (`slice` elements each).
    Rows(&'r [usize], usize),
}

/// TensorScatter into a caller-provided buffer of the tensor's dtype and size (checked):
/// makes `dst` a copy of `x` as `base` says, then combines the updates at `offsets`.
/// Returns false (leaving `dst` untouched) for a dtype it does not handle.
pub(crate) fn scatter_into(
    dst: &mut TensorData,
    x: &Tensor,
    updates: &Tensor,
    offsets: &[usize],
    slice: usize,
    kind: ScatterKind,
    base: ScatterBase<'_>,
) -> bool {
    fn go<T: ScatterElem>(
        d: &mut [T],
        x: &[T],
        u: &[T],
        offsets: &[usize],
        slice: usize,
        kind: ScatterKind,
        base: ScatterBase<'_>,
    ) -> bool {
        if d.len() != x.len() {
            return false;
        }
        match base {
            ScatterBase::Full => d.copy_from_slice(x),
            ScatterBase::Rows(rows, n) => {
                for &o in rows {
                    d[o..o + n].copy_from_slice(&x[o..o + n]);
                }
            }
        }
        scatter_in_place(d, u, offsets, slice, kind);
        true
    }
    macro_rules! arm {
        ($v:ident) => {
            match (dst, &x.data, &updates.data) {
                (TensorData::$v(d), TensorData::$v(xv), TensorData::$v(u)) => match Arc::get_mut(d) {
                    Some(d) => go(d, xv, u, offsets, slice, kind, base),
                    None => false,
                },
                _ => false,
            }
        };
    }
    match x.dtype {
        DType::Float32 => arm!(F32),
        DType::Float64 => arm!(F64),
        DType::Int32 => arm!(I32),
        DType::Int64 => arm!(I64),
        _ => false,
    }
}

/// Sums the `inner`-element rows of `v` into `num` segments by `seg` (row i
/// into segment `seg[i]`, in row order; negative ids dropped).
fn segment_sum<T: Copy + Default + std::ops::Add<Output = T>>(
    v: &[T],
    seg: &[i64],
    num: usize,
    inner: usize,
) -> Vec<T> {
    let mut out = vec![T::default(); num * inner];
    for (i, &s) in seg.iter().enumerate() {
        if s < 0 {
            continue;
        }
        let dst = &mut out[s as usize * inner..(s as usize + 1) * inner];
        for (d, &x) in dst.iter_mut().zip(&v[i * inner..(i + 1) * inner]) {
            *d = *d + x;
        }
    }
    out
}

/// The sizes of a gather: `batch` blocks each of `outer` rows of `n`
/// entries of `inner` elements; the indices split evenly over the batches.
struct Gather {
    batch: usize,
    outer: usize,
    n: usize,
    inner: usize,
}

impl Gather {
    fn run<T: Copy>(&self, v: &[T], idx: &[i64]) -> Vec<T> {
        let Gather { batch, outer, n, inner } = *self;
        let per_batch = idx.len().checked_div(batch).unwrap_or(0);
        let mut out = Vec::with_capacity(outer * idx.len() * inner);
        for b in 0..batch {
            for o in 0..outer {
                for &i in &idx[b * per_batch..(b + 1) * per_batch] {
                    let start = ((b * outer + o) * n + i as usize) * inner;
                    out.extend_from_slice(&v[start..start + inner]);
                }
            }
        }
        out
    }
}

fn concat_data(inputs: &[&Tensor], outer: usize, blocks: &[usize]) -> Result<TensorData, String> {
    fn go<T: Copy>(parts: &[&[T]], outer: usize, blocks: &[usize]) -> Vec<T> {
        let mut out = Vec::with_capacity(parts.iter().map(|p| p.len()).sum());
        for o in 0..outer {
            for (p, &b) in parts.iter().zip(blocks) {
                out.extend_from_slice(&p[o * b..(o + 1) * b]);
            }
        }
        out
    }
    macro_rules! arm {
        ($variant:ident) => {{
            let parts: Option<Vec<&[_]>> = inputs
                .iter()
                .map(|t| match &t.data {
                    TensorData::$variant(v) => Some(&v[..]),
                    _ => None,
                })
                .collect();
            let parts = parts.ok_or_else(|| err("inputs of different dtypes"))?;
            TensorData::$variant(Arc::new(go(&parts, outer, blocks)))
        }};
    }
    Ok(match &inputs[0].data {
        TensorData::F32(_) => arm!(F32),
        TensorData::F64(_) => arm!(F64),
        TensorData::I32(_) => arm!(I32),
        TensorData::I64(_) => arm!(I64),
        TensorData::Bool(_) => arm!(Bool),
        _ => return Err(err(format!("dtype {} is not supported here", inputs[0].dtype))),
    })
}

pub use crate::layout::strided_copy;

fn softmax_row(row: &[f32], out: &mut [f32], log: bool) {
    let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut s = 0f32;
    for (o, &x) in out.iter_mut().zip(row) {
        let e = (x - m).exp();
        *o = e;
        s += e;
    }
    if log {
        let ls = s.ln();
        for (o, &x) in out.iter_mut().zip(row) {
            *o = x - m - ls;
        }
    } else {
        let inv = 1.0 / s;
        for o in out.iter_mut() {
            *o *= inv;
        }
    }
}

/// Reduces `axes` of a row-major float32 tensor of `shape`.
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
    let (mut out, count) = fold_in_order(v, shape, axes, init, |a, x| match kind {
        ReduceKind::Sum | ReduceKind::Mean => a + x,
        ReduceKind::Prod => a * x,
        ReduceKind::Max => TfArith::maximum(a, x),
        ReduceKind::Min => TfArith::minimum(a, x),
    });
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
pub fn reduce_int(v: &[i64], shape: &[usize], axes: &[usize], kind: ReduceKind, bits32: bool) -> Vec<i64> {
    let wrap = |x: i64| if bits32 { x as i32 as i64 } else { x };
    let (lowest, highest) = if bits32 { (i32::MIN as i64, i32::MAX as i64) } else { (i64::MIN, i64::MAX) };
    let init = match kind {
        ReduceKind::Max => lowest,
        ReduceKind::Min => highest,
        ReduceKind::Prod => 1,
        ReduceKind::Sum | ReduceKind::Mean => 0,
    };
    let (mut out, count) = fold_in_order(v, shape, axes, init, |a, x| match kind {
        ReduceKind::Sum | ReduceKind::Mean => wrap(a.wrapping_add(x)),
        ReduceKind::Prod => wrap(a.wrapping_mul(x)),
        ReduceKind::Max => a.max(x),
        ReduceKind::Min => a.min(x),
    });
    if kind == ReduceKind::Mean {
        for o in &mut out {
            *o = if count == 0 { 0 } else { wrap(*o).wrapping_div(count as i64) };
        }
    }
    out
}

/// Folds each element of `v` (row-major `shape`) into its output element (the `axes`
/// removed), in input order, from `init`; returns the outputs and how many inputs each has.
fn fold_in_order<T: Copy>(v: &[T], shape: &[usize], axes: &[usize], init: T, f: impl Fn(T, T) -> T) -> (Vec<T>, usize) {
    let r = shape.len();
    let mut ostride = vec![0usize; r];
    let mut out_len = 1usize;
    for (d, (os, &n)) in ostride.iter_mut().zip(shape).enumerate().rev() {
        if !axes.contains(&d) {
            *os = out_len;
            out_len *= n;
        }
    }
    let count: usize = axes.iter().map(|&a| shape[a]).product();
    let mut out = vec![init; out_len];
    let mut idx = vec![0usize; r];
    for &x in v {
        let o: usize = idx.iter().zip(&ostride).map(|(i, s)| i * s).sum();
        out[o] = f(out[o], x);
        for (i, &n) in idx.iter_mut().zip(shape).rev() {
            *i += 1;
            if *i < n {
                break;
            }
            *i = 0;
        }
    }
    (out, count)
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
