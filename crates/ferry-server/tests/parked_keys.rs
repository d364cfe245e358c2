//! Parking a poison key of a key-shared queue over gRPC and HTTP: the key's messages are
//! held while other keys flow and come back in order when it is unparked; a queue that is
//! not key-shared refuses with its reason; and only a caller that may consume the queue
//! parks its keys.

use std::time::Duration;

use ferry_broker::{OrderingMode, OutgoingMessage, QueueSpec};
use ferry_proto::v1;
use serde_json::{Value, json};
use tonic::Code;

mod support;

use support::{GrpcClients, Served as Running, exchange, grant};

const WORKER: &str = "worker-5c2a9e1f7b3d4a6c8e0f1a2b3c4d5e6f";
const ADMIN: &str = "admin-8d1e4f7a0b3c6d9e2f5a8b1c4d7e0f3a";

async fn start(configure: impl FnOnce(ferry_server::Server) -> ferry_server::Server) -> Running {
    let (broker, dir) = support::fresh_broker().await;
    let key_shared = QueueSpec {
        ordering: OrderingMode::KeyShared,
        ..QueueSpec::default()
    };
    broker.create_queue("jobs", key_shared).await.unwrap();
    broker
        .create_queue("plain", QueueSpec::default())
        .await
        .unwrap();
    Running::serve(broker, Some(dir), configure).await
}

async fn publish(s: &Running, key: &[u8], payload: &str) {
    s.broker
        .publish(
            "jobs",
            OutgoingMessage::new(payload.to_owned()).with_key(key.to_vec()),
        )
        .await
        .unwrap();
}

/// Receives what is ready, acks it, and returns the payloads in delivery order.
async fn take(s: &Running) -> Vec<String> {
    let got = s.broker.receive("jobs", "w", 10, None, None).await.unwrap();
    for m in &got {
        s.broker.ack("jobs", m.seq, m.token).await.unwrap();
    }
    got.iter()
        .map(|m| String::from_utf8(m.payload.to_vec()).unwrap())
        .collect()
}

/// Takes (and acks) until `n` messages came or ten seconds passed, then once more to see
/// that nothing else is ready: what was delivered, in order.
async fn take_n(s: &Running, n: usize) -> Vec<String> {
    let mut taken = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while taken.len() < n && tokio::time::Instant::now() < deadline {
        let got = take(s).await;
        if got.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        taken.extend(got);
    }
    taken.extend(take(s).await);
    taken
}

