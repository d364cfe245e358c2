//! [`SqlInbox`]: the processed-messages table in the application's own database, once for
//! every database (an [`InboxDialect`] supplies what each spells its own way), with the
//! outcome types and the record-then-handle-then-commit-then-ack sequence.

use std::fmt::{self, Display};
use std::future::Future;
use std::marker::PhantomData;

use sqlx::{
    ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, Transaction, Type,
};

use super::dialect::InboxDialect;
use super::window::DedupWindow;
use crate::consumer::Delivery;
use crate::error::{Error, Result};
use crate::message::{Received, now_ms};

/// A processed-messages table (`key`, `processed_at`) in the application's database
/// (`PostgresInbox`, `SqliteInbox`).
///
/// The record is inserted in the caller's transaction, so it commits with the handler's
/// effects or not at all; a concurrent duplicate inserting the same key waits for the
/// first transaction to end, then finds its record if it committed.
pub struct SqlInbox<D: InboxDialect> {
    table: String,
    window: DedupWindow,
    dialect: PhantomData<fn() -> D>,
}

impl<D: InboxDialect> Clone for SqlInbox<D> {
    fn clone(&self) -> Self {
        SqlInbox {
            table: self.table.clone(),
            window: self.window,
            dialect: PhantomData,
        }
    }
}

impl<D: InboxDialect> fmt::Debug for SqlInbox<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqlInbox")
            .field("engine", &D::ENGINE)
            .field("table", &self.table)
            .field("window", &self.window)
            .finish()
    }
}

