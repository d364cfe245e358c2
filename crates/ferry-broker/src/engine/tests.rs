use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ferry_storage::ManualClock;

use super::*;
use crate::queue::state::{Acked, LeaseToken, Nacked};
use crate::record::DeadLetterInfo;
use crate::retry::{Backoff, RetryPolicy};
use crate::spec::{DeadLetter, QueueSpec};

pub(super) const T0: i64 = 1_700_000_000_000;

pub(super) async fn open(dir: &Path, clock: &ManualClock) -> Broker {
    let config = BrokerConfig {
        clock: Arc::new(clock.clone()),
        background_timers: false,
        seed: Some(7),
        ..BrokerConfig::default()
    };
    Broker::open(dir, config).await.unwrap()
}

/// A spec with exact timing: no jitter, 1 s base backoff, a 10 s lease, no fsync (tests
/// reopen cleanly; durability modes are storage's to test).
pub(super) fn spec(max_deliveries: u32) -> QueueSpec {
    QueueSpec {
        retry: RetryPolicy {
            max_deliveries,
            backoff: Backoff {
                base: Duration::from_secs(1),
                cap: Duration::from_secs(60),
                multiplier: 2.0,
                jitter: 0.0,
            },
        },
        lease: Duration::from_secs(10),
        durability: Durability::None,
        ..QueueSpec::default()
    }
}

async fn receive(broker: &Broker, queue: &str, max: usize) -> Vec<ReceivedMessage> {
    broker.receive(queue, "c1", max, None, None).await.unwrap()
}

use crate::spec::Durability;

#[tokio::test]
async fn published_message_is_received_acked_and_never_comes_back_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("orders", spec(5)).await.unwrap();
    let id = broker
        .publish(
            "orders",
            OutgoingMessage::new("hello")
                .with_key("k")
                .with_header("type", "t"),
        )
        .await
        .unwrap();
    let got = receive(&broker, "orders", 10).await;
    assert_eq!(got.len(), 1);
    let m = &got[0];
    assert_eq!((m.id, m.seq, m.delivery), (id, 0, 1));
    assert_eq!(m.payload, "hello");
    assert_eq!(m.key.as_deref(), Some(&b"k"[..]));
    assert_eq!(m.headers.get("type").map(String::as_str), Some("t"));
    assert_eq!(
        broker.ack("orders", m.seq, m.token).await.unwrap(),
        Acked::Settled
    );
    assert_eq!(
        broker.ack("orders", m.seq, m.token).await.unwrap(),
        Acked::AlreadySettled
    );
    drop(broker);

    clock.advance(3_600_000);
    let broker = open(dir.path(), &clock).await;
    assert_eq!(broker.list_queues().len(), 2, "orders and orders.dlq");
    broker.tick_now().await.unwrap();
    assert!(receive(&broker, "orders", 10).await.is_empty());
    assert_eq!(
        broker.describe_queue("orders").unwrap().stats.state.tracked,
        0
    );
}

#[tokio::test]
async fn unacked_message_is_redelivered_after_lease_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    broker
        .publish("q", OutgoingMessage::new("x"))
        .await
        .unwrap();
    let first = receive(&broker, "q", 1).await;
    assert_eq!(first.len(), 1);
    clock.advance(9_999);
    broker.tick_now().await.unwrap();
    assert!(
        receive(&broker, "q", 1).await.is_empty(),
        "lease still running"
    );
    // Lease ends at 10 s; the failed attempt then waits the first backoff (1 s).
    clock.advance(1);
    broker.tick_now().await.unwrap();
    assert!(
        receive(&broker, "q", 1).await.is_empty(),
        "backoff still running"
    );
    clock.advance(1_000);
    let again = receive(&broker, "q", 1).await;
    assert_eq!(again.len(), 1);
    assert_eq!((again[0].seq, again[0].delivery), (first[0].seq, 2));
    assert_ne!(again[0].token, first[0].token);
}

