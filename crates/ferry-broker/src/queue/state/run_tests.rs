//! Runs of a key ([`PerKey::Consecutive`]): several consecutive messages of a key in one
//! receive, the key held until all of them are settled or back, and order kept when one of
//! them fails (nack or lease expiry) while the others are still out.

use std::time::Duration;

use ulid::Ulid;

use super::*;
use crate::retry::Backoff;

const T0: i64 = 1_700_000_000_000;
const SEC: i64 = 1000;

/// Key-shared, ten deliveries, a fixed 1 s backoff: exact expectations.
fn key_shared() -> QueueSpec {
    QueueSpec {
        ordering: OrderingMode::KeyShared,
        retry: RetryPolicy {
            max_deliveries: 10,
            backoff: Backoff {
                base: Duration::from_secs(1),
                cap: Duration::from_secs(1),
                multiplier: 1.0,
                jitter: 0.0,
            },
        },
        ..QueueSpec::default()
    }
}

fn keyed(seq: Seq, key: &str) -> Tracked {
    Tracked {
        seq,
        id: MessageId::from_ulid(Ulid::from_parts(T0 as u64, u128::from(seq) + 1)),
        key: Some(key.as_bytes().into()),
        level: 0,
        deliver_at_ms: T0,
        expires_at_ms: None,
        size: 10,
        deliveries: 0,
    }
}

/// A queue holding `messages` as (seq, key), tracked at `T0`.
fn queue(spec: &QueueSpec, messages: &[(Seq, &str)]) -> QueueState {
    let mut q = QueueState::new(spec, 7).unwrap();
    for &(seq, key) in messages {
        q.track(keyed(seq, key), T0);
    }
    q
}

/// A receive taking runs at `now`, after a tick as the engine does before each receive.
fn runs(q: &mut QueueState, max: usize, now: i64) -> Vec<Delivery> {
    q.tick(now);
    q.receive_per_key("c", max, PerKey::Consecutive, None, now)
}

fn seqs(deliveries: &[Delivery]) -> Vec<Seq> {
    deliveries.iter().map(|d| d.seq).collect()
}

fn token(deliveries: &[Delivery], seq: Seq) -> LeaseToken {
    deliveries.iter().find(|d| d.seq == seq).unwrap().token
}

#[test]
fn a_receive_takes_as_many_of_a_key_as_it_can_then_other_keys() {
    let mut q = queue(
        &key_shared(),
        &[(1, "a"), (2, "a"), (3, "b"), (4, "a"), (5, "c")],
    );
    assert_eq!(seqs(&runs(&mut q, 10, T0)), [1, 2, 4, 3, 5]);

    let mut q = queue(&key_shared(), &[(1, "a"), (2, "a"), (3, "b"), (4, "a")]);
    assert_eq!(seqs(&runs(&mut q, 2, T0)), [1, 2]);
    assert_eq!(
        seqs(&runs(&mut q, 10, T0)),
        [3],
        "a is held while its run is out"
    );
}

#[test]
fn one_per_key_stays_the_default() {
    let mut q = queue(&key_shared(), &[(1, "a"), (2, "a"), (3, "b")]);
    assert_eq!(seqs(&q.receive("c", 10, None, T0)), [1, 3]);
}

#[test]
fn the_key_is_released_once_every_message_of_the_run_is_settled() {
    let mut q = queue(&key_shared(), &[(1, "a"), (2, "a"), (3, "a")]);
    let run = runs(&mut q, 2, T0);
    assert_eq!(seqs(&run), [1, 2]);
    q.take_effects();
    q.ack(1, token(&run, 1), T0).unwrap();
    assert_eq!(q.take_effects(), [Effect::Settled { seq: 1 }]);
    assert_eq!(runs(&mut q, 10, T0), []);
    q.ack(2, token(&run, 2), T0).unwrap();
    assert_eq!(
        q.take_effects(),
        [Effect::Settled { seq: 2 }, Effect::Ready { seq: 3 }]
    );
    assert_eq!(seqs(&runs(&mut q, 10, T0)), [3]);
}

#[test]
fn a_nacked_message_waits_for_the_rest_of_its_run_and_then_goes_first() {
    let mut q = queue(&key_shared(), &[(1, "a"), (2, "a"), (3, "a"), (4, "b")]);
    let run = runs(&mut q, 3, T0);
    assert_eq!(seqs(&run), [1, 2, 3]);
    q.nack(1, token(&run, 1), Some(Duration::ZERO), None, T0)
        .unwrap();
    // 2 and 3 are still out: nothing of "a" goes, not even the nacked 1.
    assert_eq!(seqs(&runs(&mut q, 10, T0)), [4]);
    assert_eq!(seqs(&q.receive("other", 10, None, T0)), []);
    q.nack(3, token(&run, 3), Some(Duration::ZERO), None, T0)
        .unwrap();
    assert_eq!(runs(&mut q, 10, T0), []);
    q.ack(2, token(&run, 2), T0).unwrap();
    // Released: 1 before 3, as published.
    let again = runs(&mut q, 10, T0);
    assert_eq!(seqs(&again), [1, 3]);
    assert_eq!(again.iter().map(|d| d.delivery).collect::<Vec<_>>(), [2, 2]);
}

