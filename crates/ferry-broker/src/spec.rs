//! How one queue behaves: its retry policy, where its dead letters go, and the windows,
//! limits and modes that shape delivery.
//!
//! Defaults are the reliable ones from the seeds, so `QueueSpec::default()` is a queue a
//! user can run in production: five deliveries with backoff, a dead-letter queue, a 30 s
//! lease, dedup for 5 minutes, fsync before a publish is acknowledged.

use std::time::Duration;

pub use ferry_storage::Durability;

/// What is wrong with a durability setting of a queue or a topic, if anything.
pub(crate) fn durability_problem(durability: Durability) -> Option<&'static str> {
    match durability {
        Durability::Interval(interval) if interval.is_zero() => Some(
            "an Interval durability needs a positive interval; use Fsync to sync every publish",
        ),
        _ => None,
    }
}

use crate::error::{BrokerError, Result, human};
use crate::message::millis;
use crate::name::Name;
use crate::retry::RetryPolicy;

const HOUR: u64 = 3600;
const DAY: u64 = 24 * HOUR;

/// Where a queue's dead letters go.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum DeadLetter {
    /// `<name>.dlq`, created with the queue if it does not exist.
    #[default]
    Default,
    /// An existing queue, which several queues may share.
    Named(Name),
    /// No dead-letter queue. What happens to a message that would have been dead-lettered
    /// is the engine's to define and document.
    Disabled,
    /// An existing topic: each dead letter is published to it, and its subscriptions
    /// receive it as they receive any publish (Google Pub/Sub's `dead_letter_topic`). The
    /// letter carries its [`DeadLetterInfo`](crate::DeadLetterInfo); how long it is
    /// kept is the topic's and its subscriptions' business, not `dead_letter_retention`.
    Topic(Name),
}

impl DeadLetter {
    /// The topic dead letters are published to, when they go to a topic.
    pub fn topic(&self) -> Option<&Name> {
        match self {
            DeadLetter::Topic(topic) => Some(topic),
            DeadLetter::Default | DeadLetter::Named(_) | DeadLetter::Disabled => None,
        }
    }
}

/// How messages are spread over consumers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OrderingMode {
    /// Competing consumers: any consumer may get any message; no order across redeliveries.
    #[default]
    Shared,
    /// Messages with the same key go to one consumer at a time, in publish order; different
    /// keys are delivered in parallel. Messages without a key behave as under `Shared`.
    KeyShared,
    /// Exclusive with failover: one consumer at a time — the active one — receives, one
    /// message at a time, in publish order (a retry goes before anything published after
    /// it, through its backoff too). A message published with a delay joins that order
    /// when its delay ends, at its publish-order place, so it holds back nothing published
    /// after it while it waits; it never overtakes a delivery in flight. Another consumer takes over once the active one holds no lease and has not
    /// asked to receive for the queue's lease duration; until then its receives get nothing.
    /// Which consumer is active is not kept across a restart: the first to receive after it
    /// is.
    Exclusive,
}

/// What happens to a publish that would take a queue past a length limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OverflowPolicy {
    /// Refuse the publish with a typed error: back-pressure reaches the producer and
    /// nothing already accepted is lost.
    #[default]
    RejectPublish,
    /// Discard the oldest messages not in flight to make room.
    DropHead,
    /// Move the oldest messages not in flight to the dead-letter queue with reason
    /// `overflow`.
    DeadLetterHead,
}

/// Bounds on a queue's backlog. No bound by default: a queue that silently drops or refuses
/// messages is a choice a user must make, not a default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LengthLimit {
    pub max_messages: Option<u64>,
    /// Counted over payload, key and headers of the messages in the queue.
    pub max_bytes: Option<u64>,
    pub overflow: OverflowPolicy,
}

