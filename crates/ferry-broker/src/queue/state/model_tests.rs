//! [`QueueState`] against a reference model written from the queue's rules alone: a list of
//! messages, linear scans, no timers and no indexes. Time in the model is a plain comparison
//! with `now`; the model never schedules anything.

use std::collections::HashMap;
use std::time::Duration;

use proptest::prelude::*;
use ulid::Ulid;

use super::*;
use crate::retry::Backoff;

const MAX_DELIVERIES: u32 = 3;
const LEASE_MS: i64 = 100;
const LEVELS: u8 = 3;

/// No jitter and strict priority, so every decision has one right answer.
fn spec(key_shared: bool) -> QueueSpec {
    QueueSpec {
        retry: RetryPolicy {
            max_deliveries: MAX_DELIVERIES,
            backoff: Backoff {
                base: Duration::from_millis(10),
                cap: Duration::from_millis(40),
                multiplier: 2.0,
                jitter: 0.0,
            },
        },
        lease: Duration::from_millis(LEASE_MS as u64),
        priority_levels: LEVELS,
        lower_priority_share: 0.0,
        ordering: if key_shared {
            OrderingMode::KeyShared
        } else {
            OrderingMode::Shared
        },
        ..QueueSpec::default()
    }
}

/// 10 ms after the first failure, doubling, at most 40 ms.
fn backoff_ms(deliveries: u32) -> i64 {
    let mut wait = 10;
    for _ in 1..deliveries {
        wait *= 2;
    }
    wait.min(40)
}

#[derive(Debug, Clone)]
enum Op {
    Track {
        key: Option<u8>,
        level: u8,
        delay: i64,
        ttl: Option<i64>,
    },
    Receive {
        consumer: u8,
        max: usize,
        lease: Option<u64>,
        /// Takes runs of a key ([`PerKey::Consecutive`]).
        runs: bool,
    },
    Ack {
        pick: usize,
        stale: bool,
    },
    Nack {
        pick: usize,
        stale: bool,
        delay: Option<u64>,
    },
    Reject {
        pick: usize,
        stale: bool,
    },
    Extend {
        pick: usize,
        stale: bool,
        by: u64,
    },
    /// Gives a lease back as never sent.
    ReturnUnsent {
        pick: usize,
        stale: bool,
    },
    Advance(i64),
    Park(u8),
    Unpark(u8),
    SetPrefetch(u8, Option<usize>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (
            prop::option::of(0u8..3),
            0u8..4,
            prop_oneof![3 => Just(0i64), 1 => 1i64..150],
            prop::option::weighted(0.3, 1i64..300),
        )
            .prop_map(|(key, level, delay, ttl)| Op::Track { key, level, delay, ttl }),
        5 => (0u8..3, 1usize..4, prop::option::weighted(0.3, 1u64..200), prop::bool::weighted(0.4))
            .prop_map(|(consumer, max, lease, runs)| Op::Receive { consumer, max, lease, runs }),
        4 => (any::<usize>(), prop::bool::weighted(0.2))
            .prop_map(|(pick, stale)| Op::Ack { pick, stale }),
        3 => (any::<usize>(), prop::bool::weighted(0.2), prop::option::weighted(0.3, 0u64..60))
            .prop_map(|(pick, stale, delay)| Op::Nack { pick, stale, delay }),
        1 => (any::<usize>(), prop::bool::weighted(0.2))
            .prop_map(|(pick, stale)| Op::Reject { pick, stale }),
        1 => (any::<usize>(), prop::bool::weighted(0.2), 0u64..300)
            .prop_map(|(pick, stale, by)| Op::Extend { pick, stale, by }),
        2 => (any::<usize>(), prop::bool::weighted(0.2))
            .prop_map(|(pick, stale)| Op::ReturnUnsent { pick, stale }),
        4 => (0i64..80).prop_map(Op::Advance),
        1 => (0u8..3).prop_map(Op::Park),
        1 => (0u8..3).prop_map(Op::Unpark),
        1 => (0u8..3, prop::option::of(1usize..3))
            .prop_map(|(consumer, cap)| Op::SetPrefetch(consumer, cap)),
    ]
}

