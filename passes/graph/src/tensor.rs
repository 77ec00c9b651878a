//! Immutable tensor values in reference-counted buffers.
//!
//! A [`Tensor`] is a dtype, a fully known shape and a flat row-major buffer
//! behind an `Arc`. Cloning a tensor never copies its data; a kernel may
//! write into a buffer in place only through [`TensorData::make_mut_f32`] and
//! friends, which copy when the buffer is shared — so a value, once visible
//! to another op or variable, never changes (TensorFlow's buffer-forwarding rule).

use std::fmt;
use std::sync::Arc;

use crate::DType;

/// The flat element buffer of a tensor.
#[derive(Clone, Debug, PartialEq)]
pub enum TensorData {
    F32(Arc<Vec<f32>>),
    F64(Arc<Vec<f64>>),
    I32(Arc<Vec<i32>>),
    I64(Arc<Vec<i64>>),
    Bool(Arc<Vec<bool>>),
    /// `DT_STRING` elements as byte strings.
    Str(Arc<Vec<Vec<u8>>>),
    /// Any other fixed-width type (uint8, float16, complex64, …) as its
    /// little-endian bytes, so constants of those types survive a round trip.
    Raw(Arc<Vec<u8>>),
    /// A `DT_VARIANT` scalar holding a TensorList.
    List(Arc<TensorList>),
    /// A `DT_VARIANT` scalar holding an Optional (`OptionalFromValue`/`OptionalNone`):
    /// its components, or none. TF2's `cond_v2` passes a branch's intermediates to the
    /// gradient's branch this way.
    Optional(Arc<Option<Vec<Tensor>>>),
}

/// The TensorList ops (TensorFlow's `list_kernels.cc`) whose kernels the runtime has and
/// whose types the compiler tracks inside compiled bodies (`autoclust_compiler::lists`).
pub const TENSOR_LIST_OPS: &[&str] = &[
    "EmptyTensorList",
    "TensorListReserve",
    "TensorListFromTensor",
    "TensorListGetItem",
    "TensorListSetItem",
    "TensorListPushBack",
    "TensorListPopBack",
    "TensorListStack",
    "TensorListGather",
    "TensorListLength",
    "TensorListElementShape",
    "TensorListResize",
    "TensorListScatterIntoExistingList",
];

/// A TensorList's `element_shape` operand: a vector of dimensions (−1: unknown) or the scalar
/// −1 (unknown rank: `Some(None)`); `None` when it is neither (or not integers). The
/// interpreter's list kernels and the compiler's list types share it.
#[allow(clippy::option_option)]
pub fn element_shape_operand(t: &Tensor) -> Option<Option<Vec<i64>>> {
    let d = t.to_i64_vec()?;
    match t.shape.len() {
        0 if d == [-1] => Some(None),
        1 => Some(Some(d)),
        _ => None,
    }
}

