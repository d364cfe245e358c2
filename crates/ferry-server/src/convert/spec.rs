//! Specs between `ferry.v1` and the broker. A field the request leaves unset takes the
//! broker's default; an enum value this server does not know is refused rather than read
//! as the default, so a newer client never gets a setting it did not ask for.

use std::time::Duration;

use ferry_broker::{
    Backoff, DeadLetter, Durability, Filter, KeylessPlacement, LengthLimit, Name, OrderingMode,
    OverflowPolicy, QueueSpec, RetryPolicy, SubscriptionSpec, SubscriptionStart, TopicCompaction,
    TopicRetention, TopicSpec,
};
use ferry_proto::v1;

use super::{ConvertError, ms, to_ms};

fn known<T>(
    field: &'static str,
    value: i32,
    parse: impl Fn(i32) -> Option<T>,
) -> Result<T, ConvertError> {
    parse(value).ok_or(ConvertError::UnknownEnum { field, value })
}

fn durability(
    field: &'static str,
    value: i32,
    interval_ms: Option<u64>,
    default: Durability,
) -> Result<Durability, ConvertError> {
    let kind = known(field, value, |v| v1::Durability::try_from(v).ok())?;
    Ok(match kind {
        v1::Durability::Unspecified => default,
        v1::Durability::Fsync => Durability::Fsync,
        v1::Durability::None => Durability::None,
        v1::Durability::Interval => {
            Durability::Interval(ms(interval_ms.ok_or(ConvertError::Missing {
                field: "durability_interval_ms",
                why: "DURABILITY_INTERVAL needs an interval",
            })?))
        }
    })
}

fn durability_to_proto(d: Durability) -> (i32, Option<u64>) {
    match d {
        Durability::Fsync => (v1::Durability::Fsync as i32, None),
        Durability::None => (v1::Durability::None as i32, None),
        Durability::Interval(i) => (v1::Durability::Interval as i32, Some(to_ms(i))),
    }
}

/// A queue spec from `ferry.v1`, over `base` (the broker's defaults for a queue, or for a
/// subscription's delivery).
pub fn queue_spec(spec: Option<v1::QueueSpec>, base: QueueSpec) -> Result<QueueSpec, ConvertError> {
    let Some(p) = spec else {
        return Ok(base);
    };
    let mut q = base;
    if let Some(retry) = p.retry {
        if let Some(n) = retry.max_deliveries {
            q.retry.max_deliveries = n;
        }
        if let Some(b) = retry.backoff {
            let Backoff {
                base,
                cap,
                multiplier,
                jitter,
            } = &mut q.retry.backoff;
            if let Some(v) = b.base_ms {
                *base = ms(v);
            }
            if let Some(v) = b.cap_ms {
                *cap = ms(v);
            }
            if let Some(v) = b.multiplier {
                *multiplier = v;
            }
            if let Some(v) = b.jitter {
                *jitter = v;
            }
        }
    }
    if let Some(dl) = p.dead_letter.and_then(|d| d.target) {
        q.dead_letter = match dl {
            v1::dead_letter::Target::Derived(_) => DeadLetter::Default,
            v1::dead_letter::Target::Disabled(_) => DeadLetter::Disabled,
            v1::dead_letter::Target::Queue(name) => DeadLetter::Named(Name::new(&name)?),
            v1::dead_letter::Target::Topic(name) => DeadLetter::Topic(Name::new(&name)?),
        };
    }
    if let Some(v) = p.dedup_window_ms {
        q.dedup_window = ms(v);
    }
    if let Some(v) = p.default_ttl_ms {
        q.default_ttl = Some(ms(v));
    }
    if let Some(v) = p.lease_ms {
        q.lease = ms(v);
    }
    if let Some(v) = p.max_delay_ms {
        q.max_delay = ms(v);
    }
    if let Some(v) = p.priority_levels {
        q.priority_levels = u8::try_from(v).map_err(|_| ConvertError::OutOfRange {
            field: "priority_levels",
            value: v.to_string(),
        })?;
    }
    if let Some(v) = p.lower_priority_share {
        q.lower_priority_share = v;
    }
    q.ordering = match known("ordering", p.ordering, |v| {
        v1::OrderingMode::try_from(v).ok()
    })? {
        v1::OrderingMode::Unspecified => q.ordering,
        v1::OrderingMode::Shared => OrderingMode::Shared,
        v1::OrderingMode::KeyShared => OrderingMode::KeyShared,
        v1::OrderingMode::Exclusive => OrderingMode::Exclusive,
    };
    if let Some(limit) = p.length_limit {
        q.length_limit = LengthLimit {
            max_messages: limit.max_messages,
            max_bytes: limit.max_bytes,
            overflow: match known("length_limit.overflow", limit.overflow, |v| {
                v1::OverflowPolicy::try_from(v).ok()
            })? {
                v1::OverflowPolicy::Unspecified => OverflowPolicy::default(),
                v1::OverflowPolicy::RejectPublish => OverflowPolicy::RejectPublish,
                v1::OverflowPolicy::DropHead => OverflowPolicy::DropHead,
                v1::OverflowPolicy::DeadLetterHead => OverflowPolicy::DeadLetterHead,
            },
        };
    }
    q.durability = durability(
        "durability",
        p.durability,
        p.durability_interval_ms,
        q.durability,
    )?;
    if let Some(v) = p.dead_letter_retention_ms {
        q.dead_letter_retention = ms(v);
    }
    if let Some(subject) = p.schema_subject {
        q.schema_subject = Some(subject);
    }
    Ok(q)
}

