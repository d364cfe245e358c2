//! One consumer's `Consume` stream, kept by a task: deliveries arrive by credit, settles
//! go out on the stream and their answers come back in order. The server settles acks that
//! arrive together with one journal append, so many acks in flight share one round trip
//! and one fsync instead of one unary call each.
//!
//! The task owns the stream and lives while anything can still use it — the consumer or
//! a delivery not yet settled. When the last of them is gone it ends the stream, and the
//! server gives back whatever the stream still holds (deliveries that arrived after the
//! consumer closed, deliveries dropped unsettled). A delivery handed out before the
//! consumer closed therefore stays settleable after it: the stream is still there.
//!
//! When the connection breaks the server gives the stream's deliveries back; the task
//! reconnects with backoff and opens a new stream (a new *generation*). A settle the
//! stream cannot answer — its delivery came on an earlier stream, the stream broke before
//! the answer, or the server refused it (its answer on the stream carries text, not a
//! status code) — is answered [`Answer::AskDirectly`]: the settler asks again with the
//! unary call, whose status code the SDK maps onto its typed errors.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ferry_client::proto::{self as v1, consume_request, consume_response};
use ferry_client::{Client, ClientError, RetryPolicy};
use tokio::sync::{mpsc, oneshot};

/// What a consumer or a delivery asks of the stream.
pub(super) enum Command {
    /// Lets the server send `n` more deliveries on stream `generation`.
    Credit { generation: u64, n: u32 },
    /// Settles (or extends) a delivery that came on stream `generation`.
    Settle {
        generation: u64,
        settle: v1::Settle,
        reply: oneshot::Sender<Answer>,
    },
}

/// The stream's answer to one settle.
pub(super) enum Answer {
    /// Done, and durable; the new lease deadline for an extend.
    Done { lease_until_ms: Option<i64> },
    /// Not answered here; ask with the unary call (see the module docs).
    AskDirectly,
}

/// What the stream hands to its consumer.
pub(super) enum Event {
    Delivery {
        generation: u64,
        delivery: v1::Delivery,
    },
    /// The stream failed for good (the queue was deleted, the token refused): no more
    /// deliveries.
    Failed(ClientError),
}

/// The ends of a running stream that its consumer keeps.
pub(super) struct Handle {
    pub commands: mpsc::UnboundedSender<Command>,
    pub events: mpsc::UnboundedReceiver<Event>,
    /// The generation of the stream open now, 0 while there is none: a delivery of any
    /// other generation was given back by the server when its stream ended.
    pub live: Arc<AtomicU64>,
}

/// Opens the stream (failing here if the queue is unknown or the call refused) and
/// starts the task that keeps it.
pub(super) async fn open(
    client: Client,
    queue: &str,
    consumer: &str,
    prefetch: u32,
) -> Result<Handle, ClientError> {
    let (commands, command_rx) = mpsc::unbounded_channel();
    let (event_tx, events) = mpsc::unbounded_channel();
    let live = Arc::new(AtomicU64::new(0));
    let mut keeper = Keeper {
        client,
        open: v1::ConsumeOpen {
            queue: queue.to_owned(),
            consumer: consumer.to_owned(),
            lease_ms: None,
        },
        credit: prefetch.max(1),
        commands: command_rx,
        events: event_tx,
        live: Arc::clone(&live),
        generation: 0,
    };
    let stream = keeper.connect().await?;
    tokio::spawn(keeper.run(stream));
    Ok(Handle {
        commands,
        events,
        live,
    })
}

struct Keeper {
    client: Client,
    open: v1::ConsumeOpen,
    /// Credit granted when a stream opens: the consumer's prefetch.
    credit: u32,
    commands: mpsc::UnboundedReceiver<Command>,
    events: mpsc::UnboundedSender<Event>,
    live: Arc<AtomicU64>,
    generation: u64,
}

struct Stream {
    requests: mpsc::UnboundedSender<v1::ConsumeRequest>,
    responses: tonic::Streaming<v1::ConsumeResponse>,
}

/// Why serving a stream stopped.
enum Ended {
    /// Nothing can use the stream any more.
    Unused,
    Failed(ClientError),
}

fn request(kind: consume_request::Kind) -> v1::ConsumeRequest {
    v1::ConsumeRequest { kind: Some(kind) }
}

