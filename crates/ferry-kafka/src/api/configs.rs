//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs over Ferry's topic settings
//! (the mapping is `topic_config.rs`) and, read-only, this node's settings.
//!
//! **Topics.** The keys `topic_config.rs` maps, each with Ferry's actual value, its source
//! (DYNAMIC_TOPIC_CONFIG when it differs from the default, DEFAULT_CONFIG when not; the
//! broker-wide read-only ones STATIC_BROKER_CONFIG) and, when asked, its synonyms (the
//! topic's value, then the broker-level default Kafka would name). A change goes through
//! [`Broker::update_topic`](ferry_broker::Broker::update_topic): committed before it is
//! answered, kept across restarts, applied by the next housekeeping pass. AlterConfigs
//! replaces the topic's configs (a key not given goes back to its default), as Kafka's
//! does; IncrementalAlterConfigs changes the keys given (SET, DELETE, and APPEND/SUBTRACT
//! on `cleanup.policy`). A key Ferry does not have, a read-only one or a bad value is
//! INVALID_CONFIG with the reason and changes nothing for that resource; `validate_only`
//! checks and changes nothing.
//!
//! **The broker** (resource `0`, this node): a read-only set — the defaults topics get
//! and the limits they share, and the listener: `listeners` (the address bound, from
//! `kafka.addr`) and `advertised.listeners` (`kafka.advertised`, else the listener's
//! address, as Kafka falls back to `listeners`), each `PROTOCOL://host:port` with the
//! listener's security protocol, STATIC_BROKER_CONFIG with no default (Kafka's
//! `advertised.listeners` has none). Changing it is INVALID_CONFIG: it is set in Ferry's
//! configuration. Other resource types (groups, loggers, client metrics) are
//! INVALID_REQUEST.

use ferry_broker::{Broker, TopicSpec};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::text;
use crate::connection::Node;
use crate::topic_config::{self, ConfigType, Entry, Op};
use crate::{Shared, errors};

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
/// This node's id, as a broker resource name.
const NODE: &str = "0";

/// Kafka's config sources.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;

type Refusal = (ResponseError, String);

