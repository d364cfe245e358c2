//! kcat (Debian's `kcat` package, librdkafka underneath; installed by
//! `scripts/debian-packages.sh`) against the front end: `-L` metadata, `-P` with keys
//! (`-K:`) and headers (`-H`), `-C -o beginning -e` reading them back with key, headers,
//! timestamp, partition and offset formatted by `-f`.
//!
//! Without kcat the tests say so loudly and skip — under `CI=true` that is a failure.

mod common;

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Output, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use ferry_broker::TopicSpec;
use ferry_kafka::KafkaConfig;

fn kcat_is_installed() -> bool {
    Command::new("kcat")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs kcat against `addr` with `args`, `stdin` fed to it, off the async runtime.
async fn kcat(addr: SocketAddr, args: &[&str], stdin: &str) -> Output {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let stdin = stdin.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new("kcat")
            .arg("-b")
            .arg(addr.to_string())
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("running kcat");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap()
}

fn succeeded(what: &str, output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{what} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_lists_the_node_and_the_partitions_of_a_topic() {
    if !kcat_is_installed() {
        ferry_testkit::skip_or_fail("kcat is missing (bash scripts/debian-packages.sh)");
        return;
    }
    let server = common::start(KafkaConfig::default()).await;
    server
        .broker
        .create_topic("kcat-listed", TopicSpec::with_partitions(3))
        .await
        .unwrap();

    let listed = kcat(server.addr, &["-L", "-t", "kcat-listed"], "").await;
    let listed = succeeded("kcat -L", &listed);
    assert!(listed.contains(" 1 brokers:"), "{listed}");
    assert!(
        listed.contains(&format!("broker 0 at {}", server.addr)),
        "{listed}"
    );
    assert!(
        listed.contains("topic \"kcat-listed\" with 3 partitions:"),
        "{listed}"
    );
    for partition in 0..3 {
        assert!(
            listed.contains(&format!(
                "partition {partition}, leader 0, replicas: 0, isrs: 0"
            )),
            "{listed}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_produces_keys_and_headers_and_consumes_them_back_formatted() {
    if !kcat_is_installed() {
        ferry_testkit::skip_or_fail("kcat is missing (bash scripts/debian-packages.sh)");
        return;
    }
    let server = common::start(KafkaConfig::default()).await;
    server
        .broker
        .create_topic("kcat-orders", TopicSpec::with_partitions(2))
        .await
        .unwrap();

    let before = now_ms();
    let produced = kcat(
        server.addr,
        &[
            "-P",
            "-t",
            "kcat-orders",
            "-p",
            "1",
            "-K:",
            "-H",
            "type=order.created",
            "-H",
            "source=kcat",
            "-X",
            "acks=all",
        ],
        "order-1:{\"total\":12}\norder-2:{\"total\":7}\n",
    )
    .await;
    succeeded("kcat -P", &produced);
    let after = now_ms();

    let consumed = kcat(
        server.addr,
        &[
            "-C",
            "-t",
            "kcat-orders",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%p|%o|%k|%s|%h|%T\\n",
        ],
        "",
    )
    .await;
    let consumed = succeeded("kcat -C", &consumed);
    let lines: Vec<&str> = consumed.lines().collect();
    assert_eq!(
        lines.len(),
        2,
        "two records, both on partition 1:\n{consumed}"
    );
    for (offset, (line, (key, value))) in lines
        .iter()
        .zip([("order-1", "{\"total\":12}"), ("order-2", "{\"total\":7}")])
        .enumerate()
    {
        let fields: Vec<&str> = line.split('|').collect();
        assert_eq!(fields.len(), 6, "{line}");
        assert_eq!(fields[0], "1", "partition: {line}");
        assert_eq!(fields[1], offset.to_string(), "offset: {line}");
        assert_eq!(fields[2], key, "key: {line}");
        assert_eq!(fields[3], value, "value: {line}");
        // Both headers, as a set: Ferry keeps a record's headers by name and gives them
        // back in name order, not in the order produced (Kafka keeps that order).
        let mut headers: Vec<&str> = fields[4].split(',').collect();
        headers.sort_unstable();
        assert_eq!(
            headers,
            ["source=kcat", "type=order.created"],
            "headers: {line}"
        );
        // The producer's CreateTime, which Ferry keeps (docs/compat/kafka.md, "Timestamps").
        let timestamp: i64 = fields[5].parse().expect("a timestamp in ms");
        assert!(
            (before..=after).contains(&timestamp),
            "timestamp {timestamp} outside the produce window {before}..={after}"
        );
    }

    // Partition 0 got nothing: consuming it alone ends at once with no record.
    let empty = kcat(
        server.addr,
        &[
            "-C",
            "-t",
            "kcat-orders",
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%k\\n",
        ],
        "",
    )
    .await;
    assert_eq!(succeeded("kcat -C -p 0", &empty), "");
}
