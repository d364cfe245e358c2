//! Publish deduplication: a [`DedupWindow`] remembers each dedup id (or, without one, the
//! message id) for a queue's window, so that a producer retrying a publish whose
//! acknowledgement it never saw gets the original message id back and nothing is stored twice.
//!
//! Pure and in-memory, with time passed in by the caller. Persistence is the engine's job:
//! [`DedupWindow::entries`] is what it snapshots and [`DedupWindow::restore`] rebuilds from,
//! so the window survives a restart.
//!
//! **The window.** An entry inserted at `t` answers `Duplicate` for `now` in
//! `[t, t + window)` and counts as gone from `t + window` on, whether or not [`expire`] has
//! removed it yet: the answer never depends on when housekeeping last ran. The window runs
//! from the first publish; a duplicate does not extend it (as in SQS), so a producer
//! retrying forever cannot pin an id in memory.
//!
//! [`expire`]: DedupWindow::expire

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use crate::message_id::MessageId;

/// What [`DedupWindow::check_and_insert`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Not seen within the window: the caller stores the message; the id is now remembered.
    New,
    /// Seen within the window: the caller stores nothing and answers with this original id.
    Duplicate(MessageId),
}

/// What a message is remembered by: the dedup id its producer gave, or else the message id
/// its producer chose. Two variants, so a dedup id can never collide with a message id.
///
/// A chosen id is kept as its 16 bytes, not as text: a remote producer chooses the id of
/// every message it sends (so that a retry is stored once), and formatting, allocating and
/// hashing a string per message made the window the costliest step of such a publish.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DedupKey {
    /// The producer-given dedup id.
    Given(Arc<str>),
    /// The producer-chosen message id.
    ChosenId(MessageId),
}

impl From<&str> for DedupKey {
    fn from(dedup_id: &str) -> Self {
        DedupKey::Given(Arc::from(dedup_id))
    }
}

impl From<String> for DedupKey {
    fn from(dedup_id: String) -> Self {
        DedupKey::Given(Arc::from(dedup_id))
    }
}

impl fmt::Display for DedupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DedupKey::Given(dedup_id) => f.write_str(dedup_id),
            DedupKey::ChosenId(id) => write!(f, "id {id}"),
        }
    }
}

/// Dedup ids remembered for a window, with a bound on how many.
///
/// **Memory** per entry: a 48 B + 1 control byte hash-table slot (the key — a 16-byte id,
/// or a pointer to a shared `Arc<str>` of `L` bytes plus 16 B of counts — the original id,
/// the insertion time and a sequence number) and a slot in the time-ordered B-tree holding
/// the key again. Measured with a counting allocator over 1–3 million 36-byte string keys
/// inserted in time order (before chosen ids were kept as bytes): **190–220 B per entry**
/// (the B-tree's nodes run ~55 % full under in-order inserts, the hash table 55–87 %), i.e.
/// about `150 B + L` plus the allocator's rounding of the key. The default bound of 10 million
/// entries is therefore about 2 GB with UUID keys: a backstop against unbounded growth, not a
/// size to plan for; a queue with that many distinct publishes per window should shorten it.
///
/// **Hashing** stays the standard library's keyed SipHash: the keys are chosen by
/// producers, and a faster unkeyed or weakly keyed hash would let one craft collisions.
/// What made the window costly was hashing each key up to six times and allocating it
/// twice per message, which [`check_and_insert`](Self::check_and_insert) no longer does.
///
/// **Beyond `max_entries`** the oldest entries are evicted before their window ends and
/// counted in [`evicted_early`](DedupWindow::evicted_early). This only weakens dedup — a
/// duplicate of an evicted id is stored again — and only for queues publishing more distinct
/// ids per window than the bound; it never refuses a publish or loses a message.
#[derive(Debug, Clone)]
pub struct DedupWindow {
    /// Window length in ms; 0 means deduplication is off.
    window_ms: i64,
    max_entries: NonZeroUsize,
    by_key: HashMap<DedupKey, Entry>,
    /// Insertion order, for expiry and eviction oldest first. The sequence number keeps
    /// entries inserted in the same millisecond distinct and in insertion order.
    by_time: BTreeMap<(i64, u64), DedupKey>,
    next_seq: u64,
    evicted_early: u64,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    id: MessageId,
    inserted_ms: i64,
    seq: u64,
}

