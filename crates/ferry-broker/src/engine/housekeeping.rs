//! Keeping a queue's logs from growing without bound: journal checkpoints, and retention of
//! both logs.
//!
//! **Journal.** Once the journal has grown by [`BrokerConfig::checkpoint_journal_bytes`]
//! since its last checkpoint, the journal is rolled to a new segment and a checkpoint is
//! appended (see [`crate::queue::journal`]): the live seqs as runs, the deliveries and
//! not-before times of those delivered before, the parked keys and the counters. Once it is
//! durable, the segments before it are deleted — a restart replays from the checkpoint.
//!
//! **Messages.** Segments of the message log whose seqs are all settled, and older than the
//! dedup window (a restart rebuilds the window from the stored messages), are deleted.
//!
//! **Topics.** Each partition keeps what its topic's retention allows (see
//! `engine/topics.rs`), and a compacted topic's partitions keep the latest record of each
//! key (see `engine/topic_compaction.rs`).
//!
//! **Temporary queues** idle past their timeout are deleted (see `engine/queue/temporary.rs`).
//!
//! All of it runs from the broker's timer task about once a second, and on demand through
//! [`Broker::maintain_now`]. They block on file operations (roll, delete); both are short, and run on the calling thread like the engine's other blocking storage calls.
//!
//! [`BrokerConfig::checkpoint_journal_bytes`]: super::BrokerConfig::checkpoint_journal_bytes

use bytes::Bytes;
use ferry_storage::{RetentionPolicy, RetentionReport};

use super::Broker;
use super::queue::{Inner, Queue};
use super::topic_compaction::CompactionStats;
use crate::error::Result;
use crate::message::millis;
use crate::queue::journal::JournalEvent;
use crate::queue::state::RestorePoint;

/// Most runs or delivered entries per checkpoint record, so a record stays small (well
/// under the storage's record limit) however fragmented the live set is.
const CHECKPOINT_CHUNK: usize = 4096;
/// A generous bound on a journal record's framing in a storage batch, for sizing appends.
const RECORD_OVERHEAD: usize = 64;

/// What one maintenance pass did, summed over queues.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MaintenanceReport {
    pub checkpoints: usize,
    pub deleted_segments: usize,
    pub deleted_bytes: u64,
    /// What compaction of topics by key did (see `engine/topic_compaction.rs`).
    pub compaction: CompactionStats,
}

impl MaintenanceReport {
    /// Counts what a retention pass deleted.
    pub(super) fn deleted(&mut self, retention: &RetentionReport) {
        self.deleted_segments += retention.deleted_segments;
        self.deleted_bytes += retention.deleted_bytes;
    }
}

/// The checkpoint of a queue's state (call with the state lock held).
fn checkpoint_events(inner: &Inner) -> Vec<JournalEvent> {
    let end = inner.stored_end;
    let low = inner.live.first().unwrap_or(end).min(end);
    let mut events = vec![JournalEvent::CheckpointBegin {
        low,
        end,
        counts: inner.counts,
    }];
    let runs: Vec<(u64, u64)> = inner.live.runs().collect();
    for chunk in runs.chunks(CHECKPOINT_CHUNK) {
        events.push(JournalEvent::CheckpointLive {
            runs: chunk.to_vec(),
        });
    }
    let mut points: Vec<RestorePoint> = inner
        .deliveries
        .iter()
        .filter(|(seq, _)| inner.live.contains(**seq))
        .map(|(&seq, &deliveries)| {
            // A message on its way to the dead-letter queue has left the state: a restart
            // that finds it unsettled tracks it again with its deliveries.
            inner.state.restore_point(seq).unwrap_or(RestorePoint {
                seq,
                deliveries,
                not_before_ms: None,
            })
        })
        .collect();
    points.sort_unstable_by_key(|p| p.seq);
    for chunk in points.chunks(CHECKPOINT_CHUNK) {
        events.push(JournalEvent::CheckpointDelivered {
            points: chunk.to_vec(),
        });
    }
    for point in &points {
        if let Some(record) = inner.state.failure_record(point.seq) {
            events.push(JournalEvent::CheckpointFailures {
                seq: point.seq,
                record,
            });
        }
    }
    for (key, _) in inner.state.parked_keys() {
        events.push(JournalEvent::CheckpointParked {
            key: Bytes::copy_from_slice(key),
        });
    }
    events.push(JournalEvent::CheckpointEnd);
    events
}

