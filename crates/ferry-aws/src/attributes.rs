//! Queue attributes: which SQS attribute lands where, checked as SQS checks them.
//!
//! | attribute | kept by | effect |
//! |---|---|---|
//! | VisibilityTimeout | spec `lease` | the lease of a receive |
//! | MessageRetentionPeriod | spec `default_ttl` | each message's TTL |
//! | RedrivePolicy | spec `retry.max_deliveries` and `dead_letter` | dead-lettering after maxReceiveCount deliveries |
//! | FifoQueue | spec `ordering = KeyShared`, `dedup_window = 5 min` | per-group order, deduplication |
//! | DelaySeconds, MaximumMessageSize, ReceiveMessageWaitTimeSeconds, ContentBasedDeduplication, DeduplicationScope, FifoThroughputLimit, RedriveAllowPolicy, Policy, SqsManagedSseEnabled | the record | applied by the front end (Policy evaluated per request, `auth/`; the encryption flag kept) |
//!
//! SetQueueAttributes changes what the spec holds through the broker
//! (`Broker::update_queue`, [`apply_to_spec`]), so Ferry's own consumers see the change
//! too; the spec is then the authority GetQueueAttributes reads those attributes from. The
//! record keeps a copy of every attribute set through SQS. FifoQueue cannot change (SQS
//! refuses it too; the broker's ordering mode is fixed at creation).

use std::collections::BTreeMap;
use std::time::Duration;

use ferry_broker::{Backoff, DeadLetter, OrderingMode, QueueInfo, QueueSpec, RetryPolicy};
use serde_json::Value;

use crate::errors::{Code, SqsError};
use crate::location::Location;
use crate::store::QueueRecord;

pub const DEFAULT_VISIBILITY: u32 = 30;
pub const DEFAULT_RETENTION: u32 = 345_600;
pub const MAX_MESSAGE_SIZE: u32 = 1_048_576;
pub const MAX_DELAY: u32 = 900;
pub const MAX_WAIT: u32 = 20;
pub const MAX_VISIBILITY: u32 = 43_200;
/// Without a RedrivePolicy SQS redelivers without end; the broker needs a bound, and this
/// is the highest it takes. Such a queue has dead-lettering disabled, so a message
/// received this many times without being deleted is discarded.
pub const UNBOUNDED_DELIVERIES: u32 = RetryPolicy::MAX_DELIVERIES;
/// FIFO deduplication window.
pub const DEDUP_WINDOW: Duration = Duration::from_secs(300);

/// Attributes the broker's spec holds: read from the spec, changed through the broker.
pub const SPEC_HELD: [&str; 3] = [
    "VisibilityTimeout",
    "MessageRetentionPeriod",
    "RedrivePolicy",
];

/// Attributes that only GetQueueAttributes answers.
const READ_ONLY: [&str; 7] = [
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
    "CreatedTimestamp",
    "LastModifiedTimestamp",
    "QueueArn",
    "All",
];

/// Every attribute name GetQueueAttributes knows.
pub const ALL: [&str; 21] = [
    "Policy",
    "VisibilityTimeout",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "CreatedTimestamp",
    "LastModifiedTimestamp",
    "QueueArn",
    "ApproximateNumberOfMessagesDelayed",
    "DelaySeconds",
    "ReceiveMessageWaitTimeSeconds",
    "RedrivePolicy",
    "FifoQueue",
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "FifoThroughputLimit",
    "RedriveAllowPolicy",
    "SqsManagedSseEnabled",
    "KmsMasterKeyId",
    "KmsDataKeyReusePeriodSeconds",
];

/// A parsed RedrivePolicy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redrive {
    pub target: String,
    pub max_receive_count: u32,
}

fn bad_value(name: &str, why: &str) -> SqsError {
    SqsError::new(
        Code::InvalidAttributeValue,
        format!("Invalid value for the parameter {name}. Reason: {why}"),
    )
}

