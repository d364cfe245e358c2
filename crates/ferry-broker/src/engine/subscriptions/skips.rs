//! Retention that overrides subscriptions: what a subscription loses when its topic's
//! retention deletes records it has not settled
//! ([`TopicRetention::overrides_subscriptions`](crate::TopicRetention::overrides_subscriptions)).
//!
//! Before a partition's segments go, every subscription *releases* the offsets below where
//! retention will start the partition: its unsettled messages there (ready, delayed,
//! retrying or in flight) leave its queue with a durable `Skipped` journal event — a late
//! ack of one finds nothing to settle — and its cursor jumps over records it never took in.
//! Each loss is recorded as a [`SkippedRange`] in the metadata store *before* the segments
//! are deleted, so a crash in between reports the loss rather than hiding it; the records
//! may then survive until the next pass, which releases nothing more.
//!
//! A partition with reference appends in flight releases only up to its durable cursor
//! (the appends point past it, at records that must still be there when they land); the
//! rest goes on a later pass.
//!
//! A receive that leased a message in the instant before it was skipped, and reads it
//! after its record is gone, fails with `MalformedRecord` naming the lost record; the other
//! messages of that receive come back when their lease ends. Nothing acknowledged is lost.

use std::sync::Arc;

use super::super::Broker;
use super::super::queue::durable;
use super::super::topic::Partition;
use super::{Link, LinkState};
use crate::error::Result;
use crate::queue::journal::JournalEvent;
use crate::queue::state::Seq;

pub(in crate::engine) const SKIPS_PREFIX: &str = "subscription-skips/";
/// Ranges kept per subscription: past this the two oldest of a partition merge, so what
/// was lost stays counted while the list stays small.
const MAX_RANGES: usize = 256;

/// Topic offsets a subscription lost to its topic's retention, in one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkippedRange {
    pub partition: u32,
    /// The first offset lost and the offset after the last (offsets in between that the
    /// subscription had settled, or its filter did not take, are inside too).
    pub from: u64,
    pub to: u64,
    /// Messages taken out of the subscription unsettled (also counted in its queue's
    /// [`skipped`](crate::QueueStats::skipped)).
    pub dropped: u64,
    /// Records deleted before the subscription considered them (some of which its filter
    /// might not have taken).
    pub unread: u64,
}

/// What one link gives up in one partition.
struct Release {
    /// Unsettled references below the release point: (seq, topic offset).
    dropped: Vec<(Seq, u64)>,
    /// The lowest offset the cursor jumped from and how many records it jumped over.
    unread: Option<(u64, u64)>,
    to: u64,
}

impl LinkState {
    fn record_skip(&mut self, range: SkippedRange) {
        if let Some(last) = self
            .skipped
            .iter_mut()
            .rev()
            .find(|r| r.partition == range.partition)
            && last.to >= range.from
        {
            last.from = last.from.min(range.from);
            last.to = last.to.max(range.to);
            last.dropped += range.dropped;
            last.unread += range.unread;
            return;
        }
        self.skipped.push(range);
        if self.skipped.len() > MAX_RANGES {
            let p = range.partition;
            let mut same = self
                .skipped
                .iter()
                .enumerate()
                .filter(|(_, r)| r.partition == p);
            if let (Some((i, _)), Some((j, _))) = (same.next(), same.next()) {
                let later = self.skipped.remove(j);
                let first = &mut self.skipped[i];
                first.to = later.to;
                first.dropped += later.dropped;
                first.unread += later.unread;
            }
        }
    }
}

impl Link {
    /// Gives up everything of `partition` below `target`, or below the durable cursor if
    /// reference appends are in flight; returns what it gave up.
    fn release_below(&self, partition: u32, target: u64) -> Release {
        let mut state = self.lock();
        state.grow(partition as usize + 1);
        let cursor = state.cursors[partition as usize];
        let to = if cursor.in_flight > 0 {
            target.min(cursor.durable)
        } else {
            target
        };
        let mut dropped: Vec<(Seq, u64)> = state
            .positions
            .iter()
            .filter(|(_, (p, offset))| *p == partition && *offset < to)
            .map(|(&seq, &(_, offset))| (seq, offset))
            .collect();
        dropped.sort_unstable();
        let mut unread = None;
        if cursor.in_flight == 0 && cursor.durable < to {
            unread = Some((cursor.durable, to - cursor.durable));
            let cursor = &mut state.cursors[partition as usize];
            cursor.issued = cursor.issued.max(to);
            cursor.durable = to;
        }
        Release {
            dropped,
            unread,
            to,
        }
    }

    /// The ranges this subscription lost, oldest first.
    pub fn skipped(&self) -> Vec<SkippedRange> {
        self.lock().skipped.clone()
    }

    pub(in crate::engine) fn set_skipped(&self, ranges: Vec<SkippedRange>) {
        self.lock().skipped = ranges;
    }
}

