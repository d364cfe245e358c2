//! A declaration's settings field by field, in the SDK's own names. Every transport keeps a
//! declaration in its own form (a broker spec, a proto message, JSON on the engine); when a
//! second declaration differs from the first, the transport lists both in this one form, so
//! the refusal names each field that differs in the same words whichever engine is behind
//! it: `max_deliveries: declared 7, existing 3`.

use std::fmt::Display;
use std::time::Duration;

use crate::error::Error;
use crate::spec::{DeliveryPolicy, KeyOrdering};

/// The fields a transport keeps of one declaration, each rendered for people. A transport
/// lists the same fields, in the same order, for what was declared and for what exists.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Declared(Vec<(&'static str, String)>);

// Each transport keeps only some of these fields, so a build with one transport leaves
// some setters unused.
#[allow(dead_code)]
impl Declared {
    fn field(mut self, name: &'static str, value: impl Display) -> Declared {
        self.0.push((name, value.to_string()));
        self
    }

    /// Every field of a delivery policy, as the SDK declares it.
    pub fn of_delivery(delivery: &DeliveryPolicy) -> Declared {
        let b = &delivery.backoff;
        Declared::default()
            .max_deliveries(delivery.max_deliveries)
            .backoff(b.base, b.cap, b.multiplier, b.jitter)
            .dead_letter(delivery.dead_letter)
            .lease(delivery.lease)
            .default_ttl(delivery.default_ttl)
            .max_delay(delivery.max_delay)
            .priority_levels(delivery.priority_levels)
            .ordering(delivery.ordering == KeyOrdering::PerKey)
    }

    pub fn max_deliveries(self, n: u32) -> Declared {
        self.field("max_deliveries", n)
    }

    pub fn backoff(self, base: Duration, cap: Duration, multiplier: f64, jitter: f64) -> Declared {
        self.field("backoff.base", duration(base))
            .field("backoff.cap", duration(cap))
            .field("backoff.multiplier", decimal(multiplier))
            .field("backoff.jitter", decimal(jitter))
    }

    pub fn dead_letter(self, on: bool) -> Declared {
        self.field("dead_letter", on)
    }

    pub fn lease(self, lease: Duration) -> Declared {
        self.field("lease", duration(lease))
    }

    pub fn default_ttl(self, ttl: Option<Duration>) -> Declared {
        self.field("default_ttl", optional(ttl.map(duration)))
    }

    pub fn max_delay(self, max: Duration) -> Declared {
        self.field("max_delay", duration(max))
    }

    pub fn priority_levels(self, levels: u8) -> Declared {
        self.field("priority_levels", levels)
    }

    pub fn ordering(self, per_key: bool) -> Declared {
        self.field("ordering", if per_key { "per key" } else { "none" })
    }

    pub fn dedup_window(self, window: Option<Duration>) -> Declared {
        self.field(
            "dedup_window",
            optional(window.filter(|w| !w.is_zero()).map(duration)),
        )
    }

    pub fn max_length(self, max: Option<u64>) -> Declared {
        self.field("max_length", optional(max))
    }

    /// Each field whose value differs, as `name: declared X, existing Y`, joined by `; `.
    pub fn differences(&self, existing: &Declared) -> Option<String> {
        let found: Vec<String> = self
            .0
            .iter()
            .filter_map(|(name, declared)| {
                let (_, have) = existing.0.iter().find(|(n, _)| n == name)?;
                (have != declared).then(|| format!("{name}: declared {declared}, existing {have}"))
            })
            .collect();
        (!found.is_empty()).then(|| found.join("; "))
    }

    /// The refusal of declaring `name` as `self` when it exists as `existing`.
    pub fn conflict(&self, existing: &Declared, kind: &'static str, name: &str) -> Error {
        Error::Conflict {
            kind,
            name: name.to_owned(),
            problem: self.differences(existing).unwrap_or_else(|| {
                // The transport found a difference in something it does not list.
                "it exists with other settings".to_owned()
            }),
        }
    }
}

/// The refusal of a subscription declared on `topic` that exists on `existing` — the same
/// words on every transport.
pub(crate) fn other_topic(name: &str, topic: &str, existing: &str) -> Error {
    Error::Conflict {
        kind: "subscription",
        name: name.to_owned(),
        problem: format!("topic: declared `{topic}`, existing `{existing}`"),
    }
}

/// `30s`, `250ms`, `1.5s`: `Duration`'s own short form.
fn duration(d: Duration) -> String {
    format!("{d:?}")
}

/// A float as declared, without the last-place noise a store's decimal form can add.
fn decimal(x: f64) -> String {
    let rounded = (x * 1e9).round() / 1e9;
    format!("{rounded}")
}

fn optional(value: Option<impl Display>) -> String {
    value.map_or_else(|| "none".to_owned(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_differing_field_is_named_with_both_values() {
        let declared = Declared::default()
            .max_deliveries(7)
            .lease(Duration::from_secs(30))
            .dead_letter(true);
        let existing = Declared::default()
            .max_deliveries(3)
            .lease(Duration::from_millis(2500))
            .dead_letter(true);
        assert_eq!(
            declared.differences(&existing).as_deref(),
            Some("max_deliveries: declared 7, existing 3; lease: declared 30s, existing 2.5s")
        );
        assert_eq!(declared.differences(&declared), None);
    }

    #[test]
    fn a_conflict_without_a_listed_difference_still_says_what_it_is() {
        let same = Declared::default().max_deliveries(3);
        let e = same.conflict(&same, "queue", "q");
        assert_eq!(
            e.to_string(),
            "queue `q` conflicts with what exists: it exists with other settings"
        );
    }

    #[test]
    fn a_float_read_back_with_noise_in_its_last_place_reads_as_declared() {
        let b = Duration::from_millis(100);
        let declared = Declared::default().backoff(b, b, 2.0, 0.2);
        let existing = Declared::default().backoff(b, b, 2.000_000_000_000_000_4, 0.2);
        assert_eq!(declared.differences(&existing), None);
    }

    #[test]
    fn absent_settings_read_none() {
        let declared = Declared::default()
            .dedup_window(Some(Duration::from_secs(60)))
            .max_length(Some(10))
            .default_ttl(None);
        let existing = Declared::default()
            .dedup_window(Some(Duration::ZERO))
            .max_length(None)
            .default_ttl(None);
        assert_eq!(
            declared.differences(&existing).as_deref(),
            Some(
                "dedup_window: declared 60s, existing none; max_length: declared 10, existing none"
            )
        );
    }
}
