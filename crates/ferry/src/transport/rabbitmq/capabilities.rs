//! What the RabbitMQ transport offers on RabbitMQ 3.10 without plugins: quorum queues do
//! most of it; leases, retry delays and the dead-letter metadata are the SDK's work.

use crate::capability::{Capabilities, Feature, Support};

pub fn capabilities() -> Capabilities {
    use Support::{Emulated, Native, No};
    Capabilities {
        transport: "rabbitmq",
        table: [
            (
                Feature::CompetingConsumers,
                Native(
                    "consumers share one durable quorum queue (basic.consume with a prefetch, \
                     manual acks), subscribed only while they fetch",
                ),
            ),
            (
                Feature::FanOut,
                Native(
                    "a topic is a durable fanout exchange; a subscription is a quorum queue \
                     bound to it",
                ),
            ),
            (
                Feature::Redelivery,
                Native(
                    "nack requeues; the attempt is the quorum queue's x-delivery-count + 1, plus \
                     the deliveries carried in `ferry-attempts` across a delayed retry",
                ),
            ),
            (
                Feature::RetryDelay,
                Emulated(
                    "the SDK republishes to a quorum retry queue `<name>:retry:<ms>` whose \
                     message TTL dead-letters back into the queue (delays rounded up to a \
                     ladder ≤ 25 % coarser, never early), then acks the original",
                ),
            ),
            (
                Feature::DeadLetters,
                Emulated(
                    "`<name>.dlq` quorum queue; on the last nack or a reject the SDK republishes \
                     the message there with its `ferry-dlq-*` metadata, then acks it; the \
                     engine's x-delivery-limit dead-letters into the same queue as a safety net \
                     for consumers that die (reason read from x-death)",
                ),
            ),
            (
                Feature::LeaseExpiry,
                Emulated(
                    "RabbitMQ has no visibility timeout: a client-side timer per delivery \
                     requeues it when the lease ends, after the consumer, if it is not \
                     fetching, cancelled its subscription (so the delivery goes to one that \
                     is); a consumer process that dies closes its channel and RabbitMQ \
                     requeues at once. The server's consumer_timeout (30 min by default) \
                     bounds any lease",
                ),
            ),
            (
                Feature::LeaseExtension,
                Emulated("extend pushes the client-side timer back"),
            ),
            (
                Feature::Delays,
                Emulated(
                    "queues only: a quorum delay queue `<name>:delay:<ms>` whose message TTL \
                     dead-letters into the queue (rounded up, never early); a delayed publish \
                     to a topic is refused",
                ),
            ),
            (
                Feature::Priorities,
                No(
                    "quorum queues have no priorities on RabbitMQ 3.10, and classic queues would \
                     give up replication and delivery counts",
                ),
            ),
            (
                Feature::OrderingKeys,
                No(
                    "RabbitMQ has no per-key ordering across competing consumers without the \
                     consistent-hash plugin and one queue per consumer",
                ),
            ),
            (
                Feature::Deduplication,
                No("RabbitMQ keeps no dedup window without a plugin"),
            ),
            (
                Feature::Ttl,
                Native(
                    "a message's own TTL is its expiration, which RabbitMQ enforces (dead-lettered \
                     to `<name>.dlq` with reason `expired`, read from x-death); the declared \
                     default_ttl is checked by the SDK as each message without a TTL of its own \
                     is delivered (x-message-ttl would override longer TTLs of messages), so \
                     such a message waits in the queue, counted in its length, until a consumer \
                     reads it",
                ),
            ),
            (
                Feature::MaxLength,
                Native(
                    "x-max-length (the limit - 1: a quorum queue refuses only once over it) \
                     with x-overflow reject-publish: the confirm is a nack",
                ),
            ),
            (
                Feature::StaleSettles,
                Emulated(
                    "the client-side lease timer marks a delivery expired when it requeues it; a later settle of it is refused",
                ),
            ),
            (
                Feature::TemporaryQueues,
                Native(
                    "an exclusive, auto-delete classic queue: deleted with the AMQP connection that declared it, or unused for its idle timeout (x-expires)",
                ),
            ),
        ],
    }
}
