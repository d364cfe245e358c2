//! Topology as code: a messaging design (queues, topics, subscriptions, message types and
//! their policies) written as a YAML file, and a linter that checks it against the rules
//! every production design must meet.
//!
//! ```
//! let topology = ferry_topology::Topology::from_yaml("version: 1\nname: empty\n").unwrap();
//! let findings = ferry_topology::lint(&topology);
//! // No consumer outage declared: retention cannot be checked against it.
//! assert_eq!(findings[0].id, "FT015");
//! ```

mod error;
mod finding;
pub mod format;
pub mod plan;
pub mod rules;

pub use error::Error;
pub use finding::{Finding, Severity};
pub use format::Topology;
pub use rules::{RULES, Rule, lint};
