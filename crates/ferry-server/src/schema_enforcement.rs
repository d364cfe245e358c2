//! Enforcement at publish over the schema registry: the broker's [`PayloadValidator`] port
//! answered by [`SchemaRegistry::validate`].
//!
//! **Which schema a message names**, in this order:
//! - the header `ferry-schema-id` ([`ferry_broker::header::SCHEMA_ID`]), the schema's
//!   registry id in decimal, for producers that do not use Confluent's wire format: the
//!   payload is then the encoded data itself;
//! - otherwise the payload's Confluent wire-format prefix (magic byte 0, the schema id as
//!   4 bytes big-endian), as Confluent's serializers write it.
//!
//! Either way the id must be a live version of the subject the queue or topic requires,
//! and the data must decode with it; a refusal names the failing field.

use std::sync::Arc;

use ferry_broker::{OutgoingMessage, PayloadValidator, SchemaRejection, header};
use ferry_schema_registry::SchemaRegistry;

/// The broker's payload validator over a schema registry: give it to the broker in
/// [`BrokerConfig::payload_validator`](ferry_broker::BrokerConfig::payload_validator).
#[derive(Debug, Clone)]
pub struct RegistryPayloadValidator {
    registry: Arc<SchemaRegistry>,
}

impl RegistryPayloadValidator {
    pub fn new(registry: Arc<SchemaRegistry>) -> Self {
        Self { registry }
    }
}

impl PayloadValidator for RegistryPayloadValidator {
    fn validate(&self, subject: &str, message: &OutgoingMessage) -> Result<(), SchemaRejection> {
        let schema_id = match message.headers.get(header::SCHEMA_ID) {
            None => None,
            Some(value) => Some(header::parse_schema_id(value).ok_or_else(|| SchemaRejection {
                field: String::new(),
                reason: format!(
                    "header {} is {value:?}, not a schema id; give the registry's id in decimal",
                    header::SCHEMA_ID
                ),
            })?),
        };
        self.registry
            .validate(subject, schema_id, &message.payload)
            .map(drop)
            .map_err(|rejection| SchemaRejection {
                field: rejection.field,
                reason: rejection.reason,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_schema_registry::NewSchema;

    const POINT: &str = r#"{"type": "record", "name": "Point",
        "fields": [{"name": "x", "type": "int"}, {"name": "label", "type": "string"}]}"#;

    fn validator() -> (tempfile::TempDir, RegistryPayloadValidator, u32) {
        let dir = tempfile::tempdir().unwrap();
        let registry = SchemaRegistry::open(dir.path()).unwrap();
        let id = registry
            .change(|r| r.register("points-value", &NewSchema::avro(POINT)))
            .unwrap();
        (dir, RegistryPayloadValidator::new(Arc::new(registry)), id)
    }

    /// x = 3, label = "a".
    const POINT_DATA: [u8; 3] = [6, 2, b'a'];

    #[test]
    fn the_schema_is_named_by_the_wire_format_or_by_the_header() {
        let (_dir, validator, id) = validator();
        let mut wire = vec![0];
        wire.extend_from_slice(&id.to_be_bytes());
        wire.extend_from_slice(&POINT_DATA);
        validator
            .validate("points-value", &OutgoingMessage::new(wire))
            .unwrap();
        let by_header = OutgoingMessage::new(POINT_DATA.to_vec())
            .with_header(header::SCHEMA_ID, id.to_string());
        validator.validate("points-value", &by_header).unwrap();
        // Without either, the data is not in the wire format.
        let bare = OutgoingMessage::new(POINT_DATA.to_vec());
        let refused = validator.validate("points-value", &bare).unwrap_err();
        assert!(refused.reason.contains("magic byte"), "{refused:?}");
    }

    #[test]
    fn a_header_that_is_no_id_and_data_that_does_not_match_are_refused() {
        let (_dir, validator, id) = validator();
        let odd = OutgoingMessage::new(POINT_DATA.to_vec()).with_header(header::SCHEMA_ID, "one");
        let refused = validator.validate("points-value", &odd).unwrap_err();
        assert!(refused.reason.contains("not a schema id"), "{refused:?}");
        let truncated =
            OutgoingMessage::new(vec![6, 4, b'a']).with_header(header::SCHEMA_ID, id.to_string());
        let refused = validator.validate("points-value", &truncated).unwrap_err();
        assert_eq!(refused.field, "label");
    }
}
