//! ListOffsets: a partition's earliest offset (-2), its latest (-1: the offset the next
//! record gets), or the first offset whose timestamp is at or after a time (a record's
//! timestamp is the producer's CreateTime when it kept one, else its publish time; none
//! such is offset -1, as Kafka answers). Other negative timestamps (-3, the offset of the
//! largest timestamp, v7+) are not served.

use ferry_broker::Position;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use crate::records::kafka_timestamp;
use crate::{Shared, errors};

/// Records read past the publish-time index looking for a CreateTime at or after the one
/// asked for, before the index's answer is taken as it is.
const MAX_SCAN: usize = 10_000;
const PAGE: usize = 500;

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
        t if t >= 0 => by_timestamp(shared, topic, partition, t),
        _ => Err(ResponseError::InvalidRequest),
    }
}

/// The first record whose Kafka timestamp (its CreateTime when kept, else its publish
/// time; see `records.rs`) is at or after `t`. The broker indexes publish times, and a
/// record is published no earlier than it is created (with the producer's clock in step),
/// so the answer is at or after the index's first record published at or after `t`; the
/// records from there are read until one was created at or after `t`, up to [`MAX_SCAN`]
/// of them (past that, the index's record is answered). A producer whose clock runs ahead
/// of Ferry's can have records created after `t` but published before it: those are not
/// found, the index is not read backwards.
fn by_timestamp(
    shared: &Shared,
    topic: &str,
    partition: u32,
    t: i64,
) -> Result<(i64, i64), ResponseError> {
    let read = |from: Position| {
        shared
            .broker
            .read_topic(topic, partition, from, PAGE)
            .map_err(|e| errors::from_broker(&e))
    };
    let mut page = read(Position::Timestamp(t))?;
    let Some(indexed) = page
        .first()
        .map(|r| (kafka_timestamp(&r.message), r.offset as i64))
    else {
        return Ok((-1, -1));
    };
    let mut scanned = 0;
    while !page.is_empty() && scanned < MAX_SCAN {
        if let Some(r) = page.iter().find(|r| kafka_timestamp(&r.message) >= t) {
            return Ok((kafka_timestamp(&r.message), r.offset as i64));
        }
        scanned += page.len();
        let next = page.last().expect("not empty").offset + 1;
        page = read(Position::Offset(next))?;
    }
    if page.is_empty() {
        // Every record from the index on was created before `t`: none is at or after it.
        return Ok((-1, -1));
    }
    Ok(indexed)
}
