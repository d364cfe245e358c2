//! [`PostgresOutbox`]: the outbox in a PostgreSQL table.
//!
//! Claims select due rows `FOR UPDATE SKIP LOCKED` and stamp a lease in the same
//! statement, so concurrent relays neither wait on each other nor claim one row twice;
//! the lease (not a held transaction) then keeps the row theirs while they publish, so no
//! transaction stays open across a call to the broker. `enqueue` sends a NOTIFY on the
//! table's channel, delivered only if the caller's transaction commits, which wakes
//! listening relays at once.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgListener, PgPool};
use sqlx::{PgConnection, Row};

use crate::error::{Error, Result};
use crate::ferry::Ferry;

use super::backlog::Backlog;
use super::config::RelayConfig;
use super::event::OutboxEvent;
use super::hooks::RelayHooks;
use super::relay::Relay;
use super::row::{CLAIMED_COLUMNS, ClaimedRow, claimed_row, insert_error};
use super::store::{Store, Wakeups};
use super::table::TableName;

fn db(e: sqlx::Error) -> Error {
    Error::transport("postgres", e)
}

/// An outbox table in PostgreSQL (in the connection's search path).
#[derive(Debug, Clone)]
pub struct PostgresOutbox {
    pool: PgPool,
    table: TableName,
}

impl PostgresOutbox {
    /// The outbox in the table `ferry_outbox`.
    pub fn new(pool: PgPool) -> PostgresOutbox {
        PostgresOutbox {
            pool,
            table: TableName::default(),
        }
    }

    /// The outbox in `table`; `Invalid` unless it is a plain lowercase identifier.
    pub fn with_table(pool: PgPool, table: &str) -> Result<PostgresOutbox> {
        Ok(PostgresOutbox {
            pool,
            table: TableName::new(table)?,
        })
    }

    pub fn table(&self) -> &TableName {
        &self.table
    }

    /// Creates the table and its indexes unless they exist; safe to run at every start,
    /// from several processes at once (an advisory lock serialises the DDL, which
    /// PostgreSQL's `IF NOT EXISTS` alone does not make race-free).
    pub async fn install(&self) -> Result<()> {
        let t = &self.table;
        let mut tx = self.pool.begin().await.map_err(db)?;
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
            .bind(format!("ferry-outbox-install-{t}"))
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        for statement in [
            format!(
                "CREATE TABLE IF NOT EXISTS {t} (
                    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    id TEXT NOT NULL UNIQUE,
                    destination_kind TEXT NOT NULL CHECK (destination_kind IN ('queue', 'topic')),
                    destination TEXT NOT NULL,
                    aggregate_key BYTEA,
                    payload BYTEA NOT NULL,
                    headers JSONB NOT NULL DEFAULT '{{}}',
                    priority SMALLINT NOT NULL DEFAULT 0,
                    delay_ms BIGINT,
                    ttl_ms BIGINT,
                    dedup_id TEXT,
                    created_at BIGINT NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    next_attempt_at BIGINT NOT NULL,
                    claimed_by TEXT,
                    claim_until BIGINT,
                    published_at BIGINT,
                    last_error TEXT
                )"
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
                .map_err(db)?;
        }
        tx.commit().await.map_err(db)
    }