#[derive(Debug, Clone)]
struct ModelMessage {
    seq: Seq,
    key: Option<u8>,
    level: u8,
    available_at: i64,
    expires_at: Option<i64>,
    deliveries: u32,
    /// (token, consumer, deadline)
    lease: Option<(LeaseToken, u8, i64)>,
}

#[derive(Debug, Default)]
struct Model {
    key_shared: bool,
    now: i64,
    next_seq: Seq,
    /// Tracked messages, in publish order.
    messages: Vec<ModelMessage>,
    settled: Vec<Seq>,
    dead: Vec<(Seq, DeadLetterReason)>,
    parked: Vec<u8>,
    prefetch: HashMap<u8, usize>,
    /// Every token each message has been delivered under.
    tokens: HashMap<Seq, Vec<LeaseToken>>,
    /// The token that acked each message that left by an ack.
    acked_with: HashMap<Seq, LeaseToken>,
    /// How many deliveries each message that left had had.
    left_after: HashMap<Seq, u32>,
}

impl Model {
    fn position(&self, seq: Seq) -> Option<usize> {
        self.messages.iter().position(|m| m.seq == seq)
    }

    fn expired(&self, m: &ModelMessage) -> bool {
        m.expires_at.is_some_and(|at| at <= self.now)
    }

    /// Parked, or another message of its key is in flight (one alone, or any of a run) or
    /// published before it.
    fn blocked_by_key(&self, m: &ModelMessage) -> bool {
        let Some(key) = m.key.filter(|_| self.key_shared) else {
            return false;
        };
        self.parked.contains(&key)
            || self
                .messages
                .iter()
                .any(|other| other.key == Some(key) && (other.seq < m.seq || other.lease.is_some()))
    }

    /// What a run takes next behind a message of `key` it delivered: the key's earliest
    /// message not in flight, if the key is not parked and that message is not delayed.
    fn follower(&self, key: u8) -> Option<Seq> {
        if self.parked.contains(&key) {
            return None;
        }
        let next = self
            .messages
            .iter()
            .find(|m| m.key == Some(key) && m.lease.is_none())?;
        (next.available_at <= self.now).then_some(next.seq)
    }

    fn is_ready(&self, m: &ModelMessage) -> bool {
        m.lease.is_none()
            && m.available_at <= self.now
            && !self.expired(m)
            && !self.blocked_by_key(m)
    }

    /// The next message to deliver: the highest level, then the earliest published.
    fn next_ready(&self) -> Option<Seq> {
        self.messages
            .iter()
            .filter(|m| self.is_ready(m))
            .max_by_key(|m| (m.level, std::cmp::Reverse(m.seq)))
            .map(|m| m.seq)
    }

    fn in_flight_of(&self, consumer: u8) -> usize {
        self.messages
            .iter()
            .filter(|m| m.lease.is_some_and(|(_, c, _)| c == consumer))
            .count()
    }

    /// An ack of a message that has left repeats the ack that settled it, unless another
    /// delivery could have taken it: a message acked after one delivery (only one token
    /// was ever issued) or never delivered takes any ack as a repeat; one acked after
    /// several only its acking token's; one that left without an ack after a delivery none.
    fn is_repeated_ack(&self, seq: Seq, token: LeaseToken) -> bool {
        let deliveries = self.left_after.get(&seq).copied().unwrap_or(0);
        match self.acked_with.get(&seq) {
            _ if deliveries == 0 => true,
            Some(_) if deliveries == 1 => true,
            Some(&by) => by == token,
            None => false,
        }
    }

    fn leave(&mut self, seq: Seq, reason: Option<DeadLetterReason>) {
        let at = self.position(seq).expect("leaving messages are tracked");
        let gone = self.messages.remove(at);
        self.left_after.insert(seq, gone.deliveries);
        match reason {
            Some(reason) => self.dead.push((seq, reason)),
            None => self.settled.push(seq),
        }
    }

