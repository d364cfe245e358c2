//! Messages that leave a queue without being delivered: cancelled while scheduled, evicted
//! to make room under a length limit, taken by a redrive, purged, or skipped when a
//! subscription's topic record is gone.

use super::*;

/// How a message evicted to make room leaves: the overflow policy's choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// `DeadLetterHead`: to the dead-letter queue, with reason `overflow`.
    DeadLetter,
    /// `DropHead`: gone.
    Drop,
}

impl QueueState {
    /// Drops a scheduled message — delayed and never delivered — from the queue. Returns
    /// `false`, changing nothing, for any other message (ready, in flight, waiting for a
    /// retry, or unknown). No effect is emitted: the engine records the cancellation.
    pub fn cancel(&mut self, seq: Seq, now_ms: i64) -> bool {
        let cancellable = self
            .entries
            .get(seq)
            .is_some_and(|e| e.scheduled && e.deliveries == 0);
        if cancellable {
            let (_, _, next) = self.remove(seq, None).expect("checked above");
            self.refresh(next, now_ms, Announce::Ready);
        }
        cancellable
    }

    /// [`cancel`](Self::cancel) by message id: returns the seq of the cancelled message, or
    /// `None` (changing nothing) when no scheduled, never-delivered message has this id.
    /// Of several sharing the id, the latest published goes.
    pub fn cancel_id(&mut self, id: MessageId, now_ms: i64) -> Option<Seq> {
        let &(_, seq) = self
            .scheduled_ids
            .range((id, 0)..=(id, Seq::MAX))
            .next_back()?;
        self.cancel(seq, now_ms).then_some(seq)
    }

    /// The messages not in flight, oldest (lowest seq) first, with their sizes: what a full
    /// queue may evict. Empty unless the queue's spec evicts the head on overflow
    /// (`DropHead` or `DeadLetterHead` with a limit set).
    pub fn evictable_head(&self) -> impl Iterator<Item = (Seq, u32)> + '_ {
        self.entries
            .iter()
            .filter(|_| self.evicts_head)
            .filter(|(_, entry)| !entry.leased)
            .map(|(seq, entry)| (seq, entry.size))
    }

    /// Evicts a message that is not in flight to make room: dead-lettered, it leaves through
    /// an [`Effect::DeadLetter`] with reason `overflow`; dropped, it leaves with no effect
    /// (the engine records the drop). Returns `false`, changing nothing, for a message in
    /// flight or not tracked.
    pub fn evict(&mut self, seq: Seq, eviction: Eviction, now_ms: i64) -> bool {
        if !self.is_tracked_and_idle(seq) {
            return false;
        }
        let next = if eviction == Eviction::DeadLetter {
            self.dead_letter(seq, DeadLetterReason::Overflow)
        } else {
            self.remove(seq, Some(Settler::NoAck))
                .expect("checked above")
                .2
        };
        self.refresh(next, now_ms, Announce::Ready);
        true
    }

    /// Removes a message that is not in flight, with no effect: the engine has moved it
    /// elsewhere (redrive) and records its settlement. Returns `false`, changing nothing, for
    /// a message in flight or not tracked.
    pub fn take(&mut self, seq: Seq, now_ms: i64) -> bool {
        if !self.is_tracked_and_idle(seq) {
            return false;
        }
        let (_, _, next) = self
            .remove(seq, Some(Settler::NoAck))
            .expect("checked above");
        self.refresh(next, now_ms, Announce::Ready);
        true
    }

    /// Removes a tracked message whatever its state — ready, scheduled or in flight (its
    /// lease ends: an ack for it then finds nothing) — with no effect: what it stood for is
    /// gone (a subscription's topic record deleted by retention). Returns `false` for a seq
    /// not tracked.
    pub fn skip(&mut self, seq: Seq, now_ms: i64) -> bool {
        // Not remembered: no delivery's ack took, but none was beaten to it either.
        let Some((_, _, next)) = self.remove(seq, None) else {
            return false;
        };
        self.refresh(next, now_ms, Announce::Ready);
        true
    }

    /// Removes a tracked message whatever its state — ready, scheduled or in flight — with
    /// no effect: the queue is being purged, and the engine records it. A lease ends with
    /// the message, and a later ack of it is [`BrokerError::StaleLease`] (as long as
    /// [`SettledBy`] remembers it), never "already settled": no delivery's ack took.
    /// Returns `false` for a seq not tracked.
    pub fn purge(&mut self, seq: Seq, now_ms: i64) -> bool {
        let Some((_, _, next)) = self.remove(seq, Some(Settler::NoAck)) else {
            return false;
        };
        self.refresh(next, now_ms, Announce::Ready);
        true
    }
}
