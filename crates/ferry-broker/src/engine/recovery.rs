//! Rebuilding a queue's delivery state, dedup window and counters from its logs on open.
//!
//! The journal is replayed from its start, starting over at each complete checkpoint (see
//! [`crate::queue::journal`]), into what is known per seq: settled, deliveries so far, not
//! deliverable before. The message log is then read from the lowest seq that matters — the
//! checkpoint's `low`, or earlier if the dedup window reaches further back — and every
//! message still unsettled is tracked again, in seq order, with its deliveries and times.
//! Messages a crash left stored in their dead-letter queue but not yet journaled as dead
//! letters on their origin ([`already_dead_lettered`]) are not tracked again.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;

use super::queue::{Queue, dedup_key, scan, scan_from};
use crate::error::{BrokerError, Result};
use crate::message::{Message, millis};
use crate::message_id::MessageId;
use crate::name::Name;
use crate::queue::journal::{Counts, JournalEvent};
use crate::queue::state::{DeadLetterReason, FailureRecord, Seq};

/// What the journal says of one seq.
#[derive(Debug, Default, Clone)]
struct SeqReplay {
    settled: bool,
    deliveries: u32,
    not_before_ms: Option<i64>,
    failures: FailureRecord,
}

/// The seqs a checkpoint describes: below `low` settled, in `[low, end)` unsettled exactly
/// when a live run covers them.
#[derive(Debug, Default)]
struct Covered {
    low: Seq,
    end: Seq,
    /// Sorted, disjoint half-open runs.
    runs: Vec<(Seq, Seq)>,
}

impl Covered {
    /// Whether the checkpoint counts `seq` as settled.
    fn settled(&self, seq: Seq) -> bool {
        if seq < self.low {
            return true;
        }
        if seq >= self.end {
            return false;
        }
        let i = self.runs.partition_point(|&(_, to)| to <= seq);
        self.runs.get(i).is_none_or(|&(from, _)| from > seq)
    }
}

/// The journal replayed so far.
#[derive(Debug, Default)]
struct Replay {
    seqs: HashMap<Seq, SeqReplay>,
    parked: HashSet<Bytes>,
    counts: Counts,
    covered: Option<Covered>,
    /// Journal bytes since the checkpoint this replay started from (or the start).
    journal_bytes: u64,
}

impl Replay {
    /// Applies an event journaled at `at_ms`.
    fn apply(&mut self, event: &JournalEvent, at_ms: i64) {
        self.counts.count(event);
        if let Some(seq) = event.settles() {
            self.seqs.entry(seq).or_default().settled = true;
            return;
        }
        match event {
            JournalEvent::Leased {
                seq,
                deliveries,
                until_ms,
                consumer,
            } => {
                let r = self.seqs.entry(*seq).or_default();
                r.deliveries = r.deliveries.max(*deliveries);
                r.not_before_ms = Some(*until_ms);
                r.failures.last_consumer = Some(consumer.clone());
            }
            JournalEvent::Extended { seq, until_ms } => {
                self.seqs.entry(*seq).or_default().not_before_ms = Some(*until_ms);
            }
            JournalEvent::Failed {
                seq,
                deliveries,
                retry_at_ms,
                error,
            } => {
                let r = self.seqs.entry(*seq).or_default();
                r.deliveries = r.deliveries.max(*deliveries);
                r.not_before_ms = Some(*retry_at_ms);
                r.failures.first_failure_ms.get_or_insert(at_ms);
                r.failures.last_failure_ms = Some(at_ms);
                r.failures.last_error = error.clone();
            }
            JournalEvent::ReturnedUnsent {
                seq,
                deliveries,
                last_consumer,
            } => {
                // Undoes its `Leased`: set, not raised, since the count goes back down. A
                // later lease of the message is journaled after this, so it raises it again.
                let r = self.seqs.entry(*seq).or_default();
                r.deliveries = *deliveries;
                r.not_before_ms = None;
                r.failures.last_consumer = last_consumer.clone();
            }
            JournalEvent::Parked { key } => {
                self.parked.insert(key.clone());
            }
            JournalEvent::Unparked { key } => {
                self.parked.remove(key);
            }
            _ => {}
        }
    }

    fn settled(&self, seq: Seq) -> bool {
        self.seqs.get(&seq).is_some_and(|r| r.settled)
            || self.covered.as_ref().is_some_and(|c| c.settled(seq))
    }
}

