//! JSON Schema (`schemaType: "JSON"`): a schema is checked against its draft's
//! metaschema and compiled with the `jsonschema` crate, with the schemas its references
//! bring as the only documents a `$ref` may reach outside itself — no network, no files.
//! A reference's `name` is the URI the schema's `$ref` uses (`"$ref": "address.json"`
//! with a reference named `address.json`), as Confluent's registry resolves them.

pub(crate) mod compatibility;
pub(crate) mod validator;

use std::collections::BTreeMap;
use std::sync::Arc;

use jsonschema::{Draft, Retrieve, Uri};
use serde_json::Value;

use crate::schema::ResolvedReference;

/// A JSON Schema, checked, with the documents its references bring by name.
#[derive(Debug, Clone)]
pub(crate) struct JsonSchema {
    pub(crate) root: Value,
    pub(crate) references: Arc<BTreeMap<String, Value>>,
}

/// `text` as a JSON Schema whose `$ref`s reach `references`: refused when it is not
/// JSON, breaks its draft's metaschema, or names a document it was not given.
pub(crate) fn parse(text: &str, references: &[ResolvedReference]) -> Result<JsonSchema, String> {
    let root: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let mut documents = BTreeMap::new();
    for r in references {
        let value: Value = serde_json::from_str(&r.schema)
            .map_err(|e| format!("reference {:?} is not a JSON document: {e}", r.name))?;
        documents.insert(r.name.clone(), value);
    }
    let schema = JsonSchema {
        root,
        references: Arc::new(documents),
    };
    schema.compile()?;
    Ok(schema)
}

impl JsonSchema {
    /// The compiled validator; compiling checks the schema against its metaschema and
    /// resolves every `$ref`.
    pub(crate) fn compile(&self) -> Result<jsonschema::Validator, String> {
        if !matches!(self.root, Value::Object(_) | Value::Bool(_)) {
            return Err("a JSON Schema is an object or a boolean".to_owned());
        }
        let mut options = jsonschema::options();
        // Confluent's registry reads a schema without `$schema` as draft 7; one with
        // `$schema` is read as the draft it names (an explicit draft would override it).
        if self.root.get("$schema").is_none() {
            options = options.with_draft(Draft::Draft7);
        }
        options
            .with_retriever(References(Arc::clone(&self.references)))
            .build(&self.root)
            .map_err(|e| {
                let at = e.instance_path().as_str();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("at {at}: {e}")
                }
            })
    }

    /// The document a reference `name` (a `$ref` without its `#fragment`) names: the
    /// reference whose name it is, or whose name it ends with after a `/` (a `$ref`
    /// resolved against the schema's `$id`).
    pub(crate) fn reference(&self, name: &str) -> Option<&Value> {
        find_reference(&self.references, name)
    }
}

fn find_reference<'a>(documents: &'a BTreeMap<String, Value>, uri: &str) -> Option<&'a Value> {
    if let Some(found) = documents.get(uri) {
        return Some(found);
    }
    documents
        .iter()
        .find(|(name, _)| {
            let name = name.trim_start_matches('/');
            uri.trim_start_matches('/') == name || uri.ends_with(&format!("/{name}"))
        })
        .map(|(_, value)| value)
}

/// Hands the compiler the referenced documents, and nothing else.
struct References(Arc<BTreeMap<String, Value>>);

impl Retrieve for References {
    fn retrieve(
        &self,
        uri: &Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        find_reference(&self.0, uri.as_str())
            .or_else(|| find_reference(&self.0, uri.path().as_str()))
            .cloned()
            .ok_or_else(|| {
                format!(
                    "$ref {uri} names no reference of this schema: add a reference whose name \
                     is the $ref"
                )
                .into()
            })
    }
}

/// The same schema sent formatted differently is the same schema.
pub(crate) fn identity(text: &str) -> Result<String, String> {
    crate::canonical_json::identity(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SchemaType;

    fn reference(name: &str, schema: &str) -> ResolvedReference {
        ResolvedReference {
            name: name.to_owned(),
            schema_type: SchemaType::Json,
            schema: schema.to_owned(),
        }
    }

    #[test]
    fn a_schema_that_breaks_its_metaschema_is_refused_with_the_reason() {
        let error = parse(r#"{"type":"strng"}"#, &[]).unwrap_err();
        assert!(error.contains("strng"), "{error}");
        assert!(parse(r#"{"minLength":-1}"#, &[]).is_err());
        assert!(parse("[1,2]", &[]).is_err());
        assert!(parse("{not json", &[]).unwrap_err().starts_with("not JSON"));
        assert!(
            parse(
                r#"{"type":"object","properties":{"id":{"type":"string"}}}"#,
                &[]
            )
            .is_ok()
        );
    }

    #[test]
    fn a_ref_reaches_a_reference_by_its_name_and_nothing_else() {
        let order = r#"{"type":"object","properties":{"to":{"$ref":"address.json"}}}"#;
        let error = parse(order, &[]).unwrap_err();
        assert!(error.contains("address.json"), "{error}");
        let address = r#"{"type":"object","properties":{"city":{"type":"string"}}}"#;
        let schema = parse(order, &[reference("address.json", address)]).unwrap();
        let validator = schema.compile().unwrap();
        assert!(validator.is_valid(&serde_json::json!({"to": {"city": "Lyon"}})));
        assert!(!validator.is_valid(&serde_json::json!({"to": {"city": 7}})));
    }

    #[test]
    fn a_ref_with_a_fragment_or_against_an_id_reaches_the_reference() {
        let defs = r#"{"definitions":{"City":{"type":"string","minLength":1}}}"#;
        let fragment =
            r##"{"type":"object","properties":{"city":{"$ref":"defs.json#/definitions/City"}}}"##;
        let schema = parse(fragment, &[reference("defs.json", defs)]).unwrap();
        let validator = schema.compile().unwrap();
        assert!(validator.is_valid(&serde_json::json!({"city": "Lyon"})));
        assert!(!validator.is_valid(&serde_json::json!({"city": ""})));
        let with_id = r##"{"$id":"https://example.com/schemas/order.json","type":"object",
            "properties":{"city":{"$ref":"defs.json#/definitions/City"}}}"##;
        let schema = parse(with_id, &[reference("defs.json", defs)]).unwrap();
        assert!(
            !schema
                .compile()
                .unwrap()
                .is_valid(&serde_json::json!({"city": 3}))
        );
    }

    #[test]
    fn the_draft_is_the_one_schema_names_and_draft_7_without_one() {
        // 2020-12's prefixItems constrains the first item; draft 7 ignores the keyword.
        let tuple = |schema: &str| {
            format!(r#"{{{schema}"type":"array","prefixItems":[{{"type":"string"}}]}}"#)
        };
        let modern = parse(
            &tuple(r#""$schema":"https://json-schema.org/draft/2020-12/schema","#),
            &[],
        )
        .unwrap();
        assert!(!modern.compile().unwrap().is_valid(&serde_json::json!([1])));
        let unnamed = parse(&tuple(""), &[]).unwrap();
        assert!(unnamed.compile().unwrap().is_valid(&serde_json::json!([1])));
        let unknown = parse(
            r#"{"$schema":"https://example.com/mine","type":"string"}"#,
            &[],
        );
        assert!(unknown.is_err(), "{unknown:?}");
    }

    #[test]
    fn identity_ignores_formatting() {
        assert_eq!(
            identity(r#"{"type":"object","required":["a"]}"#).unwrap(),
            identity("{ \"required\": [\"a\"],\n \"type\": \"object\" }").unwrap()
        );
    }
}