#[tokio::test]
async fn nack_waits_for_the_backoff_then_redelivers() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    broker
        .publish("q", OutgoingMessage::new("x"))
        .await
        .unwrap();
    let m = receive(&broker, "q", 1).await.remove(0);
    let nacked = broker
        .nack("q", m.seq, m.token, None, Some("db down"))
        .await
        .unwrap();
    assert_eq!(nacked, Nacked::RetryAt(T0 + 1_000));
    clock.advance(999);
    assert!(receive(&broker, "q", 1).await.is_empty());
    clock.advance(1);
    let again = receive(&broker, "q", 1).await;
    assert_eq!(again[0].delivery, 2);
    // The second failure waits twice as long.
    let nacked = broker
        .nack("q", again[0].seq, again[0].token, None, None)
        .await
        .unwrap();
    assert_eq!(nacked, Nacked::RetryAt(T0 + 1_000 + 2_000));
}

#[tokio::test]
async fn max_deliveries_moves_the_original_message_to_the_dlq_with_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(2)).await.unwrap();
    let id = broker
        .publish(
            "q",
            OutgoingMessage::new("payload")
                .with_key("k")
                .with_header("a", "b"),
        )
        .await
        .unwrap();
    let m = receive(&broker, "q", 1).await.remove(0);
    broker
        .nack("q", m.seq, m.token, Some(Duration::ZERO), Some("first"))
        .await
        .unwrap();
    clock.advance(5);
    let m = broker
        .receive("q", "worker-2", 1, None, None)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(m.delivery, 2);
    let nacked = broker
        .nack("q", m.seq, m.token, None, Some("second"))
        .await
        .unwrap();
    assert_eq!(
        nacked,
        Nacked::DeadLettered(DeadLetterReason::MaxDeliveries)
    );
    assert!(receive(&broker, "q", 1).await.is_empty());

    let dead = receive(&broker, "q.dlq", 10).await;
    assert_eq!(dead.len(), 1);
    let d = &dead[0];
    assert_eq!(d.id, id);
    assert_eq!(d.payload, "payload");
    assert_eq!(d.key.as_deref(), Some(&b"k"[..]));
    assert_eq!(d.headers.len(), 1);
    let info = d.dead_letter.as_ref().unwrap();
    assert_eq!(info.reason, "max_deliveries");
    assert_eq!(info.deliveries, 2);
    assert_eq!(info.origin_queue, "q");
    assert_eq!(info.origin_seq, m.seq);
    assert_eq!(info.origin_published_at, T0);
    assert_eq!(info.last_error.as_deref(), Some("second"));
    assert_eq!(info.first_failure_ms, Some(T0));
    assert_eq!(info.last_failure_ms, Some(T0 + 5));
    assert_eq!(info.consumer.as_deref(), Some("worker-2"));
    let stats = broker.describe_queue("q").unwrap().stats;
    assert_eq!((stats.dead_lettered, stats.state.tracked), (1, 0));

    // Dead after a restart too: neither redelivered on the origin nor duplicated in the DLQ.
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert!(receive(&broker, "q", 1).await.is_empty());
    assert_eq!(broker.describe_queue("q.dlq").unwrap().stats.next_seq, 1);
}

#[tokio::test]
async fn lease_expiry_on_the_last_delivery_dead_letters_on_tick() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(1)).await.unwrap();
    broker
        .publish("q", OutgoingMessage::new("x"))
        .await
        .unwrap();
    receive(&broker, "q", 1).await;
    clock.advance(10_000);
    broker.tick_now().await.unwrap();
    let dead = receive(&broker, "q.dlq", 1).await;
    let info = dead[0].dead_letter.as_ref().unwrap();
    assert_eq!(info.reason, "max_deliveries");
    assert_eq!(info.last_error.as_deref(), Some("lease expired"));
}

