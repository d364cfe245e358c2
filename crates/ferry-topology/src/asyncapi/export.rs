//! A topology as an AsyncAPI 3.0.0 document.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::bindings::{self, Facts, Role};
use super::document::{pointer_segment, unique_key};
use super::{derive, extension, payload};
use crate::Topology;
use crate::format::{Broker, Consumers, Limits, Name};

/// One channel to write: what it is and its settings as the topology file has them.
struct Channel<'a> {
    key: String,
    role: Role,
    facts: Facts<'a>,
    messages: &'a [Name],
    /// The topic a subscription belongs to.
    topic: Option<&'a str>,
    consumers: Option<&'a Consumers>,
    /// The consumer groups of a topic.
    groups: Vec<&'a str>,
    /// The channel as the topology file writes it (the JSON of its struct).
    full: Value,
}

pub fn document(topology: &Topology) -> Value {
    let mut doc = json!({
        "asyncapi": "3.0.0",
        "info": {
            "title": topology.name.as_str(),
            "version": format!("{}.0.0", crate::format::FORMAT_VERSION),
            "description": format!("The messaging design `{}`, exported from its Ferry topology file.", topology.name),
        },
        "channels": {},
        "operations": {},
        "components": {"messages": {}},
    });

    let mut message_keys = Vec::new();
    let mut key_of_message: HashMap<&str, String> = HashMap::new();
    for message in &topology.messages {
        let key = unique_key(message.name.as_str(), &mut message_keys);
        key_of_message
            .entry(message.name.as_str())
            .or_insert_with(|| key.clone());
        doc["components"]["messages"][&key] = message_object(message);
    }

    let channels = channels(topology);
    for channel in &channels {
        write_channel(&mut doc, channel, &key_of_message);
    }

    // What the document's own fields do not say goes to `x-ferry`, computed against what
    // an import reads from those fields (see `extension`). Reading cannot fail here: the
    // export writes only references to channels and messages it has just written.
    for channel in &channels {
        let mut ignored = Vec::new();
        let derived = derive::channel(&doc, &channel.key, channel.role, &mut ignored)
            .expect("an exported document resolves");
        let mut full = channel.full.clone();
        let role_from_bindings = bindings::role(doc["channels"][&channel.key].get("bindings"));
        let role_differs =
            std::mem::discriminant(&role_from_bindings) != std::mem::discriminant(&channel.role);
        if let Some(object) = full.as_object_mut() {
            if role_differs {
                object.insert("role".into(), json!(channel.role.name()));
            }
            if let Some(topic) = channel.topic {
                object.insert("topic".into(), json!(topic));
            }
        }
        if let Some(diff) = extension::difference(&full, &Value::Object(derived)) {
            doc["channels"][&channel.key][extension::KEY] = diff;
        }
    }
    for (message, key) in topology.messages.iter().zip(&message_keys) {
        let mut ignored = Vec::new();
        let object = doc["components"]["messages"][key].clone();
        let derived = derive::message(&doc, &object, key, &mut ignored)
            .expect("an exported document resolves");
        let full = serde_json::to_value(message).expect("a message type serializes");
        if let Some(diff) = extension::difference(&full, &Value::Object(derived)) {
            doc["components"]["messages"][key][extension::KEY] = diff;
        }
    }

    // The order of channels and messages: a JSON object does not keep it.
    let mut root = Map::new();
    if let Some(outage) = topology.longest_consumer_outage {
        root.insert("longest_consumer_outage".into(), json!(outage.to_string()));
    }
    root.insert(
        "channels".into(),
        json!(channels.iter().map(|c| &c.key).collect::<Vec<_>>()),
    );
    root.insert("messages".into(), json!(message_keys));
    doc[extension::KEY] = Value::Object(root);
    doc
}

fn max_size(limits: Option<&Limits>) -> Option<u64> {
    limits?.max_message_size.map(|s| s.as_bytes())
}

