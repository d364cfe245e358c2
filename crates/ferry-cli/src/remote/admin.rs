//! `ferry queue|topic|sub|group …`: create, list, describe and delete over the Admin API,
//! and a queue's parked keys.

use clap::{Args, Subcommand, ValueEnum};
use ferry_client::proto as v1;
use serde_json::json;

use super::Remote;
use super::delivery::DeliveryOptions;
use super::output::{enum_name, fields, human_ms, millis, parse_duration, print_json, table};
use super::parked::{self, ParkArgs};

#[derive(Subcommand, Debug)]
pub enum QueueCommand {
    /// Create a queue (unset options take the server's defaults).
    Create(QueueCreate),
    /// The names of every queue.
    List,
    /// A queue's settings and counts.
    Describe { name: String },
    /// Delete a queue and its messages.
    Delete { name: String },
    /// Hold one key's messages on a key-shared queue (a poison key) while other keys flow.
    Park(ParkArgs),
    /// Release a parked key: its messages are delivered again, in order.
    Unpark(ParkArgs),
    /// The keys parked on a queue, with how many messages each holds.
    Parked { queue: String },
}

#[derive(Args, Debug)]
pub struct QueueCreate {
    /// Letters, digits, '.', '-', '_'.
    pub name: String,
    #[command(flatten)]
    pub delivery: DeliveryOptions,
    /// Refuse publishes whose payload does not match this schema registry subject
    /// (e.g. orders-value): Confluent wire format, or a ferry-schema-id header.
    #[arg(long)]
    pub schema_subject: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum TopicCommand {
    /// Create a partitioned topic.
    Create(TopicCreate),
    /// The names of every topic.
    List,
    /// A topic's settings and partitions.
    Describe { name: String },
    /// Delete a topic and its records.
    Delete { name: String },
}

#[derive(Args, Debug)]
pub struct TopicCreate {
    pub name: String,
    /// Records with the same key go to the same partition.
    #[arg(long, default_value_t = 1)]
    pub partitions: u32,
    /// Records older than this are removed (e.g. 7d), or `unbounded`.
    #[arg(long)]
    pub retention_age: Option<String>,
    /// Most bytes kept per partition.
    #[arg(long)]
    pub retention_bytes: Option<u64>,
    /// Keep only the newest record of each key.
    #[arg(long)]
    pub compaction: bool,
    /// Refuse publishes whose payload does not match this schema registry subject
    /// (e.g. orders-value): Confluent wire format, or a ferry-schema-id header.
    #[arg(long)]
    pub schema_subject: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum SubCommand {
    /// Create a subscription: a queue fed from a topic.
    Create(Box<SubCreate>),
    /// Every subscription, or those of one topic, with their topic, filter and backlog.
    List {
        #[arg(long)]
        topic: Option<String>,
    },
    /// The subscription's filter, start and its queue's settings and counts.
    Describe { name: String },
    /// Delete a subscription.
    Delete { name: String },
}

#[derive(Args, Debug)]
pub struct SubCreate {
    /// Also the name of the queue consumers read it from.
    pub name: String,
    /// The topic it takes records from.
    #[arg(long)]
    pub topic: String,
    /// e.g. `subject ~ orders.* and region in (eu, us)` or
    /// `(type = paid or prefix(type, refund.)) and not exists(test)`; empty takes everything.
    #[arg(long, default_value = "")]
    pub filter: String,
    /// Where in the topic to start.
    #[arg(long, value_enum, default_value_t = Start::Now)]
    pub from: Start,
    /// How its queue delivers, as `ferry queue create` takes it.
    #[command(flatten)]
    pub delivery: DeliveryOptions,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Start {
    Earliest,
    Now,
}

#[derive(Subcommand, Debug)]
pub enum GroupCommand {
    /// Every consumer group the server knows (joined since it started, or with committed
    /// offsets), or those of one topic.
    List {
        #[arg(long)]
        topic: Option<String>,
    },
    /// A consumer group's members, committed offsets and lag.
    Describe { topic: String, group: String },
    /// Delete a consumer group's committed offsets; refused while it has members.
    Delete { topic: String, group: String },
}

pub async fn queue(remote: &Remote, command: QueueCommand) -> anyhow::Result<()> {
    match command {
        QueueCommand::Create(args) => {
            let spec = v1::QueueSpec {
                schema_subject: args.schema_subject,
                ..args.delivery.spec()
            };
            remote
                .call(remote.client.create_queue(&args.name, spec))
                .await?;
            done(remote, "created", "queue", &args.name);
        }
        QueueCommand::List => {
            let names = remote.call(remote.client.list_queues()).await?;
            list(remote, "queue", &names);
        }
        QueueCommand::Describe { name } => {
            let info = remote.call(remote.client.describe_queue(&name)).await?;
            if remote.json {
                print_json(&queue_json(&info));
            } else {
                out!("{}", fields(&queue_rows(&info)));
            }
        }
        QueueCommand::Delete { name } => {
            remote.call(remote.client.delete_queue(&name)).await?;
            done(remote, "deleted", "queue", &name);
        }
        QueueCommand::Park(args) => parked::park(remote, &args).await?,
        QueueCommand::Unpark(args) => parked::unpark(remote, &args).await?,
        QueueCommand::Parked { queue } => parked::list(remote, &queue).await?,
    }
    Ok(())
}

fn done(remote: &Remote, what: &str, kind: &str, name: &str) {
    if remote.json {
        print_json(&json!({ what: true, kind: name }));
    } else {
        out!("{what} {kind} {name}");
    }
}

fn list(remote: &Remote, kind: &str, names: &[String]) {
    if remote.json {
        print_json(&json!(names));
    } else if names.is_empty() {
        // An empty table prints only its header, which reads like a broken answer.
        out!("no {kind}s");
    } else {
        let mut t = table([kind]);
        for name in names {
            t.add_row([name]);
        }
        out!("{t}");
    }
}

/// Where a queue's dead letters go: a queue name, or `None` when they are discarded or
/// published to a topic (no queue holds them).
pub fn dead_letter_queue(info: &v1::QueueInfo) -> Option<String> {
    let target = info
        .spec
        .as_ref()
        .and_then(|s| s.dead_letter.as_ref())
        .and_then(|d| d.target.clone());
    match target {
        None | Some(v1::dead_letter::Target::Derived(_)) => Some(format!("{}.dlq", info.name)),
        Some(v1::dead_letter::Target::Queue(q)) => Some(q),
        Some(v1::dead_letter::Target::Disabled(_) | v1::dead_letter::Target::Topic(_)) => None,
    }
}

/// The topic a queue's dead letters are published to, if they go to one.
pub fn dead_letter_topic(info: &v1::QueueInfo) -> Option<String> {
    match info
        .spec
        .as_ref()
        .and_then(|s| s.dead_letter.as_ref())
        .and_then(|d| d.target.clone())
    {
        Some(v1::dead_letter::Target::Topic(topic)) => Some(topic),
        _ => None,
    }
}

pub fn stats_json(s: &v1::QueueStats) -> serde_json::Value {
    json!({
        "ready": s.ready, "in_flight": s.in_flight, "delayed": s.delayed, "parked": s.parked,
        "bytes": s.bytes, "oldest_ready_age_ms": s.oldest_ready_age_ms,
        "published": s.published, "acked": s.acked, "nacked": s.nacked,
        "dead_lettered": s.dead_lettered, "dropped": s.dropped, "cancelled": s.cancelled,
        "redriven": s.redriven, "skipped": s.skipped,
    })
}

fn queue_json(info: &v1::QueueInfo) -> serde_json::Value {
    let spec = info.spec.clone().unwrap_or_default();
    let retry = spec.retry.unwrap_or_default();
    let limit = spec.length_limit.unwrap_or_default();
    json!({
        "name": info.name,
        "spec": {
            "max_deliveries": retry.max_deliveries,
            "backoff_base_ms": retry.backoff.and_then(|b| b.base_ms),
            "dead_letter": dead_letter_queue(info),
            "dead_letter_topic": dead_letter_topic(info),
            "dedup_window_ms": spec.dedup_window_ms,
            "default_ttl_ms": spec.default_ttl_ms,
            "lease_ms": spec.lease_ms,
            "max_delay_ms": spec.max_delay_ms,
            "priority_levels": spec.priority_levels,
            "ordering": enum_name(spec.ordering().as_str_name(), "ORDERING_MODE_"),
            "max_messages": limit.max_messages,
            "max_bytes": limit.max_bytes,
            "overflow": enum_name(limit.overflow().as_str_name(), "OVERFLOW_POLICY_"),
            "schema_subject": spec.schema_subject,
        },
        "stats": stats_json(&info.stats.unwrap_or_default()),
    })
}

/// A channel's schema requirement as describe shows it.
fn schema_subject(subject: Option<&str>) -> String {
    subject.map_or_else(|| "none".to_owned(), str::to_owned)
}

fn opt<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "default".to_owned(), |v| v.to_string())
}

fn queue_rows(info: &v1::QueueInfo) -> Vec<(&'static str, String)> {
    let spec = info.spec.clone().unwrap_or_default();
    let retry = spec.retry.unwrap_or_default();
    let limit = spec.length_limit.unwrap_or_default();
    let s = info.stats.unwrap_or_default();
    let dur = |ms: Option<u64>| ms.map_or_else(|| "default".to_owned(), |ms| human_ms(Some(ms)));
    vec![
        ("name", info.name.clone()),
        ("max deliveries", opt(retry.max_deliveries)),
        (
            "backoff base",
            dur(retry.backoff.as_ref().and_then(|b| b.base_ms)),
        ),
        (
            "dead letters to",
            match (dead_letter_queue(info), dead_letter_topic(info)) {
                (Some(queue), _) => queue,
                (None, Some(topic)) => format!("topic {topic}"),
                (None, None) => "discarded".into(),
            },
        ),
        ("lease", dur(spec.lease_ms)),
        ("dedup window", dur(spec.dedup_window_ms)),
        ("default ttl", dur(spec.default_ttl_ms)),
        ("max delay", dur(spec.max_delay_ms)),
        ("priority levels", opt(spec.priority_levels)),
        (
            "ordering",
            enum_name(spec.ordering().as_str_name(), "ORDERING_MODE_"),
        ),
        ("max messages", opt(limit.max_messages)),
        ("max bytes", opt(limit.max_bytes)),
        (
            "overflow",
            enum_name(limit.overflow().as_str_name(), "OVERFLOW_POLICY_"),
        ),
        (
            "schema subject",
            schema_subject(spec.schema_subject.as_deref()),
        ),
        ("ready", s.ready.to_string()),
        ("in flight", s.in_flight.to_string()),
        ("delayed", s.delayed.to_string()),
        ("parked", s.parked.to_string()),
        ("bytes", s.bytes.to_string()),
        ("oldest ready", human_ms(s.oldest_ready_age_ms)),
        ("published", s.published.to_string()),
        ("acked", s.acked.to_string()),
        ("nacked", s.nacked.to_string()),
        ("dead-lettered", s.dead_lettered.to_string()),
        ("dropped", s.dropped.to_string()),
        ("redriven", s.redriven.to_string()),
    ]
}

pub async fn topic(remote: &Remote, command: TopicCommand) -> anyhow::Result<()> {
    match command {
        TopicCommand::Create(args) => {
            let mut retention = v1::TopicRetention {
                max_bytes: args.retention_bytes,
                ..Default::default()
            };
            match args.retention_age.as_deref() {
                None => {}
                Some("unbounded") => retention.unbounded_age = true,
                Some(age) => {
                    let age = parse_duration(age)
                        .map_err(|e| anyhow::anyhow!("--retention-age: {e}, or `unbounded`"))?;
                    retention.max_age_ms = Some(millis(age));
                }
            }
            let spec = v1::TopicSpec {
                partitions: args.partitions,
                retention: Some(retention),
                compaction: args.compaction.then(v1::TopicCompaction::default),
                schema_subject: args.schema_subject,
                ..Default::default()
            };
            remote
                .call(remote.client.create_topic(&args.name, spec))
                .await?;
            done(remote, "created", "topic", &args.name);
        }
        TopicCommand::List => {
            let names = remote.call(remote.client.list_topics()).await?;
            list(remote, "topic", &names);
        }
        TopicCommand::Describe { name } => {
            let info = remote.call(remote.client.describe_topic(&name)).await?;
            let spec = info.spec.unwrap_or_default();
            let retention = spec.retention.unwrap_or_default();
            if remote.json {
                let partitions: Vec<_> = info
                    .partitions
                    .iter()
                    .map(|p| {
                        json!({
                            "partition": p.partition, "start_offset": p.start_offset,
                            "end_offset": p.end_offset, "bytes": p.bytes,
                            "oldest_published_at_ms": p.oldest_published_at_ms,
                        })
                    })
                    .collect();
                print_json(&json!({
                    "name": info.name,
                    "partitions": partitions,
                    "retention_max_age_ms": retention.max_age_ms,
                    "retention_unbounded_age": retention.unbounded_age,
                    "retention_max_bytes": retention.max_bytes,
                    "compaction": spec.compaction.is_some(),
                    "schema_subject": spec.schema_subject,
                }));
            } else {
                let age = if retention.unbounded_age {
                    "unbounded".to_owned()
                } else {
                    retention
                        .max_age_ms
                        .map_or_else(|| "default".into(), |ms| human_ms(Some(ms)))
                };
                out!(
                    "{}",
                    fields(&[
                        ("name", info.name.clone()),
                        ("partitions", spec.partitions.to_string()),
                        ("retention age", age),
                        ("retention bytes", opt(retention.max_bytes)),
                        ("compaction", spec.compaction.is_some().to_string()),
                        (
                            "schema subject",
                            schema_subject(spec.schema_subject.as_deref())
                        ),
                    ])
                );
                let mut t = table(["partition", "start", "end", "records", "bytes"]);
                for p in &info.partitions {
                    t.add_row([
                        p.partition.to_string(),
                        p.start_offset.to_string(),
                        p.end_offset.to_string(),
                        (p.end_offset - p.start_offset.min(p.end_offset)).to_string(),
                        p.bytes.to_string(),
                    ]);
                }
                out!("{t}");
            }
        }
        TopicCommand::Delete { name } => {
            remote.call(remote.client.delete_topic(&name)).await?;
            done(remote, "deleted", "topic", &name);
        }
    }
    Ok(())
}

pub async fn sub(remote: &Remote, command: SubCommand) -> anyhow::Result<()> {
    match command {
        SubCommand::Create(args) => {
            let spec = v1::SubscriptionSpec {
                topic: args.topic.clone(),
                filter: args.filter.clone(),
                start: match args.from {
                    Start::Earliest => v1::SubscriptionStart::Earliest,
                    Start::Now => v1::SubscriptionStart::Now,
                } as i32,
                delivery: Some(args.delivery.spec()),
            };
            remote
                .call(remote.client.create_subscription(&args.name, spec))
                .await?;
            done(remote, "created", "subscription", &args.name);
        }
        SubCommand::List { topic } => {
            // Subscriptions are queues fed by a topic: every queue that describes as one.
            let mut rows = Vec::new();
            for name in remote.call(remote.client.list_queues()).await? {
                let Ok(info) = remote.client.describe_subscription(&name).await else {
                    continue;
                };
                let spec = info.spec.unwrap_or_default();
                if topic.as_ref().is_some_and(|t| *t != spec.topic) {
                    continue;
                }
                let stats = info.queue.and_then(|q| q.stats).unwrap_or_default();
                rows.push((name, spec.topic, spec.filter, stats.ready, stats.in_flight));
            }
            if remote.json {
                let rows: Vec<_> = rows
                    .iter()
                    .map(|(name, topic, filter, ready, in_flight)| {
                        json!({ "name": name, "topic": topic, "filter": filter,
                                "ready": ready, "in_flight": in_flight })
                    })
                    .collect();
                print_json(&json!(rows));
            } else {
                let mut t = table(["subscription", "topic", "filter", "ready", "in flight"]);
                for (name, topic, filter, ready, in_flight) in rows {
                    t.add_row([
                        name,
                        topic,
                        filter,
                        ready.to_string(),
                        in_flight.to_string(),
                    ]);
                }
                out!("{t}");
            }
        }
        SubCommand::Describe { name } => {
            let info = remote
                .call(remote.client.describe_subscription(&name))
                .await?;
            let spec = info.spec.clone().unwrap_or_default();
            let queue = info.queue.clone().unwrap_or_default();
            if remote.json {
                print_json(&json!({
                    "name": name,
                    "topic": spec.topic,
                    "filter": spec.filter,
                    "start": enum_name(spec.start().as_str_name(), "SUBSCRIPTION_START_"),
                    "not_yet_considered": info.not_yet_considered,
                    "skipped_ranges": info.skipped.len(),
                    "queue": queue_json(&queue),
                }));
            } else {
                let mut rows = vec![
                    ("subscription", name.clone()),
                    ("topic", spec.topic.clone()),
                    ("filter", spec.filter.clone()),
                    (
                        "start",
                        enum_name(spec.start().as_str_name(), "SUBSCRIPTION_START_"),
                    ),
                    ("not yet considered", info.not_yet_considered.to_string()),
                    ("skipped ranges", info.skipped.len().to_string()),
                ];
                rows.extend(queue_rows(&queue).into_iter().skip(1));
                out!("{}", fields(&rows));
            }
        }
        SubCommand::Delete { name } => {
            remote
                .call(remote.client.delete_subscription(&name))
                .await?;
            done(remote, "deleted", "subscription", &name);
        }
    }
    Ok(())
}

pub async fn group(remote: &Remote, command: GroupCommand) -> anyhow::Result<()> {
    let (topic, group) = match command {
        GroupCommand::Describe { topic, group } => (topic, group),
        GroupCommand::Delete { topic, group } => {
            remote
                .call(remote.client.delete_group(&topic, &group))
                .await?;
            done(remote, "deleted", "group", &group);
            return Ok(());
        }
        GroupCommand::List { topic } => {
            let groups = remote
                .call(remote.client.list_groups(topic.as_deref()))
                .await?;
            if remote.json {
                let rows: Vec<_> = groups
                    .iter()
                    .map(|(topic, group)| json!({ "topic": topic, "group": group }))
                    .collect();
                print_json(&json!(rows));
            } else {
                let mut t = table(["topic", "group"]);
                for (topic, group) in &groups {
                    t.add_row([topic.clone(), group.clone()]);
                }
                out!("{t}");
            }
            return Ok(());
        }
    };
    let info = remote
        .call(remote.client.describe_group(&topic, &group))
        .await?;
    if remote.json {
        let partitions: Vec<_> = info
            .partitions
            .iter()
            .map(|p| {
                json!({
                    "partition": p.partition, "owner": p.owner, "committed": p.committed,
                    "end_offset": p.end_offset, "lag_records": p.lag_records,
                    "lag_ms": p.lag_ms, "skipped": p.skipped,
                })
            })
            .collect();
        let members: Vec<_> = info
            .members
            .iter()
            .map(|m| json!({ "member_id": m.member_id, "partitions": m.partitions }))
            .collect();
        print_json(&json!({
            "topic": info.topic, "group": info.group, "generation": info.generation,
            "members": members, "partitions": partitions,
        }));
    } else {
        out!(
            "group {} on topic {}, generation {}, {} member(s)",
            info.group,
            info.topic,
            info.generation,
            info.members.len()
        );
        let mut t = table(["partition", "owner", "committed", "end", "lag", "lag age"]);
        for p in &info.partitions {
            t.add_row([
                p.partition.to_string(),
                p.owner.clone().unwrap_or_else(|| "-".into()),
                p.committed.map_or_else(|| "-".into(), |c| c.to_string()),
                p.end_offset.to_string(),
                p.lag_records.to_string(),
                human_ms(Some(p.lag_ms.max(0) as u64)),
            ]);
        }
        out!("{t}");
    }
    Ok(())
}
