//! Library kernels: the non-elementwise ops a compiled cluster calls once per op.
//!
//! Every kernel takes its parameters resolved at compile time (axes, permutations, slice
//! bounds are constants by then) and its runtime tensors, and returns fresh tensors. The
//! same code folds constants during analysis, so compile-time and run-time results agree.
//! Data movement is dtype-generic (a strided copy covers Transpose, Slice, StridedSlice
//! and BroadcastTo); numeric kernels are float32.

use std::sync::Arc;

use autoclust_graph::{DType, Tensor, TensorData};
use autoclust_numeric::layout::broadcast_binary;
use autoclust_numeric::layout::strided_copy;
use autoclust_numeric::reduce::{cumulative, in_top_k, l2_sum, reduce, reduce_f64, reduce_int, ReduceKind};
use autoclust_numeric::scatter::{scatter, scatter_rows, ScatterKind};

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
    /// ArgMax/ArgMin of float32 along `axis` (the first index of the extreme; a NaN is never
    /// taken, a leading one included, as TensorFlow's CPU kernel), as int32 or int64 `out`.
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
    StatelessRandom { dist: Option<crate::random::Dist>, v2: bool, full: bool, dtype: DType },
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
    /// A bfloat16 `BiasAddGrad` (float32 lanes holding bfloat16 values, channels last): the
    /// rows added in order, each partial sum rounded to `half`, as TensorFlow's kernel sums
    /// (`autoclust_numeric::reduce::column_sums_rounded`, the interpreter's loop).
    BiasGradRounded { half: DType },
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
    /// `TruncateDiv`: the quotient rounded toward zero, for integers and floats alike.
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
            ModularKind::TruncateDiv => a.truncdiv(b),
            ModularKind::TruncateMod => a.truncmod(b),
        }
    }
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
                | KernelOp::BiasGradRounded { .. }
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
                        let r = reduce_int(&v[..], &x.shape, axes, *kind, true);
                        let data = TensorData::I32(Arc::new(r.into_iter().map(|e| e as i32).collect()));
                        Ok(vec![Tensor { dtype: DType::Int32, shape, data }])
                    }
                    TensorData::I64(v) => {
                        let data = TensorData::I64(Arc::new(reduce_int(&v[..], &x.shape, axes, *kind, false)));
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
                let data = TensorData::Bool(Arc::new(autoclust_numeric::reduce::reduce_bool(b, &x.shape, axes, *all)));
                Ok(vec![Tensor { dtype: DType::Bool, shape: out_shapes[0].clone(), data }])
            }
            KernelOp::Softmax { log } => {
                let x = inputs[0];
                let v = f32_of(x)?;
                let c = *x.shape.last().unwrap_or(&1);
                let mut out = vec![0f32; v.len()];
                if c > 0 {
                    softmax_rows(v, c, &mut out, *log);
                }
                Ok(vec![tensor_f32(x.shape.clone(), out)])
            }
            KernelOp::SoftmaxXent => {
                let (logits, labels) = (f32_of(inputs[0])?, f32_of(inputs[1])?);
                let shape = &inputs[0].shape;
                let (b, c) = (shape[0], shape[1]);
                let (loss, back) = softmax_xent(logits, c, labels);
                Ok(vec![tensor_f32(vec![b], loss), tensor_f32(vec![b, c], back)])
            }
            KernelOp::SparseSoftmaxXent => {
                let logits = f32_of(inputs[0])?;
                let labels = inputs[1].to_i64_vec().ok_or_else(|| err("labels must be int32 or int64"))?;
                let shape = &inputs[0].shape;
                let (b, c) = (shape[0], shape[1]);
                if let Some(&label) = labels.iter().find(|&&l| l < 0 || l as usize >= c) {
                    // TensorFlow's CPU kernel reports this as an error; so do we.
                    return Err(err(format!("label {label} is not in [0, {c})")));
                }
                let (loss, back) = sparse_softmax_xent(logits, c, &labels);
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
                        // Eigen's arg reducers: index 0 holding the type's lowest
                        // (highest) value, a strictly better element taken (never a NaN).
                        let (mut best, mut bv) = (0usize, if *min { f32::MAX } else { f32::MIN });
                        for j in 0..r {
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
                    // One loop per kind (the kind is not re-examined per element).
                    let (sa, sb, so) = (sh[0], sh[1], sh[2]);
                    Ok(match kind {
                        ModularKind::FloorDiv => broadcast_binary(a, sa, b, sb, so, |x, y| x.floordiv(y)),
                        ModularKind::FloorMod => broadcast_binary(a, sa, b, sb, so, |x, y| x.floormod(y)),
                        ModularKind::TruncateDiv => broadcast_binary(a, sa, b, sb, so, |x, y| x.truncdiv(y)),
                        ModularKind::TruncateMod => broadcast_binary(a, sa, b, sb, so, |x, y| x.truncmod(y)),
                    })
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
            KernelOp::BiasGradRounded { half } => {
                let x = f32_of(inputs[0])?;
                let cols = inputs[0].shape.last().copied().unwrap_or(1);
                let half = *half;
                let v = autoclust_numeric::reduce::column_sums_rounded(x, cols, |v| {
                    autoclust_graph::half::round_to(v, half)
                });
                Ok(vec![tensor_f32(vec![cols], v)])
            }
            KernelOp::Bitcast { to } => Ok(vec![crate::reshuffle::bitcast(inputs[0], *to)?]),
            KernelOp::Bitwise { kind } => Ok(vec![kind.run(inputs[0], inputs[1], &out_shapes[0])?]),
            KernelOp::KeyCounter => {
                let gen = crate::random::generator_from_seed(inputs[0])?;
                let (key, counter) = crate::random::key_counter_tensors(&gen);
                Ok(vec![key, counter])
            }
            KernelOp::StatelessRandom { dist, v2, full, dtype: out_dtype } => {
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
                    (None, DType::Int32) if *full => {
                        let v = crate::random::full_int32(gen, n).into_iter().map(|x| x as i32).collect();
                        Tensor { dtype: DType::Int32, shape, data: TensorData::I32(Arc::new(v)) }
                    }
                    (None, DType::Int64) if *full => {
                        let v = crate::random::full_int64(gen, n).into_iter().map(|x| x as i64).collect();
                        Tensor { dtype: DType::Int64, shape, data: TensorData::I64(Arc::new(v)) }
                    }
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

/// Elements of a softmax worth splitting its rows across the team.
const SOFTMAX_SPLIT: usize = 1 << 16;

/// [`softmax_block`] over every `c`-wide row of `v` into `out`, blocks of rows split across
/// the team when there are many (each row is computed alike wherever it runs).
pub fn softmax_rows(v: &[f32], c: usize, out: &mut [f32], log: bool) {
    let rows = v.len() / c.max(1);
    if c == 0 || rows == 0 {
        return;
    }
    // Rows per block: a few thousand elements, so the exponential runs over whole tiles.
    let per = (SOFTMAX_BLOCK / c).clamp(1, rows);
    let blocks = rows.div_ceil(per);
    if v.len() < SOFTMAX_SPLIT || blocks < 2 {
        for (vb, ob) in v.chunks(per * c).zip(out.chunks_mut(per * c)) {
            softmax_block(vb, c, ob, log);
        }
        return;
    }
    let dst = SendPtr(out.as_mut_ptr());
    crate::team::run(blocks, &|k| {
        let (r0, r1) = (k * per, ((k + 1) * per).min(rows));
        let d = dst;
        // SAFETY: part k writes rows r0..r1 of `out` only; the section ends before `out` is read.
        let o = unsafe { std::slice::from_raw_parts_mut(d.0.add(r0 * c), (r1 - r0) * c) };
        softmax_block(&v[r0 * c..r1 * c], c, o, log);
    });
}

/// `SoftmaxCrossEntropyWithLogits` of float32 `[rows, c]` logits and labels: the log-softmax
/// by blocks of rows ([`softmax_rows`], split across the team when large), each row's loss
/// `−Σ y·log p` (terms of zero labels skipped) from it, then one vectorised exponential
/// over the whole gradient `p − y`. The interpreter's float32 kernel calls this too.
pub fn softmax_xent(logits: &[f32], c: usize, labels: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let rows = logits.len() / c.max(1);
    let mut loss = vec![0f32; rows];
    let mut back = vec![0f32; logits.len()];
    softmax_rows(logits, c, &mut back, true);
    for (r, l) in loss.iter_mut().enumerate() {
        let (o, lab) = (&back[r * c..(r + 1) * c], &labels[r * c..(r + 1) * c]);
        for (&logp, &y) in o.iter().zip(lab) {
            if y != 0.0 {
                *l -= y * logp;
            }
        }
    }
    exp_in_place(&mut back);
    for (o, &y) in back.iter_mut().zip(labels) {
        *o -= y;
    }
    (loss, back)
}

/// `SparseSoftmaxCrossEntropyWithLogits` of float32 `[rows, c]` logits and one class per
/// row (each in `0..c`, checked by the caller): [`softmax_xent`] with one-hot labels.
pub fn sparse_softmax_xent(logits: &[f32], c: usize, labels: &[i64]) -> (Vec<f32>, Vec<f32>) {
    let mut back = vec![0f32; logits.len()];
    softmax_rows(logits, c, &mut back, true);
    let loss: Vec<f32> = labels.iter().enumerate().map(|(r, &k)| -back[r * c + k as usize]).collect();
    exp_in_place(&mut back);
    for (r, &k) in labels.iter().enumerate() {
        back[r * c + k as usize] -= 1.0;
    }
    (loss, back)
}

/// `x ← eˣ` over `v` by the tile routine the fused loops' `Exp` uses (libm without one).
fn exp_in_place(v: &mut [f32]) {
    if !crate::tile_routines::map_wide(crate::tile_routines::Wide::Exp, v) {
        for x in v.iter_mut() {
            *x = x.exp();
        }
    }
}

/// Elements of one block of [`softmax_rows`].
const SOFTMAX_BLOCK: usize = 4096;

/// A pointer the parts of one parallel section write disjoint ranges through.
#[derive(Clone, Copy)]
struct SendPtr(*mut f32);
// SAFETY: see `softmax_rows`: disjoint ranges, joined before the buffer is used.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

/// The softmax (or log-softmax) of each `c`-wide row of `v`: `e = exp(x − max)` by the tile
/// routine the fused loops' `Exp` uses (`tile_routines::map_wide`, over the whole block at
/// once; libm without one), each row's `Σe` in float64, then `e / Σe` (or `x − max − ln Σe`).
/// Row by row the same bits whatever the block.
fn softmax_block(v: &[f32], c: usize, out: &mut [f32], log: bool) {
    let mut maxes: smallvec::SmallVec<[f32; 16]> = smallvec::SmallVec::with_capacity(v.len() / c);
    for (row, o) in v.chunks(c).zip(out.chunks_mut(c)) {
        let m = max_of(row);
        maxes.push(m);
        for (o, &x) in o.iter_mut().zip(row) {
            *o = x - m;
        }
    }
    if !crate::tile_routines::map_wide(crate::tile_routines::Wide::Exp, out) {
        for o in out.iter_mut() {
            *o = o.exp();
        }
    }
    for ((row, o), &m) in v.chunks(c).zip(out.chunks_mut(c)).zip(&maxes) {
        let s = sum_of(o);
        if log {
            let ls = s.ln() as f32;
            for (o, &x) in o.iter_mut().zip(row) {
                *o = x - m - ls;
            }
        } else {
            // Divided, not multiplied by 1/Σ: the row then sums to 1 within an ulp or two,
            // and gradients that cancel exactly in theory (an attention key bias's, which
            // Adam scales up to the learning rate) stay as small as TensorFlow's.
            let s = s as f32;
            for o in o.iter_mut() {
                *o /= s;
            }
        }
    }
}

/// One row's [`softmax_block`] (the cross-entropy kernels').
#[cfg(test)]
fn softmax_row(row: &[f32], out: &mut [f32], log: bool) {
    softmax_block(row, row.len().max(1), out, log);
}

/// The largest element (NaNs ignored, as `f32::max` does; −∞ for none), eight lanes at a time.
fn max_of(x: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; 8];
    let mut chunks = x.chunks_exact(8);
    for ch in &mut chunks {
        for (l, &v) in lanes.iter_mut().zip(ch) {
            *l = l.max(v);
        }
    }
    let m = chunks.remainder().iter().copied().fold(f32::NEG_INFINITY, f32::max);
    lanes.into_iter().fold(m, f32::max)
}

/// The sum of `x` in float64, in four interleaved partial sums, then those in order (a fixed
/// order: the same bits for the same row).
fn sum_of(x: &[f32]) -> f64 {
    let mut lanes = [0f64; 4];
    let mut chunks = x.chunks_exact(4);
    for ch in &mut chunks {
        for (l, &v) in lanes.iter_mut().zip(ch) {
            *l += f64::from(v);
        }
    }
    let tail: f64 = chunks.remainder().iter().map(|&v| f64::from(v)).sum();
    lanes.into_iter().sum::<f64>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Softmax and log-softmax rows, split across the team or not, in blocks of any size:
    /// each row the same bits as alone, within float32 rounding of the float64 definition,
    /// and TensorFlow's special values (a NaN row, an all −∞ row give NaN; a −∞ entry 0).
    #[test]
    fn softmax_rows_equal_each_row_alone_and_the_definition() {
        for (rows, c) in [(3usize, 7usize), (1, 5000), (700, 33), (4100, 32), (2, 1)] {
            let v: Vec<f32> = (0..rows * c).map(|i| ((i * 7919) % 1013) as f32 / 50.0 - 10.0).collect();
            for log in [false, true] {
                let mut got = vec![0f32; v.len()];
                softmax_rows(&v, c, &mut got, log);
                for (r, (row, g)) in v.chunks(c).zip(got.chunks(c)).enumerate() {
                    let mut alone = vec![0f32; c];
                    softmax_row(row, &mut alone, log);
                    assert_eq!(g, &alone[..], "row {r} of {rows}x{c} log={log}");
                    let m = row.iter().copied().fold(f64::NEG_INFINITY, |a, b| a.max(f64::from(b)));
                    let s: f64 = row.iter().map(|&x| (f64::from(x) - m).exp()).sum();
                    for (&x, &y) in row.iter().zip(g) {
                        let want = if log { f64::from(x) - m - s.ln() } else { (f64::from(x) - m).exp() / s };
                        assert!((f64::from(y) - want).abs() <= 2e-6 * want.abs().max(1.0), "{y} vs {want}");
                    }
                }
            }
        }
        let mut out = [0f32; 3];
        softmax_rows(&[1.0, f32::NAN, 2.0], 3, &mut out, false);
        assert!(out.iter().all(|x| x.is_nan()), "{out:?}");
        softmax_rows(&[f32::NEG_INFINITY; 3], 3, &mut out, false);
        assert!(out.iter().all(|x| x.is_nan()), "{out:?}");
        softmax_rows(&[0.0, f32::NEG_INFINITY, 0.0], 3, &mut out, false);
        assert_eq!(out, [0.5, 0.0, 0.5]);
    }
}
