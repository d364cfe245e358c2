//! What one partition remembers of its idempotent producers: per producer id, the last
//! sequence written and where its latest batches landed — enough to tell a retried batch
//! (answered with its original positions, written nothing) from a new one, and both from
//! a gap (refused).
//!
//! **Runs.** A batch of `n` messages with sequences `s..s+n` written at offsets `o..o+n`
//! maps sequence to offset linearly. A producer's consecutive batches that land back to
//! back (nothing from anyone else in between) extend one run, so the table keeps the
//! latest [`MAX_RUNS`] runs per producer — at least the latest five batches, as Kafka
//! keeps five per producer for its five in-flight requests. A retry of anything older is
//! refused with [`SequenceProblem::TooOld`] rather than written twice.
//!
//! **Rebuilding.** The table is rebuilt from the records themselves (`ferry-producer-id`
//! and `ferry-producer-seq` headers, see [`crate::record`]): feeding the partition's
//! records to [`ProducerTable::observe`] in offset order gives the same runs the live path
//! built, because the live path records exactly those records in that order.
//!
//! **Forgetting.** A producer unseen for the topic's `producer_state_window` is dropped
//! ([`ProducerTable::forget_silent`]; a rebuild reads only that window). The broker then
//! knows nothing of it, and accepts whatever sequence it starts with next.

use std::collections::{HashMap, VecDeque};

/// Latest runs remembered per producer.
pub(crate) const MAX_RUNS: usize = 5;

/// Longest producer id, in bytes.
pub const MAX_PRODUCER_ID_BYTES: usize = 256;

/// Sequences `first_sequence..first_sequence + count` at offsets
/// `base_offset..base_offset + count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    first_sequence: u64,
    base_offset: u64,
    count: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ProducerState {
    last_sequence: u64,
    /// Oldest first.
    runs: VecDeque<Run>,
    last_seen_ms: i64,
}

/// What the table says about a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SequenceCheck {
    /// New sequences (or an unknown producer): write the batch.
    Write,
    /// Every sequence was written before, at these offsets: write nothing.
    Duplicate(Vec<u64>),
}

/// Why a batch is refused; it writes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SequenceProblem {
    /// It starts beyond `last + 1`: a batch in between is missing.
    OutOfOrder { expected: u64, got: u64 },
    /// Some of its sequences were written, some not.
    Overlap { got: u64, last_written: u64 },
    /// Every sequence was written before, but before the remembered runs.
    TooOld { got: u64, oldest_remembered: u64 },
}

#[derive(Debug, Default)]
pub(crate) struct ProducerTable {
    producers: HashMap<String, ProducerState>,
}

impl ProducerTable {
    pub fn check(
        &self,
        producer: &str,
        first: u64,
        count: u64,
    ) -> Result<SequenceCheck, SequenceProblem> {
        let Some(state) = self.producers.get(producer) else {
            return Ok(SequenceCheck::Write);
        };
        let last = state.last_sequence;
        let end = first + count; // exclusive; the caller checked it does not overflow
        if first > last.saturating_add(1) {
            return Err(SequenceProblem::OutOfOrder {
                expected: last + 1,
                got: first,
            });
        }
        if first == last + 1 {
            return Ok(SequenceCheck::Write);
        }
        if end > last + 1 {
            return Err(SequenceProblem::Overlap {
                got: first,
                last_written: last,
            });
        }
        let run = state
            .runs
            .iter()
            .find(|r| r.first_sequence <= first && end <= r.first_sequence + r.count);
        match run {
            Some(run) => {
                let base = run.base_offset + (first - run.first_sequence);
                Ok(SequenceCheck::Duplicate((base..base + count).collect()))
            }
            None => Err(SequenceProblem::TooOld {
                got: first,
                oldest_remembered: state.runs.front().map_or(last, |r| r.first_sequence),
            }),
        }
    }

    /// Records that `producer` wrote `sequence` at `offset` at `at_ms`. Called in offset
    /// order, live and when rebuilding.
    pub fn observe(&mut self, producer: &str, sequence: u64, offset: u64, at_ms: i64) {
        let run = Run {
            first_sequence: sequence,
            base_offset: offset,
            count: 1,
        };
        let Some(state) = self.producers.get_mut(producer) else {
            self.producers.insert(
                producer.to_owned(),
                ProducerState {
                    last_sequence: sequence,
                    runs: VecDeque::from([run]),
                    last_seen_ms: at_ms,
                },
            );
            return;
        };
        state.last_seen_ms = state.last_seen_ms.max(at_ms);
        // A producer forgotten and back may restart anywhere; the live path writes only
        // `last + 1` otherwise, so a lower sequence starts the producer afresh.
        if sequence <= state.last_sequence {
            state.runs.clear();
        }
        state.last_sequence = sequence;
        if let Some(last) = state.runs.back_mut()
            && last.first_sequence + last.count == sequence
            && last.base_offset + last.count == offset
        {
            last.count += 1;
            return;
        }
        state.runs.push_back(run);
        if state.runs.len() > MAX_RUNS {
            state.runs.pop_front();
        }
    }

