//! Where saga state lives: the [`SagaStore`] contract, and its SQL implementations on
//! PostgreSQL and SQLite (one table, the same queries on both).

use async_trait::async_trait;

use super::state::SagaState;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
use crate::error::Error;
use crate::error::Result;

/// Keeps saga state. Every write is committed when the call returns: the orchestrator sends
/// a command only after the transition that makes it pending is durable, so a crash between
/// the two leaves a pending command to re-send, never a sent command the store forgot.
#[async_trait]
pub trait SagaStore: Send + Sync {
    /// Creates the table and its index if they are missing; safe to call at every start.
    async fn install(&self) -> Result<()>;
    /// Stores a new saga; `false` (and nothing written) when its id exists already.
    async fn insert(&self, state: &SagaState) -> Result<bool>;
    async fn load(&self, id: &str) -> Result<Option<SagaState>>;
    /// Writes `state` if the stored version is still `state.version`, bumping it; `false`
    /// when another writer moved the saga first (reload and decide again).
    async fn save(&self, state: &SagaState) -> Result<bool>;
    /// The unfinished sagas of `saga_type` whose deadline is at or before `now_ms` while
    /// moving forward, or whose pending command was sent at or before `resend_before_ms`;
    /// `resend_before_ms = i64::MAX` lists every unfinished saga.
    async fn due(
        &self,
        saga_type: &str,
        now_ms: i64,
        resend_before_ms: i64,
    ) -> Result<Vec<SagaState>>;
}

/// The saga table: see [`crate::sql_name`]; a `schema.` before it on PostgreSQL.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
fn validate_table(name: &str, allow_schema: bool) -> Result<()> {
    crate::sql_name::check_table("saga", name, allow_schema, crate::sql_name::MAX_IDENTIFIER)
}

#[cfg(any(feature = "postgres", feature = "sqlite"))]
fn sql_error(engine: &'static str) -> impl Fn(sqlx::Error) -> Error {
    move |e| Error::transport(engine, e)
}

/// The queries both engines run; `{t}` is the table. Times are milliseconds since the
/// epoch by the orchestrator's clock (not the database's), so the deadline and the step
/// timeout follow the clock the tests control, and one schema serves both engines.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod sql {
    pub const COLUMNS: &str = "id, saga_type, status, current_step, payload, results, compensated, \
        error, created_at, updated_at, timeout_at, sent_at, version";
    pub const INSERT: &str = "INSERT INTO {t} (id, saga_type, status, current_step, payload, \
        results, compensated, error, created_at, updated_at, timeout_at, sent_at, version) \
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 0) ON CONFLICT (id) DO NOTHING";
    pub const SAVE: &str = "UPDATE {t} SET status = $2, current_step = $3, results = $4, \
        compensated = $5, error = $6, updated_at = $7, timeout_at = $8, sent_at = $9, \
        version = version + 1 WHERE id = $1 AND version = $10";
    pub const LOAD: &str = "SELECT {c} FROM {t} WHERE id = $1";
    pub const DUE: &str = "SELECT {c} FROM {t} WHERE saga_type = $1 \
        AND status IN ('STARTED', 'IN_PROGRESS', 'COMPENSATING') \
        AND ((status <> 'COMPENSATING' AND timeout_at <= $2) OR sent_at <= $3) \
        ORDER BY timeout_at, id LIMIT 1000";

    pub fn with_table(query: &str, table: &str) -> String {
        query.replace("{c}", COLUMNS).replace("{t}", table)
    }

    /// The table; `{json}` and `{int}` are the engine's types.
    pub const TABLE: &str = "CREATE TABLE IF NOT EXISTS {t} (
        id           TEXT PRIMARY KEY,
        saga_type    TEXT NOT NULL,
        status       TEXT NOT NULL CHECK (status IN
                         ('STARTED', 'IN_PROGRESS', 'COMPENSATING', 'COMPLETED', 'FAILED')),
        current_step {int} NOT NULL,
        payload      {json} NOT NULL,
        results      {json} NOT NULL,
        compensated  {json} NOT NULL,
        error        TEXT,
        created_at   {int} NOT NULL,
        updated_at   {int} NOT NULL,
        timeout_at   {int} NOT NULL,
        sent_at      {int} NOT NULL,
        version      {int} NOT NULL
    )";
    /// The sweeper's scan: unfinished sagas only, so finished ones cost nothing.
    pub const INDEX: &str = "CREATE INDEX IF NOT EXISTS {i}_unfinished ON {t} \
        (saga_type, timeout_at) WHERE status IN ('STARTED', 'IN_PROGRESS', 'COMPENSATING')";
}

