//! Key-shared ordering: which of the messages the delivery engine holds in memory may be
//! delivered now, so that messages with the same key go out one at a time in publish order
//! while different keys go out in parallel.
//!
//! [`KeyOrder`] is pure bookkeeping over log offsets: no clock, no I/O, no payloads. It covers
//! the engine's in-memory window of a queue; what survives a restart (parked keys, in-flight
//! leases) lives in the engine's persisted state, which rebuilds this index on open by
//! parking the parked keys and admitting the window in offset order.
//!
//! **What "Ready" means here.** Ready says only that a message is not blocked by its key. The
//! engine keeps its own ready set and still applies delays, retry backoff and priorities to
//! it; this index tells it, through return values, exactly when an offset enters or leaves
//! that set:
//!
//! | call                         | enters the ready set          | leaves it              |
//! |------------------------------|-------------------------------|------------------------|
//! | [`admit`]                    | the offset, if `Ready`        |                        |
//! | [`delivered`]                |                               | the offset             |
//! | [`settled`] / [`remove`]     | the returned successor        | the offset, if Ready   |
//! | [`requeued`]                 | the offset, if `true`         |                        |
//! | [`park`]                     |                               | the returned head      |
//! | [`unpark`]                   | the returned head             |                        |
//!
//! **States of a keyed message** ([`KeyedState`]). Each key keeps its messages in offset
//! order; the first is the key's *head*. The head is `InFlight` after [`delivered`] until
//! [`settled`], [`requeued`] or [`remove`]; otherwise it is `Held` if the key is parked and
//! `Ready` if not. Every message behind the head is `Waiting` (`Held` if the key is parked).
//! So a key has at most one message in flight and at most one Ready, and never both.
//!
//! Keyless messages are never blocked: [`admit`] answers `Ready` and does not track them, and
//! every other call treats their offsets as not tracked.
//!
//! [`admit`]: KeyOrder::admit
//! [`delivered`]: KeyOrder::delivered
//! [`settled`]: KeyOrder::settled
//! [`requeued`]: KeyOrder::requeued
//! [`remove`]: KeyOrder::remove
//! [`park`]: KeyOrder::park
//! [`unpark`]: KeyOrder::unpark

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// What [`KeyOrder::admit`] decided for a newly loaded message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Not blocked by its key: the engine may deliver it (subject to its own timers).
    Ready,
    /// Behind its key's head, or its key is parked: a later call returns the offset when it
    /// becomes Ready.
    Waiting,
}

/// Where a tracked keyed message stands; see the module docs for the transitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyedState {
    /// Its key's head, not in flight, key not parked: deliverable now.
    Ready,
    /// Its key's head, delivered and not yet settled or requeued.
    InFlight,
    /// Behind its key's head, key not parked.
    Waiting,
    /// Not in flight and its key is parked: kept, counted, and not deliverable until unparked.
    Held,
}

/// Per-key ordering state for a queue's in-memory window; see the module docs.
///
/// **Memory.** Each key's bytes are stored once, in one `Arc<[u8]>` shared by the key index
/// and the key's state; offsets refer to their key by slot number, not by a copy of the key.
/// Per keyed message: 8 B in its key's `VecDeque` (which grows by doubling, so up to 16 B)
/// plus a 16 B + 1 control byte slot in the offset index (hash tables sit 44–87 % full), about
/// **26–55 B per message**. Per key: the `Arc` allocation (16 B of counts + the key's length
/// `L`), a 24 B + 1 control byte slot in the key index, a 56 B slot in the slot vector and a
/// first `VecDeque` buffer of 32 B, about **130–160 B + `L` per key**. These are estimates
/// from the layout (pinned by a test), not measurements. Keyless messages cost nothing.
///
/// **Cost.** Every call is O(1) expected, except [`remove`](KeyOrder::remove) or
/// [`settled`](KeyOrder::settled) of a message that is not its key's head, which is
/// O(log m + m) for a key with m messages in the window (a binary search, then a shift).
/// Expiry and overflow remove heads in the common case, since the oldest message of a key is
/// its head.
#[derive(Debug, Default)]
pub struct KeyOrder {
    /// Key → its slot in `slots`.
    slot_of_key: HashMap<Arc<[u8]>, usize>,
    /// Key states by slot; `None` for a free slot. A key with no messages and not parked
    /// gives its slot back, so the vector is bounded by the most keys live at once.
    slots: Vec<Option<KeyState>>,
    free_slots: Vec<usize>,
    /// Keyed offset → its key's slot.
    slot_of_offset: HashMap<u64, usize>,
}

