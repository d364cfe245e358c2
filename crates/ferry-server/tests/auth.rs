//! Tokens, permissions and limits over real sockets, gRPC and HTTP side by side: no token
//! or an unknown one is 401 / UNAUTHENTICATED, a known token without the permission is
//! 403 / PERMISSION_DENIED, and a refused call changes nothing. Batches over the limit and
//! spent quotas are refused whole; the token never comes back in a reply.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ferry_broker::{Broker, BrokerConfig, QueueSpec};
use ferry_proto::v1::{
    self, dead_letters_client::DeadLettersClient, groups_client::GroupsClient,
    publisher_client::PublisherClient,
};
use ferry_server::AuthConfig;
use ferry_storage::ManualClock;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic::Code;
use tonic::transport::Channel;

const ROOT: &str = "root-7f3c9a1e5b2d4c6f8a0b1c2d3e4f5a6b";
const ORDERS: &str = "orders-4b1d8e2f6a9c3e5d7b0a2c4e6f8a1b3c";
const METERED: &str = "metered-9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b";
const WRONG: &str = "wrong-0a1b2c3d4e5f60718293a4b5c6d7e8f9";
const ALL_TOKENS: [&str; 4] = [ROOT, ORDERS, METERED, WRONG];

fn config() -> AuthConfig {
    AuthConfig {
        tokens: vec![
            grant("root", ROOT, &["admin:#", "publish:#", "consume:#"]),
            grant(
                "orders",
                ORDERS,
                &["publish:orders.*", "consume:orders.#", "admin:orders.#"],
            ),
            grant("metered", METERED, &["publish:metered"]).publish_rate(5),
        ],
    }
}

mod support;

use support::{GrpcClients, Served as Running, grant};

impl Running {
    async fn start() -> Running {
        Running::start_with(|s| s.auth(config())).await
    }

    async fn start_with(
        configure: impl FnOnce(ferry_server::Server) -> ferry_server::Server,
    ) -> Running {
        let (broker, dir) = support::fresh_broker().await;
        for queue in ["orders.eu", "billing", "metered"] {
            broker
                .create_queue(queue, QueueSpec::default())
                .await
                .unwrap();
        }
        Running::serve(broker, Some(dir), configure).await
    }

    fn ready(&self, queue: &str) -> u64 {
        self.broker.describe_queue(queue).unwrap().stats.state.ready as u64
    }

    async fn http(&self, token: Option<&str>, method: &str, path: &str, body: Value) -> Reply {
        request(self.http, token, method, path, body.to_string().as_bytes()).await
    }
}

/// `msg` with `authorization: Bearer <token>` (none when `token` is `None`).
fn req<T>(token: Option<&str>, msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    if let Some(token) = token {
        r.metadata_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    r
}

fn messages(n: usize) -> Vec<v1::OutgoingMessage> {
    (0..n)
        .map(|i| v1::OutgoingMessage {
            payload: format!("m{i}").into_bytes().into(),
            ..Default::default()
        })
        .collect()
}

fn publish_request(queue: &str, n: usize) -> v1::PublishRequest {
    v1::PublishRequest {
        batch_id: None,
        queue: queue.into(),
        messages: messages(n),
    }
}

/// The status a gRPC call failed with, checked to carry no token.
fn refused<T: std::fmt::Debug>(result: Result<tonic::Response<T>, tonic::Status>) -> tonic::Status {
    let status = result.expect_err("the call is refused");
    for token in ALL_TOKENS {
        assert!(
            !status.message().contains(token) && !format!("{status:?}").contains(token),
            "a status carries a token: {status:?}"
        );
    }
    status
}

struct Reply {
    status: u16,
    raw: String,
}

impl Reply {
    fn json(&self) -> Value {
        let body = self.raw.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.raw))
    }
}

