//! One open topic: its partitions' logs, the order keyless messages rotate in, and per
//! partition the idempotent producers' table. The API over it is in `topics.rs`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};

use ferry_storage::batch::HEADER_LEN;
use ferry_storage::{
    Appended, Log, LogConfig, LogStats, NewRecord, Record, RetentionPolicy, RetentionReport,
    StorageError,
};
use tokio::sync::oneshot;

use super::queue::scan_from;
use super::subscriptions::{CallShare, Link};
use super::{BrokerConfig, max_record_bytes};
use crate::error::{BrokerError, Result};
use crate::message::{Message, millis};
use crate::name::Name;
use crate::read_limit::{Budget, ReadLimit};
use crate::record::producer_stamp;
use crate::topic::producer::ProducerTable;
use crate::topic::{PartitionInfo, Position, TopicRecord, TopicSpec};

/// Most bytes one read of a partition asks storage for.
const READ_BYTES: usize = 1 << 20;
/// What a read budgets per wanted record before it knows the sizes.
const SMALL_RECORD_BYTES: usize = 1024;

pub(crate) struct Topic {
    pub name: Name,
    /// The subscriptions fed by this topic's publishes (see `engine/subscriptions.rs`).
    pub fanout: Arc<Fanout>,
    /// Shared so a publish takes a snapshot for the price of one reference count.
    shape: RwLock<Arc<Shape>>,
    /// The next partition a keyless message (or publish call) goes to, modulo the
    /// partition count. In memory: after a reopen keyless placement starts again at 0,
    /// which changes nothing a reader can rely on.
    pub keyless_next: AtomicU64,
}

/// A topic's spec and its open partitions, replaced whole by `add_partitions`.
#[derive(Clone)]
pub(crate) struct Shape {
    pub spec: TopicSpec,
    pub partitions: Vec<Arc<Partition>>,
}

/// Answers a partition's append of a publish once every subscription's references to its
/// batch are durable: one count for the batch itself, one per link that staged references
/// to it, released when the append carrying them completes.
pub(crate) struct Countdown {
    left: std::sync::atomic::AtomicUsize,
    answer: std::sync::Mutex<Option<oneshot::Sender<ferry_storage::Result<Appended>>>>,
    appended: Appended,
}

impl Countdown {
    fn new(
        tx: oneshot::Sender<ferry_storage::Result<Appended>>,
        appended: Appended,
    ) -> Arc<Countdown> {
        Arc::new(Countdown {
            left: std::sync::atomic::AtomicUsize::new(1),
            answer: std::sync::Mutex::new(Some(tx)),
            appended,
        })
    }

    /// One more append to wait for.
    pub fn hold(&self) {
        self.left.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// One append done (its failure poisons its subscription, not the publish).
    pub fn release(&self) {
        if self.left.fetch_sub(1, std::sync::atomic::Ordering::AcqRel) == 1 {
            let answer = self.answer.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(tx) = answer {
                let _ = tx.send(Ok(self.appended));
            }
        }
    }
}

/// A topic's subscriptions, shared with its partitions, which offer them every durable
/// batch. Weak: a subscription's queue owns its link, and deleting it ends the feed.
#[derive(Default)]
pub(crate) struct Fanout {
    links: RwLock<Vec<Weak<Link>>>,
}

impl Fanout {
    pub fn add(&self, link: &Arc<Link>) {
        let mut links = self.links.write().unwrap_or_else(|e| e.into_inner());
        links.retain(|l| l.strong_count() > 0);
        links.push(Arc::downgrade(link));
    }

    /// Ends the feed to a deleted subscription at once. Its queue, and with it the link, can
    /// outlive the deletion for as long as something still holds them (a receive waiting
    /// on it, a housekeeping pass); until then the topic would go on feeding it and count
    /// it among its subscriptions, refusing its own deletion.
    pub fn remove(&self, link: &Arc<Link>) {
        let mut links = self.links.write().unwrap_or_else(|e| e.into_inner());
        links.retain(|l| l.strong_count() > 0 && !std::ptr::eq(l.as_ptr(), Arc::as_ptr(link)));
    }

    pub fn links(&self) -> Vec<Arc<Link>> {
        let links = self.links.read().unwrap_or_else(|e| e.into_inner());
        links.iter().filter_map(Weak::upgrade).collect()
    }

