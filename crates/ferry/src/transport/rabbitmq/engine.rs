//! The RabbitMQ transport: one AMQP connection; admin calls on short-lived channels (a
//! refused call closes its channel), publishes on one confirm channel, and one channel per
//! consumer's subscription session, which its deliveries settle on (`consume`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use lapin::options::{
    BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions,
    ExchangeDeleteOptions, QueueBindOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::protocol::{AMQPErrorKind, AMQPSoftError};
use lapin::publisher_confirm::Confirmation;
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};

use super::capabilities;
use super::consume::{RabbitConsumer, Reader};
use super::temporary;
use super::topology::{self, Settings, dlq, settings_queue};
use crate::capability::Capabilities;
use crate::error::{Error, Result};
use crate::message::Message;
use crate::spec::{Destination, QueueDecl, Source, SubscriptionDecl, TopicDecl};
use crate::temporary::{TemporaryQueue, TemporaryQueueDecl};
use crate::transport::{ConsumerBackend, ConsumerOptions, Transport};

pub(super) const NAME: &str = "rabbitmq";

/// How often a publish a timer queue refused is tried, and the first wait between tries
/// (doubling): 20 + 40 + 80 + 160 ms in all.
const TIMER_PUBLISH_TRIES: u32 = 5;
const TIMER_PUBLISH_RETRY: Duration = Duration::from_millis(20);
/// A delay or retry queue is declared again when this old, well within its x-expires.
const REDECLARE_TIMERS: Duration = Duration::from_secs(600);

/// A connection to RabbitMQ.
pub struct RabbitMq {
    inner: Arc<Inner>,
    capabilities: Capabilities,
}

pub(super) struct Inner {
    connection: Connection,
    publish: tokio::sync::Mutex<Option<Channel>>,
    /// Policies read or declared by this process, by queue name.
    settings: Mutex<HashMap<String, Arc<Settings>>>,
    /// Delay and retry queues declared by this process: target → (queue → when declared).
    timers: Mutex<HashMap<String, HashMap<String, Instant>>>,
    closed: AtomicBool,
}

impl RabbitMq {
    pub async fn connect(url: &str) -> Result<RabbitMq> {
        let properties = ConnectionProperties::default()
            .with_executor(tokio_executor_trait::Tokio::current())
            .with_reactor(tokio_reactor_trait::Tokio)
            .with_connection_name("ferry".into());
        let uri = url
            .parse::<lapin::uri::AMQPUri>()
            .map_err(|problem| Error::BadUrl {
                url: url.to_owned(),
                problem: format!("{problem}; expected amqp://user:pass@host:port/vhost"),
            })?;
        let connection =
            Connection::connect_uri(uri, properties)
                .await
                .map_err(|e| match soft(&e) {
                    // At connect, ACCESS_REFUSED is the login refused (a wrong user or password,
                    // or a user without access to the vhost).
                    Some(AMQPSoftError::ACCESSREFUSED) => Error::unauthorized(e.to_string()),
                    _ => Error::transport(NAME, e),
                })?;
        Ok(RabbitMq {
            inner: Arc::new(Inner {
                connection,
                publish: tokio::sync::Mutex::new(None),
                settings: Mutex::default(),
                timers: Mutex::default(),
                closed: AtomicBool::new(false),
            }),
            capabilities: capabilities(),
        })
    }
}

/// The soft error a call was refused with, if it was refused.
fn soft(e: &lapin::Error) -> Option<AMQPSoftError> {
    match e {
        lapin::Error::ProtocolError(p) => match p.kind() {
            AMQPErrorKind::Soft(s) => Some(s.clone()),
            AMQPErrorKind::Hard(_) => None,
        },
        _ => None,
    }
}

impl Inner {
    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// The SDK error for an engine failure on `kind` `name`.
    pub(super) fn error(&self, e: lapin::Error, kind: &'static str, name: &str) -> Error {
        if self.is_closed() {
            return Error::Closed;
        }
        match soft(&e) {
            Some(AMQPSoftError::NOTFOUND) => Error::NotFound {
                kind,
                name: name.to_owned(),
            },
            Some(AMQPSoftError::PRECONDITIONFAILED) => Error::Conflict {
                kind,
                name: name.to_owned(),
                problem: e.to_string(),
            },
            Some(AMQPSoftError::ACCESSREFUSED) => {
                Error::invalid(format!("{kind} `{name}`"), e.to_string())
            }
            _ => Error::transport(NAME, e),
        }
    }

