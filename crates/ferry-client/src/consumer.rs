//! A streaming consumer: one `Consume` stream with `prefetch` credit, whose deliveries are
//! handed out as [`Delivery`] values. While a delivery is held its lease is extended (when
//! half of it is left); settling it gives the stream one credit back. Dropping a delivery
//! unsettled nacks it (redelivery at once, counted as an attempt).
//!
//! When the connection breaks, the server gives the stream's unsettled deliveries back to
//! the queue, and the consumer reconnects with backoff and goes on. Nothing acknowledged is
//! lost: an ack either reached the server (and is durable) or returns an error.
//!
//! What becomes of the dead stream's deliveries:
//! - handed out before the failure: settling one fails with `FAILED_PRECONDITION` ("the
//!   connection was lost after this delivery").
//! - received but not yet handed out: dropped as soon as the failure is seen, never handed
//!   out. The server gives them to another consumer, or to this one on its next stream, so
//!   handing one out would let the application work on a message whose next one under the
//!   same ordering key may already have been delivered and acked elsewhere. They are counted
//!   by [`Consumer::stale_dropped`] and logged at debug level.
//!
//! Each delivery dropped that way (waiting for `next`, or still queued in the session when
//! its stream failed) reached this process, and the server counts it as an attempt:
//! [`Consumer::take_dropped`] hands out its id and attempt number, so an application that
//! keeps a history of what it received can account for every attempt the server spent.
//!
//! [`Consumer::stream_failures`] counts the streams that failed, as a watch the application
//! can await (a health check, say).
//!
//! [`SettleStream`] is the same session opened without credit: it never delivers, and
//! settles (or extends) deliveries fetched with the unary [`Client::receive`] by seq and
//! lease token — the server checks a settle by those, not by the stream that delivered —
//! so acks in flight together share one round trip and one journal write. It lives while
//! any clone of it does, and reconnects with backoff meanwhile; a settle it cannot answer
//! (the stream is down, broke before the answer, or the server refused it) returns an
//! error, after which the caller may ask again with the unary call.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferry_proto::v1::{self, consume_request, consume_response, settle};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnboundedReceiverStream;

use crate::error::{ClientError, Result};
use crate::{Client, RetryPolicy};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConsumerConfig {
    /// Most deliveries held unsettled at once.
    pub prefetch: u32,
    /// The lease of each delivery (the queue's when `None`).
    pub lease: Option<Duration>,
    /// Extend the leases of held deliveries.
    pub auto_extend: bool,
    /// Backoff between reconnects.
    pub reconnect: RetryPolicy,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            prefetch: 64,
            lease: None,
            auto_extend: true,
            reconnect: RetryPolicy::default(),
        }
    }
}

/// What a [`Delivery`] or a [`SettleStream`] asks of the stream.
enum Command {
    Settle {
        /// The stream the delivery came from; `None` for any (a [`SettleStream`]'s).
        generation: Option<u64>,
        seq: u64,
        token: u64,
        outcome: settle::Outcome,
        reply: Option<oneshot::Sender<Result<()>>>,
    },
}

/// Most dropped deliveries kept for [`Consumer::take_dropped`]: an application that never
/// takes them must not grow without bound, so the oldest go first.
const MAX_DROPPED_KEPT: usize = 4096;

/// A delivery that reached this consumer on a stream that then failed, and was dropped
/// instead of handed out (see the module docs). The server counted it as an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedDelivery {
    pub id: String,
    pub seq: u64,
    /// The delivery's attempt number (1 for the first delivery).
    pub attempt: u32,
}

/// The dropped deliveries not yet taken, shared by the consumer and its session.
#[derive(Clone, Default)]
struct DroppedLog(Arc<Mutex<VecDeque<DroppedDelivery>>>);

impl DroppedLog {
    fn push(&self, message: &v1::Delivery) {
        let mut kept = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if kept.len() == MAX_DROPPED_KEPT {
            kept.pop_front();
        }
        kept.push_back(DroppedDelivery {
            id: message.id.clone(),
            seq: message.seq,
            attempt: message.delivery,
        });
    }

    fn take(&self) -> Vec<DroppedDelivery> {
        let mut kept = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        kept.drain(..).collect()
    }
}

/// A message received under a lease; settle it with `ack`, `nack` or `reject`.
pub struct Delivery {
    pub message: v1::Delivery,
    generation: u64,
    commands: mpsc::Sender<Command>,
    settled: bool,
}

