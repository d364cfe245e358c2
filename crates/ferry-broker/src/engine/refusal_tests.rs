//! Publishes and receives the broker refuses before anything changes: a priority above the
//! queue's levels, and a queue or topic name outside the naming rules.

use ferry_storage::ManualClock;

use super::tests::{T0, open, spec};
use super::*;
use crate::error::ErrorKind;
use crate::spec::QueueSpec;

#[tokio::test]
async fn a_priority_above_the_queues_levels_is_refused_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let ten_levels = QueueSpec {
        priority_levels: 10,
        ..spec(3)
    };
    broker.create_queue("q", ten_levels).await.unwrap();
    let refused = broker
        .publish_batch(
            "q",
            vec![
                OutgoingMessage::new("fine").with_priority(9),
                OutgoingMessage::new("too high").with_priority(200),
            ],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            BrokerError::PriorityAboveLevels {
                priority: 200,
                levels: 10,
                ..
            }
        ),
        "{refused:?}"
    );
    assert_eq!(refused.kind(), ErrorKind::Invalid);
    assert!(refused.to_string().contains("0 to 9"), "{refused}");
    assert_eq!(
        broker.describe_queue("q").unwrap().stats.next_seq,
        0,
        "nothing stored"
    );

    broker
        .publish("q", OutgoingMessage::new("top").with_priority(9))
        .await
        .unwrap();
    let got = broker.receive("q", "c", 10, None, None).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].priority, 9);
}

#[tokio::test]
async fn a_name_outside_the_rules_is_invalid_where_a_queue_or_topic_is_looked_up() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(3)).await.unwrap();
    let empty = broker
        .publish("", OutgoingMessage::new("x"))
        .await
        .unwrap_err();
    assert!(matches!(empty, BrokerError::EmptyName), "{empty:?}");
    let empty = broker.receive("", "c", 1, None, None).await.unwrap_err();
    assert!(matches!(empty, BrokerError::EmptyName), "{empty:?}");
    let spaced = broker.receive(" q", "c", 1, None, None).await.unwrap_err();
    assert!(
        matches!(spaced, BrokerError::InvalidNameCharacter { .. }),
        "{spaced:?}"
    );
    assert_eq!(spaced.kind(), ErrorKind::Invalid);
    let topic = broker
        .publish_to_topic("", vec![OutgoingMessage::new("x")])
        .await
        .unwrap_err();
    assert!(matches!(topic, BrokerError::EmptyName), "{topic:?}");
    // A well-formed name that names nothing is still not found.
    let missing = broker
        .publish("nope", OutgoingMessage::new("x"))
        .await
        .unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound);
}
