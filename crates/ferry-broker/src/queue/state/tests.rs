use std::time::Duration;

use ulid::Ulid;

use super::*;
use crate::retry::Backoff;

const T0: i64 = 1_700_000_000_000;
const SEC: i64 = 1000;

/// Five deliveries, backoff 1 s doubling to at most 300 s, no jitter: exact expectations.
fn spec() -> QueueSpec {
    QueueSpec {
        retry: RetryPolicy {
            max_deliveries: 5,
            backoff: Backoff {
                base: Duration::from_secs(1),
                cap: Duration::from_secs(300),
                multiplier: 2.0,
                jitter: 0.0,
            },
        },
        ..QueueSpec::default()
    }
}

/// [`spec`] with a single delivery: the first failed attempt dead-letters.
fn one_delivery_spec() -> QueueSpec {
    QueueSpec {
        retry: RetryPolicy {
            max_deliveries: 1,
            ..spec().retry
        },
        ..spec()
    }
}

fn state(spec: &QueueSpec) -> QueueState {
    QueueState::new(spec, 7).unwrap()
}

fn id(seq: Seq) -> MessageId {
    MessageId::from_ulid(Ulid::from_parts(T0 as u64, u128::from(seq) + 1))
}

fn msg(seq: Seq) -> Tracked {
    Tracked {
        seq,
        id: id(seq),
        key: None,
        level: 0,
        deliver_at_ms: T0,
        expires_at_ms: None,
        size: 10,
        deliveries: 0,
    }
}

fn keyed(seq: Seq, key: &str) -> Tracked {
    Tracked {
        key: Some(key.as_bytes().into()),
        ..msg(seq)
    }
}

fn seqs(deliveries: &[Delivery]) -> Vec<Seq> {
    deliveries.iter().map(|d| d.seq).collect()
}

fn dead_letters(q: &mut QueueState) -> Vec<DeadLetterDecision> {
    q.take_effects()
        .into_iter()
        .filter_map(|e| match e {
            Effect::DeadLetter(d) => Some(d),
            _ => None,
        })
        .collect()
}

fn receive_one(q: &mut QueueState, now: i64) -> Delivery {
    let mut got = q.receive("c1", 1, None, now);
    assert_eq!(got.len(), 1, "expected one delivery at {now}");
    got.remove(0)
}

#[test]
fn ack_settles_the_message_and_emits_settled() {
    let mut q = state(&spec());
    q.track(msg(1), T0);
    let d = receive_one(&mut q, T0);
    assert_eq!((d.seq, d.id, d.delivery), (1, id(1), 1));
    assert_eq!(
        d.lease_until_ms,
        T0 + 30 * SEC,
        "the spec's lease by default"
    );
    assert_eq!(q.ack(1, d.token, T0 + 5).unwrap(), Acked::Settled);
    assert_eq!(q.take_effects(), [Effect::Settled { seq: 1 }]);
    assert!(!q.is_tracked(1));
    assert_eq!(q.stats(T0).in_flight, 0);
    assert_eq!(q.next_wakeup(), None, "the lease timer is gone");
}

#[test]
fn ack_is_idempotent() {
    let mut q = state(&spec());
    q.track(msg(1), T0);
    let d = receive_one(&mut q, T0);
    q.ack(1, d.token, T0).unwrap();
    q.take_effects();
    assert_eq!(q.ack(1, d.token, T0).unwrap(), Acked::AlreadySettled);
    assert_eq!(q.take_effects(), []);
}