#[tokio::test]
async fn reject_dead_letters_immediately_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    broker
        .publish("q", OutgoingMessage::new("bad"))
        .await
        .unwrap();
    let m = receive(&broker, "q", 1).await.remove(0);
    broker
        .reject("q", m.seq, m.token, "schema mismatch")
        .await
        .unwrap();
    let dead = receive(&broker, "q.dlq", 1).await;
    assert_eq!(dead[0].payload, "bad");
    let info = dead[0].dead_letter.as_ref().unwrap();
    assert_eq!((info.reason.as_str(), info.deliveries), ("rejected", 1));
    assert_eq!(info.last_error.as_deref(), Some("schema mismatch"));
    // The delivery ended with its reject: an ack after it did not take, and says so.
    assert!(matches!(
        broker.ack("q", m.seq, m.token).await,
        Err(BrokerError::StaleLease { .. })
    ));
}

#[tokio::test]
async fn duplicate_publish_returns_the_original_id_and_stores_nothing_also_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    let first = broker
        .publish("q", OutgoingMessage::new("a").with_dedup_id("order-7"))
        .await
        .unwrap();
    let again = broker
        .publish("q", OutgoingMessage::new("b").with_dedup_id("order-7"))
        .await
        .unwrap();
    assert_eq!(again, first);
    let chosen = MessageId::generate(T0, &mut fastrand::Rng::with_seed(1));
    let ids = broker
        .publish_batch(
            "q",
            vec![
                OutgoingMessage::new("c").with_id(chosen),
                OutgoingMessage::new("d").with_id(chosen),
            ],
        )
        .await
        .unwrap();
    assert_eq!(ids, vec![chosen, chosen]);
    assert_eq!(broker.describe_queue("q").unwrap().stats.next_seq, 2);
    drop(broker);

    clock.advance(60_000);
    let broker = open(dir.path(), &clock).await;
    let after = broker
        .publish("q", OutgoingMessage::new("e").with_dedup_id("order-7"))
        .await
        .unwrap();
    assert_eq!(after, first);
    let by_id = broker
        .publish("q", OutgoingMessage::new("f").with_id(chosen))
        .await
        .unwrap();
    assert_eq!(by_id, chosen);
    assert_eq!(broker.describe_queue("q").unwrap().stats.next_seq, 2);
    // Past the 5 min window the id is new again.
    clock.advance(5 * 60_000);
    let fresh = broker
        .publish("q", OutgoingMessage::new("g").with_dedup_id("order-7"))
        .await
        .unwrap();
    assert_ne!(fresh, first);
    assert_eq!(broker.describe_queue("q").unwrap().stats.next_seq, 3);
}

#[tokio::test]
async fn a_dedup_id_on_a_queue_without_a_dedup_window_is_refused_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let mut windowless = spec(5);
    windowless.dedup_window = Duration::ZERO;
    broker.create_queue("q", windowless).await.unwrap();
    let refused = broker
        .publish_batch(
            "q",
            vec![
                OutgoingMessage::new("plain"),
                OutgoingMessage::new("deduplicated").with_dedup_id("order-7"),
            ],
        )
        .await;
    let Err(e @ BrokerError::DedupIdWithoutWindow { .. }) = refused else {
        panic!("a dedup id on a queue without a window answered {refused:?}");
    };
    assert_eq!(e.kind(), crate::ErrorKind::Invalid);
    assert!(e.to_string().contains("without a dedup window"), "{e}");
    // The whole batch was refused; without dedup ids the same publish is taken.
    assert_eq!(broker.describe_queue("q").unwrap().stats.next_seq, 0);
    broker
        .publish("q", OutgoingMessage::new("plain"))
        .await
        .unwrap();
    assert_eq!(broker.describe_queue("q").unwrap().stats.next_seq, 1);
}

