//! Checks a request body's array counts before the codec decodes it.
//!
//! The codec (`kafka-protocol` 0.18) sizes each array's `Vec` from the count on the wire
//! before decoding an element, so a few bytes claiming two billion elements make it ask
//! for hundreds of gigabytes — an allocation failure aborts the process, which no error
//! handling can catch. Every element takes at least one byte, so a count larger than the
//! bytes left cannot be honest: this walk over each served request's layout refuses it
//! first. The layouts follow Kafka's message specs for the versions in `versions.rs`
//! (a test decodes what the codec encodes, for every served version, to keep them equal).

use kafka_protocol::messages::ApiKey;

/// A field of a request layout.
#[derive(Clone)]
enum F {
    Fixed(usize),
    Str,
    Bytes,
    Array(Vec<F>),
    /// A nullable struct: an `i8` (1 present, else null), then the struct when present.
    Optional(Vec<F>),
    /// Flexible versions' tagged fields (their contents are decoded without arrays sized
    /// ahead, so only their framing is checked).
    Tags,
}

use F::{Array, Bytes, Fixed, Optional, Str, Tags};

const I8: F = Fixed(1);
const I16: F = Fixed(2);
const I32: F = Fixed(4);
const I64: F = Fixed(8);
const UUID: F = Fixed(16);

