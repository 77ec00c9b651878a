//! Stateless kernels: TensorFlow's ops on [`Tensor`] values.
//!
//! [`prepare`] turns a node into a [`PureFn`] once (attributes parsed and
//! the op dispatched up front), so that running it costs one indirect call;
//! [`compute`] is the one-shot entry point the semantics explorer and the
//! JIT's differential tests use. Kernels take their inputs by value: a kernel
//! may write into an input's buffer only when [`TensorData::is_unique`] says
//! nobody else holds it (TensorFlow's buffer forwarding), so values visible
//! elsewhere never change.
//!
//! Resource-variable ops live in [`resource`]; they need the session's
//! variable store and are prepared by the executor, not here.

use std::sync::Arc;

use autoclust_graph::{AttrValue, DType, Node, Tensor, TensorData};
use smallvec::SmallVec;

use crate::error::{KResult, KernelError};

pub(crate) mod approx;
pub(crate) mod array;
pub(crate) mod audio;
pub(crate) mod batchnorm;
pub(crate) mod bessel;
pub(crate) mod bmp;
pub(crate) mod by_position;
pub(crate) mod c_number;
pub(crate) mod cephes;
pub(crate) mod checkpoint;
pub use checkpoint::slice_of as checkpoint_slice;
pub(crate) mod color;
pub(crate) mod conv;
pub(crate) mod csv;
pub(crate) mod ctc;
pub(crate) mod decode_raw;
pub(crate) mod detection;
pub(crate) mod diag;
pub(crate) mod dilation;
pub(crate) mod draw;
pub(crate) mod edit_distance;
pub(crate) mod eigh;
pub(crate) mod einsum;
pub(crate) mod elementwise;
pub(crate) mod example;
pub(crate) mod fake_quant;
pub(crate) mod files;
pub(crate) mod fractional_pool;
pub(crate) mod gif;
pub mod half;
pub(crate) mod image;
pub(crate) mod integrals;
pub(crate) mod jpeg;
pub(crate) mod linalg;
pub(crate) mod list;
pub mod lookup;
pub(crate) mod lrn;
pub(crate) mod matmul;
pub(crate) mod nn;
pub(crate) mod optimizer;
mod optional;
pub(crate) mod png;
pub(crate) mod pool;
pub(crate) mod quantize_dequantize;
pub(crate) mod ragged;
pub(crate) mod ragged_ops;
pub mod random;
pub(crate) mod real;
pub(crate) mod rearrange;
pub(crate) mod reduce;
pub(crate) mod resample;
pub mod resource;
pub(crate) mod scale_translate;
pub(crate) mod search;
pub(crate) mod sets;
pub(crate) mod shape_ops;
pub(crate) mod sparse;
pub(crate) mod special;
pub(crate) mod spectral;
pub(crate) mod stl;
pub(crate) mod string;
pub(crate) mod summary;
pub mod summary_writer;
pub(crate) mod tensor_proto;
pub(crate) mod tensor_scatter;
pub(crate) mod unicode;
pub(crate) mod volume;
pub(crate) mod widen;
pub(crate) mod wire;
pub use string::print_stdout_to_stderr;

/// A kernel's inputs, owned so that a unique buffer can be reused in place.
pub type Inputs = SmallVec<[Tensor; 4]>;
/// A kernel's outputs, one per output port.
pub type Outputs = SmallVec<[Tensor; 2]>;
/// A prepared stateless kernel.
pub type PureFn = Box<dyn Fn(Inputs) -> KResult<Outputs> + Send + Sync>;

/// Runs one stateless op on `inputs` (cloned: tensors share their buffers).
pub fn compute(node: &Node, inputs: &[Tensor]) -> Result<Vec<Tensor>, KernelError> {
    let f = prepare(node)?;
    Ok(f(inputs.iter().cloned().collect())?.into_vec())
}

/// Whether [`prepare`] has a kernel for `op` (resource ops excluded).
pub fn has_pure_kernel(op: &str) -> bool {
    !matches!(prepare(&probe(op)), Err(KernelError::NoKernel(_)))
}

/// A node of `op` with nothing set, to ask a `prepare` whether it knows the op.
pub(crate) fn probe(op: &str) -> Node {
    Node::unconnected("", op, &[])
}

