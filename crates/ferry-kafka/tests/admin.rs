//! The admin APIs over a socket, requests encoded and answers decoded by the
//! `kafka-protocol` codec: CreatePartitions, DescribeConfigs, AlterConfigs,
//! IncrementalAlterConfigs, CreateTopics with configs, DescribeCluster and DeleteRecords —
//! what each changes in the broker, and the refusals that change nothing.

mod common;

use std::time::Duration;

use common::{Client, start};
use ferry_broker::{
    Broker, OutgoingMessage, SubscriptionSpec, SubscriptionStart, TopicCompaction, TopicSpec,
};
use ferry_kafka::KafkaConfig;
use kafka_protocol::ResponseError;
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
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResourceResult;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    AlterConfigsRequest, ApiKey, ApiVersionsRequest, BrokerId, CreatePartitionsRequest,
    CreateTopicsRequest, DeleteRecordsRequest, DescribeClusterRequest, DescribeConfigsRequest,
    FetchRequest, IncrementalAlterConfigsRequest, ListOffsetsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn code(error: ResponseError) -> i16 {
    error.code()
}

fn partitions(broker: &Broker, topic: &str) -> u32 {
    broker.describe_topic(topic).unwrap().spec.partitions
}

fn grow(topic: &str, count: i32) -> CreatePartitionsTopic {
    CreatePartitionsTopic::default()
        .with_name(name(topic))
        .with_count(count)
}

async fn create_partitions(
    client: &mut Client,
    topics: Vec<CreatePartitionsTopic>,
    validate_only: bool,
    version: i16,
) -> Vec<i16> {
    let request = CreatePartitionsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(5_000)
        .with_validate_only(validate_only);
    let response = client.call(&request, version).await;
    response.results.iter().map(|r| r.error_code).collect()
}

#[tokio::test]
async fn create_partitions_only_grows_takes_assignments_to_this_node_and_refuses_duplicates() {
    let server = start(KafkaConfig::default()).await;
    let broker = &server.broker;
    broker
        .create_topic("grow", TopicSpec::with_partitions(1))
        .await
        .unwrap();
    let mut client = Client::connect(server.addr).await;
    for version in [0, 3] {
        let want = 2 + version as i32;
        assert_eq!(
            create_partitions(&mut client, vec![grow("grow", want)], false, version).await,
            [0],
            "v{version}"
        );
        assert_eq!(partitions(broker, "grow"), want as u32);
    }
    assert_eq!(
        create_partitions(&mut client, vec![grow("grow", 9)], true, 3).await,
        [0]
    );
    assert_eq!(partitions(broker, "grow"), 5, "validate_only adds nothing");
    let invalid = code(ResponseError::InvalidPartitions);
    for count in [5, 2, 5000] {
        assert_eq!(
            create_partitions(&mut client, vec![grow("grow", count)], false, 3).await,
            [invalid],
            "{count}"
        );
    }
    assert_eq!(
        create_partitions(&mut client, vec![grow("grow", 2)], true, 3).await,
        [invalid],
        "validate_only checks as the real thing does"
    );
    // Assignments: each new partition on this node alone is what Ferry does anyway;
    // another broker, or a count of assignments other than the new partitions', is not.
    let on = |ids: &[i32]| {
        CreatePartitionsAssignment::default()
            .with_broker_ids(ids.iter().map(|&id| BrokerId(id)).collect())
    };
    let invalid_assignment = code(ResponseError::InvalidReplicaAssignment);
    for assignments in [vec![on(&[1])], vec![on(&[0]), on(&[0])], vec![on(&[0, 0])]] {
        let assigned = grow("grow", 6).with_assignments(Some(assignments));
        assert_eq!(
            create_partitions(&mut client, vec![assigned], false, 3).await,
            [invalid_assignment]
        );
    }
    assert_eq!(
        partitions(broker, "grow"),
        5,
        "no refused assignment added one"
    );
    let assigned = grow("grow", 6).with_assignments(Some(vec![on(&[0])]));
    assert_eq!(
        create_partitions(&mut client, vec![assigned], false, 3).await,
        [0]
    );
    assert_eq!(partitions(broker, "grow"), 6);
    assert_eq!(
        create_partitions(
            &mut client,
            vec![grow("grow", 7), grow("grow", 8)],
            false,
            3
        )
        .await,
        [code(ResponseError::InvalidRequest); 2]
    );
    assert_eq!(
        create_partitions(&mut client, vec![grow("missing", 2)], false, 3).await,
        [code(ResponseError::UnknownTopicOrPartition)]
    );
    assert_eq!(
        partitions(broker, "grow"),
        6,
        "no refusal added a partition"
    );
}

