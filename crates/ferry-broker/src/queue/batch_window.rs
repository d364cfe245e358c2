//! Retry safety per publish call: a [`BatchWindow`] remembers, for a queue's dedup window,
//! each publish call that carried a batch id, so that a producer retrying a call whose
//! answer it never saw gets the original ids back and nothing is stored twice.
//!
//! **Why per call and not per message.** A producer that sends a chosen id with every
//! message gets the same safety from the [`DedupWindow`](super::dedup::DedupWindow), but
//! pays a hash-table entry (about 200 B) and two lookups per message on the publish path,
//! and the window then grows with the message rate (millions of entries at a few hundred
//! thousand messages a second). A batch id is one entry per call whatever its size.
//!
//! **How the answer is kept small.** The broker mints the ids of a batch's messages that
//! have no dedup key of their own (neither a dedup id nor a producer-chosen id) as one run:
//! consecutive ULIDs from a random first one, all stamped with the publish time. An entry
//! is then the run's first id and its length, 20 bytes however large the batch, and the
//! same three values, written into the batch's first record ([`BatchMark`]), rebuild it on
//! reopen. Messages of the batch that do have a dedup key keep going through the dedup
//! window, which answers their retries as before.
//!
//! Pure and in-memory, with time passed in, as the dedup window is; the same window rules
//! apply: an entry answers for `now` in `[t, t + window)`, a retry does not extend it, and
//! beyond a bound the oldest entries go first.

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroUsize;
use std::time::Duration;

use super::dedup::{is_live, window_millis};
use crate::message_id::MessageId;

/// One stored publish call: its batch id and the run of ids minted for its messages
/// without a dedup key. Written into the call's first record, so a reopen rebuilds the
/// window from the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMark {
    /// The id the producer gave the call; a retry carries the same one.
    pub batch: MessageId,
    /// The first id of the run; the k-th message without a dedup key got `first + k`.
    pub first: MessageId,
    /// How many messages of the call had no dedup key.
    pub count: u32,
}

impl BatchMark {
    /// The id of the `k`-th message without a dedup key, `k < count`.
    pub fn id(&self, k: u32) -> MessageId {
        self.first.offset_by(k)
    }
}

/// Batch ids remembered for a window, with a bound on how many.
///
/// **Memory** per entry: a hash-table slot (the 16-byte batch id, the run's first id, its
/// length, insertion time and a sequence number) and a slot in the time-ordered B-tree,
/// about 100 B. The bound of a million entries (about 100 MB) is a backstop: at 1,000
/// publish calls a second it holds a 5-minute window (the default) three times over.
#[derive(Debug, Clone)]
pub struct BatchWindow {
    /// Window length in ms; 0 means the queue deduplicates nothing.
    window_ms: i64,
    max_entries: NonZeroUsize,
    by_batch: HashMap<MessageId, Entry>,
    /// Insertion order, for expiry and eviction oldest first.
    by_time: BTreeMap<(i64, u64), MessageId>,
    next_seq: u64,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    first: MessageId,
    count: u32,
    inserted_ms: i64,
    seq: u64,
}

impl BatchWindow {
    /// The default bound on remembered calls; see the type's docs for what it costs.
    pub const DEFAULT_MAX_ENTRIES: NonZeroUsize = NonZeroUsize::new(1_000_000).unwrap();

    /// A window of `window` at millisecond resolution, as [`DedupWindow::new`] reads it: a
    /// zero window remembers nothing.
    ///
    /// [`DedupWindow::new`]: super::dedup::DedupWindow::new
    pub fn new(window: Duration) -> BatchWindow {
        BatchWindow {
            window_ms: window_millis(window),
            max_entries: Self::DEFAULT_MAX_ENTRIES,
            by_batch: HashMap::new(),
            by_time: BTreeMap::new(),
            next_seq: 0,
        }
    }

    #[cfg(test)]
    pub fn with_max_entries(mut self, max_entries: NonZeroUsize) -> BatchWindow {
        self.max_entries = max_entries;
        self
    }

    pub fn is_enabled(&self) -> bool {
        self.window_ms > 0
    }

