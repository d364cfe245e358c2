//! Purging a queue: deleting every message it holds at once, whatever its state.
//!
//! Ready, delayed (scheduled or waiting for a retry) and in-flight messages all go. A
//! lease ends with its message: a later ack, nack, reject or extend of it is
//! [`BrokerError::StaleLease`](crate::BrokerError::StaleLease), as for any delivery that
//! is no longer the consumer's (for an ack, as long as the queue remembers the message among
//! its last 16,384 settled after a delivery; an older one is answered "already settled"). Nothing is dead-lettered — a purge is the operator's
//! decision that the messages are not wanted, not a failure of theirs — and a key-shared
//! group held by a purged delivery is free for the next message of the key at once.
//!
//! Each message leaves with a `Purged` journal event, counted in `QueueStats::purged`;
//! the purge returns once they are durable, so a reopen does not bring them back. The
//! events are journaled under the queue's lock with the state change, so no receive sees a
//! purged message. A publish whose append is still in progress when the purge runs is
//! stored after it and is not purged: it was not in the queue yet.

use std::sync::Arc;

use super::{Queue, durable};
use crate::engine::Broker;
use crate::error::Result;
use crate::queue::journal::JournalEvent;

/// Most events in one journal append: a purge of a long backlog is journaled in appends of
/// bounded size (each far below the storage's batch limit).
const EVENTS_PER_APPEND: usize = 4096;

impl Broker {
    /// Deletes every message of queue `name` — ready, delayed and in flight — durably, and
    /// returns how many; see the head comment of `engine/queue/purge.rs`.
    pub async fn purge_queue(&self, name: &str) -> Result<u64> {
        let queue = self.queue(name)?;
        self.purge(&queue).await
    }

    pub(in crate::engine) async fn purge(&self, queue: &Arc<Queue>) -> Result<u64> {
        let now_ms = self.now_ms();
        queue.touch(now_ms);
        let (appends, effects, purged) = {
            let mut inner = queue.lock();
            let events: Vec<JournalEvent> = inner
                .state
                .seqs()
                .into_iter()
                .filter(|&seq| inner.state.purge(seq, now_ms))
                .map(|seq| JournalEvent::Purged { seq })
                .collect();
            let appends: Vec<_> = events
                .chunks(EVENTS_PER_APPEND)
                .map(|chunk| queue.journal(&mut inner, chunk, now_ms))
                .collect();
            (
                appends,
                queue.take_effects(&mut inner, now_ms),
                events.len(),
            )
        };
        for append in appends {
            durable(append).await?;
        }
        self.apply_effects(queue, effects).await?;
        Ok(purged as u64)
    }
}
