//! The NATS JetStream transport: declarations, publishes and consumers over one connection.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull, stream};
use async_trait::async_trait;
use futures_util::StreamExt;

use super::capabilities;
use super::codec::{self, DELAY_MS};
use super::consumer::{Live, Mover, NatsConsumer};
use super::names::{self, SHARED_CONSUMER, StreamName};
use super::settings::{self, Settings};
use crate::capability::Capabilities;
use crate::error::{Error, Result};
use crate::message::Message;
use crate::spec::{Destination, QueueDecl, Source, SubscriptionDecl, TopicDecl};
use crate::transport::{ConsumerBackend, ConsumerOptions, Transport};

pub(super) const NAME: &str = "NATS JetStream";

/// How long dead letters are kept, as on the Ferry broker.
const DEAD_LETTER_RETENTION: Duration = Duration::from_secs(14 * 24 * 3600);
/// The lease of deliveries from dead-letter and holding streams.
pub(super) const INTERNAL_LEASE: Duration = Duration::from_secs(30);
/// Deliveries in flight on one shared consumer: above every prefetch a fleet of consumers
/// is likely to hold, so the engine never stalls a queue that has idle consumers.
const MAX_ACK_PENDING: i64 = 20_000;
/// The shortest duplicate window the engine accepts; it stands for none on a queue declared
/// without one.
const SHORTEST_DEDUP_WINDOW: Duration = Duration::from_millis(100);
/// The description of a topic's stream.
const TOPIC_DESCRIPTION: &str = "ferry-topic";

/// A connection to a NATS server with JetStream. Closing it drops the connection; later
/// calls, and settlements of deliveries still held, are [`Error::Closed`].
pub struct Nats {
    shared: Arc<Shared>,
    capabilities: Capabilities,
}

pub(super) struct Shared {
    js: RwLock<Option<jetstream::Context>>,
}

impl Shared {
    pub(super) fn js(&self) -> Result<jetstream::Context> {
        self.js
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or(Error::Closed)
    }
}

/// An engine failure as the SDK's error.
pub(super) fn transport_error(e: impl std::fmt::Display) -> Error {
    Error::Transport {
        transport: NAME,
        message: e.to_string(),
        source: None,
    }
}

/// Whether the engine said that a stream or consumer does not exist. The client's error
/// types differ per call; the server's wording (and code) is the one thing they share.
fn says_not_found(e: &impl std::fmt::Display) -> bool {
    let text = e.to_string().to_ascii_lowercase();
    text.contains("not found") || text.contains("10059") || text.contains("10014")
}

fn says_in_use(e: &impl std::fmt::Display) -> bool {
    let text = e.to_string().to_ascii_lowercase();
    text.contains("already in use") || text.contains("10058") || text.contains("10013")
}

fn map_admin(kind: &'static str, name: &str, e: impl std::fmt::Display) -> Error {
    if says_not_found(&e) {
        Error::NotFound {
            kind,
            name: name.to_owned(),
        }
    } else if says_in_use(&e) {
        Error::Conflict {
            kind,
            name: name.to_owned(),
            problem: format!("the engine refused the declared settings: {e}"),
        }
    } else {
        transport_error(e)
    }
}

impl Nats {
    /// Connects to `url` (`nats://host:port`) and checks that JetStream is enabled there.
    pub async fn connect(url: &str) -> Result<Nats> {
        let client = async_nats::ConnectOptions::new()
            .name("ferry")
            .connection_timeout(Duration::from_secs(5))
            .connect(url)
            .await
            .map_err(|e| match e.kind() {
                // The server refused the credentials (or that none were given).
                async_nats::ConnectErrorKind::AuthorizationViolation
                | async_nats::ConnectErrorKind::Authentication => {
                    Error::unauthorized(format!("{url}: {e}"))
                }
                _ => Error::Transport {
                    transport: NAME,
                    message: format!("cannot connect to {url}: {e}"),
                    source: Some(Box::new(e)),
                },
            })?;
        let js = jetstream::ContextBuilder::new()
            .timeout(Duration::from_secs(10))
            .build(client);
        // The account info call, read loosely: the client's typed answer expects fields
        // newer servers send. No answer (no responders) means JetStream is off.
        let not_on = |why: String| Error::Transport {
            transport: NAME,
            message: format!(
                "{url} answers but JetStream does not (start the server with -js): {why}"
            ),
            source: None,
        };
        let answer = js
            .client()
            .request("$JS.API.INFO", bytes::Bytes::new())
            .await
            .map_err(|e| not_on(e.to_string()))?;
        let info: serde_json::Value =
            serde_json::from_slice(&answer.payload).map_err(|e| not_on(e.to_string()))?;
        if let Some(error) = info.get("error") {
            return Err(not_on(error.to_string()));
        }
        Ok(Nats {
            shared: Arc::new(Shared {
                js: RwLock::new(Some(js)),
            }),
            capabilities: capabilities(),
        })
    }
}