async fn describe(
    client: &mut Client,
    resource_type: i8,
    resource: &str,
    keys: Option<&[&str]>,
    version: i16,
) -> (i16, Vec<DescribeConfigsResourceResult>) {
    let request = DescribeConfigsRequest::default()
        .with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(s(resource))
                .with_configuration_keys(keys.map(|k| k.iter().map(|k| s(k)).collect())),
        ])
        .with_include_synonyms(true)
        .with_include_documentation(version >= 3);
    let response = client.call(&request, version).await;
    let result = response.results.into_iter().next().unwrap();
    (result.error_code, result.configs)
}

fn entry<'a>(
    configs: &'a [DescribeConfigsResourceResult],
    key: &str,
) -> &'a DescribeConfigsResourceResult {
    configs
        .iter()
        .find(|c| c.name.as_str() == key)
        .unwrap_or_else(|| panic!("{key} not reported"))
}

fn value(configs: &[DescribeConfigsResourceResult], key: &str) -> String {
    entry(configs, key).value.as_ref().unwrap().to_string()
}

#[tokio::test]
async fn describe_configs_reports_ferrys_settings_with_their_sources() {
    let server = start(KafkaConfig {
        default_partitions: 3,
        ..KafkaConfig::default()
    })
    .await;
    let mut spec = TopicSpec::with_partitions(1);
    spec.retention.max_age = Some(Duration::from_secs(3600));
    spec.compaction = Some(TopicCompaction::default());
    server.broker.create_topic("kept", spec).await.unwrap();
    server
        .broker
        .create_topic("plain", TopicSpec::with_partitions(1))
        .await
        .unwrap();
    let mut client = Client::connect(server.addr).await;
    for version in [1, 4] {
        let (error, configs) = describe(&mut client, 2, "kept", None, version).await;
        assert_eq!(error, 0);
        assert_eq!(value(&configs, "retention.ms"), "3600000");
        assert_eq!(value(&configs, "cleanup.policy"), "compact,delete");
        assert_eq!(value(&configs, "retention.bytes"), "-1");
        let age = entry(&configs, "retention.ms");
        assert_eq!(age.config_source, 1, "set on the topic");
        assert!(!age.read_only);
        let synonyms: Vec<(String, i8)> = age
            .synonyms
            .iter()
            .map(|s| (s.name.to_string(), s.source))
            .collect();
        assert_eq!(
            synonyms,
            [
                ("retention.ms".to_owned(), 1),
                ("log.retention.ms".to_owned(), 5)
            ]
        );
        assert_eq!(entry(&configs, "retention.bytes").config_source, 5);
        let largest = entry(&configs, "max.message.bytes");
        assert!(largest.read_only);
        let limits = server.broker.topic_storage_limits();
        assert_eq!(
            value(&configs, "max.message.bytes"),
            limits.max_batch_bytes.to_string()
        );
        assert_eq!(
            value(&configs, "segment.bytes"),
            limits.segment_bytes.to_string()
        );
        if version >= 3 {
            assert_eq!(age.config_type, 5, "LONG");
            assert!(age.documentation.is_some());
        }
    }
    let (_, configs) = describe(
        &mut client,
        2,
        "plain",
        Some(&["cleanup.policy", "nope"]),
        4,
    )
    .await;
    assert_eq!(
        configs.len(),
        1,
        "only the keys asked for, and only those Ferry has"
    );
    assert_eq!(value(&configs, "cleanup.policy"), "delete");
    assert_eq!(entry(&configs, "cleanup.policy").config_source, 5);
    let (error, _) = describe(&mut client, 2, "missing", None, 4).await;
    assert_eq!(error, code(ResponseError::UnknownTopicOrPartition));

    let (error, configs) = describe(&mut client, 4, "0", None, 4).await;
    assert_eq!(error, 0);
    assert_eq!(value(&configs, "num.partitions"), "3");
    assert_eq!(entry(&configs, "num.partitions").config_source, 4);
    assert_eq!(value(&configs, "log.retention.ms"), "604800000");
    assert!(configs.iter().all(|c| c.read_only));
    let (error, _) = describe(&mut client, 4, "1", None, 4).await;
    assert_eq!(error, code(ResponseError::InvalidRequest));
    let (error, _) = describe(&mut client, 3, "group", None, 4).await;
    assert_eq!(error, code(ResponseError::InvalidRequest));
}

