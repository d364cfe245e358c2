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
    /// process, not counted by the breaker, not dead-lettered by the poison layer on this
    /// delivery. The transport still counts the delivery, so a message put off past the
    /// queue's `max_deliveries` dies there with reason `max_deliveries` — or sooner, at the
    /// poison layer, when its limit is below the queue's.
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

/// An SDK error inside a handler. Permanent only when the message itself is at fault — a
/// payload that does not decode, something the engine refuses as invalid — since
/// dead-lettering is for messages that can never succeed. Everything else is transient:
/// an engine or connection failure, a full queue, a connection closed by a shutdown, even
/// a missing queue (an operator can create it); the poison layer still dead-letters such
/// a message once its deliveries are used up. Refused credentials are permanent too: the
/// engine refuses the same credentials the same way on every try, so retrying (in process
/// or by redelivery) only spends attempts; the dead-letter queue keeps the messages for a
/// redrive once the credentials or grants are fixed.
impl From<crate::Error> for HandlerError {
    fn from(error: crate::Error) -> HandlerError {
        match error {
            crate::Error::Payload(_)
            | crate::Error::Invalid { .. }
            | crate::Error::Unauthorized { .. }
            | crate::Error::Forbidden { .. } => HandlerError::permanent(error),
            _ => HandlerError::transient(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    #[test]
    fn only_errors_the_message_causes_are_permanent() {
        let bad_json = serde_json::from_slice::<u8>(b"{").unwrap_err();
        assert!(matches!(
            HandlerError::from(Error::Payload(bad_json)),
            HandlerError::Permanent { .. }
        ));
        assert!(!HandlerError::from(Error::invalid("message", "too large")).is_transient());
        for refused in [
            Error::unauthorized("no token"),
            Error::forbidden("no grant"),
        ] {
            assert!(!refused.is_transient());
            assert!(matches!(
                HandlerError::from(refused),
                HandlerError::Permanent { .. }
            ));
        }
        for passing in [
            Error::Closed,
            Error::Timeout(Duration::from_secs(1)),
            Error::NotFound {
                kind: "queue",
                name: "invoices".into(),
            },
        ] {
            assert!(HandlerError::from(passing).is_transient());
        }
    }
}
