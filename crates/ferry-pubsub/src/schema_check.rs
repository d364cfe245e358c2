//! A Pub/Sub schema's definition made ready to check messages, and the check itself, in
//! either of Pub/Sub's encodings.
//!
//! - **Avro**: BINARY is Avro's binary encoding of one datum (decoded with `apache-avro`,
//!   nothing may follow it); JSON is Avro's JSON encoding ([`crate::avro_json`]).
//! - **Protocol Buffer**: the `.proto` text must define exactly one top-level message and
//!   import nothing, as Pub/Sub requires; BINARY is that message's wire format, JSON its
//!   canonical JSON mapping (`prost-reflect`'s, unknown fields refused).
//!
//! The messages here become INVALID_ARGUMENT statuses, so they say what is wrong in the
//! words a publisher can act on.

use apache_avro::Schema as AvroSchema;
use googleapis_tonic_google_pubsub_v1::google::pubsub::v1 as pb;
use prost_reflect::{DynamicMessage, MessageDescriptor};
use protox::file::{File, FileResolver};

use crate::avro_json::AvroJson;

/// The file name a Protocol Buffer definition compiles under: no import can name it.
const PROTO_FILE: &str = "<pubsub schema>.proto";

/// A compiled definition.
#[derive(Debug)]
pub enum CompiledSchema {
    Avro(AvroJson),
    Protobuf(MessageDescriptor),
}

/// A schema's type as Pub/Sub names it, or why it is not one this server takes.
pub fn schema_type(value: i32) -> Result<pb::schema::Type, String> {
    match pb::schema::Type::try_from(value) {
        Ok(pb::schema::Type::Avro) => Ok(pb::schema::Type::Avro),
        Ok(pb::schema::Type::ProtocolBuffer) => Ok(pb::schema::Type::ProtocolBuffer),
        _ => Err(format!(
            "the schema type must be AVRO or PROTOCOL_BUFFER (got {value})"
        )),
    }
}

impl CompiledSchema {
    /// `definition` compiled as a schema of `kind`, or why it is not a valid one.
    pub fn compile(kind: pb::schema::Type, definition: &str) -> Result<CompiledSchema, String> {
        if definition.trim().is_empty() {
            return Err("the schema definition is empty".into());
        }
        match kind {
            pb::schema::Type::Avro => AvroSchema::parse_str(definition)
                .map_err(|e| error_text(&e))
                .and_then(AvroJson::new)
                .map(CompiledSchema::Avro)
                .map_err(|e| format!("invalid Avro schema: {e}")),
            pb::schema::Type::ProtocolBuffer => compile_proto(definition)
                .map(CompiledSchema::Protobuf)
                .map_err(|e| format!("invalid Protocol Buffer schema: {e}")),
            pb::schema::Type::Unspecified => {
                Err("the schema type must be AVRO or PROTOCOL_BUFFER".into())
            }
        }
    }

    /// Whether `message` is a valid message of the schema in `encoding`.
    pub fn validate(&self, message: &[u8], encoding: pb::Encoding) -> Result<(), String> {
        match (self, encoding) {
            (_, pb::Encoding::Unspecified) => Err("the encoding must be JSON or BINARY".to_owned()),
            (CompiledSchema::Avro(avro), pb::Encoding::Binary) => {
                avro_binary(avro.schema(), message)
            }
            (CompiledSchema::Avro(avro), pb::Encoding::Json) => {
                let value: serde_json::Value = serde_json::from_slice(message)
                    .map_err(|e| format!("the message is not JSON: {e}"))?;
                avro.check(&value)
            }
            (CompiledSchema::Protobuf(descriptor), pb::Encoding::Binary) => {
                DynamicMessage::decode(descriptor.clone(), message)
                    .map(drop)
                    .map_err(|e| {
                        format!(
                            "the message is not a binary {}: {e}",
                            descriptor.full_name()
                        )
                    })
            }
            (CompiledSchema::Protobuf(descriptor), pb::Encoding::Json) => {
                let mut json = serde_json::Deserializer::from_slice(message);
                DynamicMessage::deserialize(descriptor.clone(), &mut json)
                    .and_then(|_| json.end())
                    .map_err(|e| {
                        format!("the message is not a JSON {}: {e}", descriptor.full_name())
                    })
            }
        }
    }
}

