//! [`CircuitBreaker`]: stop calling something that keeps failing, and try it again later.
//!
//! Closed (calls go through) → after `failure_threshold` failures in a row, open (calls are
//! refused at once, so a dead downstream costs nothing and work waits safely where it is)
//! → after `open_for`, half-open: one trial call goes through; its success closes the
//! breaker, its failure opens it again for another `open_for`.
//!
//! Shared by the outbox relay (a broker outage) and the handler middleware (a downstream
//! outage). Written here rather than taken from a crate because both users need the state
//! as plain data (for metrics and tests) and the logic is a few lines.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The breaker's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerConfig {
    /// Failures in a row that open the breaker.
    pub failure_threshold: u32,
    /// How long it stays open before one trial call is let through.
    pub open_for: Duration,
}

impl Default for BreakerConfig {
    /// Opens after 5 failures in a row (the seeds' advice for a publisher), for 5 s.
    fn default() -> Self {
        BreakerConfig {
            failure_threshold: 5,
            open_for: Duration::from_secs(5),
        }
    }
}

/// Where the breaker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    Closed,
    /// Refusing calls until the given instant.
    Open {
        until: Instant,
    },
    /// One trial call is under way; others are refused until it reports.
    HalfOpen,
}

/// A circuit breaker; share it behind an `Arc`.
#[derive(Debug)]
pub struct CircuitBreaker {
    config: BreakerConfig,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    state: BreakerState,
    failures_in_a_row: u32,
}

impl CircuitBreaker {
    pub fn new(config: BreakerConfig) -> CircuitBreaker {
        CircuitBreaker {
            config: BreakerConfig {
                failure_threshold: config.failure_threshold.max(1),
                ..config
            },
            inner: Mutex::new(Inner {
                state: BreakerState::Closed,
                failures_in_a_row: 0,
            }),
        }
    }

    pub fn config(&self) -> BreakerConfig {
        self.config
    }

    pub fn state(&self) -> BreakerState {
        self.lock().state
    }

    /// Whether a call may go ahead now. An open breaker whose time is up lets exactly one
    /// caller through (half-open) and refuses the rest until that one reports.
    pub fn allow(&self) -> bool {
        self.allow_at(Instant::now())
    }

    /// How long until the breaker lets a call through; zero when it does now.
    pub fn wait(&self) -> Duration {
        match self.lock().state {
            BreakerState::Open { until } => until.saturating_duration_since(Instant::now()),
            BreakerState::Closed | BreakerState::HalfOpen => Duration::ZERO,
        }
    }

    pub fn record_success(&self) {
        let mut inner = self.lock();
        inner.failures_in_a_row = 0;
        inner.state = BreakerState::Closed;
    }

    pub fn record_failure(&self) {
        self.record_failure_at(Instant::now());
    }

    fn allow_at(&self, now: Instant) -> bool {
        let mut inner = self.lock();
        match inner.state {
            BreakerState::Closed => true,
            BreakerState::Open { until } if now >= until => {
                inner.state = BreakerState::HalfOpen;
                true
            }
            BreakerState::Open { .. } | BreakerState::HalfOpen => false,
        }
    }

    fn record_failure_at(&self, now: Instant) {
        let mut inner = self.lock();
        inner.failures_in_a_row = inner.failures_in_a_row.saturating_add(1);
        let trial_failed = inner.state == BreakerState::HalfOpen;
        if trial_failed || inner.failures_in_a_row >= self.config.failure_threshold {
            inner.state = BreakerState::Open {
                until: now + self.config.open_for,
            };
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The state stays consistent whatever panicked while holding the lock: every
        // update is a single assignment.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker(threshold: u32) -> CircuitBreaker {
        CircuitBreaker::new(BreakerConfig {
            failure_threshold: threshold,
            open_for: Duration::from_secs(10),
        })
    }

    #[test]
    fn opens_after_the_threshold_of_failures_in_a_row() {
        let b = breaker(3);
        let now = Instant::now();
        b.record_failure_at(now);
        b.record_failure_at(now);
        assert!(b.allow_at(now));
        b.record_failure_at(now);
        assert_eq!(
            b.state(),
            BreakerState::Open {
                until: now + Duration::from_secs(10)
            }
        );
        assert!(!b.allow_at(now + Duration::from_secs(9)));
    }

    #[test]
    fn a_success_resets_the_count() {
        let b = breaker(2);
        let now = Instant::now();
        b.record_failure_at(now);
        b.record_success();
        b.record_failure_at(now);
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[test]
    fn half_open_lets_one_trial_through_and_its_result_decides() {
        let b = breaker(1);
        let now = Instant::now();
        b.record_failure_at(now);
        let later = now + Duration::from_secs(10);
        assert!(b.allow_at(later), "the trial call");
        assert!(!b.allow_at(later), "others wait for the trial");
        b.record_failure_at(later);
        assert!(!b.allow_at(later + Duration::from_secs(1)), "open again");
        let much_later = later + Duration::from_secs(10);
        assert!(b.allow_at(much_later));
        b.record_success();
        assert!(b.allow_at(much_later) && b.allow_at(much_later), "closed");
    }
}
