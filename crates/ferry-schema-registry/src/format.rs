//! The three schema formats behind one face: parsing a schema with the schemas its
//! references bring, the identity that tells registrations of the same schema apart
//! from different ones, and whether one schema reads what another wrote.

use crate::schema::ResolvedReference;
use crate::{SchemaType, avro, json_schema, protobuf};

/// A schema parsed by its format's rules.
pub(crate) enum Parsed {
    Avro(apache_avro::Schema),
    Json(json_schema::JsonSchema),
    Protobuf(protobuf::ProtobufSchema),
}

/// `text` as a `schema_type` schema, with what `references` bring.
pub(crate) fn parse(
    schema_type: SchemaType,
    text: &str,
    references: &[ResolvedReference],
) -> Result<Parsed, String> {
    match schema_type {
        SchemaType::Avro => {
            let texts: Vec<String> = references.iter().map(|r| r.schema.clone()).collect();
            avro::parse(text, &texts).map(Parsed::Avro)
        }
        SchemaType::Json => json_schema::parse(text, references).map(Parsed::Json),
        SchemaType::Protobuf => protobuf::parse(text, references).map(Parsed::Protobuf),
    }
}

/// What two registrations of the same schema share, whatever their formatting.
pub(crate) fn identity(schema_type: SchemaType, text: &str) -> Result<String, String> {
    match schema_type {
        SchemaType::Avro => avro::identity(text),
        SchemaType::Json => json_schema::identity(text),
        SchemaType::Protobuf => protobuf::identity(text),
    }
}

impl Parsed {
    pub(crate) fn schema_type(&self) -> SchemaType {
        match self {
            Parsed::Avro(_) => SchemaType::Avro,
            Parsed::Json(_) => SchemaType::Json,
            Parsed::Protobuf(_) => SchemaType::Protobuf,
        }
    }
}
