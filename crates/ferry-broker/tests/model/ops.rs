//! What a case runs: the queue's configuration and the operations, with their strategies.

use std::time::Duration;

use ferry_broker::{
    Backoff, Durability, LengthLimit, OrderingMode, OverflowPolicy, QueueSpec, RetryPolicy,
};
use proptest::prelude::*;
use proptest::sample::{Index, select};

use crate::reference::{LEASE_MS, MAX_DELIVERIES};

/// The queue under test, in the model's terms; [`Config::spec`] turns it into a spec.
#[derive(Debug, Clone)]
pub struct Config {
    pub levels: u8,
    /// `lower_priority_share` in thousandths, so the model's fixed-point credit is exact.
    pub share_millis: u64,
    pub key_shared: bool,
    /// Exclusive with failover (then `key_shared` is false): one active consumer, one
    /// message at a time in publish order.
    pub exclusive: bool,
    pub default_ttl_ms: Option<i64>,
    /// Zero turns dedup off.
    pub dedup_window_ms: i64,
    pub limit: LengthLimit,
}

impl Config {
    /// One FIFO level, shared, no TTL or limit, and a dedup window longer than any run.
    pub fn fifo() -> Config {
        Config {
            levels: 1,
            share_millis: 100,
            key_shared: false,
            exclusive: false,
            default_ttl_ms: None,
            dedup_window_ms: 3_600_000,
            limit: LengthLimit::default(),
        }
    }

    pub fn limited(&self) -> bool {
        self.limit.max_messages.is_some() || self.limit.max_bytes.is_some()
    }

    pub fn spec(&self) -> QueueSpec {
        QueueSpec {
            retry: RetryPolicy {
                max_deliveries: MAX_DELIVERIES,
                backoff: Backoff {
                    base: Duration::from_secs(1),
                    cap: Duration::from_secs(4),
                    multiplier: 2.0,
                    // No jitter: every retry time has one right answer.
                    jitter: 0.0,
                },
            },
            lease: Duration::from_millis(LEASE_MS as u64),
            dedup_window: Duration::from_millis(self.dedup_window_ms as u64),
            default_ttl: self
                .default_ttl_ms
                .map(|ms| Duration::from_millis(ms as u64)),
            priority_levels: self.levels,
            lower_priority_share: self.share_millis as f64 / 1000.0,
            ordering: if self.exclusive {
                OrderingMode::Exclusive
            } else if self.key_shared {
                OrderingMode::KeyShared
            } else {
                OrderingMode::Shared
            },
            length_limit: self.limit,
            durability: Durability::None,
            ..QueueSpec::default()
        }
    }
}

fn share() -> impl Strategy<Value = u64> {
    select(vec![0u64, 100, 250, 333, 500])
}

pub fn priority_config() -> impl Strategy<Value = Config> {
    (2u8..=4, share(), prop::bool::weighted(0.3)).prop_map(|(levels, share_millis, key_shared)| {
        Config {
            levels,
            share_millis,
            key_shared,
            ..Config::fifo()
        }
    })
}

pub fn ttl_config() -> impl Strategy<Value = Config> {
    (
        prop::option::of(select(vec![4_000i64, 9_000])),
        1u8..=2,
        prop::bool::weighted(0.3),
    )
        .prop_map(|(default_ttl_ms, levels, key_shared)| Config {
            default_ttl_ms,
            levels,
            key_shared,
            ..Config::fifo()
        })
}

pub fn dedup_config() -> impl Strategy<Value = Config> {
    select(vec![0i64, 2_000, 5_000]).prop_map(|dedup_window_ms| Config {
        dedup_window_ms,
        ..Config::fifo()
    })
}

pub fn key_shared_config() -> impl Strategy<Value = Config> {
    (
        1u8..=3,
        share(),
        prop::option::of(select(vec![6_000i64, 15_000])),
    )
        .prop_map(|(levels, share_millis, default_ttl_ms)| Config {
            levels,
            share_millis,
            key_shared: true,
            default_ttl_ms,
            ..Config::fifo()
        })
}

fn limit() -> impl Strategy<Value = LengthLimit> {
    let policy = select(vec![
        OverflowPolicy::RejectPublish,
        OverflowPolicy::DropHead,
        OverflowPolicy::DeadLetterHead,
    ]);
    let bounds = prop_oneof![
        (1u64..=5).prop_map(|m| (Some(m), None)),
        (8u64..=50).prop_map(|b| (None, Some(b))),
        (1u64..=5, 8u64..=50).prop_map(|(m, b)| (Some(m), Some(b))),
    ];
    (bounds, policy).prop_map(|((max_messages, max_bytes), overflow)| LengthLimit {
        max_messages,
        max_bytes,
        overflow,
    })
}