/// The layout of `api`'s request at `version` and whether it is flexible; `None` for
/// APIs whose bodies are not decoded here or hold no arrays.
fn layout(api: ApiKey, v: i16) -> Option<(bool, Vec<F>)> {
    let when = |cond: bool, f: F| cond.then_some(f);
    let flexible = |from: i16| v >= from;
    let (flex, fields): (bool, Vec<Option<F>>) = match api {
        ApiKey::Metadata => {
            let flex = flexible(9);
            let topic = vec![when(v >= 10, UUID), Some(Str), when(flex, Tags)];
            (
                flex,
                vec![
                    Some(Array(topic.into_iter().flatten().collect())),
                    when(v >= 4, I8),
                    when((8..=10).contains(&v), I8),
                    when(v >= 8, I8),
                    when(flex, Tags),
                ],
            )
        }
        ApiKey::Produce => {
            let flex = flexible(9);
            let partition = vec![Some(I32), Some(Bytes), when(flex, Tags)];
            let topic = vec![
                Some(Str),
                Some(Array(partition.into_iter().flatten().collect())),
                when(flex, Tags),
            ];
            (
                flex,
                vec![
                    Some(Str),
                    Some(I16),
                    Some(I32),
                    Some(Array(topic.into_iter().flatten().collect())),
                    when(flex, Tags),
                ],
            )
        }
        ApiKey::Fetch => {
            let flex = flexible(12);
            let partition = vec![
                Some(I32),
                when(v >= 9, I32),
                Some(I64),
                when(v >= 12, I32),
                when(v >= 5, I64),
                Some(I32),
                when(flex, Tags),
            ];
            let topic = vec![
                Some(Str),
                Some(Array(partition.into_iter().flatten().collect())),
                when(flex, Tags),
            ];
            let forgotten = vec![Some(Str), Some(Array(vec![I32])), when(flex, Tags)];
            (
                flex,
                vec![
                    Some(I32),
                    Some(I32),
                    Some(I32),
                    when(v >= 3, I32),
                    when(v >= 4, I8),
                    when(v >= 7, I32),
                    when(v >= 7, I32),
                    Some(Array(topic.into_iter().flatten().collect())),
                    when(v >= 7, Array(forgotten.into_iter().flatten().collect())),
                    when(v >= 11, Str),
                    when(flex, Tags),
                ],
            )
        }
        ApiKey::ListOffsets => {
            let flex = flexible(6);
            let partition = vec![
                Some(I32),
                when(v >= 4, I32),
                Some(I64),
                when(v == 0, I32),
                when(flex, Tags),
            ];
            let topic = vec![
                Some(Str),
                Some(Array(partition.into_iter().flatten().collect())),
                when(flex, Tags),
            ];
            (
                flex,
                vec![
                    Some(I32),
                    when(v >= 2, I8),
                    Some(Array(topic.into_iter().flatten().collect())),
                    when(v >= 10, I32),
                    when(flex, Tags),
                ],
            )
        }
        ApiKey::CreateTopics => {
            let flex = flexible(5);
            let assignment = vec![Some(I32), Some(Array(vec![I32])), when(flex, Tags)];
            let config = vec![Some(Str), Some(Str), when(flex, Tags)];
            let topic = vec![
                Some(Str),
                Some(I32),
                Some(I16),
                Some(Array(assignment.into_iter().flatten().collect())),
                Some(Array(config.into_iter().flatten().collect())),
                when(flex, Tags),
            ];
            (
                flex,
                vec![
                    Some(Array(topic.into_iter().flatten().collect())),
                    Some(I32),
                    when(v >= 1, I8),
                    when(flex, Tags),
                ],
            )
        }
        ApiKey::DeleteTopics => {
            let flex = flexible(4);
            let state = vec![Some(Str), Some(UUID), when(flex, Tags)];
            (
                flex,
                vec![
                    when(v >= 6, Array(state.into_iter().flatten().collect())),
                    when(v <= 5, Array(vec![Str])),
                    Some(I32),
                    when(flex, Tags),
                ],
            )
        }
        ApiKey::CreatePartitions => {
            let flex = flexible(2);
            let assignment = vec![Some(Array(vec![I32])), when(flex, Tags)];
            let topic = vec![
                Some(Str),
                Some(I32),
                Some(Array(assignment.into_iter().flatten().collect())),
                when(flex, Tags),
            ];
            (
                flex,
                vec![
                    Some(Array(topic.into_iter().flatten().collect())),
                    Some(I32),
                    Some(I8),
                    when(flex, Tags),
                ],
            )
        }
        ApiKey::DescribeConfigs => {
            let flex = flexible(4);
            let resource = vec![
                Some(I8),
                Some(Str),
                Some(Array(vec![Str])),
                when(flex, Tags),
            ];
            (
                flex,
                vec![
                    Some(Array(resource.into_iter().flatten().collect())),
                    Some(I8),
                    when(v >= 3, I8),
                    when(flex, Tags),
                ],
            )
        }
        ApiKey::AlterConfigs | ApiKey::IncrementalAlterConfigs => {
            let incremental = api == ApiKey::IncrementalAlterConfigs;
            let flex = flexible(if incremental { 1 } else { 2 });
            let config = vec![
                Some(Str),
                when(incremental, I8),
                Some(Str),
                when(flex, Tags),
            ];
            let resource = vec![
                Some(I8),
                Some(Str),
                Some(Array(config.into_iter().flatten().collect())),
                when(flex, Tags),
            ];
            (
                flex,
                vec![
                    Some(Array(resource.into_iter().flatten().collect())),
                    Some(I8),
                    when(flex, Tags),
                ],
            )
        }
        // No arrays, but checked so every served request is walked before it is decoded.
        ApiKey::DescribeCluster => (
            true,
            vec![Some(I8), when(v >= 1, I8), when(v >= 2, I8), Some(Tags)],
        ),
        ApiKey::DeleteRecords => {
            let flex = flexible(2);
            let partition = vec![Some(I32), Some(I64), when(flex, Tags)];
            let topic = vec![
                Some(Str),
                Some(Array(partition.into_iter().flatten().collect())),
                when(flex, Tags),
            ];
            (
                flex,
                vec![
                    Some(Array(topic.into_iter().flatten().collect())),
                    Some(I32),
                    when(flex, Tags),
                ],
            )
        }
        api => return group_layout(api, v).or_else(|| cluster_layout(api, v)),
    };
    Some((flex, fields.into_iter().flatten().collect()))
}

