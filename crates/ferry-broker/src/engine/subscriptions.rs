//! Subscriptions in the engine: a queue whose messages stay in a topic (see
//! [`crate::subscription`]), fed by the topic's publishes — and the [`Link`] that feeds
//! it, which is also what attaches an existing queue to a topic (see [`crate::link`] and
//! `engine/links.rs`). A link's role says which; everything below holds for both, per
//! link: a queue may have several (its references carry the link's id), each with its
//! own cursors, filter, pins and saved state.
//!
//! **Feeding.** Each subscription keeps, per partition, a cursor: the next topic offset to
//! consider. When a partition's append is durable, its completion (which runs in offset
//! order) offers the new records to every subscription of the topic: one whose cursor is at
//! the batch's first offset stages references for the records that pass its filter and
//! moves the cursor past the batch; one that is behind (it started at the earliest record,
//! or is recovering) leaves them to its *catch-up*, which reads the partition from the
//! cursor on and does the same. Catch-up runs at creation, on open and at every
//! housekeeping pass. What a link staged goes to its own log in one append when the
//! publish call's last partition append has offered (see `subscriptions/publish_call.rs`),
//! or at once for catch-up. Staging and flushing both happen under the link's lock, and a
//! flush takes everything staged, in staging order: per partition, references are
//! appended in offset order, so per-key order holds.
//!
//! **Durability.** A publish to a topic returns when the topic's records are durable, not
//! its subscriptions' references: a crash in between loses references, never messages —
//! on open each cursor restarts after the last reference that is on disk (the highest in
//! the log, or the cursor housekeeping saved in the metadata store before it deleted old
//! references), and catch-up appends what is missing.
//!
//! **Retention.** A topic's retention never deletes a record a subscription has not
//! settled or not yet considered: per partition it keeps everything from the lowest
//! unsettled referenced offset, or the durable cursor if lower — unless the topic's
//! retention overrides subscriptions, and then what they lose is recorded (see `skips`).
//!
//! **Seeking.** A subscription can be set back or forward in bulk — to a time, or to a
//! snapshot of its acknowledgement state (`engine/snapshots.rs`) — by purging its references
//! and feeding it again from the target: see `subscriptions/seek.rs`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, Weak};

use ferry_storage::NewRecord;

use super::Broker;
use super::queue::Queue;
use super::topic::{Countdown, Topic};
use crate::error::{BrokerError, Result};
use crate::link::{LinkOrigin, LinkSpec, MessageFilter};
use crate::message::{Message, millis};
use crate::queue::seq_ranges::SeqRanges;
use crate::queue::state::Seq;
use crate::subscription::{self, SubscriptionSpec, SubscriptionStart, TopicRef};
use crate::topic::Position;

mod publish_call;
mod seek;
mod skips;

pub(crate) use publish_call::{CallShare, PublishCall};
pub use seek::SeekTarget;
pub(super) use seek::{
    ACK_BEFORE_PREFIX, SEEK_PREFIX, finish_interrupted_seeks, subscription_link,
};
pub use skips::SkippedRange;
pub(super) use skips::{SKIPS_PREFIX, decode as decode_skips};

const SUBSCRIPTION_PREFIX: &str = "subscription/";
/// Cursors of a subscription (`<name>`) or an attached link (`<queue>/<link>`).
pub(super) const CURSOR_PREFIX: &str = "subscription-cursor/";
/// Records read per catch-up step.
pub(super) const CATCH_UP_RECORDS: usize = 4096;
/// About the most bytes of references one flush puts in one append: staged spans beyond
/// it go in the next (storage refuses a batch over 16 MiB; a span is at most one catch-up
/// step or one partition's part of a publish).
const FLUSH_APPEND_BYTES: usize = 4 << 20;

/// Where a subscription is in one partition.
#[derive(Debug, Clone, Copy, Default)]
struct Cursor {
    /// The next offset to reference (or skip); moves when references are issued.
    issued: u64,
    /// The same, counting only references that are durable: what a restart resumes from.
    durable: u64,
    /// Spans of references issued (staged, or appended) whose append is not complete.
    in_flight: u32,
    /// Where `durable` goes once those complete: batches the filter took nothing from,
    /// issued behind them, must not move it first.
    deferred: u64,
}

