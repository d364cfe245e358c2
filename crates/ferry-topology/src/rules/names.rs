//! Names that mean one thing and refer to something.

use std::collections::BTreeSet;

use super::Rule;
use super::view::subscription_element;
use crate::Severity;

/// FT020. Seed: backend guide Rules ("never produce to a topic that doesn't exist —
/// create topics with proper config first"): the same holds for the message types a
/// channel is declared to carry. A name that matches no message type is a typo, and
/// every message rule would silently skip that channel.
pub const REFERENCES: Rule = Rule {
    id: "FT020",
    name: "references",
    severity: Severity::Error,
    summary: "every message type a channel carries is defined",
    check: |topology, report| {
        let carriers = topology
            .queues
            .iter()
            .map(|q| (format!("queue {}", q.name), &q.messages))
            .chain(
                topology
                    .topics
                    .iter()
                    .map(|t| (format!("topic {}", t.name), &t.messages)),
            );
        for (element, messages) in carriers {
            for name in messages
                .iter()
                .filter(|n| topology.message(n.as_str()).is_none())
            {
                report.add(
                    &element,
                    name.line(),
                    format!("carries message type {name}, which `messages` does not define"),
                    format!("define {name} under `messages`, or fix the name"),
                );
            }
        }
    },
};

/// FT021. Not from the seed: a file with two queues of one name describes two things
/// that the broker would make one of, and every other finding about them is ambiguous.
pub const UNIQUE: Rule = Rule {
    id: "FT021",
    name: "unique-names",
    severity: Severity::Error,
    summary: "channel, subscription and message type names are unique",
    check: |topology, report| {
        let mut channels = BTreeSet::new();
        let names = topology
            .queues
            .iter()
            .map(|q| ("queue", &q.name))
            .chain(topology.topics.iter().map(|t| ("topic", &t.name)));
        for (kind, name) in names {
            if !channels.insert(name.as_str()) {
                report.add(
                    format!("{kind} {name}"),
                    name.line(),
                    "has the name of another queue or topic",
                    "rename one of them",
                );
            }
        }
        let mut seen = BTreeSet::new();
        for t in &topology.topics {
            for s in &t.subscriptions {
                if !seen.insert((t.name.as_str(), s.name.as_str())) {
                    report.add(
                        subscription_element(t, &s.name),
                        s.name.line(),
                        "has the name of another subscription of its topic",
                        "rename one of them",
                    );
                }
            }
        }
        let mut messages = BTreeSet::new();
        for m in topology
            .messages
            .iter()
            .filter(|m| !messages.insert(m.name.as_str()))
        {
            report.add(
                format!("message {}", m.name),
                m.name.line(),
                "is defined twice",
                "merge the two definitions",
            );
        }
    },
};

#[cfg(test)]
mod tests {
    use crate::rules::test_support::{clean_with, findings_of};

    #[test]
    fn a_channel_carrying_an_undefined_message_type_is_an_error() {
        let yaml = clean_with(
            "messages: [OrderPlaced]",
            "messages: [OrderPlaced, OrderShipped]",
        );
        assert_eq!(
            findings_of(&yaml, "FT020"),
            [
                "topic ecommerce-order-events: carries message type OrderShipped, which `messages` does not define"
            ]
        );
    }

    #[test]
    fn duplicate_names_are_an_error() {
        let yaml = clean_with(
            "      - name: analytics-ingest\n",
            "      - name: email-notifications\n",
        );
        assert_eq!(
            findings_of(&yaml, "FT021"),
            [
                "subscription ecommerce-order-events/email-notifications: has the name of another subscription of its topic"
            ]
        );
        let message = "  - name: OrderPlaced\n";
        let yaml = format!(
            "{}{message}    schema: {{ format: avro, version: 2 }}\n",
            super::super::test_support::CLEAN
        );
        assert!(
            findings_of(&yaml, "FT021")
                .contains(&"message OrderPlaced: is defined twice".to_owned())
        );
    }
}
