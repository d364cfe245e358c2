//! How one topic behaves: how many partitions, how long it keeps records, where keyless
//! records go, when a publish is acknowledged, and how long idempotent producers are
//! remembered.

use std::time::Duration;

pub use ferry_storage::Durability;

use crate::error::{BrokerError, Result, human};
use crate::message::millis;
use crate::spec::durability_problem;

const DAY: u64 = 24 * 3600;

/// How long a topic keeps records. Either bound, or both, or neither (keep forever).
/// Retention deletes whole segments of a partition's log, oldest first, so a partition may
/// keep somewhat more (up to one segment) than the bounds say — never less.
///
/// By default the bounds yield to subscriptions: a record a subscription has not settled
/// (or not yet taken in) is kept however old, so a stalled subscription makes its topic
/// grow — watch its lag. With [`overrides_subscriptions`](Self::overrides_subscriptions)
/// the bounds win instead, as in Kafka, and what a subscription loses is counted and
/// reported, never silent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicRetention {
    /// Records older than this (by publish time) are deleted.
    pub max_age: Option<Duration>,
    /// The most bytes each partition keeps — per partition, as Kafka's `retention.bytes`:
    /// a topic of 3 partitions keeps up to three times this.
    pub max_bytes: Option<u64>,
    /// Whether the bounds apply to records subscriptions still need. When `true`, a
    /// subscription's unsettled messages (ready, delayed, retrying or in flight) whose
    /// records retention deletes are taken out of it — counted in its queue's
    /// [`skipped`](crate::QueueStats::skipped) — and the topic offsets it loses are
    /// reported as ranges by [`describe_subscription`](crate::Broker::describe_subscription).
    /// Default `false`: retention waits for subscriptions.
    pub overrides_subscriptions: bool,
}

impl Default for TopicRetention {
    /// Seven days, no size bound: Kafka's default.
    fn default() -> Self {
        TopicRetention {
            max_age: Some(Duration::from_secs(7 * DAY)),
            max_bytes: None,
            overrides_subscriptions: false,
        }
    }
}

/// Where messages without a key go. (Keyed messages always go to the key's partition.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeylessPlacement {
    /// Each keyless message goes to the next partition in turn: the most even spread, at
    /// the cost of one storage append per partition a batch touches.
    RoundRobin,
    /// All keyless messages of one publish call go to one partition, the next call to the
    /// next partition: one append per call, spread evenly over calls (Kafka's sticky
    /// partitioner, with the publish call as its batch).
    #[default]
    StickyBatch,
}

/// Compaction by key, as Kafka's `cleanup.policy=compact`: each partition keeps the latest
/// record of every key, and older records of the key are removed (their offsets become gaps
/// that reads step over). A tombstone — a keyed message with an empty payload — deletes its
/// key: it stays readable for `tombstone_retention`, so readers see the deletion, then goes.
/// Every message published to a compacted topic needs a key
/// ([`BrokerError::KeyRequired`]). Compaction never removes a record a subscription has not
/// settled, and works on whole sealed segments, so the newest records are compacted only
/// once their segment rolls. Retention still applies on top.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicCompaction {
    /// How long a tombstone stays readable (by its publish time). Default one day.
    pub tombstone_retention: Duration,
    /// Records younger than this are not compacted: every value stays readable for at
    /// least this long (Kafka's `min.compaction.lag.ms`). Default zero.
    pub min_lag: Duration,
}

impl Default for TopicCompaction {
    fn default() -> Self {
        TopicCompaction {
            tombstone_retention: Duration::from_secs(DAY),
            min_lag: Duration::ZERO,
        }
    }
}

/// The settings of one topic. Check with [`TopicSpec::validate`].
#[derive(Debug, Clone, PartialEq)]
pub struct TopicSpec {
    /// 1 to [`TopicSpec::MAX_PARTITIONS`]; only ever increased (see
    /// [`Broker::add_partitions`](crate::Broker::add_partitions)).
    pub partitions: u32,
    pub retention: TopicRetention,
    pub keyless: KeylessPlacement,
    /// When a publish is acknowledged relative to the disk.
    pub durability: Durability,
    /// How long the broker remembers an idempotent producer that has gone silent, per
    /// partition. Within it a retried batch is written once, also across restarts; a
    /// producer silent for longer is forgotten and may start at any sequence. Across a
    /// restart the broker remembers what the partition's kept records say, so retention
    /// shorter than this window shortens it in effect.
    pub producer_state_window: Duration,
    /// Compaction by key; `None` (the default) keeps every record until retention.
    pub compaction: Option<TopicCompaction>,
    /// The schema registry subject every message published here must match (see
    /// `schema_requirement.rs`); `None` (the default) checks nothing.
    pub schema_subject: Option<String>,
}

impl TopicSpec {
    pub const MAX_PARTITIONS: u32 = 1024;
    /// A guard against unit mistakes rather than a resource limit.
    pub const MAX_RETENTION_AGE: Duration = Duration::from_secs(36_500 * DAY);
    pub const MAX_PRODUCER_STATE_WINDOW: Duration = Duration::from_secs(90 * DAY);
    /// A guard against unit mistakes for the compaction durations.
    pub const MAX_COMPACTION_DURATION: Duration = Duration::from_secs(36_500 * DAY);

