//! The engine: [`Broker`], the embedded async broker that makes [`QueueState`]'s decisions
//! durable and serves them.
//!
//! **Layout** of a broker directory (held with a [`DirLock`]):
//! - `meta/` — a [`MetaStore`] with each queue's spec under `queue/<name>` ([`spec_codec`]);
//! - `queues/<name>/messages/` — a storage [`Log`](ferry_storage::Log) of the queue's
//!   messages; a record's offset is the message's [`Seq`];
//! - `queues/<name>/journal/` — a log of state events ([`JournalEvent`]): leases, failed
//!   attempts, lease extensions, acks, dead letters, cancellations, overflow drops, parked
//!   keys, redrives — and checkpoints of them all, so that the journal's older segments can
//!   be deleted. Settled messages' segments are deleted too; see [`housekeeping`].
//! - `topics/<name>/<partition>/` — a storage log per partition of each topic, whose spec
//!   is in the `MetaStore` under `topic/<name>` (see `engine/topics.rs`).
//!
//! **Durability.** Publish returns once the message is durable under the queue's
//! durability; ack, nack, reject, extend, park and unpark once their journal event is (a
//! lease expiry journals its `Failed` attempt too, ahead of any redelivery's `Leased`, since
//! effects are journaled under the state lock); receive once its `Leased` events are, so a restart knows how many deliveries each message had. A dead
//! letter is stored in the dead-letter queue before `DeadLettered` is journaled on its
//! origin (see `engine/effects.rs` for the crash window between the two).
//!
//! **Time** comes from the configured [`Clock`]. A background task ticks each queue at its
//! next timer; with [`BrokerConfig::background_timers`] off (tests with a
//! [`ManualClock`](ferry_storage::ManualClock)), [`Broker::tick_now`] does it explicitly.
//!
//! **Blocking.** Storage calls that block (opening logs, reading a message, recovery) run on
//! the calling task's thread; appends never block (completion callbacks feed oneshots).
//!
//! [`spec_codec`]: crate::spec_codec
//! [`JournalEvent`]: crate::queue::journal::JournalEvent
//! [`QueueState`]: crate::QueueState

mod disk_reserve;
mod effects;
mod groups;
mod housekeeping;
mod limits;
mod peek;
mod queue;
mod recovery;
mod redrive;
mod storage_stats;
mod subscriptions;
mod temporary;
mod timer_wake;
mod topic;
mod topic_compaction;
mod topics;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use bytes::Bytes;
use ferry_storage::{Clock, DirLock, MetaBatch, MetaStore, SystemClock};

use crate::error::{BrokerError, Result};
use crate::message::{Headers, Limits, OutgoingMessage, millis};
use crate::message_id::MessageId;
use crate::name::Name;
use crate::queue::journal::JournalEvent;
use crate::queue::state::{Acked, LeaseToken, Nacked, QueueStateStats, Seq};
use crate::record::DeadLetterInfo;
use crate::spec::{DeadLetter, QueueSpec};
use crate::spec_codec;
use crate::topology::validate_topology;

use queue::{Queue, dedup_keys, durable};
use timer_wake::TimerWake;

pub use disk_reserve::DiskSpace;
pub use groups::{GroupInfo, GroupJoin, GroupPartition, PartitionLag, StartAt};
pub use housekeeping::MaintenanceReport;
pub use peek::{MAX_PEEK, PeekedMessage};
pub use redrive::{RedriveFilter, RedriveReport, RedriveRequest};
pub use storage_stats::StorageStats;
pub use subscriptions::{SkippedRange, SubscriptionInfo};
pub use topic_compaction::CompactionStats;

const SPEC_PREFIX: &str = "queue/";
/// The longest the timer task sleeps without looking again.
const MAX_TIMER_SLEEP: Duration = Duration::from_secs(60);

/// How a [`Broker`] runs.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub clock: Arc<dyn Clock>,
    pub limits: Limits,
    /// Run a tokio task that ticks queues at their timers. Off in tests that drive a
    /// manual clock and call [`Broker::tick_now`].
    pub background_timers: bool,
    /// Seeds message-id randomness and backoff jitter; `None` seeds from the clock.
    pub seed: Option<u64>,
    /// Segment size of each queue's message log and of each topic partition's log:
    /// retention deletes whole segments, so this is about how much data a queue or a
    /// partition keeps on disk beyond what it must.
    pub message_segment_bytes: u64,
    /// Segment size of each queue's journal.
    pub journal_segment_bytes: u64,
    /// A queue's journal is checkpointed, and the segments before the checkpoint deleted,
    /// once it has grown by this much (see `engine/housekeeping.rs`).
    pub checkpoint_journal_bytes: u64,
    /// How often the timer task runs housekeeping: checkpoints and retention.
    pub housekeeping_interval: Duration,
    /// Free space kept on the data directory's disk for acks, receives, dead letters and
    /// housekeeping: publishes that would leave less are refused with
    /// [`BrokerError::DiskFull`] (see `engine/disk_reserve.rs`). 0 keeps none.
    pub disk_reserve_bytes: u64,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            clock: Arc::new(SystemClock),
            limits: Limits::default(),
            background_timers: true,
            seed: None,
            message_segment_bytes: 64 << 20,
            journal_segment_bytes: 16 << 20,
            checkpoint_journal_bytes: 32 << 20,
            housekeeping_interval: Duration::from_secs(1),
            // Tens of thousands of acks, a few checkpoints and segment rolls; RabbitMQ's
            // default free-disk limit is 50 MB.
            disk_reserve_bytes: 64 << 20,
        }
    }
}