#[test]
fn a_nacked_run_goes_again_in_order_one_at_a_time_to_a_default_receive() {
    let mut q = queue(&key_shared(), &[(1, "a"), (2, "a")]);
    let run = runs(&mut q, 2, T0);
    q.nack(2, token(&run, 2), Some(Duration::ZERO), None, T0)
        .unwrap();
    q.nack(1, token(&run, 1), Some(Duration::ZERO), None, T0)
        .unwrap();
    let first = q.receive("c", 10, None, T0);
    assert_eq!(seqs(&first), [1]);
    q.ack(1, first[0].token, T0).unwrap();
    assert_eq!(seqs(&q.receive("c", 10, None, T0)), [2]);
}

#[test]
fn a_lease_expiry_of_an_earlier_message_keeps_it_in_front_of_the_later_ones() {
    let mut q = queue(&key_shared(), &[(1, "a"), (2, "a"), (3, "a")]);
    let run = runs(&mut q, 3, T0);
    assert_eq!(seqs(&run), [1, 2, 3]);
    // 2 and 3 get more time; 1's lease (30 s) runs out.
    for seq in [2, 3] {
        q.extend(seq, token(&run, seq), Duration::from_secs(60), T0)
            .unwrap();
    }
    q.tick(T0 + 30 * SEC);
    assert_eq!(q.stats(T0 + 30 * SEC).in_flight, 2);
    assert_eq!(runs(&mut q, 10, T0 + 40 * SEC), [], "the run still holds a");
    // The rest of the run expires too: all of it goes again, in order.
    q.tick(T0 + 60 * SEC);
    let again = runs(&mut q, 10, T0 + 62 * SEC);
    assert_eq!(seqs(&again), [1, 2, 3]);
}

#[test]
fn a_whole_run_expiring_at_once_comes_back_in_order() {
    let mut q = queue(&key_shared(), &[(1, "a"), (2, "a"), (3, "a"), (4, "a")]);
    assert_eq!(seqs(&runs(&mut q, 3, T0)), [1, 2, 3]);
    q.tick(T0 + 30 * SEC);
    assert_eq!(seqs(&runs(&mut q, 10, T0 + 32 * SEC)), [1, 2, 3, 4]);
}

#[test]
fn a_run_stops_at_a_delayed_message_and_skips_an_expired_one() {
    let mut q = queue(&key_shared(), &[(1, "a")]);
    q.track(
        Tracked {
            expires_at_ms: Some(T0 + 1),
            ..keyed(2, "a")
        },
        T0,
    );
    q.track(keyed(3, "a"), T0);
    q.track(
        Tracked {
            deliver_at_ms: T0 + 10 * SEC,
            ..keyed(4, "a")
        },
        T0,
    );
    q.track(keyed(5, "a"), T0);
    // At T0 + 2 ms, 2 has expired (no tick yet): dead-lettered, not delivered.
    let run = runs(&mut q, 10, T0 + 2);
    assert_eq!(seqs(&run), [1, 3]);
    assert!(q.take_effects().iter().any(|e| matches!(
        e,
        Effect::DeadLetter(d) if d.seq == 2 && d.reason == DeadLetterReason::Expired
    )));
}

#[test]
fn runs_respect_the_consumers_prefetch() {
    let mut q = queue(&key_shared(), &[(1, "a"), (2, "a"), (3, "a")]);
    q.set_prefetch("c", Some(2));
    assert_eq!(seqs(&runs(&mut q, 10, T0)), [1, 2]);
}

#[test]
fn an_exclusive_queue_hands_out_a_run_of_its_one_line() {
    let spec = QueueSpec {
        ordering: OrderingMode::Exclusive,
        ..key_shared()
    };
    let mut q = queue(&spec, &[(1, "a"), (2, "b"), (3, "c")]);
    let run = runs(&mut q, 2, T0);
    assert_eq!(seqs(&run), [1, 2]);
    q.nack(1, token(&run, 1), Some(Duration::ZERO), None, T0)
        .unwrap();
    q.ack(2, token(&run, 2), T0).unwrap();
    assert_eq!(seqs(&runs(&mut q, 10, T0)), [1, 3]);
}

#[test]
fn a_lease_deadline_is_answered_for_the_current_lease_only() {
    let mut q = queue(&key_shared(), &[(1, "a")]);
    let d = runs(&mut q, 1, T0).remove(0);
    assert_eq!(q.lease_deadline(1, d.token).unwrap(), T0 + 30 * SEC);
    q.extend(1, d.token, Duration::from_secs(5), T0).unwrap();
    assert_eq!(q.lease_deadline(1, d.token).unwrap(), T0 + 5 * SEC);
    q.ack(1, d.token, T0).unwrap();
    assert_eq!(
        q.lease_deadline(1, d.token).unwrap_err().kind(),
        crate::ErrorKind::StaleLease
    );
}