    pub(super) async fn channel(&self) -> Result<Channel> {
        if self.is_closed() {
            return Err(Error::Closed);
        }
        self.connection
            .create_channel()
            .await
            .map_err(|e| self.error(e, "connection", ""))
    }

    /// Whether the queue exists (a passive declare, on a channel of its own since a miss
    /// closes it).
    async fn queue_exists(&self, name: &str) -> Result<bool> {
        let ch = self.channel().await?;
        let options = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let found = match ch.queue_declare(name, options, FieldTable::default()).await {
            Ok(_) => true,
            Err(e) if soft(&e) == Some(AMQPSoftError::NOTFOUND) => false,
            Err(e) => return Err(self.error(e, "queue", name)),
        };
        let _ = ch.close(200, "done").await;
        Ok(found)
    }

    async fn exchange_exists(&self, name: &str) -> Result<bool> {
        let ch = self.channel().await?;
        let options = ExchangeDeclareOptions {
            passive: true,
            ..ExchangeDeclareOptions::default()
        };
        let found = match ch
            .exchange_declare(name, ExchangeKind::Fanout, options, FieldTable::default())
            .await
        {
            Ok(()) => true,
            Err(e) if soft(&e) == Some(AMQPSoftError::NOTFOUND) => false,
            Err(e) => return Err(self.error(e, "topic", name)),
        };
        let _ = ch.close(200, "done").await;
        Ok(found)
    }

    async fn declare(
        &self,
        ch: &Channel,
        kind: &'static str,
        name: &str,
        args: FieldTable,
    ) -> Result<()> {
        let options = QueueDeclareOptions {
            durable: true,
            ..QueueDeclareOptions::default()
        };
        ch.queue_declare(name, options, args)
            .await
            .map(drop)
            .map_err(|e| self.error(e, kind, name))
    }

    /// Deletes the queue if it exists.
    async fn delete_queue(&self, name: &str) -> Result<()> {
        let ch = self.channel().await?;
        match ch.queue_delete(name, QueueDeleteOptions::default()).await {
            Ok(_) => {}
            Err(e) if soft(&e) == Some(AMQPSoftError::NOTFOUND) => {}
            Err(e) => return Err(self.error(e, "queue", name)),
        }
        let _ = ch.close(200, "done").await;
        Ok(())
    }