    fn is_empty(&self) -> bool {
        let links = self.links.read().unwrap_or_else(|e| e.into_inner());
        links.iter().all(|l| l.strong_count() == 0)
    }
}

pub(crate) struct Partition {
    pub index: u32,
    pub log: Log,
    fanout: Arc<Fanout>,
    /// The largest batch one publish may append here (see [`batch_limits`]).
    pub max_batch_bytes: usize,
    /// Held by an idempotent publish from its sequence check until its append is durable,
    /// so two batches of one producer cannot both pass the check. `None` until the first
    /// idempotent publish to the partition rebuilds it (see [`Partition::load_producers`]).
    pub producers: tokio::sync::Mutex<Option<ProducerTable>>,
    /// The topic is compacted by key: every record needs a key (see `topic_compaction.rs`).
    /// Atomic: `update_topic` turns compaction on or off on a live topic.
    pub compacted: AtomicBool,
    /// The offset records were deleted before by `delete_records` (0: never), which may
    /// lie inside a segment: reads start at it, and retention deletes the whole segments
    /// below it. Committed to the metadata before it is set here (see
    /// `engine/delete_records.rs`).
    pub deleted_before: AtomicU64,
    /// When compaction last looked at this partition (ms), to throttle it.
    pub compaction_checked_ms: AtomicI64,
}

/// The largest batch and the segment size of a partition's log. Storage needs a segment
/// to hold its largest batch; unlike a queue's, a partition's batch limit shrinks with a
/// small configured segment (down to two of the largest records), so small segments — and
/// so retention by size at a fine grain — are possible. A publish over the limit is refused
/// with [`BrokerError::BatchTooLarge`] before anything is written.
pub(super) fn batch_limits(broker: &BrokerConfig) -> (usize, u64) {
    let max_record = max_record_bytes(&broker.limits);
    let segment = broker.message_segment_bytes.max(4096);
    let max_batch = usize::try_from(segment)
        .unwrap_or(usize::MAX)
        .min(16 << 20)
        .max(2 * max_record);
    (max_batch, segment.max(max_batch as u64))
}

impl Topic {
    /// Feeds `link` (a subscription) from now on.
    pub fn subscribe(&self, link: Arc<Link>) {
        self.fanout.add(&link);
    }

    pub fn dir(root: &Path, name: &Name) -> PathBuf {
        root.join("topics").join(name.as_str())
    }

    fn partition_dir(root: &Path, name: &Name, partition: u32) -> PathBuf {
        Self::dir(root, name).join(partition.to_string())
    }

    /// Opens (creating if needed) the logs of `spec.partitions` partitions.
    pub fn open(
        root: &Path,
        name: Name,
        spec: TopicSpec,
        broker: &BrokerConfig,
        log_stats: &Arc<LogStats>,
    ) -> Result<Topic> {
        let fanout = Arc::new(Fanout::default());
        let partitions = (0..spec.partitions)
            .map(|p| {
                Self::open_partition(root, &name, &spec, p, broker, log_stats, &fanout)
                    .map(Arc::new)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Topic {
            fanout,
            name,
            shape: RwLock::new(Arc::new(Shape { spec, partitions })),
            keyless_next: AtomicU64::new(0),
        })
    }

    /// Opens (creating if needed) the log of partition `index`.
    pub fn open_partition(
        root: &Path,
        name: &Name,
        spec: &TopicSpec,
        index: u32,
        broker: &BrokerConfig,
        log_stats: &Arc<LogStats>,
        fanout: &Arc<Fanout>,
    ) -> Result<Partition> {
        let (max_batch_bytes, segment_bytes) = batch_limits(broker);
        let config = LogConfig {
            durability: spec.durability,
            max_record_bytes: max_record_bytes(&broker.limits),
            max_batch_bytes,
            segment_bytes,
            // A topic may have a thousand partitions: keep zero-filled room ahead small.
            preallocate_bytes: 1 << 20,
            ..LogConfig::default()
        };
        let dir = Self::partition_dir(root, name, index);
        let log = Log::open_with_stats(dir, config, broker.clock.clone(), log_stats.clone())?;
        Ok(Partition {
            index,
            log,
            fanout: Arc::clone(fanout),
            max_batch_bytes,
            producers: tokio::sync::Mutex::new(None),
            compacted: AtomicBool::new(spec.compaction.is_some()),
            deleted_before: AtomicU64::new(0),
            compaction_checked_ms: AtomicI64::new(i64::MIN),
        })
    }

    /// Removes partitions `from..to` left by an `add_partitions` that a crash interrupted
    /// before its metadata was written: not in the spec, so not partitions; their records
    /// must not leak into the new ones.
    pub fn clear_stale_partitions(root: &Path, name: &Name, from: u32, to: u32) -> Result<()> {
        for index in from..to {
            let dir = Self::partition_dir(root, name, index);
            if dir.exists() {
                std::fs::remove_dir_all(&dir)
                    .map_err(|e| StorageError::io("remove stale partition", &dir, e))?;
            }
        }
        Ok(())
    }

    pub fn shape(&self) -> Arc<Shape> {
        Arc::clone(&self.shape.read().unwrap_or_else(|e| e.into_inner()))
    }

    pub fn set_shape(&self, shape: Shape) {
        *self.shape.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(shape);
    }

    pub fn partition(&self, partition: u32) -> Result<Arc<Partition>> {
        let shape = self.shape.read().unwrap_or_else(|e| e.into_inner());
        shape
            .partitions
            .get(partition as usize)
            .cloned()
            .ok_or_else(|| BrokerError::PartitionNotFound {
                topic: self.name.clone(),
                partition,
                partitions: shape.spec.partitions,
            })
    }
}

impl Partition {
    /// Refuses a batch storage would refuse, or a keyless record on a compacted topic,
    /// before anything of the publish is written.
    pub fn check_batch(&self, topic: &Name, records: &[NewRecord]) -> Result<()> {
        if self.compacted.load(Ordering::Acquire) && records.iter().any(|r| r.key.is_none()) {
            return Err(BrokerError::KeyRequired {
                topic: topic.clone(),
                partition: self.index,
            });
        }
        let size = HEADER_LEN + records.iter().map(NewRecord::encoded_len).sum::<usize>();
        if size > self.max_batch_bytes {
            return Err(BrokerError::BatchTooLarge {
                topic: topic.clone(),
                partition: self.index,
                size,
                max: self.max_batch_bytes,
            });
        }
        Ok(())
    }

