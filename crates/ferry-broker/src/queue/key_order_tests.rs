use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

const A: &[u8] = b"order-1";
const B: &[u8] = b"order-2";

#[test]
fn keyless_messages_never_wait() {
    let mut order = KeyOrder::new();
    assert_eq!(order.admit(1, Some(A)), Admission::Ready);
    assert!(order.delivered(1));
    for offset in 2..5 {
        assert_eq!(order.admit(offset, None), Admission::Ready);
    }
    order.park(A);
    assert_eq!(order.admit(5, None), Admission::Ready);
    // Not tracked: nothing to deliver, settle or count.
    assert_eq!(order.state(2), None);
    assert!(!order.delivered(2));
    assert_eq!(order.settled(2), None);
    assert_eq!(order.len(), 1);
}

#[test]
fn same_key_messages_are_delivered_one_at_a_time_in_publish_order() {
    let mut order = KeyOrder::new();
    assert_eq!(order.admit(10, Some(A)), Admission::Ready);
    assert_eq!(order.admit(11, Some(A)), Admission::Waiting);
    assert_eq!(order.admit(12, Some(A)), Admission::Waiting);
    assert!(
        !order.delivered(11),
        "a waiting message cannot jump its key's line"
    );

    assert!(order.delivered(10));
    assert_eq!(order.state(10), Some(KeyedState::InFlight));
    assert!(!order.delivered(10), "already in flight");
    assert_eq!(order.settled(10), Some(11));
    assert!(order.delivered(11));
    assert_eq!(order.settled(11), Some(12));
    assert!(order.delivered(12));
    assert_eq!(order.settled(12), None);
    assert!(order.is_empty());
    assert_eq!(order.key_count(), 0, "an idle key is forgotten");
}

#[test]
fn different_keys_are_ready_in_parallel() {
    let mut order = KeyOrder::new();
    assert_eq!(order.admit(1, Some(A)), Admission::Ready);
    assert_eq!(order.admit(2, Some(B)), Admission::Ready);
    assert_eq!(order.admit(3, Some(A)), Admission::Waiting);
    assert!(order.delivered(1));
    assert!(order.delivered(2));
    assert_eq!(order.state(3), Some(KeyedState::Waiting));
    assert_eq!(order.key_count(), 2);
}

#[test]
fn dead_lettered_head_releases_the_next_message_of_its_key() {
    let mut order = KeyOrder::new();
    order.admit(1, Some(A));
    order.admit(2, Some(A));
    for _ in 0..3 {
        assert!(order.delivered(1));
        assert_eq!(order.requeued(1), Some(1));
    }
    assert!(order.delivered(1));
    // Max deliveries reached: the engine dead-letters the head.
    assert_eq!(order.settled(1), Some(2));
    assert_eq!(order.state(2), Some(KeyedState::Ready));
}

#[test]
fn requeued_head_keeps_its_successors_waiting() {
    let mut order = KeyOrder::new();
    order.admit(1, Some(A));
    order.admit(2, Some(A));
    assert!(order.delivered(1));
    assert_eq!(order.requeued(1), Some(1));
    assert_eq!(order.state(1), Some(KeyedState::Ready));
    assert_eq!(order.state(2), Some(KeyedState::Waiting));
    assert!(!order.delivered(2));
    assert_eq!(
        order.requeued(1),
        None,
        "only an in-flight head can be requeued"
    );
}

#[test]
fn a_late_message_older_than_a_ready_head_takes_the_head() {
    let mut order = KeyOrder::new();
    order.admit(2, Some(A));
    order.admit(4, Some(A));
    assert_eq!(order.admit_in_order(1, A), (Admission::Ready, Some(2)));
    assert_eq!(order.state(2), Some(KeyedState::Waiting));
    assert_eq!(order.admit_in_order(3, A), (Admission::Waiting, None));
    let mut drained = Vec::new();
    while let Some(head) = (1..=4).find(|&o| order.state(o) == Some(KeyedState::Ready)) {
        assert!(order.delivered(head));
        drained.push(head);
        order.settled(head);
    }
    assert_eq!(drained, [1, 2, 3, 4], "offset order");
}

