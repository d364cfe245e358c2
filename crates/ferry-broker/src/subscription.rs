//! Subscriptions: a named, durable view of a topic with full queue semantics — the fan-out
//! half of pub/sub. The engine's side is in `engine/subscriptions.rs`; this module holds
//! what needs no engine: the [`SubscriptionSpec`], its stored form, and the *reference
//! record* a subscription keeps per message.
//!
//! **A subscription is a queue whose messages stay in the topic.** It lives in the queue
//! namespace (receive, ack, nack, reject, extend, park, stats, its `<name>.dlq` and redrive
//! all work on it by name) but its log holds, per message that passed its filter, a small
//! reference — the message's id, key, priority, times and dedup id, and where it is in the
//! topic (partition, offset, size) — never the payload or headers (its layout is in
//! `subscription/reference.rs`). Fifty subscriptions of one topic add fifty references per
//! message, not fifty copies.
//!
//! A queue attached to topics (see [`crate::link`]) keeps the same references, with the
//! id of the link they came through; a subscription's own link is id 0.

use std::time::Duration;

use crate::error::{BrokerError, Result};
use crate::filter::Filter;
use crate::name::Name;
use crate::spec::QueueSpec;

mod backlog;
mod reference;

pub use backlog::Backlog;
#[cfg(test)]
pub use reference::text_ref_record;
pub use reference::{TopicRef, decode_record, ref_record};

/// Where a subscription starts in its topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SubscriptionStart {
    /// Messages published after the subscription is created.
    #[default]
    Now,
    /// Every message the topic still keeps, then the new ones.
    Earliest,
}

/// A subscription: which topic, which of its messages, and how they are delivered.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscriptionSpec {
    pub topic: Name,
    pub filter: Filter,
    pub start: SubscriptionStart,
    /// Delivery as for a queue: lease, retry policy, dead-lettering, ordering (shared or
    /// key-shared), priorities, default TTL, durability of its state. Length limits and
    /// deduplication are not available on subscriptions (the topic's retention bounds the
    /// backlog, and its idempotent producers deduplicate at publish): both must be off.
    pub delivery: QueueSpec,
}

impl SubscriptionSpec {
    /// A subscription to `topic` from now, taking everything, delivered with the queue
    /// defaults (deduplication off).
    pub fn new(topic: Name) -> SubscriptionSpec {
        SubscriptionSpec {
            topic,
            filter: Filter::all(),
            start: SubscriptionStart::Now,
            delivery: QueueSpec {
                dedup_window: Duration::ZERO,
                ..QueueSpec::default()
            },
        }
    }

    pub fn validate(&self) -> Result<()> {
        self.delivery.validate()?;
        let limit = &self.delivery.length_limit;
        if limit.max_messages.is_some() || limit.max_bytes.is_some() {
            return Err(BrokerError::InvalidSetting {
                setting: "length_limit",
                problem: "is not available on a subscription; the topic's retention bounds \
                          its backlog"
                    .into(),
            });
        }
        if !self.delivery.dedup_window.is_zero() {
            return Err(BrokerError::InvalidSetting {
                setting: "dedup_window",
                problem: "is not available on a subscription; set it to 0 (a topic's \
                          idempotent producers deduplicate at publish)"
                    .into(),
            });
        }
        Ok(())
    }
}

/// The stored form of what a subscription adds to its queue spec (which is stored as a
/// queue's): `ferry-subscription 1`, then `topic=`, `start=` and `filter=` lines.
pub fn encode(spec: &SubscriptionSpec) -> String {
    let start = match spec.start {
        SubscriptionStart::Now => "now",
        SubscriptionStart::Earliest => "earliest",
    };
    format!(
        "ferry-subscription 1\ntopic={}\nstart={start}\nfilter={}\n",
        spec.topic, spec.filter
    )
}

/// The topic, start and filter stored by [`encode`], with `delivery` from the queue spec.
pub fn decode(bytes: &[u8], delivery: QueueSpec) -> std::result::Result<SubscriptionSpec, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned())?;
    let mut lines = text.lines();
    if lines.next() != Some("ferry-subscription 1") {
        return Err("not a subscription record of a known version".into());
    }
    let mut field = |name: &str| -> std::result::Result<String, String> {
        let line = lines.next().ok_or_else(|| format!("{name} is missing"))?;
        line.strip_prefix(&format!("{name}="))
            .map(str::to_owned)
            .ok_or_else(|| format!("expected {name}=, found {line:?}"))
    };
    let topic = Name::new(field("topic")?).map_err(|e| e.to_string())?;
    let start = match field("start")?.as_str() {
        "now" => SubscriptionStart::Now,
        "earliest" => SubscriptionStart::Earliest,
        other => return Err(format!("unknown start {other:?}")),
    };
    let filter = Filter::parse(&field("filter")?).map_err(|e| e.to_string())?;
    Ok(SubscriptionSpec {
        topic,
        filter,
        start,
        delivery,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_form_round_trips_and_refuses_what_it_does_not_know() {
        let spec = SubscriptionSpec {
            filter: Filter::parse("subject ~ orders.# and not region = eu").unwrap(),
            start: SubscriptionStart::Earliest,
            ..SubscriptionSpec::new(Name::new("orders").unwrap())
        };
        let text = encode(&spec);
        assert_eq!(
            decode(text.as_bytes(), spec.delivery.clone()).unwrap(),
            spec
        );
        for bad in [
            "ferry-subscription 2\ntopic=t\nstart=now\nfilter=\n",
            "ferry-subscription 1\ntopic=t\nstart=later\nfilter=\n",
            "ferry-subscription 1\ntopic=a/b\nstart=now\nfilter=\n",
            "ferry-subscription 1\ntopic=t\nstart=now\nfilter=x ==\n",
            "ferry-subscription 1\ntopic=t\nstart=now\n",
        ] {
            assert!(
                decode(bad.as_bytes(), QueueSpec::default()).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn length_limits_and_dedup_are_refused_on_subscriptions() {
        let mut spec = SubscriptionSpec::new(Name::new("t").unwrap());
        spec.validate().unwrap();
        spec.delivery.dedup_window = Duration::from_secs(1);
        assert!(matches!(
            spec.validate(),
            Err(BrokerError::InvalidSetting {
                setting: "dedup_window",
                ..
            })
        ));
        spec.delivery.dedup_window = Duration::ZERO;
        spec.delivery.length_limit.max_messages = Some(5);
        assert!(matches!(
            spec.validate(),
            Err(BrokerError::InvalidSetting {
                setting: "length_limit",
                ..
            })
        ));
    }
}
