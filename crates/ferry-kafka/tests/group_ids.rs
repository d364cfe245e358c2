//! Kafka group ids that are not Ferry names (`range,roundrobin`, `team: a b`), over a
//! socket with the raw client: every Kafka API shows the client's id as given, and the
//! offsets are the broker's group under the id's documented encoding (`kafka__` and the
//! escaped bytes).

mod common;

use common::{Client, start};
use ferry_broker::{OutgoingMessage, TopicSpec};
use ferry_kafka::KafkaConfig;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const ID: &str = "team: a,b";
/// `ID` as the broker names its group: letters and digits kept, other bytes escaped.
const NAME: &str = "kafka__team_3a_20a_2cb";

fn text(t: &str) -> StrBytes {
    StrBytes::from_string(t.to_owned())
}

fn group() -> GroupId {
    GroupId(text(ID))
}

#[tokio::test]
async fn a_group_id_with_commas_colons_and_spaces_works_and_is_shown_as_given() {
    let server = start(KafkaConfig {
        group_initial_rebalance_delay_ms: 0,
        ..KafkaConfig::default()
    })
    .await;
    server
        .broker
        .create_topic("t", TopicSpec::with_partitions(1))
        .await
        .unwrap();
    let batch = (0..5)
        .map(|i| OutgoingMessage::new(format!("r{i}")))
        .collect();
    server
        .broker
        .publish_to_partition("t", 0, batch)
        .await
        .unwrap();
    let mut client = Client::connect(server.addr).await;

    let found = client
        .call(
            &FindCoordinatorRequest::default().with_coordinator_keys(vec![text(ID)]),
            4,
        )
        .await;
    assert_eq!(found.coordinators[0].key.as_str(), ID);
    assert_eq!(found.coordinators[0].error_code, 0);

    // Join (v4+: MEMBER_ID_REQUIRED first), sync, commit.
    let join = |member: &str| {
        JoinGroupRequest::default()
            .with_group_id(group())
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_member_id(text(member))
            .with_protocol_type(text("consumer"))
            .with_protocols(vec![
                JoinGroupRequestProtocol::default()
                    .with_name(text("range"))
                    .with_metadata(bytes::Bytes::from_static(b"m")),
            ])
    };
    let first = client.call(&join(""), 7).await;
    assert_eq!(first.error_code, ResponseError::MemberIdRequired.code());
    let member = first.member_id.to_string();
    let joined = client.call(&join(&member), 7).await;
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.generation_id, 1);
    let synced = client
        .call(
            &SyncGroupRequest::default()
                .with_group_id(group())
                .with_member_id(text(&member))
                .with_generation_id(1),
            3,
        )
        .await;
    assert_eq!(synced.error_code, 0);
    let committed = client
        .call(
            &OffsetCommitRequest::default()
                .with_group_id(group())
                .with_member_id(text(&member))
                .with_generation_id_or_member_epoch(1)
                .with_retention_time_ms(-1)
                .with_topics(vec![
                    OffsetCommitRequestTopic::default()
                        .with_name(TopicName(text("t")))
                        .with_partitions(vec![
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(3),
                        ]),
                ]),
            8,
        )
        .await;
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);
    // The broker keeps them under the encoded name.
    let stored = server.broker.group_offsets("t", NAME).unwrap();
    assert_eq!(stored[&0].offset, 3);

    // Read back by the id, one group (v1–7) and several (v8).
    let fetched = client
        .call(
            &OffsetFetchRequest::default()
                .with_group_id(group())
                .with_topics(Some(vec![
                    OffsetFetchRequestTopic::default()
                        .with_name(TopicName(text("t")))
                        .with_partition_indexes(vec![0]),
                ])),
            7,
        )
        .await;
    assert_eq!(fetched.error_code, 0);
    assert_eq!(fetched.topics[0].partitions[0].committed_offset, 3);
    let several = client
        .call(
            &OffsetFetchRequest::default().with_groups(vec![
                OffsetFetchRequestGroup::default()
                    .with_group_id(group())
                    .with_topics(None),
            ]),
            8,
        )
        .await;
    assert_eq!(several.groups[0].group_id.as_str(), ID);
    assert_eq!(
        several.groups[0].topics[0].partitions[0].committed_offset,
        3
    );

    // Described and listed by the id.
    let described = client
        .call(
            &DescribeGroupsRequest::default().with_groups(vec![group()]),
            5,
        )
        .await;
    let described = &described.groups[0];
    assert_eq!((described.group_id.as_str(), described.error_code), (ID, 0));
    assert_eq!(described.group_state.as_str(), "Stable");
    assert_eq!(described.members[0].member_id.as_str(), member);
    let listed = client.call(&ListGroupsRequest::default(), 4).await;
    let ids: Vec<&str> = listed.groups.iter().map(|g| g.group_id.as_str()).collect();
    assert_eq!(ids, vec![ID]);

    // After the member leaves, the group is listed from its offsets alone (decoded from
    // the broker's name), then deleted by the id.
    let left = client
        .call(
            &LeaveGroupRequest::default()
                .with_group_id(group())
                .with_member_id(text(&member)),
            2,
        )
        .await;
    assert_eq!(left.error_code, 0);
    let deleted = client
        .call(
            &DeleteGroupsRequest::default().with_groups_names(vec![group()]),
            2,
        )
        .await;
    assert_eq!(
        (
            deleted.results[0].group_id.as_str(),
            deleted.results[0].error_code
        ),
        (ID, 0)
    );
    assert!(server.broker.list_groups().is_empty());
    let listed = client.call(&ListGroupsRequest::default(), 4).await;
    assert!(listed.groups.is_empty(), "{:?}", listed.groups);
}

#[tokio::test]
async fn groups_known_only_by_their_offsets_are_listed_by_their_kafka_ids() {
    let server = start(KafkaConfig::default()).await;
    server
        .broker
        .create_topic("t", TopicSpec::with_partitions(1))
        .await
        .unwrap();
    let commit = |name: &str| {
        server
            .broker
            .commit_group_offsets(
                "t",
                name,
                &[ferry_broker::OffsetCommit {
                    partition: 0,
                    offset: 0,
                    metadata: String::new(),
                }],
            )
            .unwrap();
    };
    // A Ferry-named group, an encoded one, and one no Kafka id maps to (`abc` is its own
    // name, so `kafka__abc` is nobody's encoding).
    commit("orders");
    commit(NAME);
    commit("kafka__abc");
    let mut client = Client::connect(server.addr).await;
    let listed = client.call(&ListGroupsRequest::default(), 4).await;
    let mut ids: Vec<&str> = listed.groups.iter().map(|g| g.group_id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, vec!["orders", ID]);
}
