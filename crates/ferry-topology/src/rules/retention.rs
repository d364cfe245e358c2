//! Messages are kept long enough, and not forever.

use super::Rule;
use super::view::{channels, endpoints};
use crate::Severity;

/// FT014. Seed: backend guide Rules ("always set a retention limit (time or size).
/// Never use infinite retention") and Anti-Patterns ("infinite retention: storage
/// explosion"); completion criteria ("every topic/queue has: … retention").
pub const RETENTION: Rule = Rule {
    id: "FT014",
    name: "retention",
    severity: Severity::Error,
    summary: "every queue and topic sets a retention",
    check: |topology, report| {
        for c in channels(topology).iter().filter(|c| c.retention.is_none()) {
            report.add(
                &c.element,
                c.line,
                "sets no retention: storage grows without bound, or the broker's default decides silently",
                "set `retention` (e.g. 7d)",
            );
        }
    },
};

/// FT015. Seed: patterns guide Process step 6 ("SQS default is 4 days — explicitly set
/// MessageRetentionPeriod") and its e-commerce example (retention chosen per consumer:
/// analytics keeps 14 days for maintenance windows); backend guide Step 5 ("processed
/// set TTL: match broker retention"). A consumer that is down longer than its queue
/// keeps messages loses them: retention must outlast the longest outage the design
/// plans for, so the file must declare one.
pub const OUTLASTS_OUTAGE: Rule = Rule {
    id: "FT015",
    name: "retention-outlasts-outage",
    severity: Severity::Error,
    summary: "retention is longer than the longest consumer outage the file declares",
    check: |topology, report| {
        let Some(outage) = topology.longest_consumer_outage else {
            report.add(
                format!("topology {}", topology.name),
                topology.name.line(),
                "declares no longest consumer outage: retention cannot be checked against it",
                "set `longest_consumer_outage` (e.g. 1d)",
            );
            return;
        };
        let stores = channels(topology)
            .into_iter()
            .map(|c| (c.element, c.line, c.retention))
            .chain(
                endpoints(topology)
                    .into_iter()
                    .filter(|e| e.element.starts_with("subscription "))
                    .map(|e| (e.element, e.line, e.retention)),
            );
        for (element, line, retention) in stores {
            if let Some(retention) = retention
                && retention <= outage
            {
                report.add(
                    element,
                    line,
                    format!("keeps messages {retention}, not longer than the longest consumer outage ({outage}): they expire unread"),
                    format!("set `retention` above {outage}"),
                );
            }
        }
    },
};

#[cfg(test)]
mod tests {
    use crate::rules::test_support::{clean_with, findings_of};

    #[test]
    fn a_topic_without_retention_is_an_error() {
        let yaml = clean_with("    retention: 7d\n", "");
        assert_eq!(
            findings_of(&yaml, "FT014"),
            [
                "topic ecommerce-order-events: sets no retention: storage grows without bound, \
              or the broker's default decides silently"
            ]
        );
    }

    #[test]
    fn retention_not_longer_than_the_declared_outage_is_an_error() {
        let yaml = clean_with("longest_consumer_outage: 1d", "longest_consumer_outage: 4d");
        assert_eq!(
            findings_of(&yaml, "FT015"),
            [
                "subscription ecommerce-order-events/email-notifications: keeps messages 4d, \
              not longer than the longest consumer outage (4d): they expire unread"
            ]
        );
    }

    #[test]
    fn retention_longer_than_the_declared_outage_is_fine() {
        let yaml = clean_with(
            "longest_consumer_outage: 1d",
            "longest_consumer_outage: 95h",
        );
        assert!(findings_of(&yaml, "FT015").is_empty());
    }

    #[test]
    fn no_declared_outage_is_an_error() {
        let yaml = clean_with("longest_consumer_outage: 1d\n", "");
        assert_eq!(
            findings_of(&yaml, "FT015"),
            [
                "topology ecommerce-order-processing: declares no longest consumer outage: \
              retention cannot be checked against it"
            ]
        );
    }
}
