//! Dead letters into a topic ([`DeadLetter::Topic`]): a queue's or a subscription's letter
//! is published to the topic and received by the topic's subscriptions with the
//! dead-letter facts; it survives a reopen on both sides; a missing topic is refused at
//! create and update; a dead-letter topic cannot be deleted from under its origin.

use std::time::Duration;

use ferry_storage::ManualClock;

use super::tests::{T0, open, spec};
use super::*;
use crate::queue::state::{DeadLetterReason, Nacked};
use crate::spec::{DeadLetter, Durability, QueueSpec};
use crate::subscription::SubscriptionSpec;
use crate::topic::TopicSpec;

fn name(s: &str) -> Name {
    Name::new(s).unwrap()
}

/// No fsync: tests reopen cleanly; durability modes are storage's to test.
fn topic_spec(partitions: u32) -> TopicSpec {
    TopicSpec {
        durability: Durability::None,
        ..TopicSpec::with_partitions(partitions)
    }
}

/// A subscription of `topic` whose deliveries follow `delivery` (without its dedup
/// window, which a subscription has not).
fn subscription(topic: &str, delivery: QueueSpec) -> SubscriptionSpec {
    let mut spec = SubscriptionSpec::new(name(topic));
    spec.delivery = QueueSpec {
        dedup_window: Duration::ZERO,
        ..delivery
    };
    spec
}

/// A spec that dead-letters into `topic` after three deliveries.
fn to_topic(topic: &str) -> QueueSpec {
    QueueSpec {
        dead_letter: DeadLetter::Topic(name(topic)),
        ..spec(3)
    }
}

/// The topic `graves` with the subscription `graves-sub` that receives its letters.
async fn dead_letter_topic(broker: &Broker) {
    broker.create_topic("graves", topic_spec(2)).await.unwrap();
    let delivery = QueueSpec {
        dead_letter: DeadLetter::Disabled,
        ..spec(5)
    };
    broker
        .create_subscription("graves-sub", subscription("graves", delivery))
        .await
        .unwrap();
}

fn event() -> OutgoingMessage {
    OutgoingMessage::new("payload")
        .with_key("k")
        .with_header("colour", "blue")
}

/// Receives from `queue` and nacks, three times; the last nack dead-letters.
async fn nack_three_times(broker: &Broker, clock: &ManualClock, queue: &str) -> MessageId {
    let mut id = None;
    for attempt in 1..=3 {
        let got = broker.receive(queue, "c", 1, None, None).await.unwrap();
        let m = &got[0];
        assert_eq!(m.delivery, attempt);
        id = Some(m.id);
        let nacked = broker
            .nack(queue, m.seq, m.token, Some(Duration::ZERO), Some("boom"))
            .await
            .unwrap();
        if attempt == 3 {
            assert_eq!(
                nacked,
                Nacked::DeadLettered(DeadLetterReason::MaxDeliveries)
            );
        }
        clock.advance(5);
    }
    id.unwrap()
}

/// The one letter `graves-sub` holds, with what it must carry from `origin`.
async fn assert_letter_received(broker: &Broker, origin: &str, id: MessageId) {
    let got = broker
        .receive("graves-sub", "reader", 10, None, None)
        .await
        .unwrap();
    assert_eq!(got.len(), 1, "{got:?}");
    let letter = &got[0];
    assert_eq!(letter.id, id);
    assert_eq!(letter.payload, "payload");
    assert_eq!(letter.key.as_deref(), Some(&b"k"[..]));
    assert_eq!(
        letter.headers.get("colour").map(String::as_str),
        Some("blue")
    );
    let info = letter.dead_letter.as_ref().expect("dead-letter facts");
    assert_eq!(info.origin_queue, origin);
    assert_eq!(info.deliveries, 3);
    assert_eq!(info.reason, "max_deliveries");
    assert_eq!(info.last_error.as_deref(), Some("boom"));
    assert_eq!(info.consumer.as_deref(), Some("c"));
}

async fn assert_origin_settled(broker: &Broker, origin: &str) {
    assert!(
        broker
            .receive(origin, "c", 10, None, None)
            .await
            .unwrap()
            .is_empty()
    );
    let stats = broker.describe_queue(origin).unwrap().stats;
    assert_eq!(stats.dead_lettered, 1);
    assert_eq!(stats.state.ready + stats.state.in_flight, 0);
}

