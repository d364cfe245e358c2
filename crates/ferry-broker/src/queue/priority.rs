//! Which priority level of a queue serves the next delivery: [`PriorityPicker`], strict
//! priority with a starvation guard for the lower levels.
//!
//! Pure and synchronous: the picker never looks at messages itself. The engine tells it which
//! levels have ready messages (a closure over its own per-level ready sets) and the picker
//! answers with a level. Its only state is a credit counter and per-level pick counts, so it
//! is O(levels) per pick, deterministic (no RNG) and cheap to rebuild after a restart.
//!
//! **The rule.** Levels are `0..levels`, higher number = higher priority, as in
//! [`QueueSpec::effective_priority`](crate::QueueSpec::effective_priority). Call the highest
//! level with ready messages the *top* level and the highest ready level below it the *lower*
//! level. Every pick first adds `lower_share` to a credit counter; then
//!
//! - if a lower level is ready and the credit is at least 1, the lower level is served and 1
//!   is taken from the credit (a *guarded* pick);
//! - otherwise the top level is served.
//!
//! So under sustained load on two or more levels exactly ⌊n · `lower_share`⌋ of any n
//! consecutive picks from a zero credit go below the top level — one in ten for 0.1 — and over
//! any window of about 1/`lower_share` picks the lower levels get their share whenever they
//! have ready messages. With `lower_share = 0` the credit never grows: strict priority.
//!
//! Credit is added on *every* pick, guarded ones included, rather than only on picks of the
//! top level: adding only on top picks would give the lower levels `s / (1 + s)` of the picks
//! (one in eleven for 0.1), not the `s` the spec promises.
//!
//! **Credit is capped at 1 while no lower level is ready.** A queue may serve only its top
//! level for hours; if credit kept growing over that time, the first burst of lower-priority
//! messages afterwards would be owed thousands of picks and would take over the queue,
//! starving the urgent traffic the priorities exist for. Capped, such a burst gets at most one
//! pick straight away and its share after that. While a lower level *is* ready the credit
//! never exceeds 1 + `lower_share` (it is spent as soon as it reaches 1), so the cap never
//! cuts into the share under load.
//!
//! Credit is kept in fixed point (billionths) rather than `f64`, so that ten additions of 0.1
//! make exactly 1 and the one-in-ten promise holds to the pick.

use crate::error::{BrokerError, Result};
use crate::spec::QueueSpec;

/// Fixed-point 1.0 for the credit counter: shares are kept to nine decimal places.
const ONE: u64 = 1_000_000_000;

/// Picks the priority level that serves a queue's next delivery; see the [module
/// docs](self) for the rule and why it is shaped this way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriorityPicker {
    levels: u8,
    /// `lower_share` in billionths.
    share: u64,
    /// Earned and not yet spent picks for the lower levels, in billionths.
    credit: u64,
    stats: PriorityStats,
}

/// What a [`PriorityPicker`] has served since it was made.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PriorityStats {
    /// Picks (and [`PriorityPicker::record`]ed deliveries) per level; index = level.
    pub picks_by_level: Vec<u64>,
    /// Picks the starvation guard gave to a lower level while a higher one was ready.
    pub guarded_picks: u64,
}

impl PriorityStats {
    #[cfg(test)]
    pub fn total(&self) -> u64 {
        self.picks_by_level.iter().sum()
    }
}

