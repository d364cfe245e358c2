//! The Redis Streams transport: declarations, publishes, fetches and settlements, each one
//! Lua script (see [`super::scripts`]) on a shared, reconnecting connection.
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
use std::time::{Duration, Instant};

use ::redis::aio::ConnectionManager;
use ::redis::{RedisError, Script, Value};
use async_trait::async_trait;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::capabilities;
use super::scripts;
use crate::capability::Capabilities;
use crate::error::{Error, Result};
use crate::message::{DeadLetterInfo, Message, Received};
use crate::spec::{DeliveryPolicy, Destination, QueueDecl, Source, SubscriptionDecl, TopicDecl};
use crate::transport::stored_backoff::StoredBackoff;
use crate::transport::{ConsumerBackend, ConsumerOptions, Incoming, Settler, Transport};

const NAME: &str = "redis";
/// How often an idle fetch asks the server again while it waits. Fetching is a script
/// (moving delayed entries and claiming expired leases too), so it polls rather than
/// blocking a connection other calls share.
const POLL: Duration = Duration::from_millis(50);
/// How often a consumer does housekeeping: trimming what every subscription has acked from
/// a topic's stream, forgetting idle group consumers that hold nothing.
const MAINTAIN_EVERY: Duration = Duration::from_secs(5);
/// How long a group consumer holding nothing stays listed after its last read.
const FORGET_IDLE_CONSUMERS: Duration = Duration::from_secs(300);

static DECLARE: LazyLock<Script> =
    LazyLock::new(|| Script::new(&scripts::with_common(scripts::DECLARE)));
static DELETE: LazyLock<Script> = LazyLock::new(|| Script::new(scripts::DELETE));
static PUBLISH_QUEUE: LazyLock<Script> =
    LazyLock::new(|| Script::new(&scripts::with_messages(scripts::PUBLISH_QUEUE)));
static PUBLISH_TOPIC: LazyLock<Script> =
    LazyLock::new(|| Script::new(&scripts::with_messages(scripts::PUBLISH_TOPIC)));
static FETCH: LazyLock<Script> =
    LazyLock::new(|| Script::new(&scripts::with_common(scripts::FETCH)));
static SETTLE: LazyLock<Script> =
    LazyLock::new(|| Script::new(&scripts::with_common(scripts::SETTLE)));
static MAINTAIN: LazyLock<Script> =
    LazyLock::new(|| Script::new(&scripts::with_common(scripts::MAINTAIN)));

/// A connection to one Redis server (one database of it).
pub struct RedisStreams {
    shared: Arc<Shared>,
    capabilities: Capabilities,
}

struct Shared {
    connection: ConnectionManager,
    closed: AtomicBool,
}