impl Broker {
    /// Makes every subscription of a partition give up what `partition`'s retention will
    /// delete (the topic's retention overrides them); returns the offset retention must
    /// keep from — what the subscriptions still hold, which may be below the target while
    /// appends are in flight.
    pub(in crate::engine) async fn release_for_retention(
        &self,
        links: &[Arc<Link>],
        partition: &Partition,
        target: u64,
    ) -> Result<Option<u64>> {
        let mut changed = Vec::new();
        for link in links {
            if link.hold(partition.index).is_none_or(|hold| hold >= target) {
                continue;
            }
            let Some(queue) = link.queue() else {
                continue;
            };
            let release = link.release_below(partition.index, target);
            let now_ms = self.now_ms();
            let (rx, effects, dropped) = {
                let mut inner = queue.lock();
                let mut events = Vec::new();
                let mut dropped = Vec::new();
                for &(seq, offset) in &release.dropped {
                    // Not in the state: settled meanwhile, or on its way to the dead-letter
                    // queue — which settles it — and until then still held.
                    if inner.state.skip(seq, now_ms) {
                        events.push(JournalEvent::Skipped { seq });
                        dropped.push(offset);
                    }
                }
                let rx = (!events.is_empty()).then(|| queue.journal(&mut inner, &events, now_ms));
                (rx, queue.take_effects(&mut inner, now_ms), dropped)
            };
            if let Some(rx) = rx {
                durable(rx).await?;
            }
            self.apply_effects(&queue, effects).await?;
            let from = dropped
                .iter()
                .copied()
                .chain(release.unread.map(|(from, _)| from))
                .min();
            if let Some(from) = from {
                let range = SkippedRange {
                    partition: partition.index,
                    from,
                    to: release.to,
                    dropped: dropped.len() as u64,
                    unread: release.unread.map_or(0, |(_, n)| n),
                };
                tracing::warn!(
                    subscription = %queue.name,
                    topic = %link.topic.name,
                    partition = range.partition,
                    from = range.from,
                    to = range.to,
                    dropped = range.dropped,
                    unread = range.unread,
                    "topic retention deleted records the subscription had not settled"
                );
                link.lock().record_skip(range);
                changed.push(Arc::clone(link));
            }
        }
        if !changed.is_empty() {
            // On disk before the records go: a crash after this reports the loss.
            let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
            let mut batch = ferry_storage::MetaBatch::new();
            for link in &changed {
                let key = &link.key;
                batch.put(format!("{SKIPS_PREFIX}{key}"), encode(&link.skipped()));
                batch.put(
                    format!("{}{key}", super::CURSOR_PREFIX),
                    super::encode_cursors(&link.durable_cursors()),
                );
            }
            meta.commit(batch)?;
        }
        Ok(links.iter().filter_map(|l| l.hold(partition.index)).min())
    }
}

/// Five little-endian u64s per range (the partition widened), for the metadata store.
pub(super) fn encode(ranges: &[SkippedRange]) -> Vec<u8> {
    ranges
        .iter()
        .flat_map(|r| {
            [u64::from(r.partition), r.from, r.to, r.dropped, r.unread]
                .into_iter()
                .flat_map(u64::to_le_bytes)
        })
        .collect()
}

pub(in crate::engine) fn decode(bytes: &[u8]) -> Vec<SkippedRange> {
    bytes
        .chunks_exact(40)
        .map(|c| {
            let n = |i: usize| u64::from_le_bytes(c[i * 8..i * 8 + 8].try_into().expect("8"));
            SkippedRange {
                partition: u32::try_from(n(0)).unwrap_or(u32::MAX),
                from: n(1),
                to: n(2),
                dropped: n(3),
                unread: n(4),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(partition: u32, from: u64, to: u64) -> SkippedRange {
        SkippedRange {
            partition,
            from,
            to,
            dropped: 1,
            unread: 2,
        }
    }

    #[test]
    fn ranges_round_trip_through_their_encoding() {
        let ranges = vec![range(0, 1, 5), range(7, 100, 4096)];
        assert_eq!(decode(&encode(&ranges)), ranges);
        assert_eq!(decode(&[]), []);
    }

    #[test]
    fn touching_ranges_of_a_partition_merge_and_others_stay_apart() {
        let mut state = LinkState::default();
        state.record_skip(range(0, 0, 10));
        state.record_skip(range(1, 0, 10));
        state.record_skip(range(0, 10, 20));
        state.record_skip(range(0, 30, 40));
        assert_eq!(
            state.skipped,
            [
                SkippedRange {
                    dropped: 2,
                    unread: 4,
                    ..range(0, 0, 20)
                },
                range(1, 0, 10),
                range(0, 30, 40),
            ]
        );
    }

    #[test]
    fn past_the_limit_the_oldest_ranges_merge_and_keep_their_counts() {
        let mut state = LinkState::default();
        for i in 0..=MAX_RANGES as u64 {
            state.record_skip(range(0, i * 10, i * 10 + 5));
        }
        assert_eq!(state.skipped.len(), MAX_RANGES);
        assert_eq!(state.skipped[0].from, 0);
        assert_eq!(state.skipped[0].to, 15);
        let dropped: u64 = state.skipped.iter().map(|r| r.dropped).sum();
        assert_eq!(dropped, MAX_RANGES as u64 + 1);
    }
}
