//! One vhost's definitions as a topology: exchanges become topics, queues bound to an
//! exchange become its subscriptions (the binding's routing key their filter), other
//! queues stay queues, and each queue's dead-letter queue is found by following its
//! dead-letter exchange and routing key through that exchange's bindings.

use serde_json::Value;

use super::definitions::{BindingDefinition, Definitions, ExchangeDefinition, QueueDefinition};
use super::policy::{self, Settings};
use crate::format::{
    Broker, ChannelKind, DeadLetter, DeliveryPolicy, Duration, Limits, Name, Ordering,
    OrderingMode, Queue, Subscription, Topic,
};
use crate::imported::{Imported, Note};
use crate::{Topology, format::FORMAT_VERSION};

/// Settings read into the design (by key without `x-`); any other is noted.
const READ: [&str; 10] = [
    "dead-letter-exchange",
    "dead-letter-routing-key",
    "message-ttl",
    "max-length",
    "max-priority",
    "delivery-limit",
    "single-active-consumer",
    "max-age",
    "queue-type",
    // RabbitMQ's default: the oldest message is dropped when a queue is full.
    "overflow",
];

pub fn convert(definitions: &Definitions, vhost: &str) -> Imported {
    let mut notes = Vec::new();
    // By name: RabbitMQ exports in no particular order, and the same broker should give
    // the same file.
    let mut queues: Vec<&QueueDefinition> = definitions
        .queues
        .iter()
        .filter(|q| q.vhost == vhost)
        .collect();
    queues.sort_by(|a, b| a.name.cmp(&b.name));
    let mut exchanges: Vec<&ExchangeDefinition> = definitions
        .exchanges
        .iter()
        // The default exchange and the built-in `amq.*` ones exist in every vhost.
        .filter(|e| e.vhost == vhost && !e.name.is_empty() && !e.name.starts_with("amq."))
        .collect();
    exchanges.sort_by(|a, b| a.name.cmp(&b.name));
    let bindings: Vec<&BindingDefinition> = definitions
        .bindings
        .iter()
        .filter(|b| b.vhost == vhost)
        .collect();
    let all_settings: Vec<Settings> = queues
        .iter()
        .map(|q| policy::settings(q, &definitions.policies, &mut notes))
        .collect();

    // Dead-letter routes first: their exchanges and queues are plumbing of other queues,
    // not topics and queues of their own.
    let mut dead_letter_of: Vec<Option<String>> = Vec::new();
    let mut dead_letter_exchanges: Vec<&str> = Vec::new();
    for (queue, settings) in queues.iter().zip(&all_settings) {
        let target = dead_letter_target(queue, settings, &exchanges, &bindings, &mut notes);
        if let Some(exchange) = settings.str("dead-letter-exchange") {
            dead_letter_exchanges.push(exchange);
        }
        dead_letter_of.push(target);
    }
    let is_dead_letter_queue =
        |name: &str| dead_letter_of.iter().flatten().any(|target| target == name);

    let mut topics: Vec<Topic> = Vec::new();
    for exchange in &exchanges {
        let routes_only_dead_letters = dead_letter_exchanges.contains(&exchange.name.as_str())
            && bindings
                .iter()
                .filter(|b| b.source == exchange.name)
                .all(|b| b.destination_type == "queue" && is_dead_letter_queue(&b.destination));
        if routes_only_dead_letters {
            continue;
        }
        let subject = format!("exchange \"{}\"", exchange.name);
        if exchange.kind != "topic" {
            notes.push(Note::new(
                &subject,
                format!(
                    "a {} exchange; the format has no exchange type, so it reads as a topic exchange",
                    exchange.kind
                ),
            ));
        }
        if exchange.internal {
            notes.push(Note::new(
                &subject,
                "internal (no direct publishing) is not carried over",
            ));
        }
        for key in exchange.arguments.keys() {
            notes.push(Note::new(
                &subject,
                format!("argument {key} is not carried over"),
            ));
        }
        topics.push(Topic {
            name: Name::new(&exchange.name),
            broker: Broker::Rabbitmq,
            kind: ChannelKind::Exchange,
            partitions: None,
            retention: None,
            messages: Vec::new(),
            limits: None,
            subscriptions: Vec::new(),
            consumer_groups: Vec::new(),
        });
    }

    let mut standalone: Vec<Queue> = Vec::new();
    for ((queue, settings), dead_letter) in queues.iter().zip(&all_settings).zip(&dead_letter_of) {
        if is_dead_letter_queue(&queue.name) {
            continue;
        }
        let subject = format!("queue \"{}\"", queue.name);
        let mut read = Read::new(&subject, settings, &mut notes);
        let dead_letter = dead_letter.as_ref().map(|name| DeadLetter {
            name: name.clone(),
            retention: dead_letter_retention(name, &queues, &all_settings, read.notes),
        });
        let delivery = read.delivery();
        let max_length = read.u64("max-length");
        let kind = read.kind();
        let retention = read.duration_text("max-age");
        read.rest();
        if !queue.durable || queue.auto_delete {
            notes.push(Note::new(
                &subject,
                "not durable or auto-deleted: the format describes durable queues",
            ));
        }

        let mut from_exchanges = bindings.iter().filter(|b| {
            b.destination_type == "queue"
                && b.destination == queue.name
                && topics.iter().any(|t| t.name.as_str() == b.source)
        });
        match from_exchanges.next() {
            Some(binding) => {
                let exchange = exchanges.iter().find(|e| e.name == binding.source);
                let filter = filter(binding, exchange.map(|e| e.kind.as_str()), &mut notes);
                for other in from_exchanges {
                    notes.push(Note::new(
                        &subject,
                        format!(
                            "also bound to \"{}\" with routing key `{}`; a subscription belongs to one topic",
                            other.source, other.routing_key
                        ),
                    ));
                }
                if max_length.is_some() {
                    notes.push(Note::new(
                        &subject,
                        "max-length is not carried over: a subscription has no limits",
                    ));
                }
                if kind != ChannelKind::Queue {
                    notes.push(Note::new(
                        &subject,
                        "a stream bound to an exchange reads as a subscription",
                    ));
                }
                let subscription = Subscription {
                    name: Name::new(&queue.name),
                    filter,
                    retention,
                    consumers: None,
                    dead_letter,
                    delivery,
                    alerts: None,
                };
                let topic = topics
                    .iter_mut()
                    .find(|t| t.name.as_str() == binding.source)
                    .expect("bindings were filtered to known topics");
                topic.subscriptions.push(subscription);
            }
            None => standalone.push(Queue {
                name: Name::new(&queue.name),
                broker: Broker::Rabbitmq,
                kind,
                partitions: None,
                retention,
                consumers: None,
                dead_letter,
                messages: Vec::new(),
                limits: max_length.map(|max_length| Limits {
                    max_message_size: None,
                    max_length: Some(max_length),
                }),
                delivery,
                alerts: None,
            }),
        }
    }

    for binding in bindings.iter().filter(|b| b.destination_type == "exchange") {
        notes.push(Note::new(
            format!(
                "binding \"{}\" → exchange \"{}\"",
                binding.source, binding.destination
            ),
            "exchange-to-exchange bindings are not carried over",
        ));
    }
    for parameter in definitions.parameters.iter().filter(|p| p.vhost == vhost) {
        notes.push(Note::new(
            format!("{} \"{}\"", parameter.component, parameter.name),
            "runtime parameters (shovels, federation) are not carried over",
        ));
    }
    let mut unique = Vec::new();
    for note in notes {
        if !unique.contains(&note) {
            unique.push(note);
        }
    }

    Imported {
        topology: Topology {
            version: FORMAT_VERSION,
            name: Name::new(if vhost == "/" { "rabbitmq" } else { vhost }),
            longest_consumer_outage: None,
            topics,
            queues: standalone,
            messages: Vec::new(),
        },
        notes: unique,
    }
}

