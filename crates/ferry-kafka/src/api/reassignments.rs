//! Partition reassignments on one node. Ferry is the only replica of every partition, so
//! no partition is ever being moved: ListPartitionReassignments is always an empty list
//! (for the partitions named as for all of them; Kafka too lists nothing for a partition
//! it does not know). AlterPartitionReassignments takes the one assignment that exists —
//! replicas `[0]`, what the partition already has, which Kafka completes at once with no
//! error — and refuses any other replica set with INVALID_REPLICA_ASSIGNMENT (there is no
//! other broker to move to). Cancelling (no replicas) is NO_REASSIGNMENT_IN_PROGRESS, and a
//! missing topic or partition UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_partition_reassignments_request::ReassignablePartition;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};

use super::metadata::NODE_ID;
use super::text;
use crate::{Shared, errors};

pub fn list(_request: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse {
    ListPartitionReassignmentsResponse::default()
}

pub fn alter(
    shared: &Shared,
    request: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    let responses = request
        .topics
        .into_iter()
        .map(|topic| {
            let info = shared.broker.describe_topic(topic.name.as_str());
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let outcome = match &info {
                        Err(e) => Err((errors::from_broker(e), e.to_string())),
                        Ok(info) if !exists(p, info.partitions.len()) => Err((
                            ResponseError::UnknownTopicOrPartition,
                            format!("the topic has no partition {}", p.partition_index),
                        )),
                        Ok(_) => reassign(p),
                    };
                    let answer = ReassignablePartitionResponse::default()
                        .with_partition_index(p.partition_index);
                    match outcome {
                        Ok(()) => answer.with_error_message(None),
                        Err((code, message)) => answer
                            .with_error_code(code.code())
                            .with_error_message(text(message)),
                    }
                })
                .collect();
            ReassignableTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    AlterPartitionReassignmentsResponse::default()
        .with_allow_replication_factor_change(request.allow_replication_factor_change)
        .with_responses(responses)
}

fn exists(partition: &ReassignablePartition, count: usize) -> bool {
    usize::try_from(partition.partition_index).is_ok_and(|i| i < count)
}

fn reassign(partition: &ReassignablePartition) -> Result<(), (ResponseError, String)> {
    match partition.replicas.as_deref() {
        None => Err((
            ResponseError::NoReassignmentInProgress,
            "no reassignment is in progress: this node is the partition's only replica".into(),
        )),
        Some([BrokerId(NODE_ID)]) => Ok(()),
        Some(other) => Err((
            ResponseError::InvalidReplicaAssignment,
            format!(
                "replicas {:?} cannot be assigned: this cluster is one node, broker {NODE_ID}, \
                 and [{NODE_ID}] is the only replica set",
                other.iter().map(|b| b.0).collect::<Vec<_>>()
            ),
        )),
    }
}
