//! The broker's storage stats: every kind of log it owns reports its group commits and
//! fdatasyncs, and a deleted queue's observations stay in the sums.

use ferry_storage::ManualClock;

use super::tests::{T0, open};
use super::*;
use crate::spec::Durability;
use crate::spec::{DeadLetter, QueueSpec};
use crate::topic::TopicSpec;

fn fsync_queue() -> QueueSpec {
    QueueSpec {
        durability: Durability::Fsync,
        dead_letter: DeadLetter::Disabled,
        ..QueueSpec::default()
    }
}

#[tokio::test]
async fn publishes_and_acks_show_up_as_commits_and_fsyncs_of_their_logs() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let start = broker.storage_stats();
    broker.create_queue("q", fsync_queue()).await.unwrap();
    for i in 0..4 {
        let batch = (0..3)
            .map(|j| OutgoingMessage::new(format!("m{i}-{j}")))
            .collect();
        broker.publish_batch("q", batch).await.unwrap();
    }
    let published = broker.storage_stats();
    let messages = &published.queue_messages;
    let grew = |now: u64, before: u64| now - before;
    assert_eq!(
        grew(
            messages.commit_records.sum,
            start.queue_messages.commit_records.sum
        ),
        12,
        "every published message was in exactly one group"
    );
    // Sequential publishes under Fsync: one group, one fdatasync each.
    assert_eq!(
        grew(
            messages.fsync_ns.count(),
            start.queue_messages.fsync_ns.count()
        ),
        4
    );
    assert_eq!(messages.commit_records.count(), messages.fsync_ns.count());

    let got = broker.receive("q", "c", 12, None, None).await.unwrap();
    assert_eq!(got.len(), 12);
    for m in &got {
        broker.ack("q", m.seq, m.token).await.unwrap();
    }
    let settled = broker.storage_stats();
    assert!(
        settled.queue_journals.commit_records.sum
            >= published.queue_journals.commit_records.sum + 12,
        "leases and acks are journaled: {:?}",
        settled.queue_journals.commit_records
    );
    assert!(settled.queue_journals.fsync_ns.count() > published.queue_journals.fsync_ns.count());
    assert_eq!(settled.queue_messages, published.queue_messages);

    let topic = TopicSpec {
        durability: Durability::Fsync,
        ..TopicSpec::with_partitions(2)
    };
    broker.create_topic("t", topic).await.unwrap();
    let batch = (0..6)
        .map(|i| OutgoingMessage::new(format!("r{i}")).with_key(format!("k{i}")))
        .collect();
    broker.publish_to_topic("t", batch).await.unwrap();
    let topics = broker.storage_stats().topic_partitions;
    assert_eq!(
        grew(
            topics.commit_records.sum,
            settled.topic_partitions.commit_records.sum
        ),
        6
    );
    assert!(topics.fsync_ns.count() > settled.topic_partitions.fsync_ns.count());
}

#[tokio::test]
async fn a_deleted_queue_stays_counted_so_the_sums_never_go_back() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", fsync_queue()).await.unwrap();
    broker
        .publish("q", OutgoingMessage::new("x"))
        .await
        .unwrap();
    let before = broker.storage_stats();
    broker.delete_queue("q").await.unwrap();
    let after = broker.storage_stats();
    assert_eq!(after.queue_messages, before.queue_messages);
    let total = after.total();
    assert_eq!(
        total.commit_records.sum,
        after.queue_messages.commit_records.sum
            + after.queue_journals.commit_records.sum
            + after.topic_partitions.commit_records.sum
    );
}