/// The layouts of the cluster-wide admin APIs (DescribeTopicPartitions, DescribeLogDirs,
/// ListConfigResources, List/AlterPartitionReassignments, ElectLeaders), at the versions
/// served.
fn cluster_layout(api: ApiKey, v: i16) -> Option<(bool, Vec<F>)> {
    Some(match api {
        ApiKey::DescribeTopicPartitions => {
            let cursor = Optional(vec![Str, I32, Tags]);
            (true, vec![Array(vec![Str, Tags]), I32, cursor, Tags])
        }
        ApiKey::DescribeLogDirs => {
            let flex = v >= 2;
            let tags = |mut fields: Vec<F>| {
                fields.extend(flex.then_some(Tags));
                fields
            };
            let topic = tags(vec![Str, Array(vec![I32])]);
            (flex, tags(vec![Array(topic)]))
        }
        ApiKey::ListConfigResources if v == 0 => (true, vec![Tags]),
        ApiKey::ListConfigResources => (true, vec![Array(vec![I8]), Tags]),
        ApiKey::ListPartitionReassignments => {
            let topic = vec![Str, Array(vec![I32]), Tags];
            (true, vec![I32, Array(topic), Tags])
        }
        ApiKey::AlterPartitionReassignments => {
            let partition = vec![I32, Array(vec![I32]), Tags];
            let topic = vec![Str, Array(partition), Tags];
            let fields = [
                Some(I32),
                (v >= 1).then_some(I8),
                Some(Array(topic)),
                Some(Tags),
            ];
            (true, fields.into_iter().flatten().collect())
        }
        ApiKey::ElectLeaders => {
            let flex = v >= 2;
            let topic = [Some(Str), Some(Array(vec![I32])), flex.then_some(Tags)];
            let fields = [
                (v >= 1).then_some(I8),
                Some(Array(topic.into_iter().flatten().collect())),
                Some(I32),
                flex.then_some(Tags),
            ];
            (flex, fields.into_iter().flatten().collect())
        }
        _ => return None,
    })
}

/// The consumer group APIs' layouts (Kafka's message specs, the versions served).
fn group_layout(api: ApiKey, v: i16) -> Option<(bool, Vec<F>)> {
    let when = |cond: bool, f: F| cond.then_some(f);
    let tagged = |flex: bool, fields: Vec<Option<F>>| -> Vec<F> {
        fields
            .into_iter()
            .chain([when(flex, Tags)])
            .flatten()
            .collect()
    };
    let (flex, fields) = match api {
        ApiKey::FindCoordinator => {
            let flex = v >= 3;
            let fields = vec![
                when(v <= 3, Str),
                when(v >= 1, I8),
                when(v >= 4, Array(vec![Str])),
            ];
            (flex, tagged(flex, fields))
        }
        ApiKey::JoinGroup => {
            let flex = v >= 6;
            let protocol = tagged(flex, vec![Some(Str), Some(Bytes)]);
            let fields = vec![
                Some(Str),
                Some(I32),
                when(v >= 1, I32),
                Some(Str),
                when(v >= 5, Str),
                Some(Str),
                Some(Array(protocol)),
                when(v >= 8, Str),
            ];
            (flex, tagged(flex, fields))
        }
        ApiKey::SyncGroup => {
            let flex = v >= 4;
            let assignment = tagged(flex, vec![Some(Str), Some(Bytes)]);
            let fields = vec![
                Some(Str),
                Some(I32),
                Some(Str),
                when(v >= 3, Str),
                when(v >= 5, Str),
                when(v >= 5, Str),
                Some(Array(assignment)),
            ];
            (flex, tagged(flex, fields))
        }
        ApiKey::Heartbeat => {
            let flex = v >= 4;
            let fields = vec![Some(Str), Some(I32), Some(Str), when(v >= 3, Str)];
            (flex, tagged(flex, fields))
        }
        ApiKey::LeaveGroup => {
            let flex = v >= 4;
            let member = tagged(flex, vec![Some(Str), Some(Str), when(v >= 5, Str)]);
            let fields = vec![Some(Str), when(v <= 2, Str), when(v >= 3, Array(member))];
            (flex, tagged(flex, fields))
        }
        ApiKey::OffsetCommit => {
            let flex = v >= 8;
            let partition = tagged(
                flex,
                vec![Some(I32), Some(I64), when(v >= 6, I32), Some(Str)],
            );
            let topic = tagged(flex, vec![Some(Str), Some(Array(partition))]);
            let fields = vec![
                Some(Str),
                Some(I32),
                Some(Str),
                when(v >= 7, Str),
                when(v <= 4, I64),
                Some(Array(topic)),
            ];
            (flex, tagged(flex, fields))
        }
        ApiKey::OffsetFetch => {
            let flex = v >= 6;
            let topic = tagged(flex, vec![Some(Str), Some(Array(vec![I32]))]);
            let group = tagged(
                flex,
                vec![
                    Some(Str),
                    when(v >= 9, Str),
                    when(v >= 9, I32),
                    Some(Array(topic.clone())),
                ],
            );
            let fields = vec![
                when(v <= 7, Str),
                when(v <= 7, Array(topic)),
                when(v >= 8, Array(group)),
                when(v >= 7, I8),
            ];
            (flex, tagged(flex, fields))
        }
        ApiKey::OffsetDelete => {
            let topic = vec![Str, Array(vec![I32])];
            (false, vec![Str, Array(topic)])
        }
        ApiKey::DescribeGroups => {
            let flex = v >= 5;
            let fields = vec![Some(Array(vec![Str])), when(v >= 3, I8)];
            (flex, tagged(flex, fields))
        }
        ApiKey::ListGroups => {
            let flex = v >= 3;
            let fields = vec![
                when(v >= 4, Array(vec![Str])),
                when(v >= 5, Array(vec![Str])),
            ];
            (flex, tagged(flex, fields))
        }
        ApiKey::DeleteGroups => {
            let flex = v >= 2;
            (flex, tagged(flex, vec![Some(Array(vec![Str]))]))
        }
        _ => return None,
    };
    Some((flex, fields))
}

