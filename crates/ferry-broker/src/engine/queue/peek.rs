//! Looking at a queue's messages without taking them: what `ferry dlq list / peek` shows.
//! A peek leases nothing, counts no delivery and changes no state; it reads the stored
//! messages of the seqs the queue still tracks, in seq order, from a paging cursor.

use crate::RedriveFilter;
use crate::engine::Broker;
use crate::error::Result;
use crate::message::Message;
use crate::queue::state::Seq;

/// The most messages one peek returns.
pub const MAX_PEEK: usize = 1000;

/// A message as a peek shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeekedMessage {
    pub seq: Seq,
    pub message: Message,
    /// Leased to a consumer right now.
    pub in_flight: bool,
}

impl Broker {
    /// Up to `max` (at most [`MAX_PEEK`]) messages of `queue` after seq `after` (all with
    /// `None`) that `filter` takes (the redrive filter: reason, header, age), oldest first.
    /// Page on by passing the last seq returned.
    pub fn peek(
        &self,
        queue: &str,
        after: Option<Seq>,
        max: usize,
        filter: &RedriveFilter,
    ) -> Result<Vec<PeekedMessage>> {
        let queue = self.queue(queue)?;
        let max = max.min(MAX_PEEK);
        let now_ms = self.now_ms();
        let seqs: Vec<Seq> = queue
            .lock()
            .state
            .seqs()
            .into_iter()
            .filter(|&s| after.is_none_or(|a| s > a))
            .collect();
        let mut out = Vec::new();
        // Read in pages as large as what is still wanted: a filter may drop most of them.
        for page in seqs.chunks(max.max(1)) {
            if out.len() >= max {
                break;
            }
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
                if out.len() < max && filter.matches(&message, now_ms) {
                    let in_flight = queue.lock().state.lease(seq).is_some();
                    out.push(PeekedMessage {
                        seq,
                        message,
                        in_flight,
                    });
                }
            }
        }
        Ok(out)
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
}
