//! DescribeCluster: this node is the cluster (id `ferry`), its only broker and its
//! controller (node 0), at the advertised address. Asking for controller endpoints (v1)
//! is UNSUPPORTED_ENDPOINT_TYPE, as a Kafka broker answers: clients ask brokers.
//! Authorized operations are not reported (Ferry's Kafka endpoint has no ACLs).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

use super::text;
use crate::connection::Node;

pub const CLUSTER_ID: &str = "ferry";
const BROKERS: i8 = 1;

pub fn describe(node: &Node, request: DescribeClusterRequest) -> DescribeClusterResponse {
    let response = DescribeClusterResponse::default()
        .with_endpoint_type(request.endpoint_type)
        .with_cluster_id(StrBytes::from_static_str(CLUSTER_ID));
    if request.endpoint_type != BROKERS {
        return response
            .with_error_code(ResponseError::UnsupportedEndpointType.code())
            .with_error_message(text(format!(
                "endpoint type {} is not served: this node answers for brokers (1)",
                request.endpoint_type
            )));
    }
    response.with_controller_id(BrokerId(0)).with_brokers(vec![
        DescribeClusterBroker::default()
            .with_broker_id(BrokerId(0))
            .with_host(StrBytes::from_string(node.host.clone()))
            .with_port(i32::from(node.port)),
    ])
}
