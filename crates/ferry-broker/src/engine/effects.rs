//! Moving a message into its dead-letter queue.
//!
//! **Retention.** A dead letter expires from the dead-letter queue after the origin's
//! `dead_letter_retention` (14 days by default): it then leaves that queue as an expired
//! message does — discarded when the dead-letter queue has dead-lettering disabled (the
//! default for `<name>.dlq`), or moved on to the dead-letter queue's own dead-letter queue.
//!
//! **Crash window.** A dead letter is stored in the dead-letter queue first, durably, and
//! only then is `DeadLettered` journaled on its origin. A crash between the two leaves the
//! message in both places; on reopen [`already_dead_lettered`] scans every dead-letter
//! queue's letters (origin queue, seq, and the original's id and publish time, so a letter
//! from an earlier queue of the same name never matches) and the origin does not track those
//! seqs again: it journals their `DeadLettered` then. The other order could
//! lose the message (journaled as dead but never stored), so it is not used.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::Broker;
use super::queue::{Queue, durable, scan};
use crate::error::Result;
use crate::message::{Message, millis};
use crate::message_id::MessageId;
use crate::name::Name;
use crate::queue::journal::JournalEvent;
use crate::queue::state::{DeadLetterDecision, DeadLetterReason, Seq};
use crate::record::DeadLetterInfo;

/// A dead letter found in a dead-letter queue: which message of its origin it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FoundLetter {
    /// The original message's id and publish time: with the origin seq they tell the
    /// message from another one at the same seq of a queue deleted and created again.
    pub id: MessageId,
    pub published_at: i64,
    pub reason: DeadLetterReason,
}

/// Per origin queue, the dead letters its dead-letter queue already holds, by origin seq.
pub(super) fn already_dead_lettered(
    queues: &BTreeMap<Name, Arc<Queue>>,
) -> Result<HashMap<Name, HashMap<Seq, FoundLetter>>> {
    let targets: HashSet<Name> = queues
        .iter()
        .filter_map(|(name, q)| q.spec.dead_letter_target(name).ok().flatten())
        .collect();
    let mut found: HashMap<Name, HashMap<Seq, FoundLetter>> = HashMap::new();
    for target in targets {
        let Some(dlq) = queues.get(&target) else {
            continue;
        };
        scan(&dlq.messages, |record| {
            let letter = Message::from_record(record)?;
            if let Some(info) = &letter.dead_letter
                && let Ok(origin) = Name::new(&info.origin_queue)
                && let Some(reason) = DeadLetterReason::parse(&info.reason)
            {
                let seen = FoundLetter {
                    id: letter.id,
                    published_at: info.origin_published_at,
                    reason,
                };
                found
                    .entry(origin)
                    .or_default()
                    .insert(info.origin_seq, seen);
            }
            Ok(())
        })?;
    }
    Ok(found)
}

impl Broker {
    /// Stores the dead letter in `origin`'s dead-letter queue (if it has one; with
    /// dead-lettering disabled the message is dropped), then journals it on `origin`.
    pub(super) async fn dead_letter(
        &self,
        origin: &Arc<Queue>,
        decision: DeadLetterDecision,
    ) -> Result<()> {
        let now_ms = self.now_ms();
        if let Some(dlq) = self.dead_letter_queue(origin) {
            let original = origin.read(decision.seq)?;
            // The original untouched — id, key, headers, payload, priority — plus why. Its
            // schedule, TTL and dedup id belonged to the origin and would misfire here (an
            // expired message would expire again at once).
            let letter = Message {
                id: original.id,
                key: original.key,
                headers: original.headers,
                payload: original.payload,
                published_at: now_ms,
                priority: original.priority,
                deliver_at: None,
                // The origin's retention for its dead letters, as a TTL in the dead-letter
                // queue: past it the letter expires from there like any expired message.
                expires_at: Some(now_ms.saturating_add(millis(origin.spec.dead_letter_retention))),
                dedup_id: None,
                id_chosen: false,
                dead_letter: Some(DeadLetterInfo {
                    reason: decision.reason.as_str().to_owned(),
                    deliveries: decision.deliveries,
                    origin_queue: origin.name.to_string(),
                    origin_seq: decision.seq,
                    origin_published_at: original.published_at,
                    last_error: decision.last_error,
                    first_failure_ms: decision.first_failure_ms,
                    last_failure_ms: decision.last_failure_ms,
                    consumer: decision.consumer,
                }),
            };
            // Not subject to the dead-letter queue's length limit: a dead letter is never
            // refused or dropped for lack of room.
            let reserved = (0, 0);
            dlq.store(
                vec![(letter, Vec::new())],
                self.inner.config.clock.clone(),
                reserved,
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
}
