//! The catalogue's cases on names, specs, request bodies, dead letters, filters, topics
//! and consumer groups.

use ferry_proto::v1;
use serde_json::json;
use tonic::Code;

use crate::harness::*;

/// Names: ASCII only, byte for byte, so look-alikes are refused or not found.
pub fn names() -> Vec<Case> {
    let ten_kb = "a".repeat(10 * 1024);
    vec![
        post(
            "queue_name_with_a_slash",
            "/v1/queues",
            json!({"name": "orders/eu"}),
            (400, "invalid_name_character", "a slash '/' at position 6"),
        ),
        grpc(
            "queue_name_with_a_nul_byte",
            Code::InvalidArgument,
            "a NUL byte (U+0000) at position 3",
            |f| create_queue_grpc(f, "ord\0ers".into(), Default::default()),
        ),
        post(
            "queue_name_of_10_kb",
            "/v1/queues",
            json!({"name": ten_kb}),
            (400, "name_too_long", "is 10240 bytes long"),
        ),
        grpc(
            "topic_name_of_10_kb",
            Code::InvalidArgument,
            "is 10240 bytes long",
            move |f| {
                let name = "t".repeat(10 * 1024);
                async move {
                    f.admin()
                        .create_topic(v1::CreateTopicRequest { name, spec: None })
                        .await
                        .map(drop)
                }
            },
        ),
        post(
            "queue_name_with_a_cyrillic_o_is_refused",
            "/v1/queues",
            json!({"name": "\u{043e}rders"}),
            (400, "invalid_name_character", "(U+043E) at position 0"),
        ),
        post(
            "cyrillic_look_alike_does_not_alias_an_existing_queue",
            // `оrders` with a Cyrillic `о`, percent-encoded in the path.
            "/v1/queues/%D0%BErders/messages",
            json!({"messages": [{"payload": "x"}]}),
            (400, "invalid_name_character", "(U+043E) at position 0"),
        ),
        post(
            "receive_from_a_queue_name_with_a_space",
            "/v1/queues/%20orders/receive",
            json!({"consumer": "c"}),
            (
                400,
                "invalid_name_character",
                "whitespace (U+0020) at position 0",
            ),
        ),
        post(
            "publish_to_an_empty_queue_name_over_http",
            "/v1/queues//messages",
            json!({"messages": [{"payload": "x"}]}),
            (400, "empty_name", "a name must not be empty"),
        ),
        grpc(
            "publish_to_an_empty_queue_name",
            Code::InvalidArgument,
            "a name must not be empty",
            |f| async move {
                f.publisher()
                    .publish(v1::PublishRequest {
                        batch_id: None,
                        queue: String::new(),
                        messages: vec![message("x")],
                    })
                    .await
                    .map(drop)
            },
        ),
        grpc(
            "receive_from_an_empty_queue_name",
            Code::InvalidArgument,
            "a name must not be empty",
            |f| async move {
                f.consumer()
                    .receive(v1::ReceiveRequest {
                        queue: String::new(),
                        consumer: "c".into(),
                        max: 1,
                        lease_ms: None,
                        wait_ms: None,
                    })
                    .await
                    .map(drop)
            },
        ),
        grpc(
            "publish_to_an_empty_topic_name",
            Code::InvalidArgument,
            "a name must not be empty",
            |f| async move {
                f.publisher()
                    .publish_to_topic(v1::PublishToTopicRequest {
                        topic: String::new(),
                        messages: vec![message("x")],
                        ..Default::default()
                    })
                    .await
                    .map(drop)
            },
        ),
        grpc(
            "decomposed_accent_is_not_normalised_into_a_name",
            Code::InvalidArgument,
            "(U+0301)",
            |f| create_queue_grpc(f, "cafe\u{301}".into(), Default::default()),
        ),
        grpc(
            "empty_queue_name",
            Code::InvalidArgument,
            "a name must not be empty",
            |f| create_queue_grpc(f, String::new(), Default::default()),
        ),
        post(
            "queue_name_with_a_leading_space",
            "/v1/queues",
            json!({"name": " orders"}),
            (
                400,
                "invalid_name_character",
                "whitespace (U+0020) at position 0",
            ),
        ),
        post(
            "queue_name_with_a_trailing_space",
            "/v1/queues",
            json!({"name": "orders "}),
            (
                400,
                "invalid_name_character",
                "whitespace (U+0020) at position 6",
            ),
        ),
        post(
            "queue_name_with_a_leading_dot",
            "/v1/queues",
            json!({"name": ".orders"}),
            (400, "name_starts_with_dot_or_dash", "starts with '.'"),
        ),
        post(
            "queue_name_with_a_trailing_dot",
            "/v1/queues",
            json!({"name": "orders."}),
            (400, "name_ends_with_dot", "ends with '.'"),
        ),
        post(
            "subscription_name_with_a_double_dot",
            "/v1/subscriptions",
            json!({"name": "events..sub", "spec": {"topic": "events"}}),
            (400, "name_has_double_dot", "\"..\" at position 6"),
        ),
        post(
            "existing_queue_name_again",
            "/v1/queues",
            json!({"name": "orders"}),
            (409, "queue_exists", "queue orders already exists"),
        ),
    ]
}

