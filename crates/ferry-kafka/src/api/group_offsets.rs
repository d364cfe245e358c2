//! Committed offsets: OffsetCommit, OffsetFetch and OffsetDelete. A Kafka group G's
//! commits on topic T are the broker's group named after G (`group_id.rs`) on topic T
//! ([`Broker::commit_group_offsets`](ferry_broker::Broker::commit_group_offsets)): durable,
//! with their metadata string, and seen by `ferry group`, lag and Ferry's other APIs. The
//! coordinator decides whether a commit may be made (member, generation); the broker
//! stores it, refusing while Ferry's own consumers hold a group of that name on the topic.

use ferry_broker::{BrokerError, ErrorKind, Name, OffsetCommit};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
    OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::groups::{code, group_name, member_group};
use crate::Shared;
use crate::errors::from_broker;

/// A commit's broker failure as Kafka's code: the broker's one classification, except
/// that a commit's only "too large" is its metadata.
fn commit_code(error: &BrokerError) -> ResponseError {
    match error.kind() {
        ErrorKind::TooLarge => ResponseError::OffsetMetadataTooLarge,
        _ => from_broker(error),
    }
}

/// Commits each topic's partitions through the broker once the coordinator allows the
/// member's generation. `retention_time_ms` (v2–4) must be -1: committed offsets are kept
/// until the group is deleted, so another retention is refused (INVALID_REQUEST), not
/// ignored. Leader epochs (v6+) are not kept: Ferry has no leader elections.
pub fn offset_commit(
    shared: &Shared,
    request: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let group = request.group_id.0.to_string();
    let name = group_name(&group);
    let refused = if let Err(e) = &name {
        Some(*e)
    } else if version <= 4 && request.retention_time_ms != -1 {
        Some(ResponseError::InvalidRequest)
    } else {
        shared
            .coordinator
            .check_commit(
                &group,
                &request.member_id,
                request.group_instance_id.as_deref(),
                request.generation_id_or_member_epoch,
                shared.broker.now_ms(),
            )
            .err()
            .map(code)
    };
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let codes: Vec<i16> = match refused {
                Some(e) => vec![e.code(); topic.partitions.len()],
                None => match &name {
                    Ok(name) => commit_topic(shared, name, &topic.name.0, &topic.partitions),
                    Err(e) => vec![e.code(); topic.partitions.len()],
                },
            };
            let partitions = topic
                .partitions
                .iter()
                .zip(codes)
                .map(|(p, code)| {
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                })
                .collect();
            OffsetCommitResponseTopic::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

/// One topic's commit: a code per partition, in order.
fn commit_topic(
    shared: &Shared,
    group: &Name,
    topic: &str,
    partitions: &[kafka_protocol::messages::offset_commit_request::OffsetCommitRequestPartition],
) -> Vec<i16> {
    // Negative partitions and offsets can name nothing: refused here, the rest go on.
    let mut codes: Vec<Option<i16>> = partitions
        .iter()
        .map(|p| {
            if p.partition_index < 0 {
                Some(ResponseError::UnknownTopicOrPartition.code())
            } else if p.committed_offset < 0 {
                Some(ResponseError::OffsetOutOfRange.code())
            } else {
                None
            }
        })
        .collect();
    let commits: Vec<OffsetCommit> = partitions
        .iter()
        .zip(&codes)
        .filter(|(_, code)| code.is_none())
        .map(|(p, _)| OffsetCommit {
            partition: p.partition_index as u32,
            offset: p.committed_offset as u64,
            metadata: p
                .committed_metadata
                .as_ref()
                .map(|m| m.to_string())
                .unwrap_or_default(),
        })
        .collect();
    let results = shared
        .broker
        .commit_group_offsets(topic, group.as_str(), &commits);
    let mut results: Box<dyn Iterator<Item = i16>> = match results {
        Ok(results) => Box::new(
            results
                .into_iter()
                .map(|r| r.err().map_or(0, |e| commit_code(&e).code()))
                .collect::<Vec<_>>()
                .into_iter(),
        ),
        Err(e) => Box::new(std::iter::repeat(commit_code(&e).code())),
    };
    for code in codes.iter_mut().filter(|c| c.is_none()) {
        *code = Some(results.next().unwrap_or(0));
    }
    codes.into_iter().map(|c| c.unwrap_or(0)).collect()
}

/// A partition's committed offset as OffsetFetch answers it.
struct Fetched {
    partition: i32,
    offset: i64,
    metadata: String,
}

/// One group's committed offsets: for the named topics' partitions (-1 and no metadata
/// where nothing is committed, as Kafka answers), or, with no topics named, for every
/// topic the group has commits on.
fn fetch_group(
    shared: &Shared,
    group: &Name,
    topics: Option<Vec<(String, Vec<i32>)>>,
) -> Vec<(String, Vec<Fetched>)> {
    let every_topic = topics.is_none();
    let named = match topics {
        Some(topics) => topics,
        None => shared
            .broker
            .list_groups()
            .into_iter()
            .filter(|(_, g)| g == group)
            .map(|(topic, _)| (topic.to_string(), Vec::new()))
            .collect(),
    };
    named
        .into_iter()
        .map(|(topic, partitions)| {
            let committed = shared
                .broker
                .group_offsets(&topic, group.as_str())
                .unwrap_or_default();
            let rows = if every_topic {
                committed
                    .into_iter()
                    .map(|(p, c)| Fetched {
                        partition: p as i32,
                        offset: c.offset as i64,
                        metadata: c.metadata,
                    })
                    .collect()
            } else {
                partitions
                    .into_iter()
                    .map(|p| {
                        let found = u32::try_from(p).ok().and_then(|p| committed.get(&p));
                        match found {
                            Some(c) => Fetched {
                                partition: p,
                                offset: c.offset as i64,
                                metadata: c.metadata.clone(),
                            },
                            None => Fetched {
                                partition: p,
                                offset: -1,
                                metadata: String::new(),
                            },
                        }
                    })
                    .collect()
            };
            (topic, rows)
        })
        .collect()
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// v1–7 ask for one group, v8 for several. Reading needs no membership.
pub fn offset_fetch(
    shared: &Shared,
    request: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    if version >= 8 {
        let groups = request
            .groups
            .into_iter()
            .map(|g| {
                let id = g.group_id.0.to_string();
                let answer = OffsetFetchResponseGroup::default().with_group_id(g.group_id);
                let name = match group_name(&id) {
                    Ok(name) => name,
                    Err(e) => return answer.with_error_code(e.code()),
                };
                let wanted = g.topics.map(|topics| {
                    topics
                        .into_iter()
                        .map(|t| (t.name.0.to_string(), t.partition_indexes))
                        .collect()
                });
                let topics = fetch_group(shared, &name, wanted)
                    .into_iter()
                    .map(|(topic, rows)| {
                        let partitions = rows
                            .into_iter()
                            .map(|f| {
                                OffsetFetchResponsePartitions::default()
                                    .with_partition_index(f.partition)
                                    .with_committed_offset(f.offset)
                                    .with_committed_leader_epoch(-1)
                                    .with_metadata(Some(s(&f.metadata)))
                            })
                            .collect();
                        OffsetFetchResponseTopics::default()
                            .with_name(TopicName(s(&topic)))
                            .with_partitions(partitions)
                    })
                    .collect();
                answer.with_topics(topics)
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let group = request.group_id.0.to_string();
    let name = match group_name(&group) {
        Ok(name) => name,
        Err(e) => return OffsetFetchResponse::default().with_error_code(e.code()),
    };
    let wanted = request.topics.map(|topics| {
        topics
            .into_iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes))
            .collect()
    });
    let topics = fetch_group(shared, &name, wanted)
        .into_iter()
        .map(|(topic, rows)| {
            let partitions = rows
                .into_iter()
                .map(|f| {
                    OffsetFetchResponsePartition::default()
                        .with_partition_index(f.partition)
                        .with_committed_offset(f.offset)
                        .with_committed_leader_epoch(-1)
                        .with_metadata(Some(s(&f.metadata)))
                })
                .collect();
            OffsetFetchResponseTopic::default()
                .with_name(TopicName(s(&topic)))
                .with_partitions(partitions)
        })
        .collect();
    OffsetFetchResponse::default().with_topics(topics)
}

/// The topics a "consumer" protocol member subscribes to: the first fields of its
/// metadata (ConsumerProtocolSubscription: a version, then the topic array, in every
/// version). Read by hand, within the bytes there are, because the codec would size the
/// array from its count before reading it (see `guard.rs`); `None` if it does not parse.
pub fn subscribed_topics(mut metadata: &[u8]) -> Option<Vec<String>> {
    fn take<'a>(buf: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (buf.get(..n)?, buf.get(n..)?);
        *buf = rest;
        Some(head)
    }
    take(&mut metadata, 2)?;
    let count = i32::from_be_bytes(take(&mut metadata, 4)?.try_into().ok()?);
    let mut topics = Vec::new();
    for _ in 0..count.max(0) {
        let len = i16::from_be_bytes(take(&mut metadata, 2)?.try_into().ok()?);
        let name = take(&mut metadata, usize::try_from(len).ok()?)?;
        topics.push(String::from_utf8(name.to_vec()).ok()?);
    }
    Some(topics)
}

/// Deletes committed offsets of partitions. A group with members: a topic a "consumer"
/// member subscribes to is GROUP_SUBSCRIBED_TO_TOPIC; a group of another protocol type is
/// NON_EMPTY_GROUP. A group nobody knows is GROUP_ID_NOT_FOUND.
pub fn offset_delete(shared: &Shared, request: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let group = request.group_id.0.to_string();
    let refuse = |e: ResponseError| OffsetDeleteResponse::default().with_error_code(e.code());
    let name = match member_group(&group) {
        Ok(name) => name,
        Err(e) => return refuse(e),
    };
    let view = shared.coordinator.view(&group);
    let has_offsets = shared.broker.list_groups().iter().any(|(_, g)| *g == name);
    if view.is_none() && !has_offsets {
        return refuse(ResponseError::GroupIdNotFound);
    }
    let mut subscribed: Vec<String> = Vec::new();
    if let Some(view) = view.filter(|v| !v.members.is_empty()) {
        if view.protocol_type.as_deref() != Some("consumer") {
            return refuse(ResponseError::NonEmptyGroup);
        }
        let protocol = view.protocol.unwrap_or_default();
        for member in &view.members {
            // Metadata that does not parse cannot show the topic is free: keep it.
            match subscribed_topics(&member.metadata(&protocol)) {
                Some(topics) => subscribed.extend(topics),
                None => return refuse(ResponseError::NonEmptyGroup),
            }
        }
    }
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let topic_name = topic.name.0.to_string();
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let code = if subscribed.contains(&topic_name) {
                        ResponseError::GroupSubscribedToTopic.code()
                    } else if p.partition_index < 0 {
                        ResponseError::UnknownTopicOrPartition.code()
                    } else {
                        let partition = [p.partition_index as u32];
                        match shared.broker.delete_group_offsets(
                            &topic_name,
                            name.as_str(),
                            &partition,
                        ) {
                            Ok(()) => 0,
                            Err(e) => from_broker(&e).code(),
                        }
                    };
                    OffsetDeleteResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                })
                .collect();
            OffsetDeleteResponseTopic::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    OffsetDeleteResponse::default().with_topics(topics)
}