pub fn queue_spec_to_proto(q: &QueueSpec) -> v1::QueueSpec {
    let (durability, durability_interval_ms) = durability_to_proto(q.durability);
    v1::QueueSpec {
        retry: Some(retry_to_proto(&q.retry)),
        dead_letter: Some(v1::DeadLetter {
            target: Some(match &q.dead_letter {
                DeadLetter::Default => v1::dead_letter::Target::Derived(true),
                DeadLetter::Disabled => v1::dead_letter::Target::Disabled(true),
                DeadLetter::Named(name) => v1::dead_letter::Target::Queue(name.to_string()),
                DeadLetter::Topic(name) => v1::dead_letter::Target::Topic(name.to_string()),
            }),
        }),
        dedup_window_ms: Some(to_ms(q.dedup_window)),
        default_ttl_ms: q.default_ttl.map(to_ms),
        lease_ms: Some(to_ms(q.lease)),
        max_delay_ms: Some(to_ms(q.max_delay)),
        priority_levels: Some(u32::from(q.priority_levels)),
        lower_priority_share: Some(q.lower_priority_share),
        ordering: match q.ordering {
            OrderingMode::Shared => v1::OrderingMode::Shared,
            OrderingMode::KeyShared => v1::OrderingMode::KeyShared,
            OrderingMode::Exclusive => v1::OrderingMode::Exclusive,
        } as i32,
        length_limit: Some(v1::LengthLimit {
            max_messages: q.length_limit.max_messages,
            max_bytes: q.length_limit.max_bytes,
            overflow: match q.length_limit.overflow {
                OverflowPolicy::RejectPublish => v1::OverflowPolicy::RejectPublish,
                OverflowPolicy::DropHead => v1::OverflowPolicy::DropHead,
                OverflowPolicy::DeadLetterHead => v1::OverflowPolicy::DeadLetterHead,
            } as i32,
        }),
        durability,
        durability_interval_ms,
        dead_letter_retention_ms: Some(to_ms(q.dead_letter_retention)),
        schema_subject: q.schema_subject.clone(),
    }
}

fn retry_to_proto(r: &RetryPolicy) -> v1::RetryPolicy {
    v1::RetryPolicy {
        max_deliveries: Some(r.max_deliveries),
        backoff: Some(v1::Backoff {
            base_ms: Some(to_ms(r.backoff.base)),
            cap_ms: Some(to_ms(r.backoff.cap)),
            multiplier: Some(r.backoff.multiplier),
            jitter: Some(r.backoff.jitter),
        }),
    }
}

