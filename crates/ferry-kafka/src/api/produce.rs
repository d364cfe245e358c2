//! Produce: each partition's record batches become one publish to that Ferry partition,
//! answered once durable (acks 1 and all alike: one node holds every copy). With acks 0
//! Kafka sends no answer; the records are still stored before the next request is read.
//! A batch written by an idempotent producer has its epoch checked (`producers.rs`) and
//! goes through the broker's idempotent publish, so a retried batch is stored once. A
//! partition's records are taken all or none. v0–2, which the codec no longer knows, are
//! decoded and answered at the bottom of this module.
//!
//! `timeout_ms` is not used: Kafka bounds with it only the wait for other replicas, and
//! this node's answer waits for its own durable append, which Kafka does not bound either
//! (see `docs/compat/kafka.md`).

use bytes::{BufMut, Bytes, BytesMut};
use ferry_broker::{BrokerError, TopicPosition};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::produce_request::PartitionProduceData;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};

use super::text;
use crate::connection::{ConnectionError, Request, decode_body};
use crate::producers::{EpochProblem, broker_id};
use crate::records::{ProducedBatch, RecordsRefused, decode_produced};
use crate::{Shared, errors};

pub async fn answer(
    shared: &Shared,
    request: ProduceRequest,
    version: i16,
) -> Option<ProduceResponse> {
    let refusal = if !matches!(request.acks, -1..=1) {
        Some(RecordsRefused {
            code: ResponseError::InvalidRequiredAcks,
            message: format!("acks {} is not one of 0, 1 and -1", request.acks),
        })
    } else if request.transactional_id.is_some() {
        Some(RecordsRefused {
            code: ResponseError::InvalidRequest,
            message: "transactions are not supported yet".into(),
        })
    } else {
        None
    };
    let mut responses = Vec::with_capacity(request.topic_data.len());
    for topic in request.topic_data {
        let name = topic.name.0.as_str().to_owned();
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let index = data.index;
            let outcome = match &refusal {
                Some(refused) => Err(refused.clone()),
                None => produce_partition(shared, &name, data, version).await,
            };
            let response = PartitionProduceResponse::default().with_index(index);
            partitions.push(match outcome {
                Ok(base_offset) => response.with_base_offset(base_offset),
                Err(refused) => {
                    let response = response
                        .with_error_code(refused.code.code())
                        .with_base_offset(-1);
                    if version >= 8 {
                        response.with_error_message(text(refused.message))
                    } else {
                        response
                    }
                }
            });
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_partition_responses(partitions),
        );
    }
    (request.acks != 0).then(|| ProduceResponse::default().with_responses(responses))
}

