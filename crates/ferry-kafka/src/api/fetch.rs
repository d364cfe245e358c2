//! Fetch: each requested partition read from its fetch offset, as one record batch.
//!
//! - `max_bytes` bounds the whole answer and `partition_max_bytes` each partition; the
//!   first partition with records returns at least one record even over the bounds, as
//!   Kafka does, so that a consumer always progresses.
//! - With fewer than `min_bytes` ready, the fetch waits up to `max_wait_ms` (a long poll),
//!   woken by appends (see `appends.rs`).
//! - An offset outside a partition's kept range is OFFSET_OUT_OF_RANGE; a missing topic or
//!   partition UNKNOWN_TOPIC_OR_PARTITION.
//! - Fetch sessions are not kept: every answer is a full one (session id 0), which clients
//!   take as "no session".

use std::time::Duration;

use ferry_broker::{Position, ReadLimit};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use tokio::time::Instant;

use crate::appends::RECHECK;
use crate::records::encode_fetched;
use crate::{Shared, errors};

/// The most records read for one partition in one answer.
const MAX_RECORDS_PER_PARTITION: usize = 10_000;

pub async fn answer(shared: &Shared, request: FetchRequest) -> FetchResponse {
    let deadline = Instant::now() + Duration::from_millis(request.max_wait_ms.max(0) as u64);
    let min_bytes = request.min_bytes.max(0) as usize;
    let mut appended = shared.appends.watch();
    loop {
        appended.borrow_and_update();
        let (response, bytes, failed) = read_once(shared, &request);
        if bytes >= min_bytes.max(1) || failed || Instant::now() >= deadline {
            return response;
        }
        let wake = (Instant::now() + RECHECK).min(deadline);
        tokio::select! {
            _ = appended.changed() => {}
            _ = tokio::time::sleep_until(wake) => {}
        }
    }
}

/// One pass over the requested partitions: the answer, the record bytes in it, and whether
/// any partition failed (which answers at once, as Kafka does).
fn read_once(shared: &Shared, request: &FetchRequest) -> (FetchResponse, usize, bool) {
    let mut remaining = request.max_bytes.max(0) as usize;
    let mut total = 0usize;
    let mut failed = false;
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let name = topic.topic.0.as_str();
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for wanted in &topic.partitions {
            let answer = PartitionData::default().with_partition_index(wanted.partition);
            let info = u32::try_from(wanted.partition).ok().map(|p| {
                shared.broker.describe_topic(name).and_then(|info| {
                    info.partitions
                        .into_iter()
                        .find(|i| i.partition == p)
                        .ok_or(ferry_broker::BrokerError::PartitionNotFound {
                            topic: info.name.clone(),
                            partition: p,
                            partitions: info.spec.partitions,
                        })
                })
            });
            let Some(Ok(info)) = info else {
                failed = true;
                let code = match info {
                    Some(Err(e)) => errors::from_broker(&e),
                    _ => kafka_protocol::ResponseError::UnknownTopicOrPartition,
                };
                partitions.push(answer.with_error_code(code.code()));
                continue;
            };
            let answer = answer
                .with_high_watermark(info.end_offset as i64)
                .with_last_stable_offset(info.end_offset as i64)
                .with_log_start_offset(info.start_offset as i64);
            // After the first records, a partition gets only what is left of max_bytes.
            let budget = (wanted.partition_max_bytes.max(0) as usize).min(remaining);
            if budget == 0 && total > 0 {
                partitions.push(answer);
                continue;
            }
            let offset = u64::try_from(wanted.fetch_offset).unwrap_or(u64::MAX);
            let limit = ReadLimit {
                messages: MAX_RECORDS_PER_PARTITION,
                bytes: budget.max(1),
            };
            let read = shared.broker.read_topic_within(
                name,
                info.partition,
                Position::Offset(offset),
                limit,
            );
            let records = match read
                .map_err(|e| errors::from_broker(&e))
                .and_then(|records| within_budget(records, budget, total == 0))
            {
                Ok(records) => records,
                Err(code) => {
                    failed = true;
                    partitions.push(answer.with_error_code(code.code()));
                    continue;
                }
            };
            total += records.len();
            remaining = remaining.saturating_sub(records.len());
            partitions.push(answer.with_records(Some(records)));
        }
        topics.push(
            FetchableTopicResponse::default()
                .with_topic(topic.topic.clone())
                .with_partitions(partitions),
        );
    }
    (
        FetchResponse::default().with_responses(topics),
        total,
        failed,
    )
}

/// `records` encoded within `budget` bytes, dropping records from the end while over it;
/// the first record stays, over the budget or not, when `first_in_answer` (so that a
/// consumer progresses past a record larger than its limits).
fn within_budget(
    mut records: Vec<ferry_broker::TopicRecord>,
    budget: usize,
    first_in_answer: bool,
) -> Result<bytes::Bytes, kafka_protocol::ResponseError> {
    loop {
        let encoded = encode_fetched(&records).map_err(|refused| refused.code)?;
        if encoded.len() <= budget || records.is_empty() {
            return Ok(encoded);
        }
        if records.len() == 1 {
            return Ok(if first_in_answer {
                encoded
            } else {
                bytes::Bytes::new()
            });
        }
        // Shrink in proportion, by at least one record.
        let keep = (records.len() * budget / encoded.len()).clamp(1, records.len() - 1);
        records.truncate(keep);
    }
}
