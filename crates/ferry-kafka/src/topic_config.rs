//! Kafka's topic configs as Ferry's topic settings, both ways: which keys Ferry reports,
//! what each reads from a [`TopicSpec`], and how a change to them edits one. Pure: the
//! handlers in `api/configs.rs` and CreateTopics apply the result through the broker.
//!
//! **The keys.** Only keys with a real Ferry equivalent exist here:
//!
//! | Kafka key | Ferry setting |
//! |---|---|
//! | `cleanup.policy` | `compaction` on (`compact`), the retention bounds (`delete`) |
//! | `retention.ms` | `retention.max_age` (-1: none) |
//! | `retention.bytes` | `retention.max_bytes`, per partition as in Kafka (-1: none) |
//! | `delete.retention.ms` | `compaction.tombstone_retention` |
//! | `min.compaction.lag.ms` | `compaction.min_lag` |
//! | `max.message.bytes` | the broker's largest batch per partition (read-only) |
//! | `segment.bytes` | the broker's segment size (read-only) |
//! | `confluent.value.schema.validation` | `schema_subject`: `<topic>-value` when true |
//! | `confluent.key.schema.validation` | `false` only: Ferry checks values, not keys |
//!
//! Any other key is refused (INVALID_CONFIG, naming these), never ignored.
//!
//! **cleanup.policy.** Ferry's compaction runs with retention on top, so `compact,delete`
//! is compaction with the retention bounds, `compact` is compaction with no bounds, and
//! `delete` no compaction. Ferry keeps no bound that does not apply: while the policy lacks
//! `delete`, `retention.ms` and `retention.bytes` read as Kafka's defaults (what applies
//! once `delete` is added back), and setting a bound in the same change is refused; the
//! compaction keys likewise read as their defaults while compaction is off, and setting
//! them then is refused.
//!
//! **Schema validation.** Confluent Server's `confluent.value.schema.validation=true` makes
//! the broker check every record's value against the schema registry; in Ferry it sets the
//! topic's schema subject by Confluent's default TopicNameStrategy, `<topic>-value` (a
//! subject already set through Ferry's own API is kept), and a refused record is answered
//! INVALID_RECORD. Keys are not checked: `confluent.key.schema.validation=true` is refused
//! when set, so a producer never believes its keys are checked when they are not.

use std::time::Duration;

use ferry_broker::{TopicCompaction, TopicRetention, TopicSpec, TopicStorageLimits};

pub const CLEANUP_POLICY: &str = "cleanup.policy";
pub const RETENTION_MS: &str = "retention.ms";
pub const RETENTION_BYTES: &str = "retention.bytes";
pub const DELETE_RETENTION_MS: &str = "delete.retention.ms";
pub const MIN_COMPACTION_LAG_MS: &str = "min.compaction.lag.ms";
pub const MAX_MESSAGE_BYTES: &str = "max.message.bytes";
pub const SEGMENT_BYTES: &str = "segment.bytes";
pub const VALUE_SCHEMA_VALIDATION: &str = "confluent.value.schema.validation";
pub const KEY_SCHEMA_VALIDATION: &str = "confluent.key.schema.validation";

/// Kafka's config types (DescribeConfigs v3+).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean = 1,
    Int = 3,
    Long = 5,
    List = 7,
}

/// One topic config as Ferry reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: &'static str,
    pub value: String,
    /// The value when the topic does not set it (Ferry's default, which is Kafka's).
    pub default: String,
    /// The broker-level key Kafka names as this key's default synonym.
    pub broker_name: &'static str,
    pub read_only: bool,
    pub config_type: ConfigType,
    pub documentation: &'static str,
}

impl Entry {
    pub fn is_default(&self) -> bool {
        self.value == self.default
    }
}

/// A change to one key (IncrementalAlterConfigs' operations; AlterConfigs only sets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Set(String),
    /// Back to the default.
    Delete,
    /// Add to a list (`cleanup.policy`).
    Append(String),
    /// Remove from a list (`cleanup.policy`).
    Subtract(String),
}

