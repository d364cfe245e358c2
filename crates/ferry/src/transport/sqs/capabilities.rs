//! What SQS and SNS offer, and what the SDK adds on top.

use crate::capability::{Capabilities, Feature, Support};

pub(crate) const NAME: &str = "sqs";

pub fn capabilities() -> Capabilities {
    use Support::{Emulated, Native, No};
    Capabilities {
        transport: NAME,
        table: [
            (
                Feature::CompetingConsumers,
                Native("one SQS queue; a received message is invisible to other receivers"),
            ),
            (
                Feature::FanOut,
                Native(
                    "a topic is an SNS topic and each subscription an SQS queue subscribed to it \
                     with raw message delivery; per-key ordering and deduplication on a \
                     subscription are refused (they need FIFO topics)",
                ),
            ),
            (
                Feature::Redelivery,
                Native(
                    "nack sets the message's visibility timeout (ChangeMessageVisibility); the \
                     attempt is SQS's ApproximateReceiveCount",
                ),
            ),
            (
                Feature::RetryDelay,
                Native(
                    "the visibility timeout set to the delay rounded up to whole seconds, never \
                     early; SQS allows 12 hours, so a backoff cap or max delay above it is \
                     refused at declaration",
                ),
            ),
            (
                Feature::DeadLetters,
                Emulated(
                    "a dead-letter SQS queue per source (`<name>_dlq`); a nack past \
                     `max_deliveries` or a reject sends the message there with its \
                     `ferry-dlq-*` metadata, then deletes it; a message whose leases run out \
                     is moved there by SQS's own RedrivePolicy (maxReceiveCount = \
                     max_deliveries), without an error text",
                ),
            ),
            (
                Feature::LeaseExpiry,
                Native(
                    "the queue's VisibilityTimeout; leases are whole seconds from 1 s to 12 h, \
                     others are refused at declaration",
                ),
            ),
            (
                Feature::LeaseExtension,
                Native(
                    "ChangeMessageVisibility, rounded up to whole seconds; SQS refuses to keep \
                     a message hidden past 12 hours after it was received",
                ),
            ),
            (
                Feature::Delays,
                Native(
                    "DelaySeconds, rounded up to whole seconds; up to SQS's 15 minutes, so a \
                     longer max_delay is refused at declaration; a delayed publish to a FIFO \
                     queue (ordering or dedup) is refused, as FIFO queues take no per-message \
                     delay",
                ),
            ),
            (Feature::Priorities, No("SQS delivers without priorities")),
            (
                Feature::OrderingKeys,
                Native(
                    "a FIFO queue (`.fifo`) with the key as MessageGroupId: one group's \
                     messages in order, one receive at a time; keys of at most 64 bytes",
                ),
            ),
            (
                Feature::Deduplication,
                Native(
                    "a FIFO queue with the dedup id (else the message id) as \
                     MessageDeduplicationId; SQS's window is always 5 minutes, so a declared \
                     window above it is refused and one below is kept 5 minutes",
                ),
            ),
            (
                Feature::Ttl,
                No(
                    "SQS drops messages only at the queue's retention period, silently; Ferry \
                     sets it to SQS's maximum, 14 days",
                ),
            ),
            (Feature::MaxLength, No("SQS queues have no length limit")),
            (
                Feature::StaleSettles,
                No(
                    "SQS may accept a receipt handle from an earlier receive: a late ack can \
                     succeed after another consumer took the message",
                ),
            ),
            (
                Feature::TemporaryQueues,
                No("SQS queues outlive the connection; nothing deletes them when it goes"),
            ),
        ],
    }
}
