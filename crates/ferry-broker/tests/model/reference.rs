//! The reference model: every message by seq in a plain `Vec`, readiness derived by linear
//! scans, time a comparison with `now`. It knows nothing of timers, indexes or journals; the
//! rules it follows, all from the broker's documentation, are listed in `tests/model.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ferry_broker::{DeadLetterReason, LeaseToken, LengthLimit, MessageId, Nacked, OverflowPolicy};

use crate::ops::Config;

pub const MAX_DELIVERIES: u32 = 3;
pub const LEASE_MS: i64 = 10_000;
/// Fixed-point 1.0 of the priority credit: the priority module keeps shares in billionths.
const ONE: u64 = 1_000_000_000;

/// `min(1 s × 2^(d−1), 4 s)`: the spec's backoff without jitter.
pub fn backoff_ms(deliveries: u32) -> i64 {
    (1_000i64 << (deliveries.max(1) - 1).min(10)).min(4_000)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum St {
    /// Waiting for a delay or retry backoff to end at this time.
    Scheduled(i64),
    /// Neither waiting for time nor in flight: ready unless its key holds it back.
    Idle,
    /// In flight under the lease with model-side delivery number `uid`.
    Leased {
        uid: usize,
        until: i64,
    },
    Acked,
    Dead(DeadLetterReason),
    Dropped,
    Cancelled,
}

#[derive(Debug)]
pub struct Msg {
    pub id: MessageId,
    pub payload: String,
    pub key: Option<Vec<u8>>,
    /// As published: a publish refuses one above the top level, so this is its level too.
    pub priority: u8,
    pub level: u8,
    pub published_at: i64,
    pub expires_at: Option<i64>,
    /// Payload and key bytes (no headers here): what `max_bytes` counts.
    pub size: u64,
    pub deliveries: u32,
    pub state: St,
    /// What its dead letter reports: the failed attempts (nack, lease expiry, reject) and
    /// the consumer of the last delivery.
    pub failures: Failures,
    /// The consumer its dead letter named before the running lease: what a return of that
    /// lease as unsent puts back.
    pub consumer_before_lease: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Failures {
    pub last_error: Option<String>,
    pub first_ms: Option<i64>,
    pub last_ms: Option<i64>,
    pub consumer: Option<String>,
}

impl Failures {
    fn failed(&mut self, now: i64, error: &str) {
        self.first_ms.get_or_insert(now);
        self.last_ms = Some(now);
        self.last_error = Some(error.to_owned());
    }
}

impl Msg {
    pub fn live(&self) -> bool {
        matches!(self.state, St::Scheduled(_) | St::Idle | St::Leased { .. })
    }

    fn leased(&self) -> bool {
        matches!(self.state, St::Leased { .. })
    }

    /// "Never delivered at or after" `expires_at`.
    fn expired(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }
}

/// One delivery the broker handed out (the model's identity for it is its index).
#[derive(Debug, Clone, Copy)]
pub struct LeaseRec {
    pub seq: u64,
    pub token: LeaseToken,
}

/// The stats counters, which count since the queue was created.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    pub acked: u64,
    pub nacked: u64,
    pub dropped: u64,
    pub cancelled: u64,
}

/// A publish as the model sees it, before the broker answers.
#[derive(Debug, Clone)]
pub struct NewMessage {
    pub payload: String,
    pub key: Option<Vec<u8>>,
    pub priority: u8,
    pub delay_ms: Option<i64>,
    pub ttl_ms: Option<i64>,
    pub chosen: Option<MessageId>,
    pub dedup_id: Option<String>,
}

impl NewMessage {
    fn size(&self) -> u64 {
        (self.payload.len() + self.key.as_ref().map_or(0, Vec::len)) as u64
    }

    /// Its dedup key: the dedup id, else the id when the producer chose it (lib docs). The
    /// prefixes keep a dedup id from ever matching a message id.
    fn dedup_key(&self) -> Option<String> {
        match (&self.dedup_id, self.chosen) {
            (Some(d), _) => Some(format!("d:{d}")),
            (None, Some(id)) => Some(format!("i:{id}")),
            (None, None) => None,
        }
    }
}

/// A message of a batch that is not stored: the id its publish returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Duplicate {
    /// Published before, within the dedup window.
    Of(MessageId),
    /// Repeats the key of this earlier message of the same batch, which is stored.
    InBatch(usize),
}

/// Why a message is refused at publish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invalid {
    /// `PriorityAboveLevels`: a priority above the queue's top level.
    Priority,
    /// `DedupIdWithoutWindow`: a dedup id on a queue without a dedup window.
    DedupIdWithoutWindow,
    /// `ExpiresBeforeDelivery`: a TTL (the message's own or the queue's default) that ends
    /// before the delay does.
    ExpiresBeforeDelivery,
}

