//! The gRPC services of `ferry.v1`, each over the one broker.

mod admin;
mod consumer;
mod dead_letters;
mod groups;
mod publisher;

use std::sync::Arc;

use ferry_broker::Broker;
use ferry_proto::v1::admin_server::AdminServer;
use ferry_proto::v1::consumer_server::ConsumerServer;
use ferry_proto::v1::dead_letters_server::DeadLettersServer;
use ferry_proto::v1::groups_server::GroupsServer;
use ferry_proto::v1::publisher_server::PublisherServer;
use tokio::sync::watch;
use tonic::service::Routes;
use tonic::{Request, Status};

pub use admin::AdminService;
pub use consumer::ConsumerService;
pub use dead_letters::DeadLettersService;
pub use groups::GroupsService;
pub use publisher::PublisherService;

use crate::admission::ConnectionInfo;
use crate::auth::{Action, Caller, Gate};
use crate::metrics::Meters;
use crate::redaction::Redaction;
use crate::status::from_refusal;

/// The request's `authorization` metadata, if the call may go on: calls on a connection
/// over the server's limit are refused first of all.
fn authorization<T>(r: &Request<T>) -> Result<Option<&str>, Status> {
    if let Some(limit) = r
        .extensions()
        .get::<ConnectionInfo>()
        .and_then(|c| c.refused_over)
    {
        return Err(Status::resource_exhausted(format!(
            "the server has its maximum of {limit} gRPC connections open: retry later"
        )));
    }
    Ok(r.metadata()
        .get("authorization")
        .and_then(|v| v.to_str().ok()))
}

/// The caller presenting the request's `authorization` metadata.
pub(crate) fn caller<T>(gate: &Gate, r: &Request<T>) -> Result<Caller, Status> {
    gate.caller(authorization(r)?).map_err(from_refusal)
}

/// The caller, if it may do `action` on `name`.
pub(crate) fn allow<T>(
    gate: &Gate,
    r: &Request<T>,
    action: Action,
    name: &str,
) -> Result<Caller, Status> {
    gate.authorize(authorization(r)?, action, name)
        .map_err(from_refusal)
}

/// The caller, if it may read `queue`: `consume` on an ordinary queue, `dead_letters` on a
/// dead-letter queue (see [`Gate::allow_read`]).
pub(crate) fn allow_read<T>(
    gate: &Gate,
    broker: &Broker,
    r: &Request<T>,
    queue: &str,
) -> Result<Caller, Status> {
    gate.authorize_read(authorization(r)?, broker, queue)
        .map_err(from_refusal)
}

/// Every service of `ferry.v1`, routed by name, with request bodies up to `max_message`
/// bytes (tonic's default of 4 MiB would refuse a batch the broker accepts, or accept one
/// the operator meant to refuse). Deliveries, rejects and latencies are recorded in `meters`.
/// Consume streams end once `stopping` turns `true`. Every call passes `gate` first.
/// Dead-letter peeks mask the headers `redaction` names.
pub fn routes(
    broker: &Broker,
    gate: &Arc<Gate>,
    redaction: &Arc<Redaction>,
    meters: &Arc<Meters>,
    max_message: usize,
    stopping: watch::Receiver<bool>,
) -> Routes {
    let b = || broker.clone();
    let m = || Arc::clone(meters);
    let g = || Arc::clone(gate);
    Routes::new(
        AdminServer::new(AdminService {
            broker: b(),
            gate: g(),
        })
        .max_decoding_message_size(max_message),
    )
    .add_service(
        PublisherServer::new(PublisherService {
            broker: b(),
            gate: g(),
            meters: m(),
        })
        .max_decoding_message_size(max_message),
    )
    .add_service(
        ConsumerServer::new(ConsumerService {
            broker: b(),
            gate: g(),
            stopping,
            meters: m(),
        })
        .max_decoding_message_size(max_message)
        .max_encoding_message_size(max_message),
    )
    .add_service(
        DeadLettersServer::new(DeadLettersService {
            broker: b(),
            gate: g(),
            redaction: Arc::clone(redaction),
        })
        .max_encoding_message_size(usize::MAX),
    )
    .add_service(
        GroupsServer::new(GroupsService {
            broker: b(),
            gate: g(),
        })
        .max_encoding_message_size(usize::MAX),
    )
}
