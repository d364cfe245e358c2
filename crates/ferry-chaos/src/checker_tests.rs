//! The checker must be able to fail: each test feeds it a history with one kind of broker
//! misbehaviour and asserts that exactly that is reported, next to a clean history that
//! passes with its redeliveries counted as explained.

use crate::checker::{Findings, check};
use crate::history::{Answer, Event, Fate, Settle};
use crate::scenario::{ORDERS_QUEUE, Scenario, WORK_QUEUE};

fn scenario() -> Scenario {
    Scenario {
        seed: 1,
        duration_ms: 1000,
        rate: 10,
        max_messages: None,
        producers: 1,
        consumers: 1,
        lease_ms: 4000,
        work_max_deliveries: 3,
        orders_max_deliveries: 25,
        fault_gap_ms: (1000, 2000),
        server_kills_per_minute: None,
        clock_jumps: 1,
        clock_jump_ms: 1000,
        calm_ms: 0,
        drain_timeout_ms: 1000,
    }
}

/// Builds histories with a clock that ticks once per event.
#[derive(Default)]
struct History {
    t: u64,
    events: Vec<Event>,
}

impl History {
    fn tick(&mut self) -> u64 {
        self.t += 1;
        self.t
    }

    fn publish(&mut self, queue: &str, id: &str, key: Option<(&str, u64)>, fate: Fate) {
        let t = self.tick();
        self.events.push(Event::Published {
            t,
            queue: queue.into(),
            sent_id: id.into(),
            id: id.into(),
            key: key.map(|k| k.0.into()),
            kseq: key.map(|k| k.1),
            fate,
            dedup: None,
        });
    }

    fn publish_dedup(&mut self, id: &str, dedup: &str) {
        let t = self.tick();
        self.events.push(Event::Published {
            t,
            queue: WORK_QUEUE.into(),
            sent_id: id.into(),
            id: id.into(),
            key: None,
            kseq: None,
            fate: Fate::Ack,
            dedup: Some(dedup.into()),
        });
    }

    fn republish(&mut self, sent: &str, returned: &str, dedup: &str) {
        let t = self.tick();
        self.events.push(Event::Republished {
            t,
            queue: WORK_QUEUE.into(),
            sent_id: sent.into(),
            returned_id: returned.into(),
            dedup: dedup.into(),
        });
    }

    fn deliver(&mut self, queue: &str, id: &str, seq: u64, attempt: u32, key: Option<(&str, u64)>) {
        let t = self.tick();
        self.events.push(Event::Delivered {
            t,
            queue: queue.into(),
            id: id.into(),
            seq,
            attempt,
            key: key.map(|k| k.0.into()),
            kseq: key.map(|k| k.1),
        });
    }

    fn settle(
        &mut self,
        queue: &str,
        id: &str,
        seq: u64,
        attempt: u32,
        op: Settle,
        answer: Option<Answer>,
    ) {
        let t = self.tick();
        self.events.push(Event::Settling {
            t,
            queue: queue.into(),
            id: id.into(),
            seq,
            attempt,
            op,
        });
        if let Some(answer) = answer {
            let t = self.tick();
            self.events.push(Event::Settled {
                t,
                queue: queue.into(),
                id: id.into(),
                seq,
                attempt,
                op,
                answer,
                error: match answer {
                    Answer::Ok => None,
                    Answer::Refused => Some("the lease ended".to_owned()),
                    Answer::NeverCame => {
                        Some("the connection was lost before the server answered".to_owned())
                    }
                },
            });
        }
    }

    fn dead_letter(&mut self, queue: &str, id: &str, seq: u64, reason: &str, deliveries: u32) {
        self.events.push(Event::DeadLetter {
            origin_queue: queue.into(),
            id: id.into(),
            origin_seq: seq,
            reason: reason.into(),
            deliveries,
            last_error: None,
            last_failure_t: None,
        });
    }

    /// The client received this delivery on a stream that then failed, and dropped it.
    fn dropped(&mut self, queue: &str, id: &str, seq: u64, attempt: u32) {
        let t = self.tick();
        self.events.push(Event::Dropped {
            t,
            queue: queue.into(),
            id: id.into(),
            seq,
            attempt,
        });
    }

    fn fault(&mut self, kind: &str, detail: &str) {
        let t = self.tick();
        self.events.push(Event::Fault {
            t,
            kind: kind.into(),
            detail: detail.into(),
        });
    }