    fn fail(&mut self, seq: Seq, delay: Option<i64>) -> Nacked {
        let at = self.position(seq).unwrap();
        let now = self.now;
        let expired = self.expired(&self.messages[at]);
        let m = &mut self.messages[at];
        m.lease = None;
        let reason = if m.deliveries >= MAX_DELIVERIES {
            DeadLetterReason::MaxDeliveries
        } else if expired {
            DeadLetterReason::Expired
        } else {
            m.available_at = now + delay.unwrap_or_else(|| backoff_ms(m.deliveries));
            return Nacked::RetryAt(m.available_at);
        };
        self.leave(seq, Some(reason));
        Nacked::DeadLettered(reason)
    }

    /// Undoes the lease of `seq`, never sent: ready again with the deliveries it had before
    /// (or dead-lettered if its TTL has passed meanwhile, as any message becoming ready).
    fn return_unsent(&mut self, seq: Seq) {
        let at = self.position(seq).unwrap();
        let expired = self.expired(&self.messages[at]);
        let m = &mut self.messages[at];
        m.lease = None;
        m.deliveries -= 1;
        if expired {
            self.leave(seq, Some(DeadLetterReason::Expired));
        }
    }

    fn current_lease(&self, seq: Seq) -> Option<(LeaseToken, u8, i64)> {
        self.messages.iter().find(|m| m.seq == seq)?.lease
    }

    fn tick(&mut self) {
        let now = self.now;
        let lapsed: Vec<Seq> = self
            .messages
            .iter()
            .filter(|m| m.lease.is_some_and(|(_, _, until)| until <= now))
            .map(|m| m.seq)
            .collect();
        for seq in lapsed {
            self.fail(seq, None);
        }
        let expired: Vec<Seq> = self
            .messages
            .iter()
            .filter(|m| m.lease.is_none() && self.expired(m))
            .map(|m| m.seq)
            .collect();
        for seq in expired {
            self.leave(seq, Some(DeadLetterReason::Expired));
        }
    }
}

fn id(seq: Seq) -> MessageId {
    MessageId::from_ulid(Ulid::from_parts(1, u128::from(seq) + 1))
}

fn is_stale<T>(result: &Result<T>) -> bool {
    matches!(result, Err(BrokerError::StaleLease { .. }))
}

fn consumer_name(consumer: u8) -> String {
    format!("c{consumer}")
}

