//! The broker's topic API: create, delete, list, describe and grow topics; publish by key,
//! to a partition, or as an idempotent producer; read a partition by position; retention.
//!
//! **Layout.** Each topic's spec is in the metadata store under `topic/<name>`
//! (`spec_codec/topic.rs`); partition `p` is a storage log in `topics/<name>/<p>/`,
//! whose record offsets are the partition's offsets. Topics and queues are separate
//! namespaces (see [`crate::topic`]).
//!
//! **Publish.** Messages are validated with the broker's [`Limits`](crate::Limits) exactly
//! as a queue publish validates them, and stored with the same record encoding. A publish
//! makes one storage append per partition it touches, and returns once every one is
//! durable under the topic's durability. It is atomic per partition — all of a call's
//! messages for one partition are stored together or not at all — but not across
//! partitions: when one partition's append fails, others may have been stored. The
//! `begin_publish_*` calls split a publish into placing its appends (in call order, before
//! they return) and awaiting them (`engine/pending_publish.rs`), so that a caller can place
//! the next publish while the one before waits for its fsync.
//!
//! **Idempotent producers.** [`Broker::publish_idempotent`] numbers a producer's messages
//! per partition; the partition writes each sequence once (see `topic/producer.rs`).
//! Batches to one partition are checked and appended one at a time, under that partition's
//! lock, so two concurrent batches of a producer cannot both pass the check. The lock is
//! per partition, not per producer: idempotent publishes to one partition queue behind
//! each other (plain publishes do not take it).
//!
//! **Retention** ([`Broker::maintain_now`], run by the timer task) deletes a partition's
//! oldest whole segments once they are past the topic's age bound, or while the partition
//! is over its byte bound. Once subscriptions exist, it will also keep what a
//! subscription's cursor has not passed yet. Records retention deletes may still be named
//! by a retried idempotent batch's answer: positions, not promises that the records remain.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use ferry_storage::{MetaStore, NewRecord, StorageError};

use super::pending_publish::PendingPublish;
use super::storage_stats::LogStatsByKind;
use super::subscriptions::PublishCall;
use super::topic::{Partition, Shape, Topic};
use super::{Broker, BrokerConfig, MaintenanceReport};
use crate::error::{BrokerError, Result};
use crate::message::{Message, OutgoingMessage, millis};
use crate::name::Name;
use crate::read_limit::{Budget, ReadLimit};
use crate::record::ProducerStamp;
use crate::spec_codec;
use crate::topic::partitioner::partition_for_key;
use crate::topic::producer::{SequenceCheck, SequenceProblem, check_producer_id};
use crate::topic::{KeylessPlacement, Position, TopicInfo, TopicPosition, TopicRecord, TopicSpec};

pub(super) const TOPIC_PREFIX: &str = "topic/";

/// Opens every topic in the metadata store.
pub(super) fn open_topics(
    dir: &Path,
    meta: &MetaStore,
    config: &BrokerConfig,
    log_stats: &LogStatsByKind,
) -> Result<BTreeMap<Name, Arc<Topic>>> {
    let mut topics = BTreeMap::new();
    for (key, value) in meta.scan_prefix(TOPIC_PREFIX) {
        let raw = &key[TOPIC_PREFIX.len()..];
        let bad = |problem: String| BrokerError::MalformedTopicSpec {
            topic: raw.to_owned(),
            problem,
        };
        let name = Name::new(raw).map_err(|e| bad(e.to_string()))?;
        let spec = spec_codec::topic::decode(&value).map_err(bad)?;
        let topic = Topic::open(dir, name.clone(), spec, config, &log_stats.topic_partitions)?;
        super::delete_records::load_deleted_before(meta, &topic)?;
        topics.insert(name, Arc::new(topic));
    }
    Ok(topics)
}

