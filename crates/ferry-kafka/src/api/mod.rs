//! One module per API family; [`handle`] decodes a request's body and dispatches it.

mod admin;
mod api_versions;
mod fetch;
mod list_offsets;
mod metadata;
mod produce;
pub mod sasl;

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, DeleteTopicsRequest, FetchRequest, ListOffsetsRequest,
    MetadataRequest, ProduceRequest,
};
use kafka_protocol::protocol::StrBytes;

use crate::Shared;
use crate::authz::Access;
use crate::connection::{ConnectionError, Node, Request, decode_body, encode_response};

/// The encoded answer to `request`, `None` when Kafka sends none (Produce with acks 0).
/// `access` is who is calling: each arm refuses what it may not do (see `authz.rs`).
pub async fn handle(
    shared: &Shared,
    node: &Node,
    access: &Access,
    request: &mut Request,
) -> Result<Option<Bytes>, ConnectionError> {
    let version = request.header.request_api_version;
    let answer = match request.api {
        ApiKey::ApiVersions => {
            let (answer_version, response) = api_versions::answer(version);
            encode_response(request, answer_version, &response)?
        }
        ApiKey::Metadata => {
            let mut body: MetadataRequest = decode_body(request)?;
            let check = access.metadata(&shared.broker, &mut body, version);
            let mut response = metadata::answer(shared, node, body, version).await;
            check.apply(&mut response);
            encode_response(request, version, &response)?
        }
        ApiKey::CreateTopics => {
            let mut body: CreateTopicsRequest = decode_body(request)?;
            let denied = access.create_topics(&mut body);
            let mut response = admin::create_topics(shared, body).await;
            response.topics.extend(denied);
            encode_response(request, version, &response)?
        }
        ApiKey::DeleteTopics => {
            let mut body: DeleteTopicsRequest = decode_body(request)?;
            let denied = access.delete_topics(&mut body);
            let mut response = admin::delete_topics(shared, body).await;
            response.responses.extend(denied);
            encode_response(request, version, &response)?
        }
        ApiKey::Produce => {
            let mut body: ProduceRequest = decode_body(request)?;
            let denied = access.produce(&mut body);
            let Some(mut response) = produce::answer(shared, body, version).await else {
                return Ok(None);
            };
            response.responses.extend(denied);
            encode_response(request, version, &response)?
        }
        ApiKey::Fetch => {
            let mut body: FetchRequest = decode_body(request)?;
            let denied = access.fetch(&mut body);
            let mut response = fetch::answer(shared, body).await;
            response.responses.extend(denied);
            encode_response(request, version, &response)?
        }
        ApiKey::ListOffsets => {
            let mut body: ListOffsetsRequest = decode_body(request)?;
            let denied = access.list_offsets(&mut body);
            let mut response = list_offsets::answer(shared, body);
            response.topics.extend(denied);
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
