//! [`WriterSet`]: the set of writers reaching a node, as the safety analysis and the
//! clusterer keep it — a sorted list while it is sparse, a bitset whose full leading
//! words are not stored once it is dense.
//!
//! Writers are indexed in topological order, so a plain bitset of a late reader spans
//! every earlier writer even when few reach it: at 10⁶ nodes (~100,000 writers) the
//! 107,000 distinct sets held 1.2 million members in all (~11 each) and took 975 MB
//! as bitsets, a quarter of the clustered run's memory. As sorted lists they take
//! ~5 MB. A dense set (more than one member per 32 indices of its span) becomes a
//! bitset; in a step where early writers reach nearly everything (a chain of control
//! edges suffices), its leading run of ones is one number.
//!
//! Invariants: a sparse list is strictly increasing; a dense bitset's `words` never
//! starts with an all-ones word (it would be folded into `full_words`) and never ends
//! with a zero word. Equality is by members, whatever the representation.

/// A set of dense writer indices.
#[derive(Clone, Debug)]
pub enum WriterSet {
    /// The members, strictly increasing.
    Sparse(Vec<u32>),
    /// Every index below `64 · full_words`, plus the bits of `words`, whose word `j`
    /// holds indices `64 · (full_words + j) ..`.
    Dense { full_words: u32, words: Vec<u64> },
}

/// The first index from `i` whose element of `s` (increasing) is at least `x`, `s[i]` being
/// less: steps of doubling length, then a binary search in the last one.
fn gallop(s: &[u32], i: usize, x: u32) -> usize {
    let (mut lo, mut step) = (i, 1);
    while lo + step < s.len() && s[lo + step] < x {
        lo += step;
        step *= 2;
    }
    let hi = (lo + step + 1).min(s.len());
    lo + 1 + s[lo + 1..hi].partition_point(|&e| e < x)
}

impl Default for WriterSet {
    fn default() -> WriterSet {
        WriterSet::Sparse(Vec::new())
    }
}

impl PartialEq for WriterSet {
    fn eq(&self, other: &WriterSet) -> bool {
        self.ones().eq(other.ones())
    }
}

impl Eq for WriterSet {}

impl WriterSet {
    pub fn new() -> WriterSet {
        WriterSet::default()
    }

    /// Word `j` of a dense set as a plain bitset would hold it.
    fn word(full_words: u32, words: &[u64], j: usize) -> u64 {
        let full = full_words as usize;
        if j < full {
            u64::MAX
        } else {
            words.get(j - full).copied().unwrap_or(0)
        }
    }

    pub fn contains(&self, i: usize) -> bool {
        match self {
            WriterSet::Sparse(v) => u32::try_from(i).is_ok_and(|i| v.binary_search(&i).is_ok()),
            WriterSet::Dense { full_words, words } => Self::word(*full_words, words, i / 64) >> (i % 64) & 1 == 1,
        }
    }

    pub fn insert(&mut self, i: usize) {
        match self {
            WriterSet::Sparse(v) => {
                let i = i as u32;
                match v.last() {
                    Some(&l) if l >= i => {
                        if let Err(at) = v.binary_search(&i) {
                            v.insert(at, i);
                        }
                    }
                    _ => v.push(i),
                }
                self.densify_if_worth();
            }
            WriterSet::Dense { full_words, words } => {
                let (j, full) = (i / 64, *full_words as usize);
                if j < full {
                    return;
                }
                if j - full >= words.len() {
                    words.resize(j - full + 1, 0);
                }
                words[j - full] |= 1 << (i % 64);
                self.normalize();
            }
        }
    }

