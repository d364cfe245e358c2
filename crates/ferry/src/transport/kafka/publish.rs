//! Publishing: every record of a batch is handed to the producer at once, then each
//! delivery report is awaited, so a batch costs about one round trip.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};

use super::capabilities::NAME;
use super::codec::{self, now_ms};
use super::engine::{Shared, kafka_error};
use super::names;
use super::settings::Entry;
use crate::capability::Feature;
use crate::error::{Error, Result};
use crate::message::Message;
use crate::spec::Destination;

/// One record to send.
pub(super) struct Outgoing<'a> {
    pub topic: String,
    pub partition: Option<i32>,
    pub key: Option<&'a [u8]>,
    pub payload: &'a [u8],
    pub headers: BTreeMap<String, String>,
}

pub(super) async fn publish(
    shared: &Arc<Shared>,
    destination: &Destination,
    batch: Vec<Message>,
) -> Result<()> {
    shared.check_open()?;
    let name = destination.name();
    let entry = match destination {
        Destination::Queue(_) => shared.entry(name, "queue").await?,
        Destination::Topic(_) => shared.entry(name, "topic").await?,
    };
    let mut outgoing = Vec::with_capacity(batch.len());
    for message in &batch {
        let id = message.id.as_deref().expect("the SDK assigns every id");
        if let Some(reserved) = message.headers.keys().find(|k| codec::reserved(k)) {
            return Err(Error::invalid(
                format!("header `{reserved}` of message {id}"),
                "`x-ferry-*` headers are the kafka transport's own",
            ));
        }
        let delay = message.delay.filter(|d| !d.is_zero());
        let (topic, due) = match (delay, &entry) {
            (None, _) => (name.to_owned(), None),
            (Some(delay), Entry::Queue { policy }) => {
                if policy.ordering {
                    return Err(Error::unsupported(
                        NAME,
                        Feature::Delays.name(),
                        "a delayed message on a queue with per-key ordering would overtake its \
                         key's earlier messages",
                    ));
                }
                if delay > Duration::from_millis(policy.max_delay_ms) {
                    return Err(Error::invalid(
                        format!("delay of message {id}"),
                        format!(
                            "{delay:?} is above the queue's max_delay of {:?}",
                            Duration::from_millis(policy.max_delay_ms)
                        ),
                    ));
                }
                let rung = names::rung_of(delay, policy.rungs())
                    .expect("the queue's rungs reach its max_delay");
                let due = now_ms() + delay.as_millis() as i64;
                (names::retry_topic(name, rung), Some(due))
            }
            (Some(_), _) => {
                return Err(Error::unsupported(
                    NAME,
                    Feature::Delays.name(),
                    "a topic's subscriptions each have their own retry topics; publish delayed \
                     messages to a queue",
                ));
            }
        };
        outgoing.push(Outgoing {
            topic,
            partition: None,
            key: message.key.as_deref(),
            payload: &message.payload,
            headers: codec::publish_headers(message, id, due),
        });
    }
    send_all(&shared.producer, outgoing).await
}

/// Sends every record, then waits for each to be stored.
pub(super) async fn send_all(producer: &FutureProducer, batch: Vec<Outgoing<'_>>) -> Result<()> {
    let mut pending: Vec<DeliveryFuture> = Vec::with_capacity(batch.len());
    for out in &batch {
        let headers = codec::owned(&out.headers);
        loop {
            let mut record = FutureRecord::<[u8], [u8]>::to(&out.topic)
                .payload(out.payload)
                .headers(headers.clone());
            if let Some(key) = out.key {
                record = record.key(key);
            }
            if let Some(partition) = out.partition {
                record = record.partition(partition);
            }
            match producer.send_result(record) {
                Ok(delivery) => {
                    pending.push(delivery);
                    break;
                }
                // The producer's queue is full: wait for what is on its way, then go on.
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    for delivery in pending.drain(..) {
                        settled(delivery.await)?;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err((e, _)) => return Err(kafka_error(e)),
            }
        }
    }
    for delivery in pending {
        settled(delivery.await)?;
    }
    Ok(())
}

fn settled<Canceled>(
    report: std::result::Result<rdkafka::producer::future_producer::OwnedDeliveryResult, Canceled>,
) -> Result<()> {
    match report {
        Ok(Ok(_)) => Ok(()),
        Ok(Err((e, _))) => Err(kafka_error(e)),
        Err(_) => Err(Error::Transport {
            transport: NAME,
            message: "the producer went away before the record was stored".into(),
            source: None,
        }),
    }
}

/// A copy of a consumed message, sent to `topic`.
pub(super) async fn send_one(
    producer: &FutureProducer,
    topic: String,
    partition: Option<i32>,
    key: Option<&Bytes>,
    payload: &Bytes,
    headers: BTreeMap<String, String>,
) -> Result<()> {
    send_all(
        producer,
        vec![Outgoing {
            topic,
            partition,
            key: key.map(|k| &k[..]),
            payload,
            headers,
        }],
    )
    .await
}
