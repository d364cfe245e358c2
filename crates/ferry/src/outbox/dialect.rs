//! [`OutboxDialect`]: what the outbox table and its statements spell differently per
//! database. Everything else — the columns, the due-row rule, the lease — is one text in
//! [`SqlOutbox`](super::SqlOutbox).

use std::future::Future;
use std::time::Duration;

use sqlx::query::Query;
use sqlx::{Database, Pool};

use crate::error::Result;
use crate::sql_dialect::SqlDialect;

use super::table::TableName;

/// A statement with its parameters bound, as the outbox builds them.
pub type OutboxQuery<'q, D> = Query<'q, D, <D as Database>::Arguments<'q>>;

/// The outbox on one database.
pub trait OutboxDialect: SqlDialect {
    /// The `seq` column: a key that grows with every insert and is never reused.
    const SEQ_COLUMN: &'static str;
    /// Column types: bytes, the headers' JSON object, a small and a 64-bit integer.
    const BYTES: &'static str;
    const JSON: &'static str;
    const SMALLINT: &'static str;
    const BIGINT: &'static str;
    /// The headers parameter of the insert (JSON text), e.g. `$6::jsonb`.
    const HEADERS_PARAM: &'static str;
    /// Run after the insert in the caller's transaction, binding the table name: wakes
    /// listening relays when (and only if) that transaction commits.
    const NOTIFY: Option<&'static str>;
    /// `id` is one of the ids bound as parameter `$2` by [`bind_ids`](Self::bind_ids).
    const ID_IN_LIST: &'static str;

    /// The claim: stamps `claimed_by = $1, claim_until = $2` on the rows `due` selects
    /// (binding `$3` as now and `$4` as the limit) atomically against other claimers,
    /// returning the claimed columns.
    fn claim_statement(table: &TableName, due: &str) -> String;

    /// Binds `ids` as the one parameter [`ID_IN_LIST`](Self::ID_IN_LIST) reads.
    fn bind_ids<'q>(
        query: OutboxQuery<'q, Self>,
        ids: &'q [String],
    ) -> Result<OutboxQuery<'q, Self>>;

    /// What a relay waits on between rounds: signals that rows were committed.
    type Listener: Send + 'static;

    /// A listener on `table`'s commits, where the database has such signals.
    fn listen(
        pool: &Pool<Self>,
        table: &TableName,
    ) -> impl Future<Output = Result<Option<Self::Listener>>> + Send;

    /// Returns when signalled or after `max`, whichever is first.
    fn wait(listener: &mut Self::Listener, max: Duration) -> impl Future<Output = ()> + Send;
}