/// The most specific element shape two partial shapes (`None` an unknown rank, −1 an unknown
/// dimension) both describe — TensorFlow's `MergeWith` for a list's `element_shape` — or
/// `None` when they conflict. The interpreter's list kernels and the compiler's list types
/// share it.
#[allow(clippy::option_option)]
pub fn merge_element_shapes(a: &Option<Vec<i64>>, b: &Option<Vec<i64>>) -> Option<Option<Vec<i64>>> {
    match (a, b) {
        (None, x) | (x, None) => Some(x.clone()),
        (Some(x), Some(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .map(|(&p, &q)| match (p, q) {
                (-1, d) | (d, -1) => Some(d),
                (p, q) if p == q => Some(p),
                _ => None,
            })
            .collect::<Option<Vec<i64>>>()
            .map(Some),
        _ => None,
    }
}

/// TensorFlow's `TensorList`, the value of a `DT_VARIANT` scalar: what `tf.TensorArray`,
/// Keras RNN loops and while-loop gradient accumulators are made of. Immutable like every
/// tensor value: list ops build a new list (sharing the element tensors).
///
/// Invariant: `summary` describes `items` ([`ItemSummary`]); the elements change only
/// through the methods that keep it so, which is why `items` is private.
#[derive(Clone, Debug)]
pub struct TensorList {
    pub element_dtype: DType,
    /// What is known of the elements' shape: `None` for an unknown rank, −1 for an
    /// unknown dimension.
    pub element_shape: Option<Vec<i64>>,
    /// The elements; `None` for a slot reserved but not yet set.
    items: Vec<Option<Tensor>>,
    summary: ItemSummary,
}

/// Equal lists hold equal elements; how each was built (its summary) does not matter.
impl PartialEq for TensorList {
    fn eq(&self, other: &TensorList) -> bool {
        self.element_dtype == other.element_dtype
            && self.element_shape == other.element_shape
            && self.items == other.items
    }
}

/// What the set elements of a list have in common, kept as the list is built so that a
/// list's compile-time type (`autoclust_compiler::lists::ListType::of_value`, read on every
/// call of a compiled loop body taking the list) costs O(1), not a scan of the elements.
///
/// Invariants (a sound description, not always the least one): every set element's shape
/// is an instance of `shape` (a join over every element set since the list was made: one
/// popped or overwritten since may have widened it); when `konst` is `Some(v)`, every set
/// element is the small integer tensor `v`; `unset` is exactly the number of unset slots.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ItemSummary {
    /// The join of the set elements' shapes (`None` while none was set; `Some(None)` when
    /// their ranks differ; −1 a dimension that differs).
    pub shape: Option<Option<Vec<i64>>>,
    /// The values every set element has, when each is one small integer constant
    /// ([`small_int_values`]: a `Shape` a while-loop's gradient accumulates per iteration).
    pub konst: Option<Vec<i64>>,
    /// The number of unset slots.
    pub unset: usize,
}

/// The most elements a list element may have for [`ItemSummary::konst`] to record it.
pub const SMALL_INT_MAX_ELEMENTS: usize = 8;

/// The values of an int32/int64 tensor of at most [`SMALL_INT_MAX_ELEMENTS`] elements (a
/// shape), the only element values a list's type records.
pub fn small_int_values(t: &Tensor) -> Option<Vec<i64>> {
    if !matches!(t.dtype, DType::Int32 | DType::Int64) || t.num_elements() > SMALL_INT_MAX_ELEMENTS {
        return None;
    }
    t.to_i64_vec()
}

impl ItemSummary {
    /// The summary after `item` is set (in a new slot or over another element).
    fn set(&mut self, item: &Tensor) {
        let s: Vec<i64> = item.shape.iter().map(|&d| d as i64).collect();
        let value = small_int_values(item);
        match &mut self.shape {
            None => {
                self.shape = Some(Some(s));
                self.konst = value;
            }
            Some(joined) => {
                *joined = match joined.take() {
                    Some(j) if j.len() == s.len() => {
                        Some(j.iter().zip(&s).map(|(&p, &q)| if p == q { p } else { -1 }).collect())
                    }
                    _ => None,
                };
                if self.konst != value {
                    self.konst = None;
                }
            }
        }
    }
}

impl TensorList {
    /// A list of these elements (`None`: an unset slot).
    pub fn new(element_dtype: DType, element_shape: Option<Vec<i64>>, items: Vec<Option<Tensor>>) -> TensorList {
        let mut summary = ItemSummary::default();
        for x in &items {
            match x {
                Some(t) => summary.set(t),
                None => summary.unset += 1,
            }
        }
        TensorList { element_dtype, element_shape, items, summary }
    }

    /// A list of this one's element dtype and shape holding `items` instead.
    pub fn with_items(&self, items: Vec<Option<Tensor>>) -> TensorList {
        TensorList::new(self.element_dtype, self.element_shape.clone(), items)
    }

    /// The elements; `None` for a slot reserved but not yet set.
    pub fn items(&self) -> &[Option<Tensor>] {
        &self.items
    }

    /// The number of slots, set or not.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// What the set elements have in common (O(1)).
    pub fn summary(&self) -> &ItemSummary {
        &self.summary
    }

    /// Appends a set element.
    pub fn push(&mut self, item: Tensor) {
        self.summary.set(&item);
        self.items.push(Some(item));
    }

    /// Removes the last slot (`None`: the list is empty; `Some(None)`: the slot was unset).
    pub fn pop(&mut self) -> Option<Option<Tensor>> {
        let last = self.items.pop()?;
        if last.is_none() {
            self.summary.unset -= 1;
        }
        Some(last)
    }

    /// Sets slot `i`, which must exist, returning what it held.
    ///
    /// # Panics
    /// When `i` is out of range (callers check it first, with TensorFlow's error).
    pub fn set(&mut self, i: usize, item: Tensor) -> Option<Tensor> {
        self.summary.set(&item);
        let old = self.items[i].replace(item);
        if old.is_none() {
            self.summary.unset -= 1;
        }
        old
    }

    /// Grows (with unset slots) or shrinks the list to `n` slots.
    pub fn resize(&mut self, n: usize) {
        if n < self.items.len() {
            self.summary.unset -= self.items[n..].iter().filter(|x| x.is_none()).count();
        } else {
            self.summary.unset += n - self.items.len();
        }
        self.items.resize(n, None);
    }
}

impl TensorData {
    /// The f32 buffer for writing, copied first if anyone else holds it.
    pub fn make_mut_f32(&mut self) -> Option<&mut Vec<f32>> {
        match self {
            TensorData::F32(v) => Some(Arc::make_mut(v)),
            _ => None,
        }
    }
    /// The f64 buffer for writing, copied first if shared.
    pub fn make_mut_f64(&mut self) -> Option<&mut Vec<f64>> {
        match self {
            TensorData::F64(v) => Some(Arc::make_mut(v)),
            _ => None,
        }
    }
    /// The i32 buffer for writing, copied first if shared.
    pub fn make_mut_i32(&mut self) -> Option<&mut Vec<i32>> {
        match self {
            TensorData::I32(v) => Some(Arc::make_mut(v)),
            _ => None,
        }
    }
    /// The i64 buffer for writing, copied first if shared.
    pub fn make_mut_i64(&mut self) -> Option<&mut Vec<i64>> {
        match self {
            TensorData::I64(v) => Some(Arc::make_mut(v)),
            _ => None,
        }
    }
    /// Whether this is the only reference to the buffer (so it may be reused in place).
    pub fn is_unique(&self) -> bool {
        match self {
            TensorData::F32(v) => Arc::strong_count(v) == 1,
            TensorData::F64(v) => Arc::strong_count(v) == 1,
            TensorData::I32(v) => Arc::strong_count(v) == 1,
            TensorData::I64(v) => Arc::strong_count(v) == 1,
            TensorData::Bool(v) => Arc::strong_count(v) == 1,
            TensorData::Str(v) => Arc::strong_count(v) == 1,
            TensorData::Raw(v) => Arc::strong_count(v) == 1,
            TensorData::List(v) => Arc::strong_count(v) == 1,
            TensorData::Optional(v) => Arc::strong_count(v) == 1,
        }
    }
}

/// A dense tensor value.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub data: TensorData,
}

