//! The topology seen the way the rules ask about it: every place messages are consumed
//! from (queues and subscriptions alike), every channel that stores them, and which of
//! those carry a given message type.

use crate::Topology;
use crate::format::{
    Alerts, Consumers, DeadLetter, DeliveryPolicy, Duration, Limits, Name, OrderingMode, Topic,
};

/// A queue or a subscription: where consumers take messages from, one at a time.
pub(crate) struct Endpoint<'a> {
    pub element: String,
    pub line: Option<u64>,
    /// Its own retention, or its topic's when it declares none.
    pub retention: Option<Duration>,
    pub consumers: Option<&'a Consumers>,
    pub dead_letter: Option<&'a DeadLetter>,
    pub delivery: Option<&'a DeliveryPolicy>,
    pub alerts: Option<&'a Alerts>,
    /// The message types it carries (a subscription: all of its topic's).
    pub messages: &'a [Name],
}

impl Endpoint<'_> {
    pub fn ordering_mode(&self) -> Option<OrderingMode> {
        self.delivery?.ordering.as_ref().map(|o| o.mode)
    }
}

pub(crate) fn endpoints(topology: &Topology) -> Vec<Endpoint<'_>> {
    let queues = topology.queues.iter().map(|q| Endpoint {
        element: format!("queue {}", q.name),
        line: q.name.line(),
        retention: q.retention,
        consumers: q.consumers.as_ref(),
        dead_letter: q.dead_letter.as_ref(),
        delivery: q.delivery.as_ref(),
        alerts: q.alerts.as_ref(),
        messages: &q.messages,
    });
    let subscriptions = topology.topics.iter().flat_map(|t| {
        t.subscriptions.iter().map(move |s| Endpoint {
            element: subscription_element(t, &s.name),
            line: s.name.line(),
            retention: s.retention.or(t.retention),
            consumers: s.consumers.as_ref(),
            dead_letter: s.dead_letter.as_ref(),
            delivery: s.delivery.as_ref(),
            alerts: s.alerts.as_ref(),
            messages: &t.messages,
        })
    });
    queues.chain(subscriptions).collect()
}

pub(crate) fn subscription_element(topic: &Topic, name: &Name) -> String {
    format!("subscription {}/{name}", topic.name)
}

pub(crate) fn group_element(topic: &Topic, name: &Name) -> String {
    format!("consumer-group {}/{name}", topic.name)
}

/// A queue or topic: where messages are stored.
pub(crate) struct Channel<'a> {
    pub element: String,
    pub line: Option<u64>,
    pub broker: crate::format::Broker,
    pub retention: Option<Duration>,
    pub limits: Option<&'a Limits>,
}

pub(crate) fn channels(topology: &Topology) -> Vec<Channel<'_>> {
    let queues = topology.queues.iter().map(|q| Channel {
        element: format!("queue {}", q.name),
        line: q.name.line(),
        broker: q.broker,
        retention: q.retention,
        limits: q.limits.as_ref(),
    });
    let topics = topology.topics.iter().map(|t| Channel {
        element: format!("topic {}", t.name),
        line: t.name.line(),
        broker: t.broker,
        retention: t.retention,
        limits: t.limits.as_ref(),
    });
    queues.chain(topics).collect()
}

/// The endpoints that deliver message type `name`.
pub(crate) fn carriers<'a>(topology: &'a Topology, name: &str) -> Vec<Endpoint<'a>> {
    endpoints(topology)
        .into_iter()
        .filter(|e| e.messages.iter().any(|m| m.as_str() == name))
        .collect()
}
