//! [`SqliteOutbox`]: the outbox in a SQLite table, beside an application that keeps its
//! data in SQLite.
//!
//! SQLite has no row locks to skip: a claim is one conditional `UPDATE ... RETURNING`,
//! which SQLite runs under its database write lock, so two relays (even in two processes
//! sharing the file) can never stamp the same row; the lease columns then keep it theirs.
//! There is no NOTIFY: relays poll every `poll_interval`.

use std::sync::Arc;

use async_trait::async_trait;
use sqlx::sqlite::SqlitePool;
use sqlx::{Row, SqliteConnection};

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
    Error::transport("sqlite", e)
}

/// An outbox table in a SQLite database.
#[derive(Debug, Clone)]
pub struct SqliteOutbox {
    pool: SqlitePool,
    table: TableName,
}

impl SqliteOutbox {
    /// The outbox in the table `ferry_outbox`.
    pub fn new(pool: SqlitePool) -> SqliteOutbox {
        SqliteOutbox {
            pool,
            table: TableName::default(),
        }
    }

    /// The outbox in `table`; `Invalid` unless it is a plain lowercase identifier.
    pub fn with_table(pool: SqlitePool, table: &str) -> Result<SqliteOutbox> {
        Ok(SqliteOutbox {
            pool,
            table: TableName::new(table)?,
        })
    }

    pub fn table(&self) -> &TableName {
        &self.table
    }

    /// Creates the table and its indexes unless they exist; safe to run at every start.
    pub async fn install(&self) -> Result<()> {
        let t = &self.table;
        let mut tx = self.pool.begin().await.map_err(db)?;
        for statement in [
            // AUTOINCREMENT: a seq is never reused, even after the newest rows are purged,
            // so per-aggregate order by seq holds across cleanups.
            format!(
                "CREATE TABLE IF NOT EXISTS {t} (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    id TEXT NOT NULL UNIQUE,
                    destination_kind TEXT NOT NULL CHECK (destination_kind IN ('queue', 'topic')),
                    destination TEXT NOT NULL,
                    aggregate_key BLOB,
                    payload BLOB NOT NULL,
                    headers TEXT NOT NULL DEFAULT '{{}}',
                    priority INTEGER NOT NULL DEFAULT 0,
                    delay_ms INTEGER,
                    ttl_ms INTEGER,
                    dedup_id TEXT,
                    created_at INTEGER NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    next_attempt_at INTEGER NOT NULL,
                    claimed_by TEXT,
                    claim_until INTEGER,
                    published_at INTEGER,
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
    /// returns the message id. Relays see it only once that transaction commits.
    pub async fn enqueue(&self, conn: &mut SqliteConnection, event: OutboxEvent) -> Result<String> {
        let row = event.into_row()?;
        let t = &self.table;
        sqlx::query(&format!(
            "INSERT INTO {t} (id, destination_kind, destination, aggregate_key, payload, headers, \
             priority, delay_ms, ttl_ms, dedup_id, created_at, next_attempt_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11)"
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
        .map_err(|e| insert_error("sqlite", &row.id, e))?;
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

    fn store(&self) -> SqliteStore {
        SqliteStore {
            pool: self.pool.clone(),
            table: self.table.clone(),
        }
    }
}

struct SqliteStore {
    pool: SqlitePool,
    table: TableName,
}

#[async_trait]
impl Store for SqliteStore {
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
        // One statement: SQLite takes the write lock before reading, so the conditions
        // and the stamp are atomic against every other writer of the file.
        let rows = sqlx::query(&format!(
            "UPDATE {t} SET claimed_by = ?1, claim_until = ?2
            WHERE seq IN (
                SELECT o.seq FROM {t} o
                WHERE o.published_at IS NULL
                  AND o.next_attempt_at <= ?3
                  AND (o.claim_until IS NULL OR o.claim_until <= ?3)
                  AND (o.aggregate_key IS NULL OR NOT EXISTS (
                      SELECT 1 FROM {t} e
                      WHERE e.aggregate_key = o.aggregate_key
                        AND e.published_at IS NULL AND e.seq < o.seq))
                ORDER BY o.seq
                LIMIT ?4)
            RETURNING {CLAIMED_COLUMNS}"
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
            "UPDATE {t} SET published_at = ?2, claimed_by = NULL, claim_until = NULL \
             WHERE id = ?1 AND published_at IS NULL"
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
            "UPDATE {t} SET attempts = ?3, next_attempt_at = ?4, last_error = ?5, \
             claimed_by = NULL, claim_until = NULL \
             WHERE id = ?2 AND claimed_by = ?1 AND published_at IS NULL"
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
             WHERE id IN (SELECT value FROM json_each(?2)) AND claimed_by = ?1 \
             AND published_at IS NULL"
        ))
        .bind(relay)
        .bind(serde_json::to_string(ids)?)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn purge_published(&self, before: i64, limit: usize) -> Result<u64> {
        let t = &self.table;
        let done = sqlx::query(&format!(
            "DELETE FROM {t} WHERE seq IN (
                SELECT seq FROM {t} WHERE published_at IS NOT NULL AND published_at < ?1
                LIMIT ?2)"
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
        Ok(None)
    }
}
