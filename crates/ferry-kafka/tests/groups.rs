//! Consumer groups over a socket, with a raw client on the `kafka-protocol` codec:
//! FindCoordinator, a join round across two connections (one waits without holding the
//! other up), SyncGroup, Heartbeat, LeaveGroup, commits and their refusals, offsets read
//! back (one group and several), OffsetDelete, and the admin APIs — with the commits
//! checked as the broker's group offsets.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{Client, start};
use ferry_broker::{GroupJoin, OutgoingMessage, TopicSpec};
use ferry_kafka::KafkaConfig;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

/// These tests drive the protocol by hand and expect a first round to end as soon as its
/// members have joined: no initial rebalance delay (Kafka's 3 s default is tested in the
/// coordinator's unit tests).
fn prompt() -> KafkaConfig {
    KafkaConfig {
        group_initial_rebalance_delay_ms: 0,
        ..KafkaConfig::default()
    }
}

fn text(t: &str) -> StrBytes {
    StrBytes::from_string(t.to_owned())
}

fn group(g: &str) -> GroupId {
    GroupId(text(g))
}

fn join(g: &str, member: &str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(group(g))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(20_000)
        .with_member_id(text(member))
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![
            JoinGroupRequestProtocol::default()
                .with_name(text("range"))
                .with_metadata(Bytes::from(format!("meta-of-{member}"))),
        ])
}

fn sync(g: &str, member: &str, generation: i32, assignments: &[(&str, &str)]) -> SyncGroupRequest {
    SyncGroupRequest::default()
        .with_group_id(group(g))
        .with_member_id(text(member))
        .with_generation_id(generation)
        .with_protocol_type(Some(text("consumer")))
        .with_protocol_name(Some(text("range")))
        .with_assignments(
            assignments
                .iter()
                .map(|(m, a)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(text(m))
                        .with_assignment(Bytes::from(a.to_string()))
                })
                .collect(),
        )
}

fn heartbeat(g: &str, member: &str, generation: i32) -> HeartbeatRequest {
    HeartbeatRequest::default()
        .with_group_id(group(g))
        .with_member_id(text(member))
        .with_generation_id(generation)
}

fn commit(
    g: &str,
    member: &str,
    generation: i32,
    topic: &str,
    offsets: &[(i32, i64)],
) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(group(g))
        .with_member_id(text(member))
        .with_generation_id_or_member_epoch(generation)
        .with_retention_time_ms(-1)
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_name(TopicName(text(topic)))
                .with_partitions(
                    offsets
                        .iter()
                        .map(|&(p, o)| {
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(o)
                                .with_committed_metadata(Some(text("m")))
                        })
                        .collect(),
                ),
        ])
}

fn commit_codes(response: &OffsetCommitResponse) -> Vec<i16> {
    response.topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect()
}

async fn topic_with_records(broker: &ferry_broker::Broker, topic: &str, partitions: u32) {
    broker
        .create_topic(topic, TopicSpec::with_partitions(partitions))
        .await
        .unwrap();
    for p in 0..partitions {
        let batch = (0..10)
            .map(|i| OutgoingMessage::new(format!("r{i}")))
            .collect();
        broker.publish_to_partition(topic, p, batch).await.unwrap();
    }
}

/// Joins a new member the v4+ way: MEMBER_ID_REQUIRED, then the join with that id.
async fn member_id(client: &mut Client, g: &str) -> String {
    let first = client.call(&join(g, ""), 7).await;
    assert_eq!(first.error_code, ResponseError::MemberIdRequired.code());
    assert!(!first.member_id.is_empty());
    first.member_id.to_string()
}

