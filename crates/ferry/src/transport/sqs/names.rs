//! Ferry names as SQS queue and SNS topic names.
//!
//! Ferry names may hold `.`, which SQS and SNS names may not (`[A-Za-z0-9_-]`, up to 80
//! characters for a queue with its `.fifo`, 256 for a topic). The mapping escapes `_` as
//! `__` and `.` as `_-`, so it is one-to-one and leaves names without either unchanged; a
//! single `_` followed by a letter never comes out of it, so the suffixes that tell a
//! subscription's queue (`_s`) and a dead-letter queue (`_dlq`) apart can never be the
//! escape of another Ferry name.

use crate::error::{Error, Result};

/// SQS's limit on a queue name, `.fifo` included.
const MAX_QUEUE_NAME: usize = 80;
/// SNS's limit on a topic name.
const MAX_TOPIC_NAME: usize = 256;

/// `name` with `_` and `.` escaped.
pub(super) fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        match c {
            '_' => out.push_str("__"),
            '.' => out.push_str("_-"),
            c => out.push(c),
        }
    }
    out
}

/// What a Ferry source is kept as on SQS: one queue and its dead-letter queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct QueueNames {
    /// The live queue's SQS name, without `.fifo`.
    pub base: String,
}

impl QueueNames {
    pub fn of_queue(name: &str) -> QueueNames {
        QueueNames { base: escape(name) }
    }

    /// A subscription's queue: its name alone, as a subscription's name names one
    /// subscription whatever its topic.
    pub fn of_subscription(name: &str) -> QueueNames {
        QueueNames {
            base: format!("{}_s", escape(name)),
        }
    }

    pub fn live(&self, fifo: bool) -> String {
        with_fifo(self.base.clone(), fifo)
    }

    pub fn dead_letters(&self, fifo: bool) -> String {
        with_fifo(format!("{}_dlq", self.base), fifo)
    }

    /// Refuses a Ferry name too long for SQS once escaped and suffixed.
    pub fn check_length(&self, ferry_name: &str) -> Result<()> {
        let longest = self.dead_letters(true);
        if longest.len() > MAX_QUEUE_NAME {
            return Err(Error::invalid(
                format!("name `{ferry_name}`"),
                format!(
                    "too long for SQS: its dead-letter queue would be `{longest}`, {} characters \
                     where SQS allows {MAX_QUEUE_NAME}; use a name of at most {} characters \
                     (each `.` and `_` counts twice)",
                    longest.len(),
                    MAX_QUEUE_NAME - (longest.len() - ferry_name.len()),
                ),
            ));
        }
        Ok(())
    }
}

fn with_fifo(name: String, fifo: bool) -> String {
    if fifo { format!("{name}.fifo") } else { name }
}

/// A topic's SNS name.
pub(super) fn topic(name: &str) -> Result<String> {
    let escaped = escape(name);
    if escaped.len() > MAX_TOPIC_NAME {
        return Err(Error::invalid(
            format!("name `{name}`"),
            format!(
                "too long for an SNS topic once `.` and `_` are escaped ({MAX_TOPIC_NAME} at most)"
            ),
        ));
    }
    Ok(escaped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_escape_is_one_to_one_and_keeps_plain_names() {
        assert_eq!(escape("orders-eu1"), "orders-eu1");
        assert_eq!(escape("orders.created"), "orders_-created");
        assert_eq!(escape("a_b"), "a__b");
        // Names that a lossy mapping would merge stay apart.
        let names = ["a.b", "a_b", "a-b", "a_-b", "a__b", "a._b"];
        let escaped: std::collections::HashSet<String> = names.iter().map(|n| escape(n)).collect();
        assert_eq!(escaped.len(), names.len());
    }

    #[test]
    fn a_subscription_or_dead_letter_queue_never_takes_a_queues_name() {
        // `x_s` and `x_dlq` hold a lone `_` before a letter, which no escaped name holds.
        for name in ["x_s", "x_dlq", "x.s", "x.dlq-not", "x__s"] {
            let q = QueueNames::of_queue(name).live(false);
            assert_ne!(q, QueueNames::of_subscription("x").live(false), "{name}");
            assert_ne!(q, QueueNames::of_queue("x").dead_letters(false), "{name}");
        }
    }

    #[test]
    fn a_name_too_long_for_sqs_is_invalid() {
        let ok = "a".repeat(71);
        QueueNames::of_queue(&ok).check_length(&ok).unwrap();
        let long = "a".repeat(72);
        let e = QueueNames::of_queue(&long).check_length(&long).unwrap_err();
        assert!(matches!(e, Error::Invalid { .. }), "{e}");
    }
}