/// One SQL store per engine, from the same source: the queries are portable, only the
/// pool, the column types and the install lock differ.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
macro_rules! sql_store {
    ($(#[$doc:meta])* $store:ident, $db:ty, $pool:ty, $engine:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug)]
        pub struct $store {
            pool: $pool,
            table: String,
        }

        impl $store {
            /// A store on `pool` in the table `saga_state`.
            pub fn new(pool: $pool) -> $store {
                $store {
                    pool,
                    table: "saga_state".to_owned(),
                }
            }

            pub fn pool(&self) -> &$pool {
                &self.pool
            }

            pub fn table_name(&self) -> &str {
                &self.table
            }

            fn query(&self, query: &str) -> String {
                sql::with_table(query, &self.table)
            }

            fn decode(row: &<$db as sqlx::Database>::Row) -> Result<SagaState> {
                use sqlx::Row;
                use sqlx::types::Json;
                let get_err = sql_error($engine);
                let int = |name: &str| row.try_get::<i64, _>(name).map_err(&get_err);
                let status: String = row.try_get("status").map_err(&get_err)?;
                let Json(results) = row.try_get("results").map_err(&get_err)?;
                let Json(compensated) = row.try_get("compensated").map_err(&get_err)?;
                let Json(payload) = row.try_get("payload").map_err(&get_err)?;
                Ok(SagaState {
                    id: row.try_get("id").map_err(&get_err)?,
                    saga_type: row.try_get("saga_type").map_err(&get_err)?,
                    status: super::state::Status::parse(&status)?,
                    current_step: int("current_step")?.max(0) as usize,
                    payload,
                    results,
                    compensated,
                    error: row.try_get("error").map_err(&get_err)?,
                    created_at_ms: int("created_at")?,
                    updated_at_ms: int("updated_at")?,
                    timeout_at_ms: int("timeout_at")?,
                    sent_at_ms: int("sent_at")?,
                    version: int("version")?,
                })
            }
        }

        #[async_trait]
        impl SagaStore for $store {
            async fn install(&self) -> Result<()> {
                self.create_table().await
            }

            async fn insert(&self, state: &SagaState) -> Result<bool> {
                use sqlx::types::Json;
                let done = sqlx::query(&self.query(sql::INSERT))
                    .bind(&state.id)
                    .bind(&state.saga_type)
                    .bind(state.status.as_str())
                    .bind(state.current_step as i64)
                    .bind(Json(&state.payload))
                    .bind(Json(&state.results))
                    .bind(Json(&state.compensated))
                    .bind(&state.error)
                    .bind(state.created_at_ms)
                    .bind(state.updated_at_ms)
                    .bind(state.timeout_at_ms)
                    .bind(state.sent_at_ms)
                    .execute(&self.pool)
                    .await
                    .map_err(sql_error($engine))?;
                Ok(done.rows_affected() == 1)
            }

            async fn load(&self, id: &str) -> Result<Option<SagaState>> {
                let row = sqlx::query(&self.query(sql::LOAD))
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(sql_error($engine))?;
                row.as_ref().map(Self::decode).transpose()
            }

            async fn save(&self, state: &SagaState) -> Result<bool> {
                use sqlx::types::Json;
                let done = sqlx::query(&self.query(sql::SAVE))
                    .bind(&state.id)
                    .bind(state.status.as_str())
                    .bind(state.current_step as i64)
                    .bind(Json(&state.results))
                    .bind(Json(&state.compensated))
                    .bind(&state.error)
                    .bind(state.updated_at_ms)
                    .bind(state.timeout_at_ms)
                    .bind(state.sent_at_ms)
                    .bind(state.version)
                    .execute(&self.pool)
                    .await
                    .map_err(sql_error($engine))?;
                Ok(done.rows_affected() == 1)
            }

            async fn due(
                &self,
                saga_type: &str,
                now_ms: i64,
                resend_before_ms: i64,
            ) -> Result<Vec<SagaState>> {
                let rows = sqlx::query(&self.query(sql::DUE))
                    .bind(saga_type)
                    .bind(now_ms)
                    .bind(resend_before_ms)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(sql_error($engine))?;
                rows.iter().map(Self::decode).collect()
            }
        }
    };
}

#[cfg(feature = "postgres")]
sql_store!(
    /// Saga state in a PostgreSQL table (`saga_state` unless [`table`](Self::table) says
    /// otherwise); payloads and results as JSONB.
    PostgresSagaStore,
    sqlx::Postgres,
    sqlx::PgPool,
    "postgres"
);

#[cfg(feature = "postgres")]
impl PostgresSagaStore {
    /// Connects a small pool to `url` (`postgres://user@host:port/db`).
    pub async fn connect(url: &str) -> Result<PostgresSagaStore> {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(4)
            .connect(url)
            .await
            .map_err(sql_error("postgres"))?;
        Ok(PostgresSagaStore::new(pool))
    }

    /// Keeps the state in `table` (`name` or `schema.name`, lowercase).
    pub fn table(mut self, table: &str) -> Result<PostgresSagaStore> {
        validate_table(table, true)?;
        self.table = table.to_owned();
        Ok(self)
    }

    async fn create_table(&self) -> Result<()> {
        let err = sql_error("postgres");
        let mut tx = self.pool.begin().await.map_err(&err)?;
        // Two processes installing at once would race in the catalog even with IF NOT
        // EXISTS; the lock makes the second wait and then find the table made.
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('ferry saga ' || $1))")
            .bind(&self.table)
            .execute(&mut *tx)
            .await
            .map_err(&err)?;
        let table = sql::TABLE
            .replace("{json}", "JSONB")
            .replace("{int}", "BIGINT");
        sqlx::query(&self.query(&table))
            .execute(&mut *tx)
            .await
            .map_err(&err)?;
        // An index lives in its table's schema and its name may not name one.
        let index_name = self.table.rsplit('.').next().unwrap_or_default();
        let index = sql::INDEX.replace("{i}", index_name);
        sqlx::query(&self.query(&index))
            .execute(&mut *tx)
            .await
            .map_err(&err)?;
        tx.commit().await.map_err(&err)
    }
}

