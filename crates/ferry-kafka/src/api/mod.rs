//! One module per API family; [`handle`] decodes a request's body and dispatches it.

mod admin;
mod api_versions;
mod cluster;
mod configs;
mod delete_records;
mod fetch;
mod list_offsets;
mod metadata;
mod partitions;
mod produce;

use bytes::Bytes;
use kafka_protocol::messages::{
    AlterConfigsRequest, ApiKey, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteRecordsRequest, DeleteTopicsRequest, DescribeClusterRequest, DescribeConfigsRequest,
    FetchRequest, IncrementalAlterConfigsRequest, ListOffsetsRequest, MetadataRequest,
    ProduceRequest,
};
use kafka_protocol::protocol::StrBytes;

use crate::Shared;
use crate::connection::{ConnectionError, Node, Request, decode_body, encode_response};

/// The encoded answer to `request`, `None` when Kafka sends none (Produce with acks 0).
pub async fn handle(
    shared: &Shared,
    node: &Node,
    request: &mut Request,
) -> Result<Option<Bytes>, ConnectionError> {
    let version = request.header.request_api_version;
    let answer = match request.api {
        ApiKey::ApiVersions => {
            let (answer_version, response) = api_versions::answer(version);
            encode_response(request, answer_version, &response)?
        }
        ApiKey::Metadata => {
            let body: MetadataRequest = decode_body(request)?;
            let response = metadata::answer(shared, node, body, version).await;
            encode_response(request, version, &response)?
        }
        ApiKey::CreateTopics => {
            let body: CreateTopicsRequest = decode_body(request)?;
            let response = admin::create_topics(shared, body).await;
            encode_response(request, version, &response)?
        }
        ApiKey::DeleteTopics => {
            let body: DeleteTopicsRequest = decode_body(request)?;
            let response = admin::delete_topics(shared, body).await;
            encode_response(request, version, &response)?
        }
        ApiKey::Produce => {
            let body: ProduceRequest = decode_body(request)?;
            let Some(response) = produce::answer(shared, body, version).await else {
                return Ok(None);
            };
            encode_response(request, version, &response)?
        }
        ApiKey::Fetch => {
            let body: FetchRequest = decode_body(request)?;
            let response = fetch::answer(shared, body).await;
            encode_response(request, version, &response)?
        }
        ApiKey::ListOffsets => {
            let body: ListOffsetsRequest = decode_body(request)?;
            let response = list_offsets::answer(shared, body);
            encode_response(request, version, &response)?
        }
        ApiKey::CreatePartitions => {
            let body: CreatePartitionsRequest = decode_body(request)?;
            let response = partitions::create(shared, body).await;
            encode_response(request, version, &response)?
        }
        ApiKey::DescribeConfigs => {
            let body: DescribeConfigsRequest = decode_body(request)?;
            let response = configs::describe(shared, body, version);
            encode_response(request, version, &response)?
        }
        ApiKey::AlterConfigs => {
            let body: AlterConfigsRequest = decode_body(request)?;
            let response = configs::alter(shared, body).await;
            encode_response(request, version, &response)?
        }
        ApiKey::IncrementalAlterConfigs => {
            let body: IncrementalAlterConfigsRequest = decode_body(request)?;
            let response = configs::incremental_alter(shared, body).await;
            encode_response(request, version, &response)?
        }
        ApiKey::DescribeCluster => {
            let body: DescribeClusterRequest = decode_body(request)?;
            let response = cluster::describe(node, body);
            encode_response(request, version, &response)?
        }
        ApiKey::DeleteRecords => {
            let body: DeleteRecordsRequest = decode_body(request)?;
            let response = delete_records::answer(shared, body).await;
            encode_response(request, version, &response)?
        }
        api => return Err(ConnectionError::NotServed { api, version }),
    };
    Ok(Some(answer))
}

/// A message for an answer's `error_message` field.
fn text(message: impl Into<String>) -> Option<StrBytes> {
    Some(StrBytes::from_string(message.into()))
}
