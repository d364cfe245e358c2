//! kafka-python's `KafkaAdminClient` (pinned in `scripts/python-packages.sh`) against the
//! admin APIs: `kafka_python/admin.py` creates a topic with a config, grows it, describes
//! and alters its configs (incrementally and whole), describes the cluster and deletes
//! records; this side then checks that what it set is Ferry's topic's setting, and that it
//! is still there after the broker is reopened.
//!
//! Without python3 and kafka-python the test says so loudly and skips — under `CI=true`
//! that is a failure.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use ferry_broker::{Broker, BrokerConfig};
use ferry_kafka::KafkaConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_admin_client_changes_ferrys_topic() {
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
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kafka_python/admin.py");
    let mut command = Command::new("python3");
    command
        .arg(script)
        .arg(server.addr.to_string())
        .arg("py-admin");
    common::python_checks("kafka-python", command).await;
    server.stop().await;

    let check = |broker: &Broker| {
        let info = broker.describe_topic("py-admin").unwrap();
        assert_eq!(info.spec.partitions, 3);
        assert_eq!(info.spec.retention.max_age, Some(Duration::from_secs(3600)));
        assert_eq!(info.spec.retention.max_bytes, Some(1 << 20));
        assert!(
            info.spec.compaction.is_some(),
            "cleanup.policy compact,delete"
        );
        assert_eq!(
            info.partitions[0].start_offset, 3,
            "records deleted before 3"
        );
    };
    check(&broker);
    drop(broker);
    let broker = Broker::open(dir.path(), BrokerConfig::default())
        .await
        .unwrap();
    check(&broker);
}
