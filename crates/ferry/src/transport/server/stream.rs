//! A consumer's settle stream: a `Consume` stream opened with no credit, used only to send
//! settles and read their answers in order. The server settles the acks that arrive
//! together with one journal append (and one fsync), so many acks in flight share one
//! round trip and one write instead of one unary call each.
//!
//! The server checks a settle by queue, seq and lease token, not by the stream that
//! delivered the message, so deliveries fetched with the unary `Receive` settle here.
//! With no credit the stream never delivers, so it holds nothing the server would have to
//! give back when it ends.
//!
//! A task keeps the stream while anything can still settle on it — the consumer or a
//! delivery not yet settled — and ends it when the last of them is gone; so a delivery
//! handed out before the consumer closed stays settleable after. When the connection
//! breaks, the task opens a new stream with backoff. A settle the stream cannot answer —
//! it is down, it broke before the answer, or the server refused the settle (its answer on
//! the stream carries text, not a status code) — is answered [`Answer::AskDirectly`]: the
//! settler asks again with the unary call, whose status code the SDK maps onto its typed
//! errors. Asking again is safe: a refused settle changed nothing, and a settle repeated
//! after a lost answer is either found done (an ack) or refused as no longer held.

use std::collections::VecDeque;

use ferry_client::proto::{self as v1, consume_request, consume_response};
use ferry_client::{Client, ClientError, RetryPolicy};
use tokio::sync::{mpsc, oneshot};

/// A settle (or extend) for the stream to send.
pub(super) struct Settle {
    pub settle: v1::Settle,
    pub reply: oneshot::Sender<Answer>,
}

/// The stream's answer to one settle.
pub(super) enum Answer {
    /// Done, and durable.
    Done,
    /// Not answered here; ask with the unary call (see the module docs).
    AskDirectly,
}

/// Opens the settle stream of `consumer` on `queue` (failing here if the queue is unknown
/// or the call refused) and starts the task that keeps it; settles go to the sender.
pub(super) async fn open(
    client: Client,
    queue: &str,
    consumer: &str,
) -> Result<mpsc::UnboundedSender<Settle>, ClientError> {
    let (settles, settle_rx) = mpsc::unbounded_channel();
    let keeper = Keeper {
        client,
        open: v1::ConsumeOpen {
            queue: queue.to_owned(),
            consumer: consumer.to_owned(),
            lease_ms: None,
        },
        settles: settle_rx,
    };
    let stream = keeper.connect().await?;
    tokio::spawn(keeper.run(stream));
    Ok(settles)
}

struct Keeper {
    client: Client,
    open: v1::ConsumeOpen,
    settles: mpsc::UnboundedReceiver<Settle>,
}

struct Stream {
    requests: mpsc::UnboundedSender<v1::ConsumeRequest>,
    responses: tonic::Streaming<v1::ConsumeResponse>,
}

/// Why serving a stream stopped.
enum Ended {
    /// Nothing can settle on the stream any more.
    Unused,
    Failed(ClientError),
}

impl Keeper {
    async fn connect(&self) -> Result<Stream, ClientError> {
        let (requests, rx) = mpsc::unbounded_channel();
        requests
            .send(v1::ConsumeRequest {
                kind: Some(consume_request::Kind::Open(self.open.clone())),
            })
            .map_err(|_| ClientError::Closed)?;
        let responses = self.client.consume_stream(rx).await?;
        Ok(Stream {
            requests,
            responses,
        })
    }

    async fn run(mut self, mut stream: Stream) {
        loop {
            let error = match self.serve(&mut stream).await {
                Ended::Unused => return,
                Ended::Failed(error) => error,
            };
            if !error.is_transient() {
                // Settles go to the unary calls from now on, which say what is wrong.
                tracing::warn!(queue = %self.open.queue, %error, "settle stream refused");
                return;
            }
            tracing::warn!(queue = %self.open.queue, %error, "settle stream lost; reconnecting");
            stream = match self.reconnect().await {
                Some(stream) => stream,
                None => return,
            };
        }
    }

    /// A new stream after a transient failure, retried with backoff; `None` when nothing
    /// can settle on one any more or the server refuses for good.
    async fn reconnect(&mut self) -> Option<Stream> {
        let backoff = RetryPolicy::default();
        let mut attempt = 0;
        loop {
            tokio::select! {
                () = tokio::time::sleep(backoff.delay(attempt)) => {}
                () = refuse_until_unused(&mut self.settles) => return None,
            }
            match self.connect().await {
                Ok(stream) => return Some(stream),
                Err(error) if error.is_transient() => attempt = (attempt + 1).min(16),
                Err(error) => {
                    tracing::warn!(queue = %self.open.queue, %error, "settle stream refused");
                    return None;
                }
            }
        }
    }

    /// Serves one stream until it fails or nothing can settle on it.
    async fn serve(&mut self, stream: &mut Stream) -> Ended {
        // Settles sent and not answered yet; the server answers them in order.
        let mut awaiting: VecDeque<oneshot::Sender<Answer>> = VecDeque::new();
        let ended = loop {
            tokio::select! {
                response = stream.responses.message() => match response {
                    Ok(Some(v1::ConsumeResponse {
                        kind: Some(consume_response::Kind::Settled(result)),
                    })) => {
                        if let Some(reply) = awaiting.pop_front() {
                            let answer = if result.ok {
                                Answer::Done
                            } else {
                                Answer::AskDirectly
                            };
                            let _ = reply.send(answer);
                        }
                    }
                    // With no credit granted the server sends no deliveries.
                    Ok(Some(_)) => {}
                    Ok(None) => break Ended::Failed(ClientError::Server {
                        code: tonic::Code::Unavailable,
                        message: "the server ended the settle stream".into(),
                        kind: None,
                    }),
                    Err(status) => break Ended::Failed(status.into()),
                },
                settle = self.settles.recv() => {
                    let Some(Settle { settle, reply }) = settle else {
                        break Ended::Unused;
                    };
                    let request = v1::ConsumeRequest {
                        kind: Some(consume_request::Kind::Settle(settle)),
                    };
                    if stream.requests.send(request).is_ok() {
                        awaiting.push_back(reply);
                    } else {
                        let _ = reply.send(Answer::AskDirectly);
                    }
                }
            }
        };
        // The stream that would have answered is gone: the settlers ask directly.
        for reply in awaiting {
            let _ = reply.send(Answer::AskDirectly);
        }
        ended
    }
}

/// Answers every settle with [`Answer::AskDirectly`] (there is no stream to send it on)
/// until nothing can settle any more.
async fn refuse_until_unused(settles: &mut mpsc::UnboundedReceiver<Settle>) {
    while let Some(Settle { reply, .. }) = settles.recv().await {
        let _ = reply.send(Answer::AskDirectly);
    }
}
