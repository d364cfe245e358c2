//! Giving back a lease whose delivery never left the caller's side: the consume stream of a
//! consumer that went away before its deliveries were sent. Such a lease is not an attempt
//! — nobody saw the message, so nobody can have failed on it — and counting it would
//! dead-letter messages for `max_deliveries` after fewer deliveries than any consumer saw.
//!
//! So the lease is undone rather than failed: the message is ready again at once, in its
//! place (its publish position in its level's ready line, its key's head on a key-shared or
//! exclusive queue), with the delivery count it had before that lease, and the history of
//! its failed attempts untouched. The next delivery is numbered as the unsent one was.

use super::*;

/// What undoing an unsent lease left, for the journal: the delivery count the message is
/// back to and the consumer its dead letter would name (the one of the last lease that
/// ended otherwise, if any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReturnedUnsent {
    pub deliveries: u32,
    pub last_consumer: Option<String>,
}

impl QueueState {
    /// Undoes the lease `token` of `seq`, whose delivery never reached a consumer; see the
    /// [module docs](self). A token that is not the message's current lease is
    /// [`BrokerError::StaleLease`] and changes nothing, as for every settle.
    pub fn return_unsent(
        &mut self,
        seq: Seq,
        token: LeaseToken,
        now_ms: i64,
    ) -> Result<ReturnedUnsent> {
        self.check_lease(seq, token)?;
        self.end_lease(seq);
        let entry = self.entries.get_mut(seq).expect("leased seqs are tracked");
        // `receive` added one for this lease.
        entry.deliveries = entry.deliveries.saturating_sub(1);
        let deliveries = entry.deliveries;
        let expired = entry.expired(now_ms);
        let expires_at = entry.expires_at();
        let last_consumer = self
            .history
            .get(&seq)
            .and_then(|h| h.last_consumer.as_deref().map(str::to_owned));
        if expired {
            // As when an attempt ends: a TTL that passed during the lease ends the
            // message now, whatever holds its key.
            let next = self.dead_letter(seq, DeadLetterReason::Expired);
            self.refresh(next, now_ms, Announce::Ready);
        } else {
            if let Some(at) = expires_at {
                // Its expiry timer may have fired (and been ignored) while it was leased.
                self.timers.schedule(Timer::Expiry(seq), at);
            }
            // Usually `seq` itself; with a run of its key out, the key's oldest message
            // once the last of the run is back.
            let head = if self.key_shared {
                self.keys.requeued(seq)
            } else {
                None
            };
            self.refresh(Some(seq), now_ms, Announce::Ready);
            if head != Some(seq) {
                self.refresh(head, now_ms, Announce::Ready);
            }
        }
        Ok(ReturnedUnsent {
            deliveries,
            last_consumer,
        })
    }
}
