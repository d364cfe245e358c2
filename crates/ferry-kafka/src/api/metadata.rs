//! Metadata: this node as the one broker and the leader of every partition, and the topics
//! asked for (all of them when the request names none, or for v0 an empty list). A topic
//! asked for that does not exist is created with the default partition count when
//! auto-creation is on and the client allows it (v4+; older clients always do).

use ferry_broker::{BrokerError, TopicSpec};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::connection::Node;
use crate::{Shared, errors};

/// This node's id: the only broker of the cluster.
pub const NODE_ID: i32 = 0;
/// Named in Metadata v2+; one Ferry server is one cluster.
const CLUSTER_ID: &str = "ferry";

pub async fn answer(
    shared: &Shared,
    node: &Node,
    request: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    // Topics named by id only (v10+) cannot be found: Ferry keeps no topic ids.
    let mut by_id_only = Vec::new();
    let names: Vec<String> = match request.topics {
        Some(topics) if !(version == 0 && topics.is_empty()) => topics
            .into_iter()
            .filter_map(|t| match t.name {
                Some(name) => Some(name.0.to_string()),
                None => {
                    by_id_only.push(
                        MetadataResponseTopic::default()
                            .with_topic_id(t.topic_id)
                            .with_error_code(ResponseError::UnknownTopicId.code()),
                    );
                    None
                }
            })
            .collect(),
        _ => shared
            .broker
            .list_topics()
            .iter()
            .map(|n| n.to_string())
            .collect(),
    };
    let may_create =
        shared.config.auto_create_topics && (version < 4 || request.allow_auto_topic_creation);
    let mut topics = by_id_only;
    for name in names {
        topics.push(describe(shared, &name, may_create).await);
    }
    let broker = MetadataResponseBroker::default()
        .with_node_id(BrokerId(NODE_ID))
        .with_host(StrBytes::from_string(node.host.clone()))
        .with_port(i32::from(node.port));
    MetadataResponse::default()
        .with_brokers(vec![broker])
        .with_cluster_id(Some(StrBytes::from_static_str(CLUSTER_ID)))
        .with_controller_id(BrokerId(NODE_ID))
        .with_topics(topics)
}

async fn describe(shared: &Shared, name: &str, may_create: bool) -> MetadataResponseTopic {
    let topic = MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(name.to_owned()))));
    let mut info = shared.broker.describe_topic(name);
    if may_create && matches!(info, Err(BrokerError::TopicNotFound { .. })) {
        let spec = TopicSpec::with_partitions(shared.config.default_partitions);
        match shared.broker.create_topic(name, spec).await {
            // Another connection created it first: describe theirs.
            Ok(()) | Err(BrokerError::TopicExists { .. }) => {
                tracing::info!(topic = name, "kafka: created the topic on metadata");
                info = shared.broker.describe_topic(name);
            }
            Err(e) => info = Err(e),
        }
    }
    match info {
        Ok(info) => topic.with_partitions(
            info.partitions
                .iter()
                .map(|p| {
                    MetadataResponsePartition::default()
                        .with_partition_index(p.partition as i32)
                        .with_leader_id(BrokerId(NODE_ID))
                        .with_leader_epoch(0)
                        .with_replica_nodes(vec![BrokerId(NODE_ID)])
                        .with_isr_nodes(vec![BrokerId(NODE_ID)])
                })
                .collect(),
        ),
        // A missing topic is UNKNOWN_TOPIC_OR_PARTITION, a name Ferry cannot hold
        // INVALID_TOPIC_EXCEPTION: the broker's kinds give both.
        Err(e) => topic.with_error_code(errors::from_broker(&e).code()),
    }
}
