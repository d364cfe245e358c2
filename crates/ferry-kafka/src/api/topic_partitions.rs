//! DescribeTopicPartitions (Kafka 3.8+): Metadata's per-partition answer, paged. Topics are
//! answered in name order, at most `response_partition_limit` partitions in all (capped at
//! Kafka's default `max.request.partition.size.limit`, 2000); when partitions remain, the
//! answer's cursor names the first one left out and the next request starts there. As in
//! Metadata, this node leads every partition and is its only replica.
//!
//! No topic names means every topic the caller may see (a hidden one is left out, as
//! Kafka leaves out a topic without Describe); a named topic the caller may not see is
//! TOPIC_AUTHORIZATION_FAILED, a missing one UNKNOWN_TOPIC_OR_PARTITION. A cursor whose
//! topic is not among the names asked for, or whose partition is negative, makes the
//! request INVALID_REQUEST for every topic named, as Kafka answers.

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::metadata::NODE_ID;
use crate::{Shared, errors};

/// Kafka's `max.request.partition.size.limit` default: the most partitions one answer
/// holds, whatever the request asks.
pub const MAX_PARTITIONS: i32 = 2000;

pub fn describe(
    shared: &Shared,
    request: DescribeTopicPartitionsRequest,
    sees: impl Fn(&str) -> bool,
) -> DescribeTopicPartitionsResponse {
    let named: Vec<String> = request.topics.iter().map(|t| t.name.to_string()).collect();
    let cursor = request
        .cursor
        .as_ref()
        .map(|c| (c.topic_name.to_string(), c.partition_index));
    let from = cursor.as_ref().map_or("", |(topic, _)| topic.as_str());
    let every_topic = named.is_empty();
    // In name order, from the cursor's topic on.
    let wanted: BTreeSet<String> = if every_topic {
        shared
            .broker
            .list_topics()
            .into_iter()
            .map(String::from)
            .filter(|name| name.as_str() >= from)
            .collect()
    } else {
        named
            .iter()
            .filter(|n| n.as_str() >= from)
            .cloned()
            .collect()
    };
    if let Some((topic, partition)) = &cursor
        && ((!every_topic && !wanted.contains(topic)) || *partition < 0)
    {
        return refuse_all(&named, ResponseError::InvalidRequest);
    }
    let (visible, hidden): (Vec<String>, Vec<String>) =
        wanted.into_iter().partition(|name| sees(name));
    let limit = request.response_partition_limit.clamp(1, MAX_PARTITIONS) as usize;
    let start = |name: &str| match &cursor {
        Some((topic, partition)) if topic == name => *partition as usize,
        _ => 0,
    };
    let mut response = page(shared, &visible, limit, start, every_topic);
    // Named topics the caller may not see; with no names they are simply not listed.
    if !every_topic {
        response.topics.extend(
            hidden
                .iter()
                .map(|name| topic_error(name, ResponseError::TopicAuthorizationFailed)),
        );
    }
    response
}

/// Up to `limit` partitions of `topics`, in order, each topic from `start(topic)`.
fn page(
    shared: &Shared,
    topics: &[String],
    limit: usize,
    start: impl Fn(&str) -> usize,
    every_topic: bool,
) -> DescribeTopicPartitionsResponse {
    let mut response = DescribeTopicPartitionsResponse::default();
    let mut remaining = limit;
    for name in topics {
        if remaining == 0 {
            // The previous topics filled the page: the next one starts the next page
            // (Kafka names it even if it turns out not to exist).
            response.next_cursor = Some(cursor(name, 0));
            break;
        }
        let info = match shared.broker.describe_topic(name) {
            Ok(info) => info,
            // With no names, a topic deleted meanwhile is just not listed.
            Err(_) if every_topic => continue,
            Err(e) => {
                response
                    .topics
                    .push(topic_error(name, errors::from_broker(&e)));
                continue;
            }
        };
        let first = start(name);
        let total = info.partitions.len();
        let end = total.min(first.saturating_add(remaining));
        let partitions: Vec<_> = info
            .partitions
            .iter()
            .skip(first)
            .take(end.saturating_sub(first))
            .map(|p| partition(p.partition as i32))
            .collect();
        remaining -= partitions.len();
        response.topics.push(
            DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(topic_name(name)))
                .with_partitions(partitions),
        );
        if end < total {
            response.next_cursor = Some(cursor(name, end as i32));
            break;
        }
    }
    response
}

fn partition(index: i32) -> DescribeTopicPartitionsResponsePartition {
    DescribeTopicPartitionsResponsePartition::default()
        .with_partition_index(index)
        .with_leader_id(BrokerId(NODE_ID))
        .with_leader_epoch(0)
        .with_replica_nodes(vec![BrokerId(NODE_ID)])
        .with_isr_nodes(vec![BrokerId(NODE_ID)])
}

fn refuse_all(named: &[String], code: ResponseError) -> DescribeTopicPartitionsResponse {
    DescribeTopicPartitionsResponse::default()
        .with_topics(named.iter().map(|name| topic_error(name, code)).collect())
}

fn topic_error(name: &str, code: ResponseError) -> DescribeTopicPartitionsResponseTopic {
    DescribeTopicPartitionsResponseTopic::default()
        .with_name(Some(topic_name(name)))
        .with_error_code(code.code())
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

fn cursor(topic: &str, partition: i32) -> Cursor {
    Cursor::default()
        .with_topic_name(topic_name(topic))
        .with_partition_index(partition)
}
