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
use ferry_kafka::KafkaConfig;

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
    let server = common::serve(broker, KafkaConfig::default()).await;
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kafka_python/produce_consume.py");
    let mut command = Command::new("python3");
    command
        .arg(script)
        .arg(server.addr.to_string())
        .env("FERRY_PUBLISHED_TOPIC", "from-ferry")
        .env("FERRY_PUBLISHED_KEY", "ferry-key")
        .env("FERRY_PUBLISHED_VALUE", "published by ferry")
        .env("FERRY_PUBLISHED_TYPE", "ferry.published")
        .env("FERRY_PUBLISHED_AT", published_at.to_string());
    common::python_checks("kafka-python", command).await;
    server.stop().await;
}
