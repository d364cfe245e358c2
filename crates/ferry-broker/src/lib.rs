//! Ferry's broker: queues, topics and subscriptions that deliver each message to one of many
//! competing consumers, with leases, retries, dead-lettering, delays, priorities, dedup and
//! ordering keys, on top of `ferry-storage`.
//!
//! **What exists today**
//!
//! The engine, v1 ([`engine`]): [`Broker`], an embedded async broker over tokio.
//! `Broker::open(dir, BrokerConfig)` takes a directory lock, keeps queue specs in a
//! `MetaStore` ([`spec_codec`]) and, per queue, a storage log of messages (offset = [`Seq`])
//! and a log of state events ([`journal`]). It offers create / delete / list / describe of
//! queues (with the default `<name>.dlq`), publish and batch publish with limits, default TTL
//! and dedup (window rebuilt on open), receive with leases and long-poll, ack / nack /
//! reject / extend, park / unpark of keys, dead-lettering into the dead-letter queue with
//! `ferry-dlq-*` metadata ([`record`]), a timer task (or [`Broker::tick_now`] under a
//! manual clock), and recovery on open: acked and dead-lettered messages stay gone, leases
//! running at the crash end at their (extended, if `extend` was called) deadline, retry
//! timers — after a nack or a lease expiry alike — delays, delivery counts, parked keys and
//! dedup windows survive. Dedup keys a message by its dedup id, else by its id only when
//! the producer chose it (marked `ferry-id-chosen` in the record, so a reopen rebuilds the
//! same window). A failed write to a queue's journal or message log poisons that queue: the
//! failing call returns the storage error, later calls on it
//! [`BrokerError::QueuePoisoned`] until the broker is reopened; other queues keep working.
//! Also:
//!
//! - topics ([`topic`], `engine/topics.rs`): partitioned append-only logs, each partition a
//!   storage log; create / delete / list / describe, [`Broker::add_partitions`]; publish by
//!   key (Kafka's default partitioner, bit for bit), round-robin or sticky per call without
//!   a key, or to one partition; [`Broker::read_topic`] from the earliest or latest offset,
//!   an offset or a time; retention by age and by bytes per partition in
//!   [`Broker::maintain_now`]; idempotent producers ([`Broker::publish_idempotent`]) whose
//!   retried batches are written once, remembered across restarts from the records'
//!   `ferry-producer-*` headers;
//! - length limits ([`engine::limits`]): max messages and/or bytes of unsettled messages,
//!   enforced on publish with the overflow policies `RejectPublish` ([`BrokerError::QueueFull`],
//!   a batch taken whole), `DropHead` (journaled, counted in [`QueueStats::dropped`]) and
//!   `DeadLetterHead` (reason `overflow`); counts are rebuilt on open;
//! - [`Broker::cancel`] of a scheduled (delayed, never delivered) message by id, journaled;
//!   the id→seq index covers scheduled messages only;
//! - [`Broker::set_prefetch`]: a per-consumer in-flight cap, in memory (until the broker is reopened);
//! - [`Broker::redrive`] ([`engine::redrive`]): dead letters back to their origin or to
//!   another queue, filtered by reason, header and age, with a count and a rate limit,
//!   attempts reset and `ferry-redrive-count` / `ferry-redrive-from` headers; at-least-once
//!   (published durably before it is acked in the dead-letter queue).
//!
//! Underneath, the domain layer — the types every layer speaks and the rules that keep bad
//! input out:
//!
//! - [`Name`]: validated queue, topic and subscription names, and the derived `<name>.dlq`;
//! - [`TopicSpec`] with its stored form ([`topic::codec`]), and
//!   [`topic::partitioner`]: Kafka's murmur2 key → partition;
//! - [`RetryPolicy`] and [`Backoff`]: max deliveries and capped exponential backoff with
//!   jitter drawn from an injectable [`RandomSource`];
//! - [`OutgoingMessage`] (what a producer publishes), [`Limits`] and their validation;
//!   [`Message`] (what the broker keeps) with its [`MessageId`] (a ULID), and its encoding
//!   into and out of a storage record ([`record`]);
//! - [`QueueSpec`] and its validation, and [`validate_topology`] over a set of queues
//!   (unique names, existing dead-letter targets, no dead-letter cycles);
//! - [`TimerQueue`]: due-time scheduling (delays, leases, backoff, TTL) in O(log n), and
//!   [`DedupWindow`]: the dedup-id window with expiry and a snapshot/restore form;
//! - [`KeyOrder`]: key-shared ordering over the engine's in-memory window (one in-flight
//!   message per key, publish order across retries, parking a key without blocking others),
//!   and [`PriorityPicker`]: which priority level serves next, with the lower-priority share
//!   that keeps low levels from starving;
//! - [`QueueState`]: the delivery state machine of one queue over the messages the engine
//!   holds in memory — leases with tokens, ack (idempotent, stale tokens refused), nack with
//!   backoff or an explicit delay, reject, lease extension and expiry, max deliveries, delays,
//!   TTL, priorities, key-shared ordering with parked keys, prefetch, cancel and stats. It
//!   returns decisions (deliveries, settled and dead-lettered messages) and persists nothing;
//! - [`filter`]: subscription filters — subject patterns and header predicates, with a
//!   strict text form; [`group`]: the coordination state of a Kafka-style consumer group
//!   (sessions, static members, sticky assignment, positions, owner-only forward commits).
//!
//! - [`subscription`] and `engine/subscriptions.rs`: subscriptions — queues fed by a topic
//!   through a [`Filter`], holding references to the topic's records; `engine/groups.rs`:
//!   consumer groups served over topics with durable committed offsets and lag
//!   ([`Broker::list_groups`] and [`Broker::group_lag`] for monitoring, also for groups not
//!   rejoined since a restart);
//! - [`Broker::storage_stats`] (`engine/storage_stats.rs`): the storage writer threads'
//!   fdatasync durations and group commit sizes, summed over each kind of log.
//!
//! **Not here yet**: compaction by key; topic retention that overrides subscriptions (today a topic keeps what any subscription has
//! not settled); length limits on dead letters the broker moves into a queue (they count,
//! but are never refused or dropped); persisted prefetch; redrive progress across a crash
//! (a message redriven but not yet settled in the dead-letter queue is redriven again);
//! recovering a poisoned queue without reopening the whole broker. Every unsettled message
//! is tracked in memory (48 bytes each; payloads stay on disk) and read once on open.
//! (`tests/model.rs` checks the broker against a reference model across restarts, and
//! `tests/crash.rs` SIGKILLs it under load.)
//!
//! ```
//! use std::time::Duration;
//! use ferry_broker::{header, Limits, Message, Name, OutgoingMessage, QueueSpec};
//!
//! let queue = Name::new("orders")?;
//! let spec = QueueSpec::default();
//! spec.validate()?;
//! assert_eq!(spec.dead_letter_target(&queue)?, Some(Name::new("orders.dlq")?));
//!
//! let now_ms = 1_700_000_000_000;
//! let mut rng = fastrand::Rng::with_seed(1);
//! let message = OutgoingMessage::new(r#"{"order":7}"#)
//!     .with_key("order-7")
//!     .with_header(header::TYPE, "order.created")
//!     .with_delay(Duration::from_secs(30))
//!     .into_message(&Limits::default(), now_ms, &mut rng)?;
//! assert_eq!(message.deliver_at, Some(now_ms + 30_000));
//!
//! let record = message.to_record(); // a ferry_storage::NewRecord, ready to append
//! assert_eq!(record.timestamp, Some(now_ms));
//! # Ok::<(), ferry_broker::BrokerError>(())
//! ```