/// Refuses a body whose array counts exceed what it holds; the problem when it does.
pub fn check(api: ApiKey, version: i16, body: &[u8]) -> Result<(), String> {
    let Some((flexible, fields)) = layout(api, version) else {
        return Ok(());
    };
    let mut rest = body;
    walk(&mut rest, &fields, flexible)
}

fn walk(buf: &mut &[u8], fields: &[F], flexible: bool) -> Result<(), String> {
    for field in fields {
        match field {
            Fixed(n) => skip(buf, *n)?,
            Str => {
                let len = if flexible {
                    uvarint(buf)?.saturating_sub(1) as usize
                } else {
                    usize::try_from(i16::from_be_bytes(take::<2>(buf)?)).unwrap_or(0)
                };
                skip(buf, len)?;
            }
            Bytes => {
                let len = if flexible {
                    uvarint(buf)?.saturating_sub(1) as usize
                } else {
                    usize::try_from(i32::from_be_bytes(take::<4>(buf)?)).unwrap_or(0)
                };
                skip(buf, len)?;
            }
            Array(element) => {
                let count = if flexible {
                    uvarint(buf)?.saturating_sub(1) as usize
                } else {
                    usize::try_from(i32::from_be_bytes(take::<4>(buf)?)).unwrap_or(0)
                };
                if count > buf.len() {
                    return Err(format!(
                        "an array claims {count} elements with {} bytes left",
                        buf.len()
                    ));
                }
                for _ in 0..count {
                    walk(buf, element, flexible)?;
                }
            }
            Optional(fields) => {
                if take::<1>(buf)? == [1] {
                    walk(buf, fields, flexible)?;
                }
            }
            Tags => {
                let count = uvarint(buf)?;
                for _ in 0..count {
                    uvarint(buf)?;
                    let size = uvarint(buf)? as usize;
                    skip(buf, size)?;
                }
            }
        }
    }
    Ok(())
}

fn skip(buf: &mut &[u8], n: usize) -> Result<(), String> {
    if n > buf.len() {
        return Err(format!(
            "a field of {n} bytes with {} bytes left",
            buf.len()
        ));
    }
    *buf = &buf[n..];
    Ok(())
}

fn take<const N: usize>(buf: &mut &[u8]) -> Result<[u8; N], String> {
    let bytes: [u8; N] = buf
        .get(..N)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| format!("the request ends {} bytes short", N - buf.len().min(N)))?;
    *buf = &buf[N..];
    Ok(bytes)
}

