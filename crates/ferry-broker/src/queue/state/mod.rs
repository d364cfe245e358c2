//! The delivery state machine of one queue: which of the messages the engine holds in memory
//! is ready, delayed, waiting for its key or in flight, and what happens on receive, ack,
//! nack, reject, lease extension and the passing of time.
//!
//! [`QueueState`] is pure and synchronous. It never reads a clock (every call takes `now_ms`
//! from the engine's injectable clock), never sleeps, and draws randomness only from its own
//! seeded RNG, for backoff jitter. It holds no payloads and persists nothing: it returns
//! decisions — [`Delivery`]s from [`receive`](QueueState::receive), and [`Effect`]s (settled,
//! dead-lettered, became ready) from [`take_effects`](QueueState::take_effects) — which the
//! engine makes durable and acts on. After a restart the engine rebuilds it by
//! [`track`](QueueState::track)ing its window in publish order, with delivery counts restored.
//!
//! **Time advances only through [`tick`](QueueState::tick).** A lease, delay, retry backoff or
//! TTL that has passed takes effect when `tick` processes its timer, not before: an ack that
//! arrives after its lease's deadline but before the tick still settles the message (its
//! lease is still the current one), and a delayed message is not received until a tick has
//! released it. The engine ticks at [`next_wakeup`](QueueState::next_wakeup) and before each
//! receive. The one exception is TTL: a message whose TTL has passed is never delivered, even
//! if no tick has expired it yet — `receive` dead-letters it instead.
//!
//! **A message is in exactly one place.** Tracked (ready, delayed, waiting for its key or in
//! flight), or gone — settled or dead-lettered, announced once through an effect. A message
//! that is gone is forgotten: nothing here grows with the history of the queue — save a
//! bounded record of who settled the recent messages that had more than one delivery (or
//! left without an ack after one), so that a late ack from an earlier delivery is refused as
//! stale instead of answered as a repeat ([`SettledBy`]).
//!
//! **Memory.** A tracked message costs a 48-byte entry in a `SeqMap` (dense chunks by
//! seq, about the entry's own size per message) and, while ready, a place in a run of its
//! level's ready seqs (a backlog is mostly one run). Leases, failure records, timers (delays,
//! retries, TTLs, leases), keys and scheduled ids cost more, only for the messages that have
//! them.
//!
//! **Runs of a key.** A receive may ask for several consecutive messages of a key at once
//! ([`PerKey::Consecutive`], [`receive_per_key`](QueueState::receive_per_key)); the key is
//! held until all of them are settled or have failed, and one that failed goes out again
//! before anything behind it ([`KeyOrder`]'s module docs have the rule). Every other receive
//! takes one message per key.
//!
//! **Exclusive order.** One message at a time, in publish order: every message waits in one
//! line ([`KeyOrder`] under one implicit key) and only its head is delivered (or, when a
//! receive asks for a run, its head and the messages right behind it). A message
//! published with a delay joins the line only when the delay ends, at its publish-order
//! place (never in front of a delivery in flight), so a delayed message holds back nothing
//! published after it; a retry keeps its place at the head, in front of everything
//! published after it, for its backoff too.
//!
//! **Failed attempts.** A nack and a lease expiry are the same event: the attempt failed. If
//! the message has had `retry.max_deliveries` deliveries it is dead-lettered with reason
//! `max_deliveries`; otherwise, if its TTL has passed, with reason `expired`; otherwise it is
//! redelivered after the nack's explicit delay or the backoff for its attempt. A lease given
//! back as never sent ([`return_unsent`](QueueState::return_unsent)) is no attempt: it is
//! undone, delivery count and all.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

mod decisions;
mod failure;
mod inspect;
mod removal;
mod seq_map;
mod settled_by;
mod unsent;

use failure::{History, decision, truncate_error};
pub use removal::Eviction;
use seq_map::SeqMap;
use settled_by::{SettledBy, Settler};