#[test]
fn ack_with_a_stale_lease_token_is_rejected_and_keeps_the_new_lease() {
    let mut q = state(&spec());
    q.track(msg(1), T0);
    let first = q.receive("slow", 1, None, T0).remove(0);
    q.tick(T0 + 30 * SEC); // lease expires; backoff 1 s
    q.tick(T0 + 31 * SEC);
    let second = q.receive("fast", 1, None, T0 + 31 * SEC).remove(0);
    assert_eq!(second.delivery, 2);
    assert_ne!(first.token, second.token);

    let err = q.ack(1, first.token, T0 + 32 * SEC).unwrap_err();
    assert!(
        matches!(err, BrokerError::StaleLease { seq: 1, token } if token == first.token.0),
        "{err}"
    );
    assert!(q.nack(1, first.token, None, None, T0).is_err());
    assert!(q.reject(1, first.token, "no", T0).is_err());
    assert!(
        q.extend(1, first.token, Duration::from_secs(1), T0)
            .is_err()
    );
    assert_eq!(
        q.lease(1),
        Some((second.token, second.lease_until_ms)),
        "the new lease is untouched"
    );
    assert_eq!(
        q.ack(1, second.token, T0 + 33 * SEC).unwrap(),
        Acked::Settled
    );
}

#[test]
fn a_late_ack_of_an_earlier_delivery_after_a_later_one_acked_is_stale() {
    // The order a consumer paused past its lease produces: delivery 1's lease expires,
    // delivery 2 is acked, then delivery 1's ack arrives. Two consumers must not both be
    // told their ack took.
    let mut q = state(&spec());
    q.track(msg(1), T0);
    let first = q.receive("paused", 1, None, T0).remove(0);
    q.tick(T0 + 30 * SEC);
    q.tick(T0 + 31 * SEC);
    let second = q.receive("fast", 1, None, T0 + 31 * SEC).remove(0);
    assert_eq!(
        q.ack(1, second.token, T0 + 32 * SEC).unwrap(),
        Acked::Settled
    );
    q.take_effects();

    let err = q.ack(1, first.token, T0 + 33 * SEC).unwrap_err();
    assert!(
        matches!(err, BrokerError::StaleLease { seq: 1, token } if token == first.token.0),
        "{err}"
    );
    assert_eq!(
        q.ack(1, second.token, T0 + 34 * SEC).unwrap(),
        Acked::AlreadySettled,
        "the acking delivery's repeat is still idempotent"
    );
    assert_eq!(q.take_effects(), [], "nothing changed");
}

#[test]
fn a_late_ack_of_a_delivery_whose_message_was_dead_lettered_is_stale() {
    let mut q = state(&one_delivery_spec());
    q.track(msg(1), T0);
    q.track(msg(2), T0);
    let got = q.receive("paused", 2, None, T0);
    assert_eq!(q.ack(2, got[1].token, T0).unwrap(), Acked::Settled);
    q.tick(T0 + 30 * SEC); // 1's lease expires with its one delivery used: dead-lettered
    assert_eq!(dead_letters(&mut q).len(), 1);

    assert!(matches!(
        q.ack(1, got[0].token, T0 + 31 * SEC),
        Err(BrokerError::StaleLease { seq: 1, .. })
    ));
    assert_eq!(
        q.ack(2, got[1].token, T0 + 31 * SEC).unwrap(),
        Acked::AlreadySettled,
        "a message acked on its only delivery is not remembered, and its repeat is fine"
    );
}

#[test]
fn in_flight_message_is_not_delivered_to_another_consumer() {
    let mut q = state(&spec());
    q.track(msg(1), T0);
    q.track(msg(2), T0);
    assert_eq!(seqs(&q.receive("a", 1, None, T0)), [1]);
    assert_eq!(seqs(&q.receive("b", 10, None, T0)), [2]);
    assert_eq!(q.receive("c", 10, None, T0 + 29 * SEC), []);
}

#[test]
fn lease_expiry_counts_as_a_failed_attempt() {
    let mut q = state(&spec());
    q.track(msg(1), T0);
    let d = receive_one(&mut q, T0);
    q.tick(T0 + 30 * SEC - 1);
    assert_eq!(
        q.lease(1).map(|(t, _)| t),
        Some(d.token),
        "not before the deadline"
    );
    q.tick(T0 + 30 * SEC);
    assert_eq!(q.lease(1), None);
    assert_eq!(
        q.stats(T0 + 30 * SEC).delayed,
        1,
        "waiting out the 1 s backoff"
    );
    assert_eq!(q.next_wakeup(), Some(T0 + 31 * SEC));
    q.tick(T0 + 31 * SEC);
    assert_eq!(
        q.take_effects(),
        [
            Effect::Failed {
                seq: 1,
                deliveries: 1,
                retry_at_ms: T0 + 31 * SEC,
                error: Some("lease expired".into()),
            },
            Effect::Ready { seq: 1 }
        ],
        "the expiry's failed attempt, to journal, then the end of its backoff"
    );
    assert_eq!(receive_one(&mut q, T0 + 31 * SEC).delivery, 2);
}

