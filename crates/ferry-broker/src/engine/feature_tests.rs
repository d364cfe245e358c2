//! Length limits, cancel by id, prefetch through the API and redrive.

use std::time::Duration;

use ferry_storage::ManualClock;

use super::*;
use crate::queue::state::DeadLetterReason;
use crate::record::{REDRIVE_COUNT, REDRIVE_FROM};
use crate::spec::{DeadLetter, QueueSpec};
use crate::spec::{LengthLimit, OverflowPolicy};

use super::tests::{T0, open, spec};

fn limited(
    max_messages: Option<u64>,
    max_bytes: Option<u64>,
    overflow: OverflowPolicy,
) -> QueueSpec {
    QueueSpec {
        length_limit: LengthLimit {
            max_messages,
            max_bytes,
            overflow,
        },
        ..spec(5)
    }
}

async fn receive(broker: &Broker, queue: &str, max: usize) -> Vec<ReceivedMessage> {
    broker.receive(queue, "c1", max, None, None).await.unwrap()
}

async fn publish(broker: &Broker, queue: &str, payload: &'static str) -> Result<MessageId> {
    broker.publish(queue, OutgoingMessage::new(payload)).await
}

fn payloads(got: &[ReceivedMessage]) -> Vec<String> {
    got.iter()
        .map(|m| String::from_utf8(m.payload.to_vec()).unwrap())
        .collect()
}

fn stats(broker: &Broker, queue: &str) -> QueueStats {
    broker.describe_queue(queue).unwrap().stats
}

// ---- Length limits ----

#[tokio::test]
async fn reject_publish_refuses_when_full_stores_nothing_and_stays_full_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let spec = limited(Some(2), None, OverflowPolicy::RejectPublish);
    broker.create_queue("q", spec).await.unwrap();
    publish(&broker, "q", "a").await.unwrap();
    let full = publish(&broker, "q", "b")
        .await
        .and(publish(&broker, "q", "c").await);
    match full {
        Err(BrokerError::QueueFull { queue, limit }) => {
            assert_eq!(queue.as_str(), "q");
            assert_eq!(limit.max_messages, Some(2));
        }
        other => panic!("expected QueueFull, got {other:?}"),
    }
    assert_eq!(stats(&broker, "q").next_seq, 2, "nothing stored for c");
    // A batch is taken whole: one slot free after an ack, but two messages do not fit.
    let m = receive(&broker, "q", 1).await.remove(0);
    broker.ack("q", m.seq, m.token).await.unwrap();
    let batch = vec![OutgoingMessage::new("d"), OutgoingMessage::new("e")];
    assert!(matches!(
        broker.publish_batch("q", batch).await,
        Err(BrokerError::QueueFull { .. })
    ));
    assert_eq!(stats(&broker, "q").next_seq, 2);
    publish(&broker, "q", "f").await.unwrap();
    drop(broker);

    // The count is rebuilt on open: b and f fill the queue.
    let broker = open(dir.path(), &clock).await;
    assert_eq!(stats(&broker, "q").state.tracked, 2);
    assert!(matches!(
        publish(&broker, "q", "g").await,
        Err(BrokerError::QueueFull { .. })
    ));
    assert_eq!(payloads(&receive(&broker, "q", 10).await), ["b", "f"]);
}

#[tokio::test]
async fn max_bytes_counts_payload_key_and_headers() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let spec = limited(None, Some(10), OverflowPolicy::RejectPublish);
    broker.create_queue("q", spec).await.unwrap();
    let big = OutgoingMessage::new("123456789").with_key("kk");
    assert!(matches!(
        broker.publish("q", big).await,
        Err(BrokerError::QueueFull { .. })
    ));
    publish(&broker, "q", "12345").await.unwrap();
    publish(&broker, "q", "12345").await.unwrap();
    assert!(matches!(
        publish(&broker, "q", "1").await,
        Err(BrokerError::QueueFull { .. })
    ));
    assert_eq!(stats(&broker, "q").state.bytes, 10);
}