/// The settings of one queue. Check with [`QueueSpec::validate`], and a set of queues
/// together with [`crate::validate_topology`].
#[derive(Debug, Clone, PartialEq)]
pub struct QueueSpec {
    pub retry: RetryPolicy,
    pub dead_letter: DeadLetter,
    /// Publishes repeating a dedup id (or, without one, a message id) within this window are
    /// stored once. Zero turns deduplication off.
    pub dedup_window: Duration,
    /// TTL given to messages published without one.
    pub default_ttl: Option<Duration>,
    /// Visibility timeout: how long a received message stays hidden from other consumers
    /// before it counts as a failed delivery and is redelivered.
    pub lease: Duration,
    /// The longest delay this queue accepts; zero refuses delayed messages.
    pub max_delay: Duration,
    /// Number of priority levels: a publish to the queue takes priorities `0..levels` and
    /// refuses a higher one (see [`QueueSpec::check_priority`]). 1 means FIFO.
    pub priority_levels: u8,
    /// Starvation guard: the fraction of deliveries reserved for lower levels while higher
    /// ones have messages ready, so a steady stream of urgent messages cannot hold the rest
    /// back forever. 0 gives strict priority.
    pub lower_priority_share: f64,
    pub ordering: OrderingMode,
    pub length_limit: LengthLimit,
    /// When a publish to this queue is acknowledged relative to the disk.
    pub durability: Durability,
    /// How long dead letters are kept in this queue's dead-letter queue.
    pub dead_letter_retention: Duration,
    /// The schema registry subject every message published here must match (see
    /// `schema_requirement.rs`); `None` (the default) checks nothing.
    pub schema_subject: Option<String>,
}

impl QueueSpec {
    pub const MAX_DEDUP_WINDOW: Duration = Duration::from_secs(7 * DAY);
    pub const MAX_LEASE: Duration = Duration::from_secs(12 * HOUR);
    pub const MAX_DELAY: Duration = Duration::from_secs(90 * DAY);
    pub const MAX_TTL: Duration = Duration::from_secs(90 * DAY);
    pub const MAX_PRIORITY_LEVELS: u8 = 10;
    pub const MAX_LOWER_PRIORITY_SHARE: f64 = 0.5;
    /// A guard against unit mistakes (seconds typed where days were meant) rather than a
    /// resource limit.
    pub const MAX_DEAD_LETTER_RETENTION: Duration = Duration::from_secs(3650 * DAY);

    /// Checks this spec on its own. Name-dependent rules (the derived dead-letter name) are
    /// in [`QueueSpec::dead_letter_target`]; rules across queues in
    /// [`crate::validate_topology`].
    pub fn validate(&self) -> Result<()> {
        self.retry.validate()?;
        let bad = |setting, problem: String| Err(BrokerError::InvalidSetting { setting, problem });
        if self.dedup_window > Self::MAX_DEDUP_WINDOW {
            return bad(
                "dedup_window",
                format!("must be at most 7 days, got {}", human(&self.dedup_window)),
            );
        }
        if let Some(ttl) = self.default_ttl
            && (millis(ttl) < 1 || ttl > Self::MAX_TTL)
        {
            return bad(
                "default_ttl",
                format!(
                    "must be between 1 ms and 90 days, got {}; use None for no TTL",
                    human(&ttl)
                ),
            );
        }
        if millis(self.lease) < 1 || self.lease > Self::MAX_LEASE {
            return bad(
                "lease",
                format!(
                    "must be between 1 ms and 12 hours, got {}; a consumer that needs longer \
                     should extend its lease while it works",
                    human(&self.lease)
                ),
            );
        }
        if self.max_delay > Self::MAX_DELAY {
            return bad(
                "max_delay",
                format!("must be at most 90 days, got {}", human(&self.max_delay)),
            );
        }
        if !(1..=Self::MAX_PRIORITY_LEVELS).contains(&self.priority_levels) {
            return bad(
                "priority_levels",
                format!(
                    "must be between 1 and {} (got {}); 1 means no priorities",
                    Self::MAX_PRIORITY_LEVELS,
                    self.priority_levels
                ),
            );
        }
        if !(0.0..=Self::MAX_LOWER_PRIORITY_SHARE).contains(&self.lower_priority_share) {
            return bad(
                "lower_priority_share",
                format!(
                    "must be a fraction between 0.0 and 0.5 (0.1 = 10 % of deliveries), got {}",
                    self.lower_priority_share
                ),
            );
        }
        self.validate_length_limit()?;
        if let Some(problem) = durability_problem(self.durability) {
            return bad("durability", problem.into());
        }
        if self.dead_letter_retention.is_zero()
            || self.dead_letter_retention > Self::MAX_DEAD_LETTER_RETENTION
        {
            return bad(
                "dead_letter_retention",
                format!(
                    "must be between 1 ms and 3650 days, got {}",
                    human(&self.dead_letter_retention)
                ),
            );
        }
        if let Some(problem) = self
            .schema_subject
            .as_deref()
            .and_then(crate::schema_requirement::subject_problem)
        {
            return bad("schema_subject", problem);
        }
        Ok(())
    }