/// Why a tensor could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TensorError {
    #[error("shape {shape:?} has {expected} elements but {got} values were given")]
    ElementCount { shape: Vec<usize>, expected: usize, got: usize },
    #[error("dtype {dtype} cannot hold these values")]
    DTypeMismatch { dtype: DType },
    /// The tensor would be past the size budget ([`crate::limits`]).
    #[error(transparent)]
    TooLarge(#[from] crate::limits::SizeError),
}

impl Tensor {
    /// A `DT_VARIANT` scalar holding `list`.
    pub fn from_list(list: TensorList) -> Tensor {
        Tensor { dtype: DType::Variant, shape: Vec::new(), data: TensorData::List(Arc::new(list)) }
    }

    /// A `DT_VARIANT` scalar holding an Optional of `components`.
    pub fn from_optional(components: Option<Vec<Tensor>>) -> Tensor {
        Tensor { dtype: DType::Variant, shape: Vec::new(), data: TensorData::Optional(Arc::new(components)) }
    }

    /// The Optional this variant scalar holds.
    pub fn as_optional(&self) -> Option<&Option<Vec<Tensor>>> {
        match &self.data {
            TensorData::Optional(o) => Some(o),
            _ => None,
        }
    }

    /// The TensorList this variant scalar holds.
    pub fn as_list(&self) -> Option<&TensorList> {
        match &self.data {
            TensorData::List(l) => Some(l),
            _ => None,
        }
    }

