//! A [`TopicSpec`]'s stored form (under `topic/<name>`): `ferry-topic-spec 1`, then every
//! field, in the shared text form of [`super`]. The compaction sub-settings are present
//! exactly when compaction is on, and `schema_subject` exactly when the topic requires one.

use crate::topic::spec::{KeylessPlacement, TopicCompaction, TopicRetention, TopicSpec};

use super::{Fields, Writer, durability, duration};

const FIRST_LINE: &str = "ferry-topic-spec 1";

pub fn encode(spec: &TopicSpec) -> String {
    let d = duration;
    let lines = [
        ("partitions", spec.partitions.to_string()),
        (
            "retention.max_age",
            spec.retention.max_age.map_or("none".to_owned(), d),
        ),
        (
            "retention.max_bytes",
            spec.retention
                .max_bytes
                .map_or("none".to_owned(), |b| b.to_string()),
        ),
        (
            "retention.overrides_subscriptions",
            spec.retention.overrides_subscriptions.to_string(),
        ),
        (
            "keyless",
            match spec.keyless {
                KeylessPlacement::RoundRobin => "round_robin",
                KeylessPlacement::StickyBatch => "sticky_batch",
            }
            .to_owned(),
        ),
        ("durability", durability(spec.durability)),
        ("producer_state_window", d(spec.producer_state_window)),
    ];
    // Its sub-settings are present exactly when compaction is on.
    let compaction = match spec.compaction {
        None => vec![("compaction", "none".to_owned())],
        Some(c) => vec![
            ("compaction", "on".to_owned()),
            ("compaction.tombstone_retention", d(c.tombstone_retention)),
            ("compaction.min_lag", d(c.min_lag)),
        ],
    };
    let mut out = Writer::new(FIRST_LINE);
    for (key, value) in lines.into_iter().chain(compaction) {
        out.setting(key, &value);
    }
    // Written only when set, so a spec without one keeps the bytes earlier versions wrote.
    if let Some(subject) = &spec.schema_subject {
        out.setting("schema_subject", subject);
    }
    out.finish()
}

