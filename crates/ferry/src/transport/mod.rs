//! The seam between the SDK and an engine. A transport maps Ferry's declarations, publishes
//! and settlements onto one engine; [`connect`] picks it from a URL.
//!
//! A transport implements [`Transport`] (admin and publish), [`ConsumerBackend`] (fetching
//! deliveries for one consumer) and [`Settler`] (settling one delivery). The SDK around it
//! ([`crate::Ferry`], [`crate::Publisher`], [`crate::Consumer`]) checks capabilities,
//! assigns ids, settles each delivery at most once and buffers prefetched deliveries, so a
//! transport does only what its engine must.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::capability::{Capabilities, Feature};
use crate::error::{Error, Result};
use crate::message::{Message, Received};
use crate::spec::{Destination, QueueDecl, Source, SubscriptionDecl, TopicDecl};
use crate::temporary::{TemporaryQueue, TemporaryQueueDecl};

// Each transport's module is always compiled for its capability table; its engine code
// only with its feature.
pub mod embedded;
#[cfg(any(
    feature = "redis",
    feature = "postgres",
    feature = "amqp",
    feature = "sqs"
))]
mod group_commit;
pub mod kafka;
pub mod nats;
pub mod postgres;
pub mod rabbitmq;
pub mod redis;
pub mod server;
pub mod sqs;
#[cfg(any(feature = "nats", feature = "redis", feature = "amqp"))]
mod stored_backoff;

pub use embedded::capabilities as embedded_capabilities;
pub use kafka::capabilities as kafka_capabilities;
pub use nats::capabilities as nats_capabilities;
pub use postgres::capabilities as postgres_capabilities;
pub use rabbitmq::capabilities as rabbitmq_capabilities;
pub use redis::capabilities as redis_capabilities;
pub use sqs::capabilities as sqs_capabilities;

/// One engine behind the SDK.
#[async_trait]
pub trait Transport: Send + Sync + 'static {
    fn capabilities(&self) -> &Capabilities;

    /// Creates the queue (and its dead-letter queue) or, when it exists with the same
    /// settings, does nothing. Called only with declarations the capabilities allow.
    async fn declare_queue(&self, decl: &QueueDecl) -> Result<()>;
    /// Creates a temporary queue bound to this transport's connection (see
    /// [`crate::temporary`]). Called only with a valid declaration, and only when the
    /// capabilities list [`Feature::TemporaryQueues`]; a transport without them keeps this
    /// default, which refuses.
    async fn declare_temporary_queue(&self, _decl: &TemporaryQueueDecl) -> Result<TemporaryQueue> {
        Err(Error::unsupported(
            self.capabilities().transport,
            Feature::TemporaryQueues.name(),
            "this transport has no temporary queues",
        ))
    }
    async fn declare_topic(&self, decl: &TopicDecl) -> Result<()>;
    async fn declare_subscription(&self, decl: &SubscriptionDecl) -> Result<()>;
    /// Deletes a queue, a subscription or a dead-letter queue (a source's dead-letter
    /// queue outlives it until deleted on its own); `NotFound` if absent.
    async fn delete(&self, source: &Source) -> Result<()>;
    /// Deletes a topic; refused while it has subscriptions.
    async fn delete_topic(&self, name: &str) -> Result<()>;

    /// The dedup window queue `queue` was declared with; `None` when it has none, so that
    /// a publisher refuses a dedup id there before anything is stored, with the same words
    /// on every transport. `NotFound` when there is no such queue.
    async fn dedup_window(&self, queue: &str) -> Result<Option<Duration>>;

    /// Stores the batch durably (all or, on error, possibly a prefix — each message has an
    /// id, so a retry is recognised where the destination deduplicates). Every message has
    /// an id and passed [`Capabilities::check_message`].
    async fn publish(&self, destination: &Destination, batch: Vec<Message>) -> Result<()>;

    /// Starts consuming `source` as `consumer` (a name unique to this consumer).
    async fn open_consumer(
        &self,
        source: &Source,
        options: &ConsumerOptions,
    ) -> Result<Box<dyn ConsumerBackend>>;

    /// Releases connections; idempotent.
    async fn close(&self) -> Result<()>;
}

/// Fetches deliveries for one consumer.
#[async_trait]
pub trait ConsumerBackend: Send {
    /// Up to `max` deliveries, waiting up to `wait` for the first; empty if none came.
    async fn fetch(&mut self, max: usize, wait: Duration) -> Result<Vec<Incoming>>;
    /// Stops fetching; deliveries already handed out can still be settled. Idempotent.
    async fn close(&mut self) -> Result<()>;
    /// The deliveries the source allows before it dead-letters a message, as the engine
    /// keeps its declaration; `None` reading dead letters, which have no limit.
    fn max_deliveries(&self) -> Option<u32>;
}

