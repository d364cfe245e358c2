//! What an application declares — queues, topics and subscriptions with their delivery
//! policy — in one shape for every transport. Each transport maps a declaration onto its
//! engine's own mechanisms, or refuses it with [`Error::Unsupported`](crate::Error) when
//! it cannot keep a promise the declaration makes.

use std::time::Duration;

use crate::error::{Error, Result};

/// Retry backoff: `base × multiplier^(attempt-1)`, capped, then moved by up to
/// `± jitter` of itself so that failing consumers do not retry in lockstep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    pub base: Duration,
    pub cap: Duration,
    pub multiplier: f64,
    /// In `[0, 1]`.
    pub jitter: f64,
}

impl Default for Backoff {
    /// 1 s doubling to 5 min, 25 % jitter.
    fn default() -> Self {
        Backoff {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(300),
            multiplier: 2.0,
            jitter: 0.25,
        }
    }
}

impl Backoff {
    /// The wait before delivery `attempt + 1` after `attempt` failed (1-based), with jitter
    /// drawn from `unit` (a value in `[0, 1)`).
    pub fn delay(&self, attempt: u32, unit: f64) -> Duration {
        let exponent = attempt.saturating_sub(1).min(64) as i32;
        let raw = self.base.as_secs_f64() * self.multiplier.powi(exponent);
        let capped = raw.min(self.cap.as_secs_f64());
        let spread = capped * self.jitter * (2.0 * unit - 1.0);
        Duration::from_secs_f64((capped + spread).max(0.0))
    }

    fn validate(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.jitter) {
            return Err(Error::invalid("backoff.jitter", "must be within 0..=1"));
        }
        if !(self.multiplier >= 1.0 && self.multiplier.is_finite()) {
            return Err(Error::invalid("backoff.multiplier", "must be at least 1"));
        }
        if self.cap < self.base {
            return Err(Error::invalid("backoff.cap", "must not be below the base"));
        }
        Ok(())
    }
}

/// How messages are handed to the consumers of one queue or subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyOrdering {
    /// Competing consumers: any consumer may take any message.
    #[default]
    None,
    /// One message per key in flight at a time, in publish order; keys run in parallel.
    PerKey,
}

/// Everything about delivering from a queue or a subscription.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryPolicy {
    /// Deliveries (the first included) before a message is dead-lettered.
    pub max_deliveries: u32,
    pub backoff: Backoff,
    /// Keep messages that die in a dead-letter queue (`<name>.dlq` on Ferry). Off: they
    /// are dropped.
    pub dead_letter: bool,
    /// How long a delivery stays hidden from other consumers unless settled or extended.
    pub lease: Duration,
    /// TTL of messages published without one.
    pub default_ttl: Option<Duration>,
    /// The longest delay accepted on publish; zero refuses delayed messages.
    pub max_delay: Duration,
    /// Priority levels; 1 is plain FIFO.
    pub priority_levels: u8,
    pub ordering: KeyOrdering,
}

impl Default for DeliveryPolicy {
    /// Five deliveries, the default backoff, a dead-letter queue, a 30 s lease, delays up
    /// to 15 minutes, no priorities, no ordering.
    fn default() -> Self {
        DeliveryPolicy {
            max_deliveries: 5,
            backoff: Backoff::default(),
            dead_letter: true,
            lease: Duration::from_secs(30),
            default_ttl: None,
            max_delay: Duration::from_secs(15 * 60),
            priority_levels: 1,
            ordering: KeyOrdering::None,
        }
    }
}

impl DeliveryPolicy {
    pub fn validate(&self) -> Result<()> {
        if self.max_deliveries == 0 {
            return Err(Error::invalid("max_deliveries", "must be at least 1"));
        }
        if self.lease.is_zero() {
            return Err(Error::invalid("lease", "must be longer than zero"));
        }
        if self.priority_levels == 0 {
            return Err(Error::invalid(
                "priority_levels",
                "must be at least 1 (1 is plain FIFO)",
            ));
        }
        self.backoff.validate()
    }
}

/// A queue: competing consumers over one line of messages.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueDecl {
    pub name: String,
    pub delivery: DeliveryPolicy,
    /// Publishes repeating a dedup id (or an id) within this window are stored once.
    pub dedup_window: Option<Duration>,
    /// Most messages waiting; publishes beyond it are refused.
    pub max_length: Option<u64>,
}

impl QueueDecl {
    pub fn new(name: impl Into<String>) -> QueueDecl {
        QueueDecl {
            name: name.into(),
            delivery: DeliveryPolicy::default(),
            dedup_window: None,
            max_length: None,
        }
    }
    pub fn delivery(mut self, delivery: DeliveryPolicy) -> Self {
        self.delivery = delivery;
        self
    }
    pub fn dedup_window(mut self, window: Duration) -> Self {
        self.dedup_window = Some(window);
        self
    }
    pub fn max_length(mut self, max: u64) -> Self {
        self.max_length = Some(max);
        self
    }
    pub fn validate(&self) -> Result<()> {
        validate_name(&self.name)?;
        if self.max_length == Some(0) {
            return Err(Error::invalid("max_length", "must be at least 1"));
        }
        self.delivery.validate()
    }
}

/// A topic: a stream every subscription gets all of.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicDecl {
    pub name: String,
    /// Partitions, where the engine partitions (Ferry); 1 elsewhere.
    pub partitions: u32,
}

