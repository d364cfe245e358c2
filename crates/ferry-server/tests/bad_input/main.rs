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
//!   is normalised, so a look-alike (Cyrillic `о`, a decomposed `é`) never aliases a name.
//!   An empty or malformed name is refused as invalid wherever a name is taken — created,
//!   published to, received from — never answered "does not exist".
//! - A publish with a priority above the queue's top level is refused, not clamped.
//! - Unknown JSON fields are refused (`malformed_json`), as the HTTP API docs say.
//! - Out-of-range times and counts are refused, not clamped: a receive's lease, a lease
//!   extension, a nack's delay, a receive's `max`.
//! - Deleting a queue with leased messages is allowed (as SQS and RabbitMQ do by default);
//!   the leases end with the queue (see the test after the catalogue).

mod admin_cases;
mod harness;
mod message_cases;
#[path = "../support/mod.rs"]
mod support;

use ferry_proto::v1;
use serde_json::json;

use harness::*;

/// The whole catalogue, in the order it runs.
fn catalogue(f: &Fixture) -> Vec<Case> {
    [
        admin_cases::names(),
        message_cases::payloads(),
        message_cases::headers(),
        message_cases::times(),
        admin_cases::queue_specs(),
        admin_cases::malformed_json(),
        message_cases::receive(),
        message_cases::settling(f),
        admin_cases::dead_letters(),
        admin_cases::filters(),
        admin_cases::topics_and_groups(),
    ]
    .into_iter()
    .flatten()
    .collect()
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
    big.priority = 9; // the top of edge's 10 levels
    f.publisher()
        .publish(v1::PublishRequest {
            batch_id: None,
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
    assert_eq!(got[0]["priority"], 9);
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
