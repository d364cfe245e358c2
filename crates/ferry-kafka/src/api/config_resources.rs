//! ListConfigResources (Kafka 4.1+; v0 was ListClientMetricsResources): the resources
//! DescribeConfigs can describe here — every topic, and this node as broker `0`. No types
//! asked for means both. Ferry has no broker-logger, client-metrics or group config
//! resources, so asking for those types lists none; a type Kafka does not know is
//! UNSUPPORTED_VERSION, as Kafka answers. v0 asks for client-metrics resources only, so its
//! answer is empty.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::{ListConfigResourcesRequest, ListConfigResourcesResponse};
use kafka_protocol::protocol::StrBytes;

use super::metadata::NODE_ID;
use crate::Shared;

/// Kafka's config resource types (`ConfigResource.Type`).
const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const BROKER_LOGGER: i8 = 8;
const CLIENT_METRICS: i8 = 16;
const GROUP: i8 = 32;

pub fn list(
    shared: &Shared,
    request: ListConfigResourcesRequest,
    version: i16,
) -> ListConfigResourcesResponse {
    let types = if version == 0 {
        vec![CLIENT_METRICS]
    } else if request.resource_types.is_empty() {
        vec![TOPIC, BROKER]
    } else {
        request.resource_types
    };
    if let Some(unknown) = types
        .iter()
        .find(|t| ![TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP].contains(t))
    {
        tracing::debug!(
            resource_type = *unknown,
            "kafka: unknown config resource type"
        );
        return ListConfigResourcesResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code());
    }
    let mut resources = Vec::new();
    if types.contains(&BROKER) {
        resources.push(resource(NODE_ID.to_string(), BROKER));
    }
    if types.contains(&TOPIC) {
        resources.extend(
            shared
                .broker
                .list_topics()
                .into_iter()
                .map(|name| resource(name.into(), TOPIC)),
        );
    }
    ListConfigResourcesResponse::default().with_config_resources(resources)
}

fn resource(name: String, resource_type: i8) -> ConfigResource {
    ConfigResource::default()
        .with_resource_name(StrBytes::from_string(name))
        .with_resource_type(resource_type)
}
