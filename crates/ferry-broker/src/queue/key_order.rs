//! Key-shared ordering: which of the messages the delivery engine holds in memory may be
//! delivered now, so that messages with the same key go out in publish order, one at a time
//! (or one run at a time, see below), while different keys go out in parallel.
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
//! | [`delivered_follower`]       |                               |                        |
//! | [`settled`] / [`remove`]     | the returned successor        | the offset, if Ready   |
//! | [`admit_in_order`]           | the offset, if `Ready`        | the returned old head  |
//! | [`requeued`]                 | the returned head             |                        |
//! | [`park`]                     |                               | the returned head      |
//! | [`unpark`]                   | the returned head             |                        |
//!
//! **States of a keyed message** ([`KeyedState`]). Each key keeps its messages in a line;
//! the first is the key's *head*. The head is `InFlight` after [`delivered`] until
//! [`settled`], [`requeued`] or [`remove`]; otherwise it is `Held` if the key is parked and
//! `Ready` if not. Every message behind the head is `Waiting` (`Held` if the key is parked).
//! So a key has at most one message Ready, and only while none of its messages is in flight.
//!
//! **Runs.** A receive that asks for it may take, right behind a head it delivers, the key's
//! next messages too ([`follower`], [`delivered_follower`]): a run of consecutive messages
//! of one key, in order, all in flight at once. The in-flight messages are the front of the
//! line (in the order they went out), the others wait behind them in offset order. The key
//! stays held while any of its messages is in flight: nothing of it is Ready until every
//! message of the run is settled or requeued. A requeued message (nack, lease expiry) leaves
//! the in-flight front and waits at its offset's place among the others; when the key is
//! released its oldest message goes first. So a message that failed is delivered again
//! before anything published after it, even a later message of its run that failed after
//! it — and it waits for the rest of its run, as SQS holds a message group while any of its
//! messages is in flight. Without runs a key has at most one message in flight.
//!
//! **Offset order.** A key's line is in offset order: [`admit`] appends (offsets arrive in
//! increasing order), and [`admit_in_order`] puts a message that joins late — an exclusive
//! queue's delayed message, once its delay ends — at its offset's place. The one exception
//! is the in-flight front, which a late message never overtakes: it goes right behind it,
//! and if a delivery fails, [`requeued`] puts that message back at its own place, so the
//! oldest message goes next.
//!
//! Keyless messages are never blocked: [`admit`] answers `Ready` and does not track them, and
//! every other call treats their offsets as not tracked.
//!
//! [`admit`]: KeyOrder::admit
//! [`delivered`]: KeyOrder::delivered
//! [`delivered_follower`]: KeyOrder::delivered_follower
//! [`follower`]: KeyOrder::follower
//! [`settled`]: KeyOrder::settled
//! [`admit_in_order`]: KeyOrder::admit_in_order
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
    /// Behind its key's head, or its key is parked or has a message in flight: a later call
    /// returns the offset when it becomes Ready.
    Waiting,
}

/// How many messages of one key a receive on a key-shared (or exclusive) queue may take.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PerKey {
    /// One: a key has at most one message in flight, and the next goes out once it is
    /// settled. What every receive does unless it asks otherwise.
    #[default]
    One,
    /// A run: after a key's head, the same receive also takes the key's next messages, in
    /// order, while it has room and they are deliverable (not delayed or backing off). The
    /// key stays held until every message of the run is settled or has failed; one that
    /// fails waits at its place, and is delivered again, before anything behind it, once
    /// nothing of its key is in flight.
    Consecutive,
}

/// Where a tracked keyed message stands; see the module docs for the transitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyedState {
    /// Its key's head, no message of its key in flight, key not parked: deliverable now.
    Ready,
    /// Delivered (as its key's head or in a run) and not yet settled or requeued.
    InFlight,
    /// Not in flight, and behind its key's head or held back by its key's messages in
    /// flight; key not parked.
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
/// its head. A call on a message in flight scans its key's in-flight front: one message, or
/// a run (at most a receive's size).
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
    /// This key's messages in the window: the first `in_flight` are in flight (in the order
    /// they went out), the rest wait behind them in offset order. The front is the head.
    offsets: VecDeque<u64>,
    /// How many of the front offsets are in flight: 0 or 1, or the rest of a run still out.
    /// While it is not 0 nothing of the key is Ready.
    in_flight: u32,
    parked: bool,
}

impl KeyState {
    fn ready_head(&self) -> Option<u64> {
        if self.in_flight > 0 || self.parked {
            None
        } else {
            self.offsets.front().copied()
        }
    }

    fn in_flight_count(&self) -> usize {
        self.in_flight as usize
    }

    /// Messages of this key that are not in flight: what a parked key holds.
    fn held(&self) -> usize {
        self.offsets.len() - self.in_flight_count()
    }

    /// Where `offset` is among the in-flight front, if it is in flight. The front is short
    /// (one message, or a run), so a scan.
    fn in_flight_position(&self, offset: u64) -> Option<usize> {
        self.offsets
            .iter()
            .take(self.in_flight_count())
            .position(|&o| o == offset)
    }

    /// The oldest message not in flight, while the key has some in flight and is not
    /// parked: what a run takes next.
    fn follower(&self) -> Option<u64> {
        if self.in_flight == 0 || self.parked {
            None
        } else {
            self.offsets.get(self.in_flight_count()).copied()
        }
    }

    fn state_of(&self, offset: u64) -> KeyedState {
        if self.in_flight_position(offset).is_some() {
            return KeyedState::InFlight;
        }
        if self.parked {
            KeyedState::Held
        } else if self.ready_head() == Some(offset) {
            KeyedState::Ready
        } else {
            KeyedState::Waiting
        }
    }