/// Queue specs out of range, dead-letter topologies that cannot work, unknown words.
pub fn queue_specs() -> Vec<Case> {
    vec![
        grpc(
            "max_deliveries_of_zero",
            Code::InvalidArgument,
            "max_deliveries",
            |f| {
                let spec = v1::QueueSpec {
                    retry: retry(0),
                    ..Default::default()
                };
                create_queue_grpc(f, "zero-tries".into(), spec)
            },
        ),
        post(
            "lease_of_zero_in_a_spec",
            "/v1/queues",
            json!({"name": "fleeting", "spec": {"lease_ms": 0}}),
            (
                400,
                "invalid_queue_spec",
                "lease must be between 1 ms and 12 hours",
            ),
        ),
        post(
            "priority_levels_beyond_a_byte",
            "/v1/queues",
            json!({"name": "ranked", "spec": {"priority_levels": 300}}),
            (400, "out_of_range", "priority_levels: 300 is out of range"),
        ),
        grpc(
            "priority_levels_of_11",
            Code::InvalidArgument,
            "priority_levels must be between 1 and 10 (got 11)",
            |f| {
                let spec = v1::QueueSpec {
                    priority_levels: Some(11),
                    ..Default::default()
                };
                create_queue_grpc(f, "ranked".into(), spec)
            },
        ),
        grpc(
            "lower_priority_share_of_nan",
            Code::InvalidArgument,
            "lower_priority_share must be a fraction between 0.0 and 0.5",
            |f| {
                let spec = v1::QueueSpec {
                    lower_priority_share: Some(f64::NAN),
                    ..Default::default()
                };
                create_queue_grpc(f, "ranked".into(), spec)
            },
        ),
        post(
            "length_limit_of_zero_messages",
            "/v1/queues",
            json!({"name": "tiny", "spec": {"length_limit": {"max_messages": 0}}}),
            (
                400,
                "invalid_queue_spec",
                "length_limit.max_messages must be positive",
            ),
        ),
        post(
            "dead_letter_queue_is_the_queue_itself",
            "/v1/queues",
            json!({"name": "selfish", "spec": {"dead_letter": {"queue": "selfish"}}}),
            (400, "dead_letter_cycle", "selfish -> selfish"),
        ),
        post(
            "dead_letter_queue_that_does_not_exist",
            "/v1/queues",
            json!({"name": "lonely", "spec": {"dead_letter": {"queue": "nowhere"}}}),
            (400, "dead_letter_target_missing", "dead-letters to nowhere"),
        ),
        post(
            "spec_with_an_unknown_field",
            "/v1/queues",
            json!({"name": "typo", "spec": {"lease": 5000}}),
            (400, "malformed_json", "unknown field `lease`"),
        ),
        post(
            "spec_with_an_unknown_enum_word",
            "/v1/queues",
            json!({"name": "typo", "spec": {"ordering": "random"}}),
            (400, "malformed_json", "unknown variant `random`"),
        ),
        grpc(
            "spec_with_an_unknown_enum_number",
            Code::InvalidArgument,
            "ordering: unknown value 99",
            |f| {
                let spec = v1::QueueSpec {
                    ordering: 99,
                    ..Default::default()
                };
                create_queue_grpc(f, "typo".into(), spec)
            },
        ),
    ]
}