#[derive(Default)]
struct LinkState {
    cursors: Vec<Cursor>,
    /// Per partition, the topic offsets referenced and not settled.
    pending: Vec<SeqRanges>,
    /// Reference seq → topic position, for the seqs in `pending`.
    positions: HashMap<Seq, (u32, u64)>,
    /// What the topic's retention took before the subscription settled it.
    skipped: Vec<SkippedRange>,
    /// References issued and not yet handed to the queue's log, in issue order.
    staged: Vec<Span>,
    /// Set through a seek: no offer or catch-up issues anything, in any partition — also
    /// one added to the topic meanwhile (see `subscriptions/seek.rs`).
    paused: bool,
}

/// The references one offer (or catch-up step) issued for one partition, up to `end`.
struct Span {
    partition: u32,
    end: u64,
    refs: Vec<(Message, TopicRef)>,
    /// The publish waiting for them, held until their append completes.
    countdown: Option<Arc<Countdown>>,
}

impl LinkState {
    fn is_idle(&self) -> bool {
        self.positions.is_empty() && self.cursors.iter().all(|c| c.in_flight == 0)
    }

    fn grow(&mut self, partitions: usize) {
        if self.cursors.len() < partitions {
            self.cursors.resize(partitions, Cursor::default());
            self.pending.resize(partitions, SeqRanges::new());
        }
    }
}

/// What a link is for: a subscription's own queue, or an existing queue attached to the
/// topic (see [`crate::link`] and `engine/links.rs`).
pub(crate) enum LinkRole {
    Subscription(SubscriptionSpec),
    Attached {
        name: crate::name::Name,
        spec: LinkSpec,
        /// Detached: fed nothing more; kept until the references it issued are settled,
        /// pinning their topic records meanwhile.
        detached: AtomicBool,
    },
}

/// What ties a queue to a topic: the cursors that feed it the topic's records as
/// references, and what those references pin.
pub(crate) struct Link {
    /// The id its references carry in the queue: 0 for a subscription's own link.
    pub id: u32,
    /// The metadata key its cursors and skips are saved under: the subscription's name,
    /// or `<queue>/<link>` for an attached link (names hold no `/`).
    pub key: String,
    pub role: LinkRole,
    pub topic: Arc<Topic>,
    filter: Arc<dyn MessageFilter>,
    /// The queue fed (weak: the queue owns this link).
    queue: Mutex<Weak<Queue>>,
    state: Mutex<LinkState>,
    /// Messages published before this (ms since the epoch) count as acknowledged: set by a
    /// seek to a time, which may be in the future (see `subscriptions/seek.rs`).
    ack_before_ms: AtomicI64,
    /// Held through a seek and a snapshot's capture: one at a time per subscription.
    seeking: tokio::sync::Mutex<()>,
    /// Woken when one of its reference appends completes, durable or failed: what a seek
    /// waits on (see `subscriptions/seek.rs`).
    appends_done: tokio::sync::Notify,
}

