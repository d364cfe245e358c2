//! Retries spread out: exponential, capped, jittered.

use super::Rule;
use super::view::endpoints;
use crate::Severity;

/// FT003. Seed: patterns guide Process step 6 ("exponential backoff with jitter …
/// sleep = min(base * 2^attempt, cap) + random(0, jitter) … prevents thundering herd")
/// and Rule 2 ("runaway retry storms"); backend guide completion criteria ("consumer
/// failure handling (retry policy, DLQ routing) is defined").
pub const BACKOFF: Rule = Rule {
    id: "FT003",
    name: "retry-backoff",
    severity: Severity::Error,
    summary: "retries back off exponentially, with a cap and jitter",
    check: |topology, report| {
        for e in endpoints(topology) {
            let Some(retry) = e.delivery.and_then(|d| d.retry.as_ref()) else {
                report.add(
                    &e.element,
                    e.line,
                    "has no retry policy: failed messages come back at once, all together",
                    "add `delivery.retry: { initial: 1s, multiplier: 2, max: 5m, jitter: 0.25 }`",
                );
                continue;
            };
            match retry.multiplier {
                Some(m) if m > 1.0 => {}
                _ => report.add(
                    &e.element,
                    e.line,
                    "retries do not back off exponentially (no multiplier above 1)",
                    "set `delivery.retry.multiplier` to 2",
                ),
            }
            match retry.max {
                None => report.add(
                    &e.element,
                    e.line,
                    "retry backoff has no cap: delays grow without bound",
                    "set `delivery.retry.max`, e.g. 5m",
                ),
                Some(max) if max < retry.initial => report.add(
                    &e.element,
                    e.line,
                    format!(
                        "retry cap {max} is below the initial delay {}",
                        retry.initial
                    ),
                    "set `delivery.retry.max` above `delivery.retry.initial`",
                ),
                Some(_) => {}
            }
            match retry.jitter {
                Some(j) if j > 0.0 && j <= 1.0 => {}
                Some(j) => report.add(
                    &e.element,
                    e.line,
                    format!("retry jitter {j} is not between 0 and 1"),
                    "set `delivery.retry.jitter` to 0.25",
                ),
                None => report.add(
                    &e.element,
                    e.line,
                    "retries have no jitter: consumers retry in lockstep after an outage",
                    "set `delivery.retry.jitter` to 0.25",
                ),
            }
        }
    },
};

#[cfg(test)]
mod tests {
    use crate::rules::test_support::{clean_with, findings_of};

    const INVENTORY: &str = "retry: { initial: 1s, multiplier: 2, max: 30s, jitter: 0.25 }";
    const SUB: &str = "subscription ecommerce-order-events/inventory-reservation.fifo";

    #[test]
    fn linear_uncapped_unjittered_retries_are_each_reported() {
        let yaml = clean_with(INVENTORY, "retry: { initial: 1s, multiplier: 1 }");
        assert_eq!(
            findings_of(&yaml, "FT003"),
            [
                format!("{SUB}: retries do not back off exponentially (no multiplier above 1)"),
                format!("{SUB}: retry backoff has no cap: delays grow without bound"),
                format!(
                    "{SUB}: retries have no jitter: consumers retry in lockstep after an outage"
                ),
            ]
        );
    }

    #[test]
    fn a_cap_below_the_initial_delay_or_a_jitter_above_one_is_an_error() {
        let yaml = clean_with(
            INVENTORY,
            "retry: { initial: 1m, multiplier: 2, max: 30s, jitter: 1.5 }",
        );
        assert_eq!(
            findings_of(&yaml, "FT003"),
            [
                format!("{SUB}: retry cap 30s is below the initial delay 1m"),
                format!("{SUB}: retry jitter 1.5 is not between 0 and 1"),
            ]
        );
    }

    #[test]
    fn a_cap_equal_to_the_initial_delay_and_full_jitter_are_fine() {
        let yaml = clean_with(
            INVENTORY,
            "retry: { initial: 30s, multiplier: 1.5, max: 30s, jitter: 1 }",
        );
        assert!(findings_of(&yaml, "FT003").is_empty());
    }

    #[test]
    fn no_retry_policy_is_an_error() {
        let yaml = clean_with(&format!("          {INVENTORY}\n"), "");
        assert_eq!(
            findings_of(&yaml, "FT003"),
            [format!(
                "{SUB}: has no retry policy: failed messages come back at once, all together"
            )]
        );
    }
}
