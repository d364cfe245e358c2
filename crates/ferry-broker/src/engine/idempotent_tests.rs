//! Idempotent producers through the broker's API: a retried batch is written once — also
//! after a reopen, and when copies race — gaps and partial overlaps are refused typed and
//! write nothing, and producers silent past the window are forgotten.

use std::time::Duration;

use ferry_storage::ManualClock;
use proptest::prelude::*;

use super::tests::T0;
use super::topic_tests::{ends, msg, open, payloads, pos, read_all, runtime, spec};
use super::*;
use crate::topic::TopicSpec;

#[tokio::test]
async fn retried_batches_are_written_once_also_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(2)).await.unwrap();
    let batch = |from: u64, n: u64| (from..from + n).map(|i| msg(&format!("s{i}"))).collect();
    let first = broker
        .publish_idempotent("t", 1, "p", 0, batch(0, 3))
        .await
        .unwrap();
    assert_eq!(first, [pos(1, 0), pos(1, 1), pos(1, 2)]);
    broker
        .publish_to_partition("t", 1, vec![msg("other")])
        .await
        .unwrap();
    // The answer was lost; the producer retries.
    let retried = broker
        .publish_idempotent("t", 1, "p", 0, batch(0, 3))
        .await
        .unwrap();
    assert_eq!(retried, first);
    assert_eq!(ends(&broker, "t"), [0, 4]);
    let next = broker
        .publish_idempotent("t", 1, "p", 3, batch(3, 2))
        .await
        .unwrap();
    assert_eq!(next, [pos(1, 4), pos(1, 5)]);
    let records = read_all(&broker, "t", 1);
    let stamp = records[4].producer.clone().unwrap();
    assert_eq!((stamp.producer_id.as_str(), stamp.sequence), ("p", 3));
    // Sequences are per partition: the same producer starts afresh on partition 0.
    let other = broker
        .publish_idempotent("t", 0, "p", 0, batch(0, 1))
        .await
        .unwrap();
    assert_eq!(other, [pos(0, 0)]);
    drop(broker);

    clock.advance(60_000);
    let broker = open(dir.path(), &clock).await;
    for (from, n, want) in [
        (0, 3, first.clone()),
        (3, 2, next.clone()),
        (4, 1, vec![pos(1, 5)]),
    ] {
        let got = broker
            .publish_idempotent("t", 1, "p", from, batch(from, n))
            .await
            .unwrap();
        assert_eq!(got, want);
    }
    let e = broker
        .publish_idempotent("t", 1, "p", 9, batch(9, 1))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            BrokerError::OutOfOrderSequence {
                partition: 1,
                expected: 5,
                got: 9,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(ends(&broker, "t"), [1, 6]);
    let more = broker
        .publish_idempotent("t", 1, "p", 5, batch(5, 1))
        .await
        .unwrap();
    assert_eq!(more, [pos(1, 6)]);
}

#[tokio::test]
async fn gaps_and_partial_overlaps_are_refused_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    let batch = |n: usize| (0..n).map(|i| msg(&i.to_string())).collect::<Vec<_>>();
    broker
        .publish_idempotent("t", 0, "p", 10, batch(3))
        .await
        .unwrap();
    let gap = broker
        .publish_idempotent("t", 0, "p", 14, batch(1))
        .await
        .unwrap_err();
    assert!(
        matches!(
            &gap,
            BrokerError::OutOfOrderSequence { expected: 13, got: 14, producer, .. } if producer == "p"
        ),
        "{gap}"
    );
    assert!(gap.to_string().contains("resend from 13"), "{gap}");
    let overlap = broker
        .publish_idempotent("t", 0, "p", 12, batch(2))
        .await
        .unwrap_err();
    assert!(
        matches!(
            overlap,
            BrokerError::SequenceOverlap {
                got: 12,
                last_written: 12,
                ..
            }
        ),
        "{overlap}"
    );
    let overflow = broker
        .publish_idempotent("t", 0, "q", u64::MAX, batch(2))
        .await
        .unwrap_err();
    assert!(matches!(
        overflow,
        BrokerError::InvalidSetting {
            setting: "first_sequence",
            ..
        }
    ));
    for bad in ["", "a\nb"] {
        assert!(matches!(
            broker.publish_idempotent("t", 0, bad, 0, batch(1)).await,
            Err(BrokerError::InvalidProducerId { .. })
        ));
    }
    assert_eq!(ends(&broker, "t"), [3]);
}