/// What a publish (or a batch, taken whole) must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admit {
    /// The first invalid message of the batch, and so its error; the whole batch stores
    /// nothing.
    Invalid(Invalid),
    /// `QueueFull`: stores nothing, evicts nothing.
    Full,
    /// Per message, `Some` for a duplicate and `None` for one to store; the stored ones go
    /// in after evicting `evict` (overflow `DropHead` / `DeadLetterHead`).
    Accept {
        duplicates: Vec<Option<Duplicate>>,
        evict: Vec<u64>,
    },
}

#[derive(Debug)]
pub struct Model {
    pub cfg: Config,
    pub now: i64,
    /// Indexed by seq.
    pub msgs: Vec<Msg>,
    /// Dedup key → (original id, when it entered the window).
    dedup: HashMap<String, (MessageId, i64)>,
    /// Every id returned by a publish.
    pub ids: Vec<MessageId>,
    pub leases: Vec<LeaseRec>,
    /// Parked keys (key-shared queues only); durable.
    pub parked: BTreeSet<Vec<u8>>,
    /// The priority picker's credit, in billionths; in memory, so 0 after a reopen.
    credit: u64,
    /// Exclusive queues: the active consumer and when it last asked to receive (and was
    /// let); in memory, so none after a reopen.
    active: Option<(String, i64)>,
    pub counters: Counters,
    /// Seq → the delivery (`uid`) whose ack settled it.
    pub acked_by: HashMap<usize, usize>,
    /// The seqs already gone when the broker last reopened: what the broker remembered of
    /// who settled them was in memory, so any ack of them is taken as a repeat.
    gone_before_reopen: BTreeSet<usize>,
}

impl Model {
    pub fn new(cfg: Config, now: i64) -> Model {
        Model {
            cfg,
            now,
            msgs: Vec::new(),
            dedup: HashMap::new(),
            ids: Vec::new(),
            leases: Vec::new(),
            parked: BTreeSet::new(),
            credit: 0,
            active: None,
            counters: Counters::default(),
            acked_by: HashMap::new(),
            gone_before_reopen: BTreeSet::new(),
        }
    }

    /// Whether an ack by delivery `uid` of the gone message `seq` is a repeat
    /// (`AlreadySettled`) rather than stale: the broker remembers who settled a message
    /// that had several deliveries (or left without an ack after one), so only the
    /// delivery that acked it may repeat its ack; a message acked on its only delivery, or
    /// never delivered, takes any ack as a repeat — as does one gone before a reopen.
    pub fn is_repeated_ack(&self, seq: usize, uid: usize) -> bool {
        if self.gone_before_reopen.contains(&seq) {
            return true;
        }
        let m = &self.msgs[seq];
        match (&m.state, self.acked_by.get(&seq)) {
            _ if m.deliveries == 0 => true,
            (St::Acked, _) if m.deliveries == 1 => true,
            (St::Acked, Some(&by)) => by == uid,
            _ => false,
        }
    }

    // ---- Publish ----

    pub fn admit(&self, batch: &[NewMessage]) -> Admit {
        let invalid = batch.iter().find_map(|m| {
            if m.priority >= self.cfg.levels {
                Some(Invalid::Priority)
            } else if m.dedup_id.is_some() && self.cfg.dedup_window_ms == 0 {
                Some(Invalid::DedupIdWithoutWindow)
            } else {
                m.ttl_ms
                    .or(self.cfg.default_ttl_ms)
                    .is_some_and(|ttl| m.delay_ms.unwrap_or(0) >= ttl)
                    .then_some(Invalid::ExpiresBeforeDelivery)
            }
        });
        if let Some(invalid) = invalid {
            return Admit::Invalid(invalid);
        }
        let dedup = self.cfg.dedup_window_ms > 0;
        let mut in_batch: HashMap<String, usize> = HashMap::new();
        let mut duplicates = Vec::new();
        let (mut count, mut size) = (0, 0);
        for (i, m) in batch.iter().enumerate() {
            let key = m.dedup_key().filter(|_| dedup);
            let window = key
                .as_ref()
                .and_then(|k| self.dedup.get(k))
                .and_then(|&(id, at)| {
                    (self.now - at < self.cfg.dedup_window_ms).then_some(Duplicate::Of(id))
                });
            let earlier = key
                .as_ref()
                .and_then(|k| in_batch.get(k))
                .map(|&j| Duplicate::InBatch(j));
            let duplicate = window.or(earlier);
            if duplicate.is_none() {
                if let Some(k) = key {
                    in_batch.insert(k, i);
                }
                count += 1;
                size += m.size();
            }
            duplicates.push(duplicate);
        }
        let accept = |evict| Admit::Accept {
            duplicates: duplicates.clone(),
            evict,
        };
        if count == 0 || !self.cfg.limited() {
            return accept(Vec::new());
        }
        let limit = &self.cfg.limit;
        let live = self.msgs.iter().filter(|m| m.live());
        let mut messages = live.clone().count() as u64 + count;
        let mut bytes = live.map(|m| m.size).sum::<u64>() + size;
        if fits(limit, messages, bytes) {
            return accept(Vec::new());
        }
        if limit.overflow == OverflowPolicy::RejectPublish || !fits(limit, count, size) {
            return Admit::Full;
        }
        // The oldest messages not in flight go first; in-flight ones are never evicted.
        let mut evict = Vec::new();
        for (seq, old) in self.msgs.iter().enumerate() {
            if fits(limit, messages, bytes) {
                break;
            }
            if old.live() && !old.leased() {
                evict.push(seq as u64);
                messages -= 1;
                bytes -= old.size;
            }
        }
        if fits(limit, messages, bytes) {
            accept(evict)
        } else {
            Admit::Full
        }
    }