fn work_queue(names: &StreamName) -> stream::Config {
    stream::Config {
        name: names.stream.clone(),
        subjects: vec![names.subject.clone()],
        retention: stream::RetentionPolicy::WorkQueue,
        storage: stream::StorageType::File,
        num_replicas: 1,
        ..Default::default()
    }
}

fn dead_letter_stream(names: &StreamName) -> stream::Config {
    stream::Config {
        max_age: DEAD_LETTER_RETENTION,
        description: Some("ferry-dead-letters".into()),
        ..work_queue(names)
    }
}

/// MaxDeliver of every consumer the SDK makes: unlimited. At MaxDeliver JetStream 2.9 only
/// emits an advisory and keeps the message unacknowledged for ever, so any bound would
/// strand a delivery the SDK failed to dead-letter — the dead-letter stream unavailable, or
/// the consumer gone between taking it and republishing it. The SDK counts deliveries
/// instead (the engine's delivery count goes on rising) and dead-letters every one past
/// `max_deliveries` when it is fetched (`consumer.rs`). A queue or subscription declared
/// with a bound by an earlier version loses it when declared again: the engine updates a
/// durable consumer's MaxDeliver in place.
const UNLIMITED_DELIVERIES: i64 = -1;

fn shared_consumer(ack_wait: Duration) -> pull::Config {
    pull::Config {
        durable_name: Some(SHARED_CONSUMER.into()),
        ack_policy: jetstream::consumer::AckPolicy::Explicit,
        ack_wait,
        max_deliver: UNLIMITED_DELIVERIES,
        max_ack_pending: MAX_ACK_PENDING,
        ..Default::default()
    }
}

/// Creates the stream, or finds it with this configuration (the engine answers a repeated
/// identical create with success and a different one with "already in use").
async fn ensure_stream(
    js: &jetstream::Context,
    kind: &'static str,
    name: &str,
    config: stream::Config,
) -> Result<stream::Stream> {
    js.create_stream(config)
        .await
        .map_err(|e| map_admin(kind, name, e))
}

async fn ensure_consumer(
    stream: &stream::Stream,
    kind: &'static str,
    name: &str,
    config: pull::Config,
) -> Result<()> {
    stream
        .create_consumer(config)
        .await
        .map(drop)
        .map_err(|e| map_admin(kind, name, e))
}

async fn stream_settings(
    js: &jetstream::Context,
    kind: &'static str,
    name: &str,
    stream: &str,
) -> Result<Option<(stream::Stream, Settings)>> {
    match js.get_stream(stream).await {
        Ok(s) => {
            let settings = Settings::from_description(
                &format!("{kind} `{name}`"),
                s.cached_info().config.description.as_deref(),
            )?;
            Ok(Some((s, settings)))
        }
        Err(e) if says_not_found(&e) => Ok(None),
        Err(e) => Err(transport_error(e)),
    }
}

fn conflict(kind: &'static str, name: &str, have: &Settings, want: &Settings) -> Error {
    match (&want.topic, &have.topic) {
        (Some(declared), Some(existing)) if declared != existing => {
            crate::declared::other_topic(name, declared, existing)
        }
        _ => want.declared().conflict(&have.declared(), kind, name),
    }
}

