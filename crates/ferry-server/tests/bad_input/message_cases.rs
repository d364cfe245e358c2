//! The catalogue's cases on messages: publishing, receiving and settling.

use ferry_proto::v1;
use serde_json::{Value, json};
use tonic::Code;

use crate::harness::*;

/// Payloads one byte over the limit, and payload fields that are not what they claim.
pub fn payloads() -> Vec<Case> {
    vec![
        grpc(
            "payload_one_byte_over_1_mib_over_grpc",
            Code::InvalidArgument,
            "payload is 1048577 bytes, over the limit of 1048576",
            |f| publish_grpc(f, message(vec![b'x'; MIB + 1])),
        ),
        {
            use base64::Engine as _;
            let over = base64::engine::general_purpose::STANDARD.encode(vec![0u8; MIB + 1]);
            http(
                "payload_one_byte_over_1_mib_over_http",
                "POST",
                PUBLISH,
                publish_http(json!({"payload_base64": over})),
                (413, "payload_too_large", "payload is 1048577 bytes"),
            )
        },
        http(
            "payload_base64_that_is_not_base64",
            "POST",
            PUBLISH,
            publish_http(json!({"payload_base64": "bm90IGJhc2U2NA=?"})),
            (
                400,
                "bad_base64",
                "messages[1].payload_base64 is not standard base64",
            ),
        ),
        http(
            "payload_as_text_and_base64",
            "POST",
            PUBLISH,
            publish_http(json!({"payload": "a", "payload_base64": "YQ=="})),
            (
                400,
                "conflicting_fields",
                "set payload or payload_base64, not both",
            ),
        ),
        http(
            "payload_with_a_lone_surrogate_escape",
            "POST",
            PUBLISH,
            br#"{"messages": [{"payload": "\ud800"}]}"#.to_vec(),
            (400, "malformed_json", "unexpected end of hex escape"),
        ),
        http(
            "payload_with_a_lone_surrogate_before_a_letter",
            "POST",
            PUBLISH,
            br#"{"messages": [{"payload": "\ud800\u0041"}]}"#.to_vec(),
            (
                400,
                "malformed_json",
                "lone leading surrogate in hex escape",
            ),
        ),
        http(
            "payload_with_raw_bytes_that_are_not_utf8",
            "POST",
            PUBLISH,
            b"{\"messages\": [{\"payload\": \"\xff\xfe\"}]}".to_vec(),
            (400, "malformed_json", "invalid unicode code point"),
        ),
        http(
            "queue_name_with_raw_bytes_that_are_not_utf8",
            "POST",
            "/v1/queues",
            b"{\"name\": \"ord\xc3\x28ers\"}".to_vec(),
            (400, "malformed_json", "invalid unicode code point"),
        ),
        http(
            "message_without_a_payload",
            "POST",
            PUBLISH,
            publish_http(json!({"key": "k"})),
            (400, "missing_field", "messages[1] has no payload"),
        ),
    ]
}

