//! The cluster admin APIs that describe this one node, over a socket with the
//! `kafka-protocol` codec: DescribeTopicPartitions (its pages and cursor), DescribeLogDirs,
//! ListConfigResources, List/AlterPartitionReassignments, ElectLeaders, and the broker
//! resource's listeners.
//! Their refusals to a user without `admin:#` are in `sasl.rs`.

mod common;

use common::{Client, start};
use ferry_broker::{OutgoingMessage, TopicSpec};
use ferry_kafka::KafkaConfig;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
use kafka_protocol::messages::describe_topic_partitions_response::DescribeTopicPartitionsResponse;
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, BrokerId, DescribeConfigsRequest, DescribeLogDirsRequest,
    DescribeTopicPartitionsRequest, ListConfigResourcesRequest, ListPartitionReassignmentsRequest,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

async fn server_with(topics: &[(&str, u32)]) -> common::Server {
    let server = start(KafkaConfig::default()).await;
    for &(topic, partitions) in topics {
        server
            .broker
            .create_topic(topic, TopicSpec::with_partitions(partitions))
            .await
            .unwrap();
    }
    server
}

fn partitions_request(
    topics: &[&str],
    limit: i32,
    cursor: Option<(&str, i32)>,
) -> DescribeTopicPartitionsRequest {
    DescribeTopicPartitionsRequest::default()
        .with_topics(
            topics
                .iter()
                .map(|t| TopicRequest::default().with_name(name(t)))
                .collect(),
        )
        .with_response_partition_limit(limit)
        .with_cursor(cursor.map(|(topic, partition)| {
            Cursor::default()
                .with_topic_name(name(topic))
                .with_partition_index(partition)
        }))
}

/// `(topic, error, partition indexes)` of each topic answered, and the next cursor.
type Page = (Vec<(String, i16, Vec<i32>)>, Option<(String, i32)>);

fn page(response: DescribeTopicPartitionsResponse) -> Page {
    let topics = response
        .topics
        .into_iter()
        .map(|t| {
            (
                t.name.unwrap().to_string(),
                t.error_code,
                t.partitions.iter().map(|p| p.partition_index).collect(),
            )
        })
        .collect();
    let cursor = response
        .next_cursor
        .map(|c| (c.topic_name.to_string(), c.partition_index));
    (topics, cursor)
}

fn entry(topic: &str, partitions: &[i32]) -> (String, i16, Vec<i32>) {
    (topic.to_owned(), 0, partitions.to_vec())
}

