//! `ferry serve` serves the Kafka endpoint beside gRPC and HTTP, over the same topics: a
//! topic Kafka's Metadata creates is a Ferry topic, and the endpoint answers in Kafka's
//! framing (ApiVersions with a v0 header). The protocol itself is tested in `ferry-kafka`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

mod support;

/// `body` (a request header v1 and the request) framed, sent; the answer's frame.
fn call(addr: &str, body: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    stream.write_all(&frame).unwrap();
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).unwrap();
    let mut answer = vec![0u8; u32::from_be_bytes(len) as usize];
    stream.read_exact(&mut answer).unwrap();
    answer
}

/// A request header v1: api key, version, correlation id, a null client id.
fn header(api_key: i16, version: i16, correlation: i32) -> Vec<u8> {
    let mut h = api_key.to_be_bytes().to_vec();
    h.extend_from_slice(&version.to_be_bytes());
    h.extend_from_slice(&correlation.to_be_bytes());
    h.extend_from_slice(&(-1i16).to_be_bytes());
    h
}

#[test]
fn serve_answers_kafka_over_the_same_topics() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, lines) = support::spawn_serve(dir.path(), &[]);
    let (grpc, kafka) = support::listening(
        &lines,
        "ferry: serving gRPC (ferry.v1) on ",
        "ferry: serving Kafka on ",
        |_| {},
    );

    // ApiVersions v0: correlation id, then error code 0 and the served APIs.
    let answer = call(&kafka, &header(18, 0, 41));
    assert_eq!(answer[..4], 41i32.to_be_bytes());
    assert_eq!(answer[4..6], [0, 0], "no error");

    // Metadata v0 for one topic: auto-created as a Ferry topic.
    let mut request = header(3, 0, 42);
    request.extend_from_slice(&1i32.to_be_bytes());
    request.extend_from_slice(&(10i16).to_be_bytes());
    request.extend_from_slice(b"from-kafka");
    let answer = call(&kafka, &request);
    assert_eq!(answer[..4], 42i32.to_be_bytes());
    let listed = std::process::Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["--server", &format!("ferry://{grpc}"), "topic", "list"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("from-kafka"),
        "{listed:?}"
    );

    // Stops with the rest.
    // SAFETY: kill(2) on the child's pid; no memory is touched.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

/// One connection's requests and answers, framed.
struct Connection(TcpStream);

impl Connection {
    fn call(&mut self, body: &[u8]) -> Option<Vec<u8>> {
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(body);
        self.0.write_all(&frame).ok()?;
        let mut len = [0u8; 4];
        self.0.read_exact(&mut len).ok()?;
        let mut answer = vec![0u8; u32::from_be_bytes(len) as usize];
        self.0.read_exact(&mut answer).ok()?;
        Some(answer)
    }
}

/// SaslHandshake v1 for `mechanism`.
fn handshake(correlation: i32, mechanism: &str) -> Vec<u8> {
    let mut request = header(17, 1, correlation);
    request.extend_from_slice(&(mechanism.len() as i16).to_be_bytes());
    request.extend_from_slice(mechanism.as_bytes());
    request
}

/// SaslAuthenticate v0 carrying `token`.
fn authenticate(correlation: i32, token: &[u8]) -> Vec<u8> {
    let mut request = header(36, 0, correlation);
    request.extend_from_slice(&(token.len() as i32).to_be_bytes());
    request.extend_from_slice(token);
    request
}

