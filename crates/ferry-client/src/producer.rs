//! A batching producer: messages sent within `linger` of each other, up to `max_batch`,
//! go in one batch, on the producer's [`PublishStream`](crate::PublishStream). A batch
//! that may not have arrived (the connection broke, the server restarted) is sent again
//! with the same batch id, which the queue's dedup window recognises: a retry is stored
//! once and answered with the original ids.

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::error::{ClientError, Result};
use crate::{Client, Message};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProducerConfig {
    /// How long the first message of a batch waits for others.
    pub linger: Duration,
    /// Most messages per publish.
    pub max_batch: usize,
    /// Messages waiting to be sent before `send` waits for room.
    pub queue_capacity: usize,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            linger: Duration::from_millis(5),
            max_batch: 256,
            queue_capacity: 4096,
        }
    }
}

type Pending = (Message, oneshot::Sender<Result<String>>);

/// Sends messages to one queue in batches; see the module docs.
pub struct Producer {
    tx: mpsc::Sender<Pending>,
    task: tokio::task::JoinHandle<()>,
}

impl Producer {
    pub(crate) fn start(client: Client, queue: String, config: ProducerConfig) -> Producer {
        let (tx, rx) = mpsc::channel(config.queue_capacity.max(1));
        let task = tokio::spawn(run(client, queue, config, rx));
        Producer { tx, task }
    }

    /// Queues `message` and returns its id once it is stored (durable on the server).
    pub async fn send(&self, message: Message) -> Result<String> {
        let (done, stored) = oneshot::channel();
        self.tx
            .send((message, done))
            .await
            .map_err(|_| ClientError::Closed)?;
        stored.await.map_err(|_| ClientError::Closed)?
    }

    /// Sends what is queued and stops.
    pub async fn close(self) {
        drop(self.tx);
        let _ = self.task.await;
    }
}

async fn run(
    client: Client,
    queue: String,
    config: ProducerConfig,
    mut rx: mpsc::Receiver<Pending>,
) {
    // One stream for all the batches: a batch is a message each way, not a call.
    let mut stream = client.publish_stream(&queue);
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + config.linger;
        while batch.len() < config.max_batch.max(1) {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(next)) => batch.push(next),
                Ok(None) | Err(_) => break,
            }
        }
        // Each batch carries a batch id that every retry carries too.
        let (messages, waiters): (Vec<Message>, Vec<_>) = batch.into_iter().unzip();
        match stream.publish(messages).await {
            Ok(ids) => {
                for (done, id) in waiters.into_iter().zip(ids) {
                    let _ = done.send(Ok(id));
                }
            }
            Err(error) => {
                // One error for many waiters: each gets its kind and text (a connection
                // failure reads as the server being unavailable).
                let code = error.code().unwrap_or(tonic::Code::Unavailable);
                let kind = error.kind();
                let missing = error.missing().cloned();
                let message = error.to_string();
                for done in waiters {
                    let _ = done.send(Err(ClientError::Server {
                        code,
                        message: message.clone(),
                        kind,
                        missing: missing.clone(),
                    }));
                }
            }
        }
    }
}
