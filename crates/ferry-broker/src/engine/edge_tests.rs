//! Edge cases of checkpoints, recovery, dead-lettering and the timer task: large
//! checkpoints, queues deleted and created again, journals across many opens, dead letters
//! whose origin never journaled them, a dead-letter queue that cannot take a letter, timers
//! added while the timer task is awake, oversized or empty consumer names, out-of-range
//! leases, extensions and retry delays, settles of seqs never published.

use std::sync::atomic::Ordering;
use std::time::Duration;

use ferry_storage::ManualClock;

use super::housekeeping_tests::open_with;
use super::tests::{T0, open, spec};
use super::*;
use crate::queue::state::{Acked, Nacked};
use crate::spec::QueueSpec;

/// A checkpoint larger than one storage batch (17k retrying messages with a 1 KiB error
/// each) is written in several appends, and a reopen reads it back.
#[tokio::test]
async fn a_checkpoint_larger_than_a_batch_is_written_in_parts() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    for _ in 0..17 {
        let batch = vec![OutgoingMessage::new("m"); 1000];
        broker.publish_batch("q", batch).await.unwrap();
    }
    let error = "e".repeat(1000);
    loop {
        let got = broker.receive("q", "c", 1000, None, None).await.unwrap();
        if got.is_empty() {
            break;
        }
        for m in got {
            let delay = Some(Duration::from_secs(600));
            broker
                .nack("q", m.seq, m.token, delay, Some(&error))
                .await
                .unwrap();
        }
    }
    let result = broker.maintain_now(Checkpoint::Always).await;
    let still_usable = broker.describe_queue("q");
    assert!(
        result.is_ok() && still_usable.is_ok(),
        "checkpoint: {result:?}; queue: {:?}",
        still_usable.err()
    );
    let before = still_usable.unwrap().stats;
    let q = broker.queue("q").unwrap();
    assert!(
        q.journal.start_offset() > 0,
        "the journal before it is gone"
    );
    drop((q, broker));
    let broker = open(dir.path(), &clock).await;
    let after = broker.describe_queue("q").unwrap().stats;
    assert_eq!(
        (after.state.delayed, after.nacked),
        (before.state.delayed, 17_000)
    );
    clock.advance(600_000);
    let m = broker
        .receive("q", "c", 1, None, None)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(m.delivery, 2, "deliveries restored from the checkpoint");
}

/// A queue deleted and created again reuses `<name>.dlq`; the dead letters of the old queue
/// must not hide the new queue's messages at the same seqs on reopen.
#[tokio::test]
async fn a_recreated_queue_keeps_messages_at_seqs_its_predecessor_dead_lettered() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    broker
        .publish("q", OutgoingMessage::new("old"))
        .await
        .unwrap();
    let m = broker
        .receive("q", "c", 1, None, None)
        .await
        .unwrap()
        .remove(0);
    broker.reject("q", m.seq, m.token, "bad").await.unwrap();
    broker.delete_queue("q").await.unwrap();
    broker.create_queue("q", spec(5)).await.unwrap();
    broker
        .publish("q", OutgoingMessage::new("new"))
        .await
        .unwrap();
    assert_eq!(broker.describe_queue("q").unwrap().stats.state.ready, 1);
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    let got = broker.receive("q", "c", 10, None, None).await.unwrap();
    assert_eq!(
        got.len(),
        1,
        "the durable message 'new' is gone after reopen"
    );
}

/// A broker that reopens before its journal grows by `checkpoint_journal_bytes` within one
/// run still checkpoints: the growth counts across opens.
#[tokio::test]
async fn journal_growth_across_reopens_triggers_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let tune = |c: &mut BrokerConfig| c.checkpoint_journal_bytes = 2_000;
    let mut checkpoints = 0;
    let mut journal_bytes = 0;
    for round in 0..10 {
        let broker = open_with(dir.path(), &clock, tune).await;
        if round == 0 {
            broker.create_queue("q", spec(5)).await.unwrap();
        }
        for _ in 0..20 {
            broker
                .publish("q", OutgoingMessage::new("m"))
                .await
                .unwrap();
            let m = broker
                .receive("q", "c", 1, None, None)
                .await
                .unwrap()
                .remove(0);
            broker.ack("q", m.seq, m.token).await.unwrap();
        }
        checkpoints += broker
            .maintain_now(Checkpoint::WhenDue)
            .await
            .unwrap()
            .checkpoints;
        journal_bytes = broker.queue("q").unwrap().journal.size_bytes();
    }
    assert!(
        checkpoints > 0,
        "no checkpoint though the journal holds {journal_bytes} bytes (threshold 2000)"
    );
}

