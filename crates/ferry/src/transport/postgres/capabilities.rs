//! What the PostgreSQL transport offers: leases, delays, priorities and ordering are
//! columns and clauses of one messages table; fan-out, dead letters, TTL and the length
//! limit are done by the transport inside the engine's transactions.

use crate::capability::{Capabilities, Feature, Support};

pub fn capabilities() -> Capabilities {
    use Support::{Emulated, Native, No};
    Capabilities {
        transport: "postgres",
        table: [
            (
                Feature::CompetingConsumers,
                Native(
                    "`SELECT … FOR UPDATE SKIP LOCKED` on one messages table; a lease is \
                     visible_at in the future and a fresh token",
                ),
            ),
            (
                Feature::FanOut,
                Emulated(
                    "a topic is a row; a publish inserts one copy per subscription in one \
                     transaction",
                ),
            ),
            (
                Feature::Redelivery,
                Native("nack clears the lease; the row's read count is the attempt"),
            ),
            (
                Feature::RetryDelay,
                Native("visible_at = now + the nack's delay or the policy's backoff"),
            ),
            (
                Feature::DeadLetters,
                Emulated(
                    "moved to `<name>.dlq` rows with the `ferry-dlq-*` headers in the \
                     nack's or reject's transaction",
                ),
            ),
            (
                Feature::LeaseExpiry,
                Native("visible_at passes and the row is taken again (polled every 250 ms)"),
            ),
            (
                Feature::LeaseExtension,
                Native("visible_at moved, guarded by the lease token"),
            ),
            (Feature::Delays, Native("visible_at set at publish")),
            (
                Feature::Priorities,
                Native(
                    "ORDER BY priority, then publish order; a publish to a queue above its \
                     declared levels is refused as invalid, a topic's publish is queued at each \
                     subscription's top level",
                ),
            ),
            (
                Feature::OrderingKeys,
                Native(
                    "only the oldest row of each key can be taken, so a key has one delivery \
                     in flight, in publish order",
                ),
            ),
            (
                Feature::Deduplication,
                Native(
                    "a (queue, dedup id or message id) primary key per window; expired ids are \
                     replaced and cleared; a dedup id where no window is declared is `Invalid`",
                ),
            ),
            (
                Feature::Ttl,
                Emulated(
                    "expires_at per row (the message's TTL or the declared default); a fetch \
                     dead-letters expired rows (reason `expired`)",
                ),
            ),
            (
                Feature::MaxLength,
                Emulated(
                    "stored rows (waiting or in flight) counted in the publish transaction under \
                     an advisory lock; a batch that does not fit is refused whole with `Full`",
                ),
            ),
            (
                Feature::StaleSettles,
                Native("every settle is guarded by the lease token the delivery was taken with"),
            ),
            (
                Feature::TemporaryQueues,
                No(
                    "queues are rows in shared tables, bound to no session; request/reply declares a named reply queue its requester deletes on close",
                ),
            ),
        ],
    }
}