/// A message handed to a consumer under a lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedMessage {
    pub id: MessageId,
    pub seq: Seq,
    /// Carry it to ack, nack, reject or extend.
    pub token: LeaseToken,
    /// 1 for the first delivery.
    pub delivery: u32,
    pub lease_until_ms: i64,
    pub payload: Bytes,
    pub key: Option<Bytes>,
    pub headers: Headers,
    pub priority: u8,
    pub published_at: i64,
    /// Set when this queue is a dead-letter queue: why and from where the message came.
    pub dead_letter: Option<DeadLetterInfo>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct QueueInfo {
    pub name: Name,
    pub spec: QueueSpec,
    pub stats: QueueStats,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueueStats {
    /// Ready, in flight, delayed … now.
    pub state: QueueStateStats,
    /// The seq the next stored message will get: how many messages were ever stored —
    /// published, dead-lettered into this queue or redriven into it.
    pub next_seq: u64,
    /// The counters below count since the queue was created; they survive restarts.
    pub acked: u64,
    /// Failed attempts followed by a retry: nacks and lease expiries. (A failed attempt
    /// that dead-letters counts under `dead_lettered`.)
    pub nacked: u64,
    /// Messages that left this queue for its dead-letter queue (or were discarded, with
    /// dead-lettering disabled).
    pub dead_lettered: u64,
    /// Dropped to make room under the overflow policy `DropHead`.
    pub dropped: u64,
    /// Scheduled messages cancelled by id ([`Broker::cancel`]).
    pub cancelled: u64,
    /// Moved out of this dead-letter queue by [`Broker::redrive`].
    pub redriven: u64,
    /// A subscription's messages taken out unsettled because the topic's retention, set to
    /// override subscriptions, deleted them (see
    /// [`TopicRetention::overrides_subscriptions`](crate::TopicRetention::overrides_subscriptions)).
    pub skipped: u64,
}

/// The embedded broker; cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct Broker {
    inner: Arc<BrokerInner>,
}

/// The metadata key counting opens of this broker directory.
const GENERATION_KEY: &str = "broker/generation";
/// Tokens of one open occupy 2^40 values: a trillion deliveries before they would reach the
/// next open's range.
const TOKEN_GENERATION_SHIFT: u32 = 40;

struct BrokerInner {
    dir: PathBuf,
    config: BrokerConfig,
    meta: Mutex<MetaStore>,
    queues: RwLock<BTreeMap<Name, Arc<Queue>>>,
    topics: RwLock<BTreeMap<Name, Arc<topic::Topic>>>,
    /// Consumer groups over topics, created by their first join (see `engine/groups.rs`).
    groups: groups::Groups,
    /// Shared by every log of each kind (see `engine/storage_stats.rs`).
    log_stats: storage_stats::LogStatsByKind,
    rng: Mutex<fastrand::Rng>,
    /// Where this open's lease tokens start (see `Broker::open`).
    token_base: u64,
    /// Woken when a queue's next timer may have moved earlier, and when the broker is
    /// dropped. Shared with the timer task, which holds the broker only weakly while it
    /// sleeps, so dropping the last handle closes the logs and releases the lock.
    timers_changed: Arc<TimerWake>,
    disk: disk_reserve::DiskReserve,
    _lock: DirLock,
}

impl Drop for BrokerInner {
    fn drop(&mut self) {
        self.timers_changed.timer_at(i64::MIN);
    }
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("dir", &self.inner.dir)
            .finish()
    }
}

