//! One open queue: its two logs (messages and state journal), its in-memory delivery state
//! and dedup window, and its recovery from those logs — and, in the modules below, the
//! broker's operations on queues alone: declaring them (`admin`), changing their settings
//! (`update`), consuming and settling (`consume`), length limits (`limits`), peeking
//! (`peek`), purging (`purge`), redriving dead letters (`redrive`), temporary queues
//! (`temporary`) and giving back unsent deliveries (`unsent`). What a decision's effects do is in
//! `engine/effects.rs`; the delivery state itself is the pure `crate::queue::state`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use bytes::Bytes;
use ferry_storage::{Clock, Log, LogConfig, NewRecord, Record};
use tokio::sync::{Notify, oneshot};

use crate::engine::subscriptions::Link;
use crate::error::{BrokerError, Result};
use crate::message::Message;
use crate::message_id::MessageId;
use crate::name::Name;
use crate::queue::batch_window::{BatchMark, BatchWindow};
use crate::queue::dedup::{DedupKey, DedupWindow};
use crate::queue::journal::{Counts, JournalEvent};
use crate::queue::seq_ranges::SeqRanges;
use crate::queue::state::{QueueState, Seq, Tracked};
use crate::spec::QueueSpec;
use crate::subscription::{TopicRef, decode_record};

use crate::engine::storage_stats::LogStatsByKind;
use crate::engine::{BrokerConfig, max_record_bytes};

mod admin;
mod consume;
mod limits;
mod peek;
mod purge;
mod redrive;
mod temporary;
mod unsent;
mod update;

pub use admin::{QueueInfo, QueueStats};
#[cfg(test)]
pub(crate) use consume::MAX_CONSUMER_NAME_BYTES;
pub(crate) use consume::check_consumer;
pub use consume::{ParkedKey, ReceiveOptions, ReceivedMessage};
pub use peek::{MAX_PEEK, PeekPage, PeekedMessage};
pub use redrive::{RedriveFilter, RedriveReport, RedriveRequest};

/// Read budget when scanning a log from its start.
const SCAN_BYTES: usize = 1 << 20;
/// Most bytes one read of [`Queue::read_many`] asks for.
const READ_MANY_BYTES: usize = 256 << 10;
/// What [`Queue::read_many`] budgets per wanted seq before it knows the sizes.
const SMALL_RECORD_BYTES: u64 = 128;

pub(crate) struct Queue {
    pub name: Name,
    /// Behind a lock because [`Broker::update_queue`](crate::Broker::update_queue) changes
    /// its mutable settings on the live queue; read it with [`Queue::spec`].
    spec: RwLock<Arc<QueueSpec>>,
    pub messages: Log,
    pub journal: Log,
    pub state: Mutex<Inner>,
    /// Woken when a message may have become ready (publish, end of a delay or backoff).
    pub ready: Notify,
    /// Set, with the error, by the first failed append to either log: from then on the
    /// state in memory may disagree with the disk, and every operation on the queue is
    /// [`BrokerError::QueuePoisoned`] until the broker reopens.
    pub poisoned: Arc<OnceLock<String>>,
    /// Set for a temporary queue (see `engine/queue/temporary.rs`).
    pub temporary: Option<temporary::Temporary>,
    /// Set for a subscription: its topic, filter and cursors (see `engine/subscriptions.rs`).
    pub source: OnceLock<Arc<Link>>,
    /// The links that attach this queue to topics (see `engine/links.rs`), by id; detached
    /// ones stay until their references are settled.
    pub attached: RwLock<Vec<Arc<Link>>>,
    /// For a subscription, the references whose topic positions the saved cursors cover:
    /// message-log retention keeps everything from here on, so that a restart, which
    /// resumes after the highest reference on disk or the saved cursor, never references
    /// again a message that was acked and whose reference retention deleted. Nothing is
    /// covered until housekeeping first saves the cursors.
    pub retention_cap: std::sync::atomic::AtomicU64,
    pub clock: Arc<dyn Clock>,
    /// Test-only fault: the next journal append fails as if the disk were read-only.
    #[cfg(test)]
    pub fail_next_journal_append: std::sync::atomic::AtomicBool,
}

