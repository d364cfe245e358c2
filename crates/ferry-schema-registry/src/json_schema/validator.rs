//! Enforcement at publish for JSON Schema subjects: a payload (the JSON document after
//! Confluent's 5-byte magic-and-id prefix) checked against the compiled schema, refused
//! with the path of the first field that fails.

use jsonschema::paths::LocationSegment;

use crate::model::Registry;
use crate::{PayloadRejection, StoredSchema};

/// A JSON Schema compiled once, for many payloads.
pub(crate) struct JsonPayloadValidator {
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for JsonPayloadValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonPayloadValidator")
            .finish_non_exhaustive()
    }
}

impl JsonPayloadValidator {
    /// Compiles `schema`, its references resolved in `registry` as registration does.
    pub(crate) fn compile(
        schema: &StoredSchema,
        registry: &Registry,
    ) -> Result<JsonPayloadValidator, String> {
        let references = registry
            .resolve_references(&schema.references)
            .map_err(|e| e.to_string())?;
        let parsed = super::parse(&schema.schema, &references)?;
        Ok(JsonPayloadValidator {
            validator: parsed.compile()?,
        })
    }

    /// Whether `payload` is a JSON document the schema accepts.
    pub(crate) fn validate(&self, payload: &[u8]) -> Result<(), PayloadRejection> {
        let document: serde_json::Value = serde_json::from_slice(payload)
            .map_err(|e| PayloadRejection::whole(format!("not a JSON document: {e}")))?;
        self.validator.validate(&document).map_err(|error| {
            PayloadRejection::at(field_path(error.instance_path()), error.to_string())
        })
    }
}

/// A JSON Pointer to an instance as a reader writes it: `order.items[2].sku`.
fn field_path(location: &jsonschema::paths::Location) -> String {
    let mut path = String::new();
    for segment in location {
        match segment {
            LocationSegment::Property(name) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&name);
            }
            LocationSegment::Index(i) => {
                path.push('[');
                path.push_str(&i.to_string());
                path.push(']');
            }
        }
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NewSchema, Reference};

    const ORDER: &str = r#"{"type":"object","required":["order"],"properties":{
        "order":{"type":"object","properties":{
            "items":{"type":"array","items":{"type":"object","required":["sku"],
                "properties":{"sku":{"type":"string"},"qty":{"type":"integer"}}}}}}}}"#;

    fn validator() -> JsonPayloadValidator {
        let mut registry = Registry::default();
        let id = registry
            .register("orders-value", &NewSchema::json(ORDER))
            .unwrap();
        JsonPayloadValidator::compile(registry.schema(id).unwrap(), &registry).unwrap()
    }

    #[test]
    fn a_valid_document_passes() {
        let v = validator();
        v.validate(br#"{"order":{"items":[{"sku":"a","qty":1}]}}"#)
            .unwrap();
    }

    #[test]
    fn a_wrong_type_at_a_nested_field_names_the_field() {
        let v = validator();
        let refused = v
            .validate(br#"{"order":{"items":[{"sku":"a"},{"sku":"b"},{"sku":7}]}}"#)
            .unwrap_err();
        assert_eq!(refused.field, "order.items[2].sku", "{refused}");
        assert!(refused.reason.contains("string"), "{refused}");
    }

    #[test]
    fn a_truncated_document_is_refused_as_a_whole() {
        let v = validator();
        let refused = v.validate(br#"{"order":{"items":[{"sku":"a""#).unwrap_err();
        assert_eq!(refused.field, "");
        assert!(
            refused.reason.starts_with("not a JSON document"),
            "{refused}"
        );
    }

    #[test]
    fn a_missing_required_field_names_its_parent() {
        let v = validator();
        let refused = v
            .validate(br#"{"order":{"items":[{"qty":1}]}}"#)
            .unwrap_err();
        assert_eq!(refused.field, "order.items[0]", "{refused}");
        assert!(refused.reason.contains("sku"), "{refused}");
    }

    #[test]
    fn references_are_resolved_as_registration_resolves_them() {
        let mut registry = Registry::default();
        registry
            .register(
                "address",
                &NewSchema::json(r#"{"type":"object","properties":{"city":{"type":"string"}}}"#),
            )
            .unwrap();
        let order = NewSchema::json(
            r#"{"type":"object","properties":{"ship_to":{"$ref":"address.json"}}}"#,
        )
        .with_references(vec![Reference {
            name: "address.json".to_owned(),
            subject: "address".to_owned(),
            version: 1,
        }]);
        let id = registry.register("orders-value", &order).unwrap();
        let v = JsonPayloadValidator::compile(registry.schema(id).unwrap(), &registry).unwrap();
        v.validate(br#"{"ship_to":{"city":"Lyon"}}"#).unwrap();
        let refused = v.validate(br#"{"ship_to":{"city":false}}"#).unwrap_err();
        assert_eq!(refused.field, "ship_to.city", "{refused}");
    }
}