#[derive(Debug)]
struct KeyState {
    key: Arc<[u8]>,
    /// This key's messages in the window, in offset order; the front is the head.
    offsets: VecDeque<u64>,
    /// Whether the head is in flight. Only the head is ever delivered, so this one flag is
    /// the "at most one in flight per key" invariant.
    in_flight: bool,
    parked: bool,
}

impl KeyState {
    fn ready_head(&self) -> Option<u64> {
        if self.in_flight || self.parked {
            None
        } else {
            self.offsets.front().copied()
        }
    }

    /// Messages of this key that are not in flight: what a parked key holds.
    fn held(&self) -> usize {
        self.offsets.len() - usize::from(self.in_flight)
    }

    fn state_of(&self, offset: u64) -> KeyedState {
        let is_head = self.offsets.front() == Some(&offset);
        match (is_head, self.in_flight, self.parked) {
            (true, true, _) => KeyedState::InFlight,
            (_, _, true) => KeyedState::Held,
            (true, false, false) => KeyedState::Ready,
            (false, _, false) => KeyedState::Waiting,
        }
    }
}

impl KeyOrder {
    pub fn new() -> KeyOrder {
        KeyOrder::default()
    }

    /// Tracks a message newly loaded into the window.
    ///
    /// A keyless message (`key == None`) is always `Ready` and is not tracked. A keyed
    /// message joins the back of its key's line: it is `Ready` only if the key had no message
    /// in the window (so none in flight and none waiting) and is not parked; otherwise it is
    /// `Waiting` and a later call returns it when it becomes Ready.
    ///
    /// The caller admits a key's messages in increasing offset order (the log's order) and
    /// each offset once; both are checked in debug builds. In release builds an offset already
    /// tracked is left as it is (answering `Ready` only if it is Ready), and an out-of-order
    /// offset is still queued last.
    pub fn admit(&mut self, offset: u64, key: Option<&[u8]>) -> Admission {
        let Some(key) = key else {
            return Admission::Ready;
        };
        debug_assert!(
            self.state(offset).is_none(),
            "offset {offset} admitted twice"
        );
        if let Some(state) = self.state(offset) {
            return match state {
                KeyedState::Ready => Admission::Ready,
                _ => Admission::Waiting,
            };
        }
        let slot = self.slot_for(key);
        let state = self.slots[slot]
            .as_mut()
            .expect("slot_for returns a live slot");
        debug_assert!(
            state.offsets.back().is_none_or(|&last| last < offset),
            "offset {offset} admitted after a later offset of the same key"
        );
        state.offsets.push_back(offset);
        self.slot_of_offset.insert(offset, slot);
        if state.ready_head() == Some(offset) {
            Admission::Ready
        } else {
            Admission::Waiting
        }
    }

    /// The engine handed `offset` to a consumer: its key's head goes in flight, and the key
    /// has nothing Ready until it is settled, requeued or removed.
    ///
    /// Returns `false` and changes nothing if `offset` is not Ready: not tracked (keyless or
    /// unknown), waiting, held, or already in flight.
    pub fn delivered(&mut self, offset: u64) -> bool {
        let Some(state) = self.key_state_mut(offset) else {
            return false;
        };
        if state.ready_head() != Some(offset) {
            return false;
        }
        state.in_flight = true;
        true
    }

