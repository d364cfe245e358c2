//! Seeking subscriptions to a time or a snapshot: what is pending afterwards, in which
//! order, leases from before, restarts, snapshots' lifetime and retention, bad input.

use std::time::Duration;

use ferry_storage::ManualClock;

use super::tests::T0;
use super::topic_tests::{open, spec};
use super::*;
use crate::filter::Filter;
use crate::message::millis;
use crate::subscription::{Backlog, SubscriptionSpec};
use crate::topic::{TopicRetention, TopicSpec};
use crate::{ErrorKind, SeekTarget};

/// Between two publishes of [`publish_each`].
const STEP_MS: i64 = 1_000;

fn sub(filter: &str) -> SubscriptionSpec {
    let mut spec = SubscriptionSpec::new(Name::new("t").unwrap());
    spec.filter = Filter::parse(filter).unwrap();
    spec.delivery.durability = crate::spec::Durability::None;
    spec.delivery.lease = Duration::from_secs(10);
    spec
}

fn event(i: usize) -> OutgoingMessage {
    let subject = if i.is_multiple_of(2) {
        "orders.new"
    } else {
        "payments.done"
    };
    OutgoingMessage::new(format!("payload-{i}"))
        .with_key(format!("k{}", i % 3))
        .with_header("subject", subject)
        .with_header("n", i.to_string())
}

/// Publishes events `range` one at a time, [`STEP_MS`] apart by the clock; event `i` is
/// published at `T0 + i * STEP_MS` when the clock started at `T0`.
async fn publish_each(broker: &Broker, clock: &ManualClock, range: std::ops::Range<usize>) {
    for i in range {
        clock.set(T0 + i as i64 * STEP_MS);
        broker.publish_to_topic("t", vec![event(i)]).await.unwrap();
    }
}

async fn drain(broker: &Broker, queue: &str) -> Vec<ReceivedMessage> {
    let mut all = Vec::new();
    loop {
        let got = broker.receive(queue, "c", 100, None, None).await.unwrap();
        if got.is_empty() {
            return all;
        }
        for m in &got {
            broker.ack(queue, m.seq, m.token).await.unwrap();
        }
        all.extend(got);
    }
}

fn numbers(got: &[ReceivedMessage]) -> Vec<usize> {
    got.iter()
        .map(|m| m.headers["n"].parse().unwrap())
        .collect()
}

