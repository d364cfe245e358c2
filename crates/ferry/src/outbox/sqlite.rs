//! [`SqliteOutbox`]: the outbox in a SQLite table, beside an application that keeps its
//! data in SQLite.
//!
//! SQLite has no row locks to skip: a claim is one conditional `UPDATE ... RETURNING`,
//! which SQLite runs under its database write lock, so two relays (even in two processes
//! sharing the file) can never stamp the same row; the lease columns then keep it theirs.
//! There is no NOTIFY: relays poll every `poll_interval`.

use std::convert::Infallible;
use std::time::Duration;

use sqlx::Sqlite;
use sqlx::sqlite::SqlitePool;

use crate::error::Result;

use super::dialect::{OutboxDialect, OutboxQuery};
use super::row::CLAIMED_COLUMNS;
use super::sql::SqlOutbox;
use super::table::TableName;

/// An outbox table in a SQLite database.
pub type SqliteOutbox = SqlOutbox<Sqlite>;

impl OutboxDialect for Sqlite {
    // AUTOINCREMENT: a seq is never reused, even after the newest rows are purged, so
    // per-aggregate order by seq holds across cleanups.
    const SEQ_COLUMN: &'static str = "INTEGER PRIMARY KEY AUTOINCREMENT";
    const BYTES: &'static str = "BLOB";
    const JSON: &'static str = "TEXT";
    const SMALLINT: &'static str = "INTEGER";
    const BIGINT: &'static str = "INTEGER";
    const HEADERS_PARAM: &'static str = "$6";
    const NOTIFY: Option<&'static str> = None;
    // SQLite binds no arrays: the ids go as one JSON array.
    const ID_IN_LIST: &'static str = "id IN (SELECT value FROM json_each($2))";

    fn claim_statement(table: &TableName, due: &str) -> String {
        // One statement: SQLite takes the write lock before reading, so the conditions
        // and the stamp are atomic against every other writer of the file.
        format!(
            "UPDATE {table} SET claimed_by = $1, claim_until = $2
            WHERE seq IN (
                {due})
            RETURNING {CLAIMED_COLUMNS}"
        )
    }

    fn bind_ids<'q>(
        query: OutboxQuery<'q, Self>,
        ids: &'q [String],
    ) -> Result<OutboxQuery<'q, Self>> {
        Ok(query.bind(serde_json::to_string(ids)?))
    }

    type Listener = Infallible;

    async fn listen(_: &SqlitePool, _: &TableName) -> Result<Option<Infallible>> {
        Ok(None)
    }

    async fn wait(listener: &mut Infallible, _: Duration) {
        match *listener {}
    }
}