#[tokio::test]
async fn a_queue_dead_letters_into_a_topic_whose_subscription_receives_the_letter() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    dead_letter_topic(&broker).await;
    broker
        .create_queue("orders", to_topic("graves"))
        .await
        .unwrap();
    assert!(
        broker.describe_queue("orders.dlq").is_err(),
        "a topic target makes no dead-letter queue"
    );
    broker.publish("orders", event()).await.unwrap();
    let id = nack_three_times(&broker, &clock, "orders").await;
    assert_origin_settled(&broker, "orders").await;

    // Both sides survive a reopen: the letter stays in the topic's subscription, and the
    // origin neither tracks the message again nor forgets where its letters go.
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert_eq!(
        broker.describe_queue("orders").unwrap().spec.dead_letter,
        DeadLetter::Topic(name("graves"))
    );
    assert_origin_settled(&broker, "orders").await;
    assert_letter_received(&broker, "orders", id).await;
}

#[tokio::test]
async fn a_subscription_dead_letters_into_another_topic_whose_subscription_receives_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    dead_letter_topic(&broker).await;
    broker.create_topic("events", topic_spec(1)).await.unwrap();
    broker
        .create_subscription("events-sub", subscription("events", to_topic("graves")))
        .await
        .unwrap();
    broker
        .publish_to_topic("events", vec![event()])
        .await
        .unwrap();
    let id = nack_three_times(&broker, &clock, "events-sub").await;
    assert_origin_settled(&broker, "events-sub").await;
    assert_letter_received(&broker, "events-sub", id).await;

    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert_origin_settled(&broker, "events-sub").await;
    // Received above but not acked: its lease ends, and the reopened broker has it still.
    clock.advance(60_000);
    assert_letter_received(&broker, "events-sub", id).await;
}

#[tokio::test]
async fn a_missing_dead_letter_topic_is_refused_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let err = broker
        .create_queue("orders", to_topic("nowhere"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, BrokerError::DeadLetterTopicMissing { queue, topic }
            if queue.as_str() == "orders" && topic.as_str() == "nowhere"),
        "{err}"
    );
    // A queue of that name is not a topic.
    broker.create_queue("nowhere", spec(3)).await.unwrap();
    let err = broker
        .create_queue("orders", to_topic("nowhere"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, BrokerError::DeadLetterTopicMissing { .. }),
        "{err}"
    );
    broker.create_topic("events", topic_spec(1)).await.unwrap();
    let err = broker
        .create_subscription("events-sub", subscription("events", to_topic("graves")))
        .await
        .unwrap_err();
    assert!(
        matches!(err, BrokerError::DeadLetterTopicMissing { .. }),
        "{err}"
    );
    let err = broker
        .update_queue("nowhere", |spec| {
            spec.dead_letter = DeadLetter::Topic(name("graves"));
        })
        .await
        .unwrap_err();
    assert!(
        matches!(err, BrokerError::DeadLetterTopicMissing { .. }),
        "{err}"
    );
    let queues = |broker: &Broker| -> Vec<String> {
        broker.list_queues().iter().map(Name::to_string).collect()
    };
    assert_eq!(queues(&broker), ["nowhere", "nowhere.dlq"]);
    assert_eq!(
        broker.describe_queue("nowhere").unwrap().spec.dead_letter,
        DeadLetter::Default
    );
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert_eq!(queues(&broker), ["nowhere", "nowhere.dlq"]);
}

#[tokio::test]
async fn a_dead_letter_topic_cannot_be_deleted_while_a_queue_dead_letters_into_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("graves", topic_spec(1)).await.unwrap();
    broker.create_queue("orders", spec(3)).await.unwrap();
    let spec = broker
        .update_queue("orders", |spec| {
            spec.dead_letter = DeadLetter::Topic(name("graves"));
        })
        .await
        .unwrap();
    assert_eq!(spec.dead_letter, DeadLetter::Topic(name("graves")));
    let err = broker.delete_topic("graves").await.unwrap_err();
    assert!(
        matches!(&err, BrokerError::TopicIsDeadLetterTarget { topic, origin }
            if topic.as_str() == "graves" && origin.as_str() == "orders"),
        "{err}"
    );
    assert!(broker.describe_topic("graves").is_ok());
    broker.delete_queue("orders").await.unwrap();
    broker.delete_topic("graves").await.unwrap();
}

