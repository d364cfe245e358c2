//! Failed messages have somewhere to go, and stop being retried.

use super::Rule;
use super::view::endpoints;
use crate::Severity;
use crate::format::Duration;

/// FT001. Seed: patterns guide Rule 2 ("every queue in production must have a
/// corresponding Dead Letter Queue configured before the queue is used") and Process
/// step 6 ("every queue needs a DLQ"); backend guide completion criteria ("every
/// topic/queue has … DLQ").
pub const DEAD_LETTER: Rule = Rule {
    id: "FT001",
    name: "dead-letter",
    severity: Severity::Error,
    summary: "every queue and subscription has a dead-letter queue",
    check: |topology, report| {
        for e in endpoints(topology)
            .iter()
            .filter(|e| e.dead_letter.is_none())
        {
            let dlq = e.element.rsplit(['/', ' ']).next().unwrap_or("name");
            report.add(
                &e.element,
                e.line,
                "has no dead-letter queue: messages that fail for good are dropped or retried forever",
                format!("add `dead_letter: {{ name: {dlq}.dlq, retention: 14d }}`"),
            );
        }
    },
};

/// FT002. Seed: patterns guide Process step 6 ("define max delivery attempts") and the
/// poison-message edge case ("if delivery_count > max_retries, route to DLQ"); backend
/// guide Step 6 (`maxReceiveCount = 3`).
pub const MAX_DELIVERIES: Rule = Rule {
    id: "FT002",
    name: "max-deliveries",
    severity: Severity::Error,
    summary: "every queue and subscription has a max deliveries",
    check: |topology, report| {
        for e in endpoints(topology) {
            match e.delivery.and_then(|d| d.max_deliveries) {
                None => report.add(
                    &e.element,
                    e.line,
                    "has no max deliveries: a poison message is redelivered forever",
                    "set `delivery.max_deliveries` (3 to 5 for transient errors)",
                ),
                Some(0) => report.add(
                    &e.element,
                    e.line,
                    "has max deliveries 0: no message would ever be delivered",
                    "set `delivery.max_deliveries` to at least 1",
                ),
                Some(_) => {}
            }
        }
    },
};

/// DLQ retention the seed asks for.
const DLQ_RETENTION: Duration = Duration::from_days(14);

/// FT017. Seed: patterns guide Process step 6 ("set DLQ retention high: 14 days
/// minimum"). A warning: the right figure depends on how fast the team triages.
pub const DEAD_LETTER_RETENTION: Rule = Rule {
    id: "FT017",
    name: "dead-letter-retention",
    severity: Severity::Warning,
    summary: "dead-letter queues keep messages 14 days or more",
    check: |topology, report| {
        for e in endpoints(topology) {
            let Some(dlq) = e.dead_letter else { continue };
            match dlq.retention {
                Some(r) if r >= DLQ_RETENTION => {}
                Some(r) => report.add(
                    &e.element,
                    e.line,
                    format!(
                        "dead-letter queue {} keeps messages {r}: they may expire before anyone triages them",
                        dlq.name
                    ),
                    "set `dead_letter.retention` to 14d or more",
                ),
                None => report.add(
                    &e.element,
                    e.line,
                    format!("dead-letter queue {} has no retention set", dlq.name),
                    "set `dead_letter.retention` to 14d or more",
                ),
            }
        }
    },
};

#[cfg(test)]
mod tests {
    use crate::rules::test_support::{clean_with, findings_of};

    const INVENTORY_DLQ: &str =
        "        dead_letter: { name: inventory-reservation-dlq.fifo, retention: 14d }\n";

    #[test]
    fn a_subscription_without_a_dead_letter_queue_is_an_error() {
        let yaml = clean_with(INVENTORY_DLQ, "");
        assert_eq!(
            findings_of(&yaml, "FT001"),
            [
                "subscription ecommerce-order-events/inventory-reservation.fifo: has no dead-letter queue: \
              messages that fail for good are dropped or retried forever"
            ]
        );
    }

    #[test]
    fn max_deliveries_missing_or_zero_is_an_error() {
        let yaml = clean_with("max_deliveries: 5", "max_deliveries: 0");
        assert_eq!(
            findings_of(&yaml, "FT002"),
            [
                "subscription ecommerce-order-events/inventory-reservation.fifo: \
              has max deliveries 0: no message would ever be delivered"
            ]
        );
        let yaml = clean_with("          max_deliveries: 5\n", "");
        assert_eq!(findings_of(&yaml, "FT002").len(), 1);
        let yaml = clean_with("max_deliveries: 5", "max_deliveries: 1");
        assert!(findings_of(&yaml, "FT002").is_empty());
    }

    #[test]
    fn dead_letter_retention_under_fourteen_days_is_a_warning() {
        let yaml = clean_with(
            INVENTORY_DLQ,
            "        dead_letter: { name: inventory-reservation-dlq.fifo, retention: 4d }\n",
        );
        assert_eq!(
            findings_of(&yaml, "FT017"),
            [
                "subscription ecommerce-order-events/inventory-reservation.fifo: dead-letter queue \
              inventory-reservation-dlq.fifo keeps messages 4d: they may expire before anyone triages them"
            ]
        );
    }
}
