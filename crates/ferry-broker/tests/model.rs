//! Model-based property tests of the `Broker` with restarts.
//!
//! Proptest draws a queue configuration and a sequence of operations: publishes, alone or in
//! batches (with an optional key, priority, delay, TTL, producer-chosen id — sometimes
//! reusing an earlier id — and dedup id), receives by one of two consumers, acks / nacks /
//! rejects / extends / returns as unsent of a held delivery — or of an older one, with a
//! stale token —, clock
//! advances (by random amounts, or exactly to one of the model's deadlines or 1 ms short of
//! it) followed by `tick_now`, park / unpark of a key, cancel by id, and reopens of the
//! broker on the same directory with the same `ManualClock`. A plain reference model
//! (`model/reference.rs`), written from the documented rules only, tracks every message by
//! seq; after each step what the broker returned (and its queue stats) must match the model.
//! At the end every key is unparked, everything is drained and the dead-letter queue is
//! checked letter by letter: reason, deliveries, last error, failure times, consumer.
//!
//! The rules the model follows, from the crate and module docs:
//!
//! - time only moves through ticks (`tick_now`, and the tick each `receive` does first): a
//!   lease that ended stays current (ack / nack / extend work) until a tick fails it;
//! - a failed attempt (nack, lease expiry at a tick) dead-letters with `max_deliveries` once
//!   the message had 3 deliveries, else with `expired` if its TTL has passed, else retries
//!   after the nack's delay or the backoff `min(1 s × 2^(d−1), 4 s)` counted from the failure;
//! - TTL (the message's own, else the queue's `default_ttl`) counts from publish; a publish
//!   whose delay is not shorter than its TTL is `ExpiresBeforeDelivery`; a tick dead-letters
//!   (`expired`) every message not in flight whose TTL has passed; one in flight keeps its
//!   lease and is checked when its attempt ends;
//! - a publish with a priority above the queue's top level is `PriorityAboveLevels` and
//!   stores nothing (the first invalid message of a batch names the error);
//! - receive serves the highest ready priority level, publish order within a level, with the lower-level share exactly as
//!   the priority module states it: each pick adds the share to a credit; with a lower level
//!   ready and credit ≥ 1 the highest ready level below the top is served and 1 spent; with
//!   no lower level ready the credit is capped at 1. The credit is not persisted (the picker
//!   is rebuilt when the broker opens), so it starts from 0 on every open. Shares are drawn
//!   in thousandths, so the model's fixed-point credit is the documented one to the pick;
//! - key-shared: a keyed message is ready only as the oldest tracked message of its key (its
//!   head), not delayed, not in flight, and with its key not parked; a failed head stays the
//!   head; a head that leaves (acked, dead-lettered, dropped, cancelled) releases the next.
//!   Parked keys survive a reopen; a parked key's messages not in flight count as parked;
//!   park on a shared queue is `false`;
//! - exclusive: while no message is in flight, only the oldest live message (keyed or not)
//!   that is not waiting for its publish delay may be ready — one message at a time, in
//!   publish order, a delayed one joining at its place when its delay ends, a failed one
//!   before everything after it — and only for the
//!   active consumer: the first to receive, which stays active while it holds a lease or
//!   asked within the lease duration (10 s); another consumer's receive gets nothing until
//!   then and makes it the active one after. The active consumer is not kept across a
//!   reopen; park on an exclusive queue is `false`;
//! - a delivery given back as never sent (`return_unsent`) spends no attempt: the message
//!   is ready at once with the deliveries it had before that lease, and its dead letter
//!   names the consumer it named before; if its TTL passed during the lease it is
//!   dead-lettered (`expired`) then, as when an attempt ends;
//! - ack of a message no longer tracked is `AlreadySettled`, whatever the token; any other
//!   token that is not the message's current lease is `StaleLease`;
//! - on reopen a message whose TTL has passed is dead-lettered (`expired`); then a lease
//!   that was running ends at its deadline (the message is ready then, with its deliveries
//!   kept), unless its deliveries are used up (`max_deliveries`); retry and delay times
//!   survive;
//! - dedup: a publish whose dedup id — or, without one, producer-chosen id — was stored
//!   within the window (`now − first publish < window`; a duplicate does not extend it), or
//!   earlier in the same batch, stores nothing and returns the original id, even into a full
//!   queue; the window survives a reopen; a zero window turns dedup off;
//! - length limits count every tracked message (in flight included) and its payload + key
//!   bytes; a publish or batch over the limit is `QueueFull` under `RejectPublish`, or when
//!   it could not fit in an empty queue, or when evicting every message not in flight would
//!   not make room (nothing is evicted then); otherwise the oldest messages not in flight
//!   are dropped (`DropHead`) or dead-lettered with `overflow` (`DeadLetterHead`) until it
//!   fits; an invalid message fails its whole batch;
//! - cancel by id removes the latest scheduled (delayed, never delivered) message with that
//!   id and returns `true`; `false` when there is none;
//! - a dead letter reports the last failed attempt's error ("e" for a nack, "lease expired",
//!   the reject reason), the first and last failure times and the last delivery's consumer;
//! - the counters in the stats count since the queue was created, across reopens: acked,
//!   nacked (failed attempts followed by a retry: nacks and lease expiries), dead-lettered,
//!   dropped and cancelled.
//!
//! `PROPTEST_CASES=2000 cargo test -p ferry-broker --test model` runs many more cases.

