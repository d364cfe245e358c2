//! Deleting a partition's records before an offset: Kafka's DeleteRecords, which moves a
//! partition's log start offset (its low watermark) forward.
//!
//! **What it does.** Storage deletes whole segments only, so the offset is kept per
//! partition beside the log (`Partition::deleted_before`): reads start at it, so an
//! offset below it is out of range and the earliest offset is it; retention passes it as
//! the low watermark, so the whole segments below it are deleted at once and the rest of
//! the segment it falls in goes when the segment does. The offset only moves forward.
//!
//! **Subscriptions.** The same rule as retention (see `engine/subscriptions.rs`): by
//! default records a subscription has not settled or not yet taken in are kept, so a
//! deletion that would take any is refused with
//! [`BrokerError::RecordsHeldBySubscription`] and changes nothing; when the topic's
//! retention overrides subscriptions, the deletion wins as retention would, and what each
//! subscription loses is recorded and reported as retention's losses are.
//!
//! **Durability.** The offset is committed to the metadata store under
//! `topic-start/<topic>/<partition>` before readers see it, and read back at open; deleting
//! the topic deletes it in the topic's own commit. A crash after the commit leaves the
//! records below it unreadable and deleted by the next retention pass; a crash before
//! leaves them as they were, and the caller, not answered, tries again.

use std::sync::atomic::Ordering;

use ferry_storage::MetaStore;

use super::Broker;
use super::topic::Topic;
use crate::error::{BrokerError, Result};
use crate::name::Name;

/// Longest wait for subscriptions' reference appends in flight when records are deleted
/// from under them (an append completes in about one fsync).
const APPENDS_IN_FLIGHT_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

pub(super) const DELETED_BEFORE_PREFIX: &str = "topic-start/";

/// The metadata key prefix of `topic`'s partitions' offsets.
pub(super) fn deleted_before_prefix(topic: &Name) -> String {
    format!("{DELETED_BEFORE_PREFIX}{topic}/")
}

/// Sets each partition's offset from the metadata store, at open.
pub(super) fn load_deleted_before(meta: &MetaStore, topic: &Topic) -> Result<()> {
    let shape = topic.shape();
    for (key, value) in meta.scan_prefix(&deleted_before_prefix(&topic.name)) {
        let bad = |problem: String| BrokerError::MalformedTopicSpec {
            topic: topic.name.to_string(),
            problem,
        };
        let partition: usize = key[deleted_before_prefix(&topic.name).len()..]
            .parse()
            .map_err(|_| bad(format!("{key} does not end in a partition number")))?;
        let offset = <[u8; 8]>::try_from(&value[..])
            .map(u64::from_le_bytes)
            .map_err(|_| bad(format!("{key} does not hold an offset")))?;
        // A partition past the spec's count is one an interrupted add_partitions left: its
        // directory is cleared before it is created again, and so is this.
        if let Some(p) = shape.partitions.get(partition) {
            p.deleted_before.store(offset, Ordering::Release);
        }
    }
    Ok(())
}

impl Broker {
    /// Deletes the records of `partition` of `topic` before offset `before` (at most the
    /// partition's end: everything); returns the partition's start offset after it. An
    /// offset at or below the current start deletes nothing and returns the start. See
    /// `engine/delete_records.rs` for subscriptions and durability.
    pub async fn delete_records(&self, topic: &str, partition: u32, before: u64) -> Result<u64> {
        let topic = self.topic(topic)?;
        let target = topic.partition(partition)?;
        let (start, end) = (target.start_offset(), target.log.end_offset());
        if before > end {
            return Err(BrokerError::OffsetOutOfRange {
                topic: topic.name.clone(),
                partition,
                offset: before,
                start,
                end,
            });
        }
        if before <= start {
            return Ok(start);
        }
        let shape = topic.shape();
        let links = topic.fanout.links();
        let held = links
            .iter()
            .filter_map(|l| l.hold(partition).map(|hold| (hold, l)))
            .filter(|(hold, _)| *hold < before)
            .min_by_key(|(hold, _)| *hold);
        if let Some((needed, link)) = held {
            if !shape.spec.retention.overrides_subscriptions {
                return Err(BrokerError::RecordsHeldBySubscription {
                    topic: topic.name.clone(),
                    partition,
                    offset: before,
                    subscription: link.name(),
                    needed,
                });
            }
            self.release_for_retention(&links, &target, before).await?;
            // References a subscription was appending when the deletion began cannot be
            // released until they are on disk: release again once they are, so that no
            // subscription delivers a record this call deleted. One more release after
            // nothing is appending any more; bounded, as a subscription whose append
            // failed never completes it.
            let waited_since = std::time::Instant::now();
            while waited_since.elapsed() < APPENDS_IN_FLIGHT_WAIT {
                let held: Vec<_> = links
                    .iter()
                    .filter(|l| l.hold(partition).is_some_and(|hold| hold < before))
                    .collect();
                if held.is_empty() {
                    break;
                }
                let appending = held.iter().any(|l| l.appending(partition));
                if appending {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
                self.release_for_retention(&links, &target, before).await?;
                if !appending {
                    break;
                }
            }
        }
        {
            let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
            // Under the lock: of two deletions at once the higher offset is the one kept.
            let offset = before.max(target.deleted_before.load(Ordering::Acquire));
            meta.put(
                format!("{}{partition}", deleted_before_prefix(&topic.name)),
                offset.to_le_bytes().to_vec(),
            )?;
            target.deleted_before.store(offset, Ordering::Release);
        }
        // The whole segments below go now rather than at the next pass; what a
        // subscription still holds stays, as in every retention pass.
        let keep_from = links.iter().filter_map(|l| l.hold(partition)).min();
        target.retain(&shape.spec, keep_from)?;
        Ok(target.start_offset())
    }
}
