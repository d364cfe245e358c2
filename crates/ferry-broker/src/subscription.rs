//! Subscriptions: a named, durable view of a topic with full queue semantics — the fan-out
//! half of pub/sub. The engine's side is in `engine/subscriptions.rs`; this module holds
//! what needs no engine: the [`SubscriptionSpec`], its stored form, and the *reference
//! record* a subscription keeps per message.
//!
//! **A subscription is a queue whose messages stay in the topic.** It lives in the queue
//! namespace (receive, ack, nack, reject, extend, park, stats, its `<name>.dlq` and redrive
//! all work on it by name) but its log holds, per message that passed its filter, a small
//! reference — the message's id, key, priority, times and dedup id, and where it is in the
//! topic (`ferry-topic-ref: <partition>:<offset>:<size>`) — never the payload or headers.
//! Fifty subscriptions of one topic add fifty references per message, not fifty copies.
//!
//! A queue attached to topics (see [`crate::link`]) keeps the same references, with the
//! id of the link they came through as a fourth field (`<partition>:<offset>:<size>:<id>`);
//! a subscription's own link is id 0 and writes no fourth field, as before links existed.

use std::time::Duration;

use bytes::Bytes;
use ferry_storage::{NewRecord, Record};

use crate::error::{BrokerError, Result};
use crate::filter::Filter;
use crate::message::Message;
use crate::name::Name;
use crate::spec::QueueSpec;

/// The header naming the topic record a reference stands for.
pub const TOPIC_REF: &str = "ferry-topic-ref";

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

/// Where a referenced message is in its topic, and its size (payload, key and headers) for
/// the subscription's stats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TopicRef {
    /// The link the reference came through, per queue: 0 for a subscription's own.
    pub link: u32,
    pub partition: u32,
    pub offset: u64,
    pub size: u32,
}

/// The reference record of `message` (read from the topic at `at`): its broker fields and
/// key, no payload, no user headers, and the [`TOPIC_REF`] header.
pub fn ref_record(message: &Message, at: TopicRef) -> NewRecord {
    let slim = Message {
        headers: Default::default(),
        payload: Bytes::new(),
        ..message.clone()
    };
    let mut record = slim.to_record();
    let value = match at.link {
        0 => format!("{}:{}:{}", at.partition, at.offset, at.size),
        link => format!("{}:{}:{}:{link}", at.partition, at.offset, at.size),
    };
    record.headers.insert(
        0,
        (Bytes::from_static(TOPIC_REF.as_bytes()), Bytes::from(value)),
    );
    record
}

/// Takes the [`TOPIC_REF`] header out of `record`, if it has one.
pub fn split_ref(record: &mut Record) -> Result<Option<TopicRef>> {
    let Some(i) = record
        .headers
        .iter()
        .position(|(name, _)| name == TOPIC_REF.as_bytes())
    else {
        return Ok(None);
    };
    let (_, value) = record.headers.remove(i);
    let bad = || BrokerError::MalformedRecord {
        offset: record.offset,
        problem: format!("header {TOPIC_REF:?} is not <partition>:<offset>:<size>[:<link>]"),
    };
    let text = std::str::from_utf8(&value).map_err(|_| bad())?;
    let mut parts = text.split(':');
    let mut next = || parts.next().ok_or_else(bad);
    let partition = next()?.parse().map_err(|_| bad())?;
    let offset = next()?.parse().map_err(|_| bad())?;
    let size = next()?.parse().map_err(|_| bad())?;
    let link = match parts.next() {
        Some(id) => id.parse().ok().filter(|id| *id > 0).ok_or_else(bad)?,
        None => 0,
    };
    if parts.next().is_some() {
        return Err(bad());
    }
    Ok(Some(TopicRef {
        link,
        partition,
        offset,
        size,
    }))
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

    #[test]
    fn a_reference_carries_the_broker_fields_and_the_position_only() {
        let mut rng = fastrand::Rng::with_seed(1);
        let message = crate::OutgoingMessage::new("a large payload")
            .with_key("k")
            .with_header("type", "t")
            .with_priority(3)
            .into_message(&crate::Limits::default(), 1_000, &mut rng)
            .unwrap();
        let at = TopicRef {
            link: 0,
            partition: 2,
            offset: 77,
            size: 19,
        };
        let attached = TopicRef { link: 4, ..at };
        let mut via_link = record_of(ref_record(&message, attached));
        assert_eq!(split_ref(&mut via_link).unwrap(), Some(attached));
        let new = ref_record(&message, at);
        assert!(new.value.is_empty());
        let mut record = Record {
            offset: 5,
            timestamp: new.timestamp.unwrap(),
            key: new.key.clone(),
            headers: new.headers.clone(),
            value: new.value.clone(),
        };
        assert_eq!(split_ref(&mut record).unwrap(), Some(at));
        let back = Message::from_record(record).unwrap();
        assert_eq!(
            (back.id, back.priority, back.key),
            (message.id, 3, message.key)
        );
        assert!(back.headers.is_empty() && back.payload.is_empty());
    }

    fn record_of(new: NewRecord) -> Record {
        Record {
            offset: 0,
            timestamp: new.timestamp.unwrap(),
            key: new.key,
            headers: new.headers,
            value: new.value,
        }
    }

    #[test]
    fn a_reference_with_a_damaged_link_field_is_refused() {
        for value in ["1:2:3:0", "1:2:3:x", "1:2:3:4:5"] {
            let mut record = Record {
                offset: 0,
                timestamp: 0,
                key: None,
                headers: vec![(Bytes::from_static(TOPIC_REF.as_bytes()), Bytes::from(value))],
                value: Bytes::new(),
            };
            assert!(split_ref(&mut record).is_err(), "{value}");
        }
    }
}