pub fn topic_spec(spec: Option<v1::TopicSpec>) -> Result<TopicSpec, ConvertError> {
    let mut t = TopicSpec::default();
    let Some(p) = spec else {
        return Ok(t);
    };
    if p.partitions != 0 {
        t.partitions = p.partitions;
    }
    if let Some(r) = p.retention {
        t.retention = TopicRetention {
            max_age: match (r.unbounded_age, r.max_age_ms) {
                (true, Some(_)) => {
                    return Err(ConvertError::Conflict {
                        what: "retention.unbounded_age and retention.max_age_ms",
                    });
                }
                (true, None) => None,
                (false, Some(age)) => Some(ms(age)),
                (false, None) => t.retention.max_age,
            },
            max_bytes: r.max_bytes,
            overrides_subscriptions: r.overrides_subscriptions,
        };
    }
    t.keyless = match known("keyless", p.keyless, |v| {
        v1::KeylessPlacement::try_from(v).ok()
    })? {
        v1::KeylessPlacement::Unspecified => t.keyless,
        v1::KeylessPlacement::RoundRobin => KeylessPlacement::RoundRobin,
        v1::KeylessPlacement::StickyBatch => KeylessPlacement::StickyBatch,
    };
    t.durability = durability(
        "durability",
        p.durability,
        p.durability_interval_ms,
        t.durability,
    )?;
    if let Some(v) = p.producer_state_window_ms {
        t.producer_state_window = ms(v);
    }
    t.compaction = p.compaction.map(|c| {
        let mut on = TopicCompaction::default();
        if let Some(v) = c.tombstone_retention_ms {
            on.tombstone_retention = ms(v);
        }
        if let Some(v) = c.min_lag_ms {
            on.min_lag = ms(v);
        }
        on
    });
    t.schema_subject = p.schema_subject;
    Ok(t)
}

pub fn topic_spec_to_proto(t: &TopicSpec) -> v1::TopicSpec {
    let (durability, durability_interval_ms) = durability_to_proto(t.durability);
    v1::TopicSpec {
        partitions: t.partitions,
        retention: Some(v1::TopicRetention {
            max_age_ms: t.retention.max_age.map(to_ms),
            unbounded_age: t.retention.max_age.is_none(),
            max_bytes: t.retention.max_bytes,
            overrides_subscriptions: t.retention.overrides_subscriptions,
        }),
        keyless: match t.keyless {
            KeylessPlacement::RoundRobin => v1::KeylessPlacement::RoundRobin,
            KeylessPlacement::StickyBatch => v1::KeylessPlacement::StickyBatch,
        } as i32,
        durability,
        durability_interval_ms,
        producer_state_window_ms: Some(to_ms(t.producer_state_window)),
        compaction: t.compaction.map(|c| v1::TopicCompaction {
            tombstone_retention_ms: Some(to_ms(c.tombstone_retention)),
            min_lag_ms: Some(to_ms(c.min_lag)),
        }),
        schema_subject: t.schema_subject.clone(),
    }
}

pub fn subscription_spec(
    spec: Option<v1::SubscriptionSpec>,
) -> Result<SubscriptionSpec, ConvertError> {
    let p = spec.ok_or(ConvertError::Missing {
        field: "spec",
        why: "a subscription needs at least its topic",
    })?;
    let mut s = SubscriptionSpec::new(Name::new(&p.topic)?);
    s.filter = Filter::parse(&p.filter)?;
    s.start = match known("start", p.start, |v| {
        v1::SubscriptionStart::try_from(v).ok()
    })? {
        v1::SubscriptionStart::Unspecified | v1::SubscriptionStart::Now => SubscriptionStart::Now,
        v1::SubscriptionStart::Earliest => SubscriptionStart::Earliest,
    };
    s.delivery = queue_spec(p.delivery, s.delivery)?;
    Ok(s)
}

pub fn subscription_spec_to_proto(s: &SubscriptionSpec) -> v1::SubscriptionSpec {
    v1::SubscriptionSpec {
        topic: s.topic.to_string(),
        filter: s.filter.to_string(),
        start: match s.start {
            SubscriptionStart::Now => v1::SubscriptionStart::Now,
            SubscriptionStart::Earliest => v1::SubscriptionStart::Earliest,
        } as i32,
        delivery: Some(queue_spec_to_proto(&s.delivery)),
    }
}

