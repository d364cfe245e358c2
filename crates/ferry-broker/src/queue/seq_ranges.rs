//! A set of seqs kept as half-open runs: the unsettled messages of a queue as its journal
//! sees them. A queue's backlog is mostly one long run (published in order, settled roughly
//! in order), so the set costs memory per gap, not per message, and yields its lowest seq
//! and its runs without a scan — what a journal checkpoint and log retention need.
//!
//! Written here rather than taken from a crate (`rangemap` and the like): the engine only
//! adds runs at the end and removes single seqs, which a `BTreeMap` of runs does in
//! O(log runs) with a few lines.

use std::collections::BTreeMap;

use crate::queue::state::Seq;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeqRanges {
    /// Run start → run end (exclusive). Runs never overlap or touch.
    runs: BTreeMap<Seq, Seq>,
    len: u64,
}

impl SeqRanges {
    pub fn new() -> SeqRanges {
        SeqRanges::default()
    }

    /// Adds `from..to`. Seqs already present are not counted twice.
    pub fn insert(&mut self, from: Seq, to: Seq) {
        if from >= to {
            return;
        }
        let mut start = from;
        let mut end = to;
        // Absorb every run that overlaps or touches `start..end`.
        let touching: Vec<(Seq, Seq)> = self
            .runs
            .range(..=end)
            .rev()
            .take_while(|&(_, &e)| e >= start)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in touching {
            self.runs.remove(&s);
            self.len -= e - s;
            start = start.min(s);
            end = end.max(e);
        }
        self.runs.insert(start, end);
        self.len += end - start;
    }

    /// Adds one seq; returns whether it was new. Cheaper than [`insert`](Self::insert):
    /// it looks only at the runs on either side.
    pub fn insert_one(&mut self, seq: Seq) -> bool {
        let before = self.runs.range(..=seq).next_back().map(|(&s, &e)| (s, e));
        if let Some((_, end)) = before
            && seq < end
        {
            return false;
        }
        let joins_before = before.filter(|&(_, end)| end == seq);
        let after_end = self.runs.get(&(seq + 1)).copied();
        match (joins_before, after_end) {
            (Some((start, _)), Some(end)) => {
                self.runs.remove(&(seq + 1));
                self.runs.insert(start, end);
            }
            (Some((start, _)), None) => {
                self.runs.insert(start, seq + 1);
            }
            (None, Some(end)) => {
                self.runs.remove(&(seq + 1));
                self.runs.insert(seq, end);
            }
            (None, None) => {
                self.runs.insert(seq, seq + 1);
            }
        }
        self.len += 1;
        true
    }

    /// Removes and returns the lowest seq.
    pub fn pop_first(&mut self) -> Option<Seq> {
        let first = self.runs.first_entry()?;
        let (start, end) = (*first.key(), *first.get());
        first.remove();
        if start + 1 < end {
            self.runs.insert(start + 1, end);
        }
        self.len -= 1;
        Some(start)
    }

    /// Removes `seq`; returns whether it was present.
    pub fn remove(&mut self, seq: Seq) -> bool {
        let Some((&start, &end)) = self.runs.range(..=seq).next_back() else {
            return false;
        };
        if seq >= end {
            return false;
        }
        self.runs.remove(&start);
        if start < seq {
            self.runs.insert(start, seq);
        }
        if seq + 1 < end {
            self.runs.insert(seq + 1, end);
        }
        self.len -= 1;
        true
    }

    pub fn contains(&self, seq: Seq) -> bool {
        self.runs
            .range(..=seq)
            .next_back()
            .is_some_and(|(_, &end)| seq < end)
    }

    /// The lowest seq in the set.
    pub fn first(&self) -> Option<Seq> {
        self.runs.keys().next().copied()
    }

    /// How many seqs the set holds.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The runs, lowest first, as `(from, to)` with `to` exclusive.
    pub fn runs(&self) -> impl Iterator<Item = (Seq, Seq)> + '_ {
        self.runs.iter().map(|(&s, &e)| (s, e))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn appended_runs_merge_and_removals_split() {
        let mut set = SeqRanges::new();
        set.insert(0, 5);
        set.insert(5, 8);
        assert_eq!(set.runs().collect::<Vec<_>>(), vec![(0, 8)]);
        assert!(set.remove(3));
        assert!(!set.remove(3));
        assert!(set.remove(0));
        assert!(set.remove(7));
        assert_eq!(set.runs().collect::<Vec<_>>(), vec![(1, 3), (4, 7)]);
        assert_eq!(set.len(), 5);
        assert_eq!(set.first(), Some(1));
        assert!(set.contains(6) && !set.contains(7) && !set.contains(3));
        set.insert(3, 4);
        assert_eq!(set.runs().collect::<Vec<_>>(), vec![(1, 7)]);
    }

    proptest! {
        /// The set matches a plain `BTreeSet` of seqs under any inserts and removals, and its
        /// runs are maximal (never touching).
        #[test]
        fn matches_a_set_of_seqs(ops in prop::collection::vec((any::<bool>(), 0u64..64, 1u64..6), 0..200)) {
            let mut set = SeqRanges::new();
            let mut model = BTreeSet::new();
            for (insert, seq, width) in ops {
                if insert && width == 1 {
                    prop_assert_eq!(set.insert_one(seq), model.insert(seq));
                } else if insert {
                    set.insert(seq, seq + width);
                    model.extend(seq..seq + width);
                } else if width == 1 {
                    prop_assert_eq!(set.pop_first(), model.pop_first());
                } else {
                    prop_assert_eq!(set.remove(seq), model.remove(&seq));
                }
                prop_assert_eq!(set.len(), model.len() as u64);
                prop_assert_eq!(set.first(), model.first().copied());
                let expanded: BTreeSet<u64> = set.runs().flat_map(|(s, e)| s..e).collect();
                prop_assert_eq!(&expanded, &model);
                let runs: Vec<_> = set.runs().collect();
                prop_assert!(runs.windows(2).all(|w| w[0].1 < w[1].0));
            }
        }
    }
}
