//! One module per API family; [`handle`] decodes a request's body and dispatches it.

mod admin;
mod api_versions;
mod fetch;
mod group_offsets;
mod groups;
mod init_producer_id;
mod list_offsets;
mod metadata;
pub(crate) mod produce;

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, DeleteTopicsRequest, FetchRequest, InitProducerIdRequest,
    ListOffsetsRequest, MetadataRequest, ProduceRequest,
};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, FindCoordinatorRequest, HeartbeatRequest,
    JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest, OffsetCommitRequest,
    OffsetDeleteRequest, OffsetFetchRequest, SyncGroupRequest,
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
        api if is_group_api(api) => return handle_group(shared, node, request).await,
        api => return Err(ConnectionError::NotServed { api, version }),
    };
    Ok(Some(answer))
}

fn is_group_api(api: ApiKey) -> bool {
    matches!(
        api,
        ApiKey::FindCoordinator
            | ApiKey::JoinGroup
            | ApiKey::SyncGroup
            | ApiKey::Heartbeat
            | ApiKey::LeaveGroup
            | ApiKey::OffsetCommit
            | ApiKey::OffsetFetch
            | ApiKey::OffsetDelete
            | ApiKey::DescribeGroups
            | ApiKey::ListGroups
            | ApiKey::DeleteGroups
    )
}

/// The consumer group APIs (`groups.rs`, `group_offsets.rs`).
async fn handle_group(
    shared: &Shared,
    node: &Node,
    request: &mut Request,
) -> Result<Option<Bytes>, ConnectionError> {
    let version = request.header.request_api_version;
    let answer = match request.api {
        ApiKey::FindCoordinator => {
            let body: FindCoordinatorRequest = decode_body(request)?;
            let response = groups::find_coordinator(node, body, version);
            encode_response(request, version, &response)?
        }
        ApiKey::JoinGroup => {
            let body: JoinGroupRequest = decode_body(request)?;
            let client_id = request.header.client_id.as_deref().unwrap_or("").to_owned();
            let response = groups::join_group(shared, &client_id, body, version).await;
            encode_response(request, version, &response)?
        }
        ApiKey::SyncGroup => {
            let body: SyncGroupRequest = decode_body(request)?;
            let response = groups::sync_group(shared, body).await;
            encode_response(request, version, &response)?
        }
        ApiKey::Heartbeat => {
            let body: HeartbeatRequest = decode_body(request)?;
            let response = groups::heartbeat(shared, body);
            encode_response(request, version, &response)?
        }
        ApiKey::LeaveGroup => {
            let body: LeaveGroupRequest = decode_body(request)?;
            let response = groups::leave_group(shared, body, version);
            encode_response(request, version, &response)?
        }
        ApiKey::OffsetCommit => {
            let body: OffsetCommitRequest = decode_body(request)?;
            let response = group_offsets::offset_commit(shared, body, version);
            encode_response(request, version, &response)?
        }
        ApiKey::OffsetFetch => {
            let body: OffsetFetchRequest = decode_body(request)?;
            let response = group_offsets::offset_fetch(shared, body, version);
            encode_response(request, version, &response)?
        }
        ApiKey::OffsetDelete => {
            let body: OffsetDeleteRequest = decode_body(request)?;
            let response = group_offsets::offset_delete(shared, body);
            encode_response(request, version, &response)?
        }
        ApiKey::DescribeGroups => {
            let body: DescribeGroupsRequest = decode_body(request)?;
            let response = groups::describe_groups(shared, body);
            encode_response(request, version, &response)?
        }
        ApiKey::ListGroups => {
            let body: ListGroupsRequest = decode_body(request)?;
            let response = groups::list_groups(shared, body);
            encode_response(request, version, &response)?
        }
        ApiKey::DeleteGroups => {
            let body: DeleteGroupsRequest = decode_body(request)?;
            let response = groups::delete_groups(shared, body);
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