impl Broker {
    /// The topic named `name`; a name outside the naming rules is refused as such, as in
    /// [`Broker::queue`].
    pub(super) fn topic(&self, name: &str) -> Result<Arc<Topic>> {
        let name = Name::new(name)?;
        let topics = self.inner.topics.read().unwrap_or_else(|e| e.into_inner());
        topics
            .get(&name)
            .cloned()
            .ok_or_else(|| BrokerError::TopicNotFound {
                topic: name.to_string(),
            })
    }

    pub(super) fn topic_list(&self) -> Vec<Arc<Topic>> {
        let topics = self.inner.topics.read().unwrap_or_else(|e| e.into_inner());
        topics.values().cloned().collect()
    }

    // ---- Admin ----

    /// Creates a topic after checking its name and spec; on any error nothing changes.
    pub async fn create_topic(&self, name: &str, spec: TopicSpec) -> Result<()> {
        let name = Name::new(name)?;
        spec.validate()?;
        let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        if self
            .inner
            .topics
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(&name)
        {
            return Err(BrokerError::TopicExists { topic: name });
        }
        // Left behind by a create or delete interrupted by a crash: not in the metadata,
        // so not a topic; its logs must not leak into the new one.
        let dir = Topic::dir(&self.inner.dir, &name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| StorageError::io("remove stale topic", &dir, e))?;
        }
        let topic = Topic::open(
            &self.inner.dir,
            name.clone(),
            spec.clone(),
            &self.inner.config,
            &self.inner.log_stats.topic_partitions,
        )?;
        meta.put(
            format!("{TOPIC_PREFIX}{name}"),
            spec_codec::topic::encode(&spec),
        )?;
        self.inner
            .topics
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name, Arc::new(topic));
        Ok(())
    }

    /// Deletes a topic and all its records. Refused while a subscription is on it, and
    /// while a queue dead-letters into it ([`BrokerError::TopicIsDeadLetterTarget`]: as a
    /// queue another queue dead-letters into cannot be deleted, so a dead letter never
    /// finds its target gone).
    pub async fn delete_topic(&self, name: &str) -> Result<()> {
        let topic = self.topic(name)?;
        self.refuse_if_dead_letter_target(&topic)?;
        if let Some(link) = topic.fanout.links().iter().find(|l| !l.is_detached()) {
            return Err(has_subscriptions(&topic, link));
        }
        // Detached links may still reference its records: copied out first (see
        // `engine/links.rs`).
        self.copy_out_references(&topic).await?;
        let aside = self.forget_topic(topic)?;
        super::deleted_dir::remove("remove topic", aside).await
    }

    /// Deletes a topic's metadata and lets go of it; its files' directory, set aside.
    fn forget_topic(&self, topic: Arc<Topic>) -> Result<Option<std::path::PathBuf>> {
        let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        // Attached meanwhile, or named as a dead-letter target meanwhile (both take the
        // metadata lock held here).
        if let Some(link) = topic.fanout.links().first() {
            return Err(has_subscriptions(&topic, link));
        }
        self.refuse_if_dead_letter_target(&topic)?;
        // Metadata first: a crash before the files are gone leaves a directory that is not
        // a topic, which create_topic clears.
        // The topic's consumer groups and their committed offsets go with it.
        let mut batch = ferry_storage::MetaBatch::new();
        batch.delete(format!("{TOPIC_PREFIX}{}", topic.name));
        for (key, _) in meta.scan_prefix(&format!("group/{}/", topic.name)) {
            batch.delete(key);
        }
        // So are the offsets its partitions' records were deleted before.
        for (key, _) in meta.scan_prefix(&super::delete_records::deleted_before_prefix(&topic.name))
        {
            batch.delete(key);
        }
        // And its snapshots: a topic created later under its name has other records at
        // their offsets.
        let snapshots = self.snapshots_of(&topic.name);
        for name in &snapshots {
            batch.delete(format!("{}{name}", super::snapshots::SNAPSHOT_PREFIX));
        }
        meta.commit(batch)?;
        self.forget_snapshots(&snapshots);
        self.inner
            .groups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(t, _), _| t != &topic.name);
        self.inner
            .topics
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&topic.name);
        let dir = Topic::dir(&self.inner.dir, &topic.name);
        drop(topic);
        super::deleted_dir::set_aside(&dir)
    }

    fn refuse_if_dead_letter_target(&self, topic: &Topic) -> Result<()> {
        match self.dead_letter_origin_of_topic(&topic.name) {
            Some(origin) => Err(BrokerError::TopicIsDeadLetterTarget {
                topic: topic.name.clone(),
                origin,
            }),
            None => Ok(()),
        }
    }

    pub fn list_topics(&self) -> Vec<Name> {
        let topics = self.inner.topics.read().unwrap_or_else(|e| e.into_inner());
        topics.keys().cloned().collect()
    }

    /// The topic's spec and, per partition, its offsets, size and oldest record's time.
    pub fn describe_topic(&self, name: &str) -> Result<TopicInfo> {
        let topic = self.topic(name)?;
        let shape = topic.shape();
        Ok(TopicInfo {
            name: topic.name.clone(),
            partitions: shape
                .partitions
                .iter()
                .map(|p| p.info())
                .collect::<Result<_>>()?,
            spec: shape.spec.clone(),
        })
    }

    /// The largest batch and the segment size of every topic's partitions.
    pub fn topic_storage_limits(&self) -> crate::topic::TopicStorageLimits {
        let (max_batch_bytes, segment_bytes) = super::topic::batch_limits(&self.inner.config);
        crate::topic::TopicStorageLimits {
            max_batch_bytes,
            segment_bytes,
        }
    }

    /// Grows the topic to `new_count` partitions; the count can only increase.
    ///
    /// As in Kafka, this changes the key → partition mapping: a key is placed by its hash
    /// modulo the partition count, so after the change most keys' new messages go to
    /// another partition than their earlier ones, and per-key order holds only within each
    /// partition. Grow a keyed topic before its keys matter, or over-provision partitions.
    pub async fn add_partitions(&self, name: &str, new_count: u32) -> Result<()> {
        let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        let topic = self.topic(name)?;
        let Shape {
            mut spec,
            mut partitions,
        } = Shape::clone(&topic.shape());
        if new_count <= spec.partitions {
            return Err(BrokerError::PartitionsCanOnlyGrow {
                topic: topic.name.clone(),
                current: spec.partitions,
                requested: new_count,
            });
        }
        let current = spec.partitions;
        spec.partitions = new_count;
        spec.validate()?;
        let root = &self.inner.dir;
        Topic::clear_stale_partitions(root, &topic.name, current, new_count)?;
        for index in current..new_count {
            let partition = Topic::open_partition(
                root,
                &topic.name,
                &spec,
                index,
                &self.inner.config,
                &self.inner.log_stats.topic_partitions,
                &topic.fanout,
            )?;
            partitions.push(Arc::new(partition));
        }
        // Metadata last: a crash before it leaves directories past the spec's count, which
        // the next add_partitions clears.
        meta.put(
            format!("{TOPIC_PREFIX}{}", topic.name),
            spec_codec::topic::encode(&spec),
        )?;
        topic.set_shape(Shape { spec, partitions });
        Ok(())
    }

    // ---- Publish ----

    /// Publishes `messages`, each to its key's partition (Kafka's default partitioner,
    /// [`partition_for_key`]) or, without a key, where the topic's [`KeylessPlacement`]
    /// puts it. Returns each message's position, in order, once all are durable. All are
    /// validated first; an invalid message fails the whole call and stores nothing.
    ///
    /// The topic stores each message's delay, TTL, priority and dedup id but does not act
    /// on them (see `topic/mod.rs`).
    pub async fn publish_to_topic(
        &self,
        topic: &str,
        messages: Vec<OutgoingMessage>,
    ) -> Result<Vec<TopicPosition>> {
        self.begin_publish_to_topic(topic, messages)?
            .durable()
            .await
    }

    /// [`Broker::publish_to_topic`] in two steps (see `engine/pending_publish.rs`): this
    /// validates the messages and places their appends, and the [`PendingPublish`] it
    /// returns gives their positions once durable. Appends begun by successive calls land
    /// in each partition in call order. An error here stores nothing.
    pub fn begin_publish_to_topic(
        &self,
        topic: &str,
        messages: Vec<OutgoingMessage>,
    ) -> Result<PendingPublish> {
        let topic = self.topic(topic)?;
        if messages.is_empty() {
            return Ok(PendingPublish::empty(self));
        }
        let shape = topic.shape();
        self.check_schema(shape.spec.schema_subject.as_deref(), &messages)?;
        let messages = self.resolve_for_topic(messages)?;
        self.place_messages(&topic, &shape, &messages, DiskAdmission::Checked)
    }

    /// Publishes a dead letter of a queue to `topic`, as [`Broker::publish_to_topic`]
    /// places a message — by key, or where the topic's keyless placement puts it — so the
    /// topic's subscriptions receive it like any publish, with its
    /// [`crate::DeadLetterInfo`] kept in the record. Returns once it is durable under the
    /// topic's durability.
    ///
    /// `letter` is a message the broker already stored once, not a producer's: it is not
    /// validated again, and not checked against the topic's schema — a dead letter is
    /// never refused for what it holds or for lack of room (a queue's dead-letter queue
    /// does not refuse one either), since a refused letter poisons its origin and fails
    /// the reopen that moves it again. So a keyless letter into a compacted topic, which
    /// takes keyed records only, is keyed by its message id (unique per letter, and the
    /// same for a repeat of it after a crash). A failure here (the topic gone, storage) is
    /// the caller's to report.
    pub(super) async fn publish_dead_letter(
        &self,
        topic: &Name,
        mut letter: Message,
    ) -> Result<()> {
        let topic = self.topic(topic.as_str())?;
        let shape = topic.shape();
        let compacted = shape.spec.compaction.is_some()
            || shape
                .partitions
                .iter()
                .any(|p| p.compacted.load(Ordering::Acquire));
        if compacted && letter.key.is_none() {
            letter.key = Some(bytes::Bytes::from(letter.id.to_string()));
        }
        let letters = std::slice::from_ref(&letter);
        self.place_messages(&topic, &shape, letters, DiskAdmission::Exempt)?
            .durable()
            .await
            .map(drop)
    }

    /// Places resolved `messages` on the topic's partitions: by key with Kafka's default
    /// partitioner ([`partition_for_key`]), without one where [`KeylessPlacement`] says.
    fn place_messages(
        &self,
        topic: &Topic,
        shape: &Shape,
        messages: &[Message],
        admission: DiskAdmission,
    ) -> Result<PendingPublish> {
        let count = u64::from(shape.spec.partitions);
        let mut next_keyless =
            || (topic.keyless_next.fetch_add(1, Ordering::Relaxed) % count) as u32;
        let sticky = (shape.spec.keyless == KeylessPlacement::StickyBatch
            && messages.iter().any(|m| m.key.is_none()))
        .then(&mut next_keyless);
        let placement: Vec<u32> = messages
            .iter()
            .map(|m| match (&m.key, sticky) {
                (Some(key), _) => partition_for_key(key, shape.spec.partitions),
                (None, Some(partition)) => partition,
                (None, None) => next_keyless(),
            })
            .collect();
        let records = messages.iter().map(|m| m.to_topic_record(None)).collect();
        self.place(topic, shape, records, placement, admission)
    }

    /// Publishes `messages` to one partition, in order, with one storage append.
    pub async fn publish_to_partition(
        &self,
        topic: &str,
        partition: u32,
        messages: Vec<OutgoingMessage>,
    ) -> Result<Vec<TopicPosition>> {
        self.begin_publish_to_partition(topic, partition, messages)?
            .durable()
            .await
    }

    /// [`Broker::publish_to_partition`] in two steps (see `engine/pending_publish.rs`):
    /// this validates the messages and places their append, and the [`PendingPublish`] it
    /// returns gives their positions once durable. Appends begun by successive calls land
    /// in the partition in call order, before any is awaited. An error here stores nothing.
    pub fn begin_publish_to_partition(
        &self,
        topic: &str,
        partition: u32,
        messages: Vec<OutgoingMessage>,
    ) -> Result<PendingPublish> {
        let topic = self.topic(topic)?;
        topic.partition(partition)?;
        if messages.is_empty() {
            return Ok(PendingPublish::empty(self));
        }
        let shape = topic.shape();
        self.check_schema(shape.spec.schema_subject.as_deref(), &messages)?;
        let messages = self.resolve_for_topic(messages)?;
        let placement = vec![partition; messages.len()];
        let records = messages.iter().map(|m| m.to_topic_record(None)).collect();
        self.place(&topic, &shape, records, placement, DiskAdmission::Checked)
    }

    /// Publishes `messages` to one partition as producer `producer_id`, numbered
    /// `first_sequence`, `first_sequence + 1`, …; each sequence is written once:
    ///
    /// - the next sequences (or a producer the partition does not know — new, or silent
    ///   for longer than the topic's `producer_state_window` and forgotten) are written;
    /// - a batch written before (a retry after a lost answer) writes nothing and returns
    ///   the original positions;
    /// - a batch starting beyond the next sequence is [`BrokerError::OutOfOrderSequence`],
    ///   one repeating part of what was written and adding more is
    ///   [`BrokerError::SequenceOverlap`], and a retry older than the latest batches the
    ///   partition remembers is [`BrokerError::SequenceTooOld`]; each writes nothing.
    ///
    /// What the partition remembers survives restarts: it is rebuilt from the producer id
    /// and sequence stored in each record (`ferry-producer-id`, `ferry-producer-seq`).
    pub async fn publish_idempotent(
        &self,
        topic: &str,
        partition: u32,
        producer_id: &str,
        first_sequence: u64,
        messages: Vec<OutgoingMessage>,
    ) -> Result<Vec<TopicPosition>> {
        check_producer_id(producer_id).map_err(|problem| BrokerError::InvalidProducerId {
            producer: producer_id.chars().take(64).collect(),
            problem,
        })?;
        let topic = self.topic(topic)?;
        let target = topic.partition(partition)?;
        if messages.is_empty() {
            return Ok(Vec::new());
        }
        let count = messages.len() as u64;
        if first_sequence.checked_add(count).is_none() {
            return Err(BrokerError::InvalidSetting {
                setting: "first_sequence",
                problem: format!(
                    "{first_sequence} leaves no room for {count} more sequence numbers; \
                     start the producer's sequences lower"
                ),
            });
        }
        let spec = topic.shape().spec.clone();
        self.check_schema(spec.schema_subject.as_deref(), &messages)?;
        let messages = self.resolve_for_topic(messages)?;
        let records: Vec<NewRecord> = messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                m.to_topic_record(Some(&ProducerStamp {
                    producer_id: producer_id.to_owned(),
                    sequence: first_sequence + i as u64,
                }))
            })
            .collect();
        target.check_batch(&topic.name, &records)?;
        self.inner.disk.admit(records_on_disk(&records))?;
        let positions = |base: u64| {
            (0..count)
                .map(|i| TopicPosition {
                    partition,
                    offset: base + i,
                })
                .collect()
        };
        let mut guard = target.producers.lock().await;
        let table = target.load_producers(&mut guard, &spec, self.now_ms())?;
        match table.check(producer_id, first_sequence, count) {
            Ok(SequenceCheck::Write) => {}
            Ok(SequenceCheck::Duplicate(offsets)) => {
                return Ok(offsets
                    .into_iter()
                    .map(|offset| TopicPosition { partition, offset })
                    .collect());
            }
            Err(problem) => {
                let (topic, producer) = (topic.name.clone(), producer_id.to_owned());
                return Err(match problem {
                    SequenceProblem::OutOfOrder { expected, got } => {
                        BrokerError::OutOfOrderSequence {
                            topic,
                            partition,
                            producer,
                            expected,
                            got,
                        }
                    }
                    SequenceProblem::Overlap { got, last_written } => {
                        BrokerError::SequenceOverlap {
                            topic,
                            partition,
                            producer,
                            got,
                            last_written,
                        }
                    }
                    SequenceProblem::TooOld {
                        got,
                        oldest_remembered,
                    } => BrokerError::SequenceTooOld {
                        topic,
                        partition,
                        producer,
                        got,
                        oldest_remembered,
                    },
                });
            }
        }
        let appended = target
            .append(records, PublishCall::single())
            .await
            .map_err(|_| StorageError::Closed)?
            .map_err(|e| self.inner.disk.refusal(e.into()))?;
        let published_at = messages[0].published_at;
        for i in 0..count {
            table.observe(
                producer_id,
                first_sequence + i,
                appended.base_offset + i,
                published_at,
            );
        }
        Ok(positions(appended.base_offset))
    }

    /// The ids of the idempotent producers a partition remembers — those that wrote to it
    /// within the topic's `producer_state_window` —, rebuilt from its records on first use
    /// as [`Broker::publish_idempotent`] does. A front end whose producers carry more
    /// identity in the id (Kafka's epoch) learns from it what survived a restart.
    pub async fn idempotent_producers(&self, topic: &str, partition: u32) -> Result<Vec<String>> {
        let topic = self.topic(topic)?;
        let target = topic.partition(partition)?;
        let spec = topic.shape().spec.clone();
        let mut guard = target.producers.lock().await;
        let table = target.load_producers(&mut guard, &spec, self.now_ms())?;
        Ok(table.producer_ids().map(str::to_owned).collect())
    }

    /// Validates and resolves messages as a queue publish does, with the broker's limits.
    fn resolve_for_topic(&self, messages: Vec<OutgoingMessage>) -> Result<Vec<Message>> {
        let now_ms = self.now_ms();
        let limits = &self.inner.config.limits;
        let mut rng = self.inner.rng.lock().unwrap_or_else(|e| e.into_inner());
        messages
            .into_iter()
            .map(|m| m.into_message(limits, now_ms, &mut *rng))
            .collect()
    }

    /// Places `records[i]` on partition `placement[i]`, one append per partition, all
    /// checked before any starts; every append is handed to its log before this returns
    /// (so in call order), and the result gives each record's position once all are
    /// durable.
    fn place(
        &self,
        topic: &Topic,
        shape: &Shape,
        records: Vec<NewRecord>,
        placement: Vec<u32>,
        admission: DiskAdmission,
    ) -> Result<PendingPublish> {
        let mut groups: BTreeMap<u32, (Vec<usize>, Vec<NewRecord>)> = BTreeMap::new();
        for (i, (record, partition)) in records.into_iter().zip(&placement).enumerate() {
            let group = groups.entry(*partition).or_default();
            group.0.push(i);
            group.1.push(record);
        }
        let partition = |p: u32| -> &Arc<Partition> { &shape.partitions[p as usize] };
        let mut bytes = 0;
        for (&p, (_, records)) in &groups {
            partition(p).check_batch(&topic.name, records)?;
            bytes += records_on_disk(records);
        }
        if let DiskAdmission::Checked = admission {
            self.inner.disk.admit(bytes)?;
        }
        let mut pending = PendingPublish::new(self, placement.len());
        // One call: its subscriptions' references to all its partitions go in one append
        // per subscription, once the last partition's append is durable.
        let shares = PublishCall::shares(groups.len());
        for ((p, (indexes, records)), share) in groups.into_iter().zip(shares) {
            pending.placed(p, indexes, partition(p).append(records, share));
        }
        Ok(pending)
    }

    // ---- Read ----

    /// Up to `max_records` records of one partition from `from`, in offset order. Reading
    /// at the end returns nothing; an offset below the partition's start (removed by
    /// retention) or beyond its end is [`BrokerError::OffsetOutOfRange`], naming the valid
    /// range.
    pub fn read_topic(
        &self,
        topic: &str,
        partition: u32,
        from: Position,
        max_records: usize,
    ) -> Result<Vec<TopicRecord>> {
        self.read_topic_within(topic, partition, from, ReadLimit::messages(max_records))
    }

    /// As [`Broker::read_topic`], within `limit`: at most `limit.messages` records and
    /// `limit.bytes` bytes of them (always at least one record when there is one, so a
    /// reader going on from the offset after the last returned progresses).
    pub fn read_topic_within(
        &self,
        topic: &str,
        partition: u32,
        from: Position,
        limit: ReadLimit,
    ) -> Result<Vec<TopicRecord>> {
        let topic = self.topic(topic)?;
        let mut budget = Budget::new(limit);
        topic
            .partition(partition)?
            .read_within(&topic.name, from, limit.messages, &mut budget)
    }

    // ---- Maintenance ----

    /// Applies every topic's retention, and forgets idempotent producers silent for longer
    /// than the topic's window (a partition in the middle of an idempotent publish is left
    /// for the next pass).
    pub(super) async fn maintain_topics(&self, report: &mut MaintenanceReport) -> Result<()> {
        for topic in self.topic_list() {
            let shape = topic.shape();
            let cutoff = self
                .now_ms()
                .saturating_sub(millis(shape.spec.producer_state_window));
            let links = topic.fanout.links();
            for partition in &shape.partitions {
                // Nothing a subscription (or a snapshot) has not settled or not yet
                // considered goes — unless the topic says otherwise, and then they let it go
                // (snapshots too, also when no subscription is left).
                let keep_from = if !shape.spec.retention.overrides_subscriptions {
                    let by_links = links.iter().filter_map(|l| l.hold(partition.index)).min();
                    // Read after the links: a snapshot being taken is listed at once with
                    // its capture (see `create_snapshot`), so one not listed yet is covered
                    // by its subscription's hold, read just before.
                    let by_snapshots = self.snapshot_hold(&topic.name, partition.index);
                    by_links.into_iter().chain(by_snapshots).min()
                } else if links.is_empty() {
                    None
                } else {
                    let target = partition.start_after_retention(&shape.spec);
                    self.release_for_retention(&links, partition, target)
                        .await?
                };
                report.deleted(&partition.retain(&shape.spec, keep_from)?);
                report.compaction += partition.compact(&shape.spec, keep_from, self.now_ms())?;
                if let Ok(mut producers) = partition.producers.try_lock()
                    && let Some(table) = producers.as_mut()
                {
                    table.forget_silent(cutoff);
                }
            }
        }
        Ok(())
    }
}

/// About what `records` take on disk, for the disk reserve.
fn records_on_disk(records: &[NewRecord]) -> u64 {
    records
        .iter()
        .map(|r| r.encoded_len() as u64 + super::disk_reserve::RECORD_OVERHEAD_BYTES)
        .sum()
}

/// Why a topic with a subscription cannot be deleted.
fn has_subscriptions(topic: &Topic, link: &super::subscriptions::Link) -> BrokerError {
    BrokerError::TopicHasSubscriptions {
        topic: topic.name.clone(),
        subscription: link.name(),
    }
}

/// Whether a publish to a topic is refused ([`BrokerError::DiskFull`]) when the disk is
/// short of the broker's reserve (see `engine/disk_reserve.rs`).
#[derive(Clone, Copy)]
enum DiskAdmission {
    /// A producer's publish: refused, and the producer may retry.
    Checked,
    /// A dead letter: taken, as a dead-letter queue takes its letters (see
    /// [`Broker::publish_dead_letter`]).
    Exempt,
}
