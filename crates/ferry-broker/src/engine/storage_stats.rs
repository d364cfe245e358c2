//! What the storage engine's writer threads measured across every log the broker owns:
//! fdatasync durations and group commit sizes, by kind of log.
//!
//! All logs of one kind record into one shared [`LogStats`], so a scrape reads three
//! snapshots rather than one per queue and partition, and the sums never go backwards when
//! a queue or topic is deleted (its observations stay counted). Kinds are kept apart
//! because they behave differently: a queue's journal takes an event per delivery and
//! settlement, its message log one append per publish, and a topic partition one per
//! publish to it. The metadata store (specs, committed offsets, cursors) is not a storage
//! log and syncs on its own: it is not included.

use std::sync::Arc;

use ferry_storage::{LogStats, LogStatsSnapshot};

use super::Broker;

/// Where each kind of log records (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct LogStatsByKind {
    pub queue_messages: Arc<LogStats>,
    pub queue_journals: Arc<LogStats>,
    pub topic_partitions: Arc<LogStats>,
}

/// [`Broker::storage_stats`]: the measurements of every log of each kind, summed, since
/// the broker was opened (they start empty on open).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StorageStats {
    /// Message logs of queues (subscriptions and temporary queues included).
    pub queue_messages: LogStatsSnapshot,
    /// State-event journals of queues.
    pub queue_journals: LogStatsSnapshot,
    /// Partition logs of topics.
    pub topic_partitions: LogStatsSnapshot,
}

impl StorageStats {
    /// All kinds together.
    pub fn total(&self) -> LogStatsSnapshot {
        let mut total = self.queue_messages.clone();
        total.merge(&self.queue_journals);
        total.merge(&self.topic_partitions);
        total
    }
}

impl Broker {
    /// fdatasync durations and group commit sizes of the broker's logs, by kind.
    pub fn storage_stats(&self) -> StorageStats {
        let kinds = &self.inner.log_stats;
        StorageStats {
            queue_messages: kinds.queue_messages.snapshot(),
            queue_journals: kinds.queue_journals.snapshot(),
            topic_partitions: kinds.topic_partitions.snapshot(),
        }
    }
}
