//! [`SqlOutbox`]: the outbox table and its statements, once for every database; an
//! [`OutboxDialect`] supplies what the database spells its own way.
//!
//! A claim stamps a lease (`claimed_by`, `claim_until`) on due rows in one statement that
//! no other claimer can interleave with (the dialect says how: row locks skipped on
//! PostgreSQL, the single writer on SQLite); the lease, not a held transaction, then keeps
//! the row the relay's while it publishes, so no transaction stays open across a call to
//! the broker.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::{ColumnIndex, Decode, Encode, Executor, IntoArguments, Pool, Row, Type};

use crate::error::{Error, Result};
use crate::ferry::Ferry;

use super::backlog::Backlog;
use super::config::RelayConfig;
use super::dialect::OutboxDialect;
use super::event::OutboxEvent;
use super::hooks::RelayHooks;
use super::relay::Relay;
use super::row::{ClaimedRow, claimed_row, insert_error};
use super::store::{Store, Wakeups};
use super::table::TableName;

fn db<D: OutboxDialect>(e: sqlx::Error) -> Error {
    Error::transport(D::ENGINE, e)
}

/// An outbox table in the database of `D` (`PostgresOutbox`, `SqliteOutbox`).
pub struct SqlOutbox<D: OutboxDialect> {
    pool: Pool<D>,
    table: TableName,
}

impl<D: OutboxDialect> Clone for SqlOutbox<D> {
    fn clone(&self) -> Self {
        SqlOutbox {
            pool: self.pool.clone(),
            table: self.table.clone(),
        }
    }
}

impl<D: OutboxDialect> fmt::Debug for SqlOutbox<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqlOutbox")
            .field("engine", &D::ENGINE)
            .field("pool", &self.pool)
            .field("table", &self.table)
            .finish()
    }
}

