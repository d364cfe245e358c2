//! What a caller may do, written the same way by every Ferry front end: a [`Permission`] is
//! an [`Action`] on the names a [`NamePattern`] matches — `publish:orders.*`,
//! `consume:orders.#`, `dead_letters:orders.dlq`, `admin:#`, `metrics:#`.
//!
//! Its own crate, without dependencies on the broker or any front end, because every front
//! end checks callers against the same permissions (the gRPC and HTTP server with its
//! tokens, the SQS endpoint with its access keys) and no front end depends on another.

use std::fmt;
use std::str::FromStr;

/// What a permission allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Publish to a queue or topic, and cancel what was published to a queue.
    Publish,
    /// Receive and settle from an ordinary queue (not a dead-letter queue), join and read
    /// a topic's consumer groups.
    Consume,
    /// Peek at, receive, settle and redrive the letters of a dead-letter queue. Written
    /// `dead_letters:` or `dlq:`.
    DeadLetters,
    /// Create, describe, list and delete; reset group offsets; add partitions.
    Admin,
    /// Scrape `/metrics`, which shows the series of the names the pattern matches
    /// (`metrics:#`: all of them). Apart from `admin` so that a scraper's token can read
    /// every queue's depth without being able to delete one.
    Metrics,
    /// Read the schema registry's subjects the pattern matches: their versions, lookups,
    /// compatibility checks, their level and mode. The pattern is over subject names
    /// (`orders.*` matches `orders.placed-value`; a subject is split at its dots too).
    SchemaRead,
    /// Register, delete, and set the level and mode of the subjects the pattern matches;
    /// reading them too. On `#`, also the registry-wide level and mode.
    SchemaWrite,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Publish => "publish",
            Action::Consume => "consume",
            Action::DeadLetters => "dead_letters",
            Action::Admin => "admin",
            Action::Metrics => "metrics",
            Action::SchemaRead => "schema_read",
            Action::SchemaWrite => "schema_write",
        }
    }

    /// What reading (receiving, settling, peeking) a queue needs: [`Action::DeadLetters`]
    /// on a dead-letter queue, [`Action::Consume`] on any other.
    pub fn to_read(is_dead_letter_queue: bool) -> Action {
        if is_dead_letter_queue {
            Action::DeadLetters
        } else {
            Action::Consume
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A malformed permission or name pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccessError {
    #[error("{given:?} is not a permission: write `<action>:<pattern>`, e.g. `publish:orders.*`")]
    MissingColon { given: String },
    #[error(
        "{given:?} is not an action: use publish, consume, dead_letters (or dlq), admin, \
         metrics, schema_read or schema_write"
    )]
    UnknownAction { given: String },
    #[error("an empty name pattern matches nothing: use `#` for every name")]
    EmptyPattern,
    #[error(
        "{pattern:?} has an empty segment: segments are separated by single dots, \
         `*` stands for one, `#` for any number"
    )]
    EmptySegment { pattern: String },
    #[error(
        "{pattern:?}: `*` and `#` stand for whole segments (`orders.*`), not parts of one \
         (`orders*`)"
    )]
    PartialWildcard { pattern: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    /// `*`: exactly one segment.
    One,
    /// `#`: zero or more segments.
    Any,
}

/// Queue, topic or subscription names, dot-separated segments matched one by one: `*`
/// stands for exactly one segment, `#` for any number of them (none included, so
/// `orders.#` matches `orders` and `orders.eu.paid`), anything else for itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamePattern {
    text: String,
    segments: Vec<Segment>,
}

impl NamePattern {
    /// Every name.
    pub fn any() -> NamePattern {
        "#".parse().expect("`#` is a pattern")
    }

    pub fn matches(&self, name: &str) -> bool {
        let parts: Vec<&str> = name.split('.').collect();
        matches_from(&self.segments, &parts)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the pattern matches every name (`#`, or `#.#`): what a call needs when the
    /// name it touches cannot be read from its input, so that the check fails closed.
    pub fn matches_every_name(&self) -> bool {
        self.segments.iter().all(|s| *s == Segment::Any)
    }
}

fn matches_from(pattern: &[Segment], name: &[&str]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((Segment::Any, rest)) => {
            (0..=name.len()).any(|skip| matches_from(rest, &name[skip..]))
        }
        Some((Segment::One, rest)) => !name.is_empty() && matches_from(rest, &name[1..]),
        Some((Segment::Literal(l), rest)) => {
            name.first() == Some(&l.as_str()) && matches_from(rest, &name[1..])
        }
    }
}

impl FromStr for NamePattern {
    type Err = AccessError;

    fn from_str(text: &str) -> Result<NamePattern, AccessError> {
        if text.is_empty() {
            return Err(AccessError::EmptyPattern);
        }
        let segments = text
            .split('.')
            .map(|s| match s {
                "" => Err(AccessError::EmptySegment {
                    pattern: text.to_owned(),
                }),
                "*" => Ok(Segment::One),
                "#" => Ok(Segment::Any),
                s if s.contains(['*', '#']) => Err(AccessError::PartialWildcard {
                    pattern: text.to_owned(),
                }),
                s => Ok(Segment::Literal(s.to_owned())),
            })
            .collect::<Result<_, _>>()?;
        Ok(NamePattern {
            text: text.to_owned(),
            segments,
        })
    }
}

