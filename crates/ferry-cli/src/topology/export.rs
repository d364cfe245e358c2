//! `ferry topology export`: the server's queues, topics, subscriptions and consumer groups
//! as a topology file. Every setting the format has a field for is written with the
//! server's value, so that `plan` of the file against the same server is empty. What the
//! server does not keep (alerts, consumers, message types) cannot be recovered.

use std::path::Path;

use ferry_client::proto as v1;
use ferry_topology::Topology;
use ferry_topology::format::{
    Broker, ChannelKind, ConsumerGroup, DeadLetter, DeliveryPolicy, Duration, Limits, Name,
    Ordering, OrderingMode, Queue, Retry, Subscription, Topic,
};

use super::{Connection, ExportFormat, with_server};
use crate::remote::Remote;
use crate::remote::admin::{dead_letter_queue, dead_letter_topic};

pub fn run(
    output: Option<&Path>,
    format: ExportFormat,
    connection: impl FnOnce() -> anyhow::Result<Connection>,
) -> i32 {
    let topology = match with_server(connection, async |remote| read(remote).await) {
        Ok(topology) => topology,
        Err(code) => return code,
    };
    super::write_output(output, &super::render(&topology, format))
}

/// The server's topology. Subscriptions are the queues that describe as one.
pub async fn read(remote: &Remote) -> anyhow::Result<Topology> {
    let client = &remote.client;
    let mut topics = Vec::new();
    for name in remote.call(client.list_topics()).await? {
        let info = remote.call(client.describe_topic(&name)).await?;
        let spec = info.spec.unwrap_or_default();
        let retention = spec.retention.unwrap_or_default();
        topics.push(Topic {
            name: Name::new(&name),
            broker: Broker::Ferry,
            kind: ChannelKind::Topic,
            partitions: Some(spec.partitions),
            // Unbounded has no spelling in the format: left out, it is not managed.
            retention: match retention.unbounded_age {
                true => None,
                false => retention.max_age_ms.map(Duration::from_millis),
            },
            messages: Vec::new(),
            limits: None,
            subscriptions: Vec::new(),
            consumer_groups: Vec::new(),
        });
    }
    let mut queues = Vec::new();
    for name in remote.call(client.list_queues()).await? {
        if is_temporary(&name) {
            continue;
        }
        match client.describe_subscription(&name).await {
            Ok(info) => {
                let spec = info.spec.unwrap_or_default();
                let queue = info.queue.unwrap_or_default();
                let Some(topic) = topics.iter_mut().find(|t| t.name == *spec.topic) else {
                    anyhow::bail!(
                        "subscription {name} reads topic {}, which the server does not list",
                        spec.topic
                    );
                };
                refuse_dead_letter_topic(&name, &queue)?;
                let (delivery, ttl, dead_letter, _) = settings(&queue);
                topic.subscriptions.push(Subscription {
                    name: Name::new(&name),
                    filter: (!spec.filter.is_empty()).then_some(spec.filter),
                    retention: ttl,
                    consumers: None,
                    dead_letter,
                    delivery: Some(delivery),
                    alerts: None,
                });
            }
            // A plain queue: not a subscription.
            Err(e) if e.kind() == Some(ferry_client::ErrorKind::Conflict) => {
                let info = remote.call(client.describe_queue(&name)).await?;
                refuse_dead_letter_topic(&name, &info)?;
                let (delivery, ttl, dead_letter, max_length) = settings(&info);
                queues.push(Queue {
                    name: Name::new(&name),
                    broker: Broker::Ferry,
                    kind: ChannelKind::Queue,
                    partitions: None,
                    retention: ttl,
                    consumers: None,
                    dead_letter,
                    messages: Vec::new(),
                    limits: max_length.map(|n| Limits {
                        max_message_size: None,
                        max_length: Some(n),
                    }),
                    delivery: Some(delivery),
                    alerts: None,
                });
            }
            Err(e) => return Err(crate::remote::output::explain(e, &remote.server)),
        }
    }
    for (topic, group) in remote.call(client.list_groups(None)).await? {
        if let Some(t) = topics.iter_mut().find(|t| t.name == *topic) {
            t.consumer_groups.push(ConsumerGroup {
                name: Name::new(group),
                consumers: None,
                alerts: None,
            });
        }
    }
    Ok(Topology {
        version: ferry_topology::format::FORMAT_VERSION,
        name: Name::new("exported"),
        longest_consumer_outage: None,
        topics,
        queues,
        messages: Vec::new(),
    })
}

/// A topology file names a dead-letter queue only: a queue whose dead letters go to a
/// topic cannot be written without losing that (left out, it would read as discarding
/// them), so the export stops and says so.
fn refuse_dead_letter_topic(name: &str, info: &v1::QueueInfo) -> anyhow::Result<()> {
    match dead_letter_topic(info) {
        Some(topic) => anyhow::bail!(
            "{name} dead-letters into topic {topic}, which a topology file cannot express \
             (it names dead-letter queues only); point its dead letters at a queue to export"
        ),
        None => Ok(()),
    }
}

/// Whether `name` is a temporary queue's (`tmp.` and a ULID, as the server names them):
/// owned by a live connection and gone with it, so no part of a design; pruning it would
/// break a request/reply client.
fn is_temporary(name: &str) -> bool {
    name.strip_prefix("tmp.").is_some_and(|id| {
        id.len() == 26
            && id
                .bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_uppercase())
    })
}

/// A queue's delivery policy, TTL (written as `retention`), dead-letter queue and length
/// limit in the format's fields.
fn settings(
    info: &v1::QueueInfo,
) -> (
    DeliveryPolicy,
    Option<Duration>,
    Option<DeadLetter>,
    Option<u64>,
) {
    let spec = info.spec.clone().unwrap_or_default();
    let retry = spec.retry.unwrap_or_default();
    let backoff = retry.backoff.unwrap_or_default();
    let mode = match spec.ordering() {
        v1::OrderingMode::KeyShared => OrderingMode::KeyShared,
        v1::OrderingMode::Exclusive => OrderingMode::Exclusive,
        v1::OrderingMode::Shared | v1::OrderingMode::Unspecified => OrderingMode::Shared,
    };
    let delivery = DeliveryPolicy {
        max_deliveries: retry.max_deliveries,
        retry: backoff.base_ms.map(|base| Retry {
            initial: Duration::from_millis(base),
            multiplier: backoff.multiplier,
            max: backoff.cap_ms.map(Duration::from_millis),
            jitter: backoff.jitter,
        }),
        ordering: Some(Ordering {
            mode,
            park_failed_keys: false,
        }),
        dedup_window: spec.dedup_window_ms.map(Duration::from_millis),
        ttl: None,
        // One level is no priorities: left out, as a file without them says.
        priorities: spec
            .priority_levels
            .filter(|&levels| levels > 1)
            .map(|levels| u8::try_from(levels).unwrap_or(u8::MAX)),
    };
    let dead_letter = dead_letter_queue(info).map(|name| DeadLetter {
        name,
        retention: spec.dead_letter_retention_ms.map(Duration::from_millis),
    });
    let max_length = spec.length_limit.and_then(|l| l.max_messages);
    (
        delivery,
        spec.default_ttl_ms.map(Duration::from_millis),
        dead_letter,
        max_length,
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn temporary_queues_are_told_by_their_server_given_names() {
        assert!(super::is_temporary("tmp.01JABCDEFGHJKMNPQRSTVWXYZ0"));
        assert!(!super::is_temporary("tmp.orders"));
        assert!(!super::is_temporary("orders"));
    }
}
