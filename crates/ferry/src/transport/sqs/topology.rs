//! Declaring and deleting queues, topics and subscriptions on SQS and SNS.
//!
//! A source is its dead-letter queue, then its live queue whose RedrivePolicy points there
//! and whose tags keep the declaration, then (for a subscription) the SNS subscription.
//! Each step is idempotent, so the crash windows between them close on the next
//! declaration: a dead-letter queue without its live queue is adopted by it, a
//! subscription's queue without its SNS subscription gets subscribed.

use std::time::Duration;

use aws_sdk_sqs::types::QueueAttributeName as A;

use super::aws::{self, NAME_TAKEN, NO_QUEUE, NO_TOPIC};
use super::capabilities::NAME;
use super::engine::{Found, Shared, Sqs, not_found_or, origin_names, seconds_up};
use super::names::{self, QueueNames};
use super::settings::Settings;
use crate::declared;
use crate::error::{Error, Result};
use crate::spec::{DeliveryPolicy, KeyOrdering, QueueDecl, Source, SubscriptionDecl, TopicDecl};

/// SQS's longest visibility timeout: the longest lease, nack delay and extension.
pub(super) const MAX_VISIBILITY: Duration = Duration::from_secs(12 * 60 * 60);
/// SQS's longest DelaySeconds.
pub(super) const MAX_DELAY: Duration = Duration::from_secs(15 * 60);
/// SQS's deduplication interval, fixed.
const DEDUP_INTERVAL: Duration = Duration::from_secs(5 * 60);
/// SQS's longest retention, 14 days: messages older than this are dropped by SQS.
const RETENTION_SECS: &str = "1209600";

/// Refuses what SQS cannot keep of a delivery policy, before anything is created.
fn check_delivery(delivery: &DeliveryPolicy) -> Result<()> {
    let lease = delivery.lease;
    if lease.subsec_nanos() != 0 || lease > MAX_VISIBILITY {
        return Err(Error::unsupported(
            NAME,
            format!("a lease of {lease:?}"),
            "SQS visibility timeouts are whole seconds from 1 s to 12 h",
        ));
    }
    if delivery.backoff.cap > MAX_VISIBILITY {
        return Err(Error::unsupported(
            NAME,
            format!("a backoff cap of {:?}", delivery.backoff.cap),
            "a nack hides the message by its visibility timeout, at most 12 h on SQS",
        ));
    }
    if delivery.max_delay > MAX_DELAY {
        return Err(Error::unsupported(
            NAME,
            format!("a max_delay of {:?}", delivery.max_delay),
            "SQS delays a message by at most 15 minutes (DelaySeconds); declare max_delay of \
             15 min or less",
        ));
    }
    Ok(())
}

pub(super) async fn declare_queue(shared: &Shared, decl: &QueueDecl) -> Result<()> {
    shared.check_open()?;
    check_delivery(&decl.delivery)?;
    if let Some(window) = decl.dedup_window
        && window > DEDUP_INTERVAL
    {
        return Err(Error::unsupported(
            NAME,
            format!("a dedup window of {window:?}"),
            "SQS deduplicates within 5 minutes, no longer",
        ));
    }
    let names = QueueNames::of_queue(&decl.name);
    names.check_length(&decl.name)?;
    let dedup = decl.dedup_window.filter(|w| !w.is_zero());
    let settings = Settings::new("queue", &decl.name, None, &decl.delivery, dedup);
    declare_source(shared, &names, "queue", &decl.name, &settings, None).await
}

pub(super) async fn declare_topic(shared: &Shared, decl: &TopicDecl) -> Result<()> {
    shared.check_open()?;
    decl.validate()?;
    decl.unpartitioned(
        NAME,
        "an SNS topic is not partitioned; declare it with 1 partition",
    )?;
    let out = shared
        .sns
        .create_topic()
        .name(names::topic(&decl.name)?)
        .send()
        .await
        .map_err(|e| aws::failure(e).into_error())?;
    if let Some(arn) = out.topic_arn() {
        shared.remember_topic(&decl.name, arn);
    }
    Ok(())
}

