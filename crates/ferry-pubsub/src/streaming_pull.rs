//! StreamingPull: one bidirectional stream per subscriber connection. The client's first
//! request names the subscription, the stream's ack deadline and its flow control; later
//! ones carry acks and deadline changes. The server sends deliveries while the client's
//! outstanding messages and bytes stay under its limits.
//!
//! Two tasks serve a stream: one reads the client's requests and settles them, one leases
//! and sends. They share the outstanding deliveries; a settle, or a lease that ended,
//! frees room and wakes the sender. Clients also settle a stream's deliveries with the
//! unary Acknowledge and ModifyAckDeadline (Google's Python client does, without
//! exactly-once delivery), so those tell the subscription's open streams too
//! ([`OpenStreams`]). The sender never drops a receive half-way (a receive
//! cancelled after leasing would hide its messages until their leases end): it waits
//! with a stop signal the broker checks, raised when the stream or the server closes.
//!
//! On a subscription with exactly-once delivery, each request's acks and deadline changes
//! are confirmed on the stream: which ack ids took effect and which were invalid (their
//! leases had ended), as Pub/Sub's `acknowledge_confirmation` and
//! `modify_ack_deadline_confirmation`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use ferry_broker::OrderingMode;
use googleapis_tonic_google_pubsub_v1::google::pubsub::v1 as pb;
use tokio::sync::{Notify, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

use crate::settle::{self, Settled};
use crate::status::from_broker;
use crate::subscription_spec::MAX_ACK_DEADLINE;
use crate::{PubSub, convert};

/// Outstanding messages when the client sets no limit (Pub/Sub's clients default to the
/// same), so a stream never leases a whole backlog.
const DEFAULT_MAX_OUTSTANDING: u64 = 1000;
/// The most deliveries one response carries.
const MAX_BATCH: u64 = 100;
/// How long one receive waits before the sender looks at its room again.
const RECEIVE_WAIT: Duration = Duration::from_secs(5);

/// Opens the stream: reads and checks the first request, then starts both tasks.
pub async fn open(
    pubsub: PubSub,
    mut inbound: Streaming<pb::StreamingPullRequest>,
) -> Result<ReceiverStream<Result<pb::StreamingPullResponse, Status>>, Status> {
    let first = inbound
        .message()
        .await?
        .ok_or_else(|| Status::invalid_argument("the stream ended before its first request"))?;
    let (queue, spec) = pubsub.subscription(&first.subscription)?;
    let deadline = match first.stream_ack_deadline_seconds {
        s if (10..=MAX_ACK_DEADLINE.as_secs() as i32).contains(&s) => Duration::from_secs(s as u64),
        s => {
            return Err(Status::invalid_argument(format!(
                "stream_ack_deadline_seconds must be between 10 and 600 (got {s})"
            )));
        }
    };
    let limits = Limits {
        messages: positive(first.max_outstanding_messages).unwrap_or(DEFAULT_MAX_OUTSTANDING),
        bytes: positive(first.max_outstanding_bytes),
    };
    let exactly_once = pubsub.store().get(queue.as_str()).exactly_once;
    pubsub.used(queue.as_str());
    let counts_attempts = crate::subscription_spec::counts_attempts(&spec);
    let stream = Arc::new(Stream {
        pubsub,
        queue: queue.to_string(),
        consumer: consumer_name(&first.client_id),
        counts_attempts,
        deadline,
        limits,
        outstanding: Mutex::default(),
        room: Notify::new(),
        client_done: AtomicBool::new(false),
        closed: Notify::new(),
        properties: pb::streaming_pull_response::SubscriptionProperties {
            exactly_once_delivery_enabled: exactly_once,
            message_ordering_enabled: spec.delivery.ordering == OrderingMode::KeyShared,
        },
    });
    let (tx, rx) = mpsc::channel(4);
    if let Some(confirmation) = stream.settle(&first).await? {
        let _ = tx.send(Ok(confirmation)).await;
    }
    stream.pubsub.open_streams().register(&stream);
    let pubsub = stream.pubsub.clone();
    pubsub.spawn(Arc::clone(&stream).read(inbound, tx.clone()));
    pubsub.spawn(stream.send(tx));
    Ok(ReceiverStream::new(rx))
}

fn positive(n: i64) -> Option<u64> {
    u64::try_from(n).ok().filter(|n| *n > 0)
}

/// Streams of one client share its id; the broker keys ordered delivery by consumer, so
/// one client's streams are one consumer (the client keeps each key's order itself).
fn consumer_name(client_id: &str) -> String {
    if client_id.is_empty() {
        format!("pubsub-stream-{:016x}", fastrand::u64(..))
    } else {
        format!("pubsub-client-{client_id}")
    }
}

/// The open streams of each subscription, so a unary settle frees the room of the stream
/// that handed the delivery out.
#[derive(Default)]
pub struct OpenStreams(Mutex<HashMap<String, Vec<Weak<Stream>>>>);

impl OpenStreams {
    fn register(&self, stream: &Arc<Stream>) {
        let mut open = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let streams = open.entry(stream.queue.clone()).or_default();
        streams.retain(|s| s.strong_count() > 0);
        streams.push(Arc::downgrade(stream));
    }

    /// Forgets what `queue`'s open streams had outstanding: after a seek those leases no
    /// longer count, and the streams' room should not wait for their deadlines.
    pub fn forget_outstanding(&self, queue: &str) {
        for stream in self.open(queue) {
            stream
                .outstanding
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clear();
            stream.room.notify_one();
        }
    }

    /// Whether a stream is open on `queue`: a subscription in use, whatever its last call.
    pub fn has_open(&self, queue: &str) -> bool {
        !self.open(queue).is_empty()
    }

    fn open(&self, queue: &str) -> Vec<Arc<Stream>> {
        let mut open = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let Some(streams) = open.get_mut(queue) else {
            return Vec::new();
        };
        streams.retain(|s| s.strong_count() > 0);
        streams.iter().filter_map(Weak::upgrade).collect()
    }

    /// Tells `queue`'s open streams what a unary call settled.
    pub fn settled(&self, queue: &str, ack_ids: &[String], settled: &[Settled]) {
        for stream in self.open(queue) {
            stream.record(ack_ids, settled);
        }
    }
}

struct Limits {
    messages: u64,
    bytes: Option<u64>,
}

/// A delivery sent and not yet settled.
struct Outstanding {
    bytes: u64,
    until_ms: i64,
}

pub struct Stream {
    pubsub: PubSub,
    queue: String,
    consumer: String,
    /// Whether deliveries carry `delivery_attempt` (the subscription has a dead-letter
    /// policy).
    counts_attempts: bool,
    deadline: Duration,
    limits: Limits,
    outstanding: Mutex<HashMap<String, Outstanding>>,
    /// Raised when a settle frees room.
    room: Notify,
    /// Set when the client's side ends, then `closed` is raised (its permit is kept until
    /// taken, so a waiter that starts late still sees it).
    client_done: AtomicBool,
    closed: Notify,
    properties: pb::streaming_pull_response::SubscriptionProperties,
}

impl Stream {
    /// Reads the client's requests until its side ends, settling each.
    async fn read(
        self: Arc<Self>,
        mut inbound: Streaming<pb::StreamingPullRequest>,
        tx: mpsc::Sender<Result<pb::StreamingPullResponse, Status>>,
    ) {
        // The client's side ends with its stream, or with an error of the stream's; the
        // server closing ends it too.
        loop {
            let request = tokio::select! {
                message = inbound.message() => match message {
                    Ok(Some(request)) => request,
                    _ => break,
                },
                _ = self.pubsub.closing() => break,
            };
            match self.settle(&request).await {
                Ok(None) => {}
                Ok(Some(confirmation)) => {
                    if tx.send(Ok(confirmation)).await.is_err() {
                        break;
                    }
                }
                Err(status) => {
                    let _ = tx.send(Err(status)).await;
                    break;
                }
            }
        }
        // Deliveries still outstanding keep their leases: they come back when those end,
        // as in Pub/Sub.
        self.client_done.store(true, Ordering::Release);
        self.closed.notify_one();
        self.room.notify_one();
    }

    /// Carries out a request's acks and deadline changes, and updates what is outstanding.
    /// Under exactly-once delivery, answers with their confirmation (when there was any).
    async fn settle(
        &self,
        request: &pb::StreamingPullRequest,
    ) -> Result<Option<pb::StreamingPullResponse>, Status> {
        let broker = self.pubsub.broker();
        if request.modify_deadline_seconds.len() != request.modify_deadline_ack_ids.len() {
            return Err(Status::invalid_argument(
                "modify_deadline_seconds and modify_deadline_ack_ids must be the same length",
            ));
        }
        let acked = settle::acknowledge(broker, &self.queue, &request.ack_ids).await?;
        self.record(&request.ack_ids, &acked);
        let mut modified = Vec::with_capacity(request.modify_deadline_ack_ids.len());
        for (seconds, ack_id) in request
            .modify_deadline_seconds
            .iter()
            .zip(&request.modify_deadline_ack_ids)
        {
            let ids = std::slice::from_ref(ack_id);
            let settled = settle::modify_deadline(broker, &self.queue, ids, *seconds).await?;
            self.record(ids, &settled);
            modified.extend(settled);
        }
        if !self.properties.exactly_once_delivery_enabled
            || (request.ack_ids.is_empty() && request.modify_deadline_ack_ids.is_empty())
        {
            return Ok(None);
        }
        let split = |ids: &[String], settled: &[Settled]| {
            let (invalid, done): (Vec<_>, Vec<_>) = ids
                .iter()
                .zip(settled)
                .partition(|(_, s)| **s == Settled::Stale);
            let ids = |pairs: Vec<(&String, &Settled)>| {
                pairs.into_iter().map(|(id, _)| id.clone()).collect()
            };
            (ids(done), ids(invalid))
        };
        let (acked_ids, invalid_acks) = split(&request.ack_ids, &acked);
        let (modified_ids, invalid_modifies) = split(&request.modify_deadline_ack_ids, &modified);
        Ok(Some(pb::StreamingPullResponse {
            acknowledge_confirmation: (!request.ack_ids.is_empty()).then(|| {
                pb::streaming_pull_response::AcknowledgeConfirmation {
                    ack_ids: acked_ids,
                    invalid_ack_ids: invalid_acks,
                    ..Default::default()
                }
            }),
            modify_ack_deadline_confirmation: (!request.modify_deadline_ack_ids.is_empty()).then(
                || pb::streaming_pull_response::ModifyAckDeadlineConfirmation {
                    ack_ids: modified_ids,
                    invalid_ack_ids: invalid_modifies,
                    ..Default::default()
                },
            ),
            subscription_properties: Some(self.properties),
            ..Default::default()
        }))
    }

    fn record(&self, ack_ids: &[String], settled: &[Settled]) {
        let mut freed = false;
        let mut outstanding = self.outstanding.lock().unwrap_or_else(|e| e.into_inner());
        for (id, s) in ack_ids.iter().zip(settled) {
            match s {
                Settled::Done | Settled::Stale => freed |= outstanding.remove(id).is_some(),
                Settled::Extended(until_ms) => {
                    if let Some(o) = outstanding.get_mut(id) {
                        o.until_ms = *until_ms;
                    }
                }
            }
        }
        drop(outstanding);
        if freed {
            self.room.notify_one();
        }
    }

    /// How many more deliveries fit, after forgetting those whose leases have ended (they
    /// are back in the subscription for anyone).
    fn room(&self) -> u64 {
        let now_ms = self.pubsub.broker().now_ms();
        let mut outstanding = self.outstanding.lock().unwrap_or_else(|e| e.into_inner());
        outstanding.retain(|_, o| o.until_ms > now_ms);
        let count = outstanding.len() as u64;
        let bytes: u64 = outstanding.values().map(|o| o.bytes).sum();
        let by_count = self.limits.messages.saturating_sub(count);
        match self.limits.bytes {
            Some(max) if bytes >= max => 0,
            _ => by_count.min(MAX_BATCH),
        }
    }

    /// Leases and sends while the stream is open and there is room.
    async fn send(self: Arc<Self>, tx: mpsc::Sender<Result<pb::StreamingPullResponse, Status>>) {
        let broker = self.pubsub.broker().clone();
        loop {
            if tx.is_closed()
                || self.pubsub.is_closing()
                || self.client_done.load(Ordering::Acquire)
            {
                break;
            }
            let room = self.room();
            if room == 0 {
                // A settle frees room; a lease ending does too, so look again in a while.
                tokio::select! {
                    _ = self.room.notified() => {}
                    _ = self.closed.notified() => break,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
                continue;
            }
            let stop = async {
                tokio::select! {
                    _ = self.closed.notified() => {}
                    _ = tx.closed() => {}
                    _ = self.pubsub.closing() => {}
                }
            };
            let received = broker
                .receive_unless(
                    &self.queue,
                    &self.consumer,
                    room as usize,
                    Some(self.deadline),
                    Some(RECEIVE_WAIT),
                    stop,
                )
                .await;
            let received = match received {
                Ok(r) => r,
                Err(e) => {
                    let _ = tx.send(Err(from_broker(e))).await;
                    break;
                }
            };
            if received.is_empty() {
                continue;
            }
            let messages: Vec<pb::ReceivedMessage> = received
                .into_iter()
                .map(|m| {
                    let until_ms = m.lease_until_ms;
                    let message = convert::received(m, self.counts_attempts);
                    let mut outstanding =
                        self.outstanding.lock().unwrap_or_else(|e| e.into_inner());
                    outstanding.insert(
                        message.ack_id.clone(),
                        Outstanding {
                            bytes: convert::size(&message),
                            until_ms,
                        },
                    );
                    message
                })
                .collect();
            let response = pb::StreamingPullResponse {
                received_messages: messages,
                subscription_properties: Some(self.properties),
                ..Default::default()
            };
            if tx.send(Ok(response)).await.is_err() {
                // The client went away with these leased: they come back when the leases
                // end.
                break;
            }
        }
    }
}