async fn topic_with_subscription(clock: &ManualClock, dir: &std::path::Path) -> Broker {
    let broker = open(dir, clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    broker.create_subscription("s", sub("")).await.unwrap();
    broker
}

#[tokio::test]
async fn seeking_to_a_time_redelivers_what_was_published_from_it_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = topic_with_subscription(&clock, dir.path()).await;
    publish_each(&broker, &clock, 0..10).await;
    assert_eq!(
        numbers(&drain(&broker, "s").await),
        (0..10).collect::<Vec<_>>()
    );
    // Between the 4th publish (event 3) and the 5th (event 4).
    broker
        .seek_subscription("s", SeekTarget::Time(T0 + 3 * STEP_MS + STEP_MS / 2))
        .await
        .unwrap();
    let again = drain(&broker, "s").await;
    assert_eq!(numbers(&again), (4..10).collect::<Vec<_>>());
    assert!(again.iter().all(|m| m.delivery == 1), "counted afresh");
    // Seeking back to before everything brings everything back, also what was just acked.
    broker
        .seek_subscription("s", SeekTarget::Time(0))
        .await
        .unwrap();
    assert_eq!(
        numbers(&drain(&broker, "s").await),
        (0..10).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn seeking_to_a_future_time_acknowledges_everything_published_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = topic_with_subscription(&clock, dir.path()).await;
    publish_each(&broker, &clock, 0..5).await;
    let leased = broker.receive("s", "c", 2, None, None).await.unwrap();
    assert_eq!(leased.len(), 2);
    let future = clock.now_ms() + 60_000;
    broker
        .seek_subscription("s", SeekTarget::Time(future))
        .await
        .unwrap();
    assert!(drain(&broker, "s").await.is_empty(), "nothing pending");
    // Published after the seek, but before the time: acknowledged too.
    publish_each(&broker, &clock, 5..7).await;
    assert!(drain(&broker, "s").await.is_empty());
    clock.set(future);
    broker.publish_to_topic("t", vec![event(7)]).await.unwrap();
    assert_eq!(numbers(&drain(&broker, "s").await), vec![7]);
    assert_eq!(
        broker
            .describe_subscription("s")
            .unwrap()
            .queue
            .stats
            .state
            .ready,
        0
    );
}

#[tokio::test]
async fn seeking_to_a_snapshot_brings_back_what_it_held_unacked_and_what_came_after() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = topic_with_subscription(&clock, dir.path()).await;
    publish_each(&broker, &clock, 0..5).await;
    let got = broker.receive("s", "c", 5, None, None).await.unwrap();
    for m in &got[..2] {
        broker.ack("s", m.seq, m.token).await.unwrap();
    }
    let info = broker.create_snapshot("before", "s").await.unwrap();
    assert_eq!(
        (
            info.name.as_str(),
            info.topic.as_str(),
            info.subscription.as_str()
        ),
        ("before", "t", "s")
    );
    // The oldest unacked message (event 2) was published at T0 + 2s.
    let lifetime = millis(crate::SNAPSHOT_LIFETIME);
    assert_eq!(info.expires_at_ms, T0 + 2 * STEP_MS + lifetime);
    for m in &got[2..] {
        broker.ack("s", m.seq, m.token).await.unwrap();
    }
    publish_each(&broker, &clock, 5..7).await;
    assert_eq!(numbers(&drain(&broker, "s").await), vec![5, 6]);
    broker
        .seek_subscription("s", SeekTarget::Snapshot("before".into()))
        .await
        .unwrap();
    assert_eq!(numbers(&drain(&broker, "s").await), vec![2, 3, 4, 5, 6]);
    assert_eq!(broker.list_snapshots(), vec![info.clone()]);
    assert_eq!(broker.describe_snapshot("before").unwrap(), info);
}

#[tokio::test]
async fn a_snapshot_holding_more_than_one_read_brings_it_all_back_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = topic_with_subscription(&clock, dir.path()).await;
    let total = subscriptions::CATCH_UP_RECORDS + 500;
    let events: Vec<OutgoingMessage> = (0..total).map(event).collect();
    for chunk in events.chunks(200) {
        broker.publish_to_topic("t", chunk.to_vec()).await.unwrap();
    }
    // Acked: 0..3 and 100; unacked in two runs below the cursor, the second longer than
    // one read.
    let first = broker.receive("s", "c", 101, None, None).await.unwrap();
    for m in first[..3].iter().chain(&first[100..]) {
        broker.ack("s", m.seq, m.token).await.unwrap();
    }
    broker.create_snapshot("snap", "s").await.unwrap();
    drain(&broker, "s").await;
    broker
        .seek_subscription("s", SeekTarget::Snapshot("snap".into()))
        .await
        .unwrap();
    let expected: Vec<usize> = (3..total).filter(|&i| i != 100).collect();
    assert_eq!(numbers(&drain(&broker, "s").await), expected);
}

#[tokio::test]
async fn a_seek_re_adds_only_what_the_subscriptions_filter_takes() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(2)).await.unwrap();
    broker
        .create_subscription("orders", sub("subject ~ orders.*"))
        .await
        .unwrap();
    publish_each(&broker, &clock, 0..10).await;
    let first = drain(&broker, "orders").await;
    broker
        .seek_subscription("orders", SeekTarget::Time(T0))
        .await
        .unwrap();
    let mut again = numbers(&drain(&broker, "orders").await);
    again.sort_unstable();
    assert_eq!(again, vec![0, 2, 4, 6, 8]);
    assert_eq!(first.len(), 5);
    // The same through a snapshot.
    broker
        .seek_subscription("orders", SeekTarget::Time(T0 + 5 * STEP_MS))
        .await
        .unwrap();
    broker.create_snapshot("snap", "orders").await.unwrap();
    drain(&broker, "orders").await;
    broker
        .seek_subscription("orders", SeekTarget::Snapshot("snap".into()))
        .await
        .unwrap();
    let mut again = numbers(&drain(&broker, "orders").await);
    again.sort_unstable();
    assert_eq!(again, vec![6, 8]);
}

