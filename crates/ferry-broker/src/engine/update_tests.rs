//! Changing a queue's settings after creation (`Broker::update_queue`).

use ferry_storage::ManualClock;

use super::tests::{T0, open, spec};
use super::*;
use crate::ErrorKind;
use crate::spec::{DeadLetter, Durability, OrderingMode, QueueSpec};
use crate::subscription::SubscriptionSpec;
use crate::topic::TopicSpec;

fn name(s: &str) -> Name {
    Name::new(s).unwrap()
}

fn disabled() -> QueueSpec {
    QueueSpec {
        dead_letter: DeadLetter::Disabled,
        ..spec(5)
    }
}

#[tokio::test]
async fn retry_dead_letter_target_and_lease_change_on_the_live_queue_and_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", disabled()).await.unwrap();
    broker.create_queue("parking", disabled()).await.unwrap();

    let updated = broker
        .update_queue("q", |s| {
            s.retry.max_deliveries = 1;
            s.dead_letter = DeadLetter::Named(name("parking"));
            s.lease = Duration::from_secs(2);
            s.default_ttl = Some(Duration::from_secs(60));
        })
        .await
        .unwrap();
    assert_eq!(broker.describe_queue("q").unwrap().spec, updated);

    broker
        .publish("q", OutgoingMessage::new("x"))
        .await
        .unwrap();
    let got = broker.receive("q", "c", 1, None, None).await.unwrap();
    assert_eq!(got[0].lease_until_ms, T0 + 2_000, "the new lease");
    clock.advance(2_000);
    broker.tick_now().await.unwrap();
    let dead = broker.receive("parking", "c", 1, None, None).await.unwrap();
    assert_eq!(dead.len(), 1, "one delivery, then the new target");
    let info = dead[0].dead_letter.as_ref().unwrap();
    assert_eq!((info.origin_queue.as_str(), info.deliveries), ("q", 1));

    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert_eq!(broker.describe_queue("q").unwrap().spec, updated);
    broker
        .publish("q", OutgoingMessage::new("y"))
        .await
        .unwrap();
    let got = broker.receive("q", "c", 1, None, None).await.unwrap();
    assert_eq!(got[0].lease_until_ms, clock.now_ms() + 2_000);
}

#[tokio::test]
async fn publish_settings_apply_from_the_next_publish() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", disabled()).await.unwrap();
    broker
        .publish("q", OutgoingMessage::new("before"))
        .await
        .unwrap();
    broker
        .update_queue("q", |s| {
            s.max_delay = Duration::from_secs(1);
            s.length_limit.max_messages = Some(2);
        })
        .await
        .unwrap();
    let too_late = broker
        .publish(
            "q",
            OutgoingMessage::new("later").with_delay(Duration::from_secs(2)),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(too_late, BrokerError::DelayTooLong { .. }),
        "{too_late}"
    );
    broker
        .publish("q", OutgoingMessage::new("second"))
        .await
        .unwrap();
    let full = broker
        .publish("q", OutgoingMessage::new("third"))
        .await
        .unwrap_err();
    assert!(matches!(full, BrokerError::QueueFull { .. }), "{full}");
    assert_eq!(broker.describe_queue("q").unwrap().stats.state.tracked, 2);
}

#[tokio::test]
async fn settings_that_cannot_change_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", disabled()).await.unwrap();
    let before = broker.describe_queue("q").unwrap().spec;
    type Change = fn(&mut QueueSpec);
    let changes: [(&str, Change); 4] = [
        ("ordering", |s| s.ordering = OrderingMode::KeyShared),
        ("priority_levels", |s| s.priority_levels = 3),
        ("durability", |s| s.durability = Durability::Fsync),
        ("dedup_window", |s| s.dedup_window = Duration::ZERO),
    ];
    for (setting, change) in changes {
        let error = broker
            .update_queue("q", |s| {
                s.lease = Duration::from_secs(99);
                change(s);
            })
            .await
            .unwrap_err();
        match &error {
            BrokerError::QueueSettingFixed { setting: s, .. } => assert_eq!(*s, setting),
            other => panic!("{setting}: {other}"),
        }
        assert_eq!(error.kind(), ErrorKind::Invalid);
        assert_eq!(
            broker.describe_queue("q").unwrap().spec,
            before,
            "{setting}"
        );
    }
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert_eq!(broker.describe_queue("q").unwrap().spec, before);
}