fn with_token<T>(token: Option<&str>, msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    if let Some(token) = token {
        r.metadata_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    r
}

fn park(queue: &str, key: &[u8]) -> v1::ParkKeyRequest {
    v1::ParkKeyRequest {
        queue: queue.into(),
        key: key.to_vec().into(),
    }
}

async fn listed(s: &Running, token: Option<&str>) -> Vec<(Vec<u8>, u64)> {
    s.admin()
        .list_parked_keys(with_token(
            token,
            v1::ListParkedKeysRequest {
                queue: "jobs".into(),
            },
        ))
        .await
        .unwrap()
        .into_inner()
        .keys
        .into_iter()
        .map(|k| (k.key.to_vec(), k.held))
        .collect()
}

async fn http(s: &Running, token: Option<&str>, method: &str, path: &str) -> (u16, Value) {
    let headers = token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    let reply = exchange(s.http, &headers, method, path, b"").await;
    let body = if reply.body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&reply.body).unwrap()
    };
    (reply.status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_parked_over_grpc_is_held_while_others_flow_then_delivered_in_order() {
    let s = start(|server| server).await;
    // A key that is not text travels as bytes.
    let poison: &[u8] = &[0xff, 0x00, b'p'];
    publish(&s, poison, "p1").await;
    publish(&s, b"other", "o1").await;

    let held = s.broker.receive("jobs", "w", 10, None, None).await.unwrap();
    assert_eq!(held.len(), 2);
    s.admin().park_key(park("jobs", poison)).await.unwrap();
    // The delivery in flight is not recalled; it fails and comes back to the parked key.
    for m in &held {
        s.broker
            .nack("jobs", m.seq, m.token, Some(Duration::ZERO), None)
            .await
            .unwrap();
    }
    publish(&s, poison, "p2").await;
    publish(&s, b"other", "o2").await;

    assert_eq!(
        take_n(&s, 2).await,
        ["o1", "o2"],
        "only the other key flows"
    );
    assert_eq!(listed(&s, None).await, [(poison.to_vec(), 2)]);
    assert_eq!(
        s.broker
            .describe_queue("jobs")
            .unwrap()
            .stats
            .state
            .parked_messages,
        2
    );

    s.admin()
        .unpark_key(v1::UnparkKeyRequest {
            queue: "jobs".into(),
            key: poison.to_vec().into(),
        })
        .await
        .unwrap();
    assert_eq!(take_n(&s, 2).await, ["p1", "p2"], "in publish order");
    assert!(listed(&s, None).await.is_empty());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parking_on_a_queue_not_key_shared_is_refused_with_the_reason_and_changes_nothing() {
    let s = start(|server| server).await;
    for refused in [
        s.admin().park_key(park("plain", b"a")).await.unwrap_err(),
        s.admin()
            .unpark_key(v1::UnparkKeyRequest {
                queue: "plain".into(),
                key: b"a".to_vec().into(),
            })
            .await
            .unwrap_err(),
    ] {
        assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
        assert!(refused.message().contains("key-shared"), "{refused:?}");
        assert_eq!(
            refused.metadata().get("ferry-error-kind").unwrap(),
            "conflict"
        );
    }
    let (status, body) = http(&s, None, "PUT", "/v1/queues/plain/parked/a").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("not_key_shared"))
    );
    assert!(s.broker.parked_keys("plain").unwrap().is_empty());

    let empty = s.admin().park_key(park("jobs", b"")).await.unwrap_err();
    assert_eq!(empty.code(), Code::InvalidArgument, "{empty:?}");
    let missing = s.admin().park_key(park("nope", b"a")).await.unwrap_err();
    assert_eq!(missing.code(), Code::NotFound, "{missing:?}");
    let too_long = s
        .admin()
        .park_key(park("jobs", &[b'k'; 5000]))
        .await
        .unwrap_err();
    assert_eq!(too_long.code(), Code::InvalidArgument, "{too_long:?}");
    assert!(s.broker.parked_keys("jobs").unwrap().is_empty());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_is_parked_listed_and_unparked_over_http_as_text_or_base64() {
    let s = start(|server| server).await;
    publish(&s, b"a b", "held").await;
    // "a b", percent-encoded in the path.
    let (status, _) = http(&s, None, "PUT", "/v1/queues/jobs/parked/a%20b").await;
    assert_eq!(status, 204);
    // 0xff 0x00 is "/wA=" in standard base64, percent-encoded as a path segment.
    let binary = "/v1/queues/jobs/parked/%2FwA%3D?encoding=base64";
    assert_eq!(http(&s, None, "PUT", binary).await.0, 204);

    let (status, body) = http(&s, None, "GET", "/v1/queues/jobs/parked").await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"keys": [{"key": "a b", "held": 1}, {"key_base64": "/wA=", "held": 0}]})
    );
    assert!(
        take(&s).await.is_empty(),
        "the parked key's message is held"
    );

    assert_eq!(
        http(&s, None, "DELETE", "/v1/queues/jobs/parked/a%20b")
            .await
            .0,
        204
    );
    assert_eq!(take_n(&s, 1).await, ["held"]);
    assert_eq!(http(&s, None, "DELETE", binary).await.0, 204);
    let (_, body) = http(&s, None, "GET", "/v1/queues/jobs/parked").await;
    assert_eq!(body, json!({"keys": []}));

    let (status, body) = http(&s, None, "PUT", "/v1/queues/jobs/parked/!?encoding=base64").await;
    assert_eq!((status, body["code"].as_str()), (400, Some("bad_base64")));
    let (status, body) = http(&s, None, "PUT", "/v1/queues/jobs/parked/a?encoding=hex").await;
    assert_eq!((status, body["code"].as_str()), (400, Some("bad_query")));
    let (status, body) = http(&s, None, "GET", "/v1/queues/nope/parked").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("queue_not_found"))
    );
    assert!(s.broker.parked_keys("jobs").unwrap().is_empty());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_caller_that_may_consume_the_queue_parks_its_keys() {
    let auth = ferry_server::AuthConfig {
        tokens: vec![
            grant("worker", WORKER, &["consume:jobs"]),
            grant("admin", ADMIN, &["admin:#"]),
        ],
    };
    let s = start(|server| server.auth(auth)).await;

    let refused = s
        .admin()
        .park_key(with_token(Some(ADMIN), park("jobs", b"k")))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    assert!(refused.message().contains("consume"), "{refused:?}");
    let (status, _) = http(&s, Some(ADMIN), "PUT", "/v1/queues/jobs/parked/k").await;
    assert_eq!(status, 403);
    let (status, _) = http(&s, Some(ADMIN), "GET", "/v1/queues/jobs/parked").await;
    assert_eq!(status, 403);
    let (status, _) = http(&s, None, "PUT", "/v1/queues/jobs/parked/k").await;
    assert_eq!(status, 401);
    assert!(
        s.broker.parked_keys("jobs").unwrap().is_empty(),
        "a refusal changes nothing"
    );

    s.admin()
        .park_key(with_token(Some(WORKER), park("jobs", b"k")))
        .await
        .unwrap();
    assert_eq!(listed(&s, Some(WORKER)).await, [(b"k".to_vec(), 0)]);
    let (status, _) = http(&s, Some(WORKER), "DELETE", "/v1/queues/jobs/parked/k").await;
    assert_eq!(status, 204);
    assert!(s.broker.parked_keys("jobs").unwrap().is_empty());
    s.stop().await;
}