fn alter(topic: &str, configs: &[(&str, &str)], validate_only: bool) -> AlterConfigsRequest {
    use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
    AlterConfigsRequest::default()
        .with_validate_only(validate_only)
        .with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s(topic))
                .with_configs(
                    configs
                        .iter()
                        .map(|(k, v)| {
                            AlterableConfig::default()
                                .with_name(s(k))
                                .with_value(Some(s(v)))
                        })
                        .collect(),
                ),
        ])
}

fn incremental(
    topic: &str,
    configs: &[(&str, i8, Option<&str>)],
) -> IncrementalAlterConfigsRequest {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(topic))
            .with_configs(
                configs
                    .iter()
                    .map(|(k, op, v)| {
                        AlterableConfig::default()
                            .with_name(s(k))
                            .with_config_operation(*op)
                            .with_value(v.map(s))
                    })
                    .collect(),
            ),
    ])
}

#[tokio::test]
async fn alter_configs_change_ferrys_topic_settings_and_refuse_what_it_lacks() {
    let server = start(KafkaConfig::default()).await;
    let broker = &server.broker;
    broker
        .create_topic("t", TopicSpec::with_partitions(1))
        .await
        .unwrap();
    let spec = || broker.describe_topic("t").unwrap().spec;
    let mut client = Client::connect(server.addr).await;
    let errors = |r: &kafka_protocol::messages::AlterConfigsResponse| {
        r.responses.iter().map(|r| r.error_code).collect::<Vec<_>>()
    };

    for version in [0, 2] {
        let answer = client
            .call(
                &alter(
                    "t",
                    &[
                        ("retention.ms", "60000"),
                        ("cleanup.policy", "compact,delete"),
                    ],
                    false,
                ),
                version,
            )
            .await;
        assert_eq!(errors(&answer), [0], "v{version}");
    }
    assert_eq!(spec().retention.max_age, Some(Duration::from_secs(60)));
    assert!(spec().compaction.is_some());

    let answer = client
        .call(
            &incremental("t", &[("retention.bytes", 0, Some("1048576"))]),
            1,
        )
        .await;
    assert_eq!(answer.responses[0].error_code, 0);
    assert_eq!(spec().retention.max_bytes, Some(1 << 20));
    assert_eq!(
        spec().retention.max_age,
        Some(Duration::from_secs(60)),
        "an incremental change keeps what it does not name"
    );
    let answer = client
        .call(
            &incremental(
                "t",
                &[
                    ("cleanup.policy", 3, Some("compact")),
                    ("retention.ms", 1, None),
                ],
            ),
            0,
        )
        .await;
    assert_eq!(answer.responses[0].error_code, 0);
    assert_eq!(spec().compaction, None);
    assert_eq!(
        spec().retention.max_age,
        Some(Duration::from_secs(7 * 86_400))
    );

    let before = spec();
    let invalid = code(ResponseError::InvalidConfig);
    for refused in [
        alter("t", &[("min.insync.replicas", "2")], false),
        alter("t", &[("segment.bytes", "1024")], false),
        alter("t", &[("retention.ms", "-5")], false),
        alter(
            "t",
            &[("cleanup.policy", "compact"), ("retention.ms", "5")],
            false,
        ),
    ] {
        let answer = client.call(&refused, 2).await;
        assert_eq!(errors(&answer), [invalid]);
        let message = answer.responses[0].error_message.as_ref().unwrap();
        assert!(!message.is_empty());
    }
    let answer = client
        .call(&alter("t", &[("nope.nope", "1")], false), 2)
        .await;
    assert!(
        answer.responses[0]
            .error_message
            .as_ref()
            .unwrap()
            .contains("nope.nope"),
        "the message names the key"
    );
    let answer = client
        .call(&alter("t", &[("retention.ms", "1000")], true), 2)
        .await;
    assert_eq!(errors(&answer), [0]);
    assert_eq!(
        spec(),
        before,
        "neither refusals nor validate_only changed anything"
    );

    let answer = client
        .call(&alter("t", &[("retention.bytes", "2000")], false), 2)
        .await;
    assert_eq!(errors(&answer), [0]);
    assert_eq!(spec().retention.max_bytes, Some(2000));
    assert_eq!(
        spec().retention.max_age,
        Some(Duration::from_secs(7 * 86_400)),
        "AlterConfigs replaces: a key not given is its default"
    );

    let answer = client
        .call(&alter("missing", &[("retention.ms", "1000")], false), 2)
        .await;
    assert_eq!(
        errors(&answer),
        [code(ResponseError::UnknownTopicOrPartition)]
    );
    let mut to_broker = alter("0", &[("log.retention.ms", "1000")], false);
    to_broker.resources[0].resource_type = 4;
    assert_eq!(errors(&client.call(&to_broker, 2).await), [invalid]);
}

