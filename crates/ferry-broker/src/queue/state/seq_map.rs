//! [`SeqMap`]: the tracked messages of a queue by seq, in about the size of the values alone.
//!
//! Seqs are offsets in the queue's message log: dense, tracked in increasing order, and
//! mostly settled in roughly the same order. A hash map would spend its per-slot overhead
//! and load factor on every message of a large backlog (several times the 48-byte entry);
//! here seqs live in fixed chunks of [`CHUNK`] slots addressed by arithmetic, with a
//! presence bitmap. A chunk whose live count falls under [`SPARSE_BELOW`] — the stragglers
//! left behind by a delayed message, a parked key or a long retry — moves its few entries
//! into an ordered sparse map and frees its slots, so a handful of old messages never pin
//! whole chunks. Chunks are freed once empty, and the front of the chunk list advances past
//! chunks with no slots.
//!
//! Written here because what makes it small is the queue's own access pattern (dense,
//! increasing seqs settled roughly in order); general-purpose maps do not know it.

use std::collections::{BTreeMap, VecDeque};

use crate::queue::state::Seq;

/// Slots per chunk.
pub const CHUNK: u64 = 4096;
/// A dense chunk with fewer live entries than this moves them to the sparse map.
pub const SPARSE_BELOW: u32 = 64;

const WORDS: usize = (CHUNK / 64) as usize;

#[derive(Debug)]
enum Chunk<T> {
    /// No live entry.
    Empty,
    /// This many live entries, kept in the sparse map.
    Sparse(u32),
    Dense(Box<Dense<T>>),
}

#[derive(Debug)]
struct Dense<T> {
    present: [u64; WORDS],
    live: u32,
    slots: Box<[T]>,
}

/// A map from seq to `T`; see the [module docs](self).
#[derive(Debug)]
pub struct SeqMap<T> {
    /// Entries of sparse chunks, and of every seq below `base`.
    sparse: BTreeMap<Seq, T>,
    /// Chunk `i` covers `base + i * CHUNK ..`.
    chunks: VecDeque<Chunk<T>>,
    base: Seq,
    len: usize,
}

impl<T: Copy + Default> Default for SeqMap<T> {
    fn default() -> Self {
        SeqMap::new()
    }
}

impl<T: Copy + Default> SeqMap<T> {
    pub fn new() -> SeqMap<T> {
        SeqMap {
            sparse: BTreeMap::new(),
            chunks: VecDeque::new(),
            base: 0,
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The chunk index and slot of `seq`, if it is at or above `base`.
    fn locate(&self, seq: Seq) -> Option<(usize, usize)> {
        let offset = seq.checked_sub(self.base)?;
        let chunk = usize::try_from(offset / CHUNK).ok()?;
        Some((chunk, (offset % CHUNK) as usize))
    }

    pub fn get(&self, seq: Seq) -> Option<&T> {
        match self.locate(seq) {
            Some((chunk, slot)) => match self.chunks.get(chunk)? {
                Chunk::Empty => None,
                Chunk::Sparse(_) => self.sparse.get(&seq),
                Chunk::Dense(dense) => dense.has(slot).then(|| &dense.slots[slot]),
            },
            None => self.sparse.get(&seq),
        }
    }

    pub fn get_mut(&mut self, seq: Seq) -> Option<&mut T> {
        match self.locate(seq) {
            Some((chunk, slot)) => match self.chunks.get_mut(chunk)? {
                Chunk::Empty => None,
                Chunk::Sparse(_) => self.sparse.get_mut(&seq),
                Chunk::Dense(dense) => dense.has(slot).then(|| &mut dense.slots[slot]),
            },
            None => self.sparse.get_mut(&seq),
        }
    }

    pub fn contains(&self, seq: Seq) -> bool {
        self.get(seq).is_some()
    }

    /// Inserts or replaces; returns the value replaced.
    pub fn insert(&mut self, seq: Seq, value: T) -> Option<T> {
        let boundary = seq - seq % CHUNK;
        if self.chunks.is_empty() && self.sparse.range(boundary..).next().is_none() {
            // With no chunks every sparse entry is below `base`; starting the chunks at
            // `seq`'s boundary keeps it so.
            self.base = boundary;
        }
        let Some((chunk, slot)) = self.locate(seq) else {
            let old = self.sparse.insert(seq, value);
            self.len += usize::from(old.is_none());
            return old;
        };
        while self.chunks.len() <= chunk {
            self.chunks.push_back(Chunk::Empty);
        }
        let old = match &mut self.chunks[chunk] {
            Chunk::Sparse(live) => {
                let old = self.sparse.insert(seq, value);
                *live += u32::from(old.is_none());
                old
            }
            place @ Chunk::Empty => {
                let mut dense = Dense::new();
                dense.put(slot, value);
                *place = Chunk::Dense(Box::new(dense));
                None
            }
            Chunk::Dense(dense) => dense.put(slot, value),
        };
        self.len += usize::from(old.is_none());
        old
    }

    pub fn remove(&mut self, seq: Seq) -> Option<T> {
        let Some((chunk, slot)) = self.locate(seq) else {
            let old = self.sparse.remove(&seq);
            self.len -= usize::from(old.is_some());
            return old;
        };
        let old = match self.chunks.get_mut(chunk)? {
            Chunk::Empty => None,
            Chunk::Sparse(live) => {
                let old = self.sparse.remove(&seq);
                *live -= u32::from(old.is_some());
                if *live == 0 {
                    self.chunks[chunk] = Chunk::Empty;
                }
                old
            }
            Chunk::Dense(dense) => {
                let old = dense.take(slot);
                if old.is_some() && dense.live < SPARSE_BELOW {
                    self.sparsify(chunk);
                }
                old
            }
        };
        self.len -= usize::from(old.is_some());
        self.advance();
        old
    }

    /// Moves a dense chunk's entries into the sparse map.
    fn sparsify(&mut self, chunk: usize) {
        let start = self.base + chunk as u64 * CHUNK;
        let Chunk::Dense(dense) = std::mem::replace(&mut self.chunks[chunk], Chunk::Empty) else {
            return;
        };
        for slot in 0..CHUNK as usize {
            if dense.has(slot) {
                self.sparse.insert(start + slot as u64, dense.slots[slot]);
            }
        }
        if dense.live > 0 {
            self.chunks[chunk] = Chunk::Sparse(dense.live);
        }
    }

    /// Drops leading chunks that hold no slots; their sparse entries stay in the sparse
    /// map, below the new `base`.
    fn advance(&mut self) {
        while let Some(Chunk::Empty | Chunk::Sparse(_)) = self.chunks.front() {
            self.chunks.pop_front();
            self.base += CHUNK;
        }
        if self.chunks.is_empty() && self.sparse.is_empty() {
            self.base = 0;
        }
    }

    /// Every entry in seq order.
    pub fn iter(&self) -> impl Iterator<Item = (Seq, &T)> + '_ {
        let below = self.sparse.range(..self.base).map(|(&s, v)| (s, v));
        let chunks = self.chunks.iter().enumerate().flat_map(move |(i, chunk)| {
            let start = self.base + i as u64 * CHUNK;
            let items: Box<dyn Iterator<Item = (Seq, &T)> + '_> = match chunk {
                Chunk::Empty => Box::new(std::iter::empty()),
                Chunk::Sparse(_) => Box::new(
                    self.sparse
                        .range(start..start + CHUNK)
                        .map(|(&s, v)| (s, v)),
                ),
                Chunk::Dense(dense) => Box::new(
                    (0..CHUNK as usize)
                        .filter(|&slot| dense.has(slot))
                        .map(move |slot| (start + slot as u64, &dense.slots[slot])),
                ),
            };
            items
        });
        below.chain(chunks)
    }
}