impl Delivery {
    pub fn payload(&self) -> &[u8] {
        &self.message.payload
    }
    pub fn id(&self) -> &str {
        &self.message.id
    }
    /// 1 for the first delivery.
    pub fn attempt(&self) -> u32 {
        self.message.delivery
    }

    async fn settle(mut self, outcome: settle::Outcome) -> Result<()> {
        self.settled = true;
        let (reply, answered) = oneshot::channel();
        self.commands
            .send(Command::Settle {
                generation: Some(self.generation),
                seq: self.message.seq,
                token: self.message.token,
                outcome,
                reply: Some(reply),
            })
            .await
            .map_err(|_| ClientError::Closed)?;
        answered.await.map_err(|_| ClientError::Closed)?
    }

    /// Done with it: it is not delivered again. Returns once the ack is durable.
    pub async fn ack(self) -> Result<()> {
        self.settle(settle::Outcome::Ack(true)).await
    }

    /// A failed attempt: redelivered after `delay` (the queue's backoff when `None`), or
    /// dead-lettered when out of attempts.
    pub async fn nack(self, delay: Option<Duration>, error: Option<&str>) -> Result<()> {
        self.settle(settle::Outcome::Nack(settle::Nack {
            delay_ms: delay.map(|d| d.as_millis() as u64),
            error: error.map(str::to_owned),
        }))
        .await
    }

    /// A permanent failure: dead-lettered now.
    pub async fn reject(self, reason: &str) -> Result<()> {
        self.settle(settle::Outcome::Reject(reason.to_owned()))
            .await
    }
}

impl Drop for Delivery {
    fn drop(&mut self) {
        if !self.settled {
            // Not awaited: the stream settles it when it gets there.
            let _ = self.commands.try_send(Command::Settle {
                generation: Some(self.generation),
                seq: self.message.seq,
                token: self.message.token,
                outcome: settle::Outcome::Nack(settle::Nack {
                    delay_ms: Some(0),
                    error: Some("dropped unsettled by the client".into()),
                }),
                reply: None,
            });
        }
    }
}

