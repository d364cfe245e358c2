//! What a queue is configured with: its `x-` arguments and the one policy that applies to
//! it, combined the way RabbitMQ combines them.
//!
//! RabbitMQ applies at most one policy to a queue: among those of its vhost whose pattern
//! matches the queue's name and whose `apply-to` covers the queue's type, the one of
//! highest priority. Where an argument and the policy both set a limit (TTL, lengths,
//! expiry, delivery limit) the lower one wins; for anything else (the dead-letter
//! exchange and routing key) the argument wins.

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::Value;

use super::definitions::{PolicyDefinition, QueueDefinition};
use crate::imported::Note;

/// Keys where RabbitMQ enforces the lower of the argument and the policy.
const LOWER_WINS: [&str; 5] = [
    "message-ttl",
    "max-length",
    "max-length-bytes",
    "expires",
    "delivery-limit",
];

/// A queue's settings by key without the `x-` prefix (`message-ttl`,
/// `dead-letter-exchange`), with where each came from.
#[derive(Debug, Default)]
pub struct Settings {
    values: BTreeMap<String, (Value, String)>,
}

impl Settings {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.values.get(key).map(|(value, _)| value)
    }

    pub fn u64(&self, key: &str) -> Option<u64> {
        self.get(key).and_then(Value::as_u64)
    }

    pub fn str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    /// Every setting with its origin (`argument x-max-length`, `policy "limits"
    /// max-length`).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value, &str)> {
        self.values
            .iter()
            .map(|(key, (value, origin))| (key.as_str(), value, origin.as_str()))
    }

    pub fn queue_type(&self) -> &str {
        self.str("queue-type").unwrap_or("classic")
    }
}

/// The settings of `queue` under `policies` (all of the definitions' policies).
pub fn settings(
    queue: &QueueDefinition,
    policies: &[PolicyDefinition],
    notes: &mut Vec<Note>,
) -> Settings {
    let mut settings = Settings::default();
    for (key, value) in &queue.arguments {
        let key = key.strip_prefix("x-").unwrap_or(key);
        settings
            .values
            .insert(key.to_owned(), (value.clone(), format!("argument x-{key}")));
    }
    let Some(policy) = applying(queue, settings.queue_type(), policies, notes) else {
        return settings;
    };
    for (key, value) in &policy.definition {
        let origin = format!("policy \"{}\" {key}", policy.name);
        match settings.values.get_mut(key.as_str()) {
            None => {
                settings.values.insert(key.clone(), (value.clone(), origin));
            }
            Some((current, from)) if LOWER_WINS.contains(&key.as_str()) => {
                if let (Some(set), Some(policy_value)) = (current.as_u64(), value.as_u64())
                    && policy_value < set
                {
                    *current = value.clone();
                    *from = origin;
                }
            }
            Some(_) => {}
        }
    }
    settings
}

fn applying<'a>(
    queue: &QueueDefinition,
    queue_type: &str,
    policies: &'a [PolicyDefinition],
    notes: &mut Vec<Note>,
) -> Option<&'a PolicyDefinition> {
    let mut best: Option<&PolicyDefinition> = None;
    for policy in policies.iter().filter(|p| p.vhost == queue.vhost) {
        let covers = match policy.apply_to.as_str() {
            "all" | "queues" => true,
            "classic_queues" => queue_type == "classic",
            "quorum_queues" => queue_type == "quorum",
            "streams" => queue_type == "stream",
            _ => false,
        };
        if !covers {
            continue;
        }
        // RabbitMQ's patterns are PCRE; the regex crate reads the common subset. A pattern
        // it cannot read is reported rather than guessed at.
        let matches = match Regex::new(&policy.pattern) {
            Ok(pattern) => pattern.is_match(&queue.name),
            Err(_) => {
                notes.push(Note::new(
                    format!("policy \"{}\"", policy.name),
                    format!(
                        "pattern `{}` could not be read; the policy is not applied",
                        policy.pattern
                    ),
                ));
                false
            }
        };
        if matches && best.is_none_or(|b| policy.priority > b.priority) {
            best = Some(policy);
        }
    }
    best
}