use crate::error::{BrokerError, Result};
use crate::message::millis;
use crate::message_id::MessageId;
use crate::queue::key_order::{KeyOrder, KeyedState, PerKey};
use crate::queue::priority::PriorityPicker;
use crate::queue::seq_ranges::SeqRanges;
use crate::queue::timers::TimerQueue;
use crate::retry::RetryPolicy;
use crate::spec::{OrderingMode, OverflowPolicy, QueueSpec};

pub use decisions::{
    Acked, DeadLetterDecision, DeadLetterReason, Delivery, Effect, FailureRecord, INTERRUPTED,
    LeaseToken, MAX_ERROR_LEN, Nacked, QueueStateStats, RestorePoint, Seq, Tracked,
};

/// The one line every message of an exclusive queue waits in, as if they all had this key.
const EXCLUSIVE_LINE: &[u8] = &[];

/// Whether [`QueueState::refresh`] announces a message that became ready with an
/// [`Effect::Ready`]: not one just tracked, whose publisher wakes the receivers itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Announce {
    Ready,
    Silently,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Timer {
    /// The delay or retry backoff ends.
    Due(Seq),
    Lease(Seq),
    Expiry(Seq),
}

#[derive(Debug)]
struct Lease {
    token: LeaseToken,
    consumer: Arc<str>,
    until_ms: i64,
}

/// What every tracked message costs: 48 bytes, in a [`SeqMap`]. What only some need — a
/// running lease, the record of failed attempts — lives in side maps.
#[derive(Debug, Clone, Copy)]
struct Entry {
    id: MessageId,
    /// When it last became deliverable as far as time goes (for the oldest-ready age).
    eligible_since_ms: i64,
    /// `i64::MAX` without a TTL.
    expires_at_ms: i64,
    size: u32,
    deliveries: u32,
    level: u8,
    /// Waiting for a `Due` timer.
    scheduled: bool,
    /// In flight: its lease is in `QueueState::leases`.
    leased: bool,
}

impl Default for Entry {
    fn default() -> Self {
        Entry {
            id: MessageId::NIL,
            eligible_since_ms: 0,
            expires_at_ms: i64::MAX,
            size: 0,
            deliveries: 0,
            level: 0,
            scheduled: false,
            leased: false,
        }
    }
}

impl Entry {
    fn expired(&self, now_ms: i64) -> bool {
        self.expires_at_ms <= now_ms
    }

    fn expires_at(&self) -> Option<i64> {
        (self.expires_at_ms != i64::MAX).then_some(self.expires_at_ms)
    }
}

#[derive(Debug, Default)]
struct Consumer {
    prefetch: Option<usize>,
    in_flight: usize,
}

/// The delivery state machine of one queue; see the [module docs](self).
#[derive(Debug)]
pub struct QueueState {
    retry: RetryPolicy,
    default_lease: Duration,
    key_shared: bool,
    /// `OrderingMode::Exclusive`: one consumer at a time, one message at a time.
    exclusive: bool,
    /// Under `exclusive`, the active consumer and when it last asked to receive.
    active: Option<(Arc<str>, i64)>,
    rng: fastrand::Rng,
    entries: SeqMap<Entry>,
    /// Leases of the messages in flight.
    leases: HashMap<Seq, Lease>,
    /// Failed attempts (and the last consumer once a lease has ended) of messages that had
    /// any.
    history: HashMap<Seq, History>,
    /// Deliverable messages by level, FIFO by seq: not in flight, not delayed, and (key-shared)
    /// Ready in `keys`. As runs: a backlog is mostly one.
    ready: Vec<SeqRanges>,
    timers: TimerQueue<Timer>,
    keys: KeyOrder,
    picker: PriorityPicker,
    consumers: HashMap<Arc<str>, Consumer>,
    next_token: u64,
    effects: Vec<Effect>,
    in_flight: usize,
    scheduled: usize,
    bytes: u64,
    /// Whether the length limit makes room by evicting the head (`DropHead`,
    /// `DeadLetterHead`), so [`evictable_head`](Self::evictable_head) has work.
    evicts_head: bool,
    /// (id, seq) of the messages that are scheduled and never delivered (the ones
    /// [`cancel_id`](Self::cancel_id) can cancel) — only those, so it stays as small as the
    /// set of delayed messages. Ordered, so that the latest of several sharing an id is
    /// found, and the others after it.
    scheduled_ids: BTreeSet<(MessageId, Seq)>,
    /// Who settled the recent messages that a late ack of an earlier delivery could still
    /// name (bounded; see [`SettledBy`]).
    settled_by: SettledBy,
}

