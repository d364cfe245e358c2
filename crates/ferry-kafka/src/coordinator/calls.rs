//! The calls a group takes and the answers it gives, decoded from and encoded to Kafka's
//! messages by `api/groups.rs`: the state machine (`group.rs`) sees only these.

use bytes::Bytes;

use super::group::GroupError;

/// A JoinGroup, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinRequest {
    /// Empty for a member joining for the first time.
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    /// (name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    /// v4+: a new member first gets its id with MEMBER_ID_REQUIRED, then joins with it.
    pub require_known_member_id: bool,
}

/// A member as the leader sees it in its JoinGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub metadata: Bytes,
}

/// A JoinGroup answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JoinReply {
    pub error: Option<GroupError>,
    pub member_id: String,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: String,
    /// Every member with its metadata for the chosen protocol — for the leader only.
    pub members: Vec<JoinedMember>,
}

impl JoinReply {
    pub fn refused(error: GroupError, member_id: &str) -> JoinReply {
        JoinReply {
            error: Some(error),
            member_id: member_id.to_owned(),
            generation: -1,
            ..JoinReply::default()
        }
    }
}

/// A SyncGroup, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncRequest {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation: i32,
    /// v5+: checked against the group's when present.
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    /// The leader's assignment, by member id; empty from the others.
    pub assignments: Vec<(String, Bytes)>,
}

/// A successful SyncGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synced {
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub assignment: Bytes,
}

pub type SyncReply = Result<Synced, GroupError>;

/// An answer decided for a waiting call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Join(String, JoinReply),
    Sync(String, SyncReply),
}

/// What a JoinGroup or SyncGroup gets at once: its answer, or a wait for the answer the
/// outbox will carry for `member_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step<T> {
    Answer(T),
    Wait { member_id: String },
}