/// One Avro datum, and nothing after it.
fn avro_binary(schema: &AvroSchema, message: &[u8]) -> Result<(), String> {
    let mut rest = message;
    apache_avro::reader::datum::GenericDatumReader::builder(schema)
        .build()
        .and_then(|reader| reader.read_value(&mut rest))
        .map_err(|e| {
            format!(
                "the message is not binary Avro of the schema: {}",
                error_text(&e)
            )
        })?;
    if !rest.is_empty() {
        return Err(format!(
            "{} bytes follow the Avro value: the message was written with another schema",
            rest.len()
        ));
    }
    Ok(())
}

/// Compiles `definition` alone: any import fails (nothing resolves it), and the file
/// must define exactly one top-level message.
fn compile_proto(definition: &str) -> Result<MessageDescriptor, String> {
    let mut compiler = protox::Compiler::with_file_resolver(Definition(definition.to_owned()));
    compiler
        .open_file(PROTO_FILE)
        .map_err(|e| error_text(&e).replace(PROTO_FILE, "the definition"))?;
    let file = compiler
        .descriptor_pool()
        .get_file_by_name(PROTO_FILE)
        .ok_or_else(|| "the definition compiled to no file".to_owned())?;
    if file.dependencies().next().is_some() {
        return Err("imports are not supported: define every type in the one file".into());
    }
    let mut messages = file.messages();
    match (messages.next(), messages.next()) {
        (Some(message), None) => Ok(message),
        (None, _) => Err("the definition has no top-level message".into()),
        (Some(_), Some(_)) => Err(
            "the definition has more than one top-level message: a Pub/Sub schema defines \
             exactly one (nest the others inside it)"
                .into(),
        ),
    }
}

/// The definition being compiled, as the only file there is.
struct Definition(String);

impl FileResolver for Definition {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        if name == PROTO_FILE {
            File::from_source(name, &self.0)
        } else {
            Err(protox::Error::file_not_found(name))
        }
    }
}

/// An error with its causes, which carry the useful part.
fn error_text(error: &dyn std::error::Error) -> String {
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

    const PROTO: &str = "syntax = \"proto3\"; message Order { string sku = 1; int32 count = 2; }";

    #[test]
    fn proto_definitions_need_one_top_level_message_and_no_imports() {
        let kind = pb::schema::Type::ProtocolBuffer;
        assert!(CompiledSchema::compile(kind, PROTO).is_ok());
        let two = "syntax = \"proto3\"; message A {} message B {}";
        assert!(
            CompiledSchema::compile(kind, two)
                .unwrap_err()
                .contains("more than one")
        );
        let imports = "syntax = \"proto3\"; import \"google/protobuf/timestamp.proto\"; \
                       message A { google.protobuf.Timestamp at = 1; }";
        assert!(CompiledSchema::compile(kind, imports).is_err());
        assert!(CompiledSchema::compile(kind, "message {").is_err());
    }

    #[test]
    fn proto_messages_are_checked_in_both_encodings() {
        let schema = CompiledSchema::compile(pb::schema::Type::ProtocolBuffer, PROTO).unwrap();
        // sku = "a", count = 3.
        let binary = [0x0a, 0x01, b'a', 0x10, 0x03];
        assert!(schema.validate(&binary, pb::Encoding::Binary).is_ok());
        assert!(
            schema
                .validate(&[0x0a, 0x05, b'a'], pb::Encoding::Binary)
                .is_err()
        );
        let json = br#"{"sku":"a","count":3}"#;
        assert!(schema.validate(json, pb::Encoding::Json).is_ok());
        assert!(
            schema
                .validate(br#"{"sku":"a","colour":"red"}"#, pb::Encoding::Json)
                .is_err()
        );
        assert!(
            schema
                .validate(br#"{"count":"many"}"#, pb::Encoding::Json)
                .is_err()
        );
    }

    #[test]
    fn avro_binary_takes_one_datum_and_nothing_more() {
        let schema = CompiledSchema::compile(
            pb::schema::Type::Avro,
            r#"{"type":"record","name":"R","fields":[{"name":"n","type":"long"}]}"#,
        )
        .unwrap();
        assert!(schema.validate(&[0x04], pb::Encoding::Binary).is_ok());
        assert!(
            schema
                .validate(&[0x04, 0x00], pb::Encoding::Binary)
                .is_err()
        );
        assert!(schema.validate(&[], pb::Encoding::Binary).is_err());
        assert!(CompiledSchema::compile(pb::schema::Type::Avro, r#"{"type":"nope"}"#).is_err());
    }
}
