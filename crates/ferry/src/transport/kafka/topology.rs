//! Declaring and deleting: topics are created before the catalog records the declaration,
//! so a declaration found in the catalog has its topics.

use std::sync::Arc;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use super::capabilities::NAME;
use super::engine::{Shared, TIMEOUT, kafka_error};
use super::names;
use super::settings::{Entry, Policy};
use crate::declared::other_topic;
use crate::error::{Error, Result};
use crate::spec::{QueueDecl, Source, SubscriptionDecl, TopicDecl};

/// The retry topics and the dead-letter topic of source `name`.
fn side_topics(name: &str, policy: &Policy) -> Vec<(String, i32)> {
    let mut topics: Vec<(String, i32)> = (0..policy.rungs())
        .map(|rung| (names::retry_topic(name, rung), 1))
        .collect();
    if policy.dead_letter {
        topics.push((names::dead_letter_topic(name), 1));
    }
    topics
}

/// The refusal of declaring `name` as `kind` where it is something else.
fn taken(kind: &'static str, name: &str, existing: &Entry) -> Error {
    Error::Conflict {
        kind,
        name: name.to_owned(),
        problem: format!(
            "on kafka queues, topics and subscriptions share one namespace, and `{name}` is \
             a {}",
            existing.kind()
        ),
    }
}

pub(super) async fn declare_queue(shared: &Arc<Shared>, decl: &QueueDecl) -> Result<()> {
    shared.check_open()?;
    names::check_free(&decl.name)?;
    let policy = Policy::of(&decl.delivery)?;
    match shared.catalog.get(&decl.name).await? {
        Some(Entry::Queue { policy: existing }) => {
            return match policy.declared().differences(&existing.declared()) {
                None => Ok(()),
                Some(_) => {
                    Err(policy
                        .declared()
                        .conflict(&existing.declared(), "queue", &decl.name))
                }
            };
        }
        Some(other) => return Err(taken("queue", &decl.name, &other)),
        None => {}
    }
    let mut topics = vec![(decl.name.clone(), shared.endpoint.partitions)];
    topics.extend(side_topics(&decl.name, &policy));
    shared.create_topics(&topics, false).await?;
    shared
        .catalog
        .write(&shared.producer, &decl.name, Some(&Entry::Queue { policy }))
        .await
}

pub(super) async fn declare_topic(shared: &Arc<Shared>, decl: &TopicDecl) -> Result<()> {
    shared.check_open()?;
    names::check_free(&decl.name)?;
    let partitions = i32::try_from(decl.partitions)
        .map_err(|_| Error::invalid("partitions", "must fit a Kafka partition count"))?;
    match shared.catalog.get(&decl.name).await? {
        Some(Entry::Topic {
            partitions: existing,
        }) if existing == partitions => return Ok(()),
        Some(Entry::Topic {
            partitions: existing,
        }) => {
            return Err(Error::Conflict {
                kind: "topic",
                name: decl.name.clone(),
                problem: format!("partitions: declared {partitions}, existing {existing}"),
            });
        }
        Some(other) => return Err(taken("topic", &decl.name, &other)),
        None => {}
    }
    shared
        .create_topics(&[(decl.name.clone(), partitions)], false)
        .await?;
    shared
        .catalog
        .write(
            &shared.producer,
            &decl.name,
            Some(&Entry::Topic { partitions }),
        )
        .await
}

pub(super) async fn declare_subscription(
    shared: &Arc<Shared>,
    decl: &SubscriptionDecl,
) -> Result<()> {
    shared.check_open()?;
    names::check_free(&decl.name)?;
    let policy = Policy::of(&decl.delivery)?;
    let catalog = shared.catalog.read().await?;
    match catalog.get(&decl.name) {
        Some(Entry::Subscription {
            topic,
            policy: existing,
        }) => {
            if *topic != decl.topic {
                return Err(other_topic(&decl.name, &decl.topic, topic));
            }
            return match policy.declared().differences(&existing.declared()) {
                None => Ok(()),
                Some(_) => Err(policy.declared().conflict(
                    &existing.declared(),
                    "subscription",
                    &decl.name,
                )),
            };
        }
        Some(other) => return Err(taken("subscription", &decl.name, other)),
        None => {}
    }
    if !matches!(catalog.get(&decl.topic), Some(Entry::Topic { .. })) {
        return Err(Error::NotFound {
            kind: "topic",
            name: decl.topic.clone(),
        });
    }
    shared
        .create_topics(&side_topics(&decl.name, &policy), false)
        .await?;
    start_at_the_end(shared, &decl.topic, &names::group(&decl.name)).await?;
    shared
        .catalog
        .write(
            &shared.producer,
            &decl.name,
            Some(&Entry::Subscription {
                topic: decl.topic.clone(),
                policy,
            }),
        )
        .await
}

