//! Recycled output buffers of a compiled function (what XLA and jax get from buffer
//! donation, without the caller having to donate anything).
//!
//! Each value a step writes has a [`BufferPool`]. After a call, the pool keeps one more
//! reference to the buffer it handed out; a later call may write into a pooled buffer again
//! only when the pool holds its **only** reference (`Arc::get_mut` succeeds under the pool's
//! lock). In a training step the cluster's output is written back to a variable, so the
//! buffer of step *n* is released by the variable when step *n*+1 writes back, and step
//! *n*+2 reuses it: two buffers alternate, both warm in cache, with no allocation, no page
//! faults and no zeroing.
//!
//! Why it is sound (TensorFlow's buffer-forwarding rule: never write a buffer anyone else
//! can still see): a buffer is written only after it was removed from the pool while
//! unique, and no one can obtain a new reference to it except through the pool (which it
//! has left), so during the write no other reference exists. Concurrent calls each remove
//! distinct entries under the lock.
//!
//! Stamps: every write of a pooled buffer gives it a fresh, process-wide unique `stamp`,
//! naming its contents. A scatter output also records [`Derived`]: "equal to the contents
//! with stamp `base` except these rows". While a buffer sits in its pool it cannot change
//! (the pool's reference makes every other holder copy before writing), so a pooled buffer
//! with stamp `base` still holds exactly those contents, and turning it into a copy of the
//! derived buffer only needs the recorded rows copied — the in-place update jax gets from
//! donating the embedding table, at the cost of copying the rows the previous step touched.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use autoclust_graph::{DType, TensorData};

/// Buffers below this size are not pooled (the allocator's thread caches serve them well,
/// and a pooled reference would make a downstream in-place update copy).
pub(crate) const POOL_MIN_BYTES: usize = 16 * 1024;

/// Entries kept per value: two alternate in a training step; the rest absorb concurrent calls.
const POOL_CAPACITY: usize = 4;

static NEXT_STAMP: AtomicU64 = AtomicU64::new(1);

/// A fresh content stamp.
pub(crate) fn fresh_stamp() -> u64 {
    NEXT_STAMP.fetch_add(1, Ordering::Relaxed)
}

/// How a buffer's contents relate to other contents (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct Derived {
    /// The stamp of the contents this buffer was copied from before its rows were updated.
    pub base: u64,
    /// Element offsets of the updated rows, `slice` elements each.
    pub rows: Arc<Vec<usize>>,
    pub slice: usize,
}

/// A pooled buffer and what is known about its contents.
pub(crate) struct Pooled {
    pub data: TensorData,
    pub stamp: u64,
    pub derived: Option<Derived>,
}

impl Pooled {
    /// A pointer for writing; `None` unless this is the only reference.
    pub fn write_ptr(&mut self) -> Option<*mut u8> {
        match &mut self.data {
            TensorData::F32(v) => Arc::get_mut(v).map(|v| v.as_mut_ptr() as *mut u8),
            TensorData::F64(v) => Arc::get_mut(v).map(|v| v.as_mut_ptr() as *mut u8),
            TensorData::I32(v) => Arc::get_mut(v).map(|v| v.as_mut_ptr() as *mut u8),
            TensorData::I64(v) => Arc::get_mut(v).map(|v| v.as_mut_ptr() as *mut u8),
            TensorData::Bool(v) => Arc::get_mut(v).map(|v| v.as_mut_ptr() as *mut u8),
            TensorData::Str(_) | TensorData::Raw(_) | TensorData::List(_) | TensorData::Optional(_) => None,
        }
    }
}

/// Whether `data` holds `n` elements of `dtype`.
fn fits(data: &TensorData, dtype: DType, n: usize) -> bool {
    match (data, dtype) {
        (TensorData::F32(v), DType::Float32) => v.len() == n,
        (TensorData::F64(v), DType::Float64) => v.len() == n,
        (TensorData::I32(v), DType::Int32) => v.len() == n,
        (TensorData::I64(v), DType::Int64) => v.len() == n,
        (TensorData::Bool(v), DType::Bool) => v.len() == n,
        _ => false,
    }
}

/// The address of a buffer (identity for "is this the buffer the pool handed out").
fn same_buffer(a: &TensorData, b: &TensorData) -> bool {
    match (a, b) {
        (TensorData::F32(x), TensorData::F32(y)) => Arc::ptr_eq(x, y),
        (TensorData::F64(x), TensorData::F64(y)) => Arc::ptr_eq(x, y),
        (TensorData::I32(x), TensorData::I32(y)) => Arc::ptr_eq(x, y),
        (TensorData::I64(x), TensorData::I64(y)) => Arc::ptr_eq(x, y),
        (TensorData::Bool(x), TensorData::Bool(y)) => Arc::ptr_eq(x, y),
        _ => false,
    }
}