#[tokio::test]
async fn describe_topic_partitions_pages_through_the_partitions_in_name_order() {
    let server = server_with(&[("b-topic", 3), ("a-topic", 2), ("_hidden_style", 1)]).await;
    let mut client = Client::connect(server.addr).await;

    // Everything fits: every partition led by node 0, its only replica.
    let response = client
        .call(&partitions_request(&["a-topic", "b-topic"], 100, None), 0)
        .await;
    let leaders: Vec<_> = response.topics[0]
        .partitions
        .iter()
        .map(|p| (p.leader_id, p.replica_nodes.clone(), p.isr_nodes.clone()))
        .collect();
    assert_eq!(
        leaders,
        vec![(BrokerId(0), vec![BrokerId(0)], vec![BrokerId(0)]); 2]
    );
    assert_eq!(
        page(response),
        (
            vec![entry("a-topic", &[0, 1]), entry("b-topic", &[0, 1, 2])],
            None
        )
    );

    // Three per page: the cursor names the first partition left out, and the next request
    // starts there.
    let first = page(
        client
            .call(&partitions_request(&["b-topic", "a-topic"], 3, None), 0)
            .await,
    );
    assert_eq!(
        first,
        (
            vec![entry("a-topic", &[0, 1]), entry("b-topic", &[0])],
            Some(("b-topic".to_owned(), 1))
        )
    );
    let second = page(
        client
            .call(
                &partitions_request(&["b-topic", "a-topic"], 3, Some(("b-topic", 1))),
                0,
            )
            .await,
    );
    assert_eq!(second, (vec![entry("b-topic", &[1, 2])], None));

    // A page filled exactly by one topic points at the next topic's first partition.
    let exact = page(
        client
            .call(&partitions_request(&["a-topic", "b-topic"], 2, None), 0)
            .await,
    );
    assert_eq!(
        exact,
        (
            vec![entry("a-topic", &[0, 1])],
            Some(("b-topic".to_owned(), 0))
        )
    );

    // No names: every topic, in name order (`_` sorts before letters), a leading `_`
    // included.
    let all = page(client.call(&partitions_request(&[], 100, None), 0).await);
    let names: Vec<_> = all.0.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(names, ["_hidden_style", "a-topic", "b-topic"]);

    // A missing topic; a cursor outside the names asked for, or negative, refuses them all.
    let missing = page(
        client
            .call(&partitions_request(&["nope", "a-topic"], 100, None), 0)
            .await,
    );
    assert!(missing.0.contains(&(
        "nope".to_owned(),
        ResponseError::UnknownTopicOrPartition.code(),
        vec![]
    )));
    for cursor in [("c-topic", 0), ("a-topic", -1)] {
        let refused = page(
            client
                .call(&partitions_request(&["a-topic"], 100, Some(cursor)), 0)
                .await,
        );
        assert_eq!(
            refused.0,
            vec![(
                "a-topic".to_owned(),
                ResponseError::InvalidRequest.code(),
                vec![]
            )],
            "{cursor:?}"
        );
    }
}

#[tokio::test]
async fn describe_log_dirs_names_the_data_directory_and_each_partitions_size() {
    let server = server_with(&[("sized", 2), ("other", 1)]).await;
    server
        .broker
        .publish_to_partition("sized", 1, vec![OutgoingMessage::new(vec![7u8; 4096])])
        .await
        .unwrap();
    let expected = server.broker.describe_topic("sized").unwrap().partitions[1].bytes;
    assert!(expected >= 4096, "{expected}");
    let mut client = Client::connect(server.addr).await;
    for version in 1..=4 {
        let response = client
            .call(
                &DescribeLogDirsRequest::default().with_topics(None),
                version,
            )
            .await;
        assert_eq!(response.error_code, 0);
        assert_eq!(response.results.len(), 1, "one log dir");
        let dir = &response.results[0];
        assert_eq!(dir.error_code, 0);
        assert_eq!(
            std::path::Path::new(dir.log_dir.as_str()),
            std::path::absolute(server.broker.dir()).unwrap()
        );
        let mut topics: Vec<_> = dir.topics.iter().map(|t| t.name.to_string()).collect();
        topics.sort();
        assert_eq!(topics, ["other", "sized"]);
        if version >= 4 {
            assert!(dir.usable_bytes > 0, "free space on the data disk");
        }
    }
    // Named partitions only; a missing topic or partition is left out.
    let asked = DescribeLogDirsRequest::default().with_topics(Some(vec![
        DescribableLogDirTopic::default()
            .with_topic(name("sized"))
            .with_partitions(vec![1, 9]),
        DescribableLogDirTopic::default()
            .with_topic(name("missing"))
            .with_partitions(vec![0]),
    ]));
    let response = client.call(&asked, 4).await;
    let topics = &response.results[0].topics;
    assert_eq!(topics.len(), 1);
    assert_eq!(topics[0].name, name("sized"));
    let sizes: Vec<_> = topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.partition_size))
        .collect();
    assert_eq!(sizes, [(1, expected as i64)]);
}

