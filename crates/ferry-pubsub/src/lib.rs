//! Ferry's Google Cloud Pub/Sub front end: `google.pubsub.v1`'s Publisher and Subscriber
//! services over the broker, so that Google's client libraries work against `ferry serve`
//! unchanged through `PUBSUB_EMULATOR_HOST` — durable, where Google's emulator keeps
//! everything in memory.
//!
//! | Pub/Sub | broker |
//! |---|---|
//! | topic `projects/P/topics/T` | topic `P.T` (see [`names`]) |
//! | subscription `projects/P/subscriptions/S` | subscription `P.S`: a queue its topic feeds |
//! | Publish: data, attributes, ordering key | payload, headers, key |
//! | ack deadline, Pull and StreamingPull, Acknowledge, ModifyAckDeadline | lease, receive, ack, extend (nack at 0) |
//! | `enable_message_ordering` | key-shared ordering |
//! | retry policy | retry backoff |
//!
//! | schema `projects/P/schemas/S`, its revisions | registry subject `pubsub:P.S`, its versions (see [`schemas`]) |
//!
//! Topics and subscriptions made here are the broker's own, so the CLI, the console,
//! metrics and the other front ends see them. Errors are gRPC statuses from the broker's
//! single error classification ([`status`]). What Pub/Sub offers and this server does not
//! carry out — push subscriptions, filters, dead-letter policies, exactly-once delivery,
//! snapshots and seek, updates, labels — is refused with UNIMPLEMENTED when asked
//! for, never ignored (`docs/compat/pubsub.md` lists each).

mod ack_id;
mod avro_json;
mod convert;
mod deleted_topics;
mod expiration;
mod filter;
mod iam;
mod labels;
pub mod names;
mod pages;
mod publisher;
mod retained_acks;
mod schema_check;
pub mod schemas;
mod settle;
mod snapshots;
pub mod status;
mod store;
mod streaming_pull;
mod subscriber;
mod subscription_spec;
mod topic_schema;
mod topic_spec;
mod updates;

/// The services generated in build.rs.
mod generated {
    /// `google.protobuf.Empty`, as prost maps it.
    pub type Empty = ();
    include!(concat!(env!("OUT_DIR"), "/google.pubsub.v1.Publisher.rs"));
    include!(concat!(env!("OUT_DIR"), "/google.pubsub.v1.Subscriber.rs"));
    include!(concat!(
        env!("OUT_DIR"),
        "/google.pubsub.v1.SchemaService.rs"
    ));
    include!(concat!(env!("OUT_DIR"), "/google.iam.v1.IAMPolicy.rs"));
}

use std::future::Future;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use ferry_broker::Broker;
use ferry_schema_registry::SchemaRegistry;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_stream::wrappers::TcpListenerStream;

use generated::i_a_m_policy_server::IAMPolicyServer;
use generated::publisher_server::PublisherServer;
use generated::schema_service_server::SchemaServiceServer;
use generated::subscriber_server::SubscriberServer;

/// Where Google's emulator listens, and so where `PUBSUB_EMULATOR_HOST` usually points.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8085";
/// The largest request or response: Pub/Sub's Publish takes up to 10 MB; the broker's own
/// limits then refuse what is too large for it, with its message.
const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// The Pub/Sub front end over one broker.
#[derive(Clone)]
pub struct PubSub {
    inner: Arc<Inner>,
}

struct Inner {
    broker: Broker,
    /// Raised when the server stops, so that waiting pulls and open streams end and the
    /// server's graceful shutdown does not wait for them.
    closing: watch::Sender<bool>,
    streams: streaming_pull::OpenStreams,
    store: store::Store,
    topics: store::TopicStore,
    /// The schema registry, when the server has one: the SchemaService and topic schemas
    /// need it, and are refused without it.
    schemas: OnceLock<schemas::Schemas>,
    /// The streams' tasks, waited for when the server stops.
    tasks: tokio_util::task::TaskTracker,
    /// The latest use of each subscription, for expiration policies.
    uses: expiration::Uses,
    /// How often idle subscriptions are looked for, in ms.
    sweep_every_ms: std::sync::atomic::AtomicU64,
}