#[tokio::test]
async fn delayed_message_survives_reopen_and_is_delivered_only_at_its_time() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    let delay = Duration::from_secs(3 * 24 * 3600);
    broker
        .publish("q", OutgoingMessage::new("later").with_delay(delay))
        .await
        .unwrap();
    assert_eq!(broker.describe_queue("q").unwrap().stats.state.delayed, 1);
    drop(broker);

    clock.advance(3 * 24 * 3_600_000 - 1);
    let broker = open(dir.path(), &clock).await;
    broker.tick_now().await.unwrap();
    assert!(receive(&broker, "q", 1).await.is_empty());
    clock.advance(1);
    let got = receive(&broker, "q", 1).await;
    assert_eq!(got[0].payload, "later");
}

#[tokio::test]
async fn state_survives_reopen_mid_flight() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    for payload in ["acked", "in-flight", "retrying", "ready"] {
        broker
            .publish("q", OutgoingMessage::new(payload))
            .await
            .unwrap();
    }
    let got = receive(&broker, "q", 3).await;
    assert_eq!(got.len(), 3);
    broker.ack("q", got[0].seq, got[0].token).await.unwrap();
    broker
        .nack(
            "q",
            got[2].seq,
            got[2].token,
            Some(Duration::from_secs(60)),
            None,
        )
        .await
        .unwrap();
    drop(broker);

    clock.advance(1_000);
    let broker = open(dir.path(), &clock).await;
    let stats = broker.describe_queue("q").unwrap().stats;
    assert_eq!(stats.state.tracked, 3);
    let now = receive(&broker, "q", 10).await;
    assert_eq!(now.len(), 1);
    assert_eq!(
        (now[0].payload.as_ref(), now[0].delivery),
        (&b"ready"[..], 1)
    );
    // The in-flight lease ran until T0 + 10 s.
    clock.set(T0 + 10_000);
    let now = receive(&broker, "q", 10).await;
    assert_eq!(now.len(), 1);
    assert_eq!(
        (now[0].payload.as_ref(), now[0].delivery),
        (&b"in-flight"[..], 2)
    );
    // The retry timer was at T0 + 60 s.
    clock.set(T0 + 59_999);
    assert!(receive(&broker, "q", 10).await.is_empty());
    clock.set(T0 + 60_000);
    let now = receive(&broker, "q", 10).await;
    assert_eq!(
        (now[0].payload.as_ref(), now[0].delivery),
        (&b"retrying"[..], 2)
    );
}

#[tokio::test]
async fn ack_with_a_stale_token_is_an_error_and_keeps_the_message() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    broker
        .publish("q", OutgoingMessage::new("x"))
        .await
        .unwrap();
    let old = receive(&broker, "q", 1).await.remove(0);
    clock.advance(11_000);
    broker.tick_now().await.unwrap();
    clock.advance(1_000);
    let new = receive(&broker, "q", 1).await.remove(0);
    let err = broker.ack("q", old.seq, old.token).await.unwrap_err();
    assert!(matches!(err, BrokerError::StaleLease { .. }), "{err}");
    assert_eq!(broker.describe_queue("q").unwrap().stats.state.in_flight, 1);
    broker.ack("q", new.seq, new.token).await.unwrap();
}