/// One HTTP/1.1 exchange on a connection of its own, checked to carry no token back.
async fn request(
    addr: SocketAddr,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: &[u8],
) -> Reply {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let reply = support::exchange(addr, &auth, method, path, body).await;
    let raw = format!(
        "{}\r\n\r\n{}",
        reply.head,
        String::from_utf8_lossy(&reply.body)
    );
    assert!(raw.len() >= 12, "no HTTP reply: {raw:?}");
    for t in ALL_TOKENS {
        assert!(!raw.contains(t), "a reply carries a token: {raw}");
    }
    Reply {
        status: raw[9..12].parse().unwrap(),
        raw,
    }
}

fn expect(reply: &Reply, status: u16, code: &str) {
    assert_eq!(reply.status, status, "{}", reply.raw);
    assert_eq!(reply.json()["code"], code, "{}", reply.raw);
}

#[tokio::test]
async fn missing_or_unknown_tokens_are_unauthenticated_and_change_nothing() {
    let s = Running::start().await;
    for token in [None, Some(WRONG), Some("")] {
        let status = refused(
            s.publisher()
                .publish(req(token, publish_request("orders.eu", 1)))
                .await,
        );
        assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
        let status = refused(
            s.admin()
                .list_queues(req(token, v1::ListQueuesRequest {}))
                .await,
        );
        assert_eq!(status.code(), Code::Unauthenticated);

        let r = s
            .http(
                token,
                "POST",
                "/v1/queues/orders.eu/messages",
                json!({"messages": [{"payload": "x"}]}),
            )
            .await;
        expect(&r, 401, "unauthenticated");
        assert!(
            r.raw
                .to_ascii_lowercase()
                .contains("www-authenticate: bearer"),
            "{}",
            r.raw
        );
        let r = s.http(token, "GET", "/v1/queues", json!({})).await;
        expect(&r, 401, "unauthenticated");
    }
    // Not `Bearer`: the header's scheme is part of the contract.
    let mut raw = tonic::Request::new(publish_request("orders.eu", 1));
    raw.metadata_mut()
        .insert("authorization", ROOT.parse().unwrap());
    let status = refused(s.publisher().publish(raw).await);
    assert_eq!(status.code(), Code::Unauthenticated);
    assert_eq!(s.ready("orders.eu"), 0, "nothing was published");
    s.stop().await;
}

/// `/metrics` and its `metrics` permission: `tests/metrics.rs`.
/// No token and a wrong token are different fixes (set the client up to send one, or
/// send the right one), so the two answers say which it is, on both protocols.
#[tokio::test]
async fn a_missing_token_and_an_unknown_one_are_told_apart() {
    let s = Running::start().await;
    let no_token = "no token: send `authorization: Bearer <token>`";
    let unknown = "the token is not one this server knows";
    for (token, says, not) in [
        (None, no_token, unknown),
        (Some(""), no_token, unknown),
        (Some(WRONG), unknown, no_token),
    ] {
        let status = refused(
            s.admin()
                .list_queues(req(token, v1::ListQueuesRequest {}))
                .await,
        );
        assert_eq!(status.code(), Code::Unauthenticated);
        assert!(status.message().contains(says), "{token:?}: {status:?}");
        assert!(!status.message().contains(not), "{token:?}: {status:?}");

        let r = s.http(token, "GET", "/v1/queues", json!({})).await;
        expect(&r, 401, "unauthenticated");
        let message = r.json()["error"].as_str().unwrap_or_default().to_owned();
        assert!(message.contains(says), "{token:?}: {}", r.raw);
        assert!(!message.contains(not), "{token:?}: {}", r.raw);
    }
    s.stop().await;
}

#[tokio::test]
async fn health_and_readiness_need_no_token() {
    let s = Running::start().await;
    for path in ["/healthz", "/readyz"] {
        let r = s.http(None, "GET", path, json!({})).await;
        assert_eq!(r.status, 200, "{path}: {}", r.raw);
    }
    s.stop().await;
}

