//! What [`QueueState`](super::QueueState) takes in and hands out: the messages the engine
//! tracks, deliveries, outcomes of acks and nacks, dead-letter decisions, effects and stats.

use crate::message_id::MessageId;

/// A message's position in its queue's publish order (the queue's global publish sequence).
pub type Seq = u64;

/// Names one delivery of one message: an ack, nack, reject or extend must carry the token of
/// the message's current lease, so a consumer whose lease ended cannot settle a message that
/// was since delivered to someone else. Unique per delivery within a `QueueState`; a counter,
/// not a secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseToken(pub u64);

/// The error of the attempt that was running when the broker stopped, for a message whose
/// deliveries that attempt used up (it is dead-lettered on restart).
pub const INTERRUPTED: &str = "delivery interrupted by a broker restart";

/// The longest error text kept with a failed attempt, in bytes.
pub const MAX_ERROR_LEN: usize = 1024;

/// What the engine hands over when it loads a message into the queue's window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracked {
    pub seq: Seq,
    pub id: MessageId,
    /// The ordering key; used only under [`crate::OrderingMode::KeyShared`].
    pub key: Option<Box<[u8]>>,
    /// Priority; values beyond the queue's levels count as its highest level.
    pub level: u8,
    /// When the message may first be delivered (its delay, or after a restart its retry time
    /// or the end of a lease that was running at the crash). At or before now: ready at once.
    pub deliver_at_ms: i64,
    pub expires_at_ms: Option<i64>,
    /// Payload, key and header bytes, for [`QueueStateStats::bytes`].
    pub size: u32,
    /// Deliveries so far: 0 for a new message, more when restored after a restart.
    pub deliveries: u32,
}

/// A tracked message as a restart must see it again; see
/// [`QueueState::restore_point`](super::QueueState::restore_point).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestorePoint {
    pub seq: Seq,
    pub deliveries: u32,
    /// Not deliverable before this time: a running lease's end or a retry's due time.
    pub not_before_ms: Option<i64>,
}

/// What a message's failed attempts left to report in its dead letter: see
/// [`DeadLetterDecision`]. The engine journals it and hands it back on restart
/// ([`QueueState::track_restored`](super::QueueState::track_restored)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FailureRecord {
    pub first_failure_ms: Option<i64>,
    pub last_failure_ms: Option<i64>,
    pub last_error: Option<String>,
    pub last_consumer: Option<String>,
}

/// One message handed to one consumer under a lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub seq: Seq,
    pub id: MessageId,
    pub token: LeaseToken,
    /// 1-based attempt number: 1 for the first delivery.
    pub delivery: u32,
    pub lease_until_ms: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acked {
    /// This ack settled the message (an `Effect::Settled` was emitted).
    Settled,
    /// The message is not tracked: it was settled (or dead-lettered) before, and this is a
    /// repeated or late ack. Nothing changed. See the module docs on why this cannot tell
    /// the two apart.
    AlreadySettled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nacked {
    /// Redelivery is scheduled for this time (ready at once if it is not after now).
    RetryAt(i64),
    /// The failure ended the message; an `Effect::DeadLetter` was emitted.
    DeadLettered(DeadLetterReason),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeadLetterReason {
    MaxDeliveries,
    Rejected,
    Expired,
    /// Pushed out of a full queue by a newer publish (overflow policy `DeadLetterHead`).
    Overflow,
}

impl DeadLetterReason {
    /// The reason as recorded in a dead letter's metadata.
    pub fn as_str(self) -> &'static str {
        match self {
            DeadLetterReason::MaxDeliveries => "max_deliveries",
            DeadLetterReason::Rejected => "rejected",
            DeadLetterReason::Expired => "expired",
            DeadLetterReason::Overflow => "overflow",
        }
    }

    /// The reason recorded as `text` ([`as_str`](Self::as_str)), if it is one this broker
    /// knows.
    pub fn parse(text: &str) -> Option<DeadLetterReason> {
        [
            DeadLetterReason::MaxDeliveries,
            DeadLetterReason::Rejected,
            DeadLetterReason::Expired,
            DeadLetterReason::Overflow,
        ]
        .into_iter()
        .find(|r| r.as_str() == text)
    }
}

/// A message leaving the queue for its dead-letter queue, with the metadata the dead letter
/// keeps. Whether a dead-letter queue exists ([`crate::DeadLetter::Disabled`]) is the
/// engine's concern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterDecision {
    pub seq: Seq,
    pub id: MessageId,
    pub reason: DeadLetterReason,
    pub deliveries: u32,
    /// The last failed attempt's error text, or the reject reason; at most
    /// [`MAX_ERROR_LEN`] bytes.
    pub last_error: Option<String>,
    /// `None` when no attempt failed (a message that expired before any delivery failed).
    pub first_failure_ms: Option<i64>,
    pub last_failure_ms: Option<i64>,
    /// The consumer of the last delivery, if it was ever delivered.
    pub consumer: Option<String>,
}

/// What the engine must make durable or act on, in the order it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    Settled {
        seq: Seq,
    },
    DeadLetter(DeadLetterDecision),
    /// A failed attempt (a nack, or a lease that ended without an outcome) with a retry
    /// scheduled at `retry_at_ms`; the engine journals it so a restart keeps the backoff.
    Failed {
        seq: Seq,
        /// Deliveries made so far, the failed one included.
        deliveries: u32,
        retry_at_ms: i64,
        error: Option<String>,
    },
    /// The message became ready other than by being tracked: its delay or backoff ended, its
    /// key was released or unparked. For waking long-polling receivers.
    Ready {
        seq: Seq,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueueStateStats {
    /// Tracked messages of every kind.
    pub tracked: usize,
    pub ready: usize,
    pub in_flight: usize,
    /// Waiting for a delay or retry backoff to end.
    pub delayed: usize,
    /// Held by parked keys (not in flight), delayed ones included.
    pub parked_messages: usize,
    /// How long the front of the ready line has been deliverable: the largest
    /// `now − eligible since` over the first ready message of each priority level (FIFO puts
    /// the longest-waiting message of a level first, up to redeliveries, which rejoin at
    /// their publish position). `None` when nothing is ready.
    pub oldest_ready_age_ms: Option<i64>,
    /// Sum of the tracked messages' sizes (payload, key and headers).
    pub bytes: u64,
}