    /// Applies an accepted batch: evicts, then stores each message that is not a duplicate
    /// with the id the broker returned for it.
    pub fn store(
        &mut self,
        batch: Vec<NewMessage>,
        ids: &[MessageId],
        duplicates: &[Option<Duplicate>],
        evict: &[u64],
    ) {
        let dead_letter = self.cfg.limit.overflow == OverflowPolicy::DeadLetterHead;
        for &seq in evict {
            self.msgs[seq as usize].state = if dead_letter {
                St::Dead(DeadLetterReason::Overflow)
            } else {
                self.counters.dropped += 1;
                St::Dropped
            };
        }
        let now = self.now;
        for ((m, &id), duplicate) in batch.into_iter().zip(ids).zip(duplicates) {
            self.ids.push(id);
            if duplicate.is_some() {
                continue;
            }
            if self.cfg.dedup_window_ms > 0
                && let Some(key) = m.dedup_key()
            {
                self.dedup.insert(key, (id, now));
            }
            let state = match m.delay_ms {
                Some(d) if d > 0 => St::Scheduled(now + d),
                _ => St::Idle,
            };
            let ttl = m.ttl_ms.or(self.cfg.default_ttl_ms);
            let level = m.priority;
            self.msgs.push(Msg {
                id,
                size: m.size(),
                payload: m.payload,
                key: m.key,
                priority: m.priority,
                level,
                published_at: now,
                expires_at: ttl.map(|t| now + t),
                deliveries: 0,
                state,
                failures: Failures::default(),
                consumer_before_lease: None,
            });
        }
    }

    // ---- Time ----

    /// Fires everything due at `now`: ended leases fail their attempt, ended delays and
    /// backoffs make messages ready, passed TTLs dead-letter messages not in flight.
    pub fn tick(&mut self) {
        let now = self.now;
        for seq in 0..self.msgs.len() {
            if let St::Leased { until, .. } = self.msgs[seq].state
                && until <= now
            {
                self.fail(seq, None, "lease expired");
            }
        }
        for m in &mut self.msgs {
            if let St::Scheduled(at) = m.state
                && at <= now
            {
                m.state = St::Idle;
            }
            if m.live() && !m.leased() && m.expired(now) {
                m.state = St::Dead(DeadLetterReason::Expired);
            }
        }
    }

    /// A failed attempt (nack or lease expiry): `max_deliveries` if the deliveries are used
    /// up, else `expired` if the TTL has passed, else a retry after `delay` or the backoff.
    pub fn fail(&mut self, seq: usize, delay: Option<i64>, error: &str) -> Nacked {
        let now = self.now;
        let m = &mut self.msgs[seq];
        m.failures.failed(now, error);
        let reason = if m.deliveries >= MAX_DELIVERIES {
            DeadLetterReason::MaxDeliveries
        } else if m.expired(now) {
            DeadLetterReason::Expired
        } else {
            let at = now + delay.unwrap_or_else(|| backoff_ms(m.deliveries));
            self.counters.nacked += 1;
            m.state = if at > now {
                St::Scheduled(at)
            } else {
                St::Idle
            };
            return Nacked::RetryAt(at);
        };
        m.state = St::Dead(reason);
        Nacked::DeadLettered(reason)
    }