impl PubSub {
    /// The front end over `broker`, keeping its own records (Pub/Sub settings the
    /// broker's specs do not hold) in `dir`.
    pub fn open(broker: Broker, dir: &Path) -> std::io::Result<PubSub> {
        let store = store::Store::open(dir, |name| broker.describe_subscription(name).is_ok())?;
        let topics = store::TopicStore::open(dir, |name| broker.describe_topic(name).is_ok())?;
        Ok(PubSub {
            inner: Arc::new(Inner {
                broker,
                closing: watch::Sender::new(false),
                streams: streaming_pull::OpenStreams::default(),
                store,
                topics,
                schemas: OnceLock::new(),
                tasks: tokio_util::task::TaskTracker::new(),
                uses: expiration::Uses::default(),
                sweep_every_ms: std::sync::atomic::AtomicU64::new(
                    expiration::SWEEP_EVERY.as_millis() as u64,
                ),
            }),
        })
    }

    /// Looks for subscriptions unused for their expiration ttl every `every` instead of
    /// every minute (tests move the broker's clock and look sooner).
    pub fn with_expiry_sweep(self, every: std::time::Duration) -> PubSub {
        self.inner.sweep_every_ms.store(
            every.as_millis().max(1) as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        self
    }

    /// The front end with Pub/Sub schemas kept in `registry` (see [`schemas`]): the
    /// SchemaService, and topics whose `schema_settings` validate every Publish. Without
    /// it both are refused with UNIMPLEMENTED. The first registry given is kept.
    pub fn with_schema_registry(self, registry: Arc<SchemaRegistry>) -> PubSub {
        let _ = self.inner.schemas.set(schemas::Schemas::new(registry));
        self
    }

    pub(crate) fn schemas(&self) -> Option<&schemas::Schemas> {
        self.inner.schemas.get()
    }

    pub(crate) fn topic_store(&self) -> &store::TopicStore {
        &self.inner.topics
    }

    /// Runs `task` until it ends; the server waits for it when it stops.
    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.inner.tasks.spawn(task);
    }

    pub(crate) fn store(&self) -> &store::Store {
        &self.inner.store
    }

    pub(crate) fn broker(&self) -> &Broker {
        &self.inner.broker
    }

    pub(crate) fn open_streams(&self) -> &streaming_pull::OpenStreams {
        &self.inner.streams
    }

    pub(crate) fn is_closing(&self) -> bool {
        *self.inner.closing.borrow()
    }

    /// Done once the server stops.
    pub(crate) fn closing(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut closing = self.inner.closing.subscribe();
        async move {
            let _ = closing.wait_for(|c| *c).await;
        }
    }

    /// Serves the Publisher, Subscriber and SchemaService on `listener` over plaintext HTTP/2 until `shutdown` is done.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), tonic::transport::Error> {
        let closing = self.inner.closing.clone();
        let stopped = async move {
            shutdown.await;
            closing.send_replace(true);
        };
        let publisher = PublisherServer::new(self.clone())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let schema_service = SchemaServiceServer::new(self.clone())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let iam = IAMPolicyServer::new(self.clone());
        let tasks = self.inner.tasks.clone();
        let sweeper = self.clone();
        tasks.spawn(async move {
            let every = std::time::Duration::from_millis(
                sweeper
                    .inner
                    .sweep_every_ms
                    .load(std::sync::atomic::Ordering::Relaxed),
            );
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = sweeper.closing() => break,
                }
                sweeper.sweep_expired().await;
            }
        });
        let subscriber = SubscriberServer::new(self)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let served = tonic::transport::Server::builder()
            .add_service(publisher)
            .add_service(subscriber)
            .add_service(schema_service)
            .add_service(iam)
            .serve_with_incoming_shutdown(TcpListenerStream::new(listener), stopped)
            .await;
        // Streams end once they see the server closing; when they have, nothing of the
        // front end holds the broker any more, and the caller may close it.
        tasks.close();
        tasks.wait().await;
        served
    }
}