#[tokio::test]
async fn describe_queue_counts_ready_in_flight_delayed_and_outcomes() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    for i in 0..4 {
        broker
            .publish("q", OutgoingMessage::new(format!("{i}")))
            .await
            .unwrap();
    }
    broker
        .publish(
            "q",
            OutgoingMessage::new("d").with_delay(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    let got = receive(&broker, "q", 2).await;
    broker.ack("q", got[0].seq, got[0].token).await.unwrap();
    broker
        .nack("q", got[1].seq, got[1].token, None, None)
        .await
        .unwrap();
    clock.advance(500);
    let info = broker.describe_queue("q").unwrap();
    let s = info.stats;
    assert_eq!(info.spec, spec(5));
    assert_eq!(
        (
            s.state.tracked,
            s.state.ready,
            s.state.in_flight,
            s.state.delayed
        ),
        (4, 2, 0, 2)
    );
    assert_eq!(s.state.oldest_ready_age_ms, Some(500));
    assert_eq!(
        (s.acked, s.nacked, s.dead_lettered, s.next_seq),
        (1, 1, 0, 5)
    );
    assert!(matches!(
        broker.describe_queue("nope"),
        Err(BrokerError::QueueNotFound { .. })
    ));
}

#[tokio::test]
async fn invalid_name_or_spec_is_a_typed_error_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let err = broker.create_queue("bad name", spec(5)).await.unwrap_err();
    assert!(
        matches!(err, BrokerError::InvalidNameCharacter { .. }),
        "{err}"
    );
    let zero_lease = QueueSpec {
        lease: Duration::ZERO,
        ..spec(5)
    };
    let err = broker.create_queue("q", zero_lease).await.unwrap_err();
    assert!(matches!(err, BrokerError::InvalidQueueSpec { .. }), "{err}");
    let missing_target = QueueSpec {
        dead_letter: DeadLetter::Named(Name::new("nowhere").unwrap()),
        ..spec(5)
    };
    let err = broker.create_queue("q", missing_target).await.unwrap_err();
    assert!(
        matches!(err, BrokerError::DeadLetterTargetMissing { .. }),
        "{err}"
    );
    assert!(broker.list_queues().is_empty());
    assert!(!dir.path().join("queues").exists());
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert!(broker.list_queues().is_empty());
}

#[tokio::test]
async fn dead_letter_target_cannot_be_deleted_but_its_origin_can() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    broker
        .publish("q", OutgoingMessage::new("x"))
        .await
        .unwrap();
    let err = broker.delete_queue("q.dlq").await.unwrap_err();
    assert!(
        matches!(err, BrokerError::QueueIsDeadLetterTarget { .. }),
        "{err}"
    );
    broker.delete_queue("q").await.unwrap();
    broker.delete_queue("q.dlq").await.unwrap();
    assert!(broker.list_queues().is_empty());
    // A new queue of the same name starts empty.
    broker.create_queue("q", spec(5)).await.unwrap();
    assert_eq!(broker.describe_queue("q").unwrap().stats.next_seq, 0);
    let err = broker.create_queue("q", spec(5)).await.unwrap_err();
    assert!(matches!(err, BrokerError::QueueExists { .. }), "{err}");
}

#[tokio::test]
async fn long_poll_wakes_on_publish() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    let waiter = {
        let broker = broker.clone();
        tokio::spawn(async move {
            broker
                .receive("q", "c", 1, None, Some(Duration::from_secs(30)))
                .await
                .unwrap()
        })
    };
    tokio::task::yield_now().await;
    broker
        .publish("q", OutgoingMessage::new("x"))
        .await
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter woke")
        .unwrap();
    assert_eq!(got.len(), 1);
}

#[tokio::test]
async fn dead_letter_already_in_the_dlq_is_not_redelivered_after_a_crash_before_its_journal() {
    // Simulates the crash window: the dead letter reached the DLQ, but the origin's journal
    // never got DeadLettered. We store such a dead letter by hand.
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    broker
        .publish("q", OutgoingMessage::new("x"))
        .await
        .unwrap();
    let dlq = broker.queue("q.dlq").unwrap();
    let mut letter = broker.queue("q").unwrap().read(0).unwrap();
    letter.dead_letter = Some(DeadLetterInfo {
        reason: "rejected".into(),
        deliveries: 1,
        origin_queue: "q".into(),
        origin_seq: 0,
        origin_published_at: T0,
        last_error: None,
        first_failure_ms: None,
        last_failure_ms: None,
        consumer: None,
    });
    dlq.store(
        vec![super::queue::Incoming::without_dedup(letter)],
        None,
        Arc::new(clock.clone()),
        super::queue::Room::NONE,
    )
    .await
    .unwrap();
    drop(dlq);
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert!(receive(&broker, "q", 1).await.is_empty());
    assert_eq!(receive(&broker, "q.dlq", 5).await.len(), 1);
}