#[tokio::test]
async fn a_key_shared_subscription_keeps_each_keys_order_after_a_seek() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(3)).await.unwrap();
    let mut keyed = sub("");
    keyed.delivery.ordering = crate::spec::OrderingMode::KeyShared;
    broker.create_subscription("s", keyed).await.unwrap();
    publish_each(&broker, &clock, 0..30).await;
    drain(&broker, "s").await;
    broker
        .seek_subscription("s", SeekTarget::Time(T0 + 10 * STEP_MS))
        .await
        .unwrap();
    let got = drain(&broker, "s").await;
    assert_eq!(got.len(), 20);
    for key in 0..3 {
        let order: Vec<usize> = got
            .iter()
            .filter(|m| m.key.as_deref() == Some(format!("k{key}").as_bytes()))
            .map(|m| m.headers["n"].parse().unwrap())
            .collect();
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(order, sorted, "key k{key}");
    }
}

#[tokio::test]
async fn an_ack_of_a_delivery_from_before_the_seek_does_not_settle_its_re_added_copy() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = topic_with_subscription(&clock, dir.path()).await;
    publish_each(&broker, &clock, 0..3).await;
    let before = broker.receive("s", "c", 1, None, None).await.unwrap();
    assert_eq!(numbers(&before), vec![0]);
    broker
        .seek_subscription("s", SeekTarget::Time(T0))
        .await
        .unwrap();
    let error = broker
        .ack("s", before[0].seq, before[0].token)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::StaleLease, "{error}");
    let nack = broker
        .nack("s", before[0].seq, before[0].token, None, None)
        .await;
    assert!(nack.is_err(), "a stale nack settles nothing either");
    let after = drain(&broker, "s").await;
    assert_eq!(numbers(&after), vec![0, 1, 2]);
    assert_eq!(after[0].delivery, 1);
    assert_ne!(after[0].seq, before[0].seq);
}

#[tokio::test]
async fn a_seek_and_a_snapshot_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = topic_with_subscription(&clock, dir.path()).await;
    publish_each(&broker, &clock, 0..6).await;
    drain(&broker, "s").await;
    broker
        .seek_subscription("s", SeekTarget::Time(T0 + 3 * STEP_MS))
        .await
        .unwrap();
    let info = broker.create_snapshot("snap", "s").await.unwrap();
    let future = clock.now_ms() + 60_000;
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert_eq!(broker.list_snapshots(), vec![info]);
    assert_eq!(numbers(&drain(&broker, "s").await), vec![3, 4, 5]);
    broker
        .seek_subscription("s", SeekTarget::Time(future))
        .await
        .unwrap();
    drop(broker);
    // The future time is kept: published before it, acknowledged also after a reopen.
    let broker = open(dir.path(), &clock).await;
    publish_each(&broker, &clock, 6..7).await;
    assert!(drain(&broker, "s").await.is_empty());
    broker
        .seek_subscription("s", SeekTarget::Snapshot("snap".into()))
        .await
        .unwrap();
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert_eq!(numbers(&drain(&broker, "s").await), vec![3, 4, 5, 6]);
}