/// Prepares the kernel of a stateless op.
pub fn prepare(node: &Node) -> KResult<PureFn> {
    if node.op == "ConjugateTranspose" {
        return conjugate_transpose(node);
    }
    // Data-movement ops on the dtypes their typed kernels lack run on element positions.
    // Integer arithmetic on the narrow integer types runs in int64.
    by_position::prepare(node, prepare_typed)
        .or_else(|| widen::prepare(node, prepare_typed))
        .unwrap_or_else(|| prepare_typed(node))
}

/// `ConjugateTranspose`: the `Transpose` kernel of the same attributes, then `Conj` when the
/// elements are complex (TensorFlow's kernel is a plain transpose for real types).
fn conjugate_transpose(node: &Node) -> KResult<PureFn> {
    let mut t = node.clone();
    t.op = "Transpose".into();
    let transpose = prepare(&t)?;
    let dtype = node.attr("T").and_then(AttrValue::as_type);
    if !matches!(dtype, Some(DType::Complex64 | DType::Complex128)) {
        return Ok(transpose);
    }
    let conj = prepare(&Node::unconnected(&node.name, "Conj", &[("T", AttrValue::Type(dtype.expect("complex")))]))?;
    Ok(Box::new(move |inp: Inputs| conj(transpose(inp)?.into_iter().collect())))
}

/// The kernel of `node` for the dtypes it is written for.
fn prepare_typed(node: &Node) -> KResult<PureFn> {
    // Serialization and checkpoints keep every dtype's bits: before the half-precision rewrite.
    if let Some(f) = tensor_proto::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = checkpoint::prepare(node)? {
        return Ok(f);
    }
    // Then: an op in float16 or bfloat16 is its float32 kernel, rounded once per op.
    if let Some(f) = half::prepare(node)? {
        return Ok(f);
    }
    // String ops (`Equal`/`NotEqual` on strings run on element positions: `by_position`).
    if let Some(f) = string::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = files::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = decode_raw::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = edit_distance::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = csv::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = audio::prepare(node)? {
        return Ok(f);
    }

    if let Some(f) = summary::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = example::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = unicode::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = scale_translate::prepare(node)? {
        return Ok(f);
    }
    // Before the elementwise kernels: arithmetic and `Cast` on complex tensors.
    if let Some(f) = spectral::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = elementwise::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = matmul::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = einsum::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = reduce::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = shape_ops::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = array::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = diag::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = nn::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = tensor_scatter::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = random::prepare_stateless(node)? {
        return Ok(f);
    }
    if let Some(f) = fractional_pool::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = optional::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = list::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = volume::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = image::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = ragged::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = ragged_ops::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = sparse::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = sets::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = detection::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = linalg::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = rearrange::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = search::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = resample::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = approx::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = draw::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = color::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = eigh::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = ctc::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = png::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = fake_quant::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = quantize_dequantize::prepare(node)? {
        return Ok(f);
    }
    if let Some(f) = dilation::prepare(node)? {
        return Ok(f);
    }
    Err(KernelError::NoKernel(node.op.clone()))
}

/// One output.
pub(crate) fn one(t: Tensor) -> KResult<Outputs> {
    let mut o = Outputs::new();
    o.push(t);
    Ok(o)
}

pub(crate) fn arity(inputs: &Inputs, n: usize) -> KResult<()> {
    if inputs.len() != n {
        return Err(KernelError::Arity { expected: n, got: inputs.len() });
    }
    Ok(())
}

/// An element type with a native buffer.
pub(crate) trait Elem: Copy + Send + Sync + PartialEq + PartialOrd + std::fmt::Debug + 'static {
    const DTYPE: DType;
    fn slice(t: &Tensor) -> &[Self];
    fn vec_mut(d: &mut TensorData) -> &mut Vec<Self>;
    fn wrap(v: Vec<Self>) -> TensorData;
    fn zero() -> Self;
    fn one() -> Self;
    fn to_f64(self) -> f64;
    fn to_i64(self) -> i64;
    /// `static_cast` from f64 (Rust saturates where C++ is undefined).
    fn from_f64(x: f64) -> Self;
    /// `static_cast` from i64 (wrapping for narrower integers).
    fn from_i64(x: i64) -> Self;
    fn is_nonzero(self) -> bool;
}