#[test]
fn beside_tokens_kafka_is_served_with_sasl_required() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ferry.toml");
    // The SHA-256 of "test"; the token itself reaches the server for SCRAM through the
    // environment only.
    std::fs::write(
        &config,
        "[[auth.tokens]]\nname = \"orders\"\nsha256 = \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"\npermissions = [\"admin:orders.#\", \"publish:orders.#\"]\nscram_secret_env = \"ORDERS_TOKEN\"\n",
    )
    .unwrap();
    let check = support::config_check(&config)
        .env("ORDERS_TOKEN", "test")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(text.contains("kafka.enabled = true  (default)"), "{text}");
    assert!(
        text.contains("kafka.sasl = required: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
        "{text}"
    );

    let (mut child, lines) = support::spawn_serve_with(
        &dir.path().join("data"),
        &[
            "--no-aws",
            "--no-pubsub",
            "--config",
            config.to_str().unwrap(),
        ],
        |command| {
            command.env("ORDERS_TOKEN", "test");
        },
    );
    let (_, kafka) = support::listening(
        &lines,
        "ferry: serving gRPC (ferry.v1) on ",
        "ferry: serving Kafka on ",
        |line| {
            if line.starts_with("ferry: serving Kafka on ") {
                assert!(
                    line.contains(
                        "SASL_PLAINTEXT: SASL PLAIN/SCRAM-SHA-256/SCRAM-SHA-512 required"
                    ),
                    "{line}"
                );
            }
        },
    );
    let connect = || {
        let stream = TcpStream::connect(&kafka).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Connection(stream)
    };

    // Metadata before authenticating: the connection is closed, no answer.
    let mut metadata = header(3, 0, 1);
    metadata.extend_from_slice(&0i32.to_be_bytes());
    assert!(connect().call(&metadata).is_none());

    // A wrong token: SASL_AUTHENTICATION_FAILED (58).
    let mut conn = connect();
    let answer = conn.call(&handshake(2, "PLAIN")).unwrap();
    assert_eq!(answer[4..6], [0, 0], "the handshake succeeds");
    let answer = conn.call(&authenticate(3, b"\0orders\0guess")).unwrap();
    assert_eq!(answer[4..6], 58i16.to_be_bytes());

    // The token: authenticated, then Metadata is answered.
    let mut conn = connect();
    conn.call(&handshake(4, "PLAIN")).unwrap();
    let answer = conn.call(&authenticate(5, b"\0orders\0test")).unwrap();
    assert_eq!(answer[4..6], [0, 0], "authenticated");
    let answer = conn.call(&metadata).unwrap();
    assert_eq!(answer[..4], 1i32.to_be_bytes());

    // SIGTERM stops it with the rest.
    // SAFETY: kill(2) on the child's pid; no memory is touched.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

/// A Kafka `str`: its length as an i16, then its bytes.
fn kafka_str(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(&(text.len() as i16).to_be_bytes());
    out.extend_from_slice(text.as_bytes());
}

#[test]
fn a_kafka_groups_commit_is_a_ferry_group_that_ferry_group_lists_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, lines) = support::spawn_serve(dir.path(), &[]);
    let (grpc, kafka) = support::listening(
        &lines,
        "ferry: serving gRPC (ferry.v1) on ",
        "ferry: serving Kafka on ",
        |_| {},
    );
    let server = format!("ferry://{grpc}");
    let ferry = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args(["--server", server.as_str()])
            .args(args)
            .output()
            .unwrap()
    };
    assert!(ferry(&["topic", "create", "kafka-orders"]).status.success());
    let published = ferry(&["publish", "--topic", "kafka-orders", "first", "second"]);
    assert!(published.status.success(), "{published:?}");

    // OffsetCommit v2 as a simple consumer (generation -1, no member): group
    // "kafka-readers", partition 0 at offset 0.
    let mut request = header(8, 2, 43);
    kafka_str(&mut request, "kafka-readers");
    request.extend_from_slice(&(-1i32).to_be_bytes());
    kafka_str(&mut request, "");
    request.extend_from_slice(&(-1i64).to_be_bytes());
    request.extend_from_slice(&1i32.to_be_bytes());
    kafka_str(&mut request, "kafka-orders");
    request.extend_from_slice(&1i32.to_be_bytes());
    request.extend_from_slice(&0i32.to_be_bytes());
    request.extend_from_slice(&0i64.to_be_bytes());
    kafka_str(&mut request, "from kafka");
    let answer = call(&kafka, &request);
    assert_eq!(answer[..4], 43i32.to_be_bytes());
    assert_eq!(answer[answer.len() - 2..], [0, 0], "committed: {answer:?}");

    let listed = ferry(&["group", "list"]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed
            .lines()
            .any(|l| l.contains("kafka-orders") && l.contains("kafka-readers")),
        "{listed}"
    );
    // Described by its commit, with no Ferry members: lag in records behind offset 0.
    let described = ferry(&[
        "group",
        "describe",
        "kafka-orders",
        "kafka-readers",
        "--json",
    ]);
    assert!(described.status.success(), "{described:?}");
    let info: serde_json::Value = serde_json::from_slice(&described.stdout).unwrap();
    assert_eq!(info["members"].as_array().map(Vec::len), Some(0), "{info}");
    assert_eq!(info["partitions"][0]["committed"], 0, "{info}");
    assert_eq!(info["partitions"][0]["lag_records"], 2, "{info}");
    assert!(
        ferry(&["group", "delete", "kafka-orders", "kafka-readers"])
            .status
            .success()
    );
    let listed = ferry(&["group", "list"]);
    assert!(!String::from_utf8_lossy(&listed.stdout).contains("kafka-readers"));

    // SAFETY: kill(2) on the child's pid; no memory is touched.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
}

