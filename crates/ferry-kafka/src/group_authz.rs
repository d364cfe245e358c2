//! The consumer group APIs' part of [`Access`] (see `authz.rs`): a group API needs some
//! `consume` permission (GROUP_AUTHORIZATION_FAILED), and the offsets it commits, fetches
//! or deletes need `consume` on their topic (TOPIC_AUTHORIZATION_FAILED per partition) —
//! a Kafka group's offsets are Ferry's group offsets of each topic, read by consumers of
//! that topic.

use ferry_access::Action;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
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
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, OffsetCommitRequest, OffsetCommitResponse,
    OffsetDeleteRequest, OffsetFetchRequest, OffsetFetchResponse,
};

use crate::authz::Access;

const TOPIC_DENIED: ResponseError = ResponseError::TopicAuthorizationFailed;

impl Access {
    /// Whether the user may use consumer groups at all.
    pub fn groups(&self) -> Result<(), ResponseError> {
        self.group("")
    }

    pub fn refuse_find_coordinator(
        code: ResponseError,
        request: &FindCoordinatorRequest,
    ) -> FindCoordinatorResponse {
        let coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| {
                Coordinator::default()
                    .with_key(key.clone())
                    .with_node_id((-1).into())
                    .with_port(-1)
                    .with_error_code(code.code())
            })
            .collect();
        FindCoordinatorResponse::default()
            .with_error_code(code.code())
            .with_node_id((-1).into())
            .with_port(-1)
            .with_coordinators(coordinators)
    }

    pub fn refuse_describe_groups(
        code: ResponseError,
        request: &DescribeGroupsRequest,
    ) -> DescribeGroupsResponse {
        let groups = request
            .groups
            .iter()
            .map(|group| {
                DescribedGroup::default()
                    .with_group_id(group.clone())
                    .with_error_code(code.code())
                    .with_authorized_operations(i32::MIN)
            })
            .collect();
        DescribeGroupsResponse::default().with_groups(groups)
    }

    pub fn refuse_delete_groups(
        code: ResponseError,
        request: &DeleteGroupsRequest,
    ) -> DeleteGroupsResponse {
        let results = request
            .groups_names
            .iter()
            .map(|group| {
                DeletableGroupResult::default()
                    .with_group_id(group.clone())
                    .with_error_code(code.code())
            })
            .collect();
        DeleteGroupsResponse::default().with_results(results)
    }

    pub fn refuse_offset_commit(
        code: ResponseError,
        request: &OffsetCommitRequest,
    ) -> OffsetCommitResponse {
        let topics = request
            .topics
            .iter()
            .map(|topic| commit_refused(topic, code))
            .collect();
        OffsetCommitResponse::default().with_topics(topics)
    }

    pub fn refuse_offset_fetch(
        code: ResponseError,
        request: &OffsetFetchRequest,
    ) -> OffsetFetchResponse {
        let groups = request
            .groups
            .iter()
            .map(|group| {
                OffsetFetchResponseGroup::default()
                    .with_group_id(group.group_id.clone())
                    .with_error_code(code.code())
            })
            .collect();
        OffsetFetchResponse::default()
            .with_error_code(code.code())
            .with_groups(groups)
    }

    /// Takes the topics the user may not consume out of an OffsetCommit; their answers.
    pub fn offset_commit(
        &self,
        request: &mut OffsetCommitRequest,
    ) -> Vec<OffsetCommitResponseTopic> {
        let (allowed, denied) = std::mem::take(&mut request.topics)
            .into_iter()
            .partition(|t| self.may(Action::Consume, t.name.0.as_str()));
        request.topics = allowed;
        denied
            .iter()
            .map(|topic| commit_refused(topic, TOPIC_DENIED))
            .collect()
    }

    /// Takes the topics the user may not consume out of an OffsetFetch (each group's, at
    /// v8); their answers, added by [`Access::complete_offset_fetch`].
    pub fn offset_fetch(&self, request: &mut OffsetFetchRequest) -> OffsetFetchDenials {
        let mut denials = OffsetFetchDenials::default();
        if let Some(topics) = request.topics.as_mut() {
            let (allowed, denied): (Vec<_>, Vec<_>) = std::mem::take(topics)
                .into_iter()
                .partition(|t| self.may(Action::Consume, t.name.0.as_str()));
            *topics = allowed;
            denials.topics = denied
                .into_iter()
                .map(|topic| {
                    let partitions = topic
                        .partition_indexes
                        .iter()
                        .map(|&p| {
                            OffsetFetchResponsePartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(-1)
                                .with_error_code(TOPIC_DENIED.code())
                        })
                        .collect();
                    OffsetFetchResponseTopic::default()
                        .with_name(topic.name)
                        .with_partitions(partitions)
                })
                .collect();
        }
        for group in request.groups.iter_mut() {
            let Some(topics) = group.topics.as_mut() else {
                denials.groups.push(Vec::new());
                continue;
            };
            let (allowed, denied): (Vec<_>, Vec<_>) = std::mem::take(topics)
                .into_iter()
                .partition(|t| self.may(Action::Consume, t.name.0.as_str()));
            *topics = allowed;
            denials.groups.push(
                denied
                    .into_iter()
                    .map(|topic| {
                        let partitions = topic
                            .partition_indexes
                            .iter()
                            .map(|&p| {
                                OffsetFetchResponsePartitions::default()
                                    .with_partition_index(p)
                                    .with_committed_offset(-1)
                                    .with_error_code(TOPIC_DENIED.code())
                            })
                            .collect();
                        OffsetFetchResponseTopics::default()
                            .with_name(topic.name)
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
        }
        denials
    }

    /// Adds the refused topics to an OffsetFetch answer, and takes out of it the topics
    /// the user may not consume that an "every topic" fetch (null topics) listed.
    pub fn complete_offset_fetch(
        &self,
        response: &mut OffsetFetchResponse,
        denials: OffsetFetchDenials,
    ) {
        response
            .topics
            .retain(|t| self.may(Action::Consume, t.name.0.as_str()));
        response.topics.extend(denials.topics);
        for (group, denied) in response.groups.iter_mut().zip(denials.groups) {
            group
                .topics
                .retain(|t| self.may(Action::Consume, t.name.0.as_str()));
            group.topics.extend(denied);
        }
    }

    /// Takes the topics the user may not consume out of an OffsetDelete; their answers.
    pub fn offset_delete(
        &self,
        request: &mut OffsetDeleteRequest,
    ) -> Vec<OffsetDeleteResponseTopic> {
        let (allowed, denied) = std::mem::take(&mut request.topics)
            .into_iter()
            .partition(|t| self.may(Action::Consume, t.name.0.as_str()));
        request.topics = allowed;
        denied
            .into_iter()
            .map(|topic| {
                let partitions = topic
                    .partitions
                    .iter()
                    .map(|p| {
                        OffsetDeleteResponsePartition::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(TOPIC_DENIED.code())
                    })
                    .collect();
                OffsetDeleteResponseTopic::default()
                    .with_name(topic.name)
                    .with_partitions(partitions)
            })
            .collect()
    }
}

/// What [`Access::offset_fetch`] took out of a request: the refused topics of the request
/// itself (v0–7) and of each group (v8, in the request's order).
#[derive(Default)]
pub struct OffsetFetchDenials {
    topics: Vec<OffsetFetchResponseTopic>,
    groups: Vec<Vec<OffsetFetchResponseTopics>>,
}

fn commit_refused(
    topic: &kafka_protocol::messages::offset_commit_request::OffsetCommitRequestTopic,
    code: ResponseError,
) -> OffsetCommitResponseTopic {
    let partitions = topic
        .partitions
        .iter()
        .map(|p| {
            OffsetCommitResponsePartition::default()
                .with_partition_index(p.partition_index)
                .with_error_code(code.code())
        })
        .collect();
    OffsetCommitResponseTopic::default()
        .with_name(topic.name.clone())
        .with_partitions(partitions)
}