/// The topic another topic's stream holds subscription `name` for, if one does. JetStream
/// names consumers per stream, so the same name on two topics' streams would be two
/// subscriptions; Ferry names one subscription by its name on every transport. A
/// declaration looks through the topics' streams (one request each): declarations are
/// rare, and a registry of names kept beside the streams would be one more thing to keep in
/// step with them.
async fn subscribed_elsewhere(
    js: &jetstream::Context,
    this_stream: &str,
    name: &str,
    consumer_name: &str,
) -> Result<Option<String>> {
    let mut streams = js.stream_names();
    let mut topics = Vec::new();
    while let Some(stream) = streams.next().await {
        let stream = stream.map_err(transport_error)?;
        if names::is_topic_stream(&stream) && stream != this_stream {
            topics.push(stream);
        }
    }
    for stream in topics {
        let Ok(stream) = js.get_stream_no_info(&stream).await else {
            continue; // Deleted meanwhile.
        };
        match stream.consumer_info(consumer_name).await {
            Ok(info) => {
                let have = Settings::from_description(
                    &format!("subscription `{name}`"),
                    info.config.description.as_deref(),
                )?;
                return Ok(Some(have.topic.unwrap_or_default()));
            }
            Err(e) if says_not_found(&e) => {}
            Err(e) => return Err(transport_error(e)),
        }
    }
    Ok(None)
}

async fn delete_stream_if_any(js: &jetstream::Context, stream: &str) -> Result<()> {
    match js.delete_stream(stream).await {
        Ok(_) => Ok(()),
        Err(e) if says_not_found(&e) => Ok(()),
        Err(e) => Err(transport_error(e)),
    }
}

/// Publishes each message to its subject, pipelined, and waits until the stream stored
/// each. The engine stores them in order, so a failure leaves a prefix stored — except that
/// a message refused by a full queue may be followed by one accepted after an ack freed room.
async fn publish_all(
    js: &jetstream::Context,
    kind: &'static str,
    name: &str,
    batch: Vec<(String, codec::Encoded)>,
) -> Result<()> {
    let mut pending = Vec::with_capacity(batch.len());
    for (subject, encoded) in batch {
        let publish = jetstream::message::PublishMessage::build()
            .payload(encoded.payload)
            .headers(encoded.headers);
        let ack = js
            .send_publish(subject, publish)
            .await
            .map_err(|e| map_publish(kind, name, e))?;
        pending.push(ack);
    }
    for ack in pending {
        ack.await.map_err(|e| map_publish(kind, name, e))?;
    }
    Ok(())
}

pub(super) fn map_publish(
    kind: &'static str,
    name: &str,
    e: jetstream::context::PublishError,
) -> Error {
    use jetstream::context::PublishErrorKind as K;
    let text = e.to_string();
    match e.kind() {
        K::StreamNotFound => Error::NotFound {
            kind,
            name: name.to_owned(),
        },
        K::MaxPayloadExceeded => Error::invalid("message", text),
        _ if text.contains("maximum messages") || text.contains("maximum bytes") => Error::Full {
            message: format!("{kind} `{name}`: {text}"),
        },
        _ => transport_error(text),
    }
}

#[async_trait]
impl Transport for Nats {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    async fn declare_queue(&self, decl: &QueueDecl) -> Result<()> {
        let js = self.shared.js()?;
        let queue = names::queue(&decl.name)?;
        let dead_letters = names::queue_dead_letters(&decl.name)?;
        let delays = names::queue_delays(&decl.name)?;
        let want = Settings::queue(decl);
        if decl.dedup_window.is_some_and(|w| w < SHORTEST_DEDUP_WINDOW) {
            return Err(Error::invalid(
                "dedup_window",
                format!("NATS JetStream needs at least {SHORTEST_DEDUP_WINDOW:?}"),
            ));
        }
        if let Some((_, have)) = stream_settings(&js, "queue", &decl.name, &queue.stream).await?
            && have != want
        {
            return Err(conflict("queue", &decl.name, &have, &want));
        }
        // What messages move into comes first, the queue itself last: a declaration cut
        // short leaves no queue whose dead letters or delays have nowhere to go, and the
        // next declaration completes it (every step is idempotent).
        if decl.delivery.dead_letter {
            let s =
                ensure_stream(&js, "queue", &decl.name, dead_letter_stream(&dead_letters)).await?;
            ensure_consumer(&s, "queue", &decl.name, shared_consumer(INTERNAL_LEASE)).await?;
        }
        // Without a declared window the queue must not deduplicate (as on the Ferry
        // broker): a redrive republishing a dead letter under its id would otherwise vanish
        // as a duplicate. Zero means the engine's two minutes, so the shortest window stands
        // for none.
        let duplicate_window = decl.dedup_window.unwrap_or(SHORTEST_DEDUP_WINDOW);
        if !decl.delivery.max_delay.is_zero() {
            let config = stream::Config {
                duplicate_window,
                description: Some("ferry-delays".into()),
                ..work_queue(&delays)
            };
            let s = ensure_stream(&js, "queue", &decl.name, config).await?;
            // Messages sent back until due stay pending on this consumer; with a bound, a
            // backlog of far-off ones would keep a sooner one behind them from being seen.
            let holding = pull::Config {
                max_ack_pending: -1,
                ..shared_consumer(INTERNAL_LEASE)
            };
            ensure_consumer(&s, "queue", &decl.name, holding).await?;
        }
        let config = stream::Config {
            duplicate_window,
            max_messages: decl.max_length.map_or(-1, |m| m as i64),
            discard: if decl.max_length.is_some() {
                stream::DiscardPolicy::New
            } else {
                stream::DiscardPolicy::Old
            },
            description: Some(want.to_description()),
            ..work_queue(&queue)
        };
        let s = ensure_stream(&js, "queue", &decl.name, config).await?;
        ensure_consumer(&s, "queue", &decl.name, shared_consumer(want.lease())).await
    }

