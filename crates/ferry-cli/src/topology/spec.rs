//! A channel of the file as the server's specs: each setting the file gives written over a
//! base spec (the server's defaults for a new channel, the channel's current spec when it
//! is recreated, so that what the file does not manage is kept).

use ferry_client::proto as v1;
use ferry_topology::plan::{Channel, Setting, Value};

fn millis(value: &Value) -> Option<u64> {
    value.duration().map(|d| d.as_millis())
}

/// A queue's or subscription's delivery spec.
pub fn queue(channel: &Channel, mut spec: v1::QueueSpec) -> v1::QueueSpec {
    let mut retry = spec.retry.take().unwrap_or_default();
    let mut backoff = retry.backoff.take().unwrap_or_default();
    for (setting, value) in &channel.settings {
        match setting {
            Setting::MaxDeliveries => {
                retry.max_deliveries = value.count().map(|n| u32::try_from(n).unwrap_or(u32::MAX))
            }
            Setting::RetryInitial => backoff.base_ms = millis(value),
            Setting::RetryMultiplier => backoff.multiplier = value.ratio(),
            Setting::RetryMax => backoff.cap_ms = millis(value),
            Setting::RetryJitter => backoff.jitter = value.ratio(),
            Setting::Ordering => {
                spec.ordering = match value.text() {
                    Some("key-shared") => v1::OrderingMode::KeyShared,
                    Some("exclusive") => v1::OrderingMode::Exclusive,
                    _ => v1::OrderingMode::Shared,
                } as i32
            }
            Setting::DedupWindow => spec.dedup_window_ms = millis(value),
            Setting::Ttl => spec.default_ttl_ms = millis(value),
            Setting::Priorities => {
                spec.priority_levels = value.count().map(|n| u32::try_from(n).unwrap_or(u32::MAX))
            }
            Setting::MaxLength => {
                spec.length_limit.get_or_insert_default().max_messages = value.count()
            }
            Setting::DeadLetter => {
                spec.dead_letter = Some(v1::DeadLetter {
                    target: value
                        .text()
                        .map(|q| v1::dead_letter::Target::Queue(q.to_owned())),
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
                spec.partitions = value
                    .count()
                    .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX))
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
    if let Some(filter) = channel.settings.get(&Setting::Filter).and_then(Value::text) {
        spec.filter = filter.to_owned();
    }
    spec.delivery = Some(queue(channel, spec.delivery.take().unwrap_or_default()));
    spec
}

#[cfg(test)]
mod tests {
    use ferry_topology::Topology;
    use ferry_topology::plan::{Channels, Kind};

    use super::*;

    fn channels(yaml: &str) -> Channels {
        let topology = Topology::from_yaml(&format!("version: 1\nname: t\n{yaml}")).unwrap();
        Channels::of(&topology).unwrap()
    }

    #[test]
    fn a_recreated_queue_keeps_what_the_file_does_not_manage() {
        let c = channels(
            "queues:\n  - name: q\n    broker: ferry\n    type: queue\n    delivery: { max_deliveries: 7, retry: { initial: 2s, jitter: 0.1 }, ordering: { mode: exclusive }, ttl: 1h }\n",
        );
        let current = v1::QueueSpec {
            lease_ms: Some(45_000),
            retry: Some(v1::RetryPolicy {
                max_deliveries: Some(5),
                backoff: Some(v1::Backoff {
                    cap_ms: Some(60_000),
                    ..Default::default()
                }),
            }),
            ..Default::default()
        };
        let spec = queue(c.get(Kind::Queue, "q").unwrap(), current);
        assert_eq!(spec.lease_ms, Some(45_000), "not managed: kept");
        let retry = spec.retry.unwrap();
        assert_eq!(retry.max_deliveries, Some(7));
        let backoff = retry.backoff.unwrap();
        assert_eq!(
            (backoff.base_ms, backoff.cap_ms, backoff.jitter),
            (Some(2000), Some(60_000), Some(0.1))
        );
        assert_eq!(spec.ordering, v1::OrderingMode::Exclusive as i32);
        assert_eq!(spec.default_ttl_ms, Some(3_600_000));
    }

    #[test]
    fn a_dead_letter_queue_of_the_file_keeps_its_dead_letters() {
        let c = channels(
            "queues:\n  - name: q\n    broker: ferry\n    type: queue\n    dead_letter: { name: q-dead, retention: 3d }\n",
        );
        let sender = queue(c.get(Kind::Queue, "q").unwrap(), v1::QueueSpec::default());
        assert_eq!(
            sender.dead_letter.unwrap().target,
            Some(v1::dead_letter::Target::Queue("q-dead".into()))
        );
        assert_eq!(sender.dead_letter_retention_ms, Some(3 * 86_400_000));
        let dlq = queue(
            c.get(Kind::Queue, "q-dead").unwrap(),
            v1::QueueSpec::default(),
        );
        assert_eq!(
            dlq.dead_letter.unwrap().target,
            Some(v1::dead_letter::Target::Disabled(true))
        );
    }

    #[test]
    fn a_topic_and_a_subscription_carry_their_own_settings() {
        let c = channels(
            "topics:\n  - name: t\n    broker: kafka\n    type: topic\n    partitions: 6\n    retention: 2d\n    subscriptions:\n      - name: s\n        filter: subject ~ a.*\n        delivery: { priorities: 3 }\n",
        );
        let unbounded = v1::TopicSpec {
            retention: Some(v1::TopicRetention {
                unbounded_age: true,
                ..Default::default()
            }),
            ..Default::default()
        };
        let t = topic(c.get(Kind::Topic, "t").unwrap(), unbounded);
        assert_eq!(t.partitions, 6);
        let retention = t.retention.unwrap();
        assert_eq!(
            (retention.max_age_ms, retention.unbounded_age),
            (Some(2 * 86_400_000), false)
        );
        let s = subscription(c.get(Kind::Subscription, "s").unwrap(), Default::default());
        assert_eq!(
            (s.topic.as_str(), s.filter.as_str()),
            ("t", "subject ~ a.*")
        );
        assert_eq!(s.delivery.unwrap().priority_levels, Some(3));
    }
}
