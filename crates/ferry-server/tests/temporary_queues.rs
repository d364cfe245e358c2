//! Temporary queues over the wire: created with `Admin.CreateTemporaryQueue` or
//! `POST /v1/temporary-queues`, received from by their owner only, deleted when a consume
//! stream their owner opened on them ends or when idle past their timeout (driven here by
//! the broker's manual clock), and refused with a status, creating nothing, on bad input or
//! without the permission.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_broker::{Broker, BrokerConfig, Checkpoint};
use ferry_proto::v1::{self, consume_request, consume_response};
use ferry_server::AuthConfig;
use ferry_storage::ManualClock;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;

mod support;

use support::{GrpcClients, Served, exchange, grant};

const T0: i64 = 1_700_000_000_000;

async fn create(
    s: &Served,
    owner: &str,
    idle_timeout_ms: Option<u64>,
) -> v1::CreateTemporaryQueueResponse {
    s.admin()
        .create_temporary_queue(v1::CreateTemporaryQueueRequest {
            owner: owner.into(),
            idle_timeout_ms,
        })
        .await
        .unwrap()
        .into_inner()
}

fn exists(s: &Served, queue: &str) -> bool {
    s.broker.list_queues().iter().any(|q| q.as_str() == queue)
}

async fn publish(s: &Served, queue: &str, text: &str) {
    s.publisher()
        .publish(v1::PublishRequest {
            batch_id: None,
            queue: queue.into(),
            messages: vec![v1::OutgoingMessage {
                payload: text.as_bytes().to_vec().into(),
                ..Default::default()
            }],
        })
        .await
        .unwrap();
}

/// Opens a consume stream on `queue` as `consumer`, granted `credit`.
async fn consume(
    s: &Served,
    queue: &str,
    consumer: &str,
    credit: u32,
) -> (
    mpsc::Sender<v1::ConsumeRequest>,
    tonic::Streaming<v1::ConsumeResponse>,
) {
    let (send, requests) = mpsc::channel(16);
    for kind in [
        consume_request::Kind::Open(v1::ConsumeOpen {
            queue: queue.into(),
            consumer: consumer.into(),
            lease_ms: None,
        }),
        consume_request::Kind::Credit(credit),
    ] {
        send.send(v1::ConsumeRequest { kind: Some(kind) })
            .await
            .unwrap();
    }
    let responses = s
        .consumer()
        .consume(ReceiverStream::new(requests))
        .await
        .unwrap()
        .into_inner();
    (send, responses)
}

/// Waits (generously: the machine may be loaded) until `queue` is gone.
async fn until_gone(s: &Served, queue: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while exists(s, queue) {
        assert!(Instant::now() < deadline, "{queue} is still there");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_temporary_queue_goes_when_its_owners_consume_stream_ends() {
    let (broker, dir) = support::fresh_broker().await;
    let s = Served::serve(broker, Some(dir), |server| server).await;
    let created = create(&s, "requester-1", None).await;
    assert!(created.name.starts_with("tmp."), "{}", created.name);
    assert_eq!(created.idle_timeout_ms, 60_000, "the default");
    let other = create(&s, "requester-2", None).await;

    let (send, mut responses) = consume(&s, &created.name, "requester-1", 1).await;
    publish(&s, &created.name, "reply").await;
    let delivery = match tokio::time::timeout(Duration::from_secs(10), responses.next())
        .await
        .expect("a delivery in time")
        .expect("the stream is open")
        .unwrap()
        .kind
    {
        Some(consume_response::Kind::Delivery(d)) => d,
        other => panic!("expected a delivery, got {other:?}"),
    };
    assert_eq!(&delivery.payload[..], b"reply");
    assert!(exists(&s, &created.name), "in use while the stream is open");

    // The client goes: its stream ends, and its temporary queues with it.
    drop(send);
    drop(responses);
    until_gone(&s, &created.name).await;
    assert!(exists(&s, &other.name), "another owner's queue stays");
    s.stop().await;
}

#[tokio::test]
async fn a_consume_stream_of_another_consumer_neither_receives_nor_deletes() {
    let (broker, dir) = support::fresh_broker().await;
    let s = Served::serve(broker, Some(dir), |server| server).await;
    let created = create(&s, "owner", None).await;
    publish(&s, &created.name, "for the owner").await;
    let (send, mut responses) = consume(&s, &created.name, "intruder", 1).await;
    // The intruder's stream is refused its receive and ends.
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match responses.next().await {
                Some(Ok(v1::ConsumeResponse {
                    kind: Some(consume_response::Kind::Delivery(d)),
                })) => panic!("the intruder got {d:?}"),
                Some(Ok(_)) => {}
                Some(Err(status)) => break Some(status),
                None => break None,
            }
        }
    })
    .await
    .expect("the intruder's stream ends");
    if let Some(status) = ended {
        assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    }
    drop(send);
    // The owner's stream then gets the message, and ending it deletes the queue: had the
    // intruder's end deleted it, this open would fail NOT_FOUND.
    let (send, mut responses) = consume(&s, &created.name, "owner", 1).await;
    let got = tokio::time::timeout(Duration::from_secs(10), responses.next())
        .await
        .expect("a delivery in time")
        .expect("open")
        .unwrap();
    assert!(
        matches!(got.kind, Some(consume_response::Kind::Delivery(_))),
        "{got:?}"
    );
    drop(send);
    drop(responses);
    until_gone(&s, &created.name).await;
    s.stop().await;
}