#[tokio::test]
async fn list_config_resources_lists_the_topics_and_this_broker() {
    let server = server_with(&[("_private", 1), ("orders", 1)]).await;
    let mut client = Client::connect(server.addr).await;
    let list = |types: Vec<i8>| ListConfigResourcesRequest::default().with_resource_types(types);
    let resources = |response: kafka_protocol::messages::ListConfigResourcesResponse| {
        assert_eq!(response.error_code, 0);
        let mut listed: Vec<_> = response
            .config_resources
            .into_iter()
            .map(|r| (r.resource_type, r.resource_name.to_string()))
            .collect();
        listed.sort();
        listed
    };
    let all = resources(client.call(&list(vec![]), 1).await);
    assert_eq!(
        all,
        [
            (2, "_private".to_owned()),
            (2, "orders".to_owned()),
            (4, "0".to_owned())
        ]
    );
    assert_eq!(
        resources(client.call(&list(vec![4]), 1).await),
        [(4, "0".to_owned())]
    );
    // Types Ferry has no resources of; v0 asks for client metrics only.
    assert!(resources(client.call(&list(vec![16, 32, 8]), 1).await).is_empty());
    assert!(resources(client.call(&list(vec![]), 0).await).is_empty());
    // A type Kafka does not know.
    let unknown = client.call(&list(vec![2, 3]), 1).await;
    assert_eq!(unknown.error_code, ResponseError::UnsupportedVersion.code());
    assert!(unknown.config_resources.is_empty());
}

#[tokio::test]
async fn list_partition_reassignments_is_always_empty_on_one_node() {
    let server = server_with(&[("moved", 2)]).await;
    let mut client = Client::connect(server.addr).await;
    for topics in [
        None,
        Some(vec![
            ListPartitionReassignmentsTopics::default()
                .with_name(name("moved"))
                .with_partition_indexes(vec![0, 1]),
        ]),
    ] {
        let request = ListPartitionReassignmentsRequest::default()
            .with_timeout_ms(5_000)
            .with_topics(topics);
        let response = client.call(&request, 0).await;
        assert_eq!(response.error_code, 0);
        assert!(response.topics.is_empty());
    }
}

#[tokio::test]
async fn alter_partition_reassignments_takes_only_the_replica_set_there_is() {
    use kafka_protocol::messages::AlterPartitionReassignmentsRequest;
    use kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    let server = server_with(&[("moved", 2)]).await;
    let mut client = Client::connect(server.addr).await;
    let to = |partition: i32, replicas: Option<Vec<i32>>| {
        ReassignablePartition::default()
            .with_partition_index(partition)
            .with_replicas(replicas.map(|r| r.into_iter().map(BrokerId).collect()))
    };
    let request = AlterPartitionReassignmentsRequest::default().with_topics(vec![
        ReassignableTopic::default()
            .with_name(name("moved"))
            .with_partitions(vec![
                to(0, Some(vec![0])),
                to(1, Some(vec![1])),
                to(1, Some(vec![0, 0])),
                to(1, None),
                to(7, Some(vec![0])),
            ]),
        ReassignableTopic::default()
            .with_name(name("missing"))
            .with_partitions(vec![to(0, Some(vec![0]))]),
    ]);
    for version in [0, 1] {
        let response = client.call(&request, version).await;
        assert_eq!(response.error_code, 0);
        let codes: Vec<Vec<(i32, i16)>> = response
            .responses
            .iter()
            .map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (p.partition_index, p.error_code))
                    .collect()
            })
            .collect();
        let invalid = ResponseError::InvalidReplicaAssignment.code();
        let unknown = ResponseError::UnknownTopicOrPartition.code();
        assert_eq!(
            codes,
            [
                vec![
                    (0, 0),
                    (1, invalid),
                    (1, invalid),
                    (1, ResponseError::NoReassignmentInProgress.code()),
                    (7, unknown)
                ],
                vec![(0, unknown)]
            ]
        );
    }
    assert_eq!(
        server
            .broker
            .describe_topic("moved")
            .unwrap()
            .partitions
            .len(),
        2
    );
}

