//! The `request_decode` target's checks.
//!
//! An input is one Kafka request frame's body, the bytes after the 4-byte length prefix:
//!
//! ```text
//! api key (i16) | api version (i16) | correlation id (i32) | client id (i16 length, bytes)
//! | tagged fields (flexible header versions) | the request body
//! ```
//!
//! It goes through `ferry_kafka::fuzzing::decode`, the path a connection takes before any
//! handler runs: the header, the served check, the guard's count checks, the body's decode
//! and, for Produce, each partition's record batches decoded and decompressed. Nothing may
//! panic or abort (an allocation sized from a hostile count aborts), and
//! - a refused request is refused with one of the decode errors that close a connection:
//!   too short a header, an unknown API key, an API or version not served, or malformed;
//! - a Produce partition whose records are refused carries one of the codes a bad record
//!   set is answered with, and a message saying why.

use ferry_kafka::fuzzing::{self, ConnectionError};
use kafka_protocol::ResponseError;

/// The bound on a batch's decompressed size: small, so that a compression bomb costs the
/// fuzzer little, and the limit itself is reached.
pub const MAX_BYTES: usize = 1 << 20;

/// The target: one frame body decoded, its outcome checked.
pub fn check(data: &[u8]) {
    match fuzzing::decode(data, MAX_BYTES) {
        Ok(decoded) => {
            for refused in decoded.partitions.iter().filter_map(|p| p.as_ref().err()) {
                assert!(
                    matches!(
                        refused.code,
                        ResponseError::CorruptMessage
                            | ResponseError::RecordListTooLarge
                            | ResponseError::UnsupportedCompressionType
                            | ResponseError::UnsupportedForMessageFormat
                            | ResponseError::InvalidRecord
                    ),
                    "records refused with an unexpected code: {refused:?}"
                );
                assert!(!refused.message.is_empty(), "{refused:?}");
            }
        }
        Err(e) => {
            assert!(
                matches!(
                    e,
                    ConnectionError::ShortHeader { .. }
                        | ConnectionError::UnknownApiKey { .. }
                        | ConnectionError::NotServed { .. }
                        | ConnectionError::Malformed { .. }
                ),
                "not a decode error: {e:?}"
            );
            assert!(!e.to_string().is_empty());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use bytes::{Bytes, BytesMut};
    use kafka_protocol::indexmap::IndexMap;
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{
        AlterConfigsRequest, ApiKey, ApiVersionsRequest, CreatePartitionsRequest,
        DeleteRecordsRequest, DescribeClusterRequest, DescribeConfigsRequest, FetchRequest,
        IncrementalAlterConfigsRequest, MetadataRequest, ProduceRequest, RequestHeader, TopicName,
    };
    use kafka_protocol::protocol::{Encodable, StrBytes};
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    use super::*;

    fn corpus() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/requests")
    }

    /// A frame body: the request header (at the API's header version) and `body`.
    fn request<T: Encodable>(api: ApiKey, version: i16, body: &T) -> Vec<u8> {
        let mut buf = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(7)
            .with_client_id(Some(StrBytes::from_static_str("ferry-seed")))
            .encode(&mut buf, api.request_header_version(version))
            .unwrap();
        body.encode(&mut buf, version).unwrap();
        buf.to_vec()
    }

    fn name(n: &'static str) -> TopicName {
        TopicName(StrBytes::from_static_str(n))
    }

    fn batch(compression: Compression, values: &[&str]) -> Bytes {
        let records: Vec<Record> = values
            .iter()
            .enumerate()
            .map(|(i, v)| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: i as i32,
                timestamp: 1_700_000_000_000,
                key: Some(Bytes::from_static(b"k")),
                value: Some(Bytes::copy_from_slice(v.as_bytes())),
                headers: IndexMap::from([(
                    StrBytes::from_static_str("h"),
                    Some(Bytes::from_static(b"v")),
                )]),
            })
            .collect();
        let mut buf = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression,
        };
        RecordBatchEncoder::encode(&mut buf, &records, &options).unwrap();
        buf.freeze()
    }

    fn produce(version: i16, records: Bytes) -> Vec<u8> {
        request(
            ApiKey::Produce,
            version,
            &ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(30_000)
                .with_topic_data(vec![
                    TopicProduceData::default()
                        .with_name(name("orders"))
                        .with_partition_data(vec![
                            PartitionProduceData::default()
                                .with_index(0)
                                .with_records(Some(records)),
                        ]),
                ]),
        )
    }

    /// Produce v0–2, which the codec no longer encodes: the header at v1 and a v3 body
    /// without its leading null transactional id.
    fn produce_before_v3(version: i16, records: Vec<u8>) -> Vec<u8> {
        let mut buf = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(ApiKey::Produce as i16)
            .with_request_api_version(version)
            .with_correlation_id(7)
            .with_client_id(Some(StrBytes::from_static_str("ferry-seed")))
            .encode(&mut buf, 1)
            .unwrap();
        let body = produce(3, Bytes::from(records));
        // `produce` put a v1 header of its own first: the same length as this one.
        buf.extend_from_slice(&body[buf.len() + 2..]);
        buf.to_vec()
    }

    /// A legacy message set of magic 1 messages (offset, size, CRC-32, magic, attributes,
    /// timestamp, null key, value).
    fn legacy(values: &[&str]) -> Vec<u8> {
        let mut set = Vec::new();
        for v in values {
            let mut body = vec![1u8, 0];
            body.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
            body.extend_from_slice(&(-1i32).to_be_bytes());
            body.extend_from_slice(&(v.len() as i32).to_be_bytes());
            body.extend_from_slice(v.as_bytes());
            set.extend_from_slice(&0i64.to_be_bytes());
            set.extend_from_slice(&((body.len() + 4) as i32).to_be_bytes());
            set.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
            set.extend_from_slice(&body);
        }
        set
    }

    fn fetch(version: i16) -> Vec<u8> {
        request(
            ApiKey::Fetch,
            version,
            &FetchRequest::default()
                .with_replica_id(kafka_protocol::messages::BrokerId(-1))
                .with_max_wait_ms(500)
                .with_min_bytes(1)
                .with_max_bytes(52_428_800)
                .with_topics(vec![
                    FetchTopic::default()
                        .with_topic(name("orders"))
                        .with_partitions(vec![
                            FetchPartition::default()
                                .with_partition(0)
                                .with_fetch_offset(0)
                                .with_partition_max_bytes(1_048_576),
                        ]),
                ]),
        )
    }

    fn text(s: &'static str) -> StrBytes {
        StrBytes::from_static_str(s)
    }

    fn create_partitions() -> Vec<u8> {
        use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
        let topic = CreatePartitionsTopic::default()
            .with_name(name("orders"))
            .with_count(3);
        request(
            ApiKey::CreatePartitions,
            3,
            &CreatePartitionsRequest::default().with_topics(vec![topic]),
        )
    }

    fn describe_configs() -> Vec<u8> {
        use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
        let resource = DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(text("orders"))
            .with_configuration_keys(Some(vec![text("retention.ms")]));
        request(
            ApiKey::DescribeConfigs,
            4,
            &DescribeConfigsRequest::default()
                .with_resources(vec![resource])
                .with_include_synonyms(true),
        )
    }

    fn alter_configs() -> Vec<u8> {
        use kafka_protocol::messages::alter_configs_request::{
            AlterConfigsResource, AlterableConfig,
        };
        let config = AlterableConfig::default()
            .with_name(text("retention.ms"))
            .with_value(Some(text("60000")));
        let resource = AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(text("orders"))
            .with_configs(vec![config]);
        request(
            ApiKey::AlterConfigs,
            2,
            &AlterConfigsRequest::default().with_resources(vec![resource]),
        )
    }

    fn incremental_alter_configs() -> Vec<u8> {
        use kafka_protocol::messages::incremental_alter_configs_request::{
            AlterConfigsResource, AlterableConfig,
        };
        let config = AlterableConfig::default()
            .with_name(text("cleanup.policy"))
            .with_config_operation(2)
            .with_value(Some(text("compact")));
        let resource = AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(text("orders"))
            .with_configs(vec![config]);
        request(
            ApiKey::IncrementalAlterConfigs,
            1,
            &IncrementalAlterConfigsRequest::default().with_resources(vec![resource]),
        )
    }

    fn delete_records() -> Vec<u8> {
        use kafka_protocol::messages::delete_records_request::{
            DeleteRecordsPartition, DeleteRecordsTopic,
        };
        let topic = DeleteRecordsTopic::default()
            .with_name(name("orders"))
            .with_partitions(vec![DeleteRecordsPartition::default().with_offset(10)]);
        request(
            ApiKey::DeleteRecords,
            2,
            &DeleteRecordsRequest::default().with_topics(vec![topic]),
        )
    }

    /// The seeds, each with whether it is a valid request whose records all decode.
    fn seeds() -> Vec<(&'static str, Vec<u8>, bool)> {
        let metadata = |version| {
            request(
                ApiKey::Metadata,
                version,
                &MetadataRequest::default()
                    .with_topics(Some(vec![
                        MetadataRequestTopic::default().with_name(Some(name("orders"))),
                    ]))
                    .with_allow_auto_topic_creation(true),
            )
        };
        // A batch claiming i32::MAX records (the count is at byte 57 of the batch header).
        let mut claims = BytesMut::from(&batch(Compression::None, &["a"])[..]);
        claims[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        // A batch in the older message format (magic 1, at byte 16).
        let mut magic = BytesMut::from(&batch(Compression::None, &["a"])[..]);
        magic[16] = 1;
        // Metadata v1 whose topics array claims i32::MAX elements (after the 20-byte header).
        let mut bomb = metadata(1);
        bomb.truncate(20);
        bomb.extend_from_slice(&i32::MAX.to_be_bytes());
        vec![
            (
                "api-versions-v3",
                request(
                    ApiKey::ApiVersions,
                    3,
                    &ApiVersionsRequest::default()
                        .with_client_software_name(StrBytes::from_static_str("ferry-seed"))
                        .with_client_software_version(StrBytes::from_static_str("1.0")),
                ),
                true,
            ),
            ("metadata-v1", metadata(1), true),
            ("metadata-v12", metadata(12), true),
            (
                "produce-v3-plain",
                produce(3, batch(Compression::None, &["a", "b"])),
                true,
            ),
            (
                "produce-v8-gzip",
                produce(8, batch(Compression::Gzip, &["a", "b", "c"])),
                true,
            ),
            (
                "produce-v8-snappy",
                produce(8, batch(Compression::Snappy, &["a"])),
                true,
            ),
            ("fetch-v4", fetch(4), true),
            ("fetch-v12", fetch(12), true),
            (
                "bad-produce-record-count",
                produce(8, claims.freeze()),
                false,
            ),
            ("bad-produce-magic-1", produce(8, magic.freeze()), false),
            (
                "produce-v2-legacy-magic-1",
                produce_before_v3(2, legacy(&["a", "b"])),
                true,
            ),
            (
                "produce-v0-batch-v2",
                produce_before_v3(0, batch(Compression::None, &["a"]).to_vec()),
                true,
            ),
            ("bad-metadata-array-count", bomb, false),
            ("create-partitions-v3", create_partitions(), true),
            ("describe-configs-v4", describe_configs(), true),
            ("alter-configs-v2", alter_configs(), true),
            (
                "incremental-alter-configs-v1",
                incremental_alter_configs(),
                true,
            ),
            (
                "describe-cluster-v1",
                request(
                    ApiKey::DescribeCluster,
                    1,
                    &DescribeClusterRequest::default(),
                ),
                true,
            ),
            ("delete-records-v2", delete_records(), true),
        ]
        .into_iter()
        .chain(group_seeds())
        .collect()
    }

    /// Consumer group requests: a join, a sync, a commit and a multi-group offset fetch
    /// (the APIs with nested arrays), and a join whose protocol array claims more entries
    /// than any frame holds.
    fn group_seeds() -> Vec<(&'static str, Vec<u8>, bool)> {
        use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
        use kafka_protocol::messages::offset_commit_request::{
            OffsetCommitRequestPartition, OffsetCommitRequestTopic,
        };
        use kafka_protocol::messages::offset_fetch_request::{
            OffsetFetchRequestGroup, OffsetFetchRequestTopics,
        };
        use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
        use kafka_protocol::messages::{
            GroupId, JoinGroupRequest, OffsetCommitRequest, OffsetFetchRequest, SyncGroupRequest,
        };
        let text = StrBytes::from_static_str;
        let group = || GroupId(text("orders-group"));
        let join = |version| {
            request(
                ApiKey::JoinGroup,
                version,
                &JoinGroupRequest::default()
                    .with_group_id(group())
                    .with_session_timeout_ms(10_000)
                    .with_rebalance_timeout_ms(30_000)
                    .with_protocol_type(text("consumer"))
                    .with_protocols(vec![
                        JoinGroupRequestProtocol::default()
                            .with_name(text("range"))
                            .with_metadata(Bytes::from_static(b"\0\x01\0\0\0\x01\0\x06orders")),
                    ]),
            )
        };
        // JoinGroup v7 (flexible) with no protocols ends with the protocols' compact array
        // length (1: empty) and the tagged fields (0); the bomb claims 2^28 protocols.
        let mut bomb = request(
            ApiKey::JoinGroup,
            7,
            &JoinGroupRequest::default()
                .with_group_id(group())
                .with_protocol_type(text("consumer")),
        );
        bomb.truncate(bomb.len() - 2);
        bomb.extend_from_slice(&[0x81, 0x80, 0x80, 0x80, 0x01, 0]);
        vec![
            ("join-group-v5", join(5), true),
            ("join-group-v7", join(7), true),
            (
                "sync-group-v5",
                request(
                    ApiKey::SyncGroup,
                    5,
                    &SyncGroupRequest::default()
                        .with_group_id(group())
                        .with_generation_id(1)
                        .with_member_id(text("m-1"))
                        .with_protocol_type(Some(text("consumer")))
                        .with_protocol_name(Some(text("range")))
                        .with_assignments(vec![
                            SyncGroupRequestAssignment::default()
                                .with_member_id(text("m-1"))
                                .with_assignment(Bytes::from_static(b"assignment")),
                        ]),
                ),
                true,
            ),
            (
                "offset-commit-v8",
                request(
                    ApiKey::OffsetCommit,
                    8,
                    &OffsetCommitRequest::default()
                        .with_group_id(group())
                        .with_generation_id_or_member_epoch(-1)
                        .with_topics(vec![
                            OffsetCommitRequestTopic::default()
                                .with_name(name("orders"))
                                .with_partitions(vec![
                                    OffsetCommitRequestPartition::default()
                                        .with_committed_offset(5)
                                        .with_committed_metadata(Some(text("meta"))),
                                ]),
                        ]),
                ),
                true,
            ),
            (
                "offset-fetch-v8",
                request(
                    ApiKey::OffsetFetch,
                    8,
                    &OffsetFetchRequest::default().with_groups(vec![
                        OffsetFetchRequestGroup::default()
                            .with_group_id(group())
                            .with_topics(Some(vec![
                                OffsetFetchRequestTopics::default()
                                    .with_name(name("orders"))
                                    .with_partition_indexes(vec![0, 1]),
                            ])),
                    ]),
                ),
                true,
            ),
            ("bad-join-group-array-count", bomb, false),
        ]
    }

    /// The committed seeds are what the codec encodes for `seeds()`;
    /// `FERRY_KAFKA_WRITE_SEEDS=1` writes them again after a change there.
    #[test]
    fn the_seeds_are_the_encoded_requests() {
        let write = std::env::var_os("FERRY_KAFKA_WRITE_SEEDS").is_some();
        for (file, bytes, _) in seeds() {
            let path = corpus().join(file);
            if write {
                std::fs::write(&path, &bytes).unwrap();
            }
            let committed =
                std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(
                committed == bytes,
                "{file} differs from what the codec encodes"
            );
        }
    }

    /// Every seed through the target, as CI runs it on stable (no fuzzing engine there);
    /// the valid ones decode with all their records, the others are refused.
    #[test]
    fn the_seed_corpus_passes_the_checks() {
        let mut seen = 0;
        for entry in std::fs::read_dir(corpus()).unwrap() {
            let path = entry.unwrap().path();
            check(&std::fs::read(&path).unwrap());
            seen += 1;
        }
        assert!(seen >= 8, "only {seen} seeds in {}", corpus().display());
        for (file, bytes, valid) in seeds() {
            let outcome = fuzzing::decode(&bytes, MAX_BYTES);
            if !valid {
                let refused = match &outcome {
                    Ok(decoded) => decoded.partitions.iter().any(|p| p.is_err()),
                    Err(_) => true,
                };
                assert!(refused, "{file} was taken: {outcome:?}");
                continue;
            }
            let decoded = outcome.unwrap_or_else(|e| panic!("{file}: {e}"));
            if decoded.api == ApiKey::Produce {
                assert_eq!(decoded.partitions.len(), 1, "{file}");
                assert!(
                    matches!(decoded.partitions[0], Ok(n) if n > 0),
                    "{file}: {:?}",
                    decoded.partitions
                );
            }
        }
    }

    /// Short, truncated and unknown frames are refused with the typed errors.
    #[test]
    fn garbage_is_refused_with_a_decode_error() {
        assert!(matches!(
            fuzzing::decode(&[0, 3], MAX_BYTES),
            Err(ConnectionError::ShortHeader { len: 2 })
        ));
        assert!(matches!(
            fuzzing::decode(&[0x7f, 0x7f, 0, 0, 0, 0, 0, 1], MAX_BYTES),
            Err(ConnectionError::UnknownApiKey { key: 0x7f7f })
        ));
        let fetch = fetch(12);
        for len in [10, fetch.len() - 1] {
            let outcome = fuzzing::decode(&fetch[..len], MAX_BYTES);
            assert!(
                matches!(outcome, Err(ConnectionError::Malformed { .. })),
                "{len}: {outcome:?}"
            );
            check(&fetch[..len]);
        }
    }
}
