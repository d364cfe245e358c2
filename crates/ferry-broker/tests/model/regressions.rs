//! Deterministic cases: what the model found, and corners of its rules that random runs
//! rarely reach.

use std::time::Duration;

use ferry_broker::{BrokerError, Nacked, OutgoingMessage};
use ferry_storage::ManualClock;

use crate::ops::Config;
use crate::reference::{LEASE_MS, MAX_DELIVERIES};
use crate::run::{DLQ, Q, T0, chosen_id, open};

fn delayed(payload: &'static str, ms: u64) -> OutgoingMessage {
    OutgoingMessage::new(payload).with_delay(Duration::from_millis(ms))
}

/// Lease tokens once restarted at 1 when the broker opened: a consumer that held a lease
/// before a restart could settle the message's next delivery with its stale token.
#[tokio::test]
async fn stale_token_from_before_a_reopen_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock, 0).await;
    broker
        .create_queue(Q, Config::fifo().spec())
        .await
        .expect("create");
    broker
        .publish(Q, OutgoingMessage::new("x"))
        .await
        .expect("publish");
    let old = broker
        .receive(Q, "a", 1, None, None)
        .await
        .expect("receive");
    drop(broker);
    let broker = open(dir.path(), &clock, 1).await;
    clock.advance(LEASE_MS);
    let new = broker
        .receive(Q, "b", 1, None, None)
        .await
        .expect("receive");
    assert_eq!((new[0].seq, new[0].delivery), (old[0].seq, 2));
    let stale = broker.ack(Q, old[0].seq, old[0].token).await;
    assert!(
        matches!(stale, Err(BrokerError::StaleLease { .. })),
        "consumer a's lease ended with the restart, yet its token {:?} settled b's delivery \
         (token {:?}): {:?}",
        old[0].token,
        new[0].token,
        stale
    );
}

/// `cancel` is documented to return `false` only when no scheduled, never-delivered message
/// has the id. Two messages may share an id with dedup on (a dedup id, not the id, is then
/// the dedup key): once the later one is due, the earlier one, still scheduled, can no
/// longer be cancelled.
#[tokio::test]
async fn cancel_finds_a_scheduled_message_after_a_later_one_with_its_id_became_due() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock, 0).await;
    broker
        .create_queue(Q, Config::fifo().spec())
        .await
        .expect("create");
    let id = chosen_id(0);
    let early = delayed("a", 6_000).with_id(id);
    let late = delayed("b", 500).with_id(id).with_dedup_id("b");
    broker.publish(Q, early).await.expect("publish a");
    broker.publish(Q, late).await.expect("publish b");
    clock.advance(500);
    broker.tick_now().await.expect("tick");
    let stats = broker.describe_queue(Q).expect("describe").stats.state;
    assert_eq!((stats.delayed, stats.ready), (1, 1), "a scheduled, b due");
    assert!(
        broker.cancel(Q, id).await.expect("cancel"),
        "a (seq 0) is scheduled and never delivered, yet cancel of its id found nothing"
    );
}

/// With several scheduled messages sharing an id, cancel takes the latest; the next cancel
/// must then find the one before it, which is still scheduled.
#[tokio::test]
async fn cancel_of_a_shared_id_finds_the_earlier_message_once_the_latest_is_cancelled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock, 0).await;
    let spec = Config {
        dedup_window_ms: 0,
        ..Config::fifo()
    }
    .spec();
    broker.create_queue(Q, spec).await.expect("create");
    let id = chosen_id(0);
    broker
        .publish(Q, delayed("a", 500).with_id(id))
        .await
        .expect("publish a");
    broker
        .publish(Q, delayed("b", 500).with_id(id))
        .await
        .expect("publish b");
    assert!(broker.cancel(Q, id).await.expect("cancel b"));
    assert_eq!(
        broker
            .describe_queue(Q)
            .expect("describe")
            .stats
            .state
            .delayed,
        1
    );
    assert!(
        broker.cancel(Q, id).await.expect("cancel a"),
        "a (seq 0) is still scheduled with the id, yet the second cancel found nothing"
    );
}

