//! The topology file: a messaging design as data. The fields are the seed's topology
//! spec (for each queue or topic: broker, name, type, partitions, retention, consumers,
//! dead-letter; for each message type: schema with version, key, payload, delivery
//! guarantee, idempotency key) plus Ferry's delivery policies.
//!
//! Every struct denies unknown fields: a misspelt `dead_leter` must be an error at its
//! line, not a queue silently without a dead-letter queue.

mod channel;
mod message;
mod name;
mod policy;
mod units;

pub use channel::{
    Broker, ChannelKind, ConsumerGroup, Consumers, DeadLetter, Limits, Queue, Subscription, Topic,
};
pub use message::{Field, Guarantee, MessageType, Protection, Schema, SchemaFormat};
pub use name::Name;
pub use policy::{Alerts, DeliveryPolicy, Ordering, OrderingMode, Retry};
pub use units::{ByteSize, Duration};

use serde::{Deserialize, Serialize};

use crate::Error;

/// The version of the format this crate reads.
pub const FORMAT_VERSION: u32 = 1;

/// A whole design: its channels and the message types they carry.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// The format version; only [`FORMAT_VERSION`] is read.
    pub version: u32,
    /// What the design is, e.g. `ecommerce-order-processing`.
    pub name: Name,
    /// The longest time any consumer may be down (a deploy, a maintenance window, a
    /// dependency's outage). Retention must outlast it, or messages expire unread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub longest_consumer_outage: Option<Duration>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topics: Vec<Topic>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<Queue>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<MessageType>,
}

impl Topology {
    /// Reads a topology file's text. Errors name the line and column.
    pub fn from_yaml(text: &str) -> Result<Self, Error> {
        let topology: Self = serde_saphyr::from_str(text).map_err(Error::from_yaml)?;
        if topology.version != FORMAT_VERSION {
            return Err(Error::UnsupportedVersion {
                found: topology.version,
            });
        }
        Ok(topology)
    }

    /// Writes the design as a topology file that [`Topology::from_yaml`] reads back to the
    /// same design. Absent options and empty lists are left out.
    pub fn to_yaml(&self) -> String {
        // Serializing plain data (strings, numbers, lists, maps) into a String cannot
        // fail: serde-saphyr errors only on writer failures and unsupported shapes.
        serde_saphyr::to_string(self).expect("a topology always serializes to YAML")
    }

    /// The message type named `name`, if the file defines one.
    pub fn message(&self, name: &str) -> Option<&MessageType> {
        self.messages.iter().find(|m| m.name.as_str() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_error(yaml: &str) -> Error {
        Topology::from_yaml(yaml).expect_err(yaml)
    }

    #[test]
    fn a_misspelt_field_is_an_error_naming_its_line_and_the_fields_expected() {
        let error = parse_error(
            "version: 1\nname: t\nqueues:\n  - name: q\n    broker: ferry\n    type: queue\n    dead_leter: { name: q.dlq }\n",
        );
        assert_eq!(error.line(), Some(7));
        let text = error.to_string();
        assert!(
            text.starts_with("line 7, column 5: unknown field `dead_leter`, expected one of"),
            "{text}"
        );
        assert!(text.contains("dead_letter"), "{text}");
    }

    #[test]
    fn a_duration_without_a_unit_is_an_error_at_its_line() {
        let error = parse_error("version: 1\nname: t\nlongest_consumer_outage: 7\n");
        assert_eq!(error.line(), Some(3));
        assert!(
            error.to_string().contains("`7` is not a duration"),
            "{error}"
        );
    }

    #[test]
    fn an_unknown_broker_is_an_error_at_its_line() {
        let error = parse_error(
            "version: 1\nname: t\ntopics:\n  - name: t\n    broker: kafak\n    type: topic\n",
        );
        assert_eq!(error.line(), Some(5), "{error}");
    }

    #[test]
    fn a_duplicate_key_is_an_error_at_its_line() {
        let error = parse_error("version: 1\nname: x\nname: y\n");
        assert_eq!(
            error.to_string(),
            "line 3, column 1: duplicate mapping key: name (each key may appear once)"
        );
    }

    #[test]
    fn another_format_version_is_refused() {
        let error = parse_error("version: 2\nname: t\n");
        assert_eq!(
            error.to_string(),
            "format version 2 is not supported: this Ferry reads version 1"
        );
    }

    #[test]
    fn a_missing_required_field_is_an_error() {
        let error = parse_error("version: 1\n");
        assert!(
            error.to_string().contains("missing field `name`"),
            "{error}"
        );
    }
}
