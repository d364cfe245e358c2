//! kafka-python (pure Python, from PyPI, pinned in `scripts/python-packages.sh`) against
//! the front end: `kafka_python/produce_consume.py` creates and deletes topics with the
//! admin client, produces with keys, headers, acks 1 and all, uncompressed and gzip, and
//! consumes by hand-assigned partitions (consumer groups: `kafka_python_groups.rs`),
//! looks offsets up by time, and reads a record published through Ferry's own API with its
//! key, headers and timestamp.
//!
//! Without python3 and kafka-python the test says so loudly and skips — under `CI=true`
//! that is a failure.

mod common;

use std::path::Path;
use std::process::Command;

use ferry_broker::{Broker, BrokerConfig, OutgoingMessage, Position, TopicSpec};
use ferry_kafka::{Kafka, KafkaConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_produces_and_consumes() {
    if !common::python_imports("kafka") {
        ferry_testkit::skip_or_fail(
            "python3 with kafka-python is missing (bash scripts/python-packages.sh)",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path(), BrokerConfig::default())
        .await
        .unwrap();
    broker
        .create_topic("from-ferry", TopicSpec::with_partitions(1))
        .await
        .unwrap();
    broker
        .publish_to_partition(
            "from-ferry",
            0,
            vec![
                OutgoingMessage::new("published by ferry")
                    .with_key("ferry-key")
                    .with_header("type", "ferry.published"),
            ],
        )
        .await
        .unwrap();
    let published_at = broker
        .read_topic("from-ferry", 0, Position::Earliest, 1)
        .unwrap()[0]
        .message
        .published_at;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(Kafka::new(broker, KafkaConfig::default()).serve(
        listener,
        async move {
            let _ = stopped.await;
        },
    ));
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kafka_python/produce_consume.py");
    let output = tokio::task::spawn_blocking(move || {
        Command::new("python3")
            .arg(script)
            .arg(addr.to_string())
            .env("FERRY_PUBLISHED_TOPIC", "from-ferry")
            .env("FERRY_PUBLISHED_KEY", "ferry-key")
            .env("FERRY_PUBLISHED_VALUE", "published by ferry")
            .env("FERRY_PUBLISHED_TYPE", "ferry.published")
            .env("FERRY_PUBLISHED_AT", published_at.to_string())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let _ = stop.send(());
    served.await.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("every check passed"),
        "kafka-python failed:\n{stdout}\n{stderr}"
    );
}
