//! `postgres://user@host:port/db` (or `postgresql://`) — queues as rows of one table in the
//! `ferry` schema, taken with `SELECT … FOR UPDATE SKIP LOCKED`, consumers woken by
//! LISTEN/NOTIFY.

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
