//! The embedded transport: the SDK's calls map onto [`ferry_broker::Broker`] one to one,
//! except acks, which a consumer's deliveries share in batches ([`super::ack_batch`]).

use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use ferry_broker::{
    Backoff, Broker, BrokerConfig, BrokerError, DeadLetter, DeliveryTime, ErrorKind, LeaseToken,
    LengthLimit, MessageId, Name, OrderingMode, OutgoingMessage, OverflowPolicy, QueueSpec,
    ReceivedMessage, RetryPolicy, Seq, SubscriptionSpec, TopicSpec,
};

use super::ack_batch::AckBatcher;
use super::{capabilities, queue_of, same_partitions};
use crate::capability::Capabilities;
use crate::declared::{self, Declared};
use crate::error::{Error, Result};
use crate::message::{DeadLetterInfo, Message, Received};
use crate::spec::{
    DeliveryPolicy, Destination, KeyOrdering, QueueDecl, Source, SubscriptionDecl, TopicDecl,
};
use crate::temporary::{TemporaryQueue, TemporaryQueueDecl, owner_name};
use crate::transport::{ConsumerBackend, ConsumerOptions, Incoming, Settler, Transport};

pub(super) const NAME: &str = "embedded";

/// The broker in this process. Closing it lets the broker go (and its directory lock) as
/// soon as calls already running finish; later calls are [`Error::Closed`].
pub struct Embedded {
    shared: Arc<Shared>,
    capabilities: Capabilities,
}

pub(super) struct Shared {
    broker: RwLock<Option<Broker>>,
}

impl Shared {
    pub(super) fn new(broker: Broker) -> Shared {
        Shared {
            broker: RwLock::new(Some(broker)),
        }
    }

    /// Lets the broker go once calls already running finish; later calls are refused.
    pub(super) fn close(&self) {
        self.broker
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .take();
    }

    pub(super) fn broker(&self) -> Result<Broker> {
        self.broker
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or(Error::Closed)
    }
}

impl Embedded {
    pub async fn open(dir: impl AsRef<Path>) -> Result<Embedded> {
        let broker = Broker::open(dir, BrokerConfig::default())
            .await
            .map_err(map_error)?;
        Ok(Embedded {
            shared: Arc::new(Shared::new(broker)),
            capabilities: capabilities(),
        })
    }
}

/// The broker's form of a delivery policy.
fn queue_spec(delivery: &DeliveryPolicy) -> QueueSpec {
    QueueSpec {
        retry: RetryPolicy {
            max_deliveries: delivery.max_deliveries,
            backoff: Backoff {
                base: delivery.backoff.base,
                cap: delivery.backoff.cap,
                multiplier: delivery.backoff.multiplier,
                jitter: delivery.backoff.jitter,
            },
        },
        dead_letter: if delivery.dead_letter {
            DeadLetter::Default
        } else {
            DeadLetter::Disabled
        },
        dedup_window: Duration::ZERO,
        default_ttl: delivery.default_ttl,
        lease: delivery.lease,
        max_delay: delivery.max_delay,
        priority_levels: delivery.priority_levels,
        ordering: match delivery.ordering {
            KeyOrdering::None => OrderingMode::Shared,
            KeyOrdering::PerKey => OrderingMode::KeyShared,
        },
        ..QueueSpec::default()
    }
}

fn name(text: &str) -> Result<Name> {
    Name::new(text).map_err(map_error)
}

fn outgoing(message: Message) -> Result<OutgoingMessage> {
    let id = match &message.id {
        Some(id) => Some(MessageId::parse(id).map_err(map_error)?),
        None => None,
    };
    Ok(OutgoingMessage {
        id,
        key: message.key,
        headers: message.headers,
        payload: message.payload,
        priority: message.priority,
        delivery: match message.delay {
            Some(delay) if !delay.is_zero() => DeliveryTime::After(delay),
            _ => DeliveryTime::Now,
        },
        ttl: message.ttl,
        dedup_id: message.dedup_id,
    })
}

fn received(m: &ReceivedMessage) -> Received {
    Received {
        id: m.id.to_string(),
        key: m.key.clone(),
        headers: m.headers.clone(),
        payload: m.payload.clone(),
        priority: m.priority,
        published_at_ms: m.published_at,
        attempt: m.delivery,
        dead_letter: m.dead_letter.as_ref().map(|d| DeadLetterInfo {
            reason: d.reason.clone(),
            deliveries: d.deliveries,
            origin: d.origin_queue.clone(),
            last_error: d.last_error.clone(),
            first_failure_ms: d.first_failure_ms,
            last_failure_ms: d.last_failure_ms,
            consumer: d.consumer.clone(),
        }),
    }
}

