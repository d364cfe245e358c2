//! Topics: partitioned append-only logs, the log half of pub/sub. A producer publishes to a
//! topic; each message lands in one partition, at an offset; readers read a partition by
//! position (earliest, latest, an offset or a time), as often as they like. The engine's
//! side is in `engine/topics.rs` ([`Broker::create_topic`](crate::Broker::create_topic) and
//! the rest); this module holds what needs no engine:
//!
//! - [`TopicSpec`] and its validation, and its stored form (`spec_codec/topic.rs`);
//! - [`partitioner`]: key → partition, exactly as Kafka's default partitioner;
//! - the idempotent producers' table (`producer.rs`): which retried batch was written, where.
//!
//! **Names.** Topic names follow the same rules as queue names ([`crate::Name`]) but live in
//! their own namespace: a topic and a queue may share a name. Each keeps its own metadata
//! key (`topic/<name>` beside `queue/<name>`) and directory (`topics/<name>/<partition>/`
//! beside `queues/<name>/`), so neither can collide with the other on disk.
//!
//! **What a topic does not do.** A topic stores a message's delay, TTL, priority and dedup
//! id in its record (see [`crate::record`]) but does not act on them: a reader by position
//! gets every record, due or not, expired or not, duplicate or not. Subscriptions over a
//! topic will honour them; the topic keeps them so that they can.

pub mod partitioner;
pub(crate) mod producer;
pub mod spec;

use crate::message::Message;
use crate::name::Name;
use crate::record::ProducerStamp;

pub use spec::{KeylessPlacement, TopicCompaction, TopicRetention, TopicSpec};

/// Where a reader starts in a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    /// The oldest record still kept.
    Earliest,
    /// The end: only records published from now on (a read returns nothing yet).
    Latest,
    /// This offset, which must be kept or be the end.
    Offset(u64),
    /// The first record published at or after this time (ms since the Unix epoch), or the
    /// end if there is none.
    Timestamp(i64),
}

/// Where a published message landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPosition {
    pub partition: u32,
    pub offset: u64,
}

/// A record read from a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicRecord {
    pub partition: u32,
    pub offset: u64,
    /// Id, key, headers, payload, publish time (the record's timestamp) and the fields a
    /// topic keeps but does not act on (delay, TTL, priority, dedup id).
    pub message: Message,
    /// Set when an idempotent producer wrote it.
    pub producer: Option<ProducerStamp>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TopicInfo {
    pub name: Name,
    pub spec: TopicSpec,
    pub partitions: Vec<PartitionInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    pub partition: u32,
    /// The oldest offset still kept (retention moves it forward).
    pub start_offset: u64,
    /// The offset the next record will get.
    pub end_offset: u64,
    /// Bytes of the partition's log on disk.
    pub bytes: u64,
    /// Publish time of the record at `start_offset`; `None` when the partition is empty.
    pub oldest_timestamp_ms: Option<i64>,
}

/// The storage bounds every topic's partitions share, set by the broker's configuration
/// (its limits and segment size), not per topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicStorageLimits {
    /// The largest batch one publish may append to a partition (bytes, encoded).
    pub max_batch_bytes: usize,
    /// The size at which a partition's log starts a new segment: the grain retention and
    /// compaction work at.
    pub segment_bytes: u64,
}
