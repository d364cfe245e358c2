//! `ferry.v1.Publisher`: publishing to queues (unary and streamed batches) and topics.

use std::sync::Arc;
use std::time::Instant;

use ferry_broker::{Broker, MessageId, OutgoingMessage};
use ferry_proto::v1::{self, publisher_server::Publisher};
use tokio::sync::watch;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::{allow, caller};
use crate::auth::{Action, Caller, Gate};
use crate::convert::{self, ConvertError};
use crate::metrics::Meters;
use crate::status::{from_broker, from_convert, from_refusal};

pub struct PublisherService {
    pub broker: Broker,
    pub gate: Arc<Gate>,
    pub meters: Arc<Meters>,
    /// Turns `true` when the server stops: a publish stream ends before its next batch.
    pub stopping: watch::Receiver<bool>,
}

type Reply<T> = Result<Response<T>, Status>;

fn messages(raw: Vec<v1::OutgoingMessage>) -> Result<Vec<OutgoingMessage>, Status> {
    raw.into_iter()
        .map(convert::outgoing)
        .collect::<Result<_, ConvertError>>()
        .map_err(from_convert)
}

async fn publish(
    broker: &Broker,
    meters: &Meters,
    gate: &Gate,
    who: Caller,
    r: v1::PublishRequest,
) -> Result<v1::PublishResponse, Status> {
    gate.publish(who, &r.queue, r.messages.len())
        .map_err(from_refusal)?;
    let batch_id = r
        .batch_id
        .as_deref()
        .map(MessageId::parse)
        .transpose()
        .map_err(from_broker)?;
    let batch = messages(r.messages)?;
    let started = Instant::now();
    let ids = match batch_id {
        Some(batch_id) => {
            broker
                .publish_batch_idempotent(&r.queue, batch_id, batch)
                .await
        }
        None => broker.publish_batch(&r.queue, batch).await,
    }
    .map_err(from_broker)?;
    meters.published("queue", &r.queue, started.elapsed());
    Ok(v1::PublishResponse {
        // The ULID's own encoder: one 26-byte allocation per id and no pass through the
        // formatting machinery that `Display` takes.
        ids: ids.iter().map(|id| id.as_ulid().to_string()).collect(),
    })
}

#[tonic::async_trait]
impl Publisher for PublisherService {
    async fn publish(&self, r: Request<v1::PublishRequest>) -> Reply<v1::PublishResponse> {
        let who = caller(&self.gate, &r)?;
        Ok(Response::new(
            publish(&self.broker, &self.meters, &self.gate, who, r.into_inner()).await?,
        ))
    }

    type PublishStreamStream = ReceiverStream<Result<v1::PublishResponse, Status>>;

    async fn publish_stream(
        &self,
        r: Request<Streaming<v1::PublishRequest>>,
    ) -> Reply<Self::PublishStreamStream> {
        // The token is the stream's; each batch is checked against its own queue.
        let who = caller(&self.gate, &r)?;
        let mut inbound = r.into_inner();
        // A few batches of slack: the client may send ahead while one is being stored.
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let broker = self.broker.clone();
        let meters = Arc::clone(&self.meters);
        let gate = Arc::clone(&self.gate);
        let mut stopping = self.stopping.clone();
        tokio::spawn(async move {
            loop {
                // A stream a client keeps open between batches would hold a stopping
                // server's shutdown for as long as the client lives: it ends between
                // batches (a batch being stored is answered first). A batch the client
                // sent meanwhile is unanswered, and the client sends it again, with its
                // batch id, to the server that comes next.
                let next = tokio::select! {
                    biased;
                    _ = stopping.wait_for(|&stop| stop) => break,
                    next = inbound.next() => next,
                };
                let Some(next) = next else { break };
                let reply = match next {
                    Ok(request) => publish(&broker, &meters, &gate, who, request).await,
                    Err(status) => Err(status),
                };
                let failed = reply.is_err();
                if tx.send(reply).await.is_err() || failed {
                    // The client went away, or a batch failed: later batches must not be
                    // stored past one that was not (the stream's order is the contract).
                    break;
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn publish_to_topic(
        &self,
        r: Request<v1::PublishToTopicRequest>,
    ) -> Reply<v1::PublishToTopicResponse> {
        let who = caller(&self.gate, &r)?;
        let r = r.into_inner();
        self.gate
            .publish(who, &r.topic, r.messages.len())
            .map_err(from_refusal)?;
        let batch = messages(r.messages)?;
        let started = Instant::now();
        let positions = match (r.producer_id, r.partition, r.first_sequence) {
            (Some(producer), Some(partition), Some(first)) => {
                self.broker
                    .publish_idempotent(&r.topic, partition, &producer, first, batch)
                    .await
            }
            (Some(_), _, _) => {
                return Err(from_convert(ConvertError::Missing {
                    field: "partition / first_sequence",
                    why: "an idempotent producer publishes to one partition with sequence numbers",
                }));
            }
            (None, _, Some(_)) => {
                return Err(from_convert(ConvertError::Missing {
                    field: "producer_id",
                    why: "sequence numbers belong to an idempotent producer",
                }));
            }
            (None, Some(partition), None) => {
                self.broker
                    .publish_to_partition(&r.topic, partition, batch)
                    .await
            }
            (None, None, None) => self.broker.publish_to_topic(&r.topic, batch).await,
        }
        .map_err(from_broker)?;
        self.meters.published("topic", &r.topic, started.elapsed());
        Ok(Response::new(v1::PublishToTopicResponse {
            positions: positions
                .into_iter()
                .map(|p| v1::TopicPosition {
                    partition: p.partition,
                    offset: p.offset,
                })
                .collect(),
        }))
    }

    async fn cancel(&self, r: Request<v1::CancelRequest>) -> Reply<v1::CancelResponse> {
        allow(&self.gate, &r, Action::Publish, &r.get_ref().queue)?;
        let r = r.into_inner();
        let id = MessageId::parse(&r.id).map_err(from_broker)?;
        let cancelled = self
            .broker
            .cancel(&r.queue, id)
            .await
            .map_err(from_broker)?;
        Ok(Response::new(v1::CancelResponse { cancelled }))
    }
}
