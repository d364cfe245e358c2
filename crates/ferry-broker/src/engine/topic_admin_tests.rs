//! Changing a live topic: its settings (`update_topic`) and its start (`delete_records`),
//! each committed and kept across a reopen, with the refusals that change nothing.

use std::time::Duration;

use ferry_storage::ManualClock;

use super::tests::T0;
use super::topic_tests::{msg, open, payloads, read_all, spec};
use super::*;
use crate::error::ErrorKind;
use crate::filter::Filter;
use crate::spec::Durability;
use crate::subscription::{SubscriptionSpec, SubscriptionStart};
use crate::topic::{Position, TopicCompaction};

async fn publish(broker: &Broker, topic: &str, count: usize) {
    let messages = (0..count).map(|i| msg(&format!("m{i}"))).collect();
    broker
        .publish_to_partition(topic, 0, messages)
        .await
        .unwrap();
}

fn start(broker: &Broker, topic: &str) -> u64 {
    broker.describe_topic(topic).unwrap().partitions[0].start_offset
}

#[tokio::test]
async fn update_topic_changes_retention_and_compaction_and_keeps_them_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(2)).await.unwrap();
    let hour = Duration::from_secs(3600);
    let now = broker
        .update_topic("t", |s| {
            s.retention.max_age = Some(hour);
            s.retention.max_bytes = Some(1 << 20);
            s.compaction = Some(TopicCompaction::default());
        })
        .await
        .unwrap();
    assert_eq!(now.retention.max_age, Some(hour));
    assert_eq!(broker.describe_topic("t").unwrap().spec, now);
    let keyless = broker.publish_to_topic("t", vec![msg("no key")]).await;
    assert!(
        matches!(keyless, Err(BrokerError::KeyRequired { .. })),
        "compaction turned on requires keys from the next publish: {keyless:?}"
    );
    drop(broker);

    let broker = open(dir.path(), &clock).await;
    assert_eq!(broker.describe_topic("t").unwrap().spec, now);
    assert!(
        broker
            .publish_to_topic("t", vec![msg("no key")])
            .await
            .is_err()
    );
    broker
        .update_topic("t", |s| s.compaction = None)
        .await
        .unwrap();
    broker
        .publish_to_topic("t", vec![msg("no key")])
        .await
        .unwrap();
}

#[tokio::test]
async fn update_topic_refuses_fixed_and_invalid_settings_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(2)).await.unwrap();
    let before = broker.describe_topic("t").unwrap().spec;
    let fixed = broker
        .update_topic("t", |s| {
            s.retention.max_age = None;
            s.partitions = 3;
        })
        .await;
    assert!(
        matches!(
            fixed,
            Err(BrokerError::TopicSettingFixed {
                setting: "partitions",
                ..
            })
        ),
        "{fixed:?}"
    );
    let fixed = broker
        .update_topic("t", |s| s.durability = Durability::Fsync)
        .await;
    assert!(
        matches!(
            fixed,
            Err(BrokerError::TopicSettingFixed {
                setting: "durability",
                ..
            })
        ),
        "{fixed:?}"
    );
    let invalid = broker
        .update_topic("t", |s| s.retention.max_bytes = Some(0))
        .await;
    assert!(
        matches!(invalid, Err(BrokerError::InvalidSetting { .. })),
        "{invalid:?}"
    );
    assert_eq!(broker.describe_topic("t").unwrap().spec, before);
    let missing = broker.update_topic("nope", |_| {}).await;
    assert!(matches!(missing, Err(BrokerError::TopicNotFound { .. })));
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert_eq!(broker.describe_topic("t").unwrap().spec, before);
}

#[tokio::test]
async fn retention_set_by_update_topic_applies_at_the_next_housekeeping_pass() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    for i in 0..60 {
        let big = OutgoingMessage::new(vec![b'x'; 900]).with_header("n", i.to_string());
        broker.publish_to_topic("t", vec![big]).await.unwrap();
    }
    broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert_eq!(start(&broker, "t"), 0, "the default keeps seven days");
    broker
        .update_topic("t", |s| s.retention.max_bytes = Some(1))
        .await
        .unwrap();
    broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert!(
        start(&broker, "t") > 0,
        "the new size bound deleted segments"
    );
}