#[path = "model/ops.rs"]
mod ops;
#[path = "model/reference.rs"]
mod reference;
#[path = "model/regressions.rs"]
mod regressions;
#[path = "model/run.rs"]
mod run;

use proptest::prelude::*;

use ops::{Config, Features, ops};
use run::{block_on, run};

/// Enough cases per test to keep the whole file fast in debug builds; `PROPTEST_CASES`
/// raises it.
fn cases(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(cases(32))]

    /// One level, shared, no TTL, dedup by producer-chosen id only.
    #[test]
    fn fifo_queue_matches_model(ops in ops(Features::default(), 60)) {
        block_on(run(Config::fifo(), ops))?;
    }

    /// Two to four levels, publishes at every level and above the top one.
    #[test]
    fn priority_queue_matches_model(
        cfg in ops::priority_config(),
        ops in ops(Features { priorities: true, ..Features::default() }, 80),
    ) {
        block_on(run(cfg, ops))?;
    }

    /// Per-message TTLs, sometimes a default TTL, and cancel of delayed messages.
    #[test]
    fn ttl_matches_model(
        cfg in ops::ttl_config(),
        ops in ops(Features { ttl: true, cancel: true, ..Features::default() }, 60),
    ) {
        block_on(run(cfg, ops))?;
    }

    /// Dedup ids and chosen ids with a window of 0, 2 or 5 s, so clock advances end it.
    #[test]
    fn dedup_ids_match_model(
        cfg in ops::dedup_config(),
        ops in ops(
            Features { dedup_ids: true, cancel: true, batches: true, ..Features::default() },
            60,
        ),
    ) {
        block_on(run(cfg, ops))?;
    }

    /// Key-shared ordering with parked keys, priorities and TTLs.
    #[test]
    fn key_shared_queue_matches_model(
        cfg in ops::key_shared_config(),
        ops in ops(
            Features { park: true, priorities: true, ttl: true, ..Features::default() },
            80,
        ),
    ) {
        block_on(run(cfg, ops))?;
    }

    /// Message and byte limits under each overflow policy.
    #[test]
    fn length_limits_match_model(
        cfg in ops::limit_config(),
        ops in ops(
            Features {
                sizes: true,
                park: true,
                cancel: true,
                batches: true,
                ..Features::default()
            },
            60,
        ),
    ) {
        block_on(run(cfg, ops))?;
    }

    /// Exclusive ordering with failover between the two consumers, priorities, TTLs,
    /// cancel, batches and sometimes a length limit.
    #[test]
    fn exclusive_queue_matches_model(
        cfg in ops::exclusive_config(),
        ops in ops(
            Features {
                priorities: true,
                ttl: true,
                cancel: true,
                batches: true,
                ..Features::default()
            },
            80,
        ),
    ) {
        block_on(run(cfg, ops))?;
    }

    /// Shared, key-shared or exclusive ordering.
    #[test]
    fn every_feature_at_once_matches_model(
        cfg in ops::any_config(),
        ops in ops(Features::all(), 80),
    ) {
        block_on(run(cfg, ops))?;
    }
}
