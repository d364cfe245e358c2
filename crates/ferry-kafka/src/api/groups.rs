//! Consumer group membership: FindCoordinator, JoinGroup, SyncGroup, Heartbeat and
//! LeaveGroup onto the coordinator (`coordinator/`), and the admin side — DescribeGroups,
//! ListGroups, DeleteGroups — over the coordinator's groups and the broker's committed
//! offsets. A Kafka group id is any string, shown to Kafka clients as they gave it; its
//! offsets are the broker's group named after it (`group_id.rs`).

use std::collections::BTreeMap;

use bytes::Bytes;
use ferry_broker::Name;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::find_coordinator_response::Coordinator as Found;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    BrokerId, DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest,
    DescribeGroupsResponse, FindCoordinatorRequest, FindCoordinatorResponse, GroupId,
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, ListGroupsRequest, ListGroupsResponse, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::text;
use crate::connection::Node;
use crate::coordinator::{GroupError, JoinReply, JoinRequest, State, SyncRequest};
use crate::{Shared, group_id};

/// Kafka's code for a coordinator refusal.
pub fn code(error: GroupError) -> ResponseError {
    match error {
        GroupError::UnknownMemberId => ResponseError::UnknownMemberId,
        GroupError::IllegalGeneration => ResponseError::IllegalGeneration,
        GroupError::RebalanceInProgress => ResponseError::RebalanceInProgress,
        GroupError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
        GroupError::FencedInstanceId => ResponseError::FencedInstanceId,
        GroupError::MemberIdRequired => ResponseError::MemberIdRequired,
        GroupError::GroupMaxSizeReached => ResponseError::GroupMaxSizeReached,
        GroupError::InvalidSessionTimeout => ResponseError::InvalidSessionTimeout,
        GroupError::NonEmptyGroup => ResponseError::NonEmptyGroup,
    }
}

fn error_code(result: Result<(), GroupError>) -> i16 {
    result.err().map_or(0, |e| code(e).code())
}

/// The broker group holding the offsets of the Kafka group `group` (see `group_id.rs`), or
/// INVALID_GROUP_ID for an id too long to name one — logged, as the code cannot say why.
pub fn group_name(group: &str) -> Result<Name, ResponseError> {
    group_id::to_name(group).map_err(|e| {
        tracing::warn!(error = %e, "kafka: group id refused (INVALID_GROUP_ID)");
        ResponseError::InvalidGroupId
    })
}

