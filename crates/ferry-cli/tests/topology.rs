//! Topics, subscriptions (fan-out) and consumer groups (rebalancing) on the real
//! `ferry serve`, driven by the `ferry` command and the Rust client.

mod support;

use std::collections::BTreeSet;

use ferry_client::proto::{HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, PollRequest};
use ferry_client::{Client, Message};
use support::Server;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn names(value: &serde_json::Value) -> Vec<String> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_topic_fans_out_to_its_subscriptions_with_their_filters() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    server.ok(&["topic", "create", "orders", "--partitions", "3"]);
    assert_eq!(names(&server.json(&["topic", "list"])), ["orders"]);
    let topic = server.json(&["topic", "describe", "orders"]);
    assert_eq!(topic["partitions"].as_array().unwrap().len(), 3);
    server.ok(&["sub", "create", "billing", "--topic", "orders"]);
    server.ok(&[
        "sub",
        "create",
        "shipping",
        "--topic",
        "orders",
        "--filter",
        "region in (eu)",
        "--ordering",
        "key-shared",
        "--max-deliveries",
        "4",
        "--lease",
        "45s",
    ]);
    let sub = server.json(&["sub", "describe", "shipping"]);
    assert_eq!(sub["topic"], "orders");
    // The delivery options of `ferry queue create`, on the subscription's queue.
    let spec = &sub["queue"]["spec"];
    assert_eq!(spec["ordering"], "key-shared", "{sub}");
    assert_eq!(spec["max_deliveries"], 4, "{sub}");
    assert_eq!(spec["lease_ms"], 45_000, "{sub}");
    let subs = server.json(&["sub", "list", "--topic", "orders"]);
    let listed: Vec<&str> = subs
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["billing", "shipping"], "{subs}");
    assert_eq!(subs[1]["filter"], "region in (\"eu\")");
    assert!(
        server
            .json(&["sub", "list", "--topic", "other"])
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(sub["queue"]["spec"]["dead_letter"], "shipping.dlq");

    let rt = runtime();
    rt.block_on(async {
        let client = Client::connect(&server.grpc).await.unwrap();
        let messages = (0..30)
            .map(|i| {
                Message::new(format!("order {i}"))
                    .with_key(format!("customer-{}", i % 7))
                    .with_header("region", if i % 2 == 0 { "eu" } else { "us" })
            })
            .collect();
        let positions = client.publish_to_topic("orders", messages).await.unwrap();
        assert_eq!(positions.len(), 30);
    });
    // Two more from the CLI, one per region.
    let published = server.json(&[
        "publish",
        "orders",
        "--topic",
        "--header",
        "region=eu",
        "cli eu",
    ]);
    assert_eq!(published["published"], 1);
    server.ok(&[
        "publish",
        "orders",
        "--topic",
        "--header",
        "region=us",
        "cli us",
    ]);
    let topic = server.json(&["topic", "describe", "orders"]);
    let stored: u64 = topic["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["end_offset"].as_u64().unwrap())
        .sum();
    assert_eq!(stored, 32);

    let billing = server.consume("billing", "ack", "100");
    assert_eq!(billing.len(), 32, "billing takes every record");
    let shipping = server.consume("shipping", "ack", "100");
    assert_eq!(shipping.len(), 16, "shipping takes the eu records only");
    assert!(
        shipping.iter().all(|m| m["headers"]["region"] == "eu"),
        "{shipping:?}"
    );

    // A topic with subscriptions cannot go; without them it can, and nothing is left.
    let refused = server.fails(&["topic", "delete", "orders"]);
    assert_eq!(refused.lines().count(), 1, "{refused}");
    server.ok(&["sub", "delete", "billing"]);
    server.ok(&["sub", "delete", "shipping"]);
    server.ok(&["topic", "delete", "orders"]);
    assert!(names(&server.json(&["topic", "list"])).is_empty());
    // Dead letters are evidence: a subscription's dead-letter queue outlives it until
    // deleted on its own.
    assert_eq!(
        names(&server.json(&["queue", "list"])),
        ["billing.dlq", "shipping.dlq"]
    );
    server.ok(&["queue", "delete", "billing.dlq"]);
    server.ok(&["queue", "delete", "shipping.dlq"]);
    assert!(names(&server.json(&["queue", "list"])).is_empty());
    // Nothing to list says so, rather than a table with only its header.
    assert_eq!(server.ok(&["queue", "list"]).trim(), "no queues");
    assert_eq!(server.ok(&["topic", "list"]).trim(), "no topics");
    let missing = server.fails(&["topic", "describe", "orders"]);
    assert!(missing.contains("does not exist"), "{missing}");
}

#[test]
fn a_consumer_group_rebalances_as_members_join_and_leave() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    server.ok(&["topic", "create", "clicks", "--partitions", "4"]);
    let rt = runtime();
    rt.block_on(async {
        let client = Client::connect(&server.grpc).await.unwrap();
        let messages = (0..40)
            .map(|i| Message::new(format!("click {i}")).with_key(format!("user-{i}")))
            .collect();
        client.publish_to_topic("clicks", messages).await.unwrap();
        let mut groups = client.groups();
        let join = |instance: &str| JoinGroupRequest {
            topic: "clicks".into(),
            group: "analytics".into(),
            instance_id: Some(instance.into()),
            session_timeout_ms: Some(10_000),
            ..Default::default()
        };
        let first = groups.join(join("a")).await.unwrap().into_inner();
        assert_eq!(
            first.partitions,
            [0, 1, 2, 3],
            "a lone member owns everything"
        );

        let second = groups.join(join("b")).await.unwrap().into_inner();
        assert!(second.generation > first.generation);
        let heartbeat = |member: &str| HeartbeatRequest {
            topic: "clicks".into(),
            group: "analytics".into(),
            member_id: member.into(),
        };
        let first_now = groups
            .heartbeat(heartbeat(&first.member_id))
            .await
            .unwrap()
            .into_inner();
        let mine: BTreeSet<u32> = first_now.partitions.iter().copied().collect();
        let theirs: BTreeSet<u32> = second.partitions.iter().copied().collect();
        assert_eq!(mine.len(), 2, "the join split the partitions: {mine:?}");
        assert!(mine.is_disjoint(&theirs), "{mine:?} / {theirs:?}");
        assert_eq!(mine.union(&theirs).count(), 4);

        // The first member reads and commits what its partitions hold.
        let records = groups
            .poll(PollRequest {
                topic: "clicks".into(),
                group: "analytics".into(),
                member_id: first.member_id.clone(),
                max_records: 100,
            })
            .await
            .unwrap()
            .into_inner()
            .records;
        assert!(records.iter().all(|r| mine.contains(&r.partition)));
        for partition in &mine {
            let next = records
                .iter()
                .filter(|r| r.partition == *partition)
                .map(|r| r.offset + 1)
                .max()
                .unwrap_or(0);
            groups
                .commit(ferry_client::proto::CommitRequest {
                    topic: "clicks".into(),
                    group: "analytics".into(),
                    member_id: first.member_id.clone(),
                    partition: *partition,
                    offset: next,
                })
                .await
                .unwrap();
        }

        // The second member leaves: the first owns everything again.
        groups
            .leave(LeaveGroupRequest {
                topic: "clicks".into(),
                group: "analytics".into(),
                member_id: second.member_id.clone(),
            })
            .await
            .unwrap();
        let after = groups
            .heartbeat(heartbeat(&first.member_id))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(after.partitions, [0, 1, 2, 3]);
        assert!(after.generation > first_now.generation);

        // The CLI sees the same group: listed, one member, commits on its first partitions only.
        let listed = server.json(&["group", "list"]);
        assert_eq!(
            listed,
            serde_json::json!([{ "topic": "clicks", "group": "analytics" }])
        );
        assert!(
            server
                .json(&["group", "list", "--topic", "other"])
                .as_array()
                .unwrap()
                .is_empty()
        );
        let info = server.json(&["group", "describe", "clicks", "analytics"]);
        let members = info["members"].as_array().unwrap();
        assert_eq!(members.len(), 1, "{info}");
        for p in info["partitions"].as_array().unwrap() {
            let partition = p["partition"].as_u64().unwrap() as u32;
            let committed = !p["committed"].is_null();
            assert_eq!(committed, mine.contains(&partition), "{p}");
            if committed {
                assert_eq!(p["lag_records"], 0, "{p}");
            } else {
                assert_eq!(p["lag_records"], p["end_offset"], "{p}");
            }
        }

        // A group with a member cannot be deleted; once the member leaves, it can.
        let refused = server.fails(&["group", "delete", "clicks", "analytics"]);
        assert!(refused.contains("member"), "{refused}");
        groups
            .leave(LeaveGroupRequest {
                topic: "clicks".into(),
                group: "analytics".into(),
                member_id: first.member_id.clone(),
            })
            .await
            .unwrap();
        server.ok(&["group", "delete", "clicks", "analytics"]);
        assert!(
            server
                .json(&["group", "list"])
                .as_array()
                .unwrap()
                .is_empty()
        );
    });
}