fn run(key_shared: bool, ops: Vec<Op>) -> std::result::Result<(), TestCaseError> {
    let mut real = QueueState::new(&spec(key_shared), 11).unwrap();
    let mut model = Model {
        key_shared,
        ..Model::default()
    };
    let mut settled = Vec::new();
    let mut dead = Vec::new();
    for op in ops {
        let now = model.now;
        // A token for `pick`: the current lease's (or the last one issued) unless `stale`,
        // then an earlier one or one never issued.
        let choose = |model: &Model, pick: usize, stale: bool| -> Option<(Seq, LeaseToken)> {
            if model.next_seq == 0 {
                return None;
            }
            let seq = pick as u64 % model.next_seq;
            let issued = model.tokens.get(&seq).cloned().unwrap_or_default();
            let current = model.current_lease(seq).map(|(t, _, _)| t);
            let token = if stale {
                issued
                    .iter()
                    .copied()
                    .find(|&t| Some(t) != current)
                    .unwrap_or(LeaseToken(u64::MAX))
            } else {
                current
                    .or(issued.last().copied())
                    .unwrap_or(LeaseToken(u64::MAX))
            };
            Some((seq, token))
        };
        match op {
            Op::Track {
                key,
                level,
                delay,
                ttl,
            } => {
                let seq = model.next_seq;
                model.next_seq += 1;
                let expires_at = ttl.map(|ttl| now + ttl);
                real.track(
                    Tracked {
                        seq,
                        id: id(seq),
                        key: key.map(|k| vec![k].into_boxed_slice()),
                        level,
                        deliver_at_ms: now + delay,
                        expires_at_ms: expires_at,
                        size: 1,
                        deliveries: 0,
                    },
                    now,
                );
                model.messages.push(ModelMessage {
                    seq,
                    key,
                    level: level.min(LEVELS - 1),
                    available_at: now + delay,
                    expires_at,
                    deliveries: 0,
                    lease: None,
                });
            }
            Op::Receive {
                consumer,
                max,
                lease,
                runs,
            } => {
                let name = consumer_name(consumer);
                let per_key = if runs {
                    PerKey::Consecutive
                } else {
                    PerKey::One
                };
                let lease_for = lease.map(Duration::from_millis);
                let got = real.receive_per_key(&name, max, per_key, lease_for, now);
                let room = model.prefetch.get(&consumer).map_or(usize::MAX, |cap| {
                    cap.saturating_sub(model.in_flight_of(consumer))
                });
                let until = now + lease.map_or(LEASE_MS, |ms| ms as i64);
                // Marked with a placeholder token, replaced below with the real one.
                let take = |model: &mut Model, seq: Seq| {
                    let at = model.position(seq).unwrap();
                    model.messages[at].deliveries += 1;
                    model.messages[at].lease = Some((LeaseToken(0), consumer, until));
                };
                let mut expected = Vec::new();
                while expected.len() < max.min(room) {
                    let Some(seq) = model.next_ready() else { break };
                    expected.push(seq);
                    take(&mut model, seq);
                    let key = model.messages[model.position(seq).unwrap()].key;
                    let Some(key) = key.filter(|_| runs && key_shared) else {
                        continue;
                    };
                    while expected.len() < max.min(room) {
                        let Some(next) = model.follower(key) else {
                            break;
                        };
                        expected.push(next);
                        take(&mut model, next);
                    }
                }
                let delivered: Vec<Seq> = got.iter().map(|d| d.seq).collect();
                prop_assert_eq!(&delivered, &expected);
                for d in &got {
                    let at = model.position(d.seq).unwrap();
                    let m = &mut model.messages[at];
                    prop_assert_eq!(d.delivery, m.deliveries);
                    prop_assert_eq!(d.lease_until_ms, until);
                    prop_assert_eq!(d.id, id(d.seq));
                    let issued = model.tokens.entry(d.seq).or_default();
                    prop_assert!(!issued.contains(&d.token), "token reused");
                    issued.push(d.token);
                    m.lease = Some((d.token, consumer, until));
                }
            }
            Op::Ack { pick, stale } => {
                let Some((seq, token)) = choose(&model, pick, stale) else {
                    continue;
                };
                let got = real.ack(seq, token, now);
                match model.position(seq) {
                    None if model.is_repeated_ack(seq, token) => {
                        prop_assert_eq!(got.unwrap(), Acked::AlreadySettled)
                    }
                    None => prop_assert!(is_stale(&got), "{:?}", got),
                    Some(_) if model.current_lease(seq).map(|l| l.0) == Some(token) => {
                        prop_assert_eq!(got.unwrap(), Acked::Settled);
                        model.leave(seq, None);
                        model.acked_with.insert(seq, token);
                    }
                    Some(_) => prop_assert!(is_stale(&got), "{:?}", got),
                }
            }
            Op::Nack { pick, stale, delay } => {
                let Some((seq, token)) = choose(&model, pick, stale) else {
                    continue;
                };
                let got = real.nack(seq, token, delay.map(Duration::from_millis), Some("e"), now);
                if model.current_lease(seq).map(|l| l.0) == Some(token) {
                    let expected = model.fail(seq, delay.map(|d| d as i64));
                    prop_assert_eq!(got.unwrap(), expected);
                } else {
                    prop_assert!(is_stale(&got), "{:?}", got);
                }
            }
            Op::Reject { pick, stale } => {
                let Some((seq, token)) = choose(&model, pick, stale) else {
                    continue;
                };
                let got = real.reject(seq, token, "no", now);
                if model.current_lease(seq).map(|l| l.0) == Some(token) {
                    prop_assert!(got.is_ok());
                    model.leave(seq, Some(DeadLetterReason::Rejected));
                } else {
                    prop_assert!(is_stale(&got), "{:?}", got);
                }
            }
            Op::Extend { pick, stale, by } => {
                let Some((seq, token)) = choose(&model, pick, stale) else {
                    continue;
                };
                let got = real.extend(seq, token, Duration::from_millis(by), now);
                if model.current_lease(seq).map(|l| l.0) == Some(token) {
                    prop_assert_eq!(got.unwrap(), now + by as i64);
                    let at = model.position(seq).unwrap();
                    if let Some(lease) = &mut model.messages[at].lease {
                        lease.2 = now + by as i64;
                    }
                } else {
                    prop_assert!(is_stale(&got), "{:?}", got);
                }
            }
            Op::ReturnUnsent { pick, stale } => {
                let Some((seq, token)) = choose(&model, pick, stale) else {
                    continue;
                };
                let got = real.return_unsent(seq, token, now);
                if model.current_lease(seq).map(|l| l.0) == Some(token) {
                    let returned = got.unwrap();
                    model.return_unsent(seq);
                    let expected = model.position(seq).map(|at| model.messages[at].deliveries);
                    if let Some(deliveries) = expected {
                        prop_assert_eq!(returned.deliveries, deliveries);
                    }
                } else {
                    prop_assert!(is_stale(&got), "{:?}", got);
                }
            }
            Op::Advance(ms) => {
                model.now += ms;
                model.tick();
                real.tick(model.now);
            }
            Op::Park(key) => {
                prop_assert_eq!(real.park(&[key]), key_shared);
                if key_shared && !model.parked.contains(&key) {
                    model.parked.push(key);
                }
            }
            Op::Unpark(key) => {
                real.unpark(&[key], now);
                model.parked.retain(|&k| k != key);
            }
            Op::SetPrefetch(consumer, cap) => {
                real.set_prefetch(&consumer_name(consumer), cap);
                match cap {
                    Some(cap) => model.prefetch.insert(consumer, cap),
                    None => model.prefetch.remove(&consumer),
                };
            }
        }

        for effect in real.take_effects() {
            match effect {
                Effect::Settled { seq } => settled.push(seq),
                Effect::DeadLetter(d) => dead.push((d.seq, d.reason)),
                Effect::Ready { .. } | Effect::Failed { .. } => {}
            }
        }
        check(&real, &model, &settled, &dead)?;
    }
    Ok(())
}