/// Replays `queue`'s journal; see the module docs.
fn replay_journal(queue: &Queue) -> Result<Replay> {
    let mut replay = Replay::default();
    // A checkpoint being read; it replaces `replay` at its end, and is dropped if the log
    // ends first (a crash cut it short).
    let mut pending: Option<Replay> = None;
    scan(&queue.journal, |record| {
        let malformed = |problem: String| BrokerError::MalformedJournal {
            queue: queue.name.clone(),
            offset: record.offset,
            problem,
        };
        let events = JournalEvent::decode_all(&record.value).map_err(malformed)?;
        let bytes = record.value.len() as u64;
        replay.journal_bytes += bytes;
        if let Some(p) = pending.as_mut() {
            p.journal_bytes += bytes;
        }
        for event in events {
            replay_event(event, record.timestamp, &mut replay, &mut pending).map_err(malformed)?;
        }
        Ok(())
    })?;
    Ok(replay)
}

/// Applies one journaled event to the replay so far, or to the checkpoint being read
/// (`pending`); the error describes a malformed journal.
fn replay_event(
    event: JournalEvent,
    at_ms: i64,
    replay: &mut Replay,
    pending: &mut Option<Replay>,
) -> std::result::Result<(), String> {
    let outside = || "a checkpoint part outside a checkpoint".to_owned();
    match event {
        JournalEvent::CheckpointBegin { low, end, counts } => {
            *pending = Some(Replay {
                counts,
                covered: Some(Covered {
                    low,
                    end,
                    runs: Vec::new(),
                }),
                ..Replay::default()
            });
        }
        JournalEvent::CheckpointLive { runs } => {
            let covered = pending
                .as_mut()
                .and_then(|p| p.covered.as_mut())
                .ok_or_else(outside)?;
            if runs
                .first()
                .is_some_and(|&(from, _)| covered.runs.last().is_some_and(|&(_, to)| from < to))
                || runs.windows(2).any(|w| w[1].0 < w[0].1)
            {
                return Err("checkpoint runs out of order".into());
            }
            covered.runs.extend(runs);
        }
        JournalEvent::CheckpointDelivered { points } => {
            let p = pending.as_mut().ok_or_else(outside)?;
            for point in points {
                let r = p.seqs.entry(point.seq).or_default();
                r.deliveries = point.deliveries;
                r.not_before_ms = point.not_before_ms;
            }
        }
        JournalEvent::CheckpointFailures { seq, record } => {
            pending
                .as_mut()
                .ok_or_else(outside)?
                .seqs
                .entry(seq)
                .or_default()
                .failures = record;
        }
        JournalEvent::CheckpointParked { key } => {
            pending.as_mut().ok_or_else(outside)?.parked.insert(key);
        }
        JournalEvent::CheckpointEnd => {
            *replay = pending
                .take()
                .ok_or_else(|| "a checkpoint end without its start".to_owned())?;
        }
        event => {
            // Checkpoints are written in one append under the queue's lock, so nothing
            // falls between their parts; were it to, it happened after the snapshot.
            if let Some(p) = pending.as_mut() {
                p.apply(&event, at_ms);
            }
            replay.apply(&event, at_ms);
        }
    }
    Ok(())
}

