//! A topology file as the flat list of channels a server holds: every queue, topic and
//! subscription by name with the settings the file gives it, and the dead-letter queues the
//! file names but does not define. Both sides of a plan are read this way, so that the
//! diff compares like with like.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;

use super::PlanError;
use super::setting::{Setting, Value};
use crate::Topology;
use crate::format::{self, Broker, ChannelKind, DeliveryPolicy, Duration, OrderingMode};

/// What a channel is on the Ferry server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Queue,
    Topic,
    Subscription,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Queue => "queue",
            Kind::Topic => "topic",
            Kind::Subscription => "subscription",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The settings a file gives one channel. A setting the file leaves out is not managed:
/// the server's default on create, and whatever the server holds afterwards.
pub type Settings = BTreeMap<Setting, Value>;

/// One queue, topic or subscription.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Channel {
    pub kind: Kind,
    pub name: String,
    pub settings: Settings,
    /// The channels whose dead letters go here. A dead-letter queue is created with
    /// dead-lettering of its own disabled, as the server creates `<name>.dlq`.
    pub dead_letter_of: Vec<String>,
}

impl Channel {
    /// The queue this channel's dead letters go to, when the file says.
    pub fn dead_letter(&self) -> Option<&str> {
        match self.settings.get(&Setting::DeadLetter) {
            Some(Value::Text(name)) => Some(name),
            _ => None,
        }
    }

    /// The topic of a subscription.
    pub fn topic(&self) -> Option<&str> {
        match self.settings.get(&Setting::Topic) {
            Some(Value::Text(name)) => Some(name),
            _ => None,
        }
    }
}

/// A channel of the file on a broker the Ferry server does not serve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Foreign {
    pub kind: Kind,
    pub name: String,
    pub broker: Broker,
}

impl fmt::Display for Foreign {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} (broker: {})",
            self.kind,
            self.name,
            broker_name(self.broker)
        )
    }
}

/// The file's spelling of a broker.
fn broker_name(broker: Broker) -> &'static str {
    match broker {
        Broker::Ferry => "ferry",
        Broker::Kafka => "kafka",
        Broker::Rabbitmq => "rabbitmq",
        Broker::Sqs => "sqs",
        Broker::Sns => "sns",
        Broker::Nats => "nats",
        Broker::Redis => "redis",
        Broker::Pubsub => "pubsub",
    }
}

/// Whether `ferry serve` holds a channel of this broker and type: every Ferry channel; a
/// Kafka topic, an SNS topic and an SQS queue are Ferry topics and queues under the
/// server's Kafka, SNS and SQS front ends.
pub fn served_by_ferry(broker: Broker, kind: ChannelKind) -> bool {
    use ChannelKind as K;
    match broker {
        Broker::Ferry => true,
        Broker::Kafka => matches!(kind, K::Topic | K::Stream),
        Broker::Sns => matches!(kind, K::Topic | K::FifoTopic),
        Broker::Sqs => matches!(kind, K::Queue | K::FifoQueue),
        Broker::Rabbitmq | Broker::Nats | Broker::Redis | Broker::Pubsub => false,
    }
}

/// A topology as channels, and the channels left out because the server does not serve
/// their broker.
#[derive(Debug, Clone, Default)]
pub struct Channels {
    /// Queues and subscriptions share one namespace on the server (a subscription is a
    /// queue fed by a topic); topics have their own.
    pub(crate) queues: BTreeMap<String, Channel>,
    pub(crate) topics: BTreeMap<String, Channel>,
    pub foreign: Vec<Foreign>,
}

impl Channels {
    /// Reads the channels of `topology` that the Ferry server serves, the others into
    /// [`Channels::foreign`]. Errors when a name is defined twice or a queue's TTL is given
    /// twice with two values.
    pub fn of(topology: &Topology) -> Result<Channels, PlanError> {
        Channels::read(topology, served_by_ferry)
    }

    /// Reads every channel of `topology` whatever its broker: for declaring the design on
    /// one transport, which is then the broker of all of it.
    pub fn every(topology: &Topology) -> Result<Channels, PlanError> {
        Channels::read(topology, |_, _| true)
    }

    fn read(
        topology: &Topology,
        keep: impl Fn(Broker, ChannelKind) -> bool,
    ) -> Result<Channels, PlanError> {
        let mut channels = Channels::default();
        for topic in &topology.topics {
            if !keep(topic.broker, topic.kind) {
                channels.foreign.push(Foreign {
                    kind: Kind::Topic,
                    name: topic.name.to_string(),
                    broker: topic.broker,
                });
                continue;
            }
            let mut settings = Settings::new();
            if let Some(n) = topic.partitions {
                settings.insert(Setting::Partitions, Value::Count(n.into()));
            }
            if let Some(r) = topic.retention {
                settings.insert(Setting::Retention, Value::Duration(r));
            }
            channels.add_topic(topic.name.as_str(), settings)?;
            for sub in &topic.subscriptions {
                let mut settings = Settings::new();
                settings.insert(Setting::Topic, Value::Text(topic.name.to_string()));
                // Absent means every message: a filter removed from the file is removed.
                let filter = sub.filter.clone().unwrap_or_default();
                settings.insert(Setting::Filter, Value::Text(filter));
                let name = sub.name.as_str();
                delivery(&mut settings, name, sub.delivery.as_ref(), sub.retention)?;
                // The server deduplicates a topic's records at publish (idempotent
                // producers), not per subscription: a subscription has no dedup window.
                settings.remove(&Setting::DedupWindow);
                dead_letter(&mut settings, sub.dead_letter.as_ref());
                channels.add_queue(Kind::Subscription, name, settings)?;
            }
        }
        for queue in &topology.queues {
            if !keep(queue.broker, queue.kind) {
                channels.foreign.push(Foreign {
                    kind: Kind::Queue,
                    name: queue.name.to_string(),
                    broker: queue.broker,
                });
                continue;
            }
            let mut settings = Settings::new();
            let name = queue.name.as_str();
            delivery(
                &mut settings,
                name,
                queue.delivery.as_ref(),
                queue.retention,
            )?;
            dead_letter(&mut settings, queue.dead_letter.as_ref());
            if let Some(n) = queue.limits.as_ref().and_then(|l| l.max_length) {
                settings.insert(Setting::MaxLength, Value::Count(n));
            }
            channels.add_queue(Kind::Queue, name, settings)?;
        }
        channels.add_dead_letter_queues();
        Ok(channels)
    }

