//! Publish to queues and topics; receive, and settle what was received.

use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use bytes::Bytes;
use ferry_broker::{Acked, Broker, MessageId, Nacked, OutgoingMessage};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use super::error::ApiError;
use super::message::{self, Delivery};
use super::path::ApiPath;
use super::{Shared, parse};
use crate::auth::Action;
use crate::convert::{self, opt_ms};
use crate::metrics::Meters;
use crate::settle::Deliveries;

type Reply<T> = Result<T, ApiError>;

/// The error a delivery records when its receiver went away before the reply was sent.
const DISCONNECTED: &str = "HTTP client disconnected before the deliveries were sent";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Publish {
    messages: Vec<message::OutgoingMessage>,
}

#[derive(Serialize)]
pub struct Published {
    ids: Vec<String>,
}

/// Every message of the batch, or the first refusal: nothing reaches the broker then.
fn batch(raw: Vec<message::OutgoingMessage>) -> Result<Vec<OutgoingMessage>, ApiError> {
    raw.into_iter()
        .enumerate()
        .map(|(i, m)| {
            let proto = m.into_proto(i)?;
            convert::outgoing(proto).map_err(|e| {
                let mut e = ApiError::from(e);
                e.message = format!("messages[{i}]: {}", e.message);
                e
            })
        })
        .collect()
}

