//! Journal checkpoints and log retention: a checkpointed queue reopens exactly as one that
//! replays its whole journal, and retention deletes only what is settled and out of the
//! dedup window.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ferry_storage::ManualClock;

use super::tests::{T0, spec};
use super::*;
use crate::spec::OrderingMode;
use crate::spec::QueueSpec;

pub(super) async fn open_with(
    dir: &Path,
    clock: &ManualClock,
    tune: impl Fn(&mut BrokerConfig),
) -> Broker {
    let mut config = BrokerConfig {
        clock: Arc::new(clock.clone()),
        background_timers: false,
        seed: Some(7),
        ..BrokerConfig::default()
    };
    tune(&mut config);
    Broker::open(dir, config).await.unwrap()
}

async fn open(dir: &Path, clock: &ManualClock) -> Broker {
    open_with(dir, clock, |_| {}).await
}

fn key_shared() -> QueueSpec {
    QueueSpec {
        ordering: OrderingMode::KeyShared,
        ..spec(3)
    }
}

/// What a consumer sees: payload, delivery number and seq.
type Seen = Vec<(String, u32, u64)>;

fn seen(got: &[ReceivedMessage]) -> Seen {
    got.iter()
        .map(|m| {
            let payload = String::from_utf8(m.payload.to_vec()).unwrap();
            (payload, m.delivery, m.seq)
        })
        .collect()
}

/// Leaves a key-shared queue with a bit of everything: acked, retrying, extended, in
/// flight, rejected (dead-lettered), cancelled, a parked key holding a message, a delayed
/// message, and ready ones.
async fn busy_history(broker: &Broker) {
    broker.create_queue("q", key_shared()).await.unwrap();
    let publish = |payload: &'static str, key: &'static str| {
        broker.publish("q", OutgoingMessage::new(payload).with_key(key))
    };
    for (payload, key) in [("a0", "a"), ("a1", "a"), ("b", "b"), ("c", "c"), ("d", "d")] {
        publish(payload, key).await.unwrap();
    }
    publish("r", "r").await.unwrap();
    let delayed = OutgoingMessage::new("later")
        .with_key("l")
        .with_delay(Duration::from_secs(30));
    broker.publish("q", delayed).await.unwrap();
    let cancelled = OutgoingMessage::new("never")
        .with_key("n")
        .with_delay(Duration::from_secs(30));
    let cancelled = broker.publish("q", cancelled).await.unwrap();
    assert!(broker.cancel("q", cancelled).await.unwrap());
    let got = broker.receive("q", "c1", 10, None, None).await.unwrap();
    assert_eq!(
        seen(&got).iter().map(|s| s.0.as_str()).collect::<Vec<_>>(),
        ["a0", "b", "c", "d", "r"]
    );
    let by = |p: &str| got.iter().find(|m| m.payload == p).unwrap();
    broker.ack("q", by("b").seq, by("b").token).await.unwrap();
    let c = by("c");
    broker
        .nack(
            "q",
            c.seq,
            c.token,
            Some(Duration::from_secs(2)),
            Some("busy"),
        )
        .await
        .unwrap();
    let d = by("d");
    broker
        .extend("q", d.seq, d.token, Duration::from_secs(60))
        .await
        .unwrap();
    broker
        .reject("q", by("r").seq, by("r").token, "bad")
        .await
        .unwrap();
    broker.park("q", b"a").await.unwrap();
    // Published after the last delivery: ready, never delivered.
    publish("e", "e").await.unwrap();
}

/// Advances the clock in steps, receiving (and acking) everything each step: what comes
/// out, when.
async fn drain(broker: &Broker, clock: &ManualClock) -> Vec<(i64, Seen)> {
    let mut out = Vec::new();
    for step in 0..8 {
        if step == 4 {
            broker.unpark("q", b"a").await.unwrap();
        }
        broker.tick_now().await.unwrap();
        let got = broker.receive("q", "c2", 10, None, None).await.unwrap();
        for m in &got {
            broker.ack("q", m.seq, m.token).await.unwrap();
        }
        out.push((clock.now_ms() - T0, seen(&got)));
        clock.advance(15_000);
    }
    out
}

