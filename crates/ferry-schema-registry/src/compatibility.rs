//! Whether a new schema may follow a subject's earlier versions under a compatibility
//! level: which versions and directions the level names, and each format's rules for one
//! direction — Avro's own schema-resolution rules (the `apache-avro` crate's
//! `SchemaCompatibility`), Confluent's JSON Schema rules (`json_schema::compatibility`)
//! and its Protobuf rules (`protobuf::compatibility`). A pure decision: schemas in,
//! reasons out.

use apache_avro::Schema;
use apache_avro::schema_compatibility::{Compatibility, SchemaCompatibility};

use crate::CompatibilityLevel;
use crate::avro::error_text;
use crate::format::Parsed;
use crate::{json_schema, protobuf};

/// An earlier version of the subject, parsed.
pub(crate) struct Earlier<'a> {
    pub version: u32,
    pub schema: &'a Parsed,
}

/// Why `new` breaks `level` against `earlier` (oldest first), one message per failed
/// check; empty when it is compatible. A non-transitive level looks at the newest only.
pub(crate) fn violations(
    level: CompatibilityLevel,
    new: &Parsed,
    earlier: &[Earlier<'_>],
) -> Vec<String> {
    let against: &[Earlier<'_>] = if level.transitive() {
        earlier
    } else {
        earlier.len().checked_sub(1).map_or(&[], |i| &earlier[i..])
    };
    let mut messages = Vec::new();
    for old in against {
        if level != CompatibilityLevel::None && old.schema.schema_type() != new.schema_type() {
            messages.push(format!(
                "{level}: the new schema is {} and version {} is {}: a reader of one \
                 format cannot read data written in another",
                new.schema_type().as_str(),
                old.version,
                old.schema.schema_type().as_str()
            ));
            continue;
        }
        if level.backward() {
            for why in readable(old.schema, new) {
                messages.push(format!(
                    "{level}: the new schema cannot read data written with version {}: {why}",
                    old.version
                ));
            }
        }
        if level.forward() {
            for why in readable(new, old.schema) {
                messages.push(format!(
                    "{level}: version {} cannot read data written with the new schema: {why}",
                    old.version
                ));
            }
        }
    }
    messages
}

/// Why some datum `writer` writes cannot be read as `reader`; empty when all can.
fn readable(writer: &Parsed, reader: &Parsed) -> Vec<String> {
    match (writer, reader) {
        (Parsed::Avro(w), Parsed::Avro(r)) => avro_readable(w, r).err().into_iter().collect(),
        (Parsed::Json(w), Parsed::Json(r)) => json_schema::compatibility::readable(w, r),
        (Parsed::Protobuf(w), Parsed::Protobuf(r)) => protobuf::compatibility::readable(w, r),
        (w, r) => vec![format!(
            "data written as {} cannot be read as {}",
            w.schema_type().as_str(),
            r.schema_type().as_str()
        )],
    }
}

/// Whether every datum `writer` writes can be read as `reader`. Avro's "partial" answer
/// (some data resolves, some fails: an enum symbol or union branch the reader lacks) is a
/// refusal, as in Avro's Java checker that Confluent's registry uses: a consumer must not
/// fail on the first message that happens to carry the missing symbol.
fn avro_readable(writer: &Schema, reader: &Schema) -> Result<(), String> {
    match SchemaCompatibility::can_read(writer, reader) {
        Ok(Compatibility::Full) => Ok(()),
        Ok(Compatibility::Partial) => Err(
            "only part of the data resolves: the reader lacks an enum symbol (and has no \
             enum default) or a union branch the writer may use"
                .to_owned(),
        ),
        Err(error) => Err(error_text(&error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::avro::parse;

    /// `OrderPlaced` of the orders example (`examples/orders/src/domain.rs`) in Avro, and
    /// its consumer-first evolutions.
    const ORDER_PLACED_V1: &str = r#"{"type":"record","name":"OrderPlaced","namespace":"shop",
        "fields":[{"name":"order_id","type":"string"},{"name":"customer","type":"string"},
                  {"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line",
                      "fields":[{"name":"sku","type":"string"},{"name":"quantity","type":"long"}]}}},
                  {"name":"total_cents","type":"long"}]}"#;
    /// v1.1: an optional field with a default, which readers on v1.1 fill in for old data.
    const ORDER_PLACED_V1_1: &str = r#"{"type":"record","name":"OrderPlaced","namespace":"shop",
        "fields":[{"name":"order_id","type":"string"},{"name":"customer","type":"string"},
                  {"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line",
                      "fields":[{"name":"sku","type":"string"},{"name":"quantity","type":"long"}]}}},
                  {"name":"total_cents","type":"long"},
                  {"name":"coupon","type":["null","string"],"default":null}]}"#;
    /// A field added without a default: a new reader has nothing to fill in for old data.
    const ADDS_REQUIRED: &str = r#"{"type":"record","name":"OrderPlaced","namespace":"shop",
        "fields":[{"name":"order_id","type":"string"},{"name":"customer","type":"string"},
                  {"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line",
                      "fields":[{"name":"sku","type":"string"},{"name":"quantity","type":"long"}]}}},
                  {"name":"total_cents","type":"long"},{"name":"currency","type":"string"}]}"#;
    /// `total_cents` removed (it had no default).
    const REMOVES_FIELD: &str = r#"{"type":"record","name":"OrderPlaced","namespace":"shop",
        "fields":[{"name":"order_id","type":"string"},{"name":"customer","type":"string"},
                  {"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line",
                      "fields":[{"name":"sku","type":"string"},{"name":"quantity","type":"long"}]}}}]}"#;
    /// `total_cents` turned from a long into a string.
    const CHANGES_TYPE: &str = r#"{"type":"record","name":"OrderPlaced","namespace":"shop",
        "fields":[{"name":"order_id","type":"string"},{"name":"customer","type":"string"},
                  {"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line",
                      "fields":[{"name":"sku","type":"string"},{"name":"quantity","type":"long"}]}}},
                  {"name":"total_cents","type":"string"}]}"#;
    /// A line's quantity narrowed from a long to an int, deep inside the array.
    const NARROWS_NESTED: &str = r#"{"type":"record","name":"OrderPlaced","namespace":"shop",
        "fields":[{"name":"order_id","type":"string"},{"name":"customer","type":"string"},
                  {"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line",
                      "fields":[{"name":"sku","type":"string"},{"name":"quantity","type":"int"}]}}},
                  {"name":"total_cents","type":"long"}]}"#;

    fn check(level: CompatibilityLevel, history: &[&str], new: &str) -> Vec<String> {
        let parsed: Vec<Parsed> = history
            .iter()
            .map(|s| Parsed::Avro(parse(s, &[]).unwrap()))
            .collect();
        let earlier: Vec<Earlier<'_>> = parsed
            .iter()
            .zip(1..)
            .map(|(schema, version)| Earlier { version, schema })
            .collect();
        violations(level, &Parsed::Avro(parse(new, &[]).unwrap()), &earlier)
    }

    #[test]
    fn adding_an_optional_field_with_a_default_is_backward_and_forward_compatible() {
        for level in CompatibilityLevel::ALL {
            assert_eq!(
                check(level, &[ORDER_PLACED_V1], ORDER_PLACED_V1_1),
                Vec::<String>::new(),
                "{level}"
            );
        }
    }

    #[test]
    fn removing_a_field_without_default_breaks_forward_but_not_backward() {
        assert!(
            check(
                CompatibilityLevel::Backward,
                &[ORDER_PLACED_V1],
                REMOVES_FIELD
            )
            .is_empty()
        );
        let refused = check(
            CompatibilityLevel::Forward,
            &[ORDER_PLACED_V1],
            REMOVES_FIELD,
        );
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0].contains("total_cents"), "{refused:?}");
        assert!(!check(CompatibilityLevel::Full, &[ORDER_PLACED_V1], REMOVES_FIELD).is_empty());
    }

    #[test]
    fn adding_a_field_without_default_breaks_backward_but_not_forward() {
        let refused = check(
            CompatibilityLevel::Backward,
            &[ORDER_PLACED_V1],
            ADDS_REQUIRED,
        );
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0].contains("currency"), "{refused:?}");
        assert!(refused[0].starts_with("BACKWARD"), "{refused:?}");
        assert!(
            check(
                CompatibilityLevel::Forward,
                &[ORDER_PLACED_V1],
                ADDS_REQUIRED
            )
            .is_empty()
        );
    }

    #[test]
    fn changing_a_field_type_is_refused_both_ways() {
        for level in [
            CompatibilityLevel::Backward,
            CompatibilityLevel::Forward,
            CompatibilityLevel::Full,
        ] {
            let refused = check(level, &[ORDER_PLACED_V1], CHANGES_TYPE);
            assert!(!refused.is_empty(), "{level}");
            assert!(refused[0].contains("total_cents"), "{refused:?}");
        }
        let both = check(CompatibilityLevel::Full, &[ORDER_PLACED_V1], CHANGES_TYPE);
        assert_eq!(both.len(), 2, "full checks both directions: {both:?}");
    }

    #[test]
    fn narrowing_a_nested_field_is_refused_backward_and_widening_it_back_is_not() {
        let refused = check(
            CompatibilityLevel::Backward,
            &[ORDER_PLACED_V1],
            NARROWS_NESTED,
        );
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0].contains("lines"), "{refused:?}");
        // int data is read as long: widening is backward compatible.
        assert!(
            check(
                CompatibilityLevel::Backward,
                &[NARROWS_NESTED],
                ORDER_PLACED_V1
            )
            .is_empty()
        );
    }

    #[test]
    fn none_accepts_anything() {
        assert!(check(CompatibilityLevel::None, &[ORDER_PLACED_V1], CHANGES_TYPE).is_empty());
    }

    #[test]
    fn transitive_levels_check_every_earlier_version_others_only_the_latest() {
        // v1 has a long `total_cents`, v2 dropped it, v3 brings it back as a string with a
        // default: fine against v2 in both directions, unreadable against v1.
        let v3 = r#"{"type":"record","name":"OrderPlaced","namespace":"shop",
            "fields":[{"name":"order_id","type":"string"},{"name":"customer","type":"string"},
                      {"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line",
                          "fields":[{"name":"sku","type":"string"},{"name":"quantity","type":"long"}]}}},
                      {"name":"total_cents","type":"string","default":"0"}]}"#;
        let history = [ORDER_PLACED_V1, REMOVES_FIELD];
        assert!(check(CompatibilityLevel::Backward, &history, v3).is_empty());
        let refused = check(CompatibilityLevel::BackwardTransitive, &history, v3);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0].contains("version 1"), "{refused:?}");
        assert!(check(CompatibilityLevel::Forward, &history, v3).is_empty());
        assert!(!check(CompatibilityLevel::ForwardTransitive, &history, v3).is_empty());
        assert!(check(CompatibilityLevel::Full, &history, v3).is_empty());
        assert!(!check(CompatibilityLevel::FullTransitive, &history, v3).is_empty());
    }

    #[test]
    fn a_missing_enum_symbol_is_refused_rather_than_partially_accepted() {
        let three = r#"{"type":"enum","name":"Status","symbols":["NEW","PAID","SHIPPED"]}"#;
        let two = r#"{"type":"enum","name":"Status","symbols":["NEW","PAID"]}"#;
        assert!(!check(CompatibilityLevel::Backward, &[three], two).is_empty());
        assert!(check(CompatibilityLevel::Backward, &[two], three).is_empty());
    }
}
