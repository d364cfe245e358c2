//! The PostgreSQL transport: connecting (schema and migrations), declarations, deletes and
//! publishes. Consuming and settling are in `consume.rs`.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};
use sqlx::{Connection, PgConnection, Postgres as Pg, Row, Transaction};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::capabilities;
use super::consume::{PgConsumer, SourceInfo};
use super::settings::Settings;
use crate::capability::Capabilities;
use crate::error::{Error, Result};
use crate::message::Message;
use crate::spec::{Destination, QueueDecl, Source, SubscriptionDecl, TopicDecl};
use crate::transport::{ConsumerBackend, ConsumerOptions, Transport};

pub(super) const NAME: &str = "postgres";
/// The NOTIFY channel; the payload is the queue that got messages.
pub(super) const CHANNEL: &str = "ferry_messages";

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// A pool of connections to one database, and a listener that wakes waiting consumers.
pub struct Postgres {
    shared: Arc<Shared>,
    capabilities: Capabilities,
    listener: Mutex<Option<JoinHandle<()>>>,
}

pub(super) struct Shared {
    pub pool: PgPool,
    /// Per queue, what a NOTIFY for it wakes.
    wakers: Mutex<HashMap<String, Weak<Notify>>>,
}

impl Shared {
    /// What wakes consumers of `queue` when something is published to it.
    pub fn waker(&self, queue: &str) -> Arc<Notify> {
        let mut wakers = self.wakers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(notify) = wakers.get(queue).and_then(Weak::upgrade) {
            return notify;
        }
        wakers.retain(|_, w| w.strong_count() > 0);
        let notify = Arc::new(Notify::new());
        wakers.insert(queue.to_owned(), Arc::downgrade(&notify));
        notify
    }

    fn wake(&self, queue: &str) {
        let notify = self
            .wakers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(queue)
            .and_then(Weak::upgrade);
        if let Some(notify) = notify {
            notify.notify_waiters();
        }
    }
}

impl Postgres {
    /// Connects to `url`, creates the `ferry` schema if need be and runs the migrations.
    pub async fn connect(url: &str) -> Result<Postgres> {
        let options = PgConnectOptions::from_str(url).map_err(|e| Error::BadUrl {
            url: url.to_owned(),
            problem: e.to_string(),
        })?;
        // One plain connection first, so an unreachable server fails at once with its
        // cause rather than after the pool's acquire timeout.
        let mut setup = PgConnection::connect_with(&options)
            .await
            .map_err(map_error)?;
        create_schema(&mut setup).await?;
        setup.close().await.map_err(map_error)?;
        // Every connection resolves unqualified names, the migrator's own table included,
        // in the `ferry` schema, away from whatever else the database holds; and commits
        // wait for the WAL flush whatever the server's default, so a publish, an ack or a
        // lease (with its attempt count) that returned survives a crash of the server.
        let options = options.options([("search_path", "ferry"), ("synchronous_commit", "on")]);
        let pool = PgPoolOptions::new()
            .max_connections(10)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await
            .map_err(map_error)?;
        MIGRATOR.run(&pool).await.map_err(|e| Error::Transport {
            transport: NAME,
            message: format!("migrating the ferry schema: {e}"),
            source: Some(Box::new(e)),
        })?;
        // Dedup ids of queues nobody publishes to any more are not cleared by publishes.
        sqlx::query("DELETE FROM ferry.dedup WHERE expires_at <= now()")
            .execute(&pool)
            .await
            .map_err(map_error)?;
        let shared = Arc::new(Shared {
            pool,
            wakers: Mutex::new(HashMap::new()),
        });
        let listener = tokio::spawn(listen(Arc::downgrade(&shared)));
        Ok(Postgres {
            shared,
            capabilities: capabilities(),
            listener: Mutex::new(Some(listener)),
        })
    }
}

impl Postgres {
    /// Stops the notification listener; idempotent.
    fn stop_listener(&self) {
        if let Some(task) = self
            .listener
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            task.abort();
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop_listener();
    }
}

/// `CREATE SCHEMA IF NOT EXISTS` is not safe against itself run concurrently; the
/// advisory lock makes concurrent connects take turns.
async fn create_schema(connection: &mut PgConnection) -> Result<()> {
    let mut tx = connection.begin().await.map_err(map_error)?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('ferry schema'))")
        .execute(&mut *tx)
        .await
        .map_err(map_error)?;
    sqlx::query("CREATE SCHEMA IF NOT EXISTS ferry")
        .execute(&mut *tx)
        .await
        .map_err(map_error)?;
    tx.commit().await.map_err(map_error)
}

