//! Beyond Kafka: records a Kafka client produces, consumed with a queue's semantics. A
//! kafka-python producer (idempotent, acks=all, keyed) writes to a Ferry topic through
//! `ferry serve`'s Kafka endpoint; a Ferry subscription of that topic, made with `ferry sub
//! create` (a retry policy with a fixed backoff, a dead-letter queue, key-shared ordering),
//! delivers them one by one to a worker over the HTTP API, which acks most, nacks one once,
//! and fails a poison record until it is dead-lettered; `ferry dlq` shows the letter and
//! redrives it, and `ferry consume` takes it back. Then a second poison record: its key is
//! parked with `ferry queue park` while it fails, so its key's later records are held while
//! other keys flow; `ferry queue parked` lists it; once the worker is fixed, `ferry queue
//! unpark` releases the key and its records come, in order. Meanwhile a Kafka consumer group
//! still reads every record of the topic: the subscription takes references, not the
//! records.
//!
//! Without python3 and kafka-python the test says so loudly and skips — under `CI=true`
//! that is a failure.

mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::Server;

const TOPIC: &str = "orders";
const SUBSCRIPTION: &str = "billing";
const DEAD: &str = "billing-dead";
/// Deliveries before the poison record is dead-lettered.
const MAX_DELIVERIES: u32 = 3;
/// A fixed backoff (no doubling, no jitter), so "not before the backoff" is exact.
const BACKOFF: Duration = Duration::from_millis(1500);
/// How much earlier than `BACKOFF` after our nack's answer a redelivery may be seen: the
/// server starts the backoff when it takes the nack, a little before we read the answer.
const SLACK: Duration = Duration::from_millis(100);
const POISON: &str = "p1-poison";
const POISON_ERROR: &str = "amount is not a number";
const RETRIED: &str = "n1-retry";

/// The records, in send order, as `key=value`: the poison record has a follower of its own
/// key (`p2`), which must wait behind it while other keys keep flowing.
const RECORDS: [&str; 8] = [
    "acct-a=a1",
    "acct-b=b1",
    "acct-p=p1-poison",
    "acct-n=n1-retry",
    "acct-a=a2",
    "acct-p=p2",
    "acct-b=b2",
    "acct-a=a3",
];

/// The second poison record, whose key is parked while it fails.
const PARKED_KEY: &str = "acct-q";
const PARKED_POISON: &str = "q1-poison";
/// Produced before the key is parked: the poison record and another key's.
const BEFORE_PARKING: [&str; 2] = ["acct-q=q1-poison", "acct-c=c1"];
/// Produced while the key is parked: its later records, held, and another key's, flowing.
const WHILE_PARKED: [&str; 4] = ["acct-q=q2", "acct-c=c2", "acct-q=q3", "acct-c=c3"];