#[tokio::test]
async fn create_topics_takes_the_configs_ferry_maps_and_refuses_others() {
    let server = start(KafkaConfig::default()).await;
    let mut client = Client::connect(server.addr).await;
    let topic = |topic: &str, configs: &[(&str, &str)]| {
        CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(2)
            .with_replication_factor(1)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        CreatableTopicConfig::default()
                            .with_name(s(k))
                            .with_value(Some(s(v)))
                    })
                    .collect(),
            )
    };
    let request = CreateTopicsRequest::default().with_topics(vec![
        topic(
            "compacted",
            &[
                ("cleanup.policy", "compact"),
                ("min.compaction.lag.ms", "1000"),
            ],
        ),
        topic("odd", &[("message.timestamp.type", "LogAppendTime")]),
        topic(
            "bounded",
            &[
                ("retention.bytes", "4096"),
                ("retention.ms", "100000000000000"),
            ],
        ),
    ]);
    let response = client.call(&request, 4).await;
    let codes: Vec<i16> = response.topics.iter().map(|t| t.error_code).collect();
    let invalid = code(ResponseError::InvalidConfig);
    assert_eq!(codes, [0, invalid, invalid]);
    let spec = server.broker.describe_topic("compacted").unwrap().spec;
    assert_eq!(spec.partitions, 2);
    assert_eq!(
        spec.compaction.unwrap().min_lag,
        Duration::from_secs(1),
        "the configs given"
    );
    assert_eq!(
        spec.retention.max_age, None,
        "compact alone keeps no age bound"
    );
    assert!(
        server.broker.describe_topic("odd").is_err(),
        "a refused topic is not created"
    );
    assert!(server.broker.describe_topic("bounded").is_err());
}

#[tokio::test]
async fn describe_cluster_names_this_node_as_broker_and_controller() {
    let server = start(KafkaConfig::default()).await;
    let mut client = Client::connect(server.addr).await;
    for version in [0, 1] {
        let response = client
            .call(&DescribeClusterRequest::default(), version)
            .await;
        assert_eq!(response.error_code, 0);
        assert_eq!(response.cluster_id.as_str(), "ferry");
        assert_eq!(response.controller_id, BrokerId(0));
        assert_eq!(response.brokers.len(), 1);
        let node = &response.brokers[0];
        assert_eq!(node.broker_id, BrokerId(0));
        assert_eq!(node.port, i32::from(server.addr.port()));
        assert_eq!(node.host.as_str(), server.addr.ip().to_string());
    }
    let controllers = DescribeClusterRequest::default().with_endpoint_type(2);
    let response = client.call(&controllers, 1).await;
    assert_eq!(
        response.error_code,
        code(ResponseError::UnsupportedEndpointType)
    );

    let versions = client.call(&ApiVersionsRequest::default(), 3).await;
    for (api, min, max) in [
        (ApiKey::CreatePartitions, 0, 3),
        (ApiKey::DescribeConfigs, 1, 4),
        (ApiKey::AlterConfigs, 0, 2),
        (ApiKey::IncrementalAlterConfigs, 0, 1),
        (ApiKey::DescribeCluster, 0, 1),
        (ApiKey::DeleteRecords, 0, 2),
    ] {
        let listed = versions
            .api_keys
            .iter()
            .find(|k| k.api_key == api as i16)
            .unwrap_or_else(|| panic!("{api:?} not advertised"));
        assert_eq!(
            (listed.min_version, listed.max_version),
            (min, max),
            "{api:?}"
        );
    }
}

fn delete_records(topic: &str, partition: i32, offset: i64) -> DeleteRecordsRequest {
    DeleteRecordsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(vec![
            DeleteRecordsTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![
                    DeleteRecordsPartition::default()
                        .with_partition_index(partition)
                        .with_offset(offset),
                ]),
        ])
}

async fn delete(client: &mut Client, topic: &str, partition: i32, offset: i64) -> (i16, i64) {
    let response = client
        .call(&delete_records(topic, partition, offset), 2)
        .await;
    let p = &response.topics[0].partitions[0];
    (p.error_code, p.low_watermark)
}

async fn earliest(client: &mut Client, topic: &str) -> i64 {
    let request = ListOffsetsRequest::default().with_topics(vec![
        ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ListOffsetsPartition::default().with_timestamp(-2)]),
    ]);
    client.call(&request, 6).await.topics[0].partitions[0].offset
}

async fn fetch_code(client: &mut Client, topic: &str, offset: i64) -> i16 {
    let request = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(name(topic))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    client.call(&request, 12).await.responses[0].partitions[0].error_code
}

