//! Consuming one queue, subscription or dead-letter queue: one Kafka consumer in the
//! source's consumer group, polled by its own thread.
//!
//! The thread reads records into a queue that [`KafkaConsumer::fetch`] hands out from;
//! while that queue is full it pauses its partitions. A retry not yet due pauses its retry
//! partition until it is. An ack waits for a commit of the watermark it moved. When
//! partitions are revoked, records not handed out are let go, the rebalance waits, up to
//! the lease, for the deliveries handed out to be settled, and commits, so the next owner
//! starts after them.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use super::capabilities::NAME;
use super::codec::{Record, now_ms};
use super::engine::{Shared, kafka_error};
use super::names;
use super::offsets::Partition;
use super::settings::{Entry, Policy};
use crate::error::{Error, Result};
use crate::transport::{ConsumerBackend, ConsumerOptions, Incoming};

type Tp = (String, i32);
type Client = BaseConsumer<Context>;

/// Records read ahead of the application, at most, before the partitions pause.
const READ_AHEAD: usize = 256;

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
    state: Mutex<State>,
    /// Signalled when a delivery handed out is settled or dropped.
    returned: Condvar,
    /// Signalled when records are queued.
    arrived: tokio::sync::Notify,
    stop: AtomicBool,
    pub source: Source,
    client: Mutex<Weak<Client>>,
    producer: rdkafka::producer::FutureProducer,
    /// What was last committed per partition, held across each commit: one at a time, and
    /// acks arriving meanwhile go in the next.
    committed: Mutex<HashMap<Tp, i64>>,
}

#[derive(Default)]
struct State {
    queued: VecDeque<Queued>,
    /// Retries and delayed publishes read before they are due; their partitions pause.
    waiting: Vec<Record>,
    /// Retries of a queue with per-key ordering, kept here with their key held.
    held: Vec<(Instant, Queued)>,
    partitions: HashMap<Tp, Partition>,
    /// Bumped at each assignment, so a settlement of an earlier one is refused.
    generation: u64,
    /// Keys with a delivery out or held (per-key ordering only).
    keys: HashSet<Bytes>,
    /// Partitions paused until a record is due.
    delayed: HashSet<Tp>,
    /// The assignment changed: resume what it holds (pauses do not carry over).
    reassigned: bool,
}

struct Queued {
    record: Record,
    attempt: u32,
}

impl State {
    fn handed_out(&self, which: impl Fn(&Tp) -> bool) -> usize {
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
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn ordered(&self) -> bool {
        self.source.policy.as_ref().is_some_and(|p| p.ordering)
    }

    /// Stops the consumer: nothing more is handed out; the thread leaves the group once
    /// what is out is settled (or its patience runs out).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.arrived.notify_one();
    }

