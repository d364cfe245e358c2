//! Broker errors as gRPC statuses and HTTP status codes, side by side so a new kind of
//! failure gets both. The message is the broker's own, which says what was wrong and what
//! to do; the code tells a client program what kind of failure it is.

use axum::http::StatusCode;
use ferry_broker::{BrokerError, ErrorKind};
use tonic::{Code, Status};

use crate::auth::Refusal;
use crate::convert::ConvertError;

/// The gRPC code of each kind. A conflict with what exists, a stale lease and a fenced
/// view are all `FAILED_PRECONDITION` (the caller's or the broker's state must change
/// first), told apart by the `ferry-error-kind` metadata; an oversized payload stays
/// `INVALID_ARGUMENT`, as it has always been answered.
pub fn grpc_code(kind: ErrorKind) -> Code {
    match kind {
        ErrorKind::NotFound => Code::NotFound,
        ErrorKind::AlreadyExists => Code::AlreadyExists,
        ErrorKind::Conflict | ErrorKind::StaleLease | ErrorKind::Fenced => Code::FailedPrecondition,
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

/// The HTTP status for a broker error, from its kind.
pub fn http(error: &BrokerError) -> StatusCode {
    http_status(error.kind())
}

/// The HTTP status of each kind: 404 unknown name, 409 exists or conflicts with what
/// exists, 412 a stale lease or another precondition on the caller's state, 413 too large,
/// 422 a payload that does not match the schema its channel requires, 429 a full queue, 507 a full disk (RFC 4918's Insufficient Storage: the server cannot
/// store what the request needs, which retrying later may fix), 503 other storage
/// failures, 400 anything else the caller sent wrong.
pub fn http_status(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::AlreadyExists | ErrorKind::Conflict => StatusCode::CONFLICT,
        ErrorKind::StaleLease | ErrorKind::Fenced => StatusCode::PRECONDITION_FAILED,
        ErrorKind::Invalid | ErrorKind::OutOfRange => StatusCode::BAD_REQUEST,
        ErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        // Well-formed, but its content is not what the channel accepts.
        ErrorKind::SchemaViolation => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorKind::Full => StatusCode::TOO_MANY_REQUESTS,
        ErrorKind::DiskFull => StatusCode::INSUFFICIENT_STORAGE,
        ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::Unauthenticated => StatusCode::UNAUTHORIZED,
        ErrorKind::PermissionDenied => StatusCode::FORBIDDEN,
    }
}

/// A refusal's gRPC status: 16 no or an unknown token, 7 a token without the permission,
/// 8 a batch over the limit or a spent quota. Every gRPC refusal passes here, so it is
/// logged here.
pub fn from_refusal(refusal: Refusal) -> Status {
    refusal.log("grpc");
    let (code, kind) = match refusal {
        Refusal::NoToken | Refusal::UnknownToken => {
            (Code::Unauthenticated, Some(ErrorKind::Unauthenticated))
        }
        Refusal::Forbidden { .. } | Refusal::NoMetrics { .. } => {
            (Code::PermissionDenied, Some(ErrorKind::PermissionDenied))
        }
        Refusal::BatchTooLarge { .. } | Refusal::OverQuota { .. } => {
            (Code::ResourceExhausted, None)
        }
    };
    let mut status = Status::new(code, refusal.to_string());
    // The kind as for broker errors, so a client classifies a refusal the same way.
    if let Some(kind) = kind {
        status.metadata_mut().insert(
            ERROR_KIND_METADATA,
            tonic::metadata::MetadataValue::from_static(kind.as_str()),
        );
    }
    status
}

/// A refusal's HTTP status and error code: 401 no or an unknown token, 403 a token without the
/// permission, 413 a batch over the limit, 429 a spent quota.
pub fn http_refusal(refusal: &Refusal) -> (StatusCode, &'static str) {
    match refusal {
        Refusal::NoToken | Refusal::UnknownToken => (StatusCode::UNAUTHORIZED, "unauthenticated"),
        Refusal::Forbidden { .. } | Refusal::NoMetrics { .. } => {
            (StatusCode::FORBIDDEN, "forbidden")
        }
        Refusal::BatchTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "batch_too_large"),
        Refusal::OverQuota { .. } => (StatusCode::TOO_MANY_REQUESTS, "over_quota"),
    }
}