#[test]
fn a_late_message_waits_behind_an_in_flight_head_and_goes_first_if_it_fails() {
    let mut order = KeyOrder::new();
    order.admit(5, Some(A));
    order.admit(6, Some(A));
    assert!(order.delivered(5));
    assert_eq!(order.admit_in_order(1, A), (Admission::Waiting, None));
    assert_eq!(order.state(5), Some(KeyedState::InFlight), "one at a time");
    assert_eq!(order.requeued(5), Some(1), "the older message goes first");
    assert_eq!(order.state(5), Some(KeyedState::Waiting));
    assert!(order.delivered(1));
    assert_eq!(order.settled(1), Some(5));
    assert!(order.delivered(5));
    assert_eq!(order.settled(5), Some(6));
}

#[test]
fn parked_key_holds_its_messages_without_blocking_other_keys() {
    let mut order = KeyOrder::new();
    order.admit(1, Some(A));
    order.admit(2, Some(A));
    assert_eq!(order.park(A), Some(1), "the Ready head is withdrawn");
    assert_eq!(order.park(A), None, "parking twice changes nothing");
    assert_eq!(order.state(1), Some(KeyedState::Held));
    assert!(!order.delivered(1));
    assert_eq!(order.admit(3, Some(A)), Admission::Waiting);
    assert_eq!(order.admit(4, Some(B)), Admission::Ready);
    assert!(order.delivered(4));
    assert_eq!(order.parked_keys().collect::<Vec<_>>(), [(A, 3)]);

    assert_eq!(order.unpark(A), Some(1));
    assert_eq!(order.unpark(A), None, "unparking twice changes nothing");
    assert_eq!(order.parked_keys().count(), 0);
    assert_eq!(order.state(2), Some(KeyedState::Waiting));
}

#[test]
fn parking_does_not_recall_a_delivery_but_holds_the_key_after_it() {
    let mut order = KeyOrder::new();
    order.admit(1, Some(A));
    order.admit(2, Some(A));
    order.admit(3, Some(A));
    assert!(order.delivered(1));
    assert_eq!(order.park(A), None, "nothing Ready to withdraw");
    assert_eq!(order.state(1), Some(KeyedState::InFlight));
    assert_eq!(order.parked_keys().collect::<Vec<_>>(), [(A, 2)]);
    assert_eq!(
        order.settled(1),
        None,
        "the next message is held, not released"
    );
    assert_eq!(order.state(2), Some(KeyedState::Held));

    assert_eq!(order.unpark(A), Some(2));
    assert!(order.delivered(2));
    order.park(A);
    assert!(
        order.requeued(2).is_none(),
        "a requeued head of a parked key is held"
    );
    assert_eq!(order.state(2), Some(KeyedState::Held));
    assert_eq!(order.parked_keys().collect::<Vec<_>>(), [(A, 2)]);
}

#[test]
fn a_key_parked_before_its_messages_arrive_holds_them() {
    let mut order = KeyOrder::new();
    assert_eq!(order.park(A), None);
    assert!(order.is_parked(A));
    assert_eq!(
        order.key_count(),
        1,
        "a parked key is remembered with no messages"
    );
    assert_eq!(order.admit(1, Some(A)), Admission::Waiting);
    assert_eq!(order.remove(1), None);
    assert_eq!(order.parked_keys().collect::<Vec<_>>(), [(A, 0)]);
    assert_eq!(order.unpark(A), None);
    assert_eq!(order.key_count(), 0);
    assert!(!order.is_parked(A));
}

#[test]
fn removed_head_releases_the_next_message_and_removed_successor_changes_nothing() {
    let mut order = KeyOrder::new();
    for offset in 1..=4 {
        order.admit(offset, Some(A));
    }
    assert_eq!(order.remove(3), None, "behind the head");
    assert_eq!(order.state(1), Some(KeyedState::Ready));
    assert_eq!(order.remove(1), Some(2), "TTL expiry of the head");
    assert!(order.delivered(2));
    assert_eq!(
        order.remove(2),
        Some(4),
        "an abandoned delivery releases the key"
    );
    assert_eq!(order.remove(2), None, "no longer tracked");
    assert_eq!(order.len(), 1);
}

