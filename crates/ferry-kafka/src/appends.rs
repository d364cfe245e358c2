//! Wakes fetches waiting in a long poll when records are appended. Appends made through
//! this front end wake them at once; appends through Ferry's other APIs are seen by the
//! waiting fetch's periodic re-read ([`RECHECK`]), as the broker offers no append signal.

use std::time::Duration;

use tokio::sync::watch;

/// How often a waiting fetch reads again, for records appended through Ferry's other APIs.
pub const RECHECK: Duration = Duration::from_millis(100);

/// A counter of appends; a waiter watches it change.
pub struct Appends {
    count: watch::Sender<u64>,
}

impl Default for Appends {
    fn default() -> Self {
        Appends {
            count: watch::Sender::new(0),
        }
    }
}

impl Appends {
    pub fn appended(&self) {
        self.count.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub fn watch(&self) -> watch::Receiver<u64> {
        self.count.subscribe()
    }
}
