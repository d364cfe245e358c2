//! Receives taking runs of a key through the broker's API (`Broker::receive_with` with
//! `PerKey::Consecutive`), and `Broker::lease_deadline`.

use ferry_storage::ManualClock;

use super::tests::{T0, open, spec};
use super::*;
use crate::{ErrorKind, OrderingMode, PerKey, QueueSpec};

async fn publish(broker: &Broker, queue: &str, messages: &[(&str, &str)]) {
    for (key, payload) in messages {
        let message = OutgoingMessage::new(payload.to_string()).with_key(key.to_string());
        broker.publish(queue, message).await.unwrap();
    }
}

async fn runs(broker: &Broker, queue: &str, max: usize) -> Vec<ReceivedMessage> {
    let options = ReceiveOptions {
        max,
        per_key: PerKey::Consecutive,
        ..ReceiveOptions::default()
    };
    broker
        .receive_with(queue, "c", options, std::future::pending())
        .await
        .unwrap()
}

fn payloads(messages: &[ReceivedMessage]) -> Vec<&[u8]> {
    messages.iter().map(|m| m.payload.as_ref()).collect()
}

fn key_shared() -> QueueSpec {
    QueueSpec {
        ordering: OrderingMode::KeyShared,
        ..spec(5)
    }
}

#[tokio::test]
async fn a_run_holds_its_key_and_a_nacked_message_goes_again_first() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", key_shared()).await.unwrap();
    publish(
        &broker,
        "q",
        &[("a", "a1"), ("a", "a2"), ("b", "b1"), ("a", "a3")],
    )
    .await;

    let run = runs(&broker, "q", 2).await;
    assert_eq!(payloads(&run), [&b"a1"[..], b"a2"]);
    // The default receive takes one per key, and a is held.
    let other = broker.receive("q", "d", 10, None, None).await.unwrap();
    assert_eq!(payloads(&other), [&b"b1"[..]]);

    broker
        .nack("q", run[0].seq, run[0].token, Some(Duration::ZERO), None)
        .await
        .unwrap();
    assert_eq!(runs(&broker, "q", 10).await, []);
    broker.ack("q", run[1].seq, run[1].token).await.unwrap();
    let again = runs(&broker, "q", 10).await;
    assert_eq!(payloads(&again), [&b"a1"[..], b"a3"]);
    assert_eq!(again[0].delivery, 2);
}

#[tokio::test]
async fn a_run_cut_by_a_restart_comes_back_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", key_shared()).await.unwrap();
    publish(&broker, "q", &[("a", "a1"), ("a", "a2"), ("a", "a3")]).await;
    let run = runs(&broker, "q", 2).await;
    assert_eq!(payloads(&run), [&b"a1"[..], b"a2"]);
    broker.ack("q", run[1].seq, run[1].token).await.unwrap();

    drop(broker);
    let broker = open(dir.path(), &clock).await;
    // The run's leases keep their deadlines across the restart: a stays held until then.
    assert_eq!(runs(&broker, "q", 10).await, []);
    clock.advance(31_000);
    let after = runs(&broker, "q", 10).await;
    assert_eq!(payloads(&after), [&b"a1"[..], b"a3"], "a2 was acked");
}

#[tokio::test]
async fn a_lease_deadline_is_answered_for_the_running_lease_only() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_queue("q", key_shared()).await.unwrap();
    publish(&broker, "q", &[("a", "a1")]).await;
    let m = runs(&broker, "q", 1).await.remove(0);
    assert_eq!(
        broker.lease_deadline("q", m.seq, m.token).unwrap(),
        m.lease_until_ms
    );
    let until = broker
        .extend("q", m.seq, m.token, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(broker.lease_deadline("q", m.seq, m.token).unwrap(), until);
    broker.ack("q", m.seq, m.token).await.unwrap();
    let stale = broker.lease_deadline("q", m.seq, m.token).unwrap_err();
    assert_eq!(stale.kind(), ErrorKind::StaleLease);
    let missing = broker.lease_deadline("nope", m.seq, m.token).unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound);
}