impl PriorityPicker {
    /// A picker for `levels` levels (1 to [`QueueSpec::MAX_PRIORITY_LEVELS`]) reserving
    /// `lower_share` (0.0 to [`QueueSpec::MAX_LOWER_PRIORITY_SHARE`]) of picks for levels below
    /// the highest ready one. Refuses the values [`QueueSpec::validate`] refuses, with the same
    /// setting names.
    pub fn new(levels: u8, lower_share: f64) -> Result<Self> {
        if !(1..=QueueSpec::MAX_PRIORITY_LEVELS).contains(&levels) {
            return Err(BrokerError::InvalidSetting {
                setting: "priority_levels",
                problem: format!(
                    "must be between 1 and {} (got {levels}); 1 means no priorities",
                    QueueSpec::MAX_PRIORITY_LEVELS
                ),
            });
        }
        if !(0.0..=QueueSpec::MAX_LOWER_PRIORITY_SHARE).contains(&lower_share) {
            return Err(BrokerError::InvalidSetting {
                setting: "lower_priority_share",
                problem: format!(
                    "must be a fraction between 0.0 and 0.5 (0.1 = 10 % of deliveries), got \
                     {lower_share}"
                ),
            });
        }
        Ok(PriorityPicker {
            levels,
            // In range and at most 0.5 · 10⁹, so the cast is exact after rounding.
            share: (lower_share * ONE as f64).round() as u64,
            credit: 0,
            stats: PriorityStats {
                picks_by_level: vec![0; usize::from(levels)],
                guarded_picks: 0,
            },
        })
    }

    /// Changes the share reserved for lower levels (already validated); the credit earned
    /// so far is kept.
    pub fn set_lower_share(&mut self, lower_share: f64) {
        self.share = (lower_share * ONE as f64).round() as u64;
    }

    /// The picker for a queue with this spec.
    pub fn for_spec(spec: &QueueSpec) -> Result<Self> {
        Self::new(spec.priority_levels, spec.lower_priority_share)
    }

    /// The unspent credit of the lower levels, in picks (0.0 to 1.0 between picks while no
    /// lower level is ready, below 1.0 + `lower_share` otherwise).
    #[cfg(test)]
    pub fn credit(&self) -> f64 {
        self.credit as f64 / ONE as f64
    }

    /// The level that serves the next delivery, or `None` if no level has ready messages.
    /// `has_ready` is asked about levels `0..levels` only, at most once each.
    pub fn pick(&mut self, has_ready: impl Fn(u8) -> bool) -> Option<u8> {
        let (top, lower) = self.top_and_lower(has_ready)?;
        self.credit += self.share;
        let served = match lower {
            Some(lower) if self.credit >= ONE => {
                self.credit -= ONE;
                self.stats.guarded_picks += 1;
                lower
            }
            _ => top,
        };
        if lower.is_none() {
            self.credit = self.credit.min(ONE);
        }
        self.stats.picks_by_level[usize::from(served)] += 1;
        Some(served)
    }

    /// Accounts for a delivery from `level` that the engine made without [`pick`] — say, a
    /// key-shared queue whose picked level held only keys already in flight — so that the
    /// share stays honest. `has_ready` is the readiness the engine saw when it served it.
    ///
    /// Like a pick it earns `lower_share` credit. Serving a level below the highest ready one
    /// spends 1 credit, as a guarded pick would, but never takes the credit below 0: lower
    /// levels served out of turn do not make the guard owe the top level picks, which would
    /// later hold the lower levels back below their share.
    ///
    /// A `level` beyond the picker's levels counts as the highest, as in
    /// [`QueueSpec::effective_priority`].
    ///
    /// [`pick`]: PriorityPicker::pick
    #[cfg(test)]
    pub fn record(&mut self, level: u8, has_ready: impl Fn(u8) -> bool) {
        let level = level.min(self.levels - 1);
        self.credit += self.share;
        let above_ready = (level + 1..self.levels).any(&has_ready);
        let below_ready = (0..level).any(&has_ready);
        if above_ready {
            self.credit = self.credit.saturating_sub(ONE);
        } else if !below_ready {
            self.credit = self.credit.min(ONE);
        }
        self.stats.picks_by_level[usize::from(level)] += 1;
    }

    #[cfg(test)]
    pub fn stats(&self) -> &PriorityStats {
        &self.stats
    }