/// Request bodies that are not the JSON an endpoint takes.
pub fn malformed_json() -> Vec<Case> {
    vec![
        http(
            "truncated_json",
            "POST",
            "/v1/queues",
            b"{\"name\": \"q".to_vec(),
            (400, "malformed_json", "EOF while parsing"),
        ),
        post(
            "name_as_a_number",
            "/v1/queues",
            json!({"name": 42}),
            (
                400,
                "malformed_json",
                "invalid type: integer `42`, expected a string",
            ),
        ),
        post(
            "body_as_an_array",
            "/v1/queues",
            json!([{"name": "q"}]),
            (
                400,
                "malformed_json",
                "invalid type: map, expected a string",
            ),
        ),
        http(
            "duplicate_field",
            "POST",
            "/v1/queues",
            br#"{"name": "a", "name": "b"}"#.to_vec(),
            (400, "malformed_json", "duplicate field `name`"),
        ),
        post(
            "publish_with_an_unknown_top_level_field",
            PUBLISH,
            json!({"messages": [{"payload": "x"}], "queue": "orders"}),
            (400, "malformed_json", "unknown field `queue`"),
        ),
    ]
}

/// Redrives that cannot be done, and a dead-letter queue still in use.
pub fn dead_letters() -> Vec<Case> {
    vec![
        post(
            "redrive_of_a_queue_that_is_not_a_dead_letter_queue",
            "/v1/queues/orders/redrive",
            json!({}),
            (409, "not_a_dead_letter_queue", "is not a dead-letter queue"),
        ),
        grpc(
            "redrive_to_a_missing_target",
            Code::NotFound,
            "queue \"nowhere\" does not exist",
            |f| async move {
                f.dead_letters()
                    .redrive(v1::RedriveRequest {
                        dlq: "orders.dlq".into(),
                        target: Some("nowhere".into()),
                        ..Default::default()
                    })
                    .await
                    .map(drop)
            },
        ),
        post(
            "redrive_with_an_unknown_reason",
            "/v1/queues/orders.dlq/redrive",
            json!({"filter": {"reason": "bored"}}),
            (400, "out_of_range", "filter.reason"),
        ),
        http(
            "delete_a_dead_letter_queue_in_use",
            "DELETE",
            "/v1/queues/orders.dlq",
            Vec::new(),
            (
                409,
                "queue_is_dead_letter_target",
                "is the dead-letter queue of orders",
            ),
        ),
    ]
}

/// Subscription filters that do not parse.
pub fn filters() -> Vec<Case> {
    vec![
        post(
            "filter_with_a_dangling_operator",
            "/v1/subscriptions",
            json!({"name": "eu", "spec": {"topic": "events", "filter": "subject ~"}}),
            (400, "invalid_filter", "filter \"subject ~\""),
        ),
        grpc(
            "filter_with_an_unclosed_list",
            Code::InvalidArgument,
            "filter \"region in (eu, us\"",
            |f| async move {
                f.admin()
                    .create_subscription(v1::CreateSubscriptionRequest {
                        name: "eu".into(),
                        spec: Some(v1::SubscriptionSpec {
                            topic: "events".into(),
                            filter: "region in (eu, us".into(),
                            ..Default::default()
                        }),
                    })
                    .await
                    .map(drop)
            },
        ),
    ]
}

