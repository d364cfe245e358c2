//! `amqp://user:pass@host:port/vhost` (or `amqps://`) — RabbitMQ 3.10 or later, without
//! plugins.
//!
//! How Ferry's model maps onto it (`name` is a queue or a subscription):
//!
//! - `name`: a durable quorum queue. A topic is a durable fanout exchange; a subscription is
//!   a quorum queue bound to it. Publishes wait for the publisher confirm.
//! - `name.dlq`: its dead letters. The SDK dead-letters by republishing there with the
//!   `ferry-dlq-*` headers (confirmed) and only then acking the original, so a crash in
//!   between leaves a duplicate, never a loss. `x-delivery-limit` stays on the queue as the
//!   engine's safety net for consumers that die holding a message.
//! - `name:settings`: one message, the declared delivery policy, so that any process
//!   consuming the queue knows its lease, backoff and max deliveries, and a declaration
//!   with other settings is a conflict. `:` cannot appear in a Ferry name, so these names
//!   never collide with a user's.
//! - `name:retry:<ms>` and `name:delay:<ms>`: quorum queues whose message TTL dead-letters
//!   (at-least-once) back into `name`: delayed retries and delayed publishes.
//!
//! - `tmp.<ulid>`: a temporary queue, exclusive to the connection that declared it
//!   (`temporary.rs`).
//!
//! Consumers pull with basic.get rather than basic.consume: a message pushed into a client
//! that is not asking for one would be held there, lease or not, where another consumer
//! cannot take it — a delivery whose lease ran out and went back to the queue would be
//! pushed straight back to the idle consumer that let it expire. A subscription opened
//! only while a fetch waits (consume, take, cancel) avoids that but loses messages on
//! quorum queues: RabbitMQ can still deliver to a consumer after its `cancel-ok` (the queue
//! keeps a cancelled consumer while it has deliveries in flight, the channel forgets it),
//! and the client drops a delivery for a consumer tag it no longer knows — the message stays
//! unacked on the channel, reaching nobody, until the channel closes. Acks that arrive
//! together are one `basic.ack multiple` where the delivery tags allow (`acks`).

#[cfg(feature = "amqp")]
mod acks;
mod capabilities;
#[cfg(feature = "amqp")]
mod engine;
#[cfg(feature = "amqp")]
mod settle;
#[cfg(feature = "amqp")]
mod temporary;
#[cfg(feature = "amqp")]
mod topology;

pub use capabilities::capabilities;
#[cfg(feature = "amqp")]
pub use engine::RabbitMq;