/// A message on its way into a queue's log, with the key it enters the dedup window under
/// once it is stored (none for a dead letter or a redriven message).
pub(crate) struct Incoming {
    pub message: Message,
    pub dedup_key: Option<DedupKey>,
}

impl Incoming {
    /// A message that takes no place in the dedup window.
    pub fn without_dedup(message: Message) -> Incoming {
        Incoming {
            message,
            dedup_key: None,
        }
    }
}

/// Room under a queue's length limit: messages and their bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Room {
    pub messages: u64,
    pub bytes: u64,
}

impl Room {
    pub const NONE: Room = Room {
        messages: 0,
        bytes: 0,
    };

    pub fn reserve(&mut self, room: Room) {
        self.messages += room.messages;
        self.bytes += room.bytes;
    }

    pub fn release(&mut self, room: Room) {
        self.messages -= room.messages;
        self.bytes -= room.bytes;
    }
}

pub(crate) struct Inner {
    pub state: QueueState,
    pub dedup: DedupWindow,
    /// Publish calls stored with a batch id, for the same window: see `batch_window.rs`.
    pub batches: BatchWindow,
    /// Deliveries of messages that have been delivered at least once, for `Failed` events.
    pub deliveries: HashMap<Seq, u32>,
    /// Room reserved by publishes admitted under the length limit whose messages are not
    /// tracked yet (their append is in progress).
    pub pending: Room,
    /// The unsettled seqs as the journal sees them: stored, and no settling event (ack,
    /// dead letter, cancel, drop, redrive) journaled yet. Wider than what `state` tracks: a
    /// message on its way to the dead-letter queue has left the state but is still here.
    pub live: SeqRanges,
    /// One past the highest seq stored and tracked.
    pub stored_end: Seq,
    /// Event counters since the queue was created (rebuilt from the journal on open).
    pub counts: Counts,
    /// Journal bytes appended since the last checkpoint.
    pub journal_bytes: u64,
}

impl Queue {
    pub fn dir(root: &Path, name: &Name) -> std::path::PathBuf {
        root.join("queues").join(name.as_str())
    }