#[tokio::test]
async fn a_crash_between_the_topic_publish_and_the_journal_delivers_twice_never_loses() {
    // The crash window in `engine/effects.rs`: the letter reached the topic, but the
    // origin's journal never got `DeadLettered`. Recovery does not scan topics, so the
    // origin tracks the message again: at least once, on both sides.
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    dead_letter_topic(&broker).await;
    broker
        .create_queue("orders", to_topic("graves"))
        .await
        .unwrap();
    let id = broker.publish("orders", event()).await.unwrap();
    let mut letter = broker.queue("orders").unwrap().read(0).unwrap();
    letter.dead_letter = Some(crate::DeadLetterInfo {
        reason: "max_deliveries".into(),
        deliveries: 3,
        origin_queue: "orders".into(),
        origin_seq: 0,
        origin_published_at: T0,
        last_error: Some("boom".into()),
        first_failure_ms: None,
        last_failure_ms: None,
        consumer: Some("c".into()),
    });
    broker
        .publish_dead_letter(&name("graves"), letter)
        .await
        .unwrap();
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert_letter_received(&broker, "orders", id).await;
    let again = broker.receive("orders", "c", 10, None, None).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].id, id);
}

/// Receives from `queue` and nacks until the message dead-letters; every nack succeeds.
async fn nack_until_dead(broker: &Broker, clock: &ManualClock, queue: &str) {
    for _ in 0..3 {
        let got = broker.receive(queue, "c", 1, None, None).await.unwrap();
        broker
            .nack(
                queue,
                got[0].seq,
                got[0].token,
                Some(Duration::ZERO),
                Some("boom"),
            )
            .await
            .unwrap();
        clock.advance(5);
    }
}

#[tokio::test]
async fn a_keyless_letter_into_a_compacted_topic_is_published_under_its_message_id() {
    // A compacted topic refuses keyless records; a letter refused there would poison its
    // origin, and the reopen that moves it again would fail too.
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let compacted = TopicSpec {
        compaction: Some(crate::topic::TopicCompaction::default()),
        ..topic_spec(1)
    };
    broker.create_topic("graves", compacted).await.unwrap();
    let delivery = QueueSpec {
        dead_letter: DeadLetter::Disabled,
        ..spec(5)
    };
    broker
        .create_subscription("graves-sub", subscription("graves", delivery))
        .await
        .unwrap();
    broker
        .create_queue("orders", to_topic("graves"))
        .await
        .unwrap();
    let id = broker
        .publish("orders", OutgoingMessage::new("keyless"))
        .await
        .unwrap();
    nack_until_dead(&broker, &clock, "orders").await;
    assert_origin_settled(&broker, "orders").await;
    let got = broker
        .receive("graves-sub", "reader", 10, None, None)
        .await
        .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].id, id);
    assert_eq!(got[0].key.as_deref(), Some(id.to_string().as_bytes()));
    drop(broker);
    open(dir.path(), &clock).await;
}

#[tokio::test]
async fn a_letter_into_a_topic_is_not_refused_when_the_disk_is_short_of_its_reserve() {
    // As a dead-letter queue takes its letters: a refusal would poison the origin, and
    // the reopen that moves the letter again would fail while the disk stays short.
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    dead_letter_topic(&broker).await;
    broker
        .create_queue("orders", to_topic("graves"))
        .await
        .unwrap();
    let id = broker.publish("orders", event()).await.unwrap();
    drop(broker);
    let config = BrokerConfig {
        clock: std::sync::Arc::new(clock.clone()),
        background_timers: false,
        disk_reserve_bytes: u64::MAX / 4,
        ..BrokerConfig::default()
    };
    let broker = Broker::open(dir.path(), config).await.unwrap();
    let refused = broker.publish_to_topic("graves", vec![event()]).await;
    assert!(
        matches!(refused, Err(BrokerError::DiskFull { .. })),
        "{refused:?}"
    );
    nack_until_dead(&broker, &clock, "orders").await;
    assert_origin_settled(&broker, "orders").await;
    assert_letter_received(&broker, "orders", id).await;
}