impl QueueState {
    /// Makes lease tokens start at `base`: the engine passes a base that differs on every
    /// open, so a token handed out before a restart never matches a delivery made after it.
    pub fn set_token_base(&mut self, base: u64) {
        self.next_token = self.next_token.max(base).max(1);
    }

    /// The state of an empty queue with this spec; `seed` seeds the backoff jitter.
    pub fn new(spec: &QueueSpec, seed: u64) -> Result<Self> {
        spec.validate()?;
        Ok(QueueState {
            retry: spec.retry,
            default_lease: spec.lease,
            // Exclusive orders every message as if they all had one key.
            key_shared: spec.ordering != OrderingMode::Shared,
            exclusive: spec.ordering == OrderingMode::Exclusive,
            active: None,
            rng: fastrand::Rng::with_seed(seed),
            entries: SeqMap::new(),
            leases: HashMap::new(),
            history: HashMap::new(),
            ready: vec![SeqRanges::new(); usize::from(spec.priority_levels)],
            timers: TimerQueue::new(),
            keys: KeyOrder::new(),
            picker: PriorityPicker::for_spec(spec)?,
            consumers: HashMap::new(),
            next_token: 1,
            effects: Vec::new(),
            in_flight: 0,
            scheduled: 0,
            bytes: 0,
            evicts_head: evicts_head(spec),
            scheduled_ids: BTreeSet::new(),
            settled_by: SettledBy::default(),
        })
    }

    /// Takes the settings of `spec` that may change on a live queue (see
    /// `Broker::update_queue`): the retry policy and the default lease apply from the next
    /// failed attempt and the next receive — leases running keep their deadlines — and the
    /// overflow policy and the priority share from the next publish and pick. The settings
    /// that shape the state itself (ordering, priority levels) are the caller's to keep.
    pub fn reconfigure(&mut self, spec: &QueueSpec) {
        debug_assert_eq!(self.ready.len(), usize::from(spec.priority_levels));
        self.retry = spec.retry;
        self.default_lease = spec.lease;
        self.evicts_head = evicts_head(spec);
        self.picker.set_lower_share(spec.lower_priority_share);
    }

    /// Loads a message into the window. Messages are tracked in increasing `seq` order (the
    /// key-shared order relies on it); a `seq` already tracked is ignored (and is a bug,
    /// checked in debug builds).
    ///
    /// A message whose TTL has passed is dead-lettered (`expired`) at once. So is a restored
    /// message whose deliveries are used up (`max_deliveries`): its last delivery was running
    /// when the broker stopped, and a delivery that ends without an ack is a failed attempt.
    pub fn track(&mut self, msg: Tracked, now_ms: i64) {
        self.track_restored(msg, FailureRecord::default(), now_ms);
    }