    /// Every channel: topics, then queues and subscriptions, each by name.
    pub fn iter(&self) -> impl Iterator<Item = &Channel> {
        self.topics.values().chain(self.queues.values())
    }

    pub fn get(&self, kind: Kind, name: &str) -> Option<&Channel> {
        match kind {
            Kind::Topic => self.topics.get(name),
            Kind::Queue | Kind::Subscription => self.queues.get(name),
        }
    }

    fn add_topic(&mut self, name: &str, settings: Settings) -> Result<(), PlanError> {
        let channel = Channel {
            kind: Kind::Topic,
            name: name.to_owned(),
            settings,
            dead_letter_of: Vec::new(),
        };
        if self.topics.insert(name.to_owned(), channel).is_some() {
            return Err(PlanError::Duplicate {
                name: name.to_owned(),
            });
        }
        Ok(())
    }

    fn add_queue(&mut self, kind: Kind, name: &str, settings: Settings) -> Result<(), PlanError> {
        let channel = Channel {
            kind,
            name: name.to_owned(),
            settings,
            dead_letter_of: Vec::new(),
        };
        if self.queues.insert(name.to_owned(), channel).is_some() {
            return Err(PlanError::Duplicate {
                name: name.to_owned(),
            });
        }
        Ok(())
    }

    /// Adds each dead-letter queue the file names but does not define, as a queue with no
    /// managed settings, and records on every dead-letter queue whose it is.
    fn add_dead_letter_queues(&mut self) {
        let targets: BTreeSet<(String, String)> = self
            .queues
            .values()
            .filter_map(|c| c.dead_letter().map(|d| (d.to_owned(), c.name.clone())))
            .collect();
        for (target, origin) in targets {
            let dlq = self
                .queues
                .entry(target.clone())
                .or_insert_with(|| Channel {
                    kind: Kind::Queue,
                    name: target,
                    settings: Settings::new(),
                    dead_letter_of: Vec::new(),
                });
            dlq.dead_letter_of.push(origin);
        }
    }
}

fn delivery(
    settings: &mut Settings,
    channel: &str,
    policy: Option<&DeliveryPolicy>,
    retention: Option<Duration>,
) -> Result<(), PlanError> {
    // A queue's retention is how long a message may wait: the message TTL, as SQS's
    // MessageRetentionPeriod is. Both fields name the same server setting.
    let ttl = match (policy.and_then(|p| p.ttl), retention) {
        (Some(ttl), Some(retention)) if ttl != retention => {
            return Err(PlanError::TwoTtls {
                channel: channel.to_owned(),
                ttl,
                retention,
            });
        }
        (ttl, retention) => ttl.or(retention),
    };
    if let Some(ttl) = ttl {
        settings.insert(Setting::Ttl, Value::Duration(ttl));
    }
    let Some(policy) = policy else {
        return Ok(());
    };
    if let Some(n) = policy.max_deliveries {
        settings.insert(Setting::MaxDeliveries, Value::Count(n.into()));
    }
    if let Some(retry) = &policy.retry {
        settings.insert(Setting::RetryInitial, Value::Duration(retry.initial));
        if let Some(m) = retry.multiplier {
            settings.insert(Setting::RetryMultiplier, Value::Ratio(m));
        }
        if let Some(max) = retry.max {
            settings.insert(Setting::RetryMax, Value::Duration(max));
        }
        if let Some(j) = retry.jitter {
            settings.insert(Setting::RetryJitter, Value::Ratio(j));
        }
    }
    if let Some(ordering) = &policy.ordering {
        settings.insert(
            Setting::Ordering,
            Value::Text(ordering_name(ordering.mode).to_owned()),
        );
    }
    if let Some(window) = policy.dedup_window {
        settings.insert(Setting::DedupWindow, Value::Duration(window));
    }
    if let Some(levels) = policy.priorities {
        // 0 and 1 both mean no priorities: the server counts plain FIFO as one level.
        settings.insert(Setting::Priorities, Value::Count(levels.max(1).into()));
    }
    Ok(())
}

fn dead_letter(settings: &mut Settings, dead_letter: Option<&format::DeadLetter>) {
    let Some(dead_letter) = dead_letter else {
        return;
    };
    settings.insert(Setting::DeadLetter, Value::Text(dead_letter.name.clone()));
    if let Some(retention) = dead_letter.retention {
        settings.insert(Setting::DeadLetterRetention, Value::Duration(retention));
    }
}

/// The file's spelling of an ordering mode.
pub fn ordering_name(mode: OrderingMode) -> &'static str {
    match mode {
        OrderingMode::Shared => "shared",
        OrderingMode::KeyShared => "key-shared",
        OrderingMode::Exclusive => "exclusive",
    }
}
