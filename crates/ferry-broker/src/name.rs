//! Names of queues, topics and subscriptions.
//!
//! One rule set for all three: a name ends up as a directory name, a URL path segment, a
//! metric label and a CLI argument, so the charset is the one that is safe in all of them
//! without escaping — ASCII letters, digits, `.`, `_` and `-`. Refusing a leading `.` or
//! `-`, `..` and a trailing `.` keeps a name from being read as a path (`..`), a hidden
//! file (`.x`) or an option (`-x`), and from being confused with its neighbour by a
//! trailing dot that some filesystems and tools drop. A leading `_` is none of these, and
//! Kafka allows it (its clients and tools make such topics), so it is accepted.
//!
//! Subject patterns (`orders.*`, `orders.#`) are filters, not names, and are not parsed here.

use std::borrow::Borrow;
use std::fmt;
use std::str::FromStr;

use crate::error::{BrokerError, Result};

/// A validated queue, topic or subscription name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(String);

impl Name {
    /// Longest name, in bytes (all characters are ASCII, so also in characters).
    pub const MAX_LEN: usize = 200;
    /// The suffix of derived dead-letter queue names: a queue `orders` dead-letters to
    /// `orders.dlq` unless its spec names another queue or disables dead-lettering.
    pub const DEAD_LETTER_SUFFIX: &'static str = ".dlq";