impl Shared {
    fn connection(&self) -> Result<ConnectionManager> {
        if self.closed.load(AtomicOrdering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(self.connection.clone())
    }
}

impl RedisStreams {
    pub async fn connect(url: &str) -> Result<RedisStreams> {
        let client = ::redis::Client::open(url).map_err(|e| Error::BadUrl {
            url: url.to_owned(),
            problem: e.to_string(),
        })?;
        let mut connection = ConnectionManager::new(client).await.map_err(map_error)?;
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
struct Settings {
    max_deliveries: u32,
    #[serde(flatten)]
    backoff: StoredBackoff,
    dead_letter: bool,
    lease_ms: u64,
    default_ttl_ms: u64,
    max_delay_ms: u64,
    dedup_window_ms: u64,
    max_length: u64,
}

fn ms(d: Duration) -> u64 {
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
fn map_error(e: RedisError) -> Error {
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

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Okay => Some("OK".into()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

fn unexpected(what: &str, value: &Value) -> Error {
    Error::Transport {
        transport: NAME,
        message: format!("unexpected reply to {what}: {value:?}"),
        source: None,
    }
}

/// How one queue, subscription or dead-letter queue is laid out and delivered.
struct Plan {
    /// The source's own stream: where delayed entries come back and acked ones are XDELed.
    home: String,
    group: String,
    delayed: String,
    ext: String,
    fails: String,
    /// The dead-letter stream, or empty when dead letters are dropped (or this is one).
    dlq: String,
    /// A subscription's topic stream and its delayed set; empty for queues.
    topic_stream: String,
    topic_delayed: String,
    /// The name dead letters record as their origin.
    origin: String,
    settings: Settings,
    /// Dead letters cannot be dead-lettered again.
    is_dead_letters: bool,
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

    /// The stream an entry came from, by the index the fetch script gives.
    fn stream(&self, index: i64) -> &str {
        if !self.topic_stream.is_empty() && index == 1 {
            &self.topic_stream
        } else {
            &self.home
        }
    }

    fn max_deliveries(&self) -> u32 {
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
        Ok(Box::new(RedisConsumer {
            shared: self.shared.clone(),
            plan: Arc::new(plan),
            name: options.name.clone(),
            last_maintained: Instant::now(),
            closed: false,
        }))
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
            return Err(conflict(format!("it subscribes to `{have_topic}`")));
        }
        let have: Settings = serde_json::from_str(&have_spec)?;
        if have != *settings {
            return Err(conflict(format!(
                "declared as {settings:?}, it has {have:?}"
            )));
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

struct RedisConsumer {
    shared: Arc<Shared>,
    plan: Arc<Plan>,
    name: String,
    last_maintained: Instant,
    closed: bool,
}

impl RedisConsumer {
    async fn maintain(&self, closing: &str) -> Result<()> {
        let mut con = self.shared.connection()?;
        MAINTAIN
            .key(&self.plan.topic_stream)
            .key(&self.plan.home)
            .arg(&self.plan.group)
            .arg(ms(FORGET_IDLE_CONSUMERS))
            .arg(closing)
            .invoke_async::<Value>(&mut con)
            .await
            .map(drop)
            .map_err(map_error)
    }

    async fn fetch_once(&mut self, max: usize) -> Result<Vec<Incoming>> {
        let mut con = self.shared.connection()?;
        let plan = &self.plan;
        if self.last_maintained.elapsed() >= MAINTAIN_EVERY {
            self.last_maintained = Instant::now();
            self.maintain("").await?;
        }
        let reply: Value = FETCH
            .key(&plan.home)
            .key(&plan.delayed)
            .key(&plan.ext)
            .key(&plan.fails)
            .key(&plan.dlq)
            .key(&plan.topic_delayed)
            .key(&plan.topic_stream)
            .arg(&plan.group)
            .arg(&self.name)
            .arg(max)
            .arg(plan.settings.lease_ms)
            .arg(plan.max_deliveries())
            .arg(plan.settings.default_ttl_ms)
            .arg(&plan.origin)
            .invoke_async(&mut con)
            .await
            .map_err(map_error)?;
        let Value::Array(entries) = reply else {
            return Err(unexpected("fetch", &reply));
        };
        entries.iter().map(|entry| self.incoming(entry)).collect()
    }

    fn incoming(&self, entry: &Value) -> Result<Incoming> {
        let bad = || unexpected("fetch", entry);
        let Value::Array(parts) = entry else {
            return Err(bad());
        };
        let [
            Value::Int(index),
            id,
            Value::Int(count),
            Value::Array(fields),
        ] = parts.as_slice()
        else {
            return Err(bad());
        };
        let entry_id = text(id).ok_or_else(bad)?;
        let mut map: BTreeMap<String, Bytes> = BTreeMap::new();
        for pair in fields.chunks(2) {
            if let [Value::BulkString(f), Value::BulkString(v)] = pair {
                map.insert(
                    String::from_utf8_lossy(f).into_owned(),
                    Bytes::copy_from_slice(v),
                );
            }
        }
        let string = |f: &str| map.get(f).map(|v| String::from_utf8_lossy(v).into_owned());
        let int = |f: &str| string(f).and_then(|v| v.parse::<i64>().ok());
        let mut headers: BTreeMap<String, String> = match map.get("h") {
            Some(h) => serde_json::from_slice(h)?,
            None => BTreeMap::new(),
        };
        let dead_letter = string("dr").map(|reason| DeadLetterInfo {
            reason,
            deliveries: int("dn").unwrap_or(0).max(0) as u32,
            origin: string("do").unwrap_or_default(),
            last_error: string("de"),
            first_failure_ms: int("df"),
            last_failure_ms: int("dl"),
            consumer: string("dc"),
        });
        if let Some(info) = &dead_letter {
            info.write_headers(&mut headers);
            if let Some(t) = string("t") {
                headers.insert(crate::message::header::DLQ_ORIGIN_PUBLISHED_AT.into(), t);
            }
        }
        let count = (*count).max(1) as u32;
        let carried = int("a").unwrap_or(0).max(0) as u32;
        let message = Received {
            id: string("id").unwrap_or_else(|| entry_id.clone()),
            key: map.get("k").cloned(),
            headers,
            payload: map.get("p").cloned().unwrap_or_default(),
            priority: 0,
            published_at_ms: int("t").unwrap_or(0),
            attempt: carried + count,
            dead_letter,
        };
        Ok(Incoming {
            message,
            settler: Arc::new(RedisSettler {
                shared: self.shared.clone(),
                plan: self.plan.clone(),
                stream: self.plan.stream(*index).to_owned(),
                entry_id,
                consumer: self.name.clone(),
                count,
                carried,
            }),
        })
    }
}

#[async_trait]
impl ConsumerBackend for RedisConsumer {
    async fn fetch(&mut self, max: usize, wait: Duration) -> Result<Vec<Incoming>> {
        let deadline = Instant::now() + wait;
        loop {
            let got = self.fetch_once(max.max(1)).await?;
            let left = deadline.saturating_duration_since(Instant::now());
            if !got.is_empty() || left.is_zero() {
                return Ok(got);
            }
            tokio::time::sleep(left.min(POLL)).await;
        }
    }

    async fn close(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        // Forget this group consumer if it holds nothing; deliveries it handed out keep it.
        match self.maintain(&self.name).await {
            Err(Error::Closed) => Ok(()),
            other => other,
        }
    }
}

/// One delivery: the entry, the stream it is pending in, and the delivery count it had
/// when handed out — a different count later means it was delivered again.
struct RedisSettler {
    shared: Arc<Shared>,
    plan: Arc<Plan>,
    stream: String,
    entry_id: String,
    consumer: String,
    count: u32,
    carried: u32,
}

impl RedisSettler {
    async fn settle(&self, op: &str, delay: Duration, error: &str) -> Result<()> {
        let mut con = self.shared.connection()?;
        let plan = &self.plan;
        let reply: Value = SETTLE
            .key(&self.stream)
            .key(&plan.home)
            .key(&plan.ext)
            .key(&plan.fails)
            .key(&plan.dlq)
            .key(&plan.delayed)
            .arg(op)
            .arg(&plan.group)
            .arg(&self.entry_id)
            .arg(&self.consumer)
            .arg(self.count)
            .arg(self.carried)
            .arg(plan.max_deliveries())
            .arg(plan.settings.lease_ms)
            .arg(ms(delay))
            .arg(error)
            .arg(&plan.origin)
            .invoke_async(&mut con)
            .await
            .map_err(map_error)?;
        match text(&reply).as_deref() {
            Some("OK") | Some("DEAD") => Ok(()),
            Some("NOTHELD") => Err(Error::NotHeld {
                id: self.entry_id.clone(),
                why: "its lease ended and it may have gone to another consumer".into(),
            }),
            _ => Err(unexpected(op, &reply)),
        }
    }
}

#[async_trait]
impl Settler for RedisSettler {
    async fn ack(&self) -> Result<()> {
        self.settle("ack", Duration::ZERO, "").await
    }

    async fn nack(&self, delay: Option<Duration>, error: Option<&str>) -> Result<()> {
        let delay = delay.unwrap_or_else(|| {
            self.plan
                .settings
                .backoff
                .to_backoff()
                .delay(self.carried + self.count, fastrand::f64())
        });
        self.settle("nack", delay, error.unwrap_or_default()).await
    }

    async fn reject(&self, reason: &str) -> Result<()> {
        if self.plan.is_dead_letters {
            return Err(Error::invalid(
                "reject",
                "a dead letter cannot be dead-lettered again; ack or nack it",
            ));
        }
        self.settle("reject", Duration::ZERO, reason).await
    }

    async fn extend(&self, by: Duration) -> Result<()> {
        self.settle("extend", by, "").await
    }
}