    /// [`track`](Self::track) for a message restored after a restart, with what its failed
    /// attempts before the restart left for its dead letter.
    pub fn track_restored(&mut self, msg: Tracked, failures: FailureRecord, now_ms: i64) {
        debug_assert!(
            !self.entries.contains(msg.seq),
            "seq {} tracked twice",
            msg.seq
        );
        if self.entries.contains(msg.seq) {
            return;
        }
        let seq = msg.seq;
        let entry = Entry {
            id: msg.id,
            level: msg.level.min(self.top_level()),
            eligible_since_ms: msg.deliver_at_ms,
            expires_at_ms: msg.expires_at_ms.unwrap_or(i64::MAX),
            size: msg.size,
            deliveries: msg.deliveries,
            scheduled: false,
            leased: false,
        };
        let mut history = History::from_record(failures);
        if entry.expired(now_ms) {
            self.forget_restored_delivery(seq, &entry);
            let decision = decision(seq, entry, history, DeadLetterReason::Expired);
            self.effects.push(Effect::DeadLetter(decision));
            return;
        }
        if self.retry.is_exhausted(msg.deliveries) {
            // Its last delivery was running at the stop: that attempt failed.
            self.forget_restored_delivery(seq, &entry);
            history.failed(now_ms, Some(INTERRUPTED.to_owned()));
            let decision = decision(seq, entry, history, DeadLetterReason::MaxDeliveries);
            self.effects.push(Effect::DeadLetter(decision));
            return;
        }
        if !history.is_empty() {
            self.history.insert(seq, history);
        }
        self.bytes += u64::from(entry.size);
        if let Some(at) = entry.expires_at() {
            self.timers.schedule(Timer::Expiry(seq), at);
        }
        self.entries.insert(seq, entry);
        if self.exclusive {
            // A delayed message joins the line when its delay ends (`tick`), so that it holds
            // back nothing meanwhile; a retry keeps its place in front of later messages.
            if msg.deliveries > 0 || msg.deliver_at_ms <= now_ms {
                self.keys.admit(seq, Some(EXCLUSIVE_LINE));
            }
        } else if self.key_shared {
            self.keys.admit(seq, msg.key.as_deref());
        }
        if msg.deliver_at_ms > now_ms {
            self.schedule(seq, msg.deliver_at_ms);
        }
        self.refresh(Some(seq), now_ms, Announce::Silently);
    }

    /// Under `Exclusive`: whether `consumer` is (or now becomes) the active consumer. The
    /// active one stays active while it holds a lease or asked within the queue's lease.
    fn take_turn(&mut self, consumer: &str, now_ms: i64) -> bool {
        if let Some((active, last_seen)) = &self.active
            && &**active != consumer
        {
            let holds = self
                .consumers
                .get(&**active)
                .is_some_and(|c| c.in_flight > 0);
            if holds || now_ms.saturating_sub(*last_seen) < millis(self.default_lease) {
                return false;
            }
        }
        self.active = Some((consumer.into(), now_ms));
        true
    }

    /// Caps how many messages `consumer` may hold in flight at once; `None` lifts the cap.
    /// A consumer at its cap receives nothing; lowering a cap recalls nothing.
    pub fn set_prefetch(&mut self, consumer: &str, prefetch: Option<usize>) {
        match self.consumers.get_mut(consumer) {
            Some(state) => state.prefetch = prefetch,
            None if prefetch.is_some() => {
                let state = Consumer {
                    prefetch,
                    in_flight: 0,
                };
                self.consumers.insert(consumer.into(), state);
            }
            None => {}
        }
        self.forget_idle_consumer(consumer);
    }

    /// Leases up to `max` ready messages to `consumer` for `lease` (the queue's lease if
    /// `None`; clamped to 1 ms – 12 h): highest priority level first (with the spec's
    /// lower-level share), publish order within a level, at most one message per key in
    /// flight under key-shared ordering, and no more than the consumer's prefetch allows.
    ///
    /// A ready message whose TTL has passed is dead-lettered (`expired`) instead of
    /// delivered.
    #[cfg(test)]
    pub fn receive(
        &mut self,
        consumer: &str,
        max: usize,
        lease: Option<Duration>,
        now_ms: i64,
    ) -> Vec<Delivery> {
        self.receive_per_key(consumer, max, PerKey::One, lease, now_ms)
    }

