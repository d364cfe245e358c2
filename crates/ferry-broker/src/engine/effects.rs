//! Carrying out a queue state's decisions: the one place the engine acts on the effects
//! ([`Effect`]) the pure state hands back — settled, failed, ready again, dead-lettered —
//! after a receive, ack, nack, reject, unpark, tick, or a publish over a length limit.
//!
//! Every caller does the same two steps, and this file reads in their order:
//!
//! 1. [`Queue::take_effects`], under the state lock: drain the effects and journal the
//!    failed attempts among them (`Failed`, for nacks and lease expiries alike), so the
//!    journal's order is the order the state changed in — a lease expiry's `Failed` lands
//!    ahead of any redelivery's `Leased`.
//! 2. [`Broker::apply_effects`], with the lock let go: wait until those events are durable,
//!    wake receivers if a message became ready, and move each dead letter
//!    ([`Broker::dead_letter`]): stored in the dead-letter queue, or published to the
//!    dead-letter topic, then `DeadLettered` journaled on its origin.
//!
//! A nack that uses up a message's deliveries is the whole path: the state decides a
//! `DeadLetter` effect, step 1 journals nothing for it (the message is not retried), and
//! step 2 stores the letter and then settles it on its origin before the nack returns.
//!
//! **Retention.** A dead letter expires from the dead-letter queue after the origin's
//! `dead_letter_retention` (14 days by default): it then leaves that queue as an expired
//! message does — discarded when the dead-letter queue has dead-lettering disabled (the
//! default for `<name>.dlq`), or moved on to the dead-letter queue's own dead-letter queue.
//!
//! **Crash window.** A dead letter is stored in the dead-letter queue first, durably, and
//! only then is `DeadLettered` journaled on its origin. A crash between the two leaves the
//! message in both places; on reopen `already_dead_lettered` (`engine/recovery.rs`) scans
//! every dead-letter queue's letters (origin queue, seq, and the original's id and publish
//! time, so a letter from an earlier queue of the same name never matches) and the origin
//! does not track those seqs again: it journals their `DeadLettered` then. The other order
//! could lose the message (journaled as dead but never stored), so it is not used.
//!
//! **Into a topic** ([`crate::DeadLetter::Topic`]). The letter is published to the topic
//! first — durable under the topic's durability, its subscriptions' references made as for
//! any publish — and only then is `DeadLettered` journaled on the origin, the same order.
//! The letter carries the same [`DeadLetterInfo`] a dead-letter queue's letters do; no
//! TTL is set on it, since how long it is kept is the topic's retention and its
//! subscriptions' settings. Recovery does not scan topics for letters (a topic may hold
//! any number of records, and its subscriptions may already have taken the letter): a
//! crash between the two steps leaves the letter in the topic *and* the message unsettled
//! in the origin, which tracks it again after the reopen and moves it again: a second
//! letter. Dead letters into a topic are therefore at least once — possibly twice, never
//! lost — as Google Pub/Sub's are ("the same message might be dead lettered multiple
//! times"). A subscriber tells a repeat by the letter's message id, the original's.
//!
//! Nor does the topic refuse a letter for what it holds (its schema, a missing key on a
//! compacted topic) or for lack of room, as a dead-letter queue does not (see
//! [`Broker::publish_dead_letter`]): a refusal would poison the origin, and the reopen
//! that moves the letter again would fail the same way.
//!
//! A dead-letter topic cannot be deleted while a queue dead-letters into it, so the
//! target is never gone when a letter moves; if it were (a damaged metadata store), the
//! move fails and poisons the origin rather than dropping the letter, which a reopen moves
//! again — unlike a dead-letter queue that is gone, where the letter is dropped as with
//! dead-lettering disabled.

use std::sync::Arc;

use tokio::sync::oneshot;

use super::Broker;
use super::queue::{Incoming, Inner, Queue, Room, durable};
use crate::error::Result;
use crate::message::{Message, millis};
use crate::queue::journal::JournalEvent;
use crate::queue::state::{DeadLetterDecision, Effect};
use crate::record::DeadLetterInfo;

/// Effects taken from a queue's state, with the durability of the journal events made for
/// them; [`Broker::apply_effects`] awaits it first.
#[derive(Default)]
pub(crate) struct Effects {
    pub effects: Vec<Effect>,
    pub journal: Option<oneshot::Receiver<ferry_storage::Result<ferry_storage::Appended>>>,
}

impl Queue {
    /// Drains the state's effects (call with the state lock held) and journals the failed
    /// attempts among them — nacks and lease expiries alike — in the order the state changed.
    pub fn take_effects(&self, inner: &mut Inner, now_ms: i64) -> Effects {
        let effects = inner.state.take_effects();
        let events: Vec<JournalEvent> = effects
            .iter()
            .filter_map(|effect| match effect {
                Effect::Failed {
                    seq,
                    deliveries,
                    retry_at_ms,
                    error,
                } => Some(JournalEvent::Failed {
                    seq: *seq,
                    deliveries: *deliveries,
                    retry_at_ms: *retry_at_ms,
                    error: error.clone(),
                }),
                _ => None,
            })
            .collect();
        let journal = (!events.is_empty()).then(|| self.journal(inner, &events, now_ms));
        Effects { effects, journal }
    }
}