#[tokio::test]
async fn a_request_without_a_token_is_refused_before_its_body_is_read() {
    let s = Running::start().await;
    for token in [None, Some(WRONG)] {
        let mut stream = TcpStream::connect(s.http).await.unwrap();
        let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
        // A body of 20 MiB announced, a few bytes of it sent, the rest never: only an
        // answer given without reading the body can arrive.
        let head = format!(
            "POST /v1/queues/orders.eu/messages HTTP/1.1\r\nHost: ferry\r\n{auth}\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{{\"messages\"",
            20 << 20
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let reply = tokio::time::timeout(Duration::from_secs(60), read_head(&mut stream))
            .await
            .expect("the 401 comes without the body");
        assert!(reply.starts_with("HTTP/1.1 401"), "{reply}");
    }
    assert_eq!(s.ready("orders.eu"), 0);
    s.stop().await;
}

/// The status line and headers of the reply on `stream`.
async fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await.unwrap() {
            0 => break,
            n => head.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

#[tokio::test]
async fn a_grpc_call_without_a_token_is_refused_before_its_message_is_decoded() {
    let s = Running::start_with(|s| s.auth(config()).max_grpc_message(1024)).await;
    let oversized = || v1::PublishRequest {
        batch_id: None,
        queue: "orders.eu".into(),
        messages: vec![v1::OutgoingMessage {
            payload: vec![b'x'; 4096].into(),
            ..Default::default()
        }],
    };
    for token in [None, Some(WRONG)] {
        let status = refused(s.publisher().publish(req(token, oversized())).await);
        assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    }
    // With a token the message is decoded, and refused for its size.
    let status = refused(s.publisher().publish(req(Some(ROOT), oversized())).await);
    assert_eq!(status.code(), Code::OutOfRange, "{status:?}");
    assert_eq!(s.ready("orders.eu"), 0);
    s.stop().await;
}

#[tokio::test]
async fn grpc_calls_are_allowed_on_matching_names_and_denied_elsewhere() {
    let s = Running::start().await;
    let t = Some(ORDERS);
    // Publish: `publish:orders.*`.
    s.publisher()
        .publish(req(t, publish_request("orders.eu", 2)))
        .await
        .unwrap();
    let status = refused(
        s.publisher()
            .publish(req(t, publish_request("billing", 1)))
            .await,
    );
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    assert!(status.message().contains("\"orders\""), "names the grant");
    assert_eq!((s.ready("orders.eu"), s.ready("billing")), (2, 0));

    // Consume: `consume:orders.#`.
    let got = s
        .consumer()
        .receive(req(
            t,
            v1::ReceiveRequest {
                queue: "orders.eu".into(),
                consumer: "w".into(),
                max: 1,
                ..Default::default()
            },
        ))
        .await
        .unwrap()
        .into_inner()
        .deliveries;
    assert_eq!(got.len(), 1);
    let d = &got[0];
    s.consumer()
        .ack(req(
            t,
            v1::AckRequest {
                queue: "orders.eu".into(),
                seq: d.seq,
                token: d.token,
            },
        ))
        .await
        .unwrap();
    s.broker
        .publish_batch("billing", vec![ferry_broker::OutgoingMessage::new("b")])
        .await
        .unwrap();
    let status = refused(
        s.consumer()
            .receive(req(
                t,
                v1::ReceiveRequest {
                    queue: "billing".into(),
                    consumer: "w".into(),
                    max: 1,
                    ..Default::default()
                },
            ))
            .await,
    );
    assert_eq!(status.code(), Code::PermissionDenied);
    assert_eq!(s.ready("billing"), 1, "the denied receive leased nothing");
    let status = refused(
        s.consumer()
            .ack(req(
                t,
                v1::AckRequest {
                    queue: "billing".into(),
                    seq: 0,
                    token: 0,
                },
            ))
            .await,
    );
    assert_eq!(status.code(), Code::PermissionDenied);

    // Admin: `admin:orders.#`.
    s.admin()
        .create_queue(req(
            t,
            v1::CreateQueueRequest {
                name: "orders.us".into(),
                spec: None,
            },
        ))
        .await
        .unwrap();
    let status = refused(
        s.admin()
            .create_queue(req(
                t,
                v1::CreateQueueRequest {
                    name: "billing.new".into(),
                    spec: None,
                },
            ))
            .await,
    );
    assert_eq!(status.code(), Code::PermissionDenied);
    let status = refused(
        s.admin()
            .delete_queue(req(
                t,
                v1::DeleteQueueRequest {
                    name: "billing".into(),
                },
            ))
            .await,
    );
    assert_eq!(status.code(), Code::PermissionDenied);
    assert!(s.broker.describe_queue("billing").is_ok(), "still there");
    assert!(s.broker.describe_queue("billing.new").is_err(), "not made");

    // Lists show only what the token administers.
    let names = s
        .admin()
        .list_queues(req(t, v1::ListQueuesRequest {}))
        .await
        .unwrap()
        .into_inner()
        .names;
    assert!(names.iter().all(|n| n.starts_with("orders.")), "{names:?}");
    assert!(names.contains(&"orders.us".to_string()), "{names:?}");
    let all = s
        .admin()
        .list_queues(req(Some(ROOT), v1::ListQueuesRequest {}))
        .await
        .unwrap()
        .into_inner()
        .names;
    assert!(all.contains(&"billing".to_string()), "{all:?}");

    // Dead letters and groups: dead_letters on the DLQ, consume on the topic (see
    // dlq_access.rs for dead letters in full).
    let mut dlq = DeadLettersClient::new(s.channel.clone());
    let status = refused(
        dlq.peek(req(
            t,
            v1::PeekRequest {
                dlq: "billing.dlq".into(),
                ..Default::default()
            },
        ))
        .await,
    );
    assert_eq!(status.code(), Code::PermissionDenied);
    let status = refused(
        dlq.redrive(req(
            Some(METERED),
            v1::RedriveRequest {
                dlq: "orders.eu".into(),
                ..Default::default()
            },
        ))
        .await,
    );
    assert_eq!(status.code(), Code::PermissionDenied);
    let status = refused(
        dlq.redrive(req(
            t,
            v1::RedriveRequest {
                dlq: "orders.eu".into(),
                target: Some("billing".into()),
                ..Default::default()
            },
        ))
        .await,
    );
    assert_eq!(
        status.code(),
        Code::PermissionDenied,
        "a named target needs publish"
    );
    let status = refused(
        GroupsClient::new(s.channel.clone())
            .join(req(
                t,
                v1::JoinGroupRequest {
                    topic: "billing".into(),
                    group: "g".into(),
                    ..Default::default()
                },
            ))
            .await,
    );
    assert_eq!(status.code(), Code::PermissionDenied);
    s.stop().await;
}

#[tokio::test]
async fn a_consume_stream_is_opened_only_on_a_permitted_queue() {
    let s = Running::start().await;
    let open = |queue: &str| v1::ConsumeRequest {
        kind: Some(v1::consume_request::Kind::Open(v1::ConsumeOpen {
            queue: queue.into(),
            consumer: "w".into(),
            ..Default::default()
        })),
    };
    let denied = refused(
        s.consumer()
            .consume(req(Some(ORDERS), tokio_stream::iter([open("billing")])))
            .await,
    );
    assert_eq!(denied.code(), Code::PermissionDenied);
    let anonymous = refused(
        s.consumer()
            .consume(req(None, tokio_stream::iter([open("orders.eu")])))
            .await,
    );
    assert_eq!(anonymous.code(), Code::Unauthenticated);
    s.stop().await;
}

#[tokio::test]
async fn http_calls_are_allowed_on_matching_names_and_denied_elsewhere() {
    let s = Running::start().await;
    let t = Some(ORDERS);
    let one = json!({"messages": [{"payload": "x"}]});
    let r = s
        .http(t, "POST", "/v1/queues/orders.eu/messages", one.clone())
        .await;
    assert_eq!(r.status, 200, "{}", r.raw);
    let r = s
        .http(t, "POST", "/v1/queues/billing/messages", one.clone())
        .await;
    expect(&r, 403, "forbidden");
    assert_eq!((s.ready("orders.eu"), s.ready("billing")), (1, 0));

    let r = s
        .http(
            t,
            "POST",
            "/v1/queues/orders.eu/receive",
            json!({"consumer": "w"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.raw);
    let d = &r.json()["deliveries"][0];
    let ack = format!("/v1/queues/orders.eu/messages/{}/ack", d["seq"]);
    let r = s.http(t, "POST", &ack, json!({"token": d["token"]})).await;
    assert_eq!(r.status, 200, "{}", r.raw);
    let r = s
        .http(
            t,
            "POST",
            "/v1/queues/billing/receive",
            json!({"consumer": "w"}),
        )
        .await;
    expect(&r, 403, "forbidden");
    let r = s
        .http(
            t,
            "POST",
            "/v1/queues/billing/messages/0/nack",
            json!({"token": 1}),
        )
        .await;
    expect(&r, 403, "forbidden");
    let r = s
        .http(t, "GET", "/v1/queues/billing/dead-letters", json!({}))
        .await;
    expect(&r, 403, "forbidden");

    let r = s
        .http(t, "POST", "/v1/queues", json!({"name": "orders.us"}))
        .await;
    assert_eq!(r.status, 201, "{}", r.raw);
    let r = s
        .http(t, "POST", "/v1/queues", json!({"name": "billing.new"}))
        .await;
    expect(&r, 403, "forbidden");
    let r = s.http(t, "DELETE", "/v1/queues/billing", json!({})).await;
    expect(&r, 403, "forbidden");
    let r = s.http(t, "GET", "/v1/queues/billing", json!({})).await;
    expect(&r, 403, "forbidden");
    let r = s
        .http(t, "POST", "/v1/queues/billing/redrive", json!({}))
        .await;
    expect(&r, 403, "forbidden");
    let r = s
        .http(
            t,
            "POST",
            "/v1/queues/orders.eu/redrive",
            json!({"target": "billing"}),
        )
        .await;
    expect(&r, 403, "forbidden");
    assert!(s.broker.describe_queue("billing").is_ok(), "still there");
    assert!(s.broker.describe_queue("billing.new").is_err(), "not made");

    let r = s.http(t, "GET", "/v1/queues", json!({})).await;
    assert_eq!(r.status, 200, "{}", r.raw);
    let names = r.json()["names"].clone();
    assert!(
        names
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n.as_str().unwrap().starts_with("orders.")),
        "{names}"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_spent_publish_quota_is_resource_exhausted_and_recovers_after_a_second() {
    // Quotas count by the broker's clock: a manual one, so that neither a slow machine
    // (refilling the bucket between two calls) nor a sleep decides the outcome.
    let clock = ManualClock::new(1_800_000_000_000);
    let dir = tempfile::tempdir().unwrap();
    let manual = BrokerConfig {
        clock: Arc::new(clock.clone()),
        ..BrokerConfig::default()
    };
    let broker = Broker::open(dir.path(), manual).await.unwrap();
    broker
        .create_queue("metered", QueueSpec::default())
        .await
        .unwrap();
    let s = Running::serve(broker, Some(dir), |s| s.auth(config())).await;
    let t = Some(METERED);
    s.publisher()
        .publish(req(t, publish_request("metered", 5)))
        .await
        .unwrap();
    let status = refused(
        s.publisher()
            .publish(req(t, publish_request("metered", 1)))
            .await,
    );
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    let r = s
        .http(
            t,
            "POST",
            "/v1/queues/metered/messages",
            json!({"messages": [{"payload": "x"}]}),
        )
        .await;
    expect(&r, 429, "over_quota");
    // More than a second's worth can never pass: too large, not "wait".
    let status = refused(
        s.publisher()
            .publish(req(t, publish_request("metered", 6)))
            .await,
    );
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(status.message().contains("limit of 5"), "{status:?}");
    assert_eq!(s.ready("metered"), 5, "refused publishes stored nothing");
    // Other tokens have buckets of their own.
    s.publisher()
        .publish(req(Some(ROOT), publish_request("metered", 1)))
        .await
        .unwrap();

    clock.advance(1000);
    s.publisher()
        .publish(req(t, publish_request("metered", 5)))
        .await
        .unwrap();
    assert_eq!(s.ready("metered"), 11);
    s.stop().await;
}

#[tokio::test]
async fn a_batch_over_max_batch_is_refused_whole() {
    let s = Running::start_with(|s| s.max_batch(3)).await;
    let status = refused(
        s.publisher()
            .publish(req(None, publish_request("orders.eu", 4)))
            .await,
    );
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    let status = refused(
        s.publisher()
            .publish_to_topic(req(
                None,
                v1::PublishToTopicRequest {
                    topic: "t".into(),
                    messages: messages(4),
                    ..Default::default()
                },
            ))
            .await,
    );
    assert_eq!(status.code(), Code::ResourceExhausted);
    let four: Vec<Value> = (0..4)
        .map(|i| json!({"payload": format!("m{i}")}))
        .collect();
    let r = s
        .http(
            None,
            "POST",
            "/v1/queues/orders.eu/messages",
            json!({ "messages": four }),
        )
        .await;
    expect(&r, 413, "batch_too_large");
    assert_eq!(s.ready("orders.eu"), 0);
    s.publisher()
        .publish(req(None, publish_request("orders.eu", 3)))
        .await
        .unwrap();
    assert_eq!(s.ready("orders.eu"), 3);
    s.stop().await;
}

#[tokio::test]
async fn the_token_never_appears_in_a_reply() {
    let s = Running::start().await;
    // `refused` and `request` check every reply of every test; here the refusals that
    // are likeliest to echo what was sent.
    for token in ALL_TOKENS {
        let status = refused(
            s.admin()
                .delete_queue(req(
                    Some(token),
                    v1::DeleteQueueRequest {
                        name: "nothing.here".into(),
                    },
                ))
                .await,
        );
        assert_ne!(status.code(), Code::Ok);
        let r = s
            .http(Some(token), "DELETE", "/v1/queues/nothing.here", json!({}))
            .await;
        assert!([401, 403, 404].contains(&r.status), "{}", r.raw);
    }
    s.stop().await;
}

#[tokio::test]
async fn the_default_connection_limit_refuses_the_connection_past_it() {
    let s = Running::start_with(|s| s).await;
    let mut held = Vec::new();
    for _ in 0..ferry_server::DEFAULT_MAX_CONNECTIONS {
        held.push(TcpStream::connect(s.http).await.unwrap());
    }
    // Accepted in the order they connected: this one is past the limit.
    let r = s.http(None, "GET", "/healthz", json!({})).await;
    expect(&r, 429, "too_many_connections");
    drop(held);
    s.stop().await;
}

#[tokio::test]
async fn connections_beyond_max_connections_are_refused_until_one_closes() {
    // The test's own gRPC channel holds the one gRPC connection allowed.
    let s = Running::start_with(|s| s.max_connections(1)).await;
    let second = Channel::from_shared(format!("http://{}", s.grpc))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let status = refused(
        PublisherClient::new(second)
            .publish(req(None, publish_request("orders.eu", 1)))
            .await,
    );
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(
        s.ready("orders.eu"),
        0,
        "the refused publish stored nothing"
    );
    s.publisher()
        .publish(req(None, publish_request("orders.eu", 1)))
        .await
        .unwrap();

    let held = TcpStream::connect(s.http).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let r = s.http(None, "GET", "/v1/queues", json!({})).await;
    expect(&r, 429, "too_many_connections");
    drop(held);
    let mut served = false;
    for _ in 0..50 {
        if s.http(None, "GET", "/v1/queues", json!({})).await.status == 200 {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(served, "a closed connection gives its place back");
    s.stop().await;
}