    /// Starts one append, `call`'s share of a publish call (see
    /// `subscriptions/publish_call.rs`); the receiver resolves once it is durable under the
    /// topic's durability, and so are the subscriptions' references to it.
    pub fn append(
        &self,
        records: Vec<NewRecord>,
        call: CallShare,
    ) -> oneshot::Receiver<ferry_storage::Result<Appended>> {
        let (tx, rx) = oneshot::channel();
        // Subscriptions get the batch in the completion, which runs in offset order.
        let offered =
            (!self.fanout.is_empty()).then(|| (records.clone(), Arc::clone(&self.fanout)));
        let index = self.index;
        self.log.append_then(
            records,
            Box::new(move |result| {
                if let (Ok(appended), Some((records, fanout))) = (&result, offered) {
                    let appended = *appended;
                    let messages: Vec<Message> = records
                        .into_iter()
                        .enumerate()
                        .filter_map(|(i, r)| {
                            let record = Record {
                                offset: appended.base_offset + i as u64,
                                timestamp: r.timestamp.unwrap_or(0),
                                key: r.key,
                                headers: r.headers,
                                value: r.value,
                            };
                            Message::from_topic_record(record).ok().map(|(m, _)| m)
                        })
                        .collect();
                    // The publish returns once the subscriptions' references are durable
                    // too, so a receive right after it finds the message.
                    let countdown = Countdown::new(tx, appended);
                    for link in fanout.links() {
                        link.offer(index, appended.base_offset, &messages, &countdown, &call);
                    }
                    countdown.release();
                    // The call's last append flushes what its links staged.
                    drop(call);
                    return;
                }
                let _ = tx.send(result);
                drop(call);
            }),
        );
        rx
    }

    /// The lowest offset readers may see: the log's start, or past it where records were
    /// deleted before an offset inside a segment.
    pub fn start_offset(&self) -> u64 {
        self.log
            .start_offset()
            .max(self.deleted_before.load(Ordering::Acquire))
    }

    /// The offset `from` stands for, checked against what the partition holds.
    fn resolve(&self, topic: &Name, from: Position) -> Result<u64> {
        let (start, end) = (self.start_offset(), self.log.end_offset());
        Ok(match from {
            Position::Earliest => start,
            Position::Latest => end,
            Position::Offset(offset) if (start..=end).contains(&offset) => offset,
            Position::Offset(offset) => {
                return Err(BrokerError::OffsetOutOfRange {
                    topic: topic.clone(),
                    partition: self.index,
                    offset,
                    start,
                    end,
                });
            }
            Position::Timestamp(ms) => self
                .log
                .offset_for_timestamp(ms)?
                .map_or(end, |offset| offset.max(start)),
        })
    }

    /// Up to `max` records from `from`, in offset order.
    pub fn read(&self, topic: &Name, from: Position, max: usize) -> Result<Vec<TopicRecord>> {
        let mut budget = Budget::new(ReadLimit::messages(max));
        self.read_within(topic, from, max, &mut budget)
    }