    /// A record read from the engine.
    fn read(&self, record: Record) -> Option<Tp> {
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
    fn due(&self) -> Vec<Tp> {
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
    fn take(self: &Arc<Self>, max: usize) -> Vec<Incoming> {
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

    fn delivery(self: &Arc<Self>, queued: Queued, generation: u64) -> Incoming {
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
    fn settle(&self, record: &Record, generation: u64, id: &str) -> Result<(Tp, i64)> {
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
    fn release(&self, record: &Record, generation: u64) {
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
    fn hold(
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
    async fn commit(self: &Arc<Self>, at: Tp, watermark: i64) -> Result<()> {
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
    fn commit_sync(&self, which: impl Fn(&Tp) -> bool, covered: Option<(&Tp, i64)>) -> Result<()> {
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
    inner: Arc<Inner>,
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

/// One delivery, settled through its consumer.
struct Delivery {
    inner: Arc<Inner>,
    record: Record,
    attempt: u32,
    generation: u64,
    settled: AtomicBool,
}

impl Drop for Delivery {
    fn drop(&mut self) {
        if !self.settled.load(Ordering::Acquire) {
            self.inner.release(&self.record, self.generation);
        }
    }
}

impl Delivery {
    fn id(&self) -> String {
        self.record.id()
    }

    fn claim(&self) -> Result<()> {
        if self.settled.swap(true, Ordering::AcqRel) {
            return Err(Error::NotHeld {
                id: self.id(),
                why: "it was settled already".into(),
            });
        }
        Ok(())
    }

    /// Closes the offset and commits it.
    async fn done(&self) -> Result<()> {
        let (at, watermark) = self
            .inner
            .settle(&self.record, self.generation, &self.id())?;
        self.inner.commit(at, watermark).await
    }

    /// Publishes a copy to `topic`, then closes the original.
    async fn forward(
        &self,
        topic: String,
        headers: std::collections::BTreeMap<String, String>,
    ) -> Result<()> {
        super::publish::send_one(
            &self.inner.producer,
            topic,
            None,
            self.record.key.as_ref(),
            &self.record.payload,
            headers,
        )
        .await?;
        self.done().await
    }

    async fn dead_letter(&self, reason: &str, error: Option<&str>) -> Result<()> {
        let policy = self.inner.source.policy.as_ref().expect("a live source");
        if !policy.dead_letter {
            // Declared without dead letters: the message is dropped.
            return self.done().await;
        }
        let source = &self.inner.source;
        let headers = self.record.dead_letter_headers(
            reason,
            self.attempt,
            &source.name,
            error,
            &source.consumer,
        );
        self.forward(names::dead_letter_topic(&source.name), headers)
            .await
    }
}

#[async_trait]
impl crate::transport::Settler for Delivery {
    async fn ack(&self) -> Result<()> {
        self.claim()?;
        self.done().await
    }

    async fn nack(&self, delay: Option<Duration>, error: Option<&str>) -> Result<()> {
        self.claim()?;
        let source = &self.inner.source;
        let Some(policy) = &source.policy else {
            if delay.is_some_and(|d| !d.is_zero()) {
                self.settled.store(false, Ordering::Release);
                return Err(Error::unsupported(
                    NAME,
                    "delayed nack of a dead letter",
                    "a dead-letter queue has no retry topics; a nacked dead letter comes back at \
                     once",
                ));
            }
            let headers = self.record.retry_headers(self.attempt + 1, None, error);
            return self
                .forward(names::dead_letter_topic(&source.name), headers)
                .await;
        };
        if self.attempt >= policy.max_deliveries {
            return self
                .dead_letter(crate::message::reason::MAX_DELIVERIES, error)
                .await;
        }
        let delay = delay.unwrap_or_else(|| {
            policy
                .delivery()
                .backoff
                .delay(self.attempt, fastrand::f64())
        });
        if policy.ordering {
            return self.inner.hold(
                self.record.clone(),
                self.attempt + 1,
                self.generation,
                delay,
                &self.id(),
            );
        }
        let Some(rung) = names::rung_of(delay, policy.rungs()) else {
            self.settled.store(false, Ordering::Release);
            return Err(Error::invalid(
                "nack delay",
                format!(
                    "{delay:?} is beyond the source's retry topics (its backoff cap and \
                     max_delay); nack for at most the longer of them"
                ),
            ));
        };
        let due = (!delay.is_zero()).then(|| now_ms() + delay.as_millis() as i64);
        let headers = self.record.retry_headers(self.attempt + 1, due, error);
        self.forward(names::retry_topic(&source.name, rung), headers)
            .await
    }

    async fn reject(&self, why: &str) -> Result<()> {
        if self.inner.source.policy.is_none() {
            return Err(Error::unsupported(
                NAME,
                "rejecting a dead letter",
                "a dead letter has no further queue; ack it to remove it, or nack it to keep it",
            ));
        }
        self.claim()?;
        self.dead_letter(crate::message::reason::REJECTED, Some(why))
            .await
    }

    async fn extend(&self, _by: Duration) -> Result<()> {
        Err(Error::unsupported(
            NAME,
            crate::capability::Feature::LeaseExtension.name(),
            "Kafka has no per-message lease to extend",
        ))
    }
}

/// The [`ConsumerBackend`] over one consumer thread.
pub(super) struct KafkaConsumer {
    inner: Arc<Inner>,
}

impl KafkaConsumer {
    pub async fn open(
        shared: &Arc<Shared>,
        source: &crate::spec::Source,
        options: &ConsumerOptions,
    ) -> Result<KafkaConsumer> {
        use crate::spec::Source as S;
        let (name, policy, topics, group) = match source {
            S::Queue(name) => {
                let Entry::Queue { policy } = shared.entry(name, "queue").await? else {
                    unreachable!("entry answers only its kind");
                };
                let mut topics = vec![name.clone()];
                topics.extend((0..policy.rungs()).map(|r| names::retry_topic(name, r)));
                (name.clone(), Some(policy), topics, names::group(name))
            }
            S::Subscription { topic, name } => {
                let entry = shared.entry(name, "subscription").await?;
                let Entry::Subscription {
                    topic: existing,
                    policy,
                } = entry
                else {
                    unreachable!("entry answers only its kind");
                };
                if existing != *topic {
                    return Err(Error::NotFound {
                        kind: "subscription",
                        name: format!("{topic}/{name}"),
                    });
                }
                let mut topics = vec![topic.clone()];
                topics.extend((0..policy.rungs()).map(|r| names::retry_topic(name, r)));
                (name.clone(), Some(policy), topics, names::group(name))
            }
            S::DeadLetters(origin) => {
                let name = origin.name().to_owned();
                let topic = names::dead_letter_topic(&name);
                if shared.partitions(&topic).await?.is_none() {
                    return Err(Error::NotFound {
                        kind: "queue",
                        name: topic,
                    });
                }
                let group = names::dead_letter_group(&name);
                (name, None, vec![topic], group)
            }
        };
        let patience = policy.as_ref().map_or(Duration::from_secs(30), |p| {
            Duration::from_millis(p.lease_ms)
        });
        let inner = Arc::new(Inner {
            state: Mutex::new(State::default()),
            returned: Condvar::new(),
            arrived: tokio::sync::Notify::new(),
            stop: AtomicBool::new(false),
            source: Source {
                name,
                policy,
                consumer: options.name.clone(),
                patience,
            },
            client: Mutex::new(Weak::new()),
            producer: shared.producer.clone(),
            committed: Mutex::new(HashMap::new()),
        });
        let client: Client = shared
            .config()
            .set("group.id", &group)
            .set("client.id", &options.name)
            // Commits are this transport's own: after each ack, on revoke and on close.
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("session.timeout.ms", "10000")
            .set("heartbeat.interval.ms", "1000")
            .set("fetch.wait.max.ms", "100")
            .create_with_context(Context {
                inner: inner.clone(),
            })
            .map_err(kafka_error)?;
        let client = Arc::new(client);
        let topic_refs: Vec<&str> = topics.iter().map(String::as_str).collect();
        client.subscribe(&topic_refs).map_err(kafka_error)?;
        *inner.client.lock().unwrap() = Arc::downgrade(&client);
        shared.register(&inner);
        let thread_inner = inner.clone();
        std::thread::Builder::new()
            .name("ferry-kafka-consumer".into())
            .spawn(move || run(client, thread_inner))
            .map_err(|e| Error::transport(NAME, e))?;
        Ok(KafkaConsumer { inner })
    }
}

/// The consumer thread: polls, pauses and resumes, until stopped and settled.
fn run(client: Arc<Client>, inner: Arc<Inner>) {
    // Partitions this thread paused. Only those are resumed: librdkafka may fetch a resumed
    // partition again from an earlier position (records read twice are dropped by offset).
    let mut paused: HashSet<Tp> = HashSet::new();
    let mut full = false;
    let mut stopping_since: Option<Instant> = None;
    loop {
        if inner.stop.load(Ordering::Acquire) {
            let since = *stopping_since.get_or_insert_with(Instant::now);
            let out = inner.lock().handed_out(|_| true);
            if out == 0 || since.elapsed() >= inner.source.patience {
                break;
            }
        }
        let (reassigned, delayed) = {
            let mut state = inner.lock();
            (std::mem::take(&mut state.reassigned), state.delayed.clone())
        };
        if reassigned {
            // A pause does not outlive the assignment; start again unpaused.
            paused.clear();
            full = false;
        }
        let mut resume: Vec<Tp> = inner
            .due()
            .into_iter()
            .filter(|tp| !full && paused.contains(tp))
            .collect();
        let queued = inner.lock().queued.len();
        if full && queued < READ_AHEAD / 2 {
            full = false;
            resume.extend(paused.iter().filter(|tp| !delayed.contains(*tp)).cloned());
        }
        if !resume.is_empty() {
            for tp in &resume {
                paused.remove(tp);
            }
            let _ = client.resume(&list(&resume));
        }
        if !full && queued >= READ_AHEAD {
            full = true;
            if let Ok(assigned) = client.assignment() {
                let pause: Vec<Tp> = assigned
                    .elements()
                    .iter()
                    .map(|e| (e.topic().to_owned(), e.partition()))
                    .filter(|tp| !paused.contains(tp))
                    .collect();
                let _ = client.pause(&list(&pause));
                paused.extend(pause);
            }
        }
        match client.poll(Duration::from_millis(50)) {
            Some(Ok(message)) => {
                if let Some(at) = inner.read(Record::of(&message))
                    && paused.insert(at.clone())
                {
                    let _ = client.pause(&list(&[at]));
                }
            }
            Some(Err(e)) => {
                tracing::debug!(error = %e, consumer = %inner.source.consumer, "kafka: poll");
            }
            None => {}
        }
    }
    if let Err(e) = inner.commit_sync(|_| true, None) {
        tracing::warn!(error = %e, consumer = %inner.source.consumer, "kafka: final commit");
    }
    // Leaving the group revokes the partitions, which commits again what was settled since.
    client.unsubscribe();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let _ = client.poll(Duration::from_millis(50));
        if client.assignment().map_or(true, |a| a.count() == 0) {
            break;
        }
    }
    inner.lock().partitions.clear();
    drop(client);
}

fn list(tps: &[Tp]) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    for (topic, partition) in tps {
        tpl.add_partition(topic, *partition);
    }
    tpl
}

impl Drop for KafkaConsumer {
    fn drop(&mut self) {
        self.inner.stop();
    }
}

#[async_trait]
impl ConsumerBackend for KafkaConsumer {
    async fn fetch(&mut self, max: usize, wait: Duration) -> Result<Vec<Incoming>> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if self.inner.stop.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            let taken = self.inner.take(max.max(1));
            if !taken.is_empty() {
                return Ok(taken);
            }
            if tokio::time::timeout_at(deadline, self.inner.arrived.notified())
                .await
                .is_err()
            {
                return Ok(Vec::new());
            }
        }
    }

    async fn close(&mut self) -> Result<()> {
        self.inner.stop();
        Ok(())
    }

    fn max_deliveries(&self) -> Option<u32> {
        self.inner.source.policy.as_ref().map(|p| p.max_deliveries)
    }
}