impl DedupWindow {
    /// The default bound on remembered ids; see the type's docs for what it costs.
    pub const DEFAULT_MAX_ENTRIES: NonZeroUsize = NonZeroUsize::new(10_000_000).unwrap();

    /// A window of `window`, kept at millisecond resolution (a non-zero window shorter than
    /// 1 ms counts as 1 ms, so it is never silently disabled). A zero window disables
    /// deduplication: nothing is remembered and every publish is [`Seen::New`].
    pub fn new(window: Duration) -> DedupWindow {
        let window_ms = window_millis(window);
        DedupWindow {
            window_ms,
            max_entries: Self::DEFAULT_MAX_ENTRIES,
            by_key: HashMap::new(),
            by_time: BTreeMap::new(),
            next_seq: 0,
            evicted_early: 0,
        }
    }

    /// Sets the bound on remembered ids. If more are held already, the oldest are evicted
    /// now (and counted as evicted early).
    #[cfg(test)]
    pub fn with_max_entries(mut self, max_entries: NonZeroUsize) -> DedupWindow {
        self.max_entries = max_entries;
        while self.by_key.len() > max_entries.get() {
            self.evict_oldest();
        }
        self
    }

    pub fn is_enabled(&self) -> bool {
        self.window_ms > 0
    }

    /// If `dedup_key` was inserted within the window before `now_ms`, returns
    /// [`Seen::Duplicate`] with the original id and changes nothing. Otherwise remembers
    /// `dedup_key` → `id` from `now_ms` (replacing an expired entry for the same key) and
    /// returns [`Seen::New`]. One hash of the key, except when the window is full.
    pub fn check_and_insert(
        &mut self,
        dedup_key: impl Into<DedupKey>,
        id: MessageId,
        now_ms: i64,
    ) -> Seen {
        if !self.is_enabled() {
            return Seen::New;
        }
        let key = dedup_key.into();
        // Evicted before the entry is taken (it borrows the table), and only for a key not
        // held: a duplicate or a replacement makes no room.
        if self.by_key.len() >= self.max_entries.get() && !self.by_key.contains_key(&key) {
            self.evict_oldest();
        }
        let seq = self.next_seq;
        let fresh = Entry {
            id,
            inserted_ms: now_ms,
            seq,
        };
        match self.by_key.entry(key) {
            std::collections::hash_map::Entry::Occupied(mut held) => {
                let old = *held.get();
                if is_live(self.window_ms, old.inserted_ms, now_ms) {
                    return Seen::Duplicate(old.id);
                }
                let key = self
                    .by_time
                    .remove(&(old.inserted_ms, old.seq))
                    .unwrap_or_else(|| held.key().clone());
                held.insert(fresh);
                self.by_time.insert((now_ms, seq), key);
            }
            std::collections::hash_map::Entry::Vacant(free) => {
                self.by_time.insert((now_ms, seq), free.key().clone());
                free.insert(fresh);
            }
        }
        self.next_seq += 1;
        Seen::New
    }

    /// The original id for `dedup_key` if it is still within the window at `now_ms`.
    pub fn get(&self, dedup_key: &DedupKey, now_ms: i64) -> Option<MessageId> {
        let entry = self.by_key.get(dedup_key)?;
        is_live(self.window_ms, entry.inserted_ms, now_ms).then_some(entry.id)
    }

    /// Removes every entry whose window has ended by `now_ms`, oldest first, and returns how
    /// many. Costs O(log n) per entry removed and O(log n) when nothing is due, so the engine
    /// can call it on every tick.
    pub fn expire(&mut self, now_ms: i64) -> usize {
        let mut removed = 0;
        let window_ms = self.window_ms;
        // Liveness falls with age, so the expired entries are exactly a prefix of `by_time`.
        while let Some(entry) = self.by_time.first_entry() {
            if is_live(window_ms, entry.key().0, now_ms) {
                break;
            }
            let key = entry.remove();
            self.by_key.remove(&key);
            removed += 1;
        }
        removed
    }