    pub fn new(name: impl Into<String>) -> Result<Name> {
        let name = name.into();
        check(&name)?;
        Ok(Name(name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the name carries the reserved dead-letter suffix. Such a queue is treated as
    /// a dead-letter queue: it gets no derived `.dlq` of its own (see
    /// [`crate::QueueSpec::dead_letter_target`]), so chains like `a.dlq.dlq` never appear.
    pub fn is_dead_letter(&self) -> bool {
        self.0.ends_with(Self::DEAD_LETTER_SUFFIX)
    }

    /// The default dead-letter queue of this queue, `<name>.dlq`.
    ///
    /// Fails for names longer than `MAX_LEN - 4`, whose derived name would not fit; such a
    /// queue must name its dead-letter queue explicitly or disable dead-lettering.
    pub fn default_dead_letter(&self) -> Result<Name> {
        let derived = format!("{}{}", self.0, Self::DEAD_LETTER_SUFFIX);
        if derived.len() > Self::MAX_LEN {
            return Err(BrokerError::DeadLetterNameTooLong {
                queue: self.clone(),
                max: Self::MAX_LEN - Self::DEAD_LETTER_SUFFIX.len(),
            });
        }
        // Still valid: the base is valid, does not end in `.`, and the suffix adds one `.`
        // followed by letters.
        Ok(Name(derived))
    }
}

fn check(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(BrokerError::EmptyName);
    }
    // Length first, so every later error quotes a name of bounded size.
    if name.len() > Name::MAX_LEN {
        return Err(BrokerError::NameTooLong {
            prefix: name.chars().take(32).collect(),
            len: name.len(),
            max: Name::MAX_LEN,
        });
    }
    // Every character before the first bad one is ASCII, so this byte offset is also the
    // character position a user would count.
    if let Some((position, character)) = name.char_indices().find(|&(_, c)| !is_allowed(c)) {
        return Err(BrokerError::InvalidNameCharacter {
            name: name.to_owned(),
            character,
            position,
        });
    }
    let first = name.as_bytes()[0];
    if matches!(first, b'.' | b'-') {
        return Err(BrokerError::NameStartsWithDotOrDash {
            name: name.to_owned(),
            first: first as char,
        });
    }
    if let Some(position) = name.find("..") {
        return Err(BrokerError::NameHasDoubleDot {
            name: name.to_owned(),
            position,
        });
    }
    if name.ends_with('.') {
        return Err(BrokerError::NameEndsWithDot {
            name: name.to_owned(),
        });
    }
    Ok(())
}

fn is_allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// How an invalid name character is shown in an error: invisible and look-alike characters
/// are named with their code point, so the user can find them.
pub(crate) fn describe_character(c: &char) -> String {
    let c = *c;
    let code = c as u32;
    match c {
        '\0' => "a NUL byte (U+0000)".to_owned(),
        '/' => "a slash '/'".to_owned(),
        '\\' => "a backslash '\\'".to_owned(),
        _ if c.is_whitespace() => format!("whitespace (U+{code:04X})"),
        _ if c.is_control() => format!("a control character (U+{code:04X})"),
        _ if !c.is_ascii() => format!("the non-ASCII character '{c}' (U+{code:04X})"),
        _ => format!("the character '{c}'"),
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Name {
    type Err = BrokerError;
    fn from_str(s: &str) -> Result<Name> {
        Name::new(s)
    }
}

impl TryFrom<&str> for Name {
    type Error = BrokerError;
    fn try_from(s: &str) -> Result<Name> {
        Name::new(s)
    }
}

impl TryFrom<String> for Name {
    type Error = BrokerError;
    fn try_from(s: String) -> Result<Name> {
        Name::new(s)
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<Name> for String {
    fn from(name: Name) -> String {
        name.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(name: &str) -> BrokerError {
        Name::new(name).expect_err(name)
    }

    #[test]
    fn typical_names_are_accepted() {
        for name in [
            "orders",
            "Orders-v2",
            "billing.invoices",
            "a",
            "9lives",
            "x_y-z.1",
            "_private",
            "__consumer_offsets",
            "_",
        ] {
            assert_eq!(Name::new(name).unwrap().as_str(), name);
        }
        assert!(Name::new("a".repeat(Name::MAX_LEN)).is_ok());
    }

    #[test]
    fn empty_name_is_rejected() {
        assert!(matches!(err(""), BrokerError::EmptyName));
    }

    #[test]
    fn name_longer_than_200_bytes_is_rejected_with_its_length() {
        let e = err(&"a".repeat(201));
        assert!(matches!(
            e,
            BrokerError::NameTooLong {
                len: 201,
                max: 200,
                ..
            }
        ));
        assert!(e.to_string().contains("201 bytes"), "{e}");
    }

    #[test]
    fn name_with_a_slash_is_rejected_with_its_position() {
        let e = err("orders/eu");
        assert!(matches!(
            e,
            BrokerError::InvalidNameCharacter {
                character: '/',
                position: 6,
                ..
            }
        ));
        let text = e.to_string();
        assert!(
            text.contains("slash") && text.contains("position 6"),
            "{text}"
        );
    }

    #[test]
    fn name_with_a_nul_byte_is_rejected_with_its_position() {
        let e = err("ab\0c");
        assert!(matches!(
            e,
            BrokerError::InvalidNameCharacter {
                character: '\0',
                position: 2,
                ..
            }
        ));
        assert!(e.to_string().contains("NUL"), "{e}");
    }

    #[test]
    fn name_with_whitespace_is_rejected_naming_the_code_point() {
        for (name, position, code) in [("my queue", 2, "U+0020"), ("tab\tx", 3, "U+0009")] {
            let e = err(name);
            assert!(
                matches!(e, BrokerError::InvalidNameCharacter { position: p, .. } if p == position)
            );
            assert!(e.to_string().contains(code), "{e}");
        }
    }

    #[test]
    fn name_with_unicode_is_rejected_naming_the_character() {
        let e = err("café");
        assert!(matches!(
            e,
            BrokerError::InvalidNameCharacter {
                character: 'é',
                position: 3,
                ..
            }
        ));
        assert!(e.to_string().contains("U+00E9"), "{e}");
        // A look-alike of a Latin letter must not slip through.
        assert!(matches!(
            err("оrders"), // Cyrillic 'о'
            BrokerError::InvalidNameCharacter { position: 0, .. }
        ));
    }

    #[test]
    fn other_punctuation_is_rejected() {
        for name in ["a:b", "a*b", "a#b", "a>b", "a@b", "a\\b"] {
            assert!(matches!(
                err(name),
                BrokerError::InvalidNameCharacter { position: 1, .. }
            ));
        }
    }

    #[test]
    fn name_must_not_start_with_a_dot_or_dash() {
        for (name, first) in [(".hidden", '.'), ("-flag", '-'), (".dlq", '.'), ("-", '-')] {
            assert!(
                matches!(
                    err(name),
                    BrokerError::NameStartsWithDotOrDash { first: f, .. } if f == first
                ),
                "{name}"
            );
        }
        let text = err("-flag").to_string();
        assert!(
            text.contains("'-'") && text.contains("must not start"),
            "{text}"
        );
    }

    #[test]
    fn name_with_a_double_dot_is_rejected_with_its_position() {
        assert!(matches!(
            err("a..b"),
            BrokerError::NameHasDoubleDot { position: 1, .. }
        ));
    }

    #[test]
    fn name_with_a_trailing_dot_is_rejected() {
        assert!(matches!(
            err("orders."),
            BrokerError::NameEndsWithDot { .. }
        ));
    }

    #[test]
    fn default_dead_letter_queue_is_the_name_with_dlq_suffix() {
        let orders = Name::new("orders").unwrap();
        let dlq = orders.default_dead_letter().unwrap();
        assert_eq!(dlq.as_str(), "orders.dlq");
        assert!(dlq.is_dead_letter());
        assert!(!orders.is_dead_letter());
        assert_eq!(Name::new("orders.dlq").unwrap(), dlq);
    }

    #[test]
    fn default_dead_letter_name_that_would_not_fit_is_an_error() {
        let longest = Name::new("a".repeat(Name::MAX_LEN - 4)).unwrap();
        assert_eq!(
            longest.default_dead_letter().unwrap().as_str().len(),
            Name::MAX_LEN
        );
        let too_long = Name::new("a".repeat(Name::MAX_LEN - 3)).unwrap();
        let e = too_long.default_dead_letter().unwrap_err();
        assert!(matches!(
            e,
            BrokerError::DeadLetterNameTooLong { max: 196, .. }
        ));
    }

    #[test]
    fn names_parse_from_strings_and_display_unchanged() {
        let name: Name = "events.v1".parse().unwrap();
        assert_eq!(name.to_string(), "events.v1");
        assert!(Name::try_from("bad name").is_err());
        let set: std::collections::HashSet<Name> = [name].into();
        assert!(set.contains("events.v1"));
    }
}
