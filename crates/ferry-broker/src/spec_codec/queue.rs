//! A [`QueueSpec`]'s stored form (under `queue/<name>`): `ferry-queue-spec 1`, then every
//! field, in the shared text form of [`super`]. `schema_subject` is present exactly when the
//! queue requires one, so specs stored before it existed read as requiring none.
//! `dead_letter` is `default`, `disabled`, `named:<queue>` or `topic:<topic>`: the prefixes
//! keep a queue target and a topic target of the same name apart, and specs stored before
//! topic targets existed never start with `topic:`.

use crate::name::Name;
use crate::retry::{Backoff, RetryPolicy};
use crate::spec::{DeadLetter, LengthLimit, OrderingMode, OverflowPolicy, QueueSpec};

use super::{Fields, Writer, durability, duration};

const FIRST_LINE: &str = "ferry-queue-spec 1";

pub fn encode(spec: &QueueSpec) -> String {
    let d = duration;
    let opt = |v: Option<u64>| v.map_or("none".to_owned(), |v| v.to_string());
    let lines = [
        (
            "retry.max_deliveries",
            spec.retry.max_deliveries.to_string(),
        ),
        ("retry.backoff.base", d(spec.retry.backoff.base)),
        ("retry.backoff.cap", d(spec.retry.backoff.cap)),
        (
            "retry.backoff.multiplier",
            spec.retry.backoff.multiplier.to_string(),
        ),
        (
            "retry.backoff.jitter",
            spec.retry.backoff.jitter.to_string(),
        ),
        (
            "dead_letter",
            match &spec.dead_letter {
                DeadLetter::Default => "default".to_owned(),
                DeadLetter::Disabled => "disabled".to_owned(),
                DeadLetter::Named(name) => format!("named:{name}"),
                DeadLetter::Topic(name) => format!("topic:{name}"),
            },
        ),
        ("dedup_window", d(spec.dedup_window)),
        ("default_ttl", spec.default_ttl.map_or("none".to_owned(), d)),
        ("lease", d(spec.lease)),
        ("max_delay", d(spec.max_delay)),
        ("priority_levels", spec.priority_levels.to_string()),
        (
            "lower_priority_share",
            spec.lower_priority_share.to_string(),
        ),
        (
            "ordering",
            match spec.ordering {
                OrderingMode::Shared => "shared",
                OrderingMode::KeyShared => "key_shared",
                OrderingMode::Exclusive => "exclusive",
            }
            .to_owned(),
        ),
        (
            "length_limit.max_messages",
            opt(spec.length_limit.max_messages),
        ),
        ("length_limit.max_bytes", opt(spec.length_limit.max_bytes)),
        (
            "length_limit.overflow",
            match spec.length_limit.overflow {
                OverflowPolicy::RejectPublish => "reject_publish",
                OverflowPolicy::DropHead => "drop_head",
                OverflowPolicy::DeadLetterHead => "dead_letter_head",
            }
            .to_owned(),
        ),
        ("durability", durability(spec.durability)),
        ("dead_letter_retention", d(spec.dead_letter_retention)),
    ];
    let mut out = Writer::new(FIRST_LINE);
    for (key, value) in lines {
        out.setting(key, &value);
    }
    // Written only when set, so a spec without one keeps the bytes earlier versions wrote.
    if let Some(subject) = &spec.schema_subject {
        out.setting("schema_subject", subject);
    }
    out.finish()
}

