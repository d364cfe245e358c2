//! Topics through the broker's API: admin, placement by key and without, reads by
//! position, retention, idempotent producers — each across a reopen — and bad input that
//! changes nothing.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ferry_storage::ManualClock;
use proptest::prelude::*;

use super::tests::T0;
use super::*;
use crate::spec::Durability;
use crate::topic::partitioner::partition_for_key;
use crate::topic::{
    KeylessPlacement, Position, TopicPosition, TopicRecord, TopicRetention, TopicSpec,
};

/// Limits small enough that a partition's segments are about 38 KB (see
/// `engine/topic.rs`), so retention has whole segments to delete after a few dozen
/// messages.
pub(super) fn small_limits() -> Limits {
    Limits {
        max_payload_bytes: 1024,
        max_headers: 4,
        max_header_name_bytes: 64,
        max_header_value_bytes: 256,
        max_key_bytes: 256,
        max_dedup_id_bytes: 64,
        ..Limits::default()
    }
}

pub(super) async fn open(dir: &Path, clock: &ManualClock) -> Broker {
    let config = BrokerConfig {
        clock: Arc::new(clock.clone()),
        background_timers: false,
        seed: Some(7),
        limits: small_limits(),
        message_segment_bytes: 1,
        ..BrokerConfig::default()
    };
    Broker::open(dir, config).await.unwrap()
}

/// No fsync: tests reopen cleanly; durability modes are storage's to test.
pub(super) fn spec(partitions: u32) -> TopicSpec {
    TopicSpec {
        durability: Durability::None,
        ..TopicSpec::with_partitions(partitions)
    }
}

pub(super) fn msg(payload: &str) -> OutgoingMessage {
    OutgoingMessage::new(payload.to_owned())
}

fn keyed(payload: &str, key: &str) -> OutgoingMessage {
    msg(payload).with_key(key.to_owned())
}

pub(super) fn payloads(records: &[TopicRecord]) -> Vec<String> {
    records
        .iter()
        .map(|r| String::from_utf8(r.message.payload.to_vec()).unwrap())
        .collect()
}

pub(super) fn read_all(broker: &Broker, topic: &str, partition: u32) -> Vec<TopicRecord> {
    broker
        .read_topic(topic, partition, Position::Earliest, usize::MAX)
        .unwrap()
}

pub(super) fn ends(broker: &Broker, topic: &str) -> Vec<u64> {
    let info = broker.describe_topic(topic).unwrap();
    info.partitions.iter().map(|p| p.end_offset).collect()
}

fn topic_names(broker: &Broker) -> Vec<String> {
    broker.list_topics().into_iter().map(String::from).collect()
}

pub(super) fn pos(partition: u32, offset: u64) -> TopicPosition {
    TopicPosition { partition, offset }
}

// ---- Admin ----

#[tokio::test]
async fn topics_are_created_listed_described_and_kept_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let orders = TopicSpec {
        keyless: KeylessPlacement::RoundRobin,
        retention: TopicRetention {
            max_age: None,
            max_bytes: Some(1 << 20),
            ..TopicRetention::default()
        },
        ..spec(3)
    };
    broker.create_topic("orders", orders.clone()).await.unwrap();
    broker.create_topic("audit", spec(1)).await.unwrap();
    // Topics and queues are separate namespaces.
    broker
        .create_queue("orders", super::tests::spec(3))
        .await
        .unwrap();
    assert_eq!(topic_names(&broker), ["audit", "orders"]);
    broker
        .publish_to_partition("orders", 1, vec![msg("a"), msg("b")])
        .await
        .unwrap();
    clock.advance(5);
    broker
        .publish_to_partition("orders", 1, vec![msg("c")])
        .await
        .unwrap();
    let info = broker.describe_topic("orders").unwrap();
    assert_eq!(info.name.as_str(), "orders");
    assert_eq!(info.spec, orders);
    assert_eq!(info.partitions.len(), 3);
    let p1 = &info.partitions[1];
    assert_eq!((p1.partition, p1.start_offset, p1.end_offset), (1, 0, 3));
    assert_eq!(p1.oldest_timestamp_ms, Some(T0));
    assert!(p1.bytes > 0);
    let p0 = &info.partitions[0];
    assert_eq!(
        (p0.start_offset, p0.end_offset, p0.oldest_timestamp_ms),
        (0, 0, None)
    );
    drop(broker);

    let broker = open(dir.path(), &clock).await;
    assert_eq!(topic_names(&broker), ["audit", "orders"]);
    assert_eq!(broker.describe_topic("orders").unwrap(), info);
    assert_eq!(payloads(&read_all(&broker, "orders", 1)), ["a", "b", "c"]);
    assert_eq!(broker.list_queues().len(), 2, "orders and orders.dlq");
}

