//! SQS errors: one code per way a request fails, each with the name the JSON protocol
//! gives it (`__type`, the modeled exception's shape), the code the query protocol gives
//! it (which the JSON protocol repeats in `x-amzn-query-error`), its fault side and its
//! HTTP status, side by side so a new code gets all four.
//!
//! Broker failures are mapped from their kind ([`from_broker`]), one match over
//! [`ErrorKind`], never from the variants; a few kinds look at the variant inside their
//! arm where SQS has a finer code (a missing queue).

use ferry_broker::{BrokerError, ErrorKind};

/// The SQS error codes Ferry answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    QueueDoesNotExist,
    QueueNameExists,
    InvalidParameterValue,
    MissingParameter,
    InvalidAttributeName,
    InvalidAttributeValue,
    InvalidMessageContents,
    ReceiptHandleIsInvalid,
    MessageNotInflight,
    BatchEntryIdsNotDistinct,
    TooManyEntriesInBatchRequest,
    EmptyBatchRequest,
    InvalidBatchEntryId,
    BatchRequestTooLong,
    PurgeQueueInProgress,
    OverLimit,
    ResourceNotFoundException,
    InvalidAction,
    ServiceUnavailable,
    InternalFailure,
    /// The access key's permissions do not cover the call.
    AccessDenied,
    /// A SigV4 refusal: [`crate::sigv4::SignatureError`]'s codes.
    MissingAuthenticationToken,
    IncompleteSignature,
    InvalidClientTokenId,
    SignatureDoesNotMatch,
}

impl Code {
    /// The JSON protocol's `__type` (after `com.amazonaws.sqs#`): the modeled exception's
    /// shape name, or the query code for errors the model does not name.
    pub fn shape(self) -> &'static str {
        match self {
            Code::QueueDoesNotExist => "QueueDoesNotExist",
            Code::QueueNameExists => "QueueNameExists",
            Code::InvalidAttributeName => "InvalidAttributeName",
            Code::InvalidAttributeValue => "InvalidAttributeValue",
            Code::InvalidMessageContents => "InvalidMessageContents",
            Code::ReceiptHandleIsInvalid => "ReceiptHandleIsInvalid",
            Code::MessageNotInflight => "MessageNotInflight",
            Code::BatchEntryIdsNotDistinct => "BatchEntryIdsNotDistinct",
            Code::TooManyEntriesInBatchRequest => "TooManyEntriesInBatchRequest",
            Code::EmptyBatchRequest => "EmptyBatchRequest",
            Code::InvalidBatchEntryId => "InvalidBatchEntryId",
            Code::BatchRequestTooLong => "BatchRequestTooLong",
            Code::PurgeQueueInProgress => "PurgeQueueInProgress",
            Code::OverLimit => "OverLimit",
            Code::AccessDenied => "AccessDeniedException",
            Code::ResourceNotFoundException => "ResourceNotFoundException",
            other => other.query_code(),
        }
    }

    /// The query protocol's error code.
    pub fn query_code(self) -> &'static str {
        match self {
            Code::QueueDoesNotExist => "AWS.SimpleQueueService.NonExistentQueue",
            Code::QueueNameExists => "QueueAlreadyExists",
            Code::InvalidParameterValue => "InvalidParameterValue",
            Code::MissingParameter => "MissingParameter",
            Code::InvalidAttributeName => "InvalidAttributeName",
            Code::InvalidAttributeValue => "InvalidAttributeValue",
            Code::InvalidMessageContents => "InvalidMessageContents",
            Code::ReceiptHandleIsInvalid => "ReceiptHandleIsInvalid",
            Code::MessageNotInflight => "AWS.SimpleQueueService.MessageNotInflight",
            Code::BatchEntryIdsNotDistinct => "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
            Code::TooManyEntriesInBatchRequest => {
                "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"
            }
            Code::EmptyBatchRequest => "AWS.SimpleQueueService.EmptyBatchRequest",
            Code::InvalidBatchEntryId => "AWS.SimpleQueueService.InvalidBatchEntryId",
            Code::BatchRequestTooLong => "AWS.SimpleQueueService.BatchRequestTooLong",
            Code::PurgeQueueInProgress => "AWS.SimpleQueueService.PurgeQueueInProgress",
            Code::OverLimit => "OverLimit",
            Code::ResourceNotFoundException => "ResourceNotFoundException",
            Code::InvalidAction => "InvalidAction",
            Code::ServiceUnavailable => "ServiceUnavailable",
            Code::InternalFailure => "InternalFailure",
            Code::AccessDenied => "AccessDenied",
            Code::MissingAuthenticationToken => "MissingAuthenticationToken",
            Code::IncompleteSignature => "IncompleteSignature",
            Code::InvalidClientTokenId => "InvalidClientTokenId",
            Code::SignatureDoesNotMatch => "SignatureDoesNotMatch",
        }
    }

    /// The HTTP status SQS answers the code with.
    pub fn status(self) -> u16 {
        match self {
            Code::PurgeQueueInProgress
            | Code::OverLimit
            | Code::AccessDenied
            | Code::MissingAuthenticationToken
            | Code::InvalidClientTokenId
            | Code::SignatureDoesNotMatch => 403,
            Code::ReceiptHandleIsInvalid | Code::ResourceNotFoundException => 404,
            Code::ServiceUnavailable => 503,
            Code::InternalFailure => 500,
            _ => 400,
        }
    }

    /// Whose fault it is, as the query protocol's `<Type>` and the second half of
    /// `x-amzn-query-error` say.
    pub fn fault(self) -> &'static str {
        match self {
            Code::ServiceUnavailable | Code::InternalFailure => "Receiver",
            _ => "Sender",
        }
    }
}