/// A stream of deliveries from one queue; see the module docs.
pub struct Consumer {
    deliveries: mpsc::Receiver<Result<Delivery>>,
    /// The oldest stream generation not known to have failed: deliveries of an older one
    /// still waiting here were given back by the server when that stream ended, and are
    /// dropped instead of handed out.
    current: Arc<AtomicU64>,
    /// Deliveries dropped that way.
    stale_dropped: u64,
    /// Every delivery dropped (here or by the session), until taken.
    dropped: DroppedLog,
    failures: watch::Receiver<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl Consumer {
    pub(crate) async fn open(
        client: Client,
        queue: String,
        name: String,
        config: ConsumerConfig,
    ) -> Result<Consumer> {
        let (out, deliveries) = mpsc::channel(config.prefetch.max(1) as usize);
        let (commands, command_rx) = mpsc::channel(1024);
        let current = Arc::new(AtomicU64::new(0));
        let (failed, failures) = watch::channel(0);
        let dropped = DroppedLog::default();
        let mut session = Session {
            dropped: dropped.clone(),
            current: Arc::clone(&current),
            failed,
            client,
            queue,
            name,
            config,
            out,
            mode: Mode::Deliveries { commands },
            command_rx,
            generation: 0,
        };
        // The first open is checked here: a missing queue fails `consumer()` itself.
        let stream = session.connect().await?;
        let task = tokio::spawn(session.run(stream));
        Ok(Consumer {
            deliveries,
            current,
            stale_dropped: 0,
            dropped,
            failures,
            task,
        })
    }

    /// The next delivery; `None` once the consumer is closed. An error says the stream
    /// failed for good (the queue was deleted, say). Only deliveries of a stream not known
    /// to have failed are handed out (see the module docs).
    pub async fn next(&mut self) -> Option<Result<Delivery>> {
        loop {
            match self.deliveries.recv().await? {
                Ok(mut stale) if stale.generation < self.current.load(Ordering::Acquire) => {
                    stale.settled = true; // nothing to give back: the server did
                    self.stale_dropped += 1;
                    self.dropped.push(&stale.message);
                    tracing::debug!(
                        id = %stale.message.id,
                        attempt = stale.message.delivery,
                        "dropped a delivery of a failed consume stream; the server redelivers it"
                    );
                }
                other => return Some(other),
            }
        }
    }

    /// How many deliveries were received on a stream that then failed, and dropped instead
    /// of handed out: the server delivers each of them again.
    pub fn stale_dropped(&self) -> u64 {
        self.stale_dropped
    }

    /// The deliveries dropped since the last call, oldest first: the ones `next` dropped
    /// (counted by [`Consumer::stale_dropped`]) and the ones still queued in the session
    /// when their stream failed. Each reached this process and counts as an attempt on
    /// the server; the server delivers the message again while attempts remain.
    pub fn take_dropped(&mut self) -> Vec<DroppedDelivery> {
        self.dropped.take()
    }

    /// The number of consume streams that failed so far. It changes as soon as a failure is
    /// seen, before the reconnect: from then on no delivery of the failed stream is handed
    /// out.
    pub fn stream_failures(&self) -> watch::Receiver<u64> {
        self.failures.clone()
    }

    /// Stops receiving; held deliveries can still be settled until they are dropped.
    pub fn close(self) {
        self.task.abort();
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A consumer's settle stream: see the module docs. Clones share the stream.
#[derive(Clone)]
pub struct SettleStream {
    commands: mpsc::Sender<Command>,
}

impl SettleStream {
    pub(crate) async fn open(client: Client, queue: String, name: String) -> Result<SettleStream> {
        // Nothing is delivered, so nothing reads deliveries.
        let (out, _) = mpsc::channel(1);
        let (commands, command_rx) = mpsc::channel(1024);
        let (failed, _) = watch::channel(0);
        let mut session = Session {
            dropped: DroppedLog::default(),
            current: Arc::new(AtomicU64::new(0)),
            failed,
            client,
            queue,
            name,
            // Nothing is held here to extend: the settlers extend their own leases.
            config: ConsumerConfig {
                auto_extend: false,
                ..ConsumerConfig::default()
            },
            out,
            mode: Mode::SettlesOnly,
            command_rx,
            generation: 0,
        };
        // The first open is checked here: a missing queue fails at once.
        let stream = session.connect().await?;
        tokio::spawn(session.run(stream));
        Ok(SettleStream { commands })
    }

    /// Settles (or, with `ExtendMs`, extends) the delivery `seq` held under `token`;
    /// returns once the server answered. An error says the stream could not settle it:
    /// see the module docs.
    pub async fn settle(&self, seq: u64, token: u64, outcome: settle::Outcome) -> Result<()> {
        let (reply, answered) = oneshot::channel();
        self.commands
            .send(Command::Settle {
                generation: None,
                seq,
                token,
                outcome,
                reply: Some(reply),
            })
            .await
            .map_err(|_| ClientError::Closed)?;
        answered.await.map_err(|_| ClientError::Closed)?
    }
}

/// Whether a session streams deliveries by credit or only settles.
enum Mode {
    /// Holds a sender for the deliveries it hands out; the [`Consumer`] ends the session.
    Deliveries { commands: mpsc::Sender<Command> },
    /// Opened without credit; ends when the last [`SettleStream`] is dropped.
    SettlesOnly,
}

/// Why serving a stream stopped.
enum Ended {
    /// Nothing can settle on the session any more.
    Unused,
    Failed(ClientError),
}

struct Open {
    /// Unbounded, so the loop that reads answers never waits to send: credit bounds what a
    /// consumer sends, and a settle stream's settlers wait for their answers.
    requests: mpsc::UnboundedSender<v1::ConsumeRequest>,
    responses: tonic::Streaming<v1::ConsumeResponse>,
}

/// A held delivery's lease, as this side tracks it.
struct Held {
    token: u64,
    lease: Duration,
    until: Instant,
}

/// What a settle sent on the stream waits for (answers come in order).
enum Awaiting {
    Settle {
        seq: u64,
        reply: Option<oneshot::Sender<Result<()>>>,
    },
    Extend {
        seq: u64,
    },
}

struct Session {
    client: Client,
    queue: String,
    name: String,
    config: ConsumerConfig,
    out: mpsc::Sender<Result<Delivery>>,
    mode: Mode,
    command_rx: mpsc::Receiver<Command>,
    current: Arc<AtomicU64>,
    /// Where the deliveries queued in `ready` when their stream failed are reported.
    dropped: DroppedLog,
    /// Counts the streams that failed; see [`Consumer::stream_failures`].
    failed: watch::Sender<u64>,
    /// Which stream the deliveries came from: one of an earlier stream was given back by
    /// the server when that stream ended.
    generation: u64,
}

fn request(kind: consume_request::Kind) -> v1::ConsumeRequest {
    v1::ConsumeRequest { kind: Some(kind) }
}

/// The answer to a settle of a delivery from a stream that failed since.
fn lost_after_delivery() -> ClientError {
    ClientError::Server {
        code: tonic::Code::FailedPrecondition,
        message:
            "the connection was lost after this delivery; the server gave it back to the queue"
                .into(),
        kind: None,
        missing: None,
    }
}

/// Answers every settle while there is no stream to send it on, until nothing can settle
/// any more.
async fn refuse_until_unused(commands: &mut mpsc::Receiver<Command>) {
    while let Some(Command::Settle {
        generation, reply, ..
    }) = commands.recv().await
    {
        let error = match generation {
            Some(_) => lost_after_delivery(),
            None => ClientError::Server {
                code: tonic::Code::Unavailable,
                message: "the settle stream is down; reconnecting".into(),
                kind: None,
                missing: None,
            },
        };
        if let Some(reply) = reply {
            let _ = reply.send(Err(error));
        }
    }
}

impl Session {
    async fn connect(&mut self) -> Result<Open> {
        let (requests, rx) = mpsc::unbounded_channel();
        let open = v1::ConsumeOpen {
            queue: self.queue.clone(),
            consumer: self.name.clone(),
            lease_ms: self.config.lease.map(|l| l.as_millis() as u64),
        };
        requests
            .send(request(consume_request::Kind::Open(open)))
            .map_err(|_| ClientError::Closed)?;
        if let Mode::Deliveries { .. } = self.mode {
            requests
                .send(request(consume_request::Kind::Credit(
                    self.config.prefetch.max(1),
                )))
                .map_err(|_| ClientError::Closed)?;
        }
        let responses = self
            .client
            .consumer_client()
            .consume(UnboundedReceiverStream::new(rx))
            .await?
            .into_inner();
        self.generation += 1;
        self.current.store(self.generation, Ordering::Release);
        Ok(Open {
            requests,
            responses,
        })
    }

    async fn run(mut self, mut stream: Open) {
        loop {
            let error = match self.serve(&mut stream).await {
                Ended::Unused => return,
                Ended::Failed(error) => error,
            };
            // The server gives a dead stream's deliveries back at once (another consumer
            // may get them now), so the ones still waiting for `next` must not be handed
            // out even while the reconnect is pending: the next stream's generation is the
            // oldest that counts from here on.
            self.current.store(self.generation + 1, Ordering::Release);
            self.failed.send_modify(|failures| *failures += 1);
            // Permanent failures end the consumer; others reconnect.
            if !error.is_transient() {
                if let Mode::SettlesOnly = self.mode {
                    // Settles go to the unary calls from now on, which say what is wrong.
                    tracing::warn!(queue = %self.queue, %error, "settle stream refused");
                }
                let _ = self.out.send(Err(error)).await;
                return;
            }
            tracing::warn!(queue = %self.queue, %error, "consume stream lost; reconnecting");
            let mut attempt = 0;
            stream = loop {
                tokio::select! {
                    () = tokio::time::sleep(self.config.reconnect.delay(attempt)) => {}
                    () = refuse_until_unused(&mut self.command_rx) => return,
                }
                match self.connect().await {
                    Ok(stream) => break stream,
                    Err(error) if error.is_transient() => attempt = (attempt + 1).min(16),
                    Err(error) => {
                        let _ = self.out.send(Err(error)).await;
                        return;
                    }
                }
            };
        }
    }

    /// Serves one stream until it fails or nothing can settle on it; returns why.
    async fn serve(&mut self, stream: &mut Open) -> Ended {
        let mut held: HashMap<u64, Held> = HashMap::new();
        let mut awaiting: VecDeque<Awaiting> = VecDeque::new();
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        let generation = self.generation;
        // Received and not yet in `out`; bounded by the stream's credit.
        let mut ready: VecDeque<Delivery> = VecDeque::new();
        let ended = loop {
            tokio::select! {
                permit = self.out.reserve(), if !ready.is_empty() => {
                    let Ok(permit) = permit else { break ClientError::Closed.into() };
                    permit.send(Ok(ready.pop_front().expect("not empty")));
                }
                response = stream.responses.next() => {
                    let kind = match response {
                        Some(Ok(v1::ConsumeResponse { kind: Some(kind) })) => kind,
                        Some(Ok(_)) => continue,
                        Some(Err(status)) => break ClientError::from(status).into(),
                        None => break ClientError::Server {
                            code: tonic::Code::Unavailable,
                            message: "the server ended the consume stream".into(),
                            kind: None,
                            missing: None,
                        }.into(),
                    };
                    match kind {
                        consume_response::Kind::Delivery(message) => {
                            // Only a consumer grants credit, so only a consumer is delivered to.
                            let Mode::Deliveries { commands } = &self.mode else { continue };
                            let now_ms = std::time::SystemTime::now()
                                .duration_since(std::time::UNIX_EPOCH)
                                .map_or(0, |d| d.as_millis() as i64);
                            let lease = Duration::from_millis(
                                (message.lease_until_ms - now_ms).max(1000) as u64,
                            );
                            held.insert(message.seq, Held {
                                token: message.token,
                                lease,
                                until: Instant::now() + lease,
                            });
                            let delivery = Delivery {
                                message,
                                generation,
                                commands: commands.clone(),
                                settled: false,
                            };
                            // Queued here rather than sent at once: a full channel (deliveries
                            // of a failed stream still waiting in it, say) must not stop this
                            // loop from answering settles the application is awaiting.
                            ready.push_back(delivery);
                        }
                        consume_response::Kind::Settled(result) => {
                            match awaiting.pop_front() {
                                Some(Awaiting::Settle { seq, reply }) => {
                                    held.remove(&seq);
                                    let outcome = if result.ok {
                                        Ok(())
                                    } else {
                                        Err(ClientError::Server {
                                            code: tonic::Code::FailedPrecondition,
                                            message: result.error,
                                            kind: None,
                                            missing: None,
                                        })
                                    };
                                    if let Some(reply) = reply {
                                        let _ = reply.send(outcome);
                                    }
                                    if let Mode::Deliveries { .. } = self.mode {
                                        let credit = request(consume_request::Kind::Credit(1));
                                        if stream.requests.send(credit).is_err() {
                                            break ClientError::Closed.into();
                                        }
                                    }
                                }
                                Some(Awaiting::Extend { seq }) if !result.ok => {
                                    // The lease is gone; the settle will say so.
                                    held.remove(&seq);
                                }
                                Some(Awaiting::Extend { .. }) => {}
                                None => {}
                            }
                        }
                    }
                }
                command = self.command_rx.recv() => {
                    let Some(Command::Settle { generation: of, seq, token, outcome, reply }) = command
                    else {
                        break Ended::Unused;
                    };
                    if of.is_some_and(|of| of != generation) {
                        if let Some(reply) = reply {
                            let _ = reply.send(Err(lost_after_delivery()));
                        }
                        continue;
                    }
                    let settle = v1::Settle { seq, token, outcome: Some(outcome) };
                    awaiting.push_back(Awaiting::Settle { seq, reply });
                    if stream.requests.send(request(consume_request::Kind::Settle(settle))).is_err() {
                        break ClientError::Closed.into();
                    }
                }
                _ = tick.tick(), if self.config.auto_extend => {
                    let now = Instant::now();
                    for (&seq, h) in held.iter_mut() {
                        if h.until.saturating_duration_since(now) < h.lease / 2 {
                            h.until = now + h.lease;
                            let settle = v1::Settle {
                                seq,
                                token: h.token,
                                outcome: Some(settle::Outcome::ExtendMs(h.lease.as_millis() as u64)),
                            };
                            awaiting.push_back(Awaiting::Extend { seq });
                            if stream.requests.send(request(consume_request::Kind::Settle(settle))).is_err() {
                                awaiting.pop_back();
                            }
                        }
                    }
                }
            }
        };
        // Never handed out, and the server gives a dead stream's deliveries back itself; each
        // is reported, as the server counted it as an attempt.
        for delivery in ready.iter_mut() {
            delivery.settled = true;
            self.dropped.push(&delivery.message);
        }
        drop(ready);
        // Settles that never got an answer fail: the stream that would answer is gone.
        for waiting in awaiting {
            if let Awaiting::Settle {
                reply: Some(reply), ..
            } = waiting
            {
                let _ = reply.send(Err(ClientError::Server {
                    code: tonic::Code::Unavailable,
                    message: "the connection was lost before the server answered".into(),
                    kind: None,
                    missing: None,
                }));
            }
        }
        ended
    }
}

impl From<ClientError> for Ended {
    fn from(error: ClientError) -> Self {
        Ended::Failed(error)
    }
}
