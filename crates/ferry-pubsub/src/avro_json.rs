//! Avro's JSON encoding, checked against a schema: what a Pub/Sub topic with an Avro
//! schema and the JSON encoding takes. `apache-avro` reads JSON only as untyped values, so
//! the encoding's rules are walked here, as the Avro specification states them:
//!
//! - `null`, booleans, strings and numbers as JSON's own (ints and longs whole and in
//!   range);
//! - `bytes` and `fixed` as strings whose characters are code points 0 to 255, one per
//!   byte (a `fixed` has exactly its size);
//! - records as objects with every field (a field with a default may be left out) and no
//!   other; enums as one of their symbols; arrays as arrays; maps as objects;
//! - a union as `null` for its null branch, else an object with one member whose name is
//!   the branch's type: a primitive's name, `array`, `map`, or a named type's full name;
//! - logical types as their underlying type.

use std::collections::HashMap;

use apache_avro::Schema;
use apache_avro::schema::{InnerDecimalSchema, Name, ResolvedSchema, UuidSchema};
use serde_json::Value;

/// How deep values may nest: a recursive schema would otherwise let a small message
/// exhaust the stack.
const MAX_DEPTH: usize = 256;

/// An Avro schema with the named types its references (`Schema::Ref`) resolve to, found
/// once per schema rather than per message.
#[derive(Debug)]
pub struct AvroJson {
    root: Schema,
    names: HashMap<Name, Schema>,
}

impl AvroJson {
    pub fn new(root: Schema) -> Result<AvroJson, String> {
        let names = ResolvedSchema::try_from(&root)
            .map_err(|e| e.to_string())?
            .get_names()
            .iter()
            .map(|(name, named)| (name.clone(), (*named).clone()))
            .collect();
        Ok(AvroJson { root, names })
    }

    pub fn schema(&self) -> &Schema {
        &self.root
    }

    /// Whether `value` is the schema's JSON encoding; the error names the first field
    /// that is not.
    pub fn check(&self, value: &Value) -> Result<(), String> {
        let walk = Walk { names: &self.names };
        walk.value(&self.root, value, &mut String::new(), 0)
            .map_err(|(path, why)| {
                if path.is_empty() {
                    format!("the message is not Avro JSON of the schema: {why}")
                } else {
                    format!("field `{path}`: {why}")
                }
            })
    }
}

struct Walk<'a> {
    names: &'a HashMap<Name, Schema>,
}

type Checked = Result<(), (String, String)>;

