//! Dead letters behind their own permission, and credential headers masked in peeks, over
//! real sockets, gRPC and HTTP side by side.
//!
//! `consume` never reads a dead-letter queue (even when its pattern matches the name),
//! `dead_letters` never consumes an ordinary queue, `admin` does neither, and a redrive to
//! a named target needs `publish` there. Peeks show redacted headers as `***`; consumers
//! and redrives keep the real values.

use std::net::SocketAddr;
use std::time::Duration;

use ferry_broker::{Broker, DeadLetter, Name, OutgoingMessage, QueueSpec};
use ferry_proto::v1;
use ferry_server::{AuthConfig, Redaction};
use serde_json::{Value, json};
use tonic::Code;

/// `consume:orders.#` (which matches `orders.dlq` by name) and `consume:billing`.
const READER: &str = "reader-5d2c8f1a3b7e9d0c4a6f8b2e1d3c5a7f";
/// `dlq:orders.dlq` and `dead_letters:graveyard`.
const DLQ: &str = "dlq-8a1f3c5e7b9d2f4a6c8e0b1d3f5a7c9e";
/// `dlq:orders.dlq` and `publish:billing`.
const REDRIVER: &str = "redriver-2e4a6c8f0b1d3e5a7c9f1b3d5e7a9c0f";
/// `admin:#`.
const ADMIN: &str = "admin-7c9e1a3f5b7d9f2a4c6e8b0d2f4a6c8e";

/// The secret header value and the payload the dead letters carry.
const SECRET: &str = "Bearer sk-live-61f0c2d9";
const PAYLOAD: &str = "card-4111-payload";

fn config() -> AuthConfig {
    AuthConfig {
        tokens: vec![
            grant("reader", READER, &["consume:orders.#", "consume:billing"]),
            grant("dlq", DLQ, &["dlq:orders.dlq", "dead_letters:graveyard"]),
            grant("redriver", REDRIVER, &["dlq:orders.dlq", "publish:billing"]),
            grant("admin", ADMIN, &["admin:#"]),
        ],
    }
}

mod support;

use support::{GrpcClients, Served as Running, grant};

/// A message with a secret `authorization` header and an ordinary `tenant` one.
fn secret_message() -> OutgoingMessage {
    let mut m = OutgoingMessage::new(PAYLOAD);
    m.headers.insert("Authorization".into(), SECRET.into());
    m.headers.insert("tenant".into(), "acme".into());
    m
}

/// Publishes one secret message to `queue` and rejects it: a dead letter at once.
async fn dead_letter_one(broker: &Broker, queue: &str) {
    broker.publish(queue, secret_message()).await.unwrap();
    let got = broker
        .receive(queue, "setup", 1, None, Some(Duration::from_secs(5)))
        .await
        .unwrap();
    broker
        .reject(queue, got[0].seq, got[0].token, "unprocessable")
        .await
        .unwrap();
}

impl Running {
    /// `orders` (dead letters to `orders.dlq`), `payments` (to the queue `graveyard`) and
    /// `billing`; one dead letter in `orders.dlq` and one in `graveyard`, one ordinary
    /// message in `orders`.
    async fn start(redaction: Option<Redaction>) -> Running {
        let (broker, dir) = support::fresh_broker().await;
        let no_dlq = QueueSpec {
            dead_letter: DeadLetter::Disabled,
            ..QueueSpec::default()
        };
        broker
            .create_queue("orders", QueueSpec::default())
            .await
            .unwrap();
        broker
            .create_queue("billing", no_dlq.clone())
            .await
            .unwrap();
        broker.create_queue("graveyard", no_dlq).await.unwrap();
        let to_graveyard = QueueSpec {
            dead_letter: DeadLetter::Named(Name::new("graveyard").unwrap()),
            ..QueueSpec::default()
        };
        broker.create_queue("payments", to_graveyard).await.unwrap();
        dead_letter_one(&broker, "orders").await;
        dead_letter_one(&broker, "payments").await;
        broker.publish("orders", secret_message()).await.unwrap();

        let configure = |server: ferry_server::Server| {
            let server = server.auth(config());
            match redaction {
                Some(redaction) => server.redact_headers(redaction),
                None => server,
            }
        };
        Running::serve(broker, Some(dir), configure).await
    }

