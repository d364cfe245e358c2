//! How a queue or subscription delivers: attempts, backoff, order, dedup, expiry,
//! priorities, and the alerts that say when it falls behind.

use serde::{Deserialize, Serialize};

use super::units::Duration;

/// Ferry's delivery policy for one queue or subscription.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DeliveryPolicy {
    /// Deliveries before a message is dead-lettered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_deliveries: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ordering: Option<Ordering>,
    /// How long a repeated message id is dropped as a duplicate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dedup_window: Option<Duration>,
    /// How long a message may wait before it expires.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl: Option<Duration>,
    /// Priority levels (0 = none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priorities: Option<u8>,
}

/// The wait before redelivery: `min(initial × multiplier^attempt, max)` plus up to
/// `jitter × delay` at random.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Retry {
    pub initial: Duration,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multiplier: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<Duration>,
    /// The random share added to each delay, from 0 to 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<f64>,
}

/// Ordering of deliveries.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Ordering {
    pub mode: OrderingMode,
    /// When a message of a key dead-letters, hold that key's later messages until an
    /// operator unparks it, instead of delivering them out of order.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub park_failed_keys: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OrderingMode {
    /// Competing consumers, no order.
    Shared,
    /// One message in flight per key, parallel across keys.
    KeyShared,
    /// One consumer at a time, strict order.
    Exclusive,
}

/// Alert thresholds.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Alerts {
    /// Alert when the dead-letter queue holds more than this many messages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dlq_depth: Option<u64>,
    /// Alert when the oldest waiting message is older than this.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest_age: Option<Duration>,
    /// Alert when consumers are this far behind, in time: a count means nothing
    /// without the throughput.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lag: Option<Duration>,
}
