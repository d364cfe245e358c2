//! Topology as code: a messaging design (queues, topics, subscriptions, message types and
//! their policies) written as a YAML file, and a linter that checks it against the rules
//! every production design must meet.
//!
//! Designs also convert to and from other formats: [`asyncapi`] writes an AsyncAPI 3.0
//! document of a design and reads one back (its own exactly, other tools' with a
//! [`Note`] for each setting that does not carry over), and [`rabbitmq`] reads RabbitMQ's
//! definitions (`rabbitmqctl export_definitions`). Importers return an [`Imported`]: the
//! design and its notes. docs/topology.md has the mapping tables.
//!
//! ```
//! let topology = ferry_topology::Topology::from_yaml("version: 1\nname: empty\n").unwrap();
//! let findings = ferry_topology::lint(&topology);
//! // No consumer outage declared: retention cannot be checked against it.
//! assert_eq!(findings[0].id, "FT015");
//! ```

pub mod asyncapi;
mod error;
mod finding;
pub mod format;
mod imported;
pub mod plan;
pub mod rabbitmq;
pub mod rules;

pub use error::Error;
pub use finding::{Finding, Severity};
pub use format::Topology;
pub use imported::{Imported, Note};
pub use rules::{RULES, Rule, lint};