fn integer(name: &str, value: &str, range: std::ops::RangeInclusive<u32>) -> Result<u32, SqsError> {
    value
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|v| range.contains(v))
        .ok_or_else(|| {
            bad_value(
                name,
                &format!(
                    "must be an integer from {} to {}.",
                    range.start(),
                    range.end()
                ),
            )
        })
}

fn boolean(name: &str, value: &str) -> Result<bool, SqsError> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(bad_value(name, "must be true or false.")),
    }
}

/// Checks `input` (CreateQueue's or SetQueueAttributes' attributes) and returns it with
/// values in one spelling (`true`, plain integers, compact JSON). `fifo` says whether the
/// queue is (or is being created as) a FIFO queue.
pub fn normalize(
    input: &BTreeMap<String, String>,
    fifo: bool,
    location: &Location,
) -> Result<BTreeMap<String, String>, SqsError> {
    let mut out = BTreeMap::new();
    for (name, value) in input {
        let normalized = match name.as_str() {
            "VisibilityTimeout" => integer(name, value, 0..=MAX_VISIBILITY)?.to_string(),
            "MessageRetentionPeriod" => integer(name, value, 60..=1_209_600)?.to_string(),
            "DelaySeconds" => integer(name, value, 0..=MAX_DELAY)?.to_string(),
            "MaximumMessageSize" => integer(name, value, 1024..=MAX_MESSAGE_SIZE)?.to_string(),
            "ReceiveMessageWaitTimeSeconds" => integer(name, value, 0..=MAX_WAIT)?.to_string(),
            "FifoQueue" => {
                let on = boolean(name, value)?;
                if on != fifo {
                    return Err(bad_value(
                        name,
                        "a FIFO queue's name must end in .fifo, and only a FIFO queue's may.",
                    ));
                }
                on.to_string()
            }
            "ContentBasedDeduplication" | "SqsManagedSseEnabled" => {
                let on = boolean(name, value)?;
                if name == "ContentBasedDeduplication" && !fifo {
                    return Err(SqsError::new(
                        Code::InvalidAttributeName,
                        format!("Unknown Attribute {name}: it applies to FIFO queues only."),
                    ));
                }
                on.to_string()
            }
            "DeduplicationScope" | "FifoThroughputLimit" => {
                let allowed: &[&str] = if name == "DeduplicationScope" {
                    &["messageGroup", "queue"]
                } else {
                    &["perQueue", "perMessageGroupId"]
                };
                if !fifo {
                    return Err(SqsError::new(
                        Code::InvalidAttributeName,
                        format!("Unknown Attribute {name}: it applies to FIFO queues only."),
                    ));
                }
                if !allowed.contains(&value.as_str()) {
                    return Err(bad_value(name, &format!("must be one of {allowed:?}.")));
                }
                value.clone()
            }
            "RedrivePolicy" => match parse_redrive(value, location)? {
                None => String::new(),
                Some(r) => serde_json::json!({
                    "deadLetterTargetArn": location.arn(&r.target),
                    "maxReceiveCount": r.max_receive_count,
                })
                .to_string(),
            },
            "RedriveAllowPolicy" => {
                parse_allow(value)?;
                value.clone()
            }
            "Policy" => {
                // Validated whole, so that no element of it goes unenforced (`auth/policy.rs`).
                if let Err(why) = crate::auth::Policy::parse(value) {
                    return Err(bad_value(name, &format!("{why}.")));
                }
                value.clone()
            }
            "KmsMasterKeyId" | "KmsDataKeyReusePeriodSeconds" => {
                return Err(bad_value(
                    name,
                    "Ferry does not encrypt with KMS keys; leave it unset.",
                ));
            }
            n if READ_ONLY.contains(&n) => {
                return Err(SqsError::new(
                    Code::InvalidAttributeName,
                    format!("Unknown Attribute {name}: it cannot be set."),
                ));
            }
            _ => {
                return Err(SqsError::new(
                    Code::InvalidAttributeName,
                    format!(
                        "Unknown Attribute {}.",
                        name.chars().take(100).collect::<String>()
                    ),
                ));
            }
        };
        out.insert(name.clone(), normalized);
    }
    Ok(out)
}