#[tokio::test]
async fn deleted_topic_is_gone_and_its_name_starts_empty() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(2)).await.unwrap();
    broker
        .publish_to_topic("t", vec![msg("x"), msg("y")])
        .await
        .unwrap();
    broker.delete_topic("t").await.unwrap();
    assert!(broker.list_topics().is_empty());
    assert!(!dir.path().join("topics").join("t").exists());
    assert!(matches!(
        broker.read_topic("t", 0, Position::Earliest, 10),
        Err(BrokerError::TopicNotFound { .. })
    ));
    broker.create_topic("t", spec(1)).await.unwrap();
    assert_eq!(ends(&broker, "t"), [0]);
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert_eq!(ends(&broker, "t"), [0]);
}

#[tokio::test]
async fn partitions_only_grow_and_new_keys_follow_the_new_count() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(2)).await.unwrap();
    broker
        .publish_to_topic("t", vec![keyed("before", "k")])
        .await
        .unwrap();
    for requested in [2, 1, 0] {
        let e = broker.add_partitions("t", requested).await.unwrap_err();
        assert!(
            matches!(e, BrokerError::PartitionsCanOnlyGrow { current: 2, requested: r, .. } if r == requested),
            "{e}"
        );
    }
    assert!(matches!(
        broker.add_partitions("t", 1025).await,
        Err(BrokerError::InvalidSetting {
            setting: "partitions",
            ..
        })
    ));
    assert_eq!(broker.describe_topic("t").unwrap().spec.partitions, 2);
    broker.add_partitions("t", 5).await.unwrap();
    let got = broker
        .publish_to_topic("t", vec![keyed("after", "k")])
        .await
        .unwrap();
    assert_eq!(got[0].partition, partition_for_key(b"k", 5));
    drop(broker);

    let broker = open(dir.path(), &clock).await;
    let info = broker.describe_topic("t").unwrap();
    assert_eq!((info.spec.partitions, info.partitions.len()), (5, 5));
    let old = partition_for_key(b"k", 2);
    assert_eq!(payloads(&read_all(&broker, "t", old))[0], "before");
    let records = read_all(&broker, "t", got[0].partition);
    assert_eq!(payloads(&records).last().map(String::as_str), Some("after"));
}

#[tokio::test]
async fn partitions_left_by_an_interrupted_add_start_empty() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    drop(broker);
    // What an add_partitions that crashed before its metadata write leaves behind.
    let stale = dir.path().join("topics").join("t").join("1");
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(stale.join("leftover"), b"not a partition").unwrap();
    let broker = open(dir.path(), &clock).await;
    assert_eq!(ends(&broker, "t"), [0]);
    broker.add_partitions("t", 2).await.unwrap();
    assert_eq!(ends(&broker, "t"), [0, 0]);
    assert!(!stale.join("leftover").exists());
}

// ---- Publish ----

