//! Looking at a queue's messages without taking them: what `ferry dlq list / peek` shows.
//! A peek leases nothing, counts no delivery and changes no state; it reads the stored
//! messages of the seqs the queue still tracks, in seq order, from a paging cursor.

use crate::RedriveFilter;
use crate::engine::Broker;
use crate::error::Result;
use crate::message::Message;
use crate::queue::state::Seq;
use crate::read_limit::{Budget, ReadLimit};

/// The most messages one peek returns.
pub const MAX_PEEK: usize = 1000;

/// How many stored messages a peek reads at a time: few enough that reading past a byte
/// limit holds little more than the limit (16 of the largest messages, 16 MiB), enough
/// that a filter skipping most messages does not read one at a time.
const READ_CHUNK: usize = 16;

/// A message as a peek shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeekedMessage {
    pub seq: Seq,
    pub message: Message,
    /// Leased to a consumer right now.
    pub in_flight: bool,
}

/// What one peek found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeekPage {
    pub messages: Vec<PeekedMessage>,
    /// The page ended at its limit (count or bytes) with seqs after its last message not
    /// yet looked at: peek again after that seq. `false`: the queue held nothing more
    /// that the filter takes.
    pub more: bool,
}

impl Broker {
    /// Up to `max` (at most [`MAX_PEEK`]) messages of `queue` after seq `after` (all with
    /// `None`) that `filter` takes (the redrive filter: reason, header, age, key, selected seqs), oldest first.
    /// Page on by passing the last seq returned. [`Broker::peek_within`] bounds the bytes
    /// too.
    pub fn peek(
        &self,
        queue: &str,
        after: Option<Seq>,
        max: usize,
        filter: &RedriveFilter,
    ) -> Result<Vec<PeekedMessage>> {
        Ok(self
            .peek_within(queue, after, ReadLimit::messages(max), filter)?
            .messages)
    }

