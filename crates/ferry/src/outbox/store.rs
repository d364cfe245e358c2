//! The seam between the relay and a database: the few statements the relay needs, each
//! one atomic in the database.

use std::time::Duration;

use async_trait::async_trait;

use crate::error::Result;

use super::backlog::Backlog;
use super::row::ClaimedRow;
use super::table::TableName;

/// One outbox table in one database.
#[async_trait]
pub(crate) trait Store: Send + Sync + 'static {
    fn table(&self) -> &TableName;

    /// Claims up to `limit` due rows for `relay` until `until` (ms), in `seq` order: rows
    /// unpublished, due (`next_attempt_at <= now`), unclaimed or with a lapsed claim, and
    /// with no earlier unpublished row of their aggregate — so at most one row per
    /// aggregate, its oldest unpublished one.
    async fn claim(
        &self,
        relay: &str,
        now: i64,
        until: i64,
        limit: usize,
    ) -> Result<Vec<ClaimedRow>>;

    /// Marks the row published (whoever holds it now: it *was* published).
    async fn mark_published(&self, id: &str, at: i64) -> Result<()>;

    /// Records a failed attempt and when to try again; drops `relay`'s claim.
    async fn mark_failed(
        &self,
        relay: &str,
        id: &str,
        attempts: i32,
        next_attempt_at: i64,
        error: &str,
    ) -> Result<()>;

    /// Drops `relay`'s claims on rows it did not try (the breaker opened mid-round).
    async fn release(&self, relay: &str, ids: &[String]) -> Result<()>;

    /// Deletes up to `limit` rows published before `before` (ms); returns how many.
    async fn purge_published(&self, before: i64, limit: usize) -> Result<u64>;

    async fn backlog(&self, now: i64) -> Result<Backlog>;

    /// A source of "rows were committed" signals, when the database has one.
    async fn wakeups(&self) -> Result<Option<Box<dyn Wakeups>>>;
}

/// Signals that new rows may be due.
#[async_trait]
pub(crate) trait Wakeups: Send {
    /// Returns when signalled or after `max`, whichever is first.
    async fn wait(&mut self, max: Duration);
}
