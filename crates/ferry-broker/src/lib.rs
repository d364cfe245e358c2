//! Ferry's broker: queues, topics and subscriptions that deliver each message to one of many
//! competing consumers, with leases, retries, dead-lettering, delays, priorities, dedup and
//! ordering keys, on top of `ferry-storage`. [`Broker`] is the whole of it: an embedded async
//! broker over tokio, opened on a directory with [`Broker::open`].
//!
//! **The public API, by what a caller does**
//!
//! - *Run a broker:* [`Broker`], [`BrokerConfig`]; [`Broker::tick_now`] and
//!   [`Broker::maintain_now`] ([`MaintenanceReport`]) under a manual clock;
//!   [`Broker::storage_stats`] ([`StorageStats`], made of [`LogStatsSnapshot`] and
//!   [`HistogramSnapshot`]) and [`DiskSpace`].
//! - *Queues:* [`Name`]s and [`QueueSpec`] ([`DeadLetter`], [`Durability`], [`LengthLimit`],
//!   [`OrderingMode`], [`OverflowPolicy`], [`RetryPolicy`], [`Backoff`]), a set of them checked
//!   with [`validate_topology`]; create, delete, list, [`QueueInfo`] with [`QueueStats`] and
//!   [`QueueStateStats`]; change the mutable settings of a live queue
//!   ([`Broker::update_queue`]) and purge every message ([`Broker::purge_queue`]).
//! - *Publish:* an [`OutgoingMessage`] ([`Headers`], well-known [`header`] names,
//!   [`DeliveryTime`], within [`Limits`]) becomes a [`Message`] with a [`MessageId`].
//! - *Consume:* [`ReceivedMessage`]s under a [`LeaseToken`], keyed by [`Seq`]; ack ([`Acked`]),
//!   nack ([`Nacked`]), reject, extend, return unsent (no attempt spent), park and unpark
//!   keys, cancel, prefetch, a receive that stops waiting on a signal;
//!   [`PeekedMessage`]s (at most [`MAX_PEEK`]) in a [`PeekPage`].
//! - *Bounded reads:* peeks, topic reads and group polls within a [`ReadLimit`] of
//!   messages and bytes ([`message_bytes`]).
//! - *Dead letters:* [`DeadLetterInfo`] and [`DeadLetterReason`] on what a dead-letter queue
//!   delivers; [`Broker::redrive`] with a [`RedriveRequest`] and [`RedriveFilter`], answered
//!   by a [`RedriveReport`].
//! - *Topics:* [`TopicSpec`] ([`KeylessPlacement`], [`TopicRetention`], [`TopicCompaction`]);
//!   publish to [`TopicPosition`]s (by key with [`partition_for_key`], Kafka's partitioner,
//!   bit for bit), read [`TopicRecord`]s from a [`Position`]; [`TopicInfo`] and
//!   [`PartitionInfo`]; idempotent producers ([`ProducerStamp`]); [`CompactionStats`].
//! - *Subscriptions:* queues fed by a topic: [`SubscriptionSpec`] ([`SubscriptionStart`],
//!   a [`Filter`] of a [`SubjectPattern`] and [`Predicate`]s), [`SubscriptionInfo`] and
//!   [`SkippedRange`].
//! - *Consumer groups* over topics: [`GroupJoin`] ([`StartAt`]) gives a [`Membership`];
//!   [`GroupInfo`], [`GroupPartition`], [`PartitionLag`].
//! - *Errors:* [`BrokerError`] (with its [`ErrorKind`]), [`Result`], and the storage's
//!   [`StorageError`] inside it.
//!
//! Inside, a pure delivery state machine per queue decides (leases, retries, ordering keys,
//! priorities, timers) and the engine makes its decisions durable — see `engine/mod.rs` for
//! the layout of a broker directory and the durability of each call, and
//! `engine/effects.rs` for how a decision is carried out. `tests/model.rs` checks the broker
//! against a reference model across restarts; the crash suites under `tests/` SIGKILL it
//! under load.
//!
//! Known limits: every unsettled message is tracked in memory (about 48 bytes; payloads stay
//! on disk); prefetch caps live in memory only; dead letters moved into a queue count against
//! its length limit but are never refused; a redrive interrupted by a crash may redrive a
//! message again; a queue poisoned by a failed write stays so until the broker is reopened.
//!
//! ```
//! use std::time::Duration;
//! use ferry_broker::{Broker, BrokerConfig, OutgoingMessage, QueueSpec, header};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
//! let dir = tempfile::tempdir()?;
//! let broker = Broker::open(dir.path(), BrokerConfig::default()).await?;
//! broker.create_queue("orders", QueueSpec::default()).await?;
//! assert!(broker.is_dead_letter_queue("orders.dlq"));
//!
//! let message = OutgoingMessage::new(r#"{"order":7}"#)
//!     .with_key("order-7")
//!     .with_header(header::TYPE, "order.created");
//! broker.publish("orders", message).await?;
//!
//! let received = broker
//!     .receive("orders", "worker-1", 10, Some(Duration::from_secs(30)), None)
//!     .await?;
//! for m in received {
//!     broker.ack("orders", m.seq, m.token).await?;
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod engine;
mod error;
mod filter;
mod group;
pub mod header;
pub mod link;
mod message;
mod message_id;
mod name;
mod queue;
mod random;
mod read_limit;
mod record;
mod retry;
mod schema_requirement;
mod spec;
mod spec_codec;
mod subscription;
mod topic;
mod topology;

pub use engine::{
    Broker, BrokerConfig, Checkpoint, CommittedOffset, CompactionStats, DiskSpace, GroupInfo,
    GroupJoin, GroupPartition, LinkInfo, MAX_OFFSET_METADATA, MAX_PEEK, MaintenanceReport,
    OffsetCommit, ParkedKey, PartitionLag, PeekPage, PeekedMessage, PendingPublish, QueueInfo,
    QueueStats, ReceiveOptions, ReceivedMessage, RedriveFilter, RedriveReport, RedriveRequest,
    SNAPSHOT_LIFETIME, SNAPSHOT_MIN_LIFETIME, SeekTarget, SkippedRange, SnapshotInfo, StartAt,
    StorageStats, SubscriptionInfo,
};
pub use error::{BrokerError, ErrorKind, Result};
/// The storage types [`StorageStats`] is made of, and the storage error a
/// [`BrokerError::Storage`] carries.
pub use ferry_storage::{HistogramSnapshot, LogStatsSnapshot, StorageError};
pub use filter::{Filter, Predicate, SubjectPattern};
pub use group::Membership;
pub use message::{DeliveryTime, Headers, Limits, Message, OutgoingMessage};
pub use message_id::MessageId;
pub use name::Name;
pub use queue::key_order::PerKey;
pub use queue::state::{Acked, DeadLetterReason, LeaseToken, Nacked, QueueStateStats, Seq};
pub use read_limit::{ReadLimit, message_bytes};
pub use record::{DeadLetterInfo, ProducerStamp};
pub use retry::{Backoff, RetryPolicy};
pub use schema_requirement::{MAX_SCHEMA_SUBJECT_BYTES, PayloadValidator, SchemaRejection};
pub use spec::{DeadLetter, Durability, LengthLimit, OrderingMode, OverflowPolicy, QueueSpec};
pub use subscription::{SubscriptionSpec, SubscriptionStart};
pub use topic::partitioner::partition_for_key;
pub use topic::{
    KeylessPlacement, PartitionInfo, Position, TopicCompaction, TopicInfo, TopicPosition,
    TopicRecord, TopicRetention, TopicSpec, TopicStorageLimits,
};
pub use topology::validate_topology;