impl Walk<'_> {
    fn value(&self, schema: &Schema, value: &Value, path: &mut String, depth: usize) -> Checked {
        if depth > MAX_DEPTH {
            return at(path, format!("values nest deeper than {MAX_DEPTH} levels"));
        }
        let expected = |what: &str| format!("expected {what}, found {}", kind(value));
        match schema {
            Schema::Null => match value {
                Value::Null => Ok(()),
                _ => at(path, expected("null")),
            },
            Schema::Boolean => match value {
                Value::Bool(_) => Ok(()),
                _ => at(path, expected("a boolean")),
            },
            Schema::Int | Schema::Date | Schema::TimeMillis => match value.as_i64() {
                Some(n) if i32::try_from(n).is_ok() => Ok(()),
                _ => at(path, expected("an int (a whole number within 32 bits)")),
            },
            Schema::Long
            | Schema::TimeMicros
            | Schema::TimestampMillis
            | Schema::TimestampMicros
            | Schema::TimestampNanos
            | Schema::LocalTimestampMillis
            | Schema::LocalTimestampMicros
            | Schema::LocalTimestampNanos => match value.as_i64() {
                Some(_) => Ok(()),
                None => at(path, expected("a long (a whole number within 64 bits)")),
            },
            Schema::Float | Schema::Double => match value {
                Value::Number(_) => Ok(()),
                _ => at(path, expected("a number")),
            },
            Schema::String | Schema::Uuid(UuidSchema::String) => match value {
                Value::String(_) => Ok(()),
                _ => at(path, expected("a string")),
            },
            Schema::Bytes
            | Schema::BigDecimal
            | Schema::Uuid(UuidSchema::Bytes)
            | Schema::Decimal(apache_avro::schema::DecimalSchema {
                inner: InnerDecimalSchema::Bytes,
                ..
            }) => self.bytes(value, None, path),
            Schema::Fixed(fixed) | Schema::Uuid(UuidSchema::Fixed(fixed)) => {
                self.bytes(value, Some(fixed.size), path)
            }
            Schema::Decimal(apache_avro::schema::DecimalSchema {
                inner: InnerDecimalSchema::Fixed(fixed),
                ..
            }) => self.bytes(value, Some(fixed.size), path),
            Schema::Duration(_) => self.bytes(value, Some(12), path),
            Schema::Enum(e) => match value {
                Value::String(s) if e.symbols.contains(s) => Ok(()),
                Value::String(s) => at(
                    path,
                    format!(
                        "{s:?} is not a symbol of enum {} ({})",
                        e.name.name(),
                        e.symbols.join(", ")
                    ),
                ),
                _ => at(path, expected("an enum symbol (a string)")),
            },
            Schema::Array(array) => {
                let Value::Array(items) = value else {
                    return at(path, expected("an array"));
                };
                for (index, item) in items.iter().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{index}]"));
                    self.value(&array.items, item, path, depth + 1)?;
                    path.truncate(len);
                }
                Ok(())
            }
            Schema::Map(map) => {
                let Value::Object(entries) = value else {
                    return at(path, expected("a map (an object)"));
                };
                for (key, item) in entries {
                    let len = path.len();
                    path.push_str(&format!("[{key:?}]"));
                    self.value(&map.types, item, path, depth + 1)?;
                    path.truncate(len);
                }
                Ok(())
            }
            Schema::Record(record) => {
                let Value::Object(members) = value else {
                    return at(
                        path,
                        expected(&format!("a {} record (an object)", record.name.name())),
                    );
                };
                for field in &record.fields {
                    let len = path.len();
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(&field.name);
                    match members.get(&field.name) {
                        Some(member) => self.value(&field.schema, member, path, depth + 1)?,
                        None if field.default.is_some() => {}
                        None => return Err((path.clone(), "the field is missing".into())),
                    }
                    path.truncate(len);
                }
                if let Some(extra) = members
                    .keys()
                    .find(|k| !record.fields.iter().any(|f| &f.name == *k))
                {
                    return at(
                        path,
                        format!("{extra:?} is not a field of record {}", record.name.name()),
                    );
                }
                Ok(())
            }
            Schema::Union(union) => {
                let variants = union.variants();
                if value.is_null() {
                    if variants.iter().any(|v| matches!(v, Schema::Null)) {
                        return Ok(());
                    }
                    return at(path, "null is not a branch of the union".into());
                }
                let branches: Vec<String> = variants.iter().map(branch_name).collect();
                let member = value.as_object().filter(|o| o.len() == 1);
                let Some((name, inner)) = member.and_then(|o| o.iter().next()) else {
                    return at(
                        path,
                        format!(
                            "expected a union value: null or an object with one member naming \
                         the branch ({}), found {}",
                            branches.join(", "),
                            kind(value)
                        ),
                    );
                };
                let Some(index) = branches.iter().position(|b| b == name) else {
                    return at(
                        path,
                        format!(
                            "{name:?} is not a branch of the union ({})",
                            branches.join(", ")
                        ),
                    );
                };
                self.value(&variants[index], inner, path, depth + 1)
            }
            Schema::Ref { name } => match self.names.get(name) {
                Some(named) => self.value(named, value, path, depth + 1),
                None => at(
                    path,
                    format!("the schema names type {name}, which it does not define"),
                ),
            },
        }
    }

    /// Bytes as a string of code points 0 to 255, `size` of them for a fixed.
    fn bytes(&self, value: &Value, size: Option<usize>, path: &str) -> Checked {
        let Value::String(text) = value else {
            return at(
                path,
                format!(
                    "expected bytes (a string of code points 0 to 255), found {}",
                    kind(value)
                ),
            );
        };
        if let Some(c) = text.chars().find(|c| u32::from(*c) > 255) {
            return at(
                path,
                format!("{c:?} is not a byte: bytes are written as code points 0 to 255"),
            );
        }
        match size {
            Some(size) if text.chars().count() != size => at(
                path,
                format!("expected {size} bytes, found {}", text.chars().count()),
            ),
            _ => Ok(()),
        }
    }
}

fn at(path: &str, why: String) -> Checked {
    Err((path.to_owned(), why))
}