use crate::queue::state::DeadLetterReason;

#[tokio::test]
async fn extended_lease_is_not_cut_short_by_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    broker
        .publish("q", OutgoingMessage::new("m"))
        .await
        .unwrap();
    let m = receive(&broker, "q", 1).await.remove(0);
    assert_eq!(m.lease_until_ms, T0 + 10_000);
    let until = broker
        .extend("q", m.seq, m.token, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(until, T0 + 60_000);
    drop(broker);

    // Past the old deadline, before the extended one.
    clock.set(T0 + 30_000);
    let broker = open(dir.path(), &clock).await;
    assert_redelivered_only_at(&broker, &clock, T0 + 60_000).await;
}

/// Nothing is deliverable at the clock's current time; at `due_ms` the message comes back
/// as its second delivery.
async fn assert_redelivered_only_at(broker: &Broker, clock: &ManualClock, due_ms: i64) {
    broker.tick_now().await.unwrap();
    assert!(receive(broker, "q", 1).await.is_empty());
    clock.set(due_ms);
    broker.tick_now().await.unwrap();
    let again = receive(broker, "q", 1).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].delivery, 2);
}

#[tokio::test]
async fn backoff_after_a_lease_expiry_is_not_cut_short_by_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let mut long_backoff = spec(5);
    long_backoff.retry.backoff.base = Duration::from_secs(30);
    broker.create_queue("q", long_backoff).await.unwrap();
    broker
        .publish("q", OutgoingMessage::new("m"))
        .await
        .unwrap();
    assert_eq!(receive(&broker, "q", 1).await.len(), 1);
    // The lease ends unanswered: a failed attempt, retried 30 s later.
    clock.set(T0 + 10_000);
    broker.tick_now().await.unwrap();
    drop(broker);

    clock.set(T0 + 20_000);
    let broker = open(dir.path(), &clock).await;
    assert_redelivered_only_at(&broker, &clock, T0 + 40_000).await;
}

#[tokio::test]
async fn failed_journal_append_poisons_the_queue_instead_of_leaving_memory_and_disk_apart() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    broker.create_queue("other", spec(5)).await.unwrap();
    broker
        .publish("q", OutgoingMessage::new("m"))
        .await
        .unwrap();
    let m = receive(&broker, "q", 1).await.remove(0);

    let q = broker.queue("q").unwrap();
    q.fail_next_journal_append.store(true, Ordering::SeqCst);
    drop(q);
    let error = broker.ack("q", m.seq, m.token).await.unwrap_err();
    assert!(
        matches!(
            error,
            BrokerError::Storage(ferry_storage::StorageError::ReadOnly { .. })
        ),
        "{error}"
    );

    // Every later operation on the queue says so, and what to do.
    let poisoned = |e: BrokerError| matches!(e, BrokerError::QueuePoisoned { ref queue, .. } if queue.as_str() == "q");
    let error = broker
        .publish("q", OutgoingMessage::new("n"))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("reopen the broker"), "{error}");
    assert!(poisoned(error));
    assert!(poisoned(
        broker.receive("q", "c1", 1, None, None).await.unwrap_err()
    ));
    assert!(poisoned(broker.ack("q", m.seq, m.token).await.unwrap_err()));
    assert!(poisoned(broker.describe_queue("q").unwrap_err()));

    // Other queues keep working, ticks included.
    broker
        .publish("other", OutgoingMessage::new("o"))
        .await
        .unwrap();
    broker.tick_now().await.unwrap();
    let o = receive(&broker, "other", 1).await.remove(0);
    broker.ack("other", o.seq, o.token).await.unwrap();
    drop(broker);

    // A reopen rebuilds the queue from disk: the ack never became durable.
    clock.set(T0 + 10_000);
    let broker = open(dir.path(), &clock).await;
    let again = receive(&broker, "q", 1).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].delivery, 2);
}