#[tokio::test]
async fn find_coordinator_names_this_node_for_groups_and_refuses_transactions() {
    let server = start(prompt()).await;
    let mut client = Client::connect(server.addr).await;
    for version in 0..=3 {
        let request = FindCoordinatorRequest::default().with_key(text("g"));
        let found = client.call(&request, version).await;
        assert_eq!(found.error_code, 0, "v{version}");
        assert_eq!(found.node_id, BrokerId(0));
        assert_eq!(found.host.as_str(), server.addr.ip().to_string());
        assert_eq!(found.port, i32::from(server.addr.port()));
    }
    let batched =
        FindCoordinatorRequest::default().with_coordinator_keys(vec![text("g1"), text("g2")]);
    let found = client.call(&batched, 4).await;
    let keys: Vec<&str> = found.coordinators.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(keys, vec!["g1", "g2"]);
    assert!(
        found
            .coordinators
            .iter()
            .all(|c| c.error_code == 0 && c.node_id == BrokerId(0))
    );
    let transactional = FindCoordinatorRequest::default()
        .with_key(text("tx"))
        .with_key_type(1);
    let refused = client.call(&transactional, 3).await;
    assert_eq!(refused.error_code, ResponseError::InvalidRequest.code());
    assert!(refused.error_message.is_some());
}

#[tokio::test]
async fn a_second_member_waits_for_the_first_to_join_again_without_holding_other_connections_up() {
    let server = start(prompt()).await;
    let mut first = Client::connect(server.addr).await;
    let a = member_id(&mut first, "g").await;
    let joined = first.call(&join("g", &a), 7).await;
    assert_eq!((joined.error_code, joined.generation_id), (0, 1));
    assert_eq!(joined.leader.as_str(), a);
    let synced = first.call(&sync("g", &a, 1, &[(&a, "all-of-it")]), 5).await;
    assert_eq!(synced.assignment, Bytes::from("all-of-it"));

    // b's join waits for the round, on its own connection...
    let mut second = Client::connect(server.addr).await;
    let b = member_id(&mut second, "g").await;
    let waiting = second.send(&join("g", &b), 7).await;
    // ...while a, on another connection, is told of the round by its heartbeat.
    let beat = first.call(&heartbeat("g", &a, 1), 4).await;
    assert_eq!(beat.error_code, ResponseError::RebalanceInProgress.code());
    let rejoined = first.call(&join("g", &a), 7).await;
    let b_joined = second.receive::<JoinGroupRequest>(7, waiting).await;
    assert_eq!((rejoined.generation_id, b_joined.generation_id), (2, 2));
    assert_eq!(rejoined.leader.as_str(), a);
    let mut members: Vec<(String, Bytes)> = rejoined
        .members
        .iter()
        .map(|m| (m.member_id.to_string(), m.metadata.clone()))
        .collect();
    members.sort();
    let mut expected = vec![
        (a.clone(), Bytes::from(format!("meta-of-{a}"))),
        (b.clone(), Bytes::from(format!("meta-of-{b}"))),
    ];
    expected.sort();
    assert_eq!(members, expected, "the leader gets every member's metadata");
    assert!(b_joined.members.is_empty());

    // b's sync waits for the leader's assignment.
    let b_sync = second.send(&sync("g", &b, 2, &[]), 5).await;
    let a_synced = first
        .call(&sync("g", &a, 2, &[(&a, "p0"), (&b, "p1")]), 5)
        .await;
    let b_synced = second.receive::<SyncGroupRequest>(5, b_sync).await;
    assert_eq!(a_synced.assignment, Bytes::from("p0"));
    assert_eq!(b_synced.assignment, Bytes::from("p1"));

    // Stale generation, unknown member.
    let stale = first.call(&heartbeat("g", &a, 1), 4).await;
    assert_eq!(stale.error_code, ResponseError::IllegalGeneration.code());
    let unknown = first.call(&heartbeat("g", "nobody", 2), 4).await;
    assert_eq!(unknown.error_code, ResponseError::UnknownMemberId.code());

    // DescribeGroups and ListGroups see a stable group of two.
    let described = first
        .call(
            &DescribeGroupsRequest::default().with_groups(vec![group("g"), group("none")]),
            5,
        )
        .await;
    let g = &described.groups[0];
    assert_eq!(
        (
            g.group_state.as_str(),
            g.protocol_type.as_str(),
            g.protocol_data.as_str()
        ),
        ("Stable", "consumer", "range")
    );
    assert_eq!(g.members.len(), 2);
    assert!(g.members.iter().any(|m| m.member_assignment == "p1"));
    assert_eq!(described.groups[1].group_state.as_str(), "Dead");
    let stable = first
        .call(
            &ListGroupsRequest::default().with_states_filter(vec![text("stable")]),
            4,
        )
        .await;
    assert_eq!(stable.groups.len(), 1);
    assert_eq!(stable.groups[0].group_state.as_str(), "Stable");

    // Deleting a group with members is refused.
    let deleted = first
        .call(
            &DeleteGroupsRequest::default().with_groups_names(vec![group("g")]),
            2,
        )
        .await;
    assert_eq!(
        deleted.results[0].error_code,
        ResponseError::NonEmptyGroup.code()
    );

    // b leaves (v3+ batch): a is told to join again and leads alone.
    let left = second
        .call(
            &LeaveGroupRequest::default()
                .with_group_id(group("g"))
                .with_members(vec![MemberIdentity::default().with_member_id(text(&b))]),
            4,
        )
        .await;
    assert_eq!(left.members[0].error_code, 0);
    let beat = first.call(&heartbeat("g", &a, 2), 4).await;
    assert_eq!(beat.error_code, ResponseError::RebalanceInProgress.code());
    let alone = first.call(&join("g", &a), 7).await;
    assert_eq!((alone.generation_id, alone.members.len()), (3, 1));
    // A v0–2 leave names one member.
    let left = first
        .call(
            &LeaveGroupRequest::default()
                .with_group_id(group("g"))
                .with_member_id(text(&a)),
            1,
        )
        .await;
    assert_eq!(left.error_code, 0);
    let empty = first
        .call(
            &DescribeGroupsRequest::default().with_groups(vec![group("g")]),
            0,
        )
        .await;
    assert_eq!(empty.groups[0].group_state.as_str(), "Empty");
    let deleted = first
        .call(
            &DeleteGroupsRequest::default().with_groups_names(vec![group("g")]),
            0,
        )
        .await;
    assert_eq!(deleted.results[0].error_code, 0);
}