    fn validate_length_limit(&self) -> Result<()> {
        let limit = &self.length_limit;
        let bad = |setting, problem: &str| {
            Err(BrokerError::InvalidSetting {
                setting,
                problem: problem.to_owned(),
            })
        };
        if limit.max_messages == Some(0) {
            return bad(
                "length_limit.max_messages",
                "must be positive; use None for no limit",
            );
        }
        if limit.max_bytes == Some(0) {
            return bad(
                "length_limit.max_bytes",
                "must be positive; use None for no limit",
            );
        }
        if limit.overflow == OverflowPolicy::DeadLetterHead
            && self.dead_letter == DeadLetter::Disabled
        {
            return bad(
                "length_limit.overflow",
                "DeadLetterHead needs a dead-letter queue, but dead_letter is Disabled; \
                 enable dead-lettering or choose DropHead or RejectPublish",
            );
        }
        Ok(())
    }

    /// The queue that dead letters of the queue `queue` go to, or `None` when disabled or
    /// when they go to a topic ([`DeadLetter::topic`]).
    ///
    /// The `.dlq` suffix is reserved for dead-letter queues: a queue named `x.dlq` cannot use
    /// [`DeadLetter::Default`], which would derive `x.dlq.dlq` and so on without end; it must
    /// name its dead-letter queue or disable dead-lettering.
    pub fn dead_letter_target(&self, queue: &Name) -> Result<Option<Name>> {
        match &self.dead_letter {
            DeadLetter::Disabled | DeadLetter::Topic(_) => Ok(None),
            DeadLetter::Named(target) => Ok(Some(target.clone())),
            DeadLetter::Default if queue.is_dead_letter() => {
                Err(BrokerError::DeadLetterQueueNeedsExplicitTarget {
                    queue: queue.clone(),
                })
            }
            DeadLetter::Default => queue.default_dead_letter().map(Some),
        }
    }

    /// Refuses a publish to `queue` with a priority above its top level
    /// ([`BrokerError::PriorityAboveLevels`]): a producer that asks for a level the queue
    /// does not have has mistaken the queue, and quietly taking it as the top level would
    /// let it overtake every message published at the levels the queue does declare.
    pub fn check_priority(&self, queue: &Name, priority: u8) -> Result<()> {
        if priority < self.priority_levels {
            return Ok(());
        }
        Err(BrokerError::PriorityAboveLevels {
            queue: queue.clone(),
            priority,
            levels: self.priority_levels,
        })
    }

    /// The level a stored message with `priority` is queued at. A publish to the queue has
    /// been checked ([`check_priority`](Self::check_priority)); a message that reaches it
    /// another way — a topic's publish, which cannot know each subscription's levels, or a
    /// redrive from a dead-letter queue with more levels — is queued at the top level.
    pub fn effective_priority(&self, priority: u8) -> u8 {
        priority.min(self.priority_levels.saturating_sub(1))
    }
}

impl Default for QueueSpec {
    fn default() -> Self {
        QueueSpec {
            retry: RetryPolicy::default(),
            dead_letter: DeadLetter::Default,
            dedup_window: Duration::from_secs(5 * 60),
            default_ttl: None,
            lease: Duration::from_secs(30),
            max_delay: Self::MAX_DELAY,
            priority_levels: 1,
            lower_priority_share: 0.1,
            ordering: OrderingMode::Shared,
            length_limit: LengthLimit::default(),
            durability: Durability::Fsync,
            dead_letter_retention: Duration::from_secs(14 * DAY),
            schema_subject: None,
        }
    }
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