#[tokio::test]
async fn keyed_messages_go_to_kafkas_partition_in_publish_order() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(4)).await.unwrap();
    let keys = ["alpha", "beta", "gamma", "delta", "alpha", "beta", "alpha"];
    let batch = keys
        .iter()
        .enumerate()
        .map(|(i, k)| keyed(&format!("{k}-{i}"), k))
        .collect();
    let got = broker.publish_to_topic("t", batch).await.unwrap();
    for (key, position) in keys.iter().zip(&got) {
        assert_eq!(position.partition, partition_for_key(key.as_bytes(), 4));
    }
    let alpha = partition_for_key(b"alpha", 4);
    let alphas: Vec<String> = payloads(&read_all(&broker, "t", alpha))
        .into_iter()
        .filter(|p| p.starts_with("alpha"))
        .collect();
    assert_eq!(alphas, ["alpha-0", "alpha-4", "alpha-6"]);
    // Offsets within a partition are dense and in publish order.
    let mut in_alpha: Vec<u64> = got
        .iter()
        .filter(|p| p.partition == alpha)
        .map(|p| p.offset)
        .collect();
    let sorted = in_alpha.clone();
    in_alpha.sort_unstable();
    assert_eq!(in_alpha, sorted);
    assert_eq!(in_alpha, (0..in_alpha.len() as u64).collect::<Vec<_>>());
}

#[tokio::test]
async fn round_robin_rotates_per_message_and_sticky_batch_per_call() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let round_robin = TopicSpec {
        keyless: KeylessPlacement::RoundRobin,
        ..spec(3)
    };
    broker.create_topic("rr", round_robin).await.unwrap();
    broker.create_topic("sticky", spec(3)).await.unwrap();
    let four = || (0..4).map(|i| msg(&i.to_string())).collect::<Vec<_>>();
    let rr = broker.publish_to_topic("rr", four()).await.unwrap();
    assert_eq!(rr, [pos(0, 0), pos(1, 0), pos(2, 0), pos(0, 1)]);
    let rr = broker.publish_to_topic("rr", four()).await.unwrap();
    assert_eq!(rr, [pos(1, 1), pos(2, 1), pos(0, 2), pos(1, 2)]);

    let first = broker.publish_to_topic("sticky", four()).await.unwrap();
    assert_eq!(first, [pos(0, 0), pos(0, 1), pos(0, 2), pos(0, 3)]);
    let second = broker.publish_to_topic("sticky", four()).await.unwrap();
    assert!(second.iter().all(|p| p.partition == 1), "{second:?}");
    // Keyed messages in a sticky call still go to their key's partition.
    let mixed = vec![msg("free"), keyed("bound", "k")];
    let got = broker.publish_to_topic("sticky", mixed).await.unwrap();
    assert_eq!(got[0].partition, 2);
    assert_eq!(got[1].partition, partition_for_key(b"k", 3));
}

#[tokio::test]
async fn records_keep_every_field_the_topic_does_not_act_on() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(2)).await.unwrap();
    let id = MessageId::parse("01ARZ3NDEKTSV4RRFFQ69G5FAV").unwrap();
    let full = msg("payload")
        .with_id(id)
        .with_key("k")
        .with_header("type", "order.created")
        .with_priority(7)
        .with_delay(Duration::from_secs(60))
        .with_ttl(Duration::from_secs(600))
        .with_dedup_id("d-1");
    let got = broker
        .publish_to_partition("t", 1, vec![full, msg("plain")])
        .await
        .unwrap();
    assert_eq!(got, [pos(1, 0), pos(1, 1)]);
    // Read at once: the delay does not hold a record back from a reader by position.
    let records = read_all(&broker, "t", 1);
    assert_eq!(records.len(), 2);
    let r = &records[0];
    assert_eq!((r.partition, r.offset, r.producer.as_ref()), (1, 0, None));
    let m = &r.message;
    assert_eq!(m.id, id);
    assert!(m.id_chosen);
    assert_eq!(m.key.as_deref(), Some(&b"k"[..]));
    assert_eq!(
        m.headers.get("type").map(String::as_str),
        Some("order.created")
    );
    assert_eq!(m.payload, "payload");
    assert_eq!(m.published_at, T0);
    assert_eq!(m.priority, 7);
    assert_eq!(m.deliver_at, Some(T0 + 60_000));
    assert_eq!(m.expires_at, Some(T0 + 600_000));
    assert_eq!(m.dedup_id.as_deref(), Some("d-1"));
    // A dedup id is kept, not acted on: the same one is stored again.
    let again = msg("again").with_dedup_id("d-1");
    let got = broker
        .publish_to_partition("t", 1, vec![again])
        .await
        .unwrap();
    assert_eq!(got, [pos(1, 2)]);
}

