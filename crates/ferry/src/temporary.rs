//! Temporary queues: a queue bound to the process that declared it, gone when that process
//! is — the reply queue of a request/reply exchange, which a requester that crashes must not
//! leave behind.
//!
//! Only transports whose engine ties a queue to a connection have them
//! ([`Feature::TemporaryQueues`](crate::Feature)): the embedded broker (a queue only its
//! owner consumes, gone with the process since the broker never recovers one), a Ferry
//! server (bound to the owner's consume stream, which ends with its connection) and
//! RabbitMQ (an exclusive queue, deleted with the AMQP connection). Each also deletes one
//! unused for its idle timeout. Elsewhere the declaration is [`Error::Unsupported`].

use std::time::Duration;

use crate::error::{Error, Result};
use crate::message::new_id;

/// The shortest idle timeout: the broker checks idleness about once a second.
pub const MIN_IDLE_TIMEOUT: Duration = Duration::from_secs(1);
/// The longest idle timeout.
pub const MAX_IDLE_TIMEOUT: Duration = Duration::from_secs(86_400);

/// How to declare a temporary queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TemporaryQueueDecl {
    /// Deleted after this long without any operation on it (a consume, a publish): the
    /// backstop for a connection that hangs half-open. [`MIN_IDLE_TIMEOUT`] to
    /// [`MAX_IDLE_TIMEOUT`]; 60 s by default.
    pub idle_timeout: Duration,
}

impl Default for TemporaryQueueDecl {
    fn default() -> Self {
        TemporaryQueueDecl {
            idle_timeout: Duration::from_secs(60),
        }
    }
}

impl TemporaryQueueDecl {
    pub fn idle_timeout(mut self, idle_timeout: Duration) -> TemporaryQueueDecl {
        self.idle_timeout = idle_timeout;
        self
    }

    pub fn validate(&self) -> Result<()> {
        if self.idle_timeout < MIN_IDLE_TIMEOUT || self.idle_timeout > MAX_IDLE_TIMEOUT {
            return Err(Error::invalid(
                "idle_timeout",
                format!("must be between 1 s and 1 day, got {:?}", self.idle_timeout),
            ));
        }
        Ok(())
    }
}

/// A declared temporary queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemporaryQueue {
    /// Its name, chosen by the transport; anyone may publish to it.
    pub name: String,
    /// The consumer name to consume it with ([`ConsumerOptions::name`](crate::ConsumerOptions)):
    /// where the engine lets only the owner receive, any other name is refused.
    pub owner: String,
}

/// A fresh owner name for a temporary queue.
#[cfg(any(feature = "embedded", feature = "server", feature = "amqp"))]
pub(crate) fn owner_name() -> String {
    format!("owner-{}", new_id().to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_timeout_out_of_bounds_is_invalid() {
        for bad in [
            Duration::ZERO,
            Duration::from_millis(999),
            MAX_IDLE_TIMEOUT * 2,
        ] {
            let err = TemporaryQueueDecl::default()
                .idle_timeout(bad)
                .validate()
                .unwrap_err();
            assert!(matches!(err, Error::Invalid { .. }), "{err}");
        }
        TemporaryQueueDecl::default().validate().unwrap();
    }
}
