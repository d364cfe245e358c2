//! One module per API family; [`handle`] decodes a request's body and dispatches it.

mod admin;
mod api_versions;
mod assignments;
mod cluster;
mod config_resources;
mod configs;
mod delete_records;
mod elections;
mod fetch;
mod group_offsets;
mod groups;
mod init_producer_id;
mod list_offsets;
mod log_dirs;
mod metadata;
mod partitions;
pub(crate) mod produce;
mod reassignments;
pub mod sasl;
mod topic_partitions;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    AlterConfigsRequest, ApiKey, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteRecordsRequest, DeleteTopicsRequest, DescribeClusterRequest, DescribeConfigsRequest,
    FetchRequest, HeartbeatResponse, IncrementalAlterConfigsRequest, InitProducerIdRequest,
    InitProducerIdResponse, JoinGroupResponse, LeaveGroupResponse, ListGroupsResponse,
    ListOffsetsRequest, MetadataRequest, OffsetDeleteResponse, SyncGroupResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
    DescribeLogDirsRequest, DescribeLogDirsResponse, DescribeTopicPartitionsRequest,
    ElectLeadersRequest, ListConfigResourcesRequest, ListConfigResourcesResponse,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, FindCoordinatorRequest, HeartbeatRequest,
    JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest, OffsetCommitRequest,
    OffsetDeleteRequest, OffsetFetchRequest, SyncGroupRequest,
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
            let produce = produce::Produce::decode(shared, access, request)?;
            let Some(response) = produce.begin(shared).answer(shared).await else {
                return Ok(None);
            };
            produce::encode(request, version, &response)?
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
        ApiKey::InitProducerId => {
            let body: InitProducerIdRequest = decode_body(request)?;
            // A producer id is only of use to publish: some `publish` permission is asked,
            // as Kafka asks IdempotentWrite on the cluster.
            let response = match access.producer_ids() {
                Ok(()) => init_producer_id::answer(shared, body, version),
                Err(code) => InitProducerIdResponse::default()
                    .with_error_code(code.code())
                    .with_producer_id((-1).into())
                    .with_producer_epoch(-1),
            };
            encode_response(request, version, &response)?
        }
        api if is_group_api(api) => return handle_group(shared, node, access, request).await,
        _ => return handle_admin(shared, node, access, request).await,
    };
    Ok(Some(answer))
}

