//! InitProducerId: a producer id and epoch for an idempotent producer (see
//! `producers.rs`). Transactions are not served (no transaction coordinator, absent from
//! ApiVersions), so a request with a transactional id is refused with
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED — what a Kafka-compatible broker with transactions
//! turned off answers (Redpanda with `enable_transactions` off), a fatal error to the
//! client rather than one it retries forever.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use crate::producers::Init;
use crate::{Shared, errors};

pub fn answer(
    shared: &Shared,
    request: InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    let refused = |code: ResponseError| {
        InitProducerIdResponse::default()
            .with_error_code(code.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    if request.transactional_id.is_some() {
        return refused(ResponseError::TransactionalIdAuthorizationFailed);
    }
    let current = (request.producer_id.0, request.producer_epoch);
    let outcome = match current {
        (-1, -1) => shared.producers.new_id(),
        (id, epoch) if id >= 0 && epoch >= 0 => shared.producers.bump(id, epoch),
        // One of the two without the other (v3+ only; older versions decode both as -1).
        _ => return refused(ResponseError::InvalidRequest),
    };
    match outcome {
        Ok(Init::Granted { producer_id, epoch }) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(epoch),
        // PRODUCER_FENCED exists from v4 on; older clients know INVALID_PRODUCER_EPOCH.
        Ok(Init::Fenced) if version >= 4 => refused(ResponseError::ProducerFenced),
        Ok(Init::Fenced) => refused(ResponseError::InvalidProducerEpoch),
        Err(e) => refused(errors::from_broker(&e)),
    }
}
