//! What consumers may assume about duplicates and loss, and what makes it true.

use super::Rule;
use super::view::carriers;
use crate::Severity;
use crate::format::Guarantee;

/// FT007. Seed: patterns guide Process step 4 ("every production message consumer must
/// be idempotent … include a message ID in every message envelope"); backend guide
/// Step 5 and completion criteria ("every message has: … idempotency key").
///
/// At-most-once messages are exempt: they are never redelivered, so there is nothing to
/// deduplicate.
pub const IDEMPOTENCY_KEY: Rule = Rule {
    id: "FT007",
    name: "idempotency-key",
    severity: Severity::Error,
    summary: "every message type that may be redelivered has an idempotency key",
    check: |topology, report| {
        for m in &topology.messages {
            if m.idempotency_key.is_none() && m.guarantee != Some(Guarantee::AtMostOnce) {
                report.add(
                    format!("message {}", m.name),
                    m.name.line(),
                    "has no idempotency key: a redelivered message cannot be told from a new one",
                    "set `idempotency_key` (the message id, or business key + event type)",
                );
            }
        }
    },
};

/// FT008. Seed: patterns guide Process step 1 ("pin down the delivery semantics the
/// system actually needs"); backend guide completion criteria ("every message has: …
/// delivery guarantee").
pub const GUARANTEE: Rule = Rule {
    id: "FT008",
    name: "delivery-guarantee",
    severity: Severity::Error,
    summary: "every message type states its delivery guarantee",
    check: |topology, report| {
        for m in topology.messages.iter().filter(|m| m.guarantee.is_none()) {
            report.add(
                format!("message {}", m.name),
                m.name.line(),
                "states no delivery guarantee",
                "set `guarantee` (at-least-once, unless loss is acceptable or exactly-once is mandated)",
            );
        }
    },
};

/// FT009. Seed: patterns guide Process step 1 ("exactly-once … requires either
/// idempotent consumers + deduplication keys, or broker-level transactions"); backend
/// guide Step 4 ("exactly-once: transactional producers + idempotent consumers +
/// dedup").
pub const EXACTLY_ONCE: Rule = Rule {
    id: "FT009",
    name: "exactly-once",
    severity: Severity::Error,
    summary: "exactly-once is claimed only with dedup and idempotent consumers",
    check: |topology, report| {
        for m in &topology.messages {
            if m.guarantee != Some(Guarantee::ExactlyOnce) {
                continue;
            }
            let element = format!("message {}", m.name);
            if m.idempotency_key.is_none() {
                report.add(
                    &element,
                    m.name.line(),
                    "claims exactly-once without an idempotency key",
                    "set `idempotency_key`, or claim at-least-once",
                );
            }
            for e in carriers(topology, m.name.as_str()) {
                if e.delivery.and_then(|d| d.dedup_window).is_none() {
                    report.add(
                        &element,
                        m.name.line(),
                        format!("claims exactly-once, but {} has no dedup window", e.element),
                        format!(
                            "set `delivery.dedup_window` on {} longer than its redelivery span",
                            e.element
                        ),
                    );
                }
                if !e.consumers.is_some_and(|c| c.idempotent) {
                    report.add(
                        &element,
                        m.name.line(),
                        format!(
                            "claims exactly-once, but the consumers of {} are not idempotent",
                            e.element
                        ),
                        format!(
                            "make the consumers of {} idempotent and say `idempotent: true`",
                            e.element
                        ),
                    );
                }
            }
        }
    },
};

#[cfg(test)]
mod tests {
    use crate::rules::test_support::{clean_with, findings_of};

    const KEY: &str = "    idempotency_key: id\n";

    #[test]
    fn a_redeliverable_message_without_an_idempotency_key_is_an_error() {
        let yaml = clean_with(KEY, "");
        assert_eq!(
            findings_of(&yaml, "FT007"),
            [
                "message OrderPlaced: has no idempotency key: a redelivered message cannot be told from a new one"
            ]
        );
        let at_most_once = clean_with(KEY, "").replace("at-least-once", "at-most-once");
        assert!(findings_of(&at_most_once, "FT007").is_empty());
    }

    #[test]
    fn a_message_without_a_guarantee_is_an_error() {
        let yaml = clean_with("    guarantee: at-least-once\n", "");
        assert_eq!(
            findings_of(&yaml, "FT008"),
            ["message OrderPlaced: states no delivery guarantee"]
        );
    }

    #[test]
    fn exactly_once_needs_dedup_on_every_carrier() {
        let yaml = clean_with("guarantee: at-least-once", "guarantee: exactly-once");
        // Inventory and payment deduplicate; email and analytics do not.
        assert_eq!(
            findings_of(&yaml, "FT009"),
            [
                "message OrderPlaced: claims exactly-once, but subscription \
                 ecommerce-order-events/email-notifications has no dedup window",
                "message OrderPlaced: claims exactly-once, but subscription \
                 ecommerce-order-events/analytics-ingest has no dedup window",
            ]
        );
    }

    #[test]
    fn exactly_once_with_dedup_everywhere_and_idempotent_consumers_is_fine() {
        let yaml = clean_with("guarantee: at-least-once", "guarantee: exactly-once").replace(
            "          retry: { initial: 1s, multiplier: 2, max: 120s",
            "          dedup_window: 1h\n          retry: { initial: 1s, multiplier: 2, max: 120s",
        ).replace(
            "          retry: { initial: 5s,",
            "          dedup_window: 1h\n          retry: { initial: 5s,",
        );
        assert!(findings_of(&yaml, "FT009").is_empty());
    }

    #[test]
    fn exactly_once_needs_idempotent_consumers_and_a_key() {
        let yaml = clean_with("guarantee: at-least-once", "guarantee: exactly-once")
            .replace("          dedup_window: 5m\n", "")
            .replace("max_deliveries: 10\n", "max_deliveries: 10\n          dedup_window: 1h\n")
            .replace(
                "max_deliveries: 5\n          retry: { initial: 1s, multiplier: 2, max: 120s",
                "max_deliveries: 5\n          dedup_window: 1h\n          retry: { initial: 1s, multiplier: 2, max: 120s",
            );
        let yaml = yaml.replacen("idempotent: true", "idempotent: false", 1);
        let findings = findings_of(&yaml, "FT009");
        assert_eq!(findings.len(), 3, "{findings:#?}");
        assert!(findings[0].contains("inventory-reservation.fifo has no dedup window"));
        assert!(findings[1].contains("inventory-reservation.fifo are not idempotent"));
        assert!(findings[2].contains("payment-processing.fifo has no dedup window"));
        let yaml = clean_with("guarantee: at-least-once", "guarantee: exactly-once")
            .replace("    idempotency_key: id\n", "");
        assert!(findings_of(&yaml, "FT009").contains(
            &"message OrderPlaced: claims exactly-once without an idempotency key".to_owned()
        ));
    }
}