impl Keeper {
    async fn connect(&mut self) -> Result<Stream, ClientError> {
        let (requests, rx) = mpsc::unbounded_channel();
        let opening = [
            consume_request::Kind::Open(self.open.clone()),
            consume_request::Kind::Credit(self.credit),
        ];
        for kind in opening {
            requests
                .send(request(kind))
                .map_err(|_| ClientError::Closed)?;
        }
        let responses = self.client.consume_stream(rx).await?;
        self.generation += 1;
        self.live.store(self.generation, Ordering::Release);
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
            self.live.store(0, Ordering::Release);
            if !error.is_transient() {
                let _ = self.events.send(Event::Failed(error));
                return;
            }
            // A closed consumer takes no more deliveries: a new stream would only hold
            // some back. Its deliveries still out are settled with the unary calls.
            if self.events.is_closed() {
                return;
            }
            tracing::warn!(queue = %self.open.queue, %error, "consume stream lost; reconnecting");
            stream = match self.reconnect().await {
                Some(stream) => stream,
                None => return,
            };
        }
    }

    /// A new stream after a transient failure, retried with backoff; `None` when nothing
    /// can use one any more (the consumer closed) or the server refuses for good.
    async fn reconnect(&mut self) -> Option<Stream> {
        let backoff = RetryPolicy::default();
        let mut attempt = 0;
        loop {
            tokio::select! {
                () = tokio::time::sleep(backoff.delay(attempt)) => {}
                () = refuse_until_unused(&mut self.commands) => return None,
            }
            if self.events.is_closed() {
                return None;
            }
            match self.connect().await {
                Ok(stream) => return Some(stream),
                Err(error) if error.is_transient() => attempt = (attempt + 1).min(16),
                Err(error) => {
                    let _ = self.events.send(Event::Failed(error));
                    return None;
                }
            }
        }
    }

    /// Serves one stream until it fails or nothing can use it.
    async fn serve(&mut self, stream: &mut Stream) -> Ended {
        let generation = self.generation;
        // Settles sent and not answered yet; the server answers them in order.
        let mut awaiting: VecDeque<oneshot::Sender<Answer>> = VecDeque::new();
        let ended = loop {
            tokio::select! {
                response = stream.responses.message() => match response {
                    Ok(Some(v1::ConsumeResponse { kind: Some(kind) })) => match kind {
                        consume_response::Kind::Delivery(delivery) => {
                            // A closed consumer no longer takes deliveries; those stay
                            // with this stream, which gives them back when it ends.
                            let _ = self.events.send(Event::Delivery { generation, delivery });
                        }
                        consume_response::Kind::Settled(result) => {
                            if let Some(reply) = awaiting.pop_front() {
                                let answer = if result.ok {
                                    Answer::Done { lease_until_ms: result.lease_until_ms }
                                } else {
                                    Answer::AskDirectly
                                };
                                let _ = reply.send(answer);
                            }
                        }
                    },
                    Ok(Some(_)) => {}
                    Ok(None) => break Ended::Failed(ClientError::Server {
                        code: tonic::Code::Unavailable,
                        message: "the server ended the consume stream".into(),
                    }),
                    Err(status) => break Ended::Failed(status.into()),
                },
                command = self.commands.recv() => match command {
                    None => break Ended::Unused,
                    Some(Command::Credit { generation: of, n }) => {
                        // Credit taken on an earlier stream died with it; a new stream
                        // starts with the whole prefetch.
                        if of == generation {
                            let _ = stream.requests.send(request(consume_request::Kind::Credit(n)));
                        }
                    }
                    Some(Command::Settle { generation: of, settle, reply }) => {
                        let sent = of == generation
                            && stream
                                .requests
                                .send(request(consume_request::Kind::Settle(settle)))
                                .is_ok();
                        if sent {
                            awaiting.push_back(reply);
                        } else {
                            let _ = reply.send(Answer::AskDirectly);
                        }
                    }
                },
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
/// until nothing can send commands any more.
async fn refuse_until_unused(commands: &mut mpsc::UnboundedReceiver<Command>) {
    while let Some(command) = commands.recv().await {
        if let Command::Settle { reply, .. } = command {
            let _ = reply.send(Answer::AskDirectly);
        }
    }
}