    /// The highest ready level and the highest ready level below it.
    fn top_and_lower(&self, has_ready: impl Fn(u8) -> bool) -> Option<(u8, Option<u8>)> {
        let mut ready = (0..self.levels).rev().filter(|&level| has_ready(level));
        let top = ready.next()?;
        Some((top, ready.next()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ready_at(levels: &[u8]) -> impl Fn(u8) -> bool + '_ {
        move |level| levels.contains(&level)
    }

    fn picks(picker: &mut PriorityPicker, ready: &[u8], n: usize) -> Vec<u8> {
        (0..n)
            .map(|_| picker.pick(ready_at(ready)).unwrap())
            .collect()
    }

    #[test]
    fn a_tenth_share_gives_the_lower_level_one_pick_in_ten() {
        // Three levels, 10 % of picks reserved for the lower ones while level 2 is busy.
        let mut picker = PriorityPicker::new(3, 0.1).unwrap();
        let ready = |level: u8| level == 2 || level == 0;
        let picks: Vec<_> = (0..10).map(|_| picker.pick(ready).unwrap()).collect();
        assert_eq!(picks, [2, 2, 2, 2, 2, 2, 2, 2, 2, 0]);
        assert_eq!(picker.pick(|_| false), None);
    }

    #[test]
    fn higher_level_is_served_first() {
        let mut picker = PriorityPicker::new(5, 0.1).unwrap();
        assert_eq!(picker.pick(ready_at(&[1, 3])), Some(3));
        assert_eq!(picker.pick(ready_at(&[0, 4])), Some(4));
        assert_eq!(picker.pick(ready_at(&[0])), Some(0));
    }

    #[test]
    fn zero_share_is_strict_priority() {
        let mut picker = PriorityPicker::new(10, 0.0).unwrap();
        assert!(
            picks(&mut picker, &[0, 5, 9], 10_000)
                .iter()
                .all(|&l| l == 9)
        );
        assert_eq!(picker.stats().guarded_picks, 0);
        assert_eq!(picker.credit(), 0.0);
    }

    #[test]
    fn ten_percent_share_serves_lower_levels_one_pick_in_ten_under_sustained_load() {
        let mut picker = PriorityPicker::new(3, 0.1).unwrap();
        let served = picks(&mut picker, &[0, 1, 2], 1000);
        for window in served.chunks(10) {
            // Nine picks of the top level, then the highest lower level, every ten picks.
            assert_eq!(window, [2, 2, 2, 2, 2, 2, 2, 2, 2, 1]);
        }
        assert_eq!(picker.stats().picks_by_level, [0, 100, 900]);
        assert_eq!(picker.stats().guarded_picks, 100);
    }

    #[test]
    fn credit_does_not_accumulate_while_lower_levels_are_empty() {
        let mut picker = PriorityPicker::new(2, 0.1).unwrap();
        picks(&mut picker, &[1], 10_000);
        assert_eq!(picker.credit(), 1.0);
        // A burst of low-priority messages arrives: it gets one pick at once, then its share —
        // not the 1000 picks 10 000 uncapped top-level picks would have earned it.
        let served = picks(&mut picker, &[0, 1], 30);
        assert_eq!(served[0], 0);
        // One pick at once, then one in ten: three more in the next 29.
        assert_eq!(served.iter().filter(|&&l| l == 0).count(), 4);
        // After that one pick, back to one in ten.
        assert_eq!(&served[20..], [1, 1, 1, 1, 1, 1, 1, 1, 1, 0]);
    }

    #[test]
    fn single_level_queue_always_picks_it() {
        let mut picker = PriorityPicker::new(1, 0.5).unwrap();
        assert!(picks(&mut picker, &[0], 100).iter().all(|&l| l == 0));
        assert_eq!(picker.stats().picks_by_level, [100]);
        assert_eq!(picker.pick(|_| false), None);
    }

    #[test]
    fn nothing_ready_picks_nothing() {
        let mut picker = PriorityPicker::new(4, 0.2).unwrap();
        assert_eq!(picker.pick(|_| false), None);
        assert_eq!(picker.stats().total(), 0);
        assert_eq!(picker.credit(), 0.0);
    }

    #[test]
    fn has_ready_is_asked_only_about_existing_levels() {
        let mut picker = PriorityPicker::new(3, 0.1).unwrap();
        picker.pick(|level| {
            assert!(level < 3, "asked about level {level}");
            true
        });
    }

    #[test]
    fn out_of_range_settings_are_refused_like_the_spec_refuses_them() {
        for (levels, share, setting) in [
            (0, 0.1, "priority_levels"),
            (11, 0.1, "priority_levels"),
            (3, -0.1, "lower_priority_share"),
            (3, 0.51, "lower_priority_share"),
            (3, f64::NAN, "lower_priority_share"),
        ] {
            match PriorityPicker::new(levels, share) {
                Err(BrokerError::InvalidSetting { setting: got, .. }) => assert_eq!(got, setting),
                other => panic!("{levels} levels, share {share}: got {other:?}"),
            }
        }
        assert_eq!(
            PriorityPicker::for_spec(&QueueSpec::default()).unwrap(),
            PriorityPicker::new(1, 0.1).unwrap()
        );
    }

    #[test]
    fn recorded_lower_delivery_spends_credit_and_never_goes_negative() {
        let mut picker = PriorityPicker::new(2, 0.1).unwrap();
        let both = ready_at(&[0, 1]);
        // Ten out-of-turn lower deliveries: the guard owes nothing, but owes no one either.
        for _ in 0..10 {
            picker.record(0, &both);
        }
        assert_eq!(picker.credit(), 0.0);
        assert_eq!(
            picks(&mut picker, &[0, 1], 10),
            [1, 1, 1, 1, 1, 1, 1, 1, 1, 0]
        );
        // A recorded top-level delivery earns credit like a pick of it.
        for _ in 0..9 {
            picker.record(1, &both);
        }
        assert_eq!(picker.pick(&both), Some(0));
        assert_eq!(picker.stats().picks_by_level, [12, 18]);
    }

    proptest! {
        #[test]
        fn picks_follow_the_rule_for_random_ready_patterns(
            levels in 1u8..=10,
            share_millis in 0u64..=500,
            patterns in proptest::collection::vec(any::<u16>(), 1..300),
        ) {
            let share = share_millis as f64 / 1000.0;
            let mut picker = PriorityPicker::new(levels, share).unwrap();
            for pattern in patterns {
                let ready = |level: u8| pattern & (1 << level) != 0;
                let ready_levels: Vec<u8> = (0..levels).rev().filter(|&l| ready(l)).collect();
                let credit_after_earning = picker.credit() + share;
                let picked = picker.pick(ready);
                match ready_levels.as_slice() {
                    [] => prop_assert_eq!(picked, None),
                    [top, rest @ ..] => {
                        let picked = picked.unwrap();
                        prop_assert!(ready(picked), "picked {} which has nothing ready", picked);
                        if picked != *top {
                            prop_assert!(credit_after_earning >= 1.0 - 1e-12);
                            prop_assert_eq!(Some(&picked), rest.first());
                        } else if !rest.is_empty() {
                            prop_assert!(credit_after_earning < 1.0 - 1e-12);
                        }
                    }
                }
                prop_assert!(picker.credit() <= 1.0 + share + 1e-9);
            }
        }

        #[test]
        fn lower_share_holds_within_one_pick_under_sustained_load(
            levels in 2u8..=10,
            share_millis in 0u64..=500,
            lower_ready in proptest::collection::vec(any::<bool>(), 9),
            n in 1usize..5000,
        ) {
            let share = share_millis as f64 / 1000.0;
            let top = levels - 1;
            // The top level and at least one lower level are always ready.
            let mut ready: Vec<u8> = (0..top).filter(|&l| lower_ready[usize::from(l)]).collect();
            if ready.is_empty() {
                ready.push(0);
            }
            ready.push(top);
            let mut picker = PriorityPicker::new(levels, share).unwrap();
            let served = picks(&mut picker, &ready, n);
            let lower = served.iter().filter(|&&l| l != top).count() as f64;
            prop_assert!(
                (lower - share * n as f64).abs() <= 1.0,
                "{} lower picks of {}, share {}", lower, n, share
            );
        }
    }
}