#[tokio::test]
async fn delete_records_moves_the_low_watermark_that_fetch_and_list_offsets_see() {
    let server = start(KafkaConfig::default()).await;
    let broker = &server.broker;
    broker
        .create_topic("log", TopicSpec::with_partitions(1))
        .await
        .unwrap();
    let messages = (0..5)
        .map(|i| OutgoingMessage::new(format!("m{i}")))
        .collect();
    broker
        .publish_to_partition("log", 0, messages)
        .await
        .unwrap();
    let mut client = Client::connect(server.addr).await;
    for version in [0i16, 1] {
        let offset = 1 + i64::from(version);
        let response = client
            .call(&delete_records("log", 0, offset), version)
            .await;
        let p = &response.topics[0].partitions[0];
        assert_eq!((p.error_code, p.low_watermark), (0, offset), "v{version}");
    }
    assert_eq!(delete(&mut client, "log", 0, 3).await, (0, 3));
    assert_eq!(earliest(&mut client, "log").await, 3);
    assert_eq!(
        fetch_code(&mut client, "log", 2).await,
        code(ResponseError::OffsetOutOfRange)
    );
    assert_eq!(fetch_code(&mut client, "log", 3).await, 0);
    let out_of_range = code(ResponseError::OffsetOutOfRange);
    assert_eq!(delete(&mut client, "log", 0, 99).await, (out_of_range, -1));
    assert_eq!(delete(&mut client, "log", 0, -7).await, (out_of_range, -1));
    let unknown = code(ResponseError::UnknownTopicOrPartition);
    assert_eq!(delete(&mut client, "log", 4, 1).await.0, unknown);
    assert_eq!(delete(&mut client, "nope", 0, 1).await.0, unknown);
    assert_eq!(
        delete(&mut client, "log", 0, 1).await,
        (0, 3),
        "never backwards"
    );
    assert_eq!(
        delete(&mut client, "log", 0, -1).await,
        (0, 5),
        "-1: the high watermark"
    );
    assert_eq!(earliest(&mut client, "log").await, 5);

    // A Ferry subscription's unsettled records are kept: the topic's retention does not
    // override subscriptions by default.
    broker
        .create_topic("held", TopicSpec::with_partitions(1))
        .await
        .unwrap();
    let mut sub = SubscriptionSpec::new(ferry_broker::Name::new("held").unwrap());
    sub.start = SubscriptionStart::Earliest;
    broker.create_subscription("held-sub", sub).await.unwrap();
    let messages = (0..3)
        .map(|i| OutgoingMessage::new(format!("m{i}")))
        .collect();
    broker
        .publish_to_partition("held", 0, messages)
        .await
        .unwrap();
    assert_eq!(
        delete(&mut client, "held", 0, 2).await,
        (code(ResponseError::PolicyViolation), -1)
    );
    assert_eq!(earliest(&mut client, "held").await, 0);
}

#[tokio::test]
async fn create_topics_takes_assignments_that_place_every_partition_on_this_node() {
    let server = start(KafkaConfig::default()).await;
    let mut client = Client::connect(server.addr).await;
    let assigned = |topic: &str, partitions: i32, brokers: &[&[i32]]| {
        CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(-1)
            .with_assignments(
                brokers
                    .iter()
                    .enumerate()
                    .map(|(i, ids)| {
                        CreatableReplicaAssignment::default()
                            .with_partition_index(i as i32)
                            .with_broker_ids(ids.iter().map(|&id| BrokerId(id)).collect())
                    })
                    .collect(),
            )
    };
    let response = client
        .call(
            &CreateTopicsRequest::default()
                .with_timeout_ms(5_000)
                .with_topics(vec![
                    assigned("placed", -1, &[&[0], &[0]]),
                    assigned("elsewhere", -1, &[&[0], &[1]]),
                    assigned("counted-twice", 2, &[&[0], &[0]]),
                ]),
            4,
        )
        .await;
    let codes: Vec<_> = response
        .topics
        .iter()
        .map(|t| (t.name.0.to_string(), t.error_code))
        .collect();
    assert!(codes.contains(&("placed".into(), 0)), "{codes:?}");
    assert!(
        codes.contains(&(
            "elsewhere".into(),
            code(ResponseError::InvalidReplicaAssignment)
        )),
        "{codes:?}"
    );
    assert!(
        codes.contains(&("counted-twice".into(), code(ResponseError::InvalidRequest))),
        "{codes:?}"
    );
    assert_eq!(partitions(&server.broker, "placed"), 2);
    assert!(server.broker.describe_topic("elsewhere").is_err());
    assert!(server.broker.describe_topic("counted-twice").is_err());
}