/// A RedrivePolicy's target and count; `None` for the empty policy (no dead-lettering).
pub fn parse_redrive(value: &str, location: &Location) -> Result<Option<Redrive>, SqsError> {
    if value.trim().is_empty() || value.trim() == "{}" {
        return Ok(None);
    }
    let bad = |why: &str| bad_value("RedrivePolicy", why);
    let json: Value =
        serde_json::from_str(value).map_err(|_| bad("the policy is not valid JSON."))?;
    let arn = json
        .get("deadLetterTargetArn")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            bad("Redrive policy does not contain mandatory attribute: deadLetterTargetArn.")
        })?;
    let target = location.queue_of_arn(arn).ok_or_else(|| {
        bad("deadLetterTargetArn is not the ARN of a queue of this account and region.")
    })?;
    let count = match json.get("maxReceiveCount") {
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => {
            return Err(bad(
                "Redrive policy does not contain mandatory attribute: maxReceiveCount.",
            ));
        }
    };
    let count = count
        .filter(|c| (1..=u64::from(RetryPolicy::MAX_DELIVERIES)).contains(c))
        .ok_or_else(|| bad("maxReceiveCount must be an integer from 1 to 1000."))?;
    Ok(Some(Redrive {
        target: target.to_owned(),
        max_receive_count: count as u32,
    }))
}

/// A RedriveAllowPolicy's permission and, for `byQueue`, its source ARNs.
pub fn parse_allow(value: &str) -> Result<(String, Vec<String>), SqsError> {
    let bad = |why: &str| bad_value("RedriveAllowPolicy", why);
    let json: Value =
        serde_json::from_str(value).map_err(|_| bad("the policy is not valid JSON."))?;
    let permission = json
        .get("redrivePermission")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("redrivePermission is missing."))?;
    let sources: Vec<String> = json
        .get("sourceQueueArns")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    match permission {
        "allowAll" | "denyAll" if sources.is_empty() => {}
        "byQueue" if (1..=10).contains(&sources.len()) => {}
        "allowAll" | "denyAll" => return Err(bad("sourceQueueArns is only for byQueue.")),
        "byQueue" => return Err(bad("byQueue needs 1 to 10 sourceQueueArns.")),
        _ => {
            return Err(bad(
                "redrivePermission must be allowAll, denyAll or byQueue.",
            ));
        }
    }
    Ok((permission.to_owned(), sources))
}

/// The broker spec of a queue created with `attributes` (normalized).
pub fn spec_for(
    attributes: &BTreeMap<String, String>,
    fifo: bool,
    location: &Location,
) -> QueueSpec {
    let mut spec = QueueSpec {
        retry: RetryPolicy {
            max_deliveries: UNBOUNDED_DELIVERIES,
            // SQS makes a message visible again the moment its visibility timeout ends;
            // the broker's smallest backoff is 1 ms.
            backoff: Backoff {
                base: Duration::from_millis(1),
                cap: Duration::from_millis(1),
                multiplier: 1.0,
                jitter: 0.0,
            },
        },
        dead_letter: DeadLetter::Disabled,
        dedup_window: if fifo { DEDUP_WINDOW } else { Duration::ZERO },
        default_ttl: Some(Duration::from_secs(u64::from(DEFAULT_RETENTION))),
        lease: lease_of(DEFAULT_VISIBILITY),
        max_delay: Duration::from_secs(u64::from(MAX_DELAY)),
        ordering: if fifo {
            OrderingMode::KeyShared
        } else {
            OrderingMode::Shared
        },
        ..QueueSpec::default()
    };
    apply_to_spec(attributes, &mut spec, location);
    spec
}

