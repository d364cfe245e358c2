//! The retry backoff as the transports that keep a declaration on the engine as JSON
//! (NATS, RabbitMQ, Redis) store it. Its fields are flattened into each transport's stored
//! settings, so the JSON keeps the field names every stored declaration already has.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::spec::Backoff;

/// A [`Backoff`] in whole milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct StoredBackoff {
    pub backoff_base_ms: u64,
    pub backoff_cap_ms: u64,
    pub backoff_multiplier: f64,
    pub backoff_jitter: f64,
}

impl StoredBackoff {
    /// `backoff` with its durations in milliseconds, saturating at `u64::MAX`.
    #[cfg(any(feature = "redis", feature = "amqp"))]
    pub fn new(backoff: &Backoff) -> StoredBackoff {
        let ms = |d: Duration| d.as_millis().min(u64::MAX as u128) as u64;
        StoredBackoff {
            backoff_base_ms: ms(backoff.base),
            backoff_cap_ms: ms(backoff.cap),
            backoff_multiplier: backoff.multiplier,
            backoff_jitter: backoff.jitter,
        }
    }

    pub fn to_backoff(self) -> Backoff {
        Backoff {
            base: Duration::from_millis(self.backoff_base_ms),
            cap: Duration::from_millis(self.backoff_cap_ms),
            multiplier: self.backoff_multiplier,
            jitter: self.backoff_jitter,
        }
    }
}