#[test]
fn fifth_failure_dead_letters_with_max_deliveries() {
    let mut q = state(&spec());
    q.track(msg(1), T0);
    let mut now = T0;
    for attempt in 1..=4 {
        let d = receive_one(&mut q, now);
        assert_eq!(d.delivery, attempt);
        let retry = q.nack(1, d.token, None, Some("boom"), now).unwrap();
        let Nacked::RetryAt(at) = retry else {
            panic!("attempt {attempt}: {retry:?}")
        };
        now = at;
        q.tick(now);
    }
    let d = receive_one(&mut q, now);
    assert_eq!(d.delivery, 5);
    q.tick(d.lease_until_ms); // the fifth attempt fails by lease expiry
    let dead = dead_letters(&mut q);
    assert_eq!(
        dead,
        [DeadLetterDecision {
            seq: 1,
            id: id(1),
            reason: DeadLetterReason::MaxDeliveries,
            deliveries: 5,
            last_error: Some("lease expired".into()),
            first_failure_ms: Some(T0),
            last_failure_ms: Some(d.lease_until_ms),
            consumer: Some("c1".into()),
        }]
    );
    assert!(!q.is_tracked(1));
    assert_eq!(q.stats(now).tracked, 0);
}

#[test]
fn nack_waits_the_backoff_before_redelivery() {
    let mut q = state(&spec());
    q.track(msg(1), T0);
    let d = receive_one(&mut q, T0);
    assert_eq!(
        q.nack(1, d.token, None, None, T0).unwrap(),
        Nacked::RetryAt(T0 + SEC)
    );
    q.tick(T0 + SEC - 1);
    assert_eq!(q.receive("c1", 1, None, T0 + SEC - 1), []);
    q.tick(T0 + SEC);
    let d = receive_one(&mut q, T0 + SEC);
    // The second failure waits twice as long.
    assert_eq!(
        q.nack(1, d.token, None, None, T0 + SEC).unwrap(),
        Nacked::RetryAt(T0 + 3 * SEC)
    );
}

#[test]
fn explicit_nack_delay_overrides_backoff() {
    let mut q = state(&spec());
    q.track(msg(1), T0);
    let d = receive_one(&mut q, T0);
    let delay = Some(Duration::from_secs(60));
    assert_eq!(
        q.nack(1, d.token, delay, None, T0).unwrap(),
        Nacked::RetryAt(T0 + 60 * SEC)
    );
    q.tick(T0 + 59 * SEC);
    assert_eq!(q.receive("c1", 1, None, T0 + 59 * SEC), []);
}

#[test]
fn nack_with_zero_delay_is_ready_at_once() {
    let mut q = state(&spec());
    q.track(msg(1), T0);
    let d = receive_one(&mut q, T0);
    let retry = q.nack(1, d.token, Some(Duration::ZERO), None, T0).unwrap();
    assert_eq!(retry, Nacked::RetryAt(T0));
    assert_eq!(receive_one(&mut q, T0).delivery, 2);
}

#[test]
fn reject_dead_letters_now_with_reason_rejected() {
    let mut q = state(&spec());
    q.track(msg(1), T0);
    q.track(msg(2), T0);
    let d = receive_one(&mut q, T0);
    q.reject(1, d.token, "schema mismatch", T0 + 7).unwrap();
    let dead = dead_letters(&mut q);
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].reason, DeadLetterReason::Rejected);
    assert_eq!(dead[0].reason.as_str(), "rejected");
    assert_eq!(dead[0].last_error.as_deref(), Some("schema mismatch"));
    assert_eq!(dead[0].deliveries, 1);
    assert_eq!(dead[0].first_failure_ms, Some(T0 + 7));
    assert!(!q.is_tracked(1));
    assert!(q.is_tracked(2));
}