/// Why a change was refused: the message for INVALID_CONFIG.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// The keys that can be changed, for messages.
const ALTERABLE: &str = "cleanup.policy, retention.ms, retention.bytes, delete.retention.ms, \
     min.compaction.lag.ms, confluent.value.schema.validation";

fn ms(d: Duration) -> String {
    d.as_millis().to_string()
}

fn bound_ms(d: Option<Duration>) -> String {
    d.map_or_else(|| "-1".to_owned(), ms)
}

fn bound_bytes(b: Option<u64>) -> String {
    b.map_or_else(|| "-1".to_owned(), |b| b.to_string())
}

/// The alterable settings as Kafka sees them, bounds kept even while they do not apply.
#[derive(Debug, Clone, PartialEq)]
struct Draft {
    max_age: Option<Duration>,
    max_bytes: Option<u64>,
    delete: bool,
    compact: bool,
    compaction: TopicCompaction,
    /// A bound was set by this change (refused when the policy ends without `delete`).
    bound_set: bool,
    /// A compaction key was set by this change (refused when compaction ends off).
    compaction_set: bool,
    /// Record values are checked against the topic's schema subject.
    value_validation: bool,
}

impl Draft {
    fn of(spec: &TopicSpec) -> Draft {
        let compact = spec.compaction.is_some();
        let bounded = spec.retention.max_age.is_some() || spec.retention.max_bytes.is_some();
        let delete = !compact || bounded;
        let defaults = TopicRetention::default();
        let (max_age, max_bytes) = if delete {
            (spec.retention.max_age, spec.retention.max_bytes)
        } else {
            (defaults.max_age, defaults.max_bytes)
        };
        Draft {
            max_age,
            max_bytes,
            delete,
            compact,
            compaction: spec.compaction.unwrap_or_default(),
            bound_set: false,
            compaction_set: false,
            value_validation: spec.schema_subject.is_some(),
        }
    }

    fn policy(&self) -> String {
        match (self.compact, self.delete) {
            (true, true) => "compact,delete",
            (true, false) => "compact",
            _ => "delete",
        }
        .to_owned()
    }

