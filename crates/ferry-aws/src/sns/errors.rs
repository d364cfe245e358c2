//! SNS errors: each code with the query code, fault side and HTTP status the service
//! model gives its exception (`NotFoundException` is `NotFound`, 404;
//! `InvalidParameterValueException` is `ParameterValueInvalid`, 400; …).

use ferry_broker::{BrokerError, ErrorKind};

use crate::errors::SqsError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    NotFound,
    ResourceNotFound,
    InvalidParameter,
    InvalidParameterValue,
    BatchEntryIdsNotDistinct,
    TooManyEntriesInBatchRequest,
    EmptyBatchRequest,
    InvalidBatchEntryId,
    BatchRequestTooLong,
    TagLimitExceeded,
    InvalidAction,
    InternalError,
    /// The access key's permissions do not cover the call (`AuthorizationErrorException`).
    AuthorizationError,
    /// A SigV4 refusal: [`crate::sigv4::SignatureError`]'s codes.
    MissingAuthenticationToken,
    IncompleteSignature,
    InvalidClientTokenId,
    SignatureDoesNotMatch,
}

impl Code {
    pub fn query_code(self) -> &'static str {
        match self {
            Code::NotFound => "NotFound",
            Code::ResourceNotFound => "ResourceNotFound",
            Code::InvalidParameter => "InvalidParameter",
            Code::InvalidParameterValue => "ParameterValueInvalid",
            Code::BatchEntryIdsNotDistinct => "BatchEntryIdsNotDistinct",
            Code::TooManyEntriesInBatchRequest => "TooManyEntriesInBatchRequest",
            Code::EmptyBatchRequest => "EmptyBatchRequest",
            Code::InvalidBatchEntryId => "InvalidBatchEntryId",
            Code::BatchRequestTooLong => "BatchRequestTooLong",
            Code::TagLimitExceeded => "TagLimitExceeded",
            Code::InvalidAction => "InvalidAction",
            Code::InternalError => "InternalError",
            Code::AuthorizationError => "AuthorizationError",
            Code::MissingAuthenticationToken => "MissingAuthenticationToken",
            Code::IncompleteSignature => "IncompleteSignature",
            Code::InvalidClientTokenId => "InvalidClientTokenId",
            Code::SignatureDoesNotMatch => "SignatureDoesNotMatch",
        }
    }

    pub fn status(self) -> u16 {
        match self {
            Code::NotFound | Code::ResourceNotFound => 404,
            Code::AuthorizationError
            | Code::MissingAuthenticationToken
            | Code::InvalidClientTokenId
            | Code::SignatureDoesNotMatch => 403,
            Code::InternalError => 500,
            _ => 400,
        }
    }

    pub fn fault(self) -> &'static str {
        match self {
            Code::InternalError => "Receiver",
            _ => "Sender",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnsError {
    pub code: Code,
    pub message: String,
}

impl SnsError {
    pub fn new(code: Code, message: impl Into<String>) -> SnsError {
        SnsError {
            code,
            message: message.into(),
        }
    }

    /// `InvalidParameter` with AWS's wording: `Invalid parameter: <what>`.
    pub fn parameter(what: impl std::fmt::Display) -> SnsError {
        SnsError::new(Code::InvalidParameter, format!("Invalid parameter: {what}"))
    }

    pub fn missing(parameter: &str) -> SnsError {
        SnsError::parameter(format!("{parameter} Reason: must be provided"))
    }

    pub fn no_topic() -> SnsError {
        SnsError::new(Code::NotFound, "Topic does not exist")
    }

    pub fn no_subscription() -> SnsError {
        SnsError::new(Code::NotFound, "Subscription does not exist")
    }
}

impl From<&crate::sigv4::SignatureError> for SnsError {
    fn from(error: &crate::sigv4::SignatureError) -> SnsError {
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
        SnsError::new(code, error.to_string())
    }
}

impl std::fmt::Display for SnsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.query_code(), self.message)
    }
}

impl std::error::Error for SnsError {}

/// A broker error as an SNS error, from its kind; the broker's message is kept.
pub fn from_broker(error: BrokerError) -> SnsError {
    let code = match error.kind() {
        ErrorKind::NotFound => Code::NotFound,
        ErrorKind::AlreadyExists
        | ErrorKind::Conflict
        | ErrorKind::Invalid
        | ErrorKind::SchemaViolation
        | ErrorKind::OutOfRange
        | ErrorKind::TooLarge => Code::InvalidParameter,
        ErrorKind::StaleLease
        | ErrorKind::Fenced
        | ErrorKind::Full
        | ErrorKind::DiskFull
        | ErrorKind::Unavailable
        | ErrorKind::Unauthenticated
        | ErrorKind::PermissionDenied => Code::InternalError,
    };
    SnsError::new(code, error.to_string())
}

/// An SQS input check (message attributes) as SNS answers it.
pub fn from_sqs(error: SqsError) -> SnsError {
    SnsError::new(Code::InvalidParameterValue, error.message)
}

/// A failed write of the front end's records: nothing changed.
pub fn store_failed(e: std::io::Error) -> SnsError {
    tracing::error!(error = %e, "writing the SNS front end's records failed");
    SnsError::new(
        Code::InternalError,
        "Ferry could not write the SNS records durably; try again.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_statuses_are_the_models() {
        let e = from_broker(BrokerError::TopicNotFound { topic: "t".into() });
        assert_eq!(e.code.query_code(), "NotFound");
        assert_eq!(e.code.status(), 404);
        assert_eq!(
            Code::InvalidParameterValue.query_code(),
            "ParameterValueInvalid"
        );
        assert_eq!(Code::InternalError.fault(), "Receiver");
    }
}