    /// The producer ids remembered, in no particular order.
    pub fn producer_ids(&self) -> impl Iterator<Item = &str> {
        self.producers.keys().map(String::as_str)
    }

    /// Drops producers last seen before `cutoff_ms`.
    pub fn forget_silent(&mut self, cutoff_ms: i64) {
        self.producers.retain(|_, s| s.last_seen_ms >= cutoff_ms);
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.producers.len()
    }
}

/// Checks a producer id: 1 to [`MAX_PRODUCER_ID_BYTES`] bytes of printable text, as it
/// is stored in a record header.
pub(crate) fn check_producer_id(producer: &str) -> Result<(), String> {
    if producer.is_empty() {
        return Err("is empty; give every producer a stable id".into());
    }
    if producer.len() > MAX_PRODUCER_ID_BYTES {
        return Err(format!(
            "is {} bytes, over the limit of {MAX_PRODUCER_ID_BYTES}",
            producer.len()
        ));
    }
    if let Some((position, _)) = producer.char_indices().find(|(_, c)| c.is_control()) {
        return Err(format!(
            "has a control character at position {position}; use printable text"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(table: &mut ProducerTable, producer: &str, first: u64, count: u64, base: u64) {
        assert_eq!(
            table.check(producer, first, count),
            Ok(SequenceCheck::Write)
        );
        for i in 0..count {
            table.observe(producer, first + i, base + i, 0);
        }
    }

    #[test]
    fn an_unknown_producer_may_start_at_any_sequence() {
        let table = ProducerTable::default();
        assert_eq!(table.check("p", 0, 3), Ok(SequenceCheck::Write));
        assert_eq!(table.check("p", 41, 1), Ok(SequenceCheck::Write));
    }

    #[test]
    fn a_retried_batch_gets_its_original_offsets() {
        let mut table = ProducerTable::default();
        write(&mut table, "p", 0, 3, 10);
        write(&mut table, "q", 0, 1, 13);
        write(&mut table, "p", 3, 2, 14);
        assert_eq!(
            table.check("p", 0, 3),
            Ok(SequenceCheck::Duplicate(vec![10, 11, 12]))
        );
        assert_eq!(
            table.check("p", 3, 2),
            Ok(SequenceCheck::Duplicate(vec![14, 15]))
        );
        assert_eq!(
            table.check("p", 1, 1),
            Ok(SequenceCheck::Duplicate(vec![11]))
        );
        assert_eq!(
            table.check("q", 0, 1),
            Ok(SequenceCheck::Duplicate(vec![13]))
        );
        assert_eq!(table.check("p", 5, 1), Ok(SequenceCheck::Write));
    }

    #[test]
    fn gaps_and_partial_overlaps_are_refused() {
        let mut table = ProducerTable::default();
        write(&mut table, "p", 0, 3, 0);
        assert_eq!(
            table.check("p", 5, 1),
            Err(SequenceProblem::OutOfOrder {
                expected: 3,
                got: 5
            })
        );
        assert_eq!(
            table.check("p", 2, 2),
            Err(SequenceProblem::Overlap {
                got: 2,
                last_written: 2
            })
        );
    }

    #[test]
    fn batches_older_than_the_remembered_runs_are_refused() {
        let mut table = ProducerTable::default();
        // Each batch lands after someone else's record, so each starts a run.
        for i in 0..(MAX_RUNS as u64 + 2) {
            write(&mut table, "p", i, 1, 2 * i);
            write(&mut table, "other", i, 1, 2 * i + 1);
        }
        assert_eq!(
            table.check("p", 0, 1),
            Err(SequenceProblem::TooOld {
                got: 0,
                oldest_remembered: 2
            })
        );
        assert_eq!(
            table.check("p", 2, 1),
            Ok(SequenceCheck::Duplicate(vec![4]))
        );
    }

    #[test]
    fn back_to_back_batches_extend_one_run() {
        let mut table = ProducerTable::default();
        for i in 0..100 {
            write(&mut table, "p", i, 1, i);
        }
        assert_eq!(
            table.check("p", 0, 100).unwrap(),
            SequenceCheck::Duplicate((0..100).collect())
        );
    }

    #[test]
    fn silent_producers_are_forgotten() {
        let mut table = ProducerTable::default();
        table.observe("old", 0, 0, 100);
        table.observe("new", 0, 1, 200);
        table.forget_silent(150);
        assert_eq!(table.len(), 1);
        assert_eq!(table.check("old", 7, 1), Ok(SequenceCheck::Write));
        assert!(table.check("new", 7, 1).is_err());
    }

    #[test]
    fn producer_ids_are_bounded_printable_text() {
        assert!(check_producer_id("orders-service-1").is_ok());
        assert!(check_producer_id("").is_err());
        assert!(check_producer_id(&"p".repeat(MAX_PRODUCER_ID_BYTES + 1)).is_err());
        assert!(check_producer_id("a\nb").is_err());
    }
}
