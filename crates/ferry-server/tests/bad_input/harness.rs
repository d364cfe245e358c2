//! The server, the fixture, the state snapshot and the shape of a case.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;

use ferry_proto::v1;
use serde_json::{Value, json};
use tonic::transport::Channel;
use tonic::{Code, Status};

pub const MIB: usize = 1 << 20;

pub use crate::support::{GrpcClients, Served as Running};

impl Running {
    pub async fn start() -> Running {
        let (broker, dir) = crate::support::fresh_broker().await;
        Running::serve(broker, Some(dir), |server| server).await
    }

    pub async fn send(&self, method: &str, path: &str, body: &[u8]) -> Reply {
        request(self.http, method, path, body).await
    }

    pub async fn get(&self, path: &str) -> Value {
        let reply = self.send("GET", path, b"").await;
        assert_eq!(reply.status, 200, "GET {path}: {}", reply.text());
        reply.json()
    }

    pub async fn post(&self, path: &str, body: Value) -> Value {
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
}

pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One HTTP/1.1 exchange on a connection of its own, sending exactly `body`'s bytes (some
/// cases send bytes that are not UTF-8).
pub async fn request(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> Reply {
    let reply = crate::support::exchange(addr, "", method, path, body).await;
    Reply {
        status: reply.status,
        body: reply.body,
    }
}

/// What the fixture left where: the in-flight delivery, a settled one, what is ready.
#[derive(Clone)]
pub struct Fixture {
    pub channel: Channel,
    pub held_seq: u64,
    pub held_token: u64,
    pub settled_seq: u64,
    pub settled_token: u64,
    pub ready: Vec<(String, String)>,
}

impl GrpcClients for Fixture {
    fn grpc_channel(&self) -> Channel {
        self.channel.clone()
    }
}

/// Builds the fixture: `orders` (lease 10 min, so nothing expires during the test) with one
/// acked message, one rejected into `orders.dlq`, one in flight and two ready; topic
/// `events` (2 partitions) with one record and subscription `events-sub`.
pub async fn fixture(s: &Running) -> Fixture {
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
pub async fn snapshot(s: &Running, f: &Fixture) -> Value {
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

pub type GrpcCall =
    Box<dyn Fn(Fixture) -> Pin<Box<dyn Future<Output = Result<(), Status>> + Send>>>;

pub enum Call {
    Http {
        method: &'static str,
        path: String,
        body: Vec<u8>,
    },
    Grpc(GrpcCall),
}

pub enum Expect {
    /// Status code, the `code` field of the JSON error body, a substring of its `error`.
    Http(u16, &'static str, &'static str),
    /// The gRPC code and a substring of the status message.
    Grpc(Code, &'static str),
}

pub struct Case {
    pub name: &'static str,
    pub call: Call,
    pub expect: Expect,
}

pub fn http(
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

pub fn post(
    name: &'static str,
    path: impl Into<String>,
    body: Value,
    expect: (u16, &'static str, &'static str),
) -> Case {
    http(name, "POST", path, body.to_string(), expect)
}

pub fn grpc<F, Fut>(name: &'static str, code: Code, message: &'static str, call: F) -> Case
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

pub fn message(payload: impl Into<Vec<u8>>) -> v1::OutgoingMessage {
    v1::OutgoingMessage {
        payload: payload.into().into(),
        ..Default::default()
    }
}

pub async fn publish_grpc(f: Fixture, m: v1::OutgoingMessage) -> Result<(), Status> {
    f.publisher()
        .publish(v1::PublishRequest {
            batch_id: None,
            queue: "orders".into(),
            messages: vec![message("fine"), m],
        })
        .await
        .map(drop)
}

pub async fn create_queue_grpc(
    f: Fixture,
    name: String,
    spec: v1::QueueSpec,
) -> Result<(), Status> {
    f.admin()
        .create_queue(v1::CreateQueueRequest {
            name,
            spec: Some(spec),
        })
        .await
        .map(drop)
}

pub fn publish_http(messages: Value) -> Vec<u8> {
    json!({"messages": [{"payload": "fine"}, messages]})
        .to_string()
        .into_bytes()
}

pub fn retry(max_deliveries: u32) -> Option<v1::RetryPolicy> {
    Some(v1::RetryPolicy {
        max_deliveries: Some(max_deliveries),
        backoff: None,
    })
}

pub const PUBLISH: &str = "/v1/queues/orders/messages";

/// Runs one case; `Err` says how the answer differed from the expectation.
pub async fn run(s: &Running, f: &Fixture, case: &Case) -> Result<(), String> {
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
