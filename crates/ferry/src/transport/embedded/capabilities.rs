//! What the embedded broker offers: everything, natively.

use crate::capability::{Capabilities, Feature, Support};

pub fn capabilities() -> Capabilities {
    use Support::Native;
    Capabilities {
        transport: "embedded",
        table: [
            (
                Feature::CompetingConsumers,
                Native("leases on a shared queue"),
            ),
            (
                Feature::FanOut,
                Native("topics with durable subscriptions, each a queue of its own"),
            ),
            (
                Feature::Redelivery,
                Native("nack; the attempt count is durable"),
            ),
            (
                Feature::RetryDelay,
                Native("per-queue exponential backoff with jitter, or the nack's delay"),
            ),
            (
                Feature::DeadLetters,
                Native("`<name>.dlq` with reason, attempts, origin and last error"),
            ),
            (
                Feature::LeaseExpiry,
                Native("per-delivery lease, durable across restarts"),
            ),
            (Feature::LeaseExtension, Native("extend, journaled")),
            (Feature::Delays, Native("deliver-at timers, durable")),
            (
                Feature::Priorities,
                Native("up to 10 levels with a starvation guard"),
            ),
            (
                Feature::OrderingKeys,
                Native("key-shared queues; a poison key can be parked"),
            ),
            (
                Feature::Deduplication,
                Native("dedup id (or chosen id) window, rebuilt on open"),
            ),
            (
                Feature::Ttl,
                Native("per message or queue default; expired → DLQ"),
            ),
            (
                Feature::MaxLength,
                Native("max messages with reject-publish"),
            ),
            (
                Feature::StaleSettles,
                Native(
                    "a lease token that is no longer the current one is refused, and so is a settle of a message another delivery settled",
                ),
            ),
            (
                Feature::TemporaryQueues,
                Native(
                    "`tmp.` queues only their owner consumes: deleted by the requester's close, after an idle timeout, and by the broker's next open (the process they belong to has gone)",
                ),
            ),
        ],
    }
}