    /// The delivery of `offset` ended for good — acked, rejected or dead-lettered — so it
    /// leaves the window and its key is released. Returns the key's next message if it is now
    /// Ready: there is one and the key is not parked (a parked key's next message is Held).
    ///
    /// Same effect as [`remove`](KeyOrder::remove), named for the outcome; a late ack for a
    /// message whose lease already ended, if the engine accepts it, settles it just the same.
    /// `None` also when `offset` is not tracked.
    #[cfg(test)]
    pub fn settled(&mut self, offset: u64) -> Option<u64> {
        self.leave(offset)
    }

    /// The in-flight head `offset` failed (nack or lease expiry) and will be delivered again:
    /// it stays its key's head, in front of its successors, which keep waiting — order holds
    /// across retries. Returns `true` if it is Ready again, `false` if its key is parked (it
    /// is Held until unparked).
    ///
    /// Returns `false` and changes nothing if `offset` is not in flight.
    pub fn requeued(&mut self, offset: u64) -> bool {
        let Some(state) = self.key_state_mut(offset) else {
            return false;
        };
        if !(state.in_flight && state.offsets.front() == Some(&offset)) {
            return false;
        }
        state.in_flight = false;
        !state.parked
    }

    /// Drops `offset` from the window without a delivery outcome (TTL expiry, `drop_head`
    /// overflow, a cancelled scheduled message). If it was its key's head — Ready, Held or
    /// even in flight, whose delivery is then abandoned — the key's next message becomes the
    /// head and is returned if it is Ready. A message behind the head leaves the line without
    /// changing anything else. `None` also when `offset` is not tracked.
    pub fn remove(&mut self, offset: u64) -> Option<u64> {
        self.leave(offset)
    }

    /// Holds `key`: from now on none of its messages is Ready — the head, once its current
    /// delivery (if any) is settled or requeued, and every message behind it stay Held, in
    /// order and counted in [`parked_keys`](KeyOrder::parked_keys). Other keys are not
    /// affected. A key with no messages can be parked; its messages are held as they arrive.
    ///
    /// Returns the head if it was Ready until now, which the engine withdraws from its ready
    /// set. An in-flight delivery is not recalled. Parking a parked key changes nothing.
    pub fn park(&mut self, key: &[u8]) -> Option<u64> {
        let slot = self.slot_for(key);
        let state = self.slots[slot]
            .as_mut()
            .expect("slot_for returns a live slot");
        let withdrawn = state.ready_head();
        state.parked = true;
        withdrawn
    }

    /// Releases a parked `key`: returns its head if that is now Ready (the key has a message
    /// and none in flight). Its other messages keep waiting behind the head as usual.
    /// Unparking a key that is not parked changes nothing and returns `None`.
    pub fn unpark(&mut self, key: &[u8]) -> Option<u64> {
        let slot = *self.slot_of_key.get(key)?;
        let state = self.slots[slot].as_mut().expect("indexed slots are live");
        if !state.parked {
            return None;
        }
        state.parked = false;
        let ready = state.ready_head();
        self.free_if_idle(slot);
        ready
    }

    #[cfg(test)]
    pub fn is_parked(&self, key: &[u8]) -> bool {
        self.slot_of_key
            .get(key)
            .is_some_and(|&slot| self.slot(slot).parked)
    }

