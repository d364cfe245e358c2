//! The bad-input catalogue: hostile requests over gRPC and HTTP, each answered with its
//! exact error, and none of them changing anything.
//!
//! One server (gRPC and HTTP over one broker) holds a fixture: a queue with ready, in-flight,
//! settled and dead-lettered messages, a topic with a subscription. Every case of the
//! catalogue is sent in turn; after each, the state — queue and topic lists, every
//! description with its counts, the dead letters, the consumer groups — must equal the state
//! before, and at the end a valid receive must return exactly the messages that were ready.
//! A failing case is reported by its name.
//!
//! The rules the catalogue pins down:
//! - Names are ASCII only (letters, digits, `.`, `_`, `-`), compared byte for byte; nothing
//!   is normalised, so a look-alike (Cyrillic `о`, a decomposed `é`) is refused where a name
//!   is created and is simply not found where one is looked up — it never aliases a name.
//! - Unknown JSON fields are refused (`malformed_json`), as the HTTP API docs say.
//! - Out-of-range times and counts are refused, not clamped: a receive's lease, a lease
//!   extension, a nack's delay, a receive's `max`.
//! - Deleting a queue with leased messages is allowed (as SQS and RabbitMQ do by default);
//!   the leases end with the queue (see the test after the catalogue).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;

