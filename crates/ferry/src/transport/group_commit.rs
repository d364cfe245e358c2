//! One consumer's settlements coalesced into batches, so an engine that can settle many
//! deliveries in one call (Redis, PostgreSQL, RabbitMQ) is asked once per batch rather than
//! once per delivery.
//!
//! There is no timer: a lone settlement is sent at once, and a batch grows only as far as
//! settlements pile up behind one in flight (group commit), so coalescing never adds
//! latency. Each caller still waits for, and gets, its own outcome: a stale settlement in a
//! batch is refused on its own while the rest of the batch goes through.
//!
//! The batch is sent by a spawned task, not by whichever caller came first: a caller that
//! stops waiting (its future dropped) must not strand the settlements queued behind it.
//! (The embedded transport's `ack_batch` is the same idea fitted to the broker's own
//! batch call; this one is generic over what a batch is.)

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

use crate::error::{Error, Result};

/// Sends one batch of settlements to the engine.
pub(crate) trait SubmitBatch: Send + Sync + 'static {
    type Item: Send + 'static;

    /// The transport's name, for the error of an answer the engine did not give.
    const TRANSPORT: &'static str;
    /// Most items one call takes.
    const MAX_BATCH: usize;

    /// Settles `batch`, answering each item in order. An answer missing from the end is
    /// taken as the engine's failure to say.
    fn submit(&self, batch: Vec<Self::Item>) -> impl Future<Output = Vec<Result<()>>> + Send;
}

pub(crate) struct GroupCommit<S: SubmitBatch> {
    submitter: S,
    pending: Mutex<Pending<S::Item>>,
    /// Batches sent so far: what the coalescing saved is visible (and tested).
    batches: AtomicU64,
}

struct Pending<T> {
    items: Vec<(T, oneshot::Sender<Result<()>>)>,
    /// Whether a task is sending batches now; it takes whatever arrives meanwhile.
    submitting: bool,
}

impl<S: SubmitBatch> GroupCommit<S> {
    pub(crate) fn new(submitter: S) -> Arc<GroupCommit<S>> {
        Arc::new(GroupCommit {
            submitter,
            pending: Mutex::new(Pending {
                items: Vec::new(),
                submitting: false,
            }),
            batches: AtomicU64::new(0),
        })
    }

    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn batches(&self) -> u64 {
        self.batches.load(Ordering::Relaxed)
    }

    fn pending(&self) -> MutexGuard<'_, Pending<S::Item>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Settles one item with whatever else is waiting; returns its own outcome.
    pub(crate) async fn settle(self: &Arc<Self>, item: S::Item) -> Result<()> {
        let (reply, answer) = oneshot::channel();
        let start = {
            let mut pending = self.pending();
            pending.items.push((item, reply));
            !std::mem::replace(&mut pending.submitting, true)
        };
        if start {
            tokio::spawn(Arc::clone(self).submit_all());
        }
        // The submitter answers every item it takes; only a runtime shutting down drops one.
        answer.await.map_err(|_| Error::Closed)?
    }

    /// Sends batches until nothing is waiting.
    async fn submit_all(self: Arc<Self>) {
        loop {
            let batch: Vec<(S::Item, oneshot::Sender<Result<()>>)> = {
                let mut pending = self.pending();
                if pending.items.is_empty() {
                    pending.submitting = false;
                    return;
                }
                let n = pending.items.len().min(S::MAX_BATCH.max(1));
                pending.items.drain(..n).collect()
            };
            let (items, replies): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
            self.batches.fetch_add(1, Ordering::Relaxed);
            let mut outcomes = self.submitter.submit(items).await.into_iter();
            for reply in replies {
                let outcome = outcomes.next().unwrap_or_else(|| {
                    Err(Error::Transport {
                        transport: S::TRANSPORT,
                        message: "the engine gave no answer for this settlement".into(),
                        source: None,
                    })
                });
                let _ = reply.send(outcome);
            }
        }
    }
}

/// The answers of a batch that failed as a whole (the connection, the server): every item
/// gets the same kind of error, so each caller can act on it as it would on its own call.
pub(crate) fn all_failed(n: usize, error: Error) -> Vec<Result<()>> {
    let again = |e: &Error| match e {
        Error::Closed => Error::Closed,
        Error::Timeout(after) => Error::Timeout(*after),
        Error::NotFound { kind, name } => Error::NotFound {
            kind,
            name: name.clone(),
        },
        Error::Transport {
            transport, message, ..
        } => Error::Transport {
            transport,
            message: message.clone(),
            source: None,
        },
        other => Error::Transport {
            transport: "batch",
            message: other.to_string(),
            source: None,
        },
    };
    let mut out: Vec<Result<()>> = (1..n).map(|_| Err(again(&error))).collect();
    if n > 0 {
        out.insert(0, Err(error));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Records each batch; refuses odd items.
    struct Recorder(Mutex<Vec<Vec<u32>>>);

    impl SubmitBatch for Arc<Recorder> {
        type Item = u32;
        const TRANSPORT: &'static str = "recorder";
        const MAX_BATCH: usize = 64;

        async fn submit(&self, batch: Vec<u32>) -> Vec<Result<()>> {
            let outcomes = batch
                .iter()
                .map(|n| {
                    if n % 2 == 0 {
                        Ok(())
                    } else {
                        Err(Error::NotHeld {
                            id: n.to_string(),
                            why: "odd".into(),
                        })
                    }
                })
                .collect();
            self.0.lock().unwrap().push(batch);
            outcomes
        }
    }

    #[tokio::test]
    async fn concurrent_settlements_share_batches_and_each_gets_its_own_outcome() {
        let recorder = Arc::new(Recorder(Mutex::new(Vec::new())));
        let commit = GroupCommit::new(recorder.clone());
        // On this single-threaded runtime every task queues its item before the submitter
        // the first one spawned gets to run.
        let mut calls = tokio::task::JoinSet::new();
        for n in 0..100u32 {
            let commit = commit.clone();
            calls.spawn(async move { (n, commit.settle(n).await) });
        }
        let outcomes = calls.join_all().await;
        for (n, outcome) in outcomes {
            match (n % 2, outcome) {
                (0, Ok(())) => {}
                (1, Err(Error::NotHeld { id, .. })) => assert_eq!(id, n.to_string()),
                (_, other) => panic!("{n} answered {other:?}"),
            }
        }
        let batches = recorder.0.lock().unwrap().clone();
        assert_eq!(commit.batches(), batches.len() as u64);
        assert!(
            batches.len() <= 3,
            "100 settlements took {} batches",
            batches.len()
        );
        assert!(batches.iter().all(|b| b.len() <= 64));
        let mut all: Vec<u32> = batches.concat();
        all.sort();
        assert_eq!(all, (0..100).collect::<Vec<_>>());
    }
}