    async fn declare_topic(&self, decl: &TopicDecl) -> Result<()> {
        decl.unpartitioned(
            NAME,
            "a JetStream stream is one ordered log; declare the topic with 1 partition",
        )?;
        let js = self.shared.js()?;
        let topic = names::topic(&decl.name)?;
        let config = stream::Config {
            name: topic.stream.clone(),
            subjects: vec![topic.subject.clone()],
            // Kept until every subscription has acknowledged it; with none, not kept.
            retention: stream::RetentionPolicy::Interest,
            storage: stream::StorageType::File,
            num_replicas: 1,
            description: Some(TOPIC_DESCRIPTION.into()),
            ..Default::default()
        };
        ensure_stream(&js, "topic", &decl.name, config)
            .await
            .map(drop)
    }

    async fn declare_subscription(&self, decl: &SubscriptionDecl) -> Result<()> {
        let js = self.shared.js()?;
        let topic = names::topic(&decl.topic)?;
        let dead_letters = names::subscription_dead_letters(&decl.topic, &decl.name)?;
        let consumer_name = names::subscription_consumer(&decl.name);
        let want = Settings::subscription(&decl.topic, &decl.delivery);
        let stream = js
            .get_stream(&topic.stream)
            .await
            .map_err(|e| map_admin("topic", &decl.topic, e))?;
        match stream.consumer_info(&consumer_name).await {
            Ok(info) => {
                let have = Settings::from_description(
                    &format!("subscription `{}`", decl.name),
                    info.config.description.as_deref(),
                )?;
                if have != want {
                    return Err(conflict("subscription", &decl.name, &have, &want));
                }
            }
            Err(e) if says_not_found(&e) => {
                if let Some(existing) =
                    subscribed_elsewhere(&js, &topic.stream, &decl.name, &consumer_name).await?
                {
                    return Err(crate::declared::other_topic(
                        &decl.name,
                        &decl.topic,
                        &existing,
                    ));
                }
            }
            Err(e) => return Err(transport_error(e)),
        }
        if decl.delivery.dead_letter {
            let s = ensure_stream(
                &js,
                "subscription",
                &decl.name,
                dead_letter_stream(&dead_letters),
            )
            .await?;
            ensure_consumer(
                &s,
                "subscription",
                &decl.name,
                shared_consumer(INTERNAL_LEASE),
            )
            .await?;
        }
        let config = pull::Config {
            durable_name: Some(consumer_name),
            description: Some(want.to_description()),
            // What is published from its creation on, as a Ferry subscription.
            deliver_policy: jetstream::consumer::DeliverPolicy::New,
            ..shared_consumer(want.lease())
        };
        ensure_consumer(&stream, "subscription", &decl.name, config).await
    }