impl Link {
    pub fn new(
        id: u32,
        key: String,
        role: LinkRole,
        topic: Arc<Topic>,
        filter: Arc<dyn MessageFilter>,
        queue: &Arc<Queue>,
    ) -> Link {
        Link {
            id,
            key,
            role,
            topic,
            filter,
            queue: Mutex::new(Arc::downgrade(queue)),
            state: Mutex::new(LinkState::default()),
            ack_before_ms: AtomicI64::new(i64::MIN),
            seeking: tokio::sync::Mutex::new(()),
            appends_done: tokio::sync::Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LinkState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The subscription's name (its queue's) or the attached link's, or its topic's while
    /// it is being deleted.
    pub fn name(&self) -> crate::name::Name {
        if let LinkRole::Attached { name, .. } = &self.role {
            return name.clone();
        }
        self.queue()
            .map_or_else(|| self.topic.name.clone(), |q| q.name.clone())
    }

    /// Whether the link was detached and only waits for its references to be settled.
    pub fn is_detached(&self) -> bool {
        matches!(&self.role, LinkRole::Attached { detached, .. }
            if detached.load(AtomicOrdering::SeqCst))
    }

    /// Feeds it nothing more; returns whether it is idle already. Under the state lock,
    /// which `offer` and `catch_up` check the flag under: no reference is issued after.
    pub fn detach(&self) -> bool {
        let state = self.lock();
        if let LinkRole::Attached { detached, .. } = &self.role {
            detached.store(true, AtomicOrdering::SeqCst);
        }
        state.is_idle()
    }

    /// Nothing referenced and unsettled, no reference append in flight: a detached link
    /// in this state can be forgotten.
    pub fn is_idle(&self) -> bool {
        self.lock().is_idle()
    }

    /// What a message delivered through this link carries: set for an attached link.
    pub fn origin(&self) -> Option<LinkOrigin> {
        match &self.role {
            LinkRole::Subscription(_) => None,
            LinkRole::Attached { name, spec, .. } => Some(LinkOrigin {
                link: name.clone(),
                topic: spec.topic.clone(),
                label: spec.label.clone(),
            }),
        }
    }

    /// Marks a message read through an attached link with where it came from (see
    /// `record.rs`); a subscription's messages are marked by their queue's name already.
    pub fn mark_origin(&self, message: &mut Message) {
        if let Some(origin) = self.origin() {
            use crate::record::{LINK, LINK_LABEL, LINK_TOPIC};
            message.headers.insert(LINK.into(), origin.link.to_string());
            message
                .headers
                .insert(LINK_TOPIC.into(), origin.topic.to_string());
            message.headers.insert(LINK_LABEL.into(), origin.label);
        }
    }

    /// The seqs of the references issued and not settled.
    pub fn pending_seqs(&self) -> Vec<Seq> {
        let mut seqs: Vec<Seq> = self.lock().positions.keys().copied().collect();
        seqs.sort_unstable();
        seqs
    }

    /// References issued and not settled.
    pub fn pending(&self) -> u64 {
        self.lock().positions.len() as u64
    }

    pub(super) fn queue(&self) -> Option<Arc<Queue>> {
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .upgrade()
    }

    /// The message a reference stands for, read from the topic.
    pub fn deref(&self, at: TopicRef) -> Result<Message> {
        let partition = self.topic.partition(at.partition)?;
        let record = partition
            .read(&self.topic.name, Position::Offset(at.offset), 1)?
            .into_iter()
            .next()
            .filter(|r| r.offset == at.offset)
            .ok_or_else(|| BrokerError::MalformedRecord {
                offset: at.offset,
                problem: format!(
                    "topic {} partition {} no longer holds the referenced record",
                    self.topic.name, at.partition
                ),
            })?;
        Ok(record.message)
    }

    /// The messages several references stand for, in their order: per partition, the
    /// span they cover is read at once rather than one read per message.
    pub fn deref_many(&self, at: &[TopicRef]) -> Result<Vec<Message>> {
        let mut by_partition: HashMap<u32, Vec<u64>> = HashMap::new();
        for r in at {
            by_partition.entry(r.partition).or_default().push(r.offset);
        }
        let mut read: HashMap<(u32, u64), Message> = HashMap::with_capacity(at.len());
        for (p, mut offsets) in by_partition {
            offsets.sort_unstable();
            let partition = self.topic.partition(p)?;
            let mut i = 0;
            while i < offsets.len() {
                let (from, to) = (offsets[i], offsets[offsets.len() - 1]);
                let span = usize::try_from(to - from + 1).unwrap_or(usize::MAX);
                let records = partition.read(&self.topic.name, Position::Offset(from), span)?;
                let last = records.last().map_or(from, |r| r.offset);
                for record in records {
                    if offsets.binary_search(&record.offset).is_ok() {
                        read.insert((p, record.offset), record.message);
                    }
                }
                while i < offsets.len() && offsets[i] <= last {
                    i += 1;
                }
                if records_missing(&offsets[..i], |o| read.contains_key(&(p, o))) {
                    return Err(self.gone(p, from));
                }
            }
        }
        at.iter()
            .map(|r| {
                read.get(&(r.partition, r.offset))
                    .cloned()
                    .ok_or_else(|| self.gone(r.partition, r.offset))
            })
            .collect()
    }

    fn gone(&self, partition: u32, offset: u64) -> BrokerError {
        BrokerError::MalformedRecord {
            offset,
            problem: format!(
                "topic {} partition {partition} no longer holds the referenced record",
                self.topic.name
            ),
        }
    }

    /// A reference at `seq` is tracked (on store or on recovery).
    pub fn referenced(&self, seq: Seq, at: TopicRef) {
        let mut state = self.lock();
        state.grow(at.partition as usize + 1);
        state.pending[at.partition as usize].insert_one(at.offset);
        state.positions.insert(seq, (at.partition, at.offset));
    }

    /// A reference found on disk on recovery, settled or not: the cursor resumes after it.
    pub fn seen_on_disk(&self, at: TopicRef) {
        let mut state = self.lock();
        state.grow(at.partition as usize + 1);
        let cursor = &mut state.cursors[at.partition as usize];
        cursor.issued = cursor.issued.max(at.offset + 1);
        cursor.durable = cursor.issued;
    }

    /// The references at `seqs` are settled (acked, dead-lettered …) and that is durable.
    pub fn settled_many(&self, seqs: &[Seq]) {
        let mut state = self.lock();
        for seq in seqs {
            if let Some((p, offset)) = state.positions.remove(seq) {
                state.pending[p as usize].remove(offset);
            }
        }
    }

    /// The lowest offset of `partition` the subscription still needs.
    pub fn hold(&self, partition: u32) -> Option<u64> {
        let state = self.lock();
        let p = partition as usize;
        let cursor = state.cursors.get(p)?.durable;
        let pending = state.pending[p].first();
        if self.is_detached() {
            // Fed nothing more: only what it referenced is pinned.
            return pending;
        }
        Some(pending.map_or(cursor, |o| o.min(cursor)))
    }

    /// Whether references of `partition` are being appended (issued, not yet durable).
    pub fn appending(&self, partition: u32) -> bool {
        self.lock()
            .cursors
            .get(partition as usize)
            .is_some_and(|c| c.in_flight > 0)
    }

    /// Messages of `partition` the subscription has not considered yet.
    pub fn behind(&self, partition: u32, end: u64) -> u64 {
        let state = self.lock();
        end.saturating_sub(
            state
                .cursors
                .get(partition as usize)
                .map_or(0, |c| c.durable),
        )
    }

    /// The references to append for `messages` (each with its offset): those the filter
    /// takes and a seek did not acknowledge, with the subscription's default TTL applied.
    /// Each keeps what its record carries only: no payload, no user headers (which would be
    /// cloned per link for nothing).
    fn references<'m>(
        &self,
        queue: &Queue,
        partition: u32,
        messages: impl IntoIterator<Item = (u64, &'m Message)>,
    ) -> Vec<(Message, TopicRef)> {
        // The queue's settings now: an attached queue's may change while it is attached.
        let default_ttl = queue.spec().default_ttl;
        let delay = match &self.role {
            LinkRole::Attached { spec, .. } => millis(spec.delay),
            LinkRole::Subscription(_) => 0,
        };
        let ack_before_ms = self.ack_before_ms.load(AtomicOrdering::SeqCst);
        messages
            .into_iter()
            .filter(|(_, m)| m.published_at >= ack_before_ms && self.filter.matches(m))
            .map(|(offset, full)| {
                let mut m = Message {
                    id: full.id,
                    key: full.key.clone(),
                    headers: Default::default(),
                    payload: bytes::Bytes::new(),
                    published_at: full.published_at,
                    priority: full.priority,
                    deliver_at: full.deliver_at,
                    expires_at: full.expires_at,
                    dedup_id: full.dedup_id.clone(),
                    id_chosen: full.id_chosen,
                    dead_letter: None,
                };
                if m.expires_at.is_none()
                    && let Some(ttl) = default_ttl
                {
                    m.expires_at = Some(m.published_at.saturating_add(millis(ttl)));
                }
                if delay > 0 {
                    let at = m.published_at.saturating_add(delay);
                    m.deliver_at = Some(m.deliver_at.map_or(at, |d| d.max(at)));
                }
                let at = TopicRef {
                    link: self.id,
                    partition,
                    offset,
                    size: super::queue::message_size(full),
                };
                (m, at)
            })
            .collect()
    }

    /// Offers a durable batch of `partition` (from `base`): taken if the cursor is there,
    /// its references staged until `call`'s appends have all offered. Called from the
    /// partition's completion, in offset order.
    pub fn offer(
        self: &Arc<Self>,
        partition: u32,
        base: u64,
        messages: &[Message],
        countdown: &Arc<Countdown>,
        call: &CallShare,
    ) {
        let Some(queue) = self.queue() else {
            return;
        };
        let mut state = self.lock();
        // Under the lock, which `detach` sets the flag under: nothing is issued after.
        if self.is_detached() || state.paused {
            return;
        }
        state.grow(partition as usize + 1);
        if state.cursors[partition as usize].issued != base {
            // Behind (catch-up will come here) or already past it.
            return;
        }
        let end = base + messages.len() as u64;
        state.cursors[partition as usize].issued = end;
        let refs = self.references(&queue, partition, offsets_from(base, messages));
        if Self::issue(&mut state, partition, end, refs, Some(countdown)) {
            call.staged_on(self);
        }
    }

    /// Stages references for `partition` up to `end` (with the link's lock held — `state`
    /// — so per partition they go in order); returns whether there were any. None: the
    /// durable cursor moves to `end` now, or once the spans in flight before it complete.
    fn issue(
        state: &mut LinkState,
        partition: u32,
        end: u64,
        refs: Vec<(Message, TopicRef)>,
        countdown: Option<&Arc<Countdown>>,
    ) -> bool {
        let cursor = &mut state.cursors[partition as usize];
        if refs.is_empty() {
            if cursor.in_flight == 0 {
                cursor.durable = cursor.durable.max(end);
            } else {
                cursor.deferred = cursor.deferred.max(end);
            }
            return false;
        }
        cursor.in_flight += 1;
        if let Some(countdown) = countdown {
            countdown.hold();
        }
        state.staged.push(Span {
            partition,
            end,
            refs,
            countdown: countdown.cloned(),
        });
        true
    }

    /// Hands everything staged to the queue's log: one append (more only past
    /// [`FLUSH_APPEND_BYTES`]).
    pub(super) fn flush(self: &Arc<Self>) {
        let mut state = self.lock();
        self.flush_locked(&mut state);
    }

    /// [`flush`](Self::flush) with the link's lock held — `state` —, so appends go to the
    /// log in staging order. Each moves the durable cursors of its spans once it is on
    /// disk; its completion runs on the log's thread, later (an append never completes
    /// inline, except when refused, which takes no lock).
    fn flush_locked(self: &Arc<Self>, state: &mut LinkState) {
        let spans = std::mem::take(&mut state.staged);
        if spans.is_empty() {
            return;
        }
        let Some(queue) = self.queue() else {
            // The queue is gone, and its references with it: only the publishes wait.
            for countdown in spans.into_iter().filter_map(|s| s.countdown) {
                countdown.release();
            }
            return;
        };
        let mut spans = spans.into_iter().peekable();
        while spans.peek().is_some() {
            let mut refs = Vec::new();
            let mut ends = Vec::new();
            let mut countdowns = Vec::new();
            let mut bytes = 0;
            while let Some(span) = spans.next_if(|_| refs.is_empty() || bytes < FLUSH_APPEND_BYTES)
            {
                bytes += span.refs.iter().map(|(m, _)| ref_bytes(m)).sum::<usize>();
                refs.extend(span.refs);
                ends.push((span.partition, span.end));
                countdowns.extend(span.countdown);
            }
            let link = Arc::clone(self);
            queue.store_refs(
                self,
                refs,
                Box::new(move |ok| {
                    // A refused append completes inline, with the link's lock held by the
                    // caller: take no lock then (the subscription is poisoned anyway).
                    if ok {
                        let mut state = link.lock();
                        for (partition, end) in ends {
                            let cursor = &mut state.cursors[partition as usize];
                            cursor.in_flight -= 1;
                            cursor.durable = cursor.durable.max(end);
                            if cursor.in_flight == 0 {
                                cursor.durable = cursor.durable.max(cursor.deferred);
                            }
                        }
                    }
                    for countdown in countdowns {
                        countdown.release();
                    }
                    link.appends_done.notify_waiters();
                }),
            );
        }
    }

    /// Reads each partition from the cursor to the end, appending references; returns
    /// whether every partition is caught up.
    pub fn catch_up(self: &Arc<Self>) -> Result<bool> {
        let Some(queue) = self.queue() else {
            return Ok(true);
        };
        let shape = self.topic.shape();
        let mut done = true;
        for partition in &shape.partitions {
            let p = partition.index;
            let mut state = self.lock();
            if self.is_detached() {
                return Ok(true);
            }
            if state.paused {
                // The seek that paused it resumes it, and catches up then.
                return Ok(true);
            }
            state.grow(p as usize + 1);
            let from = state.cursors[p as usize]
                .issued
                .max(partition.start_offset());
            let end = partition.log.end_offset();
            if from >= end {
                // Retention deleted records the subscription had considered before a
                // crash took its cursor back (a saved cursor can lag what retention
                // used): nothing is lost, the cursor catches up with the partition.
                let cursor = &mut state.cursors[p as usize];
                if cursor.in_flight == 0 && cursor.issued < from {
                    cursor.issued = from;
                    cursor.durable = from;
                }
                continue;
            }
            let records =
                partition.read(&self.topic.name, Position::Offset(from), CATCH_UP_RECORDS)?;
            let Some(last) = records.last().map(|r| r.offset) else {
                continue;
            };
            let messages: Vec<Message> = records.into_iter().map(|r| r.message).collect();
            let refs = self.references(&queue, p, offsets_from(from, &messages));
            state.cursors[p as usize].issued = last + 1;
            // Flushed at once, with whatever publishes staged before it (their spans of
            // this partition are below `from`, so they must reach the log first).
            Self::issue(&mut state, p, last + 1, refs, None);
            self.flush_locked(&mut state);
            done &= last + 1 >= end;
        }
        Ok(done)
    }

    /// The durable cursors, for the metadata store.
    pub(super) fn durable_cursors(&self) -> Vec<u64> {
        self.lock().cursors.iter().map(|c| c.durable).collect()
    }

    pub(super) fn set_cursors(&self, cursors: &[u64]) {
        let mut state = self.lock();
        state.grow(cursors.len());
        for (c, &at) in state.cursors.iter_mut().zip(cursors) {
            c.issued = c.issued.max(at);
            c.durable = c.durable.max(at);
        }
    }
}

impl Queue {
    /// Appends references and tracks them once durable, in the storage completion (offset
    /// order); `done(ok)` runs after. A failed append poisons the subscription.
    pub fn store_refs(
        self: &Arc<Self>,
        link: &Arc<Link>,
        refs: Vec<(Message, TopicRef)>,
        done: Box<dyn FnOnce(bool) + Send>,
    ) {
        debug_assert!(!refs.is_empty(), "an empty append is refused by storage");
        let records: Vec<NewRecord> = refs
            .iter()
            .map(|(m, at)| subscription::ref_record(m, *at))
            .collect();
        let queue = Arc::clone(self);
        let link = Arc::clone(link);
        let clock = queue.clock.clone();
        self.messages.append_then(
            records,
            Box::new(move |result| {
                match &result {
                    Ok(appended) => {
                        let now_ms = clock.now_ms();
                        let mut inner = queue.lock();
                        for (i, (message, at)) in refs.iter().enumerate() {
                            let seq = appended.base_offset + i as u64;
                            let tracked = queue.tracked_sized(seq, message, at.size);
                            link.referenced(seq, *at);
                            inner.state.track(tracked, now_ms);
                        }
                        let end = appended.base_offset + refs.len() as u64;
                        inner.live.insert(appended.base_offset, end);
                        // The durable cursor moves before `stored_end` does, both under the
                        // queue's lock: housekeeping reads `stored_end`, then the cursors,
                        // and must find every stored reference below it covered by them
                        // (see `retention_cap`).
                        done(true);
                        inner.stored_end = end;
                        drop(inner);
                        queue.ready.notify_waiters();
                    }
                    Err(error) => {
                        queue.poisoned.get_or_init(|| error.to_string());
                        done(false);
                    }
                }
            }),
        );
    }
}

impl Broker {
    /// Creates subscription `name` (a name in the queue namespace) on `spec.topic`: a queue
    /// whose messages are the topic's, filtered; see `subscription.rs`. With
    /// [`SubscriptionStart::Earliest`] it takes in every message the topic keeps before it
    /// returns. Its dead-letter queue is made as a queue's is.
    pub async fn create_subscription(&self, name: &str, spec: SubscriptionSpec) -> Result<()> {
        spec.validate()?;
        let topic = self.topic(spec.topic.as_str())?;
        let start: Vec<u64> = topic
            .shape()
            .partitions
            .iter()
            .map(|p| match spec.start {
                SubscriptionStart::Now => p.log.end_offset(),
                SubscriptionStart::Earliest => p.start_offset(),
            })
            .collect();
        // One commit for the queue and what makes it a subscription: a crash leaves the
        // whole subscription or nothing, never a plain queue of its name.
        let extra = vec![
            (
                format!("{SUBSCRIPTION_PREFIX}{name}"),
                subscription::encode(&spec).into_bytes(),
            ),
            (format!("{CURSOR_PREFIX}{name}"), encode_cursors(&start)),
        ];
        self.create_queue_with(name, spec.delivery.clone(), extra)
            .await?;
        let queue = self.queue(name)?;
        let link = Arc::new(Link::new(
            0,
            name.to_owned(),
            LinkRole::Subscription(spec.clone()),
            Arc::clone(&topic),
            Arc::new(spec.filter.clone()),
            &queue,
        ));
        link.set_cursors(&start);
        queue.attach(Arc::clone(&link));
        topic.subscribe(Arc::clone(&link));
        while !link.catch_up()? {}
        Ok(())
    }
}

/// Ties every stored subscription to its queue and topic, with the cursors saved by
/// housekeeping; before recovery, which moves the cursors past the references on disk.
pub(super) fn link_subscriptions(
    meta: &ferry_storage::MetaStore,
    queues: &std::collections::BTreeMap<crate::name::Name, Arc<Queue>>,
    topics: &std::collections::BTreeMap<crate::name::Name, Arc<Topic>>,
) -> Result<Vec<Arc<Link>>> {
    let mut links = Vec::new();
    for (key, value) in meta.scan_prefix(SUBSCRIPTION_PREFIX) {
        let raw = &key[SUBSCRIPTION_PREFIX.len()..];
        let bad = |problem: String| BrokerError::MalformedSpec {
            queue: raw.to_owned(),
            problem,
        };
        let name = crate::name::Name::new(raw).map_err(|e| bad(e.to_string()))?;
        let queue = queues
            .get(&name)
            .ok_or_else(|| bad("a subscription without its queue".into()))?;
        let spec = subscription::decode(&value, (*queue.spec()).clone()).map_err(bad)?;
        let topic = topics
            .get(&spec.topic)
            .ok_or_else(|| bad(format!("its topic {} does not exist", spec.topic)))?;
        let filter = Arc::new(spec.filter.clone());
        let link = Arc::new(Link::new(
            0,
            name.to_string(),
            LinkRole::Subscription(spec),
            Arc::clone(topic),
            filter,
            queue,
        ));
        if let Some(cursors) = meta.get(&format!("{CURSOR_PREFIX}{name}")) {
            link.set_cursors(&decode_cursors(&cursors));
        }
        if let Some(ranges) = meta.get(&format!("{}{name}", skips::SKIPS_PREFIX)) {
            link.set_skipped(skips::decode(&ranges));
        }
        if let Some(at) = meta.get(&format!("{ACK_BEFORE_PREFIX}{name}")) {
            link.set_ack_before(seek::decode_ack_before(&at).map_err(bad)?);
        }
        queue.attach(Arc::clone(&link));
        topic.subscribe(Arc::clone(&link));
        links.push(link);
    }
    Ok(links)
}

impl Broker {
    /// Housekeeping for subscriptions and attached links: catch up, forget the detached
    /// links with nothing left pending, then save the durable cursors (before the
    /// references below them may be deleted by retention).
    pub(super) fn maintain_subscriptions(&self) -> Result<()> {
        let queues: Vec<Arc<Queue>> = self
            .queue_list()
            .into_iter()
            .filter(|q| q.has_links())
            .collect();
        for queue in &queues {
            for link in queue.links() {
                link.catch_up()?;
            }
        }
        self.forget_detached_links(&queues)?;
        let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        let mut batch = ferry_storage::MetaBatch::new();
        let mut covered = Vec::new();
        for queue in queues {
            // `stored_end` first: every reference below it has moved its link's cursors
            // already (see `store_refs`), so the cursors read next cover them all.
            let stored_end = queue.lock().stored_end;
            for link in queue.links() {
                batch.put(
                    format!("{CURSOR_PREFIX}{}", link.key),
                    encode_cursors(&link.durable_cursors()),
                );
            }
            covered.push((queue, stored_end));
        }
        if !batch.is_empty() {
            meta.commit(batch)?;
        }
        for (queue, stored_end) in covered {
            queue
                .retention_cap
                .fetch_max(stored_end, AtomicOrdering::SeqCst);
        }
        Ok(())
    }

