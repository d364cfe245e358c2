//! The inbox as a PostgreSQL table, written in the handler's own transaction.

use std::fmt::Display;
use std::future::Future;

use sqlx::{PgPool, Postgres, Transaction};

use super::sql::{Processed, Recorded, settle_once, validate_table};
use super::window::DedupWindow;
use crate::consumer::Delivery;
use crate::error::{Error, Result};
use crate::message::Received;

const TRANSPORT: &str = "postgres inbox";
/// Rows deleted per statement by [`PostgresInbox::cleanup`], so no delete holds its locks
/// (or bloats one transaction) for long.
const CLEANUP_BATCH: i64 = 10_000;

/// A processed-messages table (`key TEXT PRIMARY KEY, processed_at TIMESTAMPTZ`) in the
/// application's database.
///
/// The insert runs in the caller's transaction: a concurrent duplicate inserting the same
/// key waits on the unique index until the first transaction ends, then finds the row
/// (`Duplicate`) if it committed, or inserts it (`First`) if it rolled back — so two
/// consumers never both commit an effect for one key.
#[derive(Debug, Clone)]
pub struct PostgresInbox {
    table: String,
    window: DedupWindow,
}

impl PostgresInbox {
    /// An inbox in `table` (`name` or `schema.name`, lowercase), keeping records for the default
    /// [`DedupWindow`] (24 h) until [`cleanup`](Self::cleanup).
    pub fn new(table: &str) -> Result<PostgresInbox> {
        validate_table(table, true)?;
        Ok(PostgresInbox {
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

    /// Creates the table and its `processed_at` index if absent; safe to run from every
    /// process at start-up (an advisory lock keeps concurrent installs from colliding).
    pub async fn install(&self, pool: &PgPool) -> Result<()> {
        let mut tx = pool.begin().await.map_err(db)?;
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
            .bind(format!("ferry inbox {}", self.table))
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        sqlx::query(&format!(
            "CREATE TABLE IF NOT EXISTS {} (
                key TEXT PRIMARY KEY,
                processed_at TIMESTAMPTZ NOT NULL DEFAULT now()
            )",
            self.table
        ))
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        sqlx::query(&format!(
            "CREATE INDEX IF NOT EXISTS {}_processed_at ON {} (processed_at)",
            bare_table(&self.table),
            self.table
        ))
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)
    }

    /// Records `key` (a message id, or a business key such as `order-7:OrderPlaced`) in
    /// `tx`. `First`: do the effects in `tx` and commit; `Duplicate`: skip them. The record
    /// exists only if `tx` commits, so a handler that fails and rolls back leaves the
    /// message to be processed by its redelivery.
    pub async fn record(&self, tx: &mut Transaction<'_, Postgres>, key: &str) -> Result<Recorded> {
        let inserted = sqlx::query(&format!(
            "INSERT INTO {} (key) VALUES ($1) ON CONFLICT (key) DO NOTHING",
            self.table
        ))
        .bind(key)
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
        pool: &PgPool,
        delivery: Delivery,
        handler: F,
    ) -> Result<Processed<T, E>>
    where
        E: Display,
        F: FnOnce(Transaction<'static, Postgres>, Received) -> Fut,
        Fut: Future<Output = Result<(Transaction<'static, Postgres>, T), E>>,
    {
        let key = delivery.id.clone();
        self.process_keyed(pool, delivery, &key, handler).await
    }

    /// Begins a transaction, records `key`, runs `handler` in the transaction if the key is
    /// new, commits, and settles `delivery`: acked when done or a duplicate, nacked with
    /// the handler's error when it failed (nothing committed). An `Err` is the database's
    /// or the broker's; the delivery is then nacked or left to its lease.
    pub async fn process_keyed<T, E, F, Fut>(
        &self,
        pool: &PgPool,
        delivery: Delivery,
        key: &str,
        handler: F,
    ) -> Result<Processed<T, E>>
    where
        E: Display,
        F: FnOnce(Transaction<'static, Postgres>, Received) -> Fut,
        Fut: Future<Output = Result<(Transaction<'static, Postgres>, T), E>>,
    {
        let mut tx = pool.begin().await.map_err(db)?;
        let recorded = self.record(&mut tx, key).await?;
        settle_once(TRANSPORT, tx, recorded, delivery, handler).await
    }

    /// Whether `key` is recorded (committed).
    pub async fn contains(&self, pool: &PgPool, key: &str) -> Result<bool> {
        sqlx::query_scalar::<_, bool>(&format!(
            "SELECT EXISTS (SELECT 1 FROM {} WHERE key = $1)",
            self.table
        ))
        .bind(key)
        .fetch_one(pool)
        .await
        .map_err(db)
    }

    /// Deletes records older than the window, in batches; returns how many. Run it
    /// periodically (hourly is plenty): the table grows by one row per message until then.
    pub async fn cleanup(&self, pool: &PgPool) -> Result<u64> {
        let window = self.window.duration().as_secs_f64();
        let sql = format!(
            "DELETE FROM {t} WHERE key IN (
                SELECT key FROM {t}
                WHERE processed_at < now() - make_interval(secs => $1)
                LIMIT $2
            )",
            t = self.table
        );
        let mut total = 0;
        loop {
            let deleted = sqlx::query(&sql)
                .bind(window)
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

/// The table part of a possibly schema-qualified name, to name its index after.
fn bare_table(table: &str) -> &str {
    table.rsplit('.').next().unwrap_or(table)
}

fn db(e: sqlx::Error) -> Error {
    Error::transport(TRANSPORT, e)
}