#[test]
fn error_text_is_truncated_to_1_kib_on_a_char_boundary() {
    let mut q = state(&one_delivery_spec());
    q.track(msg(1), T0);
    let d = receive_one(&mut q, T0);
    // 'é' is 2 bytes: 1023 ASCII bytes then 'é' would end at 1025.
    let text = format!("{}é tail", "x".repeat(1023));
    q.nack(1, d.token, None, Some(&text), T0).unwrap();
    let dead = dead_letters(&mut q);
    let kept = dead[0].last_error.as_deref().unwrap();
    assert_eq!(kept.len(), 1023);
    assert!(kept.chars().all(|c| c == 'x'));
    assert_eq!(dead[0].reason, DeadLetterReason::MaxDeliveries);
}

#[test]
fn extend_moves_the_lease_deadline_and_is_capped_at_12_hours() {
    let mut q = state(&spec());
    q.track(msg(1), T0);
    let d = receive_one(&mut q, T0);
    let until = q
        .extend(1, d.token, Duration::from_secs(60), T0 + 20 * SEC)
        .unwrap();
    assert_eq!(until, T0 + 80 * SEC);
    q.tick(T0 + 79 * SEC);
    assert!(q.lease(1).is_some(), "the old deadline no longer applies");
    let day = Duration::from_secs(86_400);
    let capped = q.extend(1, d.token, day, T0 + 79 * SEC).unwrap();
    assert_eq!(capped, T0 + 79 * SEC + 12 * 3600 * SEC);
    assert_eq!(q.next_wakeup(), Some(capped));
}

#[test]
fn delayed_message_is_not_delivered_before_its_time() {
    let mut q = state(&spec());
    q.track(
        Tracked {
            deliver_at_ms: T0 + 90 * 86_400 * SEC,
            ..msg(1)
        },
        T0,
    );
    q.track(msg(2), T0);
    assert_eq!(seqs(&q.receive("c1", 10, None, T0)), [2]);
    assert_eq!(q.stats(T0).delayed, 1);
    let due = T0 + 90 * 86_400 * SEC;
    assert_eq!(q.next_wakeup(), Some(T0 + 30 * SEC), "the lease of 2 first");
    q.tick(due - 1);
    assert_eq!(q.receive("c1", 10, None, due - 1), []);
    q.tick(due);
    assert_eq!(seqs(&q.receive("c1", 10, None, due)), [1]);
}

#[test]
fn expired_message_is_dead_lettered_and_never_delivered() {
    let mut q = state(&spec());
    q.track(
        Tracked {
            expires_at_ms: Some(T0 + 10 * SEC),
            ..msg(1)
        },
        T0,
    );
    q.tick(T0 + 10 * SEC);
    let dead = dead_letters(&mut q);
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].reason, DeadLetterReason::Expired);
    assert_eq!(dead[0].deliveries, 0);
    assert_eq!(dead[0].first_failure_ms, None);
    assert_eq!(q.receive("c1", 10, None, T0 + 10 * SEC), []);
}

#[test]
fn expired_ready_message_is_not_delivered_even_before_a_tick() {
    let mut q = state(&spec());
    let ttl = Some(T0 + 10 * SEC);
    q.track(
        Tracked {
            expires_at_ms: ttl,
            ..msg(1)
        },
        T0,
    );
    q.track(msg(2), T0);
    assert_eq!(seqs(&q.receive("c1", 10, None, T0 + 10 * SEC)), [2]);
    assert_eq!(dead_letters(&mut q)[0].reason, DeadLetterReason::Expired);
}

#[test]
fn message_already_expired_when_tracked_is_dead_lettered_at_once() {
    let mut q = state(&spec());
    q.track(
        Tracked {
            expires_at_ms: Some(T0),
            ..msg(1)
        },
        T0,
    );
    assert_eq!(dead_letters(&mut q)[0].reason, DeadLetterReason::Expired);
    assert_eq!(q.stats(T0), QueueStateStats::default());
}

