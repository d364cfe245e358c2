//! Giving back unsent deliveries (`Broker::return_unsent`) and ending a long poll early
//! (`Broker::receive_unless`).

use ferry_storage::ManualClock;

use super::tests::{T0, open, spec};
use super::*;
use crate::{LeaseToken, OrderingMode};

async fn publish(broker: &Broker, queue: &str, payloads: &[&str]) {
    for p in payloads {
        broker
            .publish(queue, OutgoingMessage::new(p.to_string()))
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn a_returned_delivery_is_ready_at_once_with_its_count_restored_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(2)).await.unwrap();
    publish(&broker, "q", &["a", "b"]).await;

    // A first delivery fails, so the count before the unsent lease is 1, not 0.
    let first = broker.receive("q", "c1", 1, None, None).await.unwrap();
    broker
        .nack(
            "q",
            first[0].seq,
            first[0].token,
            Some(Duration::ZERO),
            Some("boom"),
        )
        .await
        .unwrap();
    let unsent = broker.receive("q", "c2", 2, None, None).await.unwrap();
    let (a, b) = (&unsent[0], &unsent[1]);
    assert_eq!((a.payload.as_ref(), a.delivery), (&b"a"[..], 2));
    broker.return_unsent("q", a.seq, a.token).await.unwrap();
    broker.return_unsent("q", b.seq, b.token).await.unwrap();
    let stats = broker.describe_queue("q").unwrap().stats;
    assert_eq!((stats.state.ready, stats.state.in_flight), (2, 0));
    assert_eq!(stats.nacked, 1, "a return is not a failed attempt");

    // Ready now, without any tick, in publish order, numbered as the unsent ones were.
    let again = broker.receive("q", "c3", 2, None, None).await.unwrap();
    let seen: Vec<(&[u8], u32)> = again
        .iter()
        .map(|m| (m.payload.as_ref(), m.delivery))
        .collect();
    assert_eq!(seen, [(&b"a"[..], 2), (&b"b"[..], 1)]);
    for m in &again {
        broker.return_unsent("q", m.seq, m.token).await.unwrap();
    }

    drop(broker);
    let broker = open(dir.path(), &clock).await;
    let after = broker.receive("q", "c4", 2, None, None).await.unwrap();
    let seen: Vec<(&[u8], u32)> = after
        .iter()
        .map(|m| (m.payload.as_ref(), m.delivery))
        .collect();
    assert_eq!(
        seen,
        [(&b"a"[..], 2), (&b"b"[..], 1)],
        "ready at once after a reopen, with the counts the returns restored"
    );
    // "a" on its last delivery: failing it dead-letters it, naming the consumer whose
    // attempt failed last and its error, not the consumers of the unsent leases.
    broker
        .nack("q", after[0].seq, after[0].token, None, Some("again"))
        .await
        .unwrap();
    let letter = broker
        .receive("q.dlq", "d", 1, None, None)
        .await
        .unwrap()
        .remove(0);
    let info = letter.dead_letter.unwrap();
    assert_eq!(
        (
            info.deliveries,
            info.last_error.as_deref(),
            info.consumer.as_deref()
        ),
        (2, Some("again"), Some("c4"))
    );
}

#[tokio::test]
async fn a_return_survives_a_checkpoint_and_names_the_consumer_before_the_lease() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let mut with_ttl = spec(3);
    with_ttl.default_ttl = Some(Duration::from_secs(60));
    broker.create_queue("q", with_ttl).await.unwrap();
    publish(&broker, "q", &["a"]).await;
    let first = broker.receive("q", "c1", 1, None, None).await.unwrap();
    broker
        .nack(
            "q",
            first[0].seq,
            first[0].token,
            Some(Duration::ZERO),
            None,
        )
        .await
        .unwrap();
    let unsent = broker.receive("q", "c2", 1, None, None).await.unwrap();
    // The checkpoint records the running lease (and its consumer); the return after it
    // must undo both on replay.
    broker.maintain_now(Checkpoint::Always).await.unwrap();
    broker
        .return_unsent("q", unsent[0].seq, unsent[0].token)
        .await
        .unwrap();
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert_eq!(broker.describe_queue("q").unwrap().stats.state.ready, 1);
    clock.advance(60_000);
    broker.tick_now().await.unwrap();
    let letter = broker
        .receive("q.dlq", "d", 1, None, None)
        .await
        .unwrap()
        .remove(0);
    let info = letter.dead_letter.unwrap();
    assert_eq!(info.reason, "expired");
    assert_eq!((info.deliveries, info.consumer.as_deref()), (1, Some("c1")));
}