/// The spec in `bytes`; the error describes the problem.
pub fn decode(bytes: &[u8]) -> Result<QueueSpec, String> {
    let mut f = Fields::read(bytes, FIRST_LINE)?;
    let spec = QueueSpec {
        retry: RetryPolicy {
            max_deliveries: f.parse("retry.max_deliveries")?,
            backoff: Backoff {
                base: f.duration("retry.backoff.base")?,
                cap: f.duration("retry.backoff.cap")?,
                multiplier: f.parse("retry.backoff.multiplier")?,
                jitter: f.parse("retry.backoff.jitter")?,
            },
        },
        dead_letter: match f.take("dead_letter")? {
            "default" => DeadLetter::Default,
            "disabled" => DeadLetter::Disabled,
            other => {
                let name = |n: &str| Name::new(n).map_err(|e| e.to_string());
                if let Some(queue) = other.strip_prefix("named:") {
                    DeadLetter::Named(name(queue)?)
                } else if let Some(topic) = other.strip_prefix("topic:") {
                    DeadLetter::Topic(name(topic)?)
                } else {
                    return Err(format!("dead_letter {other:?} is unknown"));
                }
            }
        },
        dedup_window: f.duration("dedup_window")?,
        default_ttl: f.optional_duration("default_ttl")?,
        lease: f.duration("lease")?,
        max_delay: f.duration("max_delay")?,
        priority_levels: f.parse("priority_levels")?,
        lower_priority_share: f.parse("lower_priority_share")?,
        ordering: match f.take("ordering")? {
            "shared" => OrderingMode::Shared,
            "key_shared" => OrderingMode::KeyShared,
            "exclusive" => OrderingMode::Exclusive,
            other => return Err(format!("ordering {other:?} is unknown")),
        },
        length_limit: LengthLimit {
            max_messages: f.optional("length_limit.max_messages")?,
            max_bytes: f.optional("length_limit.max_bytes")?,
            overflow: match f.take("length_limit.overflow")? {
                "reject_publish" => OverflowPolicy::RejectPublish,
                "drop_head" => OverflowPolicy::DropHead,
                "dead_letter_head" => OverflowPolicy::DeadLetterHead,
                other => return Err(format!("length_limit.overflow {other:?} is unknown")),
            },
        },
        durability: f.durability("durability")?,
        dead_letter_retention: f.duration("dead_letter_retention")?,
        // Absent from specs stored before the setting existed, and from specs without one.
        schema_subject: f.take_if_present("schema_subject").map(str::to_owned),
    };
    f.finish()?;
    spec.validate().map_err(|e| e.to_string())?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::spec::Durability;

    /// A spec with a value other than the default wherever the text form has a choice.
    fn unusual() -> QueueSpec {
        let mut spec = QueueSpec {
            dead_letter: DeadLetter::Named(Name::new("graveyard").unwrap()),
            default_ttl: Some(Duration::from_nanos(1_500_000_123)),
            priority_levels: 10,
            lower_priority_share: 0.1 + 0.2,
            ordering: OrderingMode::KeyShared,
            durability: Durability::Interval(Duration::from_millis(250)),
            ..QueueSpec::default()
        };
        spec.retry.backoff.multiplier = 1.7;
        spec.length_limit = LengthLimit {
            max_messages: Some(10),
            max_bytes: None,
            overflow: OverflowPolicy::DeadLetterHead,
        };
        spec
    }

    #[test]
    fn a_spec_stored_by_earlier_versions_reads_and_writes_the_same() {
        // The stored form existing broker directories hold: it must keep reading as the
        // same spec, and the spec must keep writing these bytes.
        let stored = "ferry-queue-spec 1\n\
            retry.max_deliveries=5\n\
            retry.backoff.base=1.000000000\n\
            retry.backoff.cap=300.000000000\n\
            retry.backoff.multiplier=1.7\n\
            retry.backoff.jitter=0.25\n\
            dead_letter=named:graveyard\n\
            dedup_window=300.000000000\n\
            default_ttl=1.500000123\n\
            lease=30.000000000\n\
            max_delay=7776000.000000000\n\
            priority_levels=10\n\
            lower_priority_share=0.30000000000000004\n\
            ordering=key_shared\n\
            length_limit.max_messages=10\n\
            length_limit.max_bytes=none\n\
            length_limit.overflow=dead_letter_head\n\
            durability=interval:0.250000000\n\
            dead_letter_retention=1209600.000000000\n";
        let expected = unusual();
        assert_eq!(decode(stored.as_bytes()).unwrap(), expected);
        assert_eq!(encode(&expected), stored);
    }

    #[test]
    fn default_and_unusual_specs_round_trip() {
        let odd = unusual();
        let exclusive = QueueSpec {
            ordering: OrderingMode::Exclusive,
            ..QueueSpec::default()
        };
        let with_schema = QueueSpec {
            schema_subject: Some("orders-value".to_owned()),
            ..QueueSpec::default()
        };
        for spec in [QueueSpec::default(), odd, exclusive, with_schema] {
            assert_eq!(decode(encode(&spec).as_bytes()).unwrap(), spec);
        }
    }

    #[test]
    fn a_dead_letter_topic_round_trips_apart_from_a_queue_of_the_same_name() {
        let to_topic = QueueSpec {
            dead_letter: DeadLetter::Topic(Name::new("graveyard").unwrap()),
            ..unusual()
        };
        let text = encode(&to_topic);
        assert!(text.contains("\ndead_letter=topic:graveyard\n"), "{text}");
        assert_eq!(decode(text.as_bytes()).unwrap(), to_topic);
        // The same name as a queue target stays a queue target.
        let to_queue = decode(encode(&unusual()).as_bytes()).unwrap();
        assert_eq!(
            to_queue.dead_letter,
            DeadLetter::Named(Name::new("graveyard").unwrap())
        );
        let bad = text.replace("topic:graveyard", "topic:");
        assert!(decode(bad.as_bytes()).is_err());
    }

    #[test]
    fn missing_unknown_and_invalid_settings_are_refused() {
        let text = encode(&QueueSpec::default());
        let missing = text.replace("lease=30.000000000\n", "");
        assert!(decode(missing.as_bytes()).unwrap_err().contains("lease"));
        let unknown = format!("{text}colour=blue\n");
        assert!(decode(unknown.as_bytes()).unwrap_err().contains("colour"));
        let invalid = text.replace("lease=30.000000000", "lease=0.000000000");
        assert!(decode(invalid.as_bytes()).is_err());
        assert!(decode(b"something else").is_err());
    }
}