impl TopicDecl {
    pub fn new(name: impl Into<String>) -> TopicDecl {
        TopicDecl {
            name: name.into(),
            partitions: 1,
        }
    }
    pub fn validate(&self) -> Result<()> {
        validate_name(&self.name)?;
        if self.partitions == 0 {
            return Err(Error::invalid("partitions", "must be at least 1"));
        }
        Ok(())
    }

    /// Refuses a partitioned topic on `transport`, an engine whose topic is one log (`why`
    /// says how it is kept instead).
    #[cfg(any(feature = "nats", feature = "amqp", feature = "sqs"))]
    pub(crate) fn unpartitioned(&self, transport: &'static str, why: &str) -> Result<()> {
        if self.partitions != 1 {
            return Err(Error::unsupported(transport, "partitions", why));
        }
        Ok(())
    }
}

/// A durable subscription: its own copy of everything published to `topic` from the
/// moment it is declared, delivered like a queue.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscriptionDecl {
    pub topic: String,
    pub name: String,
    pub delivery: DeliveryPolicy,
}

impl SubscriptionDecl {
    pub fn new(topic: impl Into<String>, name: impl Into<String>) -> SubscriptionDecl {
        SubscriptionDecl {
            topic: topic.into(),
            name: name.into(),
            delivery: DeliveryPolicy::default(),
        }
    }
    pub fn delivery(mut self, delivery: DeliveryPolicy) -> Self {
        self.delivery = delivery;
        self
    }
    pub fn validate(&self) -> Result<()> {
        validate_name(&self.topic)?;
        validate_name(&self.name)?;
        self.delivery.validate()
    }
}

/// Names every transport can carry: 1–200 of `[A-Za-z0-9._-]`, not starting with `.` or
/// `-`, not ending in `.dlq` (those are dead-letter queues).
pub fn validate_name(name: &str) -> Result<()> {
    let bad = |problem: &str| Err(Error::invalid(format!("name `{name}`"), problem));
    if name.is_empty() || name.len() > 200 {
        return bad("must be 1 to 200 characters");
    }
    // A leading `.` would make a hidden file, a leading `-` an option; a leading `_` is
    // neither (and Kafka allows it).
    if name.starts_with(['.', '-']) {
        return bad("must not start with `.` or `-`");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return bad("may hold only letters, digits, `.`, `_` and `-`");
    }
    // The embedded broker's own rules, checked here for every transport so that a name one
    // transport refuses is refused by all of them.
    if name.contains("..") {
        return bad("must not hold `..`; use a single `.` between parts");
    }
    if name.ends_with('.') {
        return bad("must not end with `.`");
    }
    if name.ends_with(".dlq") {
        return bad("`.dlq` names are dead-letter queues, made by the transport");
    }
    Ok(())
}

/// Where a publisher sends.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Destination {
    Queue(String),
    Topic(String),
}

impl Destination {
    pub fn queue(name: impl Into<String>) -> Destination {
        Destination::Queue(name.into())
    }
    pub fn topic(name: impl Into<String>) -> Destination {
        Destination::Topic(name.into())
    }
    pub fn name(&self) -> &str {
        match self {
            Destination::Queue(name) | Destination::Topic(name) => name,
        }
    }
}

/// What a consumer reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    Queue(String),
    Subscription {
        topic: String,
        name: String,
    },
    /// The dead letters of a queue or subscription.
    DeadLetters(Box<Source>),
}

impl Source {
    pub fn queue(name: impl Into<String>) -> Source {
        Source::Queue(name.into())
    }
    pub fn subscription(topic: impl Into<String>, name: impl Into<String>) -> Source {
        Source::Subscription {
            topic: topic.into(),
            name: name.into(),
        }
    }
    /// This source's dead letters.
    pub fn dead_letters(self) -> Source {
        match self {
            dlq @ Source::DeadLetters(_) => dlq,
            live => Source::DeadLetters(Box::new(live)),
        }
    }
    /// The queue or subscription name (of the origin, for dead letters).
    pub fn name(&self) -> &str {
        match self {
            Source::Queue(name) | Source::Subscription { name, .. } => name,
            Source::DeadLetters(origin) => origin.name(),
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Queue(name) => write!(f, "queue {name}"),
            Source::Subscription { topic, name } => write!(f, "subscription {topic}/{name}"),
            Source::DeadLetters(origin) => write!(f, "dead letters of {origin}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_caps_and_jitters_within_bounds() {
        let b = Backoff::default();
        assert_eq!(b.delay(1, 0.5), Duration::from_secs(1));
        assert_eq!(b.delay(3, 0.5), Duration::from_secs(4));
        assert_eq!(b.delay(30, 0.5), Duration::from_secs(300));
        assert_eq!(b.delay(1, 0.0), Duration::from_millis(750));
        assert!(b.delay(1, 0.999) < Duration::from_millis(1250));
    }

    #[test]
    fn names_and_settings_are_checked() {
        assert!(validate_name("orders.eu-1_x").is_ok());
        assert!(validate_name("_orders").is_ok());
        for bad in ["", ".x", "-x", "a b", "a/b", "orders.dlq", &"x".repeat(201)] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
        let mut q = QueueDecl::new("q");
        q.delivery.max_deliveries = 0;
        assert!(q.validate().is_err());
        let mut q = QueueDecl::new("q");
        q.delivery.backoff.jitter = 1.5;
        assert!(q.validate().is_err());
        assert!(QueueDecl::new("q").max_length(0).validate().is_err());
        assert!(QueueDecl::new("q").validate().is_ok());
    }
}
