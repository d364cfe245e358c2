//! Model-based property test of the [`Broker`] with restarts.
//!
//! Proptest generates sequences of publishes (with an optional key, delay and producer-chosen
//! id, sometimes reusing an earlier id to exercise dedup), receives, acks / nacks / rejects /
//! extends of a held delivery — or of an older one, with a stale token —, clock advances
//! followed by `tick_now`, and reopens of the broker on the same directory with the same
//! [`ManualClock`]. A plain reference model, written from the documented rules only, tracks
//! every message by seq; after each step what the broker returned (and its queue stats) must
//! match the model. At the end everything is drained and the dead-letter queue is checked.
//!
//! The model's rules, from the crate docs:
//!
//! - time only moves through ticks (`tick_now`, and the tick each `receive` does first): a
//!   lease that ended stays current (ack / nack / extend work) until a tick fails it;
//! - a failed attempt (nack, lease expiry at a tick) dead-letters with `max_deliveries` once
//!   the message had 3 deliveries, else retries after the nack's delay or the backoff
//!   `min(1 s × 2^(d−1), 4 s)` counted from the failure;
//! - receive takes ready messages in publish order (one priority level);
//! - ack of a message no longer tracked is `AlreadySettled`, whatever the token; any other
//!   token that is not the message's current lease is `StaleLease`;
//! - on reopen a lease that was running ends at its deadline (the message is ready then,
//!   with its deliveries kept), and one whose deliveries are used up is dead-lettered with
//!   `max_deliveries`; retry and delay times survive;
//! - a publish whose producer-chosen id was published before (within the dedup window)
//!   stores nothing and returns that id.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ferry_broker::{
    Acked, Backoff, Broker, BrokerConfig, BrokerError, DeadLetterReason, Durability, LeaseToken,
    MessageId, Nacked, OutgoingMessage, QueueSpec, ReceivedMessage, RetryPolicy,
};
use ferry_storage::ManualClock;
use proptest::prelude::*;
use proptest::sample::Index;

const T0: i64 = 1_700_000_000_000;
const Q: &str = "q";
const DLQ: &str = "q.dlq";
const MAX_DELIVERIES: u32 = 3;
const LEASE_MS: i64 = 10_000;

fn spec() -> QueueSpec {
    QueueSpec {
        retry: RetryPolicy {
            max_deliveries: MAX_DELIVERIES,
            backoff: Backoff {
                base: Duration::from_secs(1),
                cap: Duration::from_secs(4),
                multiplier: 2.0,
                jitter: 0.0,
            },
        },
        lease: Duration::from_millis(LEASE_MS as u64),
        // Longer than any run, so the model need not expire dedup entries.
        dedup_window: Duration::from_secs(3600),
        durability: Durability::None,
        ..QueueSpec::default()
    }
}

async fn open(dir: &Path, clock: &ManualClock) -> Broker {
    let config = BrokerConfig {
        clock: Arc::new(clock.clone()),
        background_timers: false,
        seed: Some(11),
        ..BrokerConfig::default()
    };
    Broker::open(dir, config).await.expect("open")
}

fn backoff_ms(deliveries: u32) -> i64 {
    (1_000i64 << (deliveries.max(1) - 1).min(10)).min(4_000)
}

// ---- Operations ----

#[derive(Debug, Clone)]
enum IdChoice {
    Auto,
    /// One of a small pool of producer-chosen ids.
    Chosen(u8),
    /// Any id published before (chosen or generated), now as a producer-chosen id.
    Reuse(Index),
}

#[derive(Debug, Clone)]
struct Target {
    /// Use an older delivery (stale token) instead of a currently held one.
    stale: bool,
    pick: Index,
}

#[derive(Debug, Clone)]
enum Op {
    Publish {
        seed: u8,
        key: Option<u8>,
        delay_ms: Option<u64>,
        id: IdChoice,
    },
    Receive {
        max: usize,
        lease_ms: Option<u64>,
    },
    Ack(Target),
    Nack(Target, Option<u64>),
    Reject(Target),
    Extend(Target, u64),
    Advance(i64),
    Reopen,
}

fn target() -> impl Strategy<Value = Target> {
    (prop::bool::weighted(0.2), any::<Index>()).prop_map(|(stale, pick)| Target { stale, pick })
}

