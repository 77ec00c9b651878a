//! TensorScatter{Add,Sub,Update,Max,Min}: the slices a `[..., K]` index tensor addresses,
//! checked as TensorFlow checks them, and the combination of updates into a copy of the
//! tensor (or, for a compiled cluster, into a buffer it already owns).
//!
//! **Invariant:** updates combine in index order, so duplicate indices give TensorFlow's CPU
//! result (accumulated for Add/Sub, the last one for Update).

use std::sync::Arc;

use autoclust_graph::{DType, Tensor, TensorData};

use crate::layout::strides_of;

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
pub trait ScatterElem: Copy + PartialOrd {
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
pub fn scatter<T: ScatterElem>(x: &[T], updates: &[T], offsets: &[usize], slice: usize, kind: ScatterKind) -> Vec<T> {
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

/// Checks a TensorScatter's operands (tensor, indices `[..., K]`, updates) and returns the
/// element offset of every updated slice and the slice length.
pub fn scatter_rows(x: &Tensor, indices: &Tensor, updates: &Tensor) -> Result<(Vec<usize>, usize), String> {
    check_scatter(&x.shape, indices, updates.num_elements()).map_err(|e| match e {
        ScatterMismatch::Updates => {
            err(format!("updates {:?} do not match indices {:?} into {:?}", updates.shape, indices.shape, x.shape))
        }
        ScatterMismatch::Indices(e) => e,
    })
}

/// Why [`check_scatter`] refused a scatter.
#[derive(Debug)]
pub enum ScatterMismatch {
    /// The indices are not integers, too deep, or out of range (TensorFlow's message).
    Indices(String),
    /// The number of updates does not fit the indices.
    Updates,
}

/// [`scatter_rows`] from the scattered tensor's shape and the number of update elements
/// alone: what a scatter checks before it writes anything.
pub fn check_scatter(
    shape: &[usize],
    indices: &Tensor,
    updates: usize,
) -> Result<(Vec<usize>, usize), ScatterMismatch> {
    let idx = indices.to_i64_vec().ok_or_else(|| ScatterMismatch::Indices(err("indices must be int32 or int64")))?;
    let depth = indices.shape.last().copied().unwrap_or(0);
    if depth > shape.len() {
        return Err(ScatterMismatch::Indices(err(format!("index depth {depth} exceeds rank {}", shape.len()))));
    }
    let offsets = if idx.is_empty() {
        Vec::new()
    } else {
        scatter_offsets(shape, &idx, depth).map_err(ScatterMismatch::Indices)?
    };
    let slice: usize = shape[depth..].iter().product();
    if updates != offsets.len() * slice {
        return Err(ScatterMismatch::Updates);
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
pub enum ScatterBase<'r> {
    /// The destination holds garbage: copy every element.
    Full,
    /// The destination already equals the tensor except in these rows (`slice` elements each).
    Rows(&'r [usize], usize),
}

/// TensorScatter into a caller-provided buffer of the tensor's dtype and size (checked):
/// makes `dst` a copy of `x` as `base` says, then combines the updates at `offsets`.
/// Returns false (leaving `dst` untouched) for a dtype it does not handle.
pub fn scatter_into(
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

/// Combines `updates` into a buffer that already holds the scattered tensor (`len`
/// elements of `dtype` at `dst`): a TensorScatter computed in place, into a variable's
/// buffer a compiled cluster was donated. `offsets` and `slice` come from
/// [`scatter_rows`] on that tensor. Returns false (leaving the buffer untouched) for a
/// dtype it does not handle or when `updates` is not of `dtype`.
///
/// # Safety
/// `dst` must point to `len` initialised elements of `dtype` that nothing else reads or
/// writes during the call (`updates` must not share the buffer).
pub unsafe fn scatter_in_buffer(
    dst: *mut u8,
    dtype: DType,
    len: usize,
    updates: &Tensor,
    offsets: &[usize],
    slice: usize,
    kind: ScatterKind,
) -> bool {
    if offsets.iter().any(|&o| o + slice > len) {
        return false;
    }
    macro_rules! arm {
        ($v:ident, $t:ty) => {
            match &updates.data {
                TensorData::$v(u) if u.len() == offsets.len() * slice => {
                    // SAFETY: the caller guarantees `len` elements at `dst`, used by nothing else.
                    let d = unsafe { std::slice::from_raw_parts_mut(dst as *mut $t, len) };
                    scatter_in_place(d, u, offsets, slice, kind);
                    true
                }
                _ => false,
            }
        };
    }
    match dtype {
        DType::Float32 => arm!(F32, f32),
        DType::Float64 => arm!(F64, f64),
        DType::Int32 => arm!(I32, i32),
        DType::Int64 => arm!(I64, i64),
        _ => false,
    }
}

fn err(reason: impl Into<String>) -> String {
    reason.into()
}