// ---- Read ----

#[tokio::test]
async fn reads_start_at_earliest_latest_an_offset_or_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    for i in 0..5 {
        broker
            .publish_to_partition("t", 0, vec![msg(&format!("m{i}"))])
            .await
            .unwrap();
        clock.advance(1_000);
    }
    let read = |from, max| payloads(&broker.read_topic("t", 0, from, max).unwrap());
    assert_eq!(read(Position::Earliest, 10), ["m0", "m1", "m2", "m3", "m4"]);
    assert_eq!(read(Position::Earliest, 2), ["m0", "m1"]);
    assert_eq!(read(Position::Offset(3), 10), ["m3", "m4"]);
    assert!(read(Position::Latest, 10).is_empty());
    assert!(
        read(Position::Offset(5), 10).is_empty(),
        "the end reads empty"
    );
    assert_eq!(
        read(Position::Timestamp(T0 + 2_000), 10),
        ["m2", "m3", "m4"]
    );
    assert_eq!(read(Position::Timestamp(T0 + 1_500), 1), ["m2"]);
    assert_eq!(read(Position::Timestamp(0), 1), ["m0"]);
    assert!(read(Position::Timestamp(T0 + 60_000), 10).is_empty());
    assert!(read(Position::Earliest, 0).is_empty());
    let offsets: Vec<u64> = broker
        .read_topic("t", 0, Position::Earliest, 10)
        .unwrap()
        .iter()
        .map(|r| r.offset)
        .collect();
    assert_eq!(offsets, [0, 1, 2, 3, 4]);
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    let records = broker
        .read_topic("t", 0, Position::Timestamp(T0 + 4_000), 10)
        .unwrap();
    assert_eq!(payloads(&records), ["m4"]);
}