#[test]
fn ttl_passing_in_flight_keeps_the_lease_and_dead_letters_on_failure() {
    let mut q = state(&spec());
    for seq in [1, 2] {
        q.track(
            Tracked {
                expires_at_ms: Some(T0 + 5 * SEC),
                ..msg(seq)
            },
            T0,
        );
    }
    let got = q.receive("c1", 2, None, T0);
    q.tick(T0 + 6 * SEC);
    assert_eq!(
        dead_letters(&mut q),
        [],
        "in flight: the consumer may still ack"
    );
    assert_eq!(
        q.ack(1, got[0].token, T0 + 6 * SEC).unwrap(),
        Acked::Settled
    );
    let failed = q.nack(2, got[1].token, None, None, T0 + 6 * SEC).unwrap();
    assert_eq!(failed, Nacked::DeadLettered(DeadLetterReason::Expired));
}

#[test]
fn higher_priority_is_delivered_first_and_fifo_within_a_level() {
    let mut q = state(&QueueSpec {
        priority_levels: 3,
        lower_priority_share: 0.0,
        ..spec()
    });
    for (seq, level) in [(1, 0), (2, 2), (3, 1), (4, 2), (5, 9)] {
        q.track(Tracked { level, ..msg(seq) }, T0);
    }
    // Level 9 counts as the highest level, 2; after it in publish order.
    assert_eq!(seqs(&q.receive("c1", 10, None, T0)), [2, 4, 5, 3, 1]);
}

#[test]
fn lower_priority_share_reaches_lower_levels_under_load() {
    let mut q = state(&QueueSpec {
        priority_levels: 2,
        lower_priority_share: 0.5,
        ..spec()
    });
    for seq in 0..4 {
        q.track(
            Tracked {
                level: 1,
                ..msg(seq)
            },
            T0,
        );
    }
    q.track(
        Tracked {
            level: 0,
            ..msg(10)
        },
        T0,
    );
    assert_eq!(seqs(&q.receive("c1", 3, None, T0)), [0, 10, 1]);
}

fn key_shared() -> QueueSpec {
    QueueSpec {
        ordering: OrderingMode::KeyShared,
        ..spec()
    }
}

#[test]
fn same_key_waits_for_the_in_flight_message() {
    let mut q = state(&key_shared());
    q.track(keyed(1, "a"), T0);
    q.track(keyed(2, "a"), T0);
    q.track(keyed(3, "b"), T0);
    q.track(msg(4), T0);
    assert_eq!(seqs(&q.receive("c1", 10, None, T0)), [1, 3, 4]);
    assert_eq!(q.receive("c2", 10, None, T0), []);
    let d = q.lease(1).unwrap().0;
    // A failure keeps the key's order: 1 is redelivered before 2.
    q.nack(1, d, Some(Duration::ZERO), None, T0).unwrap();
    assert_eq!(
        q.take_effects(),
        [
            Effect::Failed {
                seq: 1,
                deliveries: 1,
                retry_at_ms: T0,
                error: None,
            },
            Effect::Ready { seq: 1 }
        ]
    );
    let again = q.receive("c2", 10, None, T0);
    assert_eq!(seqs(&again), [1]);
    q.ack(1, again[0].token, T0).unwrap();
    assert_eq!(
        q.take_effects(),
        [Effect::Settled { seq: 1 }, Effect::Ready { seq: 2 }]
    );
    assert_eq!(seqs(&q.receive("c2", 10, None, T0)), [2]);
}

#[test]
fn a_skipped_message_leaves_whatever_its_state_and_releases_its_key() {
    let mut q = state(&key_shared());
    q.track(keyed(1, "a"), T0);
    q.track(keyed(2, "a"), T0);
    q.track(msg(3), T0);
    q.track(
        Tracked {
            deliver_at_ms: T0 + 60 * SEC,
            ..msg(4)
        },
        T0,
    );
    let got = q.receive("c1", 10, None, T0);
    assert_eq!(seqs(&got), [1, 3]);
    q.take_effects();
    // In flight: its lease ends, and its key's next message is ready at once.
    assert!(q.skip(1, T0));
    assert_eq!(q.take_effects(), [Effect::Ready { seq: 2 }]);
    assert!(
        matches!(q.ack(1, got[0].token, T0), Ok(Acked::AlreadySettled)),
        "a late ack finds nothing to settle"
    );
    // Scheduled and ready ones go too, and nothing is left of any of them.
    assert!(q.skip(4, T0));
    assert!(q.skip(2, T0));
    assert!(!q.skip(2, T0), "no longer tracked");
    assert_eq!(q.seqs(), [3]);
    assert_eq!(q.receive("c2", 10, None, T0 + 120 * SEC), []);
    q.ack(3, got[1].token, T0).unwrap();
    assert_eq!(q.size(), (0, 0));
}

