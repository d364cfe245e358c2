//! What a channel accepts.

use super::Rule;
use super::view::{channels, endpoints};
use crate::Severity;
use crate::format::{Broker, ByteSize};

/// FT013. Seed: backend guide Rules ("max message size: 1MB for Kafka, 256KB for SQS,
/// unlimited for RabbitMQ (practical: 10MB)") and Security ("DoS via large messages:
/// enforce max message size at broker level"); Production Considerations ("large
/// messages >1MB: store reference").
pub const MAX_MESSAGE_SIZE: Rule = Rule {
    id: "FT013",
    name: "max-message-size",
    severity: Severity::Error,
    summary: "every queue and topic sets a max message size its broker accepts",
    check: |topology, report| {
        for c in channels(topology) {
            let Some(size) = c.limits.and_then(|l| l.max_message_size) else {
                report.add(
                    &c.element,
                    c.line,
                    "sets no max message size: one huge message can stall every consumer",
                    "set `limits.max_message_size` (e.g. 256KiB; larger payloads go by reference)",
                );
                continue;
            };
            if let Some(limit) = broker_limit(c.broker)
                && size > limit
            {
                report.add(
                    &c.element,
                    c.line,
                    format!("max message size {size} is more than {:?} accepts ({limit})", c.broker),
                    format!("set `limits.max_message_size` to {limit} or less, and send larger payloads by reference"),
                );
            }
        }
    },
};

/// The largest message a broker takes, where it has a fixed one.
fn broker_limit(broker: Broker) -> Option<ByteSize> {
    match broker {
        Broker::Sqs | Broker::Sns => Some(ByteSize::from_bytes(256 * 1024)),
        // Kafka's default `message.max.bytes`, about 1 MiB.
        Broker::Kafka => Some(ByteSize::from_bytes(1 << 20)),
        Broker::Pubsub => Some(ByteSize::from_bytes(10_000_000)),
        // Configurable (Ferry, NATS, Redis) or unbounded (RabbitMQ): nothing to check.
        Broker::Ferry | Broker::Nats | Broker::Redis | Broker::Rabbitmq => None,
    }
}

/// The priority levels past which the seed warns of degradation.
const MAX_PRIORITIES: u8 = 8;

/// FT019. Seed: patterns guide Process step 2 ("set a maximum priority depth (8 levels
/// is a practical limit to avoid performance degradation in RabbitMQ)").
pub const PRIORITIES: Rule = Rule {
    id: "FT019",
    name: "priorities",
    severity: Severity::Warning,
    summary: "no more than 8 priority levels",
    check: |topology, report| {
        for e in endpoints(topology) {
            if let Some(levels) = e.delivery.and_then(|d| d.priorities)
                && levels > MAX_PRIORITIES
            {
                report.add(
                    &e.element,
                    e.line,
                    format!("has {levels} priority levels: past {MAX_PRIORITIES} the broker slows and low priorities starve"),
                    format!("set `delivery.priorities` to {MAX_PRIORITIES} or fewer"),
                );
            }
        }
    },
};

#[cfg(test)]
mod tests {
    use crate::rules::test_support::{clean_with, findings_of};

    const LIMITS: &str = "    limits: { max_message_size: 256KiB }\n";

    #[test]
    fn a_topic_without_a_max_message_size_is_an_error() {
        let yaml = clean_with(LIMITS, "");
        assert_eq!(
            findings_of(&yaml, "FT013"),
            [
                "topic ecommerce-order-events: sets no max message size: one huge message can stall every consumer"
            ]
        );
    }

    #[test]
    fn a_max_message_size_above_the_brokers_limit_is_an_error() {
        let yaml = clean_with(LIMITS, "    limits: { max_message_size: 1MiB }\n");
        assert_eq!(
            findings_of(&yaml, "FT013"),
            [
                "topic ecommerce-order-events: max message size 1MiB is more than Sns accepts (256KiB)"
            ]
        );
    }

    #[test]
    fn more_than_eight_priority_levels_is_a_warning() {
        let dedup = "          dedup_window: 5m\n";
        let yaml = clean_with(dedup, &format!("{dedup}          priorities: 10\n"));
        assert_eq!(
            findings_of(&yaml, "FT019"),
            [
                "subscription ecommerce-order-events/inventory-reservation.fifo: has 10 priority levels: \
              past 8 the broker slows and low priorities starve"
            ]
        );
        let yaml = clean_with(dedup, &format!("{dedup}          priorities: 8\n"));
        assert!(findings_of(&yaml, "FT019").is_empty());
    }
}