#[tokio::test]
async fn offsets_beyond_the_end_are_refused_with_the_valid_range() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    broker
        .publish_to_partition("t", 0, vec![msg("a"), msg("b")])
        .await
        .unwrap();
    let e = broker
        .read_topic("t", 0, Position::Offset(3), 10)
        .unwrap_err();
    assert!(
        matches!(
            e,
            BrokerError::OffsetOutOfRange {
                partition: 0,
                offset: 3,
                start: 0,
                end: 2,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("offsets 0 to 2"), "{e}");
}

// ---- Retention ----

/// Publishes `n` messages of about 1 KB one at a time to partition 0.
async fn fill(broker: &Broker, topic: &str, n: usize) {
    for i in 0..n {
        let payload = format!("{i:04}{}", "x".repeat(1000));
        broker
            .publish_to_partition(topic, 0, vec![msg(&payload)])
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn retention_by_bytes_deletes_whole_oldest_segments_of_each_partition() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let bounded = TopicSpec {
        retention: TopicRetention {
            max_age: None,
            max_bytes: Some(50_000),
            ..TopicRetention::default()
        },
        ..spec(2)
    };
    broker.create_topic("t", bounded).await.unwrap();
    fill(&broker, "t", 150).await;
    broker
        .publish_to_partition("t", 1, vec![msg("small")])
        .await
        .unwrap();
    let before = broker.describe_topic("t").unwrap();
    assert!(before.partitions[0].bytes > 150_000, "{before:?}");
    let report = broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert!(report.deleted_segments >= 2, "{report:?}");
    let after = broker.describe_topic("t").unwrap();
    let p0 = &after.partitions[0];
    // Whole segments: what is left is over the bound by less than one segment.
    assert!(p0.bytes <= 50_000 + 40_000, "{p0:?}");
    assert!(p0.bytes < before.partitions[0].bytes);
    assert_eq!(p0.end_offset, 150);
    assert!(p0.start_offset > 0);
    // The first record kept is the first one at the new start.
    let first = &read_all(&broker, "t", 0)[0];
    assert_eq!(first.offset, p0.start_offset);
    assert_eq!(p0.oldest_timestamp_ms, Some(first.message.published_at));
    assert_eq!(after.partitions[1], before.partitions[1], "under its bound");
    // Below the start is out of range, naming the new range.
    let e = broker
        .read_topic("t", 0, Position::Offset(0), 10)
        .unwrap_err();
    assert!(
        matches!(e, BrokerError::OffsetOutOfRange { offset: 0, start, end: 150, .. } if start == p0.start_offset),
        "{e}"
    );
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert_eq!(broker.describe_topic("t").unwrap(), after);
}

#[tokio::test]
async fn retention_by_age_deletes_segments_whose_records_are_all_too_old() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let hour = TopicSpec {
        retention: TopicRetention {
            max_age: Some(Duration::from_secs(3600)),
            max_bytes: None,
            ..TopicRetention::default()
        },
        ..spec(1)
    };
    broker.create_topic("t", hour).await.unwrap();
    fill(&broker, "t", 60).await;
    clock.advance(3_600_000);
    assert_eq!(
        broker
            .maintain_now(Checkpoint::WhenDue)
            .await
            .unwrap()
            .deleted_segments,
        0
    );
    assert_eq!(
        broker.describe_topic("t").unwrap().partitions[0].start_offset,
        0
    );
    clock.advance(1);
    fill(&broker, "t", 1).await;
    let report = broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert!(report.deleted_segments >= 1, "{report:?}");
    let p0 = broker.describe_topic("t").unwrap().partitions[0].clone();
    assert!(p0.start_offset > 0 && p0.start_offset <= 60, "{p0:?}");
    assert_eq!(p0.end_offset, 61);
    // Every record left is either new or in the active segment with new ones.
    let earliest = broker.read_topic("t", 0, Position::Earliest, 1).unwrap();
    assert_eq!(earliest[0].offset, p0.start_offset);
}

// ---- Bad input ----

#[tokio::test]
async fn bad_input_is_a_typed_error_that_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(2)).await.unwrap();
    broker
        .publish_to_partition("t", 0, vec![msg("kept")])
        .await
        .unwrap();

    assert!(matches!(
        broker.create_topic("t", spec(5)).await,
        Err(BrokerError::TopicExists { .. })
    ));
    assert!(matches!(
        broker.create_topic("a/b", spec(1)).await,
        Err(BrokerError::InvalidNameCharacter { character: '/', .. })
    ));
    assert!(matches!(
        broker.create_topic("zero", spec(0)).await,
        Err(BrokerError::InvalidSetting {
            setting: "partitions",
            ..
        })
    ));
    let bad_bytes = TopicSpec {
        retention: TopicRetention {
            max_age: None,
            max_bytes: Some(0),
            ..TopicRetention::default()
        },
        ..spec(1)
    };
    assert!(matches!(
        broker.create_topic("bad", bad_bytes).await,
        Err(BrokerError::InvalidSetting {
            setting: "retention.max_bytes",
            ..
        })
    ));

    let unknown = |r: Result<Vec<TopicPosition>>| {
        assert!(
            matches!(&r, Err(BrokerError::TopicNotFound { topic }) if topic == "nope"),
            "{r:?}"
        )
    };
    unknown(broker.publish_to_topic("nope", vec![msg("x")]).await);
    unknown(broker.publish_to_partition("nope", 0, vec![msg("x")]).await);
    unknown(
        broker
            .publish_idempotent("nope", 0, "p", 0, vec![msg("x")])
            .await,
    );
    assert!(matches!(
        broker.read_topic("nope", 0, Position::Earliest, 1),
        Err(BrokerError::TopicNotFound { .. })
    ));
    assert!(matches!(
        broker.describe_topic("nope"),
        Err(BrokerError::TopicNotFound { .. })
    ));
    assert!(matches!(
        broker.delete_topic("nope").await,
        Err(BrokerError::TopicNotFound { .. })
    ));
    assert!(matches!(
        broker.add_partitions("nope", 3).await,
        Err(BrokerError::TopicNotFound { .. })
    ));
    // A queue of that name is not a topic.
    broker
        .create_queue("q", super::tests::spec(3))
        .await
        .unwrap();
    unknown(broker.publish_to_topic("nope", vec![msg("x")]).await);
    assert!(matches!(
        broker.publish_to_topic("q", vec![msg("x")]).await,
        Err(BrokerError::TopicNotFound { .. })
    ));

    let e = broker
        .publish_to_partition("t", 2, vec![msg("x")])
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            BrokerError::PartitionNotFound {
                partition: 2,
                partitions: 2,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("0 to 1"), "{e}");
    assert!(matches!(
        broker.read_topic("t", 9, Position::Earliest, 1),
        Err(BrokerError::PartitionNotFound { partition: 9, .. })
    ));
    assert!(matches!(
        broker
            .publish_idempotent("t", 2, "p", 0, vec![msg("x")])
            .await,
        Err(BrokerError::PartitionNotFound { .. })
    ));

    // One invalid message fails the whole call: nothing of it is stored anywhere.
    let mixed = vec![
        keyed("fine", "a"),
        msg("fine"),
        msg("x").with_header("ferry-id", "forged"),
    ];
    assert!(matches!(
        broker.publish_to_topic("t", mixed).await,
        Err(BrokerError::ReservedHeaderName { .. })
    ));
    let too_big = vec![msg("ok"), msg(&"x".repeat(1025))];
    assert!(matches!(
        broker.publish_to_partition("t", 1, too_big).await,
        Err(BrokerError::PayloadTooLarge { .. })
    ));
    // Over the batch limit for one partition: refused before anything is written.
    let many: Vec<_> = (0..60).map(|_| msg(&"y".repeat(1000))).collect();
    let e = broker.publish_to_partition("t", 1, many).await.unwrap_err();
    assert!(
        matches!(e, BrokerError::BatchTooLarge { partition: 1, .. }),
        "{e}"
    );

    assert_eq!(topic_names(&broker), ["t"]);
    let info = broker.describe_topic("t").unwrap();
    assert_eq!(info.spec, spec(2));
    assert_eq!(ends(&broker, "t"), [1, 0]);
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert_eq!(topic_names(&broker), ["t"]);
    assert_eq!(ends(&broker, "t"), [1, 0]);
    assert!(!dir.path().join("topics").join("zero").exists());
}

