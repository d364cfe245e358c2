//! What an AsyncAPI document's own fields say about a channel or a message, in the shape
//! of the topology file (field names and units as the file writes them). The import
//! lays `x-ferry` over this; the export keeps in `x-ferry` what this does not say.

use serde_json::{Map, Value, json};

use super::Error;
use super::bindings::{self, Role};
use super::document::{pointer_segment, reference_name, resolve};
use super::payload;

/// The fields a channel of each role has in the topology file.
fn fields_of(role: Role) -> &'static [&'static str] {
    match role {
        Role::Topic => &[
            "name",
            "broker",
            "type",
            "partitions",
            "retention",
            "messages",
            "limits",
            "consumer_groups",
        ],
        Role::Queue => &[
            "name",
            "broker",
            "type",
            "partitions",
            "retention",
            "consumers",
            "dead_letter",
            "messages",
            "limits",
            "delivery",
            "alerts",
        ],
        Role::Subscription { .. } => &[
            "name",
            "filter",
            "retention",
            "consumers",
            "dead_letter",
            "delivery",
            "alerts",
        ],
    }
}

/// The channel `key` of `doc` as a channel of `role`. What its bindings say that the
/// format cannot hold is added to `unmapped`.
pub fn channel(
    doc: &Value,
    key: &str,
    role: Role,
    unmapped: &mut Vec<String>,
) -> Result<Map<String, Value>, Error> {
    let channel = resolve(doc, &doc["channels"][key])?;
    let mut out = Map::new();
    let address = channel
        .get("address")
        .and_then(Value::as_str)
        .unwrap_or(key);
    out.insert("name".into(), json!(address));
    if let Some(bindings) = channel.get("bindings") {
        let bindings = resolve(doc, bindings)?;
        bindings::read(bindings, role, &mut out, unmapped);
    }
    let receivers = operations_on(doc, key, "receive")?;
    if !matches!(role, Role::Subscription { .. }) {
        if !out.contains_key("broker") {
            let nats = receivers
                .iter()
                .any(|op| op.pointer("/bindings/nats").is_some());
            out.insert("broker".into(), json!(if nats { "nats" } else { "ferry" }));
        }
        if !out.contains_key("type") {
            out.insert("type".into(), json!(role.name()));
        }
        let names = message_names(doc, channel)?;
        if !names.is_empty() {
            out.insert("messages".into(), json!(names));
        }
    }
    if role == Role::Topic {
        let groups: Vec<Value> = receivers
            .iter()
            .filter_map(|op| {
                let group = op.pointer("/bindings/kafka/groupId")?;
                let name = group
                    .get("const")
                    .or_else(|| group.get("enum")?.get(0))?
                    .as_str()?;
                Some(json!({ "name": name }))
            })
            .collect();
        if !groups.is_empty() {
            out.insert("consumer_groups".into(), Value::Array(groups));
        }
    }
    let allowed = fields_of(role);
    out.retain(|key, _| allowed.contains(&key.as_str()));
    Ok(out)
}

/// The names of the messages a channel carries, as its `messages` map lists them.
fn message_names(doc: &Value, channel: &Value) -> Result<Vec<String>, Error> {
    let Some(messages) = channel.get("messages").and_then(Value::as_object) else {
        return Ok(Vec::new());
    };
    let mut names = Vec::new();
    for (id, message) in messages {
        let resolved = resolve(doc, message)?;
        let name = resolved
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| reference_name(message))
            .unwrap_or_else(|| id.clone());
        if !names.contains(&name) {
            names.push(name);
        }
    }
    Ok(names)
}

/// The operations (resolved) of `action` on the channel `key`.
fn operations_on<'a>(doc: &'a Value, key: &str, action: &str) -> Result<Vec<&'a Value>, Error> {
    let target = format!("#/channels/{}", pointer_segment(key));
    let mut found = Vec::new();
    if let Some(operations) = doc.get("operations").and_then(Value::as_object) {
        for operation in operations.values() {
            let operation = resolve(doc, operation)?;
            let on_channel =
                operation.pointer("/channel/$ref").and_then(Value::as_str) == Some(target.as_str());
            if on_channel && operation.get("action").and_then(Value::as_str) == Some(action) {
                found.push(operation);
            }
        }
    }
    Ok(found)
}

/// A message (already resolved) as a message type of the topology file. `fallback` names
/// it when it has no `name`.
pub fn message(
    doc: &Value,
    message: &Value,
    fallback: &str,
    unmapped: &mut Vec<String>,
) -> Result<Map<String, Value>, Error> {
    let mut out = Map::new();
    let name = message
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or(fallback);
    out.insert("name".into(), json!(name));
    if let Some(payload) = message.get("payload") {
        let resolver = |value: &Value| resolve(doc, value).cloned();
        let read = payload::read(payload, &resolver)?;
        if let Some(format) = read.format {
            out.insert("schema".into(), json!({ "format": format }));
        }
        if !read.fields.is_empty() {
            out.insert("payload".into(), Value::Array(read.fields));
        }
        unmapped.extend(read.unread);
    }
    let location = message
        .get("correlationId")
        .map(|c| resolve(doc, c))
        .transpose()?
        .and_then(|c| c.get("location"))
        .and_then(Value::as_str);
    if let Some(field) = location.and_then(|l| l.strip_prefix("$message.payload#/"))
        && !field.is_empty()
        && !field.contains('/')
    {
        out.insert("key".into(), json!(field));
    }
    for key in ["headers", "traits", "bindings"] {
        if message.get(key).is_some() {
            unmapped.push(format!("message {key}"));
        }
    }
    Ok(out)
}