    fn tracked(&self, queue: &str) -> usize {
        self.broker
            .describe_queue(queue)
            .unwrap()
            .stats
            .state
            .tracked
    }

    async fn peek(&self, token: &str, dlq: &str) -> Result<Vec<v1::Delivery>, tonic::Status> {
        let request = v1::PeekRequest {
            dlq: dlq.into(),
            ..Default::default()
        };
        self.dead_letters()
            .peek(req(token, request))
            .await
            .map(|r| r.into_inner().letters)
    }

    async fn receive(&self, token: &str, queue: &str) -> Result<Vec<v1::Delivery>, tonic::Status> {
        let request = v1::ReceiveRequest {
            queue: queue.into(),
            consumer: "w".into(),
            max: 10,
            ..Default::default()
        };
        self.consumer()
            .receive(req(token, request))
            .await
            .map(|r| r.into_inner().deliveries)
    }

    async fn redrive(
        &self,
        token: &str,
        dlq: &str,
        target: Option<&str>,
    ) -> Result<v1::RedriveResponse, tonic::Status> {
        let request = v1::RedriveRequest {
            dlq: dlq.into(),
            target: target.map(Into::into),
            ..Default::default()
        };
        self.dead_letters()
            .redrive(req(token, request))
            .await
            .map(tonic::Response::into_inner)
    }

    async fn http(&self, token: &str, method: &str, path: &str, body: Value) -> Reply {
        request(self.http, token, method, path, &body.to_string()).await
    }
}

fn req<T>(token: &str, msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    r
}

fn denied<T: std::fmt::Debug>(result: Result<T, tonic::Status>) {
    let status = result.expect_err("the call is refused");
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
}

struct Reply {
    status: u16,
    body: Value,
    raw: String,
}

async fn request(addr: SocketAddr, token: &str, method: &str, path: &str, body: &str) -> Reply {
    let auth = format!("Authorization: Bearer {token}\r\n");
    let reply = support::exchange(addr, &auth, method, path, body.as_bytes()).await;
    let text = String::from_utf8_lossy(&reply.body);
    Reply {
        status: reply.status,
        body: serde_json::from_str(&text).unwrap_or(Value::Null),
        raw: format!("{}\r\n\r\n{text}", reply.head),
    }
}

fn forbidden(reply: &Reply) {
    assert_eq!(reply.status, 403, "{}", reply.raw);
    assert_eq!(reply.body["code"], "forbidden", "{}", reply.raw);
}