    /// A default spec with `partitions` partitions.
    pub fn with_partitions(partitions: u32) -> TopicSpec {
        TopicSpec {
            partitions,
            ..TopicSpec::default()
        }
    }

    pub fn validate(&self) -> Result<()> {
        let bad = |setting, problem: String| Err(BrokerError::InvalidSetting { setting, problem });
        if !(1..=Self::MAX_PARTITIONS).contains(&self.partitions) {
            return bad(
                "partitions",
                format!(
                    "must be between 1 and {} (got {})",
                    Self::MAX_PARTITIONS,
                    self.partitions
                ),
            );
        }
        if let Some(age) = self.retention.max_age
            && (millis(age) < 1 || age > Self::MAX_RETENTION_AGE)
        {
            return bad(
                "retention.max_age",
                format!(
                    "must be between 1 ms and 36500 days, got {}; use None to keep records \
                     regardless of age",
                    human(&age)
                ),
            );
        }
        if self.retention.max_bytes == Some(0) {
            return bad(
                "retention.max_bytes",
                "must be positive; use None for no size bound".into(),
            );
        }
        if let Some(problem) = durability_problem(self.durability) {
            return bad("durability", problem.into());
        }
        if millis(self.producer_state_window) < 1
            || self.producer_state_window > Self::MAX_PRODUCER_STATE_WINDOW
        {
            return bad(
                "producer_state_window",
                format!(
                    "must be between 1 ms and 90 days, got {}",
                    human(&self.producer_state_window)
                ),
            );
        }
        if let Some(compaction) = self.compaction {
            for (setting, value) in [
                (
                    "compaction.tombstone_retention",
                    compaction.tombstone_retention,
                ),
                ("compaction.min_lag", compaction.min_lag),
            ] {
                if value > Self::MAX_COMPACTION_DURATION {
                    return bad(
                        setting,
                        format!("must be at most 36500 days, got {}", human(&value)),
                    );
                }
            }
        }
        if let Some(problem) = self
            .schema_subject
            .as_deref()
            .and_then(crate::schema_requirement::subject_problem)
        {
            return bad("schema_subject", problem);
        }
        Ok(())
    }
}

impl Default for TopicSpec {
    fn default() -> Self {
        TopicSpec {
            partitions: 1,
            retention: TopicRetention::default(),
            keyless: KeylessPlacement::default(),
            durability: Durability::Fsync,
            producer_state_window: Duration::from_secs(7 * DAY),
            compaction: None,
            schema_subject: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(spec: TopicSpec) -> &'static str {
        match spec.validate() {
            Err(BrokerError::InvalidSetting { setting, .. }) => setting,
            other => panic!("expected InvalidSetting, got {other:?}"),
        }
    }

    #[test]
    fn default_spec_is_valid_and_keeps_seven_days() {
        let spec = TopicSpec::default();
        spec.validate().unwrap();
        assert_eq!(spec.partitions, 1);
        assert_eq!(
            spec.retention.max_age,
            Some(Duration::from_secs(7 * 86_400))
        );
        assert_eq!(spec.durability, Durability::Fsync);
        assert_eq!(spec.producer_state_window, Duration::from_secs(7 * 86_400));
        TopicSpec::with_partitions(TopicSpec::MAX_PARTITIONS)
            .validate()
            .unwrap();
    }

    #[test]
    fn zero_and_too_many_partitions_are_refused() {
        assert_eq!(problem(TopicSpec::with_partitions(0)), "partitions");
        assert_eq!(problem(TopicSpec::with_partitions(1025)), "partitions");
        let e = TopicSpec::with_partitions(0).validate().unwrap_err();
        assert!(e.to_string().contains("between 1 and 1024"), "{e}");
    }

    #[test]
    fn empty_retention_bounds_and_windows_are_refused() {
        let mut spec = TopicSpec::default();
        spec.retention.max_age = Some(Duration::ZERO);
        assert_eq!(problem(spec), "retention.max_age");
        let mut spec = TopicSpec::default();
        spec.retention.max_bytes = Some(0);
        assert_eq!(problem(spec), "retention.max_bytes");
        let spec = TopicSpec {
            durability: Durability::Interval(Duration::ZERO),
            ..TopicSpec::default()
        };
        assert_eq!(problem(spec), "durability");
        let spec = TopicSpec {
            producer_state_window: Duration::ZERO,
            ..TopicSpec::default()
        };
        assert_eq!(problem(spec), "producer_state_window");
        let spec = TopicSpec {
            producer_state_window: Duration::from_secs(91 * 86_400),
            ..TopicSpec::default()
        };
        assert_eq!(problem(spec), "producer_state_window");
        let spec = TopicSpec {
            compaction: Some(TopicCompaction {
                min_lag: Duration::from_secs(36_501 * 86_400),
                ..TopicCompaction::default()
            }),
            ..TopicSpec::default()
        };
        assert_eq!(problem(spec), "compaction.min_lag");
    }

    #[test]
    fn unbounded_retention_is_valid() {
        let spec = TopicSpec {
            retention: TopicRetention {
                max_age: None,
                max_bytes: None,
                ..TopicRetention::default()
            },
            ..TopicSpec::default()
        };
        spec.validate().unwrap();
    }
}
