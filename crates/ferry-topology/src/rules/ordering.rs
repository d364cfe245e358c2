//! Order that matters is kept by a key.

use super::Rule;
use super::view::carriers;
use crate::Severity;
use crate::format::OrderingMode;

/// FT006. Seed: backend guide Rules ("always use key-based partitioning when message
/// ordering matters") and completion criteria ("ordering requirements are documented
/// (key-based partitioning)"); patterns guide Process step 1 (ordering within a
/// partition, never global).
///
/// Order matters when the message type says `ordered: true`, or when a queue or
/// subscription carrying it delivers in key order (`key-shared`).
pub const ORDERING_KEY: Rule = Rule {
    id: "FT006",
    name: "ordering-key",
    severity: Severity::Error,
    summary: "a message type whose order matters has a key",
    check: |topology, report| {
        for m in topology.messages.iter().filter(|m| m.key.is_none()) {
            let keyed_by = carriers(topology, m.name.as_str())
                .into_iter()
                .find(|e| e.ordering_mode() == Some(OrderingMode::KeyShared));
            let why = match (m.ordered, keyed_by) {
                (true, _) => "is ordered but has no key: no order can be kept".to_owned(),
                (false, Some(e)) => {
                    format!("has no key, but {} delivers in key order", e.element)
                }
                (false, None) => continue,
            };
            report.add(
                format!("message {}", m.name),
                m.name.line(),
                why,
                "set `key` to the field whose messages must stay in order (e.g. order_id)",
            );
        }
    },
};

#[cfg(test)]
mod tests {
    use crate::rules::test_support::{clean_with, findings_of};

    #[test]
    fn an_ordered_message_without_a_key_is_an_error() {
        let yaml = clean_with("    key: order_id\n", "");
        assert_eq!(
            findings_of(&yaml, "FT006"),
            ["message OrderPlaced: is ordered but has no key: no order can be kept"]
        );
    }

    #[test]
    fn an_unordered_message_on_exclusive_or_shared_queues_needs_no_key() {
        let yaml = clean_with("    key: order_id\n    ordered: true\n", "")
            .replace("mode: key-shared", "mode: exclusive");
        assert!(findings_of(&yaml, "FT006").is_empty());
    }

    #[test]
    fn a_key_shared_subscription_needs_a_key_on_its_messages() {
        let yaml = clean_with("    key: order_id\n    ordered: true\n", "");
        assert_eq!(
            findings_of(&yaml, "FT006"),
            ["message OrderPlaced: has no key, but subscription \
              ecommerce-order-events/inventory-reservation.fifo delivers in key order"]
        );
    }
}
