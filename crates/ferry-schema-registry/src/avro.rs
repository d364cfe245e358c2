//! Avro schema text: parsing (with the named types its references bring) and the identity
//! that tells two registrations of the same schema apart from different ones.

use apache_avro::Schema;

/// `text` as an Avro schema, with the named types of `references` (each a named schema's
/// JSON, the references' own references included) inlined, so that the compatibility
/// checks compare whole types rather than names.
pub(crate) fn parse(text: &str, references: &[String]) -> Result<Schema, String> {
    if references.is_empty() {
        return Schema::parse_str(text).map_err(|e| error_text(&e));
    }
    let (mut schema, named) =
        Schema::parse_str_with_list(text, references).map_err(|e| error_text(&e))?;
    schema.denormalize(&named).map_err(|e| error_text(&e))?;
    Ok(schema)
}

/// The schema's JSON with object keys sorted and no whitespace: the same schema sent
/// formatted another way is the same schema (and keeps its id), while anything that
/// changes meaning — a field, its order, a default, a doc — makes a new one. Avro's
/// Parsing Canonical Form is not used: it drops defaults, and a changed default is a
/// change a reader sees.
pub(crate) fn identity(text: &str) -> Result<String, String> {
    crate::canonical_json::identity(text)
}

/// An Avro error with its causes, which carry the useful part ("unknown type X").
pub(crate) fn error_text(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_ignores_whitespace_and_key_order_but_not_field_order() {
        let a = r#"{"type":"record","name":"A","fields":[{"name":"x","type":"int"},{"name":"y","type":"int"}]}"#;
        let b = r#"{ "name": "A", "type": "record",
                    "fields": [ {"type": "int", "name": "x"}, {"name": "y", "type": "int"} ] }"#;
        let swapped = r#"{"type":"record","name":"A","fields":[{"name":"y","type":"int"},{"name":"x","type":"int"}]}"#;
        assert_eq!(identity(a).unwrap(), identity(b).unwrap());
        assert_ne!(identity(a).unwrap(), identity(swapped).unwrap());
    }

    #[test]
    fn a_reference_is_inlined_into_the_schema_that_names_it() {
        let address = r#"{"type":"record","name":"Address","namespace":"acme","fields":[{"name":"city","type":"string"}]}"#;
        let order = r#"{"type":"record","name":"Order","namespace":"acme","fields":[{"name":"to","type":"acme.Address"}]}"#;
        assert!(
            parse(order, &[]).is_err(),
            "an unknown named type is refused"
        );
        let schema = parse(order, &[address.to_owned()]).unwrap();
        assert!(schema.canonical_form().contains("\"city\""));
    }
}
