//! The parts of RabbitMQ's definitions file (`rabbitmqctl export_definitions`, or the
//! management API's `/api/definitions`) that describe a messaging design. Unknown fields
//! are ignored: each RabbitMQ release adds some, and users, permissions and the like are
//! not part of a design.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::Error;

#[derive(Debug, Deserialize)]
pub struct Definitions {
    #[serde(default)]
    pub queues: Vec<QueueDefinition>,
    #[serde(default)]
    pub exchanges: Vec<ExchangeDefinition>,
    #[serde(default)]
    pub bindings: Vec<BindingDefinition>,
    #[serde(default)]
    pub policies: Vec<PolicyDefinition>,
    /// Shovels, federation upstreams and other runtime parameters.
    #[serde(default)]
    pub parameters: Vec<ParameterDefinition>,
}

#[derive(Debug, Deserialize)]
pub struct QueueDefinition {
    pub name: String,
    #[serde(default = "default_vhost")]
    pub vhost: String,
    #[serde(default = "yes")]
    pub durable: bool,
    #[serde(default)]
    pub auto_delete: bool,
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

#[derive(Debug, Deserialize)]
pub struct ExchangeDefinition {
    pub name: String,
    #[serde(default = "default_vhost")]
    pub vhost: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default = "yes")]
    pub durable: bool,
    #[serde(default)]
    pub auto_delete: bool,
    #[serde(default)]
    pub internal: bool,
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

#[derive(Debug, Deserialize)]
pub struct BindingDefinition {
    pub source: String,
    #[serde(default = "default_vhost")]
    pub vhost: String,
    pub destination: String,
    pub destination_type: String,
    #[serde(default)]
    pub routing_key: String,
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

#[derive(Debug, Deserialize)]
pub struct PolicyDefinition {
    pub name: String,
    #[serde(default = "default_vhost")]
    pub vhost: String,
    pub pattern: String,
    #[serde(rename = "apply-to", default = "default_apply_to")]
    pub apply_to: String,
    #[serde(default)]
    pub priority: i64,
    #[serde(default)]
    pub definition: Map<String, Value>,
}

#[derive(Debug, Deserialize)]
pub struct ParameterDefinition {
    pub name: String,
    #[serde(default = "default_vhost")]
    pub vhost: String,
    pub component: String,
}

fn default_vhost() -> String {
    "/".into()
}

fn yes() -> bool {
    true
}

fn default_apply_to() -> String {
    "all".into()
}

impl Definitions {
    pub fn parse(text: &str) -> Result<Self, Error> {
        let value: Value = serde_json::from_str(text).map_err(|error| Error::Json {
            line: error.line(),
            column: error.column(),
            message: error.to_string(),
        })?;
        let is_definitions = value.as_object().is_some_and(|object| {
            [
                "queues",
                "exchanges",
                "bindings",
                "rabbit_version",
                "rabbitmq_version",
            ]
            .iter()
            .any(|key| object.contains_key(*key))
        });
        if !is_definitions {
            return Err(Error::NotDefinitions);
        }
        serde_json::from_value(value).map_err(|error| Error::Invalid {
            message: error.to_string(),
        })
    }

    /// The vhosts that hold a queue or an exchange, in the order first seen.
    pub fn vhosts(&self) -> Vec<String> {
        let mut vhosts: Vec<String> = Vec::new();
        let seen = self
            .queues
            .iter()
            .map(|q| &q.vhost)
            .chain(self.exchanges.iter().map(|e| &e.vhost));
        for vhost in seen {
            if !vhosts.contains(vhost) {
                vhosts.push(vhost.clone());
            }
        }
        vhosts
    }
}