    /// Adds `event` to the outbox inside the caller's transaction (pass `&mut tx`);
    /// returns the message id. Relays see it only once that transaction commits, and are
    /// woken then.
    pub async fn enqueue(&self, conn: &mut PgConnection, event: OutboxEvent) -> Result<String> {
        let row = event.into_row()?;
        let t = &self.table;
        sqlx::query(&format!(
            "INSERT INTO {t} (id, destination_kind, destination, aggregate_key, payload, headers, \
             priority, delay_ms, ttl_ms, dedup_id, created_at, next_attempt_at) \
             VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10, $11, $11)"
        ))
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
        .map_err(|e| insert_error("postgres", &row.id, e))?;
        // Delivered at commit, dropped on rollback, and folded into one per transaction.
        sqlx::query("SELECT pg_notify($1, '')")
            .bind(t.as_str())
            .execute(&mut *conn)
            .await
            .map_err(db)?;
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

    fn store(&self) -> PgStore {
        PgStore {
            pool: self.pool.clone(),
            table: self.table.clone(),
        }
    }
}

struct PgStore {
    pool: PgPool,
    table: TableName,
}

#[async_trait]
impl Store for PgStore {
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
        let rows = sqlx::query(&format!(
            "WITH due AS (
                SELECT o.seq FROM {t} o
                WHERE o.published_at IS NULL
                  AND o.next_attempt_at <= $3
                  AND (o.claim_until IS NULL OR o.claim_until <= $3)
                  AND (o.aggregate_key IS NULL OR NOT EXISTS (
                      SELECT 1 FROM {t} e
                      WHERE e.aggregate_key = o.aggregate_key
                        AND e.published_at IS NULL AND e.seq < o.seq))
                ORDER BY o.seq
                LIMIT $4
                FOR UPDATE SKIP LOCKED
            )
            UPDATE {t} SET claimed_by = $1, claim_until = $2
            FROM due WHERE {t}.seq = due.seq
            RETURNING {columns}",
            columns = CLAIMED_COLUMNS
                .split(", ")
                .map(|c| if c == "headers" {
                    format!("{t}.headers::text AS headers")
                } else {
                    format!("{t}.{c}")
                })
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .bind(relay)
        .bind(until)
        .bind(now)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        let mut claimed = rows
            .iter()
            .map(|r| claimed_row!(r))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(db)?;
        // RETURNING promises no order.
        claimed.sort_by_key(|r| r.seq);
        Ok(claimed)
    }

    async fn mark_published(&self, id: &str, at: i64) -> Result<()> {
        let t = &self.table;
        sqlx::query(&format!(
            "UPDATE {t} SET published_at = $2, claimed_by = NULL, claim_until = NULL \
             WHERE id = $1 AND published_at IS NULL"
        ))
        .bind(id)
        .bind(at)
        .execute(&self.pool)
        .await
        .map_err(db)?;
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
        sqlx::query(&format!(
            "UPDATE {t} SET attempts = $3, next_attempt_at = $4, last_error = $5, \
             claimed_by = NULL, claim_until = NULL \
             WHERE id = $2 AND claimed_by = $1 AND published_at IS NULL"
        ))
        .bind(relay)
        .bind(id)
        .bind(attempts)
        .bind(next_attempt_at)
        .bind(error)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn release(&self, relay: &str, ids: &[String]) -> Result<()> {
        let t = &self.table;
        sqlx::query(&format!(
            "UPDATE {t} SET claimed_by = NULL, claim_until = NULL \
             WHERE id = ANY($2) AND claimed_by = $1 AND published_at IS NULL"
        ))
        .bind(relay)
        .bind(ids)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn purge_published(&self, before: i64, limit: usize) -> Result<u64> {
        let t = &self.table;
        let done = sqlx::query(&format!(
            "DELETE FROM {t} WHERE seq IN (
                SELECT seq FROM {t} WHERE published_at IS NOT NULL AND published_at < $1
                LIMIT $2)"
        ))
        .bind(before)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(done.rows_affected())
    }

    async fn backlog(&self, now: i64) -> Result<Backlog> {
        let t = &self.table;
        let row = sqlx::query(&format!(
            "SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM {t} WHERE published_at IS NULL"
        ))
        .fetch_one(&self.pool)
        .await
        .map_err(db)?;
        let n: i64 = row.try_get("n").map_err(db)?;
        let oldest: Option<i64> = row.try_get("oldest").map_err(db)?;
        Ok(Backlog::from_oldest(n.max(0) as u64, oldest, now))
    }

    async fn wakeups(&self) -> Result<Option<Box<dyn Wakeups>>> {
        let mut listener = PgListener::connect_with(&self.pool).await.map_err(db)?;
        listener.listen(self.table.as_str()).await.map_err(db)?;
        Ok(Some(Box::new(PgWakeups { listener })))
    }
}

/// LISTEN on the table's channel. Holds one connection of the pool for the relay's life.
struct PgWakeups {
    listener: PgListener,
}

#[async_trait]
impl Wakeups for PgWakeups {
    async fn wait(&mut self, max: Duration) {
        // `timeout` and `sleep` saturate a huge `max` (a poll interval meant as "only on
        // NOTIFY"); `Instant + max` would panic.
        let started = tokio::time::Instant::now();
        if let Ok(Err(e)) = tokio::time::timeout(max, self.listener.recv()).await {
            // The listener reconnects on its next call; until then this is a poll.
            tracing::warn!(error = %e, "outbox LISTEN connection failed");
            tokio::time::sleep(max.saturating_sub(started.elapsed())).await;
        }
    }
}