    /// TensorFlow's `ToBool` of a loop or branch predicate: a non-scalar is true when it has
    /// elements; a scalar bool is itself, a number is true when non-zero, a string when
    /// non-empty. `None` for a scalar of another dtype.
    pub fn truth(&self) -> Option<bool> {
        if !self.shape.is_empty() {
            return Some(self.num_elements() > 0);
        }
        match &self.data {
            TensorData::Bool(v) => v.first().copied(),
            TensorData::Str(v) => v.first().map(|s| !s.is_empty()),
            TensorData::Raw(b) => Some(b.iter().any(|&x| x != 0)),
            _ => self.to_f64_vec().and_then(|v| v.first().copied()).map(|x| x != 0.0),
        }
    }

    pub fn num_elements(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    pub fn from_f32(shape: Vec<usize>, v: Vec<f32>) -> Result<Tensor, TensorError> {
        Self::check(&shape, v.len())?;
        Ok(Tensor { dtype: DType::Float32, shape, data: TensorData::F32(Arc::new(v)) })
    }
    pub fn from_f64(shape: Vec<usize>, v: Vec<f64>) -> Result<Tensor, TensorError> {
        Self::check(&shape, v.len())?;
        Ok(Tensor { dtype: DType::Float64, shape, data: TensorData::F64(Arc::new(v)) })
    }
    pub fn from_i32(shape: Vec<usize>, v: Vec<i32>) -> Result<Tensor, TensorError> {
        Self::check(&shape, v.len())?;
        Ok(Tensor { dtype: DType::Int32, shape, data: TensorData::I32(Arc::new(v)) })
    }
    pub fn from_i64(shape: Vec<usize>, v: Vec<i64>) -> Result<Tensor, TensorError> {
        Self::check(&shape, v.len())?;
        Ok(Tensor { dtype: DType::Int64, shape, data: TensorData::I64(Arc::new(v)) })
    }
    pub fn from_bool(shape: Vec<usize>, v: Vec<bool>) -> Result<Tensor, TensorError> {
        Self::check(&shape, v.len())?;
        Ok(Tensor { dtype: DType::Bool, shape, data: TensorData::Bool(Arc::new(v)) })
    }
    pub fn from_strings(shape: Vec<usize>, v: Vec<Vec<u8>>) -> Result<Tensor, TensorError> {
        Self::check(&shape, v.len())?;
        Ok(Tensor { dtype: DType::String, shape, data: TensorData::Str(Arc::new(v)) })
    }
    /// A tensor of a type held as raw little-endian bytes.
    pub fn from_raw(dtype: DType, shape: Vec<usize>, bytes: Vec<u8>) -> Result<Tensor, TensorError> {
        let width = dtype.size_of().ok_or(TensorError::DTypeMismatch { dtype })?;
        let n = crate::limits::checked_elements(shape.iter().map(|&d| d as u64)).and_then(|n| usize::try_from(n).ok());
        if n.and_then(|n| n.checked_mul(width)) != Some(bytes.len()) {
            let n = n.unwrap_or(usize::MAX);
            return Err(TensorError::ElementCount { shape, expected: n, got: bytes.len() / width });
        }
        Ok(Tensor { dtype, shape, data: TensorData::Raw(Arc::new(bytes)) })
    }

    /// A tensor of `dtype` from its elements' little-endian bytes, in the storage the
    /// runtime uses for that dtype (typed vectors for float32/64, int32/64 and bool — a
    /// nonzero byte is `true` —, raw bytes for the rest).
    pub fn from_le_bytes(dtype: DType, shape: Vec<usize>, bytes: &[u8]) -> Result<Tensor, TensorError> {
        fn each<const W: usize, T>(b: &[u8], f: impl Fn([u8; W]) -> T) -> Vec<T> {
            b.chunks_exact(W).map(|c| f(c.try_into().expect("W bytes"))).collect()
        }
        let raw = Tensor::from_raw(dtype, shape, bytes.to_vec())?;
        let data = match dtype {
            DType::Float32 => TensorData::F32(Arc::new(each(bytes, f32::from_le_bytes))),
            DType::Float64 => TensorData::F64(Arc::new(each(bytes, f64::from_le_bytes))),
            DType::Int32 => TensorData::I32(Arc::new(each(bytes, i32::from_le_bytes))),
            DType::Int64 => TensorData::I64(Arc::new(each(bytes, i64::from_le_bytes))),
            DType::Bool => TensorData::Bool(Arc::new(bytes.iter().map(|&b| b != 0).collect())),
            _ => return Ok(raw),
        };
        Ok(Tensor { data, ..raw })
    }

    /// The little-endian bytes of a fixed-width tensor's elements (bool: one byte each);
    /// `None` for strings, lists and optionals.
    pub fn to_le_bytes(&self) -> Option<Vec<u8>> {
        Some(match &self.data {
            TensorData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            TensorData::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            TensorData::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            TensorData::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            TensorData::Bool(v) => v.iter().map(|&x| x as u8).collect(),
            TensorData::Raw(b) => b.to_vec(),
            TensorData::Str(_) | TensorData::List(_) | TensorData::Optional(_) => return None,
        })
    }

    pub fn scalar_f32(x: f32) -> Tensor {
        Tensor { dtype: DType::Float32, shape: vec![], data: TensorData::F32(Arc::new(vec![x])) }
    }
    pub fn scalar_f64(x: f64) -> Tensor {
        Tensor { dtype: DType::Float64, shape: vec![], data: TensorData::F64(Arc::new(vec![x])) }
    }
    pub fn scalar_i32(x: i32) -> Tensor {
        Tensor { dtype: DType::Int32, shape: vec![], data: TensorData::I32(Arc::new(vec![x])) }
    }
    pub fn scalar_i64(x: i64) -> Tensor {
        Tensor { dtype: DType::Int64, shape: vec![], data: TensorData::I64(Arc::new(vec![x])) }
    }
    pub fn scalar_bool(x: bool) -> Tensor {
        Tensor { dtype: DType::Bool, shape: vec![], data: TensorData::Bool(Arc::new(vec![x])) }
    }

    /// A tensor of `shape` filled with zeros of `dtype` (false for bool, "" for string).
    /// Refused, before allocating, past the size budget ([`crate::limits`]).
    pub fn zeros(dtype: DType, shape: Vec<usize>) -> Result<Tensor, TensorError> {
        let n = crate::limits::tensor_elements(dtype, &shape)?;
        let data = match dtype {
            DType::Float32 => TensorData::F32(Arc::new(vec![0.0; n])),
            DType::Float64 => TensorData::F64(Arc::new(vec![0.0; n])),
            DType::Int32 => TensorData::I32(Arc::new(vec![0; n])),
            DType::Int64 => TensorData::I64(Arc::new(vec![0; n])),
            DType::Bool => TensorData::Bool(Arc::new(vec![false; n])),
            DType::String => TensorData::Str(Arc::new(vec![Vec::new(); n])),
            d => TensorData::Raw(Arc::new(vec![0; n * d.size_of().ok_or(TensorError::DTypeMismatch { dtype })?])),
        };
        Ok(Tensor { dtype, shape, data })
    }

    fn check(shape: &[usize], got: usize) -> Result<(), TensorError> {
        let expected = crate::limits::checked_elements(shape.iter().map(|&d| d as u64));
        if expected != Some(got as u64) {
            let expected = expected.and_then(|n| usize::try_from(n).ok()).unwrap_or(usize::MAX);
            return Err(TensorError::ElementCount { shape: shape.to_vec(), expected, got });
        }
        Ok(())
    }

    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.data {
            TensorData::F32(v) => Some(v),
            _ => None,
        }
    }
    pub fn as_f64(&self) -> Option<&[f64]> {
        match &self.data {
            TensorData::F64(v) => Some(v),
            _ => None,
        }
    }
    pub fn as_i32(&self) -> Option<&[i32]> {
        match &self.data {
            TensorData::I32(v) => Some(v),
            _ => None,
        }
    }
    pub fn as_i64(&self) -> Option<&[i64]> {
        match &self.data {
            TensorData::I64(v) => Some(v),
            _ => None,
        }
    }
    pub fn as_bool(&self) -> Option<&[bool]> {
        match &self.data {
            TensorData::Bool(v) => Some(v),
            _ => None,
        }
    }
    /// The elements of a string tensor, as bytes.
    pub fn as_strings(&self) -> Option<&[Vec<u8>]> {
        match &self.data {
            TensorData::Str(v) => Some(v),
            _ => None,
        }
    }