impl Broker {
    /// Opens (creating if needed) the broker in `dir`, recovers every queue and opens every
    /// topic. Must run inside a tokio runtime when `background_timers` is on.
    pub async fn open(dir: impl AsRef<Path>, config: BrokerConfig) -> Result<Broker> {
        let dir = dir.as_ref().to_path_buf();
        ferry_storage::fs_util::create_dir_durable(&dir)?;
        let lock = DirLock::acquire(&dir)?;
        let mut meta = MetaStore::open(&dir.join("meta"))?;
        // Lease tokens are handed out from a counter per queue; a generation that grows on
        // every open keeps a token from before a restart from ever matching a new delivery.
        let generation = meta
            .get(GENERATION_KEY)
            .and_then(|v| <[u8; 8]>::try_from(&v[..]).ok())
            .map_or(0, u64::from_le_bytes)
            + 1;
        meta.put(GENERATION_KEY, generation.to_le_bytes().to_vec())?;
        let token_base = generation << TOKEN_GENERATION_SHIFT;
        let seed = config.seed.unwrap_or(config.clock.now_ms() as u64);
        let mut rng = fastrand::Rng::with_seed(seed);
        let log_stats = storage_stats::LogStatsByKind::default();
        let mut queues = BTreeMap::new();
        for (key, value) in meta.scan_prefix(SPEC_PREFIX) {
            let raw = &key[SPEC_PREFIX.len()..];
            let bad = |problem: String| BrokerError::MalformedSpec {
                queue: raw.to_owned(),
                problem,
            };
            let name = Name::new(raw).map_err(|e| bad(e.to_string()))?;
            let spec = spec_codec::decode(&value).map_err(bad)?;
            let seed = rng.u64(..);
            let queue = Queue::open(
                &dir,
                name.clone(),
                spec,
                &config,
                &log_stats,
                seed,
                token_base,
            )?;
            queues.insert(name, Arc::new(queue));
        }
        remove_stale_queue_dirs(&dir, &queues)?;
        let topics = topics::open_topics(&dir, &meta, &config, &log_stats)?;
        let links = subscriptions::link_subscriptions(&meta, &queues, &topics)?;
        let now_ms = config.clock.now_ms();
        let dead = recovery::already_dead_lettered(&queues)?;
        let mut settle = Vec::new();
        for queue in queues.values() {
            let empty = HashMap::new();
            let events = queue.recover(dead.get(&queue.name).unwrap_or(&empty), now_ms)?;
            settle.push((Arc::clone(queue), events));
        }
        let disk = disk_reserve::DiskReserve::new(&dir, config.disk_reserve_bytes);
        let broker = Broker {
            inner: Arc::new(BrokerInner {
                dir,
                meta: Mutex::new(meta),
                queues: RwLock::new(queues),
                topics: RwLock::new(topics),
                groups: Mutex::new(HashMap::new()),
                log_stats,
                rng: Mutex::new(rng),
                token_base,
                timers_changed: Arc::new(TimerWake::new()),
                disk,
                _lock: lock,
                config,
            }),
        };
        // Dead letters stored before a crash whose origin never journaled them: journal them
        // now, so the origin no longer depends on finding them in the dead-letter queue.
        for (queue, events) in settle.into_iter().filter(|(_, e)| !e.is_empty()) {
            let rx = queue.journal(&mut queue.lock(), &events, now_ms);
            durable(rx).await?;
        }
        // References a crash kept from disk, and records published since: catch up.
        for link in links {
            while !link.catch_up()? {}
        }
        // Recovery may have dead-lettered messages (expired, or out of deliveries).
        for queue in broker.queue_list() {
            let effects = queue.take_effects(&mut queue.lock(), now_ms);
            broker.apply_effects(&queue, effects).await?;
        }
        if broker.inner.config.background_timers {
            tokio::spawn(timer_task(
                Arc::downgrade(&broker.inner),
                Arc::clone(&broker.inner.timers_changed),
            ));
        }
        Ok(broker)
    }

    fn now_ms(&self) -> i64 {
        self.inner.config.clock.now_ms()
    }

    fn queue(&self, name: &str) -> Result<Arc<Queue>> {
        let queues = self.inner.queues.read().unwrap_or_else(|e| e.into_inner());
        let queue = Name::new(name)
            .ok()
            .and_then(|n| queues.get(&n).cloned())
            .ok_or_else(|| BrokerError::QueueNotFound {
                queue: name.to_owned(),
            })?;
        queue.check()?;
        queue.touch(self.now_ms());
        Ok(queue)
    }

    fn queue_list(&self) -> Vec<Arc<Queue>> {
        let queues = self.inner.queues.read().unwrap_or_else(|e| e.into_inner());
        queues.values().cloned().collect()
    }

    // ---- Admin ----

    /// Creates a queue after checking its name, its spec and the topology with it; with
    /// [`DeadLetter::Default`] also creates `<name>.dlq` (dead-lettering disabled) if
    /// missing. On any error nothing changes.
    pub async fn create_queue(&self, name: &str, spec: QueueSpec) -> Result<()> {
        self.create_queue_with(name, spec, Vec::new()).await
    }

