//! The inbox as a PostgreSQL table, written in the handler's own transaction.
//!
//! A concurrent duplicate inserting the same key waits on the unique index until the first
//! transaction ends, then finds the row (`Duplicate`) if it committed, or inserts it
//! (`First`) if it rolled back — so two consumers never both commit an effect for one key.
//! Records are stamped by the database's clock (`TIMESTAMPTZ`).

use std::time::Duration;

use sqlx::Postgres;

use super::dialect::{InboxDialect, InboxQuery};
use super::sql::SqlInbox;

/// A processed-messages table (`key TEXT PRIMARY KEY, processed_at TIMESTAMPTZ`) in the
/// application's PostgreSQL database; `name` or `schema.name`.
pub type PostgresInbox = SqlInbox<Postgres>;

impl InboxDialect for Postgres {
    const TRANSPORT: &'static str = "postgres inbox";
    const SCHEMA_QUALIFIED: bool = true;
    const CLEANUP_BATCH: i64 = 10_000;
    const KEY_COLUMN: &'static str = "TEXT PRIMARY KEY";
    const PROCESSED_AT_COLUMN: &'static str = "TIMESTAMPTZ NOT NULL DEFAULT now()";
    const EXPIRED: &'static str = "processed_at < now() - make_interval(secs => $1)";

    fn record_statement(table: &str) -> String {
        format!("INSERT INTO {table} (key) VALUES ($1) ON CONFLICT (key) DO NOTHING")
    }

    fn bind_stamp(query: InboxQuery<'_, Self>) -> InboxQuery<'_, Self> {
        query
    }

    fn bind_cutoff(query: InboxQuery<'_, Self>, window: Duration, _: i64) -> InboxQuery<'_, Self> {
        query.bind(window.as_secs_f64())
    }
}