/// `ferry --json topic describe name` against `grpc`, parsed.
fn describe_topic(grpc: &str, name: &str) -> serde_json::Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["--server", &format!("ferry://{grpc}"), "topic", "describe"])
        .args([name, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"))
}

#[test]
fn retention_and_compaction_altered_through_kafka_are_the_topics_settings_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, lines) = support::spawn_serve(dir.path(), &[]);
    let (grpc, kafka) = support::listening(
        &lines,
        "ferry: serving gRPC (ferry.v1) on ",
        "ferry: serving Kafka on ",
        |_| {},
    );
    let created = std::process::Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args([
            "--server",
            &format!("ferry://{grpc}"),
            "topic",
            "create",
            "kept",
        ])
        .output()
        .unwrap();
    assert!(created.status.success(), "{created:?}");
    let before = describe_topic(&grpc, "kept");
    assert_eq!(before["compaction"], false);

    // IncrementalAlterConfigs v0 on topic "kept": retention.ms and cleanup.policy SET.
    let mut request = header(44, 0, 43);
    request.extend_from_slice(&1i32.to_be_bytes());
    request.push(2);
    kafka_str(&mut request, "kept");
    request.extend_from_slice(&2i32.to_be_bytes());
    for (key, value) in [
        ("retention.ms", "3600000"),
        ("cleanup.policy", "compact,delete"),
    ] {
        kafka_str(&mut request, key);
        request.push(0);
        kafka_str(&mut request, value);
    }
    request.push(0);
    let answer = call(&kafka, &request);
    assert_eq!(answer[..4], 43i32.to_be_bytes());
    // Throttle time, one response, then its error code.
    assert_eq!(answer[8..12], 1i32.to_be_bytes());
    assert_eq!(answer[12..14], [0, 0], "no error: {answer:?}");

    let check = |grpc: &str| {
        let after = describe_topic(grpc, "kept");
        assert_eq!(after["retention_max_age_ms"], 3_600_000, "{after}");
        assert_eq!(after["compaction"], true, "{after}");
    };
    check(&grpc);
    // SAFETY: kill(2) on the child's pid; no memory is touched.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());

    let (mut child, lines) = support::spawn_serve(dir.path(), &[]);
    let (grpc, _) = support::listening(
        &lines,
        "ferry: serving gRPC (ferry.v1) on ",
        "ferry: serving Kafka on ",
        |_| {},
    );
    check(&grpc);
    // SAFETY: as above.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
}