/// The spec in `bytes`; the error describes the problem.
pub fn decode(bytes: &[u8]) -> Result<TopicSpec, String> {
    let mut f = Fields::read(bytes, FIRST_LINE)?;
    let spec = TopicSpec {
        partitions: f.parse("partitions")?,
        retention: TopicRetention {
            max_age: f.optional_duration("retention.max_age")?,
            max_bytes: f.optional("retention.max_bytes")?,
            // Absent from specs stored before the setting existed: those waited.
            overrides_subscriptions: match f.take_if_present("retention.overrides_subscriptions") {
                None | Some("false") => false,
                Some("true") => true,
                Some(other) => {
                    return Err(format!(
                        "retention.overrides_subscriptions {other:?} is neither true nor false"
                    ));
                }
            },
        },
        keyless: match f.take("keyless")? {
            "round_robin" => KeylessPlacement::RoundRobin,
            "sticky_batch" => KeylessPlacement::StickyBatch,
            other => return Err(format!("keyless {other:?} is unknown")),
        },
        durability: f.durability("durability")?,
        producer_state_window: f.duration("producer_state_window")?,
        // Absent from specs stored before the setting existed: those were not compacted.
        compaction: match f.take_if_present("compaction") {
            None | Some("none") => None,
            Some("on") => Some(TopicCompaction {
                tombstone_retention: f.duration("compaction.tombstone_retention")?,
                min_lag: f.duration("compaction.min_lag")?,
            }),
            Some(other) => return Err(format!("compaction {other:?} is neither none nor on")),
        },
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
    use crate::topic::spec::Durability;

    /// A spec with a value other than the default wherever the text form has a choice.
    fn unusual() -> TopicSpec {
        TopicSpec {
            partitions: 1024,
            retention: TopicRetention {
                max_age: None,
                max_bytes: Some(12_345),
                overrides_subscriptions: true,
            },
            keyless: KeylessPlacement::RoundRobin,
            durability: Durability::Interval(Duration::from_nanos(250_000_001)),
            producer_state_window: Duration::from_millis(1),
            compaction: Some(TopicCompaction {
                tombstone_retention: Duration::from_nanos(1_500_000_000),
                min_lag: Duration::ZERO,
            }),
            schema_subject: None,
        }
    }

    #[test]
    fn a_spec_stored_by_earlier_versions_reads_and_writes_the_same() {
        // The stored form existing broker directories hold: it must keep reading as the
        // same spec, and the spec must keep writing these bytes.
        let stored = "ferry-topic-spec 1\n\
            partitions=1024\n\
            retention.max_age=none\n\
            retention.max_bytes=12345\n\
            retention.overrides_subscriptions=true\n\
            keyless=round_robin\n\
            durability=interval:0.250000001\n\
            producer_state_window=0.001000000\n\
            compaction=on\n\
            compaction.tombstone_retention=1.500000000\n\
            compaction.min_lag=0.000000000\n";
        let expected = unusual();
        assert_eq!(decode(stored.as_bytes()).unwrap(), expected);
        assert_eq!(encode(&expected), stored);
    }

    #[test]
    fn default_and_unusual_specs_round_trip() {
        let odd = unusual();
        let none = TopicSpec {
            durability: Durability::None,
            ..TopicSpec::with_partitions(3)
        };
        let with_schema = TopicSpec {
            schema_subject: Some("orders-value".to_owned()),
            ..TopicSpec::default()
        };
        for spec in [TopicSpec::default(), odd, none, with_schema] {
            assert_eq!(decode(encode(&spec).as_bytes()).unwrap(), spec);
        }
    }

    #[test]
    fn default_spec_reads_as_documented() {
        assert_eq!(
            encode(&TopicSpec::default()),
            "ferry-topic-spec 1\npartitions=1\nretention.max_age=604800.000000000\n\
             retention.max_bytes=none\nretention.overrides_subscriptions=false\n\
             keyless=sticky_batch\ndurability=fsync\n\
             producer_state_window=604800.000000000\ncompaction=none\n"
        );
        let compacted = TopicSpec {
            compaction: Some(TopicCompaction::default()),
            ..TopicSpec::default()
        };
        assert!(encode(&compacted).ends_with(
            "compaction=on\ncompaction.tombstone_retention=86400.000000000\n\
             compaction.min_lag=0.000000000\n"
        ));
    }

    #[test]
    fn missing_repeated_unknown_and_invalid_settings_are_refused() {
        let text = encode(&TopicSpec::default());
        let missing = text.replace("keyless=sticky_batch\n", "");
        assert!(decode(missing.as_bytes()).unwrap_err().contains("keyless"));
        let repeated = format!("{text}partitions=2\n");
        assert!(decode(repeated.as_bytes()).unwrap_err().contains("twice"));
        let unknown = format!("{text}cleanup=compact\n");
        assert!(decode(unknown.as_bytes()).unwrap_err().contains("cleanup"));
        // Compaction: a value other than none or on, sub-settings without it, or it without
        // its sub-settings.
        let odd_compaction = text.replace("compaction=none", "compaction=compact");
        assert!(
            decode(odd_compaction.as_bytes())
                .unwrap_err()
                .contains("neither none nor on")
        );
        let stray = format!("{text}compaction.min_lag=0.000000000\n");
        assert!(
            decode(stray.as_bytes())
                .unwrap_err()
                .contains("compaction.min_lag")
        );
        let bare = text.replace("compaction=none", "compaction=on");
        assert!(
            decode(bare.as_bytes())
                .unwrap_err()
                .contains("compaction.tombstone_retention")
        );
        let older_compaction = text.replace("compaction=none\n", "");
        assert_eq!(
            decode(older_compaction.as_bytes()).unwrap(),
            TopicSpec::default()
        );
        let invalid = text.replace("partitions=1", "partitions=0");
        assert!(
            decode(invalid.as_bytes())
                .unwrap_err()
                .contains("partitions")
        );
        let odd_value = text.replace("keyless=sticky_batch", "keyless=random");
        assert!(decode(odd_value.as_bytes()).is_err());
        let odd_flag = text.replace("subscriptions=false", "subscriptions=yes");
        assert!(decode(odd_flag.as_bytes()).unwrap_err().contains("neither"));
        // Stored before the setting existed: retention waited for subscriptions.
        let older = text.replace("retention.overrides_subscriptions=false\n", "");
        assert_eq!(decode(older.as_bytes()).unwrap(), TopicSpec::default());
        let queue_spec = super::super::queue::encode(&crate::QueueSpec::default());
        assert!(
            decode(queue_spec.as_bytes())
                .unwrap_err()
                .contains("first line")
        );
        assert!(decode(b"\xff").is_err());
    }
}