    /// As [`Broker::peek`], within `limit`: at most `limit.messages` (and [`MAX_PEEK`])
    /// messages and `limit.bytes` bytes of them — always at least one, so paging on
    /// progresses — reading no more of the queue than that takes.
    pub fn peek_within(
        &self,
        queue: &str,
        after: Option<Seq>,
        limit: ReadLimit,
        filter: &RedriveFilter,
    ) -> Result<PeekPage> {
        let queue = self.queue(queue)?;
        let mut budget = Budget::new(ReadLimit {
            messages: limit.messages.min(MAX_PEEK),
            ..limit
        });
        let now_ms = self.now_ms();
        let seqs: Vec<Seq> = filter
            .candidates(&queue.lock().state)
            .into_iter()
            .filter(|&s| after.is_none_or(|a| s > a))
            .collect();
        let mut out = Vec::new();
        for page in seqs.chunks(READ_CHUNK.min(budget.messages_left()).max(1)) {
            let (page, messages) = match queue.read_many(page) {
                Ok(messages) => (page.to_vec(), messages),
                // Settled meanwhile, and its segment deleted: read again what is left.
                Err(_) => {
                    let left: Vec<Seq> = {
                        let inner = queue.lock();
                        page.iter()
                            .copied()
                            .filter(|&s| inner.state.is_tracked(s))
                            .collect()
                    };
                    let messages = queue.read_many(&left)?;
                    (left, messages)
                }
            };
            for (seq, message) in page.into_iter().zip(messages) {
                if budget.is_spent() {
                    return Ok(PeekPage {
                        messages: out,
                        more: true,
                    });
                }
                if !filter.matches(seq, &message, now_ms) {
                    continue;
                }
                if !budget.fits(&message) {
                    return Ok(PeekPage {
                        messages: out,
                        more: true,
                    });
                }
                budget.take(&message);
                let in_flight = queue.lock().state.lease(seq).is_some();
                out.push(PeekedMessage {
                    seq,
                    message,
                    in_flight,
                });
            }
        }
        Ok(PeekPage {
            messages: out,
            more: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use ferry_storage::ManualClock;

    use super::*;
    use crate::engine::tests::{T0, open, spec};
    use crate::{DeadLetterReason, OutgoingMessage};

    #[tokio::test]
    async fn a_peek_shows_dead_letters_by_filter_and_page_and_takes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let broker = open(dir.path(), &clock).await;
        broker.create_queue("q", spec(1)).await.unwrap();
        for i in 0..5 {
            let m = OutgoingMessage::new(format!("m{i}")).with_header("n", i.to_string());
            broker.publish("q", m).await.unwrap();
        }
        let got = broker.receive("q", "c", 5, None, None).await.unwrap();
        for m in &got[..3] {
            broker.reject("q", m.seq, m.token, "bad").await.unwrap();
        }
        for m in &got[3..] {
            broker.nack("q", m.seq, m.token, None, None).await.unwrap();
        }
        let all = broker
            .peek("q.dlq", None, 10, &RedriveFilter::default())
            .unwrap();
        assert_eq!(all.len(), 5);
        let rejected = RedriveFilter {
            reason: Some(DeadLetterReason::Rejected),
            ..RedriveFilter::default()
        };
        let only = broker.peek("q.dlq", None, 10, &rejected).unwrap();
        assert_eq!(only.len(), 3);
        assert!(
            only.iter()
                .all(|p| p.message.dead_letter.as_ref().unwrap().reason == "rejected")
        );
        let first = broker
            .peek("q.dlq", None, 2, &RedriveFilter::default())
            .unwrap();
        let next = broker
            .peek("q.dlq", Some(first[1].seq), 10, &RedriveFilter::default())
            .unwrap();
        assert_eq!(first.len() + next.len(), 5, "pages cover everything once");
        assert!(next.iter().all(|p| p.seq > first[1].seq));

        // A leased one shows as in flight; the peek itself counted no delivery.
        let leased = broker.receive("q.dlq", "c", 1, None, None).await.unwrap();
        let again = broker
            .peek("q.dlq", None, 10, &RedriveFilter::default())
            .unwrap();
        let shown = again.iter().find(|p| p.seq == leased[0].seq).unwrap();
        assert!(shown.in_flight);
        assert_eq!(again.iter().filter(|p| p.in_flight).count(), 1);
        let stats = broker.describe_queue("q.dlq").unwrap().stats.state;
        assert_eq!((stats.ready, stats.in_flight), (4, 1));
        let rest = broker.receive("q.dlq", "c", 10, None, None).await.unwrap();
        assert_eq!(rest.len(), 4);
        assert!(
            rest.iter().all(|m| m.delivery == 1),
            "peeks counted no delivery"
        );
        assert!(
            broker
                .peek("nope", None, 1, &RedriveFilter::default())
                .is_err()
        );
    }

    #[tokio::test]
    async fn a_peek_by_key_or_selection_shows_only_those_and_takes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let broker = open(dir.path(), &clock).await;
        broker.create_queue("q", spec(1)).await.unwrap();
        for (i, key) in ["k1", "k2", "k1", "k10"].iter().enumerate() {
            let m = OutgoingMessage::new(format!("m{i}")).with_key(*key);
            broker.publish("q", m).await.unwrap();
        }
        broker
            .publish("q", OutgoingMessage::new("keyless"))
            .await
            .unwrap();
        let leased = broker.receive("q", "c", 1, None, None).await.unwrap();
        let k1 = RedriveFilter {
            key: Some(bytes::Bytes::from_static(b"k1")),
            ..RedriveFilter::default()
        };
        let got = broker.peek("q", None, 10, &k1).unwrap();
        let payloads: Vec<_> = got.iter().map(|p| p.message.payload.clone()).collect();
        assert_eq!(payloads, ["m0", "m2"], "exactly k1: not k10, not keyless");
        assert!(got[0].in_flight, "m0 is leased, and shown as such");
        let m2 = got[1].seq;
        let selected = RedriveFilter {
            seqs: Some([m2, 4, 77].into()),
            ..RedriveFilter::default()
        };
        let got = broker.peek("q", None, 10, &selected).unwrap();
        let seqs: Vec<_> = got.iter().map(|p| p.seq).collect();
        assert_eq!(
            seqs,
            [m2, 4],
            "the selection, less what the queue never had"
        );
        // Browsing changed nothing: same depth, and the lease is the only delivery.
        let stats = broker.describe_queue("q").unwrap().stats.state;
        assert_eq!((stats.ready, stats.in_flight), (4, 1));
        broker
            .ack("q", leased[0].seq, leased[0].token)
            .await
            .unwrap();
        let rest = broker.receive("q", "c", 10, None, None).await.unwrap();
        assert!(
            rest.iter().all(|m| m.delivery == 1),
            "peeks counted no delivery"
        );
    }

    #[tokio::test]
    async fn a_peek_stops_at_its_byte_limit_says_there_is_more_and_pages_on() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let broker = open(dir.path(), &clock).await;
        broker.create_queue("q", spec(1)).await.unwrap();
        for i in 0..40u8 {
            broker
                .publish("q", OutgoingMessage::new(vec![i; 1000]))
                .await
                .unwrap();
        }
        let all = RedriveFilter::default();
        let limit = ReadLimit {
            messages: 100,
            bytes: 4500,
        };
        let first = broker.peek_within("q", None, limit, &all).unwrap();
        assert_eq!(first.messages.len(), 4, "4 of 1000 bytes fit in 4500");
        assert!(first.more);
        let mut seen = first.messages.len();
        let mut after = first.messages.last().map(|m| m.seq);
        loop {
            let page = broker.peek_within("q", after, limit, &all).unwrap();
            seen += page.messages.len();
            if !page.more {
                break;
            }
            after = page.messages.last().map(|m| m.seq);
        }
        assert_eq!(
            seen, 40,
            "paging on from each page's last seq sees every message"
        );

        // One message larger than the limit still comes, alone, so paging progresses.
        let tiny = ReadLimit {
            messages: 100,
            bytes: 10,
        };
        let page = broker.peek_within("q", None, tiny, &all).unwrap();
        assert_eq!(page.messages.len(), 1);
        assert!(page.more);
        // The count still bounds, and a page that reached the end says so.
        let last = broker
            .peek_within("q", Some(page.messages[0].seq + 37), limit, &all)
            .unwrap();
        assert_eq!(last.messages.len(), 2);
        assert!(!last.more);
    }
}