pub(super) async fn declare_subscription(shared: &Shared, decl: &SubscriptionDecl) -> Result<()> {
    shared.check_open()?;
    check_delivery(&decl.delivery)?;
    if decl.delivery.ordering == KeyOrdering::PerKey {
        return Err(Error::unsupported(
            NAME,
            "ordering keys on a subscription",
            "they need an SNS FIFO topic and FIFO queues; use a queue declared with per-key \
             ordering",
        ));
    }
    let topic_arn = shared
        .topic_arn(&decl.topic)
        .await?
        .ok_or_else(|| Error::NotFound {
            kind: "topic",
            name: decl.topic.clone(),
        })?;
    let names = QueueNames::of_subscription(&decl.name);
    names.check_length(&decl.name)?;
    let settings = Settings::new(
        "subscription",
        &decl.name,
        Some(&decl.topic),
        &decl.delivery,
        None,
    );
    declare_source(
        shared,
        &names,
        "subscription",
        &decl.name,
        &settings,
        Some(&topic_arn),
    )
    .await?;
    let url = shared
        .queue_url(&names.live(false))
        .await?
        .ok_or_else(|| Error::NotFound {
            kind: "subscription",
            name: decl.name.clone(),
        })?;
    let queue_arn = shared.queue_arn(&url).await?;
    // Idempotent: the same topic, endpoint and attributes answer the same subscription.
    shared
        .sns
        .subscribe()
        .topic_arn(&topic_arn)
        .protocol("sqs")
        .endpoint(queue_arn)
        .attributes("RawMessageDelivery", "true")
        .return_subscription_arn(true)
        .send()
        .await
        .map_err(|e| aws::failure(e).into_error())?;
    Ok(())
}

/// Creates the dead-letter and live queues of a source, or checks the existing ones were
/// declared the same.
async fn declare_source(
    shared: &Shared,
    names: &QueueNames,
    kind: &'static str,
    name: &str,
    settings: &Settings,
    topic_arn: Option<&str>,
) -> Result<()> {
    if let Some(found) = shared.live(names).await? {
        return compare(shared, &found, kind, name, settings).await;
    }
    let fifo = settings.fifo();
    let mut attributes = vec![
        (A::VisibilityTimeout, seconds_up(settings.lease).to_string()),
        (A::MessageRetentionPeriod, RETENTION_SECS.to_owned()),
    ];
    if fifo {
        attributes.push((A::FifoQueue, "true".into()));
        attributes.push((A::ContentBasedDeduplication, "false".into()));
    }
    if settings.dead_letter {
        let mut dlq_attributes = vec![(A::MessageRetentionPeriod, RETENTION_SECS.to_owned())];
        if fifo {
            dlq_attributes.push((A::FifoQueue, "true".into()));
        }
        let dlq_name = names.dead_letters(fifo);
        let dlq_url = create(shared, &dlq_name, dlq_attributes, Default::default())
            .await?
            .ok_or_else(|| Error::Conflict {
                kind,
                name: name.to_owned(),
                problem: format!(
                    "its dead-letter queue `{dlq_name}` exists on SQS with other attributes"
                ),
            })?;
        let dlq_arn = shared.queue_arn(&dlq_url).await?;
        attributes.push((
            A::RedrivePolicy,
            serde_json::json!({
                "deadLetterTargetArn": dlq_arn,
                "maxReceiveCount": settings.max_deliveries,
            })
            .to_string(),
        ));
    }
    if let Some(topic_arn) = topic_arn {
        // On AWS a queue takes SNS's sends only when its policy allows them.
        attributes.push((A::Policy, sns_may_send(topic_arn)));
    }
    match create(shared, &names.live(fifo), attributes, settings.to_tags()).await? {
        Some(_) => Ok(()),
        // Declared meanwhile by another process, with other attributes.
        None => {
            let found = shared.live(names).await?.ok_or_else(|| Error::Conflict {
                kind,
                name: name.to_owned(),
                problem: "SQS refused its queue's name but has no such queue".into(),
            })?;
            compare(shared, &found, kind, name, settings).await
        }
    }
}

/// `Conflict` unless the existing source was declared with `settings`.
async fn compare(
    shared: &Shared,
    found: &Found,
    kind: &'static str,
    name: &str,
    settings: &Settings,
) -> Result<()> {
    let existing = shared.settings(&found.url, kind, name).await?;
    if let (Some(declared), Some(existing)) = (&settings.topic, &existing.topic)
        && declared != existing
    {
        return Err(declared::other_topic(name, declared, existing));
    }
    let (want, have) = (settings.declared(), existing.declared());
    if want.differences(&have).is_some() {
        return Err(want.conflict(&have, kind, name));
    }
    Ok(())
}