#[tokio::test]
async fn drop_head_drops_the_oldest_message_not_in_flight_also_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let spec = limited(Some(2), None, OverflowPolicy::DropHead);
    broker.create_queue("q", spec).await.unwrap();
    for p in ["a", "b", "c"] {
        publish(&broker, "q", p).await.unwrap();
    }
    let s = stats(&broker, "q");
    assert_eq!((s.state.tracked, s.dropped, s.next_seq), (2, 1, 3));
    // b in flight is not dropped; c (the oldest not in flight) is.
    let b = receive(&broker, "q", 1).await.remove(0);
    assert_eq!(b.payload, "b");
    publish(&broker, "q", "d").await.unwrap();
    assert_eq!(stats(&broker, "q").dropped, 2);
    // A batch larger than the limit is refused whole and drops nothing.
    let batch = vec![OutgoingMessage::new("x"); 3];
    assert!(matches!(
        broker.publish_batch("q", batch).await,
        Err(BrokerError::QueueFull { .. })
    ));
    // With b in flight only one message can be made room for.
    let batch = vec![OutgoingMessage::new("y"), OutgoingMessage::new("z")];
    assert!(matches!(
        broker.publish_batch("q", batch).await,
        Err(BrokerError::QueueFull { .. })
    ));
    assert_eq!(stats(&broker, "q").dropped, 2);
    drop(broker);

    let broker = open(dir.path(), &clock).await;
    assert_eq!(stats(&broker, "q").state.tracked, 2, "b and d");
    clock.advance(10_000 + 1_000); // b's lease ends, then its backoff
    broker.tick_now().await.unwrap();
    publish(&broker, "q", "e").await.unwrap(); // drops b, the oldest
    assert_eq!(
        stats(&broker, "q").dropped,
        3,
        "counted since the queue was created"
    );
    assert_eq!(payloads(&receive(&broker, "q", 10).await), ["d", "e"]);
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert_eq!(stats(&broker, "q").state.tracked, 2);
}

#[tokio::test]
async fn dead_letter_head_moves_the_oldest_to_the_dlq_with_reason_overflow() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let spec = limited(Some(1), None, OverflowPolicy::DeadLetterHead);
    broker.create_queue("q", spec).await.unwrap();
    let a = publish(&broker, "q", "a").await.unwrap();
    publish(&broker, "q", "b").await.unwrap();
    let s = stats(&broker, "q");
    assert_eq!((s.state.tracked, s.dead_lettered), (1, 1));
    drop(broker);

    let broker = open(dir.path(), &clock).await;
    assert_eq!(stats(&broker, "q").state.tracked, 1);
    publish(&broker, "q", "c").await.unwrap(); // b goes too
    assert_eq!(payloads(&receive(&broker, "q", 10).await), ["c"]);
    let dead = receive(&broker, "q.dlq", 10).await;
    assert_eq!(payloads(&dead), ["a", "b"]);
    assert_eq!(dead[0].id, a);
    let info = dead[0].dead_letter.as_ref().unwrap();
    assert_eq!((info.reason.as_str(), info.deliveries), ("overflow", 0));
    assert_eq!(info.origin_queue, "q");
}

// ---- Cancel ----

#[tokio::test]
async fn cancel_removes_a_scheduled_message_durably_and_only_a_scheduled_one() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    let delayed = |p: &'static str| OutgoingMessage::new(p).with_delay(Duration::from_secs(60));
    let gone = broker.publish("q", delayed("gone")).await.unwrap();
    let kept = broker.publish("q", delayed("kept")).await.unwrap();
    let now = publish(&broker, "q", "now").await.unwrap();
    assert!(broker.cancel("q", gone).await.unwrap());
    assert!(
        !broker.cancel("q", gone).await.unwrap(),
        "already cancelled"
    );
    assert!(!broker.cancel("q", now).await.unwrap(), "not scheduled");
    let unknown = MessageId::generate(T0, &mut fastrand::Rng::with_seed(99));
    assert!(!broker.cancel("q", unknown).await.unwrap());
    let s = stats(&broker, "q");
    assert_eq!((s.state.delayed, s.cancelled), (1, 1));
    drop(broker);

    let broker = open(dir.path(), &clock).await;
    clock.advance(60_000);
    broker.tick_now().await.unwrap();
    let got = receive(&broker, "q", 10).await;
    assert_eq!(payloads(&got), ["kept", "now"]);
    assert!(
        !broker.cancel("q", kept).await.unwrap(),
        "due and delivered: no longer cancellable"
    );
}