/// A broker error as a gRPC status: the code from its kind, the broker's message, and the
/// kind itself in the `ferry-error-kind` metadata, so a client tells a conflict from a
/// stale lease without parsing the message.
pub fn from_broker(error: BrokerError) -> Status {
    let kind = error.kind();
    let missing = match &error {
        BrokerError::QueueNotFound { queue } => Some(("queue", queue.clone())),
        BrokerError::TopicNotFound { topic } => Some(("topic", topic.clone())),
        _ => None,
    };
    let mut status = Status::new(grpc_code(kind), error.to_string());
    let metadata = status.metadata_mut();
    metadata.insert(
        ERROR_KIND_METADATA,
        tonic::metadata::MetadataValue::from_static(kind.as_str()),
    );
    // A name that is no valid metadata value (it was refused as a name anyway) goes in the
    // message only.
    if let Some((what, name)) = missing
        && let Ok(name) = tonic::metadata::MetadataValue::try_from(name)
    {
        metadata.insert(
            MISSING_KIND_METADATA,
            tonic::metadata::MetadataValue::from_static(what),
        );
        metadata.insert(MISSING_NAME_METADATA, name);
    }
    status
}

/// The gRPC metadata key under which a failure's kind travels (documented in `ferry.proto`).
pub(crate) use ferry_error_kind::METADATA_KEY as ERROR_KIND_METADATA;
use ferry_error_kind::{
    MISSING_KIND_METADATA_KEY as MISSING_KIND_METADATA,
    MISSING_NAME_METADATA_KEY as MISSING_NAME_METADATA,
};

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
    fn a_status_names_its_kind_so_kinds_sharing_a_code_are_told_apart() {
        let name = ferry_broker::Name::new("orders").unwrap();
        let conflict = from_broker(BrokerError::TopicHasSubscriptions {
            topic: name.clone(),
            subscription: name,
        });
        let stale = from_broker(BrokerError::StaleLease { seq: 1, token: 2 });
        assert_eq!(conflict.code(), stale.code());
        let kind = |status: &Status| {
            status
                .metadata()
                .get(ERROR_KIND_METADATA)
                .map(|v| v.to_str().unwrap().to_owned())
        };
        assert_eq!(kind(&conflict).as_deref(), Some("conflict"));
        assert_eq!(kind(&stale).as_deref(), Some("stale_lease"));
    }

    #[test]
    fn a_full_disk_is_resource_exhausted_not_an_internal_failure() {
        let refused = BrokerError::DiskFull {
            path: "/data".into(),
            available: 10,
            reserve: 64,
        };
        assert_eq!(grpc_code(refused.kind()), Code::ResourceExhausted);
        assert_eq!(http(&refused), StatusCode::INSUFFICIENT_STORAGE);
        let failed = BrokerError::Storage(ferry_storage_error());
        assert_eq!(grpc_code(failed.kind()), Code::ResourceExhausted);
        assert_eq!(http(&failed), StatusCode::INSUFFICIENT_STORAGE);
        assert!(from_broker(failed).message().contains("the disk is full"));
        // Other storage failures stay what they were.
        let closed = BrokerError::Storage(ferry_broker::StorageError::Closed);
        assert_eq!(grpc_code(closed.kind()), Code::Unavailable);
        assert_eq!(http(&closed), StatusCode::SERVICE_UNAVAILABLE);
    }

    fn ferry_storage_error() -> ferry_broker::StorageError {
        ferry_broker::StorageError::DiskFull {
            path: "/data/queues/q/journal".into(),
        }
    }
}