    /// A lease given back as never sent: no attempt spent, the deliveries and the consumer
    /// as before that lease, ready at once — or dead-lettered (`expired`) if its TTL passed
    /// meanwhile, as when an attempt ends.
    pub fn return_unsent(&mut self, seq: usize) {
        let now = self.now;
        let m = &mut self.msgs[seq];
        m.deliveries -= 1;
        m.failures.consumer = m.consumer_before_lease.take();
        m.state = if m.expired(now) {
            St::Dead(DeadLetterReason::Expired)
        } else {
            St::Idle
        };
    }

    /// A reject: a permanent failure, dead-lettered now with reason `rejected`.
    pub fn reject(&mut self, seq: usize, reason: &str) {
        let m = &mut self.msgs[seq];
        m.failures.failed(self.now, reason);
        m.state = St::Dead(DeadLetterReason::Rejected);
    }

    /// The broker reopened at `now`: a message whose TTL has passed is dead-lettered
    /// (`expired`), then one whose last delivery was running and used up its deliveries
    /// (`max_deliveries`, that last attempt failing at the reopen with the error "delivery
    /// interrupted by a broker restart"); other running leases end at their deadline.
    /// Parked keys, the dedup window, the counters and what dead letters report of earlier
    /// attempts survive; the picker's credit starts over.
    pub fn reopen(&mut self) {
        let now = self.now;
        let gone = self.msgs.iter().enumerate().filter(|(_, m)| !m.live());
        self.gone_before_reopen = gone.map(|(seq, _)| seq).collect();
        for m in &mut self.msgs {
            if !m.live() {
                continue;
            }
            if m.expired(now) {
                m.state = St::Dead(DeadLetterReason::Expired);
                continue;
            }
            let at = match m.state {
                St::Leased { .. } if m.deliveries >= MAX_DELIVERIES => {
                    m.failures
                        .failed(now, "delivery interrupted by a broker restart");
                    m.state = St::Dead(DeadLetterReason::MaxDeliveries);
                    continue;
                }
                St::Leased { until, .. } => until,
                St::Scheduled(at) => at,
                _ => continue,
            };
            m.state = if at <= now {
                St::Idle
            } else {
                St::Scheduled(at)
            };
        }
        self.credit = 0;
        self.active = None;
    }

    // ---- Delivery ----

    /// Seqs that are the head of their key's line (the oldest live message of the key).
    fn heads(&self) -> HashMap<&[u8], usize> {
        let mut heads = HashMap::new();
        for (seq, m) in self.msgs.iter().enumerate() {
            if let (true, Some(k)) = (m.live(), &m.key) {
                heads.entry(&k[..]).or_insert(seq);
            }
        }
        heads
    }

    /// Ready messages by level: idle, and on a key-shared queue keyless or the head of a
    /// key that is not parked; on an exclusive queue, while none is in flight, the oldest
    /// live message, keyed or not, that is not waiting for its publish delay (a delayed
    /// message holds back nothing; a retry holds back everything published after it).
    pub fn ready_by_level(&self) -> Vec<BTreeSet<u64>> {
        let heads = self.heads();
        let in_line =
            |m: &Msg| m.live() && !(matches!(m.state, St::Scheduled(_)) && m.deliveries == 0);
        let oldest = if self.msgs.iter().any(Msg::leased) {
            None
        } else {
            self.msgs.iter().position(in_line)
        };
        let mut ready = vec![BTreeSet::new(); usize::from(self.cfg.levels)];
        for (seq, m) in self.msgs.iter().enumerate() {
            if m.state != St::Idle {
                continue;
            }
            let free = match (&m.key, self.cfg.key_shared) {
                _ if self.cfg.exclusive => oldest == Some(seq),
                (Some(k), true) => heads[&k[..]] == seq && !self.parked.contains(k),
                _ => true,
            };
            if free {
                ready[usize::from(m.level)].insert(seq as u64);
            }
        }
        ready
    }

    /// The seqs a `receive(max)` must hand out, in order, by the priority picker's rule:
    /// every pick adds the share to the credit; with a lower level ready and a credit of at
    /// least 1 the highest ready level below the top one is served and 1 is spent, else the
    /// top level; with no lower level ready the credit is capped at 1. Publish order within
    /// a level. Taking a key's head never makes another message ready, so one readiness
    /// snapshot serves the whole receive.
    pub fn expect_receive(&mut self, max: usize) -> Vec<u64> {
        let mut ready = self.ready_by_level();
        let share = self.cfg.share_millis * (ONE / 1000);
        let mut out = Vec::new();
        while out.len() < max {
            let mut levels = (0..ready.len()).rev().filter(|&l| !ready[l].is_empty());
            let Some(top) = levels.next() else {
                break;
            };
            let lower = levels.next();
            self.credit += share;
            let level = match lower {
                Some(lower) if self.credit >= ONE => {
                    self.credit -= ONE;
                    lower
                }
                _ => top,
            };
            if lower.is_none() {
                self.credit = self.credit.min(ONE);
            }
            out.push(ready[level].pop_first().expect("a ready level"));
        }
        out
    }

