//! Channel bindings: what each broker's AsyncAPI binding says about a queue or a topic
//! (Kafka 0.5.0, AMQP 0.3.0, SQS 0.2.0, SNS 0.1.0, the versions AsyncAPI 3.0.0 accepts; NATS has only an operation binding),
//! written from a channel of the design and read back into the topology file's fields.

use serde_json::{Map, Value, json};

use crate::format::{Broker, ChannelKind, DeadLetter, Duration};

/// What a channel is in the design.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Topic,
    Queue,
    /// A subscription of a topic; `parent` is that topic's broker.
    Subscription {
        parent: Broker,
    },
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Self::Topic => "topic",
            Self::Queue => "queue",
            Self::Subscription { .. } => "subscription",
        }
    }
}

/// The settings of a channel that bindings can say.
pub struct Facts<'a> {
    pub name: &'a str,
    pub role: Role,
    pub broker: Option<Broker>,
    pub kind: Option<ChannelKind>,
    pub partitions: Option<u32>,
    pub retention: Option<Duration>,
    pub max_message_size: Option<u64>,
    pub dead_letter: Option<&'a DeadLetter>,
    pub max_deliveries: Option<u32>,
}

/// SQS keeps messages from one minute to fourteen days, in whole seconds.
fn sqs_retention(retention: Option<Duration>) -> Option<u64> {
    let millis = retention?.as_millis();
    (millis.is_multiple_of(1000) && (60..=1_209_600).contains(&(millis / 1000)))
        .then_some(millis / 1000)
}

/// The channel's `bindings`, `None` when its broker has no channel binding.
pub fn write(facts: &Facts) -> Option<Value> {
    let broker = match facts.role {
        Role::Subscription {
            parent: Broker::Sns,
        } => Broker::Sqs,
        Role::Subscription {
            parent: Broker::Rabbitmq,
        } => Broker::Rabbitmq,
        Role::Subscription { .. } => return None,
        _ => facts.broker?,
    };
    let binding = match broker {
        Broker::Kafka => {
            let mut config = Map::new();
            config.insert("cleanup.policy".into(), json!(["delete"]));
            if let Some(retention) = facts.retention {
                config.insert("retention.ms".into(), json!(retention.as_millis()));
            }
            if let Some(size) = facts.max_message_size {
                config.insert("max.message.bytes".into(), json!(size));
            }
            let mut kafka = json!({"topic": facts.name, "topicConfiguration": config, "bindingVersion": "0.5.0"});
            if let Some(partitions) = facts.partitions.filter(|p| *p > 0) {
                kafka["partitions"] = json!(partitions);
            }
            json!({ "kafka": kafka })
        }
        Broker::Rabbitmq if facts.role == Role::Topic => json!({"amqp": {
            "is": "routingKey",
            "exchange": {"name": facts.name, "type": "topic", "durable": true, "autoDelete": false, "vhost": "/"},
            "bindingVersion": "0.3.0",
        }}),
        Broker::Rabbitmq => json!({"amqp": {
            "is": "queue",
            "queue": {"name": facts.name, "durable": true, "exclusive": false, "autoDelete": false, "vhost": "/"},
            "bindingVersion": "0.3.0",
        }}),
        Broker::Sqs => {
            let fifo = facts.kind == Some(ChannelKind::FifoQueue)
                || (matches!(facts.role, Role::Subscription { .. })
                    && facts.name.ends_with(".fifo"));
            let mut queue = json!({"name": facts.name, "fifoQueue": fifo});
            if let Some(seconds) = sqs_retention(facts.retention) {
                queue["messageRetentionPeriod"] = json!(seconds);
            }
            let mut sqs = json!({"queue": queue, "bindingVersion": "0.2.0"});
            if let Some(dead_letter) = facts.dead_letter {
                let mut redrive = json!({"deadLetterQueue": {"name": dead_letter.name}});
                if let Some(count) = facts.max_deliveries.filter(|c| *c > 0) {
                    redrive["maxReceiveCount"] = json!(count);
                }
                sqs["queue"]["redrivePolicy"] = redrive;
                let mut dlq = json!({"name": dead_letter.name, "fifoQueue": dead_letter.name.ends_with(".fifo")});
                if let Some(seconds) = sqs_retention(dead_letter.retention) {
                    dlq["messageRetentionPeriod"] = json!(seconds);
                }
                sqs["deadLetterQueue"] = dlq;
            }
            json!({ "sqs": sqs })
        }
        Broker::Sns => {
            let ordering = if facts.kind == Some(ChannelKind::FifoTopic) {
                "FIFO"
            } else {
                "standard"
            };
            json!({"sns": {"name": facts.name, "ordering": {"type": ordering}, "bindingVersion": "0.1.0"}})
        }
        Broker::Nats | Broker::Ferry | Broker::Redis | Broker::Pubsub => return None,
    };
    Some(binding)
}

/// The role a channel's bindings give it when the document does not say: a queue for an
/// SQS queue or an AMQP queue, a topic otherwise.
pub fn role(bindings: Option<&Value>) -> Role {
    let Some(bindings) = bindings else {
        return Role::Topic;
    };
    let amqp_queue = bindings
        .pointer("/amqp/is")
        .and_then(Value::as_str)
        .is_some_and(|is| is == "queue");
    if bindings.get("sqs").is_some() || amqp_queue {
        Role::Queue
    } else {
        Role::Topic
    }
}

