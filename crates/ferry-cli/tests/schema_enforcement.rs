//! Enforcement at publish through a real `ferry serve`: a queue or topic that requires a
//! schema registry subject takes payloads written with a live schema of it and refuses
//! the rest, from every front end, storing nothing refused.
//!
//! The Kafka test is Confluent's own Python clients (confluent-kafka from PyPI, pinned in
//! `scripts/python-packages.sh`): the AdminClient creates the topic with Confluent
//! Server's `confluent.value.schema.validation=true`, `AvroSerializer` and
//! `JSONSerializer` register and produce through Ferry's Kafka listener, and refused
//! records come back INVALID_RECORD (`schema_enforcement/kafka_producer.py`). Without
//! python3 and confluent-kafka's avro and json extras it
//! says so loudly and skips — under `CI=true` that is a failure. The gRPC (through the
//! `ferry` CLI) and HTTP test needs nothing beyond the server.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

mod support;

use support::Server;

/// A record with one string: its Avro encoding is the length (zig-zag) and the text, so a
/// 40-character text encodes as `P` (80) and the text — printable, and so a CLI argument.
const NOTE: &str =
    r#"{"type": "record", "name": "Note", "fields": [{"name": "text", "type": "string"}]}"#;

fn note_payload() -> String {
    format!("P{}", "x".repeat(40))
}

fn registered(http: &str, subject: &str, schema: &str) -> u32 {
    let body = serde_json::json!({ "schema": schema }).to_string();
    let (status, response) = support::http(
        http,
        "Content-Type: application/vnd.schemaregistry.v1+json\r\n",
        "POST",
        &format!("/schema-registry/subjects/{subject}/versions"),
        &body,
    );
    assert_eq!(status, 200, "{response}");
    let json = response.split("\r\n\r\n").nth(1).unwrap();
    let value: serde_json::Value = serde_json::from_str(json).unwrap();
    value["id"].as_u64().unwrap() as u32
}

fn publish_http(server: &Server, queue: &str, messages: serde_json::Value) -> (u16, String) {
    support::http(
        &server.http,
        "Content-Type: application/json\r\n",
        "POST",
        &format!("/v1/queues/{queue}/messages"),
        &serde_json::json!({ "messages": messages }).to_string(),
    )
}

#[test]
fn a_queue_requiring_a_subject_takes_matching_payloads_and_refuses_others_over_grpc_and_http() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let id = registered(&server.http, "notes-value", NOTE);
    let header = format!("ferry-schema-id={id}");

    server.ok(&[
        "queue",
        "create",
        "notes",
        "--schema-subject",
        "notes-value",
    ]);
    let described = server.json(&["queue", "describe", "notes"]);
    assert_eq!(described["spec"]["schema_subject"], "notes-value");
    assert!(
        server
            .ok(&["queue", "describe", "notes"])
            .contains("notes-value")
    );
    server.ok(&[
        "topic",
        "create",
        "note-log",
        "--schema-subject",
        "notes-value",
    ]);
    let described = server.json(&["topic", "describe", "note-log"]);
    assert_eq!(described["schema_subject"], "notes-value");

    // gRPC, through the CLI: the schema named by the header.
    let valid = note_payload();
    server.ok(&["publish", "notes", "--header", &header, &valid]);
    let refused = server.fails(&["publish", "notes", "--header", &header, "hello"]);
    assert!(refused.contains("notes-value"), "{refused}");
    assert!(refused.contains("field `text`"), "{refused}");
    // Without a header the payload is not in Confluent's wire format.
    let refused = server.fails(&["publish", "notes", &valid]);
    assert!(refused.contains("magic byte"), "{refused}");
    let refused = server.fails(&["publish", "--topic", "note-log", "--header", &header, "hi"]);
    assert!(refused.contains("field `text`"), "{refused}");
    server.ok(&[
        "publish", "--topic", "note-log", "--header", &header, &valid,
    ]);

    // HTTP: 422 with the kind's code and the field; a batch with one bad message stores
    // nothing; the wire format in the payload itself.
    let headers = serde_json::json!({ "ferry-schema-id": id.to_string() });
    let (status, response) = publish_http(
        &server,
        "notes",
        serde_json::json!([{ "payload": "hello", "headers": headers }]),
    );
    assert_eq!(status, 422, "{response}");
    assert!(
        response.contains("\"code\":\"schema_violation\""),
        "{response}"
    );
    assert!(response.contains("field `text`"), "{response}");
    assert!(response.contains("\"field\":\"text\""), "{response}");
    let (status, response) = publish_http(
        &server,
        "notes",
        serde_json::json!([
            { "payload": valid, "headers": headers },
            { "payload": "hello", "headers": headers },
        ]),
    );
    assert_eq!(status, 422, "{response}");
    let mut wire = vec![0u8];
    wire.extend_from_slice(&id.to_be_bytes());
    wire.extend_from_slice(valid.as_bytes());
    use base64::Engine;
    let wire = base64::engine::general_purpose::STANDARD.encode(wire);
    let (status, response) = publish_http(
        &server,
        "notes",
        serde_json::json!([{ "payload_base64": wire }]),
    );
    assert_eq!(status, 200, "{response}");

    let stats = &server.json(&["queue", "describe", "notes"])["stats"];
    assert_eq!(
        stats["ready"], 2,
        "the gRPC and the wire-format publish only: {stats}"
    );
}

fn python_clients_installed() -> bool {
    Command::new("python3")
        .args([
            "-c",
            "import confluent_kafka.admin, confluent_kafka.schema_registry.avro, fastavro, \
             confluent_kafka.schema_registry.json_schema, jsonschema",
        ])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `ferry serve` with the Kafka listener; its gRPC, HTTP and Kafka addresses.
fn serve_with_kafka(data: &Path) -> (std::process::Child, String, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["serve", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"])
        .args(["--aws-addr", "127.0.0.1:0", "--kafka-addr", "127.0.0.1:0"])
        .args(["--pubsub-addr", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(data)
        .env_remove("FERRY_SERVER")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
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
    (child, grpc.unwrap(), http.unwrap(), kafka.unwrap())
}

/// Kills the server when the test ends, passed or not.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn confluent_clients_produce_avro_and_json_through_kafka_to_validated_topics_and_refused_records_are_not_stored()
 {
    if !python_clients_installed() {
        ferry_testkit::skip_or_fail(
            "python3 with confluent-kafka[avro,json] is missing (bash scripts/python-packages.sh)",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (child, grpc, http, kafka) = serve_with_kafka(dir.path());
    let _server = Killed(child);
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/schema_enforcement/kafka_producer.py");
    let output = Command::new("python3")
        .arg(script)
        .arg(&kafka)
        .arg(format!("http://{http}/schema-registry"))
        .arg("orders")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("every check passed"),
        "the Confluent clients failed against Ferry's Kafka listener:\n{stdout}\n{stderr}"
    );
    // librdkafka reports a refused record by its code alone ("Broker failed to validate
    // record"); the message naming the field is in the Produce answer, which
    // ferry-kafka's tests/schema_validation.rs reads.

    // Ferry's own view: the topic requires orders-value and holds the one accepted record.
    let ferry = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args(["--server", &format!("ferry://{grpc}")])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let described = ferry(&["topic", "describe", "orders", "--json"]);
    assert_eq!(described["schema_subject"], "orders-value");
    assert_eq!(described["partitions"][0]["end_offset"], 1, "{described}");
}