    /// A `max_deliveries` letter whose last failure the broker recorded now.
    fn dead_letter_failed_now(&mut self, queue: &str, id: &str, seq: u64, deliveries: u32) {
        let t = self.tick();
        self.events.push(Event::DeadLetter {
            origin_queue: queue.into(),
            id: id.into(),
            origin_seq: seq,
            reason: "max_deliveries".into(),
            deliveries,
            last_error: Some("delivery interrupted by a broker restart".into()),
            last_failure_t: Some(t),
        });
    }

    /// A message published, delivered once and acked.
    fn acked(&mut self, queue: &str, id: &str, seq: u64, key: Option<(&str, u64)>) {
        self.publish(queue, id, key, Fate::Ack);
        self.deliver(queue, id, seq, 1, key);
        self.settle(queue, id, seq, 1, Settle::Ack, Some(Answer::Ok));
    }

    fn check(&self) -> Findings {
        check(&self.events, &scenario())
    }
}

/// A history with every allowed irregularity: a redelivery after a killed consumer, an
/// ack whose answer was lost, a nacked head delivered again, a reject and a poison
/// message in the dead-letter queue, a re-publish answered from the dedup window.
fn clean_history() -> History {
    let mut h = History::default();
    h.acked(WORK_QUEUE, "A", 1, None);
    // B: the first consumer died holding it; the lease ran out; the next one acked it.
    h.publish(WORK_QUEUE, "B", None, Fate::Ack);
    h.deliver(WORK_QUEUE, "B", 2, 1, None);
    h.deliver(WORK_QUEUE, "B", 2, 2, None);
    h.settle(WORK_QUEUE, "B", 2, 2, Settle::Ack, Some(Answer::Ok));
    // C: acked, the answer lost, never delivered again.
    h.publish(WORK_QUEUE, "C", None, Fate::Ack);
    h.deliver(WORK_QUEUE, "C", 3, 1, None);
    h.settle(WORK_QUEUE, "C", 3, 1, Settle::Ack, Some(Answer::NeverCame));
    // C2: acked, and the consumer was killed before the answer came.
    h.publish(WORK_QUEUE, "C2", None, Fate::Ack);
    h.deliver(WORK_QUEUE, "C2", 7, 1, None);
    h.settle(WORK_QUEUE, "C2", 7, 1, Settle::Ack, None);
    // F: its ack refused (the lease had run out in a pause), delivered again and acked.
    h.publish(WORK_QUEUE, "F", None, Fate::Ack);
    h.deliver(WORK_QUEUE, "F", 8, 1, None);
    h.settle(WORK_QUEUE, "F", 8, 1, Settle::Ack, Some(Answer::Refused));
    h.deliver(WORK_QUEUE, "F", 8, 2, None);
    h.settle(WORK_QUEUE, "F", 8, 2, Settle::Ack, Some(Answer::Ok));
    // R: rejected.
    h.publish(WORK_QUEUE, "R", None, Fate::Reject);
    h.deliver(WORK_QUEUE, "R", 4, 1, None);
    h.settle(WORK_QUEUE, "R", 4, 1, Settle::Reject, Some(Answer::Ok));
    h.dead_letter(WORK_QUEUE, "R", 4, "rejected", 1);
    // P: poison, nacked three times.
    h.publish(WORK_QUEUE, "P", None, Fate::Poison);
    for attempt in 1..=3 {
        h.deliver(WORK_QUEUE, "P", 5, attempt, None);
        h.settle(WORK_QUEUE, "P", 5, attempt, Settle::Nack, Some(Answer::Ok));
    }
    h.dead_letter(WORK_QUEUE, "P", 5, "max_deliveries", 3);
    // D: published under a dedup id, then again: answered with D's id.
    h.publish_dedup("D", "dd-1");
    h.republish("D2", "D", "dd-1");
    h.deliver(WORK_QUEUE, "D", 6, 1, None);
    h.settle(WORK_QUEUE, "D", 6, 1, Settle::Ack, Some(Answer::Ok));
    // Key k: 0 nacked once and delivered again, then 1 and 2.
    h.publish(ORDERS_QUEUE, "K0", Some(("k", 0)), Fate::NackOnce);
    h.publish(ORDERS_QUEUE, "K1", Some(("k", 1)), Fate::Ack);
    h.publish(ORDERS_QUEUE, "K2", Some(("k", 2)), Fate::Ack);
    h.deliver(ORDERS_QUEUE, "K0", 1, 1, Some(("k", 0)));
    h.settle(ORDERS_QUEUE, "K0", 1, 1, Settle::Nack, Some(Answer::Ok));
    h.deliver(ORDERS_QUEUE, "K0", 1, 2, Some(("k", 0)));
    h.settle(ORDERS_QUEUE, "K0", 1, 2, Settle::Ack, Some(Answer::Ok));
    h.deliver(ORDERS_QUEUE, "K1", 2, 1, Some(("k", 1)));
    h.settle(ORDERS_QUEUE, "K1", 2, 1, Settle::Ack, Some(Answer::Ok));
    h.deliver(ORDERS_QUEUE, "K2", 3, 1, Some(("k", 2)));
    h.settle(ORDERS_QUEUE, "K2", 3, 1, Settle::Ack, Some(Answer::Ok));
    h
}