#[tokio::test]
async fn delete_records_moves_the_start_inside_a_segment_and_keeps_it_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    publish(&broker, "t", 10).await;
    assert_eq!(broker.delete_records("t", 0, 4).await.unwrap(), 4);
    let check = |broker: &Broker| {
        assert_eq!(start(broker, "t"), 4);
        let kept = read_all(broker, "t", 0);
        assert_eq!(kept[0].offset, 4);
        assert_eq!(payloads(&kept)[0], "m4");
        let below = broker.read_topic("t", 0, Position::Offset(3), 1);
        assert!(
            matches!(below, Err(BrokerError::OffsetOutOfRange { start: 4, .. })),
            "{below:?}"
        );
        let by_time = broker
            .read_topic("t", 0, Position::Timestamp(0), 1)
            .unwrap();
        assert_eq!(
            by_time[0].offset, 4,
            "a time before the start finds the start"
        );
    };
    check(&broker);
    assert_eq!(
        broker.delete_records("t", 0, 2).await.unwrap(),
        4,
        "an offset below the start deletes nothing"
    );
    let beyond = broker.delete_records("t", 0, 11).await;
    assert!(matches!(beyond, Err(BrokerError::OffsetOutOfRange { .. })));
    let missing = broker.delete_records("t", 1, 1).await;
    assert!(matches!(
        missing,
        Err(BrokerError::PartitionNotFound { .. })
    ));
    drop(broker);

    let broker = open(dir.path(), &clock).await;
    check(&broker);
    assert_eq!(broker.delete_records("t", 0, 10).await.unwrap(), 10);
    assert!(read_all(&broker, "t", 0).is_empty());
    publish(&broker, "t", 1).await;
    assert_eq!(read_all(&broker, "t", 0)[0].offset, 10);
    broker.delete_topic("t").await.unwrap();
    broker.create_topic("t", spec(1)).await.unwrap();
    publish(&broker, "t", 3).await;
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert_eq!(
        read_all(&broker, "t", 0).len(),
        3,
        "a topic made again under the name starts at 0"
    );
}

#[tokio::test]
async fn delete_records_deletes_the_whole_segments_below_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    for i in 0..60 {
        let big = OutgoingMessage::new(vec![b'x'; 900]).with_header("n", i.to_string());
        broker.publish_to_topic("t", vec![big]).await.unwrap();
    }
    let bytes = |broker: &Broker| broker.describe_topic("t").unwrap().partitions[0].bytes;
    let before = bytes(&broker);
    assert_eq!(broker.delete_records("t", 0, 55).await.unwrap(), 55);
    assert!(
        bytes(&broker) < before / 2,
        "{} of {before}",
        bytes(&broker)
    );
    assert_eq!(read_all(&broker, "t", 0).len(), 5);
}

fn subscription() -> SubscriptionSpec {
    let mut spec = SubscriptionSpec::new(Name::new("t").unwrap());
    spec.filter = Filter::parse("").unwrap();
    spec.start = SubscriptionStart::Earliest;
    spec.delivery.durability = Durability::None;
    spec
}

#[tokio::test]
async fn delete_records_waits_for_subscriptions_unless_the_topic_overrides_them() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    publish(&broker, "t", 10).await;
    broker
        .create_subscription("s", subscription())
        .await
        .unwrap();
    let held = broker.delete_records("t", 0, 5).await;
    assert!(
        matches!(
            held,
            Err(BrokerError::RecordsHeldBySubscription { needed: 0, .. })
        ),
        "{held:?}"
    );
    assert_eq!(held.unwrap_err().kind(), ErrorKind::Conflict);
    assert_eq!(start(&broker, "t"), 0, "a refused deletion changes nothing");

    broker
        .update_topic("t", |s| s.retention.overrides_subscriptions = true)
        .await
        .unwrap();
    assert_eq!(broker.delete_records("t", 0, 5).await.unwrap(), 5);
    let info = broker.describe_subscription("s").unwrap();
    assert_eq!(info.skipped.len(), 1, "{:?}", info.skipped);
    assert_eq!((info.skipped[0].from, info.skipped[0].to), (0, 5));
    let mut got = Vec::new();
    loop {
        let batch = broker.receive("s", "c", 100, None, None).await.unwrap();
        if batch.is_empty() {
            break;
        }
        for m in &batch {
            broker.ack("s", m.seq, m.token).await.unwrap();
        }
        got.extend(batch.into_iter().map(|m| m.payload));
    }
    let expected: Vec<_> = (5..10).map(|i| format!("m{i}").into_bytes()).collect();
    assert_eq!(got.iter().map(|p| p.to_vec()).collect::<Vec<_>>(), expected);
}