    fn apply(&mut self, name: &str, op: &Op) -> Result<(), ConfigError> {
        let defaults = Draft::of(&TopicSpec::default());
        let value = match op {
            Op::Set(value) => Some(value.as_str()),
            Op::Delete => None,
            Op::Append(_) | Op::Subtract(_) if name != CLEANUP_POLICY => {
                return Err(ConfigError(format!(
                    "{name} is not a list: only cleanup.policy takes APPEND and SUBTRACT"
                )));
            }
            Op::Append(_) | Op::Subtract(_) => None,
        };
        match name {
            CLEANUP_POLICY => {
                let (delete, compact) = match op {
                    Op::Set(v) => policy(v)?,
                    Op::Delete => (defaults.delete, defaults.compact),
                    Op::Append(v) => {
                        let (d, c) = policy(v)?;
                        (self.delete || d, self.compact || c)
                    }
                    Op::Subtract(v) => {
                        let (d, c) = policy(v)?;
                        (self.delete && !d, self.compact && !c)
                    }
                };
                if !delete && !compact {
                    return Err(ConfigError(
                        "cleanup.policy needs delete, compact or both".into(),
                    ));
                }
                if delete && !self.delete && !self.bound_set {
                    // Ferry kept no bounds while they did not apply: Kafka's defaults.
                    (self.max_age, self.max_bytes) = (defaults.max_age, defaults.max_bytes);
                }
                (self.delete, self.compact) = (delete, compact);
            }
            RETENTION_MS => {
                self.max_age = match value {
                    None => defaults.max_age,
                    Some(v) => match long(name, v)? {
                        -1 => None,
                        n if n >= 1 => Some(Duration::from_millis(n as u64)),
                        n => {
                            return Err(ConfigError(format!(
                                "retention.ms {n}: give at least 1 ms, or -1 for no age bound"
                            )));
                        }
                    },
                };
                self.bound_set |= self.max_age.is_some();
            }
            RETENTION_BYTES => {
                self.max_bytes = match value {
                    None => defaults.max_bytes,
                    Some(v) => match long(name, v)? {
                        -1 => None,
                        n if n >= 1 => Some(n as u64),
                        n => {
                            return Err(ConfigError(format!(
                                "retention.bytes {n}: give at least 1 byte, or -1 for no size \
                                 bound"
                            )));
                        }
                    },
                };
                self.bound_set |= self.max_bytes.is_some();
            }
            DELETE_RETENTION_MS | MIN_COMPACTION_LAG_MS => {
                let duration = match value {
                    None if name == DELETE_RETENTION_MS => {
                        TopicCompaction::default().tombstone_retention
                    }
                    None => TopicCompaction::default().min_lag,
                    Some(v) => match long(name, v)? {
                        n if n >= 0 => Duration::from_millis(n as u64),
                        n => {
                            return Err(ConfigError(format!(
                                "{name} {n}: give 0 or more milliseconds"
                            )));
                        }
                    },
                };
                if name == DELETE_RETENTION_MS {
                    self.compaction.tombstone_retention = duration;
                } else {
                    self.compaction.min_lag = duration;
                }
                self.compaction_set |= value.is_some();
            }
            VALUE_SCHEMA_VALIDATION => {
                self.value_validation = match value {
                    None => false,
                    Some(v) => boolean(name, v)?,
                };
            }
            KEY_SCHEMA_VALIDATION => {
                if value.map(|v| boolean(name, v)).transpose()? == Some(true) {
                    return Err(ConfigError(format!(
                        "{KEY_SCHEMA_VALIDATION}=true is not supported: Ferry checks record \
                         values against the schema registry, not keys; leave it false and \
                         use {VALUE_SCHEMA_VALIDATION}=true for values"
                    )));
                }
            }
            MAX_MESSAGE_BYTES | SEGMENT_BYTES => {
                return Err(ConfigError(format!(
                    "{name} is read-only in Ferry: every topic's partitions share the broker's \
                     limits and segment size (see the broker's configuration); alterable: \
                     {ALTERABLE}"
                )));
            }
            other => {
                return Err(ConfigError(format!(
                    "Ferry has no topic config {other:?}; the configs it maps are {ALTERABLE} \
                     (and, read-only, max.message.bytes and segment.bytes)"
                )));
            }
        }
        Ok(())
    }

    /// `base` (topic `topic`'s spec) with these settings; refuses settings that would not
    /// apply.
    fn into_spec(self, topic: &str, base: &TopicSpec) -> Result<TopicSpec, ConfigError> {
        if !self.delete && self.bound_set {
            return Err(ConfigError(
                "retention.ms and retention.bytes apply only when cleanup.policy includes \
                 delete; use cleanup.policy=compact,delete to bound a compacted topic"
                    .into(),
            ));
        }
        if !self.compact && self.compaction_set {
            return Err(ConfigError(
                "delete.retention.ms and min.compaction.lag.ms apply only when cleanup.policy \
                 includes compact"
                    .into(),
            ));
        }
        let mut spec = base.clone();
        (spec.retention.max_age, spec.retention.max_bytes) = if self.delete {
            (self.max_age, self.max_bytes)
        } else {
            (None, None)
        };
        spec.compaction = self.compact.then_some(self.compaction);
        spec.schema_subject = if self.value_validation {
            // TopicNameStrategy, unless the topic already names its subject.
            Some(
                base.schema_subject
                    .clone()
                    .unwrap_or_else(|| format!("{topic}-value")),
            )
        } else {
            None
        };
        Ok(spec)
    }
}

fn long(name: &str, value: &str) -> Result<i64, ConfigError> {
    value
        .trim()
        .parse()
        .map_err(|_| ConfigError(format!("{name} {value:?} is not a whole number")))
}

fn boolean(name: &str, value: &str) -> Result<bool, ConfigError> {
    match value.trim() {
        v if v.eq_ignore_ascii_case("true") => Ok(true),
        v if v.eq_ignore_ascii_case("false") => Ok(false),
        other => Err(ConfigError(format!("{name} {other:?}: give true or false"))),
    }
}