#[tokio::test]
async fn a_scheduled_message_survives_reopen_and_can_then_be_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    let id = broker
        .publish(
            "q",
            OutgoingMessage::new("x").with_delay(Duration::from_secs(5)),
        )
        .await
        .unwrap();
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert!(broker.cancel("q", id).await.unwrap());
    clock.advance(5_000);
    broker.tick_now().await.unwrap();
    assert!(receive(&broker, "q", 10).await.is_empty());
}

// ---- Prefetch ----

#[tokio::test]
async fn set_prefetch_caps_a_consumers_in_flight_messages() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    for p in ["a", "b", "c"] {
        publish(&broker, "q", p).await.unwrap();
    }
    broker.set_prefetch("q", "c1", Some(1)).unwrap();
    let first = receive(&broker, "q", 10).await;
    assert_eq!(payloads(&first), ["a"]);
    assert!(receive(&broker, "q", 10).await.is_empty(), "at its cap");
    let other = broker.receive("q", "c2", 10, None, None).await.unwrap();
    assert_eq!(other.len(), 2, "other consumers are not capped");
    broker.ack("q", first[0].seq, first[0].token).await.unwrap();
    publish(&broker, "q", "d").await.unwrap();
    broker.set_prefetch("q", "c1", None).unwrap();
    assert_eq!(payloads(&receive(&broker, "q", 10).await), ["d"]);
    assert!(matches!(
        broker.set_prefetch("nope", "c1", Some(1)),
        Err(BrokerError::QueueNotFound { .. })
    ));
}

// ---- Redrive ----

/// Publishes `payload` to `q` and rejects it into `q.dlq`.
async fn reject_one(broker: &Broker, q: &str, message: OutgoingMessage) {
    broker.publish(q, message).await.unwrap();
    let m = receive(broker, q, 1).await.remove(0);
    broker.reject(q, m.seq, m.token, "bad").await.unwrap();
}

#[tokio::test]
async fn redrive_moves_every_dead_letter_back_with_fresh_attempts_and_redrive_headers() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    let message = OutgoingMessage::new("a")
        .with_key("k")
        .with_header("type", "t")
        .with_priority(0);
    reject_one(&broker, "q", message).await;
    reject_one(&broker, "q", OutgoingMessage::new("b")).await;
    let report = broker
        .redrive("q.dlq", RedriveRequest::default())
        .await
        .unwrap();
    assert_eq!(
        report,
        RedriveReport {
            moved: 2,
            skipped: 0
        }
    );
    assert_eq!(stats(&broker, "q.dlq").state.tracked, 0);

    let got = receive(&broker, "q", 10).await;
    assert_eq!(payloads(&got), ["a", "b"]);
    let a = &got[0];
    assert_eq!(a.delivery, 1, "attempts reset");
    assert_eq!(a.key.as_deref(), Some(&b"k"[..]));
    assert!(a.dead_letter.is_none());
    assert_eq!(a.headers.get("type").map(String::as_str), Some("t"));
    assert_eq!(a.headers.get(REDRIVE_COUNT).map(String::as_str), Some("1"));
    assert_eq!(
        a.headers.get(REDRIVE_FROM).map(String::as_str),
        Some("q.dlq")
    );

    // Dead again and redriven again: the count goes on.
    broker
        .reject("q", a.seq, a.token, "still bad")
        .await
        .unwrap();
    let report = broker
        .redrive("q.dlq", RedriveRequest::default())
        .await
        .unwrap();
    assert_eq!(report.moved, 1);
    let again = receive(&broker, "q", 10).await;
    assert_eq!(payloads(&again), ["a"]);
    assert_eq!(
        again[0].headers.get(REDRIVE_COUNT).map(String::as_str),
        Some("2")
    );
    drop(broker);

    // Acked in the dead-letter queue: nothing comes back there after a reopen.
    let broker = open(dir.path(), &clock).await;
    assert_eq!(stats(&broker, "q.dlq").state.tracked, 0);
    assert_eq!(
        stats(&broker, "q").state.tracked,
        2,
        "b and a, both redriven"
    );
}