#[tokio::test]
async fn producers_silent_longer_than_the_window_are_forgotten() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let short = TopicSpec {
        producer_state_window: Duration::from_secs(3600),
        ..spec(1)
    };
    broker.create_topic("t", short).await.unwrap();
    broker
        .publish_idempotent("t", 0, "p", 0, vec![msg("a")])
        .await
        .unwrap();
    broker
        .publish_idempotent("t", 0, "q", 0, vec![msg("b")])
        .await
        .unwrap();
    clock.advance(1_800_000);
    broker
        .publish_idempotent("t", 0, "q", 1, vec![msg("c")])
        .await
        .unwrap();
    clock.advance(1_800_001);
    // Live: maintenance forgets p (silent for over an hour) but not q.
    broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    let p = broker
        .publish_idempotent("t", 0, "p", 7, vec![msg("p again")])
        .await
        .unwrap();
    assert_eq!(p, [pos(0, 3)]);
    assert!(matches!(
        broker
            .publish_idempotent("t", 0, "q", 7, vec![msg("gap")])
            .await,
        Err(BrokerError::OutOfOrderSequence { expected: 2, .. })
    ));
    drop(broker);
    // After a reopen: the rebuild reads only the window.
    clock.advance(3_600_001);
    let broker = open(dir.path(), &clock).await;
    let q = broker
        .publish_idempotent("t", 0, "q", 9, vec![msg("q again")])
        .await
        .unwrap();
    assert_eq!(q, [pos(0, 4)]);
}

#[tokio::test]
async fn concurrent_copies_of_one_batch_are_written_once() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    let batch = || vec![msg("a"), msg("b")];
    let (one, two, three) = tokio::join!(
        broker.publish_idempotent("t", 0, "p", 0, batch()),
        broker.publish_idempotent("t", 0, "p", 0, batch()),
        broker.publish_idempotent("t", 0, "p", 0, batch()),
    );
    let (one, two, three) = (one.unwrap(), two.unwrap(), three.unwrap());
    assert_eq!(one, [pos(0, 0), pos(0, 1)]);
    assert_eq!((&two, &three), (&one, &one));
    assert_eq!(ends(&broker, "t"), [2]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// An idempotent producer sending batches, each possibly retried (before and after a
    /// reopen), writes each sequence exactly once, in sequence order, and every retry gets
    /// the first answer.
    #[test]
    fn idempotent_retries_write_once_across_reopens(
        batches in prop::collection::vec((1usize..4, 0usize..3, any::<bool>()), 1..10),
    ) {
        runtime().block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let clock = ManualClock::new(T0);
            let mut broker = open(dir.path(), &clock).await;
            broker.create_topic("t", spec(2)).await.unwrap();
            let mut next = 0u64;
            for (size, retries, reopen) in batches {
                let batch = |from: u64| {
                    (from..from + size as u64).map(|s| msg(&format!("s{s}"))).collect::<Vec<_>>()
                };
                let first = broker.publish_idempotent("t", 1, "p", next, batch(next)).await.unwrap();
                if reopen {
                    drop(broker);
                    clock.advance(1_000);
                    broker = open(dir.path(), &clock).await;
                }
                for _ in 0..retries {
                    let again = broker.publish_idempotent("t", 1, "p", next, batch(next)).await.unwrap();
                    prop_assert_eq!(&again, &first);
                }
                next += size as u64;
            }
            let records = read_all(&broker, "t", 1);
            let sequences: Vec<u64> =
                records.iter().map(|r| r.producer.as_ref().unwrap().sequence).collect();
            prop_assert_eq!(sequences, (0..next).collect::<Vec<_>>());
            prop_assert_eq!(
                payloads(&records),
                (0..next).map(|s| format!("s{s}")).collect::<Vec<_>>()
            );
            Ok(())
        })?;
    }
}

#[tokio::test]
async fn the_producers_a_partition_remembers_are_listed_also_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(2)).await.unwrap();
    assert!(
        broker
            .idempotent_producers("t", 0)
            .await
            .unwrap()
            .is_empty()
    );
    for producer in ["kafka-7-0", "kafka-7-1"] {
        broker
            .publish_idempotent("t", 0, producer, 0, vec![msg("x")])
            .await
            .unwrap();
    }
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    let mut listed = broker.idempotent_producers("t", 0).await.unwrap();
    listed.sort();
    assert_eq!(listed, ["kafka-7-0", "kafka-7-1"]);
    assert!(
        broker
            .idempotent_producers("t", 1)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(broker.idempotent_producers("t", 2).await.is_err());
    assert!(broker.idempotent_producers("nope", 0).await.is_err());
}