#[tokio::test]
async fn grpc_peek_and_receive_of_dead_letters_need_dead_letters_not_consume() {
    let s = Running::start(None).await;
    // Peek: `consume:orders.#` matches the name `orders.dlq` but does not read it.
    denied(s.peek(READER, "orders.dlq").await);
    denied(s.peek(ADMIN, "orders.dlq").await);
    assert_eq!(s.peek(DLQ, "orders.dlq").await.unwrap().len(), 1);
    // A dead-letter queue by topology, whatever its name.
    assert_eq!(s.peek(DLQ, "graveyard").await.unwrap().len(), 1);
    denied(s.peek(READER, "graveyard").await);
    // An ordinary queue is peeked with `consume`, which `dlq:` does not give.
    assert_eq!(s.peek(READER, "orders").await.unwrap().len(), 1);
    denied(s.peek(DLQ, "orders").await);

    // Receive: the same split, and a refused receive leases nothing.
    denied(s.receive(READER, "orders.dlq").await);
    denied(s.receive(DLQ, "orders").await);
    assert_eq!(
        s.broker
            .describe_queue("orders.dlq")
            .unwrap()
            .stats
            .state
            .in_flight,
        0
    );
    let got = s.receive(DLQ, "orders.dlq").await.unwrap();
    assert_eq!(got.len(), 1);
    // A consumer of dead letters gets the real headers: only peeks are masked.
    assert_eq!(got[0].headers["Authorization"], SECRET);
    let ack = |token: &str| {
        req(
            token,
            v1::AckRequest {
                queue: "orders.dlq".into(),
                seq: got[0].seq,
                token: got[0].token,
            },
        )
    };
    denied(s.consumer().ack(ack(READER)).await);
    s.consumer().ack(ack(DLQ)).await.unwrap();
    assert_eq!(s.tracked("orders.dlq"), 0);
    let ordinary = s.receive(READER, "orders").await.unwrap();
    assert_eq!(ordinary[0].headers["Authorization"], SECRET);

    // The consume stream checks the same at open.
    let open = |queue: &str| v1::ConsumeRequest {
        kind: Some(v1::consume_request::Kind::Open(v1::ConsumeOpen {
            queue: queue.into(),
            consumer: "w".into(),
            ..Default::default()
        })),
    };
    denied(
        s.consumer()
            .consume(req(READER, tokio_stream::iter([open("graveyard")])))
            .await,
    );
    denied(
        s.consumer()
            .consume(req(DLQ, tokio_stream::iter([open("billing")])))
            .await,
    );
    s.consumer()
        .consume(req(DLQ, tokio_stream::iter([open("graveyard")])))
        .await
        .expect("dead_letters opens a stream on a dead-letter queue");
    s.stop().await;
}

#[tokio::test]
async fn grpc_redrive_needs_dead_letters_and_publish_on_a_named_target() {
    let s = Running::start(None).await;
    denied(s.redrive(ADMIN, "orders.dlq", None).await);
    denied(s.redrive(READER, "orders.dlq", None).await);
    // `dlq:` alone may not write into a target it names.
    denied(s.redrive(DLQ, "orders.dlq", Some("billing")).await);
    denied(s.redrive(REDRIVER, "orders.dlq", Some("payments")).await);
    assert_eq!(s.tracked("orders.dlq"), 1, "nothing moved");
    assert_eq!(s.tracked("billing"), 0);
    let moved = s
        .redrive(REDRIVER, "orders.dlq", Some("billing"))
        .await
        .unwrap();
    assert_eq!(moved.moved, 1);
    // The redriven message keeps its real headers.
    let got = s.receive(READER, "billing").await.unwrap();
    assert_eq!(got[0].headers["Authorization"], SECRET);
    assert_eq!(&got[0].payload[..], PAYLOAD.as_bytes());
    // Back to the origin needs nothing but `dead_letters`.
    assert_eq!(s.redrive(DLQ, "graveyard", None).await.unwrap().moved, 1);
    assert_eq!(s.tracked("payments"), 1);
    s.stop().await;
}