#[tokio::test]
async fn a_stale_return_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(3)).await.unwrap();
    publish(&broker, "q", &["a"]).await;
    let held = broker.receive("q", "c1", 1, None, None).await.unwrap();
    let (seq, token) = (held[0].seq, held[0].token);
    let wrong = LeaseToken(token.0 + 1000);
    let refused = broker.return_unsent("q", seq, wrong).await;
    assert!(
        matches!(refused, Err(BrokerError::StaleLease { .. })),
        "{refused:?}"
    );
    assert_eq!(broker.describe_queue("q").unwrap().stats.state.in_flight, 1);

    // Once given back, the same token is stale too: the lease is gone.
    broker.return_unsent("q", seq, token).await.unwrap();
    let twice = broker.return_unsent("q", seq, token).await;
    assert!(
        matches!(twice, Err(BrokerError::StaleLease { .. })),
        "{twice:?}"
    );
    let late_ack = broker.ack("q", seq, token).await;
    assert!(
        matches!(late_ack, Err(BrokerError::StaleLease { .. })),
        "{late_ack:?}"
    );
    // A lease that expired and was retried is not the current one either.
    let again = broker.receive("q", "c1", 1, None, None).await.unwrap();
    assert_eq!(again[0].delivery, 1);
    clock.advance(10_000);
    broker.tick_now().await.unwrap();
    let expired = broker.return_unsent("q", seq, again[0].token).await;
    assert!(
        matches!(expired, Err(BrokerError::StaleLease { .. })),
        "{expired:?}"
    );
    let stats = broker.describe_queue("q").unwrap().stats;
    assert_eq!((stats.state.in_flight, stats.nacked), (0, 1));
    assert!(matches!(
        broker.return_unsent("q", 99, token).await,
        Err(BrokerError::MessageNotPublished { .. })
    ));
}

#[tokio::test]
async fn a_returned_key_head_goes_before_the_rest_of_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let mut keyed = spec(3);
    keyed.ordering = OrderingMode::KeyShared;
    broker.create_queue("q", keyed).await.unwrap();
    for p in ["k1", "k2"] {
        broker
            .publish("q", OutgoingMessage::new(p).with_key("k"))
            .await
            .unwrap();
    }
    let head = broker.receive("q", "c1", 5, None, None).await.unwrap();
    assert_eq!(head.len(), 1, "one message of a key in flight");
    broker
        .return_unsent("q", head[0].seq, head[0].token)
        .await
        .unwrap();
    let next = broker.receive("q", "c2", 5, None, None).await.unwrap();
    assert_eq!(
        next.iter()
            .map(|m| (m.payload.as_ref(), m.delivery))
            .collect::<Vec<_>>(),
        [(&b"k1"[..], 1)]
    );
}

#[tokio::test]
async fn a_stopped_receive_leases_nothing_and_a_stop_ends_the_wait() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", spec(3)).await.unwrap();
    publish(&broker, "q", &["a"]).await;
    let wait = Some(Duration::from_secs(600));
    let got = broker
        .receive_unless("q", "c1", 1, None, wait, std::future::ready(()))
        .await
        .unwrap();
    assert!(got.is_empty(), "stopped before it leased: {got:?}");
    assert_eq!(broker.describe_queue("q").unwrap().stats.state.ready, 1);

    // A receive waiting on an empty queue returns as soon as it is told to stop, long
    // before its ten-minute wait would end, and leases nothing published after.
    let empty = broker.clone();
    empty.create_queue("empty", spec(3)).await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let waiting = tokio::spawn(async move {
        empty
            .receive_unless("empty", "c1", 1, None, wait, async {
                let _ = stopped.await;
            })
            .await
    });
    tokio::task::yield_now().await;
    stop.send(()).unwrap();
    let got = tokio::time::timeout(Duration::from_secs(60), waiting)
        .await
        .expect("the stop ends the wait")
        .unwrap()
        .unwrap();
    assert!(got.is_empty());
    publish(&broker, "empty", &["late"]).await;
    assert_eq!(broker.describe_queue("empty").unwrap().stats.state.ready, 1);
}