#[tokio::test]
async fn a_seek_a_crash_interrupted_is_carried_out_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = topic_with_subscription(&clock, dir.path()).await;
    publish_each(&broker, &clock, 0..4).await;
    drain(&broker, "s").await;
    // What a seek to the start stores before it touches anything, and nothing after.
    let intent = [
        i64::MIN.to_le_bytes().to_vec(),
        Backlog::from_offsets(&[0]).encode(),
    ]
    .concat();
    broker
        .inner
        .meta
        .lock()
        .unwrap()
        .put(format!("{}s", subscriptions::SEEK_PREFIX), intent)
        .unwrap();
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert_eq!(numbers(&drain(&broker, "s").await), vec![0, 1, 2, 3]);
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert!(drain(&broker, "s").await.is_empty(), "done once");
}

/// Stores a seek's intent for subscription `s` as the seek does before it touches anything.
fn store_intent(broker: &Broker, ack_before_ms: Option<i64>, backlog: &Backlog) {
    let intent = [
        ack_before_ms.unwrap_or(i64::MIN).to_le_bytes().to_vec(),
        backlog.encode(),
    ]
    .concat();
    broker
        .inner
        .meta
        .lock()
        .unwrap()
        .put(format!("{}s", subscriptions::SEEK_PREFIX), intent)
        .unwrap();
}

#[tokio::test]
async fn a_seek_a_crash_interrupted_after_its_purge_is_carried_out_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = topic_with_subscription(&clock, dir.path()).await;
    publish_each(&broker, &clock, 0..4).await;
    // Two acked, one leased, one ready; then the seek's purge is durable, and nothing after.
    let first = broker.receive("s", "c", 3, None, None).await.unwrap();
    for m in &first[..2] {
        broker.ack("s", m.seq, m.token).await.unwrap();
    }
    store_intent(&broker, None, &Backlog::from_offsets(&[1]));
    broker.purge_queue("s").await.unwrap();
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    let again = drain(&broker, "s").await;
    assert_eq!(numbers(&again), vec![1, 2, 3]);
    assert!(again.iter().all(|m| m.delivery == 1));
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert!(drain(&broker, "s").await.is_empty(), "done once");
}

#[tokio::test]
async fn a_seek_a_crash_interrupted_before_its_last_commit_keeps_its_future_time() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = topic_with_subscription(&clock, dir.path()).await;
    publish_each(&broker, &clock, 0..4).await;
    let future = clock.now_ms() + 60_000;
    broker
        .seek_subscription("s", SeekTarget::Time(future))
        .await
        .unwrap();
    // Everything done but the commit that saves the cursors and the time and deletes the
    // intent: the intent back, the time not saved.
    store_intent(&broker, Some(future), &Backlog::from_offsets(&[4]));
    broker
        .inner
        .meta
        .lock()
        .unwrap()
        .delete(format!("{}s", subscriptions::ACK_BEFORE_PREFIX))
        .unwrap();
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    publish_each(&broker, &clock, 4..6).await;
    assert!(
        drain(&broker, "s").await.is_empty(),
        "published before the time"
    );
    clock.set(future);
    broker.publish_to_topic("t", vec![event(6)]).await.unwrap();
    assert_eq!(numbers(&drain(&broker, "s").await), vec![6]);
}

#[tokio::test]
async fn a_snapshot_holds_the_topics_records_until_it_expires() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let tiny = TopicSpec {
        retention: TopicRetention {
            max_age: None,
            max_bytes: Some(1),
            ..TopicRetention::default()
        },
        ..spec(1)
    };
    broker.create_topic("t", tiny).await.unwrap();
    broker.create_subscription("s", sub("")).await.unwrap();
    // Enough to fill several segments: retention never deletes the active one.
    for i in 0..60 {
        let big = OutgoingMessage::new(vec![b'x'; 900]).with_header("n", i.to_string());
        broker.publish_to_topic("t", vec![big]).await.unwrap();
    }
    let info = broker.create_snapshot("snap", "s").await.unwrap();
    // The subscription itself deleted: its snapshot stays (and holds).
    drain(&broker, "s").await;
    broker.delete_queue("s").await.unwrap();
    broker.create_subscription("s2", sub("")).await.unwrap();
    broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    let start = |b: &Broker| b.describe_topic("t").unwrap().partitions[0].start_offset;
    assert_eq!(start(&broker), 0, "the snapshot holds every record");
    broker
        .seek_subscription("s2", SeekTarget::Snapshot("snap".into()))
        .await
        .unwrap();
    assert_eq!(drain(&broker, "s2").await.len(), 60);
    clock.set(info.expires_at_ms);
    let gone = broker.describe_snapshot("snap").unwrap_err();
    assert_eq!(gone.kind(), ErrorKind::NotFound, "{gone}");
    assert!(broker.list_snapshots().is_empty());
    broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert!(start(&broker) > 0, "expired: retention deletes");
    // Its name is free again.
    broker.create_snapshot("snap", "s2").await.unwrap();
}

