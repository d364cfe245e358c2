//! confluent-kafka (librdkafka's Python binding, from PyPI, pinned in
//! `scripts/python-packages.sh`) running `confluent/order_service.py`: the producer and
//! consumer of a typical event-driven service — acks=all, idempotence and snappy on the
//! producer; a consumer group with manual commits, a failed message sent to `<topic>.dlq`,
//! and a restarted consumer resuming after its commits.
//!
//! It needs what the endpoint serves for such clients: InitProducerId for the idempotent
//! producer, and FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
//! OffsetCommit and OffsetFetch for the group.
//!
//! Without python3 and confluent-kafka the test says so loudly and skips — under `CI=true`
//! that is a failure.

mod common;

use std::path::Path;
use std::process::Command;

use ferry_kafka::KafkaConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_producer_and_group_consumer_with_commits_dead_letters_and_resume() {
    if !common::python_imports("confluent_kafka") {
        ferry_testkit::skip_or_fail(
            "python3 with confluent-kafka is missing (bash scripts/python-packages.sh)",
        );
        return;
    }
    let server = common::start(KafkaConfig::default()).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/confluent/order_service.py");
    let addr = server.addr;
    let output = tokio::task::spawn_blocking(move || {
        Command::new("python3")
            .arg(script)
            .arg(addr.to_string())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("every check passed"),
        "the order service failed against the Kafka endpoint:\n{stdout}\n{stderr}"
    );
}
