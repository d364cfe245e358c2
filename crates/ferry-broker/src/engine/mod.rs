//! The engine: [`Broker`], the embedded async broker that makes [`QueueState`]'s decisions
//! durable and serves them.
//!
//! **Layout** of a broker directory (held with a [`DirLock`]):
//! - `meta/` — a [`MetaStore`] with each queue's spec under `queue/<name>`
//!   (`spec_codec/queue.rs`), rewritten by [`Broker::update_queue`];
//! - `queues/<name>/messages/` — a storage [`Log`](ferry_storage::Log) of the queue's
//!   messages; a record's offset is the message's [`Seq`];
//! - `queues/<name>/journal/` — a log of state events ([`JournalEvent`]): leases, failed
//!   attempts, lease extensions, acks, dead letters, cancellations, overflow drops, parked
//!   keys, redrives, purges — and checkpoints of them all, so that the journal's older segments can
//!   be deleted. Settled messages' segments are deleted too; see [`housekeeping`].
//! - `topics/<name>/<partition>/` — a storage log per partition of each topic, whose spec
//!   is in the `MetaStore` under `topic/<name>` (see `engine/topics.rs`).
//! - snapshots of subscriptions in the `MetaStore` under `snapshot/<name>` (see
//!   `engine/snapshots.rs`).
//!
//! **Durability.** Publish returns once the message is durable under the queue's
//! durability; ack, nack, reject, extend, park, unpark and purge once their journal events
//! are (a lease expiry journals its `Failed` attempt too, ahead of any redelivery's
//! `Leased`, since effects are journaled under the state lock); a spec update once its
//! metadata commit is; receive once its `Leased` events are, so a restart knows how many deliveries each message had. A dead
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
//! [`JournalEvent`]: crate::queue::journal::JournalEvent
//! [`QueueState`]: crate::QueueState

mod delete_records;
mod deleted_dir;
mod disk_reserve;
mod effects;
mod groups;
mod housekeeping;
mod links;
mod pending_publish;
mod producer_ids;
mod queue;
mod recovery;
mod snapshots;
mod storage_stats;
mod subscriptions;
mod timer_wake;
mod topic;
mod topic_compaction;
mod topic_update;
mod topics;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use ferry_storage::{Clock, DirLock, MetaStore, SystemClock};

use crate::error::{BrokerError, Result};
use crate::message::{Limits, OutgoingMessage};
use crate::message_id::MessageId;
use crate::name::Name;
use crate::queue::batch_window::BatchMark;
use crate::queue::dedup::DedupKey;
use crate::queue::journal::JournalEvent;
use crate::spec_codec;

#[cfg(test)]
use queue::MAX_CONSUMER_NAME_BYTES;
use queue::check_consumer;
use queue::{Incoming, Queue, dedup_key, durable};
use timer_wake::TimerWake;

