//! kafka-python's consumer groups (`kafka_python/consumer_groups.py`) against the front
//! end: two consumers of one group split the partitions, one leaves and the other takes
//! them all, commits, a consumer started later resumes after the commits, and the admin
//! client lists, describes, reads the offsets of and deletes groups. Then the Kafka
//! group's commit is checked as what it is in Ferry: the broker's group, with its lag and
//! its metadata string.
//!
//! Without python3 and kafka-python the test says so loudly and skips — under `CI=true`
//! that is a failure.

mod common;

use std::path::Path;
use std::process::Command;

use ferry_broker::{Broker, BrokerConfig};
use ferry_kafka::KafkaConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_consumer_groups_share_partitions_and_commit_ferry_group_offsets() {
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
    let server = common::serve(broker.clone(), KafkaConfig::default()).await;
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kafka_python/consumer_groups.py");
    let mut command = Command::new("python3");
    command.arg(script).arg(server.addr.to_string());
    common::python_checks("kafka-python", command).await;
    server.stop().await;
    // The Kafka group's commit is the broker's group "ferry-lagging" on the topic.
    let lag = broker.group_lag("py-groups", "ferry-lagging").unwrap();
    assert_eq!(lag[0].committed, Some(3));
    assert_eq!(lag[0].lag_records, lag[0].end_offset - 3);
    // The oldest uncommitted record was produced seconds before: lag in time too.
    assert!(lag[0].lag_records > 0 && lag[0].lag_ms > 0);
    let offsets = broker.group_offsets("py-groups", "ferry-lagging").unwrap();
    assert_eq!(offsets[&0].metadata, "py-meta");
    // The deleted group's offsets are gone from the broker too.
    assert!(broker.group_lag("py-groups", "ferry-group").is_err());
}
