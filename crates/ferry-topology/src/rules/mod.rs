//! The lint rules: each a stable id, a severity, and a check over the whole topology.
//! Each rule's doc comment names the seed rule it comes from (the message-queue patterns
//! guide: its numbered Rules and Process steps; the backend message-queue guide: its
//! completion criteria and Rules).

mod alerts;
mod backoff;
mod consumers;
mod dead_letter;
mod guarantee;
mod limits;
mod names;
mod ordering;
mod personal_data;
mod retention;
mod schema;
mod view;

use crate::{Finding, Severity, Topology};

/// One rule.
#[derive(Debug)]
pub struct Rule {
    /// Stable: tools and CI configurations refer to it.
    pub id: &'static str,
    /// A short kebab-case name.
    pub name: &'static str,
    pub severity: Severity,
    /// What the rule asks, in one line.
    pub summary: &'static str,
    check: fn(&Topology, &mut Report<'_>),
}

/// Collects one rule's findings.
pub(crate) struct Report<'a> {
    rule: &'a Rule,
    findings: &'a mut Vec<Finding>,
}

impl Report<'_> {
    pub(crate) fn add(
        &mut self,
        element: impl Into<String>,
        line: Option<u64>,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) {
        self.findings.push(Finding {
            id: self.rule.id,
            severity: self.rule.severity,
            element: element.into(),
            line,
            message: message.into(),
            fix: fix.into(),
        });
    }
}

/// Every rule, in id order.
pub static RULES: &[Rule] = &[
    dead_letter::DEAD_LETTER,
    dead_letter::MAX_DELIVERIES,
    backoff::BACKOFF,
    schema::SCHEMA,
    schema::SCHEMA_VERSION,
    ordering::ORDERING_KEY,
    guarantee::IDEMPOTENCY_KEY,
    guarantee::GUARANTEE,
    guarantee::EXACTLY_ONCE,
    personal_data::PERSONAL_DATA,
    alerts::DLQ_DEPTH,
    alerts::OLDEST_AGE,
    limits::MAX_MESSAGE_SIZE,
    retention::RETENTION,
    retention::OUTLASTS_OUTAGE,
    alerts::LAG,
    dead_letter::DEAD_LETTER_RETENTION,
    consumers::WITHIN_PARTITIONS,
    limits::PRIORITIES,
    names::REFERENCES,
    names::UNIQUE,
    consumers::DECLARED,
    consumers::IDEMPOTENT,
];

/// Runs every rule; findings come in rule order, then file order.
pub fn lint(topology: &Topology) -> Vec<Finding> {
    let mut findings = Vec::new();
    for rule in RULES {
        let mut report = Report {
            rule,
            findings: &mut findings,
        };
        (rule.check)(topology, &mut report);
    }
    findings
}

#[cfg(test)]
pub(crate) mod test_support {
    use crate::{Finding, Topology};

    /// A topology that breaks no rule, for tests to change one thing in: the seed's
    /// e-commerce design, which the CLI tests also lint.
    pub const CLEAN: &str = include_str!("../../../../examples/topology/ecommerce.yaml");

    /// Lints `yaml` and keeps the findings of rule `id`, as `element: message` lines.
    pub fn findings_of(yaml: &str, id: &str) -> Vec<String> {
        let topology = Topology::from_yaml(yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
        super::lint(&topology)
            .into_iter()
            .filter(|f: &Finding| f.id == id)
            .map(|f| format!("{}: {}", f.element, f.message))
            .collect()
    }

    /// `CLEAN` with the first `from` replaced by `to` (which must occur).
    pub fn clean_with(from: &str, to: &str) -> String {
        assert!(CLEAN.contains(from), "the clean example has no {from:?}");
        CLEAN.replacen(from, to, 1)
    }

    #[test]
    fn the_clean_example_has_no_finding() {
        let topology = Topology::from_yaml(CLEAN).unwrap();
        assert_eq!(super::lint(&topology), Vec::<Finding>::new());
    }

    #[test]
    fn a_finding_points_at_the_line_its_element_is_defined_on() {
        let yaml = clean_with(
            "        dead_letter: { name: analytics-ingest-dlq, retention: 14d }\n",
            "",
        )
        .replace("    schema: { format: json-schema, version: 1 }\n", "");
        let findings = super::lint(&Topology::from_yaml(&yaml).unwrap());
        let line_of = |text: &str| {
            yaml.lines()
                .position(|l| l.trim_end() == text)
                .map(|i| i as u64 + 1)
        };
        let lines: Vec<(&str, Option<u64>)> = findings.iter().map(|f| (f.id, f.line)).collect();
        assert_eq!(
            lines,
            [
                ("FT001", line_of("      - name: analytics-ingest")),
                ("FT004", line_of("  - name: OrderPlaced")),
            ]
        );
        assert!(lines.iter().all(|(_, line)| line.is_some()));
    }

    #[test]
    fn rule_ids_are_unique_and_in_order() {
        let ids: Vec<&str> = super::RULES.iter().map(|r| r.id).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(ids, sorted);
    }
}
