//! Broker errors as the gRPC statuses Pub/Sub answers with: one match over the broker's
//! single classification ([`ErrorKind`]), never a table over its variants.

use ferry_broker::{BrokerError, ErrorKind};
use tonic::{Code, Status};

/// The status for a broker error, with the broker's own message (it says what was wrong
/// and what to do).
pub fn from_broker(error: BrokerError) -> Status {
    Status::new(code(error.kind()), error.to_string())
}

fn code(kind: ErrorKind) -> Code {
    match kind {
        ErrorKind::NotFound => Code::NotFound,
        ErrorKind::AlreadyExists => Code::AlreadyExists,
        // Deleting a topic that still has subscriptions, among others: what exists must
        // change first.
        ErrorKind::Conflict | ErrorKind::Fenced => Code::FailedPrecondition,
        // Acknowledgements are best effort in Pub/Sub; the callers that settle leases
        // drop this kind before it gets here, so reaching it is a precondition failure.
        ErrorKind::StaleLease => Code::FailedPrecondition,
        ErrorKind::Invalid | ErrorKind::TooLarge | ErrorKind::SchemaViolation => {
            Code::InvalidArgument
        }
        ErrorKind::OutOfRange => Code::OutOfRange,
        ErrorKind::Full | ErrorKind::DiskFull => Code::ResourceExhausted,
        ErrorKind::Unavailable => Code::Unavailable,
        ErrorKind::Unauthenticated => Code::Unauthenticated,
        ErrorKind::PermissionDenied => Code::PermissionDenied,
    }
}

/// A setting of Pub/Sub's this server does not carry out: refused when it is set, so
/// nothing is silently ignored.
pub fn unsupported(what: &str) -> Status {
    Status::unimplemented(format!("{what} is not supported by this server"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_kinds_become_pubsub_codes() {
        let missing = BrokerError::TopicNotFound {
            topic: "p.t".into(),
        };
        assert_eq!(from_broker(missing).code(), Code::NotFound);
        assert_eq!(
            from_broker(BrokerError::EmptyName).code(),
            Code::InvalidArgument
        );
        let large = BrokerError::PayloadTooLarge { size: 2, max: 1 };
        assert_eq!(from_broker(large).code(), Code::InvalidArgument);
    }
}