#[test]
fn a_run_takes_the_next_messages_of_a_key_and_holds_it_until_all_are_settled() {
    let mut order = KeyOrder::new();
    for offset in 1..=4 {
        order.admit(offset, Some(A));
    }
    assert_eq!(order.follower(1), None, "not in flight: no run to extend");
    assert!(order.delivered(1));
    assert_eq!(order.follower(1), Some(2));
    assert!(
        !order.delivered_follower(3),
        "a run cannot skip a message of its key"
    );
    assert!(order.delivered_follower(2));
    assert_eq!(order.follower(2), Some(3));
    assert!(order.delivered_follower(3));
    assert_eq!(order.state(3), Some(KeyedState::InFlight));
    assert_eq!(order.state(4), Some(KeyedState::Waiting));
    // Settled out of order or not, the key stays held while any of the run is out.
    assert_eq!(order.settled(2), None);
    assert_eq!(order.settled(1), None);
    assert_eq!(order.state(4), Some(KeyedState::Waiting));
    assert_eq!(order.settled(3), Some(4));
    assert_eq!(order.state(4), Some(KeyedState::Ready));
}

#[test]
fn a_failed_message_of_a_run_goes_again_first_once_the_whole_run_is_back() {
    let mut order = KeyOrder::new();
    for offset in 1..=4 {
        order.admit(offset, Some(A));
    }
    assert!(order.delivered(1));
    assert!(order.delivered_follower(2));
    assert!(order.delivered_follower(3));
    // 1 fails while 2 and 3 are out: it waits, and so does everything of its key.
    assert_eq!(order.requeued(1), None);
    assert_eq!(order.state(1), Some(KeyedState::Waiting));
    assert_eq!(order.follower(2), Some(1), "the oldest waiting message");
    // 3 fails too, then 2 is settled: the key is released, 1 first, 3 behind it.
    assert_eq!(order.requeued(3), None);
    assert_eq!(order.settled(2), Some(1));
    assert!(order.delivered(1));
    assert_eq!(order.follower(1), Some(3));
    assert!(order.delivered_follower(3));
    assert_eq!(order.follower(3), Some(4));
}

#[test]
fn a_run_stops_at_a_parked_key() {
    let mut order = KeyOrder::new();
    order.admit(1, Some(A));
    order.admit(2, Some(A));
    assert!(order.delivered(1));
    order.park(A);
    assert_eq!(order.follower(1), None);
    assert!(!order.delivered_follower(2));
    assert_eq!(order.settled(1), None, "parked: the next one is Held");
    assert_eq!(order.state(2), Some(KeyedState::Held));
}

#[test]
fn layout_per_key_and_per_message_stays_as_documented() {
    // The memory figures in `KeyOrder`'s docs assume these sizes.
    assert_eq!(size_of::<Option<KeyState>>(), 56);
    assert_eq!(size_of::<(Arc<[u8]>, usize)>(), 24);
    assert_eq!(size_of::<(u64, usize)>(), 16);
}

#[derive(Debug, Clone)]
enum Op {
    Admit(Option<u8>),
    Deliver(usize),
    DeliverFollower(usize),
    Settle(usize),
    Requeue(usize),
    Remove(usize),
    Park(u8),
    Unpark(u8),
}

const KEYS: u8 = 4;

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => prop::option::weighted(0.9, 0..KEYS).prop_map(Op::Admit),
        5 => any::<usize>().prop_map(Op::Deliver),
        3 => any::<usize>().prop_map(Op::DeliverFollower),
        3 => any::<usize>().prop_map(Op::Settle),
        2 => any::<usize>().prop_map(Op::Requeue),
        2 => any::<usize>().prop_map(Op::Remove),
        1 => (0..KEYS).prop_map(Op::Park),
        1 => (0..KEYS).prop_map(Op::Unpark),
    ]
}