#[tokio::test]
async fn broker_assigned_ids_are_never_dedup_keys_before_or_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    let next_seq = |b: &Broker| b.describe_queue("q").unwrap().stats.next_seq;
    let a = broker
        .publish("q", OutgoingMessage::new("a"))
        .await
        .unwrap();
    let b = broker
        .publish("q", OutgoingMessage::new("b"))
        .await
        .unwrap();
    assert_ne!(a, b);
    // A producer-chosen id equal to a broker-assigned one is not a duplicate of it.
    let c = broker
        .publish("q", OutgoingMessage::new("c").with_id(a))
        .await
        .unwrap();
    assert_eq!((c, next_seq(&broker)), (a, 3));
    // Two with the same producer-chosen id are.
    let chosen = MessageId::generate(T0, &mut fastrand::Rng::with_seed(9));
    broker
        .publish("q", OutgoingMessage::new("d").with_id(chosen))
        .await
        .unwrap();
    broker
        .publish("q", OutgoingMessage::new("e").with_id(chosen))
        .await
        .unwrap();
    assert_eq!(next_seq(&broker), 4);
    drop(broker);

    clock.advance(1_000);
    let broker = open(dir.path(), &clock).await;
    // The window rebuilt on open keys the same messages as before: not `b`'s assigned id…
    let f = broker
        .publish("q", OutgoingMessage::new("f").with_id(b))
        .await
        .unwrap();
    assert_eq!((f, next_seq(&broker)), (b, 5));
    // … but `a` as chosen by the producer for `c`, and `chosen`.
    broker
        .publish("q", OutgoingMessage::new("g").with_id(a))
        .await
        .unwrap();
    broker
        .publish("q", OutgoingMessage::new("h").with_id(chosen))
        .await
        .unwrap();
    assert_eq!(next_seq(&broker), 5);
    broker
        .publish("q", OutgoingMessage::new("i"))
        .await
        .unwrap();
    broker
        .publish("q", OutgoingMessage::new("j"))
        .await
        .unwrap();
    assert_eq!(next_seq(&broker), 7);
}

#[tokio::test]
async fn ack_batch_settles_with_one_write_and_reports_each_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    let batch = ["m0", "m1", "m2"].map(OutgoingMessage::new).to_vec();
    broker.publish_batch("q", batch).await.unwrap();
    let got = receive(&broker, "q", 3).await;
    let journal_before = broker.queue("q").unwrap().journal.end_offset();
    let stale = LeaseToken(got[1].token.0 + 1_000);
    let outcomes = broker
        .ack_batch(
            "q",
            &[
                (got[0].seq, got[0].token),
                (got[1].seq, stale),
                (got[2].seq, got[2].token),
                (got[0].seq, got[0].token),
            ],
        )
        .await
        .unwrap();
    assert!(matches!(outcomes[0], Ok(Acked::Settled)));
    assert!(matches!(outcomes[1], Err(BrokerError::StaleLease { .. })));
    assert!(matches!(outcomes[2], Ok(Acked::Settled)));
    assert!(matches!(outcomes[3], Ok(Acked::AlreadySettled)));
    let q = broker.queue("q").unwrap();
    assert_eq!(
        q.journal.end_offset() - journal_before,
        1,
        "two Acked events, packed into one record"
    );
    assert_eq!(broker.describe_queue("q").unwrap().stats.acked, 2);
    drop(q);
    drop(broker);

    let broker = open(dir.path(), &clock).await;
    clock.advance(10_000);
    let left = receive(&broker, "q", 10).await;
    assert_eq!(left.len(), 1);
    assert_eq!(
        (left[0].payload.as_ref(), left[0].delivery),
        (&b"m1"[..], 2)
    );
}

