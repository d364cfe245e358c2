//! Seeking a subscription: setting, in bulk, which of its topic's messages count as
//! acknowledged — to a time (everything published before it acknowledged, everything at or
//! after it not) or to a snapshot's [`Backlog`] (see `engine/snapshots.rs`).
//!
//! **How.** A seek does not edit references in place: it purges every reference the
//! subscription holds (`Purged` journal events, as `purge_queue` does: every lease ends, a
//! later ack, nack or extend of it is `StaleLease`, nothing is dead-lettered), then issues
//! new references for what the target counts as unacknowledged, from the topic, through the
//! filter, and lets catch-up take the rest from the target's point on. Re-added messages are
//! new references with new seqs: they start with no deliveries, and a lease token of an old
//! one can never settle them. Per partition they are appended in offset order (the runs
//! below the point, then catch-up from it), so key-shared ordering holds. What the topic no
//! longer keeps is not re-added. The purge is counted in `QueueStats::purged`. The
//! references go one read (at most `CATCH_UP_RECORDS` records) at a time, each durable
//! before the next read: a seek over a large backlog never holds more than one read's
//! references in memory. It waits for its appends on the link's completions, not a timer.
//!
//! While a seek runs the link is *paused*: neither a publish's offer nor catch-up issues
//! anything, in any partition (also one added meanwhile), and once the spans in flight are durable
//! the durable cursors drop to what the target needs, which holds the topic's retention
//! there meanwhile.
//!
//! **A time in the future.** Pub/Sub acknowledges every message published before the time,
//! also those published after the seek. So does this: a time ahead of the broker's clock is
//! kept as the link's `ack_before_ms` (stored under [`ACK_BEFORE_PREFIX`]) and messages
//! published before it are not referenced when they arrive. A later seek replaces it (a
//! snapshot seek, or a seek to a time already past, clears it).
//!
//! **Durability and crash windows.** The seek returns once the purge is journaled, every
//! re-added reference is durable and the new cursors are saved. Before it touches anything
//! it commits its *intent* — the target resolved to a [`Backlog`] of offsets, and the
//! `ack_before` time — under [`SEEK_PREFIX`]; the final metadata commit saves the cursors
//! and the `ack_before` time and deletes the intent, in one batch. A crash in between
//! (purge durable or not, references re-added in part) leaves the intent, and the next open
//! carries the seek out again from the start ([`finish_interrupted_seeks`]): purging and
//! re-adding are repeatable, and the resolved offsets do not depend on when it runs. A
//! failure during the seek (a storage error) leaves the link paused and the intent stored:
//! the subscription takes in nothing new until the broker is reopened, which finishes it.

use std::sync::Arc;

use super::{CATCH_UP_RECORDS, CURSOR_PREFIX, Link, LinkRole, encode_cursors};
use crate::engine::Broker;
use crate::engine::queue::Queue;
use crate::engine::topic::Partition;
use crate::error::{BrokerError, Result};
use crate::message::Message;
use crate::name::Name;
use crate::subscription::Backlog;
use crate::topic::Position;

/// An in-progress seek's intent, per subscription: see the module docs.
pub(in crate::engine) const SEEK_PREFIX: &str = "subscription-seek/";
/// The time before which a subscription's messages count as acknowledged, when a seek set
/// one.
pub(in crate::engine) const ACK_BEFORE_PREFIX: &str = "subscription-ack-before/";

/// Where [`Broker::seek_subscription`] takes a subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeekTarget {
    /// A time in ms since the Unix epoch: messages published before it count as
    /// acknowledged (also, for a time in the future, those published after the seek),
    /// messages published at or after it as unacknowledged.
    Time(i64),
    /// A snapshot of a subscription of the same topic (see [`Broker::create_snapshot`]).
    Snapshot(String),
}

/// What a seek sets, resolved: stored as its intent until it is done.
struct SeekIntent {
    backlog: Backlog,
    ack_before_ms: Option<i64>,
}

impl SeekIntent {
    fn encode(&self) -> Vec<u8> {
        let mut out = self
            .ack_before_ms
            .unwrap_or(i64::MIN)
            .to_le_bytes()
            .to_vec();
        out.extend(self.backlog.encode());
        out
    }

