//! `ferry serve`'s Kafka endpoint killed under an idempotent producer: kafka-python, and
//! librdkafka (confluent-kafka), each with acks all, idempotence on, five requests in
//! flight and retries, send numbered records to one partition while the server is SIGKILLed three times and restarted on the same data
//! directory and Kafka port. Afterwards every record the producer saw acknowledged is in
//! the partition exactly once, at the offset its acknowledgement named, and no record is
//! there twice — a batch whose answer the kill cut off is retried by the producer and,
//! being a retry of one already stored, stored once (the broker rebuilds each partition's
//! producer state from the records after the restart).

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const KILLS: usize = 3;
const TOPIC: &str = "crash";
const COUNT: usize = 3000;
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafka_crash/producer.py");

/// Whether python3 can import `modules` (`import a, b`).
fn python_has(modules: &str) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A port free now, for the Kafka endpoint to keep across restarts: the producer's
/// bootstrap address must stay the same.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed (SIGKILL) and reaped when dropped, so that a failing test leaves
/// no server or script behind.
struct Reaped(Child);

impl Reaped {
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `ferry serve` on `data` with its Kafka endpoint on `kafka` (the other listeners on free
/// ports), once it says it serves Kafka.
fn serve(data: &Path, kafka: &str) -> Reaped {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["serve", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"])
        .args(["--aws-addr", "127.0.0.1:0", "--kafka-addr", kafka])
        .args(["--pubsub-addr", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(data)
        .env_remove("FERRY_SERVER")
        .stdout(Stdio::piped())
        .spawn()
        .map(Reaped)
        .unwrap();
    let stdout = child.0.stdout.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let line = lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("ferry serve said it serves Kafka");
        if line.starts_with("ferry: serving Kafka on ") {
            return child;
        }
    }
}

/// The producer script in `mode`, its stdout a line at a time.
fn script(kafka: &str, mode: &str) -> (Reaped, mpsc::Receiver<String>) {
    let mut child = Command::new("python3")
        .arg(SCRIPT)
        .args([kafka, TOPIC, &COUNT.to_string(), mode])
        .stdout(Stdio::piped())
        .spawn()
        .map(Reaped)
        .unwrap();
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// What the producer reported.
#[derive(Default)]
struct Progress {
    /// n → the offset its acknowledgement named.
    acked: HashMap<usize, i64>,
    failed: Vec<String>,
}

impl Progress {
    /// Takes one line of the producer's within `wait`; false when there was none, or it
    /// said it was done.
    fn read(&mut self, lines: &mpsc::Receiver<String>, wait: Duration) -> bool {
        let Ok(line) = lines.recv_timeout(wait) else {
            return false;
        };
        let mut words = line.splitn(3, ' ');
        match (words.next(), words.next(), words.next()) {
            (Some("acked"), Some(n), Some(offset)) => {
                let previous = self
                    .acked
                    .insert(n.parse().unwrap(), offset.parse().unwrap());
                assert!(previous.is_none(), "record {n} acknowledged twice");
            }
            (Some("failed"), Some(n), error) => self.failed.push(format!("{n}: {error:?}")),
            (Some("done"), None, None) => return false,
            _ => panic!("unexpected producer output {line:?}"),
        }
        true
    }
}

#[test]
fn every_record_kafka_python_saw_acknowledged_is_stored_exactly_once_across_sigkills() {
    if !python_has("kafka") {
        ferry_testkit::skip_or_fail(
            "python3 with kafka-python is missing (bash scripts/python-packages.sh)",
        );
        return;
    }
    produce_across_sigkills("produce");
}

#[test]
fn every_record_librdkafka_saw_acknowledged_is_stored_exactly_once_across_sigkills() {
    if !python_has("kafka, confluent_kafka") {
        ferry_testkit::skip_or_fail(
            "python3 with kafka-python and confluent-kafka is missing \
             (bash scripts/python-packages.sh)",
        );
        return;
    }
    produce_across_sigkills("produce-librdkafka");
}

/// The scenario with the producer script in `mode`.
fn produce_across_sigkills(mode: &str) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let kafka = format!("127.0.0.1:{}", free_port());
    let mut server = serve(&data, &kafka);
    let (mut producer, lines) = script(&kafka, mode);

    let mut progress = Progress::default();
    for round in 0..KILLS {
        // Killed mid-stream, once more records were acknowledged, at a moment that
        // differs from round to round.
        let running = Instant::now();
        let at_least = progress.acked.len() + 100 + 50 * round;
        while progress.acked.len() < at_least || running.elapsed() < Duration::from_millis(200) {
            assert!(
                running.elapsed() < Duration::from_secs(60),
                "round {round}: {} acknowledged, no progress in 60 s",
                progress.acked.len()
            );
            progress.read(&lines, Duration::from_millis(100));
        }
        eprintln!(
            "round {round}: killed with {} acknowledged",
            progress.acked.len()
        );
        server.kill();
        std::thread::sleep(Duration::from_millis(100 * round as u64));
        server = serve(&data, &kafka);
    }
    // The producer finishes against the last server.
    let finishing = Instant::now();
    while progress.read(&lines, Duration::from_secs(5)) || producer.0.try_wait().unwrap().is_none()
    {
        assert!(
            finishing.elapsed() < Duration::from_secs(180),
            "the producer did not finish within 180 s"
        );
    }
    assert!(producer.0.wait().unwrap().success(), "the producer failed");
    assert!(
        progress.failed.is_empty(),
        "records that failed for good: {:?}",
        progress.failed
    );
    let acked = progress.acked;
    assert_eq!(acked.len(), COUNT, "every record acknowledged");

    // Read back through Kafka after one more kill and restart.
    server.kill();
    let mut server = serve(&data, &kafka);
    let (mut consumer, lines) = script(&kafka, "consume");
    let mut stored: BTreeMap<i64, String> = BTreeMap::new();
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the consumer printed the records");
        if line == "done" {
            break;
        }
        let mut words = line.splitn(3, ' ');
        assert_eq!(words.next(), Some("record"), "{line}");
        let offset = words.next().unwrap().parse().unwrap();
        stored.insert(offset, words.next().unwrap().to_owned());
    }
    assert!(consumer.0.wait().unwrap().success());
    server.kill();

    let mut seen: HashMap<&str, i64> = HashMap::new();
    for (offset, value) in &stored {
        if let Some(first) = seen.insert(value, *offset) {
            panic!("{value} stored twice, at offsets {first} and {offset}");
        }
    }
    for (n, offset) in &acked {
        let value = format!("n-{n}");
        assert_eq!(
            seen.get(value.as_str()),
            Some(offset),
            "{value} acknowledged at offset {offset}"
        );
    }
    assert_eq!(stored.len(), COUNT, "nothing but the records sent");
}
