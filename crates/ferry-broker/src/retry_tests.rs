use super::*;
use proptest::prelude::*;

/// A source that always returns the same bits, to pin jitter to its extremes.
struct Constant(u64);
impl RandomSource for Constant {
    fn next_u64(&mut self) -> u64 {
        self.0
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn no_jitter() -> Backoff {
    Backoff {
        jitter: 0.0,
        ..Backoff::default()
    }
}

fn setting_of(result: Result<()>) -> &'static str {
    match result {
        Err(BrokerError::InvalidSetting { setting, .. }) => setting,
        other => panic!("expected InvalidSetting, got {other:?}"),
    }
}

#[test]
fn defaults_are_the_seeds_five_deliveries_1s_5min_x2_25_percent() {
    let policy = RetryPolicy::default();
    assert_eq!(policy.max_deliveries, 5);
    assert_eq!(policy.backoff.base, secs(1));
    assert_eq!(policy.backoff.cap, secs(300));
    assert_eq!(policy.backoff.multiplier, 2.0);
    assert_eq!(policy.backoff.jitter, 0.25);
    policy.validate().unwrap();
}

#[test]
fn first_retry_waits_the_base_and_doubles_up_to_the_cap() {
    let b = no_jitter();
    let waits: Vec<u64> = (1..=11)
        .map(|a| b.delay(a, &mut Constant(0)).as_secs())
        .collect();
    assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
    assert_eq!(
        b.delay(0, &mut Constant(0)),
        secs(1),
        "attempt 0 counts as 1"
    );
}

#[test]
fn attempt_u32_max_saturates_at_the_cap_without_overflow() {
    let b = Backoff {
        multiplier: 1000.0,
        jitter: 1.0,
        ..Backoff::default()
    };
    assert_eq!(b.delay_without_jitter(u32::MAX), secs(300));
    assert_eq!(b.delay(u32::MAX, &mut Constant(0)), Duration::ZERO);
    assert!(b.delay(u32::MAX, &mut Constant(u64::MAX)) <= secs(600));
}

#[test]
fn jitter_spreads_symmetrically_around_the_centre() {
    let b = Backoff::default(); // ±25 %
    let low = b.delay(3, &mut Constant(0));
    let mid = b.delay(3, &mut Constant(1 << 63));
    let high = b.delay(3, &mut Constant(u64::MAX));
    assert_eq!(low, secs(3));
    assert_eq!(mid, secs(4));
    assert!(
        high > Duration::from_millis(4999) && high <= secs(5),
        "{high:?}"
    );
}

#[test]
fn seeded_jitter_is_reproducible_and_actually_varies() {
    let b = Backoff::default();
    let draw = |seed| {
        let mut rng = fastrand::Rng::with_seed(seed);
        (0..20).map(|_| b.delay(4, &mut rng)).collect::<Vec<_>>()
    };
    assert_eq!(draw(1), draw(1));
    let distinct: std::collections::BTreeSet<_> = draw(1).into_iter().collect();
    assert!(distinct.len() > 10, "jitter produced {distinct:?}");
}

#[test]
fn max_deliveries_counts_the_first_delivery() {
    let policy = RetryPolicy::default();
    assert!(!policy.is_exhausted(4));
    assert!(policy.is_exhausted(5));
    let once = RetryPolicy {
        max_deliveries: 1,
        ..policy
    };
    assert!(once.is_exhausted(1));
}

#[test]
fn max_deliveries_outside_1_to_1000_is_rejected() {
    for n in [0, 1001] {
        let policy = RetryPolicy {
            max_deliveries: n,
            ..RetryPolicy::default()
        };
        assert_eq!(setting_of(policy.validate()), "retry.max_deliveries");
    }
    for n in [1, 1000] {
        let policy = RetryPolicy {
            max_deliveries: n,
            ..RetryPolicy::default()
        };
        policy.validate().unwrap();
    }
}

#[test]
fn zero_base_is_rejected() {
    let b = Backoff {
        base: Duration::ZERO,
        ..Backoff::default()
    };
    assert_eq!(setting_of(b.validate()), "retry.backoff.base");
}

#[test]
fn cap_below_base_or_beyond_90_days_is_rejected() {
    let below = Backoff {
        base: secs(10),
        cap: secs(9),
        ..Backoff::default()
    };
    assert_eq!(setting_of(below.validate()), "retry.backoff.cap");
    let beyond = Backoff {
        cap: Backoff::MAX_CAP + Duration::from_millis(1),
        ..Backoff::default()
    };
    assert_eq!(setting_of(beyond.validate()), "retry.backoff.cap");
    let at = Backoff {
        cap: Backoff::MAX_CAP,
        ..Backoff::default()
    };
    at.validate().unwrap();
}

#[test]
fn multiplier_below_one_or_not_finite_is_rejected() {
    for m in [0.5, f64::INFINITY, f64::NAN] {
        let b = Backoff {
            multiplier: m,
            ..Backoff::default()
        };
        assert_eq!(setting_of(b.validate()), "retry.backoff.multiplier", "{m}");
    }
}

#[test]
fn jitter_outside_zero_to_one_is_rejected() {
    for j in [-0.01, 1.01, f64::NAN] {
        let b = Backoff {
            jitter: j,
            ..Backoff::default()
        };
        assert_eq!(setting_of(b.validate()), "retry.backoff.jitter", "{j}");
    }
}

#[test]
fn invalid_backoff_still_yields_a_delay_instead_of_panicking() {
    let b = Backoff {
        base: Duration::ZERO,
        cap: Duration::MAX,
        multiplier: f64::NAN,
        jitter: 7.0,
    };
    for attempt in [0, 1, 2, u32::MAX] {
        let _ = b.delay(attempt, &mut Constant(u64::MAX));
        let _ = b.delay(attempt, &mut Constant(0));
    }
}

fn valid_backoff() -> impl Strategy<Value = Backoff> {
    // Bases from 1 ms to 1 h in ms, caps up to 90 days, multipliers from 1 to 10.
    (
        1u64..3_600_000,
        0u64..=7_776_000_000,
        1.0f64..10.0,
        0.0f64..=1.0,
    )
        .prop_map(|(base_ms, extra_ms, multiplier, jitter)| {
            let base = Duration::from_millis(base_ms);
            let cap = (base + Duration::from_millis(extra_ms)).min(Backoff::MAX_CAP);
            Backoff {
                base,
                cap,
                multiplier,
                jitter,
            }
        })
}

proptest! {
    #[test]
    fn delay_never_exceeds_cap_plus_jitter(
        b in valid_backoff(), attempt in any::<u32>(), bits in any::<u64>()
    ) {
        prop_assert!(b.validate().is_ok());
        let d = b.delay(attempt, &mut Constant(bits));
        prop_assert!(d <= b.cap.mul_f64(1.0 + b.jitter), "{d:?} > cap {:?}", b.cap);
    }

    #[test]
    fn delay_never_falls_below_base_minus_jitter(
        b in valid_backoff(), attempt in 1u32.., bits in any::<u64>()
    ) {
        let d = b.delay(attempt, &mut Constant(bits));
        prop_assert!(d >= b.base.mul_f64(1.0 - b.jitter), "{d:?} < base {:?}", b.base);
    }

    #[test]
    fn delay_without_jitter_never_decreases_with_the_attempt(
        b in valid_backoff(), a in any::<u32>(), step in any::<u32>()
    ) {
        let b = Backoff { jitter: 0.0, ..b };
        let later = a.saturating_add(step);
        let mut rng = Constant(0);
        prop_assert!(b.delay(a, &mut rng) <= b.delay(later, &mut rng));
        prop_assert!(b.delay(a, &mut rng) <= b.delay(a.saturating_add(1), &mut rng));
    }
}
