//! A queue's settings (arguments and policy) read into the design's fields; whatever is
//! not read is noted by `rest`.

use serde_json::Value;

use super::policy::Settings;
use crate::format::{ChannelKind, DeliveryPolicy, Duration, Ordering, OrderingMode};
use crate::imported::Note;

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

/// Reads a queue's settings into the design, remembering which it used so that the rest
/// are noted.
pub struct Read<'a> {
    subject: &'a str,
    settings: &'a Settings,
    pub notes: &'a mut Vec<Note>,
}

impl<'a> Read<'a> {
    pub fn new(subject: &'a str, settings: &'a Settings, notes: &'a mut Vec<Note>) -> Self {
        Self {
            subject,
            settings,
            notes,
        }
    }

    pub fn u64(&mut self, key: &str) -> Option<u64> {
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

    pub fn kind(&mut self) -> ChannelKind {
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

    pub fn delivery(&mut self) -> Option<DeliveryPolicy> {
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
    pub fn duration_text(&mut self, key: &str) -> Option<Duration> {
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
    pub fn rest(&mut self) {
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