    /// [`receive`](Self::receive), taking up to `max` messages of a key in one go with
    /// [`PerKey::Consecutive`] on a key-shared or exclusive queue: each key's head is
    /// followed by the key's next messages, in order, while there is room and they are not
    /// delayed, before the next ready message (of another key) is picked — as many of one
    /// key as possible first. A run stops at a message that is delayed or backing off; one
    /// whose TTL has passed is dead-lettered and the run goes on behind it. On a shared
    /// queue, where keys do not order, `per_key` changes nothing.
    pub fn receive_per_key(
        &mut self,
        consumer: &str,
        max: usize,
        per_key: PerKey,
        lease: Option<Duration>,
        now_ms: i64,
    ) -> Vec<Delivery> {
        if self.exclusive && !self.take_turn(consumer, now_ms) {
            return Vec::new();
        }
        let lease = lease
            .unwrap_or(self.default_lease)
            .clamp(Duration::from_millis(1), QueueSpec::MAX_LEASE);
        let until_ms = now_ms.saturating_add(millis(lease));
        let room = match self.consumers.get(consumer) {
            Some(Consumer {
                prefetch: Some(cap),
                in_flight,
            }) => cap.saturating_sub(*in_flight),
            _ => usize::MAX,
        };
        let max = max.min(room);
        let mut out = Vec::new();
        if max == 0 {
            return out;
        }
        let consumer: Arc<str> = match self.consumers.get_key_value(consumer) {
            Some((name, _)) => name.clone(),
            None => consumer.into(),
        };
        while out.len() < max {
            let ready = &self.ready;
            let Some(level) = self.picker.pick(|l| !ready[usize::from(l)].is_empty()) else {
                break;
            };
            let seq = self.ready[usize::from(level)]
                .pop_first()
                .expect("the picker picks a level with ready messages");
            let entry = self.entries.get(seq).expect("ready seqs are tracked");
            if entry.expired(now_ms) {
                let next = self.dead_letter(seq, DeadLetterReason::Expired);
                self.refresh(next, now_ms, Announce::Ready);
                continue;
            }
            out.push(self.lease_to(seq, &consumer, until_ms));
            if self.key_shared {
                self.keys.delivered(seq);
                if per_key == PerKey::Consecutive {
                    self.take_run(seq, &consumer, until_ms, max, &mut out, now_ms);
                }
            }
        }
        if !out.is_empty() {
            self.consumers.entry(consumer).or_default().in_flight += out.len();
        }
        out
    }

    /// Extends the run `head` starts (just delivered) with its key's next messages while
    /// `out` has room; see [`receive_per_key`](Self::receive_per_key).
    fn take_run(
        &mut self,
        head: Seq,
        consumer: &Arc<str>,
        until_ms: i64,
        max: usize,
        out: &mut Vec<Delivery>,
        now_ms: i64,
    ) {
        let mut last = head;
        while out.len() < max {
            let Some(seq) = self.keys.follower(last) else {
                break;
            };
            let entry = self.entries.get(seq).expect("keyed seqs are tracked");
            if entry.scheduled {
                // Delayed or backing off: the run stops here, and what is behind it waits
                // for it, as ever.
                break;
            }
            if entry.expired(now_ms) {
                // Leaves without releasing anything: its key has messages in flight.
                let next = self.dead_letter(seq, DeadLetterReason::Expired);
                debug_assert_eq!(next, None);
                continue;
            }
            self.keys.delivered_follower(seq);
            out.push(self.lease_to(seq, consumer, until_ms));
            last = seq;
        }
    }

    /// Leases the tracked message `seq` to `consumer` until `until_ms`: one more delivery.
    fn lease_to(&mut self, seq: Seq, consumer: &Arc<str>, until_ms: i64) -> Delivery {
        let entry = self.entries.get_mut(seq).expect("leased seqs are tracked");
        let token = LeaseToken(self.next_token);
        self.next_token += 1;
        entry.deliveries = entry.deliveries.saturating_add(1);
        entry.leased = true;
        let delivery = Delivery {
            seq,
            id: entry.id,
            token,
            delivery: entry.deliveries,
            lease_until_ms: until_ms,
        };
        let lease = Lease {
            token,
            consumer: consumer.clone(),
            until_ms,
        };
        self.leases.insert(seq, lease);
        self.timers.schedule(Timer::Lease(seq), until_ms);
        self.in_flight += 1;
        delivery
    }

