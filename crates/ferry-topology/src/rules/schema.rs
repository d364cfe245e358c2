//! Every message type has a versioned schema.

use super::Rule;
use crate::Severity;

/// FT004. Seed: backend guide completion criteria ("every message has: schema with
/// version …") and "schema evolution strategy is defined"; patterns guide Process step 8
/// ("use schema registries … validate at publish time").
pub const SCHEMA: Rule = Rule {
    id: "FT004",
    name: "schema",
    severity: Severity::Error,
    summary: "every message type has a schema",
    check: |topology, report| {
        for m in topology.messages.iter().filter(|m| m.schema.is_none()) {
            report.add(
                format!("message {}", m.name),
                m.name.line(),
                "has no schema: producers and consumers can drift apart unnoticed",
                "add `schema: { format: json-schema, version: 1 }`",
            );
        }
    },
};

/// FT005. Seed: patterns guide Rule 6 ("message payload schemas must be versioned and
/// backward compatible … increment the version field"); backend guide Rules ("schema
/// evolve via new version — never mutate existing message schemas").
pub const SCHEMA_VERSION: Rule = Rule {
    id: "FT005",
    name: "schema-version",
    severity: Severity::Error,
    summary: "every message schema has a version",
    check: |topology, report| {
        for m in &topology.messages {
            if let Some(schema) = &m.schema
                && schema.version.is_none()
            {
                report.add(
                    format!("message {}", m.name),
                    m.name.line(),
                    "has an unversioned schema: a change cannot be told from the old one",
                    "set `schema.version` (and bump it on every change)",
                );
            }
        }
    },
};

#[cfg(test)]
mod tests {
    use crate::rules::test_support::{clean_with, findings_of};

    const SCHEMA: &str = "    schema: { format: json-schema, version: 1 }\n";

    #[test]
    fn a_message_without_a_schema_is_an_error() {
        let yaml = clean_with(SCHEMA, "");
        assert_eq!(
            findings_of(&yaml, "FT004"),
            [
                "message OrderPlaced: has no schema: producers and consumers can drift apart unnoticed"
            ]
        );
        assert!(findings_of(&yaml, "FT005").is_empty());
    }

    #[test]
    fn a_schema_without_a_version_is_an_error() {
        let yaml = clean_with(SCHEMA, "    schema: { format: avro }\n");
        assert_eq!(
            findings_of(&yaml, "FT005"),
            [
                "message OrderPlaced: has an unversioned schema: a change cannot be told from the old one"
            ]
        );
    }
}
