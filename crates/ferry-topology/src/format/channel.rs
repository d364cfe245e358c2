//! Where messages live: queues, topics, the subscriptions and consumer groups that read
//! topics, and each one's dead-letter queue, consumers and limits.

use serde::{Deserialize, Serialize};

use super::name::Name;
use super::policy::{Alerts, DeliveryPolicy};
use super::units::{ByteSize, Duration};

/// The broker a channel lives on (the seed's `Broker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Broker {
    Ferry,
    Kafka,
    Rabbitmq,
    Sqs,
    Sns,
    Nats,
    Redis,
    Pubsub,
}

/// The seed's `Type`: what kind of channel this is on its broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChannelKind {
    Queue,
    /// Ordered per message group, deduplicated (SQS FIFO).
    FifoQueue,
    Topic,
    FifoTopic,
    /// A RabbitMQ exchange with its bound queues.
    Exchange,
    /// A log read by offset (Kafka, Redis Streams, JetStream).
    Stream,
}

/// A point-to-point queue: competing consumers, each message handled once.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Queue {
    pub name: Name,
    pub broker: Broker,
    #[serde(rename = "type")]
    pub kind: ChannelKind,
    /// Partitions or shards.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partitions: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retention: Option<Duration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumers: Option<Consumers>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_letter: Option<DeadLetter>,
    /// The message types sent to this queue (names from `messages`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<Name>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery: Option<DeliveryPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alerts: Option<Alerts>,
}

/// A topic: every subscription and consumer group gets every message.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Topic {
    pub name: Name,
    pub broker: Broker,
    #[serde(rename = "type")]
    pub kind: ChannelKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partitions: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retention: Option<Duration>,
    /// The message types published to this topic (names from `messages`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<Name>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subscriptions: Vec<Subscription>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub consumer_groups: Vec<ConsumerGroup>,
}

/// A durable cursor over a topic with per-message state: what SNS → SQS or a RabbitMQ
/// exchange binding makes. It carries its topic's messages, optionally filtered.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Subscription {
    pub name: Name,
    /// Which of the topic's messages this subscription takes, e.g. `orders.*` or
    /// `type = OrderPlaced`; all of them when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retention: Option<Duration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumers: Option<Consumers>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_letter: Option<DeadLetter>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery: Option<DeliveryPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alerts: Option<Alerts>,
}

/// A Kafka-style consumer group: the topic's partitions shared among live members,
/// progress kept as committed offsets.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumerGroup {
    pub name: Name,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumers: Option<Consumers>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alerts: Option<Alerts>,
}

/// Who consumes: a service or worker pool.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Consumers {
    pub name: String,
    /// Handling the same message twice has the same effect as once (an inbox table, a
    /// unique constraint, a conditional write).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub idempotent: bool,
    /// How many run at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instances: Option<u32>,
}

/// Where messages go when they cannot be processed.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DeadLetter {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retention: Option<Duration>,
}

/// What a channel accepts.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_message_size: Option<ByteSize>,
    /// The most messages it holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u64>,
}