impl<D> SqlOutbox<D>
where
    D: OutboxDialect,
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> D::Arguments<'q>: IntoArguments<'q, D>,
    for<'q> &'q str: Encode<'q, D> + Type<D>,
    for<'q> String: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'q> Vec<u8>: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'q> i16: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'q> i32: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'q> i64: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'q> Option<String>: Encode<'q, D>,
    for<'q> Option<Vec<u8>>: Encode<'q, D>,
    for<'q> Option<i64>: Encode<'q, D>,
    for<'a> &'a str: ColumnIndex<D::Row>,
{
    /// The outbox in the table `ferry_outbox`.
    pub fn new(pool: Pool<D>) -> SqlOutbox<D> {
        SqlOutbox {
            pool,
            table: TableName::default(),
        }
    }

    /// The outbox in `table`; `Invalid` unless it is a plain lowercase identifier.
    pub fn with_table(pool: Pool<D>, table: &str) -> Result<SqlOutbox<D>> {
        Ok(SqlOutbox {
            pool,
            table: TableName::new(table)?,
        })
    }

    pub fn table(&self) -> &TableName {
        &self.table
    }

    /// Creates the table and its indexes unless they exist; safe to run at every start,
    /// from several processes at once (where the database's `IF NOT EXISTS` alone is not
    /// race-free, as on PostgreSQL, a lock serialises the DDL).
    pub async fn install(&self) -> Result<()> {
        let t = &self.table;
        let mut tx = self.pool.begin().await.map_err(db::<D>)?;
        if let Some(lock) = D::INSTALL_LOCK {
            sqlx::query(&D::statement(lock))
                .bind(format!("ferry-outbox-install-{t}"))
                .execute(&mut *tx)
                .await
                .map_err(db::<D>)?;
        }
        for statement in [
            format!(
                "CREATE TABLE IF NOT EXISTS {t} (
                    seq {seq},
                    id TEXT NOT NULL UNIQUE,
                    destination_kind TEXT NOT NULL CHECK (destination_kind IN ('queue', 'topic')),
                    destination TEXT NOT NULL,
                    aggregate_key {bytes},
                    payload {bytes} NOT NULL,
                    headers {json} NOT NULL DEFAULT '{{}}',
                    priority {smallint} NOT NULL DEFAULT 0,
                    delay_ms {bigint},
                    ttl_ms {bigint},
                    dedup_id TEXT,
                    created_at {bigint} NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    next_attempt_at {bigint} NOT NULL,
                    claimed_by TEXT,
                    claim_until {bigint},
                    published_at {bigint},
                    last_error TEXT
                )",
                seq = D::SEQ_COLUMN,
                bytes = D::BYTES,
                json = D::JSON,
                smallint = D::SMALLINT,
                bigint = D::BIGINT,
            ),
            format!("CREATE INDEX IF NOT EXISTS {t}_due ON {t} (seq) WHERE published_at IS NULL"),
            format!(
                "CREATE INDEX IF NOT EXISTS {t}_aggregate ON {t} (aggregate_key, seq) \
                 WHERE published_at IS NULL"
            ),
            format!(
                "CREATE INDEX IF NOT EXISTS {t}_published ON {t} (published_at) \
                 WHERE published_at IS NOT NULL"
            ),
        ] {
            sqlx::query(&statement)
                .execute(&mut *tx)
                .await
                .map_err(db::<D>)?;
        }
        tx.commit().await.map_err(db::<D>)
    }

    /// Adds `event` to the outbox inside the caller's transaction (pass `&mut tx`);
    /// returns the message id. Relays see it only once that transaction commits, and are
    /// woken then where the database can signal commits.
    pub async fn enqueue(&self, conn: &mut D::Connection, event: OutboxEvent) -> Result<String> {
        let row = event.into_row()?;
        let t = &self.table;
        let insert = format!(
            "INSERT INTO {t} (id, destination_kind, destination, aggregate_key, payload, headers, \
             priority, delay_ms, ttl_ms, dedup_id, created_at, next_attempt_at) \
             VALUES ($1, $2, $3, $4, $5, {headers}, $7, $8, $9, $10, $11, $11)",
            headers = D::HEADERS_PARAM,
        );
        sqlx::query(&D::statement(&insert))
            .bind(&row.id)
            .bind(row.destination_kind)
            .bind(&row.destination)
            .bind(&row.aggregate_key)
            .bind(&row.payload)
            .bind(&row.headers)
            .bind(row.priority)
            .bind(row.delay_ms)
            .bind(row.ttl_ms)
            .bind(&row.dedup_id)
            .bind(row.created_at)
            .execute(&mut *conn)
            .await
            .map_err(|e| insert_error(D::ENGINE, &row.id, e))?;
        if let Some(notify) = D::NOTIFY {
            // Delivered at commit, dropped on rollback, and folded into one per transaction.
            sqlx::query(&D::statement(notify))
                .bind(t.as_str())
                .execute(&mut *conn)
                .await
                .map_err(db::<D>)?;
        }
        Ok(row.id)
    }

    /// Unpublished rows and the age of the oldest.
    pub async fn backlog(&self) -> Result<Backlog> {
        self.store().backlog(crate::message::now_ms()).await
    }

    /// A relay publishing this table's rows through `ferry`.
    pub fn relay(&self, ferry: &Ferry, config: RelayConfig) -> Result<Relay> {
        Relay::new(Arc::new(self.store()), ferry, config, None)
    }

    /// A relay with fault hooks at its crash windows (for crash tests).
    pub fn relay_with_hooks(
        &self,
        ferry: &Ferry,
        config: RelayConfig,
        hooks: Arc<dyn RelayHooks>,
    ) -> Result<Relay> {
        Relay::new(Arc::new(self.store()), ferry, config, Some(hooks))
    }

    fn store(&self) -> SqlStore<D> {
        SqlStore {
            pool: self.pool.clone(),
            table: self.table.clone(),
        }
    }
}

/// The relay's side of the table.
struct SqlStore<D: OutboxDialect> {
    pool: Pool<D>,
    table: TableName,
}