pub mod dedup;
pub mod engine;
pub mod error;
pub mod filter;
pub mod group;
pub mod header;
pub mod journal;
pub mod key_order;
pub mod message;
pub mod message_id;
pub mod name;
pub mod priority;
pub mod queue_state;
pub mod random;
pub mod record;
pub mod retry;
pub mod seq_ranges;
pub mod spec;
pub mod spec_codec;
pub mod subscription;
pub mod timers;
pub mod topic;
pub mod topology;

pub use dedup::{DedupWindow, Seen};
pub use engine::groups::{GroupInfo, GroupJoin, GroupPartition, PartitionLag, StartAt};
pub use engine::peek::{MAX_PEEK, PeekedMessage};
pub use engine::subscriptions::{SkippedRange, SubscriptionInfo};
pub use engine::{
    Broker, BrokerConfig, DiskSpace, QueueInfo, QueueStats, ReceivedMessage, RedriveFilter,
    RedriveReport, RedriveRequest, StorageStats,
};
pub use error::{BrokerError, Result};
/// The storage types [`StorageStats`] is made of.
pub use ferry_storage::{HistogramSnapshot, LogStatsSnapshot, StorageError};
pub use filter::Filter;
pub use key_order::{Admission, KeyOrder, KeyedState};
pub use message::{DeliveryTime, Headers, Limits, Message, OutgoingMessage};
pub use message_id::MessageId;
pub use name::Name;
pub use priority::{PriorityPicker, PriorityStats};
pub use queue_state::{
    Acked, DeadLetterDecision, DeadLetterReason, Delivery, Effect, LeaseToken, Nacked, QueueState,
    QueueStateStats, RestorePoint, Seq, Tracked,
};
pub use random::RandomSource;
pub use record::{DeadLetterInfo, ProducerStamp};
pub use retry::{Backoff, RetryPolicy};
pub use spec::{DeadLetter, Durability, LengthLimit, OrderingMode, OverflowPolicy, QueueSpec};
pub use subscription::{SubscriptionSpec, SubscriptionStart};
pub use timers::TimerQueue;
pub use topic::{
    KeylessPlacement, PartitionInfo, Position, TopicCompaction, TopicInfo, TopicPosition,
    TopicRecord, TopicRetention, TopicSpec,
};
pub use topology::validate_topology;
