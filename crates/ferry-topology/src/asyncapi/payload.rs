//! Message payloads: a message type's fields as the schema its format names (JSON Schema,
//! Avro or Protobuf), and back.
//!
//! A field's type in a topology file is free text (`string`, `integer`,
//! `array<{sku, quantity}>`); the schemas get the nearest type their language has, and
//! anything they cannot say exactly (a free-text type, the order of JSON Schema
//! properties, personal-data protection) is left to the `x-ferry` extension by the
//! difference the export takes.

use serde_json::{Map, Value, json};

use crate::format::{MessageType, SchemaFormat};

pub const JSON_SCHEMA: &str = "application/schema+json;version=draft-07";
pub const AVRO: &str = "application/vnd.apache.avro;version=1.9.0";
pub const PROTOBUF: &str = "application/vnd.google.protobuf;version=3";

/// The content type of messages in each schema format.
pub fn content_type(format: Option<SchemaFormat>) -> &'static str {
    match format {
        Some(SchemaFormat::Avro) => "application/vnd.apache.avro+binary",
        Some(SchemaFormat::Protobuf) => "application/x-protobuf",
        Some(SchemaFormat::JsonSchema) | None => "application/json",
    }
}

/// The message's `payload`: a plain AsyncAPI schema when the file names no format, else a
/// multi-format schema object with its `schemaFormat`.
pub fn to_payload(message: &MessageType) -> Value {
    let format = message.schema.as_ref().map(|s| s.format);
    match format {
        None => json_schema(message),
        Some(SchemaFormat::JsonSchema) => {
            json!({"schemaFormat": JSON_SCHEMA, "schema": json_schema(message)})
        }
        Some(SchemaFormat::Avro) => json!({"schemaFormat": AVRO, "schema": avro(message)}),
        Some(SchemaFormat::Protobuf) => {
            json!({"schemaFormat": PROTOBUF, "schema": protobuf(message)})
        }
    }
}

fn json_schema(message: &MessageType) -> Value {
    let properties: Map<String, Value> = message
        .payload
        .iter()
        .map(|field| {
            let schema = match field.kind.as_deref() {
                Some(kind @ ("string" | "integer" | "number" | "boolean" | "object" | "array")) => {
                    json!({"type": kind})
                }
                Some(kind) if kind.starts_with("array<") => {
                    json!({"type": "array", "description": kind})
                }
                Some(kind) => json!({"description": kind}),
                None => json!({}),
            };
            (field.name.to_string(), schema)
        })
        .collect();
    json!({"type": "object", "properties": properties})
}

/// An Avro record; a field of a type Avro has no name for is a string.
fn avro(message: &MessageType) -> Value {
    let fields: Vec<Value> = message
        .payload
        .iter()
        .map(|field| {
            let kind = match field.kind.as_deref() {
                Some("integer") => "long",
                Some("number") => "double",
                Some("boolean") => "boolean",
                _ => "string",
            };
            json!({"name": identifier(field.name.as_str()), "type": kind})
        })
        .collect();
    json!({"type": "record", "name": identifier(message.name.as_str()), "fields": fields})
}

/// A proto3 message; a field of a type Protobuf has no name for is a string.
fn protobuf(message: &MessageType) -> Value {
    let mut text = format!(
        "syntax = \"proto3\";\n\nmessage {} {{\n",
        identifier(message.name.as_str())
    );
    for (number, field) in message.payload.iter().enumerate() {
        let kind = match field.kind.as_deref() {
            Some("integer") => "int64",
            Some("number") => "double",
            Some("boolean") => "bool",
            _ => "string",
        };
        text.push_str(&format!(
            "  {kind} {} = {};\n",
            identifier(field.name.as_str()),
            number + 1
        ));
    }
    text.push_str("}\n");
    Value::String(text)
}

/// A name Avro and Protobuf accept: `[A-Za-z_][A-Za-z0-9_]*`.
fn identifier(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if !out.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        out.insert(0, '_');
    }
    out
}

/// The schema format and the fields (in the topology file's JSON shape) that a resolved
/// `payload` says. Protobuf text is not parsed: its fields come from `x-ferry` or not at
/// all, and `unread` says so.
pub struct Read {
    pub format: Option<SchemaFormat>,
    pub fields: Vec<Value>,
    pub unread: Option<String>,
}

/// Reads a payload whose `$ref`s `resolve` follows.
pub fn read(
    payload: &Value,
    resolve: &dyn Fn(&Value) -> Result<Value, super::Error>,
) -> Result<Read, super::Error> {
    let payload = resolve(payload)?;
    let (format, schema) = match payload.get("schemaFormat").and_then(Value::as_str) {
        Some(schema_format) => (
            Some(schema_format.to_owned()),
            resolve(payload.get("schema").unwrap_or(&Value::Null))?,
        ),
        None => (None, payload),
    };
    let Some(format) = format else {
        // AsyncAPI's own schema language is a superset of JSON Schema draft 07.
        return Ok(Read {
            format: Some(SchemaFormat::JsonSchema),
            fields: json_schema_fields(&schema, resolve)?,
            unread: None,
        });
    };
    let family = format.split(';').next().unwrap_or_default();
    Ok(match family {
        "application/vnd.apache.avro"
        | "application/vnd.apache.avro+json"
        | "application/vnd.apache.avro+yaml" => Read {
            format: Some(SchemaFormat::Avro),
            fields: avro_fields(&schema),
            unread: None,
        },
        "application/vnd.google.protobuf" => Read {
            format: Some(SchemaFormat::Protobuf),
            fields: Vec::new(),
            unread: Some("the Protobuf schema's fields are not read into the payload".into()),
        },
        "application/schema+json"
        | "application/schema+yaml"
        | "application/schema"
        | "application/vnd.aai.asyncapi"
        | "application/vnd.aai.asyncapi+json"
        | "application/vnd.aai.asyncapi+yaml" => Read {
            format: Some(SchemaFormat::JsonSchema),
            fields: json_schema_fields(&schema, resolve)?,
            unread: None,
        },
        other => Read {
            format: None,
            fields: Vec::new(),
            unread: Some(format!(
                "schema format `{other}` has no topology equivalent; the payload is not read"
            )),
        },
    })
}

fn json_schema_fields(
    schema: &Value,
    resolve: &dyn Fn(&Value) -> Result<Value, super::Error>,
) -> Result<Vec<Value>, super::Error> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Ok(Vec::new());
    };
    let mut fields = Vec::new();
    for (name, property) in properties {
        let property = resolve(property)?;
        let mut field = Map::new();
        field.insert("name".into(), Value::String(name.clone()));
        if let Some(kind) = property.get("type").and_then(Value::as_str) {
            field.insert("type".into(), Value::String(kind.to_owned()));
        }
        fields.push(Value::Object(field));
    }
    Ok(fields)
}

fn avro_fields(schema: &Value) -> Vec<Value> {
    let Some(fields) = schema.get("fields").and_then(Value::as_array) else {
        return Vec::new();
    };
    fields
        .iter()
        .filter_map(|field| {
            let name = field.get("name")?.as_str()?;
            let kind = match field.get("type").and_then(Value::as_str) {
                Some("long" | "int") => Some("integer"),
                Some("double" | "float") => Some("number"),
                Some("boolean") => Some("boolean"),
                Some("string") => Some("string"),
                _ => None,
            };
            let mut out = Map::new();
            out.insert("name".into(), Value::String(name.to_owned()));
            if let Some(kind) = kind {
                out.insert("type".into(), Value::String(kind.to_owned()));
            }
            Some(Value::Object(out))
        })
        .collect()
}