/// Commits the topic's end offsets for the subscription's group, so that it gets what is
/// published from now on and nothing from before.
async fn start_at_the_end(shared: &Arc<Shared>, topic: &str, group: &str) -> Result<()> {
    let partitions = shared
        .partitions(topic)
        .await?
        .ok_or_else(|| Error::NotFound {
            kind: "topic",
            name: topic.to_owned(),
        })?;
    let consumer: BaseConsumer = shared
        .config()
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .map_err(kafka_error)?;
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut tpl = TopicPartitionList::new();
        for partition in 0..partitions {
            let (_, high) = consumer
                .fetch_watermarks(&topic, partition, TIMEOUT)
                .map_err(kafka_error)?;
            tpl.add_partition_offset(&topic, partition, Offset::Offset(high))
                .map_err(kafka_error)?;
        }
        consumer.commit(&tpl, CommitMode::Sync).map_err(kafka_error)
    })
    .await
    .map_err(|e| Error::transport(NAME, e))?
}

pub(super) async fn delete(shared: &Arc<Shared>, source: &Source) -> Result<()> {
    shared.check_open()?;
    match source {
        Source::Queue(name) => {
            let Entry::Queue { policy } = shared.entry(name, "queue").await? else {
                unreachable!("entry answers only its kind");
            };
            let mut topics = vec![name.clone()];
            topics.extend((0..policy.rungs()).map(|rung| names::retry_topic(name, rung)));
            shared.catalog.write(&shared.producer, name, None).await?;
            shared.delete_topics(&topics).await?;
            shared.delete_group(&names::group(name)).await
        }
        Source::Subscription { topic, name } => {
            let entry = shared.entry(name, "subscription").await?;
            let Entry::Subscription {
                topic: existing,
                policy,
            } = entry
            else {
                unreachable!("entry answers only its kind");
            };
            if existing != *topic {
                return Err(Error::NotFound {
                    kind: "subscription",
                    name: format!("{topic}/{name}"),
                });
            }
            let topics: Vec<String> = (0..policy.rungs())
                .map(|rung| names::retry_topic(name, rung))
                .collect();
            shared.catalog.write(&shared.producer, name, None).await?;
            shared.delete_topics(&topics).await?;
            shared.delete_group(&names::group(name)).await
        }
        Source::DeadLetters(origin) => {
            let name = origin.name();
            let topic = names::dead_letter_topic(name);
            let missing = shared.delete_topics(std::slice::from_ref(&topic)).await?;
            if !missing.is_empty() {
                return Err(Error::NotFound {
                    kind: "queue",
                    name: topic,
                });
            }
            shared.delete_group(&names::dead_letter_group(name)).await
        }
    }
}

pub(super) async fn delete_topic(shared: &Arc<Shared>, name: &str) -> Result<()> {
    shared.check_open()?;
    let catalog = shared.catalog.read().await?;
    if !matches!(catalog.get(name), Some(Entry::Topic { .. })) {
        return Err(Error::NotFound {
            kind: "topic",
            name: name.to_owned(),
        });
    }
    let subscriptions: Vec<&String> = catalog
        .iter()
        .filter(|(_, e)| matches!(e, Entry::Subscription { topic, .. } if topic == name))
        .map(|(n, _)| n)
        .collect();
    if !subscriptions.is_empty() {
        return Err(Error::Conflict {
            kind: "topic",
            name: name.to_owned(),
            problem: format!(
                "it has {} subscription(s); delete them first",
                subscriptions.len()
            ),
        });
    }
    shared.catalog.write(&shared.producer, name, None).await?;
    shared.delete_topics(&[name.to_owned()]).await?;
    Ok(())
}