impl<T: Copy + Default> Dense<T> {
    fn new() -> Dense<T> {
        Dense {
            present: [0; WORDS],
            live: 0,
            slots: vec![T::default(); CHUNK as usize].into_boxed_slice(),
        }
    }

    fn has(&self, slot: usize) -> bool {
        self.present[slot / 64] & (1 << (slot % 64)) != 0
    }

    fn put(&mut self, slot: usize, value: T) -> Option<T> {
        let old = self.has(slot).then(|| self.slots[slot]);
        self.slots[slot] = value;
        if old.is_none() {
            self.present[slot / 64] |= 1 << (slot % 64);
            self.live += 1;
        }
        old
    }

    fn take(&mut self, slot: usize) -> Option<T> {
        if !self.has(slot) {
            return None;
        }
        self.present[slot / 64] &= !(1 << (slot % 64));
        self.live -= 1;
        Some(self.slots[slot])
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_straggler_does_not_pin_chunks() {
        let mut map: SeqMap<u64> = SeqMap::new();
        for seq in 0..10 * CHUNK {
            map.insert(seq, seq);
        }
        // Everything settles but seq 5: its chunk turns sparse and the chunks go.
        for seq in (0..10 * CHUNK).filter(|&s| s != 5) {
            assert_eq!(map.remove(seq), Some(seq));
        }
        assert_eq!(map.len(), 1);
        assert!(map.chunks.is_empty(), "{} chunks left", map.chunks.len());
        assert_eq!(map.get(5), Some(&5));
        // New seqs far ahead start dense chunks again.
        map.insert(20 * CHUNK + 3, 1);
        assert_eq!(
            map.iter().map(|(s, _)| s).collect::<Vec<_>>(),
            [5, 20 * CHUNK + 3]
        );
        assert_eq!(map.chunks.len(), 1);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Matches a `BTreeMap` under inserts (mostly increasing, as a queue tracks) and
        /// removals (any order), including order of iteration.
        #[test]
        fn matches_a_btree_map(ops in prop::collection::vec((0u8..4, 0u64..3 * CHUNK), 0..3000)) {
            let mut map: SeqMap<u64> = SeqMap::new();
            let mut model = BTreeMap::new();
            let mut next = 0u64;
            for (op, seq) in ops {
                match op {
                    0 | 1 => {
                        // A run of new seqs at the end.
                        for _ in 0..(seq % 100) {
                            prop_assert_eq!(map.insert(next, next * 3), model.insert(next, next * 3));
                            next += 1;
                        }
                    }
                    2 => {
                        let seq = seq % next.max(1);
                        prop_assert_eq!(map.remove(seq), model.remove(&seq));
                    }
                    _ => {
                        let seq = seq % next.max(1);
                        prop_assert_eq!(map.insert(seq, 7), model.insert(seq, 7));
                    }
                }
                prop_assert_eq!(map.len(), model.len());
            }
            let all: Vec<(u64, u64)> = map.iter().map(|(s, v)| (s, *v)).collect();
            let expected: Vec<(u64, u64)> = model.iter().map(|(s, v)| (*s, *v)).collect();
            prop_assert_eq!(all, expected);
            for seq in 0..next {
                prop_assert_eq!(map.get(seq), model.get(&seq));
            }
        }
    }
}