impl Queue {
    /// Rebuilds the delivery state, dedup window, live seqs and counters from the logs.
    /// `dead_lettered` holds the letters of this queue already found in its dead-letter
    /// queue; returns the `DeadLettered` events to journal for those its journal lacks.
    pub fn recover(
        &self,
        dead_lettered: &HashMap<Seq, FoundLetter>,
        now_ms: i64,
    ) -> Result<Vec<JournalEvent>> {
        let replay = replay_journal(self)?;
        let window_start = now_ms.saturating_sub(millis(self.spec().dedup_window));
        let low = replay
            .covered
            .as_ref()
            .map_or(self.messages.start_offset(), |c| c.low);
        // Messages below `low` are settled but may still hold dedup ids in the window.
        let from = if self.spec().dedup_window.is_zero() {
            low
        } else {
            let first_in_window = self
                .messages
                .offset_for_timestamp(window_start)?
                .unwrap_or(low);
            first_in_window.min(low)
        };
        // A subscription resumes each partition after its highest reference on disk, settled
        // or not, so it reads every reference retention kept, not only those from the
        // checkpoint's `low`: a checkpoint written after the cursors were last saved settles
        // references the saved cursors do not cover (retention keeps them: see
        // `Queue::retention_cap`).
        let from = if self.has_links() {
            from.min(self.messages.start_offset())
        } else {
            from
        };
        let mut inner = self.lock();
        let mut dedup = Vec::new();
        let mut batches = Vec::new();
        let mut settle = Vec::new();
        scan_from(&self.messages, from, |record| {
            let seq = record.offset;
            if let Some(mark) = crate::record::batch_mark(&record)?
                && record.timestamp >= window_start
            {
                batches.push((mark, record.timestamp));
            }
            let (message, at) = self.decode(record)?;
            // A settled reference of a forgotten link names an id no link has any more
            // (ids are never reused): nothing to resume.
            if let Some(at) = at
                && let Ok(link) = self.link_of(at)
            {
                link.seen_on_disk(at);
            }
            if message.published_at >= window_start
                && let Some(key) = dedup_key(&message)
            {
                dedup.push((key, message.id, message.published_at));
            }
            if replay.settled(seq) {
                return Ok(());
            }
            if let Some(letter) = dead_lettered.get(&seq)
                && letter.id == message.id
                && letter.published_at == message.published_at
            {
                let reason = letter.reason;
                settle.push(JournalEvent::DeadLettered { seq, reason });
                inner.live.insert(seq, seq + 1);
                return Ok(());
            }
            let r = replay.seqs.get(&seq).cloned().unwrap_or_default();
            let mut tracked = match at {
                Some(at) => self.tracked_sized(seq, &message, at.size),
                None => self.tracked(seq, &message),
            };
            if let Some(at) = at {
                self.link_of(at)?.referenced(seq, at);
            }
            tracked.deliveries = r.deliveries;
            // A lease still running at the crash ends at its deadline; a retry keeps its time.
            if let Some(at) = r.not_before_ms {
                tracked.deliver_at_ms = tracked.deliver_at_ms.max(at);
            }
            if r.deliveries > 0 {
                inner.deliveries.insert(seq, r.deliveries);
            }
            inner.live.insert(seq, seq + 1);
            inner.state.track_restored(tracked, r.failures, now_ms);
            Ok(())
        })?;
        inner.dedup.restore(dedup);
        inner.dedup.expire(now_ms);
        for (mark, at) in batches {
            inner.batches.insert(mark, at);
        }
        inner.batches.expire(now_ms);
        for key in &replay.parked {
            inner.state.park(key);
        }
        inner.counts = replay.counts;
        // What a checkpoint would let go of: the next one is due when this reaches the
        // threshold, however many opens it takes.
        inner.journal_bytes = replay.journal_bytes;
        inner.stored_end = self.messages.end_offset();
        Ok(settle)
    }
}

/// A dead letter found in a dead-letter queue: which message of its origin it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FoundLetter {
    /// The original message's id and publish time: with the origin seq they tell the
    /// message from another one at the same seq of a queue deleted and created again.
    pub id: MessageId,
    pub published_at: i64,
    pub reason: DeadLetterReason,
}

/// Per origin queue, the dead letters its dead-letter queue already holds, by origin seq:
/// the letters a crash stored without their `DeadLettered` on the origin (the crash window
/// in `engine/effects.rs`), which the origin must not track again.
pub(super) fn already_dead_lettered(
    queues: &BTreeMap<Name, Arc<Queue>>,
) -> Result<HashMap<Name, HashMap<Seq, FoundLetter>>> {
    let targets: HashSet<Name> = queues
        .iter()
        .filter_map(|(name, q)| q.spec().dead_letter_target(name).ok().flatten())
        .collect();
    let mut found: HashMap<Name, HashMap<Seq, FoundLetter>> = HashMap::new();
    for target in targets {
        let Some(dlq) = queues.get(&target) else {
            continue;
        };
        scan(&dlq.messages, |record| {
            let letter = Message::from_record(record)?;
            if let Some(info) = &letter.dead_letter
                && let Ok(origin) = Name::new(&info.origin_queue)
                && let Some(reason) = DeadLetterReason::parse(&info.reason)
            {
                let seen = FoundLetter {
                    id: letter.id,
                    published_at: info.origin_published_at,
                    reason,
                };
                found
                    .entry(origin)
                    .or_default()
                    .insert(info.origin_seq, seen);
            }
            Ok(())
        })?;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::Covered;

    #[test]
    fn a_checkpoint_settles_below_low_and_outside_its_runs() {
        let covered = Covered {
            low: 10,
            end: 30,
            runs: vec![(10, 12), (15, 16), (20, 25)],
        };
        let settled: Vec<u64> = (0..35).filter(|&s| covered.settled(s)).collect();
        let expected: Vec<u64> = (0..10)
            .chain([12, 13, 14])
            .chain(16..20)
            .chain(25..30)
            .collect();
        assert_eq!(settled, expected);
    }
}
