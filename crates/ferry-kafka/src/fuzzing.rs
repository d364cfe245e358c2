//! The request decode path as the fuzz target (`crates/ferry-kafka/fuzz`) calls it: not an
//! API. [`decode`] takes one request frame's body (the bytes after the length prefix) and
//! does with it what a connection does before any handler runs: the header, the served
//! check, the guard's count checks and the body's decode, and for Produce each partition's
//! record batches decoded (and decompressed) into Ferry messages, and for SaslAuthenticate
//! its bytes parsed as a PLAIN message and as SCRAM's client-first message.

use bytes::Bytes;
use kafka_protocol::messages::{
    AlterConfigsRequest, ApiKey, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteRecordsRequest, DeleteTopicsRequest, DescribeClusterRequest, DescribeConfigsRequest,
    FetchRequest, IncrementalAlterConfigsRequest, ListOffsetsRequest, MetadataRequest,
    ProduceRequest, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, FindCoordinatorRequest, HeartbeatRequest,
    JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest, OffsetCommitRequest,
    OffsetDeleteRequest, OffsetFetchRequest, SyncGroupRequest,
};

pub use crate::connection::ConnectionError;
use crate::connection::{decode_body, decode_header};
pub use crate::records::RecordsRefused;
use crate::{records, versions};

/// A request that decoded.
#[derive(Debug)]
pub struct Decoded {
    pub api: ApiKey,
    pub version: i16,
    /// For Produce, each partition's outcome in request order: the messages its batches
    /// hold, or why its records were refused (the partition's error code in the answer).
    pub partitions: Vec<Result<usize, RecordsRefused>>,
}

/// One frame body through the connection's decode path; `max_bytes` bounds a batch's
/// decompressed size as `kafka.max_frame_bytes` does.
pub fn decode(frame: &[u8], max_bytes: usize) -> Result<Decoded, ConnectionError> {
    let mut request = decode_header(Bytes::copy_from_slice(frame))?;
    let api = request.api;
    let version = request.header.request_api_version;
    if api != ApiKey::ApiVersions && !versions::is_supported(api, version) {
        return Err(ConnectionError::NotServed { api, version });
    }
    let mut partitions = Vec::new();
    match api {
        // Answered from its header alone: its body is not decoded.
        ApiKey::ApiVersions => {}
        ApiKey::Metadata => drop(decode_body::<MetadataRequest>(&mut request)?),
        ApiKey::CreateTopics => drop(decode_body::<CreateTopicsRequest>(&mut request)?),
        ApiKey::DeleteTopics => drop(decode_body::<DeleteTopicsRequest>(&mut request)?),
        ApiKey::Fetch => drop(decode_body::<FetchRequest>(&mut request)?),
        ApiKey::ListOffsets => drop(decode_body::<ListOffsetsRequest>(&mut request)?),
        ApiKey::SaslHandshake => drop(decode_body::<SaslHandshakeRequest>(&mut request)?),
        ApiKey::SaslAuthenticate => {
            let body: SaslAuthenticateRequest = decode_body(&mut request)?;
            // Refusals are typed errors; what matters is that no input panics.
            let _ = crate::auth::plain::parse(&body.auth_bytes);
            let _ = crate::auth::scram::parse_client_first(&body.auth_bytes);
        }
        ApiKey::CreatePartitions => drop(decode_body::<CreatePartitionsRequest>(&mut request)?),
        ApiKey::DescribeConfigs => drop(decode_body::<DescribeConfigsRequest>(&mut request)?),
        ApiKey::AlterConfigs => drop(decode_body::<AlterConfigsRequest>(&mut request)?),
        ApiKey::IncrementalAlterConfigs => {
            drop(decode_body::<IncrementalAlterConfigsRequest>(&mut request)?)
        }
        ApiKey::DescribeCluster => drop(decode_body::<DescribeClusterRequest>(&mut request)?),
        ApiKey::DeleteRecords => drop(decode_body::<DeleteRecordsRequest>(&mut request)?),
        ApiKey::Produce => {
            let body: ProduceRequest = if version < 3 {
                crate::api::produce::decode_before_v3(&request)?
            } else {
                decode_body(&mut request)?
            };
            for topic in body.topic_data {
                for data in topic.partition_data {
                    partitions.push(match data.records {
                        Some(set) => records::decode_produced(&set, max_bytes, version)
                            .map(|batches| batches.iter().map(|b| b.messages.len()).sum::<usize>()),
                        None => Err(RecordsRefused {
                            code: kafka_protocol::ResponseError::CorruptMessage,
                            message: "the partition's records are null".into(),
                        }),
                    });
                }
            }
        }
        // Consumer groups.
        ApiKey::FindCoordinator => drop(decode_body::<FindCoordinatorRequest>(&mut request)?),
        ApiKey::JoinGroup => drop(decode_body::<JoinGroupRequest>(&mut request)?),
        ApiKey::SyncGroup => drop(decode_body::<SyncGroupRequest>(&mut request)?),
        ApiKey::Heartbeat => drop(decode_body::<HeartbeatRequest>(&mut request)?),
        ApiKey::LeaveGroup => drop(decode_body::<LeaveGroupRequest>(&mut request)?),
        ApiKey::OffsetCommit => drop(decode_body::<OffsetCommitRequest>(&mut request)?),
        ApiKey::OffsetFetch => drop(decode_body::<OffsetFetchRequest>(&mut request)?),
        ApiKey::OffsetDelete => drop(decode_body::<OffsetDeleteRequest>(&mut request)?),
        ApiKey::DescribeGroups => drop(decode_body::<DescribeGroupsRequest>(&mut request)?),
        ApiKey::ListGroups => drop(decode_body::<ListGroupsRequest>(&mut request)?),
        ApiKey::DeleteGroups => drop(decode_body::<DeleteGroupsRequest>(&mut request)?),
        api => return Err(ConnectionError::NotServed { api, version }),
    }
    Ok(Decoded {
        api,
        version,
        partitions,
    })
}
