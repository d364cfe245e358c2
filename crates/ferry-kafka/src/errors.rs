//! Broker failures as Kafka error codes: one match over [`ErrorKind`], the broker's one
//! classification, never a table over its variants; the `Invalid` arm looks inside where
//! Kafka has a finer code (a bad topic name, a bad record).

use ferry_broker::{BrokerError, ErrorKind};
use kafka_protocol::ResponseError;

/// The Kafka error code for a broker failure.
pub fn from_broker(error: &BrokerError) -> ResponseError {
    match error.kind() {
        ErrorKind::NotFound => ResponseError::UnknownTopicOrPartition,
        ErrorKind::AlreadyExists => ResponseError::TopicAlreadyExists,
        // Deleting a topic with subscriptions, shrinking one: what exists forbids it.
        ErrorKind::Conflict => ResponseError::PolicyViolation,
        // Leases belong to queues, which Kafka clients do not reach; kept total.
        ErrorKind::StaleLease => ResponseError::UnknownServerError,
        ErrorKind::Fenced => ResponseError::OutOfOrderSequenceNumber,
        ErrorKind::Invalid => match error {
            BrokerError::EmptyName
            | BrokerError::NameTooLong { .. }
            | BrokerError::InvalidNameCharacter { .. }
            | BrokerError::NameStartsWithDotOrDash { .. }
            | BrokerError::NameHasDoubleDot { .. }
            | BrokerError::NameEndsWithDot { .. } => ResponseError::InvalidTopicException,
            BrokerError::TooManyHeaders { .. }
            | BrokerError::EmptyHeaderName
            | BrokerError::HeaderNameTooLong { .. }
            | BrokerError::HeaderNameHasControlCharacter { .. }
            | BrokerError::ReservedHeaderName { .. }
            | BrokerError::HeaderValueTooLong { .. } => ResponseError::InvalidRecord,
            _ => ResponseError::InvalidRequest,
        },
        // Confluent Server's answer to a record its topic's schema validation refuses.
        ErrorKind::SchemaViolation => ResponseError::InvalidRecord,
        ErrorKind::OutOfRange => ResponseError::OffsetOutOfRange,
        ErrorKind::TooLarge => ResponseError::MessageTooLarge,
        // Length limits belong to queues; a topic never refuses as full. Kept total.
        ErrorKind::Full => ResponseError::PolicyViolation,
        // Retriable: the client backs off and tries again once there is room.
        ErrorKind::DiskFull | ErrorKind::Unavailable => ResponseError::KafkaStorageError,
        ErrorKind::Unauthenticated => ResponseError::SaslAuthenticationFailed,
        ErrorKind::PermissionDenied => ResponseError::TopicAuthorizationFailed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_failures_get_kafkas_codes() {
        let missing = BrokerError::TopicNotFound { topic: "t".into() };
        assert_eq!(
            from_broker(&missing),
            ResponseError::UnknownTopicOrPartition
        );
        assert_eq!(
            from_broker(&BrokerError::EmptyName),
            ResponseError::InvalidTopicException
        );
        assert_eq!(
            from_broker(&BrokerError::EmptyHeaderName),
            ResponseError::InvalidRecord
        );
        let large = BrokerError::PayloadTooLarge { size: 2, max: 1 };
        assert_eq!(from_broker(&large), ResponseError::MessageTooLarge);
    }
}
