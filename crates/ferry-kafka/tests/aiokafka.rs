//! aiokafka, the asyncio Kafka client (from PyPI, pinned in `scripts/python-packages.sh`),
//! against the front end: `aiokafka/produce_consume.py` creates topics and deletes one with
//! `AIOKafkaAdminClient`, produces keyed records with headers through an idempotent
//! `AIOKafkaProducer` (acks all, gzip), reads them in a group with manual commits of half of
//! each partition, and resumes with a second consumer after those commits. This side then
//! checks the records, the deleted topic and the group's offsets as Ferry's.
//!
//! Without python3 and aiokafka the test says so loudly and skips — under `CI=true` that is
//! a failure.

mod common;

use std::path::Path;
use std::process::Command;

use ferry_broker::{Broker, BrokerConfig, Position};
use ferry_kafka::KafkaConfig;

const TOPIC: &str = "aio-orders";
const GROUP: &str = "aio-billing";
/// As the script sends them.
const RECORDS: u64 = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aiokafka_produces_consumes_in_a_group_and_administers_topics() {
    if !common::python_imports("aiokafka") {
        ferry_testkit::skip_or_fail(
            "python3 with aiokafka is missing (bash scripts/python-packages.sh)",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path(), BrokerConfig::default())
        .await
        .unwrap();
    let server = common::serve(broker.clone(), KafkaConfig::default()).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/aiokafka/produce_consume.py");
    let mut command = Command::new("python3");
    command
        .arg(script)
        .arg(server.addr.to_string())
        .arg(TOPIC)
        .arg(GROUP);
    common::python_checks("aiokafka", command).await;
    server.stop().await;

    // The admin client's topics are Ferry's: the one it kept, not the one it deleted.
    let info = broker.describe_topic(TOPIC).unwrap();
    assert_eq!(info.spec.partitions, 2);
    assert!(broker.describe_topic(&format!("{TOPIC}-scratch")).is_err());

    // Every record, gzip-compressed on the wire, stored as a Ferry message with its key and
    // headers, idempotently (each carries the producer's stamp).
    let offsets = broker.group_offsets(TOPIC, GROUP).unwrap();
    let mut stored = 0;
    for partition in 0..2 {
        let records = broker
            .read_topic(TOPIC, partition, Position::Earliest, 100)
            .unwrap();
        for r in &records {
            let n: u64 = r.message.headers["n"].parse().unwrap();
            assert_eq!(r.message.payload, format!("order {n}").as_bytes());
            assert_eq!(
                r.message.key.as_deref(),
                Some(format!("k{}", n % 4).as_bytes())
            );
            assert_eq!(r.message.headers["type"], "order.created");
            assert!(r.producer.is_some(), "written by an idempotent producer");
        }
        // The second consumer committed each partition to its end.
        assert_eq!(offsets[&partition].offset, records.len() as u64);
        stored += records.len() as u64;
    }
    assert_eq!(stored, RECORDS);
}
