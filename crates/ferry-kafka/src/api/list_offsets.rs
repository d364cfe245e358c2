//! ListOffsets: a partition's earliest offset (-2), its latest (-1: the offset the next
//! record gets), or the first offset at or after a timestamp (the records' publish times;
//! none such is offset -1, as Kafka answers). Other negative timestamps (-3, the offset of
//! the largest timestamp, v7+) are not served.

use ferry_broker::Position;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use crate::{Shared, errors};

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;

pub fn answer(shared: &Shared, request: ListOffsetsRequest) -> ListOffsetsResponse {
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.name.0.as_str();
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let answer = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index);
                    match lookup(shared, name, p.partition_index, p.timestamp) {
                        Ok((timestamp, offset)) => {
                            answer.with_timestamp(timestamp).with_offset(offset)
                        }
                        Err(code) => answer
                            .with_error_code(code.code())
                            .with_timestamp(-1)
                            .with_offset(-1),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

/// `(timestamp, offset)` for one partition.
fn lookup(
    shared: &Shared,
    topic: &str,
    partition: i32,
    timestamp: i64,
) -> Result<(i64, i64), ResponseError> {
    let partition = u32::try_from(partition).map_err(|_| ResponseError::UnknownTopicOrPartition)?;
    let info = shared
        .broker
        .describe_topic(topic)
        .map_err(|e| errors::from_broker(&e))?;
    let info = info
        .partitions
        .iter()
        .find(|p| p.partition == partition)
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    match timestamp {
        EARLIEST => Ok((-1, info.start_offset as i64)),
        LATEST => Ok((-1, info.end_offset as i64)),
        t if t >= 0 => {
            let found = shared
                .broker
                .read_topic(topic, partition, Position::Timestamp(t), 1)
                .map_err(|e| errors::from_broker(&e))?;
            Ok(found
                .first()
                .map_or((-1, -1), |r| (r.message.published_at, r.offset as i64)))
        }
        _ => Err(ResponseError::InvalidRequest),
    }
}
