//! What Kafka offers, and what the SDK adds on top.

use crate::capability::{Capabilities, Feature, Support};

pub(crate) const NAME: &str = "kafka";

pub fn capabilities() -> Capabilities {
    use Support::{Emulated, Native, No};
    Capabilities {
        transport: NAME,
        table: [
            (
                Feature::CompetingConsumers,
                Native(
                    "a queue is a topic (8 partitions unless the URL says `?partitions=`) read by \
                     one consumer group; each partition goes to one consumer. Acks commit, per \
                     partition, the lowest offset still unsettled, never past it: an ack above an \
                     unsettled delivery is committed once that one is settled, and a crash \
                     before then delivers it again",
                ),
            ),
            (
                Feature::FanOut,
                Native(
                    "a topic is a Kafka topic and each subscription a consumer group on it, \
                     starting at the topic's end when declared",
                ),
            ),
            (
                Feature::Redelivery,
                Emulated(
                    "nack publishes a copy with the attempt count raised to the source's retry \
                     topic for its delay (the first, `.retry-1s`, when there is none), then \
                     commits past the original",
                ),
            ),
            (
                Feature::RetryDelay,
                Emulated(
                    "retry topics on a delay ladder (`<name>.retry-1s`, `-5s`, `-30s`, `-2m`, \
                     `-10m`, `-1h`, `-6h`, `-24h`, those the policy can reach), each record \
                     carrying its due time; a consumer pauses a retry partition whose head is \
                     not due, so nothing is delivered early (a record may wait behind a later \
                     one of its rung); delays above 24 h are refused at declaration. On a queue \
                     with per-key ordering the consumer keeps the message and its key's later \
                     messages instead, and hands it out again when due",
                ),
            ),
            (
                Feature::DeadLetters,
                Emulated(
                    "a nack past `max_deliveries` or a reject publishes the message to \
                     `<name>.dlq` with its `ferry-dlq-*` metadata, then commits past it; on the \
                     wire the metadata headers are `x-ferry-dlq-*`, as Ferry's own Kafka \
                     listener reserves `ferry-*` headers",
                ),
            ),
            (
                Feature::LeaseExpiry,
                No(
                    "Kafka has no per-message lease: a delivery stays with its consumer until it \
                     is settled or the consumer goes; one dropped unsettled comes back when its \
                     partition is next read from the committed offset. When a rebalance takes \
                     a partition away, the consumer waits up to the lease for its deliveries to \
                     be settled, then lets them go to the next owner (settling them later is \
                     NotHeld)",
                ),
            ),
            (
                Feature::LeaseExtension,
                No("Kafka has no per-message lease to extend"),
            ),
            (
                Feature::Delays,
                Emulated(
                    "a delayed publish goes to the retry topic of its delay's rung with its due \
                     time, as a delayed retry does; refused on a queue with per-key ordering, \
                     where it would overtake its key's earlier messages",
                ),
            ),
            (
                Feature::Priorities,
                No("a Kafka partition is one log, read in order"),
            ),
            (
                Feature::OrderingKeys,
                Native(
                    "the key picks the partition; a consumer hands out one message per key at a \
                     time, keys in parallel. A nack keeps the key's later messages back until the \
                     retry, which this consumer holds (a retry held when the consumer goes starts \
                     again from attempt 1)",
                ),
            ),
            (
                Feature::Deduplication,
                No("Kafka's idempotent producer deduplicates retries of one producer session only"),
            ),
            (
                Feature::Ttl,
                No("Kafka drops records only at the topic's retention, silently"),
            ),
            (
                Feature::MaxLength,
                No("a Kafka topic has no length limit that refuses publishes"),
            ),
            (
                Feature::StaleSettles,
                No("without leases no delivery is taken over while held"),
            ),
            (
                Feature::TemporaryQueues,
                No("Kafka topics outlive the connection; nothing deletes them when it goes"),
            ),
        ],
    }
}
