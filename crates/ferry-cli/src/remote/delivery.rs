//! How a queue delivers — retries, backoff, dead letters, lease, ordering, limits — as
//! `ferry queue create` and `ferry sub create` both take it: a subscription is a queue fed
//! from a topic, so it takes the same options under the same names.

use std::time::Duration;

use clap::{Args, ValueEnum};
use ferry_client::proto as v1;

use super::output::{millis, parse_duration};

#[derive(Args, Debug)]
pub struct DeliveryOptions {
    /// Deliveries before a message is dead-lettered.
    #[arg(long)]
    pub max_deliveries: Option<u32>,
    /// How long a delivery is held before it is given to another consumer (e.g. 30s).
    #[arg(long, value_parser = parse_duration)]
    pub lease: Option<Duration>,
    /// The first retry's delay after a nack (doubling after that, unless
    /// --backoff-multiplier says otherwise).
    #[arg(long, value_parser = parse_duration)]
    pub backoff: Option<Duration>,
    /// How much each retry's delay grows over the one before (1: a fixed delay).
    #[arg(long)]
    pub backoff_multiplier: Option<f64>,
    /// The longest retry delay, before jitter.
    #[arg(long, value_parser = parse_duration)]
    pub backoff_cap: Option<Duration>,
    /// Each delay spread by up to ± this fraction of itself, 0 to 1 (0: exact delays).
    #[arg(long)]
    pub backoff_jitter: Option<f64>,
    /// Publishes with the same id or dedup id within this window are stored once (0s: off).
    #[arg(long, value_parser = parse_duration)]
    pub dedup_window: Option<Duration>,
    /// Messages expire this long after publishing unless they say otherwise.
    #[arg(long, value_parser = parse_duration)]
    pub ttl: Option<Duration>,
    /// The longest delay a publish may ask for.
    #[arg(long, value_parser = parse_duration)]
    pub max_delay: Option<Duration>,
    /// Priorities 0..N-1, higher first (1: no priorities).
    #[arg(long)]
    pub priority_levels: Option<u32>,
    /// shared: any consumer, any order; key-shared: in order per key (and keys can be
    /// parked); exclusive: one consumer at a time.
    #[arg(long, value_enum)]
    pub ordering: Option<Ordering>,
    /// Where dead letters go: a queue's name, or `none` to discard them
    /// (default: `<name>.dlq`).
    #[arg(long)]
    pub dead_letter: Option<String>,
    /// The most messages the queue holds (see --overflow).
    #[arg(long)]
    pub max_messages: Option<u64>,
    /// The most payload bytes the queue holds (see --overflow).
    #[arg(long)]
    pub max_bytes: Option<u64>,
    /// What a full queue does with a publish.
    #[arg(long, value_enum)]
    pub overflow: Option<Overflow>,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Ordering {
    Shared,
    KeyShared,
    Exclusive,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Overflow {
    Reject,
    DropHead,
    DeadLetterHead,
}

impl DeliveryOptions {
    /// The spec with what was given; whatever was not is left unset, for the server's
    /// default.
    pub fn spec(&self) -> v1::QueueSpec {
        let dead_letter = self.dead_letter.as_ref().map(|target| v1::DeadLetter {
            target: Some(if target == "none" {
                v1::dead_letter::Target::Disabled(true)
            } else {
                v1::dead_letter::Target::Queue(target.clone())
            }),
        });
        let backoff = v1::Backoff {
            base_ms: self.backoff.map(millis),
            cap_ms: self.backoff_cap.map(millis),
            multiplier: self.backoff_multiplier,
            jitter: self.backoff_jitter,
        };
        let backoff = (backoff != v1::Backoff::default()).then_some(backoff);
        let retry =
            (self.max_deliveries.is_some() || backoff.is_some()).then_some(v1::RetryPolicy {
                max_deliveries: self.max_deliveries,
                backoff,
            });
        let limited =
            self.max_messages.is_some() || self.max_bytes.is_some() || self.overflow.is_some();
        let length_limit = limited.then_some(v1::LengthLimit {
            max_messages: self.max_messages,
            max_bytes: self.max_bytes,
            overflow: match self.overflow {
                None => v1::OverflowPolicy::Unspecified,
                Some(Overflow::Reject) => v1::OverflowPolicy::RejectPublish,
                Some(Overflow::DropHead) => v1::OverflowPolicy::DropHead,
                Some(Overflow::DeadLetterHead) => v1::OverflowPolicy::DeadLetterHead,
            } as i32,
        });
        v1::QueueSpec {
            retry,
            dead_letter,
            dedup_window_ms: self.dedup_window.map(millis),
            default_ttl_ms: self.ttl.map(millis),
            lease_ms: self.lease.map(millis),
            max_delay_ms: self.max_delay.map(millis),
            priority_levels: self.priority_levels,
            ordering: match self.ordering {
                None => v1::OrderingMode::Unspecified,
                Some(Ordering::Shared) => v1::OrderingMode::Shared,
                Some(Ordering::KeyShared) => v1::OrderingMode::KeyShared,
                Some(Ordering::Exclusive) => v1::OrderingMode::Exclusive,
            } as i32,
            length_limit,
            ..Default::default()
        }
    }
}