/// Wakes consumers as publishes commit. A notification missed while the listener
/// reconnects only delays: consumers poll as well.
async fn listen(shared: Weak<Shared>) {
    loop {
        let Some(pool) = shared.upgrade().map(|s| s.pool.clone()) else {
            return;
        };
        if pool.is_closed() {
            return;
        }
        let mut listener = match PgListener::connect_with(&pool).await {
            Ok(listener) => listener,
            Err(_) => {
                drop(pool);
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        drop(pool);
        if listener.listen(CHANNEL).await.is_err() {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        loop {
            match listener.try_recv().await {
                Ok(Some(notification)) => match shared.upgrade() {
                    Some(shared) => shared.wake(notification.payload()),
                    None => return,
                },
                // The connection dropped; wake everyone, as a notification may be lost.
                Ok(None) => {
                    let Some(shared) = shared.upgrade() else {
                        return;
                    };
                    let queues: Vec<String> = shared
                        .wakers
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .keys()
                        .cloned()
                        .collect();
                    for queue in queues {
                        shared.wake(&queue);
                    }
                }
                Err(_) => break,
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The engine's error as the SDK's.
pub(super) fn map_error(e: sqlx::Error) -> Error {
    match &e {
        sqlx::Error::PoolClosed => Error::Closed,
        sqlx::Error::PoolTimedOut => Error::Timeout(Duration::from_secs(10)),
        sqlx::Error::Database(db) => match db.code().as_deref() {
            // invalid_password, invalid_authorization_specification (a role that does not
            // exist, no pg_hba entry): the credentials are refused.
            Some("28P01" | "28000") => Error::unauthorized(db.message().to_owned()),
            // insufficient_privilege: the role may not do this.
            Some("42501") => Error::forbidden(db.message().to_owned()),
            // Data exceptions and integrity violations: the input was refused.
            Some(code) if code.starts_with("22") || code.starts_with("23") => {
                Error::invalid("request", db.message().to_owned())
            }
            _ => Error::transport(NAME, e),
        },
        _ => Error::transport(NAME, e),
    }
}

fn not_found(kind: &'static str, name: &str) -> Error {
    Error::NotFound {
        kind,
        name: name.to_owned(),
    }
}

/// The dead-letter queue of `name`: rows of the messages table under this queue name, which
/// no declared name can take (`.dlq` names are refused).
pub(super) fn dlq_of(name: &str) -> String {
    format!("{name}.dlq")
}

/// The kind and name of the queue or subscription a live source reads.
fn kind_and_name(source: &Source) -> (&'static str, &str) {
    match source {
        Source::Subscription { name, .. } => ("subscription", name),
        other => ("queue", other.name()),
    }
}

/// A declared queue or subscription: its kind, topic and settings.
pub(super) struct Declared {
    pub kind: String,
    pub topic: Option<String>,
    pub settings: Settings,
}

/// Fails with `NotFound` unless `topic` exists, its row held under `lock` (`FOR SHARE`,
/// `FOR KEY SHARE`) until the transaction ends.
async fn lock_topic(connection: &mut PgConnection, topic: &str, lock: &str) -> Result<()> {
    let exists = sqlx::query(&format!(
        "SELECT 1 FROM ferry.topics WHERE name = $1 {lock}"
    ))
    .bind(topic)
    .fetch_optional(connection)
    .await
    .map_err(map_error)?;
    if exists.is_none() {
        return Err(not_found("topic", topic));
    }
    Ok(())
}

pub(super) async fn declared(
    executor: impl sqlx::PgExecutor<'_>,
    name: &str,
    lock: &str,
) -> Result<Option<Declared>> {
    let row = sqlx::query(&format!(
        "SELECT kind, topic, settings::text AS settings FROM ferry.queues WHERE name = $1 {lock}"
    ))
    .bind(name)
    .fetch_optional(executor)
    .await
    .map_err(map_error)?;
    row.map(|row| {
        Ok(Declared {
            kind: row.get("kind"),
            topic: row.get("topic"),
            settings: Settings::from_json(row.get("settings"))?,
        })
    })
    .transpose()
}

async fn declare(
    pool: &PgPool,
    kind: &'static str,
    name: &str,
    topic: Option<&str>,
    settings: &Settings,
) -> Result<()> {
    let mut tx = pool.begin().await.map_err(map_error)?;
    if let Some(topic) = topic {
        // Holds the topic until the subscription is in; its deletion waits for us.
        lock_topic(&mut tx, topic, "FOR KEY SHARE").await?;
    }
    let inserted = sqlx::query(
        "INSERT INTO ferry.queues (name, kind, topic, settings) VALUES ($1, $2, $3, $4::jsonb) \
         ON CONFLICT (name) DO NOTHING",
    )
    .bind(name)
    .bind(kind)
    .bind(topic)
    .bind(settings.to_json())
    .execute(&mut *tx)
    .await
    .map_err(map_error)?
    .rows_affected();
    if inserted == 0 {
        let have = declared(&mut *tx, name, "")
            .await?
            .ok_or_else(|| broken("a declaration vanished while it was read"))?;
        let conflict = |problem: String| Error::Conflict {
            kind,
            name: name.to_owned(),
            problem,
        };
        if have.kind != kind {
            return Err(conflict(format!("it is a {}", have.kind)));
        }
        if have.topic.as_deref() != topic {
            return Err(crate::declared::other_topic(
                name,
                topic.unwrap_or_default(),
                &have.topic.unwrap_or_default(),
            ));
        }
        if !have.settings.same_as(settings) {
            return Err(settings
                .declared()
                .conflict(&have.settings.declared(), kind, name));
        }
    }
    tx.commit().await.map_err(map_error)
}

fn broken(message: &str) -> Error {
    Error::Transport {
        transport: NAME,
        message: message.to_owned(),
        source: None,
    }
}

#[async_trait]
impl Transport for Postgres {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    async fn declare_queue(&self, decl: &QueueDecl) -> Result<()> {
        declare(
            &self.shared.pool,
            "queue",
            &decl.name,
            None,
            &Settings::of_queue(decl),
        )
        .await
    }

    async fn declare_topic(&self, decl: &TopicDecl) -> Result<()> {
        if decl.partitions != 1 {
            return Err(Error::unsupported(
                NAME,
                "topic partitions",
                "a PostgreSQL topic is one table of copies; declare 1 partition",
            ));
        }
        let pool = &self.shared.pool;
        sqlx::query(
            "INSERT INTO ferry.topics (name, partitions) VALUES ($1, $2) \
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(&decl.name)
        .bind(decl.partitions as i32)
        .execute(pool)
        .await
        .map_err(map_error)?;
        Ok(())
    }

    async fn declare_subscription(&self, decl: &SubscriptionDecl) -> Result<()> {
        declare(
            &self.shared.pool,
            "subscription",
            &decl.name,
            Some(&decl.topic),
            &Settings::of_delivery(&decl.delivery),
        )
        .await
    }

    async fn delete(&self, source: &Source) -> Result<()> {
        let mut tx = self.shared.pool.begin().await.map_err(map_error)?;
        let (kind, name, topic) = match source {
            Source::Queue(name) => ("queue", name, None),
            Source::Subscription { topic, name } => ("subscription", name, Some(topic)),
            Source::DeadLetters(origin) => {
                // The dead letters alone: the origin stays.
                let (kind, name) = kind_and_name(origin);
                let origin_exists = declared(&mut *tx, name, "FOR SHARE")
                    .await?
                    .is_some_and(|d| d.kind == kind);
                if !origin_exists {
                    return Err(not_found(kind, name));
                }
                sqlx::query("DELETE FROM ferry.messages WHERE queue = $1")
                    .bind(dlq_of(name))
                    .execute(&mut *tx)
                    .await
                    .map_err(map_error)?;
                return tx.commit().await.map_err(map_error);
            }
        };
        let deleted = sqlx::query(
            "DELETE FROM ferry.queues WHERE name = $1 AND kind = $2 \
             AND topic IS NOT DISTINCT FROM $3",
        )
        .bind(name)
        .bind(kind)
        .bind(topic)
        .execute(&mut *tx)
        .await
        .map_err(map_error)?
        .rows_affected();
        if deleted == 0 {
            return Err(not_found(kind, name));
        }
        sqlx::query("DELETE FROM ferry.messages WHERE queue = $1 OR queue = $2")
            .bind(name)
            .bind(dlq_of(name))
            .execute(&mut *tx)
            .await
            .map_err(map_error)?;
        sqlx::query("DELETE FROM ferry.dedup WHERE queue = $1")
            .bind(name)
            .execute(&mut *tx)
            .await
            .map_err(map_error)?;
        tx.commit().await.map_err(map_error)
    }

    async fn delete_topic(&self, name: &str) -> Result<()> {
        let deleted = sqlx::query("DELETE FROM ferry.topics WHERE name = $1")
            .bind(name)
            .execute(&self.shared.pool)
            .await
            .map_err(|e| match &e {
                sqlx::Error::Database(db) if db.code().as_deref() == Some("23503") => {
                    Error::Conflict {
                        kind: "topic",
                        name: name.to_owned(),
                        problem: "it still has subscriptions; delete them first".into(),
                    }
                }
                _ => map_error(e),
            })?
            .rows_affected();
        if deleted == 0 {
            return Err(not_found("topic", name));
        }
        Ok(())
    }

    async fn publish(&self, destination: &Destination, batch: Vec<Message>) -> Result<()> {
        let mut tx = self.shared.pool.begin().await.map_err(map_error)?;
        match destination {
            Destination::Queue(name) => {
                let queue = declared(&mut *tx, name, "FOR SHARE")
                    .await?
                    .filter(|d| d.kind == "queue")
                    .ok_or_else(|| not_found("queue", name))?;
                for message in &batch {
                    queue.settings.check_priority(name, message)?;
                }
                insert(&mut tx, name, &queue.settings, &batch).await?;
            }
            Destination::Topic(topic) => {
                lock_topic(&mut tx, topic, "FOR SHARE").await?;
                let subscriptions = sqlx::query(
                    "SELECT name, settings::text AS settings FROM ferry.queues \
                     WHERE topic = $1 ORDER BY name FOR SHARE",
                )
                .bind(topic)
                .fetch_all(&mut *tx)
                .await
                .map_err(map_error)?;
                for row in subscriptions {
                    let settings = Settings::from_json(row.get("settings"))?;
                    let name: String = row.get("name");
                    insert(&mut tx, &name, &settings, &batch).await?;
                }
            }
        }
        // Durable when this returns: the commit waits for the WAL flush.
        tx.commit().await.map_err(map_error)
    }

    async fn dedup_window(&self, queue: &str) -> Result<Option<Duration>> {
        let have = declared(&self.shared.pool, queue, "")
            .await?
            .filter(|d| d.kind == "queue")
            .ok_or_else(|| not_found("queue", queue))?;
        Ok(have.settings.dedup_window())
    }

    async fn open_consumer(
        &self,
        source: &Source,
        options: &ConsumerOptions,
    ) -> Result<Box<dyn ConsumerBackend>> {
        let (live, dead) = match source {
            Source::DeadLetters(origin) => (&**origin, true),
            live => (live, false),
        };
        let (kind, name) = kind_and_name(live);
        let topic = match live {
            Source::Subscription { topic, .. } => Some(topic.as_str()),
            _ => None,
        };
        let have = declared(&self.shared.pool, name, "")
            .await?
            .filter(|d| d.kind == kind && d.topic.as_deref() == topic)
            .ok_or_else(|| not_found(kind, name))?;
        let info = if dead {
            SourceInfo {
                queue: dlq_of(name),
                origin: name.to_owned(),
                settings: have.settings.for_dead_letters(),
                dead_letters: true,
            }
        } else {
            SourceInfo {
                queue: name.to_owned(),
                origin: name.to_owned(),
                settings: have.settings,
                dead_letters: false,
            }
        };
        Ok(Box::new(PgConsumer::new(
            self.shared.clone(),
            info,
            &options.name,
        )))
    }

    async fn close(&self) -> Result<()> {
        self.stop_listener();
        self.shared.pool.close().await;
        Ok(())
    }
}

/// Inserts `batch` into `queue` within the publish transaction, applying the queue's
/// settings: delays up to its max delay, its default TTL, priorities clamped to its levels,
/// its dedup window and its length limit.
async fn insert(
    tx: &mut Transaction<'static, Pg>,
    queue: &str,
    settings: &Settings,
    batch: &[Message],
) -> Result<()> {
    let mut kept: Vec<&Message> = Vec::with_capacity(batch.len());
    for message in batch {
        if let Some(delay) = message.delay
            && delay > settings.max_delay()
        {
            return Err(Error::invalid(
                format!("delay of message {}", message.id.as_deref().unwrap_or("")),
                format!(
                    "{delay:?} is beyond the {:?} that `{queue}` accepts",
                    settings.max_delay()
                ),
            ));
        }
    }
    match settings.dedup_window() {
        Some(window) => {
            sqlx::query("DELETE FROM ferry.dedup WHERE queue = $1 AND expires_at <= now()")
                .bind(queue)
                .execute(&mut **tx)
                .await
                .map_err(map_error)?;
            for message in batch {
                let dedup_id = message
                    .dedup_id
                    .as_deref()
                    .or(message.id.as_deref())
                    .unwrap_or_default();
                // A live row for the id means a duplicate; an expired one is taken over.
                let fresh = sqlx::query(
                    "INSERT INTO ferry.dedup (queue, dedup_id, expires_at) \
                     VALUES ($1, $2, now() + $3 * interval '1 microsecond') \
                     ON CONFLICT (queue, dedup_id) DO UPDATE SET expires_at = EXCLUDED.expires_at \
                     WHERE ferry.dedup.expires_at <= now()",
                )
                .bind(queue)
                .bind(dedup_id)
                .bind(micros(window))
                .execute(&mut **tx)
                .await
                .map_err(map_error)?
                .rows_affected();
                if fresh == 1 {
                    kept.push(message);
                }
            }
        }
        None => {
            if let Some(m) = batch.iter().find(|m| m.dedup_id.is_some()) {
                return Err(Error::invalid(
                    format!("dedup id of message {}", m.id.as_deref().unwrap_or("")),
                    format!("`{queue}` was declared without a dedup window"),
                ));
            }
            kept.extend(batch);
        }
    }
    if kept.is_empty() {
        return Ok(());
    }
    if let Some(max) = settings.max_length {
        // Publishers to a bounded queue take turns, so two cannot both fit in the last slot.
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('ferry length ' || $1, 0))")
            .bind(queue)
            .execute(&mut **tx)
            .await
            .map_err(map_error)?;
        let count: i64 = sqlx::query_scalar("SELECT count(*) FROM ferry.messages WHERE queue = $1")
            .bind(queue)
            .fetch_one(&mut **tx)
            .await
            .map_err(map_error)?;
        if count as u64 + kept.len() as u64 > max {
            return Err(Error::Full {
                message: format!(
                    "`{queue}` holds {count} of at most {max} messages; {} more do not fit",
                    kept.len()
                ),
            });
        }
    }
    let mut ids = Vec::with_capacity(kept.len());
    let mut keys = Vec::with_capacity(kept.len());
    let mut headers = Vec::with_capacity(kept.len());
    let mut payloads = Vec::with_capacity(kept.len());
    let mut priorities = Vec::with_capacity(kept.len());
    let mut delays = Vec::with_capacity(kept.len());
    let mut ttls = Vec::with_capacity(kept.len());
    for m in kept {
        ids.push(m.id.clone().unwrap_or_else(crate::message::new_id));
        keys.push(m.key.as_deref());
        headers.push(serde_json::to_string(&m.headers)?);
        payloads.push(&m.payload[..]);
        priorities.push(settings.priority(m.priority));
        delays.push(m.delay.map(micros).unwrap_or(0));
        ttls.push(m.ttl.or(settings.default_ttl()).map(micros));
    }
    sqlx::query(
        "INSERT INTO ferry.messages \
           (queue, id, key, headers, payload, priority, published_at, visible_at, expires_at) \
         SELECT $1, m.id, m.key, m.headers::jsonb, m.payload, m.priority, now(), \
                now() + m.delay * interval '1 microsecond', \
                now() + m.ttl * interval '1 microsecond' \
         FROM unnest($2::text[], $3::bytea[], $4::text[], $5::bytea[], $6::int2[], \
                     $7::int8[], $8::int8[]) \
              WITH ORDINALITY AS m(id, key, headers, payload, priority, delay, ttl, ord) \
         ORDER BY m.ord",
    )
    .bind(queue)
    .bind(ids)
    .bind(keys)
    .bind(headers)
    .bind(payloads)
    .bind(priorities)
    .bind(delays)
    .bind(ttls)
    .execute(&mut **tx)
    .await
    .map_err(map_error)?;
    // Delivered at commit, so a consumer woken by it sees the rows.
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(CHANNEL)
        .bind(queue)
        .execute(&mut **tx)
        .await
        .map_err(map_error)?;
    Ok(())
}

pub(super) fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}
