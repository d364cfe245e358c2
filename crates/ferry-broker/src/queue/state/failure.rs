//! Failed attempts and dead letters: what a nack or a lease expiry does to a message (see
//! the module docs of [`super`] for the rule), and the record of its failures that a dead
//! letter reports.

use super::*;

/// What a dead letter reports of a message's failed attempts.
#[derive(Debug, Default)]
pub(super) struct History {
    pub(super) last_consumer: Option<Arc<str>>,
    pub(super) first_failure_ms: Option<i64>,
    pub(super) last_failure_ms: Option<i64>,
    pub(super) last_error: Option<String>,
}

impl History {
    pub(super) fn failed(&mut self, now_ms: i64, error: Option<String>) {
        self.first_failure_ms.get_or_insert(now_ms);
        self.last_failure_ms = Some(now_ms);
        self.last_error = error;
    }

    pub(super) fn record(&self) -> FailureRecord {
        FailureRecord {
            first_failure_ms: self.first_failure_ms,
            last_failure_ms: self.last_failure_ms,
            last_error: self.last_error.clone(),
            last_consumer: self.last_consumer.as_deref().map(str::to_owned),
        }
    }

    pub(super) fn from_record(record: FailureRecord) -> History {
        History {
            last_consumer: record.last_consumer.map(Arc::from),
            first_failure_ms: record.first_failure_ms,
            last_failure_ms: record.last_failure_ms,
            last_error: record.last_error,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.last_consumer.is_none() && self.first_failure_ms.is_none()
    }
}

impl QueueState {
    /// Ends the in-flight delivery of `seq` as a failed attempt; see the module docs.
    pub(super) fn fail(
        &mut self,
        seq: Seq,
        delay: Option<Duration>,
        error: Option<String>,
        now_ms: i64,
    ) -> Nacked {
        let lease = self.end_lease(seq);
        let history = self.history.entry(seq).or_default();
        history.failed(now_ms, error);
        if let Some(lease) = lease {
            history.last_consumer = Some(lease.consumer);
        }
        let error = history.last_error.clone();
        let entry = self
            .entries
            .get_mut(seq)
            .expect("in-flight seqs are tracked");
        let reason = if self.retry.is_exhausted(entry.deliveries) {
            Some(DeadLetterReason::MaxDeliveries)
        } else if entry.expired(now_ms) {
            Some(DeadLetterReason::Expired)
        } else {
            None
        };
        if let Some(reason) = reason {
            let next = self.dead_letter(seq, reason);
            self.refresh(next, now_ms, Announce::Ready);
            return Nacked::DeadLettered(reason);
        }
        let wait = match delay {
            Some(delay) => delay,
            None => self.retry.backoff.delay(entry.deliveries, &mut self.rng),
        };
        let retry_at = now_ms.saturating_add(millis(wait));
        entry.eligible_since_ms = now_ms;
        self.effects.push(Effect::Failed {
            seq,
            deliveries: entry.deliveries,
            retry_at_ms: retry_at,
            error,
        });
        if let Some(at) = entry.expires_at() {
            // Its expiry timer may have fired (and been ignored) while it was in flight.
            self.timers.schedule(Timer::Expiry(seq), at);
        }
        // Usually the retry itself; on an exclusive queue an older message whose delay ended
        // during this delivery goes first.
        let head = if self.key_shared {
            self.keys.requeued(seq)
        } else {
            None
        };
        if retry_at > now_ms {
            self.schedule(seq, retry_at);
        }
        self.refresh(Some(seq), now_ms, Announce::Ready);
        if head != Some(seq) {
            self.refresh(head, now_ms, Announce::Ready);
        }
        Nacked::RetryAt(retry_at)
    }

    /// Dead-letters a tracked message; returns its key's next message if that may now be
    /// ready, for [`refresh`](Self::refresh).
    pub(super) fn dead_letter(&mut self, seq: Seq, reason: DeadLetterReason) -> Option<Seq> {
        let (entry, history, next) = self.remove(seq, Some(Settler::NoAck))?;
        self.effects
            .push(Effect::DeadLetter(decision(seq, entry, history, reason)));
        next
    }
}

pub(super) fn decision(
    seq: Seq,
    entry: Entry,
    history: History,
    reason: DeadLetterReason,
) -> DeadLetterDecision {
    DeadLetterDecision {
        seq,
        id: entry.id,
        reason,
        deliveries: entry.deliveries,
        last_error: history.last_error,
        first_failure_ms: history.first_failure_ms,
        last_failure_ms: history.last_failure_ms,
        consumer: history.last_consumer.map(|c| c.to_string()),
    }
}

/// `text` cut to at most [`MAX_ERROR_LEN`] bytes, at a character boundary.
pub(super) fn truncate_error(text: &str) -> String {
    let mut end = text.len().min(MAX_ERROR_LEN);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}