#[test]
fn a_history_with_only_allowed_redeliveries_is_clean() {
    let f = clean_history().check();
    assert!(f.clean(), "{:#?}", f.violations);
    assert_eq!(f.acked_publishes, 11);
    // C and C2.
    assert_eq!(f.acks_unconfirmed, 2);
    // B once more, F once more, P twice more, K0 once more.
    assert_eq!(f.explained_duplicates, 5);
    assert_eq!(f.dead_letters.values().sum::<u64>(), 2);
}

#[test]
fn an_acknowledged_publish_never_delivered_is_lost() {
    let mut h = clean_history();
    h.publish(WORK_QUEUE, "L", None, Fate::Ack);
    let f = h.check();
    assert_eq!(f.lost, 1, "{:#?}", f.violations);
    assert!(!f.clean());
}

#[test]
fn a_message_delivered_and_never_settled_is_lost() {
    let mut h = clean_history();
    h.publish(WORK_QUEUE, "L", None, Fate::Ack);
    h.deliver(WORK_QUEUE, "L", 9, 1, None);
    assert_eq!(h.check().lost, 1);
}

#[test]
fn an_ack_with_a_lost_answer_does_not_cover_a_later_delivery() {
    let mut h = clean_history();
    h.publish(WORK_QUEUE, "L", None, Fate::Ack);
    h.deliver(WORK_QUEUE, "L", 9, 1, None);
    h.settle(WORK_QUEUE, "L", 9, 1, Settle::Ack, None);
    // Delivered again, so that ack did not take: and this time nobody acked it.
    h.deliver(WORK_QUEUE, "L", 9, 2, None);
    assert_eq!(h.check().lost, 1);
}

#[test]
fn a_message_whose_only_ack_was_refused_is_lost() {
    let mut h = clean_history();
    h.publish(WORK_QUEUE, "L", None, Fate::Ack);
    h.deliver(WORK_QUEUE, "L", 9, 1, None);
    // The broker answered that the ack did not take, and the message never came back.
    h.settle(WORK_QUEUE, "L", 9, 1, Settle::Ack, Some(Answer::Refused));
    let f = h.check();
    assert_eq!(f.lost, 1, "{:#?}", f.violations);
    assert_eq!(f.acks_unconfirmed, 2, "only C and C2 of the clean history");
    assert!(!f.clean());
}

#[test]
fn a_run_with_no_messages_published_is_not_clean() {
    let mut h = History::default();
    for phase in ["faults_over", "drained"] {
        let t = h.tick();
        h.events.push(Event::Phase {
            t,
            phase: phase.into(),
        });
    }
    let f = h.check();
    assert!(!f.clean());
    assert!(
        f.violations
            .iter()
            .any(|v| v.starts_with("no messages published")),
        "{:#?}",
        f.violations
    );
    // One message is traffic.
    let mut h = History::default();
    h.acked(WORK_QUEUE, "A", 1, None);
    assert!(h.check().clean());
}

#[test]
fn two_acks_that_returned_ok_for_one_message_are_detected() {
    let mut h = clean_history();
    h.publish(WORK_QUEUE, "X", None, Fate::Ack);
    h.deliver(WORK_QUEUE, "X", 9, 1, None);
    h.deliver(WORK_QUEUE, "X", 9, 2, None);
    h.settle(WORK_QUEUE, "X", 9, 1, Settle::Ack, Some(Answer::Ok));
    h.settle(WORK_QUEUE, "X", 9, 2, Settle::Ack, Some(Answer::Ok));
    let f = h.check();
    assert_eq!(f.acked_twice, 1, "{:#?}", f.violations);
    assert!(!f.clean());
}