#[test]
fn dead_lettered_head_releases_its_key() {
    let mut q = state(&key_shared());
    q.track(keyed(1, "a"), T0);
    q.track(keyed(2, "a"), T0);
    let d = receive_one(&mut q, T0);
    q.reject(1, d.token, "bad", T0).unwrap();
    assert_eq!(seqs(&q.receive("c1", 10, None, T0)), [2]);
}

#[test]
fn parked_key_holds_its_messages_without_blocking_other_keys() {
    let mut q = state(&key_shared());
    q.track(keyed(1, "a"), T0);
    q.track(keyed(2, "a"), T0);
    q.track(keyed(3, "b"), T0);
    assert!(q.park(b"a"));
    assert!(q.is_parked(b"a"));
    assert_eq!(q.stats(T0).parked_messages, 2);
    assert_eq!(seqs(&q.receive("c1", 10, None, T0)), [3]);
    q.unpark(b"a", T0);
    assert_eq!(q.take_effects(), [Effect::Ready { seq: 1 }]);
    assert_eq!(seqs(&q.receive("c1", 10, None, T0)), [1]);
}

#[test]
fn shared_mode_ignores_ordering_keys() {
    let mut q = state(&spec());
    q.track(keyed(1, "a"), T0);
    q.track(keyed(2, "a"), T0);
    assert!(!q.park(b"a"));
    assert_eq!(seqs(&q.receive("c1", 10, None, T0)), [1, 2]);
}

#[test]
fn consumer_at_its_prefetch_cap_receives_nothing() {
    let mut q = state(&spec());
    for seq in 1..=5 {
        q.track(msg(seq), T0);
    }
    q.set_prefetch("c1", Some(2));
    let got = q.receive("c1", 10, None, T0);
    assert_eq!(seqs(&got), [1, 2]);
    assert_eq!(q.receive("c1", 10, None, T0), []);
    assert_eq!(q.in_flight_of("c1"), 2);
    assert_eq!(
        seqs(&q.receive("c2", 1, None, T0)),
        [3],
        "others are not capped"
    );
    q.ack(1, got[0].token, T0).unwrap();
    assert_eq!(seqs(&q.receive("c1", 10, None, T0)), [4]);
    q.set_prefetch("c1", None);
    assert_eq!(seqs(&q.receive("c1", 10, None, T0)), [5]);
}

#[test]
fn stats_count_ready_in_flight_delayed_and_parked_messages() {
    let mut q = state(&key_shared());
    q.track(
        Tracked {
            deliver_at_ms: T0 - 4 * SEC,
            ..msg(1)
        },
        T0,
    );
    q.track(msg(2), T0);
    q.track(
        Tracked {
            deliver_at_ms: T0 + SEC,
            ..msg(3)
        },
        T0,
    );
    q.track(keyed(4, "p"), T0);
    q.park(b"p");
    assert_eq!(
        q.stats(T0),
        QueueStateStats {
            tracked: 4,
            ready: 2,
            in_flight: 0,
            delayed: 1,
            parked_messages: 1,
            oldest_ready_age_ms: Some(4 * SEC),
            bytes: 40,
        }
    );
    q.receive("c1", 1, None, T0);
    let stats = q.stats(T0 + 2 * SEC);
    assert_eq!((stats.ready, stats.in_flight), (1, 1));
    assert_eq!(stats.oldest_ready_age_ms, Some(2 * SEC));
}

