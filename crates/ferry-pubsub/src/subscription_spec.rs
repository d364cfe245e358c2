//! A Pub/Sub subscription's settings as the broker's subscription spec, and back.
//!
//! | Pub/Sub | broker |
//! |---|---|
//! | `ack_deadline_seconds` (10–600, default 10) | the lease |
//! | `message_retention_duration` (10 minutes–31 days, default 7 days) | the default TTL: an unacknowledged message older than that is dropped |
//! | `enable_message_ordering` | key-shared ordering: one key's messages to one consumer at a time, in order |
//! | `retry_policy` (backoff 0–600 s, defaults 10 s and 600 s) | the retry backoff, doubling, no jitter (Pub/Sub's bounds are kept) |
//! | no retry policy | redelivery after [`IMMEDIATE`] |
//! | `enable_exactly_once_delivery` | the front end's own record (see `store.rs`): the broker's leases already keep a message from anyone else until its deadline; the setting makes acks report which took effect |
//! | `retain_acked_messages` | the front end's record, accepted when the topic keeps messages that long (see `retained_acks.rs`) |
//! | `expiration_policy` (ttl of 1 day or more) | the front end's record: deleted when unused that long (see `expiration.rs`); without a ttl, never |
//! | `labels` | the front end's record, checked as Pub/Sub checks them |
//! | `filter` | the subscription's filter (see `filter.rs`), fixed at creation as in Pub/Sub |
//!
//! | `dead_letter_policy` (topic, 5–100 attempts, default 5) | dead letters into that topic after that many deliveries; deliveries then count in `delivery_attempt` |
//!
//! Without a dead-letter policy Pub/Sub redelivers without end; the broker needs a bound,
//! and [`UNBOUNDED_DELIVERIES`] is the highest it takes, with dead-lettering off: a message
//! delivered that many times without an ack is dropped.
//!
//! Settings this server does not carry out yet are refused when set (see
//! [`refuse_unsupported`]), never ignored.

use std::time::Duration;

use ferry_broker::{
    Backoff, DeadLetter, Name, OrderingMode, QueueSpec, RetryPolicy, SubscriptionSpec,
};
use googleapis_tonic_google_pubsub_v1::google::pubsub::v1 as pb;
use tonic::Status;

use crate::convert::{duration, proto_duration};
use crate::names::{Collection, to_broker, to_resource};
use crate::status::unsupported;
use crate::store::SubscriptionRecord;

pub const DEFAULT_ACK_DEADLINE: Duration = Duration::from_secs(10);
pub const MAX_ACK_DEADLINE: Duration = Duration::from_secs(600);
const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);
const MIN_RETENTION: Duration = Duration::from_secs(600);
const MAX_RETENTION: Duration = Duration::from_secs(31 * 24 * 3600);
const DEFAULT_MIN_BACKOFF: Duration = Duration::from_secs(10);
const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(600);
/// The broker waits at least this long before a retry (a zero wait would spin a failing
/// message); a retry policy's `minimum_backoff` of 0 becomes this.
const SHORTEST_BACKOFF: Duration = Duration::from_millis(1);
/// The wait before redelivery on a subscription without a retry policy, where Pub/Sub
/// redelivers at once.
pub const IMMEDIATE: Duration = Duration::from_millis(100);
pub const UNBOUNDED_DELIVERIES: u32 = RetryPolicy::MAX_DELIVERIES;
const DEFAULT_DELIVERY_ATTEMPTS: u32 = 5;

/// Whether deliveries of a subscription with `spec` count their attempts: Pub/Sub sets
/// `delivery_attempt` only on subscriptions with a dead-letter policy.
pub fn counts_attempts(spec: &SubscriptionSpec) -> bool {
    spec.delivery.dead_letter.topic().is_some()
}

