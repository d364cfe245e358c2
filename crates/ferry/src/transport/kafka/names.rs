//! The Kafka topics and consumer groups behind Ferry's names.
//!
//! A queue `q` is the topic `q`; a topic `t` the topic `t`. A queue or a subscription `s`
//! has its dead letters in `s.dlq` and its delayed retries in `s.retry-<rung>`. Declarations
//! are kept in the topic `ferry-catalog`. Ferry names share Kafka's charset, so the names
//! this transport derives are refused as queue, topic or subscription names.

use std::time::Duration;

use crate::error::{Error, Result};

/// Where every declaration made through this transport is kept, keyed by name.
pub(super) const CATALOG: &str = "ferry-catalog";

/// The delay ladder: one retry topic per rung, holding the retries and delayed publishes
/// whose delay is above the rung below and at most this one.
pub(super) const RUNGS: [(Duration, &str); 8] = [
    (Duration::from_secs(1), "1s"),
    (Duration::from_secs(5), "5s"),
    (Duration::from_secs(30), "30s"),
    (Duration::from_secs(120), "2m"),
    (Duration::from_secs(600), "10m"),
    (Duration::from_secs(3600), "1h"),
    (Duration::from_secs(6 * 3600), "6h"),
    (Duration::from_secs(24 * 3600), "24h"),
];

/// The longest delay the ladder holds.
pub(super) const LONGEST: Duration = RUNGS[RUNGS.len() - 1].0;

/// How many rungs a source needs so that a delay up to `longest` has one.
pub(super) fn rungs_for(longest: Duration) -> usize {
    RUNGS
        .iter()
        .position(|(rung, _)| *rung >= longest)
        .map_or(RUNGS.len(), |i| i + 1)
}

/// The rung index for `delay`, if the source's `rungs` reach it.
pub(super) fn rung_of(delay: Duration, rungs: usize) -> Option<usize> {
    RUNGS[..rungs].iter().position(|(rung, _)| *rung >= delay)
}

pub(super) fn retry_topic(source: &str, rung: usize) -> String {
    format!("{source}.retry-{}", RUNGS[rung].1)
}

pub(super) fn dead_letter_topic(source: &str) -> String {
    format!("{source}.dlq")
}

/// The consumer group of a queue or a subscription.
pub(super) fn group(source: &str) -> String {
    format!("ferry.{source}")
}

/// The consumer group reading a source's dead letters.
pub(super) fn dead_letter_group(source: &str) -> String {
    format!("ferry.{source}.dlq")
}

/// Refuses a name this transport derives for itself.
pub(super) fn check_free(name: &str) -> Result<()> {
    let derived = name == CATALOG
        || RUNGS
            .iter()
            .any(|(_, rung)| name.ends_with(&format!(".retry-{rung}")));
    if derived {
        return Err(Error::invalid(
            format!("name `{name}`"),
            "on kafka, `ferry-catalog` and names ending in `.retry-<delay>` are the \
             transport's own topics",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delay_takes_the_first_rung_at_least_as_long() {
        assert_eq!(rung_of(Duration::from_millis(100), 8), Some(0));
        assert_eq!(rung_of(Duration::from_secs(1), 8), Some(0));
        assert_eq!(rung_of(Duration::from_millis(1001), 8), Some(1));
        assert_eq!(rung_of(Duration::from_secs(3601), 6), None);
        assert_eq!(rungs_for(Duration::from_secs(900)), 6);
        assert_eq!(rungs_for(Duration::ZERO), 1);
        assert_eq!(retry_topic("q", 3), "q.retry-2m");
    }

    #[test]
    fn derived_names_are_refused() {
        assert!(check_free("q.retry-5s").is_err());
        assert!(check_free(CATALOG).is_err());
        check_free("q.retry").unwrap();
    }
}