#[tokio::test]
async fn commits_are_the_brokers_group_offsets_and_stale_generations_are_refused() {
    let server = start(prompt()).await;
    topic_with_records(&server.broker, "t", 2).await;
    let mut client = Client::connect(server.addr).await;

    // A simple consumer's commit (no member, generation -1) on a group nobody joined.
    let simple = client
        .call(&commit("kg", "", -1, "t", &[(0, 4), (1, 10)]), 2)
        .await;
    assert_eq!(commit_codes(&simple), vec![0, 0]);
    let lag = server.broker.group_lag("t", "kg").unwrap();
    assert_eq!((lag[0].committed, lag[0].lag_records), (Some(4), 6));
    assert_eq!((lag[1].committed, lag[1].lag_records), (Some(10), 0));
    assert_eq!(
        server.broker.group_offsets("t", "kg").unwrap()[&0].metadata,
        "m"
    );

    // A member's commit: its generation, not an old one.
    let a = member_id(&mut client, "kg").await;
    let joined = client.call(&join("kg", &a), 7).await;
    client
        .call(&sync("kg", &a, joined.generation_id, &[]), 5)
        .await;
    let ok = client
        .call(&commit("kg", &a, joined.generation_id, "t", &[(0, 6)]), 8)
        .await;
    assert_eq!(commit_codes(&ok), vec![0]);
    let stale = client
        .call(
            &commit("kg", &a, joined.generation_id - 1, "t", &[(0, 9)]),
            8,
        )
        .await;
    assert_eq!(
        commit_codes(&stale),
        vec![ResponseError::IllegalGeneration.code()]
    );
    let anonymous = client.call(&commit("kg", "", -1, "t", &[(0, 9)]), 8).await;
    assert_eq!(
        commit_codes(&anonymous),
        vec![ResponseError::UnknownMemberId.code()]
    );
    // Partitions are checked one by one.
    let mixed = client
        .call(
            &commit(
                "kg",
                &a,
                joined.generation_id,
                "t",
                &[(1, 2), (7, 0), (0, -5)],
            ),
            8,
        )
        .await;
    assert_eq!(
        commit_codes(&mixed),
        vec![
            0,
            ResponseError::UnknownTopicOrPartition.code(),
            ResponseError::OffsetOutOfRange.code()
        ]
    );
    let missing = client
        .call(
            &commit("kg", &a, joined.generation_id, "nope", &[(0, 1)]),
            8,
        )
        .await;
    assert_eq!(
        commit_codes(&missing),
        vec![ResponseError::UnknownTopicOrPartition.code()]
    );
    assert_eq!(
        server.broker.group_lag("t", "kg").unwrap()[0].committed,
        Some(6),
        "refused commits changed nothing"
    );

    // Read back: one group (v1–7), and several at once (v8).
    let fetch = OffsetFetchRequest::default()
        .with_group_id(group("kg"))
        .with_topics(Some(vec![
            OffsetFetchRequestTopic::default()
                .with_name(TopicName(text("t")))
                .with_partition_indexes(vec![0, 1]),
        ]));
    let fetched = client.call(&fetch, 7).await;
    let offsets: Vec<i64> = fetched.topics[0]
        .partitions
        .iter()
        .map(|p| p.committed_offset)
        .collect();
    assert_eq!(offsets, vec![6, 2]);
    let every = client
        .call(
            &OffsetFetchRequest::default()
                .with_group_id(group("kg"))
                .with_topics(None),
            2,
        )
        .await;
    assert_eq!(every.topics.len(), 1);
    let several = OffsetFetchRequest::default().with_groups(vec![
        OffsetFetchRequestGroup::default()
            .with_group_id(group("kg"))
            .with_topics(None),
        OffsetFetchRequestGroup::default()
            .with_group_id(group("other"))
            .with_topics(None),
    ]);
    let fetched = client.call(&several, 8).await;
    assert_eq!(fetched.groups.len(), 2);
    assert_eq!(fetched.groups[0].topics[0].partitions.len(), 2);
    assert!(fetched.groups[1].topics.is_empty());

    // OffsetDelete: refused while a member subscribes... (its metadata is not a consumer
    // subscription here, so the group's topics are unknown: NON_EMPTY_GROUP).
    let delete = OffsetDeleteRequest::default()
        .with_group_id(group("kg"))
        .with_topics(vec![
            OffsetDeleteRequestTopic::default()
                .with_name(TopicName(text("t")))
                .with_partitions(vec![
                    OffsetDeleteRequestPartition::default().with_partition_index(1),
                ]),
        ]);
    let refused = client.call(&delete, 0).await;
    assert_eq!(refused.error_code, ResponseError::NonEmptyGroup.code());
    client
        .call(
            &LeaveGroupRequest::default()
                .with_group_id(group("kg"))
                .with_member_id(text(&a)),
            2,
        )
        .await;
    let deleted = client.call(&delete, 0).await;
    assert_eq!(deleted.error_code, 0);
    assert_eq!(deleted.topics[0].partitions[0].error_code, 0);
    let left: Vec<u32> = server
        .broker
        .group_offsets("t", "kg")
        .unwrap()
        .into_keys()
        .collect();
    assert_eq!(left, vec![0]);

    // ListGroups shows a group that has only committed offsets, as Kafka does.
    server
        .broker
        .commit_group_offsets(
            "t",
            "offsets-only",
            &[ferry_broker::OffsetCommit {
                partition: 0,
                offset: 1,
                metadata: String::new(),
            }],
        )
        .unwrap();
    let listed = client.call(&ListGroupsRequest::default(), 3).await;
    let only = listed
        .groups
        .iter()
        .find(|g| g.group_id.as_str() == "offsets-only")
        .expect("listed");
    assert_eq!(only.protocol_type.as_str(), "");
}

