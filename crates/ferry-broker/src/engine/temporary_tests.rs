//! Temporary exclusive queues: owner-only receive, deletion on idle and on disconnect, gone
//! after a reopen.

use std::time::Duration;

use ferry_storage::ManualClock;

use super::tests::{T0, open};
use super::*;

const IDLE: Duration = Duration::from_secs(60);

#[tokio::test]
async fn only_the_owner_receives_and_anyone_publishes() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let name = broker
        .create_temporary_queue("client-1", IDLE)
        .await
        .unwrap();
    assert!(name.as_str().starts_with("tmp."), "{name}");
    broker
        .publish(name.as_str(), OutgoingMessage::new("reply"))
        .await
        .unwrap();
    let refused = broker
        .receive(name.as_str(), "client-2", 1, None, None)
        .await;
    assert!(
        matches!(refused, Err(BrokerError::NotQueueOwner { .. })),
        "{refused:?}"
    );
    assert!(matches!(
        broker.set_prefetch(name.as_str(), "client-2", Some(1)),
        Err(BrokerError::NotQueueOwner { .. })
    ));
    let got = broker
        .receive(name.as_str(), "client-1", 1, None, None)
        .await
        .unwrap();
    assert_eq!(got[0].payload, "reply");
    broker
        .ack(name.as_str(), got[0].seq, got[0].token)
        .await
        .unwrap();
}

#[tokio::test]
async fn an_idle_temporary_queue_is_deleted_and_a_used_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let idle = broker.create_temporary_queue("a", IDLE).await.unwrap();
    let used = broker.create_temporary_queue("a", IDLE).await.unwrap();
    clock.advance(59_000);
    broker.describe_queue(used.as_str()).unwrap();
    broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert_eq!(broker.list_queues().len(), 2, "not idle for 60 s yet");
    clock.advance(1_000);
    broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert_eq!(broker.list_queues(), std::slice::from_ref(&used));
    assert!(!Queue::dir(dir.path(), &idle).exists());
    clock.advance(60_000);
    broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert!(broker.list_queues().is_empty());
}

#[tokio::test]
async fn disconnect_deletes_the_owners_temporary_queues_only() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker
        .create_queue("durable", super::tests::spec(5))
        .await
        .unwrap();
    broker.create_temporary_queue("a", IDLE).await.unwrap();
    broker.create_temporary_queue("a", IDLE).await.unwrap();
    let b = broker.create_temporary_queue("b", IDLE).await.unwrap();
    assert_eq!(broker.disconnect("a").await.unwrap(), 2);
    assert_eq!(broker.disconnect("a").await.unwrap(), 0);
    let left: Vec<String> = broker.list_queues().iter().map(|n| n.to_string()).collect();
    assert_eq!(left, ["durable", "durable.dlq", b.as_str()]);
}

#[tokio::test]
async fn temporary_queues_do_not_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let name = broker.create_temporary_queue("a", IDLE).await.unwrap();
    broker
        .publish(name.as_str(), OutgoingMessage::new("x"))
        .await
        .unwrap();
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert!(broker.list_queues().is_empty());
    assert!(
        !Queue::dir(dir.path(), &name).exists(),
        "its files are removed"
    );
}

#[tokio::test]
async fn bad_temporary_queue_settings_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    for bad in [Duration::from_millis(999), Duration::from_secs(86_401)] {
        assert!(matches!(
            broker.create_temporary_queue("a", bad).await,
            Err(BrokerError::InvalidSetting {
                setting: "idle_timeout",
                ..
            })
        ));
    }
    let long = "o".repeat(MAX_CONSUMER_NAME_BYTES + 1);
    assert!(matches!(
        broker.create_temporary_queue(&long, IDLE).await,
        Err(BrokerError::ConsumerNameTooLong { .. })
    ));
    assert!(broker.list_queues().is_empty());
}
