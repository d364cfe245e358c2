//! Length limits: admitting a publish into a queue under its [`LengthLimit`].
//!
//! **What counts.** The queue's unsettled messages — every message it tracks: ready,
//! delayed, waiting for its key, or in flight — plus messages whose append is in progress
//! (their room is reserved under the queue's lock, so concurrent publishes cannot
//! overshoot together). `max_bytes` counts payload, key and header bytes, as
//! [`QueueStateStats::bytes`](crate::QueueStateStats::bytes) does. After a restart the
//! counts are rebuilt with the state, so a full queue stays full.
//!
//! **Policies.** A publish (or a batch, taken whole) that would go over the limit is:
//! - `RejectPublish`: refused with [`BrokerError::QueueFull`]; nothing is stored;
//! - `DropHead`: admitted after the oldest messages not in flight are dropped (journaled
//!   `Dropped`, counted in [`QueueStats::dropped`](crate::QueueStats::dropped));
//! - `DeadLetterHead`: admitted after the oldest messages not in flight are moved to the
//!   dead-letter queue with reason `overflow`.
//!
//! Under every policy a batch that could not fit even in an empty queue, or that needs
//! more room than evicting every message not in flight would free, is refused whole with
//! `QueueFull`, and nothing is evicted. Before any of this, a publish that would eat into
//! the disk's reserve is refused with `DiskFull` (see `engine/disk_reserve.rs`). Evictions are durable before the new messages are
//! stored. Dead letters the broker moves into a queue are not subject to its limit (a
//! dead letter is never refused or dropped for lack of room); they do count toward it.

use std::sync::Arc;

use super::{Incoming, Inner, Queue, Room, durable, message_size};
use crate::engine::effects::Effects;
use crate::engine::{Broker, disk_reserve};
use crate::error::{BrokerError, Result};
use crate::queue::batch_window::BatchMark;
use crate::queue::journal::JournalEvent;
use crate::queue::state::{Eviction, Seq};
use crate::spec::{LengthLimit, OverflowPolicy};

/// Room granted to a publish: the reservation to hand to [`Queue::store`], the journal
/// append of the drops made for it, and the effects (overflow dead letters) to apply
/// before storing.
struct Admitted {
    reserved: Room,
    journal: Option<tokio::sync::oneshot::Receiver<ferry_storage::Result<ferry_storage::Appended>>>,
    effects: Effects,
}

fn fits(limit: &LengthLimit, messages: u64, bytes: u64) -> bool {
    limit.max_messages.is_none_or(|max| messages <= max)
        && limit.max_bytes.is_none_or(|max| bytes <= max)
}

/// With the queue's state locked: checks the limit for `count` more messages of `bytes`,
/// evicts per the overflow policy if needed, and reserves the room.
fn admit(
    queue: &Queue,
    inner: &mut Inner,
    count: u64,
    bytes: u64,
    now_ms: i64,
) -> Result<Admitted> {
    let limit = queue.spec().length_limit;
    let full = || BrokerError::QueueFull {
        queue: queue.name.clone(),
        limit,
    };
    let (tracked, tracked_bytes) = inner.state.size();
    let mut messages = tracked as u64 + inner.pending.messages + count;
    let mut total = tracked_bytes + inner.pending.bytes + bytes;
    let mut admitted = Admitted {
        reserved: Room {
            messages: count,
            bytes,
        },
        journal: None,
        effects: Effects::default(),
    };
    if !fits(&limit, messages, total) {
        if limit.overflow == OverflowPolicy::RejectPublish || !fits(&limit, count, bytes) {
            return Err(full());
        }
        let mut victims: Vec<Seq> = Vec::new();
        for (seq, size) in inner.state.evictable_head() {
            if fits(&limit, messages, total) {
                break;
            }
            victims.push(seq);
            messages -= 1;
            total -= u64::from(size);
        }
        if !fits(&limit, messages, total) {
            return Err(full());
        }
        let eviction = if limit.overflow == OverflowPolicy::DeadLetterHead {
            Eviction::DeadLetter
        } else {
            Eviction::Drop
        };
        let mut events = Vec::new();
        for seq in victims {
            if inner.state.evict(seq, eviction, now_ms) && eviction == Eviction::Drop {
                events.push(JournalEvent::Dropped { seq });
            }
        }
        if !events.is_empty() {
            admitted.journal = Some(queue.journal(inner, &events, now_ms));
        }
        admitted.effects = queue.take_effects(inner, now_ms);
    }
    inner.pending.reserve(admitted.reserved);
    Ok(admitted)
}

impl Broker {
    /// Stores messages into `queue` under its length limit (see the module docs); returns
    /// the seq of the first. Each message's dedup keys enter the window once it is stored,
    /// and so does `batch`, the publish call's mark, if it has one.
    pub(in crate::engine) async fn store_limited(
        &self,
        queue: &Arc<Queue>,
        messages: Vec<Incoming>,
        batch: Option<BatchMark>,
    ) -> Result<Seq> {
        let now_ms = self.now_ms();
        let count = messages.len() as u64;
        let bytes = messages
            .iter()
            .map(|m| u64::from(message_size(&m.message)))
            .sum();
        let on_disk = bytes + count * disk_reserve::RECORD_OVERHEAD_BYTES;
        self.inner.disk.admit(on_disk)?;
        let admitted = {
            let mut inner = queue.lock();
            admit(queue, &mut inner, count, bytes, now_ms)?
        };
        let reserved = admitted.reserved;
        let evicted = async {
            if let Some(rx) = admitted.journal {
                durable(rx).await?;
            }
            self.apply_effects(queue, admitted.effects).await
        };
        if let Err(error) = evicted.await {
            queue.release(reserved);
            return Err(error);
        }
        // The earliest delay or TTL among the messages, for the timer task.
        let earliest = messages
            .iter()
            .flat_map(|m| [m.message.deliver_at, m.message.expires_at])
            .flatten()
            .min();
        let seq = queue
            .store(messages, batch, self.inner.config.clock.clone(), reserved)
            .await
            .map_err(|e| self.inner.disk.refusal(e))?;
        if let Some(at_ms) = earliest {
            self.inner.timers_changed.timer_at(at_ms);
        }
        Ok(seq)
    }
}