/// A delivery as a transport hands it to the SDK.
pub struct Incoming {
    pub message: Received,
    pub settler: Arc<dyn Settler>,
}

/// Settles one delivery on its engine. The SDK calls at most one of `ack`, `nack` and
/// `reject`, and `extend` only before it.
#[async_trait]
pub trait Settler: Send + Sync {
    async fn ack(&self) -> Result<()>;
    /// A failed attempt: back after `delay`, or the policy's backoff when `None`; dead-
    /// lettered instead when deliveries are used up.
    async fn nack(&self, delay: Option<Duration>, error: Option<&str>) -> Result<()>;
    /// A permanent failure: to the dead-letter queue now.
    async fn reject(&self, reason: &str) -> Result<()>;
    /// Keeps the delivery hidden for `by` from now.
    async fn extend(&self, by: Duration) -> Result<()>;
}

/// How a consumer takes deliveries.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerOptions {
    /// This consumer's name; unique per consumer (a ULID-based one by default).
    pub name: String,
    /// Most deliveries fetched ahead of the handler.
    pub prefetch: usize,
    /// How long one fetch waits for a message before asking again.
    pub poll: Duration,
}

impl Default for ConsumerOptions {
    fn default() -> Self {
        ConsumerOptions {
            name: format!("consumer-{}", crate::message::new_id()),
            prefetch: 32,
            poll: Duration::from_secs(1),
        }
    }
}

/// The transport `url` names, connected.
///
/// - `embedded:./dir` (or `embedded:/abs/dir`): the broker in this process, data in `dir`;
/// - `ferry://host:port` (`ferrys://` over TLS): a Ferry server (feature `server`); the
///   token and CA come from `FERRY_TOKEN` and `FERRY_TLS_CA`;
/// - `nats://host:port`: NATS JetStream (feature `nats`);
/// - `redis://host:port/db`: Redis Streams (feature `redis`);
/// - `postgres://user@host:port/db` (or `postgresql://`): PostgreSQL tables in the
///   database's `ferry` schema (feature `postgres`);
/// - `amqp://user:pass@host:port/vhost` (or `amqps://`): RabbitMQ (feature `amqp`);
/// - `sqs://host:port?region=…` (or `sqs://aws?region=…` for AWS itself): Amazon SQS with
///   SNS for topics (feature `sqs`); keys from the URL (`sqs://KEY:SECRET@…`) or
///   `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`, see [`sqs`];
/// - `kafka://host:port[,host:port]` (`?partitions=N` for queues' topics): Apache Kafka
///   (feature `kafka`), see [`kafka`].
pub async fn connect(url: &str) -> Result<Arc<dyn Transport>> {
    let (scheme, rest) = url.split_once(':').ok_or_else(|| Error::BadUrl {
        url: url.to_owned(),
        problem: "expected scheme:..., e.g. embedded:./ferry-data".into(),
    })?;
    match scheme {
        "embedded" => connect_embedded(url, rest).await,
        "ferry" | "ferrys" => connect_server(url).await,
        "nats" => connect_nats(url).await,
        "redis" => connect_redis(url).await,
        "postgres" | "postgresql" => connect_postgres(url).await,
        "amqp" | "amqps" => connect_rabbitmq(url).await,
        "sqs" => connect_sqs(url).await,
        "kafka" => connect_kafka(url).await,
        other => Err(Error::BadUrl {
            url: url.to_owned(),
            problem: format!("unknown scheme `{other}`; this build knows: {}", known()),
        }),
    }
}

/// The schemes this build was compiled with.
fn known() -> String {
    let schemes = [
        ("embedded:", cfg!(feature = "embedded")),
        ("ferry://, ferrys://", cfg!(feature = "server")),
        ("nats://", cfg!(feature = "nats")),
        ("redis://", cfg!(feature = "redis")),
        ("postgres://, postgresql://", cfg!(feature = "postgres")),
        ("amqp://, amqps://", cfg!(feature = "amqp")),
        ("sqs://", cfg!(feature = "sqs")),
        ("kafka://", cfg!(feature = "kafka")),
    ];
    let compiled: Vec<&str> = schemes
        .iter()
        .filter(|(_, on)| *on)
        .map(|(scheme, _)| *scheme)
        .collect();
    compiled.join(", ")
}

/// The error for a scheme whose transport this build was compiled without.
#[allow(dead_code)] // Unused when every transport is compiled in.
fn not_compiled(transport: &'static str, url: &str, feature: &str) -> Error {
    Error::unsupported(
        transport,
        url,
        format!("this build of the SDK lacks the `{feature}` feature"),
    )
}

