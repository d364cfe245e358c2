//! Publishing to one queue over one long-lived stream (`ferry.v1.Publisher/PublishStream`).
//!
//! Why beside [`Client::publish`]: a unary call opens an HTTP/2 stream, sends headers and
//! trailers both ways, and has the server spawn a task for it, route it and check its
//! token; on an open stream a batch is one message each way. With batches of 64 small
//! messages that per-call work is most of what a remote publish costs beyond the broker's
//! own (see `docs/benchmarks.md`, "Server over loopback").
//!
//! One batch is in flight at a time: the server stores a stream's batches in order and ends
//! the stream at the first that fails, so each batch's answer is known before the next goes
//! out. Each batch carries a batch id of its own. When the stream breaks before a batch is
//! answered, the batch is sent again on a new stream with the same id, which the queue's
//! dedup window recognises: it is stored once, and the answer carries the original ids.

use std::sync::Arc;

use ferry_proto::v1;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::error::{ClientError, Result};
use crate::{Client, Message, message, publish_call};

/// Batches to one queue over one stream; made by [`Client::publish_stream`]. The stream is
/// opened at the first batch and again after it broke.
pub struct PublishStream {
    client: Client,
    queue: String,
    open: Option<Open>,
}

struct Open {
    requests: mpsc::Sender<Arc<v1::PublishRequest>>,
    replies: tonic::Streaming<v1::PublishResponse>,
    /// A batch was sent and its answer not yet read. A caller that stopped waiting (its
    /// future dropped) leaves the stream so, and the answer still on its way would be
    /// taken for the next batch's: such a stream is not used again.
    awaiting: bool,
}

impl PublishStream {
    pub(crate) fn new(client: Client, queue: String) -> PublishStream {
        PublishStream {
            client,
            queue,
            open: None,
        }
    }

    /// The queue this stream publishes to.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// Publishes a batch and returns its ids, in order, once it is stored (durable on the
    /// server). Messages without an id of their own get ids the server mints. A batch whose
    /// answer was lost is sent again, with the same batch id, as [`Client::publish`] does.
    pub async fn publish(&mut self, messages: Vec<Message>) -> Result<Vec<String>> {
        let request = Arc::new(v1::PublishRequest {
            queue: self.queue.clone(),
            messages: messages.into_iter().map(|m| m.0).collect(),
            batch_id: Some(message::IdMinter::now().mint()),
        });
        // `RetryPolicy::run` cannot lend `self` to each try: its rule, in a loop here.
        let policy = self.client.retry;
        let mut attempt = 0;
        loop {
            match self.try_once(Arc::clone(&request)).await {
                Err(error) if policy.retries(&error, attempt) => {
                    tracing::debug!(%error, attempt, "publishing again on a new stream");
                    tokio::time::sleep(policy.delay(attempt)).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn try_once(&mut self, request: Arc<v1::PublishRequest>) -> Result<Vec<String>> {
        if self.open.as_ref().is_none_or(|open| open.awaiting) {
            self.open = None;
            self.open = Some(self.start().await?);
        }
        let open = self.open.as_mut().expect("opened above");
        open.awaiting = true;
        let answer = if open.requests.send(request).await.is_err() {
            Err(broken(
                "the publish stream closed before the batch was sent",
            ))
        } else {
            match open.replies.message().await {
                Ok(Some(reply)) => Ok(reply.ids),
                Ok(None) => Err(broken(
                    "the publish stream ended before the batch was answered",
                )),
                Err(status) => Err(status.into()),
            }
        };
        match answer {
            Ok(ids) => {
                open.awaiting = false;
                Ok(ids)
            }
            Err(error) => {
                // The server ends the stream after a failed batch, and a broken one is
                // gone: the next batch opens a new stream either way.
                self.open = None;
                Err(error)
            }
        }
    }

    async fn start(&self) -> Result<Open> {
        let (requests, outbound) = mpsc::channel(1);
        let replies =
            publish_call::open_stream(self.client.channel.clone(), ReceiverStream::new(outbound))
                .await?;
        Ok(Open {
            requests,
            replies,
            awaiting: false,
        })
    }
}

/// A stream that broke under a batch: transient, like a lost connection, so the batch is
/// sent again.
fn broken(what: &str) -> ClientError {
    tonic::Status::unavailable(what).into()
}
