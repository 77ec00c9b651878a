//! The adjacency sets of [`super::cycles::GraphCycles`]: insertion-ordered sets of node ids
//! with `swap_remove`, the semantics of `indexmap::IndexSet` (so every search visits
//! neighbours in the same order and the clustering stays deterministic), stored for what
//! a dataflow graph's degrees are: a handful of ids inline, with no hash table at all, and a
//! position index only once a set grows past [`INDEXED_FROM`] ids (hubs: a step's final
//! `NoOp`, a constant feeding thousands of nodes), so that membership stays O(1) there.
//!
//! At 10⁵ nodes two `IndexSet`s per node (a hash table each) were a third of the time the
//! clusterer spent building its cycle graph.

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

/// A set grows a position index at this many ids; below it, a linear scan of a few
/// cache lines beats hashing.
pub const INDEXED_FROM: usize = 24;

/// An insertion-ordered set of `u32` ids.
#[derive(Clone, Debug, Default)]
pub struct AdjSet {
    items: SmallVec<[u32; 4]>,
    /// Where each id sits in `items`, once the set is large.
    index: Option<Box<FxHashMap<u32, u32>>>,
}

impl AdjSet {
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The ids in insertion order (after any `swap_remove`s).
    pub fn as_slice(&self) -> &[u32] {
        &self.items
    }

    pub fn iter(&self) -> std::slice::Iter<'_, u32> {
        self.items.iter()
    }

    /// The id at insertion position `i` (after any `swap_remove`s).
    pub fn get_index(&self, i: usize) -> Option<&u32> {
        self.items.get(i)
    }

    fn position(&self, x: u32) -> Option<usize> {
        match &self.index {
            Some(ix) => ix.get(&x).map(|&i| i as usize),
            None => self.items.iter().position(|&y| y == x),
        }
    }

    pub fn contains(&self, x: &u32) -> bool {
        self.position(*x).is_some()
    }

    /// Appends `x`; returns false (and changes nothing) if it is already present.
    pub fn insert(&mut self, x: u32) -> bool {
        if self.contains(&x) {
            return false;
        }
        self.push_absent(x);
        true
    }

    /// Appends `x`, which the caller knows is absent (debug builds check).
    pub fn push_absent(&mut self, x: u32) {
        debug_assert!(!self.contains(&x), "{x} is already in the set");
        self.items.push(x);
        match &mut self.index {
            Some(ix) => {
                ix.insert(x, (self.items.len() - 1) as u32);
            }
            None if self.items.len() >= INDEXED_FROM => {
                self.index = Some(Box::new(self.items.iter().enumerate().map(|(i, &y)| (y, i as u32)).collect()));
            }
            None => {}
        }
    }

    /// Removes `x` by moving the last id into its place (`IndexSet::swap_remove`); returns
    /// whether it was present.
    pub fn swap_remove(&mut self, x: &u32) -> bool {
        let Some(i) = self.position(*x) else { return false };
        self.items.swap_remove(i);
        if let Some(ix) = &mut self.index {
            ix.remove(x);
            if let Some(&moved) = self.items.get(i) {
                ix.insert(moved, i as u32);
            }
        }
        true
    }
}

impl<'a> IntoIterator for &'a AdjSet {
    type Item = &'a u32;
    type IntoIter = std::slice::Iter<'a, u32>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use indexmap::IndexSet;

    /// The same operations on an `AdjSet` and an `IndexSet` leave the same sequence, below
    /// and above the indexing threshold.
    #[test]
    fn behaves_as_index_set() {
        let mut a = AdjSet::default();
        let mut b: IndexSet<u32> = IndexSet::new();
        let mut x = 12345u32;
        for step in 0..5000u32 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let v = (x >> 16) % 97;
            // Grow for a while, then mostly remove, then grow again.
            let remove = (step / 700) % 2 == 1 && !x.is_multiple_of(4);
            if remove {
                assert_eq!(a.swap_remove(&v), b.swap_remove(&v));
            } else {
                assert_eq!(a.insert(v), b.insert(v));
            }
            assert_eq!(a.len(), b.len());
            assert!(a.iter().eq(b.iter()), "step {step}");
            assert_eq!(a.contains(&v), b.contains(&v));
            assert_eq!(a.get_index(a.len() / 2), b.get_index(b.len() / 2));
        }
    }
}