#[tokio::test]
async fn redrive_filters_by_reason_header_and_age_and_honours_max_messages() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    reject_one(
        &broker,
        "q",
        OutgoingMessage::new("rejected").with_header("tenant", "x"),
    )
    .await;
    broker
        .publish(
            "q",
            OutgoingMessage::new("expired").with_ttl(Duration::from_secs(1)),
        )
        .await
        .unwrap();
    clock.advance(1_000);
    broker.tick_now().await.unwrap();
    reject_one(
        &broker,
        "q",
        OutgoingMessage::new("later").with_header("tenant", "y"),
    )
    .await;
    assert_eq!(stats(&broker, "q.dlq").state.tracked, 3);

    let by_reason = RedriveRequest {
        filter: RedriveFilter {
            reason: Some(DeadLetterReason::Expired),
            ..RedriveFilter::default()
        },
        ..RedriveRequest::default()
    };
    assert_eq!(broker.redrive("q.dlq", by_reason).await.unwrap().moved, 1);
    assert_eq!(payloads(&receive(&broker, "q", 10).await), ["expired"]);

    let by_header = RedriveRequest {
        filter: RedriveFilter {
            header: Some(("tenant".into(), "y".into())),
            ..RedriveFilter::default()
        },
        ..RedriveRequest::default()
    };
    assert_eq!(broker.redrive("q.dlq", by_header).await.unwrap().moved, 1);
    assert_eq!(payloads(&receive(&broker, "q", 10).await), ["later"]);

    let too_new = RedriveRequest {
        filter: RedriveFilter {
            older_than: Some(Duration::from_secs(2)),
            ..RedriveFilter::default()
        },
        ..RedriveRequest::default()
    };
    assert_eq!(
        broker
            .redrive("q.dlq", too_new.clone())
            .await
            .unwrap()
            .moved,
        0
    );
    clock.advance(1_000); // "rejected" died at T0: now 2 s ago
    let limited = RedriveRequest {
        max_messages: Some(1),
        rate_per_sec: Some(1_000),
        ..too_new
    };
    assert_eq!(broker.redrive("q.dlq", limited).await.unwrap().moved, 1);
    assert_eq!(payloads(&receive(&broker, "q", 10).await), ["rejected"]);
    assert_eq!(stats(&broker, "q.dlq").state.tracked, 0);
}

#[tokio::test]
async fn redrive_of_selected_seqs_moves_only_those_and_passes_over_seqs_no_longer_there() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    for p in ["a", "b", "c", "d"] {
        reject_one(&broker, "q", OutgoingMessage::new(p)).await;
    }
    let letters = broker
        .peek("q.dlq", None, 10, &RedriveFilter::default())
        .unwrap();
    let seq_of = |payload: &str| {
        letters
            .iter()
            .find(|l| &l.message.payload[..] == payload.as_bytes())
            .unwrap()
            .seq
    };
    // "b" and "d" are selected, with a seq the queue never had.
    let selected = RedriveRequest {
        filter: RedriveFilter {
            seqs: Some([seq_of("b"), seq_of("d"), 9_999].into()),
            ..RedriveFilter::default()
        },
        ..RedriveRequest::default()
    };
    let report = broker.redrive("q.dlq", selected.clone()).await.unwrap();
    assert_eq!((report.moved, report.skipped), (2, 0));
    assert_eq!(payloads(&receive(&broker, "q", 10).await), ["b", "d"]);
    assert_eq!(stats(&broker, "q.dlq").state.tracked, 2, "a and c stay");
    // The same selection again: moved already, so nothing more.
    assert_eq!(broker.redrive("q.dlq", selected).await.unwrap().moved, 0);
    // An empty selection selects nothing.
    let none = RedriveRequest {
        filter: RedriveFilter {
            seqs: Some(Default::default()),
            ..RedriveFilter::default()
        },
        ..RedriveRequest::default()
    };
    assert_eq!(broker.redrive("q.dlq", none).await.unwrap().moved, 0);
    assert_eq!(stats(&broker, "q.dlq").state.tracked, 2);
}