macro_rules! elem_impl {
    ($t:ty, $dt:expr, $variant:ident, $zero:expr, $one:expr, $tof:expr, $toi:expr, $fromf:expr, $fromi:expr, $nz:expr) => {
        impl Elem for $t {
            const DTYPE: DType = $dt;
            fn slice(t: &Tensor) -> &[Self] {
                match &t.data {
                    TensorData::$variant(v) => v,
                    _ => &[],
                }
            }
            fn vec_mut(d: &mut TensorData) -> &mut Vec<Self> {
                match d {
                    TensorData::$variant(v) => Arc::make_mut(v),
                    _ => unreachable!("vec_mut on a tensor of another dtype"),
                }
            }
            fn wrap(v: Vec<Self>) -> TensorData {
                TensorData::$variant(Arc::new(v))
            }
            fn zero() -> Self {
                $zero
            }
            fn one() -> Self {
                $one
            }
            fn to_f64(self) -> f64 {
                let f: fn($t) -> f64 = $tof;
                f(self)
            }
            fn to_i64(self) -> i64 {
                let f: fn($t) -> i64 = $toi;
                f(self)
            }
            fn from_f64(x: f64) -> Self {
                let f: fn(f64) -> $t = $fromf;
                f(x)
            }
            fn from_i64(x: i64) -> Self {
                let f: fn(i64) -> $t = $fromi;
                f(x)
            }
            fn is_nonzero(self) -> bool {
                let f: fn($t) -> bool = $nz;
                f(self)
            }
        }
    };
}

elem_impl!(f32, DType::Float32, F32, 0.0, 1.0, |x| x as f64, |x| x as i64, |x| x as f32, |x| x as f32, |x| x != 0.0);
elem_impl!(f64, DType::Float64, F64, 0.0, 1.0, |x| x, |x| x as i64, |x| x, |x| x as f64, |x| x != 0.0);
elem_impl!(i32, DType::Int32, I32, 0, 1, |x| x as f64, |x| x as i64, |x| x as i32, |x| x as i32, |x| x != 0);
elem_impl!(i64, DType::Int64, I64, 0, 1, |x| x as f64, |x| x, |x| x as i64, |x| x, |x| x != 0);
elem_impl!(bool, DType::Bool, Bool, false, true, |x| x as u8 as f64, |x| x as i64, |x| x != 0.0, |x| x != 0, |x| x);

/// A tensor of element type `T`.
/// Checks, before allocating, that a `dtype` output of `shape` fits the tensor size
/// budget (`autoclust_graph::limits`, `--max-tensor-bytes`); returns its element count.
/// Every kernel whose output size comes from operand *values* (dims, multiples, bounds,
/// paddings, depths) or from broadcasting calls this first.
pub(crate) fn budget(dtype: DType, shape: &[usize]) -> KResult<usize> {
    Ok(autoclust_graph::limits::tensor_elements(dtype, shape)?)
}

/// Checks that a collection of `count` elements like `item` (a TensorList, a TensorArray, a
/// stack) fits the tensor budget as the tensor stacking it would be (`--max-tensor-bytes`):
/// a loop that appends to a list every iteration fails at the element that crosses the
/// budget, naming its node, instead of growing until the allocator aborts the process.
pub(crate) fn collection_budget(count: usize, item: &Tensor) -> KResult<()> {
    let mut shape = Vec::with_capacity(item.rank() + 1);
    shape.push(count);
    shape.extend_from_slice(&item.shape);
    budget(item.dtype, &shape).map(drop)
}

pub(crate) fn tensor_of<T: Elem>(shape: Vec<usize>, v: Vec<T>) -> Tensor {
    debug_assert_eq!(shape.iter().product::<usize>(), v.len());
    Tensor { dtype: T::DTYPE, shape, data: T::wrap(v) }
}

