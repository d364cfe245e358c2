//! The idempotent consumer (inbox): a redelivered message commits no second effect.
//!
//! Two ways to remember what was processed:
//!
//! - a processed-messages table in the application's own database (`PostgresInbox` with
//!   the `postgres` feature, `SqliteInbox` with `sqlite`, each a `SqlInbox` over its
//!   database's `InboxDialect`): the record is inserted in the same transaction as the
//!   handler's effects, so both commit or neither does — the strongest form, with no
//!   window in which an effect is committed and its record is not;
//! - a [`DedupStore`] (`RedisDedupStore` with the `redis` feature, or
//!   [`MemoryDedupStore`]) for handlers whose effects are not in a database transaction
//!   with the record: a claim before the handler, a record after it. A crash between the
//!   effect and the record lets a redelivery run the effect again, so such effects must
//!   carry an idempotency key of their own (a payment provider's, for instance).
//!
//! Either way the record must outlive every redelivery of the message: [`DedupWindow`]
//! computes that from the queue's [`DeliveryPolicy`](crate::DeliveryPolicy) and refuses a
//! shorter window.

use std::time::Duration;

use crate::error::Result;

#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod dialect;
mod memory;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "redis")]
mod redis;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;
mod window;

#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub use dialect::{InboxDialect, InboxQuery};
pub use memory::MemoryDedupStore;
#[cfg(feature = "postgres")]
pub use postgres::PostgresInbox;
#[cfg(feature = "redis")]
pub use redis::RedisDedupStore;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub use sql::{Processed, Recorded, SqlInbox};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteInbox;
pub use window::DedupWindow;

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
