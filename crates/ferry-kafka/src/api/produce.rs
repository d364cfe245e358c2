//! Produce: each partition's record batches become one publish to that Ferry partition,
//! answered once durable (acks 1 and all alike: one node holds every copy). With acks 0
//! Kafka sends no answer; the records are still stored before the next request is read.
//! A batch written by an idempotent producer goes through the broker's idempotent publish,
//! so a retried batch is stored once. A partition's records are taken all or none.

use ferry_broker::{BrokerError, TopicPosition};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::produce_request::PartitionProduceData;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};

use super::text;
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
                None => produce_partition(shared, &name, data).await,
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
    let batches = decode_produced(&records, shared.config.max_frame_bytes)?;
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
        let first_sequence = u64::try_from(producer.base_sequence).map_err(|_| RecordsRefused {
            code: ResponseError::InvalidRecord,
            message: format!("base sequence {} is negative", producer.base_sequence),
        })?;
        // The epoch is part of the producer's identity: a new epoch starts its sequences
        // again at 0, as a new producer would.
        let producer_id = format!("kafka-{}-{}", producer.producer_id, producer.epoch);
        shared
            .broker
            .publish_idempotent(
                topic,
                partition,
                &producer_id,
                first_sequence,
                batch.messages,
            )
            .await
            .map_err(from_broker)?
    };
    shared.appends.appended();
    Ok(positions
        .first()
        .map(|TopicPosition { offset, .. }| *offset as i64)
        .unwrap_or(-1))
}