#[tokio::test]
async fn a_group_held_by_ferrys_own_consumers_refuses_kafka_commits() {
    let server = start(prompt()).await;
    topic_with_records(&server.broker, "t", 1).await;
    server
        .broker
        .join_group("t", "shared", GroupJoin::default())
        .await
        .unwrap();
    let mut client = Client::connect(server.addr).await;
    let refused = client
        .call(&commit("shared", "", -1, "t", &[(0, 1)]), 8)
        .await;
    assert_eq!(
        commit_codes(&refused),
        vec![ResponseError::PolicyViolation.code()]
    );
    assert!(
        server
            .broker
            .group_offsets("t", "shared")
            .unwrap()
            .is_empty()
    );
    // The group ids Kafka clients cannot use: the empty one for membership (as Kafka
    // refuses it), and one too long to name the broker's group.
    let empty = client.call(&join("", ""), 7).await;
    assert_eq!(empty.error_code, ResponseError::InvalidGroupId.code());
    let long = client.call(&join(&",".repeat(100), ""), 7).await;
    assert_eq!(long.error_code, ResponseError::InvalidGroupId.code());
}

#[tokio::test]
async fn a_join_round_ends_at_the_rebalance_timeout_without_the_silent_member() {
    let server = start(prompt()).await;
    let mut first = Client::connect(server.addr).await;
    let a = member_id(&mut first, "slow").await;
    let short = |member: &str| join("slow", member).with_rebalance_timeout_ms(300);
    first.call(&short(&a), 7).await;
    first.call(&sync("slow", &a, 1, &[]), 5).await;
    let mut second = Client::connect(server.addr).await;
    let first_try = second.call(&join("slow", ""), 7).await;
    let b = first_try.member_id.to_string();
    // a never joins again: the round ends at its deadline with b alone.
    let started = std::time::Instant::now();
    let b_joined = tokio::time::timeout(Duration::from_secs(10), second.call(&short(&b), 7))
        .await
        .expect("answered at the deadline");
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_eq!(
        (b_joined.generation_id, b_joined.leader.as_str()),
        (2, b.as_str())
    );
    assert_eq!(b_joined.members.len(), 1);
    let gone = first.call(&heartbeat("slow", &a, 1), 4).await;
    assert_eq!(gone.error_code, ResponseError::UnknownMemberId.code());
}