    /// Adds every member of `other`.
    pub fn union_with(&mut self, other: &WriterSet) {
        match (&mut *self, other) {
            (WriterSet::Sparse(a), WriterSet::Sparse(b)) => {
                if b.is_empty() {
                    return;
                }
                let mut out = Vec::with_capacity(a.len() + b.len());
                let (mut x, mut y) = (a.iter().peekable(), b.iter().peekable());
                loop {
                    match (x.peek(), y.peek()) {
                        (Some(&&p), Some(&&q)) => {
                            out.push(p.min(q));
                            if p <= q {
                                x.next();
                            }
                            if q <= p {
                                y.next();
                            }
                        }
                        (Some(_), None) => out.extend(x.by_ref()),
                        (None, Some(_)) => out.extend(y.by_ref()),
                        (None, None) => break,
                    }
                }
                *a = out;
                self.densify_if_worth();
            }
            (WriterSet::Dense { .. }, WriterSet::Sparse(b)) => {
                for &i in b {
                    self.insert_dense(i as usize);
                }
                self.normalize();
            }
            (WriterSet::Sparse(_), WriterSet::Dense { .. }) => {
                let mine = std::mem::replace(self, other.clone());
                self.union_with(&mine);
            }
            (WriterSet::Dense { full_words: fa, words: wa }, WriterSet::Dense { full_words: fb, words: wb }) => {
                let full = (*fa).max(*fb) as usize;
                let end = (*fa as usize + wa.len()).max(*fb as usize + wb.len());
                if full == *fa as usize {
                    // In place: this set's stored words cover `full..`.
                    wa.resize(end - full, 0);
                    for (k, w) in wa.iter_mut().enumerate() {
                        *w |= Self::word(*fb, wb, full + k);
                    }
                } else {
                    *wa = (full..end).map(|j| Self::word(*fa, wa, j) | Self::word(*fb, wb, j)).collect();
                    *fa = full as u32;
                }
                self.normalize();
            }
        }
    }

    /// Sets bit `i` of a dense set without restoring the invariant.
    fn insert_dense(&mut self, i: usize) {
        if let WriterSet::Dense { full_words, words } = self {
            let (j, full) = (i / 64, *full_words as usize);
            if j >= full {
                if j - full >= words.len() {
                    words.resize(j - full + 1, 0);
                }
                words[j - full] |= 1 << (i % 64);
            }
        }
    }

    /// A sparse set that would be smaller as a bitset (more than one member per 32 indices
    /// of its span) becomes one.
    fn densify_if_worth(&mut self) {
        let WriterSet::Sparse(v) = self else { return };
        let Some(&last) = v.last() else { return };
        // Four bytes a member against eight a word of the span.
        if v.len() <= 2 * (last as usize / 64 + 1) {
            return;
        }
        let members = std::mem::take(v);
        *self = WriterSet::Dense { full_words: 0, words: Vec::with_capacity(last as usize / 64 + 1) };
        for i in members {
            self.insert_dense(i as usize);
        }
        self.normalize();
    }

    /// Restores a dense set's invariant: leading all-ones words folded into the run,
    /// trailing zero words dropped.
    fn normalize(&mut self) {
        let WriterSet::Dense { full_words, words } = self else { return };
        let lead = words.iter().take_while(|&&w| w == u64::MAX).count();
        if lead > 0 {
            words.drain(..lead);
            *full_words += lead as u32;
        }
        while words.last() == Some(&0) {
            words.pop();
        }
    }

    /// The least of `sorted` (increasing) that is a member. Sparse: the two lists merged,
    /// the side behind leaping ahead ([`gallop`]), O(m log(n/m)) for m ≤ n members — the
    /// clusterer's write-before-read check of two clusters of hundreds of writers and
    /// readers each. Dense: `sorted` walked up to the last word.
    pub fn first_common(&self, sorted: &[u32]) -> Option<u32> {
        match self {
            WriterSet::Sparse(v) => {
                let (mut i, mut j) = (0, 0);
                while i < v.len() && j < sorted.len() {
                    let (x, y) = (v[i], sorted[j]);
                    if x == y {
                        return Some(x);
                    }
                    if x < y {
                        i = gallop(v, i, y);
                    } else {
                        j = gallop(sorted, j, x);
                    }
                }
                None
            }
            WriterSet::Dense { full_words, words } => {
                let end = 64 * (*full_words as usize + words.len());
                sorted.iter().copied().take_while(|&w| (w as usize) < end).find(|&w| self.contains(w as usize))
            }
        }
    }

