//! Giving back a lease whose delivery never left the caller's side, without spending the
//! attempt: [`Broker::return_unsent`]. The decision is the pure state's
//! (`queue/state/unsent.rs`); here it is journaled as `ReturnedUnsent` and carried out.
//!
//! **Crash window.** The state changes under the queue's lock and `ReturnedUnsent` is
//! appended there too, so the journal's order is the state's: a later lease of the same
//! message is journaled after it, and replay (`engine/recovery.rs`) sets the count back and
//! then raises it again. The call returns once the event is durable. A crash before that
//! leaves the journal with the lease running: on reopen it ends at its deadline and counts
//! as an attempt — what every lease running at a crash does, so the message is neither lost
//! nor delivered twice at once; the attempt is spent only in that window. A redelivery made
//! meanwhile (it was ready at once) was handed out only after its own `Leased` was durable,
//! which, the journal being one ordered log, makes the `ReturnedUnsent` before it durable
//! too.

use super::durable;
use crate::engine::Broker;
use crate::error::Result;
use crate::queue::journal::JournalEvent;
use crate::queue::state::{LeaseToken, Seq};

impl Broker {
    /// Gives back the lease `token` of `seq`, whose delivery provably never left the
    /// caller's side (a consume stream's client went away before it was sent): the message
    /// is ready again at once, in its place — at the head of its key or of an exclusive
    /// queue, as a retry is — and its delivery count goes back to what it was before that
    /// lease, so the next delivery has the number the unsent one had. No attempt is spent
    /// and no error recorded. Returns once that is durable. A token that is not the
    /// message's current lease is [`BrokerError::StaleLease`](crate::BrokerError::StaleLease)
    /// and changes nothing.
    ///
    /// Only for deliveries nobody can have seen: one a consumer may have worked on and
    /// crashed on must fail its attempt ([`nack`](Self::nack)), or a poison message would
    /// never reach the dead-letter queue.
    pub async fn return_unsent(&self, queue: &str, seq: Seq, token: LeaseToken) -> Result<()> {
        let queue = self.queue(queue)?;
        queue.check_published(seq)?;
        let now_ms = self.now_ms();
        let (rx, effects) = {
            let mut inner = queue.lock();
            let returned = inner.state.return_unsent(seq, token, now_ms)?;
            if returned.deliveries == 0 {
                inner.deliveries.remove(&seq);
            } else {
                inner.deliveries.insert(seq, returned.deliveries);
            }
            let event = JournalEvent::ReturnedUnsent {
                seq,
                deliveries: returned.deliveries,
                last_consumer: returned.last_consumer,
            };
            let rx = queue.journal(&mut inner, &[event], now_ms);
            (rx, queue.take_effects(&mut inner, now_ms))
        };
        durable(rx).await?;
        // Wakes receivers for the message ready again, or moves it to the dead-letter queue
        // if its TTL passed while it was leased.
        self.apply_effects(&queue, effects).await
    }
}