impl Queue {
    /// Writes a checkpoint and deletes the journal segments before it; returns what was
    /// deleted.
    pub async fn checkpoint(&self, now_ms: i64) -> Result<RetentionReport> {
        // A new segment first, so that every segment before the checkpoint can go.
        self.journal.roll()?;
        // A large checkpoint is several appends (one append is one storage batch, which has
        // a size limit), all made under the lock so nothing falls between them; replay
        // ignores a checkpoint whose end a crash cut off.
        let max_append = self.journal.config().max_batch_bytes / 2;
        let appends = {
            let mut inner = self.lock();
            let events = checkpoint_events(&inner);
            let mut appends = Vec::new();
            let (mut start, mut size) = (0, 0);
            for (i, event) in events.iter().enumerate() {
                let len = event.to_record(now_ms).value.len() + RECORD_OVERHEAD;
                if i > start && size + len > max_append {
                    appends.push(self.journal(&mut inner, &events[start..i], now_ms));
                    (start, size) = (i, 0);
                }
                size += len;
            }
            appends.push(self.journal(&mut inner, &events[start..], now_ms));
            inner.journal_bytes = 0;
            appends
        };
        let mut begin = None;
        for rx in appends {
            let appended = rx
                .await
                .map_err(|_| ferry_storage::StorageError::Closed)??;
            begin.get_or_insert(appended.base_offset);
        }
        let begin = begin.expect("a checkpoint has at least one append");
        // Under a durability other than `Fsync` the append may not be on disk yet; the
        // segments it replaces must not go before it is.
        self.journal.sync()?;
        let report = self.journal.apply_retention(&RetentionPolicy {
            low_watermark: Some(begin),
            ..RetentionPolicy::default()
        })?;
        Ok(report)
    }

    /// Deletes message-log segments that hold only settled seqs older than the dedup
    /// window; returns what was deleted.
    pub fn retain_messages(&self, now_ms: i64) -> Result<RetentionReport> {
        let mut low = {
            let inner = self.lock();
            inner.live.first().unwrap_or(inner.stored_end)
        };
        if self.has_links() {
            low = low.min(self.retention_cap.load(std::sync::atomic::Ordering::SeqCst));
        }
        let watermark = if self.spec().dedup_window.is_zero() {
            low
        } else {
            let window_start = now_ms.saturating_sub(millis(self.spec().dedup_window));
            self.messages
                .offset_for_timestamp(window_start)?
                .unwrap_or(low)
                .min(low)
        };
        let report = self.messages.apply_retention(&RetentionPolicy {
            low_watermark: Some(watermark),
            ..RetentionPolicy::default()
        })?;
        Ok(report)
    }
}

/// Which queues' journals [`Broker::maintain_now`] checkpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checkpoint {
    /// Those grown by [`BrokerConfig::checkpoint_journal_bytes`](crate::BrokerConfig)
    /// since their last checkpoint: what the timer task does.
    WhenDue,
    /// Every queue's, now (before a backup, or to bound the next restart's replay).
    Always,
}

impl Broker {
    /// Checkpoints the queues' journals that `checkpoint` says, and applies retention to
    /// every queue's logs and every topic's partitions (see `engine/topics.rs`). The timer
    /// task runs it with [`Checkpoint::WhenDue`] about once a second. A queue or topic that
    /// fails does not hold up the others: every one is tried, then the first error is
    /// returned.
    pub async fn maintain_now(&self, checkpoint: Checkpoint) -> Result<MaintenanceReport> {
        let threshold = self.inner.config.checkpoint_journal_bytes;
        let mut report = MaintenanceReport::default();
        let mut first_error = None;
        if let Err(error) = self.delete_idle_temporary_queues().await {
            first_error = Some(error);
        }
        // Before queue retention: a subscription's saved cursors must cover the references
        // retention may delete.
        if let Err(error) = self.maintain_subscriptions() {
            first_error.get_or_insert(error);
        }
        for queue in self.queue_list().into_iter().filter(|q| !q.is_poisoned()) {
            let now_ms = self.now_ms();
            let due = checkpoint == Checkpoint::Always || queue.lock().journal_bytes >= threshold;
            let result = async {
                if due {
                    report.deleted(&queue.checkpoint(now_ms).await?);
                    report.checkpoints += 1;
                }
                report.deleted(&queue.retain_messages(now_ms)?);
                Ok::<(), crate::BrokerError>(())
            }
            .await;
            if let Err(error) = result {
                first_error.get_or_insert(error);
            }
        }
        self.maintain_groups();
        if let Err(error) = self.delete_expired_snapshots() {
            first_error.get_or_insert(error);
        }
        if let Err(error) = self.maintain_topics(&mut report).await {
            first_error.get_or_insert(error);
        }
        match first_error {
            Some(error) => Err(error),
            None => Ok(report),
        }
    }
}
