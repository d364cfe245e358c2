//! `sqs://host:port?region=…` — Amazon SQS, with SNS for topics (see `url.rs` for the URL
//! and where keys and the region come from).
//!
//! A queue is an SQS queue (a FIFO queue, `.fifo`, when it is declared with per-key
//! ordering or a dedup window) with a dead-letter queue its RedrivePolicy points at; the
//! lease is the visibility timeout, an ack DeleteMessage, a nack ChangeMessageVisibility.
//! A topic is an SNS topic; a subscription an SQS queue subscribed to it with raw message
//! delivery. The declaration is kept in the queue's tags, so every process consuming it
//! acts on the same policy. What SQS cannot keep is refused when declared (see
//! [`capabilities`]).

#[cfg(feature = "sqs")]
mod acks;
#[cfg(feature = "sqs")]
mod aws;
mod capabilities;
#[cfg(feature = "sqs")]
mod codec;
#[cfg(feature = "sqs")]
mod consume;
#[cfg(feature = "sqs")]
mod engine;
#[cfg(feature = "sqs")]
mod names;
#[cfg(feature = "sqs")]
mod publish;
#[cfg(feature = "sqs")]
mod settings;
#[cfg(feature = "sqs")]
mod topology;
#[cfg(feature = "sqs")]
mod url;

pub use capabilities::capabilities;
#[cfg(feature = "sqs")]
pub use engine::Sqs;