/// `(delete, compact)` from a `cleanup.policy` list.
fn policy(value: &str) -> Result<(bool, bool), ConfigError> {
    let (mut delete, mut compact) = (false, false);
    for word in value.split(',').map(str::trim) {
        match word {
            "delete" => delete = true,
            "compact" => compact = true,
            other => {
                return Err(ConfigError(format!(
                    "cleanup.policy {other:?}: give delete, compact, or compact,delete"
                )));
            }
        }
    }
    Ok((delete, compact))
}

/// `spec` (topic `topic`'s) with `changes` applied in order, from `spec`'s own settings
/// (IncrementalAlterConfigs) or from the defaults (`replace`: AlterConfigs and
/// CreateTopics, where a key not given is the default). Only the settings Kafka's keys map
/// to change; the partition count, durability and Ferry's own settings are kept.
pub fn apply(
    topic: &str,
    spec: &TopicSpec,
    changes: &[(String, Op)],
    replace: bool,
) -> Result<TopicSpec, ConfigError> {
    let mut seen = std::collections::BTreeSet::new();
    if let Some((name, _)) = changes.iter().find(|(name, _)| !seen.insert(name)) {
        return Err(ConfigError(format!("{name} is given twice")));
    }
    let mut draft = if replace {
        Draft::of(&TopicSpec::default())
    } else {
        Draft::of(spec)
    };
    // The policy first: whether a bound or compaction key applies depends on it.
    let (policies, others): (Vec<_>, Vec<_>) =
        changes.iter().partition(|(name, _)| name == CLEANUP_POLICY);
    for (name, op) in policies.into_iter().chain(others) {
        draft.apply(name, op)?;
    }
    draft.into_spec(topic, spec)
}