/// The topic and cluster admin APIs beyond CreateTopics and DeleteTopics
/// (`partitions.rs`, `configs.rs`, `cluster.rs`, `delete_records.rs`, `topic_partitions.rs`,
/// `log_dirs.rs`, `config_resources.rs`, `reassignments.rs`, `elections.rs`).
async fn handle_admin(
    shared: &Shared,
    node: &Node,
    access: &Access,
    request: &mut Request,
) -> Result<Option<Bytes>, ConnectionError> {
    let version = request.header.request_api_version;
    let answer = match request.api {
        ApiKey::CreatePartitions => {
            let mut body: CreatePartitionsRequest = decode_body(request)?;
            let denied = access.create_partitions(&mut body);
            let mut response = partitions::create(shared, body).await;
            response.results.extend(denied);
            encode_response(request, version, &response)?
        }
        ApiKey::DescribeConfigs => {
            let mut body: DescribeConfigsRequest = decode_body(request)?;
            let denied = access.describe_configs(&mut body);
            let mut response = configs::describe(shared, node, body, version);
            response.results.extend(denied);
            encode_response(request, version, &response)?
        }
        ApiKey::AlterConfigs => {
            let mut body: AlterConfigsRequest = decode_body(request)?;
            let denied = access.alter_configs(&mut body);
            let mut response = configs::alter(shared, body).await;
            response.responses.extend(denied);
            encode_response(request, version, &response)?
        }
        ApiKey::IncrementalAlterConfigs => {
            let mut body: IncrementalAlterConfigsRequest = decode_body(request)?;
            let denied = access.incremental_alter_configs(&mut body);
            let mut response = configs::incremental_alter(shared, body).await;
            response.responses.extend(denied);
            encode_response(request, version, &response)?
        }
        ApiKey::DescribeCluster => {
            // Any authenticated user: it tells what Metadata tells (this node, the cluster
            // id), as Kafka's Describe on the cluster is granted with any other cluster right.
            let body: DescribeClusterRequest = decode_body(request)?;
            let response = cluster::describe(node, body);
            encode_response(request, version, &response)?
        }
        ApiKey::DeleteRecords => {
            let mut body: DeleteRecordsRequest = decode_body(request)?;
            let denied = access.delete_records(&mut body);
            let mut response = delete_records::answer(shared, body).await;
            response.topics.extend(denied);
            encode_response(request, version, &response)?
        }
        ApiKey::DescribeTopicPartitions => {
            let body: DescribeTopicPartitionsRequest = decode_body(request)?;
            let response = topic_partitions::describe(shared, body, |t| access.sees(t));
            encode_response(request, version, &response)?
        }
        // The cluster-wide APIs below need `admin:#` (`Access::cluster`).
        ApiKey::DescribeLogDirs => {
            let body: DescribeLogDirsRequest = decode_body(request)?;
            let response = match access.cluster() {
                Ok(()) => log_dirs::describe(shared, body),
                Err(code) => DescribeLogDirsResponse::default().with_error_code(code.code()),
            };
            encode_response(request, version, &response)?
        }
        ApiKey::ListConfigResources => {
            let body: ListConfigResourcesRequest = decode_body(request)?;
            let response = match access.cluster() {
                Ok(()) => config_resources::list(shared, body, version),
                Err(code) => ListConfigResourcesResponse::default().with_error_code(code.code()),
            };
            encode_response(request, version, &response)?
        }
        ApiKey::AlterPartitionReassignments => {
            let body: AlterPartitionReassignmentsRequest = decode_body(request)?;
            let response = match access.cluster() {
                Ok(()) => reassignments::alter(shared, body),
                Err(code) => AlterPartitionReassignmentsResponse::default()
                    .with_error_code(code.code())
                    .with_error_message(text(ADMIN_EVERYWHERE)),
            };
            encode_response(request, version, &response)?
        }
        ApiKey::ElectLeaders => {
            let body: ElectLeadersRequest = decode_body(request)?;
            let response = match access.cluster() {
                Ok(()) => elections::elect(shared, body, version),
                Err(code) => elections::refuse(&body, version, code, ADMIN_EVERYWHERE),
            };
            encode_response(request, version, &response)?
        }
        ApiKey::ListPartitionReassignments => {
            let body: ListPartitionReassignmentsRequest = decode_body(request)?;
            let response = match access.cluster() {
                Ok(()) => reassignments::list(body),
                Err(code) => ListPartitionReassignmentsResponse::default()
                    .with_error_code(code.code())
                    .with_error_message(text(ADMIN_EVERYWHERE)),
            };
            encode_response(request, version, &response)?
        }
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
    access: &Access,
    request: &mut Request,
) -> Result<Option<Bytes>, ConnectionError> {
    let version = request.header.request_api_version;
    if let Err(code) = access.groups() {
        return refuse_group(request, code).map(Some);
    }
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
            let mut body: OffsetCommitRequest = decode_body(request)?;
            let denied = access.offset_commit(&mut body);
            let mut response = group_offsets::offset_commit(shared, body, version);
            response.topics.extend(denied);
            encode_response(request, version, &response)?
        }
        ApiKey::OffsetFetch => {
            let mut body: OffsetFetchRequest = decode_body(request)?;
            let denied = access.offset_fetch(&mut body);
            let mut response = group_offsets::offset_fetch(shared, body, version);
            access.complete_offset_fetch(&mut response, denied);
            encode_response(request, version, &response)?
        }
        ApiKey::OffsetDelete => {
            let mut body: OffsetDeleteRequest = decode_body(request)?;
            let denied = access.offset_delete(&mut body);
            let mut response = group_offsets::offset_delete(shared, body);
            response.topics.extend(denied);
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

/// The answer to a group API from a user without any `consume` permission: every group
/// (or coordinator key, or partition) GROUP_AUTHORIZATION_FAILED, in its API's shape.
fn refuse_group(request: &mut Request, code: ResponseError) -> Result<Bytes, ConnectionError> {
    let version = request.header.request_api_version;
    let c = code.code();
    match request.api {
        ApiKey::FindCoordinator => {
            let body: FindCoordinatorRequest = decode_body(request)?;
            let response = Access::refuse_find_coordinator(code, &body);
            encode_response(request, version, &response)
        }
        ApiKey::JoinGroup => {
            let response = JoinGroupResponse::default()
                .with_error_code(c)
                .with_generation_id(-1);
            encode_response(request, version, &response)
        }
        ApiKey::SyncGroup => {
            let response = SyncGroupResponse::default().with_error_code(c);
            encode_response(request, version, &response)
        }
        ApiKey::Heartbeat => {
            let response = HeartbeatResponse::default().with_error_code(c);
            encode_response(request, version, &response)
        }
        ApiKey::LeaveGroup => {
            let response = LeaveGroupResponse::default().with_error_code(c);
            encode_response(request, version, &response)
        }
        ApiKey::OffsetCommit => {
            let body: OffsetCommitRequest = decode_body(request)?;
            let response = Access::refuse_offset_commit(code, &body);
            encode_response(request, version, &response)
        }
        ApiKey::OffsetFetch => {
            let body: OffsetFetchRequest = decode_body(request)?;
            let response = Access::refuse_offset_fetch(code, &body);
            encode_response(request, version, &response)
        }
        ApiKey::OffsetDelete => {
            let response = OffsetDeleteResponse::default().with_error_code(c);
            encode_response(request, version, &response)
        }
        ApiKey::DescribeGroups => {
            let body: DescribeGroupsRequest = decode_body(request)?;
            let response = Access::refuse_describe_groups(code, &body);
            encode_response(request, version, &response)
        }
        ApiKey::ListGroups => {
            let response = ListGroupsResponse::default().with_error_code(c);
            encode_response(request, version, &response)
        }
        ApiKey::DeleteGroups => {
            let body: DeleteGroupsRequest = decode_body(request)?;
            let response = Access::refuse_delete_groups(code, &body);
            encode_response(request, version, &response)
        }
        api => Err(ConnectionError::NotServed { api, version }),
    }
}

/// Why a cluster-wide API was refused.
const ADMIN_EVERYWHERE: &str = "this needs the admin permission on every name";

/// A message for an answer's `error_message` field.
fn text(message: impl Into<String>) -> Option<StrBytes> {
    Some(StrBytes::from_string(message.into()))
}