    async fn delete(&self, source: &Source) -> Result<()> {
        let js = self.shared.js()?;
        match source {
            Source::Queue(name) => {
                let queue = names::queue(name)?;
                js.delete_stream(&queue.stream)
                    .await
                    .map_err(|e| map_admin("queue", name, e))?;
                delete_stream_if_any(&js, &names::queue_delays(name)?.stream).await?;
                delete_stream_if_any(&js, &names::queue_dead_letters(name)?.stream).await
            }
            Source::Subscription { topic, name } => {
                let stream = js
                    .get_stream(&names::topic(topic)?.stream)
                    .await
                    .map_err(|e| map_admin("topic", topic, e))?;
                stream
                    .delete_consumer(&names::subscription_consumer(name))
                    .await
                    .map_err(|e| map_admin("subscription", name, e))?;
                delete_stream_if_any(&js, &names::subscription_dead_letters(topic, name)?.stream)
                    .await
            }
            // The dead letters alone: emptied, the stream kept for those still to come.
            Source::DeadLetters(origin) => {
                let dead_letters = dead_letter_names(origin)?;
                let stream = js
                    .get_stream(&dead_letters.stream)
                    .await
                    .map_err(|e| map_admin("dead-letter queue", origin.name(), e))?;
                stream.purge().await.map(drop).map_err(transport_error)
            }
        }
    }

    async fn delete_topic(&self, name: &str) -> Result<()> {
        let js = self.shared.js()?;
        let topic = names::topic(name)?;
        // Every subscription is a durable consumer of the topic's stream: while one is there
        // the topic is refused, as on every transport.
        let stream = js
            .get_stream(&topic.stream)
            .await
            .map_err(|e| map_admin("topic", name, e))?;
        let mut consumers = stream.consumer_names();
        if let Some(subscription) = consumers.next().await {
            let subscription = subscription.map_err(transport_error)?;
            return Err(Error::Conflict {
                kind: "topic",
                name: name.to_owned(),
                problem: format!(
                    "it has subscription `{subscription}`; delete its subscriptions first"
                ),
            });
        }
        js.delete_stream(&topic.stream)
            .await
            .map_err(|e| map_admin("topic", name, e))?;
        // The dead letters of its subscriptions go with it; `_s` ends the topic's part of
        // their names, so no other topic's match this prefix.
        let prefix = format!("ferry_sdlq_{}_s", names::escape(name));
        let mut streams = js.stream_names();
        let mut doomed = Vec::new();
        while let Some(stream) = streams.next().await {
            let stream = stream.map_err(transport_error)?;
            if stream.starts_with(&prefix) {
                doomed.push(stream);
            }
        }
        for stream in doomed {
            delete_stream_if_any(&js, &stream).await?;
        }
        Ok(())
    }

    async fn publish(&self, destination: &Destination, batch: Vec<Message>) -> Result<()> {
        let js = self.shared.js()?;
        let delayed = |m: &Message| m.delay.is_some_and(|d| !d.is_zero());
        let (kind, target) = match destination {
            Destination::Queue(name) => ("queue", names::queue(name)?),
            Destination::Topic(name) => {
                if batch.iter().any(delayed) {
                    return Err(Error::unsupported(
                        NAME,
                        "delayed delivery",
                        "delays are emulated for queues only; a delayed topic publish would need every subscription to hold it",
                    ));
                }
                ("topic", names::topic(name)?)
            }
        };
        let name = destination.name();
        let mut holding = None;
        if batch.iter().any(delayed) {
            let Some((_, settings)) = stream_settings(&js, kind, name, &target.stream).await?
            else {
                return Err(Error::NotFound {
                    kind,
                    name: name.to_owned(),
                });
            };
            let max = Duration::from_millis(settings.max_delay_ms);
            if let Some(m) = batch.iter().find(|m| m.delay.is_some_and(|d| d > max)) {
                return Err(Error::invalid(
                    "delay",
                    format!(
                        "{:?} is longer than queue `{name}` accepts ({max:?}, its max_delay)",
                        m.delay.unwrap_or_default()
                    ),
                ));
            }
            holding = Some(names::queue_delays(name)?);
        }
        let mut encoded = Vec::with_capacity(batch.len());
        for message in &batch {
            match (&holding, message.delay) {
                (Some(holding), Some(delay)) if !delay.is_zero() => {
                    let extra = [(DELAY_MS, delay.as_millis().to_string())];
                    encoded.push((
                        holding.subject.clone(),
                        codec::encode(message, &extra, None)?,
                    ));
                }
                _ => encoded.push((target.subject.clone(), codec::encode(message, &[], None)?)),
            }
        }
        publish_all(&js, kind, name, encoded).await
    }

