//! [`RelayConfig`]: how a relay claims, publishes, retries and cleans up.

use std::time::Duration;

use crate::breaker::BreakerConfig;
use crate::error::{Error, Result};
use crate::spec::{Backoff, DeliveryPolicy};

/// A relay's settings; every field is checked when the relay is built.
#[derive(Debug, Clone, PartialEq)]
pub struct RelayConfig {
    /// Written into `claimed_by`; unique per relay (a ULID-based one by default).
    pub name: String,
    /// Most rows claimed per round.
    pub batch_size: usize,
    /// How long a claim keeps other relays off a row. A relay that dies holding rows
    /// delays them by at most this much. Leases are stamped by each relay's clock, so
    /// the relays' clocks must agree to well within it.
    pub lease: Duration,
    /// Longest wait for one publish; must be well inside the lease so a slow publish is
    /// given up before another relay may claim the same row.
    pub publish_timeout: Duration,
    /// Longest sleep between rounds with nothing to do. On PostgreSQL, `enqueue` also
    /// wakes the relay through LISTEN/NOTIFY, so this only bounds the delay when a
    /// notification is lost (a reconnect) or a retry comes due.
    pub poll_interval: Duration,
    /// Wait before retrying a failed row, by its attempts (with jitter).
    pub backoff: Backoff,
    /// When publishing counts as broken (transient errors in a row) and for how long the
    /// relay then stops calling the broker.
    pub breaker: BreakerConfig,
    /// Published rows are deleted this long after publishing (kept meanwhile for
    /// inspection).
    pub retention: Duration,
    /// How often published rows past their retention are deleted.
    pub cleanup_interval: Duration,
    /// Refuse to build the relay (`Unsupported`) when the transport has no dedup, instead
    /// of publishing without a dedup id and leaving duplicates to the consumer's inbox.
    pub require_dedup: bool,
}

impl Default for RelayConfig {
    /// Batches of 100, a 30 s lease, a 10 s publish timeout, polling every second, retries
    /// from 1 s doubling to 1 min, the default breaker, a day's retention cleaned every
    /// minute, and dedup where the transport has it.
    fn default() -> Self {
        RelayConfig {
            name: format!("relay-{}", crate::message::new_id()),
            batch_size: 100,
            lease: Duration::from_secs(30),
            publish_timeout: Duration::from_secs(10),
            poll_interval: Duration::from_secs(1),
            backoff: Backoff {
                cap: Duration::from_secs(60),
                ..Backoff::default()
            },
            breaker: BreakerConfig::default(),
            retention: Duration::from_secs(24 * 3600),
            cleanup_interval: Duration::from_secs(60),
            require_dedup: false,
        }
    }
}

impl RelayConfig {
    pub fn validate(&self) -> Result<()> {
        let bad = |what: &str, problem: &str| Err(Error::invalid(format!("relay {what}"), problem));
        if self.name.is_empty() || self.name.len() > 200 {
            return bad("name", "must be 1 to 200 characters");
        }
        if self.batch_size == 0 {
            return bad("batch_size", "must be at least 1");
        }
        if self.publish_timeout.is_zero() || self.publish_timeout * 2 > self.lease {
            return bad(
                "publish_timeout",
                "must be above zero and at most half the lease, so a slow publish ends before \
                 another relay may claim its row",
            );
        }
        if self.poll_interval.is_zero() {
            return bad("poll_interval", "must be longer than zero");
        }
        if self.cleanup_interval.is_zero() {
            return bad("cleanup_interval", "must be longer than zero");
        }
        if self.breaker.open_for.is_zero() {
            return bad("breaker.open_for", "must be longer than zero");
        }
        DeliveryPolicy {
            backoff: self.backoff,
            ..DeliveryPolicy::default()
        }
        .validate()
    }

    pub(crate) fn lease_ms(&self) -> i64 {
        i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_publish_timeout_beyond_half_the_lease_is_refused() {
        RelayConfig::default().validate().unwrap();
        let config = RelayConfig {
            lease: Duration::from_secs(10),
            publish_timeout: Duration::from_secs(6),
            ..RelayConfig::default()
        };
        assert!(matches!(config.validate(), Err(Error::Invalid { .. })));
        let config = RelayConfig {
            batch_size: 0,
            ..RelayConfig::default()
        };
        assert!(matches!(config.validate(), Err(Error::Invalid { .. })));
    }
}