#[async_trait]
impl<D> Store for SqlStore<D>
where
    D: OutboxDialect,
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> D::Arguments<'q>: IntoArguments<'q, D>,
    for<'q> &'q str: Encode<'q, D> + Type<D>,
    for<'q> String: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'q> Vec<u8>: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'q> i16: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'q> i32: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'q> i64: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'q> Option<String>: Encode<'q, D>,
    for<'q> Option<Vec<u8>>: Encode<'q, D>,
    for<'q> Option<i64>: Encode<'q, D>,
    for<'a> &'a str: ColumnIndex<D::Row>,
{
    fn table(&self) -> &TableName {
        &self.table
    }

    async fn claim(
        &self,
        relay: &str,
        now: i64,
        until: i64,
        limit: usize,
    ) -> Result<Vec<ClaimedRow>> {
        let t = &self.table;
        // The NOT EXISTS sees rows claimed by other relays and rows waiting on a backoff:
        // while either is unpublished, later rows of its aggregate stay put.
        let due = format!(
            "SELECT o.seq FROM {t} o
                WHERE o.published_at IS NULL
                  AND o.next_attempt_at <= $3
                  AND (o.claim_until IS NULL OR o.claim_until <= $3)
                  AND (o.aggregate_key IS NULL OR NOT EXISTS (
                      SELECT 1 FROM {t} e
                      WHERE e.aggregate_key = o.aggregate_key
                        AND e.published_at IS NULL AND e.seq < o.seq))
                ORDER BY o.seq
                LIMIT $4"
        );
        let rows = sqlx::query(&D::statement(&D::claim_statement(t, &due)))
            .bind(relay)
            .bind(until)
            .bind(now)
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await
            .map_err(db::<D>)?;
        let mut claimed = rows
            .iter()
            .map(|r| claimed_row!(r))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(db::<D>)?;
        // RETURNING promises no order.
        claimed.sort_by_key(|r| r.seq);
        Ok(claimed)
    }

    async fn mark_published(&self, id: &str, at: i64) -> Result<()> {
        let t = &self.table;
        sqlx::query(&D::statement(&format!(
            "UPDATE {t} SET published_at = $2, claimed_by = NULL, claim_until = NULL \
             WHERE id = $1 AND published_at IS NULL"
        )))
        .bind(id)
        .bind(at)
        .execute(&self.pool)
        .await
        .map_err(db::<D>)?;
        Ok(())
    }

    async fn mark_failed(
        &self,
        relay: &str,
        id: &str,
        attempts: i32,
        next_attempt_at: i64,
        error: &str,
    ) -> Result<()> {
        let t = &self.table;
        sqlx::query(&D::statement(&format!(
            "UPDATE {t} SET attempts = $3, next_attempt_at = $4, last_error = $5, \
             claimed_by = NULL, claim_until = NULL \
             WHERE id = $2 AND claimed_by = $1 AND published_at IS NULL"
        )))
        .bind(relay)
        .bind(id)
        .bind(attempts)
        .bind(next_attempt_at)
        .bind(error)
        .execute(&self.pool)
        .await
        .map_err(db::<D>)?;
        Ok(())
    }

    async fn release(&self, relay: &str, ids: &[String]) -> Result<()> {
        let t = &self.table;
        let sql = D::statement(&format!(
            "UPDATE {t} SET claimed_by = NULL, claim_until = NULL \
             WHERE {ids} AND claimed_by = $1 AND published_at IS NULL",
            ids = D::ID_IN_LIST,
        ))
        .into_owned();
        D::bind_ids(sqlx::query(&sql).bind(relay), ids)?
            .execute(&self.pool)
            .await
            .map_err(db::<D>)?;
        Ok(())
    }

    async fn purge_published(&self, before: i64, limit: usize) -> Result<u64> {
        let t = &self.table;
        let done = sqlx::query(&D::statement(&format!(
            "DELETE FROM {t} WHERE seq IN (
                SELECT seq FROM {t} WHERE published_at IS NOT NULL AND published_at < $1
                LIMIT $2)"
        )))
        .bind(before)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .execute(&self.pool)
        .await
        .map_err(db::<D>)?;
        Ok(D::rows_affected(&done))
    }

    async fn backlog(&self, now: i64) -> Result<Backlog> {
        let t = &self.table;
        let row = sqlx::query(&format!(
            "SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM {t} WHERE published_at IS NULL"
        ))
        .fetch_one(&self.pool)
        .await
        .map_err(db::<D>)?;
        let n: i64 = row.try_get("n").map_err(db::<D>)?;
        let oldest: Option<i64> = row.try_get("oldest").map_err(db::<D>)?;
        Ok(Backlog::from_oldest(n.max(0) as u64, oldest, now))
    }

    async fn wakeups(&self) -> Result<Option<Box<dyn Wakeups>>> {
        let listener = D::listen(&self.pool, &self.table).await?;
        Ok(listener.map(|listener| {
            Box::new(DialectWakeups::<D> {
                listener,
                dialect: PhantomData,
            }) as Box<dyn Wakeups>
        }))
    }
}

/// A dialect's listener as the relay's source of wake-ups.
struct DialectWakeups<D: OutboxDialect> {
    listener: D::Listener,
    dialect: PhantomData<fn() -> D>,
}

#[async_trait]
impl<D: OutboxDialect> Wakeups for DialectWakeups<D> {
    async fn wait(&mut self, max: Duration) {
        D::wait(&mut self.listener, max).await
    }
}
