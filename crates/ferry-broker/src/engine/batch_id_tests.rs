//! Publish calls with a batch id: a retry is stored once and answered with the original
//! ids — also after a reopen, and beside messages with dedup keys of their own — a retry
//! that carries other messages is refused typed, and the window's end or a queue without
//! one makes every call new.

use std::time::Duration;

use ferry_storage::ManualClock;

use super::tests::{T0, open, spec};
use super::*;
use crate::error::ErrorKind;

fn batch_id(seed: u64) -> MessageId {
    MessageId::generate(T0, &mut fastrand::Rng::with_seed(seed))
}

fn plain(n: usize) -> Vec<OutgoingMessage> {
    (0..n)
        .map(|i| OutgoingMessage::new(format!("m{i}")))
        .collect()
}

fn stored(broker: &Broker) -> u64 {
    broker.describe_queue("q").unwrap().stats.next_seq
}

#[tokio::test]
async fn a_retried_call_is_stored_once_and_answered_with_the_original_ids_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    let b = batch_id(1);
    let first = broker
        .publish_batch_idempotent("q", b, plain(4))
        .await
        .unwrap();
    // The broker minted one run: consecutive ids, stamped with the publish time.
    for (k, id) in first.iter().enumerate() {
        assert_eq!(id.as_ulid().0, first[0].as_ulid().0 + k as u128);
        assert_eq!(id.timestamp_ms(), T0 as u64);
    }
    broker
        .publish("q", OutgoingMessage::new("other"))
        .await
        .unwrap();
    assert_eq!(stored(&broker), 5);

    // The answer was lost; the producer retries.
    let retried = broker
        .publish_batch_idempotent("q", b, plain(4))
        .await
        .unwrap();
    assert_eq!(retried, first);
    assert_eq!(stored(&broker), 5);
    drop(broker);

    clock.advance(60_000);
    let broker = open(dir.path(), &clock).await;
    let after_reopen = broker
        .publish_batch_idempotent("q", b, plain(4))
        .await
        .unwrap();
    assert_eq!(after_reopen, first);
    assert_eq!(stored(&broker), 5);
    // What was stored once is delivered once.
    let got = broker.receive("q", "c", 10, None, None).await.unwrap();
    let ids: Vec<MessageId> = got.iter().map(|r| r.id).collect();
    assert_eq!(&ids[..4], &first[..]);
    assert_eq!(got.len(), 5);
}

#[tokio::test]
async fn messages_with_their_own_dedup_keys_keep_their_answers_inside_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    let earlier = broker
        .publish("q", OutgoingMessage::new("x").with_dedup_id("order-1"))
        .await
        .unwrap();
    let chosen = batch_id(9);
    let call = || {
        vec![
            OutgoingMessage::new("a"),
            OutgoingMessage::new("dup").with_dedup_id("order-1"),
            OutgoingMessage::new("b").with_id(chosen),
            OutgoingMessage::new("c"),
        ]
    };
    let b = batch_id(2);
    let first = broker
        .publish_batch_idempotent("q", b, call())
        .await
        .unwrap();
    assert_eq!(first[1], earlier);
    assert_eq!(first[2], chosen);
    assert_eq!(first[3].as_ulid().0, first[0].as_ulid().0 + 1);
    assert_eq!(stored(&broker), 4);
    drop(broker);

    let broker = open(dir.path(), &clock).await;
    let retried = broker
        .publish_batch_idempotent("q", b, call())
        .await
        .unwrap();
    assert_eq!(retried, first);
    assert_eq!(stored(&broker), 4);
}

#[tokio::test]
async fn a_retry_with_other_messages_is_refused_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    let b = batch_id(3);
    broker
        .publish_batch_idempotent("q", b, plain(3))
        .await
        .unwrap();
    let refused = broker.publish_batch_idempotent("q", b, plain(2)).await;
    let Err(e @ BrokerError::BatchIdReused { .. }) = refused else {
        panic!("a reused batch id answered {refused:?}");
    };
    assert_eq!(e.kind(), ErrorKind::Invalid);
    assert!(e.to_string().contains("new batch id"), "{e}");
    assert_eq!(stored(&broker), 3);
    let nil = broker
        .publish_batch_idempotent("q", MessageId::NIL, plain(1))
        .await;
    assert!(
        matches!(nil, Err(BrokerError::InvalidMessageId { .. })),
        "{nil:?}"
    );
    assert_eq!(stored(&broker), 3);
}

#[tokio::test]
async fn past_the_window_or_without_one_every_call_is_new() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(5)).await.unwrap();
    let mut windowless = spec(5);
    windowless.dedup_window = Duration::ZERO;
    broker.create_queue("off", windowless).await.unwrap();
    let b = batch_id(4);
    let first = broker
        .publish_batch_idempotent("q", b, plain(2))
        .await
        .unwrap();
    clock.advance(5 * 60_000);
    broker.tick_now().await.unwrap();
    let again = broker
        .publish_batch_idempotent("q", b, plain(2))
        .await
        .unwrap();
    assert_ne!(again, first);
    assert_eq!(stored(&broker), 4);
    // Publishing dropped the entries whose window ended: only the new call's is held,
    // and no message dedup key was held at all.
    {
        let queue = broker.queue("q").unwrap();
        let inner = queue.lock();
        assert_eq!(inner.batches.len(), 1);
        assert_eq!(inner.dedup.len(), 0);
    }

    let one = broker
        .publish_batch_idempotent("off", b, plain(2))
        .await
        .unwrap();
    let two = broker
        .publish_batch_idempotent("off", b, plain(2))
        .await
        .unwrap();
    assert_ne!(one, two);
    assert_eq!(broker.describe_queue("off").unwrap().stats.next_seq, 4);
}
