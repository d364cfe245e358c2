//! Ferry's SDK: one API for publishing and consuming over several engines, chosen by URL.
//!
//! ```no_run
//! # async fn run() -> ferry::Result<()> {
//! use ferry::{ConsumerOptions, Destination, Ferry, Message, QueueDecl, Source};
//!
//! let ferry = Ferry::connect("embedded:./ferry-data").await?;
//! ferry.declare_queue(&QueueDecl::new("orders")).await?;
//! let publisher = ferry.publisher(Destination::queue("orders"));
//! publisher.send(Message::new("hello").with_key("customer-7")).await?;
//!
//! let mut consumer = ferry.consumer(Source::queue("orders"), ConsumerOptions::default()).await?;
//! if let Some(delivery) = consumer.next().await {
//!     let delivery = delivery?;
//!     println!("{:?}", delivery.payload);
//!     delivery.ack().await?;
//! }
//! # Ok(()) }
//! ```
//!
//! - [`Ferry`]: connect, declare queues, topics and subscriptions ([`spec`]), delete;
//! - [`Publisher`]: single and batch publishes with key, headers, delay, priority, TTL and
//!   dedup id; typed events in the [`Envelope`];
//! - [`Consumer`] and [`Delivery`]: `ack`, `nack(delay)`, `reject(reason)`, `extend`;
//! - [`capability`]: what each transport does natively, emulates, or refuses with
//!   [`Error::Unsupported`] when something is declared or published;
//! - [`transport`]: the seam each engine implements.
//!
//! Transports, each behind its feature: `embedded:./dir` (`embedded`, on by default) — the
//! broker in-process; `ferry://host:port` (`server`) — a Ferry server; `nats://host:port`
//! (`nats`) — NATS JetStream; `redis://host:port/db` (`redis`) — Redis Streams;
//! `postgres://user@host:port/db` (`postgres`) — PostgreSQL tables;
//! `amqp://user:pass@host:port/vhost` or `amqps://` (`amqp`) — RabbitMQ.

pub mod breaker;
pub mod capability;
mod consumer;
mod declared;
mod envelope;
mod error;
mod ferry;
pub mod inbox;
pub mod message;
pub mod middleware;
pub mod outbox;
mod publisher;
pub mod request_reply;
pub mod saga;
pub mod spec;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub mod sql_dialect;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod sql_name;
pub mod temporary;
pub mod topology;
pub mod transport;

// The snippets of `docs/patterns.md` run as doc tests, so the guide cannot drift from the
// code.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/patterns.md")]
mod patterns_guide {}

// The same for `docs/sdk.md`, the guide to writing a service on the SDK.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/sdk.md")]
mod sdk_guide {}

pub use capability::{Capabilities, Feature, Support};
pub use consumer::{Consumer, Delivery};
pub use envelope::Envelope;
pub use error::{Error, Result};
pub use ferry::Ferry;
pub use message::{DeadLetterInfo, Message, Received};
pub use publisher::Publisher;
pub use spec::{
    Backoff, DeliveryPolicy, Destination, KeyOrdering, QueueDecl, Source, SubscriptionDecl,
    TopicDecl,
};
pub use temporary::{TemporaryQueue, TemporaryQueueDecl};
pub use topology::{Applied, NotDeclared, Topology};
pub use transport::ConsumerOptions;