#[cfg(feature = "embedded")]
async fn connect_embedded(url: &str, dir: &str) -> Result<Arc<dyn Transport>> {
    let dir = dir.strip_prefix("//").unwrap_or(dir);
    if dir.is_empty() {
        // No silent default: data put where nobody asked is data nobody finds again.
        return Err(Error::BadUrl {
            url: url.to_owned(),
            problem: "no data directory; name one, e.g. embedded:./ferry-data".into(),
        });
    }
    Ok(Arc::new(embedded::Embedded::open(dir).await?))
}

#[cfg(not(feature = "embedded"))]
async fn connect_embedded(url: &str, _dir: &str) -> Result<Arc<dyn Transport>> {
    Err(not_compiled("embedded", url, "embedded"))
}

#[cfg(feature = "server")]
async fn connect_server(url: &str) -> Result<Arc<dyn Transport>> {
    Ok(Arc::new(server::Remote::connect(url).await?))
}

#[cfg(not(feature = "server"))]
async fn connect_server(url: &str) -> Result<Arc<dyn Transport>> {
    Err(not_compiled("ferry server", url, "server"))
}

#[cfg(feature = "nats")]
async fn connect_nats(url: &str) -> Result<Arc<dyn Transport>> {
    Ok(Arc::new(nats::Nats::connect(url).await?))
}

#[cfg(not(feature = "nats"))]
async fn connect_nats(url: &str) -> Result<Arc<dyn Transport>> {
    Err(not_compiled("NATS JetStream", url, "nats"))
}

#[cfg(feature = "redis")]
async fn connect_redis(url: &str) -> Result<Arc<dyn Transport>> {
    Ok(Arc::new(redis::RedisStreams::connect(url).await?))
}

#[cfg(not(feature = "redis"))]
async fn connect_redis(url: &str) -> Result<Arc<dyn Transport>> {
    Err(not_compiled("Redis Streams", url, "redis"))
}

#[cfg(feature = "postgres")]
async fn connect_postgres(url: &str) -> Result<Arc<dyn Transport>> {
    Ok(Arc::new(postgres::Postgres::connect(url).await?))
}

#[cfg(not(feature = "postgres"))]
async fn connect_postgres(url: &str) -> Result<Arc<dyn Transport>> {
    Err(not_compiled("PostgreSQL", url, "postgres"))
}

#[cfg(feature = "amqp")]
async fn connect_rabbitmq(url: &str) -> Result<Arc<dyn Transport>> {
    Ok(Arc::new(rabbitmq::RabbitMq::connect(url).await?))
}

#[cfg(not(feature = "amqp"))]
async fn connect_rabbitmq(url: &str) -> Result<Arc<dyn Transport>> {
    Err(not_compiled("RabbitMQ", url, "amqp"))
}

#[cfg(feature = "sqs")]
async fn connect_sqs(url: &str) -> Result<Arc<dyn Transport>> {
    Ok(Arc::new(sqs::Sqs::connect(url).await?))
}

#[cfg(not(feature = "sqs"))]
async fn connect_sqs(url: &str) -> Result<Arc<dyn Transport>> {
    Err(not_compiled("Amazon SQS", url, "sqs"))
}

#[cfg(feature = "kafka")]
async fn connect_kafka(url: &str) -> Result<Arc<dyn Transport>> {
    Ok(Arc::new(kafka::Kafka::connect(url).await?))
}

#[cfg(not(feature = "kafka"))]
async fn connect_kafka(url: &str) -> Result<Arc<dyn Transport>> {
    Err(not_compiled("Apache Kafka", url, "kafka"))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn refused(url: &str) -> Error {
        match connect(url).await {
            Ok(_) => panic!("{url} connected"),
            Err(e) => e,
        }
    }

    #[cfg(feature = "embedded")]
    #[tokio::test]
    async fn an_embedded_url_without_a_directory_is_a_bad_url() {
        for url in ["embedded:", "embedded://"] {
            let e = refused(url).await;
            assert!(matches!(e, Error::BadUrl { .. }), "{url}: {e:?}");
            assert_eq!(
                e.to_string(),
                format!("bad URL `{url}`: no data directory; name one, e.g. embedded:./ferry-data")
            );
        }
    }

    #[tokio::test]
    async fn a_url_without_a_scheme_or_with_an_unknown_one_is_a_bad_url() {
        assert!(matches!(refused("ferry-data").await, Error::BadUrl { .. }));
        let e = refused("mqtt://localhost:1883").await;
        assert!(e.to_string().contains("unknown scheme `mqtt`"), "{e}");
    }
}
