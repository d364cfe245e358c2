//! What Redis Streams offer, and what the SDK builds on them in server-side Lua.

use crate::capability::{Capabilities, Feature, Support};

pub fn capabilities() -> Capabilities {
    use Support::{Emulated, Native, No};
    Capabilities {
        transport: "redis",
        table: [
            (
                Feature::CompetingConsumers,
                Native("one consumer group per queue; XREADGROUP hands each entry to one consumer"),
            ),
            (
                Feature::FanOut,
                Native(
                    "a topic is a stream and each subscription a consumer group on it, created \
                     at `$`; a subscription's delayed redeliveries go through a stream of its own",
                ),
            ),
            (
                Feature::Redelivery,
                Native(
                    "nack leaves the entry in the pending-entries list, claimable at once; the \
                     attempt is the PEL delivery count, plus a count carried in the entry across \
                     delayed hops",
                ),
            ),
            (
                Feature::RetryDelay,
                Emulated(
                    "a delay up to the lease ages the pending entry (XCLAIM IDLE) so it becomes \
                     claimable when due; a longer one moves the entry through the queue's sorted \
                     set of delayed entries",
                ),
            ),
            (
                Feature::DeadLetters,
                Emulated(
                    "a `<name>.dlq` stream; the XADD with the `ferry-dlq-*` metadata and the \
                     XACK of the original run in one Lua script",
                ),
            ),
            (
                Feature::LeaseExpiry,
                Native(
                    "pending entries idle longer than the lease are claimed by the next fetch \
                     (XPENDING IDLE + XCLAIM in one script), raising the delivery count",
                ),
            ),
            (
                Feature::LeaseExtension,
                Emulated(
                    "XCLAIM IDLE resets the entry's idle time; an extension beyond the lease is \
                     kept as a deadline in a hash that claiming honours",
                ),
            ),
            (
                Feature::Delays,
                Emulated(
                    "a sorted set per queue (and per topic) scored by due time; every fetch runs \
                     a Lua script that moves due entries into the stream, so concurrent movers \
                     are safe",
                ),
            ),
            (
                Feature::Priorities,
                No(
                    "a stream is one FIFO log; priorities would need a stream per level and a \
                     reader draining them in order, which is not built",
                ),
            ),
            (
                Feature::OrderingKeys,
                No(
                    "a consumer group hands entries to any consumer; one message in flight per \
                     key would need a lock per key around every delivery, which is not built",
                ),
            ),
            (
                Feature::Deduplication,
                Emulated(
                    "dedup ids (or message ids) in a sorted set per queue scored by expiry, \
                     checked and written in the same Lua script as the XADD; queues only",
                ),
            ),
            (
                Feature::Ttl,
                Emulated(
                    "an expiry field in the entry, checked when fetched: an expired message is \
                     never delivered and goes to the dead-letter queue with reason `expired`",
                ),
            ),
            (
                Feature::MaxLength,
                Emulated(
                    "the publish script refuses (Full) a batch that would take XLEN plus the \
                     delayed entries past the limit; acked entries are XDELed so XLEN counts \
                     what waits. MAXLEN trimming would drop unconsumed messages, so it is not used",
                ),
            ),
            (
                Feature::StaleSettles,
                Native(
                    "the settle script checks that the entry is still pending for this consumer with this delivery count (XPENDING) before it acts",
                ),
            ),
            (
                Feature::TemporaryQueues,
                No(
                    "streams are keys bound to no connection; request/reply declares a named reply queue its requester deletes on close",
                ),
            ),
        ],
    }
}
