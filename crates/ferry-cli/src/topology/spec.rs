//! A channel of the file as the server's specs: each setting the file gives written over a
//! base spec (the server's defaults for a new channel, the channel's current spec when it
//! is recreated, so that what the file does not manage is kept).

use ferry_client::proto as v1;
use ferry_topology::plan::{Channel, Setting, Value};

fn millis(value: &Value) -> Option<u64> {
    match value {
        Value::Duration(d) => Some(d.as_millis()),
        _ => None,
    }
}

fn count(value: &Value) -> Option<u64> {
    match value {
        Value::Count(n) => Some(*n),
        _ => None,
    }
}

fn ratio(value: &Value) -> Option<f64> {
    match value {
        Value::Ratio(r) => Some(*r),
        _ => None,
    }
}

fn text(value: &Value) -> Option<&str> {
    match value {
        Value::Text(t) => Some(t),
        _ => None,
    }
}

/// A queue's or subscription's delivery spec.
pub fn queue(channel: &Channel, mut spec: v1::QueueSpec) -> v1::QueueSpec {
    let mut retry = spec.retry.take().unwrap_or_default();
    let mut backoff = retry.backoff.take().unwrap_or_default();
    for (setting, value) in &channel.settings {
        match setting {
            Setting::MaxDeliveries => {
                retry.max_deliveries = count(value).map(|n| u32::try_from(n).unwrap_or(u32::MAX))
            }
            Setting::RetryInitial => backoff.base_ms = millis(value),
            Setting::RetryMultiplier => backoff.multiplier = ratio(value),
            Setting::RetryMax => backoff.cap_ms = millis(value),
            Setting::RetryJitter => backoff.jitter = ratio(value),
            Setting::Ordering => {
                spec.ordering = match text(value) {
                    Some("key-shared") => v1::OrderingMode::KeyShared,
                    Some("exclusive") => v1::OrderingMode::Exclusive,
                    _ => v1::OrderingMode::Shared,
                } as i32
            }
            Setting::DedupWindow => spec.dedup_window_ms = millis(value),
            Setting::Ttl => spec.default_ttl_ms = millis(value),
            Setting::Priorities => {
                spec.priority_levels = count(value).map(|n| u32::try_from(n).unwrap_or(u32::MAX))
            }
            Setting::MaxLength => {
                spec.length_limit.get_or_insert_default().max_messages = count(value)
            }
            Setting::DeadLetter => {
                spec.dead_letter = Some(v1::DeadLetter {
                    target: text(value).map(|q| v1::dead_letter::Target::Queue(q.to_owned())),
                })
            }
            Setting::DeadLetterRetention => spec.dead_letter_retention_ms = millis(value),
            // A topic's or a subscription's own, set in `topic` and `subscription`.
            Setting::Partitions | Setting::Retention | Setting::Filter | Setting::Topic => {}
        }
    }
    // A dead-letter queue keeps its dead letters: one of its own would only move them on,
    // which is why the server creates `<name>.dlq` the same way.
    if !channel.dead_letter_of.is_empty() && channel.dead_letter().is_none() {
        spec.dead_letter = Some(v1::DeadLetter {
            target: Some(v1::dead_letter::Target::Disabled(true)),
        });
    }
    retry.backoff = Some(backoff);
    spec.retry = Some(retry);
    spec
}

pub fn topic(channel: &Channel, mut spec: v1::TopicSpec) -> v1::TopicSpec {
    for (setting, value) in &channel.settings {
        match setting {
            Setting::Partitions => {
                spec.partitions = count(value).map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX))
            }
            Setting::Retention => {
                let retention = spec.retention.get_or_insert_default();
                retention.max_age_ms = millis(value);
                retention.unbounded_age = false;
            }
            _ => {}
        }
    }
    spec
}

pub fn subscription(channel: &Channel, mut spec: v1::SubscriptionSpec) -> v1::SubscriptionSpec {
    if let Some(topic) = channel.topic() {
        spec.topic = topic.to_owned();
    }
    if let Some(filter) = channel.settings.get(&Setting::Filter).and_then(text) {
        spec.filter = filter.to_owned();
    }
    spec.delivery = Some(queue(channel, spec.delivery.take().unwrap_or_default()));
    spec
}
