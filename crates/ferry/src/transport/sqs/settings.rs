//! A queue's or subscription's declaration, kept with its SQS queue as tags.
//!
//! SQS keeps the lease (VisibilityTimeout) and max deliveries (the RedrivePolicy's
//! maxReceiveCount) itself, but not the backoff, the delay bound or the dedup window, which
//! every process consuming the queue needs and a second declaration is compared against.
//! Tags go with the queue, are read by any connection, and SQS limits their values to
//! letters, digits and `_.:/=+-@` — so one tag per field, each a number or a word, rather
//! than one JSON document.

use std::collections::HashMap;
use std::time::Duration;

use crate::declared::Declared;
use crate::spec::{Backoff, DeliveryPolicy, KeyOrdering};

const PREFIX: &str = "ferry.";

/// What a source was declared with.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Settings {
    /// `queue` or `subscription`.
    pub kind: String,
    /// The Ferry name (the SQS name is its escape).
    pub name: String,
    /// A subscription's topic.
    pub topic: Option<String>,
    pub max_deliveries: u32,
    pub backoff: Backoff,
    pub dead_letter: bool,
    pub lease: Duration,
    pub max_delay: Duration,
    pub ordering: bool,
    pub dedup_window: Option<Duration>,
}

impl Settings {
    pub fn new(
        kind: &str,
        name: &str,
        topic: Option<&str>,
        delivery: &DeliveryPolicy,
        dedup_window: Option<Duration>,
    ) -> Settings {
        Settings {
            kind: kind.to_owned(),
            name: name.to_owned(),
            topic: topic.map(str::to_owned),
            max_deliveries: delivery.max_deliveries,
            backoff: delivery.backoff,
            dead_letter: delivery.dead_letter,
            lease: delivery.lease,
            max_delay: delivery.max_delay,
            ordering: delivery.ordering == KeyOrdering::PerKey,
            dedup_window,
        }
    }

    /// Whether the source is an SQS FIFO queue.
    pub fn fifo(&self) -> bool {
        self.ordering || self.dedup_window.is_some()
    }

    /// The fields compared when a source is declared again, in the SDK's words. TTL,
    /// priorities and the length limit are refused on this transport, so never differ.
    pub fn declared(&self) -> Declared {
        let b = &self.backoff;
        Declared::default()
            .max_deliveries(self.max_deliveries)
            .backoff(b.base, b.cap, b.multiplier, b.jitter)
            .dead_letter(self.dead_letter)
            .lease(self.lease)
            .max_delay(self.max_delay)
            .ordering(self.ordering)
            .dedup_window(self.dedup_window)
    }

    pub fn to_tags(&self) -> HashMap<String, String> {
        let ms = |d: Duration| (d.as_millis() as u64).to_string();
        let mut tags = HashMap::new();
        let mut put = |k: &str, v: String| {
            tags.insert(format!("{PREFIX}{k}"), v);
        };
        put("kind", self.kind.clone());
        put("name", self.name.clone());
        if let Some(topic) = &self.topic {
            put("topic", topic.clone());
        }
        put("max_deliveries", self.max_deliveries.to_string());
        put("backoff_base_ms", ms(self.backoff.base));
        put("backoff_cap_ms", ms(self.backoff.cap));
        put("backoff_multiplier", self.backoff.multiplier.to_string());
        put("backoff_jitter", self.backoff.jitter.to_string());
        put("dead_letter", self.dead_letter.to_string());
        put("lease_ms", ms(self.lease));
        put("max_delay_ms", ms(self.max_delay));
        put(
            "ordering",
            if self.ordering { "per-key" } else { "none" }.into(),
        );
        if let Some(window) = self.dedup_window {
            put("dedup_window_ms", ms(window));
        }
        tags
    }

    /// The settings in `tags`; `None` when they are not a Ferry declaration (a queue made
    /// by someone else, or tags edited by hand).
    pub fn from_tags(tags: &HashMap<String, String>) -> Option<Settings> {
        let get = |k: &str| tags.get(&format!("{PREFIX}{k}"));
        let num = |k: &str| get(k)?.parse::<u64>().ok();
        let float = |k: &str| get(k)?.parse::<f64>().ok();
        let ms = |k: &str| num(k).map(Duration::from_millis);
        Some(Settings {
            kind: get("kind")?.clone(),
            name: get("name")?.clone(),
            topic: get("topic").cloned(),
            max_deliveries: num("max_deliveries")?.try_into().ok()?,
            backoff: Backoff {
                base: ms("backoff_base_ms")?,
                cap: ms("backoff_cap_ms")?,
                multiplier: float("backoff_multiplier")?,
                jitter: float("backoff_jitter")?,
            },
            dead_letter: get("dead_letter")?.parse().ok()?,
            lease: ms("lease_ms")?,
            max_delay: ms("max_delay_ms")?,
            ordering: get("ordering")? == "per-key",
            dedup_window: ms("dedup_window_ms"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_survive_a_trip_through_tags_in_characters_sqs_allows() {
        let mut delivery = DeliveryPolicy {
            max_deliveries: 7,
            ordering: KeyOrdering::PerKey,
            ..DeliveryPolicy::default()
        };
        delivery.backoff.jitter = 0.1;
        let s = Settings::new(
            "subscription",
            "a.b",
            Some("t"),
            &delivery,
            Some(Duration::from_secs(60)),
        );
        let back = Settings::from_tags(&s.to_tags()).unwrap();
        assert_eq!(back, s);
        assert!(back.fifo());
        for (k, v) in s.to_tags() {
            assert!(
                format!("{k}{v}")
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_.:/=+-@".contains(c)),
                "{k}={v} holds a character SQS tags refuse"
            );
        }
        assert_eq!(Settings::from_tags(&HashMap::new()), None);
    }
}
