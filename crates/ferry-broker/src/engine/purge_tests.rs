//! Purging a queue (`Broker::purge_queue`).

use ferry_storage::ManualClock;

use super::tests::{T0, open, spec};
use super::*;
use crate::ErrorKind;
use crate::spec::{OrderingMode, QueueSpec};

async fn publish(broker: &Broker, queue: &str, message: OutgoingMessage) {
    broker.publish(queue, message).await.unwrap();
}

#[tokio::test]
async fn a_purge_deletes_ready_delayed_and_in_flight_messages_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(1)).await.unwrap();
    for p in ["in flight", "ready", "also ready"] {
        publish(&broker, "q", OutgoingMessage::new(p)).await;
    }
    publish(
        &broker,
        "q",
        OutgoingMessage::new("delayed").with_delay(Duration::from_secs(30)),
    )
    .await;
    let leased = broker.receive("q", "c", 1, None, None).await.unwrap();
    assert_eq!(leased[0].payload, "in flight");

    assert_eq!(broker.purge_queue("q").await.unwrap(), 4);
    let stats = broker.describe_queue("q").unwrap().stats;
    assert_eq!((stats.state.tracked, stats.purged), (0, 4));
    assert_eq!(stats.dead_lettered, 0);

    // The lease ended with the message.
    let m = &leased[0];
    for error in [
        broker.ack("q", m.seq, m.token).await.unwrap_err(),
        broker
            .extend("q", m.seq, m.token, Duration::from_secs(5))
            .await
            .unwrap_err(),
        broker
            .nack("q", m.seq, m.token, None, None)
            .await
            .unwrap_err(),
    ] {
        assert_eq!(error.kind(), ErrorKind::StaleLease, "{error}");
    }
    // Nothing dead-lettered, even on a queue with one delivery allowed and its lease over.
    clock.advance(60_000);
    broker.tick_now().await.unwrap();
    assert!(
        broker
            .receive("q", "c", 10, None, None)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(broker.describe_queue("q.dlq").unwrap().stats.next_seq, 0);
    assert_eq!(broker.purge_queue("q").await.unwrap(), 0);

    drop(broker);
    let broker = open(dir.path(), &clock).await;
    broker.tick_now().await.unwrap();
    assert!(
        broker
            .receive("q", "c", 10, None, None)
            .await
            .unwrap()
            .is_empty()
    );
    let stats = broker.describe_queue("q").unwrap().stats;
    assert_eq!((stats.state.tracked, stats.purged), (0, 4));
    // The queue keeps working after the purge.
    publish(&broker, "q", OutgoingMessage::new("after")).await;
    let got = broker.receive("q", "c", 10, None, None).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].payload, "after");
}

#[tokio::test]
async fn a_purged_delivery_releases_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let keyed = QueueSpec {
        ordering: OrderingMode::KeyShared,
        ..spec(5)
    };
    broker.create_queue("q", keyed).await.unwrap();
    publish(&broker, "q", OutgoingMessage::new("first").with_key("k")).await;
    let held = broker.receive("q", "c1", 1, None, None).await.unwrap();
    assert_eq!(held.len(), 1);
    assert_eq!(broker.purge_queue("q").await.unwrap(), 1);
    publish(&broker, "q", OutgoingMessage::new("next").with_key("k")).await;
    let got = broker.receive("q", "c2", 1, None, None).await.unwrap();
    assert_eq!(
        got.len(),
        1,
        "the key is no longer held by the purged delivery"
    );
    assert_eq!(got[0].payload, "next");
}

#[tokio::test]
async fn purging_a_queue_that_does_not_exist_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let error = broker.purge_queue("nowhere").await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotFound);
}
