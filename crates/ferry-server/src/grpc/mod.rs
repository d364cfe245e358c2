//! The gRPC services of `ferry.v1`, each over the one broker.

mod admin;
mod consumer;
mod dead_letters;
mod groups;
mod publisher;
mod sent;

use std::sync::Arc;

use ferry_broker::Broker;
use ferry_proto::v1::admin_server::AdminServer;
use ferry_proto::v1::consumer_server::ConsumerServer;
use ferry_proto::v1::dead_letters_server::DeadLettersServer;
use ferry_proto::v1::groups_server::GroupsServer;
use ferry_proto::v1::publisher_server::PublisherServer;
use tokio::sync::watch;
use tonic::service::Routes;
use tonic::service::interceptor::{InterceptedService, Interceptor};
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

/// What every call passes before its request message is decoded: a call on a connection
/// over the server's limit is refused first, then a call without a valid token. Decoding
/// first would let anyone make the server take in and parse a message of up to its
/// `max_message` bytes (16 MiB by default) before hearing no, and would answer an
/// oversized message without a token with its size instead of the missing token. What
/// the token may do depends on the names inside the message, so each call checks its
/// permission once decoded.
#[derive(Clone)]
struct Admit {
    gate: Arc<Gate>,
}

impl Interceptor for Admit {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(limit) = request
            .extensions()
            .get::<ConnectionInfo>()
            .and_then(|c| c.refused_over)
        {
            return Err(Status::resource_exhausted(format!(
                "the server has its maximum of {limit} gRPC connections open: retry later"
            )));
        }
        caller(&self.gate, &request)?;
        Ok(request)
    }
}

/// The request's `authorization` metadata.
fn authorization<T>(r: &Request<T>) -> Option<&str> {
    r.metadata()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
}

/// The caller presenting the request's `authorization` metadata.
pub(crate) fn caller<T>(gate: &Gate, r: &Request<T>) -> Result<Caller, Status> {
    gate.caller(authorization(r)).map_err(from_refusal)
}

/// The caller, if it may do `action` on `name`.
pub(crate) fn allow<T>(
    gate: &Gate,
    r: &Request<T>,
    action: Action,
    name: &str,
) -> Result<Caller, Status> {
    gate.authorize(authorization(r), action, name)
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
    gate.authorize_read(authorization(r), broker, queue)
        .map_err(from_refusal)
}

/// Every service of `ferry.v1`, routed by name, with request bodies up to `max_message`
/// bytes (tonic's default of 4 MiB would refuse a batch the broker accepts, or accept one
/// the operator meant to refuse), and peeks, polls and topic reads answering with up to
/// `max_read_bytes` of messages. Deliveries, rejects and latencies are recorded in `meters`.
/// Consume streams, and publish streams between batches, end once `stopping` turns `true`.
/// Every call passes [`Admit`] (the connection limit and the token) before its message is
/// decoded, then `gate`'s permission check. Dead-letter peeks mask the headers `redaction` names.
pub fn routes(
    broker: &Broker,
    gate: &Arc<Gate>,
    redaction: &Arc<Redaction>,
    meters: &Arc<Meters>,
    max_message: usize,
    max_read_bytes: usize,
    stopping: watch::Receiver<bool>,
) -> Routes {
    let b = || broker.clone();
    let m = || Arc::clone(meters);
    let g = || Arc::clone(gate);
    let admit = Admit { gate: g() };
    Routes::new(InterceptedService::new(
        AdminServer::new(AdminService {
            broker: b(),
            gate: g(),
        })
        .max_decoding_message_size(max_message),
        admit.clone(),
    ))
    .add_service(InterceptedService::new(
        PublisherServer::new(PublisherService {
            broker: b(),
            gate: g(),
            meters: m(),
            stopping: stopping.clone(),
        })
        .max_decoding_message_size(max_message),
        admit.clone(),
    ))
    .add_service(InterceptedService::new(
        ConsumerServer::new(ConsumerService {
            broker: b(),
            gate: g(),
            stopping,
            meters: m(),
        })
        .max_decoding_message_size(max_message)
        .max_encoding_message_size(max_message),
        admit.clone(),
    ))
    .add_service(InterceptedService::new(
        DeadLettersServer::new(DeadLettersService {
            broker: b(),
            gate: g(),
            redaction: Arc::clone(redaction),
            max_read_bytes,
        })
        .max_encoding_message_size(usize::MAX),
        admit.clone(),
    ))
    .add_service(InterceptedService::new(
        GroupsServer::new(GroupsService {
            broker: b(),
            gate: g(),
            max_read_bytes,
        })
        .max_encoding_message_size(usize::MAX),
        admit,
    ))
}