pub fn limit_config() -> impl Strategy<Value = Config> {
    (limit(), prop::bool::weighted(0.4), 1u8..=2).prop_map(|(limit, key_shared, levels)| Config {
        limit,
        key_shared,
        levels,
        ..Config::fifo()
    })
}

/// Exclusive ordering, with priorities (which cannot reorder it: only its head is ever
/// ready), sometimes a default TTL, and sometimes a length limit.
pub fn exclusive_config() -> impl Strategy<Value = Config> {
    (
        1u8..=2,
        prop::option::of(select(vec![6_000i64, 15_000])),
        prop::option::weighted(0.3, limit()),
    )
        .prop_map(|(levels, default_ttl_ms, limit)| Config {
            levels,
            exclusive: true,
            default_ttl_ms,
            limit: limit.unwrap_or_default(),
            ..Config::fifo()
        })
}

/// The ordering modes as (key-shared, exclusive): shared and key-shared twice as often as
/// exclusive, which serves one message at a time and so drains a run's backlog slowest.
fn ordering() -> impl Strategy<Value = (bool, bool)> {
    prop_oneof![
        2 => Just((false, false)),
        2 => Just((true, false)),
        1 => Just((false, true)),
    ]
}

/// Every feature at once, each drawn independently.
pub fn any_config() -> impl Strategy<Value = Config> {
    (
        1u8..=3,
        share(),
        ordering(),
        prop::option::of(select(vec![4_000i64, 9_000])),
        select(vec![0i64, 3_000, 3_600_000]),
        prop::option::of(limit()),
    )
        .prop_map(
            |(
                levels,
                share_millis,
                (key_shared, exclusive),
                default_ttl_ms,
                dedup_window_ms,
                limit,
            )| Config {
                levels,
                share_millis,
                key_shared,
                exclusive,
                default_ttl_ms,
                dedup_window_ms,
                limit: limit.unwrap_or_default(),
            },
        )
}

// ---- Operations ----

/// Which optional fields and operations a test generates.
#[derive(Debug, Clone, Copy, Default)]
pub struct Features {
    pub priorities: bool,
    pub ttl: bool,
    pub dedup_ids: bool,
    pub park: bool,
    pub cancel: bool,
    /// Bigger payloads, so byte limits bite.
    pub sizes: bool,
    pub batches: bool,
}

impl Features {
    pub fn all() -> Features {
        Features {
            priorities: true,
            ttl: true,
            dedup_ids: true,
            park: true,
            cancel: true,
            sizes: true,
            batches: true,
        }
    }
}

#[derive(Debug, Clone)]
pub enum IdChoice {
    Auto,
    /// One of a small pool of producer-chosen ids.
    Chosen(u8),
    /// Any id published before (chosen or generated), now as a producer-chosen id.
    Reuse(Index),
}

#[derive(Debug, Clone)]
pub struct Target {
    /// Use an older delivery (stale token) instead of a currently held one.
    pub stale: bool,
    pub pick: Index,
}

#[derive(Debug, Clone)]
pub struct Publish {
    /// Padding added to the payload, for byte limits.
    pub pad: u8,
    pub key: Option<u8>,
    pub priority: u8,
    pub delay_ms: Option<u64>,
    pub ttl_ms: Option<u64>,
    pub id: IdChoice,
    /// One of a small pool of dedup ids.
    pub dedup: Option<u8>,
}

#[derive(Debug, Clone)]
pub enum Op {
    Publish(Publish),
    /// Two or three messages in one `publish_batch`.
    PublishBatch(Vec<Publish>),
    Receive {
        /// Which of two consumers receives (prefetch is not set, so only the dead letters'
        /// consumer tells them apart).
        consumer: u8,
        max: usize,
        lease_ms: Option<u64>,
    },
    Ack(Target),
    Nack(Target, Option<u64>),
    Reject(Target),
    Extend(Target, u64),
    /// Gives a delivery back as never sent (`return_unsent`).
    ReturnUnsent(Target),
    Advance(i64),
    /// Advances to one of the model's upcoming deadlines (a lease end, a delay or backoff
    /// end, an expiry, the end of a dedup window), or to 1 ms before it with `early`: the
    /// boundaries random advances almost never hit.
    AdvanceToDeadline {
        pick: Index,
        early: bool,
    },
    Reopen,
    /// A journal checkpoint of every queue and retention of their logs (`maintain_now`):
    /// changes nothing the model can see, now or after a reopen.
    Checkpoint,
    Park(u8),
    Unpark(u8),
    /// Cancel by id: with `scheduled`, the id of a message the model holds as scheduled and
    /// never delivered (if any), else any id a publish returned.
    Cancel {
        scheduled: bool,
        pick: Index,
    },
}