#[test]
fn an_acked_message_delivered_again_is_detected() {
    let mut h = clean_history();
    h.acked(WORK_QUEUE, "X", 9, None);
    h.deliver(WORK_QUEUE, "X", 9, 2, None);
    h.settle(WORK_QUEUE, "X", 9, 2, Settle::Ack, Some(Answer::NeverCame));
    let f = h.check();
    assert_eq!(f.acked_came_back, 1, "{:#?}", f.violations);
    assert!(!f.clean());
}

#[test]
fn an_order_inversion_within_a_key_is_detected() {
    let mut h = clean_history();
    h.publish(ORDERS_QUEUE, "J0", Some(("j", 0)), Fate::Ack);
    h.publish(ORDERS_QUEUE, "J1", Some(("j", 1)), Fate::Ack);
    h.deliver(ORDERS_QUEUE, "J0", 10, 1, Some(("j", 0)));
    h.deliver(ORDERS_QUEUE, "J1", 11, 1, Some(("j", 1)));
    h.settle(ORDERS_QUEUE, "J1", 11, 1, Settle::Ack, Some(Answer::Ok));
    // J0's lease ran out after J1 went out: delivered again, behind its successor.
    h.deliver(ORDERS_QUEUE, "J0", 10, 2, Some(("j", 0)));
    h.settle(ORDERS_QUEUE, "J0", 10, 2, Settle::Ack, Some(Answer::Ok));
    let f = h.check();
    assert_eq!(f.order_violations, 1, "{:#?}", f.violations);
    assert_eq!(f.lost + f.acked_twice + f.acked_came_back, 0);
}

#[test]
fn a_key_skipping_a_message_is_an_order_violation() {
    let mut h = clean_history();
    h.publish(ORDERS_QUEUE, "J0", Some(("j", 0)), Fate::Ack);
    h.publish(ORDERS_QUEUE, "J1", Some(("j", 1)), Fate::Ack);
    h.deliver(ORDERS_QUEUE, "J1", 11, 1, Some(("j", 1)));
    h.settle(ORDERS_QUEUE, "J1", 11, 1, Settle::Ack, Some(Answer::Ok));
    h.deliver(ORDERS_QUEUE, "J0", 10, 1, Some(("j", 0)));
    h.settle(ORDERS_QUEUE, "J0", 10, 1, Settle::Ack, Some(Answer::Ok));
    let f = h.check();
    // J1 before J0 (a skip), then J0 after J1 (going back).
    assert_eq!(f.order_violations, 2, "{:#?}", f.violations);
}

#[test]
fn a_rejected_message_missing_from_the_dead_letter_queue_is_detected() {
    let mut h = clean_history();
    h.publish(WORK_QUEUE, "Q", None, Fate::Reject);
    h.deliver(WORK_QUEUE, "Q", 9, 1, None);
    h.settle(WORK_QUEUE, "Q", 9, 1, Settle::Reject, Some(Answer::Ok));
    let f = h.check();
    assert_eq!(f.dead_letter_mismatches, 1, "{:#?}", f.violations);
    assert_eq!(f.lost, 1);
}

#[test]
fn a_dead_letter_nobody_caused_is_detected() {
    let mut h = clean_history();
    // Delivered once and never rejected, yet a dead letter "rejected": the message is not
    // accounted for either.
    h.publish(WORK_QUEUE, "Q", None, Fate::Ack);
    h.deliver(WORK_QUEUE, "Q", 9, 1, None);
    h.dead_letter(WORK_QUEUE, "Q", 9, "rejected", 1);
    let f = h.check();
    assert_eq!(f.dead_letter_mismatches, 1, "{:#?}", f.violations);
    assert_eq!(f.lost, 1, "{:#?}", f.violations);
    // And one for max deliveries before the maximum.
    let mut h = clean_history();
    h.publish(WORK_QUEUE, "Q", None, Fate::Poison);
    h.deliver(WORK_QUEUE, "Q", 9, 1, None);
    h.settle(WORK_QUEUE, "Q", 9, 1, Settle::Nack, Some(Answer::Ok));
    h.dead_letter(WORK_QUEUE, "Q", 9, "max_deliveries", 1);
    let f = h.check();
    assert_eq!(f.dead_letter_mismatches, 1, "{:#?}", f.violations);
    assert_eq!(f.lost, 1, "{:#?}", f.violations);
}

