//! The SDK over `ferry-client`: declarations become `ferry.v1` specs and publishes its
//! `Publish` calls; consumers fetch with `Receive` and settle on a `Consume` stream
//! ([`super::consume`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::time::Duration;

use async_trait::async_trait;
use ferry_client::proto as v1;
use ferry_client::{Client, ClientError, ConnectOptions, ErrorKind};
use tonic::Code;

use super::capabilities;
use super::consume::RemoteConsumer;
use super::publish_streams::PublishStreams;
use crate::capability::Capabilities;
use crate::declared::{self, Declared};
use crate::error::{Error, Result};
use crate::message::{DeadLetterInfo, Message, Received};
use crate::spec::{
    DeliveryPolicy, Destination, KeyOrdering, QueueDecl, Source, SubscriptionDecl, TopicDecl,
};
use crate::temporary::{TemporaryQueue, TemporaryQueueDecl, owner_name};
use crate::transport::embedded::{queue_of, same_partitions};
use crate::transport::{ConsumerBackend, ConsumerOptions, Transport};

const NAME: &str = "ferry server";

/// A connection to a Ferry server. Closing it refuses later calls; the HTTP/2 connection
/// goes when the last delivery holding it is dropped.
pub struct Remote {
    shared: Arc<Shared>,
    capabilities: Capabilities,
}

pub(super) struct Shared {
    client: Client,
    closed: AtomicBool,
    publish_streams: PublishStreams,
}

impl Shared {
    pub(super) fn client(&self) -> Result<&Client> {
        if self.closed.load(AtomicOrdering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(&self.client)
        }
    }
}

impl Remote {
    /// Connects to `url` (`ferry://host:port`, or `ferrys://` for TLS). The API token and
    /// the CA to trust come from the environment — `FERRY_TOKEN`, `FERRY_TLS_CA` (a PEM
    /// file) — as for the `ferry` command, so that neither sits in a URL that may be logged.
    pub async fn connect(url: &str) -> Result<Remote> {
        let mut options = ConnectOptions::new();
        if let Ok(token) = std::env::var("FERRY_TOKEN") {
            options = options.token(token);
        }
        if let Some(path) = std::env::var_os("FERRY_TLS_CA") {
            let pem = std::fs::read(&path).map_err(|e| {
                Error::invalid(
                    "FERRY_TLS_CA",
                    format!("cannot read {}: {e}", std::path::Path::new(&path).display()),
                )
            })?;
            options = options.tls_ca_pem(pem);
        }
        let client = Client::connect_with(url, options)
            .await
            .map_err(map_error)?;
        // The channel connects without sending the token; a server that requires one would
        // refuse only the first real call. Listing topics needs a token it knows and no
        // permission (the list shows what the token may administer), so it tells a missing
        // or unknown token here. Other failures are left to the calls that meet them.
        if let Err(e) = client.list_topics().await {
            let e = map_error(e);
            if matches!(e, Error::Unauthorized { .. }) {
                return Err(e);
            }
        }
        Ok(Remote {
            shared: Arc::new(Shared {
                client,
                closed: AtomicBool::new(false),
                publish_streams: PublishStreams::default(),
            }),
            capabilities: capabilities(),
        })
    }
}

/// A server's answer as the SDK's error, by the broker's classification the server sends
/// with every broker error (the same mapping as the embedded transport's); an answer without
/// one (a failed connection, an older server) falls back to its gRPC code.
pub(super) fn map_error(e: ClientError) -> Error {
    let message = e.to_string();
    let kind = e.kind().or_else(|| kind_of_code(e.code()?));
    match kind {
        // The server names what is missing beside its message, which is the broker's own
        // words; the SDK says it as every transport does. An older server names nothing.
        Some(ErrorKind::NotFound) => match e.missing() {
            Some(missing) => Error::NotFound {
                kind: match missing.kind.as_str() {
                    "topic" => "topic",
                    _ => "queue",
                },
                name: missing.name.clone(),
            },
            None => Error::NotFound {
                kind: "queue or topic",
                name: message,
            },
        },
        Some(ErrorKind::AlreadyExists | ErrorKind::Conflict) => Error::Conflict {
            kind: "queue or topic",
            name: String::new(),
            problem: message,
        },
        Some(ErrorKind::StaleLease | ErrorKind::Fenced) => Error::NotHeld {
            id: String::new(),
            why: message,
        },
        Some(ErrorKind::Full | ErrorKind::DiskFull) => Error::Full { message },
        Some(
            ErrorKind::Invalid
            | ErrorKind::SchemaViolation
            | ErrorKind::OutOfRange
            | ErrorKind::TooLarge,
        ) => Error::invalid("request", message),
        // The server's own words say what is missing (a token, one it knows, a permission).
        Some(ErrorKind::Unauthenticated) => Error::unauthorized(e_message(&e)),
        Some(ErrorKind::PermissionDenied) => Error::forbidden(e_message(&e)),
        _ if e.code() == Some(Code::Unimplemented) => {
            Error::unsupported(NAME, "the request", message)
        }
        // Unavailable, a kind newer than this SDK, or no kind and no code that names one.
        _ => Error::transport(NAME, e),
    }
}

