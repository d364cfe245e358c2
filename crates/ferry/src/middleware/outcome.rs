//! [`HandlerError`]: how a handler (or a layer) says a message was not done, and so what
//! the worker does with the delivery.

use std::fmt::Display;
use std::time::Duration;

/// Why a message was not handled. The worker maps it to a settlement: `Transient` → nack,
/// `Permanent` → reject (dead letter), `Deferred` → nack after the delay.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandlerError {
    /// Failed for now; trying again may succeed (a downstream timeout, a lock, a 503).
    /// `error` becomes the delivery's last error. `delay` overrides the backoff (a
    /// downstream's `Retry-After`); the retry layer hands such a failure back at once
    /// rather than sleeping on a delay the handler chose.
    #[error("{error}")]
    Transient {
        error: String,
        delay: Option<Duration>,
    },
    /// Will never succeed (a payload that does not decode, a rule the message breaks): to
    /// the dead-letter queue now with `reason` as its last error.
    #[error("{reason}")]
    Permanent { reason: String },
    /// Not attempted: a layer put the message off (breaker open, claimed by another
    /// consumer). Nacked after `delay`, but not a failure of the handler: not retried in
    /// process, not counted by the breaker, not dead-lettered by the poison layer. The
    /// transport still counts the delivery, so a message put off past the queue's
    /// `max_deliveries` dies there with reason `max_deliveries`.
    #[error("put off for {delay:?}: {why}")]
    Deferred { why: String, delay: Duration },
}

impl HandlerError {
    /// A transient failure with the transport's backoff.
    pub fn transient(error: impl Display) -> HandlerError {
        HandlerError::Transient {
            error: error.to_string(),
            delay: None,
        }
    }

    /// A transient failure to try again after `delay`.
    pub fn transient_after(error: impl Display, delay: Duration) -> HandlerError {
        HandlerError::Transient {
            error: error.to_string(),
            delay: Some(delay),
        }
    }

    pub fn permanent(reason: impl Display) -> HandlerError {
        HandlerError::Permanent {
            reason: reason.to_string(),
        }
    }

    pub fn deferred(why: impl Display, delay: Duration) -> HandlerError {
        HandlerError::Deferred {
            why: why.to_string(),
            delay,
        }
    }

    pub fn is_transient(&self) -> bool {
        matches!(self, HandlerError::Transient { .. })
    }

    /// The outcome label metrics and spans use: `retry`, `reject` or `deferred`.
    pub fn outcome(&self) -> &'static str {
        match self {
            HandlerError::Transient { .. } => "retry",
            HandlerError::Permanent { .. } => "reject",
            HandlerError::Deferred { .. } => "deferred",
        }
    }
}

/// An SDK error inside a handler: transient when the SDK says retrying may help (an engine
/// or connection failure, a full queue), permanent otherwise (a payload that does not
/// decode, an invalid or missing thing).
impl From<crate::Error> for HandlerError {
    fn from(error: crate::Error) -> HandlerError {
        if error.is_transient() {
            HandlerError::transient(error)
        } else {
            HandlerError::permanent(error)
        }
    }
}