fn python_has_kafka_python() -> bool {
    Command::new("python3")
        .args(["-c", "import kafka"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `ferry serve` on free ports, with where its Kafka endpoint listens.
fn start(data_dir: &Path) -> (Server, String) {
    let (child, lines) = support::spawn_serve(data_dir, &[]);
    let (mut grpc, mut http, mut kafka) = (None, None, None);
    while grpc.is_none() || http.is_none() || kafka.is_none() {
        let line = lines
            .recv_timeout(Duration::from_secs(10))
            .expect("ferry serve printed its addresses");
        let first_word = |rest: &str| rest.split([' ', ',']).next().unwrap().to_owned();
        if let Some(rest) = line.strip_prefix("ferry: serving gRPC (ferry.v1) on ") {
            grpc = Some(first_word(rest));
        } else if let Some(rest) = line.strip_prefix("ferry: serving HTTP on http://") {
            http = Some(first_word(rest));
        } else if let Some(rest) = line.strip_prefix("ferry: serving Kafka on ") {
            kafka = Some(first_word(rest));
        }
    }
    let server = Server {
        child,
        grpc: format!("ferry://{}", grpc.unwrap()),
        http: http.unwrap(),
    };
    (server, kafka.unwrap())
}

/// `kafka_side.py ARGS`, expecting success; its stdout lines.
fn kafka_side(args: &[&str]) -> Vec<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/beyond_kafka/kafka_side.py");
    let out = Command::new("python3")
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kafka_side.py {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A POST of `body` to the HTTP API; the status and the JSON answer.
fn post(server: &Server, path: &str, body: &Value) -> (u16, Value) {
    let (status, response) = support::http(
        &server.http,
        "Content-Type: application/json\r\n",
        "POST",
        path,
        &body.to_string(),
    );
    let text = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let value = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {response}"))
    };
    (status, value)
}

/// One delivery the worker saw, and when.
#[derive(Debug)]
struct Seen {
    at: Instant,
    payload: String,
    key: String,
    delivery: u64,
}

/// What the worker did: every delivery, when it nacked the retried record once, and when
/// the poison record's last nack dead-lettered it.
#[derive(Debug, Default)]
struct Worker {
    seen: Vec<Seen>,
    retried_nacked_at: Option<Instant>,
    poison_dead_at: Option<Instant>,
    acked: BTreeSet<String>,
    /// A record the worker cannot process yet (the parked key's poison record): received,
    /// and held until [`Worker::nack_held`], so that its key is parked while it is in flight.
    unprocessable: Option<String>,
    held: Option<(u64, u64)>,
    held_nacked_at: Option<Instant>,
}

impl Worker {
    /// Receives from the subscription and settles each delivery: the poison record is
    /// nacked with an error every time, the retried one is nacked on its first delivery,
    /// an unprocessable one is kept unsettled, the rest are acked.
    fn round(&mut self, server: &Server) {
        let (status, got) = post(
            server,
            &format!("/v1/queues/{SUBSCRIPTION}/receive"),
            &json!({ "consumer": "billing-worker", "max": 10, "wait_ms": 200 }),
        );
        assert_eq!(status, 200, "{got}");
        for d in got["deliveries"].as_array().unwrap() {
            let seen = Seen {
                at: Instant::now(),
                payload: d["payload"].as_str().unwrap().to_owned(),
                key: d["key"].as_str().unwrap().to_owned(),
                delivery: d["delivery"].as_u64().unwrap(),
            };
            let (seq, token) = (d["seq"].as_u64().unwrap(), d["token"].as_u64().unwrap());
            let settle = |outcome: &str, body: Value| {
                let (status, answer) = post(
                    server,
                    &format!("/v1/queues/{SUBSCRIPTION}/messages/{seq}/{outcome}"),
                    &body,
                );
                assert_eq!(status, 200, "{outcome} of {}: {answer}", seen.payload);
                answer
            };
            if self.unprocessable.as_ref() == Some(&seen.payload) {
                self.held = Some((seq, token));
            } else if seen.payload == POISON {
                let answer = settle("nack", json!({ "token": token, "error": POISON_ERROR }));
                if seen.delivery == u64::from(MAX_DELIVERIES) {
                    assert_eq!(answer["dead_lettered"], "max_deliveries", "{answer}");
                    self.poison_dead_at = Some(Instant::now());
                } else {
                    assert!(answer["retry_at_ms"].is_i64(), "{answer}");
                }
            } else if seen.payload == RETRIED && seen.delivery == 1 {
                let answer = settle("nack", json!({ "token": token }));
                assert!(answer["retry_at_ms"].is_i64(), "{answer}");
                self.retried_nacked_at = Some(Instant::now());
            } else {
                settle("ack", json!({ "token": token }));
                self.acked.insert(seen.payload.clone());
            }
            self.seen.push(seen);
        }
    }

    /// Nacks the unprocessable record kept by [`Worker::round`], with an error.
    fn nack_held(&mut self, server: &Server) {
        let (seq, token) = self.held.take().expect("the unprocessable record is held");
        let (status, answer) = post(
            server,
            &format!("/v1/queues/{SUBSCRIPTION}/messages/{seq}/nack"),
            &json!({ "token": token, "error": POISON_ERROR }),
        );
        assert_eq!(status, 200, "{answer}");
        assert!(answer["retry_at_ms"].is_i64(), "{answer}");
        self.held_nacked_at = Some(Instant::now());
    }

    fn deliveries_of(&self, payload: &str) -> Vec<&Seen> {
        self.seen.iter().filter(|s| s.payload == payload).collect()
    }

    fn first_seen(&self, payload: &str) -> Instant {
        self.deliveries_of(payload)
            .first()
            .unwrap_or_else(|| panic!("{payload} was never delivered: {:?}", self.seen))
            .at
    }
}

#[test]
fn kafka_records_get_retries_dead_letters_and_key_order_from_a_subscription() {
    if !python_has_kafka_python() {
        ferry_testkit::skip_or_fail(
            "python3 with kafka-python is missing (bash scripts/python-packages.sh)",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (server, kafka) = start(dir.path());

    // The topic, the dead-letter queue, and the subscription with its delivery settings.
    server.ok(&["topic", "create", TOPIC, "--partitions", "3"]);
    server.ok(&["queue", "create", DEAD]);
    let backoff = format!("{}ms", BACKOFF.as_millis());
    let max_deliveries = MAX_DELIVERIES.to_string();
    server.ok(&[
        "sub",
        "create",
        SUBSCRIPTION,
        "--topic",
        TOPIC,
        "--from",
        "earliest",
        "--max-deliveries",
        &max_deliveries,
        "--backoff",
        &backoff,
        "--backoff-multiplier",
        "1",
        "--backoff-jitter",
        "0",
        "--dead-letter",
        DEAD,
        "--ordering",
        "key-shared",
    ]);
    let described = server.json(&["sub", "describe", SUBSCRIPTION]);
    let spec = &described["queue"]["spec"];
    assert_eq!(spec["ordering"], "key-shared", "{described}");
    assert_eq!(spec["max_deliveries"], MAX_DELIVERIES, "{described}");
    assert_eq!(
        spec["backoff_base_ms"],
        BACKOFF.as_millis() as u64,
        "{described}"
    );
    assert_eq!(spec["dead_letter"], DEAD, "{described}");

    // Produced with kafka-python: every record acknowledged with its partition and offset,
    // the records of one key in one partition.
    let produced = kafka_side(&[&["produce", &kafka, TOPIC][..], &RECORDS[..]].concat());
    assert_eq!(produced.len(), RECORDS.len(), "{produced:?}");
    let mut partition_of_key = std::collections::BTreeMap::new();
    for (line, record) in produced.iter().zip(RECORDS) {
        let fields: Vec<&str> = line.split(' ').collect();
        let (key, value) = record.split_once('=').unwrap();
        assert_eq!(fields[..2], [key, value], "{produced:?}");
        let partition = partition_of_key.entry(key).or_insert(fields[2]);
        assert_eq!(
            *partition, fields[2],
            "one key, one partition: {produced:?}"
        );
    }

    // The worker, until every record but the poison one is acked and the poison one is
    // dead-lettered.
    let mut worker = Worker::default();
    let everything_else: BTreeSet<String> = RECORDS
        .iter()
        .map(|r| r.split_once('=').unwrap().1.to_owned())
        .filter(|v| v != POISON)
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while worker.acked != everything_else || worker.poison_dead_at.is_none() {
        assert!(Instant::now() < deadline, "the worker stalled: {worker:#?}");
        worker.round(&server);
    }

    // The nacked record came back once, as its second delivery, and not before its backoff
    // (the worker polled every 200 ms meanwhile).
    let retried = worker.deliveries_of(RETRIED);
    assert_eq!(
        retried.iter().map(|s| s.delivery).collect::<Vec<_>>(),
        [1, 2],
        "{worker:#?}"
    );
    let waited = retried[1].at - worker.retried_nacked_at.unwrap();
    assert!(
        waited + SLACK >= BACKOFF,
        "redelivered {waited:?} after the nack, before the {BACKOFF:?} backoff"
    );

    // The poison record: delivered MAX_DELIVERIES times, each after the backoff.
    let poison = worker.deliveries_of(POISON);
    assert_eq!(
        poison.iter().map(|s| s.delivery).collect::<Vec<_>>(),
        (1..=u64::from(MAX_DELIVERIES)).collect::<Vec<_>>(),
        "{worker:#?}"
    );
    for pair in poison.windows(2) {
        assert!(pair[1].at - pair[0].at + SLACK >= BACKOFF, "{worker:#?}");
    }

    // Its key was held while it failed: its follower went out only after it was
    // dead-lettered, while the other keys' later records went out during its retries.
    let poison_dead = worker.poison_dead_at.unwrap();
    assert!(
        worker.first_seen("p2") > poison_dead,
        "p2 overtook the poison record of its key: {worker:#?}"
    );
    for other in ["a2", "a3", "b2"] {
        assert!(
            worker.first_seen(other) < poison_dead,
            "{other} waited for another key's poison record: {worker:#?}"
        );
    }
    assert!(
        worker.first_seen(RETRIED) < poison_dead && retried[1].at < poison_dead,
        "{worker:#?}"
    );
    assert!(worker.seen.iter().all(|s| !s.key.is_empty()));

    // The dead letter: its reason, its deliveries, the worker's error, where it came from.
    let letters = server.json(&["dlq", "list", DEAD]);
    let letters = letters.as_array().unwrap();
    assert_eq!(letters.len(), 1, "{letters:?}");
    let letter = &letters[0];
    assert_eq!(letter["payload"], POISON, "{letter}");
    assert_eq!(letter["key"], "acct-p", "{letter}");
    let why = &letter["dead_letter"];
    assert_eq!(why["reason"], "max_deliveries", "{letter}");
    assert_eq!(why["deliveries"], MAX_DELIVERIES, "{letter}");
    assert_eq!(why["last_error"], POISON_ERROR, "{letter}");
    assert_eq!(why["origin_queue"], SUBSCRIPTION, "{letter}");

    // Redriven back to the subscription and consumed with the `ferry` command.
    let redriven = server.json(&["dlq", "redrive", DEAD]);
    assert_eq!(redriven["moved"], 1, "{redriven}");
    let taken = server.consume(SUBSCRIPTION, "ack", "1");
    assert_eq!(taken.len(), 1, "{taken:?}");
    assert_eq!(taken[0]["payload"], POISON, "{taken:?}");
    assert_eq!(taken[0]["key"], "acct-p", "{taken:?}");
    assert!(
        server
            .json(&["dlq", "list", DEAD])
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(
        server.consume(SUBSCRIPTION, "ack", "1").is_empty(),
        "the subscription is drained"
    );

    park_a_poison_key(&server, &kafka);

    // The Kafka side is untouched: a consumer group reads every record from the topic.
    let sent: BTreeSet<String> = [&RECORDS[..], &BEFORE_PARKING[..], &WHILE_PARKED[..]]
        .concat()
        .iter()
        .map(|r| r.replacen('=', " ", 1))
        .collect();
    let read: BTreeSet<String> = kafka_side(&[
        "group",
        &kafka,
        TOPIC,
        "kafka-readers",
        &sent.len().to_string(),
    ])
    .into_iter()
    .collect();
    assert_eq!(read, sent);
}

/// The parked key's entries in `ferry queue parked --json`: how many records it holds.
fn parked_held(server: &Server) -> Option<u64> {
    let parked = server.json(&["queue", "parked", SUBSCRIPTION]);
    let parked = parked.as_array().unwrap();
    assert!(parked.len() <= 1, "{parked:?}");
    parked.first().map(|p| {
        assert_eq!(p["key"], PARKED_KEY, "{parked:?}");
        p["held"].as_u64().unwrap()
    })
}

/// A second poison record: the worker cannot process it, and rather than let it fail until
/// it is dead-lettered, its key is parked while the first delivery is in flight. Other keys
/// keep flowing; the key's later records are held; once the worker is fixed, the key is
/// unparked and its records come in order.
fn park_a_poison_key(server: &Server, kafka: &str) {
    let mut worker = Worker {
        unprocessable: Some(PARKED_POISON.to_owned()),
        ..Worker::default()
    };
    kafka_side(&[&["produce", kafka, TOPIC][..], &BEFORE_PARKING[..]].concat());
    let deadline = Instant::now() + Duration::from_secs(30);
    while worker.held.is_none() || !worker.acked.contains("c1") {
        assert!(Instant::now() < deadline, "the worker stalled: {worker:#?}");
        worker.round(server);
    }
    // Parked while its poison record is in flight (which parking does not recall), then
    // the record fails: its retry is held with the key, however slow this machine is.
    assert_eq!(parked_held(server), None);
    let parked = server.json(&["queue", "park", SUBSCRIPTION, PARKED_KEY]);
    assert_eq!(parked["parked"], true, "{parked}");
    worker.nack_held(server);

    // The key's later records are held; the other key's flow. The worker keeps polling
    // past two backoffs after the nack, when the poison record's retry was due.
    kafka_side(&[&["produce", kafka, TOPIC][..], &WHILE_PARKED[..]].concat());
    let nacked_at = worker.held_nacked_at.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(
            Instant::now() < deadline,
            "the other key stalled: {worker:#?}"
        );
        worker.round(server);
        let flowed = ["c2", "c3"].iter().all(|c| worker.acked.contains(*c));
        if flowed && nacked_at.elapsed() > 2 * BACKOFF && parked_held(server) == Some(3) {
            break;
        }
    }
    for held in [PARKED_POISON, "q2", "q3"] {
        assert_eq!(
            worker.deliveries_of(held).len(),
            usize::from(held == PARKED_POISON),
            "{held} was delivered while its key was parked: {worker:#?}"
        );
    }
    let stats = server.json(&["queue", "describe", SUBSCRIPTION]);
    assert_eq!(stats["stats"]["parked"], 3, "{stats}");

    // Fixed: the worker now processes the record, and the key is released.
    worker.unprocessable = None;
    let unparked = server.json(&["queue", "unpark", SUBSCRIPTION, PARKED_KEY]);
    assert_eq!(unparked["unparked"], true, "{unparked}");
    assert_eq!(parked_held(server), None);
    let released = [PARKED_POISON, "q2", "q3"];
    let deadline = Instant::now() + Duration::from_secs(30);
    while !released.iter().all(|r| worker.acked.contains(*r)) {
        assert!(
            Instant::now() < deadline,
            "the unparked key stalled: {worker:#?}"
        );
        worker.round(server);
    }
    let of_key: Vec<(&str, u64)> = worker
        .seen
        .iter()
        .filter(|s| s.key == PARKED_KEY)
        .map(|s| (s.payload.as_str(), s.delivery))
        .collect();
    assert_eq!(
        of_key,
        [(PARKED_POISON, 1), (PARKED_POISON, 2), ("q2", 1), ("q3", 1)],
        "in order, one at a time: {worker:#?}"
    );
}