fn uvarint(buf: &mut &[u8]) -> Result<u64, String> {
    let mut value = 0u64;
    for shift in (0..35).step_by(7) {
        let [byte] = take::<1>(buf)?;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("a varint longer than five bytes".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::versions::SUPPORTED;
    use bytes::BytesMut;
    use kafka_protocol::messages::{
        AlterConfigsRequest, CreatePartitionsRequest, CreateTopicsRequest, DeleteRecordsRequest,
        DeleteTopicsRequest, DescribeClusterRequest, DescribeConfigsRequest, FetchRequest,
        IncrementalAlterConfigsRequest, ListOffsetsRequest, MetadataRequest, ProduceRequest,
        TopicName,
    };
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn encoded<T: Encodable>(request: &T, version: i16) -> Vec<u8> {
        let mut buf = BytesMut::new();
        request.encode(&mut buf, version).unwrap();
        buf.to_vec()
    }

    fn name() -> TopicName {
        TopicName(StrBytes::from_static_str("t"))
    }

    fn str(s: &'static str) -> StrBytes {
        StrBytes::from_static_str(s)
    }

    /// Requests with every array filled, as the codec encodes them, pass at every served
    /// version: the layouts match the codec's.
    #[test]
    fn what_the_codec_encodes_passes() {
        use kafka_protocol::messages::alter_configs_request::{
            AlterConfigsResource, AlterableConfig,
        };
        use kafka_protocol::messages::create_partitions_request::{
            CreatePartitionsAssignment, CreatePartitionsTopic,
        };
        use kafka_protocol::messages::create_topics_request::{
            CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
        };
        use kafka_protocol::messages::delete_records_request::{
            DeleteRecordsPartition, DeleteRecordsTopic,
        };
        use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
        use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
        use kafka_protocol::messages::list_offsets_request::{
            ListOffsetsPartition, ListOffsetsTopic,
        };
        use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
        use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
        for &(api, min, max) in SUPPORTED {
            // Produce v0–2 bodies are checked as v3 (`api/produce.rs`).
            let min = if api == ApiKey::Produce {
                min.max(3)
            } else {
                min
            };
            for v in min..=max {
                let body = match api {
                    ApiKey::Metadata => encoded(
                        &MetadataRequest::default().with_topics(Some(vec![
                            MetadataRequestTopic::default().with_name(Some(name())),
                            MetadataRequestTopic::default().with_name(Some(name())),
                        ])),
                        v,
                    ),
                    ApiKey::Produce => encoded(
                        &ProduceRequest::default().with_topic_data(vec![
                            TopicProduceData::default()
                                .with_name(name())
                                .with_partition_data(vec![
                                    PartitionProduceData::default()
                                        .with_records(Some(bytes::Bytes::from_static(b"xyz"))),
                                ]),
                        ]),
                        v,
                    ),
                    ApiKey::Fetch => encoded(
                        &FetchRequest::default()
                            .with_topics(vec![
                                FetchTopic::default()
                                    .with_topic(name())
                                    .with_partitions(vec![FetchPartition::default(); 2]),
                            ])
                            .with_forgotten_topics_data(if v >= 7 {
                                vec![
                                    ForgottenTopic::default()
                                        .with_topic(name())
                                        .with_partitions(vec![1, 2]),
                                ]
                            } else {
                                vec![]
                            }),
                        v,
                    ),
                    ApiKey::ListOffsets => encoded(
                        &ListOffsetsRequest::default().with_topics(vec![
                            ListOffsetsTopic::default()
                                .with_name(name())
                                .with_partitions(vec![ListOffsetsPartition::default(); 3]),
                        ]),
                        v,
                    ),
                    ApiKey::CreateTopics => encoded(
                        &CreateTopicsRequest::default().with_topics(vec![
                            CreatableTopic::default()
                                .with_name(name())
                                .with_assignments(vec![
                                    CreatableReplicaAssignment::default().with_broker_ids(vec![
                                        kafka_protocol::messages::BrokerId(1),
                                    ]),
                                ])
                                .with_configs(vec![CreatableTopicConfig::default()]),
                        ]),
                        v,
                    ),
                    ApiKey::DeleteTopics => encoded(
                        &DeleteTopicsRequest::default().with_topic_names(vec![name(), name()]),
                        v,
                    ),
                    ApiKey::CreatePartitions => encoded(
                        &CreatePartitionsRequest::default().with_topics(vec![
                            CreatePartitionsTopic::default()
                                .with_name(name())
                                .with_assignments(Some(vec![
                                    CreatePartitionsAssignment::default().with_broker_ids(vec![
                                        kafka_protocol::messages::BrokerId(0),
                                    ]),
                                ])),
                            CreatePartitionsTopic::default().with_name(name()),
                        ]),
                        v,
                    ),
                    ApiKey::DescribeConfigs => encoded(
                        &DescribeConfigsRequest::default().with_resources(vec![
                            DescribeConfigsResource::default()
                                .with_resource_name(str("t"))
                                .with_configuration_keys(Some(vec![str("a"), str("b")])),
                            DescribeConfigsResource::default(),
                        ]),
                        v,
                    ),
                    ApiKey::AlterConfigs => encoded(
                        &AlterConfigsRequest::default().with_resources(vec![
                            AlterConfigsResource::default()
                                .with_resource_name(str("t"))
                                .with_configs(vec![
                                    AlterableConfig::default().with_value(Some(str("1"))),
                                    AlterableConfig::default(),
                                ]),
                        ]),
                        v,
                    ),
                    ApiKey::IncrementalAlterConfigs => {
                        use kafka_protocol::messages::incremental_alter_configs_request as inc;
                        encoded(
                            &IncrementalAlterConfigsRequest::default().with_resources(vec![
                                inc::AlterConfigsResource::default()
                                    .with_resource_name(str("t"))
                                    .with_configs(vec![
                                        inc::AlterableConfig::default().with_value(Some(str("1"))),
                                        inc::AlterableConfig::default(),
                                    ]),
                            ]),
                            v,
                        )
                    }
                    ApiKey::DescribeCluster => encoded(&DescribeClusterRequest::default(), v),
                    ApiKey::DeleteRecords => encoded(
                        &DeleteRecordsRequest::default().with_topics(vec![
                            DeleteRecordsTopic::default()
                                .with_name(name())
                                .with_partitions(vec![DeleteRecordsPartition::default(); 2]),
                        ]),
                        v,
                    ),
                    api => match group_request(api, v).or_else(|| cluster_request(api, v)) {
                        Some(body) => body,
                        None => continue,
                    },
                };
                let mut rest = &body[..];
                let (flexible, fields) = layout(api, v).unwrap();
                walk(&mut rest, &fields, flexible).unwrap_or_else(|e| panic!("{api:?} v{v}: {e}"));
                assert!(rest.is_empty(), "{api:?} v{v}: {} bytes left", rest.len());
            }
        }
    }

    /// A cluster-wide admin request with every array (and nullable struct) filled, as the
    /// codec encodes it.
    fn cluster_request(api: ApiKey, v: i16) -> Option<Vec<u8>> {
        use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
        use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
        use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
        use kafka_protocol::messages::*;
        Some(match api {
            ApiKey::DescribeTopicPartitions => encoded(
                &DescribeTopicPartitionsRequest::default()
                    .with_topics(vec![TopicRequest::default().with_name(name()); 2])
                    .with_cursor(Some(Cursor::default().with_topic_name(name()))),
                v,
            ),
            ApiKey::DescribeLogDirs => encoded(
                &DescribeLogDirsRequest::default().with_topics(Some(vec![
                    DescribableLogDirTopic::default()
                        .with_topic(name())
                        .with_partitions(vec![0, 1]);
                    2
                ])),
                v,
            ),
            ApiKey::ListConfigResources => encoded(
                &ListConfigResourcesRequest::default().with_resource_types(if v >= 1 {
                    vec![2, 4]
                } else {
                    vec![]
                }),
                v,
            ),
            ApiKey::AlterPartitionReassignments => {
                use kafka_protocol::messages::alter_partition_reassignments_request::{
                    ReassignablePartition, ReassignableTopic,
                };
                encoded(
                    &AlterPartitionReassignmentsRequest::default().with_topics(vec![
                        ReassignableTopic::default()
                            .with_name(name())
                            .with_partitions(vec![
                                ReassignablePartition::default()
                                    .with_replicas(Some(vec![BrokerId(0), BrokerId(1)])),
                                ReassignablePartition::default(),
                            ]);
                        2
                    ]),
                    v,
                )
            }
            ApiKey::ElectLeaders => encoded(
                &ElectLeadersRequest::default().with_topic_partitions(Some(vec![
                    kafka_protocol::messages::elect_leaders_request::TopicPartitions::default()
                        .with_topic(name())
                        .with_partitions(vec![0, 1]);
                    2
                ])),
                v,
            ),
            ApiKey::ListPartitionReassignments => encoded(
                &ListPartitionReassignmentsRequest::default().with_topics(Some(vec![
                    ListPartitionReassignmentsTopics::default()
                        .with_name(name())
                        .with_partition_indexes(vec![0, 1]);
                    2
                ])),
                v,
            ),
            _ => return None,
        })
    }

    /// A consumer group request with every array filled, as the codec encodes it.
    fn group_request(api: ApiKey, v: i16) -> Option<Vec<u8>> {
        use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
        use kafka_protocol::messages::leave_group_request::MemberIdentity;
        use kafka_protocol::messages::offset_commit_request::{
            OffsetCommitRequestPartition, OffsetCommitRequestTopic,
        };
        use kafka_protocol::messages::offset_delete_request::{
            OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
        };
        use kafka_protocol::messages::offset_fetch_request::{
            OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
        };
        use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
        use kafka_protocol::messages::*;
        let text = |t: &'static str| StrBytes::from_static_str(t);
        let group = || GroupId(text("g"));
        let metadata = bytes::Bytes::from_static(b"meta");
        Some(match api {
            ApiKey::FindCoordinator => encoded(
                &FindCoordinatorRequest::default()
                    .with_key(if v <= 3 { text("g") } else { text("") })
                    .with_coordinator_keys(if v >= 4 {
                        vec![text("a"), text("b")]
                    } else {
                        vec![]
                    }),
                v,
            ),
            ApiKey::JoinGroup => encoded(
                &JoinGroupRequest::default()
                    .with_group_id(group())
                    .with_member_id(text("m"))
                    .with_group_instance_id((v >= 5).then(|| text("i")))
                    .with_protocol_type(text("consumer"))
                    .with_protocols(vec![
                        JoinGroupRequestProtocol::default()
                            .with_name(text("range"))
                            .with_metadata(metadata.clone());
                        2
                    ]),
                v,
            ),
            ApiKey::SyncGroup => encoded(
                &SyncGroupRequest::default()
                    .with_group_id(group())
                    .with_group_instance_id((v >= 3).then(|| text("i")))
                    .with_protocol_type((v >= 5).then(|| text("consumer")))
                    .with_protocol_name((v >= 5).then(|| text("range")))
                    .with_assignments(vec![
                        SyncGroupRequestAssignment::default()
                            .with_member_id(text("m"))
                            .with_assignment(metadata.clone());
                        2
                    ]),
                v,
            ),
            ApiKey::Heartbeat => encoded(
                &HeartbeatRequest::default()
                    .with_group_id(group())
                    .with_member_id(text("m"))
                    .with_group_instance_id((v >= 3).then(|| text("i"))),
                v,
            ),
            ApiKey::LeaveGroup => encoded(
                &LeaveGroupRequest::default()
                    .with_group_id(group())
                    .with_member_id(if v <= 2 { text("m") } else { text("") })
                    .with_members(if v >= 3 {
                        vec![
                            MemberIdentity::default()
                                .with_member_id(text("m"))
                                .with_group_instance_id(Some(text("i")));
                            2
                        ]
                    } else {
                        vec![]
                    }),
                v,
            ),
            ApiKey::OffsetCommit => encoded(
                &OffsetCommitRequest::default()
                    .with_group_id(group())
                    .with_member_id(text("m"))
                    .with_group_instance_id((v >= 7).then(|| text("i")))
                    .with_topics(vec![
                        OffsetCommitRequestTopic::default()
                            .with_name(name())
                            .with_partitions(vec![
                                OffsetCommitRequestPartition::default()
                                    .with_committed_metadata(Some(text("md")));
                                2
                            ]);
                        2
                    ]),
                v,
            ),
            ApiKey::OffsetFetch if v <= 7 => encoded(
                &OffsetFetchRequest::default()
                    .with_group_id(group())
                    .with_topics(Some(vec![
                        OffsetFetchRequestTopic::default()
                            .with_name(name())
                            .with_partition_indexes(vec![0, 1]);
                        2
                    ]))
                    .with_require_stable(v >= 7),
                v,
            ),
            ApiKey::OffsetFetch => encoded(
                &OffsetFetchRequest::default()
                    .with_groups(vec![
                        OffsetFetchRequestGroup::default()
                            .with_group_id(group())
                            .with_topics(Some(vec![
                                OffsetFetchRequestTopics::default()
                                    .with_name(name())
                                    .with_partition_indexes(vec![0, 1]);
                                2
                            ]));
                        2
                    ])
                    .with_require_stable(true),
                v,
            ),
            ApiKey::OffsetDelete => encoded(
                &OffsetDeleteRequest::default()
                    .with_group_id(group())
                    .with_topics(vec![
                        OffsetDeleteRequestTopic::default()
                            .with_name(name())
                            .with_partitions(
                                vec![OffsetDeleteRequestPartition::default(); 2]
                            );
                        2
                    ]),
                v,
            ),
            ApiKey::DescribeGroups => encoded(
                &DescribeGroupsRequest::default()
                    .with_groups(vec![group(), group()])
                    .with_include_authorized_operations(v >= 3),
                v,
            ),
            ApiKey::ListGroups => encoded(
                &ListGroupsRequest::default().with_states_filter(if v >= 4 {
                    vec![text("Stable"), text("Empty")]
                } else {
                    vec![]
                }),
                v,
            ),
            ApiKey::DeleteGroups => encoded(
                &DeleteGroupsRequest::default().with_groups_names(vec![group(), group()]),
                v,
            ),
            _ => return None,
        })
    }

    #[test]
    fn refuses_counts_larger_than_the_body_in_group_requests() {
        // JoinGroup v7 (flexible): a protocol array claiming 2^28 entries.
        let mut body = vec![2, b'g', 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1];
        body.extend_from_slice(&[0x81, 0x80, 0x80, 0x80, 0x01]);
        assert!(check(ApiKey::JoinGroup, 7, &body).is_err());
        // OffsetCommit v2: a topic array claiming i32::MAX topics.
        let mut body = vec![0, 1, b'g', 0, 0, 0, 1, 0, 0];
        body.extend_from_slice(&[0; 8]);
        body.extend_from_slice(&0x7fff_ffffi32.to_be_bytes());
        assert!(check(ApiKey::OffsetCommit, 2, &body).is_err());
        // DescribeGroups v0: a group array claiming i32::MAX names.
        assert!(check(ApiKey::DescribeGroups, 0, &0x7fff_ffffi32.to_be_bytes()).is_err());
    }

    #[test]
    fn refuses_counts_larger_than_the_body() {
        // Metadata v1: a topic array claiming i32::MAX elements in four bytes.
        let body = 0x7fff_ffffi32.to_be_bytes();
        assert!(check(ApiKey::Metadata, 1, &body).is_err());
        // Fetch v12 (flexible): a compact array claiming 2^28 topics.
        let mut body = vec![0u8; 4 * 4 + 1 + 8];
        body.extend_from_slice(&[0x81, 0x80, 0x80, 0x80, 0x01]);
        assert!(check(ApiKey::Fetch, 12, &body).is_err());
        assert!(check(ApiKey::Metadata, 1, &[0, 0, 0, 0]).is_ok());
        // DeleteRecords v0: one topic "t" whose partition array claims i32::MAX elements.
        let mut body = 1i32.to_be_bytes().to_vec();
        body.extend_from_slice(&[0, 1, b't']);
        body.extend_from_slice(&0x7fff_ffffi32.to_be_bytes());
        assert!(check(ApiKey::DeleteRecords, 0, &body).is_err());
        // DescribeConfigs v1: a resource whose key list claims i32::MAX names.
        let mut body = 1i32.to_be_bytes().to_vec();
        body.extend_from_slice(&[2, 0, 1, b't']);
        body.extend_from_slice(&0x7fff_ffffi32.to_be_bytes());
        assert!(check(ApiKey::DescribeConfigs, 1, &body).is_err());
    }

    #[test]
    fn refuses_counts_larger_than_the_body_in_cluster_requests() {
        // DescribeTopicPartitions v0: a compact topic array claiming 2^28 names.
        assert!(
            check(
                ApiKey::DescribeTopicPartitions,
                0,
                &[0x81, 0x80, 0x80, 0x80, 0x01]
            )
            .is_err()
        );
        // ... and a cursor said to be present but cut short.
        let body = [1, 0, 0, 0, 1, 1];
        assert!(check(ApiKey::DescribeTopicPartitions, 0, &body).is_err());
        // DescribeLogDirs v1: a topic array claiming i32::MAX topics.
        assert!(check(ApiKey::DescribeLogDirs, 1, &0x7fff_ffffi32.to_be_bytes()).is_err());
        // ListPartitionReassignments v0: after the timeout, 2^28 topics.
        let mut body = 0i32.to_be_bytes().to_vec();
        body.extend_from_slice(&[0x81, 0x80, 0x80, 0x80, 0x01]);
        assert!(check(ApiKey::ListPartitionReassignments, 0, &body).is_err());
        // ListConfigResources v1: 2^28 resource types.
        assert!(
            check(
                ApiKey::ListConfigResources,
                1,
                &[0x81, 0x80, 0x80, 0x80, 0x01]
            )
            .is_err()
        );
    }
}
