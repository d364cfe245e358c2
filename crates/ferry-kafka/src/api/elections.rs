//! ElectLeaders: this node leads every partition and is its only replica, so it is
//! already the preferred leader and no election (preferred or unclean) has anything to do.
//! Each partition named is ELECTION_NOT_NEEDED, Kafka's answer when the leader it would
//! elect already leads; a missing topic or partition is UNKNOWN_TOPIC_OR_PARTITION. With
//! no partitions named (every partition), Kafka lists only partitions whose election did
//! something, so the list is empty. An election type other than preferred (0) or unclean
//! (1) is INVALID_REQUEST.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse};

use super::text;
use crate::{Shared, errors};

const PREFERRED: i8 = 0;
const UNCLEAN: i8 = 1;

pub fn elect(shared: &Shared, request: ElectLeadersRequest, version: i16) -> ElectLeadersResponse {
    // v0 has no election type: always preferred.
    if ![PREFERRED, UNCLEAN].contains(&request.election_type) {
        let message = format!(
            "election type {} is neither preferred (0) nor unclean (1)",
            request.election_type
        );
        return refuse(&request, version, ResponseError::InvalidRequest, &message);
    }
    let results = request
        .topic_partitions
        .unwrap_or_default()
        .into_iter()
        .map(|topic| {
            let info = shared.broker.describe_topic(topic.topic.as_str());
            let partition_result = topic
                .partitions
                .iter()
                .map(|&index| {
                    let (code, message) = match &info {
                        Err(e) => (errors::from_broker(e), e.to_string()),
                        Ok(info)
                            if usize::try_from(index).is_ok_and(|i| i < info.partitions.len()) =>
                        {
                            (
                                ResponseError::ElectionNotNeeded,
                                "this node already leads the partition: it is its only replica"
                                    .to_owned(),
                            )
                        }
                        Ok(_) => (
                            ResponseError::UnknownTopicOrPartition,
                            format!("the topic has no partition {index}"),
                        ),
                    };
                    PartitionResult::default()
                        .with_partition_id(index)
                        .with_error_code(code.code())
                        .with_error_message(text(message))
                })
                .collect();
            ReplicaElectionResult::default()
                .with_topic(topic.topic)
                .with_partition_result(partition_result)
        })
        .collect();
    ElectLeadersResponse::default().with_replica_election_results(results)
}

/// The whole request refused with `code`: at the top (v1+; v0 has no such field) and for
/// every partition named.
pub fn refuse(
    request: &ElectLeadersRequest,
    version: i16,
    code: ResponseError,
    message: &str,
) -> ElectLeadersResponse {
    let results = request
        .topic_partitions
        .iter()
        .flatten()
        .map(|topic| {
            ReplicaElectionResult::default()
                .with_topic(topic.topic.clone())
                .with_partition_result(
                    topic
                        .partitions
                        .iter()
                        .map(|&index| {
                            PartitionResult::default()
                                .with_partition_id(index)
                                .with_error_code(code.code())
                                .with_error_message(text(message))
                        })
                        .collect(),
                )
        })
        .collect();
    ElectLeadersResponse::default()
        .with_error_code(if version >= 1 { code.code() } else { 0 })
        .with_replica_election_results(results)
}