fn target() -> impl Strategy<Value = Target> {
    (prop::bool::weighted(0.2), any::<Index>()).prop_map(|(stale, pick)| Target { stale, pick })
}

fn publish(f: Features) -> impl Strategy<Value = Publish> {
    let id = prop_oneof![
        3 => Just(IdChoice::Auto),
        1 => (0u8..4).prop_map(IdChoice::Chosen),
        1 => any::<Index>().prop_map(IdChoice::Reuse),
    ];
    let delay = prop_oneof![
        3 => Just(None),
        1 => select(vec![500u64, 2_000, 6_000]).prop_map(Some),
    ];
    let ttl = if f.ttl {
        prop_oneof![
            1 => Just(None),
            1 => select(vec![1_000u64, 3_000, 7_000, 15_000]).prop_map(Some),
        ]
        .boxed()
    } else {
        Just(None).boxed()
    };
    let priority = if f.priorities {
        // Up to one past the most levels a test declares: above the top level is refused.
        (0u8..=4).boxed()
    } else {
        Just(0u8).boxed()
    };
    let dedup = if f.dedup_ids {
        prop::option::weighted(0.4, 0u8..3).boxed()
    } else {
        Just(None).boxed()
    };
    let pad = if f.sizes {
        (0u8..=12).boxed()
    } else {
        Just(0u8).boxed()
    };
    let key = prop::option::weighted(if f.park { 0.8 } else { 0.5 }, 0u8..3);
    (pad, key, priority, delay, ttl, id, dedup).prop_map(
        |(pad, key, priority, delay_ms, ttl_ms, id, dedup)| Publish {
            pad,
            key,
            priority,
            delay_ms,
            ttl_ms,
            id,
            dedup,
        },
    )
}

pub fn op(f: Features) -> impl Strategy<Value = Op> {
    let receive = (
        0u8..2,
        1usize..=4,
        prop::option::of(select(vec![1_000u64, 3_000])),
    )
        .prop_map(|(consumer, max, lease_ms)| Op::Receive {
            consumer,
            max,
            lease_ms,
        });
    let nack_delay = prop::option::of(select(vec![0u64, 500, 3_000]));
    let advance = prop_oneof![Just(0i64), 1i64..3_000, 3_000i64..12_000].prop_map(Op::Advance);
    let mut arms: Vec<(u32, BoxedStrategy<Op>)> = vec![
        (5, publish(f).prop_map(Op::Publish).boxed()),
        (4, receive.boxed()),
        (3, target().prop_map(Op::Ack).boxed()),
        (
            3,
            (target(), nack_delay)
                .prop_map(|(t, d)| Op::Nack(t, d))
                .boxed(),
        ),
        (1, target().prop_map(Op::Reject).boxed()),
        (
            1,
            (target(), 500u64..5_000)
                .prop_map(|(t, by)| Op::Extend(t, by))
                .boxed(),
        ),
        (1, target().prop_map(Op::ReturnUnsent).boxed()),
        (3, advance.boxed()),
        (
            2,
            (any::<Index>(), prop::bool::weighted(0.3))
                .prop_map(|(pick, early)| Op::AdvanceToDeadline { pick, early })
                .boxed(),
        ),
        (1, Just(Op::Reopen).boxed()),
        (1, Just(Op::Checkpoint).boxed()),
    ];
    if f.batches {
        let batch = prop::collection::vec(publish(f), 2..=3).prop_map(Op::PublishBatch);
        arms.push((2, batch.boxed()));
    }
    if f.park {
        arms.push((2, (0u8..3).prop_map(Op::Park).boxed()));
        arms.push((2, (0u8..3).prop_map(Op::Unpark).boxed()));
    }
    if f.cancel {
        let cancel = (prop::bool::weighted(0.8), any::<Index>())
            .prop_map(|(scheduled, pick)| Op::Cancel { scheduled, pick });
        arms.push((2, cancel.boxed()));
    }
    prop::strategy::Union::new_weighted(arms)
}

pub fn ops(f: Features, max_len: usize) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(f), 1..max_len)
}