    /// Creates a queue and, in the same metadata commit, `extra` entries: what makes the
    /// queue something more (a subscription) is on disk with it or not at all.
    pub(super) async fn create_queue_with(
        &self,
        name: &str,
        spec: QueueSpec,
        extra: Vec<(String, Vec<u8>)>,
    ) -> Result<()> {
        let name = Name::new(name)?;
        let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        let mut new = vec![(name.clone(), spec.clone())];
        {
            let queues = self.inner.queues.read().unwrap_or_else(|e| e.into_inner());
            if queues.contains_key(&name) {
                return Err(BrokerError::QueueExists { queue: name });
            }
            if spec.dead_letter == DeadLetter::Default {
                let dlq = spec
                    .dead_letter_target(&name)?
                    .expect("default has a target");
                if !queues.contains_key(&dlq) {
                    let dlq_spec = QueueSpec {
                        dead_letter: DeadLetter::Disabled,
                        durability: spec.durability,
                        ..QueueSpec::default()
                    };
                    new.push((dlq, dlq_spec));
                }
            }
            let mut all: Vec<(Name, QueueSpec)> = queues
                .iter()
                .map(|(n, q)| (n.clone(), q.spec.clone()))
                .collect();
            all.extend(new.iter().cloned());
            validate_topology(&all)?;
        }
        let mut opened = Vec::new();
        for (name, spec) in &new {
            // Left behind by a create or delete interrupted by a crash: not in the metadata,
            // so not a queue; its logs must not leak into the new one.
            let dir = Queue::dir(&self.inner.dir, name);
            if dir.exists() {
                std::fs::remove_dir_all(&dir)
                    .map_err(|e| ferry_storage::StorageError::io("remove stale queue", &dir, e))?;
            }
            let seed = self
                .inner
                .rng
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .u64(..);
            let queue = Queue::open(
                &self.inner.dir,
                name.clone(),
                spec.clone(),
                &self.inner.config,
                &self.inner.log_stats,
                seed,
                self.inner.token_base,
            )?;
            opened.push(Arc::new(queue));
        }
        let mut batch = MetaBatch::new();
        for (name, spec) in &new {
            batch.put(format!("{SPEC_PREFIX}{name}"), spec_codec::encode(spec));
        }
        for (key, value) in extra {
            batch.put(key, value);
        }
        meta.commit(batch)?;
        let mut queues = self.inner.queues.write().unwrap_or_else(|e| e.into_inner());
        for queue in opened {
            queues.insert(queue.name.clone(), queue);
        }
        Ok(())
    }

