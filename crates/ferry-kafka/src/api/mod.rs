//! One module per API family; [`handle`] decodes a request's body and dispatches it.

mod admin;
mod api_versions;
mod fetch;
mod init_producer_id;
mod list_offsets;
mod metadata;
pub(crate) mod produce;

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, DeleteTopicsRequest, FetchRequest, InitProducerIdRequest,
    ListOffsetsRequest, MetadataRequest, ProduceRequest,
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
        ApiKey::Produce if version < 3 => {
            let body = produce::decode_before_v3(request)?;
            let Some(response) = produce::answer(shared, body, version).await else {
                return Ok(None);
            };
            produce::encode_before_v3(request, version, &response)
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
        ApiKey::InitProducerId => {
            let body: InitProducerIdRequest = decode_body(request)?;
            let response = init_producer_id::answer(shared, body, version);
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