    /// The deadline of the running lease `token` of `seq`; [`BrokerError::StaleLease`] if
    /// that is not the message's current lease (settled, failed, or leased again since).
    pub fn lease_deadline(&self, seq: Seq, token: LeaseToken) -> Result<i64> {
        self.check_lease(seq, token)?;
        Ok(self.leases[&seq].until_ms)
    }

    /// Settles a delivered message: it leaves the queue ([`Effect::Settled`]) and its key's
    /// next message may go. Idempotent: a repeated ack of a message no longer tracked is
    /// `Ok(AlreadySettled)`. A token that is not the message's current lease is
    /// [`BrokerError::StaleLease`] and changes nothing — the message was re-leased to someone
    /// else, or is waiting for redelivery — and so is the token of an earlier delivery of a
    /// message since acked through a later one or dead-lettered (as long as [`SettledBy`]
    /// remembers it).
    pub fn ack(&mut self, seq: Seq, token: LeaseToken, now_ms: i64) -> Result<Acked> {
        if !self.entries.contains(seq) {
            // Idempotent for the delivery that settled it; an earlier delivery's lease
            // ended before that, so its ack is stale, not repeated.
            if self.settled_by.is_repeat(seq, token) {
                return Ok(Acked::AlreadySettled);
            }
            return Err(BrokerError::StaleLease {
                seq,
                token: token.0,
            });
        }
        self.check_lease(seq, token)?;
        let (_, _, next) = self
            .remove(seq, Some(Settler::Ack(token)))
            .expect("checked above");
        self.effects.push(Effect::Settled { seq });
        self.refresh(next, now_ms, Announce::Ready);
        Ok(Acked::Settled)
    }

    /// A failed attempt: dead-letters the message (`max_deliveries`) if it has used its
    /// deliveries, or (`expired`) if its TTL has passed, and otherwise schedules its
    /// redelivery after `delay` (at most 90 days) or, without one, the backoff for this
    /// attempt. `error` is kept, truncated to [`MAX_ERROR_LEN`] bytes.
    pub fn nack(
        &mut self,
        seq: Seq,
        token: LeaseToken,
        delay: Option<Duration>,
        error: Option<&str>,
        now_ms: i64,
    ) -> Result<Nacked> {
        self.check_lease(seq, token)?;
        let delay = delay.map(|d| d.min(QueueSpec::MAX_DELAY));
        Ok(self.fail(seq, delay, error.map(truncate_error), now_ms))
    }

    /// A permanent failure: dead-letters the message now with reason `rejected`, keeping
    /// `reason` (truncated to [`MAX_ERROR_LEN`] bytes) as its last error.
    pub fn reject(&mut self, seq: Seq, token: LeaseToken, reason: &str, now_ms: i64) -> Result<()> {
        self.check_lease(seq, token)?;
        let history = self.history.entry(seq).or_default();
        history.failed(now_ms, Some(truncate_error(reason)));
        let next = self.dead_letter(seq, DeadLetterReason::Rejected);
        self.refresh(next, now_ms, Announce::Ready);
        Ok(())
    }

    /// Moves the lease's deadline to `now + by`, at most 12 hours from now (so a lease can
    /// also be shortened), and returns the new deadline.
    pub fn extend(
        &mut self,
        seq: Seq,
        token: LeaseToken,
        by: Duration,
        now_ms: i64,
    ) -> Result<i64> {
        self.check_lease(seq, token)?;
        let until_ms = now_ms.saturating_add(millis(by.min(QueueSpec::MAX_LEASE)));
        self.leases.get_mut(&seq).expect("checked above").until_ms = until_ms;
        self.timers.schedule(Timer::Lease(seq), until_ms);
        Ok(until_ms)
    }

