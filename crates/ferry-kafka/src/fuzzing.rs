//! The request decode path as the fuzz target (`crates/ferry-kafka/fuzz`) calls it: not an
//! API. [`decode`] takes one request frame's body (the bytes after the length prefix) and
//! does with it what a connection does before any handler runs: the header, the served
//! check, the guard's count checks and the body's decode, and for Produce each partition's
//! record batches decoded (and decompressed) into Ferry messages.

use bytes::Bytes;
use kafka_protocol::messages::{
    AlterConfigsRequest, ApiKey, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteRecordsRequest, DeleteTopicsRequest, DescribeClusterRequest, DescribeConfigsRequest,
    FetchRequest, IncrementalAlterConfigsRequest, ListOffsetsRequest, MetadataRequest,
    ProduceRequest,
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
        ApiKey::CreatePartitions => drop(decode_body::<CreatePartitionsRequest>(&mut request)?),
        ApiKey::DescribeConfigs => drop(decode_body::<DescribeConfigsRequest>(&mut request)?),
        ApiKey::AlterConfigs => drop(decode_body::<AlterConfigsRequest>(&mut request)?),
        ApiKey::IncrementalAlterConfigs => {
            drop(decode_body::<IncrementalAlterConfigsRequest>(&mut request)?)
        }
        ApiKey::DescribeCluster => drop(decode_body::<DescribeClusterRequest>(&mut request)?),
        ApiKey::DeleteRecords => drop(decode_body::<DeleteRecordsRequest>(&mut request)?),
        ApiKey::Produce => {
            let body: ProduceRequest = decode_body(&mut request)?;
            for topic in body.topic_data {
                for data in topic.partition_data {
                    partitions.push(match data.records {
                        Some(set) => records::decode_produced(&set, max_bytes)
                            .map(|batches| batches.iter().map(|b| b.messages.len()).sum::<usize>()),
                        None => Err(RecordsRefused {
                            code: kafka_protocol::ResponseError::CorruptMessage,
                            message: "the partition's records are null".into(),
                        }),
                    });
                }
            }
        }
        api => return Err(ConnectionError::NotServed { api, version }),
    }
    Ok(Decoded {
        api,
        version,
        partitions,
    })
}