/// Reads the bindings into the topology file's fields of a channel of `role`: `name`,
/// `broker`, `type`, `partitions`, `retention`, `limits`, `dead_letter` and
/// `delivery.max_deliveries`. What the bindings say that the format has no field for is
/// added to `unmapped`.
pub fn read(
    bindings: &Value,
    role: Role,
    out: &mut Map<String, Value>,
    unmapped: &mut Vec<String>,
) {
    let duration = |millis: u64| Value::String(Duration::from_millis(millis).to_string());
    if let Some(kafka) = bindings.get("kafka") {
        set_str(out, "name", kafka.get("topic"));
        out.insert("broker".into(), json!("kafka"));
        out.insert("type".into(), json!("stream"));
        if let Some(partitions) = kafka.get("partitions").and_then(Value::as_u64) {
            out.insert("partitions".into(), json!(partitions));
        }
        if let Some(config) = kafka.get("topicConfiguration").and_then(Value::as_object) {
            match config.get("retention.ms").and_then(Value::as_i64) {
                Some(ms) if ms >= 0 => {
                    out.insert("retention".into(), duration(ms as u64));
                }
                Some(_) => unmapped.push("retention.ms -1 (keep forever)".into()),
                None => {}
            }
            if let Some(bytes) = config.get("max.message.bytes").and_then(Value::as_u64) {
                out.insert("limits".into(), json!({"max_message_size": format!("{}", crate::format::ByteSize::from_bytes(bytes))}));
            }
            if config
                .get("cleanup.policy")
                .and_then(Value::as_array)
                .is_some_and(|p| p.iter().any(|p| p == "compact"))
            {
                unmapped.push("cleanup.policy compact (the format has no compaction)".into());
            }
            for key in config.keys() {
                if !matches!(
                    key.as_str(),
                    "retention.ms" | "max.message.bytes" | "cleanup.policy"
                ) {
                    unmapped.push(format!("kafka topicConfiguration {key}"));
                }
            }
        }
        if kafka.get("replicas").is_some() {
            unmapped.push("kafka replicas".into());
        }
    }
    if let Some(amqp) = bindings.get("amqp") {
        out.insert("broker".into(), json!("rabbitmq"));
        if amqp.get("is").and_then(Value::as_str) == Some("queue") {
            set_str(out, "name", amqp.pointer("/queue/name"));
            out.insert("type".into(), json!("queue"));
        } else {
            set_str(out, "name", amqp.pointer("/exchange/name"));
            out.insert("type".into(), json!("exchange"));
            if let Some(kind) = amqp.pointer("/exchange/type").and_then(Value::as_str)
                && kind != "topic"
            {
                unmapped.push(format!("exchange type {kind} (read as a topic exchange)"));
            }
        }
    }
    if let Some(sqs) = bindings.get("sqs") {
        let queue = sqs.get("queue").unwrap_or(&Value::Null);
        set_str(out, "name", queue.get("name"));
        out.insert("broker".into(), json!("sqs"));
        let fifo = queue.get("fifoQueue").and_then(Value::as_bool) == Some(true);
        out.insert(
            "type".into(),
            json!(if fifo { "fifo-queue" } else { "queue" }),
        );
        if let Some(seconds) = queue.get("messageRetentionPeriod").and_then(Value::as_u64) {
            out.insert("retention".into(), duration(seconds * 1000));
        }
        let mut dead_letter = Map::new();
        if let Some(redrive) = queue.get("redrivePolicy") {
            let target = redrive.get("deadLetterQueue").unwrap_or(&Value::Null);
            let name = target.get("name").and_then(Value::as_str).or_else(|| {
                // arn:aws:sqs:{region}:{account}:{queue}
                target
                    .get("arn")
                    .and_then(Value::as_str)?
                    .rsplit(':')
                    .next()
            });
            if let Some(name) = name {
                dead_letter.insert("name".into(), json!(name));
            }
            if let Some(count) = redrive.get("maxReceiveCount").and_then(Value::as_u64) {
                out.insert("delivery".into(), json!({"max_deliveries": count}));
            }
        }
        if let Some(dlq) = sqs.get("deadLetterQueue") {
            if !dead_letter.contains_key("name")
                && let Some(name) = dlq.get("name").and_then(Value::as_str)
            {
                dead_letter.insert("name".into(), json!(name));
            }
            if let Some(seconds) = dlq.get("messageRetentionPeriod").and_then(Value::as_u64) {
                dead_letter.insert("retention".into(), duration(seconds * 1000));
            }
        }
        if !dead_letter.is_empty() {
            out.insert("dead_letter".into(), Value::Object(dead_letter));
        }
        for key in [
            "deliveryDelay",
            "visibilityTimeout",
            "receiveMessageWaitTime",
            "policy",
        ] {
            if queue.get(key).is_some() {
                unmapped.push(format!("sqs queue {key}"));
            }
        }
    }
    if let Some(sns) = bindings.get("sns") {
        set_str(out, "name", sns.get("name"));
        out.insert("broker".into(), json!("sns"));
        let fifo = sns.pointer("/ordering/type").and_then(Value::as_str) == Some("FIFO");
        out.insert(
            "type".into(),
            json!(if fifo { "fifo-topic" } else { "topic" }),
        );
    }
    if let Role::Subscription { .. } = role {
        // A subscription has no broker or kind of its own: its topic's.
        for key in ["broker", "type", "partitions", "limits"] {
            out.remove(key);
        }
    }
}

fn set_str(out: &mut Map<String, Value>, key: &str, value: Option<&Value>) {
    if let Some(Value::String(text)) = value {
        out.insert(key.into(), Value::String(text.clone()));
    }
}