#[cfg(feature = "sqlite")]
sql_store!(
    /// Saga state in a SQLite table (`saga_state` unless [`table`](Self::table) says
    /// otherwise): a file beside the application, no server. Payloads and results as JSON
    /// text.
    SqliteSagaStore,
    sqlx::Sqlite,
    sqlx::SqlitePool,
    "sqlite"
);

#[cfg(feature = "sqlite")]
impl SqliteSagaStore {
    /// Opens (creating it if missing) the database file at `path`, in WAL mode so the
    /// sweeper and the reply loop do not block each other's reads.
    pub async fn open(path: impl AsRef<std::path::Path>) -> Result<SqliteSagaStore> {
        let options = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
            .busy_timeout(std::time::Duration::from_secs(10));
        let pool = sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .map_err(sql_error("sqlite"))?;
        Ok(SqliteSagaStore::new(pool))
    }

    /// Keeps the state in `table` (lowercase letters, digits and `_`).
    pub fn table(mut self, table: &str) -> Result<SqliteSagaStore> {
        validate_table(table, false)?;
        self.table = table.to_owned();
        Ok(self)
    }

    async fn create_table(&self) -> Result<()> {
        let err = sql_error("sqlite");
        let table = sql::TABLE
            .replace("{json}", "TEXT")
            .replace("{int}", "INTEGER");
        sqlx::query(&self.query(&table))
            .execute(&self.pool)
            .await
            .map_err(&err)?;
        let index = sql::INDEX.replace("{i}", &self.table);
        sqlx::query(&self.query(&index))
            .execute(&self.pool)
            .await
            .map_err(&err)?;
        Ok(())
    }
}
