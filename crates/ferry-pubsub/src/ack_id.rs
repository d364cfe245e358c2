//! Ack ids: the delivery a Pull or StreamingPull handed out, as the text a client sends
//! back to acknowledge it or to move its deadline.
//!
//! An ack id is `<seq>-<token>`, the message's place in its subscription and its lease's
//! token; the subscription comes with every request. Tokens are counters, not secrets: a
//! client that guessed another's ack id could settle that delivery, as any consumer of the
//! subscription may. The endpoint is unauthenticated, as Pub/Sub's emulator is, and serves
//! loopback unless told otherwise.

use ferry_broker::{LeaseToken, Seq};
use tonic::Status;

pub fn encode(seq: Seq, token: LeaseToken) -> String {
    format!("{seq}-{}", token.0)
}

pub fn decode(ack_id: &str) -> Result<(Seq, LeaseToken), Status> {
    let invalid = || {
        Status::invalid_argument(format!(
            "You have passed an invalid ack ID to the service (ack_id={ack_id})"
        ))
    };
    let (seq, token) = ack_id.split_once('-').ok_or_else(invalid)?;
    Ok((
        seq.parse().map_err(|_| invalid())?,
        LeaseToken(token.parse().map_err(|_| invalid())?),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ack_id_round_trips_and_garbage_is_refused() {
        let id = encode(42, LeaseToken(7));
        assert_eq!(decode(&id).unwrap(), (42, LeaseToken(7)));
        for bad in ["", "42", "42-", "-7", "a-7", "42-x", "42-7-1"] {
            assert_eq!(
                decode(bad).unwrap_err().code(),
                tonic::Code::InvalidArgument,
                "{bad}"
            );
        }
    }
}
