//! Ferry's broker: queues, topics and subscriptions that deliver each message to one of many
//! competing consumers, with leases, retries, dead-lettering, delays, priorities, dedup and
//! ordering keys, on top of `ferry-storage`.
//!
//! **What exists today** is the domain layer only — the types every later layer speaks and
//! the rules that keep bad input out:
//!
//! - [`Name`]: validated queue, topic and subscription names, and the derived `<name>.dlq`;
//! - [`RetryPolicy`] and [`Backoff`]: max deliveries and capped exponential backoff with
//!   jitter drawn from an injectable [`RandomSource`];
//! - [`OutgoingMessage`] (what a producer publishes), [`Limits`] and their validation;
//!   [`Message`] (what the broker keeps) with its [`MessageId`] (a ULID), and its encoding
//!   into and out of a storage record ([`record`]);
//! - [`QueueSpec`] and its validation, and [`validate_topology`] over a set of queues
//!   (unique names, existing dead-letter targets, no dead-letter cycles);
//! - [`TimerQueue`]: due-time scheduling (delays, leases, backoff, TTL) in O(log n), and
//!   [`DedupWindow`]: the dedup-id window with expiry and a snapshot/restore form — both in
//!   memory, their persistence comes with the engine;
//! - [`KeyOrder`]: key-shared ordering over the engine's in-memory window (one in-flight
//!   message per key, publish order across retries, parking a key without blocking others),
//!   and [`PriorityPicker`]: which priority level serves next, with the lower-priority share
//!   that keeps low levels from starving;
//! - [`QueueState`]: the delivery state machine of one queue over the messages the engine
//!   holds in memory — leases with tokens, ack (idempotent, stale tokens refused), nack with
//!   backoff or an explicit delay, reject, lease extension and expiry, max deliveries, delays,
//!   TTL, priorities, key-shared ordering with parked keys, prefetch, cancel and stats. It
//!   returns decisions (deliveries, settled and dead-lettered messages) and persists nothing.
//!
//! **Not here yet**: the engine that makes those decisions durable and serves them —
//! `Broker::open`, publishing into storage logs, the state journal and its recovery,
//! dead-letter queues and redrive, length limits, dedup on publish, the async API — and any
//! use of storage beyond the record encoding. Nothing in this crate stores or serves a
//! message today.
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
pub mod error;
pub mod header;
pub mod key_order;
pub mod message;
pub mod message_id;
pub mod name;
pub mod priority;
pub mod queue_state;
pub mod random;
pub mod record;
pub mod retry;
pub mod spec;
pub mod timers;
pub mod topology;

pub use dedup::{DedupWindow, Seen};
pub use error::{BrokerError, Result};
pub use key_order::{Admission, KeyOrder, KeyedState};
pub use message::{DeliveryTime, Headers, Limits, Message, OutgoingMessage};
pub use message_id::MessageId;
pub use name::Name;
pub use priority::{PriorityPicker, PriorityStats};
pub use queue_state::{
    Acked, DeadLetterDecision, DeadLetterReason, Delivery, Effect, LeaseToken, Nacked, QueueState,
    QueueStateStats, Seq, Tracked,
};
pub use random::RandomSource;
pub use retry::{Backoff, RetryPolicy};
pub use spec::{DeadLetter, Durability, LengthLimit, OrderingMode, OverflowPolicy, QueueSpec};
pub use timers::TimerQueue;
pub use topology::validate_topology;