/// Elements moved without arithmetic, for every dtype with a flat buffer (strings and the
/// raw-byte dtypes included): output element `i` of `shape` is `t`'s element `src[i]`, or
/// `fill`'s first element where `src[i]` is `None`. The sparse and gather kernels use it for
/// the dtypes their typed paths do not cover.
pub(crate) fn take_or(t: &Tensor, src: &[Option<usize>], fill: Option<&Tensor>, shape: Vec<usize>) -> KResult<Tensor> {
    fn pick<E: Clone>(v: &[E], fill: Option<&[E]>, src: &[Option<usize>]) -> KResult<Vec<E>> {
        let default = fill.and_then(|f| f.first());
        src.iter()
            .map(|s| match s {
                Some(j) => {
                    v.get(*j).cloned().ok_or_else(|| KernelError::invalid(format!("element {j} is out of range")))
                }
                None => default.cloned().ok_or_else(|| KernelError::invalid("no default value to fill with")),
            })
            .collect()
    }
    if fill.is_some_and(|f| f.dtype != t.dtype) {
        return Err(KernelError::invalid(format!(
            "the default value's dtype {} differs from the values' {}",
            fill.map_or(t.dtype, |f| f.dtype),
            t.dtype
        )));
    }
    budget(t.dtype, &shape)?;
    macro_rules! arm {
        ($var:ident, $v:expr) => {{
            let f = match fill.map(|f| &f.data) {
                None => None,
                Some(TensorData::$var(w)) => Some(&w[..]),
                Some(_) => return Err(KernelError::DType(t.dtype)),
            };
            TensorData::$var(Arc::new(pick($v, f, src)?))
        }};
    }
    let data = match &t.data {
        TensorData::F32(v) => arm!(F32, v),
        TensorData::F64(v) => arm!(F64, v),
        TensorData::I32(v) => arm!(I32, v),
        TensorData::I64(v) => arm!(I64, v),
        TensorData::Bool(v) => arm!(Bool, v),
        TensorData::Str(v) => arm!(Str, v),
        TensorData::Raw(bytes) => {
            let w = t.dtype.size_of().filter(|&w| w > 0).ok_or(KernelError::DType(t.dtype))?;
            let rows: Vec<&[u8]> = bytes.chunks_exact(w).collect();
            let f: Option<Vec<&[u8]>> = match fill.map(|f| &f.data) {
                None => None,
                Some(TensorData::Raw(b)) => Some(b.chunks_exact(w).collect()),
                Some(_) => return Err(KernelError::DType(t.dtype)),
            };
            TensorData::Raw(Arc::new(pick(&rows, f.as_deref(), src)?.concat()))
        }
        TensorData::List(_) | TensorData::Optional(_) => return Err(KernelError::DType(t.dtype)),
    };
    Ok(Tensor { dtype: t.dtype, shape, data })
}

/// Checks that `t` has a native buffer of its dtype (a corrupt tensor would
/// otherwise read as empty).
pub(crate) fn check_native(t: &Tensor) -> KResult<()> {
    let ok = matches!(
        (&t.data, t.dtype),
        (TensorData::F32(_), DType::Float32)
            | (TensorData::F64(_), DType::Float64)
            | (TensorData::I32(_), DType::Int32)
            | (TensorData::I64(_), DType::Int64)
            | (TensorData::Bool(_), DType::Bool)
    );
    if ok {
        Ok(())
    } else {
        Err(KernelError::DType(t.dtype))
    }
}

/// Dispatches a generic function over the numeric dtypes (no bool).
macro_rules! dispatch_num {
    ($dt:expr, $f:ident $(::<$($g:ty),*>)? ( $($arg:expr),* )) => {
        match $dt {
            autoclust_graph::DType::Float32 => $f::<f32 $($(, $g)*)?>($($arg),*),
            autoclust_graph::DType::Float64 => $f::<f64 $($(, $g)*)?>($($arg),*),
            autoclust_graph::DType::Int32 => $f::<i32 $($(, $g)*)?>($($arg),*),
            autoclust_graph::DType::Int64 => $f::<i64 $($(, $g)*)?>($($arg),*),
            d => Err($crate::error::KernelError::DType(d)),
        }
    };
}
/// Dispatches over every native dtype including bool.
macro_rules! dispatch_all {
    ($dt:expr, $f:ident $(::<$($g:ty),*>)? ( $($arg:expr),* )) => {
        match $dt {
            autoclust_graph::DType::Float32 => $f::<f32 $($(, $g)*)?>($($arg),*),
            autoclust_graph::DType::Float64 => $f::<f64 $($(, $g)*)?>($($arg),*),
            autoclust_graph::DType::Int32 => $f::<i32 $($(, $g)*)?>($($arg),*),
            autoclust_graph::DType::Int64 => $f::<i64 $($(, $g)*)?>($($arg),*),
            autoclust_graph::DType::Bool => $f::<bool $($(, $g)*)?>($($arg),*),
            d => Err($crate::error::KernelError::DType(d)),
        }
    };
}
/// Dispatches over the floating-point dtypes.
macro_rules! dispatch_float {
    ($dt:expr, $f:ident $(::<$($g:ty),*>)? ( $($arg:expr),* )) => {
        match $dt {
            autoclust_graph::DType::Float32 => $f::<f32 $($(, $g)*)?>($($arg),*),
            autoclust_graph::DType::Float64 => $f::<f64 $($(, $g)*)?>($($arg),*),
            d => Err($crate::error::KernelError::DType(d)),
        }
    };
}
pub(crate) use {dispatch_all, dispatch_float, dispatch_num};

// ---- attributes ----