/// Stores one partition's records; the base offset of the first.
async fn produce_partition(
    shared: &Shared,
    topic: &str,
    data: PartitionProduceData,
    version: i16,
) -> Result<i64, RecordsRefused> {
    let partition = u32::try_from(data.index).map_err(|_| RecordsRefused {
        code: ResponseError::UnknownTopicOrPartition,
        message: format!("partition {} does not exist", data.index),
    })?;
    let Some(records) = data.records else {
        return Err(RecordsRefused {
            code: ResponseError::CorruptMessage,
            message: "the partition's records are null".into(),
        });
    };
    let batches = decode_produced(&records, shared.config.max_frame_bytes, version)?;
    let from_broker = |e: BrokerError| RecordsRefused {
        code: errors::from_broker(&e),
        message: e.to_string(),
    };
    let positions = if batches.iter().all(|b| b.producer.is_none()) {
        // One publish: a partition's batches are stored together or not at all.
        let messages = batches.into_iter().flat_map(|b| b.messages).collect();
        shared
            .broker
            .publish_to_partition(topic, partition, messages)
            .await
            .map_err(from_broker)?
    } else {
        let [batch] = <[ProducedBatch; 1]>::try_from(batches).map_err(|_| RecordsRefused {
            code: ResponseError::InvalidRecord,
            message: "an idempotent producer sends one batch per partition and request".into(),
        })?;
        let producer = batch.producer.expect("checked above");
        shared
            .producers
            .seed(topic, partition)
            .await
            .map_err(from_broker)?;
        shared
            .producers
            .check_epoch(
                producer.producer_id,
                topic,
                partition,
                producer.epoch,
                producer.base_sequence,
            )
            .map_err(|problem| match problem {
                EpochProblem::Fenced { latest } => RecordsRefused {
                    code: ResponseError::InvalidProducerEpoch,
                    message: format!(
                        "producer {} is at epoch {latest}; epoch {} is fenced",
                        producer.producer_id, producer.epoch
                    ),
                },
                EpochProblem::NewEpochNotAtZero { base_sequence } => RecordsRefused {
                    code: ResponseError::OutOfOrderSequenceNumber,
                    message: format!(
                        "epoch {} of producer {} starts at sequence {base_sequence}, not 0",
                        producer.epoch, producer.producer_id
                    ),
                },
            })?;
        let first_sequence = u64::try_from(producer.base_sequence).map_err(|_| RecordsRefused {
            code: ResponseError::InvalidRecord,
            message: format!("base sequence {} is negative", producer.base_sequence),
        })?;
        // The epoch is part of the producer's identity: a new epoch starts its sequences
        // again at 0, as a new producer would.
        let producer_id = broker_id(producer.producer_id, producer.epoch);
        let positions = shared
            .broker
            .publish_idempotent(
                topic,
                partition,
                &producer_id,
                first_sequence,
                batch.messages,
            )
            .await
            .map_err(from_broker)?;
        shared
            .producers
            .written(producer.producer_id, topic, partition, producer.epoch);
        positions
    };
    shared.appends.appended();
    Ok(positions
        .first()
        .map(|TopicPosition { offset, .. }| *offset as i64)
        .unwrap_or(-1))
}

/// Produce v0–2, which the codec (generated from Kafka 4's specs, where they were removed)
/// no longer knows: a v0–2 body is a v3 body without its leading `transactional_id`, so
/// it is decoded as v3 with a null one put in front (the guard's checks included).
pub fn decode_before_v3(request: &Request) -> Result<ProduceRequest, ConnectionError> {
    let mut body = BytesMut::with_capacity(request.body.len() + 2);
    body.put_i16(-1); // a null transactional_id
    body.put_slice(&request.body);
    let mut as_v3 = Request {
        api: request.api,
        header: request.header.clone().with_request_api_version(3),
        body: body.freeze(),
    };
    decode_body(&mut as_v3).map_err(|e| match e {
        // Said of the version the client sent.
        ConnectionError::Malformed { api, problem, .. } => ConnectionError::Malformed {
            api,
            version: request.header.request_api_version,
            problem,
        },
        other => other,
    })
}

/// The answer to Produce v0–2, header (v0) included: per partition its index, error code
/// and base offset, `log_append_time_ms` from v2 on, then `throttle_time_ms` from v1 on —
/// Kafka's layouts, written here since the codec no longer encodes these versions.
pub fn encode_before_v3(request: &Request, version: i16, response: &ProduceResponse) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i32(request.header.correlation_id);
    buf.put_i32(response.responses.len() as i32);
    for topic in &response.responses {
        let name = topic.name.0.as_bytes();
        buf.put_i16(name.len() as i16);
        buf.put_slice(name);
        buf.put_i32(topic.partition_responses.len() as i32);
        for partition in &topic.partition_responses {
            buf.put_i32(partition.index);
            buf.put_i16(partition.error_code);
            buf.put_i64(partition.base_offset);
            if version >= 2 {
                buf.put_i64(partition.log_append_time_ms);
            }
        }
    }
    if version >= 1 {
        buf.put_i32(response.throttle_time_ms);
    }
    buf.freeze()
}
