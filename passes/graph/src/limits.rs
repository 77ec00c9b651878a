//! The resource budget on one tensor (`docs/contract.md` §1, `--max-tensor-bytes`).
//!
//! Every size that comes from a file or from a value computed at run time (a
//! constant's declared shape, the `dims` of `Fill`, the multiples of `Tile`,
//! the bounds of `Range`, the shape of a random op, …) goes through
//! [`tensor_bytes`] before anything is allocated: element counts are computed
//! with checked arithmetic, and a tensor whose buffer would exceed the budget
//! is refused with a [`SizeError`] that the caller turns into an error naming
//! its node. So a hostile shape is an error, never an abort on a failed
//! allocation or a panic on an overflowing multiplication.
//!
//! The budget is one process-wide number (default [`DEFAULT_MAX_TENSOR_BYTES`]),
//! set once by the command line before any graph is read.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::DType;

/// The default budget for one tensor's buffer: 2 GiB, TensorFlow's own limit on a
/// serialized `GraphDef` (so no constant TensorFlow can write is refused) and well
/// under the memory of the machines autoclust runs on.
pub const DEFAULT_MAX_TENSOR_BYTES: u64 = 1 << 31;

/// How many iterations a functional `While` may run before the step fails (interpreted or
/// compiled alike), unless `--max-loop-iterations` says otherwise: a loop that never ends is
/// an error, never a hang.
pub const DEFAULT_MAX_LOOP_ITERATIONS: u64 = 10_000_000;

static MAX_TENSOR_BYTES: AtomicU64 = AtomicU64::new(DEFAULT_MAX_TENSOR_BYTES);

/// The current budget for one tensor, in bytes.
pub fn max_tensor_bytes() -> u64 {
    MAX_TENSOR_BYTES.load(Ordering::Relaxed)
}

/// Sets the budget for one tensor (the CLI's `--max-tensor-bytes`).
pub fn set_max_tensor_bytes(bytes: u64) {
    MAX_TENSOR_BYTES.store(bytes, Ordering::Relaxed);
}

/// How deeply attribute values may nest: an attribute's value is level 1, a value
/// inside a function attribute's attributes (`@f{a = …}`, `func { attr { … } }`,
/// also inside a list of functions) one level deeper. TensorFlow never emits
/// more than a few levels; its own protobuf parser stops at 100 nested
/// messages. The readers refuse deeper values with an error naming the node
/// and attribute, so no printer, comparison or walk over a value ever recurses
/// deeper than this.
pub const MAX_ATTR_DEPTH: usize = 100;

/// How deeply the messages of a `GraphDef` (`.pbtxt` or `.pb`) may nest:
/// room for [`MAX_ATTR_DEPTH`] levels of attributes (up to three messages
/// each: `AttrValue`, `ListValue`, `NameAttrList`) inside a function library,
/// and a bound on the other recursive messages (`FullTypeDef`).
pub const MAX_MESSAGE_DEPTH: usize = 400;

/// How deeply function calls may nest: a node calling `f` whose body calls `g` is
/// two levels. The runtime, the inliner and the body clusterer each descend once per
/// level, so a deeper chain (found by fuzzing: 10,000 functions each calling the
/// next) is refused when the graph is loaded ([`crate::Graph::check_call_depth`]).
/// TensorFlow's own graphs nest a few levels.
pub const MAX_CALL_DEPTH: usize = 1000;

/// How many inputs or outputs one list argument of a node may have (`N`, `num_split`,
/// …, from an attribute): TensorFlow's graphs use a few thousand at most; an attribute
/// past this is an error naming the node, not a count that sizes an allocation.
pub const MAX_NODE_ARITY: usize = 1 << 20;

/// Why a tensor of some shape may not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// The element count or byte count does not fit in 64 bits.
    #[error("tensor {dtype}{shape:?} has more elements than can be counted")]
    Overflow { dtype: DType, shape: Vec<u64> },
    /// The buffer would exceed the budget.
    #[error("tensor {dtype}{shape:?} needs {bytes} bytes, more than the limit of {limit} bytes (--max-tensor-bytes)")]
    TooLarge { dtype: DType, shape: Vec<u64>, bytes: u64, limit: u64 },
}