    /// Opens (creating if needed) the queue's logs. The state is empty: see [`recover`].
    pub fn open(
        root: &Path,
        name: Name,
        spec: QueueSpec,
        broker: &BrokerConfig,
        log_stats: &LogStatsByKind,
        seed: u64,
        token_base: u64,
    ) -> Result<Queue> {
        let dir = Self::dir(root, &name);
        let max_record_bytes = max_record_bytes(&broker.limits);
        let max_batch_bytes = (16 << 20).max(2 * max_record_bytes);
        let config = LogConfig {
            durability: spec.durability,
            max_record_bytes,
            max_batch_bytes,
            // Storage needs a segment to hold its largest batch.
            segment_bytes: broker.message_segment_bytes.max(max_batch_bytes as u64),
            ..LogConfig::default()
        };
        let journal_config = LogConfig {
            preallocate_bytes: 1 << 20,
            segment_bytes: broker.journal_segment_bytes.max(max_batch_bytes as u64),
            ..config.clone()
        };
        let clock = &broker.clock;
        let messages = Log::open_with_stats(
            dir.join("messages"),
            config,
            clock.clone(),
            log_stats.queue_messages.clone(),
        )?;
        let journal = Log::open_with_stats(
            dir.join("journal"),
            journal_config,
            clock.clone(),
            log_stats.queue_journals.clone(),
        )?;
        let mut state = QueueState::new(&spec, seed)?;
        state.set_token_base(token_base);
        Ok(Queue {
            state: Mutex::new(Inner {
                state,
                dedup: DedupWindow::new(spec.dedup_window),
                batches: BatchWindow::new(spec.dedup_window),
                deliveries: HashMap::new(),
                pending: Room::NONE,
                live: SeqRanges::new(),
                stored_end: 0,
                counts: Counts::default(),
                journal_bytes: 0,
            }),
            name,
            spec: RwLock::new(Arc::new(spec)),
            messages,
            journal,
            ready: Notify::new(),
            poisoned: Arc::new(OnceLock::new()),
            temporary: None,
            source: OnceLock::new(),
            attached: RwLock::new(Vec::new()),
            retention_cap: std::sync::atomic::AtomicU64::new(0),
            clock: broker.clock.clone(),
            #[cfg(test)]
            fail_next_journal_append: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The queue's settings now: a snapshot, which a later update does not change.
    pub fn spec(&self) -> Arc<QueueSpec> {
        Arc::clone(&self.spec.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Replaces the settings, under the state lock so the state machine's copy of the
    /// mutable ones changes with them (see `admin.rs`, `update_queue`).
    pub fn set_spec(&self, inner: &mut Inner, spec: QueueSpec) {
        inner.state.reconfigure(&spec);
        *self.spec.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(spec);
    }

    /// Whether `seq` is one this queue assigned: settling any other is a caller's mistake
    /// (a seq from another queue, or made up), which an ack must not answer with "already
    /// settled".
    pub fn check_published(&self, seq: Seq) -> Result<()> {
        let next_seq = self.messages.end_offset();
        if seq >= next_seq {
            return Err(BrokerError::MessageNotPublished {
                queue: self.name.clone(),
                seq,
                next_seq,
            });
        }
        Ok(())
    }

    /// `Err(QueuePoisoned)` once a write to the queue's logs has failed.
    pub fn check(&self) -> Result<()> {
        match self.poisoned.get() {
            Some(cause) => Err(BrokerError::QueuePoisoned {
                queue: self.name.clone(),
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    pub fn is_poisoned(&self) -> bool {
        self.poisoned.get().is_some()
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ties this queue to its topic as a subscription; before recovery on open.
    pub fn attach(&self, link: Arc<Link>) {
        let _ = self.source.set(link);
    }

    /// Adds an attached link (see `engine/links.rs`).
    pub fn add_link(&self, link: Arc<Link>) {
        self.attached
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(link);
    }

    /// Drops an attached link that has nothing pending.
    pub fn remove_link(&self, link: &Arc<Link>) {
        self.attached
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|l| !Arc::ptr_eq(l, link));
    }

    /// The subscription's own link, then the attached ones.
    pub fn links(&self) -> Vec<Arc<Link>> {
        let attached = self.attached.read().unwrap_or_else(|e| e.into_inner());
        self.source
            .get()
            .into_iter()
            .chain(attached.iter())
            .cloned()
            .collect()
    }

    /// Whether the queue holds references: it is a subscription or attached to a topic.
    pub fn has_links(&self) -> bool {
        self.source.get().is_some()
            || !self
                .attached
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .is_empty()
    }

    /// The link a reference came through.
    pub fn link_of(&self, at: TopicRef) -> Result<Arc<Link>> {
        let found = if at.link == 0 {
            self.source.get().cloned()
        } else {
            let attached = self.attached.read().unwrap_or_else(|e| e.into_inner());
            attached.iter().find(|l| l.id == at.link).cloned()
        };
        found.ok_or_else(|| BrokerError::MalformedRecord {
            offset: at.offset,
            problem: format!(
                "queue {} holds a reference through link {}, which it does not have",
                self.name, at.link
            ),
        })
    }

    /// The message in a record of this queue's log, and the topic position it stands for
    /// when it is a reference (whose message then has no payload or headers:
    /// [`read`](Self::read) fetches them from the topic). Any queue may hold references,
    /// settled ones of links it no longer has included; a producer cannot forge one, the
    /// header being reserved.
    pub fn decode(&self, record: Record) -> Result<(Message, Option<TopicRef>)> {
        decode_record(record)
    }

    /// The full message of a decoded record: a reference is read from its topic.
    fn resolve(&self, (message, at): (Message, Option<TopicRef>)) -> Result<Message> {
        match at {
            Some(at) => {
                let link = self.link_of(at)?;
                let mut full = link.deref(at)?;
                // The reference's times are the queue's (its default TTL).
                full.expires_at = message.expires_at;
                link.mark_origin(&mut full);
                Ok(full)
            }
            None => Ok(message),
        }
    }

    /// [`tracked`](Self::tracked) with the size counted for length limits and stats given.
    pub fn tracked_sized(&self, seq: Seq, message: &Message, size: u32) -> Tracked {
        Tracked {
            size,
            ..self.tracked(seq, message)
        }
    }

    pub fn tracked(&self, seq: Seq, message: &Message) -> Tracked {
        Tracked {
            seq,
            id: message.id,
            key: message.key.as_ref().map(|k| Box::from(&k[..])),
            level: self.spec().effective_priority(message.priority),
            deliver_at_ms: message.deliver_at.unwrap_or(message.published_at),
            expires_at_ms: message.expires_at,
            size: message_size(message),
            deliveries: 0,
        }
    }

    /// Gives back room reserved under the length limit.
    pub fn release(&self, reserved: Room) {
        self.lock().pending.release(reserved);
    }

    /// Stores `messages` (each with its dedup keys) in one append, then tracks them — inside
    /// the storage completion, which runs in offset order, so the state sees seqs in
    /// increasing order even when concurrent publishes finish in another order. `reserved`
    /// is room reserved for them under the length limit, given back there
    /// too, whether the append succeeded or not. A `batch` mark goes into the first record
    /// and, once durable, into the batch window. Returns the seq of the first message.
    pub async fn store(
        self: &Arc<Self>,
        messages: Vec<Incoming>,
        batch: Option<BatchMark>,
        clock: Arc<dyn Clock>,
        reserved: Room,
    ) -> Result<Seq> {
        if let Err(error) = self.check() {
            self.release(reserved);
            return Err(error);
        }
        let mut records: Vec<NewRecord> = messages.iter().map(|m| m.message.to_record()).collect();
        if let (Some(mark), Some(first)) = (&batch, records.first_mut()) {
            crate::record::put_batch_mark(first, mark);
        }
        let (tx, rx) = oneshot::channel();
        let queue = Arc::clone(self);
        self.messages.append_then(
            records,
            Box::new(move |result| {
                if let Ok(appended) = &result {
                    let now_ms = clock.now_ms();
                    let mut inner = queue.lock();
                    inner.pending.release(reserved);
                    for (i, Incoming { message, dedup_key }) in messages.iter().enumerate() {
                        let seq = appended.base_offset + i as u64;
                        if let Some(key) = dedup_key {
                            inner
                                .dedup
                                .check_and_insert(key.clone(), message.id, now_ms);
                        }
                        let tracked = queue.tracked(seq, message);
                        inner.state.track(tracked, now_ms);
                    }
                    if let Some(mark) = batch {
                        inner.batches.insert(mark, now_ms);
                    }
                    // Entries past their window answer nothing any more; dropping them
                    // here, where entries are added, keeps the windows' memory to what
                    // the window holds (amortised: each entry is removed once).
                    inner.dedup.expire(now_ms);
                    inner.batches.expire(now_ms);
                    let end = appended.base_offset + messages.len() as u64;
                    inner.live.insert(appended.base_offset, end);
                    inner.stored_end = end;
                    drop(inner);
                    queue.ready.notify_waiters();
                } else {
                    queue.release(reserved);
                }
                // A write refused for lack of space left the log as it was (storage cuts a
                // failed write back, or poisons the log itself when it cannot), and nothing
                // was tracked or entered the dedup window: memory and disk still agree, so
                // the queue stays open, for consumers to drain and for publishes once
                // space is back. Any other failure may have left them apart.
                if let Err(error) = &result
                    && !error.is_resource_exhausted()
                {
                    queue.poisoned.get_or_init(|| error.to_string());
                }
                // Let go of the queue before waking the caller, who may drop the broker and
                // reopen the directory at once: the logs must be closed by then.
                drop(queue);
                let _ = tx.send(result);
            }),
        );
        let appended = rx
            .await
            .map_err(|_| ferry_storage::StorageError::Closed)??;
        Ok(appended.base_offset)
    }

    /// Appends journal events — under the state lock, so the journal's order is the order
    /// the state changed in and a checkpoint sees every event before it — and returns a
    /// receiver for their durability. Settling events leave [`Inner::live`] here, and every
    /// event is counted in [`Inner::counts`]. A subscription's topic learns of a settled
    /// reference only once the event is durable: until then its topic's retention must
    /// keep the record, which a crash would bring back unsettled.
    pub fn journal(
        &self,
        inner: &mut Inner,
        events: &[JournalEvent],
        now_ms: i64,
    ) -> oneshot::Receiver<ferry_storage::Result<ferry_storage::Appended>> {
        let mut settled = Vec::new();
        for event in events {
            inner.counts.count(event);
            if let Some(seq) = event.settles() {
                inner.live.remove(seq);
                inner.deliveries.remove(&seq);
                settled.push(seq);
            }
        }
        // Each link forgets the settled seqs it referenced and ignores the others.
        let links = if settled.is_empty() {
            Vec::new()
        } else {
            self.links()
        };
        let (tx, rx) = oneshot::channel();
        let poisoned = Arc::clone(&self.poisoned);
        let done = move |result: ferry_storage::Result<ferry_storage::Appended>| {
            match &result {
                Ok(_) => {
                    for link in links {
                        link.settled_many(&settled);
                    }
                }
                Err(error) => {
                    poisoned.get_or_init(|| error.to_string());
                }
            }
            let _ = tx.send(result);
        };
        #[cfg(test)]
        if self
            .fail_next_journal_append
            .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            done(Err(ferry_storage::StorageError::ReadOnly {
                path: "journal (injected test fault)".into(),
            }));
            return rx;
        }
        let records = JournalEvent::encode_all(events, now_ms);
        inner.journal_bytes += records.iter().map(|r| r.value.len() as u64).sum::<u64>();
        self.journal.append_then(records, Box::new(done));
        rx
    }

    /// The stored message at `seq`.
    pub fn read(&self, seq: Seq) -> Result<Message> {
        let record = self
            .messages
            .read(seq, 1)?
            .into_iter()
            .find(|r| r.offset == seq)
            .ok_or_else(|| missing_record(seq))?;
        self.resolve(self.decode(record)?)
    }

    /// The stored messages at `seqs` (in any order), in that order. Neighbouring seqs are
    /// read together: a receive of a run of a backlog costs one read, not one per message.
    pub fn read_many(&self, seqs: &[Seq]) -> Result<Vec<Message>> {
        let mut wanted: Vec<Seq> = seqs.to_vec();
        wanted.sort_unstable();
        wanted.dedup();
        let mut found: HashMap<Seq, Message> = HashMap::with_capacity(wanted.len());
        // A subscription's references, resolved together below: per partition, one read.
        let mut refs: Vec<(Seq, Message, TopicRef)> = Vec::new();
        let mut i = 0;
        while i < wanted.len() {
            // About what the wanted seqs from here take, if small; a read returns at least
            // one whole batch, and the loop reads on for what it missed.
            let span = wanted[wanted.len() - 1] - wanted[i] + 1;
            let budget = usize::try_from(span.saturating_mul(SMALL_RECORD_BYTES))
                .unwrap_or(usize::MAX)
                .min(READ_MANY_BYTES);
            let records = self.messages.read(wanted[i], budget)?;
            let last = records.last().map_or(wanted[i], |r| r.offset);
            for record in records {
                if wanted.binary_search(&record.offset).is_ok() {
                    let offset = record.offset;
                    match self.decode(record)? {
                        (message, Some(at)) => {
                            refs.push((offset, message, at));
                        }
                        decoded => {
                            found.insert(offset, self.resolve(decoded)?);
                        }
                    }
                }
            }
            while i < wanted.len() && wanted[i] <= last {
                i += 1;
            }
            // A wanted seq the read passed (or could not reach) is missing.
            let held = |s: &Seq| found.contains_key(s) || refs.iter().any(|r| r.0 == *s);
            if let Some(&missing) = wanted[..i].iter().find(|s| !held(s)) {
                return Err(missing_record(missing));
            }
        }
        // Per link (per topic), one read per partition.
        let mut by_link: HashMap<u32, Vec<(Seq, Message, TopicRef)>> = HashMap::new();
        for r in refs {
            by_link.entry(r.2.link).or_default().push(r);
        }
        for (_, refs) in by_link {
            let link = self.link_of(refs[0].2)?;
            let positions: Vec<TopicRef> = refs.iter().map(|r| r.2).collect();
            let fulls = link.deref_many(&positions)?;
            for ((seq, message, _), mut full) in refs.into_iter().zip(fulls) {
                // The reference's times are the queue's (its default TTL).
                full.expires_at = message.expires_at;
                link.mark_origin(&mut full);
                found.insert(seq, full);
            }
        }
        seqs.iter()
            .map(|seq| found.get(seq).cloned().ok_or_else(|| missing_record(*seq)))
            .collect()
    }

    /// The original id if `key` is in the window.
    pub fn duplicate_of(inner: &Inner, key: Option<&DedupKey>, now_ms: i64) -> Option<MessageId> {
        key.and_then(|key| inner.dedup.get(key, now_ms))
    }
}

fn missing_record(seq: Seq) -> BrokerError {
    BrokerError::MalformedRecord {
        offset: seq,
        problem: "the message log has no record at this seq".into(),
    }
}

/// Payload, key and header bytes: what a length limit's `max_bytes` counts.
pub(crate) fn message_size(message: &Message) -> u32 {
    let size = message.payload.len()
        + message.key.as_ref().map_or(0, Bytes::len)
        + message
            .headers
            .iter()
            .map(|(n, v)| n.len() + v.len())
            .sum::<usize>();
    u32::try_from(size).unwrap_or(u32::MAX)
}

/// Awaits a journal append.
pub(crate) async fn durable(
    rx: oneshot::Receiver<ferry_storage::Result<ferry_storage::Appended>>,
) -> Result<()> {
    rx.await
        .map_err(|_| ferry_storage::StorageError::Closed)??;
    Ok(())
}

/// The dedup key of a message: its dedup id, or else its id when the producer chose it
/// ([`Message::id_chosen`], stored in the record, so a reopen rebuilds the same keys).
pub(crate) fn dedup_key(message: &Message) -> Option<DedupKey> {
    match &message.dedup_id {
        Some(dedup_id) => Some(DedupKey::from(dedup_id.as_str())),
        None if message.id_chosen => Some(DedupKey::ChosenId(message.id)),
        None => None,
    }
}

/// Feeds every record of `log` to `each`, in offset order, a chunk at a time.
pub(crate) fn scan(log: &Log, each: impl FnMut(Record) -> Result<()>) -> Result<()> {
    scan_from(log, log.start_offset(), each)
}

/// Feeds the records of `log` from offset `from` (or its start, if later) to `each`.
pub(crate) fn scan_from(
    log: &Log,
    from: u64,
    mut each: impl FnMut(Record) -> Result<()>,
) -> Result<()> {
    let mut next = from.max(log.start_offset());
    let end = log.end_offset();
    while next < end {
        let records = log.read(next, SCAN_BYTES)?;
        let Some(last) = records.last() else {
            break;
        };
        next = last.offset + 1;
        for record in records {
            each(record)?;
        }
    }
    Ok(())
}