/// The spec for `subscription` on the broker's `topic`.
pub fn to_spec(subscription: &pb::Subscription, topic: Name) -> Result<SubscriptionSpec, Status> {
    refuse_unsupported(subscription)?;
    let lease = match subscription.ack_deadline_seconds {
        0 => DEFAULT_ACK_DEADLINE,
        s if (10..=600).contains(&s) => Duration::from_secs(s as u64),
        s => {
            return Err(Status::invalid_argument(format!(
                "ack_deadline_seconds must be between 10 and 600 (got {s})"
            )));
        }
    };
    let retention = match &subscription.message_retention_duration {
        None => DEFAULT_RETENTION,
        Some(d) => {
            let d = duration(d, "message_retention_duration")?;
            if !(MIN_RETENTION..=MAX_RETENTION).contains(&d) {
                return Err(Status::invalid_argument(
                    "message_retention_duration must be between 10 minutes and 31 days",
                ));
            }
            d
        }
    };
    let backoff = match &subscription.retry_policy {
        None => Backoff {
            base: IMMEDIATE,
            cap: IMMEDIATE,
            multiplier: 1.0,
            jitter: 0.0,
        },
        Some(policy) => {
            let bound = |d: &Option<prost_types::Duration>, default, setting| match d {
                None => Ok(default),
                Some(d) => {
                    let d = duration(d, setting)?;
                    if d > DEFAULT_MAX_BACKOFF {
                        return Err(Status::invalid_argument(format!(
                            "{setting} must be at most 600 seconds"
                        )));
                    }
                    Ok(d)
                }
            };
            let min = bound(
                &policy.minimum_backoff,
                DEFAULT_MIN_BACKOFF,
                "retry_policy.minimum_backoff",
            )?;
            let max = bound(
                &policy.maximum_backoff,
                DEFAULT_MAX_BACKOFF,
                "retry_policy.maximum_backoff",
            )?;
            if min > max {
                return Err(Status::invalid_argument(
                    "retry_policy.minimum_backoff must not exceed maximum_backoff",
                ));
            }
            Backoff {
                base: min.max(SHORTEST_BACKOFF),
                cap: max.max(SHORTEST_BACKOFF),
                multiplier: 2.0,
                jitter: 0.0,
            }
        }
    };
    let (dead_letter, max_deliveries) = match &subscription.dead_letter_policy {
        None => (DeadLetter::Disabled, UNBOUNDED_DELIVERIES),
        Some(policy) => {
            let topic = to_broker(&policy.dead_letter_topic, Collection::Topics)?;
            let attempts = match policy.max_delivery_attempts {
                0 => DEFAULT_DELIVERY_ATTEMPTS,
                n @ 5..=100 => n as u32,
                n => {
                    return Err(Status::invalid_argument(format!(
                        "dead_letter_policy.max_delivery_attempts must be between 5 and 100 \
                         (got {n})"
                    )));
                }
            };
            (DeadLetter::Topic(topic), attempts)
        }
    };
    let mut spec = SubscriptionSpec::new(topic);
    spec.filter = crate::filter::parse(&subscription.filter)?;
    spec.delivery = QueueSpec {
        lease,
        retry: RetryPolicy {
            max_deliveries,
            backoff,
        },
        dead_letter,
        default_ttl: Some(retention),
        ordering: if subscription.enable_message_ordering {
            OrderingMode::KeyShared
        } else {
            OrderingMode::Shared
        },
        ..spec.delivery
    };
    Ok(spec)
}

/// What of `subscription` the front end keeps itself, made at `now_ms`.
pub fn record(subscription: &pb::Subscription, now_ms: i64) -> Result<SubscriptionRecord, Status> {
    let ttl = crate::expiration::ttl(subscription.expiration_policy.as_ref())?;
    crate::labels::check(&subscription.labels)?;
    Ok(SubscriptionRecord {
        labels: subscription.labels.clone(),
        exactly_once: subscription.enable_exactly_once_delivery,
        retain_acked: subscription.retain_acked_messages,
        expiration_ttl_ms: ttl.map(|t| t.as_millis() as i64),
        last_used_ms: if ttl.is_some() { now_ms } else { 0 },
    })
}

/// The subscription `name` as Pub/Sub describes it.
pub fn from_spec(
    name: String,
    spec: &SubscriptionSpec,
    record: &SubscriptionRecord,
) -> pb::Subscription {
    let delivery = &spec.delivery;
    let backoff = &delivery.retry.backoff;
    let retry_policy =
        (backoff.base != IMMEDIATE || backoff.cap != IMMEDIATE).then(|| pb::RetryPolicy {
            minimum_backoff: Some(proto_duration(backoff.base)),
            maximum_backoff: Some(proto_duration(backoff.cap)),
        });
    pb::Subscription {
        name,
        topic: to_resource(spec.topic.as_str(), Collection::Topics).unwrap_or_default(),
        ack_deadline_seconds: delivery.lease.as_secs() as i32,
        message_retention_duration: delivery.default_ttl.map(proto_duration),
        enable_message_ordering: delivery.ordering == OrderingMode::KeyShared,
        // Without a ttl the subscription never expires.
        expiration_policy: Some(pb::ExpirationPolicy {
            ttl: record
                .expiration_ttl_ms
                .map(|ms| proto_duration(Duration::from_millis(ms.max(0) as u64))),
        }),
        retry_policy,
        filter: crate::filter::render(&spec.filter),
        dead_letter_policy: delivery
            .dead_letter
            .topic()
            .map(|topic| pb::DeadLetterPolicy {
                dead_letter_topic: to_resource(topic.as_str(), Collection::Topics)
                    .unwrap_or_default(),
                max_delivery_attempts: delivery.retry.max_deliveries as i32,
            }),
        enable_exactly_once_delivery: record.exactly_once,
        retain_acked_messages: record.retain_acked,
        labels: record.labels.clone(),
        state: pb::subscription::State::Active as i32,
        ..Default::default()
    }
}

