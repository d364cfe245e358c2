//! The Redis Streams transport: declarations, publishes, fetches and settlements, each one
//! Lua script (see [`super::scripts`]) on a shared, reconnecting connection. A consumer's
//! settlements that arrive together go in one script call (see
//! [`crate::transport::group_commit`]), whose acks are one XACK; an idle fetch waits in a
//! blocking XREADGROUP on a connection of the consumer's own.
//!
//! An ack is XACK then XDEL of the entry from the source's own stream, so a queue's XLEN
//! counts exactly what still waits (what the length limit counts) and acked messages take
//! no memory; a topic's stream is shared, so it is trimmed instead, below what every
//! subscription has acked.
//!
//! Durability is Redis's own: a publish returns once the server has executed it, and
//! survives a restart as far as the server's persistence (AOF/RDB) is configured to keep
//! it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use ::redis::AsyncConnectionConfig;
use ::redis::aio::{ConnectionManager, MultiplexedConnection};
use ::redis::{RedisError, Script, Value};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::capabilities;
use super::consume::RedisConsumer;
use super::scripts;
use crate::capability::Capabilities;
use crate::declared::{self, Declared};
use crate::error::{Error, Result};
use crate::message::Message;
use crate::spec::{DeliveryPolicy, Destination, QueueDecl, Source, SubscriptionDecl, TopicDecl};
use crate::transport::stored_backoff::StoredBackoff;
use crate::transport::{ConsumerBackend, ConsumerOptions, Transport};

pub(super) const NAME: &str = "redis";

static DECLARE: LazyLock<Script> =
    LazyLock::new(|| Script::new(&scripts::with_common(scripts::DECLARE)));
static DELETE: LazyLock<Script> = LazyLock::new(|| Script::new(scripts::DELETE));
static PUBLISH_QUEUE: LazyLock<Script> =
    LazyLock::new(|| Script::new(&scripts::with_messages(scripts::PUBLISH_QUEUE)));
static PUBLISH_TOPIC: LazyLock<Script> =
    LazyLock::new(|| Script::new(&scripts::with_messages(scripts::PUBLISH_TOPIC)));
pub(super) static FETCH: LazyLock<Script> =
    LazyLock::new(|| Script::new(&scripts::with_common(scripts::FETCH)));
pub(super) static ADMIT: LazyLock<Script> =
    LazyLock::new(|| Script::new(&scripts::with_common(scripts::ADMIT)));
pub(super) static SETTLE: LazyLock<Script> =
    LazyLock::new(|| Script::new(&scripts::with_common(scripts::SETTLE)));
pub(super) static MAINTAIN: LazyLock<Script> =
    LazyLock::new(|| Script::new(&scripts::with_common(scripts::MAINTAIN)));

/// A connection to one Redis server (one database of it).
pub struct RedisStreams {
    shared: Arc<Shared>,
    capabilities: Capabilities,
}

pub(super) struct Shared {
    /// For the connections consumers block on.
    client: ::redis::Client,
    connection: ConnectionManager,
    closed: AtomicBool,
}

impl Shared {
    pub(super) fn connection(&self) -> Result<ConnectionManager> {
        if self.closed.load(AtomicOrdering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(self.connection.clone())
    }

    /// A connection of its own for a consumer to block on.
    pub(super) async fn blocking_connection(&self) -> Result<MultiplexedConnection> {
        if self.closed.load(AtomicOrdering::Acquire) {
            return Err(Error::Closed);
        }
        // No response timeout of the client's own: a BLOCK outlasts its default, and the
        // consumer bounds each read itself.
        let config = AsyncConnectionConfig::new().set_response_timeout(None);
        self.client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(map_error)
    }
}

impl RedisStreams {
    pub async fn connect(url: &str) -> Result<RedisStreams> {
        let client = ::redis::Client::open(url).map_err(|e| Error::BadUrl {
            url: url.to_owned(),
            problem: e.to_string(),
        })?;
        let mut connection = ConnectionManager::new(client.clone())
            .await
            .map_err(map_error)?;
        // Publishes and acks are as durable as the server's persistence makes them; say so
        // when it keeps no append-only file. (Servers that hide CONFIG are taken as set up.)
        let appendonly: std::result::Result<Vec<String>, _> = ::redis::cmd("CONFIG")
            .arg("GET")
            .arg("appendonly")
            .query_async(&mut connection)
            .await;
        if let Ok(reply) = appendonly
            && reply.get(1).is_some_and(|v| v == "no")
        {
            tracing::warn!(
                url,
                "Redis keeps no append-only file: what a publish stored is lost if the server \
                 stops before its next snapshot"
            );
        }
        Ok(RedisStreams {
            shared: Arc::new(Shared {
                client,
                connection,
                closed: AtomicBool::new(false),
            }),
            capabilities: capabilities(),
        })
    }
}

/// A queue's or subscription's settings as stored with it, to refuse a second declaration
/// that differs and to give consumers the policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Settings {
    pub(super) max_deliveries: u32,
    #[serde(flatten)]
    pub(super) backoff: StoredBackoff,
    dead_letter: bool,
    pub(super) lease_ms: u64,
    pub(super) default_ttl_ms: u64,
    max_delay_ms: u64,
    dedup_window_ms: u64,
    max_length: u64,
}