    /// Up to `max` records from `from`, in offset order, as far as `budget` (which may be
    /// shared with reads of other partitions) still takes them; what is returned is taken
    /// from it.
    pub(crate) fn read_within(
        &self,
        topic: &Name,
        from: Position,
        max: usize,
        budget: &mut Budget,
    ) -> Result<Vec<TopicRecord>> {
        let mut next = self.resolve(topic, from)?;
        let mut out = Vec::new();
        let max = max.min(budget.messages_left());
        let read_bytes = max
            .saturating_mul(SMALL_RECORD_BYTES)
            .clamp(4096, READ_BYTES);
        'reads: while out.len() < max && !budget.is_spent() && next < self.log.end_offset() {
            let records = match self.log.read(next, read_bytes) {
                Ok(records) => records,
                // Retention removed the segment between the check and the read.
                Err(StorageError::OffsetOutOfRange {
                    requested,
                    start,
                    end,
                }) => {
                    return Err(BrokerError::OffsetOutOfRange {
                        topic: topic.clone(),
                        partition: self.index,
                        offset: requested,
                        start,
                        end,
                    });
                }
                Err(e) => return Err(e.into()),
            };
            let Some(last) = records.last() else {
                break;
            };
            next = last.offset + 1;
            for record in records.into_iter().take(max - out.len()) {
                let offset = record.offset;
                let (message, producer) = Message::from_topic_record(record)?;
                if !budget.fits(&message) {
                    break 'reads;
                }
                budget.take(&message);
                out.push(TopicRecord {
                    partition: self.index,
                    offset,
                    message,
                    producer,
                });
            }
        }
        Ok(out)
    }

    pub fn info(&self) -> Result<PartitionInfo> {
        let start_offset = self.start_offset();
        let end_offset = self.log.end_offset();
        let oldest_timestamp_ms = if start_offset < end_offset {
            // The first record kept: compaction may have removed the one at the start.
            self.log
                .read(start_offset, 1)?
                .into_iter()
                .next()
                .map(|r| r.timestamp)
        } else {
            None
        };
        Ok(PartitionInfo {
            partition: self.index,
            start_offset,
            end_offset,
            bytes: self.log.size_bytes(),
            oldest_timestamp_ms,
        })
    }

    /// Deletes whole segments past the topic's retention; returns what was deleted.
    /// Applies the topic's retention, keeping every segment from offset `keep_from` on (what
    /// a subscription still needs).
    pub fn retain(&self, spec: &TopicSpec, keep_from: Option<u64>) -> Result<RetentionReport> {
        Ok(self
            .log
            .apply_retention(&self.retention_policy(spec, keep_from))?)
    }

    /// Where the partition would start if the topic's retention ignored every hold.
    pub fn start_after_retention(&self, spec: &TopicSpec) -> u64 {
        self.log
            .start_offset_after_retention(&self.retention_policy(spec, None))
    }

    /// The producers' table, rebuilt on first use from the records of the last
    /// `window` (see `topic/producer.rs`) and from then on kept up to date by idempotent
    /// publishes, which hold the lock.
    ///
    /// On first use rather than at open: a broker with many partitions would otherwise
    /// read a whole window (seven days by default) of every partition at every open,
    /// idempotent producers or not. The result is the same — the records read are the
    /// same, and nothing with a stamp is written without the table.
    pub fn load_producers<'a>(
        &self,
        table: &'a mut Option<ProducerTable>,
        spec: &TopicSpec,
        now_ms: i64,
    ) -> Result<&'a mut ProducerTable> {
        if table.is_none() {
            let cutoff = now_ms.saturating_sub(millis(spec.producer_state_window));
            let from = self
                .log
                .offset_for_timestamp(cutoff)?
                .unwrap_or(self.log.end_offset());
            let mut rebuilt = ProducerTable::default();
            scan_from(&self.log, from, |record| {
                if let Some(stamp) = producer_stamp(&record)? {
                    rebuilt.observe(
                        &stamp.producer_id,
                        stamp.sequence,
                        record.offset,
                        record.timestamp,
                    );
                }
                Ok(())
            })?;
            rebuilt.forget_silent(cutoff);
            *table = Some(rebuilt);
        }
        Ok(table.as_mut().expect("loaded above"))
    }
}

impl Partition {
    /// The topic's retention for this partition: its bounds, and the whole segments below
    /// where records were deleted.
    fn retention_policy(&self, spec: &TopicSpec, keep_from: Option<u64>) -> RetentionPolicy {
        let deleted_before = self.deleted_before.load(Ordering::Acquire);
        RetentionPolicy {
            max_age: spec.retention.max_age,
            max_bytes: spec.retention.max_bytes,
            low_watermark: (deleted_before > 0).then_some(deleted_before),
            keep_from,
        }
    }
}