/// The server's message without the client's ` (Code)` suffix.
fn e_message(e: &ClientError) -> String {
    match e {
        ClientError::Server { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// The kind a gRPC code stands for when the server sent none: what the code meant before
/// kinds travelled (FAILED_PRECONDITION was then a lease no longer held).
fn kind_of_code(code: Code) -> Option<ErrorKind> {
    match code {
        Code::NotFound => Some(ErrorKind::NotFound),
        Code::AlreadyExists => Some(ErrorKind::AlreadyExists),
        Code::InvalidArgument => Some(ErrorKind::Invalid),
        Code::OutOfRange => Some(ErrorKind::OutOfRange),
        Code::FailedPrecondition => Some(ErrorKind::StaleLease),
        Code::ResourceExhausted => Some(ErrorKind::Full),
        Code::Unauthenticated => Some(ErrorKind::Unauthenticated),
        Code::PermissionDenied => Some(ErrorKind::PermissionDenied),
        _ => None,
    }
}

pub(super) fn ms(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

fn queue_spec(delivery: &DeliveryPolicy) -> v1::QueueSpec {
    v1::QueueSpec {
        retry: Some(v1::RetryPolicy {
            max_deliveries: Some(delivery.max_deliveries),
            backoff: Some(v1::Backoff {
                base_ms: Some(ms(delivery.backoff.base)),
                cap_ms: Some(ms(delivery.backoff.cap)),
                multiplier: Some(delivery.backoff.multiplier),
                jitter: Some(delivery.backoff.jitter),
            }),
        }),
        dead_letter: Some(v1::DeadLetter {
            target: Some(if delivery.dead_letter {
                v1::dead_letter::Target::Derived(true)
            } else {
                v1::dead_letter::Target::Disabled(true)
            }),
        }),
        dedup_window_ms: Some(0),
        default_ttl_ms: delivery.default_ttl.map(ms),
        lease_ms: Some(ms(delivery.lease)),
        max_delay_ms: Some(ms(delivery.max_delay)),
        priority_levels: Some(u32::from(delivery.priority_levels)),
        ordering: match delivery.ordering {
            KeyOrdering::None => v1::OrderingMode::Shared,
            KeyOrdering::PerKey => v1::OrderingMode::KeyShared,
        } as i32,
        ..Default::default()
    }
}

fn outgoing(message: Message) -> ferry_client::Message {
    let mut out = ferry_client::Message::new(message.payload).with_priority(message.priority);
    if let Some(id) = message.id {
        out = out.with_id(id);
    }
    if let Some(key) = message.key {
        out = out.with_key(key);
    }
    for (name, value) in message.headers {
        out = out.with_header(name, value);
    }
    if let Some(delay) = message.delay.filter(|d| !d.is_zero()) {
        out = out.with_delay(delay);
    }
    if let Some(ttl) = message.ttl {
        out = out.with_ttl(ttl);
    }
    if let Some(dedup) = message.dedup_id {
        out = out.with_dedup_id(dedup);
    }
    out
}

pub(super) fn received(d: v1::Delivery) -> Received {
    Received {
        id: d.id,
        key: d.key,
        headers: d.headers.into_iter().collect(),
        payload: d.payload,
        priority: d.priority.min(u32::from(u8::MAX)) as u8,
        published_at_ms: d.published_at_ms,
        attempt: d.delivery,
        dead_letter: d.dead_letter.map(|i| DeadLetterInfo {
            reason: i.reason,
            deliveries: i.deliveries,
            origin: i.origin_queue,
            last_error: i.last_error,
            first_failure_ms: i.first_failure_at_ms,
            last_failure_ms: i.last_failure_at_ms,
            consumer: i.consumer,
        }),
    }
}

/// Whether an existing queue's spec is the one declared: the fields a declaration sets.
fn same_delivery(have: &v1::QueueSpec, want: &v1::QueueSpec) -> bool {
    have.retry == want.retry
        && have.dead_letter == want.dead_letter
        && have.lease_ms == want.lease_ms
        && have.priority_levels == want.priority_levels
        && have.ordering == want.ordering
        && have.default_ttl_ms == want.default_ttl_ms
        && have.max_delay_ms == want.max_delay_ms
        && have.dedup_window_ms.unwrap_or(0) == want.dedup_window_ms.unwrap_or(0)
        && have.length_limit.as_ref().and_then(|l| l.max_messages)
            == want.length_limit.as_ref().and_then(|l| l.max_messages)
}

fn conflict(kind: &'static str, name: &str, have: &v1::QueueSpec, want: &v1::QueueSpec) -> Error {
    declared(want).conflict(&declared(have), kind, name)
}

/// A server's queue spec in the SDK's words: the fields a declaration sets.
fn declared(spec: &v1::QueueSpec) -> Declared {
    let retry = spec.retry.unwrap_or_default();
    let backoff = retry.backoff.unwrap_or_default();
    let ms = |v: Option<u64>| Duration::from_millis(v.unwrap_or(0));
    let dead_letter = !matches!(
        spec.dead_letter.as_ref().and_then(|d| d.target.as_ref()),
        Some(v1::dead_letter::Target::Disabled(true))
    );
    Declared::default()
        .max_deliveries(retry.max_deliveries.unwrap_or(0))
        .backoff(
            ms(backoff.base_ms),
            ms(backoff.cap_ms),
            backoff.multiplier.unwrap_or(0.0),
            backoff.jitter.unwrap_or(0.0),
        )
        .dead_letter(dead_letter)
        .lease(ms(spec.lease_ms))
        .default_ttl(spec.default_ttl_ms.map(Duration::from_millis))
        .max_delay(ms(spec.max_delay_ms))
        .priority_levels(spec.priority_levels.unwrap_or(1).min(u32::from(u8::MAX)) as u8)
        .ordering(spec.ordering == v1::OrderingMode::KeyShared as i32)
        .dedup_window(spec.dedup_window_ms.map(Duration::from_millis))
        .max_length(spec.length_limit.as_ref().and_then(|l| l.max_messages))
}

#[async_trait]
impl Transport for Remote {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    async fn declare_queue(&self, decl: &QueueDecl) -> Result<()> {
        let client = self.shared.client()?;
        let mut spec = queue_spec(&decl.delivery);
        spec.dedup_window_ms = Some(decl.dedup_window.map(ms).unwrap_or(0));
        if let Some(max) = decl.max_length {
            spec.length_limit = Some(v1::LengthLimit {
                max_messages: Some(max),
                max_bytes: None,
                overflow: v1::OverflowPolicy::RejectPublish as i32,
            });
        }
        match client.create_queue(&decl.name, spec.clone()).await {
            Err(e) if e.code() == Some(Code::AlreadyExists) => {
                let info = client.describe_queue(&decl.name).await.map_err(map_error)?;
                let have = info.spec.unwrap_or_default();
                if same_delivery(&have, &spec) {
                    Ok(())
                } else {
                    Err(conflict("queue", &decl.name, &have, &spec))
                }
            }
            other => other.map_err(map_error),
        }
    }

    async fn dedup_window(&self, queue: &str) -> Result<Option<Duration>> {
        let client = self.shared.client()?;
        let info = client.describe_queue(queue).await.map_err(map_error)?;
        let window = info.spec.and_then(|s| s.dedup_window_ms).unwrap_or(0);
        Ok((window > 0).then(|| Duration::from_millis(window)))
    }

    async fn declare_topic(&self, decl: &TopicDecl) -> Result<()> {
        let client = self.shared.client()?;
        let spec = v1::TopicSpec {
            partitions: decl.partitions,
            ..Default::default()
        };
        match client.create_topic(&decl.name, spec).await {
            Err(e) if e.code() == Some(Code::AlreadyExists) => {
                let info = client.describe_topic(&decl.name).await.map_err(map_error)?;
                same_partitions(decl, info.partitions.len())
            }
            other => other.map_err(map_error),
        }
    }

    async fn declare_subscription(&self, decl: &SubscriptionDecl) -> Result<()> {
        let client = self.shared.client()?;
        let delivery = queue_spec(&decl.delivery);
        let spec = v1::SubscriptionSpec {
            topic: decl.topic.clone(),
            filter: String::new(),
            start: v1::SubscriptionStart::Now as i32,
            delivery: Some(delivery.clone()),
        };
        match client.create_subscription(&decl.name, spec).await {
            Err(e) if e.code() == Some(Code::AlreadyExists) => {
                let info = client
                    .describe_subscription(&decl.name)
                    .await
                    .map_err(map_error)?;
                let topic = info.spec.as_ref().map(|s| s.topic.as_str());
                let have = info
                    .spec
                    .as_ref()
                    .and_then(|s| s.delivery.clone())
                    .unwrap_or_default();
                if topic != Some(decl.topic.as_str()) {
                    Err(declared::other_topic(
                        &decl.name,
                        &decl.topic,
                        topic.unwrap_or_default(),
                    ))
                } else if same_delivery(&have, &delivery) {
                    Ok(())
                } else {
                    Err(conflict("subscription", &decl.name, &have, &delivery))
                }
            }
            other => other.map_err(map_error),
        }
    }

    async fn declare_temporary_queue(&self, decl: &TemporaryQueueDecl) -> Result<TemporaryQueue> {
        // The server deletes it when a consume stream of its owner on it ends: the SDK's
        // consumer of the queue holds one (its settle stream) for as long as it lives, and
        // the stream ends with this process's connection.
        let owner = owner_name();
        let (name, _) = self
            .shared
            .client()?
            .create_temporary_queue(&owner, Some(decl.idle_timeout))
            .await
            .map_err(map_error)?;
        Ok(TemporaryQueue { name, owner })
    }

    async fn delete(&self, source: &Source) -> Result<()> {
        let client = self.shared.client()?;
        match source {
            Source::Subscription { name, .. } => client.delete_subscription(name).await,
            other => {
                let queue = queue_of(other);
                self.shared.publish_streams.forget(&queue);
                client.delete_queue(&queue).await
            }
        }
        .map_err(map_error)
    }

    async fn delete_topic(&self, name: &str) -> Result<()> {
        let client = self.shared.client()?;
        client.delete_topic(name).await.map_err(map_error)
    }

    async fn publish(&self, destination: &Destination, batch: Vec<Message>) -> Result<()> {
        let client = self.shared.client()?;
        let batch: Vec<_> = batch.into_iter().map(outgoing).collect();
        match destination {
            Destination::Queue(queue) => {
                let streams = &self.shared.publish_streams;
                let mut stream = streams.take(client, queue);
                let published = stream.publish(batch).await;
                if published.is_ok() {
                    streams.give_back(stream);
                }
                published.map(drop)
            }
            Destination::Topic(topic) => client.publish_to_topic(topic, batch).await.map(drop),
        }
        .map_err(map_error)
    }

    async fn open_consumer(
        &self,
        source: &Source,
        options: &ConsumerOptions,
    ) -> Result<Box<dyn ConsumerBackend>> {
        let queue = queue_of(source);
        let consumer =
            RemoteConsumer::open(self.shared.clone(), queue.clone(), &options.name).await?;
        let max_deliveries = match source {
            Source::DeadLetters(_) => None,
            _ => {
                let client = self.shared.client()?;
                let info = client.describe_queue(&queue).await.map_err(map_error)?;
                info.spec
                    .and_then(|s| s.retry)
                    .and_then(|r| r.max_deliveries)
            }
        };
        Ok(Box::new(consumer.limited_to(max_deliveries)))
    }

    async fn close(&self) -> Result<()> {
        self.shared.closed.store(true, AtomicOrdering::Release);
        self.shared.publish_streams.clear();
        Ok(())
    }
}