/// A duration field that may be absent.
pub fn opt_ms(v: Option<u64>) -> Option<Duration> {
    v.map(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_spec_is_the_brokers_default() {
        assert_eq!(
            queue_spec(Some(v1::QueueSpec::default()), QueueSpec::default()).unwrap(),
            QueueSpec::default()
        );
        assert_eq!(
            queue_spec(None, QueueSpec::default()).unwrap(),
            QueueSpec::default()
        );
        assert_eq!(
            topic_spec(Some(v1::TopicSpec::default())).unwrap(),
            TopicSpec::default()
        );
    }

    #[test]
    fn specs_round_trip() {
        let q = QueueSpec {
            retry: RetryPolicy {
                max_deliveries: 7,
                backoff: Backoff {
                    base: Duration::from_millis(250),
                    cap: Duration::from_secs(60),
                    multiplier: 3.0,
                    jitter: 0.5,
                },
            },
            dead_letter: DeadLetter::Named(Name::new("graveyard").unwrap()),
            dedup_window: Duration::ZERO,
            default_ttl: Some(Duration::from_secs(3600)),
            lease: Duration::from_secs(5),
            max_delay: Duration::from_secs(60),
            priority_levels: 4,
            lower_priority_share: 0.2,
            ordering: OrderingMode::KeyShared,
            length_limit: LengthLimit {
                max_messages: Some(10),
                max_bytes: None,
                overflow: OverflowPolicy::DeadLetterHead,
            },
            durability: Durability::Interval(Duration::from_millis(20)),
            dead_letter_retention: Duration::from_secs(86_400),
            schema_subject: Some("orders-value".into()),
        };
        assert_eq!(
            queue_spec(Some(queue_spec_to_proto(&q)), QueueSpec::default()).unwrap(),
            q
        );
        let to_topic = QueueSpec {
            dead_letter: DeadLetter::Topic(Name::new("graveyard").unwrap()),
            ..q.clone()
        };
        assert_eq!(
            queue_spec(Some(queue_spec_to_proto(&to_topic)), QueueSpec::default()).unwrap(),
            to_topic
        );

        let t = TopicSpec {
            partitions: 16,
            retention: TopicRetention {
                max_age: None,
                max_bytes: Some(1 << 30),
                overrides_subscriptions: true,
            },
            keyless: KeylessPlacement::RoundRobin,
            durability: Durability::None,
            producer_state_window: Duration::from_secs(60),
            compaction: Some(TopicCompaction {
                tombstone_retention: Duration::from_secs(3600),
                min_lag: Duration::from_secs(5),
            }),
            schema_subject: Some("orders-value".into()),
        };
        assert_eq!(topic_spec(Some(topic_spec_to_proto(&t))).unwrap(), t);

        let mut s = SubscriptionSpec::new(Name::new("orders").unwrap());
        s.filter = Filter::parse("subject ~ orders.* and region in (eu, us)").unwrap();
        s.start = SubscriptionStart::Earliest;
        s.delivery.ordering = OrderingMode::Exclusive;
        assert_eq!(
            subscription_spec(Some(subscription_spec_to_proto(&s))).unwrap(),
            s
        );
    }

    #[test]
    fn bad_fields_are_refused_by_name() {
        let unknown = v1::QueueSpec {
            ordering: 42,
            ..Default::default()
        };
        assert!(matches!(
            queue_spec(Some(unknown), QueueSpec::default()),
            Err(ConvertError::UnknownEnum {
                field: "ordering",
                value: 42
            })
        ));
        let no_interval = v1::TopicSpec {
            durability: v1::Durability::Interval as i32,
            ..Default::default()
        };
        assert!(matches!(
            topic_spec(Some(no_interval)),
            Err(ConvertError::Missing { .. })
        ));
        let both = v1::TopicSpec {
            retention: Some(v1::TopicRetention {
                unbounded_age: true,
                max_age_ms: Some(1),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(matches!(
            topic_spec(Some(both)),
            Err(ConvertError::Conflict { .. })
        ));
        let bad_filter = v1::SubscriptionSpec {
            topic: "t".into(),
            filter: "subject ~ ".into(),
            ..Default::default()
        };
        assert!(matches!(
            subscription_spec(Some(bad_filter)),
            Err(ConvertError::Broker(_))
        ));
        assert!(matches!(
            queue_spec(
                Some(v1::QueueSpec {
                    priority_levels: Some(300),
                    ..Default::default()
                }),
                QueueSpec::default()
            ),
            Err(ConvertError::OutOfRange { .. })
        ));
    }
}