    /// A subscription's spec, its delivery settings as they are now (they change with
    /// `update_queue`): what [`Broker::describe_subscription`] says without the cost of the
    /// queue's statistics, for callers on a hot path that only need to know what it is.
    pub fn subscription_spec(&self, name: &str) -> Result<SubscriptionSpec> {
        let queue = self.queue(name)?;
        match queue.source.get().map(|link| &link.role) {
            Some(LinkRole::Subscription(spec)) => Ok(SubscriptionSpec {
                delivery: (*queue.spec()).clone(),
                ..spec.clone()
            }),
            _ => Err(BrokerError::NotASubscription {
                queue: queue.name.clone(),
            }),
        }
    }

    /// What a subscription is and how far behind its topic it is.
    pub fn describe_subscription(&self, name: &str) -> Result<SubscriptionInfo> {
        let spec = self.subscription_spec(name)?;
        let queue = self.queue(name)?;
        let link = queue
            .source
            .get()
            .ok_or_else(|| BrokerError::NotASubscription {
                queue: queue.name.clone(),
            })?;
        let not_yet_considered = link
            .topic
            .shape()
            .partitions
            .iter()
            .map(|p| link.behind(p.index, p.log.end_offset()))
            .sum();
        Ok(SubscriptionInfo {
            queue: self.describe_queue(name)?,
            spec,
            not_yet_considered,
            skipped: link.skipped(),
        })
    }