/// The reference: tracked keyed messages in offset order as (offset, key, in flight), and
/// the parked keys. Readiness is recomputed from scratch: a message is Ready if it is its
/// key's earliest, no message of its key is in flight, and its key is not parked.
#[derive(Default)]
struct Model {
    messages: Vec<(u64, u8, bool)>,
    parked: BTreeSet<u8>,
}

impl Model {
    fn ready(&self) -> BTreeSet<u64> {
        let mut seen = BTreeSet::new();
        let mut ready = BTreeSet::new();
        for &(offset, key, _) in &self.messages {
            if seen.insert(key)
                && !self.parked.contains(&key)
                && !self.messages.iter().any(|&(_, k, f)| k == key && f)
            {
                ready.insert(offset);
            }
        }
        ready
    }

    fn in_flight(&self) -> Vec<u64> {
        self.messages.iter().filter(|m| m.2).map(|m| m.0).collect()
    }

    fn set_in_flight(&mut self, offset: u64, in_flight: bool) {
        self.messages.iter_mut().find(|m| m.0 == offset).unwrap().2 = in_flight;
    }

    fn key_of(&self, offset: u64) -> u8 {
        self.messages.iter().find(|m| m.0 == offset).unwrap().1
    }

    /// What a run extends with behind a message of `key` in flight: the key's oldest
    /// message not in flight, unless the key is parked.
    fn follower(&self, key: u8) -> Option<u64> {
        if self.parked.contains(&key) {
            return None;
        }
        self.messages
            .iter()
            .find(|&&(_, k, f)| k == key && !f)
            .map(|m| m.0)
    }

    /// Order within a key: no message of `offset`'s key older than it waits undelivered.
    fn nothing_older_waits(&self, offset: u64) -> bool {
        let key = self.key_of(offset);
        !self
            .messages
            .iter()
            .any(|&(o, k, f)| k == key && !f && o < offset)
    }

    fn held(&self, key: u8) -> usize {
        self.messages
            .iter()
            .filter(|&&(_, k, f)| k == key && !f)
            .count()
    }
}

fn pick(from: &[u64], index: usize) -> Option<u64> {
    (!from.is_empty()).then(|| from[index % from.len()])
}

/// What a call's return value says entered the engine's ready set, as a set.
fn entered(offset: Option<u64>) -> BTreeSet<u64> {
    offset.into_iter().collect()
}