    /// Integer elements widened to i64 (for shape, axis and index operands).
    pub fn to_i64_vec(&self) -> Option<Vec<i64>> {
        match &self.data {
            TensorData::I32(v) => Some(v.iter().map(|&x| x as i64).collect()),
            TensorData::I64(v) => Some(v.to_vec()),
            _ => None,
        }
    }

    /// Elements as f64 (for printing and comparisons in tests).
    pub fn to_f64_vec(&self) -> Option<Vec<f64>> {
        Some(match &self.data {
            TensorData::F32(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::F64(v) => v.to_vec(),
            TensorData::I32(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::I64(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::Bool(v) => v.iter().map(|&x| x as u8 as f64).collect(),
            // uint8 (images), float16 and bfloat16 from their raw little-endian bytes.
            TensorData::Raw(b) if self.dtype == DType::UInt8 => b.iter().map(|&x| x as f64).collect(),
            TensorData::Raw(b) if self.dtype == DType::QUInt8 => b.iter().map(|&x| x as f64).collect(),
            TensorData::Raw(b) if matches!(self.dtype, DType::Int8 | DType::QInt8) => {
                b.iter().map(|&x| x as i8 as f64).collect()
            }
            // The other narrow and unsigned integers (and the quantized types), little-endian.
            TensorData::Raw(b) if matches!(self.dtype, DType::Int16 | DType::QInt16) => {
                b.chunks_exact(2).map(|c| i16::from_le_bytes([c[0], c[1]]) as f64).collect()
            }
            TensorData::Raw(b) if matches!(self.dtype, DType::UInt16 | DType::QUInt16) => {
                b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]) as f64).collect()
            }
            TensorData::Raw(b) if self.dtype == DType::QInt32 => {
                b.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64).collect()
            }
            TensorData::Raw(b) if self.dtype == DType::UInt32 => {
                b.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64).collect()
            }
            TensorData::Raw(b) if self.dtype == DType::UInt64 => {
                b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")) as f64).collect()
            }
            TensorData::Raw(b) if self.dtype.is_half() && b.len().is_multiple_of(2) => {
                let wide = if self.dtype == DType::BFloat16 {
                    crate::half::bf16_bytes_to_f32(b)
                } else {
                    crate::half::f16_bytes_to_f32(b)
                };
                wide.into_iter().map(f64::from).collect()
            }
            _ => return None,
        })
    }

    /// Bit-exact equality (NaN equals NaN with the same bits): what "printing
    /// then parsing is the identity" means for constants.
    pub fn bit_eq(&self, other: &Tensor) -> bool {
        if self.dtype != other.dtype || self.shape != other.shape {
            return false;
        }
        match (&self.data, &other.data) {
            (TensorData::F32(a), TensorData::F32(b)) => {
                a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            (TensorData::F64(a), TensorData::F64(b)) => {
                a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            (a, b) => a == b,
        }
    }
}

/// Constants with at least this many elements are kept compact by the readers when
/// their file gives fewer values than elements (TensorFlow's splat rule). Smaller ones
/// are expanded at once: cheap, and every pass sees them as ordinary tensors.
pub const COMPACT_MIN_ELEMENTS: usize = 1024;

/// A constant as TensorFlow's `TensorProto` writes a large splat or a tail of repeats:
/// the given values, then the last one repeated to fill the shape (zeros when none is
/// given). Readers keep big constants this way ([`CompactTensor::or_dense`]) so that a
/// few bytes of a file declaring a huge tensor cost a few bytes of memory — whatever
/// command reads it — and a kernel that needs the values expands them through the size
/// budget ([`CompactTensor::expand`]), which refuses a tensor past `--max-tensor-bytes`
/// with an error naming the node instead of aborting on a failed allocation.
#[derive(Clone, Debug, PartialEq)]
pub struct CompactTensor {
    /// The declared shape; its element count fits in 64 bits (checked on construction).
    pub shape: Vec<usize>,
    /// The values given: a 1-D tensor of the constant's dtype with fewer elements than
    /// the shape holds.
    pub values: Tensor,
}

impl CompactTensor {
    /// The constant `values` (1-D, the given prefix) repeated to `shape`: compact when the
    /// shape holds at least [`COMPACT_MIN_ELEMENTS`] elements and more than the values
    /// given, else expanded (within the budget).
    pub fn or_dense(values: Tensor, shape: Vec<usize>) -> Result<crate::AttrValue, TensorError> {
        let dtype = values.dtype;
        let count = crate::limits::checked_elements(shape.iter().map(|&d| d as u64));
        let Some(n) = count.and_then(|n| usize::try_from(n).ok()) else {
            return Err(
                crate::limits::SizeError::Overflow { dtype, shape: shape.iter().map(|&d| d as u64).collect() }.into()
            );
        };
        if values.num_elements() > n {
            return Err(TensorError::ElementCount { shape, expected: n, got: values.num_elements() });
        }
        let compact = CompactTensor { shape, values };
        let native = !matches!(compact.values.data, TensorData::Raw(_) | TensorData::List(_) | TensorData::Optional(_));
        if native && n >= COMPACT_MIN_ELEMENTS && compact.values.num_elements() < n && compact.values.rank() == 1 {
            return Ok(crate::AttrValue::Compact(compact));
        }
        compact.expand().map(crate::AttrValue::Tensor)
    }

    pub fn dtype(&self) -> DType {
        self.values.dtype
    }

    /// The declared element count (fits in `usize`: checked on construction).
    pub fn num_elements(&self) -> usize {
        self.shape.iter().product()
    }

    /// The one value every element has, if it is a splat (one value or none given).
    pub fn splat_value(&self) -> Option<Tensor> {
        match self.values.num_elements() {
            0 => Tensor::zeros(self.dtype(), Vec::new()).ok(),
            1 => Some(Tensor { dtype: self.dtype(), shape: Vec::new(), data: self.values.data.clone() }),
            _ => None,
        }
    }

    /// The dense tensor, refused past the size budget before anything is allocated.
    pub fn expand(&self) -> Result<Tensor, TensorError> {
        let dtype = self.dtype();
        let n = crate::limits::tensor_elements(dtype, &self.shape)?;
        fn fill<T: Clone>(given: &[T], n: usize, zero: T) -> Arc<Vec<T>> {
            let mut v = Vec::with_capacity(n);
            v.extend_from_slice(&given[..given.len().min(n)]);
            let last = given.last().cloned().unwrap_or(zero);
            v.resize(n, last);
            Arc::new(v)
        }
        let data = match &self.values.data {
            TensorData::F32(v) => TensorData::F32(fill(v, n, 0.0)),
            TensorData::F64(v) => TensorData::F64(fill(v, n, 0.0)),
            TensorData::I32(v) => TensorData::I32(fill(v, n, 0)),
            TensorData::I64(v) => TensorData::I64(fill(v, n, 0)),
            TensorData::Bool(v) => TensorData::Bool(fill(v, n, false)),
            TensorData::Str(v) => TensorData::Str(fill(v, n, Vec::new())),
            TensorData::Raw(b) => {
                let w = dtype.size_of().ok_or(TensorError::DTypeMismatch { dtype })?;
                let elems: Vec<&[u8]> = b.chunks_exact(w).collect();
                let mut out = Vec::with_capacity(n * w);
                for k in 0..n {
                    match elems.get(k).or(elems.last()) {
                        Some(e) => out.extend_from_slice(e),
                        None => out.resize(out.len() + w, 0),
                    }
                }
                TensorData::Raw(Arc::new(out))
            }
            TensorData::List(_) | TensorData::Optional(_) => return Err(TensorError::DTypeMismatch { dtype }),
        };
        Ok(Tensor { dtype, shape: self.shape.clone(), data })
    }

    /// Bit-exact equality of the declared values.
    pub fn bit_eq(&self, other: &CompactTensor) -> bool {
        self.shape == other.shape && self.values.bit_eq(&other.values)
    }
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{:?}", self.dtype, self.shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AttrValue;

    #[test]
    fn compact_constants_expand_with_tensorflows_splat_rule() {
        let given = Tensor::from_i32(vec![2], vec![3, 4]).unwrap();
        let AttrValue::Compact(c) = CompactTensor::or_dense(given, vec![32, 64]).unwrap() else { panic!("compact") };
        assert_eq!(c.num_elements(), 2048);
        assert_eq!(c.splat_value(), None);
        let t = c.expand().unwrap();
        assert_eq!((t.shape.as_slice(), &t.as_i32().unwrap()[..3]), (&[32, 64][..], &[3, 4, 4][..]));
        assert!(t.as_i32().unwrap()[3..].iter().all(|&x| x == 4));
        // No values: zeros; one value: a splat.
        let none = Tensor::from_f32(vec![0], vec![]).unwrap();
        let AttrValue::Compact(z) = CompactTensor::or_dense(none, vec![4096]).unwrap() else { panic!("compact") };
        assert_eq!(z.splat_value(), Some(Tensor::scalar_f32(0.0)));
        assert!(z.expand().unwrap().as_f32().unwrap().iter().all(|&x| x.to_bits() == 0));
        // Small, or fully given: dense.
        let small = Tensor::from_f32(vec![1], vec![1.5]).unwrap();
        assert_eq!(
            CompactTensor::or_dense(small, vec![4]).unwrap(),
            AttrValue::Tensor(Tensor::from_f32(vec![4], vec![1.5; 4]).unwrap())
        );
        // Raw-byte dtypes are expanded (the native format writes them as bytes).
        let raw = Tensor::from_raw(DType::UInt8, vec![1], vec![9]).unwrap();
        let AttrValue::Tensor(r) = CompactTensor::or_dense(raw, vec![2048]).unwrap() else { panic!("dense") };
        assert_eq!(r.num_elements(), 2048);
        // More values than elements, or an uncountable shape: errors.
        let three = Tensor::from_f32(vec![3], vec![1.0; 3]).unwrap();
        assert!(CompactTensor::or_dense(three.clone(), vec![2]).is_err());
        assert!(matches!(
            CompactTensor::or_dense(three, vec![usize::MAX, 4]),
            Err(TensorError::TooLarge(crate::limits::SizeError::Overflow { .. }))
        ));
    }
}
