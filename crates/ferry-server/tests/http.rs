//! The HTTP API over a real socket: the whole life of a message, retries into the
//! dead-letter queue and back, bad input answered with the right status and no change,
//! `/metrics` following what happens, and readiness through a shutdown.
//!
//! The client is a few lines of HTTP/1.1 over a `TcpStream` (`Connection: close`, read to
//! the end): lighter than a client crate, and it sends exactly the bytes a test means.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::net::TcpStream;

mod support;

use support::Served as Running;

struct Reply {
    status: u16,
    headers: String,
    body: Vec<u8>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

impl Running {
    async fn start() -> Running {
        Running::start_with(|s| s).await
    }

    async fn start_with(
        configure: impl FnOnce(ferry_server::Server) -> ferry_server::Server,
    ) -> Running {
        let (broker, dir) = support::fresh_broker().await;
        Running::serve(broker, Some(dir), configure).await
    }

    async fn send(&self, method: &str, path: &str, body: &[u8]) -> Reply {
        request(self.http, method, path, body).await
    }

    async fn get(&self, path: &str) -> Reply {
        self.send("GET", path, b"").await
    }

    async fn post(&self, path: &str, body: Value) -> Reply {
        self.send("POST", path, body.to_string().as_bytes()).await
    }

    async fn delete(&self, path: &str) -> Reply {
        self.send("DELETE", path, b"").await
    }

