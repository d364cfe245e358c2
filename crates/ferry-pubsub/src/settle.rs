//! Acknowledge and ModifyAckDeadline, for Pull and StreamingPull alike.
//!
//! Without exactly-once delivery Pub/Sub settles on a best-effort basis: an ack id whose
//! lease has ended (the message went to another delivery, or was settled already) is
//! dropped, not an error. Malformed ack ids are refused before anything is settled; a
//! subscription that does not exist is NOT_FOUND.

use std::time::Duration;

use ferry_broker::{Broker, BrokerError, ErrorKind, LeaseToken, Seq};
use tonic::Status;

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
