//! The web console's API over a real socket: the overview's rows, paging and alerts, the
//! sampler's history, the event stream, browsing without taking, redrive jobs, purge with
//! its confirmation, offset resets, the topology, and what a token without the
//! permission sees (nothing).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod support;

use support::{Served, grant};

const ROOT: &str = "root-5c1e9a7b3d2f4e6a8b0c1d2e3f4a5b6c";
const CONSUMER: &str = "consumer-8e2d4c6b0a1f3e5d7c9b1a2f4e6d8c0b";
const ORDERS_ADMIN: &str = "orders-admin-1a3c5e7f9b2d4f6a8c0e1b3d5f7a9c2e";

struct Reply {
    status: u16,
    head: String,
    body: Value,
}

/// One HTTP exchange with `token`, the body JSON (or `null` when empty).
async fn call(
    addr: SocketAddr,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Reply {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let raw = support::exchange(addr, &auth, method, path, body.as_bytes()).await;
    let body = if raw.body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&raw.body).unwrap_or_else(|e| {
            panic!(
                "{method} {path}: not JSON ({e}): {}",
                String::from_utf8_lossy(&raw.body)
            )
        })
    };
    Reply {
        status: raw.status,
        head: raw.head,
        body,
    }
}

/// A test's server: the HTTP address and the token its calls carry.
struct Console {
    served: Served,
    token: Option<&'static str>,
}

impl Console {
    async fn start(
        configure: impl FnOnce(ferry_server::Server) -> ferry_server::Server,
    ) -> Console {
        let (broker, dir) = support::fresh_broker().await;
        Console {
            served: Served::serve(broker, Some(dir), configure).await,
            token: None,
        }
    }

    fn addr(&self) -> SocketAddr {
        self.served.http
    }

    async fn send(&self, method: &str, path: &str, body: Option<Value>) -> Reply {
        call(self.addr(), self.token, method, path, body).await
    }

    async fn get(&self, path: &str) -> Value {
        let r = self.send("GET", path, None).await;
        assert_eq!(r.status, 200, "GET {path}: {}", r.body);
        r.body
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let r = self.send("POST", path, Some(body)).await;
        assert!(
            (200..300).contains(&r.status),
            "POST {path}: {} {}",
            r.status,
            r.body
        );
        r.body
    }

    async fn create_queue(&self, name: &str, spec: Value) {
        self.post("/v1/queues", json!({"name": name, "spec": spec}))
            .await;
    }

    async fn publish(&self, queue: &str, messages: Value) {
        self.post(
            &format!("/v1/queues/{queue}/messages"),
            json!({ "messages": messages }),
        )
        .await;
    }

    /// Receives up to `max` from `queue`.
    async fn receive(&self, queue: &str, max: u32) -> Vec<Value> {
        let got = self
            .post(
                &format!("/v1/queues/{queue}/receive"),
                json!({"consumer": "w1", "max": max}),
            )
            .await;
        got["deliveries"].as_array().unwrap().clone()
    }

    /// Publishes `payloads` to `queue` and rejects each into its dead-letter queue.
    async fn dead_letter(&self, queue: &str, payloads: &[&str]) {
        let messages: Vec<Value> = payloads.iter().map(|p| json!({"payload": p})).collect();
        self.publish(queue, Value::Array(messages)).await;
        for d in self.receive(queue, payloads.len() as u32).await {
            let path = format!("/v1/queues/{queue}/messages/{}/reject", d["seq"]);
            self.post(&path, json!({"token": d["token"], "reason": "bad"}))
                .await;
        }
    }

    async fn stats(&self, queue: &str) -> Value {
        self.get(&format!("/v1/queues/{queue}")).await["stats"].clone()
    }

