//! Pacing a producer to a fixed rate: publish call `n` is due at `start + n × batch / rate`.
//! A schedule fixed from the start (rather than "sleep a period after each call") keeps the
//! average rate exact when calls are slow for a while: a late producer sends its overdue
//! calls at once instead of losing them.

use std::time::Duration;

/// The schedule of one producer's publish calls.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pacer {
    /// Seconds between calls; zero sends as fast as acks come back.
    interval_secs: f64,
}

impl Pacer {
    /// A producer's share of `total_rate` messages/s over `producers` producers, sending
    /// `batch` messages per call; `total_rate` 0 is unpaced.
    pub fn new(total_rate: u64, producers: u32, batch: u32) -> Pacer {
        let interval_secs = if total_rate == 0 {
            0.0
        } else {
            let per_producer = total_rate as f64 / f64::from(producers.max(1));
            f64::from(batch) / per_producer
        };
        Pacer { interval_secs }
    }

    pub fn is_paced(&self) -> bool {
        self.interval_secs > 0.0
    }

    /// When call `n` (from 0) is due, from the producer's start.
    pub fn due(&self, n: u64) -> Duration {
        Duration::from_secs_f64(self.interval_secs * n as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unpaced_producer_is_always_due() {
        let p = Pacer::new(0, 4, 100);
        assert!(!p.is_paced());
        assert_eq!(p.due(1_000), Duration::ZERO);
    }

    #[test]
    fn the_rate_is_shared_between_producers_and_counted_in_messages() {
        // 10 000 msgs/s over 4 producers in batches of 10: 250 calls/s each, 4 ms apart.
        let p = Pacer::new(10_000, 4, 10);
        assert!(p.is_paced());
        assert_eq!(p.due(0), Duration::ZERO);
        assert_eq!(p.due(1), Duration::from_millis(4));
        assert_eq!(p.due(250), Duration::from_secs(1));
    }

    #[test]
    fn the_schedule_does_not_drift_over_many_calls() {
        let p = Pacer::new(3, 1, 1);
        let due = p.due(3_000_000).as_secs_f64();
        assert!((due - 1_000_000.0).abs() < 1e-3, "{due}");
    }
}