#[tokio::test]
async fn a_retention_that_overrides_subscriptions_overrides_snapshots_also_with_none_left() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let tiny = TopicSpec {
        retention: TopicRetention {
            max_age: None,
            max_bytes: Some(1),
            overrides_subscriptions: true,
        },
        ..spec(1)
    };
    broker.create_topic("t", tiny).await.unwrap();
    broker.create_subscription("s", sub("")).await.unwrap();
    for i in 0..60 {
        let big = OutgoingMessage::new(vec![b'x'; 900]).with_header("n", i.to_string());
        broker.publish_to_topic("t", vec![big]).await.unwrap();
    }
    broker.create_snapshot("snap", "s").await.unwrap();
    // The topic has no subscription left: only the snapshot could hold its records.
    broker.delete_queue("s").await.unwrap();
    broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    let start = broker.describe_topic("t").unwrap().partitions[0].start_offset;
    assert!(
        start > 0,
        "the topic's retention deletes what the snapshot held"
    );
}

#[tokio::test]
async fn deleting_a_snapshot_lets_retention_take_what_it_held() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let tiny = TopicSpec {
        retention: TopicRetention {
            max_age: None,
            max_bytes: Some(1),
            ..TopicRetention::default()
        },
        ..spec(1)
    };
    broker.create_topic("t", tiny).await.unwrap();
    broker.create_subscription("s", sub("")).await.unwrap();
    for i in 0..60 {
        let big = OutgoingMessage::new(vec![b'x'; 900]).with_header("n", i.to_string());
        broker.publish_to_topic("t", vec![big]).await.unwrap();
    }
    broker.create_snapshot("snap", "s").await.unwrap();
    drain(&broker, "s").await;
    let start = |b: &Broker| b.describe_topic("t").unwrap().partitions[0].start_offset;
    broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert_eq!(start(&broker), 0, "held by the snapshot");
    broker.delete_snapshot("snap").unwrap();
    broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert!(start(&broker) > 0, "let go with it");
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert!(broker.list_snapshots().is_empty(), "durably");
}