/// The recycled buffers of one value.
#[derive(Default)]
pub(crate) struct BufferPool {
    entries: Mutex<Vec<Pooled>>,
}

impl BufferPool {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Pooled>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Removes and returns a buffer of `n` elements of `dtype` that nobody else holds,
    /// preferring one whose stamp is `prefer`.
    pub fn take(&self, dtype: DType, n: usize, prefer: Option<u64>) -> Option<Pooled> {
        let mut entries = self.lock();
        let mut pick = None;
        for (i, e) in entries.iter_mut().enumerate() {
            if fits(&e.data, dtype, n) && e.write_ptr().is_some() {
                if prefer.is_some() && prefer == Some(e.stamp) {
                    pick = Some(i);
                    break;
                }
                pick = pick.or(Some(i));
            }
        }
        pick.map(|i| entries.swap_remove(i))
    }

    /// The stamp and lineage of `data` when it is a buffer this pool handed out (and still
    /// holds, so its contents are the ones stamped).
    pub fn lookup(&self, data: &TensorData) -> Option<(u64, Option<Derived>)> {
        self.lock().iter().find(|e| same_buffer(&e.data, data)).map(|e| (e.stamp, e.derived.clone()))
    }

    /// Whether this pool holds a reference to `data`'s buffer.
    pub fn holds(&self, data: &TensorData) -> bool {
        self.lock().iter().any(|e| same_buffer(&e.data, data))
    }

    /// Drops this pool's reference to `data`'s buffer (a caller donating it back).
    pub fn forget(&self, data: &TensorData) {
        self.lock().retain(|e| !same_buffer(&e.data, data));
    }

    /// Keeps a reference to a buffer just handed out. When full, forgets the oldest entry
    /// someone else still holds (it cannot be reused soon), else the oldest.
    pub fn put(&self, entry: Pooled) {
        let mut entries = self.lock();
        entries.push(entry);
        if entries.len() > POOL_CAPACITY {
            let victim = entries.iter_mut().position(|e| e.write_ptr().is_none()).unwrap_or(0);
            entries.remove(victim);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32_data(v: Vec<f32>) -> TensorData {
        TensorData::F32(Arc::new(v))
    }

    #[test]
    fn a_shared_buffer_is_never_handed_out() {
        let pool = BufferPool::default();
        let data = f32_data(vec![1.0; 8]);
        let held = data.clone();
        pool.put(Pooled { data, stamp: fresh_stamp(), derived: None });
        assert!(pool.take(DType::Float32, 8, None).is_none(), "someone else holds it");
        drop(held);
        let mut got = pool.take(DType::Float32, 8, None).expect("now unique");
        assert!(got.write_ptr().is_some());
        assert!(pool.take(DType::Float32, 8, None).is_none(), "taken out of the pool");
    }

    #[test]
    fn wrong_size_or_dtype_is_not_reused() {
        let pool = BufferPool::default();
        pool.put(Pooled { data: f32_data(vec![0.0; 8]), stamp: fresh_stamp(), derived: None });
        assert!(pool.take(DType::Float32, 9, None).is_none());
        assert!(pool.take(DType::Int32, 8, None).is_none());
        assert!(pool.take(DType::Float32, 8, None).is_some());
    }

    #[test]
    fn preferred_stamp_wins_and_lookup_finds_the_buffer() {
        let pool = BufferPool::default();
        let (s1, s2) = (fresh_stamp(), fresh_stamp());
        pool.put(Pooled { data: f32_data(vec![1.0; 4]), stamp: s1, derived: None });
        let d2 = f32_data(vec![2.0; 4]);
        let out = d2.clone();
        pool.put(Pooled {
            data: d2,
            stamp: s2,
            derived: Some(Derived { base: s1, rows: Arc::new(vec![0]), slice: 2 }),
        });
        let (stamp, derived) = pool.lookup(&out).expect("pooled");
        assert_eq!(stamp, s2);
        assert_eq!(derived.expect("derived").base, s1);
        assert!(pool.lookup(&f32_data(vec![2.0; 4])).is_none(), "equal contents, other buffer");
        drop(out);
        assert_eq!(pool.take(DType::Float32, 4, Some(s2)).expect("unique").stamp, s2);
    }

    #[test]
    fn capacity_evicts_shared_entries_first() {
        let pool = BufferPool::default();
        let mut held = Vec::new();
        for i in 0..POOL_CAPACITY + 2 {
            let d = f32_data(vec![i as f32; 4]);
            if i % 2 == 0 {
                held.push(d.clone());
            }
            pool.put(Pooled { data: d, stamp: fresh_stamp(), derived: None });
        }
        let n = pool.lock().len();
        assert_eq!(n, POOL_CAPACITY);
        // Every unique entry survived: three of them (i = 1, 3, 5).
        let unique = pool.lock().iter_mut().filter_map(|e| e.write_ptr()).count();
        assert_eq!(unique, 3);
    }
}