    fn decode(bytes: &[u8]) -> std::result::Result<SeekIntent, String> {
        let (head, rest) = bytes.split_at_checked(8).ok_or("is too short")?;
        Ok(SeekIntent {
            ack_before_ms: Some(decode_ack_before(head)?).filter(|&at| at != i64::MIN),
            backlog: Backlog::decode(rest)?,
        })
    }
}

pub(in crate::engine) fn decode_ack_before(bytes: &[u8]) -> std::result::Result<i64, String> {
    <[u8; 8]>::try_from(bytes)
        .map(i64::from_le_bytes)
        .map_err(|_| "an ack-before time that is not 8 bytes".to_owned())
}

impl Link {
    pub(in crate::engine) fn set_ack_before(&self, at_ms: i64) {
        self.ack_before_ms
            .store(at_ms, std::sync::atomic::Ordering::SeqCst);
    }

    /// What counts as unacknowledged now: the references not settled, and everything from
    /// the durable cursors on (records considered but not durably referenced are counted
    /// from the cursor, as not yet taken in).
    pub(in crate::engine) fn backlog(&self) -> Backlog {
        let state = self.lock();
        let from: Vec<u64> = state.cursors.iter().map(|c| c.durable).collect();
        Backlog::capture(&state.pending, &from)
    }

    /// The lowest unsettled offset of each partition (for a snapshot's lifetime).
    pub(in crate::engine) fn oldest_unsettled(&self) -> Vec<(u32, u64)> {
        let state = self.lock();
        (0u32..)
            .zip(&state.pending)
            .filter_map(|(p, pending)| pending.first().map(|o| (p, o)))
            .collect()
    }

    /// Held for the length of a seek or a snapshot's capture.
    pub(in crate::engine) async fn seek_lock(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.seeking.lock().await
    }

    /// Stops issuing references until [`resume`](Self::resume). Each partition the topic
    /// has gets a cursor, so the link holds its records while paused.
    fn pause(&self) {
        let partitions = self.topic.shape().partitions.len();
        let mut state = self.lock();
        state.grow(partitions);
        state.paused = true;
    }

    /// Once no reference append is in flight, holds the topic's retention at what
    /// `backlog` needs; false while one is.
    fn hold_for(&self, backlog: &Backlog) -> bool {
        let mut state = self.lock();
        if state.cursors.iter().any(|c| c.in_flight > 0) {
            return false;
        }
        for (p, cursor) in (0u32..).zip(&mut state.cursors) {
            cursor.durable = cursor.durable.min(backlog.hold(p));
            cursor.deferred = 0;
        }
        true
    }

    /// Before re-adding `partition`'s references: holds the topic's retention at what
    /// `backlog` needs there (the cursor stays paused).
    fn hold_partition(&self, partition: u32, backlog: &Backlog, start: u64) {
        let mut state = self.lock();
        state.grow(partition as usize + 1);
        let cursor = &mut state.cursors[partition as usize];
        cursor.durable = backlog
            .hold(partition)
            .max(start)
            .min(backlog.from(partition));
        cursor.deferred = 0;
    }

    /// Issues references for one read of `partition` from `at`, up to `run_end`: those the
    /// target counts unacknowledged and the filter takes. Returns the offset after the
    /// records read, or `None` when the partition holds nothing from `at` on. The topic is
    /// read under the link's lock, as catch-up reads it.
    fn re_add_step(
        self: &Arc<Self>,
        queue: &Queue,
        partition: &Partition,
        at: u64,
        run_end: u64,
    ) -> Result<Option<u64>> {
        let want = usize::try_from(run_end - at)
            .unwrap_or(usize::MAX)
            .min(CATCH_UP_RECORDS);
        let mut state = self.lock();
        let records = partition.read(&self.topic.name, Position::Offset(at), want)?;
        let Some(last) = records.last().map(|r| r.offset) else {
            return Ok(None);
        };
        let messages: Vec<(u64, Message)> = records
            .into_iter()
            .filter(|r| r.offset < run_end)
            .map(|r| (r.offset, r.message))
            .collect();
        let refs = self.references(
            queue,
            partition.index,
            messages.iter().map(|(o, m)| (*o, m)),
        );
        let end = (last + 1).min(run_end);
        Self::issue(&mut state, partition.index, end, refs, None);
        self.flush_locked(&mut state);
        Ok(Some(last + 1))
    }