#[tokio::test]
async fn an_unreadable_stored_spec_is_a_typed_error_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    drop(broker);
    {
        let mut meta = ferry_storage::MetaStore::open(&dir.path().join("meta")).unwrap();
        meta.put("topic/t", b"ferry-topic-spec 1\npartitions=0\n".to_vec())
            .unwrap();
    }
    let config = BrokerConfig {
        clock: Arc::new(clock.clone()),
        background_timers: false,
        ..BrokerConfig::default()
    };
    let e = Broker::open(dir.path(), config).await.unwrap_err();
    assert!(
        matches!(e, BrokerError::MalformedTopicSpec { ref topic, .. } if topic == "t"),
        "{e}"
    );
}

// ---- Properties ----

/// One publish of the property test: per message, its key (if any) out of a few.
#[derive(Debug, Clone)]
enum Publish {
    Topic(Vec<Option<u8>>),
    Partition(u32, usize),
}

fn publishes() -> impl Strategy<Value = Vec<Publish>> {
    let topic = prop::collection::vec(prop::option::of(0u8..6), 1..6).prop_map(Publish::Topic);
    let partition = (0u32..3, 1usize..4).prop_map(|(p, n)| Publish::Partition(p, n));
    prop::collection::vec(prop_oneof![3 => topic, 1 => partition], 1..12)
}

