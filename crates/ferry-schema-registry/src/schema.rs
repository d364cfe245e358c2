//! What the registry's calls take and answer: schema types, references, schemas as
//! stored and as sent, and how a path names a version.

use serde::{Deserialize, Serialize};

use crate::RegistryError;

/// A schema's format, as Confluent names it in `schemaType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum SchemaType {
    #[default]
    Avro,
    /// JSON Schema (drafts 4 to 2020-12; draft 7 when the schema names none).
    Json,
    /// Protobuf `.proto` text, proto2 or proto3.
    Protobuf,
}

impl SchemaType {
    /// A `schemaType` as clients send it; absent means AVRO.
    pub fn parse(name: Option<&str>) -> Result<SchemaType, RegistryError> {
        match name {
            None => Ok(SchemaType::Avro),
            Some(name) if name.eq_ignore_ascii_case("AVRO") => Ok(SchemaType::Avro),
            Some(name) if name.eq_ignore_ascii_case("JSON") => Ok(SchemaType::Json),
            Some(name) if name.eq_ignore_ascii_case("PROTOBUF") => Ok(SchemaType::Protobuf),
            Some(other) => Err(RegistryError::InvalidSchema(format!(
                "unknown schemaType {other:?}: AVRO, JSON or PROTOBUF"
            ))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SchemaType::Avro => "AVRO",
            SchemaType::Json => "JSON",
            SchemaType::Protobuf => "PROTOBUF",
        }
    }
}

/// A schema another subject's version brings to the schema that references it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reference {
    /// How the referring schema names it: an Avro type's full name, the URI a JSON
    /// Schema's `$ref` uses (`address.json`), a Protobuf import path (`shop/line.proto`).
    pub name: String,
    pub subject: String,
    pub version: u32,
}

/// A schema under its global id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredSchema {
    pub schema_type: SchemaType,
    /// The text as first registered.
    pub schema: String,
    pub references: Vec<Reference>,
}

/// A schema a client sends to register, look up or check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSchema {
    pub schema_type: SchemaType,
    pub schema: String,
    pub references: Vec<Reference>,
    /// The id and version to keep, in IMPORT mode only.
    pub id: Option<u32>,
    pub version: Option<u32>,
}

impl NewSchema {
    pub fn avro(schema: impl Into<String>) -> NewSchema {
        NewSchema::of(SchemaType::Avro, schema)
    }

    pub fn json(schema: impl Into<String>) -> NewSchema {
        NewSchema::of(SchemaType::Json, schema)
    }

    pub fn protobuf(schema: impl Into<String>) -> NewSchema {
        NewSchema::of(SchemaType::Protobuf, schema)
    }

    pub fn of(schema_type: SchemaType, schema: impl Into<String>) -> NewSchema {
        NewSchema {
            schema_type,
            schema: schema.into(),
            references: Vec::new(),
            id: None,
            version: None,
        }
    }

    /// The same schema, with `references`.
    pub fn with_references(mut self, references: Vec<Reference>) -> NewSchema {
        self.references = references;
        self
    }
}

/// A referenced schema, resolved: the name the referring schema uses for it, its type and
/// its text. A schema's resolved references include its references' own, each once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedReference {
    pub name: String,
    pub schema_type: SchemaType,
    pub schema: String,
}

/// A subject's version with its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredVersion {
    pub subject: String,
    pub version: u32,
    pub id: u32,
    pub schema: StoredSchema,
}

/// Which version a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionSpec {
    Latest,
    Number(u32),
}

impl VersionSpec {
    /// `latest`, `-1` (also the latest, as Confluent takes it) or 1 to 2^31-1.
    pub fn parse(text: &str) -> Result<VersionSpec, RegistryError> {
        if text.eq_ignore_ascii_case("latest") || text == "-1" {
            return Ok(VersionSpec::Latest);
        }
        match text.parse::<i32>() {
            Ok(n) if n >= 1 => Ok(VersionSpec::Number(n as u32)),
            _ => Err(RegistryError::InvalidVersion(text.to_owned())),
        }
    }
}

/// Which subjects or versions a listing shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Deleted {
    #[default]
    Exclude,
    Include,
    Only,
}

impl Deleted {
    pub(crate) fn shows(self, deleted: bool) -> bool {
        match self {
            Deleted::Exclude => !deleted,
            Deleted::Include => true,
            Deleted::Only => deleted,
        }
    }
}
