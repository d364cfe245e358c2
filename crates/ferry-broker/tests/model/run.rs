//! Running a case: each operation goes to the broker and to the model, and what the broker
//! returned, and its queue stats, must match the model after every step.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ferry_broker::{
    Acked, Broker, BrokerConfig, BrokerError, Checkpoint, DeadLetterReason, LeaseToken, MessageId,
    OutgoingMessage, ReceivedMessage,
};
use ferry_storage::ManualClock;
use proptest::prelude::*;

use crate::ops::{Config, IdChoice, Op, Publish, Target};
use crate::reference::{
    Admit, Duplicate, Failures, Invalid, LEASE_MS, LeaseRec, Model, NewMessage, St,
};

pub const T0: i64 = 1_700_000_000_000;
pub const Q: &str = "q";
pub const DLQ: &str = "q.dlq";

/// Opens the broker with the manual clock. `seed` seeds generated ids: reopening with the
/// seed of an earlier open at the same (manual) millisecond would mint that open's ids
/// again, which a real clock never does, so each open of a run gets its own.
pub async fn open(dir: &Path, clock: &ManualClock, seed: u64) -> Broker {
    let config = BrokerConfig {
        clock: Arc::new(clock.clone()),
        background_timers: false,
        seed: Some(seed),
        ..BrokerConfig::default()
    };
    Broker::open(dir, config).await.expect("open")
}

pub fn key(k: u8) -> Vec<u8> {
    vec![b'k', b'0' + k]
}

/// Producer-chosen id number `c` of the small pool.
pub fn chosen_id(c: u8) -> MessageId {
    MessageId::from(ulid::Ulid::from_parts(T0 as u64, 1 + u128::from(c)))
}

fn is_stale(result: &Result<impl std::fmt::Debug, BrokerError>) -> bool {
    matches!(result, Err(BrokerError::StaleLease { .. }))
}

pub struct Run {
    dir: tempfile::TempDir,
    clock: ManualClock,
    broker: Option<Broker>,
    opens: u64,
    pub model: Model,
}

/// Runs `ops` on a fresh queue configured by `cfg`, then drains it and checks the
/// dead-letter queue.
pub async fn run(cfg: Config, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock, 0).await;
    broker.create_queue(Q, cfg.spec()).await.expect("create");
    let mut run = Run {
        dir,
        clock,
        broker: Some(broker),
        opens: 1,
        model: Model::new(cfg, T0),
    };
    for op in &ops {
        run.step(op).await?;
    }
    run.drain().await
}

impl Run {
    fn broker(&self) -> &Broker {
        self.broker.as_ref().expect("open")
    }

    /// Checks a receive against the model (which has ticked already) and records it.
    async fn receive(
        &mut self,
        consumer: &str,
        max: usize,
        lease_ms: Option<u64>,
    ) -> Result<(), TestCaseError> {
        let lease = lease_ms.map(Duration::from_millis);
        let got = self
            .broker()
            .receive(Q, consumer, max, lease, None)
            .await
            .expect("receive");
        self.model.tick();
        let ready = self.model.ready_by_level();
        let turn = !self.model.cfg.exclusive || self.model.take_turn(consumer);
        let want = if turn {
            self.model.expect_receive(max)
        } else {
            Vec::new()
        };
        let seqs: Vec<u64> = got.iter().map(|m| m.seq).collect();
        prop_assert_eq!(
            &seqs,
            &want,
            "receive(max {}) by {}: ready by level {:?}, its turn {}",
            max,
            consumer,
            ready,
            turn
        );
        let lease_ms = lease_ms.map_or(LEASE_MS, |l| l as i64);
        for r in &got {
            self.record_delivery(r, consumer, lease_ms)?;
        }
        if self.model.cfg.exclusive && !got.is_empty() {
            let holders: std::collections::BTreeSet<&str> = self
                .model
                .msgs
                .iter()
                .filter(|m| matches!(m.state, St::Leased { .. }))
                .filter_map(|m| m.failures.consumer.as_deref())
                .collect();
            prop_assert_eq!(
                holders.into_iter().collect::<Vec<_>>(),
                vec![consumer],
                "an exclusive queue's leases are all the active consumer's"
            );
        }
        Ok(())
    }

