//! Queue, topic and subscription specs in JSON: the shapes of `ferry.v1`'s messages, with
//! enums as lower-case words (`"key_shared"`) instead of numbers. Every field may be left
//! out and takes the broker's default; an unknown field is refused, so a typo never
//! silently becomes a default. Requests go through `convert` like gRPC's, so both APIs
//! accept and refuse the same specs.

use ferry_proto::v1;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    Fsync,
    Interval,
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ordering {
    Shared,
    KeyShared,
    Exclusive,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overflow {
    RejectPublish,
    DropHead,
    DeadLetterHead,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Keyless {
    RoundRobin,
    StickyBatch,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Start {
    Now,
    Earliest,
}

/// `"derived"` (`<queue>.dlq`), `"disabled"`, `{"queue": "name"}`, or `{"topic": "name"}`
/// (dead letters published to that topic).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeadLetter {
    Derived,
    Disabled,
    Queue(String),
    Topic(String),
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Backoff {
    pub base_ms: Option<u64>,
    pub cap_ms: Option<u64>,
    pub multiplier: Option<f64>,
    pub jitter: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retry {
    pub max_deliveries: Option<u32>,
    pub backoff: Option<Backoff>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LengthLimit {
    pub max_messages: Option<u64>,
    pub max_bytes: Option<u64>,
    pub overflow: Option<Overflow>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueSpec {
    pub retry: Option<Retry>,
    pub dead_letter: Option<DeadLetter>,
    pub dedup_window_ms: Option<u64>,
    pub default_ttl_ms: Option<u64>,
    pub lease_ms: Option<u64>,
    pub max_delay_ms: Option<u64>,
    pub priority_levels: Option<u32>,
    pub lower_priority_share: Option<f64>,
    pub ordering: Option<Ordering>,
    pub length_limit: Option<LengthLimit>,
    pub durability: Option<Durability>,
    pub durability_interval_ms: Option<u64>,
    pub dead_letter_retention_ms: Option<u64>,
    /// The schema registry subject every publish must match; absent: none.
    pub schema_subject: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicRetention {
    pub max_age_ms: Option<u64>,
    #[serde(default)]
    pub unbounded_age: bool,
    pub max_bytes: Option<u64>,
    #[serde(default)]
    pub overrides_subscriptions: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicCompaction {
    pub tombstone_retention_ms: Option<u64>,
    pub min_lag_ms: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicSpec {
    pub partitions: Option<u32>,
    pub retention: Option<TopicRetention>,
    pub keyless: Option<Keyless>,
    pub durability: Option<Durability>,
    pub durability_interval_ms: Option<u64>,
    pub producer_state_window_ms: Option<u64>,
    /// Absent: no compaction; `{}`: compaction with its default settings.
    pub compaction: Option<TopicCompaction>,
    /// The schema registry subject every publish must match; absent: none.
    pub schema_subject: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubscriptionSpec {
    pub topic: String,
    #[serde(default)]
    pub filter: String,
    pub start: Option<Start>,
    pub delivery: Option<QueueSpec>,
}

fn durability(d: Option<Durability>) -> i32 {
    (match d {
        None => v1::Durability::Unspecified,
        Some(Durability::Fsync) => v1::Durability::Fsync,
        Some(Durability::Interval) => v1::Durability::Interval,
        Some(Durability::None) => v1::Durability::None,
    }) as i32
}

fn durability_from(v: i32) -> Option<Durability> {
    match v1::Durability::try_from(v).ok()? {
        v1::Durability::Unspecified => None,
        v1::Durability::Fsync => Some(Durability::Fsync),
        v1::Durability::Interval => Some(Durability::Interval),
        v1::Durability::None => Some(Durability::None),
    }
}

impl From<QueueSpec> for v1::QueueSpec {
    fn from(q: QueueSpec) -> v1::QueueSpec {
        v1::QueueSpec {
            retry: q.retry.map(|r| v1::RetryPolicy {
                max_deliveries: r.max_deliveries,
                backoff: r.backoff.map(|b| v1::Backoff {
                    base_ms: b.base_ms,
                    cap_ms: b.cap_ms,
                    multiplier: b.multiplier,
                    jitter: b.jitter,
                }),
            }),
            dead_letter: q.dead_letter.map(|d| v1::DeadLetter {
                target: Some(match d {
                    DeadLetter::Derived => v1::dead_letter::Target::Derived(true),
                    DeadLetter::Disabled => v1::dead_letter::Target::Disabled(true),
                    DeadLetter::Queue(name) => v1::dead_letter::Target::Queue(name),
                    DeadLetter::Topic(name) => v1::dead_letter::Target::Topic(name),
                }),
            }),
            dedup_window_ms: q.dedup_window_ms,
            default_ttl_ms: q.default_ttl_ms,
            lease_ms: q.lease_ms,
            max_delay_ms: q.max_delay_ms,
            priority_levels: q.priority_levels,
            lower_priority_share: q.lower_priority_share,
            ordering: (match q.ordering {
                None => v1::OrderingMode::Unspecified,
                Some(Ordering::Shared) => v1::OrderingMode::Shared,
                Some(Ordering::KeyShared) => v1::OrderingMode::KeyShared,
                Some(Ordering::Exclusive) => v1::OrderingMode::Exclusive,
            }) as i32,
            length_limit: q.length_limit.map(|l| v1::LengthLimit {
                max_messages: l.max_messages,
                max_bytes: l.max_bytes,
                overflow: (match l.overflow {
                    None => v1::OverflowPolicy::Unspecified,
                    Some(Overflow::RejectPublish) => v1::OverflowPolicy::RejectPublish,
                    Some(Overflow::DropHead) => v1::OverflowPolicy::DropHead,
                    Some(Overflow::DeadLetterHead) => v1::OverflowPolicy::DeadLetterHead,
                }) as i32,
            }),
            durability: durability(q.durability),
            durability_interval_ms: q.durability_interval_ms,
            dead_letter_retention_ms: q.dead_letter_retention_ms,
            schema_subject: q.schema_subject,
        }
    }
}

impl From<v1::QueueSpec> for QueueSpec {
    fn from(q: v1::QueueSpec) -> QueueSpec {
        QueueSpec {
            retry: q.retry.map(|r| Retry {
                max_deliveries: r.max_deliveries,
                backoff: r.backoff.map(|b| Backoff {
                    base_ms: b.base_ms,
                    cap_ms: b.cap_ms,
                    multiplier: b.multiplier,
                    jitter: b.jitter,
                }),
            }),
            dead_letter: q.dead_letter.and_then(|d| d.target).map(|t| match t {
                v1::dead_letter::Target::Derived(_) => DeadLetter::Derived,
                v1::dead_letter::Target::Disabled(_) => DeadLetter::Disabled,
                v1::dead_letter::Target::Queue(name) => DeadLetter::Queue(name),
                v1::dead_letter::Target::Topic(name) => DeadLetter::Topic(name),
            }),
            dedup_window_ms: q.dedup_window_ms,
            default_ttl_ms: q.default_ttl_ms,
            lease_ms: q.lease_ms,
            max_delay_ms: q.max_delay_ms,
            priority_levels: q.priority_levels,
            lower_priority_share: q.lower_priority_share,
            ordering: match v1::OrderingMode::try_from(q.ordering).ok() {
                Some(v1::OrderingMode::Shared) => Some(Ordering::Shared),
                Some(v1::OrderingMode::KeyShared) => Some(Ordering::KeyShared),
                Some(v1::OrderingMode::Exclusive) => Some(Ordering::Exclusive),
                _ => None,
            },
            length_limit: q.length_limit.map(|l| LengthLimit {
                max_messages: l.max_messages,
                max_bytes: l.max_bytes,
                overflow: match v1::OverflowPolicy::try_from(l.overflow).ok() {
                    Some(v1::OverflowPolicy::RejectPublish) => Some(Overflow::RejectPublish),
                    Some(v1::OverflowPolicy::DropHead) => Some(Overflow::DropHead),
                    Some(v1::OverflowPolicy::DeadLetterHead) => Some(Overflow::DeadLetterHead),
                    _ => None,
                },
            }),
            durability: durability_from(q.durability),
            durability_interval_ms: q.durability_interval_ms,
            dead_letter_retention_ms: q.dead_letter_retention_ms,
            schema_subject: q.schema_subject,
        }
    }
}

impl From<TopicSpec> for v1::TopicSpec {
    fn from(t: TopicSpec) -> v1::TopicSpec {
        v1::TopicSpec {
            partitions: t.partitions.unwrap_or(0),
            retention: t.retention.map(|r| v1::TopicRetention {
                max_age_ms: r.max_age_ms,
                unbounded_age: r.unbounded_age,
                max_bytes: r.max_bytes,
                overrides_subscriptions: r.overrides_subscriptions,
            }),
            keyless: (match t.keyless {
                None => v1::KeylessPlacement::Unspecified,
                Some(Keyless::RoundRobin) => v1::KeylessPlacement::RoundRobin,
                Some(Keyless::StickyBatch) => v1::KeylessPlacement::StickyBatch,
            }) as i32,
            durability: durability(t.durability),
            durability_interval_ms: t.durability_interval_ms,
            producer_state_window_ms: t.producer_state_window_ms,
            compaction: t.compaction.map(|c| v1::TopicCompaction {
                tombstone_retention_ms: c.tombstone_retention_ms,
                min_lag_ms: c.min_lag_ms,
            }),
            schema_subject: t.schema_subject,
        }
    }
}

impl From<v1::TopicSpec> for TopicSpec {
    fn from(t: v1::TopicSpec) -> TopicSpec {
        TopicSpec {
            partitions: Some(t.partitions),
            retention: t.retention.map(|r| TopicRetention {
                max_age_ms: r.max_age_ms,
                unbounded_age: r.unbounded_age,
                max_bytes: r.max_bytes,
                overrides_subscriptions: r.overrides_subscriptions,
            }),
            keyless: match v1::KeylessPlacement::try_from(t.keyless).ok() {
                Some(v1::KeylessPlacement::RoundRobin) => Some(Keyless::RoundRobin),
                Some(v1::KeylessPlacement::StickyBatch) => Some(Keyless::StickyBatch),
                _ => None,
            },
            durability: durability_from(t.durability),
            durability_interval_ms: t.durability_interval_ms,
            producer_state_window_ms: t.producer_state_window_ms,
            compaction: t.compaction.map(|c| TopicCompaction {
                tombstone_retention_ms: c.tombstone_retention_ms,
                min_lag_ms: c.min_lag_ms,
            }),
            schema_subject: t.schema_subject,
        }
    }
}

impl From<SubscriptionSpec> for v1::SubscriptionSpec {
    fn from(s: SubscriptionSpec) -> v1::SubscriptionSpec {
        v1::SubscriptionSpec {
            topic: s.topic,
            filter: s.filter,
            start: (match s.start {
                None => v1::SubscriptionStart::Unspecified,
                Some(Start::Now) => v1::SubscriptionStart::Now,
                Some(Start::Earliest) => v1::SubscriptionStart::Earliest,
            }) as i32,
            delivery: s.delivery.map(Into::into),
        }
    }
}

impl From<v1::SubscriptionSpec> for SubscriptionSpec {
    fn from(s: v1::SubscriptionSpec) -> SubscriptionSpec {
        SubscriptionSpec {
            topic: s.topic,
            filter: s.filter,
            start: match v1::SubscriptionStart::try_from(s.start).ok() {
                Some(v1::SubscriptionStart::Earliest) => Some(Start::Earliest),
                Some(v1::SubscriptionStart::Now) => Some(Start::Now),
                _ => None,
            },
            delivery: s.delivery.map(Into::into),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert;

    #[test]
    fn a_queue_spec_survives_json_and_back() {
        let mut spec = ferry_broker::QueueSpec {
            ordering: ferry_broker::OrderingMode::KeyShared,
            ..Default::default()
        };
        spec.retry.max_deliveries = 3;
        spec.dead_letter = ferry_broker::DeadLetter::Named(ferry_broker::Name::new("g").unwrap());
        let json: QueueSpec = convert::queue_spec_to_proto(&spec).into();
        let text = serde_json::to_string(&json).unwrap();
        let back: QueueSpec = serde_json::from_str(&text).unwrap();
        let broker = convert::queue_spec(Some(back.into()), Default::default()).unwrap();
        assert_eq!(broker, spec);
    }

    #[test]
    fn a_dead_letter_topic_is_spelled_as_a_topic_in_json() {
        let spec = ferry_broker::QueueSpec {
            dead_letter: ferry_broker::DeadLetter::Topic(ferry_broker::Name::new("g").unwrap()),
            ..Default::default()
        };
        let json: QueueSpec = convert::queue_spec_to_proto(&spec).into();
        let text = serde_json::to_string(&json).unwrap();
        assert!(text.contains(r#""dead_letter":{"topic":"g"}"#), "{text}");
        let back: QueueSpec = serde_json::from_str(&text).unwrap();
        let broker = convert::queue_spec(Some(back.into()), Default::default()).unwrap();
        assert_eq!(broker, spec);
    }

    #[test]
    fn a_typo_in_a_spec_is_refused() {
        let typo = serde_json::from_str::<QueueSpec>(r#"{"lease_msec": 5}"#);
        assert!(typo.unwrap_err().to_string().contains("lease_msec"));
    }
}
