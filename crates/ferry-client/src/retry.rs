//! Retrying calls that are safe to retry, with exponential backoff and jitter.

use std::future::Future;
use std::time::Duration;

use crate::error::{ClientError, Result};

/// How a retried call waits: `base × 2^attempt`, at most `cap`, spread by ±25 %.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Tries in all, the first included; 1 never retries.
    pub attempts: u32,
    pub base: Duration,
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 6,
            base: Duration::from_millis(100),
            cap: Duration::from_secs(5),
        }
    }
}

impl RetryPolicy {
    /// The wait before try `attempt + 1` (attempt counts from 0).
    pub fn delay(&self, attempt: u32) -> Duration {
        let raw = self
            .base
            .saturating_mul(1u32 << attempt.min(16))
            .min(self.cap);
        raw.mul_f64(0.75 + fastrand::f64() * 0.5)
    }

    /// Runs `call` until it succeeds, fails for good, or runs out of attempts.
    pub async fn run<T, F, Fut>(&self, mut call: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let mut attempt = 0;
        loop {
            match call().await {
                Err(error) if self.retries(&error, attempt) => {
                    tracing::debug!(%error, attempt, "retrying");
                    tokio::time::sleep(self.delay(attempt)).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// Whether try `attempt` (from 0), which failed with `error`, is tried again: for a
    /// caller that cannot hand its state to [`run`](Self::run)'s closure.
    pub(crate) fn retries(&self, error: &ClientError, attempt: u32) -> bool {
        error.is_transient() && attempt + 1 < self.attempts.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn transient_failures_are_retried_and_others_are_not() {
        let policy = RetryPolicy {
            attempts: 3,
            base: Duration::from_millis(1),
            cap: Duration::from_millis(2),
        };
        let mut calls = 0;
        let got: Result<()> = policy
            .run(|| {
                calls += 1;
                async { Err(tonic::Status::unavailable("down").into()) }
            })
            .await;
        assert!(got.is_err());
        assert_eq!(calls, 3);
        let mut calls = 0;
        let got: Result<()> = policy
            .run(|| {
                calls += 1;
                async { Err(tonic::Status::invalid_argument("bad").into()) }
            })
            .await;
        assert!(matches!(got, Err(ClientError::Server { .. })));
        assert_eq!(calls, 1);
    }

    #[test]
    fn delays_grow_to_the_cap_with_jitter() {
        let p = RetryPolicy::default();
        for attempt in 0..20 {
            let d = p.delay(attempt);
            assert!(d <= p.cap.mul_f64(1.25) && d >= p.base.mul_f64(0.75));
        }
        assert!(p.delay(10) >= p.cap.mul_f64(0.75));
    }
}
