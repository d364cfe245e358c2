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
//! Consumers read with basic.consume under a basic.qos prefetch (the consumer's), in
//! subscription sessions (`consume`): a channel of their own, opened when a fetch needs one
//! and kept while the application keeps fetching. A subscription RabbitMQ pushes into
//! whether or not anyone asks cannot simply stay open: a message pushed into a consumer
//! that stopped fetching would wait there unseen, out of other consumers' reach, and a
//! delivery whose lease ran out and went back to the queue would be pushed straight back
//! into the idle consumer that let it expire. So, with no fetch waiting, a session ends
//! once it holds nothing handed out and nothing was fetched or settled for 100 ms, when a
//! lease of its consumer runs out (before that delivery is requeued), once what was pushed
//! into it waited a whole lease, and when the consumer closes — not while the consumer works
//! through what it fetched, since each message sent back counts as a delivery and one sent
//! back by busy consumer after busy consumer would reach its limit unseen. Ending cancels
//! the subscription, sends back what was received and not handed out (a nack with requeue,
//! counted), and closes the channel a second after every delivery handed out from it is
//! settled (a quorum queue applies acks asynchronously, and a channel's close returns to
//! the queue the acks not applied yet, as if they had never been sent).
//!
//! A channel is never reused for another subscription: a quorum queue can still deliver
//! after `cancel-ok` (the queue keeps a cancelled consumer while it has deliveries in
//! flight, the channel forgets it), the client drops a delivery for a consumer tag it no
//! longer knows, and only the channel's close returns such a message to the queue — one
//! more delivery counted against its limit. On a reused channel a later `basic.ack
//! multiple` could even cover it. Acks that arrive together are one `basic.ack multiple`
//! per channel where the delivery tags allow (`acks`).

#[cfg(feature = "amqp")]
mod acks;
mod capabilities;
#[cfg(feature = "amqp")]
mod consume;
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