/// The topic configs Ferry reports for `spec`, in a fixed order.
pub fn describe(spec: &TopicSpec, limits: &TopicStorageLimits) -> Vec<Entry> {
    let draft = Draft::of(spec);
    let defaults = Draft::of(&TopicSpec::default());
    let entry = |name, value: String, default: String, broker_name, config_type, doc| Entry {
        name,
        value,
        default,
        broker_name,
        read_only: false,
        config_type,
        documentation: doc,
    };
    let fixed = |name, value: String, broker_name, doc| Entry {
        default: value.clone(),
        read_only: true,
        ..entry(
            name,
            value,
            String::new(),
            broker_name,
            ConfigType::Int,
            doc,
        )
    };
    vec![
        entry(
            CLEANUP_POLICY,
            draft.policy(),
            defaults.policy(),
            "log.cleanup.policy",
            ConfigType::List,
            "delete: retention bounds; compact: keep the latest record of each key; both.",
        ),
        entry(
            RETENTION_MS,
            bound_ms(draft.max_age),
            bound_ms(defaults.max_age),
            "log.retention.ms",
            ConfigType::Long,
            "Records older than this (by publish time) are deleted, by whole segments; -1: none.",
        ),
        entry(
            RETENTION_BYTES,
            bound_bytes(draft.max_bytes),
            bound_bytes(defaults.max_bytes),
            "log.retention.bytes",
            ConfigType::Long,
            "The most bytes each partition keeps, by whole segments; -1: no bound.",
        ),
        entry(
            DELETE_RETENTION_MS,
            ms(draft.compaction.tombstone_retention),
            ms(defaults.compaction.tombstone_retention),
            "log.cleaner.delete.retention.ms",
            ConfigType::Long,
            "How long a tombstone stays readable on a compacted topic.",
        ),
        entry(
            MIN_COMPACTION_LAG_MS,
            ms(draft.compaction.min_lag),
            ms(defaults.compaction.min_lag),
            "log.cleaner.min.compaction.lag.ms",
            ConfigType::Long,
            "Records younger than this are not compacted.",
        ),
        entry(
            VALUE_SCHEMA_VALIDATION,
            draft.value_validation.to_string(),
            defaults.value_validation.to_string(),
            VALUE_SCHEMA_VALIDATION,
            ConfigType::Boolean,
            "Check every record's value against the schema registry subject <topic>-value; \
             a record that does not match is refused with INVALID_RECORD.",
        ),
        fixed(
            MAX_MESSAGE_BYTES,
            limits.max_batch_bytes.to_string(),
            "message.max.bytes",
            "The largest batch a partition takes; set by the broker's limits.",
        ),
        fixed(
            SEGMENT_BYTES,
            limits.segment_bytes.to_string(),
            "log.segment.bytes",
            "The segment size of every partition's log; set by the broker.",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: TopicStorageLimits = TopicStorageLimits {
        max_batch_bytes: 1000,
        segment_bytes: 2000,
    };

    fn value(spec: &TopicSpec, name: &str) -> String {
        describe(spec, &LIMITS)
            .into_iter()
            .find(|e| e.name == name)
            .unwrap()
            .value
    }

    fn set(name: &str, value: &str) -> (String, Op) {
        (name.to_owned(), Op::Set(value.to_owned()))
    }

    #[test]
    fn the_default_spec_reads_as_kafkas_defaults() {
        let entries = describe(&TopicSpec::default(), &LIMITS);
        assert!(entries.iter().all(Entry::is_default), "{entries:?}");
        let spec = TopicSpec::default();
        assert_eq!(value(&spec, RETENTION_MS), "604800000");
        assert_eq!(value(&spec, RETENTION_BYTES), "-1");
        assert_eq!(value(&spec, CLEANUP_POLICY), "delete");
        assert_eq!(value(&spec, MAX_MESSAGE_BYTES), "1000");
    }

    #[test]
    fn retention_keys_set_ferrys_bounds() {
        let spec = apply(
            "t",
            &TopicSpec::default(),
            &[set(RETENTION_MS, "60000"), set(RETENTION_BYTES, "-1")],
            false,
        )
        .unwrap();
        assert_eq!(spec.retention.max_age, Some(Duration::from_secs(60)));
        assert_eq!(spec.retention.max_bytes, None);
        assert_eq!(value(&spec, RETENTION_MS), "60000");
        let unbounded = apply("t", &spec, &[set(RETENTION_MS, "-1")], false).unwrap();
        assert_eq!(unbounded.retention.max_age, None);
        let back = apply("t", &spec, &[(RETENTION_MS.into(), Op::Delete)], false).unwrap();
        assert_eq!(back.retention, TopicRetention::default());
    }

    #[test]
    fn cleanup_policy_maps_onto_compaction_and_the_bounds() {
        let base = TopicSpec::default();
        let compact = apply("t", &base, &[set(CLEANUP_POLICY, "compact")], false).unwrap();
        assert!(compact.compaction.is_some());
        assert_eq!(
            (compact.retention.max_age, compact.retention.max_bytes),
            (None, None)
        );
        assert_eq!(value(&compact, CLEANUP_POLICY), "compact");
        assert_eq!(
            value(&compact, RETENTION_MS),
            "604800000",
            "dormant default"
        );
        let both = apply(
            "t",
            &compact,
            &[(CLEANUP_POLICY.into(), Op::Append("delete".into()))],
            false,
        )
        .unwrap();
        assert_eq!(value(&both, CLEANUP_POLICY), "compact,delete");
        assert_eq!(both.retention.max_age, TopicRetention::default().max_age);
        let hour = apply(
            "t",
            &base,
            &[
                set(CLEANUP_POLICY, "delete,compact"),
                set(RETENTION_MS, "3600000"),
            ],
            true,
        )
        .unwrap();
        assert_eq!(hour.retention.max_age, Some(Duration::from_secs(3600)));
        assert!(hour.compaction.is_some());
        let off = apply(
            "t",
            &hour,
            &[(CLEANUP_POLICY.into(), Op::Subtract("compact".into()))],
            false,
        )
        .unwrap();
        assert_eq!(off.compaction, None);
        assert_eq!(off.retention.max_age, Some(Duration::from_secs(3600)));
        let lag = apply("t", &compact, &[set(MIN_COMPACTION_LAG_MS, "5000")], false).unwrap();
        assert_eq!(lag.compaction.unwrap().min_lag, Duration::from_secs(5));
    }

    #[test]
    fn changes_that_would_not_apply_or_are_unknown_are_refused() {
        let base = TopicSpec::default();
        let refused = |changes: &[(String, Op)]| apply("t", &base, changes, false).unwrap_err().0;
        assert!(refused(&[set("min.insync.replicas", "2")]).contains("no topic config"));
        assert!(refused(&[set(SEGMENT_BYTES, "1")]).contains("read-only"));
        assert!(refused(&[set(RETENTION_MS, "0")]).contains("at least 1 ms"));
        assert!(refused(&[set(RETENTION_MS, "soon")]).contains("not a whole number"));
        assert!(refused(&[set(CLEANUP_POLICY, "archive")]).contains("archive"));
        assert!(
            refused(&[set(CLEANUP_POLICY, "compact"), set(RETENTION_MS, "10")])
                .contains("compact,delete")
        );
        assert!(refused(&[set(DELETE_RETENTION_MS, "10")]).contains("includes compact"));
        assert!(
            refused(&[(CLEANUP_POLICY.into(), Op::Subtract("delete".into()))])
                .contains("delete, compact or both")
        );
        assert!(refused(&[(RETENTION_MS.into(), Op::Append("1".into()))]).contains("not a list"));
        assert!(refused(&[set(RETENTION_MS, "1"), set(RETENTION_MS, "2")]).contains("twice"));
    }

    #[test]
    fn a_replacing_change_resets_what_it_does_not_name() {
        let hour = apply(
            "t",
            &TopicSpec::default(),
            &[
                set(RETENTION_MS, "3600000"),
                set(CLEANUP_POLICY, "compact,delete"),
            ],
            false,
        )
        .unwrap();
        let replaced = apply("t", &hour, &[set(RETENTION_BYTES, "1000")], true).unwrap();
        assert_eq!(
            replaced.retention.max_age,
            TopicRetention::default().max_age
        );
        assert_eq!(replaced.retention.max_bytes, Some(1000));
        assert_eq!(replaced.compaction, None);
        assert_eq!(replaced.partitions, hour.partitions);
    }

    #[test]
    fn value_schema_validation_requires_the_topics_value_subject_and_key_validation_is_refused() {
        let on = apply(
            "orders",
            &TopicSpec::default(),
            &[set(VALUE_SCHEMA_VALIDATION, "TRUE")],
            false,
        )
        .unwrap();
        assert_eq!(on.schema_subject.as_deref(), Some("orders-value"));
        let entry = |spec: &TopicSpec| {
            describe(spec, &LIMITS)
                .into_iter()
                .find(|e| e.name == VALUE_SCHEMA_VALIDATION)
                .unwrap()
        };
        assert_eq!(entry(&on).value, "true");
        assert!(!entry(&on).is_default());
        assert_eq!(entry(&TopicSpec::default()).value, "false");
        // A subject set through Ferry's own API is kept while validation stays on.
        let named = TopicSpec {
            schema_subject: Some("orders".into()),
            ..TopicSpec::default()
        };
        let kept = apply(
            "orders",
            &named,
            &[
                set(RETENTION_MS, "1000"),
                set(VALUE_SCHEMA_VALIDATION, "true"),
            ],
            false,
        )
        .unwrap();
        assert_eq!(kept.schema_subject.as_deref(), Some("orders"));
        let off = apply(
            "orders",
            &on,
            &[(VALUE_SCHEMA_VALIDATION.into(), Op::Delete)],
            false,
        )
        .unwrap();
        assert_eq!(off.schema_subject, None);
        let refused = |changes: &[(String, Op)]| {
            apply("orders", &TopicSpec::default(), changes, false)
                .unwrap_err()
                .0
        };
        assert!(refused(&[set(VALUE_SCHEMA_VALIDATION, "yes")]).contains("true or false"));
        assert!(refused(&[set(KEY_SCHEMA_VALIDATION, "true")]).contains("not keys"));
        let keys_off = apply(
            "orders",
            &TopicSpec::default(),
            &[set(KEY_SCHEMA_VALIDATION, "false")],
            false,
        )
        .unwrap();
        assert_eq!(keys_off, TopicSpec::default());
    }
}
