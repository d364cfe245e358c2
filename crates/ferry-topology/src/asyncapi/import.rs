//! An AsyncAPI 3.0 document as a topology: channels become topics, queues and
//! subscriptions; component messages (and messages written inline in channels) become
//! message types.

use serde_json::{Map, Value};

use super::Error;
use super::bindings::{self, Role};
use super::derive;
use super::document::{self, Source, resolve};
use super::extension;
use crate::Topology;
use crate::format::{MessageType, Name, Queue, Subscription, Topic};
use crate::imported::{Imported, Note};

pub fn import(text: &str) -> Result<Imported, Error> {
    let Source {
        doc,
        channel_order,
        message_order,
    } = document::parse(text)?;
    let root = doc.get(extension::KEY).cloned().unwrap_or(Value::Null);
    // The order `x-ferry` records, then anything added to the document by hand since.
    let order = |key: &str, written: Vec<String>| -> Vec<String> {
        let mut keys: Vec<String> = root
            .get(key)
            .and_then(Value::as_array)
            .map(|keys| {
                keys.iter()
                    .filter_map(|k| k.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        for key in written {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    };
    let channel_order = order("channels", channel_order);
    let message_order = order("messages", message_order);
    let mut notes = Vec::new();

    let name = doc
        .pointer("/info/title")
        .and_then(Value::as_str)
        .unwrap_or("asyncapi")
        .to_owned();
    let longest_consumer_outage = match root.get("longest_consumer_outage") {
        Some(value) => Some(from_value(
            value.clone(),
            "x-ferry longest_consumer_outage",
        )?),
        None => None,
    };

    let mut topics: Vec<Topic> = Vec::new();
    let mut queues: Vec<Queue> = Vec::new();
    let mut subscriptions: Vec<(String, Subscription)> = Vec::new();
    for key in &channel_order {
        let Some(channel) = doc.pointer(&format!("/channels/{}", document::pointer_segment(key)))
        else {
            return Err(Error::Invalid {
                at: "x-ferry channels".into(),
                message: format!("channel `{key}` is listed but not in `channels`"),
            });
        };
        let channel = resolve(&doc, channel)?;
        let at = format!("channel `{key}`");
        let extension = channel.get(extension::KEY).cloned().unwrap_or(Value::Null);
        let role = role(&doc, channel, &extension, &topics, &at)?;
        let mut unmapped = Vec::new();
        let mut fields = Value::Object(derive::channel(&doc, key, role, &mut unmapped)?);
        if !extension.is_null() {
            extension::overlay(&mut fields, &extension);
        }
        let topic = fields
            .as_object_mut()
            .and_then(|f| {
                f.remove("role");
                f.remove("topic")
            })
            .and_then(|t| t.as_str().map(str::to_owned));
        for what in unmapped {
            notes.push(Note::new(&at, format!("{what} is not carried over")));
        }
        match role {
            Role::Topic => topics.push(from_value(fields, &at)?),
            Role::Queue => queues.push(from_value(fields, &at)?),
            Role::Subscription { .. } => {
                subscriptions.push((topic.unwrap_or_default(), from_value(fields, &at)?));
            }
        }
    }
    for (topic_name, subscription) in subscriptions {
        let topic = topics
            .iter_mut()
            .find(|t| t.name.as_str() == topic_name)
            .ok_or_else(|| Error::Invalid {
                at: format!("channel `{}`", subscription.name),
                message: format!("its topic `{topic_name}` is not a channel of the document"),
            })?;
        topic.subscriptions.push(subscription);
    }

    let messages = messages(&doc, &message_order, &mut notes)?;
    let topology = Topology {
        version: crate::format::FORMAT_VERSION,
        name: Name::new(name),
        longest_consumer_outage,
        topics,
        queues,
        messages,
    };
    Ok(Imported { topology, notes })
}

/// The channel's role: `x-ferry` says it, or its bindings do.
fn role(
    doc: &Value,
    channel: &Value,
    extension: &Value,
    topics: &[Topic],
    at: &str,
) -> Result<Role, Error> {
    let bindings = channel
        .get("bindings")
        .map(|b| resolve(doc, b))
        .transpose()?;
    match extension.get("role").and_then(Value::as_str) {
        None => Ok(bindings::role(bindings)),
        Some("topic") => Ok(Role::Topic),
        Some("queue") => Ok(Role::Queue),
        Some("subscription") => {
            let topic = extension.get("topic").and_then(Value::as_str);
            let parent = topics
                .iter()
                .find(|t| Some(t.name.as_str()) == topic)
                .map(|t| t.broker)
                .ok_or_else(|| Error::Invalid {
                    at: at.to_owned(),
                    message: format!(
                        "a subscription of `{}`, which is not a topic written before it",
                        topic.unwrap_or("(no topic)")
                    ),
                })?;
            Ok(Role::Subscription { parent })
        }
        Some(other) => Err(Error::Invalid {
            at: at.to_owned(),
            message: format!("x-ferry role `{other}` is not topic, queue or subscription"),
        }),
    }
}

/// The component messages in order, then messages written inline in channels that no
/// component defines.
fn messages(
    doc: &Value,
    order: &[String],
    notes: &mut Vec<Note>,
) -> Result<Vec<MessageType>, Error> {
    let mut out: Vec<MessageType> = Vec::new();
    for key in order {
        let at = format!("message `{key}`");
        let pointer = format!("/components/messages/{}", document::pointer_segment(key));
        let Some(message) = doc.pointer(&pointer) else {
            return Err(Error::Invalid {
                at: "x-ferry messages".into(),
                message: format!("message `{key}` is listed but not in `components.messages`"),
            });
        };
        out.push(message_type(doc, resolve(doc, message)?, key, &at, notes)?);
    }
    let empty = Map::new();
    let channels = doc
        .get("channels")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for (channel_key, channel) in channels {
        let channel = resolve(doc, channel)?;
        let Some(inline) = channel.get("messages").and_then(Value::as_object) else {
            continue;
        };
        for (id, message) in inline {
            let is_component = message
                .get("$ref")
                .and_then(Value::as_str)
                .is_some_and(|r| r.starts_with("#/components/messages/"));
            if is_component {
                continue;
            }
            let at = format!("channel `{channel_key}` message `{id}`");
            let message_type = message_type(doc, resolve(doc, message)?, id, &at, notes)?;
            if !out
                .iter()
                .any(|m| m.name.as_str() == message_type.name.as_str())
            {
                out.push(message_type);
            }
        }
    }
    Ok(out)
}

fn message_type(
    doc: &Value,
    message: &Value,
    key: &str,
    at: &str,
    notes: &mut Vec<Note>,
) -> Result<MessageType, Error> {
    let mut unmapped = Vec::new();
    let mut fields = Value::Object(derive::message(doc, message, key, &mut unmapped)?);
    if let Some(extension) = message.get(extension::KEY) {
        extension::overlay(&mut fields, extension);
    }
    for what in unmapped {
        notes.push(Note::new(at, format!("{what} is not carried over")));
    }
    from_value(fields, at)
}

fn from_value<T: serde::de::DeserializeOwned>(value: Value, at: &str) -> Result<T, Error> {
    serde_json::from_value(value).map_err(|error| Error::Invalid {
        at: at.to_owned(),
        message: error.to_string(),
    })
}