pub(crate) fn attr_type(node: &Node, name: &str) -> KResult<DType> {
    node.attr(name).and_then(AttrValue::as_type).ok_or_else(|| KernelError::Attr(name.into()))
}
pub(crate) fn attr_type_or(node: &Node, name: &str, default: DType) -> KResult<DType> {
    match node.attr(name) {
        None => Ok(default),
        Some(a) => a.as_type().ok_or_else(|| KernelError::Attr(name.into())),
    }
}
pub(crate) fn attr_bool_or(node: &Node, name: &str, default: bool) -> KResult<bool> {
    match node.attr(name) {
        None => Ok(default),
        Some(a) => a.as_bool().ok_or_else(|| KernelError::Attr(name.into())),
    }
}
pub(crate) fn attr_int_or(node: &Node, name: &str, default: i64) -> KResult<i64> {
    match node.attr(name) {
        None => Ok(default),
        Some(a) => a.as_int().ok_or_else(|| KernelError::Attr(name.into())),
    }
}
pub(crate) fn attr_float_or(node: &Node, name: &str, default: f32) -> KResult<f32> {
    match node.attr(name) {
        None => Ok(default),
        Some(a) => a.as_float().ok_or_else(|| KernelError::Attr(name.into())),
    }
}
pub(crate) fn attr_ints_or(node: &Node, name: &str) -> KResult<Vec<i64>> {
    match node.attr(name) {
        None => Ok(Vec::new()),
        Some(a) => a.as_int_list().map(<[i64]>::to_vec).ok_or_else(|| KernelError::Attr(name.into())),
    }
}

// ---- common operand helpers ----

/// An integer operand (shape, axis, index) widened to i64.
pub(crate) fn int_values(t: &Tensor, what: &str) -> KResult<Vec<i64>> {
    t.to_i64_vec().ok_or_else(|| KernelError::invalid(format!("{what} must be int32 or int64, got {}", t.dtype)))
}

/// A scalar integer operand.
/// A float32 scalar operand (a threshold, a factor).
pub(crate) fn f32_scalar(t: &Tensor, what: &str) -> KResult<f32> {
    match (t.rank(), t.as_f32()) {
        (0, Some(&[x])) => Ok(x),
        _ => Err(KernelError::invalid(format!(
            "{what} must be a float32 scalar, got {} of shape {}",
            t.dtype,
            shape_ops::debug_shape(&t.shape)
        ))),
    }
}

pub(crate) fn int_scalar(t: &Tensor, what: &str) -> KResult<i64> {
    let v = int_values(t, what)?;
    if v.len() != 1 {
        return Err(KernelError::invalid(format!("{what} must be a scalar, got shape {:?}", t.shape)));
    }
    Ok(v[0])
}

/// Normalises an axis in `[-rank, rank)`.
pub(crate) fn norm_axis(axis: i64, rank: usize, what: &str) -> KResult<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(KernelError::invalid(format!("{what} {axis} is out of range for rank {rank}")));
    }
    Ok(if axis < 0 { (axis + r) as usize } else { axis as usize })
}

/// A shape from an integer operand, each dimension non-negative.
pub(crate) fn shape_values(t: &Tensor, what: &str) -> KResult<Vec<usize>> {
    int_values(t, what)?
        .into_iter()
        .map(|d| usize::try_from(d).map_err(|_| KernelError::invalid(format!("{what} has negative dimension {d}"))))
        .collect()
}

/// An integer tensor of `dtype` (int32 or int64) holding `v`.
pub(crate) fn int_tensor(dtype: DType, shape: Vec<usize>, v: Vec<i64>) -> KResult<Tensor> {
    match dtype {
        DType::Int32 => Ok(tensor_of(shape, v.into_iter().map(|x| x as i32).collect())),
        DType::Int64 => Ok(tensor_of(shape, v)),
        d => Err(KernelError::DType(d)),
    }
}

/// Row-major strides of a shape.
pub(crate) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

#[cfg(test)]
pub(crate) mod tests_support {
    use autoclust_graph::{AttrValue, Node, Tensor};

    use crate::error::KernelError;

    /// A node with no inputs wired (kernels only look at op and attributes).
    pub fn node(op: &str, attrs: &[(&str, AttrValue)]) -> Node {
        Node::unconnected(&format!("test_{op}"), op, attrs)
    }

    /// Runs a node and returns its first output.
    pub fn run1(node: &Node, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
        Ok(super::compute(node, inputs)?.remove(0))
    }
}
