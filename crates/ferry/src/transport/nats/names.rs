//! Ferry names to JetStream stream, consumer and subject names.
//!
//! Stream and consumer names cannot hold `.` (nor `*`, `>` or spaces, which Ferry names never
//! have), so a name is escaped reversibly — `_` → `__`, `.` → `_d` — and prefixed by its kind.
//! Subjects carry the escaped name too: a Ferry name may end in `.` or hold `..`, which would
//! make an empty subject token. Every stream has one literal subject, so no two overlap.

use crate::error::{Error, Result};

/// The durable consumer that every SDK consumer of a queue (or a dead-letter or holding
/// stream) fetches from.
pub const SHARED_CONSUMER: &str = "ferry";

/// Longest stream name accepted: the server keeps each stream in a directory of that name,
/// and file names stop at 255 bytes.
const MAX_STREAM_NAME: usize = 240;

pub fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '_' => out.push_str("__"),
            '.' => out.push_str("_d"),
            c => out.push(c),
        }
    }
    out
}

/// The inverse of [`escape`]; `None` for text `escape` never makes. Only tests need it: it
/// shows that no two names share a stream.
#[cfg(test)]
pub fn unescape(escaped: &str) -> Option<String> {
    let mut out = String::with_capacity(escaped.len());
    let mut chars = escaped.chars();
    while let Some(c) = chars.next() {
        if c == '_' {
            match chars.next()? {
                '_' => out.push('_'),
                'd' => out.push('.'),
                _ => return None,
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// A stream and the one subject it stores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamName {
    pub stream: String,
    pub subject: String,
}

fn stream(kind: &str, escaped: String) -> Result<StreamName> {
    let stream = format!("ferry_{kind}_{escaped}");
    if stream.len() > MAX_STREAM_NAME {
        return Err(Error::invalid(
            format!("name for stream `{stream}`"),
            format!(
                "NATS JetStream stream names stop at {MAX_STREAM_NAME} bytes here; use a shorter name (each `.` and `_` counts twice)"
            ),
        ));
    }
    Ok(StreamName {
        subject: format!("ferry.{kind}.{escaped}"),
        stream,
    })
}

pub fn queue(name: &str) -> Result<StreamName> {
    stream("q", escape(name))
}

pub fn queue_dead_letters(name: &str) -> Result<StreamName> {
    stream("qdlq", escape(name))
}

/// Where a queue's delayed messages wait until due.
pub fn queue_delays(name: &str) -> Result<StreamName> {
    stream("qdelay", escape(name))
}

pub fn topic(name: &str) -> Result<StreamName> {
    stream("t", escape(name))
}

/// Whether `stream` is a topic's stream.
pub fn is_topic_stream(stream: &str) -> bool {
    stream.starts_with("ferry_t_")
}

/// The durable consumer on the topic's stream that is the subscription.
pub fn subscription_consumer(name: &str) -> String {
    escape(name)
}

/// A subscription's dead letters: `_s` never occurs in an escaped name, so it separates the
/// topic from the subscription without ambiguity.
pub fn subscription_dead_letters(topic: &str, name: &str) -> Result<StreamName> {
    stream("sdlq", format!("{}_s{}", escape(topic), escape(name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_is_reversible_and_leaves_no_dots() {
        for name in [
            "orders",
            "orders.eu",
            "a_d",
            "a.d",
            "a__b",
            "x.",
            "a..b",
            "_d_",
        ] {
            let escaped = escape(name);
            assert!(!escaped.contains('.'), "{escaped}");
            assert_eq!(unescape(&escaped).as_deref(), Some(name));
        }
        assert_ne!(escape("a_d"), escape("a.d"));
        assert_eq!(unescape("a_x"), None);
    }

    #[test]
    fn kinds_and_subscriptions_never_share_a_stream() {
        let names = [
            queue("a").unwrap(),
            queue_dead_letters("a").unwrap(),
            queue_delays("a").unwrap(),
            topic("a").unwrap(),
            subscription_dead_letters("a", "b").unwrap(),
            subscription_dead_letters("a_sb", "c").unwrap(),
            subscription_dead_letters("a", "b_sc").unwrap(),
        ];
        for (i, a) in names.iter().enumerate() {
            for b in &names[i + 1..] {
                assert_ne!(a.stream, b.stream);
                assert_ne!(a.subject, b.subject);
            }
        }
    }

    #[test]
    fn names_too_long_once_escaped_are_invalid() {
        assert!(queue(&"x".repeat(200)).is_ok());
        assert!(matches!(
            queue(&".".repeat(200)),
            Err(Error::Invalid { .. })
        ));
    }
}