/// Bytes one element of `dtype` takes in memory (strings and variants count
/// their handle, not their contents).
pub fn element_bytes(dtype: DType) -> u64 {
    dtype.size_of().unwrap_or(std::mem::size_of::<Vec<u8>>()) as u64
}

/// The element count of `shape`, if it fits in 64 bits.
pub fn checked_elements<I: IntoIterator<Item = u64>>(shape: I) -> Option<u64> {
    shape.into_iter().try_fold(1u64, |a, d| a.checked_mul(d))
}

/// Checks that a `dtype` tensor of `shape` fits the budget; returns its element
/// count. Any zero dimension makes an empty tensor, which always fits.
pub fn tensor_elements(dtype: DType, shape: &[usize]) -> Result<usize, SizeError> {
    let dims: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    let n = check_dims(dtype, &dims)?;
    // The budget is below `usize::MAX` on every supported (64-bit) target; the
    // conversion only fails if someone sets an absurd budget on a 32-bit one.
    usize::try_from(n).map_err(|_| SizeError::Overflow { dtype, shape: dims })
}

/// [`tensor_elements`] for dimensions given as TensorFlow's signed sizes
/// (negative sizes are the caller's to reject first; here they count as huge).
pub fn tensor_elements_i64(dtype: DType, shape: &[i64]) -> Result<usize, SizeError> {
    let dims: Vec<u64> = shape.iter().map(|&d| if d < 0 { u64::MAX } else { d as u64 }).collect();
    let n = check_dims(dtype, &dims)?;
    usize::try_from(n).map_err(|_| SizeError::Overflow { dtype, shape: dims })
}

fn check_dims(dtype: DType, dims: &[u64]) -> Result<u64, SizeError> {
    if dims.contains(&0) {
        return Ok(0);
    }
    let overflow = || SizeError::Overflow { dtype, shape: dims.to_vec() };
    let n = checked_elements(dims.iter().copied()).ok_or_else(overflow)?;
    let bytes = n.checked_mul(element_bytes(dtype)).ok_or_else(overflow)?;
    let limit = max_tensor_bytes();
    if bytes > limit {
        return Err(SizeError::TooLarge { dtype, shape: dims.to_vec(), bytes, limit });
    }
    Ok(n)
}

/// Checks a tensor of `n` elements given only its count (a `Range` before its shape exists).
pub fn check_count(dtype: DType, n: u64) -> Result<usize, SizeError> {
    let n = check_dims(dtype, &[n])?;
    usize::try_from(n).map_err(|_| SizeError::Overflow { dtype, shape: vec![n] })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_refuses() {
        assert_eq!(tensor_elements(DType::Float32, &[2, 3]), Ok(6));
        assert_eq!(tensor_elements(DType::Float32, &[]), Ok(1));
        // An empty tensor fits whatever its other dimensions.
        assert_eq!(tensor_elements(DType::Float32, &[0, usize::MAX, usize::MAX]), Ok(0));
        let e = tensor_elements(DType::Float32, &[1_000_000, 1_000_000]).unwrap_err();
        assert_eq!(
            e,
            SizeError::TooLarge {
                dtype: DType::Float32,
                shape: vec![1_000_000, 1_000_000],
                bytes: 4_000_000_000_000,
                limit: DEFAULT_MAX_TENSOR_BYTES
            }
        );
        assert!(e.to_string().contains("needs 4000000000000 bytes"), "{e}");
        // 2^62 * 4 elements overflow 64 bits: no wrapped count.
        let e = tensor_elements_i64(DType::Float32, &[1 << 62, 4, 1]).unwrap_err();
        assert!(matches!(e, SizeError::Overflow { .. }), "{e}");
        // 2^62 float elements count, but their bytes do not.
        assert!(matches!(tensor_elements_i64(DType::Float32, &[1 << 62]), Err(SizeError::Overflow { .. })));
        assert!(matches!(tensor_elements_i64(DType::Float32, &[1 << 61]), Err(SizeError::TooLarge { .. })));
        assert!(matches!(check_count(DType::Int64, u64::MAX), Err(SizeError::Overflow { .. })));
        assert!(matches!(check_count(DType::Int64, 1 << 40), Err(SizeError::TooLarge { .. })));
        assert_eq!(check_count(DType::Int64, 10), Ok(10));
    }
}