/// Missing topics and partitions, partition counts and consumer groups out of range.
pub fn topics_and_groups() -> Vec<Case> {
    vec![
        post(
            "publish_to_a_missing_topic",
            "/v1/topics/nope/messages",
            json!({"messages": [{"payload": "x"}]}),
            (404, "topic_not_found", "topic \"nope\" does not exist"),
        ),
        grpc(
            "publish_to_a_partition_the_topic_does_not_have",
            Code::NotFound,
            "topic events has no partition 7; its partitions are 0 to 1",
            |f| async move {
                f.publisher()
                    .publish_to_topic(v1::PublishToTopicRequest {
                        topic: "events".into(),
                        messages: vec![message("x")],
                        partition: Some(7),
                        ..Default::default()
                    })
                    .await
                    .map(drop)
            },
        ),
        post(
            "topic_with_zero_partitions",
            "/v1/topics",
            json!({"name": "empty", "spec": {"partitions": 0}}),
            (400, "invalid_setting", "partitions"),
        ),
        grpc(
            "topic_with_a_million_partitions",
            Code::InvalidArgument,
            "partitions",
            |f| async move {
                f.admin()
                    .create_topic(v1::CreateTopicRequest {
                        name: "wide".into(),
                        spec: Some(v1::TopicSpec {
                            partitions: 1_000_000,
                            ..Default::default()
                        }),
                    })
                    .await
                    .map(drop)
            },
        ),
        grpc(
            "partitions_shrunk",
            Code::FailedPrecondition,
            "partitions can only be added",
            |f| async move {
                f.admin()
                    .add_partitions(v1::AddPartitionsRequest {
                        name: "events".into(),
                        partitions: 1,
                    })
                    .await
                    .map(drop)
            },
        ),
        grpc(
            "group_name_with_a_space",
            Code::InvalidArgument,
            "whitespace (U+0020) at position 7",
            |f| async move {
                f.groups()
                    .join(v1::JoinGroupRequest {
                        topic: "events".into(),
                        group: "billing team".into(),
                        ..Default::default()
                    })
                    .await
                    .map(drop)
            },
        ),
        grpc(
            "group_name_of_201_bytes",
            Code::InvalidArgument,
            "is 201 bytes long",
            |f| async move {
                f.groups()
                    .join(v1::JoinGroupRequest {
                        topic: "events".into(),
                        group: "g".repeat(201),
                        ..Default::default()
                    })
                    .await
                    .map(drop)
            },
        ),
        grpc(
            "group_session_timeout_of_zero",
            Code::InvalidArgument,
            "session_timeout must be between 100 ms and 1 hour",
            |f| async move {
                f.groups()
                    .join(v1::JoinGroupRequest {
                        topic: "events".into(),
                        group: "billing".into(),
                        session_timeout_ms: Some(0),
                        ..Default::default()
                    })
                    .await
                    .map(drop)
            },
        ),
        grpc(
            "group_join_on_a_missing_topic",
            Code::NotFound,
            "topic \"nope\" does not exist",
            |f| async move {
                f.groups()
                    .join(v1::JoinGroupRequest {
                        topic: "nope".into(),
                        group: "billing".into(),
                        ..Default::default()
                    })
                    .await
                    .map(drop)
            },
        ),
        grpc(
            "commit_by_a_member_of_a_group_that_does_not_exist",
            Code::NotFound,
            "has no members yet",
            |f| async move {
                f.groups()
                    .commit(v1::CommitRequest {
                        topic: "events".into(),
                        group: "billing".into(),
                        member_id: "m-forged".into(),
                        partition: 0,
                        offset: 1,
                    })
                    .await
                    .map(drop)
            },
        ),
    ]
}