#[tokio::test]
async fn redrive_by_key_moves_only_that_keys_letters() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    reject_one(&broker, "q", OutgoingMessage::new("a").with_key("k1")).await;
    reject_one(&broker, "q", OutgoingMessage::new("b").with_key("k2")).await;
    reject_one(&broker, "q", OutgoingMessage::new("c")).await;
    reject_one(&broker, "q", OutgoingMessage::new("d").with_key("k1")).await;
    let by_key = RedriveRequest {
        filter: RedriveFilter {
            key: Some(bytes::Bytes::from_static(b"k1")),
            ..RedriveFilter::default()
        },
        ..RedriveRequest::default()
    };
    assert_eq!(broker.redrive("q.dlq", by_key).await.unwrap().moved, 2);
    assert_eq!(payloads(&receive(&broker, "q", 10).await), ["a", "d"]);
    assert_eq!(
        stats(&broker, "q.dlq").state.tracked,
        2,
        "b and keyless c stay"
    );
}

#[tokio::test]
async fn redrive_to_another_queue_skips_in_flight_and_respects_the_targets_limit() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    let other = QueueSpec {
        dead_letter: DeadLetter::Named(Name::new("q.dlq").unwrap()),
        ..limited(Some(1), None, OverflowPolicy::RejectPublish)
    };
    broker.create_queue("other", other).await.unwrap();
    for p in ["a", "b", "c"] {
        reject_one(&broker, "q", OutgoingMessage::new(p)).await;
    }
    // A consumer of the dead-letter queue holds "a".
    let held = receive(&broker, "q.dlq", 1).await;
    assert_eq!(payloads(&held), ["a"]);
    let to_other = RedriveRequest {
        target: Some("other".into()),
        ..RedriveRequest::default()
    };
    // "b" fits, "c" does not: the error stops the redrive and "c" stays a dead letter.
    assert!(matches!(
        broker.redrive("q.dlq", to_other.clone()).await,
        Err(BrokerError::QueueFull { .. })
    ));
    assert_eq!(payloads(&receive(&broker, "other", 10).await), ["b"]);
    assert!(receive(&broker, "q", 10).await.is_empty());
    let s = stats(&broker, "q.dlq");
    assert_eq!(
        (s.state.tracked, s.state.in_flight),
        (2, 1),
        "a in flight, c back"
    );

    let to_missing = RedriveRequest {
        target: Some("missing".into()),
        ..RedriveRequest::default()
    };
    assert!(matches!(
        broker.redrive("q.dlq", to_missing).await,
        Err(BrokerError::QueueNotFound { .. })
    ));
}

#[tokio::test]
async fn redrive_reports_skipped_messages_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    reject_one(&broker, "q", OutgoingMessage::new("a")).await;
    reject_one(&broker, "q", OutgoingMessage::new("b")).await;
    receive(&broker, "q.dlq", 1).await;
    let report = broker
        .redrive("q.dlq", RedriveRequest::default())
        .await
        .unwrap();
    assert_eq!(
        report,
        RedriveReport {
            moved: 1,
            skipped: 1
        }
    );
    assert_eq!(payloads(&receive(&broker, "q", 10).await), ["b"]);
}

#[tokio::test]
async fn redrive_from_a_queue_that_is_not_a_dead_letter_queue_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    let shared = QueueSpec {
        dead_letter: DeadLetter::Disabled,
        ..spec(5)
    };
    broker.create_queue("graveyard", shared).await.unwrap();
    let pointing = QueueSpec {
        dead_letter: DeadLetter::Named(Name::new("graveyard").unwrap()),
        ..spec(5)
    };
    broker.create_queue("p", pointing).await.unwrap();
    publish(&broker, "q", "a").await.unwrap();
    match broker.redrive("q", RedriveRequest::default()).await {
        Err(BrokerError::NotADeadLetterQueue { queue }) => assert_eq!(queue.as_str(), "q"),
        other => panic!("expected NotADeadLetterQueue, got {other:?}"),
    }
    assert_eq!(stats(&broker, "q").state.tracked, 1, "nothing moved");
    assert!(!broker.is_dead_letter_queue("q"));
    assert!(broker.is_dead_letter_queue("q.dlq"), "the reserved suffix");
    assert!(broker.is_dead_letter_queue("graveyard"), "named by p");
    assert!(!broker.is_dead_letter_queue("p"));
    // A named dead-letter queue counts, whatever its name.
    let report = broker
        .redrive("graveyard", RedriveRequest::default())
        .await
        .unwrap();
    assert_eq!(report, RedriveReport::default());
}