/// Refuses what this server does not carry out, naming it.
fn refuse_unsupported(s: &pb::Subscription) -> Result<(), Status> {
    if s.push_config
        .as_ref()
        .is_some_and(|p| !p.push_endpoint.is_empty() || p.authentication_method.is_some())
    {
        return Err(unsupported("A push subscription (push_config)"));
    }
    if s.bigquery_config.is_some() {
        return Err(unsupported("A BigQuery subscription (bigquery_config)"));
    }
    if s.cloud_storage_config.is_some() {
        return Err(unsupported(
            "A Cloud Storage subscription (cloud_storage_config)",
        ));
    }
    if s.bigtable_config.is_some() {
        return Err(unsupported("A Bigtable subscription (bigtable_config)"));
    }
    if !s.tags.is_empty() {
        return Err(unsupported("Keeping tags"));
    }
    if !s.message_transforms.is_empty() {
        return Err(unsupported("Message transforms"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic() -> Name {
        Name::new("p.orders").unwrap()
    }

    #[test]
    fn defaults_become_pubsubs_defaults() {
        let spec = to_spec(&pb::Subscription::default(), topic()).unwrap();
        assert_eq!(spec.delivery.lease, DEFAULT_ACK_DEADLINE);
        assert_eq!(spec.delivery.default_ttl, Some(DEFAULT_RETENTION));
        assert_eq!(spec.delivery.dead_letter, DeadLetter::Disabled);
        assert_eq!(spec.delivery.retry.max_deliveries, UNBOUNDED_DELIVERIES);
        assert_eq!(spec.delivery.ordering, OrderingMode::Shared);
        spec.validate().unwrap();
        let back = from_spec(
            "projects/p/subscriptions/s".into(),
            &spec,
            &SubscriptionRecord::default(),
        );
        assert_eq!(back.topic, "projects/p/topics/orders");
        assert_eq!(back.ack_deadline_seconds, 10);
        assert_eq!(back.retry_policy, None);
    }

    #[test]
    fn settings_round_trip() {
        let asked = pb::Subscription {
            ack_deadline_seconds: 45,
            enable_message_ordering: true,
            message_retention_duration: Some(proto_duration(Duration::from_secs(3600))),
            retry_policy: Some(pb::RetryPolicy {
                minimum_backoff: Some(proto_duration(Duration::from_secs(2))),
                maximum_backoff: Some(proto_duration(Duration::from_secs(30))),
            }),
            ..Default::default()
        };
        let spec = to_spec(&asked, topic()).unwrap();
        spec.validate().unwrap();
        assert_eq!(spec.delivery.ordering, OrderingMode::KeyShared);
        let back = from_spec(
            "projects/p/subscriptions/s".into(),
            &spec,
            &SubscriptionRecord::default(),
        );
        assert_eq!(back.ack_deadline_seconds, 45);
        assert!(back.enable_message_ordering);
        assert_eq!(
            back.message_retention_duration,
            asked.message_retention_duration
        );
        assert_eq!(back.retry_policy, asked.retry_policy);

        let filtered = pb::Subscription {
            filter: r#"attributes.kind = "a" OR hasPrefix(attributes.kind, "b-")"#.into(),
            ..Default::default()
        };
        let spec = to_spec(&filtered, topic()).unwrap();
        assert_eq!(spec.filter.predicates.len(), 1);
        let back = from_spec(
            "projects/p/subscriptions/s".into(),
            &spec,
            &SubscriptionRecord::default(),
        );
        assert_eq!(back.filter, filtered.filter);
    }

    #[test]
    fn out_of_range_and_unsupported_settings_are_refused() {
        let bad_deadline = pb::Subscription {
            ack_deadline_seconds: 601,
            ..Default::default()
        };
        assert_eq!(
            to_spec(&bad_deadline, topic()).unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
        let badly_filtered = pb::Subscription {
            filter: "attributes.kind = a".into(),
            ..Default::default()
        };
        assert_eq!(
            to_spec(&badly_filtered, topic()).unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
        let pushed = pb::Subscription {
            push_config: Some(pb::PushConfig {
                push_endpoint: "http://127.0.0.1:1/push".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            to_spec(&pushed, topic()).unwrap_err().code(),
            tonic::Code::Unimplemented
        );
    }
}