proptest! {
    #[test]
    fn key_order_matches_a_list_model(ops in prop::collection::vec(op(), 1..300)) {
        let mut order = KeyOrder::new();
        let mut model = Model::default();
        // The engine's view: the ready set as built from return values alone.
        let mut ready: BTreeSet<u64> = BTreeSet::new();
        let mut delivered: BTreeMap<u8, Vec<u64>> = BTreeMap::new();
        let mut next_offset = 0u64;
        // Whether a run has taken a follower: until then a key has at most one in flight.
        let mut ran = false;

        for op in ops {
            let before = model.ready();
            match op {
                Op::Admit(key) => {
                    next_offset += 1;
                    let offset = next_offset;
                    let key_bytes = key.map(|k| [k]);
                    let admission = order.admit(offset, key_bytes.as_ref().map(|k| &k[..]));
                    let Some(key) = key else {
                        prop_assert_eq!(admission, Admission::Ready);
                        continue;
                    };
                    model.messages.push((offset, key, false));
                    let now_ready = model.ready().contains(&offset);
                    let expected =
                        if now_ready { Admission::Ready } else { Admission::Waiting };
                    prop_assert_eq!(admission, expected);
                    if admission == Admission::Ready {
                        ready.insert(offset);
                    }
                }
                Op::Deliver(i) => {
                    let Some(offset) = pick(&ready.iter().copied().collect::<Vec<_>>(), i)
                    else { continue };
                    prop_assert!(order.delivered(offset));
                    ready.remove(&offset);
                    prop_assert!(model.nothing_older_waits(offset));
                    model.set_in_flight(offset, true);
                    delivered.entry(model.key_of(offset)).or_default().push(offset);
                }
                Op::DeliverFollower(i) => {
                    let Some(behind) = pick(&model.in_flight(), i) else { continue };
                    let key = model.key_of(behind);
                    let follower = order.follower(behind);
                    prop_assert_eq!(follower, model.follower(key));
                    let Some(offset) = follower else { continue };
                    prop_assert!(order.delivered_follower(offset));
                    ran = true;
                    prop_assert!(model.nothing_older_waits(offset));
                    model.set_in_flight(offset, true);
                    delivered.entry(key).or_default().push(offset);
                }
                Op::Settle(i) | Op::Remove(i) => {
                    let (offset, outcome) = if let Op::Settle(_) = op {
                        let Some(offset) = pick(&model.in_flight(), i) else { continue };
                        (offset, order.settled(offset))
                    } else {
                        let all: Vec<u64> = model.messages.iter().map(|m| m.0).collect();
                        let Some(offset) = pick(&all, i) else { continue };
                        (offset, order.remove(offset))
                    };
                    model.messages.retain(|m| m.0 != offset);
                    ready.remove(&offset);
                    let mut expected = model.ready();
                    expected.retain(|o| !before.contains(o));
                    prop_assert_eq!(entered(outcome), expected);
                    ready.extend(outcome);
                }
                Op::Requeue(i) => {
                    let Some(offset) = pick(&model.in_flight(), i) else { continue };
                    // The returned head is the offset itself, or (with a run out) the key's
                    // oldest message once the last of the run is back.
                    let head = order.requeued(offset);
                    model.set_in_flight(offset, false);
                    let expected: BTreeSet<u64> =
                        model.ready().difference(&before).copied().collect();
                    prop_assert_eq!(entered(head), expected);
                    ready.extend(head);
                }
                Op::Park(key) => {
                    let withdrawn = order.park(&[key]);
                    model.parked.insert(key);
                    let expected: BTreeSet<u64> =
                        before.difference(&model.ready()).copied().collect();
                    prop_assert_eq!(entered(withdrawn), expected);
                    if let Some(offset) = withdrawn {
                        ready.remove(&offset);
                    }
                }
                Op::Unpark(key) => {
                    let released = order.unpark(&[key]);
                    model.parked.remove(&key);
                    let expected: BTreeSet<u64> =
                        model.ready().difference(&before).copied().collect();
                    prop_assert_eq!(entered(released), expected);
                    ready.extend(released);
                }
            }

            // The ready set the engine built from return values is the model's.
            prop_assert_eq!(&ready, &model.ready());
            prop_assert_eq!(order.len(), model.messages.len());
            let mut in_flight_keys = BTreeSet::new();
            for &(offset, key, in_flight) in &model.messages {
                let state = order.state(offset);
                if in_flight {
                    prop_assert_eq!(state, Some(KeyedState::InFlight));
                    // Without runs, at most one in flight per key.
                    prop_assert!(in_flight_keys.insert(key) || ran);
                } else if ready.contains(&offset) {
                    prop_assert_eq!(state, Some(KeyedState::Ready));
                } else if model.parked.contains(&key) {
                    prop_assert_eq!(state, Some(KeyedState::Held));
                } else {
                    prop_assert_eq!(state, Some(KeyedState::Waiting));
                }
            }
            let parked: BTreeMap<u8, usize> =
                order.parked_keys().map(|(k, held)| (k[0], held)).collect();
            let expected: BTreeMap<u8, usize> =
                model.parked.iter().map(|&k| (k, model.held(k))).collect();
            prop_assert_eq!(parked, expected);
            let keys: BTreeSet<u8> = order.keys().map(|k| k[0]).collect();
            let expected: BTreeSet<u8> = model
                .messages
                .iter()
                .map(|m| m.1)
                .chain(model.parked.iter().copied())
                .collect();
            prop_assert_eq!(keys.len(), order.key_count());
            prop_assert_eq!(keys, expected);
        }

        // Per key, without runs deliveries follow publish order: retries repeat an offset,
        // never go back. (With runs a retry follows later messages already out; the
        // per-delivery check above is the order rule then.)
        for offsets in delivered.values() {
            prop_assert!(ran || offsets.is_sorted(), "{:?}", offsets);
        }
    }
}
