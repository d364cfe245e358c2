//! `nats://host:port` — NATS JetStream (2.9 or later).
//!
//! A queue is a work-queue stream with one durable pull consumer that every SDK consumer of
//! the queue fetches from; a topic is an interest stream and each subscription a durable
//! consumer on it. Leases are the consumer's AckWait, redelivery and backoff are `Nak` with
//! a delay, and the attempt is the engine's delivery count. What 2.9 lacks the SDK does on
//! top, and says so in [`capabilities`]: dead-lettering (MaxDeliver unlimited and the
//! deliveries counted by the SDK, then a republish to a dead-letter stream with the
//! `ferry-dlq-*` headers and an ack), delays (a holding stream whose due messages
//! are moved into the queue) and extensions longer than the lease (repeated in-progress
//! acks).
//!
//! Names: JetStream stream and consumer names cannot hold `.`, so Ferry names are escaped
//! reversibly (`_` → `__`, `.` → `_d`) and prefixed by kind: queue `orders.eu` is stream
//! `ferry_q_orders_deu` on subject `ferry.q.orders_deu`; see `names.rs`.
//!
//! Durability: a publish returns once the stream has stored the message (its publish ack),
//! and an ack once the server confirmed it (a double ack). The server writes to its files
//! at once but syncs them to disk on its own schedule (`sync_interval`, two minutes by
//! default), so a power loss — unlike a process crash — can lose recent writes unless the
//! server is configured to sync more often.

mod capabilities;
#[cfg(feature = "nats")]
mod codec;
#[cfg(feature = "nats")]
mod consumer;
#[cfg(feature = "nats")]
mod engine;
#[cfg(feature = "nats")]
mod names;
#[cfg(feature = "nats")]
mod settings;

pub use capabilities::capabilities;
#[cfg(feature = "nats")]
pub use engine::Nats;