    /// Deletes a queue and its messages. Refused while another queue dead-letters into it.
    ///
    /// Allowed while messages are in flight, as `DeleteQueue` in SQS and `queue.delete`
    /// in RabbitMQ are by default: deleting is the operator's decision, and a consumer
    /// cannot be waited for. The leases end with the queue — a later ack, nack, reject or
    /// extend of one is [`BrokerError::QueueNotFound`] — and nothing is dead-lettered.
    ///
    /// A poisoned queue ([`BrokerError::QueuePoisoned`]) can be deleted: nothing in it can
    /// be trusted until a reopen, and deleting is what an operator may want instead.
    pub async fn delete_queue(&self, name: &str) -> Result<()> {
        let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        let queue = match self.queue(name) {
            Err(BrokerError::QueuePoisoned { queue, .. }) => self
                .inner
                .queues
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .get(&queue)
                .cloned()
                .ok_or(BrokerError::QueueNotFound {
                    queue: queue.to_string(),
                })?,
            other => other?,
        };
        {
            let queues = self.inner.queues.read().unwrap_or_else(|e| e.into_inner());
            for (origin, q) in queues.iter() {
                if origin != &queue.name
                    && q.spec.dead_letter_target(origin).ok().flatten().as_ref()
                        == Some(&queue.name)
                {
                    return Err(BrokerError::QueueIsDeadLetterTarget {
                        queue: queue.name.clone(),
                        origin: origin.clone(),
                    });
                }
            }
        }
        // Metadata first: a crash before the files are gone leaves a directory that is not
        // a queue, which create_queue clears.
        let mut batch = MetaBatch::new();
        batch.delete(format!("{SPEC_PREFIX}{}", queue.name));
        if queue.source.get().is_some() {
            for key in Self::subscription_keys(&queue.name) {
                batch.delete(key);
            }
        }
        meta.commit(batch)?;
        self.inner
            .queues
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&queue.name);
        let dir = Queue::dir(&self.inner.dir, &queue.name);
        drop(queue);
        std::fs::remove_dir_all(&dir)
            .map_err(|e| ferry_storage::StorageError::io("remove queue", &dir, e))?;
        Ok(())
    }

    /// Whether `name` is a dead-letter queue: its name ends in `.dlq` (the suffix is
    /// reserved for them, and every default dead-letter queue has it) or some queue names
    /// it as its dead-letter queue. Access control asks this to keep reading dead letters
    /// apart from consuming ordinary queues; it holds whether or not the queue exists yet.
    pub fn is_dead_letter_queue(&self, name: &str) -> bool {
        if name.ends_with(Name::DEAD_LETTER_SUFFIX) {
            return true;
        }
        let queues = self.inner.queues.read().unwrap_or_else(|e| e.into_inner());
        queues.values().any(
            |q| matches!(&q.spec.dead_letter, DeadLetter::Named(target) if target.as_str() == name),
        )
    }

    pub fn list_queues(&self) -> Vec<Name> {
        let queues = self.inner.queues.read().unwrap_or_else(|e| e.into_inner());
        queues.keys().cloned().collect()
    }

    pub fn describe_queue(&self, name: &str) -> Result<QueueInfo> {
        let queue = self.queue(name)?;
        let (state, counts) = {
            let inner = queue.lock();
            (inner.state.stats(self.now_ms()), inner.counts)
        };
        Ok(QueueInfo {
            name: queue.name.clone(),
            spec: queue.spec.clone(),
            stats: QueueStats {
                state,
                next_seq: queue.messages.end_offset(),
                acked: counts.acked,
                nacked: counts.nacked,
                dead_lettered: counts.dead_lettered,
                dropped: counts.dropped,
                cancelled: counts.cancelled,
                redriven: counts.redriven,
                skipped: counts.skipped,
            },
        })
    }

    // ---- Publish ----

    pub async fn publish(&self, queue: &str, message: OutgoingMessage) -> Result<MessageId> {
        let ids = self.publish_batch(queue, vec![message]).await?;
        Ok(ids[0])
    }

    /// Publishes messages in one storage append, returning their ids in order. All are
    /// validated first; any invalid message fails the whole batch and stores nothing. A
    /// duplicate (same dedup id, or same producer-chosen id, within the queue's window —
    /// also within the batch) stores nothing and returns the original's id.
    ///
    /// Two publishes of one dedup id racing each other (neither stored yet) may both be
    /// stored: the window learns an id only once its message is durable.
    ///
    /// The queue's length limit applies to the batch as a whole (duplicates excluded): see
    /// [`OverflowPolicy`](crate::OverflowPolicy) for the overflow policies; under `RejectPublish` a batch that does not fit
    /// is [`BrokerError::QueueFull`] and stores nothing.
    pub async fn publish_batch(
        &self,
        queue: &str,
        messages: Vec<OutgoingMessage>,
    ) -> Result<Vec<MessageId>> {
        let queue = self.queue(queue)?;
        let now_ms = self.now_ms();
        let mut limits = self.inner.config.limits.clone();
        limits.max_delay = limits.max_delay.min(queue.spec.max_delay);
        let mut resolved = Vec::with_capacity(messages.len());
        {
            let mut rng = self.inner.rng.lock().unwrap_or_else(|e| e.into_inner());
            for mut message in messages {
                if message.ttl.is_none() {
                    message.ttl = queue.spec.default_ttl;
                }
                let message = message.into_message(&limits, now_ms, &mut *rng)?;
                let keys = dedup_keys(&message);
                resolved.push((message, keys));
            }
        }
        let mut ids = Vec::with_capacity(resolved.len());
        let mut to_store = Vec::new();
        {
            let inner = queue.lock();
            let mut in_batch: HashMap<String, MessageId> = HashMap::new();
            for (message, keys) in resolved {
                let original = Queue::duplicate_of(&inner, &keys, now_ms)
                    .or_else(|| keys.iter().find_map(|k| in_batch.get(k).copied()));
                if let Some(original) = original.filter(|_| inner.dedup.is_enabled()) {
                    ids.push(original);
                    continue;
                }
                for key in &keys {
                    in_batch.insert(key.clone(), message.id);
                }
                ids.push(message.id);
                to_store.push((message, keys));
            }
        }
        if !to_store.is_empty() {
            self.store_limited(&queue, to_store).await?;
        }
        Ok(ids)
    }

    /// Cancels a scheduled message — published with a delay and not delivered yet — by its
    /// id. Returns `true` once the cancellation is durable (the message never comes back,
    /// also after a restart); `false`, changing nothing, when the queue holds no such
    /// scheduled message: the id is unknown, or the message is already due, delivered,
    /// waiting for a retry, settled or dead-lettered.
    ///
    /// Each queue keeps an id → seq index of its scheduled, never-delivered messages only
    /// (rebuilt on open), so the index grows with the delayed backlog, not with the queue.
    /// If several scheduled messages share an id (dedup off), the latest is the one found.
    pub async fn cancel(&self, queue: &str, id: MessageId) -> Result<bool> {
        let queue = self.queue(queue)?;
        let now_ms = self.now_ms();
        let rx = {
            let mut inner = queue.lock();
            let Some(seq) = inner.state.cancel_id(id, now_ms) else {
                return Ok(false);
            };
            queue.journal(&mut inner, &[JournalEvent::Cancelled { seq }], now_ms)
        };
        durable(rx).await?;
        Ok(true)
    }

    // ---- Receive and outcomes ----

    /// Caps how many messages `consumer` may hold in flight on `queue` at once; `None` lifts
    /// the cap. A consumer at its cap receives nothing; lowering a cap recalls nothing.
    ///
    /// Until the broker is reopened: the cap lives in memory only, is not journaled, and is gone after the
    /// broker reopens (consumers set it again when they reconnect).
    pub fn set_prefetch(&self, queue: &str, consumer: &str, prefetch: Option<usize>) -> Result<()> {
        check_consumer(consumer)?;
        let queue = self.queue(queue)?;
        queue.check_consumer(consumer)?;
        queue.lock().state.set_prefetch(consumer, prefetch);
        // A raised cap may let a long-polling receive take messages now.
        queue.ready.notify_waiters();
        Ok(())
    }

    /// Leases up to `max` messages to `consumer` for `lease` (the queue's by default),
    /// waiting up to `wait` (real time) for one to become ready when none is. An empty
    /// consumer name and a lease outside 1 ms to 12 hours are refused, leasing nothing.
    pub async fn receive(
        &self,
        queue: &str,
        consumer: &str,
        max: usize,
        lease: Option<Duration>,
        wait: Option<Duration>,
    ) -> Result<Vec<ReceivedMessage>> {
        check_consumer(consumer)?;
        check_receive_lease(lease)?;
        let queue = self.queue(queue)?;
        queue.check_consumer(consumer)?;
        let deadline = wait.map(|w| tokio::time::Instant::now() + w);
        loop {
            let notified = queue.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            self.tick_queue(&queue).await?;
            let now_ms = self.now_ms();
            let (deliveries, rx, effects) = {
                let mut inner = queue.lock();
                let deliveries = inner.state.receive(consumer, max, lease, now_ms);
                let mut events = Vec::with_capacity(deliveries.len());
                for d in &deliveries {
                    inner.deliveries.insert(d.seq, d.delivery);
                    events.push(JournalEvent::Leased {
                        seq: d.seq,
                        deliveries: d.delivery,
                        until_ms: d.lease_until_ms,
                        consumer: consumer.to_owned(),
                    });
                }
                let rx = (!events.is_empty()).then(|| queue.journal(&mut inner, &events, now_ms));
                (deliveries, rx, queue.take_effects(&mut inner, now_ms))
            };
            self.apply_effects(&queue, effects).await?;
            if let Some(rx) = rx {
                durable(rx).await?;
                let earliest = deliveries.iter().map(|d| d.lease_until_ms).min();
                self.inner
                    .timers_changed
                    .timer_at(earliest.unwrap_or(i64::MAX));
                let seqs: Vec<Seq> = deliveries.iter().map(|d| d.seq).collect();
                let messages = queue.read_many(&seqs)?;
                let mut out = Vec::with_capacity(deliveries.len());
                for (d, message) in deliveries.into_iter().zip(messages) {
                    out.push(ReceivedMessage {
                        id: d.id,
                        seq: d.seq,
                        token: d.token,
                        delivery: d.delivery,
                        lease_until_ms: d.lease_until_ms,
                        payload: message.payload,
                        key: message.key,
                        headers: message.headers,
                        priority: message.priority,
                        published_at: message.published_at,
                        dead_letter: message.dead_letter,
                    });
                }
                return Ok(out);
            }
            let Some(deadline) = deadline else {
                return Ok(Vec::new());
            };
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Ok(Vec::new());
            }
        }
    }

    /// Settles a delivered message. Returns once the ack is durable: an acked message never
    /// comes back, even after a crash. A repeated ack is `Ok(AlreadySettled)`; a stale token
    /// is [`BrokerError::StaleLease`]; a seq the queue never assigned is
    /// [`BrokerError::MessageNotPublished`] (as for every settle), not "already settled".
    pub async fn ack(&self, queue: &str, seq: Seq, token: LeaseToken) -> Result<Acked> {
        let queue = self.queue(queue)?;
        queue.check_published(seq)?;
        let now_ms = self.now_ms();
        let (acked, rx, effects) = {
            let mut inner = queue.lock();
            let acked = inner.state.ack(seq, token, now_ms)?;
            let rx = (acked == Acked::Settled)
                .then(|| queue.journal(&mut inner, &[JournalEvent::Acked { seq }], now_ms));
            (acked, rx, queue.take_effects(&mut inner, now_ms))
        };
        if let Some(rx) = rx {
            durable(rx).await?;
        }
        self.apply_effects(&queue, effects).await?;
        Ok(acked)
    }

    /// Settles several delivered messages of one queue with one journal write; returns once
    /// every settlement is durable, with one outcome per message in order: as
    /// [`ack`](Self::ack) gives it (`Ok(Settled)`, `Ok(AlreadySettled)`, or a
    /// [`BrokerError::StaleLease`] that changed nothing). The outer error is for the queue
    /// (unknown, poisoned) or the write.
    pub async fn ack_batch(
        &self,
        queue: &str,
        acks: &[(Seq, LeaseToken)],
    ) -> Result<Vec<Result<Acked>>> {
        let queue = self.queue(queue)?;
        let now_ms = self.now_ms();
        let (outcomes, rx, effects) = {
            let mut inner = queue.lock();
            let mut events = Vec::with_capacity(acks.len());
            let outcomes: Vec<Result<Acked>> = acks
                .iter()
                .map(|&(seq, token)| {
                    queue.check_published(seq)?;
                    let acked = inner.state.ack(seq, token, now_ms)?;
                    if acked == Acked::Settled {
                        events.push(JournalEvent::Acked { seq });
                    }
                    Ok(acked)
                })
                .collect();
            let rx = (!events.is_empty()).then(|| queue.journal(&mut inner, &events, now_ms));
            (outcomes, rx, queue.take_effects(&mut inner, now_ms))
        };
        if let Some(rx) = rx {
            durable(rx).await?;
        }
        self.apply_effects(&queue, effects).await?;
        Ok(outcomes)
    }

    /// A failed attempt: redelivery after `delay` or the retry policy's backoff, or the
    /// dead-letter queue when deliveries are used up. Returns once that is durable. A
    /// `delay` over 90 days is [`BrokerError::DelayTooLong`], and the lease is kept.
    pub async fn nack(
        &self,
        queue: &str,
        seq: Seq,
        token: LeaseToken,
        delay: Option<Duration>,
        error: Option<&str>,
    ) -> Result<Nacked> {
        check_retry_delay(delay)?;
        let queue = self.queue(queue)?;
        queue.check_published(seq)?;
        let now_ms = self.now_ms();
        let (nacked, effects) = {
            let mut inner = queue.lock();
            let nacked = inner.state.nack(seq, token, delay, error, now_ms)?;
            // The `Failed` event of a retry is journaled with the effects.
            (nacked, queue.take_effects(&mut inner, now_ms))
        };
        self.apply_effects(&queue, effects).await?;
        if let Nacked::RetryAt(at_ms) = nacked {
            self.inner.timers_changed.timer_at(at_ms);
        }
        Ok(nacked)
    }

    /// A permanent failure: the message goes to the dead-letter queue now with `reason`.
    /// Returns once the dead letter is stored and the origin's journal says so.
    pub async fn reject(
        &self,
        queue: &str,
        seq: Seq,
        token: LeaseToken,
        reason: &str,
    ) -> Result<()> {
        let queue = self.queue(queue)?;
        queue.check_published(seq)?;
        let now_ms = self.now_ms();
        let effects = {
            let mut inner = queue.lock();
            inner.state.reject(seq, token, reason, now_ms)?;
            queue.take_effects(&mut inner, now_ms)
        };
        self.apply_effects(&queue, effects).await
    }

    /// Moves the lease's deadline to `now + by`; returns the new deadline once it is
    /// durable (journaled as `Extended`), so after a restart the message stays out of
    /// delivery until the extended deadline. `by` over 12 hours is refused
    /// ([`BrokerError::InvalidSetting`]) and the lease is left as it was.
    pub async fn extend(
        &self,
        queue: &str,
        seq: Seq,
        token: LeaseToken,
        by: Duration,
    ) -> Result<i64> {
        check_extension(by)?;
        let queue = self.queue(queue)?;
        queue.check_published(seq)?;
        let now_ms = self.now_ms();
        let (until_ms, rx) = {
            let mut inner = queue.lock();
            let until_ms = inner.state.extend(seq, token, by, now_ms)?;
            let event = JournalEvent::Extended { seq, until_ms };
            let rx = queue.journal(&mut inner, &[event], now_ms);
            (until_ms, rx)
        };
        self.inner.timers_changed.timer_at(until_ms);
        durable(rx).await?;
        Ok(until_ms)
    }

    /// Holds `key`'s messages on a key-shared queue until [`unpark`](Self::unpark); durable.
    /// Returns `false` (and changes nothing) on a shared or exclusive queue.
    pub async fn park(&self, queue: &str, key: &[u8]) -> Result<bool> {
        let queue = self.queue(queue)?;
        let now_ms = self.now_ms();
        let rx = {
            let mut inner = queue.lock();
            if !inner.state.park(key) {
                return Ok(false);
            }
            let key = Bytes::copy_from_slice(key);
            queue.journal(&mut inner, &[JournalEvent::Parked { key }], now_ms)
        };
        durable(rx).await?;
        Ok(true)
    }

    pub async fn unpark(&self, queue: &str, key: &[u8]) -> Result<()> {
        let queue = self.queue(queue)?;
        let now_ms = self.now_ms();
        let (rx, effects) = {
            let mut inner = queue.lock();
            inner.state.unpark(key, now_ms);
            let key = Bytes::copy_from_slice(key);
            let rx = queue.journal(&mut inner, &[JournalEvent::Unparked { key }], now_ms);
            (rx, queue.take_effects(&mut inner, now_ms))
        };
        durable(rx).await?;
        self.apply_effects(&queue, effects).await
    }

    // ---- Time ----

    /// Fires every due timer of every queue at the clock's current time and processes the
    /// results (redeliveries, dead letters). The background task does this at each queue's
    /// next timer; tests driving a manual clock call it directly.
    ///
    /// Poisoned queues ([`BrokerError::QueuePoisoned`]) are skipped: they wait for a reopen.
    pub async fn tick_now(&self) -> Result<()> {
        for queue in self.queue_list().into_iter().filter(|q| !q.is_poisoned()) {
            self.tick_queue(&queue).await?;
        }
        Ok(())
    }

    async fn tick_queue(&self, queue: &Arc<Queue>) -> Result<()> {
        let now_ms = self.now_ms();
        let effects = {
            let mut inner = queue.lock();
            inner.state.tick(now_ms);
            queue.take_effects(&mut inner, now_ms)
        };
        self.apply_effects(queue, effects).await
    }

    /// The earliest timer over all queues.
    fn next_wakeup(&self) -> Option<i64> {
        self.queue_list()
            .iter()
            .filter(|q| !q.is_poisoned())
            .filter_map(|q| q.lock().state.next_wakeup())
            .min()
    }
}

