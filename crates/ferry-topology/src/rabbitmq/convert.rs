//! One vhost's definitions as a topology: exchanges become topics, queues bound to an
//! exchange become its subscriptions (the binding's routing key their filter), other
//! queues stay queues, and each queue's dead-letter queue is found by following its
//! dead-letter exchange and routing key through that exchange's bindings.

use serde_json::Value;

use super::arguments::Read;
use super::dead_letter;
use super::definitions::{BindingDefinition, Definitions, ExchangeDefinition, QueueDefinition};
use super::policy::{self, Settings};
use crate::format::{Broker, ChannelKind, DeadLetter, Limits, Name, Queue, Subscription, Topic};
use crate::imported::{Imported, Note};
use crate::{Topology, format::FORMAT_VERSION};

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
        let target = dead_letter::target(queue, settings, &exchanges, &bindings, &mut notes);
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
        if !exchange.durable || exchange.auto_delete {
            notes.push(Note::new(
                &subject,
                "not durable or auto-deleted: the format describes durable exchanges",
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
            retention: dead_letter::retention(name, &queues, &all_settings, read.notes),
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