#[tokio::test]
async fn elect_leaders_is_not_needed_for_any_partition() {
    use kafka_protocol::messages::ElectLeadersRequest;
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    let server = server_with(&[("led", 2)]).await;
    let mut client = Client::connect(server.addr).await;
    let named = |election_type: i8| {
        ElectLeadersRequest::default()
            .with_election_type(election_type)
            .with_timeout_ms(5_000)
            .with_topic_partitions(Some(vec![
                TopicPartitions::default()
                    .with_topic(name("led"))
                    .with_partitions(vec![0, 1, 5]),
                TopicPartitions::default()
                    .with_topic(name("missing"))
                    .with_partitions(vec![0]),
            ]))
    };
    let not_needed = ResponseError::ElectionNotNeeded.code();
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    for (version, election_type) in [(0, 0), (1, 0), (2, 0), (2, 1)] {
        let response = client.call(&named(election_type), version).await;
        assert_eq!(response.error_code, 0);
        let codes: Vec<(String, Vec<(i32, i16)>)> = response
            .replica_election_results
            .iter()
            .map(|t| {
                (
                    t.topic.to_string(),
                    t.partition_result
                        .iter()
                        .map(|p| (p.partition_id, p.error_code))
                        .collect(),
                )
            })
            .collect();
        assert_eq!(
            codes,
            [
                (
                    "led".to_owned(),
                    vec![(0, not_needed), (1, not_needed), (5, unknown)]
                ),
                ("missing".to_owned(), vec![(0, unknown)])
            ],
            "v{version} type {election_type}"
        );
    }
    // Every partition: only elections that did something are listed, so none.
    let all = ElectLeadersRequest::default().with_topic_partitions(None);
    let response = client.call(&all, 2).await;
    assert_eq!(response.error_code, 0);
    assert!(response.replica_election_results.is_empty());
    let response = client.call(&named(2), 2).await;
    assert_eq!(response.error_code, ResponseError::InvalidRequest.code());
}

#[tokio::test]
async fn the_broker_resource_reports_its_listeners_read_only() {
    let server = start(KafkaConfig {
        advertised: Some("kafka.example:19092".parse().unwrap()),
        ..KafkaConfig::default()
    })
    .await;
    let mut client = Client::connect(server.addr).await;
    let request = DescribeConfigsRequest::default()
        .with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(4)
                .with_resource_name(StrBytes::from_static_str("0"))
                .with_configuration_keys(Some(vec![
                    StrBytes::from_static_str("listeners"),
                    StrBytes::from_static_str("advertised.listeners"),
                ])),
        ])
        .with_include_synonyms(true);
    let response = client.call(&request, 4).await;
    let configs = &response.results[0].configs;
    let reported: Vec<_> = configs
        .iter()
        .map(|c| {
            (
                c.name.to_string(),
                c.value.as_ref().map(|v| v.to_string()),
                c.read_only,
                c.config_source,
                c.config_type,
            )
        })
        .collect();
    assert_eq!(
        reported,
        [
            (
                "listeners".to_owned(),
                Some(format!("PLAINTEXT://{}", server.addr)),
                true,
                4,
                7
            ),
            (
                "advertised.listeners".to_owned(),
                Some("PLAINTEXT://kafka.example:19092".to_owned()),
                true,
                4,
                7
            ),
        ],
        "STATIC_BROKER_CONFIG, LIST"
    );
    // No default to fall back to: the configured value is the one synonym.
    let synonyms: Vec<_> = configs[1]
        .synonyms
        .iter()
        .map(|s| (s.name.to_string(), s.source))
        .collect();
    assert_eq!(synonyms, [("advertised.listeners".to_owned(), 4)]);
}

#[tokio::test]
async fn api_versions_advertises_the_cluster_admin_apis() {
    let server = start(KafkaConfig::default()).await;
    let mut client = Client::connect(server.addr).await;
    let versions = client.call(&ApiVersionsRequest::default(), 3).await;
    for (api, min, max) in [
        (ApiKey::DescribeTopicPartitions, 0, 0),
        (ApiKey::DescribeLogDirs, 1, 4),
        (ApiKey::ListConfigResources, 0, 1),
        (ApiKey::ListPartitionReassignments, 0, 0),
        (ApiKey::AlterPartitionReassignments, 0, 1),
        (ApiKey::ElectLeaders, 0, 2),
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