#[test]
fn cancel_drops_a_scheduled_message_but_not_a_delivered_one() {
    let mut q = state(&spec());
    let later = T0 + 60 * SEC;
    q.track(
        Tracked {
            deliver_at_ms: later,
            ..msg(1)
        },
        T0,
    );
    q.track(msg(2), T0);
    assert!(q.cancel(1, T0));
    assert!(!q.is_tracked(1));
    assert!(!q.cancel(1, T0), "already gone");
    let d = receive_one(&mut q, T0);
    assert!(!q.cancel(2, T0), "in flight");
    q.nack(2, d.token, None, None, T0).unwrap();
    assert!(
        !q.cancel(2, T0),
        "waiting for a retry, not scheduled by its publisher"
    );
    q.tick(later);
    assert_eq!(seqs(&q.receive("c1", 10, None, later)), [2]);
}

#[test]
fn restored_message_continues_its_delivery_count() {
    let mut q = state(&spec());
    q.track(
        Tracked {
            deliveries: 3,
            ..msg(1)
        },
        T0,
    );
    assert_eq!(receive_one(&mut q, T0).delivery, 4);
    q.track(
        Tracked {
            deliveries: 5,
            ..msg(2)
        },
        T0,
    );
    let dead = dead_letters(&mut q);
    assert_eq!(dead[0].seq, 2);
    assert_eq!(dead[0].reason, DeadLetterReason::MaxDeliveries);
}