    /// Puts a message that is not in flight at its offset's place among the waiting ones.
    fn insert_waiting(&mut self, offset: u64) {
        let at = place_among_waiting(&self.offsets, self.in_flight_count(), offset);
        self.offsets.insert(at, offset);
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

    /// Tracks a message that joins `key`'s line late, at its offset's place instead of the
    /// back: on an exclusive queue a delayed message stays out of the line until its delay
    /// ends, so that it holds back nothing meanwhile, and then takes its place in publish
    /// order. It becomes the head if it is older than the head, unless messages of the key
    /// are in flight: then it waits right behind them (see [`requeued`](KeyOrder::requeued)).
    ///
    /// Returns its admission and the former head if that was Ready and now waits behind it,
    /// which the engine withdraws from its ready set. An offset already tracked is left as
    /// it is (checked in debug builds).
    pub fn admit_in_order(&mut self, offset: u64, key: &[u8]) -> (Admission, Option<u64>) {
        debug_assert!(
            self.state(offset).is_none(),
            "offset {offset} admitted twice"
        );
        if let Some(state) = self.state(offset) {
            let admission = match state {
                KeyedState::Ready => Admission::Ready,
                _ => Admission::Waiting,
            };
            return (admission, None);
        }
        let slot = self.slot_for(key);
        let state = self.slots[slot]
            .as_mut()
            .expect("slot_for returns a live slot");
        let former = state.ready_head();
        state.insert_waiting(offset);
        self.slot_of_offset.insert(offset, slot);
        let admission = if state.ready_head() == Some(offset) {
            Admission::Ready
        } else {
            Admission::Waiting
        };
        let withdrawn = former.filter(|&head| state.ready_head() != Some(head));
        (admission, withdrawn)
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
        state.in_flight = 1;
        true
    }

    /// The message a run may take next, right behind `offset` that the same receive just
    /// delivered: its key's oldest message not in flight. `None` if `offset` is not in
    /// flight, the key is parked, or nothing waits behind it. The caller decides whether the
    /// run goes on (the message may be delayed, or the receive full); taking it is
    /// [`delivered_follower`](KeyOrder::delivered_follower).
    ///
    /// Only the receive that delivered the head extends its run: a key with a message in
    /// flight from an earlier receive is held, and this is not a way around that.
    pub fn follower(&self, offset: u64) -> Option<u64> {
        let &slot = self.slot_of_offset.get(&offset)?;
        let state = self.slot(slot);
        state.in_flight_position(offset)?;
        state.follower()
    }

    /// The engine handed `offset`, its key's [`follower`](KeyOrder::follower), to the
    /// consumer in the same receive: it joins the key's messages in flight. Nothing enters
    /// or leaves the ready set (the key had nothing Ready while its run was out).
    ///
    /// Returns `false` and changes nothing if `offset` is not its key's follower.
    pub fn delivered_follower(&mut self, offset: u64) -> bool {
        let Some(state) = self.key_state_mut(offset) else {
            return false;
        };
        if state.follower() != Some(offset) {
            return false;
        }
        state.in_flight += 1;
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

    /// The in-flight `offset` failed (nack or lease expiry) and will be delivered again: it
    /// goes back to its offset's place in its key's line, in front of its successors, which
    /// keep waiting — order holds across retries. Only a message older than it that joined
    /// the line while it was in flight ([`admit_in_order`](KeyOrder::admit_in_order)) goes
    /// first. Returns the key's head if it is Ready now; `None` if the key is parked (its
    /// head is Held until unparked) or still has messages of a run in flight (the key stays
    /// held until they are settled or requeued too, and then its oldest message goes first).
    ///
    /// Returns `None` and changes nothing if `offset` is not in flight.
    pub fn requeued(&mut self, offset: u64) -> Option<u64> {
        let state = self.key_state_mut(offset)?;
        let at = state.in_flight_position(offset)?;
        state.offsets.remove(at);
        state.in_flight -= 1;
        state.insert_waiting(offset);
        state.ready_head()
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
    /// deliveries (if any) are settled or requeued, and every message behind it stay Held, in
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
            in_flight: 0,
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
        let next = if let Some(at) = state.in_flight_position(offset) {
            // In flight: the key is released once the last of its deliveries ends.
            state.offsets.remove(at);
            state.in_flight -= 1;
            state.ready_head()
        } else {
            // Waiting: the offsets not in flight are sorted when admitted in order; the
            // linear fallback only covers a caller that broke that contract in a release
            // build. Only the head's leaving changes what is Ready.
            let from = state.in_flight_count();
            let at = Some(place_among_waiting(&state.offsets, from, offset))
                .filter(|&at| state.offsets.get(at) == Some(&offset))
                .or_else(|| state.offsets.iter().position(|&o| o == offset));
            if let Some(at) = at {
                state.offsets.remove(at);
            }
            if at == Some(0) {
                state.ready_head()
            } else {
                None
            }
        };
        self.free_if_idle(slot);
        next
    }
}

/// Where `offset` goes among the offsets of a line that are not in flight, which start at
/// `from` (the count of the in-flight front): they are in offset order (only the in-flight
/// front may be younger than what waits behind it), so a binary search finds it, and a late
/// message costs O(log m), not a scan of the backlog.
fn place_among_waiting(offsets: &VecDeque<u64>, from: usize, offset: u64) -> usize {
    let (mut low, mut high) = (from, offsets.len());
    while low < high {
        let mid = low + (high - low) / 2;
        if offsets[mid] < offset {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    low
}

#[cfg(test)]
#[path = "key_order_tests.rs"]
mod tests;