    /// Un-pauses the link with each cursor at its point in `backlog`: offers and catch-up
    /// take it from there. A partition the backlog does not know (added to the topic
    /// later) starts at its first record.
    fn resume(&self, backlog: &Backlog) {
        let shape = self.topic.shape();
        let mut state = self.lock();
        state.grow(shape.partitions.len());
        for partition in &shape.partitions {
            let p = partition.index;
            let from = backlog.from(p).max(partition.start_offset());
            state.cursors[p as usize].issued = from;
            // Nothing below the point is left to reference.
            Self::issue(&mut state, p, from, Vec::new(), None);
        }
        state.paused = false;
    }

    /// The cursors' `issued`: what [`durable_up_to`](Self::durable_up_to) waits for.
    fn issued(&self) -> Vec<u64> {
        self.lock().cursors.iter().map(|c| c.issued).collect()
    }

    /// Whether every reference issued below `issued` is durable.
    fn durable_up_to(&self, issued: &[u64]) -> bool {
        let state = self.lock();
        state
            .cursors
            .iter()
            .zip(issued)
            .all(|(c, &to)| c.durable >= to)
    }
}

/// Issues references for what `backlog` counts unacknowledged below its points, then moves
/// each cursor to its point and catches up from there. One read at a time, each durable
/// before the next: a seek over a large backlog holds one read's references in memory,
/// not the whole backlog's, and lets publishes' offers in between.
async fn restart_at(link: &Arc<Link>, queue: &Queue, backlog: &Backlog) -> Result<()> {
    let shape = link.topic.shape();
    for partition in &shape.partitions {
        let p = partition.index;
        let start = partition.start_offset();
        link.hold_partition(p, backlog, start);
        for &(run_start, run_end) in backlog.below(p) {
            let mut at = run_start.max(start);
            while at < run_end {
                let Some(next) = link.re_add_step(queue, partition, at, run_end)? else {
                    break;
                };
                let issued_to = next.min(run_end);
                until(queue, link, || link.durable_up_to_in(p, issued_to)).await?;
                at = next;
            }
        }
    }
    link.resume(backlog);
    loop {
        let caught_up = link.catch_up()?;
        let issued = link.issued();
        until(queue, link, || link.durable_up_to(&issued)).await?;
        if caught_up {
            return Ok(());
        }
    }
}

impl Link {
    /// Whether the references of `partition` issued below `to` are durable.
    fn durable_up_to_in(&self, partition: u32, to: u64) -> bool {
        self.lock()
            .cursors
            .get(partition as usize)
            .is_some_and(|c| c.durable >= to)
    }
}

impl Broker {
    /// Seeks subscription `subscription` to `to`: afterwards its pending messages are
    /// exactly those the target counts as unacknowledged (and its filter takes), in topic
    /// order per partition, each with no deliveries yet; every lease held before is void.
    /// Durable when it returns; see `engine/subscriptions/seek.rs`. A queue that is not a
    /// subscription (also one attached to topics) is [`BrokerError::NotASubscription`]; a
    /// snapshot of another topic is [`BrokerError::SnapshotOfAnotherTopic`].
    pub async fn seek_subscription(&self, subscription: &str, to: SeekTarget) -> Result<()> {
        let queue = self.queue(subscription)?;
        let link = subscription_link(&queue)?;
        let _seeking = link.seek_lock().await;
        let intent = match to {
            SeekTarget::Time(at_ms) => SeekIntent {
                backlog: self.backlog_at_time(&link, at_ms)?,
                // Only a time still ahead is kept: everything published from now on is
                // published after a time already past, and a kept past time would drop
                // records a producer stamps with an older time (a Kafka CreateTime).
                ack_before_ms: Some(at_ms).filter(|&at| at > self.now_ms()),
            },
            SeekTarget::Snapshot(name) => {
                let snapshot = self.snapshot(&name)?;
                if snapshot.info.topic != link.topic.name {
                    return Err(BrokerError::SnapshotOfAnotherTopic {
                        snapshot: snapshot.info.name.clone(),
                        topic: snapshot.info.topic.clone(),
                        subscription: queue.name.clone(),
                        subscription_topic: link.topic.name.clone(),
                    });
                }
                SeekIntent {
                    backlog: snapshot.backlog.clone(),
                    ack_before_ms: None,
                }
            }
        };
        {
            let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
            self.check_still_there(&queue)?;
            meta.put(format!("{SEEK_PREFIX}{}", queue.name), intent.encode())?;
        }
        self.carry_out_seek(&queue, &link, &intent).await
    }