pub(super) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Every key's messages land in one partition, in publish order; every returned
    /// position holds the message published there; reading from any offset gives what
    /// reading everything and skipping gives — also after a reopen.
    #[test]
    fn keys_stay_in_one_partition_in_order_and_reads_from_any_offset_agree(
        publishes in publishes(),
        round_robin in any::<bool>(),
        skip in 0usize..40,
    ) {
        runtime().block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let clock = ManualClock::new(T0);
            let broker = open(dir.path(), &clock).await;
            let keyless = if round_robin {
                KeylessPlacement::RoundRobin
            } else {
                KeylessPlacement::StickyBatch
            };
            broker.create_topic("t", TopicSpec { keyless, ..spec(3) }).await.unwrap();
            // payload → (key, position); keys' positions in publish order.
            let mut published = Vec::new();
            let mut n = 0;
            for publish in &publishes {
                let (messages, keys): (Vec<_>, Vec<_>) = match publish {
                    Publish::Topic(keys) => keys
                        .iter()
                        .map(|k| {
                            n += 1;
                            let m = msg(&format!("m{n}"));
                            let m = match k { Some(k) => m.with_key(vec![*k]), None => m };
                            (m, *k)
                        })
                        .unzip(),
                    Publish::Partition(_, count) => (0..*count)
                        .map(|_| {
                            n += 1;
                            (msg(&format!("m{n}")), None)
                        })
                        .unzip(),
                };
                let payloads: Vec<String> =
                    messages.iter().map(|m| String::from_utf8(m.payload.to_vec()).unwrap()).collect();
                let got = match publish {
                    Publish::Topic(_) => broker.publish_to_topic("t", messages).await.unwrap(),
                    Publish::Partition(p, _) => {
                        broker.publish_to_partition("t", *p, messages).await.unwrap()
                    }
                };
                if let Publish::Partition(p, _) = publish {
                    prop_assert!(got.iter().all(|g| g.partition == *p));
                }
                if let (Publish::Topic(_), KeylessPlacement::StickyBatch) = (publish, keyless) {
                    let free: Vec<u32> = got.iter().zip(&keys)
                        .filter(|(_, k)| k.is_none()).map(|(g, _)| g.partition).collect();
                    prop_assert!(free.windows(2).all(|w| w[0] == w[1]), "{free:?}");
                }
                for ((payload, key), position) in payloads.into_iter().zip(keys).zip(got) {
                    published.push((payload, key, position));
                }
            }
            let mut all: Vec<Vec<TopicRecord>> = Vec::new();
            for p in 0..3 {
                all.push(read_all(&broker, "t", p));
            }
            for (payload, key, position) in &published {
                let record = &all[position.partition as usize][position.offset as usize];
                prop_assert_eq!(record.offset, position.offset);
                prop_assert_eq!(String::from_utf8(record.message.payload.to_vec()).unwrap(), payload.clone());
                if let Some(key) = key {
                    prop_assert_eq!(position.partition, partition_for_key(&[*key], 3));
                    prop_assert_eq!(record.message.key.as_deref(), Some(&[*key][..]));
                }
            }
            for key in 0u8..6 {
                let positions: Vec<TopicPosition> = published
                    .iter()
                    .filter(|(_, k, _)| *k == Some(key))
                    .map(|(_, _, p)| *p)
                    .collect();
                prop_assert!(positions.windows(2).all(|w| w[0].partition == w[1].partition
                    && w[0].offset < w[1].offset), "{positions:?}");
            }
            for (p, records) in all.iter().enumerate() {
                let from = (skip as u64).min(records.len() as u64);
                let read = broker
                    .read_topic("t", p as u32, Position::Offset(from), usize::MAX)
                    .unwrap();
                prop_assert_eq!(&read[..], &records[from as usize..]);
                let few = broker
                    .read_topic("t", p as u32, Position::Offset(from), 2)
                    .unwrap();
                prop_assert_eq!(&few[..], &records[from as usize..][..few.len()]);
                prop_assert_eq!(few.len(), 2.min(records.len() - from as usize));
            }
            drop(broker);
            let broker = open(dir.path(), &clock).await;
            for p in 0..3u32 {
                let records = read_all(&broker, "t", p);
                let want: Vec<&String> = published
                    .iter()
                    .filter(|(_, _, pos)| pos.partition == p)
                    .map(|(payload, _, _)| payload)
                    .collect();
                let got = payloads(&records);
                prop_assert_eq!(got.iter().collect::<Vec<_>>(), want);
            }
            Ok(())
        })?;
    }
}