pub(super) fn ms(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

impl Settings {
    fn new(delivery: &DeliveryPolicy) -> Settings {
        Settings {
            max_deliveries: delivery.max_deliveries,
            backoff: StoredBackoff::new(&delivery.backoff),
            dead_letter: delivery.dead_letter,
            // Claiming compares idle times in whole milliseconds; a lease is at least one.
            lease_ms: ms(delivery.lease).max(1),
            default_ttl_ms: delivery.default_ttl.map(ms).unwrap_or(0),
            max_delay_ms: ms(delivery.max_delay),
            dedup_window_ms: 0,
            max_length: 0,
        }
    }

    /// In the SDK's words, for a refused redeclaration: the fields this transport keeps.
    fn declared(&self) -> Declared {
        let b = self.backoff.to_backoff();
        let ms = Duration::from_millis;
        let nonzero = |v: u64| (v > 0).then_some(v);
        Declared::default()
            .max_deliveries(self.max_deliveries)
            .backoff(b.base, b.cap, b.multiplier, b.jitter)
            .dead_letter(self.dead_letter)
            .lease(ms(self.lease_ms))
            .default_ttl(nonzero(self.default_ttl_ms).map(ms))
            .max_delay(ms(self.max_delay_ms))
            .dedup_window(nonzero(self.dedup_window_ms).map(ms))
            .max_length(nonzero(self.max_length))
    }
}

fn meta_key(name: &str) -> String {
    format!("ferry:src:{name}")
}
fn queue_key(name: &str) -> String {
    format!("ferry:q:{name}")
}
fn topic_key(name: &str) -> String {
    format!("ferry:t:{name}")
}

/// Engine errors as the SDK's: the scripts' own codes first, then connection trouble.
pub(super) fn map_error(e: RedisError) -> Error {
    let detail = e.detail().unwrap_or_default().to_owned();
    match e.code() {
        Some("NOTFOUND") => {
            let (kind, name) = detail.split_once(' ').unwrap_or(("queue", &detail));
            Error::NotFound {
                kind: if kind == "topic" { "topic" } else { "queue" },
                name: name.to_owned(),
            }
        }
        // A consumer group gone under a consumer: its source was deleted.
        Some("NOGROUP") => Error::NotFound {
            kind: "queue",
            name: detail,
        },
        Some("INVALID") => Error::invalid("publish", detail),
        // No AUTH where the server requires one, a wrong user or password, an ACL user
        // without the permission: the server's own words, with its code.
        Some(code @ ("NOAUTH" | "WRONGPASS")) => Error::unauthorized(format!("{code} {detail}")),
        Some("NOPERM") => Error::forbidden(format!("NOPERM {detail}")),
        // The client's own reading of a refused AUTH at connect.
        _ if e.kind() == ::redis::ErrorKind::AuthenticationFailed => {
            Error::unauthorized(e.to_string())
        }
        Some("FULL") => Error::Full { message: detail },
        Some("CONFLICT") => {
            let (kind, rest) = detail.split_once(' ').unwrap_or(("topic", &detail));
            let (name, problem) = rest.split_once(' ').unwrap_or((rest, ""));
            Error::Conflict {
                kind: if kind == "topic" { "topic" } else { "queue" },
                name: name.to_owned(),
                problem: format!("it {problem}; delete its subscriptions first"),
            }
        }
        _ => Error::transport(NAME, e),
    }
}

pub(super) fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Okay => Some("OK".into()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

pub(super) fn unexpected(what: &str, value: &Value) -> Error {
    Error::Transport {
        transport: NAME,
        message: format!("unexpected reply to {what}: {value:?}"),
        source: None,
    }
}

/// How one queue, subscription or dead-letter queue is laid out and delivered.
pub(super) struct Plan {
    /// The source's own stream: where delayed entries come back and acked ones are XDELed.
    pub(super) home: String,
    pub(super) group: String,
    pub(super) delayed: String,
    pub(super) ext: String,
    pub(super) fails: String,
    /// The dead-letter stream, or empty when dead letters are dropped (or this is one).
    pub(super) dlq: String,
    /// A subscription's topic stream and its delayed set; empty for queues.
    pub(super) topic_stream: String,
    pub(super) topic_delayed: String,
    /// The name dead letters record as their origin.
    pub(super) origin: String,
    pub(super) settings: Settings,
    /// Dead letters cannot be dead-lettered again.
    pub(super) is_dead_letters: bool,
}

impl Plan {
    /// How to consume queue or subscription `name`'s own stream through consumer group
    /// `group`; `topic` is a subscription's.
    fn own(name: &str, group: String, topic: Option<&str>, settings: Settings) -> Plan {
        let base = queue_key(name);
        let (topic_stream, topic_delayed) = match topic {
            Some(topic) => (topic_key(topic), format!("{}:delayed", topic_key(topic))),
            None => (String::new(), String::new()),
        };
        Plan {
            group,
            delayed: format!("{base}:delayed"),
            ext: format!("{base}:ext"),
            fails: format!("{base}:fails"),
            dlq: if settings.dead_letter {
                format!("{base}.dlq")
            } else {
                String::new()
            },
            home: base,
            topic_stream,
            topic_delayed,
            origin: name.to_owned(),
            settings,
            is_dead_letters: false,
        }
    }

    /// Whether an entry came from the topic's stream, by the index the scripts give (the
    /// topic's stream is the first of a subscription's two).
    pub(super) fn is_topic_stream(&self, index: i64) -> bool {
        !self.topic_stream.is_empty() && index == 1
    }

    pub(super) fn max_deliveries(&self) -> u32 {
        if self.is_dead_letters {
            0
        } else {
            self.settings.max_deliveries
        }
    }
}

#[async_trait]
impl Transport for RedisStreams {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    async fn declare_queue(&self, decl: &QueueDecl) -> Result<()> {
        let mut settings = Settings::new(&decl.delivery);
        settings.dedup_window_ms = decl.dedup_window.map(ms).unwrap_or(0);
        settings.max_length = decl.max_length.unwrap_or(0);
        self.declare("queue", &decl.name, "", &settings).await
    }

    async fn declare_topic(&self, decl: &TopicDecl) -> Result<()> {
        if decl.partitions != 1 {
            return Err(Error::invalid(
                "partitions",
                "a Redis Streams topic is one stream; declare 1 partition",
            ));
        }
        let mut con = self.shared.connection()?;
        ::redis::cmd("HSETNX")
            .arg(format!("{}:meta", topic_key(&decl.name)))
            .arg("partitions")
            .arg(1)
            .query_async::<()>(&mut con)
            .await
            .map_err(map_error)
    }

    async fn declare_subscription(&self, decl: &SubscriptionDecl) -> Result<()> {
        let settings = Settings::new(&decl.delivery);
        self.declare("subscription", &decl.name, &decl.topic, &settings)
            .await
    }

    async fn delete(&self, source: &Source) -> Result<()> {
        let what = match source {
            Source::DeadLetters(_) => "dead-letters",
            _ => "source",
        };
        self.delete_named(what, source.name()).await
    }

    async fn delete_topic(&self, name: &str) -> Result<()> {
        self.delete_named("topic", name).await
    }

    async fn publish(&self, destination: &Destination, batch: Vec<Message>) -> Result<()> {
        let mut con = self.shared.connection()?;
        let mut invocation = match destination {
            Destination::Queue(name) => {
                let base = queue_key(name);
                let mut i = PUBLISH_QUEUE.prepare_invoke();
                i.key(meta_key(name))
                    .key(&base)
                    .key(format!("{base}:delayed"))
                    .key(format!("{base}:dedup"));
                i
            }
            Destination::Topic(name) => {
                let base = topic_key(name);
                let mut i = PUBLISH_TOPIC.prepare_invoke();
                i.key(format!("{base}:meta"))
                    .key(&base)
                    .key(format!("{base}:delayed"))
                    .key(format!("{base}:subs"));
                i
            }
        };
        invocation.arg(batch.len());
        for message in &batch {
            let headers = serde_json::to_string(&message.headers)?;
            invocation
                .arg(message.id.as_deref().unwrap_or_default())
                .arg(if message.key.is_some() { "1" } else { "0" })
                .arg(message.key.as_deref().unwrap_or_default())
                .arg(headers)
                .arg(message.payload.as_ref())
                .arg(message.delay.map(ms).unwrap_or(0))
                .arg(message.ttl.map(ms).unwrap_or(0))
                .arg(message.dedup_id.as_deref().unwrap_or_default());
        }
        invocation
            .invoke_async::<Value>(&mut con)
            .await
            .map(drop)
            .map_err(map_error)
    }

    async fn dedup_window(&self, queue: &str) -> Result<Option<Duration>> {
        let mut con = self.shared.connection()?;
        let meta: BTreeMap<String, String> = ::redis::cmd("HGETALL")
            .arg(meta_key(queue))
            .query_async(&mut con)
            .await
            .map_err(map_error)?;
        let spec = meta
            .get("spec")
            .filter(|_| meta.get("kind").map(String::as_str) == Some("queue"))
            .ok_or_else(|| Error::NotFound {
                kind: "queue",
                name: queue.to_owned(),
            })?;
        let settings: Settings = serde_json::from_str(spec)?;
        let window = settings.dedup_window_ms;
        Ok((window > 0).then(|| Duration::from_millis(window)))
    }

    async fn open_consumer(
        &self,
        source: &Source,
        options: &ConsumerOptions,
    ) -> Result<Box<dyn ConsumerBackend>> {
        let mut con = self.shared.connection()?;
        let name = source.name();
        let meta: BTreeMap<String, String> = ::redis::cmd("HGETALL")
            .arg(meta_key(name))
            .query_async(&mut con)
            .await
            .map_err(map_error)?;
        let not_found = || Error::NotFound {
            kind: "queue",
            name: name.to_owned(),
        };
        let kind = meta.get("kind").ok_or_else(not_found)?;
        let settings: Settings = serde_json::from_str(meta.get("spec").ok_or_else(not_found)?)?;
        let base = queue_key(name);
        let plan = match source {
            Source::Queue(_) if kind == "queue" => Plan::own(name, "ferry".into(), None, settings),
            Source::Subscription { topic, .. }
                if kind == "subscription" && meta.get("topic") == Some(topic) =>
            {
                Plan::own(name, name.to_owned(), Some(topic), settings)
            }
            Source::DeadLetters(_) => {
                let dlq = format!("{base}.dlq");
                Plan {
                    home: dlq.clone(),
                    group: "ferry".into(),
                    delayed: format!("{dlq}:delayed"),
                    ext: format!("{dlq}:ext"),
                    fails: format!("{dlq}:fails"),
                    dlq: String::new(),
                    topic_stream: String::new(),
                    topic_delayed: String::new(),
                    origin: format!("{name}.dlq"),
                    settings: Settings {
                        default_ttl_ms: 0,
                        ..settings
                    },
                    is_dead_letters: true,
                }
            }
            _ => return Err(not_found()),
        };
        Ok(Box::new(RedisConsumer::new(
            self.shared.clone(),
            plan,
            &options.name,
        )))
    }

    async fn close(&self) -> Result<()> {
        self.shared.closed.store(true, AtomicOrdering::Release);
        Ok(())
    }
}

impl RedisStreams {
    async fn declare(
        &self,
        kind: &'static str,
        name: &str,
        topic: &str,
        settings: &Settings,
    ) -> Result<()> {
        let mut con = self.shared.connection()?;
        let spec = serde_json::to_string(settings)?;
        let base = queue_key(name);
        let group = if kind == "queue" { "ferry" } else { name };
        let reply: Value = DECLARE
            .key(meta_key(name))
            .key(&base)
            .key(format!("{base}.dlq"))
            .key(format!("{}:meta", topic_key(topic)))
            .key(topic_key(topic))
            .key(format!("{}:subs", topic_key(topic)))
            .arg(kind)
            .arg(&spec)
            .arg(settings.max_delay_ms)
            .arg(settings.dedup_window_ms)
            .arg(settings.max_length)
            .arg(group)
            .arg(topic)
            .arg(name)
            .invoke_async(&mut con)
            .await
            .map_err(map_error)?;
        let Value::Array(existing) = &reply else {
            return Ok(());
        };
        let field = |i: usize| existing.get(i).and_then(text).unwrap_or_default();
        let (have_kind, have_spec, have_topic) = (field(0), field(1), field(2));
        let conflict = |problem: String| Error::Conflict {
            kind,
            name: name.to_owned(),
            problem,
        };
        if have_kind != kind {
            return Err(conflict(format!("it is a {have_kind}")));
        }
        if have_topic != topic {
            return Err(declared::other_topic(name, topic, &have_topic));
        }
        let have: Settings = serde_json::from_str(&have_spec)?;
        if have != *settings {
            return Err(settings.declared().conflict(&have.declared(), kind, name));
        }
        Ok(())
    }

    async fn delete_named(&self, what: &str, name: &str) -> Result<()> {
        let mut con = self.shared.connection()?;
        DELETE
            .arg(what)
            .arg(name)
            .invoke_async::<Value>(&mut con)
            .await
            .map(drop)
            .map_err(map_error)
    }
}
