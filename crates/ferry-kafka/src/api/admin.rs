//! CreateTopics and DeleteTopics. A topic is created with its partition count (the
//! default for -1); a replication factor other than -1 or 1 is refused
//! (INVALID_REPLICATION_FACTOR: one node); explicit replica assignments are taken when
//! they place each partition on this node alone (`assignments.rs`), the partition count
//! then being theirs, as Kafka has it. Topic configs are those AlterConfigs takes (`topic_config.rs`); any
//! other key is INVALID_CONFIG, never ignored. `validate_only` checks the name and spec and
//! creates nothing.

use ferry_broker::{Name, TopicSpec};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
};

use super::text;
use crate::topic_config::{self, Op};
use crate::{Shared, errors};

pub async fn create_topics(shared: &Shared, request: CreateTopicsRequest) -> CreateTopicsResponse {
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let result = CreatableTopicResult::default().with_name(topic.name.clone());
        let outcome = create(shared, &topic, request.validate_only).await;
        results.push(match outcome {
            Ok(()) => result,
            Err((code, message)) => result
                .with_error_code(code.code())
                .with_error_message(text(message)),
        });
    }
    CreateTopicsResponse::default().with_topics(results)
}

async fn create(
    shared: &Shared,
    topic: &CreatableTopic,
    validate_only: bool,
) -> Result<(), (ResponseError, String)> {
    let name = topic.name.0.as_str();
    if !topic.assignments.is_empty() {
        // Kafka: with assignments, the count and the replication factor come from them.
        if topic.num_partitions != -1 || topic.replication_factor != -1 {
            return Err((
                ResponseError::InvalidRequest,
                "with replica assignments, num_partitions and replication_factor must be -1".into(),
            ));
        }
        let mut indexes: Vec<i32> = topic
            .assignments
            .iter()
            .map(|a| a.partition_index)
            .collect();
        indexes.sort_unstable();
        if indexes.iter().enumerate().any(|(i, &p)| p != i as i32) {
            return Err((
                ResponseError::InvalidReplicaAssignment,
                format!(
                    "assignments for partitions {indexes:?}: give partitions 0 to n-1, once each"
                ),
            ));
        }
        super::assignments::on_this_node(
            topic.assignments.iter().map(|a| a.broker_ids.as_slice()),
        )?;
    }
    if !matches!(topic.replication_factor, -1 | 1) {
        return Err((
            ResponseError::InvalidReplicationFactor,
            format!(
                "replication factor {} is more than the one node Ferry has",
                topic.replication_factor
            ),
        ));
    }
    let partitions = match topic.num_partitions {
        -1 if !topic.assignments.is_empty() => topic.assignments.len() as u32,
        -1 => shared.config.default_partitions,
        n if n >= 1 => n as u32,
        n => {
            return Err((
                ResponseError::InvalidPartitions,
                format!("{n} partitions: a topic has at least 1"),
            ));
        }
    };
    // Topic configs as AlterConfigs takes them (`topic_config.rs`): a key Ferry does not
    // have is INVALID_CONFIG, never ignored.
    let changes: Vec<(String, Op)> = topic
        .configs
        .iter()
        .map(|c| {
            let name = c.name.to_string();
            c.value
                .as_ref()
                .map(|v| (name.clone(), Op::Set(v.to_string())))
                .ok_or_else(|| {
                    (
                        ResponseError::InvalidConfig,
                        format!("{name} has no value; give one"),
                    )
                })
        })
        .collect::<Result<_, _>>()?;
    let spec = topic_config::apply(
        name,
        &TopicSpec::with_partitions(partitions),
        &changes,
        true,
    )
    .map_err(|e| (ResponseError::InvalidConfig, e.0))?;
    let broker_error = |e: ferry_broker::BrokerError| {
        let code = match (&e, errors::from_broker(&e)) {
            // A partition count the broker refuses is Kafka's INVALID_PARTITIONS; another
            // setting (from the topic's configs) is INVALID_CONFIG.
            (
                ferry_broker::BrokerError::InvalidSetting {
                    setting: "partitions",
                    ..
                },
                _,
            ) => ResponseError::InvalidPartitions,
            (ferry_broker::BrokerError::InvalidSetting { .. }, _) => ResponseError::InvalidConfig,
            (_, code) => code,
        };
        (code, e.to_string())
    };
    if validate_only {
        Name::new(name).map_err(broker_error)?;
        spec.validate().map_err(broker_error)?;
        if shared.broker.describe_topic(name).is_ok() {
            return Err((
                ResponseError::TopicAlreadyExists,
                format!("topic {name} exists already"),
            ));
        }
        return Ok(());
    }
    shared
        .broker
        .create_topic(name, spec)
        .await
        .map_err(broker_error)
}

pub async fn delete_topics(shared: &Shared, request: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let mut results = Vec::with_capacity(request.topic_names.len());
    for name in request.topic_names {
        let result = DeletableTopicResult::default().with_name(Some(name.clone()));
        results.push(match shared.broker.delete_topic(name.0.as_str()).await {
            Ok(()) => result,
            Err(e) => result
                .with_error_code(errors::from_broker(&e).code())
                .with_error_message(text(e.to_string())),
        });
    }
    DeleteTopicsResponse::default().with_responses(results)
}