/// CreateQueue; `None` when the name is taken with other attributes.
async fn create(
    shared: &Shared,
    sqs_name: &str,
    attributes: Vec<(A, String)>,
    tags: std::collections::HashMap<String, String>,
) -> Result<Option<String>> {
    let out = shared
        .sqs
        .create_queue()
        .queue_name(sqs_name)
        .set_attributes(Some(attributes.into_iter().collect()))
        .set_tags((!tags.is_empty()).then_some(tags))
        .send()
        .await;
    match out {
        Ok(out) => {
            let url = out.queue_url().unwrap_or_default().to_owned();
            shared.remember(sqs_name, &url);
            Ok(Some(url))
        }
        Err(e) => {
            let f = aws::failure(e);
            if f.is(NAME_TAKEN) {
                Ok(None)
            } else {
                Err(f.into_error())
            }
        }
    }
}

/// The queue policy that lets topic `topic_arn` send to the queue.
fn sns_may_send(topic_arn: &str) -> String {
    serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Service": "sns.amazonaws.com"},
            "Action": "sqs:SendMessage",
            "Resource": "*",
            "Condition": {"ArnEquals": {"aws:SourceArn": topic_arn}},
        }],
    })
    .to_string()
}

pub(super) async fn delete(sqs: &Sqs, source: &Source) -> Result<()> {
    let shared = &sqs.shared;
    shared.check_open()?;
    match source {
        Source::Queue(_) | Source::Subscription { .. } => {
            let (found, _) = sqs.source(source).await?;
            if let Source::Subscription { topic, .. } = source
                && let Some(topic_arn) = shared.topic_arn(topic).await?
            {
                unsubscribe(shared, &topic_arn, &shared.queue_arn(&found.url).await?).await?;
            }
            delete_queue(shared, &found.url, source).await
        }
        Source::DeadLetters(origin) => {
            let names = origin_names(origin);
            for fifo in [false, true] {
                if let Some(url) = shared.dead_letters(&names, fifo).await? {
                    return delete_queue(shared, &url, source).await;
                }
            }
            Err(Error::NotFound {
                kind: "queue",
                name: format!("{}.dlq", origin.name()),
            })
        }
    }
}

async fn delete_queue(shared: &Shared, url: &str, source: &Source) -> Result<()> {
    let kind = match source {
        Source::Subscription { .. } => "subscription",
        _ => "queue",
    };
    shared.forget(url);
    shared
        .sqs
        .delete_queue()
        .queue_url(url)
        .send()
        .await
        .map_err(|e| not_found_or(aws::failure(e), kind, source.name()))?;
    Ok(())
}

/// Removes every SNS subscription of `topic_arn` delivering to `queue_arn`.
async fn unsubscribe(shared: &Shared, topic_arn: &str, queue_arn: &str) -> Result<()> {
    for (subscription, endpoint) in subscriptions(shared, topic_arn).await? {
        if endpoint == queue_arn {
            shared
                .sns
                .unsubscribe()
                .subscription_arn(subscription)
                .send()
                .await
                .map_err(|e| aws::failure(e).into_error())?;
        }
    }
    Ok(())
}

/// The (subscription ARN, endpoint) pairs of a topic.
async fn subscriptions(shared: &Shared, topic_arn: &str) -> Result<Vec<(String, String)>> {
    let mut found = Vec::new();
    let mut token = None;
    loop {
        let out = shared
            .sns
            .list_subscriptions_by_topic()
            .topic_arn(topic_arn)
            .set_next_token(token)
            .send()
            .await
            .map_err(|e| aws::failure(e).into_error())?;
        for s in out.subscriptions() {
            if let (Some(arn), Some(endpoint)) = (s.subscription_arn(), s.endpoint()) {
                found.push((arn.to_owned(), endpoint.to_owned()));
            }
        }
        match out.next_token() {
            Some(next) if !next.is_empty() => token = Some(next.to_owned()),
            _ => return Ok(found),
        }
    }
}

pub(super) async fn delete_topic(shared: &Shared, name: &str) -> Result<()> {
    shared.check_open()?;
    let not_found = || Error::NotFound {
        kind: "topic",
        name: name.to_owned(),
    };
    let arn = shared.topic_arn(name).await?.ok_or_else(not_found)?;
    let subscribed = subscriptions(shared, &arn).await?;
    if !subscribed.is_empty() {
        return Err(Error::Conflict {
            kind: "topic",
            name: name.to_owned(),
            problem: format!(
                "it has {} subscription(s); delete them first",
                subscribed.len()
            ),
        });
    }
    shared.forget_topic(&arn);
    shared
        .sns
        .delete_topic()
        .topic_arn(&arn)
        .send()
        .await
        .map_err(|e| {
            let f = aws::failure(e);
            if f.is(NO_TOPIC) || f.is(NO_QUEUE) {
                not_found()
            } else {
                f.into_error()
            }
        })?;
    Ok(())
}