    async fn stats(&self, queue: &str) -> Value {
        let r = self.get(&format!("/v1/queues/{queue}")).await;
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()["stats"].clone()
    }
}

/// One HTTP/1.1 exchange on a connection of its own.
async fn request(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> Reply {
    let reply = support::exchange(addr, "", method, path, body).await;
    Reply {
        status: reply.status,
        headers: reply.head,
        body: reply.body,
    }
}

fn expect(reply: &Reply, status: u16, code: &str) {
    assert_eq!(reply.status, status, "{}", reply.text());
    assert!(
        reply
            .headers
            .to_ascii_lowercase()
            .contains("application/json"),
        "errors are JSON: {}",
        reply.headers
    );
    let body = reply.json();
    assert_eq!(body["code"], code, "{body}");
    assert!(!body["error"].as_str().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_goes_from_publish_through_receive_to_ack() {
    let s = Running::start().await;
    let created = s
        .post(
            "/v1/queues",
            json!({"name": "orders", "spec": {"lease_ms": 30000, "ordering": "shared"}}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    assert_eq!(
        s.get("/v1/queues").await.json()["names"],
        json!(["orders", "orders.dlq"])
    );
    let info = s.get("/v1/queues/orders").await.json();
    assert_eq!(info["spec"]["lease_ms"], 30000);
    assert_eq!(info["spec"]["dead_letter"], "derived");

    let published = s
        .post(
            "/v1/queues/orders/messages",
            json!({"messages": [
                {"payload": "first", "key": "k1", "headers": {"subject": "orders.eu"}},
                {"payload_base64": "AP8=", "priority": 0, "dedup_id": "d2"},
            ]}),
        )
        .await;
    assert_eq!(published.status, 200, "{}", published.text());
    assert_eq!(published.json()["ids"].as_array().unwrap().len(), 2);
    assert_eq!(s.stats("orders").await["ready"], 2);

    let got = s
        .post(
            "/v1/queues/orders/receive",
            json!({"consumer": "c1", "max": 10, "wait_ms": 1000}),
        )
        .await;
    assert_eq!(got.status, 200, "{}", got.text());
    let deliveries = got.json()["deliveries"].as_array().unwrap().clone();
    assert_eq!(deliveries.len(), 2);
    assert_eq!(deliveries[0]["payload"], "first");
    assert_eq!(deliveries[0]["key"], "k1");
    assert_eq!(deliveries[0]["headers"]["subject"], "orders.eu");
    assert_eq!(deliveries[0]["delivery"], 1);
    assert_eq!(deliveries[1]["payload_base64"], "AP8=");
    assert!(deliveries[1].get("payload").is_none());
    assert_eq!(s.stats("orders").await["in_flight"], 2);

    for d in &deliveries {
        let path = format!("/v1/queues/orders/messages/{}/ack", d["seq"]);
        let acked = s.post(&path, json!({"token": d["token"]})).await;
        assert_eq!(acked.status, 200, "{}", acked.text());
        assert_eq!(acked.json()["already_settled"], false);
    }
    let again = format!("/v1/queues/orders/messages/{}/ack", deliveries[0]["seq"]);
    let again = s
        .post(&again, json!({"token": deliveries[0]["token"]}))
        .await;
    assert_eq!(again.json()["already_settled"], true);
    let stats = s.stats("orders").await;
    assert_eq!(
        (stats["acked"].clone(), stats["in_flight"].clone()),
        (json!(2), json!(0))
    );

    // Nothing ready: a long poll waits, then answers empty.
    let empty = s
        .post(
            "/v1/queues/orders/receive",
            json!({"consumer": "c1", "wait_ms": 100}),
        )
        .await;
    assert_eq!(empty.json()["deliveries"], json!([]));

    assert_eq!(s.delete("/v1/queues/orders").await.status, 204);
    expect(&s.get("/v1/queues/orders").await, 404, "queue_not_found");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dedup_id_on_a_queue_without_a_dedup_window_is_refused_and_stores_nothing() {
    let s = Running::start().await;
    let created = s
        .post(
            "/v1/queues",
            json!({"name": "plain", "spec": {"dedup_window_ms": 0}}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let refused = s
        .post(
            "/v1/queues/plain/messages",
            json!({"messages": [{"payload": "a"}, {"payload": "b", "dedup_id": "d1"}]}),
        )
        .await;
    expect(&refused, 400, "dedup_id_without_window");
    assert!(
        refused.text().contains("without a dedup window"),
        "{}",
        refused.text()
    );
    assert_eq!(s.stats("plain").await["ready"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_feed_subscriptions_and_groups_are_described() {
    let s = Running::start().await;
    let t = s
        .post(
            "/v1/topics",
            json!({"name": "events", "spec": {"partitions": 2}}),
        )
        .await;
    assert_eq!(t.status, 201, "{}", t.text());
    assert_eq!(s.get("/v1/topics").await.json()["names"], json!(["events"]));
    assert_eq!(
        s.get("/v1/topics/events").await.json()["partitions"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let sub = s
        .post(
            "/v1/subscriptions",
            json!({"name": "eu-events", "spec": {
                "topic": "events", "filter": "subject ~ eu.*", "start": "earliest"
            }}),
        )
        .await;
    assert_eq!(sub.status, 201, "{}", sub.text());
    let published = s
        .post(
            "/v1/topics/events/messages",
            json!({"messages": [
                {"payload": "a", "key": "k", "headers": {"subject": "eu.paris"}},
                {"payload": "b", "key": "k", "headers": {"subject": "us.nyc"}},
            ]}),
        )
        .await;
    assert_eq!(published.status, 200, "{}", published.text());
    assert_eq!(published.json()["positions"].as_array().unwrap().len(), 2);

    let got = s
        .post(
            "/v1/queues/eu-events/receive",
            json!({"consumer": "c", "max": 10, "wait_ms": 2000}),
        )
        .await
        .json();
    assert_eq!(got["deliveries"].as_array().unwrap().len(), 1, "{got}");
    assert_eq!(got["deliveries"][0]["payload"], "a");
    let info = s.get("/v1/subscriptions/eu-events").await.json();
    assert_eq!(info["spec"]["topic"], "events");
    assert_eq!(info["queue"]["stats"]["in_flight"], 1);

    expect(
        &s.get("/v1/topics/events/groups/nobody").await,
        404,
        "group_not_found",
    );
    expect(
        &s.get("/v1/subscriptions/eu-events.dlq").await,
        409,
        "not_a_subscription",
    );
    expect(
        &s.delete("/v1/topics/events").await,
        409,
        "topic_has_subscriptions",
    );
    assert_eq!(s.delete("/v1/subscriptions/eu-events").await.status, 204);
    assert_eq!(s.delete("/v1/topics/events").await.status, 204);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacks_back_off_into_the_dead_letter_queue_and_redrive_brings_them_back() {
    let s = Running::start().await;
    let spec = json!({"retry": {"max_deliveries": 2, "backoff": {
        "base_ms": 50, "cap_ms": 50, "jitter": 0.0
    }}});
    let created = s
        .post("/v1/queues", json!({"name": "jobs", "spec": spec}))
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let batch = json!({"messages": [
        {"payload": "flaky", "headers": {"tenant": "a"}},
        {"payload": "bad-1", "headers": {"tenant": "b"}},
        {"payload": "bad-2", "headers": {"tenant": "b"}},
    ]});
    assert_eq!(s.post("/v1/queues/jobs/messages", batch).await.status, 200);

    let receive = json!({"consumer": "w", "max": 3, "wait_ms": 2000});
    let first = s
        .post("/v1/queues/jobs/receive", receive.clone())
        .await
        .json();
    let first = first["deliveries"].as_array().unwrap().clone();
    assert_eq!(first.len(), 3);
    let settle =
        |d: &Value, outcome: &str| format!("/v1/queues/jobs/messages/{}/{outcome}", d["seq"]);
    // The flaky one fails once: it comes back after the backoff.
    let nacked = s
        .post(
            &settle(&first[0], "nack"),
            json!({"token": first[0]["token"], "error": "timeout"}),
        )
        .await;
    assert_eq!(nacked.status, 200, "{}", nacked.text());
    assert!(nacked.json()["retry_at_ms"].as_i64().is_some());
    // The bad ones are refused outright.
    for d in &first[1..] {
        let r = s
            .post(
                &settle(d, "reject"),
                json!({"token": d["token"], "reason": "unparseable"}),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let extend = s
        .post(
            &settle(&first[1], "extend"),
            json!({"token": first[1]["token"], "by_ms": 1000}),
        )
        .await;
    expect(&extend, 412, "stale_lease");

    let second = s
        .post("/v1/queues/jobs/receive", receive.clone())
        .await
        .json();
    let second = second["deliveries"].as_array().unwrap().clone();
    assert_eq!(second.len(), 1, "{second:?}");
    assert_eq!(
        (second[0]["payload"].clone(), second[0]["delivery"].clone()),
        (json!("flaky"), json!(2))
    );
    let extended = s
        .post(
            &settle(&second[0], "extend"),
            json!({"token": second[0]["token"], "by_ms": 5000}),
        )
        .await;
    assert!(extended.json()["lease_until_ms"].as_i64().is_some());
    let last = s
        .post(
            &settle(&second[0], "nack"),
            json!({"token": second[0]["token"], "error": "timeout"}),
        )
        .await;
    assert_eq!(last.json()["dead_lettered"], "max_deliveries");

    // Peek: filtered by reason, by header, and paged.
    let all = s.get("/v1/queues/jobs.dlq/dead-letters").await.json();
    assert_eq!(all["letters"].as_array().unwrap().len(), 3, "{all}");
    let exhausted = s
        .get("/v1/queues/jobs.dlq/dead-letters?reason=max_deliveries")
        .await
        .json();
    let letters = exhausted["letters"].as_array().unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0]["payload"], "flaky");
    assert_eq!(letters[0]["dead_letter"]["origin_queue"], "jobs");
    assert_eq!(letters[0]["dead_letter"]["last_error"], "timeout");
    let tenant_b = s
        .get("/v1/queues/jobs.dlq/dead-letters?header_name=tenant&header_value=b&max=1")
        .await
        .json();
    assert_eq!(tenant_b["letters"].as_array().unwrap().len(), 1);
    let next = tenant_b["next_after_seq"].as_u64().unwrap();
    let page_2 = s
        .get(&format!(
            "/v1/queues/jobs.dlq/dead-letters?header_name=tenant&header_value=b&max=1&after_seq={next}"
        ))
        .await
        .json();
    assert_eq!(page_2["letters"][0]["payload"], "bad-2");
    let young = s
        .get("/v1/queues/jobs.dlq/dead-letters?older_than_ms=3600000")
        .await
        .json();
    assert_eq!(young["letters"], json!([]));
    expect(
        &s.get("/v1/queues/jobs.dlq/dead-letters?reason=bored").await,
        400,
        "out_of_range",
    );

    // Redrive the rejected ones, one of them only, back to their origin.
    let redriven = s
        .post(
            "/v1/queues/jobs.dlq/redrive",
            json!({"filter": {"reason": "rejected"}, "max_messages": 1, "rate_per_sec": 100}),
        )
        .await;
    assert_eq!(redriven.status, 200, "{}", redriven.text());
    assert_eq!(redriven.json()["moved"], 1);
    let back = s.post("/v1/queues/jobs/receive", receive).await.json();
    assert_eq!(back["deliveries"][0]["payload"], "bad-1", "{back}");
    assert_eq!(back["deliveries"][0]["delivery"], 1);
    assert_eq!(s.stats("jobs.dlq").await["redriven"], 1);
    assert_eq!(s.stats("jobs").await["dead_lettered"], 3);
    expect(
        &s.post("/v1/queues/jobs/redrive", json!({})).await,
        409,
        "not_a_dead_letter_queue",
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_with_its_status_and_changes_nothing() {
    let s = Running::start_with(|server| server.max_http_body(64 * 1024)).await;
    assert_eq!(s.post("/v1/queues", json!({"name": "q"})).await.status, 201);

    let broken = s
        .send("POST", "/v1/queues/q/messages", b"{\"messages\": [")
        .await;
    expect(&broken, 400, "malformed_json");
    let typo = s
        .post(
            "/v1/queues/q/messages",
            json!({"mesages": [{"payload": "x"}]}),
        )
        .await;
    expect(&typo, 400, "malformed_json");
    assert!(typo.json()["error"].as_str().unwrap().contains("mesages"));
    // One bad message refuses the whole batch.
    let one_bad = s
        .post(
            "/v1/queues/q/messages",
            json!({"messages": [{"payload": "ok"}, {"payload": "x", "priority": 999}]}),
        )
        .await;
    expect(&one_bad, 400, "out_of_range");
    assert!(
        one_bad.json()["error"]
            .as_str()
            .unwrap()
            .starts_with("messages[1]")
    );
    let bad_base64 = s
        .post(
            "/v1/queues/q/messages",
            json!({"messages": [{"payload_base64": "!!"}]}),
        )
        .await;
    expect(&bad_base64, 400, "bad_base64");
    let reserved = s
        .post(
            "/v1/queues/q/messages",
            json!({"messages": [{"payload": "x", "headers": {"ferry-x": "1"}}]}),
        )
        .await;
    expect(&reserved, 400, "reserved_header_name");
    let huge = json!({"messages": [{"payload": "x".repeat(100 * 1024)}]});
    expect(
        &s.post("/v1/queues/q/messages", huge).await,
        413,
        "body_too_large",
    );
    expect(
        &s.post(
            "/v1/queues/nope/messages",
            json!({"messages": [{"payload": "x"}]}),
        )
        .await,
        404,
        "queue_not_found",
    );
    let stats = s.stats("q").await;
    assert_eq!(
        (stats["published"].clone(), stats["ready"].clone()),
        (json!(0), json!(0))
    );

    expect(
        &s.post("/v1/queues", json!({"name": "q"})).await,
        409,
        "queue_exists",
    );
    expect(
        &s.post("/v1/queues", json!({"name": "bad name"})).await,
        400,
        "invalid_name_character",
    );
    expect(
        &s.post(
            "/v1/queues",
            json!({"name": "x", "spec": {"ordering": "random"}}),
        )
        .await,
        400,
        "malformed_json",
    );
    assert_eq!(
        s.get("/v1/queues").await.json()["names"],
        json!(["q", "q.dlq"])
    );

    assert_eq!(
        s.post(
            "/v1/queues/q/messages",
            json!({"messages": [{"payload": "x"}]})
        )
        .await
        .status,
        200
    );
    let got = s
        .post("/v1/queues/q/receive", json!({"consumer": "c"}))
        .await
        .json();
    let seq = &got["deliveries"][0]["seq"];
    let wrong = s
        .post(
            &format!("/v1/queues/q/messages/{seq}/ack"),
            json!({"token": 12345}),
        )
        .await;
    expect(&wrong, 412, "stale_lease");
    assert_eq!(s.stats("q").await["in_flight"], 1);
    expect(
        &s.post("/v1/queues/q/messages/x/ack", json!({"token": 1}))
            .await,
        400,
        "bad_path",
    );
    expect(
        &s.post("/v1/queues/q/messages/1/smash", json!({"token": 1}))
            .await,
        404,
        "no_route",
    );
    expect(&s.get("/v1/nothing").await, 404, "no_route");
    expect(
        &s.send("PUT", "/v1/queues", b"").await,
        405,
        "method_not_allowed",
    );

    // Limits the broker enforces: a full queue, an oversized payload.
    let limited = json!({"name": "small", "spec": {"length_limit": {
        "max_messages": 1, "overflow": "reject_publish"
    }}});
    assert_eq!(s.post("/v1/queues", limited).await.status, 201);
    let one = json!({"messages": [{"payload": "x"}]});
    assert_eq!(
        s.post("/v1/queues/small/messages", one.clone())
            .await
            .status,
        200
    );
    expect(
        &s.post("/v1/queues/small/messages", one).await,
        429,
        "queue_full",
    );
    let over_a_mib = json!({"messages": [{"payload": "x".repeat(2 << 20)}]});
    let s_big = Running::start().await;
    assert_eq!(
        s_big
            .post("/v1/queues", json!({"name": "big"}))
            .await
            .status,
        201
    );
    expect(
        &s_big.post("/v1/queues/big/messages", over_a_mib).await,
        413,
        "payload_too_large",
    );
    assert_eq!(s_big.stats("big").await["published"], 0);
    s_big.stop().await;
    expect(
        &s.post("/v1/queues/q/receive", json!({})).await,
        400,
        "malformed_json",
    );
    expect(
        &s.post("/v1/queues/q/receive", json!({"consumer": ""}))
            .await,
        400,
        "missing_field",
    );
    s.stop().await;
}

/// The value of the sample `series` (name and labels, exactly as rendered).
fn sample(scrape: &str, series: &str) -> Option<f64> {
    scrape.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        Some(value.parse().unwrap())
    })
}

/// Found by the `http_api` fuzz target (corpus file `regression-path-not-utf8`): a path
/// parameter whose percent-encoding is not UTF-8 was refused by axum in plain text, not in
/// the API's `{"error", "code"}` shape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_parameter_that_is_not_utf8_is_refused_in_the_api_error_shape() {
    let s = Running::start().await;
    let fuzzed = "/v1/queues/+q/messages/n%%%%%%%%%%%%%%%%%%%%%%%%%%%delay_ms%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%otanumber/ack";
    expect(
        &s.send("POST", fuzzed, b"{\"token\": 1}").await,
        400,
        "bad_path",
    );
    expect(&s.get("/v1/queues/%FF").await, 400, "bad_path");
    expect(
        &s.send("POST", "/v1/queues/%C3%28/messages", b"{\"messages\": []}")
            .await,
        400,
        "bad_path",
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_follow_publishes_deliveries_acks_and_dead_letters() {
    let s = Running::start().await;
    let spec = json!({"retry": {"max_deliveries": 1}});
    assert_eq!(
        s.post("/v1/queues", json!({"name": "m", "spec": spec}))
            .await
            .status,
        201
    );
    let before = s.get("/metrics").await;
    assert_eq!(before.status, 200);
    assert!(
        before.headers.contains("text/plain; version=0.0.4"),
        "{}",
        before.headers
    );
    let before = before.text();
    assert_eq!(
        sample(&before, r#"ferry_queue_published_total{queue="m"}"#),
        Some(0.0)
    );
    assert!(before.contains("# TYPE ferry_queue_ready gauge"));
    assert!(before.contains("# TYPE ferry_publish_to_ack_seconds histogram"));

    let batch = json!({"messages": [{"payload": "a"}, {"payload": "b"}, {"payload": "c"}]});
    assert_eq!(s.post("/v1/queues/m/messages", batch).await.status, 200);
    let mid = s.get("/metrics").await.text();
    assert_eq!(
        sample(&mid, r#"ferry_queue_published_total{queue="m"}"#),
        Some(3.0)
    );
    assert_eq!(sample(&mid, r#"ferry_queue_ready{queue="m"}"#), Some(3.0));
    assert_eq!(
        sample(
            &mid,
            r#"ferry_publish_duration_seconds_count{kind="queue",name="m"}"#
        ),
        Some(1.0)
    );

    let got = s
        .post("/v1/queues/m/receive", json!({"consumer": "c", "max": 3}))
        .await
        .json();
    let d = got["deliveries"].as_array().unwrap().clone();
    let settle =
        |i: usize, outcome: &str| format!("/v1/queues/m/messages/{}/{outcome}", d[i]["seq"]);
    s.post(&settle(0, "ack"), json!({"token": d[0]["token"]}))
        .await;
    s.post(
        &settle(1, "reject"),
        json!({"token": d[1]["token"], "reason": "no"}),
    )
    .await;
    s.post(&settle(2, "nack"), json!({"token": d[2]["token"]}))
        .await;

    let after = s.get("/metrics").await.text();
    let at =
        |series: &str| sample(&after, series).unwrap_or_else(|| panic!("{series} in\n{after}"));
    assert_eq!(at(r#"ferry_queue_delivered_total{queue="m"}"#), 3.0);
    assert_eq!(at(r#"ferry_queue_acked_total{queue="m"}"#), 1.0);
    assert_eq!(at(r#"ferry_queue_rejected_total{queue="m"}"#), 1.0);
    assert_eq!(at(r#"ferry_queue_dead_lettered_total{queue="m"}"#), 2.0);
    assert_eq!(at(r#"ferry_queue_in_flight{queue="m"}"#), 0.0);
    assert_eq!(
        at(r#"ferry_queue_dead_letter_depth{queue="m",dlq="m.dlq"}"#),
        2.0
    );
    assert_eq!(at(r#"ferry_queue_published_total{queue="m.dlq"}"#), 2.0);
    assert_eq!(at(r#"ferry_publish_to_ack_seconds_count{queue="m"}"#), 1.0);
    assert_eq!(at(r#"ferry_delivery_to_ack_seconds_count{queue="m"}"#), 1.0);
    assert_eq!(
        at(r#"ferry_delivery_to_ack_seconds_bucket{queue="m",le="+Inf"}"#),
        1.0
    );

    let redriven = s.post("/v1/queues/m.dlq/redrive", json!({})).await;
    assert_eq!(redriven.json()["moved"], 2);
    let redrive = s.get("/metrics").await.text();
    assert_eq!(
        sample(&redrive, r#"ferry_queue_redriven_total{queue="m.dlq"}"#),
        Some(2.0)
    );
    assert_eq!(
        sample(&redrive, r#"ferry_queue_ready{queue="m"}"#),
        Some(2.0)
    );

    // A subscription's lag: records it has not settled.
    s.post(
        "/v1/topics",
        json!({"name": "t", "spec": {"partitions": 1}}),
    )
    .await;
    s.post(
        "/v1/subscriptions",
        json!({"name": "t-sub", "spec": {"topic": "t"}}),
    )
    .await;
    let two = json!({"messages": [{"payload": "1"}, {"payload": "2"}]});
    assert_eq!(s.post("/v1/topics/t/messages", two).await.status, 200);
    let mut lag = None;
    for _ in 0..50 {
        let scrape = s.get("/metrics").await.text();
        lag = sample(
            &scrape,
            r#"ferry_subscription_lag_messages{subscription="t-sub",topic="t"}"#,
        );
        if lag == Some(2.0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(lag, Some(2.0));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_turns_503_when_shutdown_begins_and_serving_ends_after_the_drain() {
    let s = Running::start_with(|server| server.drain(Duration::from_millis(600))).await;
    assert_eq!(s.get("/healthz").await.status, 200);
    assert_eq!(s.get("/readyz").await.status, 200);
    assert!(TcpStream::connect(s.grpc).await.is_ok());

    let (http, grpc) = (s.http, s.grpc);
    let get = |path| request(http, "GET", path, b"");
    // `stop` checks that serving ends within ten seconds of the signal.
    let stopped = tokio::spawn(s.stop());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let draining = get("/readyz").await;
    assert_eq!(draining.status, 503, "{}", draining.text());
    assert_eq!(get("/healthz").await.status, 200);
    // Still serving the API while draining.
    assert_eq!(get("/v1/queues").await.status, 200);

    stopped.await.expect("serve returns after the drain");
    assert!(TcpStream::connect(http).await.is_err());
    assert!(TcpStream::connect(grpc).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_in_progress_is_answered_before_serve_returns() {
    let s = Running::start().await;
    assert_eq!(s.post("/v1/queues", json!({"name": "q"})).await.status, 201);
    let http = s.http;
    let poll = tokio::spawn(async move {
        let body = br#"{"consumer": "c", "wait_ms": 1500}"#;
        request(http, "POST", "/v1/queues/q/receive", body).await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stopping = Instant::now();
    s.stop().await;
    assert!(
        stopping.elapsed() >= Duration::from_millis(800),
        "serve returned before the poll in progress ended"
    );
    let answered = poll.await.unwrap();
    assert_eq!(answered.status, 200, "{}", answered.text());
    assert_eq!(answered.json()["deliveries"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_whose_client_left_gives_its_delivery_back_at_once() {
    let s = Running::start().await;
    let spec = json!({"lease_ms": 60000});
    assert_eq!(
        s.post("/v1/queues", json!({"name": "q", "spec": spec}))
            .await
            .status,
        201
    );
    let http = s.http;
    let gone = tokio::spawn(async move {
        let body = br#"{"consumer": "leaver", "wait_ms": 5000}"#;
        request(http, "POST", "/v1/queues/q/receive", body).await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    gone.abort();
    let _ = gone.await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let one = json!({"messages": [{"payload": "x"}]});
    assert_eq!(s.post("/v1/queues/q/messages", one).await.status, 200);
    // Not stuck under the leaver's 60 s lease: ready again for the next consumer.
    let got = s
        .post(
            "/v1/queues/q/receive",
            json!({"consumer": "stayer", "wait_ms": 3000}),
        )
        .await
        .json();
    assert_eq!(got["deliveries"][0]["payload"], "x", "{got}");
    // The leaver's poll took it first and gave it back: this is its second delivery.
    assert_eq!(got["deliveries"][0]["delivery"], 2, "{got}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_and_http_serve_one_broker_and_one_set_of_metrics() {
    use ferry_proto::v1;
    let s = Running::start().await;
    assert_eq!(
        s.post("/v1/queues", json!({"name": "both"})).await.status,
        201
    );
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", s.grpc))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut publisher = v1::publisher_client::PublisherClient::new(channel.clone());
    publisher
        .publish(v1::PublishRequest {
            batch_id: None,
            queue: "both".into(),
            messages: vec![v1::OutgoingMessage {
                payload: "from gRPC".into(),
                ..Default::default()
            }],
        })
        .await
        .unwrap();
    let mut consumer = v1::consumer_client::ConsumerClient::new(channel);
    let got = consumer
        .receive(v1::ReceiveRequest {
            queue: "both".into(),
            consumer: "c".into(),
            max: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let d = &got.deliveries[0];
    // Settled over HTTP, with the token gRPC handed out.
    let acked = s
        .post(
            &format!("/v1/queues/both/messages/{}/ack", d.seq),
            json!({"token": d.token}),
        )
        .await;
    assert_eq!(acked.status, 200, "{}", acked.text());
    let scrape = s.get("/metrics").await.text();
    let at = |series: &str| sample(&scrape, series).unwrap_or_else(|| panic!("{series}"));
    assert_eq!(at(r#"ferry_queue_delivered_total{queue="both"}"#), 1.0);
    assert_eq!(at(r#"ferry_queue_acked_total{queue="both"}"#), 1.0);
    assert_eq!(
        at(r#"ferry_publish_duration_seconds_count{kind="queue",name="both"}"#),
        1.0
    );
    assert_eq!(
        at(r#"ferry_publish_to_ack_seconds_count{queue="both"}"#),
        1.0
    );
    s.stop().await;
}
