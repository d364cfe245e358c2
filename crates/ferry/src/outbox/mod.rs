//! The transactional outbox: publish an event if and only if the database transaction that
//! records its cause commits.
//!
//! A write to the database and a publish to the broker are two systems; doing both
//! directly ("dual write") loses or invents events whenever the process dies between them.
//! Instead the application enqueues the event (`enqueue` on its outbox) as a row of an
//! outbox table *in its own transaction*, and a `Relay` publishes committed rows afterwards:
//!
//! - the row commits with the business data or not at all (a rollback leaves nothing);
//! - the relay publishes at least once: a crash between publish and marking the row
//!   published repeats the publish. The message id — and the dedup id — is the row id, so
//!   a transport that deduplicates stores the repeat once; on one that cannot (see
//!   [`Feature::Deduplication`](crate::Feature)) the consumer's inbox absorbs it;
//! - rows with one aggregate key (the message key) are published in enqueue order: a row
//!   waits while an earlier row of its aggregate is unpublished, whether claimed by
//!   another relay or waiting out a retry backoff;
//! - several relays share a table safely: rows are claimed under a lease (with
//!   `FOR UPDATE SKIP LOCKED` on PostgreSQL), so no row is published by two relays at once;
//! - a broker outage opens the relay's [`CircuitBreaker`](crate::breaker::CircuitBreaker):
//!   the relay stops calling, rows wait in the table, and publishing resumes by itself.
//!
//! Backends, each behind its feature: `PostgresOutbox` (`postgres`) and `SqliteOutbox`
//! (`sqlite`), both a `SqlOutbox` over their database's `OutboxDialect`; without either
//! feature the module is empty.

// The names above are plain, not links: a link to an item behind a feature breaks the docs
// of a build without it.

#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod backlog;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod config;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod dialect;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod event;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod hooks;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod relay;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod row;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod store;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod table;

#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub use backlog::{Backlog, OLDEST_UNPUBLISHED_AGE, PUBLISH_FAILURES, PUBLISHED, UNPUBLISHED_ROWS};
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub use config::RelayConfig;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub use dialect::{OutboxDialect, OutboxQuery};
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub use event::OutboxEvent;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub use hooks::{Fault, FaultPoint, RelayHooks};
#[cfg(feature = "postgres")]
pub use postgres::PostgresOutbox;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub use relay::{Relay, RelayHandle, Round};
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub use sql::SqlOutbox;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteOutbox;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub use table::TableName;
