//! What one consumer holds — records read and not yet handed out, deliveries out, retries
//! kept for a key — the offsets they keep open, and the commits and rebalances that move
//! them.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use super::capabilities::NAME;
use super::codec::{Record, now_ms};
use super::engine::kafka_error;
use super::offsets::Partition;
use super::settings::Policy;
use super::settle::Delivery;
use crate::error::{Error, Result};
use crate::transport::Incoming;

pub(super) type Tp = (String, i32);
pub(super) type Client = BaseConsumer<Context>;

/// Records read ahead of the application, at most, before the partitions pause.
pub(super) const READ_AHEAD: usize = 256;

/// What a consumer reads and how it settles.
pub(super) struct Source {
    /// The queue or subscription (the origin, for dead letters).
    pub name: String,
    /// `None` reading dead letters.
    pub policy: Option<Policy>,
    pub consumer: String,
    /// How long a rebalance or a close waits for deliveries handed out to be settled.
    pub patience: Duration,
}

pub(super) struct Inner {
    pub(super) state: Mutex<State>,
    /// Signalled when a delivery handed out is settled or dropped.
    pub(super) returned: Condvar,
    /// Signalled when records are queued.
    pub(super) arrived: tokio::sync::Notify,
    pub(super) stop: AtomicBool,
    pub source: Source,
    pub(super) client: Mutex<Weak<Client>>,
    pub(super) producer: rdkafka::producer::FutureProducer,
    /// What was last committed per partition, held across each commit: one at a time, and
    /// acks arriving meanwhile go in the next.
    pub(super) committed: Mutex<HashMap<Tp, i64>>,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) queued: VecDeque<Queued>,
    /// Retries and delayed publishes read before they are due; their partitions pause.
    pub(super) waiting: Vec<Record>,
    /// Retries of a queue with per-key ordering, kept here with their key held.
    pub(super) held: Vec<(Instant, Queued)>,
    pub(super) partitions: HashMap<Tp, Partition>,
    /// Bumped at each assignment, so a settlement of an earlier one is refused.
    pub(super) generation: u64,
    /// Keys with a delivery out or held (per-key ordering only).
    pub(super) keys: HashSet<Bytes>,
    /// Partitions paused until a record is due.
    pub(super) delayed: HashSet<Tp>,
    /// The assignment changed: resume what it holds (pauses do not carry over).
    pub(super) reassigned: bool,
}

pub(super) struct Queued {
    pub(super) record: Record,
    pub(super) attempt: u32,
}

impl State {
    pub(super) fn handed_out(&self, which: impl Fn(&Tp) -> bool) -> usize {
        self.partitions
            .iter()
            .filter(|(tp, _)| which(tp))
            .map(|(_, p)| p.handed_out)
            .sum()
    }
}

fn tp(record: &Record) -> Tp {
    (record.topic.clone(), record.partition)
}

impl Inner {
    pub(super) fn new(source: Source, producer: rdkafka::producer::FutureProducer) -> Arc<Inner> {
        Arc::new(Inner {
            state: Mutex::new(State::default()),
            returned: Condvar::new(),
            arrived: tokio::sync::Notify::new(),
            stop: AtomicBool::new(false),
            source,
            client: Mutex::new(Weak::new()),
            producer,
            committed: Mutex::new(HashMap::new()),
        })
    }

    /// The consumer this ledger belongs to, held weakly: its thread owns it.
    pub(super) fn set_client(&self, client: &Arc<Client>) {
        *self.client.lock().unwrap() = Arc::downgrade(client);
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn ordered(&self) -> bool {
        self.source.policy.as_ref().is_some_and(|p| p.ordering)
    }

    /// Stops the consumer: nothing more is handed out; the thread leaves the group once
    /// what is out is settled (or its patience runs out).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.arrived.notify_one();
    }

    /// A record read from the engine.
    pub(super) fn read(&self, record: Record) -> Option<Tp> {
        let mut state = self.lock();
        let at = tp(&record);
        if !state
            .partitions
            .entry(at.clone())
            .or_default()
            .read(record.offset)
        {
            return None;
        }
        if record.due_ms().is_some_and(|due| due > now_ms()) {
            state.waiting.push(record);
            state.delayed.insert(at.clone());
            return Some(at);
        }
        let attempt = record.attempt();
        state.queued.push_back(Queued { record, attempt });
        drop(state);
        self.arrived.notify_one();
        None
    }