    /// The confirm channel, opened again if a refused publish closed it.
    async fn publish_channel(&self) -> Result<Channel> {
        let mut slot = self.publish.lock().await;
        if let Some(ch) = slot.as_ref()
            && ch.status().connected()
        {
            return Ok(ch.clone());
        }
        let ch = self.channel().await?;
        ch.confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| self.error(e, "connection", ""))?;
        *slot = Some(ch.clone());
        Ok(ch)
    }

    /// Publishes each `(routing key, body, properties)` through `exchange` and returns once
    /// RabbitMQ confirmed all of them. With `mandatory`, a message no queue took is
    /// `NotFound` (`kind`, named by its routing key); a nack (a queue at its max length) is
    /// `Full`.
    pub(super) async fn publish_confirmed(
        &self,
        exchange: &str,
        kind: &'static str,
        mandatory: bool,
        batch: Vec<(String, Vec<u8>, BasicProperties)>,
    ) -> Result<()> {
        let ch = self.publish_channel().await?;
        let options = BasicPublishOptions {
            mandatory,
            ..BasicPublishOptions::default()
        };
        let mut pending = Vec::with_capacity(batch.len());
        for (key, body, properties) in batch {
            let confirm = ch
                .basic_publish(exchange, &key, options, &body, properties)
                .await
                .map_err(|e| self.error(e, kind, &key))?;
            pending.push((key, confirm));
        }
        for (key, confirm) in pending {
            let name = if exchange.is_empty() { &key } else { exchange };
            match confirm.await.map_err(|e| self.error(e, kind, name))? {
                Confirmation::Ack(None) | Confirmation::NotRequested => {}
                Confirmation::Ack(Some(_)) => {
                    return Err(Error::NotFound {
                        kind,
                        name: name.to_owned(),
                    });
                }
                Confirmation::Nack(_) => {
                    return Err(Error::Full {
                        message: format!(
                            "RabbitMQ refused a message to {kind} `{name}` (at its max length?)"
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// Publishes one message to a delay or retry queue. Such a queue has no length limit,
    /// so a nack from it means the quorum queue cannot take messages yet (one declared a
    /// moment ago may still be electing its leader): the publish, which stored nothing, is
    /// tried again a few times before the refusal is passed on.
    pub(super) async fn publish_to_timer(
        &self,
        queue: &str,
        body: Vec<u8>,
        properties: BasicProperties,
    ) -> Result<()> {
        let mut wait = TIMER_PUBLISH_RETRY;
        for _ in 1..TIMER_PUBLISH_TRIES {
            let one = vec![(queue.to_owned(), body.clone(), properties.clone())];
            match self.publish_confirmed("", "queue", true, one).await {
                Err(Error::Full { message }) => {
                    tracing::debug!(%queue, %message, "a timer queue refused a publish; trying again");
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                }
                other => return other,
            }
        }
        self.publish_confirmed(
            "",
            "queue",
            true,
            vec![(queue.to_owned(), body, properties)],
        )
        .await
    }

    /// Keeps `settings` as the policy of `name` for this process (a temporary queue's).
    pub(super) fn remember_settings(&self, name: &str, settings: Arc<Settings>) {
        self.settings
            .lock()
            .unwrap()
            .insert(name.to_owned(), settings);
    }

    /// The policy `name` was declared with; `None` when it has none (Ferry did not declare
    /// it, or it does not exist).
    pub(super) async fn settings(&self, name: &str) -> Result<Option<Arc<Settings>>> {
        if let Some(s) = self.settings.lock().unwrap().get(name) {
            return Ok(Some(s.clone()));
        }
        let queue = settings_queue(name);
        let ch = self.channel().await?;
        // Another reader holds the one message for a moment between its get and its
        // requeue; an empty queue for longer is a declaration that crashed before it wrote.
        let mut found = None;
        for _ in 0..25 {
            match ch
                .basic_get(&queue, BasicGetOptions { no_ack: false })
                .await
            {
                Ok(Some(m)) => {
                    let parsed = serde_json::from_slice::<Settings>(&m.delivery.data);
                    let _ = m
                        .delivery
                        .acker
                        .nack(lapin::options::BasicNackOptions {
                            requeue: true,
                            multiple: false,
                        })
                        .await;
                    found = Some(parsed.map_err(|e| {
                        Error::invalid(format!("settings of `{name}`"), e.to_string())
                    })?);
                    break;
                }
                Ok(None) => tokio::time::sleep(Duration::from_millis(20)).await,
                Err(e) if soft(&e) == Some(AMQPSoftError::NOTFOUND) => return Ok(None),
                Err(e) => return Err(self.error(e, "queue", name)),
            }
        }
        let _ = ch.close(200, "done").await;
        Ok(found.map(|s| {
            let s = Arc::new(s);
            self.settings
                .lock()
                .unwrap()
                .insert(name.to_owned(), s.clone());
            s
        }))
    }

    async fn write_settings(&self, ch: &Channel, name: &str, settings: &Settings) -> Result<()> {
        let queue = settings_queue(name);
        let mut args = FieldTable::default();
        args.insert("x-queue-type".into(), topology::long("classic"));
        args.insert("x-max-length".into(), AMQPValue::LongLongInt(1));
        self.declare(ch, "queue", &queue, args).await?;
        let body = serde_json::to_vec(settings)?;
        let properties = BasicProperties::default().with_delivery_mode(2);
        self.publish_confirmed("", "queue", true, vec![(queue, body, properties)])
            .await
    }

    /// Creates `name` (with its dead-letter queue and stored policy) or checks that it
    /// exists with the same policy.
    async fn declare_source(&self, kind: &'static str, name: &str, want: Settings) -> Result<()> {
        let have = self.settings(name).await?;
        if let Some(have) = &have
            && **have != want
        {
            return Err(match (&want.topic, &have.topic) {
                (Some(declared), Some(existing)) if declared != existing => {
                    crate::declared::other_topic(name, declared, existing)
                }
                _ => want.declared().conflict(&have.declared(), kind, name),
            });
        }
        let ch = self.channel().await?;
        if want.dead_letter {
            let mut args = FieldTable::default();
            args.insert("x-queue-type".into(), topology::long("quorum"));
            self.declare(&ch, kind, &dlq(name), args).await?;
        }
        self.declare(&ch, kind, name, want.queue_args(name)?)
            .await?;
        if let Some(topic) = &want.topic {
            ch.queue_bind(
                name,
                topic,
                "",
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(|e| self.error(e, "topic", topic))?;
        }
        if have.is_none() {
            self.write_settings(&ch, name, &want).await?;
            self.settings
                .lock()
                .unwrap()
                .insert(name.to_owned(), Arc::new(want));
        }
        let _ = ch.close(200, "done").await;
        Ok(())
    }

    /// Declares (at most every few minutes) the queue `queue` that holds messages `ms` and
    /// then moves them into `target`.
    pub(super) async fn timer_queue(&self, target: &str, queue: &str, ms: u64) -> Result<()> {
        let fresh = self
            .timers
            .lock()
            .unwrap()
            .get(target)
            .and_then(|t| t.get(queue))
            .is_some_and(|at| at.elapsed() < REDECLARE_TIMERS);
        if fresh {
            return Ok(());
        }
        let ch = self.channel().await?;
        self.declare(&ch, "queue", queue, topology::timer_args(ms, target))
            .await?;
        let _ = ch.close(200, "done").await;
        self.timers
            .lock()
            .unwrap()
            .entry(target.to_owned())
            .or_default()
            .insert(queue.to_owned(), Instant::now());
        Ok(())
    }

    /// Deletes a work queue with everything this transport made for it.
    async fn delete_source(&self, kind: &'static str, name: &str) -> Result<()> {
        if !self.queue_exists(name).await? {
            return Err(Error::NotFound {
                kind,
                name: name.to_owned(),
            });
        }
        self.delete_queue(name).await?;
        self.delete_queue(&dlq(name)).await?;
        self.delete_queue(&settings_queue(name)).await?;
        self.settings.lock().unwrap().remove(name);
        // Delay and retry queues of other processes expire on their own (x-expires).
        let timers: Vec<String> = [name.to_owned(), dlq(name)]
            .iter()
            .filter_map(|t| self.timers.lock().unwrap().remove(t))
            .flat_map(|t| t.into_keys())
            .collect();
        for queue in timers {
            self.delete_queue(&queue).await?;
        }
        Ok(())
    }
}

#[async_trait]
impl Transport for RabbitMq {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    async fn declare_queue(&self, decl: &QueueDecl) -> Result<()> {
        let settings = Settings::new(None, &decl.delivery, decl.max_length);
        self.inner
            .declare_source("queue", &decl.name, settings)
            .await
    }

    async fn declare_temporary_queue(&self, decl: &TemporaryQueueDecl) -> Result<TemporaryQueue> {
        temporary::declare(&self.inner, decl).await
    }

    async fn declare_topic(&self, decl: &TopicDecl) -> Result<()> {
        decl.unpartitioned(
            NAME,
            "a topic is one fanout exchange; RabbitMQ does not partition it",
        )?;
        let ch = self.inner.channel().await?;
        let options = ExchangeDeclareOptions {
            durable: true,
            ..ExchangeDeclareOptions::default()
        };
        ch.exchange_declare(
            &decl.name,
            ExchangeKind::Fanout,
            options,
            FieldTable::default(),
        )
        .await
        .map_err(|e| self.inner.error(e, "topic", &decl.name))?;
        let _ = ch.close(200, "done").await;
        Ok(())
    }

    async fn declare_subscription(&self, decl: &SubscriptionDecl) -> Result<()> {
        if !self.inner.exchange_exists(&decl.topic).await? {
            return Err(Error::NotFound {
                kind: "topic",
                name: decl.topic.clone(),
            });
        }
        let settings = Settings::new(Some(decl.topic.clone()), &decl.delivery, None);
        self.inner
            .declare_source("subscription", &decl.name, settings)
            .await
    }

    async fn delete(&self, source: &Source) -> Result<()> {
        match source {
            Source::Queue(name) => self.inner.delete_source("queue", name).await,
            Source::Subscription { name, .. } => {
                self.inner.delete_source("subscription", name).await
            }
            Source::DeadLetters(origin) => {
                let name = dlq(origin.name());
                if !self.inner.queue_exists(&name).await? {
                    return Err(Error::NotFound {
                        kind: "dead-letter queue",
                        name,
                    });
                }
                self.inner.delete_queue(&name).await
            }
        }
    }

    async fn delete_topic(&self, name: &str) -> Result<()> {
        if !self.inner.exchange_exists(name).await? {
            return Err(Error::NotFound {
                kind: "topic",
                name: name.to_owned(),
            });
        }
        let ch = self.inner.channel().await?;
        // Subscriptions are queues bound to the topic's exchange: `if_unused` makes the broker
        // refuse (PRECONDITION_FAILED, a conflict) while one is bound, as on every transport.
        ch.exchange_delete(
            name,
            ExchangeDeleteOptions {
                if_unused: true,
                ..ExchangeDeleteOptions::default()
            },
        )
        .await
        .map_err(|e| self.inner.error(e, "topic", name))?;
        let _ = ch.close(200, "done").await;
        Ok(())
    }

    async fn publish(&self, destination: &Destination, batch: Vec<Message>) -> Result<()> {
        let delayed = |m: &Message| m.delay.filter(|d| !d.is_zero());
        match destination {
            Destination::Topic(topic) => {
                if batch.iter().any(|m| delayed(m).is_some()) {
                    return Err(Error::unsupported(
                        NAME,
                        "delayed delivery to a topic",
                        "each subscription has its own max_delay; publish delayed messages to \
                         a queue",
                    ));
                }
                if !self.inner.exchange_exists(topic).await? {
                    return Err(Error::NotFound {
                        kind: "topic",
                        name: topic.clone(),
                    });
                }
                let out = batch
                    .iter()
                    .map(|m| topology::outgoing(m).map(|(b, p)| (String::new(), b, p)))
                    .collect::<Result<Vec<_>>>()?;
                self.inner
                    .publish_confirmed(topic, "topic", false, out)
                    .await
            }
            Destination::Queue(queue) => {
                let mut out = Vec::with_capacity(batch.len());
                for message in &batch {
                    let (body, properties) = topology::outgoing(message)?;
                    let key = match delayed(message) {
                        None => queue.clone(),
                        Some(delay) => {
                            let settings = match self.inner.settings(queue).await? {
                                Some(s) => s,
                                None if self.inner.queue_exists(queue).await? => {
                                    Arc::new(Settings::unknown())
                                }
                                None => {
                                    return Err(Error::NotFound {
                                        kind: "queue",
                                        name: queue.clone(),
                                    });
                                }
                            };
                            if delay > Duration::from_millis(settings.max_delay_ms) {
                                return Err(Error::invalid(
                                    "delay",
                                    format!(
                                        "{delay:?} is longer than queue `{queue}`'s max_delay \
                                         of {} ms",
                                        settings.max_delay_ms
                                    ),
                                ));
                            }
                            let ms = topology::bucket_ms(delay)?;
                            let timer = topology::delay_queue(queue, ms);
                            self.inner.timer_queue(queue, &timer, ms).await?;
                            timer
                        }
                    };
                    out.push((key, body, properties));
                }
                self.inner.publish_confirmed("", "queue", true, out).await
            }
        }
    }

    async fn dedup_window(&self, _queue: &str) -> Result<Option<Duration>> {
        // RabbitMQ keeps no dedup window: the capability table refuses every dedup id as
        // Unsupported before a publisher would ask.
        Ok(None)
    }

    async fn open_consumer(
        &self,
        source: &Source,
        options: &ConsumerOptions,
    ) -> Result<Box<dyn ConsumerBackend>> {
        let inner = &self.inner;
        let (queue, kind, dead) = match source {
            Source::Queue(name) => (name.clone(), "queue", false),
            Source::Subscription { name, .. } => (name.clone(), "subscription", false),
            Source::DeadLetters(origin) => (dlq(origin.name()), "dead-letter queue", true),
        };
        if !inner.queue_exists(&queue).await? {
            return Err(Error::NotFound { kind, name: queue });
        }
        let origin_settings = inner.settings(source.name()).await?;
        if let (Source::Subscription { topic, name }, Some(s)) = (source, &origin_settings)
            && s.topic.as_deref() != Some(topic.as_str())
        {
            return Err(Error::NotFound {
                kind: "subscription",
                name: format!("{topic}/{name}"),
            });
        }
        let origin_settings = origin_settings.unwrap_or_else(|| Arc::new(Settings::unknown()));
        let settings = if dead {
            Arc::new(Settings::for_dead_letters(&origin_settings))
        } else {
            origin_settings
        };
        Ok(Box::new(RabbitConsumer::new(Reader {
            inner: inner.clone(),
            queue,
            origin: source.name().to_owned(),
            settings,
            dead,
            consumer: options.name.clone(),
            prefetch: options.prefetch,
        })))
    }

    async fn close(&self) -> Result<()> {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.inner.publish.lock().await.take();
        match self
            .inner
            .connection
            .close(200, "closed by the application")
            .await
        {
            Ok(()) => Ok(()),
            // Already gone (the server closed it): closing is done either way.
            Err(_) => Ok(()),
        }
    }
}
