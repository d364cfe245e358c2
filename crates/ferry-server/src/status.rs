//! Broker errors as gRPC statuses and HTTP status codes, side by side so a new kind of
//! failure gets both. The message is the broker's own, which says what was wrong and what
//! to do; the code tells a client program what kind of failure it is.

use axum::http::StatusCode;
use ferry_broker::BrokerError;
use tonic::{Code, Status};

use crate::auth::Refusal;
use crate::convert::ConvertError;

/// The gRPC code for a broker error.
pub fn code(error: &BrokerError) -> Code {
    use BrokerError as E;
    match error {
        E::QueueNotFound { .. }
        | E::TopicNotFound { .. }
        | E::GroupNotFound { .. }
        | E::PartitionNotFound { .. }
        | E::MessageNotPublished { .. } => Code::NotFound,
        E::DuplicateQueue { .. } | E::QueueExists { .. } | E::TopicExists { .. } => {
            Code::AlreadyExists
        }
        E::StaleLease { .. }
        | E::UnknownMember { .. }
        | E::NotPartitionOwner { .. }
        | E::OffsetRegression { .. }
        | E::NotQueueOwner { .. }
        | E::QueueIsDeadLetterTarget { .. }
        | E::TopicHasSubscriptions { .. }
        | E::GroupNotEmpty { .. }
        | E::NotASubscription { .. }
        | E::NotADeadLetterQueue { .. }
        | E::PartitionsCanOnlyGrow { .. }
        | E::OutOfOrderSequence { .. }
        | E::SequenceOverlap { .. }
        | E::SequenceTooOld { .. } => Code::FailedPrecondition,
        E::OffsetOutOfRange { .. } => Code::OutOfRange,
        E::QueueFull { .. } | E::DiskFull { .. } => Code::ResourceExhausted,
        E::Storage(e) if e.is_resource_exhausted() => Code::ResourceExhausted,
        E::QueuePoisoned { .. }
        | E::Storage(_)
        | E::MalformedRecord { .. }
        | E::MalformedJournal { .. }
        | E::MalformedSpec { .. }
        | E::MalformedTopicSpec { .. } => Code::Unavailable,
        _ => Code::InvalidArgument,
    }
}

/// The HTTP status for a broker error: 404 unknown name, 409 exists or conflicts with
/// what exists, 412 a stale lease or another precondition on the caller's state, 413 too
/// large, 429 a full queue, 507 a full disk (RFC 4918's Insufficient Storage: the server
/// cannot store what the request needs, which retrying later may fix), 503 other storage
/// failures, 400 anything else the caller sent wrong.
pub fn http(error: &BrokerError) -> StatusCode {
    use BrokerError as E;
    match error {
        E::QueueNotFound { .. }
        | E::TopicNotFound { .. }
        | E::GroupNotFound { .. }
        | E::PartitionNotFound { .. }
        | E::MessageNotPublished { .. } => StatusCode::NOT_FOUND,
        E::DuplicateQueue { .. }
        | E::QueueExists { .. }
        | E::TopicExists { .. }
        | E::QueueIsDeadLetterTarget { .. }
        | E::TopicHasSubscriptions { .. }
        | E::GroupNotEmpty { .. }
        | E::NotASubscription { .. }
        | E::NotADeadLetterQueue { .. }
        | E::NotQueueOwner { .. }
        | E::PartitionsCanOnlyGrow { .. } => StatusCode::CONFLICT,
        E::StaleLease { .. }
        | E::UnknownMember { .. }
        | E::NotPartitionOwner { .. }
        | E::OffsetRegression { .. }
        | E::OutOfOrderSequence { .. }
        | E::SequenceOverlap { .. }
        | E::SequenceTooOld { .. } => StatusCode::PRECONDITION_FAILED,
        E::PayloadTooLarge { .. } | E::BatchTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        E::QueueFull { .. } => StatusCode::TOO_MANY_REQUESTS,
        E::DiskFull { .. } => StatusCode::INSUFFICIENT_STORAGE,
        E::Storage(e) if e.is_resource_exhausted() => StatusCode::INSUFFICIENT_STORAGE,
        E::QueuePoisoned { .. }
        | E::Storage(_)
        | E::MalformedRecord { .. }
        | E::MalformedJournal { .. }
        | E::MalformedSpec { .. }
        | E::MalformedTopicSpec { .. } => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::BAD_REQUEST,
    }
}

/// A refusal's gRPC status: 16 no valid token, 7 a token without the permission, 8 a
/// batch over the limit or a spent quota.
pub fn from_refusal(refusal: Refusal) -> Status {
    let code = match refusal {
        Refusal::Unauthenticated => Code::Unauthenticated,
        Refusal::Forbidden { .. } => Code::PermissionDenied,
        Refusal::BatchTooLarge { .. } | Refusal::OverQuota { .. } => Code::ResourceExhausted,
    };
    Status::new(code, refusal.to_string())
}

/// A refusal's HTTP status and error code: 401 no valid token, 403 a token without the
/// permission, 413 a batch over the limit, 429 a spent quota.
pub fn http_refusal(refusal: &Refusal) -> (StatusCode, &'static str) {
    match refusal {
        Refusal::Unauthenticated => (StatusCode::UNAUTHORIZED, "unauthenticated"),
        Refusal::Forbidden { .. } => (StatusCode::FORBIDDEN, "forbidden"),
        Refusal::BatchTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "batch_too_large"),
        Refusal::OverQuota { .. } => (StatusCode::TOO_MANY_REQUESTS, "over_quota"),
    }
}

pub fn from_broker(error: BrokerError) -> Status {
    Status::new(code(&error), error.to_string())
}

pub fn from_convert(error: ConvertError) -> Status {
    match error {
        ConvertError::Broker(e) => from_broker(e),
        ConvertError::Unsupported { .. } => Status::unimplemented(error.to_string()),
        other => Status::invalid_argument(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_of_failure_get_their_codes() {
        let missing = BrokerError::QueueNotFound { queue: "q".into() };
        assert_eq!(from_broker(missing).code(), Code::NotFound);
        let stale = BrokerError::StaleLease { seq: 1, token: 2 };
        assert_eq!(from_broker(stale).code(), Code::FailedPrecondition);
        let bad = ferry_broker::Name::new("").unwrap_err();
        assert_eq!(from_broker(bad).code(), Code::InvalidArgument);
        let unsupported = ConvertError::Unsupported { what: "x" };
        assert_eq!(from_convert(unsupported).code(), Code::Unimplemented);
    }

    #[test]
    fn a_full_disk_is_resource_exhausted_not_an_internal_failure() {
        let refused = BrokerError::DiskFull {
            path: "/data".into(),
            available: 10,
            reserve: 64,
        };
        assert_eq!(code(&refused), Code::ResourceExhausted);
        assert_eq!(http(&refused), StatusCode::INSUFFICIENT_STORAGE);
        let failed = BrokerError::Storage(ferry_storage_error());
        assert_eq!(code(&failed), Code::ResourceExhausted);
        assert_eq!(http(&failed), StatusCode::INSUFFICIENT_STORAGE);
        assert!(from_broker(failed).message().contains("the disk is full"));
        // Other storage failures stay what they were.
        let closed = BrokerError::Storage(ferry_broker::StorageError::Closed);
        assert_eq!(code(&closed), Code::Unavailable);
        assert_eq!(http(&closed), StatusCode::SERVICE_UNAVAILABLE);
    }

    fn ferry_storage_error() -> ferry_broker::StorageError {
        ferry_broker::StorageError::DiskFull {
            path: "/data/queues/q/journal".into(),
        }
    }
}
