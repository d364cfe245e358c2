//! The inbox as a SQLite table, written in the handler's own transaction.

use std::fmt::Display;
use std::future::Future;

use sqlx::{Sqlite, SqlitePool, Transaction};

use super::sql::{Processed, Recorded, settle_once, validate_table};
use super::window::DedupWindow;
use crate::consumer::Delivery;
use crate::error::{Error, Result};
use crate::message::{Received, now_ms};

const TRANSPORT: &str = "sqlite inbox";
/// Rows deleted per statement by [`SqliteInbox::cleanup`]: SQLite has one writer, so a
/// long delete would stall every handler's transaction.
const CLEANUP_BATCH: i64 = 5_000;

/// A processed-messages table (`key TEXT PRIMARY KEY, processed_at INTEGER` — ms since the
/// Unix epoch) in a SQLite database beside the application.
///
/// SQLite runs one write transaction at a time: the insert takes the write lock, so a
/// concurrent duplicate waits (up to the pool's busy timeout, 5 s by default in sqlx)
/// until the first transaction ends, then finds the key if it committed.
#[derive(Debug, Clone)]
pub struct SqliteInbox {
    table: String,
    window: DedupWindow,
}

impl SqliteInbox {
    /// An inbox in `table` (lowercase letters, digits and `_`), keeping records for the
    /// default [`DedupWindow`] (24 h) until [`cleanup`](Self::cleanup).
    pub fn new(table: &str) -> Result<SqliteInbox> {
        validate_table(table, false)?;
        Ok(SqliteInbox {
            table: table.to_owned(),
            window: DedupWindow::default(),
        })
    }

    /// How long [`cleanup`](Self::cleanup) keeps records.
    pub fn with_window(mut self, window: DedupWindow) -> Self {
        self.window = window;
        self
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    pub fn window(&self) -> DedupWindow {
        self.window
    }

    /// Creates the table and its `processed_at` index if absent; idempotent.
    pub async fn install(&self, pool: &SqlitePool) -> Result<()> {
        let mut tx = pool.begin().await.map_err(db)?;
        sqlx::query(&format!(
            "CREATE TABLE IF NOT EXISTS {} (
                key TEXT PRIMARY KEY NOT NULL,
                processed_at INTEGER NOT NULL
            )",
            self.table
        ))
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        sqlx::query(&format!(
            "CREATE INDEX IF NOT EXISTS {t}_processed_at ON {t} (processed_at)",
            t = self.table
        ))
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)
    }

    /// Records `key` (a message id or a business key) in `tx`. `First`: do the effects in
    /// `tx` and commit; `Duplicate`: skip them. The record exists only if `tx` commits.
    pub async fn record(&self, tx: &mut Transaction<'_, Sqlite>, key: &str) -> Result<Recorded> {
        let inserted = sqlx::query(&format!(
            "INSERT INTO {} (key, processed_at) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING",
            self.table
        ))
        .bind(key)
        .bind(now_ms())
        .execute(&mut **tx)
        .await
        .map_err(db)?
        .rows_affected();
        Ok(if inserted == 1 {
            Recorded::First
        } else {
            Recorded::Duplicate
        })
    }

    /// Processes `delivery` at most once, keyed by its message id: see
    /// [`process_keyed`](Self::process_keyed).
    pub async fn process<T, E, F, Fut>(
        &self,
        pool: &SqlitePool,
        delivery: Delivery,
        handler: F,
    ) -> Result<Processed<T, E>>
    where
        E: Display,
        F: FnOnce(Transaction<'static, Sqlite>, Received) -> Fut,
        Fut: Future<Output = Result<(Transaction<'static, Sqlite>, T), E>>,
    {
        let key = delivery.id.clone();
        self.process_keyed(pool, delivery, &key, handler).await
    }

    /// Begins a transaction, records `key`, runs `handler` in it if the key is new,
    /// commits, and settles `delivery`: acked when done or a duplicate, nacked with the
    /// handler's error when it failed (nothing committed).
    pub async fn process_keyed<T, E, F, Fut>(
        &self,
        pool: &SqlitePool,
        delivery: Delivery,
        key: &str,
        handler: F,
    ) -> Result<Processed<T, E>>
    where
        E: Display,
        F: FnOnce(Transaction<'static, Sqlite>, Received) -> Fut,
        Fut: Future<Output = Result<(Transaction<'static, Sqlite>, T), E>>,
    {
        let mut tx = pool.begin().await.map_err(db)?;
        let recorded = self.record(&mut tx, key).await?;
        settle_once(TRANSPORT, tx, recorded, delivery, handler).await
    }

    /// Whether `key` is recorded (committed).
    pub async fn contains(&self, pool: &SqlitePool, key: &str) -> Result<bool> {
        sqlx::query_scalar::<_, bool>(&format!(
            "SELECT EXISTS (SELECT 1 FROM {} WHERE key = ?1)",
            self.table
        ))
        .bind(key)
        .fetch_one(pool)
        .await
        .map_err(db)
    }

    /// Deletes records older than the window, in batches; returns how many.
    pub async fn cleanup(&self, pool: &SqlitePool) -> Result<u64> {
        let window_ms = i64::try_from(self.window.duration().as_millis()).unwrap_or(i64::MAX);
        let cutoff = now_ms().saturating_sub(window_ms);
        let sql = format!(
            "DELETE FROM {t} WHERE key IN (
                SELECT key FROM {t} WHERE processed_at < ?1 LIMIT ?2
            )",
            t = self.table
        );
        let mut total = 0;
        loop {
            let deleted = sqlx::query(&sql)
                .bind(cutoff)
                .bind(CLEANUP_BATCH)
                .execute(pool)
                .await
                .map_err(db)?
                .rows_affected();
            total += deleted;
            if deleted < CLEANUP_BATCH as u64 {
                return Ok(total);
            }
        }
    }
}

fn db(e: sqlx::Error) -> Error {
    Error::transport(TRANSPORT, e)
}
