//! The clock the orchestrator reads deadlines and step timeouts by.

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
