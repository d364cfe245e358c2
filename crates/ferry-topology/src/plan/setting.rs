//! The settings a plan compares: each field of the format that the Ferry server holds, as
//! one named value, so that a difference is reported as `setting from → to`.

use std::fmt;

use serde::Serialize;

use crate::format::{ByteSize, Duration};

/// One setting of a queue, topic or subscription that the server keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Setting {
    MaxDeliveries,
    RetryInitial,
    RetryMultiplier,
    RetryMax,
    RetryJitter,
    Ordering,
    DedupWindow,
    /// A queue's or subscription's message TTL (`delivery.ttl`, or `retention`).
    Ttl,
    Priorities,
    MaxLength,
    DeadLetter,
    DeadLetterRetention,
    Partitions,
    /// A topic's retention by age.
    Retention,
    Filter,
    /// The topic a subscription reads.
    Topic,
}

impl Setting {
    /// The name as the plan prints it: the file's field path.
    pub fn as_str(self) -> &'static str {
        match self {
            Setting::MaxDeliveries => "max_deliveries",
            Setting::RetryInitial => "retry.initial",
            Setting::RetryMultiplier => "retry.multiplier",
            Setting::RetryMax => "retry.max",
            Setting::RetryJitter => "retry.jitter",
            Setting::Ordering => "ordering.mode",
            Setting::DedupWindow => "dedup_window",
            Setting::Ttl => "ttl",
            Setting::Priorities => "priorities",
            Setting::MaxLength => "limits.max_length",
            Setting::DeadLetter => "dead_letter",
            Setting::DeadLetterRetention => "dead_letter.retention",
            Setting::Partitions => "partitions",
            Setting::Retention => "retention",
            Setting::Filter => "filter",
            Setting::Topic => "topic",
        }
    }

    /// Settings whose smaller value lets messages expire sooner: lowering one can drop
    /// messages that are already stored.
    pub fn is_retention(self) -> bool {
        matches!(
            self,
            Setting::Ttl | Setting::Retention | Setting::DeadLetterRetention
        )
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A setting's value, printed as the file writes it (`7d`, `256KiB`, `key-shared`).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Count(u64),
    Duration(Duration),
    Size(ByteSize),
    Ratio(f64),
    Text(String),
}

impl Value {
    /// The value as a count, when it is one.
    pub fn count(&self) -> Option<u64> {
        match self {
            Value::Count(n) => Some(*n),
            _ => None,
        }
    }

    /// The value as a duration, when it is one.
    pub fn duration(&self) -> Option<Duration> {
        match self {
            Value::Duration(d) => Some(*d),
            _ => None,
        }
    }

    /// The value as a ratio (a multiplier, a jitter), when it is one.
    pub fn ratio(&self) -> Option<f64> {
        match self {
            Value::Ratio(r) => Some(*r),
            _ => None,
        }
    }

    /// The value as text (an ordering mode, a filter, a queue's name), when it is text.
    pub fn text(&self) -> Option<&str> {
        match self {
            Value::Text(t) => Some(t),
            _ => None,
        }
    }

    /// Whether `self` keeps messages for less time than `other`; `None` when the values
    /// are not both durations.
    pub(crate) fn shorter_than(&self, other: &Value) -> Option<bool> {
        match (self, other) {
            (Value::Duration(a), Value::Duration(b)) => Some(a < b),
            _ => None,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Count(n) => write!(f, "{n}"),
            Value::Duration(d) => write!(f, "{d}"),
            Value::Size(s) => write!(f, "{s}"),
            Value::Ratio(r) => write!(f, "{r}"),
            // Quoted so that an empty filter reads as one, not as nothing.
            Value::Text(t) => write!(f, "{t:?}"),
        }
    }
}

/// In JSON a value is the text the file would hold.
impl Serialize for Value {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Count(n) => serializer.serialize_u64(*n),
            Value::Ratio(r) => serializer.serialize_f64(*r),
            Value::Text(t) => serializer.serialize_str(t),
            Value::Duration(_) | Value::Size(_) => serializer.collect_str(self),
        }
    }
}
