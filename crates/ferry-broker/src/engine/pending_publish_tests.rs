//! Publishes begun before the ones before them are durable (`engine/pending_publish.rs`):
//! call order is storage order whatever order they are awaited in, a refused begin stores
//! nothing and leaves no hole, subscriptions take every batch once and in order, and what
//! was answered is there after a reopen.

use std::time::Duration;

use ferry_storage::ManualClock;

use super::tests::T0;
use super::topic_tests::{msg, open, payloads, read_all, spec};
use super::*;
use crate::spec::Durability;
use crate::subscription::SubscriptionSpec;
use crate::topic::{TopicPosition, TopicSpec};

fn at(partition: u32, offsets: std::ops::Range<u64>) -> Vec<TopicPosition> {
    offsets
        .map(|offset| TopicPosition { partition, offset })
        .collect()
}

fn batch(prefix: &str, count: usize) -> Vec<OutgoingMessage> {
    (0..count).map(|i| msg(&format!("{prefix}{i}"))).collect()
}

#[tokio::test]
async fn appends_begun_one_after_another_land_in_call_order_however_they_are_awaited() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(2)).await.unwrap();
    let first = broker
        .begin_publish_to_partition("t", 1, batch("a", 3))
        .unwrap();
    let second = broker
        .begin_publish_to_partition("t", 1, batch("b", 2))
        .unwrap();
    let third = broker
        .begin_publish_to_partition("t", 1, batch("c", 1))
        .unwrap();
    // Awaited last first: the positions were fixed when each was begun.
    assert_eq!(third.durable().await.unwrap(), at(1, 5..6));
    assert_eq!(second.durable().await.unwrap(), at(1, 3..5));
    assert_eq!(first.durable().await.unwrap(), at(1, 0..3));
    assert_eq!(
        payloads(&read_all(&broker, "t", 1)),
        ["a0", "a1", "a2", "b0", "b1", "c0"]
    );
    assert!(read_all(&broker, "t", 0).is_empty());
}

#[tokio::test]
async fn appends_begun_by_topic_keep_call_order_in_every_partition() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(3)).await.unwrap();
    let keyed = |prefix: &str| -> Vec<OutgoingMessage> {
        (0..24)
            .map(|i| msg(&format!("{prefix}{i}")).with_key(format!("k{}", i % 12)))
            .collect()
    };
    let first = broker.begin_publish_to_topic("t", keyed("a")).unwrap();
    let second = broker.begin_publish_to_topic("t", keyed("b")).unwrap();
    let second = second.durable().await.unwrap();
    let first = first.durable().await.unwrap();
    let used: std::collections::BTreeSet<u32> = first.iter().map(|p| p.partition).collect();
    assert!(used.len() > 1, "twelve keys in one partition: {first:?}");
    for partition in used {
        let offsets = |got: &[TopicPosition]| -> Vec<u64> {
            got.iter()
                .filter(|p| p.partition == partition)
                .map(|p| p.offset)
                .collect()
        };
        let (a, b) = (offsets(&first), offsets(&second));
        assert!(
            a.iter().max() < b.iter().min(),
            "partition {partition}: first call at {a:?}, second at {b:?}"
        );
        let stored = payloads(&read_all(&broker, "t", partition));
        let firsts = stored.iter().take_while(|p| p.starts_with('a')).count();
        assert!(
            stored[firsts..].iter().all(|p| p.starts_with('b')),
            "partition {partition}: {stored:?}"
        );
    }
}

#[tokio::test]
async fn a_refused_begin_stores_nothing_and_leaves_no_hole_between_its_neighbours() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    let first = broker
        .begin_publish_to_partition("t", 0, batch("a", 2))
        .unwrap();
    // Over the payload limit (1 KiB in these tests), with a good message before it.
    let too_large = vec![msg("fine"), msg(&"x".repeat(4096))];
    let refused = broker.begin_publish_to_partition("t", 0, too_large);
    assert!(
        matches!(refused, Err(BrokerError::PayloadTooLarge { .. })),
        "{:?}",
        refused.err()
    );
    let no_partition = broker.begin_publish_to_partition("t", 7, batch("z", 1));
    assert!(
        matches!(no_partition, Err(BrokerError::PartitionNotFound { .. })),
        "{:?}",
        no_partition.err()
    );
    let no_topic = broker.begin_publish_to_topic("nope", batch("z", 1));
    assert!(
        matches!(no_topic, Err(BrokerError::TopicNotFound { .. })),
        "{:?}",
        no_topic.err()
    );
    let last = broker
        .begin_publish_to_partition("t", 0, batch("c", 1))
        .unwrap();
    assert_eq!(first.durable().await.unwrap(), at(0, 0..2));
    assert_eq!(last.durable().await.unwrap(), at(0, 2..3));
    assert_eq!(payloads(&read_all(&broker, "t", 0)), ["a0", "a1", "c0"]);
    // Nothing begun, nothing to wait for.
    let empty = broker
        .begin_publish_to_partition("t", 0, Vec::new())
        .unwrap();
    assert!(empty.durable().await.unwrap().is_empty());
    assert_eq!(read_all(&broker, "t", 0).len(), 3);
}

#[tokio::test]
async fn a_subscription_takes_every_begun_append_once_and_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    let mut sub = SubscriptionSpec::new(Name::new("t").unwrap());
    sub.delivery.durability = Durability::None;
    sub.delivery.lease = Duration::from_secs(10);
    broker.create_subscription("s", sub).await.unwrap();
    let pending: Vec<_> = (0..5)
        .map(|i| {
            broker
                .begin_publish_to_partition("t", 0, batch(&format!("m{i}-"), 3))
                .unwrap()
        })
        .collect();
    // A publish is answered once the subscription's references are durable too, so each
    // answered batch is there to receive.
    for (i, p) in pending.into_iter().enumerate().rev() {
        let i = i as u64;
        assert_eq!(p.durable().await.unwrap(), at(0, 3 * i..3 * i + 3));
    }
    let got = broker.receive("s", "c", 100, None, None).await.unwrap();
    let got: Vec<String> = got
        .iter()
        .map(|m| String::from_utf8(m.payload.to_vec()).unwrap())
        .collect();
    let expected: Vec<String> = (0..5)
        .flat_map(|i| (0..3).map(move |j| format!("m{i}-{j}")))
        .collect();
    assert_eq!(got, expected);
}

#[tokio::test]
async fn what_begun_appends_answered_is_there_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let answered = {
        let broker = open(dir.path(), &clock).await;
        let fsync = TopicSpec {
            durability: Durability::Fsync,
            ..TopicSpec::with_partitions(1)
        };
        broker.create_topic("t", fsync).await.unwrap();
        let pending: Vec<_> = (0..8)
            .map(|i| {
                broker
                    .begin_publish_to_partition("t", 0, batch(&format!("m{i}-"), 2))
                    .unwrap()
            })
            .collect();
        let mut answered = Vec::new();
        for p in pending {
            answered.extend(p.durable().await.unwrap());
        }
        answered
    };
    assert_eq!(answered, at(0, 0..16));
    let broker = open(dir.path(), &clock).await;
    let stored = read_all(&broker, "t", 0);
    assert_eq!(
        stored.iter().map(|r| r.offset).collect::<Vec<_>>(),
        (0..16).collect::<Vec<_>>()
    );
    let expected: Vec<String> = (0..8)
        .flat_map(|i| (0..2).map(move |j| format!("m{i}-{j}")))
        .collect();
    assert_eq!(payloads(&stored), expected);
}