/// A broker error as the SDK's error, by the broker's classification of it
/// ([`ErrorKind`]); the server transport maps the same kinds the same way, and the
/// conformance suite checks that both agree.
pub(super) fn map_error(e: BrokerError) -> Error {
    match e.kind() {
        ErrorKind::NotFound => {
            let (kind, name) = match &e {
                BrokerError::QueueNotFound { queue } => ("queue", queue.clone()),
                BrokerError::TopicNotFound { topic } => ("topic", topic.clone()),
                other => ("resource", other.to_string()),
            };
            Error::NotFound { kind, name }
        }
        ErrorKind::AlreadyExists | ErrorKind::Conflict => Error::Conflict {
            kind: "queue or topic",
            name: conflict_name(&e),
            problem: e.to_string(),
        },
        ErrorKind::StaleLease => match e {
            BrokerError::StaleLease { seq, .. } => Error::NotHeld {
                id: format!("seq {seq}"),
                why: "its lease ended and it may have gone to another consumer".into(),
            },
            other => Error::NotHeld {
                id: String::new(),
                why: other.to_string(),
            },
        },
        ErrorKind::Fenced => Error::NotHeld {
            id: String::new(),
            why: e.to_string(),
        },
        ErrorKind::Full | ErrorKind::DiskFull => Error::Full {
            message: e.to_string(),
        },
        ErrorKind::Unavailable => Error::transport(NAME, e),
        // The broker authenticates nobody; only a server's front ends raise these.
        ErrorKind::Unauthenticated => Error::unauthorized(e.to_string()),
        ErrorKind::PermissionDenied => Error::forbidden(e.to_string()),
        ErrorKind::Invalid
        | ErrorKind::SchemaViolation
        | ErrorKind::OutOfRange
        | ErrorKind::TooLarge => Error::invalid("request", e.to_string()),
    }
}

/// The name a conflict is about, where the error names one.
fn conflict_name(e: &BrokerError) -> String {
    match e {
        BrokerError::QueueExists { queue }
        | BrokerError::DuplicateQueue { name: queue }
        | BrokerError::QueueIsDeadLetterTarget { queue, .. }
        | BrokerError::NotADeadLetterQueue { queue }
        | BrokerError::NotQueueOwner { queue }
        | BrokerError::NotASubscription { queue } => queue.to_string(),
        BrokerError::TopicExists { topic }
        | BrokerError::TopicHasSubscriptions { topic, .. }
        | BrokerError::TopicIsDeadLetterTarget { topic, .. }
        | BrokerError::PartitionsCanOnlyGrow { topic, .. } => topic.to_string(),
        _ => String::new(),
    }
}

#[async_trait]
impl Transport for Embedded {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    async fn declare_queue(&self, decl: &QueueDecl) -> Result<()> {
        let broker = self.shared.broker()?;
        let mut spec = queue_spec(&decl.delivery);
        spec.dedup_window = decl.dedup_window.unwrap_or(Duration::ZERO);
        if let Some(max) = decl.max_length {
            spec.length_limit = LengthLimit {
                max_messages: Some(max),
                max_bytes: None,
                overflow: OverflowPolicy::RejectPublish,
            };
        }
        match broker.create_queue(&decl.name, spec.clone()).await {
            Err(BrokerError::QueueExists { .. }) => {
                let info = broker.describe_queue(&decl.name).map_err(map_error)?;
                same_settings("queue", &decl.name, &info.spec, &spec)
            }
            other => other.map_err(map_error),
        }
    }

    async fn dedup_window(&self, queue: &str) -> Result<Option<Duration>> {
        let info = self
            .shared
            .broker()?
            .describe_queue(queue)
            .map_err(map_error)?;
        Ok(Some(info.spec.dedup_window).filter(|w| !w.is_zero()))
    }

    async fn declare_topic(&self, decl: &TopicDecl) -> Result<()> {
        let broker = self.shared.broker()?;
        let spec = TopicSpec {
            partitions: decl.partitions,
            ..TopicSpec::default()
        };
        match broker.create_topic(&decl.name, spec).await {
            Err(BrokerError::TopicExists { .. }) => {
                let info = broker.describe_topic(&decl.name).map_err(map_error)?;
                same_partitions(decl, info.partitions.len())
            }
            other => other.map_err(map_error),
        }
    }

    async fn declare_subscription(&self, decl: &SubscriptionDecl) -> Result<()> {
        let broker = self.shared.broker()?;
        let mut spec = SubscriptionSpec::new(name(&decl.topic)?);
        spec.delivery = queue_spec(&decl.delivery);
        match broker.create_subscription(&decl.name, spec.clone()).await {
            Err(BrokerError::QueueExists { .. }) => {
                let info = broker
                    .describe_subscription(&decl.name)
                    .map_err(map_error)?;
                if info.spec.topic != spec.topic {
                    return Err(declared::other_topic(
                        &decl.name,
                        &decl.topic,
                        info.spec.topic.as_str(),
                    ));
                }
                same_settings(
                    "subscription",
                    &decl.name,
                    &info.spec.delivery,
                    &spec.delivery,
                )
            }
            other => other.map_err(map_error),
        }
    }

    async fn delete(&self, source: &Source) -> Result<()> {
        let broker = self.shared.broker()?;
        broker
            .delete_queue(&queue_of(source))
            .await
            .map_err(map_error)
    }