    /// Exclusive queues: whether `consumer` is, or now becomes, the active consumer. The
    /// active one stays active while it holds a lease or asked within the queue's lease
    /// duration; anyone else gets nothing until then, and takes over after.
    pub fn take_turn(&mut self, consumer: &str) -> bool {
        if let Some((active, asked)) = &self.active
            && active != consumer
        {
            let holds = self
                .msgs
                .iter()
                .any(|m| m.leased() && m.failures.consumer.as_deref() == Some(active.as_str()));
            if holds || self.now - asked < LEASE_MS {
                return false;
            }
        }
        self.active = Some((consumer.to_owned(), self.now));
        true
    }

    /// Whether lease `uid` is the current lease of its message.
    pub fn current(&self, uid: usize) -> bool {
        let seq = self.leases[uid].seq as usize;
        matches!(self.msgs[seq].state, St::Leased { uid: u, .. } if u == uid)
    }

    pub fn held(&self) -> Vec<usize> {
        (0..self.leases.len())
            .filter(|&u| self.current(u))
            .collect()
    }

    pub fn stale(&self) -> Vec<usize> {
        (0..self.leases.len())
            .filter(|&u| !self.current(u))
            .collect()
    }

    // ---- Cancel ----

    /// The seq `cancel(id)` must cancel: the latest scheduled, never-delivered message with
    /// this id.
    pub fn cancellable(&self, id: MessageId) -> Option<usize> {
        (0..self.msgs.len()).rev().find(|&s| {
            let m = &self.msgs[s];
            m.id == id && matches!(m.state, St::Scheduled(_)) && m.deliveries == 0
        })
    }

    /// Every time after now at which something is due: lease ends, delay and backoff
    /// ends, expiries of live messages, ends of dedup windows.
    pub fn deadlines(&self) -> Vec<i64> {
        let mut times: BTreeSet<i64> = BTreeSet::new();
        for m in self.msgs.iter().filter(|m| m.live()) {
            match m.state {
                St::Scheduled(at) | St::Leased { until: at, .. } => times.insert(at),
                _ => false,
            };
            times.extend(m.expires_at);
        }
        if self.cfg.dedup_window_ms > 0 {
            times.extend(
                self.dedup
                    .values()
                    .map(|(_, at)| at + self.cfg.dedup_window_ms),
            );
        }
        times.into_iter().filter(|&t| t > self.now).collect()
    }

    // ---- Views for the checks ----

    pub fn count(&self, f: impl Fn(&Msg) -> bool) -> usize {
        self.msgs.iter().filter(|m| f(m)).count()
    }

    /// Live messages of parked keys that are not in flight (delayed ones included).
    pub fn parked_messages(&self) -> usize {
        if !self.cfg.key_shared {
            return 0;
        }
        self.count(|m| {
            m.live() && !m.leased() && m.key.as_ref().is_some_and(|k| self.parked.contains(k))
        })
    }

    pub fn bytes(&self) -> u64 {
        self.msgs.iter().filter(|m| m.live()).map(|m| m.size).sum()
    }

    /// Dead letters: seq → (reason, deliveries).
    pub fn dead(&self) -> BTreeMap<u64, (DeadLetterReason, u32)> {
        self.msgs
            .iter()
            .enumerate()
            .filter_map(|(s, m)| match m.state {
                St::Dead(r) => Some((s as u64, (r, m.deliveries))),
                _ => None,
            })
            .collect()
    }

    /// Every clock advance is followed by a tick, so between steps nothing the tick would
    /// act on is left: no delay or backoff has ended and no message outside a lease has
    /// outlived its TTL. The model relies on this (it never has to decide what an operation
    /// does with a message a tick has not caught up with yet).
    pub fn settled_in_time(&self) -> bool {
        self.msgs.iter().all(|m| match m.state {
            St::Scheduled(at) => at > self.now && !m.expired(self.now),
            St::Idle => !m.expired(self.now),
            _ => true,
        })
    }
}

fn fits(limit: &LengthLimit, messages: u64, bytes: u64) -> bool {
    limit.max_messages.is_none_or(|max| messages <= max)
        && limit.max_bytes.is_none_or(|max| bytes <= max)
}