impl Broker {
    /// Carries out effects taken with [`Queue::take_effects`], after the state lock is let
    /// go: once their `Failed` events are durable, wakes receivers if a message became
    /// ready and moves each dead letter. A dead letter that cannot be moved poisons its
    /// origin; the others are still moved, and the first error is returned.
    pub(super) async fn apply_effects(&self, queue: &Arc<Queue>, effects: Effects) -> Result<()> {
        if let Some(rx) = effects.journal {
            durable(rx).await?;
        }
        let mut woke = false;
        let mut first_error = None;
        for effect in effects.effects {
            match effect {
                Effect::Settled { .. } | Effect::Failed { .. } => {}
                Effect::Ready { .. } => woke = true,
                Effect::DeadLetter(decision) => {
                    if let Err(error) = self.dead_letter(queue, decision).await {
                        // The message has left the state but is not settled on disk: the
                        // queue disagrees with its journal until a reopen, which finds it
                        // unsettled and moves it again.
                        queue
                            .poisoned
                            .get_or_init(|| format!("moving a dead letter failed: {error}"));
                        first_error.get_or_insert(error);
                    }
                }
            }
        }
        if woke {
            queue.ready.notify_waiters();
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Stores the dead letter where `origin`'s dead letters go — its dead-letter queue or
    /// its dead-letter topic; with dead-lettering disabled the message is dropped — then
    /// journals it on `origin`: in this order, for the crash window in the module docs.
    async fn dead_letter(&self, origin: &Arc<Queue>, decision: DeadLetterDecision) -> Result<()> {
        let now_ms = self.now_ms();
        let spec = origin.spec();
        if let Some(topic) = spec.dead_letter.topic() {
            let letter = self.letter(origin, &decision, now_ms, None)?;
            // A topic that is gone (deleting one that is a dead-letter target is refused,
            // so only a damaged metadata store gets here) fails the move rather than
            // dropping the letter: the origin is poisoned and a reopen moves it again.
            self.publish_dead_letter(topic, letter).await?;
        } else if let Some(dlq) = self.dead_letter_queue(origin) {
            // The origin's retention for its dead letters, as a TTL in the dead-letter
            // queue: past it the letter expires from there like any expired message.
            let expires_at = now_ms.saturating_add(millis(spec.dead_letter_retention));
            let letter = self.letter(origin, &decision, now_ms, Some(expires_at))?;
            // Not subject to the dead-letter queue's length limit: a dead letter is never
            // refused or dropped for lack of room.
            dlq.store(
                vec![Incoming::without_dedup(letter)],
                None,
                self.inner.config.clock.clone(),
                Room::NONE,
            )
            .await?;
        }
        let event = JournalEvent::DeadLettered {
            seq: decision.seq,
            reason: decision.reason,
        };
        let rx = origin.journal(&mut origin.lock(), &[event], now_ms);
        durable(rx).await
    }

    /// The dead letter for `decision`: the original untouched — id, key, headers, payload,
    /// priority — plus why, in its [`DeadLetterInfo`]. Its schedule, TTL and dedup id
    /// belonged to the origin and would misfire where it goes (an expired message would
    /// expire again at once); `expires_at` is the target's.
    fn letter(
        &self,
        origin: &Queue,
        decision: &DeadLetterDecision,
        now_ms: i64,
        expires_at: Option<i64>,
    ) -> Result<Message> {
        let original = origin.read(decision.seq)?;
        Ok(Message {
            id: original.id,
            key: original.key,
            headers: original.headers,
            payload: original.payload,
            published_at: now_ms,
            priority: original.priority,
            deliver_at: None,
            expires_at,
            dedup_id: None,
            id_chosen: false,
            dead_letter: Some(DeadLetterInfo {
                reason: decision.reason.as_str().to_owned(),
                deliveries: decision.deliveries,
                origin_queue: origin.name.to_string(),
                origin_seq: decision.seq,
                origin_published_at: original.published_at,
                last_error: decision.last_error.clone(),
                first_failure_ms: decision.first_failure_ms,
                last_failure_ms: decision.last_failure_ms,
                consumer: decision.consumer.clone(),
            }),
        })
    }

    /// The queue `origin`'s dead letters go to: `None` when dead-lettering is disabled (or
    /// its target is gone), and the letter is then dropped.
    fn dead_letter_queue(&self, origin: &Queue) -> Option<Arc<Queue>> {
        let target = origin
            .spec()
            .dead_letter_target(&origin.name)
            .ok()
            .flatten()?;
        let queues = self.inner.queues.read().unwrap_or_else(|e| e.into_inner());
        queues.get(&target).cloned()
    }
}
