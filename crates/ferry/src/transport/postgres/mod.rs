//! `postgres://user@host:port/db` (or `postgresql://`) — queues as rows of one table,
//! taken with `SELECT … FOR UPDATE SKIP LOCKED`, consumers woken by LISTEN/NOTIFY.
//!
//! Everything lives in the database's `ferry` schema, made by the migrations in
//! `crates/ferry/migrations` (run on connect): `topics`, `queues` (queues and subscriptions,
//! with their declared settings), `messages` (every queue's rows, dead letters under
//! `<name>.dlq`) and `dedup` (dedup ids within their window).
//!
//! - A fetch leases rows: `visible_at` moves to the end of the lease, the read count (the
//!   attempt) rises and the row gets a fresh lease token. Ack deletes (the acks of one
//!   consumer that arrive together in one `DELETE`), nack moves `visible_at` to the retry
//!   time, extend moves it on; each is guarded by the token, so a delivery whose lease went
//!   to another consumer is `NotHeld`.
//! - Dead-lettering (max deliveries, reject, TTL) copies the row to `<name>.dlq` with the
//!   `ferry-dlq-*` headers and deletes it in one transaction: the message is never in both
//!   queues, nor in neither.
//! - Every commit waits for the WAL flush (`synchronous_commit=on` per connection), so a
//!   publish, ack or lease that returned survives a server crash.
//! - A publish NOTIFYs at commit; a waiting fetch also looks again every 250 ms, so a
//!   missed notification, an ended lease or a delay coming due only waits that long.

#[cfg(feature = "postgres")]
mod acks;
mod capabilities;
#[cfg(feature = "postgres")]
mod consume;
#[cfg(feature = "postgres")]
mod engine;
#[cfg(feature = "postgres")]
mod settings;

pub use capabilities::capabilities;
#[cfg(feature = "postgres")]
pub use engine::Postgres;
