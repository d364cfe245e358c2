//! AsyncAPI 3.0: a topology as an AsyncAPI document, and an AsyncAPI document as a
//! topology.
//!
//! [`to_document`] writes one channel per topic, subscription and queue (its `address` the
//! channel's name, its `messages` references to `components.messages`), a `send` operation
//! per topic and queue and a `receive` operation per queue, subscription and consumer
//! group, one component message per message type (payload schema from its fields, in the
//! format the file names, its key as the `correlationId`), and the bindings of each
//! channel's broker: Kafka, AMQP (RabbitMQ), SQS, SNS and NATS (an operation binding).
//!
//! What AsyncAPI has no field for (retry and ordering policies, consumers, alerts,
//! personal-data protection, the order of channels) is written under `x-ferry` extension
//! keys, and only that: [`from_document`] reads the document's own fields and lays
//! `x-ferry` over them, so a design read back from its own document is the same design.
//!
//! [`from_document`] also reads documents written by other tools, without `x-ferry`: a
//! channel with an SQS queue or AMQP queue binding becomes a queue, any other a topic;
//! receive operations with a Kafka `groupId` become consumer groups. [`import`] returns
//! the same topology with a [`Note`](crate::Note) for each setting that did not carry
//! over (a compacted Kafka topic, an SQS visibility timeout, message headers).
//!
//! ```
//! let topology = ferry_topology::Topology::from_yaml(
//!     "version: 1\nname: shop\nqueues:\n  - { name: orders, broker: sqs, type: queue }\n",
//! )
//! .unwrap();
//! let document = ferry_topology::asyncapi::to_document(&topology);
//! assert_eq!(document["asyncapi"], "3.0.0");
//! assert_eq!(document["channels"]["orders"]["bindings"]["sqs"]["queue"]["name"], "orders");
//! let back = ferry_topology::asyncapi::from_document(&document.to_string()).unwrap();
//! assert_eq!(back.to_yaml(), topology.to_yaml());
//! ```

mod bindings;
mod derive;
mod document;
mod error;
mod export;
mod extension;
mod import;
mod payload;

pub use error::Error;

use serde_json::Value;

use crate::{Imported, Topology};

/// The AsyncAPI 3.0.0 document of a design, as a JSON value (`to_string` writes it).
pub fn to_document(topology: &Topology) -> Value {
    export::document(topology)
}

/// The AsyncAPI 3.0.0 document of a design as YAML, the form AsyncAPI documents are
/// usually kept in.
pub fn to_yaml_document(topology: &Topology) -> String {
    // Plain JSON data always serializes; see `Topology::to_yaml`.
    serde_saphyr::to_string(&to_document(topology)).expect("a JSON value serializes to YAML")
}

/// Reads an AsyncAPI 3.0 document (JSON or YAML) as a design. AsyncAPI 2.x is refused
/// with [`Error::Version2`]. Settings that do not carry over are dropped; [`import`] lists
/// them.
pub fn from_document(text: &str) -> Result<Topology, Error> {
    import(text).map(|imported| imported.topology)
}

/// [`from_document`], with a note for each setting of the document that the design does
/// not carry.
pub fn import(text: &str) -> Result<Imported, Error> {
    import::import(text)
}
