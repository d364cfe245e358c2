//! Sticky assignment of a topic's partitions to a group's members: balanced (every member
//! gets `⌊n/m⌋` or `⌈n/m⌉` partitions) and sticky (a rebalance moves only partitions that
//! must move: those of members that left, and the excess of members above their share).
//!
//! Deterministic: the same members, partitions and previous assignment give the same
//! result, so a restart or a replay reassigns nothing by accident. Kafka's
//! `StickyAssignor` pursues the same two goals; this is the single-topic case, small enough
//! to write out rather than depend on.

use std::collections::{BTreeMap, BTreeSet};

/// Who holds which partitions.
pub type Assignment<M> = BTreeMap<M, BTreeSet<u32>>;

/// Assigns `partitions` (numbered `0..partitions`) to `members`, keeping as much of
/// `previous` as balance allows. Members absent from `previous` start empty; entries of
/// `previous` for departed members or for partitions that no longer exist are ignored.
pub fn sticky<M: Ord + Clone>(
    members: &BTreeSet<M>,
    partitions: u32,
    previous: &Assignment<M>,
) -> Assignment<M> {
    let mut out: Assignment<M> = members
        .iter()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    if members.is_empty() {
        return out;
    }
    let count = members.len();
    let base = partitions as usize / count;
    let extra = partitions as usize % count;
    // Who may keep `base + 1`: the members holding the most now, so fewer partitions move;
    // ties by member order, for determinism.
    let mut by_holding: Vec<&M> = members.iter().collect();
    let held = |m: &M| {
        previous
            .get(m)
            .map_or(0, |ps| ps.iter().filter(|&&p| p < partitions).count())
    };
    by_holding.sort_by(|a, b| held(b).cmp(&held(a)).then_with(|| a.cmp(b)));
    let target: BTreeMap<&M, usize> = by_holding
        .iter()
        .enumerate()
        .map(|(i, m)| (*m, base + usize::from(i < extra)))
        .collect();
    let mut taken = BTreeSet::new();
    for member in members {
        let keep = previous
            .get(member)
            .into_iter()
            .flatten()
            .filter(|&&p| p < partitions && !taken.contains(&p))
            .take(target[member])
            .copied()
            .collect::<Vec<_>>();
        taken.extend(keep.iter().copied());
        out.get_mut(member)
            .expect("every member has an entry")
            .extend(keep);
    }
    let mut free = (0..partitions).filter(|p| !taken.contains(p));
    for member in members {
        let slot = out.get_mut(member).expect("every member has an entry");
        while slot.len() < target[member] {
            match free.next() {
                Some(p) => {
                    slot.insert(p);
                }
                None => break,
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn members(names: &[&'static str]) -> BTreeSet<&'static str> {
        names.iter().copied().collect()
    }

    #[test]
    fn a_joining_member_takes_only_the_excess() {
        let first = sticky(&members(&["a", "b"]), 6, &Assignment::new());
        assert_eq!(first["a"], BTreeSet::from([0, 1, 2]));
        assert_eq!(first["b"], BTreeSet::from([3, 4, 5]));
        let second = sticky(&members(&["a", "b", "c"]), 6, &first);
        assert_eq!(second["a"], BTreeSet::from([0, 1]));
        assert_eq!(second["b"], BTreeSet::from([3, 4]));
        assert_eq!(second["c"], BTreeSet::from([2, 5]));
        // And when c leaves, a and b get its partitions back without trading their own.
        let third = sticky(&members(&["a", "b"]), 6, &second);
        assert!(third["a"].is_superset(&second["a"]) && third["b"].is_superset(&second["b"]));
    }

    #[test]
    fn more_members_than_partitions_leaves_some_idle() {
        let out = sticky(&members(&["a", "b", "c"]), 2, &Assignment::new());
        let sizes: Vec<usize> = out.values().map(BTreeSet::len).collect();
        assert_eq!(sizes, [1, 1, 0]);
    }

    proptest! {
        /// Whatever came before: every partition is held by exactly one member, shares
        /// differ by at most one, and no member that keeps its share loses a partition it
        /// held (only the partitions of departed members and excess ones move).
        #[test]
        fn balanced_complete_and_sticky(
            before in prop::collection::btree_set(0u8..8, 0..8),
            after in prop::collection::btree_set(0u8..8, 1..8),
            partitions in 0u32..40,
            old_partitions in 0u32..40,
        ) {
            let previous = sticky(&before, old_partitions, &Assignment::new());
            let next = sticky(&after, partitions, &previous);
            let mut seen = BTreeSet::new();
            for held in next.values() {
                for p in held {
                    prop_assert!(seen.insert(*p), "partition {} held twice", p);
                }
            }
            prop_assert_eq!(seen, (0..partitions).collect::<BTreeSet<_>>());
            let sizes: Vec<usize> = next.values().map(BTreeSet::len).collect();
            let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            prop_assert!(max - min <= 1, "unbalanced: {:?}", sizes);
            for (member, held) in &next {
                let kept: BTreeSet<u32> = previous
                    .get(member)
                    .into_iter()
                    .flatten()
                    .copied()
                    .filter(|&p| p < partitions)
                    .collect();
                let lost = kept.difference(held).count();
                // A member loses only what is above its new share.
                prop_assert!(kept.len() - lost <= held.len());
                prop_assert!(lost == 0 || held.len() <= kept.len(), "{} lost {} and gained", member, lost);
            }
        }
    }
}