#[tokio::test]
async fn a_checkpointed_queue_reopens_like_one_that_replays_its_whole_journal() {
    let mut results = Vec::new();
    for checkpoint in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let broker = open(dir.path(), &clock).await;
        busy_history(&broker).await;
        if checkpoint {
            let first = broker.maintain_now(Checkpoint::Always).await.unwrap();
            assert_eq!(first.checkpoints, 2, "q and q.dlq");
            // Events after the checkpoint are replayed on top of it.
            broker
                .publish("q", OutgoingMessage::new("f").with_key("f"))
                .await
                .unwrap();
            let second = broker.maintain_now(Checkpoint::Always).await.unwrap();
            assert!(second.deleted_segments >= 1, "{second:?}");
            let q = broker.queue("q").unwrap();
            assert!(
                q.journal.start_offset() > 0,
                "the first journal segment is gone"
            );
        } else {
            broker
                .publish("q", OutgoingMessage::new("f").with_key("f"))
                .await
                .unwrap();
        }
        let before = broker.describe_queue("q").unwrap().stats;
        drop(broker);

        let broker = open(dir.path(), &clock).await;
        let after = broker.describe_queue("q").unwrap().stats;
        // Leases running at the stop end at their deadlines: in flight becomes delayed.
        let kept = |s: &QueueStats| {
            let counts = (s.acked, s.nacked, s.dead_lettered, s.dropped, s.cancelled);
            (
                s.state.tracked,
                s.state.ready,
                s.state.bytes,
                s.next_seq,
                counts,
            )
        };
        assert_eq!(kept(&before), kept(&after), "counts and counters survive");
        assert_eq!(
            (
                after.acked,
                after.nacked,
                after.dead_lettered,
                after.cancelled
            ),
            (1, 1, 1, 1)
        );
        results.push((after, drain(&broker, &clock).await));
    }
    assert_eq!(results[0], results[1]);
    // And the history itself is the one the documented rules give.
    let timeline = &results[1].1;
    let names = |i: usize| -> Vec<&str> { timeline[i].1.iter().map(|s| s.0.as_str()).collect() };
    // At 0 s: e and f (new keys); c waits for its 2 s retry; a0 and d are in flight.
    assert_eq!(names(0), ["e", "f"]);
    // At 15 s: c's retry. a0's lease was running at the reopen: it ended at its 10 s
    // deadline, but a is parked.
    assert_eq!(timeline[1].1, vec![("c".into(), 2, 3)]);
    // At 30 s: the delayed message.
    assert_eq!(names(2), ["later"]);
    assert!(
        timeline[3].1.is_empty(),
        "d is extended to 60 s: {timeline:?}"
    );
    // At 60 s, a unparked: a0 again, and d, its extended lease over.
    assert_eq!(timeline[4].1, vec![("a0".into(), 2, 0), ("d".into(), 2, 4)]);
    // At 75 s: a1, behind a0.
    assert_eq!(timeline[5].1, vec![("a1".into(), 1, 1)]);
    assert!(
        timeline[6..].iter().all(|(_, s)| s.is_empty()),
        "{timeline:?}"
    );
}

#[tokio::test]
async fn retention_deletes_settled_segments_outside_the_dedup_window_only() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    // Segments are at least as large as the largest batch (16 MiB): fill a few.
    let tune = |c: &mut BrokerConfig| c.message_segment_bytes = 1;
    let broker = open_with(dir.path(), &clock, tune).await;
    let q_spec = QueueSpec {
        dedup_window: Duration::from_secs(300),
        ..spec(3)
    };
    broker.create_queue("q", q_spec).await.unwrap();
    let payload = bytes::Bytes::from(vec![7u8; 16 << 10]);
    for _ in 0..3_000 / 100 {
        let batch = vec![OutgoingMessage::new(payload.clone()); 100];
        broker.publish_batch("q", batch).await.unwrap();
    }
    let q = broker.queue("q").unwrap();
    assert!(q.messages.segment_count() >= 3);
    // Past the dedup window, one message with a dedup id: its segment must stay for it.
    clock.advance(301_000);
    let original = broker
        .publish("q", OutgoingMessage::new("x").with_dedup_id("x-1"))
        .await
        .unwrap();

    // Everything but the head settled: nothing can go, the head pins its segment.
    let mut head = None;
    loop {
        let got = broker.receive("q", "c", 500, None, None).await.unwrap();
        if got.is_empty() {
            break;
        }
        for m in got {
            if m.seq == 0 {
                head = Some(m);
            } else {
                broker.ack("q", m.seq, m.token).await.unwrap();
            }
        }
    }
    let report = broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert_eq!(report.deleted_segments, 0, "{report:?}");
    let head = head.unwrap();
    broker.ack("q", head.seq, head.token).await.unwrap();
    let report = broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert!(report.deleted_segments >= 2, "{report:?}");
    let start = q.messages.start_offset();
    assert!(
        start > 0 && start <= 3_000,
        "the segment with x-1 stays: {start}"
    );
    let next_seq = broker.describe_queue("q").unwrap().stats.next_seq;
    drop((q, broker));

    let broker = open(dir.path(), &clock).await;
    let stats = broker.describe_queue("q").unwrap().stats;
    assert_eq!(
        (stats.state.tracked, stats.next_seq, stats.acked),
        (0, next_seq, 3_001)
    );
    let again = broker
        .publish("q", OutgoingMessage::new("x").with_dedup_id("x-1"))
        .await
        .unwrap();
    assert_eq!(
        again, original,
        "the dedup window survives retention and reopen"
    );
    assert_eq!(broker.describe_queue("q").unwrap().stats.next_seq, next_seq);
}

#[tokio::test]
async fn dead_letters_expire_from_the_dead_letter_queue_after_the_retention() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let q_spec = QueueSpec {
        dead_letter_retention: Duration::from_secs(3_600),
        ..spec(3)
    };
    broker.create_queue("q", q_spec).await.unwrap();
    broker
        .publish("q", OutgoingMessage::new("bad"))
        .await
        .unwrap();
    let m = broker
        .receive("q", "c", 1, None, None)
        .await
        .unwrap()
        .remove(0);
    broker.reject("q", m.seq, m.token, "nope").await.unwrap();
    assert_eq!(broker.describe_queue("q.dlq").unwrap().stats.state.ready, 1);
    clock.advance(3_599_000);
    broker.tick_now().await.unwrap();
    assert_eq!(broker.describe_queue("q.dlq").unwrap().stats.state.ready, 1);
    clock.advance(1_000);
    broker.tick_now().await.unwrap();
    let dlq = broker.describe_queue("q.dlq").unwrap().stats;
    assert_eq!(
        (dlq.state.tracked, dlq.dead_lettered),
        (0, 1),
        "expired and discarded"
    );
}