    /// Fires every timer due at or before `now_ms`: ended leases fail their attempt (error
    /// "lease expired"), ended delays and backoffs make messages ready, passed TTLs
    /// dead-letter messages that are not in flight (one in flight keeps its lease; its TTL is
    /// checked again when the attempt ends). Returns how many timers fired.
    pub fn tick(&mut self, now_ms: i64) -> usize {
        let mut fired = 0;
        while let Some((timer, _)) = self.timers.pop_due(now_ms) {
            fired += 1;
            match timer {
                Timer::Due(seq) => {
                    if let Some(entry) = self.entries.get_mut(seq)
                        && entry.scheduled
                    {
                        entry.scheduled = false;
                        self.scheduled -= 1;
                        let id = entry.id;
                        self.forget_scheduled_id(id, seq);
                        if self.exclusive && self.keys.state(seq).is_none() {
                            let (_, withdrawn) = self.keys.admit_in_order(seq, EXCLUSIVE_LINE);
                            self.refresh(withdrawn, now_ms, Announce::Silently);
                        }
                        self.refresh(Some(seq), now_ms, Announce::Ready);
                    }
                }
                Timer::Lease(seq) => {
                    if self.entries.get(seq).is_some_and(|e| e.leased) {
                        self.fail(seq, None, Some("lease expired".to_owned()), now_ms);
                    }
                }
                Timer::Expiry(seq) => {
                    if self.entries.get(seq).is_some_and(|e| !e.leased) {
                        let next = self.dead_letter(seq, DeadLetterReason::Expired);
                        self.refresh(next, now_ms, Announce::Ready);
                    }
                }
            }
        }
        fired
    }

    /// When the next timer falls due: when the engine should call [`tick`](Self::tick).
    pub fn next_wakeup(&self) -> Option<i64> {
        self.timers.next_due()
    }