    /// Parked keys with how many of their messages they hold (those not in flight), for
    /// stats. In no particular order.
    pub fn parked_keys(&self) -> impl Iterator<Item = (&[u8], usize)> + '_ {
        self.slots
            .iter()
            .flatten()
            .filter(|state| state.parked)
            .map(|state| (&*state.key, state.held()))
    }

    /// Where a tracked keyed message stands; `None` for keyless or unknown offsets.
    pub fn state(&self, offset: u64) -> Option<KeyedState> {
        let &slot = self.slot_of_offset.get(&offset)?;
        Some(self.slot(slot).state_of(offset))
    }

    /// Keys with messages in the window or parked, in no particular order.
    #[cfg(test)]
    pub fn keys(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.slot_of_key.keys().map(|key| &**key)
    }

    /// How many keys are tracked: those with messages in the window, and parked ones.
    #[cfg(test)]
    pub fn key_count(&self) -> usize {
        self.slot_of_key.len()
    }

    /// How many keyed messages are tracked (keyless ones never are).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.slot_of_offset.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.slot_of_offset.is_empty()
    }

    fn slot(&self, slot: usize) -> &KeyState {
        self.slots[slot].as_ref().expect("indexed slots are live")
    }

    fn key_state_mut(&mut self, offset: u64) -> Option<&mut KeyState> {
        let &slot = self.slot_of_offset.get(&offset)?;
        Some(self.slots[slot].as_mut().expect("indexed slots are live"))
    }

    /// The slot of `key`, creating an empty state for it if it has none.
    fn slot_for(&mut self, key: &[u8]) -> usize {
        if let Some(&slot) = self.slot_of_key.get(key) {
            return slot;
        }
        let key: Arc<[u8]> = Arc::from(key);
        let state = KeyState {
            key: Arc::clone(&key),
            offsets: VecDeque::new(),
            in_flight: false,
            parked: false,
        };
        let slot = match self.free_slots.pop() {
            Some(slot) => {
                self.slots[slot] = Some(state);
                slot
            }
            None => {
                self.slots.push(Some(state));
                self.slots.len() - 1
            }
        };
        self.slot_of_key.insert(key, slot);
        slot
    }

    /// Forgets a key with no messages that is not parked, so idle keys cost nothing.
    fn free_if_idle(&mut self, slot: usize) {
        let state = self.slot(slot);
        if state.offsets.is_empty() && !state.parked {
            let state = self.slots[slot].take().expect("indexed slots are live");
            self.slot_of_key.remove(&state.key);
            self.free_slots.push(slot);
        }
    }

    fn leave(&mut self, offset: u64) -> Option<u64> {
        let slot = self.slot_of_offset.remove(&offset)?;
        let state = self.slots[slot].as_mut().expect("indexed slots are live");
        if state.offsets.front() == Some(&offset) {
            state.offsets.pop_front();
            state.in_flight = false;
            let next = state.ready_head();
            self.free_if_idle(slot);
            next
        } else {
            // Behind the head: the head, and so what is Ready, does not change. Offsets are
            // sorted when admitted in order; the linear fallback only covers a caller that
            // broke that contract in a release build.
            let at = match state.offsets.binary_search(&offset) {
                Ok(at) => Some(at),
                Err(_) => state.offsets.iter().position(|&o| o == offset),
            };
            if let Some(at) = at {
                state.offsets.remove(at);
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
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
            assert!(order.requeued(1));
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
        assert!(order.requeued(1));
        assert_eq!(order.state(1), Some(KeyedState::Ready));
        assert_eq!(order.state(2), Some(KeyedState::Waiting));
        assert!(!order.delivered(2));
        assert!(!order.requeued(1), "only an in-flight head can be requeued");
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
            !order.requeued(2),
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
                        let key = model.messages.iter().find(|m| m.0 == offset).unwrap().1;
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
                        let now_ready = order.requeued(offset);
                        model.set_in_flight(offset, false);
                        prop_assert_eq!(now_ready, model.ready().contains(&offset));
                        if now_ready {
                            ready.insert(offset);
                        }
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
                        // At most one in flight per key.
                        prop_assert!(in_flight_keys.insert(key));
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

            // Per key, deliveries follow publish order: retries repeat an offset, never go back.
            for offsets in delivered.values() {
                prop_assert!(offsets.is_sorted(), "{:?}", offsets);
            }
        }
    }
}