/// Headers, keys and ids past their limits or with characters that cannot travel.
pub fn headers() -> Vec<Case> {
    let headers = |n: usize| -> Value {
        (0..n)
            .map(|i| (format!("h{i}"), json!("v")))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    vec![
        grpc(
            "65_headers_one_over_the_limit",
            Code::InvalidArgument,
            "message has 65 headers, over the limit of 64",
            |f| {
                let mut m = message("x");
                m.headers = (0..65).map(|i| (format!("h{i}"), "v".to_owned())).collect();
                publish_grpc(f, m)
            },
        ),
        http(
            "header_name_of_257_bytes",
            "POST",
            PUBLISH,
            publish_http(json!({"payload": "x", "headers": {"n".repeat(257): "v"}})),
            (
                400,
                "header_name_too_long",
                "is 257 bytes, over the limit of 256",
            ),
        ),
        grpc(
            "header_value_of_8_kib_and_one_byte",
            Code::InvalidArgument,
            "is 8193 bytes, over the limit of 8192",
            |f| {
                let mut m = message("x");
                m.headers = [("big".to_owned(), "v".repeat(8193))].into();
                publish_grpc(f, m)
            },
        ),
        http(
            "empty_header_name",
            "POST",
            PUBLISH,
            publish_http(json!({"payload": "x", "headers": {"": "v"}})),
            (400, "empty_header_name", "a header name is empty"),
        ),
        grpc(
            "header_name_with_cr_lf",
            Code::InvalidArgument,
            "has a control character at position 1",
            |f| {
                let mut m = message("x");
                m.headers = [("a\r\nb".to_owned(), "v".to_owned())].into();
                publish_grpc(f, m)
            },
        ),
        http(
            "header_name_with_a_nul",
            "POST",
            PUBLISH,
            publish_http(json!({"payload": "x", "headers": {"tr\u{0}ce": "v"}})),
            (400, "header_name_has_control_character", "at position 2"),
        ),
        http(
            "header_in_the_reserved_namespace",
            "POST",
            PUBLISH,
            publish_http(json!({"payload": "x", "headers": {"Ferry-Delivery": "9"}})),
            (400, "reserved_header_name", "reserves for its own metadata"),
        ),
        http(
            "headers_as_a_list_instead_of_a_map",
            "POST",
            PUBLISH,
            publish_http(json!({"payload": "x", "headers": [["a", "b"]]})),
            (400, "malformed_json", "expected a map"),
        ),
        http(
            "headers_of_65_entries_over_http",
            "POST",
            PUBLISH,
            publish_http(json!({"payload": "x", "headers": headers(65)})),
            (400, "too_many_headers", "65 headers"),
        ),
        grpc(
            "key_of_4_kib_and_one_byte",
            Code::InvalidArgument,
            "the key is 4097 bytes, over the limit of 4096",
            |f| {
                let mut m = message("x");
                m.key = Some(vec![b'k'; 4097].into());
                publish_grpc(f, m)
            },
        ),
        http(
            "empty_dedup_id",
            "POST",
            PUBLISH,
            publish_http(json!({"payload": "x", "dedup_id": ""})),
            (400, "empty_dedup_id", "the dedup id is empty"),
        ),
        http(
            "message_id_that_is_not_a_ulid",
            "POST",
            PUBLISH,
            publish_http(json!({"payload": "x", "id": "order-42"})),
            (400, "invalid_message_id", "is not a ULID"),
        ),
    ]
}

/// Delays, TTLs and priorities that are negative, too far or contradictory.
pub fn times() -> Vec<Case> {
    let day_ms: u64 = 24 * 3600 * 1000;
    vec![
        http(
            "negative_delay",
            "POST",
            PUBLISH,
            publish_http(json!({"payload": "x", "delay_ms": -1})),
            (400, "malformed_json", "invalid value: integer `-1`"),
        ),
        grpc(
            "delay_of_91_days",
            Code::InvalidArgument,
            "is 91 days away, beyond the longest delay of 90 days",
            move |f| {
                let mut m = message("x");
                m.delivery = Some(v1::outgoing_message::Delivery::DeliverAfterMs(91 * day_ms));
                publish_grpc(f, m)
            },
        ),
        http(
            "delay_of_u64_max_ms",
            "POST",
            PUBLISH,
            publish_http(json!({"payload": "x", "delay_ms": u64::MAX})),
            (400, "delay_too_long", "beyond the longest delay of 90 days"),
        ),
        http(
            "deliver_at_the_end_of_time",
            "POST",
            PUBLISH,
            publish_http(json!({"payload": "x", "deliver_at_ms": i64::MAX})),
            (400, "delay_too_long", "beyond the longest delay of 90 days"),
        ),
        http(
            "ttl_of_zero",
            "POST",
            PUBLISH,
            publish_http(json!({"payload": "x", "ttl_ms": 0})),
            (400, "ttl_too_short", "rounds down to 0 ms"),
        ),
        grpc(
            "ttl_of_91_days",
            Code::InvalidArgument,
            "longer than the limit of 90 days",
            move |f| {
                let mut m = message("x");
                m.ttl_ms = Some(91 * day_ms);
                publish_grpc(f, m)
            },
        ),
        http(
            "ttl_ending_before_the_delay",
            "POST",
            PUBLISH,
            publish_http(json!({"payload": "x", "delay_ms": 60_000, "ttl_ms": 1000})),
            (400, "expires_before_delivery", "would expire"),
        ),
        http(
            "priority_of_256",
            "POST",
            PUBLISH,
            publish_http(json!({"payload": "x", "priority": 256})),
            (400, "out_of_range", "priority: 256 is out of range"),
        ),
        grpc(
            "priority_above_the_queues_levels",
            Code::InvalidArgument,
            "priority 200 is above the top level of queue orders, which has 1 priority level(s)",
            |f| {
                let mut m = message("x");
                m.priority = 200;
                publish_grpc(f, m)
            },
        ),
        http(
            "priority_above_the_queues_levels_over_http",
            "POST",
            PUBLISH,
            publish_http(json!({"payload": "x", "priority": 1})),
            (
                400,
                "priority_above_levels",
                "priority 1 is above the top level of queue orders",
            ),
        ),
        http(
            "priority_as_a_string",
            "POST",
            PUBLISH,
            publish_http(json!({"payload": "x", "priority": "high"})),
            (400, "malformed_json", "invalid type: string \"high\""),
        ),
    ]
}

/// Receives with no consumer, or counts and leases out of range.
pub fn receive() -> Vec<Case> {
    let ten_kb = "a".repeat(10 * 1024);
    vec![
        post(
            "receive_without_a_consumer",
            "/v1/queues/orders/receive",
            json!({"consumer": ""}),
            (400, "missing_field", "consumer: name the consumer"),
        ),
        grpc(
            "receive_without_a_consumer_over_grpc",
            Code::InvalidArgument,
            "consumer",
            |f| async move {
                f.consumer()
                    .receive(v1::ReceiveRequest {
                        queue: "orders".into(),
                        consumer: String::new(),
                        max: 1,
                        lease_ms: None,
                        wait_ms: None,
                    })
                    .await
                    .map(drop)
            },
        ),
        post(
            "receive_with_a_consumer_name_of_10_kb",
            "/v1/queues/orders/receive",
            json!({"consumer": ten_kb}),
            (400, "consumer_name_too_long", "is 10240 bytes"),
        ),
        post(
            "receive_with_a_negative_max",
            "/v1/queues/orders/receive",
            json!({"consumer": "c", "max": -1}),
            (400, "malformed_json", "invalid value: integer `-1`"),
        ),
        post(
            "receive_with_max_of_zero",
            "/v1/queues/orders/receive",
            json!({"consumer": "c", "max": 0}),
            (
                400,
                "out_of_range",
                "max: 0 (a receive returns 1 to 1000 deliveries",
            ),
        ),
        grpc(
            "receive_with_an_absurd_max",
            Code::InvalidArgument,
            "max: 4294967295 (a receive returns 1 to 1000 deliveries",
            |f| async move {
                f.consumer()
                    .receive(v1::ReceiveRequest {
                        queue: "orders".into(),
                        consumer: "c".into(),
                        max: u32::MAX,
                        lease_ms: None,
                        wait_ms: None,
                    })
                    .await
                    .map(drop)
            },
        ),
        grpc(
            "receive_with_a_lease_of_zero",
            Code::InvalidArgument,
            "lease must be between 1 ms and 12 hours",
            |f| async move {
                f.consumer()
                    .receive(v1::ReceiveRequest {
                        queue: "orders".into(),
                        consumer: "c".into(),
                        max: 1,
                        lease_ms: Some(0),
                        wait_ms: None,
                    })
                    .await
                    .map(drop)
            },
        ),
        post(
            "receive_with_a_lease_of_13_hours",
            "/v1/queues/orders/receive",
            json!({"consumer": "c", "lease_ms": 13 * 3600 * 1000}),
            (
                400,
                "invalid_setting",
                "lease must be between 1 ms and 12 hours",
            ),
        ),
        post(
            "receive_with_wait_as_a_string",
            "/v1/queues/orders/receive",
            json!({"consumer": "c", "wait_ms": "forever"}),
            (400, "malformed_json", "invalid type: string \"forever\""),
        ),
        post(
            "receive_from_a_missing_queue",
            "/v1/queues/nope/receive",
            json!({"consumer": "c"}),
            (404, "queue_not_found", "queue \"nope\" does not exist"),
        ),
    ]
}

/// Acks, nacks, rejects and extends with tokens that do not hold the lease, or bad numbers.
pub fn settling(f: &Fixture) -> Vec<Case> {
    let (held, token, settled, used) = (f.held_seq, f.held_token, f.settled_seq, f.settled_token);
    let settle = |seq: u64, outcome: &str| format!("/v1/queues/orders/messages/{seq}/{outcome}");
    vec![
        post(
            "ack_with_a_forged_token",
            settle(held, "ack"),
            json!({"token": token ^ 0xdead_beef}),
            (412, "stale_lease", "is not the current lease"),
        ),
        grpc(
            "nack_with_an_already_used_token",
            Code::FailedPrecondition,
            "is not the current lease",
            move |f| async move {
                f.consumer()
                    .nack(v1::NackRequest {
                        queue: "orders".into(),
                        seq: settled,
                        token: used,
                        delay_ms: None,
                        error: None,
                    })
                    .await
                    .map(drop)
            },
        ),
        post(
            "reject_with_the_token_of_another_message",
            settle(held + 1, "reject"),
            json!({"token": token, "reason": "nope"}),
            (412, "stale_lease", "is not the current lease"),
        ),
        post(
            "ack_of_a_seq_that_was_never_published",
            settle(1_000_000, "ack"),
            json!({"token": token}),
            (
                404,
                "message_not_published",
                "queue orders has no message 1000000",
            ),
        ),
        post(
            "ack_with_a_token_as_a_string",
            settle(held, "ack"),
            json!({"token": token.to_string()}),
            (400, "malformed_json", "invalid type: string"),
        ),
        post(
            "ack_with_a_negative_seq_in_the_path",
            "/v1/queues/orders/messages/-1/ack",
            json!({"token": token}),
            (400, "bad_path", "is not a delivery's seq"),
        ),
        post(
            "nack_with_a_delay_of_u64_max_ms",
            settle(held, "nack"),
            json!({"token": token, "delay_ms": u64::MAX}),
            (400, "delay_too_long", "beyond the longest delay of 90 days"),
        ),
        grpc(
            "extend_by_13_hours",
            Code::InvalidArgument,
            "lease extension must be between",
            move |f| async move {
                f.consumer()
                    .extend(v1::ExtendRequest {
                        queue: "orders".into(),
                        seq: held,
                        token,
                        by_ms: 13 * 3600 * 1000,
                    })
                    .await
                    .map(drop)
            },
        ),
        post(
            "extend_by_u64_max_ms",
            settle(held, "extend"),
            json!({"token": token, "by_ms": u64::MAX}),
            (400, "invalid_setting", "lease extension must be between"),
        ),
    ]
}