impl<D> SqlInbox<D>
where
    D: InboxDialect,
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> D::Arguments<'q>: IntoArguments<'q, D>,
    for<'q> &'q str: Encode<'q, D> + Type<D>,
    for<'q> String: Encode<'q, D> + Type<D>,
    for<'q> i64: Encode<'q, D> + Type<D>,
    for<'q> bool: Decode<'q, D> + Type<D>,
    usize: ColumnIndex<D::Row>,
{
    /// An inbox in `table` (lowercase letters, digits and `_`; `schema.name` where the
    /// database has schemas), keeping records for the default [`DedupWindow`] (24 h) until
    /// [`cleanup`](Self::cleanup).
    pub fn new(table: &str) -> Result<SqlInbox<D>> {
        validate_table(table, D::SCHEMA_QUALIFIED)?;
        Ok(SqlInbox {
            table: table.to_owned(),
            window: DedupWindow::default(),
            dialect: PhantomData,
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
    /// process at start-up (where needed, a lock keeps concurrent installs from colliding).
    pub async fn install(&self, pool: &Pool<D>) -> Result<()> {
        let db = db::<D>;
        let mut tx = pool.begin().await.map_err(db)?;
        if let Some(lock) = D::INSTALL_LOCK {
            sqlx::query(&D::statement(lock))
                .bind(format!("ferry inbox {}", self.table))
                .execute(&mut *tx)
                .await
                .map_err(db)?;
        }
        sqlx::query(&format!(
            "CREATE TABLE IF NOT EXISTS {} (
                key {},
                processed_at {}
            )",
            self.table,
            D::KEY_COLUMN,
            D::PROCESSED_AT_COLUMN,
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
    pub async fn record(&self, tx: &mut Transaction<'_, D>, key: &str) -> Result<Recorded> {
        let sql = D::statement(&D::record_statement(&self.table)).into_owned();
        let done = D::bind_stamp(sqlx::query(&sql).bind(key))
            .execute(&mut **tx)
            .await
            .map_err(db::<D>)?;
        Ok(if D::rows_affected(&done) == 1 {
            Recorded::First
        } else {
            Recorded::Duplicate
        })
    }

    /// Processes `delivery` at most once, keyed by its message id: see
    /// [`process_keyed`](Self::process_keyed).
    pub async fn process<T, E, F, Fut>(
        &self,
        pool: &Pool<D>,
        delivery: Delivery,
        handler: F,
    ) -> Result<Processed<T, E>>
    where
        E: Display,
        F: FnOnce(Transaction<'static, D>, Received) -> Fut,
        Fut: Future<Output = Result<(Transaction<'static, D>, T), E>>,
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
        pool: &Pool<D>,
        delivery: Delivery,
        key: &str,
        handler: F,
    ) -> Result<Processed<T, E>>
    where
        E: Display,
        F: FnOnce(Transaction<'static, D>, Received) -> Fut,
        Fut: Future<Output = Result<(Transaction<'static, D>, T), E>>,
    {
        let mut tx = pool.begin().await.map_err(db::<D>)?;
        let recorded = self.record(&mut tx, key).await?;
        settle_once(D::TRANSPORT, tx, recorded, delivery, handler).await
    }

    /// Whether `key` is recorded (committed).
    pub async fn contains(&self, pool: &Pool<D>, key: &str) -> Result<bool> {
        let sql = format!(
            "SELECT EXISTS (SELECT 1 FROM {} WHERE key = $1)",
            self.table
        );
        sqlx::query_scalar::<_, bool>(&D::statement(&sql))
            .bind(key)
            .fetch_one(pool)
            .await
            .map_err(db::<D>)
    }

    /// Deletes records older than the window, in batches; returns how many. Run it
    /// periodically (hourly is plenty): the table grows by one row per message until then.
    pub async fn cleanup(&self, pool: &Pool<D>) -> Result<u64> {
        let sql = D::statement(&format!(
            "DELETE FROM {t} WHERE key IN (
                SELECT key FROM {t} WHERE {expired} LIMIT $2
            )",
            t = self.table,
            expired = D::EXPIRED,
        ))
        .into_owned();
        let now = now_ms();
        let mut total = 0;
        loop {
            let done = D::bind_cutoff(sqlx::query(&sql), self.window.duration(), now)
                .bind(D::CLEANUP_BATCH)
                .execute(pool)
                .await
                .map_err(db::<D>)?;
            let deleted = D::rows_affected(&done);
            total += deleted;
            if deleted < D::CLEANUP_BATCH as u64 {
                return Ok(total);
            }
        }
    }
}

/// The table part of a possibly schema-qualified name, to name its index after.
fn bare_table(table: &str) -> &str {
    table.rsplit('.').next().unwrap_or(table)
}

fn db<D: InboxDialect>(e: sqlx::Error) -> Error {
    Error::transport(D::TRANSPORT, e)
}

/// What inserting a key into the processed-messages table found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// The key is new: do the effects in this transaction, then commit.
    First,
    /// A committed transaction recorded it already: skip the effects.
    Duplicate,
}

/// What `process` (of `PostgresInbox` or `SqliteInbox`) did with a delivery.
#[derive(Debug)]
pub enum Processed<T, E> {
    /// First time: the handler's effects and the record committed together; acked.
    Done(T),
    /// Processed before: nothing ran; acked.
    Duplicate,
    /// The handler failed: its transaction rolled back (no record), and the delivery was
    /// nacked with the error so a redelivery processes it.
    Failed(E),
}

impl<T, E> Processed<T, E> {
    pub fn is_done(&self) -> bool {
        matches!(self, Processed::Done(_))
    }
    pub fn is_duplicate(&self) -> bool {
        matches!(self, Processed::Duplicate)
    }
}

/// The inbox table: see [`crate::sql_name`]; a `schema.` before it where `allow_schema`.
pub(super) fn validate_table(table: &str, allow_schema: bool) -> Result<()> {
    crate::sql_name::check_table(
        "inbox",
        table,
        allow_schema,
        crate::sql_name::MAX_IDENTIFIER,
    )
}

/// Runs `handler` with `tx` if `recorded` is [`Recorded::First`], then commits and acks;
/// a duplicate rolls back and acks; a failed handler rolls back and nacks.
///
/// Crash windows: a crash before the commit leaves neither record nor effects, and the
/// unsettled delivery comes back; a crash after the commit and before the ack brings the
/// message back as a duplicate, which is acked without running.
pub(super) async fn settle_once<DB, T, E, F, Fut>(
    transport: &'static str,
    tx: Transaction<'static, DB>,
    recorded: Recorded,
    delivery: Delivery,
    handler: F,
) -> Result<Processed<T, E>>
where
    DB: Database,
    E: Display,
    F: FnOnce(Transaction<'static, DB>, Received) -> Fut,
    Fut: Future<Output = Result<(Transaction<'static, DB>, T), E>>,
{
    let db = |e: sqlx::Error| Error::transport(transport, e);
    if recorded == Recorded::Duplicate {
        tx.rollback().await.map_err(db)?;
        tracing::debug!(id = %delivery.id, "inbox: duplicate skipped");
        metrics::counter!("ferry_inbox_duplicates_total").increment(1);
        delivery.ack().await?;
        return Ok(Processed::Duplicate);
    }
    match handler(tx, delivery.message().clone()).await {
        Ok((tx, value)) => {
            if let Err(e) = tx.commit().await {
                // Neither the record nor the effects are committed: a retry starts over.
                let e = db(e);
                nack_quietly(delivery, &e.to_string()).await;
                return Err(e);
            }
            metrics::counter!("ferry_inbox_processed_total").increment(1);
            delivery.ack().await?;
            Ok(Processed::Done(value))
        }
        Err(e) => {
            // The handler dropped the transaction: sqlx rolls it back before the connection
            // is used again, so neither the record nor any effect commits.
            metrics::counter!("ferry_inbox_failures_total").increment(1);
            delivery.nack_with_error(None, &e.to_string()).await?;
            Ok(Processed::Failed(e))
        }
    }
}

async fn nack_quietly(delivery: Delivery, error: &str) {
    let id = delivery.id.clone();
    if let Err(e) = delivery.nack_with_error(None, error).await {
        // The lease will end and bring it back anyway.
        tracing::warn!(%id, error = %e, "inbox: nack after a failed commit failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inbox_table_names_may_carry_a_schema_only_where_allowed() {
        assert!(validate_table("processed_messages", false).is_ok());
        assert!(validate_table("billing.inbox_2", true).is_ok());
        assert!(validate_table("main.inbox", false).is_err());
    }
}