#[test]
fn a_dead_letter_after_a_refused_reject_is_not_explained() {
    let mut h = clean_history();
    h.publish(WORK_QUEUE, "Q", None, Fate::Reject);
    h.deliver(WORK_QUEUE, "Q", 9, 1, None);
    // The broker said the reject did not take (the lease had ended), and the message was
    // never delivered again, yet it is a dead letter "rejected".
    h.settle(WORK_QUEUE, "Q", 9, 1, Settle::Reject, Some(Answer::Refused));
    h.dead_letter(WORK_QUEUE, "Q", 9, "rejected", 1);
    let f = h.check();
    assert_eq!(f.dead_letter_mismatches, 1, "{:#?}", f.violations);
    assert_eq!(f.lost, 1, "{:#?}", f.violations);
    // A reject whose answer never came is one the broker may have done.
    let mut h = clean_history();
    h.publish(WORK_QUEUE, "Q", None, Fate::Reject);
    h.deliver(WORK_QUEUE, "Q", 9, 1, None);
    h.settle(
        WORK_QUEUE,
        "Q",
        9,
        1,
        Settle::Reject,
        Some(Answer::NeverCame),
    );
    h.dead_letter(WORK_QUEUE, "Q", 9, "rejected", 1);
    let f = h.check();
    assert!(f.clean(), "{:#?}", f.violations);
}

#[test]
fn a_max_deliveries_dead_letter_needs_that_many_deliveries_seen_by_consumers() {
    // The broker's letter says three deliveries, but consumers saw one, nacked it, and
    // never saw the message again.
    let mut h = clean_history();
    h.publish(WORK_QUEUE, "Q", None, Fate::Poison);
    h.deliver(WORK_QUEUE, "Q", 9, 1, None);
    h.settle(WORK_QUEUE, "Q", 9, 1, Settle::Nack, Some(Answer::Ok));
    h.dead_letter(WORK_QUEUE, "Q", 9, "max_deliveries", 3);
    let f = h.check();
    assert_eq!(f.dead_letter_mismatches, 1, "{:#?}", f.violations);
    assert_eq!(f.lost, 1, "{:#?}", f.violations);
    // Two of three seen: the third is not in any history.
    let mut h = clean_history();
    h.publish(WORK_QUEUE, "Q", None, Fate::Poison);
    for attempt in 1..=2 {
        h.deliver(WORK_QUEUE, "Q", 9, attempt, None);
        h.settle(WORK_QUEUE, "Q", 9, attempt, Settle::Nack, Some(Answer::Ok));
    }
    h.dead_letter(WORK_QUEUE, "Q", 9, "max_deliveries", 3);
    let f = h.check();
    assert_eq!(f.dead_letter_mismatches, 1, "{:#?}", f.violations);
    assert_eq!(f.lost, 1, "{:#?}", f.violations);
}

#[test]
fn a_max_deliveries_dead_letter_is_explained_by_leases_that_demonstrably_ended() {
    let mut h = clean_history();
    h.publish(WORK_QUEUE, "Q", None, Fate::NackOnce);
    h.deliver(WORK_QUEUE, "Q", 9, 1, None);
    h.settle(WORK_QUEUE, "Q", 9, 1, Settle::Nack, Some(Answer::Ok));
    // Attempt 2 no consumer recorded (the client dropped it with its failed stream): the
    // broker's attempt 3 shows that its lease ended unsettled. Attempt 3's consumer was
    // killed before it settled; its lease ran out and the message was dead-lettered.
    h.deliver(WORK_QUEUE, "Q", 9, 3, None);
    h.dead_letter(WORK_QUEUE, "Q", 9, "max_deliveries", 3);
    // Another whose last lease ran out in a pause: its late ack was refused.
    h.publish(WORK_QUEUE, "V", None, Fate::NackOnce);
    h.deliver(WORK_QUEUE, "V", 10, 1, None);
    h.settle(WORK_QUEUE, "V", 10, 1, Settle::Nack, Some(Answer::Ok));
    h.deliver(WORK_QUEUE, "V", 10, 2, None);
    h.settle(WORK_QUEUE, "V", 10, 2, Settle::Ack, Some(Answer::Refused));
    h.deliver(WORK_QUEUE, "V", 10, 3, None);
    h.settle(WORK_QUEUE, "V", 10, 3, Settle::Ack, Some(Answer::Refused));
    h.dead_letter(WORK_QUEUE, "V", 10, "max_deliveries", 3);
    let f = h.check();
    assert!(f.clean(), "{:#?}", f.violations);
}