    async fn declare_temporary_queue(&self, decl: &TemporaryQueueDecl) -> Result<TemporaryQueue> {
        // No connection to bind it to: the process is the owner, and the broker dies with
        // it — a temporary queue is never recovered when the directory opens again.
        let owner = owner_name();
        let name = self
            .shared
            .broker()?
            .create_temporary_queue(&owner, decl.idle_timeout)
            .await
            .map_err(map_error)?;
        Ok(TemporaryQueue {
            name: name.to_string(),
            owner,
        })
    }

    async fn delete_topic(&self, name: &str) -> Result<()> {
        let broker = self.shared.broker()?;
        broker.delete_topic(name).await.map_err(map_error)
    }

    async fn publish(&self, destination: &Destination, batch: Vec<Message>) -> Result<()> {
        let broker = self.shared.broker()?;
        let batch = batch
            .into_iter()
            .map(outgoing)
            .collect::<Result<Vec<_>>>()?;
        match destination {
            Destination::Queue(queue) => broker
                .publish_batch(queue, batch)
                .await
                .map(drop)
                .map_err(map_error),
            Destination::Topic(topic) => broker
                .publish_to_topic(topic, batch)
                .await
                .map(drop)
                .map_err(map_error),
        }
    }

    async fn open_consumer(
        &self,
        source: &Source,
        options: &ConsumerOptions,
    ) -> Result<Box<dyn ConsumerBackend>> {
        let broker = self.shared.broker()?;
        let queue = queue_of(source);
        // Fail now, not at the first fetch, when the source does not exist.
        let info = broker.describe_queue(&queue).map_err(map_error)?;
        let max_deliveries =
            (!matches!(source, Source::DeadLetters(_))).then_some(info.spec.retry.max_deliveries);
        let queue: Arc<str> = Arc::from(queue);
        Ok(Box::new(EmbeddedConsumer {
            shared: self.shared.clone(),
            acks: Arc::new(AckBatcher::new(self.shared.clone(), queue.clone())),
            queue,
            name: options.name.clone(),
            max_deliveries,
        }))
    }

    async fn close(&self) -> Result<()> {
        self.shared.close();
        Ok(())
    }
}

fn same_settings(kind: &'static str, name: &str, have: &QueueSpec, want: &QueueSpec) -> Result<()> {
    if have == want {
        Ok(())
    } else {
        Err(declared(want).conflict(&declared(have), kind, name))
    }
}

/// A broker spec in the SDK's words: the fields a declaration sets.
fn declared(spec: &QueueSpec) -> Declared {
    let b = &spec.retry.backoff;
    Declared::default()
        .max_deliveries(spec.retry.max_deliveries)
        .backoff(b.base, b.cap, b.multiplier, b.jitter)
        .dead_letter(spec.dead_letter != DeadLetter::Disabled)
        .lease(spec.lease)
        .default_ttl(spec.default_ttl)
        .max_delay(spec.max_delay)
        .priority_levels(spec.priority_levels)
        .ordering(spec.ordering == OrderingMode::KeyShared)
        .dedup_window(Some(spec.dedup_window))
        .max_length(spec.length_limit.max_messages)
}

struct EmbeddedConsumer {
    shared: Arc<Shared>,
    acks: Arc<AckBatcher>,
    queue: Arc<str>,
    name: String,
    max_deliveries: Option<u32>,
}

#[async_trait]
impl ConsumerBackend for EmbeddedConsumer {
    fn max_deliveries(&self) -> Option<u32> {
        self.max_deliveries
    }

    async fn fetch(&mut self, max: usize, wait: Duration) -> Result<Vec<Incoming>> {
        let broker = self.shared.broker()?;
        let messages = broker
            .receive(&self.queue, &self.name, max, None, Some(wait))
            .await
            .map_err(map_error)?;
        Ok(messages
            .into_iter()
            .map(|m| Incoming {
                message: received(&m),
                settler: Arc::new(EmbeddedSettler {
                    shared: self.shared.clone(),
                    acks: self.acks.clone(),
                    queue: self.queue.clone(),
                    seq: m.seq,
                    token: m.token,
                }),
            })
            .collect())
    }

    async fn close(&mut self) -> Result<()> {
        Ok(())
    }
}

struct EmbeddedSettler {
    shared: Arc<Shared>,
    acks: Arc<AckBatcher>,
    queue: Arc<str>,
    seq: Seq,
    token: LeaseToken,
}

#[async_trait]
impl Settler for EmbeddedSettler {
    async fn ack(&self) -> Result<()> {
        self.acks.ack(self.seq, self.token).await
    }

    async fn nack(&self, delay: Option<Duration>, error: Option<&str>) -> Result<()> {
        let broker = self.shared.broker()?;
        broker
            .nack(&self.queue, self.seq, self.token, delay, error)
            .await
            .map(drop)
            .map_err(map_error)
    }

    async fn reject(&self, reason: &str) -> Result<()> {
        let broker = self.shared.broker()?;
        broker
            .reject(&self.queue, self.seq, self.token, reason)
            .await
            .map_err(map_error)
    }

    async fn extend(&self, by: Duration) -> Result<()> {
        let broker = self.shared.broker()?;
        broker
            .extend(&self.queue, self.seq, self.token, by)
            .await
            .map(drop)
            .map_err(map_error)
    }
}