    /// Moves what is due to the queue; answers the partitions to resume.
    pub(super) fn due(&self) -> Vec<Tp> {
        let mut state = self.lock();
        let now = now_ms();
        let mut resume = Vec::new();
        let waiting = std::mem::take(&mut state.waiting);
        for record in waiting {
            if record.due_ms().is_none_or(|due| due <= now) {
                let at = tp(&record);
                state.delayed.remove(&at);
                resume.push(at);
                let attempt = record.attempt();
                state.queued.push_back(Queued { record, attempt });
            } else {
                state.waiting.push(record);
            }
        }
        let instant = Instant::now();
        let held = std::mem::take(&mut state.held);
        let mut woke = false;
        for (due, queued) in held {
            if due <= instant {
                if let Some(key) = &queued.record.key {
                    state.keys.remove(key);
                }
                // First: it comes before its key's later messages.
                state.queued.push_front(queued);
                woke = true;
            } else {
                state.held.push((due, queued));
            }
        }
        let any = !resume.is_empty() || woke;
        drop(state);
        if any {
            self.arrived.notify_one();
        }
        resume
    }

    /// Up to `max` queued records, handed out.
    pub(super) fn take(self: &Arc<Self>, max: usize) -> Vec<Incoming> {
        let ordered = self.ordered();
        let mut state = self.lock();
        let mut taken = Vec::new();
        let mut kept = VecDeque::new();
        while let Some(queued) = state.queued.pop_front() {
            let blocked = ordered
                && queued
                    .record
                    .key
                    .as_ref()
                    .is_some_and(|k| state.keys.contains(k));
            if taken.len() >= max || blocked {
                kept.push_back(queued);
                continue;
            }
            if ordered && let Some(key) = &queued.record.key {
                state.keys.insert(key.clone());
            }
            let generation = state.generation;
            if let Some(p) = state.partitions.get_mut(&tp(&queued.record)) {
                p.handed_out += 1;
            }
            taken.push(self.delivery(queued, generation));
        }
        state.queued = kept;
        taken
    }

    pub(super) fn delivery(self: &Arc<Self>, queued: Queued, generation: u64) -> Incoming {
        let dead_letters = self.source.policy.is_none();
        Incoming {
            message: queued.record.received(queued.attempt, dead_letters),
            settler: Arc::new(Delivery {
                inner: self.clone(),
                record: queued.record,
                attempt: queued.attempt,
                generation,
                settled: AtomicBool::new(false),
            }),
        }
    }

    /// Closes a delivery's offset and stores the new watermark; answers it.
    pub(super) fn settle(&self, record: &Record, generation: u64, id: &str) -> Result<(Tp, i64)> {
        let not_held = |why: &str| Error::NotHeld {
            id: id.to_owned(),
            why: why.to_owned(),
        };
        let mut state = self.lock();
        let at = tp(record);
        if state.generation != generation {
            return Err(not_held(
                "its partition moved to another consumer before it was settled; it comes \
                 back from the committed offset",
            ));
        }
        if let Some(key) = &record.key
            && self.ordered()
        {
            state.keys.remove(key);
        }
        let Some(p) = state.partitions.get_mut(&at) else {
            return Err(not_held("its partition is no longer this consumer's"));
        };
        if !p.settle(record.offset) {
            return Err(not_held("it was settled already"));
        }
        p.handed_out = p.handed_out.saturating_sub(1);
        let watermark = p.watermark().unwrap_or(record.offset + 1);
        drop(state);
        self.returned.notify_all();
        Ok((at, watermark))
    }

    /// A delivery dropped unsettled: its offset stays open, so it is read again from the
    /// committed offset.
    pub(super) fn release(&self, record: &Record, generation: u64) {
        let mut state = self.lock();
        if state.generation == generation {
            if let Some(key) = &record.key
                && self.ordered()
            {
                state.keys.remove(key);
            }
            if let Some(p) = state.partitions.get_mut(&tp(record)) {
                p.handed_out = p.handed_out.saturating_sub(1);
            }
        }
        drop(state);
        self.returned.notify_all();
    }

    /// A retry of an ordered queue: kept here, its key held, until `delay` passes.
    pub(super) fn hold(
        &self,
        record: Record,
        attempt: u32,
        generation: u64,
        delay: Duration,
        id: &str,
    ) -> Result<()> {
        let mut state = self.lock();
        let at = tp(&record);
        let current = state.generation == generation;
        let Some(p) = state.partitions.get_mut(&at).filter(|_| current) else {
            return Err(Error::NotHeld {
                id: id.to_owned(),
                why: "its partition moved to another consumer before it was settled".into(),
            });
        };
        p.handed_out = p.handed_out.saturating_sub(1);
        if let Some(key) = &record.key {
            state.keys.insert(key.clone());
        }
        state
            .held
            .push((Instant::now() + delay, Queued { record, attempt }));
        drop(state);
        self.returned.notify_all();
        Ok(())
    }