fn op() -> impl Strategy<Value = Op> {
    let id = prop_oneof![
        3 => Just(IdChoice::Auto),
        1 => (0u8..4).prop_map(IdChoice::Chosen),
        1 => any::<Index>().prop_map(IdChoice::Reuse),
    ];
    let delay = prop_oneof![
        3 => Just(None),
        1 => prop::sample::select(vec![500u64, 2_000, 6_000]).prop_map(Some),
    ];
    let publish =
        (any::<u8>(), prop::option::of(0u8..3), delay, id).prop_map(|(seed, key, delay_ms, id)| {
            Op::Publish {
                seed,
                key,
                delay_ms,
                id,
            }
        });
    let receive = (
        1usize..=4,
        prop::option::of(prop::sample::select(vec![1_000u64, 3_000])),
    )
        .prop_map(|(max, lease_ms)| Op::Receive { max, lease_ms });
    let nack_delay = prop::option::of(prop::sample::select(vec![0u64, 500, 3_000]));
    prop_oneof![
        4 => publish,
        4 => receive,
        3 => target().prop_map(Op::Ack),
        3 => (target(), nack_delay).prop_map(|(t, d)| Op::Nack(t, d)),
        1 => target().prop_map(Op::Reject),
        1 => (target(), 500u64..5_000).prop_map(|(t, by)| Op::Extend(t, by)),
        3 => prop_oneof![Just(0i64), 1i64..3_000, 3_000i64..12_000].prop_map(Op::Advance),
        1 => Just(Op::Reopen),
    ]
}

// ---- The reference model ----

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    /// Waiting for a delay or retry backoff to end at this time.
    Scheduled(i64),
    Ready,
    /// In flight under the lease with model-side delivery number `uid`.
    Leased {
        uid: usize,
        until: i64,
    },
    Acked,
    Dead(DeadLetterReason),
}

#[derive(Debug)]
struct Msg {
    id: MessageId,
    payload: String,
    key: Option<Vec<u8>>,
    deliveries: u32,
    state: St,
}

impl Msg {
    fn live(&self) -> bool {
        !matches!(self.state, St::Acked | St::Dead(_))
    }
}

/// One delivery the broker handed out (the model's identity for it is its index).
#[derive(Debug, Clone, Copy)]
struct LeaseRec {
    seq: u64,
    token: LeaseToken,
}

#[derive(Debug, Default)]
struct Model {
    now: i64,
    /// Indexed by seq.
    msgs: Vec<Msg>,
    /// Producer-chosen ids stored so far.
    chosen: HashSet<MessageId>,
    /// Every id returned by a publish.
    ids: Vec<MessageId>,
    leases: Vec<LeaseRec>,
    session: u32,
}

impl Model {
    fn tick(&mut self) {
        let now = self.now;
        for m in &mut self.msgs {
            match m.state {
                St::Leased { until, .. } if until <= now => {
                    m.state = if m.deliveries >= MAX_DELIVERIES {
                        St::Dead(DeadLetterReason::MaxDeliveries)
                    } else {
                        St::Scheduled(now + backoff_ms(m.deliveries))
                    };
                }
                St::Scheduled(at) if at <= now => m.state = St::Ready,
                _ => {}
            }
        }
    }

    fn reopen(&mut self) {
        let now = self.now;
        for m in &mut self.msgs {
            let at = match m.state {
                St::Leased { .. } if m.deliveries >= MAX_DELIVERIES => {
                    m.state = St::Dead(DeadLetterReason::MaxDeliveries);
                    continue;
                }
                St::Leased { until, .. } => until,
                St::Scheduled(at) => at,
                _ => continue,
            };
            m.state = if at <= now {
                St::Ready
            } else {
                St::Scheduled(at)
            };
        }
    }

    fn ready(&self) -> Vec<u64> {
        (0..self.msgs.len() as u64)
            .filter(|&s| self.msgs[s as usize].state == St::Ready)
            .collect()
    }

    /// Whether lease `uid` is the current lease of its message.
    fn current(&self, uid: usize) -> bool {
        let seq = self.leases[uid].seq as usize;
        matches!(self.msgs[seq].state, St::Leased { uid: u, .. } if u == uid)
    }

    fn held(&self) -> Vec<usize> {
        (0..self.leases.len())
            .filter(|&u| self.current(u))
            .collect()
    }

    fn stale(&self) -> Vec<usize> {
        (0..self.leases.len())
            .filter(|&u| !self.current(u))
            .collect()
    }

    fn pick(&self, t: &Target) -> Option<usize> {
        let pool: Vec<usize> = if t.stale { self.stale() } else { self.held() };
        (!pool.is_empty()).then(|| pool[t.pick.index(pool.len())])
    }