impl fmt::Display for NamePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// One action on the names a pattern matches: `publish:orders.*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permission {
    pub action: Action,
    pub pattern: NamePattern,
}

impl Permission {
    pub fn allows(&self, action: Action, name: &str) -> bool {
        self.grants(action) && self.pattern.matches(name)
    }

    /// Whether this permission's action covers `action`: itself, and reading a subject
    /// for `schema_write` (a producer registering a schema reads it back by its id).
    pub fn grants(&self, action: Action) -> bool {
        self.action == action
            || (self.action == Action::SchemaWrite && action == Action::SchemaRead)
    }
}

impl FromStr for Permission {
    type Err = AccessError;

    fn from_str(text: &str) -> Result<Permission, AccessError> {
        let Some((action, pattern)) = text.split_once(':') else {
            return Err(AccessError::MissingColon {
                given: text.to_owned(),
            });
        };
        let action = match action.trim() {
            "publish" => Action::Publish,
            "consume" => Action::Consume,
            "dead_letters" | "dlq" => Action::DeadLetters,
            "admin" => Action::Admin,
            "metrics" => Action::Metrics,
            "schema_read" => Action::SchemaRead,
            "schema_write" => Action::SchemaWrite,
            other => {
                return Err(AccessError::UnknownAction {
                    given: other.to_owned(),
                });
            }
        };
        Ok(Permission {
            action,
            pattern: pattern.trim().parse()?,
        })
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.action, self.pattern)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> NamePattern {
        s.parse().unwrap()
    }

    #[test]
    fn star_is_one_segment_and_hash_any_number() {
        assert!(p("orders.*").matches("orders.eu"));
        assert!(!p("orders.*").matches("orders"));
        assert!(!p("orders.*").matches("orders.eu.paid"));
        assert!(p("orders.#").matches("orders"));
        assert!(p("orders.#").matches("orders.eu.paid"));
        assert!(!p("orders.#").matches("ordersx"));
        assert!(p("#").matches("anything.at.all"));
        assert!(p("*.dlq").matches("jobs.dlq"));
        assert!(p("#.dlq").matches("a.b.dlq"));
        assert!(!p("#.dlq").matches("a.b"));
        assert!(p("jobs").matches("jobs"));
        assert!(!p("jobs").matches("jobs.dlq"));
    }

    #[test]
    fn only_hash_patterns_match_every_name() {
        assert!(p("#").matches_every_name());
        assert!(p("#.#").matches_every_name());
        assert!(!p("*").matches_every_name());
        assert!(!p("#.dlq").matches_every_name());
        assert!(!p("orders.#").matches_every_name());
    }

    #[test]
    fn permissions_parse_from_action_colon_pattern() {
        let perm: Permission = "publish:orders.*".parse().unwrap();
        assert_eq!(perm.action, Action::Publish);
        assert_eq!(perm.to_string(), "publish:orders.*");
        assert!(perm.allows(Action::Publish, "orders.eu"));
        assert!(!perm.allows(Action::Consume, "orders.eu"));
        assert_eq!(
            "publish".parse::<Permission>(),
            Err(AccessError::MissingColon {
                given: "publish".into()
            })
        );
        assert_eq!(
            "write:x".parse::<Permission>(),
            Err(AccessError::UnknownAction {
                given: "write".into()
            })
        );
        assert_eq!(
            "admin:".parse::<Permission>(),
            Err(AccessError::EmptyPattern)
        );
        assert!(matches!(
            "admin:a..b".parse::<Permission>(),
            Err(AccessError::EmptySegment { .. })
        ));
        assert!(matches!(
            "admin:orders*".parse::<Permission>(),
            Err(AccessError::PartialWildcard { .. })
        ));
    }

    #[test]
    fn schema_write_covers_reading_the_same_subjects() {
        let write: Permission = "schema_write:orders.#".parse().unwrap();
        assert_eq!(write.to_string(), "schema_write:orders.#");
        assert!(write.allows(Action::SchemaWrite, "orders.placed-value"));
        assert!(write.allows(Action::SchemaRead, "orders.placed-value"));
        assert!(!write.allows(Action::SchemaRead, "payments-value"));
        let read: Permission = "schema_read:#".parse().unwrap();
        assert!(read.allows(Action::SchemaRead, "anything"));
        assert!(!read.allows(Action::SchemaWrite, "anything"));
        assert!(!read.allows(Action::Admin, "anything"));
    }

    #[test]
    fn dead_letters_is_its_own_action_written_two_ways() {
        let long: Permission = "dead_letters:orders.#".parse().unwrap();
        let short: Permission = "dlq:orders.#".parse().unwrap();
        assert_eq!(long, short);
        assert_eq!(short.to_string(), "dead_letters:orders.#");
        assert!(short.allows(Action::DeadLetters, "orders.dlq"));
        assert!(!short.allows(Action::Consume, "orders"));
        let consume: Permission = "consume:orders.#".parse().unwrap();
        assert!(!consume.allows(Action::DeadLetters, "orders.dlq"));
    }
}
