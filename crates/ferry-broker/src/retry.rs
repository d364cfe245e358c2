//! How often a message is delivered before it is dead-lettered, and how long the broker
//! waits before each redelivery.
//!
//! Backoff is exponential with a cap and symmetric jitter, the seeds' defaults: without the
//! cap a poison message's retries drift towards never; without jitter every consumer that
//! failed together (a database blip) retries together and fails together again.

use std::time::Duration;

use crate::error::{BrokerError, Result, human};
use crate::random::RandomSource;

/// When a message has failed often enough to go to its dead-letter queue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Deliveries, the first one included, before a message is dead-lettered with reason
    /// `max_deliveries`. 1 means no retries.
    pub max_deliveries: u32,
    pub backoff: Backoff,
}

impl RetryPolicy {
    /// Upper bound of `max_deliveries`: beyond it a poison message keeps a consumer busy for
    /// days; more is almost always a unit mistake.
    pub const MAX_DELIVERIES: u32 = 1000;

    pub fn validate(&self) -> Result<()> {
        if !(1..=Self::MAX_DELIVERIES).contains(&self.max_deliveries) {
            return Err(BrokerError::InvalidSetting {
                setting: "retry.max_deliveries",
                problem: format!(
                    "must be between 1 and {} (got {}); 1 means no retries",
                    Self::MAX_DELIVERIES,
                    self.max_deliveries
                ),
            });
        }
        self.backoff.validate()
    }

    /// Whether a message that has been delivered `deliveries` times without an ack has used
    /// up its deliveries and must be dead-lettered instead of redelivered.
    pub fn is_exhausted(&self, deliveries: u32) -> bool {
        deliveries >= self.max_deliveries
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_deliveries: 5,
            backoff: Backoff::default(),
        }
    }
}

/// The wait before a redelivery: `base × multiplier^(attempt−1)`, at most `cap`, then spread
/// by ±`jitter` of itself.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// The wait after the first failed delivery (before jitter).
    pub base: Duration,
    /// The longest wait before jitter. Jitter is applied after the cap so that consumers
    /// retrying at the cap are still spread out; a delay can therefore reach
    /// `cap × (1 + jitter)`.
    pub cap: Duration,
    /// Growth per attempt; 1.0 gives a constant wait.
    pub multiplier: f64,
    /// Fraction of the delay by which it is moved up or down at random, in `[0, 1]`.
    pub jitter: f64,
}

impl Backoff {
    /// Longest `cap`; retry timers are durable, and this matches the longest delay.
    pub const MAX_CAP: Duration = Duration::from_secs(90 * 24 * 3600);

    pub fn validate(&self) -> Result<()> {
        let bad = |setting, problem: String| Err(BrokerError::InvalidSetting { setting, problem });
        if self.base.is_zero() {
            return bad(
                "retry.backoff.base",
                "must be positive; a zero wait retries a failing message in a tight loop".into(),
            );
        }
        if self.cap < self.base {
            return bad(
                "retry.backoff.cap",
                format!(
                    "must be at least the base ({}), got {}",
                    human(&self.base),
                    human(&self.cap)
                ),
            );
        }
        if self.cap > Self::MAX_CAP {
            return bad(
                "retry.backoff.cap",
                format!("must be at most 90 days, got {}", human(&self.cap)),
            );
        }
        // Written so that NaN fails too.
        if !(self.multiplier.is_finite() && self.multiplier >= 1.0) {
            return bad(
                "retry.backoff.multiplier",
                format!(
                    "must be a finite number of at least 1.0, got {}",
                    self.multiplier
                ),
            );
        }
        if !(0.0..=1.0).contains(&self.jitter) {
            return bad(
                "retry.backoff.jitter",
                format!(
                    "must be a fraction between 0.0 and 1.0 (0.25 = ±25 %), got {}",
                    self.jitter
                ),
            );
        }
        Ok(())
    }

    /// The wait before redelivering a message whose `attempt`-th delivery failed (attempt 1
    /// is the first delivery; 0 is treated as 1). Draws one random value unless `jitter` is
    /// 0.
    ///
    /// Total for any input: large attempts saturate at the cap instead of overflowing, and
    /// an unvalidated backoff yields some duration rather than a panic.
    pub(crate) fn delay(&self, attempt: u32, rng: &mut impl RandomSource) -> Duration {
        let centre = self.centre_secs(attempt);
        if self.jitter.is_nan() || self.jitter <= 0.0 {
            return secs_to_duration(centre);
        }
        // 2u − 1 is uniform in [−1, 1); the min keeps an invalid jitter from going negative.
        let spread = self.jitter.min(1.0) * (2.0 * rng.next_unit() - 1.0);
        secs_to_duration(centre * (1.0 + spread))
    }

    /// The delay for `attempt` with no jitter: the centre the jittered delays spread around.
    pub fn delay_without_jitter(&self, attempt: u32) -> Duration {
        secs_to_duration(self.centre_secs(attempt))
    }

    fn centre_secs(&self, attempt: u32) -> f64 {
        let exponent = attempt.saturating_sub(1) as f64;
        // Float arithmetic cannot overflow: a huge power becomes +∞ and the cap takes over.
        // `f64::min` returns the other operand when one is NaN, so NaN also becomes the cap.
        let grown = self.base.as_secs_f64() * self.multiplier.powf(exponent);
        grown.min(self.cap.as_secs_f64())
    }
}

fn secs_to_duration(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs).unwrap_or(if secs > 0.0 {
        Duration::MAX
    } else {
        Duration::ZERO
    })
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(5 * 60),
            multiplier: 2.0,
            jitter: 0.25,
        }
    }
}

#[cfg(test)]
#[path = "retry_tests.rs"]
mod tests;
