//! What travels: message types, their schema and payload fields, and what their
//! consumers may assume about delivery.

use serde::{Deserialize, Serialize};

use super::name::Name;

/// One kind of message (the seed's `Schema: {event_name} v{version}` block).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MessageType {
    pub name: Name,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema: Option<Schema>,
    /// The partition / ordering key field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Messages with the same key must be processed in order.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ordered: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub payload: Vec<Field>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guarantee: Option<Guarantee>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Schema {
    pub format: SchemaFormat,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SchemaFormat {
    JsonSchema,
    Avro,
    Protobuf,
}

/// One payload field.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Field {
    pub name: Name,
    #[serde(rename = "type")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// How a field holding personal data is kept out of queues, dead-letter queues and
    /// logs in the clear.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub personal_data: Option<Protection>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protection {
    Encrypted,
    Tokenized,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Guarantee {
    AtMostOnce,
    AtLeastOnce,
    ExactlyOnce,
}