pub async fn publish(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath(queue): ApiPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> Reply<Json<Published>> {
    let who = s.allow(&headers, Action::Publish, &queue)?;
    let r: Publish = parse(&body?)?;
    s.gate.publish(who, &queue, r.messages.len())?;
    let batch = batch(r.messages)?;
    let started = Instant::now();
    let ids = s.broker.publish_batch(&queue, batch).await?;
    s.meters.published("queue", &queue, started.elapsed());
    Ok(Json(Published {
        ids: ids.iter().map(MessageId::to_string).collect(),
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PublishToTopic {
    messages: Vec<message::OutgoingMessage>,
    partition: Option<u32>,
    producer_id: Option<String>,
    first_sequence: Option<u64>,
}

#[derive(Serialize)]
pub struct Position {
    partition: u32,
    offset: u64,
}

#[derive(Serialize)]
pub struct PublishedToTopic {
    positions: Vec<Position>,
}

pub async fn publish_to_topic(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath(topic): ApiPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> Reply<Json<PublishedToTopic>> {
    let who = s.allow(&headers, Action::Publish, &topic)?;
    let r: PublishToTopic = parse(&body?)?;
    s.gate.publish(who, &topic, r.messages.len())?;
    let batch = batch(r.messages)?;
    let b = &s.broker;
    let started = Instant::now();
    let positions = match (r.producer_id, r.partition, r.first_sequence) {
        (Some(producer), Some(partition), Some(first)) => {
            b.publish_idempotent(&topic, partition, &producer, first, batch)
                .await?
        }
        (Some(_), _, _) => {
            return Err(ApiError::bad_request(
                "missing_field",
                "partition / first_sequence: an idempotent producer publishes to one \
                 partition with sequence numbers",
            ));
        }
        (None, _, Some(_)) => {
            return Err(ApiError::bad_request(
                "missing_field",
                "producer_id: sequence numbers belong to an idempotent producer",
            ));
        }
        (None, Some(partition), None) => b.publish_to_partition(&topic, partition, batch).await?,
        (None, None, None) => b.publish_to_topic(&topic, batch).await?,
    };
    s.meters.published("topic", &topic, started.elapsed());
    Ok(Json(PublishedToTopic {
        positions: positions
            .into_iter()
            .map(|p| Position {
                partition: p.partition,
                offset: p.offset,
            })
            .collect(),
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Receive {
    consumer: String,
    max: Option<u32>,
    lease_ms: Option<u64>,
    wait_ms: Option<u64>,
}

#[derive(Serialize)]
pub struct Received {
    deliveries: Vec<Delivery>,
}

/// Receives in a task of its own: if the client goes away mid-poll, the handler is
/// dropped but the receive still ends, and what it leased is given back at once instead
/// of waiting out its lease.
async fn receive_detached(
    broker: Broker,
    meters: Arc<Meters>,
    queue: String,
    r: Receive,
) -> Reply<Vec<ferry_broker::ReceivedMessage>> {
    let max = convert::receive_max(r.max)?;
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        let wait = convert::receive_wait(r.wait_ms);
        let got = broker
            .receive(&queue, &r.consumer, max, opt_ms(r.lease_ms), wait)
            .await;
        if let Err(Ok(got)) = tx.send(got) {
            let deliveries = Deliveries::of(&broker, &meters, &queue);
            for d in got {
                deliveries.release(d.seq, d.token.0, DISCONNECTED).await;
            }
        }
    });
    match rx.await {
        Ok(got) => Ok(got?),
        Err(_) => Err(ApiError::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the receive task ended without an answer",
        )),
    }
}

pub async fn receive(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath(queue): ApiPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> Reply<Json<Received>> {
    s.allow_read(&headers, &queue)?;
    let r: Receive = parse(&body?)?;
    if r.consumer.is_empty() {
        // Prefetch caps, exclusive ordering and dead letters name the consumer.
        return Err(ApiError::bad_request(
            "missing_field",
            "consumer: name the consumer, e.g. \"billing-worker-1\"",
        ));
    }
    let got = receive_detached(s.broker.clone(), Arc::clone(&s.meters), queue.clone(), r).await?;
    s.meters.delivered(&queue, &got);
    Ok(Json(Received {
        deliveries: got
            .into_iter()
            .map(|d| convert::delivery(d).into())
            .collect(),
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Ack {
    token: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Nack {
    token: u64,
    delay_ms: Option<u64>,
    error: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Reject {
    token: u64,
    reason: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Extend {
    token: u64,
    by_ms: u64,
}

/// The answer to a settle: which fields are set depends on the outcome.
#[derive(Serialize, Default)]
pub struct Settled {
    #[serde(skip_serializing_if = "Option::is_none")]
    already_settled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_at_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dead_lettered: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_until_ms: Option<i64>,
}

/// `ack`, `nack`, `reject` or `extend` of delivery `seq`.
pub async fn settle(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath((queue, seq, outcome)): ApiPath<(String, String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Reply<Json<Settled>> {
    s.allow_read(&headers, &queue)?;
    let seq: u64 = seq.parse().map_err(|_| {
        ApiError::bad_request(
            "bad_path",
            format!("{seq:?} is not a delivery's seq (a non-negative integer)"),
        )
    })?;
    let body = body?;
    let deliveries = Deliveries::of(&s.broker, &s.meters, &queue);
    let mut reply = Settled::default();
    match outcome.as_str() {
        "ack" => {
            let r: Ack = parse(&body)?;
            let acked = deliveries.ack(seq, r.token).await?;
            reply.already_settled = Some(acked == Acked::AlreadySettled);
        }
        "nack" => {
            let r: Nack = parse(&body)?;
            let nacked = deliveries
                .nack(seq, r.token, r.delay_ms, r.error.as_deref())
                .await?;
            match nacked {
                Nacked::RetryAt(at) => reply.retry_at_ms = Some(at),
                Nacked::DeadLettered(reason) => reply.dead_lettered = Some(reason.as_str()),
            }
        }
        "reject" => {
            let r: Reject = parse(&body)?;
            deliveries.reject(seq, r.token, &r.reason).await?;
        }
        "extend" => {
            let r: Extend = parse(&body)?;
            reply.lease_until_ms = Some(deliveries.extend(seq, r.token, r.by_ms).await?);
        }
        other => {
            return Err(ApiError::new(
                axum::http::StatusCode::NOT_FOUND,
                "no_route",
                format!("{other:?} is not a settle outcome: use ack, nack, reject or extend"),
            ));
        }
    }
    Ok(Json(reply))
}