#[tokio::test]
async fn an_idle_temporary_queue_goes_after_its_idle_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let config = BrokerConfig {
        clock: Arc::new(clock.clone()),
        // Housekeeping runs when the test says, at the clock's time.
        background_timers: false,
        ..BrokerConfig::default()
    };
    let broker = Broker::open(dir.path(), config).await.unwrap();
    let s = Served::serve(broker, Some(dir), |server| server).await;
    let created = create(&s, "http-like", Some(5_000)).await;
    assert_eq!(created.idle_timeout_ms, 5_000);

    clock.advance(4_999);
    s.broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert!(exists(&s, &created.name), "not idle for 5 s yet");
    clock.advance(1);
    s.broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert!(!exists(&s, &created.name), "idle for 5 s: deleted");
    s.stop().await;
}

#[tokio::test]
async fn bad_temporary_queue_requests_are_refused_and_create_nothing() {
    let (broker, dir) = support::fresh_broker().await;
    let s = Served::serve(broker, Some(dir), |server| server).await;
    let too_long = "o".repeat(10_000);
    for (owner, idle_timeout_ms) in [
        ("", None),
        (too_long.as_str(), None),
        ("ok", Some(0)),
        ("ok", Some(999)),
        ("ok", Some(2 * 86_400_000)),
    ] {
        let status = s
            .admin()
            .create_temporary_queue(v1::CreateTemporaryQueueRequest {
                owner: owner.into(),
                idle_timeout_ms,
            })
            .await
            .unwrap_err();
        assert_eq!(
            status.code(),
            Code::InvalidArgument,
            "{} {idle_timeout_ms:?}: {status:?}",
            &owner[..owner.len().min(8)]
        );
    }
    assert!(s.broker.list_queues().is_empty());

    let reply = exchange(
        s.http,
        "",
        "POST",
        "/v1/temporary-queues",
        br#"{"owner": "h", "idle_timeout_ms": 10}"#,
    )
    .await;
    assert_eq!(
        reply.status,
        400,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let reply = exchange(
        s.http,
        "",
        "POST",
        "/v1/temporary-queues",
        br#"{"owner": "h", "idle": 10}"#,
    )
    .await;
    assert_eq!(reply.status, 400, "unknown fields are refused");
    assert!(s.broker.list_queues().is_empty());
    s.stop().await;
}

#[tokio::test]
async fn an_http_client_creates_a_temporary_queue_only_its_owner_receives_from() {
    let (broker, dir) = support::fresh_broker().await;
    let s = Served::serve(broker, Some(dir), |server| server).await;
    let reply = exchange(
        s.http,
        "",
        "POST",
        "/v1/temporary-queues",
        br#"{"owner": "h1", "idle_timeout_ms": 30000}"#,
    )
    .await;
    assert_eq!(
        reply.status,
        201,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let body: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    let name = body["name"].as_str().unwrap().to_owned();
    assert!(name.starts_with("tmp."), "{body}");
    assert_eq!(body["idle_timeout_ms"], 30_000);
    publish(&s, &name, "hello").await;

    let receive = |consumer: &str| format!(r#"{{"consumer": "{consumer}", "max": 1}}"#);
    let path = format!("/v1/queues/{name}/receive");
    let refused = exchange(s.http, "", "POST", &path, receive("h2").as_bytes()).await;
    assert_eq!(
        refused.status,
        409,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    let got = exchange(s.http, "", "POST", &path, receive("h1").as_bytes()).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let got: serde_json::Value = serde_json::from_slice(&got.body).unwrap();
    assert_eq!(got["deliveries"].as_array().unwrap().len(), 1, "{got}");
    s.stop().await;
}

#[tokio::test]
async fn creating_a_temporary_queue_needs_consume_on_temporary_names() {
    const CONSUMER: &str = "consumer-5a4f3e2d1c0b9a8f7e6d5c4b3a291817";
    const PUBLISHER: &str = "publisher-0a1b2c3d4e5f60718293a4b5c6d7e8f9";
    let auth = AuthConfig {
        tokens: vec![
            grant("consumer", CONSUMER, &["consume:tmp.*"]),
            grant("publisher", PUBLISHER, &["publish:#"]),
        ],
    };
    let (broker, dir) = support::fresh_broker().await;
    let s = Served::serve(broker, Some(dir), |server| server.auth(auth)).await;
    let request = |token: &str| {
        let mut r = tonic::Request::new(v1::CreateTemporaryQueueRequest {
            owner: "me".into(),
            idle_timeout_ms: None,
        });
        r.metadata_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
        r
    };
    let denied = s
        .admin()
        .create_temporary_queue(request(PUBLISHER))
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    let reply = exchange(
        s.http,
        &format!("Authorization: Bearer {PUBLISHER}\r\n"),
        "POST",
        "/v1/temporary-queues",
        br#"{"owner": "me"}"#,
    )
    .await;
    assert_eq!(reply.status, 403);
    assert!(s.broker.list_queues().is_empty());
    s.admin()
        .create_temporary_queue(request(CONSUMER))
        .await
        .unwrap();
    assert_eq!(s.broker.list_queues().len(), 1);
    s.stop().await;
}
