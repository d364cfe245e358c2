//! The clock the orchestrator reads deadlines and step timeouts by.

use std::time::Duration;

/// Time as the orchestrator reads it (deadlines, step timeouts); tests substitute their own.
pub trait Clock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        crate::message::now_ms()
    }
}

/// `d` in whole milliseconds, saturating: `as i64` would wrap a huge duration (a deadline
/// of `Duration::MAX` meaning "none") to a negative one, a deadline already past.
pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
