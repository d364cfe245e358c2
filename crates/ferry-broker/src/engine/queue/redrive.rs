//! Redrive: moving dead letters out of a dead-letter queue, back to where they came from or
//! into another queue.
//!
//! **Which queues.** A queue is a dead-letter queue when some queue dead-letters into it or
//! its name ends in `.dlq`; redrive from any other queue is
//! [`BrokerError::NotADeadLetterQueue`].
//!
//! **Each message**, in publish order, among the dead-letter queue's unsettled messages
//! that match the filter: the original (id, payload, key, user headers, priority) is
//! published into the target with attempts reset — a fresh message there, with no delay,
//! TTL or dedup id, under the target's length limit — and with the headers
//! `ferry-redrive-count` (one more than the dead letter carried) and `ferry-redrive-from`
//! (the dead-letter queue). Only once that publish is durable is the dead letter settled in
//! the dead-letter queue (journaled `Redriven`, counted in `QueueStats::redriven`). A crash between the two leaves the message in both queues: on
//! reopen it is redriven again if asked, so a redrive is at-least-once.
//!
//! A matching message in flight (leased to a consumer of the dead-letter queue) or without
//! an origin to return to (no target given and not a dead letter, or its origin deleted)
//! is skipped and counted. An error (the target full, storage) stops the redrive; what
//! moved before it stays moved, and the message being moved stays in the dead-letter queue.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::{Incoming, Queue, durable};
use crate::engine::Broker;
use crate::error::{BrokerError, Result};
use crate::message::{Message, millis};
use crate::name::Name;
use crate::queue::journal::JournalEvent;
use crate::queue::state::{DeadLetterReason, QueueState, Seq};
use crate::record;

/// What to redrive and where; the default moves every dead letter back to its origin, as
/// fast as it can.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedriveRequest {
    /// Where to publish; `None` sends each message back to its origin queue (from its
    /// dead-letter metadata).
    pub target: Option<String>,
    pub filter: RedriveFilter,
    /// Stop after moving this many.
    pub max_messages: Option<usize>,
    /// At most this many messages a second (real time, by sleeping between messages);
    /// `None` or 0 for no limit.
    pub rate_per_sec: Option<u32>,
}

/// Which dead letters to redrive (or messages to peek at); every condition set must hold. Ages count from when the
/// message was dead-lettered (its publish time in the dead-letter queue).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedriveFilter {
    pub reason: Option<DeadLetterReason>,
    /// A user header with exactly this value.
    pub header: Option<(String, String)>,
    /// Dead-lettered at least this long ago.
    pub older_than: Option<Duration>,
    /// Dead-lettered less than this long ago.
    pub newer_than: Option<Duration>,
    /// A key of exactly these bytes (a message without a key never matches).
    pub key: Option<Bytes>,
    /// Only these seqs of the queue: an operator's selection. Seqs the queue no longer
    /// tracks are passed over, so a selection made from a page that has since changed
    /// moves what is still there and nothing else.
    pub seqs: Option<BTreeSet<Seq>>,
}

impl RedriveFilter {
    /// The tracked seqs worth reading for this filter, in order: the selection's when there
    /// is one, so a redrive or peek of a few selected letters does not walk the whole queue.
    pub(crate) fn candidates(&self, state: &QueueState) -> Vec<Seq> {
        match &self.seqs {
            Some(only) => only
                .iter()
                .copied()
                .filter(|&seq| state.is_tracked(seq))
                .collect(),
            None => state.seqs(),
        }
    }