pub use disk_reserve::DiskSpace;
pub use groups::{
    CommittedOffset, GroupInfo, GroupJoin, GroupPartition, MAX_OFFSET_METADATA, OffsetCommit,
    PartitionLag, StartAt,
};
pub use housekeeping::{Checkpoint, MaintenanceReport};
pub use links::LinkInfo;
pub use pending_publish::PendingPublish;
pub use queue::{MAX_PEEK, PeekPage, PeekedMessage};
pub use queue::{ParkedKey, ReceiveOptions, ReceivedMessage};
pub use queue::{QueueInfo, QueueStats};
pub use queue::{RedriveFilter, RedriveReport, RedriveRequest};
pub use snapshots::{SNAPSHOT_LIFETIME, SNAPSHOT_MIN_LIFETIME, SnapshotInfo};
pub use storage_stats::StorageStats;
pub use subscriptions::{SeekTarget, SkippedRange, SubscriptionInfo};
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
    /// The filter kinds links may use beyond the broker's own (see [`crate::link`]): a
    /// stored link of a kind not registered here fails the open.
    pub filter_evaluators: crate::link::FilterEvaluators,
    /// Checks messages published to a queue or topic that requires a schema subject (see
    /// `schema_requirement.rs`). `None`: such publishes are refused, never stored unchecked.
    pub payload_validator: Option<Arc<dyn crate::PayloadValidator>>,
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
            filter_evaluators: crate::link::FilterEvaluators::default(),
            payload_validator: None,
        }
    }
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
    /// Snapshots of subscriptions, by name (see `engine/snapshots.rs`).
    snapshots: Mutex<BTreeMap<Name, Arc<snapshots::Snapshot>>>,
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
            let spec = spec_codec::queue::decode(&value).map_err(bad)?;
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
        deleted_dir::sweep(&dir.join("topics"))?;
        let topics = topics::open_topics(&dir, &meta, &config, &log_stats)?;
        let mut links = subscriptions::link_subscriptions(&meta, &queues, &topics)?;
        links.extend(links::link_attached(
            &meta,
            &queues,
            &topics,
            &config.filter_evaluators,
        )?);
        let snapshots = snapshots::load(&meta)?;
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
                snapshots: Mutex::new(snapshots),
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
        subscriptions::finish_interrupted_seeks(&broker).await?;
        if broker.inner.config.background_timers {
            tokio::spawn(timer_task(
                Arc::downgrade(&broker.inner),
                Arc::clone(&broker.inner.timers_changed),
            ));
        }
        Ok(broker)
    }

    /// Whether this broker was opened with a filter evaluator of `kind`
    /// ([`BrokerConfig::filter_evaluators`]): a front end whose links use one checks it
    /// when it opens, instead of failing at its first publish.
    pub fn has_filter_evaluator(&self, kind: &str) -> bool {
        self.inner.config.filter_evaluators.is_registered(kind)
    }

    /// The data directory the broker was opened in: every queue's and topic's files are
    /// under it. Front ends name it where their protocol has a place for it (Kafka's
    /// DescribeLogDirs).
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The time by the broker's clock ([`BrokerConfig::clock`]), in ms since the Unix
    /// epoch: what a front end's own timing (the server's publish quotas) counts by, so
    /// that a test drives broker and front end with one manual clock.
    pub fn now_ms(&self) -> i64 {
        self.inner.config.clock.now_ms()
    }

    /// The queue named `name`. A name outside the naming rules is refused as such (empty,
    /// too long, a character that is not allowed): it could never name a queue, and saying
    /// "does not exist" would send the caller to create it.
    fn queue(&self, name: &str) -> Result<Arc<Queue>> {
        let name = Name::new(name)?;
        let queues = self.inner.queues.read().unwrap_or_else(|e| e.into_inner());
        let queue = queues
            .get(&name)
            .cloned()
            .ok_or_else(|| BrokerError::QueueNotFound {
                queue: name.to_string(),
            })?;
        queue.check()?;
        queue.touch(self.now_ms());
        Ok(queue)
    }

    fn queue_list(&self) -> Vec<Arc<Queue>> {
        let queues = self.inner.queues.read().unwrap_or_else(|e| e.into_inner());
        queues.values().cloned().collect()
    }

    // ---- Publish ----

    pub async fn publish(&self, queue: &str, message: OutgoingMessage) -> Result<MessageId> {
        let ids = self.publish_batch(queue, vec![message]).await?;
        Ok(ids[0])
    }

    /// Publishes messages in one storage append, returning their ids in order. All are
    /// validated first; any invalid message fails the whole batch and stores nothing. A
    /// duplicate (same dedup id, or same producer-chosen id, within the queue's window —
    /// also within the batch) stores nothing and returns the original's id. A dedup id on a
    /// queue without a dedup window is [`BrokerError::DedupIdWithoutWindow`].
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
        self.publish_call(queue, None, messages).await
    }

    /// [`publish_batch`](Self::publish_batch) made safe to retry as a whole: a call with the
    /// `batch` id of a call already stored within the queue's dedup window stores nothing
    /// and answers with the original ids. One window entry per call, however many messages
    /// it carries (see `queue/batch_window.rs`): this is how a remote producer gets retry
    /// safety without a dedup key per message.
    ///
    /// The ids of the messages without a dedup key of their own (no dedup id, no chosen
    /// id) are minted by the broker as one run; those with one go through the dedup window
    /// as in `publish_batch`. A retry must carry the same messages: one with a different
    /// number of messages without a dedup key is [`BrokerError::BatchIdReused`]. A queue
    /// whose dedup window is off remembers no batch: each call is stored. Two calls with
    /// one batch id racing each other (neither stored yet) may both be stored, as with
    /// dedup ids.
    pub async fn publish_batch_idempotent(
        &self,
        queue: &str,
        batch: MessageId,
        messages: Vec<OutgoingMessage>,
    ) -> Result<Vec<MessageId>> {
        if batch.is_nil() {
            return Err(BrokerError::InvalidMessageId {
                input: batch.to_string(),
                problem: "a batch id may not be all zeros".into(),
            });
        }
        self.publish_call(queue, Some(batch), messages).await
    }

    async fn publish_call(
        &self,
        queue: &str,
        batch: Option<MessageId>,
        messages: Vec<OutgoingMessage>,
    ) -> Result<Vec<MessageId>> {
        let queue = self.queue(queue)?;
        let spec = queue.spec();
        self.check_schema(spec.schema_subject.as_deref(), &messages)?;
        let now_ms = self.now_ms();
        let mut limits = self.inner.config.limits.clone();
        limits.max_delay = limits.max_delay.min(spec.max_delay);
        // Without a dedup window there is nothing to remember a batch in.
        let batch = batch.filter(|_| !spec.dedup_window.is_zero());
        let mut resolved = Vec::with_capacity(messages.len());
        let mut unkeyed = 0u32;
        let run = {
            let mut rng = self.inner.rng.lock().unwrap_or_else(|e| e.into_inner());
            let run = batch.map(|_| MessageId::generate_run(now_ms, &mut *rng));
            for mut message in messages {
                if message.ttl.is_none() {
                    message.ttl = spec.default_ttl;
                }
                spec.check_priority(&queue.name, message.priority)?;
                // A dedup id the queue cannot act on is refused, never silently kept.
                if message.dedup_id.is_some() && spec.dedup_window.is_zero() {
                    return Err(BrokerError::DedupIdWithoutWindow {
                        queue: queue.name.clone(),
                    });
                }
                let mut message = message.into_message(&limits, now_ms, &mut *rng)?;
                let dedup_key = dedup_key(&message);
                if dedup_key.is_none()
                    && let Some(first) = run
                {
                    // The id minted above is replaced by the run's: a retry is answered
                    // from the run's first id and length alone.
                    message.id = first.offset_by(unkeyed);
                    unkeyed += 1;
                }
                resolved.push(Incoming { message, dedup_key });
            }
            run
        };
        let mut ids = Vec::with_capacity(resolved.len());
        let mut to_store = Vec::new();
        let mut mark = None;
        {
            let inner = queue.lock();
            let stored = batch.and_then(|b| inner.batches.get(b, now_ms));
            if let (Some(stored), Some(batch)) = (stored, batch)
                && stored.count != unkeyed
            {
                return Err(BrokerError::BatchIdReused {
                    queue: queue.name.clone(),
                    batch,
                    stored: stored.count,
                    sent: unkeyed,
                });
            }
            let mut in_batch: HashMap<DedupKey, MessageId> = HashMap::new();
            let mut k = 0;
            for incoming in resolved {
                let key = incoming.dedup_key.as_ref();
                if key.is_none()
                    && let Some(stored) = stored
                {
                    ids.push(stored.id(k));
                    k += 1;
                    continue;
                }
                let original = Queue::duplicate_of(&inner, key, now_ms)
                    .or_else(|| key.and_then(|k| in_batch.get(k).copied()));
                if let Some(original) = original.filter(|_| inner.dedup.is_enabled()) {
                    ids.push(original);
                    continue;
                }
                if let Some(key) = key {
                    in_batch.insert(key.clone(), incoming.message.id);
                }
                ids.push(incoming.message.id);
                to_store.push(incoming);
            }
            if stored.is_none()
                && unkeyed > 0
                && let (Some(batch), Some(first)) = (batch, run)
            {
                mark = Some(BatchMark {
                    batch,
                    first,
                    count: unkeyed,
                });
            }
        }
        if !to_store.is_empty() {
            self.store_limited(&queue, to_store, mark).await?;
        }
        Ok(ids)
    }

    /// Refuses the publish unless every message matches `subject` (when the channel requires
    /// one): on the caller's task, before anything is stored.
    fn check_schema(&self, subject: Option<&str>, messages: &[OutgoingMessage]) -> Result<()> {
        crate::schema_requirement::check_messages(
            self.inner.config.payload_validator.as_deref(),
            subject,
            messages,
        )
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
            let _ = broker.maintain_now(Checkpoint::WhenDue).await;
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
mod pending_publish_tests;

#[cfg(test)]
mod compaction_tests;

#[cfg(test)]
mod idempotent_tests;

#[cfg(test)]
mod batch_id_tests;

#[cfg(test)]
mod group_tests;

#[cfg(test)]
mod external_offset_tests;

#[cfg(test)]
mod storage_stats_tests;

#[cfg(test)]
mod subscription_tests;

#[cfg(test)]
mod seek_tests;

#[cfg(test)]
mod fanout_tests;

#[cfg(test)]
mod refusal_tests;

#[cfg(test)]
mod unsent_tests;

#[cfg(test)]
mod update_tests;

#[cfg(test)]
mod topic_admin_tests;

#[cfg(test)]
mod purge_tests;

#[cfg(test)]
mod link_tests;
#[cfg(test)]
mod run_tests;

#[cfg(test)]
mod park_tests;

#[cfg(test)]
mod schema_tests;

#[cfg(test)]
mod dead_letter_topic_tests;