async fn timer_task(broker: Weak<BrokerInner>, wake: Arc<TimerWake>) {
    let mut last_housekeeping = tokio::time::Instant::now();
    loop {
        let Some(inner) = broker.upgrade() else {
            return;
        };
        let broker = Broker { inner };
        let housekeeping = broker.inner.config.housekeeping_interval;
        if last_housekeeping.elapsed() >= housekeeping {
            last_housekeeping = tokio::time::Instant::now();
            // Nothing to hand an error to: a failed write poisons its queue (reported to
            // its callers); a failed delete is tried again next time.
            let _ = broker.maintain_now(false).await;
        }
        let now_ms = broker.now_ms();
        let sleep = broker
            .next_wakeup()
            .map(|at| Duration::from_millis(at.saturating_sub(now_ms).max(0) as u64))
            .unwrap_or(MAX_TIMER_SLEEP)
            .min(MAX_TIMER_SLEEP)
            .min(housekeeping.saturating_sub(last_housekeeping.elapsed()));
        if !sleep.is_zero() {
            drop(broker);
            wake.sleeping_until(now_ms.saturating_add(sleep.as_millis() as i64));
            let _ = tokio::time::timeout(sleep, wake.notify.notified()).await;
            wake.awake();
            continue;
        }
        if let Err(error) = broker.tick_now().await {
            // Nothing to hand the error to; the next tick retries. Back off so a failing
            // disk does not spin this task.
            drop(error);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Removes queue directories the metadata does not name: temporary queues of an earlier
/// run, and queues whose creation or deletion a crash interrupted.
fn remove_stale_queue_dirs(dir: &Path, queues: &BTreeMap<Name, Arc<Queue>>) -> Result<()> {
    let root = dir.join("queues");
    let Ok(entries) = std::fs::read_dir(&root) else {
        return Ok(());
    };
    for entry in entries {
        let entry = entry.map_err(|e| ferry_storage::StorageError::io("list queues", &root, e))?;
        let known = entry
            .file_name()
            .to_str()
            .and_then(|n| Name::new(n).ok())
            .is_some_and(|n| queues.contains_key(&n));
        if !known {
            let path = entry.path();
            std::fs::remove_dir_all(&path)
                .map_err(|e| ferry_storage::StorageError::io("remove stale queue", &path, e))?;
        }
    }
    Ok(())
}

/// The longest consumer name, in bytes: it is journaled with every lease.
pub const MAX_CONSUMER_NAME_BYTES: usize = 256;

fn check_consumer(consumer: &str) -> Result<()> {
    // Prefetch caps, exclusive turns, leases and dead letters are all told apart by the
    // consumer's name; an empty one is almost always an unset field.
    if consumer.is_empty() {
        return Err(BrokerError::EmptyConsumerName);
    }
    if consumer.len() > MAX_CONSUMER_NAME_BYTES {
        let mut end = 32;
        while !consumer.is_char_boundary(end) {
            end -= 1;
        }
        return Err(BrokerError::ConsumerNameTooLong {
            prefix: consumer[..end].to_owned(),
            len: consumer.len(),
            max: MAX_CONSUMER_NAME_BYTES,
        });
    }
    Ok(())
}

/// A lease asked for at receive: the same bounds as a queue's own lease (1 ms to
/// [`QueueSpec::MAX_LEASE`]), refused rather than clamped so a caller never works on a
/// message believing it holds a lease it does not.
fn check_receive_lease(lease: Option<Duration>) -> Result<()> {
    match lease {
        Some(lease) if millis(lease) < 1 || lease > QueueSpec::MAX_LEASE => {
            Err(BrokerError::InvalidSetting {
                setting: "lease",
                problem: format!(
                    "must be between 1 ms and 12 hours, got {}; a consumer that needs longer \
                     should extend its lease while it works",
                    crate::error::human(&lease)
                ),
            })
        }
        _ => Ok(()),
    }
}

/// A lease extension: the new deadline is `now + by`, so `by` is at most
/// [`QueueSpec::MAX_LEASE`]; zero ends the lease now (the attempt fails as if it expired).
fn check_extension(by: Duration) -> Result<()> {
    if by > QueueSpec::MAX_LEASE {
        return Err(BrokerError::InvalidSetting {
            setting: "lease extension",
            problem: format!(
                "must be between 0 ms and 12 hours, got {}; extend again later to hold the \
                 message longer",
                crate::error::human(&by)
            ),
        });
    }
    Ok(())
}

/// A nack's explicit delay: at most [`QueueSpec::MAX_DELAY`], as for a delayed publish.
fn check_retry_delay(delay: Option<Duration>) -> Result<()> {
    match delay {
        Some(delay) if delay > QueueSpec::MAX_DELAY => Err(BrokerError::DelayTooLong {
            delay,
            max: QueueSpec::MAX_DELAY,
        }),
        _ => Ok(()),
    }
}

/// The largest record a valid message can make: the limits' payload, key and headers, plus
/// room for the broker's own headers (dead-letter metadata with its 1 KiB error included).
pub(super) fn max_record_bytes(limits: &Limits) -> usize {
    let headers =
        limits.max_headers * (limits.max_header_name_bytes + limits.max_header_value_bytes + 6);
    limits.max_payload_bytes
        + limits.max_key_bytes
        + limits.max_dedup_id_bytes
        + headers
        + (16 << 10)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod feature_tests;

#[cfg(test)]
mod housekeeping_tests;

#[cfg(test)]
mod edge_tests;

#[cfg(test)]
mod temporary_tests;

#[cfg(test)]
mod topic_tests;

#[cfg(test)]
mod compaction_tests;

#[cfg(test)]
mod idempotent_tests;

#[cfg(test)]
mod group_tests;

#[cfg(test)]
mod storage_stats_tests;

#[cfg(test)]
mod subscription_tests;