    /// Commits `at` up to `watermark` (with every other partition's watermark that moved),
    /// unless a commit since covered it.
    pub(super) async fn commit(self: &Arc<Self>, at: Tp, watermark: i64) -> Result<()> {
        let inner = self.clone();
        tokio::task::spawn_blocking(move || {
            inner.commit_sync(|tp| *tp == at, Some((&at, watermark)))
        })
        .await
        .map_err(|e| Error::transport(NAME, e))?
    }

    /// Commits the watermarks of the partitions `which` picks (and any other that moved),
    /// blocking. One commit at a time, so a later commit never carries an older watermark;
    /// `covered` skips the commit when one since went as far. A partition revoked or a
    /// consumer closed meanwhile was committed then.
    pub(super) fn commit_sync(
        &self,
        which: impl Fn(&Tp) -> bool,
        covered: Option<(&Tp, i64)>,
    ) -> Result<()> {
        let mut committed = self.committed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, watermark)) = covered
            && committed.get(at).is_some_and(|c| *c >= watermark)
        {
            return Ok(());
        }
        let Some(client) = self.client.lock().unwrap().upgrade() else {
            return Ok(());
        };
        let mut tries = 0;
        loop {
            let wanted: Vec<(Tp, i64)> = {
                let state = self.lock();
                state
                    .partitions
                    .iter()
                    .filter_map(|(tp, p)| p.watermark().map(|w| (tp.clone(), w)))
                    .filter(|(tp, w)| which(tp) || committed.get(tp).is_some_and(|c| c < w))
                    .filter(|(tp, w)| committed.get(tp).is_none_or(|c| c < w))
                    .collect()
            };
            if wanted.is_empty() {
                return Ok(());
            }
            let mut tpl = TopicPartitionList::new();
            for ((topic, partition), offset) in &wanted {
                tpl.add_partition_offset(topic, *partition, Offset::Offset(*offset))
                    .map_err(kafka_error)?;
            }
            match client.commit(&tpl, CommitMode::Sync) {
                Ok(()) => {
                    for (tp, offset) in wanted {
                        committed.insert(tp, offset);
                    }
                    return Ok(());
                }
                Err(e) => {
                    tries += 1;
                    if tries >= 20 {
                        return Err(kafka_error(e));
                    }
                    // A rebalance completing: the group takes commits again once it ends.
                    std::thread::sleep(Duration::from_millis(250));
                }
            }
        }
    }
}

/// The librdkafka context: rebalances go through [`Inner`].
pub(super) struct Context {
    pub(super) inner: Arc<Inner>,
}

impl ClientContext for Context {}

impl ConsumerContext for Context {
    fn pre_rebalance(&self, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(revoked) = rebalance else {
            return;
        };
        let revoked: HashSet<Tp> = revoked
            .elements()
            .iter()
            .map(|e| (e.topic().to_owned(), e.partition()))
            .collect();
        let inner = &self.inner;
        let mut state = inner.lock();
        // What was read and not handed out is read again by the next owner.
        state.queued.retain(|q| !revoked.contains(&tp(&q.record)));
        state.waiting.retain(|r| !revoked.contains(&tp(r)));
        let held: Vec<(Instant, Queued)> = std::mem::take(&mut state.held);
        for (due, queued) in held {
            if revoked.contains(&tp(&queued.record)) {
                if let Some(key) = &queued.record.key {
                    state.keys.remove(key);
                }
            } else {
                state.held.push((due, queued));
            }
        }
        let deadline = Instant::now() + inner.source.patience;
        while state.handed_out(|tp| revoked.contains(tp)) > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::warn!(
                    consumer = %inner.source.consumer,
                    "kafka: partitions revoked with deliveries still unsettled; they will be \
                     delivered again"
                );
                break;
            }
            state = inner
                .returned
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        // Committed now, while this member's generation still holds: once the group has
        // rebalanced, a commit of the old generation is refused.
        drop(state);
        if let Err(e) = inner.commit_sync(|tp| revoked.contains(tp), None) {
            tracing::warn!(
                error = %e,
                consumer = %inner.source.consumer,
                "kafka: committing revoked partitions failed; their settled deliveries will \
                 be delivered again"
            );
        }
        let mut state = inner.lock();
        for tp in &revoked {
            state.partitions.remove(tp);
            state.delayed.remove(tp);
        }
        state.generation += 1;
        inner
            .committed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|tp, _| !revoked.contains(tp));
    }

    fn post_rebalance(&self, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(assigned) = rebalance {
            let mut state = self.inner.lock();
            for e in assigned.elements() {
                state
                    .partitions
                    .entry((e.topic().to_owned(), e.partition()))
                    .or_default();
            }
            state.reassigned = true;
        }
    }
}