/// A group id for the membership APIs: one with a name, and not empty — Kafka takes the
/// empty id only for committed offsets and the admin APIs, from before group ids were
/// required.
pub fn member_group(group: &str) -> Result<Name, ResponseError> {
    if group.is_empty() {
        return Err(ResponseError::InvalidGroupId);
    }
    group_name(group)
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// The group coordinator for a key: this node for groups; transaction coordinators
/// (key type 1) are not served — there are no transactions — so INVALID_REQUEST, as Kafka
/// answers a coordinator type it does not have.
pub fn find_coordinator(
    node: &Node,
    request: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let answer = |key: &StrBytes| -> Found {
        let found = Found::default().with_key(key.clone());
        if request.key_type == 0 {
            found
                .with_node_id(BrokerId(0))
                .with_host(s(&node.host))
                .with_port(i32::from(node.port))
        } else {
            found
                .with_node_id(BrokerId(-1))
                .with_port(-1)
                .with_error_code(ResponseError::InvalidRequest.code())
                .with_error_message(text(format!(
                    "coordinator type {} is not served: only consumer groups (0) are; this \
                     broker has no transactions",
                    request.key_type
                )))
        }
    };
    if version >= 4 {
        let coordinators = request.coordinator_keys.iter().map(answer).collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let found = answer(&request.key);
    FindCoordinatorResponse::default()
        .with_error_code(found.error_code)
        .with_error_message(found.error_message)
        .with_node_id(found.node_id)
        .with_host(found.host)
        .with_port(found.port)
}

pub async fn join_group(
    shared: &Shared,
    client_id: &str,
    request: JoinGroupRequest,
    version: i16,
) -> JoinGroupResponse {
    let group = request.group_id.0.to_string();
    let reply = if member_group(&group).is_err() {
        None
    } else {
        let join = JoinRequest {
            member_id: request.member_id.to_string(),
            instance_id: request.group_instance_id.map(|i| i.to_string()),
            client_id: client_id.to_owned(),
            client_host: String::new(),
            session_timeout_ms: request.session_timeout_ms,
            // v0 has none: the session timeout stands in, as Kafka does.
            rebalance_timeout_ms: if version >= 1 {
                request.rebalance_timeout_ms
            } else {
                request.session_timeout_ms
            },
            protocol_type: request.protocol_type.to_string(),
            protocols: request
                .protocols
                .into_iter()
                .map(|p| (p.name.to_string(), p.metadata))
                .collect(),
            require_known_member_id: version >= 4,
        };
        let now = shared.broker.now_ms();
        Some(shared.coordinator.join(&group, join, now).await)
    };
    let Some(reply) = reply else {
        return JoinGroupResponse::default()
            .with_error_code(ResponseError::InvalidGroupId.code())
            .with_generation_id(-1)
            .with_member_id(request.member_id);
    };
    join_response(reply)
}

fn join_response(reply: JoinReply) -> JoinGroupResponse {
    let members = reply
        .members
        .into_iter()
        .map(|m| {
            JoinGroupResponseMember::default()
                .with_member_id(s(&m.member_id))
                .with_group_instance_id(m.instance_id.as_deref().map(s))
                .with_metadata(m.metadata)
        })
        .collect();
    JoinGroupResponse::default()
        .with_error_code(reply.error.map_or(0, |e| code(e).code()))
        .with_generation_id(reply.generation)
        .with_protocol_type(reply.protocol_type.as_deref().map(s))
        .with_protocol_name(reply.protocol.as_deref().map(s))
        .with_leader(s(&reply.leader))
        .with_member_id(s(&reply.member_id))
        .with_members(members)
}

pub async fn sync_group(shared: &Shared, request: SyncGroupRequest) -> SyncGroupResponse {
    let group = request.group_id.0.to_string();
    if let Err(e) = member_group(&group) {
        return SyncGroupResponse::default().with_error_code(e.code());
    }
    let sync = SyncRequest {
        member_id: request.member_id.to_string(),
        instance_id: request.group_instance_id.map(|i| i.to_string()),
        generation: request.generation_id,
        protocol_type: request.protocol_type.map(|p| p.to_string()),
        protocol: request.protocol_name.map(|p| p.to_string()),
        assignments: request
            .assignments
            .into_iter()
            .map(|a| (a.member_id.to_string(), a.assignment))
            .collect(),
    };
    let now = shared.broker.now_ms();
    match shared.coordinator.sync(&group, sync, now).await {
        Ok(synced) => SyncGroupResponse::default()
            .with_protocol_type(synced.protocol_type.as_deref().map(s))
            .with_protocol_name(synced.protocol.as_deref().map(s))
            .with_assignment(synced.assignment),
        Err(e) => SyncGroupResponse::default().with_error_code(code(e).code()),
    }
}

pub fn heartbeat(shared: &Shared, request: HeartbeatRequest) -> HeartbeatResponse {
    let group = request.group_id.0.to_string();
    if let Err(e) = member_group(&group) {
        return HeartbeatResponse::default().with_error_code(e.code());
    }
    let result = shared.coordinator.heartbeat(
        &group,
        &request.member_id,
        request.group_instance_id.as_deref(),
        request.generation_id,
        shared.broker.now_ms(),
    );
    HeartbeatResponse::default().with_error_code(error_code(result))
}

/// v0–2 name one member; v3+ a batch, each with its own code (and the top-level code
/// that of the first refusal, as Kafka sets it for a batch of one).
pub fn leave_group(
    shared: &Shared,
    request: LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    let group = request.group_id.0.to_string();
    if let Err(e) = member_group(&group) {
        return LeaveGroupResponse::default().with_error_code(e.code());
    }
    let leaving: Vec<(String, Option<String>)> = if version <= 2 {
        vec![(request.member_id.to_string(), None)]
    } else {
        request
            .members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|i| i.to_string()),
                )
            })
            .collect()
    };
    let results = shared
        .coordinator
        .leave(&group, &leaving, shared.broker.now_ms());
    if version <= 2 {
        let result = results.into_iter().next().unwrap_or(Ok(()));
        return LeaveGroupResponse::default().with_error_code(error_code(result));
    }
    let members = leaving
        .into_iter()
        .zip(results)
        .map(|((id, instance), result)| {
            MemberResponse::default()
                .with_member_id(s(&id))
                .with_group_instance_id(instance.as_deref().map(s))
                .with_error_code(error_code(result))
        })
        .collect();
    LeaveGroupResponse::default().with_members(members)
}

