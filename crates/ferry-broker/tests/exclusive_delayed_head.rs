//! A delayed message at the head of an exclusive queue or subscription.
//!
//! Exclusive ordering serves one message at a time in publish order, and a retry goes before
//! anything published after it. A message published with a delay joins that order only when
//! its delay ends, at its publish-order place: one message delayed by an hour must not stop
//! the queue for an hour.

use std::sync::Arc;
use std::time::Duration;

use ferry_broker::{
    Broker, BrokerConfig, DeadLetter, Durability, Name, OrderingMode, OutgoingMessage, QueueSpec,
    SubscriptionSpec, TopicSpec,
};
use ferry_storage::ManualClock;

const T0: i64 = 1_700_000_000_000;

async fn open(dir: &std::path::Path, clock: &ManualClock) -> Broker {
    let config = BrokerConfig {
        clock: Arc::new(clock.clone()),
        background_timers: false,
        ..BrokerConfig::default()
    };
    Broker::open(dir, config).await.unwrap()
}

fn exclusive() -> QueueSpec {
    QueueSpec {
        ordering: OrderingMode::Exclusive,
        durability: Durability::None,
        dedup_window: Duration::ZERO,
        dead_letter: DeadLetter::Disabled,
        ..QueueSpec::default()
    }
}

async fn received_payloads(broker: &Broker, queue: &str) -> Vec<String> {
    broker
        .receive(queue, "c", 10, None, None)
        .await
        .unwrap()
        .iter()
        .map(|m| String::from_utf8_lossy(&m.payload).into_owned())
        .collect()
}

#[tokio::test]
async fn a_delayed_message_does_not_hold_back_an_exclusive_queue() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", exclusive()).await.unwrap();
    let later = OutgoingMessage::new("later").with_delay(Duration::from_secs(3600));
    broker.publish("q", later).await.unwrap();
    broker
        .publish("q", OutgoingMessage::new("now"))
        .await
        .unwrap();
    clock.advance(1_000);
    broker.tick_now().await.unwrap();
    assert_eq!(received_payloads(&broker, "q").await, ["now"]);
}

#[tokio::test]
async fn a_delayed_message_does_not_hold_back_an_exclusive_subscription() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let topic = TopicSpec {
        partitions: 1,
        durability: Durability::None,
        ..TopicSpec::default()
    };
    broker.create_topic("t", topic).await.unwrap();
    let mut sub = SubscriptionSpec::new(Name::new("t").unwrap());
    sub.delivery = QueueSpec {
        dead_letter: DeadLetter::Disabled,
        ..exclusive()
    };
    broker.create_subscription("s", sub).await.unwrap();
    let later = OutgoingMessage::new("later").with_delay(Duration::from_secs(3600));
    broker
        .publish_to_topic("t", vec![later, OutgoingMessage::new("now")])
        .await
        .unwrap();
    clock.advance(1_000);
    broker.tick_now().await.unwrap();
    assert_eq!(received_payloads(&broker, "s").await, ["now"]);
}

#[tokio::test]
async fn a_retry_still_goes_before_everything_published_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", exclusive()).await.unwrap();
    broker
        .publish("q", OutgoingMessage::new("first"))
        .await
        .unwrap();
    let got = broker.receive("q", "c", 10, None, None).await.unwrap();
    assert_eq!(got.len(), 1);
    broker
        .nack(
            "q",
            got[0].seq,
            got[0].token,
            Some(Duration::from_secs(5)),
            None,
        )
        .await
        .unwrap();
    broker
        .publish("q", OutgoingMessage::new("second"))
        .await
        .unwrap();
    // The retry's backoff holds back what was published after it.
    assert!(received_payloads(&broker, "q").await.is_empty());
    clock.advance(5_000);
    broker.tick_now().await.unwrap();
    assert_eq!(received_payloads(&broker, "q").await, ["first"]);
}

#[tokio::test]
async fn a_delayed_message_takes_its_publish_order_place_when_its_delay_ends() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", exclusive()).await.unwrap();
    let delayed = OutgoingMessage::new("delayed").with_delay(Duration::from_secs(10));
    broker.publish("q", delayed).await.unwrap();
    for payload in ["a", "b"] {
        broker
            .publish("q", OutgoingMessage::new(payload))
            .await
            .unwrap();
    }
    let a = broker.receive("q", "c", 10, None, None).await.unwrap();
    assert_eq!(a[0].payload, "a");
    clock.advance(10_000);
    broker.tick_now().await.unwrap();
    // One at a time: the delivery of "a" in flight is not overtaken.
    assert!(received_payloads(&broker, "q").await.is_empty());
    // "a" fails: the older "delayed" goes first, then "a" before "b", published after it.
    broker
        .nack("q", a[0].seq, a[0].token, Some(Duration::ZERO), None)
        .await
        .unwrap();
    let mut order = Vec::new();
    for _ in 0..3 {
        let got = broker.receive("q", "c", 10, None, None).await.unwrap();
        assert_eq!(got.len(), 1, "one at a time");
        order.push(String::from_utf8_lossy(&got[0].payload).into_owned());
        broker.ack("q", got[0].seq, got[0].token).await.unwrap();
    }
    assert_eq!(order, ["delayed", "a", "b"]);
}

#[tokio::test]
async fn a_delayed_message_holds_back_nothing_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let spec = QueueSpec {
        durability: Durability::Fsync,
        ..exclusive()
    };
    {
        let broker = open(dir.path(), &clock).await;
        broker.create_queue("q", spec).await.unwrap();
        let later = OutgoingMessage::new("later").with_delay(Duration::from_secs(3600));
        broker.publish("q", later).await.unwrap();
        broker
            .publish("q", OutgoingMessage::new("now"))
            .await
            .unwrap();
        drop(broker);
    }
    let broker = open(dir.path(), &clock).await;
    assert_eq!(received_payloads(&broker, "q").await, ["now"]);
}