    /// Per partition, the first offset published at or after `at_ms` (the end for a time
    /// after the last record).
    fn backlog_at_time(&self, link: &Link, at_ms: i64) -> Result<Backlog> {
        let from = link
            .topic
            .shape()
            .partitions
            .iter()
            .map(|p| {
                Ok(p.log
                    .offset_for_timestamp(at_ms)?
                    .unwrap_or_else(|| p.log.end_offset()))
            })
            .collect::<Result<Vec<u64>>>()?;
        Ok(Backlog::from_offsets(&from))
    }

    /// Refuses to write a subscription's keys once it is deleted: call with the metadata
    /// lock held, which deletion commits under, so its keys stay gone.
    fn check_still_there(&self, queue: &Arc<Queue>) -> Result<()> {
        if self.queue_list().iter().any(|q| Arc::ptr_eq(q, queue)) {
            return Ok(());
        }
        Err(BrokerError::QueueNotFound {
            queue: queue.name.to_string(),
        })
    }

    /// Everything after the intent is stored: see the module docs for the order.
    async fn carry_out_seek(
        &self,
        queue: &Arc<Queue>,
        link: &Arc<Link>,
        intent: &SeekIntent,
    ) -> Result<()> {
        link.set_ack_before(intent.ack_before_ms.unwrap_or(i64::MIN));
        link.pause();
        until(queue, link, || link.hold_for(&intent.backlog)).await?;
        self.purge(queue).await?;
        restart_at(link, queue, &intent.backlog).await?;
        let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        self.check_still_there(queue)?;
        let mut batch = ferry_storage::MetaBatch::new();
        batch.put(
            format!("{CURSOR_PREFIX}{}", link.key),
            encode_cursors(&link.durable_cursors()),
        );
        let ack_before_key = format!("{ACK_BEFORE_PREFIX}{}", link.key);
        match intent.ack_before_ms {
            Some(at) => batch.put(ack_before_key, at.to_le_bytes().to_vec()),
            None => batch.delete(ack_before_key),
        };
        batch.delete(format!("{SEEK_PREFIX}{}", link.key));
        meta.commit(batch)?;
        Ok(())
    }
}

/// Waits until `done`: for `link`'s reference appends, which complete on the log's thread
/// and wake the link's `appends_done` (looked at again on each wake). A failed append
/// poisons the queue and never completes its span, so that ends the wait too.
async fn until(queue: &Queue, link: &Link, mut done: impl FnMut() -> bool) -> Result<()> {
    loop {
        // Registered before looking, so a completion between the look and the wait is not
        // missed.
        let completed = link.appends_done.notified();
        tokio::pin!(completed);
        completed.as_mut().enable();
        if done() {
            return Ok(());
        }
        queue.check()?;
        completed.await;
    }
}

/// The link of subscription `queue`; a plain queue, attached to topics or not, has none.
pub(in crate::engine) fn subscription_link(queue: &Queue) -> Result<Arc<Link>> {
    queue
        .source
        .get()
        .filter(|link| matches!(link.role, LinkRole::Subscription(_)))
        .cloned()
        .ok_or_else(|| BrokerError::NotASubscription {
            queue: queue.name.clone(),
        })
}