/// A dead letter stored in the DLQ whose `DeadLettered` never reached the origin's journal
/// is journaled on the next open, so it stays settled once the DLQ's retention has deleted
/// the letter.
#[tokio::test]
async fn an_unjournaled_dead_letter_stays_settled_after_dlq_retention() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    broker
        .publish("q", OutgoingMessage::new("x"))
        .await
        .unwrap();
    let m = broker
        .receive("q", "c", 1, None, None)
        .await
        .unwrap()
        .remove(0);
    let q = broker.queue("q").unwrap();
    q.fail_next_journal_append.store(true, Ordering::SeqCst);
    // Stored in q.dlq; the origin's DeadLettered append fails (same as a crash there).
    assert!(broker.reject("q", m.seq, m.token, "bad").await.is_err());
    drop((q, broker));
    let broker = open(dir.path(), &clock).await;
    assert!(
        broker
            .receive("q", "c", 10, None, None)
            .await
            .unwrap()
            .is_empty()
    );
    let letter = broker
        .receive("q.dlq", "c", 1, None, None)
        .await
        .unwrap()
        .remove(0);
    broker.ack("q.dlq", letter.seq, letter.token).await.unwrap();
    // Later the DLQ's segment fills (rolled by hand here) and retention runs.
    clock.advance(301_000);
    broker.queue("q.dlq").unwrap().messages.roll().unwrap();
    let report = broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert!(report.deleted_segments >= 1, "{report:?}");
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    let again = broker.receive("q", "c", 10, None, None).await.unwrap();
    assert!(
        again.is_empty(),
        "the dead-lettered, acked message is back: {again:?}"
    );
}

/// A dead letter that cannot be stored (the dead-letter queue is poisoned) leaves its
/// origin disagreeing with its journal: the origin is poisoned too, and a reopen moves the
/// letters once the dead-letter queue works again.
#[tokio::test]
async fn a_dead_letter_that_cannot_be_stored_poisons_its_origin_until_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    for _ in 0..3 {
        let m = OutgoingMessage::new("t").with_ttl(Duration::from_secs(1));
        broker.publish("q", m).await.unwrap();
    }
    broker
        .queue("q.dlq")
        .unwrap()
        .poisoned
        .get_or_init(|| "disk".into());
    clock.advance(2_000);
    assert!(broker.tick_now().await.is_err());
    assert!(matches!(
        broker.describe_queue("q"),
        Err(BrokerError::QueuePoisoned { .. })
    ));
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    let q = broker.describe_queue("q").unwrap().stats;
    assert_eq!((q.state.tracked, q.dead_lettered), (0, 3));
    let dlq = broker.describe_queue("q.dlq").unwrap().stats;
    assert_eq!(dlq.state.ready, 3);
    let live = broker.queue("q").unwrap().lock().live.len();
    assert_eq!(live, 0);
}

/// While the timer task is awake, every new timer leaves a wake-up for it.
#[tokio::test]
async fn a_timer_added_while_the_task_is_awake_wakes_it() {
    let wake = super::timer_wake::TimerWake::new();
    wake.awake();
    wake.timer_at(1_000);
    let woke = tokio::time::timeout(Duration::from_millis(50), wake.notify.notified())
        .await
        .is_ok();
    assert!(woke, "the timer added while awake left no permit");
}

/// A consumer name longer than the limit is refused with a typed error and changes nothing.
#[tokio::test]
async fn a_long_consumer_name_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    broker
        .publish("q", OutgoingMessage::new("m"))
        .await
        .unwrap();
    let name = "c".repeat(2 << 20);
    let refused = broker.receive("q", &name, 1, None, None).await;
    assert!(
        matches!(refused, Err(BrokerError::ConsumerNameTooLong { len, .. }) if len == 2 << 20),
        "{refused:?}"
    );
    assert!(broker.set_prefetch("q", &name, Some(1)).is_err());
    let name = "c".repeat(MAX_CONSUMER_NAME_BYTES);
    assert_eq!(
        broker
            .receive("q", &name, 1, None, None)
            .await
            .unwrap()
            .len(),
        1
    );
    let after = broker.publish("q", OutgoingMessage::new("m2")).await;
    assert!(after.is_ok(), "{after:?}");
}

