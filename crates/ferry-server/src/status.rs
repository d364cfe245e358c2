//! Broker errors as gRPC statuses. The message is the broker's own, which says what was
//! wrong and what to do; the code tells a client program what kind of failure it is.

use ferry_broker::BrokerError;
use tonic::{Code, Status};

use crate::convert::ConvertError;

/// The gRPC code for a broker error.
pub fn code(error: &BrokerError) -> Code {
    use BrokerError as E;
    match error {
        E::QueueNotFound { .. }
        | E::TopicNotFound { .. }
        | E::GroupNotFound { .. }
        | E::PartitionNotFound { .. } => Code::NotFound,
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
        | E::NotASubscription { .. }
        | E::NotADeadLetterQueue { .. }
        | E::PartitionsCanOnlyGrow { .. }
        | E::OutOfOrderSequence { .. }
        | E::SequenceOverlap { .. }
        | E::SequenceTooOld { .. } => Code::FailedPrecondition,
        E::OffsetOutOfRange { .. } => Code::OutOfRange,
        E::QueueFull { .. } => Code::ResourceExhausted,
        E::QueuePoisoned { .. }
        | E::Storage(_)
        | E::MalformedRecord { .. }
        | E::MalformedJournal { .. }
        | E::MalformedSpec { .. }
        | E::MalformedTopicSpec { .. } => Code::Unavailable,
        _ => Code::InvalidArgument,
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
}