    fn record_delivery(
        &mut self,
        r: &ReceivedMessage,
        consumer: &str,
        lease_ms: i64,
    ) -> Result<(), TestCaseError> {
        let seq = r.seq as usize;
        // Across reopens too: a token an earlier delivery had must never come back.
        let earlier: Vec<LeaseToken> = self
            .model
            .leases
            .iter()
            .filter(|l| l.seq == r.seq)
            .map(|l| l.token)
            .collect();
        prop_assert!(
            !earlier.contains(&r.token),
            "seq {} delivered with token {:?} that an earlier delivery of it had ({:?})",
            r.seq,
            r.token,
            earlier
        );
        let uid = self.model.leases.len();
        self.model.leases.push(LeaseRec {
            seq: r.seq,
            token: r.token,
        });
        let until = self.model.now + lease_ms;
        let m = &mut self.model.msgs[seq];
        m.deliveries += 1;
        m.state = St::Leased { uid, until };
        m.consumer_before_lease = m.failures.consumer.replace(consumer.to_owned());
        prop_assert_eq!(r.id, m.id);
        prop_assert_eq!(r.delivery, m.deliveries, "delivery number of seq {}", seq);
        prop_assert_eq!(r.lease_until_ms, until);
        prop_assert_eq!(&r.payload[..], m.payload.as_bytes());
        prop_assert_eq!(r.key.as_deref(), m.key.as_deref());
        prop_assert_eq!(r.priority, m.priority);
        prop_assert_eq!(r.published_at, m.published_at);
        prop_assert!(r.dead_letter.is_none());
        Ok(())
    }

