//! What travels: message types, their schema and payload fields, and what their
//! consumers may assume about delivery.

use serde::Deserialize;

use super::name::Name;

/// One kind of message (the seed's `Schema: {event_name} v{version}` block).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageType {
    pub name: Name,
    pub schema: Option<Schema>,
    /// The partition / ordering key field.
    pub key: Option<String>,
    /// Messages with the same key must be processed in order.
    #[serde(default)]
    pub ordered: bool,
    #[serde(default)]
    pub payload: Vec<Field>,
    pub guarantee: Option<Guarantee>,
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schema {
    pub format: SchemaFormat,
    pub version: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SchemaFormat {
    JsonSchema,
    Avro,
    Protobuf,
}

/// One payload field.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Field {
    pub name: Name,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// How a field holding personal data is kept out of queues, dead-letter queues and
    /// logs in the clear.
    pub personal_data: Option<Protection>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protection {
    Encrypted,
    Tokenized,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Guarantee {
    AtMostOnce,
    AtLeastOnce,
    ExactlyOnce,
}