#[test]
fn a_second_copy_under_one_dedup_id_is_detected() {
    let mut h = clean_history();
    h.publish_dedup("E", "dd-2");
    h.deliver(WORK_QUEUE, "E", 9, 1, None);
    h.settle(WORK_QUEUE, "E", 9, 1, Settle::Ack, Some(Answer::Ok));
    // The broker forgot the dedup id across a restart: stored and delivered a copy.
    h.republish("E2", "E2", "dd-2");
    h.deliver(WORK_QUEUE, "E2", 10, 1, None);
    h.settle(WORK_QUEUE, "E2", 10, 1, Settle::Ack, Some(Answer::Ok));
    let f = h.check();
    // Answered with the new id, and the copy delivered.
    assert_eq!(f.dedup_violations, 2, "{:#?}", f.violations);
    assert!(!f.clean());
}

#[test]
fn one_message_stored_twice_is_detected() {
    let mut h = clean_history();
    h.publish(WORK_QUEUE, "S", None, Fate::Ack);
    h.deliver(WORK_QUEUE, "S", 9, 1, None);
    h.settle(WORK_QUEUE, "S", 9, 1, Settle::Ack, Some(Answer::Ok));
    h.deliver(WORK_QUEUE, "S", 12, 1, None);
    h.settle(WORK_QUEUE, "S", 12, 1, Settle::Ack, Some(Answer::Ok));
    let f = h.check();
    assert_eq!(f.dedup_violations, 1, "{:#?}", f.violations);
    assert_eq!(f.acked_twice, 1);
}

#[test]
fn a_delivery_handed_out_from_a_dead_stream_is_left_out_of_the_order_check() {
    let mut h = clean_history();
    h.publish(ORDERS_QUEUE, "J0", Some(("j", 0)), Fate::Ack);
    h.publish(ORDERS_QUEUE, "J1", Some(("j", 1)), Fate::Ack);
    // J0's first delivery sat in a consumer's buffer while the server restarted; the
    // broker delivered it again, and J1 after it, to another consumer.
    h.deliver(ORDERS_QUEUE, "J0", 10, 2, Some(("j", 0)));
    h.settle(ORDERS_QUEUE, "J0", 10, 2, Settle::Ack, Some(Answer::Ok));
    h.deliver(ORDERS_QUEUE, "J1", 11, 1, Some(("j", 1)));
    h.settle(ORDERS_QUEUE, "J1", 11, 1, Settle::Ack, Some(Answer::Ok));
    // Then the first consumer's application took the stale one: its ack says so.
    h.deliver(ORDERS_QUEUE, "J0", 10, 1, Some(("j", 0)));
    let t = h.tick();
    h.events.push(Event::Settling {
        t,
        queue: ORDERS_QUEUE.into(),
        id: "J0".into(),
        seq: 10,
        attempt: 1,
        op: Settle::Ack,
    });
    let t = h.tick();
    h.events.push(Event::Settled {
        t,
        queue: ORDERS_QUEUE.into(),
        id: "J0".into(),
        seq: 10,
        attempt: 1,
        op: Settle::Ack,
        answer: Answer::Refused,
        error: Some(
            "the connection was lost after this delivery; the server gave it back to the queue"
                .into(),
        ),
    });
    let f = h.check();
    assert!(f.clean(), "{:#?}", f.violations);
    assert_eq!(f.stale_handed_out, 1);
    // The same late delivery whose ack failed for another reason is a violation.
    let last = h.events.len() - 1;
    if let Event::Settled { error, .. } = &mut h.events[last] {
        *error = Some("the lease ended".into());
    }
    assert_eq!(h.check().order_violations, 1);
}

