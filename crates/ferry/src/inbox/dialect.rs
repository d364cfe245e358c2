//! [`InboxDialect`]: what the processed-messages table spells differently per database —
//! chiefly the clock its records are stamped by.

use std::time::Duration;

use sqlx::Database;
use sqlx::query::Query;

use crate::sql_dialect::SqlDialect;

/// A statement with its parameters bound, as the inbox builds them.
pub type InboxQuery<'q, D> = Query<'q, D, <D as Database>::Arguments<'q>>;

/// The inbox on one database.
pub trait InboxDialect: SqlDialect {
    /// The database's name in the inbox's errors.
    const TRANSPORT: &'static str;
    /// Whether a table may be named `schema.table`.
    const SCHEMA_QUALIFIED: bool;
    /// Rows deleted per statement by `cleanup`, so no delete holds the database's locks
    /// for long.
    const CLEANUP_BATCH: i64;
    /// The `key` and `processed_at` column definitions.
    const KEY_COLUMN: &'static str;
    const PROCESSED_AT_COLUMN: &'static str;
    /// A record older than the window, binding `$1` as [`bind_cutoff`](Self::bind_cutoff)
    /// does.
    const EXPIRED: &'static str;

    /// The insert of a record of `$1` that finds an existing one instead of failing, its
    /// stamp bound by [`bind_stamp`](Self::bind_stamp).
    fn record_statement(table: &str) -> String;

    /// Binds the record's `processed_at`, where the database does not stamp it itself.
    fn bind_stamp(query: InboxQuery<'_, Self>) -> InboxQuery<'_, Self>;

    /// Binds what [`EXPIRED`](Self::EXPIRED) compares `processed_at` with: now less
    /// `window`, now being `now_ms` by the process's clock for a database that stamps by it.
    fn bind_cutoff(
        query: InboxQuery<'_, Self>,
        window: Duration,
        now_ms: i64,
    ) -> InboxQuery<'_, Self>;
}