    pub(crate) fn matches(&self, seq: Seq, letter: &Message, now_ms: i64) -> bool {
        let age = now_ms.saturating_sub(letter.published_at);
        self.seqs.as_ref().is_none_or(|only| only.contains(&seq))
            && self
                .key
                .as_ref()
                .is_none_or(|key| letter.key.as_ref() == Some(key))
            && self.reason.is_none_or(|reason| {
                letter
                    .dead_letter
                    .as_ref()
                    .is_some_and(|dl| dl.reason == reason.as_str())
            })
            && self
                .header
                .as_ref()
                .is_none_or(|(name, value)| letter.headers.get(name) == Some(value))
            && self.older_than.is_none_or(|d| age >= millis(d))
            && self.newer_than.is_none_or(|d| age < millis(d))
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RedriveReport {
    /// Published into their target and settled in the dead-letter queue.
    pub moved: usize,
    /// Matched the filter but were not moved: in flight, or no origin to return to.
    pub skipped: usize,
}

impl Broker {
    /// Moves dead letters out of the dead-letter queue `dlq`; see the
    /// head comment of `engine/queue/redrive.rs` for the rules.
    pub async fn redrive(&self, dlq: &str, request: RedriveRequest) -> Result<RedriveReport> {
        let dlq = self.queue(dlq)?;
        if !self.is_dead_letter_queue(dlq.name.as_str()) {
            return Err(BrokerError::NotADeadLetterQueue {
                queue: dlq.name.clone(),
            });
        }
        let fixed_target = request
            .target
            .as_deref()
            .map(|t| self.queue(t))
            .transpose()?;
        let interval = request
            .rate_per_sec
            .filter(|&rate| rate > 0)
            .map(|rate| Duration::from_secs_f64(1.0 / f64::from(rate)));
        let mut report = RedriveReport::default();
        let seqs = request.filter.candidates(&dlq.lock().state);
        for seq in seqs {
            if request.max_messages.is_some_and(|max| report.moved >= max) {
                break;
            }
            if !dlq.lock().state.is_tracked(seq) {
                continue;
            }
            let now_ms = self.now_ms();
            let letter = dlq.read(seq)?;
            if !request.filter.matches(seq, &letter, now_ms) {
                continue;
            }
            let target = match &fixed_target {
                Some(target) => Some(Arc::clone(target)),
                None => letter
                    .dead_letter
                    .as_ref()
                    .and_then(|dl| self.queue(&dl.origin_queue).ok()),
            };
            let Some(target) = target else {
                report.skipped += 1;
                continue;
            };
            if let Some(interval) = interval
                && report.moved > 0
            {
                tokio::time::sleep(interval).await;
            }
            let now_ms = self.now_ms();
            if !dlq.lock().state.take(seq, now_ms) {
                report.skipped += 1;
                continue;
            }
            let message = redriven(&letter, &dlq.name, now_ms);
            if let Err(error) = self
                .store_limited(&target, vec![Incoming::without_dedup(message)], None)
                .await
            {
                untake(&dlq, seq, &letter, now_ms);
                return Err(error);
            }
            let rx = {
                let mut inner = dlq.lock();
                dlq.journal(&mut inner, &[JournalEvent::Redriven { seq }], now_ms)
            };
            durable(rx).await?;
            report.moved += 1;
        }
        Ok(report)
    }
}

/// The message a redrive publishes for `letter`.
fn redriven(letter: &Message, dlq: &Name, now_ms: i64) -> Message {
    let mut headers = letter.headers.clone();
    let count = headers
        .get(record::REDRIVE_COUNT)
        .and_then(|c| c.parse::<u32>().ok())
        .unwrap_or(0)
        .saturating_add(1);
    headers.insert(record::REDRIVE_COUNT.to_owned(), count.to_string());
    headers.insert(record::REDRIVE_FROM.to_owned(), dlq.to_string());
    Message {
        id: letter.id,
        key: letter.key.clone(),
        headers,
        payload: letter.payload.clone(),
        published_at: now_ms,
        priority: letter.priority,
        deliver_at: None,
        expires_at: None,
        dedup_id: None,
        id_chosen: false,
        dead_letter: None,
    }
}

/// Puts a dead letter taken for a redrive that failed back into its queue's state.
fn untake(dlq: &Queue, seq: crate::Seq, letter: &Message, now_ms: i64) {
    let mut tracked = dlq.tracked(seq, letter);
    let mut inner = dlq.lock();
    tracked.deliveries = inner.deliveries.get(&seq).copied().unwrap_or(0);
    // Any effect of tracking it again stays queued for the next caller that takes effects.
    inner.state.track(tracked, now_ms);
}
