//! What NATS JetStream 2.9 offers through this transport, and what the SDK adds on top.

use crate::capability::{Capabilities, Feature, Support};

pub fn capabilities() -> Capabilities {
    use Support::{Emulated, Native, No};
    Capabilities {
        transport: "NATS JetStream",
        table: [
            (
                Feature::CompetingConsumers,
                Native("one durable pull consumer per queue, shared by every SDK consumer"),
            ),
            (
                Feature::FanOut,
                Native(
                    "a topic is an interest stream; each subscription a durable consumer on it, from its creation on",
                ),
            ),
            (
                Feature::Redelivery,
                Native("`Nak`; the attempt is the engine's delivery count"),
            ),
            (
                Feature::RetryDelay,
                Native("`Nak` with a delay: the nack's, or the SDK's backoff for the attempt"),
            ),
            (
                Feature::DeadLetters,
                Emulated(
                    "JetStream 2.9 only emits an advisory at MaxDeliver and keeps the message for ever, so MaxDeliver is unlimited and the SDK counts deliveries: on the last nack, a reject, or a delivery fetched past max_deliveries (the last lease ran out) it republishes to a dead-letter stream with the `ferry-dlq-*` headers, then acks; a republish that fails hands the delivery back to be dead-lettered when it comes again, so none is stranded",
                ),
            ),
            (Feature::LeaseExpiry, Native("AckWait is the lease")),
            (
                Feature::LeaseExtension,
                Emulated(
                    "an in-progress ack restarts the full AckWait; for longer extensions the SDK repeats it until the time asked for",
                ),
            ),
            (
                Feature::Delays,
                Emulated(
                    "2.9 has no scheduled delivery: delayed messages wait in a holding stream, and the queue's consumers move each into the queue once due (a fresh message there, so its attempts start at 1); queues only — a delayed publish to a topic is refused",
                ),
            ),
            (
                Feature::Priorities,
                No(
                    "JetStream 2.9 delivers each stream in order and has no priority levels; polling a stream per level highest-first would order only within one fetch, a weaker promise than Ferry's",
                ),
            ),
            (
                Feature::OrderingKeys,
                No(
                    "2.9 has no key-shared delivery: MaxAckPending 1 would serialise every key, not one in flight per key",
                ),
            ),
            (
                Feature::Deduplication,
                Native(
                    "`Nats-Msg-Id` (the dedup id, else the message id) within the queue's window, its stream's duplicate window (100 ms at least); a topic's window is the engine's default two minutes",
                ),
            ),
            (
                Feature::Ttl,
                No(
                    "2.9 has no per-message TTL (2.11 added it), and a stream's MaxAge deletes messages silently instead of dead-lettering them",
                ),
            ),
            (
                Feature::MaxLength,
                Native(
                    "the work-queue stream's MaxMsgs with DiscardNew refuses publishes beyond it (`Full`); a delayed message counts once it is due and moved in, and waits while the queue is full",
                ),
            ),
            (
                Feature::StaleSettles,
                No(
                    "JetStream takes an ack, nak or term of an earlier delivery as it takes the current one's, so the SDK cannot tell that a delivery was taken over; the engine ignores the late settle",
                ),
            ),
            (
                Feature::TemporaryQueues,
                No(
                    "JetStream binds no stream to a connection; request/reply declares a named reply queue its requester deletes on close",
                ),
            ),
        ],
    }
}