#[tokio::test]
async fn http_dead_letter_calls_need_dead_letters_not_consume() {
    let s = Running::start(None).await;
    let peek = "/v1/queues/orders.dlq/dead-letters";
    forbidden(&s.http(READER, "GET", peek, json!({})).await);
    forbidden(&s.http(ADMIN, "GET", peek, json!({})).await);
    let r = s.http(DLQ, "GET", peek, json!({})).await;
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!(r.body["letters"].as_array().unwrap().len(), 1);
    let r = s
        .http(DLQ, "GET", "/v1/queues/graveyard/dead-letters", json!({}))
        .await;
    assert_eq!(r.status, 200, "{}", r.raw);
    forbidden(
        &s.http(DLQ, "GET", "/v1/queues/orders/dead-letters", json!({}))
            .await,
    );

    let receive = json!({"consumer": "w"});
    forbidden(
        &s.http(
            READER,
            "POST",
            "/v1/queues/orders.dlq/receive",
            receive.clone(),
        )
        .await,
    );
    forbidden(
        &s.http(DLQ, "POST", "/v1/queues/orders/receive", receive.clone())
            .await,
    );
    let r = s
        .http(
            DLQ,
            "POST",
            "/v1/queues/orders.dlq/receive",
            receive.clone(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.raw);
    let d = &r.body["deliveries"][0];
    assert_eq!(
        d["headers"]["Authorization"], SECRET,
        "consumers get real headers"
    );
    let ack = format!("/v1/queues/orders.dlq/messages/{}/ack", d["seq"]);
    forbidden(
        &s.http(READER, "POST", &ack, json!({"token": d["token"]}))
            .await,
    );
    let r = s
        .http(DLQ, "POST", &ack, json!({"token": d["token"]}))
        .await;
    assert_eq!(r.status, 200, "{}", r.raw);

    let redrive = "/v1/queues/graveyard/redrive";
    forbidden(&s.http(ADMIN, "POST", redrive, json!({})).await);
    forbidden(&s.http(READER, "POST", redrive, json!({})).await);
    forbidden(
        &s.http(DLQ, "POST", redrive, json!({"target": "billing"}))
            .await,
    );
    assert_eq!(s.tracked("graveyard"), 1, "nothing moved");
    let r = s.http(DLQ, "POST", redrive, json!({})).await;
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!(r.body["moved"], 1);
    s.stop().await;
}

#[tokio::test]
async fn peeks_mask_redacted_headers_and_refuse_filters_on_them() {
    let s = Running::start(None).await;
    // gRPC: the default list masks `authorization`, whatever its case; the key stays.
    let letters = s.peek(DLQ, "orders.dlq").await.unwrap();
    assert_eq!(letters[0].headers["Authorization"], "***");
    assert_eq!(letters[0].headers["tenant"], "acme");
    assert_eq!(&letters[0].payload[..], PAYLOAD.as_bytes());
    let filtered = v1::PeekRequest {
        dlq: "orders.dlq".into(),
        filter: Some(v1::DeadLetterFilter {
            header_name: Some("authorization".into()),
            header_value: Some(SECRET.into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let status = s
        .dead_letters()
        .peek(req(DLQ, filtered))
        .await
        .expect_err("a filter on a redacted header is refused");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("redacted"), "{status:?}");

    // HTTP: the same.
    let r = s
        .http(DLQ, "GET", "/v1/queues/orders.dlq/dead-letters", json!({}))
        .await;
    assert_eq!(
        r.body["letters"][0]["headers"]["Authorization"], "***",
        "{}",
        r.raw
    );
    assert_eq!(r.body["letters"][0]["headers"]["tenant"], "acme");
    assert!(!r.raw.contains(SECRET), "{}", r.raw);
    let r = s
        .http(
            DLQ,
            "GET",
            "/v1/queues/orders.dlq/dead-letters?header_name=AUTHORIZATION&header_value=x",
            json!({}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.raw);
    assert_eq!(r.body["code"], "redacted_header");
    let r = s
        .http(
            REDRIVER,
            "POST",
            "/v1/queues/orders.dlq/redrive",
            json!({"target": "billing", "filter": {"header_name": "authorization", "header_value": SECRET}}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.raw);
    assert_eq!(s.tracked("orders.dlq"), 1, "nothing moved");
    s.stop().await;
}

#[tokio::test]
async fn the_redaction_list_is_the_servers_to_set() {
    let custom = Redaction::new(["tenant"]).unwrap();
    let s = Running::start(Some(custom)).await;
    let letters = s.peek(DLQ, "orders.dlq").await.unwrap();
    assert_eq!(letters[0].headers["tenant"], "***");
    assert_eq!(
        letters[0].headers["Authorization"], SECRET,
        "not on this list"
    );
    let r = s
        .http(DLQ, "GET", "/v1/queues/graveyard/dead-letters", json!({}))
        .await;
    assert_eq!(
        r.body["letters"][0]["headers"]["tenant"], "***",
        "{}",
        r.raw
    );
    s.stop().await;

    let s = Running::start(Some(Redaction::none())).await;
    let letters = s.peek(DLQ, "orders.dlq").await.unwrap();
    assert_eq!(letters[0].headers["Authorization"], SECRET);
    s.stop().await;
}