    /// The stored call with this batch id, if it is still within the window at `now_ms`.
    pub fn get(&self, batch: MessageId, now_ms: i64) -> Option<BatchMark> {
        let entry = self.by_batch.get(&batch)?;
        is_live(self.window_ms, entry.inserted_ms, now_ms).then_some(BatchMark {
            batch,
            first: entry.first,
            count: entry.count,
        })
    }

    /// Remembers `mark` from `inserted_ms`, replacing an entry for the same batch id (a call
    /// stored again once its window ended). Nothing is remembered when the window is off.
    pub fn insert(&mut self, mark: BatchMark, inserted_ms: i64) {
        if !self.is_enabled() {
            return;
        }
        if let Some(old) = self.by_batch.remove(&mark.batch) {
            self.by_time.remove(&(old.inserted_ms, old.seq));
        } else if self.by_batch.len() >= self.max_entries.get()
            && let Some((_, oldest)) = self.by_time.pop_first()
        {
            self.by_batch.remove(&oldest);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.by_time.insert((inserted_ms, seq), mark.batch);
        self.by_batch.insert(
            mark.batch,
            Entry {
                first: mark.first,
                count: mark.count,
                inserted_ms,
                seq,
            },
        );
    }

    /// Removes every entry whose window has ended by `now_ms`, oldest first; returns how many.
    pub fn expire(&mut self, now_ms: i64) -> usize {
        let mut removed = 0;
        while let Some(entry) = self.by_time.first_entry() {
            if is_live(self.window_ms, entry.key().0, now_ms) {
                break;
            }
            let batch = entry.remove();
            self.by_batch.remove(&batch);
            removed += 1;
        }
        removed
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_batch.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ulid::Ulid;

    const T0: i64 = 1_700_000_000_000;
    const WINDOW_MS: i64 = 5 * 60_000;

    fn id(n: u128) -> MessageId {
        MessageId::from_ulid(Ulid(n))
    }

    fn mark(batch: u128, first: u128, count: u32) -> BatchMark {
        BatchMark {
            batch: id(batch),
            first: id(first),
            count,
        }
    }

    fn window() -> BatchWindow {
        BatchWindow::new(Duration::from_millis(WINDOW_MS as u64))
    }

    #[test]
    fn a_call_is_remembered_for_its_window_and_no_longer() {
        let mut w = window();
        w.insert(mark(1, 100, 3), T0);
        assert_eq!(w.get(id(1), T0 + WINDOW_MS - 1), Some(mark(1, 100, 3)));
        assert_eq!(w.get(id(1), T0 + WINDOW_MS), None);
        assert_eq!(w.get(id(2), T0), None);
        assert_eq!(w.expire(T0 + WINDOW_MS - 1), 0);
        assert_eq!(w.expire(T0 + WINDOW_MS), 1);
        assert_eq!(w.len(), 0);
    }

    #[test]
    fn the_run_gives_consecutive_ids() {
        let m = mark(1, 100, 3);
        assert_eq!([m.id(0), m.id(1), m.id(2)], [id(100), id(101), id(102)]);
    }

    #[test]
    fn a_call_stored_again_after_its_window_replaces_the_old_entry() {
        let mut w = window();
        w.insert(mark(1, 100, 3), T0);
        w.insert(mark(1, 200, 2), T0 + WINDOW_MS);
        assert_eq!(w.get(id(1), T0 + WINDOW_MS), Some(mark(1, 200, 2)));
        // The old entry's time slot went with it: expiring its time removes nothing.
        assert_eq!(w.expire(T0 + WINDOW_MS + 1), 0);
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn beyond_the_bound_the_oldest_call_goes_first() {
        let mut w = window().with_max_entries(NonZeroUsize::new(2).unwrap());
        w.insert(mark(1, 100, 1), T0);
        w.insert(mark(2, 200, 1), T0 + 1);
        w.insert(mark(3, 300, 1), T0 + 2);
        assert_eq!(w.get(id(1), T0 + 2), None);
        assert!(w.get(id(2), T0 + 2).is_some());
        assert!(w.get(id(3), T0 + 2).is_some());
    }

    #[test]
    fn a_zero_window_remembers_nothing() {
        let mut w = BatchWindow::new(Duration::ZERO);
        w.insert(mark(1, 100, 1), T0);
        assert_eq!(w.get(id(1), T0), None);
        assert!(!w.is_enabled());
    }
}