/// The queue a queue's dead letters land in: through its dead-letter exchange, the
/// binding whose key the dead-letter routing key matches (the message's own routing key
/// when none is set, which the definitions cannot know).
fn dead_letter_target(
    queue: &QueueDefinition,
    settings: &Settings,
    exchanges: &[&ExchangeDefinition],
    bindings: &[&BindingDefinition],
    notes: &mut Vec<Note>,
) -> Option<String> {
    let exchange_name = settings.str("dead-letter-exchange")?;
    let routing_key = settings.str("dead-letter-routing-key");
    let subject = format!("queue \"{}\"", queue.name);
    if exchange_name.is_empty() {
        // The default exchange routes to the queue named by the routing key.
        return match routing_key {
            Some(key) => Some(key.to_owned()),
            None => {
                notes.push(Note::new(
                    &subject,
                    "dead-letters through the default exchange with each message's own routing key; the dead-letter queue cannot be named",
                ));
                None
            }
        };
    }
    let Some(exchange) = exchanges.iter().find(|e| e.name == exchange_name) else {
        notes.push(Note::new(
            &subject,
            format!("its dead-letter exchange \"{exchange_name}\" is not declared: dead letters are dropped"),
        ));
        return None;
    };
    let candidates: Vec<&str> = bindings
        .iter()
        .filter(|b| b.source == exchange.name && b.destination_type == "queue")
        .filter(|b| match (exchange.kind.as_str(), routing_key) {
            ("fanout" | "headers", _) | (_, None) => true,
            ("topic", Some(key)) => topic_matches(&b.routing_key, key),
            (_, Some(key)) => b.routing_key == key,
        })
        .map(|b| b.destination.as_str())
        .collect();
    match candidates.as_slice() {
        [] => {
            notes.push(Note::new(
                &subject,
                format!("its dead-letter exchange \"{exchange_name}\" routes its dead letters to no queue: they are dropped"),
            ));
            None
        }
        [only] => Some((*only).to_owned()),
        [first, rest @ ..] => {
            notes.push(Note::new(
                &subject,
                format!(
                    "dead letters also go to {}; the format names one dead-letter queue",
                    rest.iter()
                        .map(|q| format!("\"{q}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
            Some((*first).to_owned())
        }
    }
}

/// How long a dead-letter queue keeps messages: its message TTL.
fn dead_letter_retention(
    name: &str,
    queues: &[&QueueDefinition],
    settings: &[Settings],
    notes: &mut Vec<Note>,
) -> Option<Duration> {
    let index = queues.iter().position(|q| q.name == name)?;
    let settings = &settings[index];
    for (key, _, origin) in settings.iter() {
        if key != "message-ttl" && key != "queue-type" {
            notes.push(Note::new(
                format!("queue \"{name}\""),
                format!("{origin} of the dead-letter queue is not carried over"),
            ));
        }
    }
    settings.u64("message-ttl").map(Duration::from_millis)
}

/// AMQP topic matching: `*` is one word, `#` zero or more.
fn topic_matches(pattern: &str, key: &str) -> bool {
    fn go(pattern: &[&str], key: &[&str]) -> bool {
        match pattern.split_first() {
            None => key.is_empty(),
            Some((&"#", rest)) => (0..=key.len()).any(|skip| go(rest, &key[skip..])),
            Some((word, rest)) => key
                .split_first()
                .is_some_and(|(k, krest)| (*word == "*" || word == k) && go(rest, krest)),
        }
    }
    let pattern: Vec<&str> = pattern.split('.').collect();
    let key: Vec<&str> = key.split('.').collect();
    go(&pattern, &key)
}

/// A binding's routing key as a subscription filter, where the exchange type gives it a
/// meaning the filter can carry.
fn filter(
    binding: &BindingDefinition,
    kind: Option<&str>,
    notes: &mut Vec<Note>,
) -> Option<String> {
    let subject = format!(
        "binding \"{}\" → \"{}\"",
        binding.source, binding.destination
    );
    match kind {
        Some("topic") if binding.routing_key == "#" => None,
        Some("topic" | "direct") if !binding.routing_key.is_empty() => {
            Some(binding.routing_key.clone())
        }
        Some("fanout") => None,
        Some("headers") => {
            notes.push(Note::new(
                subject,
                format!(
                    "header match {} is not carried over",
                    Value::Object(binding.arguments.clone())
                ),
            ));
            None
        }
        _ => {
            notes.push(Note::new(
                subject,
                "the empty routing key is not carried over as a filter",
            ));
            None
        }
    }
}

/// Reads a queue's settings into the design, remembering which it used so that the rest
/// are noted.
struct Read<'a> {
    subject: &'a str,
    settings: &'a Settings,
    notes: &'a mut Vec<Note>,
}

impl<'a> Read<'a> {
    fn new(subject: &'a str, settings: &'a Settings, notes: &'a mut Vec<Note>) -> Self {
        Self {
            subject,
            settings,
            notes,
        }
    }

    fn u64(&mut self, key: &str) -> Option<u64> {
        let value = self.settings.get(key)?;
        let number = value.as_u64();
        if number.is_none() {
            self.note(key, value, "is not a whole number");
        }
        number
    }

    fn note(&mut self, key: &str, value: &Value, why: &str) {
        self.notes.push(Note::new(
            self.subject,
            format!("{key} {value} {why}; not carried over"),
        ));
    }

    fn kind(&mut self) -> ChannelKind {
        match self.settings.queue_type() {
            "stream" => ChannelKind::Stream,
            "quorum" => {
                self.notes.push(Note::new(
                    self.subject,
                    "a quorum queue (replicated); the format has no replication setting, so it reads as a queue",
                ));
                ChannelKind::Queue
            }
            _ => ChannelKind::Queue,
        }
    }

    fn delivery(&mut self) -> Option<DeliveryPolicy> {
        let ttl = self.u64("message-ttl").map(Duration::from_millis);
        let priorities = self
            .u64("max-priority")
            .map(|p| u8::try_from(p).unwrap_or(u8::MAX));
        // The delivery limit counts redeliveries (returns), so a message is delivered at
        // most one time more than the limit before it is dead-lettered.
        let max_deliveries = self
            .u64("delivery-limit")
            .map(|limit| u32::try_from(limit.saturating_add(1)).unwrap_or(u32::MAX));
        let exclusive = self.settings.get("single-active-consumer") == Some(&Value::Bool(true));
        if ttl.is_none() && priorities.is_none() && max_deliveries.is_none() && !exclusive {
            return None;
        }
        Some(DeliveryPolicy {
            max_deliveries,
            retry: None,
            ordering: exclusive.then_some(Ordering {
                mode: OrderingMode::Exclusive,
                park_failed_keys: false,
            }),
            dedup_window: None,
            ttl,
            priorities,
        })
    }

    /// A stream's `max-age`: `7D`, `12h`, `30m` (units Y, M, D, h, m, s).
    fn duration_text(&mut self, key: &str) -> Option<Duration> {
        let value = self.settings.get(key)?;
        let text = value.as_str().unwrap_or_default();
        let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        let seconds = match &text[digits.len()..] {
            "Y" => 365 * 86_400,
            "M" => 30 * 86_400,
            "D" => 86_400,
            "h" => 3600,
            "m" => 60,
            "s" => 1,
            _ => 0,
        };
        match digits.parse::<u64>() {
            Ok(n) if seconds > 0 => Some(Duration::from_secs(n * seconds)),
            _ => {
                let value = value.clone();
                self.note(key, &value, "is not a duration RabbitMQ writes");
                None
            }
        }
    }

    /// Notes every setting the design did not read.
    fn rest(&mut self) {
        let settings = self.settings;
        for (key, value, origin) in settings.iter() {
            let read = READ.contains(&key)
                && !(key == "overflow" && value.as_str() != Some("drop-head"))
                && !(key == "single-active-consumer" && value != &Value::Bool(true));
            if !read {
                self.notes.push(Note::new(
                    self.subject,
                    format!("{origin} = {value} is not carried over"),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::topic_matches;

    #[test]
    fn topic_patterns_match_like_amqp() {
        assert!(topic_matches("orders.*", "orders.placed"));
        assert!(!topic_matches("orders.*", "orders.placed.eu"));
        assert!(topic_matches("orders.#", "orders"));
        assert!(topic_matches("#.failed", "a.b.failed"));
        assert!(!topic_matches("orders.placed", "orders.paid"));
    }
}
