//! CreatePartitions through [`Broker::add_partitions`](ferry_broker::Broker::add_partitions):
//! a topic's partition count only grows (a count not above the current one is
//! INVALID_PARTITIONS, as in Kafka); explicit replica assignments are taken when they place
//! each new partition on this node alone, one assignment per new partition
//! (`assignments.rs`; else INVALID_REPLICA_ASSIGNMENT); a topic named twice in one request is INVALID_REQUEST for
//! each mention; `validate_only` checks and adds nothing. Growing a keyed topic moves most
//! keys to other partitions, as it does in Kafka.

use std::collections::HashMap;

use ferry_broker::{BrokerError, ErrorKind, TopicSpec};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};

use super::text;
use crate::{Shared, errors};

pub async fn create(shared: &Shared, request: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let mut mentions: HashMap<&str, usize> = HashMap::new();
    for topic in &request.topics {
        *mentions.entry(topic.name.0.as_str()).or_default() += 1;
    }
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let outcome = if mentions[topic.name.0.as_str()] > 1 {
            Err((
                ResponseError::InvalidRequest,
                format!("topic {} is named more than once", topic.name.0.as_str()),
            ))
        } else {
            grow(shared, topic, request.validate_only).await
        };
        let result = CreatePartitionsTopicResult::default().with_name(topic.name.clone());
        results.push(match outcome {
            Ok(()) => result,
            Err((code, message)) => result
                .with_error_code(code.code())
                .with_error_message(text(message)),
        });
    }
    CreatePartitionsResponse::default().with_results(results)
}

async fn grow(
    shared: &Shared,
    topic: &CreatePartitionsTopic,
    validate_only: bool,
) -> Result<(), (ResponseError, String)> {
    let name = topic.name.0.as_str();
    if let Some(assignments) = topic.assignments.as_ref().filter(|a| !a.is_empty()) {
        super::assignments::on_this_node(assignments.iter().map(|a| a.broker_ids.as_slice()))?;
        let current = shared
            .broker
            .describe_topic(name)
            .map_err(|e| (errors::from_broker(&e), e.to_string()))?
            .spec
            .partitions;
        let new = i64::from(topic.count) - i64::from(current);
        if new > 0 && assignments.len() as i64 != new {
            return Err((
                ResponseError::InvalidReplicaAssignment,
                format!(
                    "{} assignments for {new} new partitions: give one per new partition",
                    assignments.len()
                ),
            ));
        }
    }
    let refused = |e: BrokerError| {
        let code = match (&e, e.kind()) {
            (BrokerError::PartitionsCanOnlyGrow { .. }, _) | (_, ErrorKind::Invalid) => {
                ResponseError::InvalidPartitions
            }
            _ => errors::from_broker(&e),
        };
        (code, e.to_string())
    };
    let count = u32::try_from(topic.count).map_err(|_| {
        (
            ResponseError::InvalidPartitions,
            format!("{} partitions: a topic has at least 1", topic.count),
        )
    })?;
    if validate_only {
        let current = shared.broker.describe_topic(name).map_err(refused)?.spec;
        if count <= current.partitions {
            return Err(refused(BrokerError::PartitionsCanOnlyGrow {
                topic: ferry_broker::Name::new(name).map_err(refused)?,
                current: current.partitions,
                requested: count,
            }));
        }
        return TopicSpec {
            partitions: count,
            ..current
        }
        .validate()
        .map_err(refused);
    }
    shared
        .broker
        .add_partitions(name, count)
        .await
        .map_err(refused)
}