#[tokio::test]
async fn packed_leases_with_mixed_delivery_counts_come_back_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    let batch = (0..6)
        .map(|i| OutgoingMessage::new(format!("m{i}")))
        .collect();
    broker.publish_batch("q", batch).await.unwrap();
    let first = receive(&broker, "q", 3).await;
    for m in &first[..2] {
        broker
            .nack("q", m.seq, m.token, Some(Duration::ZERO), None)
            .await
            .unwrap();
    }
    // One receive: the two retried messages (second delivery) beside three fresh ones,
    // journaled as one append of leases that differ in their count.
    let second = receive(&broker, "q", 10).await;
    let counts = |got: &[ReceivedMessage]| {
        let mut counts: Vec<(String, u32)> = got
            .iter()
            .map(|m| (String::from_utf8_lossy(&m.payload).into_owned(), m.delivery))
            .collect();
        counts.sort();
        counts
    };
    let mut want = counts(&second);
    assert_eq!(want.len(), 5);
    broker
        .ack_batch("q", &[(first[2].seq, first[2].token)])
        .await
        .unwrap();
    drop(broker);

    let broker = open(dir.path(), &clock).await;
    clock.advance(10_000);
    let again = receive(&broker, "q", 10).await;
    for (_, delivery) in &mut want {
        *delivery += 1;
    }
    assert_eq!(counts(&again), want);
    let acks: Vec<_> = again.iter().map(|m| (m.seq, m.token)).collect();
    broker.ack_batch("q", &acks).await.unwrap();
    drop(broker);

    let broker = open(dir.path(), &clock).await;
    clock.advance(10_000);
    assert!(receive(&broker, "q", 10).await.is_empty());
    assert_eq!(broker.describe_queue("q").unwrap().stats.acked, 6);
}

#[tokio::test]
async fn a_poisoned_queue_can_be_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    broker
        .publish("q", OutgoingMessage::new("m"))
        .await
        .unwrap();
    let q = broker.queue("q").unwrap();
    q.fail_next_journal_append.store(true, Ordering::SeqCst);
    drop(q);
    assert!(broker.receive("q", "c1", 1, None, None).await.is_err());
    assert!(matches!(
        broker.describe_queue("q"),
        Err(BrokerError::QueuePoisoned { .. })
    ));
    broker.delete_queue("q").await.unwrap();
    assert_eq!(broker.list_queues(), [Name::new("q.dlq").unwrap()]);
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert_eq!(broker.list_queues(), [Name::new("q.dlq").unwrap()]);
}

/// With the real clock and the timer task (and housekeeping too rare to wake it), a new
/// delay or lease deadline earlier than the task's planned wake-up must wake it.
#[tokio::test]
async fn the_timer_task_wakes_for_new_delays_and_lease_deadlines() {
    let dir = tempfile::tempdir().unwrap();
    let config = BrokerConfig {
        housekeeping_interval: Duration::from_secs(3600),
        seed: Some(3),
        ..BrokerConfig::default()
    };
    let broker = Broker::open(dir.path(), config).await.unwrap();
    let q_spec = QueueSpec {
        retry: RetryPolicy {
            max_deliveries: 5,
            backoff: Backoff {
                base: Duration::from_millis(50),
                cap: Duration::from_millis(50),
                multiplier: 2.0,
                jitter: 0.0,
            },
        },
        ..spec(5)
    };
    broker.create_queue("q", q_spec).await.unwrap();
    let started = std::time::Instant::now();
    let delayed = OutgoingMessage::new("d").with_delay(Duration::from_millis(200));
    broker.publish("q", delayed).await.unwrap();
    let wait = Some(Duration::from_secs(20));
    let got = broker
        .receive("q", "c1", 1, Some(Duration::from_millis(200)), wait)
        .await;
    let got = got.unwrap();
    assert_eq!(got.len(), 1);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // Not acked: the 200 ms lease ends, the retry follows 50 ms later.
    let again = broker.receive("q", "c2", 1, None, wait).await.unwrap();
    assert_eq!((again.len(), again[0].delivery), (1, 2));
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
}
