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

pub use admin::AdminService;
pub use consumer::ConsumerService;
pub use dead_letters::DeadLettersService;
pub use groups::GroupsService;
pub use publisher::PublisherService;

use crate::metrics::Meters;

/// Every service of `ferry.v1`, routed by name, with request bodies up to `max_message`
/// bytes (tonic's default of 4 MiB would refuse a batch the broker accepts, or accept one
/// the operator meant to refuse). Deliveries, rejects and latencies are recorded in `meters`.
/// Consume streams end once `stopping` turns `true`.
pub fn routes(
    broker: &Broker,
    meters: &Arc<Meters>,
    max_message: usize,
    stopping: watch::Receiver<bool>,
) -> Routes {
    let b = || broker.clone();
    let m = || Arc::clone(meters);
    Routes::new(
        AdminServer::new(AdminService { broker: b() }).max_decoding_message_size(max_message),
    )
    .add_service(
        PublisherServer::new(PublisherService {
            broker: b(),
            meters: m(),
        })
        .max_decoding_message_size(max_message),
    )
    .add_service(
        ConsumerServer::new(ConsumerService {
            broker: b(),
            stopping,
            meters: m(),
        })
        .max_decoding_message_size(max_message)
        .max_encoding_message_size(max_message),
    )
    .add_service(
        DeadLettersServer::new(DeadLettersService { broker: b() })
            .max_encoding_message_size(usize::MAX),
    )
    .add_service(
        GroupsServer::new(GroupsService { broker: b() }).max_encoding_message_size(usize::MAX),
    )
}