    /// Drains the effects produced since the last call, in the order they happened.
    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }

    /// Holds `key`'s messages (key-shared queues only): none is delivered until
    /// [`unpark`](Self::unpark); a delivery in flight is not recalled. Other keys are not
    /// affected. Returns `false` and does nothing on a shared or exclusive queue, where keys
    /// do not order.
    pub fn park(&mut self, key: &[u8]) -> bool {
        // Exclusive queues order by one implicit key; user keys mean nothing there.
        if !self.key_shared || self.exclusive {
            return false;
        }
        if let Some(seq) = self.keys.park(key) {
            let level = self.entries.get(seq).expect("keyed seqs are tracked").level;
            self.ready[usize::from(level)].remove(seq);
        }
        true
    }

    /// Releases a parked key: its head becomes ready if it is not in flight or delayed.
    pub fn unpark(&mut self, key: &[u8], now_ms: i64) {
        let next = self.keys.unpark(key);
        self.refresh(next, now_ms, Announce::Ready);
    }

    fn top_level(&self) -> u8 {
        u8::try_from(self.ready.len() - 1).expect("at most 10 levels")
    }

    fn check_lease(&self, seq: Seq, token: LeaseToken) -> Result<()> {
        let current = self.leases.get(&seq);
        match current {
            Some(lease) if lease.token == token => Ok(()),
            _ => Err(BrokerError::StaleLease {
                seq,
                token: token.0,
            }),
        }
    }

    fn schedule(&mut self, seq: Seq, at_ms: i64) {
        let entry = self
            .entries
            .get_mut(seq)
            .expect("scheduled seqs are tracked");
        if !entry.scheduled {
            entry.scheduled = true;
            self.scheduled += 1;
        }
        if entry.deliveries == 0 {
            self.scheduled_ids.insert((entry.id, seq));
        }
        entry.eligible_since_ms = at_ms;
        self.timers.schedule(Timer::Due(seq), at_ms);
    }

    /// Ends the lease of `seq` if it has one, and returns it.
    fn end_lease(&mut self, seq: Seq) -> Option<Lease> {
        let lease = self.leases.remove(&seq)?;
        if let Some(entry) = self.entries.get_mut(seq) {
            entry.leased = false;
        }
        self.timers.cancel(&Timer::Lease(seq));
        self.in_flight -= 1;
        if let Some(consumer) = self.consumers.get_mut(&*lease.consumer) {
            consumer.in_flight -= 1;
        }
        self.forget_idle_consumer(&lease.consumer);
        Some(lease)
    }

    fn forget_idle_consumer(&mut self, consumer: &str) {
        if self
            .consumers
            .get(consumer)
            .is_some_and(|c| c.in_flight == 0 && c.prefetch.is_none())
        {
            self.consumers.remove(consumer);
        }
    }

    /// A restored message dead-lettered as it is tracked: an ack from its delivery before
    /// the stop did not take.
    fn forget_restored_delivery(&mut self, seq: Seq, entry: &Entry) {
        if entry.deliveries > 0 {
            self.settled_by.record(seq, Settler::NoAck);
        }
    }

    /// Forgets a tracked message with all its timers and its lease; returns it, its history
    /// (with the consumer of a lease that was running as the last consumer) and its key's
    /// next message if that may now be ready. `settler` says how it left, remembered when a
    /// late ack of another delivery could name it: an ack after a second delivery, or a
    /// departure without an ack after any delivery.
    fn remove(
        &mut self,
        seq: Seq,
        settler: Option<Settler>,
    ) -> Option<(Entry, History, Option<Seq>)> {
        let lease = self.end_lease(seq);
        let entry = self.entries.remove(seq)?;
        let other_deliveries = match settler {
            Some(Settler::Ack(_)) => entry.deliveries > 1,
            Some(Settler::NoAck) => entry.deliveries > 0,
            None => false,
        };
        if let (Some(settler), true) = (settler, other_deliveries) {
            self.settled_by.record(seq, settler);
        }
        let mut history = self.history.remove(&seq).unwrap_or_default();
        if let Some(lease) = lease {
            history.last_consumer = Some(lease.consumer);
        }
        self.ready[usize::from(entry.level)].remove(seq);
        for timer in [Timer::Due(seq), Timer::Lease(seq), Timer::Expiry(seq)] {
            self.timers.cancel(&timer);
        }
        if entry.scheduled {
            self.scheduled -= 1;
            self.forget_scheduled_id(entry.id, seq);
        }
        self.bytes -= u64::from(entry.size);
        let next = if self.key_shared {
            self.keys.remove(seq)
        } else {
            None
        };
        Some((entry, history, next))
    }

    /// Tracked and not in flight.
    fn is_tracked_and_idle(&self, seq: Seq) -> bool {
        self.entries.get(seq).is_some_and(|e| !e.leased)
    }

    fn forget_scheduled_id(&mut self, id: MessageId, seq: Seq) {
        self.scheduled_ids.remove(&(id, seq));
    }

    /// Puts `seq` into or takes it out of its level's ready line according to its state;
    /// a message that would become ready with its TTL passed is dead-lettered instead, which
    /// may release its key's next message in turn (handled here as a loop, not recursion,
    /// so a long run of expired messages of one key cannot overflow the stack).
    fn refresh(&mut self, mut next: Option<Seq>, now_ms: i64, announce: Announce) {
        while let Some(seq) = next.take() {
            let Some(entry) = self.entries.get(seq) else {
                continue;
            };
            let key_ready = self
                .keys
                .state(seq)
                .is_none_or(|state| state == KeyedState::Ready);
            let level = usize::from(entry.level);
            if entry.leased || entry.scheduled || !key_ready {
                self.ready[level].remove(seq);
            } else if entry.expired(now_ms) {
                next = self.dead_letter(seq, DeadLetterReason::Expired);
            } else if self.ready[level].insert_one(seq) && announce == Announce::Ready {
                self.effects.push(Effect::Ready { seq });
            }
        }
    }
}

/// Whether a queue with this spec evicts its oldest messages when full.
fn evicts_head(spec: &QueueSpec) -> bool {
    let limit = &spec.length_limit;
    (limit.max_messages.is_some() || limit.max_bytes.is_some())
        && limit.overflow != OverflowPolicy::RejectPublish
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod model_tests;

#[cfg(test)]
mod run_tests;