/// Every group by Kafka id: the coordinator's, and those known by their committed offsets
/// only (Ferry's own groups, Kafka groups from before a restart) — Empty, with no protocol
/// type, as Kafka lists a group that has offsets and no members. A broker group whose
/// name no Kafka id maps to is left out.
fn all_groups(shared: &Shared) -> BTreeMap<String, (State, String)> {
    let mut groups: BTreeMap<String, (State, String)> = shared
        .broker
        .list_groups()
        .into_iter()
        .filter_map(|(_, group)| group_id::from_name(group.as_str()))
        .map(|id| (id, (State::Empty, String::new())))
        .collect();
    for id in shared.coordinator.group_ids() {
        if let Some(view) = shared.coordinator.view(&id) {
            groups.insert(id, (view.state, view.protocol_type.unwrap_or_default()));
        }
    }
    groups
}

/// v4+ filters by state, case-insensitively, as Kafka does.
pub fn list_groups(shared: &Shared, request: ListGroupsRequest) -> ListGroupsResponse {
    let wanted: Vec<String> = request
        .states_filter
        .iter()
        .map(|s| s.to_lowercase())
        .collect();
    let groups = all_groups(shared)
        .into_iter()
        .filter(|(_, (state, _))| {
            wanted.is_empty() || wanted.contains(&state.name().to_lowercase())
        })
        .map(|(id, (state, protocol_type))| {
            ListedGroup::default()
                .with_group_id(GroupId(s(&id)))
                .with_protocol_type(s(&protocol_type))
                .with_group_state(s(state.name()))
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}

/// A group nobody knows is "Dead" with no error, as Kafka describes it.
pub fn describe_groups(shared: &Shared, request: DescribeGroupsRequest) -> DescribeGroupsResponse {
    let known = all_groups(shared);
    let groups = request
        .groups
        .iter()
        .map(|id| {
            let described = DescribedGroup::default()
                .with_group_id(id.clone())
                .with_authorized_operations(i32::MIN);
            if let Err(e) = group_name(id) {
                return described.with_error_code(e.code());
            }
            if let Some(view) = shared.coordinator.view(id) {
                let protocol = view.protocol.clone().unwrap_or_default();
                let members = view
                    .members
                    .iter()
                    .map(|m| {
                        DescribedGroupMember::default()
                            .with_member_id(s(&m.id))
                            .with_group_instance_id(m.instance_id.as_deref().map(s))
                            .with_client_id(s(&m.client_id))
                            .with_client_host(s(&m.client_host))
                            .with_member_metadata(m.metadata(&protocol))
                            .with_member_assignment(if view.state == State::Stable {
                                m.assignment.clone()
                            } else {
                                Bytes::new()
                            })
                    })
                    .collect();
                return described
                    .with_group_state(s(view.state.name()))
                    .with_protocol_type(s(&view.protocol_type.unwrap_or_default()))
                    .with_protocol_data(s(&protocol))
                    .with_members(members);
            }
            let state = if known.contains_key(id.as_str()) {
                "Empty"
            } else {
                "Dead"
            };
            described.with_group_state(s(state))
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}

/// Deletes groups with no members: the coordinator's state and the committed offsets on
/// every topic. NON_EMPTY_GROUP while members remain (here or, for a Ferry group of the
/// same name, joined through the broker), GROUP_ID_NOT_FOUND for a group nobody knows.
pub fn delete_groups(shared: &Shared, request: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let results = request
        .groups_names
        .iter()
        .map(|id| {
            let result = DeletableGroupResult::default().with_group_id(id.clone());
            let code = match delete_group(shared, id) {
                Ok(()) => 0,
                Err(e) => e.code(),
            };
            result.with_error_code(code)
        })
        .collect();
    DeleteGroupsResponse::default().with_results(results)
}

fn delete_group(shared: &Shared, id: &str) -> Result<(), ResponseError> {
    let name = group_name(id)?;
    let view = shared.coordinator.view(id);
    if view.as_ref().is_some_and(|v| !v.members.is_empty()) {
        return Err(ResponseError::NonEmptyGroup);
    }
    let topics: Vec<Name> = shared
        .broker
        .list_groups()
        .into_iter()
        .filter(|(_, group)| *group == name)
        .map(|(topic, _)| topic)
        .collect();
    if view.is_none() && topics.is_empty() {
        return Err(ResponseError::GroupIdNotFound);
    }
    for topic in topics {
        shared
            .broker
            .delete_group(topic.as_str(), name.as_str())
            .map_err(|e| match e.kind() {
                // The broker's own members of the same group name.
                ferry_broker::ErrorKind::Conflict => ResponseError::NonEmptyGroup,
                _ => crate::errors::from_broker(&e),
            })?;
    }
    shared.coordinator.delete(id).map_err(code)
}