/// A failed request: its code and a message saying what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqsError {
    pub code: Code,
    pub message: String,
}

impl SqsError {
    pub fn new(code: Code, message: impl Into<String>) -> SqsError {
        SqsError {
            code,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> SqsError {
        SqsError::new(Code::InvalidParameterValue, message)
    }

    pub fn missing(parameter: &str) -> SqsError {
        SqsError::new(
            Code::MissingParameter,
            format!("The request must contain the parameter {parameter}."),
        )
    }

    pub fn no_queue() -> SqsError {
        SqsError::new(
            Code::QueueDoesNotExist,
            "The specified queue does not exist.",
        )
    }

    pub fn bad_receipt(handle: &str) -> SqsError {
        // A handle is at most a few hundred bytes of base64; a longer input is cut so an
        // answer never echoes an unbounded request back.
        let shown: String = handle.chars().take(200).collect();
        SqsError::new(
            Code::ReceiptHandleIsInvalid,
            format!("The input receipt handle \"{shown}\" is not a valid receipt handle."),
        )
    }
}

impl From<&crate::sigv4::SignatureError> for SqsError {
    fn from(error: &crate::sigv4::SignatureError) -> SqsError {
        use crate::sigv4::SignatureError as E;
        let code = match error {
            E::Missing => Code::MissingAuthenticationToken,
            E::Incomplete(_) => Code::IncompleteSignature,
            E::UnknownKey => Code::InvalidClientTokenId,
            E::Mismatch
            | E::Expired { .. }
            | E::NotYetCurrent { .. }
            | E::PresignedExpired { .. } => Code::SignatureDoesNotMatch,
        };
        SqsError::new(code, error.to_string())
    }
}

impl std::fmt::Display for SqsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.query_code(), self.message)
    }
}

impl std::error::Error for SqsError {}

/// A broker error as an SQS error, from its kind. The broker's message says what was
/// wrong and what to do, so it is kept.
pub fn from_broker(error: BrokerError) -> SqsError {
    let code = match error.kind() {
        ErrorKind::NotFound => match &error {
            BrokerError::QueueNotFound { .. } => Code::QueueDoesNotExist,
            // A seq the queue never assigned: only a forged handle can name one.
            _ => Code::ReceiptHandleIsInvalid,
        },
        ErrorKind::AlreadyExists => Code::QueueNameExists,
        ErrorKind::StaleLease | ErrorKind::Fenced => Code::MessageNotInflight,
        ErrorKind::Conflict
        | ErrorKind::Invalid
        | ErrorKind::SchemaViolation
        | ErrorKind::OutOfRange
        | ErrorKind::TooLarge => Code::InvalidParameterValue,
        ErrorKind::Full => Code::OverLimit,
        ErrorKind::DiskFull | ErrorKind::Unavailable => Code::ServiceUnavailable,
        // The front end checks callers itself; the broker raises neither for it.
        ErrorKind::Unauthenticated | ErrorKind::PermissionDenied => Code::InternalFailure,
    };
    if code == Code::QueueDoesNotExist {
        return SqsError::no_queue();
    }
    SqsError::new(code, error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_refusals_keep_the_verifiers_code_and_status() {
        use crate::sigv4::SignatureError;
        for error in [
            SignatureError::Missing,
            SignatureError::Incomplete("x".into()),
            SignatureError::UnknownKey,
            SignatureError::Mismatch,
        ] {
            let sqs = SqsError::from(&error);
            assert_eq!(sqs.code.query_code(), error.code());
            assert_eq!(sqs.code.status(), error.status());
        }
        assert_eq!(Code::AccessDenied.status(), 403);
        assert_eq!(Code::AccessDenied.query_code(), "AccessDenied");
    }

    #[test]
    fn a_missing_queue_is_non_existent_queue_in_the_query_protocol() {
        let e = from_broker(BrokerError::QueueNotFound { queue: "q".into() });
        assert_eq!(e.code, Code::QueueDoesNotExist);
        assert_eq!(
            e.code.query_code(),
            "AWS.SimpleQueueService.NonExistentQueue"
        );
        assert_eq!(e.code.shape(), "QueueDoesNotExist");
        assert_eq!(e.code.status(), 400);
    }

    #[test]
    fn a_stale_lease_is_not_in_flight_and_a_full_disk_is_the_servers_fault() {
        let stale = from_broker(BrokerError::StaleLease { seq: 1, token: 2 });
        assert_eq!(stale.code, Code::MessageNotInflight);
        let full = from_broker(BrokerError::DiskFull {
            path: "/d".into(),
            available: 1,
            reserve: 2,
        });
        assert_eq!(full.code.fault(), "Receiver");
        assert_eq!(full.code.status(), 503);
    }
}