    /// Entries held, including expired ones that [`expire`](Self::expire) has not removed yet.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// How many entries were evicted before their window ended because the window held
    /// `max_entries`. Non-zero means dedup was weaker than configured; worth a metric.
    #[cfg(test)]
    pub fn evicted_early(&self) -> u64 {
        self.evicted_early
    }

    /// Every entry held as (dedup key, original id, inserted at ms), oldest first: the
    /// snapshot the engine persists. Feeding it to [`restore`](Self::restore) on an empty
    /// window reproduces this one's answers.
    #[cfg(test)]
    pub fn entries(&self) -> impl Iterator<Item = (&DedupKey, MessageId, i64)> + '_ {
        self.by_time
            .iter()
            .map(|(&(inserted_ms, _), key)| (key, self.by_key[key].id, inserted_ms))
    }

    /// Adds entries from a snapshot (or a replayed log of insertions), each as if inserted at
    /// its own time. A key that appears twice keeps the later one in iteration order, as a
    /// re-insertion after expiry would. Nothing is expired here — the caller follows with
    /// [`expire`](Self::expire) at its current time — but `max_entries` still holds. A
    /// disabled window stays empty.
    pub fn restore<K: Into<DedupKey>>(
        &mut self,
        entries: impl IntoIterator<Item = (K, MessageId, i64)>,
    ) {
        if !self.is_enabled() {
            return;
        }
        for (key, id, inserted_ms) in entries {
            self.insert(key.into(), id, inserted_ms);
        }
    }

    /// Inserts or replaces `key`, evicting the oldest entry first if the window is full, so
    /// the entry just inserted is never the one evicted.
    fn insert(&mut self, key: DedupKey, id: MessageId, inserted_ms: i64) {
        if let Some(old) = self.by_key.remove(&key) {
            self.by_time.remove(&(old.inserted_ms, old.seq));
        } else if self.by_key.len() >= self.max_entries.get() {
            self.evict_oldest();
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.by_time.insert((inserted_ms, seq), key.clone());
        self.by_key.insert(
            key,
            Entry {
                id,
                inserted_ms,
                seq,
            },
        );
    }

    fn evict_oldest(&mut self) {
        if let Some((_, key)) = self.by_time.pop_first() {
            self.by_key.remove(&key);
            self.evicted_early += 1;
        }
    }
}

/// A window's length in ms, as both windows keep it: a non-zero window shorter than 1 ms
/// counts as 1 ms (never silently off), and zero is off.
pub(super) fn window_millis(window: Duration) -> i64 {
    if window.is_zero() {
        0
    } else {
        i64::try_from(window.as_millis()).unwrap_or(i64::MAX).max(1)
    }
}

