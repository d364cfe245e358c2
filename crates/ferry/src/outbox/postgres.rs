//! [`PostgresOutbox`]: the outbox in a PostgreSQL table (in the connection's search path).
//!
//! Claims select due rows `FOR UPDATE SKIP LOCKED` and stamp a lease in the same
//! statement, so concurrent relays neither wait on each other nor claim one row twice.
//! `enqueue` sends a NOTIFY on the table's channel, delivered only if the caller's
//! transaction commits, which wakes listening relays at once.

use std::time::Duration;

use sqlx::Postgres;
use sqlx::postgres::{PgListener, PgPool};

use crate::error::{Error, Result};

use super::dialect::{OutboxDialect, OutboxQuery};
use super::row::CLAIMED_COLUMNS;
use super::sql::SqlOutbox;
use super::table::TableName;

/// An outbox table in PostgreSQL.
pub type PostgresOutbox = SqlOutbox<Postgres>;

fn db(e: sqlx::Error) -> Error {
    Error::transport("postgres", e)
}

impl OutboxDialect for Postgres {
    const SEQ_COLUMN: &'static str = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY";
    const BYTES: &'static str = "BYTEA";
    const JSON: &'static str = "JSONB";
    const SMALLINT: &'static str = "SMALLINT";
    const BIGINT: &'static str = "BIGINT";
    const HEADERS_PARAM: &'static str = "$6::jsonb";
    const NOTIFY: Option<&'static str> = Some("SELECT pg_notify($1, '')");
    const ID_IN_LIST: &'static str = "id = ANY($2)";

    fn claim_statement(table: &TableName, due: &str) -> String {
        let t = table;
        // `headers` is JSONB in the table and text in a claimed row.
        let columns = CLAIMED_COLUMNS
            .split(", ")
            .map(|c| {
                if c == "headers" {
                    format!("{t}.headers::text AS headers")
                } else {
                    format!("{t}.{c}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "WITH due AS (
                {due}
                FOR UPDATE SKIP LOCKED
            )
            UPDATE {t} SET claimed_by = $1, claim_until = $2
            FROM due WHERE {t}.seq = due.seq
            RETURNING {columns}"
        )
    }

    fn bind_ids<'q>(
        query: OutboxQuery<'q, Self>,
        ids: &'q [String],
    ) -> Result<OutboxQuery<'q, Self>> {
        Ok(query.bind(ids))
    }

    /// LISTEN on the table's channel. Holds one connection of the pool for the relay's life.
    type Listener = PgListener;

    async fn listen(pool: &PgPool, table: &TableName) -> Result<Option<PgListener>> {
        let mut listener = PgListener::connect_with(pool).await.map_err(db)?;
        listener.listen(table.as_str()).await.map_err(db)?;
        Ok(Some(listener))
    }

    async fn wait(listener: &mut PgListener, max: Duration) {
        // `timeout` and `sleep` saturate a huge `max` (a poll interval meant as "only on
        // NOTIFY"); `Instant + max` would panic.
        let started = tokio::time::Instant::now();
        if let Ok(Err(e)) = tokio::time::timeout(max, listener.recv()).await {
            // The listener reconnects on its next call; until then this is a poll.
            tracing::warn!(error = %e, "outbox LISTEN connection failed");
            tokio::time::sleep(max.saturating_sub(started.elapsed())).await;
        }
    }
}