/// Sets in `spec` what `attributes` (normalized) say of the attributes the spec holds
/// ([`SPEC_HELD`]); the rest of the spec stays. An empty RedrivePolicy turns dead-lettering
/// off, back to the bound SQS queues without one have ([`UNBOUNDED_DELIVERIES`]).
pub fn apply_to_spec(
    attributes: &BTreeMap<String, String>,
    spec: &mut QueueSpec,
    location: &Location,
) {
    let number = |name: &str| attributes.get(name).and_then(|v| v.parse::<u32>().ok());
    if let Some(seconds) = number("VisibilityTimeout") {
        spec.lease = lease_of(seconds);
    }
    if let Some(seconds) = number("MessageRetentionPeriod") {
        spec.default_ttl = Some(Duration::from_secs(u64::from(seconds)));
    }
    if let Some(policy) = attributes.get("RedrivePolicy") {
        match parse_redrive(policy, location).ok().flatten() {
            Some(r) => {
                spec.retry.max_deliveries = r.max_receive_count;
                spec.dead_letter = DeadLetter::Named(
                    ferry_broker::Name::new(&r.target).expect("checked when the policy was"),
                );
            }
            None => {
                spec.retry.max_deliveries = UNBOUNDED_DELIVERIES;
                spec.dead_letter = DeadLetter::Disabled;
            }
        }
    }
}

/// A visibility timeout as a lease: 0 s is the shortest lease the broker takes, 1 ms.
pub fn lease_of(seconds: u32) -> Duration {
    if seconds == 0 {
        Duration::from_millis(1)
    } else {
        Duration::from_secs(u64::from(seconds))
    }
}

/// The RedrivePolicy a spec holds, in its normalized spelling ("" for none).
///
/// A redrive policy can only name a queue (`deadLetterTargetArn` is a queue's ARN): a
/// spec whose dead letters go to a topic (set through another front end) has none to
/// show, and is described without one rather than with an ARN of a queue that does not
/// hold its dead letters. Setting other attributes keeps that target; setting a
/// RedrivePolicy replaces it.
pub fn redrive_of_spec(name: &str, spec: &QueueSpec, location: &Location) -> String {
    let target = match &spec.dead_letter {
        DeadLetter::Named(t) => Some(t.to_string()),
        DeadLetter::Default => ferry_broker::Name::new(name)
            .ok()
            .and_then(|n| spec.dead_letter_target(&n).ok().flatten())
            .map(|t| t.to_string()),
        DeadLetter::Disabled | DeadLetter::Topic(_) => None,
    };
    match target {
        Some(t) => serde_json::json!({
            "deadLetterTargetArn": location.arn(&t),
            "maxReceiveCount": spec.retry.max_deliveries,
        })
        .to_string(),
        None => String::new(),
    }
}