    async fn dedup_window(&self, queue: &str) -> Result<Option<Duration>> {
        let js = self.shared.js()?;
        let stream = names::queue(queue)?;
        let settings = stream_settings(&js, "queue", queue, &stream.stream)
            .await?
            .map(|(_, settings)| settings)
            .filter(|s| s.kind == settings::QUEUE)
            .ok_or_else(|| Error::NotFound {
                kind: "queue",
                name: queue.to_owned(),
            })?;
        Ok(settings
            .dedup_window_ms
            .filter(|&ms| ms > 0)
            .map(Duration::from_millis))
    }

    async fn open_consumer(
        &self,
        source: &Source,
        options: &ConsumerOptions,
    ) -> Result<Box<dyn ConsumerBackend>> {
        let js = self.shared.js()?;
        let (consumer, live, mover) = match source {
            Source::Queue(name) => {
                let queue = names::queue(name)?;
                let Some((stream, settings)) =
                    stream_settings(&js, "queue", name, &queue.stream).await?
                else {
                    return Err(Error::NotFound {
                        kind: "queue",
                        name: name.clone(),
                    });
                };
                if settings.kind != settings::QUEUE {
                    return Err(Error::invalid(
                        format!("queue `{name}`"),
                        "its stream was not declared as a Ferry queue",
                    ));
                }
                let consumer = stream
                    .get_consumer::<pull::Config>(SHARED_CONSUMER)
                    .await
                    .map_err(|e| map_admin("queue", name, e))?;
                let mover = if settings.max_delay_ms > 0 {
                    let holding = names::queue_delays(name)?;
                    let holding_consumer = js
                        .get_stream(&holding.stream)
                        .await
                        .map_err(|e| map_admin("queue", name, e))?
                        .get_consumer::<pull::Config>(SHARED_CONSUMER)
                        .await
                        .map_err(|e| map_admin("queue", name, e))?;
                    Some(Mover::new(holding_consumer, queue.subject.clone(), name))
                } else {
                    None
                };
                let dead_letters = if settings.dead_letter {
                    Some(names::queue_dead_letters(name)?)
                } else {
                    None
                };
                let live = Live::new(name, settings, dead_letters, &options.name);
                (consumer, Some(live), mover)
            }
            Source::Subscription { topic, name } => {
                let stream = js
                    .get_stream(&names::topic(topic)?.stream)
                    .await
                    .map_err(|e| map_admin("topic", topic, e))?;
                let consumer = stream
                    .get_consumer::<pull::Config>(&names::subscription_consumer(name))
                    .await
                    .map_err(|e| map_admin("subscription", name, e))?;
                let settings = Settings::from_description(
                    &format!("subscription `{name}`"),
                    consumer.cached_info().config.description.as_deref(),
                )?;
                let dead_letters = if settings.dead_letter {
                    Some(names::subscription_dead_letters(topic, name)?)
                } else {
                    None
                };
                let live = Live::new(name, settings, dead_letters, &options.name);
                (consumer, Some(live), None)
            }
            Source::DeadLetters(origin) => {
                let dead_letters = dead_letter_names(origin)?;
                let consumer = js
                    .get_stream(&dead_letters.stream)
                    .await
                    .map_err(|e| map_admin("dead-letter queue", origin.name(), e))?
                    .get_consumer::<pull::Config>(SHARED_CONSUMER)
                    .await
                    .map_err(|e| map_admin("dead-letter queue", origin.name(), e))?;
                (consumer, None, None)
            }
        };
        Ok(Box::new(NatsConsumer::new(
            self.shared.clone(),
            consumer,
            live.map(Arc::new),
            mover,
        )))
    }

    async fn close(&self) -> Result<()> {
        let js = self
            .shared
            .js
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(js) = js {
            // Drain: what was sent is flushed, then the connection closes for every
            // consumer and delivery still holding the client. Those fail with `Closed`
            // before they touch it, and unsettled deliveries come back when their leases end.
            match tokio::time::timeout(Duration::from_secs(5), js.client().drain()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(transport_error(e)),
                Err(_) => return Err(Error::Timeout(Duration::from_secs(5))),
            }
        }
        Ok(())
    }
}

/// The dead-letter stream of a queue or subscription.
fn dead_letter_names(origin: &Source) -> Result<StreamName> {
    match origin {
        Source::Queue(name) => names::queue_dead_letters(name),
        Source::Subscription { topic, name } => names::subscription_dead_letters(topic, name),
        Source::DeadLetters(inner) => dead_letter_names(inner),
    }
}