#[tokio::test]
async fn bad_seeks_and_snapshots_are_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = topic_with_subscription(&clock, dir.path()).await;
    broker.create_topic("other", spec(1)).await.unwrap();
    let mut elsewhere = sub("");
    elsewhere.topic = Name::new("other").unwrap();
    broker.create_subscription("o", elsewhere).await.unwrap();
    broker
        .create_queue("plain", Default::default())
        .await
        .unwrap();
    broker.create_snapshot("snap", "s").await.unwrap();

    let missing = broker
        .seek_subscription("s", SeekTarget::Snapshot("nope".into()))
        .await
        .unwrap_err();
    assert!(
        matches!(missing, BrokerError::SnapshotNotFound { .. }),
        "{missing}"
    );
    assert_eq!(missing.kind(), ErrorKind::NotFound);
    let other = broker
        .seek_subscription("o", SeekTarget::Snapshot("snap".into()))
        .await
        .unwrap_err();
    assert!(
        matches!(other, BrokerError::SnapshotOfAnotherTopic { .. }),
        "{other}"
    );
    assert_eq!(other.kind(), ErrorKind::Conflict);
    let exists = broker.create_snapshot("snap", "s").await.unwrap_err();
    assert_eq!(exists.kind(), ErrorKind::AlreadyExists, "{exists}");
    for bad in ["", "a/b", ".hidden"] {
        let error = broker.create_snapshot(bad, "s").await.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Invalid, "{bad:?}: {error}");
        let error = broker
            .seek_subscription("s", SeekTarget::Snapshot(bad.into()))
            .await
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Invalid, "{bad:?}: {error}");
    }
    let plain = broker
        .seek_subscription("plain", SeekTarget::Time(T0))
        .await
        .unwrap_err();
    assert!(
        matches!(plain, BrokerError::NotASubscription { .. }),
        "{plain}"
    );
    let plain = broker.create_snapshot("p", "plain").await.unwrap_err();
    assert!(
        matches!(plain, BrokerError::NotASubscription { .. }),
        "{plain}"
    );
    let nope = broker
        .seek_subscription("nope", SeekTarget::Time(T0))
        .await
        .unwrap_err();
    assert_eq!(nope.kind(), ErrorKind::NotFound);
    let unknown = broker.delete_snapshot("nope").unwrap_err();
    assert_eq!(unknown.kind(), ErrorKind::NotFound);
    broker.delete_snapshot("snap").unwrap();
    assert!(broker.list_snapshots().is_empty());
    // Deleting a topic deletes its snapshots.
    broker.create_snapshot("of-other", "o").await.unwrap();
    broker.delete_queue("o").await.unwrap();
    broker.delete_topic("other").await.unwrap();
    assert!(broker.list_snapshots().is_empty());
}

#[tokio::test]
async fn a_snapshot_that_would_expire_within_an_hour_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = topic_with_subscription(&clock, dir.path()).await;
    publish_each(&broker, &clock, 0..1).await;
    clock.set(T0 + millis(crate::SNAPSHOT_LIFETIME) - 30 * 60_000);
    let error = broker.create_snapshot("late", "s").await.unwrap_err();
    assert!(
        matches!(error, BrokerError::SnapshotWouldExpire { .. }),
        "{error}"
    );
    drain(&broker, "s").await;
    broker.create_snapshot("late", "s").await.unwrap();
}

#[tokio::test]
async fn a_seek_while_publishes_go_on_loses_and_duplicates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = topic_with_subscription(&clock, dir.path()).await;
    publish_each(&broker, &clock, 0..50).await;
    drain(&broker, "s").await;
    let publisher = {
        let broker = broker.clone();
        tokio::spawn(async move {
            for batch in 0..10 {
                let events = (50 + batch * 5..55 + batch * 5).map(event).collect();
                broker.publish_to_topic("t", events).await.unwrap();
                tokio::task::yield_now().await;
            }
        })
    };
    broker
        .seek_subscription("s", SeekTarget::Time(T0))
        .await
        .unwrap();
    publisher.await.unwrap();
    assert_eq!(
        numbers(&drain(&broker, "s").await),
        (0..100).collect::<Vec<_>>()
    );
}

#[test]
fn a_seek_waits_for_its_appends_on_their_completion_not_on_a_timer() {
    // A runtime without a timer: a seek that polled for its appends would panic here.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let broker = topic_with_subscription(&clock, dir.path()).await;
        let events: Vec<OutgoingMessage> = (0..3000).map(event).collect();
        for chunk in events.chunks(200) {
            broker.publish_to_topic("t", chunk.to_vec()).await.unwrap();
        }
        broker
            .seek_subscription("s", SeekTarget::Time(i64::MAX))
            .await
            .unwrap();
        broker
            .seek_subscription("s", SeekTarget::Time(0))
            .await
            .unwrap();
        assert_eq!(broker.describe_queue("s").unwrap().stats.state.ready, 3000);
    });
}
