//! Failures and backlogs are seen by someone.

use super::Rule;
use super::view::{endpoints, group_element};
use crate::Severity;

/// FT011. Seed: patterns guide Process step 6 ("alert on DLQ depth > 0. A non-empty DLQ
/// always indicates a processing problem"); backend guide Rules ("DLQ must have
/// monitoring and alerting. Unattended DLQ = silent data loss").
pub const DLQ_DEPTH: Rule = Rule {
    id: "FT011",
    name: "dlq-depth-alert",
    severity: Severity::Error,
    summary: "every queue and subscription alerts on its dead-letter queue's depth",
    check: |topology, report| {
        for e in endpoints(topology) {
            if e.alerts.and_then(|a| a.dlq_depth).is_none() {
                report.add(
                    &e.element,
                    e.line,
                    "has no dead-letter depth alert: failures pile up unseen",
                    "set `alerts.dlq_depth: 0` (alert on the first dead letter)",
                );
            }
        }
    },
};

/// FT012. Seed: patterns guide Process step 8 ("track message age … a spike in message
/// age is often the first signal of a slow consumer") and Rule 10 (time-based, not
/// count-based, backlog alerts).
pub const OLDEST_AGE: Rule = Rule {
    id: "FT012",
    name: "oldest-age-alert",
    severity: Severity::Error,
    summary: "every queue and subscription alerts on the age of its oldest message",
    check: |topology, report| {
        for e in endpoints(topology) {
            if e.alerts.and_then(|a| a.oldest_age).is_none() {
                report.add(
                    &e.element,
                    e.line,
                    "has no oldest-message age alert: a stalled consumer goes unnoticed",
                    "set `alerts.oldest_age` to the latency the consumers promise (e.g. 60s)",
                );
            }
        }
    },
};

/// FT016. Seed: patterns guide Rule 10 ("consumer lag alerts must be time-based, not
/// count-based") and Process step 8 ("consumer lag is the primary operational metric");
/// backend guide Rules ("consumer lag must be monitored"). The format takes lag only as
/// a duration, so a count-based threshold cannot be written.
pub const LAG: Rule = Rule {
    id: "FT016",
    name: "lag-alert",
    severity: Severity::Error,
    summary: "every consumer group alerts on its lag, in time",
    check: |topology, report| {
        for t in &topology.topics {
            for g in &t.consumer_groups {
                if g.alerts.as_ref().and_then(|a| a.lag).is_none() {
                    report.add(
                        group_element(t, &g.name),
                        g.name.line(),
                        "has no lag alert: it can fall behind unnoticed",
                        "set `alerts.lag` (a time, e.g. 60s)",
                    );
                }
            }
        }
    },
};

#[cfg(test)]
mod tests {
    use crate::rules::test_support::{clean_with, findings_of};

    const EMAIL_ALERTS: &str =
        "        alerts: { dlq_depth: 0, oldest_age: 60s }\n      # Transient";
    const EMAIL: &str = "subscription ecommerce-order-events/email-notifications";

    #[test]
    fn a_subscription_without_a_dlq_depth_alert_is_an_error() {
        let yaml = clean_with(
            EMAIL_ALERTS,
            "        alerts: { oldest_age: 60s }\n      # Transient",
        );
        assert_eq!(
            findings_of(&yaml, "FT011"),
            [format!(
                "{EMAIL}: has no dead-letter depth alert: failures pile up unseen"
            )]
        );
        assert!(findings_of(&yaml, "FT012").is_empty());
    }

    #[test]
    fn a_subscription_without_an_oldest_age_alert_is_an_error() {
        let yaml = clean_with(EMAIL_ALERTS, "      # Transient");
        assert_eq!(
            findings_of(&yaml, "FT012"),
            [format!(
                "{EMAIL}: has no oldest-message age alert: a stalled consumer goes unnoticed"
            )]
        );
    }

    #[test]
    fn a_consumer_group_without_a_lag_alert_is_an_error() {
        let group = "    consumer_groups:\n      - name: audit\n        \
                     consumers: { name: audit-log, idempotent: true }\n";
        let yaml = clean_with(
            "    subscriptions:\n",
            &format!("{group}    subscriptions:\n"),
        );
        assert_eq!(
            findings_of(&yaml, "FT016"),
            [
                "consumer-group ecommerce-order-events/audit: has no lag alert: it can fall behind unnoticed"
            ]
        );
        let yaml = clean_with(
            "    subscriptions:\n",
            &format!("{group}        alerts: {{ lag: 60s }}\n    subscriptions:\n"),
        );
        assert!(findings_of(&yaml, "FT016").is_empty());
    }
}
