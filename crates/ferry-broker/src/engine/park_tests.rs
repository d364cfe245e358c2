//! Parking keys through the engine (`Broker::park`, `unpark`, `parked_keys`): what callers
//! outside the broker see. The holding itself is the queue state's, tested there.

use bytes::Bytes;
use ferry_storage::ManualClock;

use super::tests::{T0, open, spec};
use super::*;
use crate::ErrorKind;
use crate::spec::OrderingMode;

fn ordered(ordering: OrderingMode) -> crate::spec::QueueSpec {
    crate::spec::QueueSpec {
        ordering,
        ..spec(5)
    }
}

#[tokio::test]
async fn parking_on_a_queue_not_key_shared_is_refused_naming_its_ordering() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    for (queue, ordering, named) in [
        ("shared", OrderingMode::Shared, "shared"),
        ("exclusive", OrderingMode::Exclusive, "exclusive"),
    ] {
        broker.create_queue(queue, ordered(ordering)).await.unwrap();
        for refused in [
            broker.park(queue, b"a").await.unwrap_err(),
            broker.unpark(queue, b"a").await.unwrap_err(),
        ] {
            assert!(
                matches!(&refused, BrokerError::NotKeyShared { ordering, .. } if *ordering == named),
                "{refused:?}"
            );
            assert_eq!(refused.kind(), ErrorKind::Conflict);
            assert!(refused.to_string().contains("key-shared"), "{refused}");
        }
        assert!(broker.parked_keys(queue).unwrap().is_empty());
    }
    let missing = broker.park("nope", b"a").await.unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound);
}

#[tokio::test]
async fn parked_keys_are_listed_in_byte_order_with_what_they_hold_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker
        .create_queue("q", ordered(OrderingMode::KeyShared))
        .await
        .unwrap();
    for (key, payload) in [("b", "b1"), ("b", "b2"), ("a", "a1"), ("c", "c1")] {
        broker
            .publish("q", OutgoingMessage::new(payload).with_key(key))
            .await
            .unwrap();
    }
    broker.park("q", b"b").await.unwrap();
    broker.park("q", b"a").await.unwrap();
    // Parking twice changes nothing.
    broker.park("q", b"a").await.unwrap();
    // A key with nothing queued yet can be parked: its messages are held as they come.
    broker.park("q", b"z").await.unwrap();
    let listed = |broker: &Broker| {
        broker
            .parked_keys("q")
            .unwrap()
            .into_iter()
            .map(|p| (p.key, p.held))
            .collect::<Vec<_>>()
    };
    let expected = vec![
        (Bytes::from_static(b"a"), 1),
        (Bytes::from_static(b"b"), 2),
        (Bytes::from_static(b"z"), 0),
    ];
    assert_eq!(listed(&broker), expected);
    let got = broker.receive("q", "c", 10, None, None).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].payload, "c1");

    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert_eq!(listed(&broker), expected);

    broker.unpark("q", b"b").await.unwrap();
    // Unparking a key that is not parked changes nothing.
    broker.unpark("q", b"nothing").await.unwrap();
    let got = broker.receive("q", "c", 10, None, None).await.unwrap();
    let payloads: Vec<_> = got.iter().map(|m| m.payload.clone()).collect();
    // The unparked key's head only: one message per key in flight, in order.
    assert!(
        payloads.contains(&Bytes::from_static(b"b1")),
        "{payloads:?}"
    );
    assert!(
        !payloads.contains(&Bytes::from_static(b"a1")),
        "{payloads:?}"
    );
    assert_eq!(
        listed(&broker),
        vec![(Bytes::from_static(b"a"), 1), (Bytes::from_static(b"z"), 0)]
    );
}