/// Carries out again every seek a crash interrupted (its intent is still stored): on open,
/// after recovery and catch-up.
pub(in crate::engine) async fn finish_interrupted_seeks(broker: &Broker) -> Result<()> {
    let intents = {
        let meta = broker.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        meta.scan_prefix(SEEK_PREFIX)
    };
    for (key, value) in intents {
        let raw = &key[SEEK_PREFIX.len()..];
        let bad = |problem: String| BrokerError::MalformedSpec {
            queue: raw.to_owned(),
            problem: format!("its interrupted seek {problem}"),
        };
        let name = Name::new(raw).map_err(|e| bad(e.to_string()))?;
        let intent = SeekIntent::decode(&value).map_err(bad)?;
        let found = broker
            .queue_list()
            .into_iter()
            .find(|q| q.name == name)
            .and_then(|q| subscription_link(&q).ok().map(|link| (q, link)));
        let Some((queue, link)) = found else {
            // Not a subscription: nothing to seek (deletion removes the intent with the
            // subscription's other keys, so this is not expected).
            let mut meta = broker.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
            meta.delete(key)?;
            continue;
        };
        if queue.is_poisoned() {
            // It serves nothing until a reopen recovers it; that open finishes the seek.
            continue;
        }
        let _seeking = link.seek_lock().await;
        broker.carry_out_seek(&queue, &link, &intent).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use ferry_storage::ManualClock;

    use crate::engine::tests::T0;
    use crate::engine::topic_tests::{open, spec};
    use crate::engine::*;
    use crate::subscription::SubscriptionSpec;

    #[tokio::test]
    async fn a_paused_link_takes_nothing_in_also_from_a_partition_added_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let broker = open(dir.path(), &clock).await;
        broker.create_topic("t", spec(1)).await.unwrap();
        let mut sub = SubscriptionSpec::new(Name::new("t").unwrap());
        sub.delivery.durability = crate::spec::Durability::None;
        broker.create_subscription("s", sub).await.unwrap();
        let queue = broker.queue("s").unwrap();
        let link = super::subscription_link(&queue).unwrap();
        link.pause();
        broker.add_partitions("t", 2).await.unwrap();
        for partition in 0..2 {
            broker
                .publish_to_partition("t", partition, vec![OutgoingMessage::new("x")])
                .await
                .unwrap();
        }
        link.catch_up().unwrap();
        assert!(
            link.is_idle(),
            "issued while paused: a seek's purge could miss it"
        );
    }

    #[tokio::test]
    async fn a_snapshot_waiting_out_a_seek_is_not_taken_of_a_topic_deleted_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let broker = open(dir.path(), &clock).await;
        broker.create_topic("t", spec(1)).await.unwrap();
        let mut sub = SubscriptionSpec::new(Name::new("t").unwrap());
        sub.delivery.durability = crate::spec::Durability::None;
        broker.create_subscription("s", sub).await.unwrap();
        let link = super::subscription_link(&broker.queue("s").unwrap()).unwrap();
        // As a seek in progress holds it.
        let seeking = link.seek_lock().await;
        let snapshot = {
            let broker = broker.clone();
            tokio::spawn(async move { broker.create_snapshot("snap", "s").await })
        };
        tokio::task::yield_now().await;
        broker.delete_queue("s").await.unwrap();
        broker.delete_topic("t").await.unwrap();
        drop(seeking);
        let refused = snapshot.await.unwrap().unwrap_err();
        assert_eq!(refused.kind(), crate::ErrorKind::NotFound, "{refused}");
        // A topic of the same name later has other records at those offsets.
        broker.create_topic("t", spec(1)).await.unwrap();
        assert!(broker.list_snapshots().is_empty());
    }

    #[tokio::test]
    async fn a_seek_waiting_for_another_writes_nothing_once_its_subscription_is_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let broker = open(dir.path(), &clock).await;
        broker.create_topic("t", spec(1)).await.unwrap();
        let mut sub = SubscriptionSpec::new(Name::new("t").unwrap());
        sub.delivery.durability = crate::spec::Durability::None;
        broker.create_subscription("s", sub).await.unwrap();
        let link = super::subscription_link(&broker.queue("s").unwrap()).unwrap();
        let seeking = link.seek_lock().await;
        let seek = {
            let broker = broker.clone();
            tokio::spawn(async move {
                broker
                    .seek_subscription("s", super::SeekTarget::Time(0))
                    .await
            })
        };
        tokio::task::yield_now().await;
        broker.delete_queue("s").await.unwrap();
        drop(seeking);
        let refused = seek.await.unwrap().unwrap_err();
        assert_eq!(refused.kind(), crate::ErrorKind::NotFound, "{refused}");
        let meta = broker.inner.meta.lock().unwrap();
        for prefix in [
            super::SEEK_PREFIX,
            super::ACK_BEFORE_PREFIX,
            super::CURSOR_PREFIX,
        ] {
            assert!(meta.scan_prefix(prefix).is_empty(), "{prefix}");
        }
    }
}