use ferry_broker::{Broker, BrokerConfig};
use ferry_proto::v1::{
    self, admin_client::AdminClient, consumer_client::ConsumerClient,
    dead_letters_client::DeadLettersClient, groups_client::GroupsClient,
    publisher_client::PublisherClient,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tonic::transport::Channel;
use tonic::{Code, Status};

const MIB: usize = 1 << 20;

struct Running {
    http: SocketAddr,
    channel: Channel,
    stop: Option<oneshot::Sender<()>>,
    served: tokio::task::JoinHandle<Result<(), ferry_server::ServeError>>,
    _dir: tempfile::TempDir,
}

impl Running {
    async fn start() -> Running {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(dir.path(), BrokerConfig::default())
            .await
            .unwrap();
        let any = "127.0.0.1:0".parse().unwrap();
        let grpc = ferry_server::bind(any).await.unwrap();
        let http = ferry_server::bind(any).await.unwrap();
        let (grpc_addr, http_addr) = (grpc.local_addr().unwrap(), http.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let server = ferry_server::Server::new(broker).grpc(grpc).http(http);
        let served = tokio::spawn(server.serve(async {
            let _ = stopped.await;
        }));
        let channel = Channel::from_shared(format!("http://{grpc_addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        Running {
            http: http_addr,
            channel,
            stop: Some(stop),
            served,
            _dir: dir,
        }
    }

    async fn send(&self, method: &str, path: &str, body: &[u8]) -> Reply {
        request(self.http, method, path, body).await
    }

    async fn get(&self, path: &str) -> Value {
        let reply = self.send("GET", path, b"").await;
        assert_eq!(reply.status, 200, "GET {path}: {}", reply.text());
        reply.json()
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let reply = self.send("POST", path, body.to_string().as_bytes()).await;
        assert!(
            reply.status == 200 || reply.status == 201,
            "POST {path}: {} {}",
            reply.status,
            reply.text()
        );
        if reply.body.is_empty() {
            Value::Null
        } else {
            reply.json()
        }
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        drop(self.channel);
        self.served.await.unwrap().unwrap();
    }
}

struct Reply {
    status: u16,
    body: Vec<u8>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One HTTP/1.1 exchange on a connection of its own, sending exactly `body`'s bytes (some
/// cases send bytes that are not UTF-8).
async fn request(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> Reply {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: ferry\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let _ = stream.write_all(body).await;
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw).await;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP reply: {:?}", String::from_utf8_lossy(&raw)));
    let head = String::from_utf8_lossy(&raw[..split]);
    Reply {
        status: head[9..12].parse().unwrap(),
        body: raw[split + 4..].to_vec(),
    }
}

/// What the fixture left where: the in-flight delivery, a settled one, what is ready.
#[derive(Clone)]
struct Fixture {
    channel: Channel,
    held_seq: u64,
    held_token: u64,
    settled_seq: u64,
    settled_token: u64,
    ready: Vec<(String, String)>,
}

impl Fixture {
    fn admin(&self) -> AdminClient<Channel> {
        AdminClient::new(self.channel.clone())
    }
    fn publisher(&self) -> PublisherClient<Channel> {
        PublisherClient::new(self.channel.clone())
    }
    fn consumer(&self) -> ConsumerClient<Channel> {
        ConsumerClient::new(self.channel.clone())
    }
    fn dead_letters(&self) -> DeadLettersClient<Channel> {
        DeadLettersClient::new(self.channel.clone())
    }
    fn groups(&self) -> GroupsClient<Channel> {
        GroupsClient::new(self.channel.clone())
    }
}

/// Builds the fixture: `orders` (lease 10 min, so nothing expires during the test) with one
/// acked message, one rejected into `orders.dlq`, one in flight and two ready; topic
/// `events` (2 partitions) with one record and subscription `events-sub`.
async fn fixture(s: &Running) -> Fixture {
    s.post(
        "/v1/queues",
        json!({"name": "orders", "spec": {"lease_ms": 600_000}}),
    )
    .await;
    let receive = json!({"consumer": "fixture", "max": 1});
    let take = async |payload: &str| {
        s.post(
            "/v1/queues/orders/messages",
            json!({"messages": [{"payload": payload, "headers": {"kind": "fixture"}}]}),
        )
        .await;
        let got = s.post("/v1/queues/orders/receive", receive.clone()).await;
        let d = got["deliveries"][0].clone();
        assert_eq!(d["payload"], payload);
        (d["seq"].as_u64().unwrap(), d["token"].as_u64().unwrap())
    };
    let (settled_seq, settled_token) = take("done").await;
    s.post(
        &format!("/v1/queues/orders/messages/{settled_seq}/ack"),
        json!({"token": settled_token}),
    )
    .await;
    let (poison_seq, poison_token) = take("poison").await;
    s.post(
        &format!("/v1/queues/orders/messages/{poison_seq}/reject"),
        json!({"token": poison_token, "reason": "unparseable"}),
    )
    .await;
    let (held_seq, held_token) = take("held").await;
    let published = s
        .post(
            "/v1/queues/orders/messages",
            json!({"messages": [{"payload": "r1", "key": "k"}, {"payload": "r2"}]}),
        )
        .await;
    let ids: Vec<String> = published["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap().to_owned())
        .collect();
    s.post(
        "/v1/topics",
        json!({"name": "events", "spec": {"partitions": 2}}),
    )
    .await;
    s.post(
        "/v1/subscriptions",
        json!({"name": "events-sub", "spec": {"topic": "events", "start": "earliest"}}),
    )
    .await;
    s.post(
        "/v1/topics/events/messages",
        json!({"messages": [{"payload": "e1", "key": "a"}]}),
    )
    .await;
    Fixture {
        channel: s.channel.clone(),
        held_seq,
        held_token,
        settled_seq,
        settled_token,
        ready: ids
            .into_iter()
            .zip(["r1".to_owned(), "r2".to_owned()])
            .collect(),
    }
}

/// Everything a bad request could have changed, as the API shows it. The age of the oldest
/// ready message grows by itself and is left out.
async fn snapshot(s: &Running, f: &Fixture) -> Value {
    let queues = s.get("/v1/queues").await;
    let mut described = serde_json::Map::new();
    for name in queues["names"].as_array().unwrap() {
        let name = name.as_str().unwrap();
        let mut info = s.get(&format!("/v1/queues/{name}")).await;
        info["stats"]
            .as_object_mut()
            .unwrap()
            .remove("oldest_ready_age_ms");
        described.insert(name.to_owned(), info);
    }
    let topics = s.get("/v1/topics").await;
    let mut topic_info = serde_json::Map::new();
    for name in topics["names"].as_array().unwrap() {
        let name = name.as_str().unwrap();
        topic_info.insert(name.to_owned(), s.get(&format!("/v1/topics/{name}")).await);
    }
    let mut subscription = s.get("/v1/subscriptions/events-sub").await;
    subscription["queue"]["stats"]
        .as_object_mut()
        .unwrap()
        .remove("oldest_ready_age_ms");
    let dead_letters = s.get("/v1/queues/orders.dlq/dead-letters").await;
    let groups = f
        .admin()
        .list_groups(v1::ListGroupsRequest { topic: None })
        .await
        .unwrap()
        .into_inner()
        .groups
        .len();
    json!({
        "queues": queues,
        "described": described,
        "topics": topics,
        "topic_info": topic_info,
        "subscription": subscription,
        "dead_letters": dead_letters,
        "groups": groups,
    })
}

type GrpcCall = Box<dyn Fn(Fixture) -> Pin<Box<dyn Future<Output = Result<(), Status>> + Send>>>;

enum Call {
    Http {
        method: &'static str,
        path: String,
        body: Vec<u8>,
    },
    Grpc(GrpcCall),
}

enum Expect {
    /// Status code, the `code` field of the JSON error body, a substring of its `error`.
    Http(u16, &'static str, &'static str),
    /// The gRPC code and a substring of the status message.
    Grpc(Code, &'static str),
}

struct Case {
    name: &'static str,
    call: Call,
    expect: Expect,
}

fn http(
    name: &'static str,
    method: &'static str,
    path: impl Into<String>,
    body: impl Into<Vec<u8>>,
    expect: (u16, &'static str, &'static str),
) -> Case {
    Case {
        name,
        call: Call::Http {
            method,
            path: path.into(),
            body: body.into(),
        },
        expect: Expect::Http(expect.0, expect.1, expect.2),
    }
}

fn post(
    name: &'static str,
    path: impl Into<String>,
    body: Value,
    expect: (u16, &'static str, &'static str),
) -> Case {
    http(name, "POST", path, body.to_string(), expect)
}

fn grpc<F, Fut>(name: &'static str, code: Code, message: &'static str, call: F) -> Case
where
    F: Fn(Fixture) -> Fut + 'static,
    Fut: Future<Output = Result<(), Status>> + Send + 'static,
{
    Case {
        name,
        call: Call::Grpc(Box::new(move |f| Box::pin(call(f)))),
        expect: Expect::Grpc(code, message),
    }
}

fn message(payload: impl Into<Vec<u8>>) -> v1::OutgoingMessage {
    v1::OutgoingMessage {
        payload: payload.into().into(),
        ..Default::default()
    }
}

async fn publish_grpc(f: Fixture, m: v1::OutgoingMessage) -> Result<(), Status> {
    f.publisher()
        .publish(v1::PublishRequest {
            queue: "orders".into(),
            messages: vec![message("fine"), m],
        })
        .await
        .map(drop)
}

async fn create_queue_grpc(f: Fixture, name: String, spec: v1::QueueSpec) -> Result<(), Status> {
    f.admin()
        .create_queue(v1::CreateQueueRequest {
            name,
            spec: Some(spec),
        })
        .await
        .map(drop)
}

fn publish_http(messages: Value) -> Vec<u8> {
    json!({"messages": [{"payload": "fine"}, messages]})
        .to_string()
        .into_bytes()
}

fn retry(max_deliveries: u32) -> Option<v1::RetryPolicy> {
    Some(v1::RetryPolicy {
        max_deliveries: Some(max_deliveries),
        backoff: None,
    })
}

const PUBLISH: &str = "/v1/queues/orders/messages";

/// The catalogue. Publishes put one valid message before the bad one: a batch is refused
/// whole.
fn catalogue(f: &Fixture) -> Vec<Case> {
    let (held, token, settled, used) = (f.held_seq, f.held_token, f.settled_seq, f.settled_token);
    let settle = |seq: u64, outcome: &str| format!("/v1/queues/orders/messages/{seq}/{outcome}");
    let ten_kb = "a".repeat(10 * 1024);
    let headers = |n: usize| -> Value {
        (0..n)
            .map(|i| (format!("h{i}"), json!("v")))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let day_ms: u64 = 24 * 3600 * 1000;
    vec![
        // ---- Names ----
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
            (404, "queue_not_found", "does not exist"),
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
            (
                400,
                "name_must_start_with_letter_or_digit",
                "starts with '.'",
            ),
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
        // ---- Payloads ----
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
        // ---- Headers, keys, ids ----
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
        // ---- Times and priorities at publish ----
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
        http(
            "priority_as_a_string",
            "POST",
            PUBLISH,
            publish_http(json!({"payload": "x", "priority": "high"})),
            (400, "malformed_json", "invalid type: string \"high\""),
        ),
        // ---- Queue specs ----
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
        // ---- Malformed JSON ----
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
        // ---- Receive ----
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
        // ---- Settling ----
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
        // ---- Dead letters ----
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
        // ---- Subscriptions and filters ----
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
        // ---- Topics and consumer groups ----
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

/// Runs one case; `Err` says how the answer differed from the expectation.
async fn run(s: &Running, f: &Fixture, case: &Case) -> Result<(), String> {
    match (&case.call, &case.expect) {
        (Call::Http { method, path, body }, Expect::Http(status, code, text)) => {
            let reply = s.send(method, path, body).await;
            let parsed: Value = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
            let error = parsed["error"].as_str().unwrap_or_default();
            if reply.status != *status || parsed["code"] != *code || !error.contains(text) {
                return Err(format!(
                    "expected {status} {code:?} containing {text:?}, got {} {}",
                    reply.status,
                    reply.text()
                ));
            }
        }
        (Call::Grpc(call), Expect::Grpc(code, text)) => match call(f.clone()).await {
            Ok(()) => return Err(format!("expected {code:?}, the call succeeded")),
            Err(status) if status.code() != *code || !status.message().contains(text) => {
                return Err(format!(
                    "expected {code:?} containing {text:?}, got {:?}: {}",
                    status.code(),
                    status.message()
                ));
            }
            Err(_) => {}
        },
        _ => unreachable!("a case's call and expectation are of one API"),
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hostile_input_gets_its_exact_error_and_changes_nothing() {
    let s = Running::start().await;
    let f = fixture(&s).await;
    let cases = catalogue(&f);
    assert!(
        cases.len() >= 40,
        "the catalogue holds {} cases",
        cases.len()
    );
    let mut names = std::collections::HashSet::new();
    for case in &cases {
        assert!(names.insert(case.name), "case {} twice", case.name);
    }

    let mut before = snapshot(&s, &f).await;
    let mut failures = Vec::new();
    for case in &cases {
        if let Err(problem) = run(&s, &f, case).await {
            failures.push(format!("{}: {problem}", case.name));
        }
        let after = snapshot(&s, &f).await;
        if after != before {
            failures.push(format!(
                "{}: changed the state\nbefore: {before}\nafter:  {after}",
                case.name
            ));
            // Later cases are judged against the changed state, so that one case's damage
            // is reported once rather than blamed on every case after it.
            before = after;
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );

    // What was ready is exactly what a valid receive gets now; the held lease still holds.
    let got = s
        .post(
            "/v1/queues/orders/receive",
            json!({"consumer": "after", "max": 10}),
        )
        .await;
    let ready: Vec<(String, String)> = got["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            assert_eq!(d["delivery"], 1, "never delivered before: {d}");
            (
                d["id"].as_str().unwrap().to_owned(),
                d["payload"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(ready, f.ready);
    let acked = s
        .post(
            &format!("/v1/queues/orders/messages/{}/ack", f.held_seq),
            json!({"token": f.held_token}),
        )
        .await;
    assert_eq!(acked["already_settled"], false);
    s.stop().await;
}

/// The other side of the limits: a value exactly at each one is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inputs_exactly_at_the_limits_are_accepted() {
    use base64::Engine as _;
    let s = Running::start().await;
    let longest = "q".repeat(196); // and its derived dead-letter queue, 200 bytes
    s.post("/v1/queues", json!({"name": longest})).await;
    let names = s.get("/v1/queues").await["names"].clone();
    assert_eq!(names, json!([longest, format!("{longest}.dlq")]));
    s.post(
        "/v1/queues",
        json!({"name": "edge", "spec": {"priority_levels": 10}}),
    )
    .await;
    let f = Fixture {
        channel: s.channel.clone(),
        held_seq: 0,
        held_token: 0,
        settled_seq: 0,
        settled_token: 0,
        ready: Vec::new(),
    };
    let mut big = message(vec![b'g'; MIB]);
    big.headers = (0..64).map(|i| (format!("h{i}"), "v".to_owned())).collect();
    big.headers.insert("n".repeat(256), "v".repeat(8 << 10));
    big.headers.remove("h0");
    big.key = Some(vec![b'k'; 4 << 10].into());
    big.priority = 255;
    f.publisher()
        .publish(v1::PublishRequest {
            queue: "edge".into(),
            messages: vec![big],
        })
        .await
        .expect("a message at every size limit is taken over gRPC");
    let exact = base64::engine::general_purpose::STANDARD.encode(vec![b'h'; MIB]);
    s.post(
        "/v1/queues/edge/messages",
        json!({"messages": [{"payload_base64": exact}]}),
    )
    .await;
    let day_ms: u64 = 24 * 3600 * 1000;
    s.post(
        "/v1/queues/edge/messages",
        json!({"messages": [
            {"payload": "later", "delay_ms": 90 * day_ms},
            {"payload": "kept", "ttl_ms": 90 * day_ms},
        ]}),
    )
    .await;

    let got = s
        .post(
            "/v1/queues/edge/receive",
            json!({"consumer": "c", "max": 1000, "lease_ms": 12 * 3600 * 1000}),
        )
        .await;
    let got = got["deliveries"].as_array().unwrap();
    assert_eq!(got.len(), 3, "the delayed one waits 90 days");
    assert_eq!(got[0]["payload"].as_str().unwrap().len(), MIB);
    assert_eq!(got[0]["headers"].as_object().unwrap().len(), 64);
    assert_eq!(got[0]["priority"], 255);
    assert_eq!(got[1]["payload"].as_str().unwrap().len(), MIB);
    assert_eq!(got[2]["payload"], "kept");
    let (seq, token) = (got[2]["seq"].clone(), got[2]["token"].clone());
    s.post(
        &format!("/v1/queues/edge/messages/{seq}/extend"),
        json!({"token": token, "by_ms": 12 * 3600 * 1000}),
    )
    .await;
    s.post(
        &format!("/v1/queues/edge/messages/{seq}/nack"),
        json!({"token": token, "delay_ms": 90 * day_ms}),
    )
    .await;
    s.stop().await;
}

/// The rule for deleting a queue with leased messages: allowed, and the leases end with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_queue_with_leased_messages_is_allowed_and_ends_the_leases() {
    let s = Running::start().await;
    s.post("/v1/queues", json!({"name": "jobs"})).await;
    s.post(
        "/v1/queues/jobs/messages",
        json!({"messages": [{"payload": "a"}, {"payload": "b"}]}),
    )
    .await;
    let got = s
        .post("/v1/queues/jobs/receive", json!({"consumer": "c"}))
        .await;
    let (seq, token) = (
        got["deliveries"][0]["seq"].clone(),
        got["deliveries"][0]["token"].clone(),
    );
    assert_eq!(s.get("/v1/queues/jobs").await["stats"]["in_flight"], 1);

    let deleted = s.send("DELETE", "/v1/queues/jobs", b"").await;
    assert_eq!(deleted.status, 204, "{}", deleted.text());
    let ack = s
        .send(
            "POST",
            &format!("/v1/queues/jobs/messages/{seq}/ack"),
            json!({"token": token}).to_string().as_bytes(),
        )
        .await;
    assert_eq!(ack.status, 404, "{}", ack.text());
    assert_eq!(ack.json()["code"], "queue_not_found");
    // Dead letters are evidence: the dead-letter queue stays, and got nothing.
    assert_eq!(s.get("/v1/queues").await["names"], json!(["jobs.dlq"]));
    assert_eq!(s.get("/v1/queues/jobs.dlq").await["stats"]["published"], 0);
    // A queue created again under the name starts empty: nothing of the old one leaks.
    s.post("/v1/queues", json!({"name": "jobs"})).await;
    let stats = s.get("/v1/queues/jobs").await["stats"].clone();
    assert_eq!(
        (stats["published"].clone(), stats["ready"].clone()),
        (json!(0), json!(0))
    );
    s.stop().await;
}
