//! The file's channels checked by the broker's own rules before anything is sent: the
//! server has no transaction over several channels, so a value it would refuse at the
//! fifth create must stop the apply before the first. Each channel is checked as the
//! server would create it: its defaults with the file's settings over them.

use std::time::Duration;

use ferry_broker::{Name, OrderingMode, QueueSpec, SubscriptionSpec, TopicSpec};
use ferry_topology::plan::{Channel, Kind, Plan, Setting, Value};

/// Every channel of the file, or the first error naming its channel.
pub fn check(plan: &Plan) -> anyhow::Result<()> {
    for channel in plan.desired.iter() {
        check_channel(channel)
            .map_err(|e| anyhow::anyhow!("{} {}: {e}", channel.kind, channel.name))?;
    }
    Ok(())
}

fn check_channel(channel: &Channel) -> ferry_broker::Result<()> {
    Name::new(channel.name.as_str())?;
    // The dead-letter queue's name is a queue's; that it exists is the server's to check,
    // after the plan has created it.
    if let Some(target) = channel.dead_letter() {
        Name::new(target)?;
    }
    match channel.kind {
        Kind::Topic => topic(channel).validate(),
        Kind::Queue => queue(channel, QueueSpec::default()).validate(),
        Kind::Subscription => {
            let mut spec = SubscriptionSpec::new(Name::new(channel.topic().unwrap_or_default())?);
            spec.delivery = queue(channel, spec.delivery.clone());
            spec.validate()
        }
    }
}

fn duration(value: &Value) -> Duration {
    match value {
        Value::Duration(d) => Duration::from_millis(d.as_millis()),
        _ => Duration::ZERO,
    }
}

fn count(value: &Value) -> u64 {
    match value {
        Value::Count(n) => *n,
        _ => 0,
    }
}

fn queue(channel: &Channel, mut spec: QueueSpec) -> QueueSpec {
    for (setting, value) in &channel.settings {
        match (setting, value) {
            (Setting::MaxDeliveries, _) => {
                spec.retry.max_deliveries = u32::try_from(count(value)).unwrap_or(u32::MAX)
            }
            (Setting::RetryInitial, _) => spec.retry.backoff.base = duration(value),
            (Setting::RetryMax, _) => spec.retry.backoff.cap = duration(value),
            (Setting::RetryMultiplier, Value::Ratio(m)) => spec.retry.backoff.multiplier = *m,
            (Setting::RetryJitter, Value::Ratio(j)) => spec.retry.backoff.jitter = *j,
            (Setting::Ordering, Value::Text(mode)) => {
                spec.ordering = match mode.as_str() {
                    "key-shared" => OrderingMode::KeyShared,
                    "exclusive" => OrderingMode::Exclusive,
                    _ => OrderingMode::Shared,
                }
            }
            (Setting::DedupWindow, _) => spec.dedup_window = duration(value),
            (Setting::Ttl, _) => spec.default_ttl = Some(duration(value)),
            (Setting::Priorities, _) => {
                spec.priority_levels = u8::try_from(count(value)).unwrap_or(u8::MAX)
            }
            (Setting::MaxLength, _) => spec.length_limit.max_messages = Some(count(value)),
            (Setting::DeadLetterRetention, _) => spec.dead_letter_retention = duration(value),
            _ => {}
        }
    }
    spec
}

fn topic(channel: &Channel) -> TopicSpec {
    let mut spec = TopicSpec::default();
    for (setting, value) in &channel.settings {
        match setting {
            Setting::Partitions => spec.partitions = u32::try_from(count(value)).unwrap_or(0),
            Setting::Retention => spec.retention.max_age = Some(duration(value)),
            _ => {}
        }
    }
    spec
}

#[cfg(test)]
mod tests {
    use ferry_topology::Topology;
    use ferry_topology::plan::{Options, plan};

    use super::*;

    fn checked(body: &str) -> anyhow::Result<()> {
        let file = Topology::from_yaml(&format!("version: 1\nname: t\n{body}")).unwrap();
        let empty = Topology::from_yaml("version: 1\nname: t\n").unwrap();
        check(&plan(&file, &empty, Options::default()).unwrap())
    }

    #[test]
    fn a_value_the_broker_refuses_is_an_error_naming_the_channel() {
        let error = checked(
            "queues:\n  - name: ok\n    broker: ferry\n    type: queue\n  - name: jobs\n    broker: ferry\n    type: queue\n    delivery: { retry: { initial: 1s, jitter: 1.5 } }\n",
        )
        .unwrap_err();
        assert!(error.to_string().starts_with("queue jobs: "), "{error}");
        assert!(error.to_string().contains("jitter"), "{error}");
        let error = checked(
            "topics:\n  - name: t\n    broker: ferry\n    type: topic\n    partitions: 5000\n",
        )
        .unwrap_err();
        assert!(error.to_string().starts_with("topic t: "), "{error}");
    }

    #[test]
    fn the_ecommerce_design_passes() {
        let file = include_str!("../../../../examples/topology/ecommerce.yaml");
        let file = Topology::from_yaml(file).unwrap();
        let empty = Topology::from_yaml("version: 1\nname: t\n").unwrap();
        check(&plan(&file, &empty, Options::default()).unwrap()).unwrap();
    }
}
