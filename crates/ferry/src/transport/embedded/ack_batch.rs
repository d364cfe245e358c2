//! A consumer's acks, coalesced onto the broker's [`Broker::ack_batch`]: acks that arrive
//! while a batch is being written go together in the next one — one journal record and one
//! fsync for all of them — and each caller still waits for its own durable outcome.
//!
//! There is no timer: a lone ack is written at once, and batches grow only as far as acks
//! pile up behind a write in flight (group commit). It is hand-written because it is a
//! few lines over a mutex and oneshot channels already in use here, and what it needs — no
//! linger, a batch taken exactly when the previous write returns, each waiter answered
//! with its own outcome of the broker's per-message results — is the part a generic
//! batching helper would have to be configured around, at the price of a dependency.
//!
//! The batch is submitted by a spawned task, not by whichever caller came first: a caller
//! that stops waiting (its future dropped) must not strand the acks queued behind it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ferry_broker::{Broker, BrokerError, LeaseToken, Seq};
use tokio::sync::oneshot;

use super::engine::{NAME, Shared, map_error};
use crate::error::{Error, Result};

/// Most acks one journal record carries.
const MAX_BATCH: usize = 1024;

pub(super) struct AckBatcher {
    shared: Arc<Shared>,
    queue: Arc<str>,
    pending: Mutex<Pending>,
    /// Batches written so far: what the coalescing saved is visible (and tested).
    batches: AtomicU64,
}

#[derive(Default)]
struct Pending {
    acks: Vec<Waiting>,
    /// Whether a task is submitting batches now; it takes whatever arrives meanwhile.
    submitting: bool,
}

struct Waiting {
    seq: Seq,
    token: LeaseToken,
    reply: oneshot::Sender<Result<()>>,
}

impl AckBatcher {
    pub(super) fn new(shared: Arc<Shared>, queue: Arc<str>) -> AckBatcher {
        AckBatcher {
            shared,
            queue,
            pending: Mutex::new(Pending::default()),
            batches: AtomicU64::new(0),
        }
    }

    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) fn batches(&self) -> u64 {
        self.batches.load(Ordering::Relaxed)
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Acks one delivery; returns once the ack is durable.
    pub(super) async fn ack(self: &Arc<Self>, seq: Seq, token: LeaseToken) -> Result<()> {
        let broker = self.shared.broker()?;
        let (reply, answer) = oneshot::channel();
        let start = {
            let mut pending = self.pending();
            pending.acks.push(Waiting { seq, token, reply });
            !std::mem::replace(&mut pending.submitting, true)
        };
        if start {
            tokio::spawn(Arc::clone(self).submit(broker));
        }
        // The submitter answers every ack it takes; only a runtime shutting down drops one.
        answer.await.map_err(|_| Error::Closed)?
    }

    /// Writes batches until no ack is waiting.
    async fn submit(self: Arc<Self>, broker: Broker) {
        loop {
            let batch: Vec<Waiting> = {
                let mut pending = self.pending();
                if pending.acks.is_empty() {
                    pending.submitting = false;
                    return;
                }
                let n = pending.acks.len().min(MAX_BATCH);
                pending.acks.drain(..n).collect()
            };
            let pairs: Vec<(Seq, LeaseToken)> = batch.iter().map(|w| (w.seq, w.token)).collect();
            self.batches.fetch_add(1, Ordering::Relaxed);
            match broker.ack_batch(&self.queue, &pairs).await {
                Ok(outcomes) => {
                    for (waiting, outcome) in batch.into_iter().zip(outcomes) {
                        let _ = waiting.reply.send(outcome.map(drop).map_err(map_error));
                    }
                }
                Err(error) => {
                    for waiting in batch {
                        let _ = waiting.reply.send(Err(batch_failure(&error)));
                    }
                }
            }
        }
    }
}

/// The error every ack of a batch gets when the batch as a whole failed: the queue is
/// gone, or poisoned, or the write failed.
fn batch_failure(error: &BrokerError) -> Error {
    match error {
        BrokerError::QueueNotFound { queue } => Error::NotFound {
            kind: "queue",
            name: queue.clone(),
        },
        other => Error::Transport {
            transport: NAME,
            message: other.to_string(),
            source: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ferry_broker::{BrokerConfig, OutgoingMessage, QueueSpec};
    use tokio::task::JoinSet;

    use super::*;

    #[tokio::test]
    async fn concurrent_acks_share_a_write_and_each_gets_its_own_outcome() {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(dir.path(), BrokerConfig::default())
            .await
            .unwrap();
        broker
            .create_queue("acks", QueueSpec::default())
            .await
            .unwrap();
        let messages = (0..100)
            .map(|i| OutgoingMessage::new(format!("{i}")))
            .collect();
        broker.publish_batch("acks", messages).await.unwrap();
        let got = broker.receive("acks", "c", 100, None, None).await.unwrap();
        assert_eq!(got.len(), 100);
        let acks = Arc::new(AckBatcher::new(
            Arc::new(Shared::new(broker.clone())),
            Arc::from("acks"),
        ));

        // 99 good acks and one with a token that is not its lease, all at once. On this
        // single-threaded runtime every one of them is queued before the submitter the
        // first one spawned gets to run.
        let (last, rest) = got.split_last().unwrap();
        let mut calls = JoinSet::new();
        for m in rest {
            let (acks, seq, token) = (acks.clone(), m.seq, m.token);
            calls.spawn(async move { acks.ack(seq, token).await });
        }
        let wrong = LeaseToken(last.token.0.wrapping_add(1));
        let refused = {
            let (acks, seq) = (acks.clone(), last.seq);
            tokio::spawn(async move { acks.ack(seq, wrong).await })
        };
        while let Some(outcome) = calls.join_next().await {
            outcome.unwrap().unwrap();
        }
        match refused.await.unwrap() {
            Err(Error::NotHeld { .. }) => {}
            other => panic!("an ack with a wrong token answered {other:?}"),
        }
        assert!(
            acks.batches() <= 2,
            "100 concurrent acks took {} writes",
            acks.batches()
        );

        // The refused ack changed nothing: the message is still held, and its own ack
        // settles it; nothing acked comes back.
        acks.ack(last.seq, last.token).await.unwrap();
        let again = broker
            .receive("acks", "c", 100, None, Some(Duration::from_millis(50)))
            .await
            .unwrap();
        assert!(again.is_empty(), "{} acked messages came back", again.len());
    }

    #[tokio::test]
    async fn acks_after_the_transport_closed_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(dir.path(), BrokerConfig::default())
            .await
            .unwrap();
        let shared = Arc::new(Shared::new(broker));
        let acks = AckBatcher::new(shared.clone(), Arc::from("acks"));
        shared.close();
        match Arc::new(acks).ack(1, LeaseToken(1)).await {
            Err(Error::Closed) => {}
            other => panic!("an ack after close answered {other:?}"),
        }
    }
}