    /// The metadata a subscription adds to its queue's, for `delete_queue`.
    pub(super) fn subscription_keys(name: &crate::name::Name) -> [String; 5] {
        [
            format!("{SUBSCRIPTION_PREFIX}{name}"),
            format!("{CURSOR_PREFIX}{name}"),
            format!("{}{name}", skips::SKIPS_PREFIX),
            format!("{SEEK_PREFIX}{name}"),
            format!("{ACK_BEFORE_PREFIX}{name}"),
        ]
    }
}

/// A subscription as [`Broker::describe_subscription`] reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscriptionInfo {
    /// Its queue: delivery stats and counters.
    pub queue: super::QueueInfo,
    pub spec: SubscriptionSpec,
    /// Topic records the subscription has not taken in yet (catch-up in progress), which
    /// its queue stats do not count.
    pub not_yet_considered: u64,
    /// Topic offsets the subscription lost to a retention that overrides subscriptions,
    /// oldest first; empty otherwise.
    pub skipped: Vec<SkippedRange>,
}

/// About what a reference to `message` takes in an append, for [`FLUSH_APPEND_BYTES`].
fn ref_bytes(message: &Message) -> usize {
    64 + message.key.as_ref().map_or(0, |k| k.len())
        + message.dedup_id.as_ref().map_or(0, String::len)
}

/// `messages` with their offsets, the first at `base`.
fn offsets_from(base: u64, messages: &[Message]) -> impl Iterator<Item = (u64, &Message)> {
    (base..).zip(messages)
}

fn records_missing(offsets: &[u64], held: impl Fn(u64) -> bool) -> bool {
    offsets.iter().any(|&o| !held(o))
}

pub(super) fn encode_cursors(cursors: &[u64]) -> Vec<u8> {
    cursors.iter().flat_map(|c| c.to_le_bytes()).collect()
}

pub(super) fn decode_cursors(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("chunks of 8")))
        .collect()
}