    /// Polls a redrive job until it is no longer running.
    async fn finished_job(&self, id: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let job = self.get(&format!("/v1/redrive-jobs/{id}")).await;
            if job["state"] != "running" {
                return job;
            }
            assert!(Instant::now() < deadline, "job still running: {job}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn names(rows: &Value) -> Vec<String> {
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_owned())
        .collect()
}

fn payloads(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m["payload"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn the_overview_pages_filters_and_raises_dead_letters_old_messages_and_group_lag() {
    let c = Console::start(|s| {
        s.console_age_alert(Duration::from_millis(1))
            .console_lag_alert(Duration::from_millis(1))
    })
    .await;
    c.create_queue("orders", json!({})).await;
    c.create_queue("billing", json!({})).await;
    c.publish("orders", json!([{"payload": "a"}, {"payload": "b"}]))
        .await;
    c.dead_letter("billing", &["poison"]).await;
    c.post(
        "/v1/topics",
        json!({"name": "events", "spec": {"partitions": 2}}),
    )
    .await;
    c.post(
        "/v1/subscriptions",
        json!({"name": "events.audit", "spec": {"topic": "events"}}),
    )
    .await;
    c.post(
        "/v1/topics/events/messages",
        json!({"messages": [{"payload": "1"}, {"payload": "2"}, {"payload": "3"}]}),
    )
    .await;
    c.post(
        "/v1/topics/events/groups/billing/offsets",
        json!({"to": "earliest"}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(20)).await;

    let o = c.get("/v1/console/overview").await;
    assert_eq!(o["age_alert_ms"], 1);
    assert_eq!(o["sample_interval_ms"], 10_000);
    assert_eq!(
        names(&o["queues"]["rows"]),
        [
            "billing",
            "billing.dlq",
            "events.audit",
            "events.audit.dlq",
            "orders",
            "orders.dlq"
        ],
        "sorted by name"
    );
    let rows = o["queues"]["rows"].as_array().unwrap();
    let billing = &rows[0];
    assert_eq!(billing["dead_letter_queue"], "billing.dlq");
    assert_eq!(billing["dlq_depth"], 1);
    assert_eq!(billing["ready"], 0);
    assert_eq!(billing["oldest_ready_age_ms"], Value::Null);
    assert_eq!(billing["alerts"], json!(["dead_letters"]));
    let billing_dlq = &rows[1];
    assert_eq!(billing_dlq["is_dead_letter_queue"], true);
    assert_eq!(billing_dlq["dead_letter_queue"], Value::Null);
    assert_eq!(
        billing_dlq["dlq_depth"], 1,
        "a dead-letter queue's own depth"
    );
    let orders = &rows[4];
    assert_eq!(orders["ready"], 2);
    assert_eq!(orders["dlq_depth"], 0);
    assert!(orders["oldest_ready_age_ms"].as_i64().unwrap() >= 1);
    assert_eq!(orders["alerts"], json!(["old_messages"]));
    // The sampler's first tick may come before or after the queue was made (it runs at
    // start, on a loaded machine possibly late); either way no rate exists before two.
    assert_eq!(orders["publish_rate"], 0.0, "no rate before two samples");
    let history = orders["publish_history"].as_array().unwrap();
    assert!(
        history.len() <= 1 && history.iter().all(|r| r == 0.0),
        "{history:?}"
    );

    let events = &o["topics"]["rows"][0];
    assert_eq!(events["name"], "events");
    assert_eq!(events["partitions"], 2);
    assert_eq!(events["records"], 3);
    assert_eq!(events["subscriptions"], json!(["events.audit"]));
    assert_eq!(events["groups"][0]["group"], "billing");
    assert_eq!(events["groups"][0]["lag_records"], 3);
    assert!(events["groups"][0]["lag_ms"].as_i64().unwrap() >= 1);
    assert_eq!(events["alerts"], json!(["group_lag"]));

    let page = c
        .get("/v1/console/overview?name=ORDERS&queue_offset=1&limit=1")
        .await;
    assert_eq!(page["queues"]["total"], 2);
    assert_eq!(page["queues"]["offset"], 1);
    assert_eq!(names(&page["queues"]["rows"]), ["orders.dlq"]);
    assert_eq!(page["topics"]["total"], 0);
    for bad in ["limit=0", "limit=501", "nope=1"] {
        let r = c
            .send("GET", &format!("/v1/console/overview?{bad}"), None)
            .await;
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
    c.served.stop().await;
}

#[tokio::test]
async fn the_sampler_keeps_a_history_with_rates_and_the_event_stream_says_when() {
    let c = Console::start(|s| s.console_sample_interval(Duration::from_millis(100))).await;
    c.create_queue("jobs", json!({})).await;
    c.post("/v1/topics", json!({"name": "clicks"})).await;

    // The stream is open before the first sample it should report.
    let mut stream = TcpStream::connect(c.addr()).await.unwrap();
    stream
        .write_all(b"GET /v1/console/events HTTP/1.1\r\nHost: ferry\r\n\r\n")
        .await
        .unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(10);
    while !seen.contains("event: sample") {
        let n = tokio::time::timeout_at(deadline.into(), stream.read(&mut buf))
            .await
            .expect("a sample event within 10 s")
            .unwrap();
        assert!(n > 0, "the stream ended: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    assert!(seen.contains("text/event-stream"), "{seen}");
    assert!(seen.contains("data: {\"at_ms\":"), "{seen}");

    for i in 0..10 {
        c.publish("jobs", json!([{"payload": format!("m{i}")}]))
            .await;
        c.post(
            "/v1/topics/clicks/messages",
            json!({"messages": [{"payload": "c"}]}),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    tokio::time::sleep(Duration::from_millis(250)).await;
    let h = c.get("/v1/console/queues/jobs/history").await;
    assert_eq!(h["sample_interval_ms"], 100);
    let samples = h["samples"].as_array().unwrap();
    assert!(samples.len() >= 3, "{h}");
    assert!(
        samples
            .windows(2)
            .all(|w| w[0]["at_ms"].as_i64() < w[1]["at_ms"].as_i64()),
        "oldest first: {h}"
    );
    assert_eq!(samples.last().unwrap()["ready"], 10);
    assert!(
        samples
            .iter()
            .any(|s| s["publish_rate"].as_f64().unwrap() > 0.0),
        "publishes between samples show as a rate: {h}"
    );
    let t = c.get("/v1/console/topics/clicks/history").await;
    let topic_samples = t["samples"].as_array().unwrap();
    assert_eq!(topic_samples.last().unwrap()["records"], 10);
    assert!(
        topic_samples
            .iter()
            .any(|s| s["publish_rate"].as_f64().unwrap() > 0.0),
        "{t}"
    );
    let o = c.get("/v1/console/overview").await;
    let jobs = &o["queues"]["rows"][0];
    assert_eq!(jobs["name"], "jobs");
    assert!(!jobs["publish_history"].as_array().unwrap().is_empty());
    assert!(jobs["publish_history"].as_array().unwrap().len() <= 30);

    let missing = c.send("GET", "/v1/console/queues/nope/history", None).await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.body["code"], "queue_not_found");
    // The stream ends with the server: shutdown does not wait on it (`stop` fails the test
    // after ten seconds), and the client sees the end.
    c.served.stop().await;
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the event stream outlived the server");
}

#[tokio::test]
async fn browsing_by_key_and_header_takes_nothing_and_masks_credentials() {
    let c = Console::start(|s| s).await;
    c.create_queue("q", json!({})).await;
    c.publish(
        "q",
        json!([
            {"payload": "a", "key": "k1", "headers": {"tenant": "x", "authorization": "secret"}},
            {"payload": "b", "key": "k2", "headers": {"tenant": "y"}},
            {"payload": "c", "key": "k1", "headers": {"tenant": "y"}},
            {"payload": "d", "key": "k10"},
            {"payload": "e"}
        ]),
    )
    .await;
    let leased = c.receive("q", 1).await;
    assert_eq!(payloads(&leased), ["a"]);

    let by_key = c.get("/v1/queues/q/messages?key=k1").await;
    let messages = by_key["messages"].as_array().unwrap();
    assert_eq!(payloads(messages), ["a", "c"], "exactly k1");
    assert_eq!(messages[0]["in_flight"], true);
    assert_eq!(messages[1]["in_flight"], false);
    assert_eq!(messages[0]["headers"]["authorization"], "***");
    assert_eq!(by_key["more"], false);
    assert_eq!(by_key["next_after_seq"], messages[1]["seq"]);

    let by_header = c
        .get("/v1/queues/q/messages?header_name=tenant&header_value=y&max=1")
        .await;
    assert_eq!(payloads(by_header["messages"].as_array().unwrap()), ["b"]);
    assert_eq!(by_header["more"], true);
    let next = by_header["next_after_seq"].as_u64().unwrap();
    let rest = c
        .get(&format!(
            "/v1/queues/q/messages?header_name=tenant&header_value=y&after_seq={next}"
        ))
        .await;
    assert_eq!(payloads(rest["messages"].as_array().unwrap()), ["c"]);

    let masked = c
        .send(
            "GET",
            "/v1/queues/q/messages?header_name=authorization&header_value=secret",
            None,
        )
        .await;
    assert_eq!(masked.status, 400);
    assert_eq!(masked.body["code"], "redacted_header");
    let too_many = c.send("GET", "/v1/queues/q/messages?max=1001", None).await;
    assert_eq!(too_many.status, 400);

    let stats = c.stats("q").await;
    assert_eq!(
        (stats["ready"].as_u64(), stats["in_flight"].as_u64()),
        (Some(4), Some(1))
    );
    let rest = c.receive("q", 10).await;
    assert_eq!(rest.len(), 4);
    assert!(
        rest.iter().all(|d| d["delivery"] == 1),
        "browsing counted no delivery"
    );
    c.served.stop().await;
}

#[tokio::test]
async fn redrive_jobs_move_the_selection_or_everything_and_end_done() {
    let c = Console::start(|s| s).await;
    c.create_queue("orders", json!({})).await;
    c.dead_letter("orders", &["a", "b", "c", "d", "e"]).await;
    let letters = c.get("/v1/queues/orders.dlq/dead-letters").await;
    let seqs: Vec<u64> = letters["letters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs.len(), 5);

    let started = c
        .send(
            "POST",
            "/v1/queues/orders.dlq/redrive-jobs",
            Some(json!({"seqs": [seqs[1], seqs[3]], "rate_per_sec": 0})),
        )
        .await;
    assert_eq!(started.status, 202, "{}", started.body);
    assert_eq!(started.body["state"], "running");
    assert_eq!(started.body["matched"], 2);
    assert_eq!(started.body["moved"], 0);
    assert_eq!(started.body["dead_letter_queue"], "orders.dlq");
    assert_eq!(started.body["target"], Value::Null);
    let id = started.body["id"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 26, "a ULID");
    let job = c.finished_job(&id).await;
    assert_eq!(job["state"], "done", "{job}");
    assert_eq!(job["moved"], 2);
    assert_eq!(job["error"], Value::Null);
    assert!(job["finished_at_ms"].as_i64().unwrap() >= job["started_at_ms"].as_i64().unwrap());
    assert_eq!(payloads(&c.receive("orders", 10).await), ["b", "d"]);
    assert_eq!(c.stats("orders.dlq").await["ready"], 3);

    let all = c
        .post("/v1/queues/orders.dlq/redrive-jobs", json!({}))
        .await;
    assert_eq!(all["matched"], 3);
    let all_id = all["id"].as_str().unwrap().to_owned();
    assert_eq!(c.finished_job(&all_id).await["moved"], 3);
    assert_eq!(c.stats("orders.dlq").await["ready"], 0);

    let list = c.get("/v1/redrive-jobs").await;
    let ids: Vec<&str> = list["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [all_id.as_str(), id.as_str()], "newest first");

    let empty = c
        .send(
            "POST",
            "/v1/queues/orders.dlq/redrive-jobs",
            Some(json!({"seqs": []})),
        )
        .await;
    assert_eq!(empty.status, 400);
    let not_dlq = c
        .send("POST", "/v1/queues/orders/redrive-jobs", Some(json!({})))
        .await;
    assert_eq!(not_dlq.status, 409, "{}", not_dlq.body);
    assert_eq!(not_dlq.body["code"], "not_a_dead_letter_queue");
    let unknown = c
        .send("GET", "/v1/redrive-jobs/01ARZ3NDEKTSV4RRFFQ69G5FAV", None)
        .await;
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.body["code"], "redrive_job_not_found");
    c.served.stop().await;
}

#[tokio::test]
async fn a_rate_limited_redrive_job_takes_at_least_as_long_as_its_rate_says() {
    let c = Console::start(|s| s).await;
    c.create_queue("orders", json!({})).await;
    c.create_queue("retry", json!({})).await;
    let payloads: Vec<String> = (0..12).map(|i| format!("m{i}")).collect();
    let payloads: Vec<&str> = payloads.iter().map(String::as_str).collect();
    c.dead_letter("orders", &payloads).await;

    let started = Instant::now();
    let job = c
        .post(
            "/v1/queues/orders.dlq/redrive-jobs",
            json!({"filter": {"reason": "rejected"}, "target": "retry", "rate_per_sec": 20}),
        )
        .await;
    assert_eq!(job["matched"], 12);
    let job = c.finished_job(job["id"].as_str().unwrap()).await;
    let took = started.elapsed();
    assert_eq!(job["state"], "done");
    assert_eq!(job["moved"], 12);
    // 12 letters at 20 a second: 11 gaps of 50 ms.
    assert!(took >= Duration::from_millis(500), "took {took:?}");
    assert_eq!(c.stats("retry").await["ready"], 12);
    c.served.stop().await;
}

#[tokio::test]
async fn purge_refuses_a_wrong_confirmation_and_then_deletes_everything() {
    let c = Console::start(|s| s).await;
    c.create_queue("q", json!({})).await;
    c.publish(
        "q",
        json!([{"payload": "a"}, {"payload": "b"}, {"payload": "c"}]),
    )
    .await;
    c.receive("q", 1).await;
    for body in [
        json!({"confirm": "Q"}),
        json!({}),
        json!({"confirm": "other"}),
    ] {
        let r = c.send("POST", "/v1/queues/q/purge", Some(body)).await;
        assert_eq!(r.status, 400, "{}", r.body);
        assert_eq!(r.body["code"], "confirmation_mismatch");
    }
    let stats = c.stats("q").await;
    assert_eq!(
        (stats["ready"].as_u64(), stats["in_flight"].as_u64()),
        (Some(2), Some(1))
    );
    let purged = c.post("/v1/queues/q/purge", json!({"confirm": "q"})).await;
    assert_eq!(purged["purged"], 3);
    assert_eq!(c.stats("q").await["ready"], 0);
    let missing = c
        .send(
            "POST",
            "/v1/queues/nope/purge",
            Some(json!({"confirm": "nope"})),
        )
        .await;
    assert_eq!(missing.status, 404);
    c.served.stop().await;
}

#[tokio::test]
async fn an_offset_reset_to_earliest_sets_the_lag_back_and_latest_clears_it() {
    let c = Console::start(|s| s).await;
    c.post(
        "/v1/topics",
        json!({"name": "events", "spec": {"partitions": 2}}),
    )
    .await;
    c.post(
        "/v1/topics/events/messages",
        json!({"messages": [{"payload": "1"}, {"payload": "2"}, {"payload": "3"}, {"payload": "4"}]}),
    )
    .await;
    let lag = |g: &Value| -> u64 {
        g["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["lag_records"].as_u64().unwrap())
            .sum()
    };
    let latest = c
        .post(
            "/v1/topics/events/groups/g/offsets",
            json!({"to": "latest"}),
        )
        .await;
    assert_eq!(latest["group"], "g");
    assert_eq!(lag(&latest), 0);
    let earliest = c
        .post(
            "/v1/topics/events/groups/g/offsets",
            json!({"partition": null, "to": "earliest"}),
        )
        .await;
    assert_eq!(lag(&earliest), 4);
    assert_eq!(lag(&c.get("/v1/topics/events/groups/g").await), 4);
    let one = c
        .post(
            "/v1/topics/events/groups/g/offsets",
            json!({"partition": 0, "to": "latest"}),
        )
        .await;
    let p0 = &one["partitions"][0];
    assert_eq!(p0["lag_records"], 0);
    assert_eq!(
        lag(&one),
        earliest["partitions"][1]["lag_records"].as_u64().unwrap()
    );
    let at = c
        .post(
            "/v1/topics/events/groups/g/offsets",
            json!({"to": {"offset": 0}}),
        )
        .await;
    assert_eq!(lag(&at), 4);
    for bad in [
        json!({"to": "middle"}),
        json!({}),
        json!({"to": {"offset": 99}}),
    ] {
        let r = c
            .send(
                "POST",
                "/v1/topics/events/groups/g/offsets",
                Some(bad.clone()),
            )
            .await;
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
    assert_eq!(
        lag(&c.get("/v1/topics/events/groups/g").await),
        4,
        "unchanged"
    );
    c.served.stop().await;
}

#[tokio::test]
async fn the_topology_shows_dead_letter_and_subscription_edges_with_front_end_names() {
    let aliases = ferry_server::ConsoleAliases {
        kafka: true,
        aws: Some(ferry_server::AwsNames {
            queue_url_base: "http://127.0.0.1:4566".into(),
            account_id: "000000000000".into(),
            region: "us-east-1".into(),
        }),
    };
    let c = Console::start(|s| s.console_aliases(aliases)).await;
    c.create_queue("orders", json!({})).await;
    c.post("/v1/topics", json!({"name": "events"})).await;
    c.post(
        "/v1/subscriptions",
        json!({"name": "audit", "spec": {"topic": "events", "filter": "type = a"}}),
    )
    .await;
    let t = c.get("/v1/console/topology").await;
    let node = |id: &str| {
        t["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == id)
            .unwrap_or_else(|| panic!("no node {id}: {t}"))
            .clone()
    };
    let has_edge = |from: &str, to: &str, kind: &str| {
        t["edges"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["from"] == from && e["to"] == to && e["kind"] == kind)
    };
    assert_eq!(node("queue:orders")["kind"], "queue");
    assert_eq!(node("queue:orders.dlq")["kind"], "dead_letter_queue");
    assert!(
        has_edge("queue:orders", "queue:orders.dlq", "dead_letters"),
        "{t}"
    );
    assert_eq!(
        node("queue:orders")["aliases"],
        json!([{"protocol": "sqs", "name": "http://127.0.0.1:4566/000000000000/orders"}])
    );
    assert_eq!(
        node("topic:events")["aliases"],
        json!([
            {"protocol": "kafka", "name": "events"},
            {"protocol": "sns", "name": "arn:aws:sns:us-east-1:000000000000:events"}
        ])
    );
    let sub = node("subscription:audit");
    assert_eq!(sub["kind"], "subscription");
    assert!(sub["filter"].as_str().unwrap().contains("type"), "{sub}");
    assert!(
        has_edge("topic:events", "subscription:audit", "subscribes"),
        "{t}"
    );
    assert!(
        has_edge("subscription:audit", "queue:audit", "delivers"),
        "{t}"
    );
    assert!(
        has_edge("queue:audit", "queue:audit.dlq", "dead_letters"),
        "{t}"
    );
    c.served.stop().await;
}

#[tokio::test]
async fn a_token_without_the_permission_sees_neither_the_endpoints_nor_the_names() {
    let auth = ferry_server::AuthConfig {
        tokens: vec![
            grant(
                "root",
                ROOT,
                &["admin:#", "publish:#", "consume:#", "dlq:#"],
            ),
            grant("consumer", CONSUMER, &["consume:orders"]),
            grant("orders-admin", ORDERS_ADMIN, &["admin:orders"]),
        ],
    };
    let mut c = Console::start(|s| s.auth(auth)).await;
    c.token = Some(ROOT);
    c.create_queue("orders", json!({})).await;
    c.create_queue("secret", json!({})).await;
    c.post("/v1/topics", json!({"name": "hidden"})).await;
    c.dead_letter("orders", &["x"]).await;
    let job = c
        .post("/v1/queues/orders.dlq/redrive-jobs", json!({}))
        .await;
    let job_id = job["id"].as_str().unwrap().to_owned();
    c.finished_job(&job_id).await;

    let none = call(c.addr(), None, "GET", "/v1/console/overview", None).await;
    assert_eq!(none.status, 401);
    assert!(
        none.head
            .to_ascii_lowercase()
            .contains("www-authenticate: bearer")
    );
    let events = call(c.addr(), None, "GET", "/v1/console/events", None).await;
    assert_eq!(events.status, 401);

    c.token = Some(CONSUMER);
    let o = c.get("/v1/console/overview").await;
    assert_eq!(o["queues"]["total"], 0, "{o}");
    assert_eq!(o["topics"]["total"], 0, "{o}");
    let t = c.get("/v1/console/topology").await;
    assert_eq!(t, json!({"nodes": [], "edges": []}));
    assert_eq!(c.get("/v1/redrive-jobs").await, json!({"jobs": []}));
    for (method, path, body) in [
        ("GET", "/v1/console/queues/secret/history", None),
        ("GET", "/v1/console/topics/hidden/history", None),
        (
            "POST",
            "/v1/queues/secret/purge",
            Some(json!({"confirm": "secret"})),
        ),
        (
            "POST",
            "/v1/queues/orders.dlq/redrive-jobs",
            Some(json!({})),
        ),
        ("GET", "/v1/queues/secret/messages", None),
        ("GET", "/v1/queues/orders.dlq/messages", None),
        (
            "POST",
            "/v1/topics/hidden/groups/g/offsets",
            Some(json!({"to": "earliest"})),
        ),
        ("GET", &format!("/v1/redrive-jobs/{job_id}"), None),
    ] {
        let r = c.send(method, path, body).await;
        assert_eq!(r.status, 403, "{method} {path}: {}", r.body);
        assert_eq!(r.body["code"], "forbidden");
    }
    // What it may read, it may browse: the letter the job sent back.
    let browsed = c.get("/v1/queues/orders/messages").await;
    assert_eq!(payloads(browsed["messages"].as_array().unwrap()), ["x"]);

    c.token = Some(ORDERS_ADMIN);
    let o = c.get("/v1/console/overview").await;
    assert_eq!(names(&o["queues"]["rows"]), ["orders"]);
    assert_eq!(o["queues"]["rows"][0]["dlq_depth"], 0, "redriven");
    let t = c.get("/v1/console/topology").await;
    let ids: Vec<&str> = t["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["queue:orders"]);
    assert_eq!(
        t["edges"],
        json!([]),
        "the edge to a queue it may not see is left out"
    );
    c.served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_stays_fast_with_a_thousand_queues_and_a_hundred_thousand_dead_letters() {
    use ferry_broker::{DeadLetter, Durability, OutgoingMessage, QueueSpec};
    let c = Console::start(|s| s.console_sample_interval(Duration::from_millis(200))).await;
    let broker = &c.served.broker;
    let quick = QueueSpec {
        durability: Durability::None,
        ..QueueSpec::default()
    };
    broker.create_queue("orders", quick.clone()).await.unwrap();
    let plain = QueueSpec {
        dead_letter: DeadLetter::Disabled,
        ..quick
    };
    for i in 0..998 {
        broker
            .create_queue(&format!("q{i:04}"), plain.clone())
            .await
            .unwrap();
    }
    for _ in 0..100 {
        let batch = (0..1000)
            .map(|_| OutgoingMessage::new(&b"letter"[..]))
            .collect();
        broker.publish_batch("orders.dlq", batch).await.unwrap();
    }
    let started = Instant::now();
    let o = c.get("/v1/console/overview?limit=500").await;
    let first = started.elapsed();
    assert_eq!(o["queues"]["total"], 1000);
    assert_eq!(o["queues"]["rows"].as_array().unwrap().len(), 500);
    let orders = &o["queues"]["rows"][0];
    assert_eq!(orders["name"], "orders");
    assert_eq!(orders["dlq_depth"], 100_000);
    assert_eq!(orders["alerts"], json!(["dead_letters"]));
    // Stats only, never messages: well under a second even unoptimized, with the sampler
    // reading every queue beside it.
    assert!(first < Duration::from_secs(1), "took {first:?}");
    let started = Instant::now();
    let last = c.get("/v1/console/overview?queue_offset=990").await;
    assert_eq!(names(&last["queues"]["rows"]).len(), 10);
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "took {:?}",
        started.elapsed()
    );
    c.served.stop().await;
}