/// Whether an entry inserted at `inserted_ms` still counts at `now_ms`. Saturating, so
/// extreme times cannot overflow; a clock that stepped back leaves entries live.
pub(super) fn is_live(window_ms: i64, inserted_ms: i64, now_ms: i64) -> bool {
    now_ms.saturating_sub(inserted_ms) < window_ms
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use ulid::Ulid;

    const MINUTE_MS: i64 = 60_000;
    const T0: i64 = 1_700_000_000_000;

    fn id(n: u128) -> MessageId {
        MessageId::from_ulid(Ulid(n))
    }

    fn five_minutes() -> DedupWindow {
        DedupWindow::new(Duration::from_secs(5 * 60))
    }

    fn key(dedup_id: &str) -> DedupKey {
        DedupKey::from(dedup_id)
    }

    fn max(n: usize) -> NonZeroUsize {
        NonZeroUsize::new(n).unwrap()
    }

    #[test]
    fn duplicate_within_window_returns_the_original_id_and_stores_nothing() {
        let mut dedup = five_minutes();
        assert_eq!(dedup.check_and_insert("order-7", id(1), T0), Seen::New);
        let last_moment = T0 + 5 * MINUTE_MS - 1;
        assert_eq!(
            dedup.check_and_insert("order-7", id(2), last_moment),
            Seen::Duplicate(id(1))
        );
        assert_eq!(dedup.len(), 1);
        assert_eq!(dedup.get(&key("order-7"), last_moment), Some(id(1)));
        assert_eq!(
            dedup.entries().collect::<Vec<_>>(),
            [(&key("order-7"), id(1), T0)]
        );
    }

    #[test]
    fn same_id_after_the_window_is_new_and_replaces_the_expired_entry() {
        let mut dedup = five_minutes();
        dedup.check_and_insert("order-7", id(1), T0);
        let window_end = T0 + 5 * MINUTE_MS;
        assert_eq!(dedup.get(&key("order-7"), window_end), None);
        assert_eq!(
            dedup.check_and_insert("order-7", id(2), window_end),
            Seen::New
        );
        assert_eq!(dedup.len(), 1);
        assert_eq!(
            dedup.check_and_insert("order-7", id(3), window_end + 1),
            Seen::Duplicate(id(2)),
            "the new window runs from the second insert"
        );
        assert_eq!(
            dedup.expire(window_end + 1),
            0,
            "the old entry left no stale index"
        );
    }

    #[test]
    fn a_dedup_id_never_collides_with_a_chosen_message_id() {
        let mut dedup = five_minutes();
        let chosen = DedupKey::ChosenId(id(7));
        assert_eq!(dedup.check_and_insert(chosen.clone(), id(7), T0), Seen::New);
        // The same text as a dedup id is another key.
        assert_eq!(
            dedup.check_and_insert(id(7).to_string().as_str(), id(8), T0),
            Seen::New
        );
        assert_eq!(
            dedup.check_and_insert(chosen, id(9), T0 + 1),
            Seen::Duplicate(id(7))
        );
        assert_eq!(dedup.len(), 2);
    }

    #[test]
    fn duplicates_do_not_extend_the_window() {
        let mut dedup = five_minutes();
        dedup.check_and_insert("k", id(1), T0);
        dedup.check_and_insert("k", id(2), T0 + 4 * MINUTE_MS);
        assert_eq!(
            dedup.check_and_insert("k", id(3), T0 + 5 * MINUTE_MS),
            Seen::New
        );
    }

    #[test]
    fn zero_window_disables_dedup_and_remembers_nothing() {
        let mut dedup = DedupWindow::new(Duration::ZERO);
        assert!(!dedup.is_enabled());
        assert_eq!(dedup.check_and_insert("k", id(1), T0), Seen::New);
        assert_eq!(dedup.check_and_insert("k", id(2), T0), Seen::New);
        assert!(dedup.is_empty());
        assert_eq!(dedup.get(&key("k"), T0), None);
        dedup.restore([("k", id(1), T0)]);
        assert!(dedup.is_empty());
    }

    #[test]
    fn sub_millisecond_window_is_not_silently_disabled() {
        let mut dedup = DedupWindow::new(Duration::from_micros(10));
        assert!(dedup.is_enabled());
        dedup.check_and_insert("k", id(1), T0);
        assert_eq!(
            dedup.check_and_insert("k", id(2), T0),
            Seen::Duplicate(id(1))
        );
        assert_eq!(dedup.check_and_insert("k", id(3), T0 + 1), Seen::New);
    }

    #[test]
    fn expire_removes_only_ended_windows_oldest_first() {
        let mut dedup = five_minutes();
        // Inserted out of key order; the same millisecond twice.
        dedup.check_and_insert("c", id(1), T0);
        dedup.check_and_insert("a", id(2), T0);
        dedup.check_and_insert("b", id(3), T0 + MINUTE_MS);
        dedup.check_and_insert("d", id(4), T0 + 2 * MINUTE_MS);
        assert_eq!(dedup.expire(T0 + 5 * MINUTE_MS - 1), 0);
        assert_eq!(dedup.expire(T0 + 5 * MINUTE_MS), 2);
        let left: Vec<_> = dedup.entries().map(|(k, _, _)| k.to_string()).collect();
        assert_eq!(left, ["b", "d"]);
        assert_eq!(dedup.expire(T0 + 6 * MINUTE_MS), 1);
        assert_eq!(
            dedup
                .entries()
                .map(|(k, _, _)| k.to_string())
                .collect::<Vec<_>>(),
            ["d"]
        );
        assert_eq!(dedup.expire(i64::MAX), 1);
        assert!(dedup.is_empty());
    }

    #[test]
    fn expired_entries_are_not_duplicates_even_before_expire_runs() {
        let mut dedup = five_minutes();
        dedup.check_and_insert("k", id(1), T0);
        assert_eq!(dedup.len(), 1);
        assert_eq!(dedup.get(&key("k"), T0 + 10 * MINUTE_MS), None);
    }

    #[test]
    fn restore_from_entries_round_trips_the_window() {
        let mut dedup = five_minutes();
        for (n, key) in ["x", "y", "z", "w"].into_iter().enumerate() {
            let n = n as i64;
            dedup.check_and_insert(key, id(n as u128 + 1), T0 + n * MINUTE_MS / 2);
        }
        dedup.check_and_insert("same-ms", id(9), T0);
        let snapshot: Vec<(DedupKey, MessageId, i64)> = dedup
            .entries()
            .map(|(k, id, at)| (k.to_owned(), id, at))
            .collect();

        let mut restored = five_minutes();
        restored.restore(snapshot.clone());
        let again: Vec<_> = restored
            .entries()
            .map(|(k, id, at)| (k.to_owned(), id, at))
            .collect();
        assert_eq!(again, snapshot);
        let later = T0 + 5 * MINUTE_MS + 1;
        for key in ["x", "y", "z", "w", "same-ms"] {
            assert_eq!(
                restored.get(&key.into(), later),
                dedup.get(&key.into(), later),
                "{key}"
            );
        }
        assert_eq!(restored.expire(later), dedup.expire(later));
        assert_eq!(restored.len(), dedup.len());
    }

    #[test]
    fn restore_keeps_the_later_of_two_entries_for_one_key() {
        let mut dedup = five_minutes();
        dedup.restore([("k", id(1), T0), ("k", id(2), T0 + 6 * MINUTE_MS)]);
        assert_eq!(dedup.len(), 1);
        assert_eq!(dedup.get(&key("k"), T0 + 6 * MINUTE_MS), Some(id(2)));
    }

    #[test]
    fn past_max_entries_the_oldest_is_evicted_early_and_counted() {
        let mut dedup = five_minutes().with_max_entries(max(3));
        for (n, key) in ["a", "b", "c", "d", "e"].into_iter().enumerate() {
            assert_eq!(
                dedup.check_and_insert(key, id(n as u128), T0 + n as i64),
                Seen::New
            );
        }
        assert_eq!(dedup.len(), 3);
        assert_eq!(dedup.evicted_early(), 2);
        let held: Vec<_> = dedup.entries().map(|(k, _, _)| k.to_string()).collect();
        assert_eq!(held, ["c", "d", "e"]);
        // The weakening: a duplicate of an evicted id within its window is accepted again.
        assert_eq!(dedup.check_and_insert("a", id(10), T0 + 10), Seen::New);
        assert_eq!(dedup.evicted_early(), 3);
        // Duplicates and replacements of held keys evict nothing.
        assert_eq!(
            dedup.check_and_insert("e", id(11), T0 + 11),
            Seen::Duplicate(id(4))
        );
        assert_eq!(dedup.evicted_early(), 3);
    }

    #[test]
    fn the_entry_just_inserted_survives_eviction_even_if_the_clock_stepped_back() {
        let mut dedup = five_minutes().with_max_entries(max(2));
        dedup.check_and_insert("a", id(1), T0);
        dedup.check_and_insert("b", id(2), T0 + 1);
        dedup.check_and_insert("early", id(3), T0 - 1_000);
        assert_eq!(dedup.get(&key("early"), T0), Some(id(3)));
        assert_eq!(dedup.len(), 2);
    }

    #[test]
    fn lowering_max_entries_evicts_the_oldest_at_once() {
        let mut dedup = five_minutes();
        dedup.restore((0..5).map(|n| (n.to_string(), id(n as u128), T0 + n)));
        let dedup = dedup.with_max_entries(max(2));
        assert_eq!(dedup.evicted_early(), 3);
        assert_eq!(
            dedup
                .entries()
                .map(|(k, _, _)| k.to_string())
                .collect::<Vec<_>>(),
            ["3", "4"]
        );
    }

    #[derive(Debug, Clone)]
    enum Op {
        Publish(u8),
        Expire,
        Advance(i64),
        StepBack(i64),
        SnapshotAndRestore,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            5 => (0u8..10).prop_map(Op::Publish),
            1 => Just(Op::Expire),
            3 => (0i64..8).prop_map(Op::Advance),
            1 => (0i64..4).prop_map(Op::StepBack),
            1 => Just(Op::SnapshotAndRestore),
        ]
    }

    /// The reference: entries in insertion order as (key, id, inserted at); the window and
    /// the bound applied by brute force.
    struct Model {
        window: i64,
        max: usize,
        entries: Vec<(String, MessageId, i64)>,
        evicted: u64,
    }

    impl Model {
        fn live(&self, inserted: i64, now: i64) -> bool {
            now.saturating_sub(inserted) < self.window
        }
        fn get(&self, key: &str, now: i64) -> Option<MessageId> {
            let (_, id, at) = self.entries.iter().find(|(k, _, _)| k == key)?;
            self.live(*at, now).then_some(*id)
        }
        fn publish(&mut self, key: &str, id: MessageId, now: i64) -> Seen {
            if self.window == 0 {
                return Seen::New;
            }
            if let Some(original) = self.get(key, now) {
                return Seen::Duplicate(original);
            }
            if let Some(at) = self.entries.iter().position(|(k, _, _)| k == key) {
                self.entries.remove(at);
            } else if self.entries.len() >= self.max {
                let oldest = (0..self.entries.len())
                    .min_by_key(|&i| (self.entries[i].2, i))
                    .unwrap();
                self.entries.remove(oldest);
                self.evicted += 1;
            }
            self.entries.push((key.to_owned(), id, now));
            Seen::New
        }
        fn expire(&mut self, now: i64) -> usize {
            let before = self.entries.len();
            let window = self.window;
            self.entries
                .retain(|(_, _, at)| now.saturating_sub(*at) < window);
            before - self.entries.len()
        }
    }

    proptest! {
        #[test]
        fn dedup_window_matches_a_list_model(
            window in 0i64..20,
            max_entries in 1usize..8,
            ops in prop::collection::vec(op(), 1..200),
        ) {
            let mut dedup = DedupWindow::new(Duration::from_millis(window as u64))
                .with_max_entries(NonZeroUsize::new(max_entries).unwrap());
            let mut model =
                Model { window, max: max_entries, entries: Vec::new(), evicted: 0 };
            let mut now = 0;
            let mut next_id = 1u128;
            for op in ops {
                match op {
                    Op::Publish(k) => {
                        let key = k.to_string();
                        next_id += 1;
                        prop_assert_eq!(
                            dedup.check_and_insert(key.as_str(), id(next_id), now),
                            model.publish(&key, id(next_id), now)
                        );
                    }
                    Op::Expire => prop_assert_eq!(dedup.expire(now), model.expire(now)),
                    Op::Advance(ms) => now += ms,
                    Op::StepBack(ms) => now -= ms,
                    Op::SnapshotAndRestore => {
                        let snapshot: Vec<_> = dedup
                            .entries()
                            .map(|(k, id, at)| (k.to_owned(), id, at))
                            .collect();
                        let evicted = dedup.evicted_early();
                        dedup = DedupWindow::new(Duration::from_millis(window as u64))
                            .with_max_entries(NonZeroUsize::new(max_entries).unwrap());
                        dedup.restore(snapshot);
                        prop_assert_eq!(dedup.evicted_early(), 0);
                        // The counter is the engine's to carry over, not part of the snapshot.
                        prop_assert_eq!(evicted, model.evicted);
                        model.evicted = 0;
                    }
                }
                prop_assert_eq!(dedup.len(), model.entries.len());
                prop_assert_eq!(dedup.evicted_early(), model.evicted);
                let held: Vec<_> =
                    dedup.entries().map(|(k, id, at)| (k.to_string(), id, at)).collect();
                let mut expected = model.entries.clone();
                expected.sort_by_key(|e| e.2); // stable: insertion order among equal times
                prop_assert_eq!(held, expected);
                for k in 0u8..10 {
                    let key = k.to_string();
                    prop_assert_eq!(dedup.get(&key.as_str().into(), now), model.get(&key, now));
                }
            }
        }
    }
}