    fn count(&self, f: impl Fn(&St) -> bool) -> usize {
        self.msgs.iter().filter(|m| f(&m.state)).count()
    }

    fn dead(&self) -> BTreeMap<u64, (DeadLetterReason, u32)> {
        self.msgs
            .iter()
            .enumerate()
            .filter_map(|(s, m)| match m.state {
                St::Dead(r) => Some((s as u64, (r, m.deliveries))),
                _ => None,
            })
            .collect()
    }
}

fn is_stale(result: &Result<impl std::fmt::Debug, BrokerError>) -> bool {
    matches!(result, Err(BrokerError::StaleLease { .. }))
}

// ---- Running a case ----

struct Run {
    dir: tempfile::TempDir,
    clock: ManualClock,
    broker: Option<Broker>,
    model: Model,
}

impl Run {
    fn broker(&self) -> &Broker {
        self.broker.as_ref().expect("open")
    }

    /// Checks a receive against the model (which has ticked already) and records it.
    fn check_received(
        &mut self,
        got: &[ReceivedMessage],
        max: usize,
        lease_ms: i64,
    ) -> Result<(), TestCaseError> {
        let ready = self.model.ready();
        let want: Vec<u64> = ready.iter().copied().take(max).collect();
        let seqs: Vec<u64> = got.iter().map(|m| m.seq).collect();
        prop_assert_eq!(
            &seqs,
            &want,
            "receive(max {}) must take the oldest ready messages in publish order; ready {:?}",
            max,
            ready
        );
        for r in got {
            let seq = r.seq as usize;
            // Across sessions too: a token from before a reopen must never come back.
            let earlier: Vec<LeaseToken> = self
                .model
                .leases
                .iter()
                .filter(|l| l.seq == r.seq)
                .map(|l| l.token)
                .collect();
            prop_assert!(
                !earlier.contains(&r.token),
                "seq {} delivered with token {:?} that an earlier delivery of it already had \
                 ({:?}): the old holder's stale token would be accepted",
                r.seq,
                r.token,
                earlier
            );
            let uid = self.model.leases.len();
            self.model.leases.push(LeaseRec {
                seq: r.seq,
                token: r.token,
            });
            let m = &mut self.model.msgs[seq];
            m.deliveries += 1;
            let until = self.model.now + lease_ms;
            m.state = St::Leased { uid, until };
            prop_assert_eq!(r.id, m.id);
            prop_assert_eq!(r.delivery, m.deliveries, "delivery number of seq {}", seq);
            prop_assert_eq!(r.lease_until_ms, until);
            prop_assert_eq!(&r.payload[..], m.payload.as_bytes());
            prop_assert_eq!(r.key.as_deref(), m.key.as_deref());
            prop_assert!(r.dead_letter.is_none());
        }
        Ok(())
    }

    fn check_stats(&self) -> Result<(), TestCaseError> {
        let m = &self.model;
        let stats = self.broker().describe_queue(Q).expect("describe").stats;
        prop_assert_eq!(stats.next_seq, m.msgs.len() as u64, "stored messages");
        let s = &stats.state;
        prop_assert_eq!(s.tracked, m.msgs.iter().filter(|m| m.live()).count());
        prop_assert_eq!(
            s.in_flight,
            m.count(|s| matches!(s, St::Leased { .. })),
            "in flight"
        );
        prop_assert_eq!(s.ready, m.count(|s| *s == St::Ready), "ready");
        prop_assert_eq!(
            s.delayed,
            m.count(|s| matches!(s, St::Scheduled(_))),
            "delayed"
        );
        let dlq = self.broker().describe_queue(DLQ).expect("describe dlq");
        prop_assert_eq!(
            dlq.stats.state.tracked,
            m.dead().len(),
            "dead letters in {}",
            DLQ
        );
        Ok(())
    }

