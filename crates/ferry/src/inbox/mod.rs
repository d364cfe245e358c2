//! The idempotent consumer (inbox): a redelivered message commits no second effect.

use std::time::Duration;

use crate::error::Result;

/// Remembers which messages (by id or business key) were processed, for handlers whose
/// effects are not in a database transaction with the record. Implementations: Redis
/// (`SET NX PX`) and memory (tests, single process).
///
/// The contract a handler relies on: [`begin`](Self::begin) claims `key` for `hold` (a
/// handler that crashes lets the claim lapse, so a redelivery can try again);
/// [`complete`](Self::complete) turns the claim into a record kept for `window`;
/// [`abandon`](Self::abandon) drops the claim at once so a retry may run.
#[async_trait::async_trait]
pub trait DedupStore: Send + Sync {
    /// Whether `key` may be processed now: `Fresh` claims it for `hold`.
    async fn begin(&self, key: &str, hold: Duration) -> Result<Claim>;
    /// Records `key` as processed for `window`.
    async fn complete(&self, key: &str, window: Duration) -> Result<()>;
    /// Drops an unfinished claim on `key`.
    async fn abandon(&self, key: &str) -> Result<()>;
}

/// What [`DedupStore::begin`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Not seen: claimed now; process it, then `complete` or `abandon`.
    Fresh,
    /// Processed already within the window: skip it (and ack it).
    Done,
    /// Another consumer holds a claim on it right now: leave it for later (nack with delay).
    InProgress,
}
