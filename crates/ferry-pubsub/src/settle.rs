//! Acknowledge and ModifyAckDeadline, for Pull and StreamingPull alike.
//!
//! Without exactly-once delivery Pub/Sub settles on a best-effort basis: an ack id whose
//! lease has ended (the message went to another delivery, or was settled already) is
//! dropped, not an error. With it, the call still settles every ack id it can, then
//! answers as Pub/Sub does when some could not: INVALID_ARGUMENT with an `ErrorInfo`
//! naming each failed ack id ([`exactly_once_failures`]), which Google's clients turn into
//! a failed ack future for that message. Malformed ack ids are refused before anything is
//! settled; a subscription that does not exist is NOT_FOUND.

use std::collections::HashMap;
use std::time::Duration;

use ferry_broker::{Broker, BrokerError, ErrorKind, LeaseToken, Seq};
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::ack_id;
use crate::status::from_broker;
use crate::subscription_spec::MAX_ACK_DEADLINE;

/// What a settle did to one ack id, for a stream's count of outstanding messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// Acknowledged or handed back: no longer outstanding.
    Done,
    /// Still leased, now until this time (ms since the epoch).
    Extended(i64),
    /// The lease had already ended.
    Stale,
}

pub fn decode_all(ack_ids: &[String]) -> Result<Vec<(Seq, LeaseToken)>, Status> {
    ack_ids.iter().map(|id| ack_id::decode(id)).collect()
}

pub async fn acknowledge(
    broker: &Broker,
    queue: &str,
    ack_ids: &[String],
) -> Result<Vec<Settled>, Status> {
    let deliveries = decode_all(ack_ids)?;
    if deliveries.is_empty() {
        return Ok(Vec::new());
    }
    let outcomes = broker
        .ack_batch(queue, &deliveries)
        .await
        .map_err(from_broker)?;
    outcomes
        .into_iter()
        .map(|outcome| match outcome {
            Ok(_) => Ok(Settled::Done),
            Err(e) => best_effort(e),
        })
        .collect()
}

/// Moves each delivery's deadline to `seconds` from now; 0 hands it back for redelivery
/// (after the subscription's retry backoff).
pub async fn modify_deadline(
    broker: &Broker,
    queue: &str,
    ack_ids: &[String],
    seconds: i32,
) -> Result<Vec<Settled>, Status> {
    if !(0..=MAX_ACK_DEADLINE.as_secs() as i32).contains(&seconds) {
        return Err(Status::invalid_argument(format!(
            "ack_deadline_seconds must be between 0 and 600 (got {seconds})"
        )));
    }
    let deliveries = decode_all(ack_ids)?;
    let mut settled = Vec::with_capacity(deliveries.len());
    for (seq, token) in deliveries {
        let outcome = if seconds == 0 {
            broker
                .nack(queue, seq, token, None, Some("deadline set to 0"))
                .await
                .map(|_| Settled::Done)
        } else {
            broker
                .extend(queue, seq, token, Duration::from_secs(seconds as u64))
                .await
                .map(Settled::Extended)
        };
        settled.push(match outcome {
            Ok(s) => s,
            Err(e) => best_effort(e)?,
        });
    }
    Ok(settled)
}

/// An ended lease, or an ack id naming a message never published, is dropped; anything
/// else is the call's failure.
fn best_effort(error: BrokerError) -> Result<Settled, Status> {
    match (error.kind(), &error) {
        (ErrorKind::StaleLease, _) | (_, BrokerError::MessageNotPublished { .. }) => {
            Ok(Settled::Stale)
        }
        _ => Err(from_broker(error)),
    }
}

/// Under exactly-once delivery: Ok when every ack id took effect, else the status Pub/Sub
/// answers — INVALID_ARGUMENT, with an `ErrorInfo` whose metadata maps each ack id that
/// did not to `PERMANENT_FAILURE_INVALID_ACK_ID` (its lease had ended: another delivery
/// may be in flight, so the message may be processed again).
pub fn exactly_once_failures(ack_ids: &[String], settled: &[Settled]) -> Result<(), Status> {
    let failed: HashMap<String, String> = stale_ids(ack_ids, settled)
        .map(|id| (id.clone(), PERMANENT_FAILURE.to_owned()))
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    Err(Status::with_error_details(
        Code::InvalidArgument,
        "Some acknowledgement ids in the request were invalid. This could be because the \
         acknowledgement ids have expired or the acknowledgement ids were malformed.",
        ErrorDetails::with_error_info(EXACTLY_ONCE_REASON, PUBSUB_DOMAIN, failed),
    ))
}

/// The ack ids whose leases had ended.
pub fn stale_ids<'a>(
    ack_ids: &'a [String],
    settled: &'a [Settled],
) -> impl Iterator<Item = &'a String> + 'a {
    ack_ids
        .iter()
        .zip(settled)
        .filter(|(_, s)| **s == Settled::Stale)
        .map(|(id, _)| id)
}

const PERMANENT_FAILURE: &str = "PERMANENT_FAILURE_INVALID_ACK_ID";
const EXACTLY_ONCE_REASON: &str = "EXACTLY_ONCE_ACKID_FAILURE";
const PUBSUB_DOMAIN: &str = "pubsub.googleapis.com";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_ack_ids_are_named_in_the_error_info() {
        let ids = vec!["1-1".to_owned(), "2-1".to_owned(), "3-1".to_owned()];
        exactly_once_failures(&ids, &[Settled::Done, Settled::Extended(5), Settled::Done]).unwrap();
        let status = exactly_once_failures(&ids, &[Settled::Done, Settled::Stale, Settled::Stale])
            .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
        let info = status.get_details_error_info().expect("an ErrorInfo");
        assert_eq!(info.reason, EXACTLY_ONCE_REASON);
        assert_eq!(info.metadata.len(), 2);
        assert_eq!(info.metadata["2-1"], PERMANENT_FAILURE);
        assert_eq!(info.metadata["3-1"], PERMANENT_FAILURE);
    }
}