#[test]
fn backoff_jitter_is_reproducible_from_the_seed() {
    let jittery = QueueSpec {
        retry: RetryPolicy {
            backoff: Backoff {
                jitter: 0.5,
                ..spec().retry.backoff
            },
            ..spec().retry
        },
        ..spec()
    };
    let retry_times = |seed| {
        let mut q = QueueState::new(&jittery, seed).unwrap();
        (0..20)
            .map(|seq| {
                q.track(msg(seq), T0);
                let d = q.receive("c", 1, None, T0).remove(0);
                match q.nack(seq, d.token, None, None, T0).unwrap() {
                    Nacked::RetryAt(at) => at,
                    other => panic!("{other:?}"),
                }
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(retry_times(3), retry_times(3));
    assert!(
        retry_times(3)
            .iter()
            .all(|&at| (T0 + 500..=T0 + 1500).contains(&at))
    );
    assert_ne!(retry_times(3), retry_times(4));
}

#[test]
fn invalid_spec_is_refused() {
    let bad = QueueSpec {
        lease: Duration::ZERO,
        ..spec()
    };
    assert!(matches!(
        QueueState::new(&bad, 1),
        Err(BrokerError::InvalidSetting {
            setting: "lease",
            ..
        })
    ));
}

#[test]
fn cancel_id_finds_only_scheduled_never_delivered_messages() {
    let mut q = state(&spec());
    q.track(
        Tracked {
            deliver_at_ms: T0 + 10 * SEC,
            ..msg(1)
        },
        T0,
    );
    q.track(msg(2), T0);
    q.track(
        Tracked {
            deliver_at_ms: T0 + 10 * SEC,
            ..msg(3)
        },
        T0,
    );
    assert_eq!(q.cancel_id(id(2), T0), None, "ready, not scheduled");
    assert_eq!(q.cancel_id(id(1), T0), Some(1));
    assert_eq!(q.cancel_id(id(1), T0), None, "already cancelled");
    assert_eq!(q.stats(T0).delayed, 1);
    // A retry backoff is scheduled too, but a delivered message is not cancellable.
    let d = q.receive("c", 1, None, T0);
    assert_eq!(seqs(&d), [2]);
    q.nack(2, d[0].token, Some(Duration::from_secs(5)), None, T0)
        .unwrap();
    assert_eq!(q.cancel_id(id(2), T0), None);
    // Once its delay ends the message is no longer scheduled, and the index forgets it.
    q.tick(T0 + 10 * SEC);
    assert_eq!(q.cancel_id(id(3), T0 + 10 * SEC), None);
    assert!(q.scheduled_ids.is_empty());
}

#[test]
fn evictable_head_lists_messages_not_in_flight_oldest_first_and_evict_removes_them() {
    let limited = QueueSpec {
        length_limit: crate::spec::LengthLimit {
            max_messages: Some(3),
            max_bytes: None,
            overflow: OverflowPolicy::DeadLetterHead,
        },
        ..spec()
    };
    let mut q = state(&limited);
    for seq in 1..=3 {
        q.track(msg(seq), T0);
    }
    let d = q.receive("c", 1, None, T0);
    assert_eq!(seqs(&d), [1]);
    let head: Vec<Seq> = q.evictable_head().map(|(seq, _)| seq).collect();
    assert_eq!(head, [2, 3]);
    assert!(!q.evict(1, Eviction::DeadLetter, T0), "in flight");
    assert!(q.evict(2, Eviction::DeadLetter, T0));
    assert_eq!(dead_letters(&mut q)[0].reason, DeadLetterReason::Overflow);
    assert!(q.evict(3, Eviction::Drop, T0));
    assert!(q.take_effects().is_empty(), "a drop has no effect");
    assert_eq!(q.stats(T0).tracked, 1);
    // Queues that never evict keep no order.
    let q = state(&spec());
    assert_eq!(q.evictable_head().count(), 0);
}

#[test]
fn a_tracked_message_costs_48_bytes_plus_what_only_some_need() {
    // The per-message cost of a backlog: keep it from growing by accident.
    assert_eq!(std::mem::size_of::<super::Entry>(), 48);
}

fn exclusive() -> QueueSpec {
    QueueSpec {
        ordering: OrderingMode::Exclusive,
        ..spec()
    }
}

#[test]
fn exclusive_delivers_one_at_a_time_in_order_to_the_active_consumer() {
    let mut q = state(&exclusive());
    for seq in 0..4 {
        q.track(keyed(seq, &format!("k{seq}")), T0);
    }
    let first = q.receive("c1", 10, None, T0);
    assert_eq!(seqs(&first), [0], "one at a time, whatever the keys");
    assert!(q.receive("c2", 10, None, T0).is_empty(), "c1 is active");
    // A retry goes before anything published after it.
    q.nack(0, first[0].token, Some(Duration::ZERO), None, T0)
        .unwrap();
    let again = q.receive("c1", 10, None, T0);
    assert_eq!((seqs(&again), again[0].delivery), (vec![0], 2));
    q.ack(0, again[0].token, T0).unwrap();
    assert_eq!(seqs(&q.receive("c1", 10, None, T0 + SEC)), [1]);
    // Keys mean nothing here: parking is refused.
    assert!(!q.park(b"k2"));
}

#[test]
fn exclusive_fails_over_once_the_active_consumer_is_gone() {
    let spec = exclusive();
    let lease = spec.lease.as_millis() as i64;
    let mut q = state(&spec);
    q.track(msg(0), T0);
    q.track(msg(1), T0);
    let held = q.receive("c1", 1, None, T0);
    // While c1 holds a lease, c2 waits.
    assert!(q.receive("c2", 1, None, T0 + 1).is_empty());
    q.ack(0, held[0].token, T0 + 2).unwrap();
    // c1 holds nothing but asked at T0: it stays active until T0 + lease.
    assert!(q.receive("c2", 1, None, T0 + lease - 1).is_empty());
    let taken = q.receive("c2", 1, None, T0 + lease);
    assert_eq!(seqs(&taken), [1], "c2 took over");
    assert!(
        q.receive("c1", 1, None, T0 + lease).is_empty(),
        "and c1 now waits"
    );
}

#[test]
fn an_ack_from_before_a_restart_of_a_message_dead_lettered_at_the_restart_is_stale() {
    // Its last delivery was running when the broker stopped and used up its deliveries:
    // the restart dead-letters it, so that delivery's late ack did not take.
    let mut q = state(&spec());
    q.set_token_base(1_000);
    q.track(
        Tracked {
            deliveries: 5,
            ..msg(1)
        },
        T0,
    );
    assert_eq!(dead_letters(&mut q).len(), 1);
    assert!(matches!(
        q.ack(1, LeaseToken(7), T0),
        Err(BrokerError::StaleLease { seq: 1, .. })
    ));
}