#[tokio::test]
async fn a_static_member_restarting_keeps_its_assignment_and_fences_its_old_id() {
    let server = start(prompt()).await;
    let mut client = Client::connect(server.addr).await;
    let static_join =
        |member: &str| join("static", member).with_group_instance_id(Some(text("pod-1")));
    // A static member is known by its instance id: no MEMBER_ID_REQUIRED round trip.
    let joined = client.call(&static_join(""), 7).await;
    assert_eq!((joined.error_code, joined.generation_id), (0, 1));
    let old = joined.member_id.to_string();
    let synced = client
        .call(&sync("static", &old, 1, &[(&old, "p0-p3")]), 5)
        .await;
    assert_eq!(synced.error_code, 0);

    // The process restarts: it joins with no member id, the same instance id.
    let mut restarted = Client::connect(server.addr).await;
    let again = restarted.call(&static_join(""), 7).await;
    assert_eq!(
        (again.error_code, again.generation_id),
        (0, 1),
        "no rebalance"
    );
    let new = again.member_id.to_string();
    assert_ne!(new, old);
    let synced = restarted
        .call(
            &sync("static", &new, 1, &[]).with_group_instance_id(Some(text("pod-1"))),
            5,
        )
        .await;
    assert_eq!(synced.assignment, Bytes::from("p0-p3"));
    let fenced = client
        .call(
            &heartbeat("static", &old, 1).with_group_instance_id(Some(text("pod-1"))),
            4,
        )
        .await;
    assert_eq!(fenced.error_code, ResponseError::FencedInstanceId.code());
}

#[tokio::test]
async fn the_session_timeout_bounds_are_the_configs() {
    // Kafka's default minimum is 6 s: a 3 s session is INVALID_SESSION_TIMEOUT (26)…
    let server = start(prompt()).await;
    let mut client = Client::connect(server.addr).await;
    let short = join("bounds", "").with_session_timeout_ms(3_000);
    let answer = client.call(&short, 7).await;
    assert_eq!(answer.error_code, 26);
    // …and taken where the config lowers it, as a broker with a lower
    // group.min.session.timeout.ms takes it (a v7 join first gets its member id).
    let server = start(KafkaConfig {
        group_min_session_timeout_ms: 1_000,
        group_max_session_timeout_ms: 5_000,
        ..prompt()
    })
    .await;
    let mut client = Client::connect(server.addr).await;
    let answer = client.call(&short, 7).await;
    assert_eq!(
        answer.error_code, 79,
        "MEMBER_ID_REQUIRED, past the bounds check"
    );
    let answer = client
        .call(&join("bounds", "").with_session_timeout_ms(10_000), 7)
        .await;
    assert_eq!(answer.error_code, 26, "over the configured maximum");
}