/// How a union member names `schema`.
fn branch_name(schema: &Schema) -> String {
    match schema {
        Schema::Record(r) => r.name.fullname(None),
        Schema::Enum(e) => e.name.fullname(None),
        Schema::Fixed(f) | Schema::Uuid(UuidSchema::Fixed(f)) | Schema::Duration(f) => {
            f.name.fullname(None)
        }
        Schema::Decimal(apache_avro::schema::DecimalSchema {
            inner: InnerDecimalSchema::Fixed(f),
            ..
        }) => f.name.fullname(None),
        Schema::Ref { name } => name.fullname(None),
        Schema::Null => "null".into(),
        Schema::Boolean => "boolean".into(),
        Schema::Int | Schema::Date | Schema::TimeMillis => "int".into(),
        Schema::Float => "float".into(),
        Schema::Double => "double".into(),
        Schema::String | Schema::Uuid(UuidSchema::String) => "string".into(),
        Schema::Array(_) => "array".into(),
        Schema::Map(_) => "map".into(),
        Schema::Union(_) => "union".into(),
        Schema::Bytes
        | Schema::BigDecimal
        | Schema::Uuid(UuidSchema::Bytes)
        | Schema::Decimal(_) => "bytes".into(),
        Schema::Long
        | Schema::TimeMicros
        | Schema::TimestampMillis
        | Schema::TimestampMicros
        | Schema::TimestampNanos
        | Schema::LocalTimestampMillis
        | Schema::LocalTimestampMicros
        | Schema::LocalTimestampNanos => "long".into(),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(schema: &Schema, value: &Value) -> Result<(), String> {
        AvroJson::new(schema.clone()).unwrap().check(value)
    }

    fn schema() -> Schema {
        Schema::parse_str(
            r#"{"type":"record","name":"Order","namespace":"shop","fields":[
                {"name":"sku","type":"string"},
                {"name":"count","type":"int"},
                {"name":"note","type":["null","string"],"default":null},
                {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A","B"]}},
                {"name":"lines","type":{"type":"array","items":"long"}},
                {"name":"id","type":{"type":"fixed","name":"Id","size":2}}
            ]}"#,
        )
        .unwrap()
    }

    #[test]
    fn a_value_in_avro_json_passes() {
        let good = json!({"sku":"x","count":1,"note":{"string":"hi"},"kind":"A",
                          "lines":[1,2],"id":"\u{00ff}a"});
        check(&schema(), &good).unwrap();
        let defaulted = json!({"sku":"x","count":1,"kind":"B","lines":[],"id":"ab"});
        check(&schema(), &defaulted).unwrap();
    }

    #[test]
    fn a_union_names_a_named_branch_by_its_full_name_and_references_resolve() {
        let tree = Schema::parse_str(
            r#"{"type":"record","name":"Node","namespace":"shop","fields":[
                {"name":"label","type":"string"},
                {"name":"next","type":["null","Node"],"default":null}]}"#,
        )
        .unwrap();
        let linked = json!({"label":"a","next":{"shop.Node":{"label":"b","next":null}}});
        check(&tree, &linked).unwrap();
        let short = json!({"label":"a","next":{"Node":{"label":"b"}}});
        assert!(check(&tree, &short).unwrap_err().contains("not a branch"));
        let deep = json!({"label":"a","next":{"shop.Node":{"label":3}}});
        assert!(check(&tree, &deep).unwrap_err().contains("next.label"));
    }

    #[test]
    fn each_rule_refuses_with_the_field_named() {
        let base = json!({"sku":"x","count":1,"kind":"A","lines":[],"id":"ab"});
        let cases = [
            ("count", json!(1u64 << 40), "count"),
            ("sku", json!(3), "sku"),
            ("note", json!("hi"), "note"),
            ("kind", json!("C"), "kind"),
            ("lines", json!([1, "2"]), "lines[1]"),
            ("id", json!("abc"), "id"),
            ("colour", json!("red"), "colour"),
        ];
        for (field, bad, named) in cases {
            let mut value = base.clone();
            value[field] = bad;
            let err = check(&schema(), &value).unwrap_err();
            assert!(err.contains(named), "{field}: {err}");
        }
        let mut missing = base.clone();
        missing.as_object_mut().unwrap().remove("sku");
        assert!(check(&schema(), &missing).unwrap_err().contains("missing"));
    }
}
