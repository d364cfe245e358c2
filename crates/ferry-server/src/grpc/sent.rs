//! Which of a consume stream's deliveries were handed to the transport.
//!
//! A delivery leased for a stream is not yet seen by anyone: it waits in the stream's
//! outgoing channel until tonic takes it to write. When the stream ends, the ones tonic
//! took may have reached the consumer, which may have crashed on them — they fail their
//! attempt, which is how a poison message reaches the dead-letter queue. The ones it never
//! took provably did not, and are given back without spending an attempt
//! (`Broker::return_unsent`); counting them dead-lettered messages for `max_deliveries`
//! after fewer deliveries than any consumer saw.
//!
//! [`Outgoing`] is the response stream tonic reads: it marks each delivery sent as it
//! yields it, under the same lock the stream's end takes to give its deliveries back, so
//! a delivery is either yielded and counted or given back and never yielded — not both.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use ferry_proto::v1;
use tokio::sync::mpsc;

use crate::metrics::Meters;
use tonic::Status;

/// One delivery the stream holds unsettled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Held {
    pub token: u64,
    /// Yielded to tonic: from then on it may have reached the consumer.
    pub sent: bool,
}

/// A stream's deliveries not yet settled, by seq; shared by the stream and its
/// [`Outgoing`].
#[derive(Debug, Clone, Default)]
pub(super) struct Unsettled(Arc<Mutex<HashMap<u64, Held>>>);

impl Unsettled {
    pub fn lock(&self) -> MutexGuard<'_, HashMap<u64, Held>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub(super) type Response = Result<v1::ConsumeResponse, Status>;

/// The consume stream's responses as tonic reads them; see the [module docs](self).
pub struct Outgoing {
    rx: mpsc::Receiver<Response>,
    unsettled: Unsettled,
    /// Counts each delivery sent (`ferry_queue_delivered_total`).
    meters: Arc<Meters>,
    queue: String,
}

impl Outgoing {
    pub(super) fn new(
        rx: mpsc::Receiver<Response>,
        unsettled: Unsettled,
        meters: Arc<Meters>,
        queue: &str,
    ) -> Outgoing {
        Outgoing {
            rx,
            unsettled,
            meters,
            queue: queue.to_owned(),
        }
    }
}

impl tokio_stream::Stream for Outgoing {
    type Item = Response;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Response>> {
        loop {
            let Some(response) = std::task::ready!(self.rx.poll_recv(cx)) else {
                return Poll::Ready(None);
            };
            let Ok(v1::ConsumeResponse {
                kind: Some(v1::consume_response::Kind::Delivery(d)),
            }) = &response
            else {
                return Poll::Ready(Some(response));
            };
            match self.unsettled.lock().get_mut(&d.seq) {
                Some(held) if held.token == d.token => {
                    held.sent = true;
                    self.meters.sent(&self.queue, 1);
                }
                // Given back when the stream ended, or a lease of it that ended and was
                // replaced by a newer one to this stream: nobody may work on it.
                _ => continue,
            }
            return Poll::Ready(Some(response));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_stream::StreamExt;

    fn delivery(seq: u64, token: u64) -> Response {
        Ok(v1::ConsumeResponse {
            kind: Some(v1::consume_response::Kind::Delivery(v1::Delivery {
                seq,
                token,
                ..Default::default()
            })),
        })
    }

    #[tokio::test]
    async fn a_delivery_is_sent_when_yielded_and_never_after_it_was_given_back() {
        let unsettled = Unsettled::default();
        let (tx, rx) = mpsc::channel(4);
        let meters = Arc::new(Meters::default());
        let mut outgoing = Outgoing::new(rx, unsettled.clone(), meters.clone(), "q");
        for (seq, token) in [(1, 10), (2, 20), (3, 30)] {
            unsettled.lock().insert(seq, Held { token, sent: false });
        }
        // seq 3 is in the channel under a lease since replaced.
        unsettled.lock().insert(
            3,
            Held {
                token: 31,
                sent: false,
            },
        );
        for (seq, token) in [(1, 10), (2, 20), (3, 30)] {
            tx.send(delivery(seq, token)).await.unwrap();
        }
        drop(tx);
        let first = outgoing.next().await.unwrap().unwrap();
        assert!(
            matches!(first.kind, Some(v1::consume_response::Kind::Delivery(ref d)) if d.seq == 1)
        );
        assert!(unsettled.lock()[&1].sent);
        assert!(!unsettled.lock()[&2].sent, "still in the channel");
        // The stream ends and gives back what was not sent: seq 2 is never yielded.
        let given_back: Vec<u64> = {
            let mut held = unsettled.lock();
            let unsent: Vec<u64> = held
                .iter()
                .filter(|(_, h)| !h.sent)
                .map(|(s, _)| *s)
                .collect();
            for seq in &unsent {
                held.remove(seq);
            }
            unsent
        };
        assert_eq!(given_back.len(), 2);
        assert!(
            outgoing.next().await.is_none(),
            "nothing given back is yielded"
        );
        // Counted as delivered: the one sent, not the ones given back.
        assert_eq!(meters.snapshot().delivered.get("q"), Some(&1));
    }
}