#[test]
fn a_max_deliveries_dead_letter_is_explained_by_a_delivery_dropped_with_a_failed_stream() {
    let mut h = clean_history();
    h.publish(WORK_QUEUE, "Q", None, Fate::Poison);
    for attempt in 1..=2 {
        h.deliver(WORK_QUEUE, "Q", 9, attempt, None);
        h.settle(WORK_QUEUE, "Q", 9, attempt, Settle::Nack, Some(Answer::Ok));
    }
    // The third reached the consumer on a stream that failed before it was handed out.
    h.dropped(WORK_QUEUE, "Q", 9, 3);
    h.dead_letter(WORK_QUEUE, "Q", 9, "max_deliveries", 3);
    let f = h.check();
    assert!(f.clean(), "{:#?}", f.violations);
    assert_eq!(f.dropped_on_stream_failure, 1);
    assert_eq!(f.dead_letters_explained_by_faults, 0);
}

#[test]
fn trailing_unseen_attempts_are_explained_by_as_many_faults_that_end_streams() {
    let mut h = clean_history();
    h.publish(WORK_QUEUE, "Q", None, Fate::Poison);
    h.deliver(WORK_QUEUE, "Q", 9, 1, None);
    h.settle(WORK_QUEUE, "Q", 9, 1, Settle::Nack, Some(Answer::Ok));
    // Attempts 2 and 3 were each cut in transit, by two distinct faults; a pause and a
    // delay end no stream and explain nothing, but do not spoil the count either.
    h.fault("pause", "SIGSTOP for 5000 ms");
    h.fault("proxy", "reset_all connections (RST)");
    h.fault("proxy", "delay 50 ms per chunk for 1000 ms");
    h.fault("server_kill", "SIGKILL, restart");
    h.dead_letter_failed_now(WORK_QUEUE, "Q", 9, 3);
    let f = h.check();
    assert!(f.clean(), "{:#?}", f.violations);
    assert_eq!(f.dead_letters_explained_by_faults, 1);
}

#[test]
fn more_trailing_unseen_attempts_than_faults_are_a_mismatch() {
    let mut h = clean_history();
    h.publish(WORK_QUEUE, "Q", None, Fate::Poison);
    h.deliver(WORK_QUEUE, "Q", 9, 1, None);
    h.settle(WORK_QUEUE, "Q", 9, 1, Settle::Nack, Some(Answer::Ok));
    // One fault explains one attempt of a message, not two; a pause explains none.
    h.fault("consumer_kill", "consumer 0: SIGKILL, restart");
    h.fault("pause", "SIGSTOP for 5000 ms");
    h.dead_letter_failed_now(WORK_QUEUE, "Q", 9, 3);
    let f = h.check();
    assert_eq!(f.dead_letter_mismatches, 1, "{:#?}", f.violations);
    assert!(
        f.violations
            .iter()
            .any(|v| v.contains("its last failure: 1, for 2 attempts")),
        "{:#?}",
        f.violations
    );
    assert_eq!(f.lost, 1, "{:#?}", f.violations);
    assert_eq!(f.dead_letters_explained_by_faults, 0);
}

#[test]
fn faults_outside_a_messages_window_explain_none_of_its_attempts() {
    let mut h = clean_history();
    // Faults before the message's last recorded event cut none of its later attempts.
    h.fault("proxy", "drop_all connections (FIN)");
    h.fault("server_kill", "SIGKILL, restart");
    h.publish(WORK_QUEUE, "Q", None, Fate::Poison);
    h.deliver(WORK_QUEUE, "Q", 9, 1, None);
    h.settle(WORK_QUEUE, "Q", 9, 1, Settle::Nack, Some(Answer::Ok));
    h.dead_letter_failed_now(WORK_QUEUE, "Q", 9, 3);
    // Faults after its last failure came too late.
    h.fault("proxy", "reset_all connections (RST)");
    h.fault("consumer_kill", "consumer 1: SIGKILL, restart");
    let f = h.check();
    assert_eq!(f.dead_letter_mismatches, 1, "{:#?}", f.violations);
    assert_eq!(f.lost, 1, "{:#?}", f.violations);
    // A letter with no last failure time cannot be placed against any fault.
    let mut h = clean_history();
    h.publish(WORK_QUEUE, "Q", None, Fate::Poison);
    h.deliver(WORK_QUEUE, "Q", 9, 1, None);
    h.fault("server_kill", "SIGKILL, restart");
    h.fault("server_kill", "SIGKILL, restart");
    h.dead_letter(WORK_QUEUE, "Q", 9, "max_deliveries", 3);
    let f = h.check();
    assert_eq!(f.dead_letter_mismatches, 1, "{:#?}", f.violations);
}
