//! DeleteRecords through [`Broker::delete_records`](ferry_broker::Broker::delete_records):
//! each partition's records before the offset go (-1: all, up to the high watermark), the
//! answer carries the partition's new low watermark, and from then on the records below it
//! are OFFSET_OUT_OF_RANGE to Fetch and ListOffsets' earliest is it. An offset past the
//! end is OFFSET_OUT_OF_RANGE. Records a Ferry subscription has not settled are kept unless
//! the topic's retention overrides subscriptions — the deletion is then POLICY_VIOLATION
//! with the subscription named (see the broker's `engine/delete_records.rs`).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use crate::{Shared, errors};

/// Kafka's "up to the high watermark".
const HIGH_WATERMARK: i64 = -1;

pub async fn answer(shared: &Shared, request: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.0.as_str();
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let result =
                DeleteRecordsPartitionResult::default().with_partition_index(p.partition_index);
            partitions.push(
                match delete(shared, name, p.partition_index, p.offset).await {
                    Ok(low_watermark) => result.with_low_watermark(low_watermark as i64),
                    Err(code) => result.with_low_watermark(-1).with_error_code(code.code()),
                },
            );
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    DeleteRecordsResponse::default().with_topics(topics)
}

async fn delete(
    shared: &Shared,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<u64, ResponseError> {
    let partition = u32::try_from(partition).map_err(|_| ResponseError::UnknownTopicOrPartition)?;
    let before = match offset {
        HIGH_WATERMARK => {
            let info = shared
                .broker
                .describe_topic(topic)
                .map_err(|e| errors::from_broker(&e))?;
            info.partitions
                .iter()
                .find(|p| p.partition == partition)
                .ok_or(ResponseError::UnknownTopicOrPartition)?
                .end_offset
        }
        o if o >= 0 => o as u64,
        _ => return Err(ResponseError::OffsetOutOfRange),
    };
    shared
        .broker
        .delete_records(topic, partition, before)
        .await
        .map_err(|e| {
            tracing::info!(topic, partition, error = %e, "kafka: DeleteRecords refused");
            errors::from_broker(&e)
        })
}