    fn check_stats(&self) -> Result<(), TestCaseError> {
        let m = &self.model;
        prop_assert!(m.settled_in_time(), "model left due work undone");
        let stats = self.broker().describe_queue(Q).expect("describe").stats;
        prop_assert_eq!(stats.next_seq, m.msgs.len() as u64, "stored messages");
        let s = &stats.state;
        prop_assert_eq!(s.tracked, m.count(|m| m.live()), "tracked");
        prop_assert_eq!(
            s.in_flight,
            m.count(|m| matches!(m.state, St::Leased { .. })),
            "in flight"
        );
        let ready: usize = m.ready_by_level().iter().map(|l| l.len()).sum();
        prop_assert_eq!(s.ready, ready, "ready");
        prop_assert_eq!(
            s.delayed,
            m.count(|m| matches!(m.state, St::Scheduled(_))),
            "delayed"
        );
        prop_assert_eq!(s.parked_messages, m.parked_messages(), "parked messages");
        if m.cfg.exclusive {
            prop_assert!(
                s.in_flight <= 1 && s.ready <= 1,
                "an exclusive queue with {} in flight and {} ready",
                s.in_flight,
                s.ready
            );
        }
        prop_assert_eq!(s.bytes, m.bytes(), "bytes");
        let c = &m.counters;
        prop_assert_eq!(
            (
                stats.acked,
                stats.nacked,
                stats.dead_lettered,
                stats.dropped,
                stats.cancelled
            ),
            (
                c.acked,
                c.nacked,
                m.dead().len() as u64,
                c.dropped,
                c.cancelled
            ),
            "counters: acked, nacked, dead-lettered, dropped, cancelled"
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

    /// The `i`-th message of a publish, as the model sees it.
    fn new_message(&self, p: &Publish, i: usize) -> NewMessage {
        let n = self.model.ids.len() + i;
        let payload = format!("{n}.{}", "x".repeat(usize::from(p.pad)));
        let chosen = match &p.id {
            IdChoice::Auto => None,
            IdChoice::Chosen(c) => Some(chosen_id(*c)),
            IdChoice::Reuse(i) if !self.model.ids.is_empty() => {
                Some(self.model.ids[i.index(self.model.ids.len())])
            }
            IdChoice::Reuse(_) => None,
        };
        NewMessage {
            payload,
            key: p.key.map(key),
            priority: p.priority,
            delay_ms: p.delay_ms.map(|d| d as i64),
            ttl_ms: p.ttl_ms.map(|t| t as i64),
            chosen,
            dedup_id: p.dedup.map(|d| format!("dedup-{d}")),
        }
    }

    /// Publishes `batch` — alone with `publish`, or else with `publish_batch`.
    async fn publish(&mut self, batch: &[Publish]) -> Result<(), TestCaseError> {
        let batch: Vec<NewMessage> = batch
            .iter()
            .enumerate()
            .map(|(i, p)| self.new_message(p, i))
            .collect();
        let outgoing: Vec<OutgoingMessage> = batch.iter().map(outgoing).collect();
        let result = match &outgoing[..] {
            [one] => self
                .broker()
                .publish(Q, one.clone())
                .await
                .map(|id| vec![id]),
            _ => self.broker().publish_batch(Q, outgoing).await,
        };
        match self.model.admit(&batch) {
            Admit::Invalid(Invalid::Priority) => {
                prop_assert!(
                    matches!(result, Err(BrokerError::PriorityAboveLevels { .. })),
                    "a priority above the top level of {} level(s) in {:?}: {:?}",
                    self.model.cfg.levels,
                    batch,
                    result
                );
            }
            Admit::Invalid(Invalid::DedupIdWithoutWindow) => {
                prop_assert!(
                    matches!(result, Err(BrokerError::DedupIdWithoutWindow { .. })),
                    "a dedup id on a queue without a window in {:?}: {:?}",
                    batch,
                    result
                );
            }
            Admit::Invalid(Invalid::ExpiresBeforeDelivery) => {
                prop_assert!(
                    matches!(result, Err(BrokerError::ExpiresBeforeDelivery { .. })),
                    "a delay not shorter than the TTL (default {:?}) in {:?}: {:?}",
                    self.model.cfg.default_ttl_ms,
                    batch,
                    result
                );
            }
            Admit::Full => {
                prop_assert!(
                    matches!(result, Err(BrokerError::QueueFull { .. })),
                    "publish of {:?} to a full queue: {:?}",
                    batch,
                    result
                );
            }
            Admit::Accept { duplicates, evict } => {
                let ids = result.expect("publish");
                prop_assert_eq!(ids.len(), batch.len());
                for (i, (m, duplicate)) in batch.iter().zip(&duplicates).enumerate() {
                    let want = match duplicate {
                        Some(Duplicate::Of(original)) => Some(*original),
                        Some(Duplicate::InBatch(j)) => Some(ids[*j]),
                        None => m.chosen,
                    };
                    if let Some(want) = want {
                        prop_assert_eq!(
                            ids[i],
                            want,
                            "id of message {} of the batch ({:?}): a duplicate returns the \
                             original's id, a stored message its chosen id",
                            i,
                            duplicate
                        );
                    }
                }
                self.model.store(batch, &ids, &duplicates, &evict);
            }
        }
        Ok(())
    }

    /// A delivery to act on: its model-side number and what the broker handed out.
    fn pick(&self, t: &Target) -> Option<(usize, LeaseRec)> {
        let pool = if t.stale {
            self.model.stale()
        } else {
            self.model.held()
        };
        let uid = *pool.get(t.pick.index(pool.len().max(1)))?;
        Some((uid, self.model.leases[uid]))
    }

    pub async fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let now = self.model.now;
        match op {
            Op::Publish(p) => self.publish(std::slice::from_ref(p)).await?,
            Op::PublishBatch(batch) => self.publish(batch).await?,
            Op::Receive {
                consumer,
                max,
                lease_ms,
            } => {
                let consumer = format!("c{consumer}");
                self.receive(&consumer, *max, *lease_ms).await?;
            }
            Op::Ack(t) => {
                let Some((uid, rec)) = self.pick(t) else {
                    return Ok(());
                };
                let result = self.broker().ack(Q, rec.seq, rec.token).await;
                let m = &self.model.msgs[rec.seq as usize];
                if self.model.current(uid) {
                    prop_assert_eq!(result.expect("ack"), Acked::Settled);
                    self.model.msgs[rec.seq as usize].state = St::Acked;
                    self.model.acked_by.insert(rec.seq as usize, uid);
                    self.model.counters.acked += 1;
                } else if !m.live() && self.model.is_repeated_ack(rec.seq as usize, uid) {
                    prop_assert_eq!(
                        result.expect("ack of a gone message"),
                        Acked::AlreadySettled
                    );
                } else {
                    prop_assert!(is_stale(&result), "stale ack of {}: {:?}", rec.seq, result);
                }
            }
            Op::Nack(t, delay) => {
                let Some((uid, rec)) = self.pick(t) else {
                    return Ok(());
                };
                let result = self
                    .broker()
                    .nack(
                        Q,
                        rec.seq,
                        rec.token,
                        delay.map(Duration::from_millis),
                        Some("e"),
                    )
                    .await;
                if !self.model.current(uid) {
                    prop_assert!(is_stale(&result), "stale nack of {}: {:?}", rec.seq, result);
                    return Ok(());
                }
                let want = self
                    .model
                    .fail(rec.seq as usize, delay.map(|d| d as i64), "e");
                prop_assert_eq!(result.expect("nack"), want, "nack of seq {}", rec.seq);
            }
            Op::Reject(t) => {
                let Some((uid, rec)) = self.pick(t) else {
                    return Ok(());
                };
                let result = self.broker().reject(Q, rec.seq, rec.token, "bad").await;
                if self.model.current(uid) {
                    result.expect("reject");
                    self.model.reject(rec.seq as usize, "bad");
                } else {
                    prop_assert!(is_stale(&result), "stale reject: {:?}", result);
                }
            }
            Op::Extend(t, by) => {
                let Some((uid, rec)) = self.pick(t) else {
                    return Ok(());
                };
                let result = self
                    .broker()
                    .extend(Q, rec.seq, rec.token, Duration::from_millis(*by))
                    .await;
                if self.model.current(uid) {
                    let until = now + *by as i64;
                    prop_assert_eq!(result.expect("extend"), until);
                    self.model.msgs[rec.seq as usize].state = St::Leased { uid, until };
                } else {
                    prop_assert!(is_stale(&result), "stale extend: {:?}", result);
                }
            }
            Op::ReturnUnsent(t) => {
                let Some((uid, rec)) = self.pick(t) else {
                    return Ok(());
                };
                let result = self.broker().return_unsent(Q, rec.seq, rec.token).await;
                if self.model.current(uid) {
                    result.expect("return_unsent");
                    self.model.return_unsent(rec.seq as usize);
                } else {
                    prop_assert!(is_stale(&result), "stale return: {:?}", result);
                }
            }
            Op::Advance(ms) => self.advance(*ms).await,
            Op::AdvanceToDeadline { pick, early } => {
                let deadlines = self.model.deadlines();
                if deadlines.is_empty() {
                    return Ok(());
                }
                let at = deadlines[pick.index(deadlines.len())] - i64::from(*early);
                self.advance(at - now).await;
            }
            Op::Reopen => self.reopen().await,
            Op::Checkpoint => {
                let report = self
                    .broker()
                    .maintain_now(Checkpoint::Always)
                    .await
                    .expect("maintain");
                prop_assert!(report.checkpoints >= 1, "{:?}", report);
            }
            Op::Park(k) => {
                let parked = self.broker().park(Q, &key(*k)).await;
                let key_shared = self.model.cfg.key_shared;
                match parked {
                    Ok(()) => prop_assert!(key_shared, "parked a key on a queue not key-shared"),
                    Err(BrokerError::NotKeyShared { .. }) => {
                        prop_assert!(!key_shared, "a key-shared queue refused to park")
                    }
                    Err(e) => panic!("park: {e}"),
                }
                if key_shared {
                    self.model.parked.insert(key(*k));
                }
            }
            Op::Unpark(k) => {
                let unparked = self.broker().unpark(Q, &key(*k)).await;
                match unparked {
                    Ok(()) => prop_assert!(self.model.cfg.key_shared, "unparked a key unordered"),
                    Err(BrokerError::NotKeyShared { .. }) => {
                        prop_assert!(!self.model.cfg.key_shared, "a key-shared queue refused")
                    }
                    Err(e) => panic!("unpark: {e}"),
                }
                self.model.parked.remove(&key(*k));
            }
            Op::Cancel { scheduled, pick } => {
                let pool: Vec<MessageId> = if *scheduled {
                    let ids = self
                        .model
                        .msgs
                        .iter()
                        .filter(|m| matches!(m.state, St::Scheduled(_)) && m.deliveries == 0)
                        .map(|m| m.id);
                    ids.collect()
                } else {
                    self.model.ids.clone()
                };
                if pool.is_empty() {
                    return Ok(());
                }
                let id = pool[pick.index(pool.len())];
                let result = self.broker().cancel(Q, id).await.expect("cancel");
                let want = self.model.cancellable(id);
                prop_assert_eq!(
                    result,
                    want.is_some(),
                    "cancel of {} (latest scheduled never-delivered seq with it: {:?})",
                    id,
                    want
                );
                if let Some(seq) = want {
                    self.model.msgs[seq].state = St::Cancelled;
                    self.model.counters.cancelled += 1;
                }
            }
        }
        self.check_stats()
    }

    async fn advance(&mut self, ms: i64) {
        self.clock.advance(ms);
        self.model.now += ms;
        self.broker().tick_now().await.expect("tick");
        self.model.tick();
    }

    pub async fn reopen(&mut self) {
        drop(self.broker.take());
        self.broker = Some(open(self.dir.path(), &self.clock, self.opens).await);
        self.opens += 1;
        self.model.reopen();
    }

    /// Unparks every key, then advances far and receives and acks until nothing is left,
    /// and checks every dead letter: seq → (reason, deliveries), id, payload, key, priority,
    /// and its failures and consumer.
    async fn drain(&mut self) -> Result<(), TestCaseError> {
        let parked: Vec<Vec<u8>> = self.model.parked.iter().cloned().collect();
        for k in parked {
            self.broker().unpark(Q, &k).await.expect("unpark");
            self.model.parked.remove(&k);
        }
        for _ in 0..100 {
            if self.model.msgs.iter().all(|m| !m.live()) {
                break;
            }
            self.step(&Op::Advance(24 * 3_600_000)).await?;
            loop {
                self.receive("drain", 10_000, None).await?;
                let held: Vec<LeaseRec> = self
                    .model
                    .held()
                    .into_iter()
                    .map(|u| self.model.leases[u])
                    .collect();
                if held.is_empty() {
                    break;
                }
                for l in held {
                    let acked = self.broker().ack(Q, l.seq, l.token).await.expect("ack");
                    prop_assert_eq!(acked, Acked::Settled);
                    self.model.msgs[l.seq as usize].state = St::Acked;
                    self.model.counters.acked += 1;
                }
                self.check_stats()?;
            }
        }
        prop_assert!(
            self.model.msgs.iter().all(|m| !m.live()),
            "every message settled, dropped, cancelled or dead-lettered after the drain"
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
            prop_assert_eq!(l.key.as_deref(), m.key.as_deref());
            prop_assert_eq!(l.priority, m.priority);
            prop_assert_eq!(info.origin_published_at, m.published_at);
            let reported = Failures {
                last_error: info.last_error.clone(),
                first_ms: info.first_failure_ms,
                last_ms: info.last_failure_ms,
                consumer: info.consumer.clone(),
            };
            prop_assert_eq!(
                &reported,
                &m.failures,
                "failures of dead letter seq {}",
                info.origin_seq
            );
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

fn outgoing(m: &NewMessage) -> OutgoingMessage {
    let mut out = OutgoingMessage::new(m.payload.clone()).with_priority(m.priority);
    if let Some(k) = &m.key {
        out = out.with_key(k.clone());
    }
    if let Some(d) = m.delay_ms {
        out = out.with_delay(Duration::from_millis(d as u64));
    }
    if let Some(t) = m.ttl_ms {
        out = out.with_ttl(Duration::from_millis(t as u64));
    }
    if let Some(c) = m.chosen {
        out = out.with_id(c);
    }
    if let Some(d) = &m.dedup_id {
        out = out.with_dedup_id(d.clone());
    }
    out
}

/// Runs `f` on a fresh current-thread runtime: a proptest body is synchronous.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}
