//! Who consumes, how many, and whether they can take a duplicate.

use super::Rule;
use super::view::{endpoints, group_element};
use crate::Severity;
use crate::format::Guarantee;

/// FT018. Seed: backend guide Step 7 ("rule: consumer count <= partition count");
/// patterns guide Process step 8 ("partition count determines maximum parallelism").
/// A warning: the extra consumers are idle, not harmful.
pub const WITHIN_PARTITIONS: Rule = Rule {
    id: "FT018",
    name: "consumers-within-partitions",
    severity: Severity::Warning,
    summary: "a consumer group has no more consumers than its topic has partitions",
    check: |topology, report| {
        for t in &topology.topics {
            let Some(partitions) = t.partitions else {
                continue;
            };
            for g in &t.consumer_groups {
                let Some(instances) = g.consumers.as_ref().and_then(|c| c.instances) else {
                    continue;
                };
                if instances > partitions {
                    report.add(
                        group_element(t, &g.name),
                        g.name.line(),
                        format!(
                            "has {instances} consumers for {partitions} partitions: {} stay idle",
                            instances - partitions
                        ),
                        format!("run at most {partitions} consumers, or add partitions now (later it breaks key order)"),
                    );
                }
            }
        }
    },
};

/// FT022. Seed: backend guide Response Format and completion criteria ("every
/// topic/queue has: … consumers"); backend guide Rules ("never consume from production
/// topics without a consumer group id").
pub const DECLARED: Rule = Rule {
    id: "FT022",
    name: "consumers",
    severity: Severity::Error,
    summary: "every queue, subscription and consumer group names its consumers",
    check: |topology, report| {
        let fix = "add `consumers: { name: SERVICE, idempotent: true }`";
        for e in endpoints(topology).iter().filter(|e| e.consumers.is_none()) {
            report.add(&e.element, e.line, "names no consumers", fix);
        }
        for t in &topology.topics {
            for g in t.consumer_groups.iter().filter(|g| g.consumers.is_none()) {
                report.add(
                    group_element(t, &g.name),
                    g.name.line(),
                    "names no consumers",
                    fix,
                );
            }
        }
    },
};

/// FT023. Seed: patterns guide Process step 4 ("every production message consumer must
/// be idempotent. This is non-negotiable with at-least-once delivery"); backend guide
/// Step 4 ("at-least-once … required: idempotent consumer").
pub const IDEMPOTENT: Rule = Rule {
    id: "FT023",
    name: "idempotent-consumers",
    severity: Severity::Error,
    summary: "consumers of at-least-once messages are idempotent",
    check: |topology, report| {
        for e in endpoints(topology) {
            let Some(consumers) = e.consumers.filter(|c| !c.idempotent) else {
                continue;
            };
            let redelivered = e.messages.iter().find(|name| {
                topology
                    .message(name.as_str())
                    .is_some_and(|m| m.guarantee == Some(Guarantee::AtLeastOnce))
            });
            if let Some(name) = redelivered {
                report.add(
                    &e.element,
                    e.line,
                    format!(
                        "consumers {} are not idempotent, but {name} is delivered at least once",
                        consumers.name
                    ),
                    "deduplicate by the idempotency key in the consumer and say `idempotent: true`",
                );
            }
        }
    },
};

#[cfg(test)]
mod tests {
    use crate::rules::test_support::{clean_with, findings_of};

    const GROUPS: &str = "    subscriptions:\n";

    fn with_group(instances: u32) -> String {
        clean_with(
            GROUPS,
            &format!(
                "    consumer_groups:\n      - name: audit\n        \
                 consumers: {{ name: audit-log, idempotent: true, instances: {instances} }}\n        \
                 alerts: {{ lag: 30s }}\n    subscriptions:\n"
            ),
        )
    }

    #[test]
    fn more_consumers_than_partitions_is_a_warning() {
        assert_eq!(
            findings_of(&with_group(3), "FT018"),
            [
                "consumer-group ecommerce-order-events/audit: has 3 consumers for 1 partitions: 2 stay idle"
            ]
        );
        assert!(findings_of(&with_group(1), "FT018").is_empty());
    }

    #[test]
    fn a_subscription_without_consumers_is_an_error() {
        let yaml = clean_with(
            "        consumers: { name: email-service, idempotent: true, instances: 1 }\n",
            "",
        );
        assert_eq!(
            findings_of(&yaml, "FT022"),
            ["subscription ecommerce-order-events/email-notifications: names no consumers"]
        );
    }

    #[test]
    fn consumers_of_at_least_once_messages_must_be_idempotent() {
        let yaml = clean_with(
            "{ name: email-service, idempotent: true",
            "{ name: email-service, idempotent: false",
        );
        assert_eq!(
            findings_of(&yaml, "FT023"),
            [
                "subscription ecommerce-order-events/email-notifications: consumers email-service \
              are not idempotent, but OrderPlaced is delivered at least once"
            ]
        );
    }
}