/// Every channel in the order the file has them: each topic followed by its
/// subscriptions, then the queues.
fn channels(topology: &Topology) -> Vec<Channel<'_>> {
    let mut keys = Vec::new();
    let mut out = Vec::new();
    for topic in &topology.topics {
        let mut full = serde_json::to_value(topic).expect("a topic serializes");
        if let Some(object) = full.as_object_mut() {
            object.remove("subscriptions");
        }
        out.push(Channel {
            key: unique_key(topic.name.as_str(), &mut keys),
            role: Role::Topic,
            facts: Facts {
                name: topic.name.as_str(),
                role: Role::Topic,
                broker: Some(topic.broker),
                kind: Some(topic.kind),
                partitions: topic.partitions,
                retention: topic.retention,
                max_message_size: max_size(topic.limits.as_ref()),
                dead_letter: None,
                max_deliveries: None,
            },
            messages: &topic.messages,
            topic: None,
            consumers: None,
            groups: topic
                .consumer_groups
                .iter()
                .map(|g| g.name.as_str())
                .collect(),
            full,
        });
        for subscription in &topic.subscriptions {
            let role = Role::Subscription {
                parent: topic.broker,
            };
            out.push(Channel {
                key: unique_key(subscription.name.as_str(), &mut keys),
                role,
                facts: Facts {
                    name: subscription.name.as_str(),
                    role,
                    broker: None,
                    kind: None,
                    partitions: None,
                    retention: subscription.retention,
                    max_message_size: None,
                    dead_letter: subscription.dead_letter.as_ref(),
                    max_deliveries: subscription
                        .delivery
                        .as_ref()
                        .and_then(|d| d.max_deliveries),
                },
                messages: &topic.messages,
                topic: Some(topic.name.as_str()),
                consumers: subscription.consumers.as_ref(),
                groups: Vec::new(),
                full: serde_json::to_value(subscription).expect("a subscription serializes"),
            });
        }
    }
    for queue in &topology.queues {
        out.push(Channel {
            key: unique_key(queue.name.as_str(), &mut keys),
            role: Role::Queue,
            facts: Facts {
                name: queue.name.as_str(),
                role: Role::Queue,
                broker: Some(queue.broker),
                kind: Some(queue.kind),
                partitions: queue.partitions,
                retention: queue.retention,
                max_message_size: max_size(queue.limits.as_ref()),
                dead_letter: queue.dead_letter.as_ref(),
                max_deliveries: queue.delivery.as_ref().and_then(|d| d.max_deliveries),
            },
            messages: &queue.messages,
            topic: None,
            consumers: queue.consumers.as_ref(),
            groups: Vec::new(),
            full: serde_json::to_value(queue).expect("a queue serializes"),
        });
    }
    out
}

fn write_channel(doc: &mut Value, channel: &Channel, key_of_message: &HashMap<&str, String>) {
    let key = &channel.key;
    let mut messages = Map::new();
    for name in channel.messages {
        // A message the file names but does not define has no component to refer to; the
        // channel's `x-ferry` keeps its name.
        if let Some(message_key) = key_of_message.get(name.as_str()) {
            messages.insert(
                message_key.clone(),
                json!({"$ref": format!("#/components/messages/{}", pointer_segment(message_key))}),
            );
        }
    }
    let refs: Vec<Value> = messages
        .keys()
        .map(|m| {
            json!({"$ref": format!("#/channels/{}/messages/{}", pointer_segment(key), pointer_segment(m))})
        })
        .collect();
    let mut object = json!({"address": channel.facts.name, "messages": messages});
    if let Some(bindings) = bindings::write(&channel.facts) {
        object["bindings"] = bindings;
    }
    doc["channels"][key] = object;

    let channel_ref = json!({"$ref": format!("#/channels/{}", pointer_segment(key))});
    let operation = |action: &str, summary: String| json!({"action": action, "channel": channel_ref, "messages": refs, "summary": summary});
    let name = channel.facts.name;
    let broker = match channel.role {
        Role::Subscription { parent } => parent,
        _ => channel.facts.broker.unwrap_or(Broker::Ferry),
    };
    if !matches!(channel.role, Role::Subscription { .. }) {
        doc["operations"][format!("send-{key}")] =
            operation("send", format!("Publish to `{name}`."));
    }
    if channel.role != Role::Topic {
        let consumers = channel.consumers.map(|c| c.name.as_str());
        let summary = match consumers {
            Some(consumers) => format!("`{consumers}` consumes `{name}`."),
            None => format!("Consume `{name}`."),
        };
        let mut receive = operation("receive", summary);
        if let (Broker::Nats, Some(consumers)) = (broker, consumers) {
            receive["bindings"] = json!({"nats": {"queue": consumers, "bindingVersion": "0.1.0"}});
        }
        doc["operations"][format!("receive-{key}")] = receive;
    }
    for group in &channel.groups {
        let mut receive = operation(
            "receive",
            format!("Consumer group `{group}` reads `{name}`."),
        );
        if broker == Broker::Kafka {
            receive["bindings"] = json!({"kafka": {
                "groupId": {"type": "string", "enum": [group]},
                "bindingVersion": "0.5.0",
            }});
        }
        let id = unique_key(&format!("receive-{key}-{group}"), &mut Vec::new());
        doc["operations"][id] = receive;
    }
}

/// A message type as a component message; its key field becomes the correlation id.
fn message_object(message: &crate::format::MessageType) -> Value {
    let format = message.schema.as_ref().map(|s| s.format);
    let mut object = json!({
        "name": message.name.as_str(),
        "contentType": payload::content_type(format),
        "payload": payload::to_payload(message),
    });
    if let Some(key) = &message.key {
        object["correlationId"] = json!({
            "description": "The partition and ordering key.",
            "location": format!("$message.payload#/{key}"),
        });
    }
    object
}