/// Every attribute of a queue, as GetQueueAttributes answers them.
pub fn effective(
    info: &QueueInfo,
    record: Option<&QueueRecord>,
    location: &Location,
) -> BTreeMap<String, String> {
    let name = info.name.as_str();
    let spec = &info.spec;
    let fifo = name.ends_with(".fifo");
    let mut out = BTreeMap::new();
    let secs = |d: Duration| d.as_secs().to_string();
    out.insert("VisibilityTimeout".into(), secs(spec.lease));
    out.insert(
        "MessageRetentionPeriod".into(),
        spec.default_ttl.map_or("1209600".into(), secs),
    );
    out.insert("DelaySeconds".into(), "0".into());
    out.insert("MaximumMessageSize".into(), MAX_MESSAGE_SIZE.to_string());
    out.insert("ReceiveMessageWaitTimeSeconds".into(), "0".into());
    out.insert("SqsManagedSseEnabled".into(), "false".into());
    let redrive = redrive_of_spec(name, spec, location);
    if !redrive.is_empty() {
        out.insert("RedrivePolicy".into(), redrive);
    }
    if fifo {
        out.insert("FifoQueue".into(), "true".into());
        out.insert("ContentBasedDeduplication".into(), "false".into());
        out.insert("DeduplicationScope".into(), "queue".into());
        out.insert("FifoThroughputLimit".into(), "perQueue".into());
    }
    if let Some(record) = record {
        for (k, v) in &record.attributes {
            // The spec is the authority on what it holds: Ferry's own API may have changed
            // it since.
            if !SPEC_HELD.contains(&k.as_str()) && !v.is_empty() {
                out.insert(k.clone(), v.clone());
            }
        }
        out.insert("CreatedTimestamp".into(), record.created.to_string());
        out.insert(
            "LastModifiedTimestamp".into(),
            record.last_modified.to_string(),
        );
    }
    let state = &info.stats.state;
    out.insert(
        "ApproximateNumberOfMessages".into(),
        state.ready.to_string(),
    );
    out.insert(
        "ApproximateNumberOfMessagesNotVisible".into(),
        state.in_flight.to_string(),
    );
    out.insert(
        "ApproximateNumberOfMessagesDelayed".into(),
        state.delayed.to_string(),
    );
    out.insert("QueueArn".into(), location.arn(name));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn here() -> Location {
        Location {
            account_id: "000000000000".into(),
            region: "us-east-1".into(),
        }
    }

    fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn values_out_of_range_and_unknown_names_are_refused() {
        let l = here();
        for (name, value) in [
            ("VisibilityTimeout", "43201"),
            ("DelaySeconds", "901"),
            ("MaximumMessageSize", "1048577"),
            ("MessageRetentionPeriod", "59"),
            ("ReceiveMessageWaitTimeSeconds", "21"),
            ("FifoQueue", "true"),
            ("RedrivePolicy", "{\"maxReceiveCount\":3}"),
            ("KmsMasterKeyId", "alias/x"),
        ] {
            let e = normalize(&attrs(&[(name, value)]), false, &l).unwrap_err();
            assert_eq!(e.code, Code::InvalidAttributeValue, "{name}={value}");
        }
        let e = normalize(&attrs(&[("Colour", "blue")]), false, &l).unwrap_err();
        assert_eq!(e.code, Code::InvalidAttributeName);
        let e = normalize(&attrs(&[("QueueArn", "x")]), false, &l).unwrap_err();
        assert_eq!(e.code, Code::InvalidAttributeName);
    }

    #[test]
    fn a_dead_letter_topic_is_described_without_a_redrive_policy() {
        let spec = QueueSpec {
            dead_letter: DeadLetter::Topic(ferry_broker::Name::new("graves").unwrap()),
            ..QueueSpec::default()
        };
        assert_eq!(redrive_of_spec("q", &spec, &here()), "");
    }

    #[test]
    fn a_redrive_policy_becomes_max_deliveries_and_a_named_dead_letter_queue() {
        let l = here();
        let policy = format!(
            "{{\"deadLetterTargetArn\":\"{}\",\"maxReceiveCount\":\"3\"}}",
            l.arn("dlq")
        );
        let normalized = normalize(
            &attrs(&[("RedrivePolicy", &policy), ("VisibilityTimeout", "0")]),
            false,
            &l,
        )
        .unwrap();
        let spec = spec_for(&normalized, false, &l);
        assert_eq!(spec.retry.max_deliveries, 3);
        assert_eq!(
            spec.dead_letter,
            DeadLetter::Named(ferry_broker::Name::new("dlq").unwrap())
        );
        assert_eq!(spec.lease, Duration::from_millis(1));
        assert_eq!(redrive_of_spec("q", &spec, &l), normalized["RedrivePolicy"]);
        spec.validate().unwrap();
    }

    #[test]
    fn an_empty_redrive_policy_turns_dead_lettering_off_and_leaves_the_rest() {
        let l = here();
        let policy = format!(
            "{{\"deadLetterTargetArn\":\"{}\",\"maxReceiveCount\":3}}",
            l.arn("dlq")
        );
        let created = normalize(
            &attrs(&[("RedrivePolicy", &policy), ("VisibilityTimeout", "40")]),
            false,
            &l,
        )
        .unwrap();
        let mut spec = spec_for(&created, false, &l);
        let change = normalize(&attrs(&[("RedrivePolicy", "")]), false, &l).unwrap();
        apply_to_spec(&change, &mut spec, &l);
        assert_eq!(spec.dead_letter, DeadLetter::Disabled);
        assert_eq!(spec.retry.max_deliveries, UNBOUNDED_DELIVERIES);
        assert_eq!(spec.lease, Duration::from_secs(40), "untouched");
        assert_eq!(redrive_of_spec("q", &spec, &l), "");
    }
}
