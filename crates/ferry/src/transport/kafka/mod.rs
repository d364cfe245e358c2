//! `kafka://host:port[,host:port]` — Apache Kafka, through librdkafka (see `url.rs`).
//!
//! A queue is a topic read by one consumer group; a topic is a topic and each subscription
//! a consumer group on it. Acks commit offsets — per partition up to the lowest delivery
//! still unsettled. A nack publishes a copy to the source's retry topic for its delay (a
//! ladder of them, `names.rs`), a dead letter goes to `<name>.dlq`. Declarations are kept in
//! a compacted catalog topic, so every process consuming a source acts on the same policy.
//! What Kafka cannot keep is refused when declared (see [`capabilities`]).

mod capabilities;
#[cfg(feature = "kafka")]
mod catalog;
#[cfg(feature = "kafka")]
mod codec;
#[cfg(feature = "kafka")]
mod consume;
#[cfg(feature = "kafka")]
mod engine;
#[cfg(feature = "kafka")]
mod ledger;
#[cfg(feature = "kafka")]
mod names;
#[cfg(feature = "kafka")]
mod offsets;
#[cfg(feature = "kafka")]
mod publish;
#[cfg(feature = "kafka")]
mod settings;
#[cfg(feature = "kafka")]
mod settle;
#[cfg(feature = "kafka")]
mod topology;
#[cfg(feature = "kafka")]
mod url;

pub use capabilities::capabilities;
#[cfg(feature = "kafka")]
pub use engine::Kafka;