/// A delivery running at a restart whose message has both used up its deliveries and
/// outlived its TTL: recovery dead-letters a message whose TTL has passed (`expired`)
/// before it looks at deliveries. The random runs seldom line up three deliveries, a TTL
/// passing mid-lease and a reopen.
#[tokio::test]
async fn reopen_dead_letters_an_exhausted_delivery_past_its_ttl_as_expired() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock, 0).await;
    broker
        .create_queue(Q, Config::fifo().spec())
        .await
        .expect("create");
    let ttl = Duration::from_millis(5_000);
    broker
        .publish(Q, OutgoingMessage::new("x").with_ttl(ttl))
        .await
        .expect("publish");
    for delivery in 1..=MAX_DELIVERIES {
        let got = broker
            .receive(Q, "c", 1, None, None)
            .await
            .expect("receive");
        assert_eq!(got[0].delivery, delivery);
        if delivery < MAX_DELIVERIES {
            let retry = broker
                .nack(Q, got[0].seq, got[0].token, Some(Duration::ZERO), None)
                .await
                .expect("nack");
            assert_eq!(retry, Nacked::RetryAt(T0));
        }
    }
    clock.advance(6_000); // past the TTL, within the lease
    broker.tick_now().await.expect("tick");
    assert_eq!(
        broker
            .describe_queue(Q)
            .expect("describe")
            .stats
            .state
            .in_flight,
        1
    );
    drop(broker);
    let broker = open(dir.path(), &clock, 1).await;
    let letters = broker
        .receive(DLQ, "d", 10, None, None)
        .await
        .expect("receive dlq");
    let info = letters[0].dead_letter.as_ref().expect("dead-letter info");
    assert_eq!(
        (info.reason.as_str(), info.deliveries),
        ("expired", MAX_DELIVERIES)
    );
}

/// A dead letter carries its last error, first and last failure times and last consumer;
/// `first_failure_ms` is documented as `None` only "when no attempt failed", `consumer` as
/// the consumer "of the last delivery, if it was ever delivered". A restart between the
/// failed attempt and the dead-lettering must not make the letter claim otherwise.
#[tokio::test]
async fn dead_letter_keeps_failures_and_consumer_from_before_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock, 0).await;
    broker
        .create_queue(Q, Config::fifo().spec())
        .await
        .expect("create");
    let ttl = Duration::from_millis(5_000);
    broker
        .publish(Q, OutgoingMessage::new("x").with_ttl(ttl))
        .await
        .expect("publish");
    let got = broker
        .receive(Q, "worker-1", 1, None, None)
        .await
        .expect("receive");
    clock.advance(1_000);
    let retry = broker
        .nack(
            Q,
            got[0].seq,
            got[0].token,
            Some(Duration::from_secs(60)),
            Some("boom"),
        )
        .await
        .expect("nack");
    assert_eq!(retry, Nacked::RetryAt(T0 + 61_000));
    drop(broker);
    let broker = open(dir.path(), &clock, 1).await;
    clock.advance(4_000); // the TTL ends while the message waits for its retry
    broker.tick_now().await.expect("tick");
    let letters = broker
        .receive(DLQ, "d", 10, None, None)
        .await
        .expect("receive dlq");
    let info = letters[0].dead_letter.as_ref().expect("dead-letter info");
    assert_eq!((info.reason.as_str(), info.deliveries), ("expired", 1));
    assert_eq!(
        (
            info.last_error.as_deref(),
            info.first_failure_ms,
            info.last_failure_ms,
            info.consumer.as_deref()
        ),
        (
            Some("boom"),
            Some(T0 + 1_000),
            Some(T0 + 1_000),
            Some("worker-1")
        ),
        "last error, first and last failure, consumer"
    );
}