fn check(
    real: &QueueState,
    model: &Model,
    settled: &[Seq],
    dead: &[(Seq, DeadLetterReason)],
) -> std::result::Result<(), TestCaseError> {
    let now = model.now;
    let mut expected_settled = model.settled.clone();
    let mut got_settled = settled.to_vec();
    expected_settled.sort_unstable();
    got_settled.sort_unstable();
    prop_assert_eq!(got_settled, expected_settled);
    let mut expected_dead = model.dead.clone();
    let mut got_dead = dead.to_vec();
    expected_dead.sort_unstable_by_key(|&(seq, _)| seq);
    got_dead.sort_unstable_by_key(|&(seq, _)| seq);
    prop_assert_eq!(got_dead, expected_dead);

    for seq in 0..model.next_seq {
        let tracked = real.is_tracked(seq);
        let lease = real.lease(seq);
        let places = usize::from(tracked)
            + settled.iter().filter(|&&s| s == seq).count()
            + dead.iter().filter(|&&(s, _)| s == seq).count();
        prop_assert_eq!(places, 1, "seq {} must be in exactly one place", seq);
        prop_assert!(
            tracked || lease.is_none(),
            "{} in flight after leaving",
            seq
        );
        let expected = model
            .current_lease(seq)
            .map(|(token, _, until)| (token, until));
        prop_assert_eq!(lease, expected, "lease of {}", seq);
    }

    let stats = real.stats(now);
    let in_flight = model.messages.iter().filter(|m| m.lease.is_some()).count();
    prop_assert_eq!(stats.tracked, model.messages.len());
    prop_assert_eq!(stats.in_flight, in_flight);
    let ready = model.messages.iter().filter(|m| model.is_ready(m)).count();
    prop_assert_eq!(stats.ready, ready);
    let delayed = model
        .messages
        .iter()
        .filter(|m| m.lease.is_none() && m.available_at > now)
        .count();
    prop_assert_eq!(stats.delayed, delayed);
    for consumer in 0..3 {
        prop_assert_eq!(
            real.in_flight_of(&consumer_name(consumer)),
            model.in_flight_of(consumer)
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn queue_state_matches_a_list_model(
        key_shared in any::<bool>(),
        ops in prop::collection::vec(op(), 1..150),
    ) {
        run(key_shared, ops)?;
    }
}
