//! Waking the timer task only when it must: when a new timer falls before the time it
//! already plans to wake at. Every receive sets a lease deadline, so telling the task about
//! each one would wake it (and make it lock every queue) once per receive.
//!
//! The protocol: the task sets `planned_ms` to `i64::MAX` when it wakes (while it runs,
//! every new timer notifies — [`Notify`] keeps one permit, so a notification sent before
//! it sleeps again wakes it at once) and to its wake-up time just before it sleeps, after
//! reading every queue's next timer. A timer added after that read is either before the
//! planned time (and notifies) or after it (and the task sees it when it wakes).

use std::sync::atomic::{AtomicI64, Ordering};

use tokio::sync::Notify;

#[derive(Debug)]
pub(crate) struct TimerWake {
    pub notify: Notify,
    planned_ms: AtomicI64,
}

impl TimerWake {
    pub fn new() -> TimerWake {
        TimerWake {
            notify: Notify::new(),
            planned_ms: AtomicI64::new(i64::MAX),
        }
    }

    /// A timer now falls due at `at_ms` (`i64::MIN` when unknown: always wake; `i64::MAX`
    /// for none: never).
    pub fn timer_at(&self, at_ms: i64) {
        if at_ms < self.planned_ms.load(Ordering::SeqCst) {
            self.notify.notify_one();
        }
    }

    /// The task is awake and will read every queue's next timer before sleeping again.
    pub fn awake(&self) {
        self.planned_ms.store(i64::MAX, Ordering::SeqCst);
    }

    /// The task will sleep until `at_ms` unless notified.
    pub fn sleeping_until(&self, at_ms: i64) {
        self.planned_ms.store(at_ms, Ordering::SeqCst);
    }
}
