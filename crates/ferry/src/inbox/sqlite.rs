//! The inbox as a SQLite table, written in the handler's own transaction.
//!
//! SQLite runs one write transaction at a time: the insert takes the write lock, so a
//! concurrent duplicate waits (up to the pool's busy timeout, 5 s by default in sqlx)
//! until the first transaction ends, then finds the key if it committed. Records are
//! stamped by the process's clock, in ms since the Unix epoch.

use std::time::Duration;

use sqlx::Sqlite;

use super::dialect::{InboxDialect, InboxQuery};
use super::sql::SqlInbox;
use crate::message::now_ms;

/// A processed-messages table (`key TEXT PRIMARY KEY, processed_at INTEGER` — ms since the
/// Unix epoch) in a SQLite database beside the application; lowercase letters, digits and
/// `_`, without a schema.
pub type SqliteInbox = SqlInbox<Sqlite>;

impl InboxDialect for Sqlite {
    const TRANSPORT: &'static str = "sqlite inbox";
    const SCHEMA_QUALIFIED: bool = false;
    // One writer: a long delete would stall every handler's transaction.
    const CLEANUP_BATCH: i64 = 5_000;
    const KEY_COLUMN: &'static str = "TEXT PRIMARY KEY NOT NULL";
    const PROCESSED_AT_COLUMN: &'static str = "INTEGER NOT NULL";
    const EXPIRED: &'static str = "processed_at < $1";

    fn record_statement(table: &str) -> String {
        format!(
            "INSERT INTO {table} (key, processed_at) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING"
        )
    }

    fn bind_stamp(query: InboxQuery<'_, Self>) -> InboxQuery<'_, Self> {
        query.bind(now_ms())
    }

    fn bind_cutoff(
        query: InboxQuery<'_, Self>,
        window: Duration,
        now_ms: i64,
    ) -> InboxQuery<'_, Self> {
        let window_ms = i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
        query.bind(now_ms.saturating_sub(window_ms))
    }
}