    async fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let now = self.model.now;
        match op {
            Op::Publish {
                seed,
                key,
                delay_ms,
                id,
            } => {
                let n = self.model.ids.len();
                let payload = format!("p{seed}-{n}");
                let mut msg = OutgoingMessage::new(payload.clone());
                let key = key.map(|k| vec![b'k', b'0' + k]);
                if let Some(k) = &key {
                    msg = msg.with_key(k.clone());
                }
                if let Some(d) = delay_ms {
                    msg = msg.with_delay(Duration::from_millis(*d));
                }
                let chosen = match id {
                    IdChoice::Auto => None,
                    IdChoice::Chosen(c) => Some(MessageId::from(ulid::Ulid::from_parts(
                        T0 as u64,
                        1 + *c as u128,
                    ))),
                    IdChoice::Reuse(i) if !self.model.ids.is_empty() => {
                        Some(self.model.ids[i.index(self.model.ids.len())])
                    }
                    IdChoice::Reuse(_) => None,
                };
                if let Some(c) = chosen {
                    msg = msg.with_id(c);
                }
                let got = self.broker().publish(Q, msg).await.expect("publish");
                if let Some(c) = chosen {
                    prop_assert_eq!(got, c, "a chosen id is the message's id");
                }
                self.model.ids.push(got);
                let duplicate = chosen.is_some_and(|c| self.model.chosen.contains(&c));
                if !duplicate {
                    if let Some(c) = chosen {
                        self.model.chosen.insert(c);
                    }
                    let state = match delay_ms {
                        Some(d) if *d > 0 => St::Scheduled(now + *d as i64),
                        _ => St::Ready,
                    };
                    self.model.msgs.push(Msg {
                        id: got,
                        payload,
                        key,
                        deliveries: 0,
                        state,
                    });
                }
            }
            Op::Receive { max, lease_ms } => {
                let lease = lease_ms.map(Duration::from_millis);
                let got = self
                    .broker()
                    .receive(Q, "c", *max, lease, None)
                    .await
                    .expect("receive");
                self.model.tick();
                let lease_ms = lease_ms.map_or(LEASE_MS, |l| l as i64);
                self.check_received(&got, *max, lease_ms)?;
            }
            Op::Ack(t) => {
                let Some(uid) = self.model.pick(t) else {
                    return Ok(());
                };
                let LeaseRec { seq, token, .. } = self.model.leases[uid];
                let result = self.broker().ack(Q, seq, token).await;
                let live = self.model.msgs[seq as usize].live();
                if self.model.current(uid) {
                    prop_assert_eq!(result.expect("ack"), Acked::Settled);
                    self.model.msgs[seq as usize].state = St::Acked;
                } else if !live {
                    prop_assert_eq!(
                        result.expect("ack of a gone message"),
                        Acked::AlreadySettled
                    );
                } else {
                    prop_assert!(is_stale(&result), "stale ack of seq {}: {:?}", seq, result);
                }
            }
            Op::Nack(t, delay) => {
                let Some(uid) = self.model.pick(t) else {
                    return Ok(());
                };
                let LeaseRec { seq, token, .. } = self.model.leases[uid];
                let result = self
                    .broker()
                    .nack(Q, seq, token, delay.map(Duration::from_millis), Some("e"))
                    .await;
                if !self.model.current(uid) {
                    prop_assert!(is_stale(&result), "stale nack of seq {}: {:?}", seq, result);
                    return Ok(());
                }
                let m = &mut self.model.msgs[seq as usize];
                if m.deliveries >= MAX_DELIVERIES {
                    m.state = St::Dead(DeadLetterReason::MaxDeliveries);
                    prop_assert_eq!(
                        result.expect("nack"),
                        Nacked::DeadLettered(DeadLetterReason::MaxDeliveries)
                    );
                } else {
                    let wait = delay.map_or(backoff_ms(m.deliveries), |d| d as i64);
                    let at = now + wait;
                    m.state = if at > now {
                        St::Scheduled(at)
                    } else {
                        St::Ready
                    };
                    prop_assert_eq!(result.expect("nack"), Nacked::RetryAt(at));
                }
            }
            Op::Reject(t) => {
                let Some(uid) = self.model.pick(t) else {
                    return Ok(());
                };
                let LeaseRec { seq, token, .. } = self.model.leases[uid];
                let result = self.broker().reject(Q, seq, token, "bad").await;
                if self.model.current(uid) {
                    result.expect("reject");
                    self.model.msgs[seq as usize].state = St::Dead(DeadLetterReason::Rejected);
                } else {
                    prop_assert!(
                        is_stale(&result),
                        "stale reject of seq {}: {:?}",
                        seq,
                        result
                    );
                }
            }
            Op::Extend(t, by) => {
                let Some(uid) = self.model.pick(t) else {
                    return Ok(());
                };
                let LeaseRec { seq, token, .. } = self.model.leases[uid];
                let result = self
                    .broker()
                    .extend(Q, seq, token, Duration::from_millis(*by))
                    .await;
                if self.model.current(uid) {
                    let until = now + *by as i64;
                    prop_assert_eq!(result.expect("extend"), until);
                    self.model.msgs[seq as usize].state = St::Leased { uid, until };
                } else {
                    prop_assert!(
                        is_stale(&result),
                        "stale extend of seq {}: {:?}",
                        seq,
                        result
                    );
                }
            }
            Op::Advance(ms) => {
                self.clock.advance(*ms);
                self.model.now += ms;
                self.broker().tick_now().await.expect("tick");
                self.model.tick();
            }
            Op::Reopen => {
                drop(self.broker.take());
                self.broker = Some(open(self.dir.path(), &self.clock).await);
                self.model.reopen();
                self.model.session += 1;
            }
        }
        self.check_stats()
    }

    /// Advances far, receives and acks everything left, then drains and checks the DLQ.
    async fn drain(&mut self) -> Result<(), TestCaseError> {
        for _ in 0..2 * MAX_DELIVERIES + 2 {
            self.step(&Op::Advance(24 * 3_600_000)).await?;
            let got = self
                .broker()
                .receive(Q, "drain", 10_000, None, None)
                .await
                .expect("receive");
            self.model.tick();
            self.check_received(&got, 10_000, LEASE_MS)?;
            for r in &got {
                let acked = self.broker().ack(Q, r.seq, r.token).await.expect("ack");
                prop_assert_eq!(acked, Acked::Settled);
                self.model.msgs[r.seq as usize].state = St::Acked;
            }
            self.check_stats()?;
        }
        prop_assert!(
            self.model.msgs.iter().all(|m| !m.live()),
            "every message acked or dead-lettered after the drain"
        );
        let letters = self
            .broker()
            .receive(DLQ, "dlq", 10_000, None, None)
            .await
            .expect("receive dlq");
        let mut seen = BTreeMap::new();
        for l in &letters {
            let info = l.dead_letter.as_ref().expect("dead-letter info");
            prop_assert_eq!(&info.origin_queue, Q);
            let m = &self.model.msgs[info.origin_seq as usize];
            prop_assert_eq!(l.id, m.id);
            prop_assert_eq!(&l.payload[..], m.payload.as_bytes());
            let reason = DeadLetterReason::parse(&info.reason).expect("known reason");
            let before = seen.insert(info.origin_seq, (reason, info.deliveries));
            prop_assert!(
                before.is_none(),
                "seq {} dead-lettered twice",
                info.origin_seq
            );
            let acked = self.broker().ack(DLQ, l.seq, l.token).await.expect("ack");
            prop_assert_eq!(acked, Acked::Settled);
        }
        prop_assert_eq!(
            seen,
            self.model.dead(),
            "dead letters: seq → (reason, deliveries)"
        );
        Ok(())
    }
}

async fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue(Q, spec()).await.expect("create");
    let mut run = Run {
        dir,
        clock,
        broker: Some(broker),
        model: Model {
            now: T0,
            ..Model::default()
        },
    };
    for op in &ops {
        run.step(op).await?;
    }
    run.drain().await
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 32,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn broker_matches_model_across_restarts(ops in prop::collection::vec(op(), 1..60)) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(run(ops))?;
    }
}

/// Lease tokens once restarted at 1 when the broker opened: a consumer that held a lease
/// before a restart could settle the message's next delivery with its stale token.
#[test]
fn stale_token_from_before_a_reopen_is_refused() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let clock = ManualClock::new(T0);
        let broker = open(dir.path(), &clock).await;
        broker.create_queue(Q, spec()).await.expect("create");
        broker
            .publish(Q, OutgoingMessage::new("x"))
            .await
            .expect("publish");
        let old = broker
            .receive(Q, "a", 1, None, None)
            .await
            .expect("receive");
        drop(broker);
        let broker = open(dir.path(), &clock).await;
        clock.advance(LEASE_MS);
        let new = broker
            .receive(Q, "b", 1, None, None)
            .await
            .expect("receive");
        assert_eq!((new[0].seq, new[0].delivery), (old[0].seq, 2));
        let stale = broker.ack(Q, old[0].seq, old[0].token).await;
        assert!(
            matches!(stale, Err(BrokerError::StaleLease { .. })),
            "consumer a's lease ended with the restart, yet its token {:?} settled b's \
             delivery (token {:?}): {:?}",
            old[0].token,
            new[0].token,
            stale
        );
    });
}