#[tokio::test]
async fn the_checks_of_creation_hold_and_a_refused_update_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("b", disabled()).await.unwrap();
    let a = QueueSpec {
        dead_letter: DeadLetter::Named(name("b")),
        ..spec(5)
    };
    broker.create_queue("a", a.clone()).await.unwrap();

    let cycle = broker
        .update_queue("b", |s| s.dead_letter = DeadLetter::Named(name("a")))
        .await
        .unwrap_err();
    assert!(
        matches!(cycle, BrokerError::DeadLetterCycle { .. }),
        "{cycle}"
    );
    let missing = broker
        .update_queue("a", |s| s.dead_letter = DeadLetter::Named(name("nowhere")))
        .await
        .unwrap_err();
    assert!(
        matches!(missing, BrokerError::DeadLetterTargetMissing { .. }),
        "{missing}"
    );
    let invalid = broker
        .update_queue("a", |s| s.lease = Duration::ZERO)
        .await
        .unwrap_err();
    assert_eq!(invalid.kind(), ErrorKind::Invalid, "{invalid}");
    let absent = broker.update_queue("c", |_| {}).await.unwrap_err();
    assert_eq!(absent.kind(), ErrorKind::NotFound);

    assert_eq!(broker.describe_queue("a").unwrap().spec, a);
    assert_eq!(broker.describe_queue("b").unwrap().spec, disabled());
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert_eq!(broker.describe_queue("a").unwrap().spec, a);
    assert_eq!(broker.describe_queue("b").unwrap().spec, disabled());
}

#[tokio::test]
async fn a_default_dead_letter_target_is_created_with_the_update() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", disabled()).await.unwrap();
    assert!(broker.describe_queue("q.dlq").is_err());
    broker
        .update_queue("q", |s| s.dead_letter = DeadLetter::Default)
        .await
        .unwrap();
    assert_eq!(
        broker.describe_queue("q.dlq").unwrap().spec.dead_letter,
        DeadLetter::Disabled
    );
    // And the other way: dead-lettering turned off; the target stays, as a queue.
    broker
        .update_queue("q", |s| s.dead_letter = DeadLetter::Disabled)
        .await
        .unwrap();
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert_eq!(
        broker.describe_queue("q").unwrap().spec.dead_letter,
        DeadLetter::Disabled
    );
    assert!(broker.describe_queue("q.dlq").is_ok());
    // No longer a dead-letter target, so it can go.
    broker.delete_queue("q.dlq").await.unwrap();
}

#[tokio::test]
async fn temporary_queues_are_not_updatable_and_subscriptions_only_within_their_rules() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let temporary = broker
        .create_temporary_queue("owner", Duration::from_secs(60))
        .await
        .unwrap();
    broker
        .create_topic("t", TopicSpec::default())
        .await
        .unwrap();
    broker
        .create_subscription("s", SubscriptionSpec::new(name("t")))
        .await
        .unwrap();
    let error = broker
        .update_queue(temporary.as_str(), |s| s.lease = Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(
        matches!(error, BrokerError::QueueNotUpdatable { .. }),
        "{error}"
    );
    assert_eq!(error.kind(), ErrorKind::Conflict);
    assert_ne!(
        broker
            .describe_queue(temporary.as_str())
            .unwrap()
            .spec
            .lease,
        Duration::from_secs(1)
    );

    // A subscription's delivery settings change, and its description shows them.
    broker
        .update_queue("s", |s| s.lease = Duration::from_secs(7))
        .await
        .unwrap();
    let info = broker.describe_subscription("s").unwrap();
    assert_eq!(info.spec.delivery.lease, Duration::from_secs(7));
    assert_eq!(info.queue.spec.lease, Duration::from_secs(7));
    // What a subscription may not have is refused, and changes nothing.
    let error = broker
        .update_queue("s", |s| {
            s.lease = Duration::from_secs(9);
            s.length_limit.max_messages = Some(10);
        })
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Invalid, "{error}");
    assert_eq!(
        broker
            .describe_subscription("s")
            .unwrap()
            .spec
            .delivery
            .lease,
        Duration::from_secs(7)
    );
}
