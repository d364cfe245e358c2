//! How long a dedup record must be kept: longer than any redelivery of the message.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::spec::DeliveryPolicy;

/// How long the inbox remembers a processed message.
///
/// The seeds' rule: the window must exceed the longest span over which the engine may
/// deliver the same message again, with a 2× safety margin — an SQS queue with a 5-minute
/// visibility timeout and 10 deliveries can redeliver for 50 minutes, so keep records for
/// (at least 100 minutes, rounded up to) 2 hours. A shorter window is refused with
/// [`Error::Invalid`] when it is built from a policy ([`checked`](Self::checked)): a record
/// that expires before the last redelivery lets that redelivery commit a second effect, and
/// nothing would show it until the duplicate is noticed downstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct DedupWindow(Duration);

impl DedupWindow {
    /// The safety margin over the redelivery span, from the seeds.
    pub const MARGIN: u32 = 2;

    /// The longest span from a message's first delivery to its last under `policy`: every
    /// delivery may hold its lease to the end, and every failed one waits the longest
    /// backoff its jitter allows before the next. Explicit `nack(delay)` delays are the
    /// handler's choice and not counted; add them with [`checked`](Self::checked) if used.
    pub fn redelivery_span(policy: &DeliveryPolicy) -> Duration {
        let deliveries = policy.max_deliveries.max(1);
        let leases = policy.lease.saturating_mul(deliveries);
        // The highest jitter unit gives the longest delay `Backoff::delay` can draw.
        (1..deliveries).fold(leases, |span, attempt| {
            span.saturating_add(policy.backoff.delay(attempt, 1.0))
        })
    }

    /// The shortest window the seeds accept for `policy`: twice its redelivery span.
    pub fn for_policy(policy: &DeliveryPolicy) -> DedupWindow {
        DedupWindow(Self::redelivery_span(policy).saturating_mul(Self::MARGIN))
    }

    /// `window`, if it covers twice the redelivery span of `policy`; else
    /// [`Error::Invalid`] saying the shortest acceptable window.
    pub fn checked(window: Duration, policy: &DeliveryPolicy) -> Result<DedupWindow> {
        let least = Self::for_policy(policy);
        if window < least.0 {
            return Err(Error::invalid(
                "dedup window",
                format!(
                    "{window:?} is shorter than twice the longest redelivery span of the \
                     delivery policy ({:?}); a redelivery after the record expired would be \
                     processed again — use at least {:?}",
                    Self::redelivery_span(policy),
                    least.0
                ),
            ));
        }
        Ok(DedupWindow(window))
    }

    /// A window chosen without a policy to check it against, for engines whose redelivery
    /// span the SDK does not know (messages arriving from outside Ferry): the caller vouches
    /// that it covers every redelivery. Zero is refused.
    pub fn fixed(window: Duration) -> Result<DedupWindow> {
        if window.is_zero() {
            return Err(Error::invalid("dedup window", "must be longer than zero"));
        }
        Ok(DedupWindow(window))
    }

    pub fn duration(self) -> Duration {
        self.0
    }
}

impl Default for DedupWindow {
    /// 24 hours, the seeds' `SET NX EX 86400`: covers the default delivery policy (about
    /// 3 minutes of redeliveries) many times over, and producer-side duplicates (an outbox
    /// relay publishing again after a crash) for a day.
    fn default() -> Self {
        DedupWindow(Duration::from_secs(24 * 60 * 60))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Backoff;

    /// The seeds' SQS example: 5 min visibility × 10 deliveries, no extra backoff.
    fn sqs_like() -> DeliveryPolicy {
        DeliveryPolicy {
            max_deliveries: 10,
            lease: Duration::from_secs(5 * 60),
            backoff: Backoff {
                base: Duration::ZERO,
                cap: Duration::ZERO,
                ..Backoff::default()
            },
            ..DeliveryPolicy::default()
        }
    }

    #[test]
    fn the_seeds_sqs_example_needs_100_minutes_and_two_hours_pass() {
        let policy = sqs_like();
        assert_eq!(
            DedupWindow::redelivery_span(&policy),
            Duration::from_secs(50 * 60)
        );
        assert_eq!(
            DedupWindow::for_policy(&policy).duration(),
            Duration::from_secs(100 * 60)
        );
        let two_hours = Duration::from_secs(2 * 60 * 60);
        assert_eq!(
            DedupWindow::checked(two_hours, &policy).unwrap().duration(),
            two_hours
        );
        let err = DedupWindow::checked(Duration::from_secs(90 * 60), &policy).unwrap_err();
        assert!(matches!(err, Error::Invalid { .. }), "{err}");
        assert!(err.to_string().contains("6000s"), "{err}");
    }

    #[test]
    fn backoff_with_its_highest_jitter_counts_between_deliveries() {
        // 5 leases of 30 s, then waits of 1, 2, 4 and 8 s, each up to 25 % longer.
        let span = DedupWindow::redelivery_span(&DeliveryPolicy::default());
        assert_eq!(
            span,
            Duration::from_secs(150) + Duration::from_secs_f64(15.0 * 1.25)
        );
        assert!(DedupWindow::default() > DedupWindow::for_policy(&DeliveryPolicy::default()));
    }

    #[test]
    fn a_zero_window_is_refused() {
        assert!(DedupWindow::fixed(Duration::ZERO).is_err());
        assert!(DedupWindow::fixed(Duration::from_secs(1)).is_ok());
    }
}