pub fn describe(
    shared: &Shared,
    node: &Node,
    request: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let results = request
        .resources
        .into_iter()
        .map(|resource| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            let entries = match resource.resource_type {
                TOPIC => topic_entries(&shared.broker, resource.resource_name.as_str()),
                BROKER => broker_entries(shared, node, resource.resource_name.as_str()),
                other => Err(unsupported_resource(other)),
            };
            match entries {
                Ok(entries) => {
                    let wanted = resource.configuration_keys.as_ref();
                    let configs = entries
                        .into_iter()
                        .filter(|(entry, _)| {
                            wanted.is_none_or(|keys| keys.iter().any(|k| k.as_str() == entry.name))
                        })
                        .map(|(entry, source)| {
                            result_entry(
                                &entry,
                                source,
                                request.include_synonyms,
                                request.include_documentation && version >= 3,
                            )
                        })
                        .collect();
                    result.with_configs(configs)
                }
                Err((code, message)) => result
                    .with_error_code(code.code())
                    .with_error_message(text(message)),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

fn unsupported_resource(kind: i8) -> Refusal {
    (
        ResponseError::InvalidRequest,
        format!(
            "resource type {kind} is not served: Ferry describes topics (2) and this broker (4)"
        ),
    )
}

/// A topic's entries with their sources.
fn topic_entries(broker: &Broker, name: &str) -> Result<Vec<(Entry, i8)>, Refusal> {
    let info = broker
        .describe_topic(name)
        .map_err(|e| (errors::from_broker(&e), e.to_string()))?;
    let entries = topic_config::describe(&info.spec, &broker.topic_storage_limits());
    Ok(entries
        .into_iter()
        .map(|entry| {
            let source = if entry.read_only {
                STATIC_BROKER_CONFIG
            } else if entry.is_default() {
                DEFAULT_CONFIG
            } else {
                DYNAMIC_TOPIC_CONFIG
            };
            (entry, source)
        })
        .collect())
}

/// This node's read-only settings.
fn broker_entries(shared: &Shared, node: &Node, name: &str) -> Result<Vec<(Entry, i8)>, Refusal> {
    if name != NODE {
        return Err((
            ResponseError::InvalidRequest,
            format!("broker {name:?} is not this node; Ferry is one node, broker 0"),
        ));
    }
    let limits = shared.broker.topic_storage_limits();
    let topic_defaults = topic_config::describe(&TopicSpec::default(), &limits);
    let config = &shared.config;
    let defaults = crate::KafkaConfig::default();
    let fixed = |name, value: String, default: String, config_type, doc| Entry {
        name,
        value,
        default,
        broker_name: name,
        read_only: true,
        config_type,
        documentation: doc,
    };
    let mut entries = vec![
        fixed(
            "num.partitions",
            config.default_partitions.to_string(),
            defaults.default_partitions.to_string(),
            ConfigType::Int,
            "Partitions of an auto-created topic (kafka.default_partitions).",
        ),
        fixed(
            "auto.create.topics.enable",
            config.auto_create_topics.to_string(),
            defaults.auto_create_topics.to_string(),
            ConfigType::Boolean,
            "Whether Metadata creates a missing topic (kafka.auto_create_topics).",
        ),
        fixed(
            "socket.request.max.bytes",
            config.max_frame_bytes.to_string(),
            defaults.max_frame_bytes.to_string(),
            ConfigType::Int,
            "The largest request taken (kafka.max_frame_bytes).",
        ),
    ];
    // The defaults every topic starts with, under their broker-level names.
    entries.extend(topic_defaults.into_iter().map(|entry| Entry {
        name: entry.broker_name,
        read_only: true,
        value: entry.default.clone(),
        ..entry
    }));
    let mut entries: Vec<(Entry, i8)> = entries
        .into_iter()
        .map(|entry| {
            let source = if entry.is_default() {
                DEFAULT_CONFIG
            } else {
                STATIC_BROKER_CONFIG
            };
            (entry, source)
        })
        .collect();
    entries.extend(
        listener_entries(shared, node)
            .into_iter()
            .map(|entry| (entry, STATIC_BROKER_CONFIG)),
    );
    Ok(entries)
}

/// `listeners` and `advertised.listeners`: configured, never defaulted (an empty
/// `default` says there is none).
fn listener_entries(shared: &Shared, node: &Node) -> [Entry; 2] {
    let protocol = shared.config.security.protocol();
    let listener = |name, value: String, doc| Entry {
        name,
        value,
        default: String::new(),
        broker_name: name,
        read_only: true,
        config_type: ConfigType::List,
        documentation: doc,
    };
    [
        listener(
            "listeners",
            format!("{protocol}://{}", node.listener),
            "The address the Kafka endpoint listens on (kafka.addr).",
        ),
        listener(
            "advertised.listeners",
            format!("{protocol}://{}", host_port(&node.host, node.port)),
            "The address clients are told to connect to (kafka.advertised, else the \
             listener's).",
        ),
    ]
}

/// `host:port`, an IPv6 address in brackets as Kafka writes listeners.
fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn result_entry(
    entry: &Entry,
    source: i8,
    synonyms: bool,
    documentation: bool,
) -> DescribeConfigsResourceResult {
    let str = |s: &str| StrBytes::from_string(s.to_owned());
    let mut result = DescribeConfigsResourceResult::default()
        .with_name(str(entry.name))
        .with_value(Some(str(&entry.value)))
        .with_read_only(entry.read_only)
        .with_config_source(source)
        .with_config_type(entry.config_type as i8)
        .with_documentation(documentation.then(|| str(entry.documentation)));
    if synonyms {
        let mut list = Vec::new();
        if source == DYNAMIC_TOPIC_CONFIG {
            list.push(
                DescribeConfigsSynonym::default()
                    .with_name(str(entry.name))
                    .with_value(Some(str(&entry.value)))
                    .with_source(DYNAMIC_TOPIC_CONFIG),
            );
        }
        if entry.default.is_empty() {
            // No default (the listeners): the configured value is the only synonym.
            list.push(
                DescribeConfigsSynonym::default()
                    .with_name(str(entry.broker_name))
                    .with_value(Some(str(&entry.value)))
                    .with_source(source),
            );
        } else {
            list.push(
                DescribeConfigsSynonym::default()
                    .with_name(str(entry.broker_name))
                    .with_value(Some(str(&entry.default)))
                    .with_source(DEFAULT_CONFIG),
            );
        }
        result = result.with_synonyms(list);
    }
    result
}

pub async fn alter(shared: &Shared, request: AlterConfigsRequest) -> AlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in request.resources {
        let changes: Result<Vec<(String, Op)>, Refusal> = resource
            .configs
            .iter()
            .map(|c| {
                let name = c.name.to_string();
                match &c.value {
                    Some(value) => Ok((name, Op::Set(value.to_string()))),
                    None => Err((
                        ResponseError::InvalidConfig,
                        format!("{name} has no value; give one"),
                    )),
                }
            })
            .collect();
        let outcome = match changes {
            Ok(changes) => {
                change(
                    shared,
                    resource.resource_type,
                    resource.resource_name.as_str(),
                    &changes,
                    true,
                    request.validate_only,
                )
                .await
            }
            Err(refusal) => Err(refusal),
        };
        let (code, message) = error_of(outcome);
        responses.push(
            AlterConfigsResourceResponse::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name)
                .with_error_code(code)
                .with_error_message(message),
        );
    }
    AlterConfigsResponse::default().with_responses(responses)
}

pub async fn incremental_alter(
    shared: &Shared,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in request.resources {
        let changes: Result<Vec<(String, Op)>, Refusal> = resource
            .configs
            .iter()
            .map(|c| {
                let name = c.name.to_string();
                let value = || {
                    c.value.as_ref().map(|v| v.to_string()).ok_or_else(|| {
                        (
                            ResponseError::InvalidConfig,
                            format!("{name} has no value; give one"),
                        )
                    })
                };
                let op = match c.config_operation {
                    0 => Op::Set(value()?),
                    1 => Op::Delete,
                    2 => Op::Append(value()?),
                    3 => Op::Subtract(value()?),
                    other => {
                        return Err((
                            ResponseError::InvalidRequest,
                            format!("config operation {other} is not one of SET, DELETE, APPEND, SUBTRACT"),
                        ));
                    }
                };
                Ok((name, op))
            })
            .collect();
        let outcome = match changes {
            Ok(changes) => {
                change(
                    shared,
                    resource.resource_type,
                    resource.resource_name.as_str(),
                    &changes,
                    false,
                    request.validate_only,
                )
                .await
            }
            Err(refusal) => Err(refusal),
        };
        let (code, message) = error_of(outcome);
        responses.push(
            kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name)
                .with_error_code(code)
                .with_error_message(message),
        );
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

/// The error code and message of an outcome.
fn error_of(outcome: Result<(), Refusal>) -> (i16, Option<StrBytes>) {
    match outcome {
        Ok(()) => (0, None),
        Err((code, message)) => (code.code(), text(message)),
    }
}

/// Checks `changes` to one resource and, unless `validate_only`, commits them.
async fn change(
    shared: &Shared,
    resource_type: i8,
    name: &str,
    changes: &[(String, Op)],
    replace: bool,
    validate_only: bool,
) -> Result<(), Refusal> {
    match resource_type {
        TOPIC => {}
        BROKER => {
            return Err((
                ResponseError::InvalidConfig,
                "the broker's configs are read-only here: set them in Ferry's configuration \
                 ([kafka] and the broker's limits) and restart"
                    .into(),
            ));
        }
        other => return Err(unsupported_resource(other)),
    }
    let broker = &shared.broker;
    let refused = |e: ferry_broker::BrokerError| {
        let code = match e.kind() {
            ferry_broker::ErrorKind::Invalid => ResponseError::InvalidConfig,
            _ => errors::from_broker(&e),
        };
        (code, e.to_string())
    };
    let current = broker.describe_topic(name).map_err(refused)?.spec;
    let next = topic_config::apply(name, &current, changes, replace)
        .map_err(|e| (ResponseError::InvalidConfig, e.0))?;
    next.validate().map_err(refused)?;
    if validate_only {
        return Ok(());
    }
    // Computed again under the broker's lock from the spec then current, so a change made
    // meanwhile (another client's) is not undone by this one.
    let mut outcome = Ok(());
    broker
        .update_topic(name, |spec| {
            match topic_config::apply(name, spec, changes, replace) {
                Ok(next) => *spec = next,
                Err(e) => outcome = Err(e),
            }
        })
        .await
        .map_err(refused)?;
    outcome.map_err(|e| (ResponseError::InvalidConfig, e.0))
}