    /// The members in increasing order.
    pub fn ones(&self) -> Box<dyn Iterator<Item = usize> + '_> {
        match self {
            WriterSet::Sparse(v) => Box::new(v.iter().map(|&i| i as usize)),
            WriterSet::Dense { full_words, words } => {
                Box::new((0..*full_words as usize + words.len()).flat_map(move |j| {
                    let mut w = Self::word(*full_words, words, j);
                    std::iter::from_fn(move || {
                        (w != 0).then(|| {
                            let b = w.trailing_zeros() as usize;
                            w &= w - 1;
                            j * 64 + b
                        })
                    })
                }))
            }
        }
    }

    /// Heap bytes held.
    #[cfg(test)]
    pub fn stored_bytes(&self) -> usize {
        match self {
            WriterSet::Sparse(v) => v.capacity() * 4,
            WriterSet::Dense { words, .. } => words.capacity() * 8,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// A deterministic pseudo-random sequence (xorshift).
    fn rng(mut s: u64) -> impl FnMut() -> u64 {
        move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        }
    }

    fn check(set: &WriterSet, model: &BTreeSet<usize>) {
        assert_eq!(set.ones().collect::<Vec<_>>(), model.iter().copied().collect::<Vec<_>>());
        for i in 0..model.last().map_or(0, |m| m + 70) {
            assert_eq!(set.contains(i), model.contains(&i), "index {i}");
        }
        match set {
            WriterSet::Sparse(v) => assert!(v.windows(2).all(|w| w[0] < w[1]), "{set:?}"),
            WriterSet::Dense { words, .. } => {
                assert!(words.first() != Some(&u64::MAX) && words.last() != Some(&0), "{set:?}")
            }
        }
    }

    #[test]
    fn agrees_with_a_plain_set_under_inserts_and_unions() {
        let mut next = rng(0x9E37_79B9_7F4A_7C15);
        for round in 0..200 {
            let (mut a, mut b) = (WriterSet::new(), WriterSet::new());
            let (mut ma, mut mb) = (BTreeSet::new(), BTreeSet::new());
            // Dense prefixes of varied lengths, then sparse tails: the shapes the
            // analysis makes, and sets with no prefix at all.
            let dense = (next() % 400) as usize * (round % 3);
            for i in 0..dense {
                if !next().is_multiple_of(50) || round % 2 == 0 {
                    a.insert(i);
                    ma.insert(i);
                }
            }
            for _ in 0..(next() % 60) {
                let i = (next() % 700) as usize;
                a.insert(i);
                ma.insert(i);
                let j = (next() % 500) as usize;
                b.insert(j);
                mb.insert(j);
            }
            for i in 0..(next() % 300) as usize {
                b.insert(i);
                mb.insert(i);
            }
            check(&a, &ma);
            check(&b, &mb);
            let mut ab = a.clone();
            ab.union_with(&b);
            let mut ba = b.clone();
            ba.union_with(&a);
            let mab: BTreeSet<usize> = ma.union(&mb).copied().collect();
            check(&ab, &mab);
            assert_eq!(ab, ba, "union is not commutative");
            for probe in [&mb, &ma] {
                let sorted: Vec<u32> = probe.iter().map(|&i| i as u32).collect();
                let want = sorted.iter().copied().find(|&w| ma.contains(&(w as usize)));
                assert_eq!(a.first_common(&sorted), want);
            }
        }
    }

    #[test]
    fn a_run_of_ones_from_zero_is_not_stored() {
        let mut s = WriterSet::new();
        for i in 0..64 * 1000 {
            s.insert(i);
        }
        s.insert(64 * 1000 + 5);
        assert_eq!(s, WriterSet::Dense { full_words: 1000, words: vec![1 << 5] });
        assert!(matches!(&s, WriterSet::Dense { full_words: 1000, words } if words == &[1 << 5]));
        assert!(s.stored_bytes() <= 64);
        assert!(s.contains(12_345) && s.contains(64_005) && !s.contains(64_004));
    }

    #[test]
    fn sparse_sets_stay_lists_until_dense() {
        let mut s = WriterSet::new();
        for i in (0..100_000).step_by(1000) {
            s.insert(i);
        }
        assert!(matches!(&s, WriterSet::Sparse(v) if v.len() == 100));
        assert!(s.stored_bytes() < 1024);
        let mut d = WriterSet::new();
        for i in (0..100_000).step_by(4) {
            d.insert(i);
        }
        assert!(matches!(d, WriterSet::Dense { .. }));
        s.union_with(&d);
        assert_eq!(s.ones().count(), 25_000, "every multiple of 1000 is a multiple of 4");
    }
}
