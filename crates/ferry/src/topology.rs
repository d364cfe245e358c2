//! A topology file declared through the connected transport: every queue, topic and
//! subscription of the design with the `declare_*` calls, so the same file sets up the
//! embedded broker, a Ferry server, NATS, RabbitMQ or any other transport. The transport is
//! the broker of the whole design here, whatever a channel's `broker:` says.
//!
//! A setting the transport cannot keep comes back as its [`Error::Unsupported`], naming
//! the channel. A setting the SDK's declarations have no field for (a named dead-letter
//! queue, a subscription filter, a topic's retention) is not declared, and is listed in
//! [`Applied::not_declared`] rather than dropped without a word; `ferry topology apply`
//! sets those on a Ferry server.

use std::time::Duration;

use ferry_topology::plan::{Channel, Channels, Value};

pub use ferry_topology::Topology;
pub use ferry_topology::plan::{Kind, Setting};

use crate::error::{Error, Result};
use crate::ferry::Ferry;
use crate::spec::{DeliveryPolicy, KeyOrdering, QueueDecl, SubscriptionDecl, TopicDecl};

/// What [`Ferry::apply_topology`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Applied {
    /// Every channel declared, in the order declared: topics, then queues and
    /// subscriptions.
    pub declared: Vec<(Kind, String)>,
    /// The file's settings that no declaration carries.
    pub not_declared: Vec<NotDeclared>,
}

/// One setting of the file that was not declared, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct NotDeclared {
    pub kind: Kind,
    pub channel: String,
    pub setting: Setting,
    pub why: &'static str,
}

impl Ferry {
    /// Declares every queue, topic and subscription of `topology`, topics first. Declaring
    /// is idempotent: applying the same file again changes nothing. Stops at the first
    /// declaration the transport refuses, with the channel named in the error.
    pub async fn apply_topology(&self, topology: &Topology) -> Result<Applied> {
        let channels =
            Channels::every(topology).map_err(|e| Error::invalid("topology", e.to_string()))?;
        let mut applied = Applied::default();
        for channel in channels.iter() {
            let declared = match channel.kind {
                Kind::Topic => self.declare_topic(&topic(channel, &mut applied)).await,
                // The transport makes each sender's dead-letter queue itself; a queue the
                // file names as one is that, not a queue to declare.
                Kind::Queue if !channel.dead_letter_of.is_empty() => {
                    applied.skip(channel, Setting::DeadLetter, DEAD_LETTER_QUEUE);
                    continue;
                }
                Kind::Queue => self.declare_queue(&queue(channel, &mut applied)).await,
                Kind::Subscription => {
                    let decl = subscription(channel, &mut applied);
                    self.declare_subscription(&decl).await
                }
            };
            declared.map_err(|e| in_channel(channel, e))?;
            applied.declared.push((channel.kind, channel.name.clone()));
        }
        Ok(applied)
    }
}

const DEAD_LETTER_QUEUE: &str = "the transport makes each sender's dead-letter queue itself \
     (`<name>.dlq` on Ferry); a declaration cannot name another";

impl Applied {
    fn skip(&mut self, channel: &Channel, setting: Setting, why: &'static str) {
        self.not_declared.push(NotDeclared {
            kind: channel.kind,
            channel: channel.name.clone(),
            setting,
            why,
        });
    }
}

/// The transport's refusal, saying which channel of the file it was about.
fn in_channel(channel: &Channel, error: Error) -> Error {
    let at = format!("{} {} of the topology", channel.kind, channel.name);
    match error {
        Error::Unsupported {
            transport,
            feature,
            why,
        } => Error::Unsupported {
            transport,
            feature,
            why: format!("{why} ({at})"),
        },
        Error::Invalid { what, problem } => Error::Invalid {
            what: format!("{what} ({at})"),
            problem,
        },
        other => other,
    }
}

fn duration(value: &Value) -> Option<Duration> {
    value
        .duration()
        .map(|d| Duration::from_millis(d.as_millis()))
}

fn topic(channel: &Channel, applied: &mut Applied) -> TopicDecl {
    let mut decl = TopicDecl::new(&channel.name);
    for (setting, value) in &channel.settings {
        match setting {
            Setting::Partitions => {
                decl.partitions = value
                    .count()
                    .map_or(1, |n| u32::try_from(n).unwrap_or(u32::MAX))
            }
            _ => applied.skip(
                channel,
                *setting,
                "a topic declaration has no retention: the transport's own applies",
            ),
        }
    }
    decl
}

/// The delivery policy; the settings it has no field for are left to the caller.
fn delivery(channel: &Channel, applied: &mut Applied) -> DeliveryPolicy {
    let mut policy = DeliveryPolicy::default();
    for (setting, value) in &channel.settings {
        match setting {
            Setting::MaxDeliveries => {
                if let Some(n) = value.count() {
                    policy.max_deliveries = u32::try_from(n).unwrap_or(u32::MAX);
                }
            }
            Setting::RetryInitial => policy.backoff.base = duration(value).unwrap_or_default(),
            Setting::RetryMax => policy.backoff.cap = duration(value).unwrap_or_default(),
            Setting::RetryMultiplier => {
                policy.backoff.multiplier = value.ratio().unwrap_or(policy.backoff.multiplier)
            }
            Setting::RetryJitter => {
                policy.backoff.jitter = value.ratio().unwrap_or(policy.backoff.jitter)
            }
            Setting::Ttl => policy.default_ttl = duration(value),
            Setting::Priorities => {
                policy.priority_levels = value
                    .count()
                    .map_or(1, |n| u8::try_from(n).unwrap_or(u8::MAX))
            }
            Setting::Ordering => match value {
                Value::Text(mode) if mode == "shared" => policy.ordering = KeyOrdering::None,
                Value::Text(mode) if mode == "key-shared" => policy.ordering = KeyOrdering::PerKey,
                _ => applied.skip(
                    channel,
                    *setting,
                    "declarations order per key or not at all; one consumer at a time is the \
                     Ferry server's (`ferry topology apply`)",
                ),
            },
            Setting::DeadLetter => applied.skip(channel, *setting, DEAD_LETTER_QUEUE),
            Setting::DeadLetterRetention => applied.skip(
                channel,
                *setting,
                "dead letters are kept as long as the transport keeps them",
            ),
            // Per kind, in `queue` and `subscription`.
            Setting::DedupWindow
            | Setting::MaxLength
            | Setting::Filter
            | Setting::Topic
            | Setting::Partitions
            | Setting::Retention => {}
        }
    }
    policy
}

fn queue(channel: &Channel, applied: &mut Applied) -> QueueDecl {
    let mut decl = QueueDecl::new(&channel.name).delivery(delivery(channel, applied));
    if let Some(window) = channel.settings.get(&Setting::DedupWindow) {
        decl.dedup_window = duration(window).filter(|w| !w.is_zero());
    }
    if let Some(max) = channel.settings.get(&Setting::MaxLength) {
        decl.max_length = max.count();
    }
    decl
}

fn subscription(channel: &Channel, applied: &mut Applied) -> SubscriptionDecl {
    let topic = channel.topic().unwrap_or_default();
    let decl = SubscriptionDecl::new(topic, &channel.name).delivery(delivery(channel, applied));
    if let Some(Value::Text(filter)) = channel.settings.get(&Setting::Filter)
        && !filter.is_empty()
    {
        applied.skip(
            channel,
            Setting::Filter,
            "a subscription declaration takes every message of its topic",
        );
    }
    decl
}