/// An empty consumer name is refused: it would lease messages no consumer can be told from.
#[tokio::test]
async fn an_empty_consumer_name_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    broker
        .publish("q", OutgoingMessage::new("m"))
        .await
        .unwrap();
    let refused = broker.receive("q", "", 1, None, None).await;
    assert!(
        matches!(refused, Err(BrokerError::EmptyConsumerName)),
        "{refused:?}"
    );
    assert!(matches!(
        broker.set_prefetch("q", "", Some(1)),
        Err(BrokerError::EmptyConsumerName)
    ));
    assert_eq!(broker.describe_queue("q").unwrap().stats.state.ready, 1);
}

/// A receive's lease, an extension and a nack's delay out of range are refused, and the
/// delivery they name keeps its lease as it was.
#[tokio::test]
async fn out_of_range_leases_extensions_and_retry_delays_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    broker
        .publish("q", OutgoingMessage::new("m"))
        .await
        .unwrap();
    let over_lease = QueueSpec::MAX_LEASE + Duration::from_millis(1);
    for lease in [Duration::ZERO, Duration::from_micros(999), over_lease] {
        let refused = broker.receive("q", "c", 1, Some(lease), None).await;
        assert!(
            matches!(
                refused,
                Err(BrokerError::InvalidSetting {
                    setting: "lease",
                    ..
                })
            ),
            "{lease:?}: {refused:?}"
        );
    }
    assert_eq!(broker.describe_queue("q").unwrap().stats.state.in_flight, 0);

    let held = broker
        .receive("q", "c", 1, Some(QueueSpec::MAX_LEASE), None)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(held.lease_until_ms, T0 + 12 * 3600 * 1000);
    let refused = broker.extend("q", held.seq, held.token, over_lease).await;
    assert!(
        matches!(
            refused,
            Err(BrokerError::InvalidSetting {
                setting: "lease extension",
                ..
            })
        ),
        "{refused:?}"
    );
    let too_late = QueueSpec::MAX_DELAY + Duration::from_millis(1);
    let refused = broker
        .nack("q", held.seq, held.token, Some(too_late), None)
        .await;
    assert!(
        matches!(refused, Err(BrokerError::DelayTooLong { .. })),
        "{refused:?}"
    );
    // Still held, with the lease it had: both limits themselves are taken.
    let until = broker
        .extend("q", held.seq, held.token, QueueSpec::MAX_LEASE)
        .await
        .unwrap();
    assert_eq!(until, held.lease_until_ms);
    let retry = broker
        .nack("q", held.seq, held.token, Some(QueueSpec::MAX_DELAY), None)
        .await
        .unwrap();
    assert_eq!(retry, Nacked::RetryAt(T0 + 90 * 24 * 3600 * 1000));
}

/// Settling a seq the queue never assigned says so, instead of "already settled".
#[tokio::test]
async fn settling_a_seq_never_published_is_message_not_published() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    broker
        .publish("q", OutgoingMessage::new("m"))
        .await
        .unwrap();
    let held = broker
        .receive("q", "c", 1, None, None)
        .await
        .unwrap()
        .remove(0);
    let unknown = |r: &Result<()>| {
        matches!(
            r,
            Err(BrokerError::MessageNotPublished {
                seq: 7,
                next_seq: 1,
                ..
            })
        )
    };
    assert!(unknown(&broker.ack("q", 7, held.token).await.map(drop)));
    assert!(unknown(
        &broker.nack("q", 7, held.token, None, None).await.map(drop)
    ));
    assert!(unknown(&broker.reject("q", 7, held.token, "r").await));
    let second = Duration::from_secs(1);
    assert!(unknown(
        &broker.extend("q", 7, held.token, second).await.map(drop)
    ));
    let batch = broker.ack_batch("q", &[(7, held.token)]).await.unwrap();
    assert!(
        matches!(
            batch[0],
            Err(BrokerError::MessageNotPublished { seq: 7, .. })
        ),
        "{batch:?}"
    );
    // A seq that was published and settled is still "already settled".
    assert_eq!(
        broker.ack("q", held.seq, held.token).await.unwrap(),
        Acked::Settled
    );
    assert_eq!(
        broker.ack("q", held.seq, held.token).await.unwrap(),
        Acked::AlreadySettled
    );
}
